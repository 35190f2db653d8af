//! The controllers' state replicated among them with Raft
//! (`SlurmctldParameters=replicate_state`), so no shared file system is
//! needed: each controller keeps its own `StateSaveLocation`.
//!
//! - Consensus is openraft's. Each Raft log entry is one batch of the
//!   writer's journal entries ([`Batch`]); the writer of the controller in
//!   control (the Raft leader) acknowledges nothing before its batch is
//!   durable on a majority of the controllers ([`Replicated::commit`]).
//! - Every controller applies committed batches to a [`Saved`] of its own
//!   ([`StateMachine`]); the one that becomes leader starts its controller
//!   from that, exactly as a backup starts from the journal it reads.
//! - On disk, under `StateSaveLocation/raft/`: `log` (one JSON record per
//!   line: entries, truncations, purges, votes, the commit point; synced
//!   before Raft is told) and `snapshot` (the state up to a log entry, so
//!   the log can be cut; written whole then renamed).
//! - Messages between controllers travel over the controllers' own gRPC
//!   service (`Controller.Replicate`), signed with the cluster's key and
//!   taken only from root or SlurmUser (and, with TLS, a controller's
//!   certificate).
//! - Raft needs a majority: with three controllers any one may be lost.
//!   With two, losing either would stop the cluster, so two are refused.

use crate::journal::{Entry, Saved};
use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError,
    Unreachable,
};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::storage::{LogFlushed, RaftLogStorage, RaftStateMachine};
use openraft::{
    BasicNode, EntryPayload, LogId, LogState, RaftLogReader, RaftNetwork, RaftNetworkFactory,
    RaftSnapshotBuilder, ServerState, Snapshot, SnapshotMeta, StorageError, StorageIOError,
    StoredMembership, Vote,
};
use serde::{Deserialize, Serialize};
use slurm_common::auth::{Binding, Key};
use slurm_common::grpc;
use slurm_proto::grpc::pb;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io::{BufRead, Cursor, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One batch of the writer's journal entries: one Raft log entry, or
/// several when it is too large for one message between controllers.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Batch {
    pub entries: Vec<Entry>,
    /// Part of a batch split over several log entries: applied only once
    /// its last part is in, so a batch is never applied in part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<Part>,
}

/// Where a log entry stands in a split batch.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Part {
    /// Names the batch (the writer's own count, with its run).
    pub id: u64,
    /// This part (from 0) of `of`.
    pub k: u32,
    pub of: u32,
}

/// The parts of a split batch received so far: its id, the next part
/// expected, their entries.
type Pending = Option<(u64, u32, Vec<Entry>)>;

/// What a snapshot holds: the state, and the parts of a split batch
/// whose last part came after it.
#[derive(Serialize, Deserialize)]
struct Image {
    saved: Saved,
    #[serde(default)]
    pending: Pending,
}

openraft::declare_raft_types!(
    /// The Raft types of the controllers' replicated state.
    pub Types:
        D = Batch,
        R = (),
        NodeId = u64,
        Node = BasicNode,
);

type NodeId = u64;
type LogEntry = openraft::Entry<Types>;
type SResult<T> = Result<T, StorageError<NodeId>>;
type Meta = SnapshotMeta<NodeId, BasicNode>;

/// Batches larger than this (as JSON) go as parts: Raft gives a message
/// carrying entries a heartbeat's time (a tenth of SlurmctldTimeout, at
/// most a second) to be sent, read and synced.
const PART_BYTES: usize = 256 << 10;

/// The largest snapshot a controller takes from another.
const MAX_SNAPSHOT: u64 = 4 << 30;

/// The directory, under `StateSaveLocation`, holding the replicated state.
pub const DIR: &str = "raft";

/// In [`DIR`]: until when (Unix time) this controller stands for no
/// election, having given control up.
const HOLD: &str = "hold";

