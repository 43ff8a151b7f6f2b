//! Splitting a script or dump into statements, each with its line and column.
//!
//! Understands what dump files contain: `;` inside strings, quoted names and comments;
//! PostgreSQL dollar quoting; the mysql client's `DELIMITER` lines; mysqldump's
//! executable comments `/*!50705 ... */` (unwrapped, since MySQL runs them); Oracle
//! PL/SQL blocks ended by a line holding only `/`.

use crate::Flavor;

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

/// Split `input` into statements.
pub fn split(flavor: Flavor, input: &str) -> Vec<Statement> {
    let b = input.as_bytes();
    let mut out = Vec::new();
    let mut delimiter = String::from(";");
    let mut i = 0;
    // Per statement state.
    let mut start: Option<usize> = None;
    let mut masks: Vec<(usize, usize)> = Vec::new();
    let mut exec_comment_depth = 0usize;
    let mut plsql = false;

    let mut positions = Positions::new(input);

    let at_line_start = |i: usize| i == 0 || b[i - 1] == b'\n';
    let push = |out: &mut Vec<Statement>,
                positions: &mut Positions<'_>,
                s: usize,
                e: usize,
                masks: &mut Vec<(usize, usize)>| {
        let mut text = input[s..e].to_owned();
        for (ms, me) in masks.drain(..) {
            if ms >= s && me <= e {
                // Replace bytes of the marker with spaces (markers are ASCII).
                text.replace_range(ms - s..me - s, &" ".repeat(me - ms));
            }
        }
        let trimmed = text.trim_end().len();
        text.truncate(trimmed);
        if !text.trim().is_empty() {
            let (line, column) = positions.at(s);
            out.push(Statement {
                text,
                offset: s,
                line,
                column,
            });
        }
    };

    while i < b.len() {
        let c = b[i];
        // Oracle: a line holding only `/` ends the current statement or block.
        if flavor == Flavor::Oracle && c == b'/' && at_line_start(i) {
            let line_end = input[i..].find('\n').map(|p| i + p).unwrap_or(b.len());
            if input[i + 1..line_end].trim().is_empty() {
                if let Some(s) = start.take() {
                    push(&mut out, &mut positions, s, i, &mut masks);
                }
                plsql = false;
                i = line_end;
                continue;
            }
        }
        match c {
            b' ' | b'\t' | b'\r' | b'\n' => {
                i += 1;
                continue;
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                i = input[i..].find('\n').map(|p| i + p).unwrap_or(b.len());
                continue;
            }
            b'#' if flavor == Flavor::MySql => {
                i = input[i..].find('\n').map(|p| i + p).unwrap_or(b.len());
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                if flavor == Flavor::MySql && b.get(i + 2) == Some(&b'!') {
                    // Executable comment: mask the marker and version, keep the body.
                    let mut j = i + 3;
                    while j < b.len() && b[j].is_ascii_digit() {
                        j += 1;
                    }
                    if start.is_none() {
                        start = Some(i);
                    }
                    masks.push((i, j));
                    exec_comment_depth += 1;
                    i = j;
                    continue;
                }
                let end = input[i + 2..]
                    .find("*/")
                    .map(|p| i + 2 + p + 2)
                    .unwrap_or(b.len());
                i = end;
                continue;
            }
            b'*' if exec_comment_depth > 0 && b.get(i + 1) == Some(&b'/') => {
                masks.push((i, i + 2));
                exec_comment_depth -= 1;
                i += 2;
                continue;
            }
            _ => {}
        }
        if start.is_none() {
            // DELIMITER lines (mysql client), only between statements.
            let r = &input[i..];
            // regression: a multi-byte character at byte 10 panicked the slice (proptest)
            if flavor == Flavor::MySql
                && r.get(..10)
                    .is_some_and(|h| h.eq_ignore_ascii_case("DELIMITER "))
            {
                let line_end = r.find('\n').unwrap_or(r.len());
                let d = r[10..line_end].trim();
                if !d.is_empty() {
                    delimiter = d.to_owned();
                }
                i += line_end;
                continue;
            }
            start = Some(i);
            let head_end = (i + 60).min(b.len());
            let mut he = head_end;
            while !input.is_char_boundary(he) {
                he -= 1;
            }
            plsql = flavor == Flavor::Oracle && starts_plsql_block(&input[i..he]);
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
                i = (j + 1).min(b.len());
                continue;
            }
            b'$' if flavor == Flavor::Postgres => {
                // Dollar quote: $tag$ ... $tag$
                let rest = &input[i + 1..];
                if let Some(p) = rest.find('$') {
                    let tag = &rest[..p];
                    if tag.chars().all(|c| c.is_alphanumeric() || c == '_') {
                        let open = format!("${tag}$");
                        let body_start = i + open.len();
                        if let Some(q) = input[body_start..].find(&open) {
                            i = body_start + q + open.len();
                            continue;
                        }
                    }
                }
                i += 1;
                continue;
            }
            _ => {}
        }
        if !plsql && input[i..].starts_with(delimiter.as_str()) {
            if let Some(s) = start.take() {
                push(&mut out, &mut positions, s, i, &mut masks);
            }
            i += delimiter.len();
            continue;
        }
        i += input[i..].chars().next().map(char::len_utf8).unwrap_or(1);
    }
    if let Some(s) = start {
        push(&mut out, &mut positions, s, b.len(), &mut masks);
    }
    out
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
}
