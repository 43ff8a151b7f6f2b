//! One pipeline for every source and sink: the event loop of `lakeshift sync`.
//!
//! The pipeline owns what does not depend on where changes come from or go to:
//! starting the [`Source`] at the sink's resume point, reconnecting with back-off
//! when the source connection is lost, transaction boundaries (where a checkpoint
//! may be taken), the snapshot cursor, interval and quiet-source checkpoints, the
//! memory budget, the DDL barrier and its time limit, stopping on SIGTERM with what
//! was read committed, progress lines and metrics. A [`Sink`] folds changes, runs
//! DDL and makes checkpoints durable, exactly once; it never sees the source.
//!
//! Dependency rule: `source` knows neither the pipeline nor a sink; sinks know the
//! pipeline's [`Sink`] trait and the source's event types, never each other; only
//! this module (and `main`) joins a source to a sink.

use super::error::Result;
use super::job::SyncJob;
use super::metrics::{now_ms, Metrics, ProgressClock};
use super::route::Router;
use crate::source::decode::SourceTable;
use crate::source::position::Position;
use crate::source::snapshot::SnapshotResume;
use crate::source::{Acknowledged, Message, Resume, RowBatch, Source, SourceEvent};
use arrow_array::RecordBatch;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// A DDL as the sink receives it.
pub struct Ddl<'a> {
    /// Just after the DDL.
    pub position: &'a Position,
    /// Where the source is complete before the DDL: every transaction before it has
    /// ended (the source may not have sent their `Commit` yet).
    pub before: Position,
    pub sql: &'a str,
    pub changes: &'a [ddl_core::SchemaChange],
    /// The touched tables' definitions after the DDL.
    pub after: &'a [ddl_core::Table],
}

/// What a sink reports for progress lines and metrics.
#[derive(Debug, Clone, Default)]
pub struct SinkStatus {
    pub rows: u64,
    pub commits: u64,
    pub ddls: u64,
    pub checkpoint: u64,
    /// Kafka: partitions the sink has seen.
    pub partitions: usize,
}

/// A target the pipeline writes into: Iceberg tables, a relational database.
///
/// Changes are folded into pending state until [`Sink::checkpoint`] makes them
/// durable together with the resume point, exactly once (a sink that is killed at
/// any point and reopened resumes from a point that neither loses nor repeats a
/// change). A sink may commit on its own between checkpoints (a DDL barrier, memory
/// pressure) if its resume rules keep that exact.
#[allow(async_fn_in_trait)]
pub trait Sink {
    /// Finish what a crash interrupted and say where the source resumes.
    async fn prepare(&mut self) -> Result<Resume>;

    /// Parked DDL a person released while the job was stopped or since.
    fn resolutions_waiting(&self) -> bool;

    /// Row changes of a binlog transaction (`snapshotting`: a snapshot is under way).
    async fn rows(&mut self, b: RowBatch, snapshotting: bool) -> Result<()>;

    /// A Kafka message: applied unless the sink holds its offset already.
    async fn message(&mut self, m: Message) -> Result<()>;

    /// A snapshot reads `table` again from its start: what the target holds of it is
    /// replaced (the next commit of the table removes every row committed before,
    /// atomically with the rows that follow). Not called when a table read before in
    /// this snapshot routes into the same target table.
    async fn replace(&mut self, table: &Arc<SourceTable>, at: &Position) -> Result<()>;
    /// Snapshot rows of one chunk (inserts) read at `at`.
    async fn snapshot_rows(
        &mut self,
        table: &Arc<SourceTable>,
        rows: RecordBatch,
        at: &Position,
    ) -> Result<()>;

