//! nom grammars for CREATE TABLE and ALTER TABLE in the forms sqlparser 0.64 rejects:
//! MySQL `ADD COLUMN (a INT, b INT)`, `CONVERT TO CHARACTER SET`, table options inside
//! ALTER, `PARTITION BY` after CREATE TABLE; Oracle `ADD (...)`, `MODIFY (...)`,
//! `DROP (a, b)`, `NUMBER(*,0)`, `VARCHAR2(n CHAR)`, `LONG RAW`.

use crate::ast::*;
use crate::lex::{
    col_ident, comma_list, ident, int, kw, object_name, paren_group, paren_list, raw_expr,
    string_lit, sym, uint, ws, Ident, Res,
};
use crate::types::data_type;
use crate::Flavor;
use ddl_core::IndexKind;
use nom::branch::alt;
use nom::bytes::complete::take_while1;
use nom::combinator::{map, opt, value};
use nom::multi::many0;
use nom::sequence::preceded;
use nom::Parser;

/// Where and why a grammar gave up: a byte offset into the statement and what it
/// expected there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrammarError {
    pub offset: usize,
    pub message: String,
}

fn finish<'a, T>(text: &'a str, r: Res<'a, T>, what: &str) -> Result<T, GrammarError> {
    match r {
        Ok((rest, v)) => {
            let rest = ws(rest).map(|(r, _)| r).unwrap_or(rest);
            let rest = rest.trim_start_matches(';');
            let rest = ws(rest).map(|(r, _)| r).unwrap_or(rest);
            if rest.is_empty() {
                Ok(v)
            } else {
                let near: String = rest.chars().take(24).collect();
                Err(GrammarError {
                    offset: text.len() - rest.len(),
                    message: format!("unexpected `{near}` in {what}"),
                })
            }
        }
        Err(nom::Err::Error(e) | nom::Err::Failure(e)) => {
            let rest = ws(e.input).map(|(r, _)| r).unwrap_or(e.input);
            let near: String = rest.chars().take(24).collect();
            Err(GrammarError {
                offset: text.len() - rest.len(),
                message: if near.is_empty() {
                    format!("{what} ends too early")
                } else {
                    format!("cannot parse {what} at `{near}`")
                },
            })
        }
        Err(nom::Err::Incomplete(_)) => Err(GrammarError {
            offset: text.len(),
            message: format!("{what} ends too early"),
        }),
    }
}

/// Parse a whole CREATE TABLE statement.
pub fn parse_create_table(flavor: Flavor, text: &str) -> Result<CreateTableDraft, GrammarError> {
    finish(text, create_table(flavor, text), "CREATE TABLE")
}

/// Parse a whole ALTER TABLE statement.
pub fn parse_alter_table(flavor: Flavor, text: &str) -> Result<AlterTableDraft, GrammarError> {
    finish(text, alter_table(flavor, text), "ALTER TABLE")
}

/// MySQL `CREATE {DATABASE | SCHEMA} [IF NOT EXISTS] name [options]`, which sqlparser
/// rejects with `DEFAULT CHARACTER SET = x` and similar: the name, IF NOT EXISTS, and
/// the options as written.
pub fn parse_create_database(text: &str) -> Result<(Ident, bool, String), GrammarError> {
    let r = (
        kw("CREATE"),
        alt((kw("DATABASE"), kw("SCHEMA"))),
        opt((kw("IF"), kw("NOT"), kw("EXISTS"))),
        ident,
    )
        .parse(text);
    match r {
        Ok((rest, (_, _, ine, name))) => {
            let opts = rest.trim().trim_end_matches(';').trim().to_owned();
            Ok((name, ine.is_some(), opts))
        }
        Err(e) => finish(text, Err(e), "CREATE DATABASE"),
    }
}

/// PostgreSQL `CREATE DOMAIN`.
pub fn parse_create_domain(text: &str) -> Result<DomainDraft, GrammarError> {
    finish(text, create_domain(text), "CREATE DOMAIN")
}

/// An enum type: its name and labels.
pub type EnumDraft = (Vec<Ident>, Vec<String>);

/// `CREATE TYPE name AS ENUM ('a', ...)`: the name and the labels; `None` for other
/// kinds of type (composite, range), which have no column meaning here.
pub fn parse_create_enum(text: &str) -> Result<Option<EnumDraft>, GrammarError> {
    let head = (kw("CREATE"), kw("TYPE"), object_name, kw("AS")).parse(text);
    let Ok((rest, (_, _, name, _))) = head else {
        return Ok(None);
    };
    if kw("ENUM").parse(rest).is_err() {
        return Ok(None);
    }
    let mut labels = preceded(
        kw("ENUM"),
        nom::branch::alt((
            value(Vec::new(), (sym("("), sym(")"))),
            paren_list(string_lit(Flavor::Postgres)),
        )),
    );
    finish(text, labels.parse(rest), "CREATE TYPE").map(|l| Some((name, l)))
}

/// PostgreSQL `ALTER TYPE name ...`: the type's name and what the statement does to
/// an enum's labels.
pub fn parse_alter_type(text: &str) -> Result<(Vec<Ident>, AlterEnum), GrammarError> {
    let lit = || string_lit(Flavor::Postgres);
    let form = alt((
        map(
            (
                kw("ADD"),
                kw("VALUE"),
                opt((kw("IF"), kw("NOT"), kw("EXISTS"))),
                lit(),
                opt((
                    alt((value(true, kw("BEFORE")), value(false, kw("AFTER")))),
                    lit(),
                )),
            ),
            |(_, _, _, label, near)| AlterEnum::AddValue { label, near },
        ),
        map(
            (kw("RENAME"), kw("VALUE"), lit(), kw("TO"), lit()),
            |(_, _, from, _, to)| AlterEnum::RenameValue { from, to },
        ),
        map((kw("RENAME"), kw("TO"), ident), |(_, _, n)| {
            AlterEnum::RenameTo(n)
        }),
        map(nom::combinator::rest, |_| AlterEnum::Other),
    ));
    let head = (kw("ALTER"), kw("TYPE"), object_name, form);
    finish(
        text,
        map(head, |(_, _, name, f)| (name, f)).parse(text),
        "ALTER TYPE",
    )
}

/// PostgreSQL `ALTER SCHEMA name ...`: the schema and, for `RENAME TO`, its new name
/// (None for the other forms, OWNER TO).
pub fn parse_alter_schema(text: &str) -> Result<(Ident, Option<Ident>), GrammarError> {
    let head = (
        kw("ALTER"),
        kw("SCHEMA"),
        ident,
        alt((
            map((kw("RENAME"), kw("TO"), ident), |(_, _, n)| Some(n)),
            map(nom::combinator::rest, |_| None),
        )),
    );
    finish(
        text,
        map(head, |(_, _, name, to)| (name, to)).parse(text),
        "ALTER SCHEMA",
    )
}

/// `CREATE SEQUENCE` or `ALTER SEQUENCE`: start, increment and owner; other options
/// are read and left.
pub fn parse_sequence(text: &str) -> Result<SequenceDraft, GrammarError> {
    finish(text, sequence(text), "SEQUENCE")
}

fn create_domain(i: &str) -> Res<'_, DomainDraft> {
    let (i, (_, _, name, _, ty)) = (
        kw("CREATE"),
        kw("DOMAIN"),
        object_name,
        opt(kw("AS")),
        crate::types::data_type(Flavor::Postgres),
    )
        .parse(i)?;
    let mut d = DomainDraft {
        name,
        ty,
        not_null: false,
        default: None,
        checks: Vec::new(),
    };
    let mut i = i;
    loop {
        let (r, cname) = opt(preceded(kw("CONSTRAINT"), ident)).parse(i)?;
        if let Ok((r, _)) = (kw("NOT"), kw("NULL")).parse(r) {
            d.not_null = true;
            i = r;
        } else if let Ok((r, _)) = kw("NULL").parse(r) {
            i = r;
        } else if let Ok((r, e)) = preceded(kw("DEFAULT"), raw_expr(Flavor::Postgres)).parse(r) {
            d.default = Some(e.to_owned());
            i = r;
        } else if let Ok((r, e)) = preceded(kw("CHECK"), paren_group(Flavor::Postgres)).parse(r) {
            d.checks.push((cname, e[1..e.len() - 1].trim().to_owned()));
            let (r, _) = opt((kw("NOT"), kw("VALID"))).parse(r)?;
            i = r;
        } else if let Ok((r, _)) = (kw("COLLATE"), ident).parse(r) {
            i = r;
        } else {
            return Ok((i, d));
        }
    }
}

