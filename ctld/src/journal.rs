//! Durability in StateSaveLocation: a snapshot (`state.json`) plus an
//! append-only journal (`journal.log`).
//!
//! The writer appends every change of a batch, then makes the batch durable
//! with one `fdatasync` (group commit) before any reply of that batch leaves.
//!
//! Format. Each journal line is `CRC SEQ BODY`: CRC is the CRC-32 (8 hex
//! digits) of `SEQ BODY`, SEQ the batch's number (1, 2, 3, ... for the life of
//! the state directory) and BODY either one JSON [`Entry`] or `end N`, which
//! closes batch SEQ after its N entries. A batch is applied whole or not at
//! all. The snapshot starts with a header line `SLURMSTATE 1 seq=S crc=C
//! len=L` (S: the last batch it holds) followed by L bytes of JSON.
//!
//! Recovery. Batches at or below the snapshot's seq are skipped (they are in
//! it), so replaying a journal twice changes nothing. An incomplete or
//! damaged batch that nothing valid follows is what a crash mid-write
//! leaves: it was never acknowledged and is dropped. Damage with valid
//! batches after it (a bad disk, a hand edit) stops start-up unless `-i`
//! (then that batch alone is dropped, with a warning). Bytes that are not
//! UTF-8, NULs and bad checksums are all just damage.
//!
//! Compaction ([`Journal::compact`]): write `state.json.new`, sync; rename
//! `state.json` to `state.json.prev`, the new one to `state.json`; rename
//! `journal.log` to `journal.prev` and start an empty `journal.log`. A crash
//! between any two steps leaves a snapshot plus the journals that follow it.
//! A damaged `state.json` is never replaced by an empty cluster: with `-i`
//! the controller starts from a complete `state.json.new` (a compaction
//! that stopped before its renames), else from `state.json.prev` replaying
//! `journal.prev` and `journal.log` after it; with neither it refuses to
//! start.
//!
//! Every file here holds users' scripts and environments: the directory is
//! 0700 and the files 0600, owned by SlurmUser.

use serde::{Deserialize, Serialize};
use slurm_proto::{JobId, JobRecord};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Payload {
    pub script: String,
    pub environment: Vec<String>,
}

/// An operator's partition changes (`scontrol update PartitionName=`),
/// kept over restarts and laid over slurm.conf's values until
/// `scontrol reconfigure` reads the file again.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PartAdmin {
    pub state: Option<slurm_proto::PartitionState>,
    pub max_time: Option<Option<u32>>,
    pub default_time: Option<Option<u32>>,
    /// Made with `scontrol create partition`: its nodes (a hostlist). Such
    /// a partition outlives reconfigures too, until deleted.
    #[serde(default)]
    pub created: Option<String>,
    /// `Default=` given at its creation.
    #[serde(default)]
    pub default: Option<bool>,
}

/// Admin-set node state that survives restarts.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeAdmin {
    pub drain: bool,
    /// Set DOWN by an admin or by a failure (not by config).
    pub down: bool,
    pub reason: Option<String>,
    pub reason_time: Option<i64>,
    pub reason_uid: Option<u32>,
    /// Features set at run time (replacing the configured ones).
    #[serde(default)]
    pub features: Option<Vec<String>>,
    /// `scontrol reboot` asked for (see `state::reboot`).
    #[serde(default)]
    pub reboot: Option<RebootRequest>,
}

