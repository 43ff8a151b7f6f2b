//! The schema-change topic: DDL queued as read, delivered in order with the data
//! topics (before a later message of its table, or once its table is caught up).

use super::*;

/// A DDL from the schema-change topic, not yet delivered.
#[derive(Debug, Clone)]
pub(super) struct Ddl {
    pub(super) position: Position,
    pub(super) db: String,
    pub(super) sql: String,
    /// Captured tables it names (lower-cased `db.table`); empty: not yet known.
    pub(super) tables: BTreeSet<String>,
}

/// Read the schema-change topic up to its end as of now into the DDL queue.
pub(super) fn read_schema_to_end(
    schema: &BaseConsumer,
    topic: &str,
    next: &mut i64,
    queue: &mut Vec<Ddl>,
) -> Result<(), SourceError> {
    let (_, end) = schema
        .fetch_watermarks(topic, 0, Duration::from_secs(30))
        .map_err(|e| {
            SourceError::Connect(format!("kafka: the schema-change topic {topic}: {e}"))
        })?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while *next < end {
        match schema.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => {
                *next = m.offset() + 1;
                queue_ddl(queue, m.payload())?
            }
            Some(Err(e)) => return Err(kerr(e)),
            None if Instant::now() > deadline => {
                return Err(SourceError::Connect(format!(
                    "kafka: the schema-change topic {topic} did not deliver up to offset {end} within 60 s"
                )))
            }
            None => {}
        }
    }
    Ok(())
}

/// Add a schema-change message to the DDL queue (kept in source-position order).
pub(super) fn queue_ddl(queue: &mut Vec<Ddl>, bytes: Option<&[u8]>) -> Result<(), SourceError> {
    let Some(bytes) = bytes else {
        return Ok(());
    };
    let v: J = serde_json::from_slice(bytes)
        .map_err(|e| SourceError::Schema(format!("schema-change topic: not JSON: {e}")))?;
    let v = payload(v);
    let sql = v
        .get("ddl")
        .and_then(J::as_str)
        .ok_or_else(|| SourceError::Schema("schema-change topic: a message without `ddl`".into()))?
        .to_owned();
    let position = v
        .get("source")
        .and_then(position_of)
        .map(|mut p| {
            p.ordinal = 0;
            p
        })
        .ok_or_else(|| {
            SourceError::Schema(format!(
                "schema-change topic: `{sql}` has no source position"
            ))
        })?;
    let db = v
        .get("databaseName")
        .and_then(J::as_str)
        .unwrap_or_default()
        .to_owned();
    // The tables it names, from Debezium's tableChanges (id `"db"."table"`) and from
    // the statement itself (tableChanges may be empty, or name only the new name of
    // a renamed table).
    let mut tables: BTreeSet<String> = v
        .get("tableChanges")
        .and_then(J::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|c| c.get("id").and_then(J::as_str))
                .map(|id| id.replace('"', "").to_lowercase())
                .collect()
        })
        .unwrap_or_default();
    tables.extend(crate::source::history::tables_named(&db, &sql));
    let d = Ddl {
        position,
        db,
        sql,
        tables,
    };
    let at = queue.partition_point(|x| x.position <= d.position);
    queue.insert(at, d);
    Ok(())
}

/// Deliver (apply to the history and send) queued DDL for which `ready` holds, in
/// order. False: the engine is gone.
pub(super) async fn deliver_ddl(
    src: &crate::source::config::Source,
    history: &mut SchemaHistory,
    queue: &mut Vec<Ddl>,
    tables: &mut HashMap<(String, String), Arc<SourceTable>>,
    tx: &mpsc::Sender<SourceEvent>,
    ready: impl Fn(&Ddl) -> bool,
) -> Result<bool, SourceError> {
    // A DDL that is ready takes the earlier DDL on any of its tables with it (the
    // history applies each table's DDL in source order: a DDL on two tables may be
    // ready for one of them first).
    let mut go: Vec<bool> = queue.iter().map(&ready).collect();
    for i in (0..queue.len()).rev() {
        if go[i] {
            for j in 0..i {
                if !go[j] && !queue[j].tables.is_disjoint(&queue[i].tables) {
                    go[j] = true;
                }
            }
        }
    }
    let mut i = 0;
    while i < queue.len() {
        if !go[i] {
            i += 1;
            continue;
        }
        go.remove(i);
        let d = queue.remove(i);
        let db_opt = (!d.db.is_empty()).then_some(d.db.as_str());
        let out = match history.apply(&d.position, db_opt, false, &d.sql) {
            Ok(o) => o,
            Err(e) if !src.concerns(&e.tables, &d.db) => {
                tracing::info!(
                    "kafka: DDL at {} outside the captured tables skipped: {}",
                    d.position,
                    e.message
                );
                continue;
            }
            Err(e) if src.skip_unparsed_ddl => {
                let at = Position {
                    ordinal: 1,
                    ..d.position.clone()
                };
                let ev = crate::source::unparsed(&at, &d.db, &d.sql, &e);
                if tx.send(ev).await.is_err() {
                    return Ok(false);
                }
                continue;
            }
            Err(e) => {
                return Err(SourceError::Ddl {
                    position: d.position.to_string(),
                    ddl: d.sql,
                    reason: e.message,
                })
            }
        };
        tables.clear();
        let captured: Vec<ddl_core::SchemaChange> = out
            .changes
            .into_iter()
            .filter(|c| {
                let hit = |t: &ddl_core::TableName| {
                    src.captures(t.schema.as_deref().unwrap_or(&d.db), &t.name)
                };
                c.table().is_some_and(hit)
                    || matches!(c, ddl_core::SchemaChange::RenameTable { to, .. } if hit(to))
            })
            .collect();
        if captured.is_empty() {
            continue;
        }
        let mut after: Vec<ddl_core::Table> = Vec::new();
        for c in &captured {
            let mut names: Vec<&ddl_core::TableName> = c.table().into_iter().collect();
            if let ddl_core::SchemaChange::RenameTable { to, .. } = c {
                names.push(to);
            }
            for n in names {
                if let Some(t) = history.table(n.schema.as_deref().unwrap_or(&d.db), &n.name) {
                    if !after.iter().any(|a| a.name == t.name) {
                        after.push(t.clone());
                    }
                }
            }
        }
        let names = captured
            .iter()
            .filter_map(|c| c.table().map(|t| t.to_string()))
            .collect();
        let ev = SourceEvent::Schema {
            position: Position {
                ordinal: 1,
                ..d.position.clone()
            },
            db: d.db.clone(),
            ddl: d.sql.clone(),
            changes: captured,
            tables: names,
            notes: out.notes,
            after,
        };
        if tx.send(ev).await.is_err() {
            return Ok(false);
        }
    }
    Ok(true)
}
