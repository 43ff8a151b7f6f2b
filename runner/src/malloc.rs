//! The C allocator's settings for a long-running sync.
//!
//! glibc gives threads that allocate at once heap arenas of their own (up to eight per
//! core) and keeps the memory freed in each for reuse: the rows of a huge source
//! transaction, long committed and freed, stayed in the process's resident memory,
//! spread over the runtime's threads' arenas (peak RSS grew with the transaction's
//! size, past `memory-budget-mib` plus the fixed overhead the README documents).
//! Two arenas serve the runtime's two workers; `MALLOC_ARENA_MAX`, when set, wins.

/// Limit glibc's heap arenas (before the runtime's threads start).
pub fn limit_arenas() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    set_arena_max(2);
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn set_arena_max(n: i32) {
    // SAFETY: mallopt only changes allocator parameters; it is called before any
    // other thread of this process exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, n);
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
