//! `slurmrestd`: the REST gateway (OpenAPI data_parser v0.0.44) in front of
//! the controller, and the pieces the commands share with it.
//!
//! - [`openapi`]: JSON writers for jobs, nodes, partitions and reservations
//!   (`job_info`, `node_info`, `partition_info`, ...), used by REST and by
//!   the commands' `--json`.
//! - [`dbjson`]: JSON writers for slurmdbd's records (jobs, accounts, users,
//!   associations, QOS, clusters, TRES), for `slurmdb/v0.0.44` and `sacct`.
//! - [`jwt`]: HS256 tokens (`mint_token`, `verify_token`), for `scontrol
//!   token` and the daemon.
//! - [`request`]: request bodies → controller requests, with located errors.
//! - [`spec`]: the OpenAPI document we serve.
//! - `server` (feature `server`, on by default): the daemon.

#![recursion_limit = "256"]

pub mod dbjson;
/// Tokens live in `slurm_common::jwt` (the daemons check them too).
pub use slurm_common::jwt;
pub mod openapi;
pub mod request;
pub mod spec;

#[cfg(feature = "server")]
pub mod server;