fn sequence(i: &str) -> Res<'_, SequenceDraft> {
    let (i, _) = alt((kw("CREATE"), kw("ALTER"))).parse(i)?;
    let (i, _) = opt(alt((kw("TEMPORARY"), kw("TEMP"), kw("UNLOGGED")))).parse(i)?;
    let (i, _) = kw("SEQUENCE").parse(i)?;
    let (i, _) = opt(alt((
        value((), (kw("IF"), kw("NOT"), kw("EXISTS"))),
        value((), (kw("IF"), kw("EXISTS"))),
    )))
    .parse(i)?;
    let (mut i, name) = object_name(i)?;
    let mut d = SequenceDraft {
        name,
        ..Default::default()
    };
    loop {
        if let Ok((r, v)) =
            preceded((alt((kw("START"), kw("RESTART"))), opt(kw("WITH"))), int).parse(i)
        {
            d.start = Some(v);
            i = r;
        } else if let Ok((r, v)) = preceded((kw("INCREMENT"), opt(kw("BY"))), int).parse(i) {
            d.increment = Some(v);
            i = r;
        } else if let Ok((r, _)) = (kw("OWNED"), kw("BY"), kw("NONE")).parse(i) {
            d.owned_by = Some(Vec::new());
            i = r;
        } else if let Ok((r, o)) = preceded((kw("OWNED"), kw("BY")), object_name).parse(i) {
            d.owned_by = Some(o);
            i = r;
        } else if let Ok((r, _)) = alt((
            value((), (kw("AS"), word_upper)),
            value(
                (),
                (alt((kw("MINVALUE"), kw("MAXVALUE"), kw("CACHE"))), int),
            ),
            value(
                (),
                (kw("NO"), alt((kw("MINVALUE"), kw("MAXVALUE"), kw("CYCLE")))),
            ),
            value(
                (),
                alt((kw("CYCLE"), kw("NOCYCLE"), kw("NOCACHE"), kw("RESTART"))),
            ),
            value(
                (),
                alt((
                    kw("NOMAXVALUE"),
                    kw("NOMINVALUE"),
                    kw("ORDER"),
                    kw("NOORDER"),
                )),
            ),
            // Properties with no schema meaning (pg_dump writes OWNER TO for every
            // sequence unless --no-owner).
            value((), (kw("OWNER"), kw("TO"), ident)),
            value((), (kw("SET"), alt((kw("LOGGED"), kw("UNLOGGED"))))),
        ))
        .parse(i)
        {
            i = r;
        } else {
            return Ok((i, d));
        }
    }
}

/// MySQL `DROP INDEX i ON t [ALGORITHM [=] x] [LOCK [=] x]`, which sqlparser 0.64
/// rejects when the online-DDL options are present: the index, the table, and the
/// options as written.
pub fn parse_drop_index(text: &str) -> Result<(Ident, Vec<Ident>, Vec<String>), GrammarError> {
    finish(text, drop_index(text), "DROP INDEX")
}

fn drop_index(i: &str) -> Res<'_, (Ident, Vec<Ident>, Vec<String>)> {
    let (i, (_, _, index, _, table)) =
        (kw("DROP"), kw("INDEX"), ident, kw("ON"), object_name).parse(i)?;
    let (i, options) = many0(map(
        (
            alt((
                kw("ALGORITHM").map(|_| "ALGORITHM"),
                kw("LOCK").map(|_| "LOCK"),
            )),
            opt(sym("=")),
            word_upper,
        ),
        |(k, _, v)| format!("{k}={v}"),
    ))
    .parse(i)?;
    Ok((i, (index, table, options)))
}

fn word_upper(i: &str) -> Res<'_, String> {
    map(
        preceded(ws, take_while1(|c: char| c.is_alphanumeric() || c == '_')),
        |s: &str| s.to_ascii_uppercase(),
    )
    .parse(i)
}

/// Anything up to the end of the current list item (a `,` or `)` at depth 0).
fn rest_of_item(flavor: Flavor) -> impl Fn(&str) -> Res<'_, String> {
    move |i| {
        let (mut r, _) = ws(i)?;
        let start = r;
        loop {
            let t = r.trim_start();
            if t.is_empty() || t.starts_with(',') || t.starts_with(')') {
                let taken = &start[..start.len() - t.len()];
                if taken.trim().is_empty() {
                    return Err(nom::Err::Error(crate::lex::Error::new(
                        i,
                        nom::error::ErrorKind::Tag,
                    )));
                }
                return Ok((t, taken.trim().to_owned()));
            }
            if let Ok((r2, _)) = paren_group(flavor)(t) {
                r = r2;
            } else if let Ok((r2, _)) = string_lit(flavor)(t) {
                r = r2;
            } else {
                let n = t.chars().next().map(char::len_utf8).unwrap_or(1);
                r = &t[n..];
            }
        }
    }
}

