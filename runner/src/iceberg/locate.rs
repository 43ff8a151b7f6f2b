//! Row locators: where each live row of a table is (data file and position), by row
//! identity (a hash of the key columns; of the whole row for a keyless table, with a
//! multiplicity for identical rows). Updates and deletes of committed rows then
//! become position deletes, which every reader applies cheaply and which pyiceberg,
//! unlike equality deletes, reads at all.
//!
//! An index is valid for one snapshot and schema of its table (`at`). It is built by
//! reading the identity columns of the table's live data files (applying the table's
//! position and equality deletes), and kept up to date by the writer: each of its
//! commits moves it to the commit's snapshot. Any other change of the table (another
//! writer, a rewrite, a schema change) makes it stale, and it is built again when next
//! needed.
//!
//! Identities are 128-bit XXH3 hashes of the columns' stable bytes: two different
//! keys of one table share a hash with probability about n²/2¹²⁹ (for 10⁹ rows,
//! below 10⁻²¹).
//!
//! Memory is bounded: an index past the share of the memory budget its job gives it
//! moves its locations to disk ([`RowIndex::spill`]: an embedded B-tree, redb, in a
//! scratch file of its own, with a small page cache). Newer locations gather in
//! memory again until the next spill; a lookup asks memory first, then the file.

use super::catalog::LoadedTable;
use super::{Error, Result};
use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{Field, Schema, SchemaRef};
use iceberg::io::FileIO;
use iceberg::spec::{DataContentType, ManifestContentType, ManifestList, Struct};
use parquet::arrow::arrow_reader::{ParquetRecordBatchReaderBuilder, RowSelection, RowSelector};
use parquet::arrow::ProjectionMask;
use redb::{ReadableDatabase, ReadableMultimapTable, ReadableTableMetadata};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A row's location: data file id (into `RowIndex::files`) and row position.
pub type Loc = u64;

fn loc(file: u32, pos: u64) -> Loc {
    ((file as u64) << 32) | pos
}
pub fn loc_file(l: Loc) -> u32 {
    (l >> 32) as u32
}
pub fn loc_pos(l: Loc) -> i64 {
    (l & 0xffff_ffff) as i64
}

/// The identity of row `row` of `batch` over columns `cols`.
pub fn identity(batch: &RecordBatch, cols: &[usize], row: usize, buf: &mut Vec<u8>) -> u128 {
    crate::sync::convert::key_bytes(batch, cols, row, buf);
    twox_hash::XxHash3_128::oneshot(buf)
}

/// Keys that are hashes already: their low bits are the table hash.
#[derive(Default)]
pub struct Prehashed(u64);
impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes.iter().take(8) {
            self.0 = (self.0 << 8) | *b as u64;
        }
    }
    fn write_u128(&mut self, n: u128) {
        self.0 = n as u64;
    }
}
type Map<V> = HashMap<u128, V, BuildHasherDefault<Prehashed>>;

/// A data file rows are located in.
#[derive(Debug, Clone)]
pub struct FileSlot {
    pub path: String,
    pub partition: Struct,
    pub spec_id: i32,
}

/// Where the live rows of a table are.
#[derive(Default)]
pub struct RowIndex {
    /// (snapshot id, schema id) the index describes.
    pub at: (Option<i64>, i32),
    pub files: Vec<FileSlot>,
    by_path: HashMap<String, u32>,
    rows: super::locmap::Locations,
    /// Further locations of identical rows (keyless tables).
    more: Map<Vec<Loc>>,
    /// Heap bytes held, as of the last change (`bytes` is asked for every batch).
    held: usize,
    /// Locations moved to disk by `spill`.
    disk: Option<Spilled>,
}

/// Where an index may move its locations, and from what size of its memory on.
#[derive(Debug, Clone)]
pub struct SpillTo {
    /// A scratch folder (the job's state folder's `index/spill`).
    pub dir: PathBuf,
    /// Heap bytes an index may hold before it spills while it is built or read.
    pub cap: usize,
}

/// The page cache of a spilled index's file (counted in `RowIndex::bytes`).
const SPILL_CACHE: usize = 8 << 20;
/// Less memory than this is not worth a spill (the file's page cache outweighs it).
const SPILL_MIN: usize = 512 << 10;
/// Locations sorted and written per step of a spill.
const SPILL_CHUNK: usize = 1 << 20;
/// Every location of identity `h`, as (h, loc) entries; identical rows are several.
const SPILLED: redb::MultimapTableDefinition<'static, u128, u64> =
    redb::MultimapTableDefinition::new("locations");

/// The on-disk part of an index: a redb file, scratch (removed with the index, and at
/// the start of every run).
struct Spilled {
    db: redb::Database,
    path: PathBuf,
    /// Locations it holds.
    len: usize,
    /// Commits since the last durable one (redb reuses freed pages only after one).
    light: u32,
}

impl Drop for Spilled {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn spill_err(e: impl std::fmt::Display) -> Error {
    Error::Invalid(format!("the row index's file on disk: {e}"))
}

impl Spilled {
    fn create(dir: &Path) -> Result<Spilled> {
        std::fs::create_dir_all(dir).map_err(|e| spill_err(format!("{}: {e}", dir.display())))?;
        let path = dir.join(format!("{}.redb", uuid::Uuid::new_v4()));
        let db = redb::Builder::new()
            .set_cache_size(SPILL_CACHE)
            .create(&path)
            .map_err(|e| spill_err(format!("{}: {e}", path.display())))?;
        Ok(Spilled {
            db,
            path,
            len: 0,
            light: 0,
        })
    }

