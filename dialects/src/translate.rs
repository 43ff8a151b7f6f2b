//! The stateful translator: statements are parsed, expanded against the catalog,
//! applied to it, and emitted, in order. ALTERs see every earlier statement's effect.

use crate::emit::{EmitCtx, Emitter};
use crate::iceberg::{IcebergPlanner, StatementPlan};
use crate::parse::{ParseOptions, Parsed, StatementParser};
use crate::Dialect;
use ddl_core::{
    Catalog, ChangeRequest, DefaultValue, Diagnostic, Diagnostics, ForeignKey, SchemaChange,
    Severity, TableName,
};
use grammar::split::{Kind, Splitter, Statement};

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
    /// Foreign keys held back because the table they reference did not exist yet:
    /// emitted as `ALTER TABLE ... ADD` once it does, or by [`Translator::finish`].
    deferred: Vec<(TableName, ForeignKey)>,
    /// Domains, enum types and sequences the input defined.
    pub defs: crate::defs::Definitions,
    /// The column keys of the table the last ADD COLUMNs widened, so the next one
    /// finds a duplicate without scanning the table (kept while nothing else runs).
    widened: Option<(TableName, std::collections::HashSet<String>)>,
    /// Source schemas written as other target schemas (lower case; None: the
    /// current database). PostgreSQL into MySQL maps `public` to the current
    /// database unless told otherwise (`--schema-map`).
    pub schema_map: Vec<(String, Option<String>)>,
    /// Target schemas (databases) the output has made or been told of, and the
    /// mapped source schemas already reported.
    made: std::collections::HashSet<String>,
    said: std::collections::HashSet<String>,
    /// Foreign-key names taken in each target schema (MySQL and Oracle name them
    /// per schema, PostgreSQL per table).
    fk_names: crate::fk_names::ForeignKeyNames,
    /// Sequences a PostgreSQL target has been given (lower case, as named in
    /// `nextval`), see [`Translator::sequences_first`].
    sequences_made: std::collections::HashSet<String>,
}

impl Translator {
    pub fn new(source: Dialect, target: Target) -> Self {
        Translator {
            source,
            target,
            options: ParseOptions {
                partitions_as_tables: matches!(target, Target::Sql(_)),
                ..ParseOptions::default()
            },
            catalog: Catalog::new(source.name_rules()),
            default_schema: None,
            iceberg: IcebergPlanner::default(),
            deferred: Vec::new(),
            defs: Default::default(),
            widened: None,
            schema_map: match (source, target) {
                (Dialect::Postgres, Target::Sql(Dialect::MySql)) => {
                    vec![("public".to_owned(), None)]
                }
                _ => Vec::new(),
            },
            made: Default::default(),
            said: Default::default(),
            sequences_made: Default::default(),
            fk_names: Default::default(),
        }
    }

    /// Map source schema `from` to target schema `to` (None: the current database),
    /// replacing the default for it.
    pub fn map_schema(&mut self, from: &str, to: Option<&str>) {
        let from = from.to_lowercase();
        self.schema_map.retain(|(k, _)| *k != from);
        self.schema_map.push((from, to.map(str::to_owned)));
    }

    /// Before the first table of a schema no statement of the input made, the target
    /// makes it: into MySQL (from another source) `CREATE DATABASE IF NOT EXISTS`,
    /// after the schema mapping (said once per mapped schema: a PostgreSQL dump never
    /// makes `public`, and one mapped elsewhere names a database the output must
    /// make); into PostgreSQL `CREATE SCHEMA IF NOT EXISTS` (not `public`: an Oracle
    /// script names its owner's schema before every table and never makes it).
    fn schemas_first(
        &mut self,
        changes: &[SchemaChange],
        o: &mut Outcome,
        diags: &mut Diagnostics,
    ) {
        let (d, word) = match self.target {
            Target::Sql(Dialect::MySql) if self.source != Dialect::MySql => {
                (Dialect::MySql, "DATABASE")
            }
            Target::Sql(Dialect::Postgres) => (Dialect::Postgres, "SCHEMA"),
            _ => return,
        };
        let em = Emitter::new(d).with_schemas(&self.schema_map);
        for c in changes {
            let s = match c {
                SchemaChange::CreateNamespace { name, .. } => {
                    if let Some(to) = em.schema_of(name) {
                        self.made.insert(to.to_lowercase());
                    }
                    continue;
                }
                SchemaChange::CreateTable { table, .. } => match table.name.schema.as_deref() {
                    Some(s) => s,
                    None => continue,
                },
                _ => continue,
            };
            let key = s.to_lowercase();
            if d == Dialect::MySql {
                if let Some((_, to)) = self.schema_map.iter().find(|(k, _)| *k == key) {
                    if self.said.insert(key.clone()) {
                        diags.warn(match to {
                            None => format!(
                                "schema {s}: its tables go to the current database (--schema-map {s}=DB names another)"
                            ),
                            Some(db) => {
                                format!("schema {s}: its tables go to database {db} (--schema-map)")
                            }
                        });
                    }
                }
            } else if key == "public" {
                continue;
            }
            let Some(target) = em.schema_of(s) else {
                continue;
            };
            if self.made.insert(target.to_lowercase()) {
                let mut cx = EmitCtx {
                    source: self.source,
                    before: &self.catalog,
                    after: &self.catalog,
                    diags,
                };
                let id = em.ident(&mut cx, target);
                o.output.push(format!("CREATE {word} IF NOT EXISTS {id}"));
            }
        }
    }

    /// A PostgreSQL extension, function or composite type, translated into
    /// PostgreSQL: a default or CHECK may call it (`uuid_generate_v4()`, a validation
    /// function), a column may be of it, so it is carried as written.
    fn same_dialect_object(&self, text: &str) -> bool {
        if self.source != Dialect::Postgres || self.target != Target::Sql(Dialect::Postgres) {
            return false;
        }
        let words: Vec<String> = text
            .split_whitespace()
            .take(4)
            .map(|w| w.to_ascii_uppercase())
            .collect();
        let w: Vec<&str> = words.iter().map(String::as_str).collect();
        // A composite type (`CREATE TYPE t AS (a int, ...)`): columns may be of it.
        let composite = matches!(w.as_slice(), ["CREATE", "TYPE", ..]) && {
            let up = text.to_ascii_uppercase();
            up.find(" AS")
                .is_some_and(|p| up[p + 3..].trim_start().starts_with('('))
        };
        // pg_dump's `SET check_function_bodies = false`: the functions carried after
        // it may read tables made later (a new user's pagila: `relation does not
        // exist` where it was skipped).
        let no_body_check = w.first() == Some(&"SET")
            && w.get(1)
                .is_some_and(|s| s.starts_with("CHECK_FUNCTION_BODIES"));
        composite
            || no_body_check
            || matches!(
                w.as_slice(),
                ["CREATE", "EXTENSION", ..]
                    | ["CREATE", "FUNCTION", ..]
                    | ["CREATE", "OR", "REPLACE", "FUNCTION"]
            )
    }

    /// Into PostgreSQL and Oracle: sequences are not translated as statements (one
    /// owned by a column makes it an identity), but a `nextval` default of another
    /// column needs its sequence (a partition's column on its parent's serial, a
    /// sequence two tables share, Oracle's `s.NEXTVAL`): made before the first
    /// statement that draws from it.
    fn sequences_first(&mut self, changes: &[SchemaChange], o: &mut Outcome) {
        if !matches!(
            self.target,
            Target::Sql(Dialect::Postgres) | Target::Sql(Dialect::Oracle)
        ) {
            return;
        }
        let mut defaults: Vec<&DefaultValue> = Vec::new();
        for c in changes {
            match c {
                SchemaChange::CreateTable { table, .. } => {
                    defaults.extend(table.columns.iter().filter_map(|c| c.default.as_ref()))
                }
                SchemaChange::AddColumn { column, .. } => defaults.extend(column.default.as_ref()),
                SchemaChange::SetDefault {
                    default: Some(d), ..
                } => defaults.push(d),
                _ => {}
            }
        }
        for d in defaults {
            if let DefaultValue::NextVal { sequence } = d {
                if let Some(sql) = self.create_sequence(sequence) {
                    o.output.push(sql);
                }
            }
        }
    }

    /// Into MySQL, which has no sequences: an integer column whose default draws from a
    /// sequence no column owns (pagila's `DEFAULT nextval('actor_actor_id_seq')`,
    /// made without `OWNED BY`) becomes AUTO_INCREMENT, as a column owning its
    /// sequence does, when it is the first to draw from it (the sequence is taken as
    /// its own from then on). A second column drawing from it keeps the warning that
    /// its default is not emitted.
    fn unowned_sequences_as_identities(
        &mut self,
        requests: Vec<ChangeRequest>,
        diags: &mut Diagnostics,
    ) -> Vec<ChangeRequest> {
        if self.target != Target::Sql(Dialect::MySql) {
            return requests;
        }
        let mut out = Vec::with_capacity(requests.len());
        for mut r in requests {
            match &mut r {
                ChangeRequest::Change(SchemaChange::CreateTable { table, .. }) => {
                    let name = table.name.clone();
                    for c in &mut table.columns {
                        if let Some(seq) = self.claim_sequence(&name, c, diags) {
                            c.default = None;
                            c.identity = Some(crate::parse::identity_of(&seq));
                        }
                    }
                }
                ChangeRequest::Change(SchemaChange::AddColumn { table, column, .. }) => {
                    if let Some(seq) = self.claim_sequence(table, column, diags) {
                        column.default = None;
                        column.identity = Some(crate::parse::identity_of(&seq));
                    }
                }
                ChangeRequest::Change(SchemaChange::SetDefault {
                    table,
                    column,
                    default: Some(default),
                }) => {
                    let col = self
                        .catalog
                        .resolve_table(table)
                        .and_then(|k| self.catalog.table(k))
                        .and_then(|t| t.column(column))
                        .map(|c| ddl_core::Column {
                            default: Some(default.clone()),
                            ..c.clone()
                        });
                    if let Some(seq) = col.and_then(|c| self.claim_sequence(table, &c, diags)) {
                        out.extend(crate::parse::identity_from(table, column, &seq));
                        continue;
                    }
                }
                _ => {}
            }
            out.push(r);
        }
        out
    }

    /// The sequence no column owns that column `c` of `table` draws from by its
    /// default (see [`Translator::unowned_sequences_as_identities`]), now owned by it.
    fn claim_sequence(
        &mut self,
        table: &TableName,
        c: &ddl_core::Column,
        diags: &mut Diagnostics,
    ) -> Option<crate::defs::Sequence> {
        let Some(DefaultValue::NextVal { sequence }) = &c.default else {
            return None;
        };
        if !matches!(c.data_type, ddl_core::DataType::Int { .. }) || c.identity.is_some() {
            return None;
        }
        let written = crate::defs::Definitions::sequence_name(sequence);
        let key = match self.defs.sequence(&written) {
            Some((k, s)) if s.owned_by.is_none() => k.clone(),
            _ => return None,
        };
        let seq = self.defs.sequences.get_mut(&key)?;
        seq.owned_by = Some((table.clone(), c.name.clone()));
        diags.warn(format!(
            "{table}.{}: its default draws from sequence {sequence}, which no column owns: the column becomes AUTO_INCREMENT (MySQL has no sequences; a client calling nextval on it has nothing to call)",
            c.name
        ));
        Some(seq.clone())
    }

    /// `CREATE SEQUENCE` for the sequence a default names as `sequence`, once: the
    /// statement as written within PostgreSQL, else its start and increment.
    fn create_sequence(&mut self, sequence: &str) -> Option<String> {
        let written = crate::defs::Definitions::sequence_name(sequence);
        match self.defs.sequence(&written) {
            Some((k, seq)) => {
                let (k, seq) = (k.clone(), seq.clone());
                self.sequence_sql(sequence, &k, Some(&seq))
            }
            None => self.sequence_sql(sequence, &written, None),
        }
    }

    /// `CREATE SEQUENCE` for sequence `name` (as the input defined it: `seq`),
    /// written `sequence` in a default; None when made already.
    fn sequence_sql(
        &mut self,
        sequence: &str,
        name: &TableName,
        seq: Option<&crate::defs::Sequence>,
    ) -> Option<String> {
        let Target::Sql(d) = self.target else {
            return None;
        };
        let key = format!("{}.{}", name.schema.as_deref().unwrap_or(""), name.name);
        if !self.sequences_made.insert(key.to_lowercase()) {
            return None;
        }
        if let (Dialect::Postgres, Dialect::Postgres, Some(text)) =
            (self.source, d, seq.and_then(|s| s.text.as_ref()))
        {
            let up = text.to_ascii_uppercase();
            return Some(if up.contains("IF NOT EXISTS") {
                text.clone()
            } else {
                let at = up.find("SEQUENCE").map_or(0, |p| p + "SEQUENCE".len());
                format!("{} IF NOT EXISTS{}", &text[..at], &text[at..])
            });
        }
        let mut sql = match d {
            // (As the default's nextval('...') names it: PostgreSQL reads both alike.)
            Dialect::Postgres => format!("CREATE SEQUENCE IF NOT EXISTS {sequence}"),
            _ => format!(
                "CREATE SEQUENCE {}",
                crate::emit::Emitter::new(d)
                    .with_schemas(&self.schema_map)
                    .sequence_ref(self.source, name)
            ),
        };
        if let Some(n) = seq.and_then(|s| s.increment) {
            sql.push_str(&format!(" INCREMENT BY {n}"));
        }
        if let Some(n) = seq.and_then(|s| s.start) {
            sql.push_str(&format!(" START WITH {n}"));
        }
        Some(sql)
    }

