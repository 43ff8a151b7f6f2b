//! The catalog: table schemas by name. It applies changes, rejects impossible ones, and
//! expands whole-column restatements (MySQL MODIFY/CHANGE) into small changes. The CLI
//! and the sync engine share this one definition of what a change does.

use crate::change::{ChangeRequest, ColumnPosition, SchemaChange};
use crate::schema::{Column, Table, TableName};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    #[error("table {0} does not exist")]
    UnknownTable(TableName),
    #[error("table {0} already exists")]
    TableExists(TableName),
    #[error("column {column} does not exist in table {table}")]
    UnknownColumn { table: TableName, column: String },
    #[error("column {column} already exists in table {table}")]
    DuplicateColumn { table: TableName, column: String },
    #[error("cannot drop {column}: it is the last column of table {table}")]
    LastColumn { table: TableName, column: String },
    #[error("schema {0} already exists")]
    NamespaceExists(String),
    #[error("schema {0} does not exist")]
    UnknownNamespace(String),
    #[error("index {name} does not exist on table {table}")]
    UnknownIndex { table: TableName, name: String },
    #[error("constraint {name} does not exist on table {table}")]
    UnknownConstraint { table: TableName, name: String },
    #[error("table {0} has no primary key")]
    NoPrimaryKey(TableName),
}

/// How the source compares names. MySQL compares column names without regard to case;
/// table names depend on the server's `lower_case_table_names`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct NameRules {
    pub columns_case_insensitive: bool,
    pub tables_case_insensitive: bool,
}

/// Tables are shared (`Arc`), so a copy of the catalog, taken before each statement so
/// that a failing statement changes nothing, costs a pointer per table; a change copies
/// only the table it touches.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    pub rules: NameRules,
    /// Shared as the tables are: a statement's scope copies a pointer, not every
    /// name (a dump of a schema per customer has thousands).
    pub namespaces: Arc<BTreeSet<String>>,
    pub tables: BTreeMap<TableName, Arc<Table>>,
    /// A scope's namespace changes while its set is shared with the catalog it was
    /// taken from (name, made or dropped), applied there by [`Catalog::absorb`]: a
    /// statement that makes one schema does not copy every schema's name (a dump of
    /// a schema per customer made the copies quadratic).
    #[serde(skip)]
    ns_changes: Vec<(String, bool)>,
}

fn same(a: &str, b: &str, ci: bool) -> bool {
    if !ci || a == b {
        return a == b;
    }
    if a.eq_ignore_ascii_case(b) {
        return true;
    }
    // Names that differ only in non-ASCII letters' case: compare folded (rare; an
    // ASCII-only pair is settled above).
    !(a.is_ascii() && b.is_ascii()) && a.to_lowercase() == b.to_lowercase()
}

impl Catalog {
    pub fn new(rules: NameRules) -> Self {
        Catalog {
            rules,
            ..Default::default()
        }
    }

    /// The stored name of a table, honouring the name rules.
    pub fn resolve_table(&self, name: &TableName) -> Option<&TableName> {
        if let Some((k, _)) = self.tables.get_key_value(name) {
            return Some(k);
        }
        let ci = self.rules.tables_case_insensitive;
        if !ci {
            // The map lookup above is the exact comparison.
            return None;
        }
        self.tables.keys().find(|k| {
            same(&k.name, &name.name, ci)
                && match (&k.schema, &name.schema) {
                    (Some(a), Some(b)) => same(a, b, ci),
                    (None, None) => true,
                    _ => false,
                }
        })
    }

    pub fn table(&self, name: &TableName) -> Option<&Table> {
        self.resolve_table(name)
            .and_then(|k| self.tables.get(k))
            .map(Arc::as_ref)
    }

    /// A table of the catalog to change in place (a source's view of what a DDL
    /// implied, e.g. the character set a table took from its database).
    pub fn table_mut(&mut self, name: &TableName) -> Result<&mut Table, CatalogError> {
        let key = self
            .resolve_table(name)
            .cloned()
            .ok_or_else(|| CatalogError::UnknownTable(name.clone()))?;
        Ok(Arc::make_mut(
            self.tables.get_mut(&key).expect("resolved key exists"),
        ))
    }

