//! The change source's speed against the server's own tools, on one backlog, in one
//! run: binlog row changes decoded into Arrow vs `mariadb-binlog -v
//! --base64-output=DECODE-ROWS` reading the same binlog remotely, and snapshot rows
//! into Arrow vs a raw `SELECT *` stream of the mariadb client.
//!
//! `cargo bench -p lakeshift-tests --bench source` (ROWS=1000000 by default; set
//! LAKESHIFT_BENCH_ROWS for a smaller backlog).

use lakeshift_tests::MariaDb;
use mysql_async::prelude::Queryable;
use runner::source::binlog::{BinlogReader, ReadFrom};
use runner::source::config::parse_job;
use runner::source::history::SchemaHistory;
use runner::source::position::Position;
use runner::source::run::{run, RunOptions};
use runner::source::SourceEvent;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

const TABLES: usize = 10;
const PER_STMT: usize = 1000;

async fn backlog(db: &MariaDb, changes: usize) -> (Position, usize) {
    let mut c = db.conn(None).await;
    c.query_drop("CREATE DATABASE bench").await.unwrap();
    for t in 0..TABLES {
        c.query_drop(format!(
            "CREATE TABLE bench.t{t} (id BIGINT NOT NULL PRIMARY KEY, a INT, b VARCHAR(40), c DECIMAL(12,2), d DATETIME(3), e DOUBLE) DEFAULT CHARSET=utf8mb4"
        ))
        .await
        .unwrap();
    }
    let row: mysql_async::Row = c.query_first("SHOW MASTER STATUS").await.unwrap().unwrap();
    let start = Position::new(row.get::<String, _>(0).unwrap(), row.get(1).unwrap());
    // 60% inserts, 30% updates, 10% deletes, in statements of PER_STMT rows.
    let inserts = changes * 6 / 10;
    let per_table = inserts / TABLES;
    let mut done = 0;
    for t in 0..TABLES {
        let mut id = 0;
        while id < per_table {
            let n = PER_STMT.min(per_table - id);
            let values: Vec<String> = (id..id + n)
                .map(|i| {
                    format!(
                        "({i},{i},'row {i} of table {t}',{i}.25,'2024-05-06 07:08:09.123',{i}.5)"
                    )
                })
                .collect();
            c.query_drop(format!(
                "INSERT INTO bench.t{t} VALUES {}",
                values.join(",")
            ))
            .await
            .unwrap();
            id += n;
            done += n;
        }
    }
    let updates = changes * 3 / 10 / TABLES;
    let deletes = changes / 10 / TABLES;
    for t in 0..TABLES {
        let mut id = 0;
        while id < updates {
            let n = PER_STMT.min(updates - id);
            c.query_drop(format!(
                "UPDATE bench.t{t} SET a = a + 1, b = CONCAT(b, '!') WHERE id >= {id} AND id < {}",
                id + n
            ))
            .await
            .unwrap();
            id += n;
            done += n;
        }
        let mut id = 0;
        while id < deletes {
            let n = PER_STMT.min(deletes - id);
            let from = per_table - deletes + id;
            c.query_drop(format!(
                "DELETE FROM bench.t{t} WHERE id >= {from} AND id < {}",
                from + n
            ))
            .await
            .unwrap();
            id += n;
            done += n;
        }
    }
    (start, done)
}

fn job(db: &MariaDb) -> runner::source::config::Source {
    let yaml = format!(
        "source:\n  type: mariadb\n  hostname: 127.0.0.1\n  port: {}\n  username: root\n  server-id: 777\n  tables: ['bench\\..*']\n  startup: {{mode: initial}}\n",
        db.port
    );
    parse_job(&yaml, |_| None).unwrap().1
}

async fn lakeshift_binlog(db: &MariaDb, from: &Position) -> (u64, f64) {
    let src = Arc::new(job(db));
    // The schema as of the start: definitions now (no DDL in the backlog).
    let mut c = db.conn(None).await;
    let defs = runner::source::snapshot::read_definitions(&mut c)
        .await
        .unwrap();
    let history = SchemaHistory::create(
        None,
        from,
        defs.into_iter().map(|(d, _, _, ddl)| (d, ddl)).collect(),
    )
    .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let t0 = Instant::now();
    let from = from.clone();
    let task = tokio::spawn(async move {
        let mut r = BinlogReader::new(src, history, tx);
        r.run(ReadFrom::Position(from), true).await.unwrap();
        r.rows_decoded
    });
    let mut rows = 0u64;
    while let Some(e) = rx.recv().await {
        if let SourceEvent::Rows(b) = e {
            rows += b.num_rows() as u64;
        }
    }
    let decoded = task.await.unwrap();
    assert_eq!(decoded, rows);
    (rows, t0.elapsed().as_secs_f64())
}

