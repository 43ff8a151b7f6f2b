//! Diagnostics: every loss, skip and failure is reported, never silent.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// A statement (or part of one) has no meaning for the target and was not emitted.
    Skipped,
    /// Emitted, but with a loss of meaning that the message names.
    Warning,
    /// Could not be translated.
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Skipped => "skipped",
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

/// One diagnostic, without a position: the caller knows which statement it is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Diagnostic {
    pub severity: Severity,
    pub message: String,
}

impl Diagnostic {
    pub fn warning(message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            message: message.into(),
        }
    }
    pub fn skipped(message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Skipped,
            message: message.into(),
        }
    }
    pub fn error(message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
        }
    }
}

/// A sink for diagnostics that emitters and parsers push into.
#[derive(Debug, Default, Clone)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    pub fn warn(&mut self, message: impl Into<String>) {
        self.0.push(Diagnostic::warning(message));
    }
    pub fn skip(&mut self, message: impl Into<String>) {
        self.0.push(Diagnostic::skipped(message));
    }
    pub fn take(&mut self) -> Vec<Diagnostic> {
        std::mem::take(&mut self.0)
    }
}
