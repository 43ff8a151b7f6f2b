//! Row changes folded by key, rendered as statements and committed per checkpoint;
//! released changes of parked tables.

use super::*;
use crate::sync::error::SyncError;
use crate::sync::rowcheck;

/// What one pending change costs besides its texts (see `fold_rows`).
const ENTRY_BYTES: usize = 112;

impl RdbEngine {
    /// Pending changes past `memory-budget-mib`: commit them now (inside a source
    /// transaction if need be; the position records how far into it).
    pub(super) fn over_budget(&self) -> bool {
        self.pending_bytes >= self.job.pipeline.pending_budget()
    }

    /// Whether a delete in this table runs a foreign key's ON DELETE action.
    pub(super) fn acts_on_delete(&self, b: &crate::source::RowBatch) -> bool {
        let r = self.job.router.route(&b.table.db, &b.table.name);
        self.fk_actions
            .contains_key(&(r.db.clone(), r.table.clone()))
    }

    /// Fold a batch of row changes into the table's pending changes.
    pub(super) async fn fold_rows(
        &mut self,
        table: &crate::source::decode::SourceTable,
        op: Op,
        before: Option<&RecordBatch>,
        after: Option<&RecordBatch>,
    ) -> Result<(), SyncError> {
        let (k, routed) = self.table_for(table).await?;
        let d = self.dialect;
        let rename = |b: Option<&RecordBatch>| b.map(|b| rename_batch(b, &routed)).transpose();
        let (before, after) = (rename(before)?, rename(after)?);
        let any = after
            .as_ref()
            .or(before.as_ref())
            .expect("rows have an image");
        let tt = self.ttable(&k)?;
        // Target column -> batch column (a column the source table lacks, when several
        // tables route into one, is written as DEFAULT).
        let schema = any.schema();
        let find = |name: &str| {
            schema
                .fields()
                .iter()
                .position(|f| f.name().eq_ignore_ascii_case(name))
        };
        let all: Vec<(Option<usize>, &ColSpec)> = tt
            .names
            .iter()
            .zip(&tt.cols)
            .map(|(n, c)| (find(n), c))
            .collect();
        let present: Vec<(usize, &ColSpec)> =
            all.iter().filter_map(|(b, c)| b.map(|b| (b, *c))).collect();
        let key: Vec<(Option<usize>, &ColSpec)> = tt.key.iter().map(|i| all[*i]).collect();
        if key.iter().any(|(b, _)| b.is_none()) {
            return Err(format!("{}: rows lack key columns", show(&k)).into());
        }
        let keyed = !key.is_empty();
        let sql_name = tt.sql_name.clone();
        let n = any.num_rows();
        // (keyed, key tuple, row tuple or keyless delete statement, a source delete)
        let mut out: Vec<(bool, Option<String>, Option<String>, bool)> = Vec::with_capacity(n);
        for r in 0..n {
            if let Some(b) = &before {
                if keyed {
                    let mut kt = String::new();
                    render::tuple(&mut kt, d, b, &key, r)?;
                    // An update's old image only clears its key; a delete is marked.
                    out.push((true, Some(kt), None, op == Op::Delete));
                } else {
                    out.push((
                        false,
                        None,
                        Some(render::delete_one(d, &sql_name, b, &present, r)?),
                        true,
                    ));
                }
            }
            if let Some(a) = &after {
                let mut row = String::new();
                render::tuple(&mut row, d, a, &all, r)?;
                if keyed {
                    let mut kt = String::new();
                    render::tuple(&mut kt, d, a, &key, r)?;
                    out.push((true, Some(kt), Some(row), false));
                } else {
                    out.push((false, None, Some(row), false));
                }
            }
        }
        let p = self.pending.entry(k).or_default();
        for (is_keyed, kt, row, deleted) in out {
            self.seq += 1;
            // The texts, once more when a checkpoint renders them into statements,
            // and the entry's own cost (headers, allocations, the map's slot).
            self.pending_bytes += 2
                * (kt.as_ref().map_or(0, String::len) + row.as_ref().map_or(0, String::len))
                + ENTRY_BYTES;
            if is_keyed {
                let kt = kt.expect("key");
                let e = p.keyed.entry(kt).or_default();
                e.seq = self.seq;
                e.row = row;
                e.deleted |= deleted;
            } else if let Some(row) = row {
                // A keyless insert is a row tuple; a delete a statement.
                p.keyless.push((!deleted, row));
            }
        }
        self.rows += n as u64;
        Ok(())
    }

