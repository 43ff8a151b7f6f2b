//! The binlog reader: MariaDB (and MySQL) replication protocol through mysql_async,
//! with MariaDB's own events read from their raw bytes, rows decoded straight into
//! Arrow, DDL applied to the schema history, and exact positions.

mod ddl;
mod raw;

use ddl::{literal_backslashes, query_text, sql_modes};
use raw::{binlog_name, ends_with_checksum, parse_gtid_list};

use super::config::Source;
use super::decode::{decode_row, BinCol, Cur, RowsBuilder, SourceTable};
use super::history::SchemaHistory;
use super::position::{Gtid, GtidState, Position};
use super::{Op, RowBatch, RowPos, SourceError, SourceEvent};
use futures::StreamExt;
use mysql_async::binlog::events::{EventData, RowsEventData, TableMapEvent};
use mysql_async::prelude::Queryable;
use mysql_async::BinlogStreamRequest;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// MariaDB event types mysql_async does not know.
const MARIA_ANNOTATE_ROWS: u8 = 160;
const MARIA_BINLOG_CHECKPOINT: u8 = 161;
const MARIA_GTID: u8 = 162;
/// XA_PREPARE_LOG_EVENT: ends an XA transaction's prepared group.
const XA_PREPARE: u8 = 38;
const MARIA_GTID_LIST: u8 = 163;
const MARIA_QUERY_COMPRESSED: u8 = 165;
const MARIA_DELETE_ROWS_COMPRESSED_V1: u8 = 171;
const HEARTBEAT: u8 = 27;
/// MariaDB GTID event flag: a statement outside BEGIN/COMMIT (DDL).
const FL_STANDALONE: u8 = 1;

/// A batch being built: table, op, builders (before/after for updates), positions,
/// and the cells of updates' after images the row image left out (unchanged).
type OpenBatch = (
    Arc<SourceTable>,
    Op,
    RowsBuilder,
    Option<RowsBuilder>,
    Vec<RowPos>,
    Vec<(u32, u32)>,
);

struct MappedTable {
    db: String,
    name: String,
    cols: Vec<BinCol>,
    /// Column names, when the server logs them (binlog_row_metadata=FULL).
    names: Option<Vec<String>>,
    /// The decoder's table, when captured.
    table: Option<Arc<SourceTable>>,
}

/// Where a read starts and how much of its first transaction was already delivered.
#[derive(Debug, Clone)]
pub enum ReadFrom {
    /// File and offset (with the GTID state known there, possibly empty).
    Position(Position),
    /// A MariaDB GTID state: the server finds the file and offset.
    Gtid(GtidState),
}

pub struct BinlogReader {
    pub src: Arc<Source>,
    pub history: SchemaHistory,
    tx: mpsc::Sender<SourceEvent>,
    tables: HashMap<u64, MappedTable>,
    decoders: HashMap<(String, String), Arc<SourceTable>>,
    // Position state.
    file: String,
    gtid: GtidState,
    in_txn: bool,
    /// The type of the event before this one (an XA PREPARE ends its group without
    /// a commit).
    prev_type: u8,
    txn_start: u64,
    txn_gtid_before: GtidState,
    pending_gtid: Option<(Gtid, bool)>,
    /// The last transaction boundary not yet announced.
    pending_commit: Option<Position>,
    ordinal: u64,
    /// Changes of the first transaction to skip (resume inside a transaction).
    skip: u64,
    skip_offset: Option<u64>,
    // Batching.
    open: Vec<OpenBatch>,
    txns: Vec<Position>,
    buffered_bytes: usize,
    last_flush: Instant,
    /// When a transaction boundary (a `Commit`) was last delivered.
    last_boundary: Instant,
    pub rows_decoded: u64,
    /// Source time of the last event (unix seconds).
    commit_ts: u32,
    /// Tables a resumed snapshot read at a later point (their earlier changes are
    /// in its copy).
    pub seen: Option<super::snapshot::SeenBySnapshot>,
    /// The host name this reader registers with ([`crate::source::run::replica_name`]).
    pub replica_name: String,
    /// Tables the job does not capture whose rows this run knows.
    outside: crate::source::Outside,
}

