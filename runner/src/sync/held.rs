//! Changes held for parked Iceberg tables (the `park` DDL policy).
//!
//! While a DDL on a table is parked, that table's later changes (row batches, and any
//! DDL queued behind the parked one) are kept in order, per checkpoint, in
//! `<state>/held-rows/<ns.table>/<checkpoint>.json`: row images as Arrow IPC, the
//! table definition they were decoded with, each row's source position, and for a
//! Kafka source the partition offset the message ends at. A checkpoint's file is
//! written (durably) before the checkpoint's state, so after a crash the files of
//! checkpoints newer than the state are dropped (their changes are read again from the
//! source) and the older ones stay.
//!
//! Releasing (`lakeshift ddl-log --resolve N`) replays the held changes through the
//! engine's normal path: rows at or below a table's watermark and DDL at or below its
//! schema position are recognised as done, so a crash during a release repeats
//! nothing.

use super::ddllog::write_durably;
use crate::source::decode::SourceTable;
use crate::source::position::Position;
use crate::source::{Op, RowBatch, RowPos};
use crate::sync::error::SyncError;
use arrow_array::RecordBatch;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One batch of row changes, as read from the source.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HeldBatch {
    pub db: String,
    /// The definition the rows were decoded with.
    pub table: ddl_core::Table,
    pub op: Op,
    /// Each row's (transaction index, ordinal, source time).
    pub rows: Vec<(u32, u32, u32)>,
    pub txns: Vec<Position>,
    /// Arrow IPC stream, base64.
    pub before: Option<String>,
    pub after: Option<String>,
    /// Cells of `after` the source left unchanged (row, column).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unchanged: Vec<(u32, u32)>,
}

/// Where a Kafka message ends: `topic/partition` and the offset after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KafkaAt {
    pub part: String,
    pub next: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum HeldItem {
    /// The row batches of one source event (a Kafka message: all of its batches).
    Rows {
        batches: Vec<HeldBatch>,
        kafka: Option<KafkaAt>,
    },
    /// A DDL event (the parked one, or one queued behind it).
    Ddl {
        position: Position,
        sql: String,
        changes: Vec<ddl_core::SchemaChange>,
        after: Vec<ddl_core::Table>,
    },
}

fn ipc(b: &RecordBatch) -> Result<String, SyncError> {
    let mut buf = Vec::new();
    {
        let mut w = arrow_ipc::writer::StreamWriter::try_new(&mut buf, &b.schema())
            .map_err(|e| e.to_string())?;
        w.write(b).map_err(|e| e.to_string())?;
        w.finish().map_err(|e| e.to_string())?;
    }
    Ok(base64::engine::general_purpose::STANDARD.encode(buf))
}

fn from_ipc(s: &str) -> Result<RecordBatch, SyncError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s)
        .map_err(|e| e.to_string())?;
    let mut r = arrow_ipc::reader::StreamReader::try_new(std::io::Cursor::new(bytes), None)
        .map_err(|e| e.to_string())?;
    Ok(r.next()
        .ok_or_else(|| "an empty held batch".to_owned())?
        .map_err(|e| e.to_string())?)
}

impl HeldBatch {
    pub fn new(b: &RowBatch) -> Result<HeldBatch, SyncError> {
        Ok(HeldBatch {
            db: b.table.db.clone(),
            table: (*b.table.ir).clone(),
            op: b.op,
            rows: b
                .positions
                .iter()
                .map(|p| (p.txn, p.ordinal, p.at))
                .collect(),
            txns: b.txns.as_ref().clone(),
            before: b.before.as_ref().map(ipc).transpose()?,
            after: b.after.as_ref().map(ipc).transpose()?,
            unchanged: b.unchanged.clone(),
        })
    }

    /// The row batch again (the table's decoder rebuilt from its definition).
    pub fn batch(&self, key_override: Option<&[String]>) -> Result<RowBatch, SyncError> {
        let table = SourceTable::from_ir(&self.db, &self.table, key_override)?;
        Ok(RowBatch {
            table: Arc::new(table),
            op: self.op,
            before: self.before.as_deref().map(from_ipc).transpose()?,
            after: self.after.as_deref().map(from_ipc).transpose()?,
            positions: self
                .rows
                .iter()
                .map(|&(txn, ordinal, at)| RowPos { txn, ordinal, at })
                .collect(),
            txns: Arc::new(self.txns.clone()),
            unchanged: self.unchanged.clone(),
            complete: true,
        })
    }

    fn first(&self) -> Option<Position> {
        let &(txn, ordinal, _) = self.rows.first()?;
        let mut p = self.txns.get(txn as usize)?.clone();
        p.ordinal = u64::from(ordinal);
        Some(p)
    }
}

impl HeldItem {
    /// The source position the item starts at (replay order).
    pub fn position(&self) -> Option<Position> {
        match self {
            HeldItem::Rows { batches, .. } => batches.first().and_then(HeldBatch::first),
            HeldItem::Ddl { position, .. } => Some(position.clone()),
        }
    }

    /// What makes two copies of an item the same one (a change read twice).
    fn identity(&self) -> String {
        match self {
            HeldItem::Rows {
                kafka: Some(k),
                batches,
            } => format!("kafka {} {} {}", k.part, k.next, batches.len()),
            HeldItem::Rows { batches, .. } => format!(
                "rows {} {:?}",
                batches.len(),
                batches.first().and_then(HeldBatch::first)
            ),
            HeldItem::Ddl { position, .. } => format!("ddl {position}"),
        }
    }
}

