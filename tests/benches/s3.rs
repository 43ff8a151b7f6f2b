//! Catch-up of a binlog backlog into an S3 warehouse (moto's S3 server, behind a
//! proxy that counts requests) against a local warehouse, in one run: rows/s, the
//! ratio, and HTTP requests per checkpoint. Each lake's row counts are checked
//! against the source.
//!
//! `cargo bench -p lakeshift-tests --bench s3` (LAKESHIFT_BENCH_ROWS row changes per
//! round, 200000 by default; LAKESHIFT_BENCH_EVERY checkpoint interval, 0.2 s; two
//! rounds, the order of the two sinks swapped).

use lakeshift_tests::{FaultProxy, MariaDb, S3Server};
use mysql_async::prelude::Queryable;
use std::path::Path;
use std::time::Instant;

const TABLES: usize = 5;

fn job(
    db: &MariaDb,
    dir: &Path,
    warehouse: &str,
    catalog: Option<&str>,
    server_id: u32,
) -> runner::sync::job::SyncJob {
    let catalog = catalog
        .map(|c| format!("  catalog: {c}\n"))
        .unwrap_or_default();
    let yaml = format!(
        "source:\n  type: mariadb\n  hostname: 127.0.0.1\n  port: {}\n  username: root\n  server-id: {server_id}\n  tables: ['bench\\..*']\nsink:\n  type: iceberg\n  warehouse: {warehouse}\n{catalog}pipeline:\n  name: bench\n  state: {}\n  checkpoint-interval-seconds: {}\n  progress-seconds: 0\n",
        db.port,
        dir.join("state").display(),
        std::env::var("LAKESHIFT_BENCH_EVERY").unwrap_or_else(|_| "0.2".into()),
    );
    runner::sync::job::parse(&yaml, |_| None).unwrap()
}

/// One `sync --until-end` in process: rows applied, seconds.
async fn run(job: &runner::sync::job::SyncJob) -> (u64, f64) {
    let t0 = Instant::now();
    let engine = runner::sync::engine::Engine::open(job.clone())
        .await
        .unwrap();
    let mut p = runner::sync::pipeline::Pipeline::new(job, engine);
    p.run(true).await.unwrap();
    (p.sink.rows, t0.elapsed().as_secs_f64())
}

/// The job's last checkpoint id (its state file).
fn checkpoint(dir: &Path) -> u64 {
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("state").join("checkpoint.json")).unwrap())
            .unwrap();
    v["checkpoint"].as_u64().unwrap_or(0)
}

async fn backlog(c: &mut mysql_async::Conn, changes: usize, round: i64) {
    let per = 1000usize;
    let mut done = 0;
    let mut k = 0usize;
    let mut next = 1_000_000 * (round + 1);
    while done < changes {
        let t = k % TABLES;
        let lo = ((k * 7919) % 19_000) as i64;
        let q = match k % 10 {
            0..=5 => format!(
                "UPDATE bench.t{t} SET a = a + 1, b = CONCAT(b, 'x') WHERE id > {lo} AND id <= {}",
                lo + per as i64
            ),
            6..=8 => {
                let v: Vec<String> = (0..per as i64)
                    .map(|i| format!("({}, 1, 'new')", next + i))
                    .collect();
                next += per as i64;
                format!("INSERT INTO bench.t{t} VALUES {}", v.join(","))
            }
            _ => format!(
                "DELETE FROM bench.t{t} WHERE id > {} AND id <= {}",
                next - 2 * per as i64,
                next - per as i64
            ),
        };
        c.query_drop(&q).await.unwrap();
        done += c.affected_rows() as usize;
        k += 1;
    }
}

