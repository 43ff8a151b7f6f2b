//! Source rows (Arrow, the source's lossless types) as the values a target dialect
//! takes; never as SQL text. PostgreSQL gets every value as its type's text input
//! (loaded with `COPY`, which hands it to the column type's input function: a MySQL
//! `TINYINT(1)` value `1` into `boolean`, `0101` into `bit(4)`). MySQL gets the typed
//! parameters of its binary protocol: numbers as numbers, binary values as bytes, the
//! rest as text.

use crate::sync::error::SyncError;
use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::{DataType as A, TimeUnit};
use dialects::Dialect;
use std::fmt::Write;

/// How one target column's values are written.
#[derive(Debug, Clone, Default)]
pub struct ColSpec {
    /// The target column name, quoted for the target.
    pub ident: String,
    /// BIT(n) width (PostgreSQL writes bit strings of that width).
    pub bits: Option<u32>,
    /// A boolean column (MySQL TINYINT(1)).
    pub boolean: bool,
    /// A uuid column (PostgreSQL `uuid`, MySQL `CHAR(36)`): 16 source bytes are
    /// written as the uuid's text.
    pub uuid: bool,
    /// A PostgreSQL array (its text, `{1,NULL,3}`) into a target that stores
    /// arrays as JSON (MySQL): how its elements are written.
    pub array: Option<Element>,
    /// A PostgreSQL geometric value (its text, `(1,2)`) into a MySQL geometry
    /// column: written as MySQL's geometry bytes.
    pub geometry: Option<Geometric>,
    /// A generated column the target computes itself (the source's dialect): never
    /// written, its value the target's own.
    pub computed: bool,
}

/// PostgreSQL's geometric types that MySQL geometries hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Geometric {
    Point,
    Lseg,
    Box,
    Path,
    Polygon,
}

impl Geometric {
    pub fn of(t: &ddl_core::DataType) -> Option<Geometric> {
        let ddl_core::DataType::Spatial { kind } = t else {
            return None;
        };
        Some(match kind.as_str() {
            "point" => Geometric::Point,
            "lseg" => Geometric::Lseg,
            "box" => Geometric::Box,
            "path" => Geometric::Path,
            "polygon" => Geometric::Polygon,
            _ => return None,
        })
    }
}

/// How an array's elements are written as JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Element {
    /// Numbers as JSON numbers (NaN and infinities as strings).
    Number,
    Bool,
    Text,
}

impl Element {
    /// The JSON form of elements of IR type `t` (None: not an array).
    pub fn of_array(t: &ddl_core::DataType) -> Option<Element> {
        use ddl_core::DataType as T;
        let T::Array { element } = t else {
            return None;
        };
        Some(match **element {
            T::Int { .. } | T::Decimal { .. } | T::Float { .. } => Element::Number,
            T::Boolean => Element::Bool,
            _ => Element::Text,
        })
    }
}

