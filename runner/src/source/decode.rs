//! Values of MySQL/MariaDB columns decoded straight into Arrow builders: from binlog
//! row images (TABLE_MAP types and metadata + the schema history) and from snapshot
//! rows, into the same Arrow types, so both paths give identical batches.
//!
//! Arrow types are the lossless ones for each MySQL type (the sink maps them on):
//!
//! | MySQL | Arrow |
//! |---|---|
//! | TINYINT..BIGINT [UNSIGNED] (TINYINT(1) included) | Int8..Int64 / UInt8..UInt64 (MEDIUMINT: Int32/UInt32) |
//! | DECIMAL(p,s) | Decimal128(p,s), Decimal256 above 38 digits |
//! | FLOAT / DOUBLE | Float32 / Float64 |
//! | CHAR, VARCHAR, TEXT, ENUM, SET, JSON | Utf8 (decoded from the column's charset) |
//! | BINARY, VARBINARY, BLOB, GEOMETRY | Binary |
//! | DATE | Date32 |
//! | TIME (may exceed 24 h or be negative) | Duration(µs) |
//! | DATETIME (wall clock) | Timestamp(µs) |
//! | TIMESTAMP (an instant) | Timestamp(µs, "+00:00") |
//! | YEAR | UInt16 |
//! | BIT(n) | UInt64 |
//!
//! Zero dates (`0000-00-00`, a zero month or day) become NULL, or an error with
//! `zero-dates: fail`.

use super::DecodeError;
use arrow_array::builder::*;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_buffer::i256;
use arrow_schema::{DataType as A, Field, Schema, SchemaRef, TimeUnit};
use ddl_core::{DataType, Table, TimeZone};
use std::sync::Arc;

/// How a column's values are interpreted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Int {
        bytes: u8,
        unsigned: bool,
    },
    Decimal {
        precision: u8,
        scale: i8,
    },
    Float,
    Double,
    Text {
        charset: Charset,
    },
    Binary,
    /// BINARY(n): the binlog drops trailing zero bytes; they are put back.
    FixedBinary(usize),
    Enum(Vec<String>),
    Set(Vec<String>),
    Date,
    Time,
    DateTime,
    Timestamp,
    Year,
    Bit,
}

/// Character sets the decoder converts to UTF-8.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charset {
    Utf8,
    /// MySQL's latin1 is Windows-1252.
    Other(&'static encoding_rs::Encoding),
}

impl Charset {
    pub fn from_mysql(name: Option<&str>) -> Result<Charset, DecodeError> {
        let n = name.unwrap_or("utf8mb4").to_ascii_lowercase();
        let label = match n.as_str() {
            "utf8" | "utf8mb3" | "utf8mb4" | "ascii" => return Ok(Charset::Utf8),
            "latin1" => "windows-1252",
            "latin2" => "iso-8859-2",
            "cp1250" => "windows-1250",
            "cp1251" => "windows-1251",
            "cp1256" => "windows-1256",
            "cp1257" => "windows-1257",
            "greek" => "iso-8859-7",
            "hebrew" => "iso-8859-8",
            "latin5" => "windows-1254",
            "latin7" => "iso-8859-13",
            "koi8r" => "koi8-r",
            "koi8u" => "koi8-u",
            "gbk" | "gb2312" => "gbk",
            "gb18030" => "gb18030",
            "big5" => "big5",
            "sjis" | "cp932" => "shift_jis",
            "ujis" | "eucjpms" => "euc-jp",
            "euckr" => "euc-kr",
            "utf16" => "utf-16be",
            "utf16le" => "utf-16le",
            other => return Err(format!("character set {other} is not supported").into()),
        };
        Ok(encoding_rs::Encoding::for_label(label.as_bytes())
            .map(Charset::Other)
            .ok_or_else(|| format!("character set {n} is not supported"))?)
    }
}

/// One column of a captured table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceColumn {
    pub name: String,
    pub kind: Kind,
    pub nullable: bool,
}

/// A captured table as the decoder sees it: columns in binlog order and the Arrow
/// schema of its batches.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceTable {
    pub db: String,
    pub name: String,
    pub columns: Vec<SourceColumn>,
    /// Key columns (primary key, or the job's key override), as indexes.
    pub key: Vec<usize>,
    pub arrow: SchemaRef,
    /// The IR definition the decoder was built from.
    pub ir: Arc<Table>,
}

