//! The `source` part of a job file, shaped like a Flink CDC pipeline definition:
//!
//! ```yaml
//! source:
//!   type: mysql                  # MySQL or MariaDB
//!   hostname: 127.0.0.1
//!   port: 3306
//!   username: repl
//!   password-env: MYSQL_PASSWORD # or `password: ...`
//!   server-id: 5400
//!   tables: ['shop\..*', 'crm\.customers']
//!   startup:
//!     mode: initial              # initial | latest | gtid | position
//!     gtid: 0-1-42               # with mode gtid
//!     position: binlog.000003:4  # with mode position
//!   key-overrides:
//!     shop.events: [event_id]
//! ```
//!
//! Everything is validated before anything connects; an error names the field.

use super::position::{BadPosition, GtidState, Position};
use regex::Regex;
use serde::Deserialize;
use std::collections::BTreeMap;

/// A whole job file; the parts other than `source` belong to the sync engine.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobFile {
    /// MySQL/MariaDB ([`SourceConfig`]) or Kafka ([`super::kafka_config::KafkaConfig`]).
    pub source: serde_yaml_ng::Value,
    #[serde(default)]
    pub sink: Option<serde_yaml_ng::Value>,
    #[serde(default)]
    pub pipeline: Option<serde_yaml_ng::Value>,
    #[serde(default)]
    pub route: Option<serde_yaml_ng::Value>,
}

/// Where a first run starts.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, schemars::JsonSchema, serde::Serialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum StartupMode {
    /// Snapshot every captured table, then follow the binlog from the snapshot's point.
    #[default]
    Initial,
    /// Follow the binlog from its current end; no snapshot.
    Latest,
    /// Follow the binlog from a GTID state (`startup.gtid`).
    Gtid,
    /// Follow the binlog from a file and offset (`startup.position`).
    Position,
}

/// `source.startup`: where a first run starts.
#[derive(Debug, Clone, Deserialize, Default, schemars::JsonSchema, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Startup {
    /// `initial` (snapshot, then the binlog; the default), `latest`, `gtid` or
    /// `position`.
    #[serde(default)]
    pub mode: StartupMode,
    /// With `mode: gtid`: the GTID state to follow from (`0-1-42`).
    #[serde(default)]
    pub gtid: Option<String>,
    /// With `mode: position`: the binlog file and offset (`binlog.000003:4`).
    #[serde(default)]
    pub position: Option<String>,
}

/// What to do with MySQL zero dates (`0000-00-00`, `2024-00-10`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, schemars::JsonSchema, serde::Serialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum ZeroDates {
    /// Deliver NULL (what JDBC's zeroDateTimeBehavior=convertToNull does).
    #[default]
    Null,
    /// Stop with the table, column and position.
    Fail,
}

/// What to do when the resume point was purged from the binlog while stopped.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, schemars::JsonSchema, serde::Serialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum PurgedPolicy {
    /// Stop with an error that names the missing position and the oldest binlog.
    #[default]
    Fail,
    /// Take a new snapshot of every captured table and follow on from it.
    Resnapshot,
}

