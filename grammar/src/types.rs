//! Column type strings of the three dialects -> [`DataType`].
//!
//! One grammar serves every place a type name appears: information_schema COLUMN_TYPE,
//! Debezium `typeName`, Oracle's ALL_TAB_COLUMNS, and type names inside DDL (sqlparser's
//! parsed types are printed and read back here, so each dialect's type rules live in one
//! place). Parsers fill in each dialect's defaults, so the IR is explicit: MySQL
//! `DECIMAL` is `decimal(10,0)`, `DATETIME` has 0 fractional digits, PostgreSQL
//! `timestamp` and Oracle `TIMESTAMP` have 6.

use crate::lex::{kw, paren_list, string_lit, sym, uint, ws, Res};
use crate::Flavor;
use ddl_core::{DataType, IntervalFields, LengthUnit, TimeZone};
use nom::branch::alt;
use nom::bytes::complete::take_while1;
use nom::combinator::{opt, value};
use nom::sequence::preceded;
use nom::Parser;

/// A parsed type plus what the type name implies beyond the type (PostgreSQL serial,
/// MySQL SERIAL: an identity column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeSpec {
    pub data_type: DataType,
    pub serial: bool,
}

impl From<DataType> for TypeSpec {
    fn from(data_type: DataType) -> Self {
        TypeSpec {
            data_type,
            serial: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeError {
    pub text: String,
    pub offset: usize,
}

impl std::error::Error for TypeError {}

impl std::fmt::Display for TypeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unrecognised type `{}`", self.text)
    }
}

/// Parse a whole type string.
pub fn parse_type(flavor: Flavor, text: &str) -> Result<TypeSpec, TypeError> {
    match data_type(flavor)(text) {
        Ok((rest, t)) if ws(rest).map(|(r, _)| r.is_empty()).unwrap_or(false) => Ok(t),
        Ok((rest, _)) => Err(TypeError {
            text: text.to_owned(),
            offset: text.len() - rest.len(),
        }),
        Err(_) => Err(TypeError {
            text: text.to_owned(),
            offset: 0,
        }),
    }
}

/// The type grammar of one dialect, for use inside statement grammars.
pub fn data_type(flavor: Flavor) -> impl Fn(&str) -> Res<'_, TypeSpec> {
    move |i| {
        let (i, base) = match flavor {
            Flavor::MySql => mysql_type(i)?,
            Flavor::Postgres => pg_type(i)?,
            Flavor::Oracle => oracle_type(i)?,
        };
        if flavor != Flavor::Postgres {
            return Ok((i, base));
        }
        // PostgreSQL arrays: `int[]`, `int[3][]`, `int ARRAY`.
        let mut t = base;
        let mut i = i;
        loop {
            if let Ok((r, _)) = (sym("["), opt(uint), sym("]")).parse(i) {
                t.data_type = DataType::Array {
                    element: Box::new(t.data_type),
                };
                i = r;
            } else if let Ok((r, _)) = (kw("ARRAY"), opt((sym("["), opt(uint), sym("]")))).parse(i)
            {
                t.data_type = DataType::Array {
                    element: Box::new(t.data_type),
                };
                i = r;
            } else {
                return Ok((i, t));
            }
        }
    }
}

fn word(i: &str) -> Res<'_, String> {
    preceded(
        ws,
        alt((
            // Quoted as written (a doubled quote stays doubled).
            nom::combinator::map(crate::lex::quoted_body('"'), |s: String| {
                format!("\"{}\"", s.replace('"', "\"\""))
            }),
            nom::combinator::map(
                take_while1(|c: char| c.is_alphanumeric() || c == '_' || c == '$'),
                |s: &str| s.to_ascii_uppercase(),
            ),
        )),
    )
    .parse(i)
}

fn fail<T>(i: &str) -> Res<'_, T> {
    Err(nom::Err::Error(crate::lex::Error::new(
        i,
        nom::error::ErrorKind::Tag,
    )))
}

