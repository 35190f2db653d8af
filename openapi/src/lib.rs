//! The JSON bodies of Slurm's REST API, data_parser v0.0.44 (Slurm 25.11),
//! written from our records. `slurmrestd` answers with them and the
//! commands' `--json` prints them, so both show the same objects; neither
//! depends on the other for it.
//!
//! - [`openapi`]: `slurm/v0.0.44`: jobs, nodes, partitions, reservations,
//!   the `meta`/`errors`/`warnings` envelope.
//! - [`dbjson`]: `slurmdb/v0.0.44`: jobs and steps, accounts, users,
//!   associations, QOS, clusters and TRES from slurmdbd's records.

#![recursion_limit = "256"]

pub mod dbjson;
pub mod openapi;
