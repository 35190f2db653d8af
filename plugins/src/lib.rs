//! The pure scheduling core. No tokio, no sockets, no files, no wall clock:
//! every function takes the cluster view, the queue and `now`, and returns
//! decisions. The controller and (later) the simulator drive the same code.
//!
//! Map:
//! - [`view`]: what the core sees: nodes, partitions, jobs (by index, not name).
//! - [`select`]: `select/cons_tres` placement: whole cores and memory per node,
//!   multi-node jobs, task layout.
//! - [`sched`]: `sched/builtin` (strict priority order), the [`Scheduler`]
//!   trait every policy implements, and the [`Plan`] a pass returns.
//! - [`plan`]: the availability plan: free cores and memory per node over
//!   time, from running jobs' ends and reservations.
//! - [`backfill`]: `sched/backfill`, EASY to conservative by reservation
//!   depth, configured by `SchedulerParameters`.
//! - [`topo`]: `topology/tree` and `topology/block`: which groups of nodes a
//!   job must stay inside, wrapped around cons_tres' greedy.
//! - [`gang`]: shared cores (`OverSubscribe`) and gang scheduling's turns.
//! - [`priority`]: `priority/basic` (submission order).
//! - [`queue`]: the queue policy before placement: array throttles, licenses.
//! - [`limits`]: association and QOS limits: refused at submission, held back.
//! - [`deps`]: job dependencies: where each pending job's conditions stand.
//! - [`preempt`]: which running jobs a blocked job displaces to fit.
//! - [`registry`]: maps `slurm.conf` plugin names to constructors.
//!
//! Invariants: deterministic (ties break on priority, submit time, job id); a
//! core or MiB of memory is never given twice within one pass, now or at
//! any planned time; a backfilled job never delays a reservation; every
//! pending job gets a typed reason.

pub mod backfill;
pub mod deps;
pub mod fairshare;
pub mod gang;
pub mod limits;
pub mod plan;
pub mod preempt;
pub mod priority;
pub mod queue;
pub mod registry;
pub mod sched;
pub mod select;
pub mod topo;
pub mod view;

pub use backfill::{Backfill, BackfillParams};
pub use sched::{Decision, PendingReason, Plan, PlannedStart, Scheduler};
pub use view::{ClusterView, JobView, NodeAlloc, NodeView, PartitionView, RunningJob};
