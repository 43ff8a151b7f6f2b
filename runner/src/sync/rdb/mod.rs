//! The relational sink: a MySQL/MariaDB source mirrored into PostgreSQL or
//! MySQL/MariaDB, DDL included, exactly once.
//!
//! Rows: per checkpoint, each table's changes are folded by key (the last change of a
//! key wins), then applied in one target transaction as multi-row upserts
//! (`INSERT ... ON CONFLICT DO UPDATE` / `ON DUPLICATE KEY UPDATE`) and deletes by key.
//! The same transaction moves the job's row in the target's state table
//! (`lakeshift.sync_state`: checkpoint, source position, snapshot progress) from the
//! previous checkpoint to this one, and fails if the row is not at the previous
//! checkpoint (another process advanced it). A restart resumes the source at the
//! position in that row: what the target committed is never applied twice, what it
//! did not is read again.
//!
//! DDL: the pending rows are committed first (a barrier), then the DDL is translated
//! from the source's IR changes (after the job's `route`) into the target dialect and
//! run. Every DDL is recorded in the DDL log (`ddl-log.json`, durable) before it
//! runs. PostgreSQL runs the DDL and the state row's move in one transaction.
//! MySQL commits each DDL statement on its own: after a crash, a DDL whose log entry
//! is still pending is reconciled by probing the target's catalog (is the column
//! there?) before it is run again, so each takes effect once. A DDL that cannot be
//! translated or that the target refuses goes to the job's `ddl-error-policy`.

pub mod render;
pub mod target;

use super::ddllog::{DdlLog, Entry, Status};
use super::error::{ErrorKind, SyncError};
use super::job::{DdlErrorPolicy, ForeignKeys, SyncJob};
use super::route::{rename_batch, Routed};
use crate::source::position::Position;
use crate::source::snapshot::SnapshotResume;
use crate::source::Op;
use arrow_array::RecordBatch;
use ddl_core::{Catalog, SchemaChange, Table, TableName};
use dialects::emit::{EmitCtx, Emitter};
use dialects::Dialect;
use render::ColSpec;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use target::Target;

use crate::failpoint::hit as failpoint;

/// A target table as the sink writes it.
struct TTable {
    /// `db.table`, quoted for the target.
    sql_name: String,
    /// IR column names (routed), lower-cased, in order.
    names: Vec<String>,
    cols: Vec<ColSpec>,
    /// Key columns (indexes into `cols`); empty: no key (full-row deletes).
    key: Vec<usize>,
}

/// One table's changes in the current checkpoint.
#[derive(Default)]
struct Pend {
    /// Keyed tables: key tuple -> its folded change.
    keyed: HashMap<String, KeyChange>,
    /// Keyless tables: inserts (row tuples) and deletes (statements), in order.
    keyless: Vec<(bool, String)>,
}

/// A key's changes in a checkpoint, folded.
#[derive(Default)]
struct KeyChange {
    /// Order of the last change.
    seq: u64,
    /// The row tuple at the end, or None (deleted).
    row: Option<String>,
    /// The source deleted the row in this checkpoint (perhaps to insert it again).
    deleted: bool,
}

pub struct RdbEngine {
    job: SyncJob,
    target: Target,
    dialect: Dialect,
    state_dir: PathBuf,
    log: DdlLog,
    dead_letter: PathBuf,
    checkpoint: u64,
    position: Option<Position>,
    snapshot: Option<SnapshotResume>,
    /// Target tables (routed IR) as the sink believes them to be.
    catalog: Catalog,
    tables: HashMap<(String, String), TTable>,
    pending: BTreeMap<(String, String), Pend>,
    seq: u64,
    parked: BTreeSet<String>,
    last_checkpoint: Instant,
    pub rows: u64,
    pub commits: u64,
    pub ddls: u64,
    /// A Kafka source: offsets instead of a source position.
    kafka: bool,
    /// Kafka: each partition's next offset as the target holds it (None: not yet
    /// there), read when the partition is first seen; what the next commit asserts.
    floors: HashMap<(String, i32), Option<i64>>,
    /// Kafka: the next offset of each partition after this checkpoint's messages.
    offsets: BTreeMap<(String, i32), i64>,
    /// Kafka: offsets committed since the pipeline last asked.
    acks: crate::source::Acknowledged,
    /// PostgreSQL with `foreign-keys: keep`: foreign keys waiting for their tables.
    fk_queue: Vec<(TableName, ddl_core::ForeignKey)>,
    /// Bytes of rendered pending changes (checked against `memory-budget-mib`).
    pending_bytes: usize,
    /// The source position just after the last row in `pending` (binlog sources).
    read_to: Option<Position>,
    /// ON DELETE actions of foreign keys, by parent table (routed). A delete of such a
    /// parent starts a checkpoint, so the action runs in source order with the other
    /// changes: the target's own key runs it (PostgreSQL with `foreign-keys: keep`),
    /// or the checkpoint does (other relational targets).
    fk_actions: BTreeMap<(String, String), Vec<FkAction>>,
}

/// A foreign key's ON DELETE action, seen from its parent table.
#[derive(Debug, Clone, PartialEq)]
struct FkAction {
    child: (String, String),
    /// Child columns and the parent columns they reference (routed names).
    cols: Vec<String>,
    parent_cols: Vec<String>,
    /// SET NULL; else CASCADE.
    set_null: bool,
}

const STATE_DB: &str = "lakeshift";
const STATE_TABLE: &str = "sync_state";

fn key_of(t: &TableName) -> (String, String) {
    (t.schema.clone().unwrap_or_default(), t.name.clone())
}

fn show(k: &(String, String)) -> String {
    format!("{}.{}", k.0, k.1)
}

impl RdbEngine {
    pub async fn open(job: SyncJob) -> Result<RdbEngine, String> {
        let url = job.sink.url.clone().expect("validated");
        let mut target = Target::connect(&url).await?;
        let dialect = target.dialect();
        if job.sink.foreign_keys == ForeignKeys::Keep && dialect == Dialect::MySql {
            target
                .exec("SET SESSION foreign_key_checks = 0")
                .await
                .map_err(|e| e.to_string())?;
        }
        let state_dir = job.pipeline.state.clone();
        std::fs::create_dir_all(&state_dir)
            .map_err(|e| format!("state folder {}: {e}", state_dir.display()))?;
        let log = DdlLog::load(&state_dir)?;
        let dead_letter = job
            .pipeline
            .dead_letter
            .clone()
            .unwrap_or_else(|| state_dir.join("dead-letter.jsonl"));
        let parked = log.parked_tables();
        let mut e = RdbEngine {
            target,
            dialect,
            state_dir,
            log,
            dead_letter,
            checkpoint: 0,
            position: None,
            snapshot: None,
            catalog: Catalog::new(Dialect::MySql.name_rules()),
            tables: HashMap::new(),
            pending: BTreeMap::new(),
            seq: 0,
            parked,
            last_checkpoint: Instant::now(),
            rows: 0,
            commits: 0,
            ddls: 0,
            kafka: job.source.kafka.is_some(),
            floors: HashMap::new(),
            offsets: BTreeMap::new(),
            acks: Vec::new(),
            fk_queue: Vec::new(),
            pending_bytes: 0,
            read_to: None,
            fk_actions: BTreeMap::new(),
            job,
        };
        e.load_state().await?;
        Ok(e)
    }

    fn state_table(&self) -> String {
        let q = |s: &str| dialects::emit::quote_ident(self.dialect, s);
        format!("{}.{}", q(STATE_DB), q(STATE_TABLE))
    }

    fn lit(&self, s: &str) -> String {
        dialects::emit::string_literal(self.dialect, s)
    }

