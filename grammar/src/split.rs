//! Splitting a script or dump into statements, each with its line and column.
//!
//! Understands what dump files contain: `;` inside strings, quoted names and comments;
//! PostgreSQL dollar quoting; the mysql client's `DELIMITER` lines; mysqldump's
//! executable comments `/*!50705 ... */` (unwrapped, since MySQL runs them); Oracle
//! PL/SQL blocks ended by a line holding only `/`.

use crate::Flavor;

/// What a piece of a script is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A SQL statement.
    Sql,
    /// A command of the client tool that runs the script (SQL*Plus `PROMPT`, psql
    /// `\connect`, the mysql client's `source`): line-terminated, not SQL. The string
    /// names the tool.
    Client(&'static str),
    /// Text that never ends: an unterminated comment, string, quoted name or dollar
    /// quote. The string says which; the statement's position is where it starts.
    Unterminated(&'static str),
}

/// One statement of a script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// The statement without its terminator. Executable-comment markers are replaced by
    /// spaces, so offsets inside the text still match the source.
    pub text: String,
    /// Byte offset of the statement's first character in the input.
    pub offset: usize,
    /// 1-based line and column (in characters) of the first character.
    pub line: usize,
    pub column: usize,
    pub kind: Kind,
}

/// Line and column (1-based, column in characters) of byte `offset` in `text`.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    Positions::new(text).at(offset)
}

/// Line and column of offsets into one text. Asked for increasing offsets (as the
/// splitter and the translator do) it scans the text once in all, so positions cost
/// no more than the split itself; a smaller offset starts again from the top.
pub struct Positions<'a> {
    text: &'a str,
    pos: usize,
    line: usize,
    line_start: usize,
}

impl<'a> Positions<'a> {
    pub fn new(text: &'a str) -> Self {
        Positions {
            text,
            pos: 0,
            line: 1,
            line_start: 0,
        }
    }

    /// 1-based line and column (in characters) of byte `offset`.
    pub fn at(&mut self, offset: usize) -> (usize, usize) {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        if offset < self.pos {
            *self = Positions::new(self.text);
        }
        for (k, b) in self.text.as_bytes()[self.pos..offset].iter().enumerate() {
            if *b == b'\n' {
                self.line += 1;
                self.line_start = self.pos + k + 1;
            }
        }
        self.pos = offset;
        let column = self.text[self.line_start..offset].chars().count() + 1;
        (self.line, column)
    }
}

fn starts_plsql_block(head: &str) -> bool {
    let mut words = head
        .split(|c: char| c.is_whitespace() || c == '(')
        .filter(|w| !w.is_empty())
        .map(|w| w.to_ascii_uppercase());
    let first = words.next().unwrap_or_default();
    if first == "DECLARE" || first == "BEGIN" {
        return true;
    }
    if first != "CREATE" {
        return false;
    }
    for w in words.take(4) {
        match w.as_str() {
            "OR" | "REPLACE" | "EDITIONABLE" | "NONEDITIONABLE" => continue,
            "PROCEDURE" | "FUNCTION" | "PACKAGE" | "TRIGGER" | "TYPE" | "LIBRARY" => return true,
            _ => return false,
        }
    }
    false
}

