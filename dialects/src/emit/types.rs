//! Type mapping per target: the nearest type, and a note for every loss.
//! Defaults follow pgloader's MySQL casts and ora2pg's Oracle rules.

use crate::Dialect;
use ddl_core::{DataType as T, IntervalFields, LengthUnit, TimeZone};

/// The target spelling of a type, and what is lost (None: nothing).
pub struct Mapped {
    pub sql: String,
    pub loss: Option<String>,
}

fn ok(sql: impl Into<String>) -> Mapped {
    Mapped {
        sql: sql.into(),
        loss: None,
    }
}

fn lossy(sql: impl Into<String>, loss: impl Into<String>) -> Mapped {
    Mapped {
        sql: sql.into(),
        loss: Some(loss.into()),
    }
}

/// `name(p)`, or just `name` when p is the dialect's default precision.
fn with_precision(name: &str, p: u8, default: u8) -> String {
    if p == default {
        name.to_owned()
    } else {
        format!("{name}({p})")
    }
}

fn quote_list(values: &[String]) -> String {
    values
        .iter()
        .map(|v| super::string_literal(Dialect::MySql, v))
        .collect::<Vec<_>>()
        .join(",")
}

fn max_len(values: &[String]) -> u32 {
    values
        .iter()
        .map(|v| v.chars().count() as u32)
        .max()
        .unwrap_or(1)
        .max(1)
}

/// ora2pg: NUMBER(p,0) from Oracle becomes the smallest integer type holding p digits.
fn oracle_int(p: u32) -> Option<&'static str> {
    match p {
        0..=4 => Some("smallint"),
        5..=9 => Some("integer"),
        10..=18 => Some("bigint"),
        _ => None,
    }
}

pub fn map_type(target: Dialect, source: Dialect, t: &T) -> Mapped {
    match target {
        Dialect::MySql => mysql(source, t),
        Dialect::Postgres => postgres(source, t),
        Dialect::Oracle => oracle(source, t),
    }
}

