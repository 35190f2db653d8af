//! The controller's state and every transition of it. Only the writer thread
//! calls into this module (invariant 1: one writer); each call records the
//! journal entries and node-daemon effects it causes, which the writer makes
//! durable and dispatches after the batch commits.

use crate::journal::{Entry, NodeAdmin, Payload, Saved};

mod shared;
pub use shared::Chunked;
mod accounting;
mod config;
mod deps;
mod env;
mod gang;
mod jobs;
mod node_use;
mod nodes;
mod partitions;
mod preempt;
mod priority;
mod reboot;
mod reservations;
mod schedule;
mod steps;
mod submit;
mod suspend;
mod view;

use slurm_common::conf::{PartitionStateConf, SlurmConf};
use slurm_common::{jobspec, users};
use slurm_plugins::view::{GresCounts, GresReq, Hold};
use slurm_plugins::{
    ClusterView, Decision, JobView, NodeAlloc, NodeView, PartitionView, PendingReason, RunningJob,
    Scheduler,
};
use slurm_proto::*;
use std::collections::HashMap;
use std::sync::Arc;

pub use config::{load_topology, Reconf};
pub use deps::MAX_DEPENDENCIES;
use deps::*;
pub use env::{array_env, expand_array_patterns, job_env, JOB_ENV_VARS};
use jobs::Run;
use node_use::*;
pub use nodes::NOT_RESPONDING;
use partitions::*;
use schedule::*;
pub use submit::SubmitLimits;

/// Work for the node daemons, sent after the batch that caused it is durable.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Launch {
        node: String,
        addr: String,
        launch: Box<BatchLaunch>,
    },
    Terminate {
        node: String,
        addr: String,
        job_id: JobId,
        kill_wait: u32,
        /// The run being ended (`None`: whichever).
        start_time: Option<i64>,
        /// Why (what the job's error file is told).
        cause: slurm_proto::TermCause,
    },
    Signal {
        node: String,
        addr: String,
        job_id: JobId,
        signal: i32,
    },
    /// `scontrol notify`: a message for the job's batch script or sruns.
    Notify {
        node: String,
        addr: String,
        job_id: JobId,
        message: String,
    },
    SignalStep {
        node: String,
        addr: String,
        job_id: JobId,
        step_id: u32,
        signal: i32,
        /// The controller ending the step (its time limit): the node tells
        /// its srun why and ends it with SIGTERM, then SIGKILL.
        cause: slurm_proto::TermCause,
        /// The job's run the step belongs to.
        job_start: Option<i64>,
    },
    /// Stop (`suspend`) or continue a job's processes on one node; `seq`
    /// orders such requests (later ones win).
    Suspend {
        node: String,
        addr: String,
        job_id: JobId,
        suspend: bool,
        seq: u64,
        /// This controller run (orders requests across restarts).
        epoch: u64,
        /// The run (the job's start time).
        start_time: Option<i64>,
    },
    /// `PrologFlags=Alloc`: set the job up (Prolog, cgroup) on a node
    /// without its batch script.
    Prologue {
        node: String,
        addr: String,
        facts: Box<JobPrologue>,
    },
    /// `scontrol reboot`: run `RebootProgram` there.
    Reboot { node: String, addr: String },
}

/// What accounting last heard of a step: state, end, exit status, CPU used.
type StepSent = (JobState, Option<i64>, i32, u64);

/// Who is asking.
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    pub uid: u32,
    pub gid: u32,
    /// root or SlurmUser.
    pub privileged: bool,
    /// root, SlurmUser or accounting's AdminLevel Operator/Administrator
    /// (Slurm's `validate_operator`): what operators may do to others'
    /// jobs, reservations and priorities; nothing else.
    pub operator: bool,
    /// root, SlurmUser or AdminLevel Administrator (Slurm's
    /// `validate_super_user`): nodes, partitions, reboots, AdminComment.
    pub admin: bool,
}

/// Who is asking, as the user and group databases name them. Looked up by
/// the RPC server before a request that needs names reaches the writer
/// (the writer waits on nothing but the journal, and a directory service
/// can be slow); the state machine itself never calls them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The user's name; `None` when the database has none for the uid.
    pub user: Option<String>,
    /// The primary group's name (its gid in digits when it has none).
    pub group: String,
    /// The names of every group the user is in (for `AllowGroups`).
    pub groups: Vec<String>,
}

impl Identity {
    /// Look `uid` and `gid` up in the system's databases (NSS); the
    /// user's other groups only when `all_groups` (a partition has
    /// `AllowGroups`; otherwise nothing reads them).
    pub fn look_up(uid: u32, gid: u32, all_groups: bool) -> Identity {
        let user = users::user_by_uid(uid).map(|u| u.name);
        let gids = match &user {
            Some(name) if all_groups => users::group_list(name, gid),
            _ => vec![gid],
        };
        Identity {
            group: users::group_name_or_id(gid),
            groups: gids.iter().map(|g| users::group_name_or_id(*g)).collect(),
            user,
        }
    }

    /// What a request carries no names for is known by its numbers.
    pub fn numeric(gid: u32) -> Identity {
        Identity {
            user: None,
            group: gid.to_string(),
            groups: vec![gid.to_string()],
        }
    }

    /// The user's name, or the uid in digits.
    pub fn user_or(&self, uid: u32) -> String {
        self.user.clone().unwrap_or_else(|| uid.to_string())
    }

    /// Whether requests of this kind use the caller's names (and so come
    /// with them looked up).
    pub fn needed_by(body: &RequestBody) -> bool {
        matches!(
            body,
            RequestBody::SubmitBatchJob(_)
                | RequestBody::AllocateJob(_)
                | RequestBody::TestJob(_)
                | RequestBody::UpdateJob { .. }
                | RequestBody::CreateReservation(_)
        )
    }

    /// Requests about jobs that accounting's operators and account
    /// coordinators may make for others: named when accounting has any
    /// ([`Snapshot::delegated`]), so the writer can tell who asks.
    pub fn needed_when_delegated(body: &RequestBody) -> bool {
        matches!(
            body,
            RequestBody::Cancel(_)
                | RequestBody::SuspendJob { .. }
                | RequestBody::UpdateStep { .. }
                | RequestBody::CancelStep { .. }
                | RequestBody::TopJobs { .. }
                | RequestBody::UpdateReservation(_)
                | RequestBody::DeleteReservation { .. }
                | RequestBody::GetJobScript { .. }
                | RequestBody::UpdateNode { .. }
                | RequestBody::CreateNode(_)
                | RequestBody::DeleteNode { .. }
                | RequestBody::RebootNodes(_)
                | RequestBody::UpdatePartition(_)
                | RequestBody::CreatePartition(_)
                | RequestBody::DeletePartition { .. }
                | RequestBody::SetFsDampeningFactor { .. }
        )
    }
}