/// The client tool whose line-terminated command starts at `line` (the rest of a
/// line, from its first non-blank character), if any. Such commands end at the end of
/// their line and never take the next statement with them.
fn client_command(flavor: Flavor, line: &str) -> Option<&'static str> {
    let mut words = line
        .split(|c: char| c.is_whitespace() || c == ';')
        .filter(|w| !w.is_empty());
    let first = words.next()?.to_ascii_uppercase();
    match flavor {
        Flavor::Oracle => {
            if first.starts_with('@') || first.starts_with('!') {
                return Some("SQL*Plus");
            }
            let sqlplus = match first.as_str() {
                // SQL's own SET statements end with `;` like any other.
                "SET" => !matches!(
                    words.next().map(|w| w.to_ascii_uppercase()).as_deref(),
                    Some("TRANSACTION" | "ROLE" | "CONSTRAINT" | "CONSTRAINTS")
                ),
                "REM" | "REMARK" | "PROMPT" | "PRO" | "SPOOL" | "SPO" | "WHENEVER" | "CONNECT"
                | "CONN" | "DISCONNECT" | "DISC" | "EXIT" | "QUIT" | "DEFINE" | "DEF"
                | "UNDEFINE" | "UNDEF" | "COLUMN" | "COL" | "TTITLE" | "BTITLE" | "BREAK"
                | "COMPUTE" | "CLEAR" | "SHOW" | "SHO" | "PAUSE" | "ACCEPT" | "ACC" | "HOST"
                | "START" | "STA" | "DESCRIBE" | "DESC" | "EXECUTE" | "EXEC" | "VARIABLE"
                | "VAR" | "PRINT" | "TIMING" | "STORE" | "PASSWORD" | "REPHEADER" | "REPFOOTER"
                | "ATTRIBUTE" | "HELP" | "RUN" | "GET" | "SAVE" | "EDIT" | "APPEND" | "CHANGE"
                | "DEL" | "INPUT" | "LIST" => true,
                _ => false,
            };
            sqlplus.then_some("SQL*Plus")
        }
        Flavor::Postgres => line.starts_with('\\').then_some("psql"),
        Flavor::MySql => {
            if line.starts_with('\\') {
                return Some("mysql client");
            }
            matches!(
                first.as_str(),
                "SOURCE"
                    | "CHARSET"
                    | "CONNECT"
                    | "EXIT"
                    | "QUIT"
                    | "PROMPT"
                    | "REHASH"
                    | "STATUS"
                    | "SYSTEM"
                    | "TEE"
                    | "NOTEE"
                    | "WARNINGS"
                    | "NOWARNING"
                    | "PAGER"
                    | "NOPAGER"
                    | "EGO"
                    | "GO"
                    | "RESETCONNECTION"
            )
            .then_some("mysql client")
        }
    }
}

/// Split `input` into statements.
pub fn split(flavor: Flavor, input: &str) -> Vec<Statement> {
    Splitter::new(flavor, input).collect()
}

/// Statements of a script, one at a time, as they are read: a caller that handles
/// each before asking for the next holds one statement, not the whole script, in
/// memory besides the input.
pub struct Splitter<'a> {
    flavor: Flavor,
    input: &'a str,
    i: usize,
    delimiter: String,
    positions: Positions<'a>,
    /// The last statement returned ran into the end of the input (no terminator,
    /// unterminated text, a client line without its newline, COPY data without `\.`):
    /// with more input to come, it may not be complete.
    open_end: bool,
    /// Everything before this offset is split for good: statements returned whole,
    /// and comments, blanks and client lines that ended before the input did.
    settled: usize,
}

/// Per-statement state of the splitter.
#[derive(Default)]
struct Pending {
    start: Option<usize>,
    /// Executable-comment markers to blank out.
    masks: Vec<(usize, usize)>,
    exec_comment_depth: usize,
    plsql: bool,
}

impl<'a> Splitter<'a> {
    pub fn new(flavor: Flavor, input: &'a str) -> Self {
        Self::with_delimiter(flavor, input, ";")
    }

    /// A splitter that starts with the mysql client's `delimiter` already changed (a
    /// script read in parts goes on where the previous part ended).
    pub fn with_delimiter(flavor: Flavor, input: &'a str, delimiter: &str) -> Self {
        Splitter {
            flavor,
            input,
            i: 0,
            delimiter: delimiter.to_owned(),
            positions: Positions::new(input),
            open_end: false,
            settled: 0,
        }
    }

    /// The statement delimiter in force (`;` unless a DELIMITER line changed it).
    pub fn delimiter(&self) -> &str {
        &self.delimiter
    }

    /// Whether the last statement returned ran into the end of the input, so more
    /// input could still change it.
    pub fn open_end(&self) -> bool {
        self.open_end
    }

    /// The offset up to which the input is split for good: what follows (a statement
    /// or comment that ran into the end of the input) is read again when more comes.
    pub fn settled(&self) -> usize {
        self.settled
    }

