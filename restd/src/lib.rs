//! `slurmrestd`: the REST gateway (OpenAPI data_parser v0.0.44) in front of
//! the controller and slurmdbd.
//!
//! - [`openapi`], [`dbjson`]: the JSON bodies, from the `slurm-openapi`
//!   crate (the commands' `--json` prints the same).
//! - [`jwt`]: HS256 tokens, from `slurm_common::jwt` (the daemons check
//!   them too).
//! - [`request`]: request bodies → controller requests, with located errors.
//! - [`spec`]: the OpenAPI document we serve.
//! - [`server`]: the daemon.

#![recursion_limit = "256"]

pub use slurm_common::jwt;
pub use slurm_openapi::{dbjson, openapi};
pub mod request;
pub mod server;
pub mod spec;
