//! `lakeshift init`: a commented job file for a source and a sink, every key a first
//! job needs with a value to change, and the common optional ones with their
//! defaults (commented out).

/// The sources and sinks `init` writes files for, as `--source` / `--sink` name them.
pub const SOURCES: [&str; 3] = ["mariadb", "postgres", "kafka"];
pub const SINKS: [&str; 3] = ["iceberg", "postgres", "mariadb"];

/// The job file, or why not (an unknown kind).
pub fn job_file(source: &str, sink: &str) -> Result<String, String> {
    let src = match source {
        "mariadb" | "mysql" => MARIADB,
        "postgres" | "postgresql" => POSTGRES,
        "kafka" => KAFKA,
        other => {
            return Err(format!(
                "unknown source `{other}`: one of {}",
                SOURCES.join(", ")
            ))
        }
    };
    let snk = match sink {
        "iceberg" => ICEBERG,
        "postgres" | "postgresql" => PG_TARGET,
        "mariadb" | "mysql" => MY_TARGET,
        other => {
            return Err(format!(
                "unknown sink `{other}`: one of {}",
                SINKS.join(", ")
            ))
        }
    };
    // (how a type change reaches the table: Iceberg's own rules)
    let iceberg_only = if sink == "iceberg" {
        "  # schema-change-behavior: exception   # a type change Iceberg cannot take: exception, evolve, try-evolve, lenient, ignore\n"
    } else {
        ""
    };
    // A Kafka job's consumers share tables: equality deletes only.
    let snk = if src == KAFKA {
        snk.replace(
            "  # delete-mode: position       # position (every reader) or equality (cheapest writes)\n",
            "  # delete-mode: equality       # a Kafka source's only mode (its consumers share tables)\n",
        )
    } else {
        snk.to_owned()
    };
    Ok(format!(
        "# A lakeshift job: {source} -> {sink}. Check it with `lakeshift check --config FILE`,\n# then run it with `lakeshift sync --config FILE`.\n{src}{snk}{PIPELINE}{iceberg_only}"
    ))
}

const MARIADB: &str = r#"source:
  type: mariadb                 # MariaDB or MySQL, read from the binary log
  hostname: 127.0.0.1
  port: 3306
  username: repl                # GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT, RELOAD ON *.* TO 'repl'@'%'
  password-env: SOURCE_PASSWORD # the environment variable holding the password (or `password: ...`)
  server-id: 5400               # unique among the server's replicas and readers: one per job
  tables: ['shop\..*']          # regular expressions over `database.table`, matched whole
  # startup: {mode: initial}    # initial (snapshot, then follow), latest, gtid or position
  # purged-resume: fail         # the resume point is purged from the binlog: fail or resnapshot
  # snapshot-parallel: 2        # sessions reading the initial copy side by side
"#;

const POSTGRES: &str = r#"# PostgreSQL carries no DDL in its logical replication: install the DDL capture
# once, as a superuser (`lakeshift pg-setup --config FILE --apply`, or run what it
# prints), so schema changes are followed.
source:
  type: postgres                # PostgreSQL, read by logical replication (pgoutput)
  hostname: 127.0.0.1
  port: 5432
  username: repl                # ALTER ROLE repl WITH REPLICATION; GRANT SELECT on the captured tables
  password-env: SOURCE_PASSWORD # the environment variable holding the password (or `password: ...`)
  database: app
  tables: ['public\..*']        # regular expressions over `schema.table`, matched whole
  slot: lakeshift_app           # the replication slot: one per job
  publication: lakeshift_app    # made by the first run when missing (as a superuser or the tables' owner), or by hand
  # purged-resume: fail         # the slot is lost: fail or resnapshot
  # snapshot-parallel: 2
"#;

const KAFKA: &str = r#"source:
  type: kafka                   # Debezium-format (JSON) change topics
  brokers: 127.0.0.1:9092
  group-id: lakeshift-app       # processes with the same group split the partitions
  topic-prefix: dbserver1       # Debezium's topic.prefix: data topics are <prefix>.<db>.<table>
  tables: ['shop\..*']          # regular expressions over `database.table`, matched whole
  # schema-topic: dbserver1     # the schema-change topic (default: the prefix)
  # session-timeout-ms: 6000
"#;

const ICEBERG: &str = r#"sink:
  type: iceberg
  warehouse: ./warehouse        # a folder, or s3://bucket/path (credentials from AWS_* variables)
  # catalog: postgresql://user@host/db   # a shared catalog (default: SQLite in the warehouse; required for s3://)
  # delete-mode: position       # position (every reader) or equality (cheapest writes)
  # maintenance: {interval-seconds: 3600}   # compact and expire inside the job
"#;

const PG_TARGET: &str = r#"sink:
  type: postgres
  url: postgres://lakeshift@127.0.0.1:5432/lake   # the user needs CREATE on the database
  # foreign-keys: drop          # drop (tables applied independently) or keep
"#;

const MY_TARGET: &str = r#"sink:
  type: mariadb
  url: mysql://lakeshift:${TARGET_PASSWORD}@127.0.0.1:3306   # ${VAR} is read from the environment
  # foreign-keys: drop          # drop (tables applied independently) or keep
"#;

const PIPELINE: &str = r#"pipeline:
  name: app-mirror              # the job's name in the target's state and the catalog's lease: one per job
  state: ./state                # checkpoints, the schema history and the DDL log
  checkpoint-interval-seconds: 10
  # ddl-error-policy: fail      # a DDL the target cannot take: fail, skip or park
  # row-error-policy: fail      # a value the target cannot take: fail, skip (dead-letter file) or park
  # memory-budget-mib: 256
  # metrics-port: 9187          # /metrics, /health, /ready on 127.0.0.1:PORT (metrics-address: HOST:PORT instead)
  # target-retry-seconds: 120   # how long an unreachable target is waited for
"#;

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file `init` writes is a job file `sync` reads as written, and each one
    /// with the commented keys switched on too.
    #[test]
    fn every_job_file_init_writes_is_read_as_written() {
        let env = |_: &str| Some("secret".to_owned());
        for source in SOURCES {
            for sink in SINKS {
                let text = job_file(source, sink).unwrap();
                let job = crate::sync::job::parse(&text, env)
                    .unwrap_or_else(|e| panic!("{source} -> {sink}: {e}\n{text}"));
                assert_eq!(
                    job.sink.kind(),
                    if sink == "mariadb" { "mysql" } else { sink }
                );
                // The optional keys, uncommented, are keys too (values as shown).
                let all: String = text
                    .lines()
                    .map(|l| match l.strip_prefix("  # ") {
                        Some(k) if k.contains(':') && !k.starts_with("catalog") => {
                            format!("  {k}\n")
                        }
                        _ => format!("{l}\n"),
                    })
                    .collect();
                crate::sync::job::parse(&all, env)
                    .unwrap_or_else(|e| panic!("{source} -> {sink} (all keys): {e}\n{all}"));
            }
        }
        assert!(job_file("oracle", "iceberg")
            .unwrap_err()
            .contains("unknown source"));
    }
}
