//! `slurmd`: the node daemon. One process per node (several per host in
//! tests, each started with `-N name`); it registers with the controller,
//! heartbeats, runs batch scripts as their user and reports how they ended.
//!
//! Map:
//! - [`args`]: the command line (`-D -N -f -v -L -V`), parsed without panics.
//! - [`mock`]: mock execution for scale tests (`--mock`; no processes).
//! - [`settings`]: what start-up resolves before the runtime exists: the
//!   configuration, this node's name, and the `%n`/`%h`-expanded paths
//!   (spool, log, pid files).
//! - [`daemon`]: start-up (key, spool, credential socket), the RPC listener,
//!   credential checks and dispatch of each request.
//! - [`ctld_link`]: registration and heartbeat with the controller, and the
//!   [`ctld_link::Outbox`] that delivers job events in order, with retries,
//!   persisted in the spool so a restart loses none.
//! - [`jobs`]: the table of jobs on this node; waiting for scripts, signalling,
//!   terminating, cleaning up, and re-adopting jobs after a daemon restart.
//! - [`launch`]: a batch job's environment ([`launch::env`]), output-file
//!   patterns ([`launch::pattern`]), spool files, and the child-side
//!   privilege drop and exec ([`launch::exec`]).
//! - [`steps`]: tasks of job steps launched by `srun`, their I/O stream
//!   back to `srun`, signals, and their end with the job.
//! - [`sysinfo`]: what the node has and how it is doing (CPUs, memory, boot
//!   time, kernel, load).
//!
//! Invariants:
//! - Every request's credential is verified before anything else; job
//!   requests come only from root or `SlurmUser`.
//! - Jobs never run as root unless the job's uid is 0: the child drops its
//!   groups, gid and uid (and checks they stuck) before it opens any file.
//! - Between `fork` and `exec` the child only makes async-signal-safe calls;
//!   everything it needs is prepared beforehand.
//! - Stopping the daemon never kills jobs; job events not yet acknowledged by
//!   the controller are kept in the spool and sent after a restart.
//! - Nothing here panics on external input (frames, requests, files in the
//!   spool, `/proc`).

pub mod args;
pub mod ctld_link;
pub mod daemon;
pub mod jobs;
pub mod launch;
pub mod mock;
pub mod settings;
pub mod steps;
pub mod sysinfo;

/// Slurm's RPC protocol number for 25.11 (`44 << 8`), as it appears in
/// `SLURM_WORKING_CLUSTER`.
pub const SLURM_PROTOCOL_NUM: u32 = 44 << 8;

/// Plugin id of `select/cons_tres`, the last field of `SLURM_WORKING_CLUSTER`.
pub const SELECT_CONS_TRES_ID: u32 = 109;

/// Unix seconds now.
pub fn now() -> i64 {
    slurm_common::auth::now()
}
