//! The commit layer's decisions, apart from its I/O: whether a Kafka commit is
//! fenced off, whether a row delta may be rebased, whether a commit already landed.

use super::commit::{KafkaCommit, COMMIT_ID};
use super::{Error, LoadedTable, Result};
use iceberg::spec::{Operation, TableMetadata};
use std::collections::BTreeMap;

/// A Kafka commit is fenced: each partition must still be at the offset this
/// consumer read it from (another consumer that took the partition over moved it);
/// then the table's offsets move on.
pub(super) fn fence_offsets(
    table: &str,
    mut have: BTreeMap<String, i64>,
    k: &KafkaCommit,
) -> Result<BTreeMap<String, i64>> {
    for (part, want) in &k.expect {
        if have.get(part) != want.as_ref() {
            let reason = format!(
                "Kafka partition {part} is at offset {} in the table, not {} as this consumer read it: another consumer of the group took it over",
                have.get(part).map_or("(none)".into(), |o| o.to_string()),
                want.map_or("(none)".into(), |o| o.to_string())
            );
            return Err(Error::Stale {
                table: table.to_owned(),
                reason,
            });
        }
    }
    have.extend(k.next.iter().map(|(p, o)| (p.clone(), *o)));
    Ok(have)
}

/// A row delta may be rebased only over appends.
pub(super) fn check_base(
    m: &TableMetadata,
    table: &str,
    expected: Option<i64>,
    current: Option<i64>,
) -> Result<()> {
    let mut at = current;
    while at != expected {
        let Some(id) = at else {
            return Err(Error::BaseMoved {
                table: table.to_owned(),
                reason: format!(
                    "snapshot {} the row delta was computed against is no longer an ancestor of the current snapshot",
                    expected.map_or("(none)".to_owned(), |e| e.to_string())
                ),
            });
        };
        let s = m.snapshot_by_id(id).ok_or_else(|| Error::BaseMoved {
            table: table.to_owned(),
            reason: format!("snapshot {id} is missing from the metadata"),
        })?;
        if s.summary().operation != Operation::Append {
            return Err(Error::BaseMoved {
                table: table.to_owned(),
                reason: format!(
                    "concurrent snapshot {id} ({}) removed or rewrote files after the row delta's base",
                    s.summary().operation.as_str()
                ),
            });
        }
        at = s.parent_snapshot_id();
    }
    Ok(())
}

/// Whether a commit already landed: one of the metadata files it wrote is current or
/// in the metadata log, or a snapshot carries its id. Returns its snapshot, if any.
pub(super) fn already_applied(
    t: &LoadedTable,
    commit_id: &str,
    written: &[String],
) -> Option<Option<i64>> {
    let snap = t
        .metadata
        .snapshots()
        .find(|s| {
            s.summary()
                .additional_properties
                .get(COMMIT_ID)
                .is_some_and(|v| v == commit_id)
        })
        .map(|s| s.snapshot_id());
    if snap.is_some() {
        return Some(snap);
    }
    let wrote = |loc: &str| written.iter().any(|w| w == loc);
    if wrote(&t.metadata_location)
        || t.metadata
            .metadata_log()
            .iter()
            .any(|l| wrote(&l.metadata_file))
    {
        return Some(None);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(v: &[(&str, i64)]) -> BTreeMap<String, i64> {
        v.iter().map(|(p, o)| (p.to_string(), *o)).collect()
    }

    #[test]
    fn a_kafka_commit_moves_only_offsets_it_read_from() {
        let k = KafkaCommit {
            expect: BTreeMap::from([("t/0".to_owned(), Some(5)), ("u/0".to_owned(), None)]),
            next: offsets(&[("t/0", 9), ("u/0", 3)]),
        };
        // The table is where this consumer read from: offsets move, others stay.
        let have = offsets(&[("t/0", 5), ("v/1", 7)]);
        assert_eq!(
            fence_offsets("t", have, &k).unwrap(),
            offsets(&[("t/0", 9), ("u/0", 3), ("v/1", 7)])
        );
        // Another consumer moved t/0 on: fenced, named.
        let e = fence_offsets("t", offsets(&[("t/0", 6)]), &k)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("t/0") && e.contains("at offset 6") && e.contains("not 5"),
            "{e}"
        );
        // A partition this consumer saw as new has an offset now: fenced too.
        let e = fence_offsets("t", offsets(&[("t/0", 5), ("u/0", 1)]), &k)
            .unwrap_err()
            .to_string();
        assert!(e.contains("u/0") && e.contains("not (none)"), "{e}");
    }
}
