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
    /// Continue an interrupted snapshot (with the state folder's schema history).
    pub snapshot_resume: Option<snapshot::SnapshotResume>,
}

/// The captured tables the history knows of: those it describes, and tables it
/// left unread at its start that the table list captures now.
fn captured_tables(src: &Source, h: &SchemaHistory) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = h
        .tables()
        .filter_map(|t| {
            let db = t.name.schema.clone()?;
            src.captures(&db, &t.name.name)
                .then(|| (db, t.name.name.clone()))
        })
        .chain(h.unread().filter(|(d, n)| src.captures(d, n)).cloned())
        .collect();
    v.sort();
    v
}

/// The captured tables of the last run, kept to notice newly matching ones.
fn load_captured(dir: &std::path::Path) -> Option<Vec<(String, String)>> {
    serde_json::from_slice(&std::fs::read(dir.join("captured.json")).ok()?).ok()
}

/// The table list (its compiled patterns) of the last run.
fn load_patterns(dir: &std::path::Path) -> Option<Vec<regex::Regex>> {
    let p: Vec<String> =
        serde_json::from_slice(&std::fs::read(dir.join("captured-patterns.json")).ok()?).ok()?;
    p.iter().map(|s| regex::Regex::new(s).ok()).collect()
}

fn save_captured(
    dir: Option<&std::path::Path>,
    src: &Source,
    tables: &[(String, String)],
) -> Result<(), SourceError> {
    let Some(dir) = dir else { return Ok(()) };
    let patterns: Vec<&str> = src.tables.iter().map(|r| r.as_str()).collect();
    crate::durable::replace(
        &dir.join("captured-patterns.json"),
        &serde_json::to_vec(&patterns).expect("serialises"),
    )
    .map_err(|e| SourceError::Schema(format!("{}: {e}", dir.display())))?;
    // regression: written without fsync, so a crash could leave it empty.
    crate::durable::replace(
        &dir.join("captured.json"),
        &serde_json::to_vec(tables).expect("serialises"),
    )
    .map_err(|e| SourceError::Schema(format!("{}: {e}", dir.display())))
}

/// The MySQL/MariaDB binlog (after a snapshot, per the startup mode) as a
/// [`super::Source`]; its schema history lives in `state_dir`.
pub struct BinlogSource {
    config: Arc<Source>,
    state_dir: PathBuf,
    /// A connection for the lag figure, kept between progress lines.
    monitor: Option<mysql_async::Conn>,
}

impl BinlogSource {
    pub fn new(config: Arc<Source>, state_dir: PathBuf) -> Self {
        BinlogSource {
            config,
            state_dir,
            monitor: None,
        }
    }
}

impl super::Source for BinlogSource {
    fn name(&self) -> &'static str {
        "binlog"
    }

    fn start(
        &mut self,
        from: super::Resume,
        stop_at_end: bool,
        tx: mpsc::Sender<SourceEvent>,
    ) -> tokio::task::JoinHandle<Result<(), SourceError>> {
        let opts = RunOptions {
            state_dir: Some(self.state_dir.clone()),
            resume: from.position.filter(|_| from.snapshot.is_none()),
            by_gtid: false,
            stop_at_end,
            snapshot_resume: from.snapshot,
        };
        tokio::spawn(run(self.config.clone(), opts, tx))
    }

    fn lag_bytes<'a>(
        &'a mut self,
        at: &'a Position,
    ) -> futures::future::BoxFuture<'a, Option<i64>> {
        Box::pin(async move {
            if self.monitor.is_none() {
                self.monitor = mysql_async::Conn::new(self.config.opts()).await.ok();
            }
            let c = self.monitor.as_mut()?;
            match snapshot::current_position(c).await {
                Ok(end) if end.file == at.file => Some(end.offset.saturating_sub(at.offset) as i64),
                Ok(_) => None,
                Err(_) => {
                    self.monitor = None;
                    None
                }
            }
        })
    }
}

/// Run the source until the receiver is dropped, the binlog ends (`stop_at_end`), or
/// an error.
pub async fn run(
    src: Arc<Source>,
    opts: RunOptions,
    tx: mpsc::Sender<SourceEvent>,
) -> Result<(), SourceError> {
    let resuming = opts.resume.is_some() || opts.snapshot_resume.is_some();
    preflight::check(&src, &replica_name(opts.state_dir.as_deref()), resuming).await?;
    if let Some(r) = &opts.snapshot_resume {
        let dir = opts.state_dir.as_deref().ok_or_else(|| {
            SourceError::Schema("resuming a snapshot needs its state folder".into())
        })?;
        let h = SchemaHistory::load(dir, &r.position)?.ok_or_else(|| {
            SourceError::Schema(format!("no schema history in {}", dir.display()))
        })?;
        match snapshot::snapshot(
            &src,
            &tx,
            Some(dir),
            snapshot::Scope::Resume(r.clone()),
            Some(h),
        )
        .await?
        {
            Some((p, h)) => {
                save_captured(Some(dir), &src, &captured_tables(&src, &h))?;
                return follow(&src, &opts, h, ReadFrom::Position(p), tx).await;
            }
            None => return Ok(()),
        }
    }
    let started = match &opts.resume {
        Some(p) => resume_at(&src, &opts, p, &tx).await?,
        None => match &src.start {
            Start::Initial => snapshot::snapshot(
                &src,
                &tx,
                opts.state_dir.as_deref(),
                snapshot::Scope::All,
                None,
            )
            .await?
            .map(|(p, h)| (h, ReadFrom::Position(p))),
            start => Some(start_at(&src, &opts, start).await?),
        },
    };
    let Some((history, from)) = started else {
        return Ok(()); // the engine went away during a snapshot
    };
    save_captured(
        opts.state_dir.as_deref(),
        &src,
        &captured_tables(&src, &history),
    )?;
    follow(&src, &opts, history, from, tx).await
}

