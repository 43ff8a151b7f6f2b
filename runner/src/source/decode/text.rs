//! Snapshot values (the binary protocol's text and typed values) into the same
//! Arrow types as binlog rows.

use super::image::{append_duration, append_text, append_ts};
use super::*;

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
        // The text protocol's temporals: read as the binary protocol sends them.
        (V::Bytes(bytes), Kind::Date | Kind::DateTime | Kind::Timestamp | Kind::Time) => {
            let v = temporal_value(bytes, &col.kind).ok_or_else(|| {
                format!(
                    "{}: not a {:?} value",
                    String::from_utf8_lossy(bytes),
                    col.kind
                )
            })?;
            append_snapshot_value(b, col, &v, ctx)
        }
        // A UUID's text (a snapshot, a Debezium event) as its 16 bytes.
        (V::Bytes(bytes), Kind::Uuid) => {
            let bytes = uuid_bytes(bytes)
                .ok_or_else(|| format!("{}: not a UUID", String::from_utf8_lossy(bytes)))?;
            append_text(b, &bytes, Charset::Utf8)
        }
        // Floats are read through the binary protocol only (their text may round).
        (V::Bytes(bytes), Kind::Float | Kind::Double) => Err(format!(
            "{}: a floating-point value as text",
            String::from_utf8_lossy(bytes)
        )
        .into()),
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

/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (any case) as its 16 bytes.
fn uuid_bytes(text: &[u8]) -> Option<[u8; 16]> {
    let hex: Vec<u8> = text.iter().copied().filter(|&c| c != b'-').collect();
    let dashes = [8, 13, 18, 23];
    if text.len() != 36 || hex.len() != 32 || dashes.iter().any(|&i| text[i] != b'-') {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, pair) in hex.chunks(2).enumerate() {
        out[i] = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(out)
}

pub(super) fn append_year_abs(b: &mut ColBuilder, y: u64) -> Result<(), DecodeError> {
    match b {
        ColBuilder::U16(ub) => ub.append_value(y as u16),
        _ => return b.append_int(y as i128),
    }
    Ok(())
}

/// "-123.4500" into the column's scale.
pub(crate) fn append_decimal_text(
    b: &mut ColBuilder,
    bytes: &[u8],
    scale: i8,
) -> Result<(), DecodeError> {
    // The common case, `[-]digits[.digits]` into a 128-bit decimal, without the
    // allocations of the general path (a snapshot's decimals all come this way).
    if let ColBuilder::D128(db, ..) = b {
        if let Some(v) = decimal_i128(bytes, scale.max(0) as usize) {
            db.append_value(v);
            return Ok(());
        }
    }
    decimal_text_general(b, bytes, scale)
}

/// A value read through the text protocol as the binary protocol sends it: integers,
/// years and temporals typed; every other type is bytes either way.
pub fn typed_text_value(v: &mysql_async::Value, kind: &Kind) -> mysql_async::Value {
    use mysql_async::Value as V;
    let V::Bytes(b) = v else {
        return v.clone();
    };
    let text = std::str::from_utf8(b).ok();
    let typed = match kind {
        Kind::Int { unsigned: true, .. } => text.and_then(|t| t.parse().ok()).map(V::UInt),
        Kind::Int { .. } | Kind::Year => text.and_then(|t| t.parse().ok()).map(V::Int),
        Kind::Date | Kind::DateTime | Kind::Timestamp | Kind::Time => temporal_value(b, kind),
        _ => None,
    };
    typed.unwrap_or_else(|| v.clone())
}

/// A DATE (`YYYY-MM-DD`), DATETIME or TIMESTAMP (`YYYY-MM-DD HH:MM:SS[.ffffff]`) or
/// TIME (`[-]H+:MM:SS[.ffffff]`) as the text protocol writes it, as the value the
/// binary protocol would have sent (zero dates included: they are checked where the
/// binary ones are).
fn temporal_value(t: &[u8], kind: &Kind) -> Option<mysql_async::Value> {
    /// Digits `t[..n]` as a number (all of them digits, n of them).
    fn num(t: &[u8], n: usize) -> Option<u32> {
        let d = t.get(..n)?;
        d.iter()
            .all(u8::is_ascii_digit)
            .then(|| d.iter().fold(0u32, |a, c| a * 10 + u32::from(c - b'0')))
    }
    /// `.ffffff` (1 to 6 digits) or nothing, as microseconds.
    fn micros(t: &[u8]) -> Option<u32> {
        match t {
            [] => Some(0),
            [b'.', f @ ..] if (1..=6).contains(&f.len()) => {
                Some(num(f, f.len())? * 10u32.pow(6 - f.len() as u32))
            }
            _ => None,
        }
    }
    /// `H+:MM:SS[.ffffff]` (any number of hour digits, at least one).
    fn clock(t: &[u8]) -> Option<(u32, u32, u32, u32)> {
        let colon = t.iter().position(|&c| c == b':')?;
        let h = num(t, colon).filter(|_| colon > 0)?;
        let rest = &t[colon..];
        if rest.first() != Some(&b':') || rest.get(3) != Some(&b':') {
            return None;
        }
        Some((
            h,
            num(&rest[1..], 2)?,
            num(&rest[4..], 2)?,
            micros(rest.get(6..)?)?,
        ))
    }
    use mysql_async::Value as V;
    let ymd = |t: &[u8]| -> Option<(u16, u8, u8)> {
        if t.len() < 10 || t[4] != b'-' || t[7] != b'-' {
            return None;
        }
        Some((
            num(t, 4)? as u16,
            num(&t[5..], 2)? as u8,
            num(&t[8..], 2)? as u8,
        ))
    };
    match kind {
        Kind::Date => {
            let (y, m, d) = ymd(t).filter(|_| t.len() == 10)?;
            Some(V::Date(y, m, d, 0, 0, 0, 0))
        }
        Kind::DateTime | Kind::Timestamp => {
            let (y, m, d) = ymd(t)?;
            if t.get(10) != Some(&b' ') {
                return None;
            }
            let (h, mi, s, us) = clock(&t[11..]).filter(|c| c.0 < 100)?;
            Some(V::Date(y, m, d, h as u8, mi as u8, s as u8, us))
        }
        Kind::Time => {
            let (neg, t) = match t {
                [b'-', rest @ ..] => (true, rest),
                _ => (false, t),
            };
            let (h, m, s, us) = clock(t)?;
            Some(V::Time(neg, h / 24, (h % 24) as u8, m as u8, s as u8, us))
        }
        _ => None,
    }
}

/// `[-]digits[.digits]` scaled to `scale` fraction digits; `None` for any other text
/// (the general path parses it or says why not) or on overflow.
fn decimal_i128(bytes: &[u8], scale: usize) -> Option<i128> {
    let (neg, digits) = match bytes.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, bytes),
    };
    let mut v: i128 = 0;
    let mut frac: Option<usize> = None;
    let mut any = false;
    for &c in digits {
        match c {
            b'0'..=b'9' => {
                any = true;
                v = v.checked_mul(10)?.checked_add((c - b'0') as i128)?;
                if let Some(f) = frac.as_mut() {
                    *f += 1;
                }
            }
            b'.' if frac.is_none() => frac = Some(0),
            _ => return None,
        }
    }
    let frac = frac.unwrap_or(0);
    if !any || frac > scale {
        return None;
    }
    for _ in frac..scale {
        v = v.checked_mul(10)?;
    }
    Some(if neg { -v } else { v })
}

