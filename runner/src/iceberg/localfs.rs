//! A local warehouse's files, written as the iceberg crate's local storage writes them
//! but made durable in batches.
//!
//! The crate's local storage syncs every file a writer closes (data files, manifests,
//! manifest lists) one at a time and never syncs a file written whole (metadata
//! JSON). Here no write syncs; each file written is remembered, and [`Unsynced::barrier`]
//! makes every remembered file durable before anything names it: the catalog's swap
//! or insert of a metadata location, a checkpoint's stored state. A few files are
//! synced one by one; many (a checkpoint of thousands of tables) by one `syncfs` of
//! their filesystem, which writes them out together: on this project's test machines
//! one `syncfs` after 2,000 small files cost a sixth of syncing each.

use bytes::Bytes;
use futures::stream::BoxStream;
use iceberg::io::{
    FileMetadata, FileRead, FileWrite, InputFile, LocalFsStorage, OutputFile, Storage,
    StorageConfig, StorageFactory,
};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Files written and not yet synced, and folders made for them.
#[derive(Debug, Default)]
pub struct Unsynced {
    pending: Mutex<Pending>,
    /// Held through a barrier: a barrier that finds nothing left waits for one that
    /// took its files to finish syncing them.
    syncing: tokio::sync::Mutex<()>,
}

#[derive(Debug, Default)]
struct Pending {
    files: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
}

/// Up to this many files (and folders) are synced one by one; more by one `syncfs`.
const SYNC_EACH_AT_MOST: usize = 8;

impl Unsynced {
    fn written(&self, path: PathBuf) {
        self.pending.lock().expect("not poisoned").files.push(path);
    }

    fn made_dir(&self, path: PathBuf) {
        self.pending.lock().expect("not poisoned").dirs.push(path);
    }

    /// Files written since the last barrier (for tests).
    pub fn waiting(&self) -> usize {
        let p = self.pending.lock().expect("not poisoned");
        p.files.len() + p.dirs.len()
    }

    /// Make every file written so far durable (with the folders made for them).
    pub async fn barrier(&self) -> std::io::Result<()> {
        let _one = self.syncing.lock().await;
        let taken = std::mem::take(&mut *self.pending.lock().expect("not poisoned"));
        if taken.files.is_empty() && taken.dirs.is_empty() {
            return Ok(());
        }
        tokio::task::spawn_blocking(move || sync_paths(taken))
            .await
            .map_err(std::io::Error::other)?
    }
}

fn sync_paths(p: Pending) -> std::io::Result<()> {
    let all = p.files.iter().chain(&p.dirs);
    if p.files.len() + p.dirs.len() > SYNC_EACH_AT_MOST && sync_filesystems(all.clone())? {
        return Ok(());
    }
    for path in all {
        match std::fs::File::open(path) {
            Ok(f) => f.sync_all()?,
            // Removed since (a failed commit's files): nothing to keep.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One `syncfs` per filesystem the paths are on. False where the system has none.
#[cfg(target_os = "linux")]
fn sync_filesystems<'a>(paths: impl Iterator<Item = &'a PathBuf>) -> std::io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let mut devices = std::collections::HashSet::new();
    for path in paths {
        let f = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if devices.insert(f.metadata()?.dev()) {
            rustix::fs::syncfs(&f)?;
        }
    }
    Ok(true)
}

#[cfg(not(target_os = "linux"))]
fn sync_filesystems<'a>(_: impl Iterator<Item = &'a PathBuf>) -> std::io::Result<bool> {
    Ok(false)
}

/// Makes [`LocalFiles`] sharing one [`Unsynced`].
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct LocalFilesFactory {
    #[serde(skip)]
    pub unsynced: Arc<Unsynced>,
}

#[typetag::serde(name = "LakeshiftLocalFiles")]
impl StorageFactory for LocalFilesFactory {
    fn build(&self, _config: &StorageConfig) -> iceberg::Result<Arc<dyn Storage>> {
        Ok(Arc::new(LocalFiles {
            unsynced: self.unsynced.clone(),
        }))
    }
}

/// Local files: reads and deletes as the iceberg crate's local storage does them;
/// writes remembered for the next barrier instead of synced.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct LocalFiles {
    #[serde(skip)]
    unsynced: Arc<Unsynced>,
}

