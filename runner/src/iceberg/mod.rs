//! The Iceberg target: a SQL catalog in the layout of iceberg-catalog-sql and the JDBC
//! catalog ([`catalog`]), a commit layer that builds metadata updates and swaps the
//! metadata location atomically ([`commit`]), conversions between lakeshift's planned
//! schemas and the iceberg crate's ([`convert`]), and file writers ([`files`]).
//!
//! The iceberg crate (0.10.1) gives the pieces: `TableMetadataBuilder`,
//! `TableUpdate::apply`, `TableRequirement::check`, the manifest and manifest-list
//! writers and the Parquet writers. Its own transaction API only adds data files and
//! adds or deletes columns, and its `TableCommit` cannot be built outside the crate,
//! so lakeshift commits through its own layer.

pub mod catalog;
pub mod commit;
pub mod convert;
pub mod files;
pub mod lease;
pub mod localfs;
pub mod locate;
mod locmap;
pub mod maintain;
pub mod plan;
pub mod read;
mod rules;
pub mod stall;

pub use catalog::{Catalog, CatalogConfig, LoadedTable};
pub use commit::{Committer, SnapshotChange};

/// Errors of the Iceberg target.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("catalog database: {0}")]
    Sql(#[from] sqlx::Error),
    #[error("iceberg: {0}")]
    Iceberg(#[from] iceberg::Error),
    #[error("table {0} does not exist in the catalog")]
    NoSuchTable(String),
    #[error("table {0} already exists in the catalog")]
    TableExists(String),
    /// A requirement of the commit does not hold on the table as it is now: another
    /// writer changed what this commit was planned against.
    #[error("table {table}: {reason}; the commit was not applied")]
    Stale { table: String, reason: String },
    /// A row delta whose base changed under it: rebasing it could resurrect or lose rows.
    #[error("table {table}: {reason}; the row delta was not applied (rebasing it blindly could lose or resurrect rows)")]
    BaseMoved { table: String, reason: String },
    #[error("table {table}: the commit lost the race for the metadata location {attempts} times in a row; giving up")]
    Contention { table: String, attempts: u32 },
    /// The catalog's reply to a compare-and-swap was lost (injected in tests).
    #[error("table {0}: the reply to the metadata swap was lost")]
    ReplyLost(String),
    /// Another run of the job holds it (its lease row in the catalog).
    #[error("{0}")]
    Fenced(String),
    #[error("{0}")]
    Invalid(String),
    /// The catalog database or the object store cannot be reached (a server down or
    /// starting, a network fault): asking again later can succeed.
    #[error("{0}")]
    Unreachable(String),
}

impl Error {
    /// The catalog database's connection failed or its server ended it (a restart,
    /// a network fault): the same work can succeed on a new connection.
    pub fn connection_lost(&self) -> bool {
        match self {
            Error::Sql(e) => sql_connection_lost(e),
            Error::Unreachable(_) => true,
            Error::Iceberg(e) => unreachable_cause(e),
            _ => false,
        }
    }

    /// `context: e` as an error of the target: [`Error::Unreachable`] when `e` or
    /// one of its causes is the object store or the catalog database failing to
    /// answer ([`unreachable_cause`]), [`Error::Invalid`] otherwise.
    pub fn caused(context: impl std::fmt::Display, e: &(dyn std::error::Error + 'static)) -> Self {
        let message = format!("{context}: {e}");
        if unreachable_cause(e) {
            Error::Unreachable(message)
        } else {
            Error::Invalid(message)
        }
    }
}

/// Whether `e`, or an error it was caused by, is the object store or the catalog
/// database failing to answer: a connection refused or reset, a timeout, a 5xx or a
/// rate limit (opendal's temporary errors, and persistent ones: the same after its own
/// retries), or a lost catalog connection. Asking again later can succeed; a refused
/// permission, a missing object or a malformed request (opendal's permanent errors)
/// cannot.
pub fn unreachable_cause(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(x) = cur {
        if let Some(o) = x.downcast_ref::<opendal::Error>() {
            return o.is_temporary() || o.is_persistent();
        }
        if let Some(s) = x.downcast_ref::<sqlx::Error>() {
            return sql_connection_lost(s);
        }
        if let Some(Error::Unreachable(_)) = x.downcast_ref::<Error>() {
            return true;
        }
        cur = x.source();
    }
    false
}

/// Whether a sqlx error is the connection's, not the statement's: I/O, a pool that
/// cannot connect, or a server ending the session (SQLSTATE class 08, connection
/// exception; 57P01-57P03, a shutdown, crash or start-up of the server).
pub fn sql_connection_lost(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolClosed
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(d) => d
            .code()
            .is_some_and(|c| c.starts_with("08") || c.starts_with("57P")),
        _ => false,
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// An object store error as the iceberg crate hands it over: opendal's error as
    /// the source of an iceberg error.
    fn store(e: opendal::Error) -> Error {
        Error::Iceberg(
            iceberg::Error::new(
                iceberg::ErrorKind::Unexpected,
                "Failure in doing io operation",
            )
            .with_source(e),
        )
    }

    #[test]
    fn a_store_that_does_not_answer_is_transient_and_a_refusal_is_not() {
        let refused = || opendal::Error::new(opendal::ErrorKind::Unexpected, "send http request");
        // A connection refused, a 5xx: temporary; the same after opendal's retries:
        // persistent. Both can succeed later.
        assert!(store(refused().set_temporary()).connection_lost());
        assert!(store(refused().set_persistent()).connection_lost());
        let slow = opendal::Error::new(opendal::ErrorKind::RateLimited, "SlowDown");
        assert!(store(slow.set_temporary()).connection_lost());
        // A refused permission or a missing object: permanent.
        let denied = opendal::Error::new(opendal::ErrorKind::PermissionDenied, "403");
        assert!(!store(denied).connection_lost());
        // Through a Parquet reader's external error and a message added on top.
        let inner: Box<dyn std::error::Error + Send + Sync> =
            Box::new(store(refused().set_persistent()));
        let pq = parquet::errors::ParquetError::External(inner);
        let e = Error::caused("reading part-1.parquet", &pq);
        assert!(matches!(e, Error::Unreachable(_)), "{e:?}");
        assert!(e.to_string().starts_with("reading part-1.parquet: "), "{e}");
        let plain = Error::caused("x", &parquet::errors::ParquetError::General("bad".into()));
        assert!(matches!(plain, Error::Invalid(_)), "{plain:?}");
        // An iceberg error of its own (no store behind it): not transient.
        let own = Error::Iceberg(iceberg::Error::new(iceberg::ErrorKind::DataInvalid, "bad"));
        assert!(!own.connection_lost());
    }
}
