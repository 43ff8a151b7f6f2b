//! Values of MySQL/MariaDB columns decoded straight into Arrow builders: from binlog
//! row images (TABLE_MAP types and metadata + the schema history) and from snapshot
//! rows, into the same Arrow types, so both paths give identical batches.
//!
//! Arrow types are the lossless ones for each MySQL type (the sink maps them on):
//!
//! | MySQL | Arrow |
//! |---|---|
//! | TINYINT..BIGINT [UNSIGNED] (TINYINT(1) included) | Int8..Int64 / UInt8..UInt64 (MEDIUMINT: Int32/UInt32) |
//! | DECIMAL(p,s) | Decimal128(p,s), Decimal256 above 38 digits |
//! | FLOAT / DOUBLE | Float32 / Float64 |
//! | CHAR, VARCHAR, TEXT, ENUM, SET, JSON | Utf8 (decoded from the column's charset) |
//! | BINARY, VARBINARY, BLOB, GEOMETRY | Binary |
//! | DATE | Date32 |
//! | TIME (may exceed 24 h or be negative) | Duration(µs) |
//! | DATETIME (wall clock) | Timestamp(µs) |
//! | TIMESTAMP (an instant) | Timestamp(µs, "+00:00") |
//! | YEAR | UInt16 |
//! | BIT(n) | UInt64 |
//!
//! Zero dates (`0000-00-00`, a zero month or day) become NULL, or an error with
//! `zero-dates: fail`.

mod image;
mod text;

pub use image::{decode_binlog_value, decode_row, BinCol, Cur};
pub(crate) use text::append_decimal_text;
pub use text::{append_snapshot_value, typed_text_value};

use super::DecodeError;
use arrow_array::builder::*;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_buffer::i256;
use arrow_schema::{DataType as A, Field, Schema, SchemaRef, TimeUnit};
use ddl_core::{DataType, Table, TimeZone};
use std::sync::Arc;

/// How a column's values are interpreted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Int {
        bytes: u8,
        unsigned: bool,
    },
    Decimal {
        precision: u8,
        scale: i8,
    },
    Float,
    Double,
    Text {
        charset: Charset,
    },
    Binary,
    /// BINARY(n): the binlog drops trailing zero bytes; they are put back.
    FixedBinary(usize),
    /// MariaDB's UUID (10.7+): its 16 bytes in the text's order (as BINARY(16) in
    /// the binlog, trailing zero bytes dropped), its text in a snapshot.
    Uuid,
    /// MariaDB's INET6 (16 bytes) and INET4 (4 bytes): the address's bytes in the
    /// binlog (as BINARY(n), trailing zero bytes dropped), its text in a snapshot;
    /// carried as its text.
    Inet(usize),
    Enum(Vec<String>),
    Set(Vec<String>),
    Date,
    Time,
    DateTime,
    Timestamp,
    Year,
    Bit,
}

