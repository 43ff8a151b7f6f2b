//! Lexical building blocks shared by the grammars: whitespace and comments, keywords,
//! identifiers in every quoting style, string literals, balanced raw expressions.

use crate::Flavor;
use nom::branch::alt;
use nom::bytes::complete::{tag, tag_no_case, take_till, take_while, take_while1};
use nom::character::complete::{char, digit1};
use nom::combinator::{map, not, opt, peek, recognize, value};
use nom::multi::many0;
use nom::sequence::{delimited, pair, preceded};
use nom::{IResult, Parser};

pub type Res<'a, T> = IResult<&'a str, T, Error<'a>>;

/// A parse error that keeps the furthest point any alternative reached: when every
/// branch of an `alt` fails, the error names where the statement stopped making sense
/// (`ADD COLUMN y notatype` points at `notatype`), not where the last branch began.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error<'a> {
    /// The input left where parsing failed.
    pub input: &'a str,
}

impl<'a> Error<'a> {
    pub fn new(input: &'a str, _kind: nom::error::ErrorKind) -> Self {
        Error { input }
    }
}

impl<'a> nom::error::ParseError<&'a str> for Error<'a> {
    fn from_error_kind(input: &'a str, kind: nom::error::ErrorKind) -> Self {
        Error::new(input, kind)
    }

    fn append(input: &'a str, kind: nom::error::ErrorKind, other: Self) -> Self {
        other.or(Error::new(input, kind))
    }

    fn or(self, other: Self) -> Self {
        // Less input left means further in.
        if other.input.len() < self.input.len() {
            other
        } else {
            self
        }
    }
}

impl<'a, E> nom::error::FromExternalError<&'a str, E> for Error<'a> {
    fn from_external_error(input: &'a str, kind: nom::error::ErrorKind, _e: E) -> Self {
        Error::new(input, kind)
    }
}

/// An identifier as written: its value (quotes removed, doubled quotes undone) and
/// whether it was quoted (quoted names escape case folding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ident {
    pub value: String,
    pub quoted: bool,
}

impl Ident {
    pub fn bare(v: &str) -> Self {
        Ident {
            value: v.to_owned(),
            quoted: false,
        }
    }
}

/// Skip whitespace and comments (`-- ...`, `/* ... */`). Every keyword and name is
/// preceded by this, so it is a plain byte loop rather than combinators.
pub fn ws(i: &str) -> Res<'_, ()> {
    let b = i.as_bytes();
    let mut k = 0;
    loop {
        match b.get(k) {
            Some(b' ' | b'\t' | b'\r' | b'\n') => k += 1,
            Some(b'-') if b.get(k + 1) == Some(&b'-') => {
                k = i[k..].find('\n').map_or(b.len(), |p| k + p);
            }
            Some(b'/') if b.get(k + 1) == Some(&b'*') => match i[k + 2..].find("*/") {
                Some(p) => k += 2 + p + 2,
                // An unclosed comment is not whitespace: leave it to fail the parse.
                None => return Ok((&i[k..], ())),
            },
            _ => return Ok((&i[k..], ())),
        }
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$' || c == '#'
}

/// A keyword, case-insensitive (keywords are ASCII), not followed by a word character.
pub fn kw<'a>(word: &'static str) -> impl Parser<&'a str, Output = (), Error = Error<'a>> {
    move |i: &'a str| -> Res<'a, ()> {
        let (r, _) = ws(i)?;
        match r.get(..word.len()) {
            Some(head)
                if head.eq_ignore_ascii_case(word)
                    && !r[word.len()..].starts_with(is_word_char) =>
            {
                Ok((&r[word.len()..], ()))
            }
            _ => Err(nom::Err::Error(Error::new(r, nom::error::ErrorKind::Tag))),
        }
    }
}

/// A punctuation symbol after optional whitespace.
pub fn sym<'a>(s: &'static str) -> impl Parser<&'a str, Output = (), Error = Error<'a>> {
    value((), preceded(ws, tag(s)))
}