impl BinlogReader {
    pub fn new(src: Arc<Source>, history: SchemaHistory, tx: mpsc::Sender<SourceEvent>) -> Self {
        BinlogReader {
            src,
            history,
            tx,
            tables: HashMap::new(),
            decoders: HashMap::new(),
            file: String::new(),
            replica_name: "lakeshift".into(),
            outside: crate::source::Outside::new(true),
            gtid: GtidState::default(),
            in_txn: false,
            prev_type: 0,
            txn_start: 0,
            txn_gtid_before: GtidState::default(),
            pending_gtid: None,
            pending_commit: None,
            ordinal: 0,
            skip: 0,
            skip_offset: None,
            open: Vec::new(),
            txns: Vec::new(),
            buffered_bytes: 0,
            last_flush: Instant::now(),
            last_boundary: Instant::now(),
            rows_decoded: 0,
            commit_ts: 0,
            seen: None,
        }
    }

    fn position_at(&self, offset: u64, ordinal: u64, gtid: &GtidState) -> Position {
        Position {
            gtid: gtid.clone(),
            file: self.file.clone(),
            offset,
            ordinal,
        }
    }

    /// Read from `from` until the receiver is dropped (Ok) or an error.
    /// `stop_at_end`: stop at the current end of the binlog instead of waiting.
    pub async fn run(&mut self, from: ReadFrom, stop_at_end: bool) -> Result<(), SourceError> {
        let mut conn = mysql_async::Conn::new(self.src.opts())
            .await
            .map_err(|e| SourceError::connect(&self.src.at(), e))?;
        conn.query_drop(format!(
            "SET @master_heartbeat_period = {}",
            u64::from(self.src.binlog().heartbeat_seconds) * 1_000_000_000
        ))
        .await
        .map_err(SourceError::sql)?;
        // Real MariaDB GTID events (not BEGIN stand-ins) and GTID resume.
        conn.query_drop("SET @mariadb_slave_capability = 4")
            .await
            .map_err(SourceError::sql)?;
        let (file, pos) = match &from {
            ReadFrom::Position(p) => {
                self.gtid = p.gtid.clone();
                self.skip = p.ordinal;
                self.skip_offset = Some(p.offset);
                (p.file.clone(), p.offset)
            }
            ReadFrom::Gtid(g) => {
                conn.query_drop(format!("SET @slave_connect_state = '{g}'"))
                    .await
                    .map_err(SourceError::sql)?;
                conn.query_drop("SET @slave_gtid_strict_mode = 0")
                    .await
                    .map_err(SourceError::sql)?;
                self.gtid = g.clone();
                (String::new(), 4)
            }
        };
        self.file = file.clone();
        let mut req = BinlogStreamRequest::new(self.src.binlog().server_id)
            .with_hostname(self.replica_name.as_bytes())
            .with_filename(file.as_bytes())
            .with_pos(pos.max(4));
        if stop_at_end {
            req = req.with_non_blocking();
        }
        let mut stream = conn
            .get_binlog_stream(req)
            .await
            .map_err(|e| SourceError::classify(e, &from))?;
        loop {
            // When the server goes quiet, what is buffered is delivered at once (up to
            // the last transaction boundary) instead of waiting for the next event.
            let ev = match tokio::time::timeout(Duration::from_millis(50), stream.next()).await {
                Err(_) => {
                    if !self.in_txn
                        && (!self.open.is_empty() || self.pending_commit.is_some())
                        && !self.flush().await?
                    {
                        return Ok(());
                    }
                    // The pipeline stopped (SIGTERM) while the server is quiet: end
                    // now, not at the next event or heartbeat.
                    if self.tx.is_closed() {
                        return Ok(());
                    }
                    continue;
                }
                Ok(None) => break,
                Ok(Some(ev)) => ev,
            };
            let ev = ev.map_err(|e| SourceError::classify(e, &from))?;
            if !self.event(&ev).await? {
                return Ok(());
            }
        }
        // End of a non-blocking read: deliver what is buffered.
        self.flush().await?;
        if !stop_at_end {
            // A blocking read ends only when the server ends it (a shutdown, which
            // closes replication streams cleanly): a lost connection, read on from
            // the last checkpoint once the server is back; it was taken for the
            // end of the binlog, and the job ended as if done.
            return Err(SourceError::Lost(
                "the server ended the binlog stream (shutting down?)".into(),
            ));
        }
        Ok(())
    }

