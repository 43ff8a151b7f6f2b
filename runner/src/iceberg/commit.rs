//! The commit layer: a change is turned into `TableUpdate`s and `TableRequirement`s
//! against the table as it is now, applied with `TableMetadataBuilder`, written as the
//! next metadata file, and made current by a compare-and-swap of the metadata location
//! in the catalog.
//!
//! Lost races are retried against the reloaded table. Before each retry the committer
//! looks for its own commit (its metadata file in the table's metadata log, or its
//! commit id in a snapshot summary), so a swap whose reply was lost is never applied
//! twice. A row delta is rebased over concurrent appends only; if a concurrent commit
//! removed or rewrote files, or a data file its position deletes point at is gone,
//! the row delta fails instead.

use super::catalog::{display, local_path, Catalog, LoadedTable};
use super::convert;
use super::rules::{already_applied, check_base, fence_offsets};
use super::{Error, Result};
use iceberg::spec::{
    DataContentType, DataFile, FormatVersion, ManifestContentType, ManifestFile, ManifestList,
    ManifestListWriter, ManifestWriterBuilder, Operation, PartitionSpec, Snapshot,
    SnapshotReference, SnapshotRetention, SnapshotSummaryCollector, SortDirection, SortField,
    SortOrder, Summary, TableMetadata, TableMetadataBuilder, UnboundPartitionSpec,
};
use iceberg::{MetadataLocation, TableIdent, TableRequirement, TableUpdate};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::str::FromStr;
use std::sync::Arc;

/// Summary key holding the id of the commit that made a snapshot.
pub const COMMIT_ID: &str = "lakeshift.commit-id";
const MAX_ATTEMPTS: u32 = 20;

/// A snapshot to add: data files, delete files (equality and position), or both (a
/// row delta); or the removal of every file (truncate).
#[derive(Debug, Clone, Default)]
pub struct SnapshotChange {
    pub data_files: Vec<DataFile>,
    pub delete_files: Vec<DataFile>,
    /// Remove every live data and delete file (TRUNCATE TABLE); with data files, the
    /// table's rows are replaced by them in one snapshot.
    pub truncate: bool,
    /// Properties for the snapshot summary (checkpoint id, source position, job).
    pub summary: BTreeMap<String, String>,
    /// The snapshot the row delta was computed against (`Some(None)`: an empty
    /// table). When set, the commit fails if a later snapshot did more than append.
    pub base_snapshot: Option<Option<i64>>,
    /// Data files the position deletes point at: each must still be live.
    pub referenced_data_files: Vec<String>,
    /// Live files (data or delete, by path) this snapshot removes (a rewrite); the
    /// commit fails if one is no longer live.
    pub removed_files: Vec<String>,
    /// With `base_snapshot`: the commit applies only directly on that snapshot (a
    /// rewrite of the table's files read at it; any later commit, even an append,
    /// would be lost or doubled by it).
    pub exact_base: bool,
    /// Kafka partition offsets moved by this commit (fenced, merged into the summary).
    pub kafka: Option<KafkaCommit>,
    /// Carried small manifests of one kind (data or deletes, one partition spec) are
    /// merged into one once there are this many (None: [`MERGE_MANIFESTS_AT`]).
    pub merge_manifests_at: Option<usize>,
}

/// A commit merges the small manifests it carries, per kind and partition spec, once
/// there are this many: every checkpoint adds a data and a delete manifest, and
/// every reader opens each one (Iceberg's Java writers merge at 100 by default; a
/// local reader pays about a millisecond per manifest).
pub const MERGE_MANIFESTS_AT: usize = 32;
/// Manifests at least this large are never merged (rewriting them costs more than
/// opening them).
const SMALL_MANIFEST: i64 = 8 << 20;

/// A manifest whose every entry an earlier snapshot deleted: it describes nothing
/// live.
pub fn holds_nothing_live(mf: &ManifestFile) -> bool {
    mf.added_files_count == Some(0) && mf.existing_files_count == Some(0)
}

/// What manifests are merged by: (deletes?, partition spec id).
fn manifest_kind(mf: &ManifestFile) -> (bool, i32) {
    (
        mf.content == ManifestContentType::Deletes,
        mf.partition_spec_id,
    )
}

/// The kinds of small manifests a merge at `at` merges, with their counts.
pub fn mergeable(manifests: &[ManifestFile], at: usize) -> HashMap<(bool, i32), usize> {
    let mut groups: HashMap<(bool, i32), usize> = HashMap::new();
    for mf in manifests
        .iter()
        .filter(|mf| mf.manifest_length < SMALL_MANIFEST)
    {
        *groups.entry(manifest_kind(mf)).or_default() += 1;
    }
    groups.retain(|_, n| *n >= at.max(2));
    groups
}

/// Kafka offsets a commit moves: per `topic/partition`, the next offset the table
/// held before (None: none) and the one it holds after. The commit fails if the
/// table's offsets are not the expected ones (another consumer took the partition
/// over); the snapshot summary carries every partition's offset of the table.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct KafkaCommit {
    pub expect: BTreeMap<String, Option<i64>>,
    pub next: BTreeMap<String, i64>,
}