/// `type: mariadb` or `mysql`: a MariaDB or MySQL server, read from its binlog.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SourceConfig {
    /// `mariadb` or `mysql`.
    #[serde(rename = "type")]
    #[schemars(extend("enum" = ["mariadb", "mysql"]))]
    pub kind: String,
    /// The server's host name or address.
    pub hostname: String,
    /// The server's port.
    #[serde(default = "default_port")]
    pub port: u16,
    /// The account (REPLICATION SLAVE, REPLICATION CLIENT, SELECT, RELOAD).
    pub username: String,
    /// The password as written (or `password-env`).
    #[serde(default)]
    pub password: Option<String>,
    /// Name of an environment variable holding the password.
    #[serde(default)]
    pub password_env: Option<String>,
    /// The job's replica id, unique among the server's replicas and readers.
    pub server_id: u32,
    /// Regexes over `database.table`, matched whole.
    pub tables: Vec<String>,
    /// Where a first run starts.
    #[serde(default)]
    pub startup: Startup,
    /// Key columns for tables without a primary key (or to override it); NOT NULL
    /// columns only (refused when the table's definition is read).
    #[serde(default)]
    pub key_overrides: BTreeMap<String, Vec<String>>,
    /// Rows per snapshot chunk.
    #[serde(default = "default_chunk")]
    pub snapshot_chunk_rows: u64,
    /// Sessions reading the snapshot side by side (in one consistent snapshot).
    #[serde(default = "default_parallel")]
    pub snapshot_parallel: usize,
    /// The longest the snapshot may keep the server's commits blocked while its
    /// sessions start (milliseconds); past it the block is released and they start
    /// again, then without the block.
    #[serde(default = "default_block_ms")]
    pub snapshot_block_ms: u64,
    /// Row batches are cut at about this many bytes.
    #[serde(default = "default_batch_bytes")]
    pub batch_bytes: usize,
    /// Zero dates (`0000-00-00`): `null` (the default) or `fail`.
    #[serde(default)]
    pub zero_dates: ZeroDates,
    /// The resume point was purged from the binlog while the job was stopped:
    /// `fail` (the default) or `resnapshot`.
    #[serde(default)]
    pub purged_resume: PurgedPolicy,
    /// Seconds between heartbeats from an idle server.
    #[serde(default = "default_heartbeat")]
    pub heartbeat_seconds: u32,
}

fn default_port() -> u16 {
    3306
}
fn default_chunk() -> u64 {
    8192
}
fn default_parallel() -> usize {
    2
}
fn default_block_ms() -> u64 {
    5000
}
fn default_batch_bytes() -> usize {
    4 << 20
}
fn default_heartbeat() -> u32 {
    10
}

/// A job file that cannot be read or does not validate: the message names the key
/// (`job file: source.server-id: must be ...`), and where the file writes it when that
/// is known (line and column, from 1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct JobFileError(pub String, pub Option<(usize, usize)>);

impl JobFileError {
    /// The error with the place `text` writes the key it names (`job file:
    /// source.type: ...`), when it has none yet.
    pub fn placed(mut self, text: &str) -> Self {
        if self.1.is_none() {
            let path = self
                .0
                .strip_prefix("job file: ")
                .and_then(|m| m.split_once(": "))
                .map(|(p, _)| p);
            if let Some(p) = path.filter(|p| !p.contains(' ')) {
                let keys: Vec<String> = p
                    .split('.')
                    .map(|k| k.split('[').next().unwrap_or(k).to_owned())
                    .collect();
                self.1 = locate(text, &keys);
            }
        }
        self
    }

    /// The error as a user reads it about file `path`: `path:LINE:COLUMN: message`
    /// where the file's place is known (editors jump there), else `path: message`.
    pub fn report(&self, path: &std::path::Path) -> String {
        match self.1 {
            Some((line, column)) => format!("{}:{line}:{column}: {}", path.display(), self.0),
            None => format!("{}: {}", path.display(), self.0),
        }
    }
}

impl From<String> for JobFileError {
    fn from(s: String) -> Self {
        JobFileError(s, None)
    }
}

impl From<&str> for JobFileError {
    fn from(s: &str) -> Self {
        JobFileError(s.to_owned(), None)
    }
}