    async fn send(&self, e: SourceEvent) -> bool {
        self.tx.send(e).await.is_ok()
    }

    /// Handle one event; false when the receiver is gone.
    async fn event(
        &mut self,
        ev: &mysql_async::binlog::events::Event,
    ) -> Result<bool, SourceError> {
        let h = ev.header();
        let ty = h.event_type_raw();
        let prev_type = std::mem::replace(&mut self.prev_type, ty);
        if h.timestamp() != 0 {
            self.commit_ts = h.timestamp();
        }
        let end = h.log_pos() as u64;
        let start = end.saturating_sub(h.event_size() as u64);
        match ty {
            MARIA_GTID => {
                let d = ev.data();
                if d.len() < 13 {
                    return Err(SourceError::Protocol("short MariaDB GTID event".into()));
                }
                let seq = u64::from_le_bytes(d[0..8].try_into().unwrap());
                let domain = u32::from_le_bytes(d[8..12].try_into().unwrap());
                let flags = d[12];
                let g = Gtid {
                    domain,
                    server: h.server_id(),
                    seq,
                };
                let standalone = flags & FL_STANDALONE != 0;
                // Before a statement of its own (a DDL): what came before is
                // delivered with its commit, so a statement that stops the job does
                // not leave it read past its boundary (nothing would commit).
                if standalone && !self.in_txn && !self.flush().await? {
                    return Ok(false);
                }
                self.begin(start);
                self.pending_gtid = Some((g, standalone));
                return Ok(true);
            }
            MARIA_GTID_LIST => {
                // The GTID state at the start of this file, when we know none yet.
                if self.gtid.is_empty() {
                    if let Some(st) = parse_gtid_list(ev.data()) {
                        self.gtid = st;
                    }
                }
                return Ok(true);
            }
            MARIA_ANNOTATE_ROWS | MARIA_BINLOG_CHECKPOINT => return Ok(true),
            MARIA_QUERY_COMPRESSED..=MARIA_DELETE_ROWS_COMPRESSED_V1 => {
                return Err(SourceError::Protocol(format!(
                    "compressed binlog event (type {ty}) at {}:{start}: set log_bin_compress=OFF on the server",
                    self.file
                )))
            }
            HEARTBEAT => {
                if !self.in_txn {
                    if !self.flush().await? {
                        return Ok(false);
                    }
                    let p = self
                        .pending_commit
                        .clone()
                        .unwrap_or_else(|| self.position_at(end.max(start), 0, &self.gtid.clone()));
                    return Ok(self.send(SourceEvent::Heartbeat { position: p }).await);
                }
                return Ok(true);
            }
            _ => {}
        }
        let data = ev
            .read_data()
            .map_err(|e| SourceError::Protocol(format!("event at {}:{start}: {e}", self.file)))?;
        let Some(data) = data else { return Ok(true) };
        match data {
            EventData::RotateEvent(r) => {
                // A transaction's events never span two files: one still open when
                // the binlog moves on was cut off (the server stopped while writing
                // it, and rolled it back) at an event boundary.
                if self.in_txn && prev_type != XA_PREPARE {
                    return Err(SourceError::CutOff {
                        position: self
                            .position_at(self.txn_start, 0, &self.txn_gtid_before.clone())
                            .to_string(),
                        detail: format!(
                            "the transaction at {}:{} has no commit before the binlog moves on to {}",
                            self.file,
                            self.txn_start,
                            String::from_utf8_lossy(r.name_raw())
                        ),
                    });
                }
                if !self.flush().await? {
                    return Ok(false);
                }
                // The first (fake) ROTATE can carry a checksum the event reader did not
                // strip (it comes before the format description): strip it when the
                // last 4 bytes are the CRC32 of the event.
                self.file = binlog_name(r.name_raw(), ends_with_checksum(&h, ev.data()));
                // Table ids are the server's of one run: a new file may follow a
                // restart, which hands the same ids to other tables or definitions.
                self.tables.clear();
            }
            EventData::QueryEvent(q) => {
                let sql = query_text(&q)?;
                let modes = sql_modes(&q);
                // (Under NO_BACKSLASH_ESCAPES a backslash in a string is itself: the
                // statement as one with escapes reads it.)
                let sql = if modes.no_backslash_escapes && sql.contains('\\') {
                    literal_backslashes(&sql, modes)
                } else {
                    sql
                };
                let trimmed = sql.trim();
                if trimmed.eq_ignore_ascii_case("BEGIN") {
                    self.begin(start);
                } else if trimmed.eq_ignore_ascii_case("COMMIT") {
                    return self.commit(end).await;
                } else if trimmed.eq_ignore_ascii_case("ROLLBACK") {
                    // A rolled back transaction logged (non-transactional tables).
                    return self.commit(end).await;
                } else {
                    let standalone = self.pending_gtid.map(|(_, s)| s).unwrap_or(!self.in_txn);
                    if !self.in_txn {
                        // (As at a standalone GTID above, for a server without.)
                        if !self.flush().await? {
                            return Ok(false);
                        }
                        self.begin(start);
                    }
                    let db = q.schema().into_owned();
                    // Row changes logged as a statement cannot be mirrored: never dropped.
                    if let Some(table) = self.statement_logged_change(&db, trimmed) {
                        let at = self.position_at(start, 0, &self.txn_gtid_before.clone());
                        return Err(SourceError::StatementLogged {
                            position: at.to_string(),
                            table,
                            statement: match trimmed.char_indices().nth(300) {
                                Some((i, _)) => format!("{}...", &trimmed[..i]),
                                None => trimmed.to_owned(),
                            },
                        });
                    }
                    if !self.ddl(&db, modes, trimmed).await? {
                        return Ok(false);
                    }
                    if standalone {
                        return self.commit(end).await;
                    }
                }
            }
            EventData::XidEvent(_) => return self.commit(end).await,
            EventData::TableMapEvent(tme) => self.table_map(&tme)?,
            EventData::RowsEvent(re) => {
                if !self.in_txn {
                    self.begin(start);
                }
                return self.rows(&re, start).await;
            }
            _ => {}
        }
        Ok(true)
    }

