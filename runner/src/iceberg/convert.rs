//! Conversions between lakeshift's planned Iceberg tables (`dialects::iceberg`) and
//! the iceberg crate's schema and metadata types, both ways.

use super::{Error, Result};
use ddl_core::{Column, DataType, PrimaryKey, Table, TableName, TimeZone};
use dialects::iceberg::{IceField, IceTable, IceType};
use iceberg::spec::{Literal, NestedField, PrimitiveType, Schema, TableMetadata, Transform, Type};
use std::collections::BTreeMap;

pub fn primitive(t: &IceType) -> PrimitiveType {
    match t {
        IceType::Boolean => PrimitiveType::Boolean,
        IceType::Int => PrimitiveType::Int,
        IceType::Long => PrimitiveType::Long,
        IceType::Float => PrimitiveType::Float,
        IceType::Double => PrimitiveType::Double,
        IceType::Decimal { precision, scale } => PrimitiveType::Decimal {
            precision: *precision,
            scale: *scale,
        },
        IceType::Date => PrimitiveType::Date,
        IceType::Time => PrimitiveType::Time,
        IceType::Timestamp => PrimitiveType::Timestamp,
        IceType::Timestamptz => PrimitiveType::Timestamptz,
        IceType::String => PrimitiveType::String,
        IceType::Uuid => PrimitiveType::Uuid,
        IceType::Binary => PrimitiveType::Binary,
        IceType::Fixed(n) => PrimitiveType::Fixed(*n),
    }
}

pub fn ice_type(t: &Type) -> Result<IceType> {
    let Type::Primitive(p) = t else {
        return Err(Error::Invalid(format!(
            "nested type {t} is not supported by lakeshift"
        )));
    };
    Ok(match p {
        PrimitiveType::Boolean => IceType::Boolean,
        PrimitiveType::Int => IceType::Int,
        PrimitiveType::Long => IceType::Long,
        PrimitiveType::Float => IceType::Float,
        PrimitiveType::Double => IceType::Double,
        PrimitiveType::Decimal { precision, scale } => IceType::Decimal {
            precision: *precision,
            scale: *scale,
        },
        PrimitiveType::Date => IceType::Date,
        PrimitiveType::Time => IceType::Time,
        PrimitiveType::Timestamp => IceType::Timestamp,
        PrimitiveType::Timestamptz => IceType::Timestamptz,
        PrimitiveType::String => IceType::String,
        PrimitiveType::Uuid => IceType::Uuid,
        PrimitiveType::Binary => IceType::Binary,
        PrimitiveType::Fixed(n) => IceType::Fixed(*n),
        other => {
            return Err(Error::Invalid(format!(
                "Iceberg type {other} is not supported by lakeshift"
            )))
        }
    })
}

fn literal(v: &serde_json::Value, ty: &Type) -> Result<Literal> {
    Literal::try_from_json(v.clone(), ty)?
        .ok_or_else(|| Error::Invalid(format!("default {v} does not fit {ty}")))
}

/// Whether a table's current snapshot may hold rows (its summary's `total-records`,
/// when it says; a table without a snapshot holds none).
pub fn holds_rows(m: &TableMetadata) -> bool {
    m.current_snapshot()
        .map(|snap| {
            snap.summary()
                .additional_properties
                .get("total-records")
                .and_then(|v| v.parse::<u64>().ok())
                .is_none_or(|n| n > 0)
        })
        .unwrap_or(false)
}

/// The iceberg schema of a planned table, with schema id `schema_id`.
pub fn schema(t: &IceTable, schema_id: i32) -> Result<Schema> {
    let mut fields = Vec::with_capacity(t.fields.len());
    for f in &t.fields {
        let ty = Type::Primitive(primitive(&f.ty));
        let mut nf = NestedField::new(f.id, f.name.clone(), ty.clone(), f.required);
        if let Some(d) = &f.doc {
            nf = nf.with_doc(d.clone());
        }
        if let Some(v) = &f.initial_default {
            nf = nf.with_initial_default(literal(v, &ty)?);
        }
        if let Some(v) = &f.write_default {
            nf = nf.with_write_default(literal(v, &ty)?);
        }
        fields.push(nf.into());
    }
    Ok(Schema::builder()
        .with_schema_id(schema_id)
        .with_fields(fields)
        .with_identifier_field_ids(t.identifier_field_ids.iter().copied())
        .build()?)
}