/// A resume at a stored position: the schema history as of it, tables newly matched
/// snapshotted alone, then where the binlog continues. None: the engine went away.
async fn resume_at(
    src: &Arc<Source>,
    opts: &RunOptions,
    p: &Position,
    tx: &mpsc::Sender<SourceEvent>,
) -> Result<Option<(SchemaHistory, ReadFrom)>, SourceError> {
    let mut history = match opts.state_dir.as_deref() {
        Some(d) => SchemaHistory::load(d, p)?,
        None => None,
    }
    .ok_or_else(|| {
        SourceError::Schema(format!(
            "no stored schema history to resume at {p}: resuming needs the state folder of the run that produced the position"
        ))
    })?;
    // Tables that match the table list now but did not before: a snapshot of them
    // alone, then the binlog for all. A table the last run's list matched too is not
    // new, whatever its name was then: one a DDL created or renamed (before the
    // resume point) comes from the binlog like every other (a snapshot of it at a
    // later point, under its definition at the resume point, read columns a later
    // DDL had changed: found by the fuzzer).
    let dir = opts.state_dir.as_deref();
    if let Some(before) = dir.and_then(load_captured) {
        let old_list = dir.and_then(load_patterns).map(|tables| Source {
            tables,
            ..(**src).clone()
        });
        let now = captured_tables(src, &history);
        let new: Vec<_> = now
            .iter()
            .filter(|t| match &old_list {
                Some(old) => !old.captures(&t.0, &t.1),
                None => !before.contains(t),
            })
            .cloned()
            .collect();
        if !new.is_empty() {
            match snapshot::snapshot(
                src,
                tx,
                opts.state_dir.as_deref(),
                snapshot::Scope::Only(new, p.clone()),
                Some(history),
            )
            .await?
            {
                Some((_, h)) => history = h,
                None => return Ok(None),
            }
        }
    }
    let from = if opts.by_gtid && !p.gtid.is_empty() && p.ordinal == 0 {
        ReadFrom::Gtid(p.gtid.clone())
    } else {
        // Inside a transaction a GTID resume would restart it; skipping what was
        // delivered needs its file offset, so resume by position.
        ReadFrom::Position(p.clone())
    };
    Ok(Some((history, from)))
}

/// A start without a snapshot (`latest`, a GTID, a position): the schema as of now.
async fn start_at(
    src: &Arc<Source>,
    opts: &RunOptions,
    start: &Start,
) -> Result<(SchemaHistory, ReadFrom), SourceError> {
    let mut conn = mysql_async::Conn::new(src.opts())
        .await
        .map_err(|e| SourceError::connect(&src.at(), e))?;
    let here = snapshot::current_position(&mut conn).await?;
    let (defs, unread) =
        snapshot::read_definitions(&mut conn, |db, name| src.describes(db, name)).await?;
    let charsets = snapshot::read_charsets(&mut conn).await?;
    let _ = conn.disconnect().await;
    let p = match start {
        Start::Position(p) => p.clone(),
        _ => here.clone(),
    };
    let history = SchemaHistory::create(
        opts.state_dir.as_deref(),
        &p,
        defs.into_iter().map(|(db, _, _, ddl)| (db, ddl)).collect(),
        unread,
        charsets,
    )?;
    let from = match start {
        Start::Gtid(g) => ReadFrom::Gtid(g.clone()),
        _ => ReadFrom::Position(p),
    };
    Ok((history, from))
}

/// The name this reader registers with on the server (`SHOW SLAVE HOSTS` lists it
/// as its host): one per state folder, so preflight tells this job's own earlier
/// connection (killed, not yet gone) from another reader that uses its server-id.
pub fn replica_name(state_dir: Option<&std::path::Path>) -> String {
    let Some(dir) = state_dir else {
        return "lakeshift".into();
    };
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
    // FNV-1a: stable across builds and platforms.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in dir.to_string_lossy().as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("lakeshift-{h:016x}")
}

/// Follow the binlog (re-snapshotting on a purged resume point when asked).
async fn follow(
    src: &Arc<Source>,
    opts: &RunOptions,
    mut history: SchemaHistory,
    mut from: ReadFrom,
    tx: mpsc::Sender<SourceEvent>,
) -> Result<(), SourceError> {
    loop {
        let mut reader = BinlogReader::new(src.clone(), history, tx.clone());
        reader.replica_name = replica_name(opts.state_dir.as_deref());
        reader.seen = opts
            .state_dir
            .as_deref()
            .and_then(snapshot::SeenBySnapshot::load);
        match reader.run(from.clone(), opts.stop_at_end).await {
            Err(e @ (SourceError::Purged { .. } | SourceError::CutOff { .. }))
                if src.binlog().purged_resume == PurgedPolicy::Resnapshot =>
            {
                tracing::warn!("{e}; taking a new snapshot (purged-resume: resnapshot)");
                match snapshot::snapshot(
                    src,
                    &tx,
                    opts.state_dir.as_deref(),
                    snapshot::Scope::All,
                    None,
                )
                .await?
                {
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
