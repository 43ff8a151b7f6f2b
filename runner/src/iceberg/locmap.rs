//! The in-memory part of a row index: each identity's first location, in hash tables
//! that grow one shard at a time.
//!
//! A single hash table grows by doubling, and while it does it holds its old and its
//! new buckets at once: 1.5 times its new size, for one commit that adds millions of
//! rows. Split into [`SHARDS`] tables by the identity's top bits, only one shard
//! grows at a time, so the peak is the tables' size plus one shard's old buckets.
//! Small indexes (most tables) stay one table until [`SPLIT_AT`] identities.
//!
//! An entry is the identity as two `u64` halves and the location: 24 bytes (a `u128`
//! would align it to 32).

use super::locate::Loc;
use hashbrown::HashTable;

/// Tables a large index is split into.
const SHARDS: usize = 64;
/// Identities from which on an index is split.
const SPLIT_AT: usize = 1 << 16;

#[derive(Clone, Copy)]
struct Entry {
    lo: u64,
    hi: u64,
    loc: Loc,
}

impl Entry {
    fn id(&self) -> u128 {
        self.lo as u128 | (self.hi as u128) << 64
    }

    fn is(lo: u64, hi: u64) -> impl Fn(&Entry) -> bool {
        move |e| e.lo == lo && e.hi == hi
    }
}

fn halves(h: u128) -> (u64, u64) {
    (h as u64, (h >> 64) as u64)
}

/// Identities are hashes already: their low half is the table hash.
fn hash(e: &Entry) -> u64 {
    e.lo
}

/// Identity -> location, one location per identity.
#[derive(Default)]
pub struct Locations {
    /// None (empty), one, or `SHARDS` tables.
    shards: Vec<HashTable<Entry>>,
    len: usize,
}

impl Locations {
    pub fn len(&self) -> usize {
        self.len
    }

    /// Heap bytes the tables hold (buckets, control bytes, spare capacity).
    pub fn bytes(&self) -> usize {
        self.shards.iter().map(HashTable::allocation_size).sum()
    }

    fn shard(&self, hi: u64) -> usize {
        if self.shards.len() == 1 {
            0
        } else {
            (hi >> (64 - SHARDS.trailing_zeros())) as usize
        }
    }

    pub fn get(&self, h: u128) -> Option<Loc> {
        let (lo, hi) = halves(h);
        let t = self.shards.get(self.shard(hi))?;
        t.find(lo, Entry::is(lo, hi)).map(|e| e.loc)
    }

    /// Insert `l` for `h` unless `h` has a location already; true if inserted.
    pub fn insert_new(&mut self, h: u128, l: Loc) -> bool {
        self.put(h, l, false)
    }

    /// Set `h`'s location to `l`.
    pub fn set(&mut self, h: u128, l: Loc) {
        self.put(h, l, true);
    }

    fn put(&mut self, h: u128, l: Loc, replace: bool) -> bool {
        if self.shards.is_empty() {
            self.shards.push(HashTable::new());
        } else if self.shards.len() == 1 && self.len >= SPLIT_AT {
            self.split(self.len);
        }
        let (lo, hi) = halves(h);
        let s = self.shard(hi);
        match self.shards[s].entry(lo, Entry::is(lo, hi), hash) {
            hashbrown::hash_table::Entry::Occupied(mut o) => {
                if replace {
                    o.get_mut().loc = l;
                }
                false
            }
            hashbrown::hash_table::Entry::Vacant(v) => {
                v.insert(Entry { lo, hi, loc: l });
                self.len += 1;
                true
            }
        }
    }

    /// Remove `h`, returning its location.
    pub fn remove(&mut self, h: u128) -> Option<Loc> {
        let (lo, hi) = halves(h);
        let s = self.shard(hi);
        let t = self.shards.get_mut(s)?;
        let (e, _) = t.find_entry(lo, Entry::is(lo, hi)).ok()?.remove();
        self.len -= 1;
        Some(e.loc)
    }

