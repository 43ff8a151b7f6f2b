//! The Iceberg emitter: IR -> Iceberg schemas with field ids, and IR changes -> Iceberg
//! metadata actions, under the evolution rules of Iceberg format v2/v3 and the
//! configured [`SchemaChangeBehavior`] for what Iceberg cannot take.
//!
//! This module is pure: it plans, it does not touch a catalog. The runner turns a
//! statement's plan into one atomic catalog commit (see `runner/src/iceberg`), and
//! `lakeshift translate --to iceberg` prints the plan as JSON.
//!
//! Type mapping (defaults; options in [`IcebergOptions`]):
//!
//! | IR | Iceberg |
//! |---|---|
//! | BOOLEAN (MySQL TINYINT(1)) | boolean, or int with `tinyint1: int` |
//! | TINYINT..INT, unsigned up to MEDIUMINT, YEAR | int |
//! | INT UNSIGNED, BIGINT | long |
//! | BIGINT UNSIGNED | decimal(20,0), or long with `bigint_unsigned: long` (values above 2^63-1 are refused at write) |
//! | DECIMAL(p,s), p <= 38 | decimal(p,s) (negative Oracle scales become decimal(p-s,0)) |
//! | DECIMAL(p,s), p > 38 | string, reported |
//! | NUMERIC without precision | decimal(38,10), reported |
//! | MONEY | decimal(19,2) |
//! | FLOAT / DOUBLE | float / double |
//! | CHAR, VARCHAR, TEXT, ENUM, SET, JSON, INTERVAL, XML.. | string (length limits are not kept) |
//! | BINARY, VARBINARY, BLOB, spatial (WKB) | binary |
//! | BIT(1) / BIT(n) | boolean / long (n <= 64) or binary |
//! | UUID | uuid |
//! | DATE / TIME | date / time (microseconds; MySQL TIME beyond 24 h is refused at write) |
//! | DATETIME, TIMESTAMP without zone | timestamp |
//! | MySQL TIMESTAMP, timestamptz | timestamptz |
//! | TIMESTAMP WITH TIME ZONE (own offset) | timestamptz, reported (the offset is not kept) |

use ddl_core::{
    Catalog, Column, ColumnPosition, DataType, DefaultValue, Diagnostics, Literal, SchemaChange,
    SchemaChangeBehavior, TableName, TimeZone,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// An Iceberg primitive type (lakeshift never creates nested types).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum IceType {
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Decimal { precision: u32, scale: u32 },
    Date,
    Time,
    Timestamp,
    Timestamptz,
    String,
    Uuid,
    Binary,
    Fixed(u64),
}

impl fmt::Display for IceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IceType::Boolean => f.write_str("boolean"),
            IceType::Int => f.write_str("int"),
            IceType::Long => f.write_str("long"),
            IceType::Float => f.write_str("float"),
            IceType::Double => f.write_str("double"),
            IceType::Decimal { precision, scale } => write!(f, "decimal({precision},{scale})"),
            IceType::Date => f.write_str("date"),
            IceType::Time => f.write_str("time"),
            IceType::Timestamp => f.write_str("timestamp"),
            IceType::Timestamptz => f.write_str("timestamptz"),
            IceType::String => f.write_str("string"),
            IceType::Uuid => f.write_str("uuid"),
            IceType::Binary => f.write_str("binary"),
            IceType::Fixed(n) => write!(f, "fixed[{n}]"),
        }
    }
}

impl std::str::FromStr for IceType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "boolean" => IceType::Boolean,
            "int" => IceType::Int,
            "long" => IceType::Long,
            "float" => IceType::Float,
            "double" => IceType::Double,
            "date" => IceType::Date,
            "time" => IceType::Time,
            "timestamp" => IceType::Timestamp,
            "timestamptz" => IceType::Timestamptz,
            "string" => IceType::String,
            "uuid" => IceType::Uuid,
            "binary" => IceType::Binary,
            _ => {
                let bad = || format!("unsupported Iceberg type `{s}`");
                if let Some(rest) = s.strip_prefix("decimal(").and_then(|r| r.strip_suffix(')')) {
                    let (p, sc) = rest.split_once(',').ok_or_else(bad)?;
                    IceType::Decimal {
                        precision: p.trim().parse().map_err(|_| bad())?,
                        scale: sc.trim().parse().map_err(|_| bad())?,
                    }
                } else if let Some(n) = s.strip_prefix("fixed[").and_then(|r| r.strip_suffix(']')) {
                    IceType::Fixed(n.parse().map_err(|_| bad())?)
                } else {
                    return Err(bad());
                }
            }
        })
    }
}

impl Serialize for IceType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for IceType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl IceType {
    /// Whether Iceberg (format v2) can change a column from `self` to `to` in place.
    pub fn promotes_to(&self, to: &IceType) -> bool {
        match (self, to) {
            (a, b) if a == b => true,
            (IceType::Int, IceType::Long) | (IceType::Float, IceType::Double) => true,
            (
                IceType::Decimal {
                    precision: p1,
                    scale: s1,
                },
                IceType::Decimal {
                    precision: p2,
                    scale: s2,
                },
            ) => s1 == s2 && p2 >= p1,
            _ => false,
        }
    }

    /// Whether values of `to` always fit in `self` (a narrowing the old column can keep).
    fn holds(&self, to: &IceType) -> bool {
        to.promotes_to(self)
    }

    fn is_float(&self) -> bool {
        matches!(self, IceType::Float | IceType::Double)
    }
}

/// A column of an Iceberg schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IceField {
    pub id: i32,
    pub name: String,
    pub required: bool,
    #[serde(rename = "type")]
    pub ty: IceType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc: Option<String>,
    /// Format v3 only: the value rows written before the column existed read as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_default: Option<serde_json::Value>,
    /// Format v3 only: the value writers use when a row gives none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_default: Option<serde_json::Value>,
}

/// The state of one Iceberg table, as far as planning needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IceTable {
    pub namespace: String,
    pub name: String,
    pub fields: Vec<IceField>,
    pub identifier_field_ids: Vec<i32>,
    /// Highest field id ever assigned in the table: new columns get ids above it.
    pub last_column_id: i32,
    pub properties: BTreeMap<String, String>,
    pub format_version: u8,
    /// Whether the table may hold rows (changes that existing rows forbid are
    /// representable on an empty table).
    pub has_rows: bool,
}

impl IceTable {
    pub fn field(&self, name: &str) -> Option<&IceField> {
        self.fields.iter().find(|f| f.name == name).or_else(|| {
            self.fields
                .iter()
                .find(|f| f.name.eq_ignore_ascii_case(name))
        })
    }

    fn index_of(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|f| f.name == name).or_else(|| {
            self.fields
                .iter()
                .position(|f| f.name.eq_ignore_ascii_case(name))
        })
    }

    fn next_id(&mut self) -> i32 {
        self.last_column_id += 1;
        self.last_column_id
    }
}

/// How MySQL `TINYINT(1)` (the IR's boolean from MySQL) lands in Iceberg.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tinyint1 {
    #[default]
    Boolean,
    Int,
}

/// How `BIGINT UNSIGNED` lands in Iceberg.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BigintUnsigned {
    /// decimal(20,0): every value fits.
    #[default]
    Decimal,
    /// long: values above 2^63-1 are refused when written.
    Long,
}

/// Partitioning of new tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Partitioning {
    #[default]
    None,
    /// `bucket(N, first primary-key column)`; tables without a key are unpartitioned.
    BucketPrimaryKey { buckets: u32 },
}

/// Declared sort order of new tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SortOrder {
    #[default]
    None,
    PrimaryKey,
}

