//! The DDL log: every source DDL the sink handled, with its source position, source
//! text, translated text and status, kept durably in the state folder
//! (`ddl-log.json`: written whole, fsynced, renamed). A restart looks a replayed DDL
//! up by position, so it is neither repeated nor skipped. `lakeshift ddl-log` lists
//! it; `--resolve N` releases a parked entry.
//!
//! Parked DDL (the `park` policy) also goes to the dead-letter file (one JSON line
//! each), and the changes of its tables that follow are held in `held/` until it is
//! resolved.

use crate::sync::error::SyncError;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Recorded, about to run (a crash here is reconciled on restart).
    Pending,
    Executed,
    /// The target refused it and the policy is `fail`: the job stopped.
    Failed,
    Skipped,
    /// Parked: its tables are held until `--resolve`.
    Parked,
    /// A DDL on a table that was parked: queued behind the parked one.
    Held,
    /// Released by a person (`ddl-log --resolve`).
    Resolved,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Status::Pending => "pending",
            Status::Executed => "executed",
            Status::Failed => "failed",
            Status::Skipped => "skipped",
            Status::Parked => "parked",
            Status::Held => "held",
            Status::Resolved => "resolved",
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    pub seq: u64,
    /// Source position just after the DDL.
    pub position: String,
    pub source_sql: String,
    /// The statements the target runs (empty when it could not be translated).
    pub target_sql: Vec<String>,
    /// Target tables (`db.table`) the DDL touches.
    pub tables: Vec<String>,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Target statements already run (targets whose DDL commits one at a time).
    #[serde(default)]
    pub done: usize,
    /// Unix seconds of the last status change.
    pub at: u64,
    /// Checkpoint whose commit released this entry's held changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_in: Option<u64>,
    /// Iceberg: the tables (namespace, name) whose rows before this DDL its barrier
    /// committed. Such a row read again after a restart is in the lake already, in
    /// the table the DDL may since have renamed or dropped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flushed: Vec<(String, String)>,
    /// Iceberg: each touched table's uuid as the DDL began (None: no such table). A
    /// DDL found pending after a crash ran iff one of them changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uuids: Vec<(String, String, Option<String>)>,
}

impl Entry {
    /// A new entry (its number and time are set when it is added to the log).
    pub fn new(
        position: String,
        source_sql: &str,
        tables: Vec<String>,
        status: Status,
        reason: Option<String>,
    ) -> Entry {
        Entry {
            seq: 0,
            position,
            source_sql: source_sql.to_owned(),
            target_sql: Vec::new(),
            tables,
            status,
            reason,
            done: 0,
            at: 0,
            released_in: None,
            flushed: Vec::new(),
            uuids: Vec::new(),
        }
    }
}

#[derive(Debug, Default)]
pub struct DdlLog {
    dir: PathBuf,
    pub entries: Vec<Entry>,
}

pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Write a file durably ([`crate::durable::replace`]), errors naming the file.
pub fn write_durably(path: &Path, bytes: &[u8]) -> Result<(), SyncError> {
    Ok(crate::durable::replace(path, bytes).map_err(|e| format!("{}: {e}", path.display()))?)
}

