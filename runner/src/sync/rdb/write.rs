//! Row changes folded by key, rendered as statements and committed per checkpoint;
//! released changes of parked tables.

use super::*;
use crate::sync::error::SyncError;
use crate::sync::rowcheck;
use render::Val;

/// Hex digits (as MySQL's HEX() writes them) as bytes.
fn hex_decode(h: &[u8]) -> Option<Vec<u8>> {
    if !h.len().is_multiple_of(2) {
        return None;
    }
    h.chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).ok()?, 16).ok())
        .collect()
}

/// What a keyless table's pending change costs besides its row: its place in the
/// list, and the pointer a checkpoint's statements hold to the row (which shares its
/// bytes). Keyed tables count theirs (`Keyed::bytes`).
const KEYLESS_BYTES: usize = 40;

impl RdbEngine {
    /// Pending changes past `memory-budget-mib`: commit them now (inside a source
    /// transaction if need be; the position records how far into it).
    pub(super) fn over_budget(&self) -> bool {
        self.held_bytes() >= self.job.pipeline.pending_budget()
    }

    /// Half of [`Self::over_budget`]'s limit (see `Sink::near_budget`).
    pub(super) fn near_budget(&self) -> bool {
        self.held_bytes() >= self.job.pipeline.pending_budget() / 2
    }

    /// Pending changes and those of a checkpoint committing in the background.
    fn held_bytes(&self) -> usize {
        self.pending_bytes + self.flight.as_ref().map_or(0, |f| f.bytes)
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
        unchanged: &[(u32, u32)],
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
        // (`name` is lower case, Unicode's: `Ä` is `ä`.)
        let find = |name: &str| {
            schema
                .fields()
                .iter()
                .position(|f| f.name() == name || f.name().to_lowercase() == name)
        };
        let all: Vec<(Option<usize>, &ColSpec)> = tt
            .names
            .iter()
            .zip(&tt.cols)
            .map(|(n, c)| (find(n).filter(|_| !c.computed), c))
            .collect();
        let key: Vec<(Option<usize>, &ColSpec)> = tt.key.iter().map(|i| all[*i]).collect();
        let key_cols = tt.key.clone();
        if key.iter().any(|(b, _)| b.is_none()) {
            return Err(format!("{}: rows lack key columns", show(&k)).into());
        }
        let keyed = !key.is_empty();
        let n = any.num_rows();
        // (keyed, key values, row values, a source delete)
        type Change = (bool, Option<Row>, Option<Row>, bool);
        let mut out: Vec<Change> = Vec::with_capacity(n);
        let mut scratch = render::Scratch::default();
        for r in 0..n {
            if let Some(b) = &before {
                if keyed {
                    // An update's old image only clears its key; a delete is marked.
                    let kt = render::row(d, b, &key, r, &mut scratch)?;
                    out.push((true, Some(kt), None, op == Op::Delete));
                } else {
                    out.push((
                        false,
                        None,
                        Some(render::row(d, b, &all, r, &mut scratch)?),
                        true,
                    ));
                }
            }
            if let Some(a) = &after {
                let row = render::row(d, a, &all, r, &mut scratch)?;
                if keyed {
                    // The key's values out of the row (rendered once).
                    let kt = row.project(&key_cols).expect("a row holds its key");
                    out.push((true, Some(kt), Some(row), false));
                } else {
                    out.push((false, None, Some(row), false));
                }
            }
        }
        if !unchanged.is_empty() {
            // Binary target columns (MySQL reads their previous values as hex).
            let binary: Vec<bool> = all
                .iter()
                .map(|(b, _)| {
                    b.is_some_and(|b| {
                        matches!(
                            any.schema().field(b).data_type(),
                            arrow_schema::DataType::Binary
                                | arrow_schema::DataType::LargeBinary
                                | arrow_schema::DataType::FixedSizeBinary(_)
                        )
                    })
                })
                .collect();
            // Unchanged source column -> target column.
            let cells: Vec<(usize, usize)> = unchanged
                .iter()
                .filter_map(|&(r, c)| {
                    all.iter()
                        .position(|(b, _)| *b == Some(c as usize))
                        .map(|j| (r as usize, j))
                })
                .collect();
            if !keyed || op != Op::Update {
                return Err(format!(
                    "{}: an update left values unchanged without sending them (PostgreSQL TOAST) in a table without a key: ALTER TABLE {} REPLICA IDENTITY FULL",
                    show(&k),
                    table.name
                )
                .into());
            }
            self.keep_unchanged(&k, &mut out, &cells, &binary).await?;
        }
        let p = self.pending.entry(k).or_default();
        let before = p.keyed.bytes();
        for (is_keyed, kt, row, deleted) in out {
            self.seq += 1;
            if is_keyed {
                let kt = kt.expect("key");
                p.keyed
                    .change(&key_cols, kt, row, self.seq, deleted, op == Op::Insert);
            } else if let Some(row) = row {
                // A keyless insert (true) or delete of a row.
                self.pending_bytes += row.size() + KEYLESS_BYTES;
                p.keyless.push((!deleted, row));
            }
        }
        // What the table's folded changes hold now (a folded change frees the row it
        // replaces).
        self.pending_bytes = (self.pending_bytes + p.keyed.bytes()).saturating_sub(before);
        self.rows += n as u64;
        Ok(())
    }