/// Character sets the decoder converts to UTF-8.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charset {
    Utf8,
    /// MySQL's latin1 is Windows-1252.
    Other(&'static encoding_rs::Encoding),
    /// MariaDB's `utf32`: big-endian code points, 4 bytes each (no decoder crate
    /// has it).
    Utf32,
    /// A single-byte character set: each byte's character, as the source server
    /// converts it ([`learn_charset`]).
    Bytes(&'static [char; 256]),
}

/// Single-byte character sets learned from the source server, by name.
static LEARNED: std::sync::RwLock<Vec<(String, &'static [char; 256])>> =
    std::sync::RwLock::new(Vec::new());

/// Records a single-byte character set's characters, byte by byte (as the source
/// server converts each byte to UTF-8), so [`Charset::from_mysql`] reads it.
pub fn learn_charset(name: &str, chars: [char; 256]) {
    let mut l = LEARNED.write().unwrap_or_else(|e| e.into_inner());
    let name = name.to_ascii_lowercase();
    if !l.iter().any(|(n, _)| *n == name) {
        l.push((name, Box::leak(Box::new(chars))));
    }
}

impl Charset {
    pub fn from_mysql(name: Option<&str>) -> Result<Charset, DecodeError> {
        let n = name.unwrap_or("utf8mb4").to_ascii_lowercase();
        // A single-byte set as the source server converts it (its tables differ from
        // the WHATWG ones in a few bytes: hebrew 0xAF, koi8u 0x95, greek 0xA1, bytes
        // it has no character for, ...).
        if let Some(t) = LEARNED
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|(l, _)| *l == n)
            .map(|(_, t)| *t)
        {
            return Ok(Charset::Bytes(t));
        }
        let label = match n.as_str() {
            "utf8" | "utf8mb3" | "utf8mb4" | "ascii" => return Ok(Charset::Utf8),
            "latin1" => "windows-1252",
            "latin2" => "iso-8859-2",
            "cp1250" => "windows-1250",
            "cp1251" => "windows-1251",
            "cp1256" => "windows-1256",
            "cp1257" => "windows-1257",
            "greek" => "iso-8859-7",
            "hebrew" => "iso-8859-8",
            "latin5" => "windows-1254",
            "latin7" => "iso-8859-13",
            "koi8r" => "koi8-r",
            "koi8u" => "koi8-u",
            "gbk" | "gb2312" => "gbk",
            "gb18030" => "gb18030",
            "big5" => "big5",
            "sjis" | "cp932" => "shift_jis",
            "ujis" | "eucjpms" => "euc-jp",
            "euckr" => "euc-kr",
            // (ucs2: big-endian, the Basic Multilingual Plane only; UTF-16 of it.)
            "utf16" | "ucs2" => "utf-16be",
            "utf16le" => "utf-16le",
            "utf32" => return Ok(Charset::Utf32),
            "cp866" => "ibm866",
            "macroman" => "macintosh",
            "tis620" => "windows-874",
            other => return Err(format!("character set {other} is not supported").into()),
        };
        Ok(encoding_rs::Encoding::for_label(label.as_bytes())
            .map(Charset::Other)
            .ok_or_else(|| format!("character set {n} is not supported"))?)
    }

    /// Text of this character set as UTF-8, and whether every byte was of it (a
    /// byte that is not becomes U+FFFD).
    pub fn decode(self, bytes: &[u8]) -> (std::borrow::Cow<'_, str>, bool) {
        match self {
            Charset::Utf8 => match std::str::from_utf8(bytes) {
                Ok(s) => (s.into(), true),
                Err(_) => (String::from_utf8_lossy(bytes), false),
            },
            Charset::Other(enc) => {
                let (s, _, bad) = enc.decode(bytes);
                (s, !bad)
            }
            Charset::Bytes(t) => (bytes.iter().map(|&b| t[usize::from(b)]).collect(), true),
            Charset::Utf32 => {
                let mut ok = bytes.len().is_multiple_of(4);
                let s = bytes
                    .chunks(4)
                    .map(|c| {
                        let cp = match c {
                            [a, b, c, d] => u32::from_be_bytes([*a, *b, *c, *d]),
                            _ => u32::MAX,
                        };
                        char::from_u32(cp).unwrap_or_else(|| {
                            ok = false;
                            char::REPLACEMENT_CHARACTER
                        })
                    })
                    .collect::<String>();
                (s.into(), ok)
            }
        }
    }
}

/// One column of a captured table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceColumn {
    pub name: String,
    pub kind: Kind,
    pub nullable: bool,
}

/// A captured table as the decoder sees it: columns in binlog order and the Arrow
/// schema of its batches.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceTable {
    pub db: String,
    pub name: String,
    pub columns: Vec<SourceColumn>,
    /// Key columns (primary key, or the job's key override), as indexes.
    pub key: Vec<usize>,
    pub arrow: SchemaRef,
    /// The IR definition the decoder was built from.
    pub ir: Arc<Table>,
}

