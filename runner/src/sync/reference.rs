//! The job file's reference, made from the configuration types and their doc
//! comments: a JSON Schema (editors validate and complete job files with it) and a
//! Markdown page of every key, its type, default and meaning. Both are committed
//! (`docs/job-file.schema.json`, `docs/job-file.md`); a test fails when they are
//! stale or a key has no description.

use crate::source::config::SourceConfig;
use crate::source::kafka_config::KafkaConfig;
use crate::source::pg_config::PgConfig;
use crate::sync::job::{PipelineConfig, SinkConfig};
use crate::sync::route::RouteRule;
use serde_json::Value;
use std::fmt::Write;

/// A lakeshift job file (`lakeshift sync --config FILE`): where changes come from,
/// where they go, and how the job runs.
#[derive(schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct JobFile {
    /// Where changes come from: a MariaDB/MySQL server (`type: mariadb`), a
    /// PostgreSQL database (`type: postgres`) or Debezium topics (`type: kafka`).
    source: Source,
    /// Where they go: Iceberg tables (`type: iceberg`), PostgreSQL or MySQL/MariaDB.
    sink: SinkConfig,
    /// The job's name and state folder, and how it runs.
    pipeline: PipelineConfig,
    /// Rules that give source tables (and columns) other names on the target.
    #[serde(default)]
    route: Vec<RouteRule>,
}

#[derive(schemars::JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)]
enum Source {
    Binlog(SourceConfig),
    Postgres(PgConfig),
    Kafka(KafkaConfig),
}

/// The JSON Schema of a job file.
pub fn json_schema() -> Value {
    let mut s = schemars::schema_for!(JobFile).to_value();
    if let Some(o) = s.as_object_mut() {
        o.insert("title".into(), "lakeshift job file".into());
    }
    s
}

/// The schema `v` stands for: a `$ref` resolved in `root`'s `$defs`.
fn resolve<'a>(root: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => r
            .strip_prefix("#/$defs/")
            .and_then(|n| root["$defs"].get(n))
            .map(|d| resolve(root, d))
            .unwrap_or(v),
        None => v,
    }
}

/// The parts of `v` to read keys from: itself, or each alternative of a `oneOf` /
/// `anyOf` (a sink's types, a source's kinds), each resolved.
fn alternatives<'a>(root: &'a Value, v: &'a Value) -> Vec<&'a Value> {
    let v = resolve(root, v);
    for k in ["oneOf", "anyOf"] {
        if let Some(a) = v.get(k).and_then(Value::as_array) {
            return a.iter().map(|x| resolve(root, x)).collect();
        }
    }
    vec![v]
}

/// An object's properties, with those of the schemas it takes in (`allOf`, a
/// `$ref` beside a tag's property).
fn properties<'a>(root: &'a Value, v: &'a Value) -> Vec<(&'a str, &'a Value)> {
    let mut out = Vec::new();
    if let Some(p) = v.get("properties").and_then(Value::as_object) {
        out.extend(p.iter().map(|(k, x)| (k.as_str(), x)));
    }
    if let Some(a) = v.get("allOf").and_then(Value::as_array) {
        for x in a {
            out.extend(properties(root, resolve(root, x)));
        }
    }
    if let Some(r) = v.get("$ref").and_then(Value::as_str) {
        if let Some(d) = r
            .strip_prefix("#/$defs/")
            .and_then(|n| root["$defs"].get(n))
        {
            out.extend(properties(root, d));
        }
    }
    out
}

