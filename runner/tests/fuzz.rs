//! The workload fuzzer: a seeded, deterministic-by-seed generator of source workloads
//! (single- and multi-row transactions, key changes, identical keyless rows, edge
//! values of each column type, hostile names, DDL) with faults between its steps
//! (SIGKILL, SIGTERM, SIGINT, a second SIGINT, a source or relational target server
//! crash, a full state disk; into an S3 lake, S3 refusing or slowing every request
//! and a crash of the catalog's PostgreSQL server), run against real servers for
//! every source x sink pair: MariaDB, PostgreSQL and a Debezium-format Kafka feed
//! (written from a MariaDB truth, see `KafkaFeed`) into Iceberg, PostgreSQL and
//! MariaDB. The oracle: after the last catch-up,
//! every source table equals its target table (rows, column names); and into Iceberg,
//! every catalog state a reader saw while the job ran (all tables' metadata
//! locations in one read of the catalog) is the source after one of its
//! transactions: no state holds part of a transaction (issue 36 item 18).
//!
//! A failure prints the seed, the pair and the shortest replay found (steps are
//! removed while the failure stays, within `LAKESHIFT_FUZZ_SHRINK_SECONDS`, 240 by
//! default); a seed that found a bug becomes a named test below.
//!
//! CI runs the fixed seeds of `every_pair_at_fixed_seeds` and one new seed a run
//! (`a_new_seed_every_run`, seed printed; `LAKESHIFT_FUZZ_SEED=N` replays one);
//! `LAKESHIFT_FUZZ_SECONDS=N` keeps drawing new seeds for N seconds.
//!
//! The graceful-stop tests (`*_stop_*`) are fixed workloads of this harness: a
//! writer moves rows while the job is stopped by a signal, repeatedly; nothing read
//! before the stop may be lost or repeated.

use lakeshift_tests::{MariaDb, PgServer};
use mysql_async::prelude::Queryable;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

type Rows = Vec<Vec<Option<String>>>;

// ---------------------------------------------------------------------------------
// Pairs and servers

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SrcKind {
    Maria,
    Pg,
    /// Debezium-format Kafka topics (JSON, no embedded schema) written from a MariaDB
    /// database, the truth: each step runs there, and what it changed (its tables
    /// compared before and after) is written to the topics as Debezium writes it.
    Kafka,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SinkKind {
    /// Iceberg, position deletes (the binlog sources' default).
    Iceberg,
    /// Iceberg, equality deletes.
    IcebergEq,
    Pg,
    Maria,
    /// Iceberg (position deletes) in S3 (moto's server, through a proxy that can
    /// refuse or slow every request) with its catalog in a PostgreSQL server (which
    /// can crash and restart).
    IcebergS3,
}

#[derive(Clone, Copy, Debug)]
struct Pair(SrcKind, SinkKind);

impl Pair {
    /// The SQL dialect of the source's statements (a Kafka feed's truth is MariaDB).
    fn sql(&self) -> SrcKind {
        match self.0 {
            SrcKind::Kafka => SrcKind::Maria,
            k => k,
        }
    }
}

impl std::fmt::Display for Pair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}->{:?}", self.0, self.1)
    }
}

const PAIRS: [Pair; 12] = [
    Pair(SrcKind::Maria, SinkKind::Iceberg),
    Pair(SrcKind::Maria, SinkKind::IcebergEq),
    Pair(SrcKind::Maria, SinkKind::Pg),
    Pair(SrcKind::Maria, SinkKind::Maria),
    Pair(SrcKind::Pg, SinkKind::Iceberg),
    Pair(SrcKind::Pg, SinkKind::Pg),
    Pair(SrcKind::Pg, SinkKind::Maria),
    Pair(SrcKind::Maria, SinkKind::IcebergS3),
    Pair(SrcKind::Pg, SinkKind::IcebergS3),
    // Kafka jobs write equality deletes.
    Pair(SrcKind::Kafka, SinkKind::IcebergEq),
    Pair(SrcKind::Kafka, SinkKind::Pg),
    Pair(SrcKind::Kafka, SinkKind::Maria),
];

enum Src {
    Maria(MariaDb),
    Pg(PgServer),
    Kafka(Box<KafkaFeed>),
}

enum Dst {
    Iceberg,
    Pg(PgServer),
    Maria(MariaDb),
    /// The S3 server, the proxy the job reaches it through, the catalog's server.
    IcebergS3(S3Lake),
}

struct S3Lake {
    s3: lakeshift_tests::S3Server,
    proxy: lakeshift_tests::FaultProxy,
    catalog: PgServer,
    /// The job reaches the catalog's server through this proxy (which can slow it).
    catalog_proxy: lakeshift_tests::FaultProxy,
}

impl S3Lake {
    /// The catalog as the test reads it (directly).
    fn catalog_uri(&self) -> String {
        format!(
            "postgresql://postgres@127.0.0.1:{}/catalog",
            self.catalog.port
        )
    }

    /// The catalog as the job reaches it (through the proxy).
    fn job_catalog_uri(&self) -> String {
        format!(
            "postgresql://postgres@127.0.0.1:{}/catalog",
            self.catalog_proxy.port
        )
    }
}

/// The bucket of the S3 lakes and the warehouse in it.
const WAREHOUSE_S3: &str = "s3://fuzz/lake";

