//! Source positions: the MariaDB GTID state (every domain), the binlog file and offset
//! of the transaction in progress, and how many of its changes were delivered.
//!
//! A position names a point between two changes. At a transaction boundary `offset`
//! is where the next transaction starts and `ordinal` is 0; inside a transaction
//! `offset` is where that transaction starts and `ordinal` counts the changes (rows and
//! schema changes) of it already delivered. Resuming re-reads the transaction from its
//! start and skips `ordinal` changes, so a stop anywhere, even inside a huge
//! transaction, resumes exactly.

use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// One MariaDB GTID: domain-server-sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Gtid {
    pub domain: u32,
    pub server: u32,
    pub seq: u64,
}

impl fmt::Display for Gtid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}-{}", self.domain, self.server, self.seq)
    }
}

/// Text that is not a GTID, GTID state or binlog position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadPosition(pub String);

impl FromStr for Gtid {
    type Err = BadPosition;
    fn from_str(s: &str) -> Result<Self, BadPosition> {
        let mut it = s.trim().splitn(3, '-');
        let bad = || {
            BadPosition(format!(
                "`{s}` is not a MariaDB GTID (domain-server-sequence)"
            ))
        };
        let domain = it.next().and_then(|x| x.parse().ok()).ok_or_else(bad)?;
        let server = it.next().and_then(|x| x.parse().ok()).ok_or_else(bad)?;
        let seq = it.next().and_then(|x| x.parse().ok()).ok_or_else(bad)?;
        Ok(Gtid {
            domain,
            server,
            seq,
        })
    }
}

/// The last GTID of every replication domain (MariaDB's `gtid_binlog_pos` form).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GtidState(pub BTreeMap<u32, Gtid>);

impl GtidState {
    pub fn apply(&mut self, g: Gtid) {
        self.0.insert(g.domain, g);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `g` is at or before this state in its domain (already seen).
    pub fn contains(&self, g: &Gtid) -> bool {
        self.0.get(&g.domain).is_some_and(|s| s.seq >= g.seq)
    }
}

impl fmt::Display for GtidState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for g in self.0.values() {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            write!(f, "{g}")?;
        }
        Ok(())
    }
}

impl FromStr for GtidState {
    type Err = BadPosition;
    fn from_str(s: &str) -> Result<Self, BadPosition> {
        let mut st = GtidState::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            st.apply(part.parse()?);
        }
        Ok(st)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Position {
    /// GTID state after the last transaction completed before `offset` (empty when the
    /// server does not log GTIDs).
    #[serde(default)]
    pub gtid: GtidState,
    pub file: String,
    pub offset: u64,
    #[serde(default)]
    pub ordinal: u64,
}

impl Position {
    pub fn new(file: impl Into<String>, offset: u64) -> Self {
        Position {
            gtid: GtidState::default(),
            file: file.into(),
            offset,
            ordinal: 0,
        }
    }

    /// The numeric suffix of the binlog file name (`binlog.000012` -> 12).
    pub fn file_index(&self) -> u64 {
        file_index(&self.file)
    }

    fn key(&self) -> (u64, &str, u64, u64) {
        (self.file_index(), &self.file, self.offset, self.ordinal)
    }
}

pub fn file_index(name: &str) -> u64 {
    name.rsplit('.')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

impl PartialOrd for Position {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Position {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

/// `binlog.000003:1234#5@0-1-42,1-2-7` (`#ordinal` and `@gtid` only when set).
impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.offset)?;
        if self.ordinal > 0 {
            write!(f, "#{}", self.ordinal)?;
        }
        if !self.gtid.is_empty() {
            write!(f, "@{}", self.gtid)?;
        }
        Ok(())
    }
}

impl FromStr for Position {
    type Err = BadPosition;
    fn from_str(s: &str) -> Result<Self, BadPosition> {
        let bad = || {
            BadPosition(format!(
                "`{s}` is not a position (FILE:OFFSET[#ORDINAL][@GTID,...])"
            ))
        };
        let (head, gtid) = match s.split_once('@') {
            Some((h, g)) => (h, g.parse()?),
            None => (s, GtidState::default()),
        };
        let (head, ordinal) = match head.split_once('#') {
            Some((h, o)) => (h, o.parse().map_err(|_| bad())?),
            None => (head, 0),
        };
        let (file, offset) = head.rsplit_once(':').ok_or_else(bad)?;
        if file.is_empty() {
            return Err(bad());
        }
        Ok(Position {
            gtid,
            file: file.to_owned(),
            offset: offset.parse().map_err(|_| bad())?,
            ordinal,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_order_by_file_offset_ordinal() {
        let a: Position = "binlog.000002:900".parse().unwrap();
        let b: Position = "binlog.000010:4".parse().unwrap();
        let c: Position = "binlog.000010:4#3@0-1-9".parse().unwrap();
        assert!(a < b && b < c);
        assert_eq!(c.to_string(), "binlog.000010:4#3@0-1-9");
        assert_eq!(c.gtid.0[&0].seq, 9);
        assert!("nofile".parse::<Position>().is_err());
    }

    #[test]
    fn gtid_states_keep_every_domain() {
        let mut s: GtidState = "0-1-5,2-1-9".parse().unwrap();
        s.apply("0-1-6".parse().unwrap());
        assert_eq!(s.to_string(), "0-1-6,2-1-9");
        assert!(s.contains(&"2-1-3".parse().unwrap()));
        assert!(!s.contains(&"1-1-1".parse().unwrap()));
    }
}
