//! `ADD COLUMN ... DEFAULT v` on a table that holds rows: at the source every existing
//! row reads `v`; an Iceberg v2 table (what the sink writes) has no `initial-default`,
//! so its older rows would read NULL. `pipeline.added-column-default` decides:
//! `rewrite` (the default, exact) rewrites the table's rows with the value in one
//! overwrite snapshot right after the schema change, before any later row lands;
//! `null` keeps NULL with a warning; `fail` refuses the DDL (the DDL error policy
//! then applies).
//!
//! Crash safety: a marker `state/fill/<ns.table>.json` is written before the schema
//! change and removed after the rewrite's commit. A run that finds a marker whose
//! column the table has rewrites before it reads anything (no row committed after
//! the DDL exists yet, so every NULL there is an older row's); a marker whose column
//! the table lacks is dropped (the DDL comes again from the source).

use super::*;
use crate::sync::error::SyncError;
use arrow_array::{Array, ArrayRef, StringArray};
use ddl_core::{DefaultValue, Literal, SchemaChange};
use serde::{Deserialize, Serialize};

/// What `added-column-default` says to do.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum AddedDefault {
    /// Rewrite the table's rows with the default (exact).
    #[default]
    Rewrite,
    /// Older rows read NULL (a warning says so).
    Null,
    /// Refuse the DDL (the DDL error policy applies).
    Fail,
}

/// Columns a table's rows get filled with: (column name, the default as text).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Fill {
    pub table: (String, String),
    pub columns: Vec<(String, String)>,
    /// The DDL's position: the fill's snapshot holds the rows as of the table's
    /// watermark under the schema as of this point (its summary says so, as
    /// `lakeshift.schema-position`).
    #[serde(default)]
    pub at: Option<Position>,
    /// The filled columns whose default is a byte string: their text is its hex.
    #[serde(default)]
    pub bytes: Vec<String>,
}

/// The fill snapshot's summary key: the source position of the schema it was
/// written with (after its watermark: the DDL that added the filled columns).
pub const SCHEMA_AT: &str = "lakeshift.schema-position";

/// A default as text Arrow can cast to the column's type; None: not a constant.
fn default_text(d: &DefaultValue) -> Option<Option<String>> {
    match d {
        DefaultValue::Literal { value } => Some(match value {
            Literal::Null => None,
            Literal::Boolean(b) => Some(b.to_string()),
            Literal::Number(n) | Literal::String(n) | Literal::Bytes(n) => Some(n.clone()),
        }),
        _ => None,
    }
}

/// A filled column's default as a one-value array of its Arrow type: `text` as
/// [`default_text`] made it (`hex`: a byte string's hex digits).
fn default_array(text: &str, hex: bool, ty: &arrow_schema::DataType) -> Result<ArrayRef, String> {
    use arrow_schema::DataType as A;
    let bytes = if hex {
        Some(ddl_core::schema::bytes_from_hex(text).ok_or("not hex digits")?)
    } else if *ty == A::FixedSizeBinary(16) {
        // A uuid (Arrow casts no text to it).
        Some(
            uuid::Uuid::parse_str(text.trim())
                .map_err(|e| format!("{text:?} is not a UUID: {e}"))?
                .as_bytes()
                .to_vec(),
        )
    } else {
        None
    };
    let from: ArrayRef = match bytes {
        Some(b) => Arc::new(arrow_array::BinaryArray::from(vec![b.as_slice()])),
        None => Arc::new(StringArray::from(vec![text])),
    };
    arrow_cast::cast::cast_with_options(
        &from,
        ty,
        &arrow_cast::cast::CastOptions {
            safe: false,
            ..Default::default()
        },
    )
    .map_err(|e| e.to_string())
}

/// A default that is not a constant, as a reader knows it (a function of the moment
/// or the row, `CURRENT_TIMESTAMP`, `uuid()`, or a sequence's next value); None for a
/// constant or NULL. The rows a table held when such a column was added got values
/// no change event carries.
pub(crate) fn non_constant(d: &DefaultValue) -> Option<String> {
    Some(match d {
        DefaultValue::Literal { .. } => return None,
        DefaultValue::Raw { text, .. } => format!("`{text}`"),
        DefaultValue::CurrentTimestamp { .. } => "CURRENT_TIMESTAMP".into(),
        DefaultValue::CurrentDate => "CURRENT_DATE".into(),
        DefaultValue::CurrentTime => "CURRENT_TIME".into(),
        DefaultValue::NextVal { sequence } => format!("the next value of sequence {sequence}"),
    })
}

