//! The relational sink: a MySQL/MariaDB source mirrored into PostgreSQL or
//! MySQL/MariaDB, DDL included, exactly once.
//!
//! Rows: per checkpoint, each table's changes are folded by key (the last change of a
//! key wins), then applied in one target transaction as upserts
//! (`INSERT ... ON CONFLICT DO UPDATE` / `ON DUPLICATE KEY UPDATE`) and deletes by key.
//! Values travel as data, never as SQL text (`step`): PostgreSQL loads them with
//! `COPY` into temporary staging tables and applies each table's changes with
//! set-based statements; MySQL gets prepared statements and their parameters.
//! The same transaction moves the job's row in the target's state table
//! (`lakeshift.sync_state`: checkpoint, source position, snapshot progress) from the
//! previous checkpoint to this one, and fails if the row is not at the previous
//! checkpoint (another process advanced it). A restart resumes the source at the
//! position in that row: what the target committed is never applied twice, what it
//! did not is read again.
//!
//! DDL: the pending rows are committed first (a barrier), then the DDL is translated
//! from the source's IR changes (after the job's `route`) into the target dialect and
//! run. Every DDL is recorded in the DDL log (`ddl-log.json`, durable) before it
//! runs. PostgreSQL runs the DDL and the state row's move in one transaction.
//! MySQL commits each DDL statement on its own: after a crash, a DDL whose log entry
//! is still pending is reconciled by probing the target's catalog (is the column
//! there?) before it is run again, so each takes effect once. A DDL that cannot be
//! translated or that the target refuses goes to the job's `ddl-error-policy`.

mod ddl;
mod keyed;
mod keys;
mod refused;
pub mod render;
mod state;
pub mod step;
mod tables;
pub mod target;
mod write;

use super::ddllog::{DdlLog, Entry, Status};
use super::error::{ErrorKind, SyncError};
use super::job::{DdlErrorPolicy, ForeignKeys, SyncJob};
use super::route::{rename_batch, Routed};
use crate::source::position::Position;
use crate::source::snapshot::SnapshotResume;
use crate::source::Op;
use arrow_array::RecordBatch;
use ddl_core::{Catalog, SchemaChange, Table, TableName};
use dialects::emit::{EmitCtx, Emitter};
use dialects::Dialect;
use render::{ColSpec, Row};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use step::Step;
use target::Target;

use crate::failpoint::hit as failpoint;

/// A target table as the sink writes it.
struct TTable {
    /// `db.table`, quoted for the target.
    sql_name: String,
    /// IR column names (routed), lower-cased, in order.
    names: Vec<String>,
    cols: Vec<ColSpec>,
    /// Key columns (indexes into `cols`); empty: no key (full-row deletes).
    key: Vec<usize>,
}

/// One table's changes in the current checkpoint.
#[derive(Default)]
struct Pend {
    /// Keyed tables: each key's folded change.
    keyed: keyed::Keyed,
    /// Keyless tables: inserts (true) and deletes of rows, in order.
    keyless: Vec<(bool, Row)>,
    /// A snapshot reads the table again: every row the target holds goes first, in
    /// the checkpoint's transaction.
    replace: bool,
}

/// A checkpoint committing on a task of its own while the next one is read and
/// folded. It counts as done only once settled (`RdbEngine::settle`), which every use
/// of the target connection and every next checkpoint waits for.
struct Flight {
    n: u64,
    task: tokio::task::JoinHandle<(Target, Result<(), SyncError>)>,
    /// Its changes: a unique violation applies them again, every changed key
    /// deleted first.
    pending: BTreeMap<(String, String), Pend>,
    position: Option<Position>,
    snapshot: Option<SnapshotResume>,
    /// Its pending bytes (still held, counted against the budget).
    bytes: usize,
}