fn col_attr(flavor: Flavor) -> impl Fn(&str) -> Res<'_, ColAttr> {
    move |i| {
        // A constraint name before a column constraint is kept with it.
        let (i, cname) = opt(preceded(kw("CONSTRAINT"), ident)).parse(i)?;
        let (i, attr) = alt((
            value(ColAttr::NotNull, (kw("NOT"), kw("NULL"))),
            value(ColAttr::Null, kw("NULL")),
            map(
                (kw("DEFAULT"), opt((kw("ON"), kw("NULL"))), raw_expr(flavor)),
                |(_, on_null, e)| {
                    let d = ColAttr::Default(e.to_owned());
                    match on_null {
                        Some(_) => ColAttr::Unkept {
                            attr: Box::new(d),
                            clause: "DEFAULT ON NULL",
                        },
                        None => d,
                    }
                },
            ),
            value(
                ColAttr::AutoIncrement,
                alt((kw("AUTO_INCREMENT"), kw("AUTOINCREMENT"))),
            ),
            value(
                ColAttr::SerialDefaultValue,
                (kw("SERIAL"), kw("DEFAULT"), kw("VALUE")),
            ),
            // (PostgreSQL: DEFERRABLE after a column's key; a deferrable primary
            // key of a captured table stops a sync before this.)
            map(
                (
                    alt((
                        value(ColAttr::PrimaryKey, (kw("PRIMARY"), kw("KEY"))),
                        value(
                            ColAttr::Unique,
                            (
                                kw("UNIQUE"),
                                opt(kw("KEY")),
                                opt((kw("NULLS"), opt(kw("NOT")), kw("DISTINCT"))),
                            ),
                        ),
                    )),
                    constraint_state(flavor),
                ),
                |(attr, st)| match st.deferrable {
                    None => attr,
                    Some(deferred) => ColAttr::Unkept {
                        attr: Box::new(attr),
                        clause: if deferred {
                            "DEFERRABLE INITIALLY DEFERRED"
                        } else {
                            "DEFERRABLE"
                        },
                    },
                },
            ),
            value(ColAttr::PrimaryKey, kw("KEY")),
            map(
                preceded(kw("COMMENT"), string_lit(flavor)),
                ColAttr::Comment,
            ),
            map(preceded((kw("ON"), kw("UPDATE")), raw_expr(flavor)), |e| {
                ColAttr::OnUpdate(e.to_owned())
            }),
            identity(flavor),
            generated(flavor),
            map(
                preceded(
                    alt((value((), (kw("CHARACTER"), kw("SET"))), kw("CHARSET"))),
                    word_upper,
                ),
                |w| ColAttr::Charset(w.to_ascii_lowercase()),
            ),
            // (pg_dump: `COLLATE pg_catalog."C"`.)
            map(preceded(kw("COLLATE"), object_name), |mut w| {
                ColAttr::Collate(w.pop().map(|w| w.value).unwrap_or_default())
            }),
            // MySQL's legacy attributes after a character type: BINARY is the binary
            // collation of the column's character set, ASCII and UNICODE are
            // character sets.
            move |i| {
                if flavor != Flavor::MySql {
                    return Err(nom::Err::Error(crate::lex::Error::new(
                        i,
                        nom::error::ErrorKind::Tag,
                    )));
                }
                alt((
                    value(ColAttr::Collate("binary".into()), kw("BINARY")),
                    value(ColAttr::Charset("latin1".into()), kw("ASCII")),
                    value(ColAttr::Charset("ucs2".into()), kw("UNICODE")),
                ))
                .parse(i)
            },
            map(preceded(kw("CHECK"), paren_group(flavor)), |e| {
                ColAttr::Check(e[1..e.len() - 1].trim().to_owned())
            }),
            map(
                (
                    kw("REFERENCES"),
                    object_name,
                    opt(paren_list(ident)),
                    // (MATCH FULL means nothing more than SIMPLE for one column.)
                    fk_tail,
                    constraint_state(flavor),
                ),
                |(_, table, columns, (actions, _), st)| {
                    let pick = |d: bool| actions.iter().rev().find(|a| a.0 == d).map(|a| a.1);
                    ColAttr::References {
                        table,
                        columns: columns.unwrap_or_default(),
                        on_delete: pick(true),
                        on_update: pick(false),
                        deferrable: st.deferrable,
                    }
                },
            ),
            map(
                alt((
                    map(
                        alt((
                            kw("ENABLE"),
                            kw("DISABLE"),
                            kw("VALIDATE"),
                            kw("NOVALIDATE"),
                            kw("VISIBLE"),
                            kw("INVISIBLE"),
                            kw("RELY"),
                        )),
                        |_| String::from("constraint state"),
                    ),
                    map(
                        (
                            alt((kw("COLUMN_FORMAT"), kw("STORAGE"), kw("SRID"))),
                            word_upper,
                        ),
                        |(_, w)| w,
                    ),
                )),
                ColAttr::Ignored,
            ),
        ))
        .parse(i)?;
        Ok((
            i,
            match cname {
                Some(name) => ColAttr::Named {
                    name,
                    attr: Box::new(attr),
                },
                None => attr,
            },
        ))
    }
}

fn identity(flavor: Flavor) -> impl Fn(&str) -> Res<'_, ColAttr> {
    move |i| {
        let (i, _) = kw("GENERATED").parse(i)?;
        let (i, (always, on_null)) = alt((
            value((true, false), kw("ALWAYS")),
            map(
                (kw("BY"), kw("DEFAULT"), opt((kw("ON"), kw("NULL")))),
                |(_, _, n)| (false, n.is_some()),
            ),
        ))
        .parse(i)?;
        let (i, _) = (kw("AS"), kw("IDENTITY")).parse(i)?;
        let (i, opts) = opt(paren_group(flavor)).parse(i)?;
        let (mut start, mut increment) = (None, None);
        // Oracle also writes the options without parentheses.
        let (i, bare) = many0(alt((
            map(preceded((kw("START"), kw("WITH")), int), |v| {
                (Some(v), None)
            }),
            map(preceded((kw("INCREMENT"), kw("BY")), int), |v| {
                (None, Some(v))
            }),
            value(
                (None, None),
                (alt((kw("MAXVALUE"), kw("MINVALUE"), kw("CACHE"))), int),
            ),
            value(
                (None, None),
                alt((
                    kw("NOMAXVALUE"),
                    kw("NOMINVALUE"),
                    kw("NOCYCLE"),
                    kw("CYCLE"),
                    kw("NOCACHE"),
                    kw("NOORDER"),
                    kw("ORDER"),
                )),
            ),
        )))
        .parse(i)?;
        for (s, n) in bare {
            start = s.or(start);
            increment = n.or(increment);
        }
        if let Some(o) = opts {
            let body = &o[1..o.len() - 1];
            let mut rest = body;
            while !rest.trim().is_empty() {
                if let Ok((r, v)) = preceded((kw("START"), kw("WITH")), int).parse(rest) {
                    start = Some(v);
                    rest = r;
                } else if let Ok((r, v)) = preceded((kw("INCREMENT"), kw("BY")), int).parse(rest) {
                    increment = Some(v);
                    rest = r;
                } else if let Ok((r, _)) =
                    preceded(ws, take_while1(|c: char| !c.is_whitespace())).parse(rest)
                {
                    rest = r;
                } else {
                    break;
                }
            }
        }
        let id = ColAttr::Identity {
            always,
            start,
            increment,
        };
        Ok((
            i,
            if on_null {
                ColAttr::Unkept {
                    attr: Box::new(id),
                    clause: "BY DEFAULT ON NULL",
                }
            } else {
                id
            },
        ))
    }
}

fn generated(flavor: Flavor) -> impl Fn(&str) -> Res<'_, ColAttr> {
    move |i| {
        let (i, _) = opt((kw("GENERATED"), kw("ALWAYS"))).parse(i)?;
        let (i, _) = kw("AS").parse(i)?;
        let (i, e) = paren_group(flavor)(i)?;
        let (i, stored) = opt(alt((
            value(true, kw("STORED")),
            value(true, kw("PERSISTENT")),
            value(false, kw("VIRTUAL")),
        )))
        .parse(i)?;
        Ok((
            i,
            ColAttr::Generated {
                expr: e[1..e.len() - 1].trim().to_owned(),
                stored: stored.unwrap_or(false),
            },
        ))
    }
}

fn column_def(flavor: Flavor, type_required: bool) -> impl Fn(&str) -> Res<'_, ColumnDraft> {
    move |i| {
        let (i, name) = col_ident(flavor)(i)?;
        let (i, ty) = if type_required {
            map(data_type(flavor), Some).parse(i)?
        } else {
            opt(data_type(flavor)).parse(i)?
        };
        let (i, attrs) = many0(col_attr(flavor)).parse(i)?;
        Ok((i, ColumnDraft { name, ty, attrs }))
    }
}

fn key_part(flavor: Flavor) -> impl Fn(&str) -> Res<'_, KeyPart> {
    move |i| {
        let (i, part) = alt((
            map(paren_group(flavor), |g: &str| KeyPart {
                column: Ident::bare(g[1..g.len() - 1].trim()),
                expression: true,
                prefix: None,
                descending: false,
            }),
            map(
                (
                    col_ident(flavor),
                    opt(nom::sequence::delimited(sym("("), uint, sym(")"))),
                ),
                |(column, prefix)| KeyPart {
                    column,
                    expression: false,
                    prefix: prefix.map(|p| p as u32),
                    descending: false,
                },
            ),
        ))
        .parse(i)?;
        let (i, d) = opt(alt((value(false, kw("ASC")), value(true, kw("DESC"))))).parse(i)?;
        Ok((
            i,
            KeyPart {
                descending: d.unwrap_or(false),
                ..part
            },
        ))
    }
}

fn index_opts(flavor: Flavor) -> impl Fn(&str) -> Res<'_, ()> {
    move |i| {
        value(
            (),
            many0(alt((
                value(
                    (),
                    (kw("USING"), nom::combinator::not(kw("INDEX")), word_upper),
                ),
                value((), (kw("COMMENT"), string_lit(flavor))),
                value((), (kw("KEY_BLOCK_SIZE"), opt(sym("=")), uint)),
                value((), alt((kw("VISIBLE"), kw("INVISIBLE")))),
                value((), (kw("WITH"), kw("PARSER"), ident)),
            ))),
        )
        .parse(i)
    }
}

