//! DDL: translated into the target's dialect, logged, run once (reconciled after a
//! crash), or handled by the job's `ddl-error-policy`.

use super::*;
use crate::sync::engine::defaults::non_constant;
use crate::sync::error::SyncError;

impl RdbEngine {
    /// Handle a DDL event.
    pub(super) async fn ddl(
        &mut self,
        position: &Position,
        sql: &str,
        changes: &[SchemaChange],
        after: &[Table],
    ) -> Result<(), SyncError> {
        // Barrier: what came before the DDL is committed first.
        let pos_before = self.position.clone();
        if !self.pending.is_empty() {
            self.checkpoint(pos_before, None).await?;
        }
        let routed = self.route_changes(changes);
        let (routed, split) = self
            .null_for_older_rows(routed, &position.to_string())
            .await?;
        for t in after {
            if changes.iter().any(|c| {
                matches!(
                    c,
                    SchemaChange::CreateTable { .. } | SchemaChange::AddForeignKey { .. }
                )
            }) {
                self.warn_actions(t);
                self.note_actions(&self.with_fks(t));
            }
        }
        let after_routed: Vec<Table> = after.iter().map(|t| self.routed_ir(t)).collect();
        let mut touched: Vec<String> = Vec::new();
        for c in &routed {
            if let Some(t) = c.table() {
                touched.push(show(&key_of(t)));
            }
            if let SchemaChange::RenameTable { to, .. } = c {
                touched.push(show(&key_of(to)));
            }
        }
        touched.dedup();
        let at = position.to_string();
        failpoint("before-ddl");
        // Run on the target for this job already (in the transaction that recorded
        // it, by another process, or before the DDL log here caught up)?
        if self.ddl_applied(&at).await? {
            self.record_run_before(&at, sql, &touched)?;
            self.apply_catalog(&routed, &after_routed);
            return self.advance(position).await;
        }
        // Seen before (a replay after a restart)?
        if let Some(i) = self.log.find(&at) {
            let e = self.log.entries[i].clone();
            match e.status {
                Status::Failed => {
                    // Refused for what it is: refused again (the same stop on every
                    // run, or what a changed policy says).
                    if let Some(reason) = self.rewrite_refused(&routed).await? {
                        return self
                            .policy(i, position, &routed, &after_routed, reason)
                            .await;
                    }
                    // (Refused before under another policy: its statements are
                    // made again for the split.)
                    if split {
                        if let Ok((stmts, _)) = self.translate(&routed, &after_routed) {
                            self.log.entries[i].target_sql = stmts;
                        }
                    }
                    if let Some(reason) = self.added_refused(&routed).await? {
                        if self.job.pipeline.added_column_default
                            != crate::sync::engine::defaults::AddedDefault::Null
                        {
                            return self
                                .policy(i, position, &routed, &after_routed, reason)
                                .await;
                        }
                        tracing::warn!(
                            "DDL at {at}: {reason}; they read NULL (added-column-default: null)"
                        );
                    }
                    return self
                        .run_ddl(i, position, &routed, &after_routed, true)
                        .await;
                }
                Status::Pending => {
                    return self
                        .run_ddl(i, position, &routed, &after_routed, true)
                        .await;
                }
                _ => {
                    tracing::info!(
                        "DDL #{} at {at} was {} before; not repeated",
                        e.seq,
                        e.status
                    );
                    self.apply_catalog(&routed, &after_routed);
                    // (Skipped by the policy: the target may lack what it adds.)
                    if skipped_by_policy(&e) {
                        self.fit_to_target(&routed).await?;
                    }
                    return self.advance(position).await;
                }
            }
        }
        let translated = self.translate(&routed, &after_routed);
        let already = self.target_already_as(&routed, &after_routed);
        let mut entry = Entry::new(at.clone(), sql, touched.clone(), Status::Pending, None);
        if already {
            entry.target_sql = translated.map(|t| t.0).unwrap_or_default();
            entry.status = Status::Skipped;
            entry.reason = Some(format!(
                "{ALREADY_AS} (several source tables route into it)"
            ));
            let seq = self.log.add(entry)?;
            tracing::info!(
                "DDL #{} at {at}: {}",
                self.log.entries[seq].seq,
                self.log.entries[seq].reason.clone().unwrap_or_default()
            );
            // (A foreign key it adds waits in the queue, as the target adds them.)
            self.add_ready_fks().await?;
            return self.advance(position).await;
        }
        // A DDL on a parked table waits behind the parked one.
        if touched.iter().any(|t| self.parked.contains(t)) {
            entry.target_sql = translated.as_ref().map(|t| t.0.clone()).unwrap_or_default();
            entry.status = Status::Held;
            entry.reason = Some("its table is parked behind an earlier DDL".into());
            let i = self.log.add(entry)?;
            let stmts: Vec<step::Step> = self.log.entries[i]
                .target_sql
                .iter()
                .cloned()
                .map(step::Step::Sql)
                .collect();
            for t in &touched {
                self.log.hold(t, self.checkpoint + 1, stmts.clone())?;
            }
            self.parked.extend(touched);
            self.apply_catalog(&routed, &after_routed);
            return self.advance(position).await;
        }
        match translated {
            Ok((mut stmts, notes)) => {
                for n in notes {
                    match n.strip_prefix("warning: ") {
                        Some(w) => tracing::warn!("DDL at {at}: {w}"),
                        None => tracing::info!("DDL at {at}: {n}"),
                    }
                }
                // PostgreSQL refuses to truncate a table a foreign key references
                // unless the referencing tables go in the same statement; the source
                // truncated those too (it refuses the same), each in an event of its
                // own: CASCADE here.
                if self.deferred_fks()
                    && routed
                        .iter()
                        .any(|c| matches!(c, SchemaChange::TruncateTable { .. }))
                {
                    for s in stmts
                        .iter_mut()
                        .filter(|s| s.starts_with("TRUNCATE TABLE "))
                    {
                        s.push_str(" CASCADE");
                    }
                }
                entry.target_sql = stmts;
                if let Some(reason) = self.rewrite_refused(&routed).await? {
                    entry.reason = Some(reason.clone());
                    let i = self.log.add(entry)?;
                    return self
                        .policy(i, position, &routed, &after_routed, reason)
                        .await;
                }
                let refused = self.added_refused(&routed).await?;
                let i = self.log.add(entry)?;
                if let Some(reason) = refused {
                    if self.job.pipeline.added_column_default
                        != crate::sync::engine::defaults::AddedDefault::Null
                    {
                        return self
                            .policy(i, position, &routed, &after_routed, reason)
                            .await;
                    }
                    tracing::warn!(
                        "DDL at {at}: {reason}; they read NULL (added-column-default: null)"
                    );
                }
                self.run_ddl(i, position, &routed, &after_routed, false)
                    .await
            }
            Err(e) => {
                let reason = e.message;
                entry.reason = Some(reason.clone());
                let i = self.log.add(entry)?;
                self.policy(i, position, &routed, &after_routed, reason)
                    .await
            }
        }
    }

