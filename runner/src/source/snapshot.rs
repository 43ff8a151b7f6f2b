//! The consistent snapshot: `START TRANSACTION WITH CONSISTENT SNAPSHOT` in each
//! session while MariaDB's `BACKUP STAGE BLOCK_COMMIT` blocks commits for a moment,
//! so the binlog's end is the snapshot's point (without the RELOAD privilege, MariaDB's
//! `binlog_snapshot_file` / `binlog_snapshot_position` give it, read until stable:
//! a concurrent `SHOW STATUS` can overwrite it). Captured tables
//! are read in primary-key chunks, in bounded memory, with progress; the session runs
//! in UTC so snapshot and binlog values agree. Chunks after a cursor go through the
//! binary protocol (a prepared statement takes the cursor as parameters; exact floats
//! and temporals); a query without a cursor (a table's first chunk, a keyless table)
//! goes as plain text when no column is FLOAT or DOUBLE (text is exact for every other
//! type): one round trip and no statement to prepare per small table.

use super::config::Source;
use super::decode::{append_snapshot_value, typed_text_value, Ctx, Kind, RowsBuilder, SourceTable};
use super::history::SchemaHistory;
use super::position::Position;
use super::{SourceError, SourceEvent};
use mysql_async::prelude::Queryable;
use mysql_async::{Row, Value};
use std::path::Path;
use std::sync::Arc;
use tokio::sync::mpsc;

/// A key value of a snapshot chunk boundary, storable in a state file.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyValue {
    Null,
    Int(i64),
    UInt(u64),
    Text(String),
    Bytes(Vec<u8>),
}

impl KeyValue {
    fn from_mysql(v: &Value) -> KeyValue {
        match v {
            Value::NULL => KeyValue::Null,
            Value::Int(i) => KeyValue::Int(*i),
            Value::UInt(u) => KeyValue::UInt(*u),
            Value::Bytes(b) => match std::str::from_utf8(b) {
                Ok(s) => KeyValue::Text(s.to_owned()),
                Err(_) => KeyValue::Bytes(b.clone()),
            },
            other => KeyValue::Text(other.as_sql(true).trim_matches('\'').to_owned()),
        }
    }

    fn to_mysql(&self) -> Value {
        match self {
            KeyValue::Null => Value::NULL,
            KeyValue::Int(i) => Value::Int(*i),
            KeyValue::UInt(u) => Value::UInt(*u),
            KeyValue::Text(s) => Value::Bytes(s.clone().into_bytes()),
            KeyValue::Bytes(b) => Value::Bytes(b.clone()),
        }
    }
}

/// Where a table's snapshot stands: rows up to and including `after` were delivered.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Cursor {
    pub db: String,
    pub table: String,
    pub after: Vec<KeyValue>,
}

/// A snapshot interrupted by a crash, resumed: its binlog point, the tables already
/// done, and the chunk cursor of the table in progress.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SnapshotResume {
    pub position: Position,
    pub done: Vec<(String, String)>,
    pub cursor: Option<Cursor>,
    /// Tables whose reading began, in order (the last is the one in progress).
    #[serde(default)]
    pub started: Vec<(String, String)>,
}

/// What a resumed snapshot read at its own, later binlog point: those tables'
/// binlog changes before `until` are in its copy (stored in the source's state
/// folder until the binlog passes it, so a restart in between skips the same).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SeenBySnapshot {
    pub tables: Vec<(String, String)>,
    pub until: Position,
}

const SEEN_FILE: &str = "snapshot-seen.json";

impl SeenBySnapshot {
    pub fn load(dir: &Path) -> Option<Self> {
        serde_json::from_slice(&std::fs::read(dir.join(SEEN_FILE)).ok()?).ok()
    }

    pub fn store(&self, dir: &Path) -> Result<(), SourceError> {
        std::fs::create_dir_all(dir)
            .and_then(|_| {
                crate::durable::replace(
                    &dir.join(SEEN_FILE),
                    &serde_json::to_vec(self).expect("serialises"),
                )
            })
            .map_err(|e| SourceError::Schema(format!("{}: {e}", dir.display())))
    }

    pub fn clear(dir: &Path) {
        let _ = std::fs::remove_file(dir.join(SEEN_FILE));
    }

    /// Whether a change of `db.table` in the transaction starting at `at` is in the
    /// copy already.
    pub fn saw(&self, db: &str, table: &str, at: &Position) -> bool {
        at < &self.until && self.tables.iter().any(|(d, t)| d == db && t == table)
    }
}

/// Which tables a snapshot reads.
#[derive(Debug, Clone)]
pub enum Scope {
    /// Every captured table; starts a new schema history.
    All,
    /// The rest of an interrupted snapshot (its history is the stored one).
    Resume(SnapshotResume),
    /// Only these tables (newly captured), reported at `position`.
    Only(Vec<(String, String)>, Position),
}

const SYSTEM: &str = "'mysql','sys','information_schema','performance_schema'";

