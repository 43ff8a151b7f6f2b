//! Property tests: for every dialect, generated IR -> emit -> parse gives the same IR
//! (hostile identifiers included), and arbitrary text never panics the parsers.

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

fn table_ir(d: Dialect) -> impl Strategy<Value = (String, Vec<(String, usize, bool)>)> {
    let n = type_strings(d).len();
    (
        ident(),
        prop::collection::vec((ident(), 0..n, any::<bool>()), 1..6),
    )
}

fn roundtrip(d: Dialect, table: &str, cols: &[(String, usize, bool)]) -> Result<(), TestCaseError> {
    // Build the IR by parsing a definition in the dialect with quoted names.
    let quoted = |s: &str| match d {
        Dialect::MySql => format!("`{}`", s.replace('`', "``")),
        _ => format!("\"{}\"", s.replace('"', "\"\"")),
    };
    let mut seen = std::collections::BTreeSet::new();
    let defs: Vec<String> = cols
        .iter()
        .filter(|(c, _, _)| seen.insert(c.to_lowercase()))
        .map(|(c, t, nn)| {
            format!(
                "{} {}{}",
                quoted(c),
                type_strings(d)[*t],
                if *nn { " NOT NULL" } else { "" }
            )
        })
        .collect();
    let src = format!("CREATE TABLE {} ({})", quoted(table), defs.join(", "));
    let mut a = Translator::new(d, Target::Sql(d));
    let first = a.translate(&src);
    prop_assert!(!first[0].failed(), "{src}: {:?}", first[0].diagnostics);
    let emitted = first[0].output.join(";\n");
    let mut b = Translator::new(d, Target::Sql(d));
    let second = b.translate(&emitted);
    prop_assert!(
        !second[0].failed(),
        "{emitted}: {:?}",
        second[0].diagnostics
    );
    prop_assert_eq!(&first[0].changes, &second[0].changes, "{}", emitted);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

    #[test]
    fn mysql_roundtrip((t, cols) in table_ir(Dialect::MySql)) {
        roundtrip(Dialect::MySql, &t, &cols)?;
    }

    #[test]
    fn postgres_roundtrip((t, cols) in table_ir(Dialect::Postgres)) {
        roundtrip(Dialect::Postgres, &t, &cols)?;
    }

    #[test]
    fn oracle_roundtrip((t, cols) in table_ir(Dialect::Oracle)) {
        roundtrip(Dialect::Oracle, &t, &cols)?;
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