/// A pending `scontrol reboot` of one node.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RebootRequest {
    pub asap: bool,
    /// `nextstate=`: what the node is once back (none: as it was).
    pub next: Option<RebootNext>,
    pub requested: i64,
    /// When it was sent to the node.
    pub issued: Option<i64>,
    /// The request drained the node (ASAP): undrained once back.
    pub drained: bool,
    /// The reason the request left (cleared once back, if unchanged).
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum RebootNext {
    Resume,
    Down,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum Entry {
    Job(Arc<JobRecord>),
    Payload(JobId, Arc<Payload>),
    /// One script and environment for each of these jobs (an array's
    /// tasks): written once, shared in memory.
    Payloads(Vec<JobId>, Arc<Payload>),
    RemoveJob(JobId),
    Node(String, NodeAdmin),
    NextJobId(u32),
    Reservation(slurm_proto::ReservationRecord),
    RemoveReservation(String),
    DynNode(slurm_proto::NodeSpec),
    RemoveNode(String),
    /// An accounting record queued for slurmdbd.
    Acct(Box<slurm_proto::acct::SeqRecord>),
    /// slurmdbd has every record up to this seq.
    AcctAcked(u64),
    /// A partition's operator changes (`None`: back to slurm.conf's).
    Partition(String, Option<PartAdmin>),
}

/// Whether the file system of `dir` has at least `reserve` bytes free
/// (always with `reserve` 0); the error says how much it has.
pub fn free_space_left(dir: &Path, reserve: u64) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt;
    if reserve == 0 {
        return Ok(());
    }
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return Ok(());
    };
    // SAFETY: statvfs is plain data; the path is a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } == 0 {
        let free = (st.f_bavail as u64).saturating_mul(st.f_frsize as u64);
        if free < reserve {
            return Err(format!(
                "{} has {free} bytes free, less than journal_reserve_bytes={reserve}",
                dir.display()
            ));
        }
    }
    Ok(())
}

/// Everything recovered at start-up.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Saved {
    pub next_job_id: u32,
    pub jobs: BTreeMap<JobId, Arc<JobRecord>>,
    /// Scripts and environments; an array's tasks share one, saved once.
    #[serde(with = "shared_payloads")]
    pub payloads: BTreeMap<JobId, Arc<Payload>>,
    pub nodes: BTreeMap<String, NodeAdmin>,
    #[serde(default)]
    pub reservations: BTreeMap<String, slurm_proto::ReservationRecord>,
    /// Nodes created at run time (`scontrol create NodeName=...`).
    #[serde(default)]
    pub dyn_nodes: BTreeMap<String, slurm_proto::NodeSpec>,
    /// The accounting outbox.
    #[serde(default)]
    pub acct: crate::outbox::AcctQueue,
    /// Partition changes made with `scontrol update`.
    #[serde(default)]
    pub partitions: BTreeMap<String, PartAdmin>,
}

/// `Saved::payloads` in `state.json`: runs of consecutive jobs sharing one
/// payload (an array's tasks) as one group, `{"ids": [..], "payload": ..}`,
/// and read back shared. A map of job id to payload (as written before)
/// is read too.
mod shared_payloads {
    use super::Payload;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use slurm_proto::JobId;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    #[derive(Serialize, Deserialize)]
    struct Group {
        ids: Vec<JobId>,
        payload: Arc<Payload>,
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Form {
        Groups(Vec<Group>),
        // (Keys as strings: an untagged enum reads JSON object keys only so.)
        Map(BTreeMap<String, Arc<Payload>>),
    }