    /// Create the state table if needed and read the job's row.
    async fn load_state(&mut self) -> Result<(), String> {
        let t = self.state_table();
        let (ns, table) = match self.dialect {
            Dialect::Postgres => (
                format!("CREATE SCHEMA IF NOT EXISTS {STATE_DB}"),
                format!("CREATE TABLE IF NOT EXISTS {t} (job varchar(200) PRIMARY KEY, checkpoint bigint NOT NULL, position text, snapshot text, updated_at timestamptz NOT NULL DEFAULT now())"),
            ),
            _ => (
                format!("CREATE DATABASE IF NOT EXISTS {STATE_DB}"),
                format!("CREATE TABLE IF NOT EXISTS {t} (job varchar(200) PRIMARY KEY, checkpoint bigint NOT NULL, position text, snapshot mediumtext, updated_at timestamp(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB"),
            ),
        };
        let text = match self.dialect {
            Dialect::Postgres => "text",
            _ => "varchar(250)",
        };
        let more = [
            // Kafka: each partition's next offset, moved in each commit.
            format!("CREATE TABLE IF NOT EXISTS {STATE_DB}.kafka_offsets (job varchar(200) NOT NULL, topic {text} NOT NULL, part integer NOT NULL, next_offset bigint NOT NULL, PRIMARY KEY (job, topic, part))"),
            // DDL the target ran for the job, by source position (several processes
            // of one job, or a lost state folder, never run one twice).
            format!("CREATE TABLE IF NOT EXISTS {STATE_DB}.ddl_applied (job varchar(200) NOT NULL, position varchar(250) NOT NULL, PRIMARY KEY (job, position))"),
        ];
        for s in [ns, table].into_iter().chain(more) {
            // Two processes of one job creating these at once: PostgreSQL's IF NOT
            // EXISTS can still fail with a duplicate; the second try sees them.
            let mut tries = 0;
            loop {
                match self.target.exec(&s).await {
                    Ok(_) => break,
                    Err(e)
                        if tries < 3
                            && (e.message.contains("duplicate key")
                                || e.message.contains("already exists")) =>
                    {
                        tries += 1;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(e) => return Err(format!("target state table: {e}")),
                }
            }
        }
        let job = self.lit(&self.job.pipeline.name);
        let select = format!(
            "SELECT CAST(checkpoint AS CHAR(20)), position, snapshot FROM {t} WHERE job = {job}"
        );
        let mut rows = self
            .target
            .query(&select)
            .await
            .map_err(|e| format!("target state table: {e}"))?;
        if rows.is_empty() {
            // The job's row, unless another process of the job made it just now.
            let insert = match self.dialect {
                Dialect::Postgres => format!(
                    "INSERT INTO {t} (job, checkpoint) VALUES ({job}, 0) ON CONFLICT (job) DO NOTHING"
                ),
                _ => format!("INSERT IGNORE INTO {t} (job, checkpoint) VALUES ({job}, 0)"),
            };
            self.target
                .exec(&insert)
                .await
                .map_err(|e| format!("target state table: {e}"))?;
            rows = self
                .target
                .query(&select)
                .await
                .map_err(|e| format!("target state table: {e}"))?;
        }
        match rows.into_iter().next() {
            None => return Err("target state table: the job's row is missing".into()),
            Some(r) => {
                self.checkpoint = r[0]
                    .as_deref()
                    .unwrap_or("0")
                    .trim()
                    .parse()
                    .map_err(|e| format!("target state table: checkpoint: {e}"))?;
                self.position = r[1]
                    .as_deref()
                    .map(|p| p.parse::<Position>())
                    .transpose()
                    .map_err(|e| format!("target state table: position: {e}"))?;
                self.snapshot = r[2]
                    .as_deref()
                    .map(serde_json::from_str)
                    .transpose()
                    .map_err(|e| format!("target state table: snapshot: {e}"))?;
            }
        }
        // The schema as of the resume point: the source's stored history.
        if let Some(p) = self
            .position
            .clone()
            .or(self.snapshot.as_ref().map(|s| s.position.clone()))
        {
            let dir = self.state_dir.join("source");
            if let Ok(Some(h)) = crate::source::history::SchemaHistory::load(&dir, &p) {
                let tables: Vec<Table> = h
                    .tables()
                    .filter(|t| {
                        self.job
                            .source
                            .captures(t.name.schema.as_deref().unwrap_or_default(), &t.name.name)
                    })
                    .cloned()
                    .collect();
                for t in tables {
                    self.note_actions(&self.job.router.table(&t));
                    let r = self.routed_ir(&t);
                    // Several tables routed into one: the target has the widest.
                    let wider = self
                        .catalog
                        .table(&r.name)
                        .is_some_and(|have| have.columns.len() >= r.columns.len());
                    if !wider {
                        self.know(r);
                    }
                }
            }
        }
        // A release whose checkpoint committed is finished; one whose did not is undone.
        for i in 0..self.log.entries.len() {
            match self.log.entries[i].released_in {
                Some(n) if self.log.entries[i].status == Status::Parked && n <= self.checkpoint => {
                    self.released(i)?
                }
                Some(n) if n > self.checkpoint => {
                    self.log.entries[i].released_in = None;
                    self.log.store()?;
                }
                _ => {}
            }
        }
        // A DDL recorded as pending whose position the target already passed ran in
        // the transaction that moved it (PostgreSQL) or was reconciled: executed.
        if let Some(p) = &self.position {
            for i in 0..self.log.entries.len() {
                let e = &self.log.entries[i];
                if e.status == Status::Pending
                    && e.position.parse::<Position>().is_ok_and(|x| x <= *p)
                {
                    self.log.set(i, Status::Executed, None)?;
                }
            }
        }
        tracing::info!(
            "target {}: checkpoint {}, resuming at {}",
            self.dialect,
            self.checkpoint,
            self.position
                .as_ref()
                .map(|p| p.to_string())
                .unwrap_or_else(|| "the start".into())
        );
        Ok(())
    }

    /// A source table definition under target names, without what the target skips.
    /// A source foreign-key action the binlog does not carry and the sink does not
    /// follow: ON DELETE CASCADE / SET NULL are followed (by the target's own key on
    /// PostgreSQL with `keep`, else by the checkpoint), except onto the same table;
    /// SET DEFAULT and ON UPDATE actions are not.
    fn warn_actions(&self, t: &Table) {
        for a in crate::sync::fk::referential_actions(t) {
            if !(a.followable() && (self.deferred_fks() || !a.onto_itself())) {
                tracing::warn!(
                    "foreign key {a}: the source does not log the rows this action changes and this sink does not run it; those rows will differ"
                );
            }
        }
    }

    /// Remember a routed table's foreign keys with ON DELETE CASCADE or SET NULL.
    fn note_actions(&mut self, routed: &Table) {
        for a in crate::sync::fk::referential_actions(routed) {
            if !a.followable() {
                continue;
            }
            let mut parent = a.fk.ref_table.clone();
            if parent.schema.is_none() {
                parent.schema = routed.name.schema.clone();
            }
            let act = FkAction {
                child: key_of(&routed.name),
                cols: a.fk.columns.clone(),
                parent_cols: a.fk.ref_columns.clone(),
                set_null: a.action == ddl_core::RefAction::SetNull,
            };
            let list = self.fk_actions.entry(key_of(&parent)).or_default();
            if !list.contains(&act) {
                list.push(act);
            }
        }
    }

    /// The statements that run the ON DELETE actions of `parent`'s rows matching
    /// `rows` (a condition on the parent table), children's children first. They run
    /// before the parent rows go. None of it on PostgreSQL with `keep` (the target's
    /// key acts).
    fn fk_action_sql(
        &mut self,
        parent: &(String, String),
        rows: &str,
        path: &mut Vec<(String, String)>,
        out: &mut Vec<String>,
    ) -> Result<(), String> {
        let Some(acts) = self.fk_actions.get(parent).cloned() else {
            return Ok(());
        };
        path.push(parent.clone());
        let parent_sql = self.ttable(parent)?.sql_name.clone();
        for a in acts {
            if path.contains(&a.child) {
                // A key onto its own table (or a cycle): MySQL cannot delete from a
                // table it selects from; such rows stay (warned when the table came).
                continue;
            }
            let Ok(child_sql) = self.ttable(&a.child).map(|t| t.sql_name.clone()) else {
                continue; // the child table is not mirrored
            };
            let idents = |names: &[String]| -> Vec<String> {
                names.iter().map(|n| self.emitter_ctx_ident(n)).collect()
            };
            let (cols, pcols) = (idents(&a.cols), idents(&a.parent_cols));
            let lhs = if cols.len() == 1 {
                cols[0].clone()
            } else {
                format!("({})", cols.join(", "))
            };
            let child_rows = format!(
                "{lhs} IN (SELECT {} FROM {parent_sql} WHERE {rows})",
                pcols.join(", ")
            );
            if a.set_null {
                let sets: Vec<String> = a
                    .cols
                    .iter()
                    .map(|c| format!("{} = NULL", self.emitter_ctx_ident(c)))
                    .collect();
                out.push(format!(
                    "UPDATE {child_sql} SET {} WHERE {child_rows}",
                    sets.join(", ")
                ));
            } else {
                self.fk_action_sql(&a.child, &child_rows, path, out)?;
                out.push(format!("DELETE FROM {child_sql} WHERE {child_rows}"));
            }
        }
        path.pop();
        Ok(())
    }

    fn routed_ir(&self, t: &Table) -> Table {
        let mut r = self.job.router.table(t);
        if self.job.sink.foreign_keys == ForeignKeys::Drop || self.deferred_fks() {
            r.foreign_keys.clear();
        }
        r
    }

    /// PostgreSQL with `foreign-keys: keep`: foreign keys are added once both tables
    /// exist, DEFERRABLE INITIALLY DEFERRED (checked at each checkpoint's commit) and
    /// NOT VALID (rows already there are not re-checked: tables fill independently).
    fn deferred_fks(&self) -> bool {
        self.job.sink.foreign_keys == ForeignKeys::Keep && self.dialect == Dialect::Postgres
    }

    /// Queue a routed table's foreign keys (deferred mode), named as PostgreSQL would.
    fn queue_fks(&mut self, t: &Table) {
        if !self.deferred_fks() {
            return;
        }
        for fk in &t.foreign_keys {
            let mut fk = fk.clone();
            if fk.name.is_none() {
                fk.name = Some(format!("{}_{}_fkey", t.name.name, fk.columns.join("_")));
            }
            if fk.ref_table.schema.is_none() {
                fk.ref_table.schema = t.name.schema.clone();
            }
            self.fk_queue.push((t.name.clone(), fk));
        }
    }

    /// Add the queued foreign keys whose two tables both exist now.
    async fn add_ready_fks(&mut self) -> Result<(), String> {
        let queue = std::mem::take(&mut self.fk_queue);
        for (table, fk) in queue {
            if self.catalog.table(&table).is_none() || self.catalog.table(&fk.ref_table).is_none() {
                self.fk_queue.push((table, fk));
                continue;
            }
            let (stmts, _) = self.translate(
                &[SchemaChange::AddForeignKey {
                    table: table.clone(),
                    foreign_key: fk.clone(),
                }],
                &[],
            )?;
            for s in stmts {
                let sql = format!("{s} DEFERRABLE INITIALLY DEFERRED NOT VALID");
                match self.target.exec(&sql).await {
                    Ok(_) => tracing::info!("{table}: foreign key added: {sql}"),
                    Err(e) if e.message.contains("already exists") => {}
                    Err(e) => return Err(format!("{table}: foreign key: {e}\n  statement: {sql}")),
                }
            }
        }
        Ok(())
    }

    /// Remember a target table's definition.
    fn know(&mut self, t: Table) {
        let k = key_of(&t.name);
        self.catalog.tables.remove(&t.name);
        let _ = self.catalog.apply(&SchemaChange::CreateTable {
            table: t,
            if_not_exists: false,
        });
        self.tables.remove(&k);
    }

    fn emitter_ctx_ident(&self, name: &str) -> String {
        let cat = Catalog::new(Dialect::MySql.name_rules());
        let mut d = ddl_core::Diagnostics::default();
        let mut cx = EmitCtx {
            source: Dialect::MySql,
            before: &cat,
            after: &cat,
            diags: &mut d,
        };
        Emitter::new(self.dialect).ident(&mut cx, name)
    }

    /// The writer's view of a known target table.
    fn ttable(&mut self, k: &(String, String)) -> Result<&TTable, String> {
        if !self.tables.contains_key(k) {
            let name = TableName::new(Some(&k.0), &k.1);
            let t = self
                .catalog
                .table(&name)
                .ok_or_else(|| format!("table {} is unknown to the sink", show(k)))?
                .clone();
            let cols: Vec<ColSpec> = t
                .columns
                .iter()
                .map(|c| ColSpec {
                    ident: self.emitter_ctx_ident(&c.name),
                    bits: match &c.data_type {
                        ddl_core::DataType::Bit { length, .. } => Some(length.unwrap_or(1)),
                        _ => None,
                    },
                })
                .collect();
            let names: Vec<String> = t.columns.iter().map(|c| c.name.to_lowercase()).collect();
            let key = t
                .primary_key
                .as_ref()
                .map(|pk| pk.columns.clone())
                .or_else(|| self.job.source.config.key_overrides.get(&show(k)).cloned())
                .unwrap_or_default()
                .iter()
                .filter_map(|c| names.iter().position(|n| n.eq_ignore_ascii_case(c)))
                .collect();
            let sql_name = format!(
                "{}.{}",
                self.emitter_ctx_ident(&k.0),
                self.emitter_ctx_ident(&k.1)
            );
            self.tables.insert(
                k.clone(),
                TTable {
                    sql_name,
                    names,
                    cols,
                    key,
                },
            );
        }
        Ok(&self.tables[k])
    }

    /// The target table for a source table, created on the target when new.
    async fn table_for(
        &mut self,
        t: &crate::source::decode::SourceTable,
    ) -> Result<((String, String), Routed), String> {
        let routed = self.job.router.route(&t.db, &t.name);
        let k = (routed.db.clone(), routed.table.clone());
        let name = TableName::new(Some(&k.0), &k.1);
        if self.catalog.table(&name).is_none() {
            let mut ir = (*t.ir).clone();
            ir.name = TableName::new(Some(&t.db), &t.name);
            let with_fks = self.job.router.table(&ir);
            self.warn_actions(&with_fks);
            self.note_actions(&with_fks);
            let r = self.routed_ir(&ir);
            let sql = self.translate(
                &[SchemaChange::CreateTable {
                    table: r.clone(),
                    if_not_exists: true,
                }],
                std::slice::from_ref(&r),
            )?;
            self.ensure_namespace(&k.0).await?;
            for s in &sql.0 {
                self.target
                    .exec(s)
                    .await
                    .map_err(|e| format!("creating {}: {e}\n  statement: {s}", show(&k)))?;
            }
            tracing::info!("table {}: created on the target (if absent)", show(&k));
            self.know(r);
            self.queue_fks(&with_fks);
            self.add_ready_fks().await?;
        } else {
            // Several source tables into one target table: their columns must agree.
            let have: Vec<String> = self
                .catalog
                .table(&name)
                .map(|x| x.columns.iter().map(|c| c.name.to_lowercase()).collect())
                .unwrap_or_default();
            let mine: Vec<String> =
                t.ir.columns
                    .iter()
                    .map(|c| routed.column(&c.name).to_lowercase())
                    .collect();
            if let Some(c) = mine.iter().find(|c| !have.contains(c)) {
                return Err(format!(
                    "{}.{} routes to {} which lacks its column {c} (target columns: {}; its own: {}): tables routed into one target must agree",
                    t.db,
                    t.name,
                    show(&k),
                    have.join(", "),
                    mine.join(", ")
                ));
            }
        }
        Ok((k, routed))
    }

    async fn ensure_namespace(&mut self, db: &str) -> Result<(), String> {
        let id = self.emitter_ctx_ident(db);
        let sql = match self.dialect {
            Dialect::Postgres => format!("CREATE SCHEMA IF NOT EXISTS {id}"),
            _ => format!("CREATE DATABASE IF NOT EXISTS {id}"),
        };
        self.target
            .exec(&sql)
            .await
            .map(|_| ())
            .map_err(|e| format!("{sql}: {e}"))
    }

    /// Translate routed IR changes into target statements. Err: the reason it cannot.
    fn translate(
        &self,
        changes: &[SchemaChange],
        after_tables: &[Table],
    ) -> Result<(Vec<String>, Vec<String>), String> {
        let names: Vec<TableName> = changes
            .iter()
            .flat_map(|c| {
                let mut v: Vec<TableName> = c.table().cloned().into_iter().collect();
                if let SchemaChange::RenameTable { to, .. } = c {
                    v.push(to.clone());
                }
                v
            })
            .collect();
        let before = self.catalog.scope(&names);
        let mut after = before.clone();
        let mut applied = true;
        for c in changes {
            if after.apply(c).is_err() {
                applied = false;
                break;
            }
        }
        if !applied {
            // The sink did not know the table as the source had it: take the source's
            // view after the DDL.
            after = before.clone();
            for t in after_tables {
                after.tables.remove(&t.name);
                let _ = after.apply(&SchemaChange::CreateTable {
                    table: t.clone(),
                    if_not_exists: false,
                });
            }
        }
        let mut diags = ddl_core::Diagnostics::default();
        let mut cx = EmitCtx {
            source: Dialect::MySql,
            before: &before,
            after: &after,
            diags: &mut diags,
        };
        let out = Emitter::new(self.dialect).emit(changes, &mut cx);
        let mut notes = Vec::new();
        for d in diags.0 {
            if d.severity == ddl_core::Severity::Error {
                return Err(format!("cannot translate: {}", d.message));
            }
            notes.push(format!("{}: {}", d.severity, d.message));
        }
        Ok((out, notes))
    }

    /// Pending changes past `memory-budget-mib`: commit them now (inside a source
    /// transaction if need be; the position records how far into it).
    fn over_budget(&self) -> bool {
        self.pending_bytes >= self.job.pipeline.memory_budget_mib as usize * 1024 * 1024
    }

    /// Whether a delete in this table runs a foreign key's ON DELETE action.
    fn acts_on_delete(&self, b: &crate::source::RowBatch) -> bool {
        let r = self.job.router.route(&b.table.db, &b.table.name);
        self.fk_actions
            .contains_key(&(r.db.clone(), r.table.clone()))
    }

    /// Fold a batch of row changes into the table's pending changes.
    async fn fold_rows(
        &mut self,
        table: &crate::source::decode::SourceTable,
        op: Op,
        before: Option<&RecordBatch>,
        after: Option<&RecordBatch>,
    ) -> Result<(), String> {
        let (k, routed) = self.table_for(table).await?;
        let d = self.dialect;
        let rename = |b: Option<&RecordBatch>| b.map(|b| rename_batch(b, &routed)).transpose();
        let (before, after) = (rename(before)?, rename(after)?);
        let any = after
            .as_ref()
            .or(before.as_ref())
            .expect("rows have an image");
        let tt = self.ttable(&k)?;
        // Target column -> batch column (a column the source table lacks, when several
        // tables route into one, is written as DEFAULT).
        let schema = any.schema();
        let find = |name: &str| {
            schema
                .fields()
                .iter()
                .position(|f| f.name().eq_ignore_ascii_case(name))
        };
        let all: Vec<(Option<usize>, &ColSpec)> = tt
            .names
            .iter()
            .zip(&tt.cols)
            .map(|(n, c)| (find(n), c))
            .collect();
        let present: Vec<(usize, &ColSpec)> =
            all.iter().filter_map(|(b, c)| b.map(|b| (b, *c))).collect();
        let key: Vec<(Option<usize>, &ColSpec)> = tt.key.iter().map(|i| all[*i]).collect();
        if key.iter().any(|(b, _)| b.is_none()) {
            return Err(format!("{}: rows lack key columns", show(&k)));
        }
        let keyed = !key.is_empty();
        let sql_name = tt.sql_name.clone();
        let n = any.num_rows();
        // (keyed, key tuple, row tuple or keyless delete statement, a source delete)
        let mut out: Vec<(bool, Option<String>, Option<String>, bool)> = Vec::with_capacity(n);
        for r in 0..n {
            if let Some(b) = &before {
                if keyed {
                    let mut kt = String::new();
                    render::tuple(&mut kt, d, b, &key, r)?;
                    // An update's old image only clears its key; a delete is marked.
                    out.push((true, Some(kt), None, op == Op::Delete));
                } else {
                    out.push((
                        false,
                        None,
                        Some(render::delete_one(d, &sql_name, b, &present, r)?),
                        true,
                    ));
                }
            }
            if let Some(a) = &after {
                let mut row = String::new();
                render::tuple(&mut row, d, a, &all, r)?;
                if keyed {
                    let mut kt = String::new();
                    render::tuple(&mut kt, d, a, &key, r)?;
                    out.push((true, Some(kt), Some(row), false));
                } else {
                    out.push((false, None, Some(row), false));
                }
            }
        }
        let p = self.pending.entry(k).or_default();
        for (is_keyed, kt, row, deleted) in out {
            self.seq += 1;
            self.pending_bytes +=
                kt.as_ref().map_or(0, String::len) + row.as_ref().map_or(0, String::len) + 16;
            if is_keyed {
                let kt = kt.expect("key");
                let e = p.keyed.entry(kt).or_default();
                e.seq = self.seq;
                e.row = row;
                e.deleted |= deleted;
            } else if let Some(row) = row {
                // A keyless insert is a row tuple; a delete a statement.
                p.keyless.push((!deleted, row));
            }
        }
        self.rows += n as u64;
        Ok(())
    }

    /// The statements that apply a table's pending changes, in three groups: deletes by
    /// key, keyless changes (in order), upserts. A checkpoint runs every table's first
    /// group before any second, and those before any third, so an ON DELETE action
    /// of the target (a parent deleted and inserted again) cannot remove a row
    /// written in the same checkpoint. With `rewrite`, every changed key is deleted
    /// before the live rows are written (unique values swapped between rows of one
    /// checkpoint then never meet); not for tables whose deletes the target acts on.
    fn statements(
        &mut self,
        k: &(String, String),
        p: &Pend,
        rewrite: bool,
    ) -> Result<[Vec<String>; 3], String> {
        let rewrite = rewrite && !self.fk_actions.contains_key(k);
        let batch = self.job.sink.batch_rows.max(1);
        let d = self.dialect;
        let tt = self.ttable(k)?;
        let cols: Vec<&ColSpec> = tt.cols.iter().collect();
        let key: Vec<&ColSpec> = tt.key.iter().map(|i| &tt.cols[*i]).collect();
        let (mut dels, mut out, mut ups) = (Vec::new(), Vec::new(), Vec::new());
        if !p.keyed.is_empty() {
            let mut entries: Vec<(&String, &KeyChange)> = p.keyed.iter().collect();
            entries.sort_by_key(|(_, c)| c.seq);
            // Deletes first: keys gone at the end, and keys the source deleted and
            // inserted again (so a target's ON DELETE actions fire as in the source, and
            // a new row cannot meet the old one's unique values); then the live rows in
            // change order.
            let keys: Vec<&str> = entries
                .iter()
                .filter(|(_, c)| rewrite || c.row.is_none() || c.deleted)
                .map(|(k, _)| k.as_str())
                .collect();
            for c in keys.chunks(batch) {
                dels.push(render::delete(&tt.sql_name, &key, c));
            }
            let rows: Vec<&str> = entries
                .into_iter()
                .filter_map(|(_, c)| c.row.as_deref())
                .collect();
            for c in rows.chunks(batch) {
                ups.push(render::insert(d, &tt.sql_name, &cols, &key, c));
            }
        }
        let mut run: Vec<&str> = Vec::new();
        for (insert, s) in &p.keyless {
            if *insert {
                run.push(s);
                if run.len() >= batch {
                    out.push(render::insert(d, &tt.sql_name, &cols, &[], &run));
                    run.clear();
                }
            } else {
                if !run.is_empty() {
                    out.push(render::insert(d, &tt.sql_name, &cols, &[], &run));
                    run.clear();
                }
                out.push(s.clone());
            }
        }
        if !run.is_empty() {
            out.push(render::insert(d, &tt.sql_name, &cols, &[], &run));
        }
        Ok([dels, out, ups])
    }

    fn state_update(
        &self,
        n: u64,
        position: &Option<Position>,
        snapshot: &Option<SnapshotResume>,
    ) -> String {
        let pos = position
            .as_ref()
            .map(|p| self.lit(&p.to_string()))
            .unwrap_or_else(|| "NULL".into());
        let snap = snapshot
            .as_ref()
            .map(|s| self.lit(&serde_json::to_string(s).expect("serialise")))
            .unwrap_or_else(|| "NULL".into());
        let now = match self.dialect {
            Dialect::Postgres => "now()",
            _ => "CURRENT_TIMESTAMP(6)",
        };
        format!(
            "UPDATE {} SET checkpoint = {n}, position = {pos}, snapshot = {snap}, updated_at = {now} WHERE job = {} AND checkpoint = {}",
            self.state_table(),
            self.lit(&self.job.pipeline.name),
            n - 1
        )
    }

    /// Run statements and move the state row in one target transaction.
    async fn commit(
        &mut self,
        stmts: &[String],
        position: Option<Position>,
        snapshot: Option<SnapshotResume>,
    ) -> Result<(), SyncError> {
        let n = self.checkpoint + 1;
        let position = position.or(self.position.clone());
        let begin = match self.dialect {
            Dialect::Postgres => "BEGIN",
            _ => "START TRANSACTION",
        };
        self.target.exec(begin).await?;
        let res = async {
            for (i, s) in stmts.iter().enumerate() {
                if i == 1 {
                    failpoint("inside-target-transaction");
                }
                self.target.exec(s).await.map_err(|e| {
                    SyncError::from(e).context(format_args!("checkpoint {n}"))
                        .with_statement(&clip(s))
                })?;
            }
            if self.kafka {
                return self.move_offsets(n).await;
            }
            let moved = self
                .target
                .exec(&self.state_update(n, &position, &snapshot))
                .await
                .map_err(|e| SyncError::from(e).context(format_args!("checkpoint {n}: state table")))?;
            if moved != 1 {
                return Err(SyncError::fenced(format!(
                    "checkpoint {n}: the target's state for job `{}` is no longer at checkpoint {}: another process advanced it; this one stops",
                    self.job.pipeline.name,
                    n - 1
                )));
            }
            Ok(())
        }
        .await;
        if let Err(e) = res {
            let _ = self.target.exec("ROLLBACK").await;
            return Err(e);
        }
        self.target
            .exec("COMMIT")
            .await
            .map_err(|e| SyncError::from(e).context(format_args!("checkpoint {n}: commit")))?;
        failpoint("after-target-commit");
        if self.kafka {
            for ((t, p), o) in std::mem::take(&mut self.offsets) {
                self.floors.insert((t.clone(), p), Some(o));
                self.acks.push((t, p, o));
            }
        }
        self.checkpoint = n;
        if position.is_some() {
            self.position = position;
        }
        self.snapshot = snapshot;
        self.commits += 1;
        self.last_checkpoint = Instant::now();
        Ok(())
    }

    fn ddl_mark(&self, position: &str) -> String {
        format!(
            "INSERT INTO {STATE_DB}.ddl_applied (job, position) VALUES ({}, {})",
            self.lit(&self.job.pipeline.name),
            self.lit(position)
        )
    }

    /// Whether the target ran the DDL at `position` for this job already.
    async fn ddl_applied(&mut self, position: &str) -> Result<bool, String> {
        let sql = format!(
            "SELECT 1 FROM {STATE_DB}.ddl_applied WHERE job = {} AND position = {}",
            self.lit(&self.job.pipeline.name),
            self.lit(position)
        );
        Ok(!self
            .target
            .query(&sql)
            .await
            .map_err(|e| e.to_string())?
            .is_empty())
    }

    /// Kafka: move each partition's offset in the target, asserting the previous one
    /// (another consumer that took the partition over fences this one off).
    async fn move_offsets(&mut self, n: u64) -> Result<(), SyncError> {
        let job = self.lit(&self.job.pipeline.name);
        for ((t, p), next) in self.offsets.clone() {
            let topic = self.lit(&t);
            let sql = match self.floors.get(&(t.clone(), p)).copied().flatten() {
                Some(old) => format!(
                    "UPDATE {STATE_DB}.kafka_offsets SET next_offset = {next} WHERE job = {job} AND topic = {topic} AND part = {p} AND next_offset = {old}"
                ),
                None => format!(
                    "INSERT INTO {STATE_DB}.kafka_offsets (job, topic, part, next_offset) VALUES ({job}, {topic}, {p}, {next})"
                ),
            };
            let moved = self.target.exec(&sql).await.map_err(|e| {
                SyncError::fenced(format!("checkpoint {n}: offsets of {t}/{p}: {e} (another consumer of the group may own the partition now)"))
            })?;
            if moved != 1 {
                return Err(SyncError::fenced(format!(
                    "checkpoint {n}: partition {t}/{p} is no longer at the offset this consumer read from: another consumer of the group took it over; this one stops"
                )));
            }
        }
        Ok(())
    }

    /// Kafka: a partition's next offset as the target holds it.
    async fn floor(&mut self, topic: &str, part: i32) -> Result<Option<i64>, String> {
        if let Some(f) = self.floors.get(&(topic.to_owned(), part)) {
            return Ok(*f);
        }
        let sql = format!(
            "SELECT CAST(next_offset AS CHAR(20)) FROM {STATE_DB}.kafka_offsets WHERE job = {} AND topic = {} AND part = {part}",
            self.lit(&self.job.pipeline.name),
            self.lit(topic)
        );
        let rows = self.target.query(&sql).await.map_err(|e| e.to_string())?;
        let f = rows
            .first()
            .and_then(|r| r[0].as_deref())
            .map(|v| v.trim().parse::<i64>())
            .transpose()
            .map_err(|e| format!("kafka_offsets: {e}"))?;
        self.floors.insert((topic.to_owned(), part), f);
        Ok(f)
    }

    /// A checkpoint at a transaction boundary: every table's pending changes, held
    /// changes of parked tables set aside, released ones applied.
    pub async fn checkpoint(
        &mut self,
        position: Option<Position>,
        snapshot: Option<SnapshotResume>,
    ) -> Result<(), String> {
        let n = self.checkpoint + 1;
        let pending = std::mem::take(&mut self.pending);
        self.pending_bytes = 0;
        self.read_to = None;
        let mut held = Vec::new();
        let released = self.releases(n, &mut held).await?;
        // ON DELETE actions the target does not run itself: before any delete.
        let mut actions = Vec::new();
        if !self.deferred_fks() {
            for (k, p) in &pending {
                if !self.fk_actions.contains_key(k) || self.parked.contains(&show(k)) {
                    continue;
                }
                let keys: Vec<&str> = p
                    .keyed
                    .iter()
                    .filter(|(_, c)| c.deleted)
                    .map(|(t, _)| t.as_str())
                    .collect();
                if keys.is_empty() {
                    continue;
                }
                let tt = self.ttable(k)?;
                let key: Vec<&ColSpec> = tt.key.iter().map(|i| &tt.cols[*i]).collect();
                let rows = render::key_in(&key, &keys);
                self.fk_action_sql(k, &rows, &mut Vec::new(), &mut actions)?;
            }
        }
        let mut rewrite = false;
        loop {
            let mut groups: [Vec<String>; 3] = Default::default();
            groups[0].extend(actions.iter().cloned());
            for (k, p) in &pending {
                let s = self.statements(k, p, rewrite)?;
                let name = show(k);
                if self.parked.contains(&name) {
                    self.log.hold(&name, n, s.concat())?;
                    continue;
                }
                for (g, part) in groups.iter_mut().zip(s) {
                    g.extend(part);
                }
            }
            let mut stmts = groups.concat();
            stmts.extend(held.iter().cloned());
            match self
                .commit(&stmts, position.clone(), snapshot.clone())
                .await
            {
                Ok(()) => break,
                Err(e) if !rewrite && e.kind == ErrorKind::UniqueViolation => {
                    // Unique values moved between rows inside the checkpoint: the
                    // same changes again, every changed key deleted first.
                    tracing::info!("checkpoint {n}: {e}; applying it again with every changed key deleted first");
                    rewrite = true;
                }
                Err(e) => return Err(e.message),
            }
        }
        for i in released {
            self.released(i)?;
        }
        Ok(())
    }

    /// Parked entries a person resolved: their held statements join checkpoint `n`.
    /// The entry records `released_in: n` first; it becomes resolved once `n` is
    /// committed (a restart finishes or undoes a release by the target's checkpoint).
    async fn releases(&mut self, n: u64, stmts: &mut Vec<String>) -> Result<Vec<usize>, String> {
        let mut out = Vec::new();
        for (seq, retry) in self.log.resolutions() {
            let Some(i) = self.log.entries.iter().position(|e| e.seq == seq) else {
                self.log.clear_resolution(seq);
                continue;
            };
            if self.log.entries[i].status != Status::Parked {
                self.log.clear_resolution(seq);
                continue;
            }
            let tables = self.log.entries[i].tables.clone();
            let mut mine = Vec::new();
            if retry {
                mine.extend(self.log.entries[i].target_sql.clone());
            }
            for t in &tables {
                mine.extend(self.log.held(t)?.into_iter().map(|(_, s)| s));
            }
            self.log.entries[i].released_in = Some(n);
            self.log.store()?;
            tracing::info!(
                "DDL #{seq} resolved: {} held statement(s) of {} applied",
                mine.len(),
                tables.join(", ")
            );
            stmts.extend(mine);
            out.push(i);
        }
        Ok(out)
    }

    /// A release committed: the entry is resolved, DDL queued behind it done, the
    /// held changes gone.
    fn released(&mut self, i: usize) -> Result<(), String> {
        let tables = self.log.entries[i].tables.clone();
        for j in i + 1..self.log.entries.len() {
            let e = &mut self.log.entries[j];
            if e.status == Status::Held && e.tables.iter().any(|t| tables.contains(t)) {
                e.status = Status::Executed;
            }
        }
        self.log.set(i, Status::Resolved, None)?;
        for t in &tables {
            self.log.drop_held(t)?;
        }
        self.log.clear_resolution(self.log.entries[i].seq);
        self.parked = self.log.parked_tables();
        Ok(())
    }

    /// Handle a DDL event.
    async fn ddl(
        &mut self,
        position: &Position,
        sql: &str,
        changes: &[SchemaChange],
        after: &[Table],
    ) -> Result<(), String> {
        // Barrier: what came before the DDL is committed first.
        let pos_before = self.position.clone();
        if !self.pending.is_empty() {
            self.checkpoint(pos_before, None).await?;
        }
        let mut routed: Vec<SchemaChange> =
            changes.iter().map(|c| self.job.router.change(c)).collect();
        if self.job.sink.foreign_keys == ForeignKeys::Drop || self.deferred_fks() {
            let mut later: Vec<Table> = Vec::new();
            routed.retain(|c| match c {
                SchemaChange::AddForeignKey { table, foreign_key } => {
                    let mut t = Table::new(table.clone());
                    t.foreign_keys.push(foreign_key.clone());
                    later.push(t);
                    false
                }
                _ => true,
            });
            for c in &mut routed {
                if let SchemaChange::CreateTable { table, .. } = c {
                    later.push(table.clone());
                    table.foreign_keys.clear();
                }
            }
            for t in later {
                self.queue_fks(&t);
            }
        }
        for t in after {
            if changes.iter().any(|c| {
                matches!(
                    c,
                    SchemaChange::CreateTable { .. } | SchemaChange::AddForeignKey { .. }
                )
            }) {
                self.warn_actions(t);
                self.note_actions(&self.job.router.table(t));
            }
        }
        let after_routed: Vec<Table> = after.iter().map(|t| self.routed_ir(t)).collect();
        let mut touched: Vec<String> = Vec::new();
        for c in &routed {
            if let Some(t) = c.table() {
                touched.push(show(&key_of(t)));
            }
            if let SchemaChange::RenameTable { to, .. } = c {
                touched.push(show(&key_of(to)));
            }
        }
        touched.dedup();
        let at = position.to_string();
        failpoint("before-ddl");
        // Run on the target for this job already (in the transaction that recorded
        // it, by another process, or before the DDL log here caught up)?
        if self.ddl_applied(&at).await? {
            match self.log.find(&at) {
                Some(i) if self.log.entries[i].status == Status::Executed => {}
                Some(i) => self.log.set(i, Status::Executed, None)?,
                None => {
                    self.log.add(Entry::new(
                        at.clone(),
                        sql,
                        touched.clone(),
                        Status::Executed,
                        Some("the target ran it for this job before (another process, or a lost state folder)".into()),
                    ))?;
                }
            }
            tracing::info!("DDL at {at}: already run on the target for this job; not repeated");
            self.apply_catalog(&routed, &after_routed);
            return self.advance(position).await;
        }
        // Seen before (a replay after a restart)?
        if let Some(i) = self.log.find(&at) {
            let e = self.log.entries[i].clone();
            match e.status {
                Status::Pending | Status::Failed => {
                    return self
                        .run_ddl(i, position, &routed, &after_routed, true)
                        .await;
                }
                _ => {
                    tracing::info!(
                        "DDL #{} at {at} was {} before; not repeated",
                        e.seq,
                        e.status
                    );
                    self.apply_catalog(&routed, &after_routed);
                    return self.advance(position).await;
                }
            }
        }
        let translated = self.translate(&routed, &after_routed);
        // Several tables routed into one: the same change from the next of them finds
        // the target table already as the DDL leaves it.
        let already = !after_routed.is_empty()
            && !routed.iter().any(|c| {
                matches!(
                    c,
                    SchemaChange::DropTable { .. }
                        | SchemaChange::RenameTable { .. }
                        | SchemaChange::TruncateTable { .. }
                )
            })
            && after_routed.iter().all(|t| {
                self.catalog.table(&t.name).is_some_and(|have| {
                    have.columns == t.columns
                        && have.primary_key == t.primary_key
                        && have.indexes == t.indexes
                })
            });
        let mut entry = Entry::new(at.clone(), sql, touched.clone(), Status::Pending, None);
        if already {
            entry.target_sql = translated.map(|t| t.0).unwrap_or_default();
            entry.status = Status::Skipped;
            entry.reason = Some("the target table is already as this DDL leaves it (several source tables route into it)".into());
            let seq = self.log.add(entry)?;
            tracing::info!(
                "DDL #{} at {at}: {}",
                self.log.entries[seq].seq,
                self.log.entries[seq].reason.clone().unwrap_or_default()
            );
            return self.advance(position).await;
        }
        // A DDL on a parked table waits behind the parked one.
        if touched.iter().any(|t| self.parked.contains(t)) {
            entry.target_sql = translated.as_ref().map(|t| t.0.clone()).unwrap_or_default();
            entry.status = Status::Held;
            entry.reason = Some("its table is parked behind an earlier DDL".into());
            let i = self.log.add(entry)?;
            let stmts = self.log.entries[i].target_sql.clone();
            for t in &touched {
                self.log.hold(t, self.checkpoint + 1, stmts.clone())?;
            }
            self.parked.extend(touched);
            self.apply_catalog(&routed, &after_routed);
            return self.advance(position).await;
        }
        match translated {
            Ok((stmts, notes)) => {
                for n in notes {
                    tracing::info!("DDL at {at}: {n}");
                }
                entry.target_sql = stmts;
                let i = self.log.add(entry)?;
                self.run_ddl(i, position, &routed, &after_routed, false)
                    .await
            }
            Err(reason) => {
                entry.reason = Some(reason.clone());
                let i = self.log.add(entry)?;
                self.policy(i, position, &routed, &after_routed, reason)
                    .await
            }
        }
    }

    /// The catalog follows the source, whatever happened to the DDL on the target.
    fn apply_catalog(&mut self, routed: &[SchemaChange], after: &[Table]) {
        let mut ok = true;
        for c in routed {
            if self.catalog.apply(c).is_err() {
                ok = false;
            }
        }
        if !ok {
            for t in after {
                self.know(t.clone());
            }
        }
        for c in routed {
            if let Some(t) = c.table() {
                self.tables.remove(&key_of(t));
            }
            if let SchemaChange::RenameTable { to, .. } = c {
                self.tables.remove(&key_of(to));
            }
        }
    }

    /// Move the state row past a DDL (nothing else in the transaction).
    async fn advance(&mut self, position: &Position) -> Result<(), String> {
        if self.position.as_ref().is_some_and(|p| p >= position) {
            return Ok(());
        }
        self.commit(&[], Some(position.clone()), None)
            .await
            .map_err(|e| e.message)
    }

    /// Run (or reconcile) the DDL of log entry `i`.
    async fn run_ddl(
        &mut self,
        i: usize,
        position: &Position,
        routed: &[SchemaChange],
        after: &[Table],
        replay: bool,
    ) -> Result<(), String> {
        let stmts = self.log.entries[i].target_sql.clone();
        let seq = self.log.entries[i].seq;
        for t in &self.log.entries[i].tables.clone() {
            if let Some((db, _)) = t.split_once('.') {
                if routed
                    .iter()
                    .any(|c| matches!(c, SchemaChange::CreateTable { .. }))
                {
                    self.ensure_namespace(db).await?;
                }
            }
        }
        let mark = self.ddl_mark(&position.to_string());
        let result = if self.target.transactional_ddl() {
            // DDL, its mark and the state row in one transaction.
            let mut stmts = stmts.clone();
            stmts.push(mark);
            let r = self.commit(&stmts, Some(position.clone()), None).await;
            failpoint("after-ddl");
            r.map_err(|e| e.message)
        } else {
            let mut r = Ok(());
            let start = self.log.entries[i].done;
            for (j, s) in stmts.iter().enumerate().skip(start) {
                if replay && j == 0 && self.already_applied(routed, after).await? {
                    tracing::info!("DDL #{seq} at {position} had taken effect before a restart; recorded, not repeated");
                    break;
                }
                match self.target.exec(s).await {
                    Ok(_) => {
                        failpoint("after-ddl");
                        self.log.entries[i].done = j + 1;
                        self.log.store()?;
                    }
                    Err(e) if replay && e.already_applied() => {
                        self.log.entries[i].done = j + 1;
                        self.log.store()?;
                    }
                    Err(e) => {
                        r = Err(format!("{e}\n  target statement: {s}"));
                        break;
                    }
                }
            }
            if r.is_ok() {
                if let Err(e) = self.target.exec(&mark).await {
                    if !e.already_applied() && !e.unique_violation() {
                        r = Err(e.to_string());
                    }
                }
            }
            if r.is_ok() {
                r = self.advance(position).await;
            }
            r
        };
        match result {
            Ok(()) => {
                self.log.set(i, Status::Executed, None)?;
                self.apply_catalog(routed, after);
                self.add_ready_fks().await?;
                self.ddls += 1;
                tracing::info!("DDL #{seq} at {position} executed on the target");
                Ok(())
            }
            Err(e) if e.contains("another process advanced it") => Err(e),
            Err(reason) => {
                let reason = format!("the target refused it: {reason}");
                self.policy(i, position, routed, after, reason).await
            }
        }
    }

    /// Whether a DDL's effect is already on the target (MySQL, after a crash between
    /// the DDL's implicit commit and the log's update): the touched tables' columns
    /// as the target has them are the columns after the DDL, not before.
    async fn already_applied(
        &mut self,
        routed: &[SchemaChange],
        after: &[Table],
    ) -> Result<bool, String> {
        let mut expect: BTreeMap<(String, String), Option<Vec<String>>> = BTreeMap::new();
        for c in routed {
            for t in c.table().into_iter().chain(match c {
                SchemaChange::RenameTable { to, .. } => Some(to),
                _ => None,
            }) {
                let k = key_of(t);
                let a = after
                    .iter()
                    .find(|x| key_of(&x.name) == k)
                    .map(|x| x.columns.iter().map(|c| c.name.to_lowercase()).collect());
                expect.insert(k, a);
            }
        }
        let mut differs_from_before = false;
        for (k, want) in &expect {
            let have = self
                .target
                .columns(&k.0, &k.1)
                .await
                .map_err(|e| e.to_string())?;
            if have != *want {
                return Ok(false);
            }
            let before: Option<Vec<String>> = self
                .catalog
                .table(&TableName::new(Some(&k.0), &k.1))
                .map(|x| x.columns.iter().map(|c| c.name.to_lowercase()).collect());
            if before != *want {
                differs_from_before = true;
            }
        }
        Ok(differs_from_before)
    }

    /// The conversion-error manager: one place for a DDL that cannot be translated or
    /// that the target refused.
    async fn policy(
        &mut self,
        i: usize,
        position: &Position,
        routed: &[SchemaChange],
        after: &[Table],
        reason: String,
    ) -> Result<(), String> {
        let e = self.log.entries[i].clone();
        match self.job.pipeline.ddl_error_policy {
            DdlErrorPolicy::Fail => {
                self.log.set(i, Status::Failed, Some(reason.clone()))?;
                Err(format!(
                    "DDL #{} at {position} failed (ddl-error-policy: fail): {reason}\n  statement: {}",
                    e.seq, e.source_sql
                ))
            }
            DdlErrorPolicy::Skip => {
                self.log.set(i, Status::Skipped, Some(reason.clone()))?;
                tracing::warn!(
                    "DDL #{} at {position} skipped (ddl-error-policy: skip): {reason}\n  statement: {}",
                    e.seq,
                    e.source_sql
                );
                self.apply_catalog(routed, after);
                self.advance(position).await
            }
            DdlErrorPolicy::Park => {
                self.log.set(i, Status::Parked, Some(reason.clone()))?;
                DdlLog::dead_letter(&self.dead_letter, &self.log.entries[i])?;
                tracing::warn!(
                    "DDL #{} at {position} parked (ddl-error-policy: park): {reason}; {} held until `lakeshift ddl-log --resolve {}`\n  statement: {}",
                    e.seq,
                    e.tables.join(", "),
                    e.seq,
                    e.source_sql
                );
                self.parked.extend(e.tables.iter().cloned());
                self.apply_catalog(routed, after);
                self.advance(position).await
            }
        }
    }
}

impl crate::sync::pipeline::Sink for RdbEngine {
    async fn prepare(&mut self) -> Result<crate::source::Resume, SyncError> {
        Ok(crate::source::Resume {
            position: self.position.clone(),
            snapshot: self.snapshot.clone(),
        })
    }

