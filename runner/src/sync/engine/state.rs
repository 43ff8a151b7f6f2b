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
                // Commits before the first checkpoint (a table committed early
                // during the first snapshot, or under memory pressure) are no lost
                // state: a new start takes the snapshot again, which replaces the
                // table, and changes at or below the table's watermark are skipped.
                if let (Some(ck @ 1..), _) = self.committed(&t) {
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
        // (A table's watermark is the position of its last change, inside its
        // transaction: it says nothing of where the transaction ends.)
        if self.partial {
            m.insert(PARTIAL.to_owned(), "true".to_owned());
        }
        if self.loading || self.state.snapshot.is_some() {
            m.insert(LOADING.to_owned(), "true".to_owned());
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

    /// A table's commit of checkpoint `n`: (table, commit id, change); the commit id
    /// is the same in the checkpoint and in its recovery (so a commit whose reply was
    /// lost is found, not repeated).
    pub(super) fn checkpoint_change(
        &self,
        id: &iceberg::TableIdent,
        n: u64,
        name: &str,
        (data, deletes): (Vec<iceberg::spec::DataFile>, Vec<iceberg::spec::DataFile>),
        wm: &Option<Position>,
        base: Option<Option<i64>>,
    ) -> (iceberg::TableIdent, String, Change) {
        let kafka = self.state.kafka.get(name).cloned();
        let mut summary = self.summary(n, wm);
        // A checkpoint inside a source transaction (a stop that did not wait for its
        // end) says so, in its commits and in their recovery.
        if self.state.position.as_ref().is_some_and(|p| p.ordinal > 0) {
            summary.insert(PARTIAL.to_owned(), "true".to_owned());
        }
        (
            id.clone(),
            format!("{}:{n}:{name}", self.job.pipeline.name),
            Change::Snapshot(SnapshotChange {
                data_files: data,
                delete_files: deletes,
                truncate: self.state.replace.contains(name),
                summary,
                kafka,
                base_snapshot: base,
                ..Default::default()
            }),
        )
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
                .map(|k| {
                    let floor = self.floors.get(&(sink.ident.to_string(), k.clone()));
                    (k.clone(), floor.copied().flatten())
                })
                .collect(),
            next: sink.pending.offsets.clone(),
        })
    }

    /// Commit what the state's checkpoint lists and a table lacks (after a crash).
    pub async fn recover(&mut self) -> Result<usize, SyncError> {
        let n = self.state.checkpoint;
        let mut done = 0;
        let (mut items, mut names) = (Vec::new(), Vec::new());
        let was = self.uuids_at_checkpoint()?;
        for (name, (avro, wm)) in self.state.pending.clone() {
            let (ns, t) = name.split_once('.').ok_or("bad table name in state")?;
            let Some(table) = self.table_of_checkpoint(ns, t, &was).await? else {
                continue; // dropped since
            };
            let id = table.ident.clone();
            let (ck, _) = self.committed(&table);
            if ck.is_some_and(|c| c >= n) {
                continue;
            }
            let files = read_files(&self.state_dir, &avro, &table)?;
            let (data, deletes): (Vec<_>, Vec<_>) = files
                .into_iter()
                .partition(|f| f.content_type() == iceberg::spec::DataContentType::Data);
            items.push(self.checkpoint_change(&id, n, &name, (data, deletes), &wm, None));
            names.push(name);
        }
        // The tables the crash left behind commit together, in one catalog
        // transaction, as the checkpoint would have: no reader sees some of them
        // without the others.
        let results = Committer::new(&self.catalog).commit_many(&items).await;
        for (name, r) in names.iter().zip(results) {
            r.map_err(|e| {
                SyncError::from(e).context(format_args!("recovering checkpoint {n} of {name}"))
            })?;
            done += 1;
        }
        Ok(done)
    }
}

impl Engine {
    /// The uuid each table name held at the state's checkpoint, as the first DDL
    /// after it recorded (None: no table had the name); names no DDL touched since
    /// are absent.
    fn uuids_at_checkpoint(&self) -> Result<HashMap<(String, String), Option<String>>, SyncError> {
        let mut out = HashMap::new();
        let Some(at) = self.state.position.clone() else {
            return Ok(out);
        };
        let log = DdlLog::load(&self.state_dir)?;
        let mut after: Vec<&Entry> = log
            .entries
            .iter()
            .filter(|e| e.position.parse::<Position>().is_ok_and(|p| p > at))
            .collect();
        after.sort_by_key(|e| e.seq);
        for e in after {
            for (ns, t, u) in &e.uuids {
                out.entry((ns.clone(), t.clone())).or_insert(u.clone());
            }
        }
        Ok(out)
    }