    /// A DDL: what was read of its tables commits first, then the target changes.
    async fn schema(&mut self, ddl: Ddl<'_>) -> Result<()>;

    /// A DDL the source could not parse: recorded as skipped with the reason.
    fn skipped(
        &mut self,
        position: &Position,
        sql: &str,
        tables: Vec<String>,
        why: Option<String>,
    ) -> Result<()>;

    /// Commit everything pending with the resume point `at` (None: unchanged; Kafka
    /// sinks keep offsets of their own) or the snapshot's progress.
    async fn checkpoint(
        &mut self,
        at: Option<Position>,
        snapshot: Option<SnapshotResume>,
    ) -> Result<()>;

    /// Changes read and not yet committed (rows, offsets, held changes).
    fn has_pending(&self) -> bool;

    /// A checkpoint the sink committed in the background is done (or failed): after
    /// this, `position` is what the target holds.
    async fn settle(&mut self) -> Result<()> {
        Ok(())
    }

    /// Pending changes past the job's `memory-budget-mib`.
    fn over_budget(&self) -> bool;

    /// Pending changes past half of what [`Sink::over_budget`] allows: at a source
    /// transaction boundary they commit there, so the budget is reached inside a
    /// transaction (which commits it in part) only by a transaction holding half of
    /// it or more, never by a small one arriving on top of many.
    fn near_budget(&self) -> bool {
        false
    }

    /// Bring pending changes under the budget (`read_to`: just after the last row
    /// read; `snapshotting`: a snapshot is under way).
    async fn relieve(&mut self, read_to: Option<Position>, snapshotting: bool) -> Result<()>;

    /// The source starts again (reconnect, rebalance): per-partition offsets the sink
    /// cached must be read again.
    fn source_restarted(&mut self);

    /// Offsets committed since the last call (the source acknowledges them).
    fn take_acks(&mut self) -> Acknowledged;

    /// When the last checkpoint was taken.
    fn last_checkpoint(&self) -> Instant;
    /// Called often while the job runs: a sink that holds a lease on the job renews
    /// it when due (an error: another process owns the job now).
    async fn keep_alive(&mut self) -> Result<()> {
        Ok(())
    }
    /// The job stops cleanly: a lease on it is given up.
    async fn stopped(&mut self) -> Result<()> {
        Ok(())
    }

    /// Counters, read on every turn of the loop (cheap).
    fn status(&self) -> SinkStatus;

    /// Where the source resumes after the last checkpoint.
    fn position(&self) -> Option<Position>;
}

/// Where the reading stands, between events.
#[derive(Default)]
struct Cursor {
    /// The last transaction boundary read.
    boundary: Option<Position>,
    /// Just after the last row read (binlog sources), at the end of a complete
    /// delivery (see [`RowBatch::complete`]).
    read_to: Option<Position>,
    /// Just after the furthest row of a delivery whose batches are still coming:
    /// rows of other batches of it may lie before that point, so it is no place to
    /// commit or stop at.
    reading: Option<Position>,
    /// The snapshot under way.
    snapshot: Option<SnapshotResume>,
    /// Sets over its table lists (they hold every table of a job of many).
    snapshot_index: SnapshotIndex,
    /// Whether the last event ended a transaction (a checkpoint may be taken).
    at_boundary: bool,
    /// Whether the source has sent anything in this run.
    heard: bool,
}

impl Cursor {
    /// Whether rows were read past `point` (None: the start), i.e. into a source
    /// transaction that has not ended there.
    fn read_past(&self, point: Option<&Position>) -> bool {
        self.read_to
            .as_ref()
            .is_some_and(|r| point.is_none_or(|p| r > p))
    }
}

/// Hash sets over a snapshot's `started` and `done` lists, and how many started
/// tables route into each target table, kept up to date as the lists grow, so that a
/// snapshot of many tables costs the same per table at its end as at its start.
#[derive(Default)]
struct SnapshotIndex {
    started_seen: usize,
    done_seen: usize,
    started: HashSet<(String, String)>,
    done: HashSet<(String, String)>,
    targets: HashMap<(String, String), usize>,
}

impl SnapshotIndex {
    /// Take in what the lists gained since the last call (all of them for a new
    /// snapshot or one read back from the state).
    fn sync(&mut self, sr: &SnapshotResume, router: &Router) {
        if self.started_seen > sr.started.len() || self.done_seen > sr.done.len() {
            *self = SnapshotIndex::default();
        }
        for t in &sr.started[self.started_seen..] {
            if self.started.insert(t.clone()) {
                *self.targets.entry(target(router, t)).or_default() += 1;
            }
        }
        self.done.extend(sr.done[self.done_seen..].iter().cloned());
        self.started_seen = sr.started.len();
        self.done_seen = sr.done.len();
    }

