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
    /// The catalog database cannot be reached (a server down or starting).
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
            _ => false,
        }
    }
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