impl Drop for Flight {
    /// An engine dropped before settling (the job failed elsewhere) stops its commit:
    /// the target rolls back what was not committed, and a restart reads it again.
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How often an idle target connection is checked.
const PING_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

pub struct RdbEngine {
    job: SyncJob,
    /// The job's sink settings.
    cfg: super::job::RdbSink,
    /// The target connection; None while a checkpoint commits on it (`flight`).
    conn: Option<Target>,
    /// When the idle target connection was last checked (see `keep_alive`).
    pinged: Instant,
    flight: Option<Flight>,
    dialect: Dialect,
    state_dir: PathBuf,
    log: DdlLog,
    dead_letter: PathBuf,
    checkpoint: u64,
    position: Option<Position>,
    snapshot: Option<SnapshotResume>,
    /// Target tables (routed IR) as the sink believes them to be.
    catalog: Catalog,
    tables: HashMap<(String, String), TTable>,
    /// Known target tables the target holds: found at the resume point
    /// (`find_known_tables`) or created since.
    ensured: BTreeSet<(String, String)>,
    pending: BTreeMap<(String, String), Pend>,
    seq: u64,
    parked: BTreeSet<String>,
    last_checkpoint: Instant,
    pub rows: u64,
    pub commits: u64,
    pub ddls: u64,
    /// A Kafka source: offsets instead of a source position.
    kafka: bool,
    /// MySQL/MariaDB: the binary utf8mb4 collation the sink's own tables and
    /// databases take, NO PAD where the server has one (`'a'` and `'a '` are two
    /// keys, as in the source).
    text_collation: String,
    /// Kafka: each partition's next offset as the target holds it (None: not yet
    /// there), read when the partition is first seen; what the next commit asserts.
    floors: HashMap<(String, i32), Option<i64>>,
    /// Kafka: the next offset of each partition after this checkpoint's messages.
    offsets: BTreeMap<(String, i32), i64>,
    /// Kafka: offsets committed since the pipeline last asked.
    acks: crate::source::Acknowledged,
    /// PostgreSQL with `foreign-keys: keep`: foreign keys waiting for their tables.
    fk_queue: Vec<(TableName, ddl_core::ForeignKey)>,
    /// Columns (lower case) of target tables that a DDL skipped by the policy left
    /// out: the source's rows hold them, the target's table does not.
    skipped_columns: BTreeSet<((String, String), String)>,
    /// Bytes of rendered pending changes (checked against `memory-budget-mib`).
    pending_bytes: usize,
    /// The largest statement the target takes (MySQL `max_allowed_packet`): statements
    /// are cut below it, and a row that alone would pass it follows the row-error
    /// policy.
    max_statement: usize,
    /// ON DELETE actions of foreign keys, by parent table (routed). A delete of such a
    /// parent starts a checkpoint, so the action runs in source order with the other
    /// changes: the target's own key runs it (PostgreSQL with `foreign-keys: keep`),
    /// or the checkpoint does (other relational targets).
    fk_actions: BTreeMap<(String, String), Vec<FkAction>>,
    /// The source's dialect (name folding, dialect-specific SQL in the IR).
    source_dialect: Dialect,
}

/// A foreign key's ON DELETE action, seen from its parent table.
#[derive(Debug, Clone, PartialEq)]
struct FkAction {
    child: (String, String),
    /// Child columns and the parent columns they reference (routed names).
    cols: Vec<String>,
    parent_cols: Vec<String>,
    /// SET NULL; else CASCADE.
    set_null: bool,
}

const STATE_DB: &str = "lakeshift";
const STATE_TABLE: &str = "sync_state";

fn key_of(t: &TableName) -> (String, String) {
    (t.schema.clone().unwrap_or_default(), t.name.clone())
}

fn show(k: &(String, String)) -> String {
    format!("{}.{}", k.0, k.1)
}

impl RdbEngine {
    pub async fn open(job: SyncJob) -> Result<RdbEngine, SyncError> {
        let cfg = job
            .sink
            .rdb()
            .cloned()
            .ok_or("the relational sink needs a postgres or mysql sink")?;
        let url = cfg.url.clone();
        let mut target = Target::connect(&url).await?;
        let dialect = target.dialect();
        let max_statement = target.max_statement_bytes().await?;
        if cfg.foreign_keys == ForeignKeys::Keep && dialect == Dialect::MySql {
            target
                .exec("SET SESSION foreign_key_checks = 0")
                .await
                .map_err(SyncError::from)?;
        }
        let text_collation = match dialect {
            Dialect::MySql => target
                .query(
                    "SELECT collation_name FROM information_schema.collations
                      WHERE collation_name IN ('utf8mb4_nopad_bin', 'utf8mb4_0900_bin')
                      ORDER BY 1 DESC",
                )
                .await
                .map_err(SyncError::from)?
                .into_iter()
                .find_map(|r| r.into_iter().next().flatten())
                .unwrap_or_else(|| "utf8mb4_bin".to_owned()),
            _ => String::new(),
        };
        let state_dir = job.pipeline.state.clone();
        std::fs::create_dir_all(&state_dir)
            .map_err(|e| format!("state folder {}: {e}", state_dir.display()))?;
        let log = DdlLog::load(&state_dir)?;
        let dead_letter = job.pipeline.dead_letter_file();
        let parked = log.parked_tables();
        let mut e = RdbEngine {
            cfg,
            conn: Some(target),
            pinged: Instant::now(),
            flight: None,
            dialect,
            state_dir,
            log,
            dead_letter,
            checkpoint: 0,
            position: None,
            snapshot: None,
            catalog: Catalog::new(job.source.dialect().name_rules()),
            source_dialect: job.source.dialect(),
            tables: HashMap::new(),
            ensured: BTreeSet::new(),
            pending: BTreeMap::new(),
            seq: 0,
            parked,
            last_checkpoint: Instant::now(),
            rows: 0,
            commits: 0,
            ddls: 0,
            kafka: job.source.kafka().is_some(),
            text_collation,
            floors: HashMap::new(),
            offsets: BTreeMap::new(),
            acks: Vec::new(),
            fk_queue: Vec::new(),
            skipped_columns: BTreeSet::new(),
            pending_bytes: 0,
            max_statement,
            fk_actions: BTreeMap::new(),
            job,
        };
        e.load_state().await?;
        Ok(e)
    }
}

impl crate::sync::pipeline::Sink for RdbEngine {
    async fn prepare(&mut self) -> Result<crate::source::Resume, SyncError> {
        Ok(crate::source::Resume {
            position: self.position.clone(),
            snapshot: self.snapshot.clone(),
        })
    }

