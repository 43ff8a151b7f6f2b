//! Table maintenance, each step its own commit through the commit layer:
//! - compaction: the small data files of a table and those its position deletes
//!   point into (all of them when it has equality deletes) are rewritten from one
//!   snapshot (deletes applied) into files of the target size, replacing them and
//!   every delete file, committed only directly on that snapshot (any commit in
//!   between abandons it: nothing is lost or doubled; the next run tries again);
//!   large files without deletes are left alone;
//! - manifest merge: manifests without live entries (a rewrite leaves them) are
//!   dropped and a table's small manifests of one kind merged into one, in a commit
//!   that changes no file;
//! - snapshot expiry: snapshots beyond the newest `retain` and older than the age
//!   limit are removed, never the current one nor the newest that records the job's
//!   checkpoint or Kafka offsets; files only they referenced are deleted;
//! - orphan files (in the table's folder, referenced by no snapshot nor metadata
//!   file, older than a safety window, not listed by a pending checkpoint) are
//!   deleted.

use super::catalog::{display, local_path, LoadedTable};
use super::commit::{Change, MetadataChange, SnapshotChange, KAFKA_OFFSETS};
use super::{files, Catalog, Committer, Error, Result};
use arrow_array::{ArrayRef, RecordBatch};
use futures::TryStreamExt;
use iceberg::spec::{DataContentType, ManifestList, TableMetadata};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// What maintenance does and when.
#[derive(Debug, Clone)]
pub struct Options {
    /// Rewrite a table with at least this many small data files (below 3/4 of the
    /// target file size), or with any delete file.
    pub min_small_files: usize,
    /// Snapshots kept whatever their age (the newest ones).
    pub retain_snapshots: usize,
    /// Snapshots younger than this are kept.
    pub snapshot_age: Duration,
    /// Files younger than this are never orphans (a writer may be about to commit them).
    pub orphan_age: Duration,
    /// Merge a table's small manifests of one kind once it has this many.
    pub min_manifests: usize,
    /// Report what would be done, do nothing.
    pub dry_run: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            min_small_files: 8,
            retain_snapshots: 10,
            snapshot_age: Duration::from_secs(24 * 3600),
            orphan_age: Duration::from_secs(24 * 3600),
            min_manifests: 8,
            dry_run: false,
        }
    }
}

/// Summary keys a rewrite carries over from the snapshots it replaces, so recovery
/// (checkpoint id, watermark) and Kafka fencing read the same values after it.
const CARRIED: [&str; 3] = [
    "lakeshift.job",
    "lakeshift.checkpoint-id",
    "lakeshift.watermark",
];
pub const MAINTENANCE: &str = "lakeshift.maintenance";

/// The summary properties a rewrite of `m` carries: the job's checkpoint and
/// watermark of its newest job snapshot, the newest Kafka offsets.
fn carried(m: &TableMetadata) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut snaps: Vec<_> = m.snapshots().collect();
    snaps.sort_by_key(|s| std::cmp::Reverse(s.sequence_number()));
    if let Some(s) = snaps
        .iter()
        .find(|s| s.summary().additional_properties.contains_key(CARRIED[0]))
    {
        for k in CARRIED {
            if let Some(v) = s.summary().additional_properties.get(k) {
                out.insert(k.to_owned(), v.clone());
            }
        }
    }
    let offsets = super::commit::kafka_offsets(m);
    if !offsets.is_empty() {
        out.insert(
            KAFKA_OFFSETS.to_owned(),
            serde_json::to_string(&offsets).expect("serialise"),
        );
    }
    out
}

/// A scan batch in the table's current Arrow schema. The scan reads a snapshot under
/// the schema it was written with (`read`); columns are matched by field id, so a
/// column renamed since keeps its values, one added since reads as NULL, one dropped
/// since goes, and an older type is cast.
fn conform(
    batch: &RecordBatch,
    read: &iceberg::spec::Schema,
    current: &iceberg::spec::Schema,
    target: &arrow_schema::SchemaRef,
) -> Result<RecordBatch> {
    let n = batch.num_rows();
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(target.fields().len());
    for (f, field) in target.fields().iter().zip(current.as_struct().fields()) {
        let source = read
            .field_by_id(field.id)
            .and_then(|s| batch.schema().index_of(&s.name).ok());
        let c = match source {
            Some(i) => {
                let c = batch.column(i);
                if c.data_type() == f.data_type() {
                    c.clone()
                } else {
                    arrow_cast::cast(c, f.data_type())
                        .map_err(|e| Error::Invalid(format!("column {}: {e}", f.name())))?
                }
            }
            None => arrow_array::new_null_array(f.data_type(), n),
        };
        cols.push(c);
    }
    RecordBatch::try_new(target.clone(), cols).map_err(|e| Error::Invalid(e.to_string()))
}

