//! Numbers as decimal text without the `fmt` machinery, for paths that write one per
//! value (a relational checkpoint's rows, Debezium's decimals).

/// `v` in decimal digits, zero-padded to at least `width`.
pub fn padded(out: &mut String, v: u64, width: usize) {
    let mut b = itoa::Buffer::new();
    let s = b.format(v);
    for _ in s.len()..width {
        out.push('0');
    }
    out.push_str(s);
}

/// A decimal's unscaled value `v` with `scale` fractional digits, as Arrow writes it
/// (`-0.05`, `12.30`, `7`).
pub fn decimal(out: &mut String, v: i128, scale: usize) {
    if v < 0 {
        out.push('-');
    }
    let mut b = itoa::Buffer::new();
    let digits = b.format(v.unsigned_abs());
    if scale == 0 {
        out.push_str(digits);
    } else if digits.len() > scale {
        let (int, frac) = digits.split_at(digits.len() - scale);
        out.push_str(int);
        out.push('.');
        out.push_str(frac);
    } else {
        out.push_str("0.");
        for _ in digits.len()..scale {
            out.push('0');
        }
        out.push_str(digits);
    }
}
