//! DDL in the binlog: the schema history follows it; online-schema-change shadow
//! tables; partition truncates that remove rows without row events.

use super::*;

impl BinlogReader {
    /// A data change logged as a statement (INSERT, UPDATE, DELETE, REPLACE, LOAD
    /// DATA) that names a captured table: that table (`db.table`).
    pub(super) fn statement_logged_change(&self, db: &str, sql: &str) -> Option<String> {
        let first = first_word(sql)?;
        if !["INSERT", "UPDATE", "DELETE", "REPLACE", "LOAD"].contains(&first.as_str()) {
            return None;
        }
        let words: std::collections::HashSet<String> = sql
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect();
        // A name as a word, or quoted (a name with a dot, a space, a quote or a
        // hyphen is never a word of its own; it was missed, and its change lost).
        let lower = sql.to_lowercase();
        let named = |n: &str| {
            let n = n.to_lowercase();
            words.contains(&n)
                || lower.contains(&format!("`{}`", n.replace('`', "``")))
                || lower.contains(&format!("\"{}\"", n.replace('"', "\"\"")))
        };
        self.history
            .tables()
            .filter_map(|t| Some((t.name.schema.clone()?, t.name.name.clone())))
            .filter(|(d, n)| self.src.captures(d, n))
            .find(|(d, n)| named(n) && (d.eq_ignore_ascii_case(db) || named(d)))
            .map(|(d, n)| format!("{d}.{n}"))
    }

    pub(super) async fn ddl(
        &mut self,
        db: &str,
        modes: SqlModes,
        sql: &str,
    ) -> Result<bool, SourceError> {
        let ansi = modes.ansi_quotes;
        self.ordinal += 1;
        if self.skip > 0 {
            self.skip -= 1;
            return Ok(true);
        }
        // Rows before the DDL are delivered under the old schema.
        if !self.flush().await? {
            return Ok(false);
        }
        let pos = self.position_at(
            self.txn_start,
            self.ordinal - 1,
            &self.txn_gtid_before.clone(),
        );
        let after = self.position_at(self.txn_start, self.ordinal, &self.txn_gtid_before.clone());
        // Partition maintenance: rows vanish without row events; columns stay.
        if let Some((tdb, table)) = partition_rows_removed(sql, db) {
            if self.src.captures(&tdb, &table) {
                return Ok(self
                    .send(SourceEvent::RowsRemoved {
                        position: after,
                        db: tdb,
                        table,
                        ddl: sql.to_owned(),
                    })
                    .await);
            }
            return Ok(true);
        }
        let db_opt = (!db.is_empty()).then_some(db);
        if modes.pipes_as_concat
            && has_pipes(sql, modes)
            && crate::source::history::tables_named(db, sql)
                .iter()
                .any(|t| {
                    t.split_once('.')
                        .is_some_and(|(d, n)| self.src.captures(d, n))
                })
        {
            return Err(SourceError::Ddl {
                position: pos.to_string(),
                ddl: sql.to_owned(),
                reason: "the session's sql_mode has PIPES_AS_CONCAT, under which `||` concatenates; lakeshift reads `||` as OR (MySQL's default), so the statement would be mirrored with another meaning. Write it with CONCAT(), or leave PIPES_AS_CONCAT out of that session's sql_mode".into(),
            });
        }
        let mut applied = self.history.apply(&pos, db_opt, ansi, sql);
        if let Err(e) = &applied {
            // A table the history left unread at its start, named by a DDL that
            // concerns the capture (renamed into it, copied by CREATE ... LIKE): its
            // definition from the server, then the DDL again.
            if self.src.concerns(&e.tables, db) && self.adopt_unread(&e.tables, db).await? {
                applied = self.history.apply(&pos, db_opt, ansi, sql);
            }
        }
        // A table the history never knew, renamed into the captured tables.
        let moved_in = applied
            .is_err()
            .then(|| renamed_pairs(sql, db))
            .flatten()
            .and_then(|c| crate::source::moved_in(&self.src, db, &c));
        if let Some(reason) = moved_in {
            return Err(SourceError::Ddl {
                position: pos.to_string(),
                ddl: sql.to_owned(),
                reason,
            });
        }
        let out = match applied {
            Ok(out) => out,
            Err(e) if !self.src.concerns(&e.tables, db) => {
                tracing::info!("skipped: DDL at {pos} outside the captured tables: {e}");
                return Ok(true);
            }
            Err(e) if self.src.skip_unparsed_ddl => {
                let ev = crate::source::unparsed(&after, db, sql, &e);
                return Ok(self.send(ev).await);
            }
            Err(e) => {
                return Err(SourceError::Ddl {
                    position: pos.to_string(),
                    ddl: sql.to_owned(),
                    reason: e.message,
                })
            }
        };
        self.decoders.clear();
        for t in self.tables.values_mut() {
            t.table = None;
        }
        let changes = self.osc(db, out.changes, &pos)?;
        let changes = self
            .outside
            .moves_in(&self.src, db, &self.history, changes, |_, _| None);
        let changes = match changes {
            Ok(c) => c,
            Err(reason) => {
                return Err(SourceError::Ddl {
                    position: pos.to_string(),
                    ddl: sql.to_owned(),
                    reason,
                })
            }
        };
        let zero_null = self.src.binlog().zero_dates == crate::source::config::ZeroDates::Null;
        let mut changes = changes;
        for c in &mut changes {
            if let ddl_core::SchemaChange::AddColumn { column, .. } = c {
                implicit_default(column, zero_null);
                session_increment(column, modes.increment);
            }
        }
        // A truncate a resumed snapshot's copy already reflects is not repeated.
        let changes: Vec<ddl_core::SchemaChange> = changes
            .into_iter()
            .filter(|c| match c {
                ddl_core::SchemaChange::TruncateTable { name } => !self
                    .seen
                    .as_ref()
                    .is_some_and(|s| s.saw(name.schema.as_deref().unwrap_or(db), &name.name, &pos)),
                _ => true,
            })
            .collect();
        match crate::source::schema_event(
            &self.src,
            &self.history,
            db,
            after,
            sql,
            changes,
            out.notes,
        ) {
            Some(ev) => Ok(self.send(ev).await),
            None => Ok(true),
        }
    }