/// One value on its way to a target (a view into a `Row`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Val<'a> {
    Null,
    /// The column's default (a column the source table lacks, when several source
    /// tables route into one target table).
    Default,
    Int(i64),
    UInt(u64),
    Float(f64),
    Text(&'a str),
    Bytes(&'a [u8]),
}

/// A row's values packed into one allocation (a tag byte per value, then its
/// payload): a pending change costs one allocation, not one per value, and rows
/// hash and compare as bytes (floats by their bits: a key folds with itself).
/// Shared, not copied: a checkpoint's statements hold the pending rows themselves.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Row(std::sync::Arc<[u8]>);

const NULL: u8 = 0;
const DEFAULT: u8 = 1;
const INT: u8 = 2;
const UINT: u8 = 3;
const FLOAT: u8 = 4;
const TEXT: u8 = 5;
const BYTES: u8 = 6;

/// Builds a `Row`.
#[derive(Default)]
pub struct RowBuf(Vec<u8>);

impl RowBuf {
    pub fn push(&mut self, v: Val<'_>) {
        let b = &mut self.0;
        match v {
            Val::Null => b.push(NULL),
            Val::Default => b.push(DEFAULT),
            Val::Int(x) => {
                b.push(INT);
                b.extend_from_slice(&x.to_le_bytes());
            }
            Val::UInt(x) => {
                b.push(UINT);
                b.extend_from_slice(&x.to_le_bytes());
            }
            Val::Float(x) => {
                b.push(FLOAT);
                b.extend_from_slice(&x.to_bits().to_le_bytes());
            }
            Val::Text(s) => self.var(TEXT, s.as_bytes()),
            Val::Bytes(x) => self.var(BYTES, x),
        }
    }

    fn var(&mut self, tag: u8, x: &[u8]) {
        self.0.push(tag);
        self.0.extend_from_slice(&(x.len() as u64).to_le_bytes());
        self.0.extend_from_slice(x);
    }

    /// One value as `Row::span` gives it.
    pub fn raw(&mut self, encoded: &[u8]) {
        self.0.extend_from_slice(encoded);
    }

    /// Every value of `r`, after those already here.
    pub fn extend(&mut self, r: &Row) {
        self.0.extend_from_slice(&r.0);
    }

    pub fn finish(self) -> Row {
        Row(self.0.into())
    }
}

impl Row {
    pub fn of<'a>(vals: impl IntoIterator<Item = Val<'a>>) -> Row {
        let mut b = RowBuf::default();
        for v in vals {
            b.push(v);
        }
        b.finish()
    }

    pub fn vals(&self) -> Vals<'_> {
        Vals(&self.0)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The encoded values (equal rows, equal bytes).
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// Value `i` of encoded values `row`, encoded (its tag and payload), if there.
    pub fn span(row: &[u8], i: usize) -> Option<&[u8]> {
        let mut at = 0;
        for _ in 0..i {
            at += value_len(row.get(at..)?)?;
        }
        let n = value_len(row.get(at..)?)?;
        row.get(at..at + n)
    }

    /// Bytes the row costs in memory (its allocation with the reference counts,
    /// and one pointer to it).
    pub fn size(&self) -> usize {
        self.0.len() + 32
    }

    /// The values at `cols` (indexes, in that order) as a row of their own: a key
    /// out of a full row, as `row` would render the key columns.
    pub fn project(&self, cols: &[usize]) -> Option<Row> {
        let mut b = RowBuf(Vec::with_capacity(self.0.len()));
        for &i in cols {
            b.raw(Row::span(&self.0, i)?);
        }
        Some(Row(b.0.as_slice().into()))
    }

    /// Whether a value is the column's default (the source lacks the column).
    pub fn has_default(&self) -> bool {
        self.vals().any(|v| v == Val::Default)
    }
}

/// The length of the encoded value at the start of `b`.
fn value_len(b: &[u8]) -> Option<usize> {
    Some(match *b.first()? {
        NULL | DEFAULT => 1,
        INT | UINT | FLOAT => 9,
        _ => 9 + u64::from_le_bytes(b.get(1..9)?.try_into().ok()?) as usize,
    })
}

/// The values of a `Row`, in order.
pub struct Vals<'a>(&'a [u8]);

impl<'a> Iterator for Vals<'a> {
    type Item = Val<'a>;

    fn next(&mut self) -> Option<Val<'a>> {
        let (one, rest) = self.0.split_at(value_len(self.0)?);
        self.0 = rest;
        let (&tag, payload) = one.split_first()?;
        let word = || u64::from_le_bytes(payload[..8].try_into().expect("8 bytes"));
        Some(match tag {
            NULL => Val::Null,
            DEFAULT => Val::Default,
            INT => Val::Int(word() as i64),
            UINT => Val::UInt(word()),
            FLOAT => Val::Float(f64::from_bits(word())),
            // Built from a &str by `RowBuf::push`.
            TEXT => Val::Text(std::str::from_utf8(&payload[8..]).expect("text values are UTF-8")),
            _ => Val::Bytes(&payload[8..]),
        })
    }
}

