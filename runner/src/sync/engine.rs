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

use super::convert::{key_bytes, to_iceberg};
use super::ddllog::{DdlLog, Entry, Status};
use super::error::SyncError;
use super::fold::Pending;
use super::held::{HeldBatch, HeldItem, HeldStore, KafkaAt};
use super::job::SyncJob;
use super::route::rename_batch;
use crate::iceberg::catalog::{display, ident};
use crate::iceberg::commit::{Change, SnapshotChange};
use crate::iceberg::{convert as iconv, files, Catalog, CatalogConfig, Committer, LoadedTable};
use crate::source::position::Position;
use crate::source::snapshot::SnapshotResume;
use crate::source::Op;
use arrow_array::{RecordBatch, UInt32Array};
use arrow_schema::SchemaRef;
use dialects::iceberg::IcebergPlanner;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

pub const JOB: &str = "lakeshift.job";
pub const CHECKPOINT: &str = "lakeshift.checkpoint-id";
pub const WATERMARK: &str = "lakeshift.watermark";
pub const SCHEMA_POSITION: &str = "lakeshift.schema-position";

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
}

impl State {
    fn path(dir: &Path) -> PathBuf {
        dir.join("checkpoint.json")
    }

    pub fn load(dir: &Path) -> Result<Option<State>, String> {
        match std::fs::read(Self::path(dir)) {
            Ok(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| format!("{}: {e}", Self::path(dir).display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", Self::path(dir).display())),
        }
    }

    /// Write, fsync the file, rename over the old state, fsync the folder.
    fn store(&self, dir: &Path) -> Result<(), String> {
        let fin = Self::path(dir);
        let bytes = serde_json::to_vec_pretty(self).expect("serialises");
        crate::durable::replace_observed(&fin, &bytes, |step| match step {
            crate::durable::Step::BeforeRename => failpoint("state-before-rename"),
            crate::durable::Step::BeforeDirFsync => failpoint("state-before-dir-fsync"),
        })
        .map_err(|e| format!("writing {}: {e}", fin.display()))
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
}

pub struct Engine {
    job: SyncJob,
    catalog: Catalog,
    planner: IcebergPlanner,
    state_dir: PathBuf,
    state: State,
    sinks: HashMap<(String, String), Sink>,
    last_checkpoint: Instant,
    pub rows: u64,
    pub commits: u64,
    /// (DDL position, tables, ms the barrier and schema change took).
    pub ddl_stalls: Vec<(String, usize, f64)>,
    /// Kafka: each partition's next offset as its table holds it (None: not yet).
    floors: HashMap<String, Option<i64>>,
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
    pub async fn open(job: SyncJob) -> Result<Engine, String> {
        let catalog = Catalog::open(&CatalogConfig {
            name: job.sink.catalog_name.clone(),
            warehouse: job.sink.warehouse.clone(),
            uri: job.sink.catalog.clone(),
        })
        .await
        .map_err(|e| e.to_string())?;
        let state_dir = job.pipeline.state.clone();
        std::fs::create_dir_all(state_dir.join("pending"))
            .map_err(|e| format!("state folder {}: {e}", state_dir.display()))?;
        let state = State::load(&state_dir)?.unwrap_or(State {
            job: job.pipeline.name.clone(),
            ..Default::default()
        });
        let planner = IcebergPlanner::new(job.iceberg_options());
        // Held changes of checkpoints the state never reached come again from the
        // source; parked tables are those of parked DDL (and DDL queued behind it).
        let held_store = HeldStore::new(&state_dir);
        held_store.discard_after(state.checkpoint)?;
        let parked = DdlLog::load(&state_dir)?
            .parked_tables()
            .iter()
            .map(|t| table_key(t))
            .collect();
        let mut held_offsets: HashMap<String, i64> = HashMap::new();
        for t in held_store.tables() {
            for item in held_store.load(&t)? {
                if let HeldItem::Rows { kafka: Some(k), .. } = item {
                    let e = held_offsets.entry(k.part).or_insert(k.next);
                    *e = (*e).max(k.next);
                }
            }
        }
        let dead_letter = job
            .pipeline
            .dead_letter
            .clone()
            .unwrap_or_else(|| state_dir.join("dead-letter.jsonl"));
        Ok(Engine {
            job,
            catalog,
            planner,
            state_dir,
            state,
            sinks: HashMap::new(),
            last_checkpoint: Instant::now(),
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
        })
    }

    /// Keep a change of a parked table (written with the next checkpoint).
    fn hold(&mut self, key: (String, String), item: HeldItem) {
        self.held.entry(key).or_default().push(item);
    }

    /// Whether a person asked to release parked DDL (`ddl-log --resolve`).
    fn resolutions_waiting(&self) -> bool {
        !self.parked.is_empty() && !DdlLog::resolutions_in(&self.state_dir).is_empty()
    }

    fn summary(&self, checkpoint: u64, watermark: &Option<Position>) -> BTreeMap<String, String> {
        let mut m = BTreeMap::from([
            (JOB.to_owned(), self.job.pipeline.name.clone()),
            (CHECKPOINT.to_owned(), checkpoint.to_string()),
        ]);
        if let Some(w) = watermark {
            m.insert(WATERMARK.to_owned(), w.to_string());
        }
        m
    }

    /// The newest of this job's snapshots of a table: (checkpoint id, watermark).
    fn committed(&self, t: &LoadedTable) -> (Option<u64>, Option<Position>) {
        let mut best: Option<(i64, u64, Option<Position>)> = None;
        for s in t.metadata.snapshots() {
            let p = &s.summary().additional_properties;
            if p.get(JOB).is_none_or(|j| *j != self.job.pipeline.name) {
                continue;
            }
            let ck = p.get(CHECKPOINT).and_then(|v| v.parse().ok()).unwrap_or(0);
            let wm = p.get(WATERMARK).and_then(|v| v.parse().ok());
            if best.as_ref().is_none_or(|b| s.sequence_number() > b.0) {
                best = Some((s.sequence_number(), ck, wm));
            }
        }
        match best {
            Some((_, c, w)) => (Some(c), w),
            None => (None, None),
        }
    }

    /// Commit one table's files of checkpoint `n`, with the commit id that recovery
    /// uses too (so a commit whose reply was lost is found, not repeated).
    async fn commit_checkpoint(
        &self,
        id: &iceberg::TableIdent,
        n: u64,
        name: &str,
        data: Vec<iceberg::spec::DataFile>,
        deletes: Vec<iceberg::spec::DataFile>,
        wm: &Option<Position>,
    ) -> crate::iceberg::Result<crate::iceberg::commit::Committed> {
        let kafka = self.state.kafka.get(name).cloned();
        Committer::new(&self.catalog)
            .commit(
                id,
                &format!("{}:{n}:{name}", self.job.pipeline.name),
                &Change::Snapshot(SnapshotChange {
                    data_files: data,
                    delete_files: deletes,
                    summary: self.summary(n, wm),
                    kafka,
                    ..Default::default()
                }),
            )
            .await
    }

    /// Kafka: the offsets a table's pending changes move (what it held before, from
    /// the floors read when each partition was first seen).
    fn kafka_commit(&self, sink: &Sink) -> Option<crate::iceberg::commit::KafkaCommit> {
        if sink.pending.offsets.is_empty() {
            return None;
        }
        Some(crate::iceberg::commit::KafkaCommit {
            expect: sink
                .pending
                .offsets
                .keys()
                .map(|k| (k.clone(), self.floors.get(k).copied().flatten()))
                .collect(),
            next: sink.pending.offsets.clone(),
        })
    }

    /// Commit what the state's checkpoint lists and a table lacks (after a crash).
    pub async fn recover(&mut self) -> Result<usize, String> {
        let n = self.state.checkpoint;
        let mut done = 0;
        for (name, (avro, wm)) in self.state.pending.clone() {
            let (ns, t) = name.rsplit_once('.').ok_or("bad table name in state")?;
            let id = ident(ns, t).map_err(|e| e.to_string())?;
            let Some(table) = self
                .catalog
                .load(&id)
                .await
                .map_err(|e| format!("loading table {name}: {e}"))?
            else {
                continue; // dropped since
            };
            let (ck, _) = self.committed(&table);
            if ck.is_some_and(|c| c >= n) {
                continue;
            }
            let files = read_files(&self.state_dir.join(&avro), &table)?;
            let (data, deletes): (Vec<_>, Vec<_>) = files
                .into_iter()
                .partition(|f| f.content_type() == iceberg::spec::DataContentType::Data);
            self.commit_checkpoint(&id, n, &name, data, deletes, &wm)
                .await
                .map_err(|e| format!("recovering checkpoint {n} of {name}: {e}"))?;
            done += 1;
        }
        Ok(done)
    }

    /// The sink of a table, creating the Iceberg table on first sight.
    async fn sink(
        &mut self,
        t: &crate::source::decode::SourceTable,
        at: &Position,
    ) -> Result<&mut Sink, String> {
        let routed = self.job.router.route(&t.db, &t.name);
        let key = (ns_of(&routed.db), routed.table.clone());
        if !self.sinks.contains_key(&key) {
            let id = ident(&key.0, &key.1).map_err(|e| e.to_string())?;
            let table = match self
                .catalog
                .load(&id)
                .await
                .map_err(|e| format!("loading table {}: {e}", display(&id)))?
            {
                Some(tb) => tb,
                None => {
                    for a in super::fk::referential_actions(&t.ir) {
                        tracing::warn!("foreign key {a}: the source does not log the rows this action changes, so the Iceberg table will keep them");
                    }
                    let mut diags = ddl_core::Diagnostics::default();
                    let mut ir = (*t.ir).clone();
                    ir.name = ddl_core::TableName::new(Some(&t.db), &t.name);
                    let mut ir = self.job.router.table(&ir);
                    ir.name = ddl_core::TableName::new(Some(&key.0), &key.1);
                    if self.job.changelog(&key.0, &key.1) {
                        // Append-only: no key; each change is a row with its kind,
                        // position and source time.
                        ir.primary_key = None;
                        for c in &mut ir.columns {
                            c.nullable = true;
                        }
                        for (name, dt) in [
                            (
                                "_op",
                                ddl_core::DataType::Varchar {
                                    length: Some(16),
                                    unit: Default::default(),
                                    national: false,
                                },
                            ),
                            (
                                "_source_pos",
                                ddl_core::DataType::Varchar {
                                    length: Some(200),
                                    unit: Default::default(),
                                    national: false,
                                },
                            ),
                            (
                                "_source_ts",
                                ddl_core::DataType::Timestamp {
                                    precision: 0,
                                    tz: ddl_core::TimeZone::Instant,
                                },
                            ),
                        ] {
                            ir.columns.push(ddl_core::Column::new(name, dt));
                        }
                    }
                    let mut cat = ddl_core::Catalog::new(dialects::Dialect::MySql.name_rules());
                    let create = ddl_core::SchemaChange::CreateTable {
                        table: ir,
                        if_not_exists: false,
                    };
                    cat.apply(&create).map_err(|e| e.to_string())?;
                    self.planner.tables.remove(&key);
                    let mut plan = self
                        .planner
                        .plan(&[create], &cat, &mut diags)
                        .map_err(|e| e.to_string())?;
                    for d in diags.0 {
                        tracing::info!("{}: table {}.{}: {}", d.severity, key.0, key.1, d.message);
                    }
                    mark_schema_position(&mut plan, at);
                    let mut known = BTreeMap::new();
                    let done = crate::iceberg::plan::execute(
                        &Committer::new(&self.catalog),
                        &plan,
                        &mut known,
                    )
                    .await?;
                    for a in done {
                        tracing::info!("create: {a}");
                    }
                    self.catalog
                        .load_required(&id)
                        .await
                        .map_err(|e| e.to_string())?
                }
            };
            let sink = self.make_sink(id, table)?;
            self.sinks.insert(key.clone(), sink);
        }
        Ok(self.sinks.get_mut(&key).expect("inserted"))
    }

    /// The sink of an existing Iceberg table, loaded afresh. False: no such table.
    async fn load_sink(&mut self, k: &(String, String)) -> Result<bool, String> {
        let id = ident(&k.0, &k.1).map_err(|e| e.to_string())?;
        let Some(t) = self
            .catalog
            .load(&id)
            .await
            .map_err(|e| format!("loading table {}: {e}", display(&id)))?
        else {
            return Ok(false);
        };
        let s = self.make_sink(id, t)?;
        self.sinks.insert(k.clone(), s);
        Ok(true)
    }

    fn make_sink(&mut self, id: iceberg::TableIdent, table: LoadedTable) -> Result<Sink, String> {
        let ice = iconv::ice_table(&id.namespace().join("."), id.name(), &table.metadata)
            .map_err(|e| e.to_string())?;
        self.planner
            .tables
            .insert((ice.namespace.clone(), ice.name.clone()), ice.clone());
        self.planner.namespaces.insert(ice.namespace.clone());
        let arrow = files::arrow_schema(&table).map_err(|e| e.to_string())?;
        // The key: identifier fields, else the job's key override, else full rows.
        let over = self
            .job
            .source
            .config
            .key_overrides
            .get(&format!("{}.{}", ice.namespace, ice.name))
            .and_then(|cols| {
                cols.iter()
                    .map(|c| {
                        ice.fields
                            .iter()
                            .position(|f| f.name.eq_ignore_ascii_case(c))
                            .map(|i| (i, ice.fields[i].id))
                    })
                    .collect::<Option<Vec<_>>>()
            });
        let (keyed, (key, key_ids)): (bool, (Vec<usize>, Vec<i32>)) =
            if !ice.identifier_field_ids.is_empty() {
                (
                    true,
                    ice.identifier_field_ids
                        .iter()
                        .map(|id| (ice.fields.iter().position(|f| f.id == *id).unwrap(), *id))
                        .unzip(),
                )
            } else if let Some(o) = over {
                (true, o.into_iter().unzip())
            } else {
                // Full-row deletes: every column Iceberg allows in an equality delete.
                (
                    false,
                    ice.fields
                        .iter()
                        .enumerate()
                        .filter(|(_, f)| {
                            !matches!(
                                f.ty,
                                dialects::iceberg::IceType::Float
                                    | dialects::iceberg::IceType::Double
                            )
                        })
                        .map(|(i, f)| (i, f.id))
                        .unzip(),
                )
            };
        let changelog = self.job.changelog(&ice.namespace, &ice.name);
        let names: Vec<&str> = key.iter().map(|i| ice.fields[*i].name.as_str()).collect();
        tracing::info!(
            "table {}.{}: {}",
            ice.namespace,
            ice.name,
            if changelog {
                "changelog: every change appended with _op, _source_pos, _source_ts".to_owned()
            } else if keyed {
                format!("upserts on key ({})", names.join(", "))
            } else {
                "no key: updates and deletes are full-row equality deletes (identical duplicate rows are removed together)".to_owned()
            }
        );
        let (_, watermark) = self.committed(&table);
        let had_rows = ice.has_rows;
        Ok(Sink {
            ident: id,
            table,
            arrow,
            key,
            key_ids,
            keyed: keyed && !changelog,
            changelog,
            had_rows,
            watermark,
            pending: Pending::new(),
        })
    }

    /// Write a table's pending changes as files. Returns (data, deletes).
    async fn write_pending(
        &self,
        sink: &Sink,
    ) -> Result<(Vec<iceberg::spec::DataFile>, Vec<iceberg::spec::DataFile>), String> {
        let p = &sink.pending;
        let take = |rows: &[(u32, u32)]| -> Result<Vec<RecordBatch>, String> {
            let mut by_batch: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
            for (b, r) in rows {
                by_batch.entry(*b).or_default().push(*r);
            }
            by_batch
                .into_iter()
                .map(|(b, idx)| {
                    let batch = &p.batches[b as usize];
                    let idx = UInt32Array::from(idx);
                    let cols = batch
                        .columns()
                        .iter()
                        .map(|c| arrow_select::take::take(c, &idx, None))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(|e| e.to_string())?;
                    RecordBatch::try_new(batch.schema(), cols).map_err(|e| e.to_string())
                })
                .collect()
        };
        let mut live: Vec<(u32, u32)> = if sink.keyed {
            p.live.values().filter_map(|v| *v).collect()
        } else {
            p.appended.values().flatten().copied().collect()
        };
        live.sort();
        let mut del = p.deletes.clone();
        del.sort();
        del.dedup();
        // Writer shards: rows split by key hash, each shard's files written by its
        // own task (`pipeline.writer-shards`, default 1).
        let shards = self.job.pipeline.writer_shards.max(1) as usize;
        let shard_of = |rows: &[(u32, u32)]| -> Vec<Vec<(u32, u32)>> {
            let mut out = vec![Vec::new(); shards];
            let mut kb = Vec::new();
            for &(b, r) in rows {
                let i = if shards == 1 {
                    0
                } else {
                    key_bytes(&p.batches[b as usize], &sink.key, r as usize, &mut kb);
                    (ddl_core::names::fnv1a(&kb) % shards as u64) as usize
                };
                out[i].push((b, r));
            }
            out
        };
        let mut tasks = Vec::new();
        for (live, del) in shard_of(&live).into_iter().zip(shard_of(&del)) {
            let data_batches = take(&live)?;
            let del_batches = take(&del)?;
            let table = sink.table.clone();
            let io = self.catalog.file_io.clone();
            let key_ids = sink.key_ids.clone();
            tasks.push(tokio::spawn(async move {
                let data = if data_batches.is_empty() {
                    Vec::new()
                } else {
                    files::write_data(&table, &io, &data_batches)
                        .await
                        .map_err(|e| e.to_string())?
                };
                let deletes = if del_batches.is_empty() {
                    Vec::new()
                } else {
                    files::write_equality_deletes(&table, &io, &key_ids, &del_batches)
                        .await
                        .map_err(|e| e.to_string())?
                };
                Ok::<_, String>((data, deletes))
            }));
        }
        let (mut data, mut deletes) = (Vec::new(), Vec::new());
        for t in tasks {
            let (d, x) = t.await.map_err(|e| e.to_string())??;
            data.extend(d);
            deletes.extend(x);
        }
        Ok((data, deletes))
    }

    /// Commit one table's pending changes now (DDL barrier, memory pressure), tagged
    /// with the last completed checkpoint and the table's watermark.
    async fn flush_table(&mut self, key: &(String, String)) -> Result<(), String> {
        let Some(sink) = self.sinks.get(key) else {
            return Ok(());
        };
        if sink.pending.is_empty() {
            return Ok(());
        }
        let (data, deletes) = self.write_pending(sink).await?;
        let wm = sink.pending.watermark.clone();
        let summary = self.summary(self.state.checkpoint, &wm);
        let id = sink.ident.clone();
        let kafka = self.kafka_commit(sink);
        let done = Committer::new(&self.catalog)
            .commit(
                &id,
                &uuid::Uuid::new_v4().to_string(),
                &Change::Snapshot(SnapshotChange {
                    data_files: data,
                    delete_files: deletes,
                    summary,
                    kafka,
                    ..Default::default()
                }),
            )
            .await
            .map_err(|e| format!("commit of {}: {e}", display(&id)))?;
        self.committed_pending(key, done.table, wm);
        Ok(())
    }

    /// A table's pending changes landed: its new state and watermark, nothing pending.
    fn committed_pending(
        &mut self,
        key: &(String, String),
        table: LoadedTable,
        wm: Option<Position>,
    ) {
        self.commits += 1;
        let sink = self.sinks.get_mut(key).expect("present");
        sink.table = table;
        sink.watermark = wm;
        let done = std::mem::replace(&mut sink.pending, Pending::new()).offsets;
        for (part, o) in done {
            if let Some((t, p)) = part.rsplit_once('/') {
                self.acks.push((t.to_owned(), p.parse().unwrap_or(0), o));
            }
            self.floors.insert(part, Some(o));
        }
    }

    /// A checkpoint at a transaction boundary: files, durable state, commits.
    pub async fn checkpoint(
        &mut self,
        position: Option<Position>,
        snapshot: Option<SnapshotResume>,
    ) -> Result<(), String> {
        let n = self.state.checkpoint + 1;
        let t0 = Instant::now();
        // Parked DDL a person resolved: the held changes join this checkpoint.
        let released = if self.parked.is_empty() {
            Vec::new()
        } else {
            self.releases().await?
        };
        let mut pending = BTreeMap::new();
        let mut kafka = BTreeMap::new();
        let mut staged = Vec::new();
        let keys: Vec<(String, String)> = self.sinks.keys().cloned().collect();
        for key in keys {
            let sink = &self.sinks[&key];
            if sink.pending.is_empty() {
                continue;
            }
            let (data, deletes) = self.write_pending(sink).await?;
            let name = format!("{}.{}", key.0, key.1);
            let rel = format!("pending/{n}-{name}.avro");
            write_files(
                &self.state_dir.join(&rel),
                &sink.table,
                data.iter().chain(&deletes),
            )?;
            pending.insert(name.clone(), (rel, sink.pending.watermark.clone()));
            if let Some(k) = self.kafka_commit(sink) {
                kafka.insert(name.clone(), k);
            }
            staged.push((key, data, deletes));
        }
        // Changes of parked tables, durably before the state that moves past them.
        for (k, items) in std::mem::take(&mut self.held) {
            if !items.is_empty() {
                self.held_store
                    .write(&format!("{}.{}", k.0, k.1), n, &items)?;
            }
        }
        let state = State {
            job: self.job.pipeline.name.clone(),
            checkpoint: n,
            position: position.or(self.state.position.clone()),
            snapshot,
            pending,
            kafka,
        };
        state.store(&self.state_dir)?;
        self.state = state;
        for (i, (key, data, deletes)) in staged.into_iter().enumerate() {
            if i == 1 {
                failpoint("between-table-commits");
            }
            let name = format!("{}.{}", key.0, key.1);
            let sink = &self.sinks[&key];
            let wm = sink.pending.watermark.clone();
            let id = sink.ident.clone();
            let done = self
                .commit_checkpoint(&id, n, &name, data, deletes, &wm)
                .await
                .map_err(|e| format!("checkpoint {n}: commit of {name}: {e}"))?;
            self.committed_pending(&key, done.table, wm);
        }
        if !released.is_empty() {
            failpoint("before-release-recorded");
        }
        for (seq, tables) in released {
            self.released(seq, &tables, n)?;
        }
        // Files of older checkpoints are no longer needed for recovery.
        if let Ok(rd) = std::fs::read_dir(self.state_dir.join("pending")) {
            for e in rd.flatten() {
                let keep = e
                    .file_name()
                    .to_string_lossy()
                    .starts_with(&format!("{n}-"));
                if !keep {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        self.last_checkpoint = Instant::now();
        tracing::debug!(
            "checkpoint {n} in {:.1} ms",
            t0.elapsed().as_secs_f64() * 1e3
        );
        Ok(())
    }

    /// Parked DDL a person resolved: each one's held changes (and those of DDL queued
    /// behind it on the same tables) are replayed, in source order, into the current
    /// checkpoint. Returns (entry number, tables released) for [`Self::released`].
    async fn releases(&mut self) -> Result<Vec<(u64, Vec<(String, String)>)>, String> {
        let mut out = Vec::new();
        for (seq, retry) in DdlLog::resolutions_in(&self.state_dir) {
            let log = DdlLog::load(&self.state_dir)?;
            let Some(i) = log.entries.iter().position(|e| e.seq == seq) else {
                log.clear_resolution(seq);
                continue;
            };
            if log.entries[i].status != Status::Parked {
                log.clear_resolution(seq);
                continue;
            }
            let mut tables: BTreeSet<String> = log.entries[i].tables.iter().cloned().collect();
            loop {
                let before = tables.len();
                for e in &log.entries[i + 1..] {
                    if e.status == Status::Held && e.tables.iter().any(|t| tables.contains(t)) {
                        tables.extend(e.tables.iter().cloned());
                    }
                }
                if tables.len() == before {
                    break;
                }
            }
            let keys: Vec<(String, String)> = tables.iter().map(|t| table_key(t)).collect();
            let mut streams = Vec::new();
            for (t, k) in tables.iter().zip(&keys) {
                let mut s = self.held_store.load(t)?;
                s.extend(self.held.remove(k).unwrap_or_default());
                streams.push(s);
                self.parked.remove(k);
            }
            let items = super::held::merge(streams);
            let parked_at = log.entries[i].position.clone();
            tracing::info!(
                "DDL #{seq} released{}: replaying {} held change(s) of {}",
                if retry { " (retrying it first)" } else { "" },
                items.len(),
                tables.iter().cloned().collect::<Vec<_>>().join(", ")
            );
            for item in items {
                self.replay(item, &parked_at, retry).await?;
            }
            out.push((seq, keys));
        }
        Ok(out)
    }

    /// One held change through the normal path (which recognises what landed before).
    async fn replay(&mut self, item: HeldItem, parked_at: &str, retry: bool) -> Result<(), String> {
        let overrides = self.job.source.config.key_overrides.clone();
        let over = |b: &HeldBatch| {
            overrides
                .get(&format!("{}.{}", b.db, b.table.name.name))
                .cloned()
        };
        match item {
            HeldItem::Ddl { position, .. } if position.to_string() == parked_at && !retry => Ok(()),
            HeldItem::Ddl {
                position,
                sql,
                changes,
                after,
            } => self.ddl(&position, &changes, &after, &sql).await,
            HeldItem::Rows {
                batches,
                kafka: None,
            } => {
                for b in batches {
                    let o = over(&b);
                    self.apply_rows(b.batch(o.as_deref())?).await?;
                }
                Ok(())
            }
            HeldItem::Rows {
                batches,
                kafka: Some(k),
            } => {
                let rows = batches
                    .iter()
                    .map(|b| b.batch(over(b).as_deref()))
                    .collect::<Result<Vec<_>, _>>()?;
                let Some(at) = rows.first().map(|r| r.position_after(0)) else {
                    return Ok(());
                };
                self.apply_message(rows, k.part, k.next, at).await
            }
        }
    }

    /// A release committed in checkpoint `n`: the entry is resolved (unless its retry
    /// was refused again), the held files it replayed are gone.
    fn released(&mut self, seq: u64, tables: &[(String, String)], n: u64) -> Result<(), String> {
        let mut log = DdlLog::load(&self.state_dir)?;
        if let Some(i) = log.entries.iter().position(|e| e.seq == seq) {
            if self.reparked.remove(&log.entries[i].position) {
                tracing::warn!("DDL #{seq} was refused again; its tables stay parked");
            } else {
                log.set(i, Status::Resolved, None)?;
            }
        }
        for (a, b) in tables {
            self.held_store.drop_before(&format!("{a}.{b}"), n)?;
        }
        log.clear_resolution(seq);
        Ok(())
    }

    /// The table with the most pending bytes, when all of them pass the budget.
    fn largest_over_budget(&self) -> Option<(String, String)> {
        let budget = self.job.pipeline.memory_budget_mib as usize * 1024 * 1024;
        let total: usize = self.sinks.values().map(|s| s.pending.bytes).sum();
        if total < budget {
            return None;
        }
        self.sinks
            .iter()
            .max_by_key(|(_, s)| s.pending.bytes)
            .map(|(k, _)| k.clone())
    }

    /// Apply a DDL: barrier-commit the tables it touches, then change Iceberg.
    async fn ddl(
        &mut self,
        position: &Position,
        changes: &[ddl_core::SchemaChange],
        after: &[ddl_core::Table],
        sql: &str,
    ) -> Result<(), String> {
        // Settled before (a source that delivers its DDL again: a restart before the
        // state moved past it, or Kafka's schema topic, read whole at every start)?
        let log = DdlLog::load(&self.state_dir)?;
        if let Some(e) = log.find(&position.to_string()).map(|i| &log.entries[i]) {
            if matches!(
                e.status,
                Status::Executed | Status::Skipped | Status::Resolved
            ) {
                tracing::debug!(
                    "DDL #{} at {position} was {} before; not repeated",
                    e.seq,
                    e.status
                );
                return Ok(());
            }
        }
        let item = HeldItem::Ddl {
            position: position.clone(),
            sql: sql.to_owned(),
            changes: changes.to_vec(),
            after: after.to_vec(),
        };
        let changes: &[ddl_core::SchemaChange] = &changes
            .iter()
            .map(|c| self.job.router.change(c))
            .collect::<Vec<_>>();
        let after: &[ddl_core::Table] = &after
            .iter()
            .map(|t| self.job.router.table(t))
            .collect::<Vec<_>>();
        let touched: Vec<(String, String)> = changes
            .iter()
            .flat_map(|c| {
                let mut v: Vec<&ddl_core::TableName> = c.table().into_iter().collect();
                if let ddl_core::SchemaChange::RenameTable { to, .. } = c {
                    v.push(to);
                }
                v.into_iter()
                    .map(|t| {
                        (
                            ns_of(t.schema.as_deref().unwrap_or_default()),
                            t.name.clone(),
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        // A DDL on a parked table waits behind the parked one (its other tables too).
        if touched.iter().any(|k| self.parked.contains(k)) {
            for k in &touched {
                self.parked.insert(k.clone());
                self.hold(k.clone(), item.clone());
            }
            tracing::warn!("DDL at {position} held: its table is parked behind an earlier DDL\n  statement: {sql}");
            return self.ddl_logged(
                position,
                sql,
                &touched,
                Vec::new(),
                Status::Held,
                Some("its table is parked behind an earlier DDL".into()),
            );
        }
        let t0 = Instant::now();
        for k in &touched {
            self.flush_table(k).await?;
            // Make sure the planner knows the table as Iceberg has it.
            if !self.sinks.contains_key(k) {
                self.load_sink(k).await?;
            }
        }
        failpoint("inside-ddl-barrier");
        // Already applied (replay after a restart)?
        for k in &touched {
            if let Some(s) = self.sinks.get(k) {
                let applied = s
                    .table
                    .metadata
                    .properties()
                    .get(SCHEMA_POSITION)
                    .and_then(|p| p.parse::<Position>().ok());
                if applied.is_some_and(|a| a >= *position) {
                    return self.ddl_logged(
                        position,
                        sql,
                        &touched,
                        Vec::new(),
                        Status::Executed,
                        Some("applied before a restart".into()),
                    );
                }
            }
        }
        let mut cat = ddl_core::Catalog::new(dialects::Dialect::MySql.name_rules());
        for t in after {
            cat.apply(&ddl_core::SchemaChange::CreateTable {
                table: t.clone(),
                if_not_exists: false,
            })
            .map_err(|e| e.to_string())?;
        }
        let mut diags = ddl_core::Diagnostics::default();
        let mut plan = match self.planner.plan(changes, &cat, &mut diags) {
            Ok(p) => p,
            Err(e) if is_replay(&e.0) => {
                tracing::info!("DDL at {position} already applied ({e}); skipped");
                let why = format!("the Iceberg table already has it: {e}");
                return self.ddl_logged(
                    position,
                    sql,
                    &touched,
                    Vec::new(),
                    Status::Skipped,
                    Some(why),
                );
            }
            Err(e) => {
                let reason = format!("cannot apply it to Iceberg: {e}");
                return self.ddl_refused(position, sql, &touched, reason, item);
            }
        };
        for d in diags.0 {
            tracing::info!("{}: DDL at {position}: {}", d.severity, d.message);
        }
        mark_schema_position(&mut plan, position);
        let mut known = BTreeMap::new();
        for k in &touched {
            if let Some(s) = self.sinks.get(k) {
                known.insert(
                    k.clone(),
                    (
                        s.table.metadata.current_schema_id(),
                        s.table.metadata.last_column_id(),
                    ),
                );
            }
        }
        let done = crate::iceberg::plan::execute(&Committer::new(&self.catalog), &plan, &mut known)
            .await?;
        for a in done {
            tracing::info!("{position}: {a}");
        }
        self.commits += 1;
        // Reload the touched tables' sinks (schema, renames, drops).
        for k in &touched {
            if let Some(old) = self.sinks.remove(k) {
                debug_assert!(old.pending.is_empty());
            }
            if !self.load_sink(k).await? {
                self.planner.tables.remove(k);
            }
        }
        self.ddl_logged(
            position,
            sql,
            &touched,
            vec![serde_json::to_string(&plan.actions).unwrap_or_default()],
            Status::Executed,
            None,
        )?;
        let ms = t0.elapsed().as_secs_f64() * 1000.0;
        self.ddl_stalls
            .push((position.to_string(), touched.len(), ms));
        tracing::info!(
            "DDL at {position} applied; {} table(s) paused {ms:.0} ms",
            touched.len()
        );
        Ok(())
    }

    /// Record a DDL in the DDL log, once per position. An entry still open (held
    /// behind a parked DDL, parked and now retried, failed before) takes the outcome.
    fn ddl_logged(
        &mut self,
        position: &Position,
        sql: &str,
        touched: &[(String, String)],
        target_sql: Vec<String>,
        status: Status,
        reason: Option<String>,
    ) -> Result<(), String> {
        let mut log = DdlLog::load(&self.state_dir)?;
        if let Some(i) = log.find(&position.to_string()) {
            // Held is a first record only (a parked DDL read again stays parked).
            let open = status != Status::Held
                && matches!(
                    log.entries[i].status,
                    Status::Held | Status::Parked | Status::Pending | Status::Failed
                );
            if open && log.entries[i].status != status {
                if !target_sql.is_empty() {
                    log.entries[i].target_sql = target_sql;
                }
                log.set(i, status, reason)?;
            }
            return Ok(());
        }
        let mut e = Entry::new(
            position.to_string(),
            sql,
            touched.iter().map(|(a, b)| format!("{a}.{b}")).collect(),
            status,
            reason,
        );
        e.target_sql = target_sql;
        log.add(e).map(|_| ())
    }

    /// A DDL Iceberg cannot take: the job's `ddl-error-policy`.
    fn ddl_refused(
        &mut self,
        position: &Position,
        sql: &str,
        touched: &[(String, String)],
        reason: String,
        item: HeldItem,
    ) -> Result<(), String> {
        use super::job::DdlErrorPolicy;
        match self.job.pipeline.ddl_error_policy {
            DdlErrorPolicy::Park => {
                let at = position.to_string();
                let mut log = DdlLog::load(&self.state_dir)?;
                let i = match log.find(&at) {
                    Some(i) => {
                        if log.entries[i].status == Status::Parked {
                            // A retry during a release, refused again.
                            self.reparked.insert(at.clone());
                        }
                        log.set(i, Status::Parked, Some(reason.clone()))?;
                        i
                    }
                    None => log.add(Entry::new(
                        at.clone(),
                        sql,
                        touched.iter().map(|(a, b)| format!("{a}.{b}")).collect(),
                        Status::Parked,
                        Some(reason.clone()),
                    ))?,
                };
                DdlLog::dead_letter(&self.dead_letter, &log.entries[i])?;
                for k in touched {
                    self.parked.insert(k.clone());
                    self.hold(k.clone(), item.clone());
                }
                let e = &log.entries[i];
                tracing::warn!(
                    "DDL #{} at {position} parked (ddl-error-policy: park): {reason}; {} held until `lakeshift ddl-log --resolve {}`\n  statement: {sql}",
                    e.seq,
                    e.tables.join(", "),
                    e.seq
                );
                Ok(())
            }
            DdlErrorPolicy::Skip => {
                tracing::warn!("DDL at {position} skipped (ddl-error-policy: skip): {reason}\n  statement: {sql}");
                self.ddl_logged(
                    position,
                    sql,
                    touched,
                    Vec::new(),
                    Status::Skipped,
                    Some(reason),
                )
            }
            _ => {
                self.ddl_logged(
                    position,
                    sql,
                    touched,
                    Vec::new(),
                    Status::Failed,
                    Some(reason.clone()),
                )?;
                Err(format!("DDL at {position} failed (ddl-error-policy: fail): {reason}\n  statement: {sql}"))
            }
        }
    }

    /// Fold one batch of row changes into its table's pending changes.
    async fn apply_rows(&mut self, b: crate::source::RowBatch) -> Result<(), String> {
        let table = b.table.clone();
        let name = format!("{}.{}", table.db, table.name);
        let first = b.position_after(0);
        let routed = self.job.router.route(&table.db, &table.name);
        let key = (ns_of(&routed.db), routed.table.clone());
        if self.parked.contains(&key) {
            let item = HeldItem::Rows {
                batches: vec![HeldBatch::new(&b)?],
                kafka: None,
            };
            self.hold(key, item);
            return Ok(());
        }
        let s = self.sink(&table, &first).await?;
        let keep: Vec<bool> = (0..b.num_rows())
            .map(|i| {
                s.watermark
                    .as_ref()
                    .is_none_or(|w| b.position_after(i) > *w)
            })
            .collect();
        if !keep.iter().any(|k| *k) {
            return Ok(());
        }
        let conv = |x: &Option<RecordBatch>| -> Result<Option<RecordBatch>, String> {
            x.as_ref()
                .map(|r| to_iceberg(&name, &rename_batch(r, &routed)?, &s.arrow))
                .transpose()
        };
        let (before, after) = (conv(&b.before)?, conv(&b.after)?);
        let last = b.position_after(b.num_rows() - 1);
        if s.changelog {
            let tag = |x: Option<RecordBatch>, op: &str| -> Result<Option<RecordBatch>, String> {
                x.map(|r| changelog_columns(r, op, &b)).transpose()
            };
            let (before, after) = match b.op {
                Op::Insert => (None, tag(after, "insert")?),
                Op::Delete => (tag(before, "delete")?, None),
                Op::Update => (tag(before, "update_before")?, tag(after, "update_after")?),
            };
            // Both images are appended as rows: no deletes.
            for x in [before, after].into_iter().flatten() {
                s.pending.fold(
                    &s.key,
                    s.keyed,
                    Op::Insert,
                    false,
                    None,
                    Some(x),
                    &keep,
                    last.clone(),
                );
            }
            self.rows += keep.iter().filter(|k| **k).count() as u64;
            return Ok(());
        }
        s.pending
            .fold(&s.key, s.keyed, b.op, true, before, after, &keep, last);
        self.rows += keep.iter().filter(|k| **k).count() as u64;
        if let Some(k) = self.largest_over_budget() {
            self.flush_table(&k).await?;
        }
        Ok(())
    }

    /// Kafka: a message's rows apply unless its table holds its offset already; a
    /// parked table's are held with the offset.
    async fn apply_message(
        &mut self,
        rows: Vec<crate::source::RowBatch>,
        part: String,
        next: i64,
        position: Position,
    ) -> Result<(), String> {
        let Some(first) = rows.first() else {
            return Ok(()); // a tombstone or a skipped message
        };
        let t = first.table.clone();
        let routed = self.job.router.route(&t.db, &t.name);
        let key = (ns_of(&routed.db), routed.table.clone());
        if self.parked.contains(&key) {
            if self.held_offsets.get(&part).is_some_and(|h| next <= *h) {
                return Ok(()); // held before (read again after a restart)
            }
            self.held_offsets.insert(part.clone(), next);
            let batches = rows.iter().map(HeldBatch::new).collect::<Result<_, _>>()?;
            let kafka = Some(KafkaAt { part, next });
            self.hold(key, HeldItem::Rows { batches, kafka });
            return Ok(());
        }
        let (held, pending) = {
            let s = self.sink(&t, &position).await?;
            (
                crate::iceberg::commit::kafka_offsets(&s.table.metadata)
                    .get(&part)
                    .copied(),
                s.pending.offsets.get(&part).copied(),
            )
        };
        let floor = *self.floors.entry(part.clone()).or_insert(held);
        let seen = pending.or(floor);
        if seen.is_none_or(|f| next > f) {
            for b in rows {
                self.apply_rows(b).await?;
            }
            if let Some(s) = self.sinks.get_mut(&key) {
                s.pending.offsets.insert(part, next);
            }
        }
        Ok(())
    }
}

impl super::pipeline::Sink for Engine {
    async fn prepare(&mut self) -> Result<crate::source::Resume, SyncError> {
        let recovered = self.recover().await?;
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
        Ok(self.apply_rows(b).await?)
    }

    async fn message(&mut self, m: crate::source::Message) -> Result<(), SyncError> {
        let part = m.part();
        Ok(self.apply_message(m.rows, part, m.next, m.position).await?)
    }

    async fn snapshot_rows(
        &mut self,
        table: &Arc<crate::source::decode::SourceTable>,
        rows: RecordBatch,
        position: &Position,
    ) -> Result<(), SyncError> {
        if rows.num_rows() == 0 {
            return Ok(());
        }
        let name = format!("{}.{}", table.db, table.name);
        let routed = self.job.router.route(&table.db, &table.name);
        if self
            .parked
            .contains(&(ns_of(&routed.db), routed.table.clone()))
        {
            return Err(format!(
                "{name} is parked behind a DDL and cannot be snapshotted: resolve it first (`lakeshift ddl-log`)"
            )
            .into());
        }
        let rows = rename_batch(&rows, &routed)?;
        let s = self.sink(table, position).await?;
        let mut converted = to_iceberg(&name, &rows, &s.arrow)?;
        if s.changelog {
            converted = snapshot_changelog_columns(converted, position)?;
        }
        let keep = vec![true; converted.num_rows()];
        let upsert = s.had_rows;
        s.pending.fold(
            &s.key,
            s.keyed,
            Op::Insert,
            upsert,
            None,
            Some(converted),
            &keep,
            position.clone(),
        );
        self.rows += keep.len() as u64;
        Ok(())
    }

    async fn schema(&mut self, d: super::pipeline::Ddl<'_>) -> Result<(), SyncError> {
        Ok(self.ddl(d.position, d.changes, d.after, d.sql).await?)
    }

    fn skipped(
        &mut self,
        position: &Position,
        sql: &str,
        tables: Vec<String>,
        why: Option<String>,
    ) -> Result<(), SyncError> {
        let touched: Vec<(String, String)> = tables.iter().map(|t| table_key(t)).collect();
        Ok(self.ddl_logged(position, sql, &touched, Vec::new(), Status::Skipped, why)?)
    }

    async fn checkpoint(
        &mut self,
        at: Option<Position>,
        snapshot: Option<SnapshotResume>,
    ) -> Result<(), SyncError> {
        Ok(Engine::checkpoint(self, at, snapshot).await?)
    }

    fn has_pending(&self) -> bool {
        self.sinks.values().any(|s| !s.pending.is_empty()) || !self.held.is_empty()
    }

    fn over_budget(&self) -> bool {
        self.largest_over_budget().is_some()
    }

    /// The table with the most pending changes commits them now (its watermark keeps
    /// a re-read exact).
    async fn relieve(
        &mut self,
        _read_to: Option<Position>,
        _snapshotting: bool,
    ) -> Result<(), SyncError> {
        if let Some(k) = self.largest_over_budget() {
            self.flush_table(&k).await?;
        }
        Ok(())
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
            position: self.state.position.clone(),
            partitions: self.floors.len(),
        }
    }
}

/// Fill the changelog columns of converted rows: the change kind, each row's source
/// position and source time.
fn changelog_columns(
    r: RecordBatch,
    op: &str,
    b: &crate::source::RowBatch,
) -> Result<RecordBatch, String> {
    use arrow_array::{ArrayRef, StringArray, TimestampMicrosecondArray};
    let schema = r.schema();
    let mut cols: Vec<ArrayRef> = r.columns().to_vec();
    for (i, f) in schema.fields().iter().enumerate() {
        match f.name().as_str() {
            "_op" => cols[i] = Arc::new(StringArray::from(vec![op; r.num_rows()])),
            "_source_pos" => {
                cols[i] = Arc::new(StringArray::from_iter_values(
                    (0..r.num_rows()).map(|k| b.position_after(k).to_string()),
                ))
            }
            "_source_ts" => {
                cols[i] = Arc::new(
                    TimestampMicrosecondArray::from_iter_values(
                        b.positions.iter().map(|p| i64::from(p.at) * 1_000_000),
                    )
                    .with_timezone("+00:00"),
                )
            }
            _ => {}
        }
    }
    RecordBatch::try_new(schema, cols).map_err(|e| e.to_string())
}

/// Snapshot rows of a changelog table: `_op` = snapshot, `_pos` = the snapshot point.
fn snapshot_changelog_columns(r: RecordBatch, at: &Position) -> Result<RecordBatch, String> {
    use arrow_array::{ArrayRef, StringArray};
    let schema = r.schema();
    let mut cols: Vec<ArrayRef> = r.columns().to_vec();
    for (i, f) in schema.fields().iter().enumerate() {
        match f.name().as_str() {
            "_op" => cols[i] = Arc::new(StringArray::from(vec!["snapshot"; r.num_rows()])),
            "_source_pos" => {
                cols[i] = Arc::new(StringArray::from(vec![at.to_string(); r.num_rows()]))
            }
            _ => {}
        }
    }
    RecordBatch::try_new(schema, cols).map_err(|e| e.to_string())
}

fn is_replay(e: &str) -> bool {
    e.contains("already exists")
        || e.contains("does not exist in Iceberg")
        || e.contains("already has a column")
}

/// Record the DDL's position in every table the plan leaves, in the same commit.
fn mark_schema_position(plan: &mut dialects::iceberg::StatementPlan, at: &Position) {
    for t in plan.tables.values_mut().flatten() {
        t.properties
            .insert(SCHEMA_POSITION.to_owned(), at.to_string());
    }
    for a in &mut plan.actions {
        if let dialects::iceberg::Action::CreateTable { properties, .. } = a {
            properties.insert(SCHEMA_POSITION.to_owned(), at.to_string());
        }
    }
}

fn write_files<'a>(
    path: &Path,
    t: &LoadedTable,
    files: impl Iterator<Item = &'a iceberg::spec::DataFile>,
) -> Result<(), String> {
    let spec = t.metadata.default_partition_spec();
    let ptype = spec
        .partition_type(t.metadata.current_schema())
        .map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    iceberg::spec::write_data_files_to_avro(
        &mut buf,
        files.cloned(),
        &ptype,
        iceberg::spec::FormatVersion::V2,
    )
    .map_err(|e| e.to_string())?;
    let mut f = std::fs::File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    f.write_all(&buf)
        .and_then(|_| f.sync_all())
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn read_files(path: &Path, t: &LoadedTable) -> Result<Vec<iceberg::spec::DataFile>, String> {
    let spec = t.metadata.default_partition_spec();
    let schema = t.metadata.current_schema();
    let ptype = spec.partition_type(schema).map_err(|e| e.to_string())?;
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    iceberg::spec::read_data_files_from_avro(
        &mut bytes.as_slice(),
        schema,
        spec.spec_id(),
        &ptype,
        iceberg::spec::FormatVersion::V2,
    )
    .map_err(|e| format!("{}: {e}", path.display()))
}
