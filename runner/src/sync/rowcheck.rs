//! Values a target cannot hold, found before a row is written, and what happens to
//! the rows that hold them (`pipeline.row-error-policy`): the job stops naming table,
//! column, source position and reason (`fail`, the default), or the rows go to the
//! dead-letter file, whole, and the job goes on without them (`skip`). Nothing is
//! changed to fit: a TINYINT(1) value of -128 is not `true`, a NUL byte is not dropped.
//!
//! Error messages and logs name columns and reasons, never values (row data stays
//! out of logs); the dead-letter record holds the row.

use crate::source::position::Position;
use crate::sync::error::SyncError;
use arrow_array::cast::AsArray;
use arrow_array::types::{DurationMicrosecondType, Int8Type, UInt64Type};
use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch};
use arrow_cast::cast::{cast_with_options, CastOptions};
use arrow_schema::{DataType, SchemaRef};
use serde::Deserialize;
use std::path::Path;

/// What happens to a row holding a value the target cannot take.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum RowErrorPolicy {
    /// Stop the job with table, column, position and reason.
    #[default]
    Fail,
    /// Write the row to the dead-letter file and go on without it.
    Skip,
    /// Write the row to the dead-letter file and park its table: the table's later
    /// changes are held (as behind a parked DDL) until a person resolves the DDL log
    /// entry that names it (`lakeshift ddl-log --resolve N`); the other tables go on.
    /// Rows of an initial snapshot are dead-lettered as under `skip`.
    Park,
}

/// `park`: record the DDL log entry that parks `table` (the sink's name for it)
/// behind the first bad row of `b`, once per position (a replay finds it), and say
/// so. Whether the table is parked by it (an entry resolved since is not).
pub fn park(
    log: &mut crate::sync::ddllog::DdlLog,
    table: &str,
    b: &crate::source::RowBatch,
    bad: &[BadValue],
    dead_letter: &Path,
) -> Result<bool, SyncError> {
    use crate::sync::ddllog::{Entry, Status};
    let Some(first) = bad.first() else {
        return Ok(false);
    };
    let at = b.position_after(first.row);
    if let Some(i) = log.find(&at.to_string()) {
        return Ok(log.entries[i].status == Status::Parked);
    }
    let i = log.add(Entry::new(
        at.to_string(),
        &format!(
            "(row change of {}.{} the target cannot hold)",
            b.table.db, b.table.name
        ),
        vec![table.to_owned()],
        Status::Parked,
        Some(format!(
            "column {}: {} ({} such value(s); the rows are in {})",
            first.column,
            first.reason,
            bad.len(),
            dead_letter.display()
        )),
    ))?;
    tracing::warn!(
        "{table} parked at {at} (row-error-policy: park): a row holds values the target cannot take (in {}); its changes are held until `lakeshift ddl-log --resolve {}`",
        dead_letter.display(),
        log.entries[i].seq
    );
    Ok(true)
}

/// A value of row `row`, column `column`, that the target cannot hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadValue {
    pub row: usize,
    pub column: String,
    pub reason: String,
}

/// Values a TINYINT(1) column mapped to a boolean cannot hold: anything but 0 and 1.
fn not_boolean(a: &ArrayRef, column: &str, out: &mut Vec<BadValue>) {
    if let Some(v) = a.as_primitive_opt::<Int8Type>() {
        for (row, x) in v.iter().enumerate() {
            if let Some(x) = x.filter(|x| *x != 0 && *x != 1) {
                out.push(BadValue {
                    row,
                    column: column.to_owned(),
                    reason: format!(
                        "TINYINT(1) value {} is not a boolean (0 or 1)",
                        if x < 0 { "below 0" } else { "above 1" }
                    ),
                });
            }
        }
    }
}

