//! The lakeshift runner: the Iceberg target (catalog, commit layer, writers) and the
//! commands built on it. The `lakeshift` binary (`main.rs`) only parses arguments.

#[cfg(feature = "sync")]
pub mod apply;
#[cfg(feature = "sync")]
pub mod calendar;
#[cfg(feature = "sync")]
pub mod digits;
#[cfg(feature = "sync")]
pub mod durable;
#[cfg(feature = "sync")]
pub mod failpoint;
#[cfg(feature = "sync")]
pub mod iceberg;
pub mod malloc;
#[cfg(feature = "sync")]
pub mod segment;
#[cfg(feature = "sync")]
pub mod source;
#[cfg(feature = "sync")]
pub mod sync;
