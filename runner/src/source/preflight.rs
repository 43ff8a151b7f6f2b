//! Preflight: what the source server must provide, checked before anything is read,
//! each failure with how to fix it.

use super::config::Source;
use super::SourceError;
use mysql_async::prelude::Queryable;

/// What the server is.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    pub version: String,
    pub mariadb: bool,
    pub gtid_binlog_pos: String,
    /// The captured tables, and the `tables` patterns that match none.
    pub captured: usize,
    pub unmatched: Vec<String>,
    /// Not in the way of a run, but worth fixing (`lakeshift check` shows them).
    pub warnings: Vec<String>,
}

/// Listings of the tables an account can see before a new job that captures none of
/// them is refused (a rename hides its table from one for a moment).
const LISTINGS: usize = 3;

/// `replica_name`: the host name this job registers with ([`super::run::replica_name`]).
pub async fn check(
    src: &Source,
    replica_name: &str,
    resuming: bool,
) -> Result<ServerInfo, SourceError> {
    let (info, problems) = problems(src, replica_name, resuming).await?;
    if !problems.is_empty() {
        return Err(SourceError::Preflight(problems.join("; ")));
    }
    Ok(info)
}

/// What the server is, and every problem found (each with its fix); an error when
/// the server cannot be asked.
pub async fn problems(
    src: &Source,
    replica_name: &str,
    resuming: bool,
) -> Result<(ServerInfo, Vec<String>), SourceError> {
    let at = src.at();
    // A name that does not resolve is a mistake in the job file, not an outage.
    if tokio::net::lookup_host(&at).await.is_err() {
        return Err(SourceError::Refused(format!(
            "{at}: the host name does not resolve (source.hostname)"
        )));
    }
    let mut conn = mysql_async::Conn::new(src.opts())
        .await
        .map_err(|e| SourceError::connect(&at, e))?;
    let var = |name: &str| format!("SELECT @@global.{name}");
    let version: String = conn
        .query_first("SELECT VERSION()")
        .await
        .map_err(SourceError::sql)?
        .unwrap_or_default();
    let mariadb = version.to_ascii_lowercase().contains("mariadb");
    learn_charsets(&mut conn).await?;
    let mut problems = Vec::new();
    let log_bin: Option<String> = conn
        .query_first(var("log_bin"))
        .await
        .map_err(SourceError::sql)?;
    if !matches!(log_bin.as_deref(), Some("1" | "ON")) {
        problems
            .push("binary logging is off: start the server with --log-bin (log_bin=ON)".to_owned());
    }
    let format: Option<String> = conn
        .query_first(var("binlog_format"))
        .await
        .map_err(SourceError::sql)?;
    if !format
        .as_deref()
        .is_some_and(|f| f.eq_ignore_ascii_case("ROW"))
    {
        problems.push(format!(
            "binlog_format is {}: set binlog_format=ROW (SET GLOBAL binlog_format='ROW', and in the server's config)",
            format.unwrap_or_default()
        ));
    }
    let image: Option<String> = conn
        .query_first(var("binlog_row_image"))
        .await
        .map_err(SourceError::sql)?;
    if !image
        .as_deref()
        .is_some_and(|f| f.eq_ignore_ascii_case("FULL"))
    {
        problems.push(format!(
            "binlog_row_image is {}: set binlog_row_image=FULL so updates and deletes carry whole rows",
            image.unwrap_or_default()
        ));
    }
    if mariadb {
        let compress: Option<String> = conn
            .query_first(var("log_bin_compress"))
            .await
            .unwrap_or(None);
        if matches!(compress.as_deref(), Some("1" | "ON")) {
            problems.push(
                "log_bin_compress is ON: compressed events are not supported; set it OFF".into(),
            );
        }
    }
    // Privileges: the replication ones and SELECT (for the snapshot).
    let grants: Vec<String> = conn.query("SHOW GRANTS").await.map_err(SourceError::sql)?;
    let all = grants.join("\n").to_ascii_uppercase();
    let has = |p: &str| all.contains("ALL PRIVILEGES") || all.contains(p);
    for (p, why) in [
        ("REPLICATION SLAVE", "to read the binlog"),
        ("SELECT", "to take the snapshot"),
    ] {
        let alt = if p == "REPLICATION SLAVE" {
            "REPLICATION REPLICA"
        } else {
            p
        };
        if !has(p) && !has(alt) {
            problems.push(format!(
                "user {} lacks {p} ({why}): GRANT {p} ON *.* TO '{}'",
                src.binlog().username,
                src.binlog().username
            ));
        }
    }
    if !has("REPLICATION CLIENT") && !has("BINLOG MONITOR") && !has("SUPER") {
        problems.push(format!(
            "user {} lacks REPLICATION CLIENT (BINLOG MONITOR on MariaDB) to read binlog positions: GRANT REPLICATION CLIENT ON *.* TO '{}'",
            src.binlog().username, src.binlog().username
        ));
    }
    let mut warnings = Vec::new();
    if mariadb && !has("RELOAD") {
        warnings.push(format!(
            "user {0} lacks RELOAD: the snapshot cannot block commits while its sessions start (BACKUP STAGE BLOCK_COMMIT) and reads its binlog point from binlog_snapshot_position, which a concurrent SHOW STATUS can misreport: GRANT RELOAD ON *.* TO '{0}'",
            src.binlog().username
        ));
    }
    if let Some(p) = server_id_problem(&mut conn, src.binlog().server_id, replica_name).await? {
        problems.push(p);
    }
    let gtid: Option<String> = if mariadb {
        conn.query_first(var("gtid_binlog_pos"))
            .await
            .map_err(SourceError::sql)?
    } else {
        None
    };
    // The table list must capture something this account can see: a typo, or an
    // account without SELECT, would otherwise follow nothing, forever. A table being
    // renamed is missing from the listing for a moment: a listing without a captured
    // table is read again before it counts.
    let mut visible: Vec<(String, String)> = Vec::new();
    for attempt in 0..LISTINGS {
        if attempt > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        visible = conn
            .query(
                "SELECT table_schema, table_name FROM information_schema.tables \
                 WHERE table_type IN ('BASE TABLE', 'SYSTEM VERSIONED') \
                 AND table_schema NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')",
            )
            .await
            .map_err(SourceError::sql)?;
        if resuming || visible.iter().any(|(d, t)| src.captures(d, t)) {
            break;
        }
    }
    let captured = match super::captured_count(src, &visible, &src.binlog().username, resuming) {
        Ok(n) => n,
        Err(e) => {
            problems.push(e);
            0
        }
    };
    let unmatched = match captured {
        0 => Vec::new(),
        _ => super::unmatched_patterns(src, &visible),
    };
    let _ = conn.disconnect().await;
    Ok((
        ServerInfo {
            version,
            mariadb,
            gtid_binlog_pos: gtid.unwrap_or_default(),
            captured,
            unmatched,
            warnings,
        },
        problems,
    ))
}