    /// The statements that apply a table's pending changes, in three groups: deletes by
    /// key, keyless changes (in order), upserts. A checkpoint runs every table's first
    /// group before any second, and those before any third, so an ON DELETE action
    /// of the target (a parent deleted and inserted again) cannot remove a row
    /// written in the same checkpoint. With `rewrite`, every changed key is deleted
    /// before the live rows are written (unique values swapped between rows of one
    /// checkpoint then never meet); not for tables whose deletes the target acts on.
    pub(super) fn statements(
        &mut self,
        k: &(String, String),
        p: &Pend,
        rewrite: bool,
    ) -> Result<[Vec<String>; 3], SyncError> {
        let rewrite = rewrite && !self.fk_actions.contains_key(k);
        let batch = self.cfg.batch_rows.max(1);
        let max = self.max_statement;
        let d = self.dialect;
        let tt = self.ttable(k)?;
        let cols: Vec<&ColSpec> = tt.cols.iter().collect();
        let key: Vec<&ColSpec> = tt.key.iter().map(|i| &tt.cols[*i]).collect();
        let (mut dels, mut out, mut ups) = (Vec::new(), Vec::new(), Vec::new());
        if p.replace {
            // Before anything else of the table (its keyless changes included).
            dels.push(format!("DELETE FROM {}", tt.sql_name));
        }
        if !p.keyed.is_empty() {
            let mut entries: Vec<(&String, &KeyChange)> = p.keyed.iter().collect();
            entries.sort_by_key(|(_, c)| c.seq);
            // Deletes first: keys gone at the end, and keys the source deleted and
            // inserted again (so a target's ON DELETE actions fire as in the source, and
            // a new row cannot meet the old one's unique values); then the live rows in
            // change order.
            let keys: Vec<&str> = entries
                .iter()
                .filter(|(_, c)| rewrite || c.row.is_none() || c.deleted)
                .map(|(k, _)| k.as_str())
                .collect();
            for c in cut(&keys, batch, max) {
                dels.push(render::delete(&tt.sql_name, &key, c));
            }
            let rows: Vec<&str> = entries
                .into_iter()
                .filter_map(|(_, c)| c.row.as_deref())
                .collect();
            for c in cut(&rows, batch, max) {
                ups.push(render::insert(d, &tt.sql_name, &cols, &key, c));
            }
        }
        let mut run: Vec<&str> = Vec::new();
        for (insert, s) in &p.keyless {
            if *insert {
                run.push(s);
            } else {
                for c in cut(&run, batch, max) {
                    out.push(render::insert(d, &tt.sql_name, &cols, &[], c));
                }
                run.clear();
                out.push(s.clone());
            }
        }
        for c in cut(&run, batch, max) {
            out.push(render::insert(d, &tt.sql_name, &cols, &[], c));
        }
        Ok([dels, out, ups])
    }