impl SourceTable {
    /// From the IR table (the schema history's view).
    pub fn from_ir(
        db: &str,
        t: &Table,
        key_override: Option<&[String]>,
    ) -> Result<Self, DecodeError> {
        let table_charset = t.options.get("charset").map(|v| v.sql.as_str());
        let mut columns = Vec::new();
        for c in &t.columns {
            let err = |e: DecodeError| format!("{db}.{} column {}: {e}", t.name.name, c.name);
            let kind = match &c.data_type {
                DataType::Boolean => Kind::Int {
                    bytes: 1,
                    unsigned: false,
                },
                DataType::Int { bytes, unsigned } => Kind::Int {
                    bytes: *bytes,
                    unsigned: *unsigned,
                },
                DataType::Decimal {
                    precision, scale, ..
                } => Kind::Decimal {
                    precision: precision.unwrap_or(10) as u8,
                    scale: scale.unwrap_or(0) as i8,
                },
                DataType::Float { bytes: 4, .. } => Kind::Float,
                DataType::Float { .. } => Kind::Double,
                DataType::Char { .. } | DataType::Varchar { .. } | DataType::Text { .. } => {
                    Kind::Text {
                        charset: Charset::from_mysql(c.charset.as_deref().or(table_charset))
                            .map_err(err)?,
                    }
                }
                DataType::Json { .. } => Kind::Text {
                    charset: Charset::Utf8,
                },
                DataType::Enum { values } => Kind::Enum(values.clone()),
                DataType::Set { values } => Kind::Set(values.clone()),
                DataType::Binary { length } => Kind::FixedBinary(*length as usize),
                DataType::Varbinary { .. } | DataType::Blob { .. } | DataType::Spatial { .. } => {
                    Kind::Binary
                }
                DataType::Date => Kind::Date,
                DataType::Time { .. } => Kind::Time,
                DataType::Timestamp {
                    tz: TimeZone::None, ..
                } => Kind::DateTime,
                DataType::Timestamp { .. } => Kind::Timestamp,
                DataType::Year => Kind::Year,
                DataType::Bit { .. } => Kind::Bit,
                other => {
                    return Err(
                        err(format!("type {} is not supported", other.family()).into()).into(),
                    )
                }
            };
            columns.push(SourceColumn {
                name: c.name.clone(),
                kind,
                nullable: c.nullable,
            });
        }
        let key_names: Vec<String> = match key_override {
            Some(k) => k.to_vec(),
            None => t
                .primary_key
                .as_ref()
                .map(|pk| pk.columns.clone())
                .unwrap_or_default(),
        };
        let mut key = Vec::new();
        for k in &key_names {
            key.push(
                columns
                    .iter()
                    .position(|c| c.name.eq_ignore_ascii_case(k))
                    .ok_or_else(|| {
                        format!("{db}.{}: key column {k} does not exist", t.name.name)
                    })?,
            );
        }
        let arrow = Arc::new(Schema::new(
            columns
                .iter()
                .map(|c| {
                    let f = Field::new(&c.name, arrow_type(&c.kind), true);
                    if c.kind == Kind::Bit {
                        f.with_metadata([("mysql.type".to_owned(), "bit".to_owned())].into())
                    } else {
                        f
                    }
                })
                .collect::<Vec<_>>(),
        ));
        Ok(SourceTable {
            db: db.to_owned(),
            name: t.name.name.clone(),
            columns,
            key,
            arrow,
            ir: Arc::new(t.clone()),
        })
    }
}

pub fn arrow_type(k: &Kind) -> A {
    match k {
        Kind::Int { bytes, unsigned } => match (bytes, unsigned) {
            (1, false) => A::Int8,
            (1, true) => A::UInt8,
            (2, false) => A::Int16,
            (2, true) => A::UInt16,
            (3 | 4, false) => A::Int32,
            (3 | 4, true) => A::UInt32,
            (_, false) => A::Int64,
            (_, true) => A::UInt64,
        },
        Kind::Decimal { precision, scale } if *precision <= 38 => A::Decimal128(*precision, *scale),
        Kind::Decimal { precision, scale } => A::Decimal256(*precision, *scale),
        Kind::Float => A::Float32,
        Kind::Double => A::Float64,
        Kind::Text { .. } | Kind::Enum(_) | Kind::Set(_) => A::Utf8,
        Kind::Binary | Kind::FixedBinary(_) => A::Binary,
        Kind::Date => A::Date32,
        Kind::Time => A::Duration(TimeUnit::Microsecond),
        Kind::DateTime => A::Timestamp(TimeUnit::Microsecond, None),
        Kind::Timestamp => A::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
        Kind::Year => A::UInt16,
        Kind::Bit => A::UInt64,
    }
}

/// A typed Arrow builder per column (the enum is per column, not per value).
pub enum ColBuilder {
    I8(Int8Builder),
    I16(Int16Builder),
    I32(Int32Builder),
    I64(Int64Builder),
    U8(UInt8Builder),
    U16(UInt16Builder),
    U32(UInt32Builder),
    U64(UInt64Builder),
    F32(Float32Builder),
    F64(Float64Builder),
    D128(Decimal128Builder, u8, i8),
    D256(Decimal256Builder, u8, i8),
    Str(StringBuilder),
    Bin(BinaryBuilder),
    Date(Date32Builder),
    Dur(DurationMicrosecondBuilder),
    Ts(TimestampMicrosecondBuilder, bool),
}