    /// A change that rewrites the values of a table the target holds rows of in a way
    /// the target cannot repeat, which no change event corrects: a type change whose
    /// USING expression (not a plain cast) is in another dialect than the target's, or
    /// an identity column added, which a target of another dialect numbers in another
    /// row order. Refused whatever `added-column-default` says.
    async fn rewrite_refused(
        &mut self,
        routed: &[SchemaChange],
    ) -> Result<Option<String>, SyncError> {
        for c in routed {
            // An identity column added to rows: each server numbers them in its own
            // row order (InnoDB by primary key, PostgreSQL by heap order). A target
            // of the source's dialect numbers the rows it replayed by the same rule.
            if let SchemaChange::AddColumn { table, column, .. } = c {
                let k = key_of(table);
                if column.identity.is_some()
                    && self.numbered_otherwise(table, column)
                    && self.holds_rows(&k).await?
                {
                    return Ok(Some(format!(
                        "column {} of {} is added as an identity (AUTO_INCREMENT) column to a table holding rows: the source numbered its rows in its own row order, which no change event tells, and the target would number its copy in another: take a new snapshot of the table after it",
                        column.name,
                        show(&k)
                    )));
                }
            }
            let (Some(u), SchemaChange::AlterColumnType { table, column, .. }) =
                (dialects::iceberg::rewriting_using(c), c)
            else {
                continue;
            };
            if u.for_dialect(self.dialect.name()).is_some() {
                continue;
            }
            let k = key_of(table);
            if self.holds_rows(&k).await? {
                return Ok(Some(format!(
                    "table {} column {column}: the type change rewrites every row's value (USING {}), which {} cannot run; the rows already in the table would keep their old values, which no change event corrects: take a new snapshot of the table after it",
                    show(&k),
                    u.sql,
                    self.dialect
                )));
            }
        }
        Ok(None)
    }

