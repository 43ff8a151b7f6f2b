//! A keyed table's pending changes, folded by key, in one slot per key: the slot
//! holds the key's row (a deleted key's slot holds its key values instead), and the
//! key is read out of the row when needed, so a pending change costs its row and a
//! 32-byte slot, not a second allocation for its key.

use super::render::Row;

/// A bucket of the table: a slot and its control byte. The table grows by doubling,
/// so up to half of its buckets are empty; `Keyed::bytes` counts them all.
const BUCKET_BYTES: usize = 33;
/// The pointer a checkpoint's statements hold to each row.
const POINTER_BYTES: usize = 16;

const GONE: u64 = 1 << 63;
const DELETED: u64 = 1 << 62;
const ABSENT: u64 = 1 << 61;
const SEQ: u64 = ABSENT - 1;

struct Slot {
    /// The row at the end; its key values only when `GONE`.
    row: Row,
    hash: u64,
    /// The last change's order, and the flags above.
    seq: u64,
}

/// One key's folded change, as a checkpoint reads it.
pub(super) struct Change<'a> {
    slot: &'a Slot,
    key: &'a [usize],
}

impl Change<'_> {
    /// Order of the last change.
    pub fn seq(&self) -> u64 {
        self.slot.seq & SEQ
    }

    /// The row at the end, or None (deleted).
    pub fn row(&self) -> Option<&Row> {
        (self.slot.seq & GONE == 0).then_some(&self.slot.row)
    }

    /// The source deleted the row in this checkpoint (perhaps to insert it again).
    pub fn deleted(&self) -> bool {
        self.slot.seq & DELETED != 0
    }

    /// The key's first change in this checkpoint inserted it: the target, a copy of
    /// the source as of the last checkpoint, holds no row of it.
    pub fn absent(&self) -> bool {
        self.slot.seq & ABSENT != 0
    }

    /// The key's values.
    pub fn key(&self) -> Row {
        match self.row() {
            None => self.slot.row.clone(),
            Some(row) => row.project(self.key).expect("a row holds its key"),
        }
    }
}

/// A keyed table's pending changes.
pub(super) struct Keyed {
    slots: hashbrown::HashTable<Slot>,
    /// The key columns (indexes into a row), in the key's order.
    key: Vec<usize>,
    /// Bytes of the rows held.
    rows: usize,
    /// The hash's seed, random: keys chosen to collide (the source's rows are
    /// anyone's data) cannot be made ahead of time.
    seed: u64,
}

impl Default for Keyed {
    fn default() -> Keyed {
        use std::hash::BuildHasher;
        Keyed {
            slots: hashbrown::HashTable::new(),
            key: Vec::new(),
            rows: 0,
            seed: std::collections::hash_map::RandomState::new().hash_one(0u8),
        }
    }
}

/// Whether slot `s` holds the key whose values are `probe` (hashed to `h`).
fn holds(s: &Slot, h: u64, key: &[usize], probe: &[u8]) -> bool {
    s.hash == h
        && if s.seq & GONE != 0 {
            s.row.bytes() == probe
        } else {
            key_is(s.row.bytes(), key, probe)
        }
}

/// Whether `row`'s key values (at `key`) are `probe`, a key's values.
fn key_is(row: &[u8], key: &[usize], probe: &[u8]) -> bool {
    let mut rest = probe;
    for &i in key {
        let Some(v) = Row::span(row, i) else {
            return false;
        };
        match rest.strip_prefix(v) {
            Some(r) => rest = r,
            None => return false,
        }
    }
    rest.is_empty()
}

impl Keyed {
    fn hash(&self, key: &[u8]) -> u64 {
        twox_hash::XxHash3_64::oneshot_with_seed(self.seed, key)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Bytes held: rows and slots.
    pub fn bytes(&self) -> usize {
        // hashbrown keeps at most 7/8 of its buckets full.
        self.rows + self.slots.capacity() * 8 / 7 * BUCKET_BYTES + self.slots.len() * POINTER_BYTES
    }

    fn find(&self, h: u64, probe: &[u8]) -> Option<&Slot> {
        self.slots.find(h, |s| holds(s, h, &self.key, probe))
    }

    /// The pending change of a key (its values, as `Change::key` gives them).
    pub fn get(&self, key: &Row) -> Option<Change<'_>> {
        self.find(self.hash(key.bytes()), key.bytes())
            .map(|slot| Change {
                slot,
                key: &self.key,
            })
    }

