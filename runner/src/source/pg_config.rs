//! The PostgreSQL source's settings in the job file:
//!
//! ```yaml
//! source:
//!   type: postgres
//!   hostname: 127.0.0.1
//!   port: 5432
//!   username: repl               # a role with REPLICATION (and SELECT on the tables)
//!   password-env: PGPASSWORD     # or `password: ...`
//!   database: shop
//!   tables: ['public\..*']       # regexes over `schema.table`, matched whole
//!   slot: lakeshift_shop         # the logical replication slot (created if missing)
//!   publication: lakeshift_shop  # made over the captured tables if missing
//!   startup:
//!     mode: initial              # initial (snapshot, then the stream) | latest
//!   purged-resume: fail          # or resnapshot, when the slot was lost
//! ```

use super::config::{JobFileError, PurgedPolicy, Source, SourceKind, Start, StartupMode};
use serde::Deserialize;
use std::collections::BTreeMap;

/// `type: postgres`: a PostgreSQL database, read by logical replication.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PgConfig {
    /// `postgres` or `postgresql`.
    #[serde(rename = "type")]
    #[schemars(extend("enum" = ["postgres", "postgresql"]))]
    pub kind: String,
    /// The server's host name or address.
    pub hostname: String,
    /// The server's port.
    #[serde(default = "default_port")]
    pub port: u16,
    /// The role (REPLICATION and SELECT on the captured tables).
    pub username: String,
    /// The password as written (or `password-env`).
    #[serde(default)]
    pub password: Option<String>,
    /// Name of an environment variable holding the password.
    #[serde(default)]
    pub password_env: Option<String>,
    /// The database the tables are in.
    pub database: String,
    /// Regexes over `schema.table`, matched whole.
    pub tables: Vec<String>,
    /// The replication slot (lower case letters, digits and `_`): one per job.
    #[serde(default = "default_name")]
    pub slot: String,
    /// The publication the slot reads through (made over the captured tables when
    /// missing).
    #[serde(default = "default_name")]
    pub publication: String,
    /// Where a first run starts.
    #[serde(default)]
    pub startup: PgStartup,
    /// Key columns for tables without a primary key (or to override it), by
    /// `schema.table`; NOT NULL columns only.
    #[serde(default)]
    pub key_overrides: BTreeMap<String, Vec<String>>,
    /// Rows per snapshot chunk.
    #[serde(default = "default_chunk")]
    pub snapshot_chunk_rows: u64,
    /// Sessions that read the initial snapshot's tables side by side, each inside the
    /// same exported snapshot (tables are delivered in order; at most this many are
    /// read ahead, two chunks each).
    #[serde(default = "default_parallel")]
    pub snapshot_parallel: usize,
    /// Row batches are cut at about this many bytes.
    #[serde(default = "default_batch_bytes")]
    pub batch_bytes: usize,
    /// The slot is gone or invalidated (dropped, or `max_slot_wal_keep_size`
    /// removed WAL it needed): `fail` (the default) stops with the fix; `resnapshot`
    /// makes a new slot and snapshots every captured table again.
    #[serde(default)]
    pub purged_resume: PurgedPolicy,
}

/// `source.startup` of a PostgreSQL source.
#[derive(Debug, Clone, Deserialize, Default, schemars::JsonSchema, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct PgStartup {
    /// `initial` (snapshot, then the stream; the default) or `latest` (`gtid` and
    /// `position` are the binlog's, refused here).
    #[serde(default)]
    pub mode: StartupMode,
}

fn default_port() -> u16 {
    5432
}
fn default_name() -> String {
    "lakeshift".into()
}
fn default_chunk() -> u64 {
    8192
}
fn default_parallel() -> usize {
    2
}
fn default_batch_bytes() -> usize {
    4 << 20
}

/// Settings of every session the source opens (replication included): values print
/// as the decoder reads them, and the chunk cursor's literals mean what they say (a
/// backslash is no escape), whatever the role's or database's defaults.
pub const SESSION_OPTIONS: &str = "-c DateStyle=ISO -c TimeZone=UTC -c extra_float_digits=3 -c bytea_output=hex -c IntervalStyle=postgres -c standard_conforming_strings=on";

impl PgConfig {
    /// The connection string of an ordinary session (tokio-postgres).
    pub fn pg_config(&self, password: Option<&str>) -> tokio_postgres::Config {
        let mut c = tokio_postgres::Config::new();
        c.host(&self.hostname)
            .port(self.port)
            .user(&self.username)
            .dbname(&self.database)
            .application_name("lakeshift")
            .options(SESSION_OPTIONS);
        if let Some(p) = password {
            c.password(p);
        }
        c
    }
}

/// An identifier as PostgreSQL's replication commands take it.
pub fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_')
}

pub fn validate(c: PgConfig, env: impl Fn(&str) -> Option<String>) -> Result<Source, JobFileError> {
    let field = |f: &str, why: String| format!("job file: source.{f}: {why}");
    if c.hostname.trim().is_empty() {
        return Err(field("hostname", "is empty".into()).into());
    }
    if c.port == 0 {
        return Err(field("port", "must be 1-65535".into()).into());
    }
    if c.database.trim().is_empty() {
        return Err(field("database", "is empty".into()).into());
    }
    for (k, v) in [("slot", &c.slot), ("publication", &c.publication)] {
        if !valid_name(v) {
            return Err(field(
                k,
                format!("`{v}`: use lower-case letters, digits and _ (at most 63)"),
            )
            .into());
        }
    }
    let password = super::config::password_of(&c.password, &c.password_env, env)?;
    let tables = super::config::table_patterns(&c.tables)?;
    let start = match c.startup.mode {
        StartupMode::Initial => Start::Initial,
        StartupMode::Latest => Start::Latest,
        other => {
            return Err(field(
                "startup.mode",
                format!(
                "{other:?} is for MySQL sources; a PostgreSQL source starts `initial` or `latest`"
            )
                .to_lowercase(),
            )
            .into())
        }
    };
    super::config::check_reading(
        c.snapshot_chunk_rows,
        c.snapshot_parallel,
        c.batch_bytes,
        &c.key_overrides,
        "schema",
    )?;
    Ok(Source {
        key_overrides: c.key_overrides.clone(),
        kind: SourceKind::Postgres(Box::new(c)),
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
    use super::super::config::parse_job;

    const JOB: &str = "source:\n  type: postgres\n  hostname: 127.0.0.1\n  username: repl\n  database: shop\n  tables: ['public\\..*']\n";

    #[test]
    fn a_postgres_job_validates_and_errors_name_the_field() {
        let (_, s) = parse_job(JOB, |_| None).unwrap();
        let pg = s.postgres().expect("a postgres source");
        assert_eq!((pg.port, pg.slot.as_str()), (5432, "lakeshift"));
        assert!(s.captures("public", "orders"));
        let e = parse_job(&format!("{JOB}  slot: My-Slot\n"), |_| None)
            .unwrap_err()
            .0;
        assert!(e.contains("source.slot"), "{e}");
        let e = parse_job(&format!("{JOB}  startup: {{mode: gtid}}\n"), |_| None)
            .unwrap_err()
            .0;
        assert!(e.contains("source.startup.mode"), "{e}");
        let e = parse_job(&JOB.replace("database", "db"), |_| None)
            .unwrap_err()
            .0;
        assert!(e.contains("db"), "{e}");
    }
}
