//! The change source's speed against the server's own tools, on one backlog, in one
//! run: binlog row changes decoded into Arrow, and `lakeshift tail`'s JSON lines of
//! them (against the former per-row `serde_json::Value` way too), vs `mariadb-binlog
//! -v --base64-output=DECODE-ROWS` reading the same binlog remotely; the sync catch-up
//! into Iceberg with position and with equality deletes, and DuckDB's read of each
//! resulting lake against plain Parquet files of the same rows and against the same
//! rows as an Iceberg table pyiceberg wrote in one append; snapshot rows into
//! Arrow vs a raw `SELECT *` stream of the mariadb client; many small tables into
//! Iceberg; a one-table job's start on a server holding all of those tables, next to
//! what reading every table's definition (as startup did before) costs.
//!
//! `cargo bench -p lakeshift-tests --bench source` (ROWS=1000000 by default; set
//! LAKESHIFT_BENCH_ROWS for a smaller backlog; LAKESHIFT_BENCH_MANY=1000,5000,10000
//! for the many-tables snapshot at several counts, 1000 by default;
//! LAKESHIFT_BENCH_ONLY=snapshot for the snapshot rows alone;
//! LAKESHIFT_BENCH_PARALLEL=1,2 the `snapshot-parallel` settings of the snapshot rows;
//! LAKESHIFT_BENCH_MANY_PARALLEL=2 that of the many-tables rows).

use lakeshift_tests::MariaDb;
use mysql_async::prelude::Queryable;
use runner::source::binlog::{BinlogReader, ReadFrom};
use runner::source::config::parse_job;
use runner::source::history::SchemaHistory;
use runner::source::position::Position;
use runner::source::run::{run, RunOptions};
use runner::source::SourceEvent;
use runner::sync::pipeline::Pipeline;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

const TABLES: usize = 10;
const PER_STMT: usize = 1000;

type Defs = Vec<(String, String)>;

async fn backlog(db: &MariaDb, changes: usize) -> (Position, usize, Defs) {
    let mut c = db.conn(None).await;
    c.query_drop("CREATE DATABASE bench").await.unwrap();
    for t in 0..TABLES {
        c.query_drop(format!(
            "CREATE TABLE bench.t{t} (id BIGINT NOT NULL PRIMARY KEY, a INT, b VARCHAR(40), c DECIMAL(12,2), d DATETIME(3), e DOUBLE) DEFAULT CHARSET=utf8mb4"
        ))
        .await
        .unwrap();
    }
    let start = runner::source::snapshot::current_position(&mut c)
        .await
        .unwrap();
    // The schema as of the start (the backlog has a DDL in it).
    let defs: Defs = runner::source::snapshot::read_definitions(&mut c, |_, _| true)
        .await
        .unwrap()
        .0
        .into_iter()
        .map(|(d, _, _, ddl)| (d, ddl))
        .collect();
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
    // A DDL mid-backlog: its barrier stall is measured.
    c.query_drop("ALTER TABLE bench.t0 ADD COLUMN extra INT")
        .await
        .unwrap();
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
    (start, done, defs)
}

fn job(db: &MariaDb) -> runner::source::config::Source {
    job_of(db, "bench\\..*", 1)
}

fn job_of(db: &MariaDb, tables: &str, parallel: usize) -> runner::source::config::Source {
    let yaml = format!(
        "source:\n  type: mariadb\n  hostname: 127.0.0.1\n  port: {}\n  username: root\n  server-id: 777\n  tables: ['{tables}']\n  startup: {{mode: initial}}\n  snapshot-parallel: {parallel}\n",
        db.port
    );
    parse_job(&yaml, |_| None).unwrap().1
}

