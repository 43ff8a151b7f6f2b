//! Lowering parsed drafts into IR change requests: names folded by the source's rules,
//! defaults classified into neutral values, column-level constraints lifted to the
//! table, and Oracle's partial MODIFY completed from the catalog.

use crate::Dialect;
use ddl_core::{
    Catalog, ChangeRequest, Check, Column, ColumnPosition, DefaultValue, Diagnostics, ForeignKey,
    Generated, Identity, IdentityKind, Index, IndexKind, IndexPart, Literal, SchemaChange, Table,
    TableName,
};
use grammar::ast::*;

/// Context of one statement's lowering.
pub struct Lowerer<'a> {
    pub dialect: Dialect,
    pub catalog: &'a Catalog,
    pub default_schema: Option<&'a str>,
    pub diags: &'a mut Diagnostics,
    pub defs: &'a crate::defs::Definitions,
}

/// A lowering failure (unknown table or column in a statement that needs the previous
/// definition): the message, and the tables the catalog does not know (a caller
/// holding only part of a database can read them and try again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LowerError(pub String, pub Vec<TableName>);

impl<'a> Lowerer<'a> {
    pub fn name(&self, id: &Ident) -> String {
        stored_name(self.dialect, &id.value, id.quoted)
    }

    pub fn table_name(&self, parts: &[Ident]) -> TableName {
        qualify(self.default_schema, parts.iter().map(|p| self.name(p)))
    }

