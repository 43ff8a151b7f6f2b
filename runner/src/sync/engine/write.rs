//! Pending changes into files and commits: checkpoints, barrier and budget flushes.

use super::*;
use crate::iceberg::locate;
use crate::sync::error::SyncError;

/// The state folder's record of the last maintenance (ms since the epoch).
const MAINTAINED: &str = "maintained-at";

/// When the job last maintained its tables (None: never, or unknown).
pub(super) fn last_maintained(state: &Path) -> Option<std::time::SystemTime> {
    let ms: u64 = std::fs::read_to_string(state.join(MAINTAINED))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(std::time::UNIX_EPOCH + Duration::from_millis(ms))
}

/// Where a clean stop keeps a table's row index.
fn index_path(state: &Path, key: &(String, String)) -> PathBuf {
    state
        .join("index")
        .join(format!("{}.idx", crate::segment::table(key)))
}

/// Where row indexes past their memory share move their locations (scratch files,
/// removed at every start).
pub(super) fn spill_dir(state: &Path) -> PathBuf {
    state.join("index").join("spill")
}

/// A table's pending changes written as files, ready to commit.
/// A table's pending changes being written (`Engine::start_pending`).
pub(super) struct Started {
    tasks: Vec<tokio::task::JoinHandle<Result<WrittenFiles, SyncError>>>,
    /// Rows holding keys to delete from older data, in order.
    del: Vec<(u32, u32)>,
    /// Position mode with an index: the new rows' identities are kept for it.
    track: bool,
}

/// Data files with their rows' identities, and equality delete files.
type WrittenFiles = (
    Vec<(iceberg::spec::DataFile, Vec<u128>)>,
    Vec<iceberg::spec::DataFile>,
);

pub(super) struct Written {
    pub data: Vec<iceberg::spec::DataFile>,
    pub deletes: Vec<iceberg::spec::DataFile>,
    /// Position mode: how the commit changes the row index.
    pub delta: Option<locate::Delta>,
    /// The snapshot position deletes were computed against (the commit fails if
    /// another writer removed or rewrote files since).
    pub base: Option<Option<i64>>,
}

/// Tables whose files a checkpoint writes at once (the machine's cores are shared by
/// their encoding; each holds a row group's buffer per writer shard).
const WRITE_AHEAD: usize = 2;

impl Engine {
    /// Position mode: the table's row index, fresh for its current snapshot and
    /// schema, when the pending changes delete committed rows (built from the table
    /// when missing or stale); an empty one when the commit replaces every row.
    async fn prepare_index(&mut self, key: &(String, String)) -> Result<(), SyncError> {
        let Some(sink) = self.sinks.get_mut(key) else {
            return Ok(());
        };
        if !sink.positions {
            return Ok(());
        }
        let now = locate::table_at(&sink.table);
        if sink.index.as_ref().is_some_and(|ix| ix.at != now) {
            sink.index = None;
        }
        if sink.pending.replace {
            sink.index
                .get_or_insert_with(|| locate::RowIndex::empty(now));
            return Ok(());
        }
        if sink.index.is_none() && !sink.pending.deletes.is_empty() {
            self.ensure_index(key).await?;
        }
        Ok(())
    }

    /// The table's row index for its current snapshot and schema: kept, read from
    /// the state folder, or built from the table.
    pub(super) async fn ensure_index(&mut self, key: &(String, String)) -> Result<(), SyncError> {
        let io = self.catalog.file_io.clone();
        let Some(sink) = self.sinks.get_mut(key) else {
            return Ok(());
        };
        let now = locate::table_at(&sink.table);
        if sink.index.as_ref().is_some_and(|ix| ix.at != now) {
            sink.index = None;
        }
        if sink.index.is_none() {
            let t0 = Instant::now();
            let name = display(&sink.ident);
            let err = |e: crate::iceberg::Error| {
                SyncError::caused(format_args!("locating the rows of {name}"), &e)
            };
            let spill = locate::SpillTo {
                dir: spill_dir(&self.state_dir),
                cap: self.job.pipeline.index_budget(),
            };
            // The index a clean stop stored, if the table is still as it was then.
            let stored = match std::fs::File::open(index_path(&self.state_dir, key)) {
                Ok(f) => locate::RowIndex::load(
                    std::io::BufReader::new(f),
                    &io,
                    &sink.table,
                    Some(&spill),
                )
                .await
                .map_err(err)?,
                Err(_) => None,
            };
            let (ix, how) = match stored {
                Some(ix) => (ix, "read from the state folder"),
                None => (
                    locate::build(&io, &sink.table, &sink.key, Some(&spill))
                        .await
                        .map_err(err)?,
                    "built from the table",
                ),
            };
            tracing::info!(
                "{name}: row index {how}: {} rows in {} data files, {} of them on disk ({:.2} s)",
                ix.len(),
                ix.files.len(),
                ix.spilled(),
                t0.elapsed().as_secs_f64()
            );
            sink.index = Some(ix);
        }
        Ok(())
    }

