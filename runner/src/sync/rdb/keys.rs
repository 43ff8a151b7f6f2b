//! Foreign keys: queued until their tables exist, or run by the sink itself
//! (ON DELETE actions the binlog does not log).

use super::*;
use crate::sync::error::SyncError;

impl RdbEngine {
    /// A source table definition under target names, without what the target skips.
    /// A source foreign-key action the binlog does not carry and the sink does not
    /// follow (none when the source logs the rows actions change): ON DELETE CASCADE /
    /// SET NULL are followed (by the target's own key on
    /// PostgreSQL with `keep`, else by the checkpoint), except onto the same table;
    /// SET DEFAULT and ON UPDATE actions are not.
    pub(super) fn warn_actions(&self, t: &Table) {
        if self.job.source_logs_referential_actions() {
            return;
        }
        for a in crate::sync::fk::referential_actions(t) {
            if !(a.followable() && (self.deferred_fks() || !a.onto_itself())) {
                tracing::warn!(
                    "foreign key {a}: the source does not log the rows this action changes and this sink does not run it; those rows will differ"
                );
            }
        }
    }

    /// Remember a routed table's foreign keys with ON DELETE CASCADE or SET NULL.
    pub(super) fn note_actions(&mut self, routed: &Table) {
        for a in crate::sync::fk::referential_actions(routed) {
            if !a.followable() {
                continue;
            }
            let mut parent = a.fk.ref_table.clone();
            if parent.schema.is_none() {
                parent.schema = routed.name.schema.clone();
            }
            let act = FkAction {
                child: key_of(&routed.name),
                cols: a.fk.columns.clone(),
                parent_cols: a.fk.ref_columns.clone(),
                set_null: a.action == ddl_core::RefAction::SetNull,
            };
            let list = self.fk_actions.entry(key_of(&parent)).or_default();
            if !list.contains(&act) {
                list.push(act);
            }
        }
    }

    /// The statements that run the ON DELETE actions of `parent`'s rows matching
    /// `rows` (a condition on the parent table), children's children first. They run
    /// before the parent rows go. None of it on PostgreSQL with `keep` (the target's
    /// key acts).
    pub(super) fn fk_action_sql(
        &mut self,
        parent: &(String, String),
        rows: &str,
        path: &mut Vec<(String, String)>,
        out: &mut Vec<String>,
    ) -> Result<(), SyncError> {
        let Some(acts) = self.fk_actions.get(parent).cloned() else {
            return Ok(());
        };
        path.push(parent.clone());
        let parent_sql = self.ttable(parent)?.sql_name.clone();
        for a in acts {
            if path.contains(&a.child) {
                // A key onto its own table (or a cycle): MySQL cannot delete from a
                // table it selects from; such rows stay (warned when the table came).
                continue;
            }
            let Ok(child_sql) = self.ttable(&a.child).map(|t| t.sql_name.clone()) else {
                continue; // the child table is not mirrored
            };
            let idents = |names: &[String]| -> Vec<String> {
                names.iter().map(|n| self.emitter_ctx_ident(n)).collect()
            };
            let (cols, pcols) = (idents(&a.cols), idents(&a.parent_cols));
            let lhs = if cols.len() == 1 {
                cols[0].clone()
            } else {
                format!("({})", cols.join(", "))
            };
            let child_rows = format!(
                "{lhs} IN (SELECT {} FROM {parent_sql} WHERE {rows})",
                pcols.join(", ")
            );
            if a.set_null {
                let sets: Vec<String> = a
                    .cols
                    .iter()
                    .map(|c| format!("{} = NULL", self.emitter_ctx_ident(c)))
                    .collect();
                out.push(format!(
                    "UPDATE {child_sql} SET {} WHERE {child_rows}",
                    sets.join(", ")
                ));
            } else {
                self.fk_action_sql(&a.child, &child_rows, path, out)?;
                out.push(format!("DELETE FROM {child_sql} WHERE {child_rows}"));
            }
        }
        path.pop();
        Ok(())
    }

    /// PostgreSQL with `foreign-keys: keep`: foreign keys are added once both tables
    /// exist, DEFERRABLE INITIALLY DEFERRED (checked at each checkpoint's commit) and
    /// NOT VALID (rows already there are not re-checked: tables fill independently).
    pub(super) fn deferred_fks(&self) -> bool {
        self.cfg.foreign_keys == ForeignKeys::Keep && self.dialect == Dialect::Postgres
    }

    /// Queue a routed table's foreign keys (deferred mode), named as PostgreSQL would.
    pub(super) fn queue_fks(&mut self, t: &Table) {
        if !self.deferred_fks() {
            return;
        }
        for fk in &t.foreign_keys {
            let mut fk = fk.clone();
            if fk.name.is_none() {
                fk.name = Some(format!("{}_{}_fkey", t.name.name, fk.columns.join("_")));
            }
            if fk.ref_table.schema.is_none() {
                fk.ref_table.schema = t.name.schema.clone();
            }
            self.fk_queue.push((t.name.clone(), fk));
        }
    }

    /// Add the queued foreign keys whose two tables both exist now.
    pub(super) async fn add_ready_fks(&mut self) -> Result<(), SyncError> {
        let queue = std::mem::take(&mut self.fk_queue);
        for (table, fk) in queue {
            if self.catalog.table(&table).is_none() || self.catalog.table(&fk.ref_table).is_none() {
                self.fk_queue.push((table, fk));
                continue;
            }
            let (stmts, _) = self.translate(
                &[SchemaChange::AddForeignKey {
                    table: table.clone(),
                    foreign_key: fk.clone(),
                }],
                &[],
            )?;
            for s in stmts {
                let sql = format!("{s} DEFERRABLE INITIALLY DEFERRED NOT VALID");
                match self.target().await?.exec(&sql).await {
                    Ok(_) => tracing::info!("{table}: foreign key added: {sql}"),
                    Err(e) if e.message.contains("already exists") => {}
                    Err(e) => {
                        return Err(format!("{table}: foreign key: {e}\n  statement: {sql}").into())
                    }
                }
            }
        }
        Ok(())
    }
}