    /// At the end of the input, into PostgreSQL and Oracle: the sequences no column
    /// owns and no default drew from (an application draws from them itself, as
    /// Hibernate's `hibernate_sequence`) are made too.
    fn sequences_left(&mut self) -> Vec<String> {
        if !matches!(
            self.target,
            Target::Sql(Dialect::Postgres) | Target::Sql(Dialect::Oracle)
        ) {
            return Vec::new();
        }
        let free: Vec<(TableName, crate::defs::Sequence)> = self
            .defs
            .sequences
            .iter()
            .filter(|(_, s)| s.owned_by.is_none())
            .map(|(k, s)| (k.clone(), s.clone()))
            .collect();
        free.iter()
            .filter_map(|(k, s)| {
                let written = match &k.schema {
                    Some(sc) => format!("{sc}.{}", k.name),
                    None => k.name.clone(),
                };
                self.sequence_sql(&written, k, Some(s))
            })
            .collect()
    }

    /// Before `changes` are emitted: their foreign keys take names free in their
    /// target schema, where the source named keys per table and the target does not.
    fn name_foreign_keys(&mut self, changes: &[SchemaChange], diags: &mut Diagnostics) {
        let Target::Sql(d) = self.target else {
            return;
        };
        if self.source != Dialect::Postgres || d == Dialect::Postgres {
            return;
        }
        let named_keys = changes.iter().any(|c| match c {
            SchemaChange::CreateTable { table, .. } => {
                table.foreign_keys.iter().any(|f| f.name.is_some())
            }
            SchemaChange::AddForeignKey { foreign_key, .. } => foreign_key.name.is_some(),
            _ => false,
        });
        if !named_keys {
            return;
        }
        let em = Emitter::new(d).with_schemas(&self.schema_map);
        let default = self.default_schema.as_deref();
        let schema_of = |t: &TableName| -> String {
            t.schema
                .as_deref()
                .or(default)
                .and_then(|s| em.schema_of(s))
                .unwrap_or("")
                .to_lowercase()
        };
        let max_len = if d == Dialect::Oracle { 128 } else { 64 };
        self.fk_names.claim(changes, schema_of, max_len, diags);
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
        let mut out = Vec::new();
        for st in Splitter::new(self.source.flavor(), text) {
            out.push(self.one(&st, emit));
        }
        out
    }

    /// Translate a script as it is read, handing each statement's result to `each`
    /// before the next is read: memory holds the statement at hand (and a read
    /// buffer), not the script, whatever its size. Bytes that are not UTF-8 are
    /// replaced (U+FFFD), as when a whole file is read, but for a MySQL string of them
    /// (a binary value as mariadb-dump writes it), read as the hex literal of its bytes.
    pub fn translate_reader<R: std::io::Read>(
        &mut self,
        mut r: R,
        mut each: impl FnMut(StatementResult),
    ) -> std::io::Result<()> {
        const CHUNK: usize = 1 << 20;
        let flavor = self.source.flavor();
        let mut raw: Vec<u8> = Vec::new();
        let mut buf = String::new();
        let mut delimiter = String::from(";");
        // Line and column of buf's first character in the whole input.
        let (mut base_line, mut base_col) = (1usize, 1usize);
        let mut chunk = Vec::new();
        // Reads start small (a small file is not charged a large buffer's pages) and
        // grow to CHUNK while they fill it.
        let mut want = 64 << 10;
        let mut eof = false;
        while !eof {
            // A statement longer than a chunk is read in doubling steps, so it is
            // scanned a bounded number of times.
            chunk.resize(want.max(buf.len()), 0);
            let n = match r.read(&mut chunk) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if n == chunk.len() {
                want = (want * 2).min(CHUNK);
            }
            eof = n == 0;
            raw.extend_from_slice(&chunk[..n]);
            match std::str::from_utf8(&raw) {
                Ok(t) => {
                    buf.push_str(t);
                    raw.clear();
                }
                // A character split between two reads: keep its first bytes.
                Err(e) if e.error_len().is_none() && !eof => {
                    let valid = e.valid_up_to();
                    buf.push_str(std::str::from_utf8(&raw[..valid]).expect("valid prefix"));
                    raw.drain(..valid);
                }
                // A MySQL dump's binary default is its raw bytes in a string: read as
                // the hex literal of its bytes (buf begins outside any string).
                Err(_) if flavor == grammar::Flavor::MySql => {
                    let mut all = std::mem::take(&mut buf).into_bytes();
                    all.extend_from_slice(&raw);
                    let (text, n) = grammar::split::mysql_text_from_bytes(&all, eof);
                    buf = text;
                    raw = all.split_off(n);
                }
                Err(_) => {
                    buf.push_str(&String::from_utf8_lossy(&raw));
                    raw.clear();
                }
            }
            let mut sp = Splitter::with_delimiter(flavor, &buf, &delimiter);
            while let Some(mut st) = sp.next() {
                if sp.open_end() && !eof {
                    break;
                }
                if st.line == 1 {
                    st.column += base_col - 1;
                }
                st.line += base_line - 1;
                each(self.one(&st, true));
            }
            let done = if eof { buf.len() } else { sp.settled() };
            delimiter = sp.delimiter().to_owned();
            let consumed = &buf[..done];
            match consumed.rfind('\n') {
                Some(p) => {
                    base_line += consumed.matches('\n').count();
                    base_col = consumed[p + 1..].chars().count() + 1;
                }
                None => base_col += consumed.chars().count(),
            }
            buf.drain(..done);
        }
        Ok(())
    }