    fn line_end(&self, from: usize) -> usize {
        self.input[from..]
            .find('\n')
            .map(|p| from + p)
            .unwrap_or(self.input.len())
    }

    /// Only blanks between the start of `i`'s line and `i`.
    fn first_on_line(&self, i: usize) -> bool {
        let b = self.input.as_bytes();
        let mut k = i;
        while k > 0 {
            match b[k - 1] {
                b'\n' => return true,
                b' ' | b'\t' | b'\r' => k -= 1,
                _ => return false,
            }
        }
        true
    }

    fn make(
        &mut self,
        s: usize,
        e: usize,
        masks: &mut Vec<(usize, usize)>,
        kind: Kind,
    ) -> Option<Statement> {
        let mut text = self.input[s..e].to_owned();
        for (ms, me) in masks.drain(..) {
            if ms >= s && me <= e {
                // Replace bytes of the marker with spaces (markers are ASCII).
                text.replace_range(ms - s..me - s, &" ".repeat(me - ms));
            }
        }
        let trimmed = text.trim_end().len();
        text.truncate(trimmed);
        if text.trim().is_empty() {
            return None;
        }
        let (line, column) = self.positions.at(s);
        Some(Statement {
            text,
            offset: s,
            line,
            column,
            kind,
        })
    }

    /// A statement that never ends: everything from `at` is consumed.
    fn unterminated(&mut self, at: usize, what: &'static str) -> Option<Statement> {
        let e = self.input.len();
        self.i = e;
        self.open_end = true;
        let (line, column) = self.positions.at(at);
        Some(Statement {
            text: self.input[at..e].to_owned(),
            offset: at,
            line,
            column,
            kind: Kind::Unterminated(what),
        })
    }

    /// A client command from `i` to the end of its line (SQL*Plus continues a command
    /// whose line ends with `-`).
    fn client(&mut self, i: usize, tool: &'static str) -> Option<Statement> {
        let mut e = self.line_end(i);
        while tool == "SQL*Plus"
            && self.input[i..e].trim_end().ends_with('-')
            && e < self.input.len()
        {
            e = self.line_end(e + 1);
        }
        self.i = e;
        self.open_end = e == self.input.len();
        let mut none = Vec::new();
        self.make(i, e, &mut none, Kind::Client(tool))
    }

    /// psql's `COPY ... FROM stdin;` is followed by its data, ended by a line `\.`:
    /// that data belongs to the statement, not to the script.
    fn skip_copy_data(&mut self, stmt: &str) {
        if self.flavor != Flavor::Postgres {
            return;
        }
        let head: String = stmt.chars().take(4).collect();
        if !head.eq_ignore_ascii_case("COPY") {
            return;
        }
        let up = stmt.to_ascii_uppercase();
        if !up.contains("FROM STDIN") {
            return;
        }
        // The data starts on the next line.
        let mut k = self.line_end(self.i);
        while k < self.input.len() {
            let next = self.line_end(k + 1);
            if self.input[k + 1..next].trim_end_matches('\r') == "\\." {
                self.i = next;
                return;
            }
            k = next;
        }
        self.i = self.input.len();
        self.open_end = true;
    }
}