    /// One write transaction: `remove` then `insert`.
    fn write(&mut self, remove: &[(u128, Loc)], insert: &[(u128, Loc)]) -> Result<()> {
        let mut w = self.db.begin_write().map_err(spill_err)?;
        // Scratch data: a crash loses nothing (the index is built again), but redb
        // reuses freed pages only after a durable commit, so every 16th is one.
        self.light += 1;
        let durable = self.light >= 16 || !insert.is_empty();
        if durable {
            self.light = 0;
        }
        w.set_durability(if durable {
            redb::Durability::Immediate
        } else {
            redb::Durability::None
        })
        .map_err(spill_err)?;
        let mut found = 0;
        {
            let mut t = w.open_multimap_table(SPILLED).map_err(spill_err)?;
            for (h, l) in remove {
                if t.remove(*h, *l).map_err(spill_err)? {
                    found += 1;
                }
            }
            for (h, l) in insert {
                if t.insert(*h, *l).map_err(spill_err)? {
                    // Already there: not a new location.
                    continue;
                }
                self.len += 1;
            }
        }
        w.commit().map_err(spill_err)?;
        self.len -= found;
        Ok(())
    }

    fn reader(&self) -> Result<redb::ReadOnlyMultimapTable<u128, u64>> {
        let r = self.db.begin_read().map_err(spill_err)?;
        r.open_multimap_table(SPILLED).map_err(spill_err)
    }
}

/// Lookups in an index: its memory, then its file (one read transaction for all).
pub struct Lookup<'a> {
    ix: &'a RowIndex,
    disk: Option<redb::ReadOnlyMultimapTable<u128, u64>>,
}

impl Lookup<'_> {
    /// The `n`-th location of identity `h` (n > 0: identical rows of keyless tables).
    pub fn nth(&self, h: u128, n: usize) -> Result<Option<Loc>> {
        // One probe of each map (this runs for every key a commit writes).
        let first = self.ix.rows.get(h);
        let more = self.ix.more.get(&h);
        let in_memory = first.is_some() as usize + more.map_or(0, Vec::len);
        if n < in_memory {
            return Ok(match n {
                0 => first,
                _ => more.and_then(|v| v.get(n - 1)).copied(),
            });
        }
        let Some(t) = &self.disk else {
            return Ok(None);
        };
        let found = t.get(h).map_err(spill_err)?.nth(n - in_memory);
        match found {
            Some(g) => Ok(Some(g.map_err(spill_err)?.value())),
            None => Ok(None),
        }
    }
}

/// Position deletes of one partition: spec id, partition value, (data file,
/// position) pairs.
pub type PartitionDeletes = (i32, Struct, Vec<(String, i64)>);

/// A change of the index a commit makes: located rows it deletes, rows it adds.
#[derive(Default, Debug)]
pub struct Delta {
    pub removed: Vec<(u128, Loc)>,
    /// New data files, and each file's row identities in position order.
    pub added: Vec<(FileSlot, Vec<u128>)>,
}

impl RowIndex {
    pub fn empty(at: (Option<i64>, i32)) -> Self {
        RowIndex {
            at,
            ..Default::default()
        }
    }

    /// Locations held, in memory and on disk.
    pub fn len(&self) -> usize {
        self.in_memory() + self.spilled()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The memory a spill would give back, when worth having (cached, cheap).
    pub fn spillable_bytes(&self) -> Option<usize> {
        let n = self
            .held
            .saturating_sub(if self.disk.is_some() { SPILL_CACHE } else { 0 });
        (n >= SPILL_MIN).then_some(n)
    }

    /// Locations held in memory.
    pub fn in_memory(&self) -> usize {
        self.rows.len() + self.more.values().map(Vec::len).sum::<usize>()
    }

    /// Locations moved to disk.
    pub fn spilled(&self) -> usize {
        self.disk.as_ref().map_or(0, |d| d.len)
    }

    /// Lookups against the index as it is now.
    pub fn lookup(&self) -> Result<Lookup<'_>> {
        Ok(Lookup {
            ix: self,
            disk: self.disk.as_ref().map(Spilled::reader).transpose()?,
        })
    }

    /// Move every location held in memory to the index's file on disk (created in
    /// `dir` on the first spill).
    pub fn spill(&mut self, dir: &Path) -> Result<()> {
        if self.disk.is_none() {
            self.disk = Some(Spilled::create(dir)?);
        }
        let disk = self.disk.as_mut().expect("created");
        let more = std::mem::take(&mut self.more);
        let all = self.rows.drain().chain(
            more.into_iter()
                .flat_map(|(h, v)| v.into_iter().map(move |l| (h, l))),
        );
        // Sorted chunks: the B-tree takes them in order, and only a chunk is copied.
        let mut chunk = Vec::with_capacity(SPILL_CHUNK);
        for e in all {
            chunk.push(e);
            if chunk.len() == SPILL_CHUNK {
                chunk.sort_unstable();
                disk.write(&[], &chunk)?;
                chunk.clear();
            }
        }
        chunk.sort_unstable();
        disk.write(&[], &chunk)?;
        self.recount();
        Ok(())
    }