/// What readers see: an immutable picture of the state after a batch.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// By job id; chunks shared with the snapshot before where every
    /// record is the same one ([`Chunked`]).
    pub jobs: Chunked<Arc<JobRecord>>,
    /// Shared with the snapshot before where unchanged ([`Chunked`]).
    pub nodes: Chunked<NodeRecord>,
    pub partitions: Vec<PartitionRecord>,
    pub config: ConfigDump,
    pub last_update: i64,
    pub diag: DiagStats,
    pub reservations: Vec<ReservationRecord>,
    /// By job id; shared with the snapshot before where unchanged.
    pub priorities: Chunked<JobPriority>,
    pub weights: Vec<(String, u32)>,
    pub shares: Vec<ShareInfo>,
    pub licenses: Vec<LicenseInfo>,
    /// Counts published snapshots (set by the writer).
    pub version: u64,
    /// Identifies this controller run (set by the writer).
    pub epoch: u64,
    /// Per job (parallel to `jobs`, chunk by chunk): the version at which
    /// it last changed.
    pub job_changed: Chunked<u64>,
    /// Every switch and block (`scontrol show topology`).
    pub topology: Arc<Vec<slurm_proto::TopologyEntry>>,
    /// `PrivateData`: what readers may not see of other users.
    pub private: slurm_common::private::PrivateData,
    /// Users with AdminLevel Operator or Administrator (see everything).
    pub operators: Arc<std::collections::HashSet<String>>,
    /// Users with AdminLevel Administrator (Slurm's super users).
    pub administrators: Arc<std::collections::HashSet<String>>,
    /// Accounting names operators or account coordinators (who may act
    /// on others' jobs).
    pub delegated: bool,
    /// Account coordinators (lower-cased names) and the accounts each
    /// coordinates, sub-accounts included (lower-cased).
    pub coordinators: Arc<Coordinators>,
    /// Node name → index in `nodes`.
    pub node_index: Arc<HashMap<String, usize>>,
    /// The configuration in force (slurm.conf as last read).
    pub conf: Option<Arc<SlurmConf>>,
}

impl Snapshot {
    /// The controller's statistics with its pending and running jobs
    /// counted (when asked, not at each publish: a count of every job per
    /// publish was most of its cost with 100,000 jobs queued).
    pub fn diag_counted(&self) -> DiagStats {
        let mut d = self.diag.clone();
        for j in &self.jobs {
            match j.state {
                JobState::Pending => d.jobs_pending += 1,
                JobState::Running => d.jobs_running += 1,
                _ => {}
            }
        }
        d
    }

    /// Whether `uid` (named `name`) sees every user's data: root, SlurmUser
    /// or an operator.
    pub fn sees_all(&self, uid: u32, slurm_uid: u32, name: impl FnOnce() -> String) -> bool {
        uid == 0
            || uid == slurm_uid
            || (!self.operators.is_empty() && self.operators.contains(&name().to_ascii_lowercase()))
    }

    /// Which jobs `uid` (named `name`) may see under `PrivateData=jobs`
    /// (`private`): `None` when every job; otherwise its own and, for an
    /// account coordinator, those of the accounts it coordinates (as
    /// Slurm's).
    pub fn job_viewer(
        &self,
        private: bool,
        uid: u32,
        slurm_uid: u32,
        name: impl Fn() -> String,
    ) -> Option<JobViewer> {
        let looked_up = std::cell::OnceCell::new();
        let name = || looked_up.get_or_init(&name).clone();
        if !private || self.sees_all(uid, slurm_uid, name) {
            return None;
        }
        let accounts = match self.coordinators.is_empty() {
            true => None,
            false => self.coordinators.get(&name().to_ascii_lowercase()).cloned(),
        };
        Some(JobViewer { uid, accounts })
    }
}

/// Coordinators' names → the accounts each coordinates (lower-cased).
pub type Coordinators = HashMap<String, Arc<std::collections::HashSet<String>>>;

/// Who may see which jobs when not every job (`PrivateData=jobs`): a user
/// its own; an account coordinator also those of its accounts.
#[derive(Debug, Clone)]
pub struct JobViewer {
    pub uid: u32,
    /// The accounts coordinated, sub-accounts included (lower-cased).
    pub accounts: Option<Arc<std::collections::HashSet<String>>>,
}

impl JobViewer {
    /// Whether the job may be seen.
    pub fn sees(&self, j: &JobRecord) -> bool {
        j.user_id == self.uid
            || self
                .accounts
                .as_ref()
                .is_some_and(|a| a.contains(&j.account.to_ascii_lowercase()))
    }
}

/// slurm.conf's `DebugFlags` in force (the parser refused a file naming
/// an unknown one).
pub(super) fn apply_debug_flags(conf: &SlurmConf) {
    use slurm_common::debugflags::DebugFlags;
    let list = conf.get("DebugFlags").unwrap_or("");
    slurm_common::debugflags::set(DebugFlags::parse(list).unwrap_or_default());
}

/// Accounting's operators, administrators, and whether anyone (operators
/// or account coordinators) may act on others' jobs.
#[derive(Debug, Clone, Default)]
pub(super) struct Delegates {
    pub operators: Arc<std::collections::HashSet<String>>,
    pub administrators: Arc<std::collections::HashSet<String>>,
    pub coordinators: Arc<Coordinators>,
    pub any: bool,
}

impl Delegates {
    pub(super) fn of(c: &crate::assoc::AssocCache) -> Delegates {
        use slurm_proto::acct::AdminLevel;
        let named = |pred: &dyn Fn(&slurm_proto::acct::UserRec) -> bool| {
            Arc::new(
                c.users
                    .values()
                    .filter(|u| pred(u))
                    .map(|u| u.name.clone())
                    .collect(),
            )
        };
        Delegates {
            operators: named(&|u| u.admin_level != AdminLevel::None),
            administrators: named(&|u| u.admin_level == AdminLevel::Administrator),
            coordinators: Arc::new(
                c.users
                    .values()
                    .filter(|u| !u.coord_accounts.is_empty())
                    .map(|u| {
                        let accounts = u
                            .coord_accounts
                            .iter()
                            .map(|a| a.to_ascii_lowercase())
                            .collect();
                        (u.name.to_ascii_lowercase(), Arc::new(accounts))
                    })
                    .collect(),
            ),
            any: c
                .users
                .values()
                .any(|u| u.admin_level != AdminLevel::None || !u.coord_accounts.is_empty()),
        }
    }
}