/// Table layout for new tables (tables kept current by upserts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Layout {
    pub partitioning: Partitioning,
    pub sort_order: SortOrder,
    pub target_file_size_bytes: u64,
    /// Parquet compression codec (`zstd`, `snappy`, `gzip`, `uncompressed`).
    pub compression: String,
    /// Delete the oldest metadata files after each commit.
    pub metadata_delete_after_commit: bool,
    /// How many earlier metadata files to keep.
    pub metadata_previous_versions_max: u32,
}

impl Default for Layout {
    fn default() -> Self {
        Layout {
            partitioning: Partitioning::None,
            sort_order: SortOrder::None,
            target_file_size_bytes: 128 * 1024 * 1024,
            compression: "zstd".into(),
            metadata_delete_after_commit: true,
            metadata_previous_versions_max: 20,
        }
    }
}

impl Layout {
    /// Table properties that carry the layout.
    pub fn properties(&self) -> BTreeMap<String, String> {
        let mut p = BTreeMap::new();
        p.insert("write.format.default".into(), "parquet".into());
        p.insert(
            "write.parquet.compression-codec".into(),
            self.compression.clone(),
        );
        p.insert(
            "write.target-file-size-bytes".into(),
            self.target_file_size_bytes.to_string(),
        );
        p.insert(
            "write.metadata.delete-after-commit.enabled".into(),
            self.metadata_delete_after_commit.to_string(),
        );
        p.insert(
            "write.metadata.previous-versions-max".into(),
            self.metadata_previous_versions_max.to_string(),
        );
        // Updates and deletes arrive as delete files, never as rewrites.
        p.insert("write.delete.mode".into(), "merge-on-read".into());
        p.insert("write.update.mode".into(), "merge-on-read".into());
        p
    }
}

/// Options of the Iceberg emitter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct IcebergOptions {
    pub tinyint1: Tinyint1,
    pub bigint_unsigned: BigintUnsigned,
    /// Format version of new tables: 2 (default) or 3.
    pub format_version: u8,
    pub behavior: SchemaChangeBehavior,
    /// Namespace for tables the source names without a schema.
    pub default_namespace: String,
    pub layout: Layout,
    /// The writer fills the rows a table holds with an added column's constant
    /// default (a sync job's `added-column-default: rewrite`): such a column, NOT
    /// NULL at the source, is added optional (Iceberg cannot add a required column to
    /// a table that may hold rows) without a refusal, as none of its values is NULL.
    pub fills_added_defaults: bool,
}

impl Default for IcebergOptions {
    fn default() -> Self {
        IcebergOptions {
            tinyint1: Tinyint1::Boolean,
            bigint_unsigned: BigintUnsigned::Decimal,
            format_version: 2,
            behavior: SchemaChangeBehavior::Exception,
            default_namespace: "default".into(),
            layout: Layout::default(),
            fills_added_defaults: false,
        }
    }
}

/// Where a column goes in an Iceberg schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IcePosition {
    First,
    After(String),
    Last,
}

/// One Iceberg metadata action of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Action {
    CreateNamespace {
        namespace: String,
    },
    DropNamespace {
        namespace: String,
    },
    CreateTable {
        table: String,
        schema: Vec<IceField>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        identifier_field_ids: Vec<i32>,
        #[serde(skip_serializing_if = "Option::is_none")]
        partition: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        sort_order: Vec<String>,
        properties: BTreeMap<String, String>,
        format_version: u8,
    },
    DropTable {
        table: String,
    },
    RenameTable {
        from: String,
        to: String,
    },
    /// A snapshot that removes every data and delete file.
    TruncateTable {
        table: String,
    },
    AddColumn {
        table: String,
        field: IceField,
        position: IcePosition,
    },
    DropColumn {
        table: String,
        field_id: i32,
        name: String,
    },
    RenameColumn {
        table: String,
        field_id: i32,
        from: String,
        to: String,
    },
    MoveColumn {
        table: String,
        field_id: i32,
        name: String,
        position: IcePosition,
    },
    UpdateType {
        table: String,
        field_id: i32,
        name: String,
        from: IceType,
        to: IceType,
    },
    SetRequired {
        table: String,
        field_id: i32,
        name: String,
        required: bool,
    },
    SetDoc {
        table: String,
        field_id: i32,
        name: String,
        doc: Option<String>,
    },
    SetWriteDefault {
        table: String,
        field_id: i32,
        name: String,
        default: Option<serde_json::Value>,
    },
    SetIdentifierFields {
        table: String,
        field_ids: Vec<i32>,
        columns: Vec<String>,
    },
    SetProperties {
        table: String,
        #[serde(skip_serializing_if = "BTreeMap::is_empty")]
        set: BTreeMap<String, String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        remove: Vec<String>,
    },
}

impl Action {
    /// The table (as `namespace.name`) the action changes, if any.
    pub fn table(&self) -> Option<&str> {
        match self {
            Action::CreateNamespace { .. } | Action::DropNamespace { .. } => None,
            Action::CreateTable { table, .. }
            | Action::DropTable { table }
            | Action::TruncateTable { table }
            | Action::AddColumn { table, .. }
            | Action::DropColumn { table, .. }
            | Action::RenameColumn { table, .. }
            | Action::MoveColumn { table, .. }
            | Action::UpdateType { table, .. }
            | Action::SetRequired { table, .. }
            | Action::SetDoc { table, .. }
            | Action::SetWriteDefault { table, .. }
            | Action::SetIdentifierFields { table, .. }
            | Action::SetProperties { table, .. } => Some(table),
            Action::RenameTable { from, .. } => Some(from),
        }
    }
}

/// A plan for one source statement: the actions in order and the state of every
/// table the statement touched afterwards (`None`: dropped or renamed away).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StatementPlan {
    pub actions: Vec<Action>,
    #[serde(skip)]
    pub tables: BTreeMap<(String, String), Option<IceTable>>,
}

/// Why a statement cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PlanError {
    pub kind: PlanErrorKind,
    pub message: String,
}

/// What kind of refusal a [`PlanError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanErrorKind {
    /// What the statement creates exists already (a table, a column).
    Exists,
    /// What the statement changes does not exist (a table).
    Missing,
    /// The evolution rules or the policy refuse it.
    Refused,
}

impl PlanError {
    pub fn refused(message: String) -> Self {
        PlanError {
            kind: PlanErrorKind::Refused,
            message,
        }
    }

    fn exists(message: String) -> Self {
        PlanError {
            kind: PlanErrorKind::Exists,
            message,
        }
    }

    /// A DDL delivered again whose effect the tables show already (a table or
    /// column it creates is there, a table it changes or drops is gone).
    pub fn is_replay(&self) -> bool {
        matches!(self.kind, PlanErrorKind::Exists | PlanErrorKind::Missing)
    }
}

/// The stateful planner: Iceberg table states by (namespace, name).
#[derive(Debug, Clone, Default)]
pub struct IcebergPlanner {
    pub options: IcebergOptions,
    pub tables: BTreeMap<(String, String), IceTable>,
    /// Shared (copy-on-write): a statement's plan saves it to roll back, and a
    /// pointer is all that costs.
    pub namespaces: std::sync::Arc<std::collections::BTreeSet<String>>,
}

/// What Iceberg cannot take in place, for the policy and its error message.
enum Refusal {
    /// A type change that is not a legal promotion.
    Type {
        from: IceType,
        to: IceType,
        narrowing: bool,
    },
    /// An optional column would become required while the table may hold rows.
    Required,
}

impl IcebergPlanner {
    pub fn new(options: IcebergOptions) -> Self {
        IcebergPlanner {
            options,
            ..Default::default()
        }
    }

    /// The (namespace, table) an IR name lands in.
    pub fn key(&self, name: &TableName) -> (String, String) {
        (
            name.schema
                .clone()
                .unwrap_or_else(|| self.options.default_namespace.clone()),
            name.name.clone(),
        )
    }

    /// Map an IR type; losses are reported into `diags`.
    pub fn map_type(&self, column: &str, t: &DataType, diags: &mut Diagnostics) -> IceType {
        map_type(&self.options, column, t, diags)
    }