    /// Updates that left values unchanged without sending them: each such cell
    /// (`cells`: source row, target column) of the new rows in `out` (an update's
    /// old key at `2 * row`, its new row at `2 * row + 1`) takes the row's previous
    /// value: from an earlier row of the batch, from this checkpoint's pending row of
    /// its old key, or else from the target, which holds the committed row.
    async fn keep_unchanged(
        &mut self,
        k: &(String, String),
        out: &mut [(bool, Option<Row>, Option<Row>, bool)],
        cells: &[(usize, usize)],
        binary: &[bool],
    ) -> Result<(), SyncError> {
        enum From {
            Row(usize),
            Pending(Row),
            Target(usize),
        }
        let mut by_row: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for &(r, j) in cells {
            by_row.entry(r).or_default().push(j);
        }
        let p = self.pending.entry(k.clone()).or_default();
        let mut local: HashMap<&Row, usize> = HashMap::new();
        let mut from: BTreeMap<usize, From> = BTreeMap::new();
        let mut ask: Vec<Row> = Vec::new();
        let n = out.len() / 2;
        for r in 0..n {
            let old = out[2 * r].1.as_ref().expect("an update's old key");
            if by_row.contains_key(&r) {
                let f = if let Some(&i) = local.get(old) {
                    From::Row(i)
                } else {
                    match p.keyed.get(old).map(|c| c.row().cloned()) {
                        Some(Some(row)) => From::Pending(row),
                        Some(None) => {
                            return Err(format!(
                                "{}: an update of a row deleted before it left values unchanged",
                                show(k)
                            )
                            .into())
                        }
                        None if p.replace => {
                            return Err(format!(
                            "{}: an update left values unchanged of a row the target does not hold",
                            show(k)
                        )
                            .into())
                        }
                        None => {
                            ask.push(old.clone());
                            From::Target(ask.len() - 1)
                        }
                    }
                };
                from.insert(r, f);
            }
            local.insert(out[2 * r + 1].1.as_ref().expect("the new key"), r);
        }
        tracing::debug!(
            "{}: {} updated rows kept unchanged values ({} read from the target)",
            show(k),
            from.len(),
            ask.len()
        );
        let asked = if ask.is_empty() {
            Vec::new()
        } else {
            self.previous_rows(k, &ask, binary).await?
        };
        for (r, f) in from {
            let prev = |j: usize| -> Row {
                let src: Option<&Row> = match &f {
                    From::Row(i) => out[2 * i + 1].2.as_ref(),
                    From::Pending(row) => Some(row),
                    From::Target(i) => Some(&asked[*i]),
                };
                Row::of(src.and_then(|s| s.vals().nth(j)))
            };
            let keep = &by_row[&r];
            let row = out[2 * r + 1].2.as_ref().expect("new row");
            let mut b = render::RowBuf::default();
            for (j, v) in row.vals().enumerate() {
                if keep.contains(&j) {
                    let one = prev(j);
                    b.extend(&one);
                } else {
                    b.push(v);
                }
            }
            out[2 * r + 1].2 = Some(b.finish());
        }
        Ok(())
    }