/// What a constraint's state clauses say (see [`constraint_state`]).
#[derive(Debug, Default, Clone, PartialEq)]
struct ConstraintState {
    /// Declared but not enforced (Oracle `DISABLE`, MySQL `NOT ENFORCED`).
    disabled: bool,
    /// `DEFERRABLE`: Some(initially deferred).
    deferrable: Option<bool>,
    /// Clauses with a meaning no target here is given (`NOT VALID`, `NO INHERIT`).
    unkept: Vec<&'static str>,
}

/// What may follow a constraint: Oracle's `USING INDEX ...`, `ENABLE`/`DISABLE`,
/// `[NO]VALIDATE`, `[NO]RELY`, deferrability, MySQL's `[NOT] ENFORCED`, PostgreSQL's
/// `NOT VALID` and `NO INHERIT`.
fn constraint_state(flavor: Flavor) -> impl Fn(&str) -> Res<'_, ConstraintState> {
    #[derive(Clone, Copy)]
    enum W {
        Nothing,
        Disabled,
        Deferrable,
        NotDeferrable,
        Deferred,
        Immediate,
        Unkept(&'static str),
    }
    move |i| {
        let (i, words) = many0(alt((
            value(
                W::Nothing,
                (kw("USING"), kw("INDEX"), opt(rest_of_state(flavor))),
            ),
            value(W::Nothing, kw("ENABLE")),
            value(W::Disabled, kw("DISABLE")),
            value(W::Nothing, kw("VALIDATE")),
            value(W::Nothing, kw("NOVALIDATE")),
            value(W::Nothing, kw("RELY")),
            value(W::Nothing, kw("NORELY")),
            value(W::NotDeferrable, (kw("NOT"), kw("DEFERRABLE"))),
            value(W::Deferrable, kw("DEFERRABLE")),
            value(W::Deferred, (kw("INITIALLY"), kw("DEFERRED"))),
            value(W::Immediate, (kw("INITIALLY"), kw("IMMEDIATE"))),
            value(W::Nothing, kw("ENFORCED")),
            value(W::Disabled, (kw("NOT"), kw("ENFORCED"))),
            value(W::Unkept("NOT VALID"), (kw("NOT"), kw("VALID"))),
            value(W::Unkept("NO INHERIT"), (kw("NO"), kw("INHERIT"))),
            // PostgreSQL 11: columns a key's index holds beside the key.
            value(W::Unkept("INCLUDE"), (kw("INCLUDE"), paren_group(flavor))),
            // A key's index storage parameters (pg_get_constraintdef writes them).
            value(W::Nothing, (kw("WITH"), paren_group(flavor))),
        )))
        .parse(i)?;
        let mut st = ConstraintState::default();
        for w in words {
            match w {
                W::Nothing => {}
                W::Disabled => st.disabled = true,
                W::Deferrable => st.deferrable = Some(st.deferrable.unwrap_or(false)),
                W::NotDeferrable => st.deferrable = None,
                // (INITIALLY DEFERRED implies DEFERRABLE.)
                W::Deferred => st.deferrable = Some(true),
                W::Immediate => {
                    if st.deferrable.is_some() {
                        st.deferrable = Some(false)
                    }
                }
                W::Unkept(c) => st.unkept.push(c),
            }
        }
        Ok((i, st))
    }
}

/// The rest of a `USING INDEX` clause: an index name, `(CREATE INDEX ...)` or
/// storage attributes, up to the next state keyword, `,` or `)`.
fn rest_of_state(flavor: Flavor) -> impl Fn(&str) -> Res<'_, ()> {
    move |i| {
        let mut r = i;
        loop {
            let (t, _) = ws(r)?;
            if t.is_empty() || t.starts_with(',') || t.starts_with(')') || t.starts_with(';') {
                break;
            }
            let stop = alt((
                kw("ENABLE"),
                kw("DISABLE"),
                kw("VALIDATE"),
                kw("NOVALIDATE"),
                kw("RELY"),
                kw("NORELY"),
                kw("DEFERRABLE"),
                kw("INITIALLY"),
                value((), (kw("NOT"), kw("DEFERRABLE"))),
            ))
            .parse(t);
            if stop.is_ok() {
                break;
            }
            r = if let Ok((r2, _)) = paren_group(flavor)(t) {
                r2
            } else if let Ok((r2, _)) = string_lit(flavor)(t) {
                r2
            } else if let Ok((r2, _)) = ident(t) {
                r2
            } else {
                &t[t.chars().next().map(char::len_utf8).unwrap_or(1)..]
            };
        }
        if r.len() == i.len() {
            return Err(nom::Err::Error(crate::lex::Error::new(
                i,
                nom::error::ErrorKind::Tag,
            )));
        }
        Ok((r, ()))
    }
}

fn fk_action(i: &str) -> Res<'_, (bool, ddl_core::RefAction)> {
    use ddl_core::RefAction as A;
    let (i, _) = kw("ON").parse(i)?;
    let (i, delete) = alt((value(true, kw("DELETE")), value(false, kw("UPDATE")))).parse(i)?;
    let (i, action) = alt((
        value(A::Cascade, kw("CASCADE")),
        value(A::Restrict, kw("RESTRICT")),
        value(A::SetNull, (kw("SET"), kw("NULL"))),
        value(A::SetDefault, (kw("SET"), kw("DEFAULT"))),
        value(A::NoAction, (kw("NO"), kw("ACTION"))),
    ))
    .parse(i)?;
    Ok((i, (delete, action)))
}

/// What follows a foreign key's referenced columns: its actions and `MATCH
/// FULL|PARTIAL|SIMPLE` in any order. Returns the actions and whether MATCH is not
/// SIMPLE.
fn fk_tail(i: &str) -> Res<'_, (Vec<(bool, ddl_core::RefAction)>, bool)> {
    enum T {
        Action(bool, ddl_core::RefAction),
        Match(bool),
    }
    let (i, items) = many0(alt((
        map(fk_action, |(d, a)| T::Action(d, a)),
        map(
            preceded(
                kw("MATCH"),
                alt((
                    value(true, kw("FULL")),
                    value(true, kw("PARTIAL")),
                    value(false, kw("SIMPLE")),
                )),
            ),
            T::Match,
        ),
    )))
    .parse(i)?;
    let (mut actions, mut full) = (Vec::new(), false);
    for t in items {
        match t {
            T::Action(d, a) => actions.push((d, a)),
            T::Match(f) => full |= f,
        }
    }
    Ok((i, (actions, full)))
}

fn constraint_elem(flavor: Flavor) -> impl Fn(&str) -> Res<'_, TableElem> {
    move |i| {
        let (i, mut elem) = constraint_body(flavor)(i)?;
        let (i, st) = constraint_state(flavor)(i)?;
        let mut unkept: Vec<String> = st.unkept.iter().map(|c| c.to_string()).collect();
        match (&mut elem, st.deferrable) {
            (TableElem::ForeignKey { deferrable, .. }, d) => *deferrable = d,
            (_, Some(deferred)) => unkept.push(if deferred {
                "DEFERRABLE INITIALLY DEFERRED".into()
            } else {
                "DEFERRABLE".into()
            }),
            (_, None) => {}
        }
        if !unkept.is_empty() {
            elem = TableElem::Unkept {
                elem: Box::new(elem),
                clause: unkept.join(" "),
            };
        }
        Ok((
            i,
            if st.disabled {
                TableElem::Disabled(Box::new(elem))
            } else {
                elem
            },
        ))
    }
}