    /// Whether the target would number the rows of `table` for an identity `column`
    /// added to them otherwise than the source did: a target of another dialect
    /// (PostgreSQL numbers by heap order); a MySQL target of a table without a
    /// primary key (InnoDB's hidden row order follows the order the rows were
    /// replayed in), one whose key holds text (the target's collation may order it
    /// otherwise), or a column the source numbered in a session step other than 1
    /// (hostile tester: each numbered differently, silently).
    fn numbered_otherwise(&self, table: &TableName, column: &ddl_core::Column) -> bool {
        if self.source_dialect != self.dialect {
            return true;
        }
        if column
            .identity
            .as_ref()
            .is_some_and(|id| id.increment.is_some_and(|n| n != 1))
        {
            return true;
        }
        let Some(t) = self.catalog.table(table) else {
            return true;
        };
        let Some(pk) = &t.primary_key else {
            return true;
        };
        pk.columns.iter().any(|n| {
            t.column(n).is_none_or(|c| {
                matches!(
                    c.data_type,
                    ddl_core::DataType::Char { .. }
                        | ddl_core::DataType::Varchar { .. }
                        | ddl_core::DataType::Text { .. }
                        | ddl_core::DataType::Enum { .. }
                        | ddl_core::DataType::Set { .. }
                        | ddl_core::DataType::Json { .. }
                        | ddl_core::DataType::Other { .. }
                )
            })
        })
    }

    /// The tables of `routed`, a DDL the policy skipped: what the sink knows of each
    /// keeps only the columns the target's table has.
    async fn fit_to_target(&mut self, routed: &[SchemaChange]) -> Result<(), SyncError> {
        let keys: BTreeSet<(String, String)> = routed
            .iter()
            .filter_map(|c| c.table())
            .map(key_of)
            .collect();
        for k in keys {
            let Some(have) = self.target_columns(&k).await? else {
                continue;
            };
            let tn = TableName::new(Some(&k.0), &k.1);
            if let Some(known) = self.catalog.tables.get_mut(&tn) {
                let cols = &mut std::sync::Arc::make_mut(known).columns;
                for c in cols.iter() {
                    let n = c.name.to_lowercase();
                    if !have.contains(&n) {
                        self.skipped_columns.insert((k.clone(), n));
                    }
                }
                cols.retain(|c| have.contains(&c.name.to_lowercase()));
            }
            self.tables.remove(&k);
        }
        Ok(())
    }

    /// Whether the target's table `k` holds a row.
    async fn holds_rows(&mut self, k: &(String, String)) -> Result<bool, SyncError> {
        let name = format!(
            "{}.{}",
            self.emitter_ctx_ident(&k.0),
            self.emitter_ctx_ident(&k.1)
        );
        let rows = self
            .target()
            .await?
            .query(&format!("SELECT 1 FROM {name} LIMIT 1"))
            .await
            .map_err(SyncError::from)?;
        Ok(!rows.is_empty())
    }

    /// A column added to a table the target holds rows of, whose older rows would
    /// read NULL where the source's hold a value: a generated column the target gets
    /// as a plain one (its expression is another dialect's), or a default the target
    /// cannot hold or has no equivalent of. `added-column-default` decides.
    async fn added_refused(
        &mut self,
        routed: &[SchemaChange],
    ) -> Result<Option<String>, SyncError> {
        let emitter = Emitter::new(self.dialect);
        for c in routed {
            let SchemaChange::AddColumn { table, column, .. } = c else {
                continue;
            };
            let k = key_of(table);
            let reason = match &column.generated {
                Some(g) if g.dialect != self.dialect.name() => Some(
                    crate::sync::engine::defaults::generated_refused(&show(&k), &column.name, g),
                ),
                Some(_) => None,
                None => emitter
                    .default_dropped(self.source_dialect, table, column)
                    .map(|why| {
                        format!(
                            "column {} of {} is added with a default {} does not take ({why}); the rows already in the table would read NULL, not the source's default (added-column-default: null accepts NULL for them; or take a new snapshot of the table after it)",
                            column.name,
                            show(&k),
                            self.dialect
                        )
                    })
                    .or_else(|| {
                        column
                            .default
                            .as_ref()
                            .and_then(non_constant)
                            .map(|d| {
                            format!(
                                "column {} of {} is added with a default that is not a constant ({d}): the rows already in the table hold the values the source computed for them, which no change event tells, and the target would compute others (added-column-default: null gives them NULL; or take a new snapshot of the table after it)",
                                column.name,
                                show(&k)
                            )
                        })
                    }),
            };
            if let Some(reason) = reason {
                if self.holds_rows(&k).await? {
                    return Ok(Some(reason));
                }
            }
        }
        Ok(None)
    }