    fn begin(&mut self, start: u64) {
        if self.in_txn {
            return;
        }
        self.in_txn = true;
        self.txn_start = start;
        self.txn_gtid_before = self.gtid.clone();
        self.ordinal = 0;
        if self.skip_offset.is_some_and(|o| o != start) {
            // Resumed at a boundary, or past the transaction: nothing to skip.
            self.skip = 0;
        }
        self.skip_offset = None;
        self.txns
            .push(self.position_at(start, 0, &self.gtid.clone()));
    }

    async fn commit(&mut self, end: u64) -> Result<bool, SourceError> {
        if let Some((g, _)) = self.pending_gtid.take() {
            self.gtid.apply(g);
        }
        self.in_txn = false;
        self.skip = 0;
        self.pending_commit = Some(self.position_at(end, 0, &self.gtid.clone()));
        // Deliver at commits once enough is buffered or some time passed since the
        // last delivery, or since the last boundary delivered: a backlog read fast
        // fills batches inside transactions more often than every 100 ms, and
        // without the second clock no boundary reached the pipeline, which then
        // checkpointed only when over its memory budget (inside a transaction).
        if self.buffered_bytes >= self.src.binlog().batch_bytes / 4
            || self.last_flush.elapsed() >= Duration::from_millis(100)
            || self.last_boundary.elapsed() >= Duration::from_millis(100)
        {
            return self.flush().await;
        }
        Ok(true)
    }

