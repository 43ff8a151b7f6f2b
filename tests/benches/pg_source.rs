//! The PostgreSQL source's speed against PostgreSQL's own tools, in one run on one
//! throwaway server (`wal_level=logical`):
//!
//! - decode: a backlog of row changes read from the slot into Arrow batches (the
//!   in-process source) vs `pg_recvlogical` with the `test_decoding` plugin reading
//!   the same WAL from a slot of its own to `/dev/null`;
//! - snapshot: the initial copy (exported snapshot, COPY chunks into Arrow) vs
//!   `COPY (SELECT * FROM t) TO STDOUT` of the same tables through psql to `/dev/null`;
//! - catch-up: `lakeshift sync --until-end` of the backlog into a local Iceberg
//!   warehouse (rows/s and the ratio to pg_recvlogical).
//!
//! `cargo bench -p lakeshift-tests --bench pg_source` (LAKESHIFT_BENCH_ROWS row
//! changes, 300000 by default).

use lakeshift_tests::pgbench::{drop_slot, pg_bin, sync_once};
use lakeshift_tests::PgServer;
use runner::source::config::parse_job;
use runner::source::{Resume, SourceEvent};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

const TABLES: usize = 5;

fn job_text(port: u16, slot: &str, dir: &std::path::Path) -> String {
    format!(
        "source:\n  type: postgres\n  hostname: 127.0.0.1\n  port: {port}\n  username: postgres\n  database: bench\n  tables: ['bench\\..*']\n  slot: {slot}\n  snapshot-chunk-rows: 50000\nsink:\n  type: iceberg\n  warehouse: {}\npipeline:\n  name: {slot}\n  state: {}\n  checkpoint-interval-seconds: 5\n",
        dir.join("warehouse").display(),
        dir.join("state").display()
    )
}

