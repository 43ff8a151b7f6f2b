//! `lakeshift apply`: run a DDL script against an Iceberg catalog, one commit per
//! statement and table, reporting what each statement did.
//!
//! Tables that already exist in the catalog are known before the script runs (their
//! Iceberg schemas seed both the planner and the IR catalog), so a script of ALTERs
//! can be applied to tables an earlier run created. The first statement that fails
//! stops the run: later statements might depend on it.

use crate::iceberg::catalog::{display, ident};
use crate::iceberg::commit::{Change, MetadataChange, SnapshotChange};
use crate::iceberg::{convert, Catalog, CatalogConfig, Committer};
use ddl_core::{SchemaChange, Severity, TableName};
use dialects::iceberg::{Action, IceTable, IcebergOptions, IcebergPlanner};
use dialects::translate::{Target, Translator};
use dialects::Dialect;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

pub struct ApplyOptions {
    pub source: Dialect,
    pub catalog: CatalogConfig,
    pub iceberg: IcebergOptions,
    pub ansi_quotes: bool,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ApplyReport {
    pub statements: usize,
    pub commits: usize,
    pub failed: bool,
}

/// Apply `inputs` (name, text) in order. Progress and results go to `out`,
/// diagnostics to `err` in the `severity: FILE:LINE:COL: message` form.
pub async fn apply(
    opts: &ApplyOptions,
    inputs: &[(String, String)],
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<ApplyReport, String> {
    let catalog = Catalog::open(&opts.catalog)
        .await
        .map_err(|e| e.to_string())?;
    let mut tr = Translator::new(opts.source, Target::Iceberg);
    tr.options.ansi_quotes = opts.ansi_quotes;
    tr.iceberg = IcebergPlanner::new(opts.iceberg.clone());
    // What the catalog holds already.
    let mut known: BTreeMap<(String, String), (i32, i32)> = BTreeMap::new();
    for ns in catalog.list_namespaces().await.map_err(|e| e.to_string())? {
        tr.iceberg.namespaces.insert(ns.clone());
        for name in catalog.list_tables(&ns).await.map_err(|e| e.to_string())? {
            let id = ident(&ns, &name).map_err(|e| e.to_string())?;
            let t = catalog
                .load_required(&id)
                .await
                .map_err(|e| e.to_string())?;
            let ice = convert::ice_table(&ns, &name, &t.metadata).map_err(|e| e.to_string())?;
            let ir_name = if ns == opts.iceberg.default_namespace {
                TableName::new(None, &name)
            } else {
                TableName::new(Some(&ns), &name)
            };
            tr.catalog
                .apply(&SchemaChange::CreateTable {
                    table: convert::ir_table(ir_name, &ice),
                    if_not_exists: false,
                })
                .map_err(|e| format!("table {ns}.{name}: {e}"))?;
            known.insert(
                (ns.clone(), name.clone()),
                (t.metadata.current_schema_id(), t.metadata.last_column_id()),
            );
            tr.iceberg.tables.insert((ns.clone(), name.clone()), ice);
        }
    }
    let committer = Committer::new(&catalog);
    let mut report = ApplyReport::default();
    for (file, text) in inputs {
        for r in tr.translate(text) {
            report.statements += 1;
            let at = format!("{file}:{}:{}", r.line, r.column);
            let mut failed = false;
            for (l, c, d) in &r.diagnostics {
                failed |= d.severity == Severity::Error;
                let _ = writeln!(err, "{}: {file}:{l}:{c}: {}", d.severity, d.message);
            }
            if failed {
                report.failed = true;
                let _ = writeln!(
                    err,
                    "stopped at {at}: nothing of this statement or the ones after it was applied"
                );
                return Ok(report);
            }
            let Some(plan) = r.plan else { continue };
            if plan.actions.is_empty() {
                continue;
            }
            match execute(&committer, &plan, &mut known, out, &at).await {
                Ok(n) => report.commits += n,
                Err(e) => {
                    report.failed = true;
                    let _ = writeln!(err, "error: {at}: {e}");
                    let _ = writeln!(
                        err,
                        "stopped at {at}: statements after this one were not applied"
                    );
                    return Ok(report);
                }
            }
        }
    }
    Ok(report)
}

/// Carry out one statement's plan. Returns the number of catalog commits.
pub(crate) async fn execute(
    c: &Committer<'_>,
    plan: &dialects::iceberg::StatementPlan,
    known: &mut BTreeMap<(String, String), (i32, i32)>,
    out: &mut dyn Write,
    at: &str,
) -> Result<usize, String> {
    let e = |e: crate::iceberg::Error| e.to_string();
    let split = |s: &str| -> (String, String) {
        let (ns, t) = s.rsplit_once('.').unwrap_or(("default", s));
        (ns.to_owned(), t.to_owned())
    };
    let mut commits = 0;
    let mut schema_changed: BTreeSet<(String, String)> = BTreeSet::new();
    let mut removed_props: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for a in &plan.actions {
        match a {
            Action::CreateNamespace { namespace } => {
                if c.catalog.ensure_namespace(namespace).await.map_err(e)? {
                    let _ = writeln!(out, "{at}: created namespace {namespace}");
                }
            }
            Action::DropNamespace { namespace } => {
                c.catalog.drop_namespace(namespace).await.map_err(e)?;
                let _ = writeln!(out, "{at}: dropped namespace {namespace}");
                commits += 1;
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
                    .await
                    .map_err(e)?;
                known.insert(
                    (ns, name),
                    (t.metadata.current_schema_id(), t.metadata.last_column_id()),
                );
                commits += 1;
                let _ = writeln!(
                    out,
                    "{at}: created table {table} ({} columns, field ids 1..{}{})",
                    schema.len(),
                    planned.last_column_id,
                    if identifier_field_ids.is_empty() {
                        String::new()
                    } else {
                        format!(", identifier fields {identifier_field_ids:?}")
                    }
                );
            }
            Action::DropTable { table } => {
                let (ns, name) = split(table);
                let id = ident(&ns, &name).map_err(e)?;
                c.catalog.drop_table(&id, true).await.map_err(e)?;
                known.remove(&(ns, name));
                commits += 1;
                let _ = writeln!(out, "{at}: dropped table {table} (files purged)");
            }
            Action::RenameTable { from, to } => {
                let (k1, k2) = (split(from), split(to));
                c.catalog
                    .rename_table(
                        &ident(&k1.0, &k1.1).map_err(e)?,
                        &ident(&k2.0, &k2.1).map_err(e)?,
                    )
                    .await
                    .map_err(e)?;
                if let Some(v) = known.remove(&k1) {
                    known.insert(k2, v);
                }
                commits += 1;
                let _ = writeln!(out, "{at}: renamed table {from} to {to}");
            }
            Action::TruncateTable { table } => {
                let (ns, name) = split(table);
                let id = ident(&ns, &name).map_err(e)?;
                let done = c
                    .commit(
                        &id,
                        &uuid::Uuid::new_v4().to_string(),
                        &Change::Snapshot(SnapshotChange {
                            truncate: true,
                            ..Default::default()
                        }),
                    )
                    .await
                    .map_err(e)?;
                commits += 1;
                let _ = writeln!(
                    out,
                    "{at}: truncated table {table} (snapshot {})",
                    done.snapshot_id.unwrap_or_default()
                );
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
    for key in schema_changed {
        let Some(Some(planned)) = plan.tables.get(&key) else {
            continue; // dropped or renamed away in the same statement
        };
        let id = ident(&key.0, &key.1).map_err(e)?;
        let current = c.catalog.load_required(&id).await.map_err(e)?;
        let now = convert::ice_table(&key.0, &key.1, &current.metadata).map_err(e)?;
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
            .await
            .map_err(e)?;
        let m = &done.table.metadata;
        known.insert(key.clone(), (m.current_schema_id(), m.last_column_id()));
        commits += 1;
        let _ = writeln!(
            out,
            "{at}: altered table {} (schema {}, {} columns, last field id {})",
            display(&id),
            m.current_schema_id(),
            m.current_schema().as_struct().fields().len(),
            m.last_column_id()
        );
    }
    Ok(commits)
}
