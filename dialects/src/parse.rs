//! One statement of source text -> IR change requests.

use crate::defs::{Definitions, Domain, Sequence};
use crate::lower::{qualify, stored_name, LowerError, Lowerer};
use crate::Dialect;
use ddl_core::{
    Catalog, ChangeRequest, Diagnostics, Index, IndexKind, IndexPart, SchemaChange, Table,
    TableName,
};
use sqlparser::ast::{self as sq, Statement as Sq};
use sqlparser::dialect::{Dialect as SqDialect, MySqlDialect, OracleDialect, PostgreSqlDialect};
use sqlparser::parser::Parser;

/// What a statement means for the schema.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    Requests(Vec<ChangeRequest>),
    /// `USE db` / `SET search_path`: the default schema for what follows.
    UseSchema(String),
    /// No schema meaning (views, routines, session settings, data): reported as skipped.
    Skipped(String),
}

/// A statement that cannot be read: where (byte offset in the statement) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub offset: usize,
    pub message: String,
    /// Tables the statement names that the catalog does not know.
    pub unknown: Vec<TableName>,
}

impl From<LowerError> for ParseError {
    fn from(e: LowerError) -> Self {
        ParseError {
            offset: 0,
            message: e.0,
            unknown: e.1,
        }
    }
}

/// Options of the source parser.
#[derive(Debug, Clone, Copy, Default)]
pub struct ParseOptions {
    /// MySQL's ANSI_QUOTES sql_mode: `"x"` is a name, not a string.
    pub ansi_quotes: bool,
    /// A PostgreSQL partition (`CREATE TABLE p PARTITION OF t ...`) becomes a table
    /// of its own with its parent's columns and keys (translating a schema into
    /// another database, as pg_dump's own form of partitions gives). Otherwise it is
    /// skipped: a sync captures a partition's rows under its parent.
    pub partitions_as_tables: bool,
}

pub(crate) fn sq_dialect(d: Dialect) -> &'static dyn SqDialect {
    match d {
        Dialect::MySql => &MySqlDialect {},
        Dialect::Postgres => &PostgreSqlDialect {},
        Dialect::Oracle => &OracleDialect {},
    }
}

/// The first `n` words of a statement, upper-cased.
fn head(text: &str, n: usize) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || c == '(' || c == ';')
        .filter(|w| !w.is_empty())
        .take(n)
        .map(|w| w.to_ascii_uppercase())
        .collect()
}

