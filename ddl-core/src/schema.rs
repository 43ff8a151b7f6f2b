//! Table schemas: columns in order, keys, indexes, constraints, comments.

use crate::types::DataType;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// A table name, optionally qualified by its schema (PostgreSQL/Oracle schema, MySQL
/// database). Names are stored as the database stores them: after the source dialect's
/// case folding, without quotes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TableName {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    pub name: String,
}

impl TableName {
    pub fn new(schema: Option<&str>, name: &str) -> Self {
        TableName {
            schema: schema.map(str::to_owned),
            name: name.to_owned(),
        }
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.schema {
            Some(s) => write!(f, "{s}.{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// A literal default value, in neutral form.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Literal {
    Null,
    Boolean(bool),
    /// A number as written (kept as text so no precision is lost).
    Number(String),
    String(String),
    /// A byte string, as lowercase hex digits (MySQL's `X'AB'` and `0xAB`,
    /// PostgreSQL's `'\xab'::bytea`). What it means depends on the column it is the
    /// default of: [`DefaultValue::fitted`] makes it a number, a string or a UUID
    /// where the column is one.
    Bytes(String),
}

impl Literal {
    /// A [`Literal::Bytes`] of `b`.
    pub fn from_bytes(b: &[u8]) -> Literal {
        Literal::Bytes(b.iter().map(|x| format!("{x:02x}")).collect())
    }

    /// The bytes of a [`Literal::Bytes`].
    pub fn bytes(&self) -> Option<Vec<u8>> {
        match self {
            Literal::Bytes(h) => bytes_from_hex(h),
            _ => None,
        }
    }
}

/// The bytes a bit string's digits spell, left-padded with zero bits to whole bytes
/// (`101` is 0x05); None when a character is no binary digit.
pub fn bytes_from_bits(bits: &str) -> Option<Vec<u8>> {
    if !bits.bytes().all(|c| c == b'0' || c == b'1') {
        return None;
    }
    let padded = format!("{}{bits}", "0".repeat((8 - bits.len() % 8) % 8));
    Some(
        padded
            .as_bytes()
            .chunks(8)
            .map(|c| c.iter().fold(0u8, |n, b| n << 1 | (b - b'0')))
            .collect(),
    )
}

/// The bytes an even number of hex digits spell; None for anything else.
pub fn bytes_from_hex(h: &str) -> Option<Vec<u8>> {
    if !h.len().is_multiple_of(2) {
        return None;
    }
    (0..h.len() / 2)
        .map(|i| u8::from_str_radix(h.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}

/// A UUID's 16 bytes in its canonical text (lowercase, hyphenated).
pub fn uuid_text(b: &[u8; 16]) -> String {
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// A column default.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DefaultValue {
    Literal {
        value: Literal,
    },
    /// CURRENT_TIMESTAMP / now() / SYSTIMESTAMP / SYSDATE, with fractional precision.
    CurrentTimestamp {
        precision: Option<u8>,
    },
    CurrentDate,
    CurrentTime,
    /// The next value of a named sequence (PostgreSQL nextval, Oracle seq.NEXTVAL).
    NextVal {
        sequence: String,
    },
    /// An expression with no neutral meaning, as the source dialect wrote it.
    Raw {
        dialect: String,
        text: String,
    },
}

impl DefaultValue {
    /// The default as a column of type `ty` reads it: a byte string (`X'41'`) is a
    /// number in a numeric or bit column (MySQL reads it so), the text of its bytes in
    /// a character column (when they are UTF-8), a UUID in a uuid column (16 bytes),
    /// and stays bytes in a binary column (a fixed-length one's padded with zero bytes,
    /// as MySQL pads them); a UUID's text is made canonical (lowercase, hyphenated).
    /// A string of a bit column is the bit string's digits (PostgreSQL's `B'0011'`,
    /// `'0011'::"bit"`): a fixed-length one is padded with zero bits on the right or
    /// cut to its length (PostgreSQL's cast), and one of up to 64 bits is its number;
    /// a varying one keeps its digits (its length is part of its value). Every other
    /// default is returned as is.
    pub fn fitted(self, ty: &DataType) -> Self {
        use DataType as D;
        // A number in a fixed bit string of up to 64 bits: its low-order bits (as
        // PostgreSQL casts an integer to bit(n)), so it prints in the column's width.
        if let (
            D::Bit {
                length,
                varying: false,
            },
            DefaultValue::Literal {
                value: Literal::Number(v),
            },
        ) = (ty, &self)
        {
            let n = length.unwrap_or(1);
            if let (Ok(v), true) = (v.parse::<u64>(), n < 64) {
                return DefaultValue::Literal {
                    value: Literal::Number((v & ((1u64 << n) - 1)).to_string()),
                };
            }
        }
        // A number in a varying one: its binary digits.
        if let (
            D::Bit { varying: true, .. },
            DefaultValue::Literal {
                value: Literal::Number(v),
            },
        ) = (ty, &self)
        {
            if let Ok(v) = v.parse::<u64>() {
                return DefaultValue::Literal {
                    value: Literal::String(format!("{v:b}")),
                }
                .fitted(ty);
            }
        }
        if let (
            D::Bit { length, varying },
            DefaultValue::Literal {
                value: Literal::String(v),
            },
        ) = (ty, &self)
        {
            if !v.bytes().all(|c| c == b'0' || c == b'1') {
                return self;
            }
            let mut bits = v.clone();
            match (length, varying) {
                (Some(n), true) => bits.truncate(*n as usize),
                (_, true) => {}
                (n, false) => {
                    let n = n.unwrap_or(1) as usize;
                    bits.truncate(n);
                    bits.extend(std::iter::repeat_n('0', n - bits.len()));
                    if n <= 64 {
                        let value = u64::from_str_radix(&bits, 2).unwrap_or_default();
                        return DefaultValue::Literal {
                            value: Literal::Number(value.to_string()),
                        };
                    }
                }
            }
            return DefaultValue::Literal {
                value: Literal::String(bits),
            };
        }
        // A uuid as text in any form the sources read ({A0EE...}, no hyphens): the
        // canonical form, which every target stores and prints alike.
        if let (
            D::Uuid,
            DefaultValue::Literal {
                value: Literal::String(v),
            },
        ) = (ty, &self)
        {
            let h: String = v
                .chars()
                .filter(|c| !matches!(c, '-' | '{' | '}'))
                .collect();
            return match bytes_from_hex(&h).and_then(|b| <[u8; 16]>::try_from(b).ok()) {
                Some(b) => DefaultValue::Literal {
                    value: Literal::String(uuid_text(&b)),
                },
                None => self,
            };
        }
        // BINARY(n) pads its value with zero bytes to n (MySQL's rule), a string's
        // bytes as well.
        if let (
            D::Binary { length },
            DefaultValue::Literal {
                value: v @ (Literal::Bytes(_) | Literal::String(_)),
            },
        ) = (ty, &self)
        {
            let mut b = match v {
                Literal::String(s) => s.as_bytes().to_vec(),
                _ => v.bytes().unwrap_or_default(),
            };
            if b.len() < *length as usize {
                b.resize(*length as usize, 0);
            }
            return DefaultValue::Literal {
                value: Literal::from_bytes(&b),
            };
        }
        let DefaultValue::Literal {
            value: value @ Literal::Bytes(_),
        } = &self
        else {
            return self;
        };
        let Some(b) = value.bytes() else {
            return self;
        };
        let value = match ty {
            D::Boolean
            | D::Int { .. }
            | D::Decimal { .. }
            | D::Float { .. }
            | D::Money
            | D::Year
            | D::Bit { .. }
                if b.len() <= 16 =>
            {
                Literal::Number(b.iter().fold(0u128, |n, x| n << 8 | *x as u128).to_string())
            }
            D::Char { .. }
            | D::Varchar { .. }
            | D::Text { .. }
            | D::Enum { .. }
            | D::Set { .. }
            | D::Json { .. } => match String::from_utf8(b) {
                Ok(s) => Literal::String(s),
                Err(_) => return self,
            },
            D::Uuid => match <[u8; 16]>::try_from(b) {
                Ok(b) => Literal::String(uuid_text(&b)),
                Err(_) => return self,
            },
            _ => return self,
        };
        match (ty, value) {
            // (Bytes are a number of as many bits: cut to the column's too.)
            (D::Bit { .. }, value @ Literal::Number(_)) => {
                DefaultValue::Literal { value }.fitted(ty)
            }
            (_, value) => DefaultValue::Literal { value },
        }
    }
}

/// How an identity column generates values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdentityKind {
    /// Generated unless the insert gives a value (MySQL AUTO_INCREMENT, serial,
    /// GENERATED BY DEFAULT AS IDENTITY).
    ByDefault,
    /// Always generated (GENERATED ALWAYS AS IDENTITY).
    Always,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Identity {
    pub kind: IdentityKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub increment: Option<i64>,
}

/// A generated (computed) column.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Generated {
    /// The expression as the source dialect wrote it.
    pub expr: String,
    pub dialect: String,
    /// Stored (materialised) or virtual (computed on read).
    pub stored: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Column {
    pub name: String,
    pub data_type: DataType,
    pub nullable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<DefaultValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<Identity>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated: Option<Generated>,
    /// MySQL `ON UPDATE CURRENT_TIMESTAMP[(p)]`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub on_update_current_timestamp: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charset: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collation: Option<String>,
}

impl Column {
    pub fn new(name: &str, data_type: DataType) -> Self {
        Column {
            name: name.to_owned(),
            data_type,
            nullable: true,
            default: None,
            identity: None,
            generated: None,
            on_update_current_timestamp: false,
            comment: None,
            charset: None,
            collation: None,
        }
    }
}

/// One part of an index: a column (with optional prefix length) or an expression.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct IndexPart {
    /// Column name, or the expression text for an expression index.
    pub column: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expression: bool,
    /// MySQL prefix length, `KEY (a(10))`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<u32>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub descending: bool,
}

impl IndexPart {
    pub fn column(name: &str) -> Self {
        IndexPart {
            column: name.to_owned(),
            expression: false,
            prefix: None,
            descending: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum IndexKind {
    #[default]
    Plain,
    Unique,
    Fulltext,
    Spatial,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Index {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub kind: IndexKind,
    pub parts: Vec<IndexPart>,
    /// A partial index's condition (PostgreSQL `WHERE ...`): only rows for which it
    /// holds are indexed (and, for a unique index, must be unique).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicate: Option<Predicate>,
}

/// SQL text with no neutral form (a partitioning clause, a storage option, a type
/// conversion expression), tagged with the dialect it is written in: only a target
/// of that dialect may use it; any other reports it. Read from an untagged string
/// (IR written before the tag existed), the dialect is empty: no target uses it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct DialectSql {
    pub dialect: String,
    pub sql: String,
}

impl<'de> Deserialize<'de> for DialectSql {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Tagged { dialect: String, sql: String },
            Untagged(String),
        }
        Ok(match Repr::deserialize(d)? {
            Repr::Tagged { dialect, sql } => DialectSql { dialect, sql },
            Repr::Untagged(sql) => DialectSql {
                dialect: String::new(),
                sql,
            },
        })
    }
}

impl DialectSql {
    pub fn new(dialect: &str, sql: impl Into<String>) -> Self {
        DialectSql {
            dialect: dialect.to_owned(),
            sql: sql.into(),
        }
    }

    /// The text, if it is written in `dialect`.
    pub fn for_dialect(&self, dialect: &str) -> Option<&str> {
        (self.dialect == dialect).then_some(self.sql.as_str())
    }
}

impl std::fmt::Display for DialectSql {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.sql)
    }
}

/// A condition as the source wrote it, with its neutral form where it has one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Predicate {
    pub expr: String,
    pub dialect: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub neutral: Option<crate::expr::Expr>,
}

/// What a foreign key does to the referencing rows when the referenced row is deleted
/// or its key updated. Serialised as the SQL words (`"SET NULL"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RefAction {
    #[serde(rename = "CASCADE")]
    Cascade,
    #[serde(rename = "SET NULL")]
    SetNull,
    #[serde(rename = "SET DEFAULT")]
    SetDefault,
    #[serde(rename = "RESTRICT")]
    Restrict,
    #[serde(rename = "NO ACTION")]
    NoAction,
}

impl RefAction {
    /// The SQL words, as every dialect writes them.
    pub fn sql(self) -> &'static str {
        match self {
            RefAction::Cascade => "CASCADE",
            RefAction::SetNull => "SET NULL",
            RefAction::SetDefault => "SET DEFAULT",
            RefAction::Restrict => "RESTRICT",
            RefAction::NoAction => "NO ACTION",
        }
    }