async fn lakeshift_binlog(db: &MariaDb, from: &Position, defs: &Defs) -> (u64, f64) {
    let src = Arc::new(job(db));
    let history =
        SchemaHistory::create(None, from, defs.clone(), Vec::new(), Default::default()).unwrap();
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

/// How `tail` turns events into JSON lines.
#[derive(Clone, Copy, PartialEq)]
enum Tail {
    /// `lakeshift tail`'s writer: straight from the Arrow columns.
    Direct,
    /// The former way, kept here as a reference: a `serde_json::Value` per row.
    ValuePerRow,
}

/// A row as a `serde_json::Value` (the former `tail`, for comparison).
fn value_row(b: &arrow_array::RecordBatch, i: usize) -> serde_json::Value {
    use arrow_array::Array;
    use arrow_cast::display::{ArrayFormatter, FormatOptions};
    let mut m = serde_json::Map::new();
    for (c, f) in b.schema().fields().iter().enumerate() {
        let a = b.column(c);
        let v = if a.is_null(i) {
            serde_json::Value::Null
        } else {
            let s = ArrayFormatter::try_new(a.as_ref(), &FormatOptions::default())
                .map(|fm| fm.value(i).to_string())
                .unwrap_or_default();
            if f.data_type().is_numeric() {
                serde_json::from_str(&s).unwrap_or(serde_json::Value::String(s))
            } else {
                serde_json::Value::String(s)
            }
        };
        m.insert(f.name().clone(), v);
    }
    serde_json::Value::Object(m)
}

/// `lakeshift tail` over the backlog, its JSON lines written to /dev/null through a
/// buffered writer; (rows, lines' bytes, seconds).
async fn lakeshift_tail(db: &MariaDb, from: &Position, defs: &Defs, how: Tail) -> (u64, u64, f64) {
    use std::io::Write;
    let src = Arc::new(job(db));
    let history =
        SchemaHistory::create(None, from, defs.clone(), Vec::new(), Default::default()).unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let t0 = Instant::now();
    let from = from.clone();
    let task = tokio::spawn(async move {
        let mut r = BinlogReader::new(src, history, tx);
        r.run(ReadFrom::Position(from), true).await.unwrap();
    });
    let mut out = std::io::BufWriter::new(std::fs::File::create("/dev/null").unwrap());
    let (mut rows, mut bytes) = (0u64, 0u64);
    let mut buf = Vec::new();
    while let Some(e) = rx.recv().await {
        buf.clear();
        match (&e, how) {
            (SourceEvent::Rows(b), Tail::ValuePerRow) => {
                for i in 0..b.num_rows() {
                    let mut v = serde_json::json!({
                        "type": b.op,
                        "database": b.table.db,
                        "table": b.table.name,
                        "position": b.position_after(i).to_string(),
                    });
                    let (data, old) = match b.op {
                        runner::source::Op::Delete => (b.before.as_ref(), None),
                        runner::source::Op::Insert => (b.after.as_ref(), None),
                        runner::source::Op::Update => (b.after.as_ref(), b.before.as_ref()),
                    };
                    v["data"] = value_row(data.unwrap(), i);
                    if let Some(o) = old {
                        v["old"] = value_row(o, i);
                    }
                    buf.extend_from_slice(v.to_string().as_bytes());
                    buf.push(b'\n');
                }
            }
            _ => runner::source::json::write(&e, &mut buf),
        }
        if let SourceEvent::Rows(b) = &e {
            rows += b.num_rows() as u64;
        }
        bytes += buf.len() as u64;
        out.write_all(&buf).unwrap();
    }
    out.flush().unwrap();
    task.await.unwrap();
    (rows, bytes, t0.elapsed().as_secs_f64())
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
/// Peak resident memory of this process since the last reset, in MiB.
fn peak_rss_mib() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|k| k.parse::<f64>().ok())
        .map(|k| k / 1024.0)
        .unwrap_or(-1.0)
}

fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// A catch-up of the backlog into a fresh local Iceberg warehouse with `sink.delete-mode`
/// `mode` and checkpoints every `every` seconds: rows, seconds, DDL stalls, and the
/// warehouse (kept until dropped) with its tables' metadata files.
async fn lakeshift_sync(
    db: &MariaDb,
    from: &Position,
    defs: &Defs,
    mode: &str,
    every: f64,
) -> (u64, f64, Vec<(String, usize, f64)>, Lake) {
    let dir = tempfile::tempdir().unwrap();
    // A job that resumes at the backlog's start, with the schema history of then.
    let state = dir.path().join("state");
    SchemaHistory::create(
        Some(&state.join("source")),
        from,
        defs.clone(),
        Vec::new(),
        Default::default(),
    )
    .unwrap();
    let st = runner::sync::engine::State {
        job: "bench".into(),
        checkpoint: 0,
        position: Some(from.clone()),
        snapshot: None,
        ..Default::default()
    };
    std::fs::write(
        state.join("checkpoint.json"),
        serde_json::to_vec(&st).unwrap(),
    )
    .unwrap();
    let yaml = format!(
        "source:\n  type: mariadb\n  hostname: 127.0.0.1\n  port: {}\n  username: root\n  server-id: 778\n  tables: ['bench\\..*']\n  startup: {{mode: position, position: '{from}'}}\nsink:\n  type: iceberg\n  warehouse: {}\n  delete-mode: {mode}\npipeline:\n  name: bench\n  state: {}\n  checkpoint-interval-seconds: {every}\n",
        db.port,
        dir.path().join("wh").display(),
        dir.path().join("state").display()
    );
    let job = runner::sync::job::parse(&yaml, |_| None).unwrap();
    let t0 = Instant::now();
    let engine = runner::sync::engine::Engine::open(job.clone())
        .await
        .unwrap();
    let mut p = Pipeline::new(&job, engine);
    p.run(true).await.unwrap();
    let secs = t0.elapsed().as_secs_f64();
    let cat = runner::iceberg::Catalog::open(&runner::iceberg::CatalogConfig::local(
        dir.path().join("wh"),
    ))
    .await
    .unwrap();
    let mut metadata = Vec::new();
    let mut files = (0, 0, 0);
    for t in 0..TABLES {
        let id = runner::iceberg::catalog::ident("bench", &format!("t{t}")).unwrap();
        metadata.push(cat.metadata_location(&id).await.unwrap().unwrap());
        let table = cat.load(&id).await.unwrap().unwrap();
        for (kind, _, _) in runner::iceberg::commit::live_files(&cat, &table)
            .await
            .unwrap()
        {
            match kind {
                iceberg::spec::DataContentType::Data => files.0 += 1,
                iceberg::spec::DataContentType::PositionDeletes => files.1 += 1,
                iceberg::spec::DataContentType::EqualityDeletes => files.2 += 1,
            }
        }
    }
    (
        p.sink.rows,
        secs,
        p.sink.ddl_stalls.clone(),
        Lake {
            _dir: dir,
            metadata,
            files,
        },
    )
}

/// A warehouse a catch-up wrote.
struct Lake {
    _dir: tempfile::TempDir,
    metadata: Vec<String>,
    /// Live (data, position-delete, equality-delete) files over the tables.
    files: (usize, usize, usize),
}

/// DuckDB's read of a lake, against plain Parquet files of the same rows.
struct Read {
    /// `iceberg_scan` of every table (best of 3), seconds.
    iceberg: f64,
    /// The same rows as one Parquet file per table, DuckDB's defaults (snappy).
    plain: f64,
    /// The same, zstd (the lake's codec).
    plain_zstd: f64,
    /// `iceberg_scan` of the same rows written by pyiceberg in one append (one data
    /// file and one manifest per table, zstd): the best layout, whoever writes it.
    reference: f64,
    /// The query's answer.
    result: String,
    /// DuckDB's `COPY ... TO parquet` of the rows (snappy), seconds.
    copy: f64,
    /// Manifests per table (all tables').
    manifests: usize,
}