/// The body of a `q`-quoted name, a doubled `q` read as one.
pub(crate) fn quoted_body(q: char) -> impl FnMut(&str) -> Res<'_, String> {
    move |i: &str| {
        let (mut rest, _) = char(q).parse(i)?;
        let mut out = String::new();
        loop {
            match rest.find(q) {
                None => {
                    return Err(nom::Err::Error(Error::new(
                        rest,
                        nom::error::ErrorKind::Char,
                    )))
                }
                Some(p) => {
                    out.push_str(&rest[..p]);
                    rest = &rest[p + 1..];
                    if rest.starts_with(q) {
                        out.push(q);
                        rest = &rest[1..];
                    } else {
                        return Ok((rest, out));
                    }
                }
            }
        }
    }
}

/// Words that end a column definition or cannot be an unquoted name here.
const RESERVED: &[&str] = &[
    "ADD",
    "ALTER",
    "AND",
    "AS",
    "CHECK",
    "COLLATE",
    "COLUMN",
    "COMMENT",
    "CONSTRAINT",
    "CREATE",
    "DEFAULT",
    "DROP",
    "FOREIGN",
    "FROM",
    "GENERATED",
    "KEY",
    "MODIFY",
    "NOT",
    "NULL",
    "ON",
    "PRIMARY",
    "REFERENCES",
    "SELECT",
    "TABLE",
    "TO",
    "UNIQUE",
    "WITH",
    "FIRST",
    "AFTER",
];

/// An identifier: bare word, `backticks`, "double quotes" or [brackets].
pub fn ident(i: &str) -> Res<'_, Ident> {
    preceded(
        ws,
        alt((
            map(quoted_body('`'), |value| Ident {
                value,
                quoted: true,
            }),
            map(quoted_body('"'), |value| Ident {
                value,
                quoted: true,
            }),
            map(
                delimited(char('['), take_till(|c| c == ']'), char(']')),
                |v: &str| Ident {
                    value: v.to_owned(),
                    quoted: true,
                },
            ),
            bare_ident,
        )),
    )
    .parse(i)
}

/// A column name: quoted, or any bare word that `flavor` does not reserve
/// ([`crate::keywords`]), so `comment` or `status` are names where a column is named.
pub fn col_ident(flavor: Flavor) -> impl Fn(&str) -> Res<'_, Ident> {
    move |i| {
        let (r, _) = ws(i)?;
        let word: Res<'_, &str> = recognize(pair(
            nom::character::complete::satisfy(|c| c.is_alphabetic() || c == '_'),
            take_while(is_word_char),
        ))
        .parse(r);
        if let Ok((rest, w)) = word {
            if crate::keywords::is_reserved(flavor, w) {
                return Err(nom::Err::Error(Error::new(r, nom::error::ErrorKind::Tag)));
            }
            return Ok((rest, Ident::bare(w)));
        }
        ident(i)
    }
}

fn bare_ident(i: &str) -> Res<'_, Ident> {
    let (rest, w) = recognize(pair(
        nom::character::complete::satisfy(|c| c.is_alphabetic() || c == '_'),
        take_while(is_word_char),
    ))
    .parse(i)?;
    if RESERVED.iter().any(|r| r.eq_ignore_ascii_case(w)) {
        return Err(nom::Err::Error(Error::new(i, nom::error::ErrorKind::Tag)));
    }
    Ok((rest, Ident::bare(w)))
}

/// A possibly qualified name: `a`, `a.b`, `a.b.c`.
pub fn object_name(i: &str) -> Res<'_, Vec<Ident>> {
    let (mut i, first) = ident(i)?;
    let mut parts = vec![first];
    while let Ok((r, n)) = preceded(char('.'), ident).parse(i) {
        parts.push(n);
        i = r;
    }
    Ok((i, parts))
}