impl Engine {
    fn fill_path(&self, t: &(String, String)) -> PathBuf {
        self.state_dir
            .join("fill")
            .join(format!("{}.json", crate::segment::table(t)))
    }

    /// The fills a DDL needs (added columns with a non-NULL default, on tables that
    /// hold rows), or the reason it cannot be done exactly.
    pub(super) fn fills_for(&self, changes: &[SchemaChange]) -> Result<Vec<Fill>, String> {
        let mut out: Vec<Fill> = Vec::new();
        for c in changes {
            let SchemaChange::AddColumn { table, column, .. } = c else {
                continue;
            };
            if column.default.is_none() && column.generated.is_none() {
                continue;
            }
            let k = (
                ns_of(table.schema.as_deref().unwrap_or_default()),
                table.name.clone(),
            );
            let has_rows = self
                .sinks
                .get(&k)
                .is_some_and(|s| s.table.metadata.current_snapshot().is_some());
            if !has_rows || self.job.changelog(&k.0, &k.1) {
                continue;
            }
            if let Some(g) = &column.generated {
                return Err(generated_refused(
                    &format!("{}.{}", k.0, k.1),
                    &column.name,
                    g,
                ));
            }
            let Some(d) = &column.default else {
                continue;
            };
            let text = match default_text(d) {
                Some(None) => continue, // DEFAULT NULL: NULL is right
                Some(Some(t)) => t,
                None => {
                    return Err(format!(
                        "column {} of {}.{} is added with a default that is not a constant ({}); the rows already in the table would need the value the source gave them, which lakeshift cannot know (added-column-default: null accepts NULL for them)",
                        column.name, k.0, k.1, non_constant(d).unwrap_or_default()
                    ))
                }
            };
            let i = match out.iter().position(|f| f.table == k) {
                Some(i) => i,
                None => {
                    out.push(Fill {
                        table: k,
                        columns: Vec::new(),
                        at: None,
                        bytes: Vec::new(),
                    });
                    out.len() - 1
                }
            };
            out[i].columns.push((column.name.clone(), text));
            if let DefaultValue::Literal {
                value: Literal::Bytes(_),
            } = d
            {
                out[i].bytes.push(column.name.clone());
            }
        }
        Ok(out)
    }

    /// Why a fill cannot be done: a default that does not convert to its column's
    /// Iceberg type (`bit(64) DEFAULT b'111...'`, bytes that are not UTF-8 in a text
    /// column), found before anything is written, so the DDL error policy decides
    /// (the fill would stop the job after the schema change).
    pub(super) fn fills_refused(
        &self,
        plan: &dialects::iceberg::StatementPlan,
        fills: &[Fill],
    ) -> Option<String> {
        for f in fills {
            let table = format!("{}.{}", f.table.0, f.table.1);
            for (c, text) in &f.columns {
                let Some(ty) = plan.actions.iter().find_map(|a| match a {
                    dialects::iceberg::Action::AddColumn {
                        table: t, field, ..
                    } if *t == table && field.name.eq_ignore_ascii_case(c) => {
                        Some(field.ty.clone())
                    }
                    _ => None,
                }) else {
                    continue;
                };
                let ice = iceberg::spec::Type::Primitive(crate::iceberg::convert::primitive(&ty));
                let Ok(arrow) = iceberg::arrow::type_to_arrow_type(&ice) else {
                    continue;
                };
                if let Err(e) = default_array(text, f.bytes.contains(c), &arrow) {
                    return Some(format!(
                        "column {c} of {table} is added with a default that does not convert to its Iceberg type {ty} ({e}), so the rows the table holds cannot be given it (added-column-default: null accepts NULL for them)"
                    ));
                }
            }
        }
        None
    }