impl ColBuilder {
    pub fn new(k: &Kind) -> ColBuilder {
        match arrow_type(k) {
            A::Int8 => ColBuilder::I8(Int8Builder::new()),
            A::Int16 => ColBuilder::I16(Int16Builder::new()),
            A::Int32 => ColBuilder::I32(Int32Builder::new()),
            A::Int64 => ColBuilder::I64(Int64Builder::new()),
            A::UInt8 => ColBuilder::U8(UInt8Builder::new()),
            A::UInt16 => ColBuilder::U16(UInt16Builder::new()),
            A::UInt32 => ColBuilder::U32(UInt32Builder::new()),
            A::UInt64 => ColBuilder::U64(UInt64Builder::new()),
            A::Float32 => ColBuilder::F32(Float32Builder::new()),
            A::Float64 => ColBuilder::F64(Float64Builder::new()),
            A::Decimal128(p, s) => ColBuilder::D128(Decimal128Builder::new(), p, s),
            A::Decimal256(p, s) => ColBuilder::D256(Decimal256Builder::new(), p, s),
            A::Utf8 => ColBuilder::Str(StringBuilder::new()),
            A::Binary => ColBuilder::Bin(BinaryBuilder::new()),
            A::Date32 => ColBuilder::Date(Date32Builder::new()),
            A::Duration(_) => ColBuilder::Dur(DurationMicrosecondBuilder::new()),
            A::Timestamp(_, tz) => ColBuilder::Ts(TimestampMicrosecondBuilder::new(), tz.is_some()),
            other => unreachable!("no builder for {other}"),
        }
    }

    pub fn append_null(&mut self) {
        match self {
            ColBuilder::I8(b) => b.append_null(),
            ColBuilder::I16(b) => b.append_null(),
            ColBuilder::I32(b) => b.append_null(),
            ColBuilder::I64(b) => b.append_null(),
            ColBuilder::U8(b) => b.append_null(),
            ColBuilder::U16(b) => b.append_null(),
            ColBuilder::U32(b) => b.append_null(),
            ColBuilder::U64(b) => b.append_null(),
            ColBuilder::F32(b) => b.append_null(),
            ColBuilder::F64(b) => b.append_null(),
            ColBuilder::D128(b, ..) => b.append_null(),
            ColBuilder::D256(b, ..) => b.append_null(),
            ColBuilder::Str(b) => b.append_null(),
            ColBuilder::Bin(b) => b.append_null(),
            ColBuilder::Date(b) => b.append_null(),
            ColBuilder::Dur(b) => b.append_null(),
            ColBuilder::Ts(b, _) => b.append_null(),
        }
    }

    /// An integer value (signed or unsigned source), stored in the column's width.
    fn append_int(&mut self, v: i128) -> Result<(), DecodeError> {
        let bad = || format!("integer {v} out of range");
        match self {
            ColBuilder::I8(b) => b.append_value(i8::try_from(v).map_err(|_| bad())?),
            ColBuilder::I16(b) => b.append_value(i16::try_from(v).map_err(|_| bad())?),
            ColBuilder::I32(b) => b.append_value(i32::try_from(v).map_err(|_| bad())?),
            ColBuilder::I64(b) => b.append_value(i64::try_from(v).map_err(|_| bad())?),
            ColBuilder::U8(b) => b.append_value(u8::try_from(v).map_err(|_| bad())?),
            ColBuilder::U16(b) => b.append_value(u16::try_from(v).map_err(|_| bad())?),
            ColBuilder::U32(b) => b.append_value(u32::try_from(v).map_err(|_| bad())?),
            ColBuilder::U64(b) => b.append_value(u64::try_from(v).map_err(|_| bad())?),
            _ => return Err("not an integer column".into()),
        }
        Ok(())
    }

    pub fn finish(&mut self) -> ArrayRef {
        match self {
            ColBuilder::I8(b) => Arc::new(b.finish()),
            ColBuilder::I16(b) => Arc::new(b.finish()),
            ColBuilder::I32(b) => Arc::new(b.finish()),
            ColBuilder::I64(b) => Arc::new(b.finish()),
            ColBuilder::U8(b) => Arc::new(b.finish()),
            ColBuilder::U16(b) => Arc::new(b.finish()),
            ColBuilder::U32(b) => Arc::new(b.finish()),
            ColBuilder::U64(b) => Arc::new(b.finish()),
            ColBuilder::F32(b) => Arc::new(b.finish()),
            ColBuilder::F64(b) => Arc::new(b.finish()),
            ColBuilder::D128(b, p, s) => Arc::new(
                b.finish()
                    .with_precision_and_scale(*p, *s)
                    .expect("valid decimal"),
            ),
            ColBuilder::D256(b, p, s) => Arc::new(
                b.finish()
                    .with_precision_and_scale(*p, *s)
                    .expect("valid decimal"),
            ),
            ColBuilder::Str(b) => Arc::new(b.finish()),
            ColBuilder::Bin(b) => Arc::new(b.finish()),
            ColBuilder::Date(b) => Arc::new(b.finish()),
            ColBuilder::Dur(b) => Arc::new(b.finish()),
            ColBuilder::Ts(b, tz) => {
                let a = b.finish();
                if *tz {
                    Arc::new(a.with_timezone("+00:00"))
                } else {
                    Arc::new(a)
                }
            }
        }
    }
}

/// Builders for a whole table.
pub struct RowsBuilder {
    pub table: Arc<SourceTable>,
    pub cols: Vec<ColBuilder>,
    pub rows: usize,
    /// Approximate bytes of decoded values (for cutting batches by size).
    pub bytes: usize,
}

impl RowsBuilder {
    pub fn new(table: Arc<SourceTable>) -> Self {
        let cols = table
            .columns
            .iter()
            .map(|c| ColBuilder::new(&c.kind))
            .collect();
        RowsBuilder {
            table,
            cols,
            rows: 0,
            bytes: 0,
        }
    }

