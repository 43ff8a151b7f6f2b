//! Durable files, written one way everywhere (job state, schema history, DDL log,
//! held changes, the captured-table list): a file is replaced whole or not at all, and
//! once `replace` returns it survives a crash of the process or the machine. The
//! steps: write a temporary file beside it, fsync it, rename it over the old file,
//! fsync the folder (so the rename itself is on disk).

use std::io::Write;
use std::path::{Path, PathBuf};

/// A named moment between the steps of [`replace_observed`], for crash tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The temporary file is written and fsynced; the old file is still in place.
    BeforeRename,
    /// The new file is in place; the folder entry may not be on disk yet.
    BeforeDirFsync,
}

/// The temporary file `replace` writes first: the file's name plus `.tmp`.
pub fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Replace `path` with `bytes`, durably.
pub fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    replace_observed(path, bytes, |_| {})
}

/// [`replace`], calling `at` between its steps.
pub fn replace_observed(path: &Path, bytes: &[u8], at: impl FnMut(Step)) -> std::io::Result<()> {
    replace_steps(path, |f| f.write_all(bytes), at)
}

/// Replace `path` with what `write` writes into it (buffered), durably.
pub fn replace_with<E: From<std::io::Error>>(
    path: &Path,
    write: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> Result<(), E>,
) -> Result<(), E> {
    replace_steps(path, write, |_| {})
}

/// The steps of every replace: write a temporary file, fsync it, rename it over
/// `path`, fsync the folder; `at` between them.
fn replace_steps<E: From<std::io::Error>>(
    path: &Path,
    write: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> Result<(), E>,
    mut at: impl FnMut(Step),
) -> Result<(), E> {
    let tmp = temp_path(path);
    let mut f = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
    write(&mut f)?;
    let f = f.into_inner().map_err(|e| e.into_error())?;
    f.sync_all()?;
    drop(f);
    at(Step::BeforeRename);
    std::fs::rename(&tmp, path)?;
    at(Step::BeforeDirFsync);
    Ok(fsync_dir(path.parent().unwrap_or(Path::new(".")))?)
}

/// Make a folder's entries (renames, removals, new files) durable.
pub fn fsync_dir(dir: &Path) -> std::io::Result<()> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    std::fs::File::open(dir)?.sync_all()
}

/// Append `line` and a newline to `path` (created if missing), durably.
pub fn append_line(path: &Path, line: &str) -> std::io::Result<()> {
    let created = !path.exists();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    writeln!(f, "{line}")?;
    f.sync_all()?;
    if created {
        fsync_dir(path.parent().unwrap_or(Path::new(".")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_leaves_the_new_content_and_no_temporary_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("state.json");
        replace(&p, b"one").unwrap();
        let mut seen = Vec::new();
        replace_observed(&p, b"two", |s| {
            seen.push(s);
            if s == Step::BeforeRename {
                // The old content is still what a crash here would leave.
                assert_eq!(std::fs::read(&p).unwrap(), b"one");
                assert_eq!(std::fs::read(temp_path(&p)).unwrap(), b"two");
            }
        })
        .unwrap();
        assert_eq!(seen, [Step::BeforeRename, Step::BeforeDirFsync]);
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert!(!temp_path(&p).exists());
        assert_eq!(temp_path(&p).file_name().unwrap(), "state.json.tmp");
    }

    #[test]
    fn errors_are_reported_not_swallowed() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("missing").join("state.json");
        assert!(replace(&p, b"x").is_err());
        let log = d.path().join("log.jsonl");
        append_line(&log, "a").unwrap();
        append_line(&log, "b").unwrap();
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "a\nb\n");
    }
}