/// The planned view of an existing table.
pub fn ice_table(ns: &str, name: &str, m: &TableMetadata) -> Result<IceTable> {
    let s = m.current_schema();
    let mut fields = Vec::new();
    for f in s.as_struct().fields() {
        let json = |l: &Option<Literal>| -> Result<Option<serde_json::Value>> {
            Ok(match l {
                Some(l) => Some(l.clone().try_into_json(&f.field_type)?),
                None => None,
            })
        };
        fields.push(IceField {
            id: f.id,
            name: f.name.clone(),
            required: f.required,
            ty: ice_type(&f.field_type)?,
            doc: f.doc.clone(),
            initial_default: json(&f.initial_default)?,
            write_default: json(&f.write_default)?,
        });
    }
    let mut ids: Vec<i32> = s.identifier_field_ids().collect();
    // Keep the key's column order.
    ids.sort_by_key(|id| fields.iter().position(|f| f.id == *id));
    let has_rows = holds_rows(m);
    Ok(IceTable {
        namespace: ns.to_owned(),
        name: name.to_owned(),
        fields,
        identifier_field_ids: ids,
        last_column_id: m.last_column_id(),
        properties: m
            .properties()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<BTreeMap<_, _>>(),
        format_version: match m.format_version() {
            iceberg::spec::FormatVersion::V1 => 1,
            iceberg::spec::FormatVersion::V2 => 2,
            iceberg::spec::FormatVersion::V3 => 3,
        },
        has_rows,
    })
}

/// The IR table an existing Iceberg table stands for, so DDL can be applied to tables
/// created by an earlier run. Lengths are unknown: strings are unbounded text.
pub fn ir_table(name: TableName, t: &IceTable) -> Table {
    let mut table = Table::new(name);
    for f in &t.fields {
        let dt = match &f.ty {
            IceType::Boolean => DataType::Boolean,
            IceType::Int => DataType::int(4),
            IceType::Long => DataType::int(8),
            IceType::Float => DataType::Float {
                bytes: 4,
                unsigned: false,
            },
            IceType::Double => DataType::Float {
                bytes: 8,
                unsigned: false,
            },
            IceType::Decimal { precision, scale } => DataType::Decimal {
                precision: Some(*precision),
                scale: Some(*scale as i32),
                unsigned: false,
            },
            IceType::Date => DataType::Date,
            IceType::Time => DataType::Time {
                precision: 6,
                tz: TimeZone::None,
            },
            IceType::Timestamp => DataType::Timestamp {
                precision: 6,
                tz: TimeZone::None,
            },
            IceType::Timestamptz => DataType::Timestamp {
                precision: 6,
                tz: TimeZone::Instant,
            },
            IceType::String => DataType::Text {
                max_bytes: None,
                national: false,
            },
            IceType::Uuid => DataType::Uuid,
            IceType::Binary => DataType::Blob { max_bytes: None },
            IceType::Fixed(n) => DataType::Binary { length: *n as u32 },
        };
        let mut c = Column::new(&f.name, dt);
        c.nullable = !f.required;
        c.comment = f.doc.clone();
        table.columns.push(c);
    }
    if !t.identifier_field_ids.is_empty() {
        table.primary_key = Some(PrimaryKey {
            name: None,
            columns: t
                .identifier_field_ids
                .iter()
                .filter_map(|id| t.fields.iter().find(|f| f.id == *id))
                .map(|f| f.name.clone())
                .collect(),
            prefixes: Default::default(),
        });
    }
    table.comment = t.properties.get("comment").cloned();
    table
}

/// Parse a planned partition expression, `bucket(N, column)`.
pub fn partition_transform(expr: &str) -> Option<(Transform, String)> {
    let inner = expr.strip_prefix("bucket(")?.strip_suffix(')')?;
    let (n, col) = inner.split_once(',')?;
    Some((
        Transform::Bucket(n.trim().parse().ok()?),
        col.trim().to_owned(),
    ))
}
