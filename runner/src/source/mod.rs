//! The MySQL/MariaDB change source (the patent's S1): a lock-free consistent snapshot,
//! then the binlog, as a stream of typed changes for the engine:
//!
//! - `Rows`: a batch of one table's inserts, updates (before and after images) or
//!   deletes, as Arrow, with each row's position;
//! - `Schema`: a DDL on a captured table, as IR changes, with its position;
//! - `Commit`: a transaction boundary — a safe resume point;
//! - `Truncate`: a table lost its rows without row events;
//! - snapshot progress and completion, and heartbeats.

pub mod binlog;
pub mod config;
pub mod decode;
pub mod history;
pub mod json;
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod kafka_config;
pub mod ordered;
pub mod pg;
pub mod pg_config;
pub mod position;
pub mod preflight;
pub mod run;
pub mod snapshot;

use arrow_array::RecordBatch;
use decode::SourceTable;
use position::Position;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Insert,
    Update,
    Delete,
}

/// A row's place: the transaction (an index into the batch's `txns`) and the row's
/// ordinal among that transaction's changes (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowPos {
    pub txn: u32,
    pub ordinal: u32,
    /// Source time (unix seconds) of the row event.
    pub at: u32,
}

/// Rows of one table and one kind of change.
#[derive(Debug, Clone)]
pub struct RowBatch {
    pub table: Arc<SourceTable>,
    pub op: Op,
    /// Deletes and updates: the row before.
    pub before: Option<RecordBatch>,
    /// Inserts and updates: the row after.
    pub after: Option<RecordBatch>,
    pub positions: Vec<RowPos>,
    /// Start positions of the transactions the rows belong to (shared by the batches
    /// of one flush).
    pub txns: Arc<Vec<Position>>,
    /// Updates: cells of `after` the source did not send because they did not change
    /// (PostgreSQL's unchanged TOAST values of a table whose REPLICA IDENTITY is not
    /// FULL), as (row, column) in row order. Their slots in `after` are NULL; the
    /// row's previous value stays (the sink takes it from what it holds).
    pub unchanged: Vec<(u32, u32)>,
    /// Whether this batch ends its delivery. A source splits what it read by table
    /// and kind of change, so the batches of one delivery interleave: only after the
    /// last of them is every row before the last row read delivered (the position
    /// after it may be committed).
    pub complete: bool,
}

impl RowBatch {
    pub fn num_rows(&self) -> usize {
        self.positions.len()
    }

    /// The rows where `keep` is true (both images and their positions).
    pub fn filter(
        &self,
        keep: &arrow_array::BooleanArray,
    ) -> Result<RowBatch, arrow_schema::ArrowError> {
        let f = |b: &Option<RecordBatch>| {
            b.as_ref()
                .map(|b| arrow_select::filter::filter_record_batch(b, keep))
                .transpose()
        };
        Ok(RowBatch {
            table: self.table.clone(),
            op: self.op,
            before: f(&self.before)?,
            after: f(&self.after)?,
            positions: self
                .positions
                .iter()
                .zip(keep.values().iter())
                .filter_map(|(p, k)| k.then_some(*p))
                .collect(),
            txns: self.txns.clone(),
            complete: self.complete,
            unchanged: if self.unchanged.is_empty() {
                Vec::new()
            } else {
                // Rows renumbered as the filter keeps them.
                let mut new_row = Vec::with_capacity(keep.len());
                let mut n = 0u32;
                for k in keep.values().iter() {
                    new_row.push(k.then_some(n));
                    n += k as u32;
                }
                self.unchanged
                    .iter()
                    .filter_map(|&(r, c)| new_row[r as usize].map(|r| (r, c)))
                    .collect()
            },
        })
    }

