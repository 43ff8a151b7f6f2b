//! Values the target refuses that no check found before the write: a MariaDB `TIME`
//! past 24 hours into PostgreSQL `time`, text longer than a target column, a target's
//! own CHECK or NOT NULL. The checkpoint's transaction fails on the first such value
//! and is rolled back; under `row-error-policy: skip` or `park` the rows holding such
//! values are then found (halves of the checkpoint's rows tried inside a transaction
//! that is rolled back, down to single rows), written to the dead-letter file and
//! taken out, and the checkpoint commits without them. Under `fail` the job stops with
//! the target's error, as before.
//!
//! A keyed row taken out leaves the target's row as it was before the checkpoint (the
//! checkpoint holds each key's last state only).

use super::*;
use crate::sync::rowcheck::RowErrorPolicy;

/// One live row of a checkpoint: its table and where it is in the table's changes.
#[derive(Debug, Clone)]
enum Item {
    /// A keyed change (the key's values).
    Keyed(Row),
    /// A keyless insert (its index in `Pend::keyless`).
    Keyless(usize),
}

impl RdbEngine {
    /// After the target refused a value of checkpoint `n` (`why`): under `skip` or
    /// `park`, the refused rows out of `pending` (dead-letter records; `park` parks
    /// their tables). Returns how many rows were taken out (0: none found, the
    /// error stands); under `fail`, the error with what to do.
    pub(super) async fn without_refused(
        &mut self,
        pending: &mut BTreeMap<(String, String), Pend>,
        n: u64,
        position: Option<&Position>,
        why: &SyncError,
    ) -> Result<usize, SyncError> {
        let policy = self.job.pipeline.row_error_policy;
        if policy == RowErrorPolicy::Fail {
            return Err(SyncError::new(
                ErrorKind::Definite,
                format!(
                    "{why}\n  the target refused a value of a row (row-error-policy: fail). Set `pipeline.row-error-policy: skip` to write the rows it refuses to the dead-letter file ({}) and go on without them (`park` also holds their tables' later changes until resolved), or widen the target column",
                    self.dead_letter.display()
                ),
            ));
        }
        let mut items: Vec<((String, String), Item)> = Vec::new();
        for (k, p) in pending.iter() {
            if self.parked.contains(&show(k)) {
                continue;
            }
            for c in p.keyed.iter() {
                if c.row().is_some() {
                    items.push((k.clone(), Item::Keyed(c.key())));
                }
            }
            for (i, (insert, _)) in p.keyless.iter().enumerate() {
                if *insert {
                    items.push((k.clone(), Item::Keyless(i)));
                }
            }
        }
        tracing::info!(
            "checkpoint {n}: the target refused a value ({why}); looking for the rows that hold such values among {} (row-error-policy: {})",
            items.len(),
            if policy == RowErrorPolicy::Park { "park" } else { "skip" }
        );
        let begin = match self.dialect {
            Dialect::Postgres => "BEGIN",
            _ => "START TRANSACTION",
        };
        self.target().await?.exec(begin).await?;
        let mut bad: Vec<(usize, String)> = Vec::new();
        let mut todo: Vec<(usize, usize)> = vec![(0, items.len())];
        let found = async {
            while let Some((lo, hi)) = todo.pop() {
                if lo >= hi {
                    continue;
                }
                let Some(e) = self.probe(pending, &items[lo..hi], n).await? else {
                    continue;
                };
                if hi - lo == 1 {
                    if e.kind == ErrorKind::BadValue {
                        bad.push((lo, e.message));
                    }
                    continue;
                }
                let mid = lo + (hi - lo) / 2;
                todo.push((mid, hi));
                todo.push((lo, mid));
            }
            Ok::<(), SyncError>(())
        }
        .await;
        let _ = self.target().await?.exec("ROLLBACK").await;
        found?;
        if bad.is_empty() {
            return Ok(0);
        }
        // Dead-letter records, then out of the checkpoint.
        let at = position.map(|p| p.to_string()).unwrap_or_default();
        if let Some(d) = self.dead_letter.parent() {
            std::fs::create_dir_all(d).map_err(|x| format!("{}: {x}", d.display()))?;
        }
        let mut tables: BTreeMap<(String, String), usize> = BTreeMap::new();
        let mut gone: BTreeMap<(String, String), BTreeSet<usize>> = BTreeMap::new();
        for (i, reason) in &bad {
            let (k, item) = &items[*i];
            let p = pending.get_mut(k).expect("the item's table is pending");
            let row = match item {
                Item::Keyed(key) => p.keyed.get(key).and_then(|c| c.row().cloned()),
                Item::Keyless(j) => Some(p.keyless[*j].1.clone()),
            };
            let tt = self.ttable(k)?;
            let mut values = serde_json::Map::new();
            if let Some(row) = &row {
                for (name, v) in tt.names.iter().zip(row.vals()) {
                    values.insert(name.clone(), value_json(v));
                }
            }
            let record = serde_json::json!({
                "kind": "row",
                "table": show(k),
                "op": "upsert",
                "position": at,
                "checkpoint": n,
                "problems": [{"column": "(the target's error)", "reason": reason}],
                "after": values,
            });
            crate::durable::append_line(&self.dead_letter, &record.to_string())
                .map_err(|x| format!("{}: {x}", self.dead_letter.display()))?;
            match item {
                Item::Keyed(key) => p.keyed.remove(key),
                Item::Keyless(j) => {
                    gone.entry(k.clone()).or_default().insert(*j);
                }
            }
            *tables.entry(k.clone()).or_default() += 1;
        }
        for (k, idx) in gone {
            let p = pending.get_mut(&k).expect("pending");
            let mut i = 0;
            p.keyless.retain(|_| {
                let keep = !idx.contains(&i);
                i += 1;
                keep
            });
        }
        for (k, count) in &tables {
            let name = show(k);
            tracing::warn!(
                "table {name}: {count} row(s) the target refused written to {} (row-error-policy: {}); checkpoint {n} commits without them",
                self.dead_letter.display(),
                if policy == RowErrorPolicy::Park { "park" } else { "skip" }
            );
            if policy == RowErrorPolicy::Park {
                let entry = Entry::new(
                    format!("{at}#refused-{name}"),
                    &format!("(row change of {name} the target refused)"),
                    vec![name.clone()],
                    Status::Parked,
                    Some(format!(
                        "the target refused {count} row(s) of checkpoint {n}; the rows are in {}",
                        self.dead_letter.display()
                    )),
                );
                self.log.record_once(entry)?;
                self.parked.insert(name);
            }
        }
        Ok(bad.len())
    }