fn constraint_body(flavor: Flavor) -> impl Fn(&str) -> Res<'_, TableElem> {
    move |i| {
        let (i, cname) = opt(preceded(
            (kw("CONSTRAINT"), opt((kw("IF"), kw("NOT"), kw("EXISTS")))),
            opt(ident),
        ))
        .parse(i)?;
        let cname = cname.flatten();
        alt((
            map(
                (
                    kw("PRIMARY"),
                    kw("KEY"),
                    // MariaDB: IF NOT EXISTS (the ADD it is part of sees it).
                    // MySQL accepts (and ignores) an index name here: its primary
                    // key is always named PRIMARY.
                    preceded(
                        opt((kw("IF"), kw("NOT"), kw("EXISTS"))),
                        opt(preceded(nom::combinator::not(kw("USING")), ident)),
                    ),
                    opt(index_kind_using),
                    paren_list(key_part(flavor)),
                    index_opts(flavor),
                ),
                {
                    let cname = cname.clone();
                    move |(_, _, _, _, parts, _)| TableElem::PrimaryKey {
                        name: cname.clone(),
                        parts,
                    }
                },
            ),
            map(
                (
                    kw("UNIQUE"),
                    opt(alt((kw("KEY"), kw("INDEX")))),
                    // PostgreSQL 15: whether NULLs count as equal (the caller
                    // reports that it is not carried).
                    opt((kw("NULLS"), opt(kw("NOT")), kw("DISTINCT"))),
                    opt((kw("IF"), kw("NOT"), kw("EXISTS"))),
                    opt(ident),
                    opt(index_kind_using),
                    paren_list(key_part(flavor)),
                    index_opts(flavor),
                ),
                {
                    let cname = cname.clone();
                    move |(_, _, _, _, name, _, parts, _)| TableElem::Index {
                        name: name.or(cname.clone()),
                        kind: IndexKind::Unique,
                        parts,
                    }
                },
            ),
            map(
                (
                    kw("FOREIGN"),
                    kw("KEY"),
                    preceded(opt((kw("IF"), kw("NOT"), kw("EXISTS"))), opt(ident)),
                    paren_list(ident),
                    kw("REFERENCES"),
                    object_name,
                    opt(paren_list(ident)),
                    fk_tail,
                    nom::combinator::success(()),
                ),
                {
                    let cname = cname.clone();
                    move |(_, _, name, columns, _, ref_table, ref_columns, (actions, full), _)| {
                        let mut on_delete = None;
                        let mut on_update = None;
                        for (d, a) in actions {
                            if d {
                                on_delete = Some(a);
                            } else {
                                on_update = Some(a);
                            }
                        }
                        let multi = columns.len() > 1;
                        let fk = TableElem::ForeignKey {
                            name: cname.clone().or(name),
                            columns,
                            ref_table,
                            ref_columns: ref_columns.unwrap_or_default(),
                            on_delete,
                            on_update,
                            deferrable: None,
                        };
                        // MATCH FULL differs from the default only over several
                        // columns (a row with some of them NULL).
                        if full && multi {
                            TableElem::Unkept {
                                elem: Box::new(fk),
                                clause: "MATCH FULL".into(),
                            }
                        } else {
                            fk
                        }
                    }
                },
            ),
            // PostgreSQL exclusion constraints.
            map((kw("EXCLUDE"), rest_of_item(flavor)), {
                let cname = cname.clone();
                move |(_, text)| TableElem::Exclusion {
                    name: cname.clone(),
                    text: format!("EXCLUDE {text}"),
                }
            }),
            map(
                (
                    kw("CHECK"),
                    paren_group(flavor),
                    nom::combinator::success(()),
                ),
                move |(_, e, _)| TableElem::Check {
                    name: cname.clone(),
                    expr: e[1..e.len() - 1].trim().to_owned(),
                },
            ),
        ))
        .parse(i)
    }
}

fn index_kind_using(i: &str) -> Res<'_, ()> {
    value((), (kw("USING"), word_upper)).parse(i)
}

fn plain_index(flavor: Flavor) -> impl Fn(&str) -> Res<'_, TableElem> {
    move |i| {
        let (i, kind) = alt((
            value(
                IndexKind::Fulltext,
                (kw("FULLTEXT"), opt(alt((kw("KEY"), kw("INDEX"))))),
            ),
            value(
                IndexKind::Spatial,
                (kw("SPATIAL"), opt(alt((kw("KEY"), kw("INDEX"))))),
            ),
            value(IndexKind::Plain, alt((kw("KEY"), kw("INDEX")))),
        ))
        .parse(i)?;
        // MariaDB's `IF NOT EXISTS` is read by `alter_spec`; here it is no name.
        let (i, name) =
            opt(preceded(nom::combinator::not((kw("IF"), kw("NOT"))), ident)).parse(i)?;
        let (i, _) = opt(index_kind_using).parse(i)?;
        let (i, parts) = paren_list(key_part(flavor))(i)?;
        let (i, _) = index_opts(flavor)(i)?;
        Ok((i, TableElem::Index { name, kind, parts }))
    }
}

fn table_elem(flavor: Flavor) -> impl Fn(&str) -> Res<'_, TableElem> {
    move |i| {
        alt((
            constraint_elem(flavor),
            plain_index(flavor),
            map(column_def(flavor, true), TableElem::Column),
        ))
        .parse(i)
    }
}

/// A MySQL table option: `[DEFAULT] KEY [=] value`.
fn table_option(flavor: Flavor) -> impl Fn(&str) -> Res<'_, (String, String)> {
    move |i| {
        let (i, _) = opt(kw("DEFAULT")).parse(i)?;
        let (i, key) = alt((
            value("CHARSET".to_owned(), (kw("CHARACTER"), kw("SET"))),
            word_upper,
        ))
        .parse(i)?;
        if key == "PARTITION" {
            return Err(nom::Err::Error(crate::lex::Error::new(
                i,
                nom::error::ErrorKind::Tag,
            )));
        }
        let (i, _) = opt(sym("=")).parse(i)?;
        let (i, v) = alt((
            string_lit(flavor),
            map(paren_group(flavor), str::to_owned),
            map(ident, |x| x.value),
            map(uint, |n| n.to_string()),
        ))
        .parse(i)?;
        Ok((i, (key, v)))
    }
}

fn create_table(flavor: Flavor, i: &str) -> Res<'_, CreateTableDraft> {
    let (i, _) = kw("CREATE").parse(i)?;
    let (i, _) = opt(alt((
        value((), (kw("GLOBAL"), kw("TEMPORARY"))),
        value((), kw("TEMPORARY")),
        value((), kw("UNLOGGED")),
    )))
    .parse(i)?;
    let (i, _) = kw("TABLE").parse(i)?;
    let (i, ine) = opt((kw("IF"), kw("NOT"), kw("EXISTS"))).parse(i)?;
    let (i, name) = object_name(i)?;
    // PostgreSQL's `(LIKE t [INCLUDING ...])`, MySQL's `LIKE t` and `(LIKE t)`.
    let like_in_parens = nom::sequence::delimited(
        sym("("),
        (
            preceded(kw("LIKE"), object_name),
            many0((alt((kw("INCLUDING"), kw("EXCLUDING"))), word_upper)),
        ),
        sym(")"),
    )
    .map(|(n, _)| n);
    if let Ok((r, like)) = alt((preceded(kw("LIKE"), object_name), like_in_parens)).parse(i) {
        return Ok((
            r,
            CreateTableDraft {
                name,
                if_not_exists: ine.is_some(),
                elems: Vec::new(),
                options: Vec::new(),
                partition_by: None,
                like: Some(like),
                inherits: Vec::new(),
                trailing: None,
            },
        ));
    }
    let (i, elems) = paren_list(table_elem(flavor))(i)?;
    let (i, options) = if flavor == Flavor::MySql {
        many0(preceded(opt(sym(",")), table_option(flavor))).parse(i)?
    } else {
        (i, Vec::new())
    };
    let (i, inherits) = if flavor == Flavor::Postgres {
        map(
            opt(preceded(kw("INHERITS"), paren_list(object_name))),
            Option::unwrap_or_default,
        )
        .parse(i)?
    } else {
        (i, Vec::new())
    };
    let (i, _) = ws(i)?;
    let (i, partition_by) = if let Ok((r, _)) = (kw("PARTITION"), kw("BY")).parse(i) {
        let _ = r;
        let text = i.trim_end().trim_end_matches(';').trim_end();
        (&i[i.len()..], Some(text.to_owned()))
    } else {
        (i, None)
    };
    let t = i.trim().trim_end_matches(';').trim();
    let (i, trailing) = if !t.is_empty() && flavor != Flavor::MySql {
        (&i[i.len()..], Some(t.to_owned()))
    } else {
        (i, None)
    };
    Ok((
        i,
        CreateTableDraft {
            name,
            if_not_exists: ine.is_some(),
            elems,
            options,
            partition_by,
            like: None,
            inherits,
            trailing,
        },
    ))
}

