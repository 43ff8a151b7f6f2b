//! `lakeshift maintain`: every Iceberg table a job wrote, compacted, its old
//! snapshots expired and its orphan files removed (`iceberg::maintain`), with a
//! line per step.

use super::engine::{State, CHECKPOINT, JOB};
use super::error::SyncError;
use super::job::SyncJob;
use crate::iceberg::catalog::ident;
use crate::iceberg::maintain::{self, Options};
use crate::iceberg::Catalog;
use std::collections::HashSet;

/// Maintain the job's tables; `say` gets a line per table and step. `inside`: the
/// job's own process runs it (between checkpoints), so its lease is no obstacle.
pub async fn run(
    job: &SyncJob,
    catalog: &Catalog,
    o: &Options,
    inside: bool,
    mut say: impl FnMut(String),
) -> Result<usize, SyncError> {
    // Run from outside the job: its state folder's lock, so that the job cannot start
    // meanwhile (and is not running with this folder now).
    let _lock = if inside || o.dry_run {
        None
    } else {
        let refuse = |who: &str| {
            SyncError::from(format!(
                "job `{}` is running ({who}): its commits would race the rewrite. Stop it first, or set sink.maintenance.interval-seconds so that the job maintains its own tables",
                job.pipeline.name
            ))
        };
        let lock = super::owner::lock(&job.pipeline.state, &job.pipeline.name)
            .map_err(|e| refuse(&e.to_string()))?;
        // A live lease of another host or state folder: the job runs there. (This
        // host's with this folder: the lock proves that run is gone.)
        if let Some(h) = catalog
            .holder(&job.pipeline.name)
            .await
            .map_err(|e| e.to_string())?
        {
            let me =
                crate::iceberg::lease::Owner::this_process(&job.pipeline.name, &job.pipeline.state);
            if h.live && (h.host != me.host || h.state != me.state) {
                return Err(refuse(&h.text));
            }
        }
        Some(lock)
    };
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
            // A checkpoint the state lists and the table lacks is committed by the
            // job's next run, position deletes included: the files they point into
            // must still be there then.
            let owed = state.as_ref().and_then(|s| {
                let key = format!("{ns}.{name}");
                (s.pending.contains_key(&key) && committed_checkpoint(job, &t) < s.checkpoint)
                    .then_some(s.checkpoint)
            });
            if let Some(n) = owed {
                say(format!(
                    "{ns}.{name}: not compacted: the job's checkpoint {n} is not committed to it yet (the job's next run commits it; run the job, then maintain)"
                ));
            } else if let Some(m) = maintain::compact(catalog, &t, o).await.map_err(err)? {
                say(format!("{ns}.{name}: {m}"));
                steps += 1;
            }
            let Some(t) = load().await? else { continue };
            if let Some(m) = maintain::merge_manifests(catalog, &t, o)
                .await
                .map_err(err)?
            {
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

/// The job's newest checkpoint committed to `t`.
fn committed_checkpoint(job: &SyncJob, t: &crate::iceberg::LoadedTable) -> u64 {
    newest_job_snapshot(&t.metadata, &job.pipeline.name)
        .and_then(|s| s.summary().additional_properties.get(CHECKPOINT))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The newest snapshot of a table that job `job` committed.
pub fn newest_job_snapshot<'a>(
    m: &'a iceberg::spec::TableMetadata,
    job: &str,
) -> Option<&'a iceberg::spec::SnapshotRef> {
    m.snapshots()
        .filter(|s| {
            s.summary()
                .additional_properties
                .get(JOB)
                .is_some_and(|j| j == job)
        })
        .max_by_key(|s| s.sequence_number())
}

/// Files the job's last checkpoint lists for table `t` (written, maybe not yet
/// committed): never orphans.
fn pending_files(
    job: &SyncJob,
    state: Option<&State>,
    t: &crate::iceberg::LoadedTable,
) -> HashSet<String> {
    let name = format!("{}.{}", t.ident.namespace().join("."), t.ident.name());
    let Some((avro, _)) = state.and_then(|s| s.pending.get(&name)) else {
        return HashSet::new();
    };
    super::engine::state::read_files(&job.pipeline.state, avro, t)
        .unwrap_or_default()
        .iter()
        .map(|f| f.file_path().to_owned())
        .collect()
}