impl SourceTable {
    /// From the IR table (the schema history's view).
    pub fn from_ir(
        db: &str,
        t: &Table,
        key_override: Option<&[String]>,
    ) -> Result<Self, DecodeError> {
        // A charset named, else the one a collation names (`cp1251_bin`: cp1251).
        fn of_collation(c: Option<&str>) -> Option<&str> {
            c.and_then(|c| c.split('_').next())
        }
        let table_charset = t
            .options
            .get("charset")
            .map(|v| v.sql.as_str())
            .or_else(|| {
                of_collation(
                    t.options
                        .get("collate")
                        .or(t.options.get("collation"))
                        .map(|v| v.sql.as_str()),
                )
            });
        let mut columns = Vec::new();
        for c in &t.columns {
            let err = |e: DecodeError| format!("{db}.{} column {}: {e}", t.name.name, c.name);
            let kind = match &c.data_type {
                DataType::Boolean => Kind::Int {
                    bytes: 1,
                    unsigned: false,
                },
                DataType::Int { bytes, unsigned } => Kind::Int {
                    bytes: *bytes,
                    unsigned: *unsigned,
                },
                DataType::Decimal {
                    precision, scale, ..
                } => Kind::Decimal {
                    precision: precision.unwrap_or(10) as u8,
                    scale: scale.unwrap_or(0) as i8,
                },
                DataType::Float { bytes: 4, .. } => Kind::Float,
                DataType::Float { .. } => Kind::Double,
                DataType::Char { .. } | DataType::Varchar { .. } | DataType::Text { .. } => {
                    Kind::Text {
                        charset: Charset::from_mysql(
                            c.charset
                                .as_deref()
                                .or_else(|| of_collation(c.collation.as_deref()))
                                .or(table_charset),
                        )
                        .map_err(err)?,
                    }
                }
                DataType::Json { .. } => Kind::Text {
                    charset: Charset::Utf8,
                },
                DataType::Enum { values } => Kind::Enum(values.clone()),
                DataType::Set { values } => Kind::Set(values.clone()),
                DataType::Binary { length } => Kind::FixedBinary(*length as usize),
                DataType::Uuid => Kind::Uuid,
                DataType::Other { dialect, name } if dialect == "mysql" && name == "inet6" => {
                    Kind::Inet(16)
                }
                DataType::Other { dialect, name } if dialect == "mysql" && name == "inet4" => {
                    Kind::Inet(4)
                }
                DataType::Varbinary { .. } | DataType::Blob { .. } | DataType::Spatial { .. } => {
                    Kind::Binary
                }
                DataType::Date => Kind::Date,
                DataType::Time { .. } => Kind::Time,
                DataType::Timestamp {
                    tz: TimeZone::None, ..
                } => Kind::DateTime,
                DataType::Timestamp { .. } => Kind::Timestamp,
                DataType::Year => Kind::Year,
                DataType::Bit { .. } => Kind::Bit,
                other => {
                    return Err(
                        err(format!("type {} is not supported", other.family()).into()).into(),
                    )
                }
            };
            columns.push(SourceColumn {
                name: c.name.clone(),
                kind,
                nullable: c.nullable,
            });
        }
        let key_names: Vec<String> = match key_override {
            Some(k) => k.to_vec(),
            None => t
                .primary_key
                .as_ref()
                .map(|pk| pk.columns.clone())
                .unwrap_or_default(),
        };
        let mut key = Vec::new();
        for k in &key_names {
            let i = columns
                .iter()
                .position(|c| c.name.eq_ignore_ascii_case(k))
                .ok_or_else(|| format!("{db}.{}: key column {k} does not exist", t.name.name))?;
            if key_override.is_some() && columns[i].nullable {
                return Err(nullable_key(db, &t.name.name, k).into());
            }
            key.push(i);
        }
        let arrow = Arc::new(Schema::new(
            columns
                .iter()
                .map(|c| {
                    let f = Field::new(&c.name, arrow_type(&c.kind), true);
                    if c.kind == Kind::Bit {
                        f.with_metadata([("mysql.type".to_owned(), "bit".to_owned())].into())
                    } else {
                        f
                    }
                })
                .collect::<Vec<_>>(),
        ));
        Ok(SourceTable {
            db: db.to_owned(),
            name: t.name.name.clone(),
            columns,
            key,
            arrow,
            ir: Arc::new(t.clone()),
        })
    }
}