/// Rows of `batch` (the source's Arrow types, columns named as the target's) whose
/// values the Iceberg schema `target` cannot hold.
pub fn iceberg(batch: &RecordBatch, target: &SchemaRef) -> Vec<BadValue> {
    let mut out = Vec::new();
    let src = batch.schema();
    for f in target.fields() {
        let Some(i) = src
            .fields()
            .iter()
            .position(|s| s.name().eq_ignore_ascii_case(f.name()))
        else {
            continue;
        };
        let a = batch.column(i);
        match (a.data_type(), f.data_type()) {
            (x, y) if x == y => {}
            (DataType::Int8, DataType::Boolean) => not_boolean(a, f.name(), &mut out),
            (DataType::Duration(_), DataType::Time64(_)) => {
                let v = a.as_primitive::<DurationMicrosecondType>();
                for (row, x) in v.iter().enumerate() {
                    if x.is_some_and(|us| !(0..86_400_000_000).contains(&us)) {
                        out.push(BadValue {
                            row,
                            column: f.name().clone(),
                            reason: "TIME value outside Iceberg's time of day (00:00-24:00)".into(),
                        });
                    }
                }
            }
            (DataType::UInt64, DataType::Int64) if super::convert::is_bit(batch, i) => {}
            (DataType::UInt64, DataType::Int64) => {
                let v = a.as_primitive::<UInt64Type>();
                for (row, x) in v.iter().enumerate() {
                    if x.is_some_and(|x| x > i64::MAX as u64) {
                        out.push(BadValue {
                            row,
                            column: f.name().clone(),
                            reason: "BIGINT UNSIGNED value above Iceberg long's maximum".into(),
                        });
                    }
                }
            }
            (from, to) if cannot_fail(from, to) => {}
            (_, to) => {
                // A decimal into one of a smaller scale: a value with digits past
                // it (the cast would round them away) does not fit.
                let cut = match (a.data_type(), to) {
                    (
                        DataType::Decimal128(_, s1) | DataType::Decimal256(_, s1),
                        DataType::Decimal128(_, s2) | DataType::Decimal256(_, s2),
                    ) if s1 > s2 => fraction_cut(a, (s1 - s2) as u32),
                    _ => Vec::new(),
                };
                for &row in &cut {
                    out.push(BadValue {
                        row,
                        column: f.name().clone(),
                        reason: format!("decimal value has digits past Iceberg {to}'s scale"),
                    });
                }
                // Any other conversion: a value the cast cannot make is one that
                // does not fit.
                let opts = CastOptions {
                    safe: true,
                    ..Default::default()
                };
                if let Ok(c) = cast_with_options(a, to, &opts) {
                    for row in 0..a.len() {
                        if a.is_valid(row) && c.is_null(row) && !cut.contains(&row) {
                            out.push(BadValue {
                                row,
                                column: f.name().clone(),
                                reason: format!(
                                    "{} value does not fit Iceberg {to}",
                                    a.data_type()
                                ),
                            });
                        }
                    }
                }
            }
        }
    }
    out
}

/// Rows of decimal array `a` whose last `digits` digits (of its scale) are not all
/// zero: a cast to `digits` less scale would round them.
pub fn fraction_cut(a: &ArrayRef, digits: u32) -> Vec<usize> {
    use arrow_array::types::{Decimal128Type, Decimal256Type};
    let mut out = Vec::new();
    if let Some(v) = a.as_primitive_opt::<Decimal128Type>() {
        let Some(m) = 10i128.checked_pow(digits) else {
            return (0..a.len())
                .filter(|&r| v.is_valid(r) && v.value(r) != 0)
                .collect();
        };
        out.extend((0..v.len()).filter(|&r| v.is_valid(r) && v.value(r) % m != 0));
    } else if let Some(v) = a.as_primitive_opt::<Decimal256Type>() {
        let m = arrow_buffer::i256::from_i128(10).wrapping_pow(digits);
        out.extend(
            (0..v.len()).filter(|&r| {
                v.is_valid(r) && v.value(r).wrapping_rem(m) != arrow_buffer::i256::ZERO
            }),
        );
    }
    out
}