    /// Plan one statement's changes. `before` and `after` are the IR catalog around the
    /// statement. All or nothing: on error, the planner's state is unchanged.
    pub fn plan(
        &mut self,
        changes: &[SchemaChange],
        after: &Catalog,
        diags: &mut Diagnostics,
    ) -> Result<StatementPlan, PlanError> {
        // What the statement may change is saved first, and put back if it fails: its
        // tables (a rename's target too, every table of a dropped namespace) and the
        // namespace set. Copying the whole planner instead made planning a table cost
        // as much as the tables before it.
        let mut keys: BTreeSet<(String, String)> = BTreeSet::new();
        for c in changes {
            if let Some(n) = c.table() {
                keys.insert(self.key(n));
            }
            match c {
                SchemaChange::RenameTable { to, .. } => {
                    keys.insert(self.key(to));
                }
                SchemaChange::DropNamespace { name, .. } => {
                    keys.extend(self.tables.keys().filter(|k| k.0 == *name).cloned());
                }
                _ => {}
            }
        }
        let saved: Vec<((String, String), Option<IceTable>)> = keys
            .into_iter()
            .map(|k| {
                let t = self.tables.get(&k).cloned();
                (k, t)
            })
            .collect();
        let namespaces = std::sync::Arc::clone(&self.namespaces);
        let mut plan = StatementPlan::default();
        let res = self.plan_in_place(changes, after, diags, &mut plan);
        if let Err(e) = res {
            for (k, t) in saved {
                match t {
                    Some(t) => self.tables.insert(k, t),
                    None => self.tables.remove(&k),
                };
            }
            self.namespaces = namespaces;
            return Err(e);
        }
        Ok(plan)
    }

    fn plan_in_place(
        &mut self,
        changes: &[SchemaChange],
        after: &Catalog,
        diags: &mut Diagnostics,
        plan: &mut StatementPlan,
    ) -> Result<(), PlanError> {
        let mut touched: Vec<(String, String)> = Vec::new();
        for change in changes {
            self.change(change, after, &mut plan.actions, &mut touched, diags)?;
        }
        // Identifier fields follow the primary key as the statement left it.
        for key in touched.clone() {
            self.sync_identifier_fields(&key, after, &mut plan.actions, diags)?;
        }
        for key in touched {
            plan.tables
                .insert(key.clone(), self.tables.get(&key).cloned());
        }
        Ok(())
    }

