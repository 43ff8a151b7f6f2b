//! The stateful translator: statements are parsed, expanded against the catalog,
//! applied to it, and emitted, in order. ALTERs see every earlier statement's effect.

use crate::emit::{EmitCtx, Emitter};
use crate::parse::{ParseOptions, Parsed, StatementParser};
use crate::Dialect;
use ddl_core::{Catalog, Diagnostic, Diagnostics, SchemaChange, Severity};
use grammar::split::{line_col, split};

/// Where a translation goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Sql(Dialect),
    /// The neutral IR as JSON.
    Ir,
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
}

impl Translator {
    pub fn new(source: Dialect, target: Target) -> Self {
        Translator {
            source,
            target,
            options: ParseOptions::default(),
            catalog: Catalog::new(source.name_rules()),
            default_schema: None,
        }
    }

    /// Apply a script to the catalog without emitting (`--schema FILE`). Returns the
    /// diagnostics of statements that failed.
    pub fn seed(&mut self, text: &str) -> Vec<StatementResult> {
        let target = self.target;
        self.target = Target::Ir;
        let r = self.translate(text);
        self.target = target;
        self.default_schema = None;
        r.into_iter().filter(|s| s.failed()).collect()
    }

    /// Translate a whole script. Every statement is attempted, whatever failed before.
    pub fn translate(&mut self, text: &str) -> Vec<StatementResult> {
        split(self.source.flavor(), text)
            .into_iter()
            .map(|st| {
                let mut r = self.statement(&st.text);
                r.line = st.line;
                r.column = st.column;
                for d in &mut r.diagnostics {
                    if d.0 == 0 {
                        (d.0, d.1) = (st.line, st.column);
                    } else {
                        // Positions from the statement are relative to it.
                        let abs = st.offset + d.1;
                        (d.0, d.1) = line_col(text, abs);
                    }
                }
                r
            })
            .collect()
    }

    /// Translate one statement. Diagnostics carry (0, 0) for "the statement's own
    /// position", or (1, offset-in-statement) for a position inside it.
    pub fn statement(&mut self, text: &str) -> StatementResult {
        let mut diags = Diagnostics::default();
        let mut result = StatementResult {
            line: 1,
            column: 1,
            output: Vec::new(),
            changes: Vec::new(),
            diagnostics: Vec::new(),
        };
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
                result
                    .diagnostics
                    .push((1, e.offset, Diagnostic::error(e.message)));
                return self.finish(result, diags);
            }
            Ok(Parsed::Skipped(why)) => {
                diags.skip(why);
                return self.finish(result, diags);
            }
            Ok(Parsed::UseSchema(s)) => {
                self.default_schema = Some(s.clone());
                if self.target == Target::Sql(Dialect::Postgres) && self.source != Dialect::Postgres
                {
                    result.output.push(format!(
                        "SET search_path TO {}",
                        crate::emit::quote_ident(
                            Dialect::Postgres,
                            &ddl_core::names::map_case(
                                &s,
                                self.source.fold(),
                                Dialect::Postgres.fold()
                            )
                        )
                    ));
                } else if self.target == Target::Sql(self.source) {
                    result.output.push(text.trim().to_owned());
                } else {
                    diags.skip(format!(
                        "default schema is now {s}; names below are qualified with it"
                    ));
                }
                return self.finish(result, diags);
            }
            Ok(Parsed::Requests(r)) => r,
        };
        // Expand and apply in order, on a copy: a statement is all or nothing.
        let before = self.catalog.clone();
        let mut after = self.catalog.clone();
        let mut changes = Vec::new();
        for req in requests {
            let expanded = match after.expand(req) {
                Ok(c) => c,
                Err(e) => {
                    result
                        .diagnostics
                        .push((0, 0, Diagnostic::error(e.to_string())));
                    return self.finish(result, diags);
                }
            };
            for c in expanded {
                if let Err(e) = after.apply(&c) {
                    result
                        .diagnostics
                        .push((0, 0, Diagnostic::error(e.to_string())));
                    return self.finish(result, diags);
                }
                changes.push(c);
            }
        }
        if changes.is_empty() && diags.0.is_empty() {
            diags.skip("statement changes nothing");
        }
        if let Target::Sql(d) = self.target {
            let mut cx = EmitCtx {
                source: self.source,
                before: &before,
                after: &after,
                diags: &mut diags,
            };
            result.output = Emitter::new(d).emit(&changes, &mut cx);
        } else {
            result.output = vec![serde_json::to_string_pretty(&changes).expect("IR serialises")];
        }
        self.catalog = after;
        result.changes = changes;
        self.finish(result, diags)
    }

    fn finish(&self, mut r: StatementResult, mut diags: Diagnostics) -> StatementResult {
        r.diagnostics
            .extend(diags.take().into_iter().map(|d| (0, 0, d)));
        r
    }
}
