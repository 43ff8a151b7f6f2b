//! Carrying out an Iceberg plan (`dialects::iceberg::StatementPlan`): each action one
//! catalog commit through the [`Committer`], in order, with what was done returned as
//! data. `lakeshift apply` prints it; the sync engine logs it.

use crate::iceberg::catalog::{display, ident};
use crate::iceberg::commit::{Change, MetadataChange, SnapshotChange};
use crate::iceberg::{convert, Committer};
use dialects::iceberg::{Action, IceTable};
use std::collections::{BTreeMap, BTreeSet};

/// One step of a plan, done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    CreatedNamespace(String),
    DroppedNamespace(String),
    CreatedTable {
        table: String,
        columns: usize,
        last_field_id: i32,
        identifier_field_ids: Vec<i32>,
    },
    DroppedTable(String),
    RenamedTable {
        from: String,
        to: String,
    },
    TruncatedTable {
        table: String,
        snapshot: i64,
    },
    AlteredTable {
        table: String,
        schema_id: i32,
        columns: usize,
        last_field_id: i32,
    },
}

impl Applied {
    /// Whether this step was a catalog commit (creating a namespace that already
    /// existed is not one, and is not reported).
    pub fn is_commit(&self) -> bool {
        !matches!(self, Applied::CreatedNamespace(_))
    }
}

impl std::fmt::Display for Applied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Applied::CreatedNamespace(n) => write!(f, "created namespace {n}"),
            Applied::DroppedNamespace(n) => write!(f, "dropped namespace {n}"),
            Applied::CreatedTable {
                table,
                columns,
                last_field_id,
                identifier_field_ids,
            } => {
                write!(f, "created table {table} ({columns} columns, field ids 1..{last_field_id}")?;
                if !identifier_field_ids.is_empty() {
                    write!(f, ", identifier fields {identifier_field_ids:?}")?;
                }
                f.write_str(")")
            }
            Applied::DroppedTable(t) => write!(f, "dropped table {t} (files purged)"),
            Applied::RenamedTable { from, to } => write!(f, "renamed table {from} to {to}"),
            Applied::TruncatedTable { table, snapshot } => {
                write!(f, "truncated table {table} (snapshot {snapshot})")
            }
            Applied::AlteredTable {
                table,
                schema_id,
                columns,
                last_field_id,
            } => write!(
                f,
                "altered table {table} (schema {schema_id}, {columns} columns, last field id {last_field_id})"
            ),
        }
    }
}