impl Iterator for Splitter<'_> {
    type Item = Statement;

    fn next(&mut self) -> Option<Statement> {
        if !self.open_end {
            self.settled = self.i;
        }
        self.open_end = false;
        let input = self.input;
        let b = input.as_bytes();
        let flavor = self.flavor;
        let mut st = Pending::default();
        while self.i < b.len() {
            let i = self.i;
            if st.start.is_none() {
                self.settled = i;
            }
            let c = b[i];
            // Oracle: a line holding only `/` ends the current statement or block.
            if flavor == Flavor::Oracle && c == b'/' && (i == 0 || b[i - 1] == b'\n') {
                let line_end = self.line_end(i);
                if input[i + 1..line_end].trim().is_empty() {
                    self.i = line_end;
                    if let Some(s) = st.start.take() {
                        if let Some(out) = self.make(s, i, &mut st.masks, Kind::Sql) {
                            return Some(out);
                        }
                    }
                    st.plsql = false;
                    continue;
                }
            }
            match c {
                b' ' | b'\t' | b'\r' | b'\n' => {
                    self.i += 1;
                    continue;
                }
                b'-' if b.get(i + 1) == Some(&b'-') => {
                    self.i = self.line_end(i);
                    continue;
                }
                b'#' if flavor == Flavor::MySql => {
                    self.i = self.line_end(i);
                    continue;
                }
                b'/' if b.get(i + 1) == Some(&b'*') => {
                    if flavor == Flavor::MySql && b.get(i + 2) == Some(&b'!') {
                        // Executable comment: mask the marker and version, keep the body.
                        let mut j = i + 3;
                        while j < b.len() && b[j].is_ascii_digit() {
                            j += 1;
                        }
                        if st.start.is_none() {
                            st.start = Some(i);
                        }
                        st.masks.push((i, j));
                        st.exec_comment_depth += 1;
                        self.i = j;
                        continue;
                    }
                    match input[i + 2..].find("*/") {
                        Some(p) => self.i = i + 2 + p + 2,
                        None => return self.unterminated(i, "comment"),
                    }
                    continue;
                }
                b'*' if st.exec_comment_depth > 0 && b.get(i + 1) == Some(&b'/') => {
                    st.masks.push((i, i + 2));
                    st.exec_comment_depth -= 1;
                    self.i += 2;
                    continue;
                }
                _ => {}
            }
            if st.start.is_none() {
                let line_end = self.line_end(i);
                let r = &input[i..line_end];
                if self.first_on_line(i) {
                    if let Some(tool) = client_command(flavor, r) {
                        if let Some(out) = self.client(i, tool) {
                            return Some(out);
                        }
                        continue;
                    }
                }
                // DELIMITER lines (mysql client), only between statements.
                // regression: a multi-byte character at byte 10 panicked the slice (proptest)
                if flavor == Flavor::MySql
                    && r.get(..10)
                        .is_some_and(|h| h.eq_ignore_ascii_case("DELIMITER "))
                {
                    let d = r[10..].trim();
                    if !d.is_empty() {
                        self.delimiter = d.to_owned();
                    }
                    self.i = line_end;
                    continue;
                }
                // The mysql client's `use db` needs no terminator: it ends its line.
                if flavor == Flavor::MySql
                    && self.first_on_line(i)
                    && r.get(..4).is_some_and(|h| h.eq_ignore_ascii_case("USE "))
                    && !r.contains(self.delimiter.as_str())
                    && !r.contains("/*")
                    && !r.contains("--")
                    && !r.contains('#')
                {
                    let e = i + r.trim_end().len();
                    self.i = line_end;
                    self.open_end = line_end == b.len();
                    let mut none = Vec::new();
                    if let Some(out) = self.make(i, e, &mut none, Kind::Sql) {
                        return Some(out);
                    }
                    continue;
                }
                st.start = Some(i);
                let mut he = (i + 60).min(b.len());
                while !input.is_char_boundary(he) {
                    he -= 1;
                }
                st.plsql = flavor == Flavor::Oracle && starts_plsql_block(&input[i..he]);
            }
            match c {
                b'\'' | b'"' | b'`' => {
                    let q = c;
                    let mut j = i + 1;
                    while j < b.len() {
                        if b[j] == b'\\' && q == b'\'' && flavor == Flavor::MySql {
                            j += 2;
                            continue;
                        }
                        if b[j] == q {
                            if b.get(j + 1) == Some(&q) {
                                j += 2;
                                continue;
                            }
                            break;
                        }
                        j += 1;
                    }
                    if j >= b.len() {
                        let what = match q {
                            b'\'' => "string literal",
                            _ if flavor == Flavor::MySql && q == b'"' => "string literal",
                            _ => "quoted name",
                        };
                        return self.unterminated(i, what);
                    }
                    self.i = j + 1;
                    continue;
                }
                b'$' if flavor == Flavor::Postgres => {
                    // Dollar quote: $tag$ ... $tag$
                    let rest = &input[i + 1..];
                    if let Some(p) = rest.find('$') {
                        let tag = &rest[..p];
                        let is_tag = tag.chars().next().is_none_or(|f| !f.is_ascii_digit())
                            && tag.chars().all(|c| c.is_alphanumeric() || c == '_');
                        if is_tag {
                            let open = format!("${tag}$");
                            let body_start = i + open.len();
                            match input[body_start..].find(&open) {
                                Some(q) => self.i = body_start + q + open.len(),
                                None => return self.unterminated(i, "dollar-quoted string"),
                            }
                            continue;
                        }
                    }
                    self.i += 1;
                    continue;
                }
                _ => {}
            }
            if !st.plsql && input[i..].starts_with(self.delimiter.as_str()) {
                self.i = i + self.delimiter.len();
                if let Some(s) = st.start.take() {
                    let out = self.make(s, i, &mut st.masks, Kind::Sql);
                    if let Some(out) = out {
                        self.skip_copy_data(&out.text);
                        return Some(out);
                    }
                }
                continue;
            }
            self.i += input[i..].chars().next().map(char::len_utf8).unwrap_or(1);
        }
        let s = st.start.take()?;
        self.open_end = true;
        self.make(s, b.len(), &mut st.masks, Kind::Sql)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_with_positions_and_strings() {
        let s = split(
            Flavor::MySql,
            "CREATE TABLE a (x varchar(3) default ';');\n  DROP TABLE a;",
        );
        assert_eq!(s.len(), 2);
        assert_eq!((s[1].line, s[1].column), (2, 3));
        assert_eq!(s[1].text, "DROP TABLE a");
    }

    #[test]
    fn delimiter_and_executable_comments() {
        let s = split(
            Flavor::MySql,
            "/*!40101 SET NAMES utf8 */;\nDELIMITER ;;\nCREATE TRIGGER t BEFORE INSERT ON a FOR EACH ROW BEGIN SET x = 1; END ;;\nDELIMITER ;\nDROP TABLE a;",
        );
        assert_eq!(s.len(), 3, "{s:?}");
        assert_eq!(s[0].text.trim(), "SET NAMES utf8");
        assert!(s[1].text.contains("SET x = 1; END"));
        assert_eq!(s[2].line, 5);
    }

    #[test]
    fn oracle_blocks_and_dollar_quotes() {
        let s = split(
            Flavor::Oracle,
            "CREATE OR REPLACE PROCEDURE p IS BEGIN NULL; END;\n/\nCREATE TABLE t (a NUMBER);",
        );
        assert_eq!(s.len(), 2, "{s:?}");
        let s = split(
            Flavor::Postgres,
            "CREATE FUNCTION f() RETURNS int AS $$ select 1; $$ LANGUAGE sql; SELECT 1;",
        );
        assert_eq!(s.len(), 2);
    }

    fn kinds(flavor: Flavor, text: &str) -> Vec<(Kind, String)> {
        split(flavor, text)
            .into_iter()
            .map(|s| (s.kind, s.text))
            .collect()
    }

    #[test]
    fn sqlplus_commands_end_at_their_line() {
        // regression: `PROMPT ...` took the next statement with it up to its `;`, and
        // that statement vanished.
        let s = kinds(
            Flavor::Oracle,
            "Rem a header\nSET ECHO OFF\nPrompt ******  Creating REGIONS ....\nCREATE TABLE r (a NUMBER);\n@other.sql\nSPOOL OFF\nSET TRANSACTION READ ONLY;\nCOLUMN x FORMAT -\n  a20\nDROP TABLE r;\n",
        );
        let sql: Vec<_> = s
            .iter()
            .filter(|(k, _)| *k == Kind::Sql)
            .map(|(_, t)| t.as_str())
            .collect();
        assert_eq!(
            sql,
            [
                "CREATE TABLE r (a NUMBER)",
                "SET TRANSACTION READ ONLY",
                "DROP TABLE r"
            ]
        );
        let client = s
            .iter()
            .filter(|(k, _)| *k == Kind::Client("SQL*Plus"))
            .count();
        assert_eq!(client, 6, "{s:?}");
    }

    #[test]
    fn psql_and_mysql_client_commands() {
        let s = kinds(
            Flavor::Postgres,
            "\\restrict abc\nCREATE TABLE t (a int);\nCOPY t (a) FROM stdin;\n1\n2;3\n\\.\n\\connect db\nDROP TABLE t;",
        );
        let sql: Vec<_> = s.iter().map(|(k, t)| (k.clone(), t.as_str())).collect();
        assert_eq!(
            sql,
            [
                (Kind::Client("psql"), "\\restrict abc"),
                (Kind::Sql, "CREATE TABLE t (a int)"),
                (Kind::Sql, "COPY t (a) FROM stdin"),
                (Kind::Client("psql"), "\\connect db"),
                (Kind::Sql, "DROP TABLE t"),
            ]
        );
        let s = kinds(
            Flavor::MySql,
            "use shop\nsource more.sql\nCREATE TABLE t (a int);\n",
        );
        assert_eq!(
            s,
            [
                (Kind::Sql, "use shop".to_owned()),
                (Kind::Client("mysql client"), "source more.sql".to_owned()),
                (Kind::Sql, "CREATE TABLE t (a int)".to_owned()),
            ]
        );
    }

    #[test]
    fn unterminated_text_is_reported_where_it_starts() {
        // regression: an unterminated `/*` dropped the rest of the file silently.
        let s = split(
            Flavor::MySql,
            "CREATE TABLE a (x int);\n/* open\nCREATE TABLE b (y int);",
        );
        assert_eq!(s.len(), 2);
        assert_eq!(s[1].kind, Kind::Unterminated("comment"));
        assert_eq!((s[1].line, s[1].column), (2, 1));
        let s = split(Flavor::Postgres, "SELECT 1;\nSELECT 'abc;\n");
        assert_eq!(s[1].kind, Kind::Unterminated("string literal"));
        let s = split(Flavor::Postgres, "CREATE FUNCTION f() AS $body$ x;");
        assert_eq!(s[0].kind, Kind::Unterminated("dollar-quoted string"));
    }
}