    /// Whether a table other than `this`, begun earlier, routes into `this`'s target.
    fn shares_target(&self, this: &(String, String), router: &Router) -> bool {
        let n = self
            .targets
            .get(&target(router, this))
            .copied()
            .unwrap_or(0);
        n > usize::from(self.started.contains(this))
    }
}

/// The target table a source table lands in.
fn target(router: &Router, (db, table): &(String, String)) -> (String, String) {
    let r = router.route(db, table);
    (r.db, r.table)
}

/// Where a binlog job commits what it read before it stops or reconnects: just
/// after the last row read while its transaction is open (a resume re-reads that
/// transaction and skips what was delivered), else the last boundary. None: nothing
/// to commit (nothing pending, and the position would not move).
fn drain_point(
    pending: bool,
    cur: &Cursor,
    committed: Option<&Position>,
) -> Option<Option<Position>> {
    let at = if pending && cur.read_past(cur.boundary.as_ref()) {
        cur.read_to.clone()
    } else {
        cur.boundary.clone()
    };
    let moved = at.as_ref().is_some_and(|a| committed.is_none_or(|p| p < a));
    (pending || moved).then_some(at)
}

/// How long a stop waits for the end of a source transaction read in part.
const STOP_WAIT: Duration = Duration::from_secs(5);

/// A DDL barrier is given up after this many barrier time limits.
const BARRIER_GIVE_UP: u32 = 10;

/// A source joined to a sink.
pub struct Pipeline<S: Sink> {
    pub sink: S,
    source: Box<dyn Source>,
    /// Source events that may wait for the sink (their share of the memory budget).
    queue: usize,
    interval: Duration,
    barrier_limit: Duration,
    progress_seconds: f64,
    /// Set to stop after committing what was read (SIGTERM, Ctrl-C).
    pub stop: Arc<AtomicBool>,
    pub metrics: Arc<Metrics>,
    clock: ProgressClock,
    /// The table being snapshotted: (name, rows read, estimated rows).
    snapshot_progress: Option<(String, u64, u64)>,
    checkpoint_seen: u64,
    /// The job's routes (a snapshot asks which target a table lands in).
    router: Router,
    /// `pipeline.source-connect-seconds`.
    source_connect_seconds: f64,
}

impl<S: Sink> Pipeline<S> {
    pub fn new(job: &SyncJob, sink: S) -> Self {
        let source = crate::source::open(
            Arc::new(job.source.clone()),
            job.pipeline.state.join("source"),
        );
        let interval = Duration::from_secs_f64(job.pipeline.checkpoint_interval_seconds);
        let batch = match &job.source.kind {
            crate::source::config::SourceKind::Binlog(b) => b.batch_bytes,
            crate::source::config::SourceKind::Kafka(_) => 64 * 1024,
            crate::source::config::SourceKind::Postgres(p) => p.batch_bytes,
        };
        Pipeline {
            sink,
            source,
            router: job.router.clone(),
            queue: job.pipeline.in_flight(batch).1,
            interval,
            barrier_limit: (interval * job.pipeline.barrier_timeout_intervals.max(1))
                .max(Duration::from_secs(5)),
            progress_seconds: job.pipeline.progress_seconds,
            source_connect_seconds: job.pipeline.source_connect_seconds,
            stop: Arc::new(AtomicBool::new(false)),
            metrics: Metrics::new(),
            clock: ProgressClock::new(),
            snapshot_progress: None,
            checkpoint_seen: 0,
        }
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    fn due(&self) -> bool {
        self.sink.last_checkpoint().elapsed() >= self.interval
    }

    /// Run until the source ends (`until_end`), fails, or a stop is asked for. A lost
    /// connection to the source (server restarted, network) is retried with back-off
    /// from the last checkpoint, with what was read so far committed first.
    pub async fn run(&mut self, until_end: bool) -> Result<()> {
        self.run_to_end(until_end).await?;
        // The source hears of the last commit (a PostgreSQL slot releases its WAL).
        if let Some(p) = self.sink.position() {
            self.source.committed(&p);
        }
        self.source.close().await;
        // A clean stop: whatever the sink holds on the job is given up.
        self.sink.stopped().await
    }

    async fn run_to_end(&mut self, until_end: bool) -> Result<()> {
        let resume = self.sink.prepare().await?;
        let mut cur = Cursor {
            snapshot: resume.snapshot.clone(),
            ..Default::default()
        };
        // Parked DDL released while the job was stopped: replayed before anything else.
        if cur.snapshot.is_none() && self.sink.resolutions_waiting() {
            self.checkpoint(resume.position.clone(), None).await?;
        }
        let mut retries = 0u32;
        let started = Instant::now();
        let connect_for = Duration::from_secs_f64(self.source_connect_seconds);
        // After a lost source connection: where reading stopped (what was read of
        // an open transaction stays pending, uncommitted).
        let mut read_on_from: Option<Position> = None;
        loop {
            // Source batches waiting for the sink: within their share of the budget.
            let (tx, mut rx) = mpsc::channel(self.queue);
            let from = Resume {
                position: read_on_from.take().or_else(|| self.sink.position()),
                snapshot: cur.snapshot.clone(),
            };
            self.sink.source_restarted();
            let task = self.source.start(from, until_end, tx);
            let rows_before = self.sink.status().rows;
            let res = self.consume(&mut rx, &mut cur).await;
            drop(rx);
            let src_res = task.await.map_err(|e| e.to_string())?;
            res?;
            // Ended inside a delivery: the source's own error says why.
            let src_res = match src_res {
                Err(e) if cur.reading.is_some() => return Err(e.into()),
                r => r,
            };
            // A lost connection between snapshot chunks or Kafka messages: what was
            // read commits (those have no source transactions to cut). Else it stays
            // pending and the source is read on from just after it: committing it
            // now could cut a source transaction, and a reader would see part of it.
            let reconnect = !self.stopping()
                && cur.snapshot.is_none()
                && !self.source.by_offsets()
                && matches!(&src_res, Err(e) if e.transient() && retries < e.retries());
            if let (true, Err(e)) = (reconnect, &src_res) {
                self.metrics
                    .set_not_ready(format!("the source connection was lost: {e}"));
            }
            let keep = reconnect && {
                let pending = self.sink.has_pending();
                let committed = self.sink.position();
                read_on_from = drain_point(pending, &cur, committed.as_ref()).flatten();
                read_on_from.is_some() || !pending
            };
            // The source failed inside a transaction (a binlog cut off by a crash,
            // rows that do not decode, no more reconnects): nothing read since the
            // last checkpoint commits, since the rest of that transaction may never
            // come (a server that crashed while writing it rolled it back); the next
            // run reads again from the last checkpoint.
            let cut = !reconnect
                && src_res.is_err()
                && cur.snapshot.is_none()
                && !self.source.by_offsets()
                && self.sink.has_pending()
                && cur.read_past(cur.boundary.as_ref());
            if cut {
                use crate::sync::error::{ErrorKind, SyncError};
                let Err(e) = src_res else {
                    unreachable!("a cut needs an error")
                };
                let e = SyncError::from(e);
                // (A lost connection out of retries is no longer transient here.)
                let kind = match e.kind {
                    ErrorKind::Transient => ErrorKind::Definite,
                    k => k,
                };
                // A transaction commits in parts when it is larger than the memory
                // budget, holds a DDL (PostgreSQL), or a stop did not wait for its
                // end: a checkpoint inside it holds part of it already.
                let part = match self.sink.position() {
                    Some(p) if p.ordinal > 0 => format!(
                        "; but checkpoint {} already holds {} change(s) of that transaction (committed in parts: a transaction larger than the memory budget, one holding a DDL, or one a stop did not wait for): if the source rolled it back, the target keeps them, and only a new snapshot (purged-resume: resnapshot) makes the target equal to the source again",
                        self.sink.status().checkpoint,
                        p.ordinal
                    ),
                    _ => String::new(),
                };
                return Err(SyncError::new(
                    kind,
                    format!(
                        "{}\nreading the source failed inside a transaction (the error above): nothing read since checkpoint {} was committed (the rest of that transaction may never come){part}",
                        e.message,
                        self.sink.status().checkpoint
                    ),
                ));
            }
            if !keep {
                // Everything read is committed before a stop, an end or a reconnect.
                self.drain(&cur).await?;
            }
            if self.stopping() {
                return Ok(());
            }
            match src_res {
                Ok(()) => return Ok(()),
                // A source this run never heard from is tried for a while only.
                Err(e) if e.transient() && !cur.heard && started.elapsed() >= connect_for => {
                    return Err(crate::sync::error::SyncError::new(
                        crate::sync::error::ErrorKind::NeedsFix,
                        format!(
                            "the source did not answer in {:.0} s since the job started ({} attempts): {e}; check source.hostname and source.port, that the server runs and that the network lets this host reach it (pipeline.source-connect-seconds sets how long a run tries)",
                            started.elapsed().as_secs_f64(),
                            retries + 1
                        ),
                    ))
                }
                Err(e) if e.transient() && retries < e.retries() => {
                    if self.sink.status().rows > rows_before {
                        retries = 0;
                    }
                    retries += 1;
                    tracing::warn!(
                        "source connection lost ({e}); retrying from {} (attempt {retries})",
                        read_on_from
                            .clone()
                            .or_else(|| self.sink.position())
                            .map(|p| p.to_string())
                            .unwrap_or_else(|| "the start".into())
                    );
                    // What is pending was read up to these points (kept with it);
                    // else everything read was committed.
                    if !keep {
                        cur.boundary = None;
                        cur.read_to = None;
                        cur.reading = None;
                    }
                    tokio::time::sleep(Duration::from_millis(250 * u64::from(retries.min(8))))
                        .await;
                }
                // Retried as long as the source allows: the job stops (a lost target
                // connection, by contrast, starts the job again).
                Err(e) if e.transient() => {
                    return Err(crate::sync::error::SyncError::new(
                        crate::sync::error::ErrorKind::Definite,
                        e.to_string(),
                    ))
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Commit what was read: up to the last row read if its transaction is not
    /// complete (a resume skips what was delivered of it), else to the boundary.
    async fn drain(&mut self, cur: &Cursor) -> Result<()> {
        // The committed position is the one to compare with.
        self.sink.settle().await?;
        if let Some(r) = &cur.reading {
            // The source ended inside a delivery: what was taken of it lies on both
            // sides of the last complete point, so nothing may commit (the sink's
            // pending changes hold part of it); the next run reads again from the
            // last checkpoint.
            return Err(format!(
                "the source ended inside a delivery (rows up to {r} read in part); nothing read since checkpoint {} was committed, and the next run reads it again",
                self.sink.status().checkpoint
            )
            .into());
        }
        self.drain_to(cur).await?;
        // Done before the source starts again or the job stops.
        self.sink.settle().await?;
        self.acknowledge();
        Ok(())
    }

    async fn drain_to(&mut self, cur: &Cursor) -> Result<()> {
        if self.source.by_offsets() {
            if self.sink.has_pending() {
                self.checkpoint(None, None).await?;
            }
            return Ok(());
        }
        if cur.snapshot.is_some() {
            if self.sink.has_pending() {
                let s = cur.snapshot.clone();
                self.checkpoint(None, s).await?;
            }
            return Ok(());
        }
        let pending = self.sink.has_pending();
        let committed = self.sink.position();
        if let Some(at) = drain_point(pending, cur, committed.as_ref()) {
            self.checkpoint(at, None).await?;
        }
        Ok(())
    }

    async fn checkpoint(
        &mut self,
        at: Option<Position>,
        snapshot: Option<SnapshotResume>,
    ) -> Result<()> {
        let t0 = Instant::now();
        self.sink.checkpoint(at, snapshot).await?;
        crate::malloc::trim();
        self.metrics
            .commit_micros
            .fetch_add(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
        self.acknowledge();
        Ok(())
    }

    /// Offsets the sink committed go back to the source.
    fn acknowledge(&mut self) {
        let acks = self.sink.take_acks();
        if !acks.is_empty() {
            self.source.acknowledge(acks);
        }
        if let Some(p) = self.sink.position() {
            self.source.committed(&p);
        }
    }

    async fn consume(
        &mut self,
        rx: &mut mpsc::Receiver<SourceEvent>,
        cur: &mut Cursor,
    ) -> Result<()> {
        let mut stop_seen: Option<Instant> = None;
        loop {
            // A stop waits for the rest of a delivery (its batches are on their way),
            // and for the end of a source transaction read in part (most end within
            // milliseconds), so the state it commits is the source at a transaction
            // boundary; one that does not end within STOP_WAIT commits in part.
            if self.stopping() && cur.reading.is_none() {
                let open = !self.source.by_offsets()
                    && cur.snapshot.is_none()
                    && cur.read_past(cur.boundary.as_ref());
                let since = *stop_seen.get_or_insert_with(Instant::now);
                if !open {
                    return Ok(());
                }
                if since.elapsed() >= STOP_WAIT {
                    tracing::warn!(
                        "stopping inside a source transaction that did not end within {} s: what was read of it commits, and the next run reads the rest",
                        STOP_WAIT.as_secs()
                    );
                    return Ok(());
                }
            }
            self.progress().await;
            self.sink.keep_alive().await?;
            // What the sink committed since the last turn (at checkpoints, on its own,
            // or in the background) reaches the source.
            self.acknowledge();
            let wait = self.interval.min(Duration::from_millis(250));
            let e = match tokio::time::timeout(wait, rx.recv()).await {
                Ok(Some(e)) => e,
                Ok(None) => return Ok(()),
                Err(_) => {
                    self.quiet(cur).await?;
                    continue;
                }
            };
            cur.heard = true;
            self.metrics.set_ready();
            cur.at_boundary = matches!(
                e,
                SourceEvent::Commit { .. }
                    | SourceEvent::Heartbeat { .. }
                    | SourceEvent::SnapshotDone { .. }
                    | SourceEvent::Schema { .. }
                    | SourceEvent::Message(_)
                    | SourceEvent::Rebalanced
            );
            self.event(e, cur).await?;
        }
    }

    /// A quiet source: what is pending commits at the last boundary.
    async fn quiet(&mut self, cur: &Cursor) -> Result<()> {
        if !self.due() || !cur.at_boundary || cur.snapshot.is_some() {
            return Ok(());
        }
        if !self.sink.has_pending() && !self.sink.resolutions_waiting() {
            return Ok(());
        }
        if self.source.by_offsets() {
            return self.checkpoint(None, None).await;
        }
        match cur.boundary.clone() {
            Some(b) => self.checkpoint(Some(b), None).await,
            // Nothing read since the last checkpoint: its position stands.
            None if !self.sink.has_pending() => {
                let p = self.sink.position();
                self.checkpoint(p, None).await
            }
            None => Ok(()),
        }
    }

    async fn event(&mut self, e: SourceEvent, cur: &mut Cursor) -> Result<()> {
        match e {
            SourceEvent::SnapshotRows {
                table,
                rows,
                cursor,
                position,
                done,
                estimate,
                fresh,
            } => {
                let name = format!("{}.{}", table.db, table.name);
                self.metrics
                    .snapshot_rows
                    .fetch_add(rows.num_rows() as u64, Ordering::Relaxed);
                *self.metrics.snapshot.lock().unwrap() = Some((name.clone(), done, estimate));
                self.snapshot_progress = Some((name, done, estimate));
                if fresh {
                    // Unless a table begun before in this snapshot feeds the same
                    // target (this one does not count, when a resume reads it again
                    // from its start).
                    let this = (table.db.clone(), table.name.clone());
                    let shared = match &cur.snapshot {
                        Some(sr) => {
                            cur.snapshot_index.sync(sr, &self.router);
                            cur.snapshot_index.shares_target(&this, &self.router)
                        }
                        None => false,
                    };
                    if !shared {
                        self.sink.replace(&table, &position).await?;
                    }
                }
                self.sink.snapshot_rows(&table, rows, &position).await?;
                self.snapshot_cursor(&table, cursor, position, cur).await?;
            }
            SourceEvent::SnapshotDone {
                position,
                tables,
                rows,
            } => {
                cur.snapshot = None;
                self.snapshot_progress = None;
                *self.metrics.snapshot.lock().unwrap() = None;
                self.checkpoint(Some(position.clone()), None).await?;
                tracing::info!(
                    "snapshot done and committed: {tables} table(s), {rows} row(s); following changes from {position}"
                );
                cur.boundary = Some(position);
            }
            SourceEvent::Rows(b) => {
                // A batch can be empty (a resume inside a transaction skips what
                // was delivered of it), and still end its delivery.
                let end = b.num_rows().checked_sub(1).map(|l| b.position_after(l));
                let end = match (cur.reading.take(), end) {
                    (Some(r), Some(e)) => Some(r.max(e)),
                    (r, e) => r.or(e),
                };
                if !b.complete {
                    cur.reading = end;
                } else if end.is_some() {
                    cur.read_to = end;
                }
                if b.num_rows() == 0 {
                    return Ok(());
                }
                let snapshotting = cur.snapshot.is_some();
                self.metrics.table_rows(
                    &format!("{}.{}", b.table.db, b.table.name),
                    b.num_rows() as u64,
                );
                self.sink.rows(b, snapshotting).await?;
                if cur.reading.is_none() && self.sink.over_budget() {
                    self.sink.relieve(cur.read_to.clone(), snapshotting).await?;
                    crate::malloc::trim();
                }
            }
            SourceEvent::Message(m) => {
                for b in &m.rows {
                    self.metrics.table_rows(
                        &format!("{}.{}", b.table.db, b.table.name),
                        b.num_rows() as u64,
                    );
                }
                self.sink.message(m).await?;
                if self.due() || self.sink.over_budget() {
                    self.checkpoint(None, None).await?;
                }
            }
            SourceEvent::Rebalanced => {
                // What was read commits under the old assignment; each partition's
                // offset is read again.
                if self.sink.has_pending() {
                    self.checkpoint(None, None).await?;
                }
                self.sink.source_restarted();
            }
            SourceEvent::Schema {
                position,
                ddl,
                changes,
                notes,
                tables,
                ..
            } if crate::source::unparsed_reason(&changes, &notes).is_some() => {
                // A DDL the source could not parse (ddl-error-policy: skip).
                let why = crate::source::unparsed_reason(&changes, &notes).map(str::to_owned);
                self.sink.skipped(&position, &ddl, tables, why)?;
                self.metrics.ddl_skipped.fetch_add(1, Ordering::Relaxed);
                cur.boundary = Some(position);
            }
            SourceEvent::Schema {
                position,
                changes,
                after,
                ddl,
                ..
            } => {
                self.schema(&position, &ddl, &changes, &after, cur).await?;
                cur.boundary = Some(position);
            }
            SourceEvent::RowsRemoved {
                position,
                db,
                table,
                ddl,
            } => {
                return Err(format!(
                    "{db}.{table} lost rows without row events at {position} ({ddl}); the target cannot follow: take a new snapshot ({})",
                    crate::source::NEW_SNAPSHOT
                )
                .into());
            }
            SourceEvent::Commit { position, at } => {
                // Lag: how far the source's commit time is behind now.
                let lag = now_ms() / 1000 - i64::from(at);
                self.metrics
                    .lag_seconds
                    .store(lag.max(0), Ordering::Relaxed);
                self.boundary(position, cur).await?;
            }
            SourceEvent::Heartbeat { position } => self.boundary(position, cur).await?,
        }
        Ok(())
    }

    /// A snapshot chunk was read: its cursor moves; a checkpoint when due.
    async fn snapshot_cursor(
        &mut self,
        table: &SourceTable,
        cursor: Option<crate::source::snapshot::Cursor>,
        position: Position,
        cur: &mut Cursor,
    ) -> Result<()> {
        let sr = cur.snapshot.get_or_insert_with(|| SnapshotResume {
            position,
            done: Vec::new(),
            cursor: None,
            started: Vec::new(),
        });
        // A chunk of another table: the one before it is done (keyless tables too,
        // which have no cursor: a resume must not read them again).
        let ix = &mut cur.snapshot_index;
        ix.sync(sr, &self.router);
        let this = (table.db.clone(), table.name.clone());
        if let Some(prev) = sr.started.last().filter(|p| **p != this).cloned() {
            if !ix.done.contains(&prev) {
                sr.done.push(prev);
                ix.sync(sr, &self.router);
            }
        }
        if let Some(c) = &sr.cursor {
            let k = (c.db.clone(), c.table.clone());
            if k != this && !ix.done.contains(&k) {
                sr.done.push(k);
                ix.sync(sr, &self.router);
            }
        }
        if !ix.started.contains(&this) {
            sr.started.push(this);
            ix.sync(sr, &self.router);
        }
        sr.cursor = cursor;
        if self.due() || self.sink.over_budget() {
            let s = cur.snapshot.clone();
            self.checkpoint(None, s).await?;
            crate::failpoint::hit("mid-snapshot");
        }
        Ok(())
    }

    /// A DDL through the sink, within the barrier's time limit.
    async fn schema(
        &mut self,
        position: &Position,
        ddl: &str,
        changes: &[ddl_core::SchemaChange],
        after: &[ddl_core::Table],
        cur: &mut Cursor,
    ) -> Result<()> {
        let start = Position {
            ordinal: 0,
            ..position.clone()
        };
        let before = cur.boundary.take().filter(|b| *b > start).unwrap_or(start);
        // A DDL between transactions is a checkpoint first: its barrier then commits
        // nothing, and no catalog state holds the tables it touches after it while
        // other tables lag behind it (a reader saw a transaction of several tables
        // in part). A DDL inside a source transaction (PostgreSQL allows it) keeps
        // the barrier of its own tables. That checkpoint is part of the barrier (its
        // time limit and report).
        let checkpoint_first = !cur.read_past(Some(&before))
            && cur.reading.is_none()
            && cur.snapshot.is_none()
            && !self.source.by_offsets()
            && self.sink.has_pending();
        let at = before.clone();
        let d = Ddl {
            position,
            before,
            sql: ddl,
            changes,
            after,
        };
        // A slow barrier (its commit waits on a slow object store or catalog) is
        // reported at the limit and waited for; one that cannot complete stops the
        // job with a clear error at ten times the limit. (Stopping at the limit
        // failed jobs whose storage was merely slow, and cut commits off midway.)
        let limit = self.barrier_limit;
        let tables = || {
            changes
                .iter()
                .filter_map(|c| c.table().map(|t| t.to_string()))
                .collect::<Vec<_>>()
        };
        let started = Instant::now();
        let give_up = limit * BARRIER_GIVE_UP;
        let fut = async {
            if checkpoint_first {
                self.checkpoint(Some(at), None).await?;
            }
            self.sink.schema(d).await
        };
        tokio::pin!(fut);
        loop {
            let Ok(r) = tokio::time::timeout(limit, &mut fut).await else {
                if started.elapsed() < give_up {
                    tracing::warn!(
                        "the DDL barrier at {position} is taking {:.0} s (tables {:?}): still committing their changes before the DDL; the job stops if it takes {:.0} s",
                        started.elapsed().as_secs_f64(),
                        tables(),
                        give_up.as_secs_f64()
                    );
                    continue;
                }
                return Err(format!(
                    "the DDL barrier at {position} did not complete within {:.0} s (tables {:?}); nothing of the DDL was applied after its barrier commit\n  statement: {ddl}",
                    started.elapsed().as_secs_f64(),
                    tables()
                )
                .into());
            };
            if started.elapsed() >= limit {
                tracing::info!(
                    "the DDL barrier at {position} completed after {:.1} s",
                    started.elapsed().as_secs_f64()
                );
            }
            return r;
        }
    }

    /// A transaction boundary: a checkpoint when one is due.
    async fn boundary(&mut self, position: Position, cur: &mut Cursor) -> Result<()> {
        cur.boundary = Some(position.clone());
        if self.due() || self.sink.near_budget() {
            self.checkpoint(Some(position), None).await?;
        }
        Ok(())
    }

    /// Every `progress-seconds`: rows/s, lag, last checkpoint, on standard error; the
    /// metrics on every turn.
    async fn progress(&mut self) {
        let st = self.sink.status();
        self.metrics.rows.store(st.rows, Ordering::Relaxed);
        self.metrics.commits.store(st.commits, Ordering::Relaxed);
        self.metrics.ddl_applied.store(st.ddls, Ordering::Relaxed);
        if st.checkpoint != self.checkpoint_seen {
            self.checkpoint_seen = st.checkpoint;
            self.metrics
                .checkpoint
                .store(st.checkpoint, Ordering::Relaxed);
            self.metrics
                .checkpoint_at_ms
                .store(now_ms(), Ordering::Relaxed);
        }
        let Some(rate) = self.clock.due(self.progress_seconds, st.rows) else {
            return;
        };
        let position = self.sink.position();
        let lag = match &position {
            Some(p) => self.source.lag_bytes(p).await.unwrap_or(-1),
            None => -1,
        };
        self.metrics.lag_bytes.store(lag, Ordering::Relaxed);
        if let Some((t, done, est)) = &self.snapshot_progress {
            tracing::info!("progress: snapshot of {t}: {done} of ~{est} rows");
        }
        let at = if self.source.by_offsets() {
            format!("{} partition(s)", st.partitions)
        } else {
            format!(
                "position {}",
                position
                    .as_ref()
                    .map(|p| p.to_string())
                    .unwrap_or_else(|| "-".into())
            )
        };
        tracing::info!(
            "progress: {} row changes ({rate:.0}/s), {} DDL, checkpoint {} ({:.1} s ago), {at}, {} lag {}",
            st.rows,
            st.ddls,
            st.checkpoint,
            self.sink.last_checkpoint().elapsed().as_secs_f64(),
            self.source.name(),
            if lag < 0 {
                "unknown".to_owned()
            } else {
                format!("{lag} bytes")
            }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(offset: u64, ordinal: u64) -> Position {
        let mut p = Position::new("bin.000001", offset);
        p.ordinal = ordinal;
        p
    }

    fn cur(boundary: Option<Position>, read_to: Option<Position>) -> Cursor {
        Cursor {
            boundary,
            read_to,
            ..Default::default()
        }
    }

    #[test]
    fn what_was_read_commits_at_the_last_row_while_its_transaction_is_open() {
        // Rows of a transaction after the last boundary: committed just after them.
        let c = cur(Some(pos(100, 0)), Some(pos(200, 3)));
        assert_eq!(
            drain_point(true, &c, Some(&pos(50, 0))),
            Some(Some(pos(200, 3)))
        );
        // The transaction ended after its rows: the boundary.
        let c = cur(Some(pos(300, 0)), Some(pos(200, 3)));
        assert_eq!(drain_point(true, &c, None), Some(Some(pos(300, 0))));
        // Nothing pending but the boundary moved (heartbeats, DDL): the position
        // alone moves, never back to where the last row was.
        assert_eq!(
            drain_point(false, &c, Some(&pos(100, 0))),
            Some(Some(pos(300, 0)))
        );
        // Nothing pending, nothing moved: no checkpoint.
        assert_eq!(drain_point(false, &c, Some(&pos(300, 0))), None);
        // Rows read before any boundary of this run.
        let c = cur(None, Some(pos(120, 2)));
        assert_eq!(
            drain_point(true, &c, Some(&pos(100, 0))),
            Some(Some(pos(120, 2)))
        );
        // Nothing read at all.
        assert_eq!(drain_point(false, &cur(None, None), None), None);
    }
}
