//! The dialect-neutral DDL IR of lakeshift.
//!
//! Invariant: this crate is pure. It does no I/O, has no async, and knows no SQL text:
//! expressions it cannot represent neutrally are carried as opaque text tagged with the
//! dialect that wrote them. It depends on no other lakeshift crate.

pub mod catalog;
pub mod change;
pub mod diag;
pub mod evolution;
pub mod expr;
pub mod names;
pub mod schema;
pub mod types;

pub use catalog::{Catalog, CatalogError, NameRules};
pub use change::{ChangeRequest, ColumnPosition, SchemaChange};
pub use diag::{Diagnostic, Diagnostics, Severity};
pub use evolution::SchemaChangeBehavior;
pub use expr::Expr;
pub use names::Fold;
pub use schema::{
    Check, Column, DefaultValue, DialectSql, ForeignKey, Generated, Identity, IdentityKind, Index,
    IndexKind, IndexPart, Literal, Predicate, PrimaryKey, RefAction, Table, TableName,
};
pub use types::{DataType, IntervalFields, LengthUnit, TimeZone};