/// MySQL text from bytes that may hold raw binary data inside quoted strings, as
/// `SHOW CREATE TABLE` and mariadb-dump write a binary column's default (`DEFAULT
/// '\xab'` with the byte itself): a string literal whose bytes are not UTF-8 becomes a
/// hex literal of its bytes (`X'ab'`), which means the same to MySQL; any other byte
/// that is not UTF-8 reads as U+FFFD. Returns the text and how many bytes of `raw` it
/// covers: all of them when `end`, otherwise up to a string still open at the end of
/// `raw` (its bytes come again with the next ones).
pub fn mysql_text_from_bytes(raw: &[u8], end: bool) -> (String, usize) {
    let (out, n) = binary_strings_as_hex(raw, end);
    (String::from_utf8_lossy(&out).into_owned(), n)
}

/// [`mysql_text_from_bytes`] of a whole statement, or None when a byte outside its
/// strings is not UTF-8 either (a name in another character set, say).
pub fn mysql_text_from_bytes_exact(raw: &[u8]) -> Option<String> {
    String::from_utf8(binary_strings_as_hex(raw, true).0).ok()
}

fn binary_strings_as_hex(raw: &[u8], end: bool) -> (Vec<u8>, usize) {
    let mut out: Vec<u8> = Vec::with_capacity(raw.len());
    let mut i = 0;
    // Copies up to the end of a region that starts at `i` and ends after `close`.
    let skip_to = |i: usize, close: &[u8]| {
        raw[i..]
            .windows(close.len())
            .position(|w| w == close)
            .map(|p| i + p + close.len())
    };
    while i < raw.len() {
        let b = raw[i];
        let region_end = match b {
            b'\'' => {
                // A string: '' and backslash escapes inside.
                let mut j = i + 1;
                let close = loop {
                    match raw.get(j) {
                        None => break None,
                        Some(b'\\') => j += 2,
                        Some(b'\'') if raw.get(j + 1) == Some(&b'\'') => j += 2,
                        Some(b'\'') => break Some(j),
                        Some(_) => j += 1,
                    }
                };
                let Some(close) = close else {
                    if !end {
                        return (out, i);
                    }
                    out.extend_from_slice(&raw[i..]);
                    break;
                };
                let body = &raw[i + 1..close];
                if std::str::from_utf8(body).is_err() {
                    // (`_binary'..'` keeps its introducer: `_binary X'..'`.)
                    if out
                        .last()
                        .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
                    {
                        out.push(b' ');
                    }
                    out.extend_from_slice(b"X'");
                    for byte in unescape_mysql(body) {
                        out.extend_from_slice(format!("{byte:02x}").as_bytes());
                    }
                    out.push(b'\'');
                } else {
                    out.extend_from_slice(&raw[i..=close]);
                }
                i = close + 1;
                continue;
            }
            b'`' | b'"' => skip_to(i + 1, &[b]),
            b'-' if raw.get(i + 1) == Some(&b'-') => skip_to(i, b"\n"),
            b'#' => skip_to(i, b"\n"),
            b'/' if raw.get(i + 1) == Some(&b'*') && raw.get(i + 2) != Some(&b'!') => {
                skip_to(i + 2, b"*/")
            }
            _ => {
                out.push(b);
                i += 1;
                continue;
            }
        };
        let j = match region_end {
            Some(j) => j,
            None if end => raw.len(),
            None => return (out, i),
        };
        out.extend_from_slice(&raw[i..j]);
        i = j;
    }
    (out, raw.len())
}

