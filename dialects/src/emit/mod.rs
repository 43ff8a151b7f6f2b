//! IR -> target SQL text.
//!
//! An [`Emitter`] turns the small changes of one source statement into target
//! statements. It sees the catalog before and after the statement, because some
//! targets need the whole column to change one fact of it (MySQL's MODIFY restates the
//! column; several changes to one column are merged into one MODIFY). Names are mapped
//! from the source's case rules to the target's and shortened to the target's limit.

pub mod types;

use crate::Dialect;
use ddl_core::names::{map_case, shorten};
use ddl_core::{
    Catalog, Column, ColumnPosition, DefaultValue, Diagnostics, ForeignKey, IdentityKind, Index,
    IndexKind, IndexPart, Literal, SchemaChange, Table, TableName,
};

/// Quote a string literal for `dialect`.
pub fn string_literal(dialect: Dialect, s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\'' => out.push_str("''"),
            '\\' if dialect == Dialect::MySql => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// A byte string (hex digits) as a literal of `dialect`'s byte type.
/// A date and time written with an offset (`2020-01-01 00:00:00+05`,
/// `...00.5-08:30`), as the same instant in UTC without one; None for text
/// without an offset.
fn utc_text(v: &str) -> Option<String> {
    let t = chrono::DateTime::parse_from_str(v.trim(), "%Y-%m-%d %H:%M:%S%.f%#z")
        .or_else(|_| chrono::DateTime::parse_from_str(v.trim(), "%Y-%m-%dT%H:%M:%S%.f%#z"))
        .ok()?
        .naive_utc();
    let text = t.format("%Y-%m-%d %H:%M:%S%.f").to_string();
    Some(text)
}

pub fn bytes_literal(dialect: Dialect, hex: &str) -> String {
    match dialect {
        Dialect::MySql => format!("X'{hex}'"),
        Dialect::Postgres => format!("'\\x{hex}'::bytea"),
        Dialect::Oracle => format!("HEXTORAW('{}')", hex.to_ascii_uppercase()),
    }
}

/// Words quoted although no dialect's reserved list has them (the SQL standard's
/// core); the dialects' own lists are `grammar::keywords`. Sorted.
const ALSO_QUOTED: &[&str] = &["PRIVILEGES", "TIME", "TIMESTAMP"];

/// Whether `name` is a reserved word of any dialect, in any case: a name spelled like
/// one is always quoted, so the output reads back in every dialect.
fn is_keyword(name: &str) -> bool {
    // Words of up to 16 bytes as one integer each (upper case), sorted by length:
    // a name is compared with the words of its length, integer to integer (this
    // runs for every identifier written); longer words by text.
    struct Words {
        short: Vec<Vec<u128>>,
        long: Vec<&'static str>,
    }
    static ALL: std::sync::OnceLock<Words> = std::sync::OnceLock::new();
    let all = ALL.get_or_init(|| {
        let mut w = Words {
            short: vec![Vec::new(); 17],
            long: Vec::new(),
        };
        for k in [
            grammar::Flavor::MySql,
            grammar::Flavor::Postgres,
            grammar::Flavor::Oracle,
        ]
        .into_iter()
        .flat_map(grammar::keywords::reserved)
        .chain(ALSO_QUOTED)
        {
            match packed(k) {
                Some(n) => w.short[k.len()].push(n),
                None => w.long.push(k),
            }
        }
        for v in &mut w.short {
            v.sort_unstable();
            v.dedup();
        }
        w.long.sort_unstable();
        w.long.dedup();
        w
    });
    match packed(name) {
        Some(n) => all.short[name.len()].binary_search(&n).is_ok(),
        None => grammar::keywords::contains_any_case(&all.long, name),
    }
}

/// A name of up to 16 bytes, upper-cased, as one integer (None: longer, or empty).
fn packed(name: &str) -> Option<u128> {
    let b = name.as_bytes();
    if b.is_empty() || b.len() > 16 {
        return None;
    }
    let mut a = [0u8; 16];
    a[..b.len()].copy_from_slice(b);
    a.make_ascii_uppercase();
    Some(u128::from_le_bytes(a))
}

/// Quote an identifier for `dialect` when it needs it: anything but a plain name in the
/// target's natural case, and every keyword.
pub fn quote_ident(dialect: Dialect, name: &str) -> String {
    let plain = !name.is_empty()
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| match dialect {
            Dialect::MySql => c.is_ascii_alphanumeric() || c == '_',
            Dialect::Postgres => c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_',
            Dialect::Oracle => c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_',
        })
        && !is_keyword(name);
    if plain {
        return name.to_owned();
    }
    match dialect {
        Dialect::MySql => format!("`{}`", name.replace('`', "``")),
        _ => format!("\"{}\"", name.replace('"', "\"\"")),
    }
}

/// Context for emitting one source statement.
pub struct EmitCtx<'a> {
    pub source: Dialect,
    pub before: &'a Catalog,
    pub after: &'a Catalog,
    pub diags: &'a mut Diagnostics,
}

/// Emits IR changes as one target dialect's SQL.
#[derive(Debug, Clone)]
pub struct Emitter {
    pub target: Dialect,
    /// Source schemas written as other target schemas (databases): lower-case
    /// source name, and the target's name (None: unqualified, the current one).
    schemas: Vec<(String, Option<String>)>,
    /// Foreign keys named anew in the target (see [`crate::fk_names`]).
    fk_renames: crate::fk_names::Renames,
}

impl Emitter {
    pub fn new(target: Dialect) -> Self {
        Emitter {
            target,
            schemas: Vec::new(),
            fk_renames: Default::default(),
        }
    }

    /// A sequence's name in the target, its schema as the target names it.
    pub fn sequence_ref(&self, source: Dialect, name: &TableName) -> String {
        let mut sink = Diagnostics::default();
        let empty = Catalog::default();
        let mut cx = EmitCtx {
            source,
            before: &empty,
            after: &empty,
            diags: &mut sink,
        };
        self.table(&mut cx, name)
    }

    /// Write the foreign keys in `renames` under their new names.
    pub fn with_fk_renames(mut self, renames: crate::fk_names::Renames) -> Self {
        self.fk_renames = renames;
        self
    }

    /// Write names of the source schemas in `map` as the schemas they map to.
    pub fn with_schemas(mut self, map: &[(String, Option<String>)]) -> Self {
        self.schemas = map.to_vec();
        self
    }

    /// What source schema `s` is called in the target (None: unqualified).
    pub fn schema_of<'a>(&'a self, s: &'a str) -> Option<&'a str> {
        match self.schemas.iter().find(|(k, _)| k.eq_ignore_ascii_case(s)) {
            Some((_, to)) => to.as_deref(),
            None => Some(s),
        }
    }

    /// A name in the target: case mapped, shortened (with a warning), quoted.
    pub fn ident(&self, cx: &mut EmitCtx<'_>, name: &str) -> String {
        let mapped = map_case(name, cx.source.fold(), self.target.fold());
        let max = self.target.max_ident_bytes();
        if mapped.len() <= max {
            return quote_ident(self.target, &mapped);
        }
        let short = shorten(&mapped, max);
        cx.diags.warn(format!(
            "name `{mapped}` is longer than {max} bytes for {}: shortened to `{short}`",
            self.target
        ));
        quote_ident(self.target, &short)
    }

    pub fn table(&self, cx: &mut EmitCtx<'_>, t: &TableName) -> String {
        match t.schema.as_deref().and_then(|s| self.schema_of(s)) {
            Some(s) => format!("{}.{}", self.ident(cx, s), self.ident(cx, &t.name)),
            None => self.ident(cx, &t.name),
        }
    }

    /// Index names: per table in MySQL, per schema in PostgreSQL and Oracle. Names
    /// from a MySQL source get the table name as a prefix there, so two tables' `idx_a`
    /// cannot collide; unnamed indexes get `<table>_<columns>_idx`.
    fn index_name(&self, cx: &mut EmitCtx<'_>, table: &TableName, ix: &Index) -> String {
        let cols = ix
            .parts
            .iter()
            .map(|p| p.column.as_str())
            .filter(|c| c.chars().all(|ch| ch.is_alphanumeric() || ch == '_'))
            .collect::<Vec<_>>()
            .join("_");
        let base = match (&ix.name, self.target) {
            (Some(n), Dialect::MySql) => n.clone(),
            (Some(n), _) if cx.source != Dialect::MySql => n.clone(),
            (Some(n), _) => format!("{}_{}", table.name, n),
            (None, _) => format!(
                "{}_{}_{}",
                table.name,
                cols,
                if ix.kind == IndexKind::Unique {
                    "key"
                } else {
                    "idx"
                }
            ),
        };
        self.ident(cx, &base)
    }

    /// A column's target type. A key column takes what keys need: a column that
    /// references another takes the referenced column's target type (so the foreign
    /// key can be created), and its own mapping is reported where that differs.
    fn type_sql(&self, cx: &mut EmitCtx<'_>, table: &TableName, c: &Column) -> String {
        let own = self.own_type_sql(cx, table, c);
        match self.coherent_type(cx, table, &c.name, &own) {
            Some(parent) => {
                cx.diags.warn(format!(
                    "{table}.{}: becomes {parent} (not {own}) to match the column its foreign key references",
                    c.name
                ));
                parent
            }
            None => own,
        }
    }

    /// The type `table.column` (of own target type `own`) must take to match the
    /// column its foreign key references, where that differs from `own`. InnoDB lets
    /// a key's text column be shorter than the one it references: a column whose own
    /// MySQL keys hold fewer characters than the referenced VARCHAR keeps its share.
    fn coherent_type(
        &self,
        cx: &EmitCtx<'_>,
        table: &TableName,
        column: &str,
        own: &str,
    ) -> Option<String> {
        let mut parent = self.referenced_type(cx, table, column, 0)?;
        if self.target == Dialect::MySql && cx.source != Dialect::MySql {
            let len = parent
                .strip_prefix("VARCHAR(")
                .and_then(|r| r.strip_suffix(')'))
                .and_then(|n| n.parse::<u32>().ok());
            if let (Some(len), Some(share)) = (len, self.key_share(cx, table, column)) {
                if share < len {
                    parent = format!("VARCHAR({share})");
                }
            }
        }
        (!same_type_sql(&parent, own)).then_some(parent)
    }

    /// The target type of the column that `table.column` references through a foreign
    /// key, when that table is known (following chains of keys a few levels).
    fn referenced_type(
        &self,
        cx: &EmitCtx<'_>,
        table: &TableName,
        column: &str,
        depth: usize,
    ) -> Option<String> {
        if depth > 4 {
            return None;
        }
        let t = cx.after.table(table)?;
        let (ref_table, ref_col) = t.foreign_keys.iter().find_map(|fk| {
            let k = fk.columns.iter().position(|c| c == column)?;
            Some((fk.ref_table.clone(), fk.ref_columns.get(k)?.clone()))
        })?;
        if ref_table == *table && ref_col == column {
            return None;
        }
        let parent = cx
            .after
            .resolve_table(&ref_table)
            .and_then(|k| cx.after.table(k))?;
        let pcol = parent.column(&ref_col)?.clone();
        let pname = parent.name.clone();
        if let Some(up) = self.referenced_type(cx, &pname, &ref_col, depth + 1) {
            return Some(up);
        }
        Some(self.own_type_quiet(cx, cx.after, &pname, &pcol))
    }

    /// A column's own target type as seen in catalog `after`, asked without reporting
    /// the losses its mapping has (they are reported where the column is emitted).
    fn own_type_quiet(
        &self,
        cx: &EmitCtx<'_>,
        after: &Catalog,
        table: &TableName,
        c: &Column,
    ) -> String {
        let mut sink = Diagnostics::default();
        let mut quiet = EmitCtx {
            source: cx.source,
            before: cx.before,
            after,
            diags: &mut sink,
        };
        self.own_type_sql(&mut quiet, table, c)
    }

    /// [`Self::type_sql`], asked without reporting.
    fn type_quiet(&self, cx: &EmitCtx<'_>, table: &TableName, c: &Column) -> String {
        let mut sink = Diagnostics::default();
        let mut quiet = EmitCtx {
            source: cx.source,
            before: cx.before,
            after: cx.after,
            diags: &mut sink,
        };
        self.type_sql(&mut quiet, table, c)
    }