    /// Deliver every open batch. Returns false when the receiver is gone.
    pub async fn flush(&mut self) -> Result<bool, SourceError> {
        self.last_flush = Instant::now();
        self.buffered_bytes = 0;
        let open = std::mem::take(&mut self.open);
        let txns = std::mem::take(&mut self.txns);
        let txns = Arc::new(txns);
        // The transaction in progress continues in the next batches.
        if self.in_txn {
            self.txns
                .push(self.position_at(self.txn_start, 0, &self.txn_gtid_before.clone()));
        }
        let commit = if self.in_txn {
            None
        } else {
            self.pending_commit.take()
        };
        let n = open.len();
        for (i, (table, op, mut a, b, positions, unchanged)) in open.into_iter().enumerate() {
            let first = a.finish();
            let (before, after) = match (op, b) {
                (Op::Insert, _) => (None, Some(first)),
                (Op::Delete, _) => (Some(first), None),
                (Op::Update, Some(mut after)) => (Some(first), Some(after.finish())),
                (Op::Update, None) => unreachable!("updates keep two builders"),
            };
            // Key columns an update's after image left out (MINIMAL) are its
            // unchanged key: taken from the before image, so the row keeps its key.
            let (after, unchanged) = match (&before, after) {
                (Some(b), Some(a)) if !unchanged.is_empty() => {
                    let (a, u) = keys_from_before(&table, b, a, unchanged)
                        .map_err(|e| SourceError::Decode(e.to_string()))?;
                    (Some(a), u)
                }
                (_, a) => (a, unchanged),
            };
            let batch = RowBatch {
                table,
                op,
                before,
                after,
                positions,
                txns: txns.clone(),
                unchanged,
                complete: i + 1 == n,
            };
            if !self.send(SourceEvent::Rows(batch)).await {
                return Ok(false);
            }
        }
        // At a transaction boundary: everything before it is delivered.
        if let Some(position) = commit {
            self.last_boundary = Instant::now();
            return Ok(self
                .send(SourceEvent::Commit {
                    position,
                    at: self.commit_ts,
                })
                .await);
        }
        Ok(true)
    }

    fn table_map(&mut self, tme: &TableMapEvent<'_>) -> Result<(), SourceError> {
        let id = tme.table_id();
        let db = tme.database_name().into_owned();
        let name = tme.table_name().into_owned();
        let mut cols = Vec::with_capacity(tme.columns_count() as usize);
        for i in 0..tme.columns_count() as usize {
            let ty = tme
                .get_raw_column_type(i)
                .map_err(|e| SourceError::Protocol(format!("TABLE_MAP of {db}.{name}: {e}")))?
                .map(|t| t as u8)
                .unwrap_or(0);
            let meta = tme.get_column_metadata(i).unwrap_or(&[]);
            let mut m = [0u8; 2];
            for (j, b) in meta.iter().take(2).enumerate() {
                m[j] = *b;
            }
            cols.push(BinCol { ty, meta: m });
        }
        let mut names = None;
        for f in tme.iter_optional_meta().flatten() {
            if let mysql_async::binlog::events::OptionalMetadataField::ColumnName(n) = f {
                names = Some(
                    n.iter_names()
                        .filter_map(Result::ok)
                        .map(|c| c.name().into_owned())
                        .collect(),
                );
            }
        }
        // The same table as mapped before (most rows events): its decoder stays. A
        // restarted server reuses ids, so the columns are compared, not only counted.
        if let Some(m) = self.tables.get(&id) {
            if m.db == db && m.name == name && m.cols == cols && m.names == names {
                return Ok(());
            }
        }
        if !self.src.captures(&db, &name) {
            self.outside.written(&db, &name);
        }
        self.tables.insert(
            id,
            MappedTable {
                db,
                name,
                cols,
                names,
                table: None,
            },
        );
        Ok(())
    }