/// Section `name` of job file `text` (its value `value`) as a `T`. An error names the
/// key within the section (`sink.maintenance.interval-seconds`), where the file
/// writes it, the nearest known key or value for one that is unknown, and types in
/// words (`a whole number from 0 to 65535`, not `u16`).
pub fn section<T: serde::de::DeserializeOwned>(
    text: &str,
    name: &str,
    value: serde_yaml_ng::Value,
) -> Result<T, JobFileError> {
    let tree = value.clone();
    serde_path_to_error::deserialize(value).map_err(|e| {
        let mut keys: Vec<String> = (!name.is_empty())
            .then(|| name.to_owned())
            .into_iter()
            .collect();
        for seg in e.path().iter() {
            if let serde_path_to_error::Segment::Map { key } = seg {
                keys.push(key.clone());
            }
        }
        let why = e.inner().to_string();
        // An unknown key is the error's own subject: named in the path, and where the
        // file writes it is that key's place.
        let unknown = quoted_after(&why, "unknown field `");
        let variant = quoted_after(&why, "unknown variant `");
        // (A section read through a tagged enum loses the path inside it: the key's,
        // or the value's, place in the section's own tree.)
        let base = usize::from(!name.is_empty());
        if let Some(u) = unknown.as_ref().filter(|u| keys.last() != Some(*u)) {
            let within = keys.len() - base;
            if !deepen(&mut keys, base, path_to(&tree, &|k, _| k == u), within + 1) {
                keys.push(u.clone());
            }
        }
        if let Some(v) = &variant {
            let within = keys.len() - base;
            let p = path_to(&tree, &|_, c| c.as_str() == Some(v.as_str()));
            deepen(&mut keys, base, p, within);
        }
        let at = locate(text, &keys);
        let path = match keys.join(".") {
            p if p.is_empty() => String::new(),
            p => format!("{p}: "),
        };
        let msg = match (&unknown, variant) {
            (Some(u), _) => {
                let known = expected_names(&why);
                match nearest(u, &known) {
                    Some(n) => format!("unknown key; did you mean `{n}`?"),
                    None if known.is_empty() => "unknown key".to_owned(),
                    None => format!("unknown key (known here: {})", known.join(", ")),
                }
            }
            (None, Some(v)) => {
                let known = expected_names(&why);
                match nearest(&v, &known) {
                    Some(n) => format!("`{v}` is not a known value; did you mean `{n}`?"),
                    None => format!("`{v}` is not a known value ({})", known.join(", ")),
                }
            }
            (None, None) => in_words(&why),
        };
        JobFileError(format!("job file: {path}{msg}"), at)
    })
}

/// The keys that lead to the first mapping entry in `v` that `hit` (given its key
/// and value) picks, its own key last.
fn path_to(
    v: &serde_yaml_ng::Value,
    hit: &dyn Fn(&str, &serde_yaml_ng::Value) -> bool,
) -> Option<Vec<String>> {
    for (k, child) in v.as_mapping()? {
        let k = k.as_str()?;
        if hit(k, child) {
            return Some(vec![k.to_owned()]);
        }
        if let Some(mut p) = path_to(child, hit) {
            p.insert(0, k.to_owned());
            return Some(p);
        }
    }
    None
}

/// `keys` (the section's name at `base`) with the path `p` after the section, when it
/// is longer than `than` keys: whether it was.
fn deepen(keys: &mut Vec<String>, base: usize, p: Option<Vec<String>>, than: usize) -> bool {
    match p.filter(|p| p.len() > than) {
        Some(p) => {
            keys.truncate(base);
            keys.extend(p);
            true
        }
        None => false,
    }
}

/// The text between `lead` and the next backquote in `s`.
fn quoted_after(s: &str, lead: &str) -> Option<String> {
    let rest = &s[s.find(lead)? + lead.len()..];
    Some(rest[..rest.find('`')?].to_owned())
}

/// The names a serde error says it expected (`expected one of `a`, `b`` or
/// `expected `a``).
fn expected_names(s: &str) -> Vec<String> {
    let Some(p) = s.find("expected") else {
        return Vec::new();
    };
    s[p..]
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The known name closest to `word`, when it is close enough to be a typo.
fn nearest(word: &str, known: &[String]) -> Option<String> {
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(word, k), k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 4))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.clone())
}

/// A serde type error with Rust's type names said in words.
fn in_words(why: &str) -> String {
    let mut out = why.to_owned();
    for (rust, words) in [
        ("expected u8", "expected a whole number from 0 to 255"),
        ("expected u16", "expected a whole number from 0 to 65535"),
        (
            "expected u32",
            "expected a whole number from 0 to 4294967295",
        ),
        ("expected u64", "expected a whole number, 0 or more"),
        ("expected usize", "expected a whole number, 0 or more"),
        ("expected i32", "expected a whole number"),
        ("expected i64", "expected a whole number"),
        ("expected f32", "expected a number"),
        ("expected f64", "expected a number"),
        ("expected a boolean", "expected true or false"),
    ] {
        if let Some(p) = out.find(rust) {
            if !out[p + rust.len()..].starts_with(|c: char| c.is_ascii_alphanumeric()) {
                out.replace_range(p..p + rust.len(), words);
            }
        }
    }
    out
}

