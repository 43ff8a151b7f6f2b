//! The PostgreSQL change source: a logical replication slot (pgoutput) whose
//! exported snapshot the initial copy reads, then the slot's stream, with the DDL
//! that `lakeshift pg-setup`'s event trigger emits as logical messages in their
//! place among the rows, parsed by the postgres dialect into the schema history.
//!
//! Positions: `file` is `lsn`, `offset` an LSN. At a transaction boundary it is the
//! end of the last commit record delivered (or a keepalive's end of sent WAL) and
//! `ordinal` is 0; inside a transaction it is the LSN of that transaction's commit
//! record (pgoutput's Begin carries it) and `ordinal` counts its changes delivered.
//! The walsender skips transactions whose commit record lies before the start
//! point, so starting at a transaction's commit LSN sends it again, whole, and the
//! first `ordinal` changes are skipped: a stop anywhere resumes exactly. The slot's
//! confirmed flush position moves only to what the sink committed.

mod binary;
pub mod catalog;
pub mod pgoutput;
mod repl;
pub mod values;

use super::config::{Source, Start};
use super::decode::{arrow_type, RowsBuilder, SourceColumn, SourceTable};
use super::history::SchemaHistory;
use super::position::Position;
use super::snapshot::{KeyValue, SnapshotResume};
use super::{Op, Resume, RowBatch, RowPos, SourceError, SourceEvent};
use crate::source::pg_config::PgConfig;
use arrow_schema::{Field, Schema};
use binary::Bin;
use futures::StreamExt;
use repl::{Frame, Session};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use values::Form;

/// The `file` of every PostgreSQL position.
pub const LSN_FILE: &str = "lsn";

pub fn lsn_position(lsn: u64, ordinal: u64) -> Position {
    let mut p = Position::new(LSN_FILE, lsn);
    p.ordinal = ordinal;
    p
}

/// The PostgreSQL source (see the module docs).
pub struct PgSource {
    config: Arc<Source>,
    state_dir: PathBuf,
    /// The LSN the sink committed through (what the slot may confirm).
    acked: Arc<AtomicU64>,
}