pub struct Controller {
    pub conf: Arc<SlurmConf>,
    /// Everything persisted.
    pub p: Saved,
    pub nodes: Vec<NodeRecord>,
    /// Shared with every snapshot (`Arc`: changed, by copy, only when a
    /// node is created or deleted), so publishing one copies no name.
    node_index: Arc<HashMap<String, usize>>,
    /// Registered since this controller started.
    registered: Vec<bool>,
    pub partitions: Vec<PartitionRecord>,
    scheduler: Box<dyn Scheduler>,
    slurm_uid: u32,
    pub boot_time: i64,
    entries: Vec<Entry>,
    effects: Vec<Effect>,
    /// State changed since the last snapshot.
    pub dirty: bool,
    /// Something changed that may let a job start.
    pub sched_needed: bool,
    pub last_update: i64,
    /// Counters shown by `sdiag` later.
    pub stats: Stats,
    /// Since when: the start, or the last `sdiag -r`.
    pub stats_since: i64,
    /// Signs step credentials.
    pub key: Option<slurm_common::auth::Key>,
    /// `PriorityType=priority/multifactor`: its state (fair-share tree).
    pub multifactor: Option<slurm_plugins::priority::Multifactor>,
    /// Seconds of each running job already charged to fair share.
    charged: HashMap<JobId, i64>,
    /// The last computed factors of pending jobs (`sprio`).
    factors: std::collections::BTreeMap<JobId, JobPriority>,
    /// Accounting records go to slurmdbd (`accounting_storage/slurmdbd`).
    pub acct_enabled: bool,
    /// Records made durable in this batch, for the sender once it commits.
    acct_new: Vec<slurm_proto::acct::SeqRecord>,
    /// Jobs that reached a final state in this batch (their completion
    /// records: `take_jobcomp`).
    ended_now: Vec<JobId>,
    /// Runs ended by a requeue in this batch (their completion lines).
    requeued_now: Vec<slurm_common::jobcomp::Ended>,
    /// Requeued jobs whose next record carries the script again.
    acct_payload_due: std::collections::HashSet<JobId>,
    /// What was last recorded per job (a hash of the record), step and
    /// node (to send only changes).
    acct_jobs: HashMap<JobId, u64>,
    acct_steps: HashMap<(JobId, u32), StepSent>,
    acct_nodes: HashMap<String, (bool, bool, Option<String>)>,
    /// The cluster's kinds of generic resource (GPUs by type, ...).
    gres_kinds: crate::gres::GresKinds,
    /// Jobs that preempted others, and when (their victims are leaving).
    preempting: HashMap<JobId, i64>,
    /// When gang scheduling last moved to a new time slice.
    gang_slice: i64,
    /// Orders this run's suspend/resume requests to node daemons.
    suspend_seq: u64,
    /// Tells this controller run's requests from an earlier run's.
    run_id: u64,
    /// The last suspend/resume sent per job (sequence, suspended), sent
    /// again now and then in case a node missed it.
    suspend_sent: HashMap<JobId, (u64, bool)>,
    /// When those were last sent again.
    suspend_resent: i64,
    /// Per node, the cores jobs hold counted once per job (more than the
    /// node has when jobs share cores; `NodeRecord.alloc_cpus` is capped).
    cores_in_use: Vec<u32>,
    /// What jobs hold of each node, kept job by job: only the jobs changed
    /// since the last `refresh` are counted again (see [`NodeUse`]).
    node_use: NodeUse,
    /// Each job's shares as last counted into `node_use`.
    shares: HashMap<JobId, Vec<Share>>,
    /// Jobs changed (or added, or removed) since the last `refresh`.
    touched: std::collections::HashSet<JobId>,
    /// `node_use` counts every job (false: count them all again, as after
    /// the node list changed).
    use_ready: bool,
    /// Nodes for external jobs only (Kubernetes pods), and the nodes an
    /// external job may not use (neither external nor beside a kubelet),
    /// by index; kept by `refresh` so a job's view does not scan every
    /// node.
    external_nodes: Vec<usize>,
    no_pods_nodes: Vec<usize>,
    /// Nodes whose use changed since the last refresh (by job changes),
    /// or all of them.
    use_changed: Vec<usize>,
    use_changed_all: bool,
    /// A full [`Controller::refresh`] has been made (the incremental one
    /// builds on it).
    refreshed: bool,
    /// `last_update` at the last full refresh.
    refreshed_at: i64,
    /// Jobs suspended by preemption, and for whom.
    preempted_for: HashMap<JobId, JobId>,
    /// `Licenses=`: name and count.
    licenses: Vec<(String, u32)>,
    /// `scontrol fsdampeningfactor N`: in force until slurm.conf is read
    /// again (then slurm.conf's).
    fs_dampening: Option<u16>,
    /// Network topologies (`topology.yaml`/`topology.conf`).
    pub topologies: slurm_common::topologies::Topologies,
    /// `AccountingStorageEnforce`.
    pub enforce: crate::assoc::Enforce,
    /// Submission size limits from SchedulerParameters.
    pub limits: SubmitLimits,
    /// Why new work is refused (StateSaveLocation is full), if it is.
    pub space_low: Option<String>,
    /// Associations, users and QOS from slurmdbd (once fetched).
    assocs: Option<crate::assoc::AssocCache>,
    /// Who accounting lets act for others, derived once per fetch of
    /// `assocs` (snapshots share it).
    delegates: Delegates,
    /// Their limits, as the core checks them (`AssocCache::book`).
    book: slurm_plugins::limits::Book,
    /// Batch jobs found running in the saved state, by batch host, until
    /// that host registers with this controller: a launch the controller
    /// before this one had not delivered when it died is never sent again,
    /// so a job its host does not list then was never started there.
    recovered: HashMap<String, Vec<JobId>>,
    /// Running jobs sent their `--signal` warning in this run (by start
    /// time, so a requeued job's next run gets its own). Jobs already within
    /// their warning time when the controller starts count as warned: a
    /// restart never sends it twice, at the cost of one a controller that
    /// died just then never sent.
    warned: HashMap<JobId, i64>,
    /// `-v` given this many times (raises `SlurmctldDebug` on reconfigure).
    pub log_verbose: u32,
    /// The names of each caller (uid, gid) as last looked up for a request
    /// of theirs (see [`Identity`]).
    identities: HashMap<(u32, u32), Arc<Identity>>,
}

