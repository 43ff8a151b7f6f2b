//! Folding a table's changes within one checkpoint, by key: the last change of a key
//! wins, a key that changes takes its old value along as a delete, and keyless rows are
//! counted (identical rows each count; deleting one of two removes one). Pure: rows
//! in, positions of rows to write and to delete out; `write_pending` turns them into
//! files.

use super::convert::key_bytes;
use crate::source::position::Position;
use crate::source::Op;
use arrow_array::RecordBatch;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// Bytes a key's entry in the folding maps costs besides its key bytes (the key's
/// allocation and header, the value, the hash table's slot and spare capacity),
/// counted in `bytes` so the memory budget sees the maps, not only the rows.
pub const ENTRY_BYTES: usize = 80;

/// Changes of one table in the current checkpoint, folded by key.
pub(crate) struct Pending {
    /// Converted rows (Iceberg schema) in arrival order.
    pub batches: Vec<RecordBatch>,
    /// key -> (batch, row) of its live row, or None when deleted.
    pub live: HashMap<Vec<u8>, Option<(u32, u32)>>,
    /// Rows (batch, row) holding keys to delete from older data.
    pub deletes: Vec<(u32, u32)>,
    /// Keyless tables: rows appended, by full-row key (identical rows each count, the
    /// earliest first).
    pub appended: HashMap<Vec<u8>, VecDeque<(u32, u32)>>,
    pub watermark: Option<Position>,
    pub bytes: usize,
    /// Kafka: `topic/partition` -> next offset after this table's pending messages.
    pub offsets: BTreeMap<String, i64>,
    /// A snapshot reads the table again: its commit removes every row committed
    /// before (the rows pending here replace them).
    pub replace: bool,
    /// Batches of snapshot rows that all go into the files as they are (rows of
    /// distinct keys, deleting nothing older), not yet entered into `live` /
    /// `appended`: a snapshot costs no map entry per row. They join the maps when a
    /// later change of the table in this checkpoint needs them.
    pub bulk: Vec<u32>,
}