/// One line of a description (Markdown table cells hold no line breaks).
fn one_line(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// A property's type as the reference shows it.
fn type_of(root: &Value, v: &Value) -> String {
    let r = resolve(root, v);
    if let Some(c) = r.get("const") {
        return format!("`{}`", plain(c));
    }
    let values: Vec<String> = match (r.get("enum"), r.get("oneOf")) {
        (Some(Value::Array(e)), _) => e.iter().map(|x| format!("`{}`", plain(x))).collect(),
        (_, Some(Value::Array(o))) if o.iter().all(|x| x.get("const").is_some()) => o
            .iter()
            .map(|x| format!("`{}`", plain(&x["const"])))
            .collect(),
        _ => Vec::new(),
    };
    if !values.is_empty() {
        return values.join(" \\| ");
    }
    let t = match r.get("type") {
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect::<Vec<_>>()
            .join(" or "),
        Some(Value::String(t)) => t.clone(),
        _ => match v.get("anyOf").and_then(Value::as_array) {
            // An optional value of a named type.
            Some(a) => a
                .iter()
                .filter(|x| x.get("type") != Some(&Value::String("null".into())))
                .map(|x| type_of(root, x))
                .collect::<Vec<_>>()
                .join(" or "),
            None => "object".into(),
        },
    };
    match (t.as_str(), r.get("items")) {
        ("array", Some(i)) => format!("list of {}", type_of(root, i)),
        ("object", _) if r.get("additionalProperties").is_some_and(Value::is_object) => {
            "map".into()
        }
        _ => t,
    }
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "none".into(),
        x => x.to_string(),
    }
}

/// The description of a property: its own, else its type's.
fn description(root: &Value, v: &Value) -> Option<String> {
    v.get("description")
        .or_else(|| resolve(root, v).get("description"))
        .and_then(Value::as_str)
        .map(one_line)
        .filter(|d| !d.is_empty())
}

/// Keys written without a description, as `section.key` paths.
pub fn undocumented(root: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for (name, v) in properties(root, root) {
        walk(root, v, name, &mut out);
    }
    out
}

fn walk(root: &Value, v: &Value, path: &str, out: &mut Vec<String>) {
    for alt in alternatives(root, v) {
        for (k, p) in properties(root, alt) {
            let path = format!("{path}.{k}");
            if description(root, p).is_none() && k != "type" {
                out.push(path.clone());
            }
            let inner = resolve(root, p);
            if inner.get("properties").is_some() {
                walk(root, p, &path, out);
            }
        }
    }
}

/// The Markdown reference of every key.
pub fn markdown(root: &Value) -> String {
    let mut md = String::from(
        "# Job file reference\n\nEvery key of a job file, made from lakeshift's own configuration types (`cargo test -p runner --lib reference` checks this page and [the JSON Schema](job-file.schema.json) against them). Editors that read JSON Schemas validate and complete job files with it (the YAML language server: `# yaml-language-server: $schema=job-file.schema.json` on the file's first line, the path relative to the job file). `lakeshift init` writes a commented job file to start from.\n",
    );
    let mut sections = properties(root, root);
    let order = ["source", "sink", "pipeline", "route"];
    sections.sort_by_key(|(n, _)| order.iter().position(|o| o == n).unwrap_or(order.len()));
    for (name, v) in sections {
        let _ = write!(md, "\n## `{name}`\n\n");
        if let Some(d) = description(root, v) {
            let _ = writeln!(md, "{d}\n");
        }
        section(root, v, name, &mut md);
    }
    md
}