    /// The rows the target holds under keys `keys` (every column; values as the
    /// target takes them), in `keys` order; an error if one is missing.
    async fn previous_rows(
        &mut self,
        k: &(String, String),
        keys: &[Row],
        binary: &[bool],
    ) -> Result<Vec<Row>, SyncError> {
        let tt = self.ttable(k)?;
        let (name, cols, key) = (tt.sql_name.clone(), tt.cols.clone(), tt.key.clone());
        let missing = || -> SyncError {
            format!(
                "{}: an update left values unchanged of a row the target does not hold",
                show(k)
            )
            .into()
        };
        let ids: Vec<&str> = cols.iter().map(|c| c.ident.as_str()).collect();
        let mut rows: Vec<Option<Row>> = vec![None; keys.len()];
        let err = |e: super::target::TargetError| -> SyncError {
            SyncError::from(e).context(format_args!(
                "{}: reading the previous values of updated rows",
                show(k)
            ))
        };
        match self.dialect {
            Dialect::Postgres => {
                // The keys loaded into a temporary table, joined: values never become SQL.
                let stage = step::aux(&ids, "previous");
                let ord = step::aux(&ids, "ord");
                let key_cols: Vec<&str> = key.iter().map(|i| ids[*i]).collect();
                self.target().await?.exec(&format!(
                        "DROP TABLE IF EXISTS pg_temp.{stage}; CREATE TEMP TABLE {stage} AS SELECT {}, 0::bigint AS {ord} FROM {name} WITH NO DATA",
                        key_cols.join(", ")
                    ))
                    .await
                    .map_err(err)?;
                self.target()
                    .await?
                    .run(&Step::Copy {
                        copy: format!("COPY {stage} ({}, {ord}) FROM STDIN", key_cols.join(", ")),
                        rows: keys.to_vec(),
                    })
                    .await
                    .map_err(err)?;
                let on: Vec<String> = key_cols.iter().map(|c| format!("t.{c} = s.{c}")).collect();
                let sel: Vec<String> = ids.iter().map(|c| format!("t.{c}::text")).collect();
                let got = self
                    .target()
                    .await?
                    .query(&format!(
                        "SELECT s.{ord}::text, {} FROM {stage} s JOIN {name} t ON {}",
                        sel.join(", "),
                        on.join(" AND ")
                    ))
                    .await
                    .map_err(err)?;
                self.target()
                    .await?
                    .exec(&format!("DROP TABLE pg_temp.{stage}"))
                    .await
                    .map_err(err)?;
                for g in got {
                    let i: usize = g[0]
                        .as_deref()
                        .and_then(|s| s.parse().ok())
                        .ok_or_else(missing)?;
                    rows[i] = Some(Row::of(g[1..].iter().map(|v| match v {
                        None => Val::Null,
                        Some(s) => Val::Text(s),
                    })));
                }
            }
            _ => {
                // (A BIT(n) value is bytes to MySQL's text protocol: read as its
                // number, as the sink writes it.)
                let bit = |i: usize| cols[i].bits.is_some_and(|n| n <= 64);
                let sel: Vec<String> = ids
                    .iter()
                    .zip(binary)
                    .enumerate()
                    .map(|(i, (c, b))| {
                        if bit(i) {
                            format!("CAST({c} AS UNSIGNED)")
                        } else if *b {
                            format!("HEX({c})")
                        } else {
                            c.to_string()
                        }
                    })
                    .collect();
                let wh: Vec<String> = key.iter().map(|i| format!("{} = ?", ids[*i])).collect();
                let sql = format!(
                    "SELECT {} FROM {name} WHERE {}",
                    sel.join(", "),
                    wh.join(" AND ")
                );
                for (i, kt) in keys.iter().enumerate() {
                    let got = self.target().await?.select(&sql, kt).await.map_err(err)?;
                    let Some(g) = got.into_iter().next() else {
                        return Err(missing());
                    };
                    let mut b = render::RowBuf::default();
                    for (c, (v, bin)) in g.iter().zip(binary).enumerate() {
                        let odd = |what: &str| -> SyncError {
                            format!(
                                "{}: reading the previous values of updated rows: column {} holds {what}",
                                show(k),
                                ids[c]
                            )
                            .into()
                        };
                        match v {
                            None => b.push(Val::Null),
                            Some(x) if bit(c) => b.push(Val::UInt(
                                std::str::from_utf8(x)
                                    .ok()
                                    .and_then(|t| t.parse().ok())
                                    .ok_or_else(|| odd("no BIT(n) number"))?,
                            )),
                            Some(x) if *bin => {
                                let bytes = hex_decode(x).ok_or_else(missing)?;
                                b.push(Val::Bytes(&bytes));
                            }
                            Some(x) => b.push(Val::Text(
                                std::str::from_utf8(x)
                                    .map_err(|_| odd("text that is not UTF-8"))?,
                            )),
                        }
                    }
                    rows[i] = Some(b.finish());
                }
            }
        }
        rows.into_iter().map(|r| r.ok_or_else(missing)).collect()
    }

