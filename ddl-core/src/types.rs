//! Neutral column types: what the source meant, not how one database spells it.

use serde::{Deserialize, Serialize};

/// Whether a character length counts characters or bytes (Oracle's `BYTE`/`CHAR`
/// length semantics; MySQL and PostgreSQL always count characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum LengthUnit {
    #[default]
    Chars,
    Bytes,
}

/// Time-zone semantics of a time or timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum TimeZone {
    /// A wall-clock value with no zone (MySQL DATETIME, PostgreSQL timestamp, Oracle DATE
    /// and TIMESTAMP).
    #[default]
    None,
    /// An instant, normalised to UTC on storage and shown in the session's zone (MySQL
    /// TIMESTAMP, PostgreSQL timestamptz, Oracle TIMESTAMP WITH LOCAL TIME ZONE).
    Instant,
    /// A value that keeps its own offset (Oracle TIMESTAMP WITH TIME ZONE, PostgreSQL
    /// timetz).
    WithOffset,
}

/// Which fields an interval carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntervalFields {
    /// Years and months only (Oracle INTERVAL YEAR TO MONTH).
    YearToMonth,
    /// Days to (fractional) seconds (Oracle INTERVAL DAY TO SECOND).
    DayToSecond,
    /// Any mix of months, days and time (PostgreSQL interval).
    All,
}

/// A column type in the IR.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DataType {
    Boolean,
    /// Binary integer of `bytes` (1, 2, 3, 4 or 8) bytes.
    Int {
        bytes: u8,
        unsigned: bool,
    },
    /// Exact decimal. `precision: None` is an unconstrained number (PostgreSQL numeric,
    /// Oracle NUMBER); `scale: None` with a precision means scale 0 was not written.
    Decimal {
        precision: Option<u32>,
        scale: Option<i32>,
        unsigned: bool,
    },
    /// IEEE float: 4 or 8 bytes.
    Float {
        bytes: u8,
        unsigned: bool,
    },
    /// PostgreSQL money: a fixed 2-decimal currency amount.
    Money,
    /// Fixed-length character string, padded.
    Char {
        length: u32,
        unit: LengthUnit,
        national: bool,
    },
    /// Variable-length character string with an optional limit.
    Varchar {
        length: Option<u32>,
        unit: LengthUnit,
        national: bool,
    },
    /// Character large object; `max_bytes: None` is unbounded (PostgreSQL text).
    Text {
        max_bytes: Option<u64>,
        national: bool,
    },
    /// Fixed-length byte string.
    Binary {
        length: u32,
    },
    /// Variable-length byte string with a limit.
    Varbinary {
        length: u32,
    },
    /// Binary large object; `max_bytes: None` is unbounded.
    Blob {
        max_bytes: Option<u64>,
    },
    Enum {
        values: Vec<String>,
    },
    Set {
        values: Vec<String>,
    },
    Json {
        binary: bool,
    },
    Uuid,
    Date,
    /// Time of day; `precision` is the number of fractional-second digits, always
    /// explicit (parsers fill in their dialect's default).
    Time {
        precision: u8,
        tz: TimeZone,
    },
    /// Date and time; `precision` as for [`DataType::Time`].
    Timestamp {
        precision: u8,
        tz: TimeZone,
    },
    /// MySQL YEAR: a year 1901..2155.
    Year,
    /// Bit string.
    Bit {
        length: Option<u32>,
        varying: bool,
    },
    Interval {
        fields: IntervalFields,
        /// Leading-field precision (Oracle `DAY(3)`), if written.
        leading: Option<u8>,
        /// Fractional-seconds precision, if written.
        precision: Option<u8>,
    },
    Array {
        element: Box<DataType>,
    },
    /// Spatial types (MySQL POINT, GEOMETRY, ..., PostgreSQL geometric types).
    Spatial {
        kind: String,
    },
    /// A type with no neutral meaning, kept as the source spelled it (PostgreSQL inet,
    /// xml, tsvector, Oracle ROWID, ...). Emitters to the same dialect print it as is;
    /// others map it to text and report the loss.
    Other {
        dialect: String,
        name: String,
    },
}

impl DataType {
    pub const fn int(bytes: u8) -> Self {
        DataType::Int {
            bytes,
            unsigned: false,
        }
    }

    /// A short family name used to compare schemas across databases.
    pub fn family(&self) -> &'static str {
        match self {
            DataType::Boolean => "boolean",
            DataType::Int { .. } | DataType::Year => "integer",
            DataType::Decimal { .. } | DataType::Money => "decimal",
            DataType::Float { .. } => "float",
            DataType::Char { .. }
            | DataType::Varchar { .. }
            | DataType::Text { .. }
            | DataType::Enum { .. }
            | DataType::Set { .. } => "string",
            DataType::Binary { .. } | DataType::Varbinary { .. } | DataType::Blob { .. } => {
                "binary"
            }
            DataType::Json { .. } => "json",
            DataType::Uuid => "uuid",
            DataType::Date => "date",
            DataType::Time { .. } => "time",
            DataType::Timestamp { .. } => "timestamp",
            DataType::Bit { .. } => "bit",
            DataType::Interval { .. } => "interval",
            DataType::Array { .. } => "array",
            DataType::Spatial { .. } => "spatial",
            DataType::Other { .. } => "other",
        }
    }

    /// Largest value of an integer type as decimal digits (for mapping to NUMBER(p)).
    pub fn int_digits(bytes: u8, unsigned: bool) -> u32 {
        match (bytes, unsigned) {
            (1, _) => 3,
            (2, _) => 5,
            (3, false) => 7,
            (3, true) => 8,
            (4, _) => 10,
            (_, false) => 19,
            (_, true) => 20,
        }
    }
}