    fn decoder(&mut self, db: &str, name: &str) -> Result<Option<Arc<SourceTable>>, SourceError> {
        if !self.src.captures(db, name) {
            return Ok(None);
        }
        let key = (db.to_owned(), name.to_owned());
        if let Some(t) = self.decoders.get(&key) {
            return Ok(Some(t.clone()));
        }
        let ir = self.history.table(db, name).ok_or_else(|| {
            SourceError::Schema(format!(
                "rows for {db}.{name}, which the schema history does not know"
            ))
        })?;
        let over = self
            .src
            .key_overrides
            .get(&format!("{db}.{name}"))
            .map(Vec::as_slice);
        let t = Arc::new(SourceTable::from_ir(db, ir, over).map_err(|e| SourceError::Schema(e.0))?);
        self.decoders.insert(key, t.clone());
        Ok(Some(t))
    }

    async fn rows(&mut self, re: &RowsEventData<'_>, start: u64) -> Result<bool, SourceError> {
        let id = re.table_id();
        let Some(m) = self.tables.get(&id) else {
            return Err(SourceError::Protocol(format!(
                "rows event at {}:{start} for unknown table id {id}",
                self.file
            )));
        };
        let table = match &m.table {
            Some(t) => t.clone(),
            None => match self.checked_decoder(id, start)? {
                Some(t) => t,
                // Not captured: nothing to do.
                None => return Ok(true),
            },
        };
        let cols = self.tables[&id].cols.clone();
        let here = self.position_at(self.txn_start, 0, &GtidState::default());
        let seen = self
            .seen
            .as_ref()
            .is_some_and(|s| s.saw(&table.db, &table.name, &here));
        let op = match re {
            RowsEventData::WriteRowsEvent(_) | RowsEventData::WriteRowsEventV1(_) => Op::Insert,
            RowsEventData::UpdateRowsEvent(_)
            | RowsEventData::UpdateRowsEventV1(_)
            | RowsEventData::PartialUpdateRowsEvent(_) => Op::Update,
            RowsEventData::DeleteRowsEvent(_) | RowsEventData::DeleteRowsEventV1(_) => Op::Delete,
        };
        let before: Vec<bool> = re
            .columns_before_image()
            .map(|b| b.iter().take(cols.len()).map(|x| *x).collect())
            .unwrap_or_default();
        let after: Vec<bool> = re
            .columns_after_image()
            .map(|b| b.iter().take(cols.len()).map(|x| *x).collect())
            .unwrap_or_default();
        // A row image that is not FULL (binlog_row_image MINIMAL or NOBLOB, for the
        // server or the session that made the change): checked per event. A
        // generated column the target computes itself is never needed.
        // (Copies of the bitmaps only for such a table: this runs per row event.)
        let computes =
            self.src.generated_computed && table.ir.columns.iter().any(|c| c.generated.is_some());
        let computed = |img: &[bool]| -> Vec<bool> {
            img.iter()
                .enumerate()
                .map(|(i, &p)| {
                    p || table
                        .ir
                        .columns
                        .get(i)
                        .is_some_and(|c| c.generated.is_some())
                })
                .collect()
        };
        let (b2, a2);
        let (before_img, after_img) = if computes {
            (b2, a2) = (computed(&before), computed(&after));
            (&b2[..], &a2[..])
        } else {
            (&before[..], &after[..])
        };
        let left_out = row_image_gaps(&table, op, before_img, after_img).map_err(|why| {
            SourceError::RowImage(format!(
                "{}.{} at {}:{start}: {why}",
                table.db, table.name, self.file
            ))
        })?;
        let zero_fail = self.src.binlog().zero_dates == super::config::ZeroDates::Fail;
        // An open builder for this table and op, or a new one (a different op of the
        // same table closes the batches so far, keeping the table's order).
        let idx = match self.open.iter().position(|o| Arc::ptr_eq(&o.0, &table)) {
            Some(i) if self.open[i].1 == op => i,
            Some(_) => {
                if !self.flush().await? {
                    return Ok(false);
                }
                self.open_builder(&table, op)
            }
            None => self.open_builder(&table, op),
        };
        let data = re.rows_data();
        let mut cur = Cur { buf: data, pos: 0 };
        let txn = (self.txns.len() - 1) as u32;
        // Rows delivered before a restart are decoded (to move the cursor) into a
        // scratch builder and dropped.
        let mut scratch: Option<(RowsBuilder, RowsBuilder)> = None;
        while cur.pos < data.len() {
            self.ordinal += 1;
            let skipping = self.skip > 0 || seen;
            let entry = &mut self.open[idx];
            let (first, second) = if skipping {
                let s = scratch.get_or_insert_with(|| {
                    (
                        RowsBuilder::new(table.clone()),
                        RowsBuilder::new(table.clone()),
                    )
                });
                (&mut s.0, Some(&mut s.1))
            } else {
                (&mut entry.2, entry.3.as_mut())
            };
            let res = match op {
                Op::Insert => decode_row(&mut cur, &cols, &after, first, zero_fail),
                Op::Delete => decode_row(&mut cur, &cols, &before, first, zero_fail),
                Op::Update => {
                    decode_row(&mut cur, &cols, &before, first, zero_fail).and_then(|_| {
                        decode_row(
                            &mut cur,
                            &cols,
                            &after,
                            second.expect("update builder"),
                            zero_fail,
                        )
                    })
                }
            };
            res.map_err(|e| SourceError::Decode(format!("at {}:{start}: {e}", self.file)))?;
            if skipping {
                self.skip = self.skip.saturating_sub(1);
                continue;
            }
            self.rows_decoded += 1;
            let row = self.open[idx].4.len() as u32;
            self.open[idx]
                .5
                .extend(left_out.iter().map(|&c| (row, c as u32)));
            self.open[idx].4.push(RowPos {
                txn,
                ordinal: self.ordinal as u32,
                at: self.commit_ts,
            });
        }
        let bytes: usize = self
            .open
            .iter()
            .map(|o| o.2.bytes + o.3.as_ref().map_or(0, |b| b.bytes))
            .sum();
        self.buffered_bytes = bytes;
        if bytes >= self.src.binlog().batch_bytes {
            return self.flush().await;
        }
        Ok(true)
    }