impl DdlLog {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join("ddl-log.json")
    }

    pub fn load(dir: &Path) -> Result<DdlLog, SyncError> {
        let p = Self::path(dir);
        let entries = match std::fs::read(&p) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| format!("{}: {e}", p.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(format!("{}: {e}", p.display()).into()),
        };
        Ok(DdlLog {
            dir: dir.to_owned(),
            entries,
        })
    }

    pub fn store(&self) -> Result<(), SyncError> {
        let b = serde_json::to_vec_pretty(&self.entries).expect("entries serialise");
        write_durably(&Self::path(&self.dir), &b)
    }

    pub fn find(&self, position: &str) -> Option<usize> {
        self.entries.iter().rposition(|e| e.position == position)
    }

    /// Record a new entry durably; returns its index.
    pub fn add(&mut self, mut e: Entry) -> Result<usize, SyncError> {
        e.seq = self.entries.last().map(|x| x.seq + 1).unwrap_or(1);
        e.at = now();
        self.entries.push(e);
        self.store()?;
        Ok(self.entries.len() - 1)
    }

    /// Add an entry unless one has its position already (a replay).
    pub fn record_once(&mut self, e: Entry) -> Result<(), SyncError> {
        if self.find(&e.position).is_none() {
            self.add(e)?;
        }
        Ok(())
    }

    pub fn set(
        &mut self,
        i: usize,
        status: Status,
        reason: Option<String>,
    ) -> Result<(), SyncError> {
        let e = &mut self.entries[i];
        e.status = status;
        if reason.is_some() {
            e.reason = reason;
        }
        e.at = now();
        self.store()
    }

    /// Target tables held by a parked entry (or a DDL queued behind one).
    pub fn parked_tables(&self) -> std::collections::BTreeSet<String> {
        self.entries
            .iter()
            .filter(|e| matches!(e.status, Status::Parked | Status::Held))
            .flat_map(|e| e.tables.iter().cloned())
            .collect()
    }

    /// The resolutions a person asked for: (seq, retry).
    pub fn resolutions(&self) -> Vec<(u64, bool)> {
        Self::resolutions_in(&self.dir)
    }

    /// The resolutions asked for in a state folder, without reading the log.
    pub fn resolutions_in(state: &Path) -> Vec<(u64, bool)> {
        let dir = state.join("resolve");
        let mut out = Vec::new();
        if let Ok(rd) = std::fs::read_dir(&dir) {
            for e in rd.flatten() {
                if let Ok(seq) = e.file_name().to_string_lossy().parse::<u64>() {
                    let retry = std::fs::read_to_string(e.path())
                        .map(|s| s.trim() == "retry")
                        .unwrap_or(false);
                    out.push((seq, retry));
                }
            }
        }
        out.sort();
        out
    }

    pub fn clear_resolution(&self, seq: u64) {
        let _ = std::fs::remove_file(self.dir.join("resolve").join(seq.to_string()));
    }

    /// Ask the running (or next) job to release a parked entry.
    pub fn request_resolution(dir: &Path, seq: u64, retry: bool) -> Result<(), SyncError> {
        let log = DdlLog::load(dir)?;
        let Some(e) = log.entries.iter().find(|e| e.seq == seq) else {
            return Err(format!("no DDL log entry {seq}").into());
        };
        if e.status != Status::Parked {
            return Err(format!(
                "entry {seq} is {}, not parked: nothing to resolve",
                e.status
            )
            .into());
        }
        let d = dir.join("resolve");
        std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        write_durably(
            &d.join(seq.to_string()),
            if retry { b"retry" } else { b"done" },
        )
    }

    /// Append a parked DDL to the dead-letter file.
    pub fn dead_letter(path: &Path, e: &Entry) -> Result<(), SyncError> {
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).map_err(|x| format!("{}: {x}", d.display()))?;
        }
        let line = serde_json::json!({
            "seq": e.seq,
            "position": e.position,
            "statement": e.source_sql,
            "translated": e.target_sql,
            "tables": e.tables,
            "reason": e.reason,
            "at": e.at,
        });
        Ok(crate::durable::append_line(path, &line.to_string())
            .map_err(|x| format!("{}: {x}", path.display()))?)
    }

    /// A table's held statements, oldest first.
    pub fn held<T: serde::de::DeserializeOwned>(
        &self,
        table: &str,
    ) -> Result<Vec<(u64, T)>, SyncError> {
        let p = self.held_path(table);
        match std::fs::read(&p) {
            Ok(b) => Ok(serde_json::from_slice(&b).map_err(|e| format!("{}: {e}", p.display()))?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(format!("{}: {e}", p.display()).into()),
        }
    }

    fn held_path(&self, table: &str) -> PathBuf {
        self.dir
            .join("held")
            .join(format!("{}.json", crate::segment::encode(table)))
    }

    /// Hold statements of checkpoint `ck` for a table, durably. Statements an earlier
    /// attempt of the same checkpoint held (before a crash) are replaced.
    pub fn hold<T: serde::Serialize + serde::de::DeserializeOwned>(
        &self,
        table: &str,
        ck: u64,
        stmts: Vec<T>,
    ) -> Result<(), SyncError> {
        let mut all: Vec<(u64, T)> = self.held(table)?;
        all.retain(|(c, _)| *c < ck);
        all.extend(stmts.into_iter().map(|s| (ck, s)));
        let p = self.held_path(table);
        std::fs::create_dir_all(p.parent().expect("held folder"))
            .map_err(|e| format!("{}: {e}", p.display()))?;
        write_durably(&p, &serde_json::to_vec(&all).expect("serialise"))
    }

    pub fn drop_held(&self, table: &str) -> Result<(), SyncError> {
        match std::fs::remove_file(self.held_path(table)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e.to_string().into()),
        }
    }

    /// Entries per status (`2 executed, 1 parked`), or `empty`.
    pub fn counts(&self) -> String {
        let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
        for e in &self.entries {
            *counts.entry(e.status.to_string()).or_default() += 1;
        }
        if counts.is_empty() {
            return "empty".to_owned();
        }
        counts
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The log as a table for `lakeshift ddl-log`.
    pub fn render(&self) -> String {
        let mut s = String::new();
        if self.entries.is_empty() {
            s.push_str("no DDL recorded\n");
        }
        for e in &self.entries {
            s.push_str(&format!(
                "#{} {} at {} [{}]\n  source: {}\n",
                e.seq,
                e.status,
                e.position,
                e.tables.join(", "),
                e.source_sql.replace('\n', " ")
            ));
            for t in &e.target_sql {
                s.push_str(&format!("  target: {}\n", t.replace('\n', " ")));
            }
            if let Some(r) = &e.reason {
                s.push_str(&format!("  reason: {r}\n"));
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pos: &str, status: Status) -> Entry {
        Entry::new(
            pos.into(),
            "ALTER TABLE t ADD c int",
            vec!["s.t".into()],
            status,
            None,
        )
    }

    #[test]
    fn entries_are_numbered_kept_durably_and_recorded_once() {
        let d = tempfile::tempdir().unwrap();
        let mut log = DdlLog::load(d.path()).unwrap();
        assert!(log.entries.is_empty());
        let a = log
            .add(entry("binlog.000001:100", Status::Pending))
            .unwrap();
        log.set(a, Status::Executed, None).unwrap();
        // A DDL a source delivers again (a replay after a restart) is not added twice.
        log.record_once(entry("binlog.000001:100", Status::Pending))
            .unwrap();
        log.record_once(entry("binlog.000001:200", Status::Skipped))
            .unwrap();
        let again = DdlLog::load(d.path()).unwrap();
        let seen: Vec<(u64, Status)> = again.entries.iter().map(|e| (e.seq, e.status)).collect();
        assert_eq!(seen, [(1, Status::Executed), (2, Status::Skipped)]);
        assert_eq!(again.find("binlog.000001:200"), Some(1));
        assert_eq!(again.find("binlog.000001:999"), None);
    }

    #[test]
    fn only_a_parked_entry_can_be_resolved_and_the_request_is_kept() {
        let d = tempfile::tempdir().unwrap();
        let mut log = DdlLog::load(d.path()).unwrap();
        log.add(entry("p:1", Status::Executed)).unwrap();
        let parked = log.add(entry("p:2", Status::Parked)).unwrap();
        assert_eq!(log.parked_tables().into_iter().collect::<Vec<_>>(), ["s.t"]);
        let e = DdlLog::request_resolution(d.path(), 1, false).unwrap_err();
        assert!(e.message.contains("executed, not parked"), "{e}");
        assert!(DdlLog::request_resolution(d.path(), 9, false)
            .unwrap_err()
            .message
            .contains("no DDL log entry 9"));
        DdlLog::request_resolution(d.path(), 2, true).unwrap();
        assert_eq!(log.resolutions(), [(2, true)]);
        log.set(parked, Status::Resolved, None).unwrap();
        log.clear_resolution(2);
        assert!(log.resolutions().is_empty());
        assert!(log.parked_tables().is_empty());
    }

    #[test]
    fn held_statements_of_a_checkpoint_replace_those_of_a_newer_one() {
        let d = tempfile::tempdir().unwrap();
        let log = DdlLog::load(d.path()).unwrap();
        log.hold("s.t", 3, vec!["a".to_string()]).unwrap();
        log.hold("s.t", 4, vec!["b".to_string(), "c".into()])
            .unwrap();
        // Checkpoint 4 written again after a crash: what it held before is replaced.
        log.hold("s.t", 4, vec!["d".to_string()]).unwrap();
        assert_eq!(
            log.held::<String>("s.t").unwrap(),
            [(3, "a".to_owned()), (4, "d".to_owned())]
        );
        log.drop_held("s.t").unwrap();
        assert!(log.held::<String>("s.t").unwrap().is_empty());
        log.drop_held("s.t").unwrap();
    }
}