fn len1(i: &str) -> Res<'_, Option<u64>> {
    opt(nom::sequence::delimited(sym("("), uint, sym(")"))).parse(i)
}

/// `(p)` or `(p, s)`; `*` as precision (Oracle) reads as None.
fn prec_scale(i: &str) -> Res<'_, Option<(Option<u64>, Option<i64>)>> {
    opt(nom::sequence::delimited(
        sym("("),
        (
            alt((value(None, sym("*")), nom::combinator::map(uint, Some))),
            opt(preceded(sym(","), crate::lex::int)),
        ),
        sym(")"),
    ))
    .parse(i)
}

fn sign(i: &str) -> Res<'_, bool> {
    let (i, s) = opt(alt((
        value(false, kw("SIGNED")),
        value(true, kw("UNSIGNED")),
    )))
    .parse(i)?;
    let (i, z) = opt(kw("ZEROFILL")).parse(i)?;
    // ZEROFILL implies UNSIGNED.
    Ok((i, s.unwrap_or(false) || z.is_some()))
}

fn u32c(v: u64) -> u32 {
    v.min(u64::from(u32::MAX)) as u32
}

fn frac(v: Option<u64>, default: u8) -> u8 {
    v.map(|p| p.min(9) as u8).unwrap_or(default)
}

