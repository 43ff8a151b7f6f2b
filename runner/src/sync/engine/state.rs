//! The durable state of an Iceberg job: snapshot summaries that tag each commit
//! with the job, checkpoint and watermark; recovery of a checkpoint's commits.

use super::*;
use crate::sync::error::SyncError;

impl Engine {
    /// A job without stored state whose tables hold its commits lost its state
    /// folder: starting over would snapshot on top of them (keyless tables doubled).
    pub(super) async fn refuse_lost_state(&self) -> Result<(), SyncError> {
        for ns in self.catalog.list_namespaces().await? {
            for name in self.catalog.list_tables(&ns).await? {
                let id = ident(&ns, &name)?;
                let Some(t) = self.catalog.load(&id).await? else {
                    continue;
                };
                if let (Some(ck), _) = self.committed(&t) {
                    return Err(format!(
                        "the state folder {} holds no state, but table {ns}.{name} has commits of job `{}` up to checkpoint {ck}: the folder was lost or replaced. Restore it; or, to start over, drop the job's tables (or use a new pipeline.name) and run again",
                        self.state_dir.display(),
                        self.job.pipeline.name
                    )
                    .into());
                }
            }
        }
        Ok(())
    }

    pub(super) fn summary(
        &self,
        checkpoint: u64,
        watermark: &Option<Position>,
    ) -> BTreeMap<String, String> {
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
    pub(super) fn committed(&self, t: &LoadedTable) -> (Option<u64>, Option<Position>) {
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
    pub(super) async fn commit_checkpoint(
        &self,
        id: &iceberg::TableIdent,
        n: u64,
        name: &str,
        (data, deletes): (Vec<iceberg::spec::DataFile>, Vec<iceberg::spec::DataFile>),
        wm: &Option<Position>,
        base: Option<Option<i64>>,
    ) -> crate::iceberg::Result<crate::iceberg::commit::Committed> {
        let kafka = self.state.kafka.get(name).cloned();
        Committer::new(&self.catalog)
            .commit(
                id,
                &format!("{}:{n}:{name}", self.job.pipeline.name),
                &Change::Snapshot(SnapshotChange {
                    data_files: data,
                    delete_files: deletes,
                    truncate: self.state.replace.contains(name),
                    summary: self.summary(n, wm),
                    kafka,
                    base_snapshot: base,
                    ..Default::default()
                }),
            )
            .await
    }

    /// Kafka: the offsets a table's pending changes move (what it held before, from
    /// the floors read when each partition was first seen).
    pub(super) fn kafka_commit(&self, sink: &Sink) -> Option<crate::iceberg::commit::KafkaCommit> {
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
    pub async fn recover(&mut self) -> Result<usize, SyncError> {
        let n = self.state.checkpoint;
        let mut done = 0;
        for (name, (avro, wm)) in self.state.pending.clone() {
            let (ns, t) = name.split_once('.').ok_or("bad table name in state")?;
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
            self.commit_checkpoint(&id, n, &name, (data, deletes), &wm, None)
                .await
                .map_err(|e| format!("recovering checkpoint {n} of {name}: {e}"))?;
            done += 1;
        }
        Ok(done)
    }
}

pub(super) fn write_files<'a>(
    path: &Path,
    t: &LoadedTable,
    files: impl Iterator<Item = &'a iceberg::spec::DataFile>,
) -> Result<(), SyncError> {
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
    Ok(f.write_all(&buf)
        .and_then(|_| f.sync_all())
        .map_err(|e| format!("{}: {e}", path.display()))?)
}

pub(crate) fn read_files(
    path: &Path,
    t: &LoadedTable,
) -> Result<Vec<iceberg::spec::DataFile>, SyncError> {
    let spec = t.metadata.default_partition_spec();
    let schema = t.metadata.current_schema();
    let ptype = spec.partition_type(schema).map_err(|e| e.to_string())?;
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(iceberg::spec::read_data_files_from_avro(
        &mut bytes.as_slice(),
        schema,
        spec.spec_id(),
        &ptype,
        iceberg::spec::FormatVersion::V2,
    )
    .map_err(|e| format!("{}: {e}", path.display()))?)
}
