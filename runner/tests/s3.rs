//! Iceberg warehouses in S3-compatible object storage, against moto's S3 server
//! (started by the test on a free port, a bucket of its own): `lakeshift sync` from a
//! throwaway MariaDB into `s3://bucket/prefix` with a SQLite catalog, DDL included,
//! read back with the iceberg crate and with pyiceberg over S3.

use lakeshift_tests::{MariaDb, S3Server};
use mysql_async::prelude::Queryable;
use runner::iceberg::{Catalog, CatalogConfig};
use std::process::Command;

/// `lakeshift sync --until-end` of `job` with the S3 server's environment; its log.
fn sync(job: &std::path::Path, s3: &S3Server) -> String {
    lakeshift(
        &[
            "sync",
            "--config",
            &job.display().to_string(),
            "--until-end",
        ],
        s3.env(),
    )
}

/// A lakeshift command that must succeed, with `env`; its standard error and output.
fn lakeshift(args: &[&str], env: Vec<(&'static str, String)>) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_lakeshift"))
        .args(args)
        .envs(env)
        .output()
        .unwrap();
    let log =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "lakeshift {args:?} failed: {log}");
    log
}

/// `sync --until-end` of `job`, run again while the job's lease is held by a run
/// that is gone (bounded); the logs of every attempt.
async fn sync_when_free(job: &std::path::Path, s3: &S3Server) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut logs = String::new();
    loop {
        let out = Command::new(env!("CARGO_BIN_EXE_lakeshift"))
            .args([
                "sync",
                "--config",
                &job.display().to_string(),
                "--until-end",
            ])
            .envs(s3.env())
            .output()
            .unwrap();
        logs += &String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            return logs;
        }
        assert!(
            logs.contains("its lease ends in") && std::time::Instant::now() < deadline,
            "sync failed: {logs}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
}

/// An S3 server with bucket `bucket`, a MariaDB source, and a PostgreSQL catalog
/// database (its URI last): what jobs sharing a lake across hosts use.
async fn shared_setup(bucket: &str) -> (S3Server, MariaDb, lakeshift_tests::PgServer, String) {
    let (s3, maria, pg) = tokio::join!(
        S3Server::start(bucket),
        MariaDb::start(),
        lakeshift_tests::PgServer::start()
    );
    pg.create_db("catalog").await;
    let catalog = format!("postgresql://postgres@127.0.0.1:{}/catalog", pg.port);
    (s3, maria, pg, catalog)
}

/// The catalog at `catalog` over S3 warehouse `warehouse` of server `s3`.
async fn lake(s3: &S3Server, warehouse: &str, catalog: &str) -> Catalog {
    Catalog::open(&CatalogConfig {
        name: "lakeshift".into(),
        warehouse: warehouse.into(),
        uri: Some(catalog.to_owned()),
        s3_env: Some(s3.env_pairs()),
    })
    .await
    .unwrap()
}

/// Each `(table, source query)`: the lake's `shop.<table>` equals the source's rows.
async fn assert_lake(
    c: &mut mysql_async::Conn,
    cat: &Catalog,
    checks: &[(&str, &str)],
    what: &str,
) {
    for (t, sql) in checks {
        let want = lakeshift_tests::mysql_text_rows(c, sql).await;
        let got = lakeshift_tests::iceberg_text_rows(cat, "shop", t, None)
            .await
            .unwrap_or_default();
        lakeshift_tests::assert_rows_eq(&got, &want, &format!("shop.{t} {what}"));
    }
}

