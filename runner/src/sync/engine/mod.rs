//! The sync engine: source events into Iceberg tables, exactly once.
//!
//! Per table, changes of the current checkpoint are folded by key in memory (the last
//! state of each key wins). At a checkpoint (a transaction boundary, every interval),
//! each table's folded changes become Parquet files: the rows that are live at the
//! end, and equality deletes on every key the checkpoint updated or deleted (an
//! upsert: the delete removes older versions; rows of the same snapshot are not
//! touched by it). The files are listed durably in the state folder with the
//! checkpoint id and the source position (write, fsync, rename, fsync folder), then
//! each table commits them, tagged with the job, the checkpoint id and that table's
//! own watermark (the position of its last change). On start, tables that lack the
//! state's checkpoint commit it; the source resumes at the state's position; each
//! table skips changes at or below its watermark.
//!
//! A DDL on a table first commits that table's pending changes under the old schema
//! (a barrier; other tables go on), then changes the Iceberg table in the same commit
//! that records the DDL's position (`lakeshift.schema-position`), so a replayed DDL
//! is recognised.

mod ddl;
pub mod defaults;
mod parked;
mod rows;
mod shared;
pub(crate) mod state;
mod tables;
mod write;

use ddl::mark_schema_position;
use rows::snapshot_changelog_columns;
use state::{files_avro, write_lists};

use super::convert::{key_bytes, to_iceberg};
use super::ddllog::{DdlLog, Entry, Status};
use super::error::SyncError;
use super::fold::Pending;
use super::route::rename_batch;
use crate::iceberg::catalog::{display, ident};
use crate::iceberg::commit::{Change, SnapshotChange};
use crate::iceberg::{convert as iconv, files, Catalog, Committer, LoadedTable};
use crate::source::position::Position;
use crate::source::snapshot::SnapshotResume;
use crate::source::Op;
use crate::sync::held::{HeldBatch, HeldItem, HeldStore, KafkaAt};
use crate::sync::job::SyncJob;
use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use dialects::iceberg::IcebergPlanner;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const JOB: &str = "lakeshift.job";
pub const CHECKPOINT: &str = "lakeshift.checkpoint-id";
pub const WATERMARK: &str = "lakeshift.watermark";
pub const SCHEMA_POSITION: &str = "lakeshift.schema-position";
/// Snapshot summary: the commit holds part of a source transaction (a table
/// committed early, over the memory budget).
pub const PARTIAL: &str = "lakeshift.partial-transaction";
/// Snapshot summary: the commit was made while the job's initial snapshot (or a
/// table's new snapshot) was still being read: tables not read yet, or read in
/// part, hold less than the source did at the snapshot's point.
pub const LOADING: &str = "lakeshift.snapshot-in-progress";

/// The durable state: the last checkpoint, where the source resumes, and the files
/// each table must have committed for it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct State {
    pub job: String,
    pub checkpoint: u64,
    pub position: Option<Position>,
    pub snapshot: Option<SnapshotResume>,
    /// ns.table -> (avro file of the checkpoint's files, watermark)
    pub pending: BTreeMap<String, (String, Option<Position>)>,
    /// Kafka: ns.table -> the offsets its checkpoint commit moves.
    #[serde(default)]
    pub kafka: BTreeMap<String, crate::iceberg::commit::KafkaCommit>,
    /// ns.table whose checkpoint commit replaces every row committed before (a
    /// snapshot read the table again).
    #[serde(default)]
    pub replace: std::collections::BTreeSet<String>,
}

impl State {
    fn path(dir: &Path) -> PathBuf {
        dir.join("checkpoint.json")
    }

    pub fn load(dir: &Path) -> Result<Option<State>, SyncError> {
        match std::fs::read(Self::path(dir)) {
            Ok(b) => Ok(serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| format!("{}: {e}", Self::path(dir).display()))?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", Self::path(dir).display()).into()),
        }
    }