    /// Spill when the memory held passes `to.cap` (checked while building or reading).
    fn spill_past(&mut self, to: Option<&SpillTo>) -> Result<()> {
        let Some(to) = to else { return Ok(()) };
        self.recount();
        if self.held > to.cap {
            self.spill(&to.dir)?;
        }
        Ok(())
    }

    /// Heap bytes the index holds (counted in the job's memory budget).
    pub fn bytes(&self) -> usize {
        self.held
    }

    /// Count the heap bytes again (after a change).
    fn recount(&mut self) {
        // `more` (hashbrown): key, value and one control byte per bucket.
        self.held = self.rows.bytes()
            + self.more.capacity() * (16 + 24 + 1)
            + self.more.values().map(|v| v.capacity() * 8).sum::<usize>()
            + self.files.iter().map(|f| f.path.len() + 96).sum::<usize>()
            + self.by_path.capacity() * 40
            + if self.disk.is_some() { SPILL_CACHE } else { 0 };
    }

    /// The committed rows a change deletes, located: `deleted` are the identities of
    /// its deleted rows (a key once however often it repeats; identical rows of a
    /// keyless table one location each, in turn), `written` those of the rows it
    /// writes (keyed: a new row of a key an older row still holds replaces it).
    pub fn locate_deletes(
        &self,
        keyed: bool,
        deleted: impl IntoIterator<Item = u128>,
        written: impl IntoIterator<Item = u128>,
    ) -> Result<Vec<(u128, Loc)>> {
        let look = self.lookup()?;
        let mut removed = Vec::new();
        if keyed {
            // Each identity once, in order (a spilled index's file is then read
            // front to back): 16 bytes an identity, where a map of them cost twice
            // that and more while it grew.
            let mut ids: Vec<u128> = deleted.into_iter().chain(written).collect();
            ids.sort_unstable();
            ids.dedup();
            for h in ids {
                if let Some(l) = look.nth(h, 0)? {
                    removed.push((h, l));
                }
            }
            return Ok(removed);
        }
        // Identical rows: the n-th delete of a row takes its n-th location. Only
        // identities found are counted: one not found is not found again.
        let mut claimed: HashMap<u128, usize> = HashMap::new();
        for h in deleted {
            let n = claimed.get(&h).copied().unwrap_or(0);
            if let Some(l) = look.nth(h, n)? {
                removed.push((h, l));
                claimed.insert(h, n + 1);
            }
        }
        Ok(removed)
    }

    /// Located rows as position deletes, grouped by the partition (spec id and
    /// value) of the data files they point into.
    pub fn by_partition(&self, removed: &[(u128, Loc)]) -> Vec<PartitionDeletes> {
        let mut by_file: std::collections::BTreeMap<u32, Vec<i64>> = Default::default();
        for (_, l) in removed {
            by_file.entry(loc_file(*l)).or_default().push(loc_pos(*l));
        }
        let mut out: Vec<PartitionDeletes> = Vec::new();
        for (f, positions) in by_file {
            let slot = &self.files[f as usize];
            let i = match out
                .iter()
                .position(|(s, p, _)| *s == slot.spec_id && *p == slot.partition)
            {
                Some(i) => i,
                None => {
                    out.push((slot.spec_id, slot.partition.clone(), Vec::new()));
                    out.len() - 1
                }
            };
            out[i]
                .2
                .extend(positions.into_iter().map(|p| (slot.path.clone(), p)));
        }
        out
    }

    /// The `n`-th location of identity `h` (n > 0: identical rows of keyless tables);
    /// for many lookups, [`RowIndex::lookup`] reads the file in one transaction.
    pub fn nth(&self, h: u128, n: usize) -> Result<Option<Loc>> {
        self.lookup()?.nth(h, n)
    }

    pub fn file(&self, l: Loc) -> &FileSlot {
        &self.files[loc_file(l) as usize]
    }

    fn file_id(&mut self, f: FileSlot) -> u32 {
        if let Some(id) = self.by_path.get(&f.path) {
            return *id;
        }
        let id = self.files.len() as u32;
        self.by_path.insert(f.path.clone(), id);
        self.files.push(f);
        id
    }

    fn insert(&mut self, h: u128, l: Loc) {
        if !self.rows.insert_new(h, l) {
            self.more.entry(h).or_default().push(l);
        }
    }

    /// Remove a location held in memory; false if memory does not hold it.
    fn remove(&mut self, h: u128, l: Loc) -> bool {
        if self.rows.get(h) == Some(l) {
            match self.more.get_mut(&h) {
                Some(v) => {
                    let next = v.pop().expect("non-empty");
                    if v.is_empty() {
                        self.more.remove(&h);
                    }
                    self.rows.set(h, next);
                }
                None => {
                    self.rows.remove(h);
                }
            }
            true
        } else if let Some(v) = self.more.get_mut(&h) {
            let found = v.iter().position(|x| *x == l).map(|i| v.swap_remove(i));
            if v.is_empty() {
                self.more.remove(&h);
            }
            found.is_some()
        } else {
            false
        }
    }