/// Whether a dialect's string literals take backslash escapes: MySQL's do (unless
/// sql_mode NO_BACKSLASH_ESCAPES); in PostgreSQL (standard_conforming_strings) and
/// Oracle, `'\'` is a one-character string.
fn backslash_escapes(flavor: Flavor) -> bool {
    flavor == Flavor::MySql
}

/// A single-quoted string literal (doubled quotes and, in MySQL, backslash escapes
/// undone). Adjacent literals are concatenated.
pub fn string_lit(flavor: Flavor) -> impl Fn(&str) -> Res<'_, String> {
    move |i| {
        let (mut i, mut s) = preceded(ws, one_string(flavor)).parse(i)?;
        while let Ok((r, more)) = preceded(ws, one_string(flavor)).parse(i) {
            s.push_str(&more);
            i = r;
        }
        Ok((i, s))
    }
}

fn one_string(flavor: Flavor) -> impl Fn(&str) -> Res<'_, String> {
    move |i| one_string_in(backslash_escapes(flavor), i)
}

/// MySQL's character set introducer (`_latin1`, `_utf8mb4 `), with the space after it.
fn introducer(i: &str) -> Res<'_, &str> {
    recognize((
        char('_'),
        take_while1(|c: char| c.is_ascii_alphanumeric()),
        ws,
    ))
    .parse(i)
}

fn one_string_in(escapes: bool, i: &str) -> Res<'_, String> {
    // A character set introducer (`_utf8mb4'x'`, `_latin1 'x'`: the statement's text
    // is already decoded, so the characters are the string's), N'...', PostgreSQL's
    // E'...' (backslash escapes: \n, \t, \\, \ooo, \xHH, \uXXXX, ...) and U&'...'
    // (Unicode escapes: \XXXX, \+XXXXXX; UESCAPE is read after it).
    let (i, prefix) = opt(alt((
        introducer,
        tag_no_case("U&"),
        tag_no_case("N"),
        tag_no_case("E"),
    )))
    .parse(i)?;
    let e_string = prefix.is_some_and(|p| p.eq_ignore_ascii_case("E"));
    let u_string = prefix.is_some_and(|p| p.eq_ignore_ascii_case("U&"));
    let escapes = escapes || e_string;
    let (rest, _) = char('\'').parse(i)?;
    // The quoted text, doubled quotes undone; backslashes kept for the escapes below.
    let mut body = String::new();
    let mut chars = rest.char_indices();
    let rest = loop {
        match chars.next() {
            None => {
                return Err(nom::Err::Error(Error::new(
                    rest,
                    nom::error::ErrorKind::Char,
                )))
            }
            Some((_, '\\')) if escapes => {
                body.push('\\');
                if let Some((_, c)) = chars.next() {
                    body.push(c);
                }
            }
            Some((p, '\'')) => {
                if rest[p + 1..].starts_with('\'') {
                    body.push('\'');
                    chars.next();
                } else {
                    break &rest[p + 1..];
                }
            }
            Some((_, c)) => body.push(c),
        }
    };
    if u_string {
        let (rest, esc) = match preceded((ws, tag_no_case("UESCAPE"), ws), |i| {
            one_string_in(false, i)
        })
        .parse(rest)
        {
            Ok((r, e)) => (r, e.chars().next()),
            Err(_) => (rest, None),
        };
        let esc = esc.unwrap_or('\\');
        return match unicode_escapes(&body, esc) {
            Some(s) => Ok((rest, s)),
            None => Err(nom::Err::Failure(Error::new(
                i,
                nom::error::ErrorKind::Escaped,
            ))),
        };
    }
    if e_string {
        return Ok((rest, pg_escapes(&body)));
    }
    if !escapes {
        return Ok((rest, body));
    }
    // MySQL's backslash escapes.
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        if let Some(c) = chars.next() {
            out.push(match c {
                'n' => '\n',
                't' => '\t',
                'r' => '\r',
                '0' => '\0',
                'Z' => '\u{1a}',
                other => other,
            });
        }
    }
    Ok((rest, out))
}

