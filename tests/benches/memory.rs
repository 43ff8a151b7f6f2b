//! Peak resident memory of `lakeshift sync` against its `memory-budget-mib`, for one
//! huge source transaction and for many tables, into Iceberg and into PostgreSQL, and
//! for updates of that transaction's rows into Iceberg (the table's row index built).
//! Each run is the sync pipeline in a process of its own (this binary again, as
//! `lakeshift sync` runs it): its peak RSS (VmHWM) against its RSS just before the
//! pipeline starts (the runtime and libraries loaded).
//!
//! `cargo bench -p lakeshift-tests --bench memory` (LAKESHIFT_BENCH_ROWS rows in one
//! transaction, 2000000 by default; LAKESHIFT_BENCH_TABLES tables of 1000 rows each,
//! 300 by default, each in a transaction of its own; LAKESHIFT_BENCH_BUDGET MiB, 64 by default;
//! LAKESHIFT_BENCH_WRAP a command each run goes under, e.g. `valgrind --tool=massif`).

use lakeshift_tests::{MariaDb, PgServer};
use mysql_async::prelude::Queryable;
use runner::sync::pipeline::Pipeline;
use std::path::{Path, PathBuf};
use std::time::Instant;

fn job(dir: &Path, port: u16, server_id: u32, sink: &str, budget: u64, db: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join("job.yaml");
    std::fs::write(
        &p,
        format!(
            "source:\n  type: mariadb\n  hostname: 127.0.0.1\n  port: {port}\n  username: root\n  server-id: {server_id}\n  tables: ['{db}\\..*']\nsink:\n{sink}pipeline:\n  name: mem\n  state: {}\n  checkpoint-interval-seconds: 5\n  memory-budget-mib: {budget}\n  progress-seconds: 0\n",
            dir.join("state").display()
        ),
    )
    .unwrap();
    p
}

fn status_kib(key: &str) -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|k| k.parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// Run the job to the end in this process; (seconds, RSS before MiB, peak RSS MiB).
/// The peak is reset first, so it is the run's own high-water mark.
async fn run(job: &Path) -> (f64, f64, f64) {
    let yaml = std::fs::read_to_string(job).unwrap();
    let job = runner::sync::job::parse(&yaml, |_| None).unwrap();
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let before = status_kib("VmRSS:") / 1024.0;
    let t0 = Instant::now();
    if job.sink.iceberg().is_some() {
        let engine = runner::sync::engine::Engine::open(job.clone())
            .await
            .unwrap();
        let mut p = Pipeline::new(&job, engine);
        p.run(true).await.unwrap();
    } else {
        let engine = runner::sync::rdb::RdbEngine::open(job.clone())
            .await
            .unwrap();
        let mut p = Pipeline::new(&job, engine);
        p.run(true).await.unwrap();
    }
    (
        t0.elapsed().as_secs_f64(),
        before,
        status_kib("VmHWM:") / 1024.0,
    )
}