    pub fn serialize<S: Serializer>(
        m: &BTreeMap<JobId, Arc<Payload>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let mut groups: Vec<Group> = Vec::new();
        for (id, p) in m {
            match groups.last_mut() {
                Some(g) if Arc::ptr_eq(&g.payload, p) => g.ids.push(*id),
                _ => groups.push(Group {
                    ids: vec![*id],
                    payload: p.clone(),
                }),
            }
        }
        groups.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<JobId, Arc<Payload>>, D::Error> {
        Ok(match Form::deserialize(d)? {
            Form::Map(m) => m
                .into_iter()
                .map(|(k, p)| {
                    k.parse::<JobId>()
                        .map(|id| (id, p))
                        .map_err(|_| serde::de::Error::custom(format!("job id {k:?}")))
                })
                .collect::<Result<_, _>>()?,
            Form::Groups(groups) => groups
                .into_iter()
                .flat_map(|g| {
                    let p = g.payload;
                    g.ids.into_iter().map(move |id| (id, p.clone()))
                })
                .collect(),
        })
    }
}

impl Saved {
    pub fn apply(&mut self, e: Entry) {
        match e {
            Entry::Job(j) => {
                self.jobs.insert(j.job_id, j);
            }
            Entry::Payload(id, p) => {
                self.payloads.insert(id, p);
            }
            Entry::Payloads(ids, p) => {
                for id in ids {
                    self.payloads.insert(id, p.clone());
                }
            }
            Entry::RemoveJob(id) => {
                self.jobs.remove(&id);
                self.payloads.remove(&id);
            }
            Entry::Node(n, a) => {
                self.nodes.insert(n, a);
            }
            Entry::NextJobId(n) => self.next_job_id = n,
            Entry::Reservation(r) => {
                self.reservations.insert(r.name.clone(), r);
            }
            Entry::RemoveReservation(n) => {
                self.reservations.remove(&n);
            }
            Entry::DynNode(n) => {
                self.dyn_nodes.insert(n.name.clone(), n);
            }
            Entry::RemoveNode(n) => {
                self.dyn_nodes.remove(&n);
            }
            Entry::Acct(r) => self.acct.push(*r),
            Entry::AcctAcked(n) => self.acct.acked(n),
            Entry::Partition(n, Some(a)) => {
                self.partitions.insert(n, a);
            }
            Entry::Partition(n, None) => {
                self.partitions.remove(&n);
            }
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: corrupt state entry ({msg}); start with -i to skip it")]
    Corrupt {
        path: PathBuf,
        line: usize,
        msg: String,
    },
    #[error("{path}: damaged snapshot ({msg}); {hint}")]
    Snapshot {
        path: PathBuf,
        msg: String,
        hint: &'static str,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Default of `SlurmctldParameters=journal_reserve_bytes`.
pub const DEFAULT_RESERVE: u64 = 16 << 20;

const SNAP: &str = "state.json";
const SNAP_NEW: &str = "state.json.new";
const SNAP_PREV: &str = "state.json.prev";
const LOG: &str = "journal.log";
const LOG_PREV: &str = "journal.prev";

/// Who owns the state files (SlurmUser), applied when running as root.
#[derive(Debug, Clone, Copy, Default)]
pub struct Owner {
    pub uid: Option<u32>,
    pub gid: Option<u32>,
}

impl Owner {
    /// SlurmUser's uid and gid, if it names a user other than the caller.
    pub fn slurm_user(name: &str) -> Owner {
        match slurm_common::users::user_by_name(name) {
            Some(u) => Owner {
                uid: Some(u.uid),
                gid: Some(u.gid),
            },
            None => Owner::default(),
        }
    }

    fn apply(&self, path: &Path) -> Result<(), JournalError> {
        // SAFETY: geteuid has no preconditions.
        if self.uid.is_none() || unsafe { libc::geteuid() } != 0 {
            return Ok(());
        }
        std::os::unix::fs::lchown(path, self.uid, self.gid).map_err(io(path))
    }
}

/// How start-up went, for the log.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Recovery {
    /// Batches applied from the journals.
    pub batches: u64,
    /// Damaged batches skipped with `-i` (line numbers in their files).
    pub skipped: Vec<String>,
    /// A torn batch at the end was dropped (never acknowledged).
    pub torn_tail: bool,
    /// Started from `state.json.prev` because `state.json` was damaged.
    pub from_previous: bool,
}

pub struct Journal {
    dir: PathBuf,
    file: File,
    owner: Owner,
    /// Bytes kept preallocated past the end of `journal.log`, so changes
    /// can still be saved once the file system is full (0: none).
    reserve: u64,
    /// `journal.log` has blocks allocated up to this offset.
    allocated_to: u64,
    /// The last batch made durable.
    seq: u64,
    /// Bytes appended since the last snapshot.
    pub size: u64,
    /// Entries of the batch being built, each already serialized.
    pending: Vec<Vec<u8>>,
}

impl Journal {
    /// Recover state from `dir` (creating it) and open a fresh journal.
    /// `ignore_errors` skips damaged entries (`slurmctld -i`); `clear`
    /// discards saved jobs (`slurmctld -c`).
    pub fn open(
        dir: &Path,
        ignore_errors: bool,
        clear: bool,
    ) -> Result<(Journal, Saved), JournalError> {
        Journal::open_as(dir, ignore_errors, clear, Owner::default()).map(|(j, s, _)| (j, s))
    }

    /// [`Journal::open`] with the files owned by `owner` and a report of
    /// what recovery found.
    pub fn open_as(
        dir: &Path,
        ignore_errors: bool,
        clear: bool,
        owner: Owner,
    ) -> Result<(Journal, Saved, Recovery), JournalError> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io(dir))?;
        owner.apply(dir)?;
        for f in [SNAP, SNAP_PREV, LOG, LOG_PREV] {
            let p = dir.join(f);
            // The directory belongs to SlurmUser: never follow a link
            // planted there with root's rights.
            if std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(io(&p)(std::io::Error::other("refusing a symbolic link")));
            }
            if p.exists() {
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))
                    .map_err(io(&p))?;
                owner.apply(&p)?;
            }
        }
        // A compaction cut short may have left a complete new snapshot: of
        // use only when state.json is damaged (below); the next compaction
        // writes it afresh.
        let new = dir.join(SNAP_NEW);
        if std::fs::symlink_metadata(&new).is_ok_and(|m| m.file_type().is_symlink()) {
            let _ = std::fs::remove_file(&new);
        }
        let mut rec = Recovery::default();
        let snap = dir.join(SNAP);
        let prev = dir.join(SNAP_PREV);
        let (mut saved, base_seq, from_prev) = match load_snapshot(&snap) {
            Ok(Some((s, seq))) => (s, seq, false),
            // Missing: a crash between compaction's two renames leaves the
            // previous one only; a new directory has neither.
            Ok(None) => match load_snapshot(&prev) {
                Ok(Some((s, seq))) => (s, seq, true),
                Ok(None) => (Saved::default(), 0, false),
                Err(e) => return Err(e),
            },
            Err(e) => {
                // With -i, a complete state.json.new (a compaction that
                // stopped before its renames) is the newest state there is.
                let new_ok = if ignore_errors {
                    load_snapshot(&new).ok().flatten()
                } else {
                    None
                };
                let prev_ok = load_snapshot(&prev);
                // Start from `from` (its snapshot, and whether the journal
                // before it must be replayed too), the damaged file set
                // aside so the compaction below never renames it over a
                // good one.
                let mut recover_from = |from: &Path, s: Saved, seq: u64, with_prev_log: bool| {
                    tracing::warn!("{e}: starting from {}", from.display());
                    let aside =
                        dir.join(format!("state.json.damaged.{}", slurm_common::auth::now()));
                    std::fs::rename(&snap, &aside).map_err(io(&aside))?;
                    rec.from_previous = true;
                    Ok::<_, JournalError>((s, seq, with_prev_log))
                };
                match (ignore_errors, prev_ok) {
                    (true, _) if new_ok.is_some() => {
                        let (s, seq) = new_ok.unwrap_or_default();
                        recover_from(&new, s, seq, false)?
                    }
                    (true, Ok(Some((s, seq)))) => recover_from(&prev, s, seq, true)?,
                    (true, _) => {
                        return Err(JournalError::Snapshot {
                            path: snap,
                            msg: snapshot_msg(&e),
                            hint: "no usable state.json.prev either; refusing to start with an \
                                   empty cluster (move the file away to start empty)",
                        })
                    }
                    (false, Ok(Some(_))) => {
                        return Err(JournalError::Snapshot {
                            path: snap,
                            msg: snapshot_msg(&e),
                            hint: "start with -i to recover from state.json.prev and the journals",
                        })
                    }
                    (false, _) => return Err(e),
                }
            }
        };
        let mut last = base_seq;
        let mut logs = Vec::new();
        if from_prev {
            logs.push(dir.join(LOG_PREV));
        }
        logs.push(dir.join(LOG));
        for path in &logs {
            let bytes = match std::fs::read(path) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io(path)(e)),
            };
            replay(path, &bytes, &mut saved, &mut last, ignore_errors, &mut rec)?;
        }
        if clear {
            saved.jobs.clear();
            saved.payloads.clear();
        }
        let lpath = dir.join(LOG);
        let file = open_log(&lpath)?;
        let mut j = Journal {
            dir: dir.to_path_buf(),
            file,
            owner,
            reserve: DEFAULT_RESERVE,
            allocated_to: 0,
            seq: last,
            size: 0,
            pending: Vec::new(),
        };
        owner.apply(&lpath)?;
        j.compact(&saved)?;
        Ok((j, saved, rec))
    }

    /// Keep `bytes` preallocated past the journal's end (see
    /// [`Journal::check_space`]).
    pub fn set_reserve(&mut self, bytes: u64) {
        self.reserve = bytes;
    }

    /// The bytes kept preallocated (0: none).
    pub fn reserve(&self) -> u64 {
        self.reserve
    }

    /// Allocate the reserve past the journal's end (`FALLOC_FL_KEEP_SIZE`:
    /// blocks only, the length is unchanged).
    fn allocate_reserve(&mut self) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        let (off, len) = (self.size as libc::off_t, self.reserve as libc::off_t);
        // SAFETY: the fd is this journal's open file; KEEP_SIZE only
        // allocates blocks.
        let r =
            unsafe { libc::fallocate(self.file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, off, len) };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        self.allocated_to = self.size + self.reserve;
        Ok(())
    }

    /// Give back the blocks preallocated past the end of the journal file
    /// being retired (it becomes `journal.prev`), so its reserve is free
    /// for the new journal's.
    fn release_reserve(&mut self) {
        use std::os::fd::AsRawFd;
        if self.allocated_to <= self.size {
            return;
        }
        let (off, len) = (
            self.size as libc::off_t,
            (self.allocated_to - self.size) as libc::off_t,
        );
        // SAFETY: as above; punching past the end frees blocks and keeps
        // the length.
        let r = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                off,
                len,
            )
        };
        if r != 0 {
            tracing::debug!(
                "cannot free the old journal's reserve: {}",
                std::io::Error::last_os_error()
            );
        }
        self.allocated_to = self.size;
    }

    /// Whether new work may be taken. The journal keeps `reserve` bytes
    /// preallocated past its end, so the changes of work already taken
    /// (jobs ending, nodes reporting, cancellations) can still be saved
    /// when the file system fills up; new work is refused once that
    /// reserve cannot be renewed or less than another reserve is free.
    /// The error says why, naming the directory.
    pub fn check_space(&mut self) -> Result<(), String> {
        if self.reserve == 0 {
            return Ok(());
        }
        if self.allocated_to < self.size + self.reserve / 2 {
            if let Err(e) = self.allocate_reserve() {
                // File systems without fallocate rely on the free-space
                // check alone.
                if e.raw_os_error() != Some(libc::EOPNOTSUPP) {
                    return Err(format!(
                        "cannot keep {} bytes for the journal in {}: {e}",
                        self.reserve,
                        self.dir.display()
                    ));
                }
            }
        }
        free_space_left(&self.dir, self.reserve)
    }

    /// Queue an entry; it is durable after the next [`Journal::commit`].
    pub fn append(&mut self, e: &Entry) {
        match serde_json::to_vec(e) {
            Ok(b) => self.pending.push(b),
            Err(err) => tracing::error!("cannot encode a state entry: {err}"),
        }
    }

    pub fn pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// The last batch made durable.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Write and sync everything queued as one batch (one fdatasync). On an
    /// error nothing of the batch counts: the file is cut back to where it
    /// was, and the entries stay queued for the next try.
    pub fn commit(&mut self) -> Result<(), JournalError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let seq = self.seq + 1;
        let mut buf = Vec::with_capacity(self.pending.iter().map(|e| e.len() + 32).sum());
        for e in &self.pending {
            push_line(&mut buf, seq, e);
        }
        push_line(
            &mut buf,
            seq,
            format!("end {}", self.pending.len()).as_bytes(),
        );
        let path = self.dir.join(LOG);
        let res = self
            .file
            .write_all(&buf)
            .and_then(|_| self.file.sync_data());
        if let Err(e) = res {
            // Leave no partial batch for the next one to follow. Cutting
            // the file back also frees the blocks kept past its end: take
            // the reserve again at once, so the next try has it.
            let _ = self.file.set_len(self.size);
            self.allocated_to = self.size;
            if self.reserve > 0 {
                let _ = self.allocate_reserve();
            }
            return Err(io(&path)(e));
        }
        self.seq = seq;
        self.size += buf.len() as u64;
        self.pending.clear();
        Ok(())
    }

    /// Replace snapshot + journal by a snapshot of `saved` (see the module
    /// comment for the steps and why a crash between any two is safe).
    pub fn compact(&mut self, saved: &Saved) -> Result<(), JournalError> {
        self.compact_steps(saved, usize::MAX)
    }

    /// Compaction stopped after `steps` of its steps, as a crash would.
    fn compact_steps(&mut self, saved: &Saved, steps: usize) -> Result<(), JournalError> {
        self.commit()?;
        let d = &self.dir.clone();
        let (snap, new, prev) = (d.join(SNAP), d.join(SNAP_NEW), d.join(SNAP_PREV));
        let (log, log_prev) = (d.join(LOG), d.join(LOG_PREV));
        write_snapshot(&new, saved, self.seq, self.owner)?;
        if steps < 1 {
            return Ok(());
        }
        if snap.exists() {
            std::fs::rename(&snap, &prev).map_err(io(&prev))?;
        }
        if steps < 2 {
            return Ok(());
        }
        std::fs::rename(&new, &snap).map_err(io(&snap))?;
        let _ = sync_dir(d);
        if steps < 3 {
            return Ok(());
        }
        std::fs::rename(&log, &log_prev).map_err(io(&log_prev))?;
        // Its reserve goes to the journal that follows it.
        self.release_reserve();
        if steps < 4 {
            return Ok(());
        }
        match open_log(&log) {
            Ok(f) => {
                self.file = f;
                self.size = 0;
                self.allocated_to = 0;
            }
            Err(e) => {
                // The open journal is now named journal.prev, which recovery
                // does not read after this snapshot: give it its name back,
                // or stop before anything more is acknowledged into it.
                if let Err(back) = std::fs::rename(&log_prev, &log) {
                    tracing::error!(
                        "{e}; cannot rename {} back ({back}): exiting",
                        log_prev.display()
                    );
                    std::process::exit(1);
                }
                return Err(e);
            }
        }
        if let Err(e) = self.owner.apply(&log) {
            tracing::warn!("{e}");
        }
        let _ = sync_dir(d);
        Ok(())
    }
}

