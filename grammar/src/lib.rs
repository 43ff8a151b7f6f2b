//! nom grammars for what sqlparser does not parse.
//!
//! - [`types`]: column type strings of MySQL, PostgreSQL and Oracle (information_schema
//!   COLUMN_TYPE, Debezium typeName, type names inside DDL) into the IR's `DataType`.
//! - [`ddl`]: CREATE TABLE and ALTER TABLE in the forms sqlparser rejects, into
//!   [`ast`] drafts that the dialects crate lowers into the IR.
//! - [`split`]: scripts and dumps into positioned statements.
//!
//! Depends only on `ddl-core`.

pub mod ast;
pub mod ddl;
pub mod keywords;
pub mod lex;
pub mod split;
pub mod types;

/// Which database's grammar to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavor {
    MySql,
    Postgres,
    Oracle,
}