    /// The column's own target type, before foreign-key coherence.
    fn own_type_sql(&self, cx: &mut EmitCtx<'_>, table: &TableName, c: &Column) -> String {
        // Oracle's unconstrained NUMBER as a MySQL key: an integer id, not a
        // DECIMAL(65,30) with thirty zeros after the point in every key.
        if self.target == Dialect::MySql
            && cx.source == Dialect::Oracle
            && matches!(
                c.data_type,
                ddl_core::DataType::Decimal {
                    precision: None,
                    ..
                }
            )
            && (c.identity.is_some() || self.key_share(cx, table, &c.name).is_some())
        {
            cx.diags.warn(format!(
                "{table}.{}: key column of unconstrained NUMBER becomes BIGINT (fractions and values past 2^63-1 are refused)",
                c.name
            ));
            return "BIGINT".into();
        }
        let m = types::map_type(self.target, cx.source, &c.data_type);
        let mut sql = m.sql;
        if let Some(loss) = m.loss {
            cx.diags.warn(format!(
                "{table}.{}: {} -> {}: {loss}",
                c.name,
                type_label(&c.data_type),
                sql
            ));
        }
        // Identity columns must be integers (PostgreSQL: smallint, integer or bigint;
        // MySQL: AUTO_INCREMENT on an integer type).
        let (decimal, big) = match self.target {
            Dialect::Postgres => (sql.starts_with("numeric"), "bigint"),
            Dialect::MySql => (sql.starts_with("DECIMAL"), "BIGINT"),
            Dialect::Oracle => (false, ""),
        };
        if c.identity.is_some() && decimal {
            cx.diags.warn(format!(
                "{table}.{}: identity column of {} becomes {big} (values above 2^63-1 do not fit)",
                c.name,
                type_label(&c.data_type)
            ));
            sql = big.into();
        }
        // MySQL cannot index a whole TEXT value, and InnoDB's keys hold at most 3072
        // bytes (utf8mb4: 4 a character): a key column of unbounded text, or of a
        // declared length past its share of a key, becomes a VARCHAR that fits.
        if self.target == Dialect::MySql && cx.source != Dialect::MySql {
            let declared = match &c.data_type {
                ddl_core::DataType::Text { .. }
                | ddl_core::DataType::Varchar { length: None, .. }
                    if sql.ends_with("TEXT") =>
                {
                    Some(u32::MAX)
                }
                ddl_core::DataType::Varchar {
                    length: Some(n), ..
                }
                | ddl_core::DataType::Char { length: n, .. } => Some(*n),
                _ => None,
            };
            if let (Some(declared), Some(share)) = (declared, self.key_share(cx, table, &c.name)) {
                if declared > share {
                    cx.diags.warn(format!(
                        "{table}.{}: key column of {} becomes VARCHAR({share}) (MySQL keys hold at most 3072 bytes, 4 a character in utf8mb4; longer values are refused)",
                        c.name,
                        type_label(&c.data_type)
                    ));
                    sql = format!("VARCHAR({share})");
                }
            }
        }
        // Oracle keeps LOBs out of keys and indexes (ORA-02329, ORA-02327): a key or
        // indexed column of unbounded text becomes a VARCHAR2 its index can hold
        // (about 6,000 bytes a key with 8 KB blocks, 4 bytes a character in
        // AL32UTF8, at most 4,000 bytes a VARCHAR2).
        if self.target == Dialect::Oracle
            && cx.source != Dialect::Oracle
            && (sql == "CLOB" || sql == "NCLOB")
        {
            if let Some(share) = self.key_share_in(cx, table, &c.name, 6000, true) {
                let n = share.clamp(1, 1000);
                cx.diags.warn(format!(
                    "{table}.{}: key column of {} becomes VARCHAR2({n} CHAR) (Oracle indexes no CLOB; longer values are refused)",
                    c.name,
                    type_label(&c.data_type)
                ));
                sql = format!("VARCHAR2({n} CHAR)");
            }
        }
        sql
    }

    /// The most characters text column `column` may hold in `table`'s MySQL keys
    /// (primary and unique, whole-column parts, and the columns of a foreign key,
    /// which MySQL indexes): each key's 3072 bytes less its other columns' sizes,
    /// shared among its text columns, 4 bytes a character. None: in no such key.
    fn key_share(&self, cx: &EmitCtx<'_>, table: &TableName, column: &str) -> Option<u32> {
        self.key_share_in(cx, table, column, 3072, false)
    }

    /// [`Self::key_share`] with a key's `budget` of bytes, and plain indexes counted
    /// as keys when `plain` (Oracle indexes whole values; MySQL a prefix of text).
    fn key_share_in(
        &self,
        cx: &EmitCtx<'_>,
        table: &TableName,
        column: &str,
        budget: u32,
        plain: bool,
    ) -> Option<u32> {
        let t = cx.after.table(table)?;
        let mut keys: Vec<Vec<&str>> = Vec::new();
        if let Some(pk) = &t.primary_key {
            if pk.columns.iter().any(|c| c == column) && !pk.prefixes.contains_key(column) {
                keys.push(pk.columns.iter().map(String::as_str).collect());
            }
        }
        for ix in t
            .indexes
            .iter()
            .filter(|ix| ix.kind == IndexKind::Unique || (plain && ix.kind == IndexKind::Plain))
        {
            if ix
                .parts
                .iter()
                .any(|p| !p.expression && p.prefix.is_none() && p.column == column)
            {
                keys.push(
                    ix.parts
                        .iter()
                        .filter(|p| !p.expression && p.prefix.is_none())
                        .map(|p| p.column.as_str())
                        .collect(),
                );
            }
        }
        for fk in &t.foreign_keys {
            if fk.columns.iter().any(|c| c == column) {
                keys.push(fk.columns.iter().map(String::as_str).collect());
            }
        }
        keys.iter()
            .map(|cols| {
                let (mut fixed, mut texts) = (0u32, 0u32);
                for name in cols {
                    let Some(col) = t.columns.iter().find(|c| c.name == *name) else {
                        continue;
                    };
                    match key_bytes(&col.data_type) {
                        Some(b) => fixed += b,
                        None => texts += 1,
                    }
                }
                budget.saturating_sub(fixed) / texts.max(1) / 4
            })
            .min()
    }

    fn literal(&self, l: &Literal) -> String {
        match l {
            Literal::Null => "NULL".into(),
            Literal::Boolean(b) => match self.target {
                Dialect::Postgres => b.to_string(),
                _ => if *b { "1" } else { "0" }.into(),
            },
            Literal::Number(n) => n.clone(),
            Literal::String(s) => string_literal(self.target, s),
            Literal::Bytes(h) => bytes_literal(self.target, h),
        }
    }

    /// The default clause body, or None (with a warning) when the target has no
    /// equivalent.
    fn default_sql(
        &self,
        cx: &mut EmitCtx<'_>,
        table: &TableName,
        c: &Column,
        d: &DefaultValue,
    ) -> Option<String> {
        let col_prec = match c.data_type {
            ddl_core::DataType::Timestamp { precision, .. } => precision.min(6),
            _ => 0,
        };
        let fitted = d.clone().fitted(&c.data_type);
        Some(match &fitted {
            DefaultValue::Literal { value } => {
                // A byte string is bytes only to a byte column (elsewhere MySQL reads
                // it in the column's character set).
                let bytes_col = matches!(
                    c.data_type,
                    ddl_core::DataType::Binary { .. }
                        | ddl_core::DataType::Varbinary { .. }
                        | ddl_core::DataType::Blob { .. }
                );
                if let (Literal::Bytes(h), false) =
                    (value, bytes_col || self.target == Dialect::MySql)
                {
                    cx.diags.warn(format!(
                        "{table}.{}: the default is the bytes X'{h}', which a {} column of {} cannot hold as they are; not emitted",
                        c.name,
                        c.data_type.family(),
                        self.target
                    ));
                    return None;
                }
                // A time with its offset ('2020-01-01 00:00:00+05', PostgreSQL's
                // timestamptz) into MySQL, whose literals take none: the same instant
                // in UTC (the sink's sessions run in UTC).
                if let (
                    Dialect::MySql,
                    ddl_core::DataType::Timestamp { tz, .. },
                    Literal::String(v),
                ) = (self.target, &c.data_type, value)
                {
                    if *tz != ddl_core::TimeZone::None {
                        if let Some(utc) = utc_text(v) {
                            cx.diags.warn(format!(
                                "{table}.{}: the default `{v}` is given as UTC, `{utc}` (MySQL's literals take no offset; a session whose time_zone is not UTC reads another instant)",
                                c.name
                            ));
                            return Some(string_literal(self.target, &utc));
                        }
                    }
                }
                // MySQL's zero date has no equivalent elsewhere.
                if let (true, Literal::String(v)) = (self.target != Dialect::MySql, value) {
                    if v.starts_with("0000-00-00") {
                        cx.diags.warn(format!(
                            "{table}.{}: the default is MySQL's zero date `{v}`, which {} has no value for; not emitted",
                            c.name, self.target
                        ));
                        return None;
                    }
                }
                // Values of the source's type that the target's cannot hold.
                if let Literal::String(v) = value {
                    // Oracle reads '' as NULL.
                    let empty_is_null = self.target == Dialect::Oracle
                        && cx.source != Dialect::Oracle
                        && v.is_empty();
                    if empty_is_null {
                        cx.diags.warn(format!(
                            "{table}.{}: the default '' is NULL in Oracle; not emitted{}",
                            c.name,
                            if c.nullable {
                                ""
                            } else {
                                " (the NOT NULL column refuses rows that leave it out or give '')"
                            }
                        ));
                        return None;
                    }
                    // A PostgreSQL array literal into MySQL's JSON: the JSON array.
                    if self.target == Dialect::MySql
                        && matches!(c.data_type, ddl_core::DataType::Array { .. })
                    {
                        return match pg_array_as_json(v) {
                            Some(j) => Some(string_literal(self.target, &j)),
                            None => {
                                cx.diags.warn(format!(
                                    "{table}.{}: the array default `{v}` is not written as JSON; not emitted",
                                    c.name
                                ));
                                None
                            }
                        };
                    }
                    if !target_holds(self.target, &c.data_type, v) {
                        cx.diags.warn(format!(
                            "{table}.{}: the default `{v}` has no {} value; not emitted",
                            c.name, self.target
                        ));
                        return None;
                    }
                }
                // PostgreSQL text cannot hold a NUL character.
                if let (Dialect::Postgres, Literal::String(v)) = (self.target, value) {
                    if v.contains('\0') {
                        cx.diags.warn(format!(
                            "{table}.{}: the default holds a NUL character, which postgres text cannot; not emitted",
                            c.name
                        ));
                        return None;
                    }
                }
                // A boolean default on a boolean column in PostgreSQL; numbers elsewhere.
                if self.target == Dialect::Postgres && c.data_type == ddl_core::DataType::Boolean {
                    if let Literal::Number(n) = value {
                        return match n.as_str() {
                            "0" | "1" => Some((n == "1").to_string()),
                            _ => {
                                cx.diags.warn(format!(
                                    "{table}.{}: the default {n} is no boolean (only 0 and 1 are); not emitted",
                                    c.name
                                ));
                                None
                            }
                        };
                    }
                }
                // A bit string's digits (a varying one, or one past 64 bits): a bit
                // string literal where the column is one, its digits' text in a
                // MySQL LONGBLOB (as the rows' values are written); an Oracle RAW
                // takes a bit string as its bits in bytes.
                if let ddl_core::DataType::Bit { length, .. } = &c.data_type {
                    let bits = match value {
                        Literal::String(bits) if bits.bytes().all(|b| b == b'0' || b == b'1') => {
                            Some(bits.clone())
                        }
                        Literal::Number(n) => n.parse::<u64>().ok().map(|v| {
                            let width = length.map(|l| l as usize).unwrap_or(1);
                            format!("{v:0width$b}")
                        }),
                        _ => None,
                    };
                    match (self.target, bits) {
                        (Dialect::Postgres, Some(bits)) => return Some(format!("B'{bits}'")),
                        (Dialect::MySql, Some(bits))
                            if length.is_some_and(|n| n <= 64)
                                && matches!(value, Literal::String(_)) =>
                        {
                            return Some(format!("b'{bits}'"));
                        }
                        (Dialect::Oracle, Some(bits)) => {
                            if let Some(b) = ddl_core::schema::bytes_from_bits(&bits) {
                                let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
                                return Some(bytes_literal(self.target, &hex));
                            }
                        }
                        _ => {}
                    }
                }
                self.literal(value)
            }
            DefaultValue::CurrentTimestamp { .. } => match self.target {
                Dialect::MySql if col_prec > 0 => format!("CURRENT_TIMESTAMP({col_prec})"),
                Dialect::MySql | Dialect::Postgres => "CURRENT_TIMESTAMP".into(),
                Dialect::Oracle => {
                    if matches!(
                        c.data_type,
                        ddl_core::DataType::Timestamp {
                            precision: 0,
                            tz: ddl_core::TimeZone::None
                        }
                    ) {
                        "SYSDATE".into()
                    } else {
                        "SYSTIMESTAMP".into()
                    }
                }
            },
            DefaultValue::CurrentDate => match self.target {
                Dialect::MySql => "(CURRENT_DATE)".into(),
                Dialect::Postgres => "CURRENT_DATE".into(),
                Dialect::Oracle => "TRUNC(SYSDATE)".into(),
            },
            DefaultValue::CurrentTime => match self.target {
                Dialect::Oracle => {
                    cx.diags.warn(format!(
                        "{table}.{}: DEFAULT CURRENT_TIME has no Oracle equivalent and is not emitted",
                        c.name
                    ));
                    return None;
                }
                Dialect::MySql => "(CURRENT_TIME)".into(),
                Dialect::Postgres => "CURRENT_TIME".into(),
            },
            DefaultValue::NextVal { sequence } => match self.target {
                Dialect::Postgres => format!("nextval({})", string_literal(self.target, sequence)),
                // (Oracle's own `s.NEXTVAL` as written; another source's name as
                // PostgreSQL's nextval reads it: schema and name.)
                Dialect::Oracle if cx.source == Dialect::Oracle => {
                    format!("{}.NEXTVAL", self.ident(cx, sequence))
                }
                Dialect::Oracle => {
                    let name = crate::defs::Definitions::sequence_name(sequence);
                    format!("{}.NEXTVAL", self.table(cx, &name))
                }
                Dialect::MySql => {
                    cx.diags.warn(format!(
                        "{table}.{}: DEFAULT nextval of sequence {sequence} is not emitted for MySQL",
                        c.name
                    ));
                    return None;
                }
            },
            // An enum column is text with a CHECK here: the casts to the enum type in
            // a default (`ARRAY['a'::public."Role"]`, `ARRAY[]::public."Role"[]`) are
            // casts to the column's type.
            DefaultValue::Raw { dialect, text }
                if dialect == self.target.name()
                    && self.target == Dialect::Postgres
                    && enum_typed(&c.data_type)
                    && text.contains("::") =>
            {
                let elem = match &c.data_type {
                    ddl_core::DataType::Array { element } => element.as_ref(),
                    t => t,
                };
                let elem = types::map_type(self.target, cx.source, elem).sql;
                recast(text, &elem)
            }
            DefaultValue::Raw { dialect, text } if dialect == self.target.name() => text.clone(),
            DefaultValue::Raw { dialect, text } => {
                cx.diags.warn(format!(
                    "{table}.{}: default expression `{text}` ({dialect}) is not translated and is not emitted",
                    c.name
                ));
                return None;
            }
        })
    }