    /// The columns of row `row` the source left unchanged (see `unchanged`).
    pub fn unchanged_in(&self, row: usize) -> impl Iterator<Item = usize> + '_ {
        let start = self.unchanged.partition_point(|&(r, _)| (r as usize) < row);
        self.unchanged[start..]
            .iter()
            .take_while(move |&&(r, _)| r as usize == row)
            .map(|&(_, c)| c as usize)
    }

    /// The position just after row `i` (where a resume continues).
    pub fn position_after(&self, i: usize) -> Position {
        let rp = self.positions[i];
        let mut p = self.txns[rp.txn as usize].clone();
        p.ordinal = rp.ordinal as u64;
        p
    }
}

#[derive(Debug, Clone)]
pub enum SourceEvent {
    Rows(RowBatch),
    Schema {
        /// Just after the DDL.
        position: Position,
        db: String,
        ddl: String,
        changes: Vec<ddl_core::SchemaChange>,
        tables: Vec<String>,
        notes: Vec<String>,
        /// The IR definitions of the touched tables after the DDL (dropped ones absent).
        after: Vec<ddl_core::Table>,
    },
    /// Rows of a captured table vanished without row events (TRUNCATE/DROP/EXCHANGE
    /// PARTITION): the sink must drop them (or re-read the table).
    RowsRemoved {
        position: Position,
        db: String,
        table: String,
        ddl: String,
    },
    Commit {
        position: Position,
        /// Source time (unix seconds) of the transaction's commit.
        at: u32,
    },
    Heartbeat {
        position: Position,
    },
    /// Snapshot rows of one chunk of a table (all inserts).
    SnapshotRows {
        table: Arc<SourceTable>,
        rows: RecordBatch,
        /// Rows of the table read so far (this chunk included).
        done: u64,
        /// Estimated rows of the table (information_schema), for progress.
        estimate: u64,
        /// The last key of the chunk (keyed tables): a snapshot resumes after it.
        cursor: Option<snapshot::Cursor>,
        /// The binlog point the snapshot continues from (what a resume passes back).
        position: Position,
        /// The first chunk of a table read from its start by a snapshot of every
        /// captured table (the first, a re-snapshot, or a resumed one): whatever the
        /// target holds of the table is replaced by what follows.
        fresh: bool,
    },
    /// Kafka: one message, whole: its rows (none for a tombstone, a skipped message
    /// or one whose change came as a `Schema` event just before), and where it ends.
    Message(Message),
    /// Kafka: the consumer group reassigned partitions (offsets must be re-read).
    Rebalanced,
    /// The snapshot is complete: the binlog continues from `position`.
    SnapshotDone {
        position: Position,
        tables: usize,
        rows: u64,
    },
}

/// A Kafka message's rows with the offset after it: the unit a sink applies or skips
/// (it holds the offset already) and commits with the partition's new offset.
#[derive(Debug, Clone)]
pub struct Message {
    pub rows: Vec<RowBatch>,
    pub topic: String,
    pub partition: i32,
    /// The partition's offset after this message.
    pub next: i64,
    /// The message's source position.
    pub position: Position,
}

impl Message {
    /// `topic/partition`, as sinks key offsets.
    pub fn part(&self) -> String {
        format!("{}/{}", self.topic, self.partition)
    }
}

/// Where a source starts: a stored position, or an interrupted snapshot to continue
/// (neither: the job's startup mode).
#[derive(Debug, Clone, Default)]
pub struct Resume {
    pub position: Option<Position>,
    pub snapshot: Option<snapshot::SnapshotResume>,
}

/// Offsets a sink committed durably, per (topic, partition): the next offset.
pub type Acknowledged = Vec<(String, i32, i64)>;

/// A change source: started at a resume point, it delivers [`SourceEvent`]s in
/// source order into a channel until it ends (`stop_at_end`), fails, or the channel
/// is closed; it is told what the sink committed. A new source is a new file with
/// an implementation of this trait and an arm in [`open`].
pub trait Source: Send {
    /// What the job's progress lines call it.
    fn name(&self) -> &'static str;

    /// Start reading in a task of its own.
    fn start(
        &mut self,
        from: Resume,
        stop_at_end: bool,
        tx: tokio::sync::mpsc::Sender<SourceEvent>,
    ) -> tokio::task::JoinHandle<Result<(), SourceError>>;