/// PostgreSQL's E'...' escapes undone. Octal and hex escapes are bytes (several
/// make one character in a UTF-8 database; bytes that are not UTF-8 read as U+FFFD),
/// `\u`/`\U` characters.
fn pg_escapes(body: &str) -> String {
    let mut out: Vec<u8> = Vec::with_capacity(body.len());
    let mut chars = body.chars().peekable();
    let take = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>, radix: u32, max: usize| {
        let mut d = String::new();
        while d.len() < max {
            match chars.peek() {
                Some(c) if c.is_digit(radix) => {
                    d.push(*c);
                    chars.next();
                }
                _ => break,
            }
        }
        (!d.is_empty())
            .then(|| u32::from_str_radix(&d, radix).ok())
            .flatten()
    };
    let push_char = |out: &mut Vec<u8>, c: char| {
        let mut b = [0; 4];
        out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
    };
    while let Some(c) = chars.next() {
        if c != '\\' {
            push_char(&mut out, c);
            continue;
        }
        let Some(e) = chars.next() else { break };
        match e {
            'x' => match take(&mut chars, 16, 2) {
                Some(v) => out.push(v as u8),
                None => push_char(&mut out, 'x'),
            },
            '0'..='7' => {
                let mut d = e.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|c| c.to_digit(8)) {
                        Some(v) => {
                            d = d * 8 + v;
                            chars.next();
                        }
                        None => break,
                    }
                }
                out.push(d as u8);
            }
            'u' | 'U' => {
                let n = if e == 'u' { 4 } else { 8 };
                match take(&mut chars, 16, n).and_then(char::from_u32) {
                    Some(c) => push_char(&mut out, c),
                    None => push_char(&mut out, e),
                }
            }
            'b' => out.push(8),
            'f' => out.push(12),
            'n' => out.push(b'\n'),
            'r' => out.push(b'\r'),
            't' => out.push(b'\t'),
            other => push_char(&mut out, other),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A U&'...' string's escapes undone (`esc` then four hex digits, or `esc+` and six;
/// `esc esc` is the escape character). None: an escape PostgreSQL refuses.
fn unicode_escapes(body: &str, esc: char) -> Option<String> {
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != esc {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&esc) {
            chars.next();
            out.push(esc);
            continue;
        }
        let n = if chars.peek() == Some(&'+') {
            chars.next();
            6
        } else {
            4
        };
        let d: String = (0..n).filter_map(|_| chars.next()).collect();
        if d.len() != n || !d.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let v = u32::from_str_radix(&d, 16).ok()?;
        // A UTF-16 surrogate pair written as two escapes.
        if (0xD800..0xDC00).contains(&v) {
            let mut low = String::new();
            if chars.next() != Some(esc) {
                return None;
            }
            for _ in 0..4 {
                low.push(chars.next()?);
            }
            let lo = u32::from_str_radix(&low, 16).ok()?;
            out.push(char::from_u32(
                0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00),
            )?);
            continue;
        }
        out.push(char::from_u32(v)?);
    }
    Some(out)
}

/// An unsigned integer.
pub fn uint(i: &str) -> Res<'_, u64> {
    nom::combinator::map_res(preceded(ws, digit1), str::parse::<u64>).parse(i)
}

/// A signed integer.
pub fn int(i: &str) -> Res<'_, i64> {
    nom::combinator::map_res(
        preceded(
            ws,
            recognize(pair(opt(alt((char('-'), char('+')))), digit1)),
        ),
        str::parse::<i64>,
    )
    .parse(i)
}

/// A parenthesised group, returned with its parentheses, balanced, skipping strings
/// and quoted names.
pub fn paren_group(flavor: Flavor) -> impl Fn(&str) -> Res<'_, &str> {
    move |i| paren_group_in(backslash_escapes(flavor), i)
}