impl PgSource {
    pub fn new(config: Arc<Source>, state_dir: PathBuf) -> Self {
        PgSource {
            config,
            state_dir,
            acked: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl super::Source for PgSource {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn start(
        &mut self,
        from: Resume,
        stop_at_end: bool,
        tx: mpsc::Sender<SourceEvent>,
    ) -> tokio::task::JoinHandle<Result<(), SourceError>> {
        let src = self.config.clone();
        let dir = self.state_dir.clone();
        let acked = self.acked.clone();
        tokio::spawn(async move { run(src, dir, from, stop_at_end, tx, acked).await })
    }

    fn committed(&mut self, at: &Position) {
        if at.file == LSN_FILE {
            self.acked.fetch_max(at.offset, Ordering::Relaxed);
        }
    }

    fn close(&mut self) -> futures::future::BoxFuture<'_, ()> {
        let src = self.config.clone();
        let lsn = self.acked.load(Ordering::Relaxed);
        Box::pin(async move {
            if lsn == 0 {
                return;
            }
            // The stream's last status update may predate the last commit: move the
            // slot there (once its walsender has let go of it), so a stopped job
            // holds back only the WAL it will read.
            let Ok(c) = connect(&src).await else { return };
            let slot = &cfg(&src).slot;
            let at = format!("{:X}/{:X}", lsn >> 32, lsn & 0xffff_ffff);
            for _ in 0..50 {
                let r = c
                    .query_opt(
                        "SELECT pg_replication_slot_advance(slot_name, $2::text::pg_lsn) FROM pg_replication_slots                          WHERE slot_name = $1 AND NOT active AND confirmed_flush_lsn < $2::text::pg_lsn",
                        &[slot, &at],
                    )
                    .await;
                match r {
                    Ok(Some(_)) => return,
                    Ok(None) => {
                        let done = c
                            .query_opt(
                                "SELECT 1 FROM pg_replication_slots WHERE slot_name = $1 AND confirmed_flush_lsn >= $2::text::pg_lsn",
                                &[slot, &at],
                            )
                            .await;
                        if matches!(done, Ok(Some(_)) | Err(_)) {
                            return;
                        }
                    }
                    Err(e) => {
                        tracing::warn!("replication slot {slot} not advanced to {at}: {e}");
                        return;
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    }

    fn lag_bytes<'a>(
        &'a mut self,
        at: &'a Position,
    ) -> futures::future::BoxFuture<'a, Option<i64>> {
        let src = self.config.clone();
        Box::pin(async move {
            let c = connect(&src).await.ok()?;
            let r = c
                .query_one("SELECT pg_current_wal_lsn()::text", &[])
                .await
                .ok()?;
            let end = parse_lsn(&r.get::<_, String>(0)).ok()?;
            Some(end as i64 - at.offset as i64)
        })
    }
}

/// `lakeshift status`'s line on the source's slot: the position it confirmed, the
/// WAL it holds back from removal, and whether a job is reading it.
pub async fn slot_status(src: &Source) -> Result<String, SourceError> {
    let c = connect(src).await?;
    let slot = &cfg(src).slot;
    let r = c
        .query_opt(
            "SELECT active, coalesce(wal_status, ''), coalesce(confirmed_flush_lsn::text, '-'),                     coalesce((pg_current_wal_lsn() - restart_lsn)::bigint, 0)              FROM pg_replication_slots WHERE slot_name = $1",
            &[slot],
        )
        .await
        .map_err(catalog::sql)?;
    Ok(match r {
        None => format!("source slot {slot}: does not exist (made by the job's first run)"),
        Some(r) => {
            let (active, status, confirmed, held): (bool, String, String, i64) =
                (r.get(0), r.get(1), r.get(2), r.get(3));
            format!(
                "source slot {slot}: confirmed {confirmed}, retains {} of WAL ({held} bytes; wal_status {status}), {}",
                human_bytes(held),
                if active { "being read" } else { "not being read" }
            )
        }
    })
}

/// What the job holds on the server (`lakeshift drop-job`): its replication slot,
/// which keeps WAL for as long as it exists, and the publication when the job made
/// it (a publication made by hand is kept). Removed when `apply`. A slot being read
/// is refused: the job still runs.
pub async fn drop_held(src: &Source, apply: bool) -> Result<Vec<String>, SourceError> {
    let c = connect(src).await?;
    let (slot, publication) = (&cfg(src).slot, &cfg(src).publication);
    let mut out = Vec::new();
    let r = c
        .query_opt(
            "SELECT active, coalesce(active_pid, 0), coalesce((pg_current_wal_lsn() - restart_lsn)::bigint, 0) FROM pg_replication_slots WHERE slot_name = $1",
            &[slot],
        )
        .await
        .map_err(catalog::sql)?;
    match r {
        None => out.push(format!("replication slot {slot}: none")),
        Some(r) => {
            let (active, pid, held): (bool, i32, i64) = (r.get(0), r.get(1), r.get(2));
            if active {
                return Err(SourceError::Preflight(format!(
                    "replication slot {slot} is being read (server process {pid}): stop the job first"
                )));
            }
            if apply {
                c.execute("SELECT pg_drop_replication_slot($1)", &[slot])
                    .await
                    .map_err(catalog::sql)?;
            }
            out.push(format!(
                "{} replication slot {slot} (it retained {} of WAL)",
                if apply { "dropped" } else { "would drop" },
                human_bytes(held)
            ));
        }
    }
    let r = c
        .query_opt(
            "SELECT coalesce(obj_description(oid, 'pg_publication'), '') FROM pg_publication WHERE pubname = $1",
            &[publication],
        )
        .await
        .map_err(catalog::sql)?;
    match r.map(|r| r.get::<_, String>(0)) {
        None => out.push(format!("publication {publication}: none")),
        Some(note) if note == made_note(slot) => {
            if apply {
                c.batch_execute(&format!("DROP PUBLICATION {}", ident(publication)))
                    .await
                    .map_err(catalog::sql)?;
                // Its patterns with the DDL capture, if registered.
                let _ = c
                    .execute(
                        "DELETE FROM lakeshift.publish_new WHERE pubname = $1",
                        &[publication],
                    )
                    .await;
            }
            out.push(format!(
                "{} publication {publication} (the job made it)",
                if apply { "dropped" } else { "would drop" }
            ));
        }
        Some(_) => out.push(format!(
            "publication {publication}: kept (the job did not make it; DROP PUBLICATION {} if nothing else uses it)",
            ident(publication)
        )),
    }
    Ok(out)
}

/// The comment on a publication the job made, naming its slot.
fn made_note(slot: &str) -> String {
    format!("made by lakeshift for slot {slot}")
}

fn human_bytes(b: i64) -> String {
    let b = b as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.1} GiB", b / (1u64 << 30) as f64)
    } else if b >= (1 << 20) as f64 {
        format!("{:.1} MiB", b / (1 << 20) as f64)
    } else {
        format!("{:.0} KiB", b / 1024.0)
    }
}

fn cfg(src: &Source) -> &PgConfig {
    src.postgres().expect("a postgres source")
}

/// An ordinary session (catalog, snapshot).
pub async fn connect(src: &Source) -> Result<tokio_postgres::Client, SourceError> {
    let c = cfg(src);
    let (client, conn) = c
        .pg_config(src.password.as_deref())
        .connect(tokio_postgres::NoTls)
        .await
        .map_err(|e| {
            let at = format!("{}:{}/{}", c.hostname, c.port, c.database);
            match e.as_db_error().map(|d| d.code().code()) {
                // invalid_password, invalid_authorization_specification,
                // invalid_catalog_name (no such database)
                Some("28P01" | "28000" | "3D000") => SourceError::Refused(format!(
                    "{at}: {} (source.username / password / database)",
                    catalog::describe(&e)
                )),
                _ => SourceError::Connect(format!("{at}: {e}")),
            }
        })?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(client)
}

/// A replication session of the job's role on its database.
async fn session(src: &Source) -> Result<Session, SourceError> {
    let c = cfg(src);
    Session::connect(
        &c.hostname,
        c.port,
        &c.username,
        src.password.as_deref(),
        &c.database,
        crate::source::pg_config::SESSION_OPTIONS,
    )
    .await
}

/// An LSN as PostgreSQL prints it (`16/B374D848`).
fn parse_lsn(s: &str) -> Result<u64, SourceError> {
    let bad = || SourceError::Protocol(format!("{s:?} is not an LSN"));
    let (hi, lo) = s.trim().split_once('/').ok_or_else(bad)?;
    let hi = u64::from_str_radix(hi, 16).map_err(|_| bad())?;
    let lo = u64::from_str_radix(lo, 16).map_err(|_| bad())?;
    Ok((hi << 32) | lo)
}

/// A captured table as both decoders see it: the shared table model and how each
/// column's text is read.
struct PgTable {
    table: Arc<SourceTable>,
    forms: Vec<Form>,
    /// How the snapshot's binary COPY fields are read.
    bins: Vec<Bin>,
}

fn pg_table(src: &Source, schema: &str, ir: &ddl_core::Table) -> Result<PgTable, SourceError> {
    let mut columns = Vec::new();
    let mut forms = Vec::new();
    let mut bins = Vec::new();
    // A generated column's values are never in the stream (pgoutput leaves them
    // out): its rows carry none; a relational target computes them itself.
    for c in ir.columns.iter().filter(|c| c.generated.is_none()) {
        let (kind, form) = values::kind_of(&c.data_type);
        columns.push(SourceColumn {
            name: c.name.clone(),
            kind,
            nullable: c.nullable,
        });
        forms.push(form);
        bins.push(Bin::of(&c.data_type, form));
    }
    let over = src.key_overrides.get(&format!("{schema}.{}", ir.name.name));
    let key_names: Vec<String> = match over {
        Some(k) => k.clone(),
        None => ir
            .primary_key
            .as_ref()
            .map(|pk| pk.columns.clone())
            .unwrap_or_default(),
    };
    let mut key = Vec::new();
    for k in &key_names {
        let i = columns.iter().position(|c| c.name == *k).ok_or_else(|| {
            SourceError::Schema(format!(
                "{schema}.{}: key column {k} does not exist",
                ir.name.name
            ))
        })?;
        if over.is_some() && columns[i].nullable {
            return Err(SourceError::Schema(super::decode::nullable_key(
                schema,
                &ir.name.name,
                k,
            )));
        }
        key.push(i);
    }
    let arrow = Arc::new(Schema::new(
        columns
            .iter()
            .map(|c| Field::new(&c.name, arrow_type(&c.kind), true))
            .collect::<Vec<_>>(),
    ));
    Ok(PgTable {
        table: Arc::new(SourceTable {
            db: schema.to_owned(),
            name: ir.name.name.clone(),
            columns,
            key,
            arrow,
            ir: Arc::new(super::mirrored(src, ir)),
        }),
        forms,
        bins,
    })
}

/// Generated columns (schema, table, column) of the captured tables in `history`.
fn generated_columns(
    src: &Source,
    history: &SchemaHistory,
) -> std::collections::HashSet<(String, String, String)> {
    history
        .tables()
        .filter(|t| src.captures(t.name.schema.as_deref().unwrap_or_default(), &t.name.name))
        .flat_map(|t| {
            t.columns.iter().filter(|c| c.generated.is_some()).map(|c| {
                (
                    t.name.schema.clone().unwrap_or_default(),
                    t.name.name.clone(),
                    c.name.clone(),
                )
            })
        })
        .collect()
}

/// A DDL's changes as a target that does not compute PostgreSQL's generated
/// columns takes them: such columns left out of new tables, their additions and
/// every change of one (`before`: the generated columns before the DDL) dropped,
/// each with a warning.
fn without_generated(
    src: &Source,
    before: &std::collections::HashSet<(String, String, String)>,
    schema: &str,
    mut ev: SourceEvent,
) -> SourceEvent {
    use ddl_core::SchemaChange as C;
    let SourceEvent::Schema { changes, after, .. } = &mut ev else {
        return ev;
    };
    let warn = |t: &ddl_core::TableName, c: &str| generated_left_out(&t.to_string(), c);
    let was_generated = |t: &ddl_core::TableName, c: &str| {
        before.contains(&(
            t.schema.clone().unwrap_or_else(|| schema.to_owned()),
            t.name.clone(),
            c.to_owned(),
        ))
    };
    *changes = std::mem::take(changes)
        .into_iter()
        .filter_map(|c| match c {
            C::CreateTable {
                table,
                if_not_exists,
            } => {
                for g in table.columns.iter().filter(|c| c.generated.is_some()) {
                    warn(&table.name, &g.name);
                }
                Some(C::CreateTable {
                    table: super::mirrored(src, &table),
                    if_not_exists,
                })
            }
            C::AddColumn { table, column, .. } if column.generated.is_some() => {
                warn(&table, &column.name);
                None
            }
            C::DropColumn {
                ref table,
                ref column,
            }
            | C::AlterColumnType {
                ref table,
                ref column,
                ..
            }
            | C::SetNullable {
                ref table,
                ref column,
                ..
            }
            | C::SetDefault {
                ref table,
                ref column,
                ..
            }
            | C::SetIdentity {
                ref table,
                ref column,
                ..
            }
            | C::SetOnUpdate {
                ref table,
                ref column,
                ..
            }
            | C::SetColumnComment {
                ref table,
                ref column,
                ..
            }
            | C::MoveColumn {
                ref table,
                ref column,
                ..
            }
            | C::RenameColumn {
                ref table,
                from: ref column,
                ..
            } if was_generated(table, column) => None,
            C::AddIndex {
                ref table,
                ref index,
            } if index.parts.iter().any(|p| was_generated(table, &p.column)) => None,
            c => Some(c),
        })
        .collect();
    for t in after.iter_mut() {
        *t = super::mirrored(src, t);
    }
    ev
}

/// Says that a PostgreSQL generated column is left out of a target's table.
fn generated_left_out(table: &str, column: &str) {
    tracing::warn!(
        "column {column} of {table} is generated: PostgreSQL's logical replication never carries its values, so it is left out of the target's table (a PostgreSQL target computes it itself)"
    );
}

/// Quote an identifier for PostgreSQL.
pub fn ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The base tables an account can see, as (schema, table).
async fn visible_tables(
    client: &tokio_postgres::Client,
) -> Result<Vec<(String, String)>, SourceError> {
    Ok(client
        .query(
            "SELECT table_schema::text, table_name::text FROM information_schema.tables \
             WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')",
            &[],
        )
        .await
        .map_err(catalog::sql)?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect())
}

/// Why publication `name`, not made yet, must not be made over `captured`: tables
/// without a key or REPLICA IDENTITY (once published, their updates fail).
fn unidentified_problem(name: &str, captured: &[CapturedTable]) -> Option<String> {
    let unidentified: Vec<&str> = captured
        .iter()
        .filter(|t| t.unidentified)
        .map(|t| t.name.as_str())
        .collect();
    if unidentified.is_empty() {
        return None;
    }
    let fix: Vec<String> = unidentified
        .iter()
        .map(|t| format!("ALTER TABLE {t} REPLICA IDENTITY FULL;"))
        .collect();
    Some(format!(
        "publication {name} does not exist, and {} captured table(s) have no primary key and no REPLICA IDENTITY: once published, the application's own UPDATEs and DELETEs on them fail (\"cannot update table ... because it does not have a replica identity\"). Give each a primary key, or run first: {}",
        unidentified.len(),
        fix.join(" ")
    ))
}

/// The state folder's record of the replication slot this job made (written before
/// the slot is made).
const SLOT_MADE: &str = "pg-slot-made";

/// Why a job that has committed nothing must not take slot `slot`: it exists and
/// this job (its state folder `dir`) did not make it.
async fn foreign_slot(
    c: &tokio_postgres::Client,
    slot: &str,
    dir: &std::path::Path,
) -> Result<Option<String>, SourceError> {
    let Some(row) = c
        .query_opt(
            "SELECT active FROM pg_replication_slots WHERE slot_name = $1",
            &[&slot],
        )
        .await
        .map_err(catalog::sql)?
    else {
        return Ok(None);
    };
    let mine = std::fs::read_to_string(dir.join(SLOT_MADE)).is_ok_and(|s| s == slot);
    if mine {
        return Ok(None);
    }
    let active: bool = row.get(0);
    Ok(Some(format!(
        "replication slot {slot} exists{}, and this job did not make it: another job reads it (each job needs its own source.slot), or it was left over (once no job uses it: SELECT pg_drop_replication_slot('{slot}'))",
        if active { " and is being read" } else { "" }
    )))
}

/// `lakeshift check`: what a run checks before it reads, with nothing made (no
/// publication, no slot, no DDL capture): the problems, each with its fix, and notes
/// on what a run will do.
pub async fn check(src: &Source, state: &std::path::Path) -> Result<super::Checked, SourceError> {
    let c = cfg(src).clone();
    let client = connect(src).await?;
    let mut out = super::Checked::default();
    let (problems, notes) = (&mut out.problems, &mut out.notes);
    match catalog::preflight(&client, &c.username, &c.slot).await {
        Err(SourceError::Preflight(p)) => problems.push(p),
        Err(e) => problems.push(e.to_string()),
        Ok(()) => {}
    }
    let visible = visible_tables(&client).await?;
    match super::captured_count(src, &visible, &c.username, false) {
        Ok(n) => {
            notes.push(format!(
                "source.tables captures {n} of the {} table(s) user {} can see",
                visible.len(),
                c.username
            ));
            for p in super::unmatched_patterns(src, &visible) {
                out.warnings.push(super::unmatched_warning(&p, &c.username));
            }
        }
        Err(e) => {
            // (what a publication would hold is moot then)
            problems.push(e);
            return Ok(out);
        }
    }
    let published = client
        .query_one(
            "SELECT count(*) FROM pg_publication WHERE pubname = $1",
            &[&c.publication],
        )
        .await
        .map_err(catalog::sql)?
        .get::<_, i64>(0)
        > 0;
    let captured = captured_tables(&client, src, &c.publication).await?;
    problems.extend(deferrable_problem(&captured));
    problems.extend(identity_problem(src, &captured));
    if published {
        match check_publication(&client, src, &c.publication).await {
            Ok(()) => notes.push(format!(
                "publication {} publishes every captured table",
                c.publication
            )),
            Err(SourceError::Preflight(p)) => problems.push(p),
            Err(e) => problems.push(e.to_string()),
        }
    } else {
        if let Some(p) = unidentified_problem(&c.publication, &captured) {
            problems.push(p);
        } else {
            // Whether the run could make it: made in a transaction rolled back.
            let (sql, _) = publication_statement(&client, src, &c.publication, &captured).await?;
            let tried = client
                .batch_execute(&format!("BEGIN; {sql}; ROLLBACK"))
                .await;
            let _ = client.batch_execute("ROLLBACK").await;
            match tried {
                Ok(()) => notes.push(format!(
                    "publication {} does not exist: the first run makes it ({sql})",
                    c.publication
                )),
                Err(e) => problems.push(format!(
                    "publication {} does not exist and user {} cannot make it ({}): have a superuser or the tables' owner run {sql}",
                    c.publication,
                    c.username,
                    catalog::describe(&e)
                )),
            }
        }
    }
    // A publication an earlier run found narrowed stops every run (see
    // check_publication_kept).
    let marker = state.join("source").join(NARROWED);
    if let Ok(why) = std::fs::read_to_string(&marker) {
        problems.push(narrowed(why.trim_end(), &marker));
    }
    // A job that never ran must not find its slot taken.
    if !state.exists() {
        if let Some(p) = foreign_slot(&client, &c.slot, &state.join("source")).await? {
            problems.push(p);
        }
    }
    if !catalog::capture_installed(&client).await? {
        out.warnings.push(format!(
            "the DDL capture is not installed in {}: schema changes stop the job when their rows arrive; run `lakeshift pg-setup --config JOB --apply` (as a superuser)",
            c.database
        ));
    }
    Ok(out)
}

async fn run(
    src: Arc<Source>,
    dir: PathBuf,
    from: Resume,
    stop_at_end: bool,
    tx: mpsc::Sender<SourceEvent>,
    acked: Arc<AtomicU64>,
) -> Result<(), SourceError> {
    let c = cfg(&src).clone();
    let client = connect(&src).await?;
    catalog::preflight(&client, &c.username, &c.slot).await?;
    let visible = visible_tables(&client).await?;
    let resuming = from.position.is_some() || from.snapshot.is_some();
    super::captured_count(&src, &visible, &c.username, resuming).map_err(SourceError::Preflight)?;
    ensure_publication(&client, &src, &c.publication).await?;
    register_new_tables(&client, &src, &c.publication).await?;
    check_publication_kept(&client, &src, &c.publication, &dir, resuming).await?;
    let captured = captured_tables(&client, &src, &c.publication).await?;
    if let Some(p) = deferrable_problem(&captured).or_else(|| identity_problem(&src, &captured)) {
        return Err(SourceError::Preflight(p));
    }
    if !catalog::capture_installed(&client).await? {
        tracing::warn!(
            "the DDL capture is not installed in {}: schema changes will stop the job when their rows arrive; run `lakeshift pg-setup --config JOB --apply` (as a superuser) first",
            c.database
        );
    }
    // The end: every transaction committed before now, including commits not yet
    // flushed (`synchronous_commit = off`): the WAL inserted, not the WAL written.
    // The stream shows it reached the end by a commit at or after it: WAL after the
    // last commit (a VACUUM's records, a non-transactional message) reaches the
    // client only in a keepalive, which an idle walsender sends every
    // wal_sender_timeout / 2. So a transaction of one logical message of the job's
    // own (ignored when read), committed synchronously, ends the run's stream.
    let end = if stop_at_end {
        let r = client
            .query_one(
                "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_insert_lsn() END)::text, pg_is_in_recovery()",
                &[],
            )
            .await
            .map_err(catalog::sql)?;
        if !r.get::<_, bool>(1) {
            client
                .batch_execute(&format!(
                    "BEGIN; SET LOCAL synchronous_commit = on; SELECT pg_logical_emit_message(true, {}, '{{\"kind\": \"end\"}}'); COMMIT",
                    literal(catalog::MESSAGE_PREFIX)
                ))
                .await
                .map_err(catalog::sql)?;
        }
        Some(parse_lsn(&r.get::<_, String>(0))?)
    } else {
        None
    };
    // A lost slot: a definite error, or a new snapshot when the job asks for one.
    let mut position = from.position.clone();
    let mut resnapshot = false;
    if let (Some(p), None) = (&from.position, &from.snapshot) {
        if let Err(e) = slot_must_exist(&client, &c.slot, p).await {
            if c.purged_resume != super::config::PurgedPolicy::Resnapshot {
                return Err(e);
            }
            tracing::warn!(
                "{e}; taking a new snapshot of every captured table (purged-resume: resnapshot)"
            );
            client
                .execute(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active",
                    &[&c.slot],
                )
                .await
                .map_err(catalog::sql)?;
            position = None;
            resnapshot = true;
        }
    }
    let (mut repl, history, start) = match (&position, &from.snapshot) {
        (_, Some(r)) => {
            let history = SchemaHistory::load(&dir, &r.position)?.ok_or_else(|| {
                SourceError::Schema("resuming a snapshot needs the stored schema history".into())
            })?;
            let snap = client_snapshot(&src).await?;
            let Some(history) =
                snapshot(&src, &snap, history, &r.position, Some(r), &tx, &dir).await?
            else {
                return Ok(());
            };
            drop(snap);
            let repl = session(&src).await?;
            (repl, history, r.position.clone())
        }
        (Some(p), None) => {
            let history = SchemaHistory::load(&dir, p)?.ok_or_else(|| {
                SourceError::Schema(format!(
                    "no stored schema history in {} to resume at {p}",
                    dir.display()
                ))
            })?;
            let repl = session(&src).await?;
            (repl, history, p.clone())
        }
        (None, None) => {
            // A new job: a slot this job made on an earlier try that committed
            // nothing is of no use (its snapshot is gone); one it did not make is
            // another job's, or left by hand, and is never dropped.
            if let Some(p) = foreign_slot(&client, &c.slot, &dir).await? {
                return Err(SourceError::Preflight(p));
            }
            let dropped = client
                .execute(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active",
                    &[&c.slot],
                )
                .await
                .map_err(catalog::sql)?;
            if dropped > 0 {
                tracing::info!(
                    "dropped replication slot {} left by a run that committed nothing",
                    c.slot
                );
            }
            std::fs::create_dir_all(&dir)
                .and_then(|()| crate::durable::replace(&dir.join(SLOT_MADE), c.slot.as_bytes()))
                .map_err(|e| SourceError::Schema(format!("{}: {e}", dir.display())))?;
            let mut repl = session(&src).await?;
            let export = src.start == Start::Initial || resnapshot;
            let rows = repl
                .simple_query(&format!(
                    "CREATE_REPLICATION_SLOT {} LOGICAL pgoutput {}",
                    c.slot,
                    if export {
                        "EXPORT_SNAPSHOT"
                    } else {
                        "NOEXPORT_SNAPSHOT"
                    }
                ))
                .await?;
            let row = rows.first().ok_or_else(|| {
                SourceError::Protocol("CREATE_REPLICATION_SLOT returned no row".into())
            })?;
            let text = |i: usize| row.get(i).cloned().flatten();
            let point = parse_lsn(&text(1).unwrap_or_default())?;
            let at = lsn_position(point, 0);
            let history = if export {
                let name = text(2).ok_or_else(|| {
                    SourceError::Protocol("CREATE_REPLICATION_SLOT exported no snapshot".into())
                })?;
                let snap = client_snapshot(&src).await?;
                snap.batch_execute(&format!("SET TRANSACTION SNAPSHOT {}", literal(&name)))
                    .await
                    .map_err(catalog::sql)?;
                let defs = catalog::definitions(&snap).await?;
                let history = new_history(&snap, &dir, &at, &defs).await?;
                let _ = std::fs::remove_file(dir.join(SEEN_FILE));
                let Some(h) = snapshot(&src, &snap, history, &at, None, &tx, &dir).await? else {
                    return Ok(());
                };
                drop(snap);
                h
            } else {
                let defs = catalog::definitions(&client).await?;
                new_history(&client, &dir, &at, &defs).await?
            };
            (repl, history, at)
        }
    };
    repl.start(&c.slot, start.offset, &c.publication).await?;
    let streamed_dir = dir.join("streamed");
    let _ = std::fs::remove_dir_all(&streamed_dir);
    tracing::info!("postgres: slot {} streaming from {start}", c.slot);
    let mut s = Stream {
        src,
        tx,
        history,
        tables: HashMap::new(),
        rels: HashMap::new(),
        open: Vec::new(),
        txns: Vec::new(),
        txn: None,
        skip_at: (start.ordinal > 0).then_some(start.offset),
        skip: start.ordinal,
        last: start.offset,
        bytes: 0,
        last_flush: Instant::now(),
        pending_commit: None,
        seen: SeenBySnapshot::load(&dir).filter(|f| start.offset < f.end),
        txn_seen: false,
        taken: Vec::new(),
        streaming: None,
        streamed: Streamed::new(streamed_dir),
        unresolved: HashMap::new(),
        outside: crate::source::Outside::new(false),
        dir: dir.clone(),
        catalog: None,
    };
    let mut told = 0u64;
    let mut checked = Instant::now();
    loop {
        let a = acked.load(Ordering::Relaxed);
        if a > told {
            repl.progress.flushed.store(a, Ordering::Relaxed);
            told = a;
        }
        // The job stopped reading (a stop, an error): checked on every frame, as the
        // server's keepalives can come more often than the quiet timeout below (a
        // stop took 4-13 s while other databases' writes kept the WAL moving).
        if s.tx.is_closed() {
            break;
        }
        if checked.elapsed() >= PUBLICATION_CHECK {
            check_publication_kept(&client, &s.src, &c.publication, &dir, true).await?;
            checked = Instant::now();
        }
        let ev = match tokio::time::timeout(Duration::from_secs(1), repl.recv()).await {
            Err(_) => {
                // Quiet: a commit held for batching goes out now.
                if s.txn.is_none() && !s.flush().await? {
                    return Ok(());
                }
                continue;
            }
            Ok(Ok(frame)) => frame,
            Ok(Err(e)) => return Err(e),
        };
        if !s.event(ev, end).await? {
            break;
        }
    }
    repl.progress
        .flushed
        .store(acked.load(Ordering::Relaxed), Ordering::Relaxed);
    repl.stop().await;
    Ok(())
}

/// How often a running job checks that its publication still publishes what it
/// captures.
const PUBLICATION_CHECK: Duration = Duration::from_secs(5);

/// How a job takes a new snapshot: what the stops that need one say.
pub(super) use super::NEW_SNAPSHOT;

/// In the source's state folder: why a run that had read changes found its
/// publication narrower than the capture.
const NARROWED: &str = "publication-narrowed.txt";

/// [`check_publication`], remembered: once a run that had read changes (`read`)
/// finds the publication narrower than the capture, the changes made meanwhile are
/// not in the stream, however the publication is mended, so every later run stops
/// the same way until a new snapshot (a new state folder), or until the file that
/// says so is deleted by someone who knows nothing was written meanwhile.
async fn check_publication_kept(
    c: &tokio_postgres::Client,
    src: &super::config::Source,
    name: &str,
    dir: &std::path::Path,
    read: bool,
) -> Result<(), SourceError> {
    let marker = dir.join(NARROWED);
    if let Ok(why) = std::fs::read_to_string(&marker) {
        return Err(SourceError::Preflight(narrowed(why.trim_end(), &marker)));
    }
    match check_publication(c, src, name).await {
        Err(SourceError::Preflight(why)) if read => {
            // (What the stream holds up to here is what the user is told of.)
            let now = c
                .query_one(
                    "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_insert_lsn() END)::text",
                    &[],
                )
                .await
                .map_err(catalog::sql)
                .and_then(|r| parse_lsn(&r.get::<_, String>(0)))?;
            Err(narrowed_here(dir, &why, now))
        }
        r => r,
    }
}

/// In the source's state folder: the stream position up to which a narrowed
/// publication was reported (a stop once its file [`NARROWED`] is deleted by hand
/// lets the job go on past what was reported).
const NARROWED_SEEN: &str = "publication-narrowed-seen.txt";

/// The job stops: its publication was found narrower than the capture (`why`),
/// remembered in the state folder `dir` with the stream position it was found at.
fn narrowed_here(dir: &std::path::Path, why: &str, at: u64) -> SourceError {
    let marker = dir.join(NARROWED);
    let keep = |p: &std::path::Path, text: &str| {
        crate::durable::replace(p, text.as_bytes())
            .map_err(|e| SourceError::Schema(format!("{}: {e}", p.display())))
    };
    if let Err(e) = keep(&marker, why) {
        return e;
    }
    if narrowed_seen(dir).is_none_or(|s| at > s) {
        if let Err(e) = keep(&dir.join(NARROWED_SEEN), &at.to_string()) {
            return e;
        }
    }
    SourceError::Preflight(narrowed(why, &marker))
}

/// Whether a narrowing of the publication read in the stream at `at` was reported
/// already and let go by hand (its file deleted): true; false: not.
fn publication_seen(dir: &std::path::Path, at: u64) -> bool {
    !dir.join(NARROWED).exists() && narrowed_seen(dir).is_some_and(|s| s >= at)
}

/// The stream position in [`NARROWED_SEEN`], if any.
fn narrowed_seen(dir: &std::path::Path) -> Option<u64> {
    std::fs::read_to_string(dir.join(NARROWED_SEEN))
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// The stop of a job whose publication was found narrower than its capture once it
/// had read changes (the same words on the first run and every later one).
fn narrowed(why: &str, marker: &std::path::Path) -> String {
    format!(
        "{why}. The changes made while that was so are not in the stream, even once it is mended, so every run stops here until a new snapshot ({NEW_SNAPSHOT}); if nothing was written to the captured tables meanwhile, delete {} to go on",
        marker.display()
    )
}

/// The publication publishes every action (insert, update, delete, truncate) of
/// every captured table. A publication narrowed by hand (`publish = 'insert'`, a
/// table dropped from it, a table created later that it does not cover) would lose
/// changes silently: the job stops, naming what is missing and the fix.
async fn check_publication(
    c: &tokio_postgres::Client,
    src: &super::config::Source,
    name: &str,
) -> Result<(), SourceError> {
    let Some(p) = c
        .query_opt(
            "SELECT pubinsert, pubupdate, pubdelete, pubtruncate, pubviaroot FROM pg_publication WHERE pubname = $1",
            &[&name],
        )
        .await
        .map_err(catalog::sql)?
    else {
        return Err(SourceError::Preflight(format!(
            "publication {name} was dropped while the job used it: the changes since then are not in the stream; make it again (or let the job make it) and take a new snapshot ({NEW_SNAPSHOT})"
        )));
    };
    let missing: Vec<&str> = ["insert", "update", "delete", "truncate"]
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !p.get::<_, bool>(*i))
        .map(|(_, a)| a)
        .collect();
    if !missing.is_empty() {
        return Err(SourceError::Preflight(format!(
            "publication {name} does not publish {} (altered by hand?): those changes of every captured table would be lost. ALTER PUBLICATION {} SET (publish = 'insert, update, delete, truncate'); changes made while it was narrower are not in the stream: take a new snapshot of the tables they touched",
            missing.join(", "),
            ident(name)
        )));
    }
    // A row filter or a column list (PostgreSQL 15) publishes part of a table: the
    // rest of its changes, or of its columns, never arrive (a column left out would
    // read as dropped).
    let filtered: Vec<String> = c
        .query(
            "SELECT n.nspname::text, k.relname::text,
                    (to_jsonb(pr) ->> 'prqual') IS NOT NULL, (to_jsonb(pr) ->> 'prattrs') IS NOT NULL
               FROM pg_publication_rel pr JOIN pg_publication p ON p.oid = pr.prpubid
               JOIN pg_class k ON k.oid = pr.prrelid JOIN pg_namespace n ON n.oid = k.relnamespace
              WHERE p.pubname = $1 AND ((to_jsonb(pr) ->> 'prqual') IS NOT NULL OR (to_jsonb(pr) ->> 'prattrs') IS NOT NULL)
              ORDER BY 1, 2",
            &[&name],
        )
        .await
        .map_err(catalog::sql)?
        .iter()
        .filter(|r| src.captures(&r.get::<_, String>(0), &r.get::<_, String>(1)))
        .map(|r| {
            let what = match (r.get::<_, bool>(2), r.get::<_, bool>(3)) {
                (true, true) => "a row filter and a column list",
                (true, false) => "a row filter",
                _ => "a column list",
            };
            format!(
                "{}.{} ({what})",
                ident(&r.get::<_, String>(0)),
                ident(&r.get::<_, String>(1))
            )
        })
        .collect();
    if !filtered.is_empty() {
        return Err(SourceError::Preflight(format!(
            "publication {name} publishes only part of captured table(s) {} (altered by hand?): the rows a filter leaves out and the columns a list leaves out would never arrive. ALTER PUBLICATION {} SET TABLE ... without WHERE or column lists (or let the job make its own publication)",
            filtered.join(", "),
            ident(name)
        )));
    }
    let tables = captured_tables(c, src, name).await?;
    let names = |pick: fn(&CapturedTable) -> bool| -> Vec<&str> {
        tables
            .iter()
            .filter(|t| pick(t))
            .map(|t| t.name.as_str())
            .collect()
    };
    let unlogged = names(|t| t.unlogged);
    if !unlogged.is_empty() {
        return Err(SourceError::Preflight(format!(
            "captured table(s) {} are UNLOGGED: PostgreSQL writes no WAL for them, so none of their changes can be streamed. ALTER TABLE ... SET LOGGED (then take a new snapshot of them), or leave them out of source.tables",
            unlogged.join(", ")
        )));
    }
    let partitioned = names(|t| t.partitioned);
    if !partitioned.is_empty() && !p.get::<_, bool>(4) {
        return Err(SourceError::Preflight(format!(
            "captured table(s) {} are partitioned, and publication {name} publishes their rows under each partition's name: ALTER PUBLICATION {} SET (publish_via_partition_root = true), so they arrive as the partitioned table's",
            partitioned.join(", "),
            ident(name)
        )));
    }
    let unpublished = names(|t| !t.published);
    if !unpublished.is_empty() {
        // A publication of whole schemas loses a schema dropped and made again.
        let schemas: Vec<String> = c
            .query(
                r#"SELECT DISTINCT n.nspname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE '"' || replace(n.nspname, '"', '""') || '"."' || replace(c.relname, '"', '""') || '"' = ANY($1) AND EXISTS (SELECT 1 FROM pg_publication_namespace pn JOIN pg_publication p ON p.oid = pn.pnpubid WHERE p.pubname = $2) ORDER BY 1"#,
                &[&unpublished, &name],
            )
            .await
            .unwrap_or_default()
            .iter()
            .map(|r| ident(&r.get::<_, String>(0)))
            .collect();
        let fix = match schemas.is_empty() {
            true => format!("ADD TABLE {}", unpublished.join(", ")),
            false => format!(
                "ADD TABLES IN SCHEMA {} (a schema dropped and made again leaves the publication)",
                schemas.join(", ")
            ),
        };
        // Published without a replica identity, a keyless table's UPDATEs and
        // DELETEs fail for the application: that comes first.
        let unidentified: Vec<String> = tables
            .iter()
            .filter(|t| !t.published && t.unidentified)
            .map(|t| format!("ALTER TABLE {} REPLICA IDENTITY FULL;", t.name))
            .collect();
        let fix = if unidentified.is_empty() {
            fix
        } else {
            format!(
                "{fix} (first, as they have no primary key and no REPLICA IDENTITY, or the application's UPDATEs and DELETEs on them fail once published: {})",
                unidentified.join(" ")
            )
        };
        return Err(SourceError::Preflight(format!(
            "captured table(s) {} are not in publication {name}: their changes would be lost. ALTER PUBLICATION {} {fix}; changes made before that are not in the stream: take a new snapshot of those tables (or narrow source.tables)",
            unpublished.join(", "),
            ident(name),
        )));
    }
    Ok(())
}

/// The job's publication: used as it is when it exists; otherwise made over the
/// captured tables only, never `FOR ALL TABLES`: `FOR TABLES IN SCHEMA` when every
/// pattern is a whole schema (the patterns capture every table of those schemas),
/// so tables created there later are in it from their first row (a `CREATE TABLE
/// ... AS SELECT` too); `FOR TABLE` the captured tables otherwise, which the DDL
/// capture keeps (a table made later that the patterns match joins it as it is
/// made, see `register_new_tables`). A published table whose updates and deletes
/// cannot name their row (no key and REPLICA IDENTITY DEFAULT, or NOTHING) makes
/// the application's own UPDATEs and DELETEs fail: such captured tables are named,
/// with the statement that fixes each, before anything is made, and a table made
/// later without a key is given REPLICA IDENTITY FULL by the DDL capture.
async fn ensure_publication(
    c: &tokio_postgres::Client,
    src: &super::config::Source,
    name: &str,
) -> Result<(), SourceError> {
    let n = c
        .query_one(
            "SELECT count(*) FROM pg_publication WHERE pubname = $1",
            &[&name],
        )
        .await
        .map_err(catalog::sql)?
        .get::<_, i64>(0);
    if n > 0 {
        return Ok(());
    }
    let captured = captured_tables(c, src, name).await?;
    if let Some(p) = unidentified_problem(name, &captured) {
        return Err(SourceError::Preflight(p));
    }
    let (sql, what) = publication_statement(c, src, name, &captured).await?;
    // Made and marked as the job's in one transaction (one simple query; `drop-job`
    // drops only a publication the job made).
    let made = format!(
        "{sql}; COMMENT ON PUBLICATION {} IS {}",
        ident(name),
        literal(&made_note(&cfg(src).slot))
    );
    c.batch_execute(&made).await.map_err(|e| {
        SourceError::Preflight(format!(
            "publication {name} does not exist and cannot be created ({}): create it as a superuser or the tables' owner: {sql}",
            catalog::describe(&e)
        ))
    })?;
    if what.starts_with("FOR TABLES IN SCHEMA") {
        tracing::info!("made publication {name} {what}");
    } else {
        tracing::info!(
            "made publication {name} over the {} table(s) captured now",
            captured.len()
        );
    }
    Ok(())
}

/// The `CREATE PUBLICATION` a job makes for `captured`: whole schemas when the
/// patterns name whole schemas (that exist), else the captured tables; and its
/// `FOR ...` part.
async fn publication_statement(
    c: &tokio_postgres::Client,
    src: &super::config::Source,
    name: &str,
    captured: &[CapturedTable],
) -> Result<(String, String), SourceError> {
    // (Only schemas that exist: a pattern may name one made later.)
    let existing: Vec<String> = c
        .query("SELECT nspname::text FROM pg_namespace", &[])
        .await
        .map_err(catalog::sql)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let schemas = whole_schemas(&super::config::written_patterns(&src.tables))
        .map(|s| {
            s.into_iter()
                .filter(|s| existing.contains(s))
                .collect::<Vec<_>>()
        })
        .filter(|s| !s.is_empty());
    let what = match schemas {
        Some(s) => format!(
            "FOR TABLES IN SCHEMA {}",
            s.iter().map(|s| ident(s)).collect::<Vec<_>>().join(", ")
        ),
        None if captured.is_empty() => String::new(),
        None => format!(
            "FOR TABLE {}",
            captured
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    // Partitions' rows are published as their partitioned table's.
    let sql = format!(
        "CREATE PUBLICATION {} {what} WITH (publish_via_partition_root = true)",
        ident(name)
    );
    Ok((sql, what))
}

/// A publication the job made learns the job's `source.tables` patterns through the
/// DDL capture (`lakeshift.publish_new`): a table made later that they match joins
/// it in the transaction that made it. Without the capture (or the right to
/// register), such a table stops the job until it is added by hand.
async fn register_new_tables(
    c: &tokio_postgres::Client,
    src: &super::config::Source,
    name: &str,
) -> Result<(), SourceError> {
    let made = c
        .query_opt(
            "SELECT obj_description(oid, 'pg_publication') = $2 FROM pg_publication WHERE pubname = $1 AND NOT puballtables",
            &[&name, &made_note(&cfg(src).slot)],
        )
        .await
        .map_err(catalog::sql)?
        .and_then(|r| r.get::<_, Option<bool>>(0))
        .unwrap_or(false);
    if !made {
        return Ok(());
    }
    let by_hand = format!(
        "a table created later that source.tables matches is not in publication {name} until it is added (ALTER PUBLICATION {} ADD TABLE ...); the job stops until then",
        ident(name)
    );
    let installed = c
        .query_one(
            "SELECT to_regclass('lakeshift.publish_new') IS NOT NULL AND to_regprocedure('lakeshift.publish_new_table(oid)') IS NOT NULL",
            &[],
        )
        .await
        .map_err(catalog::sql)?
        .get::<_, bool>(0);
    if !installed {
        tracing::warn!("{by_hand}: install the DDL capture (`lakeshift pg-setup --config JOB --apply`, as a superuser) and tables made later join it as they are made");
        return Ok(());
    }
    let patterns = super::config::written_patterns(&src.tables);
    match c
        .batch_execute(&catalog::register_sql(name, &patterns))
        .await
    {
        Ok(()) => tracing::info!(
            "tables made later that source.tables matches join publication {name} as they are made (the DDL capture)"
        ),
        Err(e) => tracing::warn!(
            "{by_hand}: registering the job's patterns with the DDL capture failed ({}); `lakeshift pg-setup --config JOB --apply` as a superuser registers them",
            catalog::describe(&e)
        ),
    }
    Ok(())
}

/// A table `source.tables` captures (partitions are their partitioned table's), as
/// the publication checks see it.
struct CapturedTable {
    /// `"schema"."table"`, quoted for SQL.
    name: String,
    /// In `publication`.
    published: bool,
    unlogged: bool,
    partitioned: bool,
    /// No primary key and REPLICA IDENTITY DEFAULT, or NOTHING: once published, its
    /// updates and deletes fail. (A DEFERRABLE primary key is no replica identity.)
    unidentified: bool,
    /// The primary key is DEFERRABLE: `ALTER TABLE ...` that makes it immediate.
    deferrable_key: Option<String>,
    /// REPLICA IDENTITY USING INDEX: the index's columns.
    identity_index: Option<Vec<String>>,
    /// The primary key's columns (none: no primary key).
    primary_key: Vec<String>,
}

/// The tables of the source as the publication checks see them (see
/// [`captured_tables`]); `$PUBLISHED` is whether publication `$1` publishes table
/// `c` ([`PUBLISHED_15`] or [`PUBLISHED_14`]).
pub const CAPTURED_TABLES: &str = "SELECT n.nspname::text, c.relname::text,
               $PUBLISHED,
               c.relpersistence = 'u', c.relkind = 'p',
               c.relreplident = 'n' OR (c.relreplident = 'd' AND NOT EXISTS
                 (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary
                   AND i.indimmediate)),
               (SELECT format('ALTER TABLE %I.%I DROP CONSTRAINT %I, ADD CONSTRAINT %I %s',
                         n.nspname, c.relname, k.conname, k.conname,
                         regexp_replace(pg_get_constraintdef(k.oid), ' +DEFERRABLE.*$', ''))
                  FROM pg_constraint k JOIN pg_index i ON i.indexrelid = k.conindid
                 WHERE k.conrelid = c.oid AND k.contype = 'p' AND NOT i.indimmediate),
               (SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_index i
                  JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
                 WHERE i.indrelid = c.oid AND i.indisreplident AND c.relreplident = 'i'),
               coalesce((SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_index i
                  JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
                 WHERE i.indrelid = c.oid AND i.indisprimary), '{}')
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
               AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'lakeshift')
               AND n.nspname NOT LIKE 'pg\\_%'
             ORDER BY 1, 2";

/// Whether publication `$1` publishes table `c` (PostgreSQL 15: tables, whole
/// schemas, or all tables), from the catalogs under the statement's snapshot.
pub const PUBLISHED_15: &str = "EXISTS (SELECT 1 FROM pg_publication p WHERE p.pubname = $1 AND (p.puballtables
                 OR EXISTS (SELECT 1 FROM pg_publication_rel pr WHERE pr.prpubid = p.oid AND pr.prrelid = c.oid)
                 OR EXISTS (SELECT 1 FROM pg_publication_namespace pn WHERE pn.pnpubid = p.oid AND pn.pnnspid = c.relnamespace)))";

/// [`PUBLISHED_15`] before PostgreSQL 15 (no publications of schemas).
pub const PUBLISHED_14: &str = "EXISTS (SELECT 1 FROM pg_publication p WHERE p.pubname = $1 AND (p.puballtables
                 OR EXISTS (SELECT 1 FROM pg_publication_rel pr WHERE pr.prpubid = p.oid AND pr.prrelid = c.oid)))";

