//! The `lakeshift` command line. It only parses arguments and wires the libraries.

#[cfg(feature = "sync")]
mod jobs;

use clap::{Parser, Subcommand, ValueEnum};
use ddl_core::Severity;
use dialects::translate::{Target, Translator};
use dialects::Dialect;
use std::io::{Read, Write};
use std::process::ExitCode;

/// The version and the commit it was built from (`build.rs`).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    include_str!(concat!(env!("OUT_DIR"), "/commit.txt")),
    ")"
);

#[derive(Parser)]
#[command(
    name = "lakeshift",
    version = VERSION,
    after_help = "Exit status: 0 success, 1 failure (a statement, a commit, the source), 2 usage error."
)]
#[cfg_attr(
    feature = "sync",
    command(
        about = "Translate DDL between MySQL/MariaDB, PostgreSQL, Oracle and Iceberg, and mirror MySQL/MariaDB databases (binlog or Debezium topics) and PostgreSQL databases (logical replication) into Iceberg, PostgreSQL or MySQL, DDL included, exactly once"
    )
)]
#[cfg_attr(
    not(feature = "sync"),
    command(
        about = "Translate DDL between MySQL/MariaDB, PostgreSQL, Oracle and Iceberg (built without the `sync` feature: apply, tail, sync, maintain, pg-setup, status and ddl-log are not in this build)"
    )
)]
struct Cli {
    /// How log lines are written on standard error: `text` for people, `json` (one
    /// object a line: timestamp, level, fields) for log collectors. The level comes
    /// from LAKESHIFT_LOG (or RUST_LOG): `debug`, `warn`, or per module
    /// (`info,runner::source::kafka=debug`); `info` by default.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Translate DDL from one dialect to another.
    ///
    /// Statements are read from FILEs (or standard input when none is given), in order,
    /// against a schema catalog that each statement updates, so ALTERs are translated
    /// with the previous definition of what they change. Translated statements go to
    /// standard output, each ending with `;` and a newline. Diagnostics go to standard
    /// error as `warning: FILE:LINE:COL: message` (the target cannot hold the meaning
    /// exactly; the nearest type is used), `skipped: FILE:LINE:COL: ...` (the statement
    /// or part has no meaning for the target: views, routines, session settings, table
    /// options, data, ownership and grants, client commands such as SQL*Plus `PROMPT`,
    /// psql `\connect` or the mysql client's `source`), and `error: FILE:LINE:COL: ...`
    /// (the statement could not be parsed or applied; nothing is emitted for it). Every
    /// statement that can be translated is, even when others fail. Dumps of any size
    /// are read as they go (mariadb-dump, pg_dump, SQL*Plus scripts); a foreign key onto
    /// a table created later is added by ALTER TABLE once that table exists.
    ///
    /// Exit status: 0 when every statement translated, 1 when any failed, 2 for usage
    /// errors (unknown dialect, unreadable file).
    Translate {
        /// Source dialect (mariadb is an alias of mysql).
        #[arg(long, value_enum)]
        from: SourceArg,
        /// Target dialect, `ir` for the neutral IR as JSON, or `iceberg` for the planned
        /// Iceberg metadata changes as JSON (field ids, types, what each statement did,
        /// diagnostics); no catalog is touched.
        #[arg(long, value_enum)]
        to: TargetArg,
        #[command(flatten)]
        iceberg: IcebergArgs,
        /// DDL in the source dialect describing tables that already exist; it seeds the
        /// catalog and is not translated. May be given more than once.
        #[arg(long, value_name = "FILE")]
        schema: Vec<String>,
        /// MySQL sql_mode ANSI_QUOTES: "x" is an identifier, not a string.
        #[arg(long)]
        ansi_quotes: bool,
        /// Write names of source schema SCHEMA in target schema (MySQL: database)
        /// DATABASE; empty after `=`: unqualified, in the current database. May be
        /// given more than once. From PostgreSQL into MySQL, `public` goes to the
        /// current database unless mapped here; other schemas keep their names (the
        /// output creates their databases).
        #[arg(long = "schema-map", value_name = "SCHEMA=DATABASE")]
        schema_map: Vec<String>,
        /// Leave out the `skipped:` lines (statements with no schema meaning: data,
        /// grants, ownership, session settings); the summary still counts them.
        #[arg(long)]
        quiet: bool,
        /// Input files; standard input when none is given.
        #[arg(value_name = "FILE")]
        files: Vec<String>,
    },
    #[cfg(feature = "sync")]
    /// Mirror a MySQL/MariaDB database (binlog or Debezium topics) or a PostgreSQL
    /// database (logical replication) into Iceberg tables or into PostgreSQL or
    /// MySQL/MariaDB, DDL included, exactly once.
    ///
    /// Reads the job file (source, sink, pipeline, route). The first run snapshots every
    /// captured table, then follows the binlog; with `source.type: kafka` it reads
    /// Debezium topics instead, one consumer group, offsets kept in the sink's commit;
    /// with `source.type: postgres` a logical replication slot (pgoutput), whose
    /// exported snapshot the first copy reads, and the DDL `pg-setup` captures.
    /// Iceberg (`sink.type: iceberg`): every
    /// checkpoint interval, at a transaction boundary, changes are written as Parquet
    /// files (updates and deletes of rows committed before as position deletes, from
    /// an index of where each row is; `sink.delete-mode: equality` writes equality
    /// deletes instead, the default for Kafka sources), recorded in the state folder,
    /// and committed per table with the checkpoint
    /// id and the table's watermark in the snapshot summary. PostgreSQL or MySQL
    /// (`sink.type: postgres | mysql`): changes folded by key become upserts and
    /// deletes (values sent as data: COPY into staging tables, or prepared statements)
    /// in one target transaction per checkpoint, which also moves the job's row
    /// in the target's `lakeshift.sync_state`. DDL on a table commits its pending rows
    /// first, then is translated and applied; every DDL is kept in the DDL log
    /// (`lakeshift ddl-log`); one the target cannot take follows
    /// `pipeline.ddl-error-policy` (fail, skip, or park: hold the table's changes until
    /// `ddl-log --resolve`). A row with a value the target cannot hold follows
    /// `pipeline.row-error-policy` (fail, skip to the dead-letter file, or park: that
    /// too, and hold the table's changes until `ddl-log --resolve`). One process
    /// runs a job: a second one is refused (Iceberg jobs hold a lease in the catalog, so
    /// on other hosts too). SIGTERM or Ctrl-C reads on to the end of a source transaction it
    /// is inside (up to 5 s), commits what was read, then stops (exit 0); a second one
    /// stops at once (exit 130). A restart (after a crash too) resumes
    /// without loss or duplicates.
    Sync {
        /// The job file (YAML).
        #[arg(long, value_name = "FILE")]
        config: std::path::PathBuf,
        /// Stop when the source's current end is reached (the binlog's end, or every
        /// assigned Kafka partition's end), after a final checkpoint, instead of
        /// following it.
        #[arg(long)]
        until_end: bool,
    },
    #[cfg(feature = "sync")]
    /// Print a commented job file for a source and a sink: the keys a first job needs,
    /// with values to change, and the common optional ones commented out with their
    /// defaults. Save it (`> job.yaml`), edit it, then `check` and `sync` it.
    Init {
        /// Where changes come from.
        #[arg(long, value_parser = ["mariadb", "mysql", "postgres", "kafka"], required_unless_present = "schema")]
        source: Option<String>,
        /// Where they go.
        #[arg(long, value_parser = ["iceberg", "postgres", "mariadb", "mysql"], required_unless_present = "schema")]
        sink: Option<String>,
        /// Print the job file's JSON Schema instead (every key, its type, default and
        /// meaning; editors validate and complete job files with it).
        #[arg(long, conflicts_with_all = ["source", "sink"])]
        schema: bool,
    },
    #[cfg(feature = "sync")]
    /// Check a job before its first run, changing nothing: the source (reachable,
    /// credentials, binary logging in ROW format with full row images, or
    /// `wal_level = logical`, replication privileges, the `server-id` free, the
    /// `tables` patterns matching tables the user can see, the publication and
    /// REPLICA IDENTITY of keyless tables, Kafka's schema-change topic), the sink (the
    /// warehouse and state folder writable or creatable, the catalog or S3 bucket
    /// answering, a relational target reachable with CREATE), without making the
    /// state folder, the warehouse, a catalog, a publication or a slot. One line per
    /// finding: `ok: ...`, `warning: ...` (likely not what was meant, not in the way
    /// of a run) or `error: ...` with the fix.
    /// Exit status: 0 everything holds, 1 a problem was found, 2 usage error (the job
    /// file cannot be read or parsed).
    Check {
        /// The job file (YAML).
        #[arg(long, value_name = "FILE")]
        config: std::path::PathBuf,
    },
    #[cfg(feature = "sync")]
    /// Maintain the Iceberg tables a sync job wrote: compact a table with delete files
    /// or many small data files (its small files and those its position deletes point
    /// into, rewritten from one snapshot with the deletes applied into files of the
    /// target size, committed only if nothing was committed in between), merge its
    /// manifests (those a rewrite left without live files dropped, small ones merged
    /// from `sink.maintenance.min-manifests`), expire snapshots
    /// beyond `sink.maintenance.retain-snapshots` and older than
    /// `snapshot-age-hours` (never the current one nor the newest holding the job's
    /// checkpoint or Kafka offsets) with the files only they held, and remove orphan
    /// files older than `orphan-age-hours`. Refused while the job runs (set
    /// `sink.maintenance.interval-seconds` and the job maintains its tables itself).
    /// Exit status: 0 done, 1 a step failed, 2 usage error.
    Maintain {
        /// The job file (YAML).
        #[arg(long, value_name = "FILE")]
        config: std::path::PathBuf,
        /// Print what would be done; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    #[cfg(feature = "sync")]
    /// Install the DDL capture of a PostgreSQL source (`source.type: postgres`):
    /// PostgreSQL's logical replication carries no DDL, so an event trigger at the end
    /// of every DDL command (and one on dropped tables) emits a transactional logical
    /// message with the command's text, search_path and objects; `sync` reads it in its
    /// place among the rows and applies it like binlog DDL. Prints the SQL; with
    /// --apply runs it in the job's database (event triggers need a superuser).
    PgSetup {
        /// The job file (YAML).
        #[arg(long, value_name = "FILE")]
        config: std::path::PathBuf,
        /// Run the SQL instead of printing it.
        #[arg(long)]
        apply: bool,
    },
    #[cfg(feature = "sync")]
    /// Show where a job stands: an Iceberg job's owner (lease holder) and, per Iceberg
    /// table, its committed checkpoint, watermark, rows and schema; for a
    /// PostgreSQL/MySQL target its state row and Kafka offsets; the DDL log's counts;
    /// and for a PostgreSQL source its slot's confirmed position and retained WAL.
    Status {
        /// The job file (YAML).
        #[arg(long, value_name = "FILE")]
        config: std::path::PathBuf,
    },
    #[cfg(feature = "sync")]
    /// Remove what a job keeps outside its target tables, once the job is given up:
    /// a PostgreSQL source's replication slot (it retains WAL on the server for as
    /// long as it exists) and the publication the job made (one made by hand is
    /// kept), the job's lease row in the Iceberg catalog or its state rows in a
    /// PostgreSQL/MySQL target, and its state folder. The target's tables and rows
    /// stay. Prints what it would remove; --apply removes it. A running job is
    /// refused.
    DropJob {
        /// The job file (YAML).
        #[arg(long, value_name = "FILE")]
        config: std::path::PathBuf,
        /// Remove it instead of listing it.
        #[arg(long)]
        apply: bool,
    },
    #[cfg(feature = "sync")]
    /// List the DDL a sync job handled: number, status (pending, executed, failed,
    /// skipped, parked, held, resolved), source position, source and target text, and
    /// the reason when it did not run; also the tables a row parked
    /// (`row-error-policy: park`). With --resolve N, release a parked entry after you
    /// acted on it (applied the DDL by hand, or fixed the target so it can run; for a
    /// row, took it from the dead-letter file): its held changes are applied at the
    /// job's next checkpoint.
    DdlLog {
        /// The job file (YAML).
        #[arg(long, value_name = "FILE")]
        config: std::path::PathBuf,
        /// Release parked entry N.
        #[arg(long, value_name = "N")]
        resolve: Option<u64>,
        /// With --resolve: have the job run the entry's translated DDL first (after you
        /// fixed what made the target refuse it) instead of taking it as done by hand.
        #[arg(long, requires = "resolve")]
        retry: bool,
    },
    #[cfg(feature = "sync")]
    /// Print a MySQL/MariaDB source's changes as JSON lines.
    ///
    /// Reads the `source` part of the job file: with startup mode `initial`, every
    /// captured table's snapshot rows first (`"type":"snapshot"`), then the binlog: one
    /// line per row change (`insert`, `update` with `data` and `old`, `delete`), per DDL
    /// on a captured table (`ddl`, with its IR changes) and per transaction boundary
    /// (`commit`). Every line carries the position just after it; `--from` resumes
    /// exactly there (inside a transaction too) with the schema history kept in
    /// `--state`. Progress and skips go to standard error.
    Tail {
        /// The job file (YAML); only its `source` part is used.
        #[arg(long, value_name = "FILE")]
        config: std::path::PathBuf,
        /// Resume at this position (FILE:OFFSET[#ORDINAL][@GTID]) instead of the
        /// startup mode.
        #[arg(long, value_name = "POSITION")]
        from: Option<String>,
        /// Resume by the position's GTID state rather than its file and offset.
        #[arg(long)]
        gtid: bool,
        /// Folder for the schema history (needed to resume later).
        #[arg(long, value_name = "DIR")]
        state: Option<std::path::PathBuf>,
        /// Stop at the current end of the binlog instead of following it.
        #[arg(long)]
        until_end: bool,
    },
    #[cfg(feature = "sync")]
    /// Apply DDL to Iceberg tables in a catalog, one commit per statement and table.
    ///
    /// Each statement is planned as `translate --to iceberg` would and committed
    /// atomically (compare-and-swap of the table's metadata location). Tables already
    /// in the catalog are known to the script. The catalog is a SQLite file
    /// `catalog.db` in the warehouse unless --catalog names another database; its
    /// catalog name is `lakeshift` (readers such as pyiceberg must use that name).
    /// Each change is reported on standard output, diagnostics on standard error as
    /// with translate. The first statement that fails stops the run: it and the
    /// statements after it are not applied.
    ///
    /// Exit status: 0 when every statement applied, 1 when one failed, 2 for usage
    /// errors.
    Apply {
        /// Source dialect (mariadb is an alias of mysql).
        #[arg(long, value_enum)]
        from: SourceArg,
        /// Warehouse folder (created if missing), or s3://bucket/prefix (needs --catalog; endpoint and credentials from AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY or the AWS credential chain).
        #[arg(long, value_name = "DIR")]
        warehouse: std::path::PathBuf,
        /// Catalog database URI: sqlite:///path/file.db or postgresql://user@host/db.
        /// Default: sqlite in the warehouse folder.
        #[arg(long, value_name = "URI")]
        catalog: Option<String>,
        /// Catalog name (the catalog_name column shared with other engines).
        #[arg(long, value_name = "NAME", default_value = "lakeshift")]
        catalog_name: String,
        #[command(flatten)]
        iceberg: IcebergArgs,
        /// MySQL sql_mode ANSI_QUOTES: "x" is an identifier, not a string.
        #[arg(long)]
        ansi_quotes: bool,
        /// Input files; standard input when none is given.
        #[arg(value_name = "FILE")]
        files: Vec<String>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum SourceArg {
    Mysql,
    Mariadb,
    Postgres,
    Oracle,
}

#[derive(Clone, Copy, ValueEnum)]
enum TargetArg {
    Mysql,
    Mariadb,
    Postgres,
    Oracle,
    Ir,
    Iceberg,
}

/// Options of the Iceberg target (`--to iceberg`, `apply`).
#[derive(clap::Args, Clone)]
struct IcebergArgs {
    /// What to do with a change Iceberg cannot take in place (a narrowing, a change of
    /// type family, optional -> required on a table that may hold rows): exception
    /// (stop, nothing applied), evolve (replace the column / make it required anyway),
    /// try-evolve (evolve where existing data stays readable, else lenient), lenient
    /// (keep existing data readable: keep the wider type, keep old values in
    /// `<column>_old`, keep optional), ignore (leave that part undone, with a warning).
    #[arg(long, value_name = "B", default_value = "exception")]
    schema_change_behavior: ddl_core::SchemaChangeBehavior,
    /// MySQL TINYINT(1)/BOOLEAN as Iceberg `boolean` or `int`.
    #[arg(long, value_name = "T", default_value = "boolean", value_parser = ["boolean", "int"])]
    tinyint1: String,
    /// BIGINT UNSIGNED as `decimal` (decimal(20,0), every value fits) or `long`.
    #[arg(long, value_name = "T", default_value = "decimal", value_parser = ["decimal", "long"])]
    bigint_unsigned: String,
    /// Format version of new Iceberg tables (2, or 3 for column defaults).
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u8).range(2..=3))]
    format_version: u8,
    /// Namespace of tables the DDL names without a database/schema.
    #[arg(long, value_name = "NS", default_value = "default")]
    namespace: String,
    /// Partition new tables by `bucket(N, first key column)` (0: unpartitioned).
    #[arg(long, value_name = "N", default_value_t = 0)]
    partition_buckets: u32,
    /// Declare the primary key as the sort order of new tables.
    #[arg(long)]
    sort_by_key: bool,
    /// Target data file size of new tables, in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 128)]
    target_file_size_mib: u64,
    /// Parquet compression codec of new tables.
    #[arg(long, value_name = "CODEC", default_value = "zstd", value_parser = ["zstd", "snappy", "gzip", "uncompressed"])]
    compression: String,
}