    /// The sequence `nextval(...)` in default `e` draws from, when `table.column` owns it.
    fn owned_nextval(
        &self,
        table: &TableName,
        column: &str,
        e: &str,
    ) -> Option<&'a crate::defs::Sequence> {
        let defs: &'a crate::defs::Definitions = self.defs;
        let Some(DefaultValue::NextVal { sequence }) = self.default_value(e) else {
            return None;
        };
        let (_, seq) = defs.sequence(&crate::defs::Definitions::sequence_name(&sequence))?;
        let (t, c) = seq.owned_by.as_ref()?;
        (t == table && c == column).then_some(seq)
    }

    /// The table a foreign key of `child` names: MySQL resolves an unqualified name
    /// in the child's database, the others through the default schema.
    pub fn ref_table_name(&self, child: &TableName, parts: &[Ident]) -> TableName {
        let mut t = self.table_name(parts);
        if parts.len() == 1 && self.dialect == Dialect::MySql && child.schema.is_some() {
            t.schema = child.schema.clone();
        }
        t
    }

    /// Classify a default expression.
    pub fn default_value(&self, raw: &str) -> Option<DefaultValue> {
        classify_default(self.dialect, raw)
    }

    /// A PostgreSQL jsonb column's default as PostgreSQL prints the stored value
    /// (`'{"a":1}'` is `{"a": 1}`), as a source streams its values: else the rows a
    /// default fills and the rows streamed hold one value in two spellings.
    fn jsonb_default(
        &self,
        ty: &ddl_core::DataType,
        d: Option<DefaultValue>,
    ) -> Option<DefaultValue> {
        match (self.dialect, ty, d) {
            (
                Dialect::Postgres,
                ddl_core::DataType::Json { binary: true },
                Some(DefaultValue::Literal {
                    value: Literal::String(v),
                }),
            ) => Some(DefaultValue::Literal {
                value: Literal::String(crate::jsonb::canonical(&v).unwrap_or(v)),
            }),
            (_, _, d) => d,
        }
    }

    /// Lower a column draft; table-level facts implied by column attributes (PRIMARY
    /// KEY, UNIQUE, REFERENCES, CHECK) go to `extras`.
    pub fn column(
        &mut self,
        table: &TableName,
        d: &ColumnDraft,
        extras: &mut Vec<SchemaChange>,
    ) -> Column {
        let ty = d.ty.clone().expect("column with type");
        let name = self.name(&d.name);
        let (data_type, domain) = self.user_type(ty.data_type);
        let mut c = Column::new(&name, data_type);
        if ty.serial {
            // PostgreSQL serial: an identity column. MySQL SERIAL: also UNIQUE.
            serial(table, &mut c, self.dialect == Dialect::MySql, extras);
        }
        if let Some(dm) = domain {
            c.default = dm.default.clone();
        }
        self.apply_attrs(table, &mut c, &d.attrs, extras);
        // MySQL reads a string given to a BIT column as its bytes ('1' is 0x31), not
        // as the bit string's digits the IR's string is there.
        if let (
            Dialect::MySql,
            ddl_core::DataType::Bit { .. },
            Some(DefaultValue::Literal {
                value: Literal::String(v),
            }),
        ) = (self.dialect, &c.data_type, &c.default)
        {
            c.default = Some(DefaultValue::Literal {
                value: Literal::from_bytes(v.as_bytes()),
            });
        }
        c.default = c.default.take().map(|v| v.fitted(&c.data_type));
        c.default = self.jsonb_default(&c.data_type, c.default.take());
        // A PostgreSQL bytea default written as text ('\xab01', 'a\\b'): its bytes.
        if let (
            Dialect::Postgres,
            ddl_core::DataType::Blob { .. },
            Some(DefaultValue::Literal {
                value: Literal::String(v),
            }),
        ) = (self.dialect, &c.data_type, &c.default)
        {
            if let Some(b) = v.contains('\\').then(|| pg_bytea(v)).flatten() {
                c.default = Some(DefaultValue::Literal {
                    value: Literal::from_bytes(&b),
                });
            }
        }
        if let Some(dm) = domain {
            if dm.not_null {
                c.nullable = false;
            }
            for (k, (cname, text, neutral)) in dm.checks.iter().enumerate() {
                let cname = match cname {
                    Some(n) => format!("{}_{}_{n}", table.name, c.name),
                    None if dm.checks.len() == 1 => format!("{}_{}_check", table.name, c.name),
                    None => format!("{}_{}_check{}", table.name, c.name, k + 1),
                };
                let neutral = neutral.clone().map(|mut e| {
                    e.rename_column("value", &c.name);
                    e
                });
                extras.push(SchemaChange::AddCheck {
                    table: table.clone(),
                    check: Check {
                        name: Some(cname),
                        expr: replace_value(text, &c.name),
                        dialect: self.dialect.name().into(),
                        neutral,
                    },
                });
            }
        }
        c
    }

    /// A PostgreSQL domain or enum type, as what it means: the base type (and the
    /// domain, whose constraints the column takes) or an enum of its labels.
    pub fn user_type(
        &self,
        t: ddl_core::DataType,
    ) -> (ddl_core::DataType, Option<&'a crate::defs::Domain>) {
        let defs: &'a crate::defs::Definitions = self.defs;
        // An array of a domain or enum: an array of what its element means (its
        // name alone would lose the type's schema on the target).
        if let ddl_core::DataType::Array { element } = &t {
            let (inner, _) = self.user_type((**element).clone());
            if inner != **element {
                return (
                    ddl_core::DataType::Array {
                        element: Box::new(inner),
                    },
                    None,
                );
            }
        }
        if let ddl_core::DataType::Other { dialect, name } = &t {
            if dialect == "postgres" {
                match defs.user_type(name) {
                    Some(crate::defs::UserType::Domain(_, d)) => return (d.base.clone(), Some(d)),
                    Some(crate::defs::UserType::Enum(_, values)) => {
                        return (
                            ddl_core::DataType::Enum {
                                values: values.to_vec(),
                            },
                            None,
                        )
                    }
                    None => {}
                }
            }
        }
        (t, None)
    }

    fn apply_attrs(
        &mut self,
        table: &TableName,
        c: &mut Column,
        attrs: &[ColAttr],
        extras: &mut Vec<SchemaChange>,
    ) {
        for a in attrs {
            match a {
                ColAttr::Null => c.nullable = true,
                ColAttr::NotNull => c.nullable = false,
                ColAttr::Default(e) => c.default = self.default_value(e),
                ColAttr::AutoIncrement => {
                    c.identity = Some(Identity {
                        kind: IdentityKind::ByDefault,
                        start: None,
                        increment: None,
                    })
                }
                ColAttr::Identity {
                    always,
                    start,
                    increment,
                } => {
                    c.identity = Some(identity(*always, *start, *increment));
                    c.nullable = false;
                }
                ColAttr::SerialDefaultValue => serial(table, c, true, extras),
                ColAttr::PrimaryKey => {
                    c.nullable = false;
                    extras.push(SchemaChange::SetPrimaryKey {
                        table: table.clone(),
                        name: None,
                        columns: Some(vec![c.name.clone()]),
                        prefixes: Default::default(),
                    });
                }
                ColAttr::Unique => extras.push(SchemaChange::AddIndex {
                    table: table.clone(),
                    index: Index {
                        name: None,
                        predicate: None,
                        kind: IndexKind::Unique,
                        parts: vec![IndexPart::column(&c.name)],
                    },
                }),
                ColAttr::Comment(s) => c.comment = Some(s.clone()),
                ColAttr::OnUpdate(e) => {
                    if matches!(
                        self.default_value(e),
                        Some(DefaultValue::CurrentTimestamp { .. })
                    ) {
                        c.on_update_current_timestamp = true;
                    } else {
                        self.diags
                            .skip(format!("column {}: ON UPDATE {e} is not carried", c.name));
                    }
                }
                ColAttr::Generated { expr, stored } => {
                    c.generated = Some(Generated {
                        expr: expr.clone(),
                        dialect: self.dialect.name().into(),
                        stored: *stored,
                    })
                }
                // MySQL's character set `binary` makes a character type its byte
                // type: VARCHAR(n) CHARACTER SET binary is VARBINARY(n).
                ColAttr::Charset(s) if s.eq_ignore_ascii_case("binary") => {
                    use ddl_core::DataType as T;
                    match c.data_type {
                        T::Char { length, .. } => c.data_type = T::Binary { length },
                        T::Varchar {
                            length: Some(length),
                            ..
                        } => c.data_type = T::Varbinary { length },
                        T::Text { max_bytes, .. } => c.data_type = T::Blob { max_bytes },
                        _ => c.charset = Some(s.clone()),
                    }
                }
                ColAttr::Charset(s) => c.charset = Some(s.clone()),
                ColAttr::Collate(s) => c.collation = Some(s.clone()),
                ColAttr::Check(e) => extras.push(SchemaChange::AddCheck {
                    table: table.clone(),
                    check: Check {
                        name: None,
                        expr: e.clone(),
                        dialect: self.dialect.name().into(),
                        neutral: crate::check::parse(self.dialect, e),
                    },
                }),
                ColAttr::References {
                    table: t,
                    columns,
                    on_delete,
                    on_update,
                    deferrable,
                } => extras.push(SchemaChange::AddForeignKey {
                    table: table.clone(),
                    foreign_key: ForeignKey {
                        name: None,
                        columns: vec![c.name.clone()],
                        ref_table: self.ref_table_name(table, t),
                        ref_columns: columns.iter().map(|x| self.name(x)).collect(),
                        on_delete: *on_delete,
                        on_update: *on_update,
                        deferrable: *deferrable,
                    },
                }),
                ColAttr::Ignored(_) => {}
                ColAttr::Unkept { attr, clause } => {
                    self.apply_attrs(table, c, std::slice::from_ref(attr), extras);
                    let meaning = if clause.starts_with("DEFERRABLE") {
                        "the key is checked at each statement"
                    } else {
                        "an explicit NULL is not replaced by the default"
                    };
                    self.diags.warn(format!(
                        "{table}.{}: `{clause}` is not carried: {meaning}",
                        c.name
                    ));
                }
                ColAttr::Named { name, attr } => {
                    // The constraint the attribute adds takes its name.
                    let before = extras.len();
                    self.apply_attrs(table, c, std::slice::from_ref(attr), extras);
                    let n = Some(self.name(name));
                    for x in &mut extras[before..] {
                        match x {
                            SchemaChange::AddCheck { check, .. } => check.name = n.clone(),
                            SchemaChange::AddIndex { index, .. } => index.name = n.clone(),
                            SchemaChange::AddForeignKey { foreign_key, .. } => {
                                foreign_key.name = n.clone()
                            }
                            SchemaChange::SetPrimaryKey { name, .. } => *name = n.clone(),
                            _ => {}
                        }
                    }
                }
            }
        }
        // A DEFAULT NULL is no default.
        if matches!(
            c.default,
            Some(DefaultValue::Literal {
                value: Literal::Null
            })
        ) {
            c.default = None;
        }
    }

    fn elem(&mut self, table: &TableName, e: &TableElem, out: &mut Vec<SchemaChange>) {
        match e {
            TableElem::Column(_) => unreachable!("columns are lowered by the caller"),
            TableElem::Disabled(inner) => {
                let mut v = Vec::new();
                self.elem(table, inner, &mut v);
                for c in v {
                    let what = change_label(&c);
                    self.diags.skip(format!(
                        "table {table}: {what} is disabled in the source (not enforced) and is not created"
                    ));
                }
            }
            TableElem::PrimaryKey { name, parts } => out.push(SchemaChange::SetPrimaryKey {
                table: table.clone(),
                name: name.as_ref().map(|n| self.name(n)),
                columns: Some(parts.iter().map(|p| self.name(&p.column)).collect()),
                prefixes: parts
                    .iter()
                    .filter_map(|p| p.prefix.map(|n| (self.name(&p.column), n)))
                    .collect(),
            }),
            TableElem::Index { name, kind, parts } => out.push(SchemaChange::AddIndex {
                table: table.clone(),
                index: Index {
                    name: name.as_ref().map(|n| self.name(n)),
                    predicate: None,
                    kind: *kind,
                    parts: parts
                        .iter()
                        .map(|p| IndexPart {
                            column: if p.expression {
                                p.column.value.clone()
                            } else {
                                self.name(&p.column)
                            },
                            expression: p.expression,
                            prefix: p.prefix,
                            descending: p.descending,
                        })
                        .collect(),
                },
            }),
            TableElem::ForeignKey {
                name,
                columns,
                ref_table,
                ref_columns,
                on_delete,
                on_update,
                deferrable,
            } => out.push(SchemaChange::AddForeignKey {
                table: table.clone(),
                foreign_key: ForeignKey {
                    name: name.as_ref().map(|n| self.name(n)),
                    columns: columns.iter().map(|c| self.name(c)).collect(),
                    ref_table: self.ref_table_name(table, ref_table),
                    // `REFERENCES t` alone (no columns) means t's primary key: the
                    // catalog fills it in (`Catalog::expand`).
                    ref_columns: ref_columns.iter().map(|c| self.name(c)).collect(),
                    on_delete: *on_delete,
                    on_update: *on_update,
                    deferrable: *deferrable,
                },
            }),
            TableElem::Exclusion { name, text } => self.diags.warn(format!(
                "table {table}: exclusion constraint {}`{}` is not created (no target here has exclusion constraints)",
                name.as_ref().map(|n| format!("{} ", self.name(n))).unwrap_or_default(),
                crate::translate::excerpt(text)
            )),
            TableElem::Unkept { elem, clause } => {
                let before = out.len();
                self.elem(table, elem, out);
                for c in &out[before..] {
                    let what = change_label(c);
                    let meaning = match clause.as_str() {
                        "NOT VALID" => "it is created validated: rows already there that break it are refused",
                        "NO INHERIT" => "child tables are not told apart here",
                        "MATCH FULL" => "a row with some of its columns NULL is accepted",
                        "INCLUDE" => "its index holds the key's columns only",
                        _ => "it is checked at each statement",
                    };
                    self.diags.warn(format!(
                        "table {table}: {what} is `{clause}` in the source, which is not carried: {meaning}"
                    ));
                }
            }
            TableElem::Check { name, expr } => out.push(SchemaChange::AddCheck {
                table: table.clone(),
                check: Check {
                    name: name.as_ref().map(|n| self.name(n)),
                    expr: expr.clone(),
                    dialect: self.dialect.name().into(),
                    neutral: crate::check::parse(self.dialect, expr),
                },
            }),
        }
    }

    /// CREATE TABLE: one CreateTable change carrying the whole table.
    pub fn create_table(&mut self, d: &CreateTableDraft) -> Result<Vec<ChangeRequest>, LowerError> {
        let name = self.table_name(&d.name);
        if let Some(like) = &d.like {
            let src = self.table_name(like);
            let Some(t) = self.catalog.table(&src) else {
                return Err(LowerError(
                    format!("CREATE TABLE ... LIKE {src}: table {src} is not known"),
                    vec![name, src],
                ));
            };
            let mut t = t.clone();
            t.name = name;
            return Ok(vec![ChangeRequest::Change(SchemaChange::CreateTable {
                table: t,
                if_not_exists: d.if_not_exists,
            })]);
        }
        let mut table = Table::new(name.clone());
        let mut extras = Vec::new();
        // INHERITS: the parents' columns come first, as PostgreSQL lays them out.
        for p in &d.inherits {
            let pn = self.table_name(p);
            let Some(parent) = self
                .catalog
                .resolve_table(&pn)
                .and_then(|k| self.catalog.table(k))
            else {
                return Err(LowerError(
                    format!("CREATE TABLE {name} INHERITS {pn}: table {pn} is not known"),
                    vec![name, pn],
                ));
            };
            for c in &parent.columns {
                if !table.columns.iter().any(|x| x.name == c.name) {
                    table.columns.push(c.clone());
                }
            }
            for ck in &parent.checks {
                table.checks.push(ck.clone());
            }
            self.diags.warn(format!(
                "table {name}: inheritance from {} is not carried: its columns and CHECKs are copied, rows are not shared",
                parent.name
            ));
        }
        for e in &d.elems {
            if let TableElem::Column(c) = e {
                let col = self.column(&name, c, &mut extras);
                table.columns.push(col);
            } else {
                self.elem(&name, e, &mut extras);
            }
        }
        // Fold the table-level facts into the table itself.
        for x in extras {
            match x {
                SchemaChange::SetPrimaryKey {
                    name,
                    columns,
                    prefixes,
                    ..
                } => {
                    let cols = columns.unwrap_or_default();
                    for c in &cols {
                        if let Some(col) = table.columns.iter_mut().find(|k| &k.name == c) {
                            col.nullable = false;
                        }
                    }
                    table.primary_key = Some(ddl_core::PrimaryKey {
                        name,
                        columns: cols,
                        prefixes,
                    });
                }
                SchemaChange::AddIndex { index, .. } => table.indexes.push(index),
                SchemaChange::AddForeignKey { foreign_key, .. } => {
                    table.foreign_keys.push(foreign_key)
                }
                SchemaChange::AddCheck { check, .. } => table.checks.push(check),
                _ => {}
            }
        }
        // MariaDB's JSON is LONGTEXT with CHECK (json_valid(col)), and that is how its
        // dumps and SHOW CREATE TABLE write it: the column is JSON.
        if self.dialect == Dialect::MySql {
            let mut kept = Vec::with_capacity(table.checks.len());
            for ck in std::mem::take(&mut table.checks) {
                let col = json_valid_column(&ck.expr).and_then(|n| {
                    table.columns.iter_mut().find(|c| {
                        c.name.eq_ignore_ascii_case(&n)
                            && matches!(
                                c.data_type,
                                ddl_core::DataType::Text { .. }
                                    | ddl_core::DataType::Varchar { .. }
                            )
                    })
                });
                match col {
                    Some(c) => c.data_type = ddl_core::DataType::Json { binary: false },
                    None => kept.push(ck),
                }
            }
            table.checks = kept;
        }
        for (k, v) in &d.options {
            match k.as_str() {
                "COMMENT" => table.comment = Some(v.clone()),
                // The next value of the table's AUTO_INCREMENT column: its start.
                "AUTO_INCREMENT" => {
                    if let (Some(c), Ok(n)) = (
                        table.columns.iter_mut().find(|c| c.identity.is_some()),
                        v.parse::<i64>(),
                    ) {
                        if let Some(id) = c.identity.as_mut() {
                            id.start = Some(n).filter(|n| *n != 1);
                        }
                    }
                }
                _ => {
                    let v = ddl_core::DialectSql::new(self.dialect.name(), v.clone());
                    table.options.insert(k.to_ascii_lowercase(), v);
                }
            }
        }
        table.partition_by = d
            .partition_by
            .as_ref()
            .map(|p| ddl_core::DialectSql::new(self.dialect.name(), p.clone()));
        if let Some(t) = &d.trailing {
            self.diags.skip(format!(
                "table {}: storage clause `{}` is not carried",
                table.name,
                crate::translate::excerpt(t)
            ));
        }
        Ok(vec![ChangeRequest::Change(SchemaChange::CreateTable {
            table,
            if_not_exists: d.if_not_exists,
        })])
    }

    fn resolve_col(&self, table: &TableName, id: &Ident) -> String {
        let n = self.name(id);
        self.catalog.resolve_column(table, &n).unwrap_or(n)
    }

    /// Whether the table has an index, key or constraint named `name`.
    fn has_named(&self, table: &TableName, name: &str) -> bool {
        let Some(t) = self.catalog.table(table) else {
            return false;
        };
        let is = |n: &Option<String>| n.as_deref().is_some_and(|n| n.eq_ignore_ascii_case(name));
        t.indexes.iter().any(|i| is(&i.name))
            || t.foreign_keys.iter().any(|f| is(&f.name))
            || t.checks.iter().any(|c| is(&c.name))
            || t.primary_key.as_ref().is_some_and(|p| is(&p.name))
            || self.implicit_pkey(table, name)
    }

    /// Whether constraint `name` is the table's primary key: by its name, or, when
    /// it has none, by the name PostgreSQL gives a key written without one
    /// (`<table>_pkey`; the schema history keeps such a key unnamed).
    fn implicit_pkey(&self, table: &TableName, name: &str) -> bool {
        self.catalog.table(table).is_some_and(|t| {
            t.primary_key.as_ref().is_some_and(|p| match &p.name {
                Some(n) => n.eq_ignore_ascii_case(name),
                None => {
                    self.dialect == Dialect::Postgres
                        && name.eq_ignore_ascii_case(&format!("{}_pkey", table.name))
                }
            })
        })
    }

    /// PostgreSQL: a constraint a known table does not have (its definition came
    /// from a snapshot, which holds columns and key only).
    fn unknown_constraint(&self, table: &TableName, name: &str) -> bool {
        let is = |n: &Option<String>| n.as_deref().is_some_and(|n| n.eq_ignore_ascii_case(name));
        self.dialect == Dialect::Postgres
            && self.catalog.table(table).is_some_and(|t| {
                !t.foreign_keys.iter().any(|f| is(&f.name))
                    && !t.checks.iter().any(|c| is(&c.name))
                    && !t.indexes.iter().any(|i| is(&i.name))
                    && !t.primary_key.as_ref().is_some_and(|p| is(&p.name))
            })
    }

    fn position(&self, table: &TableName, p: &Option<Pos>) -> Option<ColumnPosition> {
        p.as_ref().map(|p| match p {
            Pos::First => ColumnPosition::First,
            Pos::After(c) => ColumnPosition::After(self.resolve_col(table, c)),
        })
    }

    /// ALTER TABLE: each spec becomes one or more requests.
    pub fn alter_table(&mut self, d: &AlterTableDraft) -> Result<Vec<ChangeRequest>, LowerError> {
        let mut table = self.table_name(&d.name);
        if let Some(k) = self.catalog.resolve_table(&table) {
            table = k.clone();
        } else if self.defs.skipped.contains(&table) {
            self.diags.skip(format!(
                "{table} is not a translated table (a view or a query's result): ALTER skipped with it"
            ));
            return Ok(Vec::new());
        } else if d.specs.iter().all(|s| matches!(s, AlterSpec::Ignored(_))) {
            // pg_dump writes `ALTER TABLE seq OWNER TO ...` for sequences and views
            // too: nothing to change, whatever the relation is.
            for s in &d.specs {
                if let AlterSpec::Ignored(s) = s {
                    self.diags.skip(format!(
                        "{table}: `{}` has no schema meaning",
                        crate::translate::excerpt(s)
                    ));
                }
            }
            return Ok(Vec::new());
        } else if !d.if_exists {
            return Err(LowerError(
                format!("table {table} is not known"),
                vec![table],
            ));
        } else {
            self.diags.skip(format!(
                "{table} does not exist (ALTER TABLE IF EXISTS): unchanged"
            ));
            return Ok(Vec::new());
        }
        let mut out: Vec<ChangeRequest> = Vec::new();
        let ch = |c: SchemaChange| ChangeRequest::Change(c);
        // MariaDB's conditional index and constraint changes, decided on the catalog.
        let mut specs: Vec<&AlterSpec> = Vec::with_capacity(d.specs.len());
        for spec in &d.specs {
            let (inner, want) = match spec {
                AlterSpec::IfExists(s) => (s.as_ref(), true),
                AlterSpec::IfNotExists(s) => (s.as_ref(), false),
                other => {
                    specs.push(other);
                    continue;
                }
            };
            let name = match inner {
                AlterSpec::DropIndex(n)
                | AlterSpec::DropForeignKey(n)
                | AlterSpec::DropConstraint(n) => Some(self.name(n)),
                AlterSpec::AddElem(
                    TableElem::Index { name, .. }
                    | TableElem::ForeignKey { name, .. }
                    | TableElem::Check { name, .. },
                ) => name.as_ref().map(|n| self.name(n)),
                _ => None,
            };
            // A column a CHANGE or MODIFY IF EXISTS names.
            let column = match inner {
                AlterSpec::ChangeColumn { old, .. } => Some(self.name(old)),
                AlterSpec::RenameColumn { from, .. } => Some(self.name(from)),
                AlterSpec::ModifyColumn { column, .. } => Some(self.name(&column.name)),
                _ => None,
            };
            let has = match inner {
                AlterSpec::DropColumns(cols) => cols
                    .iter()
                    .all(|c| self.catalog.resolve_column(&table, &self.name(c)).is_ok()),
                _ if column.is_some() => column
                    .as_deref()
                    .is_some_and(|c| self.catalog.resolve_column(&table, c).is_ok()),
                AlterSpec::AddElem(TableElem::PrimaryKey { .. }) => self
                    .catalog
                    .table(&table)
                    .is_some_and(|t| t.primary_key.is_some()),
                _ => name.as_deref().is_some_and(|n| self.has_named(&table, n)),
            };
            let name = name.or_else(|| match inner {
                AlterSpec::DropColumns(cols) => Some(
                    cols.iter()
                        .map(|c| format!("column {}", self.name(c)))
                        .collect::<Vec<_>>()
                        .join(", "),
                ),
                AlterSpec::AddElem(TableElem::PrimaryKey { .. }) => Some("primary key".into()),
                _ => column.map(|c| format!("column {c}")),
            });
            if has == want {
                specs.push(inner);
            } else {
                self.diags.skip(format!(
                    "{table}: {} {} (IF {}EXISTS): unchanged",
                    name.unwrap_or_default(),
                    if has { "exists" } else { "does not exist" },
                    if want { "" } else { "NOT " }
                ));
            }
        }
        for spec in specs {
            match spec {
                AlterSpec::AddColumns {
                    columns,
                    position,
                    if_not_exists,
                } => {
                    let mut pos = self.position(&table, position);
                    for cd in columns {
                        let mut extras = Vec::new();
                        let col = self.column(&table, cd, &mut extras);
                        let name = col.name.clone();
                        if *if_not_exists && self.catalog.resolve_column(&table, &name).is_ok() {
                            self.diags.skip(format!(
                                "{table}: column {name} exists (ADD COLUMN IF NOT EXISTS): unchanged"
                            ));
                            continue;
                        }
                        out.push(ch(SchemaChange::AddColumn {
                            table: table.clone(),
                            column: col,
                            position: pos.take(),
                        }));
                        if position.is_some() {
                            pos = Some(ColumnPosition::After(name));
                        }
                        out.extend(extras.into_iter().map(ch));
                    }
                }
                AlterSpec::AddElem(e) => {
                    let mut v = Vec::new();
                    self.elem(&table, e, &mut v);
                    out.extend(v.into_iter().map(ch));
                }
                AlterSpec::AddElems(elems) => {
                    let mut v = Vec::new();
                    for e in elems {
                        self.elem(&table, e, &mut v);
                    }
                    out.extend(v.into_iter().map(ch));
                }
                AlterSpec::DropColumns(cols) => {
                    for c in cols {
                        out.push(ch(SchemaChange::DropColumn {
                            table: table.clone(),
                            column: self.resolve_col(&table, c),
                        }))
                    }
                }
                AlterSpec::DropPrimaryKey => out.push(ch(SchemaChange::SetPrimaryKey {
                    table: table.clone(),
                    name: None,
                    columns: None,
                    prefixes: Default::default(),
                })),
                AlterSpec::DropIndex(n) => out.push(ch(SchemaChange::DropIndex {
                    table: table.clone(),
                    name: self.name(n),
                })),
                AlterSpec::DropConstraint(n) if self.implicit_pkey(&table, &self.name(n)) => {
                    out.push(ch(SchemaChange::SetPrimaryKey {
                        table: table.clone(),
                        name: None,
                        columns: None,
                        prefixes: Default::default(),
                    }))
                }
                AlterSpec::DropConstraint(n) if self.unknown_constraint(&table, &self.name(n)) => {
                    self.diags.skip(format!(
                        "constraint {} of {table}: not in its definition here (a definition read from a database carries its columns and key only, so the targets never had it): nothing to drop",
                        self.name(n)
                    ));
                }
                AlterSpec::DropForeignKey(n) | AlterSpec::DropConstraint(n) => {
                    out.push(ch(SchemaChange::DropConstraint {
                        table: table.clone(),
                        name: self.name(n),
                    }))
                }
                AlterSpec::ModifyColumn { column, position } => {
                    let mut extras = Vec::new();
                    let col = self.column(&table, column, &mut extras);
                    out.push(ChangeRequest::ReplaceColumn {
                        table: table.clone(),
                        name: self.resolve_col(&table, &column.name),
                        column: col,
                        position: self.position(&table, position),
                    });
                    out.extend(extras.into_iter().map(ch));
                }
                AlterSpec::ChangeColumn {
                    old,
                    column,
                    position,
                } => {
                    let mut extras = Vec::new();
                    let col = self.column(&table, column, &mut extras);
                    out.push(ChangeRequest::ReplaceColumn {
                        table: table.clone(),
                        name: self.resolve_col(&table, old),
                        column: col,
                        position: self.position(&table, position),
                    });
                    out.extend(extras.into_iter().map(ch));
                }
                AlterSpec::ModifyPartial(cols) => {
                    for cd in cols {
                        let name = self.resolve_col(&table, &cd.name);
                        let Some(old) = self.catalog.table(&table).and_then(|t| t.column(&name))
                        else {
                            return Err(LowerError(
                                format!("column {name} of table {table} is not known"),
                                Vec::new(),
                            ));
                        };
                        let mut new = old.clone();
                        if let Some(ty) = &cd.ty {
                            new.data_type = ty.data_type.clone();
                        }
                        let mut extras = Vec::new();
                        // DEFAULT NULL in a MODIFY removes the default.
                        self.apply_attrs(&table, &mut new, &cd.attrs, &mut extras);
                        out.push(ChangeRequest::ReplaceColumn {
                            table: table.clone(),
                            name,
                            column: new,
                            position: None,
                        });
                        out.extend(extras.into_iter().map(ch));
                    }
                }
                AlterSpec::RenameColumn { from, to } => out.push(ch(SchemaChange::RenameColumn {
                    table: table.clone(),
                    from: self.resolve_col(&table, from),
                    to: self.name(to),
                })),
                AlterSpec::RenameTo(n) => {
                    let mut to = self.table_name(n);
                    if n.len() == 1 {
                        to.schema = table.schema.clone();
                    }
                    out.push(ch(SchemaChange::RenameTable {
                        from: table.clone(),
                        to: to.clone(),
                    }));
                    table = to;
                }
                AlterSpec::RenameConstraint { from, to } => {
                    let (from, to) = (self.name(from), self.name(to));
                    let named = |n: &Option<String>| {
                        n.as_deref().is_some_and(|n| n.eq_ignore_ascii_case(&from))
                    };
                    let Some(t) = self.catalog.table(&table) else {
                        continue;
                    };
                    let t = t.clone();
                    let pkey = self.implicit_pkey(&table, &from);
                    if let Some(ix) = t.indexes.iter().find(|i| named(&i.name)) {
                        let mut ix = ix.clone();
                        ix.name = Some(to);
                        out.push(ch(SchemaChange::DropIndex {
                            table: table.clone(),
                            name: from,
                        }));
                        out.push(ch(SchemaChange::AddIndex {
                            table: table.clone(),
                            index: ix,
                        }));
                    } else if let Some(fk) = t.foreign_keys.iter().find(|f| named(&f.name)) {
                        let mut fk = fk.clone();
                        fk.name = Some(to);
                        out.push(ch(SchemaChange::DropConstraint {
                            table: table.clone(),
                            name: from,
                        }));
                        out.push(ch(SchemaChange::AddForeignKey {
                            table: table.clone(),
                            foreign_key: fk,
                        }));
                    } else if let Some(c) = t.checks.iter().find(|c| named(&c.name)) {
                        let mut c = c.clone();
                        c.name = Some(to);
                        out.push(ch(SchemaChange::DropConstraint {
                            table: table.clone(),
                            name: from,
                        }));
                        out.push(ch(SchemaChange::AddCheck {
                            table: table.clone(),
                            check: c,
                        }));
                    } else if let Some(pk) = t
                        .primary_key
                        .as_ref()
                        .filter(|p| pkey || named(&p.name))
                    {
                        out.push(ch(SchemaChange::SetPrimaryKey {
                            table: table.clone(),
                            name: Some(to),
                            columns: Some(pk.columns.clone()),
                            prefixes: pk.prefixes.clone(),
                        }));
                    } else {
                        return Err(LowerError(
                            format!("constraint {from} of table {table} is not known"),
                            Vec::new(),
                        ));
                    }
                }
                AlterSpec::RenameIndex { from, to } => {
                    let from = self.name(from);
                    let ix = self
                        .catalog
                        .table(&table)
                        .and_then(|t| t.indexes.iter().find(|i| i.name.as_deref() == Some(&from)))
                        .cloned();
                    let Some(mut ix) = ix else {
                        return Err(LowerError(
                            format!("index {from} of table {table} is not known"),
                            Vec::new(),
                        ));
                    };
                    out.push(ch(SchemaChange::DropIndex {
                        table: table.clone(),
                        name: from,
                    }));
                    ix.name = Some(self.name(to));
                    out.push(ch(SchemaChange::AddIndex {
                        table: table.clone(),
                        index: ix,
                    }));
                }
                AlterSpec::AlterColumn { name, op } => {
                    let column = self.resolve_col(&table, name);
                    let t = table.clone();
                    out.push(ch(match op {
                        AlterColumnOp::SetType { ty, using } => SchemaChange::AlterColumnType {
                            table: t,
                            column,
                            data_type: self.user_type(ty.data_type.clone()).0,
                            using: using
                                .as_ref()
                                .map(|u| ddl_core::DialectSql::new(self.dialect.name(), u.clone())),
                        },
                        AlterColumnOp::AddIdentity(ColAttr::Identity {
                            always,
                            start,
                            increment,
                        }) => SchemaChange::SetIdentity {
                            table: t,
                            column,
                            identity: Some(identity(*always, *start, *increment)),
                        },
                        AlterColumnOp::AddIdentity(_) => unreachable!("identity attribute"),
                        AlterColumnOp::DropIdentity => SchemaChange::SetIdentity {
                            table: t,
                            column,
                            identity: None,
                        },
                        AlterColumnOp::Ignored(what) => {
                            self.diags.skip(format!(
                                "{t}.{column}: `{}` has no schema meaning",
                                crate::translate::excerpt(what)
                            ));
                            continue;
                        }
                        AlterColumnOp::SetDefault(e)
                            if self.owned_nextval(&t, &column, e).is_some() =>
                        {
                            let seq = self.owned_nextval(&t, &column, e).expect("checked");
                            let mut reqs = crate::parse::identity_from(&t, &column, seq);
                            // The column has no default yet: only the identity.
                            out.push(reqs.pop().expect("identity"));
                            continue;
                        }
                        AlterColumnOp::SetNotNull => SchemaChange::SetNullable {
                            table: t,
                            column,
                            nullable: false,
                        },
                        AlterColumnOp::DropNotNull => SchemaChange::SetNullable {
                            table: t,
                            column,
                            nullable: true,
                        },
                        AlterColumnOp::SetDefault(e) => {
                            let ty = self
                                .catalog
                                .table(&t)
                                .and_then(|x| x.column(&column))
                                .map(|c| c.data_type.clone());
                            let default = self.default_value(e).filter(|d| {
                                !matches!(
                                    d,
                                    DefaultValue::Literal {
                                        value: Literal::Null
                                    }
                                )
                            });
                            SchemaChange::SetDefault {
                                default: match &ty {
                                    Some(ty) => self.jsonb_default(ty, default),
                                    None => default,
                                },
                                table: t,
                                column,
                            }
                        }
                        AlterColumnOp::DropDefault => SchemaChange::SetDefault {
                            table: t,
                            column,
                            default: None,
                        },
                    }));
                }
                AlterSpec::TableOption { key, value } => match key.as_str() {
                    "COMMENT" => out.push(ch(SchemaChange::SetTableComment {
                        table: table.clone(),
                        comment: Some(value.clone()).filter(|v| !v.is_empty()),
                    })),
                    // The first value of an AUTO_INCREMENT column this statement
                    // adds: the numbers its rows get start there.
                    "AUTO_INCREMENT" => {
                        let added = out.iter_mut().find_map(|r| match r {
                            ChangeRequest::Change(SchemaChange::AddColumn { column, .. }) => {
                                column.identity.as_mut()
                            }
                            _ => None,
                        });
                        match (value.trim().parse::<i64>().ok(), added) {
                            (Some(n), Some(id)) => id.start = Some(n),
                            _ => self.diags.skip(format!(
                                "table {table}: AUTO_INCREMENT={value} is not carried"
                            )),
                        }
                    }
                    _ => out.push(ch(SchemaChange::SetTableOption {
                        table: table.clone(),
                        key: key.to_ascii_lowercase(),
                        value: ddl_core::DialectSql::new(self.dialect.name(), value.clone()),
                    })),
                },
                AlterSpec::Ignored(s)
                    if s.starts_with("PARTITION BY") || s.starts_with("REMOVE PARTITIONING") =>
                {
                    self.diags.skip(format!(
                        "table {table}: `{}` is not carried: partitioning is not translated (rows and columns are the same either way)",
                        crate::translate::excerpt(s)
                    ))
                }
                // PostgreSQL's SET SCHEMA: the table moves (a rename into another
                // schema).
                AlterSpec::SetSchema(schema) => {
                    let mut to = table.clone();
                    to.schema = Some(self.name(schema));
                    out.push(ch(SchemaChange::RenameTable {
                        from: table.clone(),
                        to: to.clone(),
                    }));
                    table = to;
                }
                AlterSpec::Ignored(s) if s.starts_with("ATTACH PARTITION") => {
                    self.diags.skip(format!(
                        "table {table}: `{}` is not carried: partitioning is not translated, the partition stays a table of its own",
                        crate::translate::excerpt(s)
                    ))
                }
                // Unwrapped above (nested conditions are not written).
                AlterSpec::IfExists(_) | AlterSpec::IfNotExists(_) => {}
                AlterSpec::Ignored(s) => self.diags.skip(format!(
                    "table {table}: `{}` has no schema meaning",
                    crate::translate::excerpt(s)
                )),
            }
        }
        Ok(out)
    }
}

