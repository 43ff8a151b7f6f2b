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
