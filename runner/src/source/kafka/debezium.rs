//! Debezium's JSON change events: the envelope, the source position, and row images
//! decoded with the table's definition into the same Arrow values as the binlog.

use super::*;

/// The unwrapped Debezium value (`payload` of a `{schema, payload}` envelope).
pub(super) fn payload(v: J) -> J {
    match v {
        J::Object(mut m) if m.contains_key("payload") && m.contains_key("schema") => {
            m.remove("payload").unwrap_or(J::Null)
        }
        v => v,
    }
}

/// The source position in a Debezium `source` block.
pub(super) fn position_of(source: &J) -> Option<Position> {
    let file = source.get("file")?.as_str()?;
    let pos = source.get("pos")?.as_u64()?;
    let mut p = Position::new(file, pos);
    p.ordinal = source.get("row").and_then(J::as_u64).unwrap_or(0) + 1;
    Some(p)
}

/// One Debezium row image (a JSON object by column name) as a one-row batch.
/// `whole`: the image must name exactly the table's columns (an after image; a
/// before image of a keyless table, which identifies its row by every value). A
/// keyed table's before image only identifies its row: its key must be there.
pub(super) fn decode_row(
    t: &Arc<SourceTable>,
    row: &J,
    whole: bool,
) -> Result<arrow_array::RecordBatch, DecodeError> {
    let obj = row
        .as_object()
        .ok_or_else(|| format!("{}.{}: a row image that is not an object", t.db, t.name))?;
    // The image and the captured definition name the same columns: a field more
    // would be dropped, a field less written as NULL over the row's value (envelope
    // drift: the producer's schema changed without a DDL in the schema topic).
    let drift = |what: String| {
        format!(
            "{}.{}: {what}; the producer's schema changed without a DDL in the schema topic (the message follows the row-error policy; fix the schema topic, then re-read the table)",
            t.db, t.name
        )
    };
    let whole = whole || t.key.is_empty();
    if let Some(k) = obj
        .keys()
        .find(|k| !t.columns.iter().any(|c| c.name.eq_ignore_ascii_case(k)))
        .filter(|_| whole)
    {
        return Err(drift(format!(
            "the row image has a field `{k}` that the table's captured definition lacks"
        ))
        .into());
    }
    let mut b = RowsBuilder::new(t.clone());
    for (i, c) in t.columns.iter().enumerate() {
        let v = obj
            .get(&c.name)
            .or_else(|| {
                obj.iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(&c.name))
                    .map(|(_, v)| v)
            })
            .or((!whole && !t.key.contains(&i)).then_some(&J::Null))
            .ok_or_else(|| {
                drift(format!(
                    "the row image lacks column `{}` of the table's captured definition",
                    c.name
                ))
            })?;
        let ir = &t.ir.columns[i];
        let mv = to_mysql(v, &c.kind, &ir.data_type)
            .map_err(|e| format!("{}.{} column {}: {e}", t.db, t.name, c.name))?;
        let ctx = Ctx {
            zero_dates_fail: false,
            column: &c.name,
        };
        append_snapshot_value(&mut b.cols[i], c, &mv, &ctx)
            .map_err(|e| format!("{}.{} column {}: {e}", t.db, t.name, c.name))?;
    }
    b.rows = 1;
    Ok(b.finish())
}

