//! The lakeshift runner: the Iceberg target (catalog, commit layer, writers) and the
//! commands built on it. The `lakeshift` binary (`main.rs`) only parses arguments.

pub mod apply;
pub mod failpoint;
pub mod iceberg;
pub mod source;
pub mod sync;
