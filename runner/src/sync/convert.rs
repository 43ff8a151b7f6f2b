//! Source batches (lossless MySQL Arrow types) into an Iceberg table's Arrow schema,
//! column by column by name, with the Iceberg mapping's conversions. A value that does
//! not fit (a TIME beyond 24 h into Iceberg `time`, an unsigned 64-bit value into
//! `long`) is an error naming table and column, never a silent change.

use crate::sync::error::SyncError;
use arrow_array::{
    new_null_array, Array, ArrayRef, BooleanArray, DurationMicrosecondArray, Int8Array,
    RecordBatch, Time64MicrosecondArray, UInt64Array,
};
use arrow_cast::cast::{cast_with_options, CastOptions};
use arrow_schema::{DataType, SchemaRef};
use std::sync::Arc;

pub fn to_iceberg(
    table: &str,
    batch: &RecordBatch,
    target: &SchemaRef,
) -> Result<RecordBatch, SyncError> {
    let cols = to_iceberg_columns(table, batch, target)?;
    Ok(RecordBatch::try_new(target.clone(), cols).map_err(|e| format!("table {table}: {e}"))?)
}

/// `to_iceberg`'s columns, before they are checked against the target schema
/// (required columns may still hold NULLs to be filled).
pub fn to_iceberg_columns(
    table: &str,
    batch: &RecordBatch,
    target: &SchemaRef,
) -> Result<Vec<ArrayRef>, SyncError> {
    let src = batch.schema();
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(target.fields().len());
    for f in target.fields() {
        let idx = src
            .fields()
            .iter()
            .position(|s| s.name() == f.name())
            .or_else(|| {
                src.fields()
                    .iter()
                    .position(|s| s.name().eq_ignore_ascii_case(f.name()))
            });
        let Some(i) = idx else {
            if !f.is_nullable() {
                return Err(format!(
                    "table {table}: required column {} has no source column",
                    f.name()
                )
                .into());
            }
            cols.push(new_null_array(f.data_type(), batch.num_rows()));
            continue;
        };
        let a = batch.column(i);
        let err = |e: String| format!("table {table} column {}: {e}", f.name());
        let out: ArrayRef = match (a.data_type(), f.data_type()) {
            (x, y) if x == y => a.clone(),
            (DataType::Int8, DataType::Boolean) => {
                // TINYINT(1): 0 and 1 only (the row check sends other values to the
                // row-error policy first); anything else here is an error, never `true`.
                let v = a.as_any().downcast_ref::<Int8Array>().expect("int8");
                if v.iter().flatten().any(|x| x != 0 && x != 1) {
                    return Err(err("TINYINT(1) value is not a boolean (0 or 1)".into()).into());
                }
                Arc::new(
                    v.iter()
                        .map(|x| x.map(|x| x != 0))
                        .collect::<BooleanArray>(),
                )
            }
            (DataType::UInt64, DataType::Int64) if is_bit(batch, i) => {
                // BIT(n): the bits as a signed long.
                let v = a.as_any().downcast_ref::<UInt64Array>().expect("uint64");
                Arc::new(
                    v.iter()
                        .map(|x| x.map(|x| x as i64))
                        .collect::<arrow_array::Int64Array>(),
                )
            }
            (DataType::Duration(_), DataType::Time64(_)) => {
                let v = a
                    .as_any()
                    .downcast_ref::<DurationMicrosecondArray>()
                    .expect("duration");
                let mut out = Vec::with_capacity(v.len());
                for x in v.iter() {
                    match x {
                        Some(us) if !(0..86_400_000_000).contains(&us) => {
                            return Err(err(format!(
                                "TIME value {us} µs is outside Iceberg's time of day (00:00-24:00)"
                            ))
                            .into())
                        }
                        other => out.push(other),
                    }
                }
                Arc::new(Time64MicrosecondArray::from(out))
            }
            (
                DataType::Decimal128(_, s1) | DataType::Decimal256(_, s1),
                DataType::Decimal128(_, s2) | DataType::Decimal256(_, s2),
            ) if s1 > s2 && !super::rowcheck::fraction_cut(a, (s1 - s2) as u32).is_empty() => {
                // The cast would round them (the row check sends such rows to the
                // row-error policy first).
                return Err(err(format!(
                    "a decimal value has digits past the scale of {}",
                    f.data_type()
                ))
                .into());
            }
            (_, to) => cast_with_options(
                a,
                to,
                &CastOptions {
                    safe: false,
                    ..Default::default()
                },
            )
            .map_err(|e| err(e.to_string()))?,
        };
        cols.push(out);
    }
    Ok(cols)
}

pub fn is_bit(batch: &RecordBatch, i: usize) -> bool {
    batch
        .schema()
        .field(i)
        .metadata()
        .get("mysql.type")
        .is_some_and(|t| t == "bit")
}

/// Stable bytes of a row's key columns (for folding changes to one key).
pub fn key_bytes(batch: &RecordBatch, cols: &[usize], row: usize, out: &mut Vec<u8>) {
    use arrow_array::*;
    out.clear();
    for &c in cols {
        let a = batch.column(c);
        if a.is_null(row) {
            out.push(0);
            continue;
        }
        out.push(1);
        macro_rules! prim {
            ($t:ty) => {
                out.extend_from_slice(
                    &a.as_any()
                        .downcast_ref::<$t>()
                        .unwrap()
                        .value(row)
                        .to_le_bytes(),
                )
            };
        }
        match a.data_type() {
            DataType::Int8 => prim!(Int8Array),
            DataType::Int16 => prim!(Int16Array),
            DataType::Int32 => prim!(Int32Array),
            DataType::Int64 => prim!(Int64Array),
            DataType::UInt8 => prim!(UInt8Array),
            DataType::UInt16 => prim!(UInt16Array),
            DataType::UInt32 => prim!(UInt32Array),
            DataType::UInt64 => prim!(UInt64Array),
            DataType::Date32 => prim!(Date32Array),
            DataType::Decimal128(..) => prim!(Decimal128Array),
            DataType::Utf8 => {
                let s = a.as_any().downcast_ref::<StringArray>().unwrap().value(row);
                out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
            DataType::Binary => {
                let s = a.as_any().downcast_ref::<BinaryArray>().unwrap().value(row);
                out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                out.extend_from_slice(s);
            }
            _ => {
                let s = arrow_cast::display::ArrayFormatter::try_new(
                    a.as_ref(),
                    &arrow_cast::display::FormatOptions::default(),
                )
                .map(|f| f.value(row).to_string())
                .unwrap_or_default();
                out.extend_from_slice(&(s.len() as u32).to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
        }
    }
}