/// An identity column's generation: `GENERATED ALWAYS` or `BY DEFAULT`.
fn identity(always: bool, start: Option<i64>, increment: Option<i64>) -> Identity {
    Identity {
        kind: if always {
            IdentityKind::Always
        } else {
            IdentityKind::ByDefault
        },
        start,
        increment,
    }
}

/// The constraint a change adds, for messages: `FOREIGN KEY fk_x`, `UNIQUE`.
fn change_label(c: &SchemaChange) -> String {
    match c {
        SchemaChange::SetPrimaryKey { name, .. } => constraint_label("PRIMARY KEY", name),
        SchemaChange::AddIndex { index, .. } => constraint_label("UNIQUE", &index.name),
        SchemaChange::AddForeignKey { foreign_key, .. } => {
            constraint_label("FOREIGN KEY", &foreign_key.name)
        }
        SchemaChange::AddCheck { check, .. } => constraint_label("CHECK", &check.name),
        _ => "constraint".to_owned(),
    }
}

fn constraint_label(kind: &str, name: &Option<String>) -> String {
    match name {
        Some(n) => format!("{kind} {n}"),
        None => kind.to_owned(),
    }
}

/// Make `c` an identity column, NOT NULL, and (MySQL's SERIAL) UNIQUE.
fn serial(table: &TableName, c: &mut Column, unique: bool, extras: &mut Vec<SchemaChange>) {
    c.nullable = false;
    c.identity = Some(Identity {
        kind: IdentityKind::ByDefault,
        start: None,
        increment: None,
    });
    if unique {
        extras.push(SchemaChange::AddIndex {
            table: table.clone(),
            index: Index {
                name: Some(c.name.clone()),
                predicate: None,
                kind: IndexKind::Unique,
                parts: vec![IndexPart::column(&c.name)],
            },
        });
    }
}

