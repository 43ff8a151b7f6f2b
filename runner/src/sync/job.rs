//! The `sink` and `pipeline` parts of a job file.
//!
//! ```yaml
//! sink:
//!   type: iceberg
//!   warehouse: ./warehouse          # local folder (SQLite catalog inside by default)
//!   catalog: postgresql://...       # optional shared catalog
//!   catalog-name: lakeshift
//!   tinyint1: boolean               # or int
//!   bigint-unsigned: decimal        # or long
//! pipeline:
//!   name: shop-mirror
//!   state: ./state                  # checkpoints and the source's schema history
//!   checkpoint-interval-seconds: 10
//!   schema-change-behavior: exception
//!   memory-budget-mib: 256
//! ```

use crate::source::config::{parse_job, section, JobFileError, Source};
use serde::Deserialize;
use std::path::PathBuf;

/// The `sink` section: one variant per kind of sink, each with its own keys (a key of
/// another kind is an error naming it).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum SinkConfig {
    /// Iceberg tables in a SQL catalog, in a local folder or object storage.
    Iceberg(IcebergSink),
    /// A PostgreSQL database (`type: postgres` or `postgresql`).
    #[serde(alias = "postgresql")]
    Postgres(RdbSink),
    /// A MySQL or MariaDB server (`type: mysql` or `mariadb`).
    #[serde(alias = "mariadb")]
    Mysql(RdbSink),
}

impl SinkConfig {
    pub fn kind(&self) -> &'static str {
        match self {
            SinkConfig::Iceberg(_) => "iceberg",
            SinkConfig::Postgres(_) => "postgres",
            SinkConfig::Mysql(_) => "mysql",
        }
    }

    /// An Iceberg sink's settings.
    pub fn iceberg(&self) -> Option<&IcebergSink> {
        match self {
            SinkConfig::Iceberg(s) => Some(s),
            _ => None,
        }
    }

    /// A relational sink's settings.
    pub fn rdb(&self) -> Option<&RdbSink> {
        match self {
            SinkConfig::Postgres(s) | SinkConfig::Mysql(s) => Some(s),
            SinkConfig::Iceberg(_) => None,
        }
    }
}

/// `type: iceberg`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct IcebergSink {
    /// The warehouse: a folder, or `s3://bucket/path` (credentials from the `AWS_*`
    /// environment variables; needs `catalog`).
    pub warehouse: PathBuf,
    /// A shared SQL catalog (`postgresql://...`, `sqlite:...`); default: SQLite in the
    /// warehouse.
    #[serde(default)]
    pub catalog: Option<String>,
    /// The catalog's name for these tables (the `catalog_name` column): readers must
    /// use the same name.
    #[serde(default = "default_catalog_name")]
    pub catalog_name: String,
    /// MySQL TINYINT(1)/BOOLEAN as Iceberg `boolean` (the default) or `int`.
    #[serde(default)]
    #[schemars(schema_with = "tinyint1_schema")]
    pub tinyint1: dialects::iceberg::Tinyint1,
    /// BIGINT UNSIGNED as `decimal` (decimal(20,0): every value fits; the default)
    /// or `long` (values past 2^63 - 1 follow `row-error-policy`).
    #[serde(default)]
    #[schemars(schema_with = "bigint_unsigned_schema")]
    pub bigint_unsigned: dialects::iceberg::BigintUnsigned,
    /// New tables partitioned by `bucket(N, first key column)` (0: unpartitioned).
    #[serde(default)]
    pub partition_buckets: u32,
    /// Declare the primary key as the sort order of new tables.
    #[serde(default)]
    pub sort_by_key: bool,
    /// Target data file size of new tables, in MiB.
    #[serde(default = "default_file_mib")]
    pub target_file_size_mib: u64,
    /// Parquet compression of new tables (zstd, snappy, gzip, uncompressed).
    #[serde(default = "default_compression")]
    pub compression: String,
    /// How updates and deletes of committed rows are written (default: `position`
    /// for binlog sources, `equality` for Kafka sources).
    #[serde(default)]
    pub delete_mode: Option<DeleteMode>,
    /// Table maintenance (`lakeshift maintain`, and inside `sync` on a schedule).
    #[serde(default)]
    pub maintenance: Maintenance,
}

/// `sink.maintenance`: when `sync` maintains its tables, and what maintenance keeps.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema, serde::Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Maintenance {
    /// `sync` maintains its tables this often, between checkpoints (0: only
    /// `lakeshift maintain` does).
    #[serde(default)]
    pub interval_seconds: f64,
    /// Compact a table with this many small data files (or any delete file).
    #[serde(default = "default_min_small_files")]
    pub min_small_files: usize,
    /// Snapshots kept whatever their age.
    #[serde(default = "default_retain_snapshots")]
    pub retain_snapshots: usize,
    /// Snapshots younger than this are kept.
    #[serde(default = "default_day")]
    pub snapshot_age_hours: f64,
    /// Unreferenced files younger than this are left alone.
    #[serde(default = "default_day")]
    pub orphan_age_hours: f64,
    /// Merge a table's small manifests of one kind once it has this many (every
    /// commit also merges them at 32 on its own).
    #[serde(default = "default_min_small_files")]
    pub min_manifests: usize,
}