async fn counts(cat: &runner::iceberg::Catalog) -> Vec<usize> {
    let mut out = Vec::new();
    for t in 0..TABLES {
        out.push(
            lakeshift_tests::iceberg_text_rows(cat, "bench", &format!("t{t}"), None)
                .await
                .map_or(0, |r| r.len()),
        );
    }
    out
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let changes: usize = std::env::var("LAKESHIFT_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (db, s3) = tokio::join!(MariaDb::start(), S3Server::start("bench"));
        let proxy = FaultProxy::start(s3.port).await;
        for (k, v) in s3.env() {
            std::env::set_var(k, v);
        }
        std::env::set_var("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{}", proxy.port));
        let mut c = db.conn(None).await;
        c.query_drop("CREATE DATABASE bench").await.unwrap();
        for t in 0..TABLES {
            c.query_drop(format!("CREATE TABLE bench.t{t} (id BIGINT PRIMARY KEY, a INT, b VARCHAR(200))")).await.unwrap();
            c.query_drop(format!("INSERT INTO bench.t{t} SELECT seq, seq % 100, CONCAT('row ', seq) FROM bench.seq_1_to_20000")).await.unwrap();
        }
        let tmp = tempfile::tempdir().unwrap();
        let (ld, sd) = (tmp.path().join("local"), tmp.path().join("s3"));
        let catalog = format!("sqlite://{}/catalog.db", tmp.path().display());
        let local = job(&db, &ld, &ld.join("wh").display().to_string(), None, 781);
        let remote = job(&db, &sd, "s3://bench/lake", Some(&catalog), 782);
        // The snapshots first.
        run(&local).await;
        run(&remote).await;
        let mut rows_out = Vec::new();
        for round in 0..2 {
            eprintln!("round {round}: a backlog of {changes} row changes over {TABLES} tables (60/30/10)...");
            backlog(&mut c, changes, round).await;
            let order: Vec<bool> = if round == 0 { vec![false, true] } else { vec![true, false] };
            for s3_side in order {
                if s3_side {
                    let (req0, cp0) = (proxy.requests(), checkpoint(&sd));
                    let (r, secs) = run(&remote).await;
                    let (req, cps) = (proxy.requests() - req0, checkpoint(&sd) - cp0);
                    rows_out.push((round, "S3 (moto) warehouse", r, secs, Some((req, cps))));
                } else {
                    let (r, secs) = run(&local).await;
                    rows_out.push((round, "local warehouse", r, secs, None));
                }
            }
        }
        // Each lake holds what the source holds.
        let mut want = Vec::new();
        for t in 0..TABLES {
            let n: u64 = c.query_first(format!("SELECT count(*) FROM bench.t{t}")).await.unwrap().unwrap();
            want.push(n as usize);
        }
        let lc = runner::iceberg::Catalog::open(&runner::iceberg::CatalogConfig::local(ld.join("wh"))).await.unwrap();
        let rc = runner::iceberg::Catalog::open(&runner::iceberg::CatalogConfig {
            name: "lakeshift".into(),
            warehouse: "s3://bench/lake".into(),
            uri: Some(catalog.clone()),
            s3_env: Some(s3.env_pairs()),
        })
        .await
        .unwrap();
        assert_eq!(counts(&lc).await, want, "the local lake's row counts");
        assert_eq!(counts(&rc).await, want, "the S3 lake's row counts");
        println!();
        println!("| round | catch-up into | row changes | seconds | rows/s | vs local, same round | HTTP requests | checkpoints | requests per checkpoint |");
        println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
        for (round, what, r, secs, req) in &rows_out {
            let local = rows_out
                .iter()
                .find(|x| x.0 == *round && x.4.is_none())
                .map(|x| x.2 as f64 / x.3)
                .unwrap();
            let rate = *r as f64 / secs;
            let (q, cps, per) = match req {
                Some((q, cps)) => (q.to_string(), cps.to_string(), format!("{:.1}", *q as f64 / (*cps).max(1) as f64)),
                None => ("".into(), "".into(), "".into()),
            };
            println!("| {round} | {what} | {r} | {secs:.2} | {rate:.0} | {:.2}x | {q} | {cps} | {per} |", rate / local);
        }
    });
}