    fn change(
        &mut self,
        change: &SchemaChange,
        after: &Catalog,
        out: &mut Vec<Action>,
        touched: &mut Vec<(String, String)>,
        diags: &mut Diagnostics,
    ) -> Result<(), PlanError> {
        use SchemaChange as C;
        let mut touch = |k: &(String, String)| {
            if !touched.contains(k) {
                touched.push(k.clone());
            }
        };
        match change {
            C::CreateNamespace { name, .. } => {
                if !self.namespaces.contains(name)
                    && std::sync::Arc::make_mut(&mut self.namespaces).insert(name.clone())
                {
                    out.push(Action::CreateNamespace {
                        namespace: name.clone(),
                    });
                }
            }
            C::DropNamespace { name, cascade, .. } => {
                let inside: Vec<_> = self
                    .tables
                    .keys()
                    .filter(|(ns, _)| ns == name)
                    .cloned()
                    .collect();
                if !inside.is_empty() && !cascade {
                    return Err(PlanError::refused(format!(
                        "namespace {name} still holds {} table(s)",
                        inside.len()
                    )));
                }
                for k in inside {
                    self.tables.remove(&k);
                    touch(&k);
                    out.push(Action::DropTable {
                        table: format!("{}.{}", k.0, k.1),
                    });
                }
                if self.namespaces.contains(name) {
                    std::sync::Arc::make_mut(&mut self.namespaces).remove(name);
                }
                out.push(Action::DropNamespace {
                    namespace: name.clone(),
                });
            }
            C::CreateTable {
                table,
                if_not_exists,
            } => {
                let key = self.key(&table.name);
                if self.tables.contains_key(&key) {
                    if *if_not_exists {
                        diags.skip(format!("table {}.{} exists", key.0, key.1));
                        return Ok(());
                    }
                    return Err(PlanError::exists(format!(
                        "table {}.{} already exists in Iceberg",
                        key.0, key.1
                    )));
                }
                self.ensure_namespace(&key.0, out);
                let mut t = IceTable {
                    namespace: key.0.clone(),
                    name: key.1.clone(),
                    fields: Vec::new(),
                    identifier_field_ids: Vec::new(),
                    last_column_id: 0,
                    properties: self.options.layout.properties(),
                    format_version: self.options.format_version,
                    has_rows: false,
                };
                if let Some(c) = &table.comment {
                    t.properties.insert("comment".into(), c.clone());
                }
                for c in &table.columns {
                    let f = self.field_for(&mut t, c, true, diags);
                    t.fields.push(f);
                }
                t.identifier_field_ids = self.identifier_ids(&t, &table.primary_key, diags);
                let first_key = t
                    .identifier_field_ids
                    .first()
                    .and_then(|id| t.fields.iter().find(|f| f.id == *id))
                    .map(|f| f.name.clone());
                let partition = match (self.options.layout.partitioning, &first_key) {
                    (Partitioning::BucketPrimaryKey { buckets }, Some(k)) => {
                        Some(format!("bucket({buckets}, {k})"))
                    }
                    (Partitioning::BucketPrimaryKey { .. }, None) => {
                        diags.warn(format!(
                            "table {}.{} has no primary key: created unpartitioned",
                            key.0, key.1
                        ));
                        None
                    }
                    (Partitioning::None, _) => None,
                };
                let sort_order = match self.options.layout.sort_order {
                    SortOrder::PrimaryKey => t
                        .identifier_field_ids
                        .iter()
                        .filter_map(|id| t.fields.iter().find(|f| f.id == *id))
                        .map(|f| f.name.clone())
                        .collect(),
                    SortOrder::None => Vec::new(),
                };
                for (what, n) in [
                    ("index(es)", table.indexes.len()),
                    ("foreign key(s)", table.foreign_keys.len()),
                    ("check constraint(s)", table.checks.len()),
                ] {
                    if n > 0 {
                        diags.skip(format!("{n} {what}: Iceberg tables have none"));
                    }
                }
                if table.partition_by.is_some() {
                    diags.skip("source partitioning: the Iceberg layout options decide");
                }
                out.push(Action::CreateTable {
                    table: format!("{}.{}", key.0, key.1),
                    schema: t.fields.clone(),
                    identifier_field_ids: t.identifier_field_ids.clone(),
                    partition,
                    sort_order,
                    properties: t.properties.clone(),
                    format_version: t.format_version,
                });
                self.tables.insert(key.clone(), t);
                touch(&key);
            }
            C::DropTable { name, if_exists } => {
                let key = self.key(name);
                if self.tables.remove(&key).is_none() {
                    if *if_exists {
                        diags.skip(format!("table {}.{} does not exist", key.0, key.1));
                        return Ok(());
                    }
                    return Err(no_table(&key));
                }
                out.push(Action::DropTable {
                    table: format!("{}.{}", key.0, key.1),
                });
                touch(&key);
            }
            C::RenameTable { from, to } => {
                let k1 = self.key(from);
                let k2 = self.key(to);
                let mut t = self.tables.remove(&k1).ok_or_else(|| no_table(&k1))?;
                if self.tables.contains_key(&k2) {
                    return Err(PlanError::exists(format!(
                        "table {}.{} already exists in Iceberg",
                        k2.0, k2.1
                    )));
                }
                self.ensure_namespace(&k2.0, out);
                t.namespace = k2.0.clone();
                t.name = k2.1.clone();
                self.tables.insert(k2.clone(), t);
                out.push(Action::RenameTable {
                    from: format!("{}.{}", k1.0, k1.1),
                    to: format!("{}.{}", k2.0, k2.1),
                });
                touch(&k1);
                touch(&k2);
            }
            C::TruncateTable { name } => {
                let key = self.key(name);
                let t = self.tables.get_mut(&key).ok_or_else(|| no_table(&key))?;
                t.has_rows = false;
                out.push(Action::TruncateTable {
                    table: format!("{}.{}", key.0, key.1),
                });
                touch(&key);
            }
            C::AddColumn {
                table,
                column,
                position,
            } => {
                let key = self.key(table);
                touch(&key);
                let behavior = self.options.behavior;
                let mut t = self.tables.remove(&key).ok_or_else(|| no_table(&key))?;
                let r = (|| {
                    if t.field(&column.name).is_some() {
                        return Err(PlanError::exists(format!(
                            "table {}.{} already has a column {}",
                            key.0, key.1, column.name
                        )));
                    }
                    let empty = !t.has_rows;
                    let mut f = self.field_for(&mut t, column, empty, diags);
                    let filled = self.options.fills_added_defaults
                        && matches!(
                            &column.default,
                            Some(ddl_core::DefaultValue::Literal { value })
                                if *value != ddl_core::Literal::Null
                        );
                    if column_required(column) && !f.required && filled {
                        diags.warn(format!(
                            "table {}.{} column {}: added optional (Iceberg cannot add a required column to a table that may hold rows); the rows it holds are filled with the default, so none reads NULL",
                            key.0, key.1, column.name
                        ));
                    } else if column_required(column) && !f.required {
                        // field_for only makes it required on an empty table or with a
                        // v3 initial default.
                        if self.refused(
                            &t,
                            &column.name,
                            Refusal::Required,
                            behavior,
                            diags,
                            "add a required column",
                        )? {
                            f.required = true;
                        }
                    }
                    let pos = ice_position(&t, position.as_ref());
                    insert_at(&mut t.fields, f.clone(), &pos);
                    out.push(Action::AddColumn {
                        table: format!("{}.{}", key.0, key.1),
                        field: f,
                        position: pos,
                    });
                    Ok(())
                })();
                self.tables.insert(key.clone(), t);
                r?;
            }
            C::DropColumn { table, column } => {
                let key = self.key(table);
                touch(&key);
                let t = self.tables.get_mut(&key).ok_or_else(|| no_table(&key))?;
                let i = t.index_of(column).ok_or_else(|| no_col(&key, column))?;
                let f = t.fields.remove(i);
                t.identifier_field_ids.retain(|id| *id != f.id);
                out.push(Action::DropColumn {
                    table: format!("{}.{}", key.0, key.1),
                    field_id: f.id,
                    name: f.name,
                });
            }
            C::RenameColumn { table, from, to } => {
                let key = self.key(table);
                touch(&key);
                let t = self.tables.get_mut(&key).ok_or_else(|| no_table(&key))?;
                let i = t.index_of(from).ok_or_else(|| no_col(&key, from))?;
                if t.fields
                    .iter()
                    .enumerate()
                    .any(|(j, f)| j != i && f.name == *to)
                {
                    return Err(PlanError::exists(format!(
                        "table {}.{} already has a column {to}",
                        key.0, key.1
                    )));
                }
                let old = std::mem::replace(&mut t.fields[i].name, to.clone());
                out.push(Action::RenameColumn {
                    table: format!("{}.{}", key.0, key.1),
                    field_id: t.fields[i].id,
                    from: old,
                    to: to.clone(),
                });
            }
            C::AlterColumnType {
                table,
                column,
                data_type,
                ..
            } => {
                let key = self.key(table);
                touch(&key);
                // USING with an expression rewrites every row's value; the table's
                // rows here keep theirs, and no change event corrects them.
                if let Some(u) = rewriting_using(change) {
                    if self.tables.get(&key).is_some_and(|t| t.has_rows) {
                        return Err(PlanError::refused(format!(
                            "table {}.{} column {column}: the type change rewrites every row's value (USING {}); the rows already in the table would keep their old values, which no change event corrects: take a new snapshot of the table after it",
                            key.0, key.1, u.sql
                        )));
                    }
                }
                let new_ty = self.map_type(column, data_type, diags);
                self.alter_type(&key, column, new_ty, after, out, diags)?;
            }
            C::SetNullable {
                table,
                column,
                nullable,
            } => {
                let key = self.key(table);
                touch(&key);
                let behavior = self.options.behavior;
                let t = self.tables.get(&key).ok_or_else(|| no_table(&key))?;
                let i = t.index_of(column).ok_or_else(|| no_col(&key, column))?;
                let f = &t.fields[i];
                if f.required != *nullable {
                    return Ok(());
                }
                let make_required = if *nullable {
                    false
                } else if !t.has_rows {
                    true
                } else {
                    let t = t.clone();
                    if self.refused(
                        &t,
                        column,
                        Refusal::Required,
                        behavior,
                        diags,
                        "set NOT NULL",
                    )? {
                        true
                    } else {
                        return Ok(());
                    }
                };
                let t = self.tables.get_mut(&key).expect("checked");
                let f = &mut t.fields[i];
                f.required = make_required;
                if !make_required {
                    t.identifier_field_ids.retain(|id| *id != t.fields[i].id);
                }
                let f = &t.fields[i];
                out.push(Action::SetRequired {
                    table: format!("{}.{}", key.0, key.1),
                    field_id: f.id,
                    name: f.name.clone(),
                    required: make_required,
                });
            }
            C::SetDefault {
                table,
                column,
                default,
            } => {
                let key = self.key(table);
                touch(&key);
                let t = self.tables.get_mut(&key).ok_or_else(|| no_table(&key))?;
                let i = t.index_of(column).ok_or_else(|| no_col(&key, column))?;
                if t.format_version < 3 {
                    diags.warn(format!(
                        "column {column}: default values need Iceberg format v3 (this table is v{}); not representable, rows keep the values the source writes",
                        t.format_version
                    ));
                    return Ok(());
                }
                let value = match default {
                    None => None,
                    Some(d) => match default_json(d, &t.fields[i].ty) {
                        Some(v) => Some(v),
                        None => {
                            diags.warn(format!(
                                "column {column}: the default is not a constant; Iceberg keeps none"
                            ));
                            None
                        }
                    },
                };
                if t.fields[i].write_default == value {
                    return Ok(());
                }
                t.fields[i].write_default = value.clone();
                out.push(Action::SetWriteDefault {
                    table: format!("{}.{}", key.0, key.1),
                    field_id: t.fields[i].id,
                    name: t.fields[i].name.clone(),
                    default: value,
                });
            }
            C::SetColumnComment {
                table,
                column,
                comment,
            } => {
                let key = self.key(table);
                touch(&key);
                let t = self.tables.get_mut(&key).ok_or_else(|| no_table(&key))?;
                let i = t.index_of(column).ok_or_else(|| no_col(&key, column))?;
                if t.fields[i].doc == *comment {
                    return Ok(());
                }
                t.fields[i].doc = comment.clone();
                out.push(Action::SetDoc {
                    table: format!("{}.{}", key.0, key.1),
                    field_id: t.fields[i].id,
                    name: t.fields[i].name.clone(),
                    doc: comment.clone(),
                });
            }
            C::MoveColumn {
                table,
                column,
                position,
            } => {
                let key = self.key(table);
                touch(&key);
                let t = self.tables.get_mut(&key).ok_or_else(|| no_table(&key))?;
                let i = t.index_of(column).ok_or_else(|| no_col(&key, column))?;
                let f = t.fields.remove(i);
                let pos = ice_position(t, Some(position));
                insert_at(&mut t.fields, f.clone(), &pos);
                out.push(Action::MoveColumn {
                    table: format!("{}.{}", key.0, key.1),
                    field_id: f.id,
                    name: f.name,
                    position: pos,
                });
            }
            C::SetTableComment { table, comment } => {
                let key = self.key(table);
                touch(&key);
                let t = self.tables.get_mut(&key).ok_or_else(|| no_table(&key))?;
                let (set, remove) = match comment {
                    Some(c) => {
                        t.properties.insert("comment".into(), c.clone());
                        (BTreeMap::from([("comment".to_owned(), c.clone())]), vec![])
                    }
                    None => {
                        if t.properties.remove("comment").is_none() {
                            return Ok(());
                        }
                        (BTreeMap::new(), vec!["comment".to_owned()])
                    }
                };
                out.push(Action::SetProperties {
                    table: format!("{}.{}", key.0, key.1),
                    set,
                    remove,
                });
            }
            C::SetPrimaryKey { table, .. } => {
                // Applied after the statement's other changes (sync_identifier_fields),
                // so a key on a column made NOT NULL in the same statement works.
                let key = self.key(table);
                touch(&key);
                if !self.tables.contains_key(&key) {
                    return Err(no_table(&key));
                }
            }
            C::SetIdentity { column, .. } => {
                diags.skip(format!(
                    "identity of column {column}: Iceberg columns have no generators"
                ));
            }
            C::SetOnUpdate { column, .. } => {
                diags.skip(format!(
                    "ON UPDATE of column {column}: Iceberg columns have no generators"
                ));
            }
            C::AddIndex { .. } | C::DropIndex { .. } => {
                diags.skip("index: Iceberg tables have none");
            }
            C::AddForeignKey { .. } | C::AddCheck { .. } | C::DropConstraint { .. } => {
                diags.skip("constraint: Iceberg tables have none");
            }
            C::SetTableOption { key, .. } => {
                diags.skip(format!("table option {key}: no meaning in Iceberg"));
            }
        }
        Ok(())
    }

