//! `slurmsim`: replays workload traces through the production scheduling
//! core in virtual time.
//!
//! Map:
//! - [`swf`]: reads Standard Workload Format traces (plain or gzip), keeping
//!   their header lines.
//! - [`workload`]: trace records → jobs: usable records, processors as
//!   tasks or whole nodes, derived time limits.
//! - [`cluster`]: nodes, partitions and scheduler from a `slurm.conf` (or a
//!   flat `N x C` machine), through the plugin registry the controller uses.
//! - [`engine`]: the event loop (submissions, completions, scheduler passes),
//!   the decision log and its hash.
//! - [`metrics`]: utilisation, wait, bounded slowdown, makespan.
//! - [`accounting`]: accounts, users and QOS with their limits (enforced by
//!   the core's `limits`) and QOS preemption.
//! - [`case`]: readable scheduler cases (the golden tests), run through the
//!   same engine.
//!
//! Invariants: the same input gives the same decision log, byte for byte
//! (ordered containers, ties by job id, no wall clock in any decision); a
//! start that would give a CPU twice stops the replay with an error; bad
//! input is an error, never a panic.

pub mod accounting;
pub mod case;
pub mod cluster;
pub mod engine;
pub mod metrics;
pub mod swf;
pub mod workload;
