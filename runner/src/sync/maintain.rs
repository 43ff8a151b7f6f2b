//! `lakeshift maintain`: every Iceberg table a job wrote, compacted, its old
//! snapshots expired and its orphan files removed (`iceberg::maintain`), with a
//! line per step.

use super::engine::{State, JOB};
use super::error::SyncError;
use super::job::SyncJob;
use crate::iceberg::catalog::ident;
use crate::iceberg::maintain::{self, Options};
use crate::iceberg::Catalog;
use std::collections::HashSet;
use std::path::PathBuf;

/// Maintain the job's tables; `say` gets a line per table and step. `inside`: the
/// job's own process runs it (between checkpoints), so its lease is no obstacle.
pub async fn run(
    job: &SyncJob,
    catalog: &Catalog,
    o: &Options,
    inside: bool,
    mut say: impl FnMut(String),
) -> Result<usize, SyncError> {
    if !inside && !o.dry_run {
        if let Some((who, _, true)) = catalog
            .holder(&job.pipeline.name)
            .await
            .map_err(|e| e.to_string())?
        {
            return Err(format!(
                "job `{}` is running ({who}): its commits would race the rewrite. Stop it first, or set sink.maintenance.interval-seconds so that the job maintains its own tables",
                job.pipeline.name
            )
            .into());
        }
    }
    let state = State::load(&job.pipeline.state)?;
    let mut steps = 0;
    for ns in catalog.list_namespaces().await.map_err(|e| e.to_string())? {
        for name in catalog.list_tables(&ns).await.map_err(|e| e.to_string())? {
            let id = ident(&ns, &name).map_err(|e| e.to_string())?;
            let load = || async {
                catalog
                    .load(&id)
                    .await
                    .map_err(|e| SyncError::from(format!("{ns}.{name}: {e}")))
            };
            let Some(t) = load().await? else { continue };
            let ours = t.metadata.snapshots().any(|s| {
                s.summary()
                    .additional_properties
                    .get(JOB)
                    .is_some_and(|j| *j == job.pipeline.name)
            });
            if !ours {
                continue;
            }
            let err = |e: crate::iceberg::Error| SyncError::from(format!("{ns}.{name}: {e}"));
            if let Some(m) = maintain::compact(catalog, &t, o).await.map_err(err)? {
                say(format!("{ns}.{name}: {m}"));
                steps += 1;
            }
            let Some(t) = load().await? else { continue };
            if let Some(m) = maintain::expire(catalog, &t, o).await.map_err(err)? {
                say(format!("{ns}.{name}: {m}"));
                steps += 1;
            }
            let Some(t) = load().await? else { continue };
            let protect = pending_files(job, state.as_ref(), &t);
            if let Some(m) = maintain::remove_orphans(catalog, &t, &protect, o)
                .await
                .map_err(err)?
            {
                say(format!("{ns}.{name}: {m}"));
                steps += 1;
            }
        }
    }
    Ok(steps)
}

/// Files the job's last checkpoint lists for table `t` (written, maybe not yet
/// committed): never orphans.
fn pending_files(
    job: &SyncJob,
    state: Option<&State>,
    t: &crate::iceberg::LoadedTable,
) -> HashSet<PathBuf> {
    let name = format!("{}.{}", t.ident.namespace().join("."), t.ident.name());
    let Some((avro, _)) = state.and_then(|s| s.pending.get(&name)) else {
        return HashSet::new();
    };
    super::engine::state::read_files(&job.pipeline.state.join(avro), t)
        .unwrap_or_default()
        .iter()
        .filter_map(|f| crate::iceberg::catalog::local_path(f.file_path()))
        .collect()
}
