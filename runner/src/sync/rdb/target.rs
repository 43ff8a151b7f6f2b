//! One connection to a relational target (PostgreSQL through sqlx, MySQL/MariaDB
//! through mysql_async), with just what the sink needs: run SQL, count affected rows,
//! read text results.

use crate::sync::error::SyncError;
use dialects::Dialect;
use mysql_async::prelude::Queryable;
use sqlx::Row;
use std::collections::BTreeSet;
use std::time::Duration;

/// Bytes of COPY data sent at a time.
const COPY_CHUNK: usize = 1 << 20;

pub enum Target {
    Pg(sqlx::PgConnection),
    My(mysql_async::Conn),
}

/// A target error, with the SQL state or error number the target gave.
#[derive(Debug, Clone)]
pub struct TargetError {
    pub message: String,
    /// The connection itself failed (not the statement).
    pub connection: bool,
    /// PostgreSQL's SQLSTATE or MySQL's error number, as the server sent it.
    pub code: Option<String>,
}

impl std::fmt::Display for TargetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl TargetError {
    fn code_in(&self, codes: &[&str]) -> bool {
        self.code.as_deref().is_some_and(|c| codes.contains(&c))
    }

    /// A unique index refused a row (PostgreSQL 23505, MySQL 1062).
    pub fn unique_violation(&self) -> bool {
        self.code_in(&["23505", "1062"])
    }

    /// A value of a row the target cannot take: PostgreSQL's data exceptions (class
    /// 22: too long, out of range, bad date or time) and its NOT NULL and CHECK
    /// violations; MySQL's out of range (1264, 1690), too long (1406), truncated
    /// (1265), incorrect value (1292, 1366, 1367, 1411), NULL (1048), CHECK (3819,
    /// 4025), invalid JSON (3140).
    pub fn bad_value(&self) -> bool {
        let Some(c) = self.code.as_deref() else {
            return false;
        };
        c.len() == 5 && (c.starts_with("22") || c == "23502" || c == "23514")
            || [
                "1264", "1690", "1406", "1265", "1292", "1366", "1367", "1411", "1048", "3819",
                "4025", "3140",
            ]
            .contains(&c)
    }

    /// The statement's effect is there already: what it creates exists, what it
    /// drops is gone (a DDL run again after a crash).
    pub fn already_applied(&self) -> bool {
        self.code_in(&[
            // PostgreSQL: duplicate column, table, object, schema.
            "42701", "42P07", "42710", "42P06",
            // MySQL: duplicate column, table exists, duplicate key name, can't drop
            // (what was dropped), database exists, duplicate CHECK constraint name.
            "1060", "1050", "1061", "1091", "1007", "1826",
        ])
    }
}

fn pg_err(e: sqlx::Error) -> TargetError {
    let connection = crate::iceberg::sql_connection_lost(&e);
    let (message, code) = match &e {
        sqlx::Error::Database(d) => (
            format!(
                "{}{} (SQLSTATE {})",
                d.message(),
                d.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                    .and_then(pg_error_column)
                    .unwrap_or_default(),
                d.code().unwrap_or_default()
            ),
            d.code().map(|c| c.into_owned()),
        ),
        _ => (e.to_string(), None),
    };
    TargetError {
        message,
        connection,
        code,
    }
}

/// The column (and table) a PostgreSQL error names, as `, column c of table t`: its
/// own fields (NOT NULL), or the COPY context (`COPY t, line 1, column c: "..."`;
/// the value that follows is left out: values never reach the logs).
fn pg_error_column(d: &sqlx::postgres::PgDatabaseError) -> Option<String> {
    let column = d.column().map(str::to_owned).or_else(|| {
        let w = d.r#where()?;
        let rest = &w[w.find(", column ")? + ", column ".len()..];
        Some(rest[..rest.find(": ")?].to_owned())
    })?;
    Some(match d.table() {
        Some(t) => format!(", column {column} of table {t}"),
        None => format!(", column {column}"),
    })
}

