//! The stateful translator: statements are parsed, expanded against the catalog,
//! applied to it, and emitted, in order. ALTERs see every earlier statement's effect.

use crate::emit::{EmitCtx, Emitter};
use crate::iceberg::{IcebergPlanner, StatementPlan};
use crate::parse::{ParseOptions, Parsed, StatementParser};
use crate::Dialect;
use ddl_core::{Catalog, Diagnostic, Diagnostics, SchemaChange, Severity};
use grammar::split::{split, Positions};

/// Where a translation goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Sql(Dialect),
    /// The neutral IR as JSON.
    Ir,
    /// Planned Iceberg metadata actions as JSON (see [`crate::iceberg`]).
    Iceberg,
}

/// The result of one source statement.
#[derive(Debug, Clone)]
pub struct StatementResult {
    /// 1-based line and column of the statement in its input.
    pub line: usize,
    pub column: usize,
    /// Target statements, without terminators.
    pub output: Vec<String>,
    /// The IR changes the statement became.
    pub changes: Vec<SchemaChange>,
    /// Diagnostics with their own positions (errors point inside the statement).
    pub diagnostics: Vec<(usize, usize, Diagnostic)>,
    /// With the Iceberg target: the statement's plan.
    pub plan: Option<StatementPlan>,
    /// The tables the statement reads or changes (as the catalog names them), known
    /// once it parsed, whether or not it then applied.
    pub tables: Vec<ddl_core::TableName>,
}

impl StatementResult {
    pub fn failed(&self) -> bool {
        self.diagnostics
            .iter()
            .any(|(_, _, d)| d.severity == Severity::Error)
    }
}

pub struct Translator {
    pub source: Dialect,
    pub target: Target,
    pub options: ParseOptions,
    pub catalog: Catalog,
    pub default_schema: Option<String>,
    /// The Iceberg planner (used with [`Target::Iceberg`]).
    pub iceberg: IcebergPlanner,
}

impl Translator {
    pub fn new(source: Dialect, target: Target) -> Self {
        Translator {
            source,
            target,
            options: ParseOptions::default(),
            catalog: Catalog::new(source.name_rules()),
            default_schema: None,
            iceberg: IcebergPlanner::default(),
        }
    }

    /// Apply a script to the catalog without emitting (`--schema FILE`). Returns the
    /// statements that failed.
    pub fn seed(&mut self, text: &str) -> Vec<StatementResult> {
        let r = self.run(text, false);
        self.default_schema = None;
        // Seeded tables exist in the target already and may hold rows.
        for t in self.iceberg.tables.values_mut() {
            t.has_rows = true;
        }
        r.into_iter().filter(StatementResult::failed).collect()
    }

    /// Translate a whole script. Every statement is attempted, whatever failed before.
    pub fn translate(&mut self, text: &str) -> Vec<StatementResult> {
        self.run(text, true)
    }

    fn run(&mut self, text: &str, emit: bool) -> Vec<StatementResult> {
        let mut positions = Positions::new(text);
        split(self.source.flavor(), text)
            .into_iter()
            .map(|st| {
                let o = self.statement(&st.text, emit);
                let diagnostics = o
                    .diagnostics
                    .into_iter()
                    .map(|(at, d)| {
                        let (line, column) = match at {
                            At::Statement => (st.line, st.column),
                            At::Offset(k) => positions.at(st.offset + k),
                        };
                        (line, column, d)
                    })
                    .collect();
                StatementResult {
                    line: st.line,
                    column: st.column,
                    output: o.output,
                    changes: o.changes,
                    diagnostics,
                    plan: o.plan,
                    tables: o.tables,
                }
            })
            .collect()
    }