    /// Whether sinks keep the resume point as per-partition offsets (Kafka) rather
    /// than as one source position.
    fn by_offsets(&self) -> bool {
        false
    }

    /// Positions the sink committed durably (Kafka: the group's offsets follow).
    fn acknowledge(&mut self, _done: Acknowledged) {}

    /// The sink committed everything up to `at` (PostgreSQL: the slot may release
    /// the WAL before it).
    fn committed(&mut self, _at: &Position) {}

    /// The job stops cleanly, after its last commit: what the source must still tell
    /// the server (PostgreSQL: the slot's confirmed position).
    fn close(&mut self) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    /// How far the source's end is ahead of `at`, in bytes, if it can tell.
    fn lag_bytes<'a>(
        &'a mut self,
        _at: &'a Position,
    ) -> futures::future::BoxFuture<'a, Option<i64>> {
        Box::pin(async { None })
    }
}

/// The source a job's `source` section names.
pub fn open(config: Arc<config::Source>, state_dir: std::path::PathBuf) -> Box<dyn Source> {
    #[cfg(feature = "kafka")]
    if config.kafka().is_some() {
        return Box::new(kafka::KafkaSource::new(config));
    }
    if config.postgres().is_some() {
        return Box::new(pg::PgSource::new(config, state_dir));
    }
    Box::new(run::BinlogSource::new(config, state_dir))
}

/// A value or row that cannot be decoded: definite (reading it again gives the
/// same), so never retried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(pub String);

impl From<String> for DecodeError {
    fn from(s: String) -> Self {
        DecodeError(s)
    }
}

impl From<&str> for DecodeError {
    fn from(s: &str) -> Self {
        DecodeError(s.to_owned())
    }
}

impl From<DecodeError> for SourceError {
    fn from(e: DecodeError) -> Self {
        SourceError::Decode(e.0)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("cannot connect to the source: {0}")]
    Connect(String),
    #[error("source query failed: {0}")]
    Sql(String),
    #[error("replication protocol: {0}")]
    Protocol(String),
    #[error("decoding rows {0}")]
    Decode(String),
    #[error("schema history: {0}")]
    Schema(String),
    #[error("DDL at {position} cannot be applied: {reason}\n  statement: {ddl}")]
    Ddl {
        position: String,
        ddl: String,
        reason: String,
    },
    #[error("the resume point {position} is no longer in the server's binlog ({detail}); with `purged-resume: resnapshot` the job takes a new snapshot instead")]
    Purged { position: String, detail: String },
    /// The server's binlog ends inside a transaction after the resume point (1236,
    /// "binlog truncated in the middle of event"): the server stopped while
    /// writing that transaction (a crash, a full disk) and rolled it back.
    #[error("the server's binlog is cut off inside a transaction after {position} ({detail}): the source server stopped (a crash or a full disk) while writing that transaction and rolled it back, so it must not reach the target, and the binlog cannot be read past the cut; with `purged-resume: resnapshot` the job takes a new snapshot instead")]
    CutOff { position: String, detail: String },
    #[error("preflight: {0}")]
    Preflight(String),
    /// A change of a captured table logged as a statement (binlog_format STATEMENT or
    /// MIXED): it carries no row images, so it cannot be mirrored.
    #[error("at {position}: a change of the captured table {table} was logged as a statement, not as rows (binlog_format STATEMENT or MIXED, for the server or the session that made it); set binlog_format=ROW, then take a new snapshot ({new}): every run stops here until then\n  statement: {statement}", new = NEW_SNAPSHOT)]
    StatementLogged {
        position: String,
        table: String,
        statement: String,
    },
    /// The server refused the job's credentials or privileges, or the host is
    /// unknown: retrying cannot help.
    #[error("the source refused the connection: {0}")]
    Refused(String),
    /// The connection broke (server restarted or killed the session, network):
    /// reading again from the last checkpoint can fix it.
    #[error("the connection to the source was lost: {0}")]
    Lost(String),
    /// A row event without every column (binlog_row_image MINIMAL or NOBLOB) that
    /// cannot be mirrored exactly.
    #[error("{0}")]
    RowImage(String),
    /// A captured table changed under a read (a DDL after the snapshot's point and
    /// before its read of the table): read again, a few times, from the last
    /// checkpoint, where a resumed snapshot reads tables it had not begun later.
    #[error("a captured table changed while it was read ({0}); if this stays, take a new snapshot ({new})", new = NEW_SNAPSHOT)]
    Changed(String),
}