pub const KAFKA_OFFSETS: &str = "lakeshift.kafka-offsets";

/// The Kafka offsets of a table: from the newest snapshot (current, then its
/// ancestors) that records them.
pub fn kafka_offsets(m: &TableMetadata) -> BTreeMap<String, i64> {
    let mut at = m.current_snapshot_id();
    while let Some(id) = at {
        let Some(s) = m.snapshot_by_id(id) else {
            break;
        };
        if let Some(v) = s.summary().additional_properties.get(KAFKA_OFFSETS) {
            return serde_json::from_str(v).unwrap_or_default();
        }
        at = s.parent_snapshot_id();
    }
    BTreeMap::new()
}

/// A metadata-only change: a new current schema, and table properties.
#[derive(Debug, Clone, Default)]
pub struct MetadataChange {
    pub schema: Option<dialects::iceberg::IceTable>,
    /// The schema id and last column id the change was planned against.
    pub expect_schema: Option<(i32, i32)>,
    pub set_properties: BTreeMap<String, String>,
    pub remove_properties: Vec<String>,
    /// Snapshots to remove from the metadata (expiry; never the current one).
    pub remove_snapshots: Vec<i64>,
}

#[derive(Debug, Clone)]
pub enum Change {
    Metadata(MetadataChange),
    Snapshot(SnapshotChange),
}

/// What a commit did.
#[derive(Debug, Clone)]
pub struct Committed {
    pub table: LoadedTable,
    /// Attempts it took (1 when no race was lost).
    pub attempts: u32,
    /// Whether a lost reply was found to have been applied already.
    pub recovered: bool,
    pub snapshot_id: Option<i64>,
}

/// A commit's new metadata, written and not yet swapped in.
struct Prepared {
    /// The metadata location it was built on.
    base: String,
    location: String,
    metadata: TableMetadata,
    expired: Vec<iceberg::spec::MetadataLog>,
    snapshot_id: Option<i64>,
}

pub struct Committer<'a> {
    pub catalog: &'a Catalog,
    /// New tables are registered with the catalog's next write instead of at once
    /// ([`Catalog::defer_table`]).
    defer_creations: bool,
}

impl<'a> Committer<'a> {
    pub fn new(catalog: &'a Catalog) -> Self {
        Committer {
            catalog,
            defer_creations: false,
        }
    }

    /// A committer whose new tables are registered later, many at a time
    /// ([`Catalog::defer_table`]), when its catalog holds a job's lease (else at
    /// once, as [`Committer::new`]'s); the caller registers them
    /// ([`Catalog::register_deferred`]) before anything outside the catalog
    /// depends on them.
    pub fn deferring_creations(self) -> Self {
        Committer {
            defer_creations: true,
            ..self
        }
    }

    /// Create a table from a planned schema (`CreateTable` action).
    #[allow(clippy::too_many_arguments)]
    pub async fn create_table(
        &self,
        ns: &str,
        name: &str,
        planned: &dialects::iceberg::IceTable,
        partition: Option<&str>,
        sort_by: &[String],
    ) -> Result<LoadedTable> {
        let id = super::catalog::ident(ns, name)?;
        if self.catalog.metadata_location(&id).await?.is_some() {
            return Err(Error::TableExists(display(&id)));
        }
        self.catalog.ensure_namespace(ns).await?;
        let schema = convert::schema(planned, 0)?;
        let mut spec = UnboundPartitionSpec::builder();
        if let Some(expr) = partition {
            let (transform, col) = convert::partition_transform(expr)
                .ok_or_else(|| Error::Invalid(format!("unsupported partition {expr}")))?;
            let field = planned
                .fields
                .iter()
                .find(|f| f.name == col)
                .ok_or_else(|| Error::Invalid(format!("partition column {col} is unknown")))?;
            spec = spec.add_partition_field(field.id, format!("{col}_bucket"), transform)?;
        }
        let mut order = SortOrder::builder();
        if !sort_by.is_empty() {
            order.with_order_id(1);
            for c in sort_by {
                let f = planned
                    .fields
                    .iter()
                    .find(|f| f.name == *c)
                    .ok_or_else(|| Error::Invalid(format!("sort column {c} is unknown")))?;
                order.with_sort_field(SortField {
                    source_id: f.id,
                    transform: iceberg::spec::Transform::Identity,
                    direction: SortDirection::Ascending,
                    null_order: iceberg::spec::NullOrder::First,
                });
            }
        }
        let order = order.build(&schema)?;
        let mut location = self.catalog.table_location(ns, name);
        // A renamed table keeps its folder: never share one with it. A folder no
        // table names (a creation a killed job never registered) is taken again.
        if local_path(&location).is_some_and(|p| p.exists())
            && self.catalog.location_in_use(&location).await?
        {
            location = format!(
                "{location}-{}",
                &uuid::Uuid::new_v4().simple().to_string()[..8]
            );
        }
        let format = match planned.format_version {
            3 => FormatVersion::V3,
            _ => FormatVersion::V2,
        };
        let props: HashMap<String, String> = planned
            .properties
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let metadata = TableMetadataBuilder::new(
            schema,
            spec.build(),
            order,
            location.clone(),
            format,
            props,
        )?
        .build()?
        .metadata;
        // The builder assigns field ids afresh; they must be the planned ones.
        let got = convert::ice_table(ns, name, &metadata)?;
        let ids = |t: &dialects::iceberg::IceTable| {
            t.fields
                .iter()
                .map(|f| (f.id, f.name.clone()))
                .collect::<Vec<_>>()
        };
        if ids(&got) != ids(planned) {
            return Err(Error::Invalid(format!(
                "table {ns}.{name}: field ids {:?} differ from the plan {:?}",
                ids(&got),
                ids(planned)
            )));
        }
        let loc = MetadataLocation::new_with_metadata(location, &metadata);
        metadata.write_to(&self.catalog.file_io, &loc).await?;
        self.catalog.remember(&loc.to_string(), &metadata);
        // Only a run that holds its job defers: no other process creates its tables.
        // Processes that share tables (a Kafka group's members) register at once, so
        // the member a table's partition moves to finds it.
        if self.defer_creations && self.catalog.holds_job() {
            self.catalog.defer_table(&id, &loc.to_string());
        } else {
            self.catalog.insert_table(&id, &loc.to_string()).await?;
        }
        Ok(LoadedTable {
            ident: id,
            metadata_location: loc.to_string(),
            metadata,
        })
    }