fn paren_group_in(escapes: bool, i: &str) -> Res<'_, &str> {
    let (start, _) = ws(i)?;
    if !start.starts_with('(') {
        return Err(nom::Err::Error(Error::new(
            start,
            nom::error::ErrorKind::Char,
        )));
    }
    let mut depth = 0usize;
    let b = start.as_bytes();
    let mut k = 0;
    while k < b.len() {
        match b[k] {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return Ok((&start[k + 1..], &start[..k + 1]));
                }
            }
            q @ (b'\'' | b'"' | b'`') => {
                k += 1;
                while k < b.len() && b[k] != q {
                    if escapes && b[k] == b'\\' && q == b'\'' {
                        k += 1;
                    }
                    k += 1;
                }
            }
            _ => {}
        }
        k += 1;
    }
    Err(nom::Err::Error(Error::new(
        start,
        nom::error::ErrorKind::Char,
    )))
}

/// A name of one or more parts, each bare or in double quotes: `a`, `s."T"`.
fn dotted_name(i: &str) -> Res<'_, ()> {
    let part = |i| {
        alt((
            value((), quoted_body('"')),
            value((), take_while1(is_word_char)),
        ))
        .parse(i)
    };
    value((), (part, many0((char('.'), part)))).parse(i)
}

/// One operand of a raw expression: a literal, a group, a (qualified) name or function
/// call, with optional unary sign and `::type` casts.
fn operand(flavor: Flavor, i: &str) -> Res<'_, ()> {
    let (i, _) = ws(i)?;
    let (i, _) = many0(alt((char('-'), char('+')))).parse(i)?;
    // A character set introducer before a hex or bit literal: _latin1 X'E9', _binary 0x0F.
    let (i, _) = opt((
        introducer,
        peek(alt((
            tag_no_case("x'"),
            tag_no_case("b'"),
            tag("0x"),
            tag("0b"),
        ))),
    ))
    .parse(i)?;
    let (i, _) = alt((
        value((), paren_group(flavor)),
        value((), one_string(flavor)),
        value(
            (),
            (
                alt((tag_no_case("b'"), tag_no_case("x'"))),
                take_till(|c| c == '\''),
                char('\''),
            ),
        ),
        // MySQL's 0x4142 and 0b101.
        value((), (tag("0x"), nom::character::complete::hex_digit1)),
        value((), (tag("0b"), take_while1(|c: char| c == '0' || c == '1'))),
        value(
            (),
            recognize((
                digit1,
                opt((char('.'), digit1)),
                opt((
                    alt((char('e'), char('E'))),
                    opt(alt((char('-'), char('+')))),
                    digit1,
                )),
            )),
        ),
        value((), (char('.'), digit1)),
        value(
            (),
            (
                alt((value((), quoted_body('`')), dotted_name)),
                opt(paren_group(flavor)),
                // PostgreSQL `ARRAY[...]` and subscripts.
                many0(bracket_group(flavor)),
            ),
        ),
    ))
    .parse(i)?;
    let (i, _) = many0((
        sym("::"),
        ws,
        // A type name, schema-qualified and quoted where written so.
        dotted_name,
        many0(alt((
            kw("VARYING"),
            kw("PRECISION"),
            value((), (kw("WITH"), kw("TIME"), kw("ZONE"))),
            value((), (kw("WITHOUT"), kw("TIME"), kw("ZONE"))),
        ))),
        opt(paren_group(flavor)),
        opt(tag("[]")),
    ))
    .parse(i)?;
    Ok((i, ()))
}

/// `[ ... ]`, nested brackets and strings inside read whole.
fn bracket_group(flavor: Flavor) -> impl Fn(&str) -> Res<'_, ()> {
    move |i| {
        let (mut r, _) = char('[').parse(i)?;
        loop {
            let (t, _) = ws(r)?;
            if let Some(rest) = t.strip_prefix(']') {
                return Ok((rest, ()));
            }
            if t.is_empty() {
                return Err(nom::Err::Error(Error::new(i, nom::error::ErrorKind::Char)));
            }
            r = if let Ok((r2, _)) = bracket_group(flavor)(t) {
                r2
            } else if let Ok((r2, _)) = one_string(flavor)(t) {
                r2
            } else if let Ok((r2, _)) = paren_group(flavor)(t) {
                r2
            } else {
                &t[t.chars().next().map(char::len_utf8).unwrap_or(1)..]
            };
        }
    }
}

