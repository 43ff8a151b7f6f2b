//! What the PostgreSQL source reads from the catalog (table definitions, as CREATE
//! TABLE statements the postgres dialect parses into the schema history), the
//! preflight checks, and the DDL capture installed by `lakeshift pg-setup`.

use crate::source::SourceError;

/// One table as the catalog describes it: `CREATE TABLE` text and an estimate of
/// its rows.
#[derive(Debug, Clone)]
pub struct TableDef {
    pub schema: String,
    pub name: String,
    pub ddl: String,
    pub estimate: u64,
}

/// Every ordinary (or partitioned) table outside the system schemas, in the
/// transaction's snapshot. Generated columns are left out: pgoutput does not send
/// them.
const DEFINITIONS: &str = r#"
SELECT n.nspname::text, c.relname::text,
  format('CREATE TABLE %I.%I (%s%s)', n.nspname, c.relname,
    (SELECT string_agg(format('%I %s%s%s', a.attname, format_type(a.atttypid, a.atttypmod),
         CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END,
         CASE WHEN d.adbin IS NOT NULL AND a.attidentity = '' THEN ' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid) ELSE '' END),
       ', ' ORDER BY a.attnum)
     FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''),
    (SELECT ', ' || pg_get_constraintdef(k.oid) FROM pg_constraint k WHERE k.conrelid = c.oid AND k.contype = 'p')),
  greatest(c.reltuples, 0)::float8
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%'
  AND n.nspname <> 'lakeshift'
ORDER BY 1, 2
"#;

pub async fn definitions(c: &tokio_postgres::Client) -> Result<Vec<TableDef>, SourceError> {
    let rows = c.query(DEFINITIONS, &[]).await.map_err(sql)?;
    Ok(rows
        .iter()
        .map(|r| TableDef {
            schema: r.get(0),
            name: r.get(1),
            ddl: r.get(2),
            estimate: r.get::<_, f64>(3) as u64,
        })
        .collect())
}

/// Enum types and domains outside the system schemas, as CREATE TYPE / CREATE
/// DOMAIN statements: seeded into the history before the tables, an enum column
/// reads as an enum and a domain column as its base type (with its NOT NULL and
/// default).
const TYPES: &str = r#"
SELECT n.nspname::text,
  format('CREATE TYPE %I.%I AS ENUM (%s)', n.nspname, t.typname,
    (SELECT string_agg(quote_literal(e.enumlabel), ', ' ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = t.oid))
FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
WHERE t.typtype = 'e' AND n.nspname NOT IN ('pg_catalog', 'information_schema')
UNION ALL
SELECT n.nspname::text,
  format('CREATE DOMAIN %I.%I AS %s%s%s', n.nspname, t.typname, format_type(t.typbasetype, t.typtypmod),
    CASE WHEN t.typnotnull THEN ' NOT NULL' ELSE '' END,
    CASE WHEN t.typdefault IS NOT NULL THEN ' DEFAULT ' || t.typdefault ELSE '' END)
FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
WHERE t.typtype = 'd' AND n.nspname NOT IN ('pg_catalog', 'information_schema')
"#;

/// The CREATE TYPE / CREATE DOMAIN statements of [`TYPES`], as (schema, statement).
pub async fn types(c: &tokio_postgres::Client) -> Result<Vec<(String, String)>, SourceError> {
    let rows = c.query(TYPES, &[]).await.map_err(sql)?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

pub fn sql(e: tokio_postgres::Error) -> SourceError {
    if e.is_closed() || e.as_db_error().is_none() {
        SourceError::Lost(e.to_string())
    } else {
        SourceError::Sql(describe(&e))
    }
}

/// A server error with its SQLSTATE, detail and hint.
pub fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => {
            let mut s = format!("{} (SQLSTATE {})", d.message(), d.code().code());
            if let Some(x) = d.detail() {
                s.push_str(&format!("; {x}"));
            }
            if let Some(x) = d.hint() {
                s.push_str(&format!("; hint: {x}"));
            }
            s
        }
        None => e.to_string(),
    }
}

/// The prefix of the logical messages the DDL capture emits.
pub const MESSAGE_PREFIX: &str = "lakeshift";

/// The SQL `lakeshift pg-setup` prints or runs: an event trigger at the end of every
/// DDL command (and one for dropped objects) that emits a transactional logical
/// message with the command's text, the search_path and the objects it touched, so
/// the DDL reaches the stream in its place among the rows. Event triggers need a
/// superuser to create.
pub fn setup_sql() -> String {
    format!(
        r#"CREATE SCHEMA IF NOT EXISTS lakeshift;

CREATE OR REPLACE FUNCTION lakeshift.emit_ddl() RETURNS event_trigger
LANGUAGE plpgsql AS $fn$
DECLARE
  objs jsonb := '[]'::jsonb;
  r record;
BEGIN
  FOR r IN SELECT * FROM pg_event_trigger_ddl_commands() LOOP
    objs := objs || jsonb_build_object('tag', r.command_tag, 'type', r.object_type,
      'schema', r.schema_name, 'identity', r.object_identity);
  END LOOP;
  PERFORM pg_logical_emit_message(true, '{MESSAGE_PREFIX}', jsonb_build_object(
    'kind', 'ddl', 'tag', tg_tag, 'query', current_query(),
    'search_path', current_setting('search_path'), 'schema', current_schema(),
    'objects', objs)::text);
END
$fn$;

CREATE OR REPLACE FUNCTION lakeshift.emit_drop() RETURNS event_trigger
LANGUAGE plpgsql AS $fn$
DECLARE
  objs jsonb := '[]'::jsonb;
  r record;
BEGIN
  FOR r IN SELECT * FROM pg_event_trigger_dropped_objects() WHERE object_type = 'table' LOOP
    objs := objs || jsonb_build_object('type', r.object_type, 'schema', r.schema_name,
      'name', r.object_name, 'identity', r.object_identity);
  END LOOP;
  IF jsonb_array_length(objs) > 0 THEN
    PERFORM pg_logical_emit_message(true, '{MESSAGE_PREFIX}', jsonb_build_object(
      'kind', 'drop', 'tag', tg_tag, 'query', current_query(), 'objects', objs)::text);
  END IF;
END
$fn$;

DROP EVENT TRIGGER IF EXISTS lakeshift_ddl;
CREATE EVENT TRIGGER lakeshift_ddl ON ddl_command_end EXECUTE FUNCTION lakeshift.emit_ddl();
DROP EVENT TRIGGER IF EXISTS lakeshift_drop;
CREATE EVENT TRIGGER lakeshift_drop ON sql_drop EXECUTE FUNCTION lakeshift.emit_drop();
"#
    )
}

/// Whether the DDL capture is installed.
pub async fn capture_installed(c: &tokio_postgres::Client) -> Result<bool, SourceError> {
    let r = c
        .query_one(
            "SELECT count(*) FROM pg_event_trigger WHERE evtname = 'lakeshift_ddl' AND evtenabled <> 'D'",
            &[],
        )
        .await
        .map_err(sql)?;
    Ok(r.get::<_, i64>(0) > 0)
}

/// What must hold before a slot is made or used; each failure says how to fix it.
pub async fn preflight(
    c: &tokio_postgres::Client,
    user: &str,
    slot: &str,
) -> Result<(), SourceError> {
    let setting = |name: &'static str| async move {
        c.query_one("SELECT current_setting($1)", &[&name])
            .await
            .map(|r| r.get::<_, String>(0))
            .map_err(sql)
    };
    let level = setting("wal_level").await?;
    if level != "logical" {
        return Err(SourceError::Preflight(format!(
            "wal_level is `{level}`; logical replication needs `logical`: set `wal_level = logical` in postgresql.conf (ALTER SYSTEM SET wal_level = logical) and restart the server"
        )));
    }
    let r = c
        .query_one(
            "SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user",
            &[],
        )
        .await
        .map_err(sql)?;
    if !r.get::<_, bool>(0) {
        return Err(SourceError::Preflight(format!(
            "role {user} may not replicate: ALTER ROLE {user} WITH REPLICATION (and GRANT SELECT on the captured tables)"
        )));
    }
    let exists = c
        .query_one(
            "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1",
            &[&slot],
        )
        .await
        .map_err(sql)?
        .get::<_, i64>(0)
        > 0;
    if !exists {
        let r = c
            .query_one(
                "SELECT current_setting('max_replication_slots')::int - (SELECT count(*) FROM pg_replication_slots)::int, \
                        current_setting('max_wal_senders')::int - (SELECT count(*) FROM pg_stat_replication)::int",
                &[],
            )
            .await
            .map_err(sql)?;
        let (slots, senders): (i32, i32) = (r.get(0), r.get(1));
        if slots < 1 {
            return Err(SourceError::Preflight(
                "every replication slot is in use (max_replication_slots): drop an unused slot (SELECT pg_drop_replication_slot(name)) or raise max_replication_slots and restart".into(),
            ));
        }
        if senders < 1 {
            return Err(SourceError::Preflight(
                "every WAL sender is in use (max_wal_senders): raise max_wal_senders and restart the server".into(),
            ));
        }
    }
    Ok(())
}
