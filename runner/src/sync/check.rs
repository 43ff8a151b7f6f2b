//! `lakeshift check`: every precondition of a job's two ends and its state folder,
//! checked before the first run with no side effects: no state folder, warehouse,
//! catalog, publication, slot or table is made.

use super::job::{SinkConfig, SyncJob};
use crate::source::config::Source;
use std::path::Path;

/// One line of the report: a problem (with its fix) or what was found in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    Ok(String),
    /// Not in the way of a run, but likely not what was meant.
    Warning(String),
    Problem(String),
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Finding::Ok(s) => write!(f, "ok: {s}"),
            Finding::Warning(s) => write!(f, "warning: {s}"),
            Finding::Problem(s) => write!(f, "error: {s}"),
        }
    }
}

/// Every finding about `job`, source first, then the sink and the state folder.
pub async fn check(job: &SyncJob) -> Vec<Finding> {
    let mut out = source(&job.source, &job.pipeline.state).await;
    out.extend(sink(&job.sink).await);
    out.push(match writable_place(&job.pipeline.state) {
        Ok(s) => Finding::Ok(format!("pipeline.state: {s}")),
        Err(e) => Finding::Problem(format!("pipeline.state: {e}")),
    });
    out
}

/// What a source kind found, or the error that kept it from being asked.
type Asked = Result<crate::source::Checked, crate::source::SourceError>;

async fn source(src: &Source, state: &Path) -> Vec<Finding> {
    let asked: Asked = if src.postgres().is_some() {
        crate::source::pg::check(src, state).await
    } else if src.kafka().is_some() {
        kafka(src)
    } else {
        // A job that already ran may have seen its tables dropped (it follows on).
        let resuming = state.exists();
        // (the name a run registers with: from the source's folder in the state)
        let name = crate::source::run::replica_name(Some(&state.join("source")));
        let user = &src.binlog().username;
        crate::source::preflight::problems(src, &name, resuming)
            .await
            .map(|(info, problems)| crate::source::Checked {
                problems,
                warnings: info
                    .unmatched
                    .iter()
                    .map(|p| crate::source::unmatched_warning(p, user))
                    .chain(info.warnings.iter().cloned())
                    .collect(),
                notes: vec![format!(
                    "{}: {} with binary logging in ROW format and full row images; user {user} has the privileges a job needs; server-id {} is in use by no reader the server lists; source.tables captures {} table(s)",
                    src.at(),
                    info.version,
                    src.binlog().server_id,
                    info.captured
                )],
            })
    };
    match asked {
        Ok(c) => {
            let mut out: Vec<Finding> = if c.problems.is_empty() {
                c.notes
                    .into_iter()
                    .map(|n| Finding::Ok(format!("source: {n}")))
                    .collect()
            } else {
                c.problems
                    .into_iter()
                    .map(|p| Finding::Problem(format!("source: {p}")))
                    .collect()
            };
            out.extend(
                c.warnings
                    .into_iter()
                    .map(|w| Finding::Warning(format!("source: {w}"))),
            );
            out
        }
        Err(e) => vec![Finding::Problem(format!("source: {e}"))],
    }
}

#[cfg(feature = "kafka")]
fn kafka(src: &Source) -> Asked {
    tokio::task::block_in_place(|| crate::source::kafka::check(src))
}

#[cfg(not(feature = "kafka"))]
fn kafka(_: &Source) -> Asked {
    Err(crate::source::SourceError::Preflight(
        "this build has no Kafka source (built without the `kafka` feature)".into(),
    ))
}