#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub jobs_submitted: u64,
    pub jobs_started: u64,
    pub jobs_completed: u64,
    pub jobs_canceled: u64,
    pub jobs_failed: u64,
    pub sched_cycles: u64,
    pub last_cycle_us: u64,
    pub max_cycle_us: u64,
    pub total_cycle_us: u64,
    pub total_depth: u64,
    pub last_queue: u64,
    pub bf_cycles: u64,
    pub bf_last_us: u64,
    pub bf_max_us: u64,
    pub bf_total_us: u64,
    pub bf_last_depth: u64,
    pub bf_total_depth: u64,
    pub bf_backfilled_jobs: u64,
    pub bf_last_when: Option<i64>,
    pub bf_last_queue: u64,
    pub bf_last_depth_try: u64,
    pub bf_total_depth_try: u64,
    pub bf_total_queue: u64,
    pub bf_table_size: u64,
    pub bf_total_table_size: u64,
    pub bf_exit_end: u64,
    pub bf_exit_max_job_test: u64,
}

fn err<T>(e: SlurmError) -> Result<T, RpcError> {
    Err(RpcError::from(e))
}

fn err_detail<T>(e: SlurmError, d: impl Into<String>) -> Result<T, RpcError> {
    Err(RpcError {
        error: e,
        detail: Some(d.into()),
    })
}

/// Per job of `jobs` (sorted by `id`), the version it last changed at: the
/// previous snapshot's stamp (`prev`: its jobs and stamps) when it holds the
/// very same record, `version` otherwise. Records are shared between
/// snapshots until changed, so pointer equality says "unchanged"; a chunk
/// of records shared whole shares its chunk of stamps (no look at its
/// records: the work follows what changed).
pub fn stamp_changes<T>(
    prev: Option<(&Chunked<Arc<T>>, &Chunked<u64>)>,
    jobs: &Chunked<Arc<T>>,
    id: impl Fn(&T) -> JobId,
    version: u64,
) -> Chunked<u64> {
    let empty = (Chunked::default(), Chunked::default());
    let (pj, pc) = match prev {
        Some((j, c))
            if j.len() == c.len()
                && j.chunks().len() == c.chunks().len()
                && j.chunks()
                    .iter()
                    .zip(c.chunks())
                    .all(|(a, b)| a.len() == b.len()) =>
        {
            (j, c)
        }
        _ => (&empty.0, &empty.1),
    };
    let mut out: Vec<Arc<[u64]>> = Vec::with_capacity(jobs.chunks().len());
    // Where the previous list's walk stands (both sorted by id).
    let mut k = 0;
    let mut at = 0;
    for (ci, chunk) in jobs.chunks().iter().enumerate() {
        let start = at;
        at += chunk.len();
        let same = pj.chunks().get(ci).filter(|p| Arc::ptr_eq(p, chunk));
        if let (Some(_), Some(stamps)) = (same, pc.chunks().get(ci)) {
            out.push(stamps.clone());
            k = k.max(start + chunk.len());
            continue;
        }
        let stamps: Vec<u64> = chunk
            .iter()
            .map(|j| {
                while k < pj.len() && id(&pj[k]) < id(j) {
                    k += 1;
                }
                match pj.get(k) {
                    Some(p) if id(p) == id(j) && Arc::ptr_eq(p, j) => pc[k],
                    _ => version,
                }
            })
            .collect();
        out.push(stamps.into());
    }
    Chunked::from_chunks(out)
}

impl Controller {
    pub fn new(
        conf: Arc<SlurmConf>,
        saved: Saved,
        scheduler: Box<dyn Scheduler>,
        now: i64,
    ) -> Controller {
        apply_debug_flags(&conf);
        let slurm_uid = users::parse_user(&conf.slurm_user).unwrap_or(0);
        let mut nodes = Vec::with_capacity(conf.nodes.len());
        let mut node_index = HashMap::new();
        for n in &conf.nodes {
            node_index.insert(n.name.clone(), nodes.len());
            let port = n.port.unwrap_or(conf.slurmd_port);
            nodes.push(NodeRecord {
                name: n.name.clone(),
                addr: n.node_addr.clone(),
                hostname: n.node_hostname.clone(),
                port,
                cpus: n.cpus,
                boards: n.boards,
                sockets: n.sockets,
                cores_per_socket: n.cores_per_socket,
                threads_per_core: n.threads_per_core,
                real_memory: n.real_memory,
                tmp_disk: n.tmp_disk,
                weight: n.weight,
                features: n.features.clone(),
                gres: n.gres.clone(),
                partitions: conf
                    .partitions
                    .iter()
                    .filter(|p| p.nodes.contains(&n.name))
                    .map(|p| p.name.clone())
                    .collect(),
                // Unknown until it registers; nothing allocated.
                ..Default::default()
            });
        }
        let partitions = partition_records(&conf);
        let mut p = saved;
        if p.next_job_id < conf.first_job_id.max(1) {
            p.next_job_id = conf.first_job_id.max(1);
        }
        // Config states apply to nodes with no saved admin state.
        for n in &conf.nodes {
            if p.nodes.contains_key(&n.name) {
                continue;
            }
            let st = n.state.as_deref().unwrap_or("UNKNOWN");
            let mut a = NodeAdmin::default();
            if st.starts_with("DOWN") || st == "FAIL" {
                a.down = true;
            }
            if st.starts_with("DRAIN") || st.contains("+DRAIN") {
                a.drain = true;
            }
            if a.down || a.drain {
                a.reason = n.reason.clone().or(Some("Set in slurm.conf".into()));
                a.reason_time = Some(now);
                a.reason_uid = Some(0);
                p.nodes.insert(n.name.clone(), a);
            }
        }
        for d in &conf.down_nodes {
            for name in &d.nodes {
                p.nodes.entry(name.clone()).or_insert_with(|| NodeAdmin {
                    down: true,
                    reason: d.reason.clone().or(Some("Set in slurm.conf".into())),
                    reason_time: Some(now),
                    reason_uid: Some(0),
                    ..Default::default()
                });
            }
        }
        // External nodes have no daemon: they count as registered from the start.
        for n in nodes.iter_mut() {
            n.external = conf
                .node(&n.name)
                .and_then(|c| c.state.as_deref())
                .is_some_and(|s| s.split('+').any(|w| w == "EXTERNAL"));
        }
        let registered: Vec<bool> = nodes.iter().map(|n| n.external).collect();
        let dyn_nodes: Vec<NodeSpec> = p.dyn_nodes.values().cloned().collect();
        let mut c = Controller {
            limits: SubmitLimits::from_conf(&conf),
            space_low: None,
            conf,
            p,
            nodes,
            node_index: Arc::new(node_index),
            registered,
            partitions,
            scheduler,
            slurm_uid,
            boot_time: now,
            entries: Vec::new(),
            effects: Vec::new(),
            dirty: true,
            sched_needed: true,
            last_update: now,
            stats: Stats::default(),
            stats_since: now,
            key: None,
            multifactor: None,
            fs_dampening: None,
            charged: HashMap::new(),
            factors: Default::default(),
            acct_enabled: false,
            acct_new: Vec::new(),
            ended_now: Vec::new(),
            requeued_now: Vec::new(),
            acct_payload_due: Default::default(),
            acct_jobs: HashMap::new(),
            acct_steps: HashMap::new(),
            acct_nodes: HashMap::new(),
            enforce: crate::assoc::Enforce::default(),
            assocs: None,
            delegates: Delegates::default(),
            book: Default::default(),
            gres_kinds: crate::gres::GresKinds::default(),
            preempting: HashMap::new(),
            gang_slice: 0,
            suspend_seq: 0,
            run_id: 1,
            suspend_sent: HashMap::new(),
            suspend_resent: 0,
            cores_in_use: Vec::new(),
            node_use: NodeUse::default(),
            external_nodes: Vec::new(),
            no_pods_nodes: Vec::new(),
            use_changed: Vec::new(),
            use_changed_all: false,
            refreshed: false,
            refreshed_at: 0,
            shares: HashMap::new(),
            touched: Default::default(),
            use_ready: false,
            preempted_for: HashMap::new(),
            licenses: Vec::new(),
            topologies: Default::default(),
            recovered: HashMap::new(),
            warned: HashMap::new(),
            log_verbose: 0,
            identities: HashMap::new(),
        };
        let warned: Vec<(JobId, i64)> =
            c.p.jobs
                .values()
                .filter(|j| j.state.is_active())
                .filter_map(|j| {
                    let w = warning(j)?;
                    let (start, end) = (j.start_time?, j.end_time?);
                    (end - now <= i64::from(w.secs)).then_some((j.job_id, start))
                })
                .collect();
        c.warned.extend(warned);
        for j in c.p.jobs.values().filter(|j| j.state.is_active() && j.batch) {
            if let Some(h) = &j.batch_host {
                c.recovered.entry(h.clone()).or_default().push(j.job_id);
            }
        }
        match slurm_common::licenses::parse(c.conf.get("Licenses").unwrap_or("")) {
            Ok(l) => c.licenses = l,
            Err(e) => tracing::warn!("Licenses= ignored: {e}"),
        }
        for spec in dyn_nodes {
            c.add_node(&spec);
        }
        // Features set at run time outlive restarts.
        let saved: Vec<(String, Vec<String>)> =
            c.p.nodes
                .iter()
                .filter_map(|(n, a)| a.features.clone().map(|f| (n.clone(), f)))
                .collect();
        for (n, f) in saved {
            if let Some(&i) = c.node_index.get(&n) {
                c.nodes[i].features = f;
            }
        }
        c.apply_part_admin();
        c.refresh_gres_kinds();
        c.refresh();
        c
    }