    /// The decoder of a mapped table on its first rows, checked against the binlog's
    /// own column names and count (None: the table is not captured).
    fn checked_decoder(
        &mut self,
        id: u64,
        start: u64,
    ) -> Result<Option<Arc<SourceTable>>, SourceError> {
        let (db, name) = (self.tables[&id].db.clone(), self.tables[&id].name.clone());
        let Some(t) = self.decoder(&db, &name)? else {
            return Ok(None);
        };
        if let Some(names) = &self.tables[&id].names {
            let ours: Vec<&str> = t.columns.iter().map(|c| c.name.as_str()).collect();
            let same = names.len() == ours.len()
                && names
                    .iter()
                    .zip(&ours)
                    .all(|(a, b)| a.eq_ignore_ascii_case(b));
            if !same {
                return Err(SourceError::Schema(format!(
                    "{db}.{name} at {}:{start}: the binlog's columns {names:?} differ from the schema history's {ours:?}",
                    self.file
                )));
            }
        }
        if t.columns.len() != self.tables[&id].cols.len() {
            return Err(SourceError::Schema(format!(
                "{db}.{name}: the binlog has {} columns, the schema history {} ({})",
                self.tables[&id].cols.len(),
                t.columns.len(),
                self.file
            )));
        }
        self.tables.get_mut(&id).expect("mapped").table = Some(t.clone());
        Ok(Some(t))
    }