fn my_err(e: mysql_async::Error) -> TargetError {
    // The connection failed, or the server ended it (1053: shutdown in progress;
    // 1927: connection killed).
    let connection = match &e {
        mysql_async::Error::Io(_) | mysql_async::Error::Driver(_) => true,
        mysql_async::Error::Server(s) => matches!(s.code, 1053 | 1927),
        _ => false,
    };
    let code = match &e {
        mysql_async::Error::Server(s) => Some(s.code.to_string()),
        _ => None,
    };
    TargetError {
        message: e.to_string(),
        connection,
        code,
    }
}

impl Target {
    pub async fn connect(url: &str) -> Result<Target, SyncError> {
        let shown = crate::iceberg::catalog::redact(url);
        if url.starts_with("postgres") {
            use sqlx::ConnectOptions;
            // The driver's statement log would carry row values (a checkpoint's
            // statement holds every changed row): off, slow statements included.
            let opts = <sqlx::postgres::PgConnectOptions as std::str::FromStr>::from_str(url)
                .map_err(|e| format!("target url {shown}: {e}"))?
                .log_statements(tracing::log::LevelFilter::Off)
                .log_slow_statements(tracing::log::LevelFilter::Off, Duration::from_secs(1));
            let mut c = opts.connect().await.map_err(|e| {
                SyncError::from(pg_err(e))
                    .context(format_args!("cannot connect to the target {shown}"))
            })?;
            // Settings the sink's SQL depends on, whatever the database or role set:
            // UTC timestamps, and string literals where a backslash is a character
            // (with `standard_conforming_strings = off` it escapes the closing quote).
            sqlx::raw_sql(
                "SET TIME ZONE 'UTC'; SET client_min_messages = warning; \
                 SET standard_conforming_strings = on; SET client_encoding = 'UTF8'",
            )
            .execute(&mut c)
            .await
            .map_err(|e| SyncError::from(pg_err(e)).context(format_args!("target {shown}")))?;
            Ok(Target::Pg(c))
        } else {
            let url = url.replacen("mariadb://", "mysql://", 1);
            let opts = mysql_async::Opts::from_url(&url)
                .map_err(|e| format!("target url {shown}: {e}"))?;
            let mut c = mysql_async::Conn::new(opts).await.map_err(|e| {
                SyncError::from(my_err(e))
                    .context(format_args!("cannot connect to the target {shown}"))
            })?;
            // TIMESTAMP values are written and read as UTC; text is utf8mb4; string
            // literals escape with backslashes (NO_BACKSLASH_ESCAPES would keep the
            // doubled backslashes the sink writes), whatever the server's sql_mode;
            // a value a column cannot hold is an error, never cut or changed to fit
            // (STRICT_ALL_TABLES), so the row-error policy sees it.
            c.query_drop(
                "SET SESSION time_zone = '+00:00'; SET NAMES utf8mb4; \
                 SET SESSION sql_mode = CONCAT_WS(',', NULLIF(TRIM(BOTH ',' FROM REPLACE(CONCAT(',', @@SESSION.sql_mode, ','), ',NO_BACKSLASH_ESCAPES,', ',')), ''), 'STRICT_ALL_TABLES')",
            )
                .await
                .map_err(|e| SyncError::from(my_err(e)).context(format_args!("target {shown}")))?;
            Ok(Target::My(c))
        }
    }

    /// The largest statement the target takes: MySQL's `max_allowed_packet` (less
    /// a margin for the protocol), PostgreSQL's message limit (1 GiB) halved.
    pub async fn max_statement_bytes(&mut self) -> Result<usize, SyncError> {
        match self {
            Target::Pg(_) => Ok(512 << 20),
            Target::My(c) => {
                let v: Option<u64> = c
                    .query_first("SELECT @@max_allowed_packet")
                    .await
                    .map_err(|e| SyncError::from(my_err(e)).context("target"))?;
                Ok((v.unwrap_or(16 << 20) as usize)
                    .saturating_sub(4096)
                    .max(64 << 10))
            }
        }
    }

    pub fn dialect(&self) -> Dialect {
        match self {
            Target::Pg(_) => Dialect::Postgres,
            Target::My(_) => Dialect::MySql,
        }
    }