    /// Under `added-column-default: null`: a column added with a default that is not
    /// a constant to a table the target holds rows of is added without it, then given
    /// it, so the older rows read NULL (said in a warning) instead of values the target
    /// computes, which would differ from the source's. Also says whether it split one.
    async fn null_for_older_rows(
        &mut self,
        routed: Vec<SchemaChange>,
        at: &str,
    ) -> Result<(Vec<SchemaChange>, bool), SyncError> {
        if self.job.pipeline.added_column_default
            != crate::sync::engine::defaults::AddedDefault::Null
        {
            return Ok((routed, false));
        }
        let mut split = false;
        let mut out = Vec::with_capacity(routed.len());
        for c in routed {
            let d = match &c {
                SchemaChange::AddColumn { table, column, .. } if column.generated.is_none() => {
                    match column.default.as_ref().and_then(non_constant) {
                        Some(d) if self.holds_rows(&key_of(table)).await? => Some(d),
                        _ => None,
                    }
                }
                _ => None,
            };
            let Some(d) = d else {
                out.push(c);
                continue;
            };
            let SchemaChange::AddColumn {
                table,
                mut column,
                position,
            } = c
            else {
                unreachable!("only an added column has a default to split")
            };
            // (A NOT NULL column is added as nullable: its older rows read NULL; a
            // MariaDB target gave them its implicit default, '' or 0, instead.)
            let not_null = if column.nullable {
                ""
            } else {
                " (the column is added as nullable on the target, which its NULLs need)"
            };
            column.nullable = true;
            tracing::warn!(
                "DDL at {at}: column {} of {} is added with a default that is not a constant ({d}); the rows already in the table read NULL (added-column-default: null){not_null}, later rows the source's values",
                column.name,
                show(&key_of(&table))
            );
            split = true;
            let default = column.default.take();
            let name = column.name.clone();
            out.push(SchemaChange::AddColumn {
                table: table.clone(),
                column,
                position,
            });
            out.push(SchemaChange::SetDefault {
                table,
                column: name,
                default,
            });
        }
        Ok((out, split))
    }

    /// The DDL's changes routed to their target tables; foreign keys the target does
    /// not take with them are queued (added once both tables exist) or dropped.
    fn route_changes(&mut self, changes: &[SchemaChange]) -> Vec<SchemaChange> {
        let mut routed: Vec<SchemaChange> =
            changes.iter().map(|c| self.job.router.change(c)).collect();
        for c in &mut routed {
            match c {
                SchemaChange::CreateTable { table, .. } => {
                    self.target_actions(&mut table.foreign_keys)
                }
                SchemaChange::AddForeignKey { foreign_key, .. } => {
                    self.target_actions(std::slice::from_mut(foreign_key))
                }
                _ => {}
            }
        }
        // A foreign key the target never got (`foreign-keys: drop`, or one still
        // queued) is not dropped there: the queued one leaves the queue.
        routed.retain(|c| {
            let SchemaChange::DropConstraint { table, name } = c else {
                return true;
            };
            let named =
                |n: &Option<String>| n.as_deref().is_some_and(|n| n.eq_ignore_ascii_case(name));
            if let Some(i) = self
                .fk_queue
                .iter()
                .position(|(t, fk)| t == table && named(&fk.name))
            {
                self.fk_queue.remove(i);
                return false;
            }
            let on_target = self.catalog.table(table).is_none_or(|t| {
                t.indexes.iter().any(|i| named(&i.name))
                    || t.foreign_keys.iter().any(|f| named(&f.name))
                    || t.checks.iter().any(|c| named(&c.name))
                    || t.primary_key.as_ref().is_some_and(|p| named(&p.name))
            });
            on_target || self.cfg.foreign_keys != ForeignKeys::Drop
        });
        if self.cfg.foreign_keys == ForeignKeys::Drop || self.deferred_fks() {
            let mut later: Vec<Table> = Vec::new();
            routed.retain(|c| match c {
                SchemaChange::AddForeignKey { table, foreign_key } => {
                    let mut t = Table::new(table.clone());
                    t.foreign_keys.push(foreign_key.clone());
                    later.push(t);
                    false
                }
                _ => true,
            });
            for c in &mut routed {
                if let SchemaChange::CreateTable { table, .. } = c {
                    later.push(table.clone());
                    table.foreign_keys.clear();
                }
            }
            for t in later {
                self.queue_fks(&t);
            }
        }
        routed
    }

