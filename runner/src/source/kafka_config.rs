//! The Kafka (Debezium JSON) source's settings in the job file: read and checked in
//! every build, so a build without the `kafka` feature names what it lacks.

use super::config::JobFileError;
use serde::Deserialize;
use std::collections::BTreeMap;

/// `type: kafka`: Debezium JSON change topics of a MySQL/MariaDB database.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct KafkaConfig {
    /// `kafka`.
    #[serde(rename = "type")]
    #[schemars(extend("enum" = ["kafka"]))]
    pub kind: String,
    /// `host:port[,host:port...]`
    pub brokers: String,
    /// The consumer group: processes with the same group split the partitions.
    pub group_id: String,
    /// Debezium's `topic.prefix`: data topics are `<prefix>.<db>.<table>`.
    pub topic_prefix: String,
    /// The schema-change topic (default: the prefix itself, as Debezium names it).
    #[serde(default)]
    pub schema_topic: Option<String>,
    /// Regexes over `database.table`, matched whole.
    pub tables: Vec<String>,
    /// Key columns for tables without a primary key (or to override it), by
    /// `database.table`.
    #[serde(default)]
    pub key_overrides: BTreeMap<String, Vec<String>>,
    /// The group's session timeout: how soon a dead consumer's partitions move.
    #[serde(default = "default_session")]
    pub session_timeout_ms: u32,
}

fn default_session() -> u32 {
    6000
}

impl KafkaConfig {
    pub fn schema_topic(&self) -> String {
        self.schema_topic
            .clone()
            .unwrap_or_else(|| self.topic_prefix.clone())
    }

    /// `<prefix>.<db>.<table>` -> (db, table).
    pub fn table_of<'a>(&self, topic: &'a str) -> Option<(&'a str, &'a str)> {
        let rest = topic.strip_prefix(&self.topic_prefix)?.strip_prefix('.')?;
        rest.split_once('.')
    }

    /// The topic of table `db_table` (`db.table`) as Debezium names it: characters
    /// a topic name cannot hold become `_`.
    pub fn topic_of(&self, db_table: &str) -> String {
        let clean: String = db_table
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        format!("{}.{clean}", self.topic_prefix)
    }
}

pub fn validate(k: KafkaConfig) -> Result<super::config::Source, JobFileError> {
    let field = |f: &str, why: String| format!("job file: source.{f}: {why}");
    if k.brokers.trim().is_empty() {
        return Err(field("brokers", "is empty".into()).into());
    }
    if k.group_id.trim().is_empty() {
        return Err(field("group-id", "is empty".into()).into());
    }
    if k.topic_prefix.trim().is_empty() || k.topic_prefix.contains(char::is_whitespace) {
        return Err(field("topic-prefix", "must be a topic name prefix".into()).into());
    }
    let tables = super::config::table_patterns(&k.tables)?;
    Ok(super::config::Source {
        key_overrides: k.key_overrides.clone(),
        kind: super::config::SourceKind::Kafka(k),
        password: None,
        tables,
        start: super::config::Start::Initial,
        skip_unparsed_ddl: false,
        generated_computed: false,
        bad_messages_to: None,
    })
}