    /// A checkpoint at a transaction boundary: every table's pending changes, held
    /// changes of parked tables set aside, released ones applied.
    pub async fn checkpoint(
        &mut self,
        position: Option<Position>,
        snapshot: Option<SnapshotResume>,
    ) -> Result<(), SyncError> {
        let n = self.checkpoint + 1;
        let pending = std::mem::take(&mut self.pending);
        self.pending_bytes = 0;
        let mut held = Vec::new();
        let released = self.releases(n, &mut held).await?;
        // ON DELETE actions the target does not run itself: before any delete.
        let mut actions = Vec::new();
        if !self.deferred_fks() {
            for (k, p) in &pending {
                if !self.fk_actions.contains_key(k) || self.parked.contains(&show(k)) {
                    continue;
                }
                let keys: Vec<&str> = p
                    .keyed
                    .iter()
                    .filter(|(_, c)| c.deleted)
                    .map(|(t, _)| t.as_str())
                    .collect();
                if keys.is_empty() {
                    continue;
                }
                let tt = self.ttable(k)?;
                let key: Vec<&ColSpec> = tt.key.iter().map(|i| &tt.cols[*i]).collect();
                let rows = render::key_in(&key, &keys);
                self.fk_action_sql(k, &rows, &mut Vec::new(), &mut actions)?;
            }
        }
        let mut rewrite = false;
        loop {
            let mut groups: [Vec<String>; 3] = Default::default();
            groups[0].extend(actions.iter().cloned());
            for (k, p) in &pending {
                let s = self.statements(k, p, rewrite)?;
                let name = show(k);
                if self.parked.contains(&name) {
                    self.log.hold(&name, n, s.concat())?;
                    continue;
                }
                for (g, part) in groups.iter_mut().zip(s) {
                    g.extend(part);
                }
            }
            let mut stmts = groups.concat();
            stmts.extend(held.iter().cloned());
            match self
                .commit(&stmts, position.clone(), snapshot.clone())
                .await
            {
                Ok(()) => break,
                Err(e) if !rewrite && e.kind == ErrorKind::UniqueViolation => {
                    // Unique values moved between rows inside the checkpoint: the
                    // same changes again, every changed key deleted first.
                    tracing::info!("checkpoint {n}: {e}; applying it again with every changed key deleted first");
                    rewrite = true;
                }
                Err(e) => return Err(e.message.into()),
            }
        }
        for i in released {
            self.released(i)?;
        }
        Ok(())
    }

    /// Parked entries a person resolved: their held statements join checkpoint `n`.
    /// The entry records `released_in: n` first; it becomes resolved once `n` is
    /// committed (a restart finishes or undoes a release by the target's checkpoint).
    pub(super) async fn releases(
        &mut self,
        n: u64,
        stmts: &mut Vec<String>,
    ) -> Result<Vec<usize>, SyncError> {
        let mut out = Vec::new();
        for (seq, retry) in self.log.resolutions() {
            let Some(i) = self.log.entries.iter().position(|e| e.seq == seq) else {
                self.log.clear_resolution(seq);
                continue;
            };
            if self.log.entries[i].status != Status::Parked {
                self.log.clear_resolution(seq);
                continue;
            }
            let tables = self.log.entries[i].tables.clone();
            let mut mine = Vec::new();
            if retry {
                mine.extend(self.log.entries[i].target_sql.clone());
            }
            for t in &tables {
                mine.extend(self.log.held(t)?.into_iter().map(|(_, s)| s));
            }
            self.log.entries[i].released_in = Some(n);
            self.log.store()?;
            tracing::info!(
                "DDL #{seq} resolved: {} held statement(s) of {} applied",
                mine.len(),
                tables.join(", ")
            );
            stmts.extend(mine);
            out.push(i);
        }
        Ok(out)
    }

    /// A release committed: the entry is resolved, DDL queued behind it done, the
    /// held changes gone.
    pub(super) fn released(&mut self, i: usize) -> Result<(), SyncError> {
        let tables = self.log.entries[i].tables.clone();
        for j in i + 1..self.log.entries.len() {
            let e = &mut self.log.entries[j];
            if e.status == Status::Held && e.tables.iter().any(|t| tables.contains(t)) {
                e.status = Status::Executed;
            }
        }
        self.log.set(i, Status::Resolved, None)?;
        for t in &tables {
            self.log.drop_held(t)?;
        }
        self.log.clear_resolution(self.log.entries[i].seq);
        self.parked = self.log.parked_tables();
        Ok(())
    }
}

/// Consecutive runs of `items` of at most `rows` items and about `bytes` bytes of
/// text (the statement around them comes on top: kept well below the target's
/// limit, which `bytes` already is). An item alone over `bytes` is a run of one
/// (the row check sends such rows to the row-error policy before they get here).
fn cut<'a, 'b>(items: &'b [&'a str], rows: usize, bytes: usize) -> Vec<&'b [&'a str]> {
    let budget = bytes / 2;
    let mut out = Vec::new();
    let (mut start, mut size) = (0, 0);
    for (i, s) in items.iter().enumerate() {
        let n = s.len() + 2;
        if i > start && (i - start >= rows || size + n > budget) {
            out.push(&items[start..i]);
            start = i;
            size = 0;
        }
        size += n;
    }
    if start < items.len() {
        out.push(&items[start..]);
    }
    out
}

