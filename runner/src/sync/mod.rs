//! `lakeshift sync`: a whole MySQL/MariaDB database mirrored into Iceberg, DDL
//! included, exactly once (see [`engine`]).

pub mod check;
pub mod convert;
pub mod ddllog;
pub mod dropjob;
pub mod engine;
pub mod error;
pub mod fk;
pub mod fold;
pub mod held;
pub mod init;
pub mod job;
pub mod maintain;
pub mod metrics;
pub mod owner;
pub mod pipeline;
pub mod rdb;
pub mod reference;
pub mod route;
pub mod rowcheck;
pub mod status;