/// How many of the tables an account can see (`db`/schema, table) the job's table
/// list captures (logged), or why none: a typo in the patterns, or an account that
/// may not read the tables, would otherwise follow nothing, forever.
///
/// A job that resumes (`resuming`) may have seen every captured table dropped: it
/// goes on (a table created later is captured), with a warning.
pub fn captured_count(
    src: &config::Source,
    visible: &[(String, String)],
    user: &str,
    resuming: bool,
) -> Result<usize, String> {
    let captured = visible.iter().filter(|(d, t)| src.captures(d, t)).count();
    if captured > 0 {
        tracing::info!(
            "capturing {captured} table(s) of the {} the source account can see",
            visible.len()
        );
        for p in unmatched_patterns(src, visible) {
            tracing::warn!("{}", unmatched_warning(&p, user));
        }
        return Ok(captured);
    }
    let patterns = config::written_patterns(&src.tables);
    if resuming {
        tracing::warn!(
            "source.tables {patterns:?} matches none of the {} table(s) user {user} can see now (were they all dropped?); following on: tables created later are captured",
            visible.len()
        );
        return Ok(0);
    }
    let (over, grant) = if src.postgres().is_some() {
        (
            "schema.table",
            format!("GRANT SELECT ON ALL TABLES IN SCHEMA <schema> TO {user}"),
        )
    } else {
        ("db.table", format!("GRANT SELECT ON <db>.* TO '{user}'"))
    };
    Err(format!(
        "source.tables {patterns:?} matches none of the {} table(s) user {user} can see: check the patterns (regular expressions over `{over}`, a dot written `\\.`) and that the user may read the tables ({grant})",
        visible.len()
    ))
}

/// The `tables` patterns (as written) that match none of the tables an account can
/// see: a typo, or tables not made yet.
pub fn unmatched_patterns(src: &config::Source, visible: &[(String, String)]) -> Vec<String> {
    let written = config::written_patterns(&src.tables);
    src.tables
        .iter()
        .zip(written)
        .filter(|(r, _)| !visible.iter().any(|(d, t)| r.is_match(&format!("{d}.{t}"))))
        .map(|(_, w)| w.to_owned())
        .collect()
}

/// What is said of a pattern that matches nothing while others match.
pub fn unmatched_warning(pattern: &str, user: &str) -> String {
    format!(
        "source.tables pattern {pattern:?} matches none of the tables user {user} can see (a typo? tables made later that it matches are captured)"
    )
}

/// What `lakeshift check` found at a source: problems (each with its fix), warnings
/// and what holds.
#[derive(Debug, Default)]
pub struct Checked {
    pub problems: Vec<String>,
    pub warnings: Vec<String>,
    pub notes: Vec<String>,
}

/// Whether a client error means the connection itself broke (I/O, closed, the server
/// shutting down or killing the session), as opposed to a refused statement.
fn connection_lost(e: &mysql_async::Error) -> bool {
    match e {
        mysql_async::Error::Io(_) => true,
        mysql_async::Error::Driver(mysql_async::DriverError::ConnectionClosed) => true,
        // ER_SERVER_SHUTDOWN, ER_CONNECTION_KILLED (MariaDB), ER_QUERY_INTERRUPTED.
        mysql_async::Error::Server(s) => [1053, 1927, 1317].contains(&s.code),
        _ => false,
    }
}