impl Default for Maintenance {
    fn default() -> Self {
        Maintenance {
            interval_seconds: 0.0,
            min_small_files: default_min_small_files(),
            retain_snapshots: default_retain_snapshots(),
            snapshot_age_hours: default_day(),
            orphan_age_hours: default_day(),
            min_manifests: default_min_small_files(),
        }
    }
}

fn default_min_small_files() -> usize {
    8
}
fn default_retain_snapshots() -> usize {
    10
}
fn default_day() -> f64 {
    24.0
}

impl Maintenance {
    pub fn options(&self, dry_run: bool) -> crate::iceberg::maintain::Options {
        let hours = |h: f64| std::time::Duration::from_secs_f64((h * 3600.0).max(0.0));
        crate::iceberg::maintain::Options {
            min_small_files: self.min_small_files,
            retain_snapshots: self.retain_snapshots,
            snapshot_age: hours(self.snapshot_age_hours),
            orphan_age: hours(self.orphan_age_hours),
            min_manifests: self.min_manifests,
            dry_run,
        }
    }
}

/// How the Iceberg sink removes rows it committed before.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema, serde::Serialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum DeleteMode {
    /// Position deletes from row locators (an index of where each row is): every
    /// reader reads them, pyiceberg included, and reads stay fast.
    Position,
    /// Equality deletes on the key (the whole row for keyless tables): the smallest
    /// write cost; readers join them against older data, pyiceberg refuses them, and
    /// identical rows of keyless tables are removed together.
    Equality,
}

impl IcebergSink {
    /// The delete mode in effect for a job whose source is Kafka or not.
    pub fn deletes(&self, kafka: bool) -> DeleteMode {
        self.delete_mode.unwrap_or(if kafka {
            DeleteMode::Equality
        } else {
            DeleteMode::Position
        })
    }
}

impl IcebergSink {
    /// The catalog the sink's tables are in.
    pub fn catalog_config(&self) -> crate::iceberg::CatalogConfig {
        crate::iceberg::CatalogConfig {
            name: self.catalog_name.clone(),
            warehouse: self.warehouse.clone(),
            uri: self.catalog.clone(),
            s3_env: None,
        }
    }
}

/// `type: postgres` or `type: mysql`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RdbSink {
    /// The target, `postgres://user@host:port/db` or `mysql://user:password@host:port`.
    /// `${VAR}` is read from the environment.
    pub url: String,
    /// Foreign keys of created tables: `drop` (default; tables are applied
    /// independently) or `keep` (MySQL: kept, checked off in the sink's session;
    /// PostgreSQL: added once both tables exist, DEFERRABLE INITIALLY DEFERRED NOT
    /// VALID, so each checkpoint's transaction is checked at commit).
    #[serde(default)]
    pub foreign_keys: ForeignKeys,
    /// Rows per INSERT or DELETE statement.
    #[serde(default = "default_batch_rows")]
    pub batch_rows: usize,
}

/// What becomes of the source's foreign keys on a relational target.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, schemars::JsonSchema, serde::Serialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum ForeignKeys {
    /// Left out: tables are applied independently.
    #[default]
    Drop,
    /// Kept (MySQL: checked off in the sink's session; PostgreSQL: deferred to each
    /// checkpoint's commit).
    Keep,
}

/// What happens to a DDL that cannot be parsed or translated, or that the target
/// refuses (the conversion-error manager).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum DdlErrorPolicy {
    /// Stop the job with the statement, its position and the reason.
    #[default]
    Fail,
    /// Log it, record it as skipped in the DDL log, and go on.
    Skip,
    /// Write it to the dead-letter file, hold the table's later changes (durably),
    /// go on with other tables; `lakeshift ddl-log --resolve N` releases it.
    Park,
}

fn default_batch_rows() -> usize {
    1000
}

fn default_file_mib() -> u64 {
    128
}

fn default_compression() -> String {
    "zstd".into()
}

fn default_catalog_name() -> String {
    "lakeshift".into()
}

