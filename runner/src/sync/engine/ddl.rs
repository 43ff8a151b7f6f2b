//! DDL into Iceberg: barrier, plan under the evolution rules, one metadata commit
//! that records the DDL's position; the DDL log.

use super::*;
use crate::sync::error::SyncError;

/// What an earlier run did of a DDL (its pending entry in the DDL log).
enum Barrier {
    /// Nothing yet (or no earlier run reached it).
    Fresh,
    /// It ran.
    Ran,
    /// It dropped some of its tables (a crash between them).
    DroppedInPart,
}

impl Engine {
    /// Apply a DDL: barrier-commit the tables it touches, then change Iceberg.
    pub(super) async fn ddl(
        &mut self,
        position: &Position,
        changes: &[ddl_core::SchemaChange],
        after: &[ddl_core::Table],
        sql: &str,
    ) -> Result<(), SyncError> {
        if self.settled_before(position)? {
            return Ok(());
        }
        let item = HeldItem::Ddl {
            position: position.clone(),
            sql: sql.to_owned(),
            changes: changes.to_vec(),
            after: after.to_vec(),
        };
        let changes: &[ddl_core::SchemaChange] = &changes
            .iter()
            .map(|c| self.job.router.change(c))
            .collect::<Vec<_>>();
        let after: &[ddl_core::Table] = &after
            .iter()
            .map(|t| self.job.router.table(t))
            .collect::<Vec<_>>();
        let touched = touched_tables(changes);
        for (ns, t) in touched.iter().filter(|(ns, _)| ns.contains('.')) {
            super::tables::check_namespace(ns, ns, t)?;
        }
        // A DDL on a parked table waits behind the parked one (its other tables too).
        if touched.iter().any(|k| self.parked.contains(k)) {
            for k in &touched {
                self.parked.insert(k.clone());
                self.hold(k.clone(), item.clone());
            }
            tracing::warn!("DDL at {position} held: its table is parked behind an earlier DDL\n  statement: {sql}");
            return self.ddl_logged(
                position,
                sql,
                &touched,
                Vec::new(),
                Status::Held,
                Some("its table is parked behind an earlier DDL".into()),
            );
        }
        let t0 = Instant::now();
        // A DDL inside a source transaction (PostgreSQL's are transactional): the
        // rows before it commit now, part of that transaction.
        self.partial = position.ordinal > 0;
        let flushed: Result<(), SyncError> = async {
            for k in &touched {
                self.flush_table(k).await?;
                // Make sure the planner knows the table as Iceberg has it.
                if !self.sinks.contains_key(k) {
                    self.load_sink(k).await?;
                }
            }
            Ok(())
        }
        .await;
        self.partial = false;
        flushed?;
        // Kafka: the touched tables' floors are read again from the tables they
        // name after the DDL (a rename gives a name, and its topic, another table).
        let names: BTreeSet<String> = touched
            .iter()
            .filter_map(|(ns, t)| crate::iceberg::catalog::ident(ns, t).ok())
            .map(|id| id.to_string())
            .collect();
        self.floors.retain(|(t, _), _| !names.contains(t));
        failpoint("inside-ddl-barrier");
        use ddl_core::SchemaChange as C;
        let drops = changes
            .iter()
            .all(|c| matches!(c, C::DropTable { .. } | C::DropNamespace { .. }));
        let partial_drop = match self.barrier_recorded(position, sql, &touched, drops)? {
            Barrier::Ran => {
                return self.ddl_logged(
                    position,
                    sql,
                    &touched,
                    Vec::new(),
                    Status::Executed,
                    Some("applied before a restart".into()),
                )
            }
            Barrier::DroppedInPart => true,
            Barrier::Fresh => false,
        };
        // A drop of several tables that a crash cut short: the tables it left are
        // dropped now, those it dropped are gone already.
        let in_part: Vec<ddl_core::SchemaChange>;
        let changes: &[ddl_core::SchemaChange] = if partial_drop {
            in_part = changes
                .iter()
                .map(|c| match c {
                    C::DropTable { name, .. } => C::DropTable {
                        name: name.clone(),
                        if_exists: true,
                    },
                    C::DropNamespace { name, cascade, .. } => C::DropNamespace {
                        name: name.clone(),
                        if_exists: true,
                        cascade: *cascade,
                    },
                    c => c.clone(),
                })
                .collect();
            &in_part
        } else {
            changes
        };
        failpoint("after-ddl-recorded");
        if self.applied_before(&touched, position) {
            return self.ddl_logged(
                position,
                sql,
                &touched,
                Vec::new(),
                Status::Executed,
                Some("applied before a restart".into()),
            );
        }
        let mut cat = ddl_core::Catalog::new(self.job.source.dialect().name_rules());
        for t in after {
            cat.apply(&ddl_core::SchemaChange::CreateTable {
                table: t.clone(),
                if_not_exists: false,
            })
            .map_err(|e| e.to_string())?;
        }
        // A table given a column that was empty when the planner last read it and
        // holds rows now (committed since): its data files lack the column, so it
        // cannot be added required. (A table empty at its snapshot then filled from
        // the stream got a required column without a default, and no reader could
        // read it again.)
        for c in changes {
            let ddl_core::SchemaChange::AddColumn { table, .. } = c else {
                continue;
            };
            let k = self.planner.key(table);
            let holds = self
                .sinks
                .get(&k)
                .is_some_and(|s| crate::iceberg::convert::holds_rows(&s.table.metadata));
            if let Some(t) = self.planner.tables.get_mut(&k) {
                t.has_rows |= holds;
            }
        }
        let mut diags = ddl_core::Diagnostics::default();
        let mut plan = match self.planner.plan(changes, &cat, &mut diags) {
            Ok(p) => p,
            Err(e) if e.is_replay() => {
                tracing::info!("DDL at {position} already applied ({e}); skipped");
                let why = format!("the Iceberg table already has it: {e}");
                return self.ddl_logged(
                    position,
                    sql,
                    &touched,
                    Vec::new(),
                    Status::Skipped,
                    Some(why),
                );
            }
            Err(e) => {
                let reason = format!("cannot apply it to Iceberg: {e}");
                return self.ddl_refused(position, sql, &touched, reason, item);
            }
        };
        // Added columns with a default, on tables holding rows: their older rows.
        let policy = self.job.pipeline.added_column_default;
        let fills = match self.fills_for(changes) {
            Ok(f) if f.is_empty() || policy == defaults::AddedDefault::Null => Vec::new(),
            Ok(f) if policy == defaults::AddedDefault::Fail => {
                let cols: Vec<String> = f
                    .iter()
                    .flat_map(|x| {
                        x.columns
                            .iter()
                            .map(move |(c, _)| format!("{}.{}.{c}", x.table.0, x.table.1))
                    })
                    .collect();
                let reason = format!(
                    "column(s) {} added with a default to a table holding rows: Iceberg v2 cannot give the older rows the default (added-column-default: fail; `rewrite` writes them with it, `null` accepts NULL)",
                    cols.join(", ")
                );
                return self.ddl_refused(position, sql, &touched, reason, item);
            }
            Ok(mut f) => {
                if let Some(reason) = self.fills_refused(&plan, &f) {
                    return self.ddl_refused(position, sql, &touched, reason, item);
                }
                for x in &mut f {
                    x.at = Some(position.clone());
                }
                f
            }
            Err(reason) if policy != defaults::AddedDefault::Null => {
                return self.ddl_refused(position, sql, &touched, reason, item);
            }
            Err(reason) => {
                tracing::warn!(
                    "DDL at {position}: {reason}; they read NULL (added-column-default: null)"
                );
                Vec::new()
            }
        };
        for d in diags.0 {
            let filled = !fills.is_empty() && d.message.contains("read NULL for the new column");
            match d.severity {
                _ if filled => {}
                // (At warn level: a log filtered to warnings shows them.)
                ddl_core::Severity::Warning => {
                    tracing::warn!("DDL at {position}: {}", d.message)
                }
                s => tracing::info!("{s}: DDL at {position}: {}", d.message),
            }
        }
        mark_schema_position(&mut plan, position);
        self.mark_fills(&fills)?;
        self.execute_plan(position, &plan, &touched).await?;
        failpoint("before-fill");
        for f in &fills {
            self.fill(f).await?;
        }
        self.ddl_logged(
            position,
            sql,
            &touched,
            vec![serde_json::to_string(&plan.actions).unwrap_or_default()],
            Status::Executed,
            None,
        )?;
        let ms = t0.elapsed().as_secs_f64() * 1000.0;
        self.ddl_stalls
            .push((position.to_string(), touched.len(), ms));
        tracing::info!(
            "DDL at {position} applied; {} table(s) paused {ms:.0} ms",
            touched.len()
        );
        Ok(())
    }

