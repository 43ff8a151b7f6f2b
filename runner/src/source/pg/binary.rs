//! The snapshot's rows in `COPY ... TO STDOUT (FORMAT binary)`: each value in its
//! type's send form, so neither the server nor the source formats and parses text
//! for integers, floats, numerics, uuids, dates and timestamps (on wide
//! application tables the server's share of a snapshot is about half its CPU).
//! Columns whose send form the source does not read (money, intervals, arrays, bit
//! strings, any other type) are selected through `format('%s', column)`, whose send
//! form is the type's text output, read as the text COPY format and the stream read it.

use super::values::{self, Form};
use crate::source::decode::ColBuilder;
use ddl_core::DataType;

/// How a column's binary COPY field is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bin {
    /// UTF-8 text as sent (text, varchar, char, enum labels, json).
    Raw,
    /// jsonb: a version byte (1), then its text.
    Jsonb,
    Bool,
    /// int2, int4, int8 (big-endian, by the field's length).
    Int,
    /// float4, float8.
    Float,
    /// numeric: digit groups in base 10,000.
    Numeric,
    Uuid,
    Bytes,
    /// Days since 2000-01-01 (int4).
    Date,
    /// µs since midnight (int8; timetz: then its zone, the time taken to UTC as the
    /// text path does).
    Time,
    /// µs since 2000-01-01 00:00 UTC (int8).
    Timestamp,
    /// Selected through `format('%s', column)`: its text output, read by the column's
    /// text form.
    AsText,
}

/// Unix epoch minus PostgreSQL's (2000-01-01), in days.
const PG_EPOCH_DAYS: i64 = 10_957;
const PG_EPOCH_US: i64 = PG_EPOCH_DAYS * 86_400_000_000;

impl Bin {
    /// The binary reading of a column of IR type `t` read by text form `form`.
    pub fn of(t: &DataType, form: Form) -> Bin {
        match (t, form) {
            (DataType::Boolean, Form::Bool) => Bin::Bool,
            (
                DataType::Int {
                    bytes: 2 | 4 | 8,
                    unsigned: false,
                },
                Form::Int,
            ) => Bin::Int,
            (DataType::Float { bytes: 4 | 8, .. }, Form::Float) => Bin::Float,
            (DataType::Decimal { .. }, Form::Decimal) => Bin::Numeric,
            (DataType::Uuid, Form::Uuid) => Bin::Uuid,
            (
                DataType::Blob { .. } | DataType::Varbinary { .. } | DataType::Binary { .. },
                Form::Bytea,
            ) => Bin::Bytes,
            (DataType::Date, Form::Date) => Bin::Date,
            (DataType::Time { .. }, Form::Time) => Bin::Time,
            (DataType::Timestamp { .. }, Form::Timestamp | Form::TimestampTz) => Bin::Timestamp,
            (
                DataType::Char { .. }
                | DataType::Varchar { .. }
                | DataType::Text { .. }
                | DataType::Enum { .. }
                | DataType::Json { binary: false },
                Form::Text,
            ) => Bin::Raw,
            (DataType::Json { binary: true }, Form::Text) => Bin::Jsonb,
            _ => Bin::AsText,
        }
    }

    /// The column in the snapshot's select list (`col`: its quoted name).
    pub fn select(self, col: &str) -> String {
        match self {
            // The type's output function, as the stream's values are printed (a
            // cast to text may differ: inet's keeps a host's /32 or /128).
            // (`IS NULL` of a composite value is true when all its fields are NULL:
            // `num_nulls` asks whether the value itself is.)
            Bin::AsText => {
                format!("CASE WHEN num_nulls({col}) = 1 THEN NULL ELSE format('%s', {col}) END")
            }
            _ => col.to_owned(),
        }
    }
}

fn be<const N: usize>(v: &[u8]) -> Option<[u8; N]> {
    v.try_into().ok()
}

/// An int2, int4 or int8 field.
pub fn int(v: &[u8]) -> Option<i64> {
    Some(match v.len() {
        2 => i16::from_be_bytes(be(v)?) as i64,
        4 => i32::from_be_bytes(be(v)?) as i64,
        8 => i64::from_be_bytes(be(v)?),
        _ => return None,
    })
}