/// DuckDB's read of the tables (`SELECT count(*), sum(a), sum(id)` over each
/// `iceberg_scan`, best of 3), of plain Parquet files holding the same rows
/// (DuckDB's `COPY ... TO` of the scan, snappy and zstd), and of the same rows as an
/// Iceberg table pyiceberg wrote in one append.
fn duckdb_read(lake: &Lake) -> Read {
    let py = lakeshift_tests::interop_python();
    let script = lakeshift_tests::DUCKDB_PRELUDE.to_owned()
        + r#"
import tempfile, time
metas = sys.argv[1:]
q = "SELECT count(*), sum(a), sum(id) FROM {}"
def run(srcs):
    best, out = None, None
    for _ in range(3):
        t0 = time.perf_counter()
        out = [con.execute(q.format(s)).fetchone() for s in srcs]
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best, [list(map(str, r)) for r in out]
ice, ice_rows = run([f"iceberg_scan('{m}')" for m in metas])
manifests = sum(con.execute(f"SELECT count(DISTINCT manifest_path) FROM iceberg_metadata('{m}')").fetchone()[0] for m in metas)
tmp = tempfile.mkdtemp()
plain, zstd = [], []
t0 = time.perf_counter()
for i, m in enumerate(metas):
    p = os.path.join(tmp, f"t{i}.parquet")
    con.execute(f"COPY (SELECT * FROM iceberg_scan('{m}')) TO '{p}' (FORMAT parquet)")
    plain.append(f"read_parquet('{p}')")
copy = time.perf_counter() - t0
for i, m in enumerate(metas):
    p = os.path.join(tmp, f"z{i}.parquet")
    con.execute(f"COPY (SELECT * FROM iceberg_scan('{m}')) TO '{p}' (FORMAT parquet, COMPRESSION zstd)")
    zstd.append(f"read_parquet('{p}')")
pq, pq_rows = run(plain)
zq, zq_rows = run(zstd)
# The same rows as an Iceberg table in the best layout a writer can leave (pyiceberg:
# one append, one data file and manifest per table, zstd): what iceberg_scan costs
# over plain Parquet whoever writes the table.
from pyiceberg.catalog.sql import SqlCatalog
wh = tempfile.mkdtemp()
cat = SqlCatalog("ref", uri=f"sqlite:///{wh}/catalog.db", warehouse=f"file://{wh}")
cat.create_namespace("ref")
ref = []
for i, m in enumerate(metas):
    rows = con.execute(f"SELECT * FROM iceberg_scan('{m}')").fetch_arrow_table()
    t = cat.create_table(f"ref.t{i}", schema=rows.schema, properties={"write.parquet.compression-codec": "zstd"})
    t.append(rows)
    ref.append(cat.load_table(f"ref.t{i}").metadata_location.removeprefix("file://"))
rf, rf_rows = run([f"iceberg_scan('{m}')" for m in ref])
assert ice_rows == pq_rows == zq_rows == rf_rows, (ice_rows, pq_rows, zq_rows, rf_rows)
print(json.dumps({"iceberg": ice, "parquet": pq, "zstd": zq, "ref": rf, "rows": ice_rows, "copy": copy, "manifests": manifests}))
"#;
    let out = Command::new(&py)
        .arg("-c")
        .arg(&script)
        .args(&lake.metadata)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", py.display()));
    assert!(
        out.status.success(),
        "duckdb: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The answer is the last line (pyiceberg may print warnings before it).
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(text.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("duckdb: {e}: {text}"));
    Read {
        iceberg: v["iceberg"].as_f64().unwrap(),
        plain: v["parquet"].as_f64().unwrap(),
        plain_zstd: v["zstd"].as_f64().unwrap(),
        reference: v["ref"].as_f64().unwrap(),
        result: v["rows"].to_string(),
        copy: v["copy"].as_f64().unwrap(),
        manifests: v["manifests"].as_u64().unwrap() as usize,
    }
}

/// `maintain`'s compaction, manifest merge and expiry of every table of a lake, in process: seconds,
/// and the lake as it is after (new metadata files, file counts).
async fn maintain_lake(lake: &mut Lake) -> f64 {
    let cat = runner::iceberg::Catalog::open(&runner::iceberg::CatalogConfig::local(
        lake._dir.path().join("wh"),
    ))
    .await
    .unwrap();
    let o = runner::iceberg::maintain::Options {
        min_small_files: 1,
        retain_snapshots: 1,
        snapshot_age: std::time::Duration::ZERO,
        ..Default::default()
    };
    let t0 = Instant::now();
    for t in 0..TABLES {
        let id = runner::iceberg::catalog::ident("bench", &format!("t{t}")).unwrap();
        let table = cat.load(&id).await.unwrap().unwrap();
        runner::iceberg::maintain::compact(&cat, &table, &o)
            .await
            .unwrap();
        let table = cat.load(&id).await.unwrap().unwrap();
        runner::iceberg::maintain::merge_manifests(&cat, &table, &o)
            .await
            .unwrap();
        let table = cat.load(&id).await.unwrap().unwrap();
        runner::iceberg::maintain::expire(&cat, &table, &o)
            .await
            .unwrap();
    }
    let secs = t0.elapsed().as_secs_f64();
    lake.files = (0, 0, 0);
    for t in 0..TABLES {
        let id = runner::iceberg::catalog::ident("bench", &format!("t{t}")).unwrap();
        lake.metadata[t] = cat.metadata_location(&id).await.unwrap().unwrap();
        let table = cat.load(&id).await.unwrap().unwrap();
        for (kind, _, _) in runner::iceberg::commit::live_files(&cat, &table)
            .await
            .unwrap()
        {
            match kind {
                iceberg::spec::DataContentType::Data => lake.files.0 += 1,
                iceberg::spec::DataContentType::PositionDeletes => lake.files.1 += 1,
                iceberg::spec::DataContentType::EqualityDeletes => lake.files.2 += 1,
            }
        }
    }
    secs
}

/// A sync job of the tables matching `tables` into a fresh local Iceberg warehouse,
/// run to the binlog's end (snapshot first): rows written and seconds.
async fn sync_into_iceberg(
    db: &MariaDb,
    tables: &str,
    server_id: u32,
    parallel: usize,
) -> (u64, f64) {
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "source:\n  type: mariadb\n  hostname: 127.0.0.1\n  port: {}\n  username: root\n  server-id: {server_id}\n  tables: ['{tables}']\n  snapshot-parallel: {parallel}\nsink:\n  type: iceberg\n  warehouse: {}\npipeline:\n  name: snap\n  state: {}\n  checkpoint-interval-seconds: 5\n  progress-seconds: 0\n",
        db.port,
        dir.path().join("wh").display(),
        dir.path().join("state").display()
    );
    let job = runner::sync::job::parse(&yaml, |_| None).unwrap();
    let t0 = Instant::now();
    let engine = runner::sync::engine::Engine::open(job.clone())
        .await
        .unwrap();
    let mut p = Pipeline::new(&job, engine);
    p.run(true).await.unwrap();
    (p.sink.rows, t0.elapsed().as_secs_f64())
}