    pub fn finish(&mut self) -> RecordBatch {
        let arrays: Vec<ArrayRef> = self.cols.iter_mut().map(ColBuilder::finish).collect();
        self.rows = 0;
        self.bytes = 0;
        RecordBatch::try_new(self.table.arrow.clone(), arrays).expect("columns match the schema")
    }
}

// ---------------------------------------------------------------------------
// Calendar helpers

pub use crate::calendar::days_from_civil;

fn valid_date(y: u32, m: u32, d: u32) -> bool {
    let _ = y;
    (1..=12).contains(&m) && (1..=31).contains(&d)
}

fn datetime_micros(y: u32, mo: u32, d: u32, h: u32, mi: u32, s: u32, us: u32) -> i64 {
    let days = days_from_civil(y as i64, mo, d);
    ((days * 86_400 + h as i64 * 3600 + mi as i64 * 60 + s as i64) * 1_000_000) + us as i64
}

/// Context for error messages and policies.
pub struct Ctx<'a> {
    pub zero_dates_fail: bool,
    pub column: &'a str,
}

impl Ctx<'_> {
    fn zero(&self, b: &mut ColBuilder, what: &str) -> Result<(), DecodeError> {
        if self.zero_dates_fail {
            return Err(format!(
                "column {}: zero date {what} (zero-dates: fail)",
                self.column
            )
            .into());
        }
        b.append_null();
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Binlog row images

/// A column's binlog type and metadata from TABLE_MAP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BinCol {
    pub ty: u8,
    pub meta: [u8; 2],
}

pub mod t {
    pub const DECIMAL: u8 = 0;
    pub const TINY: u8 = 1;
    pub const SHORT: u8 = 2;
    pub const LONG: u8 = 3;
    pub const FLOAT: u8 = 4;
    pub const DOUBLE: u8 = 5;
    pub const NULL: u8 = 6;
    pub const TIMESTAMP: u8 = 7;
    pub const LONGLONG: u8 = 8;
    pub const INT24: u8 = 9;
    pub const DATE: u8 = 10;
    pub const TIME: u8 = 11;
    pub const DATETIME: u8 = 12;
    pub const YEAR: u8 = 13;
    pub const NEWDATE: u8 = 14;
    pub const VARCHAR: u8 = 15;
    pub const BIT: u8 = 16;
    pub const TIMESTAMP2: u8 = 17;
    pub const DATETIME2: u8 = 18;
    pub const TIME2: u8 = 19;
    pub const JSON: u8 = 245;
    pub const NEWDECIMAL: u8 = 246;
    pub const ENUM: u8 = 247;
    pub const SET: u8 = 248;
    pub const TINY_BLOB: u8 = 249;
    pub const MEDIUM_BLOB: u8 = 250;
    pub const LONG_BLOB: u8 = 251;
    pub const BLOB: u8 = 252;
    pub const VAR_STRING: u8 = 253;
    pub const STRING: u8 = 254;
    pub const GEOMETRY: u8 = 255;
}

/// Read cursor over a row image.
pub struct Cur<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
}

impl<'a> Cur<'a> {
    #[inline]
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos + n;
        if end > self.buf.len() {
            return Err(format!(
                "row image truncated: need {n} bytes at {} of {}",
                self.pos,
                self.buf.len()
            )
            .into());
        }
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    #[inline]
    fn le(&mut self, n: usize) -> Result<u64, DecodeError> {
        let s = self.take(n)?;
        let mut v = 0u64;
        for (i, b) in s.iter().enumerate() {
            v |= (*b as u64) << (8 * i);
        }
        Ok(v)
    }
    #[inline]
    fn be(&mut self, n: usize) -> Result<u64, DecodeError> {
        let s = self.take(n)?;
        let mut v = 0u64;
        for b in s {
            v = (v << 8) | *b as u64;
        }
        Ok(v)
    }
}

fn frac_bytes(fsp: u8) -> usize {
    (fsp as usize).div_ceil(2)
}

/// Fractional microseconds stored in `fsp` precision, big-endian.
fn read_frac(c: &mut Cur<'_>, fsp: u8) -> Result<i64, DecodeError> {
    Ok(match frac_bytes(fsp) {
        0 => 0,
        1 => c.be(1)? as i64 * 10_000,
        2 => c.be(2)? as i64 * 100,
        _ => c.be(3)? as i64,
    })
}

const DIG2BYTES: [usize; 10] = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4];