    /// A change of key `key` (the key columns at `cols` of a row): the row after it
    /// (None: deleted), `seq` its order, `deleted` a source delete, `insert` a source
    /// insert (a key first seen by an insert is absent from the target).
    pub fn change(
        &mut self,
        cols: &[usize],
        key: Row,
        row: Option<Row>,
        seq: u64,
        deleted: bool,
        insert: bool,
    ) {
        if self.slots.is_empty() {
            self.key = cols.to_vec();
        }
        debug_assert_eq!(self.key, cols, "a table's key is fixed within a checkpoint");
        let h = self.hash(key.bytes());
        let probe = key.bytes();
        let k = &self.key;
        let found = self.slots.find_mut(h, |s| holds(s, h, k, probe));
        let flags = |old: u64| -> u64 {
            let gone = if row.is_none() { GONE } else { 0 };
            let del = if deleted { DELETED } else { 0 };
            (old & (DELETED | ABSENT)) | del | gone | (seq & SEQ)
        };
        match found {
            Some(s) => {
                self.rows -= s.row.size();
                s.seq = flags(s.seq);
                s.row = row.unwrap_or(key);
                self.rows += s.row.size();
            }
            None => {
                let seq = flags(if insert { ABSENT } else { 0 });
                let row = row.unwrap_or(key);
                self.rows += row.size();
                self.slots
                    .insert_unique(h, Slot { row, hash: h, seq }, |s| s.hash);
            }
        }
    }

    /// The key columns (indexes into a row).
    pub fn key_cols(&self) -> &[usize] {
        &self.key
    }

    /// Forget a key's change (the target keeps the key's row as it was).
    pub fn remove(&mut self, key: &Row) {
        let h = self.hash(key.bytes());
        let probe = key.bytes();
        let k = &self.key;
        if let Ok(e) = self.slots.find_entry(h, |s| holds(s, h, k, probe)) {
            let (slot, _) = e.remove();
            self.rows -= slot.row.size();
        }
    }

