//! The conversion matrix as reviewed insta snapshots under `snapshots/`: one file per
//! source -> target pair (identity pairs included), over the corpora in tests/corpus.

use dialects::translate::{Target, Translator};
use dialects::Dialect;
use lakeshift_tests::{corpus, workspace_root};

/// Translate a corpus and render output and diagnostics the way the CLI prints them.
fn render(source: Dialect, target: Target, text: &str) -> String {
    let mut tr = Translator::new(source, target);
    let mut out = String::new();
    let mut results = tr.translate(text);
    results.extend(tr.finish());
    for r in results {
        for (l, c, d) in &r.diagnostics {
            out.push_str(&format!("-- {}: {l}:{c}: {}\n", d.severity, d.message));
        }
        for s in &r.output {
            out.push_str(s);
            out.push_str(";\n");
        }
    }
    out
}

fn check(source: Dialect, target: Target) {
    let text = corpus(&format!("{}.sql", source.name()));
    let name = match target {
        Target::Sql(d) => format!("{}_to_{}", source.name(), d.name()),
        Target::Ir => format!("{}_to_ir", source.name()),
        Target::Iceberg => format!("{}_to_iceberg", source.name()),
    };
    let rendered = render(source, target, &text);
    // Every corpus statement must translate: no errors in the matrix.
    assert!(
        !rendered.contains("-- error:"),
        "{name} has errors:\n{}",
        rendered
            .lines()
            .filter(|l| l.starts_with("-- error"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    insta::with_settings!({
        snapshot_path => workspace_root().join("snapshots"),
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!(name, rendered);
    });
}

#[test]
fn matrix() {
    for s in Dialect::ALL {
        for t in Dialect::ALL {
            check(s, Target::Sql(t));
        }
        check(s, Target::Ir);
        check(s, Target::Iceberg);
    }
}

#[test]
fn stateful_change_becomes_small_postgres_changes() {
    // One MySQL CHANGE is a rename, a type change, a NOT NULL change and a default
    // change in PostgreSQL.
    let out = render(
        Dialect::MySql,
        Target::Sql(Dialect::Postgres),
        "CREATE TABLE t (id int PRIMARY KEY, a int);\nALTER TABLE t CHANGE a b bigint NOT NULL DEFAULT 7;",
    );
    let alters: Vec<&str> = out.lines().filter(|l| l.starts_with("ALTER")).collect();
    assert_eq!(
        alters,
        [
            "ALTER TABLE t RENAME COLUMN a TO b;",
            "ALTER TABLE t ALTER COLUMN b TYPE bigint;",
            "ALTER TABLE t ALTER COLUMN b SET NOT NULL;",
            "ALTER TABLE t ALTER COLUMN b SET DEFAULT 7;",
        ]
    );
}

#[test]
fn errors_name_line_and_column_and_others_still_translate() {
    let mut tr = Translator::new(Dialect::MySql, Target::Sql(Dialect::Postgres));
    let rs = tr.translate("CREATE TABLE a (x int);\n\nALTER TABLE a ADD COLUMN y notatype;\nALTER TABLE missing ADD z int;\nALTER TABLE a ADD w int;");
    assert_eq!(rs.len(), 4);
    let (l, c, d) = &rs[1].diagnostics[0];
    assert_eq!((*l, d.severity), (3, ddl_core::Severity::Error));
    assert!(*c > 1, "column points into the statement: {c}");
    assert!(rs[2].failed());
    assert_eq!(rs[3].output, ["ALTER TABLE a ADD COLUMN w integer"]);
}

#[test]
fn schema_file_seeds_the_catalog() {
    let mut tr = Translator::new(Dialect::MySql, Target::Sql(Dialect::Postgres));
    assert!(tr
        .seed("CREATE TABLE t (a int NOT NULL DEFAULT 1);")
        .is_empty());
    let rs = tr.translate("ALTER TABLE t MODIFY a int NULL DEFAULT 1;");
    assert_eq!(rs[0].output, ["ALTER TABLE t ALTER COLUMN a DROP NOT NULL"]);
}

#[test]
fn long_names_are_shortened_deterministically() {
    let long = "x".repeat(70);
    let out = render(
        Dialect::MySql,
        Target::Sql(Dialect::Postgres),
        &format!("CREATE TABLE t ({long} int);"),
    );
    assert!(out.contains("longer than 63 bytes"), "{out}");
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("xxx"))
        .unwrap();
    assert!(line.trim().split(' ').next().unwrap().len() <= 63);
}

#[test]
fn ansi_quotes_changes_double_quotes() {
    let mut tr = Translator::new(Dialect::MySql, Target::Ir);
    let r = tr.translate("CREATE TABLE t (a varchar(5) DEFAULT \"x\");");
    assert!(
        r[0].output[0].contains("\"value\": \"x\""),
        "{:?}",
        r[0].output
    );
    let mut tr = Translator::new(Dialect::MySql, Target::Ir);
    tr.options.ansi_quotes = true;
    let r = tr.translate("CREATE TABLE \"T\" (\"a b\" int);");
    assert!(r[0].output[0].contains("\"a b\""), "{:?}", r[0].output);
}

#[test]
fn primary_key_prefix_lengths_are_kept_or_reported() {
    // regression: PRIMARY KEY (id, body(10)) lost its prefix, so MariaDB refused the
    // identity translation (a TEXT column in a key needs a length).
    let src = "CREATE TABLE d (id int NOT NULL, body text NOT NULL);\nALTER TABLE d ADD PRIMARY KEY (id, body(10));";
    let my = render(Dialect::MySql, Target::Sql(Dialect::MySql), src);
    assert!(my.contains("ADD PRIMARY KEY (id, body(10))"), "{my}");
    let pg = render(Dialect::MySql, Target::Sql(Dialect::Postgres), src);
    assert!(pg.contains("ADD PRIMARY KEY (id, body)"), "{pg}");
    assert!(
        pg.contains("-- warning") && pg.contains("prefix length (10)"),
        "{pg}"
    );
}

#[test]
fn mysql_drop_index_with_online_ddl_options() {
    // MySQL 8 accepts ALGORITHM/LOCK on DROP INDEX (MariaDB does not); sqlparser 0.64
    // rejects them, so the grammar takes over and the options are reported as skipped.
    let out = render(
        Dialect::MySql,
        Target::Sql(Dialect::Postgres),
        "CREATE TABLE t (a int, KEY ix (a));\nDROP INDEX ix ON t ALGORITHM=INPLACE LOCK=NONE;",
    );
    assert!(out.contains("DROP INDEX t_ix;"), "{out}");
    assert!(
        out.contains("-- skipped: 2:1: DROP INDEX ix: ALGORITHM=INPLACE has no schema meaning"),
        "{out}"
    );
    assert!(!out.contains("-- error"), "{out}");
}
