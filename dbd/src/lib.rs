//! `slurmdbd`: the accounting daemon. Keeps clusters, accounts, users,
//! associations and QOS (what `sacctmgr` manages), the job and step records the
//! controllers send, node events, and hourly/daily/monthly usage, in SQLite
//! (embedded default), MariaDB/MySQL or PostgreSQL through sqlx.
//!
//! Map:
//! - [`conf`]: `slurmdbd.conf` (parse → defaults → validate; errors at file:line).
//! - [`storage`]: the database: versioned schema and migrations, the admin
//!   operations, exactly-once ingestion, job queries, rollups and purge.
//! - [`server`]: the TCP listener (credential check, permissions, dispatch) and
//!   the hourly maintenance task.
//! - [`client`]: a one-request client (re-exported from `slurm_common::dbd`).
//! - [`tres`]: TRES strings in limits.
//! - [`txn`]: what each change is recorded as (`sacctmgr show transaction`).
//! - [`args`]: the command line.
//!
//! Invariants: the wire types are `slurm_proto::acct`; every request is
//! authenticated with the cluster key (`slurm.key` beside slurmdbd.conf); each
//! request is one transaction, so a refused request changes nothing; each
//! `(cluster, seq)` record is applied at most once and acknowledged only after
//! it is committed.

pub mod args;
/// The client lives in `slurm_common::dbd` (the controller and commands use it).
pub use slurm_common::dbd as client;
pub mod conf;
pub mod server;
pub mod stats;
pub mod storage;
pub mod tres;
pub mod txn;