    /// Write, fsync the file, rename over the old state, fsync the folder.
    fn store(&self, dir: &Path) -> Result<(), SyncError> {
        let fin = Self::path(dir);
        let bytes = serde_json::to_vec_pretty(self).expect("serialises");
        Ok(
            crate::durable::replace_observed(&fin, &bytes, |step| match step {
                crate::durable::Step::BeforeRename => failpoint("state-before-rename"),
                crate::durable::Step::BeforeDirFsync => failpoint("state-before-dir-fsync"),
            })
            .map_err(|e| format!("writing {}: {e}", fin.display()))?,
        )
    }
}

use crate::failpoint::hit as failpoint;

/// One Iceberg table the engine writes.
struct Sink {
    ident: iceberg::TableIdent,
    table: LoadedTable,
    arrow: SchemaRef,
    /// Key columns (indexes into the Iceberg schema); all columns for keyless tables.
    key: Vec<usize>,
    key_ids: Vec<i32>,
    keyed: bool,
    /// Append every change with `_op`, `_source_pos`, `_source_ts` (changelog mode; `_pos` is a name Iceberg readers reserve).
    changelog: bool,
    /// The table held rows when this process first saw it.
    had_rows: bool,
    watermark: Option<Position>,
    pending: Pending,
    /// Updates and deletes of committed rows are position deletes (row locators).
    positions: bool,
    /// Where the table's rows are (position mode), for the snapshot and schema it
    /// names; None until deletes first need it, and again after any change of the
    /// table it did not see.
    index: Option<crate::iceberg::locate::RowIndex>,
}

/// Pending bytes from which a table whose snapshot is read commits at once.
const SNAPSHOT_COMMIT_BYTES: usize = 1 << 20;

pub struct Engine {
    job: SyncJob,
    catalog: Catalog,
    planner: IcebergPlanner,
    state_dir: PathBuf,
    state: State,
    sinks: HashMap<(String, String), Sink>,
    /// Tables rows were folded into since the last checkpoint (a superset of those
    /// with pending changes): the budget check adds up these, not every table.
    active: HashSet<(String, String)>,
    /// Bytes the tables' row indexes held after the last commit (the budget counts
    /// them).
    index_bytes: usize,
    /// Bytes folded into pending changes since the last count (at a checkpoint or a
    /// flush): at least what the active tables hold, so below the budget it spares
    /// adding them up.
    pending_bytes: usize,
    last_checkpoint: Instant,
    pub rows: u64,
    pub commits: u64,
    /// (DDL position, tables, ms the barrier and schema change took).
    pub ddl_stalls: Vec<(String, usize, f64)>,
    /// Kafka: each partition's next offset as the Iceberg table it writes holds it
    /// (None: not yet), by (table, partition): a DDL that renames, drops or makes
    /// a table forgets its floors (a swap gives a topic's name another table).
    floors: HashMap<(String, String), Option<i64>>,
    /// Kafka: offsets committed since the pipeline last asked.
    acks: crate::source::Acknowledged,
    /// Tables parked behind a DDL (`ddl-error-policy: park`): their changes are held.
    parked: BTreeSet<(String, String)>,
    /// Held changes of parked tables read since the last checkpoint.
    held: BTreeMap<(String, String), Vec<HeldItem>>,
    held_store: HeldStore,
    /// Kafka: the newest offset held per partition (a message read again is held once).
    held_offsets: HashMap<String, i64>,
    /// Positions of parked DDL that a retry refused again during a release.
    reparked: BTreeSet<String>,
    dead_letter: PathBuf,
    /// No state was stored when the job opened (a first run, or a lost folder).
    fresh: bool,
    /// The lease on the job in the catalog: its length, and when it was renewed.
    lease: Duration,
    renewed: Instant,
    /// When the job last maintained its tables (`sink.maintenance.interval-seconds`;
    /// kept in the state folder, so restarts do not postpone it).
    maintained: Option<std::time::SystemTime>,
    /// The state folder's mirror in an object-store warehouse (None: local, or a
    /// Kafka source, whose members keep folders of their own).
    shared: Option<shared::Shared>,
    /// This run's state was read from the mirror.
    pulled: bool,
    /// The table the last snapshot rows went into: when the snapshot moves on to
    /// another, a large finished table commits at once (its files are written while
    /// the source reads ahead), not at the checkpoint.
    snapshotting: Option<(String, String)>,
    /// Per table, the last DDL whose barrier committed its rows: a row before it,
    /// read again after a restart, is in the lake already (in the table the DDL may
    /// have renamed or dropped since), so it is not applied again.
    barriers: BTreeMap<(String, String), Position>,
    /// The commit under way is made while a snapshot is read (see [`LOADING`]).
    loading: bool,
    /// The commit under way holds part of a source transaction (see [`PARTIAL`]).
    partial: bool,
}