/// A name as the source database stores it: a quoted name as written, any other
/// folded by the dialect's rule (PostgreSQL lower case, Oracle upper case).
pub fn stored_name(dialect: Dialect, value: &str, quoted: bool) -> String {
    if quoted {
        value.to_owned()
    } else {
        dialect.fold().apply(value)
    }
}

/// A table name from its (stored) parts: the last is the table, the one before it the
/// schema; a bare name takes the default schema (`USE db`, `SET search_path`).
pub fn qualify(default_schema: Option<&str>, parts: impl IntoIterator<Item = String>) -> TableName {
    let mut parts: Vec<String> = parts.into_iter().collect();
    let name = parts.pop().unwrap_or_default();
    TableName {
        schema: parts.pop().or_else(|| default_schema.map(str::to_owned)),
        name,
    }
}

/// The bytes of a PostgreSQL bytea literal's text, in its hex (`\xab01`) or escape
/// (`a\\b\001`) form; None when it is neither.
fn pg_bytea(v: &str) -> Option<Vec<u8>> {
    if let Some(h) = v.strip_prefix("\\x") {
        let h: String = h.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        return ddl_core::schema::bytes_from_hex(&h);
    }
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
        } else if b.get(i + 1) == Some(&b'\\') {
            out.push(b'\\');
            i += 2;
        } else {
            let o = v.get(i + 1..i + 4)?;
            out.push(u8::from_str_radix(o, 8).ok()?);
            i += 4;
        }
    }
    Some(out)
}