/// MySQL's binary DECIMAL straight into the column's unscaled integer, without
/// copying the bytes: groups of up to 9 digits, most significant first, the sign in the
/// first bit (negative values have every bit inverted).
fn decode_decimal(
    c: &mut Cur<'_>,
    precision: u8,
    scale: u8,
    b: &mut ColBuilder,
) -> Result<(), DecodeError> {
    let intg = precision.saturating_sub(scale) as usize;
    let (intg0, intg0x) = (intg / 9, intg % 9);
    let (frac0, frac0x) = (scale as usize / 9, scale as usize % 9);
    let size = intg0 * 4 + DIG2BYTES[intg0x] + frac0 * 4 + DIG2BYTES[frac0x];
    let raw = c.take(size)?;
    let negative = raw.first().is_some_and(|b0| b0 & 0x80 == 0);
    let mask = if negative { 0xFF } else { 0 };
    // (bytes, digits) of each group in order.
    let groups = (intg0x > 0)
        .then_some((DIG2BYTES[intg0x], intg0x as u32))
        .into_iter()
        .chain(std::iter::repeat_n((4, 9), intg0 + frac0))
        .chain((frac0x > 0).then_some((DIG2BYTES[frac0x], frac0x as u32)));
    let mut p = 0;
    let mut next = |n: usize| -> u32 {
        let mut v = 0u32;
        for (i, x) in raw[p..p + n].iter().enumerate() {
            let first = if p + i == 0 { 0x80 } else { 0 };
            v = (v << 8) | (x ^ first ^ mask) as u32;
        }
        p += n;
        v
    };
    match b {
        ColBuilder::D128(db, ..) => {
            let mut v: i128 = 0;
            for (n, digits) in groups {
                v = v * 10i128.pow(digits) + next(n) as i128;
            }
            db.append_value(if negative { -v } else { v });
        }
        ColBuilder::D256(db, ..) => {
            let mut v = i256::ZERO;
            for (n, digits) in groups {
                v = v
                    .wrapping_mul(i256::from_i128(10i128.pow(digits)))
                    .wrapping_add(i256::from_i128(next(n) as i128));
            }
            db.append_value(if negative { v.wrapping_neg() } else { v });
        }
        _ => return Err("decimal into a non-decimal column".into()),
    }
    Ok(())
}

fn append_text(b: &mut ColBuilder, bytes: &[u8], charset: Charset) -> Result<(), DecodeError> {
    match b {
        ColBuilder::Str(sb) => {
            match charset {
                Charset::Utf8 => match std::str::from_utf8(bytes) {
                    Ok(s) => sb.append_value(s),
                    Err(_) => sb.append_value(String::from_utf8_lossy(bytes)),
                },
                Charset::Other(enc) => {
                    let (s, _, _) = enc.decode(bytes);
                    sb.append_value(s);
                }
            }
            Ok(())
        }
        ColBuilder::Bin(bb) => {
            bb.append_value(bytes);
            Ok(())
        }
        _ => Err("not a text column".into()),
    }
}

fn enum_value(values: &[String], idx: u64) -> &str {
    if idx == 0 {
        ""
    } else {
        values
            .get(idx as usize - 1)
            .map(String::as_str)
            .unwrap_or("")
    }
}

fn set_value(values: &[String], mask: u64) -> String {
    let mut s = String::new();
    for (i, v) in values.iter().enumerate() {
        if mask & (1 << i) != 0 {
            if !s.is_empty() {
                s.push(',');
            }
            s.push_str(v);
        }
    }
    s
}

