//! Name mapping (`route` in the job file, after Flink CDC's route): source tables to
//! target tables and columns, applied to rows and to DDL alike, for every sink.
//!
//! ```yaml
//! route:
//!   - source-table: shop\.orders_(\d+)   # regex over `database.table`, whole name
//!     sink-table: archive.orders          # replacement; $1.. are the regex's groups
//!     columns: { cust: customer_id }     # column renames (source name: target name)
//!   - source-table: shop\.(.*)
//!     sink-table: mirror.${1}             # a database rename (`${1}_x`, not `$1_x`)
//! ```
//!
//! The first rule that matches wins; a table no rule matches keeps its name. Several
//! source tables may map to one target table when their schemas agree: the first
//! creates it, the others' CREATE is recognised as already done (their columns must
//! match), and each row lands in the one table.

use crate::sync::error::SyncError;
use ddl_core::{ColumnPosition, SchemaChange, Table, TableName};
use regex::Regex;
use serde::Deserialize;
use std::collections::BTreeMap;

/// One `route` rule: the first whose `source-table` matches a table says where it goes.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RouteRule {
    /// A regex over `database.table`, matched whole.
    pub source_table: String,
    /// The target `database.table` (`${1}` names the regex's groups); none: the
    /// table's own name.
    #[serde(default)]
    pub sink_table: Option<String>,
    /// Columns renamed on the way: source name -> target name.
    #[serde(default)]
    pub columns: BTreeMap<String, String>,
    /// A note for people; not read.
    #[serde(default)]
    pub description: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Router {
    rules: Vec<(Regex, RouteRule)>,
}

/// Where one source table goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routed {
    pub db: String,
    pub table: String,
    pub columns: BTreeMap<String, String>,
}

impl Routed {
    pub fn column<'a>(&'a self, c: &'a str) -> &'a str {
        self.columns
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(c))
            .map(|(_, v)| v.as_str())
            .unwrap_or(c)
    }
}