/// Where job file `text` writes the key path `keys` (a section, then keys within
/// it): the line and column (from 1) of the last key, each found after the one
/// before it; None when one is not found (a key written in another form).
pub fn locate(text: &str, keys: &[String]) -> Option<(usize, usize)> {
    let mut from = 0;
    let mut at = None;
    for k in keys {
        let p = find_key(text, from, k)?;
        at = Some(p);
        from = p + k.len();
    }
    let p = at?;
    let line = text[..p].matches('\n').count() + 1;
    let column = p - text[..p].rfind('\n').map_or(0, |n| n + 1) + 1;
    Some((line, column))
}

/// The first place at or after `from` where `key` is written as a mapping key
/// (`key:`, `"key":`, `{key: ..`, `- key:`), outside comments.
fn find_key(text: &str, from: usize, key: &str) -> Option<usize> {
    let mut start = from;
    while let Some(i) = text.get(start..)?.find(key) {
        let p = start + i;
        start = p + key.len().max(1);
        let line_start = text[..p].rfind('\n').map_or(0, |n| n + 1);
        if text[line_start..p].contains('#') {
            continue;
        }
        let before = text[..p].chars().next_back();
        let quoted = matches!(before, Some('"' | '\''));
        let lead = if quoted { p - 1 } else { p };
        let ok_before = text[..lead]
            .chars()
            .next_back()
            .is_none_or(|c| c.is_whitespace() || matches!(c, '{' | ',' | '-'));
        let mut after = text[p + key.len()..].chars();
        let mut next = after.next();
        if quoted && matches!(next, Some('"' | '\'')) {
            next = after.next();
        }
        while next == Some(' ') {
            next = after.next();
        }
        if ok_before && next == Some(':') {
            return Some(lead);
        }
    }
    None
}

/// A validated source: what it reads (with that kind's own settings), compiled table
/// filters, key overrides, a resolved password and start point.
#[derive(Debug, Clone)]
pub struct Source {
    pub kind: SourceKind,
    pub key_overrides: BTreeMap<String, Vec<String>>,
    pub password: Option<String>,
    pub tables: Vec<Regex>,
    pub start: Start,
    /// A DDL on a captured table that the schema history cannot parse is reported
    /// (a `Schema` event without changes, noted `skipped:`) instead of stopping the
    /// source (the sync job's `ddl-error-policy: skip`).
    pub skip_unparsed_ddl: bool,
    /// The target computes the source's generated columns itself (its dialect is
    /// the source's), so their values are never needed. PostgreSQL: logical
    /// replication never carries them, and any other target's tables leave them
    /// out. MySQL: a row image that leaves one out (a VIRTUAL column under
    /// binlog_row_image=MINIMAL) is complete for such a target.
    pub generated_computed: bool,
    /// Kafka: a message that cannot be decoded (not JSON, no source position, a table
    /// without a definition, a value of the wrong kind) is appended here and skipped
    /// (the sync job's `row-error-policy: skip`); None: it stops the source.
    pub bad_messages_to: Option<std::path::PathBuf>,
}

/// What a source reads, with its own settings.
#[derive(Debug, Clone)]
pub enum SourceKind {
    /// A MySQL/MariaDB server: snapshot, then the binlog.
    Binlog(Box<SourceConfig>),
    /// Debezium-format Kafka topics.
    Kafka(super::kafka_config::KafkaConfig),
    /// A PostgreSQL database: snapshot, then logical replication (pgoutput).
    Postgres(Box<super::pg_config::PgConfig>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    Initial,
    Latest,
    Gtid(GtidState),
    Position(Position),
}

impl Source {
    /// The server's settings of a binlog source. The binlog reader is started only
    /// for one ([`super::open`]).
    pub fn binlog(&self) -> &SourceConfig {
        match &self.kind {
            SourceKind::Binlog(c) => c,
            _ => unreachable!("binlog settings asked of another source"),
        }
    }

    /// The SQL dialect of the source's DDL and names (its folding rules).
    pub fn dialect(&self) -> dialects::Dialect {
        match &self.kind {
            SourceKind::Postgres(_) => dialects::Dialect::Postgres,
            _ => dialects::Dialect::MySql,
        }
    }

    /// A PostgreSQL source's settings.
    pub fn postgres(&self) -> Option<&super::pg_config::PgConfig> {
        match &self.kind {
            SourceKind::Postgres(p) => Some(p),
            _ => None,
        }
    }