    /// Translate one statement; with `emit` false, only apply it to the catalog.
    fn statement(&mut self, text: &str, emit: bool) -> Outcome {
        let mut diags = Diagnostics::default();
        let mut o = Outcome::default();
        let parsed = StatementParser {
            dialect: self.source,
            options: self.options,
            catalog: &self.catalog,
            default_schema: self.default_schema.as_deref(),
            diags: &mut diags,
        }
        .parse(text);
        let requests = match parsed {
            Err(e) => {
                o.diagnostics
                    .push((At::Offset(e.offset), Diagnostic::error(e.message)));
                return o.with(diags);
            }
            Ok(Parsed::Skipped(why)) => {
                diags.skip(why);
                return o.with(diags);
            }
            Ok(Parsed::UseSchema(s)) => {
                if emit {
                    self.use_schema(text, &s, &mut o, &mut diags);
                }
                self.default_schema = Some(s);
                return o.with(diags);
            }
            Ok(Parsed::Requests(r)) => r,
        };
        // Expand and apply in order, on a copy of the tables the statement touches: a
        // statement is all or nothing, and the copy costs nothing per other table.
        let scoped = self.catalog.touched(&requests);
        o.tables = scoped.clone();
        let before = self.catalog.scope(&scoped);
        let mut after = before.clone();
        let mut changes = Vec::new();
        for req in requests {
            let applied = after.expand(req).and_then(|expanded| {
                for c in expanded {
                    after.apply(&c)?;
                    changes.push(c);
                }
                Ok(())
            });
            if let Err(e) = applied {
                o.diagnostics
                    .push((At::Statement, Diagnostic::error(e.to_string())));
                return o.with(diags);
            }
        }
        if changes.is_empty() && diags.0.is_empty() {
            diags.skip("statement changes nothing");
        }
        if self.target == Target::Iceberg {
            // Planned even when only seeding: the planner keeps the tables' field ids.
            match self.iceberg.plan(&changes, &after, &mut diags) {
                Ok(plan) => {
                    if emit && !plan.actions.is_empty() {
                        o.output =
                            vec![serde_json::to_string_pretty(&plan.actions)
                                .expect("plans serialise")];
                    }
                    o.plan = Some(plan);
                }
                Err(e) => {
                    o.diagnostics
                        .push((At::Statement, Diagnostic::error(e.to_string())));
                    return o.with(diags);
                }
            }
        } else if emit {
            o.output = match self.target {
                Target::Sql(d) => {
                    let mut cx = EmitCtx {
                        source: self.source,
                        before: &before,
                        after: &after,
                        diags: &mut diags,
                    };
                    Emitter::new(d).emit(&changes, &mut cx)
                }
                Target::Ir | Target::Iceberg => {
                    vec![serde_json::to_string_pretty(&changes).expect("IR serialises")]
                }
            };
        }
        self.catalog.absorb(&scoped, after);
        o.changes = changes;
        o.with(diags)
    }

    /// `USE db` / `SET search_path`: what the target needs to see of it.
    fn use_schema(&self, text: &str, s: &str, o: &mut Outcome, diags: &mut Diagnostics) {
        if self.target == Target::Sql(Dialect::Postgres) && self.source != Dialect::Postgres {
            let name = ddl_core::names::map_case(s, self.source.fold(), Dialect::Postgres.fold());
            o.output.push(format!(
                "SET search_path TO {}",
                crate::emit::quote_ident(Dialect::Postgres, &name)
            ));
        } else if self.target == Target::Sql(self.source) {
            o.output.push(text.trim().to_owned());
        } else {
            diags.skip(format!(
                "default schema is now {s}; names below are qualified with it"
            ));
        }
    }
}

/// Where a diagnostic points: at its statement, or at a byte offset inside it.
enum At {
    Statement,
    Offset(usize),
}

#[derive(Default)]
struct Outcome {
    output: Vec<String>,
    changes: Vec<SchemaChange>,
    diagnostics: Vec<(At, Diagnostic)>,
    plan: Option<StatementPlan>,
    tables: Vec<ddl_core::TableName>,
}

impl Outcome {
    fn with(mut self, mut diags: Diagnostics) -> Self {
        self.diagnostics
            .extend(diags.take().into_iter().map(|d| (At::Statement, d)));
        self
    }
}
