//! Source events as JSON lines (`lakeshift tail`), one line per row change, DDL and
//! commit, the way Maxwell and Canal users read a binlog.

use super::{Op, SourceEvent};
use arrow_array::{Array, RecordBatch};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::DataType;
use serde_json::{json, Value};
use std::fmt::Write as _;

/// How one column's values are written.
enum Kind {
    /// Integers: the formatted value as a JSON number.
    Int,
    /// Floats: a JSON number when finite, else a string (`NaN`, `inf`).
    Float,
    /// Everything else: a JSON string of the formatted value.
    Text,
}

/// A batch's columns, prepared once per batch: each name as a JSON key, its kind
/// and its formatter.
struct Columns<'a> {
    keys: Vec<Vec<u8>>,
    kinds: Vec<Kind>,
    /// None: a type without a formatter (written as an empty string).
    fmts: Vec<Option<ArrayFormatter<'a>>>,
    nulls: Vec<&'a dyn Array>,
}

impl<'a> Columns<'a> {
    fn new(batch: &'a RecordBatch, opts: &'a FormatOptions<'a>) -> Columns<'a> {
        let schema = batch.schema();
        let mut c = Columns {
            keys: Vec::new(),
            kinds: Vec::new(),
            fmts: Vec::new(),
            nulls: Vec::new(),
        };
        for (i, f) in schema.fields().iter().enumerate() {
            let mut k = Vec::new();
            string(&mut k, f.name());
            k.push(b':');
            c.keys.push(k);
            c.kinds.push(match f.data_type() {
                DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::UInt8
                | DataType::UInt16
                | DataType::UInt32
                | DataType::UInt64 => Kind::Int,
                DataType::Float32 | DataType::Float64 => Kind::Float,
                _ => Kind::Text,
            });
            let a = batch.column(i).as_ref();
            c.fmts.push(ArrayFormatter::try_new(a, opts).ok());
            c.nulls.push(a);
        }
        c
    }

    /// Row `i` as a JSON object.
    fn object(&self, out: &mut Vec<u8>, i: usize, scratch: &mut String) {
        out.push(b'{');
        for (c, key) in self.keys.iter().enumerate() {
            if c > 0 {
                out.push(b',');
            }
            out.extend_from_slice(key);
            if self.nulls[c].is_null(i) {
                out.extend_from_slice(b"null");
                continue;
            }
            scratch.clear();
            let Some(f) = &self.fmts[c] else {
                string(out, "");
                continue;
            };
            let _ = write!(scratch, "{}", f.value(i));
            match self.kinds[c] {
                Kind::Int => out.extend_from_slice(scratch.as_bytes()),
                Kind::Float if scratch.parse::<f64>().is_ok_and(f64::is_finite) => {
                    out.extend_from_slice(scratch.as_bytes())
                }
                _ => string(out, scratch),
            }
        }
        out.push(b'}');
    }
}

/// `s` as a JSON string (escaped as serde_json does).
fn string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let b = s.as_bytes();
    let mut start = 0;
    for (i, &c) in b.iter().enumerate() {
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0..=0x1f => {
                out.extend_from_slice(&b[start..i]);
                let _ = std::io::Write::write_fmt(out, format_args!("\\u{c:04x}"));
                start = i + 1;
                continue;
            }
            _ => continue,
        };
        out.extend_from_slice(&b[start..i]);
        out.extend_from_slice(esc);
        start = i + 1;
    }
    out.extend_from_slice(&b[start..]);
    out.push(b'"');
}