    /// Commit one change to one table, atomically, retrying lost races. `commit_id`
    /// identifies the commit across retries and process restarts.
    pub async fn commit(
        &self,
        id: &TableIdent,
        commit_id: &str,
        change: &Change,
    ) -> Result<Committed> {
        self.commit_from(id, commit_id, change, Vec::new(), false, 1)
            .await
    }

    /// Commit a change to each of several tables: every table's files and metadata
    /// first, then one durability barrier and one catalog transaction that swaps them
    /// all. A table whose swap lost a race (or whose reply was lost) goes on alone,
    /// as [`Committer::commit`] would. One result per item, in order.
    pub async fn commit_many(
        &self,
        items: &[(TableIdent, String, Change)],
    ) -> Vec<Result<Committed>> {
        let mut out: Vec<Option<Result<Committed>>> = items.iter().map(|_| None).collect();
        let mut staged = Vec::with_capacity(items.len());
        for (i, (id, commit_id, change)) in items.iter().enumerate() {
            let prepared = match self.catalog.load_required(id).await {
                Ok(base) => self.prepare(&base, commit_id, change, 1).await,
                Err(e) => Err(e),
            };
            match prepared {
                Ok(p) => staged.push((i, p)),
                Err(e) => out[i] = Some(Err(e)),
            }
        }
        let swaps: Vec<_> = staged
            .iter()
            .map(|(i, p)| (items[*i].0.clone(), p.base.clone(), p.location.clone()))
            .collect();
        let swapped = if swaps.is_empty() {
            Ok(Vec::new())
        } else {
            self.catalog.swap_many(&swaps).await
        };
        let lost = matches!(swapped, Err(Error::ReplyLost(_)) | Err(Error::Sql(_)));
        let swapped = match swapped {
            Ok(s) => s,
            Err(_) if lost => vec![false; staged.len()],
            Err(e) => {
                let why = e.to_string();
                let gone = e.connection_lost();
                for (i, _) in &staged {
                    out[*i] = Some(Err(if gone {
                        Error::Unreachable(why.clone())
                    } else {
                        Error::Invalid(why.clone())
                    }));
                }
                return out.into_iter().map(|r| r.expect("filled")).collect();
            }
        };
        for ((i, p), done) in staged.into_iter().zip(swapped) {
            let (id, commit_id, change) = &items[i];
            out[i] = Some(if done {
                Ok(self.landed(id, p, 1))
            } else {
                // Unknown outcome (`lost`) or a lost race: on alone, looking for
                // this commit first.
                self.commit_from(id, commit_id, change, vec![p.location], lost, 2)
                    .await
            });
        }
        out.into_iter().map(|r| r.expect("filled")).collect()
    }

    /// The attempts of a commit from attempt `first` on; `written`: metadata files
    /// of earlier attempts, `reply_lost`: whether one of them may have applied.
    async fn commit_from(
        &self,
        id: &TableIdent,
        commit_id: &str,
        change: &Change,
        mut written: Vec<String>,
        mut reply_lost: bool,
        first: u32,
    ) -> Result<Committed> {
        for attempt in first..=MAX_ATTEMPTS {
            let base = self.catalog.load_required(id).await?;
            if attempt > 1 {
                if let Some(snap) = already_applied(&base, commit_id, &written) {
                    return Ok(Committed {
                        table: base,
                        attempts: attempt,
                        recovered: reply_lost,
                        snapshot_id: snap,
                    });
                }
            }
            let p = self.prepare(&base, commit_id, change, attempt).await?;
            written.push(p.location.clone());
            match self.catalog.swap(id, &p.base, &p.location).await {
                Ok(true) => return Ok(self.landed(id, p, attempt)),
                Ok(false) => continue,
                Err(Error::ReplyLost(_)) | Err(Error::Sql(_)) => {
                    // Unknown outcome: the next attempt looks for this commit first.
                    reply_lost = true;
                    continue;
                }
                Err(e) => return Err(e),
            }
        }
        Err(Error::Contention {
            table: display(id),
            attempts: MAX_ATTEMPTS,
        })
    }

