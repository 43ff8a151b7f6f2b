//! The job's state on the target: the state row a checkpoint moves in its own
//! transaction, Kafka offsets, the DDL the target ran.

use super::*;
use crate::sync::error::SyncError;

impl RdbEngine {
    pub(super) fn state_table(&self) -> String {
        let q = |s: &str| dialects::emit::quote_ident(self.dialect, s);
        format!("{}.{}", q(STATE_DB), q(STATE_TABLE))
    }

    pub(super) fn lit(&self, s: &str) -> String {
        dialects::emit::string_literal(self.dialect, s)
    }

    /// Create the state table if needed and read the job's row.
    /// The job's state on the target (made on first use), the schema as of its
    /// resume point, and the DDL log settled against it.
    pub(super) async fn load_state(&mut self) -> Result<(), SyncError> {
        self.create_state_tables().await?;
        self.read_state_row().await?;
        self.drop_unmade().await?;
        self.load_history();
        self.find_known_tables().await?;
        self.settle_log()?;
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

    /// The state schema and tables, if missing.
    async fn create_state_tables(&mut self) -> Result<(), SyncError> {
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
                match self.target().await?.exec(&s).await {
                    Ok(_) => break,
                    Err(e) if tries < 3 && (e.unique_violation() || e.already_applied()) => {
                        tries += 1;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(e) => return Err(SyncError::from(e).context("target state table")),
                }
            }
        }
        Ok(())
    }