/// pyiceberg's rows of `shop.<table>` from the catalog, its files read over S3.
fn pyiceberg_rows(s3: &S3Server, catalog: &str, table: &str) -> Vec<Vec<Option<String>>> {
    let script = r#"
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
cat = SqlCatalog("lakeshift", uri=sys.argv[1], **{
    "s3.endpoint": sys.argv[2], "s3.access-key-id": "test", "s3.secret-access-key": "test",
    "s3.region": "us-east-1"})
rows = cat.load_table(sys.argv[3]).scan().to_arrow().to_pylist()
print(json.dumps([[None if v is None else str(v) for v in r.values()] for r in rows]))
"#;
    let out = Command::new(lakeshift_tests::interop_python())
        .args([
            "-c",
            script,
            catalog,
            &s3.endpoint(),
            &format!("shop.{table}"),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pyiceberg: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut rows: Vec<Vec<Option<String>>> = serde_json::from_slice(&out.stdout).unwrap();
    rows.sort();
    rows
}

/// DuckDB's rows of the Iceberg table whose metadata file is `metadata` (an s3://
/// URL), read with its iceberg and httpfs extensions over S3.
fn duckdb_rows(s3: &S3Server, metadata: &str) -> Vec<Vec<Option<String>>> {
    let script = format!(
        r#"{}
con.execute(f"LOAD '{{base}}/httpfs.duckdb_extension'")
con.execute("CREATE SECRET (TYPE s3, KEY_ID 'test', SECRET 'test', REGION 'us-east-1', ENDPOINT '127.0.0.1:{}', URL_STYLE 'path', USE_SSL false)")
rows = con.execute("SELECT * FROM iceberg_scan(?)", [sys.argv[1]]).fetchall()
print(json.dumps([[None if v is None else str(v) for v in r] for r in rows]))
"#,
        lakeshift_tests::DUCKDB_PRELUDE,
        s3.port
    );
    let out = Command::new(lakeshift_tests::interop_python())
        .args(["-c", &script, metadata])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "duckdb: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut rows: Vec<Vec<Option<String>>> = serde_json::from_slice(&out.stdout).unwrap();
    rows.sort();
    rows
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_mirrors_into_an_s3_warehouse_with_its_ddl() {
    let (s3, maria) = tokio::join!(S3Server::start("lake"), MariaDb::start());
    let mut c = maria.conn(None).await;
    c.query_drop(
        "CREATE DATABASE shop;
         CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(40), price DECIMAL(10,2));
         INSERT INTO shop.items VALUES (1, 'one', 1.50), (2, 'two', 2.50), (3, 'three', 3.50);
         CREATE TABLE shop.log (k INT, note TEXT);
         INSERT INTO shop.log VALUES (1, 'a'), (1, 'a'), (2, 'b');",
    )
    .await
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let catalog = format!("sqlite://{}/catalog.db", dir.display());
    let job = dir.join("job.yaml");
    std::fs::write(
        &job,
        format!(
            "source:\n  type: mariadb\n  hostname: 127.0.0.1\n  port: {}\n  username: root\n  server-id: 901\n  tables: ['shop\\..*']\nsink:\n  type: iceberg\n  warehouse: s3://lake/wh\n  catalog: {catalog}\npipeline:\n  name: s3\n  state: {}\n  checkpoint-interval-seconds: 0.1\n",
            maria.port,
            dir.join("state").display()
        ),
    )
    .unwrap();
    sync(&job, &s3);
    c.query_drop(
        "UPDATE shop.items SET price = 9.99 WHERE id = 1;
         DELETE FROM shop.items WHERE id = 2;
         ALTER TABLE shop.items ADD COLUMN qty INT DEFAULT 5;
         INSERT INTO shop.items VALUES (4, 'four', 4.50, 7);
         DELETE FROM shop.log WHERE k = 1 LIMIT 1;
         INSERT INTO shop.log VALUES (3, 'c');",
    )
    .await
    .unwrap();
    let log = sync(&job, &s3);
    let cat = lake(&s3, "s3://lake/wh", &catalog).await;
    for (t, sql) in [
        ("items", "SELECT id, name, price, qty FROM shop.items"),
        ("log", "SELECT k, note FROM shop.log"),
    ] {
        let want = lakeshift_tests::mysql_text_rows(&mut c, sql).await;
        let got = lakeshift_tests::iceberg_text_rows(&cat, "shop", t, None)
            .await
            .unwrap_or_default();
        lakeshift_tests::assert_rows_eq(&got, &want, &format!("shop.{t} (iceberg crate)\n{log}"));
        // (SQLAlchemy spells an absolute path with a fourth slash.)
        let py_uri = format!("sqlite:///{}/catalog.db", dir.display());
        let py = pyiceberg_rows(&s3, &py_uri, t);
        lakeshift_tests::assert_rows_eq(&py, &want, &format!("shop.{t} (pyiceberg over S3)"));
        let loc = cat
            .metadata_location(&runner::iceberg::catalog::ident("shop", t).unwrap())
            .await
            .unwrap()
            .unwrap();
        let duck = duckdb_rows(&s3, &loc);
        lakeshift_tests::assert_rows_eq(&duck, &want, &format!("shop.{t} (DuckDB over S3)"));
    }
    // `maintain` on the S3 lake: compaction, expiry and orphan removal through the
    // object store (a stray object under the table's prefix, referenced by nothing,
    // goes; the mirrored job state under _lakeshift stays); the rows stay the same.
    s3.put("wh/shop/items/data/stray.parquet", "not referenced");
    let before = s3.keys("wh/shop/items/").len();
    std::fs::write(
        &job,
        std::fs::read_to_string(&job).unwrap().replace(
            "  catalog: ",
            "  maintenance:\n    retain-snapshots: 1\n    snapshot-age-hours: 0\n    min-small-files: 2\n    orphan-age-hours: 0\n  catalog: ",
        ),
    )
    .unwrap();
    let mlog = lakeshift(
        &["maintain", "--config", &job.display().to_string()],
        s3.env(),
    );
    let cat = lake(&s3, "s3://lake/wh", &catalog).await;
    assert_lake(
        &mut c,
        &cat,
        &[
            ("items", "SELECT id, name, price, qty FROM shop.items"),
            ("log", "SELECT k, note FROM shop.log"),
        ],
        &format!("after maintain\n{mlog}"),
    )
    .await;
    let items = cat
        .load(&runner::iceberg::catalog::ident("shop", "items").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        items.metadata.snapshots().count(),
        1,
        "expired to one snapshot\n{mlog}"
    );
    let after = s3.keys("wh/shop/items/");
    assert!(
        after.len() < before,
        "expiry deleted objects: {before} -> {}\n{mlog}",
        after.len()
    );
    assert!(
        !after.iter().any(|k| k.ends_with("stray.parquet")),
        "the orphan object stayed\n{mlog}"
    );
    assert!(mlog.contains("orphan"), "{mlog}");
    assert!(
        !s3.keys("wh/_lakeshift/s3/").is_empty(),
        "the job's mirrored state"
    );
    // Everything of the tables is in the bucket; nothing in a local warehouse.
    let keys = s3.keys("wh/shop/items/");
    assert!(
        keys.iter()
            .any(|k| k.contains("/metadata/") && k.ends_with(".metadata.json")),
        "{keys:?}"
    );
    assert!(
        keys.iter()
            .any(|k| k.contains("/data/") && k.ends_with(".parquet")),
        "{keys:?}"
    );
    assert!(!dir.join("wh").exists() && !std::path::Path::new("s3:").exists());
}

/// A local SQLite catalog is required: the catalog cannot live in the bucket.
#[test]
fn an_s3_warehouse_without_a_catalog_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let job = tmp.path().join("job.yaml");
    std::fs::write(
        &job,
        format!(
            "source:\n  type: mariadb\n  hostname: 127.0.0.1\n  port: 1\n  username: root\n  server-id: 902\n  tables: ['shop\\..*']\nsink:\n  type: iceberg\n  warehouse: s3://lake/wh\npipeline:\n  name: s3\n  state: {}\n",
            tmp.path().join("state").display()
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lakeshift"))
        .args([
            "sync",
            "--config",
            &job.display().to_string(),
            "--until-end",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("needs a catalog URI"),
        "{err}"
    );
}

/// `lakeshift apply` into an S3 warehouse: tables created and altered, their
/// metadata in the bucket, read back from the catalog.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_writes_tables_into_an_s3_warehouse() {
    let s3 = S3Server::start("applied").await;
    let tmp = tempfile::tempdir().unwrap();
    let catalog = format!("sqlite://{}/catalog.db", tmp.path().display());
    let sql = tmp.path().join("ddl.sql");
    std::fs::write(
        &sql,
        "CREATE TABLE shop.t (id INT PRIMARY KEY, name VARCHAR(10));\nALTER TABLE shop.t ADD COLUMN price DECIMAL(10,2), MODIFY name VARCHAR(20);\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lakeshift"))
        .args([
            "apply",
            "--from",
            "mysql",
            "--warehouse",
            "s3://applied/wh",
            "--catalog",
            &catalog,
        ])
        .arg(&sql)
        .envs(s3.env())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let keys = s3.keys("wh/shop/t/metadata/");
    assert!(keys.len() >= 2, "a metadata file per commit: {keys:?}");
    let out = Command::new(lakeshift_tests::interop_python())
        .args([
            "-c",
            "import sys\nfrom pyiceberg.catalog.sql import SqlCatalog\ncat = SqlCatalog('lakeshift', uri=sys.argv[1], **{'s3.endpoint': sys.argv[2], 's3.access-key-id': 'test', 's3.secret-access-key': 'test', 's3.region': 'us-east-1'})\nprint(','.join(f.name for f in cat.load_table('shop.t').schema().fields))",
            &format!("sqlite:///{}/catalog.db", tmp.path().display()),
            &s3.endpoint(),
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "id,name,price",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

const KILL_TABLES: [&str; 2] = ["items", "nokey"];

async fn record(c: &mut mysql_async::Conn) -> ((u64, u64), lakeshift_tests::Dump) {
    let end = runner::source::snapshot::current_position(c).await.unwrap();
    let mut d = std::collections::BTreeMap::new();
    for t in KILL_TABLES {
        d.insert(
            t,
            lakeshift_tests::mysql_text_rows(c, &format!("SELECT * FROM shop.{t}")).await,
        );
    }
    ((end.file_index(), end.offset), d)
}

async fn step(c: &mut mysql_async::Conn, rng: &mut Rng, i: u64) {
    let id = rng.below(100);
    let q = match rng.below(6) {
        0 | 1 => format!(
            "INSERT INTO shop.items (id, name, price) VALUES ({id}, 'i{i}', {}.25) ON DUPLICATE KEY UPDATE name = 'dup{i}'",
            rng.below(1000)
        ),
        2 => format!("UPDATE shop.items SET id = {} WHERE id = {id}", 1000 + i),
        3 => format!("DELETE FROM shop.items WHERE id = {id}"),
        4 => format!(
            "INSERT INTO shop.nokey VALUES ({}, 'n{i}'); DELETE FROM shop.nokey WHERE k = {} LIMIT 1",
            rng.below(10),
            rng.below(10)
        ),
        _ => {
            let base = 10_000 + i * 100;
            let v: Vec<String> = (0..40).map(|k| format!("({}, 'bulk', 1.00)", base + k)).collect();
            format!(
                "BEGIN; INSERT INTO shop.items (id, name, price) VALUES {}; UPDATE shop.items SET price = 2.00 WHERE id < {}; COMMIT",
                v.join(","),
                base + 20
            )
        }
    };
    c.query_drop(q).await.unwrap();
}

/// The model-oracle kill test with the warehouse in S3 and the catalog in a
/// throwaway PostgreSQL: 20 SIGKILLs while a workload runs (keyed and keyless tables,
/// key changes, larger transactions, a DDL); every committed snapshot equals the
/// source after the transaction its watermark names, no data file is committed
/// twice, and the end equals the source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_committed_snapshot_in_s3_equals_the_source_through_20_kills() {
    let (s3, maria, _pg, catalog) = shared_setup("killed").await;
    let mut c = maria.conn(None).await;
    c.query_drop(
        "CREATE DATABASE shop;
         CREATE TABLE shop.items (id BIGINT PRIMARY KEY, name VARCHAR(40), price DECIMAL(10,2));
         CREATE TABLE shop.nokey (k INT, v VARCHAR(20));",
    )
    .await
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let job = dir.join("job.yaml");
    std::fs::write(
        &job,
        format!(
            "source:\n  type: mariadb\n  hostname: 127.0.0.1\n  port: {}\n  username: root\n  server-id: 903\n  tables: ['shop\\..*']\nsink:\n  type: iceberg\n  warehouse: s3://killed/lake\n  catalog: {catalog}\npipeline:\n  name: s3kill\n  state: {}\n  checkpoint-interval-seconds: 0.1\n",
            maria.port,
            dir.join("state").display()
        ),
    )
    .unwrap();
    let log = dir.join("sync.log");
    let mut rng = Rng(0x0053_6b11);
    let mut oracle = vec![record(&mut c).await];
    let mut i = 0u64;
    for kill in 0..20 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lakeshift"))
            .args(["sync", "--config", &job.display().to_string()])
            .envs(s3.env())
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&log)
                    .unwrap(),
            )
            .spawn()
            .unwrap();
        for _ in 0..1 + rng.below(8) {
            step(&mut c, &mut rng, i).await;
            i += 1;
            oracle.push(record(&mut c).await);
        }
        if kill == 10 {
            c.query_drop("ALTER TABLE shop.items ADD COLUMN qty INT DEFAULT 3")
                .await
                .unwrap();
            oracle.push(record(&mut c).await);
        }
        // Some kills at once, some after the lake caught up with the source.
        if kill % 3 == 0 {
            let cat = lake(&s3, "s3://killed/lake", &catalog).await;
            let want = lakeshift_tests::mysql_text_rows(&mut c, "SELECT * FROM shop.items").await;
            lakeshift_tests::wait_until("the S3 lake caught up", || {
                let (cat, want) = (&cat, &want);
                async move {
                    lakeshift_tests::iceberg_text_rows(cat, "shop", "items", None)
                        .await
                        .is_some_and(|got| got == *want)
                }
            })
            .await;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "{}",
            std::fs::read_to_string(&log).unwrap()
        );
        child.kill().unwrap();
        let _ = child.wait();
    }
    lakeshift(
        &[
            "sync",
            "--config",
            &job.display().to_string(),
            "--until-end",
        ],
        s3.env(),
    );
    let cat = lake(&s3, "s3://killed/lake", &catalog).await;
    let (checked, files) =
        lakeshift_tests::check_every_snapshot(&cat, "shop", &KILL_TABLES, &oracle, |w| {
            (w.file_index(), w.offset)
        })
        .await;
    // (Not vacuous: the commits of the seven caught-up kills alone are more.)
    assert!(
        checked >= 10,
        "only {checked} snapshots checked ({files} files)"
    );
    eprintln!("{checked} committed snapshots in S3 checked against the model; {files} data files, none twice");
    for t in KILL_TABLES {
        let want =
            lakeshift_tests::mysql_text_rows(&mut c, &format!("SELECT * FROM shop.{t}")).await;
        let got = lakeshift_tests::iceberg_text_rows(&cat, "shop", t, None)
            .await
            .unwrap_or_default();
        lakeshift_tests::assert_rows_eq(&got, &want, &format!("shop.{t} at the end"));
    }
}

/// A MariaDB source with `shop.items` (two rows) and a job mirroring it into bucket
/// `bucket` of an S3 server reached through a [`lakeshift_tests::FaultProxy`], with a
/// SQLite catalog; `interval`: the rest of the job file's pipeline part after
/// `checkpoint-interval-seconds: `.
struct ProxiedJob {
    maria: MariaDb,
    proxy: lakeshift_tests::FaultProxy,
    /// The S3 environment with the proxy as endpoint, for the job's processes.
    env: Vec<(&'static str, String)>,
    tmp: tempfile::TempDir,
    job: std::path::PathBuf,
    /// The lake, read around the proxy.
    cat: Catalog,
    _s3: S3Server,
}

impl ProxiedJob {
    async fn start(bucket: &str, server_id: u32, interval: &str) -> ProxiedJob {
        let (s3, maria) = tokio::join!(S3Server::start(bucket), MariaDb::start());
        let proxy = lakeshift_tests::FaultProxy::start(s3.port).await;
        let mut env = s3.env();
        env[0].1 = format!("http://127.0.0.1:{}", proxy.port);
        let mut c = maria.conn(None).await;
        c.query_drop(
            "CREATE DATABASE shop;
             CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(40));
             INSERT INTO shop.items VALUES (1, 'a'), (2, 'b');",
        )
        .await
        .unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let catalog = format!("sqlite://{}/catalog.db", dir.display());
        let job = dir.join("job.yaml");
        std::fs::write(
            &job,
            format!(
                "source:\n  type: mariadb\n  hostname: 127.0.0.1\n  port: {}\n  username: root\n  server-id: {server_id}\n  tables: ['shop\\..*']\nsink:\n  type: iceberg\n  warehouse: s3://{bucket}/lake\n  catalog: {catalog}\npipeline:\n  name: {bucket}\n  state: {}\n  checkpoint-interval-seconds: {interval}",
                maria.port,
                dir.join("state").display()
            ),
        )
        .unwrap();
        let cat = lake(&s3, &format!("s3://{bucket}/lake"), &catalog).await;
        ProxiedJob {
            maria,
            proxy,
            env,
            tmp,
            job,
            cat,
            _s3: s3,
        }
    }

    /// `lakeshift sync` of the job, its standard error into `sync.log`.
    fn spawn(&self) -> std::process::Child {
        Command::new(env!("CARGO_BIN_EXE_lakeshift"))
            .args(["sync", "--config", &self.job.display().to_string()])
            .envs(self.env.clone())
            .stderr(std::fs::File::create(self.tmp.path().join("sync.log")).unwrap())
            .spawn()
            .unwrap()
    }

    /// What the last [`ProxiedJob::spawn`]'s process logged.
    fn log(&self) -> String {
        std::fs::read_to_string(self.tmp.path().join("sync.log")).unwrap_or_default()
    }

    /// Whether the lake's `shop.items` equals the source's (a connection of its own).
    async fn items_equal(&self) -> bool {
        let mut c = self.maria.conn(None).await;
        let want = lakeshift_tests::mysql_text_rows(&mut c, "SELECT * FROM shop.items").await;
        lakeshift_tests::iceberg_text_rows(&self.cat, "shop", "items", None)
            .await
            .is_some_and(|got| got == want)
    }
}

/// Faults on the S3 side, through a proxy in front of the server: the server refusing
/// every request while a job is checkpointing, for longer than the job's
/// `target-retry-seconds` (the job stops with the object store's error, never half a
/// commit), then serving again (the next run resumes exactly);
/// a slow server (the job finishes, exact).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_faults_stop_the_job_cleanly_and_it_resumes_exactly() {
    // It gives up after 5 s of a refusing store.
    let p = ProxiedJob::start("faulty", 904, "0.1\n  target-retry-seconds: 5\n").await;
    let (proxy, env, job, cat) = (&p.proxy, p.env.clone(), &p.job, &p.cat);
    let mut c = p.maria.conn(None).await;
    let equal = || p.items_equal();
    let mut running = Command::new(env!("CARGO_BIN_EXE_lakeshift"))
        .args(["sync", "--config", &job.display().to_string()])
        .envs(env.clone())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    lakeshift_tests::wait_until("the snapshot is in S3", equal).await;
    // The server refuses everything; the job has changes to checkpoint.
    proxy.set(lakeshift_tests::FaultProxy::REFUSE);
    c.query_drop(
        "INSERT INTO shop.items VALUES (3, 'c'); UPDATE shop.items SET name = 'A' WHERE id = 1",
    )
    .await
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let status = loop {
        if let Some(st) = running.try_wait().unwrap() {
            break st;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the job neither stopped nor committed while S3 refused every request"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    let mut err = String::new();
    use std::io::Read;
    running
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(!status.success(), "{err}");
    assert!(
        err.contains("error:") && err.contains("faulty/lake"),
        "{err}"
    );
    eprintln!(
        "with S3 refusing: {}",
        err.lines()
            .find(|l| l.contains("error:"))
            .unwrap_or_default()
    );
    // Nothing half-committed: the table reads as the snapshot left it.
    let rows = lakeshift_tests::iceberg_text_rows(cat, "shop", "items", None)
        .await
        .unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    // Served again: the next run resumes exactly.
    proxy.set(lakeshift_tests::FaultProxy::PASS);
    c.query_drop("DELETE FROM shop.items WHERE id = 2; INSERT INTO shop.items VALUES (4, 'd')")
        .await
        .unwrap();
    lakeshift(
        &[
            "sync",
            "--config",
            &job.display().to_string(),
            "--until-end",
        ],
        env.clone(),
    );
    assert!(equal().await, "the lake after the resume");
    // A slow server: every chunk 20 ms late.
    proxy.set(lakeshift_tests::FaultProxy::slow(20));
    c.query_drop(
        "UPDATE shop.items SET name = 'slow' WHERE id = 3; INSERT INTO shop.items VALUES (5, 'e')",
    )
    .await
    .unwrap();
    lakeshift(
        &[
            "sync",
            "--config",
            &job.display().to_string(),
            "--until-end",
        ],
        env,
    );
    assert!(equal().await, "the lake after a slow server");
    // No data file committed twice.
    let _ = lakeshift_tests::check_every_snapshot(cat, "shop", &["items"], &[], |w| {
        (w.file_index(), w.offset)
    })
    .await;
}

/// The object store refusing every request for a while (a restart, a network fault)
/// while the job has changes to checkpoint: the job waits it out, starting again from
/// its last checkpoint, says so, and commits once the store serves; it never stops.
/// regression: the job stopped at the first refused request (exit 1), as a catalog
/// crash once did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_store_that_refuses_for_a_while_is_waited_out() {
    let p = ProxiedJob::start("blip", 907, "0.2\n").await;
    let proxy = &p.proxy;
    let mut c = p.maria.conn(None).await;
    let equal = || p.items_equal();
    let mut running = p.spawn();
    lakeshift_tests::wait_until("the snapshot is in S3", equal).await;
    proxy.set(lakeshift_tests::FaultProxy::REFUSE);
    let refused = proxy.refused();
    c.query_drop(
        "INSERT INTO shop.items VALUES (3, 'c'); UPDATE shop.items SET name = 'A' WHERE id = 1",
    )
    .await
    .unwrap();
    // The job met the refusal and said it will try again.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while proxy.refused() == refused || !p.log().contains("trying again") {
        if let Some(st) = running.try_wait().unwrap() {
            panic!("the job stopped ({st}) while S3 refused: {}", p.log());
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the job did not report the refused object store within 120 s: {}",
            p.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    proxy.set(lakeshift_tests::FaultProxy::PASS);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    while !equal().await {
        if let Some(st) = running.try_wait().unwrap() {
            panic!("the job stopped ({st}) after S3 served again: {}", p.log());
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the changes did not reach S3 within 180 s of it serving again: {}",
            p.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    let _ = Command::new("kill").arg(running.id().to_string()).status();
    let st = running.wait().unwrap();
    assert!(st.success(), "{}", p.log());
    // No data file committed twice, every snapshot a state the source had.
    let _ = lakeshift_tests::check_every_snapshot(&p.cat, "shop", &["items"], &[], |w| {
        (w.file_index(), w.offset)
    })
    .await;
}

/// SIGTERM while the object store refuses every request and the job has changes
/// to commit: the job does not wait out the outage (120 s by default) but ends
/// within seconds, saying that what it read was not committed; the next run, with
/// the store serving, brings every change.
/// regression: a stopping job started again and again for the whole
/// `target-retry-seconds` (the fuzzer's Maria->IcebergS3 seed 471295797: no exit
/// within 120 s of SIGINT).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_while_the_object_store_refuses_ends_within_seconds() {
    let p = ProxiedJob::start("stopblip", 908, "0.2\n").await;
    let proxy = &p.proxy;
    let mut c = p.maria.conn(None).await;
    let equal = || p.items_equal();
    let mut running = p.spawn();
    lakeshift_tests::wait_until("the snapshot is in S3", equal).await;
    proxy.set(lakeshift_tests::FaultProxy::REFUSE);
    c.query_drop("INSERT INTO shop.items VALUES (3, 'c'); DELETE FROM shop.items WHERE id = 2")
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !p.log().contains("trying again") {
        assert!(running.try_wait().unwrap().is_none(), "{}", p.log());
        assert!(std::time::Instant::now() < deadline, "{}", p.log());
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let _ = Command::new("kill").arg(running.id().to_string()).status();
    let stopped = std::time::Instant::now();
    let deadline = stopped + std::time::Duration::from_secs(60);
    let st = loop {
        if let Some(st) = running.try_wait().unwrap() {
            break st;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no exit within 60 s of SIGTERM while S3 refused: {}",
            p.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    let log = p.log();
    assert!(!st.success(), "{log}");
    assert!(
        log.contains("was not committed") && log.contains("stopblip/lake"),
        "{log}"
    );
    eprintln!(
        "ended {:.1} s after SIGTERM",
        stopped.elapsed().as_secs_f64()
    );
    proxy.set(lakeshift_tests::FaultProxy::PASS);
    lakeshift(
        &[
            "sync",
            "--config",
            &p.job.display().to_string(),
            "--until-end",
        ],
        p.env.clone(),
    );
    assert!(equal().await, "the lake after the next run");
}

/// A DDL whose barrier commit waits on an object store slower than the barrier's
/// time limit (5 s here): the job says so, waits, applies the DDL and stays exact.
/// The DDL adds a column with a default to a table with rows, so its barrier itself
/// rewrites the table's files (the insert before it may be in a checkpoint of its
/// own: a due checkpoint at its commit is taken before the DDL arrives).
/// regression: the job stopped ("the DDL barrier ... did not complete within 5 s"),
/// as a Kafka consumer writing to S3 did under load in CI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ddl_barrier_slowed_by_the_object_store_waits_and_lands() {
    // Checkpoints every 4 s; the barrier's limit 5 s.
    let p = ProxiedJob::start("slowddl", 905, "4\n  barrier-timeout-intervals: 1\n").await;
    let proxy = &p.proxy;
    let mut c = p.maria.conn(None).await;
    let equal = || p.items_equal();
    let mut running = p.spawn();
    let log_text = || p.log();
    lakeshift_tests::wait_until("the snapshot is in S3", equal).await;
    // An update first, at full speed (it builds the table's row index).
    c.query_drop("UPDATE shop.items SET name = 'A' WHERE id = 1")
        .await
        .unwrap();
    lakeshift_tests::wait_until("the update is in S3", equal).await;
    // Every chunk 120 ms late: the barrier's fill (reading the table's files, writing
    // them again) and commit take well over the 5 s limit (about 12 s on the machine
    // this was written on) and well under the 50 s at which the job gives up.
    proxy.set(lakeshift_tests::FaultProxy::slow(120));
    c.query_drop(
        "INSERT INTO shop.items VALUES (3, 'c'); ALTER TABLE shop.items ADD COLUMN n INT DEFAULT 7",
    )
    .await
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    while !equal().await {
        if let Some(st) = running.try_wait().unwrap() {
            panic!(
                "the job stopped ({st}) on a slow object store: {}",
                log_text()
            );
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the DDL did not land within 180 s: {}",
            log_text()
        );
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    let text = log_text();
    assert!(
        text.contains("the DDL barrier at") && text.contains("is taking"),
        "the slow barrier was not reported: {text}"
    );
    proxy.set(lakeshift_tests::FaultProxy::PASS);
    let _ = Command::new("kill").arg(running.id().to_string()).status();
    let st = running.wait().unwrap();
    assert!(st.success(), "{}", log_text());
}

/// A job killed (SIGKILL) while it waits on a slow DDL barrier: the next run, with
/// the object store fast again, applies the DDL and the rows after it once, and no
/// data file is committed twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_killed_inside_a_slow_ddl_barrier_resumes_exactly() {
    let p = ProxiedJob::start("killddl", 906, "4\n  barrier-timeout-intervals: 1\n").await;
    let mut c = p.maria.conn(None).await;
    let mut running = p.spawn();
    lakeshift_tests::wait_until("the snapshot is in S3", || p.items_equal()).await;
    p.proxy.set(lakeshift_tests::FaultProxy::slow(1000));
    c.query_drop(
        "INSERT INTO shop.items VALUES (3, 'c'); ALTER TABLE shop.items ADD COLUMN n INT DEFAULT 7;
         INSERT INTO shop.items VALUES (4, 'd', 4); UPDATE shop.items SET n = 1 WHERE id = 1",
    )
    .await
    .unwrap();
    lakeshift_tests::wait_until("the barrier is reported slow", || async {
        p.log().contains("is taking")
    })
    .await;
    running.kill().unwrap();
    running.wait().unwrap();
    p.proxy.set(lakeshift_tests::FaultProxy::PASS);
    lakeshift(
        &[
            "sync",
            "--config",
            &p.job.display().to_string(),
            "--until-end",
        ],
        p.env.clone(),
    );
    assert!(p.items_equal().await, "the lake after the restart");
    let _ = lakeshift_tests::check_every_snapshot(&p.cat, "shop", &["items"], &[], |w| {
        (w.file_index(), w.offset)
    })
    .await;
}

/// Two jobs, each with its own local state folder (as on two hosts), share one
/// bucket and one PostgreSQL catalog and write disjoint tables at the same time:
/// every table equals its source; one job is then killed and run again (same state
/// folder) while the other goes on, and both stay exact. (Moving a job to a host
/// without its state folder: `a_job_moves_to_another_host_through_the_bucket`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_jobs_share_a_bucket_and_a_catalog() {
    let (s3, maria, _pg, catalog) = shared_setup("shared").await;
    let mut c = maria.conn(None).await;
    c.query_drop(
        "CREATE DATABASE a; CREATE DATABASE b;
         CREATE TABLE a.t (id INT PRIMARY KEY, v VARCHAR(20));
         CREATE TABLE b.t (id INT PRIMARY KEY, v VARCHAR(20));
         INSERT INTO a.t VALUES (1, 'a1'); INSERT INTO b.t VALUES (1, 'b1');",
    )
    .await
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let job = |name: &str, db: &str, id: u32| {
        let d = tmp.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("job.yaml");
        std::fs::write(
            &p,
            format!(
                "source:\n  type: mariadb\n  hostname: 127.0.0.1\n  port: {}\n  username: root\n  server-id: {id}\n  tables: ['{db}\\..*']\nsink:\n  type: iceberg\n  warehouse: s3://shared/lake\n  catalog: {catalog}\npipeline:\n  name: {name}\n  state: {}\n  checkpoint-interval-seconds: 0.1\n",
                maria.port,
                d.join("state").display()
            ),
        )
        .unwrap();
        p
    };
    let (ja, jb) = (job("ja", "a", 911), job("jb", "b", 912));
    let spawn = |j: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_lakeshift"))
            .args(["sync", "--config", &j.display().to_string()])
            .envs(s3.env())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let (mut pa, mut pb) = (spawn(&ja), spawn(&jb));
    for i in 2..40 {
        c.query_drop(format!(
            "INSERT INTO a.t VALUES ({i}, 'a{i}'); INSERT INTO b.t VALUES ({i}, 'b{i}'); UPDATE a.t SET v = 'x{i}' WHERE id = {}; DELETE FROM b.t WHERE id = {}",
            i / 2,
            i / 3
        ))
        .await
        .unwrap();
    }
    let cat = lake(&s3, "s3://shared/lake", &catalog).await;
    for db in ["a", "b"] {
        let want = lakeshift_tests::mysql_text_rows(&mut c, &format!("SELECT * FROM {db}.t")).await;
        let cat = &cat;
        lakeshift_tests::wait_until(&format!("{db}.t is in the shared lake"), || {
            let want = want.clone();
            async move {
                lakeshift_tests::iceberg_text_rows(cat, db, "t", None)
                    .await
                    .is_some_and(|got| got == want)
            }
        })
        .await;
    }
    assert!(pa.try_wait().unwrap().is_none() && pb.try_wait().unwrap().is_none());
    pa.kill().unwrap();
    let _ = pa.wait();
    // Job a goes on in another process while b runs.
    c.query_drop("INSERT INTO a.t VALUES (100, 'later'); UPDATE b.t SET v = 'late' WHERE id = 30")
        .await
        .unwrap();
    lakeshift(
        &["sync", "--config", &ja.display().to_string(), "--until-end"],
        s3.env(),
    );
    for db in ["a", "b"] {
        let want = lakeshift_tests::mysql_text_rows(&mut c, &format!("SELECT * FROM {db}.t")).await;
        let cat = &cat;
        lakeshift_tests::wait_until(&format!("{db}.t after the hand-over"), || {
            let want = want.clone();
            async move {
                lakeshift_tests::iceberg_text_rows(cat, db, "t", None)
                    .await
                    .is_some_and(|got| got == want)
            }
        })
        .await;
    }
    pb.kill().unwrap();
    let _ = pb.wait();
}

/// A data file of several row groups (16 MiB each, written as each completes) goes
/// up as a multipart upload in parts of at least S3's 5 MiB (the object store layer's
/// default chunking), and reads back whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_files_go_up_in_parts() {
    let (s3, maria) = tokio::join!(S3Server::start("large"), MariaDb::start());
    let mut c = maria.conn(None).await;
    c.query_drop(
        "CREATE DATABASE shop;
         CREATE TABLE shop.big (id INT PRIMARY KEY, v TEXT);
         INSERT INTO shop.big SELECT seq, CONCAT(SHA2(seq, 512), SHA2(seq + 1000000, 512))
           FROM shop.seq_1_to_150000;",
    )
    .await
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let catalog = format!("sqlite://{}/catalog.db", tmp.path().display());
    let job = tmp.path().join("job.yaml");
    std::fs::write(
        &job,
        format!(
            "source:\n  type: mariadb\n  hostname: 127.0.0.1\n  port: {}\n  username: root\n  server-id: 905\n  tables: ['shop\\..*']\nsink:\n  type: iceberg\n  warehouse: s3://large/lake\n  catalog: {catalog}\npipeline:\n  name: large\n  state: {}\n",
            maria.port,
            tmp.path().join("state").display()
        ),
    )
    .unwrap();
    sync(&job, &s3);
    let objects = s3.objects("lake/shop/big/data/");
    assert!(
        objects
            .iter()
            .any(|(_, size, etag)| *size > 5 << 20 && etag.contains('-')),
        "no multipart data file above 5 MiB: {objects:?}"
    );
    let cat = lake(&s3, "s3://large/lake", &catalog).await;
    assert_lake(
        &mut c,
        &cat,
        &[("big", "SELECT id, v FROM shop.big")],
        "(multipart)",
    )
    .await;
}

/// A job moves to another host: the warehouse in S3 mirrors the job's state folder at
/// every checkpoint, so a process with an empty state folder (the new host) takes the
/// job over after the first one was killed, without a new snapshot, and stays exact;
/// the old host coming back with its stale folder is refused with the fix, and with
/// its folder emptied takes the newest state from the warehouse in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_moves_to_another_host_through_the_bucket() {
    let (s3, maria, _pg, catalog) = shared_setup("moving").await;
    let mut c = maria.conn(None).await;
    c.query_drop(
        "CREATE DATABASE shop;
         CREATE TABLE shop.items (id INT PRIMARY KEY, v VARCHAR(20));
         CREATE TABLE shop.nokey (k INT, v VARCHAR(20));
         INSERT INTO shop.items VALUES (1, 'a'), (2, 'b'); INSERT INTO shop.nokey VALUES (1, 'x'), (1, 'x');",
    )
    .await
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let host = |name: &str| {
        let d = tmp.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("job.yaml");
        std::fs::write(
            &p,
            format!(
                "source:\n  type: mariadb\n  hostname: 127.0.0.1\n  port: {}\n  username: root\n  server-id: 921\n  tables: ['shop\\..*']\nsink:\n  type: iceberg\n  warehouse: s3://moving/lake\n  catalog: {catalog}\npipeline:\n  name: moving\n  state: {}\n  checkpoint-interval-seconds: 0.1\n  owner-lease-seconds: 3\n",
                maria.port,
                d.join("state").display()
            ),
        )
        .unwrap();
        p
    };
    let (a, b) = (host("a"), host("b"));
    let checks = [
        ("items", "SELECT * FROM shop.items"),
        ("nokey", "SELECT * FROM shop.nokey"),
    ];
    let cat = lake(&s3, "s3://moving/lake", &catalog).await;
    let caught_up = || {
        let (cat, maria) = (&cat, &maria);
        async move {
            let mut c = maria.conn(None).await;
            for (t, sql) in checks {
                let want = lakeshift_tests::mysql_text_rows(&mut c, sql).await;
                if lakeshift_tests::iceberg_text_rows(cat, "shop", t, None).await != Some(want) {
                    return false;
                }
            }
            true
        }
    };
    // Host a runs the job and is killed with changes in flight.
    let mut on_a = Command::new(env!("CARGO_BIN_EXE_lakeshift"))
        .args(["sync", "--config", &a.display().to_string()])
        .envs(s3.env())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    for i in 3..30 {
        c.query_drop(format!(
            "INSERT INTO shop.items VALUES ({i}, 'v{i}'); UPDATE shop.items SET v = 'u{i}' WHERE id = {}; INSERT INTO shop.nokey VALUES ({}, 'x'); DELETE FROM shop.nokey WHERE k = {} LIMIT 1",
            i / 2,
            i % 4,
            (i + 1) % 4
        ))
        .await
        .unwrap();
        if i == 15 {
            lakeshift_tests::wait_until("host a caught up once", caught_up).await;
        }
    }
    on_a.kill().unwrap();
    let _ = on_a.wait();
    c.query_drop("ALTER TABLE shop.items ADD COLUMN n INT DEFAULT 7; INSERT INTO shop.items VALUES (100, 'later', 1)")
        .await
        .unwrap();
    // Host b, an empty state folder: the job's state comes from the bucket; its first
    // try is refused while the killed run's lease lasts, and the folder it read keeps
    // the right to take the job over once the lease runs out.
    let log = sync_when_free(&b, &s3).await;
    assert!(log.contains("read from the warehouse"), "{log}");
    assert!(log.contains("its lease ends in"), "{log}");
    assert!(caught_up().await, "the lake after the move\n{log}");
    // Host a comes back with its stale folder: refused, with the fix.
    c.query_drop("UPDATE shop.items SET v = 'back' WHERE id = 1")
        .await
        .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lakeshift"))
        .args(["sync", "--config", &a.display().to_string(), "--until-end"])
        .envs(s3.env())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("takes its newest state from the warehouse"),
        "{err}"
    );
    // Emptied, it takes the newest state and goes on.
    std::fs::remove_dir_all(tmp.path().join("a").join("state")).unwrap();
    let log = sync_when_free(&a, &s3).await;
    assert!(log.contains("read from the warehouse"), "{log}");
    assert!(caught_up().await, "the lake back on host a\n{log}");
    // No data file committed twice over all of it.
    let _ = lakeshift_tests::check_every_snapshot(&cat, "shop", &["items", "nokey"], &[], |w| {
        (w.file_index(), w.offset)
    })
    .await;
}

/// The job moves between two hosts eight times, each time killed at a seeded moment
/// (some after it caught up) and taken up on the other host from an emptied state
/// folder, while the workload runs: every committed snapshot equals the source at its
/// watermark, no data file is committed twice, and the end equals the source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_snapshot_stays_exact_while_the_job_moves_between_hosts() {
    let (s3, maria, _pg, catalog) = shared_setup("roaming").await;
    let mut c = maria.conn(None).await;
    c.query_drop(
        "CREATE DATABASE shop;
         CREATE TABLE shop.items (id BIGINT PRIMARY KEY, name VARCHAR(40), price DECIMAL(10,2));
         CREATE TABLE shop.nokey (k INT, v VARCHAR(20));",
    )
    .await
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let host = |name: &str| {
        let d = tmp.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("job.yaml");
        std::fs::write(
            &p,
            format!(
                "source:\n  type: mariadb\n  hostname: 127.0.0.1\n  port: {}\n  username: root\n  server-id: 931\n  tables: ['shop\\..*']\nsink:\n  type: iceberg\n  warehouse: s3://roaming/lake\n  catalog: {catalog}\npipeline:\n  name: roaming\n  state: {}\n  checkpoint-interval-seconds: 0.1\n  owner-lease-seconds: 1\n",
                maria.port,
                d.join("state").display()
            ),
        )
        .unwrap();
        p
    };
    let hosts = [host("a"), host("b")];
    let cat = lake(&s3, "s3://roaming/lake", &catalog).await;
    let mut rng = Rng(0x0040_a1e5);
    let mut oracle = vec![record(&mut c).await];
    let mut i = 0u64;
    for m in 0..8 {
        let job = &hosts[m % 2];
        // The other host's folder is stale now: this host starts from the bucket.
        let _ = std::fs::remove_dir_all(job.parent().unwrap().join("state"));
        sync_when_free(job, &s3).await;
        let mut child = Command::new(env!("CARGO_BIN_EXE_lakeshift"))
            .args(["sync", "--config", &job.display().to_string()])
            .envs(s3.env())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        for _ in 0..2 + rng.below(8) {
            step(&mut c, &mut rng, i).await;
            i += 1;
            oracle.push(record(&mut c).await);
        }
        if m % 3 == 0 {
            let want = lakeshift_tests::mysql_text_rows(&mut c, "SELECT * FROM shop.items").await;
            let cat = &cat;
            lakeshift_tests::wait_until("the job caught up on this host", || {
                let want = want.clone();
                async move {
                    lakeshift_tests::iceberg_text_rows(cat, "shop", "items", None)
                        .await
                        .is_some_and(|got| got == want)
                }
            })
            .await;
        }
        child.kill().unwrap();
        let _ = child.wait();
    }
    let last = &hosts[0];
    let _ = std::fs::remove_dir_all(last.parent().unwrap().join("state"));
    let log = sync_when_free(last, &s3).await;
    let (checked, files) =
        lakeshift_tests::check_every_snapshot(&cat, "shop", &KILL_TABLES, &oracle, |w| {
            (w.file_index(), w.offset)
        })
        .await;
    assert!(
        checked >= 8,
        "only {checked} snapshots checked ({files} files)\n{log}"
    );
    assert_lake(
        &mut c,
        &cat,
        &[
            ("items", "SELECT * FROM shop.items"),
            ("nokey", "SELECT * FROM shop.nokey"),
        ],
        &format!("after eight moves\n{log}"),
    )
    .await;
}

