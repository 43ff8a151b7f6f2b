//! PostgreSQL values in their text form (pgoutput tuples and `COPY ... TO STDOUT`,
//! both printed by the type's output function in a session with `DateStyle=ISO`,
//! `TimeZone=UTC`, `extra_float_digits=3`) into the Arrow builders the MySQL source
//! uses, so the sinks see the same Arrow types whatever the source:
//!
//! | PostgreSQL | Arrow |
//! |---|---|
//! | boolean | Int8 0/1 (the sinks' boolean path) |
//! | smallint, integer, bigint | Int16, Int32, Int64 |
//! | numeric(p,s), money | Decimal128(p,s); numeric without precision: Decimal256(76,30) (a value with more fraction digits, or NaN, is refused, never rounded; each target refuses what its type cannot hold) |
//! | real, double precision | Float32, Float64 (NaN, ±Infinity kept) |
//! | text, varchar, char, json, jsonb, enums, interval, arrays, numeric above 38 digits, any other type | Utf8 (its text form) |
//! | bytea | Binary |
//! | uuid | Binary (16 bytes) |
//! | date | Date32 |
//! | time, timetz | Duration(µs) (timetz: the time of day in UTC, as timestamptz is the instant in UTC) |
//! | timestamp | Timestamp(µs) |
//! | timestamptz | Timestamp(µs, UTC) |
//! | bit(n), n <= 64 | UInt64 |

use crate::source::decode::{append_decimal_text, ColBuilder, Kind};
use crate::source::DecodeError;
use ddl_core::{DataType, TimeZone};

/// How a column's text is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Bool,
    Int,
    /// numeric and money (`$1,234.50`: the currency sign and group separators dropped).
    Decimal,
    Float,
    Text,
    Bytea,
    Uuid,
    Date,
    Time,
    Timestamp,
    TimestampTz,
    Bit,
}

/// The decoder kind and text form of a column of IR type `t` (as the postgres
/// dialect reads the catalog's `format_type`).
pub fn kind_of(t: &DataType) -> (Kind, Form) {
    match t {
        DataType::Boolean => (
            Kind::Int {
                bytes: 1,
                unsigned: false,
            },
            Form::Bool,
        ),
        DataType::Int { bytes, .. } => (
            Kind::Int {
                bytes: (*bytes).max(2),
                unsigned: false,
            },
            Form::Int,
        ),
        // Read with 30 digits after the point and 46 before (what a 256-bit decimal
        // holds): each target takes what its own type holds (PostgreSQL every digit,
        // MariaDB's DECIMAL(65,30) up to 35 before the point, Iceberg's
        // decimal(38,10) up to 10 after it) and refuses the rest, never rounding.
        DataType::Decimal {
            precision: None, ..
        } => (
            Kind::Decimal {
                precision: 76,
                scale: 30,
            },
            Form::Decimal,
        ),
        DataType::Decimal {
            precision: Some(p),
            scale,
            ..
        } if *p <= 38 && scale.unwrap_or(0) >= 0 && scale.unwrap_or(0) as u32 <= *p => (
            Kind::Decimal {
                precision: *p as u8,
                scale: scale.unwrap_or(0) as i8,
            },
            Form::Decimal,
        ),
        DataType::Money => (
            Kind::Decimal {
                precision: 19,
                scale: 2,
            },
            Form::Decimal,
        ),
        DataType::Float { bytes: 4, .. } => (Kind::Float, Form::Float),
        DataType::Float { .. } => (Kind::Double, Form::Float),
        DataType::Varbinary { .. } | DataType::Blob { .. } | DataType::Binary { .. } => {
            (Kind::Binary, Form::Bytea)
        }
        DataType::Uuid => (Kind::Binary, Form::Uuid),
        DataType::Date => (Kind::Date, Form::Date),
        DataType::Time { .. } => (Kind::Time, Form::Time),
        DataType::Timestamp {
            tz: TimeZone::None, ..
        } => (Kind::DateTime, Form::Timestamp),
        DataType::Timestamp { .. } => (Kind::Timestamp, Form::TimestampTz),
        DataType::Bit {
            length: Some(n),
            varying: false,
        } if *n > 1 && *n <= 64 => (Kind::Bit, Form::Bit),
        DataType::Bit {
            length: Some(1) | None,
            varying: false,
        } => (
            Kind::Int {
                bytes: 1,
                unsigned: false,
            },
            Form::Bit,
        ),
        _ => (
            Kind::Text {
                charset: crate::source::decode::Charset::Utf8,
            },
            Form::Text,
        ),
    }
}