impl SourceError {
    /// Whether a reconnect can fix it (the connection was lost, not refused for a
    /// reason that stays).
    pub fn transient(&self) -> bool {
        matches!(
            self,
            SourceError::Connect(_) | SourceError::Lost(_) | SourceError::Changed(_)
        )
    }

    /// How many reads again in a row (without progress) a transient error gets.
    pub fn retries(&self) -> u32 {
        match self {
            SourceError::Changed(_) => 3,
            _ => 60,
        }
    }

    /// A failed connection: refused credentials or privileges (MySQL 1044, 1045,
    /// 1698) are definite; anything else may be an outage and is retried.
    pub fn connect(at: &str, e: mysql_async::Error) -> Self {
        match &e {
            mysql_async::Error::Server(s) if [1044, 1045, 1698].contains(&s.code) => {
                // A fresh MariaDB's anonymous account (''@'localhost') is matched
                // before 'user'@'%' for connections from the server's own host.
                let anonymous = if s.message.contains("@'localhost'") {
                    "; from the server's own host, an anonymous account (''@'localhost', which mariadb-install-db makes) is matched before 'user'@'%': DROP USER ''@'localhost', or make the account 'user'@'localhost' too"
                } else {
                    ""
                };
                SourceError::Refused(format!("{at}: {e} (source.username / password{anonymous})"))
            }
            mysql_async::Error::Io(_) => {
                // The innermost cause ("Connection refused (os error 111)"): the
                // driver's wrappers repeat "Input/output error".
                let mut cause: &dyn std::error::Error = &e;
                while let Some(c) = cause.source() {
                    cause = c;
                }
                SourceError::Connect(format!(
                    "{at}: {cause} (is the server running and listening there? source.hostname, source.port)"
                ))
            }
            _ => SourceError::Connect(format!("{at}: {e}")),
        }
    }

    /// A failed query: a broken connection is `Lost`, anything else `Sql`.
    pub fn sql(e: mysql_async::Error) -> Self {
        if connection_lost(&e) {
            SourceError::Lost(e.to_string())
        } else if let mysql_async::Error::Server(s) = &e {
            // A captured table changed under a read (a DDL after the snapshot's point
            // and before its read of the table: unknown column, no such table, table
            // definition changed): read again from the last checkpoint, where a
            // resumed snapshot reads the tables it had not begun at a later point.
            if [1054, 1146, 1412].contains(&s.code) {
                SourceError::Changed(e.to_string())
            } else {
                SourceError::Sql(e.to_string())
            }
        } else {
            SourceError::Sql(e.to_string())
        }
    }

    /// A binlog dump error: the server's "cannot read the binlog from there" (1236,
    /// a purged resume point) becomes `Purged`, a binlog cut off inside a transaction `CutOff`, a broken connection
    /// `Lost`.
    pub fn classify(e: mysql_async::Error, from: &binlog::ReadFrom) -> Self {
        if connection_lost(&e) {
            return SourceError::Lost(e.to_string());
        }
        let msg = e.to_string();
        // Another reader registered with this job's server-id (MariaDB 4052, MySQL
        // 1236 with this text): reconnecting would disconnect it in turn, forever.
        if matches!(&e, mysql_async::Error::Server(s) if s.code == 4052 || s.message.contains("same server_uuid/server_id"))
        {
            return SourceError::Refused(format!(
                "the server closed this job's binlog connection because another reader connected with the same server-id: {msg}; give each reader of the server its own source.server-id (SHOW SLAVE HOSTS lists the ids in use)"
            ));
        }
        if let mysql_async::Error::Server(s) = &e {
            if s.code == 1236 {
                let position = match from {
                    binlog::ReadFrom::Position(p) => p.to_string(),
                    binlog::ReadFrom::Gtid(g) => format!("GTID {g}"),
                };
                // (The server's own words for a binlog that ends inside an event.)
                return if s.message.contains("truncated in the middle of event") {
                    SourceError::CutOff {
                        position,
                        detail: msg,
                    }
                } else {
                    SourceError::Purged {
                        position,
                        detail: msg,
                    }
                };
            }
        }
        SourceError::Protocol(msg)
    }
}

