//! A SQL catalog in the table layout of iceberg-catalog-sql, pyiceberg's SqlCatalog and
//! the Java JDBC catalog: `iceberg_tables` (catalog_name, table_namespace, table_name,
//! metadata_location, previous_metadata_location, iceberg_type) and
//! `iceberg_namespace_properties`. SQLite (the embedded default) or PostgreSQL.
//!
//! Every table change is a compare-and-swap of `metadata_location`: the row is updated
//! only where it still names the metadata file the change was built on.

use super::{Error, Result};
use iceberg::io::FileIO;
use iceberg::spec::TableMetadata;
use iceberg::{NamespaceIdent, TableIdent};
use sqlx::any::{install_default_drivers, AnyPoolOptions};
use sqlx::{AnyPool, Row};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// The catalog database at `uri` could not be opened: unreachable (a server down or
/// starting: transient) or refused (a wrong name, password, ...).
fn unopened(uri: &str, e: sqlx::Error) -> Error {
    let message = format!("cannot open the catalog database {}: {e}", redact(uri));
    if super::sql_connection_lost(&e) {
        Error::Unreachable(message)
    } else {
        Error::Invalid(message)
    }
}

/// Where the catalog lives.
#[derive(Debug, Clone)]
pub struct CatalogConfig {
    /// The catalog's name (the `catalog_name` column); readers must use the same name.
    pub name: String,
    /// Warehouse folder: tables live in `<warehouse>/<namespace>/<table>`.
    pub warehouse: PathBuf,
    /// `sqlite:///path/catalog.db` or `postgresql://...`; default: a SQLite file
    /// `catalog.db` in the warehouse.
    pub uri: Option<String>,
    /// An `s3://` warehouse's settings (`AWS_ENDPOINT_URL`, `AWS_REGION`, ... as
    /// name/value pairs) instead of the process environment's; None: the environment.
    pub s3_env: Option<Vec<(String, String)>>,
}

impl CatalogConfig {
    pub fn local(warehouse: impl Into<PathBuf>) -> Self {
        CatalogConfig {
            name: "lakeshift".into(),
            warehouse: warehouse.into(),
            uri: None,
            s3_env: None,
        }
    }
}

/// One table as loaded: its identity, the metadata file the catalog names, and the
/// metadata in it.
#[derive(Debug, Clone)]
pub struct LoadedTable {
    pub ident: TableIdent,
    pub metadata_location: String,
    pub metadata: TableMetadata,
}

impl LoadedTable {
    /// A table of the iceberg crate, for scans.
    pub fn table(&self, file_io: &FileIO) -> Result<iceberg::table::Table> {
        Ok(iceberg::table::Table::builder()
            .file_io(file_io.clone())
            .identifier(self.ident.clone())
            .metadata_location(self.metadata_location.clone())
            .metadata(self.metadata.clone())
            .runtime(iceberg::Runtime::try_current()?)
            .build()?)
    }
}

pub struct Catalog {
    pub(super) pool: AnyPool,
    pub(super) name: String,
    warehouse: String,
    pub(super) postgres: bool,
    /// The job run that owns the writes (`claim`): every metadata write checks, in
    /// the same statement, that the run still holds the job's lease row.
    pub(super) owner: Option<(String, String)>,
    pub file_io: FileIO,
    /// An `s3://` warehouse's settings, for listing (FileIO does not list).
    s3: Option<S3Settings>,
    /// Fault injection: the next N swaps apply but report their reply as lost.
    lose_replies: Arc<AtomicU32>,
    /// Metadata files this process wrote or read lately, by location.
    recent: Arc<std::sync::Mutex<Recent>>,
    /// A local warehouse's files written and not yet synced (object stores make
    /// each write durable themselves).
    unsynced: Option<Arc<super::localfs::Unsynced>>,
    /// Tables this process created whose rows in `iceberg_tables` are still to be
    /// inserted (see [`Catalog::defer_table`]).
    deferred: Arc<Deferred>,
    /// Namespaces seen to exist (a table creation asks twice per table).
    namespaces: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
}

/// New tables not yet registered: metadata location by table. The lock is held
/// through a registration, so a caller that finds the map empty waits for one that
/// took its tables to finish.
#[derive(Default)]
struct Deferred {
    tables: std::sync::Mutex<std::collections::HashMap<TableIdent, String>>,
    registering: tokio::sync::Mutex<()>,
}

/// Metadata files by location: a metadata file never changes once written, so a
/// table loaded again (a commit's base, a table just created) is not read back while
/// its file is among the last `RECENT` seen.
#[derive(Default)]
struct Recent {
    by_location: std::collections::HashMap<String, TableMetadata>,
    order: std::collections::VecDeque<String>,
}

