//! The Iceberg tables of a job: loaded or created on first sight, with their key
//! columns and the watermark of this job's last commit.

use super::*;
use crate::sync::error::SyncError;

impl Engine {
    /// The sink of a table, creating the Iceberg table on first sight.
    pub(super) async fn sink(
        &mut self,
        t: &crate::source::decode::SourceTable,
        at: &Position,
    ) -> Result<&mut Sink, SyncError> {
        let routed = self.job.router.route(&t.db, &t.name);
        let key = (ns_of(&routed.db), routed.table.clone());
        if !self.sinks.contains_key(&key) {
            check_namespace(&key.0, &t.db, &t.name)?;
            let id = ident(&key.0, &key.1).map_err(|e| e.to_string())?;
            let table = match self.catalog.load(&id).await.map_err(|e| {
                SyncError::from(e).context(format_args!("loading table {}", display(&id)))
            })? {
                Some(tb) => tb,
                None => {
                    if !self.job.source_logs_referential_actions() {
                        for a in crate::sync::fk::referential_actions(&t.ir) {
                            tracing::warn!("foreign key {a}: the source does not log the rows this action changes, so the Iceberg table will keep them");
                        }
                    }
                    let mut diags = ddl_core::Diagnostics::default();
                    let mut ir = (*t.ir).clone();
                    ir.name = ddl_core::TableName::new(Some(&t.db), &t.name);
                    let mut ir = self.job.router.table(&ir);
                    ir.name = ddl_core::TableName::new(Some(&key.0), &key.1);
                    if self.job.changelog(&key.0, &key.1) {
                        // Append-only: no key; each change is a row with its kind,
                        // position and source time.
                        ir.primary_key = None;
                        for c in &mut ir.columns {
                            c.nullable = true;
                        }
                        for (name, dt) in [
                            (
                                "_op",
                                ddl_core::DataType::Varchar {
                                    length: Some(16),
                                    unit: Default::default(),
                                    national: false,
                                },
                            ),
                            (
                                "_source_pos",
                                ddl_core::DataType::Varchar {
                                    length: Some(200),
                                    unit: Default::default(),
                                    national: false,
                                },
                            ),
                            (
                                "_source_ts",
                                ddl_core::DataType::Timestamp {
                                    precision: 0,
                                    tz: ddl_core::TimeZone::Instant,
                                },
                            ),
                        ] {
                            ir.columns.push(ddl_core::Column::new(name, dt));
                        }
                    }
                    let mut cat = ddl_core::Catalog::new(self.job.source.dialect().name_rules());
                    let create = ddl_core::SchemaChange::CreateTable {
                        table: ir,
                        if_not_exists: false,
                    };
                    cat.apply(&create).map_err(|e| e.to_string())?;
                    self.planner.tables.remove(&key);
                    let mut plan = self
                        .planner
                        .plan(&[create], &cat, &mut diags)
                        .map_err(|e| e.to_string())?;
                    for d in diags.0 {
                        tracing::info!("{}: table {}.{}: {}", d.severity, key.0, key.1, d.message);
                    }
                    mark_schema_position(&mut plan, at);
                    let mut known = BTreeMap::new();
                    // Registered in the catalog with the next checkpoint's state
                    // (or any catalog write before it): a snapshot of many tables
                    // registers them together.
                    let done = crate::iceberg::plan::execute(
                        &Committer::new(&self.catalog).deferring_creations(),
                        &plan,
                        &mut known,
                    )
                    .await?;
                    for a in done {
                        tracing::info!("create: {a}");
                    }
                    self.catalog.load_required(&id).await?
                }
            };
            let sink = self.make_sink(id, table)?;
            self.sinks.insert(key.clone(), sink);
        }
        Ok(self.sinks.get_mut(&key).expect("inserted"))
    }

    /// The sink of an existing Iceberg table, loaded afresh. False: no such table.
    pub(super) async fn load_sink(&mut self, k: &(String, String)) -> Result<bool, SyncError> {
        let id = ident(&k.0, &k.1).map_err(|e| e.to_string())?;
        let Some(t) = self.catalog.load(&id).await.map_err(|e| {
            SyncError::from(e).context(format_args!("loading table {}", display(&id)))
        })?
        else {
            return Ok(false);
        };
        let s = self.make_sink(id, t)?;
        self.sinks.insert(k.clone(), s);
        Ok(true)
    }