    /// Whether DDL takes part in transactions (PostgreSQL) or commits implicitly.
    pub fn transactional_ddl(&self) -> bool {
        matches!(self, Target::Pg(_))
    }

    /// Run statements; returns rows affected. (Boxed as `Send`, here and in `run`: a
    /// checkpoint commits on a task of its own, and the compiler cannot prove the
    /// drivers' futures `Send` through an `async fn`.)
    pub fn exec<'a>(
        &'a mut self,
        sql: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<u64, TargetError>> + Send + 'a>>
    {
        Box::pin(self.exec_inner(sql))
    }

    async fn exec_inner(&mut self, sql: &str) -> Result<u64, TargetError> {
        match self {
            Target::Pg(c) => sqlx::Executor::execute(&mut *c, sqlx::raw_sql(sql))
                .await
                .map(|r| r.rows_affected())
                .map_err(pg_err),
            Target::My(c) => {
                c.query_drop(sql).await.map_err(my_err)?;
                Ok(c.affected_rows())
            }
        }
    }

    /// Run one step of a checkpoint; returns rows affected.
    pub fn run<'a>(
        &'a mut self,
        step: &'a super::step::Step,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<u64, TargetError>> + Send + 'a>>
    {
        Box::pin(self.run_inner(step))
    }

    async fn run_inner(&mut self, step: &super::step::Step) -> Result<u64, TargetError> {
        use super::render::Val;
        use super::step::Step;
        match (self, step) {
            (t, Step::Sql(sql)) => t.exec(sql).await,
            (Target::Pg(c), Step::Copy { copy, rows } | Step::Load { load: copy, rows }) => {
                // Staging tables take each row's order as a last column.
                let ordered = matches!(step, Step::Copy { .. });
                let mut w = c.copy_in_raw(copy).await.map_err(pg_err)?;
                let mut buf = Vec::with_capacity(COPY_CHUNK + (64 << 10));
                let mut sent = Ok(());
                for (i, r) in rows.iter().enumerate() {
                    super::step::copy_text(&mut buf, r, ordered.then_some(i));
                    if buf.len() >= COPY_CHUNK {
                        if let Err(e) = w.send(std::mem::take(&mut buf)).await {
                            sent = Err(e);
                            break;
                        }
                        buf.reserve(COPY_CHUNK + (64 << 10));
                    }
                }
                if sent.is_ok() && !buf.is_empty() {
                    sent = w.send(buf).await.map(|_| ());
                }
                match sent {
                    Ok(()) => w.finish().await.map_err(pg_err),
                    Err(e) => {
                        let _ = w.abort("lakeshift: sending rows failed").await;
                        Err(pg_err(e))
                    }
                }
            }
            (Target::Pg(c), Step::Exec { sql, params }) => {
                let mut q = sqlx::query(sql);
                for p in params.vals() {
                    q = match p {
                        Val::Null | Val::Default => q.bind(None::<String>),
                        Val::Int(v) => q.bind(v),
                        Val::UInt(v) => q.bind(v.to_string()),
                        Val::Float(v) => q.bind(v),
                        Val::Text(s) => q.bind(s.to_owned()),
                        Val::Bytes(b) => q.bind(b.to_vec()),
                    };
                }
                q.execute(c)
                    .await
                    .map(|r| r.rows_affected())
                    .map_err(pg_err)
            }
            (Target::My(c), Step::Exec { sql, params }) => {
                c.exec_drop(sql.as_str(), my_params(params))
                    .await
                    .map_err(my_err)?;
                Ok(c.affected_rows())
            }
            (Target::My(_), Step::Copy { copy, .. } | Step::Load { load: copy, .. }) => {
                Err(TargetError {
                    message: format!("a MySQL target takes no COPY ({copy})"),
                    connection: false,
                    code: None,
                })
            }
        }
    }