/// A source server, a target, a job file and the running job process.
struct Rig {
    pair: Pair,
    src: Src,
    dst: Dst,
    dir: tempfile::TempDir,
    job: PathBuf,
    child: Option<Child>,
    /// The state folder's file system (`fs`, a small tmpfs) is full; the job may
    /// have stopped on it (it is started again when space is freed).
    disk_full: bool,
    stopped_on_full_disk: bool,
    mounted: bool,
    /// The log's length when the disk last filled (what the job said since is
    /// read), until the job starts again with room.
    full_since: Option<usize>,
    /// The S3 server is refused by the proxy; the job may have stopped on it (it is
    /// started again when S3 serves again); the log's length when it began.
    s3_down: bool,
    s3_since: Option<usize>,
    /// The proxy's refused connections when the refusal began.
    refused_before: u64,
    /// The job's checkpoint interval (seconds).
    interval: f64,
    /// The environment of the job's processes (the S3 endpoint: the proxy).
    env: Vec<(&'static str, String)>,
}

/// The database (MariaDB) or schema (PostgreSQL) every test table lives in.
const DB: &str = "fz";

impl Rig {
    async fn new(pair: Pair, interval: f64) -> Rig {
        let src = match pair.0 {
            SrcKind::Maria => Src::Maria(MariaDb::start().await),
            SrcKind::Kafka => Src::Kafka(Box::new(KafkaFeed::start().await)),
            SrcKind::Pg => {
                let s = PgServer::start_logical().await;
                s.create_db("app")
                    .await
                    .batch_execute(&format!("CREATE SCHEMA {DB}"))
                    .await
                    .unwrap();
                Src::Pg(s)
            }
        };
        let dst = match pair.1 {
            SinkKind::Iceberg | SinkKind::IcebergEq => Dst::Iceberg,
            SinkKind::Pg => {
                let s = PgServer::start().await;
                s.create_db("lake").await;
                Dst::Pg(s)
            }
            SinkKind::Maria => Dst::Maria(MariaDb::start().await),
            SinkKind::IcebergS3 => {
                let (s3, catalog) =
                    tokio::join!(lakeshift_tests::S3Server::start("fuzz"), PgServer::start());
                catalog.create_db("catalog").await;
                let proxy = lakeshift_tests::FaultProxy::start(s3.port).await;
                let catalog_proxy = lakeshift_tests::FaultProxy::start(catalog.port).await;
                Dst::IcebergS3(S3Lake {
                    s3,
                    proxy,
                    catalog,
                    catalog_proxy,
                })
            }
        };
        let env = match &dst {
            Dst::IcebergS3(l) => {
                let mut env = l.s3.env();
                env[0].1 = format!("http://127.0.0.1:{}", l.proxy.port);
                env
            }
            _ => Vec::new(),
        };
        let truth = match &src {
            Src::Maria(m) => Some(m),
            Src::Kafka(f) => Some(&f.truth),
            Src::Pg(_) => None,
        };
        if let Some(m) = truth {
            m.conn(None)
                .await
                .query_drop(format!("CREATE DATABASE {DB} CHARACTER SET utf8mb4"))
                .await
                .unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        let source = match &src {
            Src::Maria(m) => format!(
                "  type: mariadb\n  hostname: 127.0.0.1\n  port: {}\n  username: root\n  server-id: 901\n  tables: ['{DB}\\..*']\n  snapshot-chunk-rows: 50\n",
                m.port
            ),
            Src::Pg(p) => format!(
                "  type: postgres\n  hostname: 127.0.0.1\n  port: {}\n  username: postgres\n  database: app\n  tables: ['{DB}\\..*']\n  slot: fz\n  snapshot-chunk-rows: 50\n",
                p.port
            ),
            Src::Kafka(f) => format!(
                "  type: kafka\n  brokers: {}\n  group-id: fz\n  topic-prefix: {KAFKA_PREFIX}\n  tables: ['{DB}\\..*']\n",
                f.broker.bootstrap()
            ),
        };
        let sink = match (&dst, pair.1) {
            (Dst::Iceberg, k) => format!(
                "  type: iceberg\n  warehouse: {}\n{}",
                dir.path().join("warehouse").display(),
                if k == SinkKind::IcebergEq {
                    "  delete-mode: equality\n"
                } else {
                    ""
                }
            ),
            (Dst::Pg(p), _) => format!(
                "  type: postgres\n  url: postgres://postgres@127.0.0.1:{}/lake\n",
                p.port
            ),
            (Dst::Maria(m), _) => {
                format!("  type: mysql\n  url: mysql://root@127.0.0.1:{}\n", m.port)
            }
            (Dst::IcebergS3(l), _) => format!(
                "  type: iceberg\n  warehouse: {WAREHOUSE_S3}\n  catalog: {}\n",
                l.job_catalog_uri()
            ),
        };
        let job = dir.path().join("job.yaml");
        std::fs::write(
            &job,
            format!(
                "source:\n{source}sink:\n{sink}pipeline:\n  name: fz\n  state: {}\n  checkpoint-interval-seconds: {interval}\n  progress-seconds: 0\n",
                dir.path().join("fs/state").display()
            ),
        )
        .unwrap();
        let rig = Rig {
            pair,
            src,
            dst,
            dir,
            job,
            child: None,
            disk_full: false,
            stopped_on_full_disk: false,
            mounted: false,
            full_since: None,
            s3_down: false,
            s3_since: None,
            refused_before: 0,
            interval,
            env,
        };
        if let Src::Pg(_) = rig.src {
            // The DDL capture (event trigger) in the source database.
            let out = rig.lakeshift(&["pg-setup", "--config", &rig.job_arg(), "--apply"]);
            assert!(
                out.status.success(),
                "pg-setup: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        rig
    }

    /// A rig whose source holds `setup` (SQL), with the job started and its first
    /// snapshot committed.
    async fn running(pair: Pair, interval: f64, setup: &str) -> Rig {
        let mut rig = Rig::new(pair, interval).await;
        rig.exec(setup).await.unwrap();
        rig.start();
        rig.wait_for_log("snapshot done and committed").unwrap();
        rig
    }

    fn job_arg(&self) -> String {
        self.job.display().to_string()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("job.log")
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    fn lakeshift(&self, args: &[&str]) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_lakeshift"))
            .args(args)
            .envs(self.env.clone())
            .output()
            .unwrap()
    }

    /// Start the job (it runs on, its log appended to `job.log`).
    fn start(&mut self) {
        assert!(self.child.is_none());
        self.stopped_on_full_disk = false;
        if !self.disk_full {
            self.full_since = None;
        }
        if !self.s3_down {
            self.s3_since = None;
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_lakeshift"))
            .args(["sync", "--config", &self.job_arg()])
            .envs(self.env.clone())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    /// Whether the running job has ended on its own (an error: the test fails).
    fn check_running(&mut self) -> Result<(), String> {
        if let Some(c) = self.child.as_mut() {
            if let Some(st) = c.try_wait().unwrap() {
                self.child = None;
                // A full state folder may stop the job, with an error that says so
                // (also just after the space was freed: it started again then).
                if self.said_disk_full() {
                    if self.disk_full {
                        self.stopped_on_full_disk = true;
                    } else {
                        self.start();
                    }
                    return Ok(());
                }
                // S3 refusing every request must not: the job waits it out
                // (pipeline.target-retry-seconds).
                return Err(format!(
                    "the job ended on its own ({st}): {}",
                    self.log_tail()
                ));
            }
        }
        Ok(())
    }

    /// Whether the job said its disk was full since it filled (and has not been
    /// started with room since).
    fn said_disk_full(&self) -> bool {
        let Some(since) = self.full_since else {
            return false;
        };
        let log = std::fs::read(self.log_path()).unwrap_or_default();
        String::from_utf8_lossy(&log[since.min(log.len())..]).contains("No space left on device")
    }

    /// Whether the job stopped on the object store since S3 was refused (and has not
    /// been started with S3 serving since): its last error names the warehouse.
    fn said_s3_down(&self) -> bool {
        let Some(since) = self.s3_since else {
            return false;
        };
        let log = std::fs::read(self.log_path()).unwrap_or_default();
        let said = String::from_utf8_lossy(&log[since.min(log.len())..]).into_owned();
        said.lines()
            .any(|l| l.contains("error:") && l.contains("fuzz/lake"))
    }

    /// Whether the job, asked to stop while its target did not answer (a target or
    /// catalog restart just before the signal), ended saying it committed nothing.
    fn stopped_without_target(&self) -> bool {
        self.log_tail()
            .contains("stopping: the target did not answer, so what was read since the last checkpoint was not committed")
    }

    fn proxy(&self) -> &lakeshift_tests::FaultProxy {
        match &self.dst {
            Dst::IcebergS3(l) => &l.proxy,
            _ => panic!("an S3 fault without an S3 lake"),
        }
    }

    /// S3 refuses every request (the proxy cuts them) or serves again; a job that
    /// stopped on it starts again.
    fn set_s3(&mut self, mode: u64) -> Result<(), String> {
        self.proxy().set(mode);
        if mode == lakeshift_tests::FaultProxy::REFUSE {
            if !self.s3_down {
                self.s3_since =
                    Some(std::fs::metadata(self.log_path()).map_or(0, |m| m.len() as usize));
                self.refused_before = self.proxy().refused();
            }
            self.s3_down = true;
            return Ok(());
        }
        if self.s3_down {
            // The refusal lasts until the job met it (a connection refused), it
            // stopped, or three checkpoint intervals passed (nothing to write).
            let until = Instant::now() + Duration::from_secs_f64(3.0 * self.interval + 1.0);
            while self.proxy().refused() == self.refused_before
                && Instant::now() < until
                && self.child.is_some()
            {
                self.check_running()?;
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        self.s3_down = false;
        Ok(())
    }

    /// Put the state folder on a small file system of its own (a tmpfs), which
    /// the disk faults fill.
    fn mount_state_fs(&mut self) {
        let fs = self.dir.path().join("fs");
        std::fs::create_dir_all(&fs).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=32m", "tmpfs"])
            .arg(&fs)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "mounting a tmpfs for the state folder (the disk faults need root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.mounted = true;
    }

    /// Fill the state folder's file system to its last byte.
    fn fill_disk(&mut self) {
        use std::io::Write;
        assert!(self.mounted, "a disk fault without the state file system");
        self.full_since = Some(std::fs::metadata(self.log_path()).map_or(0, |m| m.len() as usize));
        let mut f = std::fs::File::create(self.dir.path().join("fs/filler")).unwrap();
        for chunk in [1 << 20, 4096, 1] {
            let buf = vec![0u8; chunk];
            while f.write_all(&buf).is_ok() {}
        }
        let _ = f.sync_all();
        self.disk_full = true;
    }

    /// Free the space again; a job that stopped on the full disk starts again.
    fn free_disk(&mut self) {
        if !self.disk_full {
            return;
        }
        std::fs::remove_file(self.dir.path().join("fs/filler")).unwrap();
        self.disk_full = false;
        if std::mem::take(&mut self.stopped_on_full_disk) && self.child.is_none() {
            self.start();
        }
    }

    /// Send `signals` (names for kill(1), a short pause between them) and wait for
    /// the job to end; its exit status.
    fn signal(&mut self, signals: &[&str]) -> Result<Option<i32>, String> {
        let Some(mut c) = self.child.take() else {
            return Ok(None);
        };
        if signals.iter().any(|s| *s != "KILL") {
            lakeshift_tests::wait_for_handlers(c.id());
        }
        for (i, s) in signals.iter().enumerate() {
            if i > 0 {
                std::thread::sleep(Duration::from_millis(30));
            }
            let _ = Command::new("kill")
                .args([&format!("-{s}"), &c.id().to_string()])
                .status();
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(st) = c.try_wait().unwrap() {
                return Ok(st.code());
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                let _ = c.wait();
                return Err(format!(
                    "the job did not end within 120 s of {signals:?}: {}",
                    self.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The job stops on its own (within 120 s) with an error line holding `why`, and
    /// a run after it stops with the same error line.
    fn expect_stop(&mut self, why: &str) -> Result<(), String> {
        if self.child.is_none() {
            self.start();
        }
        let mut c = self.child.take().expect("started");
        let deadline = Instant::now() + Duration::from_secs(120);
        let st = loop {
            if let Some(st) = c.try_wait().unwrap() {
                break st;
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                let _ = c.wait();
                return Err(format!("the job did not stop within 120 s ({why})"));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let last_error = |log: &str| {
            log.lines()
                .rev()
                .find(|l| l.starts_with("error:"))
                .unwrap_or_default()
                .to_owned()
        };
        let first = last_error(&std::fs::read_to_string(self.log_path()).unwrap_or_default());
        if !st.success() && self.disk_full && first.contains("No space left on device") {
            // The full state disk stopped it first (writing down what comes before
            // the stop it owes): room again, and the stop it owes.
            std::fs::remove_file(self.dir.path().join("fs/filler")).unwrap();
            self.disk_full = false;
            self.stopped_on_full_disk = false;
            return self.expect_stop(why);
        }
        if st.success() || !first.contains(why) {
            return Err(format!("expected a stop naming {why:?}, got {st}: {first}"));
        }
        let out = self.lakeshift(&["sync", "--config", &self.job_arg(), "--until-end"]);
        let again = last_error(&String::from_utf8_lossy(&out.stderr));
        if out.status.success() || again != first {
            return Err(format!(
                "a run after the stop ended otherwise ({}): {again}\n  the stop: {first}",
                out.status
            ));
        }
        eprintln!("fuzz: the job stopped as expected, the same on the next run: {first}");
        Ok(())
    }

    /// A fault while the job runs; the job is started again after it.
    async fn fault(&mut self, f: Fault) -> Result<(), String> {
        self.check_running()?;
        match f {
            Fault::Kill => {
                self.signal(&["KILL"])?;
            }
            Fault::Term | Fault::Int => {
                let sig = if f == Fault::Term { "TERM" } else { "INT" };
                let code = self.signal(&[sig])?;
                if code != Some(0)
                    && !self.said_disk_full()
                    && !self.said_s3_down()
                    && !self.stopped_without_target()
                {
                    return Err(format!(
                        "SIGINT/TERM: the job exited with {code:?}, not 0: {}",
                        self.log_tail()
                    ));
                }
            }
            Fault::IntTwice => {
                let code = self.signal(&["INT", "INT"])?;
                // A second SIGINT stops at once (130), unless the first stop was
                // done before it came (0).
                if !matches!(code, Some(0) | Some(130))
                    && !self.said_disk_full()
                    && !self.said_s3_down()
                    && !self.stopped_without_target()
                {
                    return Err(format!(
                        "a second SIGINT: the job exited with {code:?}: {}",
                        self.log_tail()
                    ));
                }
            }
            Fault::SourceRestart => {
                match &mut self.src {
                    Src::Maria(m) => m.restart().await,
                    Src::Pg(p) => p.crash_and_restart().await,
                    // The broker keeps its topics in memory: a restart would lose
                    // them (no broker restarts here).
                    Src::Kafka(_) => {}
                }
                return Ok(()); // the job reconnects on its own
            }
            Fault::DiskFull => {
                self.fill_disk();
                return Ok(());
            }
            Fault::DiskFreed => {
                self.free_disk();
                return Ok(());
            }
            Fault::TargetRestart => {
                match &mut self.dst {
                    Dst::Pg(p) => p.crash_and_restart().await,
                    Dst::Maria(m) => m.restart().await,
                    Dst::IcebergS3(l) => l.catalog.crash_and_restart().await,
                    Dst::Iceberg => {}
                }
                return Ok(()); // the job reconnects on its own
            }
            Fault::S3Refuse => {
                return self.set_s3(lakeshift_tests::FaultProxy::REFUSE);
            }
            Fault::S3Slow => {
                return self.set_s3(lakeshift_tests::FaultProxy::slow(40));
            }
            Fault::S3Serves => {
                return self.set_s3(lakeshift_tests::FaultProxy::PASS);
            }
        }
        self.start();
        Ok(())
    }

    /// Wait until the job loaded what the source held when it started: its snapshot
    /// (a Kafka job has none: until the target equals the source).
    async fn wait_for_first_load(&mut self) -> Result<(), String> {
        if !matches!(self.src, Src::Kafka(_)) {
            return self.wait_for_log("snapshot done and committed");
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let differs = match self.compare().await {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            self.check_running()?;
            if Instant::now() > deadline {
                return Err(format!(
                    "the target did not reach the topics' state within 120 s: {differs}\n{}",
                    self.log_tail()
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Wait (at most 120 s) until the job's log holds `line`.
    fn wait_for_log(&mut self, line: &str) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
            if log.contains(line) {
                return Ok(());
            }
            self.check_running()?;
            if Instant::now() > deadline {
                return Err(format!(
                    "no `{line}` in the job's log within 120 s: {}",
                    self.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stop the job (SIGTERM), then `sync --until-end`: it must end with exit 0.
    fn catch_up(&mut self) -> Result<(), String> {
        if self.disk_full {
            self.check_running()?;
            self.free_disk();
        }
        if matches!(self.dst, Dst::IcebergS3(_)) {
            self.check_running()?;
            self.set_s3(lakeshift_tests::FaultProxy::PASS)?;
        }
        if self.child.is_some() {
            self.check_running()?;
            let code = self.signal(&["TERM"])?;
            if code != Some(0)
                && !self.said_disk_full()
                && !self.said_s3_down()
                && !self.stopped_without_target()
            {
                return Err(format!("SIGTERM: exit {code:?}: {}", self.log_tail()));
            }
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .unwrap();
        let mut c = Command::new(env!("CARGO_BIN_EXE_lakeshift"))
            .args(["sync", "--config", &self.job_arg(), "--until-end"])
            .envs(self.env.clone())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(300);
        let st = loop {
            if let Some(st) = c.try_wait().unwrap() {
                break st;
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                let _ = c.wait();
                return Err(format!(
                    "the catch-up did not end within 300 s: {}",
                    self.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        if !st.success() {
            return Err(format!("catch-up failed ({st}): {}", self.log_tail()));
        }
        Ok(())
    }

    /// Run SQL on the source (several statements, one round trip).
    async fn exec(&mut self, sql: &str) -> Result<(), String> {
        let r = match &mut self.src {
            Src::Maria(m) => match mysql_async::Conn::new(m.opts(Some(DB))).await {
                Ok(mut c) => {
                    let r = c.query_drop(sql).await.map_err(|e| e.to_string());
                    let _ = c.disconnect().await;
                    r
                }
                Err(e) => Err(e.to_string()),
            },
            Src::Pg(p) => {
                let c = p.client("app").await;
                c.batch_execute(sql).await.map_err(|e| format!("{e:?}"))
            }
            Src::Kafka(f) => f.exec(sql).await,
        };
        r
    }

    /// The source's tables and each one's (column names, rows as text).
    async fn source_state(&self) -> BTreeMap<String, (Vec<String>, Rows)> {
        let mut out = BTreeMap::new();
        match &self.src {
            Src::Maria(m) => out = mysql_state(m).await,
            Src::Kafka(f) => out = mysql_state(&f.truth).await,
            Src::Pg(p) => {
                let c = p.client("app").await;
                let (tables, cols) = pg_tables(&c, DB, self.pair.1 == SinkKind::Pg).await;
                for t in tables {
                    let cs = cols[&t].clone();
                    let rows = pg_rows(&c, DB, &t, &cs).await;
                    out.insert(t, (cs, rows));
                }
            }
        }
        out
    }

    /// The target's tables of the test database, as `source_state` gives them.
    async fn target_state(&self) -> BTreeMap<String, (Vec<String>, Rows)> {
        let mut out = BTreeMap::new();
        match &self.dst {
            Dst::Iceberg | Dst::IcebergS3(_) => {
                let cat = self.lake().await;
                let tables = if cat.namespace_exists(DB).await.unwrap() {
                    cat.list_tables(DB).await.unwrap()
                } else {
                    Vec::new()
                };
                for t in tables {
                    let id = runner::iceberg::catalog::ident(DB, &t).unwrap();
                    let loaded = cat.load(&id).await.unwrap().unwrap();
                    let table = loaded.table(&cat.file_io).unwrap();
                    let cols = lakeshift_tests::column_names(table.metadata());
                    let rows = lakeshift_tests::iceberg_text_rows(&cat, DB, &t, None)
                        .await
                        .unwrap();
                    out.insert(t, (cols, rows));
                }
            }
            Dst::Pg(p) => {
                let c = p.client("lake").await;
                let (tables, cols) = pg_tables(&c, DB, true).await;
                for t in tables {
                    let cs = cols[&t].clone();
                    let rows = pg_rows(&c, DB, &t, &cs).await;
                    out.insert(t, (cs, rows));
                }
            }
            Dst::Maria(m) => out = mysql_state(m).await,
        }
        out
    }

    /// The Iceberg target's catalog (S3 read around the proxy).
    async fn lake(&self) -> runner::iceberg::Catalog {
        use runner::iceberg::{Catalog, CatalogConfig};
        let config = match &self.dst {
            Dst::IcebergS3(l) => CatalogConfig {
                name: "lakeshift".into(),
                warehouse: WAREHOUSE_S3.into(),
                uri: Some(l.catalog_uri()),
                s3_env: Some(l.s3.env_pairs()),
            },
            _ => CatalogConfig::local(self.dir.path().join("warehouse")),
        };
        // The catalog's server may be starting again after a crash.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match Catalog::open(&config).await {
                Ok(c) => return c,
                Err(e) if Instant::now() > deadline => panic!("the lake's catalog: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    /// A table of the local warehouse read with pyiceberg (when the interop Python
    /// is there): column names and rows as Python prints their values.
    fn pyiceberg_rows(&self, table: &str) -> Option<(Vec<String>, Rows)> {
        let wh = self.dir.path().join("warehouse");
        let script = r#"
import json, sys
from pyiceberg.catalog.sql import SqlCatalog
wh, ns, t = sys.argv[1], sys.argv[2], sys.argv[3]
c = SqlCatalog("lakeshift", uri="sqlite:///" + wh + "/catalog.db", warehouse="file://" + wh)
a = c.load_table((ns, t)).scan().to_arrow()
"#;
        pyiceberg_json(script, &[&wh.display().to_string(), DB, table])
    }

    /// A table read with pyiceberg from a metadata file (as `pyiceberg_rows`).
    fn pyiceberg_rows_at(&self, location: &str) -> Option<(Vec<String>, Rows)> {
        let script = r#"
import json, sys
from pyiceberg.table import StaticTable
a = StaticTable.from_metadata(sys.argv[1]).scan().to_arrow()
"#;
        pyiceberg_json(script, &[location])
    }

    /// The oracle: every source table equals its target table (by column name,
    /// case-insensitively; values compared as text, numbers without trailing
    /// fraction zeros), and the target has no table the source lacks.
    async fn compare(&self) -> Result<(), String> {
        let src = self.source_state().await;
        let dst = self.target_state().await;
        let lower = |m: &BTreeMap<String, (Vec<String>, Rows)>| -> BTreeMap<String, String> {
            m.keys().map(|k| (k.to_lowercase(), k.clone())).collect()
        };
        let (sl, dl) = (lower(&src), lower(&dst));
        let mut problems = Vec::new();
        for (lk, sk) in &sl {
            let Some(dk) = dl.get(lk) else {
                problems.push(format!("table {sk} is missing from the target"));
                continue;
            };
            let (scols, srows) = &src[sk];
            let (dcols, drows) = &dst[dk];
            // The target's column for each source column.
            let mut map = Vec::new();
            for c in scols {
                match dcols.iter().position(|d| same_name(d, c)) {
                    Some(i) => map.push(i),
                    None => problems.push(format!(
                        "{sk}: column {c} is missing from the target (target columns {dcols:?})"
                    )),
                }
            }
            if map.len() != scols.len() {
                continue;
            }
            if dcols.len() != scols.len() {
                problems.push(format!(
                    "{sk}: the target has columns {dcols:?}, the source {scols:?}"
                ));
                continue;
            }
            let norm_rows = |rows: &Rows, cols: Option<&[usize]>| -> Rows {
                let mut out: Rows = rows
                    .iter()
                    .map(|r| match cols {
                        Some(m) => m.iter().map(|&i| norm(r[i].as_deref())).collect(),
                        None => r.iter().map(|v| norm(v.as_deref())).collect(),
                    })
                    .collect();
                out.sort();
                out
            };
            let want = norm_rows(srows, None);
            let got = norm_rows(drows, Some(&map));
            if want != got {
                // The iceberg crate's reader (0.10.1) has been seen to read a wrong
                // value from a keyless table after ADD + DROP COLUMN and position
                // deletes, where pyiceberg reads the lake right: a table that differs
                // is read again with pyiceberg (position deletes only; it refuses
                // equality deletes), which has the last word.
                let again = match self.pair.1 {
                    SinkKind::Iceberg => self.pyiceberg_rows(dk),
                    _ => None,
                };
                match again {
                    Some((cols, rows))
                        if cols == *dcols && norm_rows(&rows, Some(&map)) == want =>
                    {
                        eprintln!(
                            "{sk}: the iceberg crate's reader differs from the source, pyiceberg reads the lake equal to it"
                        );
                    }
                    _ => problems.push(diff_rows(sk, &got, &want)),
                }
            }
        }
        for (lk, dk) in &dl {
            if !sl.contains_key(lk) {
                problems.push(format!("the target has table {dk}, the source has none"));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!("{}: {}", self.pair, problems.join("\n")))
        }
    }
}

// ---------------------------------------------------------------------------------
// The Kafka source: a Debezium-format feed written from a MariaDB truth

/// The Debezium topic prefix (`<prefix>.<db>.<table>` a table, `<prefix>` the schema
/// changes).
const KAFKA_PREFIX: &str = "dbz";

/// A MariaDB column as the feed encodes it.
#[derive(Clone, Debug, PartialEq)]
struct FeedColumn {
    name: String,
    /// information_schema's DATA_TYPE (`int`, `decimal`, `datetime`, ...).
    data_type: String,
    /// DATETIME_PRECISION (fractional digits of a time type).
    precision: u32,
    key: bool,
}

/// A table of the truth: its columns and rows (as text).
#[derive(Clone, Debug, Default)]
struct FeedTable {
    cols: Vec<FeedColumn>,
    rows: Rows,
}

/// Debezium's writer, played by the test: a MariaDB database (the truth) and a
/// broker. Each step runs on the truth; the tables before and after are compared
/// and the difference is produced as Debezium change events (keyed tables by key:
/// creates, updates with the full before image, deletes; keyless tables as deletes
/// and creates of whole rows), one source position a step with a row number an
/// event; DDL goes to the schema-change topic, a TRUNCATE is a truncate event.
struct KafkaFeed {
    broker: lakeshift_tests::Broker,
    truth: MariaDb,
    producer: rdkafka::producer::FutureProducer,
    topics: std::collections::BTreeSet<String>,
    /// The next step's binlog position (Debezium's `source.pos`).
    pos: u64,
}

impl KafkaFeed {
    async fn start() -> KafkaFeed {
        let (broker, truth) = tokio::join!(lakeshift_tests::Broker::start(), MariaDb::start());
        let producer = rdkafka::config::ClientConfig::new()
            .set("bootstrap.servers", broker.bootstrap())
            .set("message.timeout.ms", "30000")
            .create()
            .unwrap();
        let mut f = KafkaFeed {
            broker,
            truth,
            producer,
            topics: Default::default(),
            pos: 4,
        };
        f.topic(KAFKA_PREFIX).await;
        f
    }

    /// Create topic `name` (one partition) unless it was.
    async fn topic(&mut self, name: &str) {
        use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
        if !self.topics.insert(name.to_owned()) {
            return;
        }
        let admin: AdminClient<rdkafka::client::DefaultClientContext> =
            rdkafka::config::ClientConfig::new()
                .set("bootstrap.servers", self.broker.bootstrap())
                .create()
                .unwrap();
        let res = admin
            .create_topics(
                &[NewTopic::new(name, 1, TopicReplication::Fixed(1))],
                &AdminOptions::new(),
            )
            .await
            .unwrap();
        for r in res {
            if let Err((t, e)) = r {
                assert!(
                    e == rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists,
                    "creating topic {t}: {e}"
                );
            }
        }
    }

    /// A table's topic, as Debezium names it: characters Kafka refuses become `_`.
    fn table_topic(table: &str) -> String {
        let clean: String = format!("{DB}.{table}")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        format!("{KAFKA_PREFIX}.{clean}")
    }

    async fn send(&mut self, topic: &str, value: Option<serde_json::Value>) -> Result<(), String> {
        self.topic(topic).await;
        let payload = value.map(|v| v.to_string());
        let mut rec = rdkafka::producer::FutureRecord::<(), String>::to(topic);
        if let Some(p) = &payload {
            rec = rec.payload(p);
        }
        self.producer
            .send(rec, Duration::from_secs(30))
            .await
            .map(|_| ())
            .map_err(|(e, _)| format!("producing to {topic}: {e}"))
    }

    /// The truth's tables: columns (with types and key) and rows.
    async fn tables(&self) -> BTreeMap<String, FeedTable> {
        let mut c = self.truth.conn(None).await;
        let cols: Vec<(String, String, String, Option<u32>, String)> = c
            .exec(
                "SELECT c.table_name, c.column_name, c.data_type, c.datetime_precision, c.column_key FROM information_schema.columns c JOIN information_schema.tables t USING (table_schema, table_name) WHERE c.table_schema = ? AND t.table_type = 'BASE TABLE' ORDER BY c.table_name, c.ordinal_position",
                (DB,),
            )
            .await
            .unwrap();
        let mut out: BTreeMap<String, FeedTable> = BTreeMap::new();
        for (t, name, data_type, precision, key) in cols {
            out.entry(t).or_default().cols.push(FeedColumn {
                name,
                data_type: data_type.to_lowercase(),
                precision: precision.unwrap_or(0),
                key: key == "PRI",
            });
        }
        for (t, ft) in out.iter_mut() {
            let cols: Vec<(String, String)> = ft
                .cols
                .iter()
                .map(|c| (c.name.clone(), c.data_type.clone()))
                .collect();
            ft.rows = lakeshift_tests::mysql_text_rows(&mut c, &mysql_select(t, &cols)).await;
        }
        out
    }

    /// A value (MariaDB's text) as Debezium's JSON encodes it (time precision
    /// `adaptive_time_microseconds`, decimals as strings).
    fn encode(c: &FeedColumn, v: &Option<String>) -> serde_json::Value {
        use serde_json::json;
        let Some(v) = v else {
            return serde_json::Value::Null;
        };
        let date_days = |d: &str| {
            let y: i64 = d[0..4].parse().unwrap();
            let m: u32 = d[5..7].parse().unwrap();
            let dd: u32 = d[8..10].parse().unwrap();
            runner::calendar::days_from_civil(y, m, dd)
        };
        // `HH:MM:SS[.ffffff]` as microseconds.
        let micros_of_day = |t: &str| -> i64 {
            let (hms, frac) = t.split_once('.').unwrap_or((t, ""));
            let mut it = hms.split(':').map(|x| x.parse::<i64>().unwrap());
            let (h, m, s) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
            let us: i64 = format!("{frac:0<6}")[..6].parse().unwrap_or(0);
            ((h * 60 + m) * 60 + s) * 1_000_000 + us
        };
        match c.data_type.as_str() {
            "tinyint" | "smallint" | "mediumint" | "int" | "bigint" | "year" => {
                match v.parse::<i64>() {
                    Ok(i) => json!(i),
                    Err(_) => json!(v.parse::<u64>().unwrap()),
                }
            }
            "float" | "double" => json!(v.parse::<f64>().unwrap()),
            "date" => json!(date_days(v)),
            "datetime" => {
                let (d, t) = v.split_once(' ').unwrap();
                let us = date_days(d) * 86_400_000_000 + micros_of_day(t);
                // io.debezium.time.Timestamp (ms) up to 3 digits, MicroTimestamp above.
                if c.precision > 3 {
                    json!(us)
                } else {
                    json!(us.div_euclid(1000))
                }
            }
            "timestamp" => json!(format!("{}Z", v.replacen(' ', "T", 1))),
            "time" => {
                let neg = v.starts_with('-');
                let us = micros_of_day(v.trim_start_matches('-'));
                json!(if neg { -us } else { us })
            }
            "binary" | "varbinary" | "blob" | "tinyblob" | "mediumblob" | "longblob" => {
                // (Read as hex: `mysql_select`.)
                use base64::Engine as _;
                let bytes: Vec<u8> = (0..v.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&v[i..i + 2], 16).unwrap())
                    .collect();
                json!(base64::engine::general_purpose::STANDARD.encode(bytes))
            }
            _ => json!(v),
        }
    }

    fn image(t: &FeedTable, row: &[Option<String>]) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        for (c, v) in t.cols.iter().zip(row) {
            m.insert(c.name.clone(), Self::encode(c, v));
        }
        serde_json::Value::Object(m)
    }

    fn source_block(&self, table: Option<&str>, row: u64) -> serde_json::Value {
        serde_json::json!({
            "version": "2.7.3.Final", "connector": "mysql", "name": KAFKA_PREFIX,
            "ts_ms": 1_700_000_000_000u64, "snapshot": "false", "db": DB,
            "sequence": null, "table": table, "server_id": 1, "gtid": null,
            "file": "binlog.000001", "pos": self.pos, "row": row, "thread": 8, "query": null
        })
    }

    /// Run `sql` on the truth and write what it changed to Kafka.
    async fn exec(&mut self, sql: &str) -> Result<(), String> {
        let before = self.tables().await;
        {
            let mut c = mysql_async::Conn::new(self.truth.opts(Some(DB)))
                .await
                .map_err(|e| e.to_string())?;
            let r = c.query_drop(sql).await.map_err(|e| e.to_string());
            let _ = c.disconnect().await;
            r?;
        }
        let after = self.tables().await;
        self.pos += 1000;
        let first = sql
            .trim_start()
            .split(|c: char| !c.is_ascii_alphabetic())
            .next()
            .unwrap_or("")
            .to_ascii_uppercase();
        if first == "TRUNCATE" {
            for (t, a) in &after {
                if a.rows.is_empty() && before.get(t).is_some_and(|b| !b.rows.is_empty()) {
                    let v = serde_json::json!({
                        "before": null, "after": null, "source": self.source_block(Some(t), 0),
                        "op": "t", "ts_ms": 1_700_000_000_000u64, "transaction": null
                    });
                    self.send(&Self::table_topic(t), Some(v)).await?;
                }
            }
            return Ok(());
        }
        if matches!(first.as_str(), "CREATE" | "ALTER" | "DROP" | "RENAME") {
            // Debezium's tableChanges: the tables whose definition the DDL changed
            // (made, dropped, renamed: both names), as ids `"db"."table"`.
            let touched: std::collections::BTreeSet<&String> = before
                .keys()
                .chain(after.keys())
                .filter(|t| before.get(*t).map(|b| &b.cols) != after.get(*t).map(|a| &a.cols))
                .collect();
            let changes: Vec<serde_json::Value> = touched
                .iter()
                .map(|t| {
                    let kind = match (before.contains_key(*t), after.contains_key(*t)) {
                        (false, _) => "CREATE",
                        (true, false) => "DROP",
                        (true, true) => "ALTER",
                    };
                    serde_json::json!({"type": kind, "id": format!("\"{DB}\".\"{t}\"")})
                })
                .collect();
            eprintln!("feed: DDL at {}: {} {changes:?}", self.pos, short(sql));
            let v = serde_json::json!({
                "source": self.source_block(None, 0), "ts_ms": 1_700_000_000_000u64,
                "databaseName": DB, "schemaName": null, "ddl": sql, "tableChanges": changes
            });
            return self.send(KAFKA_PREFIX, Some(v)).await;
        }
        // Row changes, table by table.
        let mut events: Vec<(String, serde_json::Value)> = Vec::new();
        let mut row = 0u64;
        let empty = FeedTable::default();
        for (t, a) in &after {
            let b = before.get(t).unwrap_or(&empty);
            let mut event =
                |op: &str, bi: Option<serde_json::Value>, ai: Option<serde_json::Value>| {
                    let v = serde_json::json!({
                        "before": bi, "after": ai, "source": self.source_block(Some(t), row),
                        "op": op, "ts_ms": 1_700_000_000_000u64, "transaction": null
                    });
                    row += 1;
                    events.push((Self::table_topic(t), v));
                };
            let keys: Vec<usize> = (0..a.cols.len()).filter(|&i| a.cols[i].key).collect();
            if keys.is_empty() {
                // Whole rows, counted: fewer copies are deletes, more are creates.
                let mut count: BTreeMap<&Vec<Option<String>>, i64> = BTreeMap::new();
                for r in &a.rows {
                    *count.entry(r).or_default() += 1;
                }
                for r in &b.rows {
                    *count.entry(r).or_default() -= 1;
                }
                for (r, n) in count {
                    for _ in 0..(-n).max(0) {
                        event("d", Some(Self::image(b, r)), None);
                    }
                    for _ in 0..n.max(0) {
                        event("c", None, Some(Self::image(a, r)));
                    }
                }
                continue;
            }
            let key =
                |r: &Vec<Option<String>>| keys.iter().map(|&i| r[i].clone()).collect::<Vec<_>>();
            let old: BTreeMap<_, _> = b.rows.iter().map(|r| (key(r), r)).collect();
            let new: BTreeMap<_, _> = a.rows.iter().map(|r| (key(r), r)).collect();
            for (k, r) in &old {
                if !new.contains_key(k) {
                    event("d", Some(Self::image(b, r)), None);
                }
            }
            for (k, r) in &new {
                match old.get(k) {
                    None => event("c", None, Some(Self::image(a, r))),
                    Some(o) if o != r => {
                        event("u", Some(Self::image(b, o)), Some(Self::image(a, r)))
                    }
                    Some(_) => {}
                }
            }
        }
        for (topic, v) in events {
            self.send(&topic, Some(v)).await?;
        }
        Ok(())
    }
}

/// One catalog state: each table of the test namespace and its metadata location,
/// as one read of the catalog gave them.
type CatalogState = Vec<(String, String)>;

/// A reader of the warehouse's catalog while the job runs: it reads every table's
/// metadata location in one statement, as often as it can, and keeps each distinct
/// state it saw.
struct CatalogWatch {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<CatalogState>>>,
}

/// Where a [`CatalogWatch`] reads the catalog.
enum CatalogAt {
    Sqlite(PathBuf),
    /// A PostgreSQL catalog (the URI); the server may crash: reads reconnect.
    Pg(String),
}

impl CatalogWatch {
    fn start(at: CatalogAt) -> CatalogWatch {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                use sqlx::Connection;
                let mut states: Vec<CatalogState> = Vec::new();
                let mut sqlite: Option<sqlx::SqliteConnection> = None;
                let mut pg: Option<sqlx::PgConnection> = None;
                let sql = |p: &str| {
                    format!("SELECT table_name, metadata_location FROM iceberg_tables WHERE table_namespace = {p} ORDER BY table_name")
                };
                while !flag.load(Ordering::Relaxed) {
                    let read: Option<Result<Vec<(String, String)>, sqlx::Error>> = match &at {
                        CatalogAt::Sqlite(db) => {
                            if sqlite.is_none() && db.exists() {
                                let opts = sqlx::sqlite::SqliteConnectOptions::new()
                                    .filename(db)
                                    .read_only(true);
                                sqlite = sqlx::SqliteConnection::connect_with(&opts).await.ok();
                            }
                            match sqlite.as_mut() {
                                Some(c) => Some(
                                    sqlx::query_as(&sql("?")).bind(DB).fetch_all(&mut *c).await,
                                ),
                                None => None,
                            }
                        }
                        CatalogAt::Pg(uri) => {
                            if pg.is_none() {
                                pg = sqlx::PgConnection::connect(uri).await.ok();
                            }
                            match pg.as_mut() {
                                Some(c) => {
                                    let r = sqlx::query_as(&sql("$1"))
                                        .bind(DB)
                                        .fetch_all(&mut *c)
                                        .await;
                                    // The table may not exist yet; the server may
                                    // have crashed: read again on a new connection.
                                    if r.is_err() {
                                        pg = None;
                                    }
                                    Some(r)
                                }
                                None => None,
                            }
                        }
                    };
                    if let Some(Ok(st)) = read {
                        if states.last() != Some(&st) {
                            states.push(st);
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                states
            })
        });
        CatalogWatch {
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> Vec<CatalogState> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for CatalogWatch {
    /// A run that ended early stops its reader too.
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Tables as the oracle holds them: name -> (column names, rows as text).
type State = BTreeMap<String, (Vec<String>, Rows)>;

/// Where catalog state `lake` differs from source state `src` on the tables the lake
/// holds (rows compared on the columns both have, by name); empty when it is `src`.
fn state_differences(lake: &State, src: &State) -> Vec<String> {
    let mut out = Vec::new();
    for (t, (cols, rows)) in lake {
        let Some((_, (scols, srows))) = src.iter().find(|(k, _)| same_name(k, t)) else {
            out.push(format!("{t}: not in the source then"));
            continue;
        };
        let (mut li, mut si) = (Vec::new(), Vec::new());
        for (i, c) in cols.iter().enumerate() {
            if let Some(j) = scols.iter().position(|s| same_name(s, c)) {
                li.push(i);
                si.push(j);
            }
        }
        let project = |rows: &Rows, idx: &[usize]| -> Rows {
            let mut out: Rows = rows
                .iter()
                .map(|r| idx.iter().map(|&i| norm(r[i].as_deref())).collect())
                .collect();
            out.sort();
            out
        };
        let (got, want) = (project(rows, &li), project(srows, &si));
        if got != want {
            out.push(diff_rows(t, &got, &want));
        }
    }
    out
}

impl Rig {
    /// Every catalog state the watcher saw is the source after one of the recorded
    /// transactions (`sources`: the source after setup and after each step). States
    /// whose newest snapshot of a table is marked partial (a transaction over the
    /// memory budget) are skipped. Returns (states checked, states skipped).
    async fn check_catalog_states(
        &self,
        states: &[CatalogState],
        sources: &[State],
    ) -> Result<(usize, usize), String> {
        let cat = self.lake().await;
        // location -> (columns, rows, partial); None: the metadata file is gone.
        let mut read: std::collections::HashMap<String, Option<(Vec<String>, Rows, bool)>> =
            Default::default();
        let (mut checked, mut skipped) = (0, 0);
        'states: for (n, st) in states.iter().enumerate() {
            let mut lake = State::new();
            for (t, loc) in st {
                if !read.contains_key(loc) {
                    let got = match iceberg::spec::TableMetadata::read_from(&cat.file_io, loc).await
                    {
                        Ok(metadata) => {
                            let partial = metadata.current_snapshot().is_some_and(|s| {
                                s.summary()
                                    .additional_properties
                                    .contains_key(runner::sync::engine::PARTIAL)
                                    || s.summary()
                                        .additional_properties
                                        .contains_key(runner::sync::engine::LOADING)
                            });
                            let cols = lakeshift_tests::column_names(&metadata);
                            let loaded = runner::iceberg::catalog::LoadedTable {
                                ident: runner::iceberg::catalog::ident(DB, t).unwrap(),
                                metadata_location: loc.clone(),
                                metadata,
                            };
                            let table = loaded.table(&cat.file_io).unwrap();
                            let rows = lakeshift_tests::table_text_rows(&table, None).await;
                            Some((cols, rows, partial))
                        }
                        Err(_) => None,
                    };
                    read.insert(loc.clone(), got);
                }
                match &read[loc] {
                    Some((cols, rows, false)) => {
                        lake.insert(t.clone(), (cols.clone(), rows.clone()));
                    }
                    _ => {
                        skipped += 1;
                        continue 'states;
                    }
                }
            }
            if sources
                .iter()
                .any(|src| state_differences(&lake, src).is_empty())
            {
                checked += 1;
                continue 'states;
            }
            // The iceberg crate's reader (0.10.1) has been seen to misread a keyless
            // table after ADD + DROP COLUMN with position deletes (see `compare`):
            // the state is read again with pyiceberg, which has the last word.
            if self.pair.1 == SinkKind::Iceberg {
                let mut again = State::new();
                for (t, loc) in st {
                    if let Some(r) = self.pyiceberg_rows_at(loc) {
                        again.insert(t.clone(), r);
                    }
                }
                if again.len() == lake.len()
                    && sources
                        .iter()
                        .any(|src| state_differences(&again, src).is_empty())
                {
                    eprintln!("catalog state {n}: the iceberg crate's reader differs, pyiceberg reads it as a source state");
                    checked += 1;
                    continue 'states;
                }
            }
            // The closest source state: the fewest tables differ (the newest of those).
            let mut closest: Option<(usize, Vec<String>)> = None;
            for (i, src) in sources.iter().enumerate() {
                let why = state_differences(&lake, src);
                if closest.as_ref().is_none_or(|(_, w)| why.len() <= w.len()) {
                    closest = Some((i, why));
                }
            }
            let (i, why) = closest.unwrap_or_default();
            return Err(format!(
                "catalog state {n} of {} (tables {:?}) is not the source after any of its {} transactions: a reader saw part of a transaction. Against the closest (after {}): {}",
                states.len(),
                st.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>(),
                sources.len(),
                if i == 0 { "setup".to_owned() } else { format!("step source state {i}") },
                why.join("; ")
            ));
        }
        Ok((checked, skipped))
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        // LAKESHIFT_FUZZ_KEEP=DIR: a copy of the rig's folder (state, warehouse, log)
        // for a person replaying a seed.
        if let Some(keep) = std::env::var_os("LAKESHIFT_FUZZ_KEEP") {
            let _ = Command::new("cp")
                .arg("-a")
                .arg(self.dir.path())
                .arg(&keep)
                .status();
        }
        if self.mounted {
            let _ = Command::new("umount")
                .arg("-l")
                .arg(self.dir.path().join("fs"))
                .status();
        }
    }
}

/// Run `script` (which reads a table into the Arrow table `a`) with the interop
/// Python, when it is there: column names and rows as Python prints their values.
/// Python's values as the iceberg crate's reader prints them (`norm` does the rest).
const PY_TEXT: &str = r#"
import uuid
def text(v):
    if v is None: return None
    if isinstance(v, bool): return "true" if v else "false"
    if isinstance(v, (bytes, bytearray)): return v.hex()
    if isinstance(v, uuid.UUID): return v.hex
    if isinstance(v, float) and v != v: return "NaN"
    return str(v)
"#;

fn pyiceberg_json(script: &str, args: &[&str]) -> Option<(Vec<String>, Rows)> {
    let python = std::env::var("LAKESHIFT_INTEROP_PYTHON").ok()?;
    let script = format!(
        "{script}{PY_TEXT}rows = [[text(v) for v in r.values()] for r in a.to_pylist()]\nprint(json.dumps({{\"cols\": a.column_names, \"rows\": rows}}))\n"
    );
    let out = Command::new(python)
        .arg("-c")
        .arg(&script)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!("pyiceberg: {}", String::from_utf8_lossy(&out.stderr));
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let cols = serde_json::from_value(v["cols"].clone()).ok()?;
    let rows = serde_json::from_value(v["rows"].clone()).ok()?;
    Some((cols, rows))
}

/// SQL shortened for a message (huge values cut in the middle).
fn short(sql: &str) -> String {
    if sql.len() <= 600 {
        return sql.to_owned();
    }
    let cut = |mut i: usize| {
        while !sql.is_char_boundary(i) {
            i -= 1;
        }
        i
    };
    format!(
        "{} ...({} bytes)... {}",
        &sql[..cut(300)],
        sql.len(),
        &sql[cut(sql.len() - 200)..]
    )
}

/// Names equal but for case (Unicode's: a MySQL source's names are folded to lower
/// case on a PostgreSQL target, full-width letters too).
fn same_name(a: &str, b: &str) -> bool {
    a.to_lowercase() == b.to_lowercase()
}

fn quote_my(n: &str) -> String {
    format!("`{}`", n.replace('`', "``"))
}

fn quote_pg(n: &str) -> String {
    format!("\"{}\"", n.replace('"', "\"\""))
}

/// A MariaDB database's base tables: (column names, rows as text) each.
async fn mysql_state(m: &MariaDb) -> BTreeMap<String, (Vec<String>, Rows)> {
    let mut out = BTreeMap::new();
    let mut c = m.conn(None).await;
    let tables: Vec<String> = c
        .exec(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = ? AND table_type = 'BASE TABLE'",
            (DB,),
        )
        .await
        .unwrap();
    for t in tables {
        let cols: Vec<(String, String)> = c
            .exec(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position",
                (DB, &t),
            )
            .await
            .unwrap();
        let rows = lakeshift_tests::mysql_text_rows(&mut c, &mysql_select(&t, &cols)).await;
        out.insert(t, (cols.into_iter().map(|(c, _)| c).collect(), rows));
    }
    out
}

/// A MariaDB table's rows as the oracle reads them: bytes as lowercase hex (as the
/// other readers print them), BIT(n) as its number, the rest as MariaDB prints it. `cols`: (name,
/// information_schema's data_type) each.
fn mysql_select(table: &str, cols: &[(String, String)]) -> String {
    let list = cols
        .iter()
        .map(|(c, ty)| match ty.to_lowercase().as_str() {
            "binary" | "varbinary" | "blob" | "tinyblob" | "mediumblob" | "longblob" => {
                format!("LOWER(HEX({}))", quote_my(c))
            }
            // BIT(n) as its number (the lake's long; PostgreSQL's bit(n) read so too).
            "bit" => format!("CAST({} AS UNSIGNED)", quote_my(c)),
            _ => quote_my(c),
        })
        .collect::<Vec<_>>()
        .join(", ");
    format!("SELECT {list} FROM {DB}.{}", quote_my(table))
}

/// A PostgreSQL schema's base tables and their columns in order.
/// (`generated`: generated columns too; only a PostgreSQL target of a PostgreSQL
/// source has them.)
async fn pg_tables(
    c: &tokio_postgres::Client,
    schema: &str,
    generated: bool,
) -> (Vec<String>, BTreeMap<String, Vec<String>>) {
    let rows = c
        .query(
            "SELECT c.table_name::text, c.column_name::text FROM information_schema.columns c JOIN information_schema.tables t USING (table_schema, table_name) WHERE c.table_schema = $1 AND t.table_type = 'BASE TABLE' AND ($2 OR c.is_generated = 'NEVER') ORDER BY c.table_name, c.ordinal_position",
            &[&schema, &generated],
        )
        .await
        .unwrap();
    let mut cols: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in rows {
        cols.entry(r.get(0)).or_default().push(r.get(1));
    }
    (cols.keys().cloned().collect(), cols)
}

/// A PostgreSQL table's rows as the oracle reads them: bytes as lowercase hex,
/// booleans as digits (as the other readers print them), the rest as text.
async fn pg_rows(c: &tokio_postgres::Client, schema: &str, t: &str, cols: &[String]) -> Rows {
    let types: BTreeMap<String, String> = c
        .query(
            "SELECT column_name::text, data_type::text FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2",
            &[&schema, &t],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let list = cols
        .iter()
        .map(|c| match types.get(c).map(String::as_str) {
            Some("bytea") => format!("encode({}, 'hex')", quote_pg(c)),
            Some("boolean") => format!("({}::int)::text", quote_pg(c)),
            Some("bit") => format!("({}::bigint)::text", quote_pg(c)),
            _ => format!("{}::text", quote_pg(c)),
        })
        .collect::<Vec<_>>()
        .join(", ");
    lakeshift_tests::pg_text_rows(
        c,
        &format!("SELECT {list} FROM {}.{}", quote_pg(schema), quote_pg(t)),
    )
    .await
}

/// A value as the oracle compares it: `T` of ISO timestamps as a space (the lake's
/// reader prints them so), PostgreSQL booleans as digits, decimals without
/// trailing fraction zeros.
fn norm(v: Option<&str>) -> Option<String> {
    let v = v?;
    let mut s = v.replace('T', " ");
    // Booleans as digits (MariaDB's are).
    match s.as_str() {
        "true" => return Some("1".into()),
        "false" => return Some("0".into()),
        _ => {}
    }
    // A UUID without its dashes (the lake's reader prints its 16 bytes as hex).
    let uuid = s.len() == 36
        && s.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        });
    if uuid {
        return Some(s.replace('-', ""));
    }
    // An instant's UTC offset (PostgreSQL prints `+00`, the lake's reader `+00:00`).
    for zone in ["+00:00", "+00", "Z"] {
        if s.len() >= 19 + zone.len() && s.as_bytes()[4] == b'-' && s.ends_with(zone) {
            s.truncate(s.len() - zone.len());
            break;
        }
    }
    // A time of day's zero fraction.
    let b = s.as_bytes();
    let time = b.len() > 9
        && b.len() < 17
        && b[2] == b':'
        && b[5] == b':'
        && b[8] == b'.'
        && b[9..].iter().all(u8::is_ascii_digit);
    if time {
        return Some(s.trim_end_matches('0').trim_end_matches('.').to_owned());
    }
    let numeric = {
        let b = s.strip_prefix('-').unwrap_or(&s);
        let mut parts = b.splitn(2, '.');
        let int = parts.next().unwrap_or("");
        let frac = parts.next();
        !int.is_empty()
            && int.bytes().all(|c| c.is_ascii_digit())
            && frac.is_some_and(|f| !f.is_empty() && f.bytes().all(|c| c.is_ascii_digit()))
    };
    // A timestamp's zero fraction (DATETIME(6) prints `.000000`, PostgreSQL none).
    let b = s.as_bytes();
    let timestamp = b.len() > 20
        && b[4] == b'-'
        && b[13] == b':'
        && b[19] == b'.'
        && b[20..].iter().all(u8::is_ascii_digit);
    if numeric || timestamp {
        s = s.trim_end_matches('0').trim_end_matches('.').to_owned();
        if s == "-0" {
            s = "0".into();
        }
    }
    Some(s)
}

fn diff_rows(t: &str, got: &Rows, want: &Rows) -> String {
    let only = lakeshift_tests::only_in;
    let short = |rows: Rows| -> String {
        let n = rows.len();
        let mut s: Vec<String> = rows
            .into_iter()
            .take(5)
            .map(|r| {
                format!(
                    "{:?}",
                    r.into_iter()
                        .map(|v| v.map(|v| v.chars().take(40).collect::<String>()))
                        .collect::<Vec<_>>()
                )
            })
            .collect();
        if n > 5 {
            s.push(format!("... {} more", n - 5));
        }
        s.join(", ")
    };
    format!(
        "{t}: {} rows in the target, {} in the source; only in the target: {}; only in the source: {}",
        got.len(),
        want.len(),
        short(only(got, want)),
        short(only(want, got))
    )
}

// ---------------------------------------------------------------------------------
// The workload

/// splitmix64: every step a function of the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    Int,
    Big,
    Str,
    Text,
    Dec,
    Date,
    Ts,
    Dbl,
    /// MariaDB `ENUM('v0', ..., 'v{n-1}')` (a VARCHAR on PostgreSQL sources).
    Enum(u8),
    Bool,
    Small,
    /// Single precision (`FLOAT`, `REAL`).
    Real,
    /// A time of day (MariaDB's `TIME` also spans -838:59:59 to 838:59:59).
    Time,
    /// Bytes (`BLOB`, `BYTEA`).
    Bin,
    /// `JSON` (MariaDB: text checked as JSON), `JSONB`.
    Json,
    Uuid,
    /// MariaDB `BIGINT UNSIGNED` (PostgreSQL `NUMERIC(20,0)`).
    UBig,
    /// Microsecond timestamps (`DATETIME(6)`, `TIMESTAMP(6)`).
    Ts6,
    /// An instant (MariaDB `TIMESTAMP(6)`, PostgreSQL `TIMESTAMPTZ`).
    TsTz,
    /// MariaDB text in another character set (`latin1`, which MariaDB reads as
    /// Windows-1252); a VARCHAR on PostgreSQL sources.
    Latin1,
    /// MariaDB `TINYINT` (PostgreSQL `SMALLINT`).
    Tiny,
    /// MariaDB `MEDIUMINT` (PostgreSQL `INTEGER`).
    Medium,
    /// MariaDB `INT UNSIGNED` (PostgreSQL `BIGINT`).
    UInt,
    /// MariaDB `YEAR` (PostgreSQL `SMALLINT`).
    Year,
    /// `CHAR(4)`, values that fill it (PostgreSQL pads shorter ones with spaces).
    Char,
    /// MariaDB `SET('a', 'b', 'c')` (PostgreSQL `VARCHAR(10)`).
    Set,
    /// Short bytes: MariaDB `VARBINARY(64)`, PostgreSQL `BYTEA`.
    VarBin,
    /// MariaDB text in the character set `CHARSETS[i]` (a VARCHAR on PostgreSQL
    /// sources).
    Cs(u8),
}

/// MariaDB character sets drawn for text columns besides latin1, each with values
/// it holds.
const CHARSETS: [(&str, &[&str]); 9] = [
    (
        "utf8mb3",
        &["caf\u{e9} \u{4E2D}\u{6587}", "line\u{2028}sep", "plain"],
    ),
    (
        "cp1251",
        &[
            "\u{41f}\u{440}\u{438}\u{432}\u{435}\u{442}, \u{43c}\u{438}\u{440}",
            "\u{451}\u{401} \u{2116} \u{20ac}",
            "",
        ],
    ),
    (
        "utf16",
        &["emoji \u{1F600} \u{1D11E}", "\u{4E2D}\u{6587} \u{e9}", ""],
    ),
    (
        "sjis",
        &[
            "\u{65e5}\u{672c}\u{8a9e}",
            "\u{ff71}\u{ff72}\u{ff73} abc",
            "x",
        ],
    ),
    (
        "gbk",
        &["\u{4e2d}\u{6587}\u{5b57}\u{7b26}", "mixed \u{4e2d} ascii"],
    ),
    ("ucs2", &["BMP \u{fc} \u{4e2d} \u{2028}", "ascii"]),
    ("utf32", &["four bytes \u{1F600}", "\u{e9}"]),
    ("cp850", &["caf\u{e9} \u{f1}", "\u{c7}a"]),
    (
        "geostd8",
        &["\u{10d2}\u{10d0}\u{10db}\u{10d0}\u{10e0}\u{10ef}\u{10dd}\u{10d1}\u{10d0}"],
    ),
];

impl Ty {
    /// The types a drawn type may become (from a stream of its own, so a seed's
    /// statements stay what they were, their types and values aside): every column
    /// type family both SQL sources have.
    fn kin(self) -> &'static [Ty] {
        match self {
            Ty::Int => &[
                Ty::Int,
                Ty::Small,
                Ty::Bool,
                Ty::UBig,
                Ty::Tiny,
                Ty::Medium,
                Ty::UInt,
                Ty::Year,
            ],
            Ty::Dbl => &[Ty::Dbl, Ty::Real],
            Ty::Str => &[
                Ty::Str,
                Ty::Json,
                Ty::Uuid,
                Ty::Latin1,
                Ty::Char,
                Ty::Set,
                Ty::Cs(0),
                Ty::Cs(1),
                Ty::Cs(2),
                Ty::Cs(3),
                Ty::Cs(4),
                Ty::Cs(5),
                Ty::Cs(6),
                Ty::Cs(7),
                Ty::Cs(8),
            ],
            Ty::Text => &[Ty::Text, Ty::Bin, Ty::VarBin],
            Ty::Ts => &[Ty::Ts, Ty::Ts6, Ty::TsTz],
            Ty::Date => &[Ty::Date, Ty::Time],
            _ => &[],
        }
    }
}

const TYPES: [Ty; 9] = [
    Ty::Enum(2),
    Ty::Int,
    Ty::Big,
    Ty::Str,
    Ty::Text,
    Ty::Dec,
    Ty::Date,
    Ty::Ts,
    Ty::Dbl,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    Kill,
    Term,
    Int,
    IntTwice,
    SourceRestart,
    /// The relational target, or the Iceberg catalog's server, crashes and starts
    /// again (the job must reconnect).
    TargetRestart,
    /// S3 refuses every request (the job waits it out; a SIGTERM meanwhile may
    /// end it with an error naming the warehouse) ...
    S3Refuse,
    /// ... or answers slowly ...
    S3Slow,
    /// ... until it serves again.
    S3Serves,
    /// The state folder's file system fills up (the job may stop, saying so) ...
    DiskFull,
    /// ... and has room again (a job that stopped is started again).
    DiskFreed,
}

#[derive(Clone, Debug)]
enum Step {
    /// One source transaction (or DDL statement), as SQL.
    Sql(String),
    Fault(Fault),
    /// SQL after which the job must stop with an error holding the text, the same
    /// error on the run after (it ends the plan).
    Stop(String, &'static str),
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Sql(s) => write!(f, "sql: {}", short(s)),
            Step::Fault(x) => write!(f, "fault: {x:?}"),
            Step::Stop(s, why) => write!(f, "sql (the job stops: {why}): {}", short(s)),
        }
    }
}

#[derive(Clone)]
struct TableModel {
    name: String,
    keyed: bool,
    cols: Vec<(String, Ty)>,
    ids: Vec<i64>,
    next_id: i64,
    rows: usize,
    /// Rows were inserted once (its target table holds a snapshot).
    ever_rows: bool,
    /// Made while the job runs (not by the setup).
    made_running: bool,
}

/// What the generator knows of the source, to draw statements that apply.
struct Model {
    pair: Pair,
    tables: Vec<TableModel>,
    made: u32,
    /// What each drawn type becomes ([`Ty::kin`]).
    types: Rng,
    /// Hostile names ([`Model::hostile`]).
    names: Rng,
    /// Generated columns.
    extra: Rng,
    /// The job runs (the setup is done).
    running: bool,
    /// The steps begin once the initial snapshot is done.
    after_snapshot: bool,
    /// Tables moved out of the captured database (into `AWAY`).
    away: Vec<TableModel>,
}

/// A database (MariaDB) or schema (PostgreSQL) the job does not capture.
const AWAY: &str = "fz_away";

/// Column names drawn for added columns: plain, reserved words, mixed case is left
/// out (case folding differs between targets by design), a space, non-ASCII.
const NAMES: [&str; 10] = [
    "c",
    "note",
    "order",
    "select",
    "from",
    "value",
    "a b",
    "caf\u{e9}",
    "x_y",
    "ts",
];

impl Model {
    fn q(&self, n: &str) -> String {
        match self.pair.sql() {
            SrcKind::Maria | SrcKind::Kafka => quote_my(n),
            SrcKind::Pg => quote_pg(n),
        }
    }

    /// A column type: one of [`TYPES`] from `r`, then one of its kin.
    fn draw_type(&mut self, r: &mut Rng) -> Ty {
        let t = *r.pick(&TYPES);
        match t.kin() {
            [] => t,
            kin => *self.types.pick(kin),
        }
    }

    fn type_sql(&self, t: Ty) -> String {
        if let Ty::Enum(n) = t {
            return match self.pair.sql() {
                SrcKind::Maria | SrcKind::Kafka => format!(
                    "ENUM({})",
                    (0..n)
                        .map(|i| format!("'v{i}'"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                SrcKind::Pg => "VARCHAR(10)".into(),
            };
        }
        match (self.pair.sql(), t) {
            (_, Ty::Int) => "INT",
            (_, Ty::Big) => "BIGINT",
            (_, Ty::Str) => "VARCHAR(200)",
            (SrcKind::Maria | SrcKind::Kafka, Ty::Text) => "MEDIUMTEXT",
            (SrcKind::Pg, Ty::Text) => "TEXT",
            (_, Ty::Dec) => "DECIMAL(12,2)",
            (_, Ty::Date) => "DATE",
            (SrcKind::Maria | SrcKind::Kafka, Ty::Ts) => "DATETIME",
            (SrcKind::Pg, Ty::Ts) => "TIMESTAMP",
            (SrcKind::Maria | SrcKind::Kafka, Ty::Dbl) => "DOUBLE",
            (SrcKind::Pg, Ty::Dbl) => "DOUBLE PRECISION",
            (_, Ty::Bool) => "BOOLEAN",
            (_, Ty::Small) => "SMALLINT",
            (SrcKind::Maria | SrcKind::Kafka, Ty::Real) => "FLOAT",
            (SrcKind::Pg, Ty::Real) => "REAL",
            (_, Ty::Time) => "TIME",
            (SrcKind::Maria | SrcKind::Kafka, Ty::Bin) => "BLOB",
            (SrcKind::Pg, Ty::Bin) => "BYTEA",
            (SrcKind::Maria | SrcKind::Kafka, Ty::Json) => "JSON",
            (SrcKind::Pg, Ty::Json) => "JSONB",
            (_, Ty::Uuid) => "UUID",
            (SrcKind::Maria | SrcKind::Kafka, Ty::UBig) => "BIGINT UNSIGNED",
            (SrcKind::Pg, Ty::UBig) => "NUMERIC(20,0)",
            (SrcKind::Maria | SrcKind::Kafka, Ty::Ts6) => "DATETIME(6)",
            (SrcKind::Pg, Ty::Ts6) => "TIMESTAMP(6)",
            (SrcKind::Maria | SrcKind::Kafka, Ty::TsTz) => "TIMESTAMP(6) NULL",
            (SrcKind::Pg, Ty::TsTz) => "TIMESTAMPTZ",
            (SrcKind::Maria | SrcKind::Kafka, Ty::Latin1) => "VARCHAR(200) CHARACTER SET latin1",
            (SrcKind::Pg, Ty::Latin1) => "VARCHAR(200)",
            (SrcKind::Maria | SrcKind::Kafka, Ty::Tiny) => "TINYINT",
            (SrcKind::Pg, Ty::Tiny) => "SMALLINT",
            (SrcKind::Maria | SrcKind::Kafka, Ty::Medium) => "MEDIUMINT",
            (SrcKind::Pg, Ty::Medium) => "INTEGER",
            (SrcKind::Maria | SrcKind::Kafka, Ty::UInt) => "INT UNSIGNED",
            (SrcKind::Pg, Ty::UInt) => "BIGINT",
            (SrcKind::Maria | SrcKind::Kafka, Ty::Year) => "YEAR",
            (SrcKind::Pg, Ty::Year) => "SMALLINT",
            (_, Ty::Char) => "CHAR(4)",
            (SrcKind::Maria | SrcKind::Kafka, Ty::Set) => "SET('a', 'b', 'c')",
            (SrcKind::Pg, Ty::Set) => "VARCHAR(10)",
            (SrcKind::Maria | SrcKind::Kafka, Ty::VarBin) => "VARBINARY(64)",
            (SrcKind::Pg, Ty::VarBin) => "BYTEA",
            (SrcKind::Maria | SrcKind::Kafka, Ty::Cs(i)) => {
                return format!("VARCHAR(100) CHARACTER SET {}", CHARSETS[usize::from(i)].0)
            }
            (SrcKind::Pg, Ty::Cs(_)) => "VARCHAR(100)",
            (_, Ty::Enum(_)) => unreachable!("above"),
        }
        .to_owned()
    }

    fn string_lit(&self, s: &str) -> String {
        match self.pair.sql() {
            SrcKind::Maria | SrcKind::Kafka => {
                format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
            }
            SrcKind::Pg => format!("'{}'", s.replace('\'', "''")),
        }
    }

    /// A value of `t`: edges and ordinary ones, NULL one time in eight.
    fn value(&self, r: &mut Rng, t: Ty) -> String {
        if r.chance(12) {
            return "NULL".into();
        }
        match t {
            Ty::Int => r
                .pick(&["0", "-1", "2147483647", "-2147483648", "7", "42"])
                .to_string(),
            Ty::Big => {
                if r.chance(30) {
                    r.pick(&["9223372036854775807", "-9223372036854775808", "0"])
                        .to_string()
                } else {
                    (r.next() as i64 / 1000).to_string()
                }
            }
            Ty::Str | Ty::Text => {
                let nul = self.pair.sql() == SrcKind::Maria && self.pair.1 != SinkKind::Pg;
                let mut choices = vec![
                    String::new(),
                    "plain".into(),
                    "quote ' and \" and `".into(),
                    "back\\slash".into(),
                    "emoji \u{1F600} \u{1D11E} 4-byte".into(),
                    "line\u{2028}sep\nnewline\ttab".into(),
                    "caf\u{e9} na\u{ef}ve \u{4E2D}\u{6587}".into(),
                    "x".repeat(190),
                ];
                if nul {
                    choices.push("nul\0inside".into());
                }
                if t == Ty::Text {
                    choices.push("big".repeat(30_000));
                }
                let s = r.pick(&choices).clone();
                if s.contains('\0') {
                    // MariaDB: a NUL through its escape.
                    return format!("'{}'", s.replace('\0', "\\0"));
                }
                self.string_lit(&s)
            }
            Ty::Dec => r
                .pick(&["0.00", "-9999999999.99", "9999999999.99", "12.50", "-0.01"])
                .to_string(),
            Ty::Date => format!(
                "'{}'",
                r.pick(&[
                    "1970-01-01",
                    "2024-02-29",
                    "9999-12-31",
                    "1000-01-01",
                    "2000-06-15"
                ])
            ),
            Ty::Ts => format!(
                "'{}'",
                r.pick(&[
                    "1970-01-01 00:00:01",
                    "2038-01-19 03:14:08",
                    "9999-12-31 23:59:59",
                    "2024-02-29 12:34:56",
                ])
            ),
            Ty::Enum(n) => format!("'v{}'", r.below(u64::from(n))),
            Ty::Dbl => {
                let mut v = vec!["0", "-0.5", "1.5", "123456.25", "0.001", "-2.75"];
                // NaN: PostgreSQL only, and not into MariaDB (it has none).
                if self.pair.sql() == SrcKind::Pg && self.pair.1 != SinkKind::Maria {
                    v.push("'NaN'");
                }
                r.pick(&v).to_string()
            }
            // Each of the types below draws one number from `r`, as most above.
            Ty::Latin1 => {
                // What Windows-1252 holds: accents, the euro sign, quotes.
                let long = "x".repeat(190);
                let v = [
                    "",
                    "plain",
                    "caf\u{e9} na\u{ef}ve \u{c0}\u{ff}",
                    "\u{20ac} and \u{bd} and \u{2030}",
                    "quote ' and \" and `",
                    long.as_str(),
                ];
                let s: &&str = r.pick(&v);
                self.string_lit(s)
            }
            Ty::Bool => r.pick(&["TRUE", "FALSE"]).to_string(),
            Ty::Small => r.pick(&["0", "-32768", "32767", "12"]).to_string(),
            Ty::Real => {
                let mut v = vec!["0", "1.5", "-2.25", "1024.5", "0.125"];
                if self.pair.sql() == SrcKind::Pg && self.pair.1 != SinkKind::Maria {
                    v.push("'NaN'");
                }
                r.pick(&v).to_string()
            }
            Ty::Time => {
                let mut v = vec!["00:00:00", "23:59:59", "12:34:56"];
                match (self.pair.sql(), self.pair.1) {
                    // Beyond a day: MariaDB's TIME into a MariaDB TIME only (other
                    // targets refuse such a row under row-error-policy).
                    (SrcKind::Maria, SinkKind::Maria) => {
                        v.extend(["838:59:59", "-838:59:59", "-00:00:01"])
                    }
                    (SrcKind::Pg, _) => v.extend(["23:59:59.999999", "00:00:00.5"]),
                    _ => {}
                }
                format!("'{}'", r.pick(&v))
            }
            Ty::Bin => {
                let big = "00ff".repeat(400);
                let v = ["", "00", "00ff10", "deadbeef", "0a0d5c27", big.as_str()];
                let hex = *r.pick(&v);
                match self.pair.sql() {
                    SrcKind::Maria | SrcKind::Kafka => format!("X'{hex}'"),
                    SrcKind::Pg => format!("decode('{hex}', 'hex')"),
                }
            }
            Ty::Json => {
                // Written as PostgreSQL's jsonb prints them (keys by length, then
                // bytes), so every target's text is the source's.
                let v = [
                    "{}",
                    "[]",
                    "null",
                    "\"str\"",
                    "{\"a\": 1}",
                    "[1, \"x\", null, true]",
                    "{\"k\": \"emoji \u{1F600} quote ' end\", \"nest\": {\"b\": [false]}}",
                ];
                let j: &&str = r.pick(&v);
                self.string_lit(j)
            }
            Ty::Uuid => format!(
                "'{}'",
                r.pick(&[
                    "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
                    "00000000-0000-0000-0000-000000000000",
                    "ffffffff-ffff-ffff-ffff-ffffffffffff",
                ])
            ),
            Ty::UBig => r
                .pick(&["0", "18446744073709551615", "9223372036854775808", "42"])
                .to_string(),
            Ty::Tiny => r.pick(&["0", "-128", "127", "5"]).to_string(),
            Ty::Medium => r.pick(&["0", "-8388608", "8388607", "77"]).to_string(),
            Ty::UInt => r.pick(&["0", "4294967295", "2147483648", "9"]).to_string(),
            Ty::Year => r.pick(&["1901", "2155", "2024", "1970"]).to_string(),
            Ty::Char => {
                let s: &&str = r.pick(&["abcd", "caf\u{e9}", "\u{4E2D}\u{6587}xy", "a'b\""]);
                self.string_lit(s)
            }
            Ty::Set => format!("'{}'", r.pick(&["", "a", "a,c", "b,c", "a,b,c"])),
            Ty::VarBin => {
                let hex = *r.pick(&["", "00", "00ff10", "deadbeef", "5c27220a"]);
                match self.pair.sql() {
                    SrcKind::Maria | SrcKind::Kafka => format!("X'{hex}'"),
                    SrcKind::Pg => format!("decode('{hex}', 'hex')"),
                }
            }
            Ty::Cs(i) => {
                let s: &&str = r.pick(CHARSETS[usize::from(i)].1);
                self.string_lit(s)
            }
            Ty::Ts6 => format!(
                "'{}'",
                r.pick(&[
                    "2024-02-29 12:34:56.123456",
                    "1970-01-01 00:00:00.000001",
                    "9999-12-31 23:59:59.999999",
                    "2000-01-01 00:00:00.5",
                ])
            ),
            Ty::TsTz => {
                // MariaDB's TIMESTAMP spans 1970-2038 (UTC), and a MariaDB target
                // makes an instant a TIMESTAMP.
                let mut v = vec![
                    "1970-01-01 00:00:01",
                    "2038-01-19 03:14:07.999999",
                    "2024-02-29 12:34:56.5",
                ];
                if self.pair.sql() == SrcKind::Pg && self.pair.1 != SinkKind::Maria {
                    v.extend(["0001-01-01 00:00:00+00", "9999-12-31 23:59:59.999999+00"]);
                }
                format!("'{}'", r.pick(&v))
            }
        }
    }

    fn create_table(&mut self, r: &mut Rng, name: &str, keyed: bool) -> String {
        let n = 1 + r.below(4) as usize;
        let mut cols: Vec<(String, Ty)> = Vec::new();
        for i in 0..n {
            let t = self.draw_type(r);
            let mut name = self.column_name(r);
            if cols.iter().any(|(c, _)| c.eq_ignore_ascii_case(&name)) || name == "id" {
                name = format!("c{i}");
            }
            cols.push((name, t));
        }
        let mut defs: Vec<String> = Vec::new();
        if keyed {
            defs.push(format!("{} BIGINT PRIMARY KEY", self.q("id")));
        }
        for (c, t) in &cols {
            defs.push(format!("{} {}", self.q(c), self.type_sql(*t)));
        }
        // A generated column (from a stream of its own), which no statement writes:
        // the source computes it from the key (a key change changes it too).
        // (PostgreSQL's logical replication never carries a generated column's
        // values: only a PostgreSQL target has them, computing them itself.)
        if keyed && self.extra.chance(30) {
            let id = self.q("id");
            defs.push(match self.pair.sql() {
                // (VIRTUAL into a MariaDB target only: other targets need its
                // values, which a MINIMAL row image leaves out; the job stops on
                // such a row, saying so.)
                SrcKind::Maria | SrcKind::Kafka => format!(
                    "`gen` BIGINT AS ({id} * 2) {}",
                    match self.extra.pick(&["STORED", "VIRTUAL"]) {
                        &"VIRTUAL" if self.pair.1 != SinkKind::Maria => "STORED",
                        s => s,
                    }
                ),
                SrcKind::Pg => format!("\"gen\" BIGINT GENERATED ALWAYS AS ({id} * 2) STORED"),
            });
        }
        let mut sql = format!("CREATE TABLE {}.{} ({})", DB, self.q(name), defs.join(", "));
        if self.pair.sql() == SrcKind::Pg && !keyed && !self.running {
            // Updates and deletes of a keyless table need an identity (the job
            // refuses to start without one); a keyed table keeps the default one
            // (its key), and a keyless one made while the job runs is given it by
            // the DDL capture as it joins the publication.
            sql.push_str(&format!(
                "; ALTER TABLE {}.{} REPLICA IDENTITY FULL",
                DB,
                self.q(name)
            ));
        }
        self.tables.push(TableModel {
            name: name.to_owned(),
            keyed,
            cols,
            ids: Vec::new(),
            next_id: 1,
            rows: 0,
            ever_rows: false,
            made_running: self.running,
        });
        sql
    }

    fn insert(&mut self, r: &mut Rng, ti: usize) -> String {
        let n = 1 + r.below(3) as usize;
        let t = self.tables[ti].clone();
        let mut rows = Vec::new();
        let identical = !t.keyed && r.chance(40);
        let mut first: Option<Vec<String>> = None;
        for _ in 0..n {
            let mut vals = Vec::new();
            if t.keyed {
                let id = self.tables[ti].next_id;
                self.tables[ti].next_id += 1 + r.below(3) as i64;
                self.tables[ti].ids.push(id);
                vals.push(id.to_string());
            }
            match (&first, identical) {
                (Some(f), true) => vals.extend(f.iter().cloned()),
                _ => {
                    let v: Vec<String> = t.cols.iter().map(|(_, ty)| self.value(r, *ty)).collect();
                    first = Some(v.clone());
                    vals.extend(v);
                }
            }
            rows.push(format!("({})", vals.join(", ")));
        }
        self.tables[ti].rows += n;
        self.tables[ti].ever_rows = true;
        let mut names: Vec<String> = Vec::new();
        if t.keyed {
            names.push(self.q("id"));
        }
        names.extend(t.cols.iter().map(|(c, _)| self.q(c)));
        format!(
            "INSERT INTO {}.{} ({}) VALUES {}",
            DB,
            self.q(&t.name),
            names.join(", "),
            rows.join(", ")
        )
    }

    /// A statement that changes or removes existing rows (an insert when empty).
    fn change(&mut self, r: &mut Rng, ti: usize) -> String {
        let t = self.tables[ti].clone();
        let tn = format!("{}.{}", DB, self.q(&t.name));
        let empty = if t.keyed {
            t.ids.is_empty()
        } else {
            t.rows == 0
        };
        // Equality deletes remove identical keyless rows together (the mode's
        // documented limit, said in the job's log): keyless tables only grow there.
        let eq_keyless = !t.keyed && self.pair.1 == SinkKind::IcebergEq;
        if empty || t.cols.is_empty() && !t.keyed || eq_keyless {
            return self.insert(r, ti);
        }
        let pg_one = |tn: &str| format!("ctid = (SELECT ctid FROM {tn} LIMIT 1)");
        match r.below(10) {
            // Update a non-key column.
            0..=4 if !t.cols.is_empty() => {
                let (c, ty) = r.pick(&t.cols).clone();
                let v = self.value(r, ty);
                if t.keyed {
                    let id = *r.pick(&t.ids);
                    format!(
                        "UPDATE {tn} SET {} = {v} WHERE {} = {id}",
                        self.q(&c),
                        self.q("id")
                    )
                } else {
                    match self.pair.sql() {
                        SrcKind::Maria | SrcKind::Kafka => {
                            format!("UPDATE {tn} SET {} = {v} LIMIT 1", self.q(&c))
                        }
                        SrcKind::Pg => {
                            format!("UPDATE {tn} SET {} = {v} WHERE {}", self.q(&c), pg_one(&tn))
                        }
                    }
                }
            }
            // A key change.
            5 | 6 if t.keyed => {
                let i = r.below(t.ids.len() as u64) as usize;
                let old = t.ids[i];
                let new = self.tables[ti].next_id;
                self.tables[ti].next_id += 1;
                self.tables[ti].ids[i] = new;
                format!(
                    "UPDATE {tn} SET {id} = {new} WHERE {id} = {old}",
                    id = self.q("id")
                )
            }
            // A delete.
            _ => {
                if t.keyed {
                    let i = r.below(t.ids.len() as u64) as usize;
                    let id = self.tables[ti].ids.swap_remove(i);
                    self.tables[ti].rows -= 1;
                    format!("DELETE FROM {tn} WHERE {} = {id}", self.q("id"))
                } else {
                    self.tables[ti].rows -= 1;
                    match self.pair.sql() {
                        SrcKind::Maria | SrcKind::Kafka => format!("DELETE FROM {tn} LIMIT 1"),
                        SrcKind::Pg => format!("DELETE FROM {tn} WHERE {}", pg_one(&tn)),
                    }
                }
            }
        }
    }

    /// One DDL statement on the model's tables.
    fn ddl(&mut self, r: &mut Rng) -> Option<String> {
        if self.tables.is_empty() {
            let name = self.fresh_name(r);
            let keyed = r.chance(70);
            return Some(self.create_table(r, &name, keyed));
        }
        let ti = r.below(self.tables.len() as u64) as usize;
        let t = self.tables[ti].clone();
        let tn = format!("{}.{}", DB, self.q(&t.name));
        let maria = self.pair.sql() == SrcKind::Maria;
        Some(match r.below(11) {
            0 | 1 => {
                // Add a column (MariaDB: at the end, FIRST or AFTER another).
                let ty = self.draw_type(r);
                let mut name = self.column_name(r);
                if t.cols.iter().any(|(c, _)| c.eq_ignore_ascii_case(&name)) || name == "id" {
                    name = format!("add{}", self.made);
                    self.made += 1;
                }
                let mut sql = format!(
                    "ALTER TABLE {tn} ADD COLUMN {} {}",
                    self.q(&name),
                    self.type_sql(ty)
                );
                let cols = &mut self.tables[ti].cols;
                if maria && r.chance(50) && !cols.is_empty() {
                    let after = r.below(cols.len() as u64) as usize;
                    sql.push_str(&format!(" AFTER {}", quote_my(&cols[after].0)));
                    cols.insert(after + 1, (name, ty));
                } else if maria && r.chance(30) && !t.keyed {
                    sql.push_str(" FIRST");
                    cols.insert(0, (name, ty));
                } else {
                    cols.push((name, ty));
                }
                sql
            }
            2 if t.cols.len() > 1 => {
                let i = r.below(t.cols.len() as u64) as usize;
                let (c, _) = self.tables[ti].cols.remove(i);
                format!("ALTER TABLE {tn} DROP COLUMN {}", self.q(&c))
            }
            3 if !t.cols.is_empty() => {
                let i = r.below(t.cols.len() as u64) as usize;
                let new = format!("ren{}", self.made);
                self.made += 1;
                let old = std::mem::replace(&mut self.tables[ti].cols[i].0, new.clone());
                format!(
                    "ALTER TABLE {tn} RENAME COLUMN {} TO {}",
                    self.q(&old),
                    self.q(&new)
                )
            }
            4 => {
                // Widen an INT column to BIGINT.
                let i = t.cols.iter().position(|(_, ty)| *ty == Ty::Int)?;
                self.tables[ti].cols[i].1 = Ty::Big;
                let c = self.q(&t.cols[i].0);
                if maria {
                    format!("ALTER TABLE {tn} MODIFY COLUMN {c} BIGINT")
                } else {
                    format!("ALTER TABLE {tn} ALTER COLUMN {c} TYPE BIGINT")
                }
            }
            9 if maria && t.cols.iter().any(|(_, ty)| matches!(ty, Ty::Enum(_))) => {
                // An enum gains a value (MODIFY with the longer list).
                let i = t
                    .cols
                    .iter()
                    .position(|(_, ty)| matches!(ty, Ty::Enum(_)))
                    .expect("an enum");
                let Ty::Enum(n) = t.cols[i].1 else {
                    unreachable!("an enum")
                };
                let ty = Ty::Enum((n + 1).min(20));
                self.tables[ti].cols[i].1 = ty;
                format!(
                    "ALTER TABLE {tn} MODIFY COLUMN {} {}",
                    quote_my(&t.cols[i].0),
                    self.type_sql(ty)
                )
            }
            5 => {
                self.tables[ti].ids.clear();
                self.tables[ti].rows = 0;
                format!("TRUNCATE TABLE {tn}")
            }
            6 if TABLE_DDL && self.tables.len() > 1 => {
                self.tables.remove(ti);
                format!("DROP TABLE {tn}")
            }
            7 if TABLE_DDL && (self.pair.0 != SrcKind::Kafka || KAFKA_RENAMES) => {
                let new = self.fresh_name(r);
                self.tables[ti].name = new.clone();
                if maria {
                    format!("RENAME TABLE {tn} TO {}.{}", DB, self.q(&new))
                } else {
                    format!("ALTER TABLE {tn} RENAME TO {}", self.q(&new))
                }
            }
            8 if maria
                && SWAP_RENAMES
                && (self.pair.0 != SrcKind::Kafka || KAFKA_RENAMES)
                && self.tables.len() > 1 =>
            {
                // Swap two tables' names in one statement.
                let mut tj = r.below(self.tables.len() as u64) as usize;
                if tj == ti {
                    tj = (ti + 1) % self.tables.len();
                }
                let (a, b) = (t.name.clone(), self.tables[tj].name.clone());
                self.tables[ti].name = b.clone();
                self.tables[tj].name = a.clone();
                let tmp = format!("swap{}", self.made);
                self.made += 1;
                format!(
                    "RENAME TABLE {DB}.{a} TO {DB}.{tmp}, {DB}.{b} TO {DB}.{a}, {DB}.{tmp} TO {DB}.{b}",
                    a = quote_my(&a),
                    b = quote_my(&b),
                    tmp = quote_my(&tmp)
                )
            }
            _ if TABLE_DDL => {
                let name = self.fresh_name(r);
                let keyed = r.chance(70);
                self.create_table(r, &name, keyed)
            }
            _ => return None,
        })
    }

    /// A generated column added to a keyed table, computed from its key. A target of
    /// the source's dialect computes it; PostgreSQL's logical replication never
    /// carries generated values, so other targets leave a PostgreSQL one out. A
    /// MariaDB one into another target stops the job, saying so (issue item 5): the
    /// rows the table holds would need values no change carries (drawn only where
    /// the target table holds rows, else it is a plain column every row event
    /// fills). None for a Kafka source (the feed's schema changes are statements
    /// of their own) or no fitting table.
    fn generated_add(&mut self, r: &mut Rng) -> Option<Step> {
        let keyed: Vec<usize> = (0..self.tables.len())
            .filter(|&i| self.tables[i].keyed)
            .collect();
        if keyed.is_empty() {
            return None;
        }
        let t = self.tables[*r.pick(&keyed)].clone();
        let name = format!("g{}", self.made);
        self.made += 1;
        let tn = format!("{DB}.{}", self.q(&t.name));
        let id = self.q("id");
        match self.pair {
            Pair(SrcKind::Kafka, _) => None,
            Pair(SrcKind::Pg, _) => Some(Step::Sql(format!(
                "ALTER TABLE {tn} ADD COLUMN \"{name}\" BIGINT GENERATED ALWAYS AS ({id} * 3) STORED"
            ))),
            Pair(SrcKind::Maria, sink) => {
                // (A relational target looks whether its table holds rows now;
                // Iceberg, whether its files ever held one.)
                let holds = if matches!(
                    sink,
                    SinkKind::Iceberg | SinkKind::IcebergEq | SinkKind::IcebergS3
                ) {
                    t.ever_rows
                } else {
                    !t.ids.is_empty()
                };
                // Or a default that is not a constant: the rows the table holds got
                // values no change carries (the moment of the ALTER), into every
                // target.
                if r.chance(12) {
                    let sql = format!(
                        "ALTER TABLE {tn} ADD COLUMN `{name}` DATETIME(6) DEFAULT CURRENT_TIMESTAMP(6)"
                    );
                    return if holds && (self.after_snapshot || t.made_running) {
                        Some(Step::Stop(sql, "is added with a default that is not a constant"))
                    } else if holds {
                        None
                    } else {
                        Some(Step::Sql(sql))
                    };
                }
                let sql = format!(
                    "ALTER TABLE {tn} ADD COLUMN `{name}` BIGINT AS ({id} * 3) {}",
                    r.pick(&["STORED", "VIRTUAL"])
                );
                if sink == SinkKind::Maria {
                    Some(Step::Sql(sql))
                } else if holds && (self.after_snapshot || t.made_running) {
                    Some(Step::Stop(sql, "is added as generated"))
                } else {
                    None
                }
            }
        }
    }

    /// A table moved out of the captured database (it leaves the mirror's database,
    /// going with its name), or one moved back in: it holds rows the job never
    /// read, and the job stops, saying so. None for a Kafka source or no table.
    fn move_table(&mut self, r: &mut Rng, back: bool) -> Option<Step> {
        let maria = match self.pair.0 {
            SrcKind::Kafka => return None,
            SrcKind::Maria => true,
            SrcKind::Pg => false,
        };
        if back {
            let t = self.away.pop()?;
            let q = self.q(&t.name);
            return Some(Step::Stop(
                if maria {
                    format!("RENAME TABLE {AWAY}.{q} TO {DB}.{q}")
                } else {
                    format!("ALTER TABLE {AWAY}.{q} SET SCHEMA {DB}")
                },
                "into the captured tables",
            ));
        }
        // (Leaving the captured database with no table before the first snapshot is
        // done makes a restart a new job whose `tables` match nothing: refused at
        // start, by design.)
        if self.tables.is_empty() || (self.tables.len() == 1 && !self.after_snapshot) {
            return None;
        }
        if !maria && self.after_snapshot && r.chance(25) {
            // The whole schema moves away (its tables with it), and a new one of
            // the captured name is made.
            let gone = format!("fz_gone{}", self.made);
            self.made += 1;
            self.tables.clear();
            return Some(Step::Sql(format!(
                "ALTER SCHEMA {DB} RENAME TO {gone}; CREATE SCHEMA {DB}"
            )));
        }
        let ti = r.below(self.tables.len() as u64) as usize;
        let t = self.tables.remove(ti);
        let q = self.q(&t.name);
        self.away.push(t);
        Some(Step::Sql(if maria {
            format!("CREATE DATABASE IF NOT EXISTS {AWAY}; RENAME TABLE {DB}.{q} TO {AWAY}.{q}")
        } else {
            format!("CREATE SCHEMA IF NOT EXISTS {AWAY}; ALTER TABLE {DB}.{q} SET SCHEMA {AWAY}")
        }))
    }

    /// A statement of the source's grammar that changes nothing the mirror holds
    /// (comments, indexes, storage, statistics, a no-op `DROP ... IF EXISTS`): the
    /// job must read past each, whether or not lakeshift has a use for it.
    fn noop_ddl(&self, r: &mut Rng, n: u64) -> Option<String> {
        let t = r.pick(&self.tables).clone();
        let tn = format!("{}.{}", DB, self.q(&t.name));
        let indexable = t
            .cols
            .iter()
            .find(|(_, ty)| matches!(ty, Ty::Int | Ty::Big | Ty::Date | Ty::Dec))
            .map(|(c, _)| self.q(c));
        Some(match self.pair.sql() {
            SrcKind::Maria | SrcKind::Kafka => match r.below(8) {
                0 => format!("ALTER TABLE {tn} COMMENT = 'note {n}'"),
                1 => format!("ALTER TABLE {tn} ENGINE = InnoDB"),
                2 => format!(
                    "ALTER TABLE {tn} ADD INDEX IF NOT EXISTS `ix{n}` ({})",
                    indexable?
                ),
                3 => format!("ALTER TABLE {tn} DROP FOREIGN KEY IF EXISTS `fk_none{n}`"),
                4 => format!("ALTER TABLE {tn} FORCE"),
                5 => format!("OPTIMIZE TABLE {tn}"),
                6 => format!("ANALYZE TABLE {tn}"),
                _ => format!("ALTER TABLE {tn} ALGORITHM=COPY, LOCK=SHARED, COMMENT = 'copy {n}'"),
            },
            SrcKind::Pg => match r.below(5) {
                0 => format!("COMMENT ON TABLE {tn} IS 'note {n}'"),
                1 => format!(
                    "CREATE INDEX IF NOT EXISTS \"ix{n}\" ON {tn} ({})",
                    indexable?
                ),
                2 => format!("ANALYZE {tn}"),
                3 => format!("ALTER TABLE {tn} SET (fillfactor = 90)"),
                _ => format!("VACUUM {tn}"),
            },
        })
    }

    /// A table name not in use: plain, a reserved word, a quote, a dot, non-ASCII.
    fn fresh_name(&mut self, r: &mut Rng) -> String {
        let base = *r.pick(&["t", "order", "group", "we.ird", "o'q", "t\u{e9}", "x-y"]);
        let n = self.made;
        self.made += 1;
        match self.hostile() {
            // The longest name both ends hold, its number included.
            Some(h) if h.len() > 10 => {
                let n = n.to_string();
                format!("{}{n}", &h[..h.len() - n.len()])
            }
            Some(h) => format!("{h}{n}"),
            None => format!("{base}{n}"),
        }
    }

    /// A column name: one of [`NAMES`] from `r`, or (from a stream of its own) a
    /// hostile one.
    fn column_name(&mut self, r: &mut Rng) -> String {
        let plain = r.pick(&NAMES).to_string();
        self.hostile().unwrap_or(plain)
    }

    /// One time in four (from the names' own stream): a backtick, a dot, `..`, a
    /// double quote, a reserved word, decomposed and full-width Unicode, or a name
    /// of the greatest length both the source and the target hold (MariaDB 64
    /// characters, PostgreSQL 63 bytes).
    fn hostile(&mut self) -> Option<String> {
        if !self.names.chance(25) {
            return None;
        }
        let longest = match self.pair {
            Pair(SrcKind::Maria | SrcKind::Kafka, SinkKind::Maria) => 64,
            _ => 63,
        };
        let long = "l".repeat(longest);
        Some(
            self.names
                .pick(&[
                    "a`b",
                    "x.y",
                    "..",
                    "q\"d",
                    "table",
                    "e\u{301}",
                    "\u{ff26}\u{ff37}",
                    long.as_str(),
                ])
                .to_string(),
        )
    }
}

/// Swaps of two tables' names in one `RENAME TABLE` (issue item 3). Once off while
/// a crash after a swap broke the next run (seed 801153592, Maria->IcebergEq); on
/// since the fix in 1c3d9fc (the DDL log records what the barrier committed).
const SWAP_RENAMES: bool = true;

/// Table-level DDL (create, rename, drop, truncate) with faults. Once off while a
/// crash after a `RENAME TABLE` left the old table beside the renamed one in Iceberg
/// (seed 678087151, Maria->Iceberg); on since the fix in 1c3d9fc.
const TABLE_DDL: bool = true;

/// Table renames with a Kafka source. Once off while a `RENAME TABLE` was applied
/// at the new name's first message with the old name's earlier messages unread
/// (Kafka->Pg seeds 12 and 13; `seed_13_kafka_...` below); on since the fix.
const KAFKA_RENAMES: bool = true;

/// What one seed does: its pair, its steps (setup SQL before the job starts, then
/// SQL and faults while it runs) and its checkpoint interval.
struct Plan {
    pair: Pair,
    interval: f64,
    /// The steps begin once the initial snapshot is done (else while it runs).
    after_snapshot: bool,
    setup: Vec<String>,
    steps: Vec<Step>,
}

/// `more_faults`: also target restarts and a full state disk (see `more_faults`).
fn plan(pair: Pair, seed: u64, len: usize, after_snapshot: bool, more_faults: bool) -> Plan {
    let mut r = Rng(seed);
    let mut m = Model {
        pair,
        tables: Vec::new(),
        made: 0,
        types: Rng(seed ^ 0xc2b2_ae3d_27d4_eb4f),
        names: Rng(seed ^ 0x1656_67b1_9e37_79f9),
        extra: Rng(seed ^ 0x27d4_eb2f_1656_67c5),
        running: false,
        after_snapshot,
        away: Vec::new(),
    };
    let interval = *r.pick(&[0.1, 0.3, 1.0]);
    // Tables with rows before the job starts (the snapshot), one keyed, one not.
    let mut setup = Vec::new();
    for keyed in [true, false] {
        let name = m.fresh_name(&mut r);
        setup.push(m.create_table(&mut r, &name, keyed));
        let ti = m.tables.len() - 1;
        for _ in 0..(3 + r.below(5)) {
            setup.push(m.insert(&mut r, ti));
        }
    }
    m.running = true;
    let mut steps = Vec::new();
    let faults = [
        Fault::Kill,
        Fault::Term,
        Fault::Int,
        Fault::IntTwice,
        Fault::SourceRestart,
    ];
    // Statements that change nothing the mirror holds, drawn from a stream of their
    // own (the rest of a seed's plan is what it was without them).
    let mut quiet = Rng(seed ^ 0x5bd1_e995_9e37_79b9);
    let mut noops = 0;
    // Restarts of a relational target, also from a stream of their own.
    let mut target = Rng(seed ^ 0x2545_f491_4f6c_dd1d);
    let restarts_target =
        more_faults && matches!(pair.1, SinkKind::Pg | SinkKind::Maria | SinkKind::IcebergS3);
    // S3 refusing or slow for a few steps, from a stream of its own.
    let mut s3 = Rng(seed ^ 0x9e37_79b9_7f4a_7c15);
    let mut s3_for: Option<u64> = None;
    // The state folder's disk filling up for a few steps, from a stream of its own.
    let mut disk = Rng(seed ^ 0x1b87_3593_cc9e_2d51);
    // Session settings of a source transaction, also from a stream of their own.
    let mut session = Rng(seed ^ 0x94d0_49bb_1331_11eb);
    let mut full_for: Option<u64> = None;
    // The whole database (MariaDB) or schema (PostgreSQL) dropped and made again,
    // from a stream of its own. (Not from a Kafka feed: Debezium writes each
    // statement of the step as a schema change of its own, which the feed does
    // not split.)
    let mut whole = Rng(seed ^ 0x8ebc_6af0_9c88_c6e3);
    // A change logged as a statement (binlog_format=STATEMENT in its session): the
    // job stops, naming the fix, and the plan ends (MariaDB sources, rarely, from a
    // stream of its own; not while a fault is on, nor during the first snapshot).
    let mut statement = Rng(seed ^ 0x6a09_e667_f3bc_c909);
    // Generated columns added (`Model::generated_add`), from a stream of their own;
    // one that stops the job ends the plan (rarely, as above).
    let mut generated = Rng(seed ^ 0x3c6e_f372_fe94_f82b);
    // Tables moved out of the captured database, and rarely back (a stop that ends
    // the plan), from a stream of their own.
    let mut moves = Rng(seed ^ 0x510e_527f_ade6_82d1);
    while steps.len() - noops < len {
        if full_for.is_none() && s3_for.is_none() && moves.chance(2) {
            let back = !m.away.is_empty() && moves.chance(15);
            match m.move_table(&mut moves, back) {
                Some(Step::Stop(sql, why)) => {
                    steps.push(Step::Stop(sql, why));
                    break;
                }
                Some(step) => {
                    steps.push(step);
                    noops += 1;
                }
                None => {}
            }
        }
        if !m.tables.is_empty() && full_for.is_none() && s3_for.is_none() && generated.chance(2) {
            match m.generated_add(&mut generated) {
                Some(Step::Stop(sql, why)) if generated.chance(10) => {
                    steps.push(Step::Stop(sql, why));
                    break;
                }
                Some(step @ Step::Sql(_)) => {
                    steps.push(step);
                    noops += 1;
                }
                _ => {}
            }
        }
        if pair.0 == SrcKind::Maria
            && after_snapshot
            && full_for.is_none()
            && s3_for.is_none()
            && !m.tables.is_empty()
            && statement.below(1000) < 3
        {
            let ti = statement.below(m.tables.len() as u64) as usize;
            let sql = m.insert(&mut statement, ti);
            steps.push(Step::Stop(
                format!("SET SESSION binlog_format = 'STATEMENT'; {sql}"),
                "binlog_format=ROW",
            ));
            break;
        }
        // (Not while the first snapshot may still run: a restart then is a new job
        // whose `tables` match nothing, refused at start by design; as for moves.)
        if pair.0 != SrcKind::Kafka && !m.tables.is_empty() && whole.chance(2) && after_snapshot {
            steps.push(Step::Sql(match pair.0 {
                SrcKind::Pg => format!("DROP SCHEMA {DB} CASCADE; CREATE SCHEMA {DB}"),
                _ => format!("DROP DATABASE {DB}; CREATE DATABASE {DB} CHARACTER SET utf8mb4"),
            }));
            noops += 1;
            m.tables.clear();
        }
        if !m.tables.is_empty() && quiet.chance(5) {
            let n = quiet.below(1_000_000);
            if let Some(sql) = m.noop_ddl(&mut quiet, n) {
                steps.push(Step::Sql(sql));
                noops += 1;
            }
        }
        if restarts_target && target.chance(3) {
            steps.push(Step::Fault(Fault::TargetRestart));
            noops += 1;
        }
        match full_for {
            None if more_faults && disk.chance(2) => {
                steps.push(Step::Fault(Fault::DiskFull));
                noops += 1;
                full_for = Some(1 + disk.below(3));
            }
            Some(0) => {
                steps.push(Step::Fault(Fault::DiskFreed));
                noops += 1;
                full_for = None;
            }
            Some(n) => full_for = Some(n - 1),
            None => {}
        }
        match s3_for {
            None if more_faults && pair.1 == SinkKind::IcebergS3 && s3.chance(8) => {
                let f = *s3.pick(&[Fault::S3Refuse, Fault::S3Slow]);
                steps.push(Step::Fault(f));
                noops += 1;
                s3_for = Some(1 + s3.below(3));
            }
            Some(0) => {
                steps.push(Step::Fault(Fault::S3Serves));
                noops += 1;
                s3_for = None;
            }
            Some(n) => s3_for = Some(n - 1),
            None => {}
        }
        let k = r.below(100);
        if k < 6 {
            steps.push(Step::Fault(*r.pick(&faults)));
        } else if k < 16 {
            if let Some(sql) = m.ddl(&mut r) {
                steps.push(Step::Sql(sql));
            }
        } else if m.tables.is_empty() {
            continue;
        } else {
            // A transaction of 1-4 statements on one or more tables.
            let n = if r.chance(60) { 1 } else { 2 + r.below(3) };
            let mut stmts = Vec::new();
            for _ in 0..n {
                let ti = r.below(m.tables.len() as u64) as usize;
                let s = if r.chance(45) {
                    m.insert(&mut r, ti)
                } else {
                    m.change(&mut r, ti)
                };
                stmts.push(s);
            }
            let sql = if stmts.len() == 1 {
                stmts.pop().unwrap()
            } else {
                format!("BEGIN; {}; COMMIT", stmts.join("; "))
            };
            steps.push(Step::Sql(format!(
                "{}{sql}",
                session_setting(pair, &mut session, &sql)
            )));
        }
    }
    Plan {
        pair,
        interval,
        after_snapshot,
        setup,
        steps,
    }
}

/// A session setting in front of a source transaction (its own connection), or
/// nothing: MariaDB's row image (NOBLOB and MINIMAL leave columns out of the row
/// images; the sink fills them from what it holds) and sql_mode; PostgreSQL's
/// synchronous_commit and datestyle (its literals parsed, not what pgoutput sends).
fn session_setting(pair: Pair, r: &mut Rng, sql: &str) -> &'static str {
    if !r.chance(25) {
        return "";
    }
    let settings: &[&'static str] = match pair.0 {
        SrcKind::Maria => &[
            "SET SESSION binlog_row_image = 'NOBLOB'; ",
            "SET SESSION binlog_row_image = 'MINIMAL'; ",
            "SET SESSION sql_mode = ''; ",
            "SET SESSION sql_mode = 'TRADITIONAL,NO_BACKSLASH_ESCAPES'; ",
            // The statement's UTF-8 read as latin1 (what the source stores is the
            // truth; a character set without a character stores `?`).
            "SET NAMES latin1; SET SESSION sql_mode = ''; ",
        ],
        SrcKind::Pg => &[
            "SET synchronous_commit = off; ",
            "SET datestyle = 'SQL, DMY'; ",
        ],
        SrcKind::Kafka => return "",
    };
    let s = settings[r.below(settings.len() as u64) as usize];
    // (Names read as latin1 would name other columns: only statements whose names
    // are ASCII.)
    if s.starts_with("SET NAMES") && !ascii_names(sql) {
        return "";
    }
    s
}

/// Whether every backquoted name of MariaDB SQL is ASCII (string literals, with
/// their backslash and doubled-quote escapes, skipped).
fn ascii_names(sql: &str) -> bool {
    let mut chars = sql.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => {
                            chars.next();
                        }
                        '\'' => break,
                        _ => {}
                    }
                }
            }
            '`' => {
                for c in chars.by_ref() {
                    if c == '`' {
                        break;
                    }
                    if !c.is_ascii() {
                        return false;
                    }
                }
            }
            _ => {}
        }
    }
    true
}

/// Run a plan: setup, start the job, the steps (faults in between), catch up,
/// compare. `tolerant`: source SQL that fails is skipped (a shrunk replay).
async fn run_plan(p: &Plan, tolerant: bool) -> Result<(), String> {
    let mut rig = Rig::new(p.pair, p.interval).await;
    for s in &p.setup {
        if let Err(e) = rig.exec(s).await {
            if !tolerant {
                return Err(format!("setup SQL failed on the source: {}: {e}", short(s)));
            }
        }
    }
    // Into Iceberg: the source after setup and after each step, and the catalog
    // states a reader sees while the job runs (from the end of the first snapshot:
    // a table being loaded holds part of the snapshot, by design).
    // (Debezium topics carry no transaction boundaries here: a Kafka job's
    // checkpoints may cut a source transaction, so its catalog states are not checked.)
    let lake = matches!(
        p.pair.1,
        SinkKind::Iceberg | SinkKind::IcebergEq | SinkKind::IcebergS3
    ) && p.after_snapshot
        && p.pair.0 != SrcKind::Kafka;
    let mut sources = Vec::new();
    if lake {
        sources.push(rig.source_state().await);
    }
    if p.steps
        .iter()
        .any(|s| matches!(s, Step::Fault(Fault::DiskFull)))
    {
        rig.mount_state_fs();
    }
    rig.start();
    if p.after_snapshot {
        rig.wait_for_first_load().await?;
    }
    let watch = lake.then(|| {
        CatalogWatch::start(match &rig.dst {
            Dst::IcebergS3(l) => CatalogAt::Pg(l.catalog_uri()),
            _ => CatalogAt::Sqlite(rig.dir.path().join("warehouse/catalog.db")),
        })
    });
    for (i, s) in p.steps.iter().enumerate() {
        match s {
            Step::Sql(sql) => {
                if let Err(e) = rig.exec(sql).await {
                    if !tolerant {
                        return Err(format!(
                            "step {i}: the generator drew SQL the source refused: {}: {e}",
                            short(sql)
                        ));
                    }
                }
                if lake {
                    sources.push(rig.source_state().await);
                }
            }
            Step::Fault(f) => rig
                .fault(*f)
                .await
                .map_err(|e| format!("step {i} ({f:?}): {e}"))?,
            Step::Stop(sql, why) => {
                if let Err(e) = rig.exec(sql).await {
                    if !tolerant {
                        return Err(format!(
                            "step {i}: the generator drew SQL the source refused: {}: {e}",
                            short(sql)
                        ));
                    }
                    continue;
                }
                return rig.expect_stop(why).map_err(|e| {
                    format!("step {i}: {e}\njob log (last lines):\n{}", rig.log_tail())
                });
            }
        }
        rig.check_running()
            .map_err(|e| format!("after step {i}: {e}"))?;
    }
    let res = match rig.catch_up() {
        Ok(()) => rig.compare().await,
        Err(e) => Err(e),
    };
    let res = match (res, watch) {
        (Ok(()), Some(w)) => {
            let states = w.finish();
            rig.check_catalog_states(&states, &sources)
                .await
                .map(|(checked, skipped)| {
                    eprintln!(
                        "fuzz: {checked} catalog states read while the job ran are the source at a transaction boundary ({skipped} skipped: partial or gone)"
                    )
                })
        }
        (res, _) => res,
    };
    if res.is_err() && std::env::var_os("LAKESHIFT_FUZZ_LOG").is_some() {
        // The whole job log, for a person replaying a seed.
        eprintln!(
            "job log:\n{}",
            std::fs::read_to_string(rig.log_path()).unwrap_or_default()
        );
    }
    res.map_err(|e| format!("{e}\njob log (last lines):\n{}", rig.log_tail()))
}

/// Remove steps while the plan still fails (any failure), within a time budget.
async fn shrink(p: Plan) -> Plan {
    let budget = std::env::var("LAKESHIFT_FUZZ_SHRINK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(240u64);
    let until = Instant::now() + Duration::from_secs(budget);
    let mut best = p;
    let mut chunk = best.steps.len().div_ceil(2);
    while chunk >= 1 && Instant::now() < until {
        let mut i = 0;
        let mut shrunk = false;
        while i < best.steps.len() && Instant::now() < until {
            let mut steps = best.steps.clone();
            steps.drain(i..(i + chunk).min(steps.len()));
            let cand = Plan {
                pair: best.pair,
                interval: best.interval,
                after_snapshot: best.after_snapshot,
                setup: best.setup.clone(),
                steps,
            };
            if run_plan(&cand, true).await.is_err() {
                eprintln!("shrink: {} steps still fail", cand.steps.len());
                best = cand;
                shrunk = true;
            } else {
                i += chunk;
            }
        }
        if !shrunk {
            chunk /= 2;
        }
    }
    best
}

/// Run one seed of one pair; on a failure, shrink and panic with the replay.
async fn fuzz_one(pair: Pair, seed: u64, len: usize, after_snapshot: bool) {
    fuzz_one_with(pair, seed, len, after_snapshot, more_faults()).await
}

/// Whether new seeds also draw target and catalog restarts, S3 faults and a full
/// state disk: yes unless `LAKESHIFT_FUZZ_FAULTS=basic` (kills, signals and source
/// restarts only). Once off by default while PostgreSQL -> PostgreSQL seed 55885468
/// failed; it passes since, as did 36 new seeds over all 12 pairs with every fault.
fn more_faults() -> bool {
    std::env::var("LAKESHIFT_FUZZ_FAULTS").map_or(true, |v| v != "basic")
}

async fn fuzz_one_with(pair: Pair, seed: u64, len: usize, after_snapshot: bool, more: bool) {
    eprintln!("fuzz: pair {pair}, seed {seed}, {len} steps");
    let p = plan(pair, seed, len, after_snapshot, more);
    let mut faults: BTreeMap<String, usize> = BTreeMap::new();
    for s in &p.steps {
        if let Step::Fault(f) = s {
            *faults.entry(format!("{f:?}")).or_default() += 1;
        }
    }
    eprintln!("fuzz: pair {pair}, seed {seed}: faults {faults:?}");
    if std::env::var_os("LAKESHIFT_FUZZ_PLAN").is_some() {
        // The whole plan, for a person replaying a seed.
        for s in &p.setup {
            eprintln!("  setup: {}", short(s));
        }
        for (i, s) in p.steps.iter().enumerate() {
            eprintln!("  {i}: {s}");
        }
    }
    let Err(e) = run_plan(&p, false).await else {
        return;
    };
    eprintln!("fuzz: pair {pair} seed {seed} FAILED: {e}");
    eprintln!("the plan's steps:");
    for (i, s) in p.steps.iter().enumerate() {
        let s = s.to_string();
        let cut = s.char_indices().nth(300).map_or(s.len(), |(i, _)| i);
        eprintln!("  {i}: {}", &s[..cut]);
    }
    eprintln!("shrinking...");
    let small = shrink(p).await;
    let mut replay = String::new();
    for s in &small.setup {
        replay.push_str(&format!("  setup: {s}\n"));
    }
    for s in &small.steps {
        replay.push_str(&format!("  {s}\n"));
    }
    panic!(
        "fuzz failure: pair {pair}, seed {seed} (replay: LAKESHIFT_FUZZ_PAIR='{pair}' LAKESHIFT_FUZZ_SEED={seed} cargo test -p runner --test fuzz a_new_seed), checkpoint interval {} s\n{e}\nshortest replay found ({} steps):\n{replay}",
        small.interval,
        small.steps.len()
    );
}

/// The pair a seed runs on: `LAKESHIFT_FUZZ_PAIR` (as printed, e.g.
/// `Maria->IcebergEq`) when set, else one drawn from the seed.
fn pair_index(seed: u64) -> Pair {
    if let Ok(name) = std::env::var("LAKESHIFT_FUZZ_PAIR") {
        return *PAIRS
            .iter()
            .find(|p| p.to_string() == name)
            .unwrap_or_else(|| panic!("LAKESHIFT_FUZZ_PAIR={name}: not one of {PAIRS:?}"));
    }
    PAIRS[(seed % PAIRS.len() as u64) as usize]
}

/// Fixed seeds, one a pair (each pair's own seed), 40 steps each, with every fault
/// (target restarts and the full state disk too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pair_at_fixed_seeds() {
    for (i, pair) in PAIRS.iter().enumerate() {
        fuzz_one_with(*pair, 1000 + i as u64, 40, true, true).await;
    }
}

/// A new seed each run (printed; `LAKESHIFT_FUZZ_SEED` replays one), its pair drawn
/// from it; with `LAKESHIFT_FUZZ_SECONDS=N`, new seeds for N seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_seed_every_run() {
    let fixed: Option<u64> = std::env::var("LAKESHIFT_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok());
    let seconds: u64 = std::env::var("LAKESHIFT_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut seed = fixed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            % 1_000_000_007
    });
    loop {
        eprintln!("fuzz: new seed {seed} (LAKESHIFT_FUZZ_SEED={seed} replays it)");
        fuzz_one(pair_index(seed), seed, 40, true).await;
        if fixed.is_some() || Instant::now() >= until {
            break;
        }
        seed = Rng(seed).next() % 1_000_000_007;
    }
}

// ---------------------------------------------------------------------------------
// The graceful stop: a writer keeps changing rows while the job is stopped by a
// signal, three times; then a catch-up. What was read before each stop must commit
// exactly once.

async fn stop_under_writes(pair: Pair, signals: &[&str]) {
    let mut rig = Rig::new(pair, 1.0).await;
    let (acc, log) = (format!("{DB}.acc"), format!("{DB}.log"));
    let mut setup = format!(
        "CREATE TABLE {acc} (id INT PRIMARY KEY, v INT NOT NULL); CREATE TABLE {log} (k INT, note VARCHAR(20));"
    );
    if pair.0 == SrcKind::Pg {
        setup.push_str(&format!("ALTER TABLE {log} REPLICA IDENTITY FULL;"));
    }
    let values: Vec<String> = (1..=500).map(|i| format!("({i}, 0)")).collect();
    setup.push_str(&format!("INSERT INTO {acc} VALUES {}", values.join(", ")));
    rig.exec(&setup).await.unwrap();
    rig.start();
    let mut n = 0u32;
    for round in 0..3 {
        // Writes in flight: single-row autocommit updates of the keyed table
        // interleaved with inserts into the keyless one.
        let stop_after = 150 + 50 * round;
        for _ in 0..stop_after {
            n += 1;
            let id = 1 + n % 500;
            rig.exec(&format!("UPDATE {acc} SET v = v + 1 WHERE id = {id}"))
                .await
                .unwrap();
            rig.exec(&format!("INSERT INTO {log} VALUES ({n}, 'row {n}')"))
                .await
                .unwrap();
        }
        let child = rig.child.as_ref().expect("the job runs").id();
        lakeshift_tests::wait_for_handlers(child);
        // The signal lands while the writer goes on.
        let writer = {
            let (acc, log) = (acc.clone(), log.clone());
            let src_sql: Vec<String> = (0..60)
                .flat_map(|i| {
                    let k = n + 1 + i;
                    [
                        format!("UPDATE {acc} SET v = v + 1 WHERE id = {}", 1 + k % 500),
                        format!("INSERT INTO {log} VALUES ({k}, 'row {k}')"),
                    ]
                })
                .collect();
            n += 60;
            src_sql
        };
        let exec = async {
            for s in &writer {
                rig_exec_detached(&rig.src, s).await;
            }
        };
        let sig = async {
            tokio::time::sleep(Duration::from_millis(30)).await;
            for (i, s) in signals.iter().enumerate() {
                if i > 0 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                let _ = Command::new("kill")
                    .args([&format!("-{s}"), &child.to_string()])
                    .status();
            }
        };
        tokio::join!(exec, sig);
        let mut c = rig.child.take().unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        let st = loop {
            if let Some(st) = c.try_wait().unwrap() {
                break st;
            }
            assert!(
                Instant::now() < deadline,
                "no stop within 120 s: {}",
                rig.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let ok = if signals.len() > 1 {
            matches!(st.code(), Some(0) | Some(130))
        } else {
            st.success()
        };
        assert!(ok, "{pair} {signals:?}: exit {st}: {}", rig.log_tail());
        rig.start();
    }
    rig.catch_up().unwrap();
    if let Err(e) = rig.compare().await {
        panic!("{pair} after stops by {signals:?}: {e}\n{}", rig.log_tail());
    }
}

/// Source SQL from a task that does not hold the rig mutably.
async fn rig_exec_detached(src: &Src, sql: &str) {
    match src {
        Src::Maria(m) => {
            let mut c = m.conn(Some(DB)).await;
            c.query_drop(sql).await.unwrap();
            let _ = c.disconnect().await;
        }
        Src::Pg(p) => p.client("app").await.batch_execute(sql).await.unwrap(),
        // (the feed writes each step's change as the step ends: one writer)
        Src::Kafka(_) => panic!("a detached writer on a Kafka feed"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_to_iceberg_stop_by_sigterm_loses_nothing() {
    stop_under_writes(Pair(SrcKind::Maria, SinkKind::Iceberg), &["TERM"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_to_iceberg_equality_stop_by_sigint_loses_nothing() {
    stop_under_writes(Pair(SrcKind::Maria, SinkKind::IcebergEq), &["INT"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_to_postgres_stop_by_sigterm_loses_nothing() {
    stop_under_writes(Pair(SrcKind::Maria, SinkKind::Pg), &["TERM"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_to_mariadb_stop_by_a_second_sigint_loses_nothing() {
    stop_under_writes(Pair(SrcKind::Maria, SinkKind::Maria), &["INT", "INT"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_to_iceberg_stop_by_sigterm_loses_nothing() {
    stop_under_writes(Pair(SrcKind::Pg, SinkKind::Iceberg), &["TERM"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_to_postgres_stop_by_sigint_loses_nothing() {
    stop_under_writes(Pair(SrcKind::Pg, SinkKind::Pg), &["INT"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_to_mariadb_stop_by_a_second_sigint_loses_nothing() {
    stop_under_writes(Pair(SrcKind::Pg, SinkKind::Maria), &["INT", "INT"]).await;
}

/// Found by the catalog-state oracle (seed 958284974, MariaDB -> Iceberg): a checkpoint
/// committed its first table alone and the rest in one catalog transaction after it,
/// so a reader between the two saw a transaction of several tables in part.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_958284974_a_checkpoint_committed_its_first_table_alone() {
    fuzz_one(Pair(SrcKind::Maria, SinkKind::Iceberg), 958284974, 40, true).await;
}

/// Found by the catalog-state oracle (seed 851071779, MariaDB -> Iceberg): a lost
/// source connection (the server restarted) committed what was read of an open
/// transaction before reconnecting; a reader saw its first rows without the rest
/// (an insert and its key's later update in one transaction: the old key).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_851071779_a_lost_source_connection_committed_part_of_a_transaction() {
    fuzz_one(Pair(SrcKind::Maria, SinkKind::Iceberg), 851071779, 40, true).await;
}

/// Found by the catalog-state oracle (seed 50914583, MariaDB -> Iceberg): a stop
/// just after the source reconnected (what was read of an open transaction kept
/// pending) forgot how far that was read, so it did not wait for the transaction's
/// end and committed part of it, unmarked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_50914583_a_stop_after_a_reconnect_inside_a_transaction() {
    fuzz_one(Pair(SrcKind::Maria, SinkKind::Iceberg), 50914583, 40, true).await;
}

/// Found by the fuzzer's target restarts (seed 962410419, PostgreSQL -> PostgreSQL; and
/// seed 296652790, MariaDB -> PostgreSQL, which under the load of the whole suite
/// still ends the job on one target restart in some runs: not yet found): a
/// relational target that crashed and started again stopped the job (`the target's
/// tables: error communicating with database`); a lost target connection now starts
/// the job again from the checkpoint the target holds, a bounded number of times,
/// also when the target crashes again while the job opens its sink.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_962410419_a_target_restart_while_the_sink_opened() {
    fuzz_one_with(Pair(SrcKind::Pg, SinkKind::Pg), 962410419, 40, true, true).await;
}

/// A DDL's barrier committed the tables the DDL touches and left the others' pending
/// changes for the next checkpoint: after a transaction over two tables and a DDL on
/// one of them, the catalog held the transaction in one table only until then. (A DDL
/// between transactions is now a checkpoint of every table first.) A long checkpoint
/// interval keeps the next checkpoint away while the catalog is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ddl_barrier_leaves_no_transaction_in_part() {
    let mut rig = Rig::running(
        Pair(SrcKind::Maria, SinkKind::Iceberg),
        600.0,
        "CREATE TABLE fz.a (id INT PRIMARY KEY, v INT);
         CREATE TABLE fz.b (id INT PRIMARY KEY, v INT);
         INSERT INTO fz.a VALUES (1, 100); INSERT INTO fz.b VALUES (1, 0);",
    )
    .await;
    rig.exec("BEGIN; UPDATE fz.a SET v = v - 40; UPDATE fz.b SET v = v + 40; COMMIT")
        .await
        .unwrap();
    rig.exec("ALTER TABLE fz.a ADD COLUMN note INT")
        .await
        .unwrap();
    rig.wait_for_log("DDL at").unwrap();
    let lake = rig.target_state().await;
    let v = |t: &str| lake[t].1.first().and_then(|r| r[1].clone());
    assert_eq!(
        (v("a"), v("b")),
        (Some("60".to_owned()), Some("40".to_owned())),
        "the catalog after the DDL holds the transaction in both tables: {lake:?}\n{}",
        rig.log_tail()
    );
}

/// Found by the fuzzer's faults (seed 241036856, MariaDB -> Iceberg equality deletes):
/// a job whose captured tables were all dropped was refused on its next start
/// ("matches none of the tables"), a check meant for a new job's typo; a job that
/// resumes goes on, with a warning, and captures a table created later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_job_whose_tables_were_all_dropped_goes_on() {
    for src in [SrcKind::Maria, SrcKind::Pg] {
        let mut rig = Rig::new(Pair(src, SinkKind::Iceberg), 0.3).await;
        rig.exec("CREATE TABLE fz.a (id INT PRIMARY KEY, v INT); INSERT INTO fz.a VALUES (1, 1)")
            .await
            .unwrap();
        rig.catch_up().unwrap();
        rig.exec("DROP TABLE fz.a").await.unwrap();
        rig.catch_up().unwrap();
        rig.catch_up().unwrap();
        assert!(
            rig.log_tail().contains("were they all dropped?"),
            "{}",
            rig.log_tail()
        );
        rig.exec("CREATE TABLE fz.b (id INT PRIMARY KEY, v INT); INSERT INTO fz.b VALUES (2, 2)")
            .await
            .unwrap();
        rig.catch_up().unwrap();
        rig.compare().await.unwrap();
    }
}

/// Found by the fuzzer's full-disk fault (seed 45202458, MariaDB -> Iceberg): the
/// checkpoint a swap of two tables takes first (of the one with new rows), then a
/// crash before the next one:
/// the restart's recovery looked the checkpoint's tables up by name, found the
/// other table of the swap under it, and committed the first one's files there
/// (it stopped, unable to read its list). Recovery now follows the tables' uuids,
/// which the DDL log records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_after_a_swap_recovers_the_checkpoint_before_it_into_the_right_tables() {
    let mut rig = Rig::running(
        Pair(SrcKind::Maria, SinkKind::Iceberg),
        600.0,
        "CREATE TABLE fz.a (id INT PRIMARY KEY, v VARCHAR(10));
         CREATE TABLE fz.b (k BIGINT, w DOUBLE);
         INSERT INTO fz.a VALUES (1, 'x'); INSERT INTO fz.b VALUES (7, 0.5);",
    )
    .await;
    rig.exec(
        "INSERT INTO fz.a VALUES (2, 'y');
         RENAME TABLE fz.a TO fz.t, fz.b TO fz.a, fz.t TO fz.b;",
    )
    .await
    .unwrap();
    rig.wait_for_log("renamed table fz.t to fz.b").unwrap();
    rig.wait_for_log("applied; ").unwrap();
    rig.fault(Fault::Kill).await.unwrap();
    rig.exec("INSERT INTO fz.a VALUES (9, 2.5); INSERT INTO fz.b VALUES (3, 'z')")
        .await
        .unwrap();
    rig.catch_up().unwrap();
    rig.compare().await.unwrap();
}

/// Found by the fuzzer (seed 293740230, MariaDB -> Iceberg; 6 steps once shrunk): after a
/// source restart the server handed the table id of `we.ird1` as mapped before the
/// restart to its new definition, with as many columns; the reader kept the old
/// columns (matched by count) and stopped with `ENUM value in a non-enum column`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_293740230_a_table_id_reused_after_a_source_restart() {
    fuzz_one(Pair(SrcKind::Maria, SinkKind::Iceberg), 293740230, 40, true).await;
}

/// Found by the fuzzer (seed 7, steps from the job's start): a DDL on a captured
/// table after the snapshot's point and before the snapshot read it (`DROP COLUMN`)
/// stopped the job with `Unknown column 'from' in 'SELECT'`; the read is now taken
/// again from the last checkpoint.
/// regression (Kafka->IcebergEq, seed 14): after a SIGKILL, the catch-up's consumer
/// was the group's only member with an empty assignment (the broker kept the killed
/// member's partitions) and waited for 300 s, until the test gave up; a sole member
/// owning none of the partitions now rejoins the group, as one owning some did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_14_kafka_a_sole_member_with_an_empty_assignment() {
    fuzz_one_with(
        Pair(SrcKind::Kafka, SinkKind::IcebergEq),
        14,
        40,
        true,
        true,
    )
    .await;
}

/// regression (Kafka->Pg, seed 436573374, 2 of 3 runs): after a double SIGINT, the
/// catch-up (`--until-end`) was the group's only member but the broker assigned it
/// part of the partitions (the stopped member kept the rest); it stopped at the end
/// of its own, and a table's DDL and rows never reached the target. A sole member
/// missing partitions is not at the end: it rejoins the group first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_436573374_kafka_the_end_of_part_of_the_partitions() {
    fuzz_one_with(
        Pair(SrcKind::Kafka, SinkKind::Pg),
        436573374,
        40,
        true,
        true,
    )
    .await;
}

/// regression (Kafka->Pg, seed 13): a `RENAME TABLE` was applied at the new name's
/// first message while the old name's earlier messages were still unread; they had
/// no definition (`table fz.té2 has no definition in the schema-change topic`) and
/// every run stopped. A message now waits (its partition held) until every table its
/// DDL names is read up to that DDL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_13_kafka_a_rename_before_the_old_names_messages_are_read() {
    fuzz_one_with(Pair(SrcKind::Kafka, SinkKind::Pg), 13, 40, true, true).await;
}

/// Generated columns of a PostgreSQL source, which its stream never carries: a
/// MariaDB target leaves them out, and a restart (after a target crash) took the
/// target's tables from the source's history with the column again ("Unknown
/// column 'gen' in 'INSERT INTO'"); before that, a snapshot left them out of a
/// PostgreSQL target too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_401_postgres_generated_columns_after_a_restart() {
    fuzz_one_with(Pair(SrcKind::Pg, SinkKind::Maria), 401, 40, true, true).await;
}

/// A VIRTUAL column, which a MINIMAL row image of an insert leaves out, into a
/// MariaDB target, which computes it itself: the job stopped ("an insert's row
/// image leaves out columns [\"gen\"]") though the target needs no value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_501_a_virtual_column_left_out_of_a_minimal_row_image() {
    fuzz_one_with(Pair(SrcKind::Maria, SinkKind::Maria), 501, 40, true, true).await;
}

/// A Kafka job's dedup floors were kept by partition alone: after a swap of two
/// tables' names (`RENAME TABLE a TO t, b TO a, t TO b`) a topic's floor was the
/// other table's, and the commit (here its recovery after a kill) was refused as
/// "another consumer of the group took it over", on every run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_700_kafka_a_swap_gives_a_topic_another_table() {
    fuzz_one_with(
        Pair(SrcKind::Kafka, SinkKind::IcebergEq),
        700,
        40,
        true,
        true,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_7_a_ddl_during_the_initial_snapshot() {
    fuzz_one(Pair(SrcKind::Maria, SinkKind::Iceberg), 7, 40, false).await;
}

#[test]
fn the_plan_is_a_function_of_the_seed() {
    let a = plan(PAIRS[0], 7, 60, true, true);
    let b = plan(PAIRS[0], 7, 60, true, true);
    let c = plan(PAIRS[0], 8, 60, true, true);
    let text = |p: &Plan| {
        p.setup
            .iter()
            .cloned()
            .chain(p.steps.iter().map(|s| s.to_string()))
            .collect::<Vec<_>>()
    };
    assert_eq!(text(&a), text(&b));
    assert_ne!(text(&a), text(&c));
}

#[test]
fn values_compare_without_trailing_fraction_zeros() {
    assert_eq!(norm(Some("12.50")).as_deref(), Some("12.5"));
    assert_eq!(norm(Some("1.0")).as_deref(), Some("1"));
    assert_eq!(norm(Some("100")).as_deref(), Some("100"));
    assert_eq!(norm(Some("-0.0")).as_deref(), Some("0"));
    assert_eq!(
        norm(Some("2024-01-01T10:00:00")).as_deref(),
        Some("2024-01-01 10:00:00")
    );
    assert_eq!(norm(Some("v1.50x")).as_deref(), Some("v1.50x"));
    assert_eq!(
        norm(Some("1970-01-01 00:00:01.000000")).as_deref(),
        Some("1970-01-01 00:00:01")
    );
    assert_eq!(
        norm(Some("1970-01-01 00:00:01.120000")).as_deref(),
        Some("1970-01-01 00:00:01.12")
    );
    // Each reader's form of the same instant, time, boolean and UUID.
    for instant in [
        "2024-02-29 12:34:56.5+00",
        "2024-02-29T12:34:56.500+00:00",
        "2024-02-29 12:34:56.500000",
        "2024-02-29 12:34:56.5Z",
    ] {
        assert_eq!(
            norm(Some(instant)).as_deref(),
            Some("2024-02-29 12:34:56.5")
        );
    }
    assert_eq!(
        norm(Some("1970-01-01 00:00:01+00")),
        norm(Some("1970-01-01 00:00:01Z"))
    );
    assert_eq!(norm(Some("12:34:56.500")).as_deref(), Some("12:34:56.5"));
    assert_eq!(norm(Some("838:59:59")).as_deref(), Some("838:59:59"));
    assert_eq!(norm(Some("true")), norm(Some("1")));
    assert_eq!(
        norm(Some("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11")).as_deref(),
        Some("a0eebc999c0b4ef8bb6d6bb9bd380a11")
    );
    // A string that merely ends like an offset is left alone.
    assert_eq!(norm(Some("plain+00")).as_deref(), Some("plain+00"));
}

/// Some MariaDB plans end with a change logged as a statement, or a generated column
/// or a column with a default that is not a constant added to a table with rows (the
/// job must stop, the same way twice), few enough that most plans (three in four)
/// run whole.
#[test]
fn a_few_plans_end_with_an_expected_stop() {
    let pair = Pair(SrcKind::Maria, SinkKind::Iceberg);
    let stopping: Vec<u64> = (0..400)
        .filter(|&seed| {
            plan(pair, seed, 40, true, true)
                .steps
                .iter()
                .any(|s| matches!(s, Step::Stop(..)))
        })
        .collect();
    eprintln!("seeds whose plan ends with a stop: {stopping:?}");
    assert!(
        !stopping.is_empty() && stopping.len() < 100,
        "{} of 400",
        stopping.len()
    );
}

/// The fuzzer draws every column type family of its SQL sources (each of
/// [`TYPES`] and its kin), a seed's tables and statements aside from them staying
/// what they were.
/// Every DDL form the generator has is drawn within a few hundred seeds, for each
/// SQL source (the statement's text, or a marker of it).
#[test]
fn the_generator_draws_every_ddl_form() {
    let forms: [(SrcKind, &[&str]); 2] = [
        (
            SrcKind::Maria,
            &[
                "ADD COLUMN",
                " AFTER `",
                " FIRST",
                "DROP COLUMN",
                "RENAME COLUMN",
                "MODIFY COLUMN",
                "BIGINT AS (",
                "DEFAULT CURRENT_TIMESTAMP(6)",
                "TRUNCATE TABLE",
                "DROP TABLE",
                "RENAME TABLE",
                ", fz.`swap",
                "CREATE TABLE",
                "TO fz_away.",
                "TO fz.",
                "DROP DATABASE",
                "binlog_format = 'STATEMENT'",
                "binlog_row_image = 'MINIMAL'",
                "binlog_row_image = 'NOBLOB'",
                "SET NAMES latin1",
                "ALGORITHM=COPY",
                "OPTIMIZE TABLE",
            ],
        ),
        (
            SrcKind::Pg,
            &[
                "ADD COLUMN",
                "DROP COLUMN",
                "RENAME COLUMN",
                "ALTER COLUMN",
                "GENERATED ALWAYS AS",
                "TRUNCATE TABLE",
                "DROP TABLE",
                "RENAME TO",
                "CREATE TABLE",
                "SET SCHEMA fz_away",
                "SET SCHEMA fz",
                "RENAME TO fz_gone",
                "DROP SCHEMA",
                "REPLICA IDENTITY FULL",
                "synchronous_commit = off",
                "CREATE INDEX",
                "VACUUM",
            ],
        ),
    ];
    for (src, want) in forms {
        let mut missing: Vec<&str> = want.to_vec();
        for seed in 0..400 {
            let p = plan(Pair(src, SinkKind::Iceberg), seed, 40, true, true);
            for s in p.setup.iter().chain(p.steps.iter().filter_map(|s| match s {
                Step::Sql(s) | Step::Stop(s, _) => Some(s),
                Step::Fault(_) => None,
            })) {
                missing.retain(|f| !s.contains(f));
            }
        }
        assert!(missing.is_empty(), "{src:?}: never drawn: {missing:?}");
    }
}

#[test]
fn the_generator_draws_every_type() {
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..200 {
        let p = plan(Pair(SrcKind::Pg, SinkKind::Iceberg), seed, 40, true, true);
        for s in p.setup.iter().chain(p.steps.iter().filter_map(|s| match s {
            Step::Sql(s) => Some(s),
            Step::Fault(_) => None,
            Step::Stop(s, _) => Some(s),
        })) {
            for ty in [
                "BOOLEAN",
                "SMALLINT",
                "REAL",
                "TIME",
                "BYTEA",
                "JSONB",
                "UUID",
                "NUMERIC(20,0)",
                "TIMESTAMP(6)",
                "TIMESTAMPTZ",
                "INT",
                "BIGINT",
                "VARCHAR(200)",
                "TEXT",
                "DECIMAL(12,2)",
                "DATE",
                "DOUBLE PRECISION",
                "VARCHAR(10)",
                "INTEGER",
                "CHAR(4)",
                "VARCHAR(100)",
            ] {
                // The type whole: followed by `,`, `)`, `;` or the end.
                let whole = s.match_indices(&format!(" {ty}")).any(|(i, m)| {
                    matches!(
                        s[i + m.len()..].chars().next(),
                        None | Some(',' | ')' | ';')
                    )
                });
                if whole {
                    seen.insert(ty);
                }
            }
        }
    }
    assert_eq!(seen.len(), 21, "types drawn: {seen:?}");
    // MariaDB's own types and character sets.
    let mut want: Vec<String> = [
        "TINYINT",
        "MEDIUMINT",
        "INT UNSIGNED",
        "YEAR",
        "SET('a', 'b', 'c')",
        "VARBINARY(64)",
        "BIGINT UNSIGNED",
        "CHARACTER SET latin1",
        "ENUM(",
    ]
    .map(String::from)
    .to_vec();
    want.extend(CHARSETS.iter().map(|(cs, _)| format!("CHARACTER SET {cs}")));
    let mut missing = want.clone();
    for seed in 0..200 {
        let p = plan(Pair(SrcKind::Maria, SinkKind::Pg), seed, 40, true, true);
        for s in p.setup.iter().chain(p.steps.iter().filter_map(|s| match s {
            Step::Sql(s) | Step::Stop(s, _) => Some(s),
            Step::Fault(_) => None,
        })) {
            missing.retain(|ty| !s.contains(&format!(" {ty}")));
        }
    }
    assert!(missing.is_empty(), "MariaDB types never drawn: {missing:?}");
}

/// Security (issue item 12): a table named `../../../esc` (and one with a slash and a
/// NUL-free hostile mix) is mirrored into folders inside the warehouse; nothing is
/// written beside or above it. Before, its metadata and Parquet files went to
/// `<warehouse>/../../esc`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_table_names_stay_inside_the_warehouse() {
    let mut rig = Rig::new(Pair(SrcKind::Maria, SinkKind::Iceberg), 0.2).await;
    // The warehouse three levels down, so `../../..` lands inside the temp folder.
    let deep = rig.dir.path().join("a/b/c");
    std::fs::create_dir_all(&deep).unwrap();
    let text = std::fs::read_to_string(&rig.job).unwrap().replace(
        &format!("warehouse: {}", rig.dir.path().join("warehouse").display()),
        &format!("warehouse: {}", deep.join("warehouse").display()),
    );
    std::fs::write(&rig.job, text).unwrap();
    rig.exec(
        "CREATE TABLE fz.`../../../esc` (id INT PRIMARY KEY, v VARCHAR(10));
         INSERT INTO fz.`../../../esc` VALUES (1, 'a'), (2, 'b');
         CREATE TABLE fz.`a/..\\b` (k INT);
         INSERT INTO fz.`a/..\\b` VALUES (7);",
    )
    .await
    .unwrap();
    rig.catch_up().unwrap();
    rig.exec("UPDATE fz.`../../../esc` SET v = 'c' WHERE id = 2")
        .await
        .unwrap();
    rig.catch_up().unwrap();
    // Every file the job wrote is under the warehouse or the state folder.
    let mut outside = Vec::new();
    let mut stack = vec![rig.dir.path().to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.starts_with(deep.join("warehouse"))
                || p.starts_with(rig.dir.path().join("fs/state"))
            {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else if !["job.yaml", "job.log"].contains(&p.file_name().unwrap().to_str().unwrap()) {
                outside.push(p);
            }
        }
    }
    assert!(
        outside.is_empty(),
        "files outside the warehouse: {outside:?}"
    );
    assert!(!rig.dir.path().join("esc").exists());
    // The tables read back as the source has them.
    use runner::iceberg::{Catalog, CatalogConfig};
    let cat = Catalog::open(&CatalogConfig::local(deep.join("warehouse")))
        .await
        .unwrap();
    let rows = lakeshift_tests::iceberg_text_rows(&cat, DB, "../../../esc", None)
        .await
        .unwrap();
    assert_eq!(
        rows,
        vec![
            vec![Some("1".to_owned()), Some("a".to_owned())],
            vec![Some("2".to_owned()), Some("c".to_owned())]
        ]
    );
    let rows = lakeshift_tests::iceberg_text_rows(&cat, DB, "a/..\\b", None)
        .await
        .unwrap();
    assert_eq!(rows, vec![vec![Some("7".to_owned())]]);
}

/// Issue items 1 and 2: sessions with `binlog_row_image=NOBLOB` and `MINIMAL`.
/// Updates leave unchanged columns out of the after image (a TEXT column under
/// NOBLOB; every unchanged column under MINIMAL, key changes too); those values stay
/// what the target holds. Before, the NOBLOB update wrote NULL into the TEXT column
/// and the MINIMAL key change NULL into the other columns. An insert that leaves
/// columns out (MINIMAL, a column with a default) stops the job naming the row image.
/// A BIT column the update leaves out is read back as its number (a MariaDB target
/// gave its bytes, not UTF-8: every run stopped, naming nothing; a hostile tester).
async fn row_images(sink: SinkKind) {
    let mut rig = Rig::running(
        Pair(SrcKind::Maria, sink),
        0.2,
        "CREATE TABLE fz.doc (id INT PRIMARY KEY, title VARCHAR(20), body TEXT, n INT, bb BIT(8));
         INSERT INTO fz.doc VALUES (1, 'one', 'long body one', 10, b'11110000'),
           (2, 'two', 'body two', 20, b'1'), (3, 'three', 'body three', 30, b'11111111'),
           (4, 'four', NULL, 40, NULL);",
    )
    .await;
    for image in ["NOBLOB", "MINIMAL"] {
        let bump = if image == "NOBLOB" { 1 } else { 100 };
        rig.exec(&format!(
            "SET SESSION binlog_row_image = {image};
             UPDATE fz.doc SET title = 'T{image}' WHERE id = 1;
             UPDATE fz.doc SET n = n + {bump} WHERE id IN (2, 3);
             INSERT INTO fz.doc VALUES ({k}, 'new', 'new body', 5, b'10000001');
             DELETE FROM fz.doc WHERE id = 4;",
            k = 10 + bump
        ))
        .await
        .unwrap();
    }
    // A key change under MINIMAL: the other columns come from the old row.
    rig.exec("SET SESSION binlog_row_image = MINIMAL; UPDATE fz.doc SET id = 7 WHERE id = 3")
        .await
        .unwrap();
    rig.catch_up().unwrap();
    rig.compare().await.unwrap();
    // An insert that leaves a column out: a clear stop, again on a restart.
    rig.exec("SET SESSION binlog_row_image = MINIMAL; INSERT INTO fz.doc (id, title) VALUES (50, 'partial')")
        .await
        .unwrap();
    for _ in 0..2 {
        let e = rig.catch_up().unwrap_err();
        assert!(
            e.contains("binlog_row_image")
                && e.contains("fz.doc")
                && e.contains("[\"body\", \"n\", \"bb\"]"),
            "{e}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_images_minimal_and_noblob_into_iceberg() {
    row_images(SinkKind::Iceberg).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_images_minimal_and_noblob_into_postgres() {
    row_images(SinkKind::Pg).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_images_minimal_and_noblob_into_mariadb() {
    row_images(SinkKind::Maria).await;
}

/// Issue item 14: a table list that matches nothing (a typo, an account that may not
/// read the tables) is refused at the start, naming the patterns and what to check;
/// before, the job ran on, logging `0 row changes`, and exited 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_list_that_matches_nothing_is_refused() {
    for src in [SrcKind::Maria, SrcKind::Pg] {
        let mut rig = Rig::new(Pair(src, SinkKind::Iceberg), 0.2).await;
        rig.exec("CREATE TABLE fz.present (id INT PRIMARY KEY)")
            .await
            .unwrap();
        let text = std::fs::read_to_string(&rig.job)
            .unwrap()
            .replace("tables: ['fz\\..*']", "tables: ['fx\\..*']");
        std::fs::write(&rig.job, text).unwrap();
        let e = rig.catch_up().unwrap_err();
        assert!(
            e.contains("source.tables [\"fx\\\\..*\"] matches none of the")
                && e.contains("GRANT SELECT"),
            "{src:?}: {e}"
        );
        // Fixed, the same job runs and logs what it captures.
        let text = std::fs::read_to_string(&rig.job)
            .unwrap()
            .replace("tables: ['fx\\..*']", "tables: ['fz\\..*']");
        std::fs::write(&rig.job, text).unwrap();
        rig.catch_up().unwrap();
        assert!(
            std::fs::read_to_string(rig.log_path())
                .unwrap()
                .contains("capturing 1 table(s)"),
            "{src:?}: {}",
            rig.log_tail()
        );
    }
}

/// Found by the fuzzer (MariaDB -> PostgreSQL, table DDL on): a table created and a
/// table renamed before a graceful stop, a column of each renamed while the job was
/// down. The restart took both for tables the table list newly matched and read
/// them alone, at the current point, under their definitions at the resume point:
/// `Unknown column`, the job stopped. They come from the binlog like every other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_created_or_renamed_before_a_stop_are_not_snapshotted_again() {
    let mut rig = Rig::running(
        Pair(SrcKind::Maria, SinkKind::Pg),
        0.2,
        "CREATE TABLE fz.a (id BIGINT PRIMARY KEY, c INT); INSERT INTO fz.a VALUES (1, 1), (2, 2)",
    )
    .await;
    rig.exec(
        "CREATE TABLE fz.b (id BIGINT PRIMARY KEY, x INT); INSERT INTO fz.b VALUES (1, 10);
         RENAME TABLE fz.a TO fz.a2; INSERT INTO fz.a2 VALUES (3, 3);",
    )
    .await
    .unwrap();
    // The job has read the DDL (its tables are on the target) before it stops.
    let dst = match &rig.dst {
        Dst::Pg(p) => p.client("lake").await,
        _ => unreachable!("a PostgreSQL target"),
    };
    lakeshift_tests::wait_until("the job created fz.b and renamed fz.a", || async {
        let (tables, _) = pg_tables(&dst, DB, true).await;
        tables == ["a2", "b"]
    })
    .await;
    assert_eq!(
        rig.signal(&["TERM"]).unwrap(),
        Some(0),
        "{}",
        rig.log_tail()
    );
    rig.exec(
        "ALTER TABLE fz.a2 RENAME COLUMN c TO c2; ALTER TABLE fz.b RENAME COLUMN x TO y;
         INSERT INTO fz.a2 VALUES (4, 4); INSERT INTO fz.b VALUES (2, 20);",
    )
    .await
    .unwrap();
    rig.catch_up().unwrap();
    rig.compare().await.unwrap();
}

/// Issue item 9 (found again by the fuzzer, PostgreSQL -> MariaDB seed 1006): the
/// MariaDB target's server default is latin1 (`--no-defaults`), and the target
/// database exists already, made latin1 by its owner; tables made by the snapshot
/// and by a DDL later take 4-byte and non-Latin text exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latin1_mariadb_target_takes_any_text() {
    let mut rig = Rig::new(Pair(SrcKind::Pg, SinkKind::Maria), 0.2).await;
    let text = "'emoji \u{1F600} \u{1D11E} line\u{2028}sep caf\u{e9} \u{4E2D}\u{6587}'";
    rig.exec(&format!(
        "CREATE TABLE fz.a (id BIGINT PRIMARY KEY, t TEXT, v VARCHAR(50));
         INSERT INTO fz.a VALUES (1, {text}, {text});"
    ))
    .await
    .unwrap();
    match &rig.dst {
        Dst::Maria(m) => m
            .conn(None)
            .await
            .query_drop("CREATE DATABASE fz CHARACTER SET latin1")
            .await
            .unwrap(),
        _ => unreachable!("a MariaDB target"),
    }
    rig.start();
    rig.wait_for_log("snapshot done and committed").unwrap();
    rig.exec(&format!(
        "CREATE TABLE fz.b (id BIGINT PRIMARY KEY, t TEXT);
         INSERT INTO fz.b VALUES (1, {text}); INSERT INTO fz.a VALUES (2, {text}, 'x');"
    ))
    .await
    .unwrap();
    rig.catch_up().unwrap();
    rig.compare().await.unwrap();
}

/// Found by the hostile tester: MINIMAL and NOBLOB row images of a table with NOT
/// NULL non-key columns. The before image holds only what identifies the row (the
/// key), the after image only what changed; the Iceberg sink read the before image
/// under the table's schema and stopped on every run (`Column 'e' is declared as
/// non-nullable but contains null values`).
async fn row_images_not_null(sink: SinkKind) {
    let mut rig = Rig::running(
        Pair(SrcKind::Maria, sink),
        0.2,
        "CREATE TABLE fz.t (id INT PRIMARY KEY, a INT, b TEXT NOT NULL, e INT NOT NULL DEFAULT 7);
         INSERT INTO fz.t VALUES (1, 1, 'one', 1), (2, 2, 'two', 2), (3, 3, 'three', 3);",
    )
    .await;
    rig.exec(
        "SET SESSION binlog_row_image = MINIMAL;
         UPDATE fz.t SET a = 10 WHERE id = 1;
         BEGIN; INSERT INTO fz.t VALUES (4, 4, 'four', 4); UPDATE fz.t SET a = 40 WHERE id = 4; COMMIT;
         UPDATE fz.t SET id = 20 WHERE id = 2;
         DELETE FROM fz.t WHERE id = 3;
         SET SESSION binlog_row_image = NOBLOB;
         UPDATE fz.t SET a = 11, e = 9 WHERE id = 1;
         DELETE FROM fz.t WHERE id = 4;",
    )
    .await
    .unwrap();
    rig.catch_up().unwrap();
    rig.compare().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_images_of_not_null_columns_into_iceberg() {
    row_images_not_null(SinkKind::Iceberg).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_images_of_not_null_columns_into_iceberg_equality_deletes() {
    row_images_not_null(SinkKind::IcebergEq).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_images_of_not_null_columns_into_postgres() {
    row_images_not_null(SinkKind::Pg).await;
}

/// PostgreSQL's default replica identity sends only the key for a delete and for
/// an update's old row; a table with NOT NULL non-key columns into Iceberg takes
/// both (the before image only identifies the row).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_default_replica_identity_into_iceberg() {
    let setup = "CREATE TABLE fz.orders (id BIGINT PRIMARY KEY, customer_id INT NOT NULL, note TEXT NOT NULL);
         INSERT INTO fz.orders SELECT g, g % 7, 'n' || g FROM generate_series(1, 50) g;";
    let mut rig = Rig::running(Pair(SrcKind::Pg, SinkKind::Iceberg), 0.2, setup).await;
    rig.exec(
        "DELETE FROM fz.orders WHERE id % 10 = 0;
         UPDATE fz.orders SET customer_id = 99 WHERE id % 10 = 1;
         UPDATE fz.orders SET id = id + 1000 WHERE id % 10 = 2;",
    )
    .await
    .unwrap();
    rig.catch_up().unwrap();
    rig.compare().await.unwrap();
}

/// A crash of the Iceberg catalog's PostgreSQL server while checkpoints commit: the
/// job starts again from the last checkpoint the catalog holds (as after a relational
/// target's restart) and stays exact.
/// regression (fuzz seeds 11 and 13, Maria->IcebergS3): the job stopped at the first
/// crash that met a catalog statement (`checkpoint 5: commit of fz.t1: catalog
/// database: error communicating with database: Connection reset by peer`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_server_crash_while_checkpoints_commit_is_survived() {
    let setup = format!(
        "CREATE TABLE {DB}.t (id INT PRIMARY KEY, v INT NOT NULL); INSERT INTO {DB}.t VALUES (1, 0), (2, 0)"
    );
    let mut rig = Rig::running(Pair(SrcKind::Maria, SinkKind::IcebergS3), 0.1, &setup).await;
    let mut n = 0;
    for crash in 1..=5 {
        // Changes in flight while the catalog's server goes down: checkpoints
        // (every 0.1 s) meet the crash.
        let (src, dst) = (&rig.src, &mut rig.dst);
        let writes = async {
            for _ in 0..40 {
                rig_exec_detached(src, &format!("UPDATE {DB}.t SET v = v + 1 WHERE id = 1")).await;
            }
        };
        let down = async {
            let Dst::IcebergS3(l) = dst else {
                unreachable!()
            };
            // A slow catalog (every round trip 2 x 100 ms): a checkpoint is in the
            // middle of its catalog statements when the server goes down.
            l.catalog_proxy.set(lakeshift_tests::FaultProxy::slow(100));
            tokio::time::sleep(Duration::from_millis(400)).await;
            l.catalog.crash_and_restart().await;
            l.catalog_proxy.set(lakeshift_tests::FaultProxy::PASS);
        };
        tokio::join!(writes, down);
        n += 40;
        rig.check_running()
            .unwrap_or_else(|e| panic!("after catalog crash {crash}: {e}"));
    }
    rig.catch_up().unwrap();
    rig.compare().await.unwrap();
    let log = std::fs::read_to_string(rig.log_path()).unwrap();
    eprintln!(
        "{n} updates, 5 catalog crashes; the job started again {} times",
        log.matches("starting again from the last checkpoint")
            .count()
    );
}