pub fn quote(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// The base tables of the server's non-system databases, read in `conn`'s current
/// transaction: those `wanted` with their definitions, (db, name, estimated rows,
/// DDL), and the names of the others (their definitions are not read: a server's
/// thousands of other tables cost one listing, not a round trip each).
/// Each database's default character set, and the server's (key ""): a table a
/// later DDL creates without one takes its database's.
pub async fn read_charsets(
    conn: &mut mysql_async::Conn,
) -> Result<std::collections::BTreeMap<String, String>, SourceError> {
    // (The server's as the database named "".)
    Ok(conn
        .query::<(String, String), _>(
            "SELECT schema_name, default_character_set_name FROM information_schema.schemata
             UNION ALL SELECT '', @@character_set_server",
        )
        .await
        .map_err(SourceError::sql)?
        .into_iter()
        .collect())
}

pub async fn read_definitions(
    conn: &mut mysql_async::Conn,
    wanted: impl Fn(&str, &str) -> bool,
) -> Result<(Vec<(String, String, u64, String)>, Vec<(String, String)>), SourceError> {
    // Names only: the row estimate makes the server open every table it lists.
    let tables: Vec<(String, String)> = conn
        .query(format!(
            "SELECT table_schema, table_name FROM information_schema.tables
              WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ({SYSTEM})
              ORDER BY table_schema, table_name"
        ))
        .await
        .map_err(SourceError::sql)?;
    let (tables, unread): (Vec<_>, Vec<_>) =
        tables.into_iter().partition(|(db, name)| wanted(db, name));
    // Row estimates (for progress) of the databases that hold wanted tables.
    let mut dbs: Vec<&String> = tables.iter().map(|(db, _)| db).collect();
    dbs.dedup();
    let mut estimates = std::collections::HashMap::new();
    if !dbs.is_empty() {
        let marks = vec!["?"; dbs.len()].join(", ");
        let rows: Vec<(String, String, Option<u64>)> = conn
            .exec(
                format!(
                    "SELECT table_schema, table_name, table_rows FROM information_schema.tables
                      WHERE table_type = 'BASE TABLE' AND table_schema IN ({marks})"
                ),
                dbs,
            )
            .await
            .map_err(SourceError::sql)?;
        estimates.extend(rows.into_iter().map(|(d, n, r)| ((d, n), r)));
    }
    let mut out = Vec::new();
    for (db, name) in tables {
        let rows = estimates.remove(&(db.clone(), name.clone())).flatten();
        // (None: dropped or renamed since it was listed, an online schema change's
        // helper table, say: it is not there to describe.)
        if let Some(ddl) = definition(conn, &db, &name).await? {
            out.push((db, name, rows.unwrap_or(0), ddl));
        }
    }
    Ok((out, unread))
}

/// Says so when a snapshot reads more tables than the server's table caches hold.
/// The snapshot reads every table in one transaction, which keeps each table it read
/// in use until it ends; past `table_definition_cache` (400 by default) or
/// `table_open_cache` (2,000) the server evicts and reopens tables for every read
/// (measured: 10,000 small tables read in 15.7-16.9 s with the default caches, 4.0 s
/// with both at 20,000).
async fn warn_table_caches(conn: &mut mysql_async::Conn, tables: usize) {
    let Ok(Some((defs, open))) = conn
        .query_first::<(u64, u64), _>("SELECT @@table_definition_cache, @@table_open_cache")
        .await
    else {
        return;
    };
    if let Some(msg) = table_cache_advice(tables, defs, open) {
        tracing::warn!("{msg}");
    }
}

/// The advice [`warn_table_caches`] gives, if any.
fn table_cache_advice(tables: usize, defs: u64, open: u64) -> Option<String> {
    let small = defs.min(open);
    if tables as u64 <= small {
        return None;
    }
    // Room for the server's own tables and other clients' besides the snapshot's.
    let want = tables as u64 + 500;
    Some(format!(
        "the snapshot reads {tables} tables in one transaction, more than the server's table caches hold (table_definition_cache {defs}, table_open_cache {open}): past them the server reopens tables for every read, several times slower; for the snapshot's duration run SET GLOBAL table_definition_cache = {want}, table_open_cache = {want}"
    ))
}

/// One table's definition as the server shows it now (None: it does not exist).
pub async fn definition(
    conn: &mut mysql_async::Conn,
    db: &str,
    name: &str,
) -> Result<Option<String>, SourceError> {
    // (As bytes: a binary column's default is written as its raw bytes in a string,
    // which need not be UTF-8; such a string is read as the hex literal of its bytes.)
    match conn
        .query_first::<(Vec<u8>, Vec<u8>), _>(format!(
            "SHOW CREATE TABLE {}.{}",
            quote(db),
            quote(name)
        ))
        .await
    {
        Ok(d) => Ok(d.map(|(_, ddl)| grammar::split::mysql_text_from_bytes(&ddl, true).0)),
        Err(mysql_async::Error::Server(e)) if e.code == 1146 => Ok(None),
        Err(e) => Err(SourceError::sql(e)),
    }
}

/// The binlog's end now: file and offset (`SHOW MASTER STATUS`).
async fn binlog_end(conn: &mut mysql_async::Conn) -> Result<(String, u64), SourceError> {
    let row: Option<Row> = conn
        .query_first("SHOW MASTER STATUS")
        .await
        .map_err(SourceError::sql)?;
    let row = row.ok_or_else(|| {
        SourceError::Preflight("SHOW MASTER STATUS is empty: binary logging is off".into())
    })?;
    Ok((row.get(0).unwrap_or_default(), row.get(1).unwrap_or(4)))
}

/// The server's binlog position now, with the GTID state there.
pub async fn current_position(conn: &mut mysql_async::Conn) -> Result<Position, SourceError> {
    let (file, pos) = binlog_end(conn).await?;
    let mut p = Position::new(file, pos);
    p.gtid = gtid_at(conn, &p).await?;
    Ok(p)
}

/// MariaDB's GTID state at a binlog file/offset (empty on servers without it).
pub async fn gtid_at(
    conn: &mut mysql_async::Conn,
    p: &Position,
) -> Result<super::position::GtidState, SourceError> {
    let g: Option<Option<String>> = conn
        .exec_first("SELECT BINLOG_GTID_POS(?, ?)", (p.file.clone(), p.offset))
        .await
        .unwrap_or(None);
    g.flatten()
        .unwrap_or_default()
        .parse()
        .map_err(|e: super::position::BadPosition| SourceError::Protocol(e.0))
}

/// Take the snapshot: send every captured table's rows, then `SnapshotDone`.
/// Returns the binlog position that continues it and the schema history started at it.
pub async fn snapshot(
    src: &Source,
    tx: &mpsc::Sender<SourceEvent>,
    state_dir: Option<&Path>,
    scope: Scope,
    stored: Option<SchemaHistory>,
) -> Result<Option<(Position, SchemaHistory)>, SourceError> {
    let (mut conn, followers, (file, pos), read) = open_sessions(src).await?;
    let mut position = Position::new(file, pos);
    position.gtid = gtid_at(&mut conn, &position).await?;
    // The tables as of the snapshot's point (see open_sessions).
    let (defs, unread) = read;
    // A resumed snapshot reads the tables it has not read yet at this new point,
    // with the schema history of the first one's point: a DDL between the two on
    // such a table (renamed, altered, dropped) would have its rows read in the new
    // shape and the DDL applied to them again from the binlog (a renamed table's
    // rows were lost, an added column's default overwrote the values read). It
    // cannot resume exactly: the job stops, saying how to take the snapshot again.
    // (Taking it again in place left the target's tables in their first shape and
    // the stored history past the resume point: a hostile tester.)
    if let (Scope::Resume(r), Some(h)) = (&scope, &stored) {
        if let Some(what) = changed_since(h, &r.position, &r.done, &defs, |db, name| {
            src.captures(db, name)
        })? {
            return Err(SourceError::Preflight(format!(
                "{what} while the initial snapshot ran (it was interrupted, and resuming it would read that table in its new shape and apply the DDL to it again): take the snapshot again: `lakeshift drop-job --config JOB --apply`, empty the target tables, and run the job again"
            )));
        }
    }
    let (history, report_at) = match (&scope, stored) {
        (Scope::All, _) => (
            SchemaHistory::create(
                state_dir,
                &position,
                defs.iter()
                    .map(|(db, _, _, ddl)| (db.clone(), ddl.clone()))
                    .collect(),
                unread,
                read_charsets(&mut conn).await?,
            )?,
            position.clone(),
        ),
        (Scope::Resume(r), Some(h)) => (h, r.position.clone()),
        (Scope::Only(tables, at), Some(mut h)) => {
            // Tables the history did not describe (uncaptured at its start): their
            // definitions as this snapshot reads them.
            for (db, name, _, ddl) in &defs {
                if h.table(db, name).is_none() && tables.contains(&(db.clone(), name.clone())) {
                    h.adopt(db, name, ddl)?;
                }
            }
            (h, at.clone())
        }
        (_, None) => {
            return Err(SourceError::Schema(
                "resuming a snapshot needs the stored schema history".into(),
            ))
        }
    };
    if let (Scope::All, Some(dir)) = (&scope, state_dir) {
        SeenBySnapshot::clear(dir);
    }
    if let (Scope::Resume(r), Some(dir)) = (&scope, state_dir) {
        // The tables this resumed snapshot reads whole, it reads at `position`, after
        // the point the binlog continues from: their changes before it are in the
        // copy already and must not be applied again (a table read on from its
        // cursor is keyed: changes applied again to keyed rows land the same).
        let whole: Vec<(String, String)> = defs
            .iter()
            .filter(|(db, name, _, _)| src.captures(db, name) && history.table(db, name).is_some())
            .map(|(db, name, _, _)| (db.clone(), name.clone()))
            .filter(|k| {
                !r.done.contains(k)
                    && !r
                        .cursor
                        .as_ref()
                        .is_some_and(|c| c.db == k.0 && c.table == k.1)
            })
            .collect();
        SeenBySnapshot {
            tables: whole,
            until: position.clone(),
        }
        .store(dir)?;
    }
    let count = match &scope {
        Scope::Only(tables, _) => tables.len(),
        _ => defs
            .iter()
            .filter(|(db, n, _, _)| src.captures(db, n))
            .count(),
    };
    warn_table_caches(&mut conn, count).await;
    let done: std::collections::HashSet<&(String, String)> = match &scope {
        Scope::Resume(r) => r.done.iter().collect(),
        _ => Default::default(),
    };
    let mut work = Vec::new();
    for (db, name, estimate, _) in &defs {
        if !src.captures(db, name) {
            continue;
        }
        let key = (db.clone(), name.clone());
        let mut after = None;
        match &scope {
            Scope::All => {}
            Scope::Resume(r) => {
                if done.contains(&key) {
                    continue;
                }
                if history.table(db, name).is_none() {
                    // Created after the snapshot's point (a DDL while it was
                    // interrupted): the binlog from that point brings it whole.
                    tracing::info!(
                        "{db}.{name}: created after the snapshot's point; its rows come from the binlog"
                    );
                    continue;
                }
                if let Some(c) = r
                    .cursor
                    .as_ref()
                    .filter(|c| c.db == *db && c.table == *name)
                {
                    after = Some(c.after.iter().map(KeyValue::to_mysql).collect());
                }
            }
            Scope::Only(tables, _) => {
                if !tables.contains(&key) {
                    continue;
                }
            }
        }
        let ir = history.table(db, name).ok_or_else(|| {
            SourceError::Schema(format!("{db}.{name} is missing from the schema history"))
        })?;
        let over = src
            .key_overrides
            .get(&format!("{db}.{name}"))
            .map(Vec::as_slice);
        let table =
            Arc::new(SourceTable::from_ir(db, ir, over).map_err(|e| SourceError::Schema(e.0))?);
        // A table read from its start by a snapshot of every table replaces the
        // target's copy (newly captured tables alone may share a target: no).
        let fresh = after.is_none() && !matches!(scope, Scope::Only(..));
        work.push(Piece {
            table,
            estimate: *estimate,
            after,
            upto: None,
            first: true,
            fresh,
        });
    }
    let n_tables = work.len();
    let reading = Reading {
        chunk: src.binlog().snapshot_chunk_rows,
        zero_fail: src.binlog().zero_dates == super::config::ZeroDates::Fail,
    };
    // Several sessions cut large tables into key ranges; one reads them whole.
    let work = match followers.is_empty() {
        true => work,
        false => split(&mut conn, work, &reading).await?,
    };
    let mut sessions = followers;
    sessions.push(conn);
    crate::failpoint::pause("snapshot-read").await;
    let Some(total) = read_pieces(sessions, work, reading, &report_at, tx).await? else {
        return Ok(None);
    };
    if tx
        .send(SourceEvent::SnapshotDone {
            position: report_at.clone(),
            tables: n_tables,
            rows: total,
        })
        .await
        .is_err()
    {
        return Ok(None);
    }
    Ok(Some((report_at, history)))
}

/// The first captured table an interrupted snapshot (at `at`) has not read whose
/// definition now (`defs`) differs from the one in its schema history `h` (renamed,
/// dropped or altered since), said for a log line; None: none did.
fn changed_since(
    h: &SchemaHistory,
    at: &Position,
    done: &[(String, String)],
    defs: &[(String, String, u64, String)],
    captures: impl Fn(&str, &str) -> bool,
) -> Result<Option<String>, SourceError> {
    let pending = |db: &str, name: &str| {
        captures(db, name) && !done.iter().any(|(d, n)| d == db && n == name)
    };
    let now = SchemaHistory::create(
        None,
        at,
        defs.iter()
            .filter(|(db, name, _, _)| pending(db, name))
            .map(|(db, _, _, ddl)| (db.clone(), ddl.clone()))
            .collect(),
        Vec::new(),
        Default::default(),
    )?;
    // Every such table, in name order: the stop says the same on every run.
    let mut changed: Vec<String> = Vec::new();
    for t in h.tables() {
        let (db, name) = (t.name.schema.as_deref().unwrap_or_default(), &t.name.name);
        if !pending(db, name) {
            continue;
        }
        match now.table(db, name) {
            None => changed.push(format!("captured table {db}.{name} was renamed or dropped")),
            Some(n) if n.columns != t.columns => {
                changed.push(format!("captured table {db}.{name} was altered"))
            }
            Some(_) => {}
        }
    }
    changed.sort();
    // (A table made since is in the binlog whole, from its CREATE.)
    Ok((!changed.is_empty()).then(|| changed.join("; ")))
}

/// A table's snapshot rows on their way to the sink, chunk by chunk: rows counted,
/// the chunk's cursor, and `fresh` on the first chunk only.
pub struct Chunks<'a> {
    pub tx: &'a mpsc::Sender<SourceEvent>,
    pub table: &'a Arc<SourceTable>,
    pub estimate: u64,
    pub at: &'a Position,
    pub fresh: bool,
    /// Rows of the table sent so far.
    pub done: u64,
}

