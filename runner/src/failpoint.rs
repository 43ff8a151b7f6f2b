//! Crash on purpose at a named durable step, for the recovery tests:
//! `LAKESHIFT_FAILPOINT=name[:n]` makes the process exit with status 86 the n-th time
//! (default the first) it reaches `name`. Without the variable this costs one
//! environment lookup per call, at checkpoint granularity.

use std::sync::atomic::{AtomicU32, Ordering};

pub const EXIT_CODE: i32 = 86;

/// Whether `LAKESHIFT_FAILPOINT` names `name` (for a failpoint that needs the code
/// before it to take a path a crash can leave behind, e.g. part of a commit landed).
pub fn armed(name: &str) -> bool {
    std::env::var("LAKESHIFT_FAILPOINT")
        .is_ok_and(|spec| spec.split_once(':').map_or(spec.as_str(), |(f, _)| f) == name)
}

pub fn hit(name: &str) {
    static HITS: AtomicU32 = AtomicU32::new(0);
    let Ok(spec) = std::env::var("LAKESHIFT_FAILPOINT") else {
        return;
    };
    let (fp, nth) = match spec.split_once(':') {
        Some((f, n)) => (f.to_owned(), n.parse::<u32>().unwrap_or(1)),
        None => (spec.clone(), 1),
    };
    if fp == name && HITS.fetch_add(1, Ordering::SeqCst) + 1 == nth {
        eprintln!("failpoint {name}: exiting");
        std::process::exit(EXIT_CODE);
    }
}

/// Wait at a named step while a test acts there (a DDL at a precise moment, say):
/// with `LAKESHIFT_PAUSE=name=FILE`, the process creates FILE the first time it
/// reaches `name` and goes on once FILE is removed (after 60 s at most). Without the
/// variable this costs one environment lookup.
pub async fn pause(name: &str) {
    static PAUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let Ok(spec) = std::env::var("LAKESHIFT_PAUSE") else {
        return;
    };
    let Some((step, file)) = spec.split_once('=') else {
        return;
    };
    if step != name || PAUSED.swap(true, Ordering::SeqCst) || std::fs::write(file, name).is_err() {
        return;
    }
    let path = std::path::Path::new(file);
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while path.exists() && std::time::Instant::now() < until {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