fn mysql_type(i: &str) -> Res<'_, TypeSpec> {
    let (start, _) = ws(i)?;
    let (i, w) = word(start)?;
    let int = |bytes: u8, i| -> Res<'_, TypeSpec> {
        let (i, width) = len1(i)?;
        let (i, unsigned) = sign(i)?;
        if bytes == 1 && width == Some(1) && !unsigned {
            return Ok((i, DataType::Boolean.into()));
        }
        Ok((i, DataType::Int { bytes, unsigned }.into()))
    };
    let text = |n: u64| DataType::Text {
        max_bytes: Some(n),
        national: false,
    };
    let blob = |n: u64| DataType::Blob { max_bytes: Some(n) };
    match w.as_str() {
        "BOOL" | "BOOLEAN" => Ok((i, DataType::Boolean.into())),
        "TINYINT" | "INT1" => int(1, i),
        "SMALLINT" | "INT2" => int(2, i),
        "MEDIUMINT" | "INT3" | "MIDDLEINT" => int(3, i),
        "INT" | "INTEGER" | "INT4" => int(4, i),
        "BIGINT" | "INT8" => int(8, i),
        "SERIAL" => Ok((
            i,
            TypeSpec {
                data_type: DataType::Int {
                    bytes: 8,
                    unsigned: true,
                },
                serial: true,
            },
        )),
        "DECIMAL" | "DEC" | "NUMERIC" | "FIXED" => {
            let (i, ps) = prec_scale(i)?;
            let (i, unsigned) = sign(i)?;
            let (p, s) = match ps {
                None => (10, 0),
                Some((p, s)) => (p.unwrap_or(10), s.unwrap_or(0)),
            };
            Ok((
                i,
                DataType::Decimal {
                    precision: Some(u32c(p)),
                    scale: Some(s as i32),
                    unsigned,
                }
                .into(),
            ))
        }
        "FLOAT" | "FLOAT4" => {
            let (i, ps) = prec_scale(i)?;
            let (i, unsigned) = sign(i)?;
            let bytes = match ps {
                Some((Some(p), None)) if p > 24 => 8,
                _ => 4,
            };
            Ok((i, DataType::Float { bytes, unsigned }.into()))
        }
        "DOUBLE" | "REAL" | "FLOAT8" => {
            let (i, _) = opt(kw("PRECISION")).parse(i)?;
            let (i, _) = prec_scale(i)?;
            let (i, unsigned) = sign(i)?;
            Ok((i, DataType::Float { bytes: 8, unsigned }.into()))
        }
        "BIT" => {
            let (i, n) = len1(i)?;
            Ok((
                i,
                DataType::Bit {
                    length: Some(u32c(n.unwrap_or(1))),
                    varying: false,
                }
                .into(),
            ))
        }
        "NATIONAL" => {
            let (i, w2) = word(i)?;
            mysql_chars(&w2, true, i)
        }
        "CHAR" | "CHARACTER" | "VARCHAR" | "NCHAR" | "NVARCHAR" => {
            mysql_chars(&w, w.starts_with('N'), i)
        }
        "BINARY" => {
            let (i, n) = len1(i)?;
            Ok((
                i,
                DataType::Binary {
                    length: u32c(n.unwrap_or(1)),
                }
                .into(),
            ))
        }
        "VARBINARY" => {
            let (i, n) = len1(i)?;
            match n {
                Some(n) => Ok((i, DataType::Varbinary { length: u32c(n) }.into())),
                None => fail(i),
            }
        }
        "TINYTEXT" => Ok((i, text(255).into())),
        "TEXT" => {
            let (i, n) = len1(i)?;
            Ok((i, text(text_class(n.unwrap_or(65_535))).into()))
        }
        "MEDIUMTEXT" => Ok((i, text(16_777_215).into())),
        "LONGTEXT" => Ok((i, text(4_294_967_295).into())),
        "LONG" => {
            let (i, _) = opt(alt((kw("VARCHAR"), kw("VARBINARY")))).parse(i)?;
            Ok((i, text(16_777_215).into()))
        }
        "TINYBLOB" => Ok((i, blob(255).into())),
        "BLOB" => {
            let (i, n) = len1(i)?;
            Ok((i, blob(text_class(n.unwrap_or(65_535))).into()))
        }
        "MEDIUMBLOB" => Ok((i, blob(16_777_215).into())),
        "LONGBLOB" => Ok((i, blob(4_294_967_295).into())),
        "ENUM" => {
            let (i, values) = paren_list(string_lit(Flavor::MySql))(i)?;
            Ok((i, DataType::Enum { values }.into()))
        }
        "SET" => {
            let (i, values) = paren_list(string_lit(Flavor::MySql))(i)?;
            Ok((i, DataType::Set { values }.into()))
        }
        "JSON" => Ok((i, DataType::Json { binary: false }.into())),
        "UUID" => Ok((i, DataType::Uuid.into())),
        "DATE" => Ok((i, DataType::Date.into())),
        "TIME" => {
            let (i, p) = len1(i)?;
            Ok((
                i,
                DataType::Time {
                    precision: frac(p, 0),
                    tz: TimeZone::None,
                }
                .into(),
            ))
        }
        "DATETIME" => {
            let (i, p) = len1(i)?;
            Ok((
                i,
                DataType::Timestamp {
                    precision: frac(p, 0),
                    tz: TimeZone::None,
                }
                .into(),
            ))
        }
        "TIMESTAMP" => {
            let (i, p) = len1(i)?;
            Ok((
                i,
                DataType::Timestamp {
                    precision: frac(p, 0),
                    tz: TimeZone::Instant,
                }
                .into(),
            ))
        }
        "YEAR" => {
            let (i, _) = len1(i)?;
            Ok((i, DataType::Year.into()))
        }
        "GEOMETRY" | "POINT" | "LINESTRING" | "POLYGON" | "MULTIPOINT" | "MULTILINESTRING"
        | "MULTIPOLYGON" | "GEOMETRYCOLLECTION" | "GEOMCOLLECTION" => Ok((
            i,
            DataType::Spatial {
                kind: w.to_ascii_lowercase(),
            }
            .into(),
        )),
        "INET4" | "INET6" => Ok((
            i,
            DataType::Other {
                dialect: "mysql".into(),
                name: w.to_ascii_lowercase(),
            }
            .into(),
        )),
        // An unknown type name: the error points at the name.
        _ => fail(start),
    }
}

