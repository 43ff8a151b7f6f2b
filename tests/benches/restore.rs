//! The relational sink's speed against two baselines, on one backlog, in one run:
//!
//! - lakeshift: `sync` (MariaDB binlog -> PostgreSQL), changes folded per key and
//!   applied as multi-row upserts and deletes, one target transaction per checkpoint
//!   (checkpoints every 2 s, and as often as the source reports a boundary);
//! - row by row: the same changes as one statement each (INSERT / UPDATE / DELETE by
//!   key), a transaction per 1000, sent by one client (what a plain JDBC-style sink
//!   does);
//! - COPY: the final rows loaded with PostgreSQL's `COPY FROM STDIN` (the bulk-load
//!   floor: no changes, only the end state).
//!
//! `cargo bench -p lakeshift-tests --bench restore` (200000 changes by default; set
//! LAKESHIFT_BENCH_ROWS; LAKESHIFT_BENCH_ROW_BY_ROW=0 leaves the slow row-by-row
//! baseline out; LAKESHIFT_BENCH_INTERVAL sets the first lakeshift row's checkpoint
//! interval in seconds, 2 by default; LAKESHIFT_BENCH_BUDGET the jobs'
//! memory-budget-mib, 256 by default).

use futures::SinkExt;
use lakeshift_tests::{MariaDb, PgServer};
use mysql_async::prelude::Queryable;
use std::time::Instant;

const TABLES: usize = 4;
const PER_STMT: usize = 1000;

fn row(t: usize, i: usize, v: usize) -> String {
    format!("({i},{v},'row {i} of table {t}, version {v}',{i}.25,'2024-05-06 07:08:09')")
}

/// The backlog as MariaDB statements, and the same changes one statement each for
/// PostgreSQL (in order).
fn workload(changes: usize) -> (Vec<String>, Vec<String>) {
    let (mut my, mut pg) = (Vec::new(), Vec::new());
    let inserts = changes * 6 / 10 / TABLES;
    let updates = changes * 3 / 10 / TABLES;
    let deletes = changes / 10 / TABLES;
    for t in 0..TABLES {
        let mut id = 0;
        while id < inserts {
            let n = PER_STMT.min(inserts - id);
            let rows: Vec<String> = (id..id + n).map(|i| row(t, i, 0)).collect();
            my.push(format!("INSERT INTO bench.t{t} VALUES {}", rows.join(",")));
            for r in rows {
                pg.push(format!("INSERT INTO bench.t{t} VALUES {r}"));
            }
            id += n;
        }
    }
    for t in 0..TABLES {
        // Updates of the first `updates` keys, PER_STMT per statement.
        let mut id = 0;
        while id < updates {
            let n = PER_STMT.min(updates - id);
            my.push(format!(
                "UPDATE bench.t{t} SET a = a + 1, b = CONCAT(b, '+') WHERE id >= {id} AND id < {}",
                id + n
            ));
            for i in id..id + n {
                pg.push(format!(
                    "UPDATE bench.t{t} SET a = a + 1, b = b || '+' WHERE id = {i}"
                ));
            }
            id += n;
        }
        // Deletes of the last `deletes` keys.
        let from = inserts - deletes;
        my.push(format!("DELETE FROM bench.t{t} WHERE id >= {from}"));
        for i in from..inserts {
            pg.push(format!("DELETE FROM bench.t{t} WHERE id = {i}"));
        }
    }
    (my, pg)
}

const DDL: &str =
    "(id BIGINT NOT NULL PRIMARY KEY, a INT, b VARCHAR(60), c DECIMAL(12,2), d TIMESTAMP(0))";