fn path_of(location: &str) -> PathBuf {
    super::catalog::local_path(location).unwrap_or_else(|| PathBuf::from(location))
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> iceberg::Error {
    iceberg::Error::new(
        iceberg::ErrorKind::Unexpected,
        format!("{what} {}: {e}", path.display()),
    )
}

impl LocalFiles {
    /// The folder of a file to be written, made (and remembered) where missing.
    fn parent_made(&self, path: &Path) -> iceberg::Result<()> {
        let Some(parent) = path.parent() else {
            return Ok(());
        };
        if parent.is_dir() {
            return Ok(());
        }
        // The folders about to be made, outermost last: each one's entry lives in
        // the folder above it, which must be synced too.
        let mut made = Vec::new();
        let mut at = Some(parent);
        while let Some(p) = at.filter(|p| !p.exists()) {
            made.push(p.to_path_buf());
            at = p.parent();
        }
        std::fs::create_dir_all(parent).map_err(|e| io_error("cannot create", parent, e))?;
        for d in made {
            if let Some(up) = d.parent() {
                self.unsynced.made_dir(up.to_path_buf());
            }
        }
        Ok(())
    }
}

#[async_trait::async_trait]
#[typetag::serde(name = "LakeshiftLocalFiles")]
impl Storage for LocalFiles {
    async fn exists(&self, path: &str) -> iceberg::Result<bool> {
        LocalFsStorage.exists(path).await
    }

    async fn metadata(&self, path: &str) -> iceberg::Result<FileMetadata> {
        LocalFsStorage.metadata(path).await
    }

    async fn read(&self, path: &str) -> iceberg::Result<Bytes> {
        LocalFsStorage.read(path).await
    }

    async fn reader(&self, path: &str) -> iceberg::Result<Box<dyn FileRead>> {
        LocalFsStorage.reader(path).await
    }

    async fn write(&self, location: &str, bs: Bytes) -> iceberg::Result<()> {
        let path = path_of(location);
        self.parent_made(&path)?;
        std::fs::write(&path, &bs).map_err(|e| io_error("cannot write", &path, e))?;
        self.unsynced.written(path);
        Ok(())
    }

    async fn writer(&self, location: &str) -> iceberg::Result<Box<dyn FileWrite>> {
        let path = path_of(location);
        self.parent_made(&path)?;
        let file = std::fs::File::create(&path).map_err(|e| io_error("cannot create", &path, e))?;
        Ok(Box::new(LocalWrite {
            file: Some(std::io::BufWriter::with_capacity(256 * 1024, file)),
            path,
            unsynced: self.unsynced.clone(),
        }))
    }

    async fn delete(&self, path: &str) -> iceberg::Result<()> {
        LocalFsStorage.delete(path).await
    }

    async fn delete_prefix(&self, path: &str) -> iceberg::Result<()> {
        LocalFsStorage.delete_prefix(path).await
    }

    async fn delete_stream(&self, paths: BoxStream<'static, String>) -> iceberg::Result<()> {
        LocalFsStorage.delete_stream(paths).await
    }

    fn new_input(&self, path: &str) -> iceberg::Result<InputFile> {
        Ok(InputFile::new(Arc::new(self.clone()), path.to_owned()))
    }

    fn new_output(&self, path: &str) -> iceberg::Result<OutputFile> {
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_owned()))
    }
}

/// A file being written; remembered for the next barrier when closed.
struct LocalWrite {
    file: Option<std::io::BufWriter<std::fs::File>>,
    path: PathBuf,
    unsynced: Arc<Unsynced>,
}

#[async_trait::async_trait]
impl FileWrite for LocalWrite {
    async fn write(&mut self, bs: Bytes) -> iceberg::Result<()> {
        let f = self.file.as_mut().ok_or_else(|| {
            iceberg::Error::new(iceberg::ErrorKind::Unexpected, "write after close")
        })?;
        f.write_all(&bs)
            .map_err(|e| io_error("cannot write", &self.path, e))
    }

    async fn close(&mut self) -> iceberg::Result<()> {
        let f = self
            .file
            .take()
            .ok_or_else(|| iceberg::Error::new(iceberg::ErrorKind::Unexpected, "closed twice"))?;
        f.into_inner()
            .map_err(|e| io_error("cannot write", &self.path, e.into_error()))?;
        self.unsynced.written(std::mem::take(&mut self.path));
        Ok(())
    }
}