/// Decode one binlog value of column `col` into `b`. Returns the bytes consumed.
pub fn decode_binlog_value(
    cur: &mut Cur<'_>,
    bc: BinCol,
    col: &SourceColumn,
    b: &mut ColBuilder,
    ctx: &Ctx<'_>,
) -> Result<(), DecodeError> {
    let signed = !matches!(col.kind, Kind::Int { unsigned: true, .. });
    let int = |v: u64, bits: u32| -> i128 {
        if signed {
            let shift = 64 - bits;
            (((v << shift) as i64) >> shift) as i128
        } else {
            v as i128
        }
    };
    match bc.ty {
        t::TINY => {
            let v = cur.le(1)?;
            if let Kind::Year = col.kind {
                return append_year(b, v);
            }
            b.append_int(int(v, 8))
        }
        t::SHORT => {
            let v = cur.le(2)?;
            b.append_int(int(v, 16))
        }
        t::INT24 => {
            let v = cur.le(3)?;
            b.append_int(int(v, 24))
        }
        t::LONG => {
            let v = cur.le(4)?;
            b.append_int(int(v, 32))
        }
        t::LONGLONG => {
            let v = cur.le(8)?;
            b.append_int(int(v, 64))
        }
        t::FLOAT => {
            let v = f32::from_bits(cur.le(4)? as u32);
            match b {
                ColBuilder::F32(fb) => fb.append_value(v),
                ColBuilder::F64(fb) => fb.append_value(v as f64),
                _ => return Err("FLOAT into a non-float column".into()),
            }
            Ok(())
        }
        t::DOUBLE => {
            let v = f64::from_bits(cur.le(8)?);
            match b {
                ColBuilder::F64(fb) => fb.append_value(v),
                _ => return Err("DOUBLE into a non-double column".into()),
            }
            Ok(())
        }
        t::NEWDECIMAL => decode_decimal(cur, bc.meta[0], bc.meta[1], b),
        t::YEAR => {
            let v = cur.le(1)?;
            append_year(b, v)
        }
        t::DATE | t::NEWDATE => {
            let v = cur.le(3)? as u32;
            let (d, m, y) = (v & 31, (v >> 5) & 15, v >> 9);
            if !valid_date(y, m, d) {
                return ctx.zero(b, &format!("{y:04}-{m:02}-{d:02}"));
            }
            match b {
                ColBuilder::Date(db) => db.append_value(days_from_civil(y as i64, m, d) as i32),
                _ => return Err("DATE into a non-date column".into()),
            }
            Ok(())
        }
        t::TIME2 => {
            let fsp = bc.meta[0];
            let int_part = cur.be(3)? as i64 - 0x80_0000;
            let packed: i64 = match frac_bytes(fsp) {
                0 => int_part << 24,
                1 => {
                    let (mut ip, mut frac) = (int_part, cur.be(1)? as i64);
                    if ip < 0 && frac != 0 {
                        ip += 1;
                        frac -= 0x100;
                    }
                    (ip << 24) + frac * 10_000
                }
                2 => {
                    let (mut ip, mut frac) = (int_part, cur.be(2)? as i64);
                    if ip < 0 && frac != 0 {
                        ip += 1;
                        frac -= 0x10000;
                    }
                    (ip << 24) + frac * 100
                }
                _ => {
                    let frac = cur.be(3)? as i64;
                    // The six bytes as one number, offset by 0x800000000000.
                    ((int_part + 0x80_0000) << 24 | frac) - 0x8000_0000_0000
                }
            };
            append_time_packed(b, packed)
        }
        t::TIME => {
            let v = cur.le(3)? as i64;
            let v = if v & 0x80_0000 != 0 {
                v - 0x100_0000
            } else {
                v
            };
            let neg = v < 0;
            let a = v.abs();
            let micros = ((a / 10000) * 3600 + (a / 100 % 100) * 60 + a % 100) * 1_000_000;
            append_duration(b, if neg { -micros } else { micros })
        }
        t::DATETIME2 => {
            let fsp = bc.meta[0];
            let v = cur.be(5)? as i64 - 0x80_0000_0000;
            let frac = read_frac(cur, fsp)?;
            let ymd = v >> 17;
            let ym = ymd >> 5;
            let hms = v % (1 << 17);
            let (day, month, year) = ((ymd % 32) as u32, (ym % 13) as u32, (ym / 13) as u32);
            let (sec, min, hour) = (
                (hms % 64) as u32,
                ((hms >> 6) % 64) as u32,
                (hms >> 12) as u32,
            );
            if !valid_date(year, month, day) {
                return ctx.zero(b, &format!("{year:04}-{month:02}-{day:02}"));
            }
            append_ts(
                b,
                datetime_micros(year, month, day, hour, min, sec, frac as u32),
            )
        }
        t::DATETIME => {
            let v = cur.le(8)?;
            let (date, time) = (v / 1_000_000, v % 1_000_000);
            let (y, m, d) = (
                (date / 10000) as u32,
                (date / 100 % 100) as u32,
                (date % 100) as u32,
            );
            if !valid_date(y, m, d) {
                return ctx.zero(b, &format!("{y:04}-{m:02}-{d:02}"));
            }
            append_ts(
                b,
                datetime_micros(
                    y,
                    m,
                    d,
                    (time / 10000) as u32,
                    (time / 100 % 100) as u32,
                    (time % 100) as u32,
                    0,
                ),
            )
        }
        t::TIMESTAMP2 => {
            let secs = cur.be(4)? as i64;
            let frac = read_frac(cur, bc.meta[0])?;
            if secs == 0 && frac == 0 {
                return ctx.zero(b, "0000-00-00 00:00:00");
            }
            append_ts(b, secs * 1_000_000 + frac)
        }
        t::TIMESTAMP => {
            let secs = cur.le(4)? as i64;
            if secs == 0 {
                return ctx.zero(b, "0000-00-00 00:00:00");
            }
            append_ts(b, secs * 1_000_000)
        }
        t::VARCHAR | t::VAR_STRING => {
            let max = u16::from_le_bytes(bc.meta) as usize;
            let len = if max < 256 { cur.le(1)? } else { cur.le(2)? } as usize;
            let bytes = cur.take(len)?;
            text_or_binary(b, bytes, col)
        }
        t::STRING | t::ENUM | t::SET => {
            let (real, len) = string_meta(bc);
            match real {
                t::ENUM => {
                    let idx = cur.le(len)?;
                    let Kind::Enum(values) = &col.kind else {
                        return Err("ENUM value in a non-enum column".into());
                    };
                    append_text(b, enum_value(values, idx).as_bytes(), Charset::Utf8)
                }
                t::SET => {
                    let mask = cur.le(len)?;
                    let Kind::Set(values) = &col.kind else {
                        return Err("SET value in a non-set column".into());
                    };
                    append_text(b, set_value(values, mask).as_bytes(), Charset::Utf8)
                }
                _ => {
                    let n = if len < 256 { cur.le(1)? } else { cur.le(2)? } as usize;
                    let bytes = cur.take(n)?;
                    text_or_binary(b, bytes, col)
                }
            }
        }
        t::BLOB | t::TINY_BLOB | t::MEDIUM_BLOB | t::LONG_BLOB | t::GEOMETRY | t::JSON => {
            if bc.ty == t::JSON {
                return Err("MySQL 8 binary JSON is not supported".into());
            }
            let n = cur.le(bc.meta[0] as usize)? as usize;
            let bytes = cur.take(n)?;
            text_or_binary(b, bytes, col)
        }
        t::BIT => {
            let bits = bc.meta[0] as usize + bc.meta[1] as usize * 8;
            let v = cur.be(bits.div_ceil(8))?;
            match b {
                ColBuilder::U64(ub) => ub.append_value(v),
                _ => return Err("BIT into a non-bit column".into()),
            }
            Ok(())
        }
        other => Err(format!("binlog column type {other} is not supported").into()),
    }
}