/// Append field `v` of a column read as `bin` (text form `form`) to `b`; `scratch`
/// holds a numeric's text.
pub fn append(
    b: &mut ColBuilder,
    bin: Bin,
    form: Form,
    v: &[u8],
    scratch: &mut Vec<u8>,
) -> Result<(), String> {
    let size = |what: &str| format!("a {what} field of {} bytes", v.len());
    match bin {
        Bin::Raw | Bin::AsText => {
            let s = std::str::from_utf8(v).map_err(|e| format!("not UTF-8: {e}"))?;
            values::append(b, form, s).map_err(|e| e.0)
        }
        Bin::Jsonb => match v.split_first() {
            Some((1, rest)) => {
                let s = std::str::from_utf8(rest).map_err(|e| format!("not UTF-8: {e}"))?;
                values::append(b, form, s).map_err(|e| e.0)
            }
            _ => Err("a jsonb field of an unknown version".into()),
        },
        Bin::Bool => match v {
            [x] => b.append_int(i128::from(*x != 0)).map_err(|e| e.0),
            _ => Err(size("boolean")),
        },
        Bin::Int => {
            let i = int(v).ok_or_else(|| size("integer"))?;
            b.append_int(i128::from(i)).map_err(|e| e.0)
        }
        Bin::Float => {
            let f = match v.len() {
                4 => f32::from_be_bytes(be(v).expect("4 bytes")) as f64,
                8 => f64::from_be_bytes(be(v).expect("8 bytes")),
                _ => return Err(size("float")),
            };
            match b {
                ColBuilder::F64(fb) => fb.append_value(f),
                ColBuilder::F32(fb) => fb.append_value(f as f32),
                _ => return Err("a float into a column of another type".into()),
            }
            Ok(())
        }
        Bin::Numeric => {
            numeric_text(v, scratch)?;
            let s = std::str::from_utf8(scratch).expect("digits");
            values::append(b, form, s).map_err(|e| e.0)
        }
        Bin::Uuid | Bin::Bytes => match b {
            ColBuilder::Bin(bb) if bin == Bin::Bytes || v.len() == 16 => {
                bb.append_value(v);
                Ok(())
            }
            ColBuilder::Bin(_) => Err(size("uuid")),
            _ => Err("bytes into a column of another type".into()),
        },
        Bin::Date => {
            let d = i32::from_be_bytes(be(v).ok_or_else(|| size("date"))?);
            if d == i32::MAX || d == i32::MIN {
                return Err(format!(
                    "date {:?} (infinite dates have no Arrow form)",
                    text(bin, v)
                ));
            }
            match b {
                ColBuilder::Date(db) => db.append_value(d + PG_EPOCH_DAYS as i32),
                _ => return Err("a date into a column of another type".into()),
            }
            Ok(())
        }
        Bin::Time => {
            let t = v.get(..8).and_then(int).ok_or_else(|| size("time"))?;
            // timetz: then its zone in seconds west of UTC.
            let west = match v.get(8..12) {
                Some(z) => i32::from_be_bytes(be(z).expect("4 bytes")),
                None if v.len() == 8 => 0,
                None => return Err(size("time")),
            };
            match b {
                ColBuilder::Dur(db) => db.append_value(values::utc_time(t, -i64::from(west))),
                _ => return Err("a time into a column of another type".into()),
            }
            Ok(())
        }
        Bin::Timestamp => {
            let t = int(v)
                .filter(|_| v.len() == 8)
                .ok_or_else(|| size("timestamp"))?;
            if t == i64::MAX || t == i64::MIN {
                return Err(format!(
                    "timestamp {:?} (infinite timestamps have no Arrow form)",
                    text(bin, v)
                ));
            }
            let us = t.checked_add(PG_EPOCH_US).ok_or_else(|| {
                format!(
                    "timestamp {:?} is outside what Arrow and Iceberg hold (microseconds since 1970 in 64 bits: 290308 BC to 294247 AD)",
                    text(bin, v)
                )
            })?;
            match b {
                ColBuilder::Ts(tb, _) => tb.append_value(us),
                _ => return Err("a timestamp into a column of another type".into()),
            }
            Ok(())
        }
    }
}