    /// Read the definitions of the tables among `tables` (default database `db`) that
    /// the history left unread, as the server holds them now. Whether any was read.
    async fn adopt_unread(
        &mut self,
        tables: &[ddl_core::TableName],
        db: &str,
    ) -> Result<bool, SourceError> {
        let unread: Vec<(String, String)> = tables
            .iter()
            .map(|t| {
                (
                    t.schema.clone().unwrap_or_else(|| db.to_owned()),
                    t.name.clone(),
                )
            })
            .filter(|(d, n)| self.history.is_unread(d, n))
            .collect();
        if unread.is_empty() {
            return Ok(false);
        }
        let mut conn = mysql_async::Conn::new(self.src.opts())
            .await
            .map_err(|e| SourceError::connect(&self.src.at(), e))?;
        let mut any = false;
        for (d, n) in unread {
            if let Some(ddl) = crate::source::snapshot::definition(&mut conn, &d, &n).await? {
                tracing::info!("reading the definition of {d}.{n}, which a DDL on the captured tables names (as the server holds it now)");
                self.history.adopt(&d, &n, &ddl)?;
                any = true;
            }
        }
        let _ = conn.disconnect().await;
        Ok(any)
    }

    /// Online schema change tools: a shadow table's changes are kept as the real
    /// table's, and the cut-over rename becomes those changes (or nothing).
    pub(super) fn osc(
        &mut self,
        db: &str,
        changes: Vec<ddl_core::SchemaChange>,
        pos: &Position,
    ) -> Result<Vec<ddl_core::SchemaChange>, SourceError> {
        let before = self.history.shadow.clone();
        use crate::source::config::{osc_helper, OscRole};
        use ddl_core::SchemaChange as C;
        let key = |t: &ddl_core::TableName| {
            (
                t.schema.clone().unwrap_or_else(|| db.to_owned()),
                t.name.clone(),
            )
        };
        let mut out = Vec::new();
        let mut cut_over: Vec<((String, String), ddl_core::SchemaChange)> = Vec::new();
        for c in changes {
            match &c {
                C::CreateTable { table, .. } => {
                    if let Some((base, OscRole::Shadow)) = osc_helper(&table.name.name) {
                        let (d, _) = key(&table.name);
                        self.history.shadow.insert(
                            (d, base.to_owned()),
                            crate::source::history::Shadow {
                                created: pos.clone(),
                                changes: Vec::new(),
                                cut_over: None,
                            },
                        );
                    }
                    out.push(c);
                }
                C::RenameTable { from, to } => {
                    let (fd, fname) = key(from);
                    let (td, tname) = key(to);
                    match (osc_helper(&fname), osc_helper(&tname)) {
                        // t -> _t_del / _t_old: the old table leaves (part of the cut-over).
                        (None, Some((base, OscRole::Other))) if base == fname && fd == td => {
                            cut_over.push(((fd, fname), c.clone()));
                        }
                        // _t_gho -> t: the shadow becomes the table.
                        (Some((base, OscRole::Shadow)), None) if base == tname && fd == td => {
                            if let Some(sh) =
                                self.history.shadow.get_mut(&(fd.clone(), tname.clone()))
                            {
                                if sh.cut_over.is_none() {
                                    out.extend(sh.changes.iter().map(|(_, c)| c.clone()));
                                    sh.cut_over = Some(pos.clone());
                                }
                            }
                            cut_over.retain(|(k, _)| *k != (fd.clone(), tname.clone()));
                        }
                        _ => out.push(c),
                    }
                }
                other => {
                    let shadow_of = other.table().and_then(|t| {
                        let (d, n) = key(t);
                        match osc_helper(&n) {
                            Some((b, OscRole::Shadow)) => Some((d, b.to_owned())),
                            _ => None,
                        }
                    });
                    if let Some((d, base)) = shadow_of {
                        if let Some(sh) = self
                            .history
                            .shadow
                            .get_mut(&(d.clone(), base.clone()))
                            .filter(|sh| sh.cut_over.is_none())
                        {
                            sh.changes.push((
                                pos.clone(),
                                retarget(other, &ddl_core::TableName::new(Some(&d), &base)),
                            ));
                        }
                    }
                    out.push(c);
                }
            }
        }
        // A rename of t to _t_del without the shadow's rename in the same statement is
        // an ordinary rename.
        out.extend(cut_over.into_iter().map(|(_, c)| c));
        if self.history.shadow != before {
            self.history.save_shadow()?;
        }
        Ok(out)
    }
}