/// Byte offsets of the top-level words `CREATE` and `GRANT` after the first word of
/// `text` (outside parentheses, quotes and comments): where the elements of a
/// `CREATE SCHEMA name CREATE TABLE ... CREATE VIEW ...` start.
fn element_starts(text: &str) -> Vec<usize> {
    let b = text.as_bytes();
    let (mut i, mut depth, mut out) = (0, 0i32, Vec::new());
    let word_at = |i: usize, w: &[u8]| {
        b.len() >= i + w.len()
            && b[i..i + w.len()].eq_ignore_ascii_case(w)
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
            && b.get(i + w.len())
                .is_none_or(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
    };
    while i < b.len() {
        match b[i] {
            q @ (b'\'' | b'"') => {
                i += 1;
                while i < b.len() && b[i] != q {
                    i += 1;
                }
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 1;
            }
            b'(' => depth += 1,
            b')' => depth -= 1,
            _ if depth == 0 && i > 0 && (word_at(i, b"CREATE") || word_at(i, b"GRANT")) => {
                out.push(i)
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The byte offset just after the `n`-th word of `text` (1-based; white-space
/// separated), or the text's end.
fn word_end(text: &str, n: usize) -> usize {
    let mut seen = 0;
    let mut in_word = false;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            if in_word {
                seen += 1;
                if seen == n {
                    return i;
                }
            }
            in_word = false;
        } else {
            in_word = true;
        }
    }
    text.len()
}

/// Whether `words` follow each other in `text` (any case, any white space between).
fn contains_words(text: &str, words: &[&str]) -> bool {
    let Some(last) = words.last() else {
        return true;
    };
    if !text
        .as_bytes()
        .windows(last.len())
        .any(|w| w.eq_ignore_ascii_case(last.as_bytes()))
    {
        return false;
    }
    let all: Vec<&str> = text.split_whitespace().collect();
    all.windows(words.len())
        .any(|w| w.iter().zip(words).all(|(a, b)| a.eq_ignore_ascii_case(b)))
}

pub struct StatementParser<'a> {
    pub dialect: Dialect,
    pub options: ParseOptions,
    pub catalog: &'a Catalog,
    pub default_schema: Option<&'a str>,
    pub diags: &'a mut Diagnostics,
    pub defs: &'a mut Definitions,
}

impl StatementParser<'_> {
    /// `CREATE SCHEMA s [AUTHORIZATION r] CREATE TABLE ... CREATE INDEX ... GRANT ...`
    /// (standard SQL, PostgreSQL): the schema, then each element as a statement of
    /// its own in it. None: a schema without elements.
    fn schema_elements(&mut self, text: &str) -> Result<Option<Parsed>, ParseError> {
        let starts = element_starts(text);
        let Some(&first) = starts.first() else {
            return Ok(None);
        };
        let head = &text[..first];
        let mut out = match self.parse_one(head)? {
            Parsed::Requests(r) => r,
            other => return Ok(Some(other)),
        };
        let schema: Option<String> = out.iter().find_map(|r| match r {
            ChangeRequest::Change(SchemaChange::CreateNamespace { name, .. }) => {
                Some(name.to_string())
            }
            _ => None,
        });
        let Some(schema) = schema else {
            return Ok(None);
        };
        let mut ends = starts[1..].to_vec();
        ends.push(text.len());
        for (&from, &to) in starts.iter().zip(&ends) {
            let element = text[from..to].trim();
            let parsed = StatementParser {
                dialect: self.dialect,
                options: self.options,
                catalog: self.catalog,
                default_schema: Some(&schema),
                diags: self.diags,
                defs: self.defs,
            }
            .parse_one(element)
            .map_err(|e| ParseError {
                offset: from + e.offset,
                message: format!(
                    "in schema {schema}'s element `{}`: {}",
                    crate::translate::excerpt(element),
                    e.message
                ),
                unknown: e.unknown,
            })?;
            match parsed {
                Parsed::Requests(r) => out.extend(r),
                Parsed::Skipped(why) => self.diags.skip(why),
                Parsed::UseSchema(_) => {}
            }
        }
        Ok(Some(Parsed::Requests(out)))
    }

    fn lowerer(&mut self) -> Lowerer<'_> {
        Lowerer {
            dialect: self.dialect,
            catalog: self.catalog,
            default_schema: self.default_schema,
            diags: self.diags,
            defs: self.defs,
        }
    }

    /// One statement's changes. Into tables of their own, a partitioned table's
    /// keys, unique indexes, foreign keys and CHECKs are its partitions' too (see
    /// [`Self::give_partitions`]), whatever statement adds them.
    pub fn parse(&mut self, text: &str) -> Result<Parsed, ParseError> {
        let mut parsed = self.parse_one(text)?;
        if let Parsed::Requests(r) = &mut parsed {
            if self.dialect == Dialect::Postgres && self.options.partitions_as_tables {
                self.give_partitions(r);
            }
        }
        Ok(parsed)
    }

    fn parse_one(&mut self, text: &str) -> Result<Parsed, ParseError> {
        if self.dialect == Dialect::Postgres && contains_words(text, &["NULLS", "NOT", "DISTINCT"])
        {
            self.diags.warn(
                "UNIQUE NULLS NOT DISTINCT: not carried; the target's unique key lets several rows hold NULL".to_owned(),
            );
        }
        let h = head(text, 6);
        let w = |i: usize| h.get(i).map(String::as_str).unwrap_or("");
        // Skip words between CREATE and the object kind.
        let mut k = 1;
        while matches!(
            w(k),
            "OR" | "REPLACE"
                | "PROCEDURAL"
                | "TRUSTED"
                | "TEMPORARY"
                | "GLOBAL"
                | "UNLOGGED"
                | "DEFINER"
                | "EDITIONABLE"
                | "NONEDITIONABLE"
                | "ALGORITHM"
                | "SQL"
                | "MATERIALIZED"
                | "FORCE"
                | "NOFORCE"
                | "AGGREGATE"
        ) || w(k).starts_with("DEFINER=")
            || w(k).starts_with("ALGORITHM=")
        {
            k += 1;
        }
        if w(0) == "CREATE" && w(k) == "TABLE" && h[1..k].iter().any(|x| x == "UNLOGGED") {
            self.diags
                .skip("UNLOGGED is not carried: the table is written to the log".to_owned());
        }
        match (w(0), w(k)) {
            ("CREATE", "SCHEMA") => {
                if let Some(parsed) = self.schema_elements(text)? {
                    return Ok(parsed);
                }
                // The plain form pg_dump writes for every schema (`CREATE SCHEMA
                // name`): read here, without sqlparser's tokenizer and parser.
                if k == 1 {
                    let rest = text[word_end(text, 2).min(text.len())..].trim_start();
                    if let Ok((tail, parts)) = grammar::lex::object_name(rest) {
                        if parts.len() == 1 && tail.trim().is_empty() {
                            return Ok(Parsed::Requests(vec![ChangeRequest::Change(
                                SchemaChange::CreateNamespace {
                                    name: self.lowerer().name(&parts[0]),
                                    if_not_exists: false,
                                },
                            )]));
                        }
                    }
                }
            }
            // MariaDB: CREATE OR REPLACE TABLE is a DROP TABLE IF EXISTS and a CREATE.
            ("CREATE", "TABLE")
                if self.dialect == Dialect::MySql && (w(1), w(2)) == ("OR", "REPLACE") =>
            {
                let at = word_end(text, 3);
                let plain = format!("CREATE{}", &text[at..]);
                let mut r = match self.parse_one(&plain).map_err(|e| ParseError {
                    offset: e.offset.saturating_sub(6) + at,
                    ..e
                })? {
                    Parsed::Requests(r) => r,
                    other => return Ok(other),
                };
                let name = r.iter().find_map(|c| match c {
                    ChangeRequest::Change(SchemaChange::CreateTable { table, .. }) => {
                        Some(table.name.clone())
                    }
                    _ => None,
                });
                if let Some(name) = name {
                    r.insert(
                        0,
                        ChangeRequest::Change(SchemaChange::DropTable {
                            name,
                            if_exists: true,
                        }),
                    );
                }
                return Ok(Parsed::Requests(r));
            }
            // MariaDB: RENAME TABLE IF EXISTS a TO b: unchanged when a is not known.
            ("RENAME", "TABLE") if self.dialect == Dialect::MySql && w(2) == "IF" => {
                let at = word_end(text, 4);
                let plain = format!("RENAME TABLE{}", &text[at..]);
                let from = head(&text[at..], 1).into_iter().next().unwrap_or_default();
                let known = grammar::lex::object_name(text[at..].trim_start())
                    .ok()
                    .map(|(_, parts)| self.lowerer().table_name(&parts))
                    .is_some_and(|t| self.catalog.resolve_table(&t).is_some());
                if !known {
                    return Ok(Parsed::Skipped(format!(
                        "RENAME TABLE IF EXISTS: {from} does not exist: unchanged"
                    )));
                }
                return self.parse_one(&plain);
            }
            ("CREATE", "DOMAIN") if self.dialect == Dialect::Postgres => {
                return self.create_domain(text);
            }
            ("CREATE", "TYPE") if self.dialect == Dialect::Postgres => {
                if let Some(p) = self.create_enum(text)? {
                    return Ok(p);
                }
            }
            ("ALTER", "TYPE") if self.dialect == Dialect::Postgres => {
                return self.alter_enum(text);
            }
            ("ALTER", "SCHEMA") if self.dialect == Dialect::Postgres => {
                return self.alter_schema(text);
            }
            ("CREATE", "SEQUENCE") | ("ALTER", "SEQUENCE") => return self.sequence(text),
            ("CREATE", "TABLE") => {
                // CREATE TABLE ... AS SELECT: the shape depends on a query.
                if h.iter().any(|x| x == "AS" || x == "SELECT")
                    && !text.contains('(')
                    && text.to_ascii_uppercase().contains("SELECT")
                {
                    if let Some(n) = self.relation_after(text, "TABLE") {
                        self.defs.skipped.insert(n);
                    }
                    return Ok(Parsed::Skipped(
                        "CREATE TABLE ... AS SELECT: the table's columns come from a query".into(),
                    ));
                }
                // A PostgreSQL partition: its rows are its parent's (a sync captures
                // them under the partitioned table, publish_via_partition_root).
                if self.dialect == Dialect::Postgres {
                    let up = text.to_ascii_uppercase();
                    if let Some(at) = up.find(" PARTITION OF ") {
                        let part = self.relation_after(text, "TABLE");
                        let (_, parent) = grammar::lex::object_name(text[at + 14..].trim_start())
                            .map_err(|_| ParseError {
                            offset: at + 14,
                            message: "cannot read the parent table of PARTITION OF".into(),
                            unknown: Vec::new(),
                        })?;
                        let parent = self.lowerer().table_name(&parent);
                        if let (Some(p), true) = (&part, self.options.partitions_as_tables) {
                            if let Some(t) = self.partition_table(p, &parent) {
                                return Ok(Parsed::Requests(vec![ChangeRequest::Change(
                                    SchemaChange::CreateTable {
                                        table: t,
                                        if_not_exists: h.iter().take(6).any(|w| w == "EXISTS"),
                                    },
                                )]));
                            }
                        }
                        if let Some(p) = part {
                            self.defs.skipped.insert(p.clone());
                            return Ok(Parsed::Skipped(format!(
                                "{p} is a partition of {parent}: not a table of its own (its rows are {parent}'s)"
                            )));
                        }
                    }
                }
                let d =
                    grammar::ddl::parse_create_table(self.dialect.flavor(), &self.prepare(text))
                        .map_err(|e| ParseError {
                            offset: e.offset,
                            message: e.message,
                            unknown: Vec::new(),
                        })?;
                let mut r = self.lowerer().create_table(&d)?;
                if self.dialect == Dialect::Postgres {
                    crate::lower::pg_implicit_names(self.catalog, &mut r);
                }
                return Ok(Parsed::Requests(r));
            }
            ("ALTER", "TABLE") | ("ALTER", "ONLINE") | ("ALTER", "IGNORE") => {
                let d = grammar::ddl::parse_alter_table(self.dialect.flavor(), &self.prepare(text))
                    .map_err(|e| ParseError {
                        offset: e.offset,
                        message: e.message,
                        unknown: Vec::new(),
                    })?;
                let mut r = self.lowerer().alter_table(&d)?;
                if self.dialect == Dialect::Postgres {
                    crate::lower::pg_implicit_names(self.catalog, &mut r);
                    if self.options.partitions_as_tables {
                        self.note_attached(&d, &mut r);
                    }
                }
                return Ok(Parsed::Requests(r));
            }
            ("CREATE", kind @ ("VIEW" | "MATERIALIZED" | "FOREIGN")) => {
                let word = if kind == "FOREIGN" { "TABLE" } else { "VIEW" };
                if let Some(n) = self.relation_after(text, word) {
                    self.defs.skipped.insert(n);
                }
                return Ok(Parsed::Skipped(format!(
                    "CREATE {kind}{} is not a table schema change",
                    if kind == "VIEW" {
                        ""
                    } else if kind == "FOREIGN" {
                        " TABLE"
                    } else {
                        " VIEW"
                    }
                )));
            }
            (
                "CREATE",
                kind @ ("TRIGGER" | "PROCEDURE" | "FUNCTION" | "EVENT" | "PACKAGE" | "TYPE"
                | "SYNONYM" | "RULE" | "EXTENSION" | "ROLE" | "USER" | "DOMAIN"
                | "AGGREGATE" | "OPERATOR" | "POLICY" | "PUBLICATION" | "SUBSCRIPTION"
                | "SERVER" | "COLLATION" | "CAST" | "LANGUAGE" | "TABLESPACE" | "DIRECTORY"
                | "LIBRARY" | "CONVERSION" | "TEXT" | "STATISTICS" | "ACCESS"
                | "EVENT_TRIGGER" | "TRANSFORM"),
            ) => {
                return Ok(Parsed::Skipped(format!(
                    "CREATE {kind} is not a table schema change"
                )));
            }
            (
                "DROP",
                kind @ ("VIEW" | "TRIGGER" | "PROCEDURE" | "FUNCTION" | "EVENT" | "PACKAGE"
                | "TYPE" | "SYNONYM" | "RULE" | "EXTENSION" | "ROLE" | "USER" | "DOMAIN"
                | "AGGREGATE" | "OPERATOR" | "POLICY" | "MATERIALIZED" | "TABLESPACE"
                | "SERVER" | "PUBLICATION"),
            ) => {
                return Ok(Parsed::Skipped(format!(
                    "DROP {kind} is not a table schema change"
                )));
            }
            (
                kw @ ("INSERT" | "UPDATE" | "DELETE" | "REPLACE" | "SELECT" | "LOCK" | "UNLOCK"
                | "GRANT" | "REVOKE" | "BEGIN" | "COMMIT" | "ROLLBACK" | "START" | "DECLARE"
                | "ANALYZE" | "OPTIMIZE" | "FLUSH" | "VACUUM" | "COPY" | "CALL" | "DO"
                | "EXPLAIN" | "SHOW" | "PROMPT" | "SPOOL" | "WHENEVER" | "EXEC" | "EXECUTE"
                | "LOAD" | "CHECKPOINT" | "REINDEX" | "CLUSTER" | "LISTEN" | "NOTIFY"
                | "SAVEPOINT" | "RELEASE" | "PURGE" | "AUDIT" | "NOAUDIT" | "SECURITY"
                | "\\CONNECT" | "\\."),
                _,
            ) => {
                return Ok(Parsed::Skipped(format!("{kw} is not a schema change")));
            }
            ("SET", _) => return Ok(self.set(text)),
            // Comments on objects other than tables and columns (a publication, a
            // function, a schema): sqlparser knows few of their kinds.
            ("COMMENT", "ON") if !matches!(w(2), "TABLE" | "COLUMN" | "VIEW") => {
                return Ok(Parsed::Skipped(format!(
                    "COMMENT ON {} is not carried",
                    w(2)
                )));
            }
            ("ALTER", kind) if kind != "TABLE" => {
                return Ok(Parsed::Skipped(format!(
                    "ALTER {kind} is not a table schema change"
                )));
            }
            _ => {}
        }
        // The plain index pg_dump writes for most keys and lookups: read here,
        // without sqlparser (what it reads is what the full path below makes).
        if self.dialect == Dialect::Postgres
            && w(0) == "CREATE"
            && matches!(w(1), "INDEX" | "UNIQUE")
        {
            if let Some(ix) = grammar::ddl::parse_plain_index(self.dialect.flavor(), text) {
                return Ok(self.plain_index(ix));
            }
        }
        // Oracle's physical attributes after an index's columns (what SQL Developer
        // and DBMS_METADATA write): not carried, and sqlparser rejects them.
        let text = if self.dialect == Dialect::Oracle
            && w(0) == "CREATE"
            && h.iter().any(|x| x == "INDEX")
        {
            match oracle_index_storage(text) {
                Some(cut) => {
                    self.diags.skip(format!(
                        "index storage clause `{}` is not carried",
                        crate::translate::excerpt(text[cut..].trim())
                    ));
                    &text[..cut]
                }
                None => text,
            }
        } else {
            text
        };
        // Words sqlparser does not take, blanked (same length: positions kept):
        // pg_dump's `CREATE INDEX ... ON ONLY parent` (a partitioned table's index;
        // the partitions are tables of their own here, so the index is the parent's
        // alone either way) and Oracle's `CREATE BITMAP INDEX` (a plain one here).
        let blank = pg_index_on_only(self.dialect, text, &h)
            .map(|at| (at, "ONLY".len()))
            .or_else(|| {
                let at = oracle_bitmap(self.dialect, text, &h)?;
                self.diags.warn(
                    "a bitmap index becomes a plain (B-tree) index: the targets have no bitmap indexes",
                );
                Some((at, "BITMAP".len()))
            });
        let blanked;
        let text = match blank {
            Some((at, n)) => {
                blanked = format!("{}{}{}", &text[..at], " ".repeat(n), &text[at + n..]);
                blanked.as_str()
            }
            None => text,
        };
        let stmts = match Parser::new(sq_dialect(self.dialect))
            .try_with_sql(text)
            .and_then(|mut p| p.parse_statements())
        {
            Ok(s) => s,
            Err(_)
                if self.dialect == Dialect::MySql
                    && w(0) == "CREATE"
                    && matches!(w(1), "DATABASE" | "SCHEMA") =>
            {
                let (name, if_not_exists, opts) =
                    grammar::ddl::parse_create_database(text).map_err(Self::grammar_error)?;
                let name = self.lowerer().name(&name);
                if !opts.is_empty() {
                    self.diags.skip(format!(
                        "database {name}: `{}` is not carried",
                        crate::translate::excerpt(&opts)
                    ));
                }
                return Ok(Parsed::Requests(vec![ChangeRequest::Change(
                    SchemaChange::CreateNamespace {
                        name,
                        if_not_exists,
                    },
                )]));
            }
            Err(e) if self.dialect == Dialect::MySql && (w(0), w(1)) == ("DROP", "INDEX") => {
                return self
                    .mysql_drop_index(text)
                    .ok_or_else(|| sq_error(text, &e));
            }
            Err(e) => return Err(sq_error(text, &e)),
        };
        let mut out = Vec::new();
        for s in stmts {
            match self.statement(s)? {
                Parsed::Requests(r) => out.extend(r),
                other => return Ok(other),
            }
        }
        Ok(Parsed::Requests(out))
    }

    /// `ALTER TABLE parent ATTACH PARTITION part ...` (pg_dump's form of partitions):
    /// part stays a table of its own, and takes what the parent is given later.
    fn note_attached(&mut self, d: &grammar::ast::AlterTableDraft, out: &mut Vec<ChangeRequest>) {
        for spec in &d.specs {
            let grammar::ast::AlterSpec::Ignored(s) = spec else {
                continue;
            };
            let Some(rest) = s.strip_prefix("ATTACH PARTITION") else {
                continue;
            };
            let Ok((_, part)) = grammar::lex::object_name(rest.trim_start()) else {
                continue;
            };
            let lw = self.lowerer();
            let (parent, part) = (lw.table_name(&d.name), lw.table_name(&part));
            let parent = self
                .catalog
                .resolve_table(&parent)
                .cloned()
                .unwrap_or(parent);
            let part = self.catalog.resolve_table(&part).cloned().unwrap_or(part);
            let list = self.defs.partitions.entry(parent.clone()).or_default();
            if !list.contains(&part) {
                list.push(part.clone());
                // What the parent holds already is the partition's too (PostgreSQL
                // attaches its key's and unique indexes' partitions; pg_dump since
                // 16 writes them on the parent alone).
                out.extend(self.parent_keys(&parent, &part));
            }
        }
    }

    /// The parent's primary key, unique indexes, foreign keys and CHECKs as
    /// changes of partition `part` (those it lacks).
    fn parent_keys(&self, parent: &TableName, part: &TableName) -> Vec<ChangeRequest> {
        let Some(p) = self.catalog.table(parent) else {
            return Vec::new();
        };
        let mut on_parent = Vec::new();
        if let Some(pk) = &p.primary_key {
            on_parent.push(SchemaChange::SetPrimaryKey {
                table: parent.clone(),
                name: None,
                columns: Some(pk.columns.clone()),
                prefixes: Default::default(),
            });
        }
        for ix in p.indexes.iter().filter(|i| i.kind == IndexKind::Unique) {
            on_parent.push(SchemaChange::AddIndex {
                table: parent.clone(),
                index: ix.clone(),
            });
        }
        for fk in &p.foreign_keys {
            on_parent.push(SchemaChange::AddForeignKey {
                table: parent.clone(),
                foreign_key: fk.clone(),
            });
        }
        for ck in &p.checks {
            on_parent.push(SchemaChange::AddCheck {
                table: parent.clone(),
                check: ck.clone(),
            });
        }
        on_parent
            .into_iter()
            .filter_map(|c| self.for_partition(&ChangeRequest::Change(c), part))
            .collect()
    }

    /// `r`, a key, index, foreign key or CHECK added to a partitioned table, as
    /// partition `part`'s when it lacks it (None: it holds it, or `r` is another
    /// change). Keys and indexes leave their names to the target (index names are
    /// unique per schema there).
    fn for_partition(&self, r: &ChangeRequest, part: &TableName) -> Option<ChangeRequest> {
        let t = self.catalog.table(part)?;
        let ChangeRequest::Change(c) = r else {
            return None;
        };
        let c = match c {
            SchemaChange::AddForeignKey { foreign_key, .. } => {
                let name = &foreign_key.name;
                let held = t
                    .foreign_keys
                    .iter()
                    .any(|f| name.is_some() && f.name == *name || f == foreign_key);
                (!held).then(|| SchemaChange::AddForeignKey {
                    table: part.clone(),
                    foreign_key: foreign_key.clone(),
                })?
            }
            SchemaChange::AddCheck { check, .. } => {
                let name = &check.name;
                let held = t
                    .checks
                    .iter()
                    .any(|k| name.is_some() && k.name == *name || k == check);
                (!held).then(|| SchemaChange::AddCheck {
                    table: part.clone(),
                    check: check.clone(),
                })?
            }
            SchemaChange::SetPrimaryKey {
                columns: Some(cols),
                prefixes,
                ..
            } => t
                .primary_key
                .is_none()
                .then(|| SchemaChange::SetPrimaryKey {
                    table: part.clone(),
                    name: None,
                    columns: Some(cols.clone()),
                    prefixes: prefixes.clone(),
                })?,
            SchemaChange::AddIndex { index, .. } if index.kind == IndexKind::Unique => {
                let held = t
                    .indexes
                    .iter()
                    .any(|i| i.kind == index.kind && i.parts == index.parts);
                (!held).then(|| SchemaChange::AddIndex {
                    table: part.clone(),
                    index: Index {
                        name: None,
                        ..index.clone()
                    },
                })?
            }
            _ => return None,
        };
        Some(ChangeRequest::Change(c))
    }

    /// A primary key, unique index, foreign key or CHECK added to a partitioned
    /// table is every partition's too (PostgreSQL adds it to them; pg_dump writes it
    /// on the parent alone): the partitions, tables of their own here, are given it
    /// as well.
    fn give_partitions(&mut self, requests: &mut Vec<ChangeRequest>) {
        // What a partition was given from its parent already, written again on the
        // partition (pg_dump before 16 writes each partition's key too): once.
        requests.retain(|r| {
            let ChangeRequest::Change(c) = r else {
                return true;
            };
            let Some(table) = c.table() else {
                return true;
            };
            let table = self.catalog.resolve_table(table).unwrap_or(table);
            if !self.defs.partitions.values().any(|v| v.contains(table)) {
                return true;
            }
            let Some(t) = self.catalog.table(table) else {
                return true;
            };
            let held = match c {
                SchemaChange::SetPrimaryKey {
                    columns: Some(cols),
                    ..
                } => t.primary_key.as_ref().is_some_and(|pk| pk.columns == *cols),
                SchemaChange::AddIndex { index, .. } => {
                    index.kind == IndexKind::Unique
                        && t.indexes
                            .iter()
                            .any(|i| i.kind == index.kind && i.parts == index.parts)
                }
                _ => false,
            };
            if held {
                self.diags.skip(format!(
                    "{table}: its {} came with its partitioned table's; not added twice",
                    if matches!(c, SchemaChange::SetPrimaryKey { .. }) {
                        "primary key"
                    } else {
                        "unique index"
                    }
                ));
            }
            !held
        });
        let mut more = Vec::new();
        for r in requests.iter() {
            let ChangeRequest::Change(c) = r else {
                continue;
            };
            let Some(table) = c.table() else {
                continue;
            };
            let parent = self.catalog.resolve_table(table).unwrap_or(table);
            for part in self.defs.partitions_of(parent) {
                more.extend(self.for_partition(r, &part));
            }
        }
        requests.extend(more);
    }

    /// Partition `part` of `parent` as a table of its own: the parent's columns,
    /// key, unique keys, CHECKs and foreign keys (a PostgreSQL partition has them
    /// all), the names of the keys left to the target (index names are unique per
    /// schema there). None when the parent is not known.
    fn partition_table(&mut self, part: &TableName, parent: &TableName) -> Option<Table> {
        let p = self
            .catalog
            .resolve_table(parent)
            .and_then(|k| self.catalog.table(k))?;
        let mut t = p.clone();
        t.name = part.clone();
        t.partition_by = None;
        t.comment = None;
        if let Some(pk) = &mut t.primary_key {
            pk.name = None;
        }
        t.indexes.retain(|ix| ix.kind == IndexKind::Unique);
        for ix in &mut t.indexes {
            ix.name = None;
        }
        self.diags.warn(format!(
            "{part}: a partition of {parent}, made a table of its own with {parent}'s columns and keys (partitioning is not translated: its rows stay apart from {parent}'s)"
        ));
        let parent = p.name.clone();
        self.defs
            .partitions
            .entry(parent)
            .or_default()
            .push(part.clone());
        Some(t)
    }

    /// The relation named after `word` (`VIEW`, `TABLE`) in a CREATE statement.
    fn relation_after(&mut self, text: &str, word: &str) -> Option<TableName> {
        let up = text.to_ascii_uppercase();
        let at = up.find(&format!(" {word} "))? + word.len() + 2;
        let rest = text[at..].trim_start();
        let words: Vec<&str> = rest.splitn(4, char::is_whitespace).collect();
        let rest = if words.len() == 4
            && words[..3]
                .iter()
                .map(|w| w.to_ascii_uppercase())
                .eq(["IF", "NOT", "EXISTS"])
        {
            words[3]
        } else {
            rest
        };
        let (_, parts) = grammar::lex::object_name(rest).ok()?;
        Some(self.lowerer().table_name(&parts))
    }

    /// A relation this script did not translate (a view, ...), when `t` is not a table.
    fn skipped_relation(&self, t: &TableName) -> bool {
        self.catalog.resolve_table(t).is_none() && self.defs.skipped.contains(t)
    }

    fn grammar_error(e: grammar::ddl::GrammarError) -> ParseError {
        ParseError {
            offset: e.offset,
            message: e.message,
            unknown: Vec::new(),
        }
    }

    /// `CREATE DOMAIN`: kept, so columns of the domain get its base type, NOT NULL,
    /// DEFAULT and CHECKs.
    fn create_domain(&mut self, text: &str) -> Result<Parsed, ParseError> {
        let d = grammar::ddl::parse_create_domain(text).map_err(Self::grammar_error)?;
        let name = self.lowerer().table_name(&d.name);
        let lower = self.lowerer();
        let mut domain = Domain {
            base: d.ty.data_type.clone(),
            not_null: d.not_null,
            default: d.default.as_deref().and_then(|e| lower.default_value(e)),
            checks: d
                .checks
                .iter()
                .map(|(n, e)| {
                    (
                        n.as_ref().map(|n| lower.name(n)),
                        e.clone(),
                        crate::check::parse(Dialect::Postgres, e),
                    )
                })
                .collect(),
        };
        // A domain over another domain: the base type, NOT NULL, DEFAULT and CHECKs
        // of the whole chain (the inner domain was defined first).
        if let ddl_core::DataType::Other { name: base, .. } = &d.ty.data_type {
            if let Some(inner) = self.defs.domains.get(base.trim_matches('"')).cloned() {
                domain.base = inner.base;
                domain.not_null |= inner.not_null;
                domain.default = domain.default.or(inner.default);
                let mut checks = inner.checks;
                checks.append(&mut domain.checks);
                domain.checks = checks;
            }
        }
        self.defs.domains.insert(name.name.clone(), domain);
        Ok(Parsed::Skipped(format!(
            "domain {name}: columns of it take its base type, NOT NULL, DEFAULT and CHECKs"
        )))
    }

    /// `CREATE TYPE ... AS ENUM`: kept, so columns of it become enums. Other kinds of
    /// type are not table changes (None).
    fn create_enum(&mut self, text: &str) -> Result<Option<Parsed>, ParseError> {
        let Some((name, labels)) =
            grammar::ddl::parse_create_enum(text).map_err(Self::grammar_error)?
        else {
            return Ok(None);
        };
        let name = self.lowerer().table_name(&name);
        self.defs.enums.insert(name.name.clone(), labels);
        Ok(Some(Parsed::Skipped(format!(
            "enum type {name}: columns of it become enums (an enum or a CHECK on the target)"
        ))))
    }

    /// `ALTER SCHEMA a RENAME TO b`: every table of `a` moves into `b` (made first;
    /// `a` dropped after), as PostgreSQL's SET SCHEMA would move each. Other forms
    /// (OWNER TO) change no table.
    fn alter_schema(&mut self, text: &str) -> Result<Parsed, ParseError> {
        let (from, to) = grammar::ddl::parse_alter_schema(text).map_err(Self::grammar_error)?;
        let Some(to) = to else {
            return Ok(Parsed::Skipped("ALTER SCHEMA: no table changes".into()));
        };
        let (from, to) = (self.lowerer().name(&from), self.lowerer().name(&to));
        let mut out = vec![ChangeRequest::Change(SchemaChange::CreateNamespace {
            name: to.clone(),
            if_not_exists: true,
        })];
        for t in self.catalog.tables.keys() {
            if t.schema.as_deref() == Some(from.as_str()) {
                let mut moved = t.clone();
                moved.schema = Some(to.clone());
                out.push(ChangeRequest::Change(SchemaChange::RenameTable {
                    from: t.clone(),
                    to: moved,
                }));
            }
        }
        out.push(ChangeRequest::Change(SchemaChange::DropNamespace {
            name: from,
            if_exists: true,
            cascade: false,
        }));
        Ok(Parsed::Requests(out))
    }

    /// `ALTER TYPE e ADD VALUE 'v' [BEFORE|AFTER 'w']` and `RENAME VALUE 'a' TO 'b'` of
    /// an enum type this script knows: every column of it takes the new labels (its
    /// target type widens with them). `RENAME TO` follows the type's name. Other
    /// forms change no table.
    fn alter_enum(&mut self, text: &str) -> Result<Parsed, ParseError> {
        use grammar::ast::AlterEnum;
        let (parts, form) = grammar::ddl::parse_alter_type(text).map_err(Self::grammar_error)?;
        let name = self.lowerer().table_name(&parts).name;
        let Some(old) = self.defs.enums.get(&name).cloned() else {
            return Ok(Parsed::Skipped(format!(
                "type {name}: not an enum type of this schema; no table changes"
            )));
        };
        let mut new = old.clone();
        match form {
            AlterEnum::AddValue { label, near } => {
                if !new.contains(&label) {
                    let at = near.and_then(|(before, other)| {
                        let i = new.iter().position(|x| *x == other)?;
                        Some(if before { i } else { i + 1 })
                    });
                    new.insert(at.unwrap_or(new.len()), label);
                }
            }
            AlterEnum::RenameValue { from, to } => {
                for l in &mut new {
                    if *l == from {
                        *l = to.clone();
                    }
                }
            }
            AlterEnum::RenameTo(to) => {
                let to = self.lowerer().name(&to);
                self.defs.enums.remove(&name);
                self.defs.enums.insert(to.clone(), old);
                return Ok(Parsed::Skipped(format!(
                    "enum type {name} renamed to {to}: its columns are unchanged"
                )));
            }
            AlterEnum::Other => {
                return Ok(Parsed::Skipped(format!("type {name}: no table changes")))
            }
        }
        self.defs.enums.insert(name, new.clone());
        let was = ddl_core::DataType::Enum { values: old };
        let mut out = Vec::new();
        for (t, table) in &self.catalog.tables {
            for c in table.columns.iter().filter(|c| c.data_type == was) {
                out.push(ChangeRequest::Change(SchemaChange::AlterColumnType {
                    table: t.clone(),
                    column: c.name.clone(),
                    data_type: ddl_core::DataType::Enum {
                        values: new.clone(),
                    },
                    using: None,
                }));
            }
        }
        Ok(Parsed::Requests(out))
    }

    /// `CREATE SEQUENCE` / `ALTER SEQUENCE`: start, increment and owner are kept. A
    /// sequence owned by the column whose default draws from it is that column's
    /// identity (what `serial` means), so it becomes one.
    fn sequence(&mut self, text: &str) -> Result<Parsed, ParseError> {
        let d = grammar::ddl::parse_sequence(text).map_err(Self::grammar_error)?;
        let name = self.lowerer().table_name(&d.name);
        let key = self
            .defs
            .sequence(&name)
            .map(|(k, _)| k.clone())
            .unwrap_or_else(|| name.clone());
        let mut seq = self.defs.sequences.remove(&key).unwrap_or_default();
        seq.start = d.start.or(seq.start);
        seq.increment = d.increment.or(seq.increment);
        if text
            .trim_start()
            .get(..6)
            .is_some_and(|w| w.eq_ignore_ascii_case("CREATE"))
        {
            seq.text = Some(text.trim().trim_end_matches(';').trim_end().to_owned());
        }
        if let Some(owner) = &d.owned_by {
            seq.owned_by = match owner.len() {
                0 => None,
                1 => None,
                n => {
                    let t = self.lowerer().table_name(&owner[..n - 1]);
                    let table = self.resolve(t);
                    let c = self.lowerer().name(&owner[n - 1]);
                    let col = self.catalog_col(&table, &c);
                    Some((table, col))
                }
            };
        }
        let mut out = Vec::new();
        if let Some((table, col)) = &seq.owned_by {
            let draws = self
                .catalog
                .table(table)
                .and_then(|t| t.column(col))
                .is_some_and(|c| match &c.default {
                    Some(ddl_core::DefaultValue::NextVal { sequence }) => {
                        let n = Definitions::sequence_name(sequence);
                        n == key
                            || (n.name == key.name && (n.schema.is_none() || key.schema.is_none()))
                    }
                    _ => false,
                });
            if draws {
                out.extend(identity_from(table, col, &seq));
            }
        }
        self.defs.sequences.insert(key, seq);
        if out.is_empty() {
            return Ok(Parsed::Skipped(format!(
                "sequence {name} is not a table (its start and owner are kept: a column that owns it becomes an identity)"
            )));
        }
        Ok(Parsed::Requests(out))
    }

    /// Text prepared for the grammar: with MySQL's ANSI_QUOTES off, `"x"` is a string,
    /// which the grammar reads as a quoted name; the two only differ in defaults and
    /// comments, so strings in double quotes are turned into single-quoted strings.
    fn prepare<'t>(&self, text: &'t str) -> std::borrow::Cow<'t, str> {
        if self.dialect != Dialect::MySql || self.options.ansi_quotes || !text.contains('"') {
            return text.into();
        }
        let mut out = String::with_capacity(text.len());
        let mut chars = text.chars().peekable();
        let mut in_single = false;
        let mut in_back = false;
        let mut in_double = false;
        while let Some(c) = chars.next() {
            match c {
                '\\' if in_single || in_double => {
                    out.push(c);
                    if let Some(n) = chars.next() {
                        out.push(n);
                    }
                    continue;
                }
                '\'' if !in_back && !in_double => in_single = !in_single,
                '`' if !in_single && !in_double => in_back = !in_back,
                '"' if !in_single && !in_back => {
                    if in_double && chars.peek() == Some(&'"') {
                        chars.next();
                        out.push_str("\"\"");
                        continue;
                    }
                    in_double = !in_double;
                    out.push('\'');
                    continue;
                }
                '\'' if in_double => {
                    out.push_str("''");
                    continue;
                }
                _ => {}
            }
            out.push(c);
        }
        out.into()
    }

    /// `SET search_path TO a, b` sets the default schema (the first one); any other SET
    /// is a session setting.
    fn set(&self, text: &str) -> Parsed {
        if head(text, 2).get(1).map(String::as_str) == Some("SEARCH_PATH") {
            let up = text.to_ascii_uppercase();
            let at = up
                .find(" TO ")
                .map(|p| p + 4)
                .or_else(|| up.find('=').map(|p| p + 1))
                .unwrap_or(text.len());
            let first = text[at..].split(',').next().unwrap_or("").trim();
            let quoted = first.starts_with('"');
            let first = first.trim_matches('\'').trim_matches('"');
            if !first.is_empty() {
                return Parsed::UseSchema(stored_name(Dialect::Postgres, first, quoted));
            }
        }
        Parsed::Skipped("session setting (SET)".into())
    }

    /// The grammar's fallback for MySQL DROP INDEX with ALGORITHM/LOCK options.
    fn mysql_drop_index(&mut self, text: &str) -> Option<Parsed> {
        let (index, table, options) = grammar::ddl::parse_drop_index(text).ok()?;
        let lower = self.lowerer();
        let table = lower.table_name(&table);
        let name = lower.name(&index);
        for o in options {
            self.diags
                .skip(format!("DROP INDEX {name}: {o} has no schema meaning"));
        }
        Some(Parsed::Requests(vec![ChangeRequest::Change(
            SchemaChange::DropIndex {
                table: self.resolve(table),
                name,
            },
        )]))
    }

    /// A [`grammar::ddl::PlainIndex`] as the change sqlparser's reading of it makes.
    fn plain_index(&mut self, ix: grammar::ddl::PlainIndex) -> Parsed {
        let named = self.lowerer().table_name(&ix.table);
        let table = self.resolve(named);
        let name = self.lowerer().name(&ix.name);
        if self.skipped_relation(&table) {
            return Parsed::Skipped(format!(
                "index {name} on {table}, which is not a translated table (a view or a query's result)"
            ));
        }
        let parts = ix
            .columns
            .iter()
            .map(|c| {
                let col = self.lowerer().name(c);
                IndexPart::column(&self.catalog_col(&table, &col))
            })
            .collect();
        Parsed::Requests(vec![ChangeRequest::Change(SchemaChange::AddIndex {
            table,
            index: Index {
                name: Some(name),
                predicate: None,
                kind: if ix.unique {
                    IndexKind::Unique
                } else {
                    IndexKind::Plain
                },
                parts,
            },
        })])
    }

    fn name(&self, id: &sq::Ident) -> String {
        stored_name(self.dialect, &id.value, id.quote_style.is_some())
    }

    fn object_name(&self, n: &sq::ObjectName) -> TableName {
        qualify(
            self.default_schema,
            n.0.iter()
                .filter_map(|p| p.as_ident().map(|i| self.name(i))),
        )
    }

    fn resolve(&self, t: TableName) -> TableName {
        self.catalog.resolve_table(&t).cloned().unwrap_or(t)
    }

    fn statement(&mut self, s: Sq) -> Result<Parsed, ParseError> {
        use SchemaChange as C;
        let one = |c: C| Ok(Parsed::Requests(vec![ChangeRequest::Change(c)]));
        match s {
            Sq::CreateDatabase {
                db_name,
                if_not_exists,
                ..
            } => one(C::CreateNamespace {
                name: self.object_name(&db_name).name,
                if_not_exists,
            }),
            Sq::CreateSchema {
                schema_name,
                if_not_exists,
                ..
            } => {
                let name = match &schema_name {
                    sq::SchemaName::Simple(n) | sq::SchemaName::NamedAuthorization(n, _) => {
                        self.object_name(n).name
                    }
                    sq::SchemaName::UnnamedAuthorization(i) => self.name(i),
                };
                one(C::CreateNamespace {
                    name,
                    if_not_exists,
                })
            }
            Sq::Drop {
                object_type,
                if_exists,
                names,
                cascade,
                table,
                ..
            } => {
                let mut out = Vec::new();
                for n in &names {
                    let c = match object_type {
                        sq::ObjectType::Table => C::DropTable {
                            name: self.resolve(self.object_name(n)),
                            if_exists,
                        },
                        sq::ObjectType::Schema | sq::ObjectType::Database => C::DropNamespace {
                            name: self.object_name(n).name,
                            if_exists,
                            cascade,
                        },
                        sq::ObjectType::Index => {
                            let ix = self.object_name(n);
                            let on = match &table {
                                Some(t) => Some(self.resolve(self.object_name(t))),
                                None => self.find_index_table(&ix),
                            };
                            match on {
                                Some(t) => C::DropIndex {
                                    table: t,
                                    name: ix.name,
                                },
                                None if if_exists => {
                                    return Ok(Parsed::Skipped(format!(
                                        "DROP INDEX IF EXISTS {}: no such index is known",
                                        ix.name
                                    )))
                                }
                                // An index not carried (another access method, an
                                // operator class of its own) or made before the
                                // input: nothing of it is on the target (a live
                                // job stopped on such a DROP INDEX).
                                None => {
                                    self.diags.warn(format!(
                                        "index {} is not known (not made by the input, or not carried): nothing to drop",
                                        ix.name
                                    ));
                                    continue;
                                }
                            }
                        }
                        other => {
                            return Ok(Parsed::Skipped(format!(
                                "DROP {other} is not a table schema change"
                            )))
                        }
                    };
                    out.push(ChangeRequest::Change(c));
                }
                Ok(Parsed::Requests(out))
            }
            Sq::RenameTable(pairs) => Ok(Parsed::Requests(
                pairs
                    .iter()
                    .map(|p| {
                        let from = self.resolve(self.object_name(&p.old_name));
                        let mut to = self.object_name(&p.new_name);
                        if p.new_name.0.len() == 1 {
                            to.schema = from.schema.clone();
                        }
                        ChangeRequest::Change(C::RenameTable { from, to })
                    })
                    .collect(),
            )),
            Sq::Truncate(t) => Ok(Parsed::Requests(
                t.table_names
                    .iter()
                    .map(|n| {
                        ChangeRequest::Change(C::TruncateTable {
                            name: self.resolve(self.object_name(&n.name)),
                        })
                    })
                    .collect(),
            )),
            Sq::CreateIndex(ci) => {
                let table = self.resolve(self.object_name(&ci.table_name));
                let name = ci.name.as_ref().map(|n| self.object_name(n).name);
                // (As messages name it.)
                let shown = name.clone().unwrap_or_else(|| "(unnamed)".into());
                if self.skipped_relation(&table) {
                    // (Named, so a reader finds every index of the input accounted for.)
                    let name = name.map(|n| format!("{n} ")).unwrap_or_default();
                    return Ok(Parsed::Skipped(format!(
                        "index {name}on {table}, which is not a translated table (a view or a query's result)"
                    )));
                }
                let parts = ci
                    .columns
                    .iter()
                    .map(|c| {
                        let desc = matches!(c.column.options.sort, Some(sq::OrderBySort::Desc));
                        match &c.column.expr {
                            sq::Expr::Identifier(i) => IndexPart {
                                descending: desc,
                                ..IndexPart::column(&self.catalog_col(&table, &self.name(i)))
                            },
                            sq::Expr::Function(f)
                                if self.dialect == Dialect::MySql
                                    && f.name.0.len() == 1
                                    && prefix_len(f).is_some() =>
                            {
                                let col = f.name.0[0]
                                    .as_ident()
                                    .map(|i| self.name(i))
                                    .unwrap_or_default();
                                IndexPart {
                                    prefix: prefix_len(f),
                                    descending: desc,
                                    ..IndexPart::column(&self.catalog_col(&table, &col))
                                }
                            }
                            e => IndexPart {
                                column: e.to_string(),
                                expression: true,
                                prefix: None,
                                descending: desc,
                            },
                        }
                    })
                    .collect();
                let kind = if ci.unique {
                    IndexKind::Unique
                } else {
                    match ci
                        .using
                        .as_ref()
                        .map(|u| u.to_string().to_ascii_uppercase())
                    {
                        Some(u) if u == "FULLTEXT" => IndexKind::Fulltext,
                        Some(u) if u == "SPATIAL" => IndexKind::Spatial,
                        _ => IndexKind::Plain,
                    }
                };
                // regression: `USING gin` was dropped without a word.
                // (`USING "btree"`: pg_dump --quote-all-identifiers.)
                if let Some(m) = ci
                    .using
                    .as_ref()
                    .map(|u| u.to_string().trim_matches('"').to_ascii_uppercase())
                {
                    // A PostgreSQL index of another access method (GIN, GiST, BRIN,
                    // hash...) indexes what a B-tree cannot hold (a B-tree on a large
                    // jsonb value refuses the row: a new user's inserts failed): not
                    // made in its place.
                    if self.dialect == Dialect::Postgres && m != "BTREE" {
                        self.diags.warn(format!(
                            "index {} on {table}: access method {} is not carried (a B-tree in its place could refuse the rows it indexes); not created",
                            shown,
                            m.to_ascii_lowercase()
                        ));
                        return Ok(Parsed::Requests(Vec::new()));
                    }
                    if !matches!(m.as_str(), "BTREE" | "FULLTEXT" | "SPATIAL") {
                        self.diags.warn(format!(
                            "index {} on {table}: access method {m} is not carried; a default (B-tree) index is created",
                            shown
                        ));
                    }
                }
                // What an index states that the IR does not carry, said.
                let mut unkept = Vec::new();
                if !ci.include.is_empty() {
                    unkept.push("INCLUDE columns".to_owned());
                }
                if ci.columns.iter().any(|c| c.operator_class.is_some()) {
                    unkept.push("operator classes".to_owned());
                }
                if ci
                    .columns
                    .iter()
                    .any(|c| c.column.options.nulls_first.is_some())
                {
                    unkept.push("NULLS FIRST/LAST".to_owned());
                }
                if !ci.with.is_empty() {
                    unkept.push("storage parameters (WITH)".to_owned());
                }
                if !unkept.is_empty() {
                    self.diags.warn(format!(
                        "index {shown} on {table}: its {} are not carried",
                        unkept.join(", ")
                    ));
                }
                one(C::AddIndex {
                    table,
                    index: Index {
                        name,
                        predicate: ci.predicate.as_ref().map(|p| ddl_core::Predicate {
                            expr: p.to_string(),
                            dialect: self.dialect.name().into(),
                            neutral: crate::check::from_sq(self.dialect, p),
                        }),
                        kind,
                        parts,
                    },
                })
            }
            Sq::Comment {
                object_type,
                object_name,
                comment,
                ..
            } => match object_type {
                sq::CommentObject::Table | sq::CommentObject::View
                    if self.skipped_relation(&self.object_name(&object_name)) =>
                {
                    Ok(Parsed::Skipped(format!(
                        "comment on {}, which is not a translated table",
                        self.object_name(&object_name)
                    )))
                }
                sq::CommentObject::Column
                    if object_name.0.len() > 1
                        && self.skipped_relation(&self.object_name(&sq::ObjectName(
                            object_name.0[..object_name.0.len() - 1].to_vec(),
                        ))) =>
                {
                    Ok(Parsed::Skipped(format!(
                        "comment on column {object_name}, which is not of a translated table"
                    )))
                }
                sq::CommentObject::Table => one(C::SetTableComment {
                    table: self.resolve(self.object_name(&object_name)),
                    comment: comment.filter(|c| !c.is_empty()),
                }),
                sq::CommentObject::Column => {
                    let parts: Vec<_> = object_name.0.clone();
                    let (tparts, col) = parts.split_at(parts.len().saturating_sub(1));
                    let col = col
                        .first()
                        .and_then(|p| p.as_ident())
                        .map(|i| self.name(i))
                        .unwrap_or_default();
                    let table = self.resolve(self.object_name(&sq::ObjectName(tparts.to_vec())));
                    let column = self.catalog_col(&table, &col);
                    one(C::SetColumnComment {
                        table,
                        column,
                        comment: comment.filter(|c| !c.is_empty()),
                    })
                }
                other => Ok(Parsed::Skipped(format!(
                    "COMMENT ON {other} is not carried"
                ))),
            },
            Sq::Use(u) => {
                let n = match &u {
                    sq::Use::Object(n)
                    | sq::Use::Database(n)
                    | sq::Use::Schema(n)
                    | sq::Use::Catalog(n) => Some(self.object_name(n).name),
                    _ => None,
                };
                match n {
                    Some(n) => Ok(Parsed::UseSchema(n)),
                    None => Ok(Parsed::Skipped(
                        "USE of something other than a schema".into(),
                    )),
                }
            }
            other => {
                let kind = other.to_string();
                let kind: String = kind
                    .split_whitespace()
                    .take(2)
                    .collect::<Vec<_>>()
                    .join(" ");
                Ok(Parsed::Skipped(format!(
                    "{kind} is not a table schema change"
                )))
            }
        }
    }

    fn catalog_col(&self, table: &TableName, col: &str) -> String {
        self.catalog
            .resolve_column(table, col)
            .unwrap_or_else(|_| col.to_owned())
    }

    fn find_index_table(&self, ix: &TableName) -> Option<TableName> {
        self.catalog
            .tables
            .values()
            .find(|t| {
                (ix.schema.is_none() || t.name.schema == ix.schema)
                    && t.indexes
                        .iter()
                        .any(|i| i.name.as_deref() == Some(ix.name.as_str()))
            })
            .map(|t| t.name.clone())
    }
}