    /// A prepared commit whose swap landed: the table as it now is (metadata files
    /// the builder expired are removed when the table asks for it).
    fn landed(&self, id: &TableIdent, p: Prepared, attempts: u32) -> Committed {
        self.expire_metadata(&p.metadata, &p.expired);
        Committed {
            table: LoadedTable {
                ident: id.clone(),
                metadata_location: p.location,
                metadata: p.metadata,
            },
            attempts,
            recovered: false,
            snapshot_id: p.snapshot_id,
        }
    }

    /// One attempt's new metadata on top of `base`, written (with the manifests it
    /// names) but not yet swapped in.
    async fn prepare(
        &self,
        base: &LoadedTable,
        commit_id: &str,
        change: &Change,
        attempt: u32,
    ) -> Result<Prepared> {
        let id = &base.ident;
        let fenced;
        let change = match change {
            Change::Snapshot(sc) if sc.kafka.is_some() => {
                let k = sc.kafka.as_ref().expect("checked");
                let have = fence_offsets(&display(id), kafka_offsets(&base.metadata), k)?;
                let mut sc = sc.clone();
                sc.summary.insert(
                    KAFKA_OFFSETS.to_owned(),
                    serde_json::to_string(&have).expect("serialise"),
                );
                fenced = Change::Snapshot(sc);
                &fenced
            }
            c => c,
        };
        let (updates, requirements, snapshot_id) =
            self.stage(base, commit_id, change, attempt).await?;
        for r in &requirements {
            r.check(Some(&base.metadata)).map_err(|e| Error::Stale {
                table: display(id),
                reason: e.message().to_string(),
            })?;
        }
        let mut b = TableMetadataBuilder::new_from_metadata(
            base.metadata.clone(),
            Some(base.metadata_location.clone()),
        );
        for u in updates {
            b = u.apply(b)?;
        }
        let built = b.build()?;
        let loc = MetadataLocation::from_str(&base.metadata_location)?
            .with_next_version()
            .with_new_metadata(&built.metadata);
        built.metadata.write_to(&self.catalog.file_io, &loc).await?;
        let location = loc.to_string();
        self.catalog.remember(&location, &built.metadata);
        Ok(Prepared {
            base: base.metadata_location.clone(),
            location,
            metadata: built.metadata,
            expired: built.expired_metadata_logs,
            snapshot_id,
        })
    }

    /// Delete metadata files the builder expired, when the table asks for it.
    fn expire_metadata(&self, m: &TableMetadata, expired: &[iceberg::spec::MetadataLog]) {
        let enabled = m
            .properties()
            .get("write.metadata.delete-after-commit.enabled")
            .is_some_and(|v| v == "true");
        if !enabled {
            return;
        }
        for e in expired {
            // Best effort: a file left behind costs space, not correctness.
            if let Some(p) = local_path(&e.metadata_file) {
                let _ = std::fs::remove_file(p);
            } else {
                let (io, f) = (self.catalog.file_io.clone(), e.metadata_file.clone());
                tokio::spawn(async move {
                    let _ = io.delete(f).await;
                });
            }
        }
    }

