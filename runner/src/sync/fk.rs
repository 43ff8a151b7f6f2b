//! Foreign-key actions a sink may have to run itself. MySQL and MariaDB do not write
//! the rows an ON DELETE CASCADE or SET NULL changes to the binlog: a sink sees the
//! parent's change only, so it either runs the action or warns that those rows differ.
//! Sink policy, not source knowledge: both sinks ask here.

use ddl_core::RefAction;

/// One referential action of a table's foreign key
/// (`child(cols) -> parent ON DELETE CASCADE`).
#[derive(Debug)]
pub struct KeyAction<'a> {
    pub table: &'a ddl_core::Table,
    pub fk: &'a ddl_core::ForeignKey,
    /// ON DELETE (else ON UPDATE).
    pub on_delete: bool,
    pub action: RefAction,
}

impl KeyAction<'_> {
    /// ON DELETE CASCADE or SET NULL with matching column lists: what a sink can run
    /// itself.
    pub fn followable(&self) -> bool {
        self.on_delete
            && matches!(self.action, RefAction::Cascade | RefAction::SetNull)
            && !self.fk.columns.is_empty()
            && self.fk.columns.len() == self.fk.ref_columns.len()
    }

    /// The key points at its own table.
    pub fn onto_itself(&self) -> bool {
        let (r, t) = (&self.fk.ref_table, &self.table.name);
        r.name.eq_ignore_ascii_case(&t.name)
            && r.schema
                .as_ref()
                .is_none_or(|s| Some(s) == t.schema.as_ref())
    }
}

impl std::fmt::Display for KeyAction<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}({}) -> {} ON {} {}",
            self.table.name,
            self.fk.columns.join(", "),
            self.fk.ref_table,
            if self.on_delete { "DELETE" } else { "UPDATE" },
            self.action
        )
    }
}

/// The actions of a table's foreign keys that change rows (CASCADE, SET NULL, SET
/// DEFAULT).
pub fn referential_actions(t: &ddl_core::Table) -> Vec<KeyAction<'_>> {
    let mut out = Vec::new();
    for fk in &t.foreign_keys {
        for (on_delete, action) in [(true, fk.on_delete), (false, fk.on_update)] {
            match action {
                Some(action) if action.changes_rows() => out.push(KeyAction {
                    table: t,
                    fk,
                    on_delete,
                    action,
                }),
                _ => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ddl_core::{ForeignKey, Table, TableName};

    #[test]
    fn which_actions_a_sink_can_follow() {
        let mut t = Table::new(TableName::new(Some("s"), "child"));
        let fk = |cols: &[&str], on_delete, on_update| ForeignKey {
            name: None,
            columns: cols.iter().map(|c| c.to_string()).collect(),
            ref_table: TableName::new(None, "parent"),
            ref_columns: vec!["id".into()],
            on_delete,
            on_update,
            deferrable: None,
        };
        t.foreign_keys = vec![
            fk(&["p"], Some(RefAction::Cascade), Some(RefAction::Cascade)),
            fk(&["q"], Some(RefAction::Restrict), None),
            fk(&["r"], Some(RefAction::SetDefault), None),
            fk(&["a", "b"], Some(RefAction::SetNull), None),
        ];
        let acts = referential_actions(&t);
        let seen: Vec<(bool, RefAction, bool)> = acts
            .iter()
            .map(|a| (a.on_delete, a.action, a.followable()))
            .collect();
        assert_eq!(
            seen,
            [
                (true, RefAction::Cascade, true),
                (false, RefAction::Cascade, false),
                (true, RefAction::SetDefault, false),
                // column lists of different lengths cannot be followed
                (true, RefAction::SetNull, false),
            ]
        );
        assert_eq!(
            acts[0].to_string(),
            "s.child(p) -> parent ON DELETE CASCADE"
        );
    }
}