    /// Room for `n` more identities (a map split by it sized for its mean share).
    pub fn reserve(&mut self, n: usize) {
        let total = self.len + n;
        if total >= SPLIT_AT && self.shards.len() <= 1 {
            self.split(total);
        } else if self.shards.is_empty() {
            self.shards.push(HashTable::with_capacity(n));
        } else if self.shards.len() == 1 {
            self.shards[0].reserve(n, hash);
        }
        // Split tables are left to grow one at a time, each when it must: reserving
        // each its share of `n` would grow every table a few more entries would
        // fill only by chance (tables hold a power of two of buckets).
    }

    /// Into `SHARDS` tables sized for `total` identities.
    fn split(&mut self, total: usize) {
        let per = total.div_ceil(SHARDS);
        let old = std::mem::take(&mut self.shards);
        self.shards = (0..SHARDS).map(|_| HashTable::with_capacity(per)).collect();
        for t in old {
            for e in t {
                let s = self.shard(e.hi);
                self.shards[s].insert_unique(e.lo, e, hash);
            }
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (u128, Loc)> + '_ {
        self.shards
            .iter()
            .flat_map(|t| t.iter().map(|e| (e.id(), e.loc)))
    }

    /// Every entry, the map left empty; each table is freed once read.
    pub fn drain(&mut self) -> impl Iterator<Item = (u128, Loc)> {
        self.len = 0;
        std::mem::take(&mut self.shards)
            .into_iter()
            .flat_map(|t| t.into_iter().map(|e| (e.id(), e.loc)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Identities spread as XXH3's are, and some sharing a low or a high half.
    fn ids(n: usize) -> Vec<u128> {
        (0..n as u64)
            .map(|i| {
                let h = twox_hash::XxHash3_128::oneshot(&i.to_le_bytes());
                match i {
                    0..20 => h & !(u64::MAX as u128), // low half zero
                    20..40 => h & u64::MAX as u128,   // high half zero
                    _ => h,
                }
            })
            .collect()
    }

    #[test]
    fn behaves_as_a_map_across_the_split() {
        let mut m = Locations::default();
        let mut model: HashMap<u128, Loc> = HashMap::new();
        let all = ids(SPLIT_AT * 3);
        for (i, h) in all.iter().enumerate() {
            let l = i as Loc;
            assert_eq!(m.insert_new(*h, l), !model.contains_key(h));
            model.entry(*h).or_insert(l);
            // A second insert keeps the first location.
            assert!(!m.insert_new(*h, l + 1));
        }
        assert_eq!(m.shards.len(), SHARDS);
        assert_eq!(m.len(), model.len());
        for (i, h) in all.iter().enumerate() {
            assert_eq!(m.get(*h), model.get(h).copied(), "identity {i}");
        }
        // Replace every third, remove every fifth.
        for (i, h) in all.iter().enumerate() {
            if i % 3 == 0 {
                m.set(*h, 7);
                model.insert(*h, 7);
            }
            if i % 5 == 0 {
                assert_eq!(m.remove(*h), model.remove(h));
                assert_eq!(m.remove(*h), None);
            }
        }
        assert_eq!(m.len(), model.len());
        let mut listed: Vec<(u128, Loc)> = m.iter().collect();
        let mut expected: Vec<(u128, Loc)> = model.iter().map(|(h, l)| (*h, *l)).collect();
        listed.sort_unstable();
        expected.sort_unstable();
        assert_eq!(listed, expected);
        let mut drained: Vec<(u128, Loc)> = m.drain().collect();
        drained.sort_unstable();
        assert_eq!(drained, expected);
        assert_eq!(m.len(), 0);
        assert_eq!(m.get(all[1]), None);
        assert_eq!(m.bytes(), 0);
    }

    #[test]
    fn a_reserved_map_holds_its_identities_and_small_ones_stay_one_table() {
        let mut small = Locations::default();
        small.reserve(10);
        for h in ids(10) {
            small.insert_new(h, 1);
        }
        assert_eq!(small.shards.len(), 1);
        let mut big = Locations::default();
        big.reserve(SPLIT_AT * 2);
        assert_eq!(big.shards.len(), SHARDS);
        let before = big.bytes();
        for (i, h) in ids(SPLIT_AT * 2).into_iter().enumerate() {
            big.insert_new(h, i as Loc);
        }
        // Sized for them up front: nothing grew.
        assert_eq!(big.bytes(), before);
        assert_eq!(big.len(), SPLIT_AT * 2);
    }
}
