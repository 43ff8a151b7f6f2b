//! `lakeshift sync` from a PostgreSQL source (logical replication, pgoutput) against a
//! throwaway PostgreSQL with `wal_level=logical`: snapshot, then the stream with its
//! DDL (through `lakeshift pg-setup`'s event trigger), a SIGKILL and a restart, into
//! an Iceberg warehouse read back with the iceberg crate.

use lakeshift_tests::PgServer;
use runner::iceberg::{Catalog, CatalogConfig};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

type Rows = Vec<Vec<Option<String>>>;

fn job(dir: &Path, port: u16) -> std::path::PathBuf {
    let p = dir.join("job.yaml");
    std::fs::write(
        &p,
        format!(
            "source:\n  type: postgres\n  hostname: 127.0.0.1\n  port: {port}\n  username: postgres\n  database: app\n  tables: ['shop\\..*']\n  slot: mirror\n  snapshot-chunk-rows: 50\nsink:\n  type: iceberg\n  warehouse: {}\npipeline:\n  name: mirror\n  state: {}\n  checkpoint-interval-seconds: 0.1\n",
            dir.join("warehouse").display(),
            dir.join("state").display()
        ),
    )
    .unwrap();
    p
}

fn lakeshift(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_lakeshift"))
        .args(args)
        .output()
        .unwrap()
}

fn spawn(job: &Path, until_end: bool) -> Child {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lakeshift"));
    c.args(["sync", "--config", &job.display().to_string()]);
    if until_end {
        c.arg("--until-end");
        c.stderr(Stdio::piped());
    } else {
        // A job that runs on: its log in a file beside the job file.
        let log = std::fs::File::create(job.with_extension("log")).unwrap();
        c.stderr(log);
    }
    c.stdout(Stdio::null()).spawn().unwrap()
}

fn finish(c: Child) -> String {
    let out = c.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "sync failed: {log}");
    log
}

/// Each table's rows in PostgreSQL, in the text Arrow's display gives the Iceberg
/// side (uuid and bytea as hex, timestamps as UTC with a `Z`... per column below).
async fn source(pg: &tokio_postgres::Client, sql: &str) -> Rows {
    lakeshift_tests::pg_text_rows(pg, sql).await
}

async fn lake(dir: &Path, table: &str) -> Option<Rows> {
    let cat = Catalog::open(&CatalogConfig::local(dir.join("warehouse")))
        .await
        .unwrap();
    lakeshift_tests::iceberg_text_rows(&cat, "shop", table, None).await
}

/// The comparable projection of each table (the columns it has at that point).
const ITEMS_BEFORE: &str = "SELECT id::text, name, price::text, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') || 'Z', flag::text, replace(u::text, '-', ''), encode(data, 'hex'), j::text FROM shop.items";
const ITEMS_AFTER: &str = "SELECT id::text, title, price::text, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') || 'Z', flag::text, replace(u::text, '-', ''), encode(data, 'hex'), j::text, qty::text FROM shop.items";
// (Arrow prints whole doubles with `.0`.)
const NOKEY: &str = "SELECT k::text, v, CASE WHEN f::text ~ '^-?[0-9]+$' THEN f::text || '.0' ELSE f::text END FROM shop.nokey";
const FRESH: &str = "SELECT id::text, note FROM shop.fresh";

/// Iceberg's timestamps print with 6 fraction digits only when needed; the source
/// projection always has 6: align the lake side.
fn norm(rows: Rows) -> Rows {
    let mut rows: Rows = rows
        .into_iter()
        .map(|r| {
            r.into_iter()
                .map(|v| {
                    v.map(|s| {
                        if s.len() >= 19 && s.as_bytes()[4] == b'-' && s.ends_with('Z') {
                            let body = &s[..s.len() - 1];
                            let (sec, frac) = body.split_once('.').unwrap_or((body, ""));
                            format!("{sec}.{frac:0<6}Z")
                        } else {
                            s
                        }
                    })
                })
                .collect()
        })
        .collect();
    rows.sort();
    rows
}

async fn converged(pg: &tokio_postgres::Client, dir: &Path, checks: &[(&str, &str)]) -> bool {
    for (t, sql) in checks {
        let want = source(pg, sql).await;
        match lake(dir, t).await {
            Some(got) if norm(got.clone()) == want => {}
            _ => return false,
        }
    }
    true
}

