//! Property tests: for every dialect, generated IR -> emit -> parse gives the same IR
//! (hostile identifiers, defaults and comments included), and arbitrary text never panics the parsers.

use dialects::translate::{Target, Translator};
use dialects::Dialect;
use proptest::prelude::*;

/// Types as each dialect spells them; parsing them gives the canonical IR for that
/// dialect, so the generated tables are ones the dialect can express.
fn type_strings(d: Dialect) -> &'static [&'static str] {
    match d {
        Dialect::MySql => &[
            "TINYINT",
            "TINYINT UNSIGNED",
            "SMALLINT",
            "MEDIUMINT UNSIGNED",
            "INT",
            "BIGINT UNSIGNED",
            "DECIMAL(10,2)",
            "FLOAT",
            "DOUBLE",
            "BIT(5)",
            "TINYINT(1)",
            "CHAR(3)",
            "VARCHAR(40)",
            "TEXT",
            "MEDIUMTEXT",
            "LONGTEXT",
            "BINARY(4)",
            "VARBINARY(20)",
            "BLOB",
            "LONGBLOB",
            "ENUM('a','b''c')",
            "SET('x','y')",
            "JSON",
            "DATE",
            "TIME(3)",
            "DATETIME",
            "DATETIME(6)",
            "TIMESTAMP(2)",
            "YEAR",
            "POINT",
        ],
        Dialect::Postgres => &[
            "smallint",
            "integer",
            "bigint",
            "numeric",
            "numeric(12,3)",
            "real",
            "double precision",
            "money",
            "char(2)",
            "varchar(10)",
            "varchar",
            "text",
            "bytea",
            "boolean",
            "date",
            "time(3)",
            "timetz",
            "timestamp",
            "timestamp(0)",
            "timestamptz(3)",
            "interval",
            "interval day to second(2)",
            "uuid",
            "json",
            "jsonb",
            "integer[]",
            "bit(3)",
            "varbit(7)",
            "inet",
        ],
        Dialect::Oracle => &[
            "NUMBER",
            "NUMBER(5)",
            "NUMBER(12,2)",
            "BINARY_FLOAT",
            "BINARY_DOUBLE",
            "CHAR(2 CHAR)",
            "VARCHAR2(10 BYTE)",
            "VARCHAR2(30 CHAR)",
            "NVARCHAR2(5)",
            "NCHAR(2)",
            "CLOB",
            "NCLOB",
            "BLOB",
            "RAW(8)",
            "LONG",
            "DATE",
            "TIMESTAMP(3)",
            "TIMESTAMP(6) WITH TIME ZONE",
            "TIMESTAMP(6) WITH LOCAL TIME ZONE",
            "INTERVAL YEAR(2) TO MONTH",
            "INTERVAL DAY(3) TO SECOND(4)",
        ],
    }
}

fn ident() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9_]{0,12}",
        "[A-Z][A-Za-z0-9]{0,8}",
        Just("select".to_owned()),
        Just("order".to_owned()),
        Just("a b".to_owned()),
        Just("we\"ird`'q".to_owned()),
        Just("ünï_çødé".to_owned()),
        Just("MixedCase".to_owned()),
    ]
}

/// A generated column: name, type (index into `type_strings`), NOT NULL, default,
/// comment.
#[derive(Debug, Clone)]
struct Col {
    name: String,
    ty: usize,
    not_null: bool,
    default: Option<Def>,
    comment: Option<String>,
}

#[derive(Debug, Clone)]
enum Def {
    Str(String),
    Num(i64),
}

/// Text with the characters that break quoting: quotes, backslashes, percent, unicode.
fn hostile_text() -> impl Strategy<Value = String> {
    // A regex class: backslash, both quotes, percent, underscore, unicode, backtick.
    r#"[a-zA-Z0-9 '\\"%_üé€`;]{0,16}"#
}

fn column(d: Dialect) -> impl Strategy<Value = Col> {
    let n = type_strings(d).len();
    (
        ident(),
        0..n,
        any::<bool>(),
        prop::option::of(prop_oneof![
            hostile_text().prop_map(Def::Str),
            (-1000i64..1000).prop_map(Def::Num),
        ]),
        prop::option::of(hostile_text()),
    )
        .prop_map(|(name, ty, not_null, default, comment)| Col {
            name,
            ty,
            not_null,
            default,
            comment,
        })
}

/// A table: name, columns (distinct names), whether the first column is the key, and
/// a table comment.
fn table_ir(d: Dialect) -> impl Strategy<Value = (String, Vec<Col>, bool, Option<String>)> {
    (
        ident(),
        prop::collection::vec(column(d), 1..6),
        any::<bool>(),
        prop::option::of(hostile_text()),
    )
        .prop_map(|(t, cols, pk, comment)| {
            let mut seen = std::collections::BTreeSet::new();
            let cols = cols
                .into_iter()
                .filter(|c| seen.insert(c.name.to_lowercase()))
                .collect();
            (t, cols, pk, comment)
        })
}