    fn ensure_namespace(&mut self, ns: &str, out: &mut Vec<Action>) {
        if !self.namespaces.contains(ns)
            && std::sync::Arc::make_mut(&mut self.namespaces).insert(ns.to_owned())
        {
            out.push(Action::CreateNamespace {
                namespace: ns.to_owned(),
            });
        }
    }

    /// A new field for an IR column (a new id). `may_require`: the table is empty, so
    /// a NOT NULL column can be required.
    fn field_for(
        &self,
        t: &mut IceTable,
        c: &Column,
        may_require: bool,
        diags: &mut Diagnostics,
    ) -> IceField {
        let ty = self.map_type(&c.name, &c.data_type, diags);
        let mut f = IceField {
            id: t.next_id(),
            name: c.name.clone(),
            required: column_required(c) && may_require,
            ty,
            doc: c.comment.clone(),
            initial_default: None,
            write_default: None,
        };
        if let Some(d) = &c.default {
            if t.format_version >= 3 {
                match default_json(d, &f.ty) {
                    Some(v) => {
                        f.write_default = Some(v.clone());
                        f.initial_default = Some(v);
                        if column_required(c) {
                            f.required = true;
                        }
                    }
                    None => diags.warn(format!(
                        "column {}: the default is not a constant; Iceberg keeps none",
                        c.name
                    )),
                }
            } else if t.has_rows && !may_require {
                diags.warn(format!(
                    "column {}: default values need Iceberg format v3 (this table is v{}); rows already in the table read NULL for the new column",
                    c.name, t.format_version
                ));
            } else {
                diags.skip(format!(
                    "column {}: default values need Iceberg format v3 (this table is v{}); not kept, rows keep the values the source writes",
                    c.name, t.format_version
                ));
            }
        }
        f
    }

    fn identifier_ids(
        &self,
        t: &IceTable,
        pk: &Option<ddl_core::PrimaryKey>,
        diags: &mut Diagnostics,
    ) -> Vec<i32> {
        let Some(pk) = pk else { return Vec::new() };
        let mut ids = Vec::new();
        for c in &pk.columns {
            match t.field(c) {
                Some(f) if f.ty.is_float() => {
                    diags.warn(format!(
                        "table {}.{}: key column {c} is {}, which Iceberg does not allow as an identifier field; the table has no identifier fields",
                        t.namespace, t.name, f.ty
                    ));
                    return Vec::new();
                }
                Some(f) if !f.required => {
                    diags.warn(format!(
                        "table {}.{}: key column {c} is optional in Iceberg; the table has no identifier fields",
                        t.namespace, t.name
                    ));
                    return Vec::new();
                }
                Some(f) => ids.push(f.id),
                None => return Vec::new(),
            }
        }
        ids
    }

    fn sync_identifier_fields(
        &mut self,
        key: &(String, String),
        after: &Catalog,
        out: &mut Vec<Action>,
        diags: &mut Diagnostics,
    ) -> Result<(), PlanError> {
        if !self.tables.contains_key(key) {
            return Ok(());
        }
        // The IR table under the name the planner keys it by.
        let ir = after.tables.values().find(|it| self.key(&it.name) == *key);
        let Some(ir) = ir else { return Ok(()) };
        // Key columns the source made NOT NULL by declaring the key (MySQL does).
        if let Some(pk) = &ir.primary_key {
            for c in &pk.columns {
                let t = &self.tables[key];
                let not_null = ir.column(c).is_some_and(|col| !col.nullable);
                let Some(i) = t.index_of(c) else { continue };
                if !not_null || t.fields[i].required {
                    continue;
                }
                let ok = !t.has_rows || {
                    let t = t.clone();
                    self.refused(
                        &t,
                        c,
                        Refusal::Required,
                        self.options.behavior,
                        diags,
                        "make a key column required",
                    )?
                };
                if ok {
                    let t = self.tables.get_mut(key).expect("checked");
                    t.fields[i].required = true;
                    out.push(Action::SetRequired {
                        table: format!("{}.{}", key.0, key.1),
                        field_id: t.fields[i].id,
                        name: t.fields[i].name.clone(),
                        required: true,
                    });
                }
            }
        }
        let t = &self.tables[key];
        let mut scratch = Diagnostics::default();
        let ids = self.identifier_ids(t, &ir.primary_key, &mut scratch);
        if ids == t.identifier_field_ids {
            return Ok(());
        }
        diags.0.extend(scratch.0);
        let t = self.tables.get_mut(key).expect("checked");
        t.identifier_field_ids = ids.clone();
        let columns = ids
            .iter()
            .filter_map(|id| t.fields.iter().find(|f| f.id == *id))
            .map(|f| f.name.clone())
            .collect();
        // A CREATE TABLE already carries its identifier fields.
        if let Some(Action::CreateTable {
            table,
            identifier_field_ids,
            ..
        }) = out.iter_mut().rev().find(|a| {
            matches!(a, Action::CreateTable { table, .. } if *table == format!("{}.{}", key.0, key.1))
        }) {
            let _ = table;
            *identifier_field_ids = ids;
            return Ok(());
        }
        out.push(Action::SetIdentifierFields {
            table: format!("{}.{}", key.0, key.1),
            field_ids: ids,
            columns,
        });
        Ok(())
    }