async fn table_sums(pg: &tokio_postgres::Client) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    for t in 0..TABLES {
        let r = pg
            .query_one(
                &format!("SELECT count(*), coalesce(sum(a), 0)::bigint FROM bench.t{t}"),
                &[],
            )
            .await
            .unwrap();
        out.push((r.get(0), r.get(1)));
    }
    out
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let changes: usize = std::env::var("LAKESHIFT_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let (src, pgs) = tokio::join!(MariaDb::start(), PgServer::start());
    let mut c = src.conn(None).await;
    c.query_drop("CREATE DATABASE bench").await.unwrap();
    for t in 0..TABLES {
        c.query_drop(format!(
            "CREATE TABLE bench.t{t} (id BIGINT NOT NULL PRIMARY KEY, a INT, b VARCHAR(60), c DECIMAL(12,2), d DATETIME)"
        ))
        .await
        .unwrap();
    }
    // The job reads the binlog from here (the changes themselves, not a snapshot).
    let start = runner::source::snapshot::current_position(&mut c)
        .await
        .unwrap();
    let (my, pg_stmts) = workload(changes);
    for s in &my {
        c.query_drop(s).await.unwrap();
    }
    let total: usize = pg_stmts.len();

    // lakeshift: the whole backlog, from where it starts in the binlog; once with a
    // checkpoint every 2 s (a catch-up folds much of it), once with the interval near
    // zero (a checkpoint at every transaction boundary the source reports).
    let mut lakeshift = Vec::new();
    let first = std::env::var("LAKESHIFT_BENCH_INTERVAL").unwrap_or_else(|_| "2".into());
    for (db, interval) in [("ls", first.as_str()), ("ls_txn", "0.000001")] {
        let client = pgs.create_db(db).await;
        let dir = tempfile::tempdir().unwrap();
        let yaml = format!(
            "source:\n  type: mariadb\n  hostname: 127.0.0.1\n  port: {}\n  username: root\n  server-id: 901\n  tables: ['bench\\..*']\n  startup:\n    mode: position\n    position: {}\nsink:\n  type: postgres\n  url: postgres://postgres@127.0.0.1:{}/{db}\npipeline:\n  name: bench\n  state: {}\n  checkpoint-interval-seconds: {interval}\n  progress-seconds: 0\n  memory-budget-mib: {}\n",
            src.port,
            start,
            pgs.port,
            dir.path().join("state").display(),
            std::env::var("LAKESHIFT_BENCH_BUDGET").unwrap_or_else(|_| "256".into())
        );
        let job = runner::sync::job::parse(&yaml, |_| None).expect("bench job");
        let t0 = Instant::now();
        let engine = runner::sync::rdb::RdbEngine::open(job.clone())
            .await
            .unwrap();
        let mut p = runner::sync::pipeline::Pipeline::new(&job, engine);
        p.run(true).await.unwrap();
        lakeshift.push((t0.elapsed().as_secs_f64(), p.sink.commits, client));
    }
    let lakeshift_s = lakeshift[0].0;

    // Row by row: the same changes, a statement each, 1000 per transaction.
    let row_by_row = std::env::var("LAKESHIFT_BENCH_ROW_BY_ROW").as_deref() != Ok("0");
    let rbr = pgs.create_db("rbr").await;
    rbr.batch_execute("CREATE SCHEMA bench").await.unwrap();
    for t in 0..TABLES {
        rbr.batch_execute(&format!("CREATE TABLE bench.t{t} {DDL}"))
            .await
            .unwrap();
    }
    let t0 = Instant::now();
    let replayed = if row_by_row { &pg_stmts[..] } else { &[] };
    for chunk in replayed.chunks(1000) {
        // One round trip per statement, as a sink issuing statements one by one.
        rbr.batch_execute("BEGIN").await.unwrap();
        for x in chunk {
            rbr.execute(x.as_str(), &[]).await.unwrap();
        }
        rbr.batch_execute("COMMIT").await.unwrap();
    }
    let rbr_s = t0.elapsed().as_secs_f64();

    // COPY: the final rows, read from MariaDB as text, loaded in one COPY per table.
    let cp = pgs.create_db("cp").await;
    cp.batch_execute("CREATE SCHEMA bench").await.unwrap();
    let mut final_rows = 0usize;
    let t0 = Instant::now();
    for t in 0..TABLES {
        cp.batch_execute(&format!("CREATE TABLE bench.t{t} {DDL}"))
            .await
            .unwrap();
        let rows: Vec<(i64, i32, String, String, String)> = c
            .query(format!(
                "SELECT id, a, b, CAST(c AS CHAR), CAST(d AS CHAR) FROM bench.t{t}"
            ))
            .await
            .unwrap();
        final_rows += rows.len();
        let mut text = String::new();
        for (id, a, b, cc, d) in rows {
            text.push_str(&format!("{id}\t{a}\t{b}\t{cc}\t{d}\n"));
        }
        let sink = cp
            .copy_in(&format!("COPY bench.t{t} FROM STDIN"))
            .await
            .unwrap();
        let mut sink = Box::pin(sink);
        sink.send(std::io::Cursor::new(text.into_bytes()))
            .await
            .unwrap();
        sink.as_mut().finish().await.unwrap();
    }
    let copy_s = t0.elapsed().as_secs_f64();

    // All three end equal (row counts and a column sum per table).
    let (a, b, cc) = (
        table_sums(&lakeshift[0].2).await,
        table_sums(&rbr).await,
        table_sums(&cp).await,
    );
    if row_by_row {
        assert_eq!(a, b, "lakeshift and row-by-row differ");
    }
    assert_eq!(a, cc, "lakeshift and COPY differ");
    assert_eq!(
        a,
        table_sums(&lakeshift[1].2).await,
        "lakeshift per transaction differs"
    );

    println!(
        "\n{total} row changes ({TABLES} tables: 60% inserts, 30% updates, 10% deletes) -> {final_rows} rows in PostgreSQL\n"
    );
    println!(
        "{:<48} {:>9} {:>12} {:>16}",
        "method", "seconds", "changes/s", "time / lakeshift"
    );
    let label = |i: usize, what: &str| format!("lakeshift, {what} ({} commits)", lakeshift[i].1);
    for (name, s) in [
        (
            label(0, &format!("checkpoints every {first} s")),
            lakeshift_s,
        ),
        (label(1, "checkpoints ~0 s apart"), lakeshift[1].0),
        ("row by row (a statement per change)".to_owned(), rbr_s),
        (
            "COPY of the final rows (bulk-load floor)".to_owned(),
            copy_s,
        ),
    ] {
        if !row_by_row && name.starts_with("row by row") {
            continue;
        }
        println!(
            "{name:<48} {s:>9.2} {:>12.0} {:>16.2}",
            total as f64 / s,
            s / lakeshift_s
        );
    }
}