impl Chunks<'_> {
    /// Send what `b` holds, the cursor after the last key `after` (keyed tables).
    /// False: the receiver is gone.
    pub async fn send(&mut self, b: &mut RowsBuilder, after: Option<Vec<KeyValue>>) -> bool {
        self.send_without(b, after, &mut Vec::new()).await
    }

    /// `send`, leaving out the rows `drop` names (emptied).
    pub async fn send_without(
        &mut self,
        b: &mut RowsBuilder,
        after: Option<Vec<KeyValue>>,
        drop: &mut Vec<u32>,
    ) -> bool {
        let mut rows = b.finish();
        if !drop.is_empty() {
            let keep: arrow_array::BooleanArray = (0..rows.num_rows() as u32)
                .map(|r| Some(!drop.contains(&r)))
                .collect();
            rows = arrow_select::filter::filter_record_batch(&rows, &keep)
                .expect("a mask of the batch's length");
            drop.clear();
        }
        self.done += rows.num_rows() as u64;
        let cursor = after.map(|after| Cursor {
            db: self.table.db.clone(),
            table: self.table.name.clone(),
            after,
        });
        self.tx
            .send(SourceEvent::SnapshotRows {
                table: self.table.clone(),
                rows,
                done: self.done,
                estimate: self.estimate,
                cursor,
                position: self.at.clone(),
                fresh: std::mem::take(&mut self.fresh),
            })
            .await
            .is_ok()
    }
}