/// The `Schema` event of a DDL's changes that concern captured tables (None when
/// none does), with the touched tables' definitions after it (from `history`).
/// A source table as its target gets it: a PostgreSQL source's generated columns
/// (never in its stream) only where the target computes them
/// ([`config::Source::generated_computed`]); elsewhere they are left out, with the
/// indexes on them. Any other source's tables as they are (their changes carry
/// generated values).
pub fn mirrored(src: &config::Source, t: &ddl_core::Table) -> ddl_core::Table {
    let mut t = t.clone();
    if src.postgres().is_none()
        || src.generated_computed
        || t.columns.iter().all(|c| c.generated.is_none())
    {
        return t;
    }
    let gone: Vec<String> = t
        .columns
        .iter()
        .filter(|c| c.generated.is_some())
        .map(|c| c.name.clone())
        .collect();
    t.columns.retain(|c| c.generated.is_none());
    t.indexes
        .retain(|ix| !ix.parts.iter().any(|p| gone.contains(&p.column)));
    t
}

pub fn schema_event(
    src: &config::Source,
    history: &history::SchemaHistory,
    db: &str,
    position: Position,
    ddl: &str,
    changes: Vec<ddl_core::SchemaChange>,
    notes: Vec<String>,
) -> Option<SourceEvent> {
    let hit = |t: &ddl_core::TableName| src.captures(t.schema.as_deref().unwrap_or(db), &t.name);
    let captured: Vec<ddl_core::SchemaChange> = changes
        .into_iter()
        .filter(|c| {
            c.table().is_some_and(hit)
                || matches!(c, ddl_core::SchemaChange::RenameTable { to, .. } if hit(to))
        })
        .collect();
    if captured.is_empty() {
        return None;
    }
    let tables: Vec<String> = captured
        .iter()
        .filter_map(|c| c.table().map(|t| t.to_string()))
        .collect();
    let mut after: Vec<ddl_core::Table> = Vec::new();
    for c in &captured {
        let mut names: Vec<&ddl_core::TableName> = c.table().into_iter().collect();
        if let ddl_core::SchemaChange::RenameTable { to, .. } = c {
            names.push(to);
        }
        for n in names {
            let d = n.schema.as_deref().unwrap_or(db);
            if let Some(t) = history.table(d, &n.name) {
                if !after.iter().any(|a| a.name == t.name) {
                    after.push(t.clone());
                }
            }
        }
    }
    Some(SourceEvent::Schema {
        position,
        db: db.to_owned(),
        ddl: ddl.to_owned(),
        changes: captured,
        tables,
        notes,
        after,
    })
}

/// Tables outside the capture whose rows the job knows, as one run of a source reads
/// them: made outside (empty, never on the target), or renamed out of the capture
/// (on the target under their new name), and not written since. Such a table renamed
/// into the captured tables within its database or schema is mirrored; any other
/// stops the job ([`Outside::moves_in`]).
#[derive(Debug, Default)]
pub struct Outside {
    made: std::collections::HashSet<(String, String)>,
    left: std::collections::HashSet<(String, String)>,
    /// Whether the source sees every write to a table made outside the capture (the
    /// binlog does; a PostgreSQL publication does not publish it).
    sees_made: bool,
}

impl Outside {
    /// `sees_made`: the source sees every row written to tables made outside.
    pub fn new(sees_made: bool) -> Self {
        Outside {
            sees_made,
            ..Default::default()
        }
    }

    /// Rows were written to `db.name`, a table the job does not capture.
    pub fn written(&mut self, db: &str, name: &str) {
        if self.made.is_empty() && self.left.is_empty() {
            return;
        }
        let k = (db.to_owned(), name.to_owned());
        self.made.remove(&k);
        self.left.remove(&k);
    }

