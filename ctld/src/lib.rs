//! `slurmctld`: the controller shell around the pure scheduling core.
//!
//! Map:
//! - [`state`]: the controller's state and every transition (the only code
//!   that changes it), plus the snapshots readers get; one file per concern
//!   (jobs, nodes, steps, partitions, reservations, scheduling, suspension
//!   and gang, preemption, priority, accounting records).
//! - [`journal`]: durability in StateSaveLocation (snapshot + group-committed
//!   journal).
//! - [`writer`]: the single writer thread: applies commands in order, runs
//!   the scheduler, commits the journal, then replies and dispatches effects.
//! - [`inbox`]: the commands sent to the writer, and the board it publishes
//!   snapshots on.
//! - [`outbox`]: accounting records kept until slurmdbd has them; [`acct`]
//!   ships them and fetches associations ([`assoc`] keeps those).
//! - [`server`]: the RPC listener: authenticates, serves reads from the
//!   latest snapshot, forwards changes to the writer.
//! - [`http`]: HTTP on the RPC port: probes and metrics.
//! - [`metrics`]: OpenMetrics text from a snapshot.
//! - [`ratelimit`]: per-user RPC rate limiting (`rl_enable`).
//! - [`agent`]: delivers effects (launch, terminate, signal) to node daemons.
//! - [`args`]: the daemon's command line, as Slurm's.
//! - [`clock`]: noticing steps of the system clock.
//! - [`schedlog`]: `SlurmSchedLogFile`, the scheduler's own log.
//! - [`ha`]: controllers in turn: standby, takeover, the state directory lock.
//!
//! Invariants: one writer; nothing is acknowledged before it is durable; the
//! writer never waits on the network (effects are sent by async tasks).

pub mod acct;
pub mod agent;
pub mod args;
pub mod assoc;
pub mod clock;
pub mod gres;
pub mod ha;
pub mod http;
pub mod inbox;
pub mod journal;
pub mod mail;
pub mod metrics;
pub mod outbox;
pub mod ratelimit;
pub mod replica;
pub mod schedlog;
pub mod server;
pub mod state;
pub mod writer;
