//! Test harness: real servers started by the tests themselves, and schema readers.
//!
//! - [`MariaDb`]: a throwaway MariaDB (mariadb-install-db + mariadbd) in a temp folder
//!   on a free port, with binlog on; killed and removed on drop.
//! - [`PgServer`]: a throwaway PostgreSQL (initdb + postgres) in a temp folder on a
//!   free port; stopped and removed on drop. `initdb` refuses to run as root (as CI
//!   does), so as root both run as the `postgres` user, on a folder given to it.

pub mod constraints;
pub mod pgbench;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// The Python with pyiceberg and DuckDB that `scripts/test.sh` installs (or the one
/// LAKESHIFT_INTEROP_PYTHON names), for reading tables with other engines.
pub fn interop_python() -> PathBuf {
    if let Ok(p) = std::env::var("LAKESHIFT_INTEROP_PYTHON") {
        return PathBuf::from(p);
    }
    panic!(
        "LAKESHIFT_INTEROP_PYTHON is not set: run ./scripts/test.sh, which installs pyiceberg and DuckDB into a virtualenv (in ~/.cache/lakeshift) and sets it"
    )
}

/// Python that opens DuckDB as `con` with its parquet, avro and iceberg extensions
/// (from the PyPI packages `scripts/test.sh` installs, loaded offline); scripts that
/// read lakeshift's tables with DuckDB start with it.
pub const DUCKDB_PRELUDE: &str = r#"
import duckdb, glob, json, os, sys
con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
base = glob.glob(os.path.join(os.path.dirname(duckdb.__file__), "..", "duckdb_ext", "extensions", "*", "*"))[0]
for n in ["parquet", "avro", "iceberg"]:
    con.execute(f"LOAD '{base}/{n}.duckdb_extension'")
"#;

pub fn corpus(name: &str) -> String {
    std::fs::read_to_string(workspace_root().join("tests/corpus").join(name))
        .unwrap_or_else(|e| panic!("corpus {name}: {e}"))
}