    /// Apply a commit's change; the index then describes `at`. With `replace`, the
    /// commit removed every older row.
    pub fn apply(&mut self, delta: Delta, replace: bool, at: (Option<i64>, i32)) -> Result<()> {
        if replace {
            *self = RowIndex::empty(at);
        }
        let mut on_disk = Vec::new();
        for (h, l) in delta.removed {
            if !self.remove(h, l) {
                on_disk.push((h, l));
            }
        }
        if let Some(disk) = self.disk.as_mut() {
            if !on_disk.is_empty() {
                on_disk.sort_unstable();
                disk.write(&on_disk, &[])?;
            }
        }
        self.rows
            .reserve(delta.added.iter().map(|(_, ids)| ids.len()).sum());
        for (slot, ids) in delta.added {
            let f = self.file_id(slot);
            for (pos, h) in ids.into_iter().enumerate() {
                self.insert(h, loc(f, pos as u64));
            }
        }
        self.at = at;
        self.recount();
        Ok(())
    }
}

const MAGIC: &[u8; 8] = b"LSRIX02\n";

impl RowIndex {
    /// The index, written out: a header (snapshot, schema, data files), the number of
    /// locations, then each as identity and location (identical rows one entry each;
    /// a spilled index's file read in order, never whole into memory). Partitions are
    /// not stored: `load` takes them from the manifests.
    pub fn write_to(&self, out: &mut impl Write) -> Result<()> {
        let io = |e: std::io::Error| Error::Invalid(format!("writing the row index: {e}"));
        let header = serde_json::json!({
            "snapshot": self.at.0,
            "schema": self.at.1,
            "files": self.files.iter().map(|f| (&f.path, f.spec_id)).collect::<Vec<_>>(),
        })
        .to_string();
        out.write_all(MAGIC).map_err(io)?;
        out.write_all(&(header.len() as u64).to_le_bytes())
            .map_err(io)?;
        out.write_all(header.as_bytes()).map_err(io)?;
        out.write_all(&(self.len() as u64).to_le_bytes())
            .map_err(io)?;
        let mut put = |h: u128, l: Loc| -> Result<()> {
            out.write_all(&h.to_le_bytes()).map_err(io)?;
            out.write_all(&l.to_le_bytes()).map_err(io)
        };
        for (h, l) in self.rows.iter() {
            put(h, l)?;
        }
        for (h, v) in &self.more {
            for l in v {
                put(*h, *l)?;
            }
        }
        if let Some(disk) = &self.disk {
            let t = disk.reader()?;
            let mut n = 0;
            for e in t.iter().map_err(spill_err)? {
                let (h, locs) = e.map_err(spill_err)?;
                let h = h.value();
                for l in locs {
                    put(h, l.map_err(spill_err)?.value())?;
                    n += 1;
                }
            }
            if n != t.len().map_err(spill_err)? as usize {
                return Err(spill_err("the file changed while it was written out"));
            }
        }
        Ok(())
    }

    /// An index stored by `write_to`, if it describes the table as it is now (its
    /// snapshot and schema); None otherwise, or when the bytes are not an index.
    /// Locations past `spill.cap` bytes of memory go to disk as they are read.
    pub async fn load(
        mut input: impl Read,
        file_io: &FileIO,
        t: &LoadedTable,
        spill: Option<&SpillTo>,
    ) -> Result<Option<RowIndex>> {
        fn take<const N: usize>(r: &mut impl Read) -> Option<[u8; N]> {
            let mut b = [0u8; N];
            r.read_exact(&mut b).ok().map(|_| b)
        }
        #[derive(serde::Deserialize)]
        struct Header {
            snapshot: Option<i64>,
            schema: i32,
            files: Vec<(String, i32)>,
        }
        if take::<8>(&mut input).as_ref() != Some(MAGIC) {
            return Ok(None);
        }
        let Some(n) = take::<8>(&mut input).map(u64::from_le_bytes) else {
            return Ok(None);
        };
        let mut header = Vec::new();
        if (&mut input).take(n).read_to_end(&mut header).ok() != Some(n as usize) {
            return Ok(None);
        }
        let Ok(header) = serde_json::from_slice::<Header>(&header) else {
            return Ok(None);
        };
        if (header.snapshot, header.schema) != table_at(t) {
            return Ok(None);
        }
        // The files' partitions, from the manifests of that snapshot.
        let mut parts: HashMap<String, Struct> = HashMap::new();
        if let Some(s) = t.metadata.current_snapshot() {
            let list = file_io.new_input(s.manifest_list())?.read().await?;
            for mf in ManifestList::parse_with_version(&list, t.metadata.format_version())?
                .entries()
                .iter()
                .filter(|m| m.content == ManifestContentType::Data)
            {
                for e in mf.load_manifest(file_io).await?.entries() {
                    if e.is_alive() {
                        parts.insert(
                            e.data_file().file_path().to_owned(),
                            e.data_file().partition().clone(),
                        );
                    }
                }
            }
        }
        let mut ix = RowIndex::empty(table_at(t));
        for (path, spec_id) in header.files {
            let partition = parts.remove(&path).unwrap_or_else(Struct::empty);
            ix.file_id(FileSlot {
                path,
                partition,
                spec_id,
            });
        }
        let Some(count) = take::<8>(&mut input).map(u64::from_le_bytes) else {
            return Ok(None);
        };
        ix.rows.reserve((count as usize).min(SPILL_CHUNK));
        for i in 0..count {
            let (Some(h), Some(l)) = (take::<16>(&mut input), take::<8>(&mut input)) else {
                return Ok(None);
            };
            ix.insert(u128::from_le_bytes(h), u64::from_le_bytes(l));
            if i % 65_536 == 65_535 {
                ix.spill_past(spill)?;
            }
        }
        if input.read(&mut [0u8; 1]).ok() != Some(0) {
            return Ok(None);
        }
        ix.spill_past(spill)?;
        ix.recount();
        Ok(Some(ix))
    }
}