/// Hex digits as a [`Literal::Bytes`] holds them (lowercase, an even count: MySQL's
/// `0xABC` is `0x0ABC`); None when `h` is not hex.
fn hex_bytes(h: &str) -> Option<String> {
    if !h.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let h = h.to_ascii_lowercase();
    Some(if h.len() % 2 == 1 { format!("0{h}") } else { h })
}

/// Classify a default expression as written in `dialect` into a neutral default.
pub fn classify_default(dialect: Dialect, raw: &str) -> Option<DefaultValue> {
    // Redundant parentheses: DEFAULT (0), DEFAULT ('x').
    let mut t = strip_parens(raw);
    // pg_dump --quote-all-identifiers quotes function names: "nextval"('...'),
    // "now"(). A plain name in quotes means the same unquoted.
    let unquoted;
    if dialect == Dialect::Postgres {
        if let Some(rest) = t.strip_prefix('"') {
            if let Some((name, args)) = rest.split_once("\"(") {
                if !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                {
                    unquoted = format!("{name}({args}");
                    t = &unquoted;
                }
            }
        }
    }
    // PostgreSQL casts on literals: 'x'::character varying, 0::numeric (but not the
    // cast inside nextval('seq'::regclass)).
    let mut cast_to_bytea = false;
    // Cast to a type that is no bit string: a bit string literal is then its number.
    let mut cast_from_bits = false;
    if dialect == Dialect::Postgres {
        if let Some(p) = t.rfind("::") {
            let (head, ty) = (&t[..p], &t[p + 2..]);
            let is_type = !ty.contains('\'') && (!ty.contains('(') || ty.ends_with(')'));
            if is_type && !head.to_ascii_lowercase().starts_with("nextval(") {
                let ty = ty.trim().trim_matches('"').to_ascii_lowercase();
                cast_to_bytea = ty == "bytea";
                cast_from_bits = !ty.starts_with("bit") && !ty.starts_with("varbit");
                t = strip_parens(head);
            }
        }
    }
    // A character set introducer before a hex or bit literal (_latin1 X'E9'): the
    // bytes are the literal's (a string's introducer is read with the string).
    if dialect == Dialect::MySql && t.starts_with('_') {
        let after = t[1..].trim_start_matches(|c: char| c.is_ascii_alphanumeric());
        let body = after.trim_start();
        let lead = body.get(..2).unwrap_or_default().to_ascii_uppercase();
        if matches!(lead.as_str(), "X'" | "B'" | "0X" | "0B") {
            t = body;
        }
    }
    let up = t.to_ascii_uppercase();
    let lit = |value| Some(DefaultValue::Literal { value });
    if up == "NULL" {
        return lit(Literal::Null);
    }
    if up == "TRUE" || up == "FALSE" {
        return lit(Literal::Boolean(up == "TRUE"));
    }
    if let Ok((rest, s)) = grammar::lex::string_lit(dialect.flavor())(t) {
        if rest.trim().is_empty() {
            // PostgreSQL's bytea in hex form ('\xab'::bytea, as pg_dump writes it).
            if let Some(b) = cast_to_bytea.then(|| pg_bytea(&s)).flatten() {
                return lit(Literal::from_bytes(&b));
            }
            return lit(Literal::String(s));
        }
    }
    let num = t.strip_prefix('+').unwrap_or(t);
    if is_number(num) {
        return lit(Literal::Number(num.to_owned()));
    }
    // MySQL's hexadecimal literals, X'4142' and 0x4142: a byte string (a number in a
    // numeric column: see DefaultValue::fitted). In PostgreSQL X'..' is a bit string.
    if dialect == Dialect::MySql {
        // b'101' and 0b101 are byte strings too (the bits left-padded to whole bytes).
        let bits = if up.starts_with("B'") && up.ends_with('\'') && t.len() >= 3 {
            Some(&t[2..t.len() - 1])
        } else {
            t.strip_prefix("0b").filter(|b| !b.is_empty())
        };
        if let Some(b) = bits.and_then(ddl_core::schema::bytes_from_bits) {
            return lit(Literal::from_bytes(&b));
        }
        let hex = if up.starts_with("X'") && up.ends_with('\'') && t.len() >= 3 {
            Some(&t[2..t.len() - 1]).filter(|h| h.len().is_multiple_of(2))
        } else {
            t.strip_prefix("0x").filter(|h| !h.is_empty())
        };
        if let Some(h) = hex.and_then(hex_bytes) {
            return lit(Literal::Bytes(h));
        }
    }
    if (up.starts_with("B'") || up.starts_with("X'")) && up.ends_with('\'') {
        let body = &t[2..t.len() - 1];
        let radix = if up.starts_with('B') { 2 } else { 16 };
        // PostgreSQL's are bit strings, whose length is part of the value: their
        // digits (X'1F' is 00011111), unless cast to a number.
        if dialect == Dialect::Postgres && !cast_from_bits {
            let digits: Option<String> = match radix {
                2 => body
                    .bytes()
                    .all(|c| c == b'0' || c == b'1')
                    .then(|| body.into()),
                _ => body
                    .chars()
                    .map(|c| c.to_digit(16).map(|d| format!("{d:04b}")))
                    .collect(),
            };
            if let Some(d) = digits {
                return lit(Literal::String(d));
            }
        }
        if let Ok(v) = u128::from_str_radix(body, radix) {
            return lit(Literal::Number(v.to_string()));
        }
    }
    // A function call is the default only when it is all of it (`curdate() +
    // interval 1 day` is another value: kept as the source's expression).
    let func = if whole_call(&up) {
        up.split('(').next().unwrap_or("").trim()
    } else {
        ""
    };
    let arg = up
        .find('(')
        .and_then(|p| up[p + 1..].strip_suffix(')'))
        .map(str::trim);
    let prec = arg.and_then(|a| a.parse::<u8>().ok());
    match func {
        "CURRENT_TIMESTAMP"
        | "NOW"
        | "LOCALTIMESTAMP"
        | "SYSTIMESTAMP"
        | "SYSDATE"
        | "CURRENT_TIMESTAMP()"
        | "STATEMENT_TIMESTAMP"
        | "TRANSACTION_TIMESTAMP"
        | "CLOCK_TIMESTAMP"
        | "GETDATE"
        | "UTC_TIMESTAMP" => {
            let precision = match func {
                "SYSTIMESTAMP"
                | "NOW"
                | "STATEMENT_TIMESTAMP"
                | "TRANSACTION_TIMESTAMP"
                | "CLOCK_TIMESTAMP"
                    if dialect != Dialect::MySql =>
                {
                    prec.or(Some(6))
                }
                "SYSDATE" => Some(0),
                _ => prec,
            };
            return Some(DefaultValue::CurrentTimestamp { precision });
        }
        "CURRENT_DATE" | "CURDATE" => return Some(DefaultValue::CurrentDate),
        "CURRENT_TIME" | "CURTIME" | "LOCALTIME" => return Some(DefaultValue::CurrentTime),
        "NEXTVAL" => {
            if let Some(a) = t.find('(').map(|p| &t[p + 1..t.len() - 1]) {
                let a = a.split("::").next().unwrap_or(a).trim();
                if let Ok((_, s)) = grammar::lex::string_lit(dialect.flavor())(a) {
                    return Some(DefaultValue::NextVal { sequence: s });
                }
            }
        }
        _ => {}
    }
    if dialect == Dialect::Oracle && up.ends_with(".NEXTVAL") {
        return Some(DefaultValue::NextVal {
            sequence: t[..t.len() - 8].to_owned(),
        });
    }
    Some(DefaultValue::Raw {
        dialect: dialect.name().into(),
        text: raw.trim().to_owned(),
    })
}