/// Row `row` of `col` as a value of dialect `d`, onto `out`.
pub fn push(
    out: &mut RowBuf,
    text: &mut String,
    d: Dialect,
    col: &ArrayRef,
    row: usize,
    spec: &ColSpec,
) -> Result<(), SyncError> {
    if col.is_null(row) {
        out.push(Val::Null);
        return Ok(());
    }
    if spec.uuid {
        if let Some(b) = uuid_bytes(col, row) {
            text.clear();
            for (i, x) in b.iter().enumerate() {
                if matches!(i, 4 | 6 | 8 | 10) {
                    text.push('-');
                }
                let _ = write!(text, "{x:02x}");
            }
            out.push(Val::Text(text));
            return Ok(());
        }
    }
    if d == Dialect::Postgres {
        text.clear();
        pg_text(text, col, row, spec)?;
        out.push(Val::Text(text));
        return Ok(());
    }
    macro_rules! int {
        ($t:ty) => {
            Val::Int(col.as_primitive::<$t>().value(row) as i64)
        };
    }
    let v = match col.data_type() {
        A::Int8 => int!(Int8Type),
        A::Int16 => int!(Int16Type),
        A::Int32 => int!(Int32Type),
        A::Int64 => int!(Int64Type),
        A::UInt8 => int!(UInt8Type),
        A::UInt16 => int!(UInt16Type),
        A::UInt32 => int!(UInt32Type),
        A::UInt64 => Val::UInt(col.as_primitive::<UInt64Type>().value(row)),
        A::Float32 => my_float(col.as_primitive::<Float32Type>().value(row) as f64)?,
        A::Float64 => my_float(col.as_primitive::<Float64Type>().value(row))?,
        A::Boolean => Val::Int(col.as_boolean().value(row) as i64),
        A::Utf8 if spec.array.is_some() => {
            let s = col.as_string::<i32>().value(row);
            text.clear();
            pg_array_json(s, spec.array.expect("an array"), text)
                .map_err(|e| format!("array {s:?}: {e}"))?;
            Val::Text(text)
        }
        A::Utf8 if spec.geometry.is_some() => {
            let s = col.as_string::<i32>().value(row);
            let g = pg_geometry(s, spec.geometry.expect("geometric"))
                .map_err(|e| format!("geometric value {s:?}: {e}"))?;
            out.push(Val::Bytes(&g));
            return Ok(());
        }
        // A varying bit string (its text: a source keeps its length) into BIT(n).
        A::Utf8 if spec.bits.is_some_and(|n| n <= 64) => {
            bit_text(col.as_string::<i32>().value(row))?
        }
        A::Utf8 => Val::Text(col.as_string::<i32>().value(row)),
        A::LargeUtf8 => Val::Text(col.as_string::<i64>().value(row)),
        A::Binary => Val::Bytes(col.as_binary::<i32>().value(row)),
        A::LargeBinary => Val::Bytes(col.as_binary::<i64>().value(row)),
        _ => {
            text.clear();
            shared_text(text, col, row, false)?;
            Val::Text(text)
        }
    };
    out.push(v);
    Ok(())
}

/// Values of batch `b` that a MySQL target column cannot take as they are: a
/// float's NaN or infinity, a bit string longer than 64 bits for BIT(n), text that
/// is not the PostgreSQL array or geometric value its column holds. Per value its
/// row, its `cols` index and why (never the value). Other types always render.
pub fn mysql_refusals(
    b: &RecordBatch,
    cols: &[(Option<usize>, &ColSpec)],
) -> Vec<(usize, usize, &'static str)> {
    let mut out = Vec::new();
    let mut buf = RowBuf::default();
    let mut text = String::new();
    for (j, (c, spec)) in cols.iter().enumerate() {
        let Some(c) = c else { continue };
        let col = b.column(*c);
        // Floats: checked in place (no rendering on the write path's hot loop).
        let infinite: Option<Vec<bool>> = match col.data_type() {
            A::Float32 => Some(
                col.as_primitive::<Float32Type>()
                    .iter()
                    .map(|v| v.is_some_and(|v| !v.is_finite()))
                    .collect(),
            ),
            A::Float64 => Some(
                col.as_primitive::<Float64Type>()
                    .iter()
                    .map(|v| v.is_some_and(|v| !v.is_finite()))
                    .collect(),
            ),
            _ => None,
        };
        if let Some(bad) = infinite {
            out.extend(
                bad.iter()
                    .enumerate()
                    .filter(|(_, b)| **b)
                    .map(|(r, _)| (r, j, "NaN or infinity, which MySQL cannot store")),
            );
            continue;
        }
        // Dates before 1 AD: MySQL's year 0 is no year of the calendar (PostgreSQL's
        // 1 BC written as 0000 was taken, silently; a hostile tester).
        let first_day = crate::calendar::days_from_civil(1, 1, 1);
        let ancient: Option<Vec<bool>> = match col.data_type() {
            A::Date32 => Some(
                col.as_primitive::<Date32Type>()
                    .iter()
                    .map(|v| v.is_some_and(|d| (d as i64) < first_day))
                    .collect(),
            ),
            A::Timestamp(TimeUnit::Microsecond, _) => Some(
                col.as_primitive::<TimestampMicrosecondType>()
                    .iter()
                    .map(|v| v.is_some_and(|us| us.div_euclid(86_400_000_000) < first_day))
                    .collect(),
            ),
            _ => None,
        };
        if let Some(bad) = ancient {
            out.extend(
                bad.iter()
                    .enumerate()
                    .filter(|(_, b)| **b)
                    .map(|(r, _)| (r, j, "a date before 1 AD, which MySQL cannot store")),
            );
            continue;
        }
        let why = match col.data_type() {
            A::Utf8 if spec.array.is_some() => "not a PostgreSQL array of its element type",
            A::Utf8 if spec.geometry.is_some() => "not a PostgreSQL value of its geometric type",
            A::Utf8 if spec.bits.is_some_and(|n| n <= 64) => {
                "a bit string that is not a BIT(n) value of up to 64 bits"
            }
            _ => continue,
        };
        for r in 0..b.num_rows() {
            buf.0.clear();
            if push(&mut buf, &mut text, Dialect::MySql, col, r, spec).is_err() {
                out.push((r, j, why));
            }
        }
    }
    out
}

