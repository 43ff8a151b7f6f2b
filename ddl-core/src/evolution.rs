//! What happens to a schema change a target cannot take as it is.
//!
//! The names follow Flink CDC's `schema.change.behavior`. In lakeshift a policy only
//! decides the fate of a change the target cannot represent (an Iceberg type
//! narrowing, a change of type family, an optional column becoming required while
//! the table holds rows); changes the target can represent are always applied.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SchemaChangeBehavior {
    /// Stop with an error naming the table, the column, the old and the new type and
    /// the policies that would accept the change. Nothing of the statement is applied.
    #[default]
    Exception,
    /// Apply the change as the source means it, even when that costs readability of
    /// existing data: a type Iceberg cannot convert in place replaces the column (same
    /// name and position, a new field id; older values stay in older snapshots); an
    /// optional column becomes required although rows exist.
    Evolve,
    /// Like `evolve` where that keeps existing data readable; otherwise like `lenient`.
    TryEvolve,
    /// Keep every existing value readable: a narrowed type keeps the wider one; a
    /// change of type family keeps the old column under a new name (`<name>_old`,
    /// numbered if taken) and adds the new type under the column's name; a column that
    /// would become required stays optional.
    Lenient,
    /// Leave the part the target cannot take undone (with a warning) and apply the
    /// rest of the statement.
    Ignore,
}

impl SchemaChangeBehavior {
    pub const ALL: [SchemaChangeBehavior; 5] = [
        SchemaChangeBehavior::Exception,
        SchemaChangeBehavior::Evolve,
        SchemaChangeBehavior::TryEvolve,
        SchemaChangeBehavior::Lenient,
        SchemaChangeBehavior::Ignore,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SchemaChangeBehavior::Exception => "exception",
            SchemaChangeBehavior::Evolve => "evolve",
            SchemaChangeBehavior::TryEvolve => "try-evolve",
            SchemaChangeBehavior::Lenient => "lenient",
            SchemaChangeBehavior::Ignore => "ignore",
        }
    }
}

impl fmt::Display for SchemaChangeBehavior {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SchemaChangeBehavior {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let norm = s.trim().to_ascii_lowercase().replace('_', "-");
        SchemaChangeBehavior::ALL
            .into_iter()
            .find(|b| b.name() == norm)
            .ok_or_else(|| {
                format!("unknown schema change behavior `{s}`: expected one of exception, evolve, try-evolve, lenient, ignore")
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for b in SchemaChangeBehavior::ALL {
            assert_eq!(b.name().parse::<SchemaChangeBehavior>(), Ok(b));
        }
        assert_eq!(
            "TRY_EVOLVE".parse::<SchemaChangeBehavior>(),
            Ok(SchemaChangeBehavior::TryEvolve)
        );
        assert!("strict".parse::<SchemaChangeBehavior>().is_err());
    }
}