/// The refusal of a key override naming a nullable column: rows whose key is NULL
/// cannot be told apart (an upsert of one would replace the others, a delete of one
/// every one), and a snapshot's chunk cursor at NULL matches no row after it.
pub fn nullable_key(container: &str, table: &str, column: &str) -> String {
    format!(
        "{container}.{table}: key column {column} is nullable: a key override must name NOT NULL columns (rows with a NULL key cannot be told apart); make it NOT NULL or name other columns in key-overrides"
    )
}

pub fn arrow_type(k: &Kind) -> A {
    match k {
        Kind::Int { bytes, unsigned } => match (bytes, unsigned) {
            (1, false) => A::Int8,
            (1, true) => A::UInt8,
            (2, false) => A::Int16,
            (2, true) => A::UInt16,
            (3 | 4, false) => A::Int32,
            (3 | 4, true) => A::UInt32,
            (_, false) => A::Int64,
            (_, true) => A::UInt64,
        },
        Kind::Decimal { precision, scale } if *precision <= 38 => A::Decimal128(*precision, *scale),
        Kind::Decimal { precision, scale } => A::Decimal256(*precision, *scale),
        Kind::Float => A::Float32,
        Kind::Double => A::Float64,
        Kind::Text { .. } | Kind::Enum(_) | Kind::Set(_) | Kind::Inet(_) => A::Utf8,
        Kind::Binary | Kind::FixedBinary(_) | Kind::Uuid => A::Binary,
        Kind::Date => A::Date32,
        Kind::Time => A::Duration(TimeUnit::Microsecond),
        Kind::DateTime => A::Timestamp(TimeUnit::Microsecond, None),
        Kind::Timestamp => A::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
        Kind::Year => A::UInt16,
        Kind::Bit => A::UInt64,
    }
}

/// A typed Arrow builder per column (the enum is per column, not per value).
pub enum ColBuilder {
    I8(Int8Builder),
    I16(Int16Builder),
    I32(Int32Builder),
    I64(Int64Builder),
    U8(UInt8Builder),
    U16(UInt16Builder),
    U32(UInt32Builder),
    U64(UInt64Builder),
    F32(Float32Builder),
    F64(Float64Builder),
    D128(Decimal128Builder, u8, i8),
    D256(Decimal256Builder, u8, i8),
    Str(StringBuilder),
    Bin(BinaryBuilder),
    Date(Date32Builder),
    Dur(DurationMicrosecondBuilder),
    Ts(TimestampMicrosecondBuilder, bool),
}

/// Values a column builder holds room for before it grows (doubling).
const FIRST_CAPACITY: usize = 8;

impl ColBuilder {
    /// A builder that starts small and grows as rows come (Arrow's `new()` reserves
    /// 1,024 values: a change stream that switches between tables and operations
    /// makes batches of a few rows each, and each held its 1,024 slots, which the
    /// budget counts: about 12 KiB a row for single-row batches, so a checkpoint
    /// interval of small transactions went over the memory budget and committed
    /// inside a source transaction).
    pub fn new(k: &Kind) -> ColBuilder {
        const N: usize = FIRST_CAPACITY;
        match arrow_type(k) {
            A::Int8 => ColBuilder::I8(Int8Builder::with_capacity(N)),
            A::Int16 => ColBuilder::I16(Int16Builder::with_capacity(N)),
            A::Int32 => ColBuilder::I32(Int32Builder::with_capacity(N)),
            A::Int64 => ColBuilder::I64(Int64Builder::with_capacity(N)),
            A::UInt8 => ColBuilder::U8(UInt8Builder::with_capacity(N)),
            A::UInt16 => ColBuilder::U16(UInt16Builder::with_capacity(N)),
            A::UInt32 => ColBuilder::U32(UInt32Builder::with_capacity(N)),
            A::UInt64 => ColBuilder::U64(UInt64Builder::with_capacity(N)),
            A::Float32 => ColBuilder::F32(Float32Builder::with_capacity(N)),
            A::Float64 => ColBuilder::F64(Float64Builder::with_capacity(N)),
            A::Decimal128(p, s) => ColBuilder::D128(Decimal128Builder::with_capacity(N), p, s),
            A::Decimal256(p, s) => ColBuilder::D256(Decimal256Builder::with_capacity(N), p, s),
            A::Utf8 => ColBuilder::Str(StringBuilder::with_capacity(N, N * 16)),
            A::Binary => ColBuilder::Bin(BinaryBuilder::with_capacity(N, N * 16)),
            A::Date32 => ColBuilder::Date(Date32Builder::with_capacity(N)),
            A::Duration(_) => ColBuilder::Dur(DurationMicrosecondBuilder::with_capacity(N)),
            A::Timestamp(_, tz) => {
                ColBuilder::Ts(TimestampMicrosecondBuilder::with_capacity(N), tz.is_some())
            }
            other => unreachable!("no builder for {other}"),
        }
    }