/// Append the text `s` of a value of form `f` to `b`.
pub fn append(b: &mut ColBuilder, f: Form, s: &str) -> Result<(), DecodeError> {
    match (f, b) {
        (Form::Bool, b) => b.append_int(match s {
            "t" | "true" => 1,
            "f" | "false" => 0,
            _ => return Err(format!("boolean {s:?}").into()),
        }),
        (Form::Int, b) => b.append_int(s.parse::<i128>().map_err(|e| format!("{s:?}: {e}"))?),
        (Form::Decimal, b) => {
            if s == "NaN" || s.ends_with("Infinity") {
                return Err(format!(
                    "numeric {s} has no decimal form (Iceberg and Arrow decimals hold numbers only)"
                )
                .into());
            }
            if s.contains(['$', ',']) || s.starts_with('(') {
                let neg = s.starts_with('-') || s.starts_with('(');
                let digits: String = s
                    .chars()
                    .filter(|c| c.is_ascii_digit() || *c == '.')
                    .collect();
                let t = if neg { format!("-{digits}") } else { digits };
                return append_decimal_text(b, t.as_bytes(), scale_of(b));
            }
            let scale = scale_of(b);
            append_decimal_text(b, s.as_bytes(), scale)
        }
        (Form::Float, ColBuilder::F64(fb)) => {
            fb.append_value(float(s)?);
            Ok(())
        }
        (Form::Float, ColBuilder::F32(fb)) => {
            fb.append_value(float(s)? as f32);
            Ok(())
        }
        (Form::Text, ColBuilder::Str(sb)) => {
            sb.append_value(s);
            Ok(())
        }
        (Form::Bytea, ColBuilder::Bin(bb)) => {
            bb.append_value(bytea(s)?);
            Ok(())
        }
        (Form::Uuid, ColBuilder::Bin(bb)) => {
            let hex: String = s.chars().filter(|c| *c != '-').collect();
            let v = hex_bytes(&hex).filter(|v| v.len() == 16);
            bb.append_value(v.ok_or_else(|| format!("uuid {s:?}"))?);
            Ok(())
        }
        (Form::Date, ColBuilder::Date(db)) => {
            db.append_value(date(s)? as i32);
            Ok(())
        }
        (Form::Time, ColBuilder::Dur(db)) => {
            let (t, off) = split_offset(s);
            let us = time(t).ok_or_else(|| format!("time {s:?}"))?;
            db.append_value(utc_time(us, off));
            Ok(())
        }
        (Form::Timestamp | Form::TimestampTz, ColBuilder::Ts(tb, _)) => {
            tb.append_value(timestamp(s, f == Form::TimestampTz)?);
            Ok(())
        }
        (Form::Bit, b) => {
            if s.len() > 64 || !s.bytes().all(|c| c == b'0' || c == b'1') {
                return Err(format!("bit string {s:?}").into());
            }
            let v = u64::from_str_radix(s, 2).map_err(|e| e.to_string())?;
            match b {
                ColBuilder::U64(ub) => {
                    ub.append_value(v);
                    Ok(())
                }
                b => b.append_int(v as i128),
            }
        }
        (f, _) => Err(format!("a {f:?} value into a column of another type").into()),
    }
}