/// MySQL picks the smallest TEXT/BLOB class that holds n bytes.
fn text_class(n: u64) -> u64 {
    [255, 65_535, 16_777_215]
        .into_iter()
        .find(|c| n <= *c)
        .unwrap_or(4_294_967_295)
}

fn mysql_chars<'a>(w: &str, national: bool, i: &'a str) -> Res<'a, TypeSpec> {
    let (i, varying) = match w {
        "VARCHAR" | "NVARCHAR" => (i, true),
        _ => {
            let (i, v) = opt(kw("VARYING")).parse(i)?;
            (i, v.is_some())
        }
    };
    let (i, n) = len1(i)?;
    if varying {
        match n {
            Some(n) => Ok((
                i,
                DataType::Varchar {
                    length: Some(u32c(n)),
                    unit: LengthUnit::Chars,
                    national,
                }
                .into(),
            )),
            None => fail(i),
        }
    } else {
        Ok((
            i,
            DataType::Char {
                length: u32c(n.unwrap_or(1)),
                unit: LengthUnit::Chars,
                national,
            }
            .into(),
        ))
    }
}

fn with_tz(i: &str) -> Res<'_, Option<bool>> {
    opt(alt((
        value(true, (kw("WITH"), kw("TIME"), kw("ZONE"))),
        value(false, (kw("WITHOUT"), kw("TIME"), kw("ZONE"))),
    )))
    .parse(i)
}

