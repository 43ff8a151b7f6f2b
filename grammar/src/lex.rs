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
    // is already decoded, so the characters are the string's), N'...', and
    // PostgreSQL's E'...' (backslash escapes: \n, \t, \\, \ooo, \xHH, ...).
    let (i, prefix) = opt(alt((introducer, tag_no_case("N"), tag_no_case("E")))).parse(i)?;
    let e_string = prefix.is_some_and(|p| p.eq_ignore_ascii_case("E"));
    let escapes = escapes || e_string;
    let (mut rest, _) = char('\'').parse(i)?;
    let mut out = String::new();
    let mut chars = rest.char_indices();
    loop {
        match chars.next() {
            None => {
                return Err(nom::Err::Error(Error::new(
                    rest,
                    nom::error::ErrorKind::Char,
                )))
            }
            Some((p, '\\')) if e_string => {
                // PostgreSQL's escapes: octal and hex byte values as characters
                // (an escape string's bytes in a UTF-8 database).
                let tail = &rest[p + 1..];
                let digits = |radix: u32, max: usize, skip: usize| {
                    let d: String = tail[skip..]
                        .chars()
                        .take(max)
                        .take_while(|c| c.is_digit(radix))
                        .collect();
                    (!d.is_empty())
                        .then(|| u32::from_str_radix(&d, radix).ok().map(|v| (v, d.len())))
                        .flatten()
                };
                let (c, used) = match tail.chars().next() {
                    Some('x') => match digits(16, 2, 1) {
                        Some((v, n)) => (char::from_u32(v).unwrap_or('\u{fffd}'), n + 1),
                        None => ('x', 1),
                    },
                    Some('0'..='7') => match digits(8, 3, 0) {
                        Some((v, n)) => (char::from_u32(v).unwrap_or('\u{fffd}'), n),
                        None => ('0', 1),
                    },
                    Some('b') => ('\u{8}', 1),
                    Some('f') => ('\u{c}', 1),
                    Some('n') => ('\n', 1),
                    Some('r') => ('\r', 1),
                    Some('t') => ('\t', 1),
                    Some(other) => (other, 1),
                    None => continue,
                };
                out.push(c);
                for _ in 0..used {
                    chars.next();
                }
            }
            Some((_, '\\')) if escapes => {
                if let Some((_, c)) = chars.next() {
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
            Some((p, '\'')) => {
                if rest[p + 1..].starts_with('\'') {
                    out.push('\'');
                    chars.next();
                } else {
                    rest = &rest[p + 1..];
                    return Ok((rest, out));
                }
            }
            Some((_, c)) => out.push(c),
        }
    }
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