    /// The steps that apply a table's pending changes, in four groups: staging
    /// (PostgreSQL's temporary tables, loaded), deletes by key, keyless changes (in
    /// order), upserts. A checkpoint runs every table's first group before any
    /// second, and so on, so an ON DELETE action of the target (a parent deleted and
    /// inserted again) cannot remove a row written in the same checkpoint. With
    /// `rewrite`, every changed key is deleted before the live rows are written
    /// (unique values swapped between rows of one checkpoint then never meet); not
    /// for tables whose deletes the target acts on.
    pub(super) fn statements(
        &mut self,
        k: &(String, String),
        p: &Pend,
        rewrite: bool,
        plan: &mut step::Plan,
    ) -> Result<[Vec<Step>; 4], SyncError> {
        // Rows of keys the target does not hold go straight in (PostgreSQL COPY),
        // unless this is the checkpoint's second try after a unique violation.
        let direct = !rewrite;
        let rewrite = rewrite && !self.fk_actions.contains_key(k);
        let tt = self.ttable(k)?;
        plan.begin_table();
        let t = step::Cols {
            table: &tt.sql_name,
            cols: &tt.cols,
            key: &tt.key,
        };
        let (mut stage, mut dels, mut out, mut ups) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        if p.replace {
            // Before anything else of the table (its keyless changes included).
            dels.push(Step::Sql(format!("DELETE FROM {}", tt.sql_name)));
        }
        if !p.keyed.is_empty() {
            let mut entries: Vec<keyed::Change<'_>> = p.keyed.iter().collect();
            entries.sort_by_key(|c| c.seq());
            // Deletes first: keys gone at the end, and keys the source deleted and
            // inserted again (so a target's ON DELETE actions fire as in the source, and
            // a new row cannot meet the old one's unique values); then the live rows in
            // change order.
            let keys: Vec<Row> = entries
                .iter()
                .filter(|c| rewrite || c.row().is_none() || c.deleted())
                .map(|c| c.key())
                .collect();
            plan.delete_keys(&t, keys, &mut stage, &mut dels);
            let (mut fresh, mut rows) = (Vec::new(), Vec::new());
            for c in entries {
                if let Some(r) = c.row() {
                    if direct && (p.replace || (c.absent() && !c.deleted())) {
                        fresh.push(r.clone());
                    } else {
                        rows.push(r.clone());
                    }
                }
            }
            // Keys the target holds first: an update that frees a unique value goes
            // before the new row that takes it. (Rewritten, the target holds none
            // of them: every changed key was deleted.)
            plan.insert_as(&t, rows, &mut stage, &mut ups, !rewrite);
            plan.load(&t, fresh, &mut ups);
        }
        // Keyless: runs of inserts and runs of deletes, in order.
        let no_key = step::Cols { key: &[], ..t };
        let mut run: Vec<Row> = Vec::new();
        let mut inserting = true;
        for (insert, row) in &p.keyless {
            if *insert != inserting && !run.is_empty() {
                let rows = std::mem::take(&mut run);
                if inserting {
                    plan.insert(&no_key, rows, &mut stage, &mut out);
                } else {
                    plan.delete_rows(&no_key, rows, &mut stage, &mut out);
                }
            }
            inserting = *insert;
            run.push(row.clone());
        }
        if inserting {
            plan.insert(&no_key, run, &mut stage, &mut out);
        } else {
            plan.delete_rows(&no_key, run, &mut stage, &mut out);
        }
        Ok([stage, dels, out, ups])
    }

    /// A checkpoint at a transaction boundary: every table's pending changes, held
    /// changes of parked tables set aside, released ones applied. Plain ones (no
    /// Kafka offsets, nothing parked or released) commit on a task of their own while
    /// the next checkpoint is read (`dispatch`).
    pub async fn checkpoint(
        &mut self,
        position: Option<Position>,
        snapshot: Option<SnapshotResume>,
    ) -> Result<(), SyncError> {
        self.settle().await?;
        let n = self.checkpoint + 1;
        let pending = std::mem::take(&mut self.pending);
        let bytes = std::mem::take(&mut self.pending_bytes);
        let mut held = Vec::new();
        let released = self.releases(n, &mut held).await?;
        let plain = !self.kafka
            && released.is_empty()
            && held.is_empty()
            && !pending.keys().any(|k| self.parked.contains(&show(k)));
        if plain {
            let stmts = self.steps(n, &pending, false, &held)?;
            return self
                .dispatch(stmts, pending, bytes, position, snapshot)
                .await;
        }
        let mut pending = pending;
        self.apply(&mut pending, &held, false, position, snapshot)
            .await?;
        for i in released {
            self.released(i)?;
        }
        Ok(())
    }

