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

use super::catalog::LoadedTable;
use super::{Error, Result};
use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{Field, Schema, SchemaRef};
use iceberg::io::FileIO;
use iceberg::spec::{DataContentType, ManifestContentType, ManifestList, Struct};
use parquet::arrow::arrow_reader::{ParquetRecordBatchReaderBuilder, RowSelection, RowSelector};
use parquet::arrow::ProjectionMask;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
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
    rows: Map<Loc>,
    /// Further locations of identical rows (keyless tables).
    more: Map<Vec<Loc>>,
    /// Heap bytes held, as of the last change (`bytes` is asked for every batch).
    held: usize,
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

    pub fn len(&self) -> usize {
        self.rows.len() + self.more.values().map(Vec::len).sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Heap bytes the index holds (counted in the job's memory budget).
    pub fn bytes(&self) -> usize {
        self.held
    }

    /// Count the heap bytes again (after a change).
    fn recount(&mut self) {
        // hashbrown: key, value and one control byte per bucket.
        self.held = self.rows.capacity() * (16 + 8 + 1)
            + self.more.capacity() * (16 + 24 + 1)
            + self.more.values().map(|v| v.capacity() * 8).sum::<usize>()
            + self.files.iter().map(|f| f.path.len() + 96).sum::<usize>()
            + self.by_path.capacity() * 40;
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
    ) -> Vec<(u128, Loc)> {
        let mut removed = Vec::new();
        let mut claimed: HashMap<u128, usize> = HashMap::new();
        for h in deleted {
            let n = claimed.entry(h).or_insert(0);
            if keyed && *n > 0 {
                continue;
            }
            if let Some(l) = self.nth(h, *n) {
                removed.push((h, l));
            }
            *n += 1;
        }
        if keyed {
            for h in written {
                if let std::collections::hash_map::Entry::Vacant(e) = claimed.entry(h) {
                    if let Some(l) = self.nth(h, 0) {
                        removed.push((h, l));
                        e.insert(1);
                    }
                }
            }
        }
        removed
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

    /// The `n`-th location of identity `h` (n > 0: identical rows of keyless tables).
    pub fn nth(&self, h: u128, n: usize) -> Option<Loc> {
        if n == 0 {
            self.rows.get(&h).copied()
        } else {
            self.more.get(&h).and_then(|v| v.get(n - 1)).copied()
        }
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
        match self.rows.entry(h) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(l);
            }
            std::collections::hash_map::Entry::Occupied(_) => {
                self.more.entry(h).or_default().push(l);
            }
        }
    }

    fn remove(&mut self, h: u128, l: Loc) {
        if self.rows.get(&h) == Some(&l) {
            match self.more.get_mut(&h) {
                Some(v) => {
                    let next = v.pop().expect("non-empty");
                    if v.is_empty() {
                        self.more.remove(&h);
                    }
                    self.rows.insert(h, next);
                }
                None => {
                    self.rows.remove(&h);
                }
            }
        } else if let Some(v) = self.more.get_mut(&h) {
            if let Some(i) = v.iter().position(|x| *x == l) {
                v.swap_remove(i);
            }
            if v.is_empty() {
                self.more.remove(&h);
            }
        }
    }

    /// Apply a commit's change; the index then describes `at`. With `replace`, the
    /// commit removed every older row.
    pub fn apply(&mut self, delta: Delta, replace: bool, at: (Option<i64>, i32)) {
        if replace {
            *self = RowIndex::empty(at);
        }
        for (h, l) in delta.removed {
            self.remove(h, l);
        }
        for (slot, ids) in delta.added {
            let f = self.file_id(slot);
            for (pos, h) in ids.into_iter().enumerate() {
                self.insert(h, loc(f, pos as u64));
            }
        }
        self.at = at;
        self.recount();
    }
}

const MAGIC: &[u8; 8] = b"LSRIX01\n";

impl RowIndex {
    /// The index as bytes: a header (snapshot, schema, data files), then the
    /// locations. (Partitions are not stored: `load` takes them from the manifests.)
    pub fn to_bytes(&self) -> Vec<u8> {
        let header = serde_json::json!({
            "snapshot": self.at.0,
            "schema": self.at.1,
            "files": self.files.iter().map(|f| (&f.path, f.spec_id)).collect::<Vec<_>>(),
        })
        .to_string();
        let mut out = Vec::with_capacity(64 + header.len() + self.rows.len() * 24);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(header.len() as u64).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(&(self.rows.len() as u64).to_le_bytes());
        for (h, l) in &self.rows {
            out.extend_from_slice(&h.to_le_bytes());
            out.extend_from_slice(&l.to_le_bytes());
        }
        out.extend_from_slice(&(self.more.len() as u64).to_le_bytes());
        for (h, v) in &self.more {
            out.extend_from_slice(&h.to_le_bytes());
            out.extend_from_slice(&(v.len() as u64).to_le_bytes());
            for l in v {
                out.extend_from_slice(&l.to_le_bytes());
            }
        }
        out
    }