/// A NOT NULL column added without a default: MySQL gives the rows a table holds
/// the type's implicit default (0, '' (JSON too), an ENUM's first value, zero bytes,
/// 00:00:00, the zero UUID, the zero INET6 and INET4 address), which the change then carries, so that every target's older rows hold
/// it too (a PostgreSQL target refused the column, Iceberg's older rows read NULL).
/// Zero dates have no value elsewhere: under `zero-dates: null` (`zero_null`), which
/// delivers a zero date as NULL, such a column is added nullable, its older rows
/// NULL; under `fail` it stays as it is (the targets refuse it, naming it).
fn implicit_default(column: &mut ddl_core::Column, zero_null: bool) {
    use ddl_core::{DataType as D, DefaultValue, Literal};
    if !column.nullable
        && column.default.is_none()
        && column.generated.is_none()
        && column.identity.is_none()
    {
        let value = match &column.data_type {
            D::Boolean
            | D::Int { .. }
            | D::Decimal { .. }
            | D::Float { .. }
            | D::Year
            | D::Bit { .. } => Some(Literal::Number("0".into())),
            // (MariaDB's JSON is a LONGTEXT: its rows get '', which is no JSON; a
            // target whose JSON type refuses it says so as the DDL policy says.)
            D::Char { .. }
            | D::Varchar { .. }
            | D::Text { .. }
            | D::Set { .. }
            | D::Json { .. } => Some(Literal::String(String::new())),
            D::Enum { values } => values.first().cloned().map(Literal::String),
            D::Binary { .. } | D::Varbinary { .. } | D::Blob { .. } => {
                Some(Literal::Bytes(String::new()))
            }
            D::Time { .. } => Some(Literal::String("00:00:00".into())),
            D::Uuid => Some(Literal::String(
                "00000000-0000-0000-0000-000000000000".into(),
            )),
            // MariaDB's address types: the zero address.
            D::Other { dialect, name } if dialect == "mysql" && name == "inet6" => {
                Some(Literal::String("::".into()))
            }
            D::Other { dialect, name } if dialect == "mysql" && name == "inet4" => {
                Some(Literal::String("0.0.0.0".into()))
            }
            _ => None,
        };
        if value.is_none() && zero_null && matches!(column.data_type, D::Date | D::Timestamp { .. })
        {
            column.nullable = true;
        }
        column.default =
            value.map(|value| DefaultValue::Literal { value }.fitted(&column.data_type));
    }
}

