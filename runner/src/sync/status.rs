//! `lakeshift status`: per Iceberg table of a job, the committed checkpoint, the
//! watermark, rows and schema version, data, small and delete files, bytes, snapshots,
//! manifests and the last maintenance, read from the catalog and the state folder;
//! for a relational target, its state row, Kafka offsets and the DDL log's counts.

use super::engine::{State, CHECKPOINT, WATERMARK};
use super::job::SyncJob;
use crate::iceberg::catalog::ident;
use crate::iceberg::Catalog;
use std::fmt::Write;

/// The report; `unread`: why the source is not asked (its password is not given:
/// everything else is read from the target and the state folder).
pub async fn report(
    job: &SyncJob,
    unread: Option<&str>,
) -> Result<String, crate::sync::error::SyncError> {
    // A PostgreSQL source: its slot's confirmed position and retained WAL.
    let slot = match (job.source.postgres(), unread) {
        (Some(_), Some(why)) => Some(format!("source slot: not read: {why}\n")),
        (Some(_), None) => Some(match crate::source::pg::slot_status(&job.source).await {
            Ok(line) => line + "\n",
            Err(e) => format!("source slot: cannot be read: {e}\n"),
        }),
        (None, _) => None,
    };
    // (A job that fails on every run says so first.)
    let failed = last_error(&job.pipeline.state)
        .map(|l| l + "\n")
        .unwrap_or_default();
    let Some(ice) = job.sink.iceberg() else {
        return Ok(failed + &slot.unwrap_or_default() + &super::rdb::status(job).await?);
    };
    let mut out = failed + &slot.unwrap_or_default();
    // A job that never ran on a local warehouse: nothing to open, and nothing is
    // made by looking (the catalog would make the warehouse and its database).
    let local = ice.catalog.is_none() && !ice.warehouse.to_string_lossy().contains("://");
    if local && !ice.warehouse.join("catalog.db").exists() {
        let _ = writeln!(
            out,
            "job {}: not started (no catalog in {} yet)",
            job.pipeline.name,
            ice.warehouse.display()
        );
        return Ok(out);
    }
    let catalog = Catalog::open(&ice.catalog_config())
        .await
        .map_err(|e| e.to_string())?;
    match State::load(&job.pipeline.state)? {
        Some(s) => {
            let _ = writeln!(
                out,
                "job {}: checkpoint {}, source position {}{}",
                job.pipeline.name,
                s.checkpoint,
                s.position
                    .map(|p| p.to_string())
                    .unwrap_or_else(|| "-".into()),
                if s.snapshot.is_some() {
                    " (snapshot in progress)"
                } else {
                    ""
                }
            );
        }
        None => {
            let _ = writeln!(out, "job {}: not started", job.pipeline.name);
        }
    }
    if let Some(h) = catalog
        .holder(&job.pipeline.name)
        .await
        .map_err(|e| e.to_string())?
    {
        let _ = writeln!(
            out,
            "owner: {}; last committed checkpoint {}",
            h.text, h.checkpoint
        );
    }
    let _ = writeln!(
        out,
        "{:<32} {:>10} {:>10} {:>7} {:>6} {:>8} {:>9} {:>9} {:>6} {:>9} {:>11}  watermark",
        "table",
        "checkpoint",
        "rows",
        "schema",
        "files",
        "deletes",
        "MiB",
        "snapshots",
        "small",
        "manifests",
        "maintained"
    );
    for ns in catalog.list_namespaces().await.map_err(|e| e.to_string())? {
        for t in catalog.list_tables(&ns).await.map_err(|e| e.to_string())? {
            let id = ident(&ns, &t).map_err(|e| e.to_string())?;
            let Some(tb) = catalog.load(&id).await.map_err(|e| e.to_string())? else {
                continue;
            };
            let m = &tb.metadata;
            let ours = super::maintain::newest_job_snapshot(m, &job.pipeline.name);
            let get = |k: &str| {
                ours.and_then(|s| s.summary().additional_properties.get(k).cloned())
                    .unwrap_or_else(|| "-".into())
            };
            // Totals of the current snapshot's summary: rows, data files, delete
            // files (position and equality), bytes.
            let total = |k: &str| -> u64 {
                m.current_snapshot()
                    .and_then(|s| s.summary().additional_properties.get(k))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0)
            };
            // Live rows: each position delete removes one row; equality deletes
            // remove an unknown number (then the count is an upper bound).
            let live = total("total-records").saturating_sub(total("total-position-deletes"));
            let rows = if total("total-equality-deletes") > 0 {
                format!("<={live}")
            } else {
                live.to_string()
            };
            // Time since the newest maintenance (compaction) snapshot.
            let maintained = m
                .snapshots()
                .filter(|s| {
                    s.summary()
                        .additional_properties
                        .contains_key(crate::iceberg::maintain::MAINTENANCE)
                })
                .map(|s| s.timestamp_ms())
                .max()
                .map(|at| {
                    let ago = (now_ms() - at).max(0) as f64 / 1000.0;
                    if ago < 120.0 {
                        format!("{ago:.0} s ago")
                    } else if ago < 7200.0 {
                        format!("{:.0} min ago", ago / 60.0)
                    } else {
                        format!("{:.1} h ago", ago / 3600.0)
                    }
                })
                .unwrap_or_else(|| "-".into());
            // Small data files (what compaction rewrites: below 3/4 of the target
            // size) and the manifests a reader opens.
            let err = |e: crate::iceberg::Error| format!("{ns}.{t}: {e}");
            let manifests = crate::iceberg::commit::current_manifests(&catalog, m)
                .await
                .map_err(err)?;
            let small_below = crate::iceberg::maintain::small_below(&tb);
            let small = crate::iceberg::commit::live_entries_of(&catalog, &manifests)
                .await
                .map_err(err)?
                .iter()
                .filter(|f| {
                    f.content_type() == iceberg::spec::DataContentType::Data
                        && f.file_size_in_bytes() < small_below
                })
                .count();
            let _ = writeln!(
                out,
                "{:<32} {:>10} {:>10} {:>7} {:>6} {:>8} {:>9.1} {:>9} {:>6} {:>9} {:>11}  {}",
                format!("{ns}.{t}"),
                get(CHECKPOINT),
                rows,
                m.current_schema_id(),
                total("total-data-files"),
                total("total-delete-files"),
                total("total-files-size") as f64 / (1024.0 * 1024.0),
                m.snapshots().count(),
                small,
                manifests.len(),
                maintained,
                get(WATERMARK)
            );
        }
    }
    let _ = writeln!(
        out,
        "DDL log: {}",
        super::ddllog::DdlLog::load(&job.pipeline.state)?.counts()
    );
    Ok(out)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// In the state folder: how the last run ended, when it stopped with an error (its