fn snapshot_msg(e: &JournalError) -> String {
    match e {
        JournalError::Corrupt { msg, .. } => msg.clone(),
        other => other.to_string(),
    }
}

fn open_log(path: &Path) -> Result<File, JournalError> {
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(io(path))?;
    f.sync_all().map_err(io(path))?;
    Ok(f)
}

/// Make the names in `dir` durable (after a rename or a new file).
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

fn push_line(buf: &mut Vec<u8>, seq: u64, body: &[u8]) {
    let head = format!("{seq} ");
    let mut h = crc32fast::Hasher::new();
    h.update(head.as_bytes());
    h.update(body);
    buf.extend_from_slice(format!("{:08x} ", h.finalize()).as_bytes());
    buf.extend_from_slice(head.as_bytes());
    buf.extend_from_slice(body);
    buf.push(b'\n');
}

/// One journal line, checked.
enum Line {
    Entry(u64, Entry),
    End(u64, usize),
    /// An entry written before batches and checksums existed.
    Legacy(Entry),
}

fn parse_line(raw: &[u8]) -> Result<Line, String> {
    if raw.first() == Some(&b'{') {
        return serde_json::from_slice(raw)
            .map(Line::Legacy)
            .map_err(|e| e.to_string());
    }
    if raw.len() < 10 || raw[8] != b' ' {
        return Err("not a journal line".into());
    }
    let crc = std::str::from_utf8(&raw[..8])
        .ok()
        .and_then(|s| u32::from_str_radix(s, 16).ok())
        .ok_or("bad checksum field")?;
    let rest = &raw[9..];
    if crc32fast::hash(rest) != crc {
        return Err("checksum mismatch".into());
    }
    let sp = rest
        .iter()
        .position(|b| *b == b' ')
        .ok_or("no batch number")?;
    let seq: u64 = std::str::from_utf8(&rest[..sp])
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or("bad batch number")?;
    let body = &rest[sp + 1..];
    if let Some(n) = body.strip_prefix(b"end ") {
        let n = std::str::from_utf8(n)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or("bad batch end")?;
        return Ok(Line::End(seq, n));
    }
    serde_json::from_slice(body)
        .map(|e| Line::Entry(seq, e))
        .map_err(|e| e.to_string())
}