    /// A clean stop: the tables' current row indexes go to the state folder (a
    /// restart reads them instead of reading the tables' key columns again).
    pub(super) fn store_indexes(&self) -> Result<(), SyncError> {
        for (key, sink) in &self.sinks {
            let Some(ix) = &sink.index else { continue };
            if ix.at != locate::table_at(&sink.table) {
                continue;
            }
            let path = index_path(&self.state_dir, key);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            }
            crate::durable::replace_with(&path, |w| {
                ix.write_to(w)
                    .map_err(|e| std::io::Error::other(e.to_string()))
            })
            .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        Ok(())
    }

    /// Write a table's pending changes as files.
    pub(super) async fn write_pending(
        &mut self,
        key: &(String, String),
    ) -> Result<Written, SyncError> {
        let started = self.start_pending(key).await?;
        self.finish_pending(key, started).await
    }

    /// Start writing a table's pending changes: its data (and equality delete) files
    /// are written by tasks of their own while the caller goes on.
    pub(super) async fn start_pending(
        &mut self,
        key: &(String, String),
    ) -> Result<Started, SyncError> {
        self.prepare_index(key).await?;
        let sink = &self.sinks[key];
        let p = &sink.pending;
        let live = p.live_rows(sink.keyed);
        let mut del = p.deletes.clone();
        del.sort();
        del.dedup();
        // Position mode with an index: new rows' identities are kept for it.
        let track = sink.positions && sink.index.is_some();
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
        // Equality mode: each shard writes its deletes too.
        let eq_del = if sink.positions {
            Vec::new()
        } else {
            del.clone()
        };
        // Each task copies its rows out of the pending batches a slice at a time.
        let mut tasks = Vec::new();
        for (live, del) in shard_of(&live).into_iter().zip(shard_of(&eq_del)) {
            let batches = p.batches.clone();
            let table = sink.table.clone();
            let io = self.catalog.file_io.clone();
            let key_ids = sink.key_ids.clone();
            let ident = track.then(|| sink.key.clone());
            tasks.push(tokio::spawn(async move {
                let data = files::write_data_picked(&table, &io, &batches, &live, ident.as_deref())
                    .await?;
                let deletes =
                    files::write_equality_deletes_picked(&table, &io, &key_ids, &batches, &del)
                        .await?;
                Ok::<_, SyncError>((data, deletes))
            }));
        }
        Ok(Started { tasks, del, track })
    }

    /// The files of a started write, with the position deletes its changes make.
    pub(super) async fn finish_pending(
        &mut self,
        key: &(String, String),
        Started { tasks, del, track }: Started,
    ) -> Result<Written, SyncError> {
        let (mut data, mut deletes) = (Vec::new(), Vec::new());
        for t in tasks {
            let (d, x) = t.await.map_err(|e| e.to_string())??;
            data.extend(d);
            deletes.extend(x);
        }
        let sink = &self.sinks[key];
        let p = &sink.pending;
        let Some(ix) = sink.index.as_ref().filter(|_| track) else {
            return Ok(Written {
                data: data.into_iter().map(|(f, _)| f).collect(),
                deletes,
                delta: None,
                base: None,
            });
        };
        // Rows of older commits the changes delete, located; as position deletes per
        // partition of the files they point into.
        let removed = if p.replace {
            Vec::new()
        } else {
            let mut buf = Vec::new();
            ix.locate_deletes(
                sink.keyed,
                del.iter().map(|&(b, r)| {
                    locate::identity(&p.batches[b as usize], &sink.key, r as usize, &mut buf)
                }),
                data.iter().flat_map(|(_, ids)| ids.iter().copied()),
            )
            .map_err(|e| {
                SyncError::caused(
                    format_args!("locating the rows of {}", display(&sink.ident)),
                    &e,
                )
            })?
        };
        for (spec, part, rows) in ix.by_partition(&removed) {
            deletes.extend(
                files::write_position_deletes_in(
                    &sink.table,
                    &self.catalog.file_io,
                    spec,
                    part,
                    rows,
                )
                .await?,
            );
        }
        let spec = sink.table.metadata.default_partition_spec_id();
        let base = (!removed.is_empty()).then_some(ix.at.0);
        let mut out = Vec::with_capacity(data.len());
        let mut added = Vec::with_capacity(data.len());
        for (f, ids) in data {
            added.push((
                locate::FileSlot {
                    path: f.file_path().to_owned(),
                    partition: f.partition().clone(),
                    spec_id: spec,
                },
                ids,
            ));
            out.push(f);
        }
        Ok(Written {
            data: out,
            deletes,
            delta: Some(locate::Delta { removed, added }),
            base,
        })
    }