fn pg_type(i: &str) -> Res<'_, TypeSpec> {
    let (i, _) = opt((word, sym("."))).parse(i).map(|(r, _)| (r, ()))?;
    let (i, w) = word(i)?;
    // pg_dump --quote-all-identifiers quotes type names that are not keywords
    // (`"text"`, `"int8"`, `"uuid"`): a quoted name in lower case is the same name.
    let w = match w.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
        Some(inner)
            if !inner.is_empty()
                && inner
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') =>
        {
            inner.to_ascii_uppercase()
        }
        _ => w,
    };
    let serial = |bytes: u8, i| -> Res<'_, TypeSpec> {
        Ok((
            i,
            TypeSpec {
                data_type: DataType::int(bytes),
                serial: true,
            },
        ))
    };
    let other = |name: &str, i| -> Res<'_, TypeSpec> {
        Ok((
            i,
            DataType::Other {
                dialect: "postgres".into(),
                name: name.to_owned(),
            }
            .into(),
        ))
    };
    match w.as_str() {
        "SMALLINT" | "INT2" => Ok((i, DataType::int(2).into())),
        "INTEGER" | "INT" | "INT4" => Ok((i, DataType::int(4).into())),
        "BIGINT" | "INT8" => Ok((i, DataType::int(8).into())),
        "SMALLSERIAL" | "SERIAL2" => serial(2, i),
        "SERIAL" | "SERIAL4" => serial(4, i),
        "BIGSERIAL" | "SERIAL8" => serial(8, i),
        "NUMERIC" | "DECIMAL" | "DEC" => {
            let (i, ps) = prec_scale(i)?;
            let (precision, scale) = match ps {
                None | Some((None, _)) => (None, None),
                Some((Some(p), s)) => (Some(u32c(p)), Some(s.unwrap_or(0) as i32)),
            };
            Ok((
                i,
                DataType::Decimal {
                    precision,
                    scale,
                    unsigned: false,
                }
                .into(),
            ))
        }
        "REAL" | "FLOAT4" => Ok((
            i,
            DataType::Float {
                bytes: 4,
                unsigned: false,
            }
            .into(),
        )),
        "DOUBLE" => {
            let (i, _) = kw("PRECISION").parse(i)?;
            Ok((
                i,
                DataType::Float {
                    bytes: 8,
                    unsigned: false,
                }
                .into(),
            ))
        }
        "FLOAT8" => Ok((
            i,
            DataType::Float {
                bytes: 8,
                unsigned: false,
            }
            .into(),
        )),
        "FLOAT" => {
            let (i, p) = len1(i)?;
            let bytes = if p.is_some_and(|p| p <= 24) { 4 } else { 8 };
            Ok((
                i,
                DataType::Float {
                    bytes,
                    unsigned: false,
                }
                .into(),
            ))
        }
        "MONEY" => Ok((i, DataType::Money.into())),
        "CHARACTER" | "CHAR" | "NCHAR" | "BPCHAR" | "VARCHAR" => {
            let (i, varying) = if w == "VARCHAR" {
                (i, true)
            } else {
                let (i, v) = opt(kw("VARYING")).parse(i)?;
                (i, v.is_some())
            };
            let (i, n) = len1(i)?;
            if varying {
                Ok((
                    i,
                    DataType::Varchar {
                        length: n.map(u32c),
                        unit: LengthUnit::Chars,
                        national: false,
                    }
                    .into(),
                ))
            } else {
                Ok((
                    i,
                    DataType::Char {
                        length: u32c(n.unwrap_or(1)),
                        unit: LengthUnit::Chars,
                        national: false,
                    }
                    .into(),
                ))
            }
        }
        "\"CHAR\"" | "\"char\"" => other("\"char\"", i),
        "TEXT" => Ok((
            i,
            DataType::Text {
                max_bytes: None,
                national: false,
            }
            .into(),
        )),
        "BYTEA" => Ok((i, DataType::Blob { max_bytes: None }.into())),
        "BOOLEAN" | "BOOL" => Ok((i, DataType::Boolean.into())),
        "DATE" => Ok((i, DataType::Date.into())),
        "TIME" | "TIMETZ" => {
            let (i, p) = len1(i)?;
            let (i, tz) = with_tz(i)?;
            let tz = if w == "TIMETZ" || tz == Some(true) {
                TimeZone::WithOffset
            } else {
                TimeZone::None
            };
            Ok((
                i,
                DataType::Time {
                    precision: frac(p, 6),
                    tz,
                }
                .into(),
            ))
        }
        "TIMESTAMP" | "TIMESTAMPTZ" => {
            let (i, p) = len1(i)?;
            let (i, tz) = with_tz(i)?;
            let tz = if w == "TIMESTAMPTZ" || tz == Some(true) {
                TimeZone::Instant
            } else {
                TimeZone::None
            };
            Ok((
                i,
                DataType::Timestamp {
                    precision: frac(p, 6),
                    tz,
                }
                .into(),
            ))
        }
        "INTERVAL" => {
            let (i, fields) = opt(alt((
                value(
                    IntervalFields::YearToMonth,
                    (kw("YEAR"), kw("TO"), kw("MONTH")),
                ),
                value(
                    IntervalFields::DayToSecond,
                    (kw("DAY"), kw("TO"), kw("SECOND")),
                ),
            )))
            .parse(i)?;
            let (i, p) = len1(i)?;
            Ok((
                i,
                DataType::Interval {
                    fields: fields.unwrap_or(IntervalFields::All),
                    leading: None,
                    precision: p.map(|p| p.min(9) as u8),
                }
                .into(),
            ))
        }
        "UUID" => Ok((i, DataType::Uuid.into())),
        "JSON" => Ok((i, DataType::Json { binary: false }.into())),
        "JSONB" => Ok((i, DataType::Json { binary: true }.into())),
        "BIT" => {
            let (i, v) = opt(kw("VARYING")).parse(i)?;
            let (i, n) = len1(i)?;
            let varying = v.is_some();
            Ok((
                i,
                DataType::Bit {
                    length: if varying {
                        n.map(u32c)
                    } else {
                        Some(u32c(n.unwrap_or(1)))
                    },
                    varying,
                }
                .into(),
            ))
        }
        "VARBIT" => {
            let (i, n) = len1(i)?;
            Ok((
                i,
                DataType::Bit {
                    length: n.map(u32c),
                    varying: true,
                }
                .into(),
            ))
        }
        // PostGIS: `geometry(Point,4326)`, the subtype and SRID kept as written.
        "GEOMETRY" | "GEOGRAPHY" => {
            let (i, m) = opt(crate::lex::paren_group(Flavor::Postgres)).parse(i)?;
            Ok((
                i,
                DataType::Spatial {
                    kind: format!("{}{}", w.to_ascii_lowercase(), m.unwrap_or("")),
                }
                .into(),
            ))
        }
        "POINT" | "LINE" | "LSEG" | "BOX" | "PATH" | "POLYGON" | "CIRCLE" => Ok((
            i,
            DataType::Spatial {
                kind: w.to_ascii_lowercase(),
            }
            .into(),
        )),
        _ if w.starts_with('"') => other(&w, i),
        _ => {
            // Any other named type (inet, xml, tsvector, a user's domain or enum type),
            // with its modifiers, kept as written.
            let (rest, m) = opt(crate::lex::paren_group(Flavor::Postgres)).parse(i)?;
            let name = format!("{}{}", w.to_ascii_lowercase(), m.unwrap_or(""));
            other(&name, rest)
        }
    }
}