    fn alter_type(
        &mut self,
        key: &(String, String),
        column: &str,
        new_ty: IceType,
        _after: &Catalog,
        out: &mut Vec<Action>,
        diags: &mut Diagnostics,
    ) -> Result<(), PlanError> {
        let behavior = self.options.behavior;
        let t = self.tables.get(key).ok_or_else(|| no_table(key))?;
        let i = t.index_of(column).ok_or_else(|| no_col(key, column))?;
        let old = t.fields[i].clone();
        let table = format!("{}.{}", key.0, key.1);
        if old.ty == new_ty {
            if !matches!(new_ty, IceType::String | IceType::Binary) {
                return Ok(());
            }
            diags.skip(format!(
                "column {column}: stays {new_ty} in Iceberg (lengths are not kept)"
            ));
            return Ok(());
        }
        if old.ty.promotes_to(&new_ty) {
            let t = self.tables.get_mut(key).expect("checked");
            t.fields[i].ty = new_ty.clone();
            out.push(Action::UpdateType {
                table,
                field_id: old.id,
                name: old.name,
                from: old.ty,
                to: new_ty,
            });
            return Ok(());
        }
        let narrowing = old.ty.holds(&new_ty);
        let refusal = Refusal::Type {
            from: old.ty.clone(),
            to: new_ty.clone(),
            narrowing,
        };
        let t = t.clone();
        let strategy = match behavior {
            SchemaChangeBehavior::Exception => {
                return Err(self.refusal_error(&t, column, &refusal, "change type"))
            }
            SchemaChangeBehavior::Ignore => {
                diags.warn(format!(
                    "table {table} column {column}: type change {} -> {new_ty} ignored (schema.change.behavior=ignore); the column stays {}",
                    old.ty, old.ty
                ));
                return Ok(());
            }
            SchemaChangeBehavior::Evolve | SchemaChangeBehavior::TryEvolve => "replace",
            SchemaChangeBehavior::Lenient if narrowing => "keep",
            SchemaChangeBehavior::Lenient => "rename",
        };
        let t = self.tables.get_mut(key).expect("checked");
        match strategy {
            "keep" => {
                diags.warn(format!(
                    "table {table} column {column}: narrowing {} -> {new_ty} kept as {} (schema.change.behavior=lenient)",
                    old.ty, old.ty
                ));
            }
            "replace" => {
                // Drop the old field, add a new one under the same name and position.
                let new_id = t.next_id();
                let mut f = old.clone();
                f.id = new_id;
                f.ty = new_ty.clone();
                f.required = old.required && !t.has_rows;
                f.initial_default = None;
                t.fields[i] = f.clone();
                t.identifier_field_ids.retain(|id| *id != old.id);
                let pos = if i == 0 {
                    IcePosition::First
                } else {
                    IcePosition::After(t.fields[i - 1].name.clone())
                };
                diags.warn(format!(
                    "table {table} column {column}: {} -> {new_ty} is not an Iceberg promotion; replaced by a new column (field id {} -> {new_id}); earlier values stay readable in earlier snapshots only (schema.change.behavior={behavior})",
                    old.ty, old.id
                ));
                out.push(Action::DropColumn {
                    table: table.clone(),
                    field_id: old.id,
                    name: old.name.clone(),
                });
                out.push(Action::AddColumn {
                    table,
                    field: f,
                    position: pos,
                });
            }
            _ => {
                // lenient, family change: keep the old values under a new name.
                let mut keep_name = format!("{}_old", old.name);
                let mut n = 2;
                while t.fields.iter().any(|f| f.name == keep_name) {
                    keep_name = format!("{}_old{n}", old.name);
                    n += 1;
                }
                let new_id = t.next_id();
                t.fields[i].name = keep_name.clone();
                let was_required = t.fields[i].required;
                t.fields[i].required = false;
                t.identifier_field_ids.retain(|id| *id != old.id);
                let f = IceField {
                    id: new_id,
                    name: old.name.clone(),
                    required: false,
                    ty: new_ty.clone(),
                    doc: old.doc.clone(),
                    initial_default: None,
                    write_default: None,
                };
                insert_at(
                    &mut t.fields,
                    f.clone(),
                    &IcePosition::After(keep_name.clone()),
                );
                diags.warn(format!(
                    "table {table} column {column}: {} -> {new_ty} is not an Iceberg promotion; the old values stay in column {keep_name} and new values go to a new column {column} (field id {new_id}) (schema.change.behavior=lenient)",
                    old.ty
                ));
                out.push(Action::RenameColumn {
                    table: table.clone(),
                    field_id: old.id,
                    from: old.name.clone(),
                    to: keep_name.clone(),
                });
                if was_required {
                    out.push(Action::SetRequired {
                        table: table.clone(),
                        field_id: old.id,
                        name: keep_name.clone(),
                        required: false,
                    });
                }
                out.push(Action::AddColumn {
                    table,
                    field: f,
                    position: IcePosition::After(keep_name),
                });
            }
        }
        Ok(())
    }

    /// Decide a refused nullability change. Ok(true): apply it anyway (evolve).
    fn refused(
        &self,
        t: &IceTable,
        column: &str,
        refusal: Refusal,
        behavior: SchemaChangeBehavior,
        diags: &mut Diagnostics,
        what: &str,
    ) -> Result<bool, PlanError> {
        match behavior {
            SchemaChangeBehavior::Exception => Err(self.refusal_error(t, column, &refusal, what)),
            SchemaChangeBehavior::Evolve => {
                diags.warn(format!(
                    "table {}.{} column {column}: made required although the table may hold rows; readers fail on a NULL (schema.change.behavior=evolve)",
                    t.namespace, t.name
                ));
                Ok(true)
            }
            b => {
                diags.warn(format!(
                    "table {}.{} column {column}: kept optional; Iceberg cannot {what} on a table that may hold rows (schema.change.behavior={b})",
                    t.namespace, t.name
                ));
                Ok(false)
            }
        }
    }

    fn refusal_error(&self, t: &IceTable, column: &str, r: &Refusal, what: &str) -> PlanError {
        let table = format!("{}.{}", t.namespace, t.name);
        match r {
            Refusal::Type {
                from,
                to,
                narrowing,
            } => PlanError::refused(format!(
                "table {table} column {column}: Iceberg cannot change type {from} -> {to} ({}); nothing of this statement was applied. Policies that accept it (a job: pipeline.schema-change-behavior; translate and apply: --schema-change-behavior): evolve or try-evolve (replace the column under a new field id), lenient ({}), ignore (keep {from})",
                if *narrowing {
                    "a narrowing"
                } else if std::mem::discriminant(from) != std::mem::discriminant(to) {
                    "a change of type family"
                } else {
                    "not a promotion Iceberg allows: int -> long, float -> double, a decimal's precision widened at the same scale"
                },
                if *narrowing {
                    format!("keep {from}")
                } else {
                    format!("keep the old values in {column}_old, add {column} as {to}")
                }
            )),
            Refusal::Required => PlanError::refused(format!(
                "table {table} column {column}: Iceberg cannot {what} (optional -> required) on a table that may hold rows; nothing of this statement was applied. Policies that accept it (a job: pipeline.schema-change-behavior; translate and apply: --schema-change-behavior): evolve (make it required anyway), try-evolve, lenient or ignore (keep it optional)"
            )),
        }
    }
}

fn column_required(c: &Column) -> bool {
    !c.nullable
}

/// Where a source position puts a column in an Iceberg schema (the column named
/// after is matched as the table spells it).
fn ice_position(t: &IceTable, p: Option<&ColumnPosition>) -> IcePosition {
    match p {
        None => IcePosition::Last,
        Some(ColumnPosition::First) => IcePosition::First,
        Some(ColumnPosition::After(a)) => {
            IcePosition::After(t.field(a).map(|f| f.name.clone()).unwrap_or(a.clone()))
        }
    }
}

fn insert_at(fields: &mut Vec<IceField>, f: IceField, pos: &IcePosition) {
    match pos {
        IcePosition::First => fields.insert(0, f),
        IcePosition::Last => fields.push(f),
        IcePosition::After(a) => match fields.iter().position(|x| x.name == *a) {
            Some(i) => fields.insert(i + 1, f),
            None => fields.push(f),
        },
    }
}

fn no_table(k: &(String, String)) -> PlanError {
    PlanError {
        kind: PlanErrorKind::Missing,
        message: format!("table {}.{} does not exist in Iceberg", k.0, k.1),
    }
}

