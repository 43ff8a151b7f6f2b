//! Starting the source: preflight, then a snapshot or a binlog start point per the
//! job's startup mode, or a resume from a stored position with the schema history as
//! of that position.

use super::binlog::{BinlogReader, ReadFrom};
use super::config::{PurgedPolicy, Source, Start};
use super::history::SchemaHistory;
use super::position::Position;
use super::{preflight, snapshot, SourceError, SourceEvent};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::mpsc;

pub struct RunOptions {
    /// Where the schema history lives (None: in memory).
    pub state_dir: Option<PathBuf>,
    /// Resume here instead of the job's startup mode.
    pub resume: Option<Position>,
    /// Resume by GTID (from `resume`'s GTID state) rather than file/offset.
    pub by_gtid: bool,
    /// Stop at the current end of the binlog instead of following it.
    pub stop_at_end: bool,
}

/// Run the source until the receiver is dropped, the binlog ends (`stop_at_end`), or
/// an error.
pub async fn run(
    src: Arc<Source>,
    opts: RunOptions,
    tx: mpsc::Sender<SourceEvent>,
) -> Result<(), SourceError> {
    preflight::check(&src).await?;
    let mut from: ReadFrom;
    let mut history: SchemaHistory;
    match &opts.resume {
        Some(p) => {
            history = match opts.state_dir.as_deref() {
                Some(d) => SchemaHistory::load(d, p).map_err(SourceError::Schema)?,
                None => None,
            }
            .map(Ok)
            .unwrap_or_else(|| {
                Err(SourceError::Schema(format!(
                    "no stored schema history to resume at {p}: resuming needs the state folder of the run that produced the position"
                )))
            })?;
            from = if opts.by_gtid && !p.gtid.is_empty() {
                if p.ordinal > 0 {
                    // Inside a transaction: GTID resume restarts that transaction;
                    // skipping needs its file offset, so resume by position.
                    ReadFrom::Position(p.clone())
                } else {
                    ReadFrom::Gtid(p.gtid.clone())
                }
            } else {
                ReadFrom::Position(p.clone())
            };
        }
        None => match &src.start {
            Start::Initial => match snapshot::snapshot(&src, &tx, opts.state_dir.as_deref()).await?
            {
                Some((p, h)) => {
                    history = h;
                    from = ReadFrom::Position(p);
                }
                None => return Ok(()),
            },
            start => {
                let mut conn = mysql_async::Conn::new(src.opts())
                    .await
                    .map_err(|e| SourceError::Connect(e.to_string()))?;
                let here = snapshot::current_position(&mut conn).await?;
                let defs = snapshot::read_definitions(&mut conn).await?;
                let _ = conn.disconnect().await;
                let p = match start {
                    Start::Position(p) => p.clone(),
                    _ => here.clone(),
                };
                history = SchemaHistory::create(
                    opts.state_dir.as_deref(),
                    &p,
                    defs.into_iter().map(|(db, _, _, ddl)| (db, ddl)).collect(),
                )
                .map_err(SourceError::Schema)?;
                from = match start {
                    Start::Gtid(g) => ReadFrom::Gtid(g.clone()),
                    _ => ReadFrom::Position(p),
                };
            }
        },
    }
    loop {
        let mut reader = BinlogReader::new(src.clone(), history, tx.clone());
        match reader.run(from.clone(), opts.stop_at_end).await {
            Err(SourceError::Purged { position, detail })
                if src.config.purged_resume == PurgedPolicy::Resnapshot =>
            {
                eprintln!("warning: resume point {position} was purged ({detail}); taking a new snapshot (purged-resume: resnapshot)");
                match snapshot::snapshot(&src, &tx, opts.state_dir.as_deref()).await? {
                    Some((p, h)) => {
                        history = h;
                        from = ReadFrom::Position(p);
                    }
                    None => return Ok(()),
                }
            }
            other => return other,
        }
    }
}