/// Carry out one statement's plan, in order: what was done, one entry per step
/// (every entry but an existing namespace's is a catalog commit). `known` holds the
/// schema id and last column id of the tables committed so far.
pub async fn execute(
    c: &Committer<'_>,
    plan: &dialects::iceberg::StatementPlan,
    known: &mut BTreeMap<(String, String), (i32, i32)>,
) -> crate::iceberg::Result<Vec<Applied>> {
    let split = |s: &str| -> (String, String) {
        // Namespaces are database names; a table name may hold dots.
        let (ns, t) = s.split_once('.').unwrap_or(("default", s));
        (ns.to_owned(), t.to_owned())
    };
    let mut applied: Vec<Applied> = Vec::new();
    let mut schema_changed: BTreeSet<(String, String)> = BTreeSet::new();
    let mut removed_props: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut renamed = false;
    for a in &plan.actions {
        match a {
            Action::CreateNamespace { namespace } => {
                if c.catalog.ensure_namespace(namespace).await? {
                    applied.push(Applied::CreatedNamespace(namespace.clone()));
                }
            }
            Action::DropNamespace { namespace } => {
                c.catalog.drop_namespace(namespace).await?;
                applied.push(Applied::DroppedNamespace(namespace.clone()));
            }
            Action::CreateTable {
                table,
                schema,
                identifier_field_ids,
                partition,
                sort_order,
                properties,
                format_version,
            } => {
                let (ns, name) = split(table);
                let planned = IceTable {
                    namespace: ns.clone(),
                    name: name.clone(),
                    fields: schema.clone(),
                    identifier_field_ids: identifier_field_ids.clone(),
                    last_column_id: schema.iter().map(|f| f.id).max().unwrap_or(0),
                    properties: properties.clone(),
                    format_version: *format_version,
                    has_rows: false,
                };
                let t = c
                    .create_table(&ns, &name, &planned, partition.as_deref(), sort_order)
                    .await?;
                known.insert(
                    (ns, name),
                    (t.metadata.current_schema_id(), t.metadata.last_column_id()),
                );
                applied.push(Applied::CreatedTable {
                    table: table.clone(),
                    columns: schema.len(),
                    last_field_id: planned.last_column_id,
                    identifier_field_ids: identifier_field_ids.clone(),
                });
            }
            Action::DropTable { table } => {
                let (ns, name) = split(table);
                let id = ident(&ns, &name)?;
                c.catalog.drop_table(&id, true).await?;
                known.remove(&(ns, name));
                applied.push(Applied::DroppedTable(table.clone()));
                crate::failpoint::hit("after-table-dropped");
            }
            Action::RenameTable { .. } => {
                // The statement's renames are one catalog transaction: done with
                // the first, skipped after.
                if renamed {
                    continue;
                }
                renamed = true;
                let pairs: Vec<(&String, &String)> = plan
                    .actions
                    .iter()
                    .filter_map(|a| match a {
                        Action::RenameTable { from, to } => Some((from, to)),
                        _ => None,
                    })
                    .collect();
                let mut ids = Vec::new();
                for (from, to) in &pairs {
                    let (k1, k2) = (split(from), split(to));
                    ids.push((ident(&k1.0, &k1.1)?, ident(&k2.0, &k2.1)?));
                }
                c.catalog.rename_tables(&ids).await?;
                for (from, to) in pairs {
                    if let Some(v) = known.remove(&split(from)) {
                        known.insert(split(to), v);
                    }
                    applied.push(Applied::RenamedTable {
                        from: from.clone(),
                        to: to.clone(),
                    });
                }
            }
            Action::TruncateTable { table } => {
                let (ns, name) = split(table);
                let id = ident(&ns, &name)?;
                let done = c
                    .commit(
                        &id,
                        &uuid::Uuid::new_v4().to_string(),
                        &Change::Snapshot(SnapshotChange {
                            truncate: true,
                            ..Default::default()
                        }),
                    )
                    .await?;
                applied.push(Applied::TruncatedTable {
                    table: table.clone(),
                    snapshot: done.snapshot_id.unwrap_or_default(),
                });
                // The plan's properties (the sync's `lakeshift.schema-position`) follow
                // in a metadata commit, so a replayed truncate is recognised. A crash in
                // between replays it onto the same empty table.
                schema_changed.insert((ns, name));
            }
            Action::SetProperties { table, remove, .. } => {
                let k = split(table);
                removed_props
                    .entry(k.clone())
                    .or_default()
                    .extend(remove.clone());
                schema_changed.insert(k);
            }
            other => {
                if let Some(t) = other.table() {
                    schema_changed.insert(split(t));
                }
            }
        }
    }
    commit_metadata(c, plan, known, schema_changed, removed_props, &mut applied).await?;
    Ok(applied)
}

/// The tables whose schema or properties the statement changed: one metadata commit
/// each, against the schema the plan was made on.
async fn commit_metadata(
    c: &Committer<'_>,
    plan: &dialects::iceberg::StatementPlan,
    known: &mut BTreeMap<(String, String), (i32, i32)>,
    schema_changed: BTreeSet<(String, String)>,
    mut removed_props: BTreeMap<(String, String), Vec<String>>,
    applied: &mut Vec<Applied>,
) -> crate::iceberg::Result<()> {
    for key in schema_changed {
        let Some(Some(planned)) = plan.tables.get(&key) else {
            continue; // dropped or renamed away in the same statement
        };
        let id = ident(&key.0, &key.1)?;
        let current = c.catalog.load_required(&id).await?;
        let now = convert::ice_table(&key.0, &key.1, &current.metadata)?;
        let mut mc = MetadataChange::default();
        if now.fields != planned.fields || now.identifier_field_ids != planned.identifier_field_ids
        {
            mc.schema = Some(planned.clone());
            mc.expect_schema = known.get(&key).copied();
        }
        for (k, v) in &planned.properties {
            if now.properties.get(k) != Some(v) {
                mc.set_properties.insert(k.clone(), v.clone());
            }
        }
        mc.remove_properties = removed_props
            .remove(&key)
            .unwrap_or_default()
            .into_iter()
            .filter(|k| now.properties.contains_key(k))
            .collect();
        if mc.schema.is_none() && mc.set_properties.is_empty() && mc.remove_properties.is_empty() {
            continue;
        }
        let done = c
            .commit(
                &id,
                &uuid::Uuid::new_v4().to_string(),
                &Change::Metadata(mc),
            )
            .await?;
        let m = &done.table.metadata;
        known.insert(key.clone(), (m.current_schema_id(), m.last_column_id()));
        applied.push(Applied::AlteredTable {
            table: display(&id),
            schema_id: m.current_schema_id(),
            columns: m.current_schema().as_struct().fields().len(),
            last_field_id: m.last_column_id(),
        });
    }
    Ok(())
}