    /// One statement of a script: translated (or skipped, or failed), with its
    /// diagnostics placed in the input.
    fn one(&mut self, st: &Statement, emit: bool) -> StatementResult {
        let o = match st.kind {
            Kind::Sql => self.statement(&st.text, emit),
            Kind::Client(tool) => Outcome::skipped(if includes_file(&st.text) {
                format!(
                    "{tool} command `{}` runs another file, which is not read here: give it as an input too",
                    excerpt(&st.text)
                )
            } else {
                format!(
                    "{tool} command `{}`: a client command, not SQL",
                    excerpt(&st.text)
                )
            }),
            Kind::Unterminated(what) => Outcome::error(format!(
                "unterminated {what} starts here: the rest of the input ({} lines) is not read",
                st.text.lines().count()
            )),
        };
        let diagnostics = o
            .diagnostics
            .into_iter()
            .map(|(at, mut d)| {
                let (line, column) = match at {
                    At::Statement => (st.line, st.column),
                    At::Offset(k) => within(st, k),
                };
                // A message may quote the input (a parser's "found: <token>"): never
                // more than a bounded excerpt of it.
                if d.message.len() > MAX_MESSAGE {
                    let mut cut = MAX_MESSAGE;
                    while !d.message.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    d.message.truncate(cut);
                    d.message.push_str("...");
                }
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
            defs: &mut self.defs,
        }
        .parse(text);
        let requests = match parsed {
            Err(e) => {
                o.diagnostics
                    .push((At::Offset(e.offset), Diagnostic::error(e.message)));
                o.tables = e.unknown;
                return o.with(diags);
            }
            Ok(Parsed::Skipped(why)) => {
                if emit && self.same_dialect_object(text) {
                    // PostgreSQL into PostgreSQL: extensions and functions that
                    // columns' defaults and CHECKs call are carried as written.
                    o.output
                        .push(text.trim().trim_end_matches(';').trim_end().to_owned());
                } else {
                    diags.skip(why);
                }
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
        // A script that drops a table before it makes it (install scripts do) names
        // a table this translation does not know: dropped if it exists.
        let requests: Vec<ChangeRequest> = requests
            .into_iter()
            .map(|r| match r {
                ChangeRequest::Change(SchemaChange::DropTable {
                    name,
                    if_exists: false,
                }) if self.catalog.resolve_table(&name).is_none() => {
                    diags.warn(format!(
                        "table {name} is not known here (not made earlier in the input): dropped IF EXISTS"
                    ));
                    ChangeRequest::Change(SchemaChange::DropTable {
                        name,
                        if_exists: true,
                    })
                }
                other => other,
            })
            .collect();
        let requests = self.unowned_sequences_as_identities(requests, &mut diags);
        // ADD COLUMN alone changes nothing else and cannot fail half-way, and emitting
        // it needs no earlier state: it is applied in place. (Copying a wide table for
        // each of thousands of ALTERs that widen it made such scripts quadratic.)
        if self.target != Target::Iceberg {
            if let [ChangeRequest::Change(c @ SchemaChange::AddColumn { .. })] = requests.as_slice()
            {
                let c = c.clone();
                o.tables = self.catalog.touched(&requests);
                if let Err(e) = self.add_column(&c) {
                    o.diagnostics
                        .push((At::Statement, Diagnostic::error(e.to_string())));
                    return o.with(diags);
                }
                let changes = vec![c];
                if emit {
                    self.sequences_first(&changes, &mut o);
                    let rendered = render(
                        self.source,
                        self.target,
                        (&self.schema_map, self.fk_names.renames()),
                        &changes,
                        &self.catalog,
                        &self.catalog,
                        &mut diags,
                    );
                    o.output.extend(rendered);
                    self.release_into(&mut o, &mut diags);
                }
                o.changes = changes;
                return o.with(diags);
            }
        }
        self.widened = None;
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
        // A table's keys name its own columns, a foreign key as many as it references:
        // what the source server would refuse is an error here too, not output.
        if matches!(self.target, Target::Sql(_)) {
            if let Some(e) = changes.iter().find_map(|c| match c {
                SchemaChange::CreateTable { table, .. } => key_columns_error(table, &after),
                _ => None,
            }) {
                o.diagnostics.push((At::Statement, Diagnostic::error(e)));
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
            let emitted = match self.target {
                Target::Sql(_) => self.defer_forward_keys(&changes),
                _ => None,
            };
            self.schemas_first(&changes, &mut o, &mut diags);
            self.sequences_first(&changes, &mut o);
            let emitted = emitted.as_deref().unwrap_or(&changes);
            self.name_foreign_keys(emitted, &mut diags);
            o.output.extend(render(
                self.source,
                self.target,
                (&self.schema_map, self.fk_names.renames()),
                emitted,
                &before,
                &after,
                &mut diags,
            ));
            self.fk_names.settle(emitted);
        }
        // (`before` shares the catalog's namespace set: dropped first, so the
        // statement's new schemas are added to it, not to a copy.)
        drop(before);
        self.catalog.absorb(&scoped, after);
        if emit {
            self.release_into(&mut o, &mut diags);
        }
        o.changes = changes;
        o.with(diags)
    }

    /// Held-back foreign keys whose tables exist now follow the statement's output.
    fn release_into(&mut self, o: &mut Outcome, diags: &mut Diagnostics) {
        if let Target::Sql(d) = self.target {
            o.output.extend(self.release_deferred(d, false, diags));
        }
    }

    /// Apply an ADD COLUMN, finding a duplicate name by the widened table's key set
    /// (built once, then kept up to date) instead of a scan per statement.
    fn add_column(&mut self, c: &SchemaChange) -> Result<(), ddl_core::CatalogError> {
        let SchemaChange::AddColumn { table, column, .. } = c else {
            return self.catalog.apply(c);
        };
        let Some(key) = self.catalog.resolve_table(table).cloned() else {
            return self.catalog.apply(c);
        };
        let width = self
            .catalog
            .table(&key)
            .map(|t| t.columns.len())
            .unwrap_or(0);
        let fresh = matches!(&self.widened, Some((k, set)) if *k == key && set.len() == width);
        if !fresh {
            let set = self
                .catalog
                .table(&key)
                .map(|t| {
                    t.columns
                        .iter()
                        .map(|c| self.catalog.column_key(&c.name))
                        .collect()
                })
                .unwrap_or_default();
            self.widened = Some((key.clone(), set));
        }
        let name = self.catalog.column_key(&column.name);
        let (_, set) = self.widened.as_mut().expect("set above");
        if set.contains(&name) {
            // The catalog says why, as for any other statement.
            return self.catalog.apply(c);
        }
        self.catalog.add_new_column(c)?;
        set.insert(name);
        Ok(())
    }

    /// The changes to emit now: foreign keys onto tables that do not exist yet (a dump
    /// written with key checks off, keys in a cycle) are taken out and kept until
    /// their table exists. Self-references and tables created earlier in the same
    /// statement are not forward references.
    /// None when nothing is held back (the changes are emitted as they are).
    fn defer_forward_keys(&mut self, changes: &[SchemaChange]) -> Option<Vec<SchemaChange>> {
        let forward = |t: &ddl_core::Table| {
            t.foreign_keys.iter().any(|fk| {
                fk.ref_table != t.name && self.catalog.resolve_table(&fk.ref_table).is_none()
            })
        };
        let any = changes.iter().any(|c| match c {
            SchemaChange::CreateTable { table, .. } => forward(table),
            SchemaChange::AddForeignKey { foreign_key, .. } => {
                self.catalog.resolve_table(&foreign_key.ref_table).is_none()
            }
            _ => false,
        });
        if !any {
            return None;
        }
        let mut created: Vec<TableName> = Vec::new();
        let mut out = Vec::with_capacity(changes.len());
        for c in changes {
            // A name qualified on one side only (`public.t` for a `t` created without
            // a schema) counts as existing: holding a key back is for order only.
            let same = |a: &TableName, b: &TableName| {
                a == b || (a.name == b.name && (a.schema.is_none() || b.schema.is_none()))
            };
            let exists = |cat: &Catalog, created: &[TableName], own: &TableName, t: &TableName| {
                same(t, own)
                    || created.iter().any(|c| same(c, t))
                    || cat.resolve_table(t).is_some()
                    || (t.schema.is_some()
                        && cat.resolve_table(&TableName::new(None, &t.name)).is_some())
                    || cat.tables.keys().any(|k| same(k, t))
            };
            match c {
                SchemaChange::CreateTable {
                    table,
                    if_not_exists,
                } => {
                    let (now, later): (Vec<_>, Vec<_>) =
                        table.foreign_keys.iter().cloned().partition(|fk| {
                            exists(&self.catalog, &created, &table.name, &fk.ref_table)
                        });
                    created.push(table.name.clone());
                    if later.is_empty() {
                        out.push(c.clone());
                        continue;
                    }
                    let mut t = table.clone();
                    t.foreign_keys = now;
                    self.deferred
                        .extend(later.into_iter().map(|fk| (table.name.clone(), fk)));
                    out.push(SchemaChange::CreateTable {
                        table: t,
                        if_not_exists: *if_not_exists,
                    });
                }
                SchemaChange::AddForeignKey { table, foreign_key }
                    if !exists(&self.catalog, &created, table, &foreign_key.ref_table) =>
                {
                    self.deferred.push((table.clone(), foreign_key.clone()));
                }
                other => out.push(other.clone()),
            }
        }
        Some(out)
    }

    /// `ALTER TABLE ... ADD` for held-back foreign keys whose tables both exist now
    /// (all of them with `all`, at the end of the input).
    fn release_deferred(&mut self, d: Dialect, all: bool, diags: &mut Diagnostics) -> Vec<String> {
        let mut ready = Vec::new();
        let mut keep = Vec::new();
        for (t, fk) in std::mem::take(&mut self.deferred) {
            let child = self.catalog.resolve_table(&t).cloned();
            let parent = self.catalog.resolve_table(&fk.ref_table).cloned();
            match (child, parent) {
                (Some(c), Some(p)) => {
                    let still_there = self
                        .catalog
                        .table(&c)
                        .is_some_and(|ct| ct.foreign_keys.iter().any(|k| k == &fk));
                    if still_there {
                        let mut fk = fk;
                        fk.ref_table = p;
                        ready.push(SchemaChange::AddForeignKey {
                            table: c,
                            foreign_key: fk,
                        });
                    }
                }
                (Some(c), None) if all => {
                    diags.warn(format!(
                        "{c}: foreign key {}references {}, which the input never creates; it is added last and needs that table on the target",
                        fk.name.as_deref().map(|n| format!("{n} ")).unwrap_or_default(),
                        fk.ref_table
                    ));
                    ready.push(SchemaChange::AddForeignKey {
                        table: c,
                        foreign_key: fk,
                    });
                }
                (Some(_), None) => keep.push((t, fk)),
                // The child was dropped meanwhile: so was its key.
                (None, _) => {}
            }
        }
        self.deferred = keep;
        if ready.is_empty() {
            return Vec::new();
        }
        self.name_foreign_keys(&ready, diags);
        let mut cx = EmitCtx {
            source: self.source,
            before: &self.catalog,
            after: &self.catalog,
            diags,
        };
        Emitter::new(d)
            .with_schemas(&self.schema_map)
            .with_fk_renames(self.fk_names.renames())
            .emit(&ready, &mut cx)
    }

    /// The end of the input: foreign keys still held back (their table never came)
    /// are emitted last, with a warning. Returns them as one result at `line`.
    pub fn finish(&mut self) -> Option<StatementResult> {
        let Target::Sql(d) = self.target else {
            return None;
        };
        let mut diags = Diagnostics::default();
        let mut output = self.release_deferred(d, true, &mut diags);
        output.extend(self.keys_for_identities(&mut diags));
        output.extend(self.sequences_left());
        if output.is_empty() && diags.0.is_empty() {
            return None;
        }
        Some(StatementResult {
            line: 0,
            column: 0,
            output,
            changes: Vec::new(),
            diagnostics: diags.take().into_iter().map(|d| (0, 0, d)).collect(),
            plan: None,
            tables: Vec::new(),
        })
    }

    /// Into MySQL, at the end of the input: an identity column that no key leads by
    /// now (its key, if any, leads with another column) would stay a plain column,
    /// since MySQL's AUTO_INCREMENT needs a key it leads; it is given an index of its
    /// own, and AUTO_INCREMENT with it (said).
    fn keys_for_identities(&mut self, diags: &mut Diagnostics) -> Vec<String> {
        if self.target != Target::Sql(Dialect::MySql) || self.source == Dialect::MySql {
            return Vec::new();
        }
        let lonely: Vec<(TableName, String)> = self
            .catalog
            .tables
            .iter()
            .filter(|(_, t)| {
                !t.columns
                    .iter()
                    .any(|c| c.identity.is_some() && crate::emit::leads_key_of(t, &c.name))
            })
            .filter_map(|(k, t)| {
                let c = t.columns.iter().find(|c| c.identity.is_some())?;
                Some((k.clone(), c.name.clone()))
            })
            .collect();
        let mut out = Vec::new();
        for (table, col) in lonely {
            diags.warn(format!(
                "{table}.{col}: no key leads with it, and MySQL's AUTO_INCREMENT needs one: an index on {col} is added"
            ));
            let change = SchemaChange::AddIndex {
                table: table.clone(),
                index: ddl_core::Index {
                    name: None,
                    kind: ddl_core::IndexKind::Plain,
                    parts: vec![ddl_core::IndexPart {
                        column: col.clone(),
                        expression: false,
                        prefix: None,
                        descending: false,
                    }],
                    predicate: None,
                },
            };
            let names = [table.clone()];
            let before = self.catalog.scope(&names);
            let mut after = before.clone();
            if after.apply(&change).is_err() {
                continue;
            }
            out.extend(render(
                self.source,
                self.target,
                (&self.schema_map, self.fk_names.renames()),
                std::slice::from_ref(&change),
                &before,
                &after,
                diags,
            ));
            self.catalog.absorb(&names, after);
        }
        out
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
    fn skipped(why: String) -> Self {
        let mut o = Outcome::default();
        o.diagnostics
            .push((At::Statement, Diagnostic::skipped(why)));
        o
    }

    fn error(why: String) -> Self {
        let mut o = Outcome::default();
        o.diagnostics.push((At::Statement, Diagnostic::error(why)));
        o
    }

    fn with(mut self, mut diags: Diagnostics) -> Self {
        self.diagnostics
            .extend(diags.take().into_iter().map(|d| (At::Statement, d)));
        self
    }
}

/// What is wrong with `table`'s keys (a column it does not have, a foreign key of
/// more or fewer columns than it references), as the source server would say.
fn key_columns_error(table: &ddl_core::Table, cat: &Catalog) -> Option<String> {
    let has = |c: &str| cat.resolve_column(&table.name, c).is_ok();
    let named = table
        .primary_key
        .iter()
        .flat_map(|p| p.columns.iter())
        .chain(
            table
                .indexes
                .iter()
                .flat_map(|i| i.parts.iter().filter(|p| !p.expression).map(|p| &p.column)),
        )
        .chain(table.foreign_keys.iter().flat_map(|f| f.columns.iter()));
    for c in named {
        if !has(c) {
            return Some(format!(
                "table {}: a key names column {c}, which the table does not have",
                table.name
            ));
        }
    }
    table
        .foreign_keys
        .iter()
        .find(|f| !f.ref_columns.is_empty() && f.ref_columns.len() != f.columns.len())
        .map(|f| {
            format!(
                "table {}: foreign key {}has {} column(s) and references {}",
                table.name,
                f.name
                    .as_deref()
                    .map(|n| format!("{n} "))
                    .unwrap_or_default(),
                f.columns.len(),
                f.ref_columns.len()
            )
        })
}

/// A statement's changes in the target: SQL, or the IR as JSON.
fn render(
    source: Dialect,
    target: Target,
    (schemas, fk_renames): (&[(String, Option<String>)], crate::fk_names::Renames),
    changes: &[SchemaChange],
    before: &Catalog,
    after: &Catalog,
    diags: &mut Diagnostics,
) -> Vec<String> {
    match target {
        Target::Sql(d) => {
            let mut cx = EmitCtx {
                source,
                before,
                after,
                diags,
            };
            Emitter::new(d)
                .with_schemas(schemas)
                .with_fk_renames(fk_renames)
                .emit(changes, &mut cx)
        }
        Target::Ir | Target::Iceberg => {
            vec![serde_json::to_string_pretty(changes).expect("IR serialises")]
        }
    }
}

/// The longest diagnostic message, in bytes.
const MAX_MESSAGE: usize = 400;

/// Line and column of byte `k` of a statement's text.
fn within(st: &Statement, k: usize) -> (usize, usize) {
    let mut k = k.min(st.text.len());
    while !st.text.is_char_boundary(k) {
        k -= 1;
    }
    let pre = &st.text[..k];
    match pre.rfind('\n') {
        Some(p) => (
            st.line + pre.matches('\n').count(),
            pre[p + 1..].chars().count() + 1,
        ),
        None => (st.line, st.column + pre.chars().count()),
    }
}

/// A client command that runs another script (mysql `source`/`\.`, SQL*Plus `@`,
/// `@@`, `START`, psql `\i`, `\ir`, `\include`).
fn includes_file(cmd: &str) -> bool {
    let first = cmd
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    first.starts_with('@')
        || matches!(
            first.as_str(),
            "source"
                | "\\."
                | "start"
                | "sta"
                | "\\i"
                | "\\ir"
                | "\\include"
                | "\\include_relative"
        )
}

/// At most a line and 80 characters of `text`, for a diagnostic that names a statement
/// without echoing it whole.
pub fn excerpt(text: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    let mut out: String = line.chars().take(80).collect();
    if out.len() < line.len() || text.trim().lines().nth(1).is_some() {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sql(source: Dialect, target: Dialect, text: &str) -> (Vec<String>, Vec<String>) {
        let mut tr = Translator::new(source, Target::Sql(target));
        let mut rs = tr.translate(text);
        rs.extend(tr.finish());
        let mut out = Vec::new();
        let mut diags = Vec::new();
        for r in rs {
            out.extend(r.output);
            diags.extend(
                r.diagnostics
                    .into_iter()
                    .map(|(_, _, d)| format!("{}: {}", d.severity, d.message)),
            );
        }
        (out, diags)
    }

    #[test]
    fn indexes_of_other_access_methods_are_named_not_made_b_trees() {
        // A new user's PostgreSQL -> PostgreSQL: `USING gin (body)` became a B-tree,
        // which refused a 6 KB jsonb row ("index row size exceeds btree maximum").
        let text = "CREATE TABLE t (id int PRIMARY KEY, body jsonb, tags text[]);
            CREATE INDEX t_body ON t USING gin (body);
            CREATE INDEX t_tags ON t USING gist (tags);
            CREATE INDEX t_id ON t USING btree (id, body);
            DROP INDEX t_body;";
        for target in [Dialect::Postgres, Dialect::MySql] {
            let (out, diags) = sql(Dialect::Postgres, target, text);
            assert!(
                !out.iter()
                    .any(|s| s.contains("t_body") || s.contains("t_tags")),
                "{target:?}: {out:?}"
            );
            // (Dropped later: nothing to drop, said; no error.)
            assert!(
                diags.iter().all(|d| !d.starts_with("error"))
                    && diags
                        .iter()
                        .any(|d| d.contains("index t_body is not known")),
                "{target:?}: {diags:?}"
            );
            for ix in ["t_body", "t_tags"] {
                assert!(
                    diags.iter().any(|d| d.starts_with("warning")
                        && d.contains(&format!("index {ix} on"))
                        && d.contains("not created")),
                    "{target:?} {ix}: {diags:?}"
                );
            }
        }
    }

    #[test]
    fn bit_string_defaults_keep_their_bits_in_every_target() {
        // As written and as pg_dump writes them (a varying bit string's leading zeros
        // are its value; `'1'::bit(70)` is padded on the right).
        let text = "CREATE TABLE t (id int PRIMARY KEY, a varbit DEFAULT B'0011',
            b varbit(8) DEFAULT '00011111'::\"bit\", c bit(4) DEFAULT B'1010',
            d bit(70) DEFAULT '1'::bit(70), e varbit(8) DEFAULT X'1F', f int DEFAULT B'101'::integer);";
        let want = [
            (
                Dialect::Postgres,
                [
                    "a varbit DEFAULT B'0011'",
                    "b varbit(8) DEFAULT B'00011111'",
                    "c bit(4) DEFAULT B'1010'",
                    &format!("d bit(70) DEFAULT B'1{}'", "0".repeat(69)),
                    "e varbit(8) DEFAULT B'00011111'",
                    "f integer DEFAULT 5",
                ],
            ),
            (
                Dialect::MySql,
                [
                    "a LONGBLOB DEFAULT '0011'",
                    "b BIT(8) DEFAULT b'00011111'",
                    "c BIT(4) DEFAULT 10",
                    &format!("d LONGBLOB DEFAULT '1{}'", "0".repeat(69)),
                    "e BIT(8) DEFAULT b'00011111'",
                    "f INT DEFAULT 5",
                ],
            ),
            (
                Dialect::Oracle,
                [
                    "A RAW(8) DEFAULT HEXTORAW('03')",
                    "B RAW(1) DEFAULT HEXTORAW('1F')",
                    "C RAW(1) DEFAULT HEXTORAW('0A')",
                    "D RAW(9) DEFAULT HEXTORAW('200000000000000000')",
                    "E RAW(1) DEFAULT HEXTORAW('1F')",
                    "F NUMBER(10) DEFAULT 5",
                ],
            ),
        ];
        for (target, cols) in want {
            let (out, _) = sql(Dialect::Postgres, target, text);
            for c in cols {
                assert!(out[0].contains(c), "{target:?}: {c} in {}", out[0]);
            }
        }
        // MySQL reads a string given to a BIT column as its bytes: '1' is 0x31.
        let (out, _) = sql(
            Dialect::MySql,
            Dialect::Postgres,
            "CREATE TABLE t (b BIT(8) DEFAULT '1', c BIT(8) DEFAULT b'101');",
        );
        assert!(
            out[0].contains("B'00110001'") && out[0].contains("B'00000101'"),
            "{}",
            out[0]
        );
    }

    #[test]
    fn a_time_with_an_offset_reaches_mysql_as_utc() {
        // MariaDB refused the offset (1067 Invalid default value): a PostgreSQL
        // source's job stopped on the column added with it (a hostile tester).
        let (out, diags) = sql(
            Dialect::Postgres,
            Dialect::MySql,
            "CREATE TABLE t (id int PRIMARY KEY, a timestamptz DEFAULT '2020-01-01 00:00:00+05',
                b timestamptz DEFAULT '2020-01-01 10:30:00.25-08:30'::timestamp with time zone,
                c timestamp DEFAULT '2020-01-01 00:00:00');",
        );
        assert!(
            out[0].contains("DEFAULT '2019-12-31 19:00:00'"),
            "{}",
            out[0]
        );
        assert!(
            out[0].contains("DEFAULT '2020-01-01 19:00:00.250'"),
            "{}",
            out[0]
        );
        assert!(
            out[0].contains("DEFAULT '2020-01-01 00:00:00'"),
            "{}",
            out[0]
        );
        assert!(
            diags
                .iter()
                .any(|d| d.starts_with("warning") && d.contains("given as UTC")),
            "{diags:?}"
        );
    }

    #[test]
    fn a_mysql_bit_of_another_width_keeps_its_number_on_postgresql() {
        // PostgreSQL refused the change without USING (22026), and its own cast pads
        // on the right (b'10101' in BIT(10) would read 672, not 21).
        let (out, _) = sql(
            Dialect::MySql,
            Dialect::Postgres,
            "CREATE TABLE t (id INT PRIMARY KEY, b BIT(5));
             ALTER TABLE t MODIFY b BIT(10);
             ALTER TABLE t MODIFY b BIT(3);",
        );
        assert!(
            out.iter().any(|s| s
                == "ALTER TABLE t ALTER COLUMN b TYPE bit(10) USING right(lpad(b::text, 10, '0'), 10)::bit(10)"),
            "{out:?}"
        );
        assert!(
            out.iter()
                .any(|s| s.ends_with("USING right(lpad(b::text, 3, '0'), 3)::bit(3)")),
            "{out:?}"
        );
    }

    #[test]
    fn function_body_checks_stay_off_where_the_dump_turned_them_off() {
        let text = "SET check_function_bodies = false;
            CREATE FUNCTION ids() RETURNS SETOF int LANGUAGE sql AS $_$ SELECT id FROM t $_$;
            CREATE TABLE t (id int PRIMARY KEY);";
        let (out, _) = sql(Dialect::Postgres, Dialect::Postgres, text);
        assert_eq!(out[0], "SET check_function_bodies = false", "{out:?}");
        let (out, _) = sql(Dialect::Postgres, Dialect::MySql, text);
        assert!(out.iter().all(|s| !s.starts_with("SET")), "{out:?}");
    }

    #[test]
    fn a_schema_made_by_the_input_is_a_database_made_if_absent() {
        // A new user's dumps: `CREATE SCHEMA sales` became `CREATE DATABASE sales`,
        // which fails where the server has one of that name (1007), while the
        // README promised IF NOT EXISTS.
        let (out, _) = sql(
            Dialect::Postgres,
            Dialect::MySql,
            "CREATE SCHEMA sales; CREATE TABLE sales.t (id int PRIMARY KEY);",
        );
        assert_eq!(out[0], "CREATE DATABASE IF NOT EXISTS sales", "{out:?}");
        let (out, _) = sql(Dialect::MySql, Dialect::MySql, "CREATE DATABASE shop;");
        assert_eq!(out, vec!["CREATE DATABASE shop".to_owned()]);
    }

    #[test]
    fn partitions_attached_or_made_get_the_parents_keys() {
        // regression (issue 37, a new user's pagila from PostgreSQL 18's pg_dump):
        // a partition attached after its parent had its key, and a unique index
        // made on the parent later, were the parent's alone: 55 primary keys and
        // 55 unique indexes lost without a word.
        let text = "CREATE TABLE p (id int NOT NULL, d date NOT NULL, u uuid, PRIMARY KEY (id, d)) PARTITION BY RANGE (d);
            CREATE TABLE p1 (id int NOT NULL, d date NOT NULL, u uuid);
            ALTER TABLE ONLY p ATTACH PARTITION p1 FOR VALUES FROM ('2020-01-01') TO ('2021-01-01');
            CREATE TABLE p2 PARTITION OF p FOR VALUES FROM ('2021-01-01') TO ('2022-01-01');
            CREATE UNIQUE INDEX p_u_key ON p USING btree (u, d);
            CREATE UNIQUE INDEX p_u_upper ON p (u, d, id) WHERE id > 0;";
        for target in [Dialect::MySql, Dialect::Postgres] {
            let (out, diags) = sql(Dialect::Postgres, target, text);
            let all = out.join("\n");
            let key_of = |t: &str| {
                out.iter().any(|s| {
                    (s.starts_with(&format!("CREATE TABLE {t} "))
                        && s.contains("PRIMARY KEY (id, d)"))
                        || (s.starts_with(&format!("ALTER TABLE {t} "))
                            && s.contains("PRIMARY KEY (id, d)"))
                })
            };
            assert!(key_of("p1") && key_of("p2"), "{target:?}: {all}\n{diags:?}");
            for t in ["p1", "p2"] {
                assert!(
                    out.iter().any(|s| s.contains(&format!(" {t} "))
                        && s.contains("UNIQUE")
                        && s.contains("(u, d)")),
                    "{target:?} {t}: {all}"
                );
            }
        }
    }

    #[test]
    fn an_auto_increment_column_added_with_its_key_is_one_mysql_alter() {
        // regression (issue 36): the column went alone (`ADD COLUMN ...
        // AUTO_INCREMENT`), which MySQL refuses (1075) before the key comes.
        let text = "CREATE TABLE a (id INT PRIMARY KEY, v INT);
            CREATE TABLE b (id INT PRIMARY KEY);
            CREATE TABLE k (v INT);
            ALTER TABLE a ADD COLUMN seq INT NOT NULL AUTO_INCREMENT, ADD UNIQUE KEY (seq);
            ALTER TABLE b ADD COLUMN seq INT NOT NULL AUTO_INCREMENT UNIQUE;
            ALTER TABLE k ADD COLUMN id INT NOT NULL AUTO_INCREMENT PRIMARY KEY FIRST;";
        let (out, diags) = sql(Dialect::MySql, Dialect::MySql, text);
        let alters: Vec<&String> = out.iter().filter(|s| s.starts_with("ALTER")).collect();
        assert_eq!(alters.len(), 3, "{out:#?} {diags:?}");
        for (a, key) in alters.iter().zip(["UNIQUE", "UNIQUE", "PRIMARY KEY (id)"]) {
            assert!(
                a.contains("AUTO_INCREMENT") && a.contains(", ADD ") && a.contains(key),
                "{a}"
            );
        }
        assert!(
            alters[2].contains("FIRST, ADD PRIMARY KEY"),
            "{}",
            alters[2]
        );
    }

    #[test]
    fn a_schema_with_elements_makes_each_table_in_it() {
        // regression (issue 37 item 2): `CREATE SCHEMA s CREATE TABLE ...` did not
        // parse and every table inside was lost.
        let text = "CREATE SCHEMA s AUTHORIZATION joe CREATE TABLE a (id int PRIMARY KEY, note text DEFAULT 'x CREATE y') \
            CREATE TABLE b (id int REFERENCES a (id), n int) CREATE INDEX b_n ON b (n) CREATE VIEW v AS SELECT 1 GRANT SELECT ON a TO joe;\n\
            ALTER TABLE s.b ADD COLUMN z int;\n\
            CREATE SCHEMA t CREATE TABLE broken (id intt x);";
        for target in [Dialect::MySql, Dialect::Postgres] {
            let (out, diags) = sql(Dialect::Postgres, target, text);
            let all = out.join(";\n").to_lowercase();
            for want in [
                "create table s.a",
                "'x create y'",
                "create table s.b",
                "references s.a",
                "b_n",
                "add column z",
            ] {
                assert!(all.contains(want), "{target}: {want}: {all}");
            }
            let errors: Vec<&String> = diags.iter().filter(|d| d.starts_with("error")).collect();
            assert_eq!(errors.len(), 1, "{diags:#?}");
            assert!(
                errors[0].contains("schema t's element `CREATE TABLE broken"),
                "{errors:?}"
            );
        }
    }

    #[test]
    fn a_serial_of_a_table_whose_name_holds_a_quote_keeps_its_auto_increment() {
        // regression (hostile pg_dump): `nextval('public."we""ird_id_seq"'::regclass)`
        // kept the doubled quote in the sequence name, matched no sequence, and the
        // serial lost its AUTO_INCREMENT.
        let text = "CREATE TABLE public.\"we\"\"ird\" (id integer NOT NULL);\n\
            CREATE SEQUENCE public.\"we\"\"ird_id_seq\" AS integer START WITH 1;\n\
            ALTER SEQUENCE public.\"we\"\"ird_id_seq\" OWNED BY public.\"we\"\"ird\".id;\n\
            ALTER TABLE ONLY public.\"we\"\"ird\" ALTER COLUMN id SET DEFAULT nextval('public.\"we\"\"ird_id_seq\"'::regclass);\n\
            ALTER TABLE ONLY public.\"we\"\"ird\" ADD CONSTRAINT \"we\"\"ird_pkey\" PRIMARY KEY (id);";
        let (out, diags) = sql(Dialect::Postgres, Dialect::MySql, text);
        assert!(
            out.join(";\n").contains("AUTO_INCREMENT"),
            "{out:#?}\n{diags:#?}"
        );
    }

    #[test]
    fn install_scripts_translate_without_errors() {
        // regression (issue 37 items 5 and 8): a DROP TABLE before the table's
        // CREATE, old pg_dump's PROCEDURAL LANGUAGE and PostgreSQL 15's UNIQUE NULLS
        // NOT DISTINCT were errors (exit status 1) though everything translated.
        let text = "DROP TABLE z;\n\
            CREATE OR REPLACE PROCEDURAL LANGUAGE plpgsql;\n\
            CREATE TRUSTED PROCEDURAL LANGUAGE plperl;\n\
            CREATE TABLE z (id int PRIMARY KEY, a int, CONSTRAINT z_a UNIQUE NULLS NOT DISTINCT (a), b int UNIQUE NULLS DISTINCT);\n\
            DROP TABLE z;";
        for target in [Dialect::MySql, Dialect::Postgres, Dialect::Oracle] {
            let (out, diags) = sql(Dialect::Postgres, target, text);
            assert!(
                !diags.iter().any(|d| d.starts_with("error")),
                "{target}: {diags:#?}"
            );
            let all = out.join(";\n").to_lowercase();
            if target == Dialect::Oracle {
                // (Oracle before 23 has no IF EXISTS: a table the input never made
                // is not dropped; the one it made is, plainly.)
                assert!(all.starts_with("create table z"), "{target}: {all}");
                assert!(all.ends_with("drop table z"), "{target}: {all}");
            } else {
                assert!(all.starts_with("drop table if exists z"), "{target}: {all}");
            }
            assert!(all.contains("z_a"), "{target}: {all}");
            assert!(
                diags
                    .iter()
                    .any(|d| d.contains("UNIQUE NULLS NOT DISTINCT: not carried")),
                "{diags:#?}"
            );
            assert!(
                diags
                    .iter()
                    .filter(|d| d.contains("CREATE LANGUAGE"))
                    .count()
                    == 2,
                "{diags:#?}"
            );
        }
    }

    #[test]
    fn an_enum_changed_on_postgres_gets_its_check_again() {
        // regression (issue 36 item 7): `MODIFY e ENUM(...)` with a new value kept the
        // CHECK made at creation on PostgreSQL; the first row with the new value
        // stopped the job.
        let (out, _) = sql(
            Dialect::MySql,
            Dialect::Postgres,
            "CREATE TABLE t (id INT PRIMARY KEY, e ENUM('a','b'));\n\
             ALTER TABLE t MODIFY e ENUM('a','b','c');\n\
             ALTER TABLE t MODIFY e VARCHAR(5);",
        );
        let all = out.join("\n");
        assert!(all.contains("CHECK (e IN ('a', 'b'))"), "{all}");
        let drop = "ALTER TABLE t DROP CONSTRAINT IF EXISTS t_e_check";
        let add = "ALTER TABLE t ADD CONSTRAINT t_e_check CHECK (e IN ('a', 'b', 'c'))";
        assert!(all.contains(drop) && all.contains(add), "{all}");
        assert!(all.find(drop) < all.find(add), "{all}");
        // No longer an enum: the CHECK goes, none comes back.
        assert_eq!(all.matches(drop).count(), 2, "{all}");
        assert_eq!(all.matches("ADD CONSTRAINT t_e_check").count(), 1, "{all}");
        // Renames of the table or the column keep the name a type change looks for
        // (found by the fuzzer: a MODIFY after a RENAME TABLE kept the old CHECK).
        let (out, _) = sql(
            Dialect::MySql,
            Dialect::Postgres,
            "CREATE TABLE a (id INT PRIMARY KEY, e ENUM('x'));\n\
             RENAME TABLE a TO b;\n\
             ALTER TABLE b RENAME COLUMN e TO f;\n\
             ALTER TABLE b MODIFY f ENUM('x','y');",
        );
        let all = out.join("\n");
        for want in [
            "ALTER TABLE b RENAME CONSTRAINT a_e_check TO b_e_check",
            "ALTER TABLE b RENAME CONSTRAINT b_e_check TO b_f_check",
            "ALTER TABLE b DROP CONSTRAINT IF EXISTS b_f_check",
            "ALTER TABLE b ADD CONSTRAINT b_f_check CHECK (f IN ('x', 'y'))",
        ] {
            assert!(all.contains(want), "{want}\n{all}");
        }
    }

    #[test]
    fn a_swap_of_tables_renames_the_enum_checks_of_the_table_it_moves() {
        // regression (found by the fuzzer, MariaDB -> PostgreSQL): in `RENAME TABLE a
        // TO tmp, b TO a, tmp TO b`, the table renamed from `tmp` was not known by
        // that name before the statement, so its CHECK kept `tmp_e_check`; the next
        // swap renamed `b_e_check`, which did not exist, and stopped the job.
        let (out, _) = sql(
            Dialect::MySql,
            Dialect::Postgres,
            "CREATE TABLE a (id INT PRIMARY KEY, e ENUM('x'));\n\
             CREATE TABLE b (id INT PRIMARY KEY);\n\
             RENAME TABLE a TO tmp, b TO a, tmp TO b;\n\
             RENAME TABLE b TO tmp, a TO b, tmp TO a;",
        );
        let all = out.join("\n");
        for want in [
            "ALTER TABLE tmp RENAME CONSTRAINT a_e_check TO tmp_e_check",
            "ALTER TABLE b RENAME CONSTRAINT tmp_e_check TO b_e_check",
            "ALTER TABLE tmp RENAME CONSTRAINT b_e_check TO tmp_e_check",
            "ALTER TABLE a RENAME CONSTRAINT tmp_e_check TO a_e_check",
        ] {
            assert!(all.contains(want), "{want}\n{all}");
        }
        assert_eq!(all.matches("RENAME CONSTRAINT").count(), 4, "{all}");
    }

    #[test]
    fn mariadb_conditional_index_and_key_drops_parse_and_decide_on_the_catalog() {
        // regression (found by the fuzzer's statements of MariaDB's grammar, issue 36
        // item 13): `ADD INDEX IF NOT EXISTS` and `DROP FOREIGN KEY IF EXISTS` did not
        // parse, so a live job stopped on a valid statement.
        let (out, diags) = sql(
            Dialect::MySql,
            Dialect::Postgres,
            "CREATE TABLE t (id INT PRIMARY KEY, c INT, KEY ix (c));\n\
             ALTER TABLE t ADD INDEX IF NOT EXISTS ix (c);\n\
             ALTER TABLE t ADD INDEX IF NOT EXISTS ix2 (c);\n\
             ALTER TABLE t DROP INDEX IF EXISTS nope;\n\
             ALTER TABLE t DROP KEY IF EXISTS ix;\n\
             ALTER TABLE t DROP FOREIGN KEY IF EXISTS fk_none;\n\
             ALTER TABLE t DROP CONSTRAINT IF EXISTS c_none;",
        );
        let all = out.join("\n");
        assert!(
            !diags.iter().any(|d| d.starts_with("error")),
            "{diags:#?}\n{all}"
        );
        // (PostgreSQL index names are per schema: prefixed with the table's.)
        assert_eq!(all.matches("CREATE INDEX t_ix2 ON t").count(), 1, "{all}");
        assert_eq!(all.matches("CREATE INDEX t_ix ON t").count(), 1, "{all}");
        assert_eq!(all.matches("DROP INDEX").count(), 1, "{all}");
        assert!(
            all.contains("DROP INDEX t_ix\n") || all.ends_with("DROP INDEX t_ix"),
            "{all}"
        );
        assert!(
            !all.contains("fk_none") && !all.contains("c_none") && !all.contains("nope"),
            "{all}"
        );
        assert_eq!(
            diags.iter().filter(|d| d.contains("unchanged")).count(),
            4,
            "{diags:#?}"
        );
    }

    #[test]
    fn a_json_column_takes_no_charset_on_mysql_targets() {
        // regression (issue 36 item 8): MariaDB's JSON is utf8mb4_bin underneath and
        // its SHOW CREATE TABLE says so; `JSON CHARACTER SET utf8mb4 COLLATE
        // utf8mb4_bin` was emitted, a syntax error on MariaDB, which stuck a job.
        let (out, _) = sql(
            Dialect::MySql,
            Dialect::MySql,
            "CREATE TABLE t (id INT PRIMARY KEY, j JSON CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, k longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL CHECK (json_valid(`k`)), s VARCHAR(5) CHARACTER SET latin1);",
        );
        assert!(
            out[0].contains("j JSON,") && out[0].contains("k JSON,"),
            "{out:#?}"
        );
        assert!(
            out[0].contains("s VARCHAR(5) CHARACTER SET latin1"),
            "{out:#?}"
        );
    }

    #[test]
    fn forward_foreign_keys_wait_for_their_table() {
        // regression: a dump with FOREIGN_KEY_CHECKS=0 created 5 of 16 tables on
        // PostgreSQL, because inline keys pointed at tables created later.
        let (out, _) = sql(
            Dialect::MySql,
            Dialect::Postgres,
            "CREATE TABLE staff (id int PRIMARY KEY, store_id int, CONSTRAINT fk_staff_store FOREIGN KEY (store_id) REFERENCES store (id));\n\
             CREATE TABLE store (id int PRIMARY KEY, manager int, CONSTRAINT fk_store_staff FOREIGN KEY (manager) REFERENCES staff (id));",
        );
        assert_eq!(out.len(), 3, "{out:#?}");
        assert!(!out[0].contains("REFERENCES"), "{}", out[0]);
        assert!(out[1].contains("fk_store_staff"), "{}", out[1]);
        assert_eq!(
            out[2],
            "ALTER TABLE staff ADD CONSTRAINT fk_staff_store FOREIGN KEY (store_id) REFERENCES store (id)"
        );
    }

    #[test]
    fn a_key_onto_a_table_never_created_comes_last_with_a_warning() {
        let (out, diags) = sql(
            Dialect::MySql,
            Dialect::Postgres,
            "CREATE TABLE c (id int, p int, FOREIGN KEY (p) REFERENCES elsewhere (id));",
        );
        assert_eq!(out.len(), 2, "{out:#?}");
        assert!(out[1].contains("REFERENCES elsewhere (id)"));
        assert!(
            diags.iter().any(|d| d.contains("never creates")),
            "{diags:#?}"
        );
    }

    #[test]
    fn oracle_add_constraint_lists_and_bare_references() {
        // regression: `ADD ( CONSTRAINT ... )` was skipped as a table option: 1 of 7
        // primary keys and 0 of 10 foreign keys arrived.
        let (out, _) = sql(
            Dialect::Oracle,
            Dialect::Postgres,
            "CREATE TABLE emp (id NUMBER(6), mgr NUMBER(6));\n\
             CREATE UNIQUE INDEX emp_pk ON emp (id);\n\
             ALTER TABLE emp ADD ( CONSTRAINT emp_pk PRIMARY KEY (id) USING INDEX TABLESPACE users ENABLE\n\
               , CONSTRAINT emp_mgr_fk FOREIGN KEY (mgr) REFERENCES emp ) ;",
        );
        let text = out.join(";\n");
        assert!(
            text.contains("ADD CONSTRAINT emp_pk PRIMARY KEY (id)"),
            "{text}"
        );
        assert!(text.contains("DROP INDEX emp_pk"), "{text}");
        assert!(
            text.contains("FOREIGN KEY (mgr) REFERENCES emp (id)"),
            "{text}"
        );
    }

    #[test]
    fn key_columns_take_the_referenced_type() {
        // regression: an identity on NUMBER became bigint while the column referencing
        // it stayed numeric, so the key could not be created.
        let (out, diags) = sql(
            Dialect::Oracle,
            Dialect::Postgres,
            "CREATE TABLE p (id NUMBER GENERATED BY DEFAULT AS IDENTITY START WITH 100 PRIMARY KEY);\n\
             CREATE TABLE c (id NUMBER PRIMARY KEY, p_id NUMBER REFERENCES p);\n\
             CREATE TABLE d (id NUMBER PRIMARY KEY, p_id NUMBER);\n\
             ALTER TABLE d ADD CONSTRAINT d_fk FOREIGN KEY (p_id) REFERENCES p (id);",
        );
        let text = out.join(";\n");
        assert!(text.contains("START WITH 100"), "{text}");
        assert!(text.contains("p_id bigint"), "{text}");
        assert!(
            text.contains("ALTER TABLE d ALTER COLUMN p_id TYPE bigint"),
            "{text}"
        );
        assert!(diags.iter().any(|d| d.contains("to match the column")));
        let (out, _) = sql(
            Dialect::Oracle,
            Dialect::MySql,
            "CREATE TABLE p (id NUMBER GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, code CLOB UNIQUE);",
        );
        assert!(out[0].contains("id BIGINT"), "{}", out[0]);
        assert!(out[0].contains("code VARCHAR(768)"), "{}", out[0]);
    }

    /// A reader that hands out a few bytes at a time.
    struct Trickle<'a>(&'a [u8], usize);

    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.1.min(self.0.len()).min(buf.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            self.1 = self.1 % 7 + 1;
            Ok(n)
        }
    }

    fn flat(rs: Vec<StatementResult>) -> Vec<String> {
        rs.into_iter()
            .flat_map(|r| {
                let mut v = vec![format!("@{}:{}", r.line, r.column)];
                v.extend(r.output);
                v.extend(
                    r.diagnostics
                        .into_iter()
                        .map(|(l, c, d)| format!("{l}:{c} {}: {}", d.severity, d.message)),
                );
                v
            })
            .collect()
    }

    #[test]
    fn read_in_parts_as_in_one() {
        let cases = [
            (
                Dialect::MySql,
                "CREATE TABLE \u{e9}t\u{e9} (a int); CREATE TABLE b (x int DEFAULT 'caf\u{e9};');\nDELIMITER ;;\nCREATE TRIGGER t BEFORE INSERT ON b FOR EACH ROW BEGIN SET NEW.x = 1; END;;\nDELIMITER ;\nuse shop\nALTER TABLE b ADD COLUMN y notatype;\nALTER TABLE b ADD z int; /* never closed",
            ),
            (
                Dialect::Postgres,
                "\\restrict k\nCREATE TABLE t (a int);\nCOPY t (a) FROM stdin;\n1\n2;\n\\.\nCREATE FUNCTION f() RETURNS int AS $$ select 1; $$ LANGUAGE sql;\nALTER TABLE t ADD b text;",
            ),
            (
                Dialect::Oracle,
                "Rem x\nPROMPT making t\nCREATE TABLE t (a NUMBER);\nBEGIN\n  NULL;\nEND;\n/\nALTER TABLE t ADD ( CONSTRAINT pk PRIMARY KEY (a) );\n",
            ),
        ];
        for (d, text) in cases {
            let whole = flat(Translator::new(d, Target::Sql(Dialect::Postgres)).translate(text));
            let mut parts = Vec::new();
            let mut tr = Translator::new(d, Target::Sql(Dialect::Postgres));
            tr.translate_reader(Trickle(text.as_bytes(), 1), |r| parts.push(r))
                .unwrap();
            assert_eq!(flat(parts), whole, "{d:?}");
            assert!(whole.len() > 4);
        }
    }

    #[test]
    fn an_index_on_a_view_is_skipped_by_name() {
        // (pagila's rental_category and AdventureWorks' view indexes were skipped
        // without their names: a reader could not find them accounted for.)
        let text = "CREATE MATERIALIZED VIEW public.mv AS SELECT 1 AS c;\n\
            CREATE UNIQUE INDEX mv_c ON public.mv USING btree (c);\n";
        let (_, diags) = sql(Dialect::Postgres, Dialect::MySql, text);
        assert!(
            diags
                .iter()
                .any(|d| d.starts_with("skipped") && d.contains("index mv_c on public.mv")),
            "{diags:#?}"
        );
    }

    #[test]
    fn a_sequence_no_column_owns_makes_its_first_column_auto_increment_in_mysql() {
        // regression (pagila): `DEFAULT nextval(...)` of a sequence made without OWNED
        // BY lost its meaning in MySQL (a warning each, no AUTO_INCREMENT).
        let text = "CREATE SEQUENCE public.actor_actor_id_seq START WITH 1 INCREMENT BY 1 NO MINVALUE NO MAXVALUE CACHE 1;\n\
            ALTER SEQUENCE public.actor_actor_id_seq OWNER TO postgres;\n\
            CREATE TABLE public.actor (actor_id integer DEFAULT nextval('public.actor_actor_id_seq'::regclass) NOT NULL, name text);\n\
            ALTER TABLE ONLY public.actor ADD CONSTRAINT actor_pkey PRIMARY KEY (actor_id);\n\
            CREATE TABLE public.other (x integer DEFAULT nextval('public.actor_actor_id_seq'::regclass) NOT NULL);\n\
            CREATE SEQUENCE public.s2 START WITH 5;\n\
            CREATE TABLE public.late (id integer NOT NULL);\n\
            ALTER TABLE ONLY public.late ALTER COLUMN id SET DEFAULT nextval('public.s2'::regclass);\n\
            ALTER TABLE ONLY public.late ADD CONSTRAINT late_pkey PRIMARY KEY (id);\n";
        let (out, diags) = sql(Dialect::Postgres, Dialect::MySql, text);
        let all = out.join(";\n");
        assert!(!diags.iter().any(|d| d.starts_with("error")), "{diags:#?}");
        assert!(
            all.contains("MODIFY COLUMN actor_id INT NOT NULL AUTO_INCREMENT"),
            "{all}"
        );
        assert!(
            all.contains("MODIFY COLUMN id INT NOT NULL AUTO_INCREMENT"),
            "{all}"
        );
        assert!(all.contains("AUTO_INCREMENT = 5"), "{all}");
        // The second column on the same sequence keeps the warning.
        assert!(!all.contains("x INT NOT NULL AUTO_INCREMENT"), "{all}");
        assert!(
            diags
                .iter()
                .any(|d| d.contains("public.other.x: DEFAULT nextval")),
            "{diags:#?}"
        );
        assert!(
            diags
                .iter()
                .any(|d| d.contains("public.actor.actor_id: its default draws from sequence")),
            "{diags:#?}"
        );
        // PostgreSQL keeps the sequence and the default.
        let (out, _) = sql(Dialect::Postgres, Dialect::Postgres, text);
        let all = out.join(";\n");
        assert!(all.contains("nextval('public.actor_actor_id_seq'"), "{all}");
    }

    #[test]
    fn pg_dump_objects_keep_their_meaning() {
        // regression: domains became LONGTEXT, enum columns lost their table (a cast to
        // a schema-qualified type in the default), nextval() defaults were dropped,
        // INHERITS gave `CREATE TABLE c ( )`, OWNER TO was an error (ALTER SEQUENCE's
        // too: pg_dump writes it for every sequence of a dump made with owners).
        let text = "CREATE SCHEMA s;\n\
            CREATE DOMAIN s.pos AS integer NOT NULL CONSTRAINT pos_check CHECK (VALUE > 0);\n\
            CREATE TYPE s.mood AS ENUM ('ok', 'sad');\n\
            CREATE TABLE s.p (id integer NOT NULL, n s.pos, m s.mood DEFAULT 'ok'::s.mood);\n\
            ALTER TABLE s.p OWNER TO postgres;\n\
            CREATE SEQUENCE s.p_id_seq START WITH 7 INCREMENT BY 1 CACHE 1;\n\
            ALTER TABLE s.p_id_seq OWNER TO postgres;\n\
            ALTER SEQUENCE s.p_id_seq OWNER TO postgres;\n\
            ALTER SEQUENCE s.p_id_seq OWNED BY s.p.id;\n\
            ALTER TABLE ONLY s.p ALTER COLUMN id SET DEFAULT nextval('s.p_id_seq'::regclass);\n\
            ALTER TABLE ONLY s.p ADD CONSTRAINT p_pkey PRIMARY KEY (id);\n\
            CREATE TABLE s.c (x text) INHERITS (s.p);\n\
            CREATE TABLE s.part (k int) PARTITION BY RANGE (k);\n\
            CREATE TABLE s.part_1 (k int);\n\
            ALTER TABLE ONLY s.part ATTACH PARTITION s.part_1 FOR VALUES FROM (1) TO (10);\n";
        let (out, diags) = sql(Dialect::Postgres, Dialect::MySql, text);
        let all = out.join(";\n");
        assert!(!diags.iter().any(|d| d.starts_with("error")), "{diags:#?}");
        assert!(all.contains("n INT NOT NULL"), "{all}");
        assert!(
            all.contains("CONSTRAINT p_n_pos_check CHECK (n > 0)"),
            "{all}"
        );
        assert!(all.contains("m ENUM('ok','sad') DEFAULT 'ok'"), "{all}");
        assert!(
            all.contains("MODIFY COLUMN id INT NOT NULL AUTO_INCREMENT"),
            "{all}"
        );
        assert!(all.contains("AUTO_INCREMENT = 7"), "{all}");
        // the child has the parent's columns, then its own
        assert!(
            all.contains("CREATE TABLE s.c (\n  id INT NOT NULL,\n  n INT NOT NULL,"),
            "{all}"
        );
        for skipped in ["OWNER TO", "ATTACH PARTITION", "sequence s.p_id_seq"] {
            assert!(
                diags
                    .iter()
                    .any(|d| d.starts_with("skipped") && d.contains(skipped)),
                "{skipped}: {diags:#?}"
            );
        }
        assert!(diags.iter().any(|d| d.contains("inheritance from s.p")));
        // PostgreSQL again: an identity with its start.
        let (out, _) = sql(Dialect::Postgres, Dialect::Postgres, text);
        assert!(
            out.join(";")
                .contains("ADD GENERATED BY DEFAULT AS IDENTITY (START WITH 7)"),
            "{out:#?}"
        );
    }

    #[test]
    fn partial_unique_indexes_are_kept_or_named() {
        // regression: `... WHERE deleted_at IS NULL` became a full unique index.
        let text =
            "CREATE TABLE u (id int PRIMARY KEY, email varchar(80), deleted_at timestamp);\n\
            CREATE UNIQUE INDEX u_live ON u (email) WHERE deleted_at IS NULL;\n\
            CREATE UNIQUE INDEX u_odd ON u (email) WHERE email ~* '^x';\n\
            CREATE INDEX u_part ON u (email) WHERE email ~* '^x';";
        let (out, diags) = sql(Dialect::Postgres, Dialect::Oracle, text);
        let all = out.join(";\n");
        assert!(
            all.contains(
                "CREATE UNIQUE INDEX U_LIVE ON U (CASE WHEN DELETED_AT IS NULL THEN EMAIL END)"
            ),
            "{all}"
        );
        assert!(!all.contains("U_ODD"), "{all}");
        assert!(diags
            .iter()
            .any(|d| d.starts_with("warning") && d.contains("u_odd")));
        assert!(all.contains("CREATE INDEX U_PART ON U (EMAIL)"), "{all}");
        let (out, _) = sql(Dialect::Postgres, Dialect::MySql, text);
        let all = out.join(";\n");
        assert!(
            all.contains(
                "GENERATED ALWAYS AS (CASE WHEN deleted_at IS NULL THEN email END) VIRTUAL"
            ),
            "{all}"
        );
        assert!(
            all.contains("ADD UNIQUE INDEX u_live (u_live_email)"),
            "{all}"
        );
        let (out, _) = sql(Dialect::Postgres, Dialect::Postgres, text);
        assert!(out.join(";").contains("WHERE deleted_at IS NULL"));
    }

    #[test]
    fn hex_literal_defaults_are_bytes_or_numbers_by_their_column() {
        // regression: X'AB' was the number 171 in every column (a VARBINARY default
        // became DEFAULT 171, refused by PostgreSQL, and 171's text in Iceberg's fill),
        // 0x41FF was not read, and pg_dump's '\xab'::bytea was the 4-character text.
        let text = "CREATE TABLE shop.h (id int PRIMARY KEY, b VARBINARY(4) DEFAULT X'AB', \
             bl BLOB DEFAULT (0x00ff), n INT DEFAULT 0x10, s VARCHAR(4) DEFAULT X'4142', \
             f BIT(8) DEFAULT X'0F', u BINARY(2) DEFAULT 0xABC, e VARCHAR(4) DEFAULT X'', \
             p BINARY(4) DEFAULT X'01', q VARBINARY(2) DEFAULT b'101', r INT DEFAULT 0b11);\n\
             ALTER TABLE shop.h ALTER COLUMN s SET DEFAULT X'43';";
        let (pg, diags) = sql(Dialect::MySql, Dialect::Postgres, text);
        let all = pg.join(";\n");
        for want in [
            "b bytea DEFAULT '\\xab'::bytea",
            "bl bytea DEFAULT '\\x00ff'::bytea",
            "n integer DEFAULT 16",
            "DEFAULT 'AB'",
            "DEFAULT B'00001111'",
            "DEFAULT '\\x0abc'::bytea",
            "DEFAULT ''",
            "SET DEFAULT 'C'",
            "p bytea DEFAULT '\\x01000000'::bytea",
            "q bytea DEFAULT '\\x05'::bytea",
            "r integer DEFAULT 3",
        ] {
            assert!(all.contains(want), "{want} in\n{all}\n{diags:#?}");
        }
        assert!(!diags.iter().any(|d| d.starts_with("error")), "{diags:#?}");
        let (my, _) = sql(Dialect::MySql, Dialect::MySql, text);
        let all = my.join(";\n");
        assert!(
            all.contains("DEFAULT X'ab'") && all.contains("DEFAULT 16"),
            "{all}"
        );
        let (ora, _) = sql(Dialect::MySql, Dialect::Oracle, text);
        assert!(ora.join("\n").contains("HEXTORAW('AB')"), "{ora:?}");
        // Character set introducers (MySQL 8's SHOW CREATE TABLE writes them).
        let (pg, diags) = sql(
            Dialect::MySql,
            Dialect::Postgres,
            "CREATE TABLE i (a VARCHAR(4) DEFAULT _latin1 X'41', b VARCHAR(4) DEFAULT _utf8mb4'bc', \
             c VARCHAR(4) DEFAULT _latin1 'd', d INT DEFAULT _binary 0x0F);",
        );
        let all = pg.join(";\n");
        for want in ["DEFAULT 'A'", "DEFAULT 'bc'", "DEFAULT 'd'", "DEFAULT 15"] {
            assert!(all.contains(want), "{want} in\n{all}\n{diags:#?}");
        }
        // And back: pg_dump's form of a bytea default is the same bytes.
        let (my, _) = sql(
            Dialect::Postgres,
            Dialect::MySql,
            "CREATE TABLE p (b bytea DEFAULT '\\xab01'::bytea, t text DEFAULT '\\xab'::text, \
             e bytea DEFAULT 'a\\\\b\\001', x bytea DEFAULT '\\x', \
             y bytea DEFAULT E'\\\\x01ff', z text DEFAULT E'tab\\there\\101');",
        );
        let all = my.join(";\n");
        for want in [
            "X'ab01'",
            "'\\\\xab'",
            "X'615c6201'",
            "X''",
            "X'01ff'",
            "'tab\thereA'",
        ] {
            assert!(all.contains(want), "{want} in {all}");
        }
    }

    #[test]
    fn deferrable_column_keys_and_included_columns_parse() {
        // regression: a column's `PRIMARY KEY DEFERRABLE` / `UNIQUE DEFERRABLE` and a
        // key's `INCLUDE (...)` (pg_get_constraintdef writes it) did not parse; a live
        // job stopped at such a table even when it did not capture it.
        let (out, diags) = sql(
            Dialect::Postgres,
            Dialect::Postgres,
            "CREATE TABLE z (id int PRIMARY KEY DEFERRABLE, u int UNIQUE DEFERRABLE INITIALLY DEFERRED, v int);\n\
             CREATE TABLE w (id int, v int, CONSTRAINT w_pk PRIMARY KEY (id) INCLUDE (v) WITH (fillfactor = 70));",
        );
        let all = out.join(";\n");
        assert!(all.contains("PRIMARY KEY (id)"), "{all}");
        assert!(all.contains("UNIQUE"), "{all}");
        assert!(!diags.iter().any(|d| d.starts_with("error")), "{diags:#?}");
        for want in ["`DEFERRABLE` is not carried", "`INCLUDE`"] {
            assert!(diags.iter().any(|d| d.contains(want)), "{want}: {diags:#?}");
        }
    }

    #[test]
    fn character_set_binary_is_a_byte_type() {
        // regression: `VARCHAR(10) CHARACTER SET binary` (MySQL's VARBINARY(10)) became
        // a text column, so its bytes went into text.
        let ddl = "CREATE TABLE b (v VARCHAR(10) CHARACTER SET binary, c CHAR(4) CHARSET binary, \
                   t TEXT CHARACTER SET binary, s VARCHAR(3) CHARACTER SET latin1);";
        let (pg, diags) = sql(Dialect::MySql, Dialect::Postgres, ddl);
        let all = pg.join(";\n");
        assert_eq!(all.matches("bytea").count(), 3, "{all}\n{diags:#?}");
        assert!(all.contains("s varchar(3)"), "{all}");
        let (my, _) = sql(Dialect::MySql, Dialect::MySql, ddl);
        let all = my.join(";\n");
        for want in ["VARBINARY(10)", "BINARY(4)", "BLOB"] {
            assert!(all.contains(want), "{want} in {all}");
        }
    }

    #[test]
    fn smaller_mysql_forms() {
        // regression: BIT defaults became numbers PostgreSQL refuses, AUTO_INCREMENT=N
        // was dropped, and `REFERENCES t` in a qualified table stayed unqualified.
        let (out, diags) = sql(
            Dialect::MySql,
            Dialect::Postgres,
            "CREATE TABLE shop.p (id int AUTO_INCREMENT PRIMARY KEY, f BIT(3) NOT NULL DEFAULT b'101') AUTO_INCREMENT=101;\n\
             CREATE TABLE shop.c (id int PRIMARY KEY, p int, FOREIGN KEY (p) REFERENCES p (id));\n\
             ALTER TABLE shop.c PARTITION BY HASH (id) PARTITIONS 4;\n\
             source more.sql\n",
        );
        let all = out.join(";\n");
        assert!(all.contains("DEFAULT B'101'"), "{all}");
        assert!(all.contains("IDENTITY (START WITH 101)"), "{all}");
        assert!(all.contains("REFERENCES shop.p (id)"), "{all}");
        assert!(diags
            .iter()
            .any(|d| d.contains("partitioning is not translated")));
        assert!(diags.iter().any(|d| d.contains("source more.sql")));
        assert!(!diags.iter().any(|d| d.starts_with("error")), "{diags:#?}");
    }

    #[test]
    fn column_constraints_keep_their_names() {
        // regression: `CONSTRAINT name` before a column constraint was dropped, so the
        // target named it and a later DROP CONSTRAINT name failed.
        let (out, _) = sql(
            Dialect::Postgres,
            Dialect::MySql,
            "CREATE TABLE t (a int CONSTRAINT a_pos CHECK (a > 0) CONSTRAINT a_uk UNIQUE, b int CONSTRAINT b_fk REFERENCES t (a));",
        );
        let all = out.join(";\n");
        for n in [
            "CONSTRAINT a_pos CHECK (a > 0)",
            "UNIQUE KEY a_uk (a)",
            "CONSTRAINT b_fk FOREIGN KEY (b)",
        ] {
            assert!(all.contains(n), "{n}: {all}");
        }
    }

    #[test]
    fn pg_storage_settings_like_tables_and_long_keys_into_mysql() {
        // regression: SET STATISTICS and (LIKE t INCLUDING ALL) were errors; an index
        // on a text column and MariaDB's json_valid CHECK did not survive the trip.
        let (out, diags) = sql(
            Dialect::Postgres,
            Dialect::MySql,
            "CREATE TABLE t (id int PRIMARY KEY, body text, meta jsonb);\n\
             ALTER TABLE ONLY t ALTER COLUMN body SET STATISTICS 1000;\n\
             CREATE TABLE u (LIKE t INCLUDING ALL);\n\
             CREATE INDEX t_body ON t (body);\n\
             CREATE INDEX t_meta ON t USING gin (meta);",
        );
        assert!(!diags.iter().any(|d| d.starts_with("error")), "{diags:#?}");
        let all = out.join(";\n");
        assert!(all.contains("CREATE TABLE u ("), "{all}");
        assert!(all.contains("ADD INDEX t_body (body(255))"), "{all}");
        assert!(!all.contains("t_meta"), "{all}");
        let (out, _) = sql(
            Dialect::MySql,
            Dialect::Postgres,
            "CREATE TABLE j (id int PRIMARY KEY, attrs longtext DEFAULT NULL CHECK (json_valid(`attrs`)));",
        );
        assert!(out[0].contains("attrs json"), "{}", out[0]);
        assert!(!out[0].contains("CHECK"), "{}", out[0]);
    }

    #[test]
    fn what_refers_to_skipped_relations_is_skipped() {
        // regression: an index or comment on a view (pg_dump writes both) was an error.
        let (out, diags) = sql(
            Dialect::Postgres,
            Dialect::MySql,
            "CREATE TABLE t (a int);\n\
             CREATE MATERIALIZED VIEW mv AS SELECT a FROM t;\n\
             CREATE UNIQUE INDEX mv_a ON mv (a);\n\
             COMMENT ON COLUMN mv.a IS 'y';\n\
             CREATE VIEW v AS SELECT a FROM t;\n\
             ALTER TABLE ONLY v ALTER COLUMN a SET DEFAULT 1;\n\
             CREATE TABLE q AS SELECT * FROM t;\n\
             CREATE INDEX q_a ON q (a);",
        );
        assert_eq!(out.len(), 1);
        assert!(!diags.iter().any(|d| d.starts_with("error")), "{diags:#?}");
        assert_eq!(
            diags
                .iter()
                .filter(|d| d.contains("not a translated table")
                    || d.contains("not of a translated table"))
                .count(),
            4,
            "{diags:#?}"
        );
    }

    #[test]
    fn hostile_strings_in_defaults_and_checks() {
        // regression: a NUL in a default reached PostgreSQL, which refuses it.
        let (out, diags) = sql(
            Dialect::MySql,
            Dialect::Postgres,
            "CREATE TABLE t (a varchar(5) DEFAULT 'x\\y', b text DEFAULT '\0', c varchar(3) CHECK (c <> 'it''s'));",
        );
        assert!(out[0].contains("DEFAULT 'xy'"), "{}", out[0]);
        assert!(out[0].contains("CHECK (c <> 'it''s')"), "{}", out[0]);
        assert!(!out[0].contains('\0'), "{:?}", out[0]);
        assert!(
            diags.iter().any(|d| d.contains("NUL character")),
            "{diags:#?}"
        );
    }

    #[test]
    fn many_added_columns_still_refuse_a_duplicate() {
        let mut text = String::from("CREATE TABLE t (id int PRIMARY KEY);\n");
        for i in 0..50 {
            text.push_str(&format!("ALTER TABLE t ADD COLUMN c{i} int;\n"));
        }
        // MySQL column names ignore case: C7 is c7.
        text.push_str("ALTER TABLE t ADD COLUMN C7 int;\nALTER TABLE t DROP COLUMN c8;\nALTER TABLE t ADD COLUMN c8 int;\nALTER TABLE t ADD COLUMN c8 int;\n");
        let mut tr = Translator::new(Dialect::MySql, Target::Sql(Dialect::Postgres));
        let rs = tr.translate(&text);
        let failed: Vec<usize> = rs.iter().filter(|r| r.failed()).map(|r| r.line).collect();
        assert_eq!(failed, [52, 55]);
        let t = tr.catalog.table(&TableName::new(None, "t")).unwrap();
        assert_eq!(t.columns.len(), 51);
    }

    #[test]
    fn text_of_one_dialect_is_kept_for_it_and_named_elsewhere() {
        // regression: a PostgreSQL USING conversion into MySQL was dropped without a
        // word (the IR kept it as untagged text); a MySQL table's engine and
        // partitioning stay reported for PostgreSQL and kept for MySQL.
        let pg = "CREATE TABLE t (id int PRIMARY KEY, a text); ALTER TABLE t ALTER COLUMN a TYPE int USING a::int;";
        let (out, diags) = sql(Dialect::Postgres, Dialect::Postgres, pg);
        assert!(out[1].contains("USING a::int"), "{out:?}");
        assert!(diags.is_empty(), "{diags:?}");
        let (out, diags) = sql(Dialect::Postgres, Dialect::MySql, pg);
        assert!(!out[1].contains("USING"), "{out:?}");
        assert!(
            diags
                .iter()
                .any(|d| d.contains("USING a::int (postgres) is not carried")),
            "{diags:#?}"
        );
        let my =
            "CREATE TABLE t (id int PRIMARY KEY) ENGINE=InnoDB PARTITION BY HASH(id) PARTITIONS 4;";
        let (out, _) = sql(Dialect::MySql, Dialect::MySql, my);
        assert!(
            out[0].contains("ENGINE=InnoDB PARTITION BY HASH(id)"),
            "{out:?}"
        );
        let (out, diags) = sql(Dialect::MySql, Dialect::Postgres, my);
        assert!(
            !out[0].contains("ENGINE") && !out[0].contains("PARTITION"),
            "{out:?}"
        );
        assert!(
            diags.iter().any(|d| d.contains("engine=InnoDB")),
            "{diags:#?}"
        );
        assert!(
            diags.iter().any(|d| d.contains("partitioning")),
            "{diags:#?}"
        );
    }

    #[test]
    fn mysql_zero_dates_are_not_defaults_elsewhere() {
        // regression (mariadb-dump of MariaDB's own `mysql` database): PostgreSQL
        // refused `DEFAULT '0000-00-00 00:00:00'` and the table was lost.
        let text = "CREATE TABLE e (id int PRIMARY KEY, modified timestamp NOT NULL DEFAULT '0000-00-00 00:00:00', d date NOT NULL DEFAULT '0000-00-00', ok datetime DEFAULT '2020-01-02 03:04:05');";
        for target in [Dialect::Postgres, Dialect::Oracle] {
            let (out, diags) = sql(Dialect::MySql, target, text);
            assert!(!out[0].contains("0000-00-00"), "{}", out[0]);
            assert!(out[0].contains("2020-01-02 03:04:05"), "{}", out[0]);
            assert_eq!(
                diags.iter().filter(|d| d.contains("zero date")).count(),
                2,
                "{diags:#?}"
            );
        }
        let (out, _) = sql(Dialect::MySql, Dialect::MySql, text);
        assert!(out[0].contains("'0000-00-00 00:00:00'"), "{}", out[0]);
    }

    #[test]
    fn a_domain_named_like_a_type_word() {
        // regression (PostgreSQL's own information_schema.sql): a column of domain
        // `character_data` lost its table.
        let (out, diags) = sql(
            Dialect::Postgres,
            Dialect::MySql,
            "CREATE DOMAIN character_data AS character varying COLLATE \"C\";\n\
             CREATE TABLE sql_features (feature_id character_data, comments character_data);",
        );
        assert!(!diags.iter().any(|d| d.starts_with("error")), "{diags:#?}");
        assert!(out[0].contains("feature_id LONGTEXT"), "{}", out[0]);
    }

    #[test]
    fn a_partition_becomes_a_table_with_its_parents_columns_and_keys() {
        // Issue 37 item 4: `CREATE TABLE ... PARTITION OF` was skipped (its rows are
        // the parent's in a sync); translated, it is a table of its own, reported.
        let text = "CREATE TABLE m (id int NOT NULL, at date NOT NULL, code text REFERENCES c (code), \
                    CONSTRAINT m_pk PRIMARY KEY (id, at), CONSTRAINT pos CHECK (id > 0)) PARTITION BY RANGE (at);\n\
                    CREATE TABLE c (code text PRIMARY KEY);\n\
                    CREATE TABLE m2026 PARTITION OF m FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');\n\
                    CREATE INDEX m2026_at ON m2026 (at);";
        for target in [Dialect::MySql, Dialect::Postgres] {
            let (out, diags) = sql(Dialect::Postgres, target, text);
            assert!(!diags.iter().any(|d| d.starts_with("error")), "{diags:#?}");
            let part = out
                .iter()
                .find(|s| s.starts_with("CREATE TABLE m2026"))
                .unwrap_or_else(|| panic!("{target}: {out:#?}"));
            for want in [
                "id ",
                "at ",
                "code ",
                "PRIMARY KEY (id, at)",
                "CHECK",
                "REFERENCES c",
            ] {
                assert!(part.contains(want), "{target}: {want}: {part}");
            }
            assert!(
                !part.contains("m_pk") && !part.to_lowercase().contains("partition"),
                "{part}"
            );
            assert!(
                out.iter().any(|s| s.contains("m2026_at")),
                "the partition's own index: {out:#?}"
            );
            assert!(
                diags
                    .iter()
                    .any(|d| d.contains("m2026: a partition of m, made a table of its own")),
                "{diags:#?}"
            );
        }
        // The IR (a sync's schema history) keeps a partition's rows its parent's.
        let mut tr = Translator::new(Dialect::Postgres, Target::Ir);
        let rs = tr.translate(text);
        assert!(rs[2].output.is_empty(), "{:?}", rs[2].output);
        assert!(tr.catalog.table(&TableName::new(None, "m2026")).is_none());
    }

    #[test]
    fn extensions_and_functions_are_carried_into_postgres_as_written() {
        // regression (held-out pg_dumps into PostgreSQL): a default calling
        // uuid_generate_v4() and a CHECK calling the schema's own function failed,
        // and their tables were lost, since extensions and functions were skipped.
        let text = "CREATE EXTENSION IF NOT EXISTS \"uuid-ossp\" WITH SCHEMA public;\n\
            CREATE FUNCTION public.ok(v jsonb) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$ SELECT v IS NOT NULL; $$;\n\
            CREATE TABLE public.t (id uuid DEFAULT public.uuid_generate_v4(), d jsonb, CONSTRAINT d_ok CHECK (public.ok(d)));";
        let (out, diags) = sql(Dialect::Postgres, Dialect::Postgres, text);
        assert!(
            out[0].starts_with("CREATE EXTENSION IF NOT EXISTS \"uuid-ossp\""),
            "{out:#?}"
        );
        assert!(
            out[1].starts_with("CREATE FUNCTION public.ok") && out[1].ends_with("$$"),
            "{out:#?}"
        );
        assert!(
            out[2].contains("uuid_generate_v4()") && out[2].contains("d_ok"),
            "{out:#?}"
        );
        assert!(!diags.iter().any(|d| d.starts_with("error")), "{diags:#?}");
        let (out, diags) = sql(Dialect::Postgres, Dialect::MySql, text);
        assert!(out[0].starts_with("CREATE TABLE"), "{out:#?}");
        assert_eq!(
            diags.iter().filter(|d| d.starts_with("skipped")).count(),
            2,
            "{diags:#?}"
        );
    }

    #[test]
    fn what_a_hostile_tester_found_in_oracle_scripts() {
        // regression: `CREATE BITMAP INDEX` was an error; an Oracle owner's schema
        // was never made on PostgreSQL (every statement refused).
        let text = "CREATE TABLE \"HR\".\"DEPT\" (\"DEPTNO\" NUMBER(2,0), \"ACTIVE\" CHAR(1), CONSTRAINT \"PK_DEPT\" PRIMARY KEY (\"DEPTNO\"));\n\
                    CREATE BITMAP INDEX \"HR\".\"DEPT_ACTIVE_BX\" ON \"HR\".\"DEPT\" (\"ACTIVE\");";
        let (out, diags) = sql(Dialect::Oracle, Dialect::Postgres, text);
        assert!(!diags.iter().any(|d| d.starts_with("error")), "{diags:#?}");
        assert_eq!(out[0], "CREATE SCHEMA IF NOT EXISTS hr", "{out:#?}");
        assert!(
            out.iter()
                .any(|s| s.starts_with("CREATE INDEX dept_active_bx")),
            "{out:#?}"
        );
        assert!(
            diags.iter().any(|d| d.contains("bitmap index")),
            "{diags:#?}"
        );
        // regression: ON NULL was dropped without a word.
        let (_, diags) = sql(
            Dialect::Oracle,
            Dialect::Postgres,
            "CREATE TABLE o (id NUMBER GENERATED BY DEFAULT ON NULL AS IDENTITY, n NUMBER DEFAULT ON NULL 0);",
        );
        for c in ["O.ID: `BY DEFAULT ON NULL`", "O.N: `DEFAULT ON NULL`"] {
            assert!(diags.iter().any(|d| d.contains(c)), "{c}: {diags:#?}");
        }
    }

    #[test]
    fn quoted_type_names_and_whole_default_expressions() {
        // regression: pg_dump --quote-all-identifiers quotes type names ("text",
        // "int8"): every such column became LONGTEXT, and a key on one was refused.
        let text = "CREATE TABLE \"public\".\"c\" (\"d\" \"date\", \"t\" \"text\" NOT NULL, \"u\" \"uuid\", \"i8\" \"int8\", \"m\" \"Mood\");";
        let (out, diags) = sql(Dialect::Postgres, Dialect::MySql, text);
        for want in ["d DATE", "u CHAR(36)", "i8 BIGINT", "t LONGTEXT NOT NULL"] {
            assert!(out[0].contains(want), "{want}: {}", out[0]);
        }
        assert!(diags.iter().any(|d| d.contains("\"Mood\"")), "{diags:#?}");
        // regression: `curdate() + interval 1 day` became CURRENT_DATE, another value.
        let (out, diags) = sql(
            Dialect::MySql,
            Dialect::Postgres,
            "CREATE TABLE t (l date DEFAULT (curdate() + interval 1 day), n date DEFAULT (curdate()));",
        );
        assert!(
            out[0].contains("l date,") || out[0].contains("l date\n"),
            "{}",
            out[0]
        );
        assert!(out[0].contains("n date DEFAULT CURRENT_DATE"), "{}", out[0]);
        assert!(diags.iter().any(|d| d.contains("t.l")), "{diags:#?}");
        // regression (a Django dump): MySQL has no NaN, and refused the table.
        let (out, diags) = sql(
            Dialect::Postgres,
            Dialect::MySql,
            "CREATE TABLE t (amount double precision DEFAULT 'NaN'::double precision, b real DEFAULT '-Infinity');",
        );
        assert!(!out[0].contains("DEFAULT"), "{}", out[0]);
        assert_eq!(
            diags
                .iter()
                .filter(|d| d.contains("has no mysql value"))
                .count(),
            2,
            "{diags:#?}"
        );
    }

    #[test]
    fn what_a_second_hostile_round_found() {
        // Oracle -> PostgreSQL: a default drawing from a sequence needs it made
        // (the table was refused: relation "s1" does not exist).
        let (out, _) = sql(
            Dialect::Oracle,
            Dialect::Postgres,
            "CREATE SEQUENCE s1 START WITH 100 INCREMENT BY 5;\nCREATE TABLE t (id NUMBER(19) DEFAULT s1.NEXTVAL PRIMARY KEY);",
        );
        assert_eq!(
            out[0], "CREATE SEQUENCE IF NOT EXISTS s1 INCREMENT BY 5 START WITH 100",
            "{out:#?}"
        );
        // PostgreSQL -> PostgreSQL: a sequence no column owns (Hibernate's) is made
        // as written, every option kept; a composite type is carried; a domain over
        // a domain keeps the whole chain's CHECKs.
        let text = "CREATE SEQUENCE public.hibernate_sequence START WITH 1000 INCREMENT BY 50 MINVALUE 1000 MAXVALUE 999999 CACHE 20 CYCLE;\n\
            CREATE TYPE address AS (street text, zip char(5));\n\
            CREATE DOMAIN posint AS integer CHECK (VALUE > 0);\n\
            CREATE DOMAIN smallpos AS posint CHECK (VALUE < 100);\n\
            CREATE TABLE c (id int PRIMARY KEY, ship address, w smallpos NOT NULL, tags int[] DEFAULT '{}', names text[] DEFAULT '{a,b}');";
        let (out, diags) = sql(Dialect::Postgres, Dialect::Postgres, text);
        assert!(out[0].starts_with("CREATE TYPE address AS ("), "{out:#?}");
        assert!(
            out[1].contains("ship address") && out[1].contains("w integer NOT NULL"),
            "{out:#?}"
        );
        assert!(
            out[1].contains("w > 0") && out[1].contains("w < 100"),
            "{out:#?}"
        );
        assert_eq!(
            out.last().map(String::as_str),
            Some("CREATE SEQUENCE IF NOT EXISTS public.hibernate_sequence START WITH 1000 INCREMENT BY 50 MINVALUE 1000 MAXVALUE 999999 CACHE 20 CYCLE"),
            "{out:#?}\n{diags:#?}"
        );
        let (out, _) = sql(Dialect::Postgres, Dialect::MySql, text);
        let t = out
            .iter()
            .find(|s| s.starts_with("CREATE TABLE"))
            .expect("table");
        assert!(
            t.contains("w > 0") && t.contains("w < 100") && t.contains("w INT NOT NULL"),
            "{t}"
        );
        assert!(
            t.contains("tags JSON DEFAULT '[]'") && t.contains(r#"names JSON DEFAULT '["a","b"]'"#),
            "{t}"
        );
        // PostgreSQL -> Oracle: a qualified sequence is schema.name, made first.
        let (out, _) = sql(
            Dialect::Postgres,
            Dialect::Oracle,
            "CREATE SEQUENCE public.hs START WITH 1;\nCREATE TABLE public.t (id bigint DEFAULT nextval('public.hs'::regclass), code varchar(10) NOT NULL DEFAULT '');",
        );
        assert_eq!(
            out[0], "CREATE SEQUENCE \"PUBLIC\".HS START WITH 1",
            "{out:#?}"
        );
        assert!(
            out[1].contains("DEFAULT \"PUBLIC\".HS.NEXTVAL") && !out[1].contains("DEFAULT ''"),
            "{out:#?}"
        );
        // PostgreSQL -> Oracle: a text key, unique or indexed column is no CLOB.
        let (out, diags) = sql(
            Dialect::Postgres,
            Dialect::Oracle,
            "CREATE TABLE u (id text PRIMARY KEY, email text UNIQUE, bio text, nick text);\nCREATE INDEX u_nick ON u (nick);\n\
             CREATE TABLE p (id int PRIMARY KEY, uid text REFERENCES u (id));",
        );
        let all = out.join("\n");
        for want in [
            "ID VARCHAR2(1000 CHAR)",
            "EMAIL VARCHAR2(1000 CHAR)",
            "BIO CLOB",
            "\"UID\" VARCHAR2(1000 CHAR)",
        ] {
            assert!(all.contains(want), "{want}: {all}");
        }
        // (An index added after the table cannot change the CLOB: said.)
        assert!(all.contains("NICK CLOB"), "{all}");
        assert!(
            diags.iter().any(|d| d.contains("u.nick: made a CLOB")),
            "{diags:#?}"
        );
        // A dump's DROP TABLE IF EXISTS before each CREATE: Oracle before 23 refused
        // every one; a table the input made is dropped plainly.
        let (out, _) = sql(
            Dialect::MySql,
            Dialect::Oracle,
            "DROP TABLE IF EXISTS t;\nCREATE TABLE t (id int);\nDROP TABLE IF EXISTS t;",
        );
        assert!(out[0].starts_with("CREATE TABLE T"), "{out:#?}");
        assert_eq!(out[1], "DROP TABLE T", "{out:#?}");
        // regression (a Prisma dump): an enum array's default cast to the enum type,
        // which is text with a CHECK here (`type "public.Role[]" does not exist`).
        let (out, _) = sql(
            Dialect::Postgres,
            Dialect::Postgres,
            "CREATE TYPE public.\"Role\" AS ENUM ('USER', 'ADMIN');\n\
             CREATE TABLE public.u (roles public.\"Role\"[] DEFAULT ARRAY[]::public.\"Role\"[]);",
        );
        assert!(out[0].contains("DEFAULT ARRAY[]::varchar(5)[]"), "{out:#?}");
        // regression (a hostile pg_dump): the cast inside the array, on a quoted
        // enum name, was cut at the last `::` and left the brackets unbalanced.
        let (out, _) = sql(
            Dialect::Postgres,
            Dialect::Postgres,
            "CREATE TYPE \"S\"\"q\".\"Mo od\" AS ENUM ('a''b', 'c');\n\
             CREATE TABLE t (m \"S\"\"q\".\"Mo od\"[] DEFAULT ARRAY['a''b'::\"S\"\"q\".\"Mo od\"], \
             n \"S\"\"q\".\"Mo od\" DEFAULT 'c'::\"S\"\"q\".\"Mo od\");",
        );
        assert!(
            out[0].contains("DEFAULT ARRAY['a''b'::varchar(3)]")
                && out[0].contains("n varchar(3) DEFAULT 'c'"),
            "{out:#?}"
        );
        // Keys on columns a table does not have were emitted as written.
        for bad in [
            "CREATE TABLE b1 (id int, UNIQUE (nocol));",
            "CREATE TABLE b2 (id int, PRIMARY KEY (zz));",
            "CREATE TABLE p (id int PRIMARY KEY); CREATE TABLE b3 (x int, y int, FOREIGN KEY (x, y) REFERENCES p (id));",
        ] {
            let (_, diags) = sql(Dialect::MySql, Dialect::Postgres, bad);
            assert!(diags.iter().any(|d| d.starts_with("error")), "{bad}: {diags:#?}");
        }
    }

    #[test]
    fn postgis_columns_with_a_subtype_and_srid() {
        // regression (a held-out Rails schema): `public.geometry(Geometry,4326)` did
        // not parse, the table was lost and every later statement on it failed.
        let text = "CREATE TABLE public.zones (id bigint NOT NULL, area public.geometry(MultiPolygon,4326), \
                    at geography(PointZ, 4326), any_shape geometry);";
        let (out, diags) = sql(Dialect::Postgres, Dialect::MySql, text);
        assert!(!diags.iter().any(|d| d.starts_with("error")), "{diags:#?}");
        for want in ["area MULTIPOLYGON", "at POINT", "any_shape GEOMETRY"] {
            assert!(out[0].contains(want), "{want}: {}", out[0]);
        }
        assert!(
            diags
                .iter()
                .any(|d| d.contains("SRID") && d.contains("area")),
            "{diags:#?}"
        );
        let (out, _) = sql(Dialect::Postgres, Dialect::Postgres, text);
        assert!(
            out[0].contains("area geometry(MultiPolygon,4326)"),
            "{}",
            out[0]
        );
    }
}
