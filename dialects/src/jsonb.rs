//! PostgreSQL's `jsonb` text: a JSON document as PostgreSQL prints it once stored as
//! `jsonb` (keys ordered by length, then bytes, a repeated key's last value kept,
//! `": "` and `", "` between parts, escapes decoded, numbers as `numeric` prints
//! them). A `jsonb` default written as the user wrote it then reads as the values a
//! PostgreSQL source streams do.

/// `text` as PostgreSQL prints it as `jsonb`; None when it is no JSON document
/// PostgreSQL takes.
pub fn canonical(text: &str) -> Option<String> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    let v = p.value()?;
    p.ws();
    if p.i != p.s.len() {
        return None;
    }
    let mut out = String::with_capacity(text.len() + 8);
    write(&v, &mut out);
    Some(out)
}

enum Json {
    Null,
    Bool(bool),
    /// As `numeric` prints it.
    Number(String),
    Str(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self
            .s
            .get(self.i)
            .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
        {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        let hit = self.s.get(self.i) == Some(&c);
        if hit {
            self.i += 1;
        }
        hit
    }

    fn value(&mut self) -> Option<Json> {
        self.ws();
        match *self.s.get(self.i)? {
            b'{' => {
                self.i += 1;
                let mut members: Vec<(String, Json)> = Vec::new();
                if !self.eat(b'}') {
                    loop {
                        self.ws();
                        let k = self.string()?;
                        if !self.eat(b':') {
                            return None;
                        }
                        let v = self.value()?;
                        // A repeated key keeps its last value.
                        members.retain(|(x, _)| *x != k);
                        members.push((k, v));
                        if self.eat(b'}') {
                            break;
                        }
                        if !self.eat(b',') {
                            return None;
                        }
                    }
                }
                members.sort_by(|(a, _), (b, _)| {
                    (a.len(), a.as_bytes()).cmp(&(b.len(), b.as_bytes()))
                });
                Some(Json::Object(members))
            }
            b'[' => {
                self.i += 1;
                let mut items = Vec::new();
                if !self.eat(b']') {
                    loop {
                        items.push(self.value()?);
                        if self.eat(b']') {
                            break;
                        }
                        if !self.eat(b',') {
                            return None;
                        }
                    }
                }
                Some(Json::Array(items))
            }
            b'"' => self.string().map(Json::Str),
            b't' => self.word("true").then_some(Json::Bool(true)),
            b'f' => self.word("false").then_some(Json::Bool(false)),
            b'n' => self.word("null").then_some(Json::Null),
            _ => self.number().map(Json::Number),
        }
    }

    fn word(&mut self, w: &str) -> bool {
        let hit = self.s[self.i..].starts_with(w.as_bytes());
        if hit {
            self.i += w.len();
        }
        hit
    }

    fn hex4(&mut self) -> Option<u32> {
        let h = std::str::from_utf8(self.s.get(self.i..self.i + 4)?).ok()?;
        self.i += 4;
        u32::from_str_radix(h, 16).ok()
    }

    fn string(&mut self) -> Option<String> {
        if self.s.get(self.i) != Some(&b'"') {
            return None;
        }
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let c = *self.s.get(self.i)?;
            self.i += 1;
            match c {
                b'"' => return String::from_utf8(out).ok(),
                b'\\' => {
                    let e = *self.s.get(self.i)?;
                    self.i += 1;
                    let ch = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let hi = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&hi) {
                                if self.s.get(self.i..self.i + 2) != Some(b"\\u") {
                                    return None;
                                }
                                self.i += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return None;
                                }
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else {
                                hi
                            };
                            // (jsonb refuses \u0000.)
                            match char::from_u32(code) {
                                Some('\0') | None => return None,
                                Some(ch) => ch,
                            }
                        }
                        _ => return None,
                    };
                    let mut b = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut b).as_bytes());
                }
                // Control characters must be escaped.
                0..0x20 => return None,
                c => out.push(c),
            }
        }
    }

    /// A JSON number as `numeric` prints it: the digits the value needs, with as
    /// many decimals as were written less the exponent (`1.50` -> 1.50, `1e2` ->
    /// 100, `1.5e1` -> 15, `-0` -> 0).
    fn number(&mut self) -> Option<String> {
        let start = self.i;
        let neg = self.s.get(self.i) == Some(&b'-');
        if neg {
            self.i += 1;
        }
        let int_start = self.i;
        while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        let int = &self.s[int_start..self.i];
        if int.is_empty() || (int.len() > 1 && int[0] == b'0') {
            return None;
        }
        let mut frac: &[u8] = &[];
        if self.s.get(self.i) == Some(&b'.') {
            self.i += 1;
            let f = self.i;
            while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
                self.i += 1;
            }
            frac = &self.s[f..self.i];
            if frac.is_empty() {
                return None;
            }
        }
        let mut exp: i64 = 0;
        if matches!(self.s.get(self.i), Some(b'e' | b'E')) {
            self.i += 1;
            let sign = match self.s.get(self.i) {
                Some(b'-') => {
                    self.i += 1;
                    -1
                }
                Some(b'+') => {
                    self.i += 1;
                    1
                }
                _ => 1,
            };
            let e = self.i;
            while self.s.get(self.i).is_some_and(u8::is_ascii_digit) {
                self.i += 1;
            }
            let digits = std::str::from_utf8(&self.s[e..self.i]).ok()?;
            // (numeric takes exponents of a few thousand at most.)
            exp = sign * digits.parse::<i64>().ok().filter(|e| *e <= 10_000)?;
        }
        debug_assert!(self.i > start);
        let mut digits: Vec<u8> = int.iter().chain(frac).copied().collect();
        let scale = frac.len() as i64 - exp;
        let (whole, fraction) = if scale <= 0 {
            digits.extend(std::iter::repeat_n(b'0', (-scale) as usize));
            (digits, Vec::new())
        } else {
            let scale = scale as usize;
            if digits.len() <= scale {
                let mut padded = vec![b'0'; scale + 1 - digits.len()];
                padded.extend(digits);
                digits = padded;
            }
            let f = digits.split_off(digits.len() - scale);
            (digits, f)
        };
        let first = whole.iter().position(|c| *c != b'0').unwrap_or(whole.len());
        let mut out = String::new();
        let zero = whole.iter().chain(&fraction).all(|c| *c == b'0');
        if neg && !zero {
            out.push('-');
        }
        match &whole[first..] {
            [] => out.push('0'),
            w => out.push_str(std::str::from_utf8(w).ok()?),
        }
        if !fraction.is_empty() {
            out.push('.');
            out.push_str(std::str::from_utf8(&fraction).ok()?);
        }
        Some(out)
    }
}