    /// The DDL log learns that the target ran this DDL for the job before.
    fn record_run_before(
        &mut self,
        at: &str,
        sql: &str,
        touched: &[String],
    ) -> Result<(), SyncError> {
        match self.log.find(at) {
            Some(i) if self.log.entries[i].status == Status::Executed => {}
            Some(i) => self.log.set(i, Status::Executed, None)?,
            None => {
                self.log.add(Entry::new(
                    at.to_owned(),
                    sql,
                    touched.to_vec(),
                    Status::Executed,
                    Some("the target ran it for this job before (another process, or a lost state folder)".into()),
                ))?;
            }
        }
        tracing::info!("DDL at {at}: already run on the target for this job; not repeated");
        Ok(())
    }

    /// Several tables routed into one: the same change from the next of them finds
    /// the target table already as the DDL leaves it.
    /// (A type change that rewrites the values is never already done: the schema
    /// alone does not say.)
    fn target_already_as(&self, routed: &[SchemaChange], after_routed: &[Table]) -> bool {
        !after_routed.is_empty()
            && !routed.iter().any(|c| {
                matches!(
                    c,
                    SchemaChange::DropTable { .. }
                        | SchemaChange::RenameTable { .. }
                        | SchemaChange::TruncateTable { .. }
                        // (Foreign keys are not compared below.)
                        | SchemaChange::AddForeignKey { .. }
                        | SchemaChange::DropConstraint { .. }
                ) || dialects::iceberg::rewriting_using(c).is_some()
            })
            && after_routed.iter().all(|t| {
                self.catalog.table(&t.name).is_some_and(|have| {
                    have.columns == t.columns
                        && have.primary_key == t.primary_key
                        && have.indexes == t.indexes
                        && have.checks == t.checks
                })
            })
    }

    /// The catalog follows the source, whatever happened to the DDL on the target.
    pub(super) fn apply_catalog(&mut self, routed: &[SchemaChange], after: &[Table]) {
        let mut ok = true;
        for c in routed {
            if self.catalog.apply(c).is_err() {
                ok = false;
            }
        }
        if !ok {
            for t in after {
                self.know(t.clone());
            }
        }
        // The DDL's tables are the target's as the DDL left them (or as its policy
        // did): not created again on first sight.
        for t in after {
            self.ensured.insert(key_of(&t.name));
        }
        for c in routed {
            if let Some(t) = c.table() {
                self.tables.remove(&key_of(t));
            }
            if let SchemaChange::RenameTable { to, .. } = c {
                self.tables.remove(&key_of(to));
            }
        }
    }

    /// Move the state row past a DDL (nothing else in the transaction).
    pub(super) async fn advance(&mut self, position: &Position) -> Result<(), SyncError> {
        if self.position.as_ref().is_some_and(|p| p >= position) {
            return Ok(());
        }
        self.commit(&[], Some(position.clone()), None).await
    }