/// Whether `up` is one name, or one call `name(...)` whose parenthesis closes at its end.
fn whole_call(up: &str) -> bool {
    let Some(open) = up.find('(') else {
        return !up.trim().contains(char::is_whitespace);
    };
    let mut depth = 0i32;
    for (k, c) in up.char_indices().skip_while(|(k, _)| *k < open) {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return up[k + 1..].trim().is_empty();
                }
            }
            _ => {}
        }
    }
    false
}

/// `s` without the parentheses that wrap all of it, however deep: one pass pairs
/// every parenthesis, so `((((1))))` costs as much as its length.
pub(crate) fn strip_parens(s: &str) -> &str {
    let t = s.trim();
    let b = t.as_bytes();
    // The closing partner of each opening parenthesis (byte offsets).
    let mut partner = vec![usize::MAX; b.len()];
    let mut open = Vec::new();
    for (k, c) in b.iter().enumerate() {
        match c {
            b'(' => open.push(k),
            b')' => match open.pop() {
                Some(o) => partner[o] = k,
                None => return t,
            },
            _ => {}
        }
    }
    if !open.is_empty() {
        return t;
    }
    let (mut lo, mut hi) = (0, b.len());
    while hi > lo + 1 && b[lo] == b'(' && partner[lo] == hi - 1 {
        lo += 1;
        hi -= 1;
        while lo < hi && b[lo].is_ascii_whitespace() {
            lo += 1;
        }
        while hi > lo && b[hi - 1].is_ascii_whitespace() {
            hi -= 1;
        }
    }
    &t[lo..hi]
}