    /// Commit one table's pending changes now (DDL barrier, memory pressure), tagged
    /// with the last completed checkpoint and the table's watermark.
    pub(super) async fn flush_table(&mut self, key: &(String, String)) -> Result<(), SyncError> {
        let Some(sink) = self.sinks.get(key) else {
            return Ok(());
        };
        if sink.pending.is_empty() {
            return Ok(());
        }
        let w = self.write_pending(key).await?;
        let sink = &self.sinks[key];
        let wm = sink.pending.watermark.clone();
        let summary = self.summary(self.state.checkpoint, &wm);
        let id = sink.ident.clone();
        let kafka = self.kafka_commit(sink);
        let done = Committer::new(&self.catalog)
            .commit(
                &id,
                &uuid::Uuid::new_v4().to_string(),
                &Change::Snapshot(SnapshotChange {
                    data_files: w.data,
                    delete_files: w.deletes,
                    truncate: sink.pending.replace,
                    summary,
                    kafka,
                    base_snapshot: w.base,
                    ..Default::default()
                }),
            )
            .await
            .map_err(|e| SyncError::from(e).context(format_args!("commit of {}", display(&id))))?;
        self.committed_pending(key, done.table, wm, w.delta);
        self.recount_budget();
        Ok(())
    }

    /// A table's pending changes landed: its new state and watermark, nothing
    /// pending; its row index moves to the commit's snapshot (or is dropped, when the
    /// table changed in a way it did not see).
    pub(super) fn committed_pending(
        &mut self,
        key: &(String, String),
        table: LoadedTable,
        wm: Option<Position>,
        delta: Option<locate::Delta>,
    ) {
        self.commits += 1;
        let sink = self.sinks.get_mut(key).expect("present");
        let replace = sink.pending.replace;
        sink.table = table;
        sink.watermark = wm;
        let now = locate::table_at(&sink.table);
        let parent = sink
            .table
            .metadata
            .current_snapshot()
            .and_then(|s| s.parent_snapshot_id());
        match (sink.index.as_mut(), delta) {
            (Some(ix), Some(d)) if replace || (ix.at.0 == parent && ix.at.1 == now.1) => {
                if let Err(e) = ix.apply(d, replace, now) {
                    // Built again from the table when next needed.
                    tracing::warn!("{}: row index dropped: {e}", display(&sink.ident));
                    sink.index = None;
                }
            }
            _ => sink.index = None,
        }
        let done = std::mem::replace(&mut sink.pending, Pending::new()).offsets;
        let table = sink.ident.to_string();
        for (part, o) in done {
            if let Some((t, p)) = part.rsplit_once('/') {
                self.acks.push((t.to_owned(), p.parse().unwrap_or(0), o));
            }
            self.floors.insert((table.clone(), part), Some(o));
        }
    }