    /// Tell this controller run's requests to node daemons from an earlier
    /// run's (the writer sets it from the wall clock when it starts; the
    /// state machine reads no clock of its own).
    pub fn set_run_id(&mut self, id: u64) {
        self.run_id = id.max(1);
    }

    /// Who asks: root and SlurmUser are privileged; they and accounting's
    /// operators and administrators are operators (known by the name the
    /// server looked up for the request: it does for every request
    /// operators may make while accounting names any,
    /// [`Identity::needed_when_delegated`]).
    pub fn caller(&self, uid: u32, gid: u32) -> Caller {
        use slurm_proto::acct::AdminLevel;
        let privileged = uid == 0 || uid == self.slurm_uid;
        let level = self
            .acct_user(uid, gid)
            .map_or(AdminLevel::None, |u| u.admin_level);
        Caller {
            uid,
            gid,
            privileged,
            operator: privileged || level >= AdminLevel::Operator,
            admin: privileged || level == AdminLevel::Administrator,
        }
    }

    /// The names the server looked up for the caller of the request about
    /// to be handled.
    pub fn identify(&mut self, uid: u32, gid: u32, id: Identity) {
        self.identities.insert((uid, gid), Arc::new(id));
    }

    /// The caller's accounting record, when its name was looked up.
    fn acct_user(&self, uid: u32, gid: u32) -> Option<&slurm_proto::acct::UserRec> {
        let name = self
            .identities
            .get(&(uid, gid))?
            .user
            .as_deref()?
            .to_ascii_lowercase();
        self.assocs.as_ref()?.users.get(&name)
    }

    /// Whether `who` coordinates `account` (or an account above it).
    pub(super) fn coordinates(&self, who: Caller, account: &str) -> bool {
        self.acct_user(who.uid, who.gid)
            .is_some_and(|u| u.coordinates(account))
    }

    /// Job `id`, when `who` may manage it (cancel, hold, release, update,
    /// requeue, suspend as far as its other rights go): its owner, an
    /// operator, or a coordinator of the job's account (Slurm's
    /// `validate_operator` or `assoc_mgr_is_user_acct_coord`).
    fn managed_job(&self, who: Caller, id: JobId) -> Result<&Arc<JobRecord>, SlurmError> {
        let j = self.p.jobs.get(&id).ok_or(SlurmError::InvalidJobId)?;
        if j.user_id != who.uid && !who.operator && !self.coordinates(who, &j.account) {
            return Err(SlurmError::AccessDenied);
        }
        Ok(j)
    }

    /// Job `id`, when `who` owns it or is root or SlurmUser.
    fn owned_job(&self, who: Caller, id: JobId) -> Result<&Arc<JobRecord>, SlurmError> {
        let j = self.p.jobs.get(&id).ok_or(SlurmError::InvalidJobId)?;
        if !who.privileged && j.user_id != who.uid {
            return Err(SlurmError::AccessDenied);
        }
        Ok(j)
    }

    /// The caller's names as last looked up; numbers when never.
    fn identity(&self, who: Caller) -> Arc<Identity> {
        self.identities
            .get(&(who.uid, who.gid))
            .cloned()
            .unwrap_or_else(|| Arc::new(Identity::numeric(who.gid)))
    }