    /// Run the statements of `items` alone (a savepoint, rolled back after): the
    /// error the target gave, if any.
    async fn probe(
        &mut self,
        pending: &BTreeMap<(String, String), Pend>,
        items: &[((String, String), Item)],
        n: u64,
    ) -> Result<Option<SyncError>, SyncError> {
        let mut part: BTreeMap<(String, String), Pend> = BTreeMap::new();
        for (k, item) in items {
            let from = &pending[k];
            let p = part.entry(k.clone()).or_default();
            match item {
                Item::Keyed(key) => {
                    if let Some(c) = from.keyed.get(key) {
                        p.keyed.change(
                            from.keyed.key_cols(),
                            key.clone(),
                            c.row().cloned(),
                            c.seq(),
                            c.deleted(),
                            c.absent(),
                        );
                    }
                }
                Item::Keyless(j) => p.keyless.push(from.keyless[*j].clone()),
            }
        }
        let mut stmts = Vec::new();
        let mut plan = step::Plan::new(self.dialect, n, self.cfg.batch_rows, self.max_statement);
        for (k, p) in &part {
            stmts.extend(self.statements(k, p, false, &mut plan)?.concat());
        }
        let t = self.target().await?;
        t.exec("SAVEPOINT lakeshift_probe").await?;
        let mut err = None;
        for s in &stmts {
            if let Err(e) = t.run(s).await {
                let e = SyncError::from(e);
                if e.kind == ErrorKind::Transient {
                    return Err(e);
                }
                err = Some(e);
                break;
            }
        }
        t.exec("ROLLBACK TO SAVEPOINT lakeshift_probe").await?;
        Ok(err)
    }
}

/// A target value as JSON for a dead-letter record (binary as hex).
fn value_json(v: render::Val<'_>) -> serde_json::Value {
    use render::Val;
    match v {
        Val::Null => serde_json::Value::Null,
        Val::Default => serde_json::Value::String("(default)".into()),
        Val::Int(i) => serde_json::Value::from(i),
        Val::UInt(u) => serde_json::Value::from(u),
        Val::Float(f) => serde_json::Value::String(f.to_string()),
        Val::Text(s) => serde_json::Value::String(s.to_owned()),
        Val::Bytes(b) => serde_json::Value::String(b.iter().map(|x| format!("{x:02x}")).collect()),
    }
}