    /// Commit checkpoint `self.checkpoint + 1` now: `pending` (every changed key
    /// deleted first with `rewrite`, and again that way after a unique violation)
    /// and `held`.
    pub(super) async fn apply(
        &mut self,
        pending: &mut BTreeMap<(String, String), Pend>,
        held: &[Step],
        mut rewrite: bool,
        position: Option<Position>,
        snapshot: Option<SnapshotResume>,
    ) -> Result<(), SyncError> {
        let n = self.checkpoint + 1;
        let mut refused = 0;
        loop {
            let stmts = self.steps(n, pending, rewrite, held)?;
            match self
                .commit(&stmts, position.clone(), snapshot.clone())
                .await
            {
                Ok(()) => return Ok(()),
                Err(e) if !rewrite && collided(&e) => {
                    // Unique values moved between rows inside the checkpoint: the
                    // same changes again, every changed key deleted first.
                    tracing::info!("checkpoint {n}: {e}; applying it again with every changed key deleted first");
                    rewrite = true;
                }
                // A value the target refused: out with the rows holding such values
                // (row-error-policy skip or park), and again, while some are found.
                Err(e) if e.kind == ErrorKind::BadValue && refused < 1_000 => {
                    let out = self
                        .without_refused(pending, n, position.as_ref(), &e)
                        .await?;
                    if out == 0 {
                        return Err(e);
                    }
                    refused += out;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The statements of checkpoint `n`: ON DELETE actions the target does not run
    /// itself, then every table's staging, deletes, keyless changes and upserts (a
    /// parked table's go to the DDL log instead), then `held`.
    fn steps(
        &mut self,
        n: u64,
        pending: &BTreeMap<(String, String), Pend>,
        rewrite: bool,
        held: &[Step],
    ) -> Result<Vec<Step>, SyncError> {
        let mut plan = step::Plan::new(self.dialect, n, self.cfg.batch_rows, self.max_statement);
        // ON DELETE actions the target does not run itself: before any delete.
        let mut groups: [Vec<Step>; 5] = Default::default();
        if !self.deferred_fks() {
            let [stage, actions, ..] = &mut groups;
            for (k, p) in pending {
                if !self.fk_actions.contains_key(k) || self.parked.contains(&show(k)) {
                    continue;
                }
                let keys: Vec<Row> = p
                    .keyed
                    .iter()
                    .filter(|c| c.deleted())
                    .map(|c| c.key())
                    .collect();
                if keys.is_empty() {
                    continue;
                }
                let tt = self.ttable(k)?;
                let names = step::Cols {
                    table: &tt.sql_name,
                    cols: &tt.cols,
                    key: &tt.key,
                }
                .key_names();
                let conds = plan.keys_condition(&tt.sql_name, &names, keys, stage);
                for (cond, params) in conds {
                    let mut sql = Vec::new();
                    self.fk_action_sql(k, &cond, &mut Vec::new(), &mut sql)?;
                    actions.extend(sql.into_iter().map(|s| Step::with(s, &params)));
                }
            }
        }
        for (k, p) in pending {
            let name = show(k);
            if self.parked.contains(&name) {
                let s = self.statements(k, p, rewrite, &mut plan)?;
                self.log.hold(&name, n, s.concat())?;
                continue;
            }
            let [stage, dels, out, ups] = self.statements(k, p, rewrite, &mut plan)?;
            groups[0].extend(stage);
            groups[2].extend(dels);
            groups[3].extend(out);
            groups[4].extend(ups);
            // (Only where rows were written: deletes move no sequence.)
            let wrote = p.replace
                || p.keyless.iter().any(|(insert, _)| *insert)
                || p.keyed.iter().any(|c| !c.deleted());
            if self.dialect == Dialect::Postgres && wrote {
                groups[4].extend(self.identities_past_rows(k)?);
            }
        }
        let mut stmts = groups.concat();
        stmts.extend(held.iter().cloned());
        Ok(stmts)
    }

    /// PostgreSQL: each identity column's sequence moved past the largest value the
    /// table holds (never back), in the checkpoint's transaction. Rows come with
    /// their values (OVERRIDING SYSTEM VALUE), which leaves the sequence where it
    /// was: an application writing to the target (a failover) drew keys the
    /// mirrored rows hold (a hostile tester). MySQL's AUTO_INCREMENT moves by itself.
    fn identities_past_rows(&mut self, k: &(String, String)) -> Result<Vec<Step>, SyncError> {
        let name = TableName::new(Some(&k.0), &k.1);
        let Some(t) = self.catalog.table(&name) else {
            return Ok(Vec::new());
        };
        let idents: Vec<String> = t
            .columns
            .iter()
            .filter(|c| c.identity.is_some())
            .map(|c| c.name.to_lowercase())
            .collect();
        if idents.is_empty() {
            return Ok(Vec::new());
        }
        let tt = self.ttable(k)?;
        let lit = |s: &str| format!("'{}'", s.replace('\'', "''"));
        let mut out = Vec::new();
        for (i, n) in tt.names.iter().enumerate() {
            if !idents.contains(n) {
                continue;
            }
            let ident = &tt.cols[i].ident;
            // (pg_get_serial_sequence reads the column's name as written.)
            let raw = match ident.strip_prefix('"').and_then(|x| x.strip_suffix('"')) {
                Some(q) => q.replace("\"\"", "\""),
                None => ident.clone(),
            };
            out.push(Step::Sql(format!(
                "SELECT setval(s::regclass, m) FROM (SELECT pg_get_serial_sequence({}, {}) AS s, (SELECT max({ident}) FROM {}) AS m) x WHERE s IS NOT NULL AND m IS NOT NULL AND m > coalesce(pg_sequence_last_value(s::regclass), 0)",
                lit(&tt.sql_name),
                lit(&raw),
                tt.sql_name
            )));
        }
        Ok(out)
    }

    /// Parked entries a person resolved: their held statements join checkpoint `n`.
    /// The entry records `released_in: n` first; it becomes resolved once `n` is
    /// committed (a restart finishes or undoes a release by the target's checkpoint).
    pub(super) async fn releases(
        &mut self,
        n: u64,
        stmts: &mut Vec<Step>,
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
                mine.extend(
                    self.log.entries[i]
                        .target_sql
                        .iter()
                        .cloned()
                        .map(Step::Sql),
                );
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

/// A checkpoint's failure that its keys, deleted first, may avoid: a unique
/// violation, or a MySQL upsert that met a row of another key by a unique index
/// (its key guard, see [`step::KEY_GUARD`]).
pub(super) fn collided(e: &SyncError) -> bool {
    e.kind == ErrorKind::UniqueViolation
        || (e.kind == ErrorKind::BadValue && e.message.contains(step::KEY_GUARD))
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
            // max_allowed_packet: a row that alone would not cannot be sent; and
            // values of other sources may have no MySQL form.
            let limit = self.max_statement / 4 * 3;
            let mut bad = Vec::new();
            let (k, routed) = self.table_for(t).await?;
            let tt = self.ttable(&k)?;
            for (_, img) in images {
                let img = rename_batch(img, &routed)?;
                let schema = img.schema();
                let all: Vec<(Option<usize>, &ColSpec)> = tt
                    .names
                    .iter()
                    .zip(&tt.cols)
                    .map(|(n, c)| {
                        let i = schema
                            .fields()
                            .iter()
                            .position(|f| f.name() == n || f.name().to_lowercase() == *n);
                        (i.filter(|_| !c.computed), c)
                    })
                    .collect();
                for (row, j, why) in render::mysql_refusals(&img, &all) {
                    bad.push(rowcheck::BadValue {
                        row,
                        column: tt.names[j].clone(),
                        reason: why.to_owned(),
                    });
                }
            }
            for (_, img) in images {
                for (row, size) in rowcheck::param_sizes(img).into_iter().enumerate() {
                    if size > limit {
                        bad.push(rowcheck::BadValue {
                            row,
                            column: "(the whole row)".into(),
                            reason: format!(
                                "the row's statement would be about {} MiB of values, more than the target takes (max_allowed_packet {} MiB); raise max_allowed_packet on the target",
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
        let kept = rowcheck::settle_changes(policy, &self.dead_letter, &b, &images, &bad)?;
        if policy == rowcheck::RowErrorPolicy::Park {
            // The table's changes from here on (this batch's other rows included) are
            // held at each checkpoint until the entry is resolved.
            let (k, _) = self.table_for(&b.table).await?;
            let name = show(&k);
            if rowcheck::park(&mut self.log, &name, &b, &bad, &self.dead_letter)? {
                self.parked.insert(name);
            }
        }
        Ok(kept)
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
