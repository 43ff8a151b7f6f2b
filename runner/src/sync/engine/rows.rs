//! Row changes folded into their table's pending changes (binlog batches, Kafka
//! messages, changelog tables).

use super::*;
use crate::sync::error::SyncError;

impl Engine {
    /// Fold one batch of row changes into its table's pending changes. `dedup` says
    /// how rows already committed are recognised: binlog rows by the table's position
    /// watermark; Kafka messages by their offsets (checked before), never by position:
    /// several changes share one source position (a key change is delete, tombstone
    /// and create at one position) and partitions interleave positions.
    pub(super) async fn apply_rows(
        &mut self,
        b: crate::source::RowBatch,
        dedup: Dedup,
    ) -> Result<(), SyncError> {
        let table = b.table.clone();
        let name = format!("{}.{}", table.db, table.name);
        let first = b.position_after(0);
        let routed = self.job.router.route(&table.db, &table.name);
        let key = (ns_of(&routed.db), routed.table.clone());
        let held = |e: &mut Self, key, b: &crate::source::RowBatch| -> Result<(), SyncError> {
            let batches = vec![HeldBatch::new(b)?];
            e.hold(
                key,
                HeldItem::Rows {
                    batches,
                    kafka: None,
                },
            );
            Ok(())
        };
        // Rows a DDL's barrier committed (read again after a restart): not again,
        // and not into a table of their name that the DDL renamed or dropped.
        if dedup == Dedup::ByPosition
            && b.num_rows() > 0
            && self
                .barriers
                .get(&key)
                .is_some_and(|floor| b.position_after(b.num_rows() - 1) < *floor)
        {
            return Ok(());
        }
        if self.parked.contains(&key) {
            return held(self, key, &b);
        }
        let arrow = self.sink(&table, &first).await?.arrow.clone();
        let Some(b) = self.check_rows(b, &routed, &arrow, &key)? else {
            return Ok(()); // every row went to the dead-letter file
        };
        if self.parked.contains(&key) {
            // Parked by one of its rows just now (row-error-policy: park).
            return held(self, key, &b);
        }
        let s = self.sink(&table, &first).await?;
        let keep: Vec<bool> = (0..b.num_rows())
            .map(|i| {
                dedup == Dedup::ByOffset
                    || s.watermark
                        .as_ref()
                        .is_none_or(|w| b.position_after(i) > *w)
            })
            .collect();
        if !keep.iter().any(|k| *k) {
            return Ok(());
        }
        let arrow = s.arrow.clone();
        // A before image only identifies its row (the key; every column of a keyless
        // table): a row image that leaves the other columns out (MINIMAL, NOBLOB,
        // PostgreSQL's default replica identity) holds NULLs there, whatever the
        // table requires. It is read with every column optional, except into a
        // changelog table, which writes before images as rows.
        let before_schema = if s.changelog {
            arrow.clone()
        } else {
            optional(&arrow)
        };
        let conv = |x: &Option<RecordBatch>,
                    schema: &arrow_schema::SchemaRef|
         -> Result<Option<RecordBatch>, SyncError> {
            x.as_ref()
                .map(|r| to_iceberg(&name, &rename_batch(r, &routed)?, schema))
                .transpose()
        };
        let before = conv(&b.before, &before_schema)?;
        let after = match (&b.after, &before) {
            (Some(a), Some(old)) if !b.unchanged.is_empty() => {
                let a = rename_batch(a, &routed)?;
                let cols = crate::sync::convert::to_iceberg_columns(&name, &a, &arrow)?;
                Some(self.keep_unchanged(&key, &b, &a, old, cols, &keep).await?)
            }
            _ => conv(&b.after, &arrow)?,
        };
        let s = self.sink(&table, &first).await?;
        let last = b.position_after(b.num_rows() - 1);
        let had = s.pending.bytes;
        if s.changelog {
            let tag =
                |x: Option<RecordBatch>, op: &str| -> Result<Option<RecordBatch>, SyncError> {
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
            let grew = s.pending.bytes.saturating_sub(had);
            self.rows += keep.iter().filter(|k| **k).count() as u64;
            self.folded(key, grew);
            return Ok(());
        }
        s.pending
            .fold(&s.key, s.keyed, b.op, true, before, after, &keep, last);
        let grew = s.pending.bytes.saturating_sub(had);
        self.rows += keep.iter().filter(|k| **k).count() as u64;
        self.folded(key, grew);
        self.within_budget().await
    }

    /// Over the memory budget: the table holding the most commits now, inside the
    /// source transaction being read. Until the next checkpoint readers see part of
    /// that transaction: the log and the snapshot's summary say so.
    pub(super) async fn within_budget(&mut self) -> Result<(), SyncError> {
        let Some(k) = self.largest_over_budget() else {
            return Ok(());
        };
        tracing::warn!(
            "{}.{}: over the memory budget; committed inside a source transaction (the snapshot says {PARTIAL}=true; the next checkpoint completes the transaction)",
            k.0,
            k.1
        );
        self.partial = true;
        let r = self.flush_table(&k).await;
        self.partial = false;
        r
    }

    /// Values an update left unchanged and the source did not send (`RowBatch::
    /// unchanged`): each such cell of the new rows (`cols`, Iceberg types, from the
    /// renamed source rows `src`) takes the row's previous value: from an earlier row
    /// of this batch, from this checkpoint's pending row of its old key, or else from
    /// the committed table, located by the row index and read from its data file.
    async fn keep_unchanged(
        &mut self,
        key: &(String, String),
        b: &crate::source::RowBatch,
        src: &RecordBatch,
        before: &RecordBatch,
        mut cols: Vec<arrow_array::ArrayRef>,
        keep: &[bool],
    ) -> Result<RecordBatch, SyncError> {
        use crate::iceberg::locate;
        enum From {
            Row(usize),
            Pending(u32, u32),
            Committed(usize),
        }
        let name = format!("{}.{}", b.table.db, b.table.name);
        let s = self.sinks.get_mut(key).expect("the sink is open");
        if s.changelog {
            return Err(format!(
                "{name}: an update left values unchanged without sending them (PostgreSQL TOAST); a changelog table needs them: ALTER TABLE {} REPLICA IDENTITY FULL",
                b.table.name
            )
            .into());
        }
        let target = s.arrow.clone();
        let tcol = |c: usize| -> Option<usize> {
            let n = src.schema().field(c).name().clone();
            let f = target.fields();
            f.iter()
                .position(|f| *f.name() == n)
                .or_else(|| f.iter().position(|f| f.name().eq_ignore_ascii_case(&n)))
        };
        if !s.pending.bulk.is_empty() {
            s.pending.enter_bulk(&s.key, s.keyed);
        }
        let loose = Arc::new(arrow_schema::Schema::new(
            target
                .fields()
                .iter()
                .map(|f| f.as_ref().clone().with_nullable(true))
                .collect::<Vec<_>>(),
        ));
        let after = RecordBatch::try_new(loose, cols.clone()).map_err(|e| e.to_string())?;
        let mut from: HashMap<usize, From> = HashMap::new();
        let mut local: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut committed: Vec<u128> = Vec::new();
        let mut kb = Vec::new();
        let mut targets: BTreeSet<usize> = BTreeSet::new();
        for (r, k) in keep.iter().enumerate() {
            if !k {
                continue;
            }
            let mut any = false;
            for c in b.unchanged_in(r) {
                targets.insert(tcol(c).ok_or_else(|| {
                    format!(
                        "{name}: column {} is not in the table",
                        src.schema().field(c).name()
                    )
                })?);
                any = true;
            }
            if any {
                key_bytes(before, &s.key, r, &mut kb);
                let f = if let Some(&i) = local.get(&kb) {
                    From::Row(i)
                } else {
                    match s.pending.live.get(&kb) {
                        Some(Some((pb, pr))) => From::Pending(*pb, *pr),
                        Some(None) => {
                            return Err(format!(
                                "{name}: at {}: an update of a row deleted before it left values unchanged",
                                b.position_after(r)
                            )
                            .into())
                        }
                        None if s.pending.replace => {
                            return Err(format!(
                                "{name}: at {}: an update left values unchanged of a row the table does not hold",
                                b.position_after(r)
                            )
                            .into())
                        }
                        None => {
                            committed.push(twox_hash::XxHash3_128::oneshot(&kb));
                            From::Committed(committed.len() - 1)
                        }
                    }
                };
                from.insert(r, f);
            }
            key_bytes(&after, &s.key, r, &mut kb);
            local.insert(kb.clone(), r);
        }
        tracing::debug!(
            "{name}: {} updated rows kept unchanged values ({} from the committed table)",
            from.len(),
            committed.len()
        );
        // The committed rows' values, read from their data files.
        let mut fetched: Vec<arrow_array::ArrayRef> = Vec::new();
        let targets: Vec<usize> = targets.into_iter().collect();
        if !committed.is_empty() {
            self.ensure_index(key).await?;
            let s = &self.sinks[key];
            let ix = s.index.as_ref().expect("index ensured");
            let look = ix
                .lookup()
                .map_err(|e| format!("{name}: locating updated rows: {e}"))?;
            let locs = committed
                .iter()
                .map(|h| match look.nth(*h, 0) {
                    Ok(Some(l)) => Ok(l),
                    Ok(None) => Err(format!(
                        "{name}: an update left values unchanged of a row the table does not hold"
                    )),
                    Err(e) => Err(format!("{name}: locating updated rows: {e}")),
                })
                .collect::<Result<Vec<_>, _>>()?;
            fetched = locate::fetch(&self.catalog.file_io, &s.table, ix, &locs, &targets)
                .await
                .map_err(|e| {
                    SyncError::caused(
                        format_args!("{name}: reading the unchanged values of updated rows"),
                        &e,
                    )
                })?;
        }
        let s = &self.sinks[key];
        for (k, &t) in targets.iter().enumerate() {
            // Arrays: the new rows, the pending batches referred to, the fetched values.
            let mut arrays: Vec<arrow_array::ArrayRef> = vec![cols[t].clone()];
            let mut slot: HashMap<u32, usize> = HashMap::new();
            let committed_slot = fetched.get(k).map(|a| {
                arrays.push(a.clone());
                arrays.len() - 1
            });
            let mut idx: Vec<(usize, usize)> = (0..cols[t].len()).map(|r| (0, r)).collect();
            for (r, f) in from
                .iter()
                .map(|(r, f)| (*r, f))
                .collect::<BTreeMap<_, _>>()
            {
                if !b.unchanged_in(r).any(|c| tcol(c) == Some(t)) {
                    continue;
                }
                idx[r] = match f {
                    From::Row(i) => idx[*i],
                    From::Pending(pb, pr) => {
                        let a = *slot.entry(*pb).or_insert_with(|| {
                            arrays.push(s.pending.batches[*pb as usize].column(t).clone());
                            arrays.len() - 1
                        });
                        (a, *pr as usize)
                    }
                    From::Committed(j) => (committed_slot.expect("fetched"), *j),
                };
            }
            let refs: Vec<&dyn arrow_array::Array> = arrays.iter().map(|a| a.as_ref()).collect();
            cols[t] = arrow_select::interleave::interleave(&refs, &idx)
                .map_err(|e| format!("{name}: {e}"))?;
        }
        Ok(RecordBatch::try_new(target, cols).map_err(|e| format!("table {name}: {e}"))?)
    }

    /// Kafka: a message's rows apply unless its table holds its offset already; a
    /// parked table's are held with the offset.
    pub(super) async fn apply_message(
        &mut self,
        rows: Vec<crate::source::RowBatch>,
        part: String,
        next: i64,
        position: Position,
    ) -> Result<(), SyncError> {
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
        let (held, pending, table) = {
            let s = self.sink(&t, &position).await?;
            (
                crate::iceberg::commit::kafka_offsets(&s.table.metadata)
                    .get(&part)
                    .copied(),
                s.pending.offsets.get(&part).copied(),
                s.ident.to_string(),
            )
        };
        let floor = *self.floors.entry((table, part.clone())).or_insert(held);
        let seen = pending.or(floor);
        if seen.is_none_or(|f| next > f) {
            for b in rows {
                self.apply_rows(b, Dedup::ByOffset).await?;
            }
            if let Some(s) = self.sinks.get_mut(&key) {
                s.pending.offsets.insert(part, next);
            }
        }
        Ok(())
    }
}

impl Engine {
    /// Rows holding values the Iceberg table cannot take go to the row-error policy:
    /// an error, or out of the batch into the dead-letter file (None: no row left).
    fn check_rows(
        &mut self,
        b: crate::source::RowBatch,
        routed: &crate::sync::route::Routed,
        arrow: &arrow_schema::SchemaRef,
        key: &(String, String),
    ) -> Result<Option<crate::source::RowBatch>, SyncError> {
        use crate::sync::rowcheck;
        let images: Vec<(&str, RecordBatch)> = [("before", &b.before), ("after", &b.after)]
            .into_iter()
            .filter_map(|(l, x)| x.as_ref().map(|x| rename_batch(x, routed).map(|r| (l, r))))
            .collect::<Result<_, _>>()?;
        let mut bad = Vec::new();
        for (_, img) in &images {
            bad.extend(rowcheck::iceberg(img, arrow));
        }
        if bad.is_empty() {
            return Ok(Some(b));
        }
        let refs: Vec<(&str, &RecordBatch)> = images.iter().map(|(l, r)| (*l, r)).collect();
        let policy = self.job.pipeline.row_error_policy;
        let kept = rowcheck::settle_changes(policy, &self.dead_letter, &b, &refs, &bad)?;
        if policy == rowcheck::RowErrorPolicy::Park {
            let name = format!("{}.{}", key.0, key.1);
            let mut log = DdlLog::load(&self.state_dir)?;
            if rowcheck::park(&mut log, &name, &b, &bad, &self.dead_letter)? {
                self.parked.insert(key.clone());
            }
        }
        Ok(kept)
    }
}

/// How a batch's rows already committed are recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dedup {
    /// Rows at or below the table's position watermark were committed.
    ByPosition,
    /// The caller checked the message's offset; every row applies.
    ByOffset,
}

/// Fill the changelog columns of converted rows: the change kind, each row's source
/// position and source time.
pub(super) fn changelog_columns(
    r: RecordBatch,
    op: &str,
    b: &crate::source::RowBatch,
) -> Result<RecordBatch, SyncError> {
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
    Ok(RecordBatch::try_new(schema, cols).map_err(|e| e.to_string())?)
}

/// Snapshot rows of a changelog table: `_op` = snapshot, `_pos` = the snapshot point.
pub(super) fn snapshot_changelog_columns(
    r: RecordBatch,
    at: &Position,
) -> Result<RecordBatch, SyncError> {
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
    Ok(RecordBatch::try_new(schema, cols).map_err(|e| e.to_string())?)
}

/// `schema` with every field optional (field ids and other metadata kept).
fn optional(schema: &arrow_schema::SchemaRef) -> arrow_schema::SchemaRef {
    if schema.fields().iter().all(|f| f.is_nullable()) {
        return schema.clone();
    }
    let fields: Vec<arrow_schema::Field> = schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    std::sync::Arc::new(arrow_schema::Schema::new_with_metadata(
        fields,
        schema.metadata().clone(),
    ))
}