    fn col_index(&self, table: &Table, column: &str) -> Option<usize> {
        let ci = self.rules.columns_case_insensitive;
        table.columns.iter().position(|c| same(&c.name, column, ci))
    }

    /// The stored name of a column of a table.
    pub fn resolve_column(&self, table: &TableName, column: &str) -> Result<String, CatalogError> {
        let t = self
            .table(table)
            .ok_or_else(|| CatalogError::UnknownTable(table.clone()))?;
        self.col_index(t, column)
            .map(|i| t.columns[i].name.clone())
            .ok_or_else(|| CatalogError::UnknownColumn {
                table: t.name.clone(),
                column: column.to_owned(),
            })
    }

    /// The stored names of the tables `requests` can read or change: their own table, a
    /// rename's target, every table of a dropped namespace.
    pub fn touched(&self, requests: &[ChangeRequest]) -> Vec<TableName> {
        let mut names: Vec<TableName> = Vec::new();
        let mut add = |n: &TableName| {
            let n = self.resolve_table(n).unwrap_or(n).clone();
            if !names.contains(&n) {
                names.push(n);
            }
        };
        for r in requests {
            match r {
                ChangeRequest::ReplaceColumn { table, .. } => add(table),
                ChangeRequest::Change(SchemaChange::DropNamespace { name, .. }) => {
                    for k in self.tables.keys() {
                        if k.schema.as_deref() == Some(name.as_str()) {
                            add(k);
                        }
                    }
                }
                ChangeRequest::Change(c) => {
                    if let Some(t) = c.table() {
                        add(t);
                    }
                    if let SchemaChange::RenameTable { to, .. } = c {
                        add(to);
                    }
                    // Tables a foreign key refers to are read (their keys complete
                    // the reference; their types decide the key columns' types).
                    let refs: Vec<&TableName> = match c {
                        SchemaChange::AddForeignKey { foreign_key, .. } => {
                            vec![&foreign_key.ref_table]
                        }
                        SchemaChange::CreateTable { table, .. } => {
                            table.foreign_keys.iter().map(|f| &f.ref_table).collect()
                        }
                        _ => Vec::new(),
                    };
                    // A key column takes the type of the column it references, which
                    // may itself reference another: the chain is read (a few levels).
                    let mut work: Vec<(TableName, usize)> =
                        refs.into_iter().map(|t| (t.clone(), 0)).collect();
                    while let Some((t, depth)) = work.pop() {
                        let Some(k) = self.resolve_table(&t) else {
                            continue;
                        };
                        add(k);
                        if depth < 4 {
                            if let Some(tb) = self.table(k) {
                                work.extend(
                                    tb.foreign_keys
                                        .iter()
                                        .map(|f| (f.ref_table.clone(), depth + 1)),
                                );
                            }
                        }
                    }
                }
            }
        }
        names
    }

    /// A catalog holding only the named tables (and every namespace): enough to expand
    /// and apply changes to them, and cheap to copy whatever the catalog's size.
    /// Whether namespace (schema) `name` exists.
    pub fn has_namespace(&self, name: &str) -> bool {
        match self.ns_changes.iter().rev().find(|(n, _)| n == name) {
            Some((_, made)) => *made,
            None => self.namespaces.contains(name),
        }
    }

    fn set_namespace(&mut self, name: &str, made: bool) {
        match Arc::get_mut(&mut self.namespaces) {
            Some(set) if self.ns_changes.is_empty() => {
                if made {
                    set.insert(name.to_owned());
                } else {
                    set.remove(name);
                }
            }
            _ => self.ns_changes.push((name.to_owned(), made)),
        }
    }

    pub fn scope(&self, names: &[TableName]) -> Catalog {
        Catalog {
            ns_changes: self.ns_changes.clone(),
            rules: self.rules,
            namespaces: Arc::clone(&self.namespaces),
            tables: names
                .iter()
                .filter_map(|n| self.tables.get_key_value(n))
                .map(|(k, v)| (k.clone(), Arc::clone(v)))
                .collect(),
        }
    }