/// Run the in-process source from `from` to the WAL's end: (row changes, snapshot
/// rows, seconds).
async fn drain(
    src: runner::source::config::Source,
    dir: &std::path::Path,
    from: Resume,
) -> (u64, u64, f64) {
    use runner::source::Source as _;
    let mut s = runner::source::pg::PgSource::new(Arc::new(src), dir.join("state"));
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let t0 = Instant::now();
    let task = s.start(from, true, tx);
    let (mut rows, mut snap) = (0u64, 0u64);
    while let Some(e) = rx.recv().await {
        match e {
            SourceEvent::Rows(b) => rows += b.num_rows() as u64,
            SourceEvent::SnapshotRows { rows: r, .. } => snap += r.num_rows() as u64,
            _ => {}
        }
    }
    task.await.unwrap().unwrap();
    (rows, snap, t0.elapsed().as_secs_f64())
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let changes: usize = std::env::var("LAKESHIFT_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let server = PgServer::start_with(&[
            "wal_level=logical",
            "max_replication_slots=10",
            "max_wal_senders=10",
            "max_wal_size=4GB",
        ])
        .await;
        let pg = server.create_db("bench").await;
        let mut ddl = String::from("CREATE SCHEMA bench;");
        for t in 0..TABLES {
            ddl.push_str(&format!(
                "CREATE TABLE bench.t{t} (id bigint PRIMARY KEY, a int, b text, c numeric(12,2), d timestamptz);"
            ));
        }
        pg.batch_execute(&ddl).await.unwrap();
        // Snapshot data: 200k rows per table.
        for t in 0..TABLES {
            pg.batch_execute(&format!(
                "INSERT INTO bench.t{t} SELECT g, g % 1000, 'row ' || g || ' of a table', g * 1.5, timestamptz '2024-01-01' + g * interval '1 second' FROM generate_series(1, 200000) g"
            ))
            .await
            .unwrap();
        }
        // Analyzed now: an autovacuum ANALYZE (a transaction with an id) running
        // while a slot is made holds the slot's creation until the next
        // running-transactions record (up to 15 s; seen once as a 20 s snapshot).
        pg.batch_execute("VACUUM ANALYZE").await.unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let snap_dir = tmp.path().join("snap");
        std::fs::create_dir_all(&snap_dir).unwrap();

        // Snapshot: lakeshift's initial copy (one session, then the default two side
        // by side) vs psql's COPY TO STDOUT.
        let snap1_dir = tmp.path().join("snap1");
        std::fs::create_dir_all(&snap1_dir).unwrap();
        let (_, src) = parse_job(
            &job_text(server.port, "snap1", &snap1_dir).replace(
                "  snapshot-chunk-rows: 50000\n",
                "  snapshot-chunk-rows: 50000\n  snapshot-parallel: 1\n",
            ),
            |_| None,
        )
        .unwrap();
        let (_, snap1_rows, snap1_secs) = drain(src, &snap1_dir, Resume::default()).await;
        assert_eq!(snap1_rows as usize, TABLES * 200_000, "every row read");
        drop_slot(&pg, "snap1").await;
        let (_, src) = parse_job(&job_text(server.port, "snap", &snap_dir), |_| None).unwrap();
        let (_, snap_rows, snap_secs) = drain(src, &snap_dir, Resume::default()).await;
        assert_eq!(snap_rows as usize, TABLES * 200_000, "every row read");
        let t0 = Instant::now();
        for t in 0..TABLES {
            let st = Command::new(pg_bin("psql"))
                .args(["-h", "127.0.0.1", "-p", &server.port.to_string(), "-U", "postgres", "-d", "bench", "-q"])
                .args(["-c", &format!("\\copy (SELECT * FROM bench.t{t}) TO '/dev/null'")])
                .status()
                .unwrap();
            assert!(st.success());
        }
        let copy_secs = t0.elapsed().as_secs_f64();
        pg.batch_execute("SELECT pg_drop_replication_slot('snap')").await.unwrap();

        // The backlog: slots first (test_decoding for pg_recvlogical, pgoutput for
        // lakeshift, both from the same point), then the changes.
        let dec_dir = tmp.path().join("decode");
        let (_, src) = parse_job(
            &job_text(server.port, "dec", &dec_dir).replace("  snapshot-chunk-rows: 50000\n", "  snapshot-chunk-rows: 50000\n  startup: {mode: latest}\n"),
            |_| None,
        )
        .unwrap();
        let _ = drain(src.clone(), &dec_dir, Resume::default()).await;
        // The sync job's first run: the snapshot into its warehouse, its slot made here.
        let sync_dir = tmp.path().join("sync");
        let job = runner::sync::job::parse(&job_text(server.port, "sync", &sync_dir), |_| None)
            .unwrap();
        sync_once(&job).await;
        pg.batch_execute("SELECT pg_create_logical_replication_slot('td', 'test_decoding')")
            .await
            .unwrap();
        let start: i64 = pg
            .query_one("SELECT (confirmed_flush_lsn - '0/0')::bigint FROM pg_replication_slots WHERE slot_name = 'dec'", &[])
            .await
            .unwrap()
            .get(0);
        eprintln!("preparing a backlog of {changes} row changes over {TABLES} tables (60% updates, 30% inserts, 10% deletes)...");
        let per_txn = 1000;
        let mut done = 0usize;
        let mut next_id = 1_000_000i64;
        let mut k = 0usize;
        while done < changes {
            let t = k % TABLES;
            let sql = match k % 10 {
                0..=5 => format!("UPDATE bench.t{t} SET a = a + 1, b = b || 'x' WHERE id > {} AND id <= {}", (k * 7919) % 190_000, (k * 7919) % 190_000 + per_txn),
                6..=8 => {
                    next_id += per_txn as i64;
                    format!("INSERT INTO bench.t{t} SELECT g, 1, 'new', 2.5, now() FROM generate_series({}, {}) g", next_id - per_txn as i64, next_id - 1)
                }
                _ => format!("DELETE FROM bench.t{t} WHERE id > {} AND id <= {}", next_id - 2 * per_txn as i64, next_id - per_txn as i64),
            };
            let n = pg.execute(sql.as_str(), &[]).await.unwrap() as usize;
            done += n;
            k += 1;
        }
        let end: String = pg.query_one("SELECT pg_current_wal_lsn()::text", &[]).await.unwrap().get(0);
        // pg_recvlogical with test_decoding, to /dev/null.
        let t0 = Instant::now();
        let st = Command::new(pg_bin("pg_recvlogical"))
            .args(["-h", "127.0.0.1", "-p", &server.port.to_string(), "-U", "postgres", "-d", "bench"])
            .args(["--slot", "td", "--start", "--endpos", &end, "-f", "/dev/null", "--no-loop"])
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "pg_recvlogical ran");
        let recv_secs = t0.elapsed().as_secs_f64();
        // lakeshift's source from the slot's start.
        let (rows, _, dec_secs) = drain(
            src,
            &dec_dir,
            Resume {
                position: Some(runner::source::pg::lsn_position(start as u64, 0)),
                snapshot: None,
            },
        )
        .await;
        assert_eq!(rows as usize, done, "every row change decoded");

        // The catch-up: the sync job's second run, over the backlog.
        let t0 = Instant::now();
        let synced = sync_once(&job).await;
        let sync_secs = t0.elapsed().as_secs_f64();
        assert_eq!(synced as usize, done, "every row change synced");
        // The lake holds what the source holds.
        let cat = runner::iceberg::Catalog::open(&runner::iceberg::CatalogConfig::local(
            sync_dir.join("warehouse"),
        ))
        .await
        .unwrap();
        for t in 0..TABLES {
            let want: i64 = pg
                .query_one(&format!("SELECT count(*) FROM bench.t{t}"), &[])
                .await
                .unwrap()
                .get(0);
            let got = lakeshift_tests::iceberg_text_rows(&cat, "bench", &format!("t{t}"), None)
                .await
                .unwrap();
            assert_eq!(got.len() as i64, want, "bench.t{t} row count");
        }

        println!();
        println!("| path | rows | seconds | rows/s | vs baseline |");
        println!("|---|---:|---:|---:|---:|");
        let recv_rate = done as f64 / recv_secs;
        println!("| pg_recvlogical, test_decoding -> /dev/null (baseline) | {done} | {recv_secs:.2} | {recv_rate:.0} | 1.00x |");
        let r = rows as f64 / dec_secs;
        println!("| lakeshift pgoutput -> Arrow | {rows} | {dec_secs:.2} | {r:.0} | {:.2}x |", r / recv_rate);
        let c = done as f64 / sync_secs;
        println!("| lakeshift sync -> Iceberg (catch-up, position deletes, checkpoints every 5 s) | {done} | {sync_secs:.2} | {c:.0} | {:.2}x |", c / recv_rate);
        println!();
        let copy_rate = snap_rows as f64 / copy_secs;
        println!("| snapshot | rows | seconds | rows/s | vs baseline |");
        println!("|---|---:|---:|---:|---:|");
        println!("| psql COPY (SELECT * ...) TO STDOUT -> /dev/null (baseline) | {snap_rows} | {copy_secs:.2} | {copy_rate:.0} | 1.00x |");
        let s1 = snap1_rows as f64 / snap1_secs;
        println!("| lakeshift snapshot, 1 session (exported snapshot, COPY chunks) -> Arrow | {snap1_rows} | {snap1_secs:.2} | {s1:.0} | {:.2}x |", s1 / copy_rate);
        let s = snap_rows as f64 / snap_secs;
        println!("| lakeshift snapshot, 2 sessions (snapshot-parallel default) -> Arrow | {snap_rows} | {snap_secs:.2} | {s:.0} | {:.2}x |", s / copy_rate);
    });
}