    /// Why column `c`'s default is not in what this emitter writes for it (the
    /// target has no equivalent, or cannot hold the value), or None: it is written,
    /// or the column has none. A sink asks this of a column added to a table that
    /// holds rows, whose older rows would otherwise read NULL.
    pub fn default_dropped(
        &self,
        source: Dialect,
        table: &TableName,
        c: &Column,
    ) -> Option<String> {
        let d = c.default.as_ref()?;
        let empty = Catalog::default();
        let mut diags = Diagnostics::default();
        let mut cx = EmitCtx {
            source,
            before: &empty,
            after: &empty,
            diags: &mut diags,
        };
        if self.default_sql(&mut cx, table, c, d).is_some() {
            return None;
        }
        Some(
            diags
                .take()
                .into_iter()
                .map(|d| d.message)
                .collect::<Vec<_>>()
                .join("; "),
        )
    }

    /// A column definition as it appears in CREATE TABLE / ADD / MODIFY.
    pub fn column_def(&self, cx: &mut EmitCtx<'_>, table: &TableName, c: &Column) -> String {
        let mut s = format!(
            "{} {}",
            self.ident(cx, &c.name),
            self.type_sql(cx, table, c)
        );
        let same = cx.source == self.target;
        let generated = match &c.generated {
            Some(g) if g.dialect == self.target.name() => Some(g),
            Some(g) => {
                cx.diags.warn(format!(
                    "{table}.{}: generated expression `{}` ({}) is not translated: emitted as a plain column",
                    c.name, g.expr, g.dialect
                ));
                None
            }
            None => None,
        };
        // A JSON column takes no charset or collation (MariaDB's JSON is utf8mb4_bin
        // already and refuses them after the type name).
        let json = matches!(c.data_type, ddl_core::DataType::Json { .. });
        if self.target == Dialect::MySql && same && !json {
            if let Some(cs) = &c.charset {
                s.push_str(&format!(" CHARACTER SET {cs}"));
            }
            match c.collation.as_deref() {
                // The IR's name for the binary collation of the column's charset.
                Some("binary") => s.push_str(" BINARY"),
                Some(co) => s.push_str(&format!(" COLLATE {co}")),
                None => {}
            }
        } else if let Some(co) = c.collation.as_ref().filter(|_| !json) {
            cx.diags.skip(format!(
                "{table}.{}: collation {co} is not carried to {}",
                c.name, self.target
            ));
        }
        let default = match &c.default {
            Some(d) if c.identity.is_none() && generated.is_none() => {
                self.default_sql(cx, table, c, d)
            }
            _ => None,
        };
        let identity = c.identity.as_ref();
        match self.target {
            Dialect::MySql => {
                if let Some(g) = generated {
                    s.push_str(&format!(
                        " GENERATED ALWAYS AS ({}) {}",
                        g.expr,
                        if g.stored { "STORED" } else { "VIRTUAL" }
                    ));
                } else {
                    if !c.nullable {
                        s.push_str(" NOT NULL");
                    } else if matches!(
                        c.data_type,
                        ddl_core::DataType::Timestamp {
                            tz: ddl_core::TimeZone::Instant,
                            ..
                        }
                    ) {
                        // Explicit, so explicit_defaults_for_timestamp=OFF adds nothing.
                        s.push_str(" NULL");
                    }
                    if let Some(d) = default {
                        s.push_str(&format!(" DEFAULT {d}"));
                    }
                    if c.on_update_current_timestamp {
                        let p = match c.data_type {
                            ddl_core::DataType::Timestamp { precision, .. } if precision > 0 => {
                                format!("({})", precision.min(6))
                            }
                            _ => String::new(),
                        };
                        s.push_str(&format!(" ON UPDATE CURRENT_TIMESTAMP{p}"));
                    }
                    if let Some(id) = identity {
                        s.push_str(" AUTO_INCREMENT");
                        if id.kind == IdentityKind::Always {
                            cx.diags.warn(format!(
                                "{table}.{}: GENERATED ALWAYS becomes AUTO_INCREMENT (explicit values are accepted)",
                                c.name
                            ));
                        }
                    }
                }
                if let Some(cm) = &c.comment {
                    s.push_str(&format!(" COMMENT {}", string_literal(self.target, cm)));
                }
            }
            Dialect::Postgres => {
                if let Some(id) = identity {
                    s.push_str(&self.identity_sql(id));
                }
                if !c.nullable && identity.is_none() {
                    s.push_str(" NOT NULL");
                }
                if let Some(d) = default {
                    s.push_str(&format!(" DEFAULT {d}"));
                }
                if let Some(g) = generated {
                    if !g.stored {
                        cx.diags.warn(format!(
                            "{table}.{}: virtual generated column becomes STORED (PostgreSQL has no virtual columns)",
                            c.name
                        ));
                    }
                    s.push_str(&format!(" GENERATED ALWAYS AS ({}) STORED", g.expr));
                }
                if c.on_update_current_timestamp {
                    cx.diags.warn(format!(
                        "{table}.{}: ON UPDATE CURRENT_TIMESTAMP needs a trigger in postgres and is not emitted",
                        c.name
                    ));
                }
                self.enum_check(cx, c, &mut s);
            }
            Dialect::Oracle => {
                if let Some(g) = generated {
                    s.push_str(&format!(" GENERATED ALWAYS AS ({}) VIRTUAL", g.expr));
                } else {
                    if let Some(d) = default {
                        s.push_str(&format!(" DEFAULT {d}"));
                    }
                    if let Some(id) = identity {
                        s.push_str(&self.identity_sql(id));
                    }
                }
                if !c.nullable && identity.is_none() {
                    s.push_str(" NOT NULL");
                }
                if c.on_update_current_timestamp {
                    cx.diags.warn(format!(
                        "{table}.{}: ON UPDATE CURRENT_TIMESTAMP needs a trigger in oracle and is not emitted",
                        c.name
                    ));
                }
                self.enum_check(cx, c, &mut s);
            }
        }
        s
    }

    /// The name PostgreSQL gives the CHECK of an enum column made with the column
    /// (`<table>_<column>_check`), quoted; None when it is too long to be that.
    fn enum_check_name(&self, cx: &EmitCtx<'_>, table: &str, column: &str) -> Option<String> {
        let name = format!(
            "{}_{}_check",
            map_case(table, cx.source.fold(), self.target.fold()),
            map_case(column, cx.source.fold(), self.target.fold())
        );
        (name.len() <= self.target.max_ident_bytes()).then(|| quote_ident(self.target, &name))
    }