/// The DDL log's barriers: per table, the position of the last DDL whose barrier
/// committed it.
fn barrier_floors(log: &DdlLog) -> BTreeMap<(String, String), Position> {
    let mut out: BTreeMap<(String, String), Position> = BTreeMap::new();
    for e in &log.entries {
        let Ok(p) = e.position.parse::<Position>() else {
            continue;
        };
        for k in &e.flushed {
            let floor = out.entry(k.clone()).or_insert(p.clone());
            if *floor < p {
                *floor = p.clone();
            }
        }
    }
    out
}

/// `ns.table` of the DDL log into the engine's table key.
fn table_key(t: &str) -> (String, String) {
    match t.split_once('.') {
        Some((a, b)) => (a.to_owned(), b.to_owned()),
        None => (String::new(), t.to_owned()),
    }
}

fn ns_of(db: &str) -> String {
    db.to_owned()
}

impl Engine {
    pub async fn open(job: SyncJob) -> Result<Engine, SyncError> {
        let ice = job
            .sink
            .iceberg()
            .ok_or("the Iceberg sink needs an iceberg sink")?;
        // (a catalog server that is down or starting is transient: the job tries again)
        let catalog = Catalog::open(&ice.catalog_config()).await?;
        let state_dir = job.pipeline.state.clone();
        std::fs::create_dir_all(state_dir.join("pending"))
            .map_err(|e| format!("state folder {}: {e}", state_dir.display()))?;
        // Spilled row indexes of an earlier run are scratch (a clean stop stores the
        // indexes whole beside them).
        let spill = write::spill_dir(&state_dir);
        if spill.exists() {
            std::fs::remove_dir_all(&spill).map_err(|e| format!("{}: {e}", spill.display()))?;
        }
        // An object-store warehouse holds the job's state for any host: a state
        // folder without a checkpoint record takes it (the job ran elsewhere).
        let mut shared = shared::Shared::for_job(&catalog, &job.pipeline.name)
            .filter(|_| job.source.kafka().is_none());
        let mut pulled = false;
        if let Some(sh) = shared.as_mut() {
            if State::load(&state_dir)?.is_none() {
                let n = sh.pull(&state_dir).await?;
                if n > 0 {
                    crate::durable::replace(&state_dir.join(shared::PULLED), b"")
                        .map_err(|e| format!("{}: {e}", state_dir.display()))?;
                    tracing::info!(
                        "job {}: its state ({n} files) read from the warehouse; it ran on another host or state folder before",
                        job.pipeline.name
                    );
                }
            }
        }
        pulled |= shared.is_some() && state_dir.join(shared::PULLED).exists();
        let stored = State::load(&state_dir)?;
        let fresh = stored.is_none();
        let state = stored.unwrap_or(State {
            job: job.pipeline.name.clone(),
            ..Default::default()
        });
        let planner = IcebergPlanner::new(job.iceberg_options());
        // Held changes of checkpoints the state never reached come again from the
        // source; parked tables are those of parked DDL (and DDL queued behind it).
        let held_store = HeldStore::new(&state_dir);
        held_store.discard_after(state.checkpoint)?;
        let log = DdlLog::load(&state_dir)?;
        let parked = log.parked_tables().iter().map(|t| table_key(t)).collect();
        let barriers = barrier_floors(&log);
        let mut held_offsets: HashMap<String, i64> = HashMap::new();
        for t in held_store.tables() {
            for item in held_store.load(&t)? {
                if let HeldItem::Rows { kafka: Some(k), .. } = item {
                    let e = held_offsets.entry(k.part).or_insert(k.next);
                    *e = (*e).max(k.next);
                }
            }
        }
        let dead_letter = job.pipeline.dead_letter_file();
        let maintained = write::last_maintained(&state_dir);
        let job_lease = job.pipeline.owner_lease_seconds;
        Ok(Engine {
            job,
            catalog,
            planner,
            state_dir,
            state,
            sinks: HashMap::new(),
            active: HashSet::new(),
            index_bytes: 0,
            pending_bytes: 0,
            last_checkpoint: Instant::now(),
            snapshotting: None,
            loading: false,
            barriers,
            partial: false,
            rows: 0,
            commits: 0,
            ddl_stalls: Vec::new(),
            floors: HashMap::new(),
            acks: Vec::new(),
            parked,
            held: BTreeMap::new(),
            held_store,
            held_offsets,
            reparked: BTreeSet::new(),
            dead_letter,
            fresh,
            lease: Duration::from_secs_f64(job_lease),
            renewed: Instant::now(),
            maintained,
            shared,
            pulled,
        })
    }
}