/// PostgreSQL's text of an array (`{1,NULL,3}`, `{{"a b",c},{d,e}}`, with an
/// optional `[0:2]=` bounds prefix) as a JSON array (nested for each dimension).
pub fn pg_array_json(s: &str, e: Element, out: &mut String) -> Result<(), String> {
    let b = s.as_bytes();
    let mut i = 0;
    if b.first() == Some(&b'[') {
        i = s.find('=').ok_or("a bounds prefix without '='")? + 1;
    }
    let mut depth = 0usize;
    // After a value or a closing brace: a delimiter or a brace comes next.
    let mut after_value = false;
    while i < b.len() {
        match b[i] {
            b'{' => {
                if after_value {
                    return Err(format!("'{{' at byte {i} after a value"));
                }
                out.push('[');
                depth += 1;
                i += 1;
            }
            b'}' => {
                if depth == 0 {
                    return Err(format!("unbalanced '}}' at byte {i}"));
                }
                out.push(']');
                depth -= 1;
                after_value = true;
                i += 1;
                if depth == 0 {
                    break;
                }
            }
            b',' if after_value => {
                out.push(',');
                after_value = false;
                i += 1;
            }
            c if c.is_ascii_whitespace() => i += 1,
            b'"' => {
                // A quoted element: always a string's text (quoted numbers are numbers).
                let mut v = String::new();
                i += 1;
                loop {
                    let Some(&c) = b.get(i) else {
                        return Err("an unterminated quoted element".into());
                    };
                    match c {
                        b'"' => {
                            i += 1;
                            break;
                        }
                        b'\\' => {
                            let start = i + 1;
                            let ch = s[start..].chars().next().ok_or("a trailing backslash")?;
                            v.push(ch);
                            i = start + ch.len_utf8();
                        }
                        _ => {
                            let ch = s[i..].chars().next().expect("a char");
                            v.push(ch);
                            i += ch.len_utf8();
                        }
                    }
                }
                json_element(&v, e, out);
                after_value = true;
            }
            _ => {
                let start = i;
                while i < b.len() && !matches!(b[i], b',' | b'}') {
                    i += 1;
                }
                let v = s[start..i].trim_end();
                match v.eq_ignore_ascii_case("NULL") {
                    true => out.push_str("null"),
                    false => json_element(v, e, out),
                }
                after_value = true;
            }
        }
    }
    if depth != 0 || i != b.len() {
        return Err("not a PostgreSQL array".into());
    }
    Ok(())
}

/// One array element as JSON.
fn json_element(v: &str, e: Element, out: &mut String) {
    match e {
        Element::Number if v.parse::<f64>().is_ok_and(f64::is_finite) => out.push_str(v),
        Element::Bool if v == "t" || v == "true" => out.push_str("true"),
        Element::Bool if v == "f" || v == "false" => out.push_str("false"),
        _ => out.push_str(&serde_json::Value::String(v.to_owned()).to_string()),
    }
}