    /// Take back a scope made with `names`: those tables are replaced by what the scope
    /// holds now (renamed, created or dropped), and the namespaces by its namespaces.
    pub fn absorb(&mut self, names: &[TableName], scope: Catalog) {
        for n in names {
            self.tables.remove(n);
        }
        let Catalog {
            tables,
            namespaces,
            ns_changes,
            ..
        } = scope;
        self.tables.extend(tables);
        if !Arc::ptr_eq(&self.namespaces, &namespaces) {
            self.namespaces = namespaces;
        } else {
            drop(namespaces);
        }
        self.ns_changes = ns_changes;
        if !self.ns_changes.is_empty() {
            // (A copy only if another scope still shares the set.)
            let set = Arc::make_mut(&mut self.namespaces);
            for (n, made) in self.ns_changes.drain(..) {
                if made {
                    set.insert(n);
                } else {
                    set.remove(&n);
                }
            }
        }
    }

    /// Turn a request into small changes, checked against the current state (nothing
    /// is applied). A column restatement becomes only the facts that differ.
    /// What a change leaves implicit, made explicit from the catalog: a foreign key
    /// written `REFERENCES t` without columns refers to t's primary key; a primary or
    /// unique key named like an existing unique index on the same columns takes that
    /// index over (Oracle's `CREATE UNIQUE INDEX pk ...; ADD CONSTRAINT pk PRIMARY KEY`),
    /// so the index is dropped first rather than created twice under one name.
    fn complete(&self, mut c: SchemaChange) -> Vec<SchemaChange> {
        let pk_of = |t: &TableName| -> Vec<String> {
            self.table(t)
                .and_then(|t| t.primary_key.as_ref())
                .map(|pk| pk.columns.clone())
                .unwrap_or_default()
        };
        match &mut c {
            SchemaChange::AddForeignKey { foreign_key, .. }
                if foreign_key.ref_columns.is_empty() =>
            {
                foreign_key.ref_columns = pk_of(&foreign_key.ref_table);
            }
            SchemaChange::CreateTable { table, .. } => {
                let own = table.primary_key.as_ref().map(|pk| pk.columns.clone());
                for fk in &mut table.foreign_keys {
                    if fk.ref_columns.is_empty() {
                        fk.ref_columns = if fk.ref_table == table.name {
                            own.clone().unwrap_or_default()
                        } else {
                            pk_of(&fk.ref_table)
                        };
                    }
                }
            }
            _ => {}
        }
        let taken_over = match &c {
            SchemaChange::SetPrimaryKey {
                table,
                name: Some(name),
                columns: Some(cols),
                ..
            } => Some((table, name, cols.clone())),
            SchemaChange::AddIndex { table, index }
                if index.kind == crate::schema::IndexKind::Unique && index.name.is_some() =>
            {
                Some((
                    table,
                    index.name.as_ref().expect("named"),
                    index.parts.iter().map(|p| p.column.clone()).collect(),
                ))
            }
            _ => None,
        };
        if let Some((table, name, cols)) = taken_over {
            let existing = self.table(table).and_then(|t| {
                t.indexes.iter().find(|ix| {
                    ix.kind == crate::schema::IndexKind::Unique
                        && ix.name.as_deref() == Some(name.as_str())
                        && ix.parts.iter().map(|p| &p.column).eq(cols.iter())
                })
            });
            if existing.is_some() {
                let drop = SchemaChange::DropIndex {
                    table: table.clone(),
                    name: name.clone(),
                };
                return vec![drop, c];
            }
        }
        vec![c]
    }

    pub fn expand(&self, request: ChangeRequest) -> Result<Vec<SchemaChange>, CatalogError> {
        match request {
            ChangeRequest::Change(c) => Ok(self.complete(c)),
            ChangeRequest::ReplaceColumn {
                table,
                name,
                column: new,
                position,
            } => {
                let t = self
                    .table(&table)
                    .ok_or_else(|| CatalogError::UnknownTable(table.clone()))?;
                let idx = self
                    .col_index(t, &name)
                    .ok_or_else(|| CatalogError::UnknownColumn {
                        table: t.name.clone(),
                        column: name.clone(),
                    })?;
                let old = &t.columns[idx];
                // A primary-key column stays NOT NULL whatever the restatement says
                // (MySQL and Oracle both keep it so).
                let mut new = new;
                if t.primary_key
                    .as_ref()
                    .is_some_and(|pk| pk.columns.contains(&old.name))
                {
                    new.nullable = false;
                }
                let table = t.name.clone();
                let mut out = Vec::new();
                let mut col = old.name.clone();
                if old.name != new.name {
                    if let Some(other) = self.col_index(t, &new.name) {
                        if other != idx {
                            return Err(CatalogError::DuplicateColumn {
                                table,
                                column: new.name,
                            });
                        }
                    }
                    out.push(SchemaChange::RenameColumn {
                        table: table.clone(),
                        from: old.name.clone(),
                        to: new.name.clone(),
                    });
                    col = new.name.clone();
                }
                diff_column(&table, &col, old, &new, &mut out);
                if let Some(p) = position {
                    out.push(SchemaChange::MoveColumn {
                        table,
                        column: col,
                        position: p,
                    });
                }
                Ok(out)
            }
        }
    }