impl super::pipeline::Sink for Engine {
    async fn prepare(&mut self) -> Result<crate::source::Resume, SyncError> {
        // (Kafka jobs keep their offsets in the tables: processes of one group start
        // with state folders of their own, share tables, and are fenced by offsets.)
        if self.job.source.kafka().is_none() {
            let me = crate::iceberg::lease::Owner::this_process(
                &self.job.pipeline.name,
                &self.state_dir,
            );
            // The folder is checked against the job's row before the row is taken:
            // a refused run leaves it naming the folder that really ran last.
            let (name, dir) = (
                self.job.pipeline.name.clone(),
                self.state_dir.display().to_string(),
            );
            let (shared, pulled, fresh, at) = (
                self.shared.is_some(),
                self.pulled,
                self.fresh,
                self.state.checkpoint,
            );
            let accept = |recorded: u64, before: Option<&str>| -> Result<(), String> {
                // With the state mirrored in the warehouse, a folder the job did not
                // last run from may hold a checkpoint that never reached the mirror
                // (written, then the process died before the push and the commits)
                // under a number another host has used since: only the mirror's state
                // is trusted then.
                if let (Some(before), true, false, false) = (before, shared, pulled, fresh) {
                    return Err(format!(
                        "job `{name}` last ran from state folder {before}, not from {dir}: this folder may be behind or apart from the job's state; empty it and the job takes its newest state from the warehouse"
                    ));
                }
                // (A missing folder is told apart below, by the tables' commits.)
                if !fresh && recorded > at {
                    let shared = if shared {
                        "; the warehouse holds the job's newest state: empty this folder and the job takes it from there"
                    } else {
                        ""
                    };
                    return Err(format!(
                        "the state folder {dir} is at checkpoint {at}, but job `{name}` committed checkpoint {recorded} to the catalog: the folder is older than the tables (restored from a backup, another copy, or the job ran on another host since). Resuming from it would apply committed changes again. Use the folder the job last ran with; or, to start over, drop the job's tables (or use a new pipeline.name){shared}"
                    ));
                }
                Ok(())
            };
            self.catalog
                .claim_if(&me, self.lease, accept)
                .await
                .map_err(|e| match e {
                    crate::iceberg::Error::Invalid(m) => SyncError::from(m),
                    e if e.connection_lost() => SyncError::from(e),
                    e => SyncError::fenced(e.to_string()),
                })?;
            self.renewed = Instant::now();
            // This folder holds the job now: a later start is an ordinary restart.
            if self.pulled {
                let _ = std::fs::remove_file(self.state_dir.join(shared::PULLED));
            }
        }
        if self.fresh && self.job.source.kafka().is_none() {
            self.refuse_lost_state().await?;
        }
        let recovered = self.recover().await?;
        // Added columns' defaults a restart left unfilled: before any row.
        self.finish_fills().await?;
        if recovered > 0 {
            tracing::info!(
                "recovered {recovered} table commit(s) of checkpoint {}",
                self.state.checkpoint
            );
        }
        Ok(crate::source::Resume {
            position: self.state.position.clone(),
            snapshot: self.state.snapshot.clone(),
        })
    }

