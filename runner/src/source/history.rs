//! The schema history: every captured table's definition at every source position.
//!
//! It starts from `SHOW CREATE TABLE` of every captured table at the start position
//! and follows every DDL of the binlog, parsed by the mysql dialect with the QUERY
//! event's default database and sql_mode. Both are stored durably in the state folder
//! (`schema-initial.json`, then one line per DDL in `schema-history.jsonl`, each
//! fsynced), so a restart decodes rows with the schema as of its resume point: it
//! replays the DDL before that point, not what the server holds today.

use super::position::Position;
use ddl_core::{SchemaChange, Severity, Table, TableName};
use dialects::translate::{Target, Translator};
use dialects::Dialect;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Initial {
    position: Position,
    /// (database, SHOW CREATE TABLE text)
    tables: Vec<(String, String)>,
    /// The source's SQL dialect (`mysql`, or `postgres` for the PostgreSQL source,
    /// whose definitions are CREATE TABLE statements built from its catalog).
    #[serde(default = "mysql_name")]
    dialect: String,
    /// Tables that existed at `position` but are not captured: their definitions
    /// were not read (a server's other tables cost nothing at start). One is read
    /// from the server when a DDL that concerns the capture names it, or when the
    /// table list comes to capture it; it then joins `tables`.
    #[serde(default)]
    unread: Vec<(String, String)>,
    /// Each database's default character set at `position`, and the server's
    /// (key ""): a table a later DDL creates without one takes its database's.
    #[serde(default)]
    charsets: BTreeMap<String, String>,
    /// (database or schema, statement) applied after `tables`, each on its own: one
    /// that cannot be read is left out with a warning (the PostgreSQL source's
    /// constraints and indexes: a table never depends on them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    lenient: Vec<(String, String)>,
}

fn mysql_name() -> String {
    "mysql".into()
}

fn dialect_named(name: &str) -> Dialect {
    if name == "postgres" {
        Dialect::Postgres
    } else {
        Dialect::MySql
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    pub position: Position,
    pub db: Option<String>,
    pub ansi_quotes: bool,
    pub ddl: String,
}

/// What one DDL did to the captured schema.
#[derive(Debug, Clone, Default)]
pub struct DdlOutcome {
    pub changes: Vec<SchemaChange>,
    /// Skips and warnings, as text.
    pub notes: Vec<String>,
}

/// A DDL the history could not apply, with the tables it names (empty when it did not
/// even parse).
#[derive(Debug, Clone)]
pub struct HistoryError {
    pub message: String,
    pub tables: Vec<TableName>,
}

impl std::fmt::Display for HistoryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

pub struct SchemaHistory {
    tr: Translator,
    dir: Option<PathBuf>,
    /// Changes made to online-schema-change shadow tables, by (db, real table), with
    /// their positions; they become the real table's at the cut-over.
    pub shadow: std::collections::BTreeMap<(String, String), Shadow>,
    /// Tables of the server at the history's start whose definitions were not read
    /// (see `Initial::unread`), less those read since.
    unread: std::collections::BTreeSet<(String, String)>,
    /// Default character sets by database, and the server's (key ""), as of the
    /// DDL applied last (MySQL sources; see `Initial::charsets`).
    charsets: BTreeMap<String, String>,
}

/// One online schema change in progress (or done): when the shadow table was
/// created, the changes made to it, and when it replaced the real table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shadow {
    pub created: Position,
    pub changes: Vec<(Position, SchemaChange)>,
    pub cut_over: Option<Position>,
}

impl std::fmt::Debug for SchemaHistory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaHistory")
            .field("tables", &self.tr.catalog.tables.len())
            .finish()
    }
}

fn translator(d: Dialect) -> Translator {
    Translator::new(d, Target::Ir)
}

/// The tables a MySQL DDL statement names (read, changed, renamed from or to), as
/// lower-cased `db.table` with `db` for unqualified names: known from the statement
/// alone, whatever tables exist.
pub fn tables_named(db: &str, ddl: &str) -> Vec<String> {
    let mut tr = translator(Dialect::MySql);
    tr.default_schema = (!db.is_empty()).then(|| db.to_owned());
    tr.translate(ddl)
        .into_iter()
        .flat_map(|r| r.tables)
        .map(|t| format!("{}.{}", t.schema.as_deref().unwrap_or(db), t.name).to_lowercase())
        .collect()
}