async fn sink(sink: &SinkConfig) -> Vec<Finding> {
    match sink {
        SinkConfig::Iceberg(s) => {
            let mut out = Vec::new();
            let wh = s.warehouse.display().to_string();
            if wh.starts_with("s3://") {
                out.push(match crate::iceberg::catalog::probe_s3(&wh).await {
                    Ok(n) => Finding::Ok(format!(
                        "sink.warehouse {wh}: listed ({n} entries directly under it)"
                    )),
                    Err(e) => Finding::Problem(format!(
                        "sink.warehouse {wh}: {e} (the endpoint and credentials come from AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"
                    )),
                });
            } else {
                out.push(match writable_place(&s.warehouse) {
                    Ok(m) => Finding::Ok(format!("sink.warehouse: {m}")),
                    Err(e) => Finding::Problem(format!("sink.warehouse: {e}")),
                });
            }
            let warehouse_ok = matches!(out.last(), Some(Finding::Ok(_)));
            out.push(match s.catalog.as_deref() {
                None if wh.starts_with("s3://") => Finding::Problem(
                    "sink.catalog: an s3:// warehouse needs a shared catalog (`catalog: postgresql://...`)".into(),
                ),
                None if !warehouse_ok => return out,
                None => Finding::Ok("sink.catalog: SQLite in the warehouse (catalog.db)".into()),
                Some(uri) => catalog(uri).await,
            });
            out
        }
        SinkConfig::Postgres(r) | SinkConfig::Mysql(r) => vec![target(&r.url).await],
    }
}

/// A catalog server answers (nothing is made in it); a SQLite file's folder is one
/// the job can write.
async fn catalog(uri: &str) -> Finding {
    let shown = crate::iceberg::catalog::redact(uri);
    if let Some(path) = uri.strip_prefix("sqlite:") {
        let path = Path::new(
            path.trim_start_matches("//")
                .split('?')
                .next()
                .unwrap_or(""),
        );
        let folder = path.parent().filter(|p| !p.as_os_str().is_empty());
        if let Some(f) = folder.filter(|f| !f.is_dir()) {
            return Finding::Problem(format!(
                "sink.catalog {shown}: the folder {} does not exist, and the job makes only the catalog file: make the folder first",
                f.display()
            ));
        }
        return match writable_place(folder.unwrap_or(Path::new("."))) {
            Ok(m) => Finding::Ok(format!("sink.catalog {shown}: {m}")),
            Err(e) => Finding::Problem(format!("sink.catalog {shown}: {e}")),
        };
    }
    use sqlx::{ConnectOptions, Connection};
    let opts = match <sqlx::postgres::PgConnectOptions as std::str::FromStr>::from_str(uri) {
        Ok(o) => o.log_statements(tracing::log::LevelFilter::Off),
        Err(e) => return Finding::Problem(format!("sink.catalog {shown}: {e}")),
    };
    if !uri.starts_with("postgres") {
        return Finding::Problem(format!(
            "sink.catalog {shown}: a catalog is `sqlite:PATH` or `postgresql://...`"
        ));
    }
    let mut c = match opts.connect().await {
        Ok(c) => c,
        Err(e) => return Finding::Problem(format!("sink.catalog {shown}: cannot connect: {e}")),
    };
    // The catalog's tables are made at the first run in the user's current schema
    // (unless they exist).
    let may: Result<(bool, Option<String>), sqlx::Error> = sqlx::query_as(
        "SELECT to_regclass('iceberg_tables') IS NOT NULL \
             OR coalesce(has_schema_privilege(current_schema(), 'CREATE'), false), \
             current_schema()::text",
    )
    .fetch_one(&mut c)
    .await;
    let _ = c.close().await;
    match may {
        Ok((true, _)) => Finding::Ok(format!("sink.catalog {shown}: answers")),
        Ok((false, schema)) => Finding::Problem(format!(
            "sink.catalog {shown}: the catalog's tables do not exist and the user may not create them in schema {}: GRANT CREATE ON SCHEMA {} TO the user (or make them once as a user who may)",
            schema.as_deref().unwrap_or("(none on the search path)"),
            schema.as_deref().unwrap_or("public")
        )),
        Err(e) => Finding::Problem(format!("sink.catalog {shown}: {e}")),
    }
}