    fn resolutions_waiting(&self) -> bool {
        !self.log.resolutions().is_empty()
    }

    async fn rows(
        &mut self,
        b: crate::source::RowBatch,
        snapshotting: bool,
    ) -> Result<(), SyncError> {
        // (The pipeline never passes an empty batch.)
        let Some(b) = self.checked(b).await? else {
            return Ok(());
        };
        if b.op == Op::Delete
            && !self.pending.is_empty()
            && !snapshotting
            && self.acts_on_delete(&b)
        {
            // Everything before this delete commits first.
            let mut before = b.position_after(0);
            before.ordinal = before.ordinal.saturating_sub(1);
            self.checkpoint(Some(before), None).await?;
        }
        self.fold_rows(
            &b.table,
            b.op,
            b.before.as_ref(),
            b.after.as_ref(),
            &b.unchanged,
        )
        .await
    }

    async fn message(&mut self, m: crate::source::Message) -> Result<(), SyncError> {
        // A message's rows apply unless the target has its offset already.
        let floor = self.floor(&m.topic, m.partition).await?;
        let key = (m.topic, m.partition);
        let seen = self.offsets.get(&key).copied().or(floor);
        if seen.is_some_and(|f| m.next <= f) {
            return Ok(());
        }
        let acts = m
            .rows
            .iter()
            .any(|b| b.op == Op::Delete && self.acts_on_delete(b));
        if acts && (!self.pending.is_empty() || !self.offsets.is_empty()) {
            // Everything before this delete commits first.
            self.checkpoint(None, None).await?;
        }
        for b in m.rows {
            let Some(b) = self.checked(b).await? else {
                continue;
            };
            self.fold_rows(
                &b.table,
                b.op,
                b.before.as_ref(),
                b.after.as_ref(),
                &b.unchanged,
            )
            .await?;
        }
        self.offsets.insert(key, m.next);
        Ok(())
    }

    async fn replace(
        &mut self,
        table: &Arc<crate::source::decode::SourceTable>,
        _at: &Position,
    ) -> Result<(), SyncError> {
        let (k, _) = self.table_for(table).await?;
        self.pending.entry(k).or_default().replace = true;
        Ok(())
    }