async fn captured_tables(
    c: &tokio_postgres::Client,
    src: &super::config::Source,
    publication: &str,
) -> Result<Vec<CapturedTable>, SourceError> {
    // Published: read from the catalogs under the statement's own snapshot, never
    // through pg_publication_tables, whose function reads the latest catalog: a
    // table moved out of a published schema while the statement ran read as still
    // in the schema and not published (a false stop, kept in the state folder:
    // fuzz seed 962410419 under load).
    let schemas = c
        .query_one(
            "SELECT to_regclass('pg_catalog.pg_publication_namespace') IS NOT NULL",
            &[],
        )
        .await
        .map_err(catalog::sql)?
        .get::<_, bool>(0);
    let sql = CAPTURED_TABLES.replace(
        "$PUBLISHED",
        if schemas { PUBLISHED_15 } else { PUBLISHED_14 },
    );
    let rows = c.query(&sql, &[&publication]).await.map_err(catalog::sql)?;
    Ok(rows
        .iter()
        .filter(|r| src.captures(r.get(0), r.get(1)))
        .map(|r| CapturedTable {
            name: format!("{}.{}", ident(r.get(0)), ident(r.get(1))),
            published: r.get(2),
            unlogged: r.get(3),
            partitioned: r.get(4),
            unidentified: r.get(5),
            deferrable_key: r.get(6),
            identity_index: r.get(7),
            primary_key: r.get(8),
        })
        .collect())
}