fn position(i: &str) -> Res<'_, Option<Pos>> {
    opt(alt((
        value(Pos::First, kw("FIRST")),
        map(preceded(kw("AFTER"), ident), Pos::After),
    )))
    .parse(i)
}

/// A drop, wrapped when written `IF EXISTS`.
fn if_exists(written: bool, spec: AlterSpec) -> AlterSpec {
    if written {
        AlterSpec::IfExists(Box::new(spec))
    } else {
        spec
    }
}

fn alter_spec(flavor: Flavor) -> impl Fn(&str) -> Res<'_, AlterSpec> {
    move |i| {
        alt((
            // ADD ...
            preceded(
                kw("ADD"),
                alt((
                    // MariaDB: `ADD CONSTRAINT IF NOT EXISTS c CHECK (...)`, `ADD UNIQUE
                    // [KEY] IF NOT EXISTS u (...)`, `ADD FOREIGN KEY IF NOT EXISTS f (...)`:
                    // the words come before the element's first parenthesis.
                    map(
                        nom::combinator::consumed(constraint_elem(flavor)),
                        |(text, elem): (&str, TableElem)| {
                            let head = text.split('(').next().unwrap_or_default();
                            let words: Vec<String> = head
                                .split_whitespace()
                                .map(str::to_ascii_uppercase)
                                .collect();
                            let ine = words
                                .windows(3)
                                .any(|w| w[0] == "IF" && w[1] == "NOT" && w[2] == "EXISTS");
                            match ine {
                                true => AlterSpec::IfNotExists(Box::new(AlterSpec::AddElem(elem))),
                                false => AlterSpec::AddElem(elem),
                            }
                        },
                    ),
                    map(plain_index(flavor), AlterSpec::AddElem),
                    // MariaDB: ADD INDEX|KEY IF NOT EXISTS name (...).
                    map(
                        (
                            alt((kw("INDEX"), kw("KEY"))),
                            kw("IF"),
                            kw("NOT"),
                            kw("EXISTS"),
                            ident,
                            opt(index_kind_using),
                            paren_list(key_part(flavor)),
                            index_opts(flavor),
                        ),
                        |(_, _, _, _, name, _, parts, _)| {
                            AlterSpec::IfNotExists(Box::new(AlterSpec::AddElem(TableElem::Index {
                                name: Some(name),
                                kind: IndexKind::Plain,
                                parts,
                            })))
                        },
                    ),
                    map(paren_list(constraint_elem(flavor)), AlterSpec::AddElems),
                    map(
                        preceded(opt(kw("COLUMN")), paren_list(column_def(flavor, true))),
                        |columns| AlterSpec::AddColumns {
                            columns,
                            position: None,
                            if_not_exists: false,
                        },
                    ),
                    map(
                        (
                            opt(kw("COLUMN")),
                            opt((kw("IF"), kw("NOT"), kw("EXISTS"))),
                            column_def(flavor, true),
                            position,
                        ),
                        |(_, ine, c, position)| AlterSpec::AddColumns {
                            columns: vec![c],
                            position,
                            if_not_exists: ine.is_some(),
                        },
                    ),
                )),
            ),
            // DROP ...
            preceded(
                kw("DROP"),
                alt((
                    value(AlterSpec::DropPrimaryKey, (kw("PRIMARY"), kw("KEY"))),
                    map(
                        (
                            kw("FOREIGN"),
                            kw("KEY"),
                            opt((kw("IF"), kw("EXISTS"))),
                            ident,
                        ),
                        |(_, _, ie, n)| if_exists(ie.is_some(), AlterSpec::DropForeignKey(n)),
                    ),
                    map(
                        (
                            alt((kw("INDEX"), kw("KEY"))),
                            opt((kw("IF"), kw("EXISTS"))),
                            ident,
                        ),
                        |(_, ie, n)| if_exists(ie.is_some(), AlterSpec::DropIndex(n)),
                    ),
                    map(
                        (
                            alt((kw("CONSTRAINT"), kw("CHECK"))),
                            opt((kw("IF"), kw("EXISTS"))),
                            ident,
                            // PostgreSQL: objects that depend on the constraint
                            // (foreign keys onto a key) go with it, or it is refused.
                            opt(alt((kw("CASCADE"), kw("RESTRICT")))),
                        ),
                        |(_, ie, n, _)| if_exists(ie.is_some(), AlterSpec::DropConstraint(n)),
                    ),
                    map(paren_list(col_ident(flavor)), AlterSpec::DropColumns),
                    map(
                        (
                            opt(kw("COLUMN")),
                            opt((kw("IF"), kw("EXISTS"))),
                            col_ident(flavor),
                            opt(alt((kw("CASCADE"), kw("RESTRICT")))),
                        ),
                        |(_, ie, c, _)| if_exists(ie.is_some(), AlterSpec::DropColumns(vec![c])),
                    ),
                )),
            ),
            // MODIFY
            preceded(
                kw("MODIFY"),
                alt((
                    map(
                        paren_list(column_def(flavor, false)),
                        AlterSpec::ModifyPartial,
                    ),
                    move |i| {
                        let (i, _) = opt(kw("COLUMN")).parse(i)?;
                        let (i, ie) = opt((kw("IF"), kw("EXISTS"))).parse(i)?;
                        if flavor == Flavor::Oracle {
                            let (i, c) = column_def(flavor, false)(i)?;
                            Ok((i, AlterSpec::ModifyPartial(vec![c])))
                        } else {
                            let (i, (column, position)) =
                                (column_def(flavor, true), position).parse(i)?;
                            Ok((
                                i,
                                if_exists(
                                    ie.is_some(),
                                    AlterSpec::ModifyColumn { column, position },
                                ),
                            ))
                        }
                    },
                )),
            ),
            map(
                (
                    kw("CHANGE"),
                    opt(kw("COLUMN")),
                    opt((kw("IF"), kw("EXISTS"))),
                    col_ident(flavor),
                    column_def(flavor, true),
                    position,
                ),
                |(_, _, ie, old, column, position)| {
                    if_exists(
                        ie.is_some(),
                        AlterSpec::ChangeColumn {
                            old,
                            column,
                            position,
                        },
                    )
                },
            ),
            map((kw("SET"), kw("SCHEMA"), ident), |(_, _, s)| {
                AlterSpec::SetSchema(s)
            }),
            // RENAME ...
            preceded(
                kw("RENAME"),
                alt((
                    map(
                        (
                            kw("COLUMN"),
                            opt((kw("IF"), kw("EXISTS"))),
                            col_ident(flavor),
                            kw("TO"),
                            col_ident(flavor),
                        ),
                        |(_, ie, from, _, to)| {
                            if_exists(ie.is_some(), AlterSpec::RenameColumn { from, to })
                        },
                    ),
                    map(
                        (alt((kw("INDEX"), kw("KEY"))), ident, kw("TO"), ident),
                        |(_, from, _, to)| AlterSpec::RenameIndex { from, to },
                    ),
                    map(
                        (kw("CONSTRAINT"), ident, kw("TO"), ident),
                        |(_, from, _, to)| AlterSpec::RenameConstraint { from, to },
                    ),
                    map(
                        preceded(opt(alt((kw("TO"), kw("AS")))), object_name),
                        AlterSpec::RenameTo,
                    ),
                )),
            ),
            // ALTER [COLUMN] c ...
            map(
                (
                    kw("ALTER"),
                    opt(kw("COLUMN")),
                    col_ident(flavor),
                    alt((
                        map(
                            (
                                opt((kw("SET"), kw("DATA"))),
                                kw("TYPE"),
                                data_type(flavor),
                                opt(preceded(kw("USING"), raw_expr(flavor))),
                            ),
                            |(_, _, ty, using)| AlterColumnOp::SetType {
                                ty,
                                using: using.map(str::to_owned),
                            },
                        ),
                        value(
                            AlterColumnOp::SetNotNull,
                            (kw("SET"), kw("NOT"), kw("NULL")),
                        ),
                        value(
                            AlterColumnOp::DropNotNull,
                            (kw("DROP"), kw("NOT"), kw("NULL")),
                        ),
                        map(
                            preceded((kw("SET"), kw("DEFAULT")), raw_expr(flavor)),
                            |e| AlterColumnOp::SetDefault(e.to_owned()),
                        ),
                        value(AlterColumnOp::DropDefault, (kw("DROP"), kw("DEFAULT"))),
                        map(
                            (
                                alt((
                                    value("SET STATISTICS", (kw("SET"), kw("STATISTICS"))),
                                    value("SET STORAGE", (kw("SET"), kw("STORAGE"))),
                                    value("SET COMPRESSION", (kw("SET"), kw("COMPRESSION"))),
                                    value("SET", (kw("SET"), nom::combinator::peek(sym("(")))),
                                    value("RESET", kw("RESET")),
                                )),
                                rest_of_item(flavor),
                            ),
                            |(w, r)| AlterColumnOp::Ignored(format!("{w} {r}")),
                        ),
                        map(preceded(kw("ADD"), identity(flavor)), |a| {
                            // (ON NULL is Oracle's, which has no ADD GENERATED.)
                            AlterColumnOp::AddIdentity(match a {
                                ColAttr::Unkept { attr, .. } => *attr,
                                a => a,
                            })
                        }),
                        value(
                            AlterColumnOp::DropIdentity,
                            (kw("DROP"), kw("IDENTITY"), opt((kw("IF"), kw("EXISTS")))),
                        ),
                    )),
                ),
                |(_, _, name, op)| AlterSpec::AlterColumn { name, op },
            ),
            // CONVERT TO CHARACTER SET x [COLLATE y]
            map(
                (
                    kw("CONVERT"),
                    kw("TO"),
                    alt((value((), (kw("CHARACTER"), kw("SET"))), kw("CHARSET"))),
                    word_upper,
                    opt(preceded(kw("COLLATE"), word_upper)),
                ),
                |(_, _, _, cs, coll)| AlterSpec::TableOption {
                    key: "CONVERT TO CHARSET".into(),
                    value: match coll {
                        Some(c) => format!("{} COLLATE {}", cs.to_lowercase(), c.to_lowercase()),
                        None => cs.to_lowercase(),
                    },
                },
            ),
            map(
                alt((
                    map((kw("ALGORITHM"), opt(sym("=")), word_upper), |(_, _, w)| {
                        format!("ALGORITHM={w}")
                    }),
                    map((kw("LOCK"), opt(sym("=")), word_upper), |(_, _, w)| {
                        format!("LOCK={w}")
                    }),
                    map(kw("FORCE"), |_| "FORCE".to_owned()),
                    // PostgreSQL table properties with no schema meaning (pg_dump
                    // writes OWNER TO for every table).
                    map(
                        (
                            alt((
                                value("OWNER TO", (kw("OWNER"), kw("TO"))),
                                value("REPLICA IDENTITY", (kw("REPLICA"), kw("IDENTITY"))),
                                value("CLUSTER ON", (kw("CLUSTER"), kw("ON"))),
                                value("SET WITHOUT", (kw("SET"), kw("WITHOUT"))),
                                value("SET TABLESPACE", (kw("SET"), kw("TABLESPACE"))),
                                value("SET ACCESS METHOD", (kw("SET"), kw("ACCESS"))),
                                value("SET LOGGED", (kw("SET"), kw("LOGGED"))),
                                value("SET UNLOGGED", (kw("SET"), kw("UNLOGGED"))),
                                value("SET", (kw("SET"), nom::combinator::peek(sym("(")))),
                                value("RESET", kw("RESET")),
                                value("NO INHERIT", (kw("NO"), kw("INHERIT"))),
                                value("INHERIT", kw("INHERIT")),
                                value("VALIDATE CONSTRAINT", (kw("VALIDATE"), kw("CONSTRAINT"))),
                                value("DETACH PARTITION", (kw("DETACH"), kw("PARTITION"))),
                                value("ATTACH PARTITION", (kw("ATTACH"), kw("PARTITION"))),
                                value("PARTITION BY", (kw("PARTITION"), kw("BY"))),
                                value("REMOVE PARTITIONING", (kw("REMOVE"), kw("PARTITIONING"))),
                            )),
                            opt(rest_of_item(flavor)),
                        ),
                        |(w, r)| match r {
                            Some(r) => format!("{w} {r}"),
                            None => w.to_owned(),
                        },
                    ),
                    map(
                        (
                            alt((
                                kw("ENABLE"),
                                kw("DISABLE"),
                                kw("DISCARD"),
                                kw("IMPORT"),
                                kw("ANALYZE"),
                                kw("OPTIMIZE"),
                                kw("REBUILD"),
                                kw("REPAIR"),
                                kw("COALESCE"),
                                kw("REORGANIZE"),
                                kw("TRUNCATE"),
                                kw("EXCHANGE"),
                                kw("REMOVE"),
                            )),
                            rest_of_item(flavor),
                        ),
                        |(_, r)| r,
                    ),
                )),
                AlterSpec::Ignored,
            ),
            map(table_option(flavor), |(key, value)| {
                AlterSpec::TableOption { key, value }
            }),
        ))
        .parse(i)
    }
}

