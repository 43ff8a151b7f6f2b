//! Target tables: created from the source's definitions (routed, translated), and
//! as the sink writes them (columns, key).

use super::*;
use crate::sync::error::SyncError;

/// The tables a run made before its job committed anything (one `["db","table"]`
/// a line, in the state folder).
const UNMADE: &str = "unmade-tables.jsonl";

impl RdbEngine {
    pub(super) fn routed_ir(&self, t: &Table) -> Table {
        let mut r = self.with_fks(t);
        if self.cfg.foreign_keys == ForeignKeys::Drop || self.deferred_fks() {
            r.foreign_keys.clear();
        }
        r
    }

    /// A source table definition under target names, its foreign keys included.
    /// When the source's stream holds the rows a foreign key's actions change
    /// (PostgreSQL), the target's keys take no action: those rows arrive as changes
    /// of their own, and a key that acted too would delete rows the sink writes
    /// again (a unique value swapped within a checkpoint is written by deleting
    /// every changed key first).
    pub(super) fn with_fks(&self, t: &Table) -> Table {
        let mut r = self.job.router.table(t);
        self.target_actions(&mut r.foreign_keys);
        r
    }

    /// Foreign keys as the target takes them (see [`Self::with_fks`]).
    pub(super) fn target_actions(&self, fks: &mut [ddl_core::ForeignKey]) {
        if self.job.source_logs_referential_actions() {
            for fk in fks {
                fk.on_delete = None;
                fk.on_update = None;
            }
        }
    }

    /// Remember a target table's definition.
    pub(super) fn know(&mut self, t: Table) {
        let k = key_of(&t.name);
        self.catalog.tables.remove(&t.name);
        let _ = self.catalog.apply(&SchemaChange::CreateTable {
            table: t,
            if_not_exists: false,
        });
        self.tables.remove(&k);
    }

    pub(super) fn emitter_ctx_ident(&self, name: &str) -> String {
        let cat = Catalog::new(self.source_dialect.name_rules());
        let mut d = ddl_core::Diagnostics::default();
        let mut cx = EmitCtx {
            source: self.source_dialect,
            before: &cat,
            after: &cat,
            diags: &mut d,
        };
        Emitter::new(self.dialect).ident(&mut cx, name)
    }