    /// Durably note the fills before the schema change.
    pub(super) fn mark_fills(&self, fills: &[Fill]) -> Result<(), SyncError> {
        for f in fills {
            let p = self.fill_path(&f.table);
            if let Some(d) = p.parent() {
                std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
            }
            let bytes = serde_json::to_vec(f).map_err(|e| e.to_string())?;
            crate::durable::replace(&p, &bytes).map_err(|e| format!("{}: {e}", p.display()))?;
        }
        Ok(())
    }

    /// Fills noted by an earlier run: done now (before any row is read), or dropped
    /// when the table does not have the column (the DDL did not land).
    pub(super) async fn finish_fills(&mut self) -> Result<(), SyncError> {
        let dir = self.state_dir.join("fill");
        let Ok(rd) = std::fs::read_dir(&dir) else {
            return Ok(());
        };
        for e in rd.flatten() {
            let bytes =
                std::fs::read(e.path()).map_err(|x| format!("{}: {x}", e.path().display()))?;
            let f: Fill = serde_json::from_slice(&bytes)
                .map_err(|x| format!("{}: {x}", e.path().display()))?;
            if !self.sinks.contains_key(&f.table) {
                self.load_sink(&f.table).await?;
            }
            let landed = self.sinks.get(&f.table).is_some_and(|s| {
                f.columns.iter().all(|(c, _)| {
                    s.arrow
                        .fields()
                        .iter()
                        .any(|x| x.name().eq_ignore_ascii_case(c))
                })
            });
            if landed {
                tracing::info!(
                    "{}.{}: finishing the fill of added column(s) with their defaults, begun before a restart",
                    f.table.0,
                    f.table.1
                );
                self.fill(&f).await?;
            } else {
                let _ = std::fs::remove_file(e.path());
            }
        }
        Ok(())
    }

    /// Rewrite a table's rows with the added columns' defaults where they are NULL
    /// (every row there is older than the column), in one overwrite snapshot.
    pub(super) async fn fill(&mut self, f: &Fill) -> Result<(), SyncError> {
        let t0 = Instant::now();
        let k = &f.table;
        let id = ident(&k.0, &k.1)?;
        let table = self
            .catalog
            .load(&id)
            .await
            .map_err(|e| {
                SyncError::from(e).context(format_args!("loading table {}", display(&id)))
            })?
            .ok_or_else(|| format!("table {} is gone", display(&id)))?;
        let arrow = files::arrow_schema(&table).map_err(|e| e.to_string())?;
        // Each filled column's default, cast once to its Arrow type.
        let mut defaults: Vec<(usize, ArrayRef)> = Vec::new();
        for (c, text) in &f.columns {
            let i = arrow
                .fields()
                .iter()
                .position(|x| x.name().eq_ignore_ascii_case(c))
                .ok_or_else(|| format!("{}: no column {c} after the DDL", display(&id)))?;
            let v = default_array(text, f.bytes.contains(c), arrow.field(i).data_type()).map_err(
                |e| {
                    format!(
                        "{}: the default of column {c} does not convert to its Iceberg type: {e}",
                        display(&id)
                    )
                },
            )?;
            defaults.push((i, v));
        }
        let filling = format!("filling the added column(s) of {}", display(&id));
        let scan = table
            .table(&self.catalog.file_io)
            .map_err(|e| SyncError::caused(&filling, &e))?
            .scan()
            .with_concurrency_limit(1)
            .build()
            .map_err(|e| SyncError::caused(&filling, &e))?;
        let tasks: Vec<_> = futures::TryStreamExt::try_collect(
            scan.plan_files()
                .await
                .map_err(|e| SyncError::caused(&filling, &e))?,
        )
        .await
        .map_err(|e| SyncError::caused(&filling, &e))?;
        let mut stream = crate::iceberg::read::read_tasks(&self.catalog.file_io, tasks)
            .await
            .map_err(|e| SyncError::caused(&filling, &e))?;
        let (mut data, mut chunk, mut bytes, mut rows) = (Vec::new(), Vec::new(), 0usize, 0u64);
        let budget = (self.job.pipeline.pending_budget() / 2).max(1 << 20);
        let what = display(&id);
        while let Some(b) =
            crate::iceberg::stall::next_batch(&mut stream, crate::iceberg::stall::READ_STALL, &what)
                .await
                .map_err(|e| SyncError::caused(&filling, &e))?
        {
            let b = filled(&b, &arrow, &defaults).map_err(|e| e.context(&filling))?;
            rows += b.num_rows() as u64;
            bytes += b.get_array_memory_size();
            chunk.push(b);
            if bytes >= budget {
                data.extend(
                    files::write_data(&table, &self.catalog.file_io, &std::mem::take(&mut chunk))
                        .await
                        .map_err(|e| SyncError::caused(&filling, &e))?,
                );
                bytes = 0;
            }
        }
        if !chunk.is_empty() {
            data.extend(
                files::write_data(&table, &self.catalog.file_io, &chunk)
                    .await
                    .map_err(|e| SyncError::caused(&filling, &e))?,
            );
        }
        let wm = self.sinks.get(k).and_then(|s| s.watermark.clone());
        let mut summary = self.summary(self.state.checkpoint, &wm);
        if let Some(at) = &f.at {
            summary.insert(SCHEMA_AT.to_owned(), at.to_string());
        }
        Committer::new(&self.catalog)
            .commit(
                &id,
                &uuid::Uuid::new_v4().to_string(),
                &Change::Snapshot(SnapshotChange {
                    data_files: data,
                    truncate: true,
                    summary,
                    ..Default::default()
                }),
            )
            .await
            .map_err(|e| SyncError::from(e).context(&filling))?;
        failpoint("after-fill-commit");
        let _ = std::fs::remove_file(self.fill_path(k));
        // The sink reads the table as it is now.
        self.sinks.remove(k);
        self.load_sink(k).await?;
        let names: Vec<&str> = f.columns.iter().map(|(c, _)| c.as_str()).collect();
        tracing::info!(
            "{}: {rows} row(s) rewritten with the default of added column(s) {} in {:.0} ms (added-column-default: rewrite)",
            display(&id),
            names.join(", "),
            t0.elapsed().as_secs_f64() * 1e3
        );
        Ok(())
    }
}