    /// A Kafka source's settings.
    pub fn kafka(&self) -> Option<&super::kafka_config::KafkaConfig> {
        match &self.kind {
            SourceKind::Kafka(k) => Some(k),
            _ => None,
        }
    }

    /// Whether a DDL naming `tables` (in default database `db`) concerns the capture.
    /// A statement whose tables are not known (it did not parse) does: it may change
    /// a captured table, so it is never passed over.
    pub fn concerns(&self, tables: &[ddl_core::TableName], db: &str) -> bool {
        tables.is_empty()
            || tables
                .iter()
                .any(|t| self.captures(t.schema.as_deref().unwrap_or(db), &t.name))
    }

    /// Whether `db.table` is captured. The helper tables of online schema change tools
    /// (gh-ost's `_t_gho`, `_t_ghc`, `_t_del`; pt-osc's `_t_new`, `_t_old`) of a
    /// captured `t` are not: their rows are copies.
    pub fn captures(&self, db: &str, table: &str) -> bool {
        if let Some((base, _)) = osc_helper(table) {
            if self.matches(db, base) {
                return false;
            }
        }
        self.matches(db, table)
    }

    /// Whether the schema history needs `db.table`'s definition: a captured table, or
    /// an online schema change's helper table of one.
    pub fn describes(&self, db: &str, table: &str) -> bool {
        self.matches(db, table) || osc_helper(table).is_some_and(|(base, _)| self.matches(db, base))
    }

    fn matches(&self, db: &str, table: &str) -> bool {
        let name = format!("{db}.{table}");
        self.tables.iter().any(|r| r.is_match(&name))
    }

    /// `host:port` of a binlog source, as messages name it.
    pub fn at(&self) -> String {
        format!("{}:{}", self.binlog().hostname, self.binlog().port)
    }

    pub fn opts(&self) -> mysql_async::Opts {
        mysql_async::OptsBuilder::default()
            .ip_or_hostname(self.binlog().hostname.clone())
            .tcp_port(self.binlog().port)
            .user(Some(self.binlog().username.clone()))
            .pass(self.password.clone())
            .prefer_socket(false)
            // A row event can exceed the server's max_allowed_packet (a row of several
            // large columns): read packets up to the protocol's maximum, 1 GiB.
            .max_allowed_packet(Some(1 << 30))
            .into()
    }
}

/// What an online-schema-change helper table is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OscRole {
    /// The new table being built (gh-ost `_t_gho`, pt-osc `_t_new`): its ALTER is the
    /// real table's.
    Shadow,
    /// Bookkeeping (gh-ost `_t_ghc`) or the old table after the cut-over (`_t_del`,
    /// `_t_old`).
    Other,
}

/// `_t_gho` -> (`t`, Shadow), `_t_del` -> (`t`, Other), ...
pub fn osc_helper(name: &str) -> Option<(&str, OscRole)> {
    let inner = name.strip_prefix('_')?;
    for (suffix, role) in [
        ("_gho", OscRole::Shadow),
        ("_new", OscRole::Shadow),
        ("_ghc", OscRole::Other),
        ("_del", OscRole::Other),
        ("_old", OscRole::Other),
    ] {
        if let Some(base) = inner.strip_suffix(suffix) {
            if !base.is_empty() {
                return Some((base, role));
            }
        }
    }
    None
}