    async fn snapshot_rows(
        &mut self,
        table: &Arc<crate::source::decode::SourceTable>,
        rows: RecordBatch,
        at: &Position,
    ) -> Result<(), SyncError> {
        let rows = self.checked_snapshot(table, rows, at).await?;
        if rows.num_rows() > 0 {
            Ok(self
                .fold_rows(table, Op::Insert, None, Some(&rows), &[])
                .await?)
        } else {
            self.table_for(table).await?;
            Ok(())
        }
    }

    async fn schema(&mut self, d: crate::sync::pipeline::Ddl<'_>) -> Result<(), SyncError> {
        // The position below is the committed one.
        self.settle().await?;
        // Every transaction before the DDL is complete.
        if self.position.as_ref().is_none_or(|p| *p < d.before) {
            self.position = Some(d.before.clone());
        }
        self.ddl(d.position, d.sql, d.changes, d.after).await
    }

    fn skipped(
        &mut self,
        position: &Position,
        sql: &str,
        tables: Vec<String>,
        why: Option<String>,
    ) -> Result<(), SyncError> {
        self.log.record_once(Entry::new(
            position.to_string(),
            sql,
            tables,
            Status::Skipped,
            why,
        ))
    }

    async fn checkpoint(
        &mut self,
        at: Option<Position>,
        snapshot: Option<SnapshotResume>,
    ) -> Result<(), SyncError> {
        RdbEngine::checkpoint(self, at, snapshot).await
    }

    fn has_pending(&self) -> bool {
        !self.pending.is_empty() || !self.offsets.is_empty()
    }

    async fn settle(&mut self) -> Result<(), SyncError> {
        RdbEngine::settle(self).await
    }

    /// A checkpoint committed in the background is taken in as soon as it is done,
    /// though no next checkpoint comes (a quiet source): the committed position,
    /// counters and metrics move with it.
    async fn keep_alive(&mut self) -> Result<(), SyncError> {
        if self.flight.as_ref().is_some_and(|f| f.task.is_finished()) {
            RdbEngine::settle(self).await?;
        }
        // An idle connection the target dropped (a restart) is found now, and the
        // job starts again from its checkpoint, not when a stop's commit meets it
        // (a hostile tester: SIGTERM seconds after a target restart exited 1 with
        // what was read uncommitted).
        if self.flight.is_none() && self.pinged.elapsed() >= PING_EVERY {
            self.pinged = Instant::now();
            if let Some(t) = self.conn.as_mut() {
                t.exec("SELECT 1").await.map_err(SyncError::from)?;
            }
        }
        Ok(())
    }

    fn over_budget(&self) -> bool {
        RdbEngine::over_budget(self)
    }

    fn near_budget(&self) -> bool {
        RdbEngine::near_budget(self)
    }

    /// Everything read commits now, inside a source transaction if need be (the
    /// position records how far into it); during a snapshot, at the next chunk.
    async fn relieve(
        &mut self,
        read_to: Option<Position>,
        snapshotting: bool,
    ) -> Result<(), SyncError> {
        if snapshotting {
            return Ok(());
        }
        tracing::warn!(
            "over the memory budget: committed inside a source transaction, up to {} (the next checkpoint completes the transaction)",
            read_to
                .as_ref()
                .map_or_else(|| "-".to_owned(), |p| p.to_string())
        );
        RdbEngine::checkpoint(self, read_to, None)
            .await
            .map_err(|e| match e.message.contains("SQLSTATE 23503") {
                // The part refers to rows later in its transaction (children before
                // their parent, a deferred key at the source): the target's keys,
                // checked at each commit, refuse it, the same on every run.
                true => SyncError::new(
                    crate::sync::error::ErrorKind::NeedsFix,
                    format!(
                        "{e}\na source transaction larger than the memory budget is committed in parts, and this part refers to rows that come later in that transaction: the target's foreign keys (sink.foreign-keys: keep) refuse it. Raise pipeline.memory-budget-mib past the transaction's size (the sink holds half of it), or set sink.foreign-keys: drop"
                    ),
                ),
                false => e,
            })
    }

    fn source_restarted(&mut self) {
        self.floors.clear();
    }

    fn take_acks(&mut self) -> crate::source::Acknowledged {
        std::mem::take(&mut self.acks)
    }

