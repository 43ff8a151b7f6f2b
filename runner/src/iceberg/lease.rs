//! One writer per job across hosts: a lease row per job in the catalog database
//! (`lakeshift_job_owner`), claimed at start and renewed while the job runs, and a
//! fencing check in every metadata write of the catalog.
//!
//! A run claims the job's row when it is free, when its lease has run out, or when
//! the row is this very state folder's on this host (the local lock on the folder
//! proves that run is gone). Otherwise the new run is refused, naming the holder.
//! A run that lost its row (it was paused past its lease and another took over) is
//! fenced: its metadata swap carries `EXISTS (row with my run id)` in the same SQL
//! statement, so it cannot land, and the job stops.

use super::catalog::Catalog;
use super::{Error, Result};
use sqlx::any::AnyArguments;
use sqlx::query::Query;
use sqlx::{Any, Row};
use std::time::Duration;

/// Who runs a job: a run id (new for every process), where it runs, and its state
/// folder.
#[derive(Debug, Clone)]
pub struct Owner {
    pub job: String,
    pub run: String,
    pub host: String,
    pub pid: u32,
    pub state: String,
}

impl Owner {
    /// This process, for `job` with its state folder.
    pub fn this_process(job: &str, state: &std::path::Path) -> Owner {
        let host = this_host();
        let state = std::fs::canonicalize(state).unwrap_or_else(|_| state.to_path_buf());
        Owner {
            job: job.to_owned(),
            run: uuid::Uuid::new_v4().to_string(),
            host,
            pid: std::process::id(),
            state: state.display().to_string(),
        }
    }
}

/// Who holds (or last held) a job's lease.
#[derive(Debug, Clone)]
pub struct Holder {
    /// Process, host, state folder and lease, for messages.
    pub text: String,
    /// The last checkpoint it recorded.
    pub checkpoint: u64,
    /// The lease has not run out nor been given up.
    pub live: bool,
    pub host: String,
    pub state: String,
}

/// This host's name (a lease names the host its process runs on).
fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown-host".into())
}

/// Whether process `pid` of this host is a lakeshift process (its command line names
/// lakeshift); true where that cannot be read (not Linux).
fn lakeshift_process(pid: i64) -> bool {
    if !std::path::Path::new("/proc/self").exists() {
        return true;
    }
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| String::from_utf8_lossy(&c).contains("lakeshift"))
}

fn now_ms() -> i64 {
    crate::calendar::now_ms()
}

impl Catalog {
    /// Whether this catalog's run holds a job (a claimed lease): no other process
    /// writes the job's tables.
    pub fn holds_job(&self) -> bool {
        self.owner.is_some()
    }