/// (real type, length) of a STRING column's metadata, including long CHAR lengths.
fn string_meta(bc: BinCol) -> (u8, usize) {
    let (b0, b1) = (bc.meta[0], bc.meta[1]);
    if b0 == 0 {
        return (t::STRING, b1 as usize);
    }
    if b0 & 0x30 != 0x30 {
        let len = b1 as usize | ((((b0 & 0x30) ^ 0x30) as usize) << 4);
        (b0 | 0x30, len)
    } else {
        (b0, b1 as usize)
    }
}

fn text_or_binary(b: &mut ColBuilder, bytes: &[u8], col: &SourceColumn) -> Result<(), DecodeError> {
    if let (Kind::FixedBinary(n), ColBuilder::Bin(bb)) = (&col.kind, &mut *b) {
        if bytes.len() < *n {
            let mut padded = bytes.to_vec();
            padded.resize(*n, 0);
            bb.append_value(&padded);
            return Ok(());
        }
    }
    let charset = match &col.kind {
        Kind::Text { charset } => *charset,
        _ => Charset::Utf8,
    };
    append_text(b, bytes, charset)
}

fn append_year(b: &mut ColBuilder, v: u64) -> Result<(), DecodeError> {
    let y = if v == 0 { 0 } else { v + 1900 };
    match b {
        ColBuilder::U16(ub) => ub.append_value(y as u16),
        _ => return b.append_int(y as i128),
    }
    Ok(())
}

fn append_time_packed(b: &mut ColBuilder, packed: i64) -> Result<(), DecodeError> {
    let neg = packed < 0;
    let p = packed.abs();
    let hms = p >> 24;
    let us = p & 0xFF_FFFF;
    let (h, m, s) = ((hms >> 12) & 0x3FF, (hms >> 6) & 0x3F, hms & 0x3F);
    let micros = ((h * 60 + m) * 60 + s) * 1_000_000 + us;
    append_duration(b, if neg { -micros } else { micros })
}

fn append_duration(b: &mut ColBuilder, micros: i64) -> Result<(), DecodeError> {
    match b {
        ColBuilder::Dur(db) => db.append_value(micros),
        _ => return Err("TIME into a non-time column".into()),
    }
    Ok(())
}

fn append_ts(b: &mut ColBuilder, micros: i64) -> Result<(), DecodeError> {
    match b {
        ColBuilder::Ts(tb, _) => tb.append_value(micros),
        _ => return Err("timestamp into a non-timestamp column".into()),
    }
    Ok(())
}

/// Decode one row image (null bitmap + values) of `present` columns into `rb`.
pub fn decode_row(
    cur: &mut Cur<'_>,
    cols: &[BinCol],
    present: &[bool],
    rb: &mut RowsBuilder,
    zero_dates_fail: bool,
) -> Result<(), DecodeError> {
    let n_present = present.iter().filter(|p| **p).count();
    let start = cur.pos;
    let nulls = cur.take(n_present.div_ceil(8))?;
    let mut bit = 0usize;
    let table = rb.table.clone();
    for (i, bc) in cols.iter().enumerate() {
        let b = &mut rb.cols[i];
        if !present[i] {
            b.append_null();
            continue;
        }
        let is_null = nulls[bit / 8] & (1 << (bit % 8)) != 0;
        bit += 1;
        if is_null {
            b.append_null();
            continue;
        }
        let col = &table.columns[i];
        let ctx = Ctx {
            zero_dates_fail,
            column: &col.name,
        };
        decode_binlog_value(cur, *bc, col, b, &ctx)
            .map_err(|e| format!("{}.{} column {}: {e}", table.db, table.name, col.name))?;
    }
    rb.rows += 1;
    rb.bytes += cur.pos - start;
    Ok(())
}

// ---------------------------------------------------------------------------
// Snapshot rows (binary protocol values)