fn is_number(s: &str) -> bool {
    let s = s.strip_prefix('-').unwrap_or(s);
    !s.is_empty()
        && s.parse::<f64>().is_ok()
        && s.chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '-' | '+'))
}

/// The column of a `json_valid(col)` check, if that is all the check says.
fn json_valid_column(expr: &str) -> Option<String> {
    let e = strip_parens(expr);
    let (f, rest) = e.split_once('(')?;
    if !f.trim().eq_ignore_ascii_case("json_valid") {
        return None;
    }
    let inner = rest.strip_suffix(')')?.trim();
    let name = inner.trim_matches('`');
    (!name.is_empty()
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '$'))
    .then(|| name.to_owned())
}

/// A domain CHECK's text with `VALUE` (the domain's value) replaced by the column.
fn replace_value(text: &str, column: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    while i < b.len() {
        if text[i..].len() >= 5
            && text[i..i + 5].eq_ignore_ascii_case("value")
            && (i == 0 || !word(b[i - 1]))
            && b.get(i + 5).is_none_or(|c| !word(*c))
        {
            out.push_str(column);
            i += 5;
            continue;
        }
        let ch = text[i..].chars().next().expect("char");
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

/// Give the unique keys, foreign keys and checks a PostgreSQL statement writes
/// without a name the names PostgreSQL gives them (`<table>_<columns>_key`,
/// `_fkey`, `<table>_<first column of the expression>_check`, cut to 63 bytes, a
/// number added on a clash), so that a later `DROP CONSTRAINT orders_email_key`
/// finds them in the catalog and the targets' copies carry the same names.
pub fn pg_implicit_names(catalog: &ddl_core::Catalog, reqs: &mut [ChangeRequest]) {
    use std::collections::HashSet;
    let mut taken: HashSet<(TableName, String)> = HashSet::new();
    let mut columns: Vec<(TableName, String)> = Vec::new();
    let known = |taken: &HashSet<(TableName, String)>, t: &TableName, n: &str| {
        taken.contains(&(t.clone(), n.to_ascii_lowercase()))
            || catalog.table(t).is_some_and(|tb| {
                let is =
                    |x: &Option<String>| x.as_deref().is_some_and(|x| x.eq_ignore_ascii_case(n));
                tb.indexes.iter().any(|i| is(&i.name))
                    || tb.foreign_keys.iter().any(|f| is(&f.name))
                    || tb.checks.iter().any(|c| is(&c.name))
                    || tb.primary_key.as_ref().is_some_and(|p| is(&p.name))
            })
    };
    let choose =
        |taken: &mut HashSet<(TableName, String)>, t: &TableName, cols: &str, label: &str| {
            let mut pass = 0;
            loop {
                let l = match pass {
                    0 => label.to_owned(),
                    p => format!("{label}{p}"),
                };
                let n = object_name(&t.name, cols, &l);
                if !known(taken, t, &n) {
                    taken.insert((t.clone(), n.to_ascii_lowercase()));
                    return n;
                }
                pass += 1;
            }
        };
    let first_column = |expr: &str, cols: &[String]| -> Option<String> {
        let mut word = String::new();
        let mut quoted = false;
        let mut found = None;
        let mut check = |w: &str| {
            if found.is_none() {
                found = cols.iter().find(|c| c.eq_ignore_ascii_case(w)).cloned();
            }
        };
        for ch in expr.chars() {
            if ch == '"' {
                if quoted {
                    check(&word);
                    word.clear();
                }
                quoted = !quoted;
            } else if quoted || ch.is_alphanumeric() || ch == '_' {
                word.push(ch);
            } else {
                if !word.is_empty() && !word.starts_with(|c: char| c.is_ascii_digit()) {
                    check(&word);
                }
                word.clear();
            }
        }
        if !word.is_empty() {
            check(&word);
        }
        found
    };
    for r in reqs.iter_mut() {
        let ChangeRequest::Change(c) = r else {
            continue;
        };
        match c {
            SchemaChange::CreateTable { table, .. } => {
                let t = table.name.clone();
                let cols: Vec<String> = table.columns.iter().map(|c| c.name.clone()).collect();
                columns.extend(cols.iter().map(|c| (t.clone(), c.clone())));
                for ix in table.indexes.iter_mut().filter(|i| i.name.is_none()) {
                    if ix.kind == ddl_core::IndexKind::Unique {
                        let parts = index_columns(ix);
                        ix.name = Some(choose(&mut taken, &t, &parts, "key"));
                    }
                }
                for fk in table.foreign_keys.iter_mut().filter(|f| f.name.is_none()) {
                    fk.name = Some(choose(&mut taken, &t, &fk.columns.join("_"), "fkey"));
                }
                for ck in table.checks.iter_mut().filter(|c| c.name.is_none()) {
                    let col = first_column(&ck.expr, &cols).unwrap_or_default();
                    ck.name = Some(choose(&mut taken, &t, &col, "check"));
                }
            }
            SchemaChange::AddColumn { table, column, .. } => {
                columns.push((table.clone(), column.name.clone()));
            }
            SchemaChange::AddIndex { table, index }
                if index.name.is_none() && index.kind == ddl_core::IndexKind::Unique =>
            {
                let parts = index_columns(index);
                index.name = Some(choose(&mut taken, table, &parts, "key"));
            }
            SchemaChange::AddForeignKey { table, foreign_key } if foreign_key.name.is_none() => {
                let cols = foreign_key.columns.join("_");
                foreign_key.name = Some(choose(&mut taken, table, &cols, "fkey"));
            }
            SchemaChange::AddCheck { table, check } if check.name.is_none() => {
                let mut cols: Vec<String> = catalog
                    .table(table)
                    .map(|t| t.columns.iter().map(|c| c.name.clone()).collect())
                    .unwrap_or_default();
                cols.extend(
                    columns
                        .iter()
                        .filter(|(t, _)| t == table)
                        .map(|(_, c)| c.clone()),
                );
                let col = first_column(&check.expr, &cols).unwrap_or_default();
                check.name = Some(choose(&mut taken, table, &col, "check"));
            }
            _ => {}
        }
    }
}

/// An index's columns as PostgreSQL joins them into its name (`expr` for an
/// expression).
fn index_columns(ix: &ddl_core::Index) -> String {
    ix.parts
        .iter()
        .map(|p| {
            if p.expression {
                "expr"
            } else {
                p.column.as_str()
            }
        })
        .collect::<Vec<_>>()
        .join("_")
}

/// PostgreSQL's `makeObjectName`: `name1_name2_label` in at most 63 bytes, the
/// longer of the two names cut first (`name2` may be empty).
fn object_name(name1: &str, name2: &str, label: &str) -> String {
    let overhead = label.len() + 1 + usize::from(!name2.is_empty());
    let avail = 63usize.saturating_sub(overhead);
    let (mut n1, mut n2) = (name1.len(), name2.len());
    while n1 + n2 > avail {
        if n1 > n2 {
            n1 -= 1;
        } else {
            n2 -= 1;
        }
    }
    let clip = |s: &str, mut n: usize| {
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        s[..n].to_owned()
    };
    match name2.is_empty() {
        true => format!("{}_{label}", clip(name1, n1)),
        false => format!("{}_{}_{label}", clip(name1, n1), clip(name2, n2)),
    }
}
