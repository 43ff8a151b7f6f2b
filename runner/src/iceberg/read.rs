//! The job's own reads of its tables (maintenance's rewrite, the fill of a column
//! added with a default): the iceberg crate's reader, one data file at a time, asked
//! per file only for the columns that file holds.
//!
//! A column added after a data file was written is missing from that file; the
//! crate's reader (0.10.1) makes such a column of nulls for some types only and
//! stops on the others ("unexpected target column type FixedSizeBinary(16)": uuid,
//! binary, fixed, time, nested). Each batch read here therefore holds its file's
//! columns of the projection and leaves the rest out; the callers give every
//! column they lack its nulls (or its default).

use super::Result;
use iceberg::arrow::ArrowReaderBuilder;
use iceberg::io::FileIO;
use iceberg::scan::{ArrowRecordBatchStream, FileScanTask};
use iceberg::spec::DataFileFormat;
use std::collections::HashSet;

/// Parquet's footer: the metadata's length (4 bytes) and the magic `PAR1`.
const FOOTER: u64 = 8;

/// The top-level field ids a Parquet data file holds; None when it carries none (a
/// file written without ids, read through a name mapping).
async fn file_field_ids(io: &FileIO, path: &str, size: u64) -> Result<Option<HashSet<i32>>> {
    let invalid = |why: String| super::Error::Invalid(format!("{path}: {why}"));
    if size < 2 * FOOTER {
        return Err(invalid(format!(
            "{size} bytes is too short for a Parquet file"
        )));
    }
    let r = io.new_input(path)?.reader().await?;
    let tail = r.read(size - FOOTER..size).await?;
    let tail: &[u8; FOOTER as usize] = tail
        .as_ref()
        .try_into()
        .map_err(|_| invalid("a short read of its footer".into()))?;
    let footer =
        parquet::file::metadata::FooterTail::try_new(tail).map_err(|e| invalid(e.to_string()))?;
    let len = footer.metadata_length() as u64;
    if len + FOOTER > size {
        return Err(invalid(format!("its footer names {len} bytes of metadata")));
    }
    let meta = r.read(size - FOOTER - len..size - FOOTER).await?;
    let meta = parquet::file::metadata::ParquetMetaDataReader::decode_metadata(&meta)
        .map_err(|e| invalid(e.to_string()))?;
    let fields = meta
        .file_metadata()
        .schema_descr()
        .root_schema()
        .get_fields();
    let ids: HashSet<i32> = fields
        .iter()
        .map(|f| f.get_basic_info())
        .filter(|b| b.has_id())
        .map(|b| b.id())
        .collect();
    Ok((!ids.is_empty()).then_some(ids))
}

/// `tasks` read one data file at a time, their deletes applied; each task asks only
/// for the projected columns its data file holds (see the module's note).
pub async fn read_tasks(io: &FileIO, tasks: Vec<FileScanTask>) -> Result<ArrowRecordBatchStream> {
    let mut asked = Vec::with_capacity(tasks.len());
    for mut task in tasks {
        if task.data_file_format == DataFileFormat::Parquet {
            let held = file_field_ids(io, &task.data_file_path, task.file_size_in_bytes).await?;
            if let Some(held) = held {
                let kept: Vec<i32> = task
                    .project_field_ids
                    .iter()
                    .copied()
                    .filter(|id| held.contains(id))
                    .collect();
                // (A file holding none of them keeps the whole projection: its rows
                // still count, and the crate makes what nulls it can.)
                if !kept.is_empty() {
                    task.project_field_ids = kept;
                }
            }
        }
        asked.push(Ok(task));
    }
    Ok(
        ArrowReaderBuilder::new(io.clone(), iceberg::Runtime::try_current()?)
            .with_data_file_concurrency_limit(1)
            .build()
            .read(Box::pin(futures::stream::iter(asked)))?
            .stream(),
    )
}
