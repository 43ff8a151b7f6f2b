//! Source rows (Arrow, the source's lossless types) as SQL literals of a target
//! dialect, and the statements that apply them: multi-row upserts and deletes by key.
//!
//! PostgreSQL: every value is a quoted literal; in `INSERT ... VALUES` and in
//! comparisons with a column PostgreSQL coerces it to the column's type (a MySQL
//! `TINYINT(1)` value `'1'` into `boolean`, `'0101'` into `bit(4)`). MySQL: numbers
//! are bare, binary values hex, the rest quoted.

use crate::sync::error::SyncError;
use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::{DataType as A, TimeUnit};
use dialects::emit::string_literal;
use dialects::Dialect;
use std::fmt::Write;

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

/// Write row `row` of `col` as a literal.
pub fn literal(
    out: &mut String,
    d: Dialect,
    col: &ArrayRef,
    row: usize,
    spec: &ColSpec,
) -> Result<(), SyncError> {
    if col.is_null(row) {
        out.push_str("NULL");
        return Ok(());
    }
    let pg = d == Dialect::Postgres;
    macro_rules! num {
        ($t:ty) => {{
            let v = col.as_primitive::<$t>().value(row);
            if pg {
                let _ = write!(out, "'{v}'");
            } else {
                let _ = write!(out, "{v}");
            }
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
            match (spec.bits, pg) {
                (Some(n), true) => {
                    let n = n.clamp(1, 64) as usize;
                    let _ = write!(out, "'{:0n$b}'", v, n = n);
                }
                (_, true) => {
                    let _ = write!(out, "'{v}'");
                }
                (_, false) => {
                    let _ = write!(out, "{v}");
                }
            }
        }
        A::Float32 => float(out, col.as_primitive::<Float32Type>().value(row) as f64, pg)?,
        A::Float64 => float(out, col.as_primitive::<Float64Type>().value(row), pg)?,
        A::Boolean => {
            let v = col.as_boolean().value(row);
            out.push_str(match (v, pg) {
                (true, true) => "'t'",
                (false, true) => "'f'",
                (true, false) => "1",
                (false, false) => "0",
            });
        }
        A::Utf8 => out.push_str(&string_literal(d, col.as_string::<i32>().value(row))),
        A::LargeUtf8 => out.push_str(&string_literal(d, col.as_string::<i64>().value(row))),
        A::Binary | A::LargeBinary => {
            let b: &[u8] = if matches!(col.data_type(), A::Binary) {
                col.as_binary::<i32>().value(row)
            } else {
                col.as_binary::<i64>().value(row)
            };
            out.push_str(if pg { "'\\x" } else { "X'" });
            for x in b {
                let _ = write!(out, "{x:02x}");
            }
            out.push('\'');
        }
        A::Duration(TimeUnit::Microsecond) => {
            let v = col.as_primitive::<DurationMicrosecondType>().value(row);
            let sign = if v < 0 { "-" } else { "" };
            let a = v.unsigned_abs();
            let (s, us) = (a / 1_000_000, a % 1_000_000);
            let _ = write!(
                out,
                "'{sign}{:02}:{:02}:{:02}.{us:06}'",
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
                "'{y:04}-{m:02}-{dd:02} {:02}:{:02}:{:02}.{:06}{}'",
                s / 3600,
                s / 60 % 60,
                s % 60,
                us % 1_000_000,
                if tz.is_some() && pg { "+00" } else { "" }
            );
        }
        A::Date32 => {
            let (y, m, dd) = civil_from_days(col.as_primitive::<Date32Type>().value(row) as i64);
            let _ = write!(out, "'{y:04}-{m:02}-{dd:02}'");
        }
        A::Decimal128(..) | A::Decimal256(..) => {
            let f = ArrayFormatter::try_new(col.as_ref(), &FormatOptions::default())
                .map_err(|e| e.to_string())?;
            let v = f.value(row).to_string();
            if pg {
                let _ = write!(out, "'{v}'");
            } else {
                out.push_str(&v);
            }
        }
        other => return Err(format!("no target literal for Arrow type {other}").into()),
    }
    Ok(())
}

fn float(out: &mut String, v: f64, pg: bool) -> Result<(), SyncError> {
    if v.is_finite() {
        let _ = if pg {
            write!(out, "'{v:?}'")
        } else {
            write!(out, "{v:?}")
        };
        Ok(())
    } else if pg {
        out.push_str(if v.is_nan() {
            "'NaN'"
        } else if v > 0.0 {
            "'Infinity'"
        } else {
            "'-Infinity'"
        });
        Ok(())
    } else {
        Err(format!("{v} cannot be stored in MySQL").into())
    }
}

use crate::calendar::civil_from_days;

/// A row as `(v1, v2, ...)` over the given batch columns; a target column the batch
/// lacks (None) is `DEFAULT`.
pub fn tuple(
    out: &mut String,
    d: Dialect,
    b: &RecordBatch,
    cols: &[(Option<usize>, &ColSpec)],
    row: usize,
) -> Result<(), SyncError> {
    out.push('(');
    for (i, (c, spec)) in cols.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        match c {
            Some(c) => literal(out, d, b.column(*c), row, spec)?,
            None => out.push_str("DEFAULT"),
        }
    }
    out.push(')');
    Ok(())
}