/// PostgreSQL's text of a geometric value of type `g` (a point `(x,y)`, line
/// segment `[(x1,y1),(x2,y2)]`, box `(x1,y1),(x2,y2)`, path open `[...]` or closed
/// `(...)`, polygon `((x,y),...)`) as MySQL's geometry bytes (SRID 0, then
/// little-endian WKB): a point, a linestring (a closed path ends where it began)
/// or a polygon (a box's corners).
pub fn pg_geometry(s: &str, g: Geometric) -> Result<Vec<u8>, String> {
    let t = s.trim();
    let nums: Vec<f64> = t
        .split(|c: char| "()[]<>{},".contains(c) || c.is_whitespace())
        .filter(|p| !p.is_empty())
        .map(|p| p.parse::<f64>().map_err(|e| format!("{p:?}: {e}")))
        .collect::<Result<_, _>>()?;
    let mut points: Vec<(f64, f64)> = nums.chunks(2).map(|p| (p[0], p[1])).collect();
    let pairs = !nums.is_empty() && nums.len().is_multiple_of(2);
    let want = |ok: bool, what: &str| match ok && pairs {
        true => Ok(()),
        false => Err(format!("not a {what}")),
    };
    let mut out = vec![0u8; 4];
    out.push(1);
    let put = |out: &mut Vec<u8>, kind: u32, rings: &[&[(f64, f64)]]| {
        out.extend_from_slice(&kind.to_le_bytes());
        if kind == 3 {
            out.extend_from_slice(&(rings.len() as u32).to_le_bytes());
        }
        for ps in rings {
            if kind != 1 {
                out.extend_from_slice(&(ps.len() as u32).to_le_bytes());
            }
            for (x, y) in *ps {
                out.extend_from_slice(&x.to_le_bytes());
                out.extend_from_slice(&y.to_le_bytes());
            }
        }
    };
    match g {
        Geometric::Point => {
            want(points.len() == 1, "point")?;
            put(&mut out, 1, &[&points]);
        }
        Geometric::Lseg => {
            want(points.len() == 2, "line segment")?;
            put(&mut out, 2, &[&points]);
        }
        Geometric::Box => {
            want(points.len() == 2, "box")?;
            let (a, b) = (points[0], points[1]);
            let (lx, hx, ly, hy) = (a.0.min(b.0), a.0.max(b.0), a.1.min(b.1), a.1.max(b.1));
            put(
                &mut out,
                3,
                &[&[(lx, ly), (hx, ly), (hx, hy), (lx, hy), (lx, ly)]],
            );
        }
        Geometric::Path => {
            want(!points.is_empty(), "path")?;
            if t.starts_with('(') {
                points.push(points[0]);
            }
            put(&mut out, 2, &[&points]);
        }
        Geometric::Polygon => {
            want(!points.is_empty(), "polygon")?;
            points.push(points[0]);
            put(&mut out, 3, &[&points]);
        }
    }
    Ok(out)
}

/// A bit string's text (`0101`) as the number MySQL's BIT takes.
fn bit_text(s: &str) -> Result<Val<'_>, SyncError> {
    match s.len() <= 64 && s.bytes().all(|c| c == b'0' || c == b'1') {
        true => Ok(Val::UInt(u64::from_str_radix(s, 2).unwrap_or(0))),
        false => Err(format!("bit string {s:?} is not a BIT(n) value of up to 64 bits").into()),
    }
}

/// A 16-byte binary value (a uuid as the sources read it).
fn uuid_bytes(col: &ArrayRef, row: usize) -> Option<&[u8]> {
    let b: &[u8] = match col.data_type() {
        A::Binary => col.as_binary::<i32>().value(row),
        A::LargeBinary => col.as_binary::<i64>().value(row),
        A::FixedSizeBinary(16) => col.as_fixed_size_binary().value(row),
        _ => return None,
    };
    (b.len() == 16).then_some(b)
}

fn my_float(v: f64) -> Result<Val<'static>, SyncError> {
    if v.is_finite() {
        Ok(Val::Float(v))
    } else {
        Err(format!("{v} cannot be stored in MySQL").into())
    }
}

/// A value as PostgreSQL's text input of its type.
fn pg_text(out: &mut String, col: &ArrayRef, row: usize, spec: &ColSpec) -> Result<(), SyncError> {
    macro_rules! num {
        ($t:ty) => {{
            out.push_str(itoa::Buffer::new().format(col.as_primitive::<$t>().value(row)));
        }};
    }
    match col.data_type() {
        A::Int8 => num!(Int8Type),
        A::Int16 => num!(Int16Type),
        A::Int32 => num!(Int32Type),
        A::Int64 => num!(Int64Type),
        A::UInt8 => num!(UInt8Type),
        A::UInt16 => num!(UInt16Type),
        A::UInt32 => num!(UInt32Type),
        A::UInt64 => {
            let v = col.as_primitive::<UInt64Type>().value(row);
            match spec.bits {
                Some(n) => {
                    let n = n.clamp(1, 64) as usize;
                    let _ = write!(out, "{:0n$b}", v, n = n);
                }
                None => out.push_str(itoa::Buffer::new().format(v)),
            }
        }
        A::Float32 => pg_float(out, col.as_primitive::<Float32Type>().value(row) as f64),
        A::Float64 => pg_float(out, col.as_primitive::<Float64Type>().value(row)),
        A::Boolean => out.push(if col.as_boolean().value(row) {
            't'
        } else {
            'f'
        }),
        A::Utf8 => out.push_str(col.as_string::<i32>().value(row)),
        A::LargeUtf8 => out.push_str(col.as_string::<i64>().value(row)),
        A::Binary | A::LargeBinary => {
            let b: &[u8] = if matches!(col.data_type(), A::Binary) {
                col.as_binary::<i32>().value(row)
            } else {
                col.as_binary::<i64>().value(row)
            };
            out.reserve(2 + 2 * b.len());
            out.push_str("\\x");
            for x in b {
                let _ = write!(out, "{x:02x}");
            }
        }
        _ => shared_text(out, col, row, true)?,
    }
    Ok(())
}