/// Interleave the held streams of several tables in source order (each stream keeps
/// its own order), each change once (a DDL on two tables is in both streams).
pub fn merge(streams: Vec<Vec<HeldItem>>) -> Vec<HeldItem> {
    let mut streams: Vec<std::collections::VecDeque<HeldItem>> =
        streams.into_iter().map(Into::into).collect();
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    loop {
        let next = streams
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.front().map(|h| (h.position(), i)))
            .min();
        let Some((_, i)) = next else {
            break;
        };
        let item = streams[i].pop_front().expect("a head");
        if seen.insert(item.identity()) {
            out.push(item);
        }
    }
    out
}

/// The held-rows folder of a job's state.
#[derive(Debug, Clone)]
pub struct HeldStore {
    dir: PathBuf,
}

impl HeldStore {
    pub fn new(state: &Path) -> HeldStore {
        HeldStore {
            dir: state.join("held-rows"),
        }
    }

    /// A table's folder, its name encoded (it cannot leave the store); a name too
    /// long to encode whole is kept in the folder's `.name` file.
    fn table_dir(&self, table: &str) -> PathBuf {
        self.dir.join(crate::segment::encode(table))
    }

    /// Files of one table: (checkpoint, path), oldest first.
    fn files(&self, table: &str) -> Result<Vec<(u64, PathBuf)>, SyncError> {
        let d = self.table_dir(table);
        let rd = match std::fs::read_dir(&d) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("{}: {e}", d.display()).into()),
        };
        let mut out = Vec::new();
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(ck) = name
                .strip_suffix(".json")
                .and_then(|n| n.parse::<u64>().ok())
            {
                out.push((ck, e.path()));
            }
        }
        out.sort();
        Ok(out)
    }

    /// Tables with held changes.
    pub fn tables(&self) -> Vec<String> {
        let mut out: Vec<String> = std::fs::read_dir(&self.dir)
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.path().is_dir())
                    .filter_map(|e| {
                        let seg = e.file_name().to_string_lossy().into_owned();
                        crate::segment::decode(&seg)
                            .or_else(|| std::fs::read_to_string(e.path().join(".name")).ok())
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    /// Hold a table's items of checkpoint `ck`, durably (before the checkpoint's state).
    pub fn write(&self, table: &str, ck: u64, items: &[HeldItem]) -> Result<(), SyncError> {
        let seg = crate::segment::encode(table);
        let d = self.dir.join(&seg);
        std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        let name = d.join(".name");
        if crate::segment::decode(&seg).is_none() && !name.exists() {
            write_durably(&name, table.as_bytes())?;
        }
        let bytes = serde_json::to_vec(items).map_err(|e| e.to_string())?;
        write_durably(&d.join(format!("{ck:020}.json")), &bytes)
    }

    /// Every held item of a table, oldest first.
    pub fn load(&self, table: &str) -> Result<Vec<HeldItem>, SyncError> {
        let mut out = Vec::new();
        for (_, p) in self.files(table)? {
            let b = std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            let items: Vec<HeldItem> =
                serde_json::from_slice(&b).map_err(|e| format!("{}: {e}", p.display()))?;
            out.extend(items);
        }
        Ok(out)
    }

    /// Files of checkpoints the state never reached (a crash before its state was
    /// stored): their changes come again from the source.
    pub fn discard_after(&self, ck: u64) -> Result<(), SyncError> {
        for t in self.tables() {
            for (c, p) in self.files(&t)? {
                if c > ck {
                    std::fs::remove_file(&p).map_err(|e| format!("{}: {e}", p.display()))?;
                }
            }
        }
        Ok(())
    }

    /// A release committed in checkpoint `ck`: files older than it are done (a file of
    /// `ck` itself holds what a DDL parked again during the release).
    pub fn drop_before(&self, table: &str, ck: u64) -> Result<(), SyncError> {
        for (c, p) in self.files(table)? {
            if c < ck {
                std::fs::remove_file(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            }
        }
        let _ = std::fs::remove_dir(self.table_dir(table));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ddl(file: &str, offset: u64) -> HeldItem {
        HeldItem::Ddl {
            position: Position::new(file, offset),
            sql: "ALTER TABLE t ADD c INT".into(),
            changes: Vec::new(),
            after: Vec::new(),
        }
    }

    #[test]
    fn merge_orders_by_position_and_drops_copies() {
        let m = merge(vec![
            vec![ddl("b.000001", 4), ddl("b.000002", 4)],
            vec![ddl("b.000001", 9), ddl("b.000002", 4)],
        ]);
        let pos: Vec<(String, u64)> = m
            .iter()
            .map(|i| i.position().map(|p| (p.file, p.offset)).unwrap())
            .collect();
        assert_eq!(
            pos,
            [
                ("b.000001".into(), 4),
                ("b.000001".into(), 9),
                ("b.000002".into(), 4)
            ]
        );
    }

    #[test]
    fn files_newer_than_the_state_are_discarded_and_a_release_keeps_its_own() {
        let d = tempfile::tempdir().unwrap();
        let s = HeldStore::new(d.path());
        for ck in [3, 4, 5] {
            s.write("shop.a", ck, &[ddl("b.000001", ck)]).unwrap();
        }
        s.discard_after(4).unwrap();
        assert_eq!(s.load("shop.a").unwrap().len(), 2);
        s.drop_before("shop.a", 4).unwrap();
        let left = s.load("shop.a").unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].position().unwrap().offset, 4);
        s.drop_before("shop.a", 5).unwrap();
        assert!(s.tables().is_empty());
    }
}
