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
    use iceberg::spec::{
        NestedField, PrimitiveType, Schema, Snapshot, SortOrder, Summary, Type,
        UnboundPartitionSpec, MAIN_BRANCH,
    };
    use std::collections::HashMap;

    /// Table metadata with a chain of snapshots of the given operations (ids 1, 2, ...),
    /// each tagged with a commit id `c<id>`.
    fn table(ops: &[Operation]) -> LoadedTable {
        let schema = Schema::builder()
            .with_fields(vec![NestedField::required(
                1,
                "id",
                Type::Primitive(PrimitiveType::Long),
            )
            .into()])
            .build()
            .unwrap();
        let mut b = iceberg::spec::TableMetadataBuilder::new(
            schema,
            UnboundPartitionSpec::builder().build(),
            SortOrder::unsorted_order(),
            "file:///tmp/t".into(),
            iceberg::spec::FormatVersion::V2,
            HashMap::new(),
        )
        .unwrap();
        for (i, op) in ops.iter().enumerate() {
            let id = i as i64 + 1;
            let snap = Snapshot::builder()
                .with_snapshot_id(id)
                .with_parent_snapshot_id((id > 1).then_some(id - 1))
                .with_sequence_number(id)
                .with_timestamp_ms(1_700_000_000_000 + id)
                .with_manifest_list(format!("file:///tmp/t/metadata/snap-{id}.avro"))
                .with_summary(Summary {
                    operation: op.clone(),
                    additional_properties: HashMap::from([(
                        COMMIT_ID.to_owned(),
                        format!("c{id}"),
                    )]),
                })
                .with_schema_id(0)
                .build();
            b = b.set_branch_snapshot(snap, MAIN_BRANCH).unwrap();
        }
        LoadedTable {
            ident: iceberg::TableIdent::from_strs(["ns", "t"]).unwrap(),
            metadata_location: "file:///tmp/t/metadata/00003-x.metadata.json".into(),
            metadata: b.build().unwrap().metadata,
        }
    }

    #[test]
    fn a_row_delta_rebases_over_appends_only() {
        use Operation::{Append, Overwrite};
        let t = table(&[Append, Append, Append]);
        // Computed against snapshot 1; 2 and 3 only appended: rebase is safe.
        assert!(check_base(&t.metadata, "ns.t", Some(1), Some(3)).is_ok());
        assert!(check_base(&t.metadata, "ns.t", Some(3), Some(3)).is_ok());
        // A delete or overwrite after the base: refused, naming the snapshot.
        let t = table(&[Append, Overwrite, Append]);
        let e = check_base(&t.metadata, "ns.t", Some(1), Some(3)).unwrap_err();
        assert!(matches!(e, Error::BaseMoved { .. }), "{e}");
        assert!(e.to_string().contains("snapshot 2 (overwrite)"), "{e}");
        // The base is not an ancestor at all (another branch of history).
        let t = table(&[Append, Append]);
        let e = check_base(&t.metadata, "ns.t", Some(9), Some(2)).unwrap_err();
        assert!(e.to_string().contains("no longer an ancestor"), "{e}");
    }

    #[test]
    fn a_commit_whose_reply_was_lost_is_found_not_repeated() {
        let t = table(&[Operation::Append, Operation::Append]);
        // Its snapshot carries its commit id: landed, with that snapshot.
        assert_eq!(already_applied(&t, "c2", &[]), Some(Some(2)));
        // Its metadata file is the current one (a schema change has no snapshot).
        let written = vec![t.metadata_location.clone()];
        assert_eq!(already_applied(&t, "other", &written), Some(None));
        // Neither: it did not land, the retry commits it.
        assert_eq!(
            already_applied(&t, "c9", &["file:///elsewhere".into()]),
            None
        );
    }

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