    /// Run (or reconcile) the DDL of log entry `i`.
    pub(super) async fn run_ddl(
        &mut self,
        i: usize,
        position: &Position,
        routed: &[SchemaChange],
        after: &[Table],
        replay: bool,
    ) -> Result<(), SyncError> {
        let stmts = self.log.entries[i].target_sql.clone();
        let seq = self.log.entries[i].seq;
        for t in &self.log.entries[i].tables.clone() {
            if let Some((db, _)) = t.split_once('.') {
                // (A table made, or moved into another schema.)
                if routed.iter().any(|c| {
                    matches!(
                        c,
                        SchemaChange::CreateTable { .. } | SchemaChange::RenameTable { .. }
                    )
                }) {
                    self.ensure_namespace(db).await?;
                }
            }
        }
        let mark = self.ddl_mark(&position.to_string());
        let result = if self.target().await?.transactional_ddl() {
            // DDL, its mark and the state row in one transaction.
            let mut stmts: Vec<step::Step> = stmts.iter().cloned().map(step::Step::Sql).collect();
            stmts.push(step::Step::Sql(mark.clone()));
            let r = self.commit(&stmts, Some(position.clone()), None).await;
            failpoint("after-ddl");
            r
        } else if let Some(pairs) = renames_only(&stmts) {
            // MySQL renames several tables in one statement, atomically: a swap
            // (`a TO tmp, b TO a, tmp TO b`) split into three statements is left
            // half done by a crash, and one repeated after a crash swaps back. So
            // the renames run as one statement that also renames a marker table of
            // this DDL from `todo` to `done`: after a crash the marker says whether
            // the renames happened.
            let (todo, done) = rename_markers(&self.job.pipeline.name, &position.to_string());
            let t = self.target().await?;
            let ran = t
                .columns(STATE_DB, &done)
                .await
                .map_err(SyncError::from)?
                .is_some();
            let mut r = Ok(());
            if ran {
                tracing::info!(
                    "DDL #{seq} at {position}: its renames ran before a restart; not repeated"
                );
            } else {
                let sql =
                    format!("RENAME TABLE {pairs}, {STATE_DB}.`{todo}` TO {STATE_DB}.`{done}`");
                let run = async {
                    t.exec(&format!(
                        "CREATE TABLE IF NOT EXISTS {STATE_DB}.`{todo}` (x int)"
                    ))
                    .await?;
                    t.exec(&sql).await
                };
                if let Err(e) = run.await {
                    let mut e = SyncError::from(e);
                    e.message = format!("{}\n  target statement: {sql}", e.message);
                    r = Err(e);
                } else {
                    failpoint("after-ddl");
                }
            }
            if r.is_ok() {
                if let Err(e) = t.exec(&mark).await {
                    if !e.already_applied() && !e.unique_violation() {
                        r = Err(SyncError::from(e));
                    }
                }
            }
            if r.is_ok() {
                // The marker has done its work once the DDL's mark is in.
                let _ = t
                    .exec(&format!("DROP TABLE IF EXISTS {STATE_DB}.`{done}`"))
                    .await;
                r = self.advance(position).await;
            }
            r
        } else {
            let mut r = Ok(());
            let start = self.log.entries[i].done;
            for (j, s) in stmts.iter().enumerate().skip(start) {
                if replay && j == 0 && self.already_applied(routed, after).await? {
                    tracing::info!("DDL #{seq} at {position} had taken effect before a restart; recorded, not repeated");
                    break;
                }
                match self.target().await?.exec(s).await {
                    Ok(_) => {
                        failpoint("after-ddl");
                        self.log.entries[i].done = j + 1;
                        self.log.store()?;
                    }
                    Err(e) if replay && e.already_applied() => {
                        self.log.entries[i].done = j + 1;
                        self.log.store()?;
                    }
                    Err(e) => {
                        let mut e = SyncError::from(e);
                        e.message = format!("{}\n  target statement: {s}", e.message);
                        r = Err(e);
                        break;
                    }
                }
            }
            if r.is_ok() {
                if let Err(e) = self.target().await?.exec(&mark).await {
                    if !e.already_applied() && !e.unique_violation() {
                        r = Err(SyncError::from(e));
                    }
                }
            }
            if r.is_ok() {
                r = self.advance(position).await;
            }
            r
        };
        match result {
            Ok(()) => {
                self.log.set(i, Status::Executed, None)?;
                self.apply_catalog(routed, after);
                self.add_ready_fks().await?;
                self.ddls += 1;
                tracing::info!("DDL #{seq} at {position} executed on the target");
                Ok(())
            }
            // A lost connection is no refusal: the job starts again from its last
            // checkpoint and runs the DDL again.
            Err(e)
                if e.message.contains("another process advanced it")
                    || e.kind == crate::sync::error::ErrorKind::Transient =>
            {
                Err(e)
            }
            Err(e) => {
                let reason = format!("the target refused it: {}", e.message);
                self.policy(i, position, routed, after, reason).await
            }
        }
    }