    fn resolutions_waiting(&self) -> bool {
        Engine::resolutions_waiting(self)
    }

    async fn rows(
        &mut self,
        b: crate::source::RowBatch,
        _snapshotting: bool,
    ) -> Result<(), SyncError> {
        self.apply_rows(b, rows::Dedup::ByPosition).await
    }

    async fn message(&mut self, m: crate::source::Message) -> Result<(), SyncError> {
        let part = m.part();
        self.apply_message(m.rows, part, m.next, m.position).await
    }

    async fn replace(
        &mut self,
        table: &Arc<crate::source::decode::SourceTable>,
        at: &Position,
    ) -> Result<(), SyncError> {
        let r = self.job.router.route(&table.db, &table.name);
        let key = (ns_of(&r.db), r.table);
        // A changelog table keeps its history: the snapshot's rows are appended as
        // `snapshot` changes.
        if self.job.changelog(&key.0, &key.1) {
            return Ok(());
        }
        // A table Iceberg does not have yet holds nothing to replace (one load: the
        // sink is kept for the rows that follow).
        if !self.sinks.contains_key(&key) && !self.load_sink(&key).await? {
            return Ok(());
        }
        tracing::info!(
            "{}.{}: read again from its start; its next commit replaces the rows {}.{} held",
            table.db,
            table.name,
            key.0,
            key.1
        );
        self.sink(table, at).await?.pending.replace = true;
        self.active.insert(key);
        Ok(())
    }

    async fn snapshot_rows(
        &mut self,
        table: &Arc<crate::source::decode::SourceTable>,
        rows: RecordBatch,
        position: &Position,
    ) -> Result<(), SyncError> {
        let name = format!("{}.{}", table.db, table.name);
        let routed = self.job.router.route(&table.db, &table.name);
        if rows.num_rows() == 0 {
            // An empty table is mirrored too (readers find it, empty), unless it
            // waits behind a parked DDL.
            if !self
                .parked
                .contains(&(ns_of(&routed.db), routed.table.clone()))
            {
                self.sink(table, position).await?;
            }
            return Ok(());
        }
        if self
            .parked
            .contains(&(ns_of(&routed.db), routed.table.clone()))
        {
            return Err(format!(
                "{name} is parked behind a DDL and cannot be snapshotted: resolve it first (`lakeshift ddl-log`)"
            )
            .into());
        }
        let key = (ns_of(&routed.db), routed.table.clone());
        if let Some(done) = self.snapshotting.replace(key.clone()).filter(|d| *d != key) {
            if self
                .sinks
                .get(&done)
                .is_some_and(|s| s.pending.bytes >= SNAPSHOT_COMMIT_BYTES)
            {
                self.loading = true;
                let r = self.flush_table(&done).await;
                self.loading = false;
                r?;
            }
        }
        let rows = rename_batch(&rows, &routed)?;
        let arrow = self.sink(table, position).await?.arrow.clone();
        let bad = super::rowcheck::iceberg(&rows, &arrow);
        let rows = super::rowcheck::settle_snapshot(
            self.job.pipeline.row_error_policy,
            &self.dead_letter,
            &name,
            position,
            rows,
            &bad,
        )?;
        if rows.num_rows() == 0 {
            return Ok(());
        }
        let s = self.sink(table, position).await?;
        let mut converted = to_iceberg(&name, &rows, &s.arrow)?;
        if s.changelog {
            converted = snapshot_changelog_columns(converted, position)?;
        }
        let n = converted.num_rows() as u64;
        // Rows replacing the table need not delete older versions of their keys.
        let upsert = s.had_rows && !s.pending.replace;
        let had = s.pending.bytes;
        if upsert {
            let keep = vec![true; converted.num_rows()];
            s.pending.fold(
                &s.key,
                s.keyed,
                Op::Insert,
                true,
                None,
                Some(converted),
                &keep,
                position.clone(),
            );
        } else {
            s.pending
                .fold_snapshot(&s.key, s.keyed, converted, position.clone());
        }
        let grew = s.pending.bytes.saturating_sub(had);
        self.rows += n;
        self.folded((ns_of(&routed.db), routed.table.clone()), grew);
        Ok(())
    }