    /// Every key's change, in no order.
    pub fn iter(&self) -> impl Iterator<Item = Change<'_>> {
        self.slots.iter().map(|slot| Change {
            slot,
            key: &self.key,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::rdb::render::{RowBuf, Val};

    fn row(id: i64, s: &str) -> Row {
        Row::of([Val::Text(s), Val::Int(id)])
    }

    fn key(id: i64) -> Row {
        Row::of([Val::Int(id)])
    }

    #[test]
    fn changes_fold_by_key_read_out_of_the_row() {
        let mut k = Keyed::default();
        let cols = [1];
        k.change(&cols, key(1), Some(row(1, "a")), 1, false, true);
        k.change(&cols, key(2), Some(row(2, "b")), 2, false, false);
        k.change(&cols, key(1), Some(row(1, "a2")), 3, false, false);
        assert_eq!(k.len(), 2);
        let c = k.get(&key(1)).expect("key 1");
        assert_eq!(c.row(), Some(&row(1, "a2")));
        assert_eq!((c.seq(), c.absent(), c.deleted()), (3, true, false));
        assert_eq!(c.key(), key(1));
        let c = k.get(&key(2)).expect("key 2");
        assert!(!c.absent());
        assert!(k.get(&key(3)).is_none());
        // A delete keeps the key's values; an insert after it brings a row back.
        k.change(&cols, key(2), None, 4, true, false);
        let c = k.get(&key(2)).expect("key 2 deleted");
        assert_eq!((c.row(), c.deleted(), c.key()), (None, true, key(2)));
        k.change(&cols, key(2), Some(row(2, "c")), 5, false, true);
        let c = k.get(&key(2)).expect("key 2 again");
        assert_eq!(
            (c.row(), c.deleted(), c.absent()),
            (Some(&row(2, "c")), true, false)
        );
        // Bytes follow the rows held: the replaced rows no longer count.
        let rows = row(1, "a2").size() + row(2, "c").size();
        let slots = k.slots.capacity() * 8 / 7 * BUCKET_BYTES + 2 * POINTER_BYTES;
        assert_eq!(k.bytes() - slots, rows);
    }

    #[test]
    fn a_key_changed_many_times_costs_one_row() {
        // The memory budget sees what the folded changes hold: a key updated 10,000
        // times holds one row, not 10,000.
        let mut k = Keyed::default();
        k.change(&[1], key(1), Some(row(1, "first")), 1, false, true);
        let once = k.bytes();
        for i in 0..10_000 {
            k.change(&[1], key(1), Some(row(1, "later")), i + 2, false, false);
        }
        assert_eq!(k.bytes(), once);
        k.change(&[1], key(1), None, 20_000, true, false);
        assert!(k.bytes() < once, "a deleted key holds its key only");
    }

    #[test]
    fn a_text_value_holding_another_keys_bytes_is_not_that_key() {
        // Keys compare value by value: (1, "ab") is not (1, "a") followed by "b".
        let mut k = Keyed::default();
        let two = |a: &str, b: &str| Row::of([Val::Text(a), Val::Text(b)]);
        k.change(&[0, 1], two("a", "b"), Some(two("a", "b")), 1, false, true);
        k.change(&[0, 1], two("ab", ""), Some(two("ab", "")), 2, false, true);
        assert_eq!(k.len(), 2);
        // A key in another column order than the row's.
        let mut r = Keyed::default();
        let row = Row::of([Val::Int(7), Val::Text("x"), Val::Int(9)]);
        let key = Row::of([Val::Int(9), Val::Int(7)]);
        r.change(&[2, 0], key.clone(), Some(row.clone()), 1, false, false);
        assert_eq!(r.get(&key).expect("found").key(), key);
        assert!(r.get(&Row::of([Val::Int(7), Val::Int(9)])).is_none());
    }

    #[test]
    fn hostile_key_values_stay_distinct_keys() {
        // NUL, an empty string against NULL, tabs and backslashes, bytes against the
        // same text, a 1 MiB value: each its own key, each found again.
        let huge = "x".repeat(1 << 20);
        let keys: Vec<Row> = vec![
            Row::of([Val::Text("")]),
            Row::of([Val::Null]),
            Row::of([Val::Text("\0")]),
            Row::of([Val::Text("\0\0")]),
            Row::of([Val::Text("a\tb\\")]),
            Row::of([Val::Bytes(b"a\tb\\")]),
            Row::of([Val::Text(&huge)]),
            Row::of([Val::Int(0)]),
            Row::of([Val::UInt(0)]),
        ];
        let mut k = Keyed::default();
        for (i, key) in keys.iter().enumerate() {
            let mut b = RowBuf::default();
            b.extend(key);
            b.push(Val::Int(i as i64));
            k.change(
                &[0],
                key.clone(),
                Some(b.finish()),
                i as u64 + 1,
                false,
                true,
            );
        }
        assert_eq!(k.len(), keys.len());
        for (i, key) in keys.iter().enumerate() {
            let c = k.get(key).expect("found");
            assert_eq!(c.key(), *key);
            assert_eq!(c.row().unwrap().vals().nth(1), Some(Val::Int(i as i64)));
        }
    }

    #[test]
    fn many_keys_survive_the_table_growing() {
        let mut k = Keyed::default();
        for i in 0..10_000 {
            k.change(&[1], key(i), Some(row(i, "v")), i as u64 + 1, false, true);
        }
        for i in (0..10_000).step_by(3) {
            k.change(&[1], key(i), None, 20_000 + i as u64, true, false);
        }
        assert_eq!(k.len(), 10_000);
        for i in 0..10_000 {
            let c = k.get(&key(i)).expect("every key");
            assert_eq!(c.row().is_none(), i % 3 == 0);
            assert_eq!(c.key(), key(i));
        }
    }
}