/// The `pipeline` section: the job's name and state, and how it runs.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PipelineConfig {
    /// The job's name: in the target's state and the catalog's lease; one per job.
    pub name: String,
    /// The state folder: checkpoints, the source's schema history, the DDL log.
    pub state: PathBuf,
    /// Seconds between checkpoints (each at a source transaction boundary).
    #[serde(default = "default_interval")]
    pub checkpoint_interval_seconds: f64,
    /// Iceberg: a type change it cannot take (`exception` stops, naming the
    /// policies that accept it; `evolve`, `try-evolve`, `lenient`, `ignore`).
    #[serde(default)]
    #[schemars(schema_with = "schema_change_behavior_schema")]
    pub schema_change_behavior: ddl_core::SchemaChangeBehavior,
    /// Memory the job may use for changes in flight and pending, in MiB.
    #[serde(default = "default_budget")]
    pub memory_budget_mib: u64,
    /// DDL barrier timeout, in checkpoint intervals.
    #[serde(default = "default_barrier")]
    pub barrier_timeout_intervals: u32,
    /// Tables (regexes over `database.table`) kept as an append-only changelog: every
    /// change a row, with `_op`, `_source_pos` (source position) and `_source_ts` (source
    /// time; `_pos` is reserved by Iceberg readers).
    #[serde(default)]
    pub changelog_tables: Vec<String>,
    /// Writer shards per table: rows split by key hash, written in parallel.
    #[serde(default = "default_shards", alias = "parallelism")]
    pub writer_shards: u32,
    /// Serve Prometheus metrics (`/metrics`), liveness (`/health`) and readiness
    /// (`/ready`) on 127.0.0.1:PORT.
    #[serde(default)]
    pub metrics_port: Option<u16>,
    /// The same on HOST:PORT (`0.0.0.0:9187` for a scraper outside the host or
    /// container); instead of `metrics-port`.
    #[serde(default)]
    pub metrics_address: Option<String>,
    /// Seconds between progress lines on standard error (0: none).
    #[serde(default = "default_progress")]
    pub progress_seconds: f64,
    /// A DDL that cannot be translated or that the target refuses: fail, skip or park.
    #[serde(default)]
    pub ddl_error_policy: DdlErrorPolicy,
    /// Where parked DDL and skipped rows are written (default:
    /// `<state>/dead-letter.jsonl`).
    #[serde(default)]
    pub dead_letter: Option<PathBuf>,
    /// Iceberg: the lease on the job in the catalog (one writer across hosts); a run
    /// that stops renewing it for this long may be taken over.
    #[serde(default = "default_lease")]
    pub owner_lease_seconds: f64,
    /// How long the job keeps starting again from its last checkpoint while its
    /// target does not answer (a database, catalog or object store restarting, a
    /// network fault), with growing waits, before it stops. 0: it stops at once.
    #[serde(default = "default_target_retry")]
    pub target_retry_seconds: f64,
    /// How long a run tries to reach its source before it has heard from it (a
    /// wrong host or port, a server that is down, a firewall that drops packets),
    /// with growing waits, before it stops saying so. Once the source has answered,
    /// a lost connection is retried as before (60 attempts).
    #[serde(default = "default_source_connect")]
    pub source_connect_seconds: f64,
    /// A column added with a default to a table holding rows: `rewrite` the rows
    /// with it (Iceberg; exact, the default), `null` (older rows read NULL), `fail`.
    /// A generated column added to such a table is refused unless `null`. YAML's
    /// bare `null` means `null` here.
    #[serde(default, deserialize_with = "added_default")]
    #[schemars(with = "super::engine::defaults::AddedDefault")]
    pub added_column_default: super::engine::defaults::AddedDefault,
    /// A row holding a value the target cannot take: `fail` (stop, naming table,
    /// column and position), `skip` (to the dead-letter file, and on) or `park` (to
    /// the dead-letter file, its table held until `ddl-log --resolve`).
    #[serde(default)]
    pub row_error_policy: super::rowcheck::RowErrorPolicy,
}

impl PipelineConfig {
    /// Where the metrics endpoint listens, when it is on.
    pub fn metrics_addr(&self) -> Option<String> {
        self.metrics_address
            .clone()
            .or_else(|| self.metrics_port.map(|p| format!("127.0.0.1:{p}")))
    }

    /// The memory budget in bytes. It is shared out: a quarter for source batches in
    /// flight to the sink (`in_flight`), half for the sink's pending changes
    /// (`pending_budget`), the rest for writing them out (Parquet row groups, rendered
    /// statements) and the maps' slack.
    pub fn budget_bytes(&self) -> usize {
        self.memory_budget_mib as usize * 1024 * 1024
    }

    /// Pending changes past this are committed early.
    pub fn pending_budget(&self) -> usize {
        self.budget_bytes() / 2
    }

    /// The memory the Iceberg sink's row indexes may hold together: half the pending
    /// share. Past it, the largest move their locations to disk.
    pub fn index_budget(&self) -> usize {
        self.pending_budget() / 2
    }

    /// Source batch size and how many batches may wait for the sink: their bytes
    /// stay within a quarter of the budget.
    pub fn in_flight(&self, batch_bytes: usize) -> (usize, usize) {
        let share = self.budget_bytes() / 4;
        let batch = batch_bytes.min(share / 4).max(64 * 1024);
        (batch, (share / batch).clamp(2, 32))
    }

    /// Where parked DDL and skipped rows and messages go.
    pub fn dead_letter_file(&self) -> PathBuf {
        self.dead_letter
            .clone()
            .unwrap_or_else(|| self.state.join("dead-letter.jsonl"))
    }
}

fn default_shards() -> u32 {
    1
}

fn default_progress() -> f64 {
    10.0
}

fn default_interval() -> f64 {
    10.0
}
fn default_lease() -> f64 {
    30.0
}

fn default_source_connect() -> f64 {
    30.0
}

fn default_target_retry() -> f64 {
    120.0
}

fn default_budget() -> u64 {
    256
}
fn default_barrier() -> u32 {
    3
}

#[derive(Debug, Clone)]
pub struct SyncJob {
    pub source: Source,
    pub sink: SinkConfig,
    pub pipeline: PipelineConfig,
    pub router: super::route::Router,
}