    /// Apply one change. On error the catalog is unchanged.
    /// The key a column name is compared by in this catalog (folded where column
    /// names are case-insensitive).
    pub fn column_key(&self, name: &str) -> String {
        if self.rules.columns_case_insensitive {
            name.to_lowercase()
        } else {
            name.to_owned()
        }
    }

    /// [`Catalog::apply`] for an `AddColumn` whose name the caller has checked is new
    /// (by [`Catalog::column_key`]): no scan of the table's columns for a duplicate,
    /// so adding many columns to one table one by one stays linear.
    pub fn add_new_column(&mut self, change: &SchemaChange) -> Result<(), CatalogError> {
        let SchemaChange::AddColumn {
            table,
            column,
            position,
        } = change
        else {
            return self.apply(change);
        };
        let ci = self.rules.columns_case_insensitive;
        let t = self.table_mut(table)?;
        let at = position_index(t, position.as_ref(), ci)?;
        t.columns.insert(at, column.clone());
        Ok(())
    }

    pub fn apply(&mut self, change: &SchemaChange) -> Result<(), CatalogError> {
        use SchemaChange::*;
        let ci = self.rules.columns_case_insensitive;
        match change {
            CreateNamespace {
                name,
                if_not_exists,
            } => {
                if self.has_namespace(name) {
                    if !if_not_exists {
                        return Err(CatalogError::NamespaceExists(name.clone()));
                    }
                } else {
                    self.set_namespace(name, true);
                }
            }
            DropNamespace {
                name, if_exists, ..
            } => {
                if !self.has_namespace(name) {
                    if !if_exists {
                        return Err(CatalogError::UnknownNamespace(name.clone()));
                    }
                } else {
                    self.set_namespace(name, false);
                }
                self.tables.retain(|k, _| k.schema.as_deref() != Some(name));
            }
            CreateTable {
                table,
                if_not_exists,
            } => {
                if self.resolve_table(&table.name).is_some() {
                    if *if_not_exists {
                        return Ok(());
                    }
                    return Err(CatalogError::TableExists(table.name.clone()));
                }
                let mut seen = std::collections::HashSet::with_capacity(table.columns.len());
                for c in &table.columns {
                    let key = if ci {
                        c.name.to_lowercase()
                    } else {
                        c.name.clone()
                    };
                    if !seen.insert(key) {
                        return Err(CatalogError::DuplicateColumn {
                            table: table.name.clone(),
                            column: c.name.clone(),
                        });
                    }
                }
                if let Some(s) = table.name.schema.clone().filter(|s| !self.has_namespace(s)) {
                    self.set_namespace(&s, true);
                }
                self.tables
                    .insert(table.name.clone(), Arc::new(table.clone()));
            }
            DropTable { name, if_exists } => match self.resolve_table(name).cloned() {
                Some(k) => {
                    self.tables.remove(&k);
                }
                None if *if_exists => {}
                None => return Err(CatalogError::UnknownTable(name.clone())),
            },
            RenameTable { from, to } => {
                if self.resolve_table(to).is_some() {
                    return Err(CatalogError::TableExists(to.clone()));
                }
                let k = self
                    .resolve_table(from)
                    .cloned()
                    .ok_or_else(|| CatalogError::UnknownTable(from.clone()))?;
                let mut t = self.tables.remove(&k).expect("resolved");
                Arc::make_mut(&mut t).name = to.clone();
                self.tables.insert(to.clone(), t);
            }
            TruncateTable { name } => {
                if self.resolve_table(name).is_none() {
                    return Err(CatalogError::UnknownTable(name.clone()));
                }
            }
            AddColumn {
                table,
                column,
                position,
            } => {
                let t = self.table_mut(table)?;
                if t.columns.iter().any(|c| same(&c.name, &column.name, ci)) {
                    return Err(CatalogError::DuplicateColumn {
                        table: t.name.clone(),
                        column: column.name.clone(),
                    });
                }
                let at = position_index(t, position.as_ref(), ci)?;
                t.columns.insert(at, column.clone());
            }
            DropColumn { table, column } => {
                let t = self.table_mut(table)?;
                let i = find_col(t, column, ci)?;
                if t.columns.len() == 1 {
                    return Err(CatalogError::LastColumn {
                        table: t.name.clone(),
                        column: column.clone(),
                    });
                }
                let name = t.columns.remove(i).name;
                if let Some(pk) = &mut t.primary_key {
                    pk.columns.retain(|c| !same(c, &name, ci));
                    pk.prefixes.retain(|c, _| !same(c, &name, ci));
                    if pk.columns.is_empty() {
                        t.primary_key = None;
                    }
                }
                for ix in &mut t.indexes {
                    ix.parts
                        .retain(|p| p.expression || !same(&p.column, &name, ci));
                }
                t.indexes.retain(|ix| !ix.parts.is_empty());
                t.foreign_keys
                    .retain(|fk| !fk.columns.iter().any(|c| same(c, &name, ci)));
            }
            RenameColumn { table, from, to } => {
                let t = self.table_mut(table)?;
                let i = find_col(t, from, ci)?;
                if let Some(j) = t.columns.iter().position(|c| same(&c.name, to, ci)) {
                    if j != i {
                        return Err(CatalogError::DuplicateColumn {
                            table: t.name.clone(),
                            column: to.clone(),
                        });
                    }
                }
                let old = std::mem::replace(&mut t.columns[i].name, to.clone());
                let rename = |c: &mut String| {
                    if same(c, &old, ci) {
                        *c = to.clone();
                    }
                };
                if let Some(pk) = &mut t.primary_key {
                    pk.columns.iter_mut().for_each(rename);
                    let prefixes = std::mem::take(&mut pk.prefixes);
                    pk.prefixes = prefixes
                        .into_iter()
                        .map(|(mut c, n)| {
                            rename(&mut c);
                            (c, n)
                        })
                        .collect();
                }
                for ix in &mut t.indexes {
                    for p in &mut ix.parts {
                        if !p.expression {
                            rename(&mut p.column);
                        }
                    }
                }
                for fk in &mut t.foreign_keys {
                    fk.columns.iter_mut().for_each(rename);
                }
            }
            AlterColumnType {
                table,
                column,
                data_type,
                ..
            } => {
                let t = self.table_mut(table)?;
                let i = find_col(t, column, ci)?;
                t.columns[i].data_type = data_type.clone();
            }
            SetNullable {
                table,
                column,
                nullable,
            } => {
                let t = self.table_mut(table)?;
                let i = find_col(t, column, ci)?;
                t.columns[i].nullable = *nullable;
            }
            SetDefault {
                table,
                column,
                default,
            } => {
                let t = self.table_mut(table)?;
                let i = find_col(t, column, ci)?;
                let ty = &t.columns[i].data_type;
                t.columns[i].default = default.clone().map(|d| d.fitted(ty));
            }
            SetIdentity {
                table,
                column,
                identity,
            } => {
                let t = self.table_mut(table)?;
                let i = find_col(t, column, ci)?;
                t.columns[i].identity = identity.clone();
            }
            SetOnUpdate {
                table,
                column,
                on_update_current_timestamp,
            } => {
                let t = self.table_mut(table)?;
                let i = find_col(t, column, ci)?;
                t.columns[i].on_update_current_timestamp = *on_update_current_timestamp;
            }
            SetColumnComment {
                table,
                column,
                comment,
            } => {
                let t = self.table_mut(table)?;
                let i = find_col(t, column, ci)?;
                t.columns[i].comment = comment.clone();
            }
            MoveColumn {
                table,
                column,
                position,
            } => {
                let t = self.table_mut(table)?;
                let i = find_col(t, column, ci)?;
                let c = t.columns.remove(i);
                match position_index(t, Some(position), ci) {
                    Ok(at) => t.columns.insert(at, c),
                    Err(e) => {
                        t.columns.insert(i, c);
                        return Err(e);
                    }
                }
            }
            SetTableComment { table, comment } => {
                self.table_mut(table)?.comment = comment.clone();
            }
            SetPrimaryKey {
                table,
                name,
                columns,
                prefixes,
            } => {
                let t = self.table_mut(table)?;
                match columns {
                    Some(cols) => {
                        let mut canon = Vec::new();
                        for c in cols {
                            let i = find_col(t, c, ci)?;
                            canon.push(t.columns[i].name.clone());
                        }
                        for c in &canon {
                            let i = find_col(t, c, ci)?;
                            t.columns[i].nullable = false;
                        }
                        let mut canon_prefixes = BTreeMap::new();
                        for (c, n) in prefixes {
                            let i = find_col(t, c, ci)?;
                            canon_prefixes.insert(t.columns[i].name.clone(), *n);
                        }
                        t.primary_key = Some(crate::schema::PrimaryKey {
                            name: name.clone(),
                            columns: canon,
                            prefixes: canon_prefixes,
                        });
                    }
                    None => {
                        if t.primary_key.take().is_none() {
                            return Err(CatalogError::NoPrimaryKey(t.name.clone()));
                        }
                    }
                }
            }
            AddIndex { table, index } => {
                let t = self.table_mut(table)?;
                for p in &index.parts {
                    if !p.expression {
                        find_col(t, &p.column, ci)?;
                    }
                }
                t.indexes.push(index.clone());
            }
            DropIndex { table, name } => {
                let t = self.table_mut(table)?;
                let before = t.indexes.len();
                t.indexes
                    .retain(|ix| !ix.name.as_deref().is_some_and(|n| same(n, name, true)));
                if t.indexes.len() == before {
                    return Err(CatalogError::UnknownIndex {
                        table: t.name.clone(),
                        name: name.clone(),
                    });
                }
            }
            AddForeignKey { table, foreign_key } => {
                let t = self.table_mut(table)?;
                for c in &foreign_key.columns {
                    find_col(t, c, ci)?;
                }
                t.foreign_keys.push(foreign_key.clone());
            }
            AddCheck { table, check } => {
                self.table_mut(table)?.checks.push(check.clone());
            }
            DropConstraint { table, name } => {
                let t = self.table_mut(table)?;
                let is = |n: &Option<String>| n.as_deref().is_some_and(|n| same(n, name, true));
                let before = t.foreign_keys.len() + t.checks.len() + t.indexes.len();
                t.foreign_keys.retain(|f| !is(&f.name));
                t.checks.retain(|c| !is(&c.name));
                t.indexes.retain(|i| !is(&i.name));
                let pk = t.primary_key.as_ref().is_some_and(|p| is(&p.name));
                if pk {
                    t.primary_key = None;
                } else if before == t.foreign_keys.len() + t.checks.len() + t.indexes.len() {
                    return Err(CatalogError::UnknownConstraint {
                        table: t.name.clone(),
                        name: name.clone(),
                    });
                }
            }
            SetTableOption { table, key, value } => {
                self.table_mut(table)?
                    .options
                    .insert(key.clone(), value.clone());
            }
        }
        Ok(())
    }
}