/// A type change's USING expression when it rewrites the values (it is more than
/// [`plain_cast`]): a target that holds rows and does not run it keeps their old
/// values, which no change event corrects.
pub fn rewriting_using(change: &SchemaChange) -> Option<&ddl_core::DialectSql> {
    match change {
        SchemaChange::AlterColumnType {
            column,
            using: Some(u),
            ..
        } if !plain_cast(&u.sql, column) => Some(u),
        _ => None,
    }
}

/// Whether a USING expression only converts the column (`c`, `c::type`,
/// `CAST(c AS type)`), which is what the type change itself does.
pub fn plain_cast(sql: &str, column: &str) -> bool {
    let e: String = sql
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '"')
        .collect::<String>()
        .to_lowercase();
    let c = column.to_lowercase();
    let inner = e
        .strip_prefix('(')
        .and_then(|x| x.strip_suffix(')'))
        .unwrap_or(&e);
    inner == c
        || inner
            .strip_prefix(&c)
            .and_then(|rest| rest.strip_prefix("::"))
            .is_some_and(|ty| {
                ty.chars()
                    .all(|x| x.is_alphanumeric() || "_(),.[]".contains(x))
            })
        || inner
            .strip_prefix("cast(")
            .and_then(|x| x.strip_prefix(&c))
            .is_some_and(|rest| rest.starts_with("as"))
}

#[cfg(test)]
#[test]
fn using_expressions_that_only_cast_are_plain() {
    for e in [
        "v",
        "v::bigint",
        "(v::numeric(10,2))",
        "\"v\"::text",
        "CAST(v AS bigint)",
    ] {
        assert!(plain_cast(e, "v"), "{e}");
    }
    for e in [
        "v * 1000",
        "'v=' || v",
        "v::int * 2",
        "w::bigint",
        "CAST(v * 2 AS bigint)",
        "lower(v)",
    ] {
        assert!(!plain_cast(e, "v"), "{e}");
    }
}

fn no_col(k: &(String, String), c: &str) -> PlanError {
    PlanError::refused(format!("table {}.{} has no column {c}", k.0, k.1))
}

/// A constant default as Iceberg's JSON single-value form, where it has one.
fn default_json(d: &DefaultValue, ty: &IceType) -> Option<serde_json::Value> {
    let DefaultValue::Literal { value } = d else {
        return None;
    };
    match (value, ty) {
        (Literal::Null, _) => None,
        (Literal::Boolean(b), IceType::Boolean) => Some((*b).into()),
        (Literal::Number(n), IceType::Int | IceType::Long) => n.parse::<i64>().ok().map(Into::into),
        (Literal::Number(n), IceType::Boolean) => match n.as_str() {
            "0" => Some(false.into()),
            "1" => Some(true.into()),
            _ => None,
        },
        (Literal::Number(n), IceType::Float | IceType::Double) => n
            .parse::<f64>()
            .ok()
            .and_then(|f| serde_json::Number::from_f64(f).map(Into::into)),
        (Literal::Number(n), IceType::Decimal { .. }) => Some(n.clone().into()),
        (Literal::Number(n), IceType::String) => Some(n.clone().into()),
        (Literal::String(s), IceType::String) => Some(s.clone().into()),
        // (Iceberg's single-value JSON of binary and fixed is their hex.)
        (Literal::Bytes(h), IceType::Binary | IceType::Fixed(_)) => Some(h.clone().into()),
        (Literal::String(s), IceType::Int | IceType::Long) => {
            s.trim().parse::<i64>().ok().map(Into::into)
        }
        (Literal::String(s), IceType::Decimal { .. }) if s.trim().parse::<f64>().is_ok() => {
            Some(s.trim().to_owned().into())
        }
        _ => None,
    }
}

/// Map an IR type to Iceberg, reporting every loss.
pub fn map_type(
    o: &IcebergOptions,
    column: &str,
    t: &DataType,
    diags: &mut Diagnostics,
) -> IceType {
    use DataType as D;
    match t {
        D::Boolean => match o.tinyint1 {
            Tinyint1::Boolean => IceType::Boolean,
            Tinyint1::Int => IceType::Int,
        },
        D::Int { bytes, unsigned } => match (bytes, unsigned) {
            (1..=3, _) | (4, false) => IceType::Int,
            (4, true) => IceType::Long,
            (_, false) => IceType::Long,
            (_, true) => match o.bigint_unsigned {
                BigintUnsigned::Decimal => IceType::Decimal {
                    precision: 20,
                    scale: 0,
                },
                BigintUnsigned::Long => {
                    diags.warn(format!(
                        "column {column}: BIGINT UNSIGNED as long (bigint_unsigned=long): values above 9223372036854775807 are refused when written"
                    ));
                    IceType::Long
                }
            },
        },
        D::Year => IceType::Int,
        D::Decimal {
            precision, scale, ..
        } => match precision {
            None => {
                diags.warn(format!(
                    "column {column}: a number without precision becomes decimal(38,10); values with more digits are refused when written"
                ));
                IceType::Decimal {
                    precision: 38,
                    scale: 10,
                }
            }
            Some(p) if *p > 38 => {
                diags.warn(format!(
                    "column {column}: decimal precision {p} is above Iceberg's 38; stored as string"
                ));
                IceType::String
            }
            Some(p) => {
                let s = scale.unwrap_or(0);
                if s < 0 {
                    let p2 = (*p as i64 - s as i64).min(38) as u32;
                    IceType::Decimal {
                        precision: p2,
                        scale: 0,
                    }
                } else if s as u32 > *p {
                    diags.warn(format!(
                        "column {column}: scale {s} above precision {p}; widened to decimal({},{s})",
                        (s as u32).min(38)
                    ));
                    IceType::Decimal {
                        precision: (s as u32).min(38),
                        scale: s as u32,
                    }
                } else {
                    IceType::Decimal {
                        precision: *p,
                        scale: s as u32,
                    }
                }
            }
        },
        D::Money => IceType::Decimal {
            precision: 19,
            scale: 2,
        },
        D::Float { bytes, .. } => {
            if *bytes <= 4 {
                IceType::Float
            } else {
                IceType::Double
            }
        }
        D::Char { .. } | D::Varchar { .. } | D::Text { .. } | D::Enum { .. } | D::Set { .. } => {
            IceType::String
        }
        D::Json { .. } => IceType::String,
        D::Binary { .. } | D::Varbinary { .. } | D::Blob { .. } => IceType::Binary,
        D::Uuid => IceType::Uuid,
        D::Date => IceType::Date,
        D::Time { precision, tz } => {
            if *tz == TimeZone::WithOffset {
                diags.warn(format!(
                    "column {column}: time with time zone becomes time; the offset is not kept"
                ));
            }
            if *precision > 6 {
                diags.warn(format!(
                    "column {column}: time precision {precision} truncated to microseconds"
                ));
            }
            IceType::Time
        }
        D::Timestamp { precision, tz } => {
            if *precision > 6 {
                diags.warn(format!(
                    "column {column}: timestamp precision {precision} truncated to microseconds"
                ));
            }
            match tz {
                TimeZone::None => IceType::Timestamp,
                TimeZone::Instant => IceType::Timestamptz,
                TimeZone::WithOffset => {
                    diags.warn(format!(
                        "column {column}: a timestamp with its own offset becomes timestamptz (UTC); the offset is not kept"
                    ));
                    IceType::Timestamptz
                }
            }
        }
        D::Bit { length, varying } => match (length, varying) {
            (Some(1) | None, false) => IceType::Boolean,
            (Some(n), false) if *n <= 64 => IceType::Long,
            _ => IceType::Binary,
        },
        D::Interval { .. } => {
            diags.warn(format!(
                "column {column}: Iceberg has no interval type; stored as string"
            ));
            IceType::String
        }
        D::Array { .. } => {
            diags.warn(format!(
                "column {column}: arrays are stored as their text form (string)"
            ));
            IceType::String
        }
        D::Spatial { .. } => IceType::Binary,
        D::Other { dialect, name } => {
            diags.warn(format!(
                "column {column}: {dialect} type {name} has no Iceberg type; stored as string"
            ));
            IceType::String
        }
    }
}