/// Apply the complete batches of one journal file after `*last`.
fn replay(
    path: &Path,
    bytes: &[u8],
    saved: &mut Saved,
    last: &mut u64,
    ignore: bool,
    rec: &mut Recovery,
) -> Result<(), JournalError> {
    // The batch being read: its seq, entries, and the first damage in it.
    let mut cur: Option<u64> = None;
    let mut entries: Vec<Entry> = Vec::new();
    let mut damage: Option<(usize, String)> = None;
    // Damage not yet known to be a torn tail (something valid follows it).
    let mut open_damage: Option<(usize, String)> = None;
    let corrupt = |line: usize, msg: String| JournalError::Corrupt {
        path: path.to_path_buf(),
        line,
        msg,
    };
    for (i, raw) in bytes.split(|b| *b == b'\n').enumerate() {
        let lineno = i + 1;
        if raw.is_empty() {
            continue;
        }
        match parse_line(raw) {
            Ok(Line::Legacy(e)) => {
                if let Some((l, m)) = open_damage.take() {
                    if !ignore {
                        return Err(corrupt(l, m));
                    }
                    rec.skipped.push(format!("{}:{l}", path.display()));
                }
                if *last == 0 {
                    saved.apply(e);
                }
            }
            Ok(Line::Entry(seq, e)) => {
                if cur != Some(seq) {
                    if cur.is_some() {
                        // The previous batch never ended.
                        open_damage.get_or_insert((lineno - 1, "batch without its end".into()));
                    }
                    cur = Some(seq);
                    entries.clear();
                    damage = None;
                }
                if damage.is_none() {
                    entries.push(e);
                }
            }
            Ok(Line::End(seq, n)) => {
                let whole = cur == Some(seq) && damage.is_none() && entries.len() == n;
                let batch = std::mem::take(&mut entries);
                let bad = damage.take();
                cur = None;
                if !whole {
                    let (l, m) = bad.unwrap_or((lineno, "batch incomplete".into()));
                    open_damage.get_or_insert((l, m));
                    continue;
                }
                // A valid batch follows earlier damage: that damage is not a
                // torn tail.
                if let Some((l, m)) = open_damage.take() {
                    if !ignore {
                        return Err(corrupt(l, m));
                    }
                    tracing::warn!("{}:{l}: damaged batch skipped ({m})", path.display());
                    rec.skipped.push(format!("{}:{l}", path.display()));
                }
                if seq <= *last {
                    continue;
                }
                if seq != *last + 1 && *last != 0 {
                    let msg = format!("batches {} to {} are missing", *last + 1, seq - 1);
                    if !ignore {
                        return Err(corrupt(lineno, msg));
                    }
                    tracing::warn!("{}:{lineno}: {msg}", path.display());
                    rec.skipped.push(format!("{}:{lineno}", path.display()));
                }
                for e in batch {
                    saved.apply(e);
                }
                *last = seq;
                rec.batches += 1;
            }
            Err(msg) => {
                if cur.is_some() {
                    damage.get_or_insert((lineno, msg.clone()));
                }
                open_damage.get_or_insert((lineno, msg));
            }
        }
    }
    if cur.is_some() || open_damage.is_some() {
        // Nothing valid after it: a crash mid-write, never acknowledged.
        rec.torn_tail = true;
        tracing::warn!("{}: dropped a batch torn by a crash", path.display());
    }
    Ok(())
}