    fn resolutions_waiting(&self) -> bool {
        !self.log.resolutions().is_empty()
    }

    async fn rows(
        &mut self,
        b: crate::source::RowBatch,
        snapshotting: bool,
    ) -> Result<(), SyncError> {
        if b.op == Op::Delete
            && !self.pending.is_empty()
            && !snapshotting
            && self.acts_on_delete(&b)
        {
            // Everything before this delete commits first.
            let mut before = b.position_after(0);
            before.ordinal = before.ordinal.saturating_sub(1);
            self.checkpoint(Some(before), None).await?;
        }
        self.fold_rows(&b.table, b.op, b.before.as_ref(), b.after.as_ref())
            .await?;
        self.read_to = Some(b.position_after(b.num_rows() - 1));
        Ok(())
    }

    async fn message(&mut self, m: crate::source::Message) -> Result<(), SyncError> {
        // A message's rows apply unless the target has its offset already.
        let floor = self.floor(&m.topic, m.partition).await?;
        let key = (m.topic, m.partition);
        let seen = self.offsets.get(&key).copied().or(floor);
        if seen.is_some_and(|f| m.next <= f) {
            return Ok(());
        }
        let acts = m
            .rows
            .iter()
            .any(|b| b.op == Op::Delete && self.acts_on_delete(b));
        if acts && (!self.pending.is_empty() || !self.offsets.is_empty()) {
            // Everything before this delete commits first.
            self.checkpoint(None, None).await?;
        }
        for b in m.rows {
            self.fold_rows(&b.table, b.op, b.before.as_ref(), b.after.as_ref())
                .await?;
        }
        self.offsets.insert(key, m.next);
        Ok(())
    }