    async fn stage(
        &self,
        base: &LoadedTable,
        commit_id: &str,
        change: &Change,
        attempt: u32,
    ) -> Result<(Vec<TableUpdate>, Vec<TableRequirement>, Option<i64>)> {
        let m = &base.metadata;
        let mut updates = Vec::new();
        let mut reqs = vec![TableRequirement::UuidMatch { uuid: m.uuid() }];
        match change {
            Change::Metadata(mc) => {
                if let Some(t) = &mc.schema {
                    if let Some((schema_id, last_col)) = mc.expect_schema {
                        reqs.push(TableRequirement::CurrentSchemaIdMatch {
                            current_schema_id: schema_id,
                        });
                        reqs.push(TableRequirement::LastAssignedFieldIdMatch {
                            last_assigned_field_id: last_col,
                        });
                    }
                    let next_id = m.schemas_iter().map(|s| s.schema_id()).max().unwrap_or(0) + 1;
                    let schema = convert::schema(t, next_id)?;
                    updates.push(TableUpdate::AddSchema { schema });
                    updates.push(TableUpdate::SetCurrentSchema {
                        schema_id: TableMetadataBuilder::LAST_ADDED,
                    });
                }
                if !mc.set_properties.is_empty() {
                    updates.push(TableUpdate::SetProperties {
                        updates: mc
                            .set_properties
                            .iter()
                            .map(|(k, v)| (k.clone(), v.clone()))
                            .collect(),
                    });
                }
                if !mc.remove_properties.is_empty() {
                    updates.push(TableUpdate::RemoveProperties {
                        removals: mc.remove_properties.clone(),
                    });
                }
                if !mc.remove_snapshots.is_empty() {
                    if let Some(cur) = m.current_snapshot_id() {
                        if mc.remove_snapshots.contains(&cur) {
                            return Err(Error::Invalid(format!(
                                "table {}: the current snapshot {cur} cannot be expired",
                                display(&base.ident)
                            )));
                        }
                        reqs.push(TableRequirement::RefSnapshotIdMatch {
                            r#ref: "main".into(),
                            snapshot_id: Some(cur),
                        });
                    }
                    let ids: Vec<i64> = mc
                        .remove_snapshots
                        .iter()
                        .copied()
                        .filter(|id| m.snapshot_by_id(*id).is_some())
                        .collect();
                    updates.push(TableUpdate::RemoveSnapshots { snapshot_ids: ids });
                }
                Ok((updates, reqs, None))
            }
            Change::Snapshot(sc) => {
                let (snapshot, main) = self.stage_snapshot(base, commit_id, sc, attempt).await?;
                reqs.push(TableRequirement::RefSnapshotIdMatch {
                    r#ref: "main".into(),
                    snapshot_id: main,
                });
                let sid = snapshot.snapshot_id();
                updates.push(TableUpdate::AddSnapshot { snapshot });
                updates.push(TableUpdate::SetSnapshotRef {
                    ref_name: "main".into(),
                    reference: SnapshotReference::new(
                        sid,
                        SnapshotRetention::branch(None, None, None),
                    ),
                });
                Ok((updates, reqs, Some(sid)))
            }
        }
    }

    /// Write the manifests and manifest list of a new snapshot on top of `base`.
    async fn stage_snapshot(
        &self,
        base: &LoadedTable,
        commit_id: &str,
        sc: &SnapshotChange,
        attempt: u32,
    ) -> Result<(Snapshot, Option<i64>)> {
        let m = &base.metadata;
        let table = display(&base.ident);
        if m.format_version() != FormatVersion::V2 {
            return Err(Error::Invalid(format!(
                "table {table}: lakeshift writes snapshots to format v2 tables only (this one is {})",
                m.format_version()
            )));
        }
        let file_io = &self.catalog.file_io;
        let parent = m.current_snapshot().map(|s| s.snapshot_id());
        if let Some(expected) = sc.base_snapshot {
            check_base(m, &table, expected, parent)?;
            if sc.exact_base && expected != parent {
                return Err(Error::BaseMoved {
                    table: table.clone(),
                    reason: "the table was committed to after the rewrite read it".into(),
                });
            }
        }
        let existing: Vec<ManifestFile> = match m.current_snapshot() {
            Some(s) => {
                let bytes = file_io.new_input(s.manifest_list())?.read().await?;
                ManifestList::parse_with_version(&bytes, m.format_version())?
                    .consume_entries()
                    .into_iter()
                    .collect()
            }
            None => Vec::new(),
        };
        // A manifest whose every entry an earlier snapshot deleted describes nothing
        // live: it is not carried (readers would open it for nothing).
        let carried_before = existing.len();
        let existing: Vec<ManifestFile> = existing
            .into_iter()
            .filter(|mf| !holds_nothing_live(mf))
            .collect();
        self.check_referenced(&existing, sc, &table).await?;
        let seq = m.last_sequence_number() + 1;
        let snapshot_id = new_snapshot_id(m);
        let schema = m.current_schema().clone();
        let spec = m.default_partition_spec().as_ref().clone();
        let mut collector = SnapshotSummaryCollector::default();
        let mut manifests: Vec<ManifestFile> = Vec::new();
        // Manifests merged or dropped (the commit's own files aside).
        let mut manifests_rewritten = false;
        let prefix = format!("{}/metadata/{}", m.location(), uuid::Uuid::new_v4());
        let mut n = 0;
        let mut out_path = || {
            n += 1;
            format!("{prefix}-m{n}.avro")
        };
        if !sc.data_files.is_empty() {
            let mut w = ManifestWriterBuilder::new(
                file_io.new_output(out_path())?,
                Some(snapshot_id),
                schema.clone(),
                spec.clone(),
            )
            .build_v2_data();
            for f in &sc.data_files {
                collector.add_file(f, schema.clone(), Arc::new(spec.clone()));
                w.add_file(f.clone(), seq)?;
            }
            manifests.push(w.write_manifest_file().await?);
        }
        if !sc.delete_files.is_empty() {
            let mut w = ManifestWriterBuilder::new(
                file_io.new_output(out_path())?,
                Some(snapshot_id),
                schema.clone(),
                spec.clone(),
            )
            .build_v2_deletes();
            for f in &sc.delete_files {
                if f.content_type() == DataContentType::Data {
                    return Err(Error::Invalid(format!(
                        "table {table}: {} is a data file, not a delete file",
                        f.file_path()
                    )));
                }
                collector.add_file(f, schema.clone(), Arc::new(spec.clone()));
                w.add_file(f.clone(), seq)?;
            }
            manifests.push(w.write_manifest_file().await?);
        }
        if sc.truncate {
            let removed = self
                .removal_manifests(m, &existing, snapshot_id, &mut collector, &mut out_path)
                .await?;
            manifests.extend(removed);
        } else if !sc.removed_files.is_empty() {
            let kept = self
                .without_files(
                    base,
                    existing,
                    &sc.removed_files,
                    snapshot_id,
                    &mut collector,
                    &mut out_path,
                )
                .await?;
            manifests.extend(kept);
        } else {
            let at = sc.merge_manifests_at.unwrap_or(MERGE_MANIFESTS_AT);
            let (carried, merged) = self
                .merge_small(m, existing, at, snapshot_id, &mut out_path)
                .await?;
            manifests_rewritten = merged > 0 || carried_before > carried.len();
            manifests.extend(carried);
        }
        let list_path = format!(
            "{}/metadata/snap-{snapshot_id}-{attempt}-{}.avro",
            m.location(),
            uuid::Uuid::new_v4()
        );
        let mut lw = ManifestListWriter::v2(
            file_io.new_output(&list_path)?.writer().await?,
            snapshot_id,
            parent,
            seq,
        );
        lw.add_manifests(manifests.into_iter())?;
        lw.close().await?;

        let mut props = collector.build();
        add_totals(m, &mut props, sc.truncate);
        for (k, v) in &sc.summary {
            props.insert(k.clone(), v.clone());
        }
        props.insert(COMMIT_ID.to_owned(), commit_id.to_owned());
        let rewrite = !sc.removed_files.is_empty()
            || (manifests_rewritten && sc.data_files.is_empty() && sc.delete_files.is_empty());
        let operation = if sc.truncate && sc.data_files.is_empty() {
            Operation::Delete
        } else if sc.truncate {
            Operation::Overwrite
        } else if rewrite {
            // Files rewritten or manifests merged, the rows unchanged: readers of
            // appends (streaming, incremental) must not read the rows again.
            Operation::Replace
        } else if sc.delete_files.is_empty() {
            Operation::Append
        } else {
            Operation::Overwrite
        };
        let snapshot = Snapshot::builder()
            .with_snapshot_id(snapshot_id)
            .with_parent_snapshot_id(parent)
            .with_sequence_number(seq)
            .with_timestamp_ms(chrono_now_ms().max(m.last_updated_ms()))
            .with_manifest_list(list_path)
            .with_summary(Summary {
                operation,
                additional_properties: props,
            })
            .with_schema_id(m.current_schema_id())
            .build();
        Ok((snapshot, parent))
    }