    /// An index stored by `to_bytes`, if it describes the table as it is now (its
    /// snapshot and schema); None otherwise, or when the bytes are not an index.
    pub async fn load(bytes: &[u8], file_io: &FileIO, t: &LoadedTable) -> Result<Option<RowIndex>> {
        struct Cursor<'a>(&'a [u8]);
        impl Cursor<'_> {
            fn take(&mut self, n: usize) -> Option<&[u8]> {
                (self.0.len() >= n).then(|| {
                    let (a, b) = self.0.split_at(n);
                    self.0 = b;
                    a
                })
            }
            fn u64(&mut self) -> Option<u64> {
                Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
            }
            fn u128(&mut self) -> Option<u128> {
                Some(u128::from_le_bytes(self.take(16)?.try_into().ok()?))
            }
        }
        #[derive(serde::Deserialize)]
        struct Header {
            snapshot: Option<i64>,
            schema: i32,
            files: Vec<(String, i32)>,
        }
        let mut c = Cursor(bytes);
        if c.take(MAGIC.len()) != Some(MAGIC.as_slice()) {
            return Ok(None);
        }
        let Some(header) = c
            .u64()
            .and_then(|n| c.take(n as usize))
            .and_then(|h| serde_json::from_slice::<Header>(h).ok())
        else {
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
        let read = |c: &mut Cursor<'_>, ix: &mut RowIndex| -> Option<()> {
            let n = c.u64()?;
            ix.rows.reserve(n as usize);
            for _ in 0..n {
                let h = c.u128()?;
                ix.rows.insert(h, c.u64()?);
            }
            for _ in 0..c.u64()? {
                let h = c.u128()?;
                let k = c.u64()? as usize;
                let mut v = Vec::with_capacity(k.min(c.0.len() / 8));
                for _ in 0..k {
                    v.push(c.u64()?);
                }
                ix.more.insert(h, v);
            }
            c.0.is_empty().then_some(())
        };
        Ok(read(&mut c, &mut ix).map(|_| {
            ix.recount();
            ix
        }))
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
pub async fn build(file_io: &FileIO, t: &LoadedTable, cols: &[usize]) -> Result<RowIndex> {
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
            }
        }
    }
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
        );
        assert_eq!(ix.len(), 3);
        let (first, second) = (ix.nth(7, 0).unwrap(), ix.nth(7, 1).unwrap());
        assert_ne!(first, second);
        assert_eq!(ix.nth(7, 2), None);
        ix.apply(
            Delta {
                removed: vec![(7, second)],
                added: vec![],
            },
            false,
            (Some(2), 0),
        );
        assert_eq!(ix.len(), 2);
        assert_eq!(ix.nth(7, 0), Some(first));
        assert_eq!(ix.nth(7, 1), None);
        ix.apply(
            Delta {
                removed: vec![(7, first)],
                added: vec![(slot("b"), vec![9])],
            },
            false,
            (Some(3), 0),
        );
        assert_eq!(ix.nth(7, 0), None);
        assert_eq!(ix.file(ix.nth(9, 0).unwrap()).path, "b");
        assert_eq!(loc_pos(ix.nth(8, 0).unwrap()), 2);
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
        );
        assert!(ix.bytes() > 0);
        // Keyed: a key deleted twice is one delete; a new row of a key still held
        // (3) deletes the old one; unknown keys (9) delete nothing.
        let keyed = ix.locate_deletes(true, [1, 1, 9], [3, 9]);
        let mut got: Vec<(u128, i64)> = keyed.iter().map(|(h, l)| (*h, loc_pos(*l))).collect();
        got.sort();
        assert_eq!(got, [(1, 0), (3, 0)]);
        // Keyless: two of three identical rows, two different positions; a third
        // delete of a row the table does not hold more of finds nothing.
        let keyless = ix.locate_deletes(false, [2, 2], []);
        assert_eq!(keyless.len(), 2);
        assert_ne!(keyless[0].1, keyless[1].1);
        assert_eq!(ix.locate_deletes(false, [2, 2, 2, 2], []).len(), 3);
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
        );
        ix.apply(
            Delta {
                removed: vec![],
                added: vec![(slot("b"), vec![2])],
            },
            true,
            (Some(2), 0),
        );
        assert_eq!(ix.len(), 1);
        assert_eq!(ix.nth(1, 0), None);
        assert_eq!(ix.file(ix.nth(2, 0).unwrap()).path, "b");
    }
}