/// Why captured tables whose REPLICA IDENTITY index leaves out the key the job
/// matches rows by cannot be followed (a delete or key change would name no row),
/// with the fix; None: there are none.
fn identity_problem(src: &Source, tables: &[CapturedTable]) -> Option<String> {
    let bad: Vec<String> = tables
        .iter()
        .filter_map(|t| {
            let cols = t.identity_index.as_ref()?;
            let key = src
                .key_overrides
                .iter()
                .find(|(n, _)| {
                    n.split_once('.')
                        .is_some_and(|(s, x)| format!("{}.{}", ident(s), ident(x)) == t.name)
                })
                .map(|(_, k)| k.clone())
                .unwrap_or_else(|| t.primary_key.clone());
            (!key.is_empty() && !key.iter().all(|k| cols.contains(k))).then(|| {
                format!(
                    "{}: its REPLICA IDENTITY ({}) does not hold the table's key ({}) (ALTER TABLE {} REPLICA IDENTITY DEFAULT, or REPLICA IDENTITY FULL)",
                    t.name,
                    cols.join(", "),
                    key.join(", "),
                    t.name
                )
            })
        })
        .collect();
    (!bad.is_empty()).then(|| {
        format!(
            "captured table(s) whose deletes and key changes could not be matched to a row: {}",
            bad.join("; ")
        )
    })
}

/// Why captured tables with a DEFERRABLE primary key cannot be followed, with the
/// statements that make their keys immediate; None: there are none.
fn deferrable_problem(tables: &[CapturedTable]) -> Option<String> {
    let (names, fixes): (Vec<&str>, Vec<&str>) = tables
        .iter()
        .filter_map(|t| Some((t.name.as_str(), t.deferrable_key.as_deref()?)))
        .unzip();
    (!names.is_empty()).then(|| {
        format!(
            "captured table(s) {} have a DEFERRABLE primary key: {DEFERRABLE_WHY}. Make the key immediate ({}), or leave the table(s) out of source.tables; changes already mirrored under it may have lost rows: take a new snapshot of them",
            names.join(", "),
            fixes.iter().map(|f| format!("{f};")).collect::<Vec<_>>().join(" ")
        )
    })
}

/// What a DEFERRABLE primary key does that the targets cannot follow.
const DEFERRABLE_WHY: &str = "one transaction may hold a key twice before it commits (keys rotated by one UPDATE, a key inserted before its old row is deleted), and the targets, keyed on it, would lose rows";

/// The text a regex matches when it matches one text only (escapes resolved).
fn regex_literal(re: &str) -> Option<String> {
    let mut out = String::new();
    let mut it = re.chars();
    while let Some(c) = it.next() {
        match c {
            '\\' => match it.next()? {
                n if n.is_ascii_alphanumeric() => return None,
                n => out.push(n),
            },
            '.' | '+' | '*' | '?' | '(' | ')' | '|' | '[' | ']' | '{' | '}' | '^' | '$' => {
                return None
            }
            c => out.push(c),
        }
    }
    Some(out)
}

/// The schemas `patterns` name when each is a whole schema (`shop\..*`), else None.
fn whole_schemas(patterns: &[&str]) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for p in patterns {
        let schema = regex_literal(p.strip_suffix("\\..*")?)?;
        if schema.is_empty() {
            return None;
        }
        if !out.contains(&schema) {
            out.push(schema);
        }
    }
    Some(out)
}

async fn slot_must_exist(
    c: &tokio_postgres::Client,
    slot: &str,
    at: &Position,
) -> Result<(), SourceError> {
    let r = c
        .query_opt(
            "SELECT coalesce(wal_status, '') FROM pg_replication_slots WHERE slot_name = $1",
            &[&slot],
        )
        .await
        .map_err(catalog::sql)?;
    match r.map(|r| r.get::<_, String>(0)) {
        None => Err(SourceError::Purged {
            position: at.to_string(),
            detail: format!("replication slot {slot} does not exist any more (dropped); the changes since the job's last commit are gone: start over with a new state folder and an empty target, or drop the target tables"),
        }),
        Some(s) if s == "lost" => Err(SourceError::Purged {
            position: at.to_string(),
            detail: format!("replication slot {slot} was invalidated (wal_status lost: max_slot_wal_keep_size removed WAL it needed); drop it (SELECT pg_drop_replication_slot('{slot}')) and start over with a new state folder"),
        }),
        Some(_) => Ok(()),
    }
}

/// A new schema history at `at`: the types, then the tables, then their
/// constraints and indexes, read in `c`'s transaction.
async fn new_history(
    c: &tokio_postgres::Client,
    dir: &std::path::Path,
    at: &Position,
    defs: &[catalog::TableDef],
) -> Result<SchemaHistory, SourceError> {
    let mut seed = catalog::schemas(c).await?;
    seed.extend(catalog::types(c).await?);
    seed.extend(defs.iter().map(|d| (d.schema.clone(), d.ddl.clone())));
    SchemaHistory::create_in(
        dialects::Dialect::Postgres,
        Some(dir),
        at,
        seed,
        Vec::new(),
        Default::default(),
        catalog::constraints(c).await?,
    )
}

/// A session in a read-only repeatable-read transaction (the snapshot's).
async fn client_snapshot(src: &Source) -> Result<tokio_postgres::Client, SourceError> {
    let c = connect(src).await?;
    c.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .await
        .map_err(catalog::sql)?;
    Ok(c)
}

/// Read every captured table (or what an interrupted snapshot left) in `snap`'s
/// transaction. Returns the history, or None when the receiver went away.
async fn snapshot(
    src: &Arc<Source>,
    snap: &tokio_postgres::Client,
    history: SchemaHistory,
    at: &Position,
    resume: Option<&SnapshotResume>,
    tx: &mpsc::Sender<SourceEvent>,
    dir: &std::path::Path,
) -> Result<Option<SchemaHistory>, SourceError> {
    if let Some(r) = resume {
        // This transaction's snapshot is later than the slot's: note what it saw
        // of the tables it reads whole (a table read on from its cursor is keyed, and
        // changes applied again to keyed rows land the same).
        let row = snap
            .query_one(
                "SELECT pg_current_snapshot()::text, (pg_current_wal_lsn() - '0/0')::bigint",
                &[],
            )
            .await
            .map_err(catalog::sql)?;
        let text: String = row.get(0);
        let end = row.get::<_, i64>(1) as u64;
        let defs = catalog::definitions(snap).await?;
        let whole: Vec<(String, String)> = defs
            .iter()
            .filter(|d| src.captures(&d.schema, &d.name))
            .map(|d| (d.schema.clone(), d.name.clone()))
            .filter(|k| {
                !r.done.contains(k)
                    && !r
                        .cursor
                        .as_ref()
                        .is_some_and(|c| c.db == k.0 && c.table == k.1)
            })
            .collect();
        let seen = SeenBySnapshot::parse(&text, whole, end).ok_or_else(|| {
            SourceError::Protocol(format!("pg_current_snapshot() returned {text:?}"))
        })?;
        seen.store(dir)?;
    }
    let defs = catalog::definitions(snap).await?;
    // The tables to read, in order, with their resume cursors.
    let mut work: Vec<Piece> = Vec::new();
    for d in &defs {
        if !src.captures(&d.schema, &d.name) {
            continue;
        }
        let key = (d.schema.clone(), d.name.clone());
        let mut after = None;
        if let Some(r) = resume {
            if r.done.contains(&key) {
                continue;
            }
            after = r
                .cursor
                .as_ref()
                .filter(|c| c.db == d.schema && c.table == d.name)
                .map(|c| c.after.clone());
        }
        let ir = history.table(&d.schema, &d.name).ok_or_else(|| {
            SourceError::Schema(format!(
                "{}.{} is missing from the schema history",
                d.schema, d.name
            ))
        })?;
        if !src.generated_computed {
            for g in ir.columns.iter().filter(|c| c.generated.is_some()) {
                generated_left_out(&format!("{}.{}", d.schema, d.name), &g.name);
            }
        }
        work.push(Piece {
            t: Arc::new(pg_table(src, &d.schema, ir)?),
            estimate: d.estimate,
            fresh: after.is_none(),
            after,
            upto: None,
            first: true,
        });
    }
    let n = work.len();
    let Some(total) = read_tables(src, snap, work, at, tx).await? else {
        return Ok(None);
    };
    snap.batch_execute("COMMIT").await.map_err(catalog::sql)?;
    if tx
        .send(SourceEvent::SnapshotDone {
            position: at.clone(),
            tables: n,
            rows: total,
        })
        .await
        .is_err()
    {
        return Ok(None);
    }
    Ok(Some(history))
}

/// A table, or a key range of one, read by one session.
struct Piece {
    t: Arc<PgTable>,
    estimate: u64,
    /// Keys after this (exclusive); None: from the table's start.
    after: Option<Vec<KeyValue>>,
    /// The single integer key's last value (inclusive) of this range; None: to the
    /// table's end.
    upto: Option<i128>,
    /// The table's first piece: sent even when empty (an emptied table's `fresh`
    /// chunk replaces the target's copy).
    first: bool,
    /// Read from the table's start: the target's copy is replaced.
    fresh: bool,
}

/// Read `work`'s tables with `snapshot-parallel` sessions in `snap`'s snapshot
/// (exported to the others), tables with one integer key cut into key ranges
/// ([`split`]) read side by side, delivered in order
/// ([`super::ordered::read_in_order`]).
/// Returns the rows read (None: the receiver went away).
async fn read_tables(
    src: &Arc<Source>,
    snap: &tokio_postgres::Client,
    work: Vec<Piece>,
    at: &Position,
    tx: &mpsc::Sender<SourceEvent>,
) -> Result<Option<u64>, SourceError> {
    let chunk = cfg(src).snapshot_chunk_rows;
    let sessions = cfg(src).snapshot_parallel.max(1);
    let work = match sessions {
        1 => work,
        _ => split(snap, work, chunk).await?,
    };
    let sessions = sessions.min(work.len().max(1));
    if sessions == 1 {
        let mut total = 0;
        for piece in &work {
            match read_table(src, snap, piece, tx, at).await? {
                Some(rows) => total += rows,
                None => return Ok(None),
            }
        }
        return Ok(Some(total));
    }
    let name: String = snap
        .query_one("SELECT pg_export_snapshot()", &[])
        .await
        .map_err(catalog::sql)?
        .get(0);
    let mut readers = Vec::with_capacity(sessions);
    for _ in 0..sessions {
        let c = client_snapshot(src).await?;
        c.batch_execute(&format!("SET TRANSACTION SNAPSHOT {}", literal(&name)))
            .await
            .map_err(catalog::sql)?;
        readers.push(c);
    }
    let (src, at) = (src.clone(), at.clone());
    let read = move |c: tokio_postgres::Client, piece: Piece, out: mpsc::Sender<SourceEvent>| {
        let (src, at) = (src.clone(), at.clone());
        async move {
            let read = read_table(&src, &c, &piece, &out, &at).await?;
            Ok(read.map(|_| c))
        }
    };
    let end = |c: tokio_postgres::Client| async move {
        let _ = c.batch_execute("COMMIT").await;
    };
    super::ordered::read_in_order(readers, work, read, end, tx).await
}

/// An integer cursor value (a resumed snapshot's, or a range's start).
fn key_int(v: &KeyValue) -> Option<i128> {
    match v {
        KeyValue::Int(i) => Some(i128::from(*i)),
        KeyValue::UInt(u) => Some(i128::from(*u)),
        KeyValue::Text(s) => s.parse().ok(),
        _ => None,
    }
}

/// Pieces for several sessions: a table with one integer key and more rows than
/// two chunks is cut into key ranges of about a chunk each (by its smallest and
/// largest key and its row estimate; a range holding more rows is read in chunks
/// all the same), read side by side and delivered in key order.
async fn split(
    snap: &tokio_postgres::Client,
    work: Vec<Piece>,
    chunk: u64,
) -> Result<Vec<Piece>, SourceError> {
    let mut out = Vec::with_capacity(work.len());
    for piece in work {
        let t = &piece.t.table;
        let k = match t.key.as_slice() {
            [k] if piece.t.forms[*k] == Form::Int && piece.estimate > 2 * chunk => *k,
            _ => {
                out.push(piece);
                continue;
            }
        };
        let col = ident(&t.columns[k].name);
        let lower = piece
            .after
            .as_ref()
            .and_then(|a| a.first())
            .and_then(key_int);
        let cond = lower
            .map(|l| format!(" WHERE {col} > {l}"))
            .unwrap_or_default();
        let row = snap
            .query_one(
                &format!(
                    "SELECT min({col})::text, max({col})::text FROM {}.{}{cond}",
                    ident(&t.db),
                    ident(&t.name)
                ),
                &[],
            )
            .await
            .map_err(catalog::sql)?;
        let parse = |i: usize| row.get::<_, Option<String>>(i)?.parse::<i128>().ok();
        let (Some(min), Some(max)) = (parse(0), parse(1)) else {
            out.push(piece);
            continue;
        };
        let his = super::snapshot::ranges(min, max, piece.estimate.div_ceil(chunk));
        let mut after = piece.after.clone();
        for (i, upto) in his.into_iter().enumerate() {
            out.push(Piece {
                t: piece.t.clone(),
                estimate: piece.estimate,
                after: after.take(),
                upto,
                first: i == 0,
                fresh: piece.fresh && i == 0,
            });
            after = upto.map(|u| vec![KeyValue::Text(u.to_string())]);
        }
    }
    Ok(out)
}