fn binop(i: &str) -> Res<'_, ()> {
    preceded(
        ws,
        alt((
            value(
                (),
                alt((tag("||"), tag("+"), tag("-"), tag("*"), tag("/"), tag("%"))),
            ),
            value(
                (),
                (
                    tag_no_case("AND"),
                    not(peek(nom::character::complete::satisfy(is_word_char))),
                ),
            ),
            value(
                (),
                (
                    tag_no_case("OR"),
                    not(peek(nom::character::complete::satisfy(is_word_char))),
                ),
            ),
        )),
    )
    .parse(i)
}

/// A raw expression (`operand (op operand)*`), returned as trimmed source text.
pub fn raw_expr(flavor: Flavor) -> impl Fn(&str) -> Res<'_, &str> {
    move |i| {
        let operand = |i| operand(flavor, i);
        let (start, _) = ws(i)?;
        let (rest, _) = (operand, many0((binop, operand))).parse(start)?;
        Ok((rest, start[..start.len() - rest.len()].trim_end()))
    }
}

/// A comma-separated list inside parentheses.
pub fn paren_list<'a, T>(
    mut item: impl Parser<&'a str, Output = T, Error = Error<'a>>,
) -> impl FnMut(&'a str) -> Res<'a, Vec<T>> {
    move |i: &'a str| {
        let (mut i, _) = sym("(").parse(i)?;
        let mut out = Vec::new();
        loop {
            let (r, v) = item.parse(i)?;
            out.push(v);
            if let Ok((r2, _)) = sym(",").parse(r) {
                i = r2;
                continue;
            }
            let (r, _) = sym(")").parse(r)?;
            return Ok((r, out));
        }
    }
}

/// A comma-separated list of at least one item.
pub fn comma_list<'a, T>(
    mut item: impl Parser<&'a str, Output = T, Error = Error<'a>>,
) -> impl FnMut(&'a str) -> Res<'a, Vec<T>> {
    move |i: &'a str| {
        let (mut i, first) = item.parse(i)?;
        let mut out = vec![first];
        while let Ok((r, _)) = sym(",").parse(i) {
            let (r, v) = item.parse(r)?;
            out.push(v);
            i = r;
        }
        Ok((i, out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pg(s: &str) -> String {
        let (rest, v) = string_lit(Flavor::Postgres)(s).expect(s);
        assert!(rest.is_empty(), "{s}: {rest:?} left");
        v
    }

    #[test]
    fn unicode_strings() {
        // regression: U&'...' did not parse (a live job stopped at such a DDL).
        assert_eq!(pg(r"U&'d\0061t\+000061'"), "data");
        assert_eq!(pg(r"u&'caf\00e9 \\ ok'"), r"café \ ok");
        assert_eq!(pg(r"U&'!00e9!!' UESCAPE '!'"), "é!");
        assert_eq!(pg(r"U&'\D83D\DE00'"), "😀");
        assert_eq!(pg("U&'it''s'"), "it's");
        assert!(string_lit(Flavor::Postgres)(r"U&'\00zz'").is_err());
    }

    #[test]
    fn escape_strings_are_bytes_then_text() {
        // regression: each \xHH was a character of its own, so E'\xc3\xa9' read as
        // two characters (Ã©) instead of é; \u escapes were read as a 'u'.
        assert_eq!(pg(r"E'\xc3\xa9'"), "é");
        assert_eq!(pg(r"E'\303\251'"), "é");
        assert_eq!(pg(r"E'\u00e9\U0001F600'"), "é😀");
        assert_eq!(pg(r"E'tab\there\101\'q'"), "tab\there\u{41}'q");
        assert_eq!(pg(r"E'\\x01ff'"), r"\x01ff");
    }
}