const RECENT: usize = 4096;

/// Where an S3 warehouse is served and with which credentials (None: the AWS
/// chain's).
#[derive(Clone, Default)]
struct S3Settings {
    endpoint: Option<String>,
    region: Option<String>,
    key: Option<String>,
    secret: Option<String>,
    token: Option<String>,
    virtual_host: bool,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field("name", &self.name)
            .field("warehouse", &self.warehouse)
            .finish()
    }
}

fn ns_ident(ns: &str) -> Result<NamespaceIdent> {
    Ok(NamespaceIdent::from_strs(ns.split('.'))?)
}

/// `namespace.table` → ident (the last dot separates the table name).
pub fn ident(ns: &str, table: &str) -> Result<TableIdent> {
    Ok(TableIdent::new(ns_ident(ns)?, table.to_owned()))
}

/// `CREATE TABLE IF NOT EXISTS` that holds when another process creates the same
/// table at the same moment: PostgreSQL's check is not atomic, and the loser fails
/// with a duplicate (a unique violation on its catalog, or "already exists"); the
/// table is there then.
pub(crate) async fn create_table(pool: &sqlx::AnyPool, sql: &str) -> Result<()> {
    let mut tries = 0;
    loop {
        match sqlx::query(sql).execute(pool).await {
            Ok(_) => return Ok(()),
            Err(sqlx::Error::Database(d))
                if tries < 5
                    && matches!(d.code().as_deref(), Some("23505" | "42P07" | "42710")) =>
            {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// The FileIO of an `s3://` warehouse: endpoint, region and credentials from the
/// environment (`AWS_ENDPOINT_URL`, `AWS_REGION` or `AWS_DEFAULT_REGION`,
/// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), else the
/// standard AWS credential chain (config files, instance metadata); never from the
/// job file. A custom endpoint (MinIO, moto, ...) gets path-style addressing unless
/// `AWS_S3_PATH_STYLE=false`.
fn s3_file_io(given: Option<&[(String, String)]>) -> (FileIO, S3Settings) {
    let env = |k: &str| {
        match given {
            Some(vars) => vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()),
            None => std::env::var(k).ok(),
        }
        .filter(|v| !v.is_empty())
    };
    let settings = S3Settings {
        endpoint: env("AWS_ENDPOINT_URL_S3").or_else(|| env("AWS_ENDPOINT_URL")),
        region: env("AWS_REGION").or_else(|| env("AWS_DEFAULT_REGION")),
        key: env("AWS_ACCESS_KEY_ID"),
        secret: env("AWS_SECRET_ACCESS_KEY"),
        token: env("AWS_SESSION_TOKEN"),
        virtual_host: env("AWS_S3_PATH_STYLE").is_some_and(|v| v == "false"),
    };
    let mut b = iceberg::io::FileIOBuilder::new(Arc::new(
        iceberg_storage_opendal::OpenDalStorageFactory::S3 {
            customized_credential_load: None,
        },
    ));
    let endpoint = env("AWS_ENDPOINT_URL_S3").or_else(|| env("AWS_ENDPOINT_URL"));
    if let Some(e) = &endpoint {
        b = b.with_prop(iceberg::io::S3_ENDPOINT, e);
        let path_style = env("AWS_S3_PATH_STYLE").is_none_or(|v| v != "false");
        b = b.with_prop(iceberg::io::S3_PATH_STYLE_ACCESS, path_style);
    }
    if let Some(r) = env("AWS_REGION").or_else(|| env("AWS_DEFAULT_REGION")) {
        b = b.with_prop(iceberg::io::S3_REGION, r);
    }
    for (var, prop) in [
        ("AWS_ACCESS_KEY_ID", iceberg::io::S3_ACCESS_KEY_ID),
        ("AWS_SECRET_ACCESS_KEY", iceberg::io::S3_SECRET_ACCESS_KEY),
        ("AWS_SESSION_TOKEN", iceberg::io::S3_SESSION_TOKEN),
    ] {
        if let Some(v) = env(var) {
            b = b.with_prop(prop, v);
        }
    }
    (b.build(), settings)
}

/// An S3 client of `bucket` (opendal's: the iceberg crate's FileIO does not list).
fn s3_operator(s3: &S3Settings, bucket: &str) -> opendal::Result<opendal::Operator> {
    let mut b = opendal::services::S3::default().bucket(bucket).root("/");
    if let Some(e) = &s3.endpoint {
        b = b.endpoint(e);
    }
    if let Some(r) = &s3.region {
        b = b.region(r);
    }
    if let Some(k) = &s3.key {
        b = b.access_key_id(k);
    }
    if let Some(k) = &s3.secret {
        b = b.secret_access_key(k);
    }
    if let Some(t) = &s3.token {
        b = b.session_token(t);
    }
    if s3.virtual_host {
        b = b.enable_virtual_host_style();
    }
    Ok(opendal::Operator::new(b)?.finish())
}

/// `lakeshift check`: an `s3://bucket/path` warehouse can be listed with the
/// environment's endpoint and credentials (nothing is written); the entries directly
/// under it.
pub async fn probe_s3(warehouse: &str) -> Result<usize> {
    let (_, s3) = s3_file_io(None);
    let (op, _, dir) = s3_folder(&s3, warehouse)?;
    let dir = if dir == "/" { String::new() } else { dir };
    let err = |e: opendal::Error| Error::caused(format_args!("listing {warehouse}"), &e);
    Ok(op.list(&dir).await.map_err(err)?.len())
}

/// An S3 client of `url`'s bucket (`s3://bucket/key`), the bucket, and the key as a
/// folder (`key/`).
fn s3_folder<'a>(s3: &S3Settings, url: &'a str) -> Result<(opendal::Operator, &'a str, String)> {
    let rest = url
        .strip_prefix("s3://")
        .ok_or_else(|| Error::Invalid(format!("{url}: not an s3:// URL")))?;
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    let op =
        s3_operator(s3, bucket).map_err(|e| Error::caused(format_args!("listing {url}"), &e))?;
    Ok((op, bucket, format!("{}/", key.trim_end_matches('/'))))
}

/// The SQLite file of a local warehouse's default catalog.
const LOCAL_CATALOG_FILE: &str = "catalog.db";

impl CatalogConfig {
    /// A local warehouse with the default catalog that was never made: it holds no
    /// table and no job (and opening it would make it).
    pub fn never_made(&self) -> bool {
        self.uri.is_none()
            && !self.warehouse.display().to_string().starts_with("s3://")
            && !self.warehouse.join(LOCAL_CATALOG_FILE).exists()
    }
}

impl Catalog {
    pub async fn open(cfg: &CatalogConfig) -> Result<Catalog> {
        let wh = cfg.warehouse.display().to_string();
        if let Some(rest) = wh.strip_prefix("s3://") {
            let warehouse = format!("s3://{}", rest.trim_end_matches('/'));
            if rest.split('/').next().is_none_or(str::is_empty) {
                return Err(Error::Invalid(format!(
                    "warehouse {wh}: an S3 warehouse is s3://bucket or s3://bucket/prefix"
                )));
            }
            let Some(uri) = cfg.uri.clone() else {
                return Err(Error::Invalid(format!(
                    "warehouse {wh}: an S3 warehouse needs a catalog URI (catalog: postgresql://... shared by every process, or sqlite:///path/catalog.db for one host); the catalog cannot live in the bucket"
                )));
            };
            let (io, settings) = s3_file_io(cfg.s3_env.as_deref());
            let mut c = Self::open_at(cfg, uri, warehouse, io).await?;
            c.s3 = Some(settings);
            return Ok(c);
        }
        std::fs::create_dir_all(&cfg.warehouse).map_err(|e| {
            Error::Invalid(format!(
                "cannot create warehouse folder {}: {e}",
                cfg.warehouse.display()
            ))
        })?;
        let warehouse_abs = std::fs::canonicalize(&cfg.warehouse)
            .map_err(|e| Error::Invalid(format!("warehouse {}: {e}", cfg.warehouse.display())))?;
        let uri = match &cfg.uri {
            Some(u) => u.clone(),
            None => format!(
                "sqlite://{}?mode=rwc",
                warehouse_abs.join(LOCAL_CATALOG_FILE).display()
            ),
        };
        let unsynced = Arc::new(super::localfs::Unsynced::default());
        let io = iceberg::io::FileIOBuilder::new(Arc::new(super::localfs::LocalFilesFactory {
            unsynced: unsynced.clone(),
        }))
        .build();
        let mut c =
            Self::open_at(cfg, uri, format!("file://{}", warehouse_abs.display()), io).await?;
        c.unsynced = Some(unsynced);
        Ok(c)
    }

    /// The catalog at `uri` over warehouse URL `warehouse` whose files `file_io` reads
    /// and writes.
    async fn open_at(
        cfg: &CatalogConfig,
        uri: String,
        warehouse: String,
        file_io: FileIO,
    ) -> Result<Catalog> {
        // A SQLite catalog named by the user is made when missing, as the default is.
        let uri = if uri.starts_with("sqlite:") && !uri.contains("mode=") {
            format!("{uri}{}mode=rwc", if uri.contains('?') { '&' } else { '?' })
        } else {
            uri
        };
        let postgres = uri.starts_with("postgres");
        install_default_drivers();
        // One direct connection first: its error says why (refused, auth, no database),
        // where the pool would only time out.
        {
            use sqlx::Connection;
            let mut conn = sqlx::AnyConnection::connect(&uri)
                .await
                .map_err(|e| unopened(&uri, e))?;
            if !postgres {
                // Write-ahead logging: a commit appends to the log and syncs it once,
                // where the default rollback journal creates, syncs and deletes a
                // journal file per transaction (two to three syncs; the cost of a
                // job's every table commit). Durability is unchanged (synchronous
                // stays at its default, FULL: a commit is synced before it is
                // reported, as expiry and orphan removal need). Kept in the file; a
                // catalog another process holds open keeps its mode until it is
                // alone (best effort).
                let _ = sqlx::query("PRAGMA journal_mode = WAL")
                    .fetch_optional(&mut conn)
                    .await;
            }
            let _ = conn.close().await;
        }
        let pool = AnyPoolOptions::new()
            .max_connections(4)
            .acquire_timeout(std::time::Duration::from_secs(30))
            .connect(&uri)
            .await
            .map_err(|e| unopened(&uri, e))?;
        if !postgres {
            // Wait for a concurrent writer's lock instead of failing at once.
            sqlx::query("PRAGMA busy_timeout = 10000")
                .execute(&pool)
                .await?;
        }
        // Create the layout only when missing: a catalog another writer holds locked
        // can still be read.
        let exists = sqlx::query("SELECT COUNT(*) FROM iceberg_tables WHERE 1 = 0")
            .fetch_optional(&pool)
            .await
            .is_ok()
            && sqlx::query("SELECT COUNT(*) FROM iceberg_namespace_properties WHERE 1 = 0")
                .fetch_optional(&pool)
                .await
                .is_ok();
        if !exists {
            create_table(
                &pool,
                "CREATE TABLE IF NOT EXISTS iceberg_tables (
                    catalog_name VARCHAR(255) NOT NULL,
                    table_namespace VARCHAR(255) NOT NULL,
                    table_name VARCHAR(255) NOT NULL,
                    metadata_location VARCHAR(1000),
                    previous_metadata_location VARCHAR(1000),
                    iceberg_type VARCHAR(5),
                    PRIMARY KEY (catalog_name, table_namespace, table_name))",
            )
            .await?;
            create_table(
                &pool,
                "CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
                    catalog_name VARCHAR(255) NOT NULL,
                    namespace VARCHAR(255) NOT NULL,
                    property_key VARCHAR(255),
                    property_value VARCHAR(1000),
                    PRIMARY KEY (catalog_name, namespace, property_key))",
            )
            .await?;
        }
        Ok(Catalog {
            pool,
            name: cfg.name.clone(),
            warehouse,
            postgres,
            file_io,
            s3: None,
            lose_replies: Arc::new(AtomicU32::new(0)),
            recent: Default::default(),
            owner: None,
            unsynced: None,
            deferred: Default::default(),
            namespaces: Default::default(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Every object under `prefix` (an `s3://bucket/key/` URL of this S3 warehouse):
    /// its URL, size and last modification. (The iceberg crate's FileIO reads,
    /// writes and deletes, but does not list.)
    pub async fn list_objects(
        &self,
        prefix: &str,
    ) -> Result<Vec<(String, u64, std::time::SystemTime)>> {
        let s3 = self
            .s3
            .clone()
            .ok_or_else(|| Error::Invalid(format!("{prefix}: listing is for S3 warehouses")))?;
        let (op, bucket, dir) = s3_folder(&s3, prefix)?;
        let err = |e: opendal::Error| Error::caused(format_args!("listing {prefix}"), &e);
        let mut out = Vec::new();
        for e in op.list_with(&dir).recursive(true).await.map_err(err)? {
            let m = e.metadata();
            if m.is_dir() {
                continue;
            }
            let at = m
                .last_modified()
                .map(std::time::SystemTime::from)
                .unwrap_or_else(std::time::SystemTime::now);
            out.push((
                format!("s3://{bucket}/{}", e.path().trim_start_matches('/')),
                m.content_length(),
                at,
            ));
        }
        Ok(out)
    }

    /// The warehouse as a `file://` URL.
    pub fn warehouse(&self) -> &str {
        &self.warehouse
    }

    /// Fault injection for tests: the next `n` metadata swaps are applied by the
    /// database, but the caller is told the reply was lost.
    pub fn lose_next_replies(&self, n: u32) {
        self.lose_replies.store(n, Ordering::SeqCst);
    }

    /// `?` placeholders, rewritten to `$n` for PostgreSQL.
    pub(super) fn q(&self, sql: &str) -> String {
        if !self.postgres {
            return sql.to_owned();
        }
        let mut out = String::with_capacity(sql.len() + 8);
        let mut n = 0;
        for ch in sql.chars() {
            if ch == '?' {
                n += 1;
                out.push('$');
                out.push_str(&n.to_string());
            } else {
                out.push(ch);
            }
        }
        out
    }

    /// A new table's folder: one folder per namespace level, then the table, each
    /// name encoded so that none can leave the warehouse (`..`, `/`, NUL, ...).
    pub fn table_location(&self, ns: &str, table: &str) -> String {
        let ns: Vec<String> = ns.split('.').map(crate::segment::encode).collect();
        format!(
            "{}/{}/{}",
            self.warehouse,
            ns.join("/"),
            crate::segment::encode(table)
        )
    }

    pub async fn namespace_exists(&self, ns: &str) -> Result<bool> {
        let n: i64 = sqlx::query(&self.q(
            "SELECT COUNT(*) FROM iceberg_namespace_properties WHERE catalog_name = ? AND namespace = ?",
        ))
        .bind(&self.name)
        .bind(ns)
        .fetch_one(&self.pool)
        .await?
        .try_get(0)?;
        if n > 0 {
            return Ok(true);
        }
        let n: i64 = sqlx::query(&self.q(
            "SELECT COUNT(*) FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ?",
        ))
        .bind(&self.name)
        .bind(ns)
        .fetch_one(&self.pool)
        .await?
        .try_get(0)?;
        Ok(n > 0)
    }

    /// Create a namespace unless it exists. Returns whether it was created.
    pub async fn ensure_namespace(&self, ns: &str) -> Result<bool> {
        ns_ident(ns)?;
        if self.namespaces.lock().expect("not poisoned").contains(ns) {
            return Ok(false);
        }
        if self.namespace_exists(ns).await? {
            self.known_namespace(ns);
            return Ok(false);
        }
        let r = sqlx::query(&self.q(
            "INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value) VALUES (?, ?, 'exists', 'true')",
        ))
        .bind(&self.name)
        .bind(ns)
        .execute(&self.pool)
        .await;
        match r {
            Ok(_) => {
                self.known_namespace(ns);
                Ok(true)
            }
            // Created concurrently: fine.
            Err(_) if self.namespace_exists(ns).await? => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    fn known_namespace(&self, ns: &str) {
        self.namespaces
            .lock()
            .expect("not poisoned")
            .insert(ns.to_owned());
    }

    /// Drop an empty namespace. Returns whether it existed.
    pub async fn drop_namespace(&self, ns: &str) -> Result<bool> {
        self.namespaces.lock().expect("not poisoned").remove(ns);
        let tables = self.list_tables(ns).await?;
        if !tables.is_empty() {
            return Err(Error::Invalid(format!(
                "namespace {ns} still holds {} table(s)",
                tables.len()
            )));
        }
        let r = sqlx::query(&self.q(
            "DELETE FROM iceberg_namespace_properties WHERE catalog_name = ? AND namespace = ?",
        ))
        .bind(&self.name)
        .bind(ns)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected() > 0)
    }

    pub async fn list_namespaces(&self) -> Result<Vec<String>> {
        self.register_deferred().await?;
        let rows = sqlx::query(&self.q(
            "SELECT DISTINCT namespace FROM iceberg_namespace_properties WHERE catalog_name = ?
             UNION SELECT DISTINCT table_namespace FROM iceberg_tables WHERE catalog_name = ?",
        ))
        .bind(&self.name)
        .bind(&self.name)
        .fetch_all(&self.pool)
        .await?;
        let mut v: Vec<String> = rows
            .iter()
            .map(|r| r.try_get::<String, _>(0))
            .collect::<Result<_, _>>()?;
        v.sort();
        v.dedup();
        Ok(v)
    }

    pub async fn list_tables(&self, ns: &str) -> Result<Vec<String>> {
        self.register_deferred().await?;
        let rows = sqlx::query(&self.q(
            "SELECT table_name FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ?
               AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL) ORDER BY table_name",
        ))
        .bind(&self.name)
        .bind(ns)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(|r| r.try_get::<String, _>(0))
            .collect::<Result<_, _>>()?)
    }

    /// The metadata location the catalog names for a table.
    pub async fn metadata_location(&self, id: &TableIdent) -> Result<Option<String>> {
        if let Some(loc) = self.deferred_location(id) {
            return Ok(Some(loc));
        }
        self.stored_location(id).await
    }

    /// Whether a table of the catalog (or one this process created) keeps its
    /// metadata under the folder `location`. Errs towards yes: `_` and `%` in the
    /// folder's name match any character.
    pub async fn location_in_use(&self, location: &str) -> Result<bool> {
        let folder = format!("{}/", location.trim_end_matches('/'));
        if self
            .deferred
            .tables
            .lock()
            .expect("not poisoned")
            .values()
            .any(|l| l.starts_with(&folder))
        {
            return Ok(true);
        }
        let row =
            sqlx::query(&self.q(
                "SELECT 1 FROM iceberg_tables WHERE catalog_name = ? AND metadata_location LIKE ?",
            ))
            .bind(&self.name)
            .bind(format!("{folder}%"))
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.is_some())
    }

    /// The metadata location `iceberg_tables` holds for a table (tables this
    /// process has not registered yet left out).
    async fn stored_location(&self, id: &TableIdent) -> Result<Option<String>> {
        let row = sqlx::query(&self.q(
            "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?
               AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)",
        ))
        .bind(&self.name)
        .bind(id.namespace().join("."))
        .bind(id.name())
        .fetch_optional(&self.pool)
        .await?;
        Ok(match row {
            Some(r) => Some(r.try_get::<String, _>(0)?),
            None => None,
        })
    }

    pub async fn load(&self, id: &TableIdent) -> Result<Option<LoadedTable>> {
        let Some(location) = self.metadata_location(id).await? else {
            return Ok(None);
        };
        let cached = self
            .recent
            .lock()
            .expect("not poisoned")
            .by_location
            .get(&location)
            .cloned();
        let metadata = match cached {
            Some(m) => m,
            None => {
                let m = TableMetadata::read_from(&self.file_io, &location).await?;
                self.remember(&location, &m);
                m
            }
        };
        Ok(Some(LoadedTable {
            ident: id.clone(),
            metadata_location: location,
            metadata,
        }))
    }

    /// Keep `metadata`, written or read at `location`, for later loads.
    pub(crate) fn remember(&self, location: &str, metadata: &TableMetadata) {
        let mut r = self.recent.lock().expect("not poisoned");
        if r.by_location.contains_key(location) {
            return;
        }
        if r.order.len() >= RECENT {
            if let Some(old) = r.order.pop_front() {
                r.by_location.remove(&old);
            }
        }
        r.order.push_back(location.to_owned());
        r.by_location.insert(location.to_owned(), metadata.clone());
    }

    pub async fn load_required(&self, id: &TableIdent) -> Result<LoadedTable> {
        self.load(id)
            .await?
            .ok_or_else(|| Error::NoSuchTable(display(id)))
    }

    /// Make every file written through `file_io` so far durable: before the catalog
    /// names a metadata file (and so the files it names), and before a job's state
    /// lists data files.
    pub async fn barrier(&self) -> Result<()> {
        if let Some(u) = &self.unsynced {
            u.barrier().await.map_err(|e| {
                Error::Invalid(format!(
                    "syncing files of warehouse {}: {e}",
                    self.warehouse
                ))
            })?;
        }
        Ok(())
    }

    /// Files written through `file_io` and not yet made durable (local warehouses).
    pub fn unsynced_files(&self) -> usize {
        self.unsynced.as_ref().map_or(0, |u| u.waiting())
    }

    /// Register a new table whose first metadata file is already written.
    pub async fn insert_table(&self, id: &TableIdent, metadata_location: &str) -> Result<()> {
        self.register_deferred().await?;
        self.barrier().await?;
        let sql = self.insert_sql();
        let r = self
            .bind_insert(&sql, id, metadata_location)
            .execute(&self.pool)
            .await;
        self.inserted(id, r).await
    }

    /// What an insert into `iceberg_tables` came to: no row (this run no longer
    /// holds the job, or it did not apply), or an error (the table exists).
    async fn inserted(
        &self,
        id: &TableIdent,
        r: std::result::Result<sqlx::any::AnyQueryResult, sqlx::Error>,
    ) -> Result<()> {
        match r {
            Ok(r) if r.rows_affected() == 1 => Ok(()),
            Ok(_) => {
                self.check_owner().await?;
                Err(Error::Invalid(format!(
                    "table {}: not created",
                    display(id)
                )))
            }
            Err(_) if self.stored_location(id).await?.is_some() => {
                Err(Error::TableExists(display(id)))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// A new table whose first metadata file is written, registered later: by the
    /// next [`Catalog::register_deferred`], which every write naming a table (swap,
    /// rename, drop) and every listing runs first. Until then this process sees the
    /// table and others do not. Many tables created in a row (a snapshot's) are
    /// registered with one sync of their files and one catalog transaction, where
    /// each would cost a sync and a catalog write of its own.
    pub fn defer_table(&self, id: &TableIdent, metadata_location: &str) {
        self.deferred
            .tables
            .lock()
            .expect("not poisoned")
            .insert(id.clone(), metadata_location.to_owned());
    }

    fn deferred_location(&self, id: &TableIdent) -> Option<String> {
        let t = self.deferred.tables.lock().expect("not poisoned");
        if t.is_empty() {
            return None;
        }
        t.get(id).cloned()
    }

    /// Register the tables [`Catalog::defer_table`] holds: their files synced, then
    /// one transaction inserting them all.
    pub async fn register_deferred(&self) -> Result<()> {
        let _one = self.deferred.registering.lock().await;
        let tables: Vec<(TableIdent, String)> = {
            let t = self.deferred.tables.lock().expect("not poisoned");
            if t.is_empty() {
                return Ok(());
            }
            t.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
        };
        self.barrier().await?;
        let sql = self.insert_sql();
        let mut tx = self.pool.begin().await?;
        for (id, loc) in &tables {
            let r = self.bind_insert(&sql, id, loc).execute(&mut *tx).await;
            if let Err(e) = self.inserted(id, r).await {
                drop(tx);
                return Err(e);
            }
        }
        tx.commit().await?;
        let mut t = self.deferred.tables.lock().expect("not poisoned");
        for (id, loc) in tables {
            // Unless it moved on meanwhile (it cannot: swaps register first).
            if t.get(&id) == Some(&loc) {
                t.remove(&id);
            }
        }
        Ok(())
    }

    fn insert_sql(&self) -> String {
        // `WHERE 1 = 1` so that the owner's condition can follow.
        self.q(&format!(
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, iceberg_type) SELECT ?, ?, ?, ?, 'TABLE' WHERE 1 = 1{}",
            self.owned_sql()
        ))
    }

    fn bind_insert<'q>(
        &'q self,
        sql: &'q str,
        id: &TableIdent,
        metadata_location: &str,
    ) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
        self.bind_owner(
            sqlx::query(sql)
                .bind(&self.name)
                .bind(id.namespace().join("."))
                .bind(id.name().to_owned())
                .bind(metadata_location.to_owned()),
        )
    }

    /// Remove a table from the catalog; with `purge`, delete its files as well (local
    /// warehouses). Returns whether it existed.
    pub async fn drop_table(&self, id: &TableIdent, purge: bool) -> Result<bool> {
        self.register_deferred().await?;
        let loaded = self.load(id).await?;
        let r = sqlx::query(&self.q(
            "DELETE FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?
               AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)",
        ))
        .bind(&self.name)
        .bind(id.namespace().join("."))
        .bind(id.name())
        .execute(&self.pool)
        .await?;
        if purge {
            if let Some(t) = loaded
                .as_ref()
                .filter(|t| local_path(t.metadata.location()).is_none())
            {
                // Object storage: every object under the table's location.
                self.file_io
                    .delete_prefix(format!("{}/", t.metadata.location().trim_end_matches('/')))
                    .await
                    .map_err(|e| {
                        Error::Invalid(format!(
                            "table {} dropped, but its files at {} could not be removed: {e}",
                            display(id),
                            t.metadata.location()
                        ))
                    })?;
            }
            if let Some(t) = loaded {
                if let Some(path) = local_path(t.metadata.location()) {
                    if path.exists() {
                        std::fs::remove_dir_all(&path).map_err(|e| {
                            Error::Invalid(format!(
                                "table {} dropped, but its files at {} could not be removed: {e}",
                                display(id),
                                path.display()
                            ))
                        })?;
                    }
                }
            }
        }
        Ok(r.rows_affected() > 0)
    }

    pub async fn rename_table(&self, from: &TableIdent, to: &TableIdent) -> Result<()> {
        self.rename_tables(&[(from.clone(), to.clone())]).await
    }

    /// Rename tables in order, all or none (one catalog transaction): a statement
    /// that swaps two tables through a third name is never seen half done, by a
    /// reader or by a job restarted after a crash.
    pub async fn rename_tables(&self, renames: &[(TableIdent, TableIdent)]) -> Result<()> {
        self.register_deferred().await?;
        for (_, to) in renames {
            self.ensure_namespace(&to.namespace().join(".")).await?;
        }
        let mut tx = self.pool.begin().await?;
        for (from, to) in renames {
            let taken = sqlx::query(&self.q(
                "SELECT 1 FROM iceberg_tables WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?",
            ))
            .bind(&self.name)
            .bind(to.namespace().join("."))
            .bind(to.name())
            .fetch_optional(&mut *tx)
            .await?;
            if taken.is_some() {
                return Err(Error::TableExists(display(to)));
            }
            let r = sqlx::query(&self.q(
                "UPDATE iceberg_tables SET table_namespace = ?, table_name = ?
                  WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?
                    AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)",
            ))
            .bind(to.namespace().join("."))
            .bind(to.name())
            .bind(&self.name)
            .bind(from.namespace().join("."))
            .bind(from.name())
            .execute(&mut *tx)
            .await?;
            if r.rows_affected() == 0 {
                return Err(Error::NoSuchTable(display(from)));
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// Compare-and-swap of the metadata location. Ok(true): swapped; Ok(false): the
    /// table no longer names `expected` (another writer won).
    pub async fn swap(&self, id: &TableIdent, expected: &str, new: &str) -> Result<bool> {
        // Fault injection for the recovery tests: a catalog that refuses writes.
        if std::env::var_os("LAKESHIFT_FAIL_SWAPS").is_some() {
            return Err(Error::Invalid(format!(
                "table {}: the catalog refused the metadata swap (LAKESHIFT_FAIL_SWAPS)",
                display(id)
            )));
        }
        self.register_deferred().await?;
        self.barrier().await?;
        let sql = self.swap_sql();
        let r = self
            .bind_swap(&sql, id, expected, new)
            .execute(&self.pool)
            .await?;
        let swapped = r.rows_affected() == 1;
        if !swapped {
            self.check_owner().await?;
        }
        if swapped {
            // The swap is done; its reply to the caller is not (recovery tests).
            crate::failpoint::hit("after-swap");
        }
        if swapped && self.lose_reply() {
            return Err(Error::ReplyLost(display(id)));
        }
        Ok(swapped)
    }

    /// Several compare-and-swaps in one catalog transaction (one durable write for
    /// all): `(table, expected, new)`, each swapped where the table still names
    /// `expected`. Whether each swapped, in order.
    pub async fn swap_many(&self, swaps: &[(TableIdent, String, String)]) -> Result<Vec<bool>> {
        if std::env::var_os("LAKESHIFT_FAIL_SWAPS").is_some() {
            return Err(Error::Invalid(
                "the catalog refused the metadata swaps (LAKESHIFT_FAIL_SWAPS)".into(),
            ));
        }
        self.register_deferred().await?;
        self.barrier().await?;
        let sql = self.swap_sql();
        let mut tx = self.pool.begin().await?;
        let mut swapped = Vec::with_capacity(swaps.len());
        for (id, expected, new) in swaps {
            let r = self
                .bind_swap(&sql, id, expected, new)
                .execute(&mut *tx)
                .await?;
            swapped.push(r.rows_affected() == 1);
        }
        tx.commit().await?;
        if swapped.iter().any(|s| !s) {
            self.check_owner().await?;
        }
        if swapped.iter().any(|s| *s) {
            crate::failpoint::hit("after-swap");
            if self.lose_reply() {
                return Err(Error::ReplyLost(format!("{} tables", swaps.len())));
            }
        }
        Ok(swapped)
    }

    fn swap_sql(&self) -> String {
        self.q(&format!(
            "UPDATE iceberg_tables SET metadata_location = ?, previous_metadata_location = ?
              WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?
                AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)
                AND metadata_location = ?{}",
            self.owned_sql()
        ))
    }

    fn bind_swap<'q>(
        &'q self,
        sql: &'q str,
        id: &TableIdent,
        expected: &'q str,
        new: &'q str,
    ) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
        self.bind_owner(
            sqlx::query(sql)
                .bind(new)
                .bind(expected)
                .bind(&self.name)
                .bind(id.namespace().join("."))
                .bind(id.name().to_owned())
                .bind(expected),
        )
    }

    /// Fault injection: whether this swap's reply is to be reported lost.
    fn lose_reply(&self) -> bool {
        self.lose_replies
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

/// `ns.table` as people write it.
pub fn display(id: &TableIdent) -> String {
    format!("{}.{}", id.namespace().join("."), id.name())
}

/// The local path of a `file://` (or plain absolute) location.
pub fn local_path(location: &str) -> Option<PathBuf> {
    if let Some(p) = location.strip_prefix("file://") {
        return Some(PathBuf::from(p));
    }
    if let Some(p) = location.strip_prefix("file:") {
        return Some(PathBuf::from(p));
    }
    Path::new(location)
        .is_absolute()
        .then(|| PathBuf::from(location))
}

/// A connection URI without its password.
pub fn redact(uri: &str) -> String {
    // scheme://user:password@host/... -> scheme://user:***@host/...
    if let Some((scheme, rest)) = uri.split_once("://") {
        // The last `@` ends the credentials (a password may hold `@` itself).
        if let Some((cred, host)) = rest.rsplit_once('@') {
            if let Some((user, _)) = cred.split_once(':') {
                return format!("{scheme}://{user}:***@{host}");
            }
        }
    }
    uri.to_owned()
}