    async fn snapshot_rows(
        &mut self,
        table: &Arc<crate::source::decode::SourceTable>,
        rows: RecordBatch,
        _at: &Position,
    ) -> Result<(), SyncError> {
        if rows.num_rows() > 0 {
            Ok(self.fold_rows(table, Op::Insert, None, Some(&rows)).await?)
        } else {
            self.table_for(table).await?;
            Ok(())
        }
    }

    async fn schema(&mut self, d: crate::sync::pipeline::Ddl<'_>) -> Result<(), SyncError> {
        // Every transaction before the DDL is complete.
        if self.position.as_ref().is_none_or(|p| *p < d.before) {
            self.position = Some(d.before.clone());
        }
        Ok(self.ddl(d.position, d.sql, d.changes, d.after).await?)
    }

    fn skipped(
        &mut self,
        position: &Position,
        sql: &str,
        tables: Vec<String>,
        why: Option<String>,
    ) -> Result<(), SyncError> {
        Ok(self.log.record_once(Entry::new(
            position.to_string(),
            sql,
            tables,
            Status::Skipped,
            why,
        ))?)
    }

    async fn checkpoint(
        &mut self,
        at: Option<Position>,
        snapshot: Option<SnapshotResume>,
    ) -> Result<(), SyncError> {
        Ok(RdbEngine::checkpoint(self, at, snapshot).await?)
    }