/// Parse and validate a job file's text; `env` looks up environment variables.
pub fn parse_job(
    text: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(JobFile, Source), JobFileError> {
    read_job(text, env).map_err(|e| e.placed(text))
}

fn read_job(
    text: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(JobFile, Source), JobFileError> {
    let root: serde_yaml_ng::Value = serde_yaml_ng::from_str(text).map_err(|e| {
        let at = e.location().map(|l| (l.line(), l.column()));
        JobFileError(format!("job file: {e}"), at)
    })?;
    let job: JobFile = section(text, "", root)?;
    let kind = job
        .source
        .get("type")
        .and_then(|t| t.as_str())
        .unwrap_or_default();
    if kind == "kafka" {
        let k: super::kafka_config::KafkaConfig = section(text, "source", job.source.clone())?;
        if !cfg!(feature = "kafka") {
            return Err("job file: source.type: kafka: this lakeshift was built without the Kafka source (cargo feature `kafka`)".into());
        }
        let source = super::kafka_config::validate(k)?;
        return Ok((job, source));
    }
    if matches!(kind, "postgres" | "postgresql") {
        let c: super::pg_config::PgConfig = section(text, "source", job.source.clone())?;
        let source = super::pg_config::validate(c, env)?;
        return Ok((job, source));
    }
    let c: SourceConfig = section(text, "source", job.source.clone())?;
    let source = validate(&c, env)?;
    Ok((job, source))
}

/// A source's password: given, or read from the environment variable named by
/// `password-env` (not both).
pub(crate) fn password_of(
    password: &Option<String>,
    password_env: &Option<String>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<String>, JobFileError> {
    let field = |f: &str, why: String| format!("job file: source.{f}: {why}");
    Ok(match (password, password_env) {
        (Some(_), Some(_)) => {
            return Err(field(
                "password-env",
                "give either password or password-env, not both".into(),
            )
            .into())
        }
        (Some(p), None) => Some(p.clone()),
        (None, Some(var)) => Some(env(var).ok_or_else(|| {
            field(
                "password-env",
                format!("environment variable {var} is not set"),
            )
        })?),
        (None, None) => None,
    })
}

/// `source.tables`: regexes matched against whole `db.table` names.
pub(crate) fn table_patterns(tables: &[String]) -> Result<Vec<Regex>, JobFileError> {
    let field = |f: &str, why: String| format!("job file: source.{f}: {why}");
    if tables.is_empty() {
        return Err(field("tables", "names no table pattern".into()).into());
    }
    let mut out = Vec::new();
    for (i, t) in tables.iter().enumerate() {
        out.push(
            Regex::new(&format!("^(?:{t})$"))
                .map_err(|e| field(&format!("tables[{i}]"), format!("bad regex: {e}")))?,
        );
    }
    Ok(out)
}

/// The patterns of [`table_patterns`] as the job file wrote them.
pub fn written_patterns(tables: &[Regex]) -> Vec<&str> {
    tables
        .iter()
        .map(|r| {
            let s = r.as_str();
            s.strip_prefix("^(?:")
                .and_then(|s| s.strip_suffix(")$"))
                .unwrap_or(s)
        })
        .collect()
}

/// The reading settings both database sources have: chunk rows, snapshot
/// sessions, batch bytes and key overrides (`<container>.table: [column, ...]`).
pub(crate) fn check_reading(
    chunk_rows: u64,
    parallel: usize,
    batch_bytes: usize,
    key_overrides: &BTreeMap<String, Vec<String>>,
    container: &str,
) -> Result<(), JobFileError> {
    let field = |f: &str, why: String| format!("job file: source.{f}: {why}");
    if chunk_rows == 0 {
        return Err(field("snapshot-chunk-rows", "must be at least 1".into()).into());
    }
    if !(1..=64).contains(&parallel) {
        return Err(field(
            "snapshot-parallel",
            format!("{parallel}: must be 1-64 sessions"),
        )
        .into());
    }
    if batch_bytes < 1024 {
        return Err(field("batch-bytes", "must be at least 1024".into()).into());
    }
    for (t, cols) in key_overrides {
        if !t.contains('.') || cols.is_empty() {
            return Err(field(
                &format!("key-overrides.{t}"),
                format!("expects `{container}.table: [column, ...]`"),
            )
            .into());
        }
    }
    Ok(())
}

fn validate(
    c: &SourceConfig,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Source, JobFileError> {
    let field = |f: &str, why: String| format!("job file: source.{f}: {why}");
    if !matches!(c.kind.as_str(), "mysql" | "mariadb") {
        return Err(field(
            "type",
            format!(
                "`{}` is not a supported source (mysql, mariadb, postgres, kafka)",
                c.kind
            ),
        )
        .into());
    }
    if c.hostname.trim().is_empty() {
        return Err(field("hostname", "is empty".into()).into());
    }
    if c.port == 0 {
        return Err(field("port", "must be 1-65535".into()).into());
    }
    if c.server_id == 0 {
        return Err(field(
            "server-id",
            "must be a non-zero id unique among the server's replicas".into(),
        )
        .into());
    }
    let password = password_of(&c.password, &c.password_env, env)?;
    let tables = table_patterns(&c.tables)?;
    let start = match c.startup.mode {
        StartupMode::Initial => Start::Initial,
        StartupMode::Latest => Start::Latest,
        StartupMode::Gtid => {
            let g = c.startup.gtid.as_deref().ok_or_else(|| {
                field("startup.gtid", "is required with startup.mode: gtid".into())
            })?;
            Start::Gtid(
                g.parse()
                    .map_err(|e: BadPosition| field("startup.gtid", e.0))?,
            )
        }
        StartupMode::Position => {
            let p = c.startup.position.as_deref().ok_or_else(|| {
                field(
                    "startup.position",
                    "is required with startup.mode: position".into(),
                )
            })?;
            Start::Position(
                p.parse()
                    .map_err(|e: BadPosition| field("startup.position", e.0))?,
            )
        }
    };
    check_reading(
        c.snapshot_chunk_rows,
        c.snapshot_parallel,
        c.batch_bytes,
        &c.key_overrides,
        "database",
    )?;
    if !(1..=60_000).contains(&c.snapshot_block_ms) {
        return Err(field(
            "snapshot-block-ms",
            format!(
                "is {}: commits may stay blocked 1 to 60000 milliseconds while the snapshot starts",
                c.snapshot_block_ms
            ),
        )
        .into());
    }
    Ok(Source {
        kind: SourceKind::Binlog(Box::new(c.clone())),
        key_overrides: c.key_overrides.clone(),
        password,
        tables,
        start,
        skip_unparsed_ddl: false,
        generated_computed: false,
        bad_messages_to: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const JOB: &str = "source:\n  type: mysql\n  hostname: 127.0.0.1\n  username: root\n  server-id: 7\n  tables: ['shop\\..*']\n";

    #[test]
    fn a_minimal_job_validates() {
        let (_, s) = parse_job(JOB, |_| None).unwrap();
        assert_eq!(s.binlog().port, 3306);
        assert!(s.kafka().is_none());
        assert!(s.captures("shop", "orders"));
        assert!(!s.captures("shopx", "orders"));
        assert_eq!(s.start, Start::Initial);
    }

    #[test]
    fn snapshot_parallel_is_one_to_64_sessions() {
        let (_, s) = parse_job(JOB, |_| None).unwrap();
        assert_eq!(s.binlog().snapshot_parallel, 2);
        for bad in [0, 65] {
            let e = parse_job(&format!("{JOB}  snapshot-parallel: {bad}\n"), |_| None)
                .unwrap_err()
                .0;
            assert!(
                e.contains("source.snapshot-parallel") && e.contains("1-64"),
                "{e}"
            );
        }
        let (_, s) = parse_job(&format!("{JOB}  snapshot-parallel: 64\n"), |_| None).unwrap();
        assert_eq!(s.binlog().snapshot_parallel, 64);
    }

    #[test]
    fn errors_name_the_field() {
        let e = parse_job(&JOB.replace("hostname", "hostnme"), |_| None)
            .unwrap_err()
            .0;
        assert!(e.contains("hostnme"), "{e}");
        let e = parse_job(&format!("{JOB}  password-env: PW\n"), |_| None)
            .unwrap_err()
            .0;
        assert!(e.contains("source.password-env") && e.contains("PW"), "{e}");
        let (_, s) =
            parse_job(&format!("{JOB}  password-env: PW\n"), |_| Some("x".into())).unwrap();
        assert_eq!(s.password.as_deref(), Some("x"));
        let e = parse_job(&format!("{JOB}  startup: {{mode: gtid}}\n"), |_| None)
            .unwrap_err()
            .0;
        assert!(e.contains("source.startup.gtid"), "{e}");
        let e = parse_job(&JOB.replace("shop\\..*", "(("), |_| None)
            .unwrap_err()
            .0;
        assert!(e.contains("source.tables[0]"), "{e}");
        let e = parse_job(&JOB.replace("server-id: 7", "server-id: 0"), |_| None)
            .unwrap_err()
            .0;
        assert!(e.contains("source.server-id"), "{e}");
    }
}