fn find_col(t: &Table, column: &str, ci: bool) -> Result<usize, CatalogError> {
    t.columns
        .iter()
        .position(|c| same(&c.name, column, ci))
        .ok_or_else(|| CatalogError::UnknownColumn {
            table: t.name.clone(),
            column: column.to_owned(),
        })
}

fn position_index(
    t: &Table,
    position: Option<&ColumnPosition>,
    ci: bool,
) -> Result<usize, CatalogError> {
    Ok(match position {
        None => t.columns.len(),
        Some(ColumnPosition::First) => 0,
        Some(ColumnPosition::After(c)) => find_col(t, c, ci)? + 1,
    })
}

/// The small changes that take column `old` to `new` (names already equal).
fn diff_column(
    table: &TableName,
    col: &str,
    old: &Column,
    new: &Column,
    out: &mut Vec<SchemaChange>,
) {
    let (table, column) = (table.clone(), col.to_owned());
    if old.data_type != new.data_type {
        out.push(SchemaChange::AlterColumnType {
            table: table.clone(),
            column: column.clone(),
            data_type: new.data_type.clone(),
            using: None,
        });
    }
    if old.nullable != new.nullable {
        out.push(SchemaChange::SetNullable {
            table: table.clone(),
            column: column.clone(),
            nullable: new.nullable,
        });
    }
    if old.default != new.default {
        out.push(SchemaChange::SetDefault {
            table: table.clone(),
            column: column.clone(),
            default: new.default.clone(),
        });
    }
    if old.identity != new.identity {
        out.push(SchemaChange::SetIdentity {
            table: table.clone(),
            column: column.clone(),
            identity: new.identity.clone(),
        });
    }
    if old.on_update_current_timestamp != new.on_update_current_timestamp {
        out.push(SchemaChange::SetOnUpdate {
            table: table.clone(),
            column: column.clone(),
            on_update_current_timestamp: new.on_update_current_timestamp,
        });
    }
    if old.comment != new.comment {
        out.push(SchemaChange::SetColumnComment {
            table,
            column,
            comment: new.comment.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Column, DataType};

    fn create(name: &str) -> ChangeRequest {
        let mut t = Table::new(TableName::new(None, name));
        t.columns.push(Column::new("a", DataType::int(4)));
        ChangeRequest::Change(SchemaChange::CreateTable {
            table: t,
            if_not_exists: false,
        })
    }

    #[test]
    fn a_scope_adds_schemas_without_copying_the_shared_set() {
        let mut whole = Catalog::default();
        for n in 0..100 {
            whole
                .apply(&SchemaChange::CreateNamespace {
                    name: format!("s{n}"),
                    if_not_exists: false,
                })
                .unwrap();
        }
        let shared = Arc::clone(&whole.namespaces);
        let names = [TableName::new(Some("new"), "t")];
        let before = whole.scope(&names);
        let mut after = before.clone();
        after
            .apply(&SchemaChange::CreateTable {
                table: Table::new(names[0].clone()),
                if_not_exists: false,
            })
            .unwrap();
        after
            .apply(&SchemaChange::DropNamespace {
                name: "s7".into(),
                if_exists: false,
                cascade: false,
            })
            .unwrap();
        assert!(after.has_namespace("new") && !after.has_namespace("s7"));
        assert!(!before.has_namespace("new") && before.has_namespace("s7"));
        // The scope's set is the catalog's own: nothing was copied.
        assert!(Arc::ptr_eq(&after.namespaces, &shared));
        drop((before, shared));
        let set = Arc::as_ptr(&whole.namespaces);
        whole.absorb(&names, after);
        assert!(whole.has_namespace("new") && !whole.has_namespace("s7"));
        assert!(whole.ns_changes.is_empty());
        assert_eq!(Arc::as_ptr(&whole.namespaces), set, "changed in place");
        assert_eq!(whole.namespaces.len(), 100);
    }

    #[test]
    fn scope_and_absorb_equal_applying_to_the_whole_catalog() {
        let mut whole = Catalog::default();
        for n in ["a", "b", "c"] {
            for c in whole.expand(create(n)).unwrap() {
                whole.apply(&c).unwrap();
            }
        }
        let reqs = vec![ChangeRequest::Change(SchemaChange::RenameTable {
            from: TableName::new(None, "a"),
            to: TableName::new(None, "z"),
        })];
        let names = whole.touched(&reqs);
        let mut scope = whole.scope(&names);
        assert_eq!(scope.tables.len(), 1);
        let mut direct = whole.clone();
        for r in reqs {
            for c in direct.expand(r.clone()).unwrap() {
                direct.apply(&c).unwrap();
                scope.apply(&c).unwrap();
            }
        }
        whole.absorb(&names, scope);
        assert_eq!(whole, direct);
        // A rename onto an existing table is still refused inside a scope.
        let reqs = vec![ChangeRequest::Change(SchemaChange::RenameTable {
            from: TableName::new(None, "b"),
            to: TableName::new(None, "c"),
        })];
        let mut scope = whole.scope(&whole.touched(&reqs));
        let ChangeRequest::Change(c) = &reqs[0] else {
            unreachable!()
        };
        assert_eq!(
            scope.apply(c),
            Err(CatalogError::TableExists(TableName::new(None, "c")))
        );
    }
}