/// Conversions every value survives (widening numbers, a decimal with more integer
/// digits and the same scale): no need to try them row by row on the hot path.
fn cannot_fail(from: &DataType, to: &DataType) -> bool {
    use DataType as D;
    let int_bits = |t: &D| match t {
        D::Int8 => Some((8, true)),
        D::Int16 => Some((16, true)),
        D::Int32 => Some((32, true)),
        D::Int64 => Some((64, true)),
        D::UInt8 => Some((8, false)),
        D::UInt16 => Some((16, false)),
        D::UInt32 => Some((32, false)),
        D::UInt64 => Some((64, false)),
        _ => None,
    };
    match (from, to) {
        (D::Float32, D::Float64) => true,
        (D::Decimal128(p1, s1), D::Decimal128(p2, s2)) => s1 == s2 && p1 <= p2,
        _ => match (int_bits(from), int_bits(to)) {
            // Signed into wider signed; unsigned into wider of either kind.
            (Some((a, true)), Some((b, true))) => a <= b,
            (Some((a, false)), Some((b, sb))) => a < b || (a == b && !sb),
            _ => false,
        },
    }
}

/// A target column of a relational sink, as far as its values' limits go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// PostgreSQL `boolean` (from MySQL TINYINT(1)): 0 or 1.
    Boolean,
    /// PostgreSQL text types: no NUL character.
    NoNul,
}

/// Rows whose values break a relational target's limits. `limits[i]`: the limit of
/// batch column `i`, if any.
pub fn relational(batch: &RecordBatch, limits: &[Option<Limit>]) -> Vec<BadValue> {
    let mut out = Vec::new();
    let schema = batch.schema();
    for (i, limit) in limits.iter().enumerate() {
        let name = schema.field(i).name();
        let a = batch.column(i);
        match limit {
            Some(Limit::Boolean) => not_boolean(a, name, &mut out),
            Some(Limit::NoNul) => {
                let mut check = |row: usize, s: &str| {
                    if s.contains('\0') {
                        out.push(BadValue {
                            row,
                            column: name.clone(),
                            reason:
                                "text holds a NUL character, which PostgreSQL text cannot store"
                                    .into(),
                        });
                    }
                };
                match a.data_type() {
                    DataType::Utf8 => {
                        for (row, s) in a.as_string::<i32>().iter().enumerate() {
                            if let Some(s) = s {
                                check(row, s);
                            }
                        }
                    }
                    DataType::LargeUtf8 => {
                        for (row, s) in a.as_string::<i64>().iter().enumerate() {
                            if let Some(s) = s {
                                check(row, s);
                            }
                        }
                    }
                    _ => {}
                }
            }
            None => {}
        }
    }
    out
}

/// Each row's size as statement parameters, about: text and binary values their
/// bytes, other values a fixed few, each with its length and type header.
pub fn param_sizes(batch: &RecordBatch) -> Vec<usize> {
    let mut out = vec![0usize; batch.num_rows()];
    for c in batch.columns() {
        let lens: Box<dyn Fn(usize) -> usize> = match c.data_type() {
            DataType::Utf8 => {
                let a = c.as_string::<i32>();
                Box::new(move |r| a.value(r).len())
            }
            DataType::LargeUtf8 => {
                let a = c.as_string::<i64>();
                Box::new(move |r| a.value(r).len())
            }
            DataType::Binary => {
                let a = c.as_binary::<i32>();
                Box::new(move |r| a.value(r).len())
            }
            DataType::LargeBinary => {
                let a = c.as_binary::<i64>();
                Box::new(move |r| a.value(r).len())
            }
            _ => Box::new(|_| 32),
        };
        for (r, size) in out.iter_mut().enumerate() {
            *size += 12 + if c.is_null(r) { 0 } else { lens(r) };
        }
    }
    out
}

/// The rows to keep: every row but the bad ones.
fn keep_mask(n: usize, bad: &[BadValue]) -> BooleanArray {
    let mut keep = vec![true; n];
    for b in bad {
        keep[b.row] = false;
    }
    BooleanArray::from(keep)
}

/// Where a bad row came from, for messages and dead-letter records.
struct RowOrigin<'a> {
    pub table: &'a str,
    pub op: &'a str,
    /// The source position of each row (`None`: the snapshot's for every row).
    pub position: &'a dyn Fn(usize) -> Position,
}