/// Poll `ready` every 100 ms until it holds; fail the test after 60 s.
pub async fn wait_until<F, Fut>(what: &str, mut ready: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready().await {
        assert!(
            Instant::now() < deadline,
            "timed out after 60 s waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A TCP port nothing listens on now (the OS picks it).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// Wait (at most 60 s) until process `pid` handles SIGINT and SIGTERM (its
/// `SigCgt` mask in /proc), so that a signal sent next reaches the job's handler,
/// not the default action of a process still starting; returns early if it ended.
pub fn wait_for_handlers(pid: u32) {
    const WANT: u64 = (1 << (2 - 1)) | (1 << (15 - 1));
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            return;
        };
        let caught = status
            .lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
            .unwrap_or(0);
        if caught & WANT == WANT {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("process {pid} did not install its SIGINT/SIGTERM handlers within 60 s");
}

/// A throwaway MariaDB server.
pub struct MariaDb {
    pub port: u16,
    child: Child,
    args: Vec<String>,
    _dir: tempfile::TempDir,
}

impl MariaDb {
    pub async fn start() -> MariaDb {
        Self::start_with(&[]).await
    }

    /// A server with extra `mariadbd` options (`--binlog-row-metadata=FULL`, ...).
    pub async fn start_with(extra: &[&str]) -> MariaDb {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        // Each server its own tmpdir: bootstraps running side by side in /tmp have been
        // seen to remove each other's temporary tables.
        let tmp = dir.path().join("tmp");
        std::fs::create_dir_all(&tmp).expect("tmpdir");
        let out = Command::new("mariadb-install-db")
            .args([
                "--no-defaults",
                &format!("--datadir={}", data.display()),
                &format!("--tmpdir={}", tmp.display()),
                "--user=root",
                "--auth-root-authentication-method=normal",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .expect("mariadb-install-db runs");
        assert!(
            out.status.success(),
            "mariadb-install-db failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = free_port();
        let mut args: Vec<String> = [
            "--no-defaults".to_owned(),
            format!("--datadir={}", data.display()),
            format!("--tmpdir={}", tmp.display()),
            format!("--socket={}", dir.path().join("sock").display()),
            format!("--port={port}"),
            "--bind-address=127.0.0.1".into(),
            "--user=root".into(),
            "--log-bin=binlog".into(),
            "--binlog-format=ROW".into(),
            "--server-id=1".into(),
        ]
        .into();
        args.extend(extra.iter().map(|s| s.to_string()));
        let child = Self::spawn(&args);
        let db = MariaDb {
            port,
            child,
            args,
            _dir: dir,
        };
        db.wait_ready("mariadbd accepts connections").await;
        db
    }

    fn spawn(args: &[String]) -> Child {
        Command::new("mariadbd")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("mariadbd starts")
    }

    /// Wait until the server answers a query.
    async fn wait_ready(&self, what: &str) {
        wait_until(what, || async {
            use mysql_async::prelude::Queryable;
            match mysql_async::Conn::new(self.opts(None)).await {
                Ok(mut c) => {
                    let up = c.query_drop("SELECT 1").await.is_ok();
                    let _ = c.disconnect().await;
                    up
                }
                Err(_) => false,
            }
        })
        .await;
    }

    /// Start the server again on the same data and port (it has stopped).
    async fn respawn(&mut self) {
        self.child = Self::spawn(&self.args);
        self.wait_ready("mariadbd accepts connections again").await;
    }

    /// Kill the server (SIGKILL) and start it again on the same data and port.
    pub async fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.respawn().await;
    }

    /// Shut the server down cleanly, run `edit` on its data folder (to damage a
    /// binlog file as a crash would), and start it again on the same port.
    pub async fn shutdown_edit_start(&mut self, edit: impl FnOnce(&std::path::Path)) {
        {
            use mysql_async::prelude::Queryable;
            let mut c = self.conn(None).await;
            let _ = c.query_drop("SHUTDOWN").await;
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.child.try_wait().expect("wait").is_none() {
            assert!(Instant::now() < deadline, "mariadbd did not shut down");
            std::thread::sleep(Duration::from_millis(50));
        }
        edit(&self._dir.path().join("data"));
        self.respawn().await;
    }

    /// Stop the server as a service manager does (SIGTERM: a normal shutdown) and
    /// start it again on the same port.
    pub async fn terminate_and_start(&mut self) {
        let ok = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "SIGTERM to mariadbd failed");
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.child.try_wait().expect("wait").is_none() {
            assert!(Instant::now() < deadline, "mariadbd did not shut down");
            std::thread::sleep(Duration::from_millis(50));
        }
        self.respawn().await;
    }

    pub fn opts(&self, db: Option<&str>) -> mysql_async::Opts {
        mysql_async::OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(self.port)
            .user(Some("root"))
            .db_name(db.map(str::to_owned))
            .into()
    }

    pub async fn conn(&self, db: Option<&str>) -> mysql_async::Conn {
        mysql_async::Conn::new(self.opts(db))
            .await
            .expect("connect")
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether this process runs as root (PostgreSQL refuses to).
fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// A command run as the `postgres` user when we are root (setpriv execs, so the
/// child's pid is the server's own), as ourselves otherwise.
fn pg_command(program: &str, as_postgres: bool) -> Command {
    if as_postgres {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=postgres",
            "--regid=postgres",
            "--init-groups",
            "--",
            program,
        ]);
        c
    } else {
        Command::new(program)
    }
}

/// A throwaway PostgreSQL server.
pub struct PgServer {
    pub port: u16,
    child: Child,
    settings: Vec<String>,
    _dir: tempfile::TempDir,
}

/// `postgres` on data folder `dir/data` at `port`.
fn spawn_postgres(dir: &Path, port: u16, settings: &[String]) -> Child {
    pg_command("postgres", is_root())
        .args(["-D", &dir.join("data").display().to_string()])
        .args(["-p", &port.to_string()])
        .args(["-k", &dir.display().to_string()])
        .args(["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"])
        .args(settings.iter().flat_map(|s| ["-c", s.as_str()]))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("postgres starts")
}

impl PgServer {
    pub async fn start() -> PgServer {
        Self::start_with(&[]).await
    }

    /// A server whose WAL carries logical decoding (`wal_level=logical`), for the
    /// PostgreSQL source.
    pub async fn start_logical() -> PgServer {
        Self::start_with(&[
            "wal_level=logical",
            "max_replication_slots=10",
            "max_wal_senders=10",
        ])
        .await
    }

    /// A server with extra `-c` settings.
    pub async fn start_with(settings: &[&str]) -> PgServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let as_postgres = is_root();
        if as_postgres {
            let ok = Command::new("chown")
                .args(["postgres:", &dir.path().display().to_string()])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "chown of the PostgreSQL temp folder to postgres failed");
        }
        let data = dir.path().join("data");
        let out = pg_command("initdb", as_postgres)
            .args(["-D", &data.display().to_string()])
            .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"])
            .arg("--locale=C")
            .output()
            .expect("initdb runs");
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = free_port();
        let settings: Vec<String> = settings.iter().map(|s| s.to_string()).collect();
        let child = spawn_postgres(dir.path(), port, &settings);
        let server = PgServer {
            port,
            child,
            settings,
            _dir: dir,
        };
        server.wait_ready().await;
        server
    }

    async fn wait_ready(&self) {
        let port = self.port;
        wait_until("postgres accepts connections", || async {
            pg_config(port, "postgres")
                .connect(tokio_postgres::NoTls)
                .await
                .is_ok()
        })
        .await;
    }

    /// Crash the server (an immediate shutdown: every backend ends at once, open
    /// transactions with it) and start it again on the same data and port (it
    /// recovers from its WAL).
    pub async fn crash_and_restart(&mut self) {
        let ok = Command::new("kill")
            .args(["-QUIT", &self.child.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "SIGQUIT to postgres failed");
        self.child.wait().expect("postgres ends");
        self.child = spawn_postgres(self._dir.path(), self.port, &self.settings);
        self.wait_ready().await;
    }

    /// A client of database `db`.
    pub async fn client(&self, db: &str) -> tokio_postgres::Client {
        let (client, conn) = pg_config(self.port, db)
            .connect(tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("connect to the test PostgreSQL, database {db}: {e}"));
        tokio::spawn(async move {
            let _ = conn.await;
        });
        client
    }

    /// Create database `name` and connect to it.
    pub async fn create_db(&self, name: &str) -> tokio_postgres::Client {
        self.client("postgres")
            .await
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create database");
        self.client(name).await
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pg_config(port: u16, db: &str) -> tokio_postgres::Config {
    let mut c = tokio_postgres::Config::new();
    c.host("127.0.0.1").port(port).user("postgres").dbname(db);
    c
}

/// One column of a final schema, as read from a real server: table, column,
/// nullable, and a coarse type family that both sides agree on.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ColumnFact {
    pub table: String,
    pub column: String,
    pub nullable: bool,
    pub family: String,
}

/// MySQL information_schema DATA_TYPE (+ COLUMN_TYPE) -> family.
pub fn mysql_family(data_type: &str, column_type: &str) -> &'static str {
    match data_type {
        "tinyint" if column_type.starts_with("tinyint(1)") => "boolean",
        "tinyint" | "smallint" | "mediumint" | "int" | "bigint" | "year" => "integer",
        "decimal" => "decimal",
        "float" | "double" => "float",
        "char" | "varchar" | "tinytext" | "text" | "mediumtext" | "longtext" | "enum" | "set" => {
            "string"
        }
        "binary" | "varbinary" | "tinyblob" | "blob" | "mediumblob" | "longblob" => "binary",
        "json" => "json",
        "date" => "date",
        "time" => "time",
        "datetime" | "timestamp" => "timestamp",
        "bit" => "bit",
        _ => "other",
    }
}

/// PostgreSQL information_schema data_type -> family.
pub fn pg_family(data_type: &str) -> &'static str {
    match data_type {
        "boolean" => "boolean",
        "smallint" | "integer" | "bigint" => "integer",
        "numeric" | "money" => "decimal",
        "real" | "double precision" => "float",
        "character" | "character varying" | "text" => "string",
        "bytea" => "binary",
        "json" | "jsonb" => "json",
        "uuid" => "uuid",
        "date" => "date",
        "time without time zone" | "time with time zone" => "time",
        "timestamp without time zone" | "timestamp with time zone" => "timestamp",
        "bit" | "bit varying" => "bit",
        "interval" => "interval",
        "ARRAY" => "array",
        _ => "other",
    }
}

/// Documented lossy mappings: (source family, target family) pairs that are expected.
pub fn compatible(src: &str, dst: &str) -> bool {
    src == dst
        || matches!(
            (src, dst),
            ("other", "binary")     // MySQL spatial -> PostgreSQL bytea (WKB)
                | ("uuid", "string")    // uuid -> CHAR(36)
                | ("interval", "string")// interval -> VARCHAR(64)
                | ("array", "json")     // arrays -> JSON
                | ("other", "string")   // inet etc. -> text
                | ("integer", "decimal") // BIGINT UNSIGNED -> numeric(20) (pgloader)
                | ("json", "string")    // MariaDB's JSON is LONGTEXT with a check,
                | ("string", "json")    // so information_schema says longtext
                | ("array", "string") // arrays -> JSON = LONGTEXT in MariaDB
        )
}

/// Compare by (table, column): targets without column positions (PostgreSQL, Oracle)
/// add columns last, which the translation reports as a warning.
pub fn compare_columns(src: &[ColumnFact], dst: &[ColumnFact]) {
    let (mut src, mut dst) = (src.to_vec(), dst.to_vec());
    src.sort();
    dst.sort();
    let key = |c: &ColumnFact| (c.table.clone(), c.column.clone());
    let sk: Vec<_> = src.iter().map(key).collect();
    let dk: Vec<_> = dst.iter().map(key).collect();
    assert_eq!(sk, dk, "tables and columns differ");
    for (s, d) in src.iter().zip(&dst) {
        assert_eq!(
            s.nullable, d.nullable,
            "nullability of {}.{}",
            s.table, s.column
        );
        assert!(
            compatible(&s.family, &d.family),
            "{}.{}: {} became {}",
            s.table,
            s.column,
            s.family,
            d.family
        );
    }
}

pub async fn mysql_schema(conn: &mut mysql_async::Conn, db: &str) -> Vec<ColumnFact> {
    use mysql_async::prelude::Queryable;
    let rows: Vec<(String, String, String, String, String)> = conn
        .exec(
            "SELECT c.TABLE_NAME, c.COLUMN_NAME, c.IS_NULLABLE, c.DATA_TYPE, c.COLUMN_TYPE \
             FROM information_schema.COLUMNS c JOIN information_schema.TABLES t \
               ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME \
             WHERE c.TABLE_SCHEMA = ? AND t.TABLE_TYPE = 'BASE TABLE' \
             ORDER BY 1, c.ORDINAL_POSITION",
            (db,),
        )
        .await
        .expect("information_schema");
    rows.into_iter()
        .map(|(t, c, n, dt, ct)| ColumnFact {
            table: t.to_lowercase(),
            column: c.to_lowercase(),
            nullable: n == "YES",
            family: mysql_family(&dt, &ct).into(),
        })
        .collect()
}

pub async fn pg_schema(client: &tokio_postgres::Client, schema: &str) -> Vec<ColumnFact> {
    let rows = client
        .query(
            "SELECT c.table_name::text, c.column_name::text, c.is_nullable::text, c.data_type::text \
             FROM information_schema.columns c JOIN information_schema.tables t \
               ON t.table_schema = c.table_schema AND t.table_name = c.table_name \
             WHERE c.table_schema = $1 AND t.table_type = 'BASE TABLE' \
             ORDER BY 1, c.ordinal_position",
            &[&schema],
        )
        .await
        .expect("information_schema");
    rows.iter()
        .map(|r| ColumnFact {
            table: r.get::<_, String>(0).to_lowercase(),
            column: r.get::<_, String>(1).to_lowercase(),
            nullable: r.get::<_, String>(2) == "YES",
            family: pg_family(&r.get::<_, String>(3)).into(),
        })
        .collect()
}

/// A throwaway Kafka-protocol broker: `tansu` (from crates.io, in memory) on a free
/// port. The binary is `$LAKESHIFT_TANSU`, else `tansu` on the PATH or in
/// `~/.cargo/bin`; scripts/test.sh installs it.
pub struct Broker {
    pub port: u16,
    child: Child,
}

impl Broker {
    pub fn binary() -> PathBuf {
        if let Ok(p) = std::env::var("LAKESHIFT_TANSU") {
            return PathBuf::from(p);
        }
        let home = std::env::var("HOME").unwrap_or_default();
        let cargo_bin = PathBuf::from(home).join(".cargo/bin/tansu");
        if cargo_bin.exists() {
            return cargo_bin;
        }
        PathBuf::from("tansu")
    }

    pub async fn start() -> Broker {
        let port = free_port();
        let url = format!("tcp://127.0.0.1:{port}");
        let bin = Self::binary();
        let child = Command::new(&bin)
            .args(["broker", "--listener-url", &url, "--advertised-listener-url", &url])
            .args(["--storage-engine", "memory://tansu/", "--silent"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start the Kafka broker {} ({e}); scripts/test.sh installs it with `cargo install tansu --locked --features dynostore`",
                    bin.display()
                )
            });
        let broker = Broker { port, child };
        wait_until("the Kafka broker accepts connections", || async move {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
        })
        .await;
        broker
    }

    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An S3-compatible server for tests: moto's server mode (from the interop
/// virtualenv `scripts/test.sh` installs) on a free port, with one bucket.
pub struct S3Server {
    pub port: u16,
    pub bucket: String,
    child: Child,
}

impl S3Server {
    pub async fn start(bucket: &str) -> S3Server {
        let port = free_port();
        let child = Command::new(interop_python())
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start moto's S3 server ({e}); scripts/test.sh installs it")
            });
        let s = S3Server {
            port,
            bucket: bucket.to_owned(),
            child,
        };
        wait_until("the S3 server accepts connections", || async move {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
        })
        .await;
        s.boto3(&format!("c.create_bucket(Bucket='{bucket}')"), &[]);
        s
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The environment a lakeshift process (or this one) reads the server from.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", "test".into()),
            ("AWS_SECRET_ACCESS_KEY", "test".into()),
        ]
    }

    /// [`S3Server::env`] as owned pairs (a catalog's `s3_env`).
    pub fn env_pairs(&self) -> Vec<(String, String)> {
        self.env()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect()
    }

    /// (key, size, ETag) of the objects under `prefix` (a multipart upload's ETag
    /// ends in `-<parts>`).
    pub fn objects(&self, prefix: &str) -> Vec<(String, u64, String)> {
        let out = self.boto3(
            &format!(
                "for page in c.get_paginator('list_objects_v2').paginate(Bucket='{}', Prefix='{prefix}'):\n    for o in page.get('Contents', []): print(o['Key'], o['Size'], o['ETag'].strip('\"'))",
                self.bucket
            ),
            &[],
        );
        out.lines()
            .filter_map(|l| {
                let mut w = l.split(' ');
                Some((
                    w.next()?.to_owned(),
                    w.next()?.parse().ok()?,
                    w.next()?.to_owned(),
                ))
            })
            .collect()
    }

    /// Put an object `key` holding `body`.
    pub fn put(&self, key: &str, body: &str) {
        self.boto3(
            &format!(
                "c.put_object(Bucket='{}', Key=sys.argv[1], Body=sys.argv[2].encode())",
                self.bucket
            ),
            &[key, body],
        );
    }

    /// Run `script` in Python with `c`, a boto3 S3 client of this server, and `sys`;
    /// `args` are its `sys.argv[1..]`. Its standard output.
    fn boto3(&self, script: &str, args: &[&str]) -> String {
        let out = Command::new(interop_python())
            .arg("-c")
            .arg(format!(
                "import boto3, sys\nc = boto3.client('s3', endpoint_url='{}', aws_access_key_id='test', aws_secret_access_key='test', region_name='us-east-1')\n{script}",
                self.endpoint()
            ))
            .args(args)
            .output()
            .expect("python");
        assert!(
            out.status.success(),
            "boto3 against {}: {}",
            self.endpoint(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Keys of the objects under `prefix`.
    pub fn keys(&self, prefix: &str) -> Vec<String> {
        self.objects(prefix).into_iter().map(|o| o.0).collect()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TCP proxy in front of a server, for fault injection: it passes traffic, refuses
/// it (open connections cut, new ones closed at once), or passes it slowly; and it
/// counts the HTTP requests it passed.
pub struct FaultProxy {
    pub port: u16,
    mode: Arc<AtomicU64>,
    requests: Arc<AtomicU64>,
    refused: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;

/// One direction of a proxied connection; `count`: HTTP request lines seen.
async fn proxy_pipe(
    mut r: tokio::net::tcp::OwnedReadHalf,
    mut w: tokio::net::tcp::OwnedWriteHalf,
    mode: Arc<AtomicU64>,
    count: Option<Arc<AtomicU64>>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match tokio::time::timeout(Duration::from_millis(100), r.read(&mut buf)).await {
            Err(_) => {
                if mode.load(AtomicOrdering::Relaxed) == FaultProxy::REFUSE {
                    return;
                }
                continue;
            }
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(n)) => n,
        };
        if let Some(c) = &count {
            let seen = buf[..n]
                .windows(11)
                .filter(|x| *x == b" HTTP/1.1\r\n")
                .count();
            c.fetch_add(seen as u64, AtomicOrdering::Relaxed);
        }
        match mode.load(AtomicOrdering::Relaxed) {
            FaultProxy::REFUSE => return,
            FaultProxy::PASS => {}
            ms => tokio::time::sleep(Duration::from_millis(ms)).await,
        }
        if w.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

impl FaultProxy {
    /// Pass everything.
    pub const PASS: u64 = 0;
    /// Refuse: cut every connection.
    pub const REFUSE: u64 = 1;
    /// Above 1: pass, each chunk after this many milliseconds.
    pub fn slow(ms: u64) -> u64 {
        ms.max(2)
    }

    pub async fn start(target: u16) -> FaultProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mode = Arc::new(AtomicU64::new(Self::PASS));
        let requests = Arc::new(AtomicU64::new(0));
        let refused = Arc::new(AtomicU64::new(0));
        let (m, counted, cut) = (mode.clone(), requests.clone(), refused.clone());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if m.load(AtomicOrdering::Relaxed) == Self::REFUSE {
                    cut.fetch_add(1, AtomicOrdering::Relaxed);
                    drop(client);
                    continue;
                }
                let (m, counted) = (m.clone(), counted.clone());
                tokio::spawn(async move {
                    let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await
                    else {
                        return;
                    };
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    tokio::join!(
                        proxy_pipe(cr, sw, m.clone(), Some(counted)),
                        proxy_pipe(sr, cw, m, None)
                    );
                });
            }
        });
        FaultProxy {
            port,
            mode,
            requests,
            refused,
            task,
        }
    }

    pub fn set(&self, mode: u64) {
        self.mode.store(mode, AtomicOrdering::Relaxed);
    }

    /// HTTP requests passed so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(AtomicOrdering::Relaxed)
    }

    /// Connections refused so far (new ones closed at once while refusing).
    pub fn refused(&self) -> u64 {
        self.refused.load(AtomicOrdering::Relaxed)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A query's rows with every value as text (NULL as None), sorted.
pub async fn mysql_text_rows(c: &mut mysql_async::Conn, sql: &str) -> Vec<Vec<Option<String>>> {
    try_mysql_text_rows(c, sql).await.expect("query")
}

/// [`mysql_text_rows`], its error returned (polls that may race a job's DDL).
pub async fn try_mysql_text_rows(
    c: &mut mysql_async::Conn,
    sql: &str,
) -> Result<Vec<Vec<Option<String>>>, mysql_async::Error> {
    use mysql_async::prelude::Queryable;
    let rows: Vec<mysql_async::Row> = c.query(sql).await?;
    let mut out: Vec<Vec<Option<String>>> = rows
        .into_iter()
        .map(|r| {
            (0..r.len())
                .map(|i| match r.as_ref(i).expect("value") {
                    mysql_async::Value::NULL => None,
                    mysql_async::Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
                    v => Some(v.as_sql(true)),
                })
                .collect()
        })
        .collect();
    out.sort();
    Ok(out)
}

/// A PostgreSQL query's rows as text (simple protocol; NULL as None), sorted.
pub async fn pg_text_rows(c: &tokio_postgres::Client, sql: &str) -> Vec<Vec<Option<String>>> {
    try_pg_text_rows(c, sql).await.expect("query")
}

/// [`pg_text_rows`], its error returned: for polls that may race a job's DDL (a
/// table or column renamed between two statements of the poll).
pub async fn try_pg_text_rows(
    c: &tokio_postgres::Client,
    sql: &str,
) -> Result<Vec<Vec<Option<String>>>, tokio_postgres::Error> {
    let rows = c.simple_query(sql).await?;
    let mut out: Vec<Vec<Option<String>>> = rows
        .into_iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => {
                Some((0..r.len()).map(|i| r.get(i).map(str::to_owned)).collect())
            }
            _ => None,
        })
        .collect();
    out.sort();
    Ok(out)
}

/// Every batch of `t`'s scan (as of `snapshot`, else the current snapshot), read one
/// data file at a time with the iceberg crate's reader.
///
/// That reader (0.10.1) can lose the wake-up of a task waiting for an equality-delete
/// file to load (apache/iceberg-rust#2630: the loader swaps the notifier a waiter
/// holds; a waiter that takes it just before the load ends is never woken), so a scan
/// of a sound table can hang. Each attempt is bounded (60 s); an attempt that hangs
/// is read again from the start, with a fresh reader, three attempts in all. A read
/// that fails is not retried: that is the test's failure.
pub async fn scan_batches(
    t: &iceberg::table::Table,
    snapshot: Option<i64>,
) -> Vec<arrow_array::RecordBatch> {
    use futures::TryStreamExt;
    const ATTEMPTS: usize = 3;
    for attempt in 1..=ATTEMPTS {
        let mut scan = t.scan().with_concurrency_limit(1);
        if let Some(id) = snapshot {
            scan = scan.snapshot_id(id);
        }
        // The crate's reader, asked per data file for the columns the file holds
        // (it cannot make a uuid, binary or time column of nulls for a file written
        // before the column was added; the rows below read such a column as NULL).
        let read = async {
            let tasks = scan
                .build()
                .unwrap()
                .plan_files()
                .await
                .unwrap()
                .try_collect::<Vec<_>>()
                .await
                .unwrap();
            // The scan's columns, which each batch gets (NULL where its file lacks one).
            let want = tasks
                .first()
                .map(|t| (t.schema.clone(), t.project_field_ids.clone()));
            let batches = runner::iceberg::read::read_tasks(t.file_io(), tasks)
                .await
                .unwrap()
                .try_collect::<Vec<_>>()
                .await
                .unwrap();
            match want {
                Some((schema, ids)) => {
                    let arrow = iceberg::arrow::schema_to_arrow_schema(&schema).unwrap();
                    batches
                        .iter()
                        .map(|b| with_every_column(b, &arrow, &ids))
                        .collect()
                }
                None => batches,
            }
        };
        match tokio::time::timeout(Duration::from_secs(60), read).await {
            Ok(batches) => return batches,
            Err(_) => eprintln!(
                "scan of {} hung for 60 s (attempt {attempt} of {ATTEMPTS}): reading it again",
                t.identifier()
            ),
        }
    }
    panic!(
        "the iceberg crate's scan of {} hung {ATTEMPTS} times",
        t.identifier()
    );
}

/// A batch with the columns `ids` of `arrow` (the scan's schema), in order: its own,
/// and NULL for those its data file lacks (added after it was written).
fn with_every_column(
    b: &arrow_array::RecordBatch,
    arrow: &arrow_schema::Schema,
    ids: &[i32],
) -> arrow_array::RecordBatch {
    let id_of = |f: &arrow_schema::Field| {
        f.metadata()
            .get("PARQUET:field_id")
            .and_then(|v| v.parse::<i32>().ok())
    };
    let (mut fields, mut cols) = (Vec::new(), Vec::new());
    for id in ids {
        let bs = b.schema();
        match bs.fields().iter().position(|f| id_of(f) == Some(*id)) {
            Some(i) => {
                fields.push(bs.field(i).clone());
                cols.push(b.column(i).clone());
            }
            None => {
                let f = arrow
                    .fields()
                    .iter()
                    .find(|f| id_of(f) == Some(*id))
                    .unwrap()
                    .as_ref()
                    .clone()
                    .with_nullable(true);
                cols.push(arrow_array::new_null_array(f.data_type(), b.num_rows()));
                fields.push(f);
            }
        }
    }
    arrow_array::RecordBatch::try_new(std::sync::Arc::new(arrow_schema::Schema::new(fields)), cols)
        .unwrap()
}

/// The column names of an Iceberg table's current schema, in order.
pub fn column_names(metadata: &iceberg::spec::TableMetadata) -> Vec<String> {
    metadata
        .current_schema()
        .as_struct()
        .fields()
        .iter()
        .map(|f| f.name.clone())
        .collect()
}

/// Rows of Iceberg table `ns.table` read with the iceberg crate's scan, as text
/// (timestamps with a space, not `T`), sorted; as of `snapshot` (time travel) or
/// the current one. None when the table does not exist.
pub async fn iceberg_text_rows(
    cat: &runner::iceberg::Catalog,
    ns: &str,
    table: &str,
    snapshot: Option<i64>,
) -> Option<Vec<Vec<Option<String>>>> {
    let ident = runner::iceberg::catalog::ident;
    let t = cat.load(&ident(ns, table).unwrap()).await.unwrap()?;
    let t = t.table(&cat.file_io).unwrap();
    Some(table_text_rows(&t, snapshot).await)
}

/// Rows of an Iceberg table as [`iceberg_text_rows`] gives them, from a table of the
/// iceberg crate (e.g. one read at an older metadata location).
pub async fn table_text_rows(
    t: &iceberg::table::Table,
    snapshot: Option<i64>,
) -> Vec<Vec<Option<String>>> {
    let batches = scan_batches(t, snapshot).await;
    // Columns by the current schema's names: a file written before a column was added
    // may come back without it (the crate's reader), which reads as NULL.
    // (For a snapshot: the schema it was written with.)
    let schema = match snapshot {
        Some(id) => t
            .metadata()
            .snapshot_by_id(id)
            .unwrap()
            .schema(t.metadata())
            .unwrap(),
        None => t.metadata().current_schema().clone(),
    };
    // Columns by field id (a renamed column's older files carry its old name),
    // else by the current schema's names.
    let fields: Vec<(i32, String)> = schema
        .as_struct()
        .fields()
        .iter()
        .map(|f| (f.id, f.name.clone()))
        .collect();
    let mut out = Vec::new();
    for b in batches {
        let fmts: Vec<_> = b
            .columns()
            .iter()
            .map(|c| {
                arrow_cast::display::ArrayFormatter::try_new(
                    c.as_ref(),
                    &arrow_cast::display::FormatOptions::default(),
                )
                .unwrap()
            })
            .collect();
        let bs = b.schema();
        let cols: Vec<Option<usize>> = fields
            .iter()
            .map(|(id, name)| {
                bs.fields()
                    .iter()
                    .position(|f| {
                        f.metadata().get("PARQUET:field_id").map(String::as_str)
                            == Some(id.to_string().as_str())
                    })
                    .or_else(|| bs.index_of(name).ok())
            })
            .collect();
        for r in 0..b.num_rows() {
            out.push(
                cols.iter()
                    .map(|c| {
                        use arrow_array::Array;
                        let c = (*c)?;
                        // (A timestamp's `T` as a space, as the sources print it;
                        // text keeps its `T`s.)
                        let temporal = matches!(
                            b.column(c).data_type(),
                            arrow_schema::DataType::Timestamp(..)
                        );
                        (!b.column(c).is_null(r)).then(|| {
                            let v = fmts[c].value(r).to_string();
                            if temporal {
                                v.replace('T', " ")
                            } else {
                                v
                            }
                        })
                    })
                    .collect(),
            );
        }
    }
    out.sort();
    out
}

/// Every snapshot the job committed equals the source contents after the transaction
/// its watermark is in (compared under the schema of that time); no data file is added
/// twice.
pub async fn check_every_snapshot(
    cat: &runner::iceberg::Catalog,
    ns: &str,
    tables: &[&str],
    oracle: &[((u64, u64), Dump)],
    at: impl Fn(&runner::source::position::Position) -> (u64, u64),
) -> (usize, usize) {
    let ident = runner::iceberg::catalog::ident;
    let mut checked = 0;
    let mut seen = std::collections::HashSet::new();
    for &t in tables {
        let table = cat.load(&ident(ns, t).unwrap()).await.unwrap().unwrap();
        for s in table.metadata.snapshots() {
            let list = cat
                .file_io
                .new_input(s.manifest_list())
                .unwrap()
                .read()
                .await
                .unwrap();
            let list = iceberg::spec::ManifestList::parse_with_version(
                &list,
                table.metadata.format_version(),
            )
            .unwrap();
            for m in list.entries() {
                for e in m.load_manifest(&cat.file_io).await.unwrap().entries() {
                    if e.status() == iceberg::spec::ManifestStatus::Added
                        && e.snapshot_id() == Some(s.snapshot_id())
                    {
                        let p = e.data_file().file_path().to_owned();
                        assert!(seen.insert(p.clone()), "{p} committed twice");
                    }
                }
            }
            if !oracle.iter().any(|(_, d)| d.contains_key(t)) {
                continue;
            }
            let props = &s.summary().additional_properties;
            // A compaction reads the same rows as the snapshot it rewrote (its schema
            // may be newer than the source's at the watermark it carries: a DDL
            // applied after the last data commit), compared column by field id.
            if props.contains_key(runner::iceberg::maintain::MAINTENANCE) {
                let parent = s.parent_snapshot_id().expect("a compaction has a parent");
                let (a, b) = (
                    rows_by_field_id(cat, ns, t, &table.metadata, parent).await,
                    rows_by_field_id(cat, ns, t, &table.metadata, s.snapshot_id()).await,
                );
                let (a, b) = (project_common(&a, &b), project_common(&b, &a));
                assert_rows_eq(
                    &b,
                    &a,
                    &format!(
                        "{ns}.{t} compaction snapshot {} differs from its parent {parent}",
                        s.snapshot_id()
                    ),
                );
                checked += 1;
                continue;
            }
            // A fill of added columns' defaults: the rows as of the watermark under
            // the schema after the DDL that added them (its position).
            let Some(w) = props
                .get("lakeshift.schema-position")
                .or_else(|| props.get("lakeshift.watermark"))
            else {
                continue;
            };
            let w: runner::source::position::Position = w.parse().unwrap();
            if w.ordinal == 0 {
                continue; // snapshot phase: chunks, not a transaction boundary
            }
            let at = at(&w);
            let Some((_, dump)) = oracle.iter().find(|(p, _)| *p > at) else {
                continue; // a transaction after the recorded workload
            };
            let got = iceberg_text_rows(cat, ns, t, Some(s.snapshot_id()))
                .await
                .unwrap();
            let Some(want) = dump.get(t) else {
                continue; // the table was not in the source then
            };
            assert_rows_eq(
                &got,
                want,
                &format!(
                    "{ns}.{t} snapshot {} (watermark {w}, summary {props:?}) differs from the source after that transaction",
                    s.snapshot_id()
                ),
            );
            checked += 1;
        }
    }
    (checked, seen.len())
}

/// Rows as text (NULL as None).
pub type Rows = Vec<Vec<Option<String>>>;

/// The source's contents of some tables at one point (the oracle of the kill tests).
pub type Dump = std::collections::BTreeMap<&'static str, Rows>;

/// The rows of `a` that `b` lacks (as a multiset: a row twice in `a` and once in `b`
/// is in the answer once).
pub fn only_in(a: &Rows, b: &Rows) -> Rows {
    let mut b = b.clone();
    let mut out = Vec::new();
    for r in a {
        match b.iter().position(|x| x == r) {
            Some(i) => {
                b.swap_remove(i);
            }
            None => out.push(r.clone()),
        }
    }
    out
}

/// Rows equal, or a failure that shows the rows only one side has.
pub fn assert_rows_eq(got: &Rows, want: &Rows, what: &str) {
    if got == want {
        return;
    }
    let only = only_in;
    panic!(
        "{what}: {} rows vs {} expected; only read: {:?}; only expected: {:?}",
        got.len(),
        want.len(),
        only(got, want),
        only(want, got)
    );
}

/// A snapshot's rows under its own schema, with the field id of each column.
async fn rows_by_field_id(
    cat: &runner::iceberg::Catalog,
    ns: &str,
    t: &str,
    m: &iceberg::spec::TableMetadata,
    snapshot: i64,
) -> (Vec<i32>, Rows) {
    let ids = m
        .snapshot_by_id(snapshot)
        .unwrap()
        .schema(m)
        .unwrap()
        .as_struct()
        .fields()
        .iter()
        .map(|f| f.id)
        .collect();
    (
        ids,
        iceberg_text_rows(cat, ns, t, Some(snapshot)).await.unwrap(),
    )
}

/// `a`'s rows reduced to the columns (by field id) `b` has too, sorted.
fn project_common(a: &(Vec<i32>, Rows), b: &(Vec<i32>, Rows)) -> Rows {
    let keep: Vec<usize> = (0..a.0.len()).filter(|&i| b.0.contains(&a.0[i])).collect();
    let mut out: Rows =
        a.1.iter()
            .map(|r| keep.iter().map(|&i| r[i].clone()).collect())
            .collect();
    out.sort();
    out
}