    fn has_pending(&self) -> bool {
        !self.pending.is_empty() || !self.offsets.is_empty()
    }

    fn over_budget(&self) -> bool {
        RdbEngine::over_budget(self)
    }

    /// Everything read commits now, inside a source transaction if need be (the
    /// position records how far into it); during a snapshot, at the next chunk.
    async fn relieve(
        &mut self,
        read_to: Option<Position>,
        snapshotting: bool,
    ) -> Result<(), SyncError> {
        if snapshotting {
            return Ok(());
        }
        Ok(RdbEngine::checkpoint(self, read_to, None).await?)
    }

    fn source_restarted(&mut self) {
        self.floors.clear();
    }

    fn take_acks(&mut self) -> crate::source::Acknowledged {
        std::mem::take(&mut self.acks)
    }

    fn last_checkpoint(&self) -> Instant {
        self.last_checkpoint
    }

    fn status(&self) -> crate::sync::pipeline::SinkStatus {
        crate::sync::pipeline::SinkStatus {
            rows: self.rows,
            commits: self.commits,
            ddls: self.ddls,
            checkpoint: self.checkpoint,
            position: self.position.clone(),
            partitions: self.floors.len(),
        }
    }
}

fn clip(s: &str) -> String {
    if s.len() > 300 {
        let mut end = 300;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}... ({} bytes)", &s[..end], s.len())
    } else {
        s.to_owned()
    }
}