    pub(super) fn make_sink(
        &mut self,
        id: iceberg::TableIdent,
        table: LoadedTable,
    ) -> Result<Sink, SyncError> {
        let ice = iconv::ice_table(&id.namespace().join("."), id.name(), &table.metadata)
            .map_err(|e| e.to_string())?;
        if let Some(other) = owner(&table).filter(|j| **j != self.job.pipeline.name) {
            return Err(format!(
                "Iceberg table {}.{} is written by lakeshift job `{other}` (its newest commit): job `{mine}` would apply the same changes to it a second time. Give this job tables of its own (a `route` into another namespace, or another warehouse); or, if `{other}` is this job under its old name, set `pipeline.name: {other}`",
                ice.namespace,
                ice.name,
                mine = self.job.pipeline.name
            )
            .into());
        }
        self.planner
            .tables
            .insert((ice.namespace.clone(), ice.name.clone()), ice.clone());
        std::sync::Arc::make_mut(&mut self.planner.namespaces).insert(ice.namespace.clone());
        let arrow = files::arrow_schema(&table).map_err(|e| e.to_string())?;
        let positions = self.positions();
        // The key: identifier fields, else the job's key override, else full rows.
        let over = self
            .job
            .source
            .key_overrides
            .get(&format!("{}.{}", ice.namespace, ice.name))
            .and_then(|cols| {
                cols.iter()
                    .map(|c| {
                        ice.fields
                            .iter()
                            .position(|f| f.name.eq_ignore_ascii_case(c))
                            .map(|i| (i, ice.fields[i].id))
                    })
                    .collect::<Option<Vec<_>>>()
            });
        let (keyed, (key, key_ids)): (bool, (Vec<usize>, Vec<i32>)) =
            if !ice.identifier_field_ids.is_empty() {
                (
                    true,
                    ice.identifier_field_ids
                        .iter()
                        .map(|id| (ice.fields.iter().position(|f| f.id == *id).unwrap(), *id))
                        .unzip(),
                )
            } else if let Some(o) = over {
                (true, o.into_iter().unzip())
            } else {
                // Full-row identity: every column (position deletes); every column
                // Iceberg allows in an equality delete (equality deletes).
                (
                    false,
                    ice.fields
                        .iter()
                        .enumerate()
                        .filter(|(_, f)| {
                            positions
                                || !matches!(
                                    f.ty,
                                    dialects::iceberg::IceType::Float
                                        | dialects::iceberg::IceType::Double
                                )
                        })
                        .map(|(i, f)| (i, f.id))
                        .unzip(),
                )
            };
        let changelog = self.job.changelog(&ice.namespace, &ice.name);
        let names: Vec<&str> = key.iter().map(|i| ice.fields[*i].name.as_str()).collect();
        tracing::info!(
            "table {}.{}: {}",
            ice.namespace,
            ice.name,
            if changelog {
                "changelog: every change appended with _op, _source_pos, _source_ts".to_owned()
            } else if keyed {
                format!(
                    "upserts on key ({}), {} deletes",
                    names.join(", "),
                    if positions { "position" } else { "equality" }
                )
            } else if positions {
                "no key: updates and deletes are position deletes of whole rows (one of identical rows at a time)".to_owned()
            } else {
                "no key: updates and deletes are full-row equality deletes (identical duplicate rows are removed together)".to_owned()
            }
        );
        let (_, watermark) = self.committed(&table);
        let had_rows = ice.has_rows;
        Ok(Sink {
            ident: id,
            table,
            arrow,
            key,
            key_ids,
            keyed: keyed && !changelog,
            changelog,
            had_rows,
            watermark,
            pending: Pending::new(),
            positions: positions && !changelog,
            index: None,
        })
    }

    /// The job writes position deletes (`sink.delete-mode`).
    pub(super) fn positions(&self) -> bool {
        self.job.sink.iceberg().is_some_and(|s| {
            s.deletes(self.job.source.kafka().is_some()) == crate::sync::job::DeleteMode::Position
        })
    }
}

/// A namespace lakeshift can keep apart from table names: no dot. (Iceberg reads a
/// dot as a nested namespace, and the job's state names tables `ns.table`, so a
/// database `a.b` with table `c` and a database `a` with table `b.c` would meet.)
pub(super) fn check_namespace(ns: &str, db: &str, table: &str) -> Result<(), SyncError> {
    if ns.contains('.') || ns.is_empty() {
        return Err(format!(
            "{db}.{table}: its namespace `{ns}` {}; route it to a name without dots, e.g.\n  route:\n    - source-table: '{}\\.(.*)'\n      sink-table: {}.${{1}}",
            if ns.is_empty() { "is empty" } else { "holds a dot, which Iceberg reads as nested namespaces and lakeshift's state cannot tell from a dot in a table name" },
            regex::escape(db),
            if ns.is_empty() { "default".to_owned() } else { ns.replace('.', "_") }
        )
        .into());
    }
    Ok(())
}

/// The lakeshift job whose commit is the table's newest (None: no job wrote it).
fn owner(t: &LoadedTable) -> Option<&String> {
    t.metadata
        .snapshots()
        .filter_map(|s| {
            s.summary()
                .additional_properties
                .get(super::JOB)
                .map(|j| (s.sequence_number(), j))
        })
        .max_by_key(|(seq, _)| *seq)
        .map(|(_, j)| j)
}
