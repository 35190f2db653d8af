//! The writer's inbox and notice board: the commands every other part of
//! the controller (RPC server, node agent, accounting tasks) sends the one
//! writer, and where the writer publishes each snapshot for readers. Kept
//! apart from the writer so those senders need not know the writer, nor the
//! writer them.

use crate::state::Snapshot;
use slurm_proto::{JobId, RequestBody, Response};
use std::sync::{Arc, RwLock};
use tokio::sync::oneshot;

pub enum Command {
    Rpc {
        uid: u32,
        gid: u32,
        body: Box<RequestBody>,
        /// The caller's names, for requests that use them
        /// ([`crate::state::Identity::needed_by`]).
        identity: Option<Box<crate::state::Identity>>,
        reply: oneshot::Sender<Response>,
    },
    LaunchFailed {
        job_id: JobId,
        node: String,
        /// The node's Prolog failed (drain it, hold the job).
        prolog_failed: bool,
        /// The node refused the launch (as opposed to not answering):
        /// trying again would be refused again, so the job is held.
        refused: bool,
        /// The run the launch was for (its start time): a late failure of
        /// an earlier run's launch must not touch the job's next run.
        start_time: i64,
    },
    /// `scontrol reconfigure`, with slurm.conf and its siblings already
    /// read (or why they could not be).
    Reconfigure {
        uid: u32,
        gid: u32,
        /// The caller's names when it is neither root nor SlurmUser (an
        /// administrator's is checked by the writer).
        identity: Option<Box<crate::state::Identity>>,
        read: Box<Result<crate::state::Reconf, slurm_proto::RpcError>>,
        reply: oneshot::Sender<Response>,
    },
    /// slurmdbd acknowledged every accounting record up to this seq.
    AcctAcked(u64),
    /// Associations, users and QOS as slurmdbd has them now.
    AcctAssocs(Box<crate::assoc::AssocCache>),
    /// `sdiag -r` from an operator: the scheduler's counters start again.
    ResetStats,
    Shutdown,
}

/// Where readers find the latest snapshot.
pub type Published = Arc<Board>;

/// Where the writer puts each snapshot for readers, and wakes those
/// waiting for the next (watch streams).
pub struct Board {
    snap: RwLock<Arc<Snapshot>>,
    changed: tokio::sync::Notify,
}

impl Board {
    pub fn new(first: Arc<Snapshot>) -> Board {
        Board {
            snap: RwLock::new(first),
            changed: tokio::sync::Notify::new(),
        }
    }

    /// The latest snapshot.
    pub fn latest(&self) -> Arc<Snapshot> {
        match self.snap.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Put `s` up and wake every waiter.
    pub fn publish(&self, s: Arc<Snapshot>) {
        match self.snap.write() {
            Ok(mut w) => *w = s,
            Err(p) => *p.into_inner() = s,
        }
        self.changed.notify_waiters();
    }

    /// Resolves at the next [`Board::publish`] (create it before looking
    /// at the latest snapshot, so none is missed in between).
    pub fn next(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }
}

/// Heartbeats the RPC server answered itself: node name and when.
pub type Heard = Arc<std::sync::Mutex<std::collections::HashMap<String, i64>>>;

/// The scheduler's counters as of its last pass, for `sdiag` (a pass that
/// changes nothing publishes no snapshot, yet its count and time are news).
pub type LiveStats = Arc<std::sync::Mutex<crate::state::Stats>>;

/// What the writer shares with the RPC server beside commands and
/// snapshots.
#[derive(Clone, Default)]
pub struct Shared {
    pub heard: Heard,
    pub stats: LiveStats,
}