/// One chunk's query result on its way into a table's batches.
struct Read<'a, 'c> {
    b: &'a mut RowsBuilder,
    out: &'a mut Chunks<'c>,
    table: &'a Arc<SourceTable>,
    keyed: bool,
    chunk: u64,
    zero_fail: bool,
    /// Rows of this chunk, and the last one (keyed tables: its key is the cursor).
    in_chunk: u64,
    last_row: Option<Row>,
}

impl Read<'_, '_> {
    /// Every row of `result` into the batch (a keyless table's sent as it fills).
    /// False: the receiver is gone.
    async fn rows<P: mysql_async::prelude::Protocol>(
        &mut self,
        mut result: mysql_async::QueryResult<'_, 'static, P>,
    ) -> Result<bool, SourceError> {
        let table = self.table;
        while let Some(row) = result.next().await.map_err(SourceError::sql)? {
            for (i, col) in table.columns.iter().enumerate() {
                let v = row.as_ref(i).unwrap_or(&Value::NULL);
                let ctx = Ctx {
                    zero_dates_fail: self.zero_fail,
                    column: &col.name,
                };
                append_snapshot_value(&mut self.b.cols[i], col, v, &ctx).map_err(|e| {
                    SourceError::Decode(format!(
                        "snapshot of {}.{} column {}: {e}",
                        table.db, table.name, col.name
                    ))
                })?;
            }
            self.b.rows += 1;
            self.in_chunk += 1;
            if self.keyed {
                // Its key is read once the chunk ends (the last row's).
                self.last_row = Some(row);
            } else if self.b.rows as u64 >= self.chunk {
                // Keyless tables stream in one query, cut into batches.
                if !self.out.send(self.b, None).await {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }
}

/// How chunks are read: rows per chunk, and whether zero dates fail.
#[derive(Debug, Clone, Copy)]
struct Reading {
    chunk: u64,
    zero_fail: bool,
}

/// A table, or a key range of one, read by one session.
struct Piece {
    table: Arc<SourceTable>,
    estimate: u64,
    /// Keys after this (exclusive); None: from the table's start.
    after: Option<Vec<Value>>,
    /// The single integer key's last value (inclusive) of this range; None: to the
    /// table's end.
    upto: Option<i128>,
    /// The table's first piece: it is sent even when empty (its `fresh` replaces
    /// the target's copy of an emptied table).
    first: bool,
    fresh: bool,
}

/// Attempts at starting the sessions at one binlog point before reading with one.
const MATCH_ATTEMPTS: usize = 20;

/// One session in UTC, repeatable read, in a consistent snapshot.
async fn begin(conn: &mut mysql_async::Conn) -> Result<(), SourceError> {
    conn.query_drop(
        "SET SESSION time_zone = '+00:00'; \
         SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ; \
         START TRANSACTION WITH CONSISTENT SNAPSHOT",
    )
    .await
    .map_err(SourceError::sql)
}

/// The binlog point of a session's consistent snapshot, from MariaDB's
/// `binlog_snapshot_file/position` status. The server keeps it in one global that a
/// concurrent `SHOW STATUS` of any session overwrites before it is sent: a value is
/// taken only when [`STATUS_READS`] reads in a row agree (None: they never did).
async fn snapshot_point(
    conn: &mut mysql_async::Conn,
) -> Result<Option<(String, u64)>, SourceError> {
    let mut last = None;
    let mut same = 0;
    for _ in 0..STATUS_READS * 4 {
        let status: Vec<(String, String)> = conn
            .query("SHOW STATUS LIKE 'binlog_snapshot_%'")
            .await
            .map_err(SourceError::sql)?;
        let get = |k: &str| {
            status
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(k))
                .map(|(_, v)| v.clone())
        };
        let point = match (get("binlog_snapshot_file"), get("binlog_snapshot_position")) {
            (Some(file), Some(pos)) => (file, pos.parse().unwrap_or(4)),
            _ => return Err(SourceError::Preflight(
                "the server has no binlog_snapshot_file/position status (MariaDB provides them); a consistent snapshot needs them".into(),
            )),
        };
        same = match last.as_ref() == Some(&point) {
            true => same + 1,
            false => 1,
        };
        if same == STATUS_READS {
            return Ok(Some(point));
        }
        last = Some(point);
    }
    Ok(None)
}

/// Reads of a snapshot's binlog point that must agree (lock-free snapshots only).
const STATUS_READS: usize = 3;

/// How long the snapshot waits to block commits before it starts without the block.
/// Running DDL and commits hold the block off, and commits that arrive while it waits
/// queue behind it: the wait is short.
const BLOCK_WAIT_SECONDS: u32 = 2;

/// What [`begin_blocked`] came to.
enum Blocked {
    /// The sessions started at this point, with the tables' definitions there.
    Started((String, u64), Definitions),
    /// The account may not block commits (it lacks RELOAD), the server has no
    /// BACKUP STAGE, or the block was not granted in time.
    Refused,
    /// The sessions did not start within `snapshot-block-ms`: the block was released; what
    /// the sessions were doing then (from the processlist) is in the string.
    Stuck(String),
}

/// Start `sessions` in one consistent snapshot while commits are blocked: MariaDB's
/// `BACKUP STAGE BLOCK_COMMIT` (about a millisecond here) on a connection of its own,
/// the sessions' snapshots, the binlog's end (`SHOW MASTER STATUS`: no commit can
/// move it), and `BACKUP STAGE END`.
async fn begin_blocked(
    src: &Source,
    sessions: &mut [mysql_async::Conn],
) -> Result<Blocked, SourceError> {
    let mut lock = mysql_async::Conn::new(src.opts())
        .await
        .map_err(|e| SourceError::connect(&src.at(), e))?;
    let blocked = lock
        .query_drop(format!(
            "SET SESSION lock_wait_timeout = {BLOCK_WAIT_SECONDS}; BACKUP STAGE START; BACKUP STAGE BLOCK_COMMIT"
        ))
        .await;
    match blocked {
        Ok(()) => {}
        // Access denied (no RELOAD), unknown syntax (no BACKUP STAGE), lock wait
        // timeout, another backup's stage: the server refused, the snapshot goes on.
        Err(mysql_async::Error::Server(e)) => {
            tracing::warn!(
                "the snapshot could not block commits for the millisecond its sessions take to start (BACKUP STAGE BLOCK_COMMIT, which needs the RELOAD privilege): {}; its binlog point is read from binlog_snapshot_position instead, which a concurrent SHOW STATUS on the server can misreport",
                e.message
            );
            let _ = lock.disconnect().await;
            return Ok(Blocked::Refused);
        }
        Err(e) => return Err(SourceError::sql(e)),
    }
    let ids: Vec<u32> = sessions.iter().map(|c| c.id()).collect();
    let hold = std::time::Duration::from_millis(src.binlog().snapshot_block_ms);
    let started = tokio::time::timeout(hold, async {
        futures::future::try_join_all(sessions.iter_mut().map(begin)).await?;
        let end = binlog_end(&mut lock).await?;
        // The tables' definitions as of the point: no DDL commits while blocked.
        let defs = read_definitions(&mut sessions[0], |db, name| src.describes(db, name)).await?;
        Ok::<_, SourceError>((end, defs))
    })
    .await;
    let Ok(started) = started else {
        // (On a connection of its own: the lock's may be cut off mid-answer.)
        let doing = session_states(src, &ids).await;
        // Dropped, the connection closes: the server ends its block.
        drop(lock);
        return Ok(Blocked::Stuck(doing));
    };
    // The block ends with its connection too, should END fail.
    let _ = lock.query_drop("BACKUP STAGE END").await;
    let _ = lock.disconnect().await;
    let (end, defs) = started?;
    Ok(Blocked::Started(end, defs))
}

/// What the server says the connections `ids` are doing (for a warning; a second
/// at most, on a connection of its own).
async fn session_states(src: &Source, ids: &[u32]) -> String {
    let read = tokio::time::timeout(std::time::Duration::from_secs(1), async {
        let mut c = mysql_async::Conn::new(src.opts()).await?;
        let rows: Vec<Row> = c
            .query("SELECT id, command, state, LEFT(info, 200) FROM information_schema.processlist")
            .await?;
        let _ = c.disconnect().await;
        Ok::<_, mysql_async::Error>(rows)
    })
    .await;
    match read {
        Ok(Ok(rows)) => rows
            .into_iter()
            .filter_map(|r| {
                mysql_async::from_row_opt::<(u64, Option<String>, Option<String>, Option<String>)>(
                    r,
                )
                .ok()
            })
            .filter(|(id, ..)| ids.contains(&(*id as u32)))
            .map(|(id, command, state, info)| {
                let mut s = format!("server session {id}: {}", command.unwrap_or_default());
                for part in [state, info].into_iter().flatten() {
                    if !part.is_empty() {
                        s.push_str(", ");
                        s.push_str(&part);
                    }
                }
                s
            })
            .collect::<Vec<_>>()
            .join("; "),
        Ok(Err(e)) => format!("(the processlist could not be read: {e})"),
        Err(_) => "(the processlist could not be read within a second)".into(),
    }
}

/// The tables a snapshot may read, with row estimates and definitions, and those it
/// could not describe (see [`read_definitions`]).
type Definitions = (Vec<(String, String, u64, String)>, Vec<(String, String)>);

/// Attempts at starting the sessions under the block before starting them without.
const BLOCK_ATTEMPTS: usize = 3;

/// The snapshot's sessions (`snapshot-parallel` of them): the first, the others,
/// their binlog point and the tables' definitions there.
///
/// Commits are blocked while the sessions start ([`begin_blocked`]); sessions that
/// do not start within `snapshot-block-ms` are released and started again, up to
/// [`BLOCK_ATTEMPTS`] times, then without the block. Without that block (no RELOAD,
/// or a server too busy to start the sessions in time), MariaDB takes a consistent
/// snapshot and its binlog point together, under the lock that orders commits, so
/// sessions that report the same point see the same committed transactions: all
/// start at once, their points are read one at a time, and when a commit landed
/// between them, all start again, up to [`MATCH_ATTEMPTS`] times; then the first
/// session reads alone (said in a warning). The definitions are then those read both
/// before and after the start ([`lock_free_defined`]).
#[allow(clippy::type_complexity)]
async fn open_sessions(
    src: &Source,
) -> Result<
    (
        mysql_async::Conn,
        Vec<mysql_async::Conn>,
        (String, u64),
        Definitions,
    ),
    SourceError,
> {
    let n = src.binlog().snapshot_parallel.max(1);
    let connect = || async {
        let mut sessions = Vec::with_capacity(n);
        for _ in 0..n {
            sessions.push(
                mysql_async::Conn::new(src.opts())
                    .await
                    .map_err(|e| SourceError::connect(&src.at(), e))?,
            );
        }
        Ok::<_, SourceError>(sessions)
    };
    let mut sessions = connect().await?;
    let mut blocked = None;
    for attempt in 1..=BLOCK_ATTEMPTS {
        match begin_blocked(src, &mut sessions).await? {
            Blocked::Started(at, defs) => {
                blocked = Some((at, defs));
                break;
            }
            Blocked::Refused => break,
            Blocked::Stuck(doing) => {
                tracing::warn!(
                    "the snapshot's sessions did not start within {} ms (source.snapshot-block-ms) while commits were blocked (attempt {attempt} of {BLOCK_ATTEMPTS}): the block is released{}; {doing}",
                    src.binlog().snapshot_block_ms,
                    if attempt < BLOCK_ATTEMPTS {
                        " and the sessions start again"
                    } else {
                        " and the sessions start without it"
                    }
                );
                // Their queries were cut off mid-answer: new connections.
                drop(sessions);
                sessions = connect().await?;
            }
        }
    }
    let unstable = || {
        SourceError::Protocol(format!(
            "the snapshot's binlog point (binlog_snapshot_position) never read the same {STATUS_READS} times in a row, in {MATCH_ATTEMPTS} attempts: grant RELOAD so that the snapshot blocks commits for its start"
        ))
    };
    let (at, defs) = match blocked {
        Some(started) => started,
        None => match lock_free_defined(src, &mut sessions).await? {
            Some(started) => started,
            None if n > 1 => {
                tracing::warn!(
                    "the binlog moved while the snapshot's {n} sessions started, {MATCH_ATTEMPTS} times: the snapshot is read by one session"
                );
                // (Each failed attempt ended the sessions' transactions.)
                for c in sessions.drain(1..) {
                    let _ = c.disconnect().await;
                }
                lock_free_defined(src, &mut sessions)
                    .await?
                    .ok_or_else(unstable)?
            }
            None => return Err(unstable()),
        },
    };
    let first = sessions.remove(0);
    Ok((first, sessions, at, defs))
}

/// Starts of a lock-free snapshot that a DDL may interrupt before it stops.
const DEFINITION_ATTEMPTS: usize = 5;

/// [`lock_free`] with the tables' definitions as of its point. Nothing blocks DDL
/// then: the definitions are read before the sessions start and again after, and the
/// sessions start again while the two differ (a DDL committed in between, which the
/// binlog from the point may or may not hold: a table renamed then would be read
/// under its new name and renamed again by the binlog). None: no start matched
/// ([`lock_free`]).
async fn lock_free_defined(
    src: &Source,
    sessions: &mut [mysql_async::Conn],
) -> Result<Option<((String, u64), Definitions)>, SourceError> {
    let describes = |db: &str, name: &str| src.describes(db, name);
    let mut before = read_definitions(&mut sessions[0], describes).await?;
    for _ in 0..DEFINITION_ATTEMPTS {
        let Some(at) = lock_free(sessions).await? else {
            return Ok(None);
        };
        crate::failpoint::pause("snapshot-point").await;
        let after = read_definitions(&mut sessions[0], describes).await?;
        if same_definitions(&before, &after) {
            return Ok(Some((at, after)));
        }
        tracing::info!("a DDL changed the captured tables while the snapshot's sessions started: they start again");
        for c in sessions.iter_mut() {
            c.query_drop("COMMIT").await.map_err(SourceError::sql)?;
        }
        before = after;
    }
    Err(SourceError::Protocol(format!(
        "DDL changed the captured tables every time the snapshot's sessions started ({DEFINITION_ATTEMPTS} attempts): grant RELOAD so that the snapshot blocks commits for its start, or run the job when fewer DDL run"
    )))
}

/// The same tables with the same definitions, but for row estimates and the next
/// AUTO_INCREMENT value (which inserts move).
fn same_definitions(a: &Definitions, b: &Definitions) -> bool {
    let tables = |d: &Definitions| -> Vec<(String, String, String)> {
        d.0.iter()
            .map(|(db, name, _, ddl)| (db.clone(), name.clone(), without_auto_increment(ddl)))
            .collect()
    };
    a.1 == b.1 && tables(a) == tables(b)
}

/// `ddl` without its ` AUTO_INCREMENT=<n>` table option.
fn without_auto_increment(ddl: &str) -> String {
    let mut out = String::with_capacity(ddl.len());
    let mut rest = ddl;
    while let Some(i) = rest.find(" AUTO_INCREMENT=") {
        out.push_str(&rest[..i]);
        rest =
            rest[i + " AUTO_INCREMENT=".len()..].trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out.push_str(rest);
    out
}

/// Start `sessions` at one binlog point without blocking commits (see
/// [`open_sessions`]). None: no attempt matched.
async fn lock_free(
    sessions: &mut [mysql_async::Conn],
) -> Result<Option<(String, u64)>, SourceError> {
    for _ in 0..MATCH_ATTEMPTS {
        futures::future::try_join_all(sessions.iter_mut().map(begin)).await?;
        let mut points = Vec::with_capacity(sessions.len());
        for c in sessions.iter_mut() {
            points.push(snapshot_point(c).await?);
        }
        if let Some(Some(at)) = points.first() {
            if points.iter().all(|p| p.as_ref() == Some(at)) {
                return Ok(Some(at.clone()));
            }
        }
        for c in sessions.iter_mut() {
            c.query_drop("COMMIT").await.map_err(SourceError::sql)?;
        }
    }
    Ok(None)
}

/// The single integer key column of `table`, if that is its key (key columns are
/// NOT NULL: every row fits a key range).
fn int_key(table: &SourceTable) -> Option<usize> {
    match table.key.as_slice() {
        [k] if matches!(table.columns[*k].kind, Kind::Int { .. }) => Some(*k),
        _ => None,
    }
}

/// An integer key value as the server sent it.
fn int_of(v: &Value) -> Option<i128> {
    match v {
        Value::Int(i) => Some(i128::from(*i)),
        Value::UInt(u) => Some(i128::from(*u)),
        Value::Bytes(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

/// An integer key value as a cursor parameter.
fn int_value(v: i128) -> Value {
    match i64::try_from(v) {
        Ok(i) => Value::Int(i),
        Err(_) => Value::UInt(u64::try_from(v).unwrap_or(u64::MAX)),
    }
}

/// Cut `span` keys from `min` to `max` into `n` ranges: each range's last key,
/// the last one open (None).
pub(crate) fn ranges(min: i128, max: i128, n: u64) -> Vec<Option<i128>> {
    let n = i128::from(n.max(1));
    let width = ((max - min + 1) + n - 1) / n;
    let width = width.max(1);
    let mut out = Vec::new();
    let mut hi = min - 1 + width;
    while hi < max {
        out.push(Some(hi));
        hi += width;
    }
    out.push(None);
    out
}

/// Pieces for several sessions: a table with one integer key and more rows than
/// two chunks is cut into key ranges of about a chunk each (by its smallest and
/// largest key and its row estimate; a range holding more rows is read in chunks
/// all the same), read side by side and delivered in key order.
async fn split(
    conn: &mut mysql_async::Conn,
    work: Vec<Piece>,
    reading: &Reading,
) -> Result<Vec<Piece>, SourceError> {
    let mut out = Vec::with_capacity(work.len());
    for piece in work {
        let Some(k) = int_key(&piece.table).filter(|_| piece.estimate > 2 * reading.chunk) else {
            out.push(piece);
            continue;
        };
        let t = &piece.table;
        let col = quote(&t.columns[k].name);
        let lower = piece
            .after
            .as_ref()
            .and_then(|a| a.first())
            .and_then(int_of);
        let cond = lower
            .map(|l| format!(" WHERE {col} > {l}"))
            .unwrap_or_default();
        let bounds: Option<(Option<String>, Option<String>)> = conn
            .query_first(format!(
                "SELECT MIN({col}), MAX({col}) FROM {}.{}{cond}",
                quote(&t.db),
                quote(&t.name)
            ))
            .await
            .map_err(SourceError::sql)?;
        let parse = |v: Option<String>| v.and_then(|v| v.parse::<i128>().ok());
        let Some((Some(min), Some(max))) = bounds.map(|(a, b)| (parse(a), parse(b))) else {
            out.push(piece);
            continue;
        };
        let his = ranges(min, max, piece.estimate.div_ceil(reading.chunk));
        let mut after = piece.after.clone();
        for (i, upto) in his.into_iter().enumerate() {
            out.push(Piece {
                table: t.clone(),
                estimate: piece.estimate,
                after: after.take(),
                upto,
                first: i == 0,
                fresh: piece.fresh && i == 0,
            });
            after = upto.map(|u| vec![int_value(u)]);
        }
    }
    Ok(out)
}

/// Read `work` with the snapshot's sessions, delivered in order
/// ([`super::ordered::read_in_order`]). Returns the rows read (None: the receiver
/// went away).
async fn read_pieces(
    sessions: Vec<mysql_async::Conn>,
    work: Vec<Piece>,
    reading: Reading,
    at: &Position,
    tx: &mpsc::Sender<SourceEvent>,
) -> Result<Option<u64>, SourceError> {
    let at = at.clone();
    let read = move |mut conn: mysql_async::Conn, piece: Piece, s: mpsc::Sender<SourceEvent>| {
        let at = at.clone();
        async move {
            let mut out = Chunks {
                tx: &s,
                table: &piece.table,
                estimate: piece.estimate,
                at: &at,
                fresh: piece.fresh,
                done: 0,
            };
            let go = read_piece(&mut conn, &reading, &piece, &mut out).await?;
            Ok(go.then_some(conn))
        }
    };
    let end = |mut conn: mysql_async::Conn| async move {
        let _ = conn.query_drop("COMMIT").await;
        let _ = conn.disconnect().await;
    };
    super::ordered::read_in_order(sessions, work, read, end, tx).await
}

/// Read one piece in key chunks into `out`. False: the receiver went away.
async fn read_piece(
    conn: &mut mysql_async::Conn,
    reading: &Reading,
    piece: &Piece,
    out: &mut Chunks<'_>,
) -> Result<bool, SourceError> {
    let table = &piece.table;
    let cols = table
        .columns
        .iter()
        .map(|c| quote(&c.name))
        .collect::<Vec<_>>()
        .join(", ");
    let from = format!("{}.{}", quote(&table.db), quote(&table.name));
    let Reading { chunk, zero_fail } = *reading;
    let key: Vec<String> = table
        .key
        .iter()
        .map(|i| quote(&table.columns[*i].name))
        .collect();
    let floats = table
        .columns
        .iter()
        .any(|c| matches!(c.kind, Kind::Float | Kind::Double));
    // A range's end: its one integer key up to a literal (only integers are cut).
    let upto = piece
        .upto
        .map(|u| format!("{} <= {u}", key.join(", ")))
        .filter(|_| key.len() == 1);
    let mut last: Option<Vec<Value>> = piece.after.clone();
    loop {
        let sql = if key.is_empty() {
            format!("SELECT {cols} FROM {from}")
        } else {
            let order = key.join(", ");
            let mut conds: Vec<String> = Vec::new();
            if last.is_some() {
                conds.push(format!("({order}) > ({})", vec!["?"; key.len()].join(", ")));
            }
            conds.extend(upto.clone());
            let cond = match conds.is_empty() {
                true => String::new(),
                false => format!(" WHERE {}", conds.join(" AND ")),
            };
            format!("SELECT {cols} FROM {from}{cond} ORDER BY {order} LIMIT {chunk}")
        };
        let params = last.clone().unwrap_or_default();
        let mut b = RowsBuilder::new(table.clone());
        let mut read = Read {
            b: &mut b,
            out,
            table,
            keyed: !key.is_empty(),
            chunk,
            zero_fail,
            in_chunk: 0,
            last_row: None,
        };
        // A query without a cursor (a table's first chunk, a keyless table) goes as
        // plain text when every column's text is exact (no FLOAT or DOUBLE): one round
        // trip, and no statement to prepare, for each of many small tables.
        let text = params.is_empty() && !floats;
        let sent = if text {
            let result = conn.query_iter(sql).await.map_err(SourceError::sql)?;
            read.rows(result).await?
        } else {
            let result = conn
                .exec_iter(sql, params)
                .await
                .map_err(SourceError::sql)?;
            read.rows(result).await?
        };
        if !sent {
            return Ok(false);
        }
        let (in_chunk, last_row) = (read.in_chunk, read.last_row);
        let last_row: Option<Vec<Value>> = last_row.map(|row| {
            table
                .key
                .iter()
                .map(|i| {
                    let v = row.as_ref(*i).unwrap_or(&Value::NULL);
                    // Typed as the binary protocol sends them: the cursor then
                    // compares as the column's type on any server, not as a string.
                    if text {
                        typed_text_value(v, &table.columns[*i].kind)
                    } else {
                        v.clone()
                    }
                })
                .collect()
        });
        if b.rows > 0 || (piece.first && out.done == 0) {
            let after = last_row
                .as_ref()
                .map(|k| k.iter().map(KeyValue::from_mysql).collect());
            if !out.send(&mut b, after).await {
                return Ok(false);
            }
        }
        if key.is_empty() || in_chunk < chunk {
            return Ok(true);
        }
        last = last_row;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every range's last key, with the ranges' (exclusive) starts: the cut covers
    /// every key from `min` once, in order.
    fn covers(min: i128, max: i128, n: u64) {
        let his = ranges(min, max, n);
        assert_eq!(his.last(), Some(&None), "the last range is open");
        let mut from = min - 1;
        for hi in his.iter().flatten() {
            assert!(*hi > from, "{min}..{max} / {n}: {his:?}");
            from = *hi;
        }
        assert!(from < max, "the open range holds the largest key");
        assert!(his.len() as u64 <= n.max(1), "{his:?}");
    }

    #[test]
    fn key_ranges_cover_every_key_once() {
        covers(0, 2999, 47);
        covers(5, 5, 10);
        covers(0, 3, 10);
        covers(i128::from(i64::MIN), i128::from(i64::MAX), 4096);
        covers(0, i128::from(u64::MAX), 3);
        assert_eq!(ranges(0, 99, 4), vec![Some(24), Some(49), Some(74), None]);
        assert_eq!(int_value(i128::from(u64::MAX)), Value::UInt(u64::MAX));
        assert_eq!(int_value(-5), Value::Int(-5));
    }

    #[test]
    fn definitions_compare_without_the_next_auto_increment_value() {
        let t = |ddl: &str| -> Definitions {
            (vec![("d".into(), "t".into(), 9, ddl.into())], Vec::new())
        };
        let a = "CREATE TABLE `t` (\n  `id` int(11) NOT NULL AUTO_INCREMENT,\n  PRIMARY KEY (`id`)\n) ENGINE=InnoDB AUTO_INCREMENT=5 DEFAULT CHARSET=utf8mb4";
        let b = a.replace("AUTO_INCREMENT=5", "AUTO_INCREMENT=17");
        assert!(same_definitions(&t(a), &t(&b)));
        assert!(!same_definitions(
            &t(a),
            &t(&a.replace("int(11)", "bigint(20)"))
        ));
        let mut renamed = t(a);
        renamed.0[0].1 = "u".into();
        assert!(!same_definitions(&t(a), &renamed));
        assert_eq!(
            without_auto_increment("x AUTO_INCREMENT=12 y AUTO_INCREMENT=3"),
            "x y"
        );
    }
}