fn quoted(d: Dialect, s: &str) -> String {
    match d {
        Dialect::MySql => format!("`{}`", s.replace('`', "``")),
        _ => format!("\"{}\"", s.replace('"', "\"\"")),
    }
}

/// Source text for a generated table, written the way each dialect writes it.
fn source_text(d: Dialect, t: &str, cols: &[Col], pk: bool, comment: &Option<String>) -> String {
    // Written here, not with the emitter's quoting, so a quoting bug there shows.
    let lit = |s: &str| {
        let s = s.replace('\'', "''");
        if d == Dialect::MySql {
            format!("'{}'", s.replace('\\', "\\\\"))
        } else {
            format!("'{s}'")
        }
    };
    let defs: Vec<String> = cols
        .iter()
        .map(|c| {
            let ty = type_strings(d)[c.ty];
            let mut def = format!("{} {ty}", quoted(d, &c.name));
            // A number on a boolean column is normalised to true/false by some
            // targets: keep number defaults to other types.
            match &c.default {
                Some(Def::Str(v)) => def.push_str(&format!(" DEFAULT {}", lit(v))),
                Some(Def::Num(n)) if !ty.to_ascii_lowercase().starts_with("bool") => {
                    def.push_str(&format!(" DEFAULT {n}"))
                }
                _ => {}
            }
            if c.not_null {
                def.push_str(" NOT NULL");
            }
            if let (Dialect::MySql, Some(cm)) = (d, &c.comment) {
                def.push_str(&format!(" COMMENT {}", lit(cm)));
            }
            def
        })
        .collect();
    let mut body = defs.join(", ");
    if pk {
        body.push_str(&format!(", PRIMARY KEY ({})", quoted(d, &cols[0].name)));
    }
    let mut src = format!("CREATE TABLE {} ({body})", quoted(d, t));
    match (d, comment) {
        (Dialect::MySql, Some(cm)) => src.push_str(&format!(" COMMENT={}", lit(cm))),
        (_, Some(cm)) => src.push_str(&format!(
            ";\nCOMMENT ON TABLE {} IS {}",
            quoted(d, t),
            lit(cm)
        )),
        _ => {}
    }
    if d != Dialect::MySql {
        for c in cols {
            if let Some(cm) = &c.comment {
                src.push_str(&format!(
                    ";\nCOMMENT ON COLUMN {}.{} IS {}",
                    quoted(d, t),
                    quoted(d, &c.name),
                    lit(cm)
                ));
            }
        }
    }
    src
}

fn roundtrip(
    d: Dialect,
    (t, cols, pk, comment): &(String, Vec<Col>, bool, Option<String>),
) -> Result<(), TestCaseError> {
    let src = source_text(d, t, cols, *pk, comment);
    let mut a = Translator::new(d, Target::Sql(d));
    let first = a.translate(&src);
    for r in &first {
        prop_assert!(!r.failed(), "{src}: {:?}", r.diagnostics);
    }
    let emitted: Vec<String> = first.iter().flat_map(|r| r.output.clone()).collect();
    let emitted = emitted.join(";\n");
    let mut b = Translator::new(d, Target::Sql(d));
    for r in b.translate(&emitted) {
        prop_assert!(!r.failed(), "{emitted}: {:?}", r.diagnostics);
    }
    // The same table, column for column, default for default, comment for comment.
    prop_assert_eq!(&a.catalog.tables, &b.catalog.tables, "{}", emitted);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

    #[test]
    fn mysql_roundtrip(table in table_ir(Dialect::MySql)) {
        roundtrip(Dialect::MySql, &table)?;
    }

    #[test]
    fn postgres_roundtrip(table in table_ir(Dialect::Postgres)) {
        roundtrip(Dialect::Postgres, &table)?;
    }

    #[test]
    fn oracle_roundtrip(table in table_ir(Dialect::Oracle)) {
        roundtrip(Dialect::Oracle, &table)?;
    }

    #[test]
    fn random_text_never_panics(s in "\\PC{0,200}", d in 0usize..3) {
        let d = Dialect::ALL[d];
        let mut tr = Translator::new(d, Target::Sql(Dialect::Postgres));
        let _ = tr.translate(&s);
    }

    #[test]
    fn ddl_shaped_noise_never_panics(
        head in prop::sample::select(vec!["CREATE TABLE t (", "ALTER TABLE t ", "ALTER TABLE t ADD (", "CREATE INDEX i ON t (", "DROP TABLE "]),
        body in "[a-zA-Z0-9_ ,()'\"`*.;=-]{0,80}",
        d in 0usize..3,
    ) {
        let d = Dialect::ALL[d];
        let mut tr = Translator::new(d, Target::Sql(Dialect::MySql));
        let _ = tr.translate(&format!("CREATE TABLE t (a int);\n{head}{body}"));
    }
}