    /// Position deletes point at data files: each must still be live in the table.
    async fn check_referenced(
        &self,
        existing: &[ManifestFile],
        sc: &SnapshotChange,
        table: &str,
    ) -> Result<()> {
        let file_io = &self.catalog.file_io;
        if sc.referenced_data_files.is_empty() {
            return Ok(());
        }
        let mut live = HashSet::new();
        for mf in existing
            .iter()
            .filter(|mf| mf.content == ManifestContentType::Data)
        {
            for e in mf.load_manifest(file_io).await?.entries() {
                if e.is_alive() {
                    live.insert(e.data_file().file_path().to_owned());
                }
            }
        }
        if let Some(gone) = sc
            .referenced_data_files
            .iter()
            .find(|p| !live.contains(p.as_str()))
        {
            return Err(Error::BaseMoved {
                table: table.to_owned(),
                reason: format!(
                    "data file {gone}, which position deletes point at, is no longer in the table"
                ),
            });
        }
        Ok(())
    }

    /// The current manifests with the live files `removed` marked deleted: a manifest
    /// holding none of them is kept as it is; one holding some is written again, those
    /// entries deleted and the others existing (their sequence numbers kept).
    async fn without_files(
        &self,
        base: &LoadedTable,
        existing: Vec<ManifestFile>,
        removed: &[String],
        snapshot_id: i64,
        collector: &mut SnapshotSummaryCollector,
        out_path: &mut impl FnMut() -> String,
    ) -> Result<Vec<ManifestFile>> {
        let (m, table) = (&base.metadata, display(&base.ident));
        let file_io = &self.catalog.file_io;
        let schema = m.current_schema().clone();
        let wanted: HashSet<&str> = removed.iter().map(String::as_str).collect();
        let mut found = HashSet::new();
        let mut out = Vec::new();
        for mf in existing {
            let manifest = mf.load_manifest(file_io).await?;
            let hit = manifest
                .entries()
                .iter()
                .any(|e| e.is_alive() && wanted.contains(e.data_file().file_path()));
            if !hit {
                out.push(mf);
                continue;
            }
            let (spec, mut w) = self.rewritten_manifest(m, &mf, snapshot_id, out_path())?;
            for e in manifest.entries() {
                if !e.is_alive() {
                    continue;
                }
                let f = e.data_file().clone();
                let seq = e.sequence_number().unwrap_or(0);
                if wanted.contains(f.file_path()) {
                    found.insert(f.file_path().to_owned());
                    collector.remove_file(&f, schema.clone(), Arc::new(spec.clone()));
                    w.add_delete_file(f, seq, e.file_sequence_number)?;
                } else {
                    let sid = e.snapshot_id().unwrap_or(snapshot_id);
                    w.add_existing_file(f, sid, seq, e.file_sequence_number)?;
                }
            }
            out.push(w.write_manifest_file().await?);
        }
        if let Some(gone) = removed.iter().find(|p| !found.contains(p.as_str())) {
            return Err(Error::BaseMoved {
                table,
                reason: format!("{gone}, which the rewrite replaces, is no longer in the table"),
            });
        }
        Ok(out)
    }