pub(super) fn clip(s: &str) -> String {
    if s.len() > 300 {
        let mut end = 300;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}... ({} bytes)", &s[..end], s.len())
    } else {
        s.to_owned()
    }
}

impl RdbEngine {
    /// Values of a source batch the target cannot hold (PostgreSQL: a NUL in text, a
    /// TINYINT(1) value other than 0 or 1 in a boolean column; MySQL targets hold
    /// every MySQL value).
    async fn bad_values(
        &mut self,
        t: &crate::source::decode::SourceTable,
        images: &[(&str, &RecordBatch)],
    ) -> Result<Vec<rowcheck::BadValue>, SyncError> {
        if self.dialect != Dialect::Postgres {
            // MySQL holds every MySQL value, but a statement must fit the target's
            // max_allowed_packet: a row that alone would not cannot be sent.
            let limit = self.max_statement / 4 * 3;
            let mut bad = Vec::new();
            for (_, img) in images {
                for (row, size) in rowcheck::literal_sizes(img).into_iter().enumerate() {
                    if size > limit {
                        bad.push(rowcheck::BadValue {
                            row,
                            column: "(the whole row)".into(),
                            reason: format!(
                                "the row's statement would be about {} MiB, more than the target takes (max_allowed_packet {} MiB); raise max_allowed_packet on the target",
                                size >> 20,
                                (self.max_statement + 4096) >> 20
                            ),
                        });
                    }
                }
            }
            return Ok(bad);
        }
        let (k, routed) = self.table_for(t).await?;
        let tt = self.ttable(&k)?;
        let mut bad = Vec::new();
        for (_, img) in images {
            let img = rename_batch(img, &routed)?;
            let limits: Vec<Option<rowcheck::Limit>> = img
                .schema()
                .fields()
                .iter()
                .map(|f| {
                    let col = tt
                        .names
                        .iter()
                        .position(|n| n.eq_ignore_ascii_case(f.name()));
                    match (col, f.data_type()) {
                        (Some(i), _) if tt.cols[i].boolean => Some(rowcheck::Limit::Boolean),
                        (_, arrow_schema::DataType::Utf8 | arrow_schema::DataType::LargeUtf8) => {
                            Some(rowcheck::Limit::NoNul)
                        }
                        _ => None,
                    }
                })
                .collect();
            bad.extend(rowcheck::relational(&img, &limits));
        }
        Ok(bad)
    }

    /// A batch of row changes without the rows the target cannot hold (the
    /// row-error policy: an error, or the rows to the dead-letter file). None: no row
    /// left.
    pub(super) async fn checked(
        &mut self,
        b: crate::source::RowBatch,
    ) -> Result<Option<crate::source::RowBatch>, SyncError> {
        let images: Vec<(&str, &RecordBatch)> = [("before", &b.before), ("after", &b.after)]
            .into_iter()
            .filter_map(|(l, x)| x.as_ref().map(|x| (l, x)))
            .collect();
        let bad = self.bad_values(&b.table, &images).await?;
        if bad.is_empty() {
            return Ok(Some(b));
        }
        let policy = self.job.pipeline.row_error_policy;
        rowcheck::settle_changes(policy, &self.dead_letter, &b, &images, &bad)
    }

    /// Snapshot rows without those the target cannot hold (as `checked`).
    pub(super) async fn checked_snapshot(
        &mut self,
        t: &crate::source::decode::SourceTable,
        rows: RecordBatch,
        at: &Position,
    ) -> Result<RecordBatch, SyncError> {
        let bad = self.bad_values(t, &[("after", &rows)]).await?;
        let name = format!("{}.{}", t.db, t.name);
        let policy = self.job.pipeline.row_error_policy;
        rowcheck::settle_snapshot(policy, &self.dead_letter, &name, at, rows, &bad)
    }
}