fn mysql(source: Dialect, t: &T) -> Mapped {
    let unsigned = |u: bool| if u { " UNSIGNED" } else { "" };
    match t {
        T::Boolean => ok("TINYINT(1)"),
        T::Int { bytes, unsigned: u } => ok(format!(
            "{}{}",
            match bytes {
                1 => "TINYINT",
                2 => "SMALLINT",
                3 => "MEDIUMINT",
                4 => "INT",
                _ => "BIGINT",
            },
            unsigned(*u)
        )),
        T::Decimal {
            precision,
            scale,
            unsigned: u,
        } => match (precision, scale) {
            (None, _) => lossy(
                "DECIMAL(65,30)",
                "an unconstrained number is limited to 65 digits, 30 after the point",
            ),
            (Some(p), s) => {
                let s = s.unwrap_or(0);
                if source == Dialect::Oracle && s == 0 {
                    if let Some(i) = oracle_int(*p) {
                        return ok(i.to_ascii_uppercase());
                    }
                }
                if s < 0 {
                    let p2 = (*p as i64 - s as i64).min(65);
                    return lossy(
                        format!("DECIMAL({p2},0)"),
                        "negative scale is not supported: rounding is no longer enforced",
                    );
                }
                if *p > 65 || s > 30 {
                    return lossy(
                        format!("DECIMAL(65,{})", s.min(30)),
                        "precision above 65 or scale above 30 is reduced",
                    );
                }
                ok(format!("DECIMAL({p},{s}){}", unsigned(*u)))
            }
        },
        T::Float { bytes, unsigned: u } => ok(format!(
            "{}{}",
            if *bytes == 4 { "FLOAT" } else { "DOUBLE" },
            unsigned(*u)
        )),
        T::Money => ok("DECIMAL(19,2)"),
        T::Char { length, .. } => {
            if *length <= 255 {
                ok(format!("CHAR({length})"))
            } else {
                lossy(
                    format!("VARCHAR({length})"),
                    "CHAR longer than 255 becomes VARCHAR (no blank padding)",
                )
            }
        }
        T::Varchar { length, .. } => match length {
            Some(n) if *n <= 16_383 => ok(format!("VARCHAR({n})")),
            Some(n) if *n <= 16_777_215 / 4 => ok("MEDIUMTEXT"),
            _ => ok("LONGTEXT"),
        },
        T::Text { max_bytes, .. } => ok(match max_bytes {
            Some(n) if *n <= 255 => "TINYTEXT",
            Some(n) if *n <= 65_535 => "TEXT",
            Some(n) if *n <= 16_777_215 => "MEDIUMTEXT",
            _ => "LONGTEXT",
        }),
        T::Binary { length } => {
            if *length <= 255 {
                ok(format!("BINARY({length})"))
            } else {
                ok(format!("VARBINARY({length})"))
            }
        }
        T::Varbinary { length } => ok(format!("VARBINARY({length})")),
        T::Blob { max_bytes } => ok(match max_bytes {
            Some(n) if *n <= 255 => "TINYBLOB",
            Some(n) if *n <= 65_535 => "BLOB",
            Some(n) if *n <= 16_777_215 => "MEDIUMBLOB",
            _ => "LONGBLOB",
        }),
        T::Enum { values } => ok(format!("ENUM({})", quote_list(values))),
        T::Set { values } => ok(format!("SET({})", quote_list(values))),
        T::Json { .. } => ok("JSON"),
        T::Uuid => ok("CHAR(36)"),
        T::Date => ok("DATE"),
        T::Time { precision, tz } => {
            let p = (*precision).min(6);
            let s = with_precision("TIME", p, 0);
            match tz {
                TimeZone::None if *precision <= 6 => ok(s),
                TimeZone::None => lossy(s, "fractional seconds beyond 6 digits are cut"),
                _ => lossy(s, "the time-zone offset is lost"),
            }
        }
        T::Timestamp { precision, tz } => {
            let p = (*precision).min(6);
            let base = if *tz == TimeZone::Instant {
                "TIMESTAMP"
            } else {
                "DATETIME"
            };
            let s = with_precision(base, p, 0);
            match tz {
                _ if *precision > 6 => lossy(s, "fractional seconds beyond 6 digits are cut"),
                TimeZone::Instant if source != Dialect::MySql => {
                    lossy(s, "MySQL TIMESTAMP holds only 1970-01-01..2038-01-19 UTC")
                }
                TimeZone::WithOffset => lossy(s, "the time-zone offset is lost"),
                _ => ok(s),
            }
        }
        T::Year => ok("YEAR"),
        T::Bit { length, varying } => match length {
            Some(n) if *n <= 64 && !varying => ok(format!("BIT({n})")),
            Some(n) if *n <= 64 => lossy(
                format!("BIT({n})"),
                "bit strings shorter than the limit are padded",
            ),
            _ => lossy(
                "LONGBLOB",
                "a bit string longer than 64 bits, or of no length, is stored as its digits' text ('0101')",
            ),
        },
        T::Interval { .. } => lossy("VARCHAR(64)", "intervals are stored as text"),
        T::Array { .. } => lossy("JSON", "arrays are stored as JSON"),
        T::Spatial { kind } => match kind.as_str() {
            "geometry" | "point" | "linestring" | "polygon" | "multipoint" | "multilinestring"
            | "multipolygon" | "geometrycollection" => ok(kind.to_ascii_uppercase()),
            "geomcollection" => ok("GEOMETRYCOLLECTION"),
            // PostgreSQL's infinite line and circle have no MySQL geometry.
            "line" | "circle" => lossy(
                "LONGTEXT",
                format!("postgres type {kind} is stored as text (MySQL has no {kind} geometry)"),
            ),
            // PostGIS `geometry(Point,4326)`: the subtype's MySQL geometry.
            _ if kind.starts_with("geometry(") || kind.starts_with("geography(") => {
                let sub = kind
                    .split(['(', ',', ')'])
                    .nth(1)
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase();
                let sub = sub
                    .strip_suffix("zm")
                    .or_else(|| sub.strip_suffix('z'))
                    .or_else(|| sub.strip_suffix('m'))
                    .unwrap_or(&sub);
                let mysql = match sub {
                    "point" | "linestring" | "polygon" | "multipoint" | "multilinestring"
                    | "multipolygon" | "geometrycollection" => sub.to_ascii_uppercase(),
                    _ => "GEOMETRY".to_owned(),
                };
                lossy(
                    mysql,
                    format!("postgis {kind}: its SRID and Z/M dimensions are not carried"),
                )
            }
            _ => lossy("GEOMETRY", format!("{kind} becomes GEOMETRY")),
        },
        T::Other { dialect, name } if dialect == "mysql" => ok(name.to_ascii_uppercase()),
        T::Other { dialect, name } => lossy(
            "LONGTEXT",
            format!("{dialect} type {name} is stored as text"),
        ),
    }
}