/// A numeric's send form (ndigits, weight, sign, dscale, then base-10,000 digits)
/// as its text output (`-12.50`, `NaN`, `Infinity`) into `out`.
pub fn numeric_text(v: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    out.clear();
    let word = |i: usize| v.get(i..i + 2).map(|w| u16::from_be_bytes([w[0], w[1]]));
    let bad = || format!("a numeric field of {} bytes", v.len());
    let (n, weight, sign, dscale) = match (word(0), word(2), word(4), word(6)) {
        (Some(n), Some(w), Some(s), Some(d)) => (n as usize, w as i16 as i32, s, d as i32),
        _ => return Err(bad()),
    };
    if v.len() != 8 + 2 * n {
        return Err(bad());
    }
    match sign {
        0xC000 => {
            out.extend_from_slice(b"NaN");
            return Ok(());
        }
        0xD000 => {
            out.extend_from_slice(b"Infinity");
            return Ok(());
        }
        0xF000 => {
            out.extend_from_slice(b"-Infinity");
            return Ok(());
        }
        0x4000 => out.push(b'-'),
        0 => {}
        _ => return Err(format!("a numeric field with sign {sign:#x}")),
    }
    let digit = |g: i32| -> u16 {
        // Group g: weight 0 is the units' group; groups outside the digits are 0.
        let i = weight - g;
        if i < 0 || i as usize >= n {
            0
        } else {
            word(8 + 2 * i as usize).unwrap_or(0)
        }
    };
    // Four digits of a group, zero-padded.
    let four = |d: u16| {
        [
            b'0' + (d / 1000 % 10) as u8,
            b'0' + (d / 100 % 10) as u8,
            b'0' + (d / 10 % 10) as u8,
            b'0' + (d % 10) as u8,
        ]
    };
    // The integer part, from the highest group down to the units' group.
    if weight < 0 {
        out.push(b'0');
    } else {
        let top = four(digit(weight));
        let lead = top.iter().take(3).take_while(|c| **c == b'0').count();
        out.extend_from_slice(&top[lead..]);
        for g in (0..weight).rev() {
            out.extend_from_slice(&four(digit(g)));
        }
    }
    if dscale > 0 {
        out.push(b'.');
        let mut left = dscale;
        let mut g = -1;
        while left > 0 {
            let take = left.min(4) as usize;
            out.extend_from_slice(&four(digit(g))[..take]);
            left -= take as i32;
            g -= 1;
        }
    }
    Ok(())
}

/// Field `v` of a column read as `bin` in the text form PostgreSQL prints (in UTC):
/// what a dead-letter record shows of a row that could not be read.
pub fn text(bin: Bin, v: &[u8]) -> String {
    let hex = |v: &[u8]| v.iter().map(|b| format!("{b:02x}")).collect::<String>();
    match bin {
        Bin::Raw | Bin::AsText => String::from_utf8_lossy(v).into_owned(),
        Bin::Jsonb => String::from_utf8_lossy(v.get(1..).unwrap_or_default()).into_owned(),
        Bin::Bool => if v.first().is_some_and(|b| *b != 0) {
            "t"
        } else {
            "f"
        }
        .to_owned(),
        Bin::Int => int(v).map(|i| i.to_string()).unwrap_or_else(|| hex(v)),
        Bin::Float => {
            let f = match v.len() {
                4 => f32::from_be_bytes(be(v).expect("4 bytes")) as f64,
                8 => f64::from_be_bytes(be(v).expect("8 bytes")),
                _ => return hex(v),
            };
            match f {
                f if f.is_nan() => "NaN".to_owned(),
                f if f == f64::INFINITY => "Infinity".to_owned(),
                f if f == f64::NEG_INFINITY => "-Infinity".to_owned(),
                f => f.to_string(),
            }
        }
        Bin::Numeric => {
            let mut out = Vec::new();
            match numeric_text(v, &mut out) {
                Ok(()) => String::from_utf8(out).expect("digits"),
                Err(_) => hex(v),
            }
        }
        Bin::Uuid => match <&[u8; 16]>::try_from(v) {
            Ok(b) => ddl_core::schema::uuid_text(b),
            Err(_) => format!("\\x{}", hex(v)),
        },
        Bin::Bytes => format!("\\x{}", hex(v)),
        Bin::Date => match be::<4>(v).map(i32::from_be_bytes) {
            Some(i32::MAX) => "infinity".to_owned(),
            Some(i32::MIN) => "-infinity".to_owned(),
            Some(d) => date_text(i64::from(d) + PG_EPOCH_DAYS),
            None => hex(v),
        },
        Bin::Time => match (v.get(..8).and_then(int), v.get(8..12)) {
            (Some(t), None) => time_text(t),
            (Some(t), Some(z)) => {
                let west = i32::from_be_bytes(be(z).expect("4 bytes"));
                let (sign, e) = if west > 0 { ('-', west) } else { ('+', -west) };
                let zone = format!("{sign}{:02}:{:02}", e / 3600, e / 60 % 60);
                format!("{}{}", time_text(t), zone.trim_end_matches(":00"))
            }
            _ => hex(v),
        },
        Bin::Timestamp => match int(v).filter(|_| v.len() == 8) {
            Some(i64::MAX) => "infinity".to_owned(),
            Some(i64::MIN) => "-infinity".to_owned(),
            Some(t) => {
                let us = i128::from(t) + i128::from(PG_EPOCH_US);
                let day = us.div_euclid(86_400_000_000);
                let rest = us.rem_euclid(86_400_000_000) as i64;
                let d = date_text(day as i64);
                match d.strip_suffix(" BC") {
                    Some(d) => format!("{d} {} BC", time_text(rest)),
                    None => format!("{d} {}", time_text(rest)),
                }
            }
            None => hex(v),
        },
    }
}