/// Run `job` in a fresh process (this bench binary again, `--run-job`): its numbers
/// are its own, not those of an earlier run's allocations.
fn run_child(job: &Path) -> (f64, f64, f64) {
    // LAKESHIFT_BENCH_WRAP: a command the run goes under (a heap profiler, say).
    let wrap = std::env::var("LAKESHIFT_BENCH_WRAP").unwrap_or_default();
    let mut argv: Vec<String> = wrap.split_whitespace().map(str::to_owned).collect();
    argv.push(std::env::current_exe().unwrap().display().to_string());
    let out = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .args(["--run-job", &job.display().to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Vec<f64> = text
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    (v[0], v[1], v[2])
}

fn main() {
    // As `lakeshift` does before anything else.
    runner::malloc::limit_arenas();
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--run-job") {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (secs, before, peak) = rt.block_on(run(Path::new(&args[i + 1])));
        println!("{secs} {before} {peak}");
        return;
    }
    let rows: usize = std::env::var("LAKESHIFT_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    let budget: u64 = std::env::var("LAKESHIFT_BENCH_BUDGET")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (db, pgs) = tokio::join!(MariaDb::start(), PgServer::start());
        pgs.create_db("lake").await;
        let mut c = db.conn(None).await;
        c.query_drop(
            "CREATE DATABASE bench; CREATE TABLE bench.big (id BIGINT NOT NULL PRIMARY KEY, a INT, b VARCHAR(40), c DECIMAL(12,2), d DATETIME(3), e DOUBLE) DEFAULT CHARSET=utf8mb4",
        )
        .await
        .unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let ice_sink = format!(
            "  type: iceberg\n  warehouse: {}\n",
            tmp.path().join("ice/warehouse").display()
        );
        let pg_sink = format!(
            "  type: postgres\n  url: postgres://postgres@127.0.0.1:{}/lake\n",
            pgs.port
        );
        let many_tables: usize = std::env::var("LAKESHIFT_BENCH_TABLES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(300);
        c.query_drop("CREATE DATABASE many").await.unwrap();
        for t in 0..many_tables {
            c.query_drop(format!(
                "CREATE TABLE many.t{t} (id BIGINT NOT NULL PRIMARY KEY, a INT, b VARCHAR(40), c DECIMAL(12,2))"
            ))
            .await
            .unwrap();
        }
        let pg_many = pg_sink.replace("/lake\n", "/many\n");
        pgs.create_db("many").await;
        let jobs = [
            ("Iceberg", job(&tmp.path().join("ice"), db.port, 901, &ice_sink, budget, "bench")),
            ("PostgreSQL", job(&tmp.path().join("pg"), db.port, 902, &pg_sink, budget, "bench")),
        ];
        let ice_many = format!(
            "  type: iceberg\n  warehouse: {}\n",
            tmp.path().join("ice-many/warehouse").display()
        );
        let many = [
            ("Iceberg", job(&tmp.path().join("ice-many"), db.port, 903, &ice_many, budget, "many")),
            ("PostgreSQL", job(&tmp.path().join("pg-many"), db.port, 904, &pg_many, budget, "many")),
        ];
        // Every job starts before the changes (an empty snapshot).
        for (_, j) in jobs.iter().chain(&many) {
            run(j).await;
        }
        eprintln!("writing one transaction of {rows} inserts...");
        c.query_drop("START TRANSACTION").await.unwrap();
        let mut id = 0;
        while id < rows {
            let n = 2000.min(rows - id);
            let values: Vec<String> = (id..id + n)
                .map(|i| format!("({i},{i},'row {i} of the big transaction',{i}.25,'2024-05-06 07:08:09.123',{i}.5)"))
                .collect();
            c.query_drop(format!("INSERT INTO bench.big VALUES {}", values.join(",")))
                .await
                .unwrap();
            id += n;
        }
        c.query_drop("COMMIT").await.unwrap();
        eprintln!("writing 1000 rows into each of {many_tables} tables...");
        for t in 0..many_tables {
            let values: Vec<String> = (0..1000)
                .map(|i| format!("({i},{i},'row {i} of table {t}',{i}.25)"))
                .collect();
            c.query_drop(format!("INSERT INTO many.t{t} VALUES {}", values.join(",")))
                .await
                .unwrap();
        }
        println!();
        println!("| sink | changes | budget MiB | RSS before MiB | peak RSS MiB | peak - before | (peak - before) / budget | seconds |");
        println!("|---|---|---:|---:|---:|---:|---:|---:|");
        let cases = jobs
            .iter()
            .map(|(n, j)| (*n, format!("{rows} rows in one transaction"), j))
            .chain(
                many.iter()
                    .map(|(n, j)| (*n, format!("{many_tables} tables x 1000 rows"), j)),
            );
        for (name, what, j) in cases {
            let (secs, before, peak) = run_child(j);
            println!(
                "| {name} | {what} | {budget} | {before:.0} | {peak:.0} | {:.0} | {:.2}x | {secs:.1} |",
                peak - before,
                (peak - before) / budget as f64
            );
        }
        // Updates of committed rows: the Iceberg sink's row index of the whole table
        // is built (about 25 bytes a row in memory; past a quarter of the budget it moves
        // to disk as it is built).
        let every = 20;
        c.query_drop(format!("UPDATE bench.big SET a = -a WHERE id % {every} = 0"))
            .await
            .unwrap();
        let (secs, before, peak) = run_child(&jobs[0].1);
        println!(
            "| Iceberg | {} updates of a {rows}-row table (its row index built: {} MiB in memory unspilled) | {budget} | {before:.0} | {peak:.0} | {:.0} | {:.2}x | {secs:.1} |",
            rows / every,
            (rows * 25) >> 20,
            peak - before,
            (peak - before) / budget as f64
        );
    });
}