    pub fn take_entries(&mut self) -> Vec<Entry> {
        std::mem::take(&mut self.entries)
    }

    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }

    fn save_job(&mut self, id: JobId) {
        if let Some(j) = self.p.jobs.get(&id) {
            self.entries.push(Entry::Job(j.clone()));
            if self.acct_enabled {
                let j = j.clone();
                self.acct_job(&j);
            }
        }
        self.dirty = true;
    }

    fn save_node(&mut self, name: &str) {
        let a = self.p.nodes.get(name).cloned().unwrap_or_default();
        if self.acct_enabled {
            self.acct_node(name, &a);
        }
        self.entries.push(Entry::Node(name.to_string(), a));
        self.dirty = true;
    }

    // ------------------------------------------------------------------
    // Accounting outbox

    /// A job to change (counted again by the next `refresh`).
    fn job_mut(&mut self, id: JobId) -> Option<&mut JobRecord> {
        self.touched.insert(id);
        self.p.jobs.get_mut(&id).map(Arc::make_mut)
    }

    /// After job changes only (starts, ends, suspensions, cleanups): the
    /// nodes those jobs use get their counts and states again; what only
    /// other changes move (admin states, registration, reservations,
    /// FUTURE, external nodes) stays as the last full [`Self::refresh`]
    /// left it (every other change makes a full one). Work in the nodes
    /// touched, not the cluster. Debug builds check it equals a full
    /// refresh.
    pub(super) fn refresh_jobs(&mut self) {
        if !self.refreshed || self.nodes.len() != self.cores_in_use.len() {
            return self.refresh();
        }
        // A reservation started or ended since the last full refresh: its
        // nodes' flags move (a full refresh).
        let (from, now) = (self.refreshed_at, self.last_update);
        if self.p.reservations.values().any(|r| {
            (from < r.start_time && r.start_time <= now) || (from < r.end_time && r.end_time <= now)
        }) {
            return self.refresh();
        }
        self.count_node_use();
        if std::mem::take(&mut self.use_changed_all) {
            self.use_changed.clear();
            return self.refresh();
        }
        let mut changed = std::mem::take(&mut self.use_changed);
        changed.sort_unstable();
        changed.dedup();
        for i in changed {
            let Some(n) = self.nodes.get_mut(i) else {
                continue;
            };
            let u = &self.node_use;
            n.alloc_mem = u.mem[i];
            n.flags.completing = u.completing[i] > 0;
            self.cores_in_use[i] = u.cpus[i];
            n.alloc_cpus = u.cpus[i].min(n.cpus);
            let exclusive = u.exclusive[i] > 0;
            // Future, down, rebooting and unknown nodes are so whatever
            // runs: only the use-derived states move.
            if matches!(
                n.base_state,
                NodeBaseState::Idle | NodeBaseState::Allocated | NodeBaseState::Mixed
            ) {
                n.base_state = if n.alloc_cpus == 0 && !exclusive {
                    NodeBaseState::Idle
                } else if n.alloc_cpus >= n.cpus || exclusive {
                    NodeBaseState::Allocated
                } else {
                    NodeBaseState::Mixed
                };
            }
        }
        #[cfg(debug_assertions)]
        if check_from_scratch(self.nodes.len(), self.p.jobs.len()) {
            let incremental = (self.nodes.clone(), self.cores_in_use.clone());
            self.refresh();
            assert_eq!(
                (&incremental.0, &incremental.1),
                (&self.nodes, &self.cores_in_use),
                "nodes refreshed for job changes differ from a full refresh"
            );
        }
    }

    pub fn refresh(&mut self) {
        self.count_node_use();
        self.use_changed.clear();
        self.use_changed_all = false;
        self.refreshed = true;
        self.refreshed_at = self.last_update;
        let u = &self.node_use;
        for (i, n) in self.nodes.iter_mut().enumerate() {
            n.alloc_mem = u.mem[i];
            n.alloc_cpus = u.cpus[i];
            n.flags.completing = u.completing[i] > 0;
        }
        let exclusive: Vec<bool> = u.exclusive.iter().map(|&x| x > 0).collect();
        // Shared cores (OverSubscribe) count once per job; what users see
        // is capped at the node's count, as Slurm shows it.
        self.cores_in_use = self.nodes.iter().map(|n| n.alloc_cpus).collect();
        for n in &mut self.nodes {
            n.alloc_cpus = n.alloc_cpus.min(n.cpus);
        }
        let none = Default::default();
        // Nodes slurm.conf declares FUTURE (few or none: found once, not
        // looked up per node).
        let mut future = vec![false; self.nodes.len()];
        for c in &self.conf.nodes {
            if c.state.as_deref() == Some("FUTURE") {
                if let Some(&i) = self.node_index.get(&c.name) {
                    future[i] = true;
                }
            }
        }
        // Each node's admin state, by index: one look-up per node with
        // some (a walk of the ordered map per node was most of this).
        let mut admin: Vec<Option<&NodeAdmin>> = vec![None; self.nodes.len()];
        for (name, a) in &self.p.nodes {
            if let Some(&i) = self.node_index.get(name) {
                admin[i] = Some(a);
            }
        }
        for (i, n) in self.nodes.iter_mut().enumerate() {
            let a = admin[i].unwrap_or(&none);
            n.flags.drain = a.drain;
            if n.reason != a.reason {
                n.reason = a.reason.clone();
            }
            n.reason_time = a.reason_time;
            n.reason_uid = a.reason_uid;
            n.flags.reboot_requested = a.reboot.as_ref().is_some_and(|r| r.issued.is_none());
            n.flags.reboot_issued = a.reboot.as_ref().is_some_and(|r| r.issued.is_some());
            n.base_state = if future[i] {
                NodeBaseState::Future
            } else if a.down || n.flags.reboot_issued {
                NodeBaseState::Down
            } else if !self.registered[i] {
                NodeBaseState::Unknown
            } else if n.alloc_cpus == 0 && !exclusive[i] {
                NodeBaseState::Idle
            } else if n.alloc_cpus >= n.cpus || exclusive[i] {
                NodeBaseState::Allocated
            } else {
                NodeBaseState::Mixed
            };
        }
        let now = self.last_update;
        for n in &mut self.nodes {
            n.flags.reserved = false;
            n.flags.maint = false;
        }
        for r in self.p.reservations.values().filter(|r| r.is_active(now)) {
            for name in &r.nodes {
                if let Some(&i) = self.node_index.get(name) {
                    self.nodes[i].flags.reserved = true;
                    self.nodes[i].flags.maint |= r.has_flag("MAINT");
                }
            }
        }
        let kept_off = |external| {
            (0..self.nodes.len())
                .filter(|&i| view::pods_kept_off(&self.nodes[i], external))
                .collect()
        };
        self.external_nodes = kept_off(false);
        self.no_pods_nodes = kept_off(true);
    }

    /// The partitions as readers see them, with their nodes' CPUs and
    /// memory summed (only readers use the totals: summed once per
    /// published snapshot, not after every job start and end).
    fn partitions_with_totals(&self) -> Vec<PartitionRecord> {
        let mut parts = self.partitions.clone();
        for p in &mut parts {
            p.total_cpus = 0;
            p.total_mem = 0;
            for name in &p.nodes {
                if let Some(&i) = self.node_index.get(name) {
                    p.total_cpus += self.nodes[i].cpus;
                    p.total_mem += self.nodes[i].real_memory;
                }
            }
        }
        parts
    }

    /// The state as readers see it (from scratch: see
    /// [`Self::snapshot_after`]).
    pub fn snapshot(&self) -> Snapshot {
        self.snapshot_after(None)
    }

    /// [`Self::snapshot`], sharing with `prev` (the snapshot last
    /// published) the chunks of nodes and priorities that did not change:
    /// a batch that changed a few nodes copies those nodes' chunks only.
    pub fn snapshot_after(&self, prev: Option<&Snapshot>) -> Snapshot {
        Snapshot {
            jobs: Chunked::sharing_by(self.p.jobs.values(), prev.map(|p| &p.jobs), Arc::ptr_eq),
            nodes: Chunked::sharing(self.nodes.iter(), prev.map(|p| &p.nodes)),
            partitions: self.partitions_with_totals(),
            config: self.config_dump(),
            conf: Some(self.conf.clone()),
            diag: self.diag(),
            reservations: self.p.reservations.values().cloned().collect(),
            // (Kept by job id: no sort per publish.)
            priorities: Chunked::sharing(self.factors.values(), prev.map(|p| &p.priorities)),
            weights: self
                .multifactor
                .as_ref()
                .map(|m| {
                    let p = &m.params;
                    vec![
                        ("age".to_string(), p.weight_age),
                        ("assoc".to_string(), p.weight_assoc),
                        ("fairshare".to_string(), p.weight_fairshare),
                        ("jobsize".to_string(), p.weight_job_size),
                        ("partition".to_string(), p.weight_partition),
                        ("qos".to_string(), p.weight_qos),
                    ]
                })
                .unwrap_or_default(),
            shares: self.shares(),
            last_update: self.last_update,
            epoch: 0,
            job_changed: Chunked::default(),
            topology: self.topologies.entries.clone(),
            private: self.conf.private_data(),
            node_index: self.node_index.clone(),
            operators: self.delegates.operators.clone(),
            delegated: self.delegates.any,
            administrators: self.delegates.administrators.clone(),
            coordinators: self.delegates.coordinators.clone(),
            version: 0,
            licenses: {
                let used = self.licenses_used();
                self.licenses
                    .iter()
                    .map(|(name, total)| LicenseInfo {
                        name: name.clone(),
                        total: *total,
                        used: used.get(name).copied().unwrap_or(0),
                    })
                    .collect()
            },
        }
    }

    /// The system clock stepped by `d` seconds (see [`crate::clock`]): move
    /// every time that measures elapsed time with it, so running jobs keep
    /// their elapsed time and limit and nodes their last contact. Times
    /// people gave (`--begin`, reservations) and past ones stay.
    pub fn clock_stepped(&mut self, d: i64) {
        let ids: Vec<JobId> = self
            .p
            .jobs
            .values()
            .filter(|j| j.state.is_active())
            .map(|j| j.job_id)
            .collect();
        for id in ids {
            if let Some(j) = self.job_mut(id) {
                // (A record from before `run_start` was kept: its run's
                // name stays the start it was launched with.)
                if j.run_start.is_none() {
                    j.run_start = j.start_time;
                }
                for t in [&mut j.start_time, &mut j.end_time, &mut j.suspend_time] {
                    if let Some(t) = t.as_mut() {
                        *t += d;
                    }
                }
            }
            self.save_job(id);
        }
        for n in &mut self.nodes {
            if let Some(t) = n.last_heard.as_mut() {
                *t += d;
            }
        }
        for t in self.preempting.values_mut() {
            *t += d;
        }
        self.boot_time += d;
        self.stats_since += d;
        self.gang_slice += d;
        self.suspend_resent += d;
        self.dirty = true;
        self.refresh();
    }

    /// Once a second: node timeouts, time limits, purge of old jobs.
    pub fn tick(&mut self, now: i64) {
        self.last_update = self.last_update.max(now);
        self.multifactor_tick(now);
        self.gang_tick(now);
        self.resend_suspends(now);
        self.roll_reservations(now);
        self.refresh();
        let timeout = self.conf.slurmd_timeout as i64;
        if timeout > 0 {
            let dead: Vec<String> = self
                .nodes
                .iter()
                .filter(|n| {
                    !n.external
                        && !n.flags.not_responding
                        && !n.flags.reboot_issued
                        && n.base_state != NodeBaseState::Future
                })
                .filter(|n| {
                    now - n.last_heard.unwrap_or(self.boot_time).max(self.boot_time) > timeout
                })
                .map(|n| n.name.clone())
                .collect();
            for name in dead {
                if let Some(&i) = self.node_index.get(&name) {
                    self.nodes[i].flags.not_responding = true;
                    self.registered[i] = false;
                }
                let already_down = self.p.nodes.get(&name).is_some_and(|a| a.down);
                if !already_down {
                    self.set_admin(&name, |a| {
                        a.down = true;
                        a.reason = Some(NOT_RESPONDING.into());
                        a.reason_time = Some(now);
                        a.reason_uid = Some(0);
                    });
                }
                self.fail_node_jobs(&name, now);
                self.dirty = true;
            }
        }
        self.issue_reboots(now, false);
        self.send_warnings(now);
        let expired: Vec<JobId> = self
            .p
            .jobs
            .values()
            .filter(|j| j.state == JobState::Running && !j.timed_out)
            .filter(|j| j.end_time.is_some_and(|e| e <= now))
            .map(|j| j.job_id)
            .collect();
        for id in expired {
            // A limit cut to the job's `--deadline` ends it DEADLINE.
            let mut end = (JobState::Timeout, JobReason::TimeLimit);
            if let Some(j) = self.job_mut(id) {
                j.timed_out = true;
                if j.desc.deadline.is_some_and(|d| d <= now) {
                    end = (JobState::Deadline, schedule::deadline_reason());
                }
            }
            let kw = self.conf.kill_wait;
            self.end_running(id, end.0, end.1, now, kw);
        }
        self.end_timed_out_steps(now);
        let age = self.conf.min_job_age as i64;
        if age > 0 {
            let old: Vec<JobId> = self
                .p
                .jobs
                .values()
                .filter(|j| j.state.is_finished() && !j.completing)
                .filter(|j| j.end_time.is_some_and(|e| now - e >= age))
                .map(|j| j.job_id)
                .collect();
            for id in old {
                self.p.jobs.remove(&id);
                self.touched.insert(id);
                self.p.payloads.remove(&id);
                self.acct_jobs.remove(&id);
                self.entries.push(Entry::RemoveJob(id));
                self.dirty = true;
            }
        }
        if self.p.jobs.values().any(|j| j.state == JobState::Pending) {
            self.sched_needed = true;
        }
    }

    // ------------------------------------------------------------------
    // Requests

    /// Apply one request that changes state. Reads are served from snapshots
    /// and never come here.
    pub fn handle(&mut self, who: Caller, body: RequestBody, now: i64) -> Response {
        // Derived state (reservation flags on nodes) is computed as of now.
        self.last_update = self.last_update.max(now);
        if let Some(why) = &self.space_low {
            if matches!(
                body,
                RequestBody::SubmitBatchJob(_)
                    | RequestBody::AllocateJob(_)
                    | RequestBody::CreateReservation(_)
                    | RequestBody::CreateNode(_)
                    | RequestBody::CreateStep(_)
                    | RequestBody::UpdateJob { .. }
            ) {
                return Response::Error(RpcError {
                    error: SlurmError::Disabled,
                    detail: Some(format!("slurmctld takes no new work: {why}")),
                });
            }
        }
        let r = match body {
            RequestBody::SubmitBatchJob(d) => self.submit(who, d, now),
            RequestBody::TestJob(d) => self.test_job(who, d, now),
            RequestBody::Cancel(f) => Ok(self.cancel(who, f, now)),
            RequestBody::SuspendJob { job_id, suspend } => {
                self.suspend_request(who, job_id, suspend, now)
            }
            RequestBody::UpdateJob { job_id, update } => self.update_job(who, job_id, update, now),
            RequestBody::UpdateNode {
                names,
                state,
                reason,
                features,
            } => self.update_node(who, names, state, reason, features, now),
            RequestBody::TopJobs { job_ids } => self.top_jobs(who, job_ids),
            RequestBody::NotifyJob { job_id, message } => self.notify_job(who, job_id, message),
            RequestBody::UpdateStep {
                job_id,
                step_id,
                time_limit,
            } => self.update_step(who, job_id, step_id, time_limit),
            RequestBody::RebootNodes(r) => self.reboot_nodes(who, r, now),
            RequestBody::AllocateJob(d) => self.allocate(who, d, now),
            RequestBody::CreateNode(n) => self.create_node(who, n),
            RequestBody::GetJobScript { job_id } => self.job_script(who, job_id),
            // Read outside the writer: it comes as its own command.
            RequestBody::Reconfigure => err_detail(
                SlurmError::InternalError,
                "a reconfigure reaches the writer with its files read",
            ),
            RequestBody::DeleteNode { name } => self.delete_node(who, &name),
            RequestBody::SetFsDampeningFactor { factor } => self.set_fs_dampening(who, factor, now),
            RequestBody::CreateReservation(r) => self.create_reservation(who, r, now),
            RequestBody::UpdateReservation(r) => self.update_reservation(who, r, now),
            RequestBody::DeleteReservation { name } => self.delete_reservation(who, &name, now),
            RequestBody::UpdatePartition(u) => self.update_partition(who, u, now),
            RequestBody::CreatePartition(u) => self.create_partition(who, u, now),
            RequestBody::DeletePartition { name } => self.delete_partition(who, name, now),
            RequestBody::CompleteJob { job_id, status } => {
                self.complete_job(who, job_id, status, now)
            }
            RequestBody::CreateStep(r) => self.create_step(who, r, now),
            RequestBody::StepComplete {
                job_id,
                step_id,
                status,
                job_start,
            } => self.step_complete(who, job_id, step_id, status, job_start, now),
            RequestBody::CancelStep {
                job_id,
                step_id,
                signal,
            } => self.cancel_step(who, job_id, step_id, signal),
            RequestBody::RegisterNode(r) if who.privileged => self.register(r, now),
            RequestBody::Heartbeat { node, .. } if who.privileged => self.heartbeat(&node, now),
            RequestBody::BatchComplete {
                job_id,
                status,
                oom,
                usage,
                node,
                job_start,
            } if who.privileged => {
                let from = node.clone();
                let run = Run {
                    node: &from,
                    start: job_start,
                };
                self.batch_complete(job_id, status, oom, usage.map(|u| (u, node)), run, now);
                Ok(Response::Ok)
            }
            RequestBody::JobCleaned {
                job_id,
                node,
                job_start,
            } if who.privileged => {
                self.node_cleaned(job_id, &node, job_start);
                Ok(Response::Ok)
            }
            RequestBody::PrologFailed { job_id, node } if who.privileged => {
                self.prolog_failed(job_id, &node, now);
                Ok(Response::Ok)
            }
            RequestBody::StepUsage {
                job_id,
                step_id,
                node,
                usage,
                job_start,
            } if who.privileged => {
                self.step_usage(job_id, step_id, &node, usage, job_start);
                Ok(Response::Ok)
            }
            RequestBody::EpilogFailed { job_id, node } if who.privileged => {
                tracing::error!("epilog of job {job_id} failed on {node}: draining it");
                self.drain_for(&node, "Epilog error", now);
                Ok(Response::Ok)
            }
            RequestBody::RegisterNode(_)
            | RequestBody::Heartbeat { .. }
            | RequestBody::BatchComplete { .. }
            | RequestBody::EpilogFailed { .. }
            | RequestBody::StepUsage { .. }
            | RequestBody::PrologFailed { .. }
            | RequestBody::JobCleaned { .. } => err(SlurmError::AccessDenied),
            _ => err(SlurmError::InvalidRequest),
        };
        if self.dirty {
            self.last_update = now;
        }
        r.unwrap_or_else(Response::Error)
    }
}

/// Whether a debug build checks incremental state against a derivation
/// from scratch now: always on a small cluster (every test of the core),
/// on a large one (the mock-scale tests) one call in 256, so the checks do
/// not make each change cost the whole cluster again (a saturated debug
/// controller then answered submissions too late).
#[cfg(debug_assertions)]
pub(crate) fn check_from_scratch(nodes: usize, jobs: usize) -> bool {
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    nodes.saturating_mul(jobs.max(1)) <= 100_000 || n.is_multiple_of(256)
}

#[cfg(test)]
mod tests;
