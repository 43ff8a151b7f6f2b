//! Foreign-key names where the target names them per schema and the source per table.
//!
//! PostgreSQL keeps a constraint's name unique within its table: two tables may each
//! have a `user_id_fkey`, and pg_dump's output often does. MySQL (InnoDB) and Oracle
//! keep foreign-key names unique within a database (schema), and refuse the second
//! (MariaDB: errno 121 "Duplicate key on write or update"). A name already held in the
//! target schema by another table's key is given a new one (the table's name in
//! front), reported; later statements that name the key (DROP CONSTRAINT) use the new
//! name.

use ddl_core::change::SchemaChange;
use ddl_core::diag::Diagnostics;
use ddl_core::TableName;
use std::collections::HashMap;
use std::sync::Arc;

/// A table as keys here hold it: lower-case schema ("" for none) and name.
type TableKey = (String, String);

fn key_of(t: &TableName) -> TableKey {
    (
        t.schema.as_deref().unwrap_or("").to_lowercase(),
        t.name.to_lowercase(),
    )
}

/// Renamed keys: table -> (lower-case source name -> target name). Shared with the
/// emitter of each statement.
pub type Renames = Arc<HashMap<TableKey, HashMap<String, String>>>;

/// The foreign-key names taken in each target schema, and the keys renamed.
#[derive(Debug, Default)]
pub struct ForeignKeyNames {
    /// (target schema, lower-case target name) -> the table holding it.
    taken: HashMap<(String, String), TableKey>,
    /// table -> (target schema, lower-case target name) of each key it holds.
    held: HashMap<TableKey, Vec<(String, String)>>,
    renames: Renames,
}

impl ForeignKeyNames {
    pub fn renames(&self) -> Renames {
        Arc::clone(&self.renames)
    }

    /// Before `changes` are emitted: each foreign key they make takes its name in the
    /// target schema `schema_of(table)`, or a new one when another table holds it.
    pub fn claim(
        &mut self,
        changes: &[SchemaChange],
        schema_of: impl Fn(&TableName) -> String,
        max_len: usize,
        diags: &mut Diagnostics,
    ) {
        for c in changes {
            let keys: Vec<(&TableName, &str)> = match c {
                SchemaChange::CreateTable { table, .. } => table
                    .foreign_keys
                    .iter()
                    .filter_map(|fk| Some((&table.name, fk.name.as_deref()?)))
                    .collect(),
                SchemaChange::AddForeignKey { table, foreign_key } => foreign_key
                    .name
                    .as_deref()
                    .map(|n| (table, n))
                    .into_iter()
                    .collect(),
                _ => Vec::new(),
            };
            for (table, name) in keys {
                self.claim_one(schema_of(table), table, name, max_len, diags);
            }
        }
    }

    fn claim_one(
        &mut self,
        schema: String,
        table: &TableName,
        name: &str,
        max_len: usize,
        diags: &mut Diagnostics,
    ) {
        let owner = key_of(table);
        let slot = (schema.clone(), name.to_lowercase());
        let holder = match self.taken.get(&slot) {
            None => {
                self.take(slot, owner);
                return;
            }
            Some(h) if *h == owner => return,
            Some(h) => h.clone(),
        };
        let base = format!("{}_{name}", table.name);
        let mut n = 1;
        let new = loop {
            let suffix = if n == 1 {
                String::new()
            } else {
                format!("_{n}")
            };
            let keep = max_len.saturating_sub(suffix.len());
            let cut: String = base.chars().take(keep).collect();
            let candidate = format!("{cut}{suffix}");
            if !self
                .taken
                .contains_key(&(schema.clone(), candidate.to_lowercase()))
            {
                break candidate;
            }
            n += 1;
        };
        let holder = match holder.0.as_str() {
            "" => holder.1,
            s => format!("{s}.{}", holder.1),
        };
        diags.warn(format!(
            "{table}: foreign key {name} is renamed {new}: the target names foreign keys per database, and {holder} holds {name} there"
        ));
        self.take((schema, new.to_lowercase()), owner.clone());
        Arc::make_mut(&mut self.renames)
            .entry(owner)
            .or_default()
            .insert(name.to_lowercase(), new);
    }

    fn take(&mut self, slot: (String, String), owner: TableKey) {
        self.held
            .entry(owner.clone())
            .or_default()
            .push(slot.clone());
        self.taken.insert(slot, owner);
    }