impl Pending {
    pub fn new() -> Self {
        Pending {
            batches: Vec::new(),
            live: HashMap::new(),
            deletes: Vec::new(),
            appended: HashMap::new(),
            watermark: None,
            bytes: 0,
            offsets: BTreeMap::new(),
            replace: false,
            bulk: Vec::new(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
            && self.deletes.is_empty()
            && self.appended.is_empty()
            && self.bulk.is_empty()
            && !self.replace
    }

    /// Rows of a snapshot that insert distinct keys and delete nothing older (the
    /// table held no rows, or this snapshot replaces them): kept as a batch, without a
    /// map entry per row, while nothing else of the table is pending.
    pub fn fold_snapshot(&mut self, key: &[usize], keyed: bool, rows: RecordBatch, last: Position) {
        if !(self.live.is_empty() && self.appended.is_empty() && self.deletes.is_empty()) {
            let keep = vec![true; rows.num_rows()];
            return self.fold(key, keyed, Op::Insert, false, None, Some(rows), &keep, last);
        }
        self.bytes += rows.get_array_memory_size();
        self.batches.push(rows);
        self.bulk.push((self.batches.len() - 1) as u32);
        self.watermark = Some(last);
    }

    /// The rows the files get, (batch, row) in arrival order.
    pub fn live_rows(&self, keyed: bool) -> Vec<(u32, u32)> {
        let mut out: Vec<(u32, u32)> = if keyed {
            self.live.values().filter_map(|v| *v).collect()
        } else {
            self.appended.values().flatten().copied().collect()
        };
        for &b in &self.bulk {
            out.extend((0..self.batches[b as usize].num_rows() as u32).map(|r| (b, r)));
        }
        out.sort_unstable();
        out
    }

    /// The bulk batches' rows entered into the maps, as inserts (before a change that
    /// may touch their keys is folded).
    pub fn enter_bulk(&mut self, key: &[usize], keyed: bool) {
        let mut kb = Vec::new();
        for b in std::mem::take(&mut self.bulk) {
            for row in 0..self.batches[b as usize].num_rows() as u32 {
                key_bytes(&self.batches[b as usize], key, row as usize, &mut kb);
                self.enter_row(keyed, &kb, (b, row));
            }
        }
    }

    /// A row the files get, under its key (keyed: it replaces what the key held in
    /// this checkpoint; keyless: one more of its identical rows).
    fn enter_row(&mut self, keyed: bool, kb: &[u8], at: (u32, u32)) {
        if keyed {
            if self.live.insert(kb.to_vec(), Some(at)).is_none() {
                self.bytes += ENTRY_BYTES + kb.len();
            }
        } else {
            let rows = self.appended.entry(kb.to_vec()).or_default();
            self.bytes += if rows.is_empty() {
                ENTRY_BYTES + kb.len() + 32
            } else {
                8
            };
            rows.push_back(at);
        }
    }

    /// Fold a batch of changes into the pending changes. `before`/`after` are the
    /// old and new row images (update: both; insert: after; delete: before), `keep`
    /// the rows to take (those above the table's watermark), `key` the key columns
    /// (all columns for a keyless table), `upsert` whether an insert may replace an
    /// older row of its key (snapshots of tables that held rows, replays).
    #[allow(clippy::too_many_arguments)]
    pub fn fold(
        &mut self,
        key: &[usize],
        keyed: bool,
        op: Op,
        upsert: bool,
        before: Option<RecordBatch>,
        after: Option<RecordBatch>,
        keep: &[bool],
        last: Position,
    ) {
        if !self.bulk.is_empty() {
            self.enter_bulk(key, keyed);
        }
        let p = self;
        let mut kb = Vec::new();
        let add = |p: &mut Pending, b: RecordBatch| -> u32 {
            p.bytes += b.get_array_memory_size();
            p.batches.push(b);
            (p.batches.len() - 1) as u32
        };
        let bi = before.map(|b| add(p, b));
        let ai = after.map(|b| add(p, b));
        for (row, k) in keep.iter().enumerate() {
            if !k {
                continue;
            }
            let row = row as u32;
            if let Some(b) = bi {
                // Update or delete: the old key goes (from older data too).
                let batch = &p.batches[b as usize];
                key_bytes(batch, key, row as usize, &mut kb);
                if keyed {
                    if p.live.insert(kb.clone(), None).is_none() {
                        p.bytes += ENTRY_BYTES + kb.len();
                    }
                    p.deletes.push((b, row));
                    p.bytes += 8;
                } else if let Some(rows) = p.appended.get_mut(&kb) {
                    // A row written in this checkpoint: drop it before it is written.
                    rows.pop_front();
                    if rows.is_empty() {
                        p.appended.remove(&kb);
                    }
                } else {
                    p.deletes.push((b, row));
                    p.bytes += 8;
                }
            }
            if let Some(a) = ai {
                let batch = &p.batches[a as usize];
                key_bytes(batch, key, row as usize, &mut kb);
                // An upsert: older versions of the key are deleted too (a replayed or
                // re-snapshotted row must not appear twice). Snapshot rows of a table
                // that held no rows need no delete.
                if keyed && (op != Op::Insert || upsert) {
                    p.deletes.push((a, row));
                    p.bytes += 8;
                }
                p.enter_row(keyed, &kb, (a, row));
            }
        }
        p.watermark = Some(last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Array, Int64Array};
    use arrow_schema::{DataType, Field, Schema};
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Arc;

    fn batch(a: i64, b: i64) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, false),
            Field::new("b", DataType::Int64, false),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![a])),
                Arc::new(Int64Array::from(vec![b])),
            ],
        )
        .unwrap()
    }

    fn row(p: &Pending, (b, r): (u32, u32)) -> (i64, i64) {
        let batch = &p.batches[b as usize];
        let col = |c: usize| {
            batch
                .column(c)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .value(r as usize)
        };
        (col(0), col(1))
    }

    fn pos(n: u64) -> Position {
        Position::new("binlog.000001", n)
    }

    /// One source change, drawn against the state it applies to.
    #[derive(Debug, Clone)]
    enum Change {
        Insert(i64, i64),
        Update((i64, i64), (i64, i64)),
        Delete(i64, i64),
    }

    fn apply(p: &mut Pending, key: &[usize], keyed: bool, c: &Change, n: u64) {
        let (op, before, after) = match c {
            Change::Insert(a, b) => (Op::Insert, None, Some(batch(*a, *b))),
            Change::Update(o, v) => (Op::Update, Some(batch(o.0, o.1)), Some(batch(v.0, v.1))),
            Change::Delete(a, b) => (Op::Delete, Some(batch(*a, *b)), None),
        };
        p.fold(key, keyed, op, true, before, after, &[true], pos(n));
    }

    /// Changes valid against a keyed table holding `older` (k -> v): inserts of new
    /// keys, updates that may move a row to a free key, deletes.
    fn keyed_changes(
        older: &BTreeMap<i64, i64>,
        draws: &[(u8, i64, i64)],
    ) -> (Vec<Change>, BTreeMap<i64, i64>) {
        let mut state = older.clone();
        let mut out = Vec::new();
        for &(kind, x, y) in draws {
            let existing: Vec<i64> = state.keys().copied().collect();
            match kind % 3 {
                0 if !state.contains_key(&(x % 12)) => {
                    state.insert(x % 12, y);
                    out.push(Change::Insert(x % 12, y));
                }
                1 if !existing.is_empty() => {
                    let k = existing[(x as usize) % existing.len()];
                    let nk = if y % 2 == 0 { k } else { y % 12 };
                    if nk != k && state.contains_key(&nk) {
                        continue;
                    }
                    let old = state.remove(&k).unwrap();
                    state.insert(nk, x);
                    out.push(Change::Update((k, old), (nk, x)));
                }
                2 if !existing.is_empty() => {
                    let k = existing[(x as usize) % existing.len()];
                    let v = state.remove(&k).unwrap();
                    out.push(Change::Delete(k, v));
                }
                _ => {}
            }
        }
        (out, state)
    }

    proptest! {
        /// Keyed: older rows without the keys the checkpoint deletes, plus the rows it
        /// writes, are exactly the source's final rows (last writer wins per key; a
        /// key moved by an update leaves no row behind).
        #[test]
        fn keyed_folding_matches_last_writer_wins(
            older in proptest::collection::btree_map(0i64..12, any::<i64>(), 0..8),
            draws in proptest::collection::vec((any::<u8>(), 0i64..1000, 0i64..1000), 0..40),
        ) {
            let (changes, want) = keyed_changes(&older, &draws);
            let mut p = Pending::new();
            for (n, c) in changes.iter().enumerate() {
                apply(&mut p, &[0], true, c, n as u64);
            }
            let deleted: BTreeSet<i64> = p.deletes.iter().map(|&d| row(&p, d).0).collect();
            let written: Vec<(i64, i64)> = p.live.values().flatten().map(|&l| row(&p, l)).collect();
            let mut got: BTreeMap<i64, i64> = older
                .iter()
                .filter(|(k, _)| !deleted.contains(k))
                .map(|(k, v)| (*k, *v))
                .collect();
            for (k, v) in &written {
                prop_assert!(got.insert(*k, *v).is_none(), "key {k} twice");
            }
            prop_assert_eq!(got, want);
            prop_assert_eq!(p.is_empty(), changes.is_empty());
            if !changes.is_empty() {
                prop_assert_eq!(p.watermark.clone(), Some(pos(changes.len() as u64 - 1)));
            }
        }

        /// Keyless: identical rows each count; deleting one of two identical rows
        /// written in this checkpoint removes one. (Older rows are distinct here: a
        /// full-row equality delete removes every identical older row, the limit the
        /// lake issue is about.)
        #[test]
        fn keyless_folding_counts_identical_rows(
            older in proptest::collection::btree_set((0i64..4, 0i64..3), 0..6),
            draws in proptest::collection::vec((any::<u8>(), 0i64..4, 0i64..3), 0..40),
        ) {
            let mut state: Vec<(i64, i64)> = older.iter().copied().collect();
            let mut changes = Vec::new();
            for &(kind, a, b) in &draws {
                match kind % 3 {
                    0 => {
                        state.push((a, b));
                        changes.push(Change::Insert(a, b));
                    }
                    1 if !state.is_empty() => {
                        let i = (a as usize) % state.len();
                        let old = state.remove(i);
                        state.push((b, a));
                        changes.push(Change::Update(old, (b, a)));
                    }
                    2 if !state.is_empty() => {
                        let i = (b as usize) % state.len();
                        let old = state.remove(i);
                        changes.push(Change::Delete(old.0, old.1));
                    }
                    _ => {}
                }
            }
            let mut p = Pending::new();
            for (n, c) in changes.iter().enumerate() {
                apply(&mut p, &[0, 1], false, c, n as u64);
            }
            let deleted: BTreeSet<(i64, i64)> = p.deletes.iter().map(|&d| row(&p, d)).collect();
            let mut got: Vec<(i64, i64)> = older.iter().filter(|r| !deleted.contains(r)).copied().collect();
            got.extend(p.appended.values().flatten().map(|&l| row(&p, l)));
            got.sort();
            state.sort();
            prop_assert_eq!(got, state);
        }
    }

    proptest! {
        /// Snapshot rows kept as bulk batches, then changes of the same checkpoint
        /// (which enter them into the maps): the same rows written and deleted as
        /// when every snapshot row went through the maps.
        #[test]
        fn snapshot_batches_fold_like_inserts(
            keys in proptest::collection::vec(0i64..12, 0..8),
            draws in proptest::collection::vec((any::<u8>(), 0i64..1000, 0i64..1000), 0..20),
            keyed in any::<bool>(),
        ) {
            let snap: BTreeMap<i64, i64> = keys.iter().map(|k| (*k, k * 10)).collect();
            let (changes, _) = keyed_changes(&snap, &draws);
            let key: &[usize] = if keyed { &[0] } else { &[0, 1] };
            // A keyless table's snapshot may hold identical rows.
            let rows: Vec<(i64, i64)> = if keyed {
                snap.iter().map(|(k, v)| (*k, *v)).collect()
            } else {
                keys.iter().map(|k| (*k, k * 10)).collect()
            };
            let (mut bulk, mut plain) = (Pending::new(), Pending::new());
            for (k, v) in &rows {
                bulk.fold_snapshot(key, keyed, batch(*k, *v), pos(0));
                plain.fold(key, keyed, Op::Insert, false, None, Some(batch(*k, *v)), &[true], pos(0));
            }
            prop_assert_eq!(bulk.bulk.len(), rows.len());
            for (n, c) in changes.iter().enumerate() {
                apply(&mut bulk, key, keyed, c, n as u64 + 1);
                apply(&mut plain, key, keyed, c, n as u64 + 1);
            }
            let rows = |p: &Pending| -> Vec<(i64, i64)> {
                p.live_rows(keyed).into_iter().map(|l| row(p, l)).collect()
            };
            let dels = |p: &Pending| -> Vec<(i64, i64)> {
                p.deletes.iter().map(|&d| row(p, d)).collect()
            };
            prop_assert_eq!(rows(&bulk), rows(&plain));
            prop_assert_eq!(dels(&bulk), dels(&plain));
            prop_assert_eq!(bulk.is_empty(), plain.is_empty());
        }
    }

    #[test]
    fn an_update_of_the_key_deletes_the_old_key() {
        let mut p = Pending::new();
        apply(&mut p, &[0], true, &Change::Update((1, 10), (2, 20)), 0);
        let deleted: Vec<i64> = p.deletes.iter().map(|&d| row(&p, d).0).collect();
        assert!(deleted.contains(&1) && deleted.contains(&2), "{deleted:?}");
        assert_eq!(p.live.values().flatten().count(), 1);
        assert!(p.bytes > 0);
        assert_eq!(p.batches.len(), 2);
        assert!(p.batches[0].column(0).len() == 1);
    }
}