/// Write `bytes` to `path` whole: a new file synced, then renamed over it.
fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let tmp = path.with_extension(format!(
        "new.{}.{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    crate::journal::sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// A record of the log file.
#[derive(Debug, Serialize, Deserialize)]
enum Rec {
    E(LogEntry),
    /// Entries from this index on are gone.
    Truncate(u64),
    Purge(LogId<NodeId>),
    Vote(Vote<NodeId>),
    Committed(Option<LogId<NodeId>>),
}

struct LogInner {
    path: PathBuf,
    file: std::fs::File,
    log: BTreeMap<u64, LogEntry>,
    vote: Option<Vote<NodeId>>,
    committed: Option<LogId<NodeId>>,
    purged: Option<LogId<NodeId>>,
    /// The file's size (shared: the writer asks for a snapshot past a
    /// size).
    size: Arc<AtomicU64>,
}

/// The Raft log, in memory and in `raft/log`.
#[derive(Clone)]
pub struct LogStore {
    inner: Arc<Mutex<LogInner>>,
}

fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

impl LogStore {
    /// The log kept in `dir` (read back when there).
    pub fn open(dir: &Path) -> std::io::Result<LogStore> {
        let path = dir.join("log");
        let mut log = BTreeMap::new();
        let (mut vote, mut committed, mut purged) = (None, None, None);
        let mut good = 0u64;
        if path.exists() {
            let f = std::fs::File::open(&path)?;
            let mut r = std::io::BufReader::new(f);
            let mut line = Vec::new();
            loop {
                line.clear();
                let n = r.read_until(b'\n', &mut line)?;
                if n == 0 {
                    break;
                }
                // A record cut short by a crash was never acknowledged:
                // the log ends before it.
                if line.last() != Some(&b'\n') {
                    break;
                }
                let rec: Rec = match serde_json::from_slice(&line) {
                    Ok(r) => r,
                    Err(e) => {
                        return Err(std::io::Error::other(format!(
                            "{}: a damaged record at byte {good}: {e}",
                            path.display()
                        )))
                    }
                };
                good += n as u64;
                match rec {
                    Rec::E(e) => {
                        log.insert(e.log_id.index, e);
                    }
                    Rec::Truncate(i) => {
                        log.split_off(&i);
                    }
                    Rec::Purge(id) => {
                        log = log.split_off(&(id.index + 1));
                        purged = Some(id);
                    }
                    Rec::Vote(v) => vote = Some(v),
                    Rec::Committed(c) => committed = c,
                }
            }
            let f = std::fs::OpenOptions::new().write(true).open(&path)?;
            f.set_len(good)?;
        }
        let file = open_append(&path)?;
        Ok(LogStore {
            inner: Arc::new(Mutex::new(LogInner {
                path,
                file,
                log,
                vote,
                committed,
                purged,
                size: Arc::new(AtomicU64::new(good)),
            })),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LogInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// When the vote kept is this controller's own won election, record
    /// it as not won. openraft makes a controller that was leader leader
    /// again the moment it starts, with no election: after a crash its
    /// controller would start from a state missing entries it had written
    /// but not yet seen agreed on, and after giving control up it would
    /// take it back. Now it starts as a follower and is chosen again only
    /// by an election, whose first entry settles everything before it.
    /// (It grants no vote it would not have granted: only a vote for this
    /// very leader compares differently, and no other controller asks
    /// with it.)
    pub fn not_leader_on_start(&self, me: NodeId) -> std::io::Result<()> {
        let mut g = self.lock();
        if let Some(v) = g.vote {
            if v.committed && v.leader_id.node_id == me {
                let unwon = Vote::new(v.leader_id.term, me);
                g.write(&[Rec::Vote(unwon)], true)?;
                g.vote = Some(unwon);
            }
        }
        Ok(())
    }

    /// The log file's size, kept current.
    pub fn size(&self) -> Arc<AtomicU64> {
        self.lock().size.clone()
    }
}

impl LogInner {
    fn write(&mut self, recs: &[Rec], sync: bool) -> std::io::Result<()> {
        let mut buf = Vec::new();
        for r in recs {
            serde_json::to_writer(&mut buf, r).map_err(std::io::Error::other)?;
            buf.push(b'\n');
        }
        let res =
            self.file.write_all(&buf).and_then(
                |_| {
                    if sync {
                        self.file.sync_data()
                    } else {
                        Ok(())
                    }
                },
            );
        if let Err(e) = res {
            // Leave no partial record for the next one to follow.
            let _ = self.file.set_len(self.size.load(Ordering::Relaxed));
            return Err(e);
        }
        self.size.fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Write the log anew with only what is kept (after a purge).
    fn rewrite(&mut self) -> std::io::Result<()> {
        let mut buf = Vec::new();
        let mut push = |r: &Rec| -> std::io::Result<()> {
            serde_json::to_writer(&mut buf, r).map_err(std::io::Error::other)?;
            buf.push(b'\n');
            Ok(())
        };
        if let Some(v) = self.vote {
            push(&Rec::Vote(v))?;
        }
        if let Some(p) = self.purged {
            push(&Rec::Purge(p))?;
        }
        push(&Rec::Committed(self.committed))?;
        for e in self.log.values() {
            push(&Rec::E(e.clone()))?;
        }
        write_whole(&self.path, &buf)?;
        self.file = open_append(&self.path)?;
        self.size.store(buf.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}

fn werr(e: std::io::Error) -> StorageError<NodeId> {
    StorageIOError::write_logs(&e).into()
}

impl RaftLogReader<Types> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> SResult<Vec<LogEntry>> {
        Ok(self
            .lock()
            .log
            .range(range)
            .map(|(_, e)| e.clone())
            .collect())
    }
}

impl RaftLogStorage<Types> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> SResult<LogState<Types>> {
        let g = self.lock();
        let last = g.log.values().next_back().map(|e| e.log_id).or(g.purged);
        Ok(LogState {
            last_purged_log_id: g.purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> SResult<()> {
        let mut g = self.lock();
        g.write(&[Rec::Vote(*vote)], true)
            .map_err(|e| StorageIOError::write_vote(&e))?;
        g.vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> SResult<Option<Vote<NodeId>>> {
        Ok(self.lock().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId<NodeId>>) -> SResult<()> {
        // Not synced: a commit point lost in a crash is learnt again.
        let mut g = self.lock();
        g.write(&[Rec::Committed(committed)], false).map_err(werr)?;
        g.committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> SResult<Option<LogId<NodeId>>> {
        Ok(self.lock().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<Types>) -> SResult<()>
    where
        I: IntoIterator<Item = LogEntry> + Send,
        I::IntoIter: Send,
    {
        let mut g = self.lock();
        let entries: Vec<LogEntry> = entries.into_iter().collect();
        let recs: Vec<Rec> = entries.iter().cloned().map(Rec::E).collect();
        let r = g.write(&recs, true);
        match r {
            Ok(()) => {
                for e in entries {
                    g.log.insert(e.log_id.index, e);
                }
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let se = werr(std::io::Error::new(e.kind(), e.to_string()));
                callback.log_io_completed(Err(e));
                Err(se)
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> SResult<()> {
        let mut g = self.lock();
        g.write(&[Rec::Truncate(log_id.index)], true)
            .map_err(werr)?;
        g.log.split_off(&log_id.index);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> SResult<()> {
        let mut g = self.lock();
        g.log = g.log.split_off(&(log_id.index + 1));
        g.purged = Some(log_id);
        g.rewrite().map_err(werr)
    }
}

/// What the controllers agreed on so far, applied.
struct SmInner {
    saved: Saved,
    pending: Pending,
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, BasicNode>,
}

impl SmInner {
    /// The entries to apply for log entry `b`: a whole batch, or nothing
    /// while the parts of a split one come in. Parts of one batch follow
    /// each other (one writer sends them in turn); a batch left unfinished
    /// (its controller lost control) is dropped when anything else comes.
    fn take_whole(&mut self, b: Batch) -> Vec<Entry> {
        let Some(p) = b.part else {
            if let Some((id, k, _)) = self.pending.take() {
                tracing::warn!("dropped the first {k} parts of batch {id}, never finished");
            }
            return b.entries;
        };
        let mut have = match self.pending.take() {
            Some((id, next, es)) if id == p.id && next == p.k => es,
            Some((id, k, _)) => {
                tracing::warn!("dropped the first {k} parts of batch {id}, never finished");
                Vec::new()
            }
            None => Vec::new(),
        };
        if have.is_empty() && p.k != 0 {
            // A part without its beginning: never applied.
            return Vec::new();
        }
        have.extend(b.entries);
        if p.k + 1 >= p.of {
            return have;
        }
        self.pending = Some((p.id, p.k + 1, have));
        Vec::new()
    }
}

/// The replicated state: the journal entries of every committed batch
/// applied to a [`Saved`]; `raft/snapshot` holds it up to a log entry.
#[derive(Clone)]
pub struct StateMachine {
    inner: Arc<Mutex<SmInner>>,
    path: PathBuf,
    /// Held while the snapshot file is written.
    writing: Arc<Mutex<()>>,
}

/// The snapshot file: its description, then the state.
#[derive(Serialize, Deserialize)]
struct SnapshotHead {
    meta: SnapshotMeta<NodeId, BasicNode>,
}

impl StateMachine {
    /// The state kept in `dir` (its snapshot, when there).
    pub fn open(dir: &Path) -> std::io::Result<StateMachine> {
        let path = dir.join("snapshot");
        let mut inner = SmInner {
            saved: Saved::default(),
            pending: None,
            last_applied: None,
            membership: StoredMembership::default(),
        };
        if let Some((meta, data)) = Self::read_file(&path)? {
            let image: Image = serde_json::from_slice(&data)
                .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?;
            inner.saved = image.saved;
            inner.pending = image.pending;
            inner.last_applied = meta.last_log_id;
            inner.membership = meta.last_membership;
        }
        Ok(StateMachine {
            inner: Arc::new(Mutex::new(inner)),
            path,
            writing: Arc::new(Mutex::new(())),
        })
    }

    fn read_file(path: &Path) -> std::io::Result<Option<(Meta, Vec<u8>)>> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let nl = bytes
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| std::io::Error::other(format!("{}: no header", path.display())))?;
        let head: SnapshotHead = serde_json::from_slice(&bytes[..nl])
            .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?;
        Ok(Some((head.meta, bytes[nl + 1..].to_vec())))
    }

    fn write_file(
        &self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        data: &[u8],
    ) -> std::io::Result<()> {
        let mut bytes = serde_json::to_vec(&SnapshotHead { meta: meta.clone() })
            .map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        bytes.extend_from_slice(data);
        // One writer at a time (a snapshot built while one is installed),
        // and never an older one over a newer: the log may be cut up to
        // the newer already.
        let _one = self.writing.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(have) = Self::read_meta(&self.path)? {
            if have.last_log_id > meta.last_log_id {
                return Ok(());
            }
        }
        write_whole(&self.path, &bytes)
    }

    /// The description at the head of the snapshot file, if there is one.
    fn read_meta(path: &Path) -> std::io::Result<Option<Meta>> {
        let f = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut line = Vec::new();
        std::io::BufReader::new(f).read_until(b'\n', &mut line)?;
        let head: SnapshotHead = serde_json::from_slice(&line)
            .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?;
        Ok(Some(head.meta))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SmInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A copy of the state applied so far.
    pub fn saved(&self) -> Saved {
        self.lock().saved.clone()
    }
}

fn snapshot_err(e: impl std::fmt::Display) -> StorageError<NodeId> {
    StorageIOError::write_snapshot(None, &std::io::Error::other(e.to_string())).into()
}

impl RaftSnapshotBuilder<Types> for StateMachine {
    async fn build_snapshot(&mut self) -> SResult<Snapshot<Types>> {
        let (image, last, membership) = {
            let g = self.lock();
            let image = Image {
                saved: g.saved.clone(),
                pending: g.pending.clone(),
            };
            (image, g.last_applied, g.membership.clone())
        };
        let data = serde_json::to_vec(&image).map_err(snapshot_err)?;
        let meta = SnapshotMeta {
            last_log_id: last,
            last_membership: membership,
            snapshot_id: format!(
                "{}-{}",
                last.map(|l| l.index).unwrap_or(0),
                slurm_common::auth::now()
            ),
        };
        self.write_file(&meta, &data).map_err(snapshot_err)?;
        tracing::info!(
            "replicated state: snapshot to entry {} ({} bytes)",
            last.map(|l| l.index).unwrap_or(0),
            data.len()
        );
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<Types> for StateMachine {
    type SnapshotBuilder = StateMachine;

    async fn applied_state(
        &mut self,
    ) -> SResult<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>)> {
        let g = self.lock();
        Ok((g.last_applied, g.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> SResult<Vec<()>>
    where
        I: IntoIterator<Item = LogEntry> + Send,
        I::IntoIter: Send,
    {
        let mut g = self.lock();
        let mut out = Vec::new();
        for e in entries {
            g.last_applied = Some(e.log_id);
            match e.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(b) => {
                    let whole = g.take_whole(b);
                    for x in whole {
                        g.saved.apply(x);
                    }
                }
                EntryPayload::Membership(m) => {
                    g.membership = StoredMembership::new(Some(e.log_id), m);
                }
            }
            out.push(());
        }
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> SResult<Box<Cursor<Vec<u8>>>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> SResult<()> {
        let data = snapshot.into_inner();
        let image: Image = serde_json::from_slice(&data).map_err(snapshot_err)?;
        self.write_file(meta, &data).map_err(snapshot_err)?;
        let mut g = self.lock();
        g.saved = image.saved;
        g.pending = image.pending;
        tracing::info!(
            "replicated state: caught up from a snapshot of the controller in control (to entry {})",
            meta.last_log_id.map(|l| l.index).unwrap_or(0)
        );
        g.last_applied = meta.last_log_id;
        g.membership = meta.last_membership.clone();
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> SResult<Option<Snapshot<Types>>> {
        let read =
            Self::read_file(&self.path).map_err(|e| StorageIOError::read_snapshot(None, &e))?;
        Ok(read.map(|(meta, data)| Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        }))
    }
}

/// How this controller reaches the others: names and `host:port` from
/// slurm.conf (never from what Raft's membership says), signed with the
/// cluster's key.
#[derive(Clone)]
pub struct Peers {
    /// The largest request a controller takes (`CommunicationParameters`).
    max_message: usize,
    controllers: Arc<Vec<(String, String)>>,
    key: Key,
    host: String,
}

impl RaftNetworkFactory<Types> for Peers {
    type Network = Peer;

    async fn new_client(&mut self, target: NodeId, _node: &BasicNode) -> Peer {
        Peer {
            max_message: self.max_message,
            to: self.controllers.get(target as usize).cloned(),
            target,
            key: self.key.clone(),
            host: self.host.clone(),
        }
    }
}

/// The way to one other controller.
pub struct Peer {
    max_message: usize,
    to: Option<(String, String)>,
    target: NodeId,
    key: Key,
    host: String,
}

/// Why a message did not reach its controller.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Unsent(String);

impl Peer {
    async fn send<Req: Serialize, Resp: serde::de::DeserializeOwned, E>(
        &self,
        kind: &str,
        req: &Req,
        entries: u64,
        within: Duration,
    ) -> Result<Resp, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>
    where
        E: std::error::Error + serde::de::DeserializeOwned,
    {
        let Some((name, addr)) = &self.to else {
            return Err(RPCError::Unreachable(Unreachable::new(&Unsent(format!(
                "no controller {}",
                self.target
            )))));
        };
        let body = serde_json::to_vec(req).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        // Room for the envelope and the credential.
        if body.len() + 4096 > self.max_message {
            if entries > 1 {
                return Err(RPCError::PayloadTooLarge(
                    PayloadTooLarge::new_entries_hint(entries / 2),
                ));
            }
            // One entry alone too large (submissions are bounded so that it
            // is not): retrying it at once would only spin.
            return Err(RPCError::Unreachable(Unreachable::new(&Unsent(format!(
                "a message of {} bytes is larger than the controllers take ({})",
                body.len(),
                self.max_message
            )))));
        }
        let ch = grpc::kept(addr, name).map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
        let (key, host) = (self.key.clone(), self.host.clone());
        let sign = move |b: &Binding| Ok(key.sign(0, 0, &host, slurm_common::auth::now(), b));
        let msg = pb::RaftMessage {
            kind: kind.to_string(),
            body,
        };
        let reply = grpc::call_replicate(&ch, name, msg, sign, within)
            .await
            .map_err(|e| RPCError::Unreachable(Unreachable::new(&e)))?;
        if reply.kind == "error" {
            let why = String::from_utf8_lossy(&reply.body).into_owned();
            return Err(RPCError::Network(NetworkError::new(&Unsent(format!(
                "{name}: {why}"
            )))));
        }
        let r: Result<Resp, RaftError<NodeId, E>> = serde_json::from_slice(&reply.body)
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<Types> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<Types>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let n = rpc.entries.len() as u64;
        self.send("append", &rpc, n, option.hard_ttl()).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<Types>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        self.send("snapshot", &rpc, 1, option.hard_ttl()).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.send("vote", &rpc, 1, option.hard_ttl()).await
    }
}

/// Why replication cannot start or a batch was not agreed on.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    #[error("SlurmctldParameters=replicate_state needs at least three SlurmctldHost lines (a majority must survive the loss of one controller); {0} given")]
    TooFew(usize),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("Raft: {0}")]
    Raft(String),
}

/// This controller's part in the replicated state.
pub struct Replica {
    pub raft: openraft::Raft<Types>,
    pub id: NodeId,
    dir: PathBuf,
    /// Counts holds on elections (only the last one lifts it).
    holds: Arc<AtomicU64>,
    sm: StateMachine,
    log_size: Arc<AtomicU64>,
    /// `SlurmctldTimeout`: a batch not agreed on within it means this
    /// controller is no longer in control.
    pub timeout: Duration,
    /// Batches larger than this (as JSON) go as parts.
    part_bytes: usize,
}

/// Raft's timing from `SlurmctldTimeout` (`timeout`) for controller
/// `index`: heartbeats several times per timeout; elections after between
/// half and all of it, later for controllers further down the list, so the
/// primary is the likeliest to win.
pub fn raft_config(
    timeout: Duration,
    index: usize,
    max_message: usize,
) -> Result<openraft::Config, ReplicaError> {
    let t = (timeout.as_millis() as u64).max(600);
    let heartbeat = (t / 10).clamp(50, 1000);
    let step = t / 16 * index as u64;
    // A follower stands once it has heard nothing for its lease (the
    // maximum) and a random timeout after it: within SlurmctldTimeout.
    let c = openraft::Config {
        cluster_name: "slurmctld".into(),
        heartbeat_interval: heartbeat,
        election_timeout_min: t / 4 + step,
        election_timeout_max: t / 2 + step,
        // Snapshots are asked for by size ([`Replicated::after_batch`]).
        snapshot_policy: openraft::SnapshotPolicy::Never,
        max_in_snapshot_log_to_keep: 16,
        // With parts of at most a quarter of a message (see
        // [`Replica::start`]), four entries fit in one.
        max_payload_entries: 4,
        // Chunks travel as JSON arrays of numbers (up to four bytes each).
        snapshot_max_chunk_size: (max_message / 16) as u64,
        install_snapshot_timeout: t.max(5000),
        ..Default::default()
    };
    c.validate().map_err(|e| ReplicaError::Raft(e.to_string()))
}

/// What a controller's Raft node is started with.
pub struct Setup {
    /// Where its state is kept (`StateSaveLocation/raft`).
    pub dir: PathBuf,
    /// This controller's place among `controllers` (name, `host:port`).
    pub index: usize,
    pub controllers: Vec<(String, String)>,
    /// Signs the messages to the other controllers.
    pub key: Key,
    pub host: String,
    /// `SlurmctldTimeout`.
    pub timeout: Duration,
    /// The largest request a controller takes.
    pub max_message: usize,
    /// Its log is cut after a snapshot past this size.
    pub compact_bytes: u64,
}

impl Replica {
    /// Start this controller's Raft node (`index` among `controllers`,
    /// each a name and `host:port`) on the state kept in `dir`; the first
    /// time, every controller proposes the same membership (all of them),
    /// which is safe.
    pub async fn start(setup: Setup) -> Result<Replica, ReplicaError> {
        let Setup {
            dir,
            index,
            controllers,
            key,
            host,
            timeout,
            max_message,
            compact_bytes,
        } = setup;
        let dir = dir.as_path();
        if controllers.len() < 3 {
            return Err(ReplicaError::TooFew(controllers.len()));
        }
        if !dir.exists() {
            std::fs::create_dir_all(dir)?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
        let log = LogStore::open(dir)?;
        log.not_leader_on_start(index as NodeId)?;
        let log_size = log.size();
        let sm = StateMachine::open(dir)?;
        let config = Arc::new(raft_config(timeout, index, max_message)?);
        let members: BTreeMap<NodeId, BasicNode> = controllers
            .iter()
            .enumerate()
            .map(|(i, (_, addr))| (i as NodeId, BasicNode::new(addr)))
            .collect();
        let peers = Peers {
            max_message,
            controllers: Arc::new(controllers),
            key,
            host,
        };
        let id = index as NodeId;
        let raft = openraft::Raft::new(id, config, peers, log, sm.clone())
            .await
            .map_err(|e| ReplicaError::Raft(e.to_string()))?;
        if !raft
            .is_initialized()
            .await
            .map_err(|e| ReplicaError::Raft(e.to_string()))?
        {
            tracing::info!(
                "replicated state: a new Raft group of {} controllers",
                members.len()
            );
            if let Err(e) = raft.initialize(members).await {
                tracing::debug!("Raft initialize: {e}");
            }
        }
        let r = Replica {
            raft,
            id,
            dir: dir.to_path_buf(),
            holds: Arc::new(AtomicU64::new(0)),
            sm,
            log_size,
            timeout,
            part_bytes: (max_message / 8).min(PART_BYTES),
        };
        // Every controller, in control or not, cuts its own log once it
        // passes `compact_bytes`: a snapshot, then the log up to it.
        let (raft, size) = (r.raft.clone(), r.log_size.clone());
        tokio::spawn(async move {
            let mut asked_at = 0u64;
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let now = size.load(Ordering::Relaxed);
                if now < asked_at {
                    asked_at = 0;
                }
                if now > compact_bytes && now > asked_at.saturating_add(compact_bytes / 2) {
                    asked_at = now;
                    if raft.trigger().snapshot().await.is_err() {
                        return;
                    }
                }
            }
        });
        // Gave control up just before starting again: still holding back.
        if let Ok(t) = std::fs::read_to_string(dir.join(HOLD)) {
            let _ = std::fs::remove_file(dir.join(HOLD));
            if let Ok(until) = t.trim().parse::<i64>() {
                r.hold_until(until);
            }
        }
        Ok(r)
    }

    /// Stand for no election for `span` (another controller asked for
    /// control: let it be chosen); kept in `raft/hold` across this
    /// process starting again.
    pub fn hold_elections(self: &Arc<Self>, span: Duration) {
        let until = slurm_common::auth::now() + span.as_secs().max(1) as i64;
        if let Err(e) = std::fs::write(self.dir.join(HOLD), until.to_string()) {
            tracing::warn!("cannot keep the hold on elections: {e}");
        }
        self.hold_until(until);
    }

    fn hold_until(&self, until: i64) {
        let left = until - slurm_common::auth::now();
        if left <= 0 {
            return;
        }
        self.raft.runtime_config().elect(false);
        let gen = self.holds.fetch_add(1, Ordering::SeqCst) + 1;
        let (raft, holds) = (self.raft.clone(), self.holds.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(left as u64)).await;
            if holds.load(Ordering::SeqCst) == gen {
                raft.runtime_config().elect(true);
            }
        });
    }

    /// Giving control up, the writer stopped: wait (at most `within`)
    /// until every other controller holds this one's whole log, so the one
    /// that asked can be chosen with nothing missing.
    pub async fn let_others_catch_up(&self, within: Duration) {
        // (A controller that is down never catches up: do not wait long.)
        let within = within.min(Duration::from_secs(5));
        let mut m = self.raft.metrics();
        let deadline = tokio::time::Instant::now() + within;
        loop {
            {
                let b = m.borrow();
                let last = b.last_log_index;
                let Some(rep) = &b.replication else { return };
                if rep
                    .iter()
                    .filter(|(id, _)| **id != self.id)
                    .all(|(_, l)| l.map(|l| l.index) == last)
                {
                    return;
                }
            }
            tokio::select! {
                r = m.changed() => if r.is_err() { return },
                _ = tokio::time::sleep_until(deadline) => {
                    tracing::warn!("giving control up before every controller caught up");
                    return;
                }
            }
        }
    }

    /// Whether this controller is the Raft leader now.
    pub fn is_leader(&self) -> bool {
        let m = self.raft.metrics();
        let m = m.borrow();
        m.state == ServerState::Leader && m.current_leader == Some(self.id)
    }

    /// The leader as this controller knows it, and whether this
    /// controller's log is applied to its end.
    pub fn view(&self) -> (Option<NodeId>, bool) {
        let m = self.raft.metrics();
        let m = m.borrow();
        let applied = m.last_applied.map(|l| l.index);
        (
            m.current_leader,
            applied.is_some() && applied == m.last_log_index,
        )
    }

    /// Once leader: every batch committed before is applied here; the
    /// state to start the controller from.
    pub async fn leader_state(&self) -> Result<Saved, ReplicaError> {
        let vote = self.raft.metrics().borrow().vote;
        tokio::time::timeout(self.timeout, self.raft.ensure_linearizable())
            .await
            .map_err(|_| ReplicaError::Raft("no majority confirmed it in time".into()))?
            .map_err(|e| ReplicaError::Raft(e.to_string()))?;
        let saved = self.sm.saved();
        // Still chosen, in the same election, now that it is applied.
        if !self.is_leader() || self.raft.metrics().borrow().vote != vote {
            return Err(ReplicaError::Raft(
                "another controller was chosen meanwhile".into(),
            ));
        }
        Ok(saved)
    }

    /// Why this controller, leader, may no longer act as in control: it
    /// is not leader any more, or no majority has answered it for
    /// `SlurmctldTimeout` (openraft keeps such a leader leader).
    pub fn not_in_control(&self) -> Option<String> {
        let m = self.raft.metrics();
        let m = m.borrow();
        if let Err(e) = &m.running_state {
            return Some(format!("Raft stopped: {e}"));
        }
        if m.state != ServerState::Leader || m.current_leader != Some(self.id) {
            return Some("another controller was chosen".into());
        }
        match m.millis_since_quorum_ack {
            Some(ms) if ms > self.timeout.as_millis() as u64 => Some(format!(
                "no majority of the controllers has answered for {ms} ms"
            )),
            _ => None,
        }
    }

    /// Answer a message from another controller (`kind`, JSON `body`):
    /// the JSON of Raft's answer.
    pub async fn serve(&self, kind: &str, body: &[u8]) -> Result<Vec<u8>, String> {
        fn de<T: serde::de::DeserializeOwned>(b: &[u8]) -> Result<T, String> {
            serde_json::from_slice(b).map_err(|e| format!("bad Raft message: {e}"))
        }
        let out = match kind {
            "append" => serde_json::to_vec(&self.raft.append_entries(de(body)?).await),
            "vote" => serde_json::to_vec(&self.raft.vote(de(body)?).await),
            "snapshot" => {
                let rpc: InstallSnapshotRequest<Types> = de(body)?;
                // A chunk is written at its offset into memory: bound it.
                if rpc.offset.saturating_add(rpc.data.len() as u64) > MAX_SNAPSHOT {
                    return Err(format!(
                        "a snapshot chunk past {MAX_SNAPSHOT} bytes (offset {})",
                        rpc.offset
                    ));
                }
                serde_json::to_vec(&self.raft.install_snapshot(rpc).await)
            }
            other => return Err(format!("unknown Raft message {other:?}")),
        };
        out.map_err(|e| e.to_string())
    }

    /// The writer's store for this controller while it is leader.
    pub fn store(
        self: &Arc<Self>,
        rt: tokio::runtime::Handle,
        dir: PathBuf,
        reserve: u64,
    ) -> Replicated {
        Replicated {
            replica: self.clone(),
            rt,
            pending: Vec::new(),
            dir,
            reserve,
            batches: 0,
            run: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0),
        }
    }
}

/// `entries` as the log entries to send: one batch, or parts of at most
/// about `bytes` each (as JSON; an entry larger alone is a part of its
/// own) named `id`.
pub fn split(entries: Vec<Entry>, bytes: usize, id: u64) -> Vec<Batch> {
    let sizes: Vec<usize> = entries
        .iter()
        .map(|e| serde_json::to_vec(e).map(|v| v.len()).unwrap_or(0) + 1)
        .collect();
    if sizes.iter().sum::<usize>() <= bytes {
        return vec![Batch {
            entries,
            part: None,
        }];
    }
    let mut groups: Vec<Vec<Entry>> = vec![Vec::new()];
    let mut size = 0;
    for (e, n) in entries.into_iter().zip(sizes) {
        let last = groups.last_mut().expect("one group at least");
        if !last.is_empty() && size + n > bytes {
            groups.push(Vec::new());
            size = 0;
        }
        size += n;
        groups.last_mut().expect("one group at least").push(e);
    }
    let of = groups.len() as u32;
    groups
        .into_iter()
        .enumerate()
        .map(|(k, entries)| Batch {
            entries,
            part: Some(Part {
                id,
                k: k as u32,
                of,
            }),
        })
        .collect()
}

/// The writer's batches, made durable by agreement instead of a local
/// journal.
pub struct Replicated {
    replica: Arc<Replica>,
    rt: tokio::runtime::Handle,
    pending: Vec<Entry>,
    dir: PathBuf,
    reserve: u64,
    /// Batches sent, and this run (they name split batches).
    batches: u64,
    run: u64,
}

impl crate::writer::Durable for Replicated {
    fn append(&mut self, e: Entry) {
        self.pending.push(e);
    }

    fn commit(&mut self) -> Result<(), crate::writer::NotSaved> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let entries = std::mem::take(&mut self.pending);
        self.batches += 1;
        let parts = split(entries, self.replica.part_bytes, self.run ^ self.batches);
        let raft = self.replica.raft.clone();
        let within = self.replica.timeout;
        // Parts go in turn, each agreed on before the next.
        let r = self.rt.block_on(async move {
            for b in parts {
                tokio::time::timeout(within, raft.client_write(b))
                    .await
                    .map_err(|_| {
                        format!("no majority of the controllers took the batch within {within:?}")
                    })?
                    .map_err(|e| format!("the other controllers did not take the batch: {e}"))?;
            }
            Ok::<(), String>(())
        });
        r.map_err(crate::writer::NotSaved::Deposed)
    }

    fn check_space(&mut self) -> Result<(), String> {
        crate::journal::free_space_left(&self.dir, self.reserve)
    }

    fn reserve(&self) -> u64 {
        self.reserve
    }

    fn after_batch(&mut self, _saved: &Saved) {
        // Every controller compacts its own log ([`Replica::start`]).
    }

    fn in_control(&self) -> Result<(), String> {
        match self.replica.not_in_control() {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
