//! Execution tests against real servers each test starts itself (throwaway MariaDB
//! and PostgreSQL in temp folders on free ports, removed afterwards): a corpus runs on its
//! source server, its translation runs on the other server, and the final schemas
//! (tables, columns, nullability, type family) are compared.

use dialects::translate::{Target, Translator};
use dialects::Dialect;
use grammar::split::split;
use lakeshift_tests::*;
use mysql_async::prelude::Queryable;

fn translate(source: Dialect, target: Dialect, text: &str) -> Vec<String> {
    let mut tr = Translator::new(source, Target::Sql(target));
    let mut out = Vec::new();
    let mut results = tr.translate(text);
    results.extend(tr.finish());
    for r in results {
        assert!(!r.failed(), "line {}: {:?}", r.line, r.diagnostics);
        out.extend(r.output);
    }
    out
}

async fn run_mysql(conn: &mut mysql_async::Conn, stmts: &[String]) {
    for s in stmts {
        conn.query_drop(s.as_str())
            .await
            .unwrap_or_else(|e| panic!("MariaDB refused:\n{s}\n{e}"));
    }
}

async fn run_pg(client: &tokio_postgres::Client, stmts: &[String]) {
    for s in stmts {
        client
            .batch_execute(s)
            .await
            .unwrap_or_else(|e| panic!("PostgreSQL refused:\n{s}\n{e:?}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_source_to_postgres_and_back_to_mariadb() {
    let maria = MariaDb::start().await;
    let text = corpus("mysql.sql");
    // The source corpus on the real source server.
    let mut c = maria.conn(None).await;
    c.query_drop("CREATE DATABASE src").await.unwrap();
    let mut src = maria.conn(Some("src")).await;
    let stmts: Vec<String> = split(grammar::Flavor::MySql, &text)
        .into_iter()
        .map(|s| s.text)
        .collect();
    run_mysql(&mut src, &stmts).await;
    let source_schema = mysql_schema(&mut src, "src").await;
    assert!(
        source_schema.len() > 60,
        "corpus built {} columns",
        source_schema.len()
    );

    // Its PostgreSQL translation on a real PostgreSQL.
    let pg = PgServer::start().await;
    let client = pg.create_db("my2pg").await;
    run_pg(
        &client,
        &translate(Dialect::MySql, Dialect::Postgres, &text),
    )
    .await;
    compare_columns(&source_schema, &pg_schema(&client, "public").await);

    // The identity translation on the same MariaDB, in another database.
    c.query_drop("CREATE DATABASE dst").await.unwrap();
    let mut dst = maria.conn(Some("dst")).await;
    run_mysql(&mut dst, &translate(Dialect::MySql, Dialect::MySql, &text)).await;
    let same = mysql_schema(&mut dst, "dst").await;
    assert_eq!(source_schema, same);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_source_to_mariadb() {
    let text = corpus("postgres.sql");
    let pg = PgServer::start().await;
    let client = pg.create_db("src").await;
    let stmts: Vec<String> = split(grammar::Flavor::Postgres, &text)
        .into_iter()
        .map(|s| s.text)
        .collect();
    run_pg(&client, &stmts).await;
    let public = pg_schema(&client, "public").await;
    let sales = pg_schema(&client, "sales").await;
    // The identity translation on a second fresh database.
    let client2 = pg.create_db("dst").await;
    run_pg(
        &client2,
        &translate(Dialect::Postgres, Dialect::Postgres, &text),
    )
    .await;
    assert_eq!(public, pg_schema(&client2, "public").await);
    assert_eq!(sales, pg_schema(&client2, "sales").await);
    assert!(public.len() > 25 && !sales.is_empty());

    let maria = MariaDb::start().await;
    let mut c = maria.conn(None).await;
    c.query_drop("CREATE DATABASE public").await.unwrap();
    let mut dst = maria.conn(Some("public")).await;
    run_mysql(
        &mut dst,
        &translate(Dialect::Postgres, Dialect::MySql, &text),
    )
    .await;
    compare_columns(&public, &mysql_schema(&mut dst, "public").await);
    compare_columns(&sales, &mysql_schema(&mut dst, "sales").await);
}

/// The Oracle corpus's final schema, written by hand from the corpus: (table, column,
/// nullable, family) in column order.
fn oracle_expected() -> Vec<ColumnFact> {
    let f = |t: &str, c: &str, n: bool, fam: &str| ColumnFact {
        table: t.into(),
        column: c.into(),
        nullable: n,
        family: fam.into(),
    };
    vec![
        f("divisions", "department_id", false, "integer"),
        f("divisions", "department_name", false, "string"),
        f("divisions", "manager_id", true, "integer"),
        f("divisions", "blobby", true, "binary"),
        f("employees", "employee_id", false, "integer"),
        f("employees", "first_name", true, "string"),
        f("employees", "last_name", false, "string"),
        f("employees", "email", false, "string"),
        f("employees", "initials", true, "string"),
        f("employees", "hire_date", false, "timestamp"),
        f("employees", "salary", true, "decimal"),
        f("employees", "bonus", true, "decimal"),
        f("employees", "ratio", true, "decimal"),
        f("employees", "big_id", true, "decimal"),
        f("employees", "huge", true, "decimal"),
        f("employees", "counter", true, "decimal"),
        f("employees", "f", true, "float"),
        f("employees", "bf", true, "float"),
        f("employees", "bd", true, "float"),
        f("employees", "resume", true, "string"),
        f("employees", "nresume", true, "string"),
        f("employees", "photo", true, "binary"),
        f("employees", "token", true, "binary"),
        f("employees", "updated", true, "timestamp"),
        f("employees", "seen", true, "timestamp"),
        f("employees", "local_seen", true, "timestamp"),
        f("employees", "tenure", true, "interval"),
        f("employees", "shift", true, "interval"),
        f("employees", "phone", false, "string"),
        f("employees", "commission", true, "decimal"),
        f("employees", "second_name", true, "string"),
    ]
}

/// ora2pg's integer rule: NUMBER(p,0) with p <= 18 becomes an integer type.
fn with_int_rule(mut v: Vec<ColumnFact>, interval_as: &str) -> Vec<ColumnFact> {
    for c in &mut v {
        if matches!(
            c.column.as_str(),
            "employee_id" | "department_id" | "manager_id"
        ) {
            c.family = "integer".into();
        }
        if c.family == "interval" {
            c.family = interval_as.into();
        }
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oracle_source_to_postgres_and_mariadb() {
    let text = corpus("oracle.sql");
    let pg = PgServer::start().await;
    let client = pg.create_db("ora2pg").await;
    client.batch_execute("CREATE SCHEMA hr").await.unwrap();
    run_pg(
        &client,
        &translate(Dialect::Oracle, Dialect::Postgres, &text),
    )
    .await;
    assert_eq!(
        pg_schema(&client, "hr").await,
        with_int_rule(oracle_expected(), "interval")
    );

    let maria = MariaDb::start().await;
    let mut c = maria.conn(None).await;
    c.query_drop("CREATE DATABASE hr").await.unwrap();
    let mut dst = maria.conn(Some("hr")).await;
    run_mysql(&mut dst, &translate(Dialect::Oracle, Dialect::MySql, &text)).await;
    assert_eq!(
        mysql_schema(&mut dst, "hr").await,
        with_int_rule(oracle_expected(), "string")
    );
}

/// CHECKs PostgreSQL writes with `IS [NOT] TRUE|FALSE` and regular expressions (`~`,
/// `!~`) are created in MariaDB with the same meaning: each value is accepted or
/// refused alike on both servers, NULLs included. (They were dropped with a warning.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_boolean_tests_and_regular_expressions_keep_their_meaning_in_mariadb() {
    let (pg, maria) = tokio::join!(PgServer::start(), MariaDb::start());
    let client = pg.create_db("chk").await;
    let ddl = "CREATE TABLE c (id int PRIMARY KEY, a boolean CHECK (a IS TRUE), b boolean CHECK (b IS NOT FALSE),
        f boolean CHECK (f IS FALSE), n boolean CHECK (n IS NOT TRUE),
        y varchar(20) CHECK (y ~ '^[a-z]+$'), z varchar(20) CHECK (z !~ 'x'))";
    let stmts = translate(Dialect::Postgres, Dialect::MySql, ddl);
    assert_eq!(
        stmts
            .iter()
            .map(|s| s.matches(" CHECK (").count())
            .sum::<usize>(),
        6,
        "every CHECK created: {stmts:?}"
    );
    run_pg(&client, &[ddl.to_owned()]).await;
    let mut c = maria.conn(None).await;
    c.query_drop("CREATE DATABASE chk").await.unwrap();
    let mut m = maria.conn(Some("chk")).await;
    run_mysql(&mut m, &stmts).await;
    let cases: &[(&str, &[&str])] = &[
        ("a", &["true", "false", "NULL"]),
        ("b", &["true", "false", "NULL"]),
        ("f", &["true", "false", "NULL"]),
        ("n", &["true", "false", "NULL"]),
        ("y", &["'abc'", "'Abc'", "'a1'", "''", "NULL"]),
        ("z", &["'ab'", "'axb'", "'X'", "NULL"]),
    ];
    let mut id = 0;
    let mut differ = Vec::new();
    for (col, vals) in cases {
        for v in *vals {
            id += 1;
            let sql = format!("INSERT INTO c (id, {col}) VALUES ({id}, {v})");
            let on_pg = client.batch_execute(&sql).await.is_ok();
            let on_maria = m.query_drop(sql.as_str()).await.is_ok();
            if on_pg != on_maria {
                differ.push(format!(
                    "{col} = {v}: PostgreSQL accepts {on_pg}, MariaDB {on_maria}"
                ));
            }
        }
    }
    assert!(differ.is_empty(), "{}\n{stmts:?}", differ.join("\n"));
}

/// Keys with explicit lengths too long for InnoDB's 3072 bytes in utf8mb4 (a
/// composite key with `VARCHAR(1024)`, two `VARCHAR(1000)` in one unique key, in
/// CREATE TABLE and added later as pg_dump writes them) are created on MariaDB: each
/// text column is cut to its share of the key, with a warning naming it. (MariaDB
/// answered 1071 `Specified key was too long`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_too_long_for_mysql_are_cut_to_fit() {
    let maria = MariaDb::start().await;
    let ddl = "CREATE TABLE m (roomID INTEGER NOT NULL, jid VARCHAR(1024) NOT NULL, CONSTRAINT m_pk PRIMARY KEY (roomID, jid));
        CREATE TABLE n (a varchar(1000), b varchar(1000), c text, n bigint, UNIQUE (a, b, n), PRIMARY KEY (c));
        CREATE TABLE d (id bigint NOT NULL, code character varying(2000) NOT NULL, t text NOT NULL);
        ALTER TABLE ONLY d ADD CONSTRAINT d_pkey PRIMARY KEY (id, code);
        ALTER TABLE ONLY d ADD CONSTRAINT d_t_key UNIQUE (t);";
    let mut tr = Translator::new(Dialect::Postgres, Target::Sql(Dialect::MySql));
    let mut stmts = Vec::new();
    let mut warnings = Vec::new();
    for r in tr.translate(ddl).into_iter().chain(tr.finish()) {
        assert!(!r.failed(), "line {}: {:?}", r.line, r.diagnostics);
        stmts.extend(r.output);
        warnings.extend(r.diagnostics.into_iter().map(|(_, _, d)| d.message));
    }
    for col in ["m.jid", "n.a", "n.b", "n.c", "d.code", "d.t"] {
        assert!(
            warnings
                .iter()
                .any(|w| w.starts_with(&format!("{col}: key column"))
                    && w.contains("becomes VARCHAR(")),
            "{col}: {warnings:#?}"
        );
    }
    let mut c = maria.conn(None).await;
    c.query_drop("CREATE DATABASE k CHARACTER SET utf8mb4")
        .await
        .unwrap();
    let mut k = maria.conn(Some("k")).await;
    run_mysql(&mut k, &stmts).await;
    let keys = lakeshift_tests::mysql_text_rows(
        &mut k,
        "SELECT table_name, index_name, count(*) FROM information_schema.statistics WHERE table_schema = 'k' AND non_unique = 0 GROUP BY table_name, index_name",
    )
    .await;
    assert_eq!(keys.len(), 5, "{keys:?}");
}

/// A jsonb default is given as PostgreSQL prints the stored value: for documents
/// drawn at random (nested objects with repeated and unordered keys, numbers in every
/// JSON spelling, escapes, non-ASCII, odd whitespace) and malformed ones, the
/// translation's text equals what the server prints for `$1::jsonb::text`, and a
/// document the server refuses is one the translation leaves as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jsonb_defaults_read_as_postgresql_prints_them() {
    let pg = PgServer::start().await;
    let client = pg.create_db("j").await;
    // A small deterministic generator (xorshift).
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    fn doc(next: &mut dyn FnMut(u64) -> u64, depth: u32) -> String {
        let ws = |next: &mut dyn FnMut(u64) -> u64| {
            [" ", "", "\n", "\t ", ""][next(5) as usize].to_owned()
        };
        match next(if depth > 3 { 4 } else { 7 }) {
            0 => ["true", "false", "null"][next(3) as usize].into(),
            1 => [
                "0",
                "-0",
                "1.50",
                "1e2",
                "1.5E+1",
                "-2.50e-3",
                "12345678901234567890.0001",
                "0.10e1",
                "1E-7",
                "-0.0",
                "7",
                "3.14159",
            ][next(12) as usize]
                .into(),
            2 | 3 => [
                r#""plain""#,
                r#""\u00e9\u4e2d""#,
                r#""\ud83d\ude00""#,
                r#""a\"b\\c\/d""#,
                r#""tab\there\nline""#,
                r#""\u0001\u001f""#,
                r#""ünï""#,
                r#""""#,
            ][next(8) as usize]
                .into(),
            4 => {
                let n = next(4);
                let items: Vec<String> = (0..n).map(|_| doc(next, depth + 1)).collect();
                format!("[{}{}]", ws(next), items.join(&format!(",{}", ws(next))))
            }
            _ => {
                let n = next(5);
                let keys = ["a", "bb", "b", "aa", "ccc", "é", "a"];
                let members: Vec<String> = (0..n)
                    .map(|_| {
                        format!(
                            "\"{}\"{}:{}{}",
                            keys[next(keys.len() as u64) as usize],
                            ws(next),
                            ws(next),
                            doc(next, depth + 1)
                        )
                    })
                    .collect();
                format!("{{{}}}", members.join(","))
            }
        }
    }
    let mut docs: Vec<String> = (0..300).map(|_| doc(&mut next, 0)).collect();
    docs.extend(["{", "[1,]", "01", "1.", r#""\u0000""#, "{\"a\" 1}", "nul"].map(String::from));
    let mut compared = 0;
    for d in &docs {
        let server = client
            .query_one("SELECT $1::text::jsonb::text", &[&d])
            .await
            .ok()
            .map(|r| r.get::<_, String>(0));
        assert_eq!(dialects::jsonb::canonical(d), server, "{d:?} as jsonb");
        if server.is_some() {
            compared += 1;
        }
    }
    assert!(compared > 250, "{compared}");
    // And through translation: a column's default and a default set later.
    let lit = docs[0].replace('\'', "''");
    let out = translate(
        Dialect::Postgres,
        Dialect::Postgres,
        &format!(
            "CREATE TABLE t (id int PRIMARY KEY, j jsonb DEFAULT '{lit}');
             ALTER TABLE t ALTER COLUMN j SET DEFAULT '{{\"b\":1,\"a\":2}}';"
        ),
    );
    let want = dialects::jsonb::canonical(&docs[0])
        .unwrap()
        .replace('\'', "''");
    assert!(out[0].contains(&format!("DEFAULT '{want}'")), "{out:?}");
    assert!(out[1].contains(r#"DEFAULT '{"a": 2, "b": 1}'"#), "{out:?}");
}