/// The bytes of a MySQL string literal's body (between its quotes).
fn unescape_mysql(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len());
    let mut k = 0;
    while k < body.len() {
        match (body[k], body.get(k + 1)) {
            (b'\\', Some(&c)) => {
                // (`\%` and `\_` keep their backslash, as in MySQL.)
                if matches!(c, b'%' | b'_') {
                    out.push(b'\\');
                }
                out.push(match c {
                    b'0' => 0,
                    b'n' => b'\n',
                    b'r' => b'\r',
                    b't' => b'\t',
                    b'b' => 8,
                    b'Z' => 0x1a,
                    other => other,
                });
                k += 2;
            }
            (b'\'', Some(b'\'')) => {
                out.push(b'\'');
                k += 2;
            }
            (c, _) => {
                out.push(c);
                k += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod binary_text_tests {
    use super::mysql_text_from_bytes;

    #[test]
    fn binary_strings_become_hex_literals() {
        let raw = b"CREATE TABLE `t'` (b varbinary(4) DEFAULT '\xab\\0''', s varchar(3) DEFAULT 'caf\xc3\xa9') -- it's\n";
        let (text, n) = mysql_text_from_bytes(raw, true);
        assert_eq!(n, raw.len());
        assert_eq!(
            text,
            "CREATE TABLE `t'` (b varbinary(4) DEFAULT X'ab0027', s varchar(3) DEFAULT 'caf\u{e9}') -- it's\n"
        );
        // A string still open at the end of the bytes read so far waits for the rest.
        let (text, n) = mysql_text_from_bytes(b"SELECT 1; SELECT '\xab", false);
        assert_eq!((text.as_str(), n), ("SELECT 1; SELECT ", 17));
        // An introducer stays one; `\%` keeps its backslash.
        let raw = b"ALTER TABLE t ADD b blob DEFAULT _binary'\xff\\%'";
        assert_eq!(
            super::mysql_text_from_bytes_exact(raw).as_deref(),
            Some("ALTER TABLE t ADD b blob DEFAULT _binary X'ff5c25'")
        );
        // A byte outside any string that is not UTF-8: not exact.
        assert_eq!(
            super::mysql_text_from_bytes_exact(b"ALTER TABLE caf\xe9 ADD x int"),
            None
        );
    }
}
