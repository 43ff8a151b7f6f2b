//! Pending changes into files and commits: checkpoints, barrier and budget flushes.

use super::*;
use crate::sync::error::SyncError;

impl Engine {
    /// Write a table's pending changes as files. Returns (data, deletes).
    pub(super) async fn write_pending(
        &self,
        sink: &Sink,
    ) -> Result<(Vec<iceberg::spec::DataFile>, Vec<iceberg::spec::DataFile>), SyncError> {
        let p = &sink.pending;
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
        // Each task copies its rows out of the pending batches a slice at a time.
        let mut tasks = Vec::new();
        for (live, del) in shard_of(&live).into_iter().zip(shard_of(&del)) {
            let batches = p.batches.clone();
            let table = sink.table.clone();
            let io = self.catalog.file_io.clone();
            let key_ids = sink.key_ids.clone();
            tasks.push(tokio::spawn(async move {
                let data = files::write_data_picked(&table, &io, &batches, &live).await?;
                let deletes =
                    files::write_equality_deletes_picked(&table, &io, &key_ids, &batches, &del)
                        .await?;
                Ok::<_, SyncError>((data, deletes))
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
    pub(super) async fn flush_table(&mut self, key: &(String, String)) -> Result<(), SyncError> {
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
                    truncate: sink.pending.replace,
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
    pub(super) fn committed_pending(
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
            if sink.pending.replace {
                replace.insert(name.clone());
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
            replace,
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

    /// The table with the most pending bytes, when all of them pass the budget.
    pub(super) fn largest_over_budget(&self) -> Option<(String, String)> {
        let budget = self.job.pipeline.pending_budget();
        let total: usize = self.sinks.values().map(|s| s.pending.bytes).sum();
        if total < budget {
            return None;
        }
        self.sinks
            .iter()
            .max_by_key(|(_, s)| s.pending.bytes)
            .map(|(k, _)| k.clone())
    }
}