/// Days since 1970-01-01 as `2024-02-29` (`0044-03-15 BC`).
fn date_text(days: i64) -> String {
    let (y, m, d) = crate::calendar::civil_from_days(days);
    match y <= 0 {
        true => format!("{:04}-{m:02}-{d:02} BC", 1 - y),
        false => format!("{y:04}-{m:02}-{d:02}"),
    }
}

/// µs since midnight as `13:45:00.5`.
fn time_text(us: i64) -> String {
    let (s, frac) = (us.div_euclid(1_000_000), us.rem_euclid(1_000_000));
    let hms = format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
    match frac {
        0 => hms,
        f => format!("{hms}.{}", format!("{f:06}").trim_end_matches('0')),
    }
}

/// The tuples of a binary COPY stream, fed message by message: a tuple split across
/// messages is carried over.
#[derive(Default)]
pub struct Tuples {
    carry: Vec<u8>,
    header: bool,
}

/// A field of a tuple: its bytes, or NULL.
pub type Field<'a> = Option<&'a [u8]>;

const SIGNATURE: &[u8] = b"PGCOPY\n\xff\r\n\0";

impl Tuples {
    /// Call `row` with the fields of each whole tuple in what was carried over and
    /// `part`.
    pub fn each<F>(&mut self, part: &[u8], mut row: F) -> Result<(), String>
    where
        F: FnMut(&[Field<'_>]) -> Result<(), String>,
    {
        let mut carry = std::mem::take(&mut self.carry);
        let buf: &[u8] = if carry.is_empty() {
            part
        } else {
            carry.extend_from_slice(part);
            &carry
        };
        let mut pos = 0;
        if !self.header {
            // Signature, flags, header extension length and extension.
            if buf.len() < SIGNATURE.len() + 8 {
                self.carry = buf.to_vec();
                return Ok(());
            }
            if &buf[..SIGNATURE.len()] != SIGNATURE {
                return Err("not a binary COPY stream".into());
            }
            let ext = u32::from_be_bytes(be(&buf[15..19]).expect("4 bytes")) as usize;
            if buf.len() < 19 + ext {
                self.carry = buf.to_vec();
                return Ok(());
            }
            pos = 19 + ext;
            self.header = true;
        }
        let mut fields: Vec<Field<'_>> = Vec::new();
        'tuples: while let Some(n) = buf.get(pos..pos + 2) {
            let n = i16::from_be_bytes([n[0], n[1]]);
            if n == -1 {
                // The trailer.
                pos += 2;
                break;
            }
            fields.clear();
            let mut at = pos + 2;
            for _ in 0..n {
                let Some(len) = buf.get(at..at + 4) else {
                    break 'tuples;
                };
                let len = i32::from_be_bytes(be(len).expect("4 bytes"));
                at += 4;
                if len < 0 {
                    fields.push(None);
                    continue;
                }
                let Some(v) = buf.get(at..at + len as usize) else {
                    break 'tuples;
                };
                fields.push(Some(v));
                at += len as usize;
            }
            row(&fields)?;
            pos = at;
        }
        self.carry = buf[pos..].to_vec();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numeric(n: &[u16], weight: i16, sign: u16, dscale: u16) -> String {
        let mut v = Vec::new();
        for w in [n.len() as u16, weight as u16, sign, dscale] {
            v.extend_from_slice(&w.to_be_bytes());
        }
        for d in n {
            v.extend_from_slice(&d.to_be_bytes());
        }
        let mut out = Vec::new();
        numeric_text(&v, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn numerics_read_as_their_text() {
        assert_eq!(numeric(&[1, 2345], 1, 0, 2), "12345.00");
        assert_eq!(numeric(&[12, 5000], 0, 0x4000, 2), "-12.50");
        assert_eq!(numeric(&[5], -1, 0, 4), "0.0005");
        assert_eq!(numeric(&[1], 2, 0, 0), "100000000");
        assert_eq!(numeric(&[], 0, 0, 3), "0.000");
        assert_eq!(numeric(&[1234, 5678], -2, 0, 10), "0.0000123456");
        assert_eq!(numeric(&[9999, 1], 1, 0, 0), "99990001");
        assert_eq!(numeric(&[7], 0, 0, 0), "7");
        assert_eq!(numeric(&[], 0, 0xC000, 0), "NaN");
        assert_eq!(numeric(&[], 0, 0xF000, 0), "-Infinity");
    }

    #[test]
    fn temporals_print_as_postgresql_does() {
        let ts = |us: i64| text(Bin::Timestamp, &us.to_be_bytes());
        assert_eq!(ts(0), "2000-01-01 00:00:00");
        assert_eq!(ts(-1), "1999-12-31 23:59:59.999999");
        assert_eq!(ts(500_000), "2000-01-01 00:00:00.5");
        assert_eq!(ts(i64::MAX), "infinity");
        let date = |d: i32| text(Bin::Date, &d.to_be_bytes());
        assert_eq!(date(0), "2000-01-01");
        assert_eq!(date(-730_485), "0001-01-01 BC");
        assert_eq!(date(-730_486), "0002-12-31 BC");
        let mut b = ColBuilder::new(&crate::source::decode::Kind::Timestamp);
        // 294270 AD: PostgreSQL holds it, 64-bit µs since 1970 do not.
        let late = (294_270 - 2000) * 365_2425i64 / 10_000 * 86_400_000_000;
        let e = append(
            &mut b,
            Bin::Timestamp,
            Form::TimestampTz,
            &late.to_be_bytes(),
            &mut Vec::new(),
        )
        .unwrap_err();
        assert!(e.contains("outside what Arrow and Iceberg hold"), "{e}");
    }

    #[test]
    fn tuples_split_anywhere_read_the_same() {
        let mut stream = SIGNATURE.to_vec();
        stream.extend_from_slice(&0u32.to_be_bytes());
        stream.extend_from_slice(&0u32.to_be_bytes());
        let rows: Vec<Vec<Option<&[u8]>>> = vec![
            vec![Some(b"1"), None, Some(b"")],
            vec![Some(b"22"), Some(b"abc"), None],
        ];
        for r in &rows {
            stream.extend_from_slice(&(r.len() as i16).to_be_bytes());
            for f in r {
                match f {
                    None => stream.extend_from_slice(&(-1i32).to_be_bytes()),
                    Some(v) => {
                        stream.extend_from_slice(&(v.len() as i32).to_be_bytes());
                        stream.extend_from_slice(v);
                    }
                }
            }
        }
        stream.extend_from_slice(&(-1i16).to_be_bytes());
        for cut in 0..stream.len() {
            let mut t = Tuples::default();
            let mut seen: Vec<Vec<Option<Vec<u8>>>> = Vec::new();
            for part in [&stream[..cut], &stream[cut..]] {
                t.each(part, |r| {
                    seen.push(r.iter().map(|f| f.map(<[u8]>::to_vec)).collect());
                    Ok(())
                })
                .unwrap();
            }
            let want: Vec<Vec<Option<Vec<u8>>>> = rows
                .iter()
                .map(|r| r.iter().map(|f| f.map(<[u8]>::to_vec)).collect())
                .collect();
            assert_eq!(seen, want, "cut at {cut}");
        }
    }
}
