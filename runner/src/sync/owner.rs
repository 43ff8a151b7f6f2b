//! One process per job and state folder: an exclusive lock on `<state>/lock`, held
//! while the process runs (the operating system releases it when the process ends,
//! a crash included). A second process of the job is refused before it writes
//! anything.

use super::error::SyncError;
use std::io::Write;
use std::path::Path;

/// The lock of a job's state folder; released when dropped.
#[derive(Debug)]
pub struct JobLock {
    _file: std::fs::File,
}

/// Take the state folder's lock, or say which process holds it.
pub fn lock(state: &Path, job: &str) -> Result<JobLock, SyncError> {
    std::fs::create_dir_all(state).map_err(|e| format!("state folder {}: {e}", state.display()))?;
    let path = state.join("lock");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let holder = std::fs::read_to_string(&path).unwrap_or_default();
            return Err(SyncError::fenced(format!(
                "job `{job}` is already running with the state folder {} ({}); one process per job",
                state.display(),
                holder.trim()
            )));
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(format!("locking {}: {e}", path.display()).into())
        }
    }
    // Who holds it, for the message a second process prints.
    file.set_len(0)
        .and_then(|_| write!(file, "process {}", std::process::id()))
        .and_then(|_| file.flush())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(JobLock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_is_gone() {
        let d = tempfile::tempdir().unwrap();
        let first = lock(d.path(), "j").unwrap();
        let e = lock(d.path(), "j").unwrap_err();
        assert_eq!(e.kind, super::super::error::ErrorKind::Fenced);
        assert!(
            e.message.contains("already running")
                && e.message.contains(&std::process::id().to_string()),
            "{}",
            e.message
        );
        drop(first);
        lock(d.path(), "j").unwrap();
    }
}
