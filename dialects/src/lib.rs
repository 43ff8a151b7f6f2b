//! Parsers (text -> IR) and emitters (IR -> text) for MySQL/MariaDB, PostgreSQL and
//! Oracle, and the stateful translator that joins them.
//!
//! Parsing: scripts are split into positioned statements (`grammar::split`);
//! CREATE TABLE and ALTER TABLE are read by the `grammar` crate's nom grammar (sqlparser
//! 0.64 rejects too many real forms of them, see ARCHITECTURE.md); every other
//! statement is read by sqlparser with the source's dialect. Both land in the same
//! lowering into IR change requests ([`lower`]).
//!
//! Emitting: one [`emit::Emitter`] per target; dialect differences live in the
//! implementations, shared shapes in `emit`'s helpers.

pub mod check;
pub mod defs;
pub mod emit;
pub mod fk_names;
pub mod iceberg;
pub mod jsonb;
pub mod lower;
pub mod parse;
pub mod translate;

use ddl_core::Fold;
use grammar::Flavor;

/// A SQL dialect lakeshift reads or writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dialect {
    MySql,
    Postgres,
    Oracle,
}

impl Dialect {
    pub const ALL: [Dialect; 3] = [Dialect::MySql, Dialect::Postgres, Dialect::Oracle];

    pub fn name(self) -> &'static str {
        match self {
            Dialect::MySql => "mysql",
            Dialect::Postgres => "postgres",
            Dialect::Oracle => "oracle",
        }
    }

    pub fn flavor(self) -> Flavor {
        match self {
            Dialect::MySql => Flavor::MySql,
            Dialect::Postgres => Flavor::Postgres,
            Dialect::Oracle => Flavor::Oracle,
        }
    }

    /// What the database does to unquoted names.
    pub fn fold(self) -> Fold {
        match self {
            Dialect::MySql => Fold::Preserve,
            Dialect::Postgres => Fold::Lower,
            Dialect::Oracle => Fold::Upper,
        }
    }

    /// The catalog's name rules for this source.
    pub fn name_rules(self) -> ddl_core::NameRules {
        ddl_core::NameRules {
            columns_case_insensitive: self == Dialect::MySql,
            tables_case_insensitive: false,
        }
    }

    /// Longest identifier in bytes.
    pub fn max_ident_bytes(self) -> usize {
        match self {
            Dialect::MySql => 64,
            Dialect::Postgres => 63,
            // Oracle 12.2 and later; 30 before.
            Dialect::Oracle => 128,
        }
    }
}

impl std::fmt::Display for Dialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
