//! `slurmd`: the node daemon. One process per node (several per host in
//! tests, each started with `-N name`); it registers with the controller,
//! heartbeats, runs batch scripts as their user and reports how they ended.
//!
//! Map:
//! - [`args`]: the command line (`-C -D -N -f -v -L -V`), parsed without panics.
//! - [`hw`]: hardware detection (hwloc, else `/sys` and `/proc` under an
//!   injectable root): sockets, cores, threads, NUMA nodes, CPUs, memory;
//!   the `slurmd -C` line and the "less than configured" check.
//! - [`gres`]: `gres.conf` for this node and GPU auto-detection from the
//!   NVIDIA driver's `/proc` and `/sys` files.
//! - [`cgroup`]: job cgroups, v1 and v2 (`cgroup.conf`, cpusets, memory
//!   and swap limits, device denial on v1, kill-everything, OOM and usage).
//! - [`auxconf`]: lexing of `cgroup.conf` and `gres.conf`.
//! - [`mock`]: mock execution for scale tests (`--mock`; no processes).
//! - [`settings`]: what start-up resolves before the runtime exists: the
//!   configuration, this node's name, and the `%n`/`%h`-expanded paths
//!   (spool, log, pid files).
//! - [`configless`]: the configuration fetched from the controller
//!   (`--conf-server`), for slurmd and sackd.
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
//! - [`taskscript`]: `TaskProlog`/`TaskEpilog` and srun's
//!   `--task-prolog`/`--task-epilog`, run as the job's user around each task.
//! - [`ledger`]: spent step credentials (steps launched or cancelled here,
//!   runs ended here), kept across restarts.
//! - [`sysinfo`]: how the node is doing (boot time, kernel, load, free
//!   memory, processes).
//!
//! Invariants:
//! - Every request's credential is verified before anything else; job
//!   requests come only from root or `SlurmUser`.
//! - Jobs never run as root unless the job's uid is 0: the child drops its
//!   groups, gid and uid (and checks they stuck) before it opens any file.
//! - Between `fork` and `exec` the child only makes async-signal-safe calls;
//!   everything it needs is prepared beforehand. With cgroups it joins its
//!   job's cgroup first, so no process of a job is ever outside it, and
//!   ending a job kills everything in the cgroup, not only its session.
//! - A job confined by `task/cgroup` never runs unconfined: when its cgroup
//!   cannot be made, the launch fails (tracking-only cgroups degrade to
//!   process groups with a warning).
//! - Stopping the daemon never kills jobs; job events not yet acknowledged by
//!   the controller are kept in the spool and sent after a restart.
//! - Nothing here panics on external input (frames, requests, files in the
//!   spool, `/proc`).

pub mod args;
pub mod auxconf;
pub mod cgroup;
pub mod configless;
pub mod ctld_link;
pub mod daemon;
pub mod gres;
pub mod hw;
pub mod jobs;
pub mod kubelet;
pub mod launch;
pub mod ledger;
pub mod mock;
pub mod prolog;
pub mod settings;
pub mod steps;
pub mod sysinfo;
pub mod taskscript;

/// Slurm's RPC protocol number for 25.11 (`44 << 8`), as it appears in
/// `SLURM_WORKING_CLUSTER`.
pub const SLURM_PROTOCOL_NUM: u32 = 44 << 8;

/// Plugin id of `select/cons_tres`, the last field of `SLURM_WORKING_CLUSTER`.
pub const SELECT_CONS_TRES_ID: u32 = 109;

/// Unix seconds now.
pub fn now() -> i64 {
    slurm_common::auth::now()
}