    /// A DDL's changes (after the schema history took them) with each table renamed
    /// into the captured tables checked in turn: a table the run saw made outside and
    /// never written becomes a `CreateTable` (the target never had it), one that left
    /// the capture and was not written since stays a rename (the target has it), one
    /// the source says is empty (`empty(schema, new name)`: Some(false) when
    /// PostgreSQL's capture looked in the renaming transaction; Some(true) when it
    /// holds rows) becomes a `CreateTable`. Any other is the reason
    /// the job stops: its rows were never read. (`RENAME TABLE a TO tmp, tmp TO b`:
    /// each rename carries what the run knows to the new name.)
    pub fn moves_in(
        &mut self,
        src: &config::Source,
        db: &str,
        history: &history::SchemaHistory,
        changes: Vec<ddl_core::SchemaChange>,
        empty: impl Fn(&str, &str) -> Option<bool>,
    ) -> Result<Vec<ddl_core::SchemaChange>, String> {
        use ddl_core::SchemaChange as C;
        let key = |t: &ddl_core::TableName| table_key(db, t);
        let mut out = Vec::with_capacity(changes.len());
        for c in changes {
            match &c {
                C::CreateTable { table, .. } => {
                    let k = key(&table.name);
                    if !src.captures(&k.0, &k.1) {
                        self.left.remove(&k);
                        self.made.insert(k);
                    }
                }
                C::DropTable { name, .. } => {
                    let k = key(name);
                    self.made.remove(&k);
                    self.left.remove(&k);
                }
                C::RenameTable { from, to } => {
                    let (f, t) = (key(from), key(to));
                    let (fc, tc) = (src.captures(&f.0, &f.1), src.captures(&t.0, &t.1));
                    let made = self.made.remove(&f);
                    let left = self.left.remove(&f);
                    if !fc && tc {
                        let create = || -> Option<C> {
                            Some(C::CreateTable {
                                table: history.table(&t.0, &t.1)?.clone(),
                                if_not_exists: false,
                            })
                        };
                        // (Across databases or schemas every move in stops.)
                        let mirrored = match (left, empty(&t.0, &t.1)) {
                            _ if f.0 != t.0 => None,
                            (true, _) => Some(c.clone()),
                            (_, Some(false)) => create(),
                            (_, None) if made && self.sees_made => create(),
                            _ => None,
                        };
                        match mirrored {
                            Some(m) => out.push(m),
                            None => return Err(moved_in_reason(&f, &t)),
                        }
                        continue;
                    }
                    if fc && !tc {
                        self.left.insert(t);
                    } else if !fc && !tc {
                        if made {
                            self.made.insert(t.clone());
                        }
                        if left {
                            self.left.insert(t);
                        }
                    }
                }
                _ => {}
            }
            out.push(c);
        }
        Ok(out)
    }
}

/// A table's (database or schema, name), unqualified names in `db`.
fn table_key(db: &str, t: &ddl_core::TableName) -> (String, String) {
    (
        t.schema.clone().unwrap_or_else(|| db.to_owned()),
        t.name.clone(),
    )
}

/// The reason to stop at the first of `changes` that renames a table the job does
/// not capture into the captured tables, when nothing is known of it (the schema
/// history never knew it).
pub fn moved_in(
    src: &config::Source,
    db: &str,
    changes: &[ddl_core::SchemaChange],
) -> Option<String> {
    changes.iter().find_map(|c| match c {
        ddl_core::SchemaChange::RenameTable { from, to } => {
            let (f, t) = (table_key(db, from), table_key(db, to));
            (!src.captures(&f.0, &f.1) && src.captures(&t.0, &t.1)).then(|| moved_in_reason(&f, &t))
        }
        _ => None,
    })
}

/// How a job takes a new snapshot of its tables: what a stop that the stream cannot
/// get past says to do (dropping a target table alone does not: the job resumes at
/// its checkpoint and meets the same change again).
pub const NEW_SNAPSHOT: &str = "`lakeshift drop-job --config JOB --apply` (the job's state, and a PostgreSQL source's slot), drop or empty the target tables, and run the job again";