    /// The writer's view of a known target table.
    pub(super) fn ttable(&mut self, k: &(String, String)) -> Result<&TTable, SyncError> {
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
                        // (A varying one without a length is no BIT(n) but its
                        // digits' text on a MySQL target.)
                        ddl_core::DataType::Bit { length, varying } => match (length, varying) {
                            (None, true) => None,
                            _ => Some(length.unwrap_or(1)),
                        },
                        _ => None,
                    },
                    boolean: c.data_type == ddl_core::DataType::Boolean,
                    uuid: c.data_type == ddl_core::DataType::Uuid,
                    array: match self.dialect {
                        dialects::Dialect::Postgres => None,
                        _ => super::render::Element::of_array(&c.data_type),
                    },
                    geometry: match self.dialect {
                        dialects::Dialect::MySql => super::render::Geometric::of(&c.data_type),
                        _ => None,
                    },
                    computed: c
                        .generated
                        .as_ref()
                        .is_some_and(|g| g.dialect == self.dialect.name()),
                })
                .collect();
            let names: Vec<String> = t.columns.iter().map(|c| c.name.to_lowercase()).collect();
            let key = t
                .primary_key
                .as_ref()
                .map(|pk| pk.columns.clone())
                .or_else(|| self.job.source.key_overrides.get(&show(k)).cloned())
                .unwrap_or_default()
                .iter()
                .filter_map(|c| names.iter().position(|n| *n == c.to_lowercase()))
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
    pub(super) async fn table_for(
        &mut self,
        t: &crate::source::decode::SourceTable,
    ) -> Result<((String, String), Routed), SyncError> {
        let routed = self.job.router.route(&t.db, &t.name);
        let k = (routed.db.clone(), routed.table.clone());
        let name = TableName::new(Some(&k.0), &k.1);
        if self.catalog.table(&name).is_none() {
            let mut ir = (*t.ir).clone();
            ir.name = TableName::new(Some(&t.db), &t.name);
            let with_fks = self.with_fks(&ir);
            self.warn_actions(&with_fks);
            self.note_actions(&with_fks);
            let r = self.routed_ir(&ir);
            self.create(&k, &r).await?;
            tracing::info!("table {}: created on the target (if absent)", show(&k));
            self.know(r);
            self.ensured.insert(k.clone());
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
            // (A column a DDL skipped by the policy left out is no disagreement:
            // rows go in the columns the table has.)
            if let Some(c) = mine.iter().find(|c| {
                !have.contains(c) && !self.skipped_columns.contains(&(k.clone(), (*c).clone()))
            }) {
                return Err(format!(
                    "{}.{} routes to {} which lacks its column {c} (target columns: {}; its own: {}): tables routed into one target must agree",
                    t.db,
                    t.name,
                    show(&k),
                    have.join(", "),
                    mine.join(", ")
                ).into());
            }
            if !self.ensured.contains(&k) {
                self.create_known(t, &k).await?;
            }
        }
        Ok((k, routed))
    }

    /// Create target table `k` as `r` (routed) if absent, its namespace too.
    async fn create(&mut self, k: &(String, String), r: &Table) -> Result<(), SyncError> {
        let sql = self.translate(
            &[SchemaChange::CreateTable {
                table: r.clone(),
                if_not_exists: true,
            }],
            std::slice::from_ref(r),
        )?;
        self.ensure_namespace(&k.0).await?;
        // Before anything is committed, the tables this run makes are noted: if its
        // first commit is lost, the run that starts over drops them (`drop_unmade`).
        let noted = self.checkpoint == 0
            && self
                .target()
                .await?
                .columns(&k.0, &k.1)
                .await
                .map_err(SyncError::from)?
                .is_none();
        if noted {
            let line = serde_json::to_string(k).expect("a pair of strings");
            crate::durable::append_line(&self.state_dir.join(UNMADE), &line)
                .map_err(|e| format!("state folder: {UNMADE}: {e}"))?;
        }
        self.exec_all(&sql.0, "creating", k).await?;
        self.add_missing_columns(k, r).await
    }

    /// A run that starts over (its job committed nothing: an earlier run's first
    /// commit was lost, its target crashing say) drops the tables that earlier run
    /// made: they hold nothing committed, and the new snapshot makes again those the
    /// source still has (one dropped at the source meanwhile would stay behind).
    /// Once something is committed, the note goes.
    pub(super) async fn drop_unmade(&mut self) -> Result<(), SyncError> {
        let path = self.state_dir.join(UNMADE);
        let Ok(text) = std::fs::read_to_string(&path) else {
            return Ok(());
        };
        if self.checkpoint == 0 {
            let tables: BTreeSet<(String, String)> = text
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect();
            if self.dialect != Dialect::Postgres && !tables.is_empty() {
                // (The tables may refer to each other.)
                self.target()
                    .await?
                    .exec("SET SESSION foreign_key_checks = 0")
                    .await
                    .map_err(SyncError::from)?;
            }
            for k in &tables {
                let name = format!(
                    "{}.{}",
                    self.emitter_ctx_ident(&k.0),
                    self.emitter_ctx_ident(&k.1)
                );
                let sql = match self.dialect {
                    Dialect::Postgres => format!("DROP TABLE IF EXISTS {name} CASCADE"),
                    _ => format!("DROP TABLE IF EXISTS {name}"),
                };
                self.exec_all(&[sql], "dropping", k).await?;
                tracing::info!(
                    "table {}: made by an earlier run whose first commit was lost: dropped (the snapshot makes again the tables the source has)",
                    show(k)
                );
            }
            if self.dialect != Dialect::Postgres && !tables.is_empty() {
                self.target()
                    .await?
                    .exec("SET SESSION foreign_key_checks = 1")
                    .await
                    .map_err(SyncError::from)?;
            }
        }
        std::fs::remove_file(&path).map_err(|e| format!("state folder: {UNMADE}: {e}"))?;
        Ok(())
    }

    /// Run `statements` on the target; an error names what they were `doing` to `k`.
    async fn exec_all(
        &mut self,
        statements: &[String],
        doing: &str,
        k: &(String, String),
    ) -> Result<(), SyncError> {
        for s in statements {
            self.target().await?.exec(s).await.map_err(|e| {
                // A type of the source's own (a PostgreSQL composite type) the
                // target lacks: what to do about it.
                let missing_type = e.message.contains("SQLSTATE 42704")
                    && e.message.contains("type \"");
                let e = SyncError::from(e)
                    .context(format_args!("{doing} {}", show(k)))
                    .with_statement(s);
                match missing_type {
                    true => SyncError::new(
                        crate::sync::error::ErrorKind::NeedsFix,
                        format!(
                            "{e}\nthe target lacks a type of the source's own (a composite type, which the job does not make): make it on the target under the name the statement above uses (CREATE TYPE ...), or leave the table out of source.tables; then run the job again"
                        ),
                    ),
                    false => e,
                }
            })?;
        }
        Ok(())
    }

    /// A target table that was there already (made by a run that committed nothing,
    /// from the source's definition before a column was added): the columns it lacks
    /// are added, or the first write names a column it does not have.
    pub(super) async fn add_missing_columns(
        &mut self,
        k: &(String, String),
        r: &Table,
    ) -> Result<(), SyncError> {
        let Some(have) = self.target_columns(k).await? else {
            return Ok(());
        };
        let missing: Vec<SchemaChange> = r
            .columns
            .iter()
            .filter(|c| !have.contains(&c.name.to_lowercase()))
            .map(|c| SchemaChange::AddColumn {
                table: r.name.clone(),
                column: c.clone(),
                position: None,
            })
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        tracing::warn!(
            "table {}: on the target already, without {} of its {} column(s) (made by an earlier run from an older definition): adding them",
            show(k),
            missing.len(),
            r.columns.len()
        );
        let sql = self.translate(&missing, std::slice::from_ref(r))?;
        self.exec_all(&sql.0, "adding columns to", k).await
    }

    /// The target's table `k`'s columns (lower case), or None: it has no such table.
    pub(super) async fn target_columns(
        &mut self,
        k: &(String, String),
    ) -> Result<Option<Vec<String>>, SyncError> {
        self.target()
            .await?
            .columns(&k.0, &k.1)
            .await
            .map_err(SyncError::from)
    }

    /// A table known from the source's history at the resume point that the target
    /// does not hold (`find_known_tables`), first seen in this run: created.
    async fn create_known(
        &mut self,
        t: &crate::source::decode::SourceTable,
        k: &(String, String),
    ) -> Result<(), SyncError> {
        tracing::info!(
            "table {}: known from the source's history but not on the target (the run before stopped before it reached the table): creating it",
            show(k)
        );
        let name = TableName::new(Some(&k.0), &k.1);
        let known = self.catalog.table(&name).cloned().expect("known");
        self.create(k, &known).await?;
        self.ensured.insert(k.clone());
        // Its foreign keys too (PostgreSQL with `keep`; those there already stay).
        let mut ir = (*t.ir).clone();
        ir.name = TableName::new(Some(&t.db), &t.name);
        let with_fks = self.with_fks(&ir);
        self.queue_fks(&with_fks);
        self.add_ready_fks().await
    }

    pub(super) async fn ensure_namespace(&mut self, db: &str) -> Result<(), SyncError> {
        let id = self.emitter_ctx_ident(db);
        let sql = match self.dialect {
            Dialect::Postgres => format!("CREATE SCHEMA IF NOT EXISTS {id}"),
            // Text of any source fits whatever the server's default charset is.
            _ => format!(
                "CREATE DATABASE IF NOT EXISTS {id} CHARACTER SET utf8mb4 COLLATE {}",
                self.text_collation
            ),
        };
        self.target()
            .await?
            .exec(&sql)
            .await
            .map(|_| ())
            .map_err(|e| SyncError::from(e).context(&sql))
    }

    /// On a MySQL/MariaDB target, a created table that names no character set gets
    /// utf8mb4 with a binary collation, NO PAD where the server has one (keys that
    /// differ only in case, accents or trailing spaces, distinct in the source, stay
    /// distinct), so a server whose default is latin1
    /// neither refuses nor mangles 4-byte or non-Latin text. The emitter writes
    /// them as it writes any MySQL table option.
    fn utf8mb4<'c>(&self, changes: &'c [SchemaChange]) -> std::borrow::Cow<'c, [SchemaChange]> {
        let lacks = |c: &SchemaChange| matches!(c, SchemaChange::CreateTable { table, .. } if !table.options.contains_key("charset"));
        if self.dialect == Dialect::Postgres || !changes.iter().any(lacks) {
            return changes.into();
        }
        changes
            .iter()
            .map(|c| match c {
                SchemaChange::CreateTable {
                    table,
                    if_not_exists,
                } if lacks(c) => {
                    let mut table = table.clone();
                    for (k, v) in [("charset", "utf8mb4"), ("collate", &*self.text_collation)] {
                        table
                            .options
                            .insert(k.to_owned(), ddl_core::DialectSql::new("mysql", v));
                    }
                    SchemaChange::CreateTable {
                        table,
                        if_not_exists: *if_not_exists,
                    }
                }
                c => c.clone(),
            })
            .collect()
    }

    /// Translate routed IR changes into target statements. Err: the reason it cannot.
    pub(super) fn translate(
        &self,
        changes: &[SchemaChange],
        after_tables: &[Table],
    ) -> Result<(Vec<String>, Vec<String>), SyncError> {
        let changes_utf8mb4 = self.utf8mb4(changes);
        let changes: &[SchemaChange] = &changes_utf8mb4;
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
            source: self.source_dialect,
            before: &before,
            after: &after,
            diags: &mut diags,
        };
        let out = Emitter::new(self.dialect).emit(changes, &mut cx);
        let mut notes = Vec::new();
        for d in diags.0 {
            if d.severity == ddl_core::Severity::Error {
                return Err(format!("cannot translate: {}", d.message).into());
            }
            notes.push(format!("{}: {}", d.severity, d.message));
        }
        Ok((out, notes))
    }
}