impl SyncJob {
    /// Whether the source's stream holds the rows a foreign key's ON DELETE / ON
    /// UPDATE action changes (PostgreSQL's does; a MySQL binlog, and so a Debezium
    /// topic of one, does not).
    pub fn source_logs_referential_actions(&self) -> bool {
        matches!(
            self.source.kind,
            crate::source::config::SourceKind::Postgres(_)
        )
    }

    /// Whether `db.table` is kept as a changelog.
    pub fn changelog(&self, db: &str, table: &str) -> bool {
        let name = format!("{db}.{table}");
        self.pipeline
            .changelog_tables
            .iter()
            .any(|t| regex::Regex::new(&format!("^(?:{t})$")).is_ok_and(|r| r.is_match(&name)))
    }

    /// The planner's options of an Iceberg job (defaults for another sink).
    pub fn iceberg_options(&self) -> dialects::iceberg::IcebergOptions {
        use dialects::iceberg::*;
        let Some(sink) = self.sink.iceberg() else {
            return IcebergOptions {
                behavior: self.pipeline.schema_change_behavior,
                ..Default::default()
            };
        };
        IcebergOptions {
            tinyint1: sink.tinyint1,
            bigint_unsigned: sink.bigint_unsigned,
            behavior: self.pipeline.schema_change_behavior,
            layout: Layout {
                partitioning: if sink.partition_buckets > 0 {
                    Partitioning::BucketPrimaryKey {
                        buckets: sink.partition_buckets,
                    }
                } else {
                    Partitioning::None
                },
                sort_order: if sink.sort_by_key {
                    SortOrder::PrimaryKey
                } else {
                    SortOrder::None
                },
                target_file_size_bytes: sink.target_file_size_mib * 1024 * 1024,
                compression: sink.compression.clone(),
                ..Layout::default()
            },
            fills_added_defaults: self.pipeline.added_column_default
                == super::engine::defaults::AddedDefault::Rewrite,
            ..Default::default()
        }
    }
}

/// Settings of one kind of sink only: given for the other kind they would do nothing,
/// so they are refused by name.
const ICEBERG_SINK_KEYS: &[&str] = &[
    "warehouse",
    "catalog",
    "catalog-name",
    "tinyint1",
    "bigint-unsigned",
    "partition-buckets",
    "sort-by-key",
    "target-file-size-mib",
    "compression",
    "delete-mode",
    "maintenance",
];
const RDB_SINK_KEYS: &[&str] = &["url", "foreign-keys", "batch-rows"];
/// Pipeline settings only the Iceberg sink acts on (the pipeline itself acts on the
/// others for every sink: checkpoints, budget, barrier time limit, metrics).
const ICEBERG_PIPELINE_KEYS: &[&str] = &[
    "schema-change-behavior",
    "changelog-tables",
    "writer-shards",
    "parallelism",
    "owner-lease-seconds",
];