    fn open_builder(&mut self, table: &Arc<SourceTable>, op: Op) -> usize {
        let a = RowsBuilder::new(table.clone());
        let b = (op == Op::Update).then(|| RowsBuilder::new(table.clone()));
        self.open
            .push((table.clone(), op, a, b, Vec::new(), Vec::new()));
        self.open.len() - 1
    }
}

/// The columns an update's after image leaves out (unchanged values: MINIMAL and
/// NOBLOB row images), or why the event cannot be mirrored: an insert that leaves
/// columns out (their values are the server's defaults, which the binlog does not
/// carry), a before image without the table's key (or, without a key, without every
/// column), an update of a keyless table that leaves columns out.
pub(crate) fn row_image_gaps(
    table: &SourceTable,
    op: Op,
    before: &[bool],
    after: &[bool],
) -> Result<Vec<usize>, String> {
    let n = table.columns.len();
    let has = |img: &[bool], i: usize| img.get(i).copied().unwrap_or(false);
    let names = |img: &[bool]| -> Vec<&str> {
        (0..n)
            .filter(|&i| !has(img, i))
            .map(|i| table.columns[i].name.as_str())
            .collect()
    };
    const FIX: &str = "set binlog_row_image=FULL on the server and in every session that writes captured tables (SET GLOBAL binlog_row_image=FULL; sessions that set it themselves keep their own), then take a new snapshot (`lakeshift drop-job --config JOB --apply`, drop or empty the target tables, and run the job again)";
    let identifies = |img: &[bool]| -> bool {
        if table.key.is_empty() {
            (0..n).all(|i| has(img, i))
        } else {
            table.key.iter().all(|&i| has(img, i))
        }
    };
    match op {
        Op::Insert => {
            let missing = names(after);
            if !missing.is_empty() {
                return Err(format!(
                    "an insert's row image leaves out columns {missing:?} (binlog_row_image is not FULL): their values are not in the binlog; {FIX}"
                ));
            }
            Ok(Vec::new())
        }
        Op::Delete | Op::Update if !identifies(before) => Err(format!(
            "the row image before the change leaves out columns {:?} that identify the row (binlog_row_image is not FULL); {FIX}",
            names(before)
        )),
        Op::Delete => Ok(Vec::new()),
        Op::Update => {
            let left: Vec<usize> = (0..n).filter(|&i| !has(after, i)).collect();
            if !left.is_empty() && table.key.is_empty() {
                return Err(format!(
                    "an update of a table without a key leaves out columns {:?} (binlog_row_image is not FULL): the row cannot be rebuilt; {FIX}",
                    names(after)
                ));
            }
            Ok(left)
        }
    }
}

/// An update batch's after image with each key cell the row image left out taken
/// from the before image (the key did not change), and the unchanged cells that are
/// left (non-key columns: the target's previous values).
fn keys_from_before(
    table: &SourceTable,
    before: &arrow_array::RecordBatch,
    after: arrow_array::RecordBatch,
    unchanged: Vec<(u32, u32)>,
) -> Result<(arrow_array::RecordBatch, Vec<(u32, u32)>), arrow_schema::ArrowError> {
    let (keys, rest): (Vec<_>, Vec<_>) = unchanged
        .into_iter()
        .partition(|(_, c)| table.key.contains(&(*c as usize)));
    if keys.is_empty() {
        return Ok((after, rest));
    }
    let mut cols = after.columns().to_vec();
    for &k in &table.key {
        let mut mask = vec![false; after.num_rows()];
        let mut any = false;
        for &(r, c) in &keys {
            if c as usize == k {
                mask[r as usize] = true;
                any = true;
            }
        }
        if any {
            let mask = arrow_array::BooleanArray::from(mask);
            cols[k] = arrow_select::zip::zip(&mask, before.column(k), after.column(k))?;
        }
    }
    Ok((
        arrow_array::RecordBatch::try_new(after.schema(), cols)?,
        rest,
    ))
}
