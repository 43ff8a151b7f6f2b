//! The C allocator's settings for a long-running sync.
//!
//! glibc gives threads that allocate at once heap arenas of their own (up to eight per
//! core) and keeps the memory freed in each for reuse: the rows of a huge source
//! transaction, long committed and freed, stayed in the process's resident memory,
//! spread over the runtime's threads' arenas (peak RSS grew with the transaction's
//! size, past `memory-budget-mib` plus the fixed overhead the README documents).
//! Two arenas serve the runtime's two workers; `MALLOC_ARENA_MAX`, when set, wins.
//!
//! glibc also raises its mmap threshold each time a large block is freed (up to
//! 32 MiB), so after the first checkpoint the rows' Arrow buffers come from the heap
//! and, freed, stay resident beside the next checkpoint's. A fixed threshold of
//! [`MMAP_FROM`] keeps every large buffer in a mapping of its own, unmapped when
//! freed (memory bench, 2M-row transaction at a 256 MiB budget: peak RSS 325-329 ->
//! 291-301 MiB above start into Iceberg, 280-299 -> 270-271 into PostgreSQL; about
//! 3% slower). `MALLOC_MMAP_THRESHOLD_`, when set, wins.

/// Blocks from this size on get a mapping of their own.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_FROM: i32 = 1 << 20;

/// Limit glibc's heap arenas and fix its mmap threshold (before the runtime's
/// threads start).
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
            set(libc::M_ARENA_MAX, 2);
        }
        if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
            set(libc::M_MMAP_THRESHOLD, MMAP_FROM);
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn set(param: i32, value: i32) {
    // SAFETY: mallopt only changes allocator parameters; it is called before any
    // other thread of this process exists.
    unsafe {
        libc::mallopt(param, value);
    }
}

/// Give the heap memory freed since the last call back to the system, at most once a
/// second: a checkpoint's rows, once committed and freed, otherwise stay resident
/// (glibc returns only what sits at the top of a heap), and the next checkpoint's
/// rows land beside them, so peak RSS grew with a transaction's size.
pub fn trim() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    use std::time::Instant;
    static START: OnceLock<Instant> = OnceLock::new();
    static LAST_MS: AtomicU64 = AtomicU64::new(0);
    let now = START.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1_000;
    let last = LAST_MS.load(Ordering::Relaxed);
    if now < last + 1_000
        || LAST_MS
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
    {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    trim_heap();
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn trim_heap() {
    // SAFETY: malloc_trim takes the allocator's locks itself; it frees only memory
    // no allocation holds.
    unsafe {
        libc::malloc_trim(0);
    }
}