/// The keys of a YAML mapping.
fn keys(v: Option<&serde_yaml_ng::Value>) -> Vec<String> {
    v.and_then(|v| v.as_mapping())
        .map(|m| {
            m.keys()
                .filter_map(|k| k.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A key set for a sink it does not apply to, as an error naming it.
fn misplaced_key(
    kind: &str,
    sink: Option<&serde_yaml_ng::Value>,
    pipeline: Option<&serde_yaml_ng::Value>,
) -> Option<String> {
    let iceberg = kind == "iceberg";
    for k in keys(sink) {
        if iceberg && RDB_SINK_KEYS.contains(&k.as_str()) {
            return Some(format!(
                "job file: sink.{k}: does not apply to sink type iceberg (it is a setting of the postgres and mysql sinks)"
            ));
        }
        if !iceberg && ICEBERG_SINK_KEYS.contains(&k.as_str()) {
            return Some(format!(
                "job file: sink.{k}: does not apply to sink type {kind} (it is an Iceberg setting)"
            ));
        }
    }
    if !iceberg {
        for k in keys(pipeline) {
            if ICEBERG_PIPELINE_KEYS.contains(&k.as_str()) {
                return Some(format!(
                    "job file: pipeline.{k}: does not apply to sink type {kind} (only the Iceberg sink acts on it)"
                ));
            }
        }
    }
    None
}

/// Parse and validate a whole job file for `lakeshift sync`.
pub fn parse(text: &str, env: impl Fn(&str) -> Option<String>) -> Result<SyncJob, JobFileError> {
    parse_unplaced(text, env).map_err(|e| e.placed(text))
}

fn parse_unplaced(
    text: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<SyncJob, JobFileError> {
    // Every section's shape and values first, the environment's password last: a
    // misspelt key anywhere is said before an unset variable the source names (a
    // hostile tester saw only the latter).
    let (job, source) = parse_job(text, |_| Some(String::new()))?;
    let secret = |k: &str| {
        job.source
            .get(k)
            .and_then(|v| v.as_str())
            .map(str::to_owned)
    };
    let (password, password_env) = (secret("password"), secret("password-env"));
    let field = |f: &str, why: &str| format!("job file: {f}: {why}");
    let sink_value = job
        .sink
        .clone()
        .ok_or_else(|| field("sink", "is missing (type: iceberg, warehouse: DIR)"))?;
    if !sink_value.is_mapping() {
        return Err(field("sink", "must be a mapping (type: iceberg, warehouse: DIR)").into());
    }
    let kind = match sink_value.get("type") {
        None => return Err(field("sink.type", "is missing (iceberg, postgres, mysql)").into()),
        Some(t) => match t.as_str() {
            Some(k) => k.to_owned(),
            None => serde_yaml_ng::to_string(t)
                .unwrap_or_default()
                .trim()
                .to_owned(),
        },
    };
    if !["iceberg", "postgres", "postgresql", "mysql", "mariadb"].contains(&kind.as_str()) {
        return Err(field(
            "sink.type",
            &format!("`{kind}` is not supported (iceberg, postgres, mysql)"),
        )
        .into());
    }
    if let Some(e) = misplaced_key(&kind, job.sink.as_ref(), job.pipeline.as_ref()) {
        return Err(e.into());
    }
    let sink: SinkConfig = section(text, "sink", sink_value).map_err(|e| {
        if e.0.contains("missing field `warehouse`") {
            field("sink.warehouse", "is missing (a folder)").into()
        } else if e.0.contains("missing field `url`") {
            field(
                "sink.url",
                "is missing (postgres://user@host:5432/db or mysql://user@host:3306)",
            )
            .into()
        } else {
            e
        }
    })?;
    let mut sink = sink;
    match &mut sink {
        SinkConfig::Iceberg(s) => validate_iceberg(s, &field)?,
        SinkConfig::Postgres(s) | SinkConfig::Mysql(s) => {
            s.url = expand_env(&s.url, &env).map_err(|e| field("sink.url", &e.0))?;
            let postgres = kind.starts_with("postgres");
            validate_rdb(s, postgres, &field)?;
        }
    }
    let pipeline: PipelineConfig = section(
        text,
        "pipeline",
        job.pipeline
            .ok_or_else(|| field("pipeline", "is missing (name:, state:)"))?,
    )?;
    if let Some(a) = &pipeline.metrics_address {
        if pipeline.metrics_port.is_some() {
            return Err(field(
                "pipeline.metrics-address",
                "give either metrics-address or metrics-port, not both",
            )
            .into());
        }
        if a.parse::<std::net::SocketAddr>().is_err()
            && a.rsplit_once(':')
                .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
        {
            return Err(field(
                "pipeline.metrics-address",
                &format!("`{a}` is not HOST:PORT (127.0.0.1:9187, 0.0.0.0:9187, [::]:9187)"),
            )
            .into());
        }
    }
    if pipeline.name.trim().is_empty() {
        return Err(field("pipeline.name", "is empty").into());
    }
    if !pipeline.owner_lease_seconds.is_finite() || pipeline.owner_lease_seconds <= 0.0 {
        return Err(field(
            "pipeline.owner-lease-seconds",
            "must be a positive number of seconds",
        )
        .into());
    }
    if !pipeline.source_connect_seconds.is_finite() || pipeline.source_connect_seconds < 0.0 {
        return Err(field(
            "pipeline.source-connect-seconds",
            "must be a number of seconds, 0 or more",
        )
        .into());
    }
    if !pipeline.target_retry_seconds.is_finite() || pipeline.target_retry_seconds < 0.0 {
        return Err(field(
            "pipeline.target-retry-seconds",
            "must be a number of seconds, 0 or more",
        )
        .into());
    }
    if !pipeline.checkpoint_interval_seconds.is_finite()
        || pipeline.checkpoint_interval_seconds <= 0.0
    {
        return Err(field(
            "pipeline.checkpoint-interval-seconds",
            "must be a positive number of seconds",
        )
        .into());
    }
    if !pipeline.progress_seconds.is_finite() || pipeline.progress_seconds < 0.0 {
        return Err(field(
            "pipeline.progress-seconds",
            "must be a number of seconds (0: no progress lines)",
        )
        .into());
    }
    for (i, t) in pipeline.changelog_tables.iter().enumerate() {
        regex::Regex::new(t).map_err(|e| {
            field(
                &format!("pipeline.changelog-tables[{i}]"),
                &format!("bad regex: {e}"),
            )
        })?;
    }
    let router = super::route::Router::parse(job.route.as_ref()).map_err(|e| e.message)?;
    let mut source = source;
    source.skip_unparsed_ddl = pipeline.ddl_error_policy == DdlErrorPolicy::Skip;
    source.generated_computed = match &source.kind {
        crate::source::config::SourceKind::Postgres(_) => sink.kind() == "postgres",
        _ => sink.kind() == "mysql",
    };
    match &mut source.kind {
        crate::source::config::SourceKind::Binlog(b) => {
            b.batch_bytes = pipeline.in_flight(b.batch_bytes).0;
        }
        crate::source::config::SourceKind::Postgres(p) => {
            p.batch_bytes = pipeline.in_flight(p.batch_bytes).0;
        }
        crate::source::config::SourceKind::Kafka(_) => {}
    }
    if pipeline.row_error_policy == super::rowcheck::RowErrorPolicy::Park
        && source.kafka().is_some()
    {
        // A Kafka table's held rows would need their messages' offsets held with them
        // row by row; not built.
        return Err(field(
            "pipeline.row-error-policy",
            "`park` is for binlog sources; a Kafka source takes `fail` or `skip`",
        )
        .into());
    }
    if let Some(ice) = sink.iceberg() {
        if source.kafka().is_some() && ice.delete_mode == Some(DeleteMode::Position) {
            // Members of a consumer group write the same tables: one process's row
            // locators would not see the rows another committed.
            return Err(field(
                "sink.delete-mode",
                "`position` is for binlog sources (one writer per table); a Kafka source, whose consumers share tables, takes `equality`",
            )
            .into());
        }
    }
    if pipeline.row_error_policy == super::rowcheck::RowErrorPolicy::Skip
        || (pipeline.row_error_policy == super::rowcheck::RowErrorPolicy::Park
            && source.postgres().is_some())
    {
        // (PostgreSQL: a row the source cannot decode, a numeric NaN say, is
        // dead-lettered under `park` too; its table is not parked.)
        source.bad_messages_to = Some(pipeline.dead_letter_file());
    }
    source.password = crate::source::config::password_of(&password, &password_env, &env)?;
    Ok(SyncJob {
        source,
        sink,
        pipeline,
        router,
    })
}

fn validate_iceberg(
    s: &IcebergSink,
    field: &impl Fn(&str, &str) -> String,
) -> Result<(), JobFileError> {
    if s.warehouse.as_os_str().is_empty() {
        return Err(field("sink.warehouse", "is missing (a folder)").into());
    }
    if !["zstd", "snappy", "gzip", "uncompressed"].contains(&s.compression.as_str()) {
        return Err(field(
            "sink.compression",
            &format!(
                "`{}`: expected zstd, snappy, gzip or uncompressed",
                s.compression
            ),
        )
        .into());
    }
    Ok(())
}

fn validate_rdb(
    s: &RdbSink,
    postgres: bool,
    field: &impl Fn(&str, &str) -> String,
) -> Result<(), JobFileError> {
    let url = &s.url;
    let scheme_ok = if postgres {
        url.starts_with("postgres://") || url.starts_with("postgresql://")
    } else {
        url.starts_with("mysql://") || url.starts_with("mariadb://")
    };
    if !scheme_ok {
        return Err(field(
            "sink.url",
            &format!(
                "`{}` does not match sink type {}",
                crate::iceberg::catalog::redact(url),
                if postgres { "postgres" } else { "mysql" }
            ),
        )
        .into());
    }
    if s.batch_rows == 0 {
        return Err(field("sink.batch-rows", "must be at least 1").into());
    }
    Ok(())
}

/// `${VAR}` in a setting, from the environment.
fn expand_env(s: &str, env: &impl Fn(&str) -> Option<String>) -> Result<String, JobFileError> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let Some(j) = rest[i..].find('}') else {
            // The setting itself is not echoed: it may hold a password.
            return Err(format!(
                "unclosed `${{` at character {}",
                s.len() - rest.len() + i + 1
            )
            .into());
        };
        let var = &rest[i + 2..i + j];
        out.push_str(&env(var).ok_or_else(|| format!("environment variable {var} is not set"))?);
        rest = &rest[i + j + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The schema of a setting whose values are those of another crate's enum (which
/// has no schema of its own): its names, and its default.
fn names_schema<T: serde::Serialize + Default>(all: &[T]) -> schemars::Schema {
    let names: Vec<serde_json::Value> = all
        .iter()
        .filter_map(|b| serde_json::to_value(b).ok())
        .collect();
    let default = serde_json::to_value(T::default()).unwrap_or_default();
    schemars::json_schema!({ "type": "string", "enum": names, "default": default })
}

fn schema_change_behavior_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    names_schema(&ddl_core::SchemaChangeBehavior::ALL)
}

fn tinyint1_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    use dialects::iceberg::Tinyint1;
    names_schema(&[Tinyint1::Boolean, Tinyint1::Int])
}

fn bigint_unsigned_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    use dialects::iceberg::BigintUnsigned;
    names_schema(&[BigintUnsigned::Decimal, BigintUnsigned::Long])
}

/// `added-column-default`, where a bare YAML `null` (which YAML reads as no value) is
/// the `null` policy.
fn added_default<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<super::engine::defaults::AddedDefault, D::Error> {
    use super::engine::defaults::AddedDefault;
    Ok(match Option::<AddedDefault>::deserialize(d)? {
        None => AddedDefault::Null,
        Some(p) => p,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(sink: &str, pipeline: &str) -> String {
        format!(
            "source:\n  type: mariadb\n  hostname: 127.0.0.1\n  port: 3306\n  username: root\n  server-id: 9\n  tables: ['a\\..*']\nsink:\n{sink}pipeline:\n  name: j\n  state: /tmp/s\n{pipeline}"
        )
    }

    #[test]
    fn errors_say_where_the_file_writes_the_key_and_what_was_meant() {
        let at = |text: &str| {
            let e = parse(text, |_| None).unwrap_err();
            (e.0.clone(), e.1)
        };
        // A misspelt key inside a nested setting of a sink (read through its type):
        // its whole path, its line and column, the key meant.
        let (e, pos) = at(&job(
            "  type: iceberg
  warehouse: w
  maintenance: {intervl-seconds: 60}
",
            "",
        ));
        assert_eq!(
            e,
            "job file: sink.maintenance.intervl-seconds: unknown key; did you mean `interval-seconds`?"
        );
        assert_eq!(pos, Some((11, 17)));
        // A misspelt value of a setting with a few values.
        let (e, pos) = at(&job(
            "  type: iceberg
  warehouse: w
  delete-mode: positon
",
            "",
        ));
        assert_eq!(
            e,
            "job file: sink.delete-mode: `positon` is not a known value; did you mean `position`?"
        );
        assert_eq!(pos, Some((11, 3)));
        // Types in words, not Rust's.
        let (e, pos) = at(&job(
            "  type: iceberg
  warehouse: w
",
            "",
        )
        .replace("port: 3306", "port: 99999"));
        assert!(
            e.starts_with("job file: source.port: ")
                && e.ends_with("expected a whole number from 0 to 65535"),
            "{e}"
        );
        assert_eq!(pos, Some((4, 3)));
        let (e, _) = at(&job(
            "  type: iceberg
  warehouse: w
",
            "  checkpoint-interval-seconds: ten
",
        ));
        assert!(e.ends_with("expected a number"), "{e}");
        // A section's own name, and YAML that does not parse: where.
        let (e, pos) = at(&job(
            "  type: iceberg
  warehouse: w
",
            "",
        )
        .replace("pipeline:", "pipline:"));
        assert_eq!(
            e,
            "job file: pipline: unknown key; did you mean `pipeline`?"
        );
        assert_eq!(pos, Some((11, 1)));
        let (_, pos) = at("source: [\n");
        assert_eq!(pos, Some((2, 1)));
        // (A key in a comment is not where the file writes it.)
        let text = job(
            "  type: iceberg
  # delete-mode: x
  warehouse: w
  delete-mode: positon
",
            "",
        );
        assert_eq!(at(&text).1, Some((12, 3)));
        assert_eq!(
            JobFileError("m".into(), Some((3, 4))).report(std::path::Path::new("j.yaml")),
            "j.yaml:3:4: m"
        );
        // A misspelt key is said before an unset environment variable the source
        // names; errors a check makes later name their place too.
        let text = job(
            "  type: iceberg\n  warehouse: w\n",
            "  progres-seconds: 1\n",
        )
        .replace(
            "username: root\n",
            "username: root\n  password-env: LAKESHIFT_UNSET_VAR\n",
        );
        let (e, _) = at(&text);
        assert!(e.contains("pipeline.progres-seconds: unknown key"), "{e}");
        let (e, pos) = at(&job("  type: iceberg\n  warehouse: w\n", "")
            .replace("type: mariadb", "type: mariadbb"));
        assert!(e.contains("source.type"), "{e}");
        assert_eq!(pos, Some((2, 3)), "{e}");
        // The metrics endpoint's address: one of the two keys, HOST:PORT.
        let sink = "  type: iceberg\n  warehouse: w\n";
        let j = parse(&job(sink, "  metrics-address: 0.0.0.0:9187\n"), |_| None).unwrap();
        assert_eq!(j.pipeline.metrics_addr().as_deref(), Some("0.0.0.0:9187"));
        let j = parse(&job(sink, "  metrics-port: 9187\n"), |_| None).unwrap();
        assert_eq!(j.pipeline.metrics_addr().as_deref(), Some("127.0.0.1:9187"));
        let (e, _) = at(&job(sink, "  metrics-address: 0.0.0.0\n"));
        assert!(e.contains("is not HOST:PORT"), "{e}");
        let (e, _) = at(&job(sink, "  metrics-address: ':1'\n  metrics-port: 1\n"));
        assert!(e.contains("not both"), "{e}");
    }

    #[cfg(feature = "kafka")]
    #[test]
    fn park_for_rows_is_refused_for_a_kafka_source() {
        let yaml = "source:\n  type: kafka\n  brokers: 127.0.0.1:9092\n  group-id: g\n  topic-prefix: p\n  tables: ['a\\..*']\nsink:\n  type: postgres\n  url: postgres://u@h/db\npipeline:\n  name: j\n  state: /tmp/s\n  row-error-policy: park\n";
        let e = parse(yaml, |_| None).unwrap_err().0;
        assert!(
            e.contains("pipeline.row-error-policy") && e.contains("binlog"),
            "{e}"
        );
        assert!(parse(&yaml.replace("park", "skip"), |_| None).is_ok());
    }

    #[cfg(feature = "kafka")]
    #[test]
    fn position_deletes_are_the_default_for_binlog_and_refused_for_kafka() {
        let binlog = job("  type: iceberg\n  warehouse: /tmp/w\n", "");
        let j = parse(&binlog, |_| None).unwrap();
        assert_eq!(
            j.sink.iceberg().unwrap().deletes(false),
            DeleteMode::Position
        );
        let kafka = "source:\n  type: kafka\n  brokers: 127.0.0.1:9092\n  group-id: g\n  topic-prefix: p\n  tables: ['a\\..*']\nsink:\n  type: iceberg\n  warehouse: /tmp/w\npipeline:\n  name: j\n  state: /tmp/s\n";
        let j = parse(kafka, |_| None).unwrap();
        assert_eq!(
            j.sink.iceberg().unwrap().deletes(true),
            DeleteMode::Equality
        );
        let e = parse(
            &kafka.replace("/tmp/w\n", "/tmp/w\n  delete-mode: position\n"),
            |_| None,
        )
        .unwrap_err()
        .0;
        assert!(e.contains("sink.delete-mode") && e.contains("Kafka"), "{e}");
    }

    #[test]
    fn keys_of_the_other_sink_are_refused_by_name() {
        // regression: Iceberg settings were accepted and silently ignored for a
        // relational sink.
        let e = parse(
            &job(
                "  type: postgres\n  url: postgres://u@h/db\n  partition-buckets: 8\n",
                "",
            ),
            |_| None,
        )
        .unwrap_err()
        .0;
        assert!(
            e.contains("sink.partition-buckets") && e.contains("Iceberg"),
            "{e}"
        );
        let e = parse(
            &job(
                "  type: mysql\n  url: mysql://u@h:3306\n",
                "  changelog-tables: ['a\\..*']\n",
            ),
            |_| None,
        )
        .unwrap_err()
        .0;
        assert!(e.contains("pipeline.changelog-tables"), "{e}");
        let e = parse(
            &job(
                "  type: iceberg\n  warehouse: /tmp/w\n  batch-rows: 10\n",
                "",
            ),
            |_| None,
        )
        .unwrap_err()
        .0;
        assert!(e.contains("sink.batch-rows"), "{e}");
        // A key no sink knows: named by the sink's own type.
        let e = parse(
            &job(
                "  type: postgres\n  url: postgres://u@h/db\n  colour: red\n",
                "",
            ),
            |_| None,
        )
        .unwrap_err()
        .0;
        assert!(e.contains("sink.colour: unknown key (known here: "), "{e}");
        let e = parse(&job("  type: mysql\n", ""), |_| None).unwrap_err().0;
        assert!(e.contains("sink.url: is missing"), "{e}");
        let e = parse(&job("  type: iceberg\n", ""), |_| None)
            .unwrap_err()
            .0;
        assert!(e.contains("sink.warehouse: is missing"), "{e}");
        let e = parse(&job("  type: oracle\n", ""), |_| None).unwrap_err().0;
        assert!(e.contains("`oracle` is not supported"), "{e}");
        // regression: these read as an empty type.
        let e = parse(&job("  type: 5\n", ""), |_| None).unwrap_err().0;
        assert!(e.contains("sink.type: `5` is not supported"), "{e}");
        let e = parse(&job("  warehouse: /w\n", ""), |_| None)
            .unwrap_err()
            .0;
        assert!(e.contains("sink.type: is missing"), "{e}");
        let e = parse(&job("  - 1\n", ""), |_| None).unwrap_err().0;
        assert!(e.contains("sink: must be a mapping"), "{e}");
        // Each sink's own settings are accepted.
        parse(
            &job(
                "  type: iceberg\n  warehouse: /tmp/w\n  partition-buckets: 8\n",
                "  metrics-port: 9000\n  writer-shards: 2\n",
            ),
            |_| None,
        )
        .unwrap();
        let j = parse(
            &job(
                "  type: postgres\n  url: postgres://u@h/db\n  batch-rows: 10\n",
                // The pipeline's own settings apply to every sink.
                "  ddl-error-policy: park\n  metrics-port: 9000\n  barrier-timeout-intervals: 3\n",
            ),
            |_| None,
        )
        .unwrap();
        assert_eq!(j.sink.kind(), "postgres");
        assert_eq!(j.sink.rdb().map(|s| s.batch_rows), Some(10));
        assert!(j.sink.iceberg().is_none());
    }

    #[test]
    fn numbers_out_of_range_and_secrets_in_errors() {
        // regression: `.inf` panicked (exit 101) instead of a usage error.
        for v in [".inf", ".nan", "-1", "0"] {
            let e = parse(
                &job(
                    "  type: iceberg\n  warehouse: /tmp/w\n",
                    &format!("  checkpoint-interval-seconds: {v}\n"),
                ),
                |_| None,
            )
            .unwrap_err()
            .0;
            assert!(
                e.contains("pipeline.checkpoint-interval-seconds"),
                "{v}: {e}"
            );
        }
        let e = parse(
            &job(
                "  type: iceberg\n  warehouse: /tmp/w\n",
                "  progress-seconds: .inf\n",
            ),
            |_| None,
        )
        .unwrap_err()
        .0;
        assert!(e.contains("pipeline.progress-seconds"), "{e}");
        // regression: an unclosed `${` echoed the whole URL, password included.
        let e = parse(
            &job(
                "  type: postgres\n  url: postgres://u:hunter2@h/db${PW\n",
                "",
            ),
            |_| None,
        )
        .unwrap_err()
        .0;
        assert!(e.contains("sink.url") && e.contains("unclosed"), "{e}");
        assert!(!e.contains("hunter2"), "{e}");
        // regression: a password holding `@` was only half redacted.
        let shown = crate::iceberg::catalog::redact("postgres://u:p@ss@word@h:5432/db");
        assert_eq!(shown, "postgres://u:***@h:5432/db");
    }
}