    /// The table a checkpoint's pending list named `ns.t`: the one of that name,
    /// unless a DDL after the checkpoint (a rename, a swap, a drop) gave the name to
    /// another table; then the table of the uuid the name held (None: gone).
    async fn table_of_checkpoint(
        &self,
        ns: &str,
        t: &str,
        was: &HashMap<(String, String), Option<String>>,
    ) -> Result<Option<LoadedTable>, SyncError> {
        let load = |t: String| async move {
            let id = ident(ns, &t).map_err(|e| e.to_string())?;
            self.catalog
                .load(&id)
                .await
                .map_err(|e| SyncError::from(e).context(format_args!("loading table {ns}.{t}")))
        };
        let by_name = load(t.to_owned()).await?;
        let Some(want) = was.get(&(ns.to_owned(), t.to_owned())) else {
            return Ok(by_name);
        };
        let Some(want) = want else {
            return Ok(None);
        };
        let uuid = |x: &LoadedTable| x.metadata.uuid().to_string();
        if by_name.as_ref().is_some_and(|x| uuid(x) == *want) {
            return Ok(by_name);
        }
        for other in self.catalog.list_tables(ns).await? {
            if let Some(x) = load(other).await? {
                if uuid(&x) == *want {
                    return Ok(Some(x));
                }
            }
        }
        Ok(None)
    }
}

/// A table's data and delete files as an Avro list (the pending list of one table
/// in a checkpoint).
pub(super) fn files_avro<'a>(
    t: &LoadedTable,
    files: impl Iterator<Item = &'a iceberg::spec::DataFile>,
) -> Result<Vec<u8>, SyncError> {
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
    Ok(buf)
}

/// The pending lists of every table of checkpoint `n`, in one file (one write and one
/// sync however many tables it commits): `lists` as (table, Avro list). Returns each
/// table's reference to its list, `pending/<n>.lists#<offset>+<length>`.
pub(super) fn write_lists(
    state_dir: &Path,
    n: u64,
    lists: Vec<(String, Vec<u8>)>,
) -> Result<Vec<(String, String)>, SyncError> {
    let rel = format!("pending/{n}.lists");
    let path = state_dir.join(&rel);
    let mut all = Vec::with_capacity(lists.iter().map(|(_, b)| b.len()).sum());
    let mut refs = Vec::with_capacity(lists.len());
    for (name, bytes) in lists {
        refs.push((name, format!("{rel}#{}+{}", all.len(), bytes.len())));
        all.extend_from_slice(&bytes);
    }
    let mut f = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    f.write_all(&all)
        .and_then(|_| f.sync_all())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(refs)
}

/// A table's pending list: `rel` (in `state_dir`) names a file of its own (older
/// state folders) or a part of a checkpoint's lists file (`file#offset+length`).
pub(crate) fn read_files(
    state_dir: &Path,
    rel: &str,
    t: &LoadedTable,
) -> Result<Vec<iceberg::spec::DataFile>, SyncError> {
    let spec = t.metadata.default_partition_spec();
    let schema = t.metadata.current_schema();
    let ptype = spec.partition_type(schema).map_err(|e| e.to_string())?;
    let (file, part) = list_ref(rel);
    let path = state_dir.join(file);
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let bytes = match part {
        None => &bytes[..],
        Some(part) => {
            let range = part
                .split_once('+')
                .and_then(|(o, l)| Some((o.parse::<usize>().ok()?, l.parse::<usize>().ok()?)))
                .filter(|(o, l)| o.checked_add(*l).is_some_and(|end| end <= bytes.len()))
                .ok_or_else(|| format!("{}: no part {part} in it", path.display()))?;
            &bytes[range.0..range.0 + range.1]
        }
    };
    Ok(iceberg::spec::read_data_files_from_avro(
        &mut &bytes[..],
        schema,
        spec.spec_id(),
        &ptype,
        iceberg::spec::FormatVersion::V2,
    )
    .map_err(|e| format!("{}: {e}", path.display()))?)
}

/// A pending-list reference as (file, part): `pending/<n>.lists#offset+length`, or a
/// file of its own (older state folders: `pending/<n>-<table>.avro`, whose table name
/// may hold a `#`).
fn list_ref(rel: &str) -> (&str, Option<&str>) {
    match rel.rsplit_once('#') {
        Some((f, part)) if f.ends_with(".lists") => (f, Some(part)),
        _ => (rel, None),
    }
}

#[cfg(test)]
mod tests {
    use super::list_ref;

    #[test]
    fn list_references_of_both_layouts() {
        assert_eq!(
            list_ref("pending/7.lists#120+64"),
            ("pending/7.lists", Some("120+64"))
        );
        // regression: an older per-table file of a table named `a#b` read as a part.
        assert_eq!(
            list_ref("pending/3-shop.a#b.avro"),
            ("pending/3-shop.a#b.avro", None)
        );
    }
}