fn alter_table(flavor: Flavor, i: &str) -> Res<'_, AlterTableDraft> {
    let (i, _) = kw("ALTER").parse(i)?;
    let (i, _) = opt(alt((kw("ONLINE"), kw("IGNORE")))).parse(i)?;
    let (i, _) = kw("TABLE").parse(i)?;
    let (i, ie) = opt((kw("IF"), kw("EXISTS"))).parse(i)?;
    let (i, _) = opt(kw("ONLY")).parse(i)?;
    let (i, name) = object_name(i)?;
    let (i, specs) = comma_list(alter_spec(flavor))(i)?;
    Ok((
        i,
        AlterTableDraft {
            name,
            if_exists: ie.is_some(),
            specs,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mysql_add_column_list() {
        let d = parse_alter_table(
            Flavor::MySql,
            "ALTER TABLE t ADD COLUMN (a INT, b INT NOT NULL)",
        )
        .unwrap();
        let AlterSpec::AddColumns { columns, .. } = &d.specs[0] else {
            panic!("{d:?}")
        };
        assert_eq!(columns.len(), 2);
        assert_eq!(columns[1].attrs, vec![ColAttr::NotNull]);
    }

    #[test]
    fn mysql_convert_and_options() {
        let d = parse_alter_table(
            Flavor::MySql,
            "ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, ENGINE=InnoDB, COMMENT = 'x'",
        )
        .unwrap();
        assert_eq!(d.specs.len(), 3);
        assert_eq!(
            d.specs[2],
            AlterSpec::TableOption {
                key: "COMMENT".into(),
                value: "x".into()
            }
        );
    }

    #[test]
    fn oracle_forms() {
        let d = parse_alter_table(
            Flavor::Oracle,
            "ALTER TABLE emp MODIFY (a NOT NULL, b NUMBER(*,0) DEFAULT 0)",
        )
        .unwrap();
        let AlterSpec::ModifyPartial(cols) = &d.specs[0] else {
            panic!()
        };
        assert!(cols[0].ty.is_none());
        assert!(cols[1].ty.is_some());
        let d = parse_alter_table(Flavor::Oracle, "ALTER TABLE emp DROP (a, b)").unwrap();
        assert_eq!(
            d.specs[0],
            AlterSpec::DropColumns(vec![Ident::bare("a"), Ident::bare("b")])
        );
        let c = parse_create_table(
            Flavor::Oracle,
            "CREATE TABLE x (a NUMBER(*,0), b VARCHAR2(10 CHAR) NOT NULL, c LONG RAW, CONSTRAINT pk PRIMARY KEY (a)) TABLESPACE users",
        )
        .unwrap();
        assert_eq!(c.elems.len(), 4);
        assert_eq!(c.trailing.as_deref(), Some("TABLESPACE users"));
    }

    #[test]
    fn errors_point_at_the_furthest_failure() {
        // regression: alt reported its last branch's start (`COLUMN`), not the bad type.
        let text = "ALTER TABLE t ADD COLUMN a NOTATYPE, ADD b int";
        let e = parse_alter_table(Flavor::MySql, text).unwrap_err();
        assert_eq!(&text[e.offset..e.offset + 8], "NOTATYPE", "{e:?}");
        let text = "CREATE TABLE x (a NUMBR(3))";
        let e = parse_create_table(Flavor::Oracle, text).unwrap_err();
        assert!(text[e.offset..].starts_with("NUMBR"), "{e:?}");
    }

    #[test]
    fn mysql_drop_index_with_online_options() {
        let (ix, t, opts) =
            parse_drop_index("drop index index3 on antlr_tokens algorithm default lock=none")
                .unwrap();
        assert_eq!(
            (ix.value.as_str(), t[0].value.as_str()),
            ("index3", "antlr_tokens")
        );
        assert_eq!(opts, ["ALGORITHM=DEFAULT", "LOCK=NONE"]);
    }

    #[test]
    fn backslash_is_an_escape_only_in_mysql() {
        // regression (proptest): PostgreSQL's '\' is a one-character string; reading
        // it with MySQL's escapes ran past the closing quote.
        let d = parse_create_table(
            Flavor::Postgres,
            r"CREATE TABLE t (a text DEFAULT '\', b text CHECK (b <> '\'))",
        )
        .unwrap();
        let TableElem::Column(a) = &d.elems[0] else {
            panic!("{d:?}")
        };
        assert_eq!(a.attrs, vec![ColAttr::Default(r"'\'".into())]);
        let d =
            parse_create_table(Flavor::MySql, r"CREATE TABLE t (a text COMMENT 'it\'s')").unwrap();
        let TableElem::Column(a) = &d.elems[0] else {
            panic!("{d:?}")
        };
        assert_eq!(a.attrs, vec![ColAttr::Comment("it's".into())]);
    }

    #[test]
    fn errors_have_offsets() {
        let e =
            parse_alter_table(Flavor::MySql, "ALTER TABLE t ADD COLUMN a NOTATYPE").unwrap_err();
        assert!(e.offset > 14, "{e:?}");
    }

    #[test]
    fn mysql_forms_of_real_schemas() {
        // regression: each of these lost its whole table.
        let d = parse_create_table(
            Flavor::MySql,
            "CREATE TABLE staff (id INT, password VARCHAR(40) BINARY DEFAULT NULL, comment VARCHAR(9), PRIMARY KEY pk_staff (id), KEY k USING BTREE (comment))",
        )
        .unwrap();
        assert_eq!(d.elems.len(), 5, "{d:?}");
        let TableElem::Column(p) = &d.elems[1] else {
            panic!("{d:?}")
        };
        assert!(p.attrs.contains(&ColAttr::Collate("binary".into())));
        let d = parse_create_table(
            Flavor::MySql,
            "CREATE TABLE t (id INT, PRIMARY KEY USING BTREE (id))",
        )
        .unwrap();
        assert_eq!(d.elems.len(), 2);
        let (name, ine, opts) = parse_create_database(
            "CREATE SCHEMA IF NOT EXISTS shop DEFAULT CHARACTER SET = utf8mb4",
        )
        .unwrap();
        assert_eq!(
            (name.value.as_str(), ine, opts.as_str()),
            ("shop", true, "DEFAULT CHARACTER SET = utf8mb4")
        );
        // A column named like a keyword the dialect does not reserve.
        assert!(
            parse_create_table(Flavor::Postgres, "CREATE TABLE t (key int, comment text)").is_ok()
        );
        assert!(
            parse_create_table(Flavor::Oracle, "CREATE TABLE t (comment VARCHAR2(9))").is_err()
        );
    }
}

/// A plain index as pg_dump writes one: `CREATE [UNIQUE] INDEX name ON [ONLY] table
/// [USING btree] (column, ...)`, columns named and nothing else (no expression,
/// order, operator class, INCLUDE, WITH or WHERE).
#[derive(Debug, Clone, PartialEq)]
pub struct PlainIndex {
    pub unique: bool,
    pub name: Ident,
    pub table: Vec<Ident>,
    pub columns: Vec<Ident>,
}

/// `text` as a [`PlainIndex`], if it is one (None: any other form, for the full
/// parser).
pub fn parse_plain_index(flavor: Flavor, text: &str) -> Option<PlainIndex> {
    let (i, _) = kw("CREATE").parse(text).ok()?;
    let (i, unique) = opt(kw("UNIQUE")).parse(i).ok()?;
    let (i, _) = kw("INDEX").parse(i).ok()?;
    let (i, name) = ident(i).ok()?;
    if name.value.eq_ignore_ascii_case("ON") && !name.quoted {
        return None;
    }
    let (i, _) = kw("ON").parse(i).ok()?;
    let (i, _) = opt(kw("ONLY")).parse(i).ok()?;
    let (i, table) = object_name(i).ok()?;
    let (i, using) = opt(preceded(kw("USING"), ident)).parse(i).ok()?;
    if using.is_some_and(|u| !u.value.eq_ignore_ascii_case("btree")) {
        return None;
    }
    let (i, columns) = paren_list(col_ident(flavor)).parse(i).ok()?;
    let (i, _) = ws(i).ok()?;
    i.trim_end_matches(';')
        .trim()
        .is_empty()
        .then_some(PlainIndex {
            unique: unique.is_some(),
            name,
            table,
            columns,
        })
}

#[cfg(test)]
mod plain_index_tests {
    use super::*;

    #[test]
    fn plain_indexes_are_read_and_others_left_to_the_full_parser() {
        let p = parse_plain_index(
            Flavor::Postgres,
            "CREATE UNIQUE INDEX customers_email ON ONLY tenant0.\"Customers\" USING btree (email, \"Name\")",
        )
        .unwrap();
        assert!(p.unique);
        assert_eq!(p.name.value, "customers_email");
        assert_eq!(p.table.len(), 2);
        assert!(p.table[1].quoted && p.table[1].value == "Customers");
        assert_eq!(p.columns.len(), 2);
        for other in [
            "CREATE INDEX i ON t USING gin (c)",
            "CREATE INDEX i ON t (c DESC)",
            "CREATE INDEX i ON t (lower(c))",
            "CREATE INDEX i ON t (c) WHERE c > 0",
            "CREATE INDEX i ON t (c) INCLUDE (d)",
            "CREATE INDEX ON t (c)",
            "CREATE INDEX i ON t (c text_pattern_ops)",
            "CREATE INDEX CONCURRENTLY i ON t (c)",
        ] {
            assert_eq!(parse_plain_index(Flavor::Postgres, other), None, "{other}");
        }
    }
}