/// `INSERT ... VALUES rows ... ON CONFLICT/ON DUPLICATE KEY ...` (an upsert) or a
/// plain insert when the table has no key.
pub fn insert(
    d: Dialect,
    table: &str,
    cols: &[&ColSpec],
    key: &[&ColSpec],
    rows: &[&str],
) -> String {
    let names: Vec<&str> = cols.iter().map(|c| c.ident.as_str()).collect();
    let mut s = format!("INSERT INTO {table} ({}) VALUES ", names.join(", "));
    s.push_str(&rows.join(", "));
    if key.is_empty() {
        return s;
    }
    let rest: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !key.iter().any(|k| k.ident == *n))
        .collect();
    match d {
        Dialect::Postgres => {
            let keys: Vec<&str> = key.iter().map(|k| k.ident.as_str()).collect();
            let _ = write!(s, " ON CONFLICT ({}) DO ", keys.join(", "));
            if rest.is_empty() {
                s.push_str("NOTHING");
            } else {
                s.push_str("UPDATE SET ");
                let sets: Vec<String> =
                    rest.iter().map(|n| format!("{n} = EXCLUDED.{n}")).collect();
                s.push_str(&sets.join(", "));
            }
        }
        _ => {
            s.push_str(" ON DUPLICATE KEY UPDATE ");
            let sets: Vec<String> = if rest.is_empty() {
                vec![format!("{0} = {0}", key[0].ident)]
            } else {
                rest.iter().map(|n| format!("{n} = VALUES({n})")).collect()
            };
            s.push_str(&sets.join(", "));
        }
    }
    s
}

/// `(k1, k2) IN ((..), (..))` (a single column: `k IN ((v), ..)`, valid SQL).
pub fn key_in(key: &[&ColSpec], keys: &[&str]) -> String {
    let names: Vec<&str> = key.iter().map(|k| k.ident.as_str()).collect();
    if names.len() == 1 {
        format!("{} IN ({})", names[0], keys.join(", "))
    } else {
        format!("({}) IN ({})", names.join(", "), keys.join(", "))
    }
}

/// `DELETE ... WHERE (k1, k2) IN ((..), (..))`.
pub fn delete(table: &str, key: &[&ColSpec], keys: &[&str]) -> String {
    format!("DELETE FROM {table} WHERE {}", key_in(key, keys))
}

/// Delete one row equal to `row` in every column (keyless tables): NULLs compare with
/// IS NULL; one matching row goes, not every duplicate.
pub fn delete_one(
    d: Dialect,
    table: &str,
    b: &RecordBatch,
    cols: &[(usize, &ColSpec)],
    row: usize,
) -> Result<String, SyncError> {
    let mut cond = Vec::new();
    for (c, spec) in cols {
        let mut v = String::new();
        literal(&mut v, d, b.column(*c), row, spec)?;
        cond.push(if v == "NULL" {
            format!("{} IS NULL", spec.ident)
        } else {
            format!("{} = {v}", spec.ident)
        });
    }
    let cond = cond.join(" AND ");
    Ok(match d {
        Dialect::Postgres => format!(
            "DELETE FROM {table} WHERE ctid = (SELECT ctid FROM {table} WHERE {cond} LIMIT 1)"
        ),
        _ => format!("DELETE FROM {table} WHERE {cond} LIMIT 1"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int32Array, StringArray, TimestampMicrosecondArray, UInt64Array};
    use std::sync::Arc;

    fn lit(d: Dialect, a: ArrayRef, bits: Option<u32>) -> String {
        let mut s = String::new();
        literal(
            &mut s,
            d,
            &a,
            0,
            &ColSpec {
                ident: "c".into(),
                bits,
                boolean: false,
            },
        )
        .unwrap();
        s
    }

    #[test]
    fn literals_per_dialect() {
        let ts: ArrayRef = Arc::new(TimestampMicrosecondArray::from(vec![1_700_000_000_123_456]));
        assert_eq!(
            lit(Dialect::MySql, ts.clone(), None),
            "'2023-11-14 22:13:20.123456'"
        );
        let tz: ArrayRef =
            Arc::new(TimestampMicrosecondArray::from(vec![-1]).with_timezone("+00:00"));
        assert_eq!(
            lit(Dialect::Postgres, tz, None),
            "'1969-12-31 23:59:59.999999+00'"
        );
        let i: ArrayRef = Arc::new(Int32Array::from(vec![-7]));
        assert_eq!(lit(Dialect::MySql, i.clone(), None), "-7");
        assert_eq!(lit(Dialect::Postgres, i, None), "'-7'");
        let s: ArrayRef = Arc::new(StringArray::from(vec!["it's a \\ test"]));
        assert_eq!(lit(Dialect::MySql, s.clone(), None), "'it''s a \\\\ test'");
        assert_eq!(lit(Dialect::Postgres, s, None), "'it''s a \\ test'");
        let b: ArrayRef = Arc::new(UInt64Array::from(vec![5]));
        assert_eq!(lit(Dialect::Postgres, b.clone(), Some(4)), "'0101'");
        assert_eq!(lit(Dialect::MySql, b, Some(4)), "5");
    }
}