fn decimal_text_general(b: &mut ColBuilder, bytes: &[u8], scale: i8) -> Result<(), DecodeError> {
    let s = std::str::from_utf8(bytes)
        .map_err(|e| e.to_string())?
        .trim();
    let (neg, digits) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if int.is_empty() && frac.is_empty() {
        return Err(format!("decimal {s:?} has no digits").into());
    }
    let scale = scale.max(0) as usize;
    // Trailing zeros past the scale are no digits of the value (PostgreSQL keeps a
    // value's display scale: `1.50000000000000000000000000000000000000`).
    let mut frac = frac.to_owned();
    while frac.len() > scale && frac.ends_with('0') {
        frac.pop();
    }
    if frac.len() > scale {
        return Err(format!("decimal {s} has more than {scale} fraction digits").into());
    }
    let precision = match b {
        ColBuilder::D128(_, p, _) | ColBuilder::D256(_, p, _) => usize::from(*p),
        _ => 76,
    };
    let whole = int.trim_start_matches('0').len();
    if whole > precision.saturating_sub(scale) {
        return Err(format!(
            "decimal {s} has more than {} digits before the point",
            precision.saturating_sub(scale)
        )
        .into());
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
    #[test]
    fn a_uuid_text_is_its_sixteen_bytes() {
        let b = uuid_bytes(b"A0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11").unwrap();
        assert_eq!(b[0], 0xa0);
        assert_eq!(b[15], 0x11);
        for bad in [
            &b"a0eebc999c0b4ef8bb6d6bb9bd380a11"[..],
            b"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1",
            b"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1g",
            b"a0eebc99+9c0b-4ef8-bb6d-6bb9bd380a11",
        ] {
            assert_eq!(uuid_bytes(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    use super::*;

    #[test]
    fn temporals_as_text_read_as_the_binary_protocol_sends_them() {
        use mysql_async::Value as V;
        let v = |t: &str, k: Kind| temporal_value(t.as_bytes(), &k);
        for (good, k, want) in [
            ("2024-02-29", Kind::Date, V::Date(2024, 2, 29, 0, 0, 0, 0)),
            ("0000-00-00", Kind::Date, V::Date(0, 0, 0, 0, 0, 0, 0)),
            (
                "1999-12-31 23:59:59.999",
                Kind::DateTime,
                V::Date(1999, 12, 31, 23, 59, 59, 999_000),
            ),
            (
                "1970-01-01 00:00:01.000001",
                Kind::Timestamp,
                V::Date(1970, 1, 1, 0, 0, 1, 1),
            ),
            ("-838:59:59", Kind::Time, V::Time(true, 34, 22, 59, 59, 0)),
            (
                "-00:00:00.01",
                Kind::Time,
                V::Time(true, 0, 0, 0, 0, 10_000),
            ),
            (
                "25:00:00.5",
                Kind::Time,
                V::Time(false, 1, 1, 0, 0, 500_000),
            ),
        ] {
            assert_eq!(v(good, k), Some(want), "{good}");
        }
        assert_eq!(
            typed_text_value(
                &V::Bytes(b"18446744073709551615".to_vec()),
                &Kind::Int {
                    bytes: 8,
                    unsigned: true
                }
            ),
            V::UInt(u64::MAX)
        );
        assert_eq!(
            typed_text_value(
                &V::Bytes(b"-9007199254740993".to_vec()),
                &Kind::Int {
                    bytes: 8,
                    unsigned: false
                }
            ),
            V::Int(-9007199254740993)
        );
        assert_eq!(
            typed_text_value(
                &V::Bytes(b"2024-02-29 01:02:03.5".to_vec()),
                &Kind::DateTime
            ),
            V::Date(2024, 2, 29, 1, 2, 3, 500_000)
        );
        assert_eq!(
            typed_text_value(&V::Bytes(b"abc".to_vec()), &Kind::Binary),
            V::Bytes(b"abc".to_vec())
        );
        for (bad, k) in [
            ("2024-02-29 ", Kind::Date),
            ("2024-2-29", Kind::Date),
            ("2024-02-29", Kind::DateTime),
            ("2024-02-29T01:02:03", Kind::DateTime),
            ("2024-02-29 01:02:03.", Kind::DateTime),
            ("2024-02-29 01:02:03.1234567", Kind::DateTime),
            ("2024-02-29 1:02", Kind::DateTime),
            (":01:02", Kind::Time),
            ("01:02:03x", Kind::Time),
            ("--01:02:03", Kind::Time),
            ("12:34", Kind::Time),
        ] {
            assert_eq!(v(bad, k), None, "{bad}");
        }
    }

    fn both(text: &str, scale: i8) -> (Option<i128>, Option<i128>) {
        let kind = Kind::Decimal {
            precision: 38,
            scale,
        };
        let read = |fast: bool| {
            let mut b = ColBuilder::new(&kind);
            let r = if fast {
                append_decimal_text(&mut b, text.as_bytes(), scale)
            } else {
                decimal_text_general(&mut b, text.as_bytes(), scale)
            };
            r.ok().map(|_| {
                b.finish()
                    .as_any()
                    .downcast_ref::<arrow_array::Decimal128Array>()
                    .expect("decimal")
                    .value(0)
            })
        };
        (read(true), read(false))
    }

    #[test]
    fn decimal_text_fast_path_reads_as_the_general_one() {
        for (text, scale, want) in [
            ("-1234567890.1234", 4, Some(-12345678901234)),
            ("12.5", 4, Some(125000)),
            ("7", 2, Some(700)),
            ("-0.05", 2, Some(-5)),
            ("1.", 1, Some(10)),
            (".5", 1, Some(5)),
            (" 3.25 ", 2, Some(325)),
            ("+3.25", 2, Some(325)),
            (
                "99999999999999999999999999999999999999",
                0,
                Some(99999999999999999999999999999999999999),
            ),
            ("1.234", 2, None),
            ("-", 2, None),
            (".", 2, None),
            ("1.2.3", 2, None),
            ("1e5", 0, None),
            ("", 0, None),
        ] {
            let (fast, general) = both(text, scale);
            assert_eq!(fast, want, "{text:?} at scale {scale}");
            assert_eq!(fast, general, "{text:?} at scale {scale}: both paths");
        }
    }
}