/// Where a table is: its current snapshot and schema.
pub fn table_at(t: &LoadedTable) -> (Option<i64>, i32) {
    (
        t.metadata.current_snapshot_id(),
        t.metadata.current_schema_id(),
    )
}

/// Columns `ids` (field ids) of a Parquet file, as arrays of the `target` types (cast
/// where the file has an older type; null where the file lacks the column).
async fn read_columns(
    file_io: &FileIO,
    path: &str,
    ids: &[i32],
    target: &SchemaRef,
) -> Result<Vec<RecordBatch>> {
    read_selected(file_io, path, ids, target, None).await
}

/// `read_columns` of the rows at `rows` (ascending positions) only, or of all.
async fn read_selected(
    file_io: &FileIO,
    path: &str,
    ids: &[i32],
    target: &SchemaRef,
    rows: Option<&[i64]>,
) -> Result<Vec<RecordBatch>> {
    let bytes = file_io.new_input(path)?.read().await?;
    let err = |e: parquet::errors::ParquetError| Error::Invalid(format!("{path}: {e}"));
    let mut builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(err)?;
    if let Some(rows) = rows {
        let total = builder.metadata().file_metadata().num_rows() as usize;
        let mut sel = Vec::new();
        let mut at = 0usize;
        for &r in rows {
            let r = r as usize;
            if r >= total || r < at {
                return Err(Error::Invalid(format!(
                    "{path}: row {r} is not in the file ({total} rows)"
                )));
            }
            if r > at {
                sel.push(RowSelector::skip(r - at));
            }
            sel.push(RowSelector::select(1));
            at = r + 1;
        }
        builder = builder.with_row_selection(RowSelection::from(sel));
    }
    let roots = builder.parquet_schema().root_schema().get_fields().to_vec();
    let mut pick: Vec<(usize, usize)> = Vec::new(); // (root index, wanted index)
    for (w, id) in ids.iter().enumerate() {
        if let Some(r) = roots
            .iter()
            .position(|f| f.get_basic_info().has_id() && f.get_basic_info().id() == *id)
        {
            pick.push((r, w));
        }
    }
    let mask = ProjectionMask::roots(builder.parquet_schema(), pick.iter().map(|p| p.0));
    let reader = builder
        .with_projection(mask)
        .with_batch_size(64 * 1024)
        .build()
        .map_err(err)?;
    // Projected columns come in file order.
    let mut order: Vec<(usize, usize)> = pick.clone();
    order.sort();
    let mut out = Vec::new();
    for b in reader {
        let b = b.map_err(|e| Error::Invalid(format!("{path}: {e}")))?;
        let n = b.num_rows();
        let mut cols: Vec<ArrayRef> = target
            .fields()
            .iter()
            .map(|f| arrow_array::new_null_array(f.data_type(), n))
            .collect();
        for (i, (_, w)) in order.iter().enumerate() {
            let want = target.field(*w).data_type();
            let c = b.column(i);
            cols[*w] = if c.data_type() == want {
                c.clone()
            } else {
                arrow_cast::cast(c, want)
                    .map_err(|e| Error::Invalid(format!("{path}: column {}: {e}", ids[*w])))?
            };
        }
        let loose = Arc::new(Schema::new(
            target
                .fields()
                .iter()
                .map(|f| Field::new(f.name(), f.data_type().clone(), true))
                .collect::<Vec<_>>(),
        ));
        out.push(
            RecordBatch::try_new(loose, cols)
                .map_err(|e| Error::Invalid(format!("{path}: {e}")))?,
        );
    }
    Ok(out)
}

/// Columns `cols` (indexes into the table's current schema) of the located rows
/// `locs` (live rows of this index), one array per column, rows in `locs` order.
/// Each data file is read once, its selected rows only.
pub async fn fetch(
    file_io: &FileIO,
    t: &LoadedTable,
    ix: &RowIndex,
    locs: &[Loc],
    cols: &[usize],
) -> Result<Vec<ArrayRef>> {
    let arrow = super::files::arrow_schema(t)?;
    let schema = t.metadata.current_schema();
    let fields = schema.as_struct().fields();
    let ids: Vec<i32> = cols.iter().map(|&c| fields[c].id).collect();
    let target: SchemaRef = Arc::new(Schema::new(
        cols.iter()
            .map(|&c| arrow.field(c).clone())
            .collect::<Vec<_>>(),
    ));
    let mut by_file: std::collections::BTreeMap<u32, Vec<i64>> = Default::default();
    for &l in locs {
        by_file.entry(loc_file(l)).or_default().push(loc_pos(l));
    }
    // Per file: its rows read, and where each position is among them.
    let mut parts: Vec<Vec<ArrayRef>> = Vec::new();
    let mut at: HashMap<Loc, (usize, usize)> = HashMap::new();
    for (f, mut positions) in by_file {
        positions.sort_unstable();
        positions.dedup();
        let path = &ix.files[f as usize].path;
        let batches = read_selected(file_io, path, &ids, &target, Some(&positions)).await?;
        let one = arrow_select::concat::concat_batches(
            &batches
                .first()
                .map(|b| b.schema())
                .unwrap_or_else(|| target.clone()),
            &batches,
        )
        .map_err(|e| Error::Invalid(format!("{path}: {e}")))?;
        if one.num_rows() != positions.len() {
            return Err(Error::Invalid(format!(
                "{path}: {} rows read for {} positions",
                one.num_rows(),
                positions.len()
            )));
        }
        for (i, p) in positions.iter().enumerate() {
            at.insert(loc(f, *p as u64), (parts.len(), i));
        }
        parts.push(one.columns().to_vec());
    }
    let indices: Vec<(usize, usize)> = locs.iter().map(|l| at[l]).collect();
    (0..cols.len())
        .map(|c| {
            let arrays: Vec<&dyn Array> = parts.iter().map(|p| p[c].as_ref()).collect();
            arrow_select::interleave::interleave(&arrays, &indices)
                .map_err(|e| Error::Invalid(format!("reading located rows: {e}")))
        })
        .collect()
}