fn scale_of(b: &ColBuilder) -> i8 {
    match b {
        ColBuilder::D128(_, _, s) | ColBuilder::D256(_, _, s) => *s,
        _ => 0,
    }
}

fn float(s: &str) -> Result<f64, DecodeError> {
    Ok(match s {
        "NaN" => f64::NAN,
        "Infinity" => f64::INFINITY,
        "-Infinity" => f64::NEG_INFINITY,
        _ => s.parse().map_err(|e| format!("float {s:?}: {e}"))?,
    })
}

fn hex_bytes(h: &str) -> Option<Vec<u8>> {
    if !h.len().is_multiple_of(2) {
        return None;
    }
    (0..h.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok())
        .collect()
}

/// bytea's output: `\x0a0b` (bytea_output = hex, the default), or the older escape
/// form (`a\\b\001`).
pub fn bytea(s: &str) -> Result<Vec<u8>, DecodeError> {
    if let Some(h) = s.strip_prefix("\\x") {
        return hex_bytes(h).ok_or_else(|| format!("bytea {s:?}").into());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            if b.get(i + 1) == Some(&b'\\') {
                out.push(b'\\');
                i += 2;
                continue;
            }
            let oct = s
                .get(i + 1..i + 4)
                .and_then(|o| u8::from_str_radix(o, 8).ok())
                .ok_or_else(|| format!("bytea {s:?}"))?;
            out.push(oct);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Ok(out)
}

/// `2024-02-29`, `0044-03-15 BC` -> days since 1970-01-01.
fn date(s: &str) -> Result<i64, DecodeError> {
    let bad = || DecodeError(format!("date {s:?} (infinite dates have no Arrow form)"));
    let (body, bc) = match s.strip_suffix(" BC") {
        Some(b) => (b, true),
        None => (s, false),
    };
    let mut it = body.splitn(3, '-');
    let y: i64 = it.next().and_then(|x| x.parse().ok()).ok_or_else(bad)?;
    let m: u32 = it.next().and_then(|x| x.parse().ok()).ok_or_else(bad)?;
    let d: u32 = it.next().and_then(|x| x.parse().ok()).ok_or_else(bad)?;
    // 1 BC is year 0 in the proleptic calendar.
    let y = if bc { 1 - y } else { y };
    Ok(crate::calendar::days_from_civil(y, m, d))
}

/// `13:45:00.5` -> µs since midnight.
fn time(s: &str) -> Option<i64> {
    let (hms, frac) = s.split_once('.').unwrap_or((s, ""));
    let mut it = hms.splitn(3, ':');
    let h: i64 = it.next()?.parse().ok()?;
    let m: i64 = it.next()?.parse().ok()?;
    let sec: i64 = it.next()?.parse().ok()?;
    if frac.len() > 6 || !frac.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let us: i64 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<6}").parse().ok()?
    };
    Some(((h * 60 + m) * 60 + sec) * 1_000_000 + us)
}

/// A time of day at `off` seconds east of UTC as the time of day in UTC (timetz:
/// the instant kept, the offset not; a time without an offset as it is, 24:00:00
/// included).
pub(super) fn utc_time(us: i64, off: i64) -> i64 {
    match off {
        0 => us,
        off => (us - off * 1_000_000).rem_euclid(86_400_000_000),
    }
}

/// A trailing `+05:30` / `-08` / `+00` offset, in seconds east of UTC.
fn split_offset(s: &str) -> (&str, i64) {
    let Some(i) = s.rfind(['+', '-']) else {
        return (s, 0);
    };
    // A date's dashes come before the time part.
    if !s[..i].contains(':') {
        return (s, 0);
    }
    let (body, off) = s.split_at(i);
    let sign = if off.starts_with('-') { -1 } else { 1 };
    let mut parts = off[1..].split(':').map(|p| p.parse::<i64>().unwrap_or(0));
    let h = parts.next().unwrap_or(0);
    let m = parts.next().unwrap_or(0);
    let sec = parts.next().unwrap_or(0);
    (body, sign * (h * 3600 + m * 60 + sec))
}