fn mariadb_binlog(db: &MariaDb, file: &str) -> f64 {
    let t0 = Instant::now();
    let st = Command::new("mariadb-binlog")
        .args([
            "--read-from-remote-server",
            "--host=127.0.0.1",
            &format!("--port={}", db.port),
            "--user=root",
            "-v",
            "--base64-output=DECODE-ROWS",
            file,
        ])
        .stdout(Stdio::null())
        .status()
        .expect("mariadb-binlog runs");
    assert!(st.success());
    t0.elapsed().as_secs_f64()
}

/// The whole sync engine catching up on the backlog into a local Iceberg warehouse.
async fn lakeshift_sync(db: &MariaDb, from: &Position) -> (u64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "source:\n  type: mariadb\n  hostname: 127.0.0.1\n  port: {}\n  username: root\n  server-id: 778\n  tables: ['bench\\..*']\n  startup: {{mode: position, position: '{from}'}}\nsink:\n  type: iceberg\n  warehouse: {}\npipeline:\n  name: bench\n  state: {}\n  checkpoint-interval-seconds: 5\n",
        db.port,
        dir.path().join("wh").display(),
        dir.path().join("state").display()
    );
    let job = runner::sync::job::parse(&yaml, |_| None).unwrap();
    let t0 = Instant::now();
    let mut engine = runner::sync::engine::Engine::open(job).await.unwrap();
    engine.run(true).await.unwrap();
    (engine.rows, t0.elapsed().as_secs_f64())
}

async fn lakeshift_snapshot(db: &MariaDb) -> (u64, f64) {
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let t0 = Instant::now();
    let task = tokio::spawn(run(
        Arc::new(job(db)),
        RunOptions {
            state_dir: None,
            resume: None,
            by_gtid: false,
            stop_at_end: true,
            snapshot_resume: None,
        },
        tx,
    ));
    let mut rows = 0u64;
    let mut elapsed = 0.0;
    while let Some(e) = rx.recv().await {
        match e {
            SourceEvent::SnapshotRows { rows: r, .. } => rows += r.num_rows() as u64,
            SourceEvent::SnapshotDone { .. } => {
                elapsed = t0.elapsed().as_secs_f64();
                break;
            }
            _ => {}
        }
    }
    drop(rx);
    let _ = task.await;
    (rows, elapsed)
}

fn raw_select(db: &MariaDb) -> (u64, f64) {
    // One client process streaming every table (--quick: row by row, no buffering).
    let all: Vec<String> = (0..TABLES)
        .map(|t| format!("SELECT * FROM bench.t{t}"))
        .collect();
    let t0 = Instant::now();
    let out = Command::new("mariadb")
        .args([
            "--host=127.0.0.1",
            &format!("--port={}", db.port),
            "--user=root",
            "--quick",
            "--batch",
            "--skip-column-names",
            "-e",
            &all.join(";"),
        ])
        .output()
        .expect("mariadb runs");
    let secs = t0.elapsed().as_secs_f64();
    assert!(out.status.success());
    let rows = out.stdout.iter().filter(|b| **b == b'\n').count() as u64;
    (rows, secs)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let changes: usize = std::env::var("LAKESHIFT_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let db = MariaDb::start().await;
        eprintln!("preparing a backlog of {changes} row changes over {TABLES} tables (60/30/10)...");
        let (start, done) = backlog(&db, changes).await;
        let (rows, secs) = lakeshift_binlog(&db, &start).await;
        assert_eq!(rows as usize, done, "every row change decoded");
        let mb_secs = mariadb_binlog(&db, &start.file);
        let (sync_rows, sync_secs) = lakeshift_sync(&db, &start).await;
        assert_eq!(sync_rows as usize, done, "every row change synced");
        let (srows, ssecs) = lakeshift_snapshot(&db).await;
        let (rrows, rsecs) = raw_select(&db);
        assert_eq!(srows, rrows, "snapshot rows");
        println!();
        println!("| path | rows | seconds | rows/s | vs baseline |");
        println!("|---|---:|---:|---:|---:|");
        let rate = rows as f64 / secs;
        let mb_rate = rows as f64 / mb_secs;
        println!("| mariadb-binlog -v --base64-output=DECODE-ROWS (baseline) | {rows} | {mb_secs:.2} | {mb_rate:.0} | 1.00x |");
        println!("| lakeshift binlog -> Arrow | {rows} | {secs:.2} | {rate:.0} | {:.2}x |", rate / mb_rate);
        let sync_rate = sync_rows as f64 / sync_secs;
        println!("| lakeshift sync -> Iceberg (catch-up) | {sync_rows} | {sync_secs:.2} | {sync_rate:.0} | {:.2}x |", sync_rate / mb_rate);
        let srate = srows as f64 / ssecs;
        let rrate = rrows as f64 / rsecs;
        println!("| mariadb --quick SELECT * (baseline) | {rrows} | {rsecs:.2} | {rrate:.0} | 1.00x |");
        println!("| lakeshift snapshot -> Arrow | {srows} | {ssecs:.2} | {srate:.0} | {:.2}x |", srate / rrate);
    });
}