/// A Debezium JSON value as the MySQL value the snapshot decoder takes.
pub(super) fn to_mysql(
    v: &J,
    kind: &Kind,
    ty: &ddl_core::DataType,
) -> Result<mysql_async::Value, DecodeError> {
    use mysql_async::Value as V;
    let b64 = |s: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(|e| format!("`{s}` is not base64: {e}"))
    };
    Ok(match (v, kind) {
        (J::Null, _) => V::NULL,
        (J::Bool(x), _) => V::Int(*x as i64),
        (J::Number(n), Kind::Float | Kind::Double) => V::Double(n.as_f64().unwrap_or(0.0)),
        (J::Number(n), Kind::Decimal { .. }) => V::Bytes(n.to_string().into_bytes()),
        (J::String(s), Kind::Decimal { scale, .. }) => {
            if s.parse::<f64>().is_ok() {
                V::Bytes(s.clone().into_bytes())
            } else {
                // Debezium's `precise` mode: the unscaled value, big-endian two's complement.
                let raw = b64(s)?;
                let mut x: i128 = if raw.first().is_some_and(|b| b & 0x80 != 0) {
                    -1
                } else {
                    0
                };
                for byte in raw {
                    x = (x << 8) | byte as i128;
                }
                V::Bytes(scaled(x, *scale).into_bytes())
            }
        }
        (J::Number(n), Kind::Date) => {
            let (y, m, d) = crate::calendar::civil_from_days(n.as_i64().unwrap_or(0));
            V::Date(y as u16, m as u8, d as u8, 0, 0, 0, 0)
        }
        (J::Number(n), Kind::DateTime | Kind::Timestamp) => {
            let precision = match ty {
                ddl_core::DataType::Timestamp { precision, .. } => *precision,
                _ => 0,
            };
            let n = n.as_i64().unwrap_or(0);
            date_from_micros(if precision > 3 { n } else { n * 1000 })
        }
        (J::String(s), Kind::DateTime | Kind::Timestamp | Kind::Date) => iso(s)?,
        (J::Number(n), Kind::Time) => {
            let us = n.as_i64().unwrap_or(0);
            let a = us.unsigned_abs();
            let secs = a / 1_000_000;
            V::Time(
                us < 0,
                (secs / 86_400) as u32,
                (secs / 3600 % 24) as u8,
                (secs / 60 % 60) as u8,
                (secs % 60) as u8,
                (a % 1_000_000) as u32,
            )
        }
        (J::Number(n), _) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => V::Int(i),
            (None, Some(u)) => V::UInt(u),
            _ => V::Double(n.as_f64().unwrap_or(0.0)),
        },
        (J::String(s), Kind::Binary | Kind::FixedBinary(_) | Kind::Bit) => V::Bytes(b64(s)?),
        (J::String(s), _) => V::Bytes(s.clone().into_bytes()),
        (other, _) => V::Bytes(other.to_string().into_bytes()),
    })
}

pub(super) fn scaled(x: i128, scale: i8) -> String {
    let mut out = String::new();
    crate::digits::decimal(&mut out, x, scale.max(0) as usize);
    out
}

pub(super) fn date_from_micros(us: i64) -> mysql_async::Value {
    let days = us.div_euclid(86_400_000_000);
    let rest = us.rem_euclid(86_400_000_000);
    let (y, m, d) = crate::calendar::civil_from_days(days);
    let s = rest / 1_000_000;
    mysql_async::Value::Date(
        y as u16,
        m as u8,
        d as u8,
        (s / 3600) as u8,
        (s / 60 % 60) as u8,
        (s % 60) as u8,
        (rest % 1_000_000) as u32,
    )
}

/// `2024-01-02`, `2024-01-02T03:04:05[.ffffff][Z|+hh:mm]` (UTC kept as is).
pub(super) fn iso(s: &str) -> Result<mysql_async::Value, DecodeError> {
    let bad = || format!("`{s}` is not an ISO-8601 date or time");
    let num = |a: usize, b: usize| -> Result<u32, DecodeError> {
        Ok(s.get(a..b).and_then(|x| x.parse().ok()).ok_or_else(bad)?)
    };
    let (y, m, d) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    if s.len() <= 10 {
        return Ok(mysql_async::Value::Date(
            y as u16, m as u8, d as u8, 0, 0, 0, 0,
        ));
    }
    let (h, mi, sec) = (num(11, 13)?, num(14, 16)?, num(17, 19)?);
    let mut us = 0u32;
    if s.as_bytes().get(19) == Some(&b'.') {
        let frac: String = s[20..].chars().take_while(char::is_ascii_digit).collect();
        let f6 = format!("{frac:0<6}");
        us = f6[..6].parse().map_err(|_| bad())?;
    }
    Ok(mysql_async::Value::Date(
        y as u16, m as u8, d as u8, h as u8, mi as u8, sec as u8, us,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_from_debezium_precise_bytes() {
        // 12345 unscaled, scale 2 -> 123.45; -1 -> -0.01
        assert_eq!(scaled(12345, 2), "123.45");
        assert_eq!(scaled(-1, 2), "-0.01");
        let k = Kind::Decimal {
            precision: 10,
            scale: 2,
        };
        let v = to_mysql(&J::String("MDk=".into()), &k, &ddl_core::DataType::Boolean).unwrap();
        assert_eq!(v, mysql_async::Value::Bytes(b"123.45".to_vec()));
    }

    #[test]
    fn iso_times() {
        assert_eq!(
            iso("2024-01-02T03:04:05.5Z").unwrap(),
            mysql_async::Value::Date(2024, 1, 2, 3, 4, 5, 500_000)
        );
        assert!(iso("nope").is_err());
    }
}