fn write(v: &Json, out: &mut String) {
    match v {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Number(n) => out.push_str(n),
        Json::Str(s) => quote(s, out),
        Json::Array(items) => {
            out.push('[');
            for (k, x) in items.iter().enumerate() {
                if k > 0 {
                    out.push_str(", ");
                }
                write(x, out);
            }
            out.push(']');
        }
        Json::Object(members) => {
            out.push('{');
            for (k, (key, x)) in members.iter().enumerate() {
                if k > 0 {
                    out.push_str(", ");
                }
                quote(key, out);
                out.push_str(": ");
                write(x, out);
            }
            out.push('}');
        }
    }
}

/// A string as PostgreSQL's JSON output escapes it.
fn quote(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::canonical;

    #[test]
    fn documents_print_as_postgresql_prints_jsonb() {
        for (text, want) in [
            (r#"{"a":1}"#, r#"{"a": 1}"#),
            (r#"{"bb":1,"a":[1,2,{}],"a":"x"}"#, r#"{"a": "x", "bb": 1}"#),
            (
                "[1.50, 1e2, 1.5e1, -0, -0.0, 2E-3, 0.10e1]",
                "[1.50, 100, 15, 0, 0.0, 0.002, 1.0]",
            ),
            (r#""\u00e9\n\/""#, "\"é\\n/\""),
            (r#"{"\ud83d\ude00":null}"#, "{\"😀\": null}"),
            ("  true ", "true"),
        ] {
            assert_eq!(canonical(text).as_deref(), Some(want), "{text}");
        }
        for bad in [
            "",
            "{",
            "[1,]",
            "01",
            "1.",
            r#""\u0000""#,
            "tru",
            "{\"a\" 1}",
            "\"a\nb\"",
        ] {
            assert_eq!(canonical(bad), None, "{bad:?}");
        }
    }
}