/// The lines of one batch of row changes.
fn rows(b: &super::RowBatch, out: &mut Vec<u8>) {
    let opts = FormatOptions::default();
    let mut scratch = String::new();
    let mut head = Vec::new();
    head.extend_from_slice(b"{\"type\":\"");
    head.extend_from_slice(match b.op {
        Op::Insert => b"insert",
        Op::Update => b"update",
        Op::Delete => b"delete",
    });
    head.extend_from_slice(b"\",\"database\":");
    string(&mut head, &b.table.db);
    head.extend_from_slice(b",\"table\":");
    string(&mut head, &b.table.name);
    head.extend_from_slice(b",\"position\":");
    let data = match b.op {
        Op::Delete => b.before.as_ref(),
        _ => b.after.as_ref(),
    };
    let data = data.map(|d| Columns::new(d, &opts));
    let old = match b.op {
        Op::Update => b.before.as_ref().map(|d| Columns::new(d, &opts)),
        _ => None,
    };
    for i in 0..b.num_rows() {
        out.extend_from_slice(&head);
        scratch.clear();
        let _ = write!(scratch, "{}", b.position_after(i));
        string(out, &scratch);
        if let Some(d) = &data {
            out.extend_from_slice(b",\"data\":");
            d.object(out, i, &mut scratch);
        }
        if let Some(o) = &old {
            out.extend_from_slice(b",\"old\":");
            o.object(out, i, &mut scratch);
        }
        let mut kept = b.unchanged_in(i).peekable();
        if kept.peek().is_some() {
            // Values the update left unchanged and the source did not send (their
            // `data` slots are null): the row keeps its previous values there.
            out.extend_from_slice(b",\"unchanged\":[");
            for (n, c) in kept.enumerate() {
                if n > 0 {
                    out.push(b',');
                }
                string(out, &b.table.columns[c].name);
            }
            out.push(b']');
        }
        out.extend_from_slice(b"}\n");
    }
}

/// Write the JSON lines of one event, each ended by a newline. Rows are written
/// straight from their Arrow columns (no JSON value per row): `type`, `database`,
/// `table`, `position`, then `data` (and `old` for updates) in column order.
pub fn write(e: &SourceEvent, out: &mut Vec<u8>) {
    let opts = FormatOptions::default();
    let mut scratch = String::new();
    match e {
        SourceEvent::Rows(b) => rows(b, out),
        SourceEvent::SnapshotRows { table, rows, .. } => {
            let mut head = Vec::new();
            head.extend_from_slice(b"{\"type\":\"snapshot\",\"database\":");
            string(&mut head, &table.db);
            head.extend_from_slice(b",\"table\":");
            string(&mut head, &table.name);
            head.extend_from_slice(b",\"data\":");
            let cols = Columns::new(rows, &opts);
            for i in 0..rows.num_rows() {
                out.extend_from_slice(&head);
                cols.object(out, i, &mut scratch);
                out.extend_from_slice(b"}\n");
            }
        }
        SourceEvent::Message(m) => {
            for b in &m.rows {
                rows(b, out);
            }
            let line = json!({
                "type": "offset",
                "topic": m.topic,
                "partition": m.partition,
                "next": m.next,
                "position": m.position.to_string(),
            });
            out.extend_from_slice(line.to_string().as_bytes());
            out.push(b'\n');
        }
        other => {
            if let Some(v) = other_event(other) {
                out.extend_from_slice(v.to_string().as_bytes());
                out.push(b'\n');
            }
        }
    }
}

/// The JSON lines of one event (see [`write`]).
pub fn lines(e: &SourceEvent) -> Vec<String> {
    let mut out = Vec::new();
    write(e, &mut out);
    String::from_utf8(out)
        .expect("JSON lines are UTF-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The one-line events besides rows, as JSON values.
fn other_event(e: &SourceEvent) -> Option<Value> {
    Some(match e {
        SourceEvent::Rows(_) | SourceEvent::SnapshotRows { .. } | SourceEvent::Message(_) => {
            return None
        }
        SourceEvent::Schema {
            position,
            db,
            ddl,
            changes,
            notes,
            ..
        } => json!({
            "type": "ddl",
            "database": db,
            "position": position.to_string(),
            "sql": ddl,
            "changes": changes,
            "notes": notes,
        }),
        SourceEvent::RowsRemoved {
            position,
            db,
            table,
            ddl,
        } => json!({
            "type": "rows-removed",
            "database": db,
            "table": table,
            "position": position.to_string(),
            "sql": ddl,
        }),
        SourceEvent::Commit { position, .. } => {
            json!({"type": "commit", "position": position.to_string()})
        }
        SourceEvent::Heartbeat { position } => {
            json!({"type": "heartbeat", "position": position.to_string()})
        }
        SourceEvent::Rebalanced => json!({"type": "rebalanced"}),
        SourceEvent::SnapshotDone {
            position,
            tables,
            rows,
        } => json!({
            "type": "snapshot-done",
            "position": position.to_string(),
            "tables": tables,
            "rows": rows,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_escape_as_serde_json_does() {
        for s in [
            "plain",
            "quote \" and \\ back",
            "ctl \u{1}\u{8}\u{c}\n\r\t\u{1f}",
            "é 😀",
            "",
        ] {
            let mut out = Vec::new();
            string(&mut out, s);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string(s).unwrap(),
                "{s:?}"
            );
        }
    }
}