/// A relational target answers, and its user may create tables.
async fn target(url: &str) -> Finding {
    let shown = crate::iceberg::catalog::redact(url);
    let mut t = match super::rdb::target::Target::connect(url).await {
        Ok(t) => t,
        Err(e) => return Finding::Problem(format!("sink.url: {e}")),
    };
    let pg = url.starts_with("postgres");
    let sql = if pg {
        "SELECT current_user::text, has_database_privilege(current_database(), 'CREATE')::text"
    } else {
        "SELECT CURRENT_USER(), 'true'"
    };
    let (user, may_create) = match t.query(sql).await {
        Ok(rows) => {
            let row = rows.into_iter().next().unwrap_or_default();
            let at = |i: usize| row.get(i).cloned().flatten().unwrap_or_default();
            (at(0), at(1) == "true")
        }
        Err(e) => return Finding::Problem(format!("sink.url {shown}: {}", e.message)),
    };
    // MySQL: SHOW GRANTS says whether CREATE is among the user's privileges.
    let may_create = if pg {
        may_create
    } else {
        match t.query("SHOW GRANTS").await {
            // (the job makes its state database and the target databases)
            Ok(rows) => rows.iter().flatten().flatten().any(|g| {
                let g = g.to_ascii_uppercase();
                g.contains(" ON *.* ")
                    && (g.contains("ALL PRIVILEGES")
                        || g.contains("CREATE,")
                        || g.contains("CREATE ON"))
            }),
            Err(_) => true, // not asked: the first run says so if it may not
        }
    };
    if may_create {
        Finding::Ok(format!(
            "sink.url {shown}: answers; {user} may create the job's tables"
        ))
    } else if pg {
        Finding::Problem(format!(
            "sink.url {shown}: {user} may not create schemas in this database: GRANT CREATE ON DATABASE ... TO {user}"
        ))
    } else {
        Finding::Problem(format!(
            "sink.url {shown}: {user} may not create tables: GRANT CREATE, INSERT, UPDATE, DELETE, SELECT, ALTER, DROP, INDEX ON *.* TO {user}"
        ))
    }
}

/// A folder the job can make or write: it exists as a folder, or its nearest
/// existing parent is one; either way a folder made and removed in it shows that
/// the job can write there (nothing is left).
fn writable_place(path: &Path) -> Result<String, String> {
    let shown = path.display();
    if path.starts_with("~") {
        return Err(format!(
            "{shown} starts with `~`, which a job file does not expand (it would be a folder named `~`): write the full path"
        ));
    }
    let mut at = path;
    loop {
        match std::fs::metadata(at) {
            Ok(m) if !m.is_dir() => {
                return Err(format!(
                    "{shown}: {} is a file, not a folder: choose another path",
                    at.display()
                ))
            }
            Ok(_) => {
                let probe = at.join(format!(".lakeshift-check-{}", std::process::id()));
                if let Err(e) = std::fs::create_dir(&probe) {
                    return Err(format!(
                        "{shown}: nothing can be made in {} ({e}): give the job's user write access, or choose another path",
                        at.display()
                    ));
                }
                let _ = std::fs::remove_dir(&probe);
                let full = std::fs::canonicalize(at).unwrap_or_else(|_| at.to_owned());
                return Ok(if at == path {
                    format!("{shown} exists and can be written")
                } else {
                    format!(
                        "{shown} does not exist yet; the first run makes it in {}",
                        full.display()
                    )
                });
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                if std::fs::symlink_metadata(at).is_ok() {
                    return Err(format!(
                        "{shown}: {} is a symbolic link to a path that does not exist: make its target or choose another path",
                        at.display()
                    ));
                }
                match at.parent() {
                    Some(p) if !p.as_os_str().is_empty() => at = p,
                    _ => at = Path::new("."),
                }
            }
            Err(e) => return Err(format!("{shown}: {}: {e}", at.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_checked_where_it_would_be_made_and_nothing_is_made() {
        let tmp = tempfile::tempdir().unwrap();
        let deep = tmp.path().join("a/b/c");
        let found = writable_place(&deep).unwrap();
        assert!(found.contains("does not exist yet"), "{found}");
        assert!(!tmp.path().join("a").exists(), "nothing is made");
        let file = tmp.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let e = writable_place(&file.join("wh")).unwrap_err();
        assert!(e.contains("is a file, not a folder"), "{e}");
        let e = writable_place(Path::new("~/wh")).unwrap_err();
        assert!(e.contains("does not expand"), "{e}");
        let link = tmp.path().join("dangling");
        std::os::unix::fs::symlink(tmp.path().join("nowhere"), &link).unwrap();
        let e = writable_place(&link.join("state")).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        // A place where nothing can be made (root passes permission bits).
        let e = writable_place(Path::new("/proc/lakeshift-wh")).unwrap_err();
        assert!(e.contains("nothing can be made"), "{e}");
        assert!(writable_place(tmp.path())
            .unwrap()
            .contains("exists and can be written"));
    }
}
