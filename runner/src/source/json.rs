//! Source events as JSON lines (`lakeshift tail`), one line per row change, DDL and
//! commit, the way Maxwell and Canal users read a binlog.

use super::{Op, SourceEvent};
use arrow_array::{Array, RecordBatch};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::DataType;
use serde_json::{json, Map, Value};

fn row_object(batch: &RecordBatch, i: usize) -> Value {
    let mut m = Map::new();
    let opts = FormatOptions::default();
    for (c, f) in batch.schema().fields().iter().enumerate() {
        let a = batch.column(c);
        let v = if a.is_null(i) {
            Value::Null
        } else {
            let s = ArrayFormatter::try_new(a.as_ref(), &opts)
                .map(|fm| fm.value(i).to_string())
                .unwrap_or_default();
            match f.data_type() {
                DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::UInt8
                | DataType::UInt16
                | DataType::UInt32
                | DataType::UInt64
                | DataType::Float32
                | DataType::Float64 => serde_json::from_str(&s).unwrap_or(Value::String(s)),
                _ => Value::String(s),
            }
        };
        m.insert(f.name().clone(), v);
    }
    Value::Object(m)
}

/// The JSON lines of one event.
pub fn lines(e: &SourceEvent) -> Vec<String> {
    match e {
        SourceEvent::Rows(b) => (0..b.num_rows())
            .map(|i| {
                let mut v = json!({
                    "type": b.op,
                    "database": b.table.db,
                    "table": b.table.name,
                    "position": b.position_after(i).to_string(),
                });
                match b.op {
                    Op::Insert => v["data"] = row_object(b.after.as_ref().unwrap(), i),
                    Op::Delete => v["data"] = row_object(b.before.as_ref().unwrap(), i),
                    Op::Update => {
                        v["data"] = row_object(b.after.as_ref().unwrap(), i);
                        v["old"] = row_object(b.before.as_ref().unwrap(), i);
                    }
                }
                v.to_string()
            })
            .collect(),
        SourceEvent::Schema {
            position,
            db,
            ddl,
            changes,
            notes,
            ..
        } => vec![json!({
            "type": "ddl",
            "database": db,
            "position": position.to_string(),
            "sql": ddl,
            "changes": changes,
            "notes": notes,
        })
        .to_string()],
        SourceEvent::RowsRemoved {
            position,
            db,
            table,
            ddl,
        } => vec![json!({
            "type": "rows-removed",
            "database": db,
            "table": table,
            "position": position.to_string(),
            "sql": ddl,
        })
        .to_string()],
        SourceEvent::Commit { position, .. } => {
            vec![json!({"type": "commit", "position": position.to_string()}).to_string()]
        }
        SourceEvent::Heartbeat { position } => {
            vec![json!({"type": "heartbeat", "position": position.to_string()}).to_string()]
        }
        SourceEvent::SnapshotRows { table, rows, .. } => (0..rows.num_rows())
            .map(|i| {
                json!({
                    "type": "snapshot",
                    "database": table.db,
                    "table": table.name,
                    "data": row_object(rows, i),
                })
                .to_string()
            })
            .collect(),
        SourceEvent::Message(m) => {
            let mut out: Vec<String> = m
                .rows
                .iter()
                .flat_map(|b| lines(&SourceEvent::Rows(b.clone())))
                .collect();
            out.push(
                json!({
                    "type": "offset",
                    "topic": m.topic,
                    "partition": m.partition,
                    "next": m.next,
                    "position": m.position.to_string(),
                })
                .to_string(),
            );
            out
        }
        SourceEvent::Rebalanced => vec![json!({"type": "rebalanced"}).to_string()],
        SourceEvent::SnapshotDone {
            position,
            tables,
            rows,
        } => vec![json!({
            "type": "snapshot-done",
            "position": position.to_string(),
            "tables": tables,
            "rows": rows,
        })
        .to_string()],
    }
}