fn postgres(source: Dialect, t: &T) -> Mapped {
    let unsigned_note = |sql: String, u: bool| {
        if u {
            lossy(sql, "UNSIGNED is not enforced")
        } else {
            ok(sql)
        }
    };
    match t {
        T::Boolean => ok("boolean"),
        T::Int { bytes, unsigned } => ok(match (bytes, unsigned) {
            (1, _) | (2, false) => "smallint",
            (2, true) | (3, _) | (4, false) => "integer",
            (4, true) | (8, false) => "bigint",
            _ => "numeric(20)",
        }),
        T::Decimal {
            precision,
            scale,
            unsigned,
        } => match precision {
            None => ok("numeric"),
            Some(p) => {
                let s = scale.unwrap_or(0);
                if source == Dialect::Oracle && s == 0 {
                    if let Some(i) = oracle_int(*p) {
                        return ok(i);
                    }
                }
                if *p > 1000 {
                    return lossy("numeric", "precision above 1000 is unconstrained");
                }
                unsigned_note(format!("numeric({p},{s})"), *unsigned)
            }
        },
        T::Float { bytes, unsigned } => unsigned_note(
            if *bytes == 4 {
                "real"
            } else {
                "double precision"
            }
            .into(),
            *unsigned,
        ),
        T::Money => ok("money"),
        // MySQL's CHAR(0) (only '' and NULL) has no PostgreSQL length.
        T::Char { length: 0, .. } => lossy("char(1)", "CHAR(0) becomes char(1)"),
        T::Char { length, .. } => ok(format!("char({length})")),
        T::Varchar { length, .. } => ok(match length {
            Some(n) => format!("varchar({n})"),
            None => "varchar".into(),
        }),
        T::Text { .. } => ok("text"),
        T::Binary { .. } | T::Varbinary { .. } | T::Blob { .. } => ok("bytea"),
        T::Enum { values } => ok(format!("varchar({})", max_len(values))),
        T::Set { values } => lossy(
            format!(
                "varchar({})",
                values
                    .iter()
                    .map(|v| v.chars().count() + 1)
                    .sum::<usize>()
                    .max(1)
            ),
            "SET membership is not enforced",
        ),
        T::Json { binary } => ok(if *binary { "jsonb" } else { "json" }),
        T::Uuid => ok("uuid"),
        T::Date => ok("date"),
        T::Time { precision, tz } => {
            let p = (*precision).min(6);
            let (name, note) = match tz {
                TimeZone::None => ("time", None::<&str>),
                TimeZone::WithOffset => ("timetz", None),
                TimeZone::Instant => ("timetz", None),
            };
            let sql = with_precision(name, p, 6);
            if source == Dialect::MySql {
                return lossy(
                    sql,
                    "MySQL TIME values beyond 24:00:00 or negative do not fit",
                );
            }
            match note {
                Some(n) => lossy(sql, n),
                None if *precision > 6 => lossy(sql, "fractional seconds beyond 6 digits are cut"),
                None => ok(sql),
            }
        }
        T::Timestamp { precision, tz } => {
            let p = (*precision).min(6);
            let name = if *tz == TimeZone::None {
                "timestamp"
            } else {
                "timestamptz"
            };
            let sql = with_precision(name, p, 6);
            match tz {
                TimeZone::WithOffset => lossy(sql, "the time-zone offset is normalised to UTC"),
                _ if *precision > 6 => lossy(sql, "fractional seconds beyond 6 digits are cut"),
                _ => ok(sql),
            }
        }
        T::Year => ok("smallint"),
        T::Bit { length, varying } => ok(match (length, varying) {
            (Some(n), false) => format!("bit({n})"),
            (None, false) => "bit".into(),
            (Some(n), true) => format!("varbit({n})"),
            (None, true) => "varbit".into(),
        }),
        T::Interval {
            fields, precision, ..
        } => ok(match (fields, precision) {
            (IntervalFields::YearToMonth, _) => "interval year to month".to_owned(),
            (IntervalFields::DayToSecond, Some(p)) => format!("interval day to second({p})"),
            (IntervalFields::DayToSecond, None) => "interval day to second".to_owned(),
            (IntervalFields::All, Some(p)) => format!("interval({p})"),
            (IntervalFields::All, None) => "interval".to_owned(),
        }),
        // An enum's labels in an array take no length: a label added later fits
        // (the column of a single label is widened by its type change).
        T::Array { element } if matches!(**element, T::Enum { .. }) => ok("text[]"),
        T::Array { element } => {
            let m = postgres(source, element);
            Mapped {
                sql: format!("{}[]", m.sql),
                loss: m.loss,
            }
        }
        T::Spatial { kind } if source == Dialect::Postgres => ok(kind.clone()),
        T::Spatial { kind } => lossy("bytea", format!("{kind} is stored as WKB bytes")),
        T::Other { dialect, name } if dialect == "postgres" => ok(name.clone()),
        T::Other { dialect, name } => {
            lossy("text", format!("{dialect} type {name} is stored as text"))
        }
    }
}