fn section(root: &Value, v: &Value, path: &str, md: &mut String) {
    let alts = alternatives(root, v);
    let items = resolve(root, v).get("items").map(|i| resolve(root, i));
    let alts = match items {
        Some(i) => vec![i],
        None => alts,
    };
    let mut nested: Vec<(String, &Value)> = Vec::new();
    for alt in alts {
        let props = properties(root, alt);
        if props.is_empty() {
            continue;
        }
        let kind = props
            .iter()
            .find(|(k, _)| *k == "type")
            .map(|(_, t)| type_of(root, t));
        if let Some(k) = &kind {
            let _ = write!(md, "### `{path}` of type {k}\n\n");
            if let Some(d) = alt.get("description").and_then(Value::as_str) {
                let _ = writeln!(md, "{}\n", one_line(d));
            }
        }
        let required: Vec<&str> = alt
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        md.push_str("| key | type | default | meaning |\n|---|---|---|---|\n");
        for (k, p) in props {
            if k == "type" && kind.is_some() {
                continue;
            }
            let default = match p.get("default") {
                Some(d) => format!("`{}`", plain(d).replace('|', "\\|")),
                None if required.contains(&k) => "required".into(),
                None => "-".into(),
            };
            let _ = writeln!(
                md,
                "| `{k}` | {} | {default} | {} |",
                type_of(root, p),
                description(root, p).unwrap_or_default()
            );
            if resolve(root, p).get("properties").is_some() {
                nested.push((format!("{path}.{k}"), p));
            }
        }
        md.push('\n');
    }
    for (p, v) in nested {
        let _ = write!(md, "### `{p}`\n\n");
        section(root, v, &p, md);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed reference is what the types say, and every key says what it
    /// is. `LAKESHIFT_WRITE_REFERENCE=1` writes the files anew.
    #[test]
    fn the_job_file_reference_is_current_and_every_key_is_documented() {
        let schema = json_schema();
        let missing = undocumented(&schema);
        assert!(
            missing.is_empty(),
            "keys without a description: {missing:?}"
        );
        let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
        let json = serde_json::to_string_pretty(&schema).unwrap() + "\n";
        let md = markdown(&schema);
        if std::env::var_os("LAKESHIFT_WRITE_REFERENCE").is_some() {
            std::fs::write(docs.join("job-file.schema.json"), &json).unwrap();
            std::fs::write(docs.join("job-file.md"), &md).unwrap();
        }
        let stale = "stale: run LAKESHIFT_WRITE_REFERENCE=1 cargo test -p runner --lib reference";
        assert_eq!(
            std::fs::read_to_string(docs.join("job-file.schema.json")).unwrap_or_default(),
            json,
            "docs/job-file.schema.json {stale}"
        );
        assert_eq!(
            std::fs::read_to_string(docs.join("job-file.md")).unwrap_or_default(),
            md,
            "docs/job-file.md {stale}"
        );
        // Keys a reader looks for are there, with their defaults.
        for want in [
            "| `checkpoint-interval-seconds` | number | `10.0` |",
            "| `memory-budget-mib` | integer | `256` |",
            "### `sink.maintenance`",
            "| `interval-seconds` |",
            "### `source` of type `postgres` \\| `postgresql`",
            "| `delete-mode` |",
        ] {
            assert!(md.contains(want), "{want} in:\n{md}");
        }
    }

    #[test]
    fn a_key_without_a_description_is_found() {
        let schema = serde_json::json!({
            "properties": {
                "sink": { "$ref": "#/$defs/S", "description": "d" }
            },
            "$defs": {
                "S": { "oneOf": [ { "properties": {
                    "type": { "const": "x" },
                    "a": { "type": "string", "description": "said" },
                    "m": { "$ref": "#/$defs/M", "description": "said" }
                } } ] },
                "M": { "properties": { "quiet": { "type": "integer" } } }
            }
        });
        assert_eq!(undocumented(&schema), vec!["sink.m.quiet".to_owned()]);
    }

    /// A key the schema does not know is refused by the job file's parser too (the
    /// schema is no wider than what `sync` reads), and every job file `init` writes
    /// validates against it.
    #[test]
    fn the_schema_names_every_key_init_writes() {
        let schema = json_schema();
        let mut keys = std::collections::BTreeSet::new();
        collect(&schema, &schema, &mut keys);
        for (source, sink) in [
            ("mariadb", "iceberg"),
            ("postgres", "postgres"),
            ("kafka", "mysql"),
        ] {
            let text = crate::sync::init::job_file(source, sink).unwrap();
            for line in text.lines() {
                let l = line.trim_start().trim_start_matches("# ");
                if let Some((k, _)) = l.split_once(": ") {
                    if k.chars()
                        .all(|c| c.is_ascii_lowercase() || c == '-' || c == '_')
                        && !k.is_empty()
                        && line.starts_with(' ')
                    {
                        assert!(
                            keys.contains(k),
                            "{source}/{sink}: `{k}` is not in the schema"
                        );
                    }
                }
            }
        }
    }

    fn collect(root: &Value, v: &Value, out: &mut std::collections::BTreeSet<String>) {
        for alt in alternatives(root, v) {
            let alt = match resolve(root, alt).get("items") {
                Some(i) => resolve(root, i),
                None => alt,
            };
            for (k, p) in properties(root, alt) {
                out.insert(k.to_owned());
                collect(root, p, out);
            }
        }
    }
}