/// Append one snapshot value (mysql_async's binary-protocol value) to `b`.
pub fn append_snapshot_value(
    b: &mut ColBuilder,
    col: &SourceColumn,
    v: &mysql_async::Value,
    ctx: &Ctx<'_>,
) -> Result<(), DecodeError> {
    use mysql_async::Value as V;
    match (v, &col.kind) {
        (V::NULL, _) => {
            b.append_null();
            Ok(())
        }
        (V::Int(i), Kind::Year) => append_year_abs(b, *i as u64),
        (V::UInt(i), Kind::Year) => append_year_abs(b, *i),
        (V::Int(i), _) => b.append_int(*i as i128),
        (V::UInt(i), _) => b.append_int(*i as i128),
        (V::Float(f), _) => match b {
            ColBuilder::F32(fb) => {
                fb.append_value(*f);
                Ok(())
            }
            _ => Err("float into a non-float column".into()),
        },
        (V::Double(f), _) => match b {
            ColBuilder::F64(fb) => {
                fb.append_value(*f);
                Ok(())
            }
            ColBuilder::F32(fb) => {
                fb.append_value(*f as f32);
                Ok(())
            }
            _ => Err("double into a non-double column".into()),
        },
        (V::Bytes(bytes), Kind::Decimal { scale, .. }) => append_decimal_text(b, bytes, *scale),
        (V::Bytes(bytes), Kind::Int { .. }) => {
            let s = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
            b.append_int(s.trim().parse::<i128>().map_err(|e| format!("{s}: {e}"))?)
        }
        (V::Bytes(bytes), Kind::Bit) => {
            let mut x = 0u64;
            for byte in bytes {
                x = (x << 8) | *byte as u64;
            }
            match b {
                ColBuilder::U64(ub) => ub.append_value(x),
                _ => return Err("BIT into a non-bit column".into()),
            }
            Ok(())
        }
        (V::Bytes(bytes), Kind::Year) => {
            let s = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
            append_year_abs(b, s.trim().parse().map_err(|e| format!("{s}: {e}"))?)
        }
        // The connection is utf8mb4: the server converts every charset for us.
        (V::Bytes(bytes), _) => append_text(b, bytes, Charset::Utf8),
        (V::Date(y, m, d, h, mi, s, us), kind) => {
            if !valid_date(*y as u32, *m as u32, *d as u32) {
                return ctx.zero(b, &format!("{y:04}-{m:02}-{d:02}"));
            }
            match (kind, b) {
                (Kind::Date, ColBuilder::Date(db)) => {
                    db.append_value(days_from_civil(*y as i64, *m as u32, *d as u32) as i32);
                    Ok(())
                }
                (_, b) => append_ts(
                    b,
                    datetime_micros(
                        *y as u32, *m as u32, *d as u32, *h as u32, *mi as u32, *s as u32, *us,
                    ),
                ),
            }
        }
        (V::Time(neg, days, h, m, s, us), _) => {
            let micros = (((*days as i64 * 24 + *h as i64) * 60 + *m as i64) * 60 + *s as i64)
                * 1_000_000
                + *us as i64;
            append_duration(b, if *neg { -micros } else { micros })
        }
    }
}

fn append_year_abs(b: &mut ColBuilder, y: u64) -> Result<(), DecodeError> {
    match b {
        ColBuilder::U16(ub) => ub.append_value(y as u16),
        _ => return b.append_int(y as i128),
    }
    Ok(())
}

/// "-123.4500" into the column's scale.
fn append_decimal_text(b: &mut ColBuilder, bytes: &[u8], scale: i8) -> Result<(), DecodeError> {
    let s = std::str::from_utf8(bytes)
        .map_err(|e| e.to_string())?
        .trim();
    let (neg, digits) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let mut frac = frac.to_owned();
    let scale = scale.max(0) as usize;
    if frac.len() > scale {
        return Err(format!("decimal {s} has more than {scale} fraction digits").into());
    }
    while frac.len() < scale {
        frac.push('0');
    }
    let all = format!("{int}{frac}");
    match b {
        ColBuilder::D128(db, ..) => {
            let v: i128 = all.parse().map_err(|e| format!("decimal {s}: {e}"))?;
            db.append_value(if neg { -v } else { v });
        }
        ColBuilder::D256(db, ..) => {
            let v = i256::from_string(&all).ok_or_else(|| format!("decimal {s} out of range"))?;
            db.append_value(if neg { v.wrapping_neg() } else { v });
        }
        _ => return Err("decimal into a non-decimal column".into()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_decimal() {
        // 1234567890.1234 as DECIMAL(14,4): known encoding from the MySQL manual's
        // scheme (intg 10 = 1 digit + 9; frac 4).
        let col = SourceColumn {
            name: "d".into(),
            kind: Kind::Decimal {
                precision: 14,
                scale: 4,
            },
            nullable: true,
        };
        let mut b = ColBuilder::new(&col.kind);
        // intg0x=1 digit: 1 byte (1); intg0=1 group: 234567890; frac0x=4 digits: 2 bytes (1234)
        let mut raw = vec![0x01u8];
        raw.extend_from_slice(&234567890u32.to_be_bytes());
        raw.extend_from_slice(&1234u16.to_be_bytes());
        raw[0] ^= 0x80;
        let mut neg = raw.clone();
        for x in &mut neg {
            *x ^= 0xFF;
        }
        let ctx = Ctx {
            zero_dates_fail: false,
            column: "d",
        };
        let bc = BinCol {
            ty: t::NEWDECIMAL,
            meta: [14, 4],
        };
        decode_binlog_value(&mut Cur { buf: &raw, pos: 0 }, bc, &col, &mut b, &ctx).unwrap();
        decode_binlog_value(&mut Cur { buf: &neg, pos: 0 }, bc, &col, &mut b, &ctx).unwrap();
        append_decimal_text(&mut b, b"-1234567890.1234", 4).unwrap();
        let a = b.finish();
        let a = a
            .as_any()
            .downcast_ref::<arrow_array::Decimal128Array>()
            .unwrap();
        assert_eq!(a.value(0), 12345678901234);
        assert_eq!(a.value(1), -12345678901234);
        assert_eq!(a.value(2), -12345678901234);
    }
}