impl SchemaHistory {
    /// A history in memory only (tail without a state folder, tests).
    pub fn in_memory() -> Self {
        SchemaHistory {
            tr: translator(Dialect::MySql),
            dir: None,
            shadow: Default::default(),
            unread: Default::default(),
            charsets: Default::default(),
        }
    }

    /// Start a history from table definitions read at `position`; stored in `dir`.
    /// `unread`: the server's other tables there, whose definitions were not read.
    /// `charsets`: each database's default character set, and the server's (key "").
    pub fn create(
        dir: Option<&Path>,
        position: &Position,
        tables: Vec<(String, String)>,
        unread: Vec<(String, String)>,
        charsets: BTreeMap<String, String>,
    ) -> Result<Self, super::SourceError> {
        Self::create_in(
            Dialect::MySql,
            dir,
            position,
            tables,
            unread,
            charsets,
            Vec::new(),
        )
    }

    /// [`create`](Self::create) for a source whose DDL is in dialect `d`; `lenient`:
    /// statements applied after the tables, each left out with a warning if it
    /// cannot be read.
    pub fn create_in(
        dialect: Dialect,
        dir: Option<&Path>,
        position: &Position,
        tables: Vec<(String, String)>,
        unread: Vec<(String, String)>,
        charsets: BTreeMap<String, String>,
        lenient: Vec<(String, String)>,
    ) -> Result<Self, super::SourceError> {
        let mut h = SchemaHistory {
            tr: translator(dialect),
            dir: dir.map(Path::to_path_buf),
            shadow: Default::default(),
            unread: unread.iter().cloned().collect(),
            charsets: charsets.clone(),
        };
        for (db, ddl) in &tables {
            h.seed(db, ddl)?;
        }
        for (db, ddl) in &lenient {
            h.seed_lenient(db, ddl, true);
        }
        if let Some(d) = dir {
            std::fs::create_dir_all(d).map_err(|e| {
                super::SourceError::Schema(format!("state folder {}: {e}", d.display()))
            })?;
            let init = Initial {
                position: position.clone(),
                tables,
                dialect: if dialect == Dialect::Postgres {
                    "postgres".into()
                } else {
                    mysql_name()
                },
                unread,
                charsets,
                lenient,
            };
            let fin = d.join("schema-initial.json");
            let write = || -> std::io::Result<()> {
                crate::durable::replace(&fin, &serde_json::to_vec(&init).expect("serialises"))?;
                // A new initial state starts a new history.
                let _ = std::fs::remove_file(d.join("schema-history.jsonl"));
                let _ = std::fs::remove_file(d.join("osc-shadow.json"));
                crate::durable::fsync_dir(d)
            };
            write().map_err(|e| {
                super::SourceError::Schema(format!("writing {}: {e}", fin.display()))
            })?;
        }
        Ok(h)
    }