fn oracle(source: Dialect, t: &T) -> Mapped {
    let unit = |u: &LengthUnit| match u {
        LengthUnit::Chars => "CHAR",
        LengthUnit::Bytes => "BYTE",
    };
    match t {
        T::Boolean => ok("NUMBER(1)"),
        T::Int { bytes, unsigned } => ok(format!("NUMBER({})", T::int_digits(*bytes, *unsigned))),
        T::Decimal {
            precision, scale, ..
        } => match precision {
            None => ok("NUMBER"),
            Some(p) if *p > 38 => lossy("NUMBER", "precision above 38 digits is not kept"),
            Some(p) => ok(format!("NUMBER({p},{})", scale.unwrap_or(0))),
        },
        T::Float { bytes, .. } => ok(if *bytes == 4 {
            "BINARY_FLOAT"
        } else {
            "BINARY_DOUBLE"
        }),
        T::Money => ok("NUMBER(19,2)"),
        T::Char { length: 0, .. } => lossy("CHAR(1)", "CHAR(0) becomes CHAR(1)"),
        T::Char {
            length,
            unit: u,
            national,
        } => {
            if *national {
                ok(format!("NCHAR({length})"))
            } else if *length <= 2000 {
                ok(format!("CHAR({length} {})", unit(u)))
            } else {
                ok(format!("VARCHAR2({length} {})", unit(u)))
            }
        }
        T::Varchar {
            length,
            unit: u,
            national,
        } => match length {
            Some(n) if *n <= 4000 && *national => ok(format!("NVARCHAR2({n})")),
            Some(n) if *n <= 4000 => ok(format!("VARCHAR2({n} {})", unit(u))),
            _ => ok(if *national { "NCLOB" } else { "CLOB" }),
        },
        T::Text {
            max_bytes,
            national,
        } => ok(match (max_bytes, national) {
            (Some(2_147_483_647), _) if source == Dialect::Oracle => "LONG",
            (_, true) => "NCLOB",
            _ => "CLOB",
        }),
        T::Binary { length } | T::Varbinary { length } if *length <= 2000 => {
            ok(format!("RAW({length})"))
        }
        T::Binary { .. } | T::Varbinary { .. } => ok("BLOB"),
        T::Blob { max_bytes } => ok(match max_bytes {
            Some(2_147_483_647) if source == Dialect::Oracle => "LONG RAW",
            _ => "BLOB",
        }),
        T::Enum { values } => ok(format!("VARCHAR2({} CHAR)", max_len(values))),
        T::Set { values } => lossy(
            format!(
                "VARCHAR2({} CHAR)",
                values
                    .iter()
                    .map(|v| v.chars().count() + 1)
                    .sum::<usize>()
                    .clamp(1, 4000)
            ),
            "SET membership is not enforced",
        ),
        T::Json { .. } if source == Dialect::Oracle => ok("JSON"),
        T::Json { .. } => lossy("CLOB", "JSON is stored as text and not validated"),
        T::Uuid => ok("CHAR(36 CHAR)"),
        T::Date => ok("DATE"),
        T::Time { precision, .. } => lossy(
            format!("INTERVAL DAY(2) TO SECOND({})", (*precision).min(9)),
            "a time of day is stored as an interval",
        ),
        T::Timestamp { precision, tz } => ok(match tz {
            TimeZone::None if *precision == 0 => "DATE".to_owned(),
            TimeZone::None => format!("TIMESTAMP({precision})"),
            TimeZone::Instant => format!("TIMESTAMP({precision}) WITH LOCAL TIME ZONE"),
            TimeZone::WithOffset => format!("TIMESTAMP({precision}) WITH TIME ZONE"),
        }),
        T::Year => ok("NUMBER(4)"),
        T::Bit {
            length: Some(1),
            varying: false,
        } => ok("NUMBER(1)"),
        T::Bit { length, .. } => lossy(
            format!("RAW({})", length.unwrap_or(64).div_ceil(8).clamp(1, 2000)),
            "a bit string is stored as bytes",
        ),
        T::Interval {
            fields,
            leading,
            precision,
        } => match fields {
            IntervalFields::YearToMonth => {
                ok(format!("INTERVAL YEAR({}) TO MONTH", leading.unwrap_or(2)))
            }
            IntervalFields::DayToSecond => ok(format!(
                "INTERVAL DAY({}) TO SECOND({})",
                leading.unwrap_or(2),
                precision.unwrap_or(6)
            )),
            IntervalFields::All => lossy(
                format!("INTERVAL DAY(9) TO SECOND({})", precision.unwrap_or(6)),
                "the month part of an interval is lost",
            ),
        },
        T::Array { .. } => lossy("CLOB", "arrays are stored as JSON text"),
        T::Spatial { .. } if source == Dialect::Oracle => ok("SDO_GEOMETRY"),
        T::Spatial { kind } => lossy("BLOB", format!("{kind} is stored as WKB bytes")),
        T::Other { dialect, name } if dialect == "oracle" => ok(name.clone()),
        T::Other { dialect, name } => {
            lossy("CLOB", format!("{dialect} type {name} is stored as text"))
        }
    }
}