fn prefix_len(f: &sq::Function) -> Option<u32> {
    if let sq::FunctionArguments::List(l) = &f.args {
        if let [sq::FunctionArg::Unnamed(sq::FunctionArgExpr::Expr(sq::Expr::Value(v)))] =
            l.args.as_slice()
        {
            if let sq::Value::Number(n, _) = &v.value {
                return n.parse().ok();
            }
        }
    }
    None
}

/// sqlparser's errors end with "at Line: L, Column: C"; turn that into an offset.
fn sq_error(text: &str, e: &sqlparser::parser::ParserError) -> ParseError {
    let msg = e.to_string();
    let msg = msg
        .strip_prefix("sql parser error: ")
        .unwrap_or(&msg)
        .to_owned();
    let mut offset = 0;
    let mut message = msg.clone();
    if let Some(p) = msg.rfind(" at Line: ") {
        let tail = &msg[p + 10..];
        let mut it = tail.split(", Column: ");
        if let (Some(l), Some(c)) = (it.next(), it.next()) {
            if let (Ok(l), Ok(c)) = (l.trim().parse::<usize>(), c.trim().parse::<usize>()) {
                offset = offset_of(text, l, c);
                message = msg[..p].to_owned();
            }
        }
    }
    if message.contains("recursion limit exceeded") {
        message = format!(
            "expression nested deeper than {} levels (the parser's limit): {message}",
            SQ_RECURSION_LIMIT
        );
    }
    ParseError {
        offset,
        message: lower_first(&message),
        unknown: Vec::new(),
    }
}