/// Data files smaller than this are small: compaction rewrites them (3/4 of the
/// table's target file size).
pub fn small_below(t: &LoadedTable) -> u64 {
    files::target_size(t) as u64 * 3 / 4
}

/// Compaction of one table: what it did (or would do), or None when the table needs
/// none.
pub async fn compact(catalog: &Catalog, t: &LoadedTable, o: &Options) -> Result<Option<String>> {
    let m = &t.metadata;
    let Some(snapshot) = m.current_snapshot_id() else {
        return Ok(None);
    };
    let files = super::commit::live_entries(catalog, m).await?;
    let data: Vec<_> = files
        .iter()
        .filter(|f| f.content_type() == DataContentType::Data)
        .collect();
    let deletes: Vec<_> = files
        .iter()
        .filter(|f| f.content_type() != DataContentType::Data)
        .collect();
    let small: HashSet<&str> = data
        .iter()
        .filter(|f| f.file_size_in_bytes() < small_below(t))
        .map(|f| f.file_path())
        .collect();
    if deletes.is_empty() && (small.len() < o.min_small_files || data.len() < 2) {
        return Ok(None);
    }
    if m.current_schema()
        .as_struct()
        .fields()
        .iter()
        .any(|f| f.initial_default.is_some())
    {
        return Ok(Some(
            "not compacted: a column has an initial default (rewriting would need it applied to older files)".into(),
        ));
    }
    // The files to rewrite: the small ones and those position deletes point into
    // (then every delete file goes with them); with equality deletes, which apply to
    // every older file, all of them.
    let mut rewrite: HashSet<String> = HashSet::new();
    if deletes
        .iter()
        .any(|f| f.content_type() == DataContentType::EqualityDeletes)
    {
        rewrite.extend(data.iter().map(|f| f.file_path().to_owned()));
    } else {
        if small.len() >= o.min_small_files.max(2) {
            rewrite.extend(small.iter().map(|p| p.to_string()));
        }
        for d in &deletes {
            rewrite.extend(
                super::locate::position_delete_targets(&catalog.file_io, d.file_path()).await?,
            );
        }
    }
    let live: HashSet<&str> = data.iter().map(|f| f.file_path()).collect();
    rewrite.retain(|p| live.contains(p.as_str()));
    let bytes_in: u64 = data
        .iter()
        .filter(|f| rewrite.contains(f.file_path()))
        .chain(deletes.iter())
        .map(|f| f.file_size_in_bytes())
        .sum();
    let what = format!(
        "{} of {} data files ({} small) and {} delete files, {:.1} MiB",
        rewrite.len(),
        data.len(),
        small.len(),
        deletes.len(),
        bytes_in as f64 / (1024.0 * 1024.0)
    );
    if o.dry_run {
        return Ok(Some(format!("would rewrite {what}")));
    }
    let arrow = files::arrow_schema(t)?;
    let table = t.table(&catalog.file_io)?;
    // The chosen files' rows as the table's scan reads them (their deletes applied),
    // one file at a time (see the sync tests: the crate's reader can stall when
    // several readers wait for one equality-delete file).
    let tasks: Vec<_> = table
        .scan()
        .snapshot_id(snapshot)
        .build()?
        .plan_files()
        .await?
        .try_filter(|task| std::future::ready(rewrite.contains(&task.data_file_path)))
        .try_collect()
        .await?;
    let mut stream = super::read::read_tasks(&catalog.file_io, tasks).await?;
    // The scan reads the snapshot under the schema it was written with; the new files
    // are in the current one (a column renamed since must keep its values).
    let read = m
        .snapshot_by_id(snapshot)
        .map(|s| s.schema(m))
        .transpose()?
        .unwrap_or_else(|| m.current_schema().clone());
    let mut w = files::StreamWriter::new(t, &catalog.file_io);
    let mut rows = 0u64;
    let name = display(&t.ident);
    while let Some(b) =
        super::stall::next_batch(&mut stream, super::stall::READ_STALL, &name).await?
    {
        rows += b.num_rows() as u64;
        w.write(conform(&b, &read, m.current_schema(), &arrow)?)
            .await?;
    }
    let written = w.close().await?;
    let removed: Vec<String> = rewrite
        .iter()
        .cloned()
        .chain(deletes.iter().map(|f| f.file_path().to_owned()))
        .collect();
    let bytes_out: u64 = written.iter().map(|f| f.file_size_in_bytes()).sum();
    let n_out = written.len();
    let paths: Vec<String> = written.iter().map(|f| f.file_path().to_owned()).collect();
    let mut summary = carried(m);
    summary.insert(MAINTENANCE.to_owned(), "compaction".into());
    let change = Change::Snapshot(SnapshotChange {
        data_files: written,
        removed_files: removed,
        summary,
        base_snapshot: Some(Some(snapshot)),
        exact_base: true,
        ..Default::default()
    });
    crate::failpoint::hit("maintain-before-commit");
    match Committer::new(catalog)
        .commit(&t.ident, &uuid::Uuid::new_v4().to_string(), &change)
        .await
    {
        Ok(_) => {}
        Err(Error::BaseMoved { .. }) => {
            for p in &paths {
                let _ = catalog.file_io.delete(p).await;
            }
            return Ok(Some(format!(
                "compaction abandoned: {} was committed to while it was rewritten (next run tries again)",
                display(&t.ident)
            )));
        }
        Err(e) => return Err(e),
    }
    Ok(Some(format!(
        "rewrote {what} into {n_out} data files, {:.1} MiB ({rows} rows)",
        bytes_out as f64 / (1024.0 * 1024.0)
    )))
}