/// `lakeshift ddl-log`: the DDL log of a job's state folder.
pub fn ddl_log_report(job: &SyncJob) -> Result<String, String> {
    let log = DdlLog::load(&job.pipeline.state)?;
    Ok(log.render())
}

/// `lakeshift status` of a relational target: the job's state row, Kafka offsets and
/// the DDL log's counts by status.
pub async fn status(job: &SyncJob) -> Result<String, String> {
    use std::fmt::Write;
    let mut t = Target::connect(job.sink.url.as_deref().unwrap_or_default()).await?;
    let d = t.dialect();
    let name = dialects::emit::string_literal(d, &job.pipeline.name);
    let mut out = String::new();
    let state = t
        .query(&format!(
            "SELECT CAST(checkpoint AS CHAR(20)), position, CAST(updated_at AS CHAR(40)), CASE WHEN snapshot IS NULL THEN 'no' ELSE 'yes' END FROM {STATE_DB}.{STATE_TABLE} WHERE job = {name}"
        ))
        .await;
    match state {
        Ok(rows) if !rows.is_empty() => {
            let r = &rows[0];
            let v = |i: usize| r[i].as_deref().unwrap_or("-").trim().to_owned();
            let _ = writeln!(
                out,
                "job {} into {}: checkpoint {}, source position {}, last commit {}{}",
                job.pipeline.name,
                d,
                v(0),
                v(1),
                v(2),
                if v(3) == "yes" {
                    " (snapshot in progress)"
                } else {
                    ""
                }
            );
        }
        _ => {
            let _ = writeln!(out, "job {}: not started on the target", job.pipeline.name);
        }
    }
    if let Ok(rows) = t
        .query(&format!(
            "SELECT topic, CAST(part AS CHAR(10)), CAST(next_offset AS CHAR(20)) FROM {STATE_DB}.kafka_offsets WHERE job = {name} ORDER BY topic, part"
        ))
        .await
    {
        for r in rows {
            let v = |i: usize| r[i].as_deref().unwrap_or("-").trim().to_owned();
            let _ = writeln!(out, "  kafka {}/{}: next offset {}", v(0), v(1), v(2));
        }
    }
    let _ = writeln!(
        out,
        "DDL log: {}",
        DdlLog::load(&job.pipeline.state)?.counts()
    );
    Ok(out)
}
