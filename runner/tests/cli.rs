//! The `lakeshift` binary as a user runs it.

use std::process::{Command, Output};

fn lakeshift(args: &[&str], stdin: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_lakeshift"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("lakeshift runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn translate_to_iceberg_prints_a_json_plan() {
    let o = lakeshift(
        &["translate", "--from", "mysql", "--to", "iceberg"],
        "CREATE TABLE s.t (id BIGINT UNSIGNED PRIMARY KEY, f TINYINT(1));\nALTER TABLE s.t ADD COLUMN g INT AFTER id;\nCREATE INDEX ix ON s.t (g);\n",
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is JSON");
    let stmts = v.as_array().unwrap();
    assert_eq!(stmts.len(), 3);
    assert_eq!(stmts[0]["actions"][1]["action"], "create-table");
    assert_eq!(stmts[0]["actions"][1]["schema"][0]["type"], "decimal(20,0)");
    assert_eq!(stmts[0]["actions"][1]["schema"][1]["type"], "boolean");
    assert_eq!(stmts[1]["actions"][0]["field"]["id"], 3);
    assert_eq!(stmts[1]["actions"][0]["position"]["after"], "id");
    assert_eq!(stmts[2]["diagnostics"][0]["severity"], "skipped");
    // Options change the mapping.
    let o = lakeshift(
        &[
            "translate",
            "--from",
            "mysql",
            "--to",
            "iceberg",
            "--tinyint1",
            "int",
            "--bigint-unsigned",
            "long",
        ],
        "CREATE TABLE t (id BIGINT UNSIGNED, f TINYINT(1));",
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["actions"][1]["schema"][0]["type"], "long");
    assert_eq!(v[0]["actions"][1]["schema"][1]["type"], "int");
    assert!(text(&o.stderr).contains("9223372036854775807"));
}

#[test]
fn apply_commits_and_reports_and_stops_at_a_refused_change() {
    let dir = tempfile::tempdir().unwrap();
    let wh = dir.path().join("wh");
    let wh = wh.to_str().unwrap();
    let o = lakeshift(
        &["apply", "--from", "mysql", "--warehouse", wh],
        "CREATE TABLE shop.t (id INT PRIMARY KEY, amount BIGINT);\nALTER TABLE shop.t ADD note TEXT;\n",
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("<stdin>:1:1: created table shop.t"), "{out}");
    assert!(out.contains("<stdin>:2:1: altered table shop.t"), "{out}");
    assert!(std::path::Path::new(wh).join("catalog.db").exists());

    // A narrowing: refused by default, with the statement's position.
    let o = lakeshift(
        &["apply", "--from", "mysql", "--warehouse", wh],
        "\nALTER TABLE shop.t MODIFY amount INT;\nALTER TABLE shop.t ADD x INT;\n",
    );
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(
        err.contains("error: <stdin>:2:1: table shop.t column amount"),
        "{err}"
    );
    assert!(err.contains("stopped at <stdin>:2:1"), "{err}");
    assert!(text(&o.stdout).is_empty(), "nothing applied");

    // The same change with a policy that accepts it.
    let o = lakeshift(
        &[
            "apply",
            "--from",
            "mysql",
            "--warehouse",
            wh,
            "--schema-change-behavior",
            "lenient",
        ],
        "ALTER TABLE shop.t MODIFY amount INT;\nALTER TABLE shop.t ADD x INT;\n",
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("kept as long"),
        "{}",
        text(&o.stderr)
    );

    // Unparsable input: position and reason.
    let o = lakeshift(
        &["apply", "--from", "mysql", "--warehouse", wh],
        "ALTER TABLE shop.t ADD COLUMN y notatype;",
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("error: <stdin>:1:"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn bad_usage_exits_2() {
    let o = lakeshift(
        &[
            "apply",
            "--from",
            "mysql",
            "--warehouse",
            "/tmp/x",
            "--schema-change-behavior",
            "strict",
        ],
        "",
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("try-evolve"),
        "{}",
        text(&o.stderr)
    );
    let o = lakeshift(
        &[
            "apply",
            "--from",
            "mysql",
            "--warehouse",
            "/tmp/x",
            "/no/such.sql",
        ],
        "",
    );
    assert_eq!(o.status.code(), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_prints_json_lines_and_resumes_from_a_printed_position() {
    use mysql_async::prelude::Queryable;
    let db = lakeshift_tests::MariaDb::start().await;
    let mut c = db.conn(None).await;
    c.query_drop("CREATE DATABASE shop; CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(10)); INSERT INTO shop.t VALUES (1, 'a')")
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job.yaml");
    std::fs::write(
        &job,
        format!(
            "source:\n  type: mariadb\n  hostname: 127.0.0.1\n  port: {}\n  username: root\n  password-env: LAKESHIFT_TEST_PW\n  server-id: 99\n  tables: ['shop\\..*']\n",
            db.port
        ),
    )
    .unwrap();
    let state = dir.path().join("state");
    let args = |extra: &[&str]| {
        let mut v = vec![
            "tail".to_owned(),
            "--config".into(),
            job.display().to_string(),
            "--state".into(),
            state.display().to_string(),
            "--until-end".into(),
        ];
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let run = |a: Vec<String>| {
        let o = Command::new(env!("CARGO_BIN_EXE_lakeshift"))
            .args(&a)
            .env("LAKESHIFT_TEST_PW", "")
            .output()
            .unwrap();
        (o.status.code(), text(&o.stdout), text(&o.stderr))
    };
    let (code, out, err) = run(args(&[]));
    assert_eq!(code, Some(0), "{err}");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "snapshot");
    assert_eq!(lines[0]["data"]["v"], "a");
    let done = lines.last().unwrap();
    assert_eq!(done["type"], "snapshot-done");
    let from = done["position"].as_str().unwrap().to_owned();
    c.query_drop("INSERT INTO shop.t VALUES (2, 'b'); UPDATE shop.t SET v = 'c' WHERE id = 1")
        .await
        .unwrap();
    let (code, out, err) = run(args(&["--from", &from]));
    assert_eq!(code, Some(0), "{err}");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["insert", "update", "commit"], "{out}");
    assert_eq!(lines[1]["old"]["v"], "a");
    assert_eq!(lines[1]["data"]["v"], "c");
    // Resume right after the insert: only the update follows.
    let after_insert = lines[0]["position"].as_str().unwrap().to_owned();
    let (_, out, _) = run(args(&["--from", &after_insert]));
    let kinds: Vec<String> = out
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(kinds, ["update", "commit"]);
    // A bad job file names the field.
    std::fs::write(&job, "source:\n  type: oracle\n").unwrap();
    let (code, _, err) = run(args(&[]));
    assert_eq!(code, Some(2));
    assert!(err.contains("source"), "{err}");
}

#[test]
fn tail_refuses_a_kafka_job_with_a_clear_error() {
    // regression: a Kafka job's source went to the binlog reader (empty host, port 0).
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job.yaml");
    std::fs::write(
        &job,
        "source:\n  type: kafka\n  brokers: 127.0.0.1:9\n  group-id: g\n  topic-prefix: p\n  tables: ['a\\..*']\n",
    )
    .unwrap();
    let o = lakeshift(&["tail", "--config", job.to_str().unwrap()], "");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("source.type is kafka"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn translate_reports_an_unterminated_comment_and_a_client_command() {
    let o = lakeshift(
        &["translate", "--from", "oracle", "--to", "postgres"],
        "PROMPT making t\nCREATE TABLE t (a NUMBER);\n/* never closed\nCREATE TABLE u (b NUMBER);\n",
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("skipped: <stdin>:1:1: SQL*Plus command `PROMPT making t`"),
        "{err}"
    );
    assert!(
        err.contains("error: <stdin>:3:1: unterminated comment"),
        "{err}"
    );
    assert!(text(&o.stdout).contains("CREATE TABLE t"));
    assert!(!text(&o.stdout).contains("CREATE TABLE u"));
}

/// A snapshot of more tables than the server's table caches hold says how to make it
/// fast (the server reopens tables for every read past them); a smaller one says
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_of_more_tables_than_the_server_caches_says_how_to_raise_them() {
    use mysql_async::prelude::Queryable;
    let db = lakeshift_tests::MariaDb::start_with(&[
        "--table-definition-cache=400",
        "--table-open-cache=400",
    ])
    .await;
    let mut c = db.conn(None).await;
    c.query_drop("CREATE DATABASE many").await.unwrap();
    let creates: Vec<String> = (0..420)
        .map(|i| format!("CREATE TABLE many.t{i} (id INT PRIMARY KEY)"))
        .collect();
    c.query_drop(creates.join(";")).await.unwrap();
    c.query_drop("INSERT INTO many.t7 VALUES (1)")
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tail = |tables: &str| {
        let job = dir.path().join("job.yaml");
        std::fs::write(
            &job,
            format!(
                "source:\n  type: mariadb\n  hostname: 127.0.0.1\n  port: {}\n  username: root\n  server-id: 98\n  tables: ['{tables}']\n",
                db.port
            ),
        )
        .unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_lakeshift"))
            .args(["tail", "--config", job.to_str().unwrap(), "--until-end"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(text(&o.stdout).contains(r#""id":1"#), "{}", text(&o.stdout));
        text(&o.stderr)
    };
    let err = tail(r"many\..*");
    assert!(
        err.contains("reads 420 tables in one transaction")
            && err.contains("table_definition_cache 400, table_open_cache 400")
            && err.contains("SET GLOBAL table_definition_cache = 920, table_open_cache = 920"),
        "{err}"
    );
    let err = tail(r"many\.t[0-9]");
    assert!(!err.contains("table caches"), "{err}");
}

/// `translate` ends with one summary line on standard error; `--quiet` leaves out the
/// `skipped:` lines (still counted); `--schema-map` says where a schema went; a bad
/// map is a usage error.
#[test]
fn translate_summarises_and_quiet_hides_skipped_lines() {
    let script = "SET client_encoding = 'UTF8';\nCREATE TABLE public.t (id integer PRIMARY KEY, d timestamptz);\nGRANT SELECT ON public.t TO app;\nCREATE TABLE public.u (x text CHECK (x ~ '^a'));\n";
    let args = ["translate", "--from", "postgres", "--to", "mysql"];
    let o = lakeshift(&args, script);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains("skipped: <stdin>:3:1: GRANT"), "{err}");
    assert_eq!(
        err.lines().last(),
        Some("translated 4 statement(s): 2 with output, 2 skipped, 3 warning(s), 0 error(s)"),
        "{err}"
    );
    assert!(
        err.contains("schema public: its tables go to the current database"),
        "{err}"
    );
    // What is said at the end of the input is counted too (regression: a key onto a
    // table never made was warned about after the summary had counted 0 warnings).
    let o = lakeshift(
        &["translate", "--from", "mysql", "--to", "postgres"],
        "CREATE TABLE c (id int, p int, FOREIGN KEY (p) REFERENCES never_made (id));\n",
    );
    let err = text(&o.stderr);
    assert!(err.contains("end of input"), "{err}");
    assert!(
        err.lines()
            .last()
            .is_some_and(|l| l.contains(" 1 warning(s)")),
        "{err}"
    );
    let mut quiet = args.to_vec();
    quiet.push("--quiet");
    let o = lakeshift(&quiet, script);
    let err = text(&o.stderr);
    assert!(!err.contains("skipped:"), "{err}");
    assert!(err.contains("2 skipped (not shown: --quiet)"), "{err}");
    let mut mapped = args.to_vec();
    mapped.extend(["--schema-map", "public=shop"]);
    let o = lakeshift(&mapped, script);
    assert!(
        text(&o.stdout).contains("CREATE TABLE shop.t"),
        "{}",
        text(&o.stdout)
    );
    let mut bad = args.to_vec();
    bad.extend(["--schema-map", "public"]);
    let o = lakeshift(&bad, script);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
}

/// `--version` names the commit the binary was built from; `--log-format json`
/// writes each log line as one JSON object (level, fields) for log collectors; and
/// RUST_LOG sets the level when LAKESHIFT_LOG is not set (issue 38 item 4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_names_the_commit_and_logs_come_as_json_or_at_rust_logs_level() {
    use mysql_async::prelude::Queryable;
    let v = lakeshift(&["--version"], "");
    let v = text(&v.stdout);
    let commit = v
        .trim()
        .strip_prefix(&format!("lakeshift {} (", env!("CARGO_PKG_VERSION")))
        .and_then(|s| s.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{v}"));
    let hex = commit.trim_end_matches("-modified");
    assert!(
        hex == "unknown" || (hex.len() == 12 && hex.bytes().all(|b| b.is_ascii_hexdigit())),
        "{v}"
    );
    let db = lakeshift_tests::MariaDb::start().await;
    let mut c = db.conn(None).await;
    c.query_drop("CREATE DATABASE shop; CREATE TABLE shop.t (id INT PRIMARY KEY); INSERT INTO shop.t VALUES (1)")
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job.yaml");
    std::fs::write(
        &job,
        format!(
            "source:\n  type: mariadb\n  hostname: 127.0.0.1\n  port: {}\n  username: root\n  server-id: 98\n  tables: ['shop\\..*']\nsink:\n  type: iceberg\n  warehouse: {}\npipeline:\n  name: logs\n  state: {}\n",
            db.port,
            dir.path().join("wh").display(),
            dir.path().join("state").display()
        ),
    )
    .unwrap();
    let job = job.display().to_string();
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let o = Command::new(env!("CARGO_BIN_EXE_lakeshift"))
            .args(args)
            .envs(env.iter().copied())
            .env_remove("LAKESHIFT_LOG")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        text(&o.stderr)
    };
    let err = run(
        &[
            "sync",
            "--config",
            &job,
            "--until-end",
            "--log-format",
            "json",
        ],
        &[],
    );
    let events: Vec<serde_json::Value> = err
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    let said = |what: &str| {
        events.iter().any(|e| {
            e["level"] == "INFO"
                && e["fields"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(what))
        })
    };
    assert!(said("snapshot done and committed"), "{err}");
    // The banner (version and commit, job, source, sink) and the summary, as log
    // lines too.
    assert!(
        said(&format!("lakeshift {}", env!("CARGO_PKG_VERSION")))
            && said(&format!(
                "job logs, source mariadb 127.0.0.1:{}, sink iceberg",
                db.port
            ))
            && said("done: 1 row change(s)"),
        "{err}"
    );
    c.query_drop("INSERT INTO shop.t VALUES (2)").await.unwrap();
    let err = run(
        &["sync", "--config", &job, "--until-end"],
        &[("RUST_LOG", "warn")],
    );
    assert!(
        !err.contains(" INFO "),
        "RUST_LOG=warn hides INFO lines: {err}"
    );
}

/// `init --schema` prints the job file's JSON Schema: every section, and the keys
/// with their defaults and meanings, as `docs/job-file.schema.json` holds it.
#[test]
fn init_prints_the_job_files_json_schema() {
    let out = lakeshift(&["init", "--schema"], "");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["title"], "lakeshift job file");
    for s in ["source", "sink", "pipeline", "route"] {
        assert!(v["properties"].get(s).is_some(), "{s}");
    }
    let committed = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/job-file.schema.json"),
    )
    .unwrap();
    assert_eq!(
        v,
        serde_json::from_str::<serde_json::Value>(&committed).unwrap()
    );
    // And a source or sink is still asked for without it.
    let out = lakeshift(&["init", "--source", "mariadb"], "");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// `status` reads only what it needs: a job whose source password is not in the
/// environment is reported (a PostgreSQL source's slot is named as not read), and a
/// job that never ran is said to be so without a warehouse or catalog made by
/// looking. regression: status stopped on the source's password, and made the
/// warehouse and its catalog of a job that never ran.
#[test]
fn status_needs_no_source_password_and_makes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let wh = tmp.path().join("warehouse");
    for (source, said) in [
        ("type: mariadb\n  server-id: 77", None),
        (
            "type: postgres\n  database: app",
            Some("source slot: not read: LAKESHIFT_TEST_UNSET_PW (source.password-env) is not set"),
        ),
    ] {
        let job = tmp.path().join("job.yaml");
        std::fs::write(
            &job,
            format!(
                "source:\n  {source}\n  hostname: 127.0.0.1\n  username: repl\n  password-env: LAKESHIFT_TEST_UNSET_PW\n  tables: ['shop\\..*']\nsink:\n  type: iceberg\n  warehouse: {}\npipeline:\n  name: j\n  state: {}\n",
                wh.display(),
                tmp.path().join("state").display()
            ),
        )
        .unwrap();
        let out = lakeshift(&["status", "--config", job.to_str().unwrap()], "");
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{source}: {}", text(&out.stderr));
        assert!(stdout.contains("job j: not started"), "{stdout}");
        match said {
            Some(s) => assert!(stdout.contains(s), "{stdout}"),
            None => assert!(!stdout.contains("source slot"), "{stdout}"),
        }
        assert!(!wh.exists() && !tmp.path().join("state").exists());
    }
}

/// The README's quick start, walked as a new user does: `init` a MariaDB -> Iceberg
/// job, change the port, make the account the docs give, `check`, `sync`, `status`,
/// then read the lake. Every step exits 0 and the lake equals the source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_quick_start_walks_through() {
    use mysql_async::prelude::Queryable;
    let db = lakeshift_tests::MariaDb::start().await;
    let mut c = db.conn(None).await;
    // docs/sources.md's account, as written there.
    let docs = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/sources.md"),
    )
    .unwrap();
    let account: Vec<&str> = docs
        .lines()
        .map(str::trim)
        .filter(|l| {
            l.starts_with("CREATE USER 'lakeshift'")
                || l.starts_with("GRANT ") && l.contains("'lakeshift'@'%'")
        })
        .map(|l| l.split("--").next().unwrap().trim())
        .collect();
    assert!(account.len() >= 3, "{account:?}");
    c.query_drop(
        "CREATE DATABASE shop; CREATE TABLE shop.orders (id INT PRIMARY KEY, total DECIMAL(10,2));
         INSERT INTO shop.orders VALUES (1, 9.50), (2, 20.00);",
    )
    .await
    .unwrap();
    for stmt in &account {
        c.query_drop(*stmt).await.unwrap();
    }
    let tmp = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| -> Output {
        Command::new(env!("CARGO_BIN_EXE_lakeshift"))
            .args(args)
            .current_dir(tmp.path())
            .env("SOURCE_PASSWORD", "change-me")
            .output()
            .unwrap()
    };
    let out = run(&["init", "--source", "mariadb", "--sink", "iceberg"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // What a user edits: the port, and the account the docs made.
    let job = text(&out.stdout)
        .replace("port: 3306", &format!("port: {}", db.port))
        .replace("username: repl", "username: lakeshift");
    std::fs::write(tmp.path().join("job.yaml"), job).unwrap();
    // A fresh server's anonymous account is matched first: check says so and what
    // to do; done as docs/sources.md says, the job can run.
    let out = run(&["check", "--config", "job.yaml"]);
    assert!(
        !out.status.success() && text(&out.stdout).contains("DROP USER ''@'localhost'"),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    c.query_drop("DROP USER ''@'localhost'").await.unwrap();
    let out = run(&["check", "--config", "job.yaml"]);
    assert!(
        out.status.success() && text(&out.stdout).contains("the job can run"),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let out = run(&["sync", "--config", "job.yaml", "--until-end"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run(&["status", "--config", "job.yaml"]);
    let status = text(&out.stdout);
    assert!(
        out.status.success() && status.contains("shop.orders"),
        "{status}"
    );
    let cat = runner::iceberg::Catalog::open(&runner::iceberg::CatalogConfig::local(
        tmp.path().join("warehouse"),
    ))
    .await
    .unwrap();
    let rows = lakeshift_tests::iceberg_text_rows(&cat, "shop", "orders", None)
        .await
        .unwrap_or_default();
    let want: Vec<Vec<Option<String>>> = vec![
        vec![Some("1".into()), Some("9.50".into())],
        vec![Some("2".into()), Some("20.00".into())],
    ];
    assert_eq!(rows, want, "{status}");
}