/// A server-id another reader of this server uses (a second reader with the same id
/// disconnects the first, on every connect), or the server's own. The list of
/// replicas needs REPLICATION MASTER ADMIN (MariaDB) or REPLICATION SLAVE (MySQL);
/// without it only the server's own id is checked.
async fn server_id_problem(
    conn: &mut mysql_async::Conn,
    id: u32,
    replica_name: &str,
) -> Result<Option<String>, SourceError> {
    let own: Option<u32> = conn
        .query_first("SELECT @@global.server_id")
        .await
        .map_err(SourceError::sql)?;
    if own == Some(id) {
        return Ok(Some(format!(
            "source.server-id {id} is the source server's own @@server_id: give the job an id that no server or replica of this topology uses"
        )));
    }
    let rows: Vec<mysql_async::Row> = match conn.query("SHOW SLAVE HOSTS").await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(
                "SHOW SLAVE HOSTS: {e}; the server-id is not checked against other readers"
            );
            return Ok(None);
        }
    };
    for r in rows {
        let sid: Option<u32> = r.get_opt("Server_id").and_then(|v| v.ok());
        let host: Option<String> = r.get_opt("Host").and_then(|v| v.ok());
        if sid == Some(id) && host.as_deref() != Some(replica_name) {
            let who = match host.as_deref() {
                Some(h) if h.starts_with("lakeshift") => format!("another lakeshift job ({h})"),
                Some("") | None => "another replica".to_owned(),
                Some(h) => format!("another replica ({h})"),
            };
            return Ok(Some(format!(
                "source.server-id {id} is in use: {who} reads this server's binlog with it, and a second reader with the same id disconnects the first; give this job its own source.server-id (SHOW SLAVE HOSTS lists the ids in use)"
            )));
        }
    }
    Ok(None)
}

/// The server's single-byte character sets (latin1, cp1251, koi8r, and those no
/// decoder library has: cp850, armscii8, geostd8, ...): each one's 256 characters, as
/// the server converts its bytes to UTF-8, so the binlog's text of such columns reads
/// as the snapshot's (the server's conversion) does.
async fn learn_charsets(conn: &mut mysql_async::Conn) -> Result<(), SourceError> {
    let single: Vec<String> = conn
        .query("SELECT character_set_name FROM information_schema.character_sets WHERE maxlen = 1 AND character_set_name <> 'binary'")
        .await
        .map_err(SourceError::sql)?;
    if single.is_empty() {
        return Ok(());
    }
    // (One query for them all: each set's 256 bytes converted, a column each.)
    let all: String = (0..=255u8).map(|b| format!("{b:02X}")).collect();
    let cols: Vec<String> = single
        .iter()
        .map(|cs| format!("CONVERT(CONVERT(UNHEX('{all}') USING {cs}) USING utf8mb4)"))
        .collect();
    let row: Option<mysql_async::Row> = conn
        .query_first(format!("SELECT {}", cols.join(", ")))
        .await
        .map_err(SourceError::sql)?;
    let Some(row) = row else { return Ok(()) };
    for (i, name) in single.iter().enumerate() {
        let text: Option<String> = row.get(i);
        let chars: Vec<char> = text.unwrap_or_default().chars().collect();
        // (A set whose bytes do not each convert to one character stays unread:
        // its columns stop the job, naming it.)
        if let Ok(chars) = <[char; 256]>::try_from(chars) {
            super::decode::learn_charset(name, chars);
        }
    }
    Ok(())
}