/// time in ms since the epoch, then the error), so `status` and `check` tell a job
/// that fails on every run from one that stopped cleanly. Removed by a run that ends
/// cleanly.
const LAST_ERROR: &str = "last-error.txt";

/// The run ends with error `message` (the state folder must exist: a job that never
/// started records nothing).
pub fn record_error(state: &std::path::Path, message: &str) {
    if state.is_dir() {
        let text = format!("{}\n{message}", crate::calendar::now_ms());
        let _ = crate::durable::replace(&state.join(LAST_ERROR), text.as_bytes());
    }
}

/// The run ended cleanly.
pub fn clear_error(state: &std::path::Path) {
    let _ = std::fs::remove_file(state.join(LAST_ERROR));
}

/// "the last run stopped with an error at T UTC: <its first line>", if it did.
pub fn last_error(state: &std::path::Path) -> Option<String> {
    let text = std::fs::read_to_string(state.join(LAST_ERROR)).ok()?;
    let (ms, message) = text.split_once('\n')?;
    let ms: i64 = ms.trim().parse().ok()?;
    let secs = ms.div_euclid(1000);
    let (y, m, d) = crate::calendar::civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    Some(format!(
        "the last run stopped with an error at {y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC: {}",
        s / 3600,
        s / 60 % 60,
        s % 60,
        message.lines().next().unwrap_or_default()
    ))
}