    /// Settled before (a source that delivers its DDL again: a restart before the
    /// state moved past it, or Kafka's schema topic, read whole at every start)?
    fn settled_before(&self, position: &Position) -> Result<bool, SyncError> {
        let log = DdlLog::load(&self.state_dir)?;
        if let Some(e) = log.find(&position.to_string()).map(|i| &log.entries[i]) {
            if matches!(
                e.status,
                Status::Executed | Status::Skipped | Status::Resolved
            ) {
                tracing::debug!(
                    "DDL #{} at {position} was {} before; not repeated",
                    e.seq,
                    e.status
                );
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Record, before the DDL changes anything, that its barrier committed the
    /// touched tables, and which table each touched name held (a pending entry).
    /// A pending entry of an earlier run shows the DDL ran when a touched name
    /// holds another table than it did (a rename, a swap, a drop); a DDL of drops
    /// only (`drops`) whose tables are partly gone and partly as they were ran in
    /// part (a crash between its tables).
    fn barrier_recorded(
        &mut self,
        position: &Position,
        sql: &str,
        touched: &[(String, String)],
        drops: bool,
    ) -> Result<Barrier, SyncError> {
        let uuids: Vec<(String, String, Option<String>)> = touched
            .iter()
            .map(|k| {
                let uuid = self
                    .sinks
                    .get(k)
                    .map(|s| s.table.metadata.uuid().to_string());
                (k.0.clone(), k.1.clone(), uuid)
            })
            .collect();
        for k in touched {
            let floor = self.barriers.entry(k.clone()).or_insert(position.clone());
            if *floor < *position {
                *floor = position.clone();
            }
        }
        let mut log = DdlLog::load(&self.state_dir)?;
        match log.find(&position.to_string()) {
            Some(i) => {
                let e = &mut log.entries[i];
                if e.status == Status::Pending && !e.uuids.is_empty() && e.uuids != uuids {
                    let left = e
                        .uuids
                        .iter()
                        .zip(&uuids)
                        .filter(|(then, now)| now.2.is_some() && then == now)
                        .count();
                    let gone_or_left = e
                        .uuids
                        .iter()
                        .zip(&uuids)
                        .all(|(then, now)| now.2.is_none() || then == now);
                    if drops && left > 0 && gone_or_left {
                        tracing::info!(
                            "DDL at {position} dropped some of its tables before a restart ({left} of {} left): dropping the rest",
                            uuids.len()
                        );
                        return Ok(Barrier::DroppedInPart);
                    }
                    tracing::info!(
                        "DDL at {position} ran before a restart (its tables were renamed, dropped or created); not repeated (tables then {:?}, now {uuids:?})",
                        e.uuids
                    );
                    return Ok(Barrier::Ran);
                }
                if e.flushed.is_empty() {
                    e.flushed = touched.to_vec();
                    log.store()?;
                }
            }
            None => {
                let mut e = Entry::new(
                    position.to_string(),
                    sql,
                    touched.iter().map(|(a, b)| format!("{a}.{b}")).collect(),
                    Status::Pending,
                    None,
                );
                e.flushed = touched.to_vec();
                e.uuids = uuids;
                log.add(e)?;
            }
        }
        Ok(Barrier::Fresh)
    }

    /// Whether a touched table records this DDL's position already (its schema
    /// commit landed before a restart).
    fn applied_before(&self, touched: &[(String, String)], position: &Position) -> bool {
        touched.iter().any(|k| {
            self.sinks.get(k).is_some_and(|s| {
                s.table
                    .metadata
                    .properties()
                    .get(SCHEMA_POSITION)
                    .and_then(|p| p.parse::<Position>().ok())
                    .is_some_and(|a| a >= *position)
            })
        })
    }

    /// Carry out a DDL's plan on Iceberg, then reload the touched tables.
    async fn execute_plan(
        &mut self,
        position: &Position,
        plan: &dialects::iceberg::StatementPlan,
        touched: &[(String, String)],
    ) -> Result<(), SyncError> {
        let mut known = BTreeMap::new();
        for k in touched {
            if let Some(s) = self.sinks.get(k) {
                known.insert(
                    k.clone(),
                    (
                        s.table.metadata.current_schema_id(),
                        s.table.metadata.last_column_id(),
                    ),
                );
            }
        }
        let done =
            crate::iceberg::plan::execute(&Committer::new(&self.catalog), plan, &mut known).await?;
        for a in done {
            tracing::info!("{position}: {a}");
        }
        self.commits += 1;
        // Reload the touched tables' sinks (schema, renames, drops).
        for k in touched {
            if let Some(old) = self.sinks.remove(k) {
                debug_assert!(old.pending.is_empty());
            }
            if !self.load_sink(k).await? {
                self.planner.tables.remove(k);
            }
        }
        Ok(())
    }

    /// Record a DDL in the DDL log, once per position. An entry still open (held
    /// behind a parked DDL, parked and now retried, failed before) takes the outcome.
    pub(super) fn ddl_logged(
        &mut self,
        position: &Position,
        sql: &str,
        touched: &[(String, String)],
        target_sql: Vec<String>,
        status: Status,
        reason: Option<String>,
    ) -> Result<(), SyncError> {
        let mut log = DdlLog::load(&self.state_dir)?;
        if let Some(i) = log.find(&position.to_string()) {
            // Held is a first record only (a parked DDL read again stays parked).
            let open = status != Status::Held
                && matches!(
                    log.entries[i].status,
                    Status::Held | Status::Parked | Status::Pending | Status::Failed
                );
            if open && log.entries[i].status != status {
                if !target_sql.is_empty() {
                    log.entries[i].target_sql = target_sql;
                }
                log.set(i, status, reason)?;
            }
            return Ok(());
        }
        let mut e = Entry::new(
            position.to_string(),
            sql,
            touched.iter().map(|(a, b)| format!("{a}.{b}")).collect(),
            status,
            reason,
        );
        e.target_sql = target_sql;
        log.add(e).map(|_| ())
    }

    /// A DDL Iceberg cannot take: the job's `ddl-error-policy`.
    pub(super) fn ddl_refused(
        &mut self,
        position: &Position,
        sql: &str,
        touched: &[(String, String)],
        reason: String,
        item: HeldItem,
    ) -> Result<(), SyncError> {
        use crate::sync::job::DdlErrorPolicy;
        match self.job.pipeline.ddl_error_policy {
            DdlErrorPolicy::Park => {
                let at = position.to_string();
                let mut log = DdlLog::load(&self.state_dir)?;
                let i = match log.find(&at) {
                    Some(i) => {
                        if log.entries[i].status == Status::Parked {
                            // A retry during a release, refused again.
                            self.reparked.insert(at.clone());
                        }
                        log.set(i, Status::Parked, Some(reason.clone()))?;
                        i
                    }
                    None => log.add(Entry::new(
                        at.clone(),
                        sql,
                        touched.iter().map(|(a, b)| format!("{a}.{b}")).collect(),
                        Status::Parked,
                        Some(reason.clone()),
                    ))?,
                };
                DdlLog::dead_letter(&self.dead_letter, &log.entries[i])?;
                for k in touched {
                    self.parked.insert(k.clone());
                    self.hold(k.clone(), item.clone());
                }
                let e = &log.entries[i];
                tracing::warn!(
                    "DDL #{} at {position} parked (ddl-error-policy: park): {reason}; {} held until `lakeshift ddl-log --resolve {}`\n  statement: {sql}",
                    e.seq,
                    e.tables.join(", "),
                    e.seq
                );
                Ok(())
            }
            DdlErrorPolicy::Skip => {
                tracing::warn!("DDL at {position} skipped (ddl-error-policy: skip): {reason}\n  statement: {sql}");
                self.ddl_logged(
                    position,
                    sql,
                    touched,
                    Vec::new(),
                    Status::Skipped,
                    Some(reason),
                )
            }
            _ => {
                self.ddl_logged(
                    position,
                    sql,
                    touched,
                    Vec::new(),
                    Status::Failed,
                    Some(reason.clone()),
                )?;
                // Running again meets the same statement: the policy or the
                // target must change first.
                Err(SyncError::new(
                    crate::sync::error::ErrorKind::NeedsFix,
                    format!("DDL at {position} failed (ddl-error-policy: fail): {reason}\n  statement: {sql}"),
                ))
            }
        }
    }
}

/// Record the DDL's position in every table the plan leaves, in the same commit.
pub(super) fn mark_schema_position(plan: &mut dialects::iceberg::StatementPlan, at: &Position) {
    for t in plan.tables.values_mut().flatten() {
        t.properties
            .insert(SCHEMA_POSITION.to_owned(), at.to_string());
    }
    for a in &mut plan.actions {
        if let dialects::iceberg::Action::CreateTable { properties, .. } = a {
            properties.insert(SCHEMA_POSITION.to_owned(), at.to_string());
        }
    }
}

/// The tables a DDL touches (a rename: both names), as the engine keys them.
fn touched_tables(changes: &[ddl_core::SchemaChange]) -> Vec<(String, String)> {
    let mut seen = BTreeSet::new();
    changes
        .iter()
        .flat_map(|c| {
            let mut v: Vec<&ddl_core::TableName> = c.table().into_iter().collect();
            if let ddl_core::SchemaChange::RenameTable { to, .. } = c {
                v.push(to);
            }
            v.into_iter()
                .map(|t| {
                    (
                        ns_of(t.schema.as_deref().unwrap_or_default()),
                        t.name.clone(),
                    )
                })
                .collect::<Vec<_>>()
        })
        .filter(|k| seen.insert(k.clone()))
        .collect()
}