impl Router {
    pub fn parse(v: Option<&serde_yaml_ng::Value>) -> Result<Router, SyncError> {
        let Some(v) = v else {
            return Ok(Router::default());
        };
        let rules: Vec<RouteRule> =
            serde_yaml_ng::from_value(v.clone()).map_err(|e| format!("job file: route: {e}"))?;
        let mut out = Vec::new();
        let ambiguous = Regex::new(r"\$[0-9]+[A-Za-z_]").expect("valid");
        for (i, r) in rules.into_iter().enumerate() {
            let re = Regex::new(&format!("^(?:{})$", r.source_table))
                .map_err(|e| format!("job file: route[{i}].source-table: bad regex: {e}"))?;
            if let Some(t) = &r.sink_table {
                // `$1_x` names a group `1_x` (the regex crate's rule): say `${1}_x`.
                if let Some(m) = ambiguous.find(t) {
                    return Err(format!(
                        "job file: route[{i}].sink-table: `{}` reads as a group named `{}`; write `${{{}}}{}`",
                        m.as_str(),
                        &m.as_str()[1..],
                        &m.as_str()[1..m.as_str().len() - 1],
                        &m.as_str()[m.as_str().len() - 1..]
                    ).into());
                }
                if t.split('.').count() != 2 || t.split('.').any(str::is_empty) {
                    return Err(format!(
                        "job file: route[{i}].sink-table: `{t}` must be `database.table`"
                    )
                    .into());
                }
            }
            out.push((re, r));
        }
        Ok(Router { rules: out })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The target of `db.table`.
    pub fn route(&self, db: &str, table: &str) -> Routed {
        let name = if self.rules.is_empty() {
            String::new()
        } else {
            format!("{db}.{table}")
        };
        for (re, r) in &self.rules {
            let Some(caps) = re.captures(&name) else {
                continue;
            };
            let (db2, t2) = match &r.sink_table {
                Some(pat) => {
                    let mut out = String::new();
                    caps.expand(pat, &mut out);
                    let (d, t) = out.split_once('.').unwrap_or((db, &out));
                    (d.to_owned(), t.to_owned())
                }
                None => (db.to_owned(), table.to_owned()),
            };
            return Routed {
                db: db2,
                table: t2,
                columns: r.columns.clone(),
            };
        }
        Routed {
            db: db.to_owned(),
            table: table.to_owned(),
            columns: BTreeMap::new(),
        }
    }

    fn name(&self, t: &TableName) -> (TableName, Routed) {
        let r = self.route(t.schema.as_deref().unwrap_or_default(), &t.name);
        (TableName::new(Some(&r.db), &r.table), r)
    }

    /// A table definition under its target names.
    pub fn table(&self, t: &Table) -> Table {
        let (name, r) = self.name(&t.name);
        let mut out = t.clone();
        out.name = name;
        rename_columns(&mut out, &r);
        // Referenced tables (unqualified ones live in the table's own database).
        for fk in &mut out.foreign_keys {
            let mut reft = fk.ref_table.clone();
            if reft.schema.is_none() {
                reft.schema = t.name.schema.clone();
            }
            let (rn, rr) = self.name(&reft);
            fk.ref_table = rn;
            fk.ref_columns = fk
                .ref_columns
                .iter()
                .map(|c| rr.column(c).to_owned())
                .collect();
        }
        out
    }

    /// A schema change under target names.
    pub fn change(&self, c: &SchemaChange) -> SchemaChange {
        use SchemaChange as C;
        if self.rules.is_empty() {
            return c.clone();
        }
        let mut c = c.clone();
        let col = |r: &Routed, s: &mut String| *s = r.column(s).to_owned();
        match &mut c {
            C::CreateNamespace { .. } | C::DropNamespace { .. } => {}
            C::CreateTable { table, .. } => *table = self.table(table),
            C::DropTable { name, .. } | C::TruncateTable { name } => *name = self.name(name).0,
            C::RenameTable { from, to } => {
                *from = self.name(from).0;
                *to = self.name(to).0;
            }
            C::AddColumn {
                table,
                column,
                position,
            } => {
                let (n, r) = self.name(table);
                *table = n;
                col(&r, &mut column.name);
                if let Some(ColumnPosition::After(a)) = position {
                    col(&r, a);
                }
            }
            C::RenameColumn { table, from, to } => {
                let (n, r) = self.name(table);
                *table = n;
                col(&r, from);
                col(&r, to);
            }
            C::MoveColumn {
                table,
                column,
                position,
            } => {
                let (n, r) = self.name(table);
                *table = n;
                col(&r, column);
                if let ColumnPosition::After(a) = position {
                    col(&r, a);
                }
            }
            C::DropColumn { table, column }
            | C::AlterColumnType { table, column, .. }
            | C::SetNullable { table, column, .. }
            | C::SetDefault { table, column, .. }
            | C::SetIdentity { table, column, .. }
            | C::SetOnUpdate { table, column, .. }
            | C::SetColumnComment { table, column, .. } => {
                let (n, r) = self.name(table);
                *table = n;
                col(&r, column);
            }
            C::SetPrimaryKey {
                table,
                columns,
                prefixes,
                ..
            } => {
                let (n, r) = self.name(table);
                *table = n;
                for c in columns.iter_mut().flatten() {
                    col(&r, c);
                }
                *prefixes = prefixes
                    .iter()
                    .map(|(k, v)| (r.column(k).to_owned(), *v))
                    .collect();
            }
            C::AddIndex { table, index } => {
                let (n, r) = self.name(table);
                *table = n;
                for p in &mut index.parts {
                    if !p.expression {
                        col(&r, &mut p.column);
                    }
                }
            }
            C::AddForeignKey { table, foreign_key } => {
                let (n, r) = self.name(table);
                *table = n;
                foreign_key.columns.iter_mut().for_each(|c| col(&r, c));
                let (rn, rr) = self.name(&foreign_key.ref_table);
                foreign_key.ref_table = rn;
                foreign_key.ref_columns.iter_mut().for_each(|c| col(&rr, c));
            }
            C::AddCheck { table, .. }
            | C::DropIndex { table, .. }
            | C::DropConstraint { table, .. }
            | C::SetTableComment { table, .. }
            | C::SetTableOption { table, .. } => *table = self.name(table).0,
        }
        c
    }
}

fn rename_columns(t: &mut Table, r: &Routed) {
    if r.columns.is_empty() {
        return;
    }
    let map = |s: &mut String| *s = r.column(s).to_owned();
    for c in &mut t.columns {
        map(&mut c.name);
    }
    if let Some(pk) = &mut t.primary_key {
        pk.columns.iter_mut().for_each(map);
        pk.prefixes = pk
            .prefixes
            .iter()
            .map(|(k, v)| (r.column(k).to_owned(), *v))
            .collect();
    }
    for ix in &mut t.indexes {
        for p in &mut ix.parts {
            if !p.expression {
                map(&mut p.column);
            }
        }
    }
    for fk in &mut t.foreign_keys {
        fk.columns.iter_mut().for_each(map);
    }
}

/// Rename a batch's columns (a new schema over the same arrays).
pub fn rename_batch(
    b: &arrow_array::RecordBatch,
    r: &Routed,
) -> Result<arrow_array::RecordBatch, SyncError> {
    if r.columns.is_empty() {
        return Ok(b.clone());
    }
    let fields: Vec<arrow_schema::Field> = b
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_name(r.column(f.name())))
        .collect();
    let schema = std::sync::Arc::new(arrow_schema::Schema::new_with_metadata(
        fields,
        b.schema().metadata().clone(),
    ));
    Ok(
        arrow_array::RecordBatch::try_new(schema, b.columns().to_vec())
            .map_err(|e| e.to_string())?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn router(y: &str) -> Router {
        Router::parse(Some(&serde_yaml_ng::from_str(y).unwrap())).unwrap()
    }

    #[test]
    fn regex_with_groups_and_first_match_wins() {
        let r = router(
            "- source-table: shop\\.orders_(\\d+)\n  sink-table: archive.orders\n  columns: {cust: customer_id}\n- source-table: shop\\.(.*)\n  sink-table: mirror.$1\n",
        );
        let a = r.route("shop", "orders_7");
        assert_eq!((a.db.as_str(), a.table.as_str()), ("archive", "orders"));
        assert_eq!(a.column("cust"), "customer_id");
        assert_eq!(a.column("id"), "id");
        let b = r.route("shop", "items");
        assert_eq!((b.db.as_str(), b.table.as_str()), ("mirror", "items"));
        let c = r.route("other", "x");
        assert_eq!((c.db.as_str(), c.table.as_str()), ("other", "x"));
    }

    #[test]
    fn changes_are_renamed() {
        let r = router("- source-table: s\\.t\n  sink-table: d.u\n  columns: {a: b}\n");
        let c = r.change(&SchemaChange::RenameColumn {
            table: TableName::new(Some("s"), "t"),
            from: "a".into(),
            to: "z".into(),
        });
        assert_eq!(
            c,
            SchemaChange::RenameColumn {
                table: TableName::new(Some("d"), "u"),
                from: "b".into(),
                to: "z".into(),
            }
        );
    }

    #[test]
    fn bad_rules_are_refused() {
        let e = Router::parse(Some(
            &serde_yaml_ng::from_str("- source-table: '('\n  sink-table: a.b\n").unwrap(),
        ))
        .unwrap_err();
        assert!(e.message.contains("route[0].source-table"), "{e}");
        let e = Router::parse(Some(
            &serde_yaml_ng::from_str("- source-table: a\n  sink-table: nodot\n").unwrap(),
        ))
        .unwrap_err();
        assert!(e.message.contains("database.table"), "{e}");
        let e = Router::parse(Some(
            &serde_yaml_ng::from_str("- source-table: s\\.(.*)\n  sink-table: d.$1_copy\n")
                .unwrap(),
        ))
        .unwrap_err();
        assert!(e.message.contains("write `${1}_`"), "{e}");
        let ok = router("- source-table: s\\.(.*)\n  sink-table: d.${1}_copy\n");
        assert_eq!(ok.route("s", "t").table, "t_copy");
    }
}