    /// MySQL: rows of a prepared statement with parameters `params`, every value as
    /// the bytes the server sends (NULL as None).
    pub async fn select(
        &mut self,
        sql: &str,
        params: &super::render::Row,
    ) -> Result<Vec<Vec<Option<Vec<u8>>>>, TargetError> {
        let Target::My(c) = self else {
            return Err(TargetError {
                message: "a prepared SELECT is for MySQL targets".into(),
                connection: false,
                code: None,
            });
        };
        let rows: Vec<mysql_async::Row> = c.exec(sql, my_params(params)).await.map_err(my_err)?;
        Ok(rows
            .into_iter()
            .map(|r| {
                r.unwrap()
                    .into_iter()
                    .map(|v| match v {
                        mysql_async::Value::NULL => None,
                        mysql_async::Value::Bytes(b) => Some(b),
                        v => Some(v.as_sql(true).trim_matches('\'').as_bytes().to_vec()),
                    })
                    .collect()
            })
            .collect())
    }

    /// Rows of a query, every value as text (NULL as None).
    pub async fn query(&mut self, sql: &str) -> Result<Vec<Vec<Option<String>>>, TargetError> {
        match self {
            Target::Pg(c) => {
                let rows = sqlx::raw_sql(sql).fetch_all(c).await.map_err(pg_err)?;
                Ok(rows
                    .iter()
                    .map(|r| {
                        (0..r.len())
                            .map(|i| r.try_get::<Option<String>, _>(i).ok().flatten())
                            .collect()
                    })
                    .collect())
            }
            Target::My(c) => {
                let rows: Vec<mysql_async::Row> = c.query(sql).await.map_err(my_err)?;
                Ok(rows
                    .into_iter()
                    .map(|r| {
                        r.unwrap()
                            .into_iter()
                            .map(|v| match v {
                                mysql_async::Value::NULL => None,
                                mysql_async::Value::Bytes(b) => {
                                    Some(String::from_utf8_lossy(&b).into_owned())
                                }
                                v => Some(v.as_sql(true).trim_matches('\'').to_owned()),
                            })
                            .collect()
                    })
                    .collect())
            }
        }
    }

    /// The tables of these schemas (MySQL: databases) the target holds, as (schema,
    /// table).
    pub async fn tables_in(
        &mut self,
        schemas: &[&str],
    ) -> Result<BTreeSet<(String, String)>, TargetError> {
        if schemas.is_empty() {
            return Ok(BTreeSet::new());
        }
        let list: Vec<String> = schemas
            .iter()
            .map(|s| dialects::emit::string_literal(self.dialect(), s))
            .collect();
        let sql = format!(
            "SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema IN ({})",
            list.join(", ")
        );
        Ok(self
            .query(&sql)
            .await?
            .into_iter()
            .filter_map(|r| match &r[..] {
                [Some(s), Some(t)] => Some((s.clone(), t.clone())),
                _ => None,
            })
            .collect())
    }

    /// The columns of a table, in order (lower-cased for comparison), or None when the
    /// table does not exist.
    pub async fn columns(
        &mut self,
        db: &str,
        table: &str,
    ) -> Result<Option<Vec<String>>, TargetError> {
        let q = |s: &str| dialects::emit::string_literal(self.dialect(), s);
        let sql = format!(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = {} AND table_name = {} ORDER BY ordinal_position",
            q(db),
            q(table)
        );
        let rows = self.query(&sql).await?;
        if rows.is_empty() {
            return Ok(None);
        }
        Ok(Some(
            rows.into_iter()
                .filter_map(|r| r.into_iter().next().flatten())
                .map(|c| c.to_lowercase())
                .collect(),
        ))
    }
}

/// A row's values as MySQL's binary-protocol parameters (numbers as numbers, text
/// and bytes as bytes).
fn my_params(params: &super::render::Row) -> mysql_async::Params {
    use super::render::Val;
    mysql_async::Params::Positional(
        params
            .vals()
            .map(|p| match p {
                Val::Null | Val::Default => mysql_async::Value::NULL,
                Val::Int(v) => mysql_async::Value::Int(v),
                Val::UInt(v) => mysql_async::Value::UInt(v),
                Val::Float(v) => mysql_async::Value::Double(v),
                Val::Text(s) => mysql_async::Value::Bytes(s.as_bytes().to_vec()),
                Val::Bytes(b) => mysql_async::Value::Bytes(b.to_vec()),
            })
            .collect(),
    )
}
