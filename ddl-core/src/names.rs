//! Name rules of databases: case folding of unquoted names and identifier length limits.

use serde::{Deserialize, Serialize};

/// What a database does to an unquoted identifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fold {
    /// PostgreSQL: unquoted names are lower case.
    Lower,
    /// Oracle (and the SQL standard): unquoted names are upper case.
    Upper,
    /// MySQL: names keep the case they are written in.
    Preserve,
}

impl Fold {
    pub fn apply(self, name: &str) -> String {
        match self {
            Fold::Lower => name.to_lowercase(),
            Fold::Upper => name.to_uppercase(),
            Fold::Preserve => name.to_owned(),
        }
    }
}

/// Map a stored name from a source's case convention to a target's: a name that is in
/// the source's "natural" case (what an unquoted name becomes there) takes the target's
/// natural case; any other name was quoted on purpose and keeps its exact spelling.
/// MySQL names are case-insensitive for columns, so MySQL sources behave as `Lower`
/// natural case for other targets (pgloader's `downcase identifiers` default).
pub fn map_case(name: &str, source: Fold, target: Fold) -> String {
    let natural_in_source = match source {
        Fold::Lower => !name.chars().any(char::is_uppercase),
        Fold::Upper => !name.chars().any(char::is_lowercase),
        Fold::Preserve => true,
    };
    if !natural_in_source {
        return name.to_owned();
    }
    match (source, target) {
        (_, Fold::Preserve) if source == Fold::Upper => name.to_lowercase(),
        (_, Fold::Preserve) => name.to_owned(),
        (_, t) => t.apply(name),
    }
}

/// Shorten `name` to at most `max_bytes` bytes, deterministically: keep a prefix (cut at
/// a character boundary) and append `_` plus 8 hex digits of a stable hash of the whole
/// name, so two long names with the same prefix stay distinct.
pub fn shorten(name: &str, max_bytes: usize) -> String {
    if name.len() <= max_bytes {
        return name.to_owned();
    }
    let hash = fnv1a(name.as_bytes());
    let suffix = format!("_{:08x}", hash as u32);
    let mut keep = max_bytes.saturating_sub(suffix.len());
    while !name.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{}{}", &name[..keep], suffix)
}

/// FNV-1a, 64 bits: stable across runs and platforms (std's hashers are not).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_mapping() {
        assert_eq!(map_case("EMPLOYEES", Fold::Upper, Fold::Lower), "employees");
        assert_eq!(map_case("MixedCase", Fold::Upper, Fold::Lower), "MixedCase");
        assert_eq!(
            map_case("CustomerID", Fold::Preserve, Fold::Lower),
            "customerid"
        );
        assert_eq!(map_case("orders", Fold::Lower, Fold::Upper), "ORDERS");
        assert_eq!(map_case("EMP", Fold::Upper, Fold::Preserve), "emp");
        assert_eq!(map_case("Emp", Fold::Preserve, Fold::Preserve), "Emp");
    }

    #[test]
    fn shorten_is_deterministic_and_bounded() {
        let long = "ä".repeat(40);
        let a = shorten(&long, 63);
        assert!(a.len() <= 63, "{a}");
        assert_eq!(a, shorten(&long, 63));
        assert_ne!(
            shorten(&format!("{long}x"), 63),
            shorten(&format!("{long}y"), 63)
        );
        assert_eq!(shorten("short", 63), "short");
    }
}