/// An AUTO_INCREMENT column added under a session `auto_increment_increment` other
/// than 1: the rows the table holds were numbered in that step, which the column's
/// identity says (a target numbering them with its own step differs).
fn session_increment(column: &mut ddl_core::Column, increment: u16) {
    if let Some(id) = column.identity.as_mut().filter(|_| increment > 1) {
        id.increment = Some(i64::from(increment));
    }
}

/// `ALTER TABLE t TRUNCATE|DROP|EXCHANGE PARTITION ...`: (db, table).
pub(super) fn partition_rows_removed(sql: &str, db: &str) -> Option<(String, String)> {
    use std::sync::OnceLock;
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        regex::Regex::new(
            r"(?is)^\s*ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+((?:`[^`]+`|[\w$]+)(?:\s*\.\s*(?:`[^`]+`|[\w$]+))?)\s+(?:TRUNCATE|DROP|EXCHANGE)\s+PARTITION\b",
        )
        .expect("valid regex")
    });
    let name = re.captures(sql)?.get(1)?.as_str();
    let unq = |s: &str| s.trim().trim_matches('`').to_owned();
    let parts: Vec<&str> = if name.starts_with('`') {
        name.split("`.`").collect()
    } else {
        name.split('.').collect()
    };
    Some(match parts.as_slice() {
        [d, t] => (unq(d), unq(t)),
        _ => (db.to_owned(), unq(name)),
    })
}

/// A change re-addressed to another table (a shadow table's change as the real one's).
pub(super) fn retarget(
    c: &ddl_core::SchemaChange,
    to: &ddl_core::TableName,
) -> ddl_core::SchemaChange {
    let mut v = serde_json::to_value(c).expect("changes serialise");
    if let Some(o) = v.as_object_mut() {
        for k in ["table", "name"] {
            if o.get(k).is_some_and(|x| x.get("name").is_some()) {
                o.insert(
                    k.to_owned(),
                    serde_json::to_value(to).expect("names serialise"),
                );
            }
        }
    }
    serde_json::from_value(v).unwrap_or_else(|_| c.clone())
}

/// A statement's text as its session sent it. A Query event holds the client's
/// bytes, in the session's character set (`SET NAMES latin1`: a column named `café`
/// is `caf\xe9`), which its status variables name; UTF-8 when they name none. A
/// string of bytes that are not of it (a binary default) reads as a hex literal.
pub(super) fn query_text(
    q: &mysql_async::binlog::events::QueryEvent<'_>,
) -> Result<String, SourceError> {
    use mysql_async::binlog::events::StatusVarVal;
    use mysql_async::binlog::StatusVarKey;
    let raw = q.query_raw();
    if raw.is_ascii() {
        return Ok(String::from_utf8_lossy(raw).into_owned());
    }
    let client = q
        .status_vars()
        .get_status_var(StatusVarKey::Charset)
        .and_then(|v| match v.get_value() {
            Ok(StatusVarVal::Charset { charset_client, .. }) => Some(charset_client),
            _ => None,
        });
    let name = client.map(|id| {
        mysql_common::collations::Collation::resolve(mysql_common::collations::CollationId::from(
            id,
        ))
        .charset()
        .to_owned()
    });
    let unreadable = |why: String| {
        SourceError::Protocol(format!(
            "a statement was sent in the character set {}, which {why}; the statement (as UTF-8): {}",
            name.as_deref().unwrap_or("?"),
            String::from_utf8_lossy(raw)
        ))
    };
    // (None: UTF-8.)
    match crate::source::decode::Charset::from_mysql(name.as_deref()) {
        Ok(cs) => match cs.decode(raw) {
            (text, true) => Ok(text.into_owned()),
            // A binary value's raw bytes in a string (`DEFAULT _binary'\xab'`): read
            // as the hex literal of its bytes.
            (_, false) if cs == crate::source::decode::Charset::Utf8 => {
                grammar::split::mysql_text_from_bytes_exact(raw)
                    .ok_or_else(|| unreadable("its bytes are not".into()))
            }
            (_, false) => Err(unreadable("its bytes are not".into())),
        },
        Err(e) => Err(unreadable(format!("lakeshift cannot read ({})", e.0))),
    }
}