/// Manifests of one table merged: when its current snapshot carries manifests with
/// no live entry (left by a rewrite) or at least `min_manifests` small ones of a kind,
/// one commit on that snapshot drops the former and merges the latter (entries,
/// sequence numbers and files unchanged). What it did, or None when nothing needs it.
pub async fn merge_manifests(
    catalog: &Catalog,
    t: &LoadedTable,
    o: &Options,
) -> Result<Option<String>> {
    let m = &t.metadata;
    let Some(s) = m.current_snapshot() else {
        return Ok(None);
    };
    let all = super::commit::current_manifests(catalog, m).await?;
    let empty = all
        .iter()
        .filter(|mf| super::commit::holds_nothing_live(mf))
        .count();
    // The same decision the commit makes: only small manifests merge.
    let many = !super::commit::mergeable(&all, o.min_manifests).is_empty();
    if empty == 0 && !many {
        return Ok(None);
    }
    let what = format!("{} manifests ({empty} without live files)", all.len());
    if o.dry_run {
        return Ok(Some(format!("would merge {what}")));
    }
    let mut summary = carried(m);
    summary.insert(MAINTENANCE.to_owned(), "manifests".into());
    let change = Change::Snapshot(SnapshotChange {
        summary,
        base_snapshot: Some(Some(s.snapshot_id())),
        exact_base: true,
        merge_manifests_at: Some(o.min_manifests),
        ..Default::default()
    });
    let done = match Committer::new(catalog)
        .commit(&t.ident, &uuid::Uuid::new_v4().to_string(), &change)
        .await
    {
        Ok(done) => done,
        Err(Error::BaseMoved { .. }) => {
            return Ok(Some(format!(
                "manifest merge abandoned: {} was committed to meanwhile (next run tries again)",
                display(&t.ident)
            )))
        }
        Err(e) => return Err(e),
    };
    let after = super::commit::current_manifests(catalog, &done.table.metadata)
        .await?
        .len();
    Ok(Some(format!("merged {what} into {after}")))
}

/// Files a snapshot references: its manifest list, manifests, and live data and
/// delete files.
async fn referenced(
    catalog: &Catalog,
    m: &TableMetadata,
    id: i64,
    out: &mut HashSet<String>,
) -> Result<()> {
    let Some(s) = m.snapshot_by_id(id) else {
        return Ok(());
    };
    out.insert(s.manifest_list().to_owned());
    let bytes = catalog.file_io.new_input(s.manifest_list())?.read().await?;
    for mf in ManifestList::parse_with_version(&bytes, m.format_version())?.entries() {
        out.insert(mf.manifest_path.clone());
        for e in mf.load_manifest(&catalog.file_io).await?.entries() {
            if e.is_alive() {
                out.insert(e.data_file().file_path().to_owned());
            }
        }
    }
    Ok(())
}