/// A scanned batch in the table's Arrow schema (columns the reader left out are
/// NULL, narrower ones cast), with the defaults where the filled columns are NULL.
fn filled(
    b: &RecordBatch,
    arrow: &arrow_schema::SchemaRef,
    defaults: &[(usize, ArrayRef)],
) -> Result<RecordBatch, SyncError> {
    let n = b.num_rows();
    let mut cols: Vec<ArrayRef> = Vec::with_capacity(arrow.fields().len());
    for f in arrow.fields() {
        let c = match b.schema().index_of(f.name()) {
            // (A column widened since the older files were written reads in its
            // older type: cast to the table's.)
            Ok(i) if b.column(i).data_type() != f.data_type() => {
                arrow_cast::cast(b.column(i), f.data_type())
                    .map_err(|e| format!("column {}: {e}", f.name()))?
            }
            Ok(i) => b.column(i).clone(),
            Err(_) => arrow_array::new_null_array(f.data_type(), n),
        };
        cols.push(c);
    }
    for (i, v) in defaults {
        let c = &cols[*i];
        if c.null_count() == 0 {
            continue;
        }
        let idx = arrow_array::UInt32Array::from(vec![0u32; n]);
        let dflt = arrow_select::take::take(v.as_ref(), &idx, None).map_err(|e| e.to_string())?;
        let present =
            arrow_array::BooleanArray::from((0..n).map(|r| c.is_valid(r)).collect::<Vec<_>>());
        cols[*i] = arrow_select::zip::zip(&present, c, &dflt).map_err(|e| e.to_string())?;
    }
    Ok(RecordBatch::try_new(arrow.clone(), cols).map_err(|e| e.to_string())?)
}

/// Why a generated column added to a table holding rows cannot be given its older
/// rows' values: the source computes them, and no change event carries them.
pub fn generated_refused(table: &str, column: &str, g: &ddl_core::Generated) -> String {
    format!(
        "column {column} of {table} is added as generated ({}: {}); the rows already in the table would need the value the source computes for each, which no change event carries (added-column-default: null accepts NULL for them; re-snapshot the table for the values: drop the target table and restart the job)",
        if g.stored { "STORED" } else { "VIRTUAL" },
        g.expr
    )
}
