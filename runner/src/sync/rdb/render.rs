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
use std::hash::{Hash, Hasher};

/// How one target column's values are written.
#[derive(Debug, Clone)]
pub struct ColSpec {
    /// The target column name, quoted for the target.
    pub ident: String,
    /// BIT(n) width (PostgreSQL writes bit strings of that width).
    pub bits: Option<u32>,
    /// A boolean column (MySQL TINYINT(1)).
    pub boolean: bool,
}

/// One value on its way to a target.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub enum Cell {
    Null,
    /// The column's default (a column the source table lacks, when several source
    /// tables route into one target table).
    Default,
    Int(i64),
    UInt(u64),
    Float(f64),
    Text(Box<str>),
    Bytes(Box<[u8]>),
}

impl PartialEq for Cell {
    fn eq(&self, o: &Cell) -> bool {
        match (self, o) {
            (Cell::Null, Cell::Null) | (Cell::Default, Cell::Default) => true,
            (Cell::Int(a), Cell::Int(b)) => a == b,
            (Cell::UInt(a), Cell::UInt(b)) => a == b,
            // By bits: a key folds with itself, NaN included.
            (Cell::Float(a), Cell::Float(b)) => a.to_bits() == b.to_bits(),
            (Cell::Text(a), Cell::Text(b)) => a == b,
            (Cell::Bytes(a), Cell::Bytes(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Cell {}

impl Hash for Cell {
    fn hash<H: Hasher>(&self, h: &mut H) {
        std::mem::discriminant(self).hash(h);
        match self {
            Cell::Null | Cell::Default => {}
            Cell::Int(v) => v.hash(h),
            Cell::UInt(v) => v.hash(h),
            Cell::Float(v) => v.to_bits().hash(h),
            Cell::Text(v) => v.hash(h),
            Cell::Bytes(v) => v.hash(h),
        }
    }
}

impl Cell {
    /// Heap bytes besides the cell itself.
    pub fn heap(&self) -> usize {
        match self {
            Cell::Text(s) => s.len(),
            Cell::Bytes(b) => b.len(),
            _ => 0,
        }
    }

    /// Bytes a row of cells costs in memory.
    pub fn row_bytes(row: &[Cell]) -> usize {
        row.iter()
            .map(|c| std::mem::size_of::<Cell>() + c.heap())
            .sum()
    }
}

/// Row `row` of `col` as a value of dialect `d`.
pub fn cell(d: Dialect, col: &ArrayRef, row: usize, spec: &ColSpec) -> Result<Cell, SyncError> {
    if col.is_null(row) {
        return Ok(Cell::Null);
    }
    if d == Dialect::Postgres {
        let mut s = String::new();
        pg_text(&mut s, col, row, spec)?;
        return Ok(Cell::Text(s.into()));
    }
    macro_rules! int {
        ($t:ty) => {
            Cell::Int(col.as_primitive::<$t>().value(row) as i64)
        };
    }
    Ok(match col.data_type() {
        A::Int8 => int!(Int8Type),
        A::Int16 => int!(Int16Type),
        A::Int32 => int!(Int32Type),
        A::Int64 => int!(Int64Type),
        A::UInt8 => int!(UInt8Type),
        A::UInt16 => int!(UInt16Type),
        A::UInt32 => int!(UInt32Type),
        A::UInt64 => Cell::UInt(col.as_primitive::<UInt64Type>().value(row)),
        A::Float32 => my_float(col.as_primitive::<Float32Type>().value(row) as f64)?,
        A::Float64 => my_float(col.as_primitive::<Float64Type>().value(row))?,
        A::Boolean => Cell::Int(col.as_boolean().value(row) as i64),
        A::Utf8 => Cell::Text(col.as_string::<i32>().value(row).into()),
        A::LargeUtf8 => Cell::Text(col.as_string::<i64>().value(row).into()),
        A::Binary => Cell::Bytes(col.as_binary::<i32>().value(row).into()),
        A::LargeBinary => Cell::Bytes(col.as_binary::<i64>().value(row).into()),
        _ => {
            let mut s = String::new();
            shared_text(&mut s, col, row, false)?;
            Cell::Text(s.into())
        }
    })
}

fn my_float(v: f64) -> Result<Cell, SyncError> {
    if v.is_finite() {
        Ok(Cell::Float(v))
    } else {
        Err(format!("{v} cannot be stored in MySQL").into())
    }
}

/// A value as PostgreSQL's text input of its type.
fn pg_text(out: &mut String, col: &ArrayRef, row: usize, spec: &ColSpec) -> Result<(), SyncError> {
    macro_rules! num {
        ($t:ty) => {{
            let _ = write!(out, "{}", col.as_primitive::<$t>().value(row));
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
                None => {
                    let _ = write!(out, "{v}");
                }
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
            let sign = if v < 0 { "-" } else { "" };
            let a = v.unsigned_abs();
            let (s, us) = (a / 1_000_000, a % 1_000_000);
            let _ = write!(
                out,
                "{sign}{:02}:{:02}:{:02}.{us:06}",
                s / 3600,
                s / 60 % 60,
                s % 60
            );
        }
        A::Timestamp(TimeUnit::Microsecond, tz) => {
            let v = col.as_primitive::<TimestampMicrosecondType>().value(row);
            let (days, us) = (v.div_euclid(86_400_000_000), v.rem_euclid(86_400_000_000));
            let (y, m, dd) = civil_from_days(days);
            let s = us / 1_000_000;
            let _ = write!(
                out,
                "{y:04}-{m:02}-{dd:02} {:02}:{:02}:{:02}.{:06}{}",
                s / 3600,
                s / 60 % 60,
                s % 60,
                us % 1_000_000,
                if tz.is_some() && pg { "+00" } else { "" }
            );
        }
        A::Date32 => {
            let (y, m, dd) = civil_from_days(col.as_primitive::<Date32Type>().value(row) as i64);
            let _ = write!(out, "{y:04}-{m:02}-{dd:02}");
        }
        A::Decimal128(..) | A::Decimal256(..) => {
            let f = ArrayFormatter::try_new(col.as_ref(), &FormatOptions::default())
                .map_err(|e| e.to_string())?;
            let _ = write!(out, "{}", f.value(row));
        }
        other => return Err(format!("no target value for Arrow type {other}").into()),
    }
    Ok(())
}

use crate::calendar::civil_from_days;

/// A row's values over the given batch columns; a target column the batch lacks
/// (None) is `Default`.
pub fn row(
    d: Dialect,
    b: &RecordBatch,
    cols: &[(Option<usize>, &ColSpec)],
    r: usize,
) -> Result<Box<[Cell]>, SyncError> {
    cols.iter()
        .map(|(c, spec)| match c {
            Some(c) => cell(d, b.column(*c), r, spec),
            None => Ok(Cell::Default),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{
        Float64Array, Int32Array, StringArray, TimestampMicrosecondArray, UInt64Array,
    };
    use std::sync::Arc;

    fn val(d: Dialect, a: ArrayRef, bits: Option<u32>) -> Cell {
        let spec = ColSpec {
            ident: "c".into(),
            bits,
            boolean: false,
        };
        cell(d, &a, 0, &spec).unwrap()
    }

    fn text(s: &str) -> Cell {
        Cell::Text(s.into())
    }

    #[test]
    fn values_per_dialect() {
        let ts: ArrayRef = Arc::new(TimestampMicrosecondArray::from(vec![1_700_000_000_123_456]));
        assert_eq!(
            val(Dialect::MySql, ts.clone(), None),
            text("2023-11-14 22:13:20.123456")
        );
        let tz: ArrayRef =
            Arc::new(TimestampMicrosecondArray::from(vec![-1]).with_timezone("+00:00"));
        assert_eq!(
            val(Dialect::Postgres, tz, None),
            text("1969-12-31 23:59:59.999999+00")
        );
        let i: ArrayRef = Arc::new(Int32Array::from(vec![-7]));
        assert_eq!(val(Dialect::MySql, i.clone(), None), Cell::Int(-7));
        assert_eq!(val(Dialect::Postgres, i, None), text("-7"));
        // Quotes and backslashes are plain characters: nothing is escaped here.
        let s: ArrayRef = Arc::new(StringArray::from(vec!["it's a \\ test"]));
        assert_eq!(val(Dialect::MySql, s.clone(), None), text("it's a \\ test"));
        assert_eq!(val(Dialect::Postgres, s, None), text("it's a \\ test"));
        let b: ArrayRef = Arc::new(UInt64Array::from(vec![5]));
        assert_eq!(val(Dialect::Postgres, b.clone(), Some(4)), text("0101"));
        assert_eq!(val(Dialect::MySql, b, Some(4)), Cell::UInt(5));
        let f: ArrayRef = Arc::new(Float64Array::from(vec![f64::NAN]));
        assert_eq!(val(Dialect::Postgres, f.clone(), None), text("NaN"));
        let spec = ColSpec {
            ident: "c".into(),
            bits: None,
            boolean: false,
        };
        assert!(cell(Dialect::MySql, &f, 0, &spec).is_err());
    }
}