/// `2024-02-29 13:45:00.5[+00]` -> µs since the epoch (UTC for timestamptz).
fn timestamp(s: &str, tz: bool) -> Result<i64, DecodeError> {
    let bad = || {
        DecodeError(format!(
            "timestamp {s:?} (infinite timestamps have no Arrow form)"
        ))
    };
    let (body, bc) = match s.strip_suffix(" BC") {
        Some(b) => (b, true),
        None => (s, false),
    };
    let (body, off) = if tz { split_offset(body) } else { (body, 0) };
    let (d, t) = body.split_once(' ').ok_or_else(bad)?;
    let days = if bc {
        date(&format!("{d} BC"))?
    } else {
        date(d)?
    };
    let us = time(t).ok_or_else(bad)?;
    days.checked_mul(86_400_000_000)
        .and_then(|d| d.checked_add(us))
        .and_then(|v| v.checked_sub(off * 1_000_000))
        .ok_or_else(|| {
            DecodeError(format!(
                "timestamp {s:?} is outside what Arrow and Iceberg hold (microseconds since 1970 in 64 bits: 290308 BC to 294247 AD)"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(t: DataType, s: &str) -> Result<arrow_array::ArrayRef, DecodeError> {
        let (k, f) = kind_of(&t);
        let mut b = ColBuilder::new(&k);
        append(&mut b, f, s)?;
        Ok(b.finish())
    }

    fn show(t: DataType, s: &str) -> String {
        let a = one(t, s).unwrap();
        let f =
            arrow_cast::display::ArrayFormatter::try_new(a.as_ref(), &Default::default()).unwrap();
        let v = f.value(0).to_string();
        v
    }

    #[test]
    fn text_forms_become_the_same_values_as_the_mysql_source() {
        assert_eq!(show(DataType::Boolean, "t"), "1");
        assert_eq!(
            show(DataType::int(8), "-9223372036854775808"),
            "-9223372036854775808"
        );
        let num = |p, s| DataType::Decimal {
            precision: Some(p),
            scale: Some(s),
            unsigned: false,
        };
        assert_eq!(show(num(10, 2), "-12.5"), "-12.50");
        assert_eq!(show(DataType::Money, "-$1,234.50"), "-1234.50");
        assert!(one(num(10, 2), "NaN").is_err());
        assert!(one(num(10, 2), "1.234").is_err(), "never rounded");
        assert_eq!(
            show(
                DataType::Float {
                    bytes: 8,
                    unsigned: false
                },
                "-Infinity"
            ),
            "-inf"
        );
        assert_eq!(show(DataType::Date, "2024-02-29"), "2024-02-29");
        assert_eq!(show(DataType::Date, "0001-01-01 BC"), "0000-01-01");
        let ts = |tz| DataType::Timestamp { precision: 6, tz };
        assert_eq!(
            show(ts(TimeZone::None), "2024-02-29 13:45:00.5"),
            "2024-02-29T13:45:00.500"
        );
        assert_eq!(
            show(ts(TimeZone::Instant), "2024-02-29 13:45:00+05:30"),
            "2024-02-29T08:15:00Z"
        );
        assert!(one(ts(TimeZone::Instant), "infinity").is_err());
        assert_eq!(bytea("\\x00ff").unwrap(), vec![0, 255]);
        assert_eq!(bytea("a\\\\b\\001").unwrap(), b"a\\b\x01".to_vec());
        assert_eq!(
            show(DataType::Uuid, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
            "a0eebc999c0b4ef8bb6d6bb9bd380a11"
        );
        assert_eq!(
            show(
                DataType::Bit {
                    length: Some(4),
                    varying: false
                },
                "0101"
            ),
            "5"
        );
    }
}