/// One piece of a table in key chunks through `COPY (SELECT ...) TO STDOUT (FORMAT
/// binary)` ([`binary`]). A key that is not all integers is selected once more as
/// text after the columns: the chunk's cursor is read from it.
async fn read_table(
    src: &Source,
    snap: &tokio_postgres::Client,
    piece: &Piece,
    tx: &mpsc::Sender<SourceEvent>,
    at: &Position,
) -> Result<Option<u64>, SourceError> {
    let t = &*piece.t;
    let table = &t.table;
    let chunk = cfg(src).snapshot_chunk_rows;
    let n = table.columns.len();
    let int_key = table.key.iter().all(|i| t.bins[*i] == Bin::Int);
    let mut cols: Vec<String> = table
        .columns
        .iter()
        .zip(&t.bins)
        .map(|(c, b)| b.select(&ident(&c.name)))
        .collect();
    if !int_key {
        // Named apart: ORDER BY the key names the table's column, not these.
        cols.extend(table.key.iter().enumerate().map(|(k, i)| {
            format!(
                "{}::text AS \"lakeshift.key{k}\"",
                ident(&table.columns[*i].name)
            )
        }));
    }
    let cols = cols.join(", ");
    let from = format!("{}.{}", ident(&table.db), ident(&table.name));
    let key: Vec<String> = table
        .key
        .iter()
        .map(|i| ident(&table.columns[*i].name))
        .collect();
    let mut last: Option<Vec<KeyValue>> = piece.after.clone();
    let mut out = super::snapshot::Chunks {
        tx,
        table,
        estimate: piece.estimate,
        at,
        fresh: piece.fresh,
        done: 0,
    };
    // A key range's end.
    let upto = piece
        .upto
        .map(|u| format!("{} <= {u}", key.first().expect("a range has a key")));
    let bad =
        |e: String| SourceError::Decode(format!("snapshot of {}.{}: {e}", table.db, table.name));
    loop {
        let sql = if key.is_empty() {
            format!("COPY (SELECT {cols} FROM {from}) TO STDOUT (FORMAT binary)")
        } else {
            let order = key.join(", ");
            let after = last.as_ref().map(|k| {
                format!(
                    "({order}) > ({})",
                    k.iter()
                        .map(|v| match v {
                            KeyValue::Null => "NULL".to_owned(),
                            KeyValue::Text(s) => literal(s),
                            KeyValue::Int(i) => i.to_string(),
                            KeyValue::UInt(u) => u.to_string(),
                            KeyValue::Bytes(b) => literal(&String::from_utf8_lossy(b)),
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            });
            let conds: Vec<&str> = after.iter().chain(&upto).map(String::as_str).collect();
            let cond = match conds.is_empty() {
                true => String::new(),
                false => format!(" WHERE {}", conds.join(" AND ")),
            };
            format!(
                "COPY (SELECT {cols} FROM {from}{cond} ORDER BY {order} LIMIT {chunk}) TO STDOUT (FORMAT binary)"
            )
        };
        let stream = snap.copy_out(&sql).await.map_err(catalog::sql)?;
        futures::pin_mut!(stream);
        let mut b = RowsBuilder::new(table.clone());
        let mut in_chunk = 0u64;
        let mut tuples = binary::Tuples::default();
        let mut scratch: Vec<u8> = Vec::new();
        // The last row's key fields as sent (keyed tables): the chunk's cursor,
        // read once the chunk ends.
        let mut last_key: Vec<Option<Vec<u8>>> = vec![None; key.len()];
        // Rows of `b` with a value that has no Arrow form, dead-lettered.
        let mut dropped: Vec<u32> = Vec::new();
        // Their dead-letter records (what, record), written after each message.
        let mut bad_rows: Vec<(String, serde_json::Value)> = Vec::new();
        // Rows whose batch is full, sent after the message (keyless tables).
        let mut full = false;
        while let Some(part) = stream.next().await {
            let part = part.map_err(catalog::sql)?;
            tuples
                .each(&part, |fields| {
                    if fields.len() != n + if int_key { 0 } else { key.len() } {
                        return Err(format!("{} values in a row of {n} columns", fields.len()));
                    }
                    let mut reason = None;
                    for (i, f) in fields[..n].iter().enumerate() {
                        let col = &mut b.cols[i];
                        match f {
                            None => col.append_null(),
                            Some(v) => {
                                if let Err(e) =
                                    binary::append(col, t.bins[i], t.forms[i], v, &mut scratch)
                                {
                                    reason.get_or_insert_with(|| {
                                        format!("column {}: {e}", table.columns[i].name)
                                    });
                                    col.append_null();
                                }
                            }
                        }
                    }
                    b.rows += 1;
                    in_chunk += 1;
                    for (k, i) in table.key.iter().enumerate() {
                        let f = fields[if int_key { *i } else { n + k }];
                        match (f, &mut last_key[k]) {
                            (None, slot) => *slot = None,
                            (Some(v), Some(buf)) => {
                                buf.clear();
                                buf.extend_from_slice(v);
                            }
                            (Some(v), slot) => *slot = Some(v.to_vec()),
                        }
                    }
                    if key.is_empty() && b.rows as u64 >= chunk {
                        full = true;
                    }
                    if let Some(reason) = reason {
                        let row: serde_json::Map<String, serde_json::Value> = table
                            .columns
                            .iter()
                            .zip(fields)
                            .zip(&t.bins)
                            .map(|((c, v), bin)| {
                                (
                                    c.name.clone(),
                                    v.map_or(serde_json::Value::Null, |v| {
                                        serde_json::Value::String(binary::text(*bin, v))
                                    }),
                                )
                            })
                            .collect();
                        let what =
                            format!("snapshot of {}.{} at {at}: {reason}", table.db, table.name);
                        let record = row_record(table, "snapshot", at, &reason, row.into());
                        bad_rows.push((what, record));
                        dropped.push((b.rows - 1) as u32);
                    }
                    Ok(())
                })
                .map_err(bad)?;
            for (what, record) in bad_rows.drain(..) {
                dead_letter(src, &what, record)?;
            }
            if full {
                full = false;
                if !out.send_without(&mut b, None, &mut dropped).await {
                    return Ok(None);
                }
            }
        }
        let last_row: Option<Vec<KeyValue>> = (!key.is_empty() && in_chunk > 0).then(|| {
            last_key
                .iter()
                .map(|f| match f {
                    None => KeyValue::Null,
                    Some(v) if int_key => binary::int(v).map_or(KeyValue::Null, KeyValue::Int),
                    Some(v) => KeyValue::Text(String::from_utf8_lossy(v).into_owned()),
                })
                .collect()
        });
        if (b.rows > 0 || (out.done == 0 && piece.first))
            && !out
                .send_without(&mut b, last_row.clone(), &mut dropped)
                .await
        {
            return Ok(None);
        }
        if key.is_empty() || in_chunk < chunk {
            return Ok(Some(out.done));
        }
        last = last_row;
    }
}

/// A snapshot resumed in a new transaction reads the tables it had not begun at a
/// later point than the slot's: the stream, from the slot's point, must not apply to
/// those tables again what that later snapshot already saw. Transactions visible to
/// it (by its xmin, xmax and in-progress list) are skipped for them until the stream
/// passes `end` (the WAL position when it was taken). Stored in the state folder so a
/// restart inside that stretch skips the same.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SeenBySnapshot {
    pub tables: Vec<(String, String)>,
    pub xmin: u32,
    pub xmax: u32,
    pub xip: Vec<u32>,
    pub end: u64,
}

const SEEN_FILE: &str = "pg-snapshot-seen.json";

impl SeenBySnapshot {
    /// From `pg_current_snapshot()`'s text `xmin:xmax:xip,...` (64-bit ids; the
    /// stream's are their low 32 bits).
    fn parse(text: &str, tables: Vec<(String, String)>, end: u64) -> Option<Self> {
        let mut it = text.split(':');
        let low = |s: &str| s.parse::<u64>().ok().map(|v| v as u32);
        let xmin = low(it.next()?)?;
        let xmax = low(it.next()?)?;
        let xip = it
            .next()
            .unwrap_or("")
            .split(',')
            .filter(|x| !x.is_empty())
            .map(low)
            .collect::<Option<Vec<u32>>>()?;
        Some(SeenBySnapshot {
            tables,
            xmin,
            xmax,
            xip,
            end,
        })
    }

    /// Whether transaction `xid` committed before the snapshot (it saw its changes).
    fn saw(&self, xid: u32) -> bool {
        let precedes = |a: u32, b: u32| (a.wrapping_sub(b) as i32) < 0;
        precedes(xid, self.xmin) || (precedes(xid, self.xmax) && !self.xip.contains(&xid))
    }

    fn load(dir: &std::path::Path) -> Option<Self> {
        serde_json::from_slice(&std::fs::read(dir.join(SEEN_FILE)).ok()?).ok()
    }

    fn store(&self, dir: &std::path::Path) -> Result<(), SourceError> {
        std::fs::create_dir_all(dir)
            .and_then(|_| {
                crate::durable::replace(
                    &dir.join(SEEN_FILE),
                    &serde_json::to_vec(self).expect("serialises"),
                )
            })
            .map_err(|e| SourceError::Schema(format!("{}: {e}", dir.display())))
    }
}

/// How a relation's columns map onto the history's table.
struct Rel {
    rel: pgoutput::Relation,
    /// The captured table's decoder (None: not captured).
    table: Option<Arc<PgTable>>,
    /// For each table column, its index in the relation's tuples.
    map: Vec<Option<usize>>,
}

struct Txn {
    commit: u64,
    ordinal: u64,
    at: u32,
}

/// The stream's state: schema history, relations, batches being built.
/// What the rows older than an added column hold in it (see
/// [`Stream::older_rows_values`]).
enum Older {
    /// The default it was added with (PostgreSQL's `attmissingval`).
    Value(String),
    /// Values the catalog no longer tells (a volatile default, a rewrite since).
    Unknown,
}

struct Stream {
    src: Arc<Source>,
    tx: mpsc::Sender<SourceEvent>,
    history: SchemaHistory,
    /// Decoders of captured tables, rebuilt after DDL.
    tables: HashMap<(String, String), Arc<PgTable>>,
    rels: HashMap<u32, Rel>,
    /// Batches being filled, one per table and kind of change.
    open: Vec<Open>,
    txns: Vec<Position>,
    txn: Option<Txn>,
    /// Resuming inside the transaction with this commit LSN: changes to skip.
    skip_at: Option<u64>,
    skip: u64,
    /// The last boundary delivered.
    last: u64,
    bytes: usize,
    last_flush: Instant,
    /// Source time of a commit whose boundary waits for the next flush (commits
    /// are batched like the binlog reader's).
    pending_commit: Option<u32>,
    /// What a resumed snapshot saw (see [`SeenBySnapshot`]), until the stream
    /// passes its end.
    seen: Option<SeenBySnapshot>,
    /// The transaction in progress is one the resumed snapshot saw.
    txn_seen: bool,
    /// Per query text of the latest DDL messages (oldest first), how many of its
    /// statements were taken (a multi-statement query fires the trigger once per
    /// command, each time with the whole text, also when its statements run in
    /// several transactions). A text run again starts over (see `Stream::ddl`).
    taken: Vec<(String, usize)>,
    /// Inside a stream block: the streamed transaction's id.
    streaming: Option<u32>,
    /// Streamed transactions' changes, spilled until they commit.
    streamed: Streamed,
    /// Relation messages of captured tables the history does not know, resolved at
    /// their first row: under publish_via_partition_root pgoutput describes a
    /// partition too, whose rows arrive as its partitioned table's.
    unresolved: HashMap<u32, pgoutput::Relation>,
    /// Tables the job does not capture whose rows this run knows.
    outside: crate::source::Outside,
    /// The source's state folder (the publication markers).
    dir: PathBuf,
    /// A connection for catalog reads while streaming (opened when first needed).
    catalog: Option<tokio_postgres::Client>,
}

/// The changes of transactions streamed while they run (pgoutput's streaming
/// mode), each in a spill file of the state folder until its commit: messages
/// length-prefixed, and where each subtransaction's first one starts (a rollback to
/// a savepoint cuts the file back there, as PostgreSQL's own apply worker does).
/// The files are of this process only: after a restart the server sends an
/// unfinished transaction again from its start.
struct Streamed {
    dir: PathBuf,
    txns: HashMap<u32, Spill>,
}

struct Spill {
    path: PathBuf,
    w: std::io::BufWriter<std::fs::File>,
    len: u64,
    subs: Vec<(u32, u64)>,
}

/// A committed streamed transaction's messages, read back in order.
struct Replay {
    path: PathBuf,
    r: std::io::BufReader<std::fs::File>,
}

impl Replay {
    /// The next message into `buf`; false at the end.
    fn next(&mut self, buf: &mut Vec<u8>) -> Result<bool, SourceError> {
        use std::io::Read;
        let mut n = [0u8; 4];
        match self.r.read_exact(&mut n) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(false),
            Err(e) => return Err(spill_err(&self.path, e)),
        }
        buf.resize(u32::from_le_bytes(n) as usize, 0);
        self.r
            .read_exact(buf)
            .map_err(|e| spill_err(&self.path, e))?;
        Ok(true)
    }

    fn done(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn spill_err(path: &std::path::Path, e: std::io::Error) -> SourceError {
    SourceError::Decode(format!("streamed transaction file {}: {e}", path.display()))
}

impl Streamed {
    fn new(dir: PathBuf) -> Self {
        Streamed {
            dir,
            txns: HashMap::new(),
        }
    }

    fn append(&mut self, top: u32, sub: u32, msg: &[u8]) -> Result<(), SourceError> {
        use std::io::Write;
        if !self.txns.contains_key(&top) {
            std::fs::create_dir_all(&self.dir).map_err(|e| spill_err(&self.dir, e))?;
            let path = self.dir.join(format!("{top}.bin"));
            let f = std::fs::OpenOptions::new()
                .create(true)
                .truncate(true)
                .read(true)
                .write(true)
                .open(&path)
                .map_err(|e| spill_err(&path, e))?;
            self.txns.insert(
                top,
                Spill {
                    path,
                    w: std::io::BufWriter::with_capacity(1 << 20, f),
                    len: 0,
                    subs: Vec::new(),
                },
            );
        }
        let s = self.txns.get_mut(&top).expect("made above");
        if !s.subs.iter().any(|(x, _)| *x == sub) {
            s.subs.push((sub, s.len));
        }
        s.w.write_all(&(msg.len() as u32).to_le_bytes())
            .and_then(|_| s.w.write_all(msg))
            .map_err(|e| spill_err(&s.path, e))?;
        s.len += 4 + msg.len() as u64;
        Ok(())
    }

    /// The transaction `top` (sub = top) or its subtransaction `sub` rolled back.
    fn abort(&mut self, top: u32, sub: u32) -> Result<(), SourceError> {
        use std::io::{Seek, Write};
        if sub == top {
            if let Some(s) = self.txns.remove(&top) {
                let _ = std::fs::remove_file(&s.path);
            }
            return Ok(());
        }
        let Some(s) = self.txns.get_mut(&top) else {
            return Ok(());
        };
        let Some(i) = s.subs.iter().position(|(x, _)| *x == sub) else {
            return Ok(());
        };
        let cut = s.subs[i].1;
        s.subs.truncate(i);
        s.w.flush().map_err(|e| spill_err(&s.path, e))?;
        let f = s.w.get_mut();
        f.set_len(cut)
            .and_then(|_| f.seek(std::io::SeekFrom::Start(cut)).map(|_| ()))
            .map_err(|e| spill_err(&s.path, e))?;
        s.len = cut;
        Ok(())
    }

    /// The committed transaction's messages (None: it sent none).
    fn take(&mut self, top: u32) -> Result<Option<Replay>, SourceError> {
        use std::io::{Seek, Write};
        let Some(s) = self.txns.remove(&top) else {
            return Ok(None);
        };
        let mut f =
            s.w.into_inner()
                .map_err(|e| spill_err(&s.path, e.into_error()))?;
        f.flush()
            .and_then(|_| f.seek(std::io::SeekFrom::Start(0)).map(|_| ()))
            .map_err(|e| spill_err(&s.path, e))?;
        Ok(Some(Replay {
            path: s.path,
            r: std::io::BufReader::with_capacity(1 << 20, f),
        }))
    }
}

/// PostgreSQL's epoch (2000-01-01) in Unix seconds.
const PG_EPOCH: i64 = 946_684_800;

impl Stream {
    async fn send(&self, e: SourceEvent) -> bool {
        self.tx.send(e).await.is_ok()
    }

    /// Handle one frame of the stream; false when the job is done with it (receiver
    /// gone, or the end reached with `--until-end`).
    async fn event(&mut self, f: Frame, end: Option<u64>) -> Result<bool, SourceError> {
        match f {
            Frame::XLog { data, .. } => self.xlog(&data, end).await,
            Frame::KeepAlive { end: wal_end, .. } => {
                if self.txn.is_some() {
                    return Ok(true);
                }
                let w = wal_end.max(self.last);
                if !self.flush().await? {
                    return Ok(false);
                }
                if w > self.last {
                    self.last = w;
                    if !self
                        .send(SourceEvent::Heartbeat {
                            position: lsn_position(w, 0),
                        })
                        .await
                    {
                        return Ok(false);
                    }
                }
                Ok(end.is_none_or(|e| self.last < e))
            }
        }
    }

    /// One pgoutput message. Inside a stream block (a large transaction sent while
    /// it runs) the message goes to that transaction's spill file; the transaction
    /// is replayed at its Stream Commit, dropped (or cut back to a savepoint) at its
    /// Stream Abort.
    async fn xlog(&mut self, data: &[u8], end: Option<u64>) -> Result<bool, SourceError> {
        let err = |s: &Self, e: crate::source::DecodeError| {
            SourceError::Decode(format!("at {}: {e}", s.here()))
        };
        if let Some(top) = self.streaming {
            if data.first().is_some_and(|t| pgoutput::carries_xid(*t)) {
                let (sub, msg) = pgoutput::split_xid(data).map_err(|e| err(self, e))?;
                self.streamed.append(top, sub, &msg)?;
                return Ok(true);
            }
        }
        let msg = pgoutput::parse(data).map_err(|e| err(self, e))?;
        match msg {
            pgoutput::Msg::Begin {
                final_lsn,
                time,
                xid,
            } => {
                self.begin(final_lsn, time, xid);
                Ok(true)
            }
            pgoutput::Msg::Commit { end_lsn, time } => self.commit(end_lsn, time, end).await,
            pgoutput::Msg::StreamStart { xid } => {
                self.streaming = Some(xid);
                Ok(true)
            }
            pgoutput::Msg::StreamStop => {
                self.streaming = None;
                Ok(true)
            }
            pgoutput::Msg::StreamAbort { xid, subxid } => {
                self.streamed.abort(xid, subxid)?;
                Ok(true)
            }
            pgoutput::Msg::StreamCommit {
                xid,
                commit_lsn,
                end_lsn,
                time,
            } => {
                self.begin(commit_lsn, time, xid);
                let mut r = self.streamed.take(xid)?;
                let mut buf = Vec::new();
                while let Some(m) = r.as_mut().map(|r| r.next(&mut buf)).transpose()? {
                    if !m {
                        break;
                    }
                    let msg = pgoutput::parse(&buf).map_err(|e| err(self, e))?;
                    if !self.in_transaction(msg).await? {
                        return Ok(false);
                    }
                }
                if let Some(r) = r {
                    r.done();
                }
                self.commit(end_lsn, time, end).await
            }
            other => self.in_transaction(other).await,
        }
    }

    /// A message inside a transaction: a row change, relation, truncate or logical
    /// message.
    async fn in_transaction(&mut self, msg: pgoutput::Msg<'_>) -> Result<bool, SourceError> {
        match msg {
            pgoutput::Msg::Message {
                prefix, content, ..
            } if prefix == catalog::MESSAGE_PREFIX => {
                let text = String::from_utf8_lossy(content).into_owned();
                self.ddl(&text).await
            }
            pgoutput::Msg::Message { .. } => Ok(true),
            pgoutput::Msg::Begin { .. }
            | pgoutput::Msg::Commit { .. }
            | pgoutput::Msg::StreamStart { .. }
            | pgoutput::Msg::StreamStop
            | pgoutput::Msg::StreamCommit { .. }
            | pgoutput::Msg::StreamAbort { .. } => Err(SourceError::Protocol(format!(
                "at {}: a transaction boundary inside a streamed transaction",
                self.here()
            ))),
            other => self.message(other).await,
        }
    }

    /// A transaction begins (its commit record at `commit`).
    fn begin(&mut self, commit: u64, time: i64, xid: u32) {
        if self.seen.as_ref().is_some_and(|f| commit > f.end) {
            self.seen = None;
        }
        self.txn_seen = self.seen.as_ref().is_some_and(|f| f.saw(xid));
        self.txn = Some(Txn {
            commit,
            ordinal: 0,
            at: (PG_EPOCH + time / 1_000_000).max(0) as u32,
        });
        if self.skip_at.is_some_and(|s| s != commit) {
            self.skip = 0;
        }
        self.skip_at = None;
        // A query's statements may span transactions (`BEGIN; ...; COMMIT; ...` sent
        // as one query): what was taken of the latest texts is kept.
        let old = self.taken.len().saturating_sub(TAKEN_TEXTS);
        self.taken.drain(..old);
        self.txns.push(lsn_position(commit, 0));
    }

    /// The transaction ends; its commit record ends at `end_lsn`.
    async fn commit(
        &mut self,
        end_lsn: u64,
        time: i64,
        end: Option<u64>,
    ) -> Result<bool, SourceError> {
        let at = (PG_EPOCH + time / 1_000_000).max(0) as u32;
        self.txn = None;
        self.skip = 0;
        self.last = end_lsn;
        let done = end.is_some_and(|e| self.last >= e);
        self.pending_commit = Some(at);
        if (done
            || self.bytes >= cfg(&self.src).batch_bytes / 4
            || self.last_flush.elapsed() >= Duration::from_millis(100))
            && !self.flush().await?
        {
            return Ok(false);
        }
        Ok(!done)
    }

    /// A change of a table a resumed snapshot read whole, by a transaction it saw.
    fn already_seen(&self, db: &str, table: &str) -> bool {
        self.txn_seen
            && self
                .seen
                .as_ref()
                .is_some_and(|f| f.tables.iter().any(|(d, t)| d == db && t == table))
    }

    /// An ALTER or DROP PUBLICATION read from the stream, with what every
    /// publication published once it ran (`pubs`; null for other commands and
    /// captures older than this): the job stops if its publication no longer covers
    /// every captured table, action and row, as the checks on start and every few
    /// seconds do, but at its place in the stream, so a publication narrowed and
    /// mended between two looks, or while the job was stopped, is seen too.
    fn publication_altered(
        &self,
        pubs: &serde_json::Value,
        query: &str,
    ) -> Result<(), SourceError> {
        let Some(pubs) = pubs.as_array() else {
            return Ok(());
        };
        let name = &cfg(&self.src).publication;
        let captured = || {
            self.history.tables().filter_map(|t| {
                let s = t.name.schema.as_deref().unwrap_or_default();
                self.src
                    .captures(s, &t.name.name)
                    .then(|| (s.to_owned(), t.name.name.clone()))
            })
        };
        let listed = |p: &serde_json::Value, field: &str| -> Vec<(String, String)> {
            p[field]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| Some((t[0].as_str()?.to_owned(), t[1].as_str()?.to_owned())))
                .collect()
        };
        let shown = |ts: Vec<(String, String)>| {
            ts.iter()
                .map(|(s, t)| format!("{}.{}", ident(s), ident(t)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let why = match pubs.iter().find(|p| p["name"].as_str() == Some(name)) {
            None => Some(format!("publication {name} was dropped")),
            Some(p) => {
                let missing: Vec<&str> = ["insert", "update", "delete", "truncate"]
                    .into_iter()
                    .enumerate()
                    .filter(|(i, _)| p["actions"][*i].as_bool() == Some(false))
                    .map(|(_, a)| a)
                    .collect();
                let tables = listed(p, "tables");
                let partial = listed(p, "partial");
                let out: Vec<_> = match p["all"].as_bool() {
                    Some(true) => Vec::new(),
                    _ => captured().filter(|t| !tables.contains(t)).collect(),
                };
                let part: Vec<_> = captured().filter(|t| partial.contains(t)).collect();
                if !missing.is_empty() {
                    Some(format!(
                        "publication {name} does not publish {}",
                        missing.join(", ")
                    ))
                } else if !out.is_empty() {
                    Some(format!(
                        "captured table(s) {} are not in publication {name}",
                        shown(out)
                    ))
                } else if !part.is_empty() {
                    Some(format!(
                        "publication {name} publishes only part of captured table(s) {} (a row filter or a column list)",
                        shown(part)
                    ))
                } else {
                    None
                }
            }
        };
        let Some(why) = why else {
            return Ok(());
        };
        let at = self.txn.as_ref().map_or(self.last, |t| t.commit);
        let why = format!(
            "{why} from {} on (`{}`, altered by hand?)",
            lsn_position(at, 0),
            query.trim()
        );
        if publication_seen(&self.dir, at) {
            tracing::warn!(
                "{why}: reported before, and let go on by hand (the file that stopped the job was deleted)"
            );
            return Ok(());
        }
        Err(narrowed_here(&self.dir, &why, at))
    }

    fn here(&self) -> Position {
        match &self.txn {
            Some(t) => lsn_position(t.commit, t.ordinal),
            None => lsn_position(self.last, 0),
        }
    }

    /// Count one change of the transaction; true when it was delivered before a
    /// restart (to be skipped).
    fn next_change(&mut self) -> Result<bool, SourceError> {
        let t = self
            .txn
            .as_mut()
            .ok_or_else(|| SourceError::Protocol("a change outside a transaction".into()))?;
        t.ordinal += 1;
        if self.skip > 0 {
            self.skip -= 1;
            return Ok(true);
        }
        Ok(false)
    }

    async fn message(&mut self, m: pgoutput::Msg<'_>) -> Result<bool, SourceError> {
        match m {
            pgoutput::Msg::Relation(r) => {
                // While the changes of a resumed transaction that were delivered
                // before the restart are skipped, a relation may be described as it
                // was before a DDL of that transaction the history already holds:
                // it is resolved at its first row not skipped (pgoutput describes a
                // relation again after a DDL changes it), never taken for a DDL made
                // without the capture (a hostile tester's SIGTERM inside a
                // transaction of several DDL: an invented DROP COLUMN, then every run
                // stopped).
                if self.src.captures(&r.namespace, &r.name)
                    && (self.skip > 0 || self.history.table(&r.namespace, &r.name).is_none())
                {
                    self.rels.remove(&r.oid);
                    self.unresolved.insert(r.oid, r);
                    return Ok(true);
                }
                self.unresolved.remove(&r.oid);
                if !self.resolve_relation(&r).await? {
                    return Ok(false);
                }
                self.relation(r)?;
                Ok(true)
            }
            pgoutput::Msg::Change(c) => self.change(c).await,
            pgoutput::Msg::Truncate { rels } => {
                for oid in rels {
                    if self.next_change()? {
                        continue;
                    }
                    if let Some(r) = self.unresolved.remove(&oid) {
                        if !self.resolve_relation(&r).await? {
                            return Ok(false);
                        }
                        self.relation(r)?;
                    }
                    let Some((db, table)) = self.rels.get(&oid).and_then(|r| {
                        r.table
                            .as_ref()
                            .map(|t| (t.table.db.clone(), t.table.name.clone()))
                    }) else {
                        continue;
                    };
                    if self.already_seen(&db, &table) {
                        continue;
                    }
                    if !self.flush().await? {
                        return Ok(false);
                    }
                    // TRUNCATE reaches the sinks as the IR's truncate, as a
                    // MySQL TRUNCATE TABLE does.
                    let name = ddl_core::TableName::new(Some(&db), &table);
                    let after: Vec<ddl_core::Table> = self
                        .history
                        .table(&db, &table)
                        .cloned()
                        .into_iter()
                        .collect();
                    let ddl = format!("TRUNCATE {}.{}", ident(&db), ident(&table));
                    if !self
                        .send(SourceEvent::Schema {
                            position: self.here(),
                            db: db.clone(),
                            ddl,
                            changes: vec![ddl_core::SchemaChange::TruncateTable { name }],
                            tables: vec![format!("{db}.{table}")],
                            notes: Vec::new(),
                            after,
                        })
                        .await
                    {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            // (Boundaries and logical messages are handled by `xlog` and
            // `in_transaction`.)
            _ => Ok(true),
        }
    }

    /// The decoder of a captured table (built from the history on first use).
    fn table(&mut self, db: &str, name: &str) -> Result<Option<Arc<PgTable>>, SourceError> {
        let k = (db.to_owned(), name.to_owned());
        if let Some(t) = self.tables.get(&k) {
            return Ok(Some(t.clone()));
        }
        let Some(ir) = self.history.table(db, name) else {
            return Ok(None);
        };
        let t = Arc::new(pg_table(&self.src, db, ir)?);
        self.tables.insert(k, t.clone());
        Ok(Some(t))
    }

    fn relation(&mut self, r: pgoutput::Relation) -> Result<(), SourceError> {
        let captured = self.src.captures(&r.namespace, &r.name);
        let mut rel = Rel {
            table: None,
            map: Vec::new(),
            rel: r,
        };
        if captured {
            let (db, name) = (rel.rel.namespace.clone(), rel.rel.name.clone());
            let t = self.table(&db, &name)?.ok_or_else(|| {
                SourceError::Schema(format!(
                    "at {}: rows of {db}.{name}, a table the schema history does not know: it was created without the DDL capture (run `lakeshift pg-setup`), then re-snapshot",
                    self.here()
                ))
            })?;
            self.check_relation(&rel.rel, &t)?;
            rel.map = t
                .table
                .columns
                .iter()
                .map(|c| rel.rel.columns.iter().position(|rc| rc.name == c.name))
                .collect();
            rel.table = Some(t);
        }
        self.rels.insert(rel.rel.oid, rel);
        Ok(())
    }

    /// A captured relation the schema history does not know, or whose columns
    /// differ from it: a DDL reached it without the capture (not installed then, or
    /// run inside a function). The history follows the relation as pgoutput
    /// describes it now: a CREATE TABLE, or columns dropped and added by name (a
    /// renamed column reads as dropped and added; a changed type is not seen),
    /// applied as one DDL at this point, with a warning. False: the receiver is gone.
    async fn resolve_relation(&mut self, r: &pgoutput::Relation) -> Result<bool, SourceError> {
        let (db, name) = (r.namespace.as_str(), r.name.as_str());
        if !self.src.captures(db, name) {
            return Ok(true);
        }
        let q = format!("{}.{}", ident(db), ident(name));
        let stmts: Vec<String> = match self.history.table(db, name) {
            None => {
                let mut cols: Vec<String> = r
                    .columns
                    .iter()
                    .map(|c| format!("{} {}", ident(&c.name), type_text(c.type_oid, c.typmod)))
                    .collect();
                let key: Vec<String> = r
                    .columns
                    .iter()
                    .filter(|c| c.key && r.replica_identity == b'd')
                    .map(|c| ident(&c.name))
                    .collect();
                if !key.is_empty() {
                    cols.push(format!("PRIMARY KEY ({})", key.join(", ")));
                }
                vec![format!("CREATE TABLE {q} ({})", cols.join(", "))]
            }
            Some(t) => {
                // (Generated columns are never in the relation.)
                let ours: Vec<&str> = t
                    .columns
                    .iter()
                    .filter(|c| c.generated.is_none())
                    .map(|c| c.name.as_str())
                    .collect();
                let theirs: Vec<&str> = r.columns.iter().map(|c| c.name.as_str()).collect();
                if same_names(&ours, &theirs) {
                    // Same columns (values are matched by name, in any order): a type
                    // changed where the stream's built-in type decodes otherwise than
                    // the history's.
                    let pt = pg_table(&self.src, db, t)?;
                    let changed: Vec<String> = r
                        .columns
                        .iter()
                        .filter(|c| {
                            let Some(j) = ours.iter().position(|o| *o == c.name) else {
                                return false;
                            };
                            decoder_of_oid(c.type_oid, c.typmod).is_some_and(|(kind, form)| {
                                kind != pt.table.columns[j].kind || form != pt.forms[j]
                            })
                        })
                        .map(|c| {
                            format!(
                                "ALTER TABLE {q} ALTER COLUMN {} TYPE {}",
                                ident(&c.name),
                                type_text(c.type_oid, c.typmod)
                            )
                        })
                        .collect();
                    if changed.is_empty() {
                        return Ok(true);
                    }
                    changed
                } else {
                    let mut v: Vec<String> = ours
                        .iter()
                        .filter(|c| !theirs.contains(c))
                        .map(|c| format!("ALTER TABLE {q} DROP COLUMN {}", ident(c)))
                        .collect();
                    let added: Vec<&pgoutput::RelColumn> = r
                        .columns
                        .iter()
                        .filter(|c| !ours.contains(&c.name.as_str()))
                        .collect();
                    let older = self.older_rows_values(r.oid).await?;
                    for c in added {
                        let default = match older.get(&c.name) {
                            Some(Older::Value(v)) => format!(" DEFAULT {}", literal(v)),
                            Some(Older::Unknown) => {
                                tracing::warn!(
                                    "at {}: {db}.{name}.{}: added with a default that is not a constant, or the table was rewritten since: the rows older than the column hold values the stream does not carry; the targets hold NULL there until those rows change (re-snapshot the table to fill them)",
                                    self.here(),
                                    c.name
                                );
                                String::new()
                            }
                            None => String::new(),
                        };
                        v.push(format!(
                            "ALTER TABLE {q} ADD COLUMN {} {}{default}",
                            ident(&c.name),
                            type_text(c.type_oid, c.typmod)
                        ));
                    }
                    v
                }
            }
        };
        if stmts.is_empty() {
            return Ok(true);
        }
        let text = stmts.join(";\n");
        let pos = self.here();
        tracing::warn!(
            "at {pos}: {db}.{name} reached the stream with columns the schema history does not have: a DDL without the DDL capture (install it: `lakeshift pg-setup --apply`); resolved from the stream's relation as:\n{text}"
        );
        if !self.flush().await? {
            return Ok(false);
        }
        let out = self
            .history
            .apply(&pos, Some(db), false, &text)
            .map_err(|e| SourceError::Ddl {
                position: pos.to_string(),
                ddl: text.clone(),
                reason: e.message,
            })?;
        self.tables.clear();
        let mut notes = out.notes;
        notes.push(
            "resolved from the stream's relation message: a DDL without the DDL capture".into(),
        );
        match crate::source::schema_event(
            &self.src,
            &self.history,
            db,
            pos,
            &text,
            out.changes,
            notes,
        ) {
            Some(ev) => Ok(self.send(ev).await),
            None => Ok(true),
        }
    }

    /// The value the rows older than a column added with a constant default hold
    /// (PostgreSQL keeps it in `pg_attribute.attmissingval` until the table is
    /// rewritten), per column of table `oid` that has one. The stream carries no
    /// value for those rows, so a column added without the DDL capture (in a `DO`
    /// block, by a function) gets it as its default on the targets, which fill the
    /// older rows with it.
    async fn older_rows_values(&mut self, oid: u32) -> Result<HashMap<String, Older>, SourceError> {
        if self.catalog.is_none() {
            self.catalog = Some(connect(&self.src).await?);
        }
        let c = self.catalog.as_ref().expect("connected");
        let rows = c
            .query(
                "SELECT attname::text, atthasmissing, (attmissingval::text::text[])[1]
                   FROM pg_attribute
                  WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped
                    AND (atthasmissing OR atthasdef)",
                &[&oid],
            )
            .await
            .map_err(|e| {
                SourceError::Connect(format!("reading pg_attribute: {}", catalog::describe(&e)))
            })?;
        Ok(rows
            .iter()
            .map(|r| {
                let older = match r.get::<_, bool>(1) {
                    true => r
                        .get::<_, Option<String>>(2)
                        .map_or(Older::Unknown, Older::Value),
                    false => Older::Unknown,
                };
                (r.get::<_, String>(0), older)
            })
            .collect())
    }

    /// A relation whose columns differ from the history's table: a DDL reached the
    /// table without the capture; decoding on would put values in wrong columns.
    fn check_relation(&self, r: &pgoutput::Relation, t: &PgTable) -> Result<(), SourceError> {
        let ours: Vec<&str> = t.table.columns.iter().map(|c| c.name.as_str()).collect();
        let theirs: Vec<&str> = r.columns.iter().map(|c| c.name.as_str()).collect();
        if !same_names(&ours, &theirs) {
            return Err(SourceError::Schema(format!(
                "at {}: {}.{} has columns ({}) in the stream but ({}) in the schema history: a DDL changed it without the DDL capture (run `lakeshift pg-setup --apply`), then re-snapshot the table",
                self.here(),
                r.namespace,
                r.name,
                theirs.join(", "),
                ours.join(", ")
            )));
        }
        Ok(())
    }

    async fn change(&mut self, c: pgoutput::Change<'_>) -> Result<bool, SourceError> {
        let oid = match &c {
            pgoutput::Change::Insert { rel, .. }
            | pgoutput::Change::Update { rel, .. }
            | pgoutput::Change::Delete { rel, .. } => *rel,
        };
        if self.skip > 0 && self.unresolved.contains_key(&oid) {
            // (Delivered before the restart: skipped, its relation not resolved.)
            self.next_change()?;
            return Ok(true);
        }
        if let Some(r) = self.unresolved.remove(&oid) {
            if !self.resolve_relation(&r).await? {
                return Ok(false);
            }
            self.relation(r)?;
        }
        let skipped = self.next_change()?;
        let Some(rel) = self.rels.get(&oid) else {
            return Err(SourceError::Protocol(format!(
                "at {}: a row of relation {oid} before its Relation message",
                self.here()
            )));
        };
        let Some(t) = rel.table.clone() else {
            // (A table the job does not capture: its rows are not known.)
            self.outside.written(&rel.rel.namespace, &rel.rel.name);
            return Ok(true);
        };
        if skipped || self.already_seen(&t.table.db, &t.table.name) {
            return Ok(true);
        }
        let op = match &c {
            pgoutput::Change::Insert { .. } => Op::Insert,
            pgoutput::Change::Update { .. } => Op::Update,
            pgoutput::Change::Delete { .. } => Op::Delete,
        };
        let idx = match self.open.iter().position(|o| Arc::ptr_eq(&o.table, &t)) {
            Some(i) if self.open[i].op == op => i,
            Some(_) => {
                if !self.flush().await? {
                    return Ok(false);
                }
                self.open_builder(&t, op)
            }
            None => self.open_builder(&t, op),
        };
        let rel = &self.rels[&oid];
        // (The position is made only for an error: this runs for every row.)
        let (commit, ordinal) = self
            .txn
            .as_ref()
            .map_or((self.last, 0), |t| (t.commit, t.ordinal));
        let err = |e: String| {
            SourceError::Decode(format!(
                "at {}: {}.{}: {e}",
                lsn_position(commit, ordinal),
                t.table.db,
                t.table.name
            ))
        };
        let identity_hint = || {
            format!(
                "the table has no key and its REPLICA IDENTITY is not FULL, so updates and deletes do not carry the old row: ALTER TABLE {} REPLICA IDENTITY FULL",
                rel.rel.name
            )
        };
        let keyless = t.table.key.is_empty();
        // An old key image ('K') must hold the table's key: a REPLICA IDENTITY USING
        // INDEX over other columns would delete or re-key rows by NULLs.
        let k_image = match &c {
            pgoutput::Change::Delete { old, .. } => old.0 == b'K',
            pgoutput::Change::Update { old, .. } => matches!(old, Some((b'K', _))),
            pgoutput::Change::Insert { .. } => false,
        };
        if k_image
            && !keyless
            && !t
                .table
                .key
                .iter()
                .all(|&j| rel.map[j].is_some_and(|i| rel.rel.columns[i].key))
        {
            let key: Vec<&str> = t
                .table
                .key
                .iter()
                .map(|&j| t.table.columns[j].name.as_str())
                .collect();
            let ident: Vec<&str> = rel
                .rel
                .columns
                .iter()
                .filter(|c| c.key)
                .map(|c| c.name.as_str())
                .collect();
            return Err(err(format!(
                "its REPLICA IDENTITY ({}) does not hold the table's key ({}), so this delete or key change cannot be matched to a row: ALTER TABLE {} REPLICA IDENTITY FULL (or DEFAULT) for the changes to come, and take a new snapshot of the table (changes already written this way carry no key)",
                ident.join(", "),
                key.join(", "),
                rel.rel.name,
            )));
        }
        let entry = &mut self.open[idx];
        let row = entry.positions.len() as u32;
        let mut bytes = 0usize;
        let mut bad = None;
        match &c {
            pgoutput::Change::Insert { new, .. } => {
                bytes +=
                    fill(&mut entry.first, &t, &rel.map, new, None, None, &mut bad).map_err(err)?;
            }
            pgoutput::Change::Delete { old, .. } => {
                if keyless && old.0 != b'O' {
                    return Err(err(identity_hint()));
                }
                bytes += fill(&mut entry.first, &t, &rel.map, &old.1, None, None, &mut bad)
                    .map_err(err)?;
            }
            pgoutput::Change::Update { old, new, .. } => {
                if keyless && !matches!(old, Some((b'O', _))) {
                    return Err(err(identity_hint()));
                }
                let old_vals = old.as_ref().map(|o| o.1.as_slice());
                // Without an old image the key did not change: the new row's key is it
                // (the old row's other values are not needed).
                let before = old_vals.unwrap_or(new);
                bytes += fill(&mut entry.first, &t, &rel.map, before, None, None, &mut bad)
                    .map_err(err)?;
                let after = entry.second.as_mut().expect("update builder");
                let mut cells = Vec::new();
                bytes += fill(
                    after,
                    &t,
                    &rel.map,
                    new,
                    old_vals.filter(|_| matches!(old, Some((b'O', _)))),
                    Some(&mut cells),
                    &mut bad,
                )
                .map_err(err)?;
                entry
                    .unchanged
                    .extend(cells.into_iter().map(|c| (row, c as u32)));
            }
        }
        if let Some(reason) = bad {
            entry.bad.push(row);
            let vals = match &c {
                pgoutput::Change::Insert { new, .. } | pgoutput::Change::Update { new, .. } => new,
                pgoutput::Change::Delete { old, .. } => &old.1,
            };
            let record = row_record(
                &t.table,
                &format!("{op:?}").to_lowercase(),
                &lsn_position(commit, ordinal),
                &reason,
                row_json(&t, &rel.map, vals),
            );
            let what = format!(
                "at {}: {}.{}: {reason}",
                lsn_position(commit, ordinal),
                t.table.db,
                t.table.name
            );
            dead_letter(&self.src, &what, record)?;
        }
        let entry = &mut self.open[idx];
        let txn = (self.txns.len() - 1) as u32;
        let tt = self.txn.as_ref().expect("in a transaction");
        entry.positions.push(RowPos {
            txn,
            ordinal: tt.ordinal as u32,
            at: tt.at,
        });
        self.bytes += bytes;
        if self.bytes >= cfg(&self.src).batch_bytes {
            return self.flush().await;
        }
        Ok(true)
    }

    fn open_builder(&mut self, t: &Arc<PgTable>, op: Op) -> usize {
        let second = (op == Op::Update).then(|| RowsBuilder::new(t.table.clone()));
        self.open.push(Open {
            table: t.clone(),
            op,
            first: RowsBuilder::new(t.table.clone()),
            second,
            positions: Vec::new(),
            unchanged: Vec::new(),
            bad: Vec::new(),
        });
        self.open.len() - 1
    }

    /// Deliver every open batch (and a commit batched with them).
    async fn flush(&mut self) -> Result<bool, SourceError> {
        self.last_flush = Instant::now();
        self.bytes = 0;
        let open = std::mem::take(&mut self.open);
        let txns = Arc::new(std::mem::take(&mut self.txns));
        if let Some(t) = &self.txn {
            self.txns.push(lsn_position(t.commit, 0));
        }
        // Built first, sent after: the last one sent ends the delivery.
        let mut batches = Vec::with_capacity(open.len());
        for Open {
            table: t,
            op,
            first: mut a,
            second: b,
            positions,
            unchanged,
            bad,
        } in open
        {
            if positions.is_empty() {
                continue;
            }
            let first = a.finish();
            let (before, after) = match (op, b) {
                (Op::Insert, _) => (None, Some(first)),
                (Op::Delete, _) => (Some(first), None),
                (Op::Update, Some(mut b)) => (Some(first), Some(b.finish())),
                (Op::Update, None) => unreachable!("updates keep two builders"),
            };
            let batch = RowBatch {
                table: t.table.clone(),
                op,
                before,
                after,
                positions,
                txns: txns.clone(),
                unchanged,
                complete: false,
            };
            let batch = if bad.is_empty() {
                batch
            } else {
                let keep: arrow_array::BooleanArray = (0..batch.num_rows() as u32)
                    .map(|r| Some(!bad.contains(&r)))
                    .collect();
                let kept = batch
                    .filter(&keep)
                    .map_err(|e| SourceError::Decode(e.to_string()))?;
                if kept.num_rows() == 0 {
                    continue;
                }
                kept
            };
            batches.push(batch);
        }
        if let Some(last) = batches.last_mut() {
            last.complete = true;
        }
        for batch in batches {
            if !self.send(SourceEvent::Rows(batch)).await {
                return Ok(false);
            }
        }
        if self.txn.is_none() {
            return self.flush_commit().await;
        }
        Ok(true)
    }

    /// A commit held back for batching, delivered (after the rows: see `flush`).
    async fn flush_commit(&mut self) -> Result<bool, SourceError> {
        if let Some(at) = self.pending_commit.take() {
            return Ok(self
                .send(SourceEvent::Commit {
                    position: lsn_position(self.last, 0),
                    at,
                })
                .await);
        }
        Ok(true)
    }

    /// A message of the DDL capture: its statement into the schema history, and a
    /// `Schema` event when it changed captured tables.
    async fn ddl(&mut self, text: &str) -> Result<bool, SourceError> {
        // (A change delivered before a restart is skipped, but still takes its
        // statement of the query text: a later DDL of the same query is the one after.)
        let skipped = self.next_change()?;
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            SourceError::Decode(format!("at {}: DDL capture message: {e}", self.here()))
        })?;
        if v["kind"] != "ddl" {
            return Ok(true);
        }
        let text = v["query"].as_str().unwrap_or_default().to_owned();
        let tag = v["tag"].as_str().unwrap_or_default().to_owned();
        let schema = v["schema"].as_str().unwrap_or("public").to_owned();
        if !skipped {
            self.publication_altered(&v["publications"], &text)?;
        }
        let from = self
            .taken
            .iter()
            .find(|(q, _)| *q == text)
            .map_or(0, |(_, n)| *n);
        // A command inside a function or DO block is none of the query's statements
        // (an ALTER TABLE later in a multi-statement query would match its tag).
        let nested = v["nested"].as_bool().unwrap_or(false);
        // The same query text run again in this transaction starts over.
        let found = match nested {
            true => None,
            false => statement_for(&text, &tag, from)
                .or_else(|| (from > 0).then(|| statement_for(&text, &tag, 0)).flatten()),
        };
        if skipped {
            if let Some((next, _)) = found {
                self.taken.retain(|(q, _)| *q != text);
                self.taken.push((text, next));
            }
            return Ok(true);
        }
        let Some((next, query)) = found else {
            // Run by a function or DO block: the query text is the call, not the
            // statement. The change reaches the history from the stream's Relation
            // message, which pgoutput sends before the table's next row.
            tracing::warn!(
                "at {}: a {tag} command run by a function or DO block (`{}`): the statement is not in the query text, so the change is taken from the stream's relation message before the table's next row (a renamed column reads as dropped and added; a type change that decodes alike is not seen)",
                self.here(),
                text.chars().take(120).collect::<String>()
            );
            return Ok(true);
        };
        self.taken.retain(|(q, _)| *q != text);
        self.taken.push((text, next));
        // A table made from a query's result (`CREATE TABLE ... AS SELECT`, `SELECT
        // INTO`): its columns are the result's, which its statement does not spell
        // out; the stream's Relation message before its first row (its rows are in
        // the stream) gives them, as for a table made by a function. (Every run
        // stopped here: the statement cannot be parsed into a table definition.)
        if matches!(tag.as_str(), "CREATE TABLE AS" | "SELECT INTO") {
            tracing::info!(
                "at {}: {tag}: the table's columns are taken from the stream's relation message before its first row",
                self.here()
            );
            return Ok(true);
        }
        // Rows before the DDL are delivered under the old schema; when the DDL begins
        // its transaction, with the commit of the transactions before it (a DDL that
        // stops the job must not leave them read past their boundary: nothing would
        // commit).
        let first = self.txn.take_if(|t| t.ordinal == 1);
        let delivered = self.flush().await?;
        if let Some(t) = first {
            self.txns.push(lsn_position(t.commit, 0));
            self.txn = Some(t);
        }
        if !delivered {
            return Ok(false);
        }
        let t = self.txn.as_ref().expect("in a transaction");
        let pos = lsn_position(t.commit, t.ordinal - 1);
        // Attaching or detaching a partition moves rows between a partitioned table
        // and a table of its own with no row change in the stream.
        if let Some(d) = (tag == "ALTER TABLE")
            .then(|| grammar::ddl::parse_alter_table(grammar::Flavor::Postgres, &query).ok())
            .flatten()
            .filter(|d| {
                d.specs.iter().any(|s| {
                    matches!(s, grammar::ast::AlterSpec::Ignored(x)
                        if x.starts_with("ATTACH PARTITION") || x.starts_with("DETACH PARTITION"))
                })
            })
        {
            let captured = match d.name.as_slice() {
                [s, t] => self.src.captures(&s.value, &t.value),
                [t] => self.src.captures(&schema, &t.value),
                _ => true,
            };
            if captured {
                return Err(SourceError::Ddl {
                    position: pos.to_string(),
                    ddl: query,
                    reason: format!("ATTACH/DETACH PARTITION moves the rows of a partition into or out of its partitioned table without any row change in the stream, so the targets cannot follow it: take a new snapshot after it ({NEW_SNAPSHOT}), or leave the table out of source.tables"),
                });
            }
        }
        // A captured table given a DEFERRABLE primary key (the capture looks once
        // the command ran).
        let deferrable: Vec<String> = v["objects"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|o| o["deferrable_key"].as_bool() == Some(true))
            .filter_map(|o| Some((o["schema"].as_str()?, o["name"].as_str()?)))
            .filter(|(s, t)| self.src.captures(s, t))
            .map(|(s, t)| format!("{}.{}", ident(s), ident(t)))
            .collect();
        if !deferrable.is_empty() {
            return Err(SourceError::Ddl {
                position: pos.to_string(),
                ddl: query,
                reason: format!(
                    "it gives captured table(s) {} a DEFERRABLE primary key: {DEFERRABLE_WHY}. Make the key immediate (drop the constraint and add it again without DEFERRABLE) and take a new snapshot of the table(s) ({NEW_SNAPSHOT}), or leave them out of source.tables",
                    deferrable.join(", ")
                ),
            });
        }
        let after = self.here();
        let generated_before =
            (!self.src.generated_computed).then(|| generated_columns(&self.src, &self.history));
        // The tables the command made or changed, as the capture names them (a
        // statement the history cannot parse names none itself).
        let objects: Vec<ddl_core::TableName> = v["objects"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|o| o["type"].as_str() == Some("table"))
            .filter_map(|o| {
                Some(ddl_core::TableName::new(
                    Some(o["schema"].as_str()?),
                    o["name"].as_str()?,
                ))
            })
            .collect();
        let out = match self.history.apply(&pos, Some(&schema), false, &query) {
            Ok(out) => out,
            Err(e)
                if !self.src.concerns(
                    if e.tables.is_empty() {
                        &objects
                    } else {
                        &e.tables
                    },
                    &schema,
                ) =>
            {
                tracing::info!("skipped: DDL at {pos} outside the captured tables: {e}");
                return Ok(true);
            }
            Err(e) if self.src.skip_unparsed_ddl => {
                let ev = crate::source::unparsed(&after, &schema, &query, &e);
                return Ok(self.send(ev).await);
            }
            Err(e) => {
                return Err(SourceError::Ddl {
                    position: pos.to_string(),
                    ddl: query,
                    reason: e.message,
                })
            }
        };
        // An enum label renamed: rows already holding it read the new label at the
        // source, with no row change in the stream, so the targets would keep the
        // old one (silently in the lake; a relational target's CHECK refused its own
        // rows). The same stop on every run, unless the DDL policy lets it pass.
        if tag == "ALTER TYPE" && renames_enum_label(&query) {
            let columns: Vec<String> = out
                .changes
                .iter()
                .filter_map(|c| match c {
                    ddl_core::SchemaChange::AlterColumnType { table, column, .. } => {
                        Some(format!("{table}.{column}"))
                    }
                    _ => None,
                })
                .collect();
            if !columns.is_empty() {
                let reason = format!(
                    "an enum label renamed (ALTER TYPE ... RENAME VALUE) changes what the rows of {} already hold, and the stream carries no row change for it: the targets would keep the old label. Take a new snapshot after it ({}); if no row holds the old label, pipeline.ddl-error-policy: skip lets it pass",
                    columns.join(", "),
                    crate::source::NEW_SNAPSHOT
                );
                if !self.src.skip_unparsed_ddl {
                    return Err(SourceError::Ddl {
                        position: pos.to_string(),
                        ddl: query,
                        reason,
                    });
                }
                tracing::warn!("DDL at {pos}: {reason}; passed on (ddl-error-policy: skip)");
            }
        }
        // Decoders and relation maps follow the new definitions. A table the DDL
        // changed keeps its old map until its Relation message, which pgoutput sends
        // again before the table's next row.
        // A table moved or renamed keeps its name in its last Relation message until
        // pgoutput sends another, which a schema rename does not cause: its rows
        // would reach the old name.
        self.tables.clear();
        let oids: Vec<u32> = self.rels.keys().copied().collect();
        for oid in oids {
            let mut r = self.rels[&oid].rel.clone();
            for c in &out.changes {
                if let ddl_core::SchemaChange::RenameTable { from, to } = c {
                    if from.schema.as_deref() == Some(r.namespace.as_str()) && from.name == r.name {
                        r.namespace = to.schema.clone().unwrap_or(r.namespace);
                        r.name = to.name.clone();
                    }
                }
            }
            let _ = self.relation(r);
        }
        // The capture says whether each renamed or moved table holds rows (a capture
        // installed by an older lakeshift says nothing: the job cannot tell).
        let empty = |d: &str, to: &str| {
            v["objects"].as_array().and_then(|objs| {
                objs.iter()
                    .find(|o| o["schema"].as_str() == Some(d) && o["name"].as_str() == Some(to))
                    .and_then(|o| o["rows"].as_bool())
            })
        };
        let changes =
            match self
                .outside
                .moves_in(&self.src, &schema, &self.history, out.changes, empty)
            {
                Ok(c) => c,
                Err(reason) => {
                    return Err(SourceError::Ddl {
                        position: pos.to_string(),
                        ddl: query,
                        reason,
                    })
                }
            };
        match crate::source::schema_event(
            &self.src,
            &self.history,
            &schema,
            after,
            &query,
            changes,
            out.notes,
        ) {
            Some(ev) => {
                let ev = match &generated_before {
                    Some(before) => without_generated(&self.src, before, &schema, ev),
                    None => ev,
                };
                Ok(self.send(ev).await)
            }
            None => Ok(true),
        }
    }
}

/// The same column names, in any order (values are matched to columns by name: a
/// column dropped and added back under an earlier name only moves).
fn same_names(a: &[&str], b: &[&str]) -> bool {
    let (mut a, mut b) = (a.to_vec(), b.to_vec());
    a.sort_unstable();
    b.sort_unstable();
    a == b
}

/// How many query texts' progress `Stream::taken` keeps across transactions.
const TAKEN_TEXTS: usize = 16;

/// The statement of a (possibly multi-statement) query text that a DDL command
/// tagged `tag` ran: the first at or after statement `from` that starts with the
/// tag's first word and whose leading words hold the others in order (`CREATE
/// INDEX` matches `CREATE UNIQUE INDEX`; a `DO` block whose body starts `ALTER
/// TABLE` is no `ALTER TABLE`). Returns the index after it and its text.
/// Whether an `ALTER TYPE` statement renames an enum label (`RENAME VALUE`), words
/// inside quotes aside.
fn renames_enum_label(sql: &str) -> bool {
    let mut words = Vec::new();
    let mut quoted: Option<char> = None;
    let mut word = String::new();
    for c in sql.chars() {
        match quoted {
            Some(q) if c == q => quoted = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quoted = Some(c),
            None if c.is_alphanumeric() || c == '_' => word.push(c.to_ascii_uppercase()),
            None => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
        }
    }
    words.push(word);
    words
        .windows(2)
        .any(|w| w[0] == "RENAME" && w[1] == "VALUE")
}

fn statement_for(query: &str, tag: &str, from: usize) -> Option<(usize, String)> {
    let stmts: Vec<String> = grammar::split::split(grammar::Flavor::Postgres, query)
        .into_iter()
        .filter(|s| s.kind == grammar::split::Kind::Sql)
        .map(|s| s.text)
        .collect();
    let want: Vec<String> = tag.split_whitespace().map(str::to_uppercase).collect();
    for (i, st) in stmts.iter().enumerate().skip(from) {
        let words: Vec<String> = without_leading_comments(st)
            .split_whitespace()
            .take(want.len() + 5)
            .map(str::to_uppercase)
            .collect();
        let mut w = words.iter();
        if words.first() == want.first() && want.iter().all(|t| w.any(|x| x == t)) {
            return Some((i + 1, st.clone()));
        }
    }
    None
}

/// A statement's text after the comments before it.
fn without_leading_comments(mut s: &str) -> &str {
    loop {
        s = s.trim_start();
        if let Some(r) = s.strip_prefix("--") {
            s = r.split_once('\n').map_or("", |(_, rest)| rest);
        } else if let Some(r) = s.strip_prefix("/*") {
            s = r.split_once("*/").map_or("", |(_, rest)| rest);
        } else {
            return s;
        }
    }
}

/// How a built-in type of a relation message is decoded (kind and text form), for
/// the types whose mapping is certain; None for the rest (domains, enums and other
/// types of the database's own, arrays, ...), which are not compared.
fn decoder_of_oid(oid: u32, typmod: i32) -> Option<(super::decode::Kind, Form)> {
    use ddl_core::DataType as D;
    let int = |bytes| D::Int {
        bytes,
        unsigned: false,
    };
    let m = typmod - 4;
    let t = match oid {
        16 => D::Boolean,
        21 => int(2),
        23 => int(4),
        20 => int(8),
        700 => D::Float {
            bytes: 4,
            unsigned: false,
        },
        701 => D::Float {
            bytes: 8,
            unsigned: false,
        },
        1700 if typmod >= 4 => D::Decimal {
            precision: Some(((m >> 16) & 0xffff) as u32),
            scale: Some(m & 0xffff),
            unsigned: false,
        },
        1700 => D::Decimal {
            precision: None,
            scale: None,
            unsigned: false,
        },
        17 => D::Blob { max_bytes: None },
        25 | 1043 | 1042 => D::Text {
            max_bytes: None,
            national: false,
        },
        2950 => D::Uuid,
        1082 => D::Date,
        1114 => D::Timestamp {
            precision: 6,
            tz: ddl_core::TimeZone::None,
        },
        1184 => D::Timestamp {
            precision: 6,
            tz: ddl_core::TimeZone::Instant,
        },
        _ => return None,
    };
    Some(values::kind_of(&t))
}

/// A column type as PostgreSQL writes it, from the OID and type modifier a relation
/// message gives (the built-in types; anything else as text).
fn type_text(oid: u32, typmod: i32) -> String {
    let m = typmod - 4;
    match oid {
        16 => "boolean".into(),
        17 => "bytea".into(),
        20 => "bigint".into(),
        21 => "smallint".into(),
        23 => "integer".into(),
        25 => "text".into(),
        114 => "json".into(),
        700 => "real".into(),
        701 => "double precision".into(),
        790 => "money".into(),
        1042 if typmod >= 4 => format!("character({m})"),
        1043 if typmod >= 4 => format!("character varying({m})"),
        1043 => "character varying".into(),
        1082 => "date".into(),
        1083 => "time without time zone".into(),
        1114 if typmod >= 0 => format!("timestamp({typmod}) without time zone"),
        1114 => "timestamp without time zone".into(),
        1184 if typmod >= 0 => format!("timestamp({typmod}) with time zone"),
        1184 => "timestamp with time zone".into(),
        1186 => "interval".into(),
        1266 => "time with time zone".into(),
        1560 if typmod > 0 => format!("bit({typmod})"),
        1700 if typmod >= 4 => format!("numeric({},{})", (m >> 16) & 0xffff, m & 0xffff),
        1700 => "numeric".into(),
        2950 => "uuid".into(),
        3802 => "jsonb".into(),
        _ => "text".into(),
    }
}

/// A row whose value has no form the sinks hold: with `row-error-policy: skip` (or
/// `park`) its record is appended to the dead-letter file and the row left out;
/// otherwise the error, with the fix.
/// A dead-letter record of a row of `table` that could not be read.
fn row_record(
    table: &SourceTable,
    op: &str,
    position: &Position,
    reason: &str,
    row: serde_json::Value,
) -> serde_json::Value {
    serde_json::json!({
        "kind": "row",
        "table": format!("{}.{}", table.db, table.name),
        "op": op,
        "position": position.to_string(),
        "reason": reason,
        "row": row,
    })
}

fn dead_letter(src: &Source, what: &str, record: serde_json::Value) -> Result<(), SourceError> {
    let Some(path) = src.bad_messages_to.as_ref() else {
        return Err(SourceError::Decode(format!(
            "{what}. Set `pipeline.row-error-policy: skip` to write such rows to the dead-letter file and go on without them"
        )));
    };
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)
            .map_err(|e| SourceError::Decode(format!("{}: {e}", d.display())))?;
    }
    crate::durable::append_line(path, &record.to_string())
        .map_err(|e| SourceError::Decode(format!("{}: {e}", path.display())))?;
    tracing::warn!(
        "{what}: the row was written to {} and left out (row-error-policy)",
        path.display()
    );
    Ok(())
}

/// A tuple as a JSON object of column texts (for the dead-letter file).
fn row_json(t: &PgTable, map: &[Option<usize>], vals: &[pgoutput::Value<'_>]) -> serde_json::Value {
    let mut o = serde_json::Map::new();
    for (j, m) in map.iter().enumerate() {
        let v = match m.and_then(|i| vals.get(i)) {
            Some(pgoutput::Value::Text(s)) => serde_json::Value::String((*s).to_owned()),
            Some(pgoutput::Value::Binary(b)) => {
                serde_json::Value::String(b.iter().map(|x| format!("{x:02x}")).collect::<String>())
            }
            Some(pgoutput::Value::Unchanged) => serde_json::Value::String("(unchanged)".into()),
            None | Some(pgoutput::Value::Null) => serde_json::Value::Null,
        };
        o.insert(t.table.columns[j].name.clone(), v);
    }
    serde_json::Value::Object(o)
}

/// Rows of one table and one kind of change being collected.
struct Open {
    table: Arc<PgTable>,
    op: Op,
    /// Inserts: the rows; deletes and updates: the old rows.
    first: RowsBuilder,
    /// Updates: the new rows.
    second: Option<RowsBuilder>,
    positions: Vec<RowPos>,
    /// Updates: (row, column) of new rows' unchanged TOAST values not filled from an
    /// old row.
    unchanged: Vec<(u32, u32)>,
    /// Rows holding a value that has no Arrow form (numeric NaN, infinite dates),
    /// written to the dead-letter file and left out (`row-error-policy: skip`).
    bad: Vec<u32>,
}

/// Append one tuple's values to `b` in the table's column order. An unchanged
/// TOAST value is taken from `old` (the old row, REPLICA IDENTITY FULL) when it has
/// it; otherwise it is NULL in `b`, its column noted in `unchanged` (new rows: the
/// sink keeps the previous value) or, for an old row's non-key column, not needed.
fn fill(
    b: &mut RowsBuilder,
    t: &PgTable,
    map: &[Option<usize>],
    vals: &[pgoutput::Value<'_>],
    old: Option<&[pgoutput::Value<'_>]>,
    mut unchanged: Option<&mut Vec<usize>>,
    bad: &mut Option<String>,
) -> Result<usize, String> {
    let mut bytes = 0;
    for (j, m) in map.iter().enumerate() {
        let col = &mut b.cols[j];
        let v = m.and_then(|i| vals.get(i));
        let v =
            match v {
                Some(pgoutput::Value::Unchanged) => {
                    match old.and_then(|o| o.get(m.expect("mapped"))) {
                    Some(o @ pgoutput::Value::Text(_)) => Some(o),
                    _ if t.table.key.contains(&j) => {
                        return Err(format!(
                            "key column {}: an unchanged TOAST value and no old row to take it from: ALTER TABLE {} REPLICA IDENTITY FULL makes updates carry it",
                            t.table.columns[j].name, t.table.name
                        ))
                    }
                    _ => {
                        if let Some(u) = unchanged.as_deref_mut() {
                            u.push(j);
                        }
                        col.append_null();
                        continue;
                    }
                }
                }
                other => other,
            };
        match v {
            None | Some(pgoutput::Value::Null) => col.append_null(),
            Some(pgoutput::Value::Text(s)) => {
                bytes += s.len();
                if let Err(e) = values::append(col, t.forms[j], s) {
                    // The row is completed (NULL here) and left out by the caller.
                    bad.get_or_insert_with(|| format!("column {}: {e}", t.table.columns[j].name));
                    col.append_null();
                }
            }
            Some(pgoutput::Value::Binary(_)) => {
                return Err(
                    "binary tuple values (the publication's binary option) are not read".into(),
                )
            }
            Some(pgoutput::Value::Unchanged) => unreachable!("replaced above"),
        }
    }
    b.rows += 1;
    Ok(bytes + 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_schema_patterns_make_a_schema_publication() {
        assert_eq!(
            whole_schemas(&["shop\\..*", "app_2\\..*", "shop\\..*"]),
            Some(vec!["shop".to_owned(), "app_2".to_owned()])
        );
        assert_eq!(
            whole_schemas(&["x\\-y\\.z\\..*"]),
            Some(vec!["x-y.z".to_owned()])
        );
        for p in [
            "shop\\.orders",
            "sh.p\\..*",
            "shop\\..*_x",
            ".*\\..*",
            "\\..*",
            "\\w+\\..*",
        ] {
            assert_eq!(whole_schemas(&["a\\..*", p]), None, "{p}");
        }
    }

    #[test]
    fn a_multi_statement_query_gives_each_command_its_statement() {
        let q = "INSERT INTO t VALUES (1); TRUNCATE u; CREATE UNIQUE INDEX i ON t (a); ALTER TABLE t ADD c int; alter table t drop c";
        let (n, s) = statement_for(q, "CREATE INDEX", 0).unwrap();
        assert!(s.starts_with("CREATE UNIQUE INDEX"), "{s}");
        let (n, s) = statement_for(q, "ALTER TABLE", n).unwrap();
        assert!(s.ends_with("ADD c int"), "{s}");
        let (_, s) = statement_for(q, "ALTER TABLE", n).unwrap();
        assert!(s.ends_with("drop c"), "{s}");
        assert!(statement_for(
            "DO $$ BEGIN EXECUTE 'x'; END $$; SELECT 1",
            "ALTER TABLE",
            0
        )
        .is_none());
        assert_eq!(
            statement_for("ALTER TABLE t ADD c int", "ALTER TABLE", 0)
                .unwrap()
                .0,
            1
        );
        // A block whose body starts with the tag's words is not the statement.
        let (n, s) = statement_for(
            "DO $$ BEGIN ALTER TABLE t ADD w int; END $$; ALTER TABLE t RENAME v TO vv",
            "ALTER TABLE",
            0,
        )
        .unwrap();
        assert_eq!((n, s.as_str()), (2, "ALTER TABLE t RENAME v TO vv"));
        let (_, s) = statement_for(
            "/* why */ -- note\n alter table t add x int",
            "ALTER TABLE",
            0,
        )
        .unwrap();
        assert!(s.ends_with("add x int"), "{s}");
    }

    #[test]
    fn a_snapshot_saw_what_committed_before_it() {
        let s = SeenBySnapshot::parse("4294967390:4294967396:4294967391", Vec::new(), 0).unwrap();
        // Ids are the low 32 bits (epoch 1): xmin 94, 95 in progress, xmax 100.
        assert!(s.saw(94) && !s.saw(95) && s.saw(99) && !s.saw(100) && !s.saw(5000));
        // Across the 32-bit wrap: xmin near the top, xmax past zero.
        let w = SeenBySnapshot::parse("4294967290:4294967306:", Vec::new(), 0).unwrap();
        assert!(w.saw(u32::MAX - 10) && w.saw(3) && !w.saw(10));
    }

    #[test]
    fn positions_inside_a_transaction_follow_the_boundary_before_it() {
        // The previous commit ends at 100; the next transaction's commit record
        // starts at or after it.
        let boundary = lsn_position(100, 0);
        let inside = lsn_position(100, 3);
        let next = lsn_position(180, 0);
        assert!(boundary < inside && inside < next);
    }
}