/// One statement's result as `translate --to iceberg` prints it: where it is, which IR
/// changes it made, the Iceberg actions planned, and its diagnostics.
#[derive(Debug, Serialize)]
pub struct StatementJson<'a> {
    pub file: &'a str,
    pub line: usize,
    pub column: usize,
    pub changes: Vec<String>,
    pub actions: &'a [Action],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub diagnostics: Vec<DiagnosticJson<'a>>,
}

#[derive(Debug, Serialize)]
pub struct DiagnosticJson<'a> {
    pub severity: ddl_core::Severity,
    pub line: usize,
    pub column: usize,
    pub message: &'a str,
}

pub fn statement_json<'a>(
    file: &'a str,
    r: &'a crate::translate::StatementResult,
) -> StatementJson<'a> {
    StatementJson {
        file,
        line: r.line,
        column: r.column,
        changes: r
            .changes
            .iter()
            .filter_map(|c| {
                serde_json::to_value(c)
                    .ok()
                    .and_then(|v| v.get("change").and_then(|k| k.as_str().map(str::to_owned)))
            })
            .collect(),
        actions: r.plan.as_ref().map(|p| p.actions.as_slice()).unwrap_or(&[]),
        diagnostics: r
            .diagnostics
            .iter()
            .map(|(l, c, d)| DiagnosticJson {
                severity: d.severity,
                line: *l,
                column: *c,
                message: &d.message,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_strings_round_trip() {
        for t in [
            IceType::Decimal {
                precision: 20,
                scale: 0,
            },
            IceType::Fixed(16),
            IceType::Timestamptz,
        ] {
            assert_eq!(t.to_string().parse::<IceType>(), Ok(t));
        }
    }

    #[test]
    fn promotions_follow_the_spec() {
        assert!(IceType::Int.promotes_to(&IceType::Long));
        assert!(IceType::Float.promotes_to(&IceType::Double));
        let d = |p, s| IceType::Decimal {
            precision: p,
            scale: s,
        };
        assert!(d(10, 2).promotes_to(&d(12, 2)));
        assert!(!d(10, 2).promotes_to(&d(12, 3)));
        assert!(!IceType::Long.promotes_to(&IceType::Int));
        assert!(!IceType::Int.promotes_to(&IceType::String));
    }

    use crate::translate::{Target, Translator};
    use crate::Dialect;

    fn planner(behavior: SchemaChangeBehavior, seed: &str) -> Translator {
        let mut tr = Translator::new(Dialect::MySql, Target::Iceberg);
        tr.iceberg = IcebergPlanner::new(IcebergOptions {
            behavior,
            ..Default::default()
        });
        // Seeded tables count as existing tables that may hold rows.
        assert!(tr.seed(seed).is_empty());
        tr
    }

    fn names(tr: &Translator, t: &str) -> Vec<(i32, String, String, bool)> {
        tr.iceberg.tables[&("default".to_owned(), t.to_owned())]
            .fields
            .iter()
            .map(|f| (f.id, f.name.clone(), f.ty.to_string(), f.required))
            .collect()
    }

    #[test]
    fn lenient_family_change_finds_a_free_name() {
        let mut tr = planner(
            SchemaChangeBehavior::Lenient,
            "CREATE TABLE t (id int PRIMARY KEY, code int, code_old int);",
        );
        let r = tr.translate("ALTER TABLE t MODIFY code date;");
        assert!(!r[0].failed(), "{:?}", r[0].diagnostics);
        assert_eq!(
            names(&tr, "t"),
            vec![
                (1, "id".into(), "int".into(), true),
                (2, "code_old2".into(), "int".into(), false),
                (4, "code".into(), "date".into(), false),
                (3, "code_old".into(), "int".into(), false),
            ]
        );
    }

    #[test]
    fn required_column_on_a_table_with_rows_goes_through_the_policy() {
        let seed = "CREATE TABLE t (id int PRIMARY KEY);";
        let mut tr = planner(SchemaChangeBehavior::Exception, seed);
        let r = tr.translate("ALTER TABLE t ADD c int NOT NULL;");
        assert!(r[0].failed());
        let msg = &r[0].diagnostics[0].2.message;
        assert!(msg.contains("column c") && msg.contains("evolve"), "{msg}");
        // Nothing of the failed statement reached the planner.
        assert_eq!(names(&tr, "t").len(), 1);
        let mut tr = planner(SchemaChangeBehavior::Ignore, seed);
        tr.translate("ALTER TABLE t ADD c int NOT NULL;");
        assert_eq!(names(&tr, "t")[1], (2, "c".into(), "int".into(), false));
        // A table created in the same script has no rows: the column is required.
        let mut tr = planner(SchemaChangeBehavior::Exception, "");
        let r =
            tr.translate("CREATE TABLE u (id int PRIMARY KEY);\nALTER TABLE u ADD c int NOT NULL;");
        assert!(!r[1].failed());
        assert_eq!(names(&tr, "u")[1], (2, "c".into(), "int".into(), true));
    }

    /// A statement whose later change fails leaves nothing of its earlier changes
    /// (the planner saves only what the statement names, then puts it back).
    #[test]
    fn a_failed_statement_is_undone_whole() {
        let seed = "CREATE TABLE t (id int PRIMARY KEY); CREATE TABLE s (id int PRIMARY KEY);";
        let mut tr = planner(SchemaChangeBehavior::Exception, seed);
        let r = tr.translate("ALTER TABLE t ADD a int, ADD c int NOT NULL;");
        assert!(r[0].failed());
        assert_eq!(names(&tr, "t").len(), 1);
        let r = tr.translate("RENAME TABLE t TO t2, missing TO x;");
        assert!(r[0].failed());
        let keys: Vec<&str> = tr.iceberg.tables.keys().map(|k| k.1.as_str()).collect();
        assert_eq!(keys, ["s", "t"]);
        let r = tr.translate("CREATE TABLE n.u (id int); ALTER TABLE n.u ADD v int NOT NULL;");
        assert!(!r[0].failed() && !r[1].failed());
        assert!(tr.iceberg.namespaces.contains("n"));
    }

    #[test]
    fn dropping_a_key_column_updates_identifier_fields() {
        let mut tr = planner(
            SchemaChangeBehavior::Exception,
            "CREATE TABLE t (a int NOT NULL, b int NOT NULL, PRIMARY KEY (a, b));",
        );
        let t = &tr.iceberg.tables[&("default".to_owned(), "t".to_owned())];
        assert_eq!(t.identifier_field_ids, vec![1, 2]);
        let r = tr.translate("ALTER TABLE t DROP COLUMN b;");
        assert!(!r[0].failed(), "{:?}", r[0].diagnostics);
        let t = &tr.iceberg.tables[&("default".to_owned(), "t".to_owned())];
        assert_eq!(t.identifier_field_ids, vec![1]);
    }

    #[test]
    fn reported_type_mappings() {
        let o = IcebergOptions::default();
        let mut d = Diagnostics::default();
        let dec = |p, s| DataType::Decimal {
            precision: Some(p),
            scale: Some(s),
            unsigned: false,
        };
        assert_eq!(map_type(&o, "x", &dec(65, 2), &mut d), IceType::String);
        assert!(d.0[0].message.contains("above Iceberg's 38"));
        assert_eq!(
            map_type(&o, "x", &dec(5, -2), &mut d),
            IceType::Decimal {
                precision: 7,
                scale: 0
            }
        );
        assert_eq!(
            map_type(
                &o,
                "x",
                &DataType::Int {
                    bytes: 4,
                    unsigned: true
                },
                &mut d
            ),
            IceType::Long
        );
    }
}