    pub fn append_null(&mut self) {
        match self {
            ColBuilder::I8(b) => b.append_null(),
            ColBuilder::I16(b) => b.append_null(),
            ColBuilder::I32(b) => b.append_null(),
            ColBuilder::I64(b) => b.append_null(),
            ColBuilder::U8(b) => b.append_null(),
            ColBuilder::U16(b) => b.append_null(),
            ColBuilder::U32(b) => b.append_null(),
            ColBuilder::U64(b) => b.append_null(),
            ColBuilder::F32(b) => b.append_null(),
            ColBuilder::F64(b) => b.append_null(),
            ColBuilder::D128(b, ..) => b.append_null(),
            ColBuilder::D256(b, ..) => b.append_null(),
            ColBuilder::Str(b) => b.append_null(),
            ColBuilder::Bin(b) => b.append_null(),
            ColBuilder::Date(b) => b.append_null(),
            ColBuilder::Dur(b) => b.append_null(),
            ColBuilder::Ts(b, _) => b.append_null(),
        }
    }

    /// An integer value (signed or unsigned source), stored in the column's width.
    pub(crate) fn append_int(&mut self, v: i128) -> Result<(), DecodeError> {
        let bad = || format!("integer {v} out of range");
        match self {
            ColBuilder::I8(b) => b.append_value(i8::try_from(v).map_err(|_| bad())?),
            ColBuilder::I16(b) => b.append_value(i16::try_from(v).map_err(|_| bad())?),
            ColBuilder::I32(b) => b.append_value(i32::try_from(v).map_err(|_| bad())?),
            ColBuilder::I64(b) => b.append_value(i64::try_from(v).map_err(|_| bad())?),
            ColBuilder::U8(b) => b.append_value(u8::try_from(v).map_err(|_| bad())?),
            ColBuilder::U16(b) => b.append_value(u16::try_from(v).map_err(|_| bad())?),
            ColBuilder::U32(b) => b.append_value(u32::try_from(v).map_err(|_| bad())?),
            ColBuilder::U64(b) => b.append_value(u64::try_from(v).map_err(|_| bad())?),
            _ => return Err("not an integer column".into()),
        }
        Ok(())
    }

    pub fn finish(&mut self) -> ArrayRef {
        match self {
            ColBuilder::I8(b) => Arc::new(b.finish()),
            ColBuilder::I16(b) => Arc::new(b.finish()),
            ColBuilder::I32(b) => Arc::new(b.finish()),
            ColBuilder::I64(b) => Arc::new(b.finish()),
            ColBuilder::U8(b) => Arc::new(b.finish()),
            ColBuilder::U16(b) => Arc::new(b.finish()),
            ColBuilder::U32(b) => Arc::new(b.finish()),
            ColBuilder::U64(b) => Arc::new(b.finish()),
            ColBuilder::F32(b) => Arc::new(b.finish()),
            ColBuilder::F64(b) => Arc::new(b.finish()),
            ColBuilder::D128(b, p, s) => Arc::new(
                b.finish()
                    .with_precision_and_scale(*p, *s)
                    .expect("valid decimal"),
            ),
            ColBuilder::D256(b, p, s) => Arc::new(
                b.finish()
                    .with_precision_and_scale(*p, *s)
                    .expect("valid decimal"),
            ),
            ColBuilder::Str(b) => Arc::new(b.finish()),
            ColBuilder::Bin(b) => Arc::new(b.finish()),
            ColBuilder::Date(b) => Arc::new(b.finish()),
            ColBuilder::Dur(b) => Arc::new(b.finish()),
            ColBuilder::Ts(b, tz) => {
                let a = b.finish();
                if *tz {
                    Arc::new(a.with_timezone("+00:00"))
                } else {
                    Arc::new(a)
                }
            }
        }
    }
}