/// Snapshot expiry of one table, with the files only the expired snapshots held.
pub async fn expire(catalog: &Catalog, t: &LoadedTable, o: &Options) -> Result<Option<String>> {
    let m = &t.metadata;
    let Some(current) = m.current_snapshot_id() else {
        return Ok(None);
    };
    let mut snaps: Vec<_> = m.snapshots().collect();
    snaps.sort_by_key(|s| std::cmp::Reverse(s.sequence_number()));
    let now_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let young = now_ms - o.snapshot_age.as_millis() as i64;
    let mut keep: HashSet<i64> = HashSet::from([current]);
    keep.extend(
        snaps
            .iter()
            .take(o.retain_snapshots.max(1))
            .map(|s| s.snapshot_id()),
    );
    keep.extend(
        snaps
            .iter()
            .filter(|s| s.timestamp_ms() >= young)
            .map(|s| s.snapshot_id()),
    );
    // What recovery reads: the newest snapshot naming the job, and the newest with
    // Kafka offsets.
    for key in [CARRIED[0], KAFKA_OFFSETS] {
        if let Some(s) = snaps
            .iter()
            .find(|s| s.summary().additional_properties.contains_key(key))
        {
            keep.insert(s.snapshot_id());
        }
    }
    let gone: Vec<i64> = snaps
        .iter()
        .map(|s| s.snapshot_id())
        .filter(|id| !keep.contains(id))
        .collect();
    if gone.is_empty() {
        return Ok(None);
    }
    let mut held_by_gone = HashSet::new();
    for id in &gone {
        referenced(catalog, m, *id, &mut held_by_gone).await?;
    }
    let mut held_by_kept = HashSet::new();
    for id in &keep {
        referenced(catalog, m, *id, &mut held_by_kept).await?;
    }
    let files: Vec<&String> = held_by_gone.difference(&held_by_kept).collect();
    let what = format!(
        "{} of {} snapshots and {} files only they referenced",
        gone.len(),
        snaps.len(),
        files.len()
    );
    if o.dry_run {
        return Ok(Some(format!("would expire {what}")));
    }
    let change = Change::Metadata(MetadataChange {
        remove_snapshots: gone,
        ..Default::default()
    });
    Committer::new(catalog)
        .commit(&t.ident, &uuid::Uuid::new_v4().to_string(), &change)
        .await?;
    crate::failpoint::hit("maintain-after-expiry-commit");
    for f in files {
        catalog.file_io.delete(f).await?;
    }
    Ok(Some(format!("expired {what}")))
}

/// Every file under `dir`, with its modification time.
fn walk(dir: &Path, out: &mut Vec<(PathBuf, SystemTime)>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        match e.metadata() {
            Ok(md) if md.is_dir() => walk(&p, out),
            Ok(md) => out.push((p, md.modified().unwrap_or(SystemTime::now()))),
            Err(_) => {}
        }
    }
}

/// Orphan files of one table: under its location (its folder, or its prefix in an
/// S3 warehouse), referenced by no snapshot and no metadata file of its log, not in
/// `protect` (files of a checkpoint not yet committed), older than the window.
pub async fn remove_orphans(
    catalog: &Catalog,
    t: &LoadedTable,
    protect: &HashSet<String>,
    o: &Options,
) -> Result<Option<String>> {
    let m = &t.metadata;
    let mut refs = HashSet::new();
    for s in m.snapshots() {
        referenced(catalog, m, s.snapshot_id(), &mut refs).await?;
    }
    refs.insert(t.metadata_location.clone());
    for l in m.metadata_log() {
        refs.insert(l.metadata_file.clone());
    }
    let cutoff = SystemTime::now()
        .checked_sub(o.orphan_age)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let Some(root) = local_path(m.location()) else {
        // Object storage: the table's objects listed.
        let prefix = format!("{}/", m.location().trim_end_matches('/'));
        let orphans: Vec<(String, u64)> = catalog
            .list_objects(&prefix)
            .await?
            .into_iter()
            .filter(|(url, _, at)| *at < cutoff && !refs.contains(url) && !protect.contains(url))
            .map(|(url, size, _)| (url, size))
            .collect();
        if orphans.is_empty() {
            return Ok(None);
        }
        let what = format!(
            "{} orphan objects, {:.1} MiB",
            orphans.len(),
            orphans.iter().map(|o| o.1).sum::<u64>() as f64 / (1024.0 * 1024.0)
        );
        if o.dry_run {
            return Ok(Some(format!("would remove {what}")));
        }
        for (url, _) in &orphans {
            catalog.file_io.delete(url).await?;
        }
        return Ok(Some(format!("removed {what}")));
    };
    let protect: HashSet<PathBuf> = protect.iter().filter_map(|p| local_path(p)).collect();
    let refs: HashSet<PathBuf> = refs.iter().filter_map(|r| local_path(r)).collect();
    let mut all = Vec::new();
    walk(&root, &mut all);
    let orphans: Vec<&PathBuf> = all
        .iter()
        .filter(|(p, at)| *at < cutoff && !refs.contains(p) && !protect.contains(p))
        .map(|(p, _)| p)
        .collect();
    if orphans.is_empty() {
        return Ok(None);
    }
    let bytes: u64 = orphans
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    let what = format!(
        "{} orphan files, {:.1} MiB",
        orphans.len(),
        bytes as f64 / (1024.0 * 1024.0)
    );
    if o.dry_run {
        return Ok(Some(format!("would remove {what}")));
    }
    for p in orphans {
        std::fs::remove_file(p).map_err(|e| Error::Invalid(format!("{}: {e}", p.display())))?;
    }
    Ok(Some(format!("removed {what}")))
}