    /// After `changes` were emitted: names of dropped keys and tables are free again,
    /// a renamed table keeps its keys.
    pub fn settle(&mut self, changes: &[SchemaChange]) {
        for c in changes {
            match c {
                SchemaChange::DropTable { name, .. } => self.release_table(&key_of(name)),
                SchemaChange::DropNamespace { name, .. } => {
                    let s = name.to_lowercase();
                    let gone: Vec<TableKey> =
                        self.held.keys().filter(|k| k.0 == s).cloned().collect();
                    for t in gone {
                        self.release_table(&t);
                    }
                }
                SchemaChange::RenameTable { from, to } => {
                    let (from, to) = (key_of(from), key_of(to));
                    if let Some(slots) = self.held.remove(&from) {
                        for s in &slots {
                            self.taken.insert(s.clone(), to.clone());
                        }
                        self.held.insert(to.clone(), slots);
                    }
                    if self.renames.contains_key(&from) {
                        let m = Arc::make_mut(&mut self.renames);
                        if let Some(r) = m.remove(&from) {
                            m.insert(to, r);
                        }
                    }
                }
                SchemaChange::DropConstraint { table, name } => {
                    let owner = key_of(table);
                    let target = self
                        .renames
                        .get(&owner)
                        .and_then(|r| r.get(&name.to_lowercase()))
                        .cloned()
                        .unwrap_or_else(|| name.clone())
                        .to_lowercase();
                    if let Some(slots) = self.held.get_mut(&owner) {
                        if let Some(i) = slots.iter().position(|s| s.1 == target) {
                            let s = slots.swap_remove(i);
                            self.taken.remove(&s);
                        }
                    }
                    if self.renames.contains_key(&owner) {
                        if let Some(r) = Arc::make_mut(&mut self.renames).get_mut(&owner) {
                            r.remove(&name.to_lowercase());
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn release_table(&mut self, t: &TableKey) {
        if let Some(slots) = self.held.remove(t) {
            for s in slots {
                if self.taken.get(&s) == Some(t) {
                    self.taken.remove(&s);
                }
            }
        }
        if self.renames.contains_key(t) {
            Arc::make_mut(&mut self.renames).remove(t);
        }
    }
}

/// The name foreign key `name` of `table` has in the target.
pub fn target_name<'a>(renames: &'a Renames, table: &TableName, name: &'a str) -> &'a str {
    if renames.is_empty() {
        return name;
    }
    renames
        .get(&key_of(table))
        .and_then(|r| r.get(&name.to_lowercase()))
        .map_or(name, String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ddl_core::schema::ForeignKey;

    fn add(table: &str, name: &str) -> SchemaChange {
        SchemaChange::AddForeignKey {
            table: TableName::new(Some("public"), table),
            foreign_key: ForeignKey {
                name: Some(name.into()),
                columns: vec!["user_id".into()],
                ref_table: TableName::new(Some("public"), "users"),
                ref_columns: vec!["id".into()],
                on_delete: None,
                on_update: None,
                deferrable: None,
            },
        }
    }

    #[test]
    fn a_name_held_by_another_table_is_renamed_and_freed_with_it() {
        let mut names = ForeignKeyNames::default();
        let mut d = Diagnostics::default();
        let db = |_: &TableName| String::new();
        names.claim(&[add("a", "user_id_fkey")], db, 64, &mut d);
        names.claim(&[add("b", "USER_ID_FKEY")], db, 64, &mut d);
        let r = names.renames();
        let b = TableName::new(Some("public"), "b");
        assert_eq!(target_name(&r, &b, "user_id_fkey"), "b_USER_ID_FKEY");
        assert_eq!(d.0.len(), 1, "{:?}", d.0);
        // The same name again on the same table is the same key (a restatement).
        names.claim(&[add("a", "user_id_fkey")], db, 64, &mut d);
        assert_eq!(d.0.len(), 1);
        // A name longer than the limit is cut, and made unique with a number.
        names.claim(&[add("c", "b_user_id_fkey")], db, 14, &mut d);
        let c = TableName::new(Some("public"), "c");
        assert_eq!(
            target_name(&names.renames(), &c, "b_user_id_fkey"),
            "c_b_user_id_fk"
        );
        names.claim(
            &[add("c_b_user_id_fkey_x", "b_user_id_fkey")],
            db,
            14,
            &mut d,
        );
        let cx = TableName::new(Some("public"), "c_b_user_id_fkey_x");
        assert_eq!(
            target_name(&names.renames(), &cx, "b_user_id_fkey"),
            "c_b_user_id__2"
        );
        // Dropping table a frees its name: a new table takes it as it is.
        names.settle(&[SchemaChange::DropTable {
            name: TableName::new(Some("public"), "a"),
            if_exists: false,
        }]);
        names.claim(&[add("d", "user_id_fkey")], db, 64, &mut d);
        let dd = TableName::new(Some("public"), "d");
        assert_eq!(
            target_name(&names.renames(), &dd, "user_id_fkey"),
            "user_id_fkey"
        );
        // Another database holds its own names.
        names.claim(&[add("e", "user_id_fkey")], |_| "other".into(), 64, &mut d);
        let e = TableName::new(Some("public"), "e");
        assert_eq!(
            target_name(&names.renames(), &e, "user_id_fkey"),
            "user_id_fkey"
        );
    }
}