    /// Whether a DDL's effect is already on the target (MySQL, after a crash between
    /// the DDL's implicit commit and the log's update): the touched tables' columns
    /// as the target has them are the columns after the DDL, not before.
    pub(super) async fn already_applied(
        &mut self,
        routed: &[SchemaChange],
        after: &[Table],
    ) -> Result<bool, SyncError> {
        let mut expect: BTreeMap<(String, String), Option<Vec<String>>> = BTreeMap::new();
        for c in routed {
            for t in c.table().into_iter().chain(match c {
                SchemaChange::RenameTable { to, .. } => Some(to),
                _ => None,
            }) {
                let k = key_of(t);
                let a = after
                    .iter()
                    .find(|x| key_of(&x.name) == k)
                    .map(|x| x.columns.iter().map(|c| c.name.to_lowercase()).collect());
                expect.insert(k, a);
            }
        }
        let mut differs_from_before = false;
        for (k, want) in &expect {
            let have = self
                .target()
                .await?
                .columns(&k.0, &k.1)
                .await
                .map_err(SyncError::from)?;
            if have != *want {
                return Ok(false);
            }
            let before: Option<Vec<String>> = self
                .catalog
                .table(&TableName::new(Some(&k.0), &k.1))
                .map(|x| x.columns.iter().map(|c| c.name.to_lowercase()).collect());
            if before != *want {
                differs_from_before = true;
            }
        }
        Ok(differs_from_before)
    }

    /// The conversion-error manager: one place for a DDL that cannot be translated or
    /// that the target refused.
    pub(super) async fn policy(
        &mut self,
        i: usize,
        position: &Position,
        routed: &[SchemaChange],
        after: &[Table],
        reason: String,
    ) -> Result<(), SyncError> {
        let e = self.log.entries[i].clone();
        match self.job.pipeline.ddl_error_policy {
            DdlErrorPolicy::Fail => {
                self.log.set(i, Status::Failed, Some(reason.clone()))?;
                // Running again meets the same statement: the policy or the target
                // must change first.
                Err(SyncError::new(
                    crate::sync::error::ErrorKind::NeedsFix,
                    format!(
                        "DDL #{} at {position} failed (ddl-error-policy: fail): {reason}\n  statement: {}",
                        e.seq, e.source_sql
                    ),
                ))
            }
            DdlErrorPolicy::Skip => {
                self.log.set(i, Status::Skipped, Some(reason.clone()))?;
                tracing::warn!(
                    "DDL #{} at {position} skipped (ddl-error-policy: skip): {reason}; rows are written to the table as the target has it\n  statement: {}",
                    e.seq,
                    e.source_sql
                );
                // The sink knows the tables as the source has them, but in the
                // columns the target has: rows are written in those (an added
                // column's values left out, a dropped one's its default).
                self.apply_catalog(routed, after);
                self.fit_to_target(routed).await?;
                self.advance(position).await
            }
            DdlErrorPolicy::Park => {
                self.log.set(i, Status::Parked, Some(reason.clone()))?;
                DdlLog::dead_letter(&self.dead_letter, &self.log.entries[i])?;
                tracing::warn!(
                    "DDL #{} at {position} parked (ddl-error-policy: park): {reason}; {} held until `lakeshift ddl-log --resolve {}`\n  statement: {}",
                    e.seq,
                    e.tables.join(", "),
                    e.seq,
                    e.source_sql
                );
                self.parked.extend(e.tables.iter().cloned());
                self.apply_catalog(routed, after);
                self.advance(position).await
            }
        }
    }
}

/// Why a DDL was not run: its target table is already as it leaves it.
const ALREADY_AS: &str = "the target table is already as this DDL leaves it";

/// A DDL log entry skipped by `ddl-error-policy: skip` (not because its target table
/// was already as it leaves it): the target may lack what it changes.
pub(super) fn skipped_by_policy(e: &Entry) -> bool {
    e.status == Status::Skipped
        && !e
            .reason
            .as_deref()
            .is_some_and(|r| r.starts_with(ALREADY_AS))
}

/// A DDL's statements when all of them are MySQL `RENAME TABLE x TO y` and there are
/// several: their `x TO y` parts joined for one statement.
fn renames_only(stmts: &[String]) -> Option<String> {
    let parts: Vec<&str> = stmts
        .iter()
        .map(|s| s.strip_prefix("RENAME TABLE "))
        .collect::<Option<_>>()?;
    (parts.len() > 1).then(|| parts.join(", "))
}

/// The marker tables (in the state database) a rename DDL at `position` of job
/// `job` moves from its first name to its second in the same statement.
fn rename_markers(job: &str, position: &str) -> (String, String) {
    // A name within MySQL's 64 characters.
    let h = twox_hash::XxHash3_64::oneshot(format!("{job}\0{position}").as_bytes());
    (format!("ddl_{h:016x}_todo"), format!("ddl_{h:016x}_done"))
}