    fn last_checkpoint(&self) -> Instant {
        self.last_checkpoint
    }

    fn status(&self) -> crate::sync::pipeline::SinkStatus {
        crate::sync::pipeline::SinkStatus {
            rows: self.rows,
            commits: self.commits,
            ddls: self.ddls,
            checkpoint: self.checkpoint,
            partitions: self.floors.len(),
        }
    }

    fn position(&self) -> Option<Position> {
        self.position.clone()
    }
}

/// `lakeshift ddl-log`: the DDL log of a job's state folder.
pub fn ddl_log_report(job: &SyncJob) -> Result<String, SyncError> {
    let log = DdlLog::load(&job.pipeline.state)?;
    Ok(log.render())
}

/// `lakeshift status` of a relational target: the job's state row, Kafka offsets and
/// the DDL log's counts by status.
/// The job's rows in the target's state tables (`lakeshift drop-job`): what there
/// is, removed when `apply`.
pub async fn forget_job(job: &SyncJob, apply: bool) -> Result<Vec<String>, SyncError> {
    let url = job.sink.rdb().map(|s| s.url.as_str()).unwrap_or_default();
    let mut t = Target::connect(url).await?;
    let name = dialects::emit::string_literal(t.dialect(), &job.pipeline.name);
    let mut out = Vec::new();
    for table in [STATE_TABLE, "kafka_offsets", "ddl_applied"] {
        let Ok(rows) = t
            .query(&format!(
                "SELECT CAST(count(*) AS CHAR(20)) FROM {STATE_DB}.{table} WHERE job = {name}"
            ))
            .await
        else {
            continue; // no such table: never made on this target
        };
        let n: u64 = rows
            .first()
            .and_then(|r| r[0].as_deref())
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        if n == 0 {
            continue;
        }
        if apply {
            t.exec(&format!(
                "DELETE FROM {STATE_DB}.{table} WHERE job = {name}"
            ))
            .await
            .map_err(|e| SyncError::from(e).context(format!("{STATE_DB}.{table}")))?;
        }
        out.push(format!(
            "{} {n} row(s) of the job in the target's {STATE_DB}.{table}",
            if apply { "deleted" } else { "would delete" }
        ));
    }
    Ok(out)
}

pub async fn status(job: &SyncJob) -> Result<String, SyncError> {
    use std::fmt::Write;
    let url = job.sink.rdb().map(|s| s.url.as_str()).unwrap_or_default();
    let mut t = Target::connect(url).await?;
    let d = t.dialect();
    let name = dialects::emit::string_literal(d, &job.pipeline.name);
    let mut out = String::new();
    let state = t
        .query(&format!(
            "SELECT CAST(checkpoint AS CHAR(20)), position, CAST(updated_at AS CHAR(40)), CASE WHEN snapshot IS NULL THEN 'no' ELSE 'yes' END FROM {STATE_DB}.{STATE_TABLE} WHERE job = {name}"
        ))
        .await;
    match state {
        Ok(rows) if !rows.is_empty() => {
            let r = &rows[0];
            let v = |i: usize| r[i].as_deref().unwrap_or("-").trim().to_owned();
            let _ = writeln!(
                out,
                "job {} into {}: checkpoint {}, source position {}, last commit {}{}",
                job.pipeline.name,
                d,
                v(0),
                v(1),
                v(2),
                if v(3) == "yes" {
                    " (snapshot in progress)"
                } else {
                    ""
                }
            );
        }
        _ => {
            let _ = writeln!(out, "job {}: not started on the target", job.pipeline.name);
        }
    }
    if let Ok(rows) = t
        .query(&format!(
            "SELECT topic, CAST(part AS CHAR(10)), CAST(next_offset AS CHAR(20)) FROM {STATE_DB}.kafka_offsets WHERE job = {name} ORDER BY topic, part"
        ))
        .await
    {
        for r in rows {
            let v = |i: usize| r[i].as_deref().unwrap_or("-").trim().to_owned();
            let _ = writeln!(out, "  kafka {}/{}: next offset {}", v(0), v(1), v(2));
        }
    }
    let _ = writeln!(
        out,
        "DDL log: {}",
        DdlLog::load(&job.pipeline.state)?.counts()
    );
    Ok(out)
}