    /// The job's row: checkpoint, resume position, snapshot progress.
    async fn read_state_row(&mut self) -> Result<(), SyncError> {
        let t = self.state_table();
        let job = self.lit(&self.job.pipeline.name);
        let select = format!(
            "SELECT CAST(checkpoint AS CHAR(20)), position, snapshot FROM {t} WHERE job = {job}"
        );
        let mut rows = self
            .target()
            .await?
            .query(&select)
            .await
            .map_err(|e| SyncError::from(e).context("target state table"))?;
        if rows.is_empty() {
            // The job's row, unless another process of the job made it just now.
            let insert = match self.dialect {
                Dialect::Postgres => format!(
                    "INSERT INTO {t} (job, checkpoint) VALUES ({job}, 0) ON CONFLICT (job) DO NOTHING"
                ),
                _ => format!("INSERT IGNORE INTO {t} (job, checkpoint) VALUES ({job}, 0)"),
            };
            self.target()
                .await?
                .exec(&insert)
                .await
                .map_err(|e| SyncError::from(e).context("target state table"))?;
            rows = self
                .target()
                .await?
                .query(&select)
                .await
                .map_err(|e| SyncError::from(e).context("target state table"))?;
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
        Ok(())
    }

    /// The target tables as of the resume point, from the source's stored history.
    fn load_history(&mut self) {
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
                    .map(|t| crate::source::mirrored(&self.job.source, t))
                    .collect();
                for t in tables {
                    self.note_actions(&self.with_fks(&t));
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
    }

    /// Which of the tables known from the source's history the target holds (one
    /// query). The history does not say: tables are created when first seen, and a
    /// run stopped in the middle of a snapshot had not yet seen the tables after the
    /// one it read; `table_for` creates the others when it first sees them.
    async fn find_known_tables(&mut self) -> Result<(), SyncError> {
        let known: BTreeSet<(String, String)> = self.catalog.tables.keys().map(key_of).collect();
        let schemas: BTreeSet<&str> = known.iter().map(|(s, _)| s.as_str()).collect();
        let schemas: Vec<&str> = schemas.into_iter().collect();
        let there = self
            .target()
            .await?
            .tables_in(&schemas)
            .await
            .map_err(|e| SyncError::from(e).context("the target's tables"))?;
        self.ensured = known.intersection(&there).cloned().collect();
        // A table a DDL skipped by the policy left behind the source (its rows went
        // in the columns it had): it gets the columns it lacks now, which the
        // source's rows fill from here on (older rows NULL in them).
        let skipped: BTreeSet<String> = self
            .log
            .entries
            .iter()
            .filter(|e| super::ddl::skipped_by_policy(e))
            .flat_map(|e| e.tables.iter().cloned())
            .collect();
        let behind: Vec<(String, String)> = self
            .ensured
            .iter()
            .filter(|k| skipped.contains(&show(k)))
            .cloned()
            .collect();
        for k in behind {
            let name = TableName::new(Some(&k.0), &k.1);
            if let Some(r) = self.catalog.table(&name).cloned() {
                self.add_missing_columns(&k, &r).await?;
            }
        }
        Ok(())
    }

    /// Releases and pending DDL settled by the target's checkpoint.
    fn settle_log(&mut self) -> Result<(), SyncError> {
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
        Ok(())
    }

    pub(super) fn state_update(
        &self,
        n: u64,
        position: &Option<Position>,
        snapshot: &Option<SnapshotResume>,
    ) -> Step {
        // The position and snapshot progress (its cursor holds key values of the
        // source) are parameters, never SQL text.
        use render::Val;
        let position = position.as_ref().map(|p| p.to_string());
        let snapshot = snapshot
            .as_ref()
            .map(|s| serde_json::to_string(s).expect("serialise"));
        fn text(v: &Option<String>) -> Val<'_> {
            v.as_deref().map_or(Val::Null, Val::Text)
        }
        let params = Row::of([
            text(&position),
            text(&snapshot),
            Val::Text(&self.job.pipeline.name),
        ]);
        let (now, marks) = match self.dialect {
            Dialect::Postgres => ("now()", ["$1", "$2", "$3"]),
            _ => ("CURRENT_TIMESTAMP(6)", ["?", "?", "?"]),
        };
        Step::Exec {
            sql: format!(
                "UPDATE {} SET checkpoint = {n}, position = {}, snapshot = {}, updated_at = {now} WHERE job = {} AND checkpoint = {}",
                self.state_table(),
                marks[0],
                marks[1],
                marks[2],
                n - 1
            ),
            params,
        }
    }

    /// Run statements and move the state row in one target transaction (after the
    /// checkpoint in flight, if any).
    pub(super) async fn commit(
        &mut self,
        stmts: &[Step],
        position: Option<Position>,
        snapshot: Option<SnapshotResume>,
    ) -> Result<(), SyncError> {
        let (n, position, state, job) = self.next_commit(position, &snapshot).await?;
        let mut res = transact(self.target().await?, n, stmts, state.as_ref(), &job).await;
        if res.is_ok() && self.kafka {
            res = self.move_offsets(n).await;
        }
        finish(self.target().await?, n, res).await?;
        self.committed(n, position, snapshot);
        self.last_checkpoint = Instant::now();
        Ok(())
    }

    /// After the checkpoint in flight: the next checkpoint's number, its resume
    /// position, the state row's move (none for Kafka jobs, which move offsets) and
    /// the job's name.
    async fn next_commit(
        &mut self,
        position: Option<Position>,
        snapshot: &Option<SnapshotResume>,
    ) -> Result<(u64, Option<Position>, Option<Step>, String), SyncError> {
        self.settle().await?;
        let n = self.checkpoint + 1;
        let position = position.or(self.position.clone());
        let state = (!self.kafka).then(|| self.state_update(n, &position, snapshot));
        Ok((n, position, state, self.job.pipeline.name.clone()))
    }

    /// Commit on a task of its own: the engine reads and folds the next checkpoint
    /// meanwhile. Binlog and PostgreSQL sources only (a Kafka commit moves offsets the
    /// engine tracks).
    pub(super) async fn dispatch(
        &mut self,
        stmts: Vec<Step>,
        pending: BTreeMap<(String, String), Pend>,
        bytes: usize,
        position: Option<Position>,
        snapshot: Option<SnapshotResume>,
    ) -> Result<(), SyncError> {
        let (n, position, state, job) = self.next_commit(position, &snapshot).await?;
        let mut t = self.conn.take().ok_or_else(lost)?;
        let task = tokio::spawn(async move {
            let res = transact(&mut t, n, &stmts, state.as_ref(), &job).await;
            let res = finish(&mut t, n, res).await;
            (t, res)
        });
        self.flight = Some(Flight {
            n,
            task,
            pending,
            position,
            snapshot,
            bytes,
        });
        self.last_checkpoint = Instant::now();
        Ok(())
    }

    /// Wait for the checkpoint in flight: done, or applied again the rewrite way
    /// after a unique violation; any other failure stops the job (the target rolled
    /// it back, and a restart reads its changes again).
    pub(super) async fn settle(&mut self) -> Result<(), SyncError> {
        let Some(mut f) = self.flight.take() else {
            return Ok(());
        };
        let (t, res) = (&mut f.task)
            .await
            .map_err(|e| format!("checkpoint {}: its commit stopped: {e}", f.n))?;
        self.conn = Some(t);
        let (position, snapshot) = (f.position.take(), f.snapshot.take());
        match res {
            Ok(()) => {
                self.committed(f.n, position, snapshot);
                Ok(())
            }
            Err(e) if super::write::collided(&e) => {
                tracing::info!(
                    "checkpoint {}: {e}; applying it again with every changed key deleted first",
                    f.n
                );
                // (Boxed: applying commits, which settles first.)
                let mut pending = std::mem::take(&mut f.pending);
                Box::pin(self.apply(&mut pending, &[], true, position, snapshot)).await
            }
            Err(e) if e.kind == ErrorKind::BadValue => {
                // A value the target refused: the row-error policy, then the rest.
                let mut pending = std::mem::take(&mut f.pending);
                // (Boxed: finding the rows uses the target, which settles first.)
                if Box::pin(self.without_refused(&mut pending, f.n, position.as_ref(), &e)).await?
                    == 0
                {
                    return Err(e);
                }
                Box::pin(self.apply(&mut pending, &[], false, position, snapshot)).await
            }
            Err(e) => Err(e),
        }
    }

    /// The target connection, once the checkpoint in flight is settled.
    pub(super) async fn target(&mut self) -> Result<&mut Target, SyncError> {
        self.settle().await?;
        self.conn.as_mut().ok_or_else(lost)
    }

    /// A checkpoint committed: the engine's record of it.
    fn committed(&mut self, n: u64, position: Option<Position>, snapshot: Option<SnapshotResume>) {
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
    }

    pub(super) fn ddl_mark(&self, position: &str) -> String {
        format!(
            "INSERT INTO {STATE_DB}.ddl_applied (job, position) VALUES ({}, {})",
            self.lit(&self.job.pipeline.name),
            self.lit(position)
        )
    }

    /// Whether the target ran the DDL at `position` for this job already.
    pub(super) async fn ddl_applied(&mut self, position: &str) -> Result<bool, SyncError> {
        let sql = format!(
            "SELECT 1 FROM {STATE_DB}.ddl_applied WHERE job = {} AND position = {}",
            self.lit(&self.job.pipeline.name),
            self.lit(position)
        );
        Ok(!self
            .target()
            .await?
            .query(&sql)
            .await
            .map_err(SyncError::from)?
            .is_empty())
    }

    /// Kafka: move each partition's offset in the target, asserting the previous one
    /// (another consumer that took the partition over fences this one off).
    pub(super) async fn move_offsets(&mut self, n: u64) -> Result<(), SyncError> {
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
            let moved = self.target().await?.exec(&sql).await.map_err(|e| {
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
    pub(super) async fn floor(&mut self, topic: &str, part: i32) -> Result<Option<i64>, SyncError> {
        if let Some(f) = self.floors.get(&(topic.to_owned(), part)) {
            return Ok(*f);
        }
        let sql = format!(
            "SELECT CAST(next_offset AS CHAR(20)) FROM {STATE_DB}.kafka_offsets WHERE job = {} AND topic = {} AND part = {part}",
            self.lit(&self.job.pipeline.name),
            self.lit(topic)
        );
        let rows = self
            .target()
            .await?
            .query(&sql)
            .await
            .map_err(SyncError::from)?;
        let f = rows
            .first()
            .and_then(|r| r[0].as_deref())
            .map(|v| v.trim().parse::<i64>())
            .transpose()
            .map_err(|e| format!("kafka_offsets: {e}"))?;
        self.floors.insert((topic.to_owned(), part), f);
        Ok(f)
    }
}

/// No connection: a commit task ended without handing it back.
fn lost() -> SyncError {
    "the target connection was lost with a failed commit".into()
}

/// A checkpoint's transaction up to its commit: `BEGIN`, the statements, and the
/// state row moved from checkpoint `n - 1` to `n` (`state`; Kafka jobs move offsets
/// instead).
async fn transact(
    target: &mut Target,
    n: u64,
    stmts: &[Step],
    state: Option<&Step>,
    job: &str,
) -> Result<(), SyncError> {
    let begin = match target.dialect() {
        Dialect::Postgres => "BEGIN",
        _ => "START TRANSACTION",
    };
    target.exec(begin).await?;
    for (i, s) in stmts.iter().enumerate() {
        if i == 1 {
            failpoint("inside-target-transaction");
        }
        target.run(s).await.map_err(|e| {
            SyncError::from(e)
                .context(format_args!("checkpoint {n}"))
                .with_statement(&s.shape())
        })?;
    }
    let Some(state) = state else {
        return Ok(());
    };
    let moved = target
        .run(state)
        .await
        .map_err(|e| SyncError::from(e).context(format_args!("checkpoint {n}: state table")))?;
    if moved != 1 {
        return Err(SyncError::fenced(format!(
            "checkpoint {n}: the target's state for job `{job}` is no longer at checkpoint {}: another process advanced it; this one stops",
            n - 1
        )));
    }
    Ok(())
}

/// `COMMIT` after `res`, or `ROLLBACK` and its error.
async fn finish(target: &mut Target, n: u64, res: Result<(), SyncError>) -> Result<(), SyncError> {
    if let Err(e) = res {
        let _ = target.exec("ROLLBACK").await;
        return Err(e);
    }
    target
        .exec("COMMIT")
        .await
        .map_err(|e| SyncError::from(e).context(format_args!("checkpoint {n}: commit")))?;
    failpoint("after-target-commit");
    Ok(())
}
