//! `lakeshift drop-job`: what a job keeps outside its target tables, removed. A
//! PostgreSQL source's replication slot retains WAL on the server for as long as it
//! exists, so a job given up must drop it; with it go the publication the job made,
//! the job's lease row in the Iceberg catalog or its state rows in a relational
//! target, and its state folder. The target's tables and their rows stay.
//!
//! Without `apply` it only says what it would remove. A job that runs (its state
//! folder locked, its slot being read, its lease live) is refused.

use super::error::SyncError;
use super::job::SyncJob;

/// Remove (or, without `apply`, list) what `job` holds; one line per thing.
pub async fn drop_job(job: &SyncJob, apply: bool) -> Result<Vec<String>, SyncError> {
    let state = &job.pipeline.state;
    // The local lock: no process of the job runs from this folder meanwhile.
    let _lock = if state.exists() {
        Some(super::owner::lock(state, &job.pipeline.name)?)
    } else {
        None
    };
    let mut out = Vec::new();
    // (A local catalog never made holds nothing of the job.)
    let catalog = job
        .sink
        .iceberg()
        .map(|ice| ice.catalog_config())
        .filter(|c| !c.never_made());
    if let Some(cfg) = catalog {
        let catalog = crate::iceberg::Catalog::open(&cfg)
            .await
            .map_err(|e| e.to_string())?;
        match catalog
            .holder(&job.pipeline.name)
            .await
            .map_err(|e| e.to_string())?
        {
            // A live lease of this very folder on this host is a run that is gone
            // (this process holds the folder's lock).
            Some(h) if h.live && !(_lock.is_some() && same_folder(&h, job)) => {
                return Err(SyncError::fenced(format!(
                    "job {} holds its lease: {}; stop it first (or wait until the lease runs out)",
                    job.pipeline.name, h.text
                )))
            }
            Some(_) => {
                if apply {
                    catalog
                        .forget_job(&job.pipeline.name)
                        .await
                        .map_err(|e| e.to_string())?;
                }
                out.push(format!(
                    "{} the job's lease row in the catalog (lakeshift_job_owner)",
                    if apply { "deleted" } else { "would delete" }
                ));
            }
            None => {}
        }
    } else if job.sink.iceberg().is_none() {
        out.extend(super::rdb::forget_job(job, apply).await?);
    }
    if job.source.postgres().is_some() {
        out.extend(
            crate::source::pg::drop_held(&job.source, apply)
                .await
                .map_err(|e| SyncError::from(e).context("the source"))?,
        );
    }
    if state.exists() {
        if apply {
            std::fs::remove_dir_all(state)
                .map_err(|e| format!("removing the state folder {}: {e}", state.display()))?;
        }
        out.push(format!(
            "{} the state folder {}",
            if apply { "removed" } else { "would remove" },
            state.display()
        ));
    }
    Ok(out)
}

/// Whether `h` is the run of this job's state folder on this host.
fn same_folder(h: &crate::iceberg::lease::Holder, job: &SyncJob) -> bool {
    let me = crate::iceberg::lease::Owner::this_process(&job.pipeline.name, &job.pipeline.state);
    h.host == me.host && h.state == me.state
}