async fn assert_converges(
    pg: &tokio_postgres::Client,
    dir: &Path,
    checks: &[(&str, &str)],
    what: &str,
    log: impl Fn() -> String,
) {
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while !converged(pg, dir, checks).await {
        if std::time::Instant::now() > deadline {
            for (t, sql) in checks {
                let want = source(pg, sql).await;
                let got = lake(dir, t).await.map(norm).unwrap_or_default();
                if got != want {
                    let only = |a: &Rows, b: &Rows| -> Rows {
                        a.iter()
                            .filter(|r| !b.contains(r))
                            .take(5)
                            .cloned()
                            .collect()
                    };
                    panic!(
                        "{what}: shop.{t}: {} rows in Iceberg, {} in PostgreSQL\n  only in Iceberg: {:?}\n  only in PostgreSQL: {:?}\n{}",
                        got.len(),
                        want.len(),
                        only(&got, &want),
                        only(&want, &got),
                        log()
                    );
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_database_mirrors_into_iceberg_with_its_ddl_through_a_kill() {
    let server = PgServer::start_logical().await;
    let pg = server.create_db("app").await;
    pg.batch_execute(
        "CREATE SCHEMA shop;
         CREATE TABLE shop.items (id bigint PRIMARY KEY, name text, price numeric(10,2),
           at timestamptz, flag boolean, u uuid, data bytea, j jsonb);
         CREATE TABLE shop.nokey (k int, v text, f double precision);
         ALTER TABLE shop.nokey REPLICA IDENTITY FULL;
         CREATE TABLE other (id int PRIMARY KEY);
         INSERT INTO shop.items SELECT g, 'item ' || g || E'\\t''q''\\n', g * 1.25,
           timestamptz '2024-02-29 13:45:00.5+05:30' + g * interval '1 day', g % 2 = 0,
           md5(g::text)::uuid, decode('00ff' || lpad(to_hex(g), 4, '0'), 'hex'),
           jsonb_build_object('g', g)
           FROM generate_series(1, 120) g;
         INSERT INTO shop.items VALUES (0, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
         INSERT INTO shop.nokey VALUES (1, 'x', 1.0), (1, 'x', 1.0), (1, 'x', 2.0), (2, NULL, 'NaN');",
    )
    .await
    .unwrap();

    let tmp = tempfile::tempdir().unwrap();
    let keep = std::env::var_os("LAKESHIFT_KEEP").is_some();
    let dir = &if keep {
        tmp.keep()
    } else {
        tmp.path().to_path_buf()
    };
    if keep {
        eprintln!("keeping {}", dir.display());
    }
    let job = job(dir, server.port);
    let jobs = job.display().to_string();
    // The DDL capture: printed, then installed.
    let printed = lakeshift(&["pg-setup", "--config", &jobs]);
    assert!(printed.status.success());
    assert!(String::from_utf8_lossy(&printed.stdout).contains("ddl_command_end"));
    let applied = lakeshift(&["pg-setup", "--config", &jobs, "--apply"]);
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );

    // Snapshot (the exported snapshot of the slot), then the stream to its end.
    let log = finish(spawn(&job, true));
    let before = [("items", ITEMS_BEFORE), ("nokey", NOKEY)];
    assert_converges(&pg, dir, &before, "after the snapshot", || log.clone()).await;

    // Changes while the job runs: every kind of row change, DDL, truncate, a new table.
    let mut running = spawn(&job, false);
    pg.batch_execute(
        "INSERT INTO shop.items (id, name, price) VALUES (200, 'new', 9.99), (201, 'newer', 0.01);
         UPDATE shop.items SET price = price + 1, j = '{\"x\": [1, 2]}' WHERE id = 1;
         DELETE FROM shop.items WHERE id = 2;
         UPDATE shop.items SET id = 3000 WHERE id = 3;
         BEGIN;
         INSERT INTO shop.nokey VALUES (3, 'y', 3.5);
         DELETE FROM shop.nokey WHERE ctid = (SELECT ctid FROM shop.nokey WHERE k = 1 AND f = 1.0 LIMIT 1);
         UPDATE shop.nokey SET v = 'z' WHERE k = 2;
         COMMIT;",
    )
    .await
    .unwrap();
    pg.batch_execute("ALTER TABLE shop.items ADD COLUMN qty int DEFAULT 7")
        .await
        .unwrap();
    pg.batch_execute("ALTER TABLE shop.items RENAME COLUMN name TO title")
        .await
        .unwrap();
    pg.batch_execute(
        "INSERT INTO shop.items (id, title, qty) VALUES (300, 'after ddl', 1);
         UPDATE shop.items SET title = 'renamed ' || id WHERE id < 5;
         TRUNCATE shop.nokey;
         INSERT INTO shop.nokey VALUES (9, 'after truncate', -0.5);
         CREATE TABLE shop.fresh (id int PRIMARY KEY, note text);
         INSERT INTO shop.fresh VALUES (1, 'one'), (2, 'two');
         INSERT INTO other VALUES (1);",
    )
    .await
    .unwrap();
    let after = [("items", ITEMS_AFTER), ("nokey", NOKEY), ("fresh", FRESH)];
    let running_log = || std::fs::read_to_string(job.with_extension("log")).unwrap_or_default();
    assert_converges(&pg, dir, &after, "while running", running_log).await;

    // The slot's confirmed position follows the job's commits.
    let confirmed = || async {
        pg.query_one(
            "SELECT (confirmed_flush_lsn - '0/0')::bigint FROM pg_replication_slots WHERE slot_name = 'mirror'",
            &[],
        )
        .await
        .unwrap()
        .get::<_, i64>(0)
    };
    let c1 = confirmed().await;
    pg.batch_execute("INSERT INTO shop.fresh VALUES (3, 'three')")
        .await
        .unwrap();
    lakeshift_tests::wait_until("the slot confirms the job's newer commit", || async {
        confirmed().await > c1
    })
    .await;

    // SIGKILL in the middle of a stream of transactions, then a restart: exact.
    let writer = {
        let pg2 = server.client("app").await;
        tokio::spawn(async move {
            for i in 0..200 {
                pg2.batch_execute(&format!(
                    "BEGIN; INSERT INTO shop.fresh VALUES ({}, 'burst'); UPDATE shop.items SET qty = qty + 1 WHERE id = 1; DELETE FROM shop.fresh WHERE id = {}; COMMIT;",
                    1000 + i,
                    999 + i
                ))
                .await
                .unwrap();
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    running.kill().unwrap();
    let _ = running.wait();
    writer.await.unwrap();
    let log = finish(spawn(&job, true));
    assert_converges(&pg, dir, &after, "after the kill and a restart", || {
        log.clone()
    })
    .await;
}