/// The initial snapshot of the bench tables into Iceberg, as `lakeshift sync` runs it
/// (snapshot, then the binlog's end: nothing after it).
async fn snapshot_into_iceberg(db: &MariaDb, parallel: usize) -> (u64, f64) {
    sync_into_iceberg(db, "bench\\..*", 780, parallel).await
}

/// `snapshot-parallel` of the many-tables rows: LAKESHIFT_BENCH_MANY_PARALLEL, 2 (the
/// default) unless set.
fn many_parallel() -> usize {
    std::env::var("LAKESHIFT_BENCH_MANY_PARALLEL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

/// One pass of the many-tables rows: with the server's table caches as they are, or
/// raised to hold every table (what lakeshift's warning advises).
struct Many {
    tables: usize,
    caches: &'static str,
    secs: f64,
    rss: f64,
    source_secs: f64,
    /// The mariadb client reading every table in one consistent-snapshot
    /// transaction, as a snapshot must (the reference).
    client_secs: f64,
}

/// The mariadb client running `sql` (its statements on stdin), streaming the rows it
/// reads (--quick: row by row, no buffering) to a pipe: rows and seconds.
fn mariadb_client(db: &MariaDb, sql: String) -> (u64, f64) {
    use std::io::Write;
    let t0 = Instant::now();
    let mut child = Command::new("mariadb")
        .args([
            "--host=127.0.0.1",
            &format!("--port={}", db.port),
            "--user=root",
            "--quick",
            "--batch",
            "--skip-column-names",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("mariadb runs");
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(sql.as_bytes()).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let secs = t0.elapsed().as_secs_f64();
    assert!(out.status.success());
    let rows = out.stdout.iter().filter(|b| **b == b'\n').count() as u64;
    (rows, secs)
}

/// The mariadb client's `SELECT *` of each of the `n` tables, in one
/// `START TRANSACTION WITH CONSISTENT SNAPSHOT` (what any consistent one-transaction
/// snapshot asks of the server, mariadb-dump --single-transaction too): seconds.
fn client_one_transaction(db: &MariaDb, n: usize) -> f64 {
    let mut sql = String::from(
        "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ;\nSTART TRANSACTION WITH CONSISTENT SNAPSHOT;\n",
    );
    for t in 0..n {
        sql.push_str(&format!("SELECT * FROM many{n}.t{t};\n"));
    }
    sql.push_str("COMMIT;\n");
    let (rows, secs) = mariadb_client(db, sql);
    assert_eq!(rows as usize, 2 * n, "the client's rows of {n} tables");
    secs
}

/// `n` tables of 2 rows each (database `many<n>`) snapshotted into Iceberg: with the
/// server's default table caches, then with both raised to `n + 500` as lakeshift's
/// warning advises (`SET GLOBAL`, set back after).
async fn many_tables_both(db: &MariaDb, n: usize, out: &mut Vec<Many>) {
    let mut c = db.conn(None).await;
    c.query_drop(format!("CREATE DATABASE many{n}"))
        .await
        .unwrap();
    for t in 0..n {
        c.query_drop(format!(
            "CREATE TABLE many{n}.t{t} (id INT PRIMARY KEY, v VARCHAR(20)); INSERT INTO many{n}.t{t} VALUES (1, 'a'), (2, 'b')"
        ))
        .await
        .unwrap();
    }
    let (defs, open): (u64, u64) = c
        .query_first("SELECT @@table_definition_cache, @@table_open_cache")
        .await
        .unwrap()
        .unwrap();
    out.push(many_tables(db, n, "server defaults").await);
    let want = n + 500;
    c.query_drop(format!(
        "SET GLOBAL table_definition_cache = {want}, table_open_cache = {want}"
    ))
    .await
    .unwrap();
    // Every table opened once before anything is timed: the first reads after the
    // caches change open every table (measured: 10,000 tables in 31 s cold, 9 s warm),
    // and the client, timed last, would otherwise be the only warm reader.
    client_one_transaction(db, n);
    out.push(many_tables(db, n, "raised to tables + 500").await);
    c.query_drop(format!(
        "SET GLOBAL table_definition_cache = {defs}, table_open_cache = {open}"
    ))
    .await
    .unwrap();
}

/// One pass over the `n` tables of `many<n>`: the source's snapshot alone (into
/// Arrow), the sync into Iceberg (its peak RSS), then the client's reference.
async fn many_tables(db: &MariaDb, n: usize, caches: &'static str) -> Many {
    reset_peak_rss();
    let (srows, source_secs) =
        lakeshift_snapshot(db, &format!("many{n}\\..*"), many_parallel()).await;
    assert_eq!(srows as usize, 2 * n, "the source's rows of {n} tables");
    let (rows, secs) = sync_into_iceberg(db, &format!("many{n}\\..*"), 779, many_parallel()).await;
    assert_eq!(rows as usize, 2 * n, "every row of {n} tables");
    let rss = peak_rss_mib();
    Many {
        tables: n,
        caches,
        secs,
        rss,
        source_secs,
        client_secs: client_one_transaction(db, n),
    }
}

async fn lakeshift_snapshot(db: &MariaDb, tables: &str, parallel: usize) -> (u64, f64) {
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let t0 = Instant::now();
    let task = tokio::spawn(run(
        Arc::new(job_of(db, tables, parallel)),
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
    // One client process streaming every table.
    let all: String = (0..TABLES)
        .map(|t| format!("SELECT * FROM bench.t{t};\n"))
        .collect();
    mariadb_client(db, all)
}

/// The snapshot rows: lakeshift's snapshot into Arrow and into Iceberg against the
/// mariadb client's `SELECT *`, then many small tables into Iceberg; a table each.
async fn snapshots(db: &MariaDb) {
    // Each path run three times, alternating, the fastest kept: these runs take
    // tenths of a second, and one run of each swung by half between runs.
    // LAKESHIFT_BENCH_PARALLEL: the snapshot-parallel settings compared, 1,2 unless set.
    let parallel: Vec<usize> = std::env::var("LAKESHIFT_BENCH_PARALLEL")
        .unwrap_or_else(|_| "1,2".into())
        .split(',')
        .filter_map(|x| x.trim().parse().ok())
        .collect();
    let mut rsecs = f64::MAX;
    let mut rrows = 0;
    // Per setting: (rows, seconds) into Arrow, (rows, seconds, peak RSS) into Iceberg.
    let mut runs = vec![((0, f64::MAX), (0, f64::MAX, 0.0f64)); parallel.len()];
    for _ in 0..3 {
        let (rows, secs) = raw_select(db);
        (rrows, rsecs) = (rows, rsecs.min(secs));
        for (p, run) in parallel.iter().zip(runs.iter_mut()) {
            let (rows, secs) = lakeshift_snapshot(db, "bench\\..*", *p).await;
            assert_eq!(rows, rrows, "snapshot rows, snapshot-parallel {p}");
            run.0 = (rows, run.0 .1.min(secs));
            reset_peak_rss();
            let (rows, secs) = snapshot_into_iceberg(db, *p).await;
            assert_eq!(
                rows, rrows,
                "snapshot rows into Iceberg, snapshot-parallel {p}"
            );
            run.1 = (rows, run.1 .1.min(secs), run.1 .2.max(peak_rss_mib()));
        }
    }
    // LAKESHIFT_BENCH_MANY: table counts, e.g. 1000,5000,10000.
    let counts: Vec<usize> = std::env::var("LAKESHIFT_BENCH_MANY")
        .unwrap_or_else(|_| "1000".into())
        .split(',')
        .filter_map(|x| x.trim().parse().ok())
        .collect();
    let mut many = Vec::new();
    for n in counts {
        many_tables_both(db, n, &mut many).await;
    }
    // Startup on a server full of other tables: a job of one small table, and what
    // its startup read before it read only the captured tables' definitions (every
    // table's SHOW CREATE TABLE).
    let mut c = db.conn(None).await;
    c.query_drop("CREATE DATABASE tiny; CREATE TABLE tiny.t (id INT PRIMARY KEY, v INT); INSERT INTO tiny.t VALUES (1, 1), (2, 2)")
        .await
        .unwrap();
    let (trows, tsecs) = sync_into_iceberg(db, "tiny\\..*", 778, many_parallel()).await;
    assert_eq!(trows, 2, "the tiny job's rows");
    let t0 = Instant::now();
    let (every, _) = runner::source::snapshot::read_definitions(&mut c, |_, _| true)
        .await
        .unwrap();
    let every_secs = t0.elapsed().as_secs_f64();
    println!();
    println!(
        "| a job of 1 table (2 rows) on a server of {} tables | seconds |",
        every.len()
    );
    println!("|---|---:|");
    println!("| sync --until-end into Iceberg (reads the captured definition only) | {tsecs:.2} |");
    println!(
        "| reading every table's definition (what its startup added before) | {every_secs:.2} |"
    );
    println!();
    println!(
        "| snapshot path (fastest of 3 alternating runs) | rows | seconds | rows/s | vs baseline |"
    );
    println!("|---|---:|---:|---:|---:|");
    let rrate = rrows as f64 / rsecs;
    println!("| mariadb --quick SELECT * (baseline) | {rrows} | {rsecs:.2} | {rrate:.0} | 1.00x |");
    for (p, ((srows, ssecs), (irows, isecs, rss))) in parallel.iter().zip(&runs) {
        let srate = *srows as f64 / ssecs;
        println!(
            "| lakeshift snapshot -> Arrow, snapshot-parallel {p} | {srows} | {ssecs:.2} | {srate:.0} | {:.2}x |",
            srate / rrate
        );
        let irate = *irows as f64 / isecs;
        println!("| lakeshift sync snapshot -> Iceberg, snapshot-parallel {p} (peak RSS {rss:.0} MiB) | {irows} | {isecs:.2} | {irate:.0} | {:.2}x |", irate / rrate);
    }
    println!();
    println!(
        "| tables (2 rows each) snapshotted into Iceberg | server's table caches | seconds | ms per table | peak RSS MiB | the source's snapshot alone, s | mariadb client, every table in one consistent-snapshot transaction, s (ms per table) | sync minus the source's snapshot alone, ms per table |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|");
    for m in &many {
        let per = |s: f64| s * 1000.0 / m.tables as f64;
        println!(
            "| {} | {} | {:.1} | {:.2} | {:.0} | {:.1} | {:.1} ({:.2}) | {:.2} |",
            m.tables,
            m.caches,
            m.secs,
            per(m.secs),
            m.rss,
            m.source_secs,
            m.client_secs,
            per(m.client_secs),
            per(m.secs - m.source_secs)
        );
    }
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
        let (start, done, defs) = backlog(&db, changes).await;
        if std::env::var("LAKESHIFT_BENCH_ONLY").is_ok_and(|v| v == "snapshot") {
            snapshots(&db).await;
            return;
        }
        let (rows, secs) = lakeshift_binlog(&db, &start, &defs).await;
        assert_eq!(rows as usize, done, "every row change decoded");
        let mb_secs = mariadb_binlog(&db, &start.file);
        let (trows, tbytes, tsecs) = lakeshift_tail(&db, &start, &defs, Tail::Direct).await;
        let (vrows, vbytes, vsecs) = lakeshift_tail(&db, &start, &defs, Tail::ValuePerRow).await;
        assert_eq!((trows, vrows), (rows, rows), "every row change tailed");
        reset_peak_rss();
        let (sync_rows, sync_secs, stalls, lake) =
            lakeshift_sync(&db, &start, &defs, "position", 5.0).await;
        let sync_rss = peak_rss_mib();
        assert_eq!(sync_rows as usize, done, "every row change synced");
        // The same catch-up with equality deletes, and both with checkpoints every
        // 0.2 s (deletes then apply across many files); each lake read by DuckDB.
        let mut lakes = vec![("position", 5.0, sync_rows, sync_secs, lake)];
        for (mode, every) in [("equality", 5.0), ("position", 0.2), ("equality", 0.2)] {
            let (r, s, _, l) = lakeshift_sync(&db, &start, &defs, mode, every).await;
            assert_eq!(r as usize, done, "every row change synced ({mode})");
            lakes.push((mode, every, r, s, l));
        }
        let mut reads = Vec::new();
        for (mode, every, _, _, lake) in &lakes {
            reads.push((*mode, *every, duckdb_read(lake), lake.files));
        }
        // `maintain` on the lake of position deletes and 0.2 s checkpoints: its
        // rewrite against DuckDB's COPY of the same rows, and the read after it.
        let before_files = lakes[2].4.files;
        let maintain_secs = maintain_lake(&mut lakes[2].4).await;
        let maintained = duckdb_read(&lakes[2].4);
        // The source's answer to the same query.
        let mut c = db.conn(None).await;
        let mut truth = Vec::new();
        for t in 0..TABLES {
            let r: (i64, String, String) = c
                .query_first(format!("SELECT count(*), CAST(sum(a) AS CHAR), CAST(sum(id) AS CHAR) FROM bench.t{t}"))
                .await
                .unwrap()
                .unwrap();
            truth.push(vec![r.0.to_string(), r.1, r.2]);
        }
        let truth = serde_json::to_string(&truth).unwrap();
        for (mode, every, read, _) in &reads {
            if *mode == "position" {
                assert_eq!(read.result, truth, "DuckDB reads the {mode}-delete lake ({every} s) as the source");
            }
        }
        assert_eq!(maintained.result, truth, "DuckDB reads the maintained lake as the source");
        println!();
        println!("| path | rows | seconds | rows/s | vs baseline |");
        println!("|---|---:|---:|---:|---:|");
        let rate = rows as f64 / secs;
        let mb_rate = rows as f64 / mb_secs;
        println!("| mariadb-binlog -v --base64-output=DECODE-ROWS (baseline) | {rows} | {mb_secs:.2} | {mb_rate:.0} | 1.00x |");
        println!("| lakeshift binlog -> Arrow | {rows} | {secs:.2} | {rate:.0} | {:.2}x |", rate / mb_rate);
        let t_rate = trows as f64 / tsecs;
        println!("| lakeshift tail -> JSON lines ({} MB) | {trows} | {tsecs:.2} | {t_rate:.0} | {:.2}x |", tbytes >> 20, t_rate / mb_rate);
        let v_rate = vrows as f64 / vsecs;
        println!("| (former tail: a serde_json::Value per row, {} MB) | {vrows} | {vsecs:.2} | {v_rate:.0} | {:.2}x |", vbytes >> 20, v_rate / mb_rate);
        for (mode, every, r, s, _) in &lakes {
            let rate = *r as f64 / s;
            println!("| lakeshift sync -> Iceberg (catch-up, {mode} deletes, checkpoints every {every} s) | {r} | {s:.2} | {rate:.0} | {:.2}x |", rate / mb_rate);
        }
        println!();
        for (pos, tables, ms) in &stalls {
            println!("DDL barrier at {pos}: {tables} table(s) paused {ms:.1} ms (the other tables' changes queue for the same time: one consumer task)");
        }
        println!("peak RSS (process, reset before each): sync catch-up {sync_rss:.0} MiB");
        println!();
        println!("| lake after catch-up | files (data / position deletes / equality deletes) | manifests | DuckDB over Iceberg s | plain Parquet (snappy) s | ratio | plain Parquet (zstd, as the lake) s | ratio | the rows as pyiceberg's one-append table s | ratio |");
        println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        let row = |what: String, (d, p, e): (usize, usize, usize), r: &Read| {
            let wrong = if r.result == truth { "" } else { " (DuckDB's answer differs from the source)" };
            println!(
                "| {what}{wrong} | {d} / {p} / {e} | {} | {:.3} | {:.3} | {:.2}x | {:.3} | {:.2}x | {:.3} | {:.2}x |",
                r.manifests, r.iceberg, r.plain, r.iceberg / r.plain, r.plain_zstd, r.iceberg / r.plain_zstd,
                r.reference, r.iceberg / r.reference
            );
        };
        for (mode, every, read, files) in &reads {
            row(format!("{mode} deletes, checkpoints every {every} s"), *files, read);
        }
        let (d, p, e) = lakes[2].4.files;
        row("position deletes, 0.2 s, after `maintain`".into(), (d, p, e), &maintained);
        println!();
        println!(
            "maintain (compaction, manifest merge and expiry of the 10 tables, files {} / {} / {} -> {d} / {p} / {e}): {maintain_secs:.2} s; DuckDB COPY of the same rows to Parquet: {:.2} s; ratio {:.2}x",
            before_files.0, before_files.1, before_files.2,
            maintained.copy,
            maintained.copy / maintain_secs
        );
        snapshots(&db).await;
    });
}
