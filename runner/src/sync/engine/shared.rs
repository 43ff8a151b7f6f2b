//! The job's state folder mirrored into an object-store warehouse, so that another
//! host can take the job over: at every checkpoint, once the checkpoint record and its
//! pending file lists are durable locally and before any table commits, the state
//! files that changed go to `<warehouse>/_lakeshift/<job>/files/<path>@<hash>` (each
//! version an object of its own) and then a manifest naming every file and its hash
//! replaces the old one; a new host whose state folder has no
//! checkpoint record reads them back before it starts. The mirror is therefore never
//! behind the catalog's record of the job (which refuses an older state), and the new
//! host completes or repeats the last checkpoint exactly as a restart on the old one
//! would. The catalog's lease decides which host runs the job.
//!
//! Left local: the row indexes (rebuilt from the tables), the PostgreSQL source's
//! spill files of streamed transactions (sent again by the server), the dead-letter
//! file.

use crate::iceberg::Catalog;
use crate::sync::error::SyncError;
use iceberg::io::FileIO;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const MANIFEST: &str = "manifest.json";
/// Entries of the state folder that stay on the host: the row indexes, the
/// PostgreSQL source's spill files (`source/streamed`), the dead-letter file.
const PRIVATE: &[&str] = &["index", "source/streamed", "dead-letter.jsonl", PULLED];
/// Marks a state folder read from the mirror that has not yet claimed the job (a
/// first try refused by the lease of a run that is gone keeps the right to resume).
pub(super) const PULLED: &str = "pulled-from-warehouse";

pub(super) struct Shared {
    io: FileIO,
    /// `<warehouse>/_lakeshift/<job>`.
    base: String,
    /// Relative path -> hash of what the mirror holds.
    sent: BTreeMap<String, String>,
}

fn hash(bytes: &[u8]) -> String {
    format!("{:032x}", twox_hash::XxHash3_128::oneshot(bytes))
}

/// Every shared file of the state folder: relative path (with `/`) -> absolute path.
fn files(dir: &Path) -> BTreeMap<String, PathBuf> {
    fn walk(root: &Path, d: &Path, out: &mut BTreeMap<String, PathBuf>) {
        let Ok(rd) = std::fs::read_dir(d) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            let rel = p
                .strip_prefix(root)
                .expect("under the root")
                .to_string_lossy()
                .replace('\\', "/");
            if PRIVATE.contains(&rel.as_str()) {
                continue;
            }
            // (Temporary files of an atomic replace are not state.)
            if rel.ends_with(".tmp") {
                continue;
            }
            match e.file_type() {
                Ok(t) if t.is_dir() => walk(root, &p, out),
                Ok(t) if t.is_file() => {
                    out.insert(rel, p);
                }
                _ => {}
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

impl Shared {
    /// The mirror of job `job`, for warehouses in object storage (None: a local
    /// warehouse, whose host keeps the state folder).
    pub fn for_job(catalog: &Catalog, job: &str) -> Option<Shared> {
        let wh = catalog.warehouse();
        if wh.starts_with("file:") {
            return None;
        }
        Some(Shared {
            io: catalog.file_io.clone(),
            base: format!("{}/_lakeshift/{job}", wh.trim_end_matches('/')),
            sent: BTreeMap::new(),
        })
    }

    /// The object holding version `h` of file `rel`: versions are objects of their
    /// own, so a push cut short leaves the manifest before it whole (the objects it
    /// names are deleted only once a newer manifest is in place).
    fn object(&self, rel: &str, h: &str) -> String {
        format!("{}/files/{rel}@{h}", self.base)
    }

    /// An error of the shared state's object store: transient when the store did
    /// not answer.
    fn err(&self, what: &str, e: impl std::error::Error + 'static) -> SyncError {
        SyncError::caused(
            format_args!("the job's shared state at {}: {what}", self.base),
            &e,
        )
    }

    async fn manifest(&self) -> Result<Option<BTreeMap<String, String>>, SyncError> {
        let path = format!("{}/{MANIFEST}", self.base);
        if !self
            .io
            .exists(&path)
            .await
            .map_err(|e| self.err("reading", e))?
        {
            return Ok(None);
        }
        let bytes = self
            .io
            .new_input(&path)
            .map_err(|e| self.err("reading", e))?
            .read()
            .await
            .map_err(|e| self.err("reading", e))?;
        Ok(Some(
            serde_json::from_slice(&bytes).map_err(|e| self.err(MANIFEST, e))?,
        ))
    }

    /// A state folder without a checkpoint record takes the mirror's files (another
    /// host ran the job). Returns how many files were read.
    pub async fn pull(&mut self, dir: &Path) -> Result<usize, SyncError> {
        let Some(manifest) = self.manifest().await? else {
            return Ok(0);
        };
        for (rel, h) in &manifest {
            let bytes = self
                .io
                .new_input(self.object(rel, h))
                .map_err(|e| self.err(rel, e))?
                .read()
                .await
                .map_err(|e| self.err(rel, e))?;
            if hash(&bytes) != *h {
                return Err(format!(
                    "the job's shared state at {}: {rel}: its content does not match the manifest",
                    self.base
                )
                .into());
            }
            let p = dir.join(rel);
            if let Some(d) = p.parent() {
                std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
            }
            crate::durable::replace(&p, &bytes).map_err(|e| format!("{}: {e}", p.display()))?;
        }
        self.sent = manifest;
        Ok(self.sent.len())
    }

    /// Mirror the state folder: changed files, then the manifest, then files gone
    /// from it are deleted.
    pub async fn push(&mut self, dir: &Path) -> Result<(), SyncError> {
        let mut now = BTreeMap::new();
        for (rel, p) in files(dir) {
            let bytes = match std::fs::read(&p) {
                Ok(b) => b,
                // Removed while listed (an older pending file): not state any more.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(format!("{}: {e}", p.display()).into()),
            };
            let h = hash(&bytes);
            if self.sent.get(&rel) != Some(&h) {
                let w = self
                    .io
                    .new_output(self.object(&rel, &h))
                    .map_err(|e| self.err(&rel, e))?;
                w.write(bytes.into()).await.map_err(|e| self.err(&rel, e))?;
            }
            now.insert(rel, h);
        }
        crate::failpoint::hit("shared-before-manifest");
        let manifest = serde_json::to_vec(&now).expect("serialises");
        self.io
            .new_output(format!("{}/{MANIFEST}", self.base))
            .map_err(|e| self.err(MANIFEST, e))?
            .write(manifest.into())
            .await
            .map_err(|e| self.err(MANIFEST, e))?;
        // The objects only the old manifest named (best effort: one left behind is
        // named by no manifest).
        for (rel, h) in &self.sent {
            if now.get(rel) != Some(h) {
                let _ = self.io.delete(self.object(rel, h)).await;
            }
        }
        self.sent = now;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_files_stay_out_of_the_mirror() {
        let d = tempfile::tempdir().unwrap();
        for f in [
            "checkpoint.json",
            "pending/3-shop.t.avro",
            "source/history.json",
            "source/streamed/77.bin",
            "index/shop.t.idx",
            "dead-letter.jsonl",
            "ddl-log.json.tmp",
        ] {
            let p = d.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b"x").unwrap();
        }
        let got: Vec<String> = files(d.path()).into_keys().collect();
        assert_eq!(
            got,
            [
                "checkpoint.json",
                "pending/3-shop.t.avro",
                "source/history.json"
            ]
        );
    }
}