    /// Whether the action changes referencing rows (CASCADE, SET NULL, SET DEFAULT),
    /// rather than refusing the change (RESTRICT, NO ACTION).
    pub fn changes_rows(self) -> bool {
        matches!(
            self,
            RefAction::Cascade | RefAction::SetNull | RefAction::SetDefault
        )
    }
}

impl fmt::Display for RefAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.sql())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ForeignKey {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub columns: Vec<String>,
    pub ref_table: TableName,
    pub ref_columns: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_delete: Option<RefAction>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_update: Option<RefAction>,
    /// `DEFERRABLE`: checked at commit when `INITIALLY DEFERRED` (Some(true)), at
    /// each statement unless deferred (Some(false)); None: not deferrable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deferrable: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Check {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The expression as the source wrote it, in `dialect`.
    pub expr: String,
    pub dialect: String,
    /// The same expression in neutral form, when it is inside the common subset
    /// every dialect can state; otherwise only the source's text exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub neutral: Option<crate::expr::Expr>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PrimaryKey {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub columns: Vec<String>,
    /// MySQL prefix lengths of key columns, `PRIMARY KEY (id, body(10))`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prefixes: BTreeMap<String, u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Table {
    pub name: TableName,
    pub columns: Vec<Column>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_key: Option<PrimaryKey>,
    /// Unique keys and plain, fulltext and spatial indexes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub indexes: Vec<Index>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub foreign_keys: Vec<ForeignKey>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<Check>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// Partitioning clause as the source wrote it (carried, not translated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_by: Option<DialectSql>,
    /// Storage options with no neutral meaning (ENGINE, DEFAULT CHARSET, TABLESPACE...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, DialectSql>,
}

impl Table {
    pub fn new(name: TableName) -> Self {
        Table {
            name,
            columns: Vec::new(),
            primary_key: None,
            indexes: Vec::new(),
            foreign_keys: Vec::new(),
            checks: Vec::new(),
            comment: None,
            partition_by: None,
            options: Default::default(),
        }
    }

    /// The column named exactly `name` (the catalog applies the source's case rules
    /// before names reach here).
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.name == name)
    }
}

#[cfg(test)]
mod dialect_sql_tests {
    use super::DialectSql;

    #[test]
    fn tagged_text_is_used_only_by_its_dialect_and_old_untagged_text_by_none() {
        let p = DialectSql::new("mysql", "PARTITION BY HASH (id)");
        assert_eq!(p.for_dialect("mysql"), Some("PARTITION BY HASH (id)"));
        assert_eq!(p.for_dialect("postgres"), None);
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<DialectSql>(&json).unwrap(), p);
        // IR written before the tag: kept, used by no target (reported instead).
        let old: DialectSql = serde_json::from_str("\"ENGINE=InnoDB\"").unwrap();
        assert_eq!(old.sql, "ENGINE=InnoDB");
        assert_eq!(old.for_dialect("mysql"), None);
    }
}