impl IcebergArgs {
    fn options(&self) -> dialects::iceberg::IcebergOptions {
        use dialects::iceberg::*;
        IcebergOptions {
            tinyint1: if self.tinyint1 == "int" {
                Tinyint1::Int
            } else {
                Tinyint1::Boolean
            },
            bigint_unsigned: if self.bigint_unsigned == "long" {
                BigintUnsigned::Long
            } else {
                BigintUnsigned::Decimal
            },
            format_version: self.format_version,
            behavior: self.schema_change_behavior,
            // (`translate` and `apply` write no rows: an added NOT NULL column is
            // the policy's to decide)
            fills_added_defaults: false,
            default_namespace: self.namespace.clone(),
            layout: Layout {
                partitioning: if self.partition_buckets > 0 {
                    Partitioning::BucketPrimaryKey {
                        buckets: self.partition_buckets,
                    }
                } else {
                    Partitioning::None
                },
                sort_order: if self.sort_by_key {
                    SortOrder::PrimaryKey
                } else {
                    SortOrder::None
                },
                target_file_size_bytes: self.target_file_size_mib * 1024 * 1024,
                compression: self.compression.clone(),
                ..Layout::default()
            },
        }
    }
}

fn main() -> ExitCode {
    runner::malloc::limit_arenas();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    // Logs on standard error; LAKESHIFT_LOG (else RUST_LOG) sets the level.
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_env("LAKESHIFT_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_env("RUST_LOG"))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    match cli.log_format {
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => logs.json().with_ansi(false).init(),
    }
    match cli.command {
        Command::Translate {
            from,
            to,
            iceberg,
            schema,
            ansi_quotes,
            schema_map,
            quiet,
            files,
        } => translate(
            from,
            to,
            &iceberg,
            &Inputs {
                schema: &schema,
                ansi_quotes,
                schema_map: &schema_map,
                quiet,
                files: &files,
            },
        ),
        #[cfg(feature = "sync")]
        Command::Sync { config, until_end } => jobs::sync(&config, until_end),
        #[cfg(feature = "sync")]
        Command::Status { config } => jobs::status(&config),
        #[cfg(feature = "sync")]
        Command::Check { config } => jobs::check(&config),
        #[cfg(feature = "sync")]
        Command::Init { schema: true, .. } => {
            println!(
                "{}",
                serde_json::to_string_pretty(&runner::sync::reference::json_schema())
                    .unwrap_or_default()
            );
            ExitCode::from(0)
        }
        #[cfg(feature = "sync")]
        Command::Init { source, sink, .. } => match runner::sync::init::job_file(
            source.as_deref().unwrap_or_default(),
            sink.as_deref().unwrap_or_default(),
        ) {
            Ok(text) => {
                print!("{text}");
                ExitCode::from(0)
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
        },
        #[cfg(feature = "sync")]
        Command::PgSetup { config, apply } => jobs::pg_setup(&config, apply),
        #[cfg(feature = "sync")]
        Command::Maintain { config, dry_run } => jobs::maintain(&config, dry_run),
        #[cfg(feature = "sync")]
        Command::DropJob { config, apply } => jobs::drop_job(&config, apply),
        #[cfg(feature = "sync")]
        Command::DdlLog {
            config,
            resolve,
            retry,
        } => jobs::ddl_log(&config, resolve, retry),
        #[cfg(feature = "sync")]
        Command::Tail {
            config,
            from,
            gtid,
            state,
            until_end,
        } => jobs::tail(&config, from.as_deref(), gtid, state, until_end),
        #[cfg(feature = "sync")]
        Command::Apply {
            from,
            warehouse,
            catalog,
            catalog_name,
            iceberg,
            ansi_quotes,
            files,
        } => {
            let opts = runner::apply::ApplyOptions {
                source: dialect(from),
                catalog: runner::iceberg::CatalogConfig {
                    name: catalog_name,
                    warehouse,
                    uri: catalog,
                    s3_env: None,
                },
                iceberg: iceberg.options(),
                ansi_quotes,
            };
            jobs::apply(opts, &files)
        }
    }
}

fn dialect(from: SourceArg) -> Dialect {
    match from {
        SourceArg::Mysql | SourceArg::Mariadb => Dialect::MySql,
        SourceArg::Postgres => Dialect::Postgres,
        SourceArg::Oracle => Dialect::Oracle,
    }
}

/// A whole script: bytes that are not UTF-8 read as U+FFFD, but for a MySQL
/// script's strings of them (a binary value as mariadb-dump writes it), read as the
/// hex literal of their bytes.
fn read(path: &str, mysql: bool) -> Result<String, String> {
    let mut b = Vec::new();
    if path == "-" {
        std::io::stdin()
            .read_to_end(&mut b)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
    } else {
        b = std::fs::read(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    }
    Ok(match String::from_utf8(b) {
        Ok(s) => s,
        Err(e) if mysql => grammar::split::mysql_text_from_bytes(e.as_bytes(), true).0,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// What `translate` reads and how it reports (its command-line arguments).
struct Inputs<'a> {
    schema: &'a [String],
    ansi_quotes: bool,
    schema_map: &'a [String],
    quiet: bool,
    files: &'a [String],
}

fn translate(
    from: SourceArg,
    to: TargetArg,
    iceberg: &IcebergArgs,
    inputs: &Inputs<'_>,
) -> ExitCode {
    let Inputs {
        schema,
        ansi_quotes,
        schema_map,
        quiet,
        files,
    } = *inputs;
    let source = dialect(from);
    let target = match to {
        TargetArg::Mysql | TargetArg::Mariadb => Target::Sql(Dialect::MySql),
        TargetArg::Postgres => Target::Sql(Dialect::Postgres),
        TargetArg::Oracle => Target::Sql(Dialect::Oracle),
        TargetArg::Ir => Target::Ir,
        TargetArg::Iceberg => Target::Iceberg,
    };
    let mut tr = Translator::new(source, target);
    tr.iceberg = dialects::iceberg::IcebergPlanner::new(iceberg.options());
    tr.options.ansi_quotes = ansi_quotes;
    let mut failed = false;
    // Diagnostics buffered too (one write per line was a twentieth of a large dump's
    // time); flushed as the buffer fills and at the end.
    let stderr = std::io::stderr();
    let mut err = std::io::BufWriter::new(stderr.lock());
    for m in schema_map {
        match m.split_once('=') {
            Some((from, to)) if !from.trim().is_empty() => {
                let to = to.trim();
                tr.map_schema(from.trim(), (!to.is_empty()).then_some(to));
            }
            _ => {
                let _ = writeln!(
                    err,
                    "error: --schema-map {m}: expected SCHEMA=DATABASE (DATABASE empty: the current database)"
                );
                return ExitCode::from(2);
            }
        }
    }
    for path in schema {
        let text = match read(path, source == Dialect::MySql) {
            Ok(t) => t,
            Err(e) => {
                let _ = writeln!(err, "error: {e}");
                return ExitCode::from(2);
            }
        };
        for r in tr.seed(&text) {
            failed = true;
            for (l, c, d) in &r.diagnostics {
                let _ = writeln!(err, "{}: {path}:{l}:{c}: {}", d.severity, d.message);
            }
        }
    }
    let inputs: Vec<String> = if files.is_empty() {
        vec!["-".to_owned()]
    } else {
        files.to_vec()
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut plans = Vec::new();
    let mut tally = Tally::default();
    let mut write_failed = false;
    for path in &inputs {
        let shown = if path == "-" {
            "<stdin>"
        } else {
            path.as_str()
        };
        let reader: Box<dyn std::io::Read> = if path == "-" {
            Box::new(std::io::stdin())
        } else {
            match std::fs::File::open(path) {
                Ok(f) => Box::new(f),
                Err(e) => {
                    let _ = writeln!(err, "error: cannot read {path}: {e}");
                    return ExitCode::from(2);
                }
            }
        };
        // Each statement is written as soon as it is translated.
        let read = tr.translate_reader(reader, |r| {
            tally.statements += 1;
            tally.written += usize::from(!r.output.is_empty());
            for (l, c, d) in &r.diagnostics {
                if tally.count(d.severity, quiet) {
                    let _ = writeln!(err, "{}: {shown}:{l}:{c}: {}", d.severity, d.message);
                }
            }
            if target == Target::Iceberg {
                plans.push(
                    serde_json::to_string_pretty(&dialects::iceberg::statement_json(shown, &r))
                        .expect("plans serialise"),
                );
                return;
            }
            for s in &r.output {
                if writeln!(out, "{s};").is_err() {
                    write_failed = true;
                }
            }
        });
        if let Err(e) = read {
            let _ = writeln!(err, "error: cannot read {shown}: {e}");
            return ExitCode::from(2);
        }
        if write_failed {
            return ExitCode::from(1);
        }
    }
    if let Some(r) = tr.finish() {
        let shown = match inputs.last().map(String::as_str) {
            Some("-") | None => "<stdin>",
            Some(s) => s,
        };
        for (_, _, d) in &r.diagnostics {
            if tally.count(d.severity, quiet) {
                let _ = writeln!(err, "{}: {shown}: end of input: {}", d.severity, d.message);
            }
        }
        for s in &r.output {
            if writeln!(out, "{s};").is_err() {
                return ExitCode::from(1);
            }
        }
    }
    // The process ends here: the catalog it built goes with it, not freed piece by
    // piece (a twentieth of a large dump's translation time).
    std::mem::forget(tr);
    if target == Target::Iceberg {
        // One JSON array of statement objects, fields in their declared order.
        let doc = if plans.is_empty() {
            "[]".to_owned()
        } else {
            format!("[\n{}\n]", plans.join(",\n"))
        };
        if writeln!(out, "{doc}").is_err() {
            return ExitCode::from(1);
        }
    }
    if out.flush().is_err() {
        return ExitCode::from(1);
    }
    let _ = writeln!(
        err,
        "translated {} statement(s): {} with output, {} skipped{}, {} warning(s), {} error(s)",
        tally.statements,
        tally.written,
        tally.skipped,
        if quiet { " (not shown: --quiet)" } else { "" },
        tally.warnings,
        tally.errors
    );
    let _ = err.flush();
    ExitCode::from(u8::from(failed || tally.errors > 0))
}

/// What a translation came to, for its summary line.
#[derive(Default)]
struct Tally {
    statements: usize,
    written: usize,
    skipped: usize,
    warnings: usize,
    errors: usize,
}

impl Tally {
    /// Count one diagnostic; whether its line is shown (`--quiet` hides `skipped:`).
    fn count(&mut self, severity: Severity, quiet: bool) -> bool {
        match severity {
            Severity::Error => self.errors += 1,
            Severity::Warning => self.warnings += 1,
            Severity::Skipped => self.skipped += 1,
        }
        !(quiet && severity == Severity::Skipped)
    }
}