/// The data files a position-delete file points into.
pub async fn position_delete_targets(file_io: &FileIO, path: &str) -> Result<Vec<String>> {
    let target = Arc::new(Schema::new(vec![Field::new(
        "file_path",
        arrow_schema::DataType::Utf8,
        true,
    )]));
    let mut out = std::collections::BTreeSet::new();
    for b in read_columns(file_io, path, &[super::files::DELETE_FILE_PATH_ID], &target).await? {
        let Some(paths) = b.column(0).as_any().downcast_ref::<StringArray>() else {
            return Err(Error::Invalid(format!(
                "{path}: not a position delete file"
            )));
        };
        out.extend(paths.iter().flatten().map(str::to_owned));
    }
    Ok(out.into_iter().collect())
}

/// Build the index of a table's live rows over columns `cols` (indexes into the
/// current schema): every live data file's identity columns read, rows its position
/// deletes and equality deletes remove left out.
/// Locations past `spill.cap` bytes of memory go to disk as they are found.
pub async fn build(
    file_io: &FileIO,
    t: &LoadedTable,
    cols: &[usize],
    spill: Option<&SpillTo>,
) -> Result<RowIndex> {
    let m = &t.metadata;
    let mut index = RowIndex::empty(table_at(t));
    let Some(s) = m.current_snapshot() else {
        return Ok(index);
    };
    let arrow = super::files::arrow_schema(t)?;
    let schema = m.current_schema();
    let mut data = Vec::new(); // (path, data seq, partition, spec id)
    let mut pos_files = Vec::new();
    let mut eq_files = Vec::new(); // (path, equality ids, seq)
    let bytes = file_io.new_input(s.manifest_list())?.read().await?;
    for mf in ManifestList::parse_with_version(&bytes, m.format_version())?.entries() {
        let spec_id = mf.partition_spec_id;
        for e in mf.load_manifest(file_io).await?.entries() {
            if !e.is_alive() {
                continue;
            }
            let f = e.data_file();
            let seq = e.sequence_number().unwrap_or(0);
            match (mf.content, f.content_type()) {
                (ManifestContentType::Data, _) | (_, DataContentType::Data) => data.push((
                    f.file_path().to_owned(),
                    seq,
                    f.partition().clone(),
                    spec_id,
                )),
                (_, DataContentType::PositionDeletes) => pos_files.push(f.file_path().to_owned()),
                (_, DataContentType::EqualityDeletes) => eq_files.push((
                    f.file_path().to_owned(),
                    f.equality_ids().unwrap_or_default(),
                    seq,
                )),
            }
        }
    }
    // Position deletes: data file path -> deleted positions.
    let mut gone: HashMap<String, Vec<i64>> = HashMap::new();
    for p in &pos_files {
        let target = Arc::new(Schema::new(vec![
            Field::new("file_path", arrow_schema::DataType::Utf8, true),
            Field::new("pos", arrow_schema::DataType::Int64, true),
        ]));
        let ids = [
            super::files::DELETE_FILE_PATH_ID,
            super::files::DELETE_POS_ID,
        ];
        for b in read_columns(file_io, p, &ids, &target).await? {
            let paths = b.column(0).as_any().downcast_ref::<StringArray>();
            let pos = b.column(1).as_any().downcast_ref::<Int64Array>();
            let (Some(paths), Some(pos)) = (paths, pos) else {
                return Err(Error::Invalid(format!("{p}: not a position delete file")));
            };
            for i in 0..b.num_rows() {
                gone.entry(paths.value(i).to_owned())
                    .or_default()
                    .push(pos.value(i));
            }
        }
    }
    for v in gone.values_mut() {
        v.sort_unstable();
    }
    // Equality deletes, grouped by their columns: identity of those columns -> the
    // newest delete's sequence number (it removes rows of older data files).
    let mut eq_groups: Vec<(Vec<usize>, Map<i64>)> = Vec::new();
    let mut buf = Vec::new();
    for (path, ids, seq) in &eq_files {
        let mut idx = Vec::new();
        for id in ids {
            let Some(i) = schema.as_struct().fields().iter().position(|f| f.id == *id) else {
                return Err(Error::Invalid(format!(
                    "{path}: equality delete on field {id}, which the table's schema no longer has"
                )));
            };
            idx.push(i);
        }
        let target = Arc::new(Schema::new(
            idx.iter()
                .map(|i| arrow.field(*i).clone())
                .collect::<Vec<_>>(),
        ));
        let g = match eq_groups.iter().position(|g| g.0 == idx) {
            Some(g) => g,
            None => {
                eq_groups.push((idx.clone(), Map::default()));
                eq_groups.len() - 1
            }
        };
        let all: Vec<usize> = (0..idx.len()).collect();
        for b in read_columns(file_io, path, ids, &target).await? {
            for r in 0..b.num_rows() {
                let h = identity(&b, &all, r, &mut buf);
                let e = eq_groups[g].1.entry(h).or_insert(*seq);
                *e = (*e).max(*seq);
            }
        }
    }
    // The columns to read from data files: the identity's, then the equality
    // deletes'.
    let mut need: Vec<usize> = cols.to_vec();
    for (g, _) in &eq_groups {
        for i in g {
            if !need.contains(i) {
                need.push(*i);
            }
        }
    }
    let need_ids: Vec<i32> = need
        .iter()
        .map(|i| schema.as_struct().fields()[*i].id)
        .collect();
    let target = Arc::new(Schema::new(
        need.iter()
            .map(|i| arrow.field(*i).clone())
            .collect::<Vec<_>>(),
    ));
    let id_cols: Vec<usize> = (0..cols.len()).collect();
    let eq_cols: Vec<Vec<usize>> = eq_groups
        .iter()
        .map(|(g, _)| {
            g.iter()
                .map(|i| need.iter().position(|n| n == i).expect("needed"))
                .collect()
        })
        .collect();
    let mut inserted: u64 = 0;
    for (path, seq, partition, spec_id) in data {
        let deleted = gone.remove(&path).unwrap_or_default();
        let f = index.file_id(FileSlot {
            path: path.clone(),
            partition,
            spec_id,
        });
        let mut pos: u64 = 0;
        for b in read_columns(file_io, &path, &need_ids, &target).await? {
            for r in 0..b.num_rows() {
                let p = pos;
                pos += 1;
                if deleted.binary_search(&(p as i64)).is_ok() {
                    continue;
                }
                let removed = eq_groups.iter().zip(&eq_cols).any(|((_, keys), c)| {
                    keys.get(&identity(&b, c, r, &mut buf))
                        .is_some_and(|s| *s > seq)
                });
                if removed {
                    continue;
                }
                let h = identity(&b, &id_cols, r, &mut buf);
                index.insert(h, loc(f, p));
                inserted += 1;
                if inserted.is_multiple_of(65_536) {
                    index.spill_past(spill)?;
                }
            }
        }
    }
    index.spill_past(spill)?;
    index.recount();
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(p: &str) -> FileSlot {
        FileSlot {
            path: p.to_owned(),
            partition: Struct::empty(),
            spec_id: 0,
        }
    }

    #[test]
    fn identical_rows_are_located_one_at_a_time() {
        let mut ix = RowIndex::empty((None, 0));
        ix.apply(
            Delta {
                removed: vec![],
                added: vec![(slot("a"), vec![7, 7, 8])],
            },
            false,
            (Some(1), 0),
        )
        .unwrap();
        assert_eq!(ix.len(), 3);
        let (first, second) = (
            ix.nth(7, 0).unwrap().unwrap(),
            ix.nth(7, 1).unwrap().unwrap(),
        );
        assert_ne!(first, second);
        assert_eq!(ix.nth(7, 2).unwrap(), None);
        ix.apply(
            Delta {
                removed: vec![(7, second)],
                added: vec![],
            },
            false,
            (Some(2), 0),
        )
        .unwrap();
        assert_eq!(ix.len(), 2);
        assert_eq!(ix.nth(7, 0).unwrap(), Some(first));
        assert_eq!(ix.nth(7, 1).unwrap(), None);
        ix.apply(
            Delta {
                removed: vec![(7, first)],
                added: vec![(slot("b"), vec![9])],
            },
            false,
            (Some(3), 0),
        )
        .unwrap();
        assert_eq!(ix.nth(7, 0).unwrap(), None);
        assert_eq!(ix.file(ix.nth(9, 0).unwrap().unwrap()).path, "b");
        assert_eq!(loc_pos(ix.nth(8, 0).unwrap().unwrap()), 2);
        assert_eq!(ix.at, (Some(3), 0));
    }

    #[test]
    fn deletes_locate_a_key_once_and_identical_rows_one_each() {
        let mut ix = RowIndex::empty((None, 0));
        ix.apply(
            Delta {
                removed: vec![],
                added: vec![(slot("a"), vec![1, 2, 2, 2]), (slot("b"), vec![3])],
            },
            false,
            (Some(1), 0),
        )
        .unwrap();
        assert!(ix.bytes() > 0);
        // Keyed: a key deleted twice is one delete; a new row of a key still held
        // (3) deletes the old one; unknown keys (9) delete nothing; a key both
        // deleted and written (1: an upsert) is one delete.
        let keyed = ix.locate_deletes(true, [1, 1, 9], [3, 9, 1]).unwrap();
        let mut got: Vec<(u128, i64)> = keyed.iter().map(|(h, l)| (*h, loc_pos(*l))).collect();
        got.sort();
        assert_eq!(got, [(1, 0), (3, 0)]);
        // Keyless: two of three identical rows, two different positions; a third
        // delete of a row the table does not hold more of finds nothing.
        let keyless = ix.locate_deletes(false, [2, 2], []).unwrap();
        assert_eq!(keyless.len(), 2);
        assert_ne!(keyless[0].1, keyless[1].1);
        assert_eq!(ix.locate_deletes(false, [2, 2, 2, 2], []).unwrap().len(), 3);
        // Grouped per partition, each file's positions with its path.
        let groups = ix.by_partition(&keyed);
        assert_eq!(groups.len(), 1);
        let mut rows = groups[0].2.clone();
        rows.sort();
        assert_eq!(rows, [("a".to_owned(), 0), ("b".to_owned(), 0)]);
    }

    #[test]
    fn a_replacing_commit_forgets_older_rows() {
        let mut ix = RowIndex::empty((None, 0));
        ix.apply(
            Delta {
                removed: vec![],
                added: vec![(slot("a"), vec![1, 2])],
            },
            false,
            (Some(1), 0),
        )
        .unwrap();
        ix.apply(
            Delta {
                removed: vec![],
                added: vec![(slot("b"), vec![2])],
            },
            true,
            (Some(2), 0),
        )
        .unwrap();
        assert_eq!(ix.len(), 1);
        assert_eq!(ix.nth(1, 0).unwrap(), None);
        assert_eq!(ix.file(ix.nth(2, 0).unwrap().unwrap()).path, "b");
    }

    /// Delta of `added` rows into file `f`, removing `removed`.
    fn delta(removed: Vec<(u128, Loc)>, f: &str, added: Vec<u128>) -> Delta {
        Delta {
            removed,
            added: vec![(slot(f), added)],
        }
    }

    #[test]
    fn a_spilled_index_finds_its_rows_on_disk_and_in_memory_alike() {
        let dir = tempfile::tempdir().unwrap();
        let spill_dir = dir.path().join("spill");
        let mut ix = RowIndex::empty((None, 0));
        // Keyed rows 0..5000 and three identical keyless rows (identity 1 << 100).
        let dup = 1u128 << 100;
        let mut ids: Vec<u128> = (0..5000).collect();
        ids.extend([dup, dup, dup]);
        ix.apply(delta(vec![], "a", ids), false, (Some(1), 0))
            .unwrap();
        let before = ix.bytes();
        ix.spill(&spill_dir).unwrap();
        assert_eq!((ix.len(), ix.spilled(), ix.in_memory()), (5003, 5003, 0));
        assert!(ix.bytes() < before + SPILL_CACHE, "memory given back");
        assert_eq!(std::fs::read_dir(&spill_dir).unwrap().count(), 1);
        // New rows in memory, beside the spilled ones.
        ix.apply(
            delta(vec![], "b", vec![7000, 7001, dup]),
            false,
            (Some(2), 0),
        )
        .unwrap();
        assert_eq!((ix.len(), ix.in_memory()), (5006, 3));
        // Every row is found where it is, identical rows one location each.
        assert_eq!(loc_pos(ix.nth(4321, 0).unwrap().unwrap()), 4321);
        assert_eq!(ix.file(ix.nth(7001, 0).unwrap().unwrap()).path, "b");
        let dups = ix
            .locate_deletes(false, [dup, dup, dup, dup, dup], [])
            .unwrap();
        assert_eq!(dups.len(), 4, "three on disk, one in memory");
        let mut distinct = dups.iter().map(|(_, l)| *l).collect::<Vec<_>>();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 4);
        // Deletes of rows on disk and in memory, in one commit.
        let keyed = ix.locate_deletes(true, [10, 7000, 99_999], [20]).unwrap();
        assert_eq!(
            keyed.len(),
            3,
            "10, 7000 and the row key 20's new row replaces"
        );
        let mut removed = keyed;
        removed.extend(dups[..2].iter().copied());
        ix.apply(delta(removed, "c", vec![20]), false, (Some(3), 0))
            .unwrap();
        assert_eq!(ix.len(), 5006 - 5 + 1);
        assert_eq!(ix.nth(10, 0).unwrap(), None);
        assert_eq!(ix.nth(7000, 0).unwrap(), None);
        assert_eq!(ix.file(ix.nth(20, 0).unwrap().unwrap()).path, "c");
        assert_eq!(ix.locate_deletes(false, [dup; 4], []).unwrap().len(), 2);
        // Written out: every location, from memory and from disk.
        let mut bytes = Vec::new();
        ix.write_to(&mut bytes).unwrap();
        let mut all: Vec<(u128, Loc)> = Vec::new();
        let look = ix.lookup().unwrap();
        for h in (0..8000).chain([dup]) {
            let mut n = 0;
            while let Some(l) = look.nth(h, n).unwrap() {
                all.push((h, l));
                n += 1;
            }
        }
        drop(look);
        assert_eq!(all.len(), ix.len());
        // The written index: magic, header, count, then each location once.
        assert_eq!(&bytes[..8], MAGIC);
        let header = u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize;
        let at = 16 + header;
        let count = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
        assert_eq!(count, ix.len());
        assert_eq!(bytes.len(), at + 8 + count * 24);
        let mut written: Vec<(u128, Loc)> = bytes[at + 8..]
            .chunks(24)
            .map(|c| {
                (
                    u128::from_le_bytes(c[..16].try_into().unwrap()),
                    u64::from_le_bytes(c[16..].try_into().unwrap()),
                )
            })
            .collect();
        written.sort();
        all.sort();
        assert_eq!(written, all);
        // Dropping the index removes its file.
        drop(ix);
        assert_eq!(std::fs::read_dir(&spill_dir).unwrap().count(), 0);
    }
}