/// The renames of `RENAME TABLE a TO b, ...` or `ALTER TABLE a RENAME [TO|AS] b`,
/// read from the text alone (tables the history never knew); None for any other
/// statement.
fn renamed_pairs(sql: &str, db: &str) -> Option<Vec<ddl_core::SchemaChange>> {
    use std::sync::OnceLock;
    static ALTER: OnceLock<regex::Regex> = OnceLock::new();
    static RENAME: OnceLock<regex::Regex> = OnceLock::new();
    const NAME: &str = r"((?:`(?:[^`]|``)+`|[\w$]+)(?:\s*\.\s*(?:`(?:[^`]|``)+`|[\w$]+))?)";
    let alter = ALTER.get_or_init(|| {
        regex::Regex::new(&format!(
            r"(?is)^\s*ALTER\s+(?:ONLINE\s+|IGNORE\s+)*TABLE\s+{NAME}\s+RENAME\s+(?:TO\s+|AS\s+)?{NAME}\s*;?\s*$"
        ))
        .expect("valid regex")
    });
    let rename = RENAME.get_or_init(|| {
        regex::Regex::new(&format!(r"(?is){NAME}\s+TO\s+{NAME}")).expect("valid regex")
    });
    let name = |s: &str| -> ddl_core::TableName {
        let parts: Vec<String> = if s.contains('`') {
            let mut out = Vec::new();
            let (mut cur, mut quoted, mut chars) = (String::new(), false, s.chars().peekable());
            while let Some(c) = chars.next() {
                match c {
                    '`' if quoted && chars.peek() == Some(&'`') => {
                        cur.push('`');
                        chars.next();
                    }
                    '`' => quoted = !quoted,
                    '.' if !quoted => out.push(std::mem::take(&mut cur)),
                    c if !quoted && c.is_whitespace() => {}
                    c => cur.push(c),
                }
            }
            out.push(cur);
            out
        } else {
            s.split('.').map(|p| p.trim().to_owned()).collect()
        };
        match parts.as_slice() {
            [d, t] => ddl_core::TableName::new(Some(d), t),
            _ => ddl_core::TableName::new(Some(db), &parts.concat()),
        }
    };
    let pair = |a: &str, b: &str| ddl_core::SchemaChange::RenameTable {
        from: name(a),
        to: name(b),
    };
    if let Some(c) = alter.captures(sql) {
        return Some(vec![pair(&c[1], &c[2])]);
    }
    let rest = sql.trim_start();
    let head = rest.get(..12).unwrap_or_default();
    if !head.to_ascii_uppercase().starts_with("RENAME TABLE") {
        return None;
    }
    Some(
        rename
            .captures_iter(&rest[12..])
            .map(|c| pair(&c[1], &c[2]))
            .collect(),
    )
}

/// The session's `sql_mode` flags that change how a statement reads.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct SqlModes {
    /// `"x"` is a name, not a string.
    pub ansi_quotes: bool,
    /// A backslash in a string is itself, not an escape.
    pub no_backslash_escapes: bool,
    /// `||` concatenates (else it is OR).
    pub pipes_as_concat: bool,
    /// The session's `auto_increment_increment` (0 or 1: the default): the
    /// step between the numbers an AUTO_INCREMENT column added to rows gives them.
    pub increment: u16,
}