    async fn schema(&mut self, d: super::pipeline::Ddl<'_>) -> Result<(), SyncError> {
        self.ddl(d.position, d.changes, d.after, d.sql).await
    }

    fn skipped(
        &mut self,
        position: &Position,
        sql: &str,
        tables: Vec<String>,
        why: Option<String>,
    ) -> Result<(), SyncError> {
        let touched: Vec<(String, String)> = tables.iter().map(|t| table_key(t)).collect();
        self.ddl_logged(position, sql, &touched, Vec::new(), Status::Skipped, why)
    }

    async fn checkpoint(
        &mut self,
        at: Option<Position>,
        snapshot: Option<SnapshotResume>,
    ) -> Result<(), SyncError> {
        Engine::checkpoint(self, at, snapshot).await
    }

    async fn keep_alive(&mut self) -> Result<(), SyncError> {
        if self.renewed.elapsed() >= self.lease / 3 {
            // A lost catalog connection is transient (the job starts again from its
            // last checkpoint); any other failure means another run holds the job.
            self.catalog.renew(self.lease).await.map_err(|e| {
                if e.connection_lost() {
                    SyncError::from(e)
                } else {
                    SyncError::fenced(e.to_string())
                }
            })?;
            self.renewed = Instant::now();
        }
        Ok(())
    }

    async fn stopped(&mut self) -> Result<(), SyncError> {
        self.catalog.register_deferred().await?;
        self.store_indexes()?;
        Ok(self.catalog.release().await?)
    }

    fn has_pending(&self) -> bool {
        self.sinks.values().any(|s| !s.pending.is_empty()) || !self.held.is_empty()
    }

    fn over_budget(&self) -> bool {
        self.largest_over_budget().is_some()
    }

    fn near_budget(&self) -> bool {
        self.pending_bytes >= self.pending_limit() / 2
    }

    /// The table with the most pending changes commits them now (its watermark keeps
    /// a re-read exact).
    async fn relieve(
        &mut self,
        _read_to: Option<Position>,
        snapshotting: bool,
    ) -> Result<(), SyncError> {
        self.loading = snapshotting;
        let r = self.within_budget().await;
        self.loading = false;
        r
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

    fn status(&self) -> super::pipeline::SinkStatus {
        super::pipeline::SinkStatus {
            rows: self.rows,
            commits: self.commits,
            ddls: self.ddl_stalls.len() as u64,
            checkpoint: self.state.checkpoint,
            partitions: self
                .floors
                .keys()
                .map(|(_, p)| p)
                .collect::<BTreeSet<_>>()
                .len(),
        }
    }

    fn position(&self) -> Option<Position> {
        self.state.position.clone()
    }
}