/// Why a table renamed into the captured tables (`RENAME TABLE aside.t TO shop.t`,
/// `ALTER TABLE u.t SET SCHEMA s`) cannot be mirrored: it holds rows the job never read.
pub fn moved_in_reason(from: &(String, String), to: &(String, String)) -> String {
    let fix = "To mirror it, take a new snapshot: remove the job (lakeshift drop-job --apply) and its target tables, then start it";
    if from.0 != to.0 {
        format!(
            "table {}.{} is renamed to {}.{}, into the captured tables, holding rows the job never read (it was not captured); the target cannot be given them. {fix}",
            from.0, from.1, to.0, to.1
        )
    } else {
        format!(
            "table {}.{} is renamed to {}.{}, into the captured tables; it was not captured, and it holds rows the job never read or the job cannot tell that it holds none (it was not made, or left the captured tables, while this run read the source); the target cannot be given them. {fix}",
            from.0, from.1, to.0, to.1
        )
    }
}

const UNPARSED: &str = "skipped: cannot be parsed: ";

/// The reason of a `Schema` event made by [`unparsed`] (None for any other DDL).
pub fn unparsed_reason<'a>(
    changes: &[ddl_core::SchemaChange],
    notes: &'a [String],
) -> Option<&'a str> {
    if !changes.is_empty() {
        return None;
    }
    notes
        .iter()
        .find(|n| n.starts_with(UNPARSED))
        .map(String::as_str)
}

/// The `Schema` event of a DDL on a captured table that the schema history could not
/// parse, when the job skips those: no changes, a `skipped:` note with the reason.
pub fn unparsed(
    position: &Position,
    db: &str,
    sql: &str,
    e: &history::HistoryError,
) -> SourceEvent {
    tracing::warn!(
        "DDL at {position} cannot be parsed ({}); skipped: the tables keep their schema, so rows decode only if it did not change their format\n  statement: {sql}",
        e.message
    );
    SourceEvent::Schema {
        position: position.clone(),
        db: db.to_owned(),
        ddl: sql.to_owned(),
        changes: Vec::new(),
        tables: e.tables.iter().map(|t| t.to_string()).collect(),
        notes: vec![format!("{UNPARSED}{}", e.message)],
        after: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(code: u16) -> mysql_async::Error {
        mysql_async::Error::Server(mysql_async::ServerError {
            code,
            message: "connection reset, eof, purged".into(),
            state: "HY000".into(),
        })
    }

    #[test]
    fn error_kinds_come_from_the_client_error_not_its_words() {
        let closed = mysql_async::Error::Driver(mysql_async::DriverError::ConnectionClosed);
        assert!(matches!(SourceError::sql(closed), SourceError::Lost(_)));
        assert!(SourceError::sql(server(1927)).transient());
        // A refused statement stays definite, whatever its message says.
        assert!(!SourceError::sql(server(1105)).transient());
        // A table changed under a read is read again, a few times.
        let changed = SourceError::sql(server(1146));
        assert!(matches!(changed, SourceError::Changed(_)) && changed.retries() == 3);
        let from = binlog::ReadFrom::Position(Position::new("bin.000001", 4));
        assert!(matches!(
            SourceError::classify(server(1236), &from),
            SourceError::Purged { .. }
        ));
        // The same code for a binlog that ends inside a transaction (a crash while
        // writing it): not a purged position.
        let cut = mysql_async::Error::Server(mysql_async::ServerError {
            code: 1236,
            message:
                "binlog truncated in the middle of event; consider out of disk space on master"
                    .into(),
            state: "HY000".into(),
        });
        assert!(matches!(
            SourceError::classify(cut, &from),
            SourceError::CutOff { .. }
        ));
        assert!(matches!(
            SourceError::classify(server(1105), &from),
            SourceError::Protocol(_)
        ));
        assert!(matches!(
            SourceError::connect("h:1", server(1045)),
            SourceError::Refused(_)
        ));
    }
}