/// Builders for a whole table.
pub struct RowsBuilder {
    pub table: Arc<SourceTable>,
    pub cols: Vec<ColBuilder>,
    pub rows: usize,
    /// Approximate bytes of decoded values (for cutting batches by size).
    pub bytes: usize,
}

impl RowsBuilder {
    pub fn new(table: Arc<SourceTable>) -> Self {
        let cols = table
            .columns
            .iter()
            .map(|c| ColBuilder::new(&c.kind))
            .collect();
        RowsBuilder {
            table,
            cols,
            rows: 0,
            bytes: 0,
        }
    }

    pub fn finish(&mut self) -> RecordBatch {
        let arrays: Vec<ArrayRef> = self.cols.iter_mut().map(ColBuilder::finish).collect();
        self.rows = 0;
        self.bytes = 0;
        RecordBatch::try_new(self.table.arrow.clone(), arrays).expect("columns match the schema")
    }
}

// ---------------------------------------------------------------------------
// Calendar helpers

pub use crate::calendar::days_from_civil;

fn valid_date(y: u32, m: u32, d: u32) -> bool {
    let _ = y;
    (1..=12).contains(&m) && (1..=31).contains(&d)
}

fn datetime_micros(y: u32, mo: u32, d: u32, h: u32, mi: u32, s: u32, us: u32) -> i64 {
    let days = days_from_civil(y as i64, mo, d);
    ((days * 86_400 + h as i64 * 3600 + mi as i64 * 60 + s as i64) * 1_000_000) + us as i64
}

/// Context for error messages and policies.
pub struct Ctx<'a> {
    pub zero_dates_fail: bool,
    pub column: &'a str,
}

impl Ctx<'_> {
    fn zero(&self, b: &mut ColBuilder, what: &str) -> Result<(), DecodeError> {
        if self.zero_dates_fail {
            return Err(format!(
                "column {}: zero date {what} (zero-dates: fail)",
                self.column
            )
            .into());
        }
        // Said once per column name a process reads such a value in.
        static SAID: std::sync::Mutex<std::collections::BTreeSet<String>> =
            std::sync::Mutex::new(std::collections::BTreeSet::new());
        let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
        if said.insert(self.column.to_owned()) {
            tracing::warn!(
                "column {}: a zero date ({what}), which no target other than MySQL can hold, is delivered as NULL (source.zero-dates: null; `fail` stops at it instead); said once per column",
                self.column
            );
        }
        b.append_null();
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Binlog row images

pub mod t {
    pub const DECIMAL: u8 = 0;
    pub const TINY: u8 = 1;
    pub const SHORT: u8 = 2;
    pub const LONG: u8 = 3;
    pub const FLOAT: u8 = 4;
    pub const DOUBLE: u8 = 5;
    pub const NULL: u8 = 6;
    pub const TIMESTAMP: u8 = 7;
    pub const LONGLONG: u8 = 8;
    pub const INT24: u8 = 9;
    pub const DATE: u8 = 10;
    pub const TIME: u8 = 11;
    pub const DATETIME: u8 = 12;
    pub const YEAR: u8 = 13;
    pub const NEWDATE: u8 = 14;
    pub const VARCHAR: u8 = 15;
    pub const BIT: u8 = 16;
    pub const TIMESTAMP2: u8 = 17;
    pub const DATETIME2: u8 = 18;
    pub const TIME2: u8 = 19;
    pub const JSON: u8 = 245;
    pub const NEWDECIMAL: u8 = 246;
    pub const ENUM: u8 = 247;
    pub const SET: u8 = 248;
    pub const TINY_BLOB: u8 = 249;
    pub const MEDIUM_BLOB: u8 = 250;
    pub const LONG_BLOB: u8 = 251;
    pub const BLOB: u8 = 252;
    pub const VAR_STRING: u8 = 253;
    pub const STRING: u8 = 254;
    pub const GEOMETRY: u8 = 255;
}

// ---------------------------------------------------------------------------
// Snapshot rows (binary protocol values)