/// A process dies after it uploaded new versions of the state files but before the
/// manifest naming them (failpoint `shared-before-manifest`, at its third checkpoint):
/// the mirror still reads as the checkpoint before, and a host with an empty folder
/// takes the job over from there, exactly. (Files were overwritten in place before: the
/// next host stopped with "does not match the manifest".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_between_the_state_files_and_their_manifest_leaves_the_mirror_whole() {
    let (s3, maria, _pg, catalog) = shared_setup("torn").await;
    let mut c = maria.conn(None).await;
    c.query_drop(
        "CREATE DATABASE shop;
         CREATE TABLE shop.items (id INT PRIMARY KEY, v VARCHAR(20));
         INSERT INTO shop.items VALUES (1, 'a');",
    )
    .await
    .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let host = |name: &str| {
        let d = tmp.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("job.yaml");
        std::fs::write(
            &p,
            format!(
                "source:\n  type: mariadb\n  hostname: 127.0.0.1\n  port: {}\n  username: root\n  server-id: 941\n  tables: ['shop\\..*']\nsink:\n  type: iceberg\n  warehouse: s3://torn/lake\n  catalog: {catalog}\npipeline:\n  name: torn\n  state: {}\n  checkpoint-interval-seconds: 0.1\n  owner-lease-seconds: 1\n",
                maria.port,
                d.join("state").display()
            ),
        )
        .unwrap();
        p
    };
    let (a, b) = (host("a"), host("b"));
    sync(&a, &s3);
    c.query_drop("INSERT INTO shop.items VALUES (2, 'b')")
        .await
        .unwrap();
    sync(&a, &s3);
    c.query_drop(
        "UPDATE shop.items SET v = 'A' WHERE id = 1; INSERT INTO shop.items VALUES (3, 'c')",
    )
    .await
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lakeshift"))
        .args(["sync", "--config", &a.display().to_string(), "--until-end"])
        .envs(s3.env())
        .env("LAKESHIFT_FAILPOINT", "shared-before-manifest")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(86), "{err}");
    let log = sync_when_free(&b, &s3).await;
    assert!(log.contains("read from the warehouse"), "{log}");
    let cat = lake(&s3, "s3://torn/lake", &catalog).await;
    assert_lake(
        &mut c,
        &cat,
        &[("items", "SELECT * FROM shop.items")],
        &format!("after a kill between files and manifest\n{log}"),
    )
    .await;
}