    /// The carried manifests with the small ones of each kind and partition spec
    /// merged into one when there are at least `at` of them (their live entries as
    /// existing, sequence numbers kept); and how many were merged.
    async fn merge_small(
        &self,
        m: &TableMetadata,
        existing: Vec<ManifestFile>,
        at: usize,
        snapshot_id: i64,
        out_path: &mut impl FnMut() -> String,
    ) -> Result<(Vec<ManifestFile>, usize)> {
        let groups = mergeable(&existing, at);
        if groups.is_empty() {
            return Ok((existing, 0));
        }
        let mut out = Vec::new();
        let mut writers: Vec<((bool, i32), iceberg::spec::ManifestWriter)> = Vec::new();
        let mut merged = 0;
        for mf in existing {
            let k = manifest_kind(&mf);
            if mf.manifest_length >= SMALL_MANIFEST || !groups.contains_key(&k) {
                out.push(mf);
                continue;
            }
            merged += 1;
            let i = match writers.iter().position(|(wk, _)| *wk == k) {
                Some(i) => i,
                None => {
                    let (_, w) = self.rewritten_manifest(m, &mf, snapshot_id, out_path())?;
                    writers.push((k, w));
                    writers.len() - 1
                }
            };
            let w = &mut writers[i].1;
            for e in mf.load_manifest(&self.catalog.file_io).await?.entries() {
                if !e.is_alive() {
                    continue;
                }
                w.add_existing_file(
                    e.data_file().clone(),
                    e.snapshot_id().unwrap_or(mf.added_snapshot_id),
                    e.sequence_number().unwrap_or(0),
                    e.file_sequence_number,
                )?;
            }
        }
        for (_, w) in writers {
            out.push(w.write_manifest_file().await?);
        }
        Ok((out, merged))
    }

    /// A writer for a new version of manifest `mf` in snapshot `snapshot_id` (same
    /// content and partition spec), and that spec.
    fn rewritten_manifest(
        &self,
        m: &TableMetadata,
        mf: &ManifestFile,
        snapshot_id: i64,
        path: String,
    ) -> Result<(PartitionSpec, iceberg::spec::ManifestWriter)> {
        let spec = m
            .partition_spec_by_id(mf.partition_spec_id)
            .map(|s| s.as_ref().clone())
            .unwrap_or_else(|| m.default_partition_spec().as_ref().clone());
        let builder = ManifestWriterBuilder::new(
            self.catalog.file_io.new_output(path)?,
            Some(snapshot_id),
            m.current_schema().clone(),
            spec.clone(),
        );
        let w = match mf.content {
            ManifestContentType::Data => builder.build_v2_data(),
            ManifestContentType::Deletes => builder.build_v2_deletes(),
        };
        Ok((spec, w))
    }

    /// A truncate: every live file of the current manifests marked deleted, in new
    /// manifests of `snapshot_id`.
    async fn removal_manifests(
        &self,
        m: &TableMetadata,
        existing: &[ManifestFile],
        snapshot_id: i64,
        collector: &mut SnapshotSummaryCollector,
        out_path: &mut impl FnMut() -> String,
    ) -> Result<Vec<ManifestFile>> {
        let file_io = &self.catalog.file_io;
        let schema = m.current_schema().clone();
        let mut manifests = Vec::new();
        for mf in existing {
            let manifest = mf.load_manifest(file_io).await?;
            let (spec, mut w) = self.rewritten_manifest(m, mf, snapshot_id, out_path())?;
            let mut any = false;
            for e in manifest.entries() {
                if !e.is_alive() {
                    continue;
                }
                any = true;
                collector.remove_file(e.data_file(), schema.clone(), Arc::new(spec.clone()));
                w.add_delete_file(
                    e.data_file().clone(),
                    e.sequence_number().unwrap_or(0),
                    e.file_sequence_number,
                )?;
            }
            if any {
                manifests.push(w.write_manifest_file().await?);
            }
        }
        Ok(manifests)
    }
}

