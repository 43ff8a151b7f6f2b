//! Objects a script defines besides tables, kept for what they mean to columns:
//! PostgreSQL domains (a base type with NOT NULL, DEFAULT and CHECKs), enum types,
//! and sequences (a `nextval()` default on the column that owns its sequence is an
//! identity column). The translator keeps one [`Definitions`] across statements.

use ddl_core::expr::Expr;
use ddl_core::{DataType, DefaultValue, TableName};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
pub struct Domain {
    pub base: DataType,
    pub not_null: bool,
    pub default: Option<DefaultValue>,
    /// (constraint name, source text, neutral form with the column as `value`).
    pub checks: Vec<(Option<String>, String, Option<Expr>)>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Sequence {
    pub start: Option<i64>,
    pub increment: Option<i64>,
    /// The column that owns it (`OWNED BY t.c`).
    pub owned_by: Option<(TableName, String)>,
    /// The `CREATE SEQUENCE` statement as written (every option), when one was read.
    pub text: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Definitions {
    /// By type name as stored (lower case unless quoted), schema left out: columns
    /// name their type with or without it.
    pub domains: BTreeMap<String, Domain>,
    pub enums: BTreeMap<String, Vec<String>>,
    pub sequences: BTreeMap<TableName, Sequence>,
    /// Relations that are not translated (views, materialized views, foreign tables,
    /// tables made by a query): what refers to them later (indexes, comments,
    /// ALTERs) is skipped with them.
    pub skipped: std::collections::BTreeSet<TableName>,
    /// Partitioned tables and their partitions, where partitions are made tables of
    /// their own (translation): a foreign key or CHECK later added to the parent is
    /// the partitions' too in PostgreSQL, and pg_dump writes it on the parent only.
    pub partitions: BTreeMap<TableName, Vec<TableName>>,
}

impl Definitions {
    /// The partitions of `parent`, and theirs, as tables of their own.
    pub fn partitions_of(&self, parent: &TableName) -> Vec<TableName> {
        let mut out = Vec::new();
        let mut work = vec![parent.clone()];
        while let Some(t) = work.pop() {
            for p in self.partitions.get(&t).into_iter().flatten() {
                if !out.contains(p) && p != parent {
                    out.push(p.clone());
                    work.push(p.clone());
                }
            }
        }
        out
    }
}

impl Definitions {
    /// The sequence a `nextval('name')` default names: exactly, or by its name alone
    /// when one side is unqualified.
    pub fn sequence(&self, name: &TableName) -> Option<(&TableName, &Sequence)> {
        self.sequences.get_key_value(name).or_else(|| {
            self.sequences
                .iter()
                .find(|(k, _)| k.name == name.name && (k.schema.is_none() || name.schema.is_none()))
                .or_else(|| {
                    // (Oracle's `s1.NEXTVAL` names `S1` as stored.)
                    self.sequences.iter().find(|(k, _)| {
                        k.name.eq_ignore_ascii_case(&name.name)
                            && match (&k.schema, &name.schema) {
                                (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
                                _ => true,
                            }
                    })
                })
        })
    }

    /// A sequence name as written inside `nextval('...')`.
    pub fn sequence_name(text: &str) -> TableName {
        // Dots split parts outside double quotes; inside them `""` is one quote.
        let mut parts: Vec<String> = Vec::new();
        let (mut part, mut quoted, mut in_quotes) = (String::new(), false, false);
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '"' if in_quotes && chars.peek() == Some(&'"') => {
                    chars.next();
                    part.push('"');
                }
                '"' => {
                    in_quotes = !in_quotes;
                    quoted = true;
                }
                '.' if !in_quotes => {
                    parts.push(std::mem::take(&mut part));
                    quoted = false;
                }
                c if in_quotes || quoted => part.push(c),
                c => part.push(c.to_ascii_lowercase()),
            }
        }
        parts.push(part);
        match parts.as_slice() {
            [.., s, n] => TableName::new(Some(s), n),
            [n] => TableName::new(None, n),
            [] => TableName::new(None, ""),
        }
    }

    /// The type a column names, when it is a domain or enum defined here: `other` is
    /// the name the type parser kept (`Other { name }`).
    pub fn user_type<'s>(&'s self, other: &str) -> Option<UserType<'s>> {
        let key = other.rsplit('.').next().unwrap_or(other).trim_matches('"');
        if let Some((k, d)) = self.domains.get_key_value(key) {
            return Some(UserType::Domain(k, d));
        }
        self.enums
            .get_key_value(key)
            .map(|(k, v)| UserType::Enum(k, v))
    }
}

pub enum UserType<'a> {
    Domain(&'a str, &'a Domain),
    Enum(&'a str, &'a [String]),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_names_resolve_with_or_without_schema() {
        let mut d = Definitions::default();
        d.sequences.insert(
            TableName::new(Some("clinic"), "invoice_no_seq"),
            Sequence::default(),
        );
        let n = Definitions::sequence_name("invoice_no_seq");
        assert!(d.sequence(&n).is_some());
        let n = Definitions::sequence_name("clinic.\"Other\"");
        assert_eq!(n, TableName::new(Some("clinic"), "Other"));
        assert!(d.sequence(&n).is_none());
    }
}