pub(super) fn sql_modes(q: &mysql_async::binlog::events::QueryEvent<'_>) -> SqlModes {
    use mysql_async::binlog::events::StatusVarVal;
    use mysql_async::binlog::StatusVarKey;
    use mysql_async::consts::SqlMode;
    let increment = q
        .status_vars()
        .get_status_var(StatusVarKey::AutoIncrement)
        .and_then(|v| match v.get_value() {
            Ok(StatusVarVal::AutoIncrement { increment, .. }) => Some(increment),
            _ => None,
        })
        .unwrap_or(1);
    let Some(v) = q.status_vars().get_status_var(StatusVarKey::SqlMode) else {
        return SqlModes {
            increment,
            ..SqlModes::default()
        };
    };
    match v.get_value() {
        Ok(StatusVarVal::SqlMode(m)) => {
            let m = m.get();
            SqlModes {
                ansi_quotes: m.contains(SqlMode::MODE_ANSI_QUOTES),
                no_backslash_escapes: m.contains(SqlMode::MODE_NO_BACKSLASH_ESCAPES),
                pipes_as_concat: m.contains(SqlMode::MODE_PIPES_AS_CONCAT),
                increment,
            }
        }
        _ => SqlModes {
            increment,
            ..SqlModes::default()
        },
    }
}

/// Where a MySQL statement's text is: outside quotes and comments, or inside a
/// string (with `no_backslash_escapes`, a backslash there is itself).
#[derive(Clone, Copy, PartialEq)]
enum At {
    Code,
    Str(char),
    Name(char),
    Line,
    Block,
}

/// Walks `sql`, giving each character with where it is.
fn walk(sql: &str, modes: SqlModes, mut f: impl FnMut(char, At)) {
    let mut at = At::Code;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        let here = at;
        at = match (at, c) {
            (At::Code, '\'') => At::Str('\''),
            (At::Code, '"') if !modes.ansi_quotes => At::Str('"'),
            (At::Code, '"') => At::Name('"'),
            (At::Code, '`') => At::Name('`'),
            (At::Code, '#') => At::Line,
            (At::Code, '-') if chars.peek() == Some(&'-') => At::Line,
            (At::Code, '/') if chars.peek() == Some(&'*') => At::Block,
            (At::Str(q), '\\') if !modes.no_backslash_escapes => {
                f(c, At::Str(q));
                if let Some(n) = chars.next() {
                    f(n, At::Str(q));
                }
                continue;
            }
            (At::Str(q), c) if c == q => {
                if chars.peek() == Some(&q) {
                    f(c, At::Str(q));
                    f(chars.next().expect("peeked"), At::Str(q));
                    continue;
                }
                At::Code
            }
            (At::Name(q), c) if c == q => At::Code,
            (At::Line, '\n') => At::Code,
            (At::Block, '*') if chars.peek() == Some(&'/') => {
                f(c, At::Block);
                f(chars.next().expect("peeked"), At::Block);
                at = At::Code;
                continue;
            }
            (a, _) => a,
        };
        // (An opening or closing quote is part of its string.)
        let shown = match (here, at) {
            (At::Code, At::Str(_)) => at,
            _ => here,
        };
        f(c, shown);
    }
}

/// A statement sent under NO_BACKSLASH_ESCAPES, written so that a reader with
/// backslash escapes reads the same strings: each backslash inside a string doubled.
pub(super) fn literal_backslashes(sql: &str, modes: SqlModes) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    walk(sql, modes, |c, at| {
        out.push(c);
        if c == '\\' && matches!(at, At::Str(_)) {
            out.push('\\');
        }
    });
    out
}

/// Whether a statement has `||` outside strings, names and comments.
pub(super) fn has_pipes(sql: &str, modes: SqlModes) -> bool {
    let (mut last, mut found) = (None, false);
    walk(sql, modes, |c, at| {
        if at == At::Code && c == '|' && last == Some('|') {
            found = true;
        }
        last = (at == At::Code).then_some(c);
    });
    found
}

/// The first keyword of a statement, after comments, upper-cased.
fn first_word(sql: &str) -> Option<String> {
    let mut s = sql.trim_start();
    loop {
        if let Some(rest) = s.strip_prefix("/*") {
            s = rest.split_once("*/")?.1.trim_start();
        } else if s.starts_with("--") || s.starts_with('#') {
            s = s.split_once('\n')?.1.trim_start();
        } else {
            break;
        }
    }
    let w: String = s.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
    (!w.is_empty()).then(|| w.to_ascii_uppercase())
}