    /// Load the stored history as of `upto`: the initial tables plus every DDL before it.
    pub fn load(dir: &Path, upto: &Position) -> Result<Option<Self>, super::SourceError> {
        let fin = dir.join("schema-initial.json");
        let Ok(bytes) = std::fs::read(&fin) else {
            return Ok(None);
        };
        let init: Initial = serde_json::from_slice(&bytes)
            .map_err(|e| super::SourceError::Schema(format!("{}: {e}", fin.display())))?;
        if *upto < init.position {
            return Err(super::SourceError::Schema(format!(
                "the resume point {upto} precedes the stored schema history, which starts at {}",
                init.position
            )));
        }
        let mut h = SchemaHistory {
            tr: translator(dialect_named(&init.dialect)),
            dir: Some(dir.to_path_buf()),
            shadow: Default::default(),
            unread: init.unread.iter().cloned().collect(),
            charsets: init.charsets.clone(),
        };
        for (db, ddl) in &init.tables {
            h.seed(db, ddl)?;
        }
        for (db, ddl) in &init.lenient {
            h.seed_lenient(db, ddl, false);
        }
        let log = dir.join("schema-history.jsonl");
        if let Ok(text) = std::fs::read_to_string(&log) {
            let mut keep = String::new();
            let mut dropped = false;
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let Ok(e) = serde_json::from_str::<Entry>(line) else {
                    // A torn last line from a crash: not applied, not kept.
                    dropped = true;
                    break;
                };
                if e.position >= *upto {
                    dropped = true;
                    break;
                }
                h.replay(&e)
                    .map_err(|e| super::SourceError::Schema(e.message))?;
                keep.push_str(line);
                keep.push('\n');
            }
            // Entries at or after the resume point will be read again from the binlog.
            // Replaced whole (a kill while it was rewritten in place left it empty,
            // and every DDL before the resume point was lost to later runs).
            if dropped {
                crate::durable::replace_observed(&log, keep.as_bytes(), |step| {
                    if step == crate::durable::Step::BeforeRename {
                        crate::failpoint::hit("history-rewrite");
                    }
                })
                .map_err(|e| super::SourceError::Schema(format!("{}: {e}", log.display())))?;
            }
        }
        let osc = dir.join("osc-shadow.json");
        if let Ok(bytes) = std::fs::read(&osc) {
            let all: Vec<((String, String), Shadow)> = serde_json::from_slice(&bytes)
                .map_err(|e| super::SourceError::Schema(format!("{}: {e}", osc.display())))?;
            // As of the resume point: what happened after it will be read again.
            for (k, mut sh) in all {
                if sh.created >= *upto {
                    continue;
                }
                sh.changes.retain(|(p, _)| p < upto);
                if sh.cut_over.as_ref().is_some_and(|c| c >= upto) {
                    sh.cut_over = None;
                }
                h.shadow.insert(k, sh);
            }
        }
        Ok(Some(h))
    }

    fn seed(&mut self, db: &str, ddl: &str) -> Result<(), super::SourceError> {
        self.tr.default_schema = Some(db.to_owned());
        let failed = self.tr.seed(ddl);
        if let Some(f) = failed.first() {
            return Err(super::SourceError::Schema(format!(
                "schema of {db}: {}",
                f.diagnostics
                    .iter()
                    .map(|(_, _, d)| d.message.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            )));
        }
        Ok(())
    }

    /// [`seed`](Self::seed), leaving out a statement that cannot be read (with a
    /// warning when `warn`: the history is made, not loaded).
    fn seed_lenient(&mut self, db: &str, ddl: &str, warn: bool) {
        if let Err(e) = self.seed(db, ddl) {
            if warn {
                tracing::warn!("left out of the targets' tables: {ddl}: {e}");
            }
        }
    }

    fn replay(&mut self, e: &Entry) -> Result<DdlOutcome, HistoryError> {
        self.tr.default_schema = e.db.clone();
        self.tr.options.ansi_quotes = e.ansi_quotes;
        let mut out = DdlOutcome::default();
        // A table's default character set before an ALTER TABLE that may change it.
        let mut before: BTreeMap<TableName, (Option<String>, Vec<String>)> = BTreeMap::new();
        let upper = e.ddl.to_ascii_uppercase();
        if self.tr.source == Dialect::MySql
            && upper.trim_start().starts_with("ALTER")
            && (upper.contains("CHARSET") || upper.contains("CHARACTER"))
        {
            let db = e.db.clone().unwrap_or_default();
            for n in tables_named(&db, &e.ddl) {
                if let Some((d, t)) = n.split_once('.') {
                    if let Some(table) = self.tr.catalog.table(&TableName::new(Some(d), t)) {
                        let cs = table.options.get("charset").map(|v| v.sql.clone());
                        let cols = table.columns.iter().map(|c| c.name.clone()).collect();
                        before.insert(table.name.clone(), (cs, cols));
                    }
                }
            }
        }
        for r in self.tr.translate(&e.ddl) {
            for (_, _, d) in &r.diagnostics {
                if d.severity == Severity::Error {
                    return Err(HistoryError {
                        message: format!(
                            "DDL at {} could not be applied to the schema history: {}\n  {}",
                            e.position,
                            d.message,
                            e.ddl.trim()
                        ),
                        tables: r.tables.clone(),
                    });
                }
                out.notes.push(format!("{}: {}", d.severity, d.message));
            }
            if self.tr.source == Dialect::MySql {
                self.follow_charsets(e, &upper, &r.changes, &before);
            }
            // DROP DATABASE drops its tables: said table by table, so the sinks drop
            // the captured ones (a database made again later starts empty).
            for c in r.changes {
                if let ddl_core::SchemaChange::DropNamespace { name, .. } = &c {
                    for t in r.tables.iter().filter(|t| t.schema.as_ref() == Some(name)) {
                        out.changes.push(ddl_core::SchemaChange::DropTable {
                            name: t.clone(),
                            if_exists: true,
                        });
                    }
                }
                out.changes.push(c);
            }
        }
        Ok(out)
    }

    /// Character sets a MySQL DDL implies beyond its text (MySQL's inheritance):
    /// `CREATE DATABASE`/`ALTER DATABASE` set a database's default (the server's
    /// when none is named); a table created without one takes its database's;
    /// `ALTER TABLE ... CONVERT TO CHARACTER SET x` makes every text column `x`; a
    /// table's new default (`ALTER TABLE ... CHARACTER SET x`) leaves its columns in
    /// the one they had (`before`: each named table's default and columns before
    /// the DDL).
    fn follow_charsets(
        &mut self,
        e: &Entry,
        upper: &str,
        changes: &[SchemaChange],
        before: &BTreeMap<TableName, (Option<String>, Vec<String>)>,
    ) {
        use std::sync::OnceLock;
        static DB: OnceLock<regex::Regex> = OnceLock::new();
        static CS: OnceLock<regex::Regex> = OnceLock::new();
        let db_re = DB.get_or_init(|| {
            regex::Regex::new(r"(?is)^\s*(CREATE|ALTER)\s+(?:DATABASE|SCHEMA)\b(?:\s+IF\s+NOT\s+EXISTS)?\s*(`(?:[^`]|``)+`|[\w$]+)?").expect("valid regex")
        });
        let cs_re = CS.get_or_init(|| {
            regex::Regex::new(r"(?is)\b(?:CHARACTER\s+SET|CHARSET)\s*=?\s*['`]?(\w+)|\bCOLLATE\s*=?\s*['`]?([a-z0-9]+)_").expect("valid regex")
        });
        static COMMENT: OnceLock<regex::Regex> = OnceLock::new();
        let server = self.charsets.get("").cloned();
        // (mysqldump's versioned comments hold the clauses: read as plain text.)
        let text: std::borrow::Cow<'_, str> = if e.ddl.contains("/*") {
            let open = COMMENT.get_or_init(|| regex::Regex::new(r"/\*!?\d*").expect("valid regex"));
            open.replace_all(&e.ddl.replace("*/", " "), " ")
                .into_owned()
                .into()
        } else {
            e.ddl.as_str().into()
        };
        if let Some(c) = db_re.captures(&text) {
            let create = c[1].eq_ignore_ascii_case("CREATE");
            let keyword = |w: &str| {
                ["DEFAULT", "CHARACTER", "CHARSET", "COLLATE"]
                    .iter()
                    .any(|k| w.eq_ignore_ascii_case(k))
            };
            let name = match c.get(2) {
                Some(m) if !keyword(m.as_str()) => m.as_str().trim_matches('`').replace("``", "`"),
                _ => e.db.clone().unwrap_or_default(),
            };
            let named = cs_re.captures(&text).map(|c| {
                c.get(1)
                    .or(c.get(2))
                    .map_or(String::new(), |m| m.as_str().to_ascii_lowercase())
            });
            match (named, create) {
                (Some(cs), _) => {
                    self.charsets.insert(name, cs);
                }
                (None, true) => {
                    if let Some(s) = &server {
                        self.charsets.insert(name, s.clone());
                    }
                }
                (None, false) => {}
            }
            return;
        }
        let option = |cs: &str| ddl_core::DialectSql {
            dialect: "mysql".into(),
            sql: cs.to_owned(),
        };
        let text_type = |t: &ddl_core::DataType| {
            matches!(
                t,
                ddl_core::DataType::Char { .. }
                    | ddl_core::DataType::Varchar { .. }
                    | ddl_core::DataType::Text { .. }
            )
        };
        let names_charset = ["CHARSET", "CHARACTER", "COLLATE"]
            .iter()
            .any(|w| upper.contains(w));
        for c in changes {
            match c {
                SchemaChange::CreateTable { table, .. }
                    if !["charset", "collate", "collation"]
                        .iter()
                        .any(|k| table.options.contains_key(*k)) =>
                {
                    let db = table
                        .name
                        .schema
                        .clone()
                        .or_else(|| e.db.clone())
                        .unwrap_or_default();
                    let Some(cs) = self.charsets.get(&db).or(server.as_ref()).cloned() else {
                        continue;
                    };
                    let name = TableName::new(Some(&db), &table.name.name);
                    if let Ok(t) = self.tr.catalog.table_mut(&name) {
                        t.options.insert("charset".into(), option(&cs));
                    }
                }
                SchemaChange::SetTableOption { table, key, value }
                    if key == "convert to charset" =>
                {
                    if let Ok(t) = self.tr.catalog.table_mut(table) {
                        for col in t.columns.iter_mut().filter(|c| text_type(&c.data_type)) {
                            col.charset = None;
                        }
                        t.options.remove("convert to charset");
                        t.options.insert("charset".into(), option(&value.sql));
                    }
                }
                SchemaChange::SetTableOption { table, key, .. } if key == "charset" => {
                    // Its columns keep the default they had.
                    let Some((Some(old), cols)) = before
                        .iter()
                        .find(|(n, _)| n.name == table.name)
                        .map(|(_, b)| b)
                    else {
                        continue;
                    };
                    if let Ok(t) = self.tr.catalog.table_mut(table) {
                        for col in t.columns.iter_mut().filter(|c| {
                            text_type(&c.data_type) && c.charset.is_none() && cols.contains(&c.name)
                        }) {
                            col.charset = Some(old.clone());
                        }
                    }
                }
                // MODIFY/CHANGE without a character set: the column takes the
                // table's default (whatever it had).
                SchemaChange::AlterColumnType { table, column, .. } if !names_charset => {
                    if let Ok(t) = self.tr.catalog.table_mut(table) {
                        if let Some(c) = t.columns.iter_mut().find(|c| c.name == *column) {
                            c.charset = None;
                            c.collation = None;
                        }
                    }
                }
                SchemaChange::DropNamespace { name, .. } => {
                    self.charsets.remove(name);
                }
                _ => {}
            }
        }
    }

    /// Apply a DDL read from the binlog at `position`, and store it durably.
    pub fn apply(
        &mut self,
        position: &Position,
        db: Option<&str>,
        ansi_quotes: bool,
        ddl: &str,
    ) -> Result<DdlOutcome, HistoryError> {
        let e = Entry {
            position: position.clone(),
            db: db.filter(|d| !d.is_empty()).map(str::to_owned),
            ansi_quotes,
            ddl: ddl.to_owned(),
        };
        let out = self.replay(&e)?;
        if let Some(d) = &self.dir {
            let log = d.join("schema-history.jsonl");
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .and_then(|mut f| {
                    let mut line = serde_json::to_vec(&e).expect("serialises");
                    line.push(b'\n');
                    f.write_all(&line).and_then(|_| f.sync_data())
                })
                .map_err(|err| HistoryError {
                    message: format!("{}: {err}", log.display()),
                    tables: Vec::new(),
                })?;
        }
        Ok(out)
    }

    /// Store the shadow-table changes durably (after each change to them).
    pub fn save_shadow(&self) -> Result<(), super::SourceError> {
        let Some(d) = &self.dir else { return Ok(()) };
        let all: Vec<_> = self.shadow.iter().collect();
        let fin = d.join("osc-shadow.json");
        crate::durable::replace(&fin, &serde_json::to_vec(&all).expect("serialises"))
            .map_err(|e| super::SourceError::Schema(format!("{}: {e}", fin.display())))
    }

    /// Whether `db.name` existed at the history's start with its definition unread.
    pub fn is_unread(&self, db: &str, name: &str) -> bool {
        self.unread.contains(&(db.to_owned(), name.to_owned()))
    }

    /// The unread tables (see [`is_unread`](Self::is_unread)).
    pub fn unread(&self) -> impl Iterator<Item = &(String, String)> {
        self.unread.iter()
    }

    /// Take in the definition of unread table `db.name` (`ddl`: its CREATE TABLE as
    /// the server shows it now): the table joins the history's initial tables, stored
    /// before it is used. No DDL naming it was ever applied (it was unknown), so its
    /// definition as of now stands for it at the history's start.
    pub fn adopt(&mut self, db: &str, name: &str, ddl: &str) -> Result<(), super::SourceError> {
        self.seed(db, ddl)?;
        self.unread.remove(&(db.to_owned(), name.to_owned()));
        let Some(d) = &self.dir else { return Ok(()) };
        let fin = d.join("schema-initial.json");
        let err = |e: String| super::SourceError::Schema(format!("{}: {e}", fin.display()));
        let bytes = std::fs::read(&fin).map_err(|e| err(e.to_string()))?;
        let mut init: Initial = serde_json::from_slice(&bytes).map_err(|e| err(e.to_string()))?;
        init.unread.retain(|(d, n)| !(d == db && n == name));
        init.tables.push((db.to_owned(), ddl.to_owned()));
        crate::durable::replace(&fin, &serde_json::to_vec(&init).expect("serialises"))
            .map_err(|e| err(e.to_string()))
    }

    pub fn table(&self, db: &str, name: &str) -> Option<&Table> {
        self.tr.catalog.table(&TableName::new(Some(db), name))
    }

    pub fn tables(&self) -> impl Iterator<Item = &Table> {
        self.tr.catalog.tables.values().map(|t| t.as_ref())
    }
}
