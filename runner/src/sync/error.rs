//! The sync error: a message for people and a kind for the code, set where the
//! error happens (from a server's error code, a failed compare-and-swap), never
//! guessed later from the message's words.

use crate::source::SourceError;

/// What the pipeline (or a sink) can do about an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A connection was lost: reading again from the last checkpoint can fix it.
    Transient,
    /// Another process moved the job's state (or took its Kafka partitions over):
    /// this one must stop (a Kafka group member starts again from the target's
    /// offsets, `lakeshift sync`).
    Fenced,
    /// A unique index of the target refused a row of the checkpoint (values moved
    /// between rows inside it): applying it again with changed keys deleted first
    /// can fix it.
    UniqueViolation,
    /// The target refused a value of a row (a data exception, a NOT NULL or CHECK of
    /// its own): the row-error policy decides (`skip` and `park` take the rows out).
    BadValue,
    /// The source refused the job or cannot serve it as it is (a preflight check,
    /// refused credentials, a purged or cut-off binlog, a statement-logged change):
    /// the job stops, and running it again gives the same error until what the
    /// message names is fixed.
    NeedsFix,
    /// Anything else: the job stops with the message.
    Definite,
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct SyncError {
    pub kind: ErrorKind,
    pub message: String,
}

impl SyncError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        SyncError {
            kind,
            message: message.into(),
        }
    }

    pub fn fenced(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Fenced, message)
    }

    /// The same error with the statement it refers to after its message.
    pub fn with_statement(self, sql: &str) -> Self {
        SyncError {
            kind: self.kind,
            message: format!("{}\n  statement: {sql}", self.message),
        }
    }

    /// `context: e` for an error of the object store, the catalog or a file read
    /// through them: [`ErrorKind::Transient`] when the store or the catalog failed to
    /// answer ([`crate::iceberg::unreachable_cause`]), [`ErrorKind::Definite`]
    /// otherwise.
    pub fn caused(context: impl std::fmt::Display, e: &(dyn std::error::Error + 'static)) -> Self {
        crate::iceberg::Error::caused(context, e).into()
    }

    /// The same error with `context` before its message.
    pub fn context(self, context: impl std::fmt::Display) -> Self {
        SyncError {
            kind: self.kind,
            message: format!("{context}: {}", self.message),
        }
    }
}

impl From<String> for SyncError {
    fn from(message: String) -> Self {
        SyncError::new(ErrorKind::Definite, message)
    }
}

impl From<&str> for SyncError {
    fn from(message: &str) -> Self {
        SyncError::new(ErrorKind::Definite, message)
    }
}

impl From<SourceError> for SyncError {
    fn from(e: SourceError) -> Self {
        let kind = if e.transient() {
            ErrorKind::Transient
        } else if matches!(
            e,
            SourceError::Preflight(_)
                | SourceError::Refused(_)
                | SourceError::Purged { .. }
                | SourceError::CutOff { .. }
                | SourceError::StatementLogged { .. }
        ) {
            ErrorKind::NeedsFix
        } else {
            ErrorKind::Definite
        };
        SyncError::new(kind, e.to_string())
    }
}

impl From<crate::source::DecodeError> for SyncError {
    fn from(e: crate::source::DecodeError) -> Self {
        SyncError::new(ErrorKind::Definite, e.0)
    }
}

impl From<crate::iceberg::Error> for SyncError {
    fn from(e: crate::iceberg::Error) -> Self {
        use crate::iceberg::Error as E;
        let kind = match &e {
            // Another writer moved the table this commit was planned against.
            E::Stale { .. } => ErrorKind::Fenced,
            // The catalog's server restarted (or the network failed): the job
            // starts again from the last checkpoint the catalog holds.
            e if e.connection_lost() => ErrorKind::Transient,
            _ => ErrorKind::Definite,
        };
        SyncError::new(kind, e.to_string())
    }
}

impl From<iceberg::Error> for SyncError {
    fn from(e: iceberg::Error) -> Self {
        crate::iceberg::Error::from(e).into()
    }
}

impl From<super::rdb::target::TargetError> for SyncError {
    fn from(e: super::rdb::target::TargetError) -> Self {
        let kind = if e.connection {
            ErrorKind::Transient
        } else if e.unique_violation() {
            ErrorKind::UniqueViolation
        } else if e.bad_value() {
            ErrorKind::BadValue
        } else {
            ErrorKind::Definite
        };
        SyncError::new(kind, e.message)
    }
}

pub type Result<T, E = SyncError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_come_from_where_the_error_happened() {
        let lost = SourceError::Connect("refused".into());
        assert_eq!(SyncError::from(lost).kind, ErrorKind::Transient);
        let bad = SourceError::Decode("row 3".into());
        assert_eq!(SyncError::from(bad).kind, ErrorKind::Definite);
        let refused = SourceError::Preflight("wal_level is `replica`".into());
        assert_eq!(SyncError::from(refused).kind, ErrorKind::NeedsFix);
        let dup = super::super::rdb::target::TargetError {
            message: "duplicate key value violates unique constraint".into(),
            connection: false,
            code: Some("23505".into()),
        };
        assert_eq!(
            SyncError::from(dup.clone()).kind,
            ErrorKind::UniqueViolation
        );
        // The words alone do not make the kind: a code does.
        let words = super::super::rdb::target::TargetError { code: None, ..dup };
        assert_eq!(SyncError::from(words).kind, ErrorKind::Definite);
        let e = SyncError::fenced("moved").context("checkpoint 4");
        assert_eq!(
            (e.kind, e.message.as_str()),
            (ErrorKind::Fenced, "checkpoint 4: moved")
        );
    }
}
