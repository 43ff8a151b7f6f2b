//! Schema changes: each one small fact. One source statement may become several.

use crate::schema::{Check, Column, DefaultValue, ForeignKey, Identity, Index, Table, TableName};
use crate::types::DataType;
use serde::{Deserialize, Serialize};

/// Where an added or moved column goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "column", rename_all = "snake_case")]
pub enum ColumnPosition {
    First,
    After(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum SchemaChange {
    CreateNamespace {
        name: String,
        if_not_exists: bool,
    },
    DropNamespace {
        name: String,
        if_exists: bool,
        cascade: bool,
    },
    CreateTable {
        table: Table,
        if_not_exists: bool,
    },
    DropTable {
        name: TableName,
        if_exists: bool,
    },
    RenameTable {
        from: TableName,
        to: TableName,
    },
    TruncateTable {
        name: TableName,
    },
    AddColumn {
        table: TableName,
        column: Column,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        position: Option<ColumnPosition>,
    },
    DropColumn {
        table: TableName,
        column: String,
    },
    RenameColumn {
        table: TableName,
        from: String,
        to: String,
    },
    /// Change a column's type. `using` is the source's conversion expression
    /// (PostgreSQL `USING`), when written.
    AlterColumnType {
        table: TableName,
        column: String,
        data_type: DataType,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        using: Option<crate::DialectSql>,
    },
    SetNullable {
        table: TableName,
        column: String,
        nullable: bool,
    },
    SetDefault {
        table: TableName,
        column: String,
        default: Option<DefaultValue>,
    },
    SetIdentity {
        table: TableName,
        column: String,
        identity: Option<Identity>,
    },
    /// MySQL `ON UPDATE CURRENT_TIMESTAMP` on or off.
    SetOnUpdate {
        table: TableName,
        column: String,
        on_update_current_timestamp: bool,
    },
    SetColumnComment {
        table: TableName,
        column: String,
        comment: Option<String>,
    },
    /// Move an existing column (MySQL MODIFY ... FIRST/AFTER).
    MoveColumn {
        table: TableName,
        column: String,
        position: ColumnPosition,
    },
    SetTableComment {
        table: TableName,
        comment: Option<String>,
    },
    /// Set (Some) or drop (None) the primary key.
    SetPrimaryKey {
        table: TableName,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        columns: Option<Vec<String>>,
        /// MySQL prefix lengths of key columns.
        #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        prefixes: std::collections::BTreeMap<String, u32>,
    },
    AddIndex {
        table: TableName,
        index: Index,
    },
    DropIndex {
        table: TableName,
        name: String,
    },
    AddForeignKey {
        table: TableName,
        foreign_key: ForeignKey,
    },
    AddCheck {
        table: TableName,
        check: Check,
    },
    /// Drop a named constraint (foreign key, check or unique key).
    DropConstraint {
        table: TableName,
        name: String,
    },
    /// A table option with no neutral meaning (ENGINE, DEFAULT CHARSET, CONVERT TO
    /// CHARACTER SET, ...). Targets without the notion report it as skipped.
    SetTableOption {
        table: TableName,
        key: String,
        value: crate::DialectSql,
    },
}

impl SchemaChange {
    /// The table this change is about (None for namespace changes).
    pub fn table(&self) -> Option<&TableName> {
        use SchemaChange::*;
        match self {
            CreateNamespace { .. } | DropNamespace { .. } => None,
            CreateTable { table, .. } => Some(&table.name),
            DropTable { name, .. } | TruncateTable { name } => Some(name),
            RenameTable { from, .. } => Some(from),
            AddColumn { table, .. }
            | DropColumn { table, .. }
            | RenameColumn { table, .. }
            | AlterColumnType { table, .. }
            | SetNullable { table, .. }
            | SetDefault { table, .. }
            | SetIdentity { table, .. }
            | SetOnUpdate { table, .. }
            | SetColumnComment { table, .. }
            | MoveColumn { table, .. }
            | SetTableComment { table, .. }
            | SetPrimaryKey { table, .. }
            | AddIndex { table, .. }
            | DropIndex { table, .. }
            | AddForeignKey { table, .. }
            | AddCheck { table, .. }
            | DropConstraint { table, .. }
            | SetTableOption { table, .. } => Some(table),
        }
    }

    /// The column a column-level change is about.
    pub fn column(&self) -> Option<&str> {
        use SchemaChange::*;
        match self {
            AddColumn { column, .. } => Some(&column.name),
            DropColumn { column, .. }
            | AlterColumnType { column, .. }
            | SetNullable { column, .. }
            | SetDefault { column, .. }
            | SetIdentity { column, .. }
            | SetOnUpdate { column, .. }
            | SetColumnComment { column, .. }
            | MoveColumn { column, .. } => Some(column),
            RenameColumn { to, .. } => Some(to),
            _ => None,
        }
    }
}

/// A statement as a source database means it, before it is split into small facts.
/// MySQL's MODIFY and CHANGE restate a whole column: the catalog turns that into the
/// small changes that differ from the column's previous definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ChangeRequest {
    Change(SchemaChange),
    /// Replace column `name` by `column` (whose name may differ: a rename), optionally
    /// moving it.
    ReplaceColumn {
        table: TableName,
        name: String,
        column: Column,
        position: Option<ColumnPosition>,
    },
}