    /// `AND EXISTS (...)`: the owner's fencing condition for a metadata write (empty
    /// when no run claimed the job: `apply`, `status`, tests).
    pub(super) fn owned_sql(&self) -> &'static str {
        if self.owner.is_some() {
            " AND EXISTS (SELECT 1 FROM lakeshift_job_owner o WHERE o.catalog_name = ? AND o.job = ? AND o.run_id = ?)"
        } else {
            ""
        }
    }

    pub(super) fn bind_owner<'q>(
        &'q self,
        q: Query<'q, Any, AnyArguments<'q>>,
    ) -> Query<'q, Any, AnyArguments<'q>> {
        match &self.owner {
            Some((job, run)) => q.bind(&self.name).bind(job).bind(run),
            None => q,
        }
    }

    /// After a write that changed nothing: fenced, if this run no longer holds the job.
    pub(super) async fn check_owner(&self) -> Result<()> {
        let Some((job, run)) = &self.owner else {
            return Ok(());
        };
        let row = sqlx::query(&self.q(
            "SELECT run_id, host, pid, state FROM lakeshift_job_owner WHERE catalog_name = ? AND job = ?",
        ))
        .bind(&self.name)
        .bind(job)
        .fetch_optional(&self.pool)
        .await?;
        match row {
            Some(r) if r.try_get::<String, _>(0)? == *run => Ok(()),
            Some(r) => Err(Error::Fenced(format!(
                "job `{job}` was taken over by process {} on {} (state {}) after this run's lease ran out; this run stops without writing",
                r.try_get::<i64, _>(2)?,
                r.try_get::<String, _>(1)?,
                r.try_get::<String, _>(3)?
            ))),
            None => Err(Error::Fenced(format!(
                "job `{job}` has no owner row any more; this run stops without writing"
            ))),
        }
    }

    async fn ensure_owner_table(&self) -> Result<()> {
        super::catalog::create_table(
            &self.pool,
            "CREATE TABLE IF NOT EXISTS lakeshift_job_owner (
                catalog_name VARCHAR(255) NOT NULL,
                job VARCHAR(255) NOT NULL,
                run_id VARCHAR(64) NOT NULL,
                host VARCHAR(255) NOT NULL,
                pid BIGINT NOT NULL,
                state VARCHAR(1000) NOT NULL,
                lease_until_ms BIGINT NOT NULL,
                checkpoint BIGINT NOT NULL DEFAULT 0,
                PRIMARY KEY (catalog_name, job))",
        )
        .await
    }

    /// Claim the job for `o` for `lease`: free, expired, or this state folder's row
    /// (its run is gone: this process holds the folder's lock). Refused otherwise,
    /// naming the holder. From then on every metadata write is fenced by it.
    /// Returns the last checkpoint the job recorded as committed (0: none), and the
    /// state folder (`host:path`) of the run before when it was another one.
    pub async fn claim(&mut self, o: &Owner, lease: Duration) -> Result<(u64, Option<String>)> {
        self.claim_if(o, lease, |_, _| Ok(())).await
    }

    /// [`claim`](Self::claim), once `accept` agrees with what the row says (the
    /// job's last committed checkpoint, the folder of the run before when another):
    /// a run `accept` refuses changes nothing, so the row still names the folder
    /// that really ran last and its lease. Its refusal is `Error::Invalid`.
    pub async fn claim_if(
        &mut self,
        o: &Owner,
        lease: Duration,
        accept: impl FnOnce(u64, Option<&str>) -> std::result::Result<(), String>,
    ) -> Result<(u64, Option<String>)> {
        self.ensure_owner_table().await?;
        let until = now_ms() + lease.as_millis() as i64;
        let row = sqlx::query(&self.q(
            "SELECT run_id, host, pid, state, lease_until_ms, checkpoint FROM lakeshift_job_owner WHERE catalog_name = ? AND job = ?",
        ))
        .bind(&self.name)
        .bind(&o.job)
        .fetch_optional(&self.pool)
        .await?;
        let Some(r) = row else {
            accept(0, None).map_err(Error::Invalid)?;
            let inserted = sqlx::query(&self.q(
                "INSERT INTO lakeshift_job_owner (catalog_name, job, run_id, host, pid, state, lease_until_ms)
                 VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (catalog_name, job) DO NOTHING",
            ))
            .bind(&self.name)
            .bind(&o.job)
            .bind(&o.run)
            .bind(&o.host)
            .bind(i64::from(o.pid))
            .bind(&o.state)
            .bind(until)
            .execute(&self.pool)
            .await?
            .rows_affected()
                == 1;
            if !inserted {
                return Err(claimed_meanwhile(&o.job));
            }
            self.owner = Some((o.job.clone(), o.run.clone()));
            return Ok((0, None));
        };
        let (run, host, pid, state, lease_until): (String, String, i64, String, i64) = (
            r.try_get(0)?,
            r.try_get(1)?,
            r.try_get(2)?,
            r.try_get(3)?,
            r.try_get(4)?,
        );
        let checkpoint = r.try_get::<i64, _>(5)?.max(0) as u64;
        let mine = host == o.host && state == o.state;
        let other = (!mine).then(|| format!("{host}:{state}"));
        let left = lease_until - now_ms();
        if !mine && left > 0 {
            return Err(Error::Fenced(format!(
                "job `{}` is running as process {pid} on {host} (state folder {state}); its lease ends in {:.1} s. Stop it first, or wait until its lease runs out if it is gone",
                o.job,
                left as f64 / 1000.0
            )));
        }
        accept(checkpoint, other.as_deref()).map_err(Error::Invalid)?;
        if !mine && lease_until <= 0 {
            // (A clean stop gives its lease back.)
            tracing::info!(
                "job `{}`: taking over from process {pid} on {host} (state folder {state}), which stopped cleanly",
                o.job
            );
        } else if !mine {
            tracing::warn!(
                "job `{}`: taking over from process {pid} on {host} (state folder {state}), whose lease ran out {:.1} s ago",
                o.job,
                -left as f64 / 1000.0
            );
        }
        let taken = sqlx::query(&self.q(
            "UPDATE lakeshift_job_owner SET run_id = ?, host = ?, pid = ?, state = ?, lease_until_ms = ?
              WHERE catalog_name = ? AND job = ? AND run_id = ?",
        ))
        .bind(&o.run)
        .bind(&o.host)
        .bind(i64::from(o.pid))
        .bind(&o.state)
        .bind(until)
        .bind(&self.name)
        .bind(&o.job)
        .bind(&run)
        .execute(&self.pool)
        .await?
        .rows_affected();
        if taken != 1 {
            return Err(claimed_meanwhile(&o.job));
        }
        self.owner = Some((o.job.clone(), o.run.clone()));
        Ok((checkpoint, other))
    }

    /// Record that checkpoint `n` of the job is committed (a state folder older than
    /// this is refused at the next claim).
    pub async fn record_checkpoint(&self, n: u64) -> Result<()> {
        self.set_on_own_row("checkpoint", n as i64).await
    }

    /// Set a column of this run's row (a fixed column name); fenced if the row is no
    /// longer this run's.
    async fn set_on_own_row(&self, column: &'static str, value: i64) -> Result<()> {
        let Some((job, run)) = &self.owner else {
            return Ok(());
        };
        let moved = sqlx::query(&self.q(&format!(
            "UPDATE lakeshift_job_owner SET {column} = ? WHERE catalog_name = ? AND job = ? AND run_id = ?"
        )))
        .bind(value)
        .bind(&self.name)
        .bind(job)
        .bind(run)
        .execute(&self.pool)
        .await?
        .rows_affected();
        if moved == 1 {
            Ok(())
        } else {
            self.check_owner().await
        }
    }

    /// Who holds `job`, for `lakeshift status`: "process P on H (state folder S), lease
    /// ends in N s" (or "ran out", "given up"), and the last committed checkpoint.
    pub async fn holder(&self, job: &str) -> Result<Option<Holder>> {
        let Ok(row) = sqlx::query(&self.q(
            "SELECT host, pid, state, lease_until_ms, checkpoint FROM lakeshift_job_owner WHERE catalog_name = ? AND job = ?",
        ))
        .bind(&self.name)
        .bind(job)
        .fetch_optional(&self.pool)
        .await
        else {
            return Ok(None); // no lease table: no Iceberg job ran with a lease here
        };
        let Some(r) = row else {
            return Ok(None);
        };
        let (host, pid, state, until, ck): (String, i64, String, i64, i64) = (
            r.try_get(0)?,
            r.try_get(1)?,
            r.try_get(2)?,
            r.try_get(3)?,
            r.try_get(4)?,
        );
        let left = until - now_ms();
        // (A process of this host that is gone: an error ended it, or a SIGKILL.)
        let gone = left > 0 && until != 0 && host == this_host() && !lakeshift_process(pid);
        let lease = if gone {
            format!(
                "exited (its lease would end in {:.1} s; a run from that state folder takes over at once, another waits for the lease)",
                left as f64 / 1000.0
            )
        } else if until == 0 {
            "given up (clean stop)".to_owned()
        } else if left > 0 {
            format!("lease ends in {:.1} s", left as f64 / 1000.0)
        } else {
            format!("lease ran out {:.1} s ago", -left as f64 / 1000.0)
        };
        Ok(Some(Holder {
            text: format!("process {pid} on {host} (state folder {state}), {lease}"),
            checkpoint: ck.max(0) as u64,
            live: left > 0 && until != 0,
            host,
            state,
        }))
    }

    /// Renew the lease. Err(Fenced): another run holds the job now.
    pub async fn renew(&self, lease: Duration) -> Result<()> {
        let until = now_ms() + lease.as_millis() as i64;
        self.set_on_own_row("lease_until_ms", until).await
    }

    /// Remove `job`'s lease row (`lakeshift drop-job`): whether there was one.
    pub async fn forget_job(&self, job: &str) -> Result<bool> {
        let Ok(r) = sqlx::query(
            &self.q("DELETE FROM lakeshift_job_owner WHERE catalog_name = ? AND job = ?"),
        )
        .bind(&self.name)
        .bind(job)
        .execute(&self.pool)
        .await
        else {
            return Ok(false); // no lease table
        };
        Ok(r.rows_affected() > 0)
    }

    /// Give the job up (a clean stop): the next run on any host may claim it at once.
    pub async fn release(&self) -> Result<()> {
        let Some((job, run)) = &self.owner else {
            return Ok(());
        };
        sqlx::query(&self.q(
            "UPDATE lakeshift_job_owner SET lease_until_ms = 0 WHERE catalog_name = ? AND job = ? AND run_id = ?",
        ))
        .bind(&self.name)
        .bind(job)
        .bind(run)
        .execute(&self.pool)
        .await?;
        Ok(())
    }
}

/// Another run took the job's row between this run's read and its write.
fn claimed_meanwhile(job: &str) -> Error {
    Error::Fenced(format!(
        "job `{job}`: another process claimed it at the same moment; this run stops"
    ))
}