    /// A checkpoint at a transaction boundary: files, durable state, commits.
    pub async fn checkpoint(
        &mut self,
        position: Option<Position>,
        snapshot: Option<SnapshotResume>,
    ) -> Result<(), SyncError> {
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
        let mut replace = std::collections::BTreeSet::new();
        let mut staged = Vec::new();
        let (mut lists, mut watermarks) = (Vec::new(), Vec::new());
        let keys: Vec<(String, String)> = self.sinks.keys().cloned().collect();
        // Tables' files are written WRITE_AHEAD at a time (by tasks of their own), in
        // table order; each then joins the checkpoint's lists in that order.
        let mut writing: std::collections::VecDeque<((String, String), Started)> =
            Default::default();
        let mut finished = Vec::new();
        for key in keys {
            if self.sinks[&key].pending.is_empty() {
                continue;
            }
            let started = self.start_pending(&key).await?;
            writing.push_back((key, started));
            if writing.len() >= WRITE_AHEAD {
                let (key, started) = writing.pop_front().expect("not empty");
                let w = self.finish_pending(&key, started).await?;
                finished.push((key, w));
            }
        }
        while let Some((key, started)) = writing.pop_front() {
            let w = self.finish_pending(&key, started).await?;
            finished.push((key, w));
        }
        for (key, w) in finished {
            let sink = &self.sinks[&key];
            let name = format!("{}.{}", key.0, key.1);
            lists.push((
                name.clone(),
                files_avro(&sink.table, w.data.iter().chain(&w.deletes))?,
            ));
            watermarks.push(sink.pending.watermark.clone());
            if let Some(k) = self.kafka_commit(sink) {
                kafka.insert(name.clone(), k);
            }
            if sink.pending.replace {
                replace.insert(name.clone());
            }
            staged.push((key, w));
        }
        let t_files = t0.elapsed();
        if !lists.is_empty() {
            let refs = write_lists(&self.state_dir, n, lists)?;
            pending.extend(
                refs.into_iter()
                    .zip(watermarks)
                    .map(|((name, rel), wm)| (name, (rel, wm))),
            );
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
            replace,
        };
        // The tables the state names are in the catalog, and the data files it
        // lists durable, before it is stored.
        failpoint("before-tables-registered");
        self.catalog.register_deferred().await?;
        self.catalog.barrier().await?;
        state.store(&self.state_dir)?;
        // The record and its pending lists reach the shared mirror before any table
        // commits (a host taking the job over is never behind the catalog).
        if let Some(sh) = self.shared.as_mut() {
            sh.push(&self.state_dir).await?;
        }
        self.state = state;
        let t_state = t0.elapsed();
        // Every table together: their files and metadata first, then one sync of
        // them all and one catalog transaction, so that no reader of the catalog
        // sees some of the checkpoint's tables without the others (a table whose
        // swap fails goes on alone). The failpoint `between-table-commits` lands the
        // first table alone and stops, as a process that dies while a table goes on
        // alone leaves the others to recovery.
        let mut staged = staged.into_iter();
        let split = usize::from(crate::failpoint::armed("between-table-commits"));
        let first: Vec<_> = staged.by_ref().take(split).collect();
        for (i, batch) in [first, staged.collect::<Vec<_>>()].into_iter().enumerate() {
            if batch.is_empty() {
                continue;
            }
            if i == 1 {
                failpoint("between-table-commits");
            }
            let mut rest = Vec::with_capacity(batch.len());
            let mut items = Vec::with_capacity(batch.len());
            for (key, w) in batch {
                let name = format!("{}.{}", key.0, key.1);
                let sink = &self.sinks[&key];
                let wm = sink.pending.watermark.clone();
                items.push(self.checkpoint_change(
                    &sink.ident,
                    n,
                    &name,
                    (w.data, w.deletes),
                    &wm,
                    w.base,
                ));
                rest.push((key, name, wm, w.delta));
            }
            let results = Committer::new(&self.catalog).commit_many(&items).await;
            // Every commit that landed is taken in before the first failure is
            // reported (recovery commits the others).
            let mut failed = None;
            for ((key, name, wm, delta), done) in rest.into_iter().zip(results) {
                match done {
                    Ok(done) => self.committed_pending(&key, done.table, wm, delta),
                    Err(e) => {
                        failed = failed.or(Some(
                            SyncError::from(e)
                                .context(format_args!("checkpoint {n}: commit of {name}")),
                        ))
                    }
                }
            }
            if let Some(e) = failed {
                return Err(e);
            }
        }
        // The catalog's record of the job moves too (an older state folder is refused).
        self.catalog
            .record_checkpoint(n)
            .await
            .map_err(|e| SyncError::fenced(e.to_string()))?;
        if !released.is_empty() {
            failpoint("before-release-recorded");
        }
        for (seq, tables) in released {
            self.released(seq, &tables, n)?;
        }
        // Files of older checkpoints are no longer needed for recovery.
        if let Ok(rd) = std::fs::read_dir(self.state_dir.join("pending")) {
            for e in rd.flatten() {
                let keep = e.file_name().to_string_lossy() == format!("{n}.lists");
                if !keep {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        let sinks = &self.sinks;
        self.active
            .retain(|k| sinks.get(k).is_some_and(|s| !s.pending.is_empty()));
        self.recount_budget();
        self.last_checkpoint = Instant::now();
        self.maybe_maintain().await;
        tracing::debug!(
            "checkpoint {n} in {:.1} ms (files {:.1}, state {:.1})",
            t0.elapsed().as_secs_f64() * 1e3,
            t_files.as_secs_f64() * 1e3,
            t_state.as_secs_f64() * 1e3,
        );
        Ok(())
    }

    /// The table with the most pending bytes, when all of them pass the budget
    /// (the pending changes' share, less what the row indexes hold, down to a
    /// quarter of it).
    /// What pending changes may hold: the pending share less what the row indexes
    /// hold, and at least a quarter of it.
    pub(super) fn pending_limit(&self) -> usize {
        let share = self.job.pipeline.pending_budget();
        share.saturating_sub(self.index_bytes()).max(share / 4)
    }

    pub(super) fn largest_over_budget(&self) -> Option<(String, String)> {
        let budget = self.pending_limit();
        if self.pending_bytes < budget {
            return None;
        }
        let pending = || {
            self.active
                .iter()
                .filter_map(|k| self.sinks.get(k).map(|s| (k, s.pending.bytes)))
        };
        let total: usize = pending().map(|(_, b)| b).sum();
        if total < budget {
            return None;
        }
        pending().max_by_key(|(_, b)| *b).map(|(k, _)| k.clone())
    }

    /// Maintenance inside the job, between checkpoints, when its interval passed
    /// (nothing is pending then). A failed step is logged, not fatal: the next
    /// interval tries again.
    async fn maybe_maintain(&mut self) {
        let Some(m) = self.job.sink.iceberg().map(|i| i.maintenance.clone()) else {
            return;
        };
        let since = self
            .maintained
            .and_then(|at| std::time::SystemTime::now().duration_since(at).ok());
        if m.interval_seconds <= 0.0 || since.is_some_and(|d| d.as_secs_f64() < m.interval_seconds)
        {
            return;
        }
        let t0 = Instant::now();
        let done =
            crate::sync::maintain::run(&self.job, &self.catalog, &m.options(false), true, |line| {
                tracing::info!("maintenance: {line}")
            })
            .await;
        match done {
            Ok(n) if n > 0 => tracing::info!(
                "maintenance: {n} step(s) in {:.2} s",
                t0.elapsed().as_secs_f64()
            ),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!("maintenance: {e} (the job goes on; the next interval tries again)")
            }
        }
        // Rewritten tables are loaded again when next written (their row indexes
        // rebuilt when deletes need them).
        self.sinks.retain(|_, s| !s.pending.is_empty());
        let now = std::time::SystemTime::now();
        self.maintained = Some(now);
        let ms = now
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        // (Best effort: a lost record only makes the next run maintain early.)
        let _ = std::fs::write(self.state_dir.join(MAINTAINED), ms.to_string());
    }

    /// Rows were folded into table `key`'s pending changes, which grew by `grew` bytes.
    pub(super) fn folded(&mut self, key: (String, String), grew: usize) {
        self.pending_bytes += grew;
        self.active.insert(key);
    }

    /// Row indexes past their share of the budget (`PipelineConfig::index_budget`)
    /// move their locations to disk, the largest first. One that cannot is dropped
    /// (built again from its table when next needed). Returns the bytes the indexes
    /// hold then.
    fn spill_indexes(&mut self) -> usize {
        let cap = self.job.pipeline.index_budget();
        let dir = spill_dir(&self.state_dir);
        let mut held: usize = self
            .sinks
            .values()
            .filter_map(|s| s.index.as_ref())
            .map(|ix| ix.bytes())
            .sum();
        while held > cap {
            let Some(sink) = self
                .sinks
                .values_mut()
                .filter_map(|s| {
                    let n = s.index.as_ref()?.spillable_bytes()?;
                    Some((n, s))
                })
                .max_by_key(|(n, _)| *n)
                .map(|(_, s)| s)
            else {
                break;
            };
            let ix = sink.index.as_mut().expect("filtered");
            let before = ix.bytes();
            let t0 = Instant::now();
            match ix.spill(&dir) {
                Ok(()) => {
                    tracing::info!(
                        "{}: row index past its memory share ({} MiB of {} MiB for all indexes): {} locations moved to disk ({:.2} s)",
                        display(&sink.ident),
                        before >> 20,
                        cap >> 20,
                        ix.spilled(),
                        t0.elapsed().as_secs_f64()
                    );
                    held = held - before + ix.bytes();
                }
                Err(e) => {
                    tracing::warn!("{}: row index dropped: {e}", display(&sink.ident));
                    sink.index = None;
                    held -= before;
                }
            }
        }
        held
    }

    /// Bytes the tables' row indexes hold.
    pub(super) fn index_bytes(&self) -> usize {
        self.index_bytes
    }

    /// Count again what the budget weighs: the pending bytes of the active tables, and
    /// the row indexes' bytes (they change only when tables are written and
    /// committed: after a checkpoint or a table's flush).
    fn recount_budget(&mut self) {
        self.pending_bytes = self
            .active
            .iter()
            .filter_map(|k| self.sinks.get(k))
            .map(|s| s.pending.bytes)
            .sum();
        self.index_bytes = self.spill_indexes();
    }
}