/// Oracle length with optional BYTE/CHAR semantics: `(20)`, `(20 CHAR)`, and
/// sqlparser's printed form `(20, CHAR)`.
fn ora_len(i: &str) -> Res<'_, Option<(u64, Option<LengthUnit>)>> {
    opt(nom::sequence::delimited(
        sym("("),
        (
            uint,
            opt(preceded(
                opt(sym(",")),
                alt((
                    value(LengthUnit::Bytes, kw("BYTE")),
                    value(LengthUnit::Chars, kw("CHAR")),
                )),
            )),
        ),
        sym(")"),
    ))
    .parse(i)
}

fn oracle_type(i: &str) -> Res<'_, TypeSpec> {
    let (start, _) = ws(i)?;
    let (i, w) = word(start)?;
    let dec = |p: Option<u32>, s: Option<i32>| DataType::Decimal {
        precision: p,
        scale: s,
        unsigned: false,
    };
    let f = |bytes| DataType::Float {
        bytes,
        unsigned: false,
    };
    match w.as_str() {
        "NUMBER" | "NUMERIC" | "DECIMAL" | "DEC" => {
            let (i, ps) = prec_scale(i)?;
            let t = match ps {
                None => {
                    if w == "NUMBER" {
                        dec(None, None)
                    } else {
                        dec(Some(38), Some(0))
                    }
                }
                Some((p, s)) => dec(Some(p.map(u32c).unwrap_or(38)), Some(s.unwrap_or(0) as i32)),
            };
            Ok((i, t.into()))
        }
        "INTEGER" | "INT" | "SMALLINT" => Ok((i, dec(Some(38), Some(0)).into())),
        "FLOAT" => {
            let (i, _) = len1(i)?;
            Ok((i, f(8).into()))
        }
        "REAL" => Ok((i, f(8).into())),
        "DOUBLE" => {
            let (i, _) = kw("PRECISION").parse(i)?;
            Ok((i, f(8).into()))
        }
        "BINARY_FLOAT" => Ok((i, f(4).into())),
        "BINARY_DOUBLE" => Ok((i, f(8).into())),
        "CHAR" | "CHARACTER" | "NCHAR" => {
            let national = w == "NCHAR";
            let (i, v) = opt(kw("VARYING")).parse(i)?;
            let (i, l) = ora_len(i)?;
            let (len, unit) = l.unwrap_or((1, None));
            let unit = if national {
                LengthUnit::Chars
            } else {
                unit.unwrap_or(LengthUnit::Bytes)
            };
            let t = if v.is_some() {
                DataType::Varchar {
                    length: Some(u32c(len)),
                    unit,
                    national,
                }
            } else {
                DataType::Char {
                    length: u32c(len),
                    unit,
                    national,
                }
            };
            Ok((i, t.into()))
        }
        "VARCHAR2" | "VARCHAR" | "NVARCHAR2" => {
            let national = w == "NVARCHAR2";
            let (i, l) = ora_len(i)?;
            let Some((len, unit)) = l else {
                return fail(i);
            };
            let unit = if national {
                LengthUnit::Chars
            } else {
                unit.unwrap_or(LengthUnit::Bytes)
            };
            Ok((
                i,
                DataType::Varchar {
                    length: Some(u32c(len)),
                    unit,
                    national,
                }
                .into(),
            ))
        }
        "CLOB" | "NCLOB" => Ok((
            i,
            DataType::Text {
                max_bytes: None,
                national: w == "NCLOB",
            }
            .into(),
        )),
        "BLOB" => Ok((i, DataType::Blob { max_bytes: None }.into())),
        "RAW" => {
            let (i, n) = len1(i)?;
            match n {
                Some(n) => Ok((i, DataType::Varbinary { length: u32c(n) }.into())),
                None => fail(i),
            }
        }
        "LONG" => {
            let (i, raw) = opt(kw("RAW")).parse(i)?;
            let t = if raw.is_some() {
                DataType::Blob {
                    max_bytes: Some(2_147_483_647),
                }
            } else {
                DataType::Text {
                    max_bytes: Some(2_147_483_647),
                    national: false,
                }
            };
            Ok((i, t.into()))
        }
        "DATE" => Ok((
            i,
            DataType::Timestamp {
                precision: 0,
                tz: TimeZone::None,
            }
            .into(),
        )),
        "TIMESTAMP" => {
            let (i, p) = len1(i)?;
            let (i, tz) = opt(alt((
                value(
                    TimeZone::Instant,
                    (kw("WITH"), kw("LOCAL"), kw("TIME"), kw("ZONE")),
                ),
                value(TimeZone::WithOffset, (kw("WITH"), kw("TIME"), kw("ZONE"))),
            )))
            .parse(i)?;
            Ok((
                i,
                DataType::Timestamp {
                    precision: frac(p, 6),
                    tz: tz.unwrap_or_default(),
                }
                .into(),
            ))
        }
        "INTERVAL" => {
            let (i, t) = alt((
                nom::combinator::map((kw("YEAR"), len1, kw("TO"), kw("MONTH")), |(_, l, _, _)| {
                    DataType::Interval {
                        fields: IntervalFields::YearToMonth,
                        leading: Some(l.unwrap_or(2).min(9) as u8),
                        precision: None,
                    }
                }),
                nom::combinator::map(
                    (kw("DAY"), len1, kw("TO"), kw("SECOND"), len1),
                    |(_, l, _, _, p)| DataType::Interval {
                        fields: IntervalFields::DayToSecond,
                        leading: Some(l.unwrap_or(2).min(9) as u8),
                        precision: Some(p.unwrap_or(6).min(9) as u8),
                    },
                ),
            ))
            .parse(i)?;
            Ok((i, t.into()))
        }
        "SDO_GEOMETRY" => Ok((
            i,
            DataType::Spatial {
                kind: "geometry".into(),
            }
            .into(),
        )),
        "ROWID" | "UROWID" | "XMLTYPE" | "BFILE" => {
            let (i, m) = opt(crate::lex::paren_group(Flavor::Oracle)).parse(i)?;
            Ok((
                i,
                DataType::Other {
                    dialect: "oracle".into(),
                    name: format!("{w}{}", m.unwrap_or("")),
                }
                .into(),
            ))
        }
        "BOOLEAN" => Ok((i, DataType::Boolean.into())),
        "JSON" => Ok((i, DataType::Json { binary: true }.into())),
        _ => fail(start),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(f: Flavor, s: &str) -> DataType {
        parse_type(f, s)
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .data_type
    }

    #[test]
    fn mysql_column_types() {
        assert_eq!(t(Flavor::MySql, "tinyint(1)"), DataType::Boolean);
        assert_eq!(
            t(Flavor::MySql, "tinyint(1) unsigned"),
            DataType::Int {
                bytes: 1,
                unsigned: true
            }
        );
        assert_eq!(
            t(Flavor::MySql, "bigint(20) unsigned zerofill"),
            DataType::Int {
                bytes: 8,
                unsigned: true
            }
        );
        assert_eq!(
            t(Flavor::MySql, "enum('a','it''s')"),
            DataType::Enum {
                values: vec!["a".into(), "it's".into()]
            }
        );
        assert_eq!(
            t(Flavor::MySql, "decimal"),
            DataType::Decimal {
                precision: Some(10),
                scale: Some(0),
                unsigned: false
            }
        );
        assert_eq!(
            t(Flavor::MySql, "datetime(3)"),
            DataType::Timestamp {
                precision: 3,
                tz: TimeZone::None
            }
        );
        assert_eq!(
            t(Flavor::MySql, "text(300)"),
            DataType::Text {
                max_bytes: Some(65_535),
                national: false
            }
        );
    }

    #[test]
    fn oracle_types_sqlparser_rejects() {
        assert_eq!(
            t(Flavor::Oracle, "NUMBER(*,0)"),
            DataType::Decimal {
                precision: Some(38),
                scale: Some(0),
                unsigned: false
            }
        );
        for s in ["VARCHAR2(20 CHAR)", "VARCHAR2(20, CHAR)"] {
            assert_eq!(
                t(Flavor::Oracle, s),
                DataType::Varchar {
                    length: Some(20),
                    unit: LengthUnit::Chars,
                    national: false
                }
            );
        }
        assert_eq!(
            t(Flavor::Oracle, "varchar2(20)"),
            DataType::Varchar {
                length: Some(20),
                unit: LengthUnit::Bytes,
                national: false
            }
        );
        assert_eq!(
            t(Flavor::Oracle, "TIMESTAMP(3) WITH LOCAL TIME ZONE"),
            DataType::Timestamp {
                precision: 3,
                tz: TimeZone::Instant
            }
        );
        assert!(matches!(
            t(Flavor::Oracle, "INTERVAL DAY(3) TO SECOND(2)"),
            DataType::Interval {
                fields: IntervalFields::DayToSecond,
                leading: Some(3),
                precision: Some(2)
            }
        ));
    }

    #[test]
    fn postgres_types() {
        assert_eq!(
            t(Flavor::Postgres, "TEXT[][]"),
            DataType::Array {
                element: Box::new(DataType::Array {
                    element: Box::new(DataType::Text {
                        max_bytes: None,
                        national: false
                    })
                })
            }
        );
        assert_eq!(
            t(Flavor::Postgres, "timestamp(3) with time zone"),
            DataType::Timestamp {
                precision: 3,
                tz: TimeZone::Instant
            }
        );
        assert!(parse_type(Flavor::Postgres, "bigserial").unwrap().serial);
        assert_eq!(
            t(Flavor::Postgres, "inet"),
            DataType::Other {
                dialect: "postgres".into(),
                name: "inet".into()
            }
        );
    }

    /// A user type in a schema whose quoted name holds a doubled quote (PostgreSQL's
    /// `format_type` writes it so; the source's table definitions failed to parse).
    #[test]
    fn quoted_type_names_keep_their_doubled_quotes() {
        assert_eq!(
            t(Flavor::Postgres, "\"my \"\"odd\"\" schema\".mood"),
            DataType::Other {
                dialect: "postgres".into(),
                name: "mood".into()
            }
        );
    }

    #[test]
    fn bad_type_is_an_error() {
        assert!(parse_type(Flavor::MySql, "varchar").is_err());
        assert!(parse_type(Flavor::Oracle, "NUMBER(10) garbage").is_err());
    }
}
