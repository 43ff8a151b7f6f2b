//! Drafts: the parsed shape of CREATE TABLE and ALTER TABLE before it is lowered into
//! the IR. Both parsers produce these (the nom grammar here, and the dialects crate's
//! mapping of sqlparser's AST), so the lowering into the IR exists once.

pub use crate::lex::Ident;
use crate::types::TypeSpec;
use ddl_core::IndexKind;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColAttr {
    Null,
    NotNull,
    /// The default expression as written.
    Default(String),
    AutoIncrement,
    /// MySQL `SERIAL DEFAULT VALUE`: NOT NULL AUTO_INCREMENT UNIQUE.
    SerialDefaultValue,
    PrimaryKey,
    Unique,
    Comment(String),
    /// `ON UPDATE expr` (MySQL: only CURRENT_TIMESTAMP[(p)]).
    OnUpdate(String),
    Generated {
        expr: String,
        stored: bool,
    },
    Identity {
        always: bool,
        start: Option<i64>,
        increment: Option<i64>,
    },
    Charset(String),
    Collate(String),
    Check(String),
    References {
        table: Vec<Ident>,
        columns: Vec<Ident>,
        on_delete: Option<ddl_core::RefAction>,
        on_update: Option<ddl_core::RefAction>,
        /// See [`ddl_core::ForeignKey::deferrable`].
        deferrable: Option<bool>,
    },
    /// Accepted, with no meaning for the IR (VISIBLE, COLUMN_FORMAT, SRID, ENABLE, ...).
    Ignored(String),
    /// `CONSTRAINT name <attr>`: a column-level constraint with its name.
    Named {
        name: Ident,
        attr: Box<ColAttr>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnDraft {
    pub name: Ident,
    /// None only in Oracle's `MODIFY (c NOT NULL)`, which restates attributes only.
    pub ty: Option<TypeSpec>,
    pub attrs: Vec<ColAttr>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPart {
    /// A column name, or an expression (`expression: true`) as written.
    pub column: Ident,
    pub expression: bool,
    pub prefix: Option<u32>,
    pub descending: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableElem {
    Column(ColumnDraft),
    PrimaryKey {
        name: Option<Ident>,
        parts: Vec<KeyPart>,
    },
    Index {
        name: Option<Ident>,
        kind: IndexKind,
        parts: Vec<KeyPart>,
    },
    ForeignKey {
        name: Option<Ident>,
        columns: Vec<Ident>,
        ref_table: Vec<Ident>,
        ref_columns: Vec<Ident>,
        on_delete: Option<ddl_core::RefAction>,
        on_update: Option<ddl_core::RefAction>,
        /// See [`ddl_core::ForeignKey::deferrable`].
        deferrable: Option<bool>,
    },
    Check {
        name: Option<Ident>,
        expr: String,
    },
    /// PostgreSQL `EXCLUDE [USING m] (...)`: no target here has it (reported).
    Exclusion {
        name: Option<Ident>,
        text: String,
    },
    /// A constraint whose state clause (`NOT VALID`, `NO INHERIT`, a unique key's
    /// `DEFERRABLE`, a composite key's `MATCH FULL`) is not carried: reported.
    Unkept {
        elem: Box<TableElem>,
        clause: String,
    },
    /// A constraint the source declares but does not enforce (Oracle `DISABLE`,
    /// `NOT ENFORCED`): reported, not created.
    Disabled(Box<TableElem>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateTableDraft {
    pub name: Vec<Ident>,
    pub if_not_exists: bool,
    pub elems: Vec<TableElem>,
    /// Table options as (upper-case key, value) in source order.
    pub options: Vec<(String, String)>,
    pub partition_by: Option<String>,
    /// `CREATE TABLE a LIKE b`.
    pub like: Option<Vec<Ident>>,
    /// PostgreSQL `INHERITS (parent, ...)`.
    pub inherits: Vec<Vec<Ident>>,
    /// Anything after the column list the grammar does not model (Oracle storage
    /// clauses, PostgreSQL WITH/TABLESPACE), reported as skipped.
    pub trailing: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pos {
    First,
    After(Ident),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterColumnOp {
    SetType {
        ty: TypeSpec,
        using: Option<String>,
    },
    SetNotNull,
    DropNotNull,
    SetDefault(String),
    DropDefault,
    /// PostgreSQL `ADD GENERATED ... AS IDENTITY` (a [`ColAttr::Identity`]).
    AddIdentity(ColAttr),
    DropIdentity,
    /// PostgreSQL's per-column storage settings (`SET STATISTICS`, `SET STORAGE`,
    /// `SET COMPRESSION`, `SET (...)`, `RESET (...)`): no schema meaning.
    Ignored(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlterSpec {
    AddColumns {
        columns: Vec<ColumnDraft>,
        position: Option<Pos>,
        /// `ADD COLUMN IF NOT EXISTS` (MariaDB, PostgreSQL): a column that exists
        /// is left as it is.
        if_not_exists: bool,
    },
    AddElem(TableElem),
    /// Oracle `ADD ( CONSTRAINT ..., CONSTRAINT ... )`.
    AddElems(Vec<TableElem>),
    DropColumns(Vec<Ident>),
    DropPrimaryKey,
    DropIndex(Ident),
    DropForeignKey(Ident),
    DropConstraint(Ident),
    /// MariaDB `DROP INDEX|KEY|FOREIGN KEY|CONSTRAINT IF EXISTS name`: the drop, when
    /// the table has an index or constraint of that name.
    IfExists(Box<AlterSpec>),
    /// MariaDB `ADD INDEX|KEY IF NOT EXISTS name (...)`: the index, unless the table
    /// has one of that name.
    IfNotExists(Box<AlterSpec>),
    /// MySQL MODIFY: the whole column restated.
    ModifyColumn {
        column: ColumnDraft,
        position: Option<Pos>,
    },
    /// MySQL CHANGE old new-definition.
    ChangeColumn {
        old: Ident,
        column: ColumnDraft,
        position: Option<Pos>,
    },
    /// Oracle MODIFY: only the attributes written change.
    ModifyPartial(Vec<ColumnDraft>),
    RenameColumn {
        from: Ident,
        to: Ident,
    },
    RenameTo(Vec<Ident>),
    /// PostgreSQL's SET SCHEMA: the table moves into that schema.
    SetSchema(Ident),
    /// PostgreSQL's RENAME CONSTRAINT.
    RenameConstraint {
        from: Ident,
        to: Ident,
    },
    RenameIndex {
        from: Ident,
        to: Ident,
    },
    AlterColumn {
        name: Ident,
        op: AlterColumnOp,
    },
    TableOption {
        key: String,
        value: String,
    },
    /// A spec with no meaning for the IR (ALGORITHM=, LOCK=, FORCE, partition
    /// maintenance), kept as text for the report.
    Ignored(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlterTableDraft {
    pub name: Vec<Ident>,
    pub if_exists: bool,
    pub specs: Vec<AlterSpec>,
}

/// PostgreSQL `CREATE DOMAIN name [AS] type [DEFAULT e] [NOT NULL] [CONSTRAINT n CHECK (e)]...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainDraft {
    pub name: Vec<Ident>,
    pub ty: crate::types::TypeSpec,
    pub not_null: bool,
    pub default: Option<String>,
    /// (constraint name, expression text without the parentheses).
    pub checks: Vec<(Option<Ident>, String)>,
}

/// `CREATE SEQUENCE` / `ALTER SEQUENCE`: what identity columns need of them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SequenceDraft {
    pub name: Vec<Ident>,
    pub start: Option<i64>,
    pub increment: Option<i64>,
    /// `OWNED BY table.column` (`OWNED BY NONE` is `Some(empty)`).
    pub owned_by: Option<Vec<Ident>>,
}

/// PostgreSQL `ALTER TYPE name ...` forms that change an enum's labels or name.
#[derive(Debug, Clone, PartialEq)]
pub enum AlterEnum {
    /// `ADD VALUE [IF NOT EXISTS] 'label' [BEFORE|AFTER 'other']`: `near` is
    /// (before?, other).
    AddValue {
        label: String,
        near: Option<(bool, String)>,
    },
    RenameValue {
        from: String,
        to: String,
    },
    RenameTo(Ident),
    /// Any other form (OWNER TO, SET SCHEMA, attributes): no label changes.
    Other,
}