fn pg_float(out: &mut String, v: f64) {
    if v.is_finite() {
        let _ = write!(out, "{v:?}");
    } else {
        out.push_str(if v.is_nan() {
            "NaN"
        } else if v > 0.0 {
            "Infinity"
        } else {
            "-Infinity"
        });
    }
}

/// Times, dates and decimals as text both dialects read.
fn shared_text(out: &mut String, col: &ArrayRef, row: usize, pg: bool) -> Result<(), SyncError> {
    match col.data_type() {
        A::Duration(TimeUnit::Microsecond) => {
            let v = col.as_primitive::<DurationMicrosecondType>().value(row);
            if v < 0 {
                out.push('-');
            }
            let a = v.unsigned_abs();
            hms(out, a / 1_000_000);
            out.push('.');
            padded(out, a % 1_000_000, 6);
        }
        A::Timestamp(TimeUnit::Microsecond, tz) => {
            let v = col.as_primitive::<TimestampMicrosecondType>().value(row);
            let (days, us) = (v.div_euclid(86_400_000_000), v.rem_euclid(86_400_000_000));
            let bc = ymd(out, days, pg);
            out.push(' ');
            hms(out, us as u64 / 1_000_000);
            out.push('.');
            padded(out, us as u64 % 1_000_000, 6);
            if tz.is_some() && pg {
                out.push_str("+00");
            }
            if bc {
                out.push_str(" BC");
            }
        }
        A::Date32 => {
            if ymd(out, col.as_primitive::<Date32Type>().value(row) as i64, pg) {
                out.push_str(" BC");
            }
        }
        A::Decimal128(_, scale) if *scale >= 0 => decimal(
            out,
            col.as_primitive::<Decimal128Type>().value(row),
            *scale as usize,
        ),
        A::Decimal128(..) | A::Decimal256(..) => {
            let f = ArrayFormatter::try_new(col.as_ref(), &FormatOptions::default())
                .map_err(|e| e.to_string())?;
            let _ = write!(out, "{}", f.value(row));
        }
        other => return Err(format!("no target value for Arrow type {other}").into()),
    }
    Ok(())
}

/// `hh:mm:ss` of a count of seconds (hours past 99 take more digits).
fn hms(out: &mut String, secs: u64) {
    padded(out, secs / 3600, 2);
    out.push(':');
    padded(out, secs / 60 % 60, 2);
    out.push(':');
    padded(out, secs % 60, 2);
}

/// `yyyy-mm-dd` of days since 1970-01-01 (a year outside 0..=9999 as `{:04}` writes
/// it).
/// `YYYY-MM-DD` of days since 1970-01-01. Years before 1 AD: PostgreSQL (`pg`)
/// counts them as BC (year 0 is 1 BC; true: the caller ends the value with ` BC`,
/// which PostgreSQL reads after the time too); MySQL gets the astronomical year,
/// which it refuses (the row error policy decides).
fn ymd(out: &mut String, days: i64, pg: bool) -> bool {
    let (y, m, d) = civil_from_days(days);
    let bc = pg && y <= 0;
    let y = if bc { 1 - y } else { y };
    match u64::try_from(y) {
        Ok(y) if y <= 9999 => padded(out, y, 4),
        _ => {
            let _ = write!(out, "{y:04}");
        }
    }
    out.push('-');
    padded(out, u64::from(m), 2);
    out.push('-');
    padded(out, u64::from(d), 2);
    bc
}

use crate::calendar::civil_from_days;
use crate::digits::{decimal, padded};

/// Space `row` reuses from row to row: a value's text and the row being built, so a
/// row costs one allocation (its `Row`).
#[derive(Default)]
pub struct Scratch {
    text: String,
    row: RowBuf,
}

