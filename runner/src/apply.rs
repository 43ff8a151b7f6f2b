//! `lakeshift apply`: run a DDL script against an Iceberg catalog, one commit per
//! statement and table, reporting what each statement did.
//!
//! Tables that already exist in the catalog are known before the script runs (their
//! Iceberg schemas seed both the planner and the IR catalog), so a script of ALTERs
//! can be applied to tables an earlier run created. The first statement that fails
//! stops the run: later statements might depend on it.

use crate::iceberg::catalog::ident;
use crate::iceberg::{convert, Catalog, CatalogConfig, Committer};
use ddl_core::{SchemaChange, Severity, TableName};
use dialects::iceberg::{IcebergOptions, IcebergPlanner};
use dialects::translate::{Target, Translator};
use dialects::Dialect;
use std::collections::BTreeMap;
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
        std::sync::Arc::make_mut(&mut tr.iceberg.namespaces).insert(ns.clone());
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
            match crate::iceberg::plan::execute(&committer, &plan, &mut known).await {
                Ok(done) => {
                    for a in &done {
                        let _ = writeln!(out, "{at}: {a}");
                    }
                    report.commits += done.iter().filter(|a| a.is_commit()).count();
                }
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