fn chrono_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn new_snapshot_id(m: &TableMetadata) -> i64 {
    loop {
        let u = uuid::Uuid::new_v4().as_u128();
        let id = ((u >> 64) as i64 ^ u as i64) & i64::MAX;
        if id != 0 && m.snapshot_by_id(id).is_none() {
            return id;
        }
    }
}

/// Totals of the new snapshot from its parent's totals and its own changes.
fn add_totals(m: &TableMetadata, props: &mut HashMap<String, String>, truncate: bool) {
    let prev = |k: &str| -> i64 {
        if truncate {
            return 0;
        }
        m.current_snapshot()
            .and_then(|s| s.summary().additional_properties.get(k).cloned())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let get = |p: &HashMap<String, String>, k: &str| -> i64 {
        p.get(k).and_then(|v| v.parse().ok()).unwrap_or(0)
    };
    let pairs = [
        ("total-records", "added-records", "deleted-records"),
        ("total-data-files", "added-data-files", "deleted-data-files"),
        (
            "total-delete-files",
            "added-delete-files",
            "removed-delete-files",
        ),
        ("total-files-size", "added-files-size", "removed-files-size"),
        (
            "total-equality-deletes",
            "added-equality-deletes",
            "removed-equality-deletes",
        ),
        (
            "total-position-deletes",
            "added-position-deletes",
            "removed-position-deletes",
        ),
    ];
    for (total, added, removed) in pairs {
        let v = if truncate {
            // Everything before is gone: only what this snapshot adds.
            get(props, added)
        } else {
            (prev(total) + get(props, added) - get(props, removed)).max(0)
        };
        props.insert(total.to_owned(), v.to_string());
    }
}

/// The live files (data and delete) of the current snapshot.
pub async fn live_entries(catalog: &Catalog, m: &TableMetadata) -> Result<Vec<DataFile>> {
    live_entries_of(catalog, &current_manifests(catalog, m).await?).await
}

/// The live files (data and delete) the manifests list.
pub async fn live_entries_of(
    catalog: &Catalog,
    manifests: &[ManifestFile],
) -> Result<Vec<DataFile>> {
    let mut out = Vec::new();
    for mf in manifests {
        for e in mf.load_manifest(&catalog.file_io).await?.entries() {
            if e.is_alive() {
                out.push(e.data_file().clone());
            }
        }
    }
    Ok(out)
}

/// The manifests of the current snapshot (none without one).
pub async fn current_manifests(catalog: &Catalog, m: &TableMetadata) -> Result<Vec<ManifestFile>> {
    let Some(s) = m.current_snapshot() else {
        return Ok(Vec::new());
    };
    let bytes = catalog.file_io.new_input(s.manifest_list())?.read().await?;
    Ok(
        ManifestList::parse_with_version(&bytes, m.format_version())?
            .consume_entries()
            .into_iter()
            .collect(),
    )
}

/// The live files of the current snapshot: (content, path, record count).
pub async fn live_files(
    catalog: &Catalog,
    t: &LoadedTable,
) -> Result<Vec<(DataContentType, String, u64)>> {
    Ok(live_entries(catalog, &t.metadata)
        .await?
        .into_iter()
        .map(|f| (f.content_type(), f.file_path().to_owned(), f.record_count()))
        .collect())
}

/// The unpartitioned spec of a table, for writers.
pub fn spec(m: &TableMetadata) -> PartitionSpec {
    m.default_partition_spec().as_ref().clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(content: ManifestContentType, length: i64, live: u32) -> ManifestFile {
        ManifestFile {
            manifest_path: String::new(),
            manifest_length: length,
            partition_spec_id: 0,
            content,
            sequence_number: 1,
            min_sequence_number: 1,
            added_snapshot_id: 1,
            added_files_count: Some(live),
            existing_files_count: Some(0),
            deleted_files_count: Some(1),
            added_rows_count: None,
            existing_rows_count: None,
            deleted_rows_count: None,
            partitions: None,
            key_metadata: None,
            first_row_id: None,
        }
    }

    /// `maintain` decides with `mergeable` whether to commit a merge: large manifests
    /// never count (the commit would merge nothing), kinds count apart.
    #[test]
    fn only_small_manifests_of_one_kind_make_a_merge() {
        use ManifestContentType::{Data, Deletes};
        let big = SMALL_MANIFEST;
        let mut list: Vec<ManifestFile> = (0..8).map(|_| manifest(Data, big, 1)).collect();
        list.push(manifest(Data, 100, 1));
        assert!(mergeable(&list, 2).is_empty(), "large ones are not merged");
        list.push(manifest(Deletes, 100, 1));
        assert!(mergeable(&list, 2).is_empty(), "one small of each kind");
        list.push(manifest(Data, 100, 1));
        assert_eq!(mergeable(&list, 2), HashMap::from([((false, 0), 2)]));
        assert!(mergeable(&list, 3).is_empty());
        assert!(holds_nothing_live(&manifest(Data, 100, 0)));
        assert!(!holds_nothing_live(&manifest(Data, 100, 1)));
    }
}