/// A row's values over the given batch columns; a target column the batch lacks
/// (None) is `Default`.
pub fn row(
    d: Dialect,
    b: &RecordBatch,
    cols: &[(Option<usize>, &ColSpec)],
    r: usize,
    s: &mut Scratch,
) -> Result<Row, SyncError> {
    s.row.0.clear();
    for (c, spec) in cols {
        match c {
            Some(c) => push(&mut s.row, &mut s.text, d, b.column(*c), r, spec)?,
            None => s.row.push(Val::Default),
        }
    }
    Ok(Row(s.row.0.as_slice().into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{
        Float64Array, Int32Array, StringArray, TimestampMicrosecondArray, UInt64Array,
    };
    use std::sync::Arc;

    fn val(d: Dialect, a: ArrayRef, bits: Option<u32>) -> Result<Row, SyncError> {
        let spec = ColSpec {
            ident: "c".into(),
            bits,
            ..ColSpec::default()
        };
        let mut b = RowBuf::default();
        push(&mut b, &mut String::new(), d, &a, 0, &spec)?;
        Ok(b.finish())
    }

    fn one(r: Row) -> String {
        format!("{:?}", r.vals().collect::<Vec<_>>())
    }

    #[test]
    fn postgresql_arrays_become_json() {
        let j = |s: &str, e| {
            let mut out = String::new();
            pg_array_json(s, e, &mut out).map(|_| out)
        };
        assert_eq!(j("{1,NULL,3}", Element::Number).unwrap(), "[1,null,3]");
        assert_eq!(j("{}", Element::Number).unwrap(), "[]");
        assert_eq!(
            j(r#"{"a b","c,d",NULL,"NULL","q\"x\\"}"#, Element::Text).unwrap(),
            r#"["a b","c,d",null,"NULL","q\"x\\"]"#
        );
        assert_eq!(
            j("{{x,y},{z,w}}", Element::Text).unwrap(),
            r#"[["x","y"],["z","w"]]"#
        );
        assert_eq!(j("[0:1]={t,f}", Element::Bool).unwrap(), "[true,false]");
        assert_eq!(j("{NaN,1.5}", Element::Number).unwrap(), r#"["NaN",1.5]"#);
        assert!(j("{1,2", Element::Number).is_err());
        assert!(j("1,2}", Element::Number).is_err());
    }

    #[test]
    fn values_per_dialect() {
        let ts: ArrayRef = Arc::new(TimestampMicrosecondArray::from(vec![1_700_000_000_123_456]));
        let v = |d, a: &ArrayRef, bits| one(val(d, a.clone(), bits).unwrap());
        assert_eq!(
            v(Dialect::MySql, &ts, None),
            r#"[Text("2023-11-14 22:13:20.123456")]"#
        );
        let tz: ArrayRef =
            Arc::new(TimestampMicrosecondArray::from(vec![-1]).with_timezone("+00:00"));
        assert_eq!(
            v(Dialect::Postgres, &tz, None),
            r#"[Text("1969-12-31 23:59:59.999999+00")]"#
        );
        let i: ArrayRef = Arc::new(Int32Array::from(vec![-7]));
        assert_eq!(v(Dialect::MySql, &i, None), "[Int(-7)]");
        assert_eq!(v(Dialect::Postgres, &i, None), r#"[Text("-7")]"#);
        // Quotes and backslashes are plain characters: nothing is escaped here.
        let s: ArrayRef = Arc::new(StringArray::from(vec!["it's a \\ test"]));
        assert_eq!(v(Dialect::MySql, &s, None), r#"[Text("it's a \\ test")]"#);
        assert_eq!(
            v(Dialect::Postgres, &s, None),
            r#"[Text("it's a \\ test")]"#
        );
        let b: ArrayRef = Arc::new(UInt64Array::from(vec![5]));
        assert_eq!(v(Dialect::Postgres, &b, Some(4)), r#"[Text("0101")]"#);
        assert_eq!(v(Dialect::MySql, &b, Some(4)), "[UInt(5)]");
        let f: ArrayRef = Arc::new(Float64Array::from(vec![f64::NAN]));
        assert_eq!(v(Dialect::Postgres, &f, None), r#"[Text("NaN")]"#);
        assert!(val(Dialect::MySql, f, None).is_err());
    }

    /// The hand-written time, date and decimal text against `fmt` and Arrow's own
    /// decimal formatter, over the whole range of each.
    mod text {
        use super::*;
        use arrow_array::{Date32Array, Decimal128Array, DurationMicrosecondArray};
        use proptest::prelude::*;

        fn shared(a: ArrayRef) -> String {
            let mut out = String::new();
            shared_text(&mut out, &a, 0, true).unwrap();
            out
        }

        proptest! {
            #[test]
            fn decimals_as_arrow_writes_them(v in any::<i128>(), small in -10_000i128..10_000, scale in 0i8..=38) {
                // Values within the precision (38 digits), as a column holds them.
                for v in [v % 10i128.pow(38), small, v % 10i128.pow((scale as u32 + 1).min(38))] {
                    let a = Decimal128Array::from(vec![v])
                        .with_precision_and_scale(38, scale)
                        .unwrap();
                    let want = ArrayFormatter::try_new(&a, &FormatOptions::default())
                        .unwrap()
                        .value(0)
                        .to_string();
                    prop_assert_eq!(shared(Arc::new(a)), want);
                }
            }

            #[test]
            fn times_and_dates_as_fmt_writes_them(us in any::<i64>(), days in -3_000_000i32..3_000_000) {
                let (d, t) = (us.div_euclid(86_400_000_000), us.rem_euclid(86_400_000_000));
                // (PostgreSQL's years before 1 AD: 1 BC is the year 0.)
                let era = |y: i64| if y <= 0 { (1 - y, " BC") } else { (y, "") };
                let (y, m, dd) = civil_from_days(d);
                let (y, bc) = era(y);
                let s = t / 1_000_000;
                let want = format!(
                    "{y:04}-{m:02}-{dd:02} {:02}:{:02}:{:02}.{:06}+00{bc}",
                    s / 3600,
                    s / 60 % 60,
                    s % 60,
                    t % 1_000_000
                );
                let ts = TimestampMicrosecondArray::from(vec![us]).with_timezone("+00:00");
                prop_assert_eq!(shared(Arc::new(ts)), want);
                let (y, m, dd) = civil_from_days(days as i64);
                let (y, bc) = era(y);
                prop_assert_eq!(
                    shared(Arc::new(Date32Array::from(vec![days]))),
                    format!("{y:04}-{m:02}-{dd:02}{bc}")
                );
                let a = us.unsigned_abs();
                let s = a / 1_000_000;
                let want = format!(
                    "{}{:02}:{:02}:{:02}.{:06}",
                    if us < 0 { "-" } else { "" },
                    s / 3600,
                    s / 60 % 60,
                    s % 60,
                    a % 1_000_000
                );
                prop_assert_eq!(shared(Arc::new(DurationMicrosecondArray::from(vec![us]))), want);
            }
        }

        #[test]
        fn a_key_projected_out_of_a_row_is_the_key_rendered() {
            let b = RecordBatch::try_from_iter([
                ("a", Arc::new(StringArray::from(vec!["x\ty"])) as ArrayRef),
                ("id", Arc::new(Int32Array::from(vec![-3])) as ArrayRef),
                (
                    "d",
                    Arc::new(
                        Decimal128Array::from(vec![-5])
                            .with_precision_and_scale(10, 2)
                            .unwrap(),
                    ) as ArrayRef,
                ),
            ])
            .unwrap();
            let spec = ColSpec {
                ident: "c".into(),
                ..ColSpec::default()
            };
            let all: Vec<(Option<usize>, &ColSpec)> = vec![
                (Some(0), &spec),
                (Some(1), &spec),
                (Some(2), &spec),
                (None, &spec),
            ];
            for d in [Dialect::Postgres, Dialect::MySql] {
                let mut s = Scratch::default();
                let row = super::super::row(d, &b, &all, 0, &mut s).unwrap();
                let key = super::super::row(d, &b, &[all[2], all[1]], 0, &mut s).unwrap();
                assert_eq!(row.project(&[2, 1]), Some(key));
                assert_eq!(row.project(&[4]), None);
                // The scratch space is reused: the first row is unchanged.
                assert_eq!(row.vals().count(), 4);
            }
        }
    }

    #[test]
    fn packed_rows_read_back() {
        let vals = [
            Val::Null,
            Val::Default,
            Val::Int(i64::MIN),
            Val::UInt(u64::MAX),
            Val::Float(-0.5),
            Val::Text("é\t"),
            Val::Bytes(&[0, 255]),
            Val::Text(""),
        ];
        let r = Row::of(vals);
        assert_eq!(r.vals().collect::<Vec<_>>(), vals);
        assert!(r.has_default());
        assert_eq!(
            Row::of([Val::Float(f64::NAN)]),
            Row::of([Val::Float(f64::NAN)])
        );
        assert_ne!(Row::of([Val::Int(1)]), Row::of([Val::UInt(1)]));
    }
}