/// Apply the policy to the bad values of one batch of rows (`images`: the batch's
/// row images, before and/or after, row-aligned). `Fail`: the error. `Skip`: one
/// dead-letter record per bad row (each value as text, the row's columns by name);
/// the caller drops the rows.
fn settle(
    policy: RowErrorPolicy,
    dead_letter: &Path,
    origin: &RowOrigin<'_>,
    images: &[(&str, &RecordBatch)],
    bad: &[BadValue],
) -> Result<(), SyncError> {
    let Some(first) = bad.first() else {
        return Ok(());
    };
    if policy == RowErrorPolicy::Fail {
        return Err(format!(
            "table {} column {}: {} ({} at {}; {} such value(s) in this batch); the target cannot hold it. Set `pipeline.row-error-policy: skip` to write such rows to the dead-letter file ({}) and go on without them (`park` also holds the table's later changes until resolved), or change the target column's type (for TINYINT(1) into Iceberg: `sink.tinyint1: int`)",
            origin.table,
            first.column,
            first.reason,
            origin.op,
            (origin.position)(first.row),
            bad.len(),
            dead_letter.display()
        )
        .into());
    }
    if let Some(d) = dead_letter.parent() {
        std::fs::create_dir_all(d).map_err(|x| format!("{}: {x}", d.display()))?;
    }
    let mut rows: Vec<usize> = bad.iter().map(|b| b.row).collect();
    rows.sort_unstable();
    rows.dedup();
    for row in rows {
        let reasons: Vec<serde_json::Value> = bad
            .iter()
            .filter(|b| b.row == row)
            .map(|b| serde_json::json!({"column": b.column, "reason": b.reason}))
            .collect();
        let mut record = serde_json::json!({
            "kind": "row",
            "table": origin.table,
            "op": origin.op,
            "position": (origin.position)(row).to_string(),
            "problems": reasons,
        });
        for (label, b) in images {
            record[*label] = row_json(b, row)?;
        }
        crate::durable::append_line(dead_letter, &record.to_string())
            .map_err(|x| format!("{}: {x}", dead_letter.display()))?;
    }
    tracing::warn!(
        "table {}: {} row(s) with values the target cannot hold written to {} (row-error-policy: skip)",
        origin.table,
        bad.iter().map(|b| b.row).collect::<std::collections::BTreeSet<_>>().len(),
        dead_letter.display()
    );
    Ok(())
}

/// Snapshot rows of `table` read at `at` without the rows holding bad values, once
/// the policy had them (an error, or dead-letter records).
pub fn settle_snapshot(
    policy: RowErrorPolicy,
    dead_letter: &Path,
    table: &str,
    at: &Position,
    rows: RecordBatch,
    bad: &[BadValue],
) -> Result<RecordBatch, SyncError> {
    if bad.is_empty() {
        return Ok(rows);
    }
    let position = |_| at.clone();
    let origin = RowOrigin {
        table,
        op: "snapshot",
        position: &position,
    };
    settle(policy, dead_letter, &origin, &[("after", &rows)], bad)?;
    let keep = keep_mask(rows.num_rows(), bad);
    Ok(arrow_select::filter::filter_record_batch(&rows, &keep).map_err(|e| e.to_string())?)
}

/// A batch of row changes without the rows holding bad values, once the policy had
/// them (`images`: the row images the values were found in, as records show them).
/// None: no row left.
pub fn settle_changes(
    policy: RowErrorPolicy,
    dead_letter: &Path,
    b: &crate::source::RowBatch,
    images: &[(&str, &RecordBatch)],
    bad: &[BadValue],
) -> Result<Option<crate::source::RowBatch>, SyncError> {
    let name = format!("{}.{}", b.table.db, b.table.name);
    let op = format!("{:?}", b.op).to_lowercase();
    let position = |i: usize| b.position_after(i);
    let origin = RowOrigin {
        table: &name,
        op: &op,
        position: &position,
    };
    settle(policy, dead_letter, &origin, images, bad)?;
    let kept = b
        .filter(&keep_mask(b.num_rows(), bad))
        .map_err(|e| e.to_string())?;
    Ok((kept.num_rows() > 0).then_some(kept))
}