/// sqlparser's default nesting limit for expressions and statements.
pub const SQ_RECURSION_LIMIT: usize = 50;

fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// Byte offset of 1-based line/column (column in characters).
pub fn offset_of(text: &str, line: usize, col: usize) -> usize {
    let mut off = 0;
    for (n, l) in text.split_inclusive('\n').enumerate() {
        if n + 1 == line {
            return off
                + l.char_indices()
                    .nth(col.saturating_sub(1))
                    .map(|(i, _)| i)
                    .unwrap_or(l.len());
        }
        off += l.len();
    }
    text.len()
}

/// The changes that make `table.col` an identity drawing from `seq` (its nextval
/// default removed).
pub(crate) fn identity_from(table: &TableName, col: &str, seq: &Sequence) -> Vec<ChangeRequest> {
    vec![
        ChangeRequest::Change(SchemaChange::SetDefault {
            table: table.clone(),
            column: col.to_owned(),
            default: None,
        }),
        ChangeRequest::Change(SchemaChange::SetIdentity {
            table: table.clone(),
            column: col.to_owned(),
            identity: Some(identity_of(seq)),
        }),
    ]
}

/// The identity a column drawing from sequence `seq` becomes.
pub(crate) fn identity_of(seq: &Sequence) -> ddl_core::Identity {
    ddl_core::Identity {
        kind: ddl_core::IdentityKind::ByDefault,
        start: seq.start.filter(|s| *s != 1),
        increment: seq.increment.filter(|i| *i != 1),
    }
}

