//! Binlog row images: MySQL's binary encoding of each type, decoded straight into
//! the table's Arrow builders.

use super::*;

/// A column's binlog type and metadata from TABLE_MAP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BinCol {
    pub ty: u8,
    pub meta: [u8; 2],
}

/// Read cursor over a row image.
pub struct Cur<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
}

impl<'a> Cur<'a> {
    #[inline]
    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
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
    pub(super) fn le(&mut self, n: usize) -> Result<u64, DecodeError> {
        let s = self.take(n)?;
        let mut v = 0u64;
        for (i, b) in s.iter().enumerate() {
            v |= (*b as u64) << (8 * i);
        }
        Ok(v)
    }
    #[inline]
    pub(super) fn be(&mut self, n: usize) -> Result<u64, DecodeError> {
        let s = self.take(n)?;
        let mut v = 0u64;
        for b in s {
            v = (v << 8) | *b as u64;
        }
        Ok(v)
    }
}

const DIG2BYTES: [usize; 10] = [0, 1, 1, 2, 2, 3, 3, 4, 4, 4];

pub(super) fn frac_bytes(fsp: u8) -> usize {
    (fsp as usize).div_ceil(2)
}

/// Fractional microseconds stored in `fsp` precision, big-endian.
pub(super) fn read_frac(c: &mut Cur<'_>, fsp: u8) -> Result<i64, DecodeError> {
    Ok(match frac_bytes(fsp) {
        0 => 0,
        1 => c.be(1)? as i64 * 10_000,
        2 => c.be(2)? as i64 * 100,
        _ => c.be(3)? as i64,
    })
}

/// MySQL's binary DECIMAL straight into the column's unscaled integer, without
/// copying the bytes: groups of up to 9 digits, most significant first, the sign in the
/// first bit (negative values have every bit inverted).
pub(super) fn decode_decimal(
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

pub(super) fn append_text(
    b: &mut ColBuilder,
    bytes: &[u8],
    charset: Charset,
) -> Result<(), DecodeError> {
    match b {
        ColBuilder::Str(sb) => {
            sb.append_value(charset.decode(bytes).0);
            Ok(())
        }
        ColBuilder::Bin(bb) => {
            bb.append_value(bytes);
            Ok(())
        }
        _ => Err("not a text column".into()),
    }
}

pub(super) fn enum_value(values: &[String], idx: u64) -> &str {
    if idx == 0 {
        ""
    } else {
        values
            .get(idx as usize - 1)
            .map(String::as_str)
            .unwrap_or("")
    }
}

pub(super) fn set_value(values: &[String], mask: u64) -> String {
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
        t::YEAR
        | t::DATE
        | t::NEWDATE
        | t::TIME2
        | t::TIME
        | t::DATETIME2
        | t::DATETIME
        | t::TIMESTAMP2
        | t::TIMESTAMP => decode_temporal(cur, bc, b, ctx),
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

/// MySQL's binary date and time types (YEAR, DATE, TIME, DATETIME, TIMESTAMP and
/// their fractional-second forms) into the column's builder; zero dates by the
/// job's `zero-dates` policy.
fn decode_temporal(
    cur: &mut Cur<'_>,
    bc: BinCol,
    b: &mut ColBuilder,
    ctx: &Ctx<'_>,
) -> Result<(), DecodeError> {
    match bc.ty {
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
        other => Err(format!("{other:?} is not a date or time type").into()),
    }
}

/// (real type, length) of a STRING column's metadata, including long CHAR lengths.
pub(super) fn string_meta(bc: BinCol) -> (u8, usize) {
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

pub(super) fn text_or_binary(
    b: &mut ColBuilder,
    bytes: &[u8],
    col: &SourceColumn,
) -> Result<(), DecodeError> {
    if let Kind::Inet(n) = col.kind {
        return append_text(b, inet_text(bytes, n)?.as_bytes(), Charset::Utf8);
    }
    let fixed = match col.kind {
        Kind::FixedBinary(n) => Some(n),
        Kind::Uuid => Some(16),
        _ => None,
    };
    if let (Some(n), ColBuilder::Bin(bb)) = (fixed, &mut *b) {
        if bytes.len() < n {
            let mut padded = bytes.to_vec();
            padded.resize(n, 0);
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

/// An INET6 (`n` = 16) or INET4 (4) value's binlog bytes (trailing zero bytes
/// dropped) as the text MariaDB shows.
fn inet_text(bytes: &[u8], n: usize) -> Result<String, DecodeError> {
    if bytes.len() > n {
        return Err(format!("an address of {} bytes, not {n}", bytes.len()).into());
    }
    let mut a = [0u8; 16];
    a[..bytes.len()].copy_from_slice(bytes);
    Ok(if n == 4 {
        std::net::Ipv4Addr::new(a[0], a[1], a[2], a[3]).to_string()
    } else {
        std::net::Ipv6Addr::from(a).to_string()
    })
}

pub(super) fn append_year(b: &mut ColBuilder, v: u64) -> Result<(), DecodeError> {
    let y = if v == 0 { 0 } else { v + 1900 };
    match b {
        ColBuilder::U16(ub) => ub.append_value(y as u16),
        _ => return b.append_int(y as i128),
    }
    Ok(())
}

pub(super) fn append_time_packed(b: &mut ColBuilder, packed: i64) -> Result<(), DecodeError> {
    let neg = packed < 0;
    let p = packed.abs();
    let hms = p >> 24;
    let us = p & 0xFF_FFFF;
    let (h, m, s) = ((hms >> 12) & 0x3FF, (hms >> 6) & 0x3F, hms & 0x3F);
    let micros = ((h * 60 + m) * 60 + s) * 1_000_000 + us;
    append_duration(b, if neg { -micros } else { micros })
}

pub(super) fn append_duration(b: &mut ColBuilder, micros: i64) -> Result<(), DecodeError> {
    match b {
        ColBuilder::Dur(db) => db.append_value(micros),
        _ => return Err("TIME into a non-time column".into()),
    }
    Ok(())
}

pub(super) fn append_ts(b: &mut ColBuilder, micros: i64) -> Result<(), DecodeError> {
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

#[cfg(test)]
mod tests {
    use super::super::text::append_decimal_text;
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