/// `Ok(None)` when the file does not exist.
fn load_snapshot(path: &Path) -> Result<Option<(Saved, u64)>, JournalError> {
    let b = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(path)(e)),
    };
    let corrupt = |msg: String| JournalError::Corrupt {
        path: path.to_path_buf(),
        line: 1,
        msg,
    };
    if b.first() == Some(&b'{') {
        // Written before snapshots had a header.
        return serde_json::from_slice(&b)
            .map(|s| Some((s, 0)))
            .map_err(|e| corrupt(e.to_string()));
    }
    let nl = b
        .iter()
        .position(|c| *c == b'\n')
        .ok_or_else(|| corrupt("no header".into()))?;
    let head = std::str::from_utf8(&b[..nl]).map_err(|_| corrupt("bad header".into()))?;
    let mut seq = None;
    let mut crc = None;
    let mut len = None;
    let mut words = head.split(' ');
    if words.next() != Some("SLURMSTATE") || words.next() != Some("1") {
        return Err(corrupt(format!("unknown header {head:?}")));
    }
    for w in words {
        match w.split_once('=') {
            Some(("seq", v)) => seq = v.parse::<u64>().ok(),
            Some(("crc", v)) => crc = u32::from_str_radix(v, 16).ok(),
            Some(("len", v)) => len = v.parse::<usize>().ok(),
            _ => {}
        }
    }
    let (Some(seq), Some(crc), Some(len)) = (seq, crc, len) else {
        return Err(corrupt(format!("bad header {head:?}")));
    };
    let body = &b[nl + 1..];
    if body.len() != len {
        return Err(corrupt(format!("{} bytes, header says {len}", body.len())));
    }
    if crc32fast::hash(body) != crc {
        return Err(corrupt("checksum mismatch".into()));
    }
    serde_json::from_slice(body)
        .map(|s| Some((s, seq)))
        .map_err(|e| corrupt(e.to_string()))
}

fn write_snapshot(path: &Path, saved: &Saved, seq: u64, owner: Owner) -> Result<(), JournalError> {
    let body = serde_json::to_vec(saved).map_err(|e| io(path)(std::io::Error::other(e)))?;
    let head = format!(
        "SLURMSTATE 1 seq={seq} crc={:08x} len={}\n",
        crc32fast::hash(&body),
        body.len()
    );
    // A link planted at the name is removed, never followed.
    let _ = std::fs::remove_file(path);
    let mut f = OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(io(path))?;
    let res = f
        .write_all(head.as_bytes())
        .and_then(|_| f.write_all(&body))
        .and_then(|_| f.sync_all());
    if let Err(e) = res {
        drop(f);
        let _ = std::fs::remove_file(path);
        return Err(io(path)(e));
    }
    owner.apply(path)
}

#[cfg(test)]
mod tests;