/// Where Oracle storage attributes start after `CREATE [UNIQUE|BITMAP] INDEX ... ON t
/// (cols)`, if any follow the column list.
/// Where the `ONLY` of a PostgreSQL `CREATE [UNIQUE] INDEX ... ON ONLY table` starts.
fn pg_index_on_only(dialect: Dialect, text: &str, head: &[String]) -> Option<usize> {
    if dialect != Dialect::Postgres
        || head.first().map(String::as_str) != Some("CREATE")
        || !head.iter().take(3).any(|w| w == "INDEX")
    {
        return None;
    }
    let up = text.to_ascii_uppercase();
    let end = up.find('(').unwrap_or(up.len());
    let at = up[..end].find(" ON ONLY")? + 4;
    up[at + 4..]
        .starts_with(|c: char| c.is_whitespace() || c == '"')
        .then_some(at)
}

/// Where the `BITMAP` of an Oracle `CREATE BITMAP INDEX` starts.
fn oracle_bitmap(dialect: Dialect, text: &str, head: &[String]) -> Option<usize> {
    (dialect == Dialect::Oracle
        && head.len() > 2
        && (head[0].as_str(), head[1].as_str(), head[2].as_str()) == ("CREATE", "BITMAP", "INDEX"))
        .then(|| text.to_ascii_uppercase().find("BITMAP"))
        .flatten()
}

fn oracle_index_storage(text: &str) -> Option<usize> {
    let up = text.to_ascii_uppercase();
    let on = up.find(" ON ")?;
    let open = on + text[on..].find('(')?;
    let (rest, _) = grammar::lex::paren_group(grammar::Flavor::Oracle)(&text[open..]).ok()?;
    let close = text.len() - rest.len();
    let first = text[close..]
        .split(|c: char| c.is_whitespace() || c == '(')
        .find(|w| !w.is_empty())?
        .to_ascii_uppercase();
    matches!(
        first.as_str(),
        "PCTFREE"
            | "INITRANS"
            | "MAXTRANS"
            | "COMPUTE"
            | "TABLESPACE"
            | "STORAGE"
            | "LOGGING"
            | "NOLOGGING"
            | "LOCAL"
            | "GLOBAL"
            | "PARALLEL"
            | "NOPARALLEL"
            | "COMPRESS"
            | "NOCOMPRESS"
            | "ONLINE"
            | "VISIBLE"
            | "INVISIBLE"
            | "REVERSE"
            | "SORT"
            | "NOSORT"
    )
    .then_some(close)
}