    /// The enum columns of `table` before the statement.
    fn enum_columns(&self, cx: &EmitCtx<'_>, table: &TableName) -> Vec<String> {
        cx.before
            .table(table)
            .map(|t| {
                t.columns
                    .iter()
                    .filter(|c| matches!(c.data_type, ddl_core::DataType::Enum { .. }))
                    .map(|c| c.name.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn enum_check(&self, cx: &mut EmitCtx<'_>, c: &Column, s: &mut String) {
        if let ddl_core::DataType::Enum { values } = &c.data_type {
            let list = values
                .iter()
                .map(|v| string_literal(self.target, v))
                .collect::<Vec<_>>()
                .join(", ");
            s.push_str(&format!(" CHECK ({} IN ({list}))", self.ident(cx, &c.name)));
        }
    }

    fn identity_sql(&self, id: &ddl_core::Identity) -> String {
        let mut s = match id.kind {
            IdentityKind::Always => " GENERATED ALWAYS AS IDENTITY".to_owned(),
            IdentityKind::ByDefault => " GENERATED BY DEFAULT AS IDENTITY".to_owned(),
        };
        let mut opts = Vec::new();
        if let Some(v) = id.start {
            opts.push(format!("START WITH {v}"));
        }
        if let Some(v) = id.increment {
            opts.push(format!("INCREMENT BY {v}"));
        }
        if !opts.is_empty() {
            s.push_str(&format!(" ({})", opts.join(" ")));
        }
        s
    }

    fn cols(&self, cx: &mut EmitCtx<'_>, cols: &[String]) -> String {
        cols.iter()
            .map(|c| self.ident(cx, c))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A primary key's column list: as index parts, so prefix lengths are kept for MySQL
    /// and reported where the target has none.
    fn key_cols(
        &self,
        cx: &mut EmitCtx<'_>,
        table: &TableName,
        cols: &[String],
        prefixes: &std::collections::BTreeMap<String, u32>,
    ) -> String {
        let key = Index {
            name: None,
            predicate: None,
            kind: IndexKind::Unique,
            parts: cols
                .iter()
                .map(|c| IndexPart {
                    prefix: prefixes.get(c).copied(),
                    ..IndexPart::column(c)
                })
                .collect(),
        };
        self.index_parts(cx, table, &key)
    }

    fn index_parts(&self, cx: &mut EmitCtx<'_>, table: &TableName, ix: &Index) -> String {
        ix.parts
            .iter()
            .map(|p| {
                let mut s = if p.expression {
                    if cx.source == self.target {
                        format!("({})", p.column)
                    } else if let Some(e) = crate::check::parse(cx.source, &p.column) {
                        format!("({})", self.print_expr(cx, &e))
                    } else {
                        cx.diags.warn(format!(
                            "{table}: index expression `{}` is not translated; indexed as written",
                            crate::translate::excerpt(&p.column)
                        ));
                        format!("({})", p.column)
                    }
                } else {
                    self.ident(cx, &p.column)
                };
                // MySQL indexes a TEXT or BLOB column only by a prefix: an index for
                // speed from another database gets the first 255 characters.
                if p.prefix.is_none()
                    && !p.expression
                    && ix.kind == IndexKind::Plain
                    && self.target == Dialect::MySql
                    && cx.source != Dialect::MySql
                {
                    if let Some(c) = self.after_column(cx, table, &p.column) {
                        let ty = self.type_quiet(cx, table, &c);
                        if ty.ends_with("TEXT") || ty.ends_with("BLOB") {
                            cx.diags.skip(format!(
                                "{table}: index {} covers the first 255 characters of {} ({ty} is indexed by a prefix in MySQL)",
                                ix.name.as_deref().unwrap_or("(unnamed)"),
                                p.column
                            ));
                            s.push_str("(255)");
                        }
                    }
                }
                if let Some(n) = p.prefix {
                    if self.target == Dialect::MySql {
                        s.push_str(&format!("({n})"));
                    } else {
                        cx.diags.warn(format!(
                            "{table}: index prefix length ({n}) on {} is dropped: the whole value is indexed",
                            p.column
                        ));
                    }
                }
                if p.descending {
                    s.push_str(" DESC");
                }
                s
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A foreign key from a table in a database of its own onto a table that goes to
    /// the current database (`--schema-map`, PostgreSQL's `public` by default): MySQL
    /// reads an unqualified reference in the child's database and has no name for
    /// the current one, so the key is not created, and the warning says how to keep it.
    fn unnameable_reference(
        &self,
        cx: &mut EmitCtx<'_>,
        table: &TableName,
        fk: &ForeignKey,
    ) -> bool {
        let (Some(child), Some(parent)) = (&table.schema, &fk.ref_table.schema) else {
            return false;
        };
        if self.schema_of(child).is_none() || self.schema_of(parent).is_some() {
            return false;
        }
        cx.diags.warn(format!(
            "{table}: foreign key {}references {}, which goes to the current database; MySQL cannot name that database from {child}: not created (--schema-map {parent}=DB names it)",
            fk.name.as_deref().map(|n| format!("{n} ")).unwrap_or_default(),
            fk.ref_table
        ));
        true
    }

    fn fk_sql(&self, cx: &mut EmitCtx<'_>, table: &TableName, fk: &ForeignKey) -> String {
        let mut s = String::new();
        if table.schema.is_some() && fk.ref_table.schema.is_none() && cx.source != self.target {
            cx.diags.warn(format!(
                "{table}: REFERENCES {} is unqualified; {} resolves it in schema {}",
                fk.ref_table.name,
                self.target,
                table.schema.as_deref().unwrap_or_default()
            ));
        }
        if let Some(n) = &fk.name {
            let n = crate::fk_names::target_name(&self.fk_renames, table, n);
            s.push_str(&format!("CONSTRAINT {} ", self.ident(cx, n)));
        }
        s.push_str(&format!(
            "FOREIGN KEY ({}) REFERENCES {} ({})",
            self.cols(cx, &fk.columns),
            self.table(cx, &fk.ref_table),
            self.cols(cx, &fk.ref_columns)
        ));
        use ddl_core::RefAction as A;
        if let Some(a) = fk.on_delete {
            match (self.target, a) {
                // Oracle refuses what is its own behaviour and SET DEFAULT.
                (Dialect::Oracle, A::NoAction | A::Restrict) => {}
                (Dialect::Oracle, A::SetDefault) => cx
                    .diags
                    .warn(format!("{table}: ON DELETE {a} is not supported by oracle")),
                _ => s.push_str(&format!(" ON DELETE {a}")),
            }
        }
        if let Some(a) = fk.on_update {
            match (self.target, a) {
                // What Oracle always does: nothing to write.
                (Dialect::Oracle, A::NoAction | A::Restrict) => {}
                (Dialect::Oracle, _) => cx
                    .diags
                    .warn(format!("{table}: ON UPDATE {a} is not supported by oracle")),
                _ => s.push_str(&format!(" ON UPDATE {a}")),
            }
        }
        if let Some(deferred) = fk.deferrable {
            let how = if deferred {
                "DEFERRABLE INITIALLY DEFERRED"
            } else {
                "DEFERRABLE"
            };
            match self.target {
                Dialect::Postgres | Dialect::Oracle => s.push_str(&format!(" {how}")),
                Dialect::MySql => cx.diags.warn(format!(
                    "{table}: foreign key {}is {how} in the source; MySQL checks it at each row (a transaction that writes a row before the row it references fails)",
                    fk.name.as_deref().map(|n| format!("{n} ")).unwrap_or_default()
                )),
            }
        }
        s
    }

    /// MySQL's index clause, `[UNIQUE|FULLTEXT|SPATIAL] KEY|INDEX [name] (parts)`, as
    /// written inside CREATE TABLE (`word` KEY) or after ALTER TABLE ... ADD (INDEX).
    fn mysql_index_clause(
        &self,
        cx: &mut EmitCtx<'_>,
        table: &TableName,
        ix: &Index,
        word: &str,
    ) -> String {
        let kind = match ix.kind {
            IndexKind::Plain => "",
            IndexKind::Unique => "UNIQUE ",
            IndexKind::Fulltext => "FULLTEXT ",
            IndexKind::Spatial => "SPATIAL ",
        };
        let name = ix
            .name
            .as_ref()
            .map(|n| format!("{} ", self.ident(cx, n)))
            .unwrap_or_default();
        let parts = self.index_parts(cx, table, ix);
        format!("{kind}{word} {name}({parts})")
    }

    /// An index from another dialect that MySQL/MariaDB cannot hold (on a JSON
    /// column, on an expression): reported, true. A unique one is a loss (a warning);
    /// one for speed is left out.
    fn mysql_index_refused(&self, cx: &mut EmitCtx<'_>, table: &TableName, index: &Index) -> bool {
        if cx.source == Dialect::MySql {
            return false;
        }
        let label = index.name.as_deref().unwrap_or("(unnamed)");
        let json = index.parts.iter().find(|p| {
            !p.expression
                && self
                    .after_column(cx, table, &p.column)
                    .is_some_and(|c| matches!(c.data_type, ddl_core::DataType::Json { .. }))
        });
        let msg = if let Some(p) = json {
            format!(
                "{table}: index {label} on JSON column {} is not created (MySQL indexes JSON only through generated columns)",
                p.column
            )
        } else if index.parts.iter().any(|p| p.expression) {
            // MariaDB has no expression indexes (MySQL 8.0.13 has).
            let what = index
                .parts
                .iter()
                .filter(|p| p.expression)
                .map(|p| crate::translate::excerpt(&p.column))
                .collect::<Vec<_>>()
                .join(", ");
            format!("{table}: index {label} on expression {what} is not created (MariaDB indexes columns only)")
        } else {
            return false;
        };
        if index.kind == IndexKind::Unique {
            cx.diags
                .warn(format!("{msg}: its uniqueness is not enforced"));
        } else {
            cx.diags.skip(msg);
        }
        true
    }

    /// `[CONSTRAINT name] CHECK (expr)` when the expression is in the target's dialect;
    /// otherwise a warning (expressions are not translated).
    fn check_sql(
        &self,
        cx: &mut EmitCtx<'_>,
        table: &TableName,
        ck: &ddl_core::Check,
    ) -> Option<String> {
        let body = if ck.dialect == self.target.name() {
            ck.expr.clone()
        } else if let Some(e) = &ck.neutral {
            let mut regexp = false;
            e.visit(&mut |x| {
                regexp |= matches!(
                    x,
                    ddl_core::Expr::Function {
                        func: ddl_core::expr::Func::RegexpMatch,
                        ..
                    }
                )
            });
            if regexp {
                cx.diags.warn(format!(
                    "{table}: CHECK {}holds a regular expression: {}'s and {}'s pattern syntaxes differ in places (character classes, escapes, case); check its pattern",
                    ck.name.as_deref().map(|n| format!("{n} ")).unwrap_or_default(),
                    ck.dialect,
                    self.target
                ));
            }
            match self.boolean_literals(cx, table, e) {
                Some(b) => self.print_expr(cx, &b),
                None => self.print_expr(cx, e),
            }
        } else {
            cx.diags.warn(format!(
                "{table}: CHECK {}({}) is not translated and is not created: `{}` is {} outside the expressions lakeshift translates",
                ck.name.as_deref().map(|n| format!("{n} ")).unwrap_or_default(),
                crate::translate::excerpt(&ck.expr),
                crate::translate::excerpt(&ck.expr),
                ck.dialect
            ));
            return None;
        };
        let name = ck
            .name
            .as_ref()
            .map(|n| format!("CONSTRAINT {} ", self.ident(cx, n)))
            .unwrap_or_default();
        Some(format!("{name}CHECK ({body})"))
    }

    /// Into PostgreSQL, a boolean column compared with 0 or 1 (MySQL's TINYINT(1)
    /// is its boolean, and its CHECKs compare it with numbers): compared with false
    /// or true instead, which PostgreSQL requires. None: nothing to change.
    fn boolean_literals(
        &self,
        cx: &EmitCtx<'_>,
        table: &TableName,
        e: &ddl_core::Expr,
    ) -> Option<ddl_core::Expr> {
        use ddl_core::expr::BinaryOp as Op;
        use ddl_core::{Expr, Literal};
        if self.target != Dialect::Postgres {
            return None;
        }
        let t = cx.after.table(table)?;
        let is_bool = |x: &Expr| matches!(x, Expr::Column { name } if t.column(name).is_some_and(|c| c.data_type == ddl_core::DataType::Boolean));
        let as_bool = |x: &mut Expr| {
            if let Expr::Literal {
                value: Literal::Number(n),
            } = x
            {
                if let Ok(v) = n.parse::<f64>() {
                    *x = Expr::Literal {
                        value: Literal::Boolean(v != 0.0),
                    };
                }
            }
        };
        let mut out = e.clone();
        let mut changed = false;
        out.visit_mut(&mut |x| match x {
            Expr::Binary {
                op: Op::Eq | Op::NotEq,
                left,
                right,
            } => {
                if is_bool(left) {
                    as_bool(right);
                    changed = true;
                } else if is_bool(right) {
                    as_bool(left);
                    changed = true;
                }
            }
            Expr::InList { expr, list, .. } if is_bool(expr) => {
                list.iter_mut().for_each(as_bool);
                changed = true;
            }
            _ => {}
        });
        changed.then_some(out)
    }

    /// A neutral expression in the target's spelling, columns named as the target
    /// names them.
    fn print_expr(&self, cx: &mut EmitCtx<'_>, e: &ddl_core::Expr) -> String {
        let mut names = Vec::new();
        for c in e.columns() {
            names.push((c.to_owned(), self.ident(cx, c)));
        }
        let mut column = |c: &str| {
            names
                .iter()
                .find(|(n, _)| n == c)
                .map(|(_, q)| q.clone())
                .unwrap_or_else(|| c.to_owned())
        };
        crate::check::Printer {
            target: self.target,
            column: &mut column,
        }
        .print(e)
    }

    /// A partial index's condition in the target's spelling, if it can be written.
    fn predicate_sql(&self, cx: &mut EmitCtx<'_>, p: &ddl_core::Predicate) -> Option<String> {
        if p.dialect == self.target.name() {
            return Some(p.expr.clone());
        }
        p.neutral.as_ref().map(|e| self.print_expr(cx, e))
    }

    /// A partial index the target cannot state: a unique one is not created (a full
    /// unique index would refuse rows the source accepts), a plain one covers every
    /// row. Returns whether to create the index without its condition.
    fn partial_fallback(
        &self,
        cx: &mut EmitCtx<'_>,
        table: &TableName,
        ix: &Index,
        p: &ddl_core::Predicate,
    ) -> bool {
        let label = ix.name.as_deref().unwrap_or("(unnamed)");
        let cond = crate::translate::excerpt(&p.expr);
        if ix.kind == IndexKind::Unique {
            cx.diags.warn(format!(
                "{table}: unique index {label} holds only WHERE {cond}; {} cannot state that here, so it is not created (a full unique index would refuse rows the source accepts)",
                self.target
            ));
            return false;
        }
        cx.diags.skip(format!(
            "{table}: index {label} covers every row on {}: its condition WHERE {cond} is dropped",
            self.target
        ));
        true
    }

    /// MySQL has no partial indexes: a unique one becomes a unique index on generated
    /// columns that are NULL where the condition is false (NULLs never collide).
    fn mysql_partial_unique(
        &self,
        cx: &mut EmitCtx<'_>,
        table: &TableName,
        ix: &Index,
        cond: &str,
        out: &mut Vec<String>,
    ) -> bool {
        if ix.kind != IndexKind::Unique || ix.parts.iter().any(|p| p.expression) {
            return false;
        }
        let tn = self.table(cx, table);
        let base = ix
            .name
            .clone()
            .unwrap_or_else(|| format!("{}_partial", table.name));
        let mut gens = Vec::new();
        let mut stmts = Vec::new();
        for p in &ix.parts {
            let Some(c) = self.after_column(cx, table, &p.column) else {
                return false;
            };
            let g = self.ident(cx, &format!("{base}_{}", c.name));
            let ty = self.type_sql(cx, table, &c);
            let mut cn = self.ident(cx, &c.name);
            // MariaDB refuses to index a generated column that reads a CHAR column
            // (its value depends on sql_mode PAD_CHAR_TO_FULL_LENGTH): RTRIM is the
            // value a CHAR column reads as anyway.
            if ty.starts_with("CHAR(") {
                cn = format!("RTRIM({cn})");
            }
            stmts.push(format!(
                "ALTER TABLE {tn} ADD COLUMN {g} {ty} GENERATED ALWAYS AS (CASE WHEN {cond} THEN {cn} END) VIRTUAL"
            ));
            gens.push(g);
        }
        let name = self.ident(cx, &base);
        stmts.push(format!(
            "ALTER TABLE {tn} ADD UNIQUE INDEX {name} ({})",
            gens.join(", ")
        ));
        cx.diags.warn(format!(
            "{table}: partial unique index {base} (WHERE {}) becomes a unique index on generated column(s) {} that hold the value only where the condition holds",
            crate::translate::excerpt(cond),
            gens.join(", ")
        ));
        out.extend(stmts);
        true
    }

    fn create_index_sql(
        &self,
        cx: &mut EmitCtx<'_>,
        table: &TableName,
        ix: &Index,
    ) -> Option<String> {
        let kind = match (ix.kind, self.target) {
            (IndexKind::Unique, _) => "UNIQUE ",
            (IndexKind::Plain, _) => "",
            (IndexKind::Fulltext, Dialect::MySql) => "FULLTEXT ",
            (IndexKind::Spatial, Dialect::MySql) => "SPATIAL ",
            (k, t) => {
                cx.diags.skip(format!(
                    "{table}: {} index {} has no {t} equivalent and is not emitted",
                    if k == IndexKind::Fulltext {
                        "FULLTEXT"
                    } else {
                        "SPATIAL"
                    },
                    ix.name.as_deref().unwrap_or("(unnamed)")
                ));
                return None;
            }
        };
        // An expression the target cannot be given: an index for speed is left out, a
        // unique one is reported as a loss (either way named).
        if cx.source != self.target {
            if let Some(p) = ix
                .parts
                .iter()
                .find(|p| p.expression && crate::check::parse(cx.source, &p.column).is_none())
            {
                let label = ix.name.as_deref().unwrap_or("(unnamed)");
                let msg = format!(
                    "{table}: index {label} on expression `{}` is not created: the expression is not translated to {}",
                    crate::translate::excerpt(&p.column),
                    self.target
                );
                if ix.kind == IndexKind::Unique {
                    cx.diags
                        .warn(format!("{msg}; its uniqueness is not enforced"));
                } else {
                    cx.diags.skip(msg);
                }
                return None;
            }
        }
        let name = self.index_name(cx, table, ix);
        let t = self.table(cx, table);
        if let Some(p) = &ix.predicate {
            match (self.predicate_sql(cx, p), self.target) {
                (Some(w), Dialect::Postgres) => {
                    let parts = self.index_parts(cx, table, ix);
                    return Some(format!(
                        "CREATE {kind}INDEX {name} ON {t} ({parts}) WHERE {w}"
                    ));
                }
                // Oracle leaves entries whose key is all NULL out of an index: a
                // function-based unique index on CASE WHEN cond THEN col END is
                // unique exactly where the condition holds.
                (Some(w), Dialect::Oracle)
                    if ix.kind == IndexKind::Unique && ix.parts.iter().all(|p| !p.expression) =>
                {
                    let cols: Vec<String> = ix
                        .parts
                        .iter()
                        .map(|q| format!("CASE WHEN {w} THEN {} END", self.ident(cx, &q.column)))
                        .collect();
                    cx.diags.warn(format!(
                        "{table}: partial unique index {} (WHERE {}) becomes a function-based unique index",
                        ix.name.as_deref().unwrap_or("(unnamed)"),
                        crate::translate::excerpt(&w)
                    ));
                    return Some(format!(
                        "CREATE UNIQUE INDEX {name} ON {t} ({})",
                        cols.join(", ")
                    ));
                }
                _ => {
                    if !self.partial_fallback(cx, table, ix, p) {
                        return None;
                    }
                }
            }
        }
        let parts = self.index_parts(cx, table, ix);
        Some(format!("CREATE {kind}INDEX {name} ON {t} ({parts})"))
    }

    fn comment_stmts(&self, cx: &mut EmitCtx<'_>, t: &Table, out: &mut Vec<String>) {
        if let Some(c) = &t.comment {
            let tn = self.table(cx, &t.name);
            out.push(format!(
                "COMMENT ON TABLE {tn} IS {}",
                string_literal(self.target, c)
            ));
        }
        for col in &t.columns {
            if let Some(c) = &col.comment {
                let tn = self.table(cx, &t.name);
                let cn = self.ident(cx, &col.name);
                out.push(format!(
                    "COMMENT ON COLUMN {tn}.{cn} IS {}",
                    string_literal(self.target, c)
                ));
            }
        }
    }

    fn create_table(&self, cx: &mut EmitCtx<'_>, t: &Table, if_not_exists: bool) -> Vec<String> {
        let mut out = Vec::new();
        let mut lines = Vec::new();
        let t = &*self.mysql_single_auto_increment(cx, t);
        for c in &t.columns {
            lines.push(self.column_def(cx, &t.name, c));
        }
        if let Some(pk) = &t.primary_key {
            let name = match (&pk.name, self.target) {
                (Some(n), Dialect::Postgres | Dialect::Oracle) if n != "PRIMARY" => {
                    format!("CONSTRAINT {} ", self.ident(cx, n))
                }
                _ => String::new(),
            };
            let cols = self.key_cols(cx, &t.name, &pk.columns, &pk.prefixes);
            lines.push(format!("{name}PRIMARY KEY ({cols})"));
        }
        let mut after = Vec::new();
        for ix in &t.indexes {
            if self.target == Dialect::MySql {
                // (Another dialect's table, from a schema history: its partial and
                // expression indexes as ALTER TABLE ... ADD INDEX would take them.)
                if self.mysql_index_refused(cx, &t.name, ix)
                    || ix
                        .predicate
                        .as_ref()
                        .is_some_and(|p| !self.partial_fallback(cx, &t.name, ix, p))
                {
                    continue;
                }
                lines.push(self.mysql_index_clause(cx, &t.name, ix, "KEY"));
            } else if let Some(s) = self.create_index_sql(cx, &t.name, ix) {
                after.push(s);
            }
        }
        for fk in &t.foreign_keys {
            if !self.unnameable_reference(cx, &t.name, fk) {
                lines.push(self.fk_sql(cx, &t.name, fk));
            }
        }
        for ck in &t.checks {
            if self.mysql_check_refused(cx, t, ck) {
                continue;
            }
            lines.extend(self.check_sql(cx, &t.name, ck));
        }
        let ine = if if_not_exists {
            if self.target == Dialect::Oracle {
                cx.diags
                    .warn("IF NOT EXISTS needs Oracle 23 or later".to_owned());
            }
            "IF NOT EXISTS "
        } else {
            ""
        };
        let mut s = format!(
            "CREATE TABLE {ine}{} (\n  {}\n)",
            self.table(cx, &t.name),
            lines.join(",\n  ")
        );
        // Options written in the target's own dialect are kept; the others have no
        // meaning there and are reported.
        let foreign: Vec<String> = t
            .options
            .iter()
            .filter(|(_, v)| self.target != Dialect::MySql || v.for_dialect("mysql").is_none())
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if self.target == Dialect::MySql {
            for (k, v) in &t.options {
                let Some(v) = v.for_dialect(self.target.name()) else {
                    continue;
                };
                let key = match k.as_str() {
                    "charset" => "DEFAULT CHARSET".to_owned(),
                    k => k.to_ascii_uppercase(),
                };
                s.push_str(&format!(" {key}={v}"));
            }
            if let Some(n) = t
                .columns
                .iter()
                .find_map(|c| c.identity.as_ref().and_then(|i| i.start))
            {
                s.push_str(&format!(" AUTO_INCREMENT={n}"));
            }
            if let Some(c) = &t.comment {
                s.push_str(&format!(" COMMENT={}", string_literal(self.target, c)));
            }
        }
        if !foreign.is_empty() {
            cx.diags.skip(format!(
                "{}: table options {} have no meaning for {}",
                t.name,
                foreign.join(" "),
                self.target
            ));
        }
        if let Some(p) = &t.partition_by {
            // A PostgreSQL partitioned table takes no row without its partitions,
            // which are tables of their own and are not translated (see the
            // parser's PARTITION OF): it is created unpartitioned, as into MySQL.
            if self.target == Dialect::Postgres && p.for_dialect("postgres").is_some() {
                cx.diags.skip(format!(
                    "{}: partitioning `{p}` is not carried (its partitions are tables of their own, which are not translated): the table is created unpartitioned and holds every partition's rows",
                    t.name
                ));
            } else if let Some(p) = p.for_dialect(self.target.name()) {
                s.push_str(&format!(" {p}"));
            } else {
                cx.diags.skip(format!(
                    "{}: partitioning `{p}` is not translated; the table is created unpartitioned",
                    t.name
                ));
            }
        }
        out.push(s);
        if self.target != Dialect::MySql {
            self.comment_stmts(cx, t, &mut out);
        }
        out.extend(after);
        out
    }

    /// Columns that become part of a key after they were created: where being a key
    /// changes their target type (text keys into MySQL), they are changed first.
    fn retype_key_columns(
        &self,
        cx: &mut EmitCtx<'_>,
        table: &TableName,
        cols: &[String],
        out: &mut Vec<String>,
    ) {
        for col in cols {
            let Some(c) = self.after_column(cx, table, col) else {
                continue;
            };
            // (Types whose form never depends on a key: nothing to compare.)
            if matches!(
                c.data_type,
                ddl_core::DataType::Int { .. }
                    | ddl_core::DataType::Boolean
                    | ddl_core::DataType::Float { .. }
                    | ddl_core::DataType::Date
                    | ddl_core::DataType::Time { .. }
                    | ddl_core::DataType::Timestamp { .. }
                    | ddl_core::DataType::Year
                    | ddl_core::DataType::Uuid
            ) {
                continue;
            }
            let was = self.own_type_quiet(cx, cx.before, table, &c);
            let now = self.own_type_quiet(cx, cx.after, table, &c);
            // Oracle changes no CLOB into a VARCHAR2 (ORA-22859), and indexes none.
            if self.target == Dialect::Oracle
                && (was == "CLOB" || was == "NCLOB")
                && !same_type_sql(&was, &now)
            {
                cx.diags.warn(format!(
                    "{table}.{col}: made a CLOB before this key or index named it; Oracle indexes no CLOB and cannot change it (declare a length in the source): the key or index will be refused"
                ));
                continue;
            }
            if !same_type_sql(&was, &now) && cx.before.table(table).is_some() {
                out.extend(self.emit(
                    &[SchemaChange::AlterColumnType {
                        table: table.clone(),
                        column: col.clone(),
                        data_type: c.data_type.clone(),
                        using: None,
                    }],
                    cx,
                ));
            }
        }
    }

    /// The columns a CHECK reads (None when only the source's text is known).
    fn check_columns(ck: &ddl_core::Check) -> Option<Vec<String>> {
        ck.neutral
            .as_ref()
            .map(|e| e.columns().into_iter().map(str::to_owned).collect())
    }

    /// Columns MySQL keeps out of CHECKs: AUTO_INCREMENT columns, and columns of a
    /// foreign key with a referential action (CASCADE, SET NULL, SET DEFAULT).
    fn mysql_check_barred(t: &Table, col: &str) -> Option<&'static str> {
        // An identity is AUTO_INCREMENT on MySQL once it leads a key.
        if leads_key_of(t, col) && t.column(col).is_some_and(|c| c.identity.is_some()) {
            return Some("an AUTO_INCREMENT column");
        }
        let acted = t.foreign_keys.iter().any(|fk| {
            fk.columns.iter().any(|c| c == col)
                && [fk.on_delete, fk.on_update]
                    .into_iter()
                    .flatten()
                    .any(|a| a.changes_rows())
        });
        acted.then_some("a column of a foreign key with a referential action")
    }

    /// MySQL refuses a CHECK that reads a barred column: it is left out, named.
    fn mysql_check_refused(&self, cx: &mut EmitCtx<'_>, t: &Table, ck: &ddl_core::Check) -> bool {
        if self.target != Dialect::MySql || cx.source == Dialect::MySql {
            return false;
        }
        let Some(cols) = Self::check_columns(ck) else {
            return false;
        };
        for col in cols {
            if let Some(why) = Self::mysql_check_barred(t, &col) {
                cx.diags.warn(format!(
                    "{}: CHECK {}is not created: it reads {col}, {why}, which MySQL does not allow in a CHECK",
                    t.name,
                    ck.name.as_deref().map(|n| format!("{n} ")).unwrap_or_default()
                ));
                return true;
            }
        }
        false
    }

    /// Before `cols` become barred from CHECKs (AUTO_INCREMENT, a key with an
    /// action), the CHECKs that read them are dropped, each named in a warning.
    fn mysql_drop_checks_on(
        &self,
        cx: &mut EmitCtx<'_>,
        table: &TableName,
        cols: &[String],
        why: &str,
        out: &mut Vec<String>,
    ) {
        if self.target != Dialect::MySql || cx.source == Dialect::MySql {
            return;
        }
        let Some(t) = cx.after.table(table).cloned() else {
            return;
        };
        let before = cx.before.table(table).cloned();
        for ck in &t.checks {
            let Some(cs) = Self::check_columns(ck) else {
                continue;
            };
            if !cs.iter().any(|c| cols.contains(c)) {
                continue;
            }
            // Already left out or dropped for another of its columns.
            if before
                .as_ref()
                .is_some_and(|b| cs.iter().any(|c| Self::mysql_check_barred(b, c).is_some()))
            {
                continue;
            }
            let label = ck.name.as_deref().unwrap_or("(unnamed)");
            cx.diags.warn(format!(
                "{table}: CHECK {label} is dropped: it reads {}, now {why}, which MySQL does not allow in a CHECK",
                cols.join(", ")
            ));
            if let Some(n) = &ck.name {
                let tn = self.table(cx, table);
                let n = self.ident(cx, n);
                out.push(format!("ALTER TABLE {tn} DROP CONSTRAINT {n}"));
            }
        }
    }

    /// Whether `col` leads a key (primary or index) of `table` in `cat`.
    fn leads_key(&self, cat: &Catalog, table: &TableName, col: &str) -> bool {
        cat.table(table).is_some_and(|t| leads_key_of(t, col))
    }

    /// A key was added that `col` leads: an identity column that had to wait for one
    /// (MySQL) gets AUTO_INCREMENT now, and its start value.
    fn mysql_identity_with_key(
        &self,
        cx: &mut EmitCtx<'_>,
        table: &TableName,
        col: &str,
        out: &mut Vec<String>,
    ) {
        if self.target != Dialect::MySql || self.leads_key(cx.before, table, col) {
            return;
        }
        let Some(c) = self.after_column(cx, table, col) else {
            return;
        };
        let Some(id) = &c.identity else {
            return;
        };
        // One AUTO_INCREMENT column a table: another identity may have it already.
        if let Some(other) = cx.before.table(table).and_then(|t| {
            t.columns
                .iter()
                .find(|o| o.name != c.name && o.identity.is_some() && leads_key_of(t, &o.name))
        }) {
            cx.diags.warn(format!(
                "{table}.{col}: MySQL allows one AUTO_INCREMENT column, and {} has it: {col} stays a plain column",
                other.name
            ));
            return;
        }
        let start = id.start;
        let tn = self.table(cx, table);
        self.mysql_drop_checks_on(
            cx,
            table,
            std::slice::from_ref(&c.name),
            "an AUTO_INCREMENT column",
            out,
        );
        let def = self.column_def(cx, table, &c);
        out.push(format!("ALTER TABLE {tn} MODIFY COLUMN {def}"));
        if let Some(n) = start {
            out.push(format!("ALTER TABLE {tn} AUTO_INCREMENT = {n}"));
        }
    }

    /// MySQL allows one AUTO_INCREMENT column per table, and it must lead a key: other
    /// identity columns lose their generation, with a warning.
    fn mysql_single_auto_increment<'t>(
        &self,
        cx: &mut EmitCtx<'_>,
        t: &'t Table,
    ) -> std::borrow::Cow<'t, Table> {
        if self.target != Dialect::MySql
            || t.columns.iter().filter(|c| c.identity.is_some()).count() == 0
        {
            return std::borrow::Cow::Borrowed(t);
        }
        let mut t = t.clone();
        let keep = t
            .columns
            .iter()
            .filter(|c| c.identity.is_some())
            .map(|c| c.name.clone())
            .find(|c| leads_key_of(&t, c));
        let names: Vec<String> = t
            .columns
            .iter()
            .filter(|c| c.identity.is_some() && Some(&c.name) != keep.as_ref())
            .map(|c| c.name.clone())
            .collect();
        for (i, n) in names.into_iter().enumerate() {
            // With no key yet (pg_dump adds keys last), the first identity gets
            // AUTO_INCREMENT with its key; the others stay plain columns.
            if i == 0 && keep.is_none() {
                cx.diags.skip(format!(
                    "{}.{n}: AUTO_INCREMENT waits for a key that {n} leads (MySQL needs one)",
                    t.name
                ));
            } else {
                cx.diags.warn(format!(
                    "{}.{n}: MySQL allows one AUTO_INCREMENT column, leading a key: {n} is a plain column",
                    t.name
                ));
            }
            if let Some(c) = t.columns.iter_mut().find(|c| c.name == n) {
                c.identity = None;
            }
        }
        std::borrow::Cow::Owned(t)
    }

    /// Emit the changes of one source statement.
    pub fn emit(&self, changes: &[SchemaChange], cx: &mut EmitCtx<'_>) -> Vec<String> {
        let mut out = Vec::new();
        // A conversion expression written for another dialect is not run here: the
        // target converts with its own rules, and says so.
        for c in changes {
            if let SchemaChange::AlterColumnType {
                table,
                column,
                using: Some(u),
                ..
            } = c
            {
                if u.for_dialect(self.target.name()).is_none() {
                    cx.diags.skip(format!(
                        "{table}.{column}: USING {u} ({}) is not carried; {} converts the values with its own rules",
                        u.dialect, self.target
                    ));
                }
            }
        }
        let mut i = 0;
        // Changes already emitted with an earlier one (a key with its column).
        let mut taken: Vec<usize> = Vec::new();
        while i < changes.len() {
            if taken.contains(&i) {
                i += 1;
                continue;
            }
            if let Some(j) = self.mysql_key_of_added_identity(changes, i) {
                self.add_identity_with_key(cx, &changes[i], &changes[j], &mut out);
                taken.push(j);
                i += 1;
                continue;
            }
            // MySQL and Oracle: merge consecutive changes to one column.
            if self.target != Dialect::Postgres && is_column_fact(&changes[i]) {
                let (table, col) = (
                    changes[i].table().cloned().expect("table"),
                    changes[i].column().map(str::to_owned).expect("column"),
                );
                let mut j = i;
                while j < changes.len()
                    && is_column_fact(&changes[j])
                    && changes[j].table() == Some(&table)
                    && changes[j].column() == Some(col.as_str())
                {
                    j += 1;
                }
                self.column_group(cx, &table, &col, &changes[i..j], &mut out);
                i = j;
                continue;
            }
            self.change(cx, &changes[i], &changes[..i], &mut out);
            i += 1;
        }
        out
    }

    /// MySQL: an AUTO_INCREMENT column added with the key it leads in the same
    /// statement (`ADD COLUMN seq INT NOT NULL AUTO_INCREMENT, ADD UNIQUE KEY (seq)`)
    /// must get its key in the same ALTER: alone, MySQL refuses the column (1075,
    /// it must lead a key), and without AUTO_INCREMENT the table's rows all read 0,
    /// which the unique key then refuses. The index in `changes` of that key, if any.
    fn mysql_key_of_added_identity(&self, changes: &[SchemaChange], i: usize) -> Option<usize> {
        let SchemaChange::AddColumn { table, column, .. } = &changes[i] else {
            return None;
        };
        if self.target != Dialect::MySql || column.identity.is_none() {
            return None;
        }
        let leads = |c: &SchemaChange| match c {
            SchemaChange::SetPrimaryKey {
                table: t,
                columns: Some(cols),
                ..
            } => t == table && cols.first() == Some(&column.name),
            SchemaChange::AddIndex { table: t, index } => {
                t == table
                    && index.predicate.is_none()
                    && index.parts.iter().all(|p| !p.expression)
                    && index.parts.first().map(|p| &p.column) == Some(&column.name)
            }
            _ => false,
        };
        (i + 1..changes.len()).find(|&j| leads(&changes[j]))
    }

    /// `add` (an added identity column) and `key` (the key it leads) as one MySQL
    /// ALTER (see [`Self::mysql_key_of_added_identity`]).
    fn add_identity_with_key(
        &self,
        cx: &mut EmitCtx<'_>,
        add: &SchemaChange,
        key: &SchemaChange,
        out: &mut Vec<String>,
    ) {
        let SchemaChange::AddColumn {
            table,
            column,
            position,
        } = add
        else {
            return;
        };
        let tn = self.table(cx, table);
        let def = self.column_def(cx, table, column);
        let pos = self.position_sql(cx, position.as_ref());
        let key = match key {
            SchemaChange::SetPrimaryKey {
                columns: Some(cols),
                prefixes,
                ..
            } => Some(format!(
                "PRIMARY KEY ({})",
                self.key_cols(cx, table, cols, prefixes)
            )),
            SchemaChange::AddIndex { index, .. } => (!self.mysql_index_refused(cx, table, index))
                .then(|| self.mysql_index_clause(cx, table, index, "INDEX")),
            _ => None,
        };
        // (Its first value in the same statement: the rows are numbered from it.)
        let start = column
            .identity
            .as_ref()
            .and_then(|id| id.start)
            .map(|n| format!(", AUTO_INCREMENT = {n}"))
            .unwrap_or_default();
        match key {
            Some(k) => out.push(format!(
                "ALTER TABLE {tn} ADD COLUMN {def}{pos}, ADD {k}{start}"
            )),
            None => out.push(format!("ALTER TABLE {tn} ADD COLUMN {def}{pos}{start}")),
        }
    }

    fn after_column(&self, cx: &EmitCtx<'_>, table: &TableName, col: &str) -> Option<Column> {
        cx.after.table(table).and_then(|t| t.column(col)).cloned()
    }

    fn column_group(
        &self,
        cx: &mut EmitCtx<'_>,
        table: &TableName,
        col: &str,
        group: &[SchemaChange],
        out: &mut Vec<String>,
    ) {
        let tn = self.table(cx, table);
        let Some(c) = self.after_column(cx, table, col) else {
            return;
        };
        if self.target == Dialect::MySql {
            if group
                .iter()
                .all(|g| matches!(g, SchemaChange::SetDefault { .. }))
            {
                let cn = self.ident(cx, col);
                match &c.default {
                    Some(d) => {
                        if let Some(d) = self.default_sql(cx, table, &c, d) {
                            out.push(format!(
                                "ALTER TABLE {tn} ALTER COLUMN {cn} SET DEFAULT {d}"
                            ));
                        }
                    }
                    None => out.push(format!("ALTER TABLE {tn} ALTER COLUMN {cn} DROP DEFAULT")),
                }
                return;
            }
            let pos = group.iter().find_map(|g| match g {
                SchemaChange::MoveColumn { position, .. } => Some(position.clone()),
                _ => None,
            });
            // MySQL takes AUTO_INCREMENT only on a column leading a key: one that
            // has none yet (pg_dump adds keys last) gets it with its key.
            let mut c = c;
            if c.identity.is_some() && !self.leads_key(cx.after, table, col) {
                c.identity = None;
                if group.iter().all(|g| {
                    matches!(
                        g,
                        SchemaChange::SetIdentity { .. } | SchemaChange::SetDefault { .. }
                    )
                }) {
                    cx.diags.skip(format!(
                        "{table}.{col}: AUTO_INCREMENT waits for a key that {col} leads (MySQL needs one)"
                    ));
                    return;
                }
            }
            let def = self.column_def(cx, table, &c);
            let pos = self.position_sql(cx, pos.as_ref());
            out.push(format!("ALTER TABLE {tn} MODIFY COLUMN {def}{pos}"));
            return;
        }
        // Oracle: MODIFY (c [type] [DEFAULT x] [NULL|NOT NULL]) with only what changed.
        let mut parts = vec![self.ident(cx, col)];
        let mut any = false;
        if group
            .iter()
            .any(|g| matches!(g, SchemaChange::AlterColumnType { .. }))
        {
            parts.push(self.type_sql(cx, table, &c));
            any = true;
        }
        if group
            .iter()
            .any(|g| matches!(g, SchemaChange::SetDefault { .. }))
        {
            match &c.default {
                Some(d) => {
                    if let Some(d) = self.default_sql(cx, table, &c, d) {
                        parts.push(format!("DEFAULT {d}"));
                        any = true;
                    }
                }
                None => {
                    parts.push("DEFAULT NULL".into());
                    any = true;
                }
            }
        }
        if group
            .iter()
            .any(|g| matches!(g, SchemaChange::SetNullable { .. }))
        {
            parts.push(if c.nullable { "NULL" } else { "NOT NULL" }.into());
            any = true;
        }
        if any {
            out.push(format!("ALTER TABLE {tn} MODIFY ({})", parts.join(" ")));
        }
        for g in group {
            match g {
                SchemaChange::SetIdentity { identity: None, .. } => {
                    let cn = self.ident(cx, col);
                    out.push(format!("ALTER TABLE {tn} MODIFY {cn} DROP IDENTITY"));
                }
                SchemaChange::SetIdentity { identity: Some(_), .. } => cx.diags.warn(format!(
                    "{table}.{col}: oracle cannot make an existing column an identity column; not emitted"
                )),
                SchemaChange::SetColumnComment { comment, .. } => {
                    let cn = self.ident(cx, col);
                    out.push(format!(
                        "COMMENT ON COLUMN {tn}.{cn} IS {}",
                        string_literal(self.target, comment.as_deref().unwrap_or(""))
                    ));
                }
                SchemaChange::MoveColumn { .. } => cx.diags.warn(format!(
                    "{table}.{col}: oracle cannot reorder columns; the column keeps its place"
                )),
                SchemaChange::SetOnUpdate { .. } => cx.diags.warn(format!(
                    "{table}.{col}: ON UPDATE CURRENT_TIMESTAMP needs a trigger in oracle and is not emitted"
                )),
                _ => {}
            }
        }
    }

    fn position_sql(&self, cx: &mut EmitCtx<'_>, p: Option<&ColumnPosition>) -> String {
        match p {
            None => String::new(),
            Some(ColumnPosition::First) => " FIRST".into(),
            Some(ColumnPosition::After(c)) => format!(" AFTER {}", self.ident(cx, c)),
        }
    }

    /// One change; `earlier`: the statement's changes before it (a table renamed by
    /// one of them is known by its name before the statement).
    fn change(
        &self,
        cx: &mut EmitCtx<'_>,
        ch: &SchemaChange,
        earlier: &[SchemaChange],
        out: &mut Vec<String>,
    ) {
        use SchemaChange as C;
        let tgt = self.target;
        match ch {
            C::CreateNamespace { name, .. } if self.schema_of(name).is_none() => cx.diags.skip(
                format!("schema {name} is the current database here (--schema-map)"),
            ),
            C::DropNamespace { name, .. } if self.schema_of(name).is_none() => cx.diags.skip(
                format!("schema {name} is the current database here (--schema-map): not dropped"),
            ),
            C::CreateNamespace {
                name,
                if_not_exists,
            } => {
                let n = self.ident(cx, self.schema_of(name).unwrap_or(name));
                // (Another dialect's schema is a MySQL database, which the whole
                // server shares: one of that name may be there already.)
                let ine = if *if_not_exists || (tgt == Dialect::MySql && cx.source != Dialect::MySql)
                {
                    "IF NOT EXISTS "
                } else {
                    ""
                };
                match tgt {
                    Dialect::MySql => out.push(format!("CREATE DATABASE {ine}{n}")),
                    Dialect::Postgres => out.push(format!("CREATE SCHEMA {ine}{n}")),
                    Dialect::Oracle => cx.diags.skip(format!(
                        "schema {name}: an oracle schema is a user; create it with CREATE USER"
                    )),
                }
            }
            C::DropNamespace {
                name,
                if_exists,
                cascade,
            } => {
                let n = self.ident(cx, self.schema_of(name).unwrap_or(name));
                let ie = if *if_exists { "IF EXISTS " } else { "" };
                match tgt {
                    Dialect::MySql => out.push(format!("DROP DATABASE {ie}{n}")),
                    Dialect::Postgres => out.push(format!(
                        "DROP SCHEMA {ie}{n}{}",
                        if *cascade || cx.source == Dialect::MySql { " CASCADE" } else { "" }
                    )),
                    Dialect::Oracle => cx.diags.skip(format!(
                        "schema {name}: an oracle schema is a user; drop it with DROP USER"
                    )),
                }
            }
            C::CreateTable {
                table,
                if_not_exists,
            } => out.extend(self.create_table(cx, table, *if_not_exists)),
            C::DropTable { name, if_exists } => {
                let n = self.table(cx, name);
                // Oracle before 23 has no IF EXISTS: a table the input made is there
                // (dropped plainly); one it never made is not dropped (a dump's
                // DROP before each CREATE).
                if *if_exists && tgt == Dialect::Oracle {
                    if cx.before.table(name).is_none() {
                        cx.diags.skip(format!(
                            "DROP TABLE IF EXISTS {name}: not emitted for oracle (no IF EXISTS before Oracle 23, and the input has not made {name})"
                        ));
                        return;
                    }
                    out.push(format!("DROP TABLE {n}"));
                    return;
                }
                let ie = if *if_exists { "IF EXISTS " } else { "" };
                out.push(format!("DROP TABLE {ie}{n}"));
            }
            C::RenameTable { from, to } => {
                let f = self.table(cx, from);
                if tgt == Dialect::MySql {
                    let t = self.table(cx, to);
                    out.push(format!("RENAME TABLE {f} TO {t}"));
                } else {
                    // PostgreSQL moves a table into another schema with SET SCHEMA,
                    // then renames it there.
                    let mut f = f;
                    let mut moved = from.clone();
                    if from.schema != to.schema {
                        match (&to.schema, tgt) {
                            (Some(s), Dialect::Postgres) => {
                                out.push(format!("ALTER TABLE {f} SET SCHEMA {}", self.ident(cx, s)));
                                moved.schema = to.schema.clone();
                                f = self.table(cx, &moved);
                            }
                            _ => cx.diags.warn(format!(
                                "rename of {from} to {to} across schemas: only the name changes in {tgt}"
                            )),
                        }
                    }
                    if moved.name != to.name || moved.schema != to.schema {
                        let t = self.ident(cx, &to.name);
                        out.push(format!("ALTER TABLE {f} RENAME TO {t}"));
                    }
                    let from = &moved;
                    // Enum CHECKs keep `<table>_<column>_check` (a later type change
                    // finds them by it).
                    if tgt == Dialect::Postgres {
                        let mut renamed = from.clone();
                        renamed.name = to.name.clone();
                        let rn = self.table(cx, &renamed);
                        // The table as the statement found it: a swap renames a
                        // table through a name that did not exist before.
                        let mut origin = from.clone();
                        for e in earlier.iter().rev() {
                            if let C::RenameTable { from: f, to: t } = e {
                                if *t == origin {
                                    origin = f.clone();
                                }
                            }
                        }
                        for col in self.enum_columns(cx, &origin) {
                            if let (Some(a), Some(b)) = (
                                self.enum_check_name(cx, &from.name, &col),
                                self.enum_check_name(cx, &to.name, &col),
                            ) {
                                if a != b {
                                    out.push(format!(
                                        "ALTER TABLE {rn} RENAME CONSTRAINT {a} TO {b}"
                                    ));
                                }
                            }
                        }
                    }
                }
            }
            C::TruncateTable { name } => {
                let n = self.table(cx, name);
                out.push(format!("TRUNCATE TABLE {n}"));
            }
            C::AddColumn {
                table,
                column,
                position,
            } => {
                let tn = self.table(cx, table);
                let def = self.column_def(cx, table, column);
                match tgt {
                    Dialect::MySql => {
                        let pos = self.position_sql(cx, position.as_ref());
                        out.push(format!("ALTER TABLE {tn} ADD COLUMN {def}{pos}"));
                    }
                    _ => {
                        if let Some(p) = position {
                            cx.diags.warn(format!(
                                "{table}.{}: {tgt} cannot place a column ({}); it is added last",
                                column.name,
                                match p {
                                    ColumnPosition::First => "FIRST".to_owned(),
                                    ColumnPosition::After(c) => format!("AFTER {c}"),
                                }
                            ));
                        }
                        if tgt == Dialect::Oracle {
                            out.push(format!("ALTER TABLE {tn} ADD ({def})"));
                        } else {
                            out.push(format!("ALTER TABLE {tn} ADD COLUMN {def}"));
                        }
                        if let Some(cm) = &column.comment {
                            let cn = self.ident(cx, &column.name);
                            out.push(format!(
                                "COMMENT ON COLUMN {tn}.{cn} IS {}",
                                string_literal(tgt, cm)
                            ));
                        }
                    }
                }
            }
            C::DropColumn { table, column } => {
                let tn = self.table(cx, table);
                let cn = self.ident(cx, column);
                out.push(format!("ALTER TABLE {tn} DROP COLUMN {cn}"));
            }
            C::RenameColumn { table, from, to } => {
                let tn = self.table(cx, table);
                let f = self.ident(cx, from);
                let t = self.ident(cx, to);
                out.push(format!("ALTER TABLE {tn} RENAME COLUMN {f} TO {t}"));
                if tgt == Dialect::Postgres && self.enum_columns(cx, table).contains(from) {
                    if let (Some(a), Some(b)) = (
                        self.enum_check_name(cx, &table.name, from),
                        self.enum_check_name(cx, &table.name, to),
                    ) {
                        out.push(format!("ALTER TABLE {tn} RENAME CONSTRAINT {a} TO {b}"));
                    }
                }
            }
            // PostgreSQL column facts (MySQL and Oracle are grouped in `emit`).
            C::AlterColumnType {
                table,
                column,
                using,
                ..
            } => {
                let Some(c) = self.after_column(cx, table, column) else {
                    return;
                };
                let tn = self.table(cx, table);
                let cn = self.ident(cx, column);
                let ty = self.type_sql(cx, table, &c);
                let old_family = cx
                    .before
                    .table(table)
                    .and_then(|t| t.column(column))
                    .map(|o| o.data_type.family());
                // MySQL's BIT(n) is a number: another width keeps the number, which
                // PostgreSQL's cast of a bit string to bit(m) would not (it pads or
                // cuts on the right, and refuses without USING).
                let old_bits = cx
                    .before
                    .table(table)
                    .and_then(|t| t.column(column))
                    .and_then(|o| match o.data_type {
                        ddl_core::DataType::Bit { length, varying: false } => Some(length.unwrap_or(1)),
                        _ => None,
                    });
                let bits_to = match c.data_type {
                    ddl_core::DataType::Bit { length, varying: false } => Some(length.unwrap_or(1)),
                    _ => None,
                };
                let using = match (using, old_bits, bits_to) {
                    (Some(u), _, _) if u.dialect == tgt.name() => format!(" USING {u}"),
                    (_, Some(a), Some(b)) if a != b && cx.source == Dialect::MySql => {
                        format!(" USING right(lpad({cn}::text, {b}, '0'), {b})::{ty}")
                    }
                    _ if old_family.is_some_and(|f| f != c.data_type.family()) => {
                        format!(" USING {cn}::{ty}")
                    }
                    _ => String::new(),
                };
                // An enum's values are a CHECK made with the column, under the name
                // PostgreSQL gives it (`<table>_<column>_check`): dropped before the
                // change, made again with the new values after it (else a new value
                // breaks the old CHECK, and a column that stops being an enum keeps it).
                let was_enum = cx
                    .before
                    .table(table)
                    .and_then(|t| t.column(column))
                    .is_some_and(|o| matches!(o.data_type, ddl_core::DataType::Enum { .. }));
                let is_enum = matches!(c.data_type, ddl_core::DataType::Enum { .. });
                let check = self.enum_check_name(cx, &table.name, column);
                if let (true, Some(check)) = (was_enum, &check) {
                    out.push(format!("ALTER TABLE {tn} DROP CONSTRAINT IF EXISTS {check}"));
                }
                out.push(format!("ALTER TABLE {tn} ALTER COLUMN {cn} TYPE {ty}{using}"));
                if let (true, Some(check)) = (is_enum, &check) {
                    let mut rule = String::new();
                    self.enum_check(cx, &c, &mut rule);
                    out.push(format!("ALTER TABLE {tn} ADD CONSTRAINT {check}{rule}"));
                } else if (is_enum || was_enum) && check.is_none() {
                    cx.diags.warn(format!(
                        "{table}.{column}: enum values are not enforced after a type change (the name of its CHECK is too long to know)"
                    ));
                }
            }
            C::SetNullable {
                table,
                column,
                nullable,
            } => {
                let tn = self.table(cx, table);
                let cn = self.ident(cx, column);
                let op = if *nullable { "DROP" } else { "SET" };
                out.push(format!("ALTER TABLE {tn} ALTER COLUMN {cn} {op} NOT NULL"));
            }
            C::SetDefault { table, column, .. } => {
                let Some(c) = self.after_column(cx, table, column) else {
                    return;
                };
                let tn = self.table(cx, table);
                let cn = self.ident(cx, column);
                match &c.default {
                    Some(d) => {
                        if let Some(d) = self.default_sql(cx, table, &c, d) {
                            out.push(format!("ALTER TABLE {tn} ALTER COLUMN {cn} SET DEFAULT {d}"));
                        }
                    }
                    None => out.push(format!("ALTER TABLE {tn} ALTER COLUMN {cn} DROP DEFAULT")),
                }
            }
            C::SetIdentity {
                table,
                column,
                identity,
            } => {
                let tn = self.table(cx, table);
                let cn = self.ident(cx, column);
                match identity {
                    Some(id) => out.push(format!(
                        "ALTER TABLE {tn} ALTER COLUMN {cn} ADD{}",
                        self.identity_sql(id)
                    )),
                    None => out.push(format!(
                        "ALTER TABLE {tn} ALTER COLUMN {cn} DROP IDENTITY IF EXISTS"
                    )),
                }
            }
            C::SetOnUpdate { table, column, .. } => cx.diags.warn(format!(
                "{table}.{column}: ON UPDATE CURRENT_TIMESTAMP needs a trigger in {tgt} and is not emitted"
            )),
            C::SetColumnComment {
                table,
                column,
                comment,
            } => {
                let tn = self.table(cx, table);
                let cn = self.ident(cx, column);
                out.push(format!(
                    "COMMENT ON COLUMN {tn}.{cn} IS {}",
                    comment
                        .as_deref()
                        .map(|c| string_literal(tgt, c))
                        .unwrap_or_else(|| "NULL".into())
                ));
            }
            C::MoveColumn { table, column, .. } => cx.diags.warn(format!(
                "{table}.{column}: {tgt} cannot reorder columns; the column keeps its place"
            )),
            C::SetTableComment { table, comment } => {
                let tn = self.table(cx, table);
                let lit = comment
                    .as_deref()
                    .map(|c| string_literal(tgt, c))
                    .unwrap_or_else(|| {
                        if tgt == Dialect::MySql {
                            "''".into()
                        } else {
                            "NULL".into()
                        }
                    });
                if tgt == Dialect::MySql {
                    out.push(format!("ALTER TABLE {tn} COMMENT = {lit}"));
                } else {
                    let lit = if tgt == Dialect::Oracle && comment.is_none() {
                        "''".to_owned()
                    } else {
                        lit
                    };
                    out.push(format!("COMMENT ON TABLE {tn} IS {lit}"));
                }
            }
            C::SetPrimaryKey {
                table,
                name,
                columns,
                prefixes,
            } => {
                let tn = self.table(cx, table);
                match columns {
                    Some(cols) => {
                        let cname = match (name, tgt) {
                            (Some(n), Dialect::Postgres | Dialect::Oracle) => {
                                format!("CONSTRAINT {} ", self.ident(cx, n))
                            }
                            _ => String::new(),
                        };
                        let first = cols.first().cloned();
                        self.retype_key_columns(cx, table, cols, out);
                        let cols = self.key_cols(cx, table, cols, prefixes);
                        out.push(format!("ALTER TABLE {tn} ADD {cname}PRIMARY KEY ({cols})"));
                        if let Some(first) = first {
                            self.mysql_identity_with_key(cx, table, &first, out);
                        }
                    }
                    None => match tgt {
                        Dialect::Postgres => {
                            let pk = cx
                                .before
                                .table(table)
                                .and_then(|t| t.primary_key.as_ref())
                                .and_then(|p| p.name.clone())
                                .filter(|_| cx.source != Dialect::MySql)
                                .unwrap_or_else(|| format!("{}_pkey", table.name));
                            let pk = self.ident(cx, &pk);
                            out.push(format!("ALTER TABLE {tn} DROP CONSTRAINT {pk}"));
                        }
                        _ => out.push(format!("ALTER TABLE {tn} DROP PRIMARY KEY")),
                    },
                }
            }
            C::AddIndex { table, index } => {
                if let (Dialect::MySql, Some(p)) = (tgt, &index.predicate) {
                    let cond = self.predicate_sql(cx, p);
                    if let Some(cond) = cond {
                        if self.mysql_partial_unique(cx, table, index, &cond, out) {
                            return;
                        }
                    }
                    if !self.partial_fallback(cx, table, index, p) {
                        return;
                    }
                }
                if tgt == Dialect::MySql && self.mysql_index_refused(cx, table, index) {
                    return;
                }
                // (Oracle indexes whole values: a plain index's text columns too.)
                if index.kind == IndexKind::Unique
                    || (tgt == Dialect::Oracle && index.kind == IndexKind::Plain)
                {
                    let cols: Vec<String> = index
                        .parts
                        .iter()
                        .filter(|p| !p.expression && p.prefix.is_none())
                        .map(|p| p.column.clone())
                        .collect();
                    self.retype_key_columns(cx, table, &cols, out);
                }
                if tgt == Dialect::MySql {
                    let tn = self.table(cx, table);
                    let clause = self.mysql_index_clause(cx, table, index, "INDEX");
                    out.push(format!("ALTER TABLE {tn} ADD {clause}"));
                    if let Some(p) = index.parts.first().filter(|p| !p.expression) {
                        self.mysql_identity_with_key(cx, table, &p.column, out);
                    }
                } else if let Some(s) = self.create_index_sql(cx, table, index) {
                    out.push(s);
                }
            }
            C::DropIndex { table, name } => {
                let ix = cx
                    .before
                    .table(table)
                    .and_then(|t| t.indexes.iter().find(|i| i.name.as_deref() == Some(name)))
                    .cloned()
                    .unwrap_or(Index {
                        name: Some(name.clone()),
                        predicate: None,
                        kind: IndexKind::Plain,
                        parts: Vec::new(),
                    });
                if tgt == Dialect::MySql {
                    let tn = self.table(cx, table);
                    let n = self.ident(cx, name);
                    out.push(format!("ALTER TABLE {tn} DROP INDEX {n}"));
                } else if matches!(ix.kind, IndexKind::Fulltext | IndexKind::Spatial) {
                    cx.diags.skip(format!(
                        "{table}: index {name} was not emitted for {tgt}, so it is not dropped"
                    ));
                } else {
                    let n = self.index_name(cx, table, &ix);
                    let n = match &table.schema {
                        Some(s) => format!("{}.{n}", self.ident(cx, s)),
                        None => n,
                    };
                    out.push(format!("DROP INDEX {n}"));
                }
            }
            C::AddForeignKey { table, foreign_key } => {
                // Columns created before the key existed have their own mapping; they
                // take the referenced columns' types first.
                for col in &foreign_key.columns {
                    let Some(c) = self.after_column(cx, table, col) else {
                        continue;
                    };
                    let own = self.own_type_quiet(cx, cx.after, table, &c);
                    let was = self.own_type_quiet(cx, cx.before, table, &c);
                    if self.coherent_type(cx, table, col, &own).is_some()
                        || !same_type_sql(&was, &own)
                    {
                        out.extend(self.emit(
                            &[C::AlterColumnType {
                                table: table.clone(),
                                column: col.clone(),
                                data_type: c.data_type.clone(),
                                using: None,
                            }],
                            cx,
                        ));
                    }
                }
                if [foreign_key.on_delete, foreign_key.on_update]
                    .into_iter()
                    .flatten()
                    .any(|a| a.changes_rows())
                {
                    self.mysql_drop_checks_on(
                        cx,
                        table,
                        &foreign_key.columns,
                        "a column of a foreign key with a referential action",
                        out,
                    );
                }
                if self.unnameable_reference(cx, table, foreign_key) {
                    return;
                }
                let tn = self.table(cx, table);
                let fk = self.fk_sql(cx, table, foreign_key);
                out.push(format!("ALTER TABLE {tn} ADD {fk}"));
            }
            C::AddCheck { table, check } => {
                if let Some(t) = cx.after.table(table).cloned() {
                    if self.mysql_check_refused(cx, &t, check) {
                        return;
                    }
                }
                if let Some(ck) = self.check_sql(cx, table, check) {
                    let tn = self.table(cx, table);
                    out.push(format!("ALTER TABLE {tn} ADD {ck}"));
                }
            }
            C::DropConstraint { table, name } => {
                let tn = self.table(cx, table);
                let before = cx.before.table(table);
                let is_fk = before.is_some_and(|t| {
                    t.foreign_keys.iter().any(|f| f.name.as_deref() == Some(name))
                });
                let index = before.and_then(|t| {
                    t.indexes.iter().find(|i| i.name.as_deref() == Some(name)).cloned()
                });
                let is_pk = before.is_some_and(|t| {
                    t.primary_key.as_ref().is_some_and(|p| p.name.as_deref() == Some(name))
                });
                let n = self.ident(cx, name);
                if is_pk && tgt != Dialect::Postgres {
                    out.push(format!("ALTER TABLE {tn} DROP PRIMARY KEY"));
                } else if tgt == Dialect::MySql && is_fk {
                    let n = crate::fk_names::target_name(&self.fk_renames, table, name);
                    let n = self.ident(cx, n);
                    out.push(format!("ALTER TABLE {tn} DROP FOREIGN KEY {n}"));
                } else if is_fk {
                    let n = crate::fk_names::target_name(&self.fk_renames, table, name);
                    let n = self.ident(cx, n);
                    out.push(format!("ALTER TABLE {tn} DROP CONSTRAINT {n}"));
                } else if let Some(ix) = index {
                    if tgt == Dialect::MySql {
                        out.push(format!("ALTER TABLE {tn} DROP INDEX {n}"));
                    } else {
                        // An index lives in its table's schema.
                        let n = self.index_name(cx, table, &ix);
                        let n = match &table.schema {
                            Some(s) => format!("{}.{n}", self.ident(cx, s)),
                            None => n,
                        };
                        out.push(format!("DROP INDEX {n}"));
                    }
                } else {
                    out.push(format!("ALTER TABLE {tn} DROP CONSTRAINT {n}"));
                }
            }
            C::SetTableOption { table, key, value } => {
                if let Some(value) = value.for_dialect("mysql").filter(|_| tgt == Dialect::MySql) {
                    let tn = self.table(cx, table);
                    if key == "convert to charset" {
                        out.push(format!("ALTER TABLE {tn} CONVERT TO CHARACTER SET {value}"));
                    } else {
                        let k = if key == "charset" {
                            "DEFAULT CHARSET".to_owned()
                        } else {
                            key.to_ascii_uppercase()
                        };
                        out.push(format!("ALTER TABLE {tn} {k}={value}"));
                    }
                } else {
                    cx.diags.skip(format!(
                        "{table}: table option {key}={value} has no meaning for {tgt}"
                    ));
                }
            }
        }
    }
}

/// Whether `col` leads a key (primary or index) of `t`.
/// Whether `col` leads a key (primary or index) of `t`: MySQL's AUTO_INCREMENT needs
/// one.
pub(crate) fn leads_key_of(t: &Table, col: &str) -> bool {
    t.primary_key
        .as_ref()
        .is_some_and(|p| p.columns.first().map(String::as_str) == Some(col))
        || t.indexes.iter().any(|i| {
            i.parts
                .first()
                .is_some_and(|p| !p.expression && p.column == col)
        })
}

fn is_column_fact(c: &SchemaChange) -> bool {
    matches!(
        c,
        SchemaChange::AlterColumnType { .. }
            | SchemaChange::SetNullable { .. }
            | SchemaChange::SetDefault { .. }
            | SchemaChange::SetIdentity { .. }
            | SchemaChange::SetOnUpdate { .. }
            | SchemaChange::SetColumnComment { .. }
            | SchemaChange::MoveColumn { .. }
    )
}

/// A short neutral label of a type for messages.
/// Two spellings of one target type (case and blanks aside).
fn same_type_sql(a: &str, b: &str) -> bool {
    let norm = |s: &str| s.to_ascii_lowercase().replace(' ', "");
    norm(a) == norm(b)
}

pub fn type_label(t: &ddl_core::DataType) -> String {
    use ddl_core::DataType as T;
    match t {
        T::Int { bytes, unsigned } => format!(
            "int{}{}",
            u32::from(*bytes) * 8,
            if *unsigned { " unsigned" } else { "" }
        ),
        T::Decimal {
            precision: Some(p),
            scale,
            ..
        } => format!("decimal({p},{})", scale.unwrap_or(0)),
        T::Timestamp { precision, tz } => format!("timestamp({precision}) {tz:?}").to_lowercase(),
        T::Time { precision, tz } => format!("time({precision}) {tz:?}").to_lowercase(),
        T::Other { dialect, name } => format!("{dialect} {name}"),
        other => serde_json::to_value(other)
            .ok()
            .and_then(|v| v["type"].as_str().map(str::to_owned))
            .unwrap_or_else(|| other.family().to_owned()),
    }
}

/// The bytes a value of `t` takes in a MySQL key, about; None for character types
/// (their share of the key is worked out from what is left).
/// Whether `target` has a value for string default `v` of a column of type `t`: not
/// for MySQL's TIME past a day (838:59:59) elsewhere, PostgreSQL's infinite dates
/// elsewhere, nor NaN and infinite numbers in MySQL.
fn target_holds(target: Dialect, t: &ddl_core::DataType, v: &str) -> bool {
    use ddl_core::DataType as D;
    let word = v.trim().to_ascii_lowercase();
    match t {
        D::Time { .. } if target != Dialect::MySql => !time_past_a_day(v),
        D::Timestamp { .. } | D::Date if target != Dialect::Postgres => {
            !matches!(word.as_str(), "infinity" | "-infinity")
        }
        D::Float { .. } | D::Decimal { .. } if target == Dialect::MySql => !matches!(
            word.as_str(),
            "nan" | "infinity" | "-infinity" | "inf" | "-inf"
        ),
        _ => true,
    }
}

/// A time of day past 24:00:00, or negative (MySQL's TIME is a duration).
fn time_past_a_day(v: &str) -> bool {
    if v.trim_start().starts_with('-') {
        return true;
    }
    let Some(h) = v
        .split(':')
        .next()
        .and_then(|h| h.trim().parse::<u32>().ok())
    else {
        return false;
    };
    h > 24
        || (h == 24
            && v.chars()
                .skip_while(|c| *c != ':')
                .any(|c| c.is_ascii_digit() && c != '0'))
}

/// `text` with the type of every cast (`::name`, `::"s"."n"[]`) outside string
/// literals and double quotes replaced by `ty` (`ty[]` where the cast is to an array).
fn recast(text: &str, ty: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if rest.starts_with('\'') {
            // A string literal, '' inside it being one quote.
            let mut end = 1;
            loop {
                match rest[end..].find('\'') {
                    Some(q) if rest[end + q + 1..].starts_with('\'') => end += q + 2,
                    Some(q) => {
                        end += q + 1;
                        break;
                    }
                    None => {
                        end = rest.len();
                        break;
                    }
                }
            }
            out.push_str(&rest[..end]);
            rest = &rest[end..];
        } else if let Some(after) = rest.strip_prefix("::") {
            // The type: names (quoted or bare) joined by dots, then `[]`s.
            let mut t = after.trim_start();
            loop {
                if let Some(q) = t.strip_prefix('"') {
                    let mut end = 0;
                    while let Some(i) = q[end..].find('"') {
                        end += i + 1;
                        if !q[end..].starts_with('"') {
                            break;
                        }
                        end += 1;
                    }
                    t = &q[end..];
                } else {
                    let n = t
                        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
                        .unwrap_or(t.len());
                    t = &t[n..];
                }
                match t.strip_prefix('.') {
                    Some(r) => t = r,
                    None => break,
                }
            }
            out.push_str("::");
            out.push_str(ty);
            while let Some(r) = t.strip_prefix("[]") {
                out.push_str("[]");
                t = r;
            }
            rest = t;
        } else {
            let ch = rest.chars().next().expect("not empty");
            out.push(ch);
            rest = &rest[ch.len_utf8()..];
        }
    }
    out
}

/// An enum, or an array of one.
fn enum_typed(t: &ddl_core::DataType) -> bool {
    use ddl_core::DataType as D;
    match t {
        D::Enum { .. } => true,
        D::Array { element } => enum_typed(element),
        _ => false,
    }
}

/// A one-dimensional PostgreSQL array literal (`{}`, `{1,2}`, `{a,b}`) as a JSON
/// array; None for what this does not read (quoted or nested elements).
fn pg_array_as_json(v: &str) -> Option<String> {
    let body = v.trim().strip_prefix('{')?.strip_suffix('}')?.trim();
    if body.is_empty() {
        return Some("[]".into());
    }
    if body.contains(['"', '{', '}', '\\']) {
        return None;
    }
    let items: Vec<String> = body
        .split(',')
        .map(|e| {
            let e = e.trim();
            if e.eq_ignore_ascii_case("null") {
                "null".to_owned()
            } else if e.parse::<f64>().is_ok_and(f64::is_finite) {
                e.to_owned()
            } else {
                serde_json::Value::String(e.to_owned()).to_string()
            }
        })
        .collect();
    Some(format!("[{}]", items.join(",")))
}

fn key_bytes(t: &ddl_core::DataType) -> Option<u32> {
    use ddl_core::DataType as D;
    Some(match t {
        D::Char { .. } | D::Varchar { .. } | D::Text { .. } => return None,
        D::Enum { .. } => 2,
        D::Set { .. } => 8,
        D::Int { bytes, .. } => u32::from(*bytes),
        D::Boolean | D::Year => 1,
        D::Date => 3,
        D::Float { bytes, .. } => u32::from(*bytes),
        D::Binary { length } | D::Varbinary { length } => *length + 2,
        D::Uuid => 36 * 4,
        _ => 16,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keywords_are_found_in_any_case_and_length() {
        for k in [
            "select",
            "SeLeCt",
            "time",
            "order",
            "current_timestamp",
            "LOCALTIMESTAMP",
        ] {
            assert!(is_keyword(k), "{k}");
        }
        for n in [
            "id",
            "customer_id",
            "",
            "a_name_longer_than_sixteen",
            "tenant0",
        ] {
            assert!(!is_keyword(n), "{n}");
        }
    }

    #[test]
    fn reserved_list_is_sorted() {
        assert!(ALSO_QUOTED.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn quoting() {
        assert_eq!(quote_ident(Dialect::Postgres, "id"), "id");
        assert_eq!(quote_ident(Dialect::Postgres, "select"), "\"select\"");
        assert_eq!(quote_ident(Dialect::Postgres, "Mixed"), "\"Mixed\"");
        assert_eq!(quote_ident(Dialect::MySql, "a`b"), "`a``b`");
        assert_eq!(quote_ident(Dialect::Oracle, "naïve"), "\"naïve\"");
        assert_eq!(quote_ident(Dialect::Oracle, "EMP"), "EMP");
    }
}