/// One row as a JSON object: each value as text (binary as hex), NULL as null.
fn row_json(b: &RecordBatch, row: usize) -> Result<serde_json::Value, SyncError> {
    use arrow_cast::display::{ArrayFormatter, FormatOptions};
    let mut m = serde_json::Map::new();
    for (f, c) in b.schema().fields().iter().zip(b.columns()) {
        let v = if c.is_null(row) {
            serde_json::Value::Null
        } else {
            let fmt = ArrayFormatter::try_new(c.as_ref(), &FormatOptions::default())
                .map_err(|e| e.to_string())?;
            serde_json::Value::String(fmt.value(row).to_string())
        };
        m.insert(f.name().clone(), v);
    }
    Ok(serde_json::Value::Object(m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int8Array, StringArray};
    use arrow_schema::{Field, Schema};
    use std::sync::Arc;

    /// A cast to a smaller scale rounds (arrow's does, quietly): values with digits
    /// past it are refused instead, whatever the cast says.
    #[test]
    fn decimals_with_digits_past_the_targets_scale_do_not_fit() {
        use arrow_array::Decimal256Array;
        use arrow_buffer::i256;
        let at30 = |s: &str| i256::from_string(s).unwrap();
        // 1/3 to 20 places, 1.5, -0.25, 1e-30, NULL; all at scale 30.
        let a: ArrayRef = Arc::new(
            Decimal256Array::from(vec![
                Some(at30("333333333333333333330000000000")),
                Some(at30("1500000000000000000000000000000")),
                Some(at30("-250000000000000000000000000000")),
                Some(at30("-1")),
                None,
            ])
            .with_precision_and_scale(76, 30)
            .unwrap(),
        );
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new(
                "v",
                a.data_type().clone(),
                true,
            )])),
            vec![a.clone()],
        )
        .unwrap();
        let target = Arc::new(Schema::new(vec![Field::new(
            "v",
            DataType::Decimal128(38, 10),
            true,
        )]));
        let rows: Vec<usize> = iceberg(&batch, &target).iter().map(|b| b.row).collect();
        assert_eq!(rows, [0, 3]);
        assert_eq!(fraction_cut(&a, 20), [0, 3]);
        assert!(crate::sync::convert::to_iceberg("t", &batch, &target).is_err());
        let fits = batch.slice(1, 2);
        let out = crate::sync::convert::to_iceberg("t", &fits, &target).unwrap();
        assert_eq!(
            arrow_cast::display::array_value_to_string(out.column(0), 0).unwrap(),
            "1.5000000000"
        );
    }

    #[test]
    fn only_lossy_conversions_are_tried_row_by_row() {
        assert!(cannot_fail(&DataType::Int8, &DataType::Int32));
        assert!(cannot_fail(&DataType::UInt32, &DataType::Int64));
        assert!(!cannot_fail(&DataType::UInt64, &DataType::Int64));
        assert!(!cannot_fail(&DataType::Int64, &DataType::Int32));
        assert!(cannot_fail(
            &DataType::Decimal128(10, 2),
            &DataType::Decimal128(12, 2)
        ));
        assert!(!cannot_fail(&DataType::Utf8, &DataType::Int32));
    }

    #[test]
    fn booleans_and_nuls_are_found_by_row_and_column() {
        let b = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("flag", DataType::Int8, true),
                Field::new("s", DataType::Utf8, true),
            ])),
            vec![
                Arc::new(Int8Array::from(vec![Some(1), Some(-128), None, Some(0)])),
                Arc::new(StringArray::from(vec![
                    Some("a"),
                    Some("b"),
                    Some("c\0d"),
                    None,
                ])),
            ],
        )
        .unwrap();
        let bad = relational(&b, &[Some(Limit::Boolean), Some(Limit::NoNul)]);
        let at: Vec<(usize, &str)> = bad.iter().map(|x| (x.row, x.column.as_str())).collect();
        assert_eq!(at, [(1, "flag"), (2, "s")]);
        let target = Arc::new(Schema::new(vec![
            Field::new("flag", DataType::Boolean, true),
            Field::new("s", DataType::Utf8, true),
        ]));
        let bad = iceberg(&b, &target);
        assert_eq!(bad.len(), 1);
        assert_eq!((bad[0].row, bad[0].column.as_str()), (1, "flag"));
        assert!(!bad[0].reason.contains("128"), "no values in messages");
        assert_eq!(
            keep_mask(4, &bad).iter().collect::<Vec<_>>(),
            [Some(true), Some(false), Some(true), Some(true)]
        );
    }
}
