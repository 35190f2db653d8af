//! The controller's state and every transition of it. Only the writer thread
//! calls into this module (invariant 1: one writer); each call records the
//! journal entries and node-daemon effects it causes, which the writer makes
//! durable and dispatches after the batch commits.

use crate::journal::{Entry, NodeAdmin, Payload, Saved};

#[path = "gang.rs"]
mod gang;
#[path = "preempt.rs"]
mod preempt;
#[path = "suspend.rs"]
mod suspend;
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

/// Where a job's dependencies stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DepState {
    Satisfied,
    Waiting,
    Never,
}

/// Reason Slurm gives a node that stopped answering.
pub const NOT_RESPONDING: &str = "Not responding";

/// Most jobs one `--dependency` may name (each is evaluated every pass).
pub const MAX_DEPENDENCIES: usize = 1000;

/// How large a submission may be (Slurm's SchedulerParameters
/// `max_script_size`, default 4 MiB, and `max_submit_line_size`, default
/// 1 MiB; `max_env_size`, default 4 MiB, is ours).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubmitLimits {
    pub max_script_size: usize,
    pub max_submit_line_size: usize,
    pub max_env_size: usize,
}

impl SubmitLimits {
    pub fn from_conf(conf: &SlurmConf) -> SubmitLimits {
        let mut l = SubmitLimits {
            max_script_size: 4 << 20,
            max_submit_line_size: 1 << 20,
            max_env_size: 4 << 20,
        };
        for p in conf.get("SchedulerParameters").unwrap_or("").split(',') {
            let Some((k, v)) = p.trim().split_once('=') else {
                continue;
            };
            let Ok(n) = v.trim().parse::<usize>() else {
                continue;
            };
            match k.trim().to_ascii_lowercase().as_str() {
                "max_script_size" => l.max_script_size = n,
                "max_submit_line_size" => l.max_submit_line_size = n,
                "max_env_size" => l.max_env_size = n,
                _ => {}
            }
        }
        l
    }
}

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
    },
    Signal {
        node: String,
        addr: String,
        job_id: JobId,
        signal: i32,
    },
    SignalStep {
        node: String,
        addr: String,
        job_id: JobId,
        step_id: u32,
        signal: i32,
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
}

/// What readers see: an immutable picture of the state after a batch.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub jobs: Vec<Arc<JobRecord>>,
    pub nodes: Vec<NodeRecord>,
    pub partitions: Vec<PartitionRecord>,
    pub config: ConfigDump,
    pub last_update: i64,
    pub diag: DiagStats,
    pub reservations: Vec<ReservationRecord>,
    pub priorities: Vec<JobPriority>,
    pub weights: Vec<(String, u32)>,
    pub shares: Vec<ShareInfo>,
    pub licenses: Vec<LicenseInfo>,
    /// Counts published snapshots (set by the writer).
    pub version: u64,
    /// Identifies this controller run (set by the writer).
    pub epoch: u64,
    /// Per job (parallel to `jobs`): the version at which it last changed.
    pub job_changed: Vec<u64>,
    /// Every switch and block (`scontrol show topology`).
    pub topology: Arc<Vec<slurm_proto::TopologyEntry>>,
    /// `PrivateData`: what readers may not see of other users.
    pub private: slurm_common::private::PrivateData,
    /// Users with AdminLevel Operator or Administrator (see everything).
    pub operators: Arc<std::collections::HashSet<String>>,
    /// Node name → index in `nodes`.
    pub node_index: Arc<HashMap<String, usize>>,
    /// The configuration in force (slurm.conf as last read).
    pub conf: Option<Arc<SlurmConf>>,
}

impl Snapshot {
    /// Whether `uid` (named `name`) sees every user's data: root, SlurmUser
    /// or an operator.
    pub fn sees_all(&self, uid: u32, slurm_uid: u32, name: impl FnOnce() -> String) -> bool {
        uid == 0
            || uid == slurm_uid
            || (!self.operators.is_empty() && self.operators.contains(&name()))
    }
}

/// One job's share of one node (index into `Controller::nodes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Share {
    node: usize,
    mem: u64,
    /// Cores, 0 while the job is suspended (its memory stays held).
    cpus: u32,
    completing: bool,
    exclusive: bool,
}

/// What the jobs hold of each node, summed over their [`Share`]s.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct NodeUse {
    mem: Vec<u64>,
    /// Cores counted once per job (more than the node has when jobs share).
    cpus: Vec<u32>,
    /// Jobs completing there.
    completing: Vec<u32>,
    /// Exclusive jobs there.
    exclusive: Vec<u32>,
}

impl NodeUse {
    fn zeroed(n: usize) -> NodeUse {
        NodeUse {
            mem: vec![0; n],
            cpus: vec![0; n],
            completing: vec![0; n],
            exclusive: vec![0; n],
        }
    }

    /// Add (`sign` 1) or take out (-1) a job's shares.
    fn add(&mut self, shares: &[Share], sign: i8) {
        for s in shares {
            let i = s.node;
            if i >= self.mem.len() {
                continue;
            }
            if sign > 0 {
                self.mem[i] += s.mem;
                self.cpus[i] += s.cpus;
                self.completing[i] += u32::from(s.completing);
                self.exclusive[i] += u32::from(s.exclusive);
            } else {
                self.mem[i] = self.mem[i].saturating_sub(s.mem);
                self.cpus[i] = self.cpus[i].saturating_sub(s.cpus);
                self.completing[i] = self.completing[i].saturating_sub(u32::from(s.completing));
                self.exclusive[i] = self.exclusive[i].saturating_sub(u32::from(s.exclusive));
            }
        }
    }
}

/// What `j` holds of each node now: nothing unless it holds its devices;
/// while completing, only the nodes still completing; while suspended, its
/// memory but not its cores.
fn shares_of(node_index: &HashMap<String, usize>, j: &JobRecord) -> Vec<Share> {
    if !Controller::holds_devices(j) {
        return Vec::new();
    }
    let suspended = j.state == JobState::Suspended && !j.completing;
    j.alloc
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, name)| !j.completing || j.completing_nodes.contains(*name))
        .filter_map(|(k, name)| {
            Some(Share {
                node: *node_index.get(name)?,
                mem: j.alloc.mem.get(k).copied().unwrap_or(0),
                cpus: if suspended {
                    0
                } else {
                    j.alloc.cpus.get(k).copied().unwrap_or(0)
                },
                completing: !suspended && j.completing,
                exclusive: !suspended && j.desc.exclusive,
            })
        })
        .collect()
}

pub struct Controller {
    pub conf: Arc<SlurmConf>,
    /// Everything persisted.
    pub p: Saved,
    pub nodes: Vec<NodeRecord>,
    node_index: HashMap<String, usize>,
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
    /// Signs step credentials.
    pub key: Option<slurm_common::auth::Key>,
    /// `PriorityType=priority/multifactor`: its state (fair-share tree).
    pub multifactor: Option<slurm_plugins::priority::Multifactor>,
    /// Seconds of each running job already charged to fair share.
    charged: HashMap<JobId, i64>,
    /// The last computed factors of pending jobs (`sprio`).
    factors: HashMap<JobId, JobPriority>,
    /// Accounting records go to slurmdbd (`accounting_storage/slurmdbd`).
    pub acct_enabled: bool,
    /// Records made durable in this batch, for the sender once it commits.
    acct_new: Vec<slurm_proto::acct::SeqRecord>,
    /// What was last recorded per job, step and node (to send only changes).
    acct_jobs: HashMap<JobId, slurm_proto::acct::AcctJob>,
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
    /// Jobs suspended by preemption, and for whom.
    preempted_for: HashMap<JobId, JobId>,
    /// `Licenses=`: name and count.
    licenses: Vec<(String, u32)>,
    /// Network topologies (`topology.yaml`/`topology.conf`).
    pub topologies: crate::topology::Topologies,
    /// `AccountingStorageEnforce`.
    pub enforce: crate::assoc::Enforce,
    /// Submission size limits from SchedulerParameters.
    pub limits: SubmitLimits,
    /// Why new work is refused (StateSaveLocation is full), if it is.
    pub space_low: Option<String>,
    /// Associations, users and QOS from slurmdbd (once fetched).
    assocs: Option<crate::assoc::AssocCache>,
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

/// Go through `queue` highest priority first; a job for which `hold` gives
/// a reason leaves the queue and is held back with it.
fn hold_by_priority(
    queue: &mut Vec<JobView>,
    jobs: &std::collections::BTreeMap<JobId, Arc<JobRecord>>,
    held_back: &mut Vec<(JobId, JobReason)>,
    mut hold: impl FnMut(&JobRecord) -> Option<JobReason>,
) {
    let mut order: Vec<usize> = (0..queue.len()).collect();
    order.sort_by_key(|&i| {
        (
            std::cmp::Reverse(queue[i].priority),
            queue[i].submit_time,
            queue[i].id,
        )
    });
    let mut keep = vec![true; queue.len()];
    for i in order {
        let Some(j) = jobs.get(&queue[i].id) else {
            continue;
        };
        if let Some(r) = hold(j) {
            held_back.push((j.job_id, r));
            keep[i] = false;
        }
    }
    let mut k = keep.into_iter();
    queue.retain(|_| k.next().unwrap_or(true));
}

/// The partitions of a configuration (totals filled by `refresh`).
fn partition_records(conf: &SlurmConf) -> Vec<PartitionRecord> {
    conf.partitions
        .iter()
        .map(|p| PartitionRecord {
            name: p.name.clone(),
            nodes_expr: p.nodes_expr.clone(),
            nodes: p.nodes.clone(),
            default: p.default,
            max_time: p.max_time,
            default_time: p.default_time,
            state: partition_state(&p.state),
            priority_job_factor: p.priority_job_factor,
            priority_tier: p.priority_tier,
            oversubscribe: p.oversubscribe.clone(),
            max_nodes: p.max_nodes,
            min_nodes: p.min_nodes,
            hidden: p.hidden,
            allow_groups: p.allow_groups.clone(),
            allow_accounts: p.allow_accounts.clone(),
            allow_qos: p.allow_qos.clone(),
            def_mem_per_cpu: p.def_mem_per_cpu.or(conf.def_mem_per_cpu),
            max_mem_per_node: p.max_mem_per_node.or(conf.max_mem_per_node),
            total_cpus: 0,
            total_mem: 0,
        })
        .collect()
}

fn partition_state(s: &PartitionStateConf) -> PartitionState {
    match s {
        PartitionStateConf::Up => PartitionState::Up,
        PartitionStateConf::Down => PartitionState::Down,
        PartitionStateConf::Drain => PartitionState::Drain,
        PartitionStateConf::Inactive => PartitionState::Inactive,
    }
}

/// Per job of `jobs` (sorted by `id`), the version it last changed at: the
/// previous snapshot's stamp (`prev`: its jobs and stamps) when it holds the
/// very same record, `version` otherwise. Records are shared between
/// snapshots until changed, so pointer equality says "unchanged".
pub fn stamp_changes<T>(
    prev: Option<(&[Arc<T>], &[u64])>,
    jobs: &[Arc<T>],
    id: impl Fn(&T) -> JobId,
    version: u64,
) -> Vec<u64> {
    let (pj, pc) = match prev {
        Some((j, c)) if j.len() == c.len() => (j, c),
        _ => (&[][..], &[][..]),
    };
    let mut k = 0;
    jobs.iter()
        .map(|j| {
            while k < pj.len() && id(&pj[k]) < id(j) {
                k += 1;
            }
            match pj.get(k) {
                Some(p) if id(p) == id(j) && Arc::ptr_eq(p, j) => pc[k],
                _ => version,
            }
        })
        .collect()
}

impl Controller {
    pub fn new(
        conf: Arc<SlurmConf>,
        saved: Saved,
        scheduler: Box<dyn Scheduler>,
        now: i64,
    ) -> Controller {
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
                base_state: NodeBaseState::Unknown,
                flags: NodeFlags::default(),
                reason: None,
                reason_time: None,
                reason_uid: None,
                alloc_cpus: 0,
                alloc_mem: 0,
                partitions: conf
                    .partitions
                    .iter()
                    .filter(|p| p.nodes.contains(&n.name))
                    .map(|p| p.name.clone())
                    .collect(),
                boot_time: None,
                slurmd_start_time: None,
                last_busy: None,
                last_heard: None,
                version: None,
                os: None,
                arch: None,
                cpu_load: None,
                free_mem: None,
                external: false,
                kubelet: false,
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
            node_index,
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
            key: None,
            multifactor: None,
            charged: HashMap::new(),
            factors: HashMap::new(),
            acct_enabled: false,
            acct_new: Vec::new(),
            acct_jobs: HashMap::new(),
            acct_steps: HashMap::new(),
            acct_nodes: HashMap::new(),
            enforce: crate::assoc::Enforce::default(),
            assocs: None,
            gres_kinds: crate::gres::GresKinds::default(),
            preempting: HashMap::new(),
            gang_slice: 0,
            suspend_seq: 0,
            run_id: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
                | 1,
            suspend_sent: HashMap::new(),
            suspend_resent: 0,
            cores_in_use: Vec::new(),
            node_use: NodeUse::default(),
            shares: HashMap::new(),
            touched: Default::default(),
            use_ready: false,
            preempted_for: HashMap::new(),
            licenses: Vec::new(),
            topologies: Default::default(),
            recovered: HashMap::new(),
            warned: HashMap::new(),
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

    /// Lay the operator's partition changes over slurm.conf's values, and
    /// add the partitions made at run time that slurm.conf does not define
    /// (with their nodes' membership).
    fn apply_part_admin(&mut self) {
        let created: Vec<(String, String, Option<bool>)> = self
            .p
            .partitions
            .iter()
            .filter_map(|(n, a)| a.created.clone().map(|nodes| (n.clone(), nodes, a.default)))
            .collect();
        for (name, expr, default) in created {
            if self.partitions.iter().any(|p| p.name == name) {
                continue;
            }
            // (Checked at creation; a node deleted since is left out.)
            let nodes: Vec<String> = slurm_common::hostlist::expand(&expr)
                .unwrap_or_default()
                .into_iter()
                .filter(|n| self.node_index.contains_key(n))
                .collect();
            for n in &nodes {
                if let Some(&i) = self.node_index.get(n) {
                    if !self.nodes[i].partitions.contains(&name) {
                        self.nodes[i].partitions.push(name.clone());
                    }
                }
            }
            if default == Some(true) {
                for p in &mut self.partitions {
                    p.default = false;
                }
            }
            self.partitions.push(PartitionRecord {
                name,
                nodes_expr: expr,
                nodes,
                default: default == Some(true),
                max_time: None,
                default_time: None,
                state: PartitionState::Up,
                priority_job_factor: 1,
                priority_tier: 1,
                oversubscribe: "NO".into(),
                max_nodes: None,
                min_nodes: 0,
                hidden: false,
                allow_groups: None,
                allow_accounts: None,
                allow_qos: None,
                def_mem_per_cpu: self.conf.def_mem_per_cpu,
                max_mem_per_node: self.conf.max_mem_per_node,
                total_cpus: 0,
                total_mem: 0,
            });
        }
        for p in &mut self.partitions {
            if let Some(a) = self.p.partitions.get(&p.name) {
                if let Some(s) = a.state {
                    p.state = s;
                }
                if let Some(t) = a.max_time {
                    p.max_time = t;
                }
                if let Some(t) = a.default_time {
                    p.default_time = t;
                }
            }
        }
    }

    /// `scontrol update PartitionName=NAME State= MaxTime= DefaultTime=`:
    /// operators only; kept over restarts and reconfigures.
    fn update_partition(
        &mut self,
        who: Caller,
        u: slurm_proto::PartitionUpdate,
        now: i64,
    ) -> Result<Response, RpcError> {
        if !who.privileged {
            return err(SlurmError::AccessDenied);
        }
        if !self.partitions.iter().any(|p| p.name == u.name) {
            return err_detail(SlurmError::InvalidPartitionName, u.name);
        }
        if u.state.is_none() && u.max_time.is_none() && u.default_time.is_none() {
            return err_detail(SlurmError::InvalidRequest, "nothing to change");
        }
        let mut a = self.p.partitions.get(&u.name).cloned().unwrap_or_default();
        a.state = u.state.or(a.state);
        a.max_time = u.max_time.or(a.max_time);
        a.default_time = u.default_time.or(a.default_time);
        self.p.partitions.insert(u.name.clone(), a.clone());
        self.entries.push(Entry::Partition(u.name, Some(a)));
        self.apply_part_admin();
        self.dirty = true;
        self.sched_needed = true;
        self.last_update = self.last_update.max(now);
        Ok(Response::Ok)
    }

    /// `scontrol create PartitionName=NAME [Nodes=LIST] [Default=YES|NO]
    /// [State=] [MaxTime=] [DefaultTime=]`: operators only; kept over
    /// restarts and reconfigures until deleted.
    /// `scontrol write batch_script`: the job's script, for its owner,
    /// root and SlurmUser. Under `PrivateData=jobs` another user's job does
    /// not exist for the caller.
    fn job_script(&self, who: Caller, id: JobId) -> Result<Response, RpcError> {
        let Some(j) = self.p.jobs.get(&id) else {
            return err(SlurmError::InvalidJobId);
        };
        if !who.privileged && j.user_id != who.uid {
            return err(if self.conf.private_data().jobs {
                SlurmError::InvalidJobId
            } else {
                SlurmError::AccessDenied
            });
        }
        match self.p.payloads.get(&id) {
            Some(p) if j.batch && !p.script.is_empty() => Ok(Response::JobScript(p.script.clone())),
            _ => err_detail(SlurmError::InvalidRequest, "no batch script for this job"),
        }
    }

    fn create_partition(
        &mut self,
        who: Caller,
        u: slurm_proto::PartitionUpdate,
        now: i64,
    ) -> Result<Response, RpcError> {
        if !who.privileged {
            return err(SlurmError::AccessDenied);
        }
        let name = u.name.trim().to_string();
        if name.is_empty()
            || name.len() > 64
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return err_detail(
                SlurmError::InvalidPartitionName,
                format!("{name:?}: letters, digits, '-', '_' and '.' only"),
            );
        }
        if self.partitions.iter().any(|p| p.name == name) {
            return err_detail(
                SlurmError::InvalidPartitionName,
                format!("partition {name} already exists"),
            );
        }
        let expr = u.nodes.clone().unwrap_or_default();
        let nodes = if expr.is_empty() {
            Vec::new()
        } else {
            match slurm_common::hostlist::expand(&expr) {
                Ok(n) => n,
                Err(e) => return err_detail(SlurmError::InvalidNodeName, format!("{expr}: {e}")),
            }
        };
        if let Some(n) = nodes.iter().find(|n| !self.node_index.contains_key(*n)) {
            return err_detail(SlurmError::InvalidNodeName, n.clone());
        }
        let a = crate::journal::PartAdmin {
            state: u.state,
            max_time: u.max_time,
            default_time: u.default_time,
            created: Some(expr),
            default: u.default,
        };
        self.p.partitions.insert(name.clone(), a.clone());
        self.entries.push(Entry::Partition(name.clone(), Some(a)));
        self.apply_part_admin();
        tracing::info!(uid = who.uid, "partition {name} created");
        self.dirty = true;
        self.sched_needed = true;
        self.last_update = self.last_update.max(now);
        self.refresh();
        Ok(Response::Ok)
    }

    /// `scontrol delete PartitionName=NAME`: one made at run time, once no
    /// job waits or runs in it (operators only).
    fn delete_partition(
        &mut self,
        who: Caller,
        name: String,
        now: i64,
    ) -> Result<Response, RpcError> {
        if !who.privileged {
            return err(SlurmError::AccessDenied);
        }
        if !self.partitions.iter().any(|p| p.name == name) {
            return err_detail(SlurmError::InvalidPartitionName, name);
        }
        let made_here = self
            .p
            .partitions
            .get(&name)
            .is_some_and(|a| a.created.is_some())
            && self.conf.partition(&name).is_none();
        if !made_here {
            return err_detail(
                SlurmError::InvalidRequest,
                format!("partition {name} is defined in slurm.conf: remove it there, then scontrol reconfigure"),
            );
        }
        let busy = self
            .p
            .jobs
            .values()
            .filter(|j| !j.state.is_finished() || j.completing)
            .any(|j| j.partition.split(',').any(|p| p == name));
        if busy {
            return err_detail(
                SlurmError::InvalidRequest,
                format!("jobs are pending or running in partition {name}: cancel them or move them first"),
            );
        }
        self.partitions.retain(|p| p.name != name);
        for n in &mut self.nodes {
            n.partitions.retain(|p| *p != name);
        }
        self.p.partitions.remove(&name);
        self.entries.push(Entry::Partition(name.clone(), None));
        tracing::info!(uid = who.uid, "partition {name} deleted");
        self.dirty = true;
        self.sched_needed = true;
        self.last_update = self.last_update.max(now);
        self.refresh();
        Ok(Response::Ok)
    }

    /// Read the topology beside `conf` (nodes as configured now).
    pub fn load_topology(&self, conf: &SlurmConf) -> Result<crate::topology::Topologies, String> {
        let names: Vec<String> = conf.nodes.iter().map(|n| n.name.clone()).collect();
        crate::topology::load(conf, &names)
    }

    /// Add a run-time node (no persistence here; callers journal it).
    fn add_node(&mut self, spec: &NodeSpec) {
        let external = spec.state == "EXTERNAL";
        let parts: Vec<String> = self
            .partitions
            .iter()
            .filter(|p| {
                spec.partitions.contains(&p.name) || p.nodes_expr.eq_ignore_ascii_case("ALL")
            })
            .map(|p| p.name.clone())
            .collect();
        for p in self
            .partitions
            .iter_mut()
            .filter(|p| parts.contains(&p.name))
        {
            if !p.nodes.contains(&spec.name) {
                p.nodes.push(spec.name.clone());
            }
        }
        self.node_index.insert(spec.name.clone(), self.nodes.len());
        self.use_ready = false;
        self.registered.push(external);
        self.nodes.push(NodeRecord {
            name: spec.name.clone(),
            addr: spec.addr.clone().unwrap_or_else(|| spec.name.clone()),
            hostname: spec.name.clone(),
            port: spec.port.unwrap_or(self.conf.slurmd_port),
            cpus: spec.cpus.max(1),
            boards: 1,
            sockets: spec.cpus.max(1),
            cores_per_socket: 1,
            threads_per_core: 1,
            real_memory: spec.real_memory.max(1),
            tmp_disk: 0,
            weight: 1,
            features: spec.features.clone(),
            gres: spec.gres.clone(),
            base_state: NodeBaseState::Unknown,
            flags: NodeFlags::default(),
            reason: None,
            reason_time: None,
            reason_uid: None,
            alloc_cpus: 0,
            alloc_mem: 0,
            partitions: parts,
            boot_time: None,
            slurmd_start_time: None,
            last_busy: None,
            last_heard: None,
            version: None,
            os: None,
            arch: None,
            cpu_load: None,
            free_mem: None,
            external,
            kubelet: false,
        });
    }

    fn create_node(&mut self, who: Caller, spec: NodeSpec) -> Result<Response, RpcError> {
        if !who.privileged {
            return err(SlurmError::AccessDenied);
        }
        let mut spec = spec;
        spec.state = spec.state.to_ascii_uppercase();
        if spec.name.is_empty() || self.node_index.contains_key(&spec.name) {
            return err_detail(
                SlurmError::InvalidNodeName,
                format!("node '{}' exists or is unnamed", spec.name),
            );
        }
        if !matches!(
            spec.state.as_str(),
            "EXTERNAL" | "FUTURE" | "IDLE" | "CLOUD"
        ) {
            return err_detail(
                SlurmError::InvalidNodeState,
                format!("State={} (use External, Future or Idle)", spec.state),
            );
        }
        for p in &spec.partitions {
            if !self.partitions.iter().any(|x| &x.name == p) {
                return err(SlurmError::InvalidPartitionName);
            }
        }
        for g in &spec.gres {
            if let Err(e) = slurm_common::gres::parse_list(g) {
                return err_detail(SlurmError::InvalidGres, format!("Gres={g}: {e}"));
            }
        }
        self.add_node(&spec);
        self.refresh_gres_kinds();
        self.entries.push(Entry::DynNode(spec.clone()));
        self.p.dyn_nodes.insert(spec.name.clone(), spec);
        self.dirty = true;
        self.sched_needed = true;
        self.refresh();
        Ok(Response::Ok)
    }

    fn delete_node(&mut self, who: Caller, name: &str) -> Result<Response, RpcError> {
        if !who.privileged {
            return err(SlurmError::AccessDenied);
        }
        if !self.p.dyn_nodes.contains_key(name) {
            return err_detail(
                SlurmError::InvalidNodeName,
                format!("{name} was not created at run time"),
            );
        }
        let busy = self
            .p
            .jobs
            .values()
            .any(|j| Self::holds_devices(j) && j.alloc.nodes.iter().any(|n| n == name));
        if busy {
            return err(SlurmError::NodesBusy);
        }
        self.p.dyn_nodes.remove(name);
        self.entries.push(Entry::RemoveNode(name.to_string()));
        if let Some(i) = self.node_index.remove(name) {
            self.use_ready = false;
            self.nodes.remove(i);
            self.registered.remove(i);
            for (k, n) in self.nodes.iter().enumerate() {
                self.node_index.insert(n.name.clone(), k);
            }
        }
        for p in &mut self.partitions {
            p.nodes.retain(|n| n != name);
        }
        self.dirty = true;
        self.refresh();
        Ok(Response::Ok)
    }

    pub fn caller(&self, uid: u32, gid: u32) -> Caller {
        Caller {
            uid,
            gid,
            privileged: uid == 0 || uid == self.slurm_uid,
        }
    }

    pub fn take_entries(&mut self) -> Vec<Entry> {
        std::mem::take(&mut self.entries)
    }

    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }

    /// Count a job reaching a final state (for `sdiag`).
    fn count_end(&mut self, state: JobState) {
        match state {
            JobState::Completed => self.stats.jobs_completed += 1,
            JobState::Cancelled => self.stats.jobs_canceled += 1,
            _ => self.stats.jobs_failed += 1,
        }
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

    /// Queue one record (journaled with the batch that caused it).
    fn account(&mut self, record: slurm_proto::acct::AcctRecord) {
        let r = self.p.acct.make(&self.conf.cluster_name, record);
        self.p.acct.push(r.clone());
        self.entries.push(Entry::Acct(Box::new(r.clone())));
        self.acct_new.push(r);
    }

    /// Records made durable by the batch just committed.
    pub fn take_acct(&mut self) -> Vec<slurm_proto::acct::SeqRecord> {
        std::mem::take(&mut self.acct_new)
    }

    /// Records still waiting for slurmdbd (from the saved state).
    pub fn acct_backlog(&self) -> std::collections::VecDeque<slurm_proto::acct::SeqRecord> {
        self.p.acct.pending.clone()
    }

    /// slurmdbd has every record up to `through`.
    pub fn acct_acked(&mut self, through: u64) {
        if self
            .p
            .acct
            .pending
            .front()
            .is_some_and(|r| r.seq <= through)
        {
            self.p.acct.acked(through);
            self.entries.push(Entry::AcctAcked(through));
        }
    }

    /// Record what changed about a job and its steps since last sent.
    fn acct_job(&mut self, j: &JobRecord) {
        use slurm_proto::acct::{AcctJob, AcctRecord, AcctStep};
        let mut rec = AcctJob::from_record(j);
        // Accounting records a cancelled job's end when it is cancelled,
        // before any script status: its job line says 0:0, as Slurm's does.
        if j.state == JobState::Cancelled {
            rec.exit_status = 0;
        }
        // A pending job's priority moves every cycle: not worth a record.
        let mut key = rec.clone();
        key.priority = 0;
        if self.acct_jobs.get(&j.job_id) != Some(&key) {
            self.acct_jobs.insert(j.job_id, key);
            self.account(if j.state.is_finished() {
                AcctRecord::JobEnd(rec)
            } else {
                AcctRecord::JobStart(rec)
            });
        }
        for s in &j.steps {
            let now = (
                s.state,
                s.end_time,
                s.exit_status,
                s.usage.map_or(0, |u| u.cpu_usec.max(1)),
            );
            let k = (j.job_id, s.step_id);
            if self.acct_steps.get(&k) == Some(&now) {
                continue;
            }
            self.acct_steps.insert(k, now);
            let st = AcctStep::from_record(j, s);
            self.account(if s.end_time.is_some() {
                AcctRecord::StepEnd(st)
            } else {
                AcctRecord::StepStart(st)
            });
        }
    }

    /// Record a node going out of or back into service.
    fn acct_node(&mut self, name: &str, a: &NodeAdmin) {
        use slurm_proto::acct::{AcctRecord, NodeEvent};
        let key = (a.down, a.drain, a.reason.clone());
        let before = self.acct_nodes.insert(name.to_string(), key.clone());
        let was_out = before.as_ref().is_some_and(|b| b.0 || b.1);
        if before.as_ref() == Some(&key) || (!was_out && !a.down && !a.drain) {
            return;
        }
        let state = match (a.down, a.drain) {
            (true, true) => "DOWN+DRAIN",
            (true, false) => "DOWN",
            (false, true) => "IDLE+DRAIN",
            (false, false) => "IDLE",
        };
        let cpus = self
            .node_index
            .get(name)
            .map(|&i| self.nodes[i].cpus)
            .unwrap_or(0);
        self.account(AcctRecord::NodeState(NodeEvent {
            node: name.to_string(),
            state: state.to_string(),
            reason: if a.down || a.drain {
                a.reason.clone()
            } else {
                None
            },
            reason_uid: a.reason_uid,
            cpus,
            time: a.reason_time.unwrap_or(self.last_update),
        }));
    }

    /// The GRES kinds of every node's `Gres=` line.
    fn refresh_gres_kinds(&mut self) {
        let (k, warn) = crate::gres::GresKinds::of(self.nodes.iter().map(|n| n.gres.as_slice()));
        for w in warn {
            tracing::warn!("{w}");
        }
        self.gres_kinds = k;
    }

    /// A job's generic resources per node, as the core counts them.
    fn job_gres(&self, d: &JobDesc, nodes: u32, tasks: u32) -> Result<Vec<GresReq>, String> {
        let specs = slurm_common::gres::job_per_node(
            d.gres.as_deref(),
            d.gpus.as_deref(),
            d.gpus_per_node.as_deref(),
            d.gpus_per_task.as_deref(),
            nodes,
            tasks,
        )?;
        self.gres_kinds.job_reqs(&specs)
    }

    /// `scontrol reconfigure`: read slurm.conf again and apply what can
    /// change while running (partitions, node weights/features/GRES,
    /// licenses, scheduler and priority parameters, preemption, limits...).
    /// A file that does not parse, or a change that needs a restart (the
    /// node set, cluster name, ports, state directory, plugins), is refused
    /// and changes nothing.
    fn reconfigure(&mut self, who: Caller, now: i64) -> Result<Response, RpcError> {
        if !who.privileged {
            return err(SlurmError::AccessDenied);
        }
        // systemd hears of it (Type=notify): reloading, then ready again.
        slurm_common::logging::notify("RELOADING=1");
        let r = self.reconfigure_now(now);
        slurm_common::logging::notify("READY=1");
        r
    }

    fn reconfigure_now(&mut self, now: i64) -> Result<Response, RpcError> {
        let new = match SlurmConf::load(&self.conf.path) {
            Ok(c) => c,
            Err(e) => return err_detail(SlurmError::InvalidRequest, e.to_string()),
        };
        let old = &self.conf;
        let node_names = |c: &SlurmConf| c.nodes.iter().map(|n| n.name.clone()).collect::<Vec<_>>();
        let fixed = [
            ("ClusterName", old.cluster_name != new.cluster_name),
            ("the node list", node_names(old) != node_names(&new)),
            ("SlurmctldPort", old.slurmctld_port != new.slurmctld_port),
            ("SlurmdPort", old.slurmd_port != new.slurmd_port),
            (
                "StateSaveLocation",
                old.state_save_location != new.state_save_location,
            ),
            ("SchedulerType", old.scheduler_type != new.scheduler_type),
            ("SelectType", old.select_type != new.select_type),
            ("PriorityType", old.priority_type != new.priority_type),
            (
                "AccountingStorageType",
                old.accounting_storage_type != new.accounting_storage_type,
            ),
        ];
        if let Some((what, _)) = fixed.iter().find(|(_, changed)| *changed) {
            return err_detail(
                SlurmError::NeedRestart,
                format!("{what} changed: restart slurmctld to apply it"),
            );
        }
        let topologies = match self.load_topology(&new) {
            Ok(t) => t,
            Err(e) => return err_detail(SlurmError::InvalidRequest, e),
        };
        // Every check passed: apply.
        self.topologies = topologies;
        if new.get("SchedulerParameters") != old.get("SchedulerParameters") {
            match slurm_plugins::registry::scheduler_with_params(
                &new.scheduler_type,
                new.get("SchedulerParameters").unwrap_or(""),
            ) {
                Ok(s) => self.scheduler = s.plugin,
                Err(e) => return err_detail(SlurmError::InvalidRequest, e.to_string()),
            }
        }
        if let Some(m) = self.multifactor.as_mut() {
            match slurm_plugins::priority::PriorityParams::from_config(&new.entries) {
                Ok(p) => m.reconfigure(p),
                Err(e) => return err_detail(SlurmError::InvalidRequest, e.to_string()),
            }
        }
        for n in &new.nodes {
            if let Some(&i) = self.node_index.get(&n.name) {
                let admin = self.p.nodes.get(&n.name).and_then(|a| a.features.clone());
                let r = &mut self.nodes[i];
                r.weight = n.weight;
                r.features = admin.unwrap_or_else(|| n.features.clone());
                r.gres = n.gres.clone();
                r.partitions = new
                    .partitions
                    .iter()
                    .filter(|p| p.nodes.contains(&n.name))
                    .map(|p| p.name.clone())
                    .collect();
            }
        }
        self.partitions = partition_records(&new);
        // Operator changes outlive a reconfigure; those of partitions no
        // longer configured go.
        let gone: Vec<String> = self
            .p
            .partitions
            .iter()
            .filter(|(n, a)| a.created.is_none() && !self.partitions.iter().any(|p| &p.name == *n))
            .map(|(n, _)| n.clone())
            .collect();
        for n in gone {
            self.p.partitions.remove(&n);
            self.entries.push(Entry::Partition(n, None));
        }
        self.apply_part_admin();
        self.licenses =
            slurm_common::licenses::parse(new.get("Licenses").unwrap_or("")).unwrap_or_default();
        self.enforce = crate::assoc::Enforce::parse(&new.accounting_storage_enforce);
        self.limits = SubmitLimits::from_conf(&new);
        self.conf = Arc::new(new);
        self.refresh_gres_kinds();
        self.last_update = self.last_update.max(now);
        self.dirty = true;
        self.sched_needed = true;
        self.refresh();
        tracing::info!("reconfigured from {}", self.conf.path.display());
        Ok(Response::Ok)
    }

    /// New associations, users and QOS from slurmdbd.
    pub fn set_assocs(&mut self, c: crate::assoc::AssocCache, now: i64) {
        self.assocs = Some(c);
        self.sched_needed = true;
        self.fair_share_from_accounting(now);
    }

    /// Multifactor with accounting: the fair-share tree is slurmdbd's, with
    /// its recorded usage; this controller adds only what ran after the
    /// last rolled-up hour.
    fn fair_share_from_accounting(&mut self, now: i64) {
        let (Some(m), Some(c)) = (self.multifactor.as_mut(), self.assocs.as_ref()) else {
            return;
        };
        let Some(until) = c.rolled_until else {
            return;
        };
        m.tree = c.fair_share_tree(m.tree.policy(), now);
        for j in self.p.jobs.values() {
            if let Some(start) = j.start_time.filter(|_| j.state != JobState::Pending) {
                self.charged.insert(j.job_id, start.max(until));
            }
        }
        m.recompute();
        self.multifactor_tick(now);
        self.recompute_priorities(now);
    }

    /// Start accounting: tell slurmdbd what the cluster is (once per start).
    pub fn acct_start(&mut self, host: &str, now: i64) {
        use slurm_proto::acct::{AcctRecord, ClusterInfo};
        self.acct_enabled = true;
        for (name, a) in &self.p.nodes {
            self.acct_nodes
                .insert(name.clone(), (a.down, a.drain, a.reason.clone()));
        }
        let cpus: u32 = self.nodes.iter().map(|n| n.cpus).sum();
        let mem: u64 = self.nodes.iter().map(|n| n.real_memory).sum();
        let nodes = self.nodes.len() as u32;
        self.account(AcctRecord::ClusterInfo(ClusterInfo {
            control_host: host.to_string(),
            control_port: self.conf.slurmctld_port,
            cpus,
            nodes,
            tres: format!("cpu={cpus},mem={mem}M,energy=0,node={nodes},billing={cpus}"),
            time: now,
        }));
    }

    /// A job to change (counted again by the next `refresh`).
    fn job_mut(&mut self, id: JobId) -> Option<&mut JobRecord> {
        self.touched.insert(id);
        self.p.jobs.get_mut(&id).map(Arc::make_mut)
    }

    fn node_addr(&self, name: &str) -> Option<String> {
        self.node_index
            .get(name)
            .map(|&i| format!("{}:{}", self.nodes[i].addr, self.nodes[i].port))
    }

    /// A daemon that can take messages (external nodes have none).
    fn node_responding(&self, name: &str) -> bool {
        self.node_index.get(name).is_some_and(|&i| {
            !self.nodes[i].external && !self.nodes[i].flags.not_responding && self.registered[i]
        })
    }

    // ------------------------------------------------------------------
    // Derived state

    /// Recompute node allocation, node states and partition totals from the
    /// jobs and admin states (derived, never stored).
    /// Bring `node_use` up to date: the jobs touched since the last call
    /// are taken out as last counted and put back as they are now; the
    /// first time (or after the node list changed) every job is counted.
    /// Debug builds check the result against a count from scratch.
    fn count_node_use(&mut self) {
        if !self.use_ready || self.node_use.mem.len() != self.nodes.len() {
            self.node_use = NodeUse::zeroed(self.nodes.len());
            self.shares.clear();
            for j in self.p.jobs.values() {
                let s = shares_of(&self.node_index, j);
                if !s.is_empty() {
                    self.node_use.add(&s, 1);
                    self.shares.insert(j.job_id, s);
                }
            }
            self.touched.clear();
            self.use_ready = true;
        } else {
            for id in std::mem::take(&mut self.touched) {
                if let Some(old) = self.shares.remove(&id) {
                    self.node_use.add(&old, -1);
                }
                if let Some(j) = self.p.jobs.get(&id) {
                    let s = shares_of(&self.node_index, j);
                    if !s.is_empty() {
                        self.node_use.add(&s, 1);
                        self.shares.insert(id, s);
                    }
                }
            }
        }
        #[cfg(debug_assertions)]
        {
            let mut fresh = NodeUse::zeroed(self.nodes.len());
            for j in self.p.jobs.values() {
                fresh.add(&shares_of(&self.node_index, j), 1);
            }
            assert_eq!(
                self.node_use, fresh,
                "node use counted job by job differs from a count from scratch"
            );
        }
    }

    pub fn refresh(&mut self) {
        self.count_node_use();
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
        for (i, n) in self.nodes.iter_mut().enumerate() {
            let a = self.p.nodes.get(&n.name).unwrap_or(&none);
            n.flags.drain = a.drain;
            if n.reason != a.reason {
                n.reason = a.reason.clone();
            }
            n.reason_time = a.reason_time;
            n.reason_uid = a.reason_uid;
            let future = self
                .conf
                .node(&n.name)
                .and_then(|c| c.state.as_deref())
                .is_some_and(|s| s == "FUTURE");
            n.base_state = if future {
                NodeBaseState::Future
            } else if a.down {
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
        for p in &mut self.partitions {
            p.total_cpus = 0;
            p.total_mem = 0;
            for name in &p.nodes {
                if let Some(&i) = self.node_index.get(name) {
                    p.total_cpus += self.nodes[i].cpus;
                    p.total_mem += self.nodes[i].real_memory;
                }
            }
        }
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            jobs: self.p.jobs.values().cloned().collect(),
            nodes: self.nodes.clone(),
            partitions: self.partitions.clone(),
            config: self.config_dump(),
            conf: Some(self.conf.clone()),
            diag: self.diag(),
            reservations: self.p.reservations.values().cloned().collect(),
            priorities: {
                let mut v: Vec<JobPriority> = self.factors.values().cloned().collect();
                v.sort_by_key(|p| p.job_id);
                v
            },
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
            job_changed: Vec::new(),
            topology: self.topologies.entries.clone(),
            private: self.conf.private_data(),
            node_index: Arc::new(self.node_index.clone()),
            operators: Arc::new(
                self.assocs
                    .iter()
                    .flat_map(|c| c.users.values())
                    .filter(|u| u.admin_level != slurm_proto::acct::AdminLevel::None)
                    .map(|u| u.name.clone())
                    .collect(),
            ),
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

    /// Licenses held by running (and still completing) jobs.
    fn licenses_used(&self) -> HashMap<String, u32> {
        let mut used: HashMap<String, u32> = HashMap::new();
        if self.licenses.is_empty() {
            return used;
        }
        for j in self.p.jobs.values() {
            // Suspended jobs keep their licenses.
            if !Self::holds_devices(j) {
                continue;
            }
            let Some(l) = j.desc.licenses.as_deref() else {
                continue;
            };
            for (name, n) in slurm_common::licenses::parse(l).unwrap_or_default() {
                *used.entry(name).or_default() += n;
            }
        }
        used
    }

    fn diag(&self) -> DiagStats {
        let st = &self.stats;
        let count = |s: JobState| self.p.jobs.values().filter(|j| j.state == s).count() as u64;
        DiagStats {
            since: self.boot_time,
            now: self.last_update,
            jobs_submitted: st.jobs_submitted,
            jobs_started: st.jobs_started,
            jobs_completed: st.jobs_completed,
            jobs_canceled: st.jobs_canceled,
            jobs_failed: st.jobs_failed,
            jobs_pending: count(JobState::Pending),
            jobs_running: count(JobState::Running),
            main_cycles: st.sched_cycles,
            main_last_us: st.last_cycle_us,
            main_max_us: st.max_cycle_us,
            main_total_us: st.total_cycle_us,
            main_total_depth: st.total_depth,
            main_last_queue: st.last_queue,
            bf_cycles: st.bf_cycles,
            bf_last_us: st.bf_last_us,
            bf_max_us: st.bf_max_us,
            bf_total_us: st.bf_total_us,
            bf_last_depth: st.bf_last_depth,
            bf_total_depth: st.bf_total_depth,
            bf_backfilled_jobs: st.bf_backfilled_jobs,
            bf_last_when: st.bf_last_when,
            bf_last_queue: st.bf_last_queue,
            // Counted where requests are served (`server::RpcStats`).
            rpc_types: Vec::new(),
            rpc_users: Vec::new(),
        }
    }

    fn config_dump(&self) -> ConfigDump {
        let mut entries = self.conf.entries.clone();
        // Every controller, numbered, as Slurm shows them.
        entries.retain(|(k, _)| !k.eq_ignore_ascii_case("SlurmctldHost"));
        for (i, h) in self.conf.slurmctld_hosts.iter().enumerate() {
            let v = match &h.addr {
                Some(a) => format!("{}({a})", h.name),
                None => h.name.clone(),
            };
            entries.push((format!("SlurmctldHost[{i}]"), v));
        }
        entries.push(("SLURM_CONF".into(), self.conf.path.display().to_string()));
        entries.push(("SLURM_VERSION".into(), SLURM_VERSION.into()));
        entries.sort_by_key(|e| e.0.to_ascii_lowercase());
        ConfigDump {
            entries,
            boot_time: self.boot_time,
        }
    }

    /// The scheduler's view of nodes and partitions right now.
    fn cluster_view(&self) -> ClusterView {
        let cr_cpu = self.conf.allocates_threads();
        let mut exclusive = vec![false; self.nodes.len()];
        // `--exclusive=topo` jobs hold the rest of their leaves or blocks.
        let topo_held: HashMap<JobId, Vec<NodeAlloc>> = self
            .p
            .jobs
            .values()
            .filter(|j| j.state == JobState::Running || j.completing)
            .filter(|j| j.desc.exclusive_topo || self.topologies.exclusive.contains(&j.partition))
            .filter_map(|j| {
                let t = self
                    .topologies
                    .list
                    .get(self.topologies.of_partition(&j.partition))?;
                let extra = t.held_with(true, &self.allocs_of(j));
                (!extra.is_empty()).then_some((j.job_id, extra))
            })
            .collect();
        let mut gres_used = vec![GresCounts::default(); self.nodes.len()];
        // Cores of jobs suspended by preemption wait for them.
        let preempt_held = self.system_held_cpus();
        for j in self.p.jobs.values() {
            if Self::holds_devices(j) {
                for (k, name) in j.alloc.nodes.iter().enumerate() {
                    let (Some(&i), Some(g)) = (self.node_index.get(name), j.alloc.gres.get(k))
                    else {
                        continue;
                    };
                    let c = self.gres_kinds.alloc_counts(g);
                    for (u, x) in gres_used[i].iter_mut().zip(c) {
                        *u = u.saturating_add(x);
                    }
                }
            }
            if (j.state == JobState::Running || j.completing)
                && (j.desc.exclusive || j.desc.exclusive_topo)
            {
                for name in &j.alloc.nodes {
                    if let Some(&i) = self.node_index.get(name) {
                        exclusive[i] = true;
                    }
                }
            }
            if let Some(extra) = topo_held.get(&j.job_id) {
                for a in extra {
                    exclusive[a.node] = true;
                }
            }
        }
        ClusterView {
            nodes: self
                .nodes
                .iter()
                .enumerate()
                .map(|(i, n)| NodeView {
                    name: n.name.clone(),
                    cpus: n.cpus,
                    mem: n.real_memory,
                    // Shared cores (OverSubscribe) count once per job: the
                    // sum may pass the node's count (free is then none).
                    alloc_cpus: self.cores_in_use.get(i).copied().unwrap_or(n.alloc_cpus)
                        + preempt_held[i],
                    alloc_mem: n.alloc_mem,
                    available: n.is_available() && self.registered[i],
                    weight: n.weight,
                    features: n.features.clone(),
                    exclusive_in_use: exclusive[i],
                    gres: self.gres_kinds.node_counts(&n.gres),
                    alloc_gres: gres_used[i],
                    // CR_Core (the default): whole cores; CR_CPU: threads.
                    threads_per_core: if cr_cpu { 1 } else { n.threads_per_core.max(1) },
                    sockets: n.sockets.max(1),
                })
                .collect(),
            partitions: self
                .partitions
                .iter()
                .map(|p| PartitionView {
                    name: p.name.clone(),
                    nodes: p
                        .nodes
                        .iter()
                        .filter_map(|n| self.node_index.get(n).copied())
                        .collect(),
                    // A draining partition still starts what it queued.
                    up: matches!(p.state, PartitionState::Up | PartitionState::Drain),
                    max_time: p.max_time,
                    max_nodes: p.max_nodes,
                    exclusive: p.oversubscribe.eq_ignore_ascii_case("EXCLUSIVE"),
                    priority_tier: p.priority_tier,
                    def_mem_per_cpu: p.def_mem_per_cpu,
                    topology: self.topologies.of_partition(&p.name),
                    exclusive_topo: self.topologies.exclusive.contains(&p.name),
                })
                .collect(),
            topologies: self.topologies.list.clone(),
            running: self
                .p
                .jobs
                .values()
                .filter(|j| j.state == JobState::Running || j.completing)
                .map(|j| RunningJob {
                    id: j.job_id,
                    // A job cleaning up frees its nodes any moment now.
                    end: if j.state == JobState::Running {
                        j.end_time
                    } else {
                        Some(self.last_update)
                    },
                    alloc: self
                        .allocs_of(j)
                        .into_iter()
                        .filter(|a| {
                            j.state == JobState::Running
                                || j.completing_nodes.contains(&self.nodes[a.node].name)
                        })
                        .chain(topo_held.get(&j.job_id).cloned().unwrap_or_default())
                        .collect(),
                    priority: j.priority,
                    partition: self
                        .partitions
                        .iter()
                        .position(|p| p.name == j.partition)
                        .unwrap_or(0),
                })
                .collect(),
        }
    }

    fn job_view(&self, j: &JobRecord) -> Option<JobView> {
        self.job_view_with(j, true)
    }

    /// [`Controller::job_view`]; without `reservations`, the nodes other
    /// jobs' reservations hold are not kept from it (they will be free when
    /// the reservations end): for "could it ever run".
    fn job_view_with(&self, j: &JobRecord, reservations: bool) -> Option<JobView> {
        let partition = self.partitions.iter().position(|p| p.name == j.partition)?;
        let idx = |names: &Vec<String>| {
            names
                .iter()
                .filter_map(|n| self.node_index.get(n).copied())
                .collect()
        };
        let (constraint_away, node_counts) = self.constraint_nodes(j, partition);
        Some(JobView {
            id: j.job_id,
            priority: j.priority,
            submit_time: j.submit_time,
            partition,
            min_nodes: j.min_nodes,
            max_nodes: j.max_nodes,
            num_tasks: j.num_tasks,
            cpus_per_task: j.desc.cpus_per_task.unwrap_or(1).max(1),
            ntasks_per_node: j.desc.ntasks_per_node,
            mem_per_node: j.desc.mem_per_node,
            mem_per_cpu: j.desc.mem_per_cpu,
            req_nodes: idx(&j.desc.req_nodes),
            exc_nodes: {
                let mut x: Vec<usize> = idx(&j.desc.exc_nodes);
                if reservations || j.desc.reservation.is_some() {
                    x.extend(self.reserved_away(j));
                } else {
                    x.extend(self.external_away(j));
                }
                x.extend(constraint_away);
                x.extend(self.hardware_away(&j.desc));
                x.sort_unstable();
                x.dedup();
                x
            },
            exclusive: j.desc.exclusive,
            time_limit: j.time_limit,
            begin_time: j.desc.begin_time,
            hold: j.held.map(|h| match h {
                HoldKind::User => Hold::User,
                HoldKind::Admin => Hold::Admin,
            }),
            switches: j.desc.switches.filter(|_| {
                let eligible = j.desc.begin_time.unwrap_or(0).max(j.submit_time);
                let wait = j.desc.wait4switch.map_or(self.max_switch_wait(), i64::from);
                self.last_update < eligible.saturating_add(wait)
            }),
            segment: j.desc.segment,
            exclusive_topo: j.desc.exclusive_topo,
            contiguous: j.desc.contiguous,
            ntasks_per_socket: j.desc.ntasks_per_socket,
            node_counts,
            // Checked at submission; a request no node serves never fits.
            gres: self
                .job_gres(&j.desc, j.min_nodes, j.num_tasks)
                .unwrap_or_else(|_| vec![GresReq { mask: 0, count: 1 }]),
        })
    }

    /// `SchedulerParameters=max_switch_wait=` (seconds; default 300): the
    /// longest a job waits for its `--switches` count.
    fn max_switch_wait(&self) -> i64 {
        self.conf
            .get("SchedulerParameters")
            .unwrap_or("")
            .split(',')
            .find_map(|o| o.trim().strip_prefix("max_switch_wait="))
            .and_then(|v| v.parse().ok())
            .unwrap_or(300)
    }

    /// What a job's `--constraint` means on its partition: the nodes it
    /// rules out (for `[a|b]`, the first alternative enough of the
    /// partition's nodes have) and, per count (`gpu*2`), the nodes with the
    /// feature and how many of them the job needs.
    fn constraint_nodes(
        &self,
        j: &JobRecord,
        partition: usize,
    ) -> (Vec<usize>, Vec<(Vec<usize>, u32)>) {
        let Some(c) = j
            .desc
            .constraint
            .as_deref()
            .and_then(|c| slurm_common::constraint::Constraint::parse(c).ok())
        else {
            return (Vec::new(), Vec::new());
        };
        let mut nodes: Vec<usize> = self.partitions[partition]
            .nodes
            .iter()
            .filter_map(|n| self.node_index.get(n).copied())
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        let choice = (0..c.choices())
            .find(|&k| {
                nodes
                    .iter()
                    .filter(|&&i| c.node_ok(&self.nodes[i].features, k))
                    .count()
                    >= j.min_nodes.max(1) as usize
            })
            .unwrap_or(0);
        let counts = c
            .counts()
            .into_iter()
            .map(|(f, n)| {
                let set = nodes
                    .iter()
                    .copied()
                    .filter(|&i| self.nodes[i].features.iter().any(|x| x == f))
                    .collect();
                (set, n)
            })
            .collect();
        let away = nodes
            .into_iter()
            .filter(|&i| !c.node_ok(&self.nodes[i].features, choice))
            .collect();
        (away, counts)
    }

    /// Nodes with fewer sockets, cores per socket or threads per core than
    /// the job asks for (none when it asks for none).
    fn hardware_away(&self, d: &JobDesc) -> Vec<usize> {
        if d.sockets_per_node.is_none()
            && d.cores_per_socket.is_none()
            && d.threads_per_core.is_none()
        {
            return Vec::new();
        }
        (0..self.nodes.len())
            .filter(|&i| {
                let n = &self.nodes[i];
                d.sockets_per_node.is_some_and(|s| n.sockets < s)
                    || d.cores_per_socket.is_some_and(|c| n.cores_per_socket < c)
                    || d.threads_per_core.is_some_and(|t| n.threads_per_core < t)
            })
            .collect()
    }

    /// Nodes a job may not use because of reservations: for a job in a
    /// reservation, every node outside it; for others, nodes of reservations
    /// that are active or would begin before the job could end.
    fn reserved_away(&self, j: &JobRecord) -> Vec<usize> {
        let mut away = self.external_away(j);
        away.extend(self.reservation_away(j));
        away
    }

    /// External jobs only on external nodes and nodes whose daemon runs
    /// beside a kubelet, and the others never on external nodes.
    fn external_away(&self, j: &JobRecord) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| {
                let n = &self.nodes[i];
                if j.desc.external {
                    !n.external && !n.kubelet
                } else {
                    n.external
                }
            })
            .collect()
    }

    /// Why `id`, which cannot run now, waits, when it is because other
    /// jobs' reservations hold the nodes it could run on (Slurm's
    /// "ReqNodeNotAvail, May be reserved for other job").
    fn reserved_reason(&self, id: JobId, view: &ClusterView) -> Option<JobReason> {
        let j = self.p.jobs.get(&id)?;
        if self.p.reservations.is_empty() || j.desc.reservation.is_some() {
            return None;
        }
        let held = self.job_view_with(j, true)?;
        let free = self.job_view_with(j, false)?;
        (slurm_plugins::select::place(view, &held, true).is_err()
            && slurm_plugins::select::place(view, &free, true).is_ok())
        .then(|| JobReason::Other("ReqNodeNotAvail, May be reserved for other job".into()))
    }

    fn reservation_away(&self, j: &JobRecord) -> Vec<usize> {
        let now = self.last_update;
        if let Some(r) = j
            .desc
            .reservation
            .as_ref()
            .and_then(|n| self.p.reservations.get(n))
        {
            return (0..self.nodes.len())
                .filter(|&i| !r.nodes.contains(&self.nodes[i].name))
                .collect();
        }
        let end = j
            .time_limit
            .map_or(i64::MAX, |m| now.saturating_add(m as i64 * 60));
        self.p
            .reservations
            .values()
            .filter(|r| r.end_time > now && r.start_time < end)
            .flat_map(|r| r.nodes.iter())
            .filter_map(|n| self.node_index.get(n).copied())
            .collect()
    }

    fn reservation_nodes_free(&self, nodes: &[String], start: i64, ignore_jobs: bool) -> bool {
        ignore_jobs
            || !self.p.jobs.values().any(|j| {
                Self::holds_devices(j)
                    // A suspended job's end is unknown until it resumes.
                    && (j.state == JobState::Suspended || j.end_time.is_none_or(|e| e > start))
                    && j.alloc.nodes.iter().any(|n| nodes.contains(n))
            })
    }

    fn reservation_from(
        &self,
        who: Caller,
        spec: &ReservationSpec,
        base: Option<&ReservationRecord>,
        now: i64,
    ) -> Result<ReservationRecord, RpcError> {
        let bad = |d: String| {
            Err(RpcError {
                error: SlurmError::ReservationInvalid,
                detail: Some(d),
            })
        };
        let mut r = base.cloned().unwrap_or_default();
        if base.is_none() {
            r.name = match &spec.name {
                Some(n) if !n.is_empty() => n.clone(),
                _ => {
                    let user = users::user_name_or_id(who.uid);
                    let mut k = 1;
                    while self.p.reservations.contains_key(&format!("{user}_{k}")) {
                        k += 1;
                    }
                    format!("{user}_{k}")
                }
            };
            r.start_time = now;
        }
        if let Some(t) = spec.start_time {
            r.start_time = t.max(if base.is_none() { now } else { i64::MIN });
        }
        match (spec.end_time, spec.duration) {
            (Some(e), _) => r.end_time = e,
            (None, Some(d)) => r.end_time = r.start_time + d as i64 * 60,
            (None, None) if base.is_none() => {
                return bad("a Duration or EndTime is required".into())
            }
            _ => {}
        }
        if r.end_time <= r.start_time {
            return bad("EndTime must follow StartTime".into());
        }
        if let Some(f) = &spec.flags {
            const KNOWN: &[&str] = &[
                "MAINT",
                "IGNORE_JOBS",
                "FLEX",
                "DAILY",
                "WEEKLY",
                "WEEKDAY",
                "WEEKEND",
                "OVERLAP",
                "PART_NODES",
                "STATIC_ALLOC",
                "ANY_NODES",
                "NO_HOLD_JOBS_AFTER",
                "PURGE_COMP",
                "FIRST_CORES",
                "TIME_FLOAT",
                "REPLACE",
                "REPLACE_DOWN",
                "SPEC_NODES",
                "NO_HOLD_JOBS_AFTER_END",
                "MAGNETIC",
                "USER_DELETE",
                "HOURLY",
            ];
            for x in f {
                if !KNOWN.contains(&x.as_str()) {
                    return bad(format!("unknown reservation flag {x}"));
                }
            }
            r.flags = f.clone();
        }
        if let Some(u) = &spec.users {
            r.users = u.clone();
        }
        if let Some(a) = &spec.accounts {
            r.accounts = a.clone();
        }
        if spec.partition.is_some() {
            r.partition = spec.partition.clone();
        }
        if base.is_none() && r.users.is_empty() && r.accounts.is_empty() {
            return bad("Users or Accounts must be given".into());
        }
        let ignore = r.has_flag("IGNORE_JOBS") || r.has_flag("MAINT");
        // `Nodes=ALL`: every node of the cluster (its external ones aside).
        let all: Vec<String>;
        let nodes = match spec.nodes.as_deref() {
            Some([x]) if x.eq_ignore_ascii_case("ALL") => {
                all = self
                    .nodes
                    .iter()
                    .filter(|n| !n.external)
                    .map(|n| n.name.clone())
                    .collect();
                Some(&all)
            }
            _ => spec.nodes.as_ref(),
        };
        if let Some(n) = nodes {
            for x in n {
                if !self.node_index.contains_key(x) {
                    return Err(RpcError {
                        error: SlurmError::InvalidNodeName,
                        detail: Some(x.clone()),
                    });
                }
            }
            r.nodes = n.clone();
        } else if let Some(cnt) = spec.node_cnt {
            let pool: Vec<String> = self
                .nodes
                .iter()
                .filter(|n| {
                    r.partition
                        .as_ref()
                        .is_none_or(|p| n.partitions.contains(p))
                })
                .filter(|n| {
                    !self.p.reservations.values().any(|o| {
                        o.name != r.name
                            && o.nodes.contains(&n.name)
                            && o.start_time < r.end_time
                            && r.start_time < o.end_time
                    })
                })
                .filter(|n| {
                    self.reservation_nodes_free(std::slice::from_ref(&n.name), r.start_time, ignore)
                })
                .map(|n| n.name.clone())
                .take(cnt as usize)
                .collect();
            if pool.len() < cnt as usize {
                return Err(RpcError {
                    error: SlurmError::ReservationBusy,
                    detail: Some(format!("only {} nodes free", pool.len())),
                });
            }
            r.nodes = pool;
        } else if base.is_none() {
            return bad("Nodes or NodeCnt must be given".into());
        }
        if !self.reservation_nodes_free(&r.nodes, r.start_time, ignore) {
            return Err(SlurmError::ReservationBusy.into());
        }
        if !r.has_flag("OVERLAP") {
            for o in self.p.reservations.values().filter(|o| o.name != r.name) {
                if o.start_time < r.end_time
                    && r.start_time < o.end_time
                    && o.nodes.iter().any(|n| r.nodes.contains(n))
                {
                    return Err(RpcError {
                        error: SlurmError::ReservationBusy,
                        detail: Some(format!("overlaps reservation {}", o.name)),
                    });
                }
            }
        }
        r.core_cnt = r
            .nodes
            .iter()
            .filter_map(|n| self.node_index.get(n))
            .map(|&i| self.nodes[i].cpus)
            .sum();
        Ok(r)
    }

    fn create_reservation(
        &mut self,
        who: Caller,
        spec: ReservationSpec,
        now: i64,
    ) -> Result<Response, RpcError> {
        if !who.privileged {
            return err(SlurmError::AccessDenied);
        }
        if spec
            .name
            .as_ref()
            .is_some_and(|n| self.p.reservations.contains_key(n))
        {
            return err_detail(
                SlurmError::ReservationInvalid,
                "a reservation of that name exists",
            );
        }
        let r = self.reservation_from(who, &spec, None, now)?;
        let name = r.name.clone();
        self.entries.push(Entry::Reservation(r.clone()));
        self.p.reservations.insert(name.clone(), r);
        self.dirty = true;
        self.sched_needed = true;
        self.refresh();
        Ok(Response::ReservationCreated { name })
    }

    fn update_reservation(
        &mut self,
        who: Caller,
        spec: ReservationSpec,
        now: i64,
    ) -> Result<Response, RpcError> {
        if !who.privileged {
            return err(SlurmError::AccessDenied);
        }
        let Some(base) = spec
            .name
            .as_ref()
            .and_then(|n| self.p.reservations.get(n))
            .cloned()
        else {
            return err(SlurmError::ReservationInvalid);
        };
        let r = self.reservation_from(who, &spec, Some(&base), now)?;
        self.entries.push(Entry::Reservation(r.clone()));
        self.p.reservations.insert(r.name.clone(), r);
        self.dirty = true;
        self.sched_needed = true;
        self.refresh();
        Ok(Response::Ok)
    }

    fn delete_reservation(&mut self, who: Caller, name: &str) -> Result<Response, RpcError> {
        if !who.privileged {
            return err(SlurmError::AccessDenied);
        }
        if self.p.reservations.remove(name).is_none() {
            return err(SlurmError::ReservationInvalid);
        }
        self.entries
            .push(Entry::RemoveReservation(name.to_string()));
        self.dirty = true;
        self.sched_needed = true;
        self.refresh();
        Ok(Response::Ok)
    }

    /// Repeat DAILY/WEEKLY reservations past their end; drop ended ones.
    fn roll_reservations(&mut self, now: i64) {
        let ended: Vec<ReservationRecord> = self
            .p
            .reservations
            .values()
            .filter(|r| r.end_time <= now)
            .cloned()
            .collect();
        for mut r in ended {
            let period = if r.has_flag("DAILY") {
                86400
            } else if r.has_flag("WEEKLY") {
                7 * 86400
            } else if r.has_flag("HOURLY") {
                3600
            } else {
                0
            };
            if period > 0 {
                while r.end_time <= now {
                    r.start_time += period;
                    r.end_time += period;
                }
                self.entries.push(Entry::Reservation(r.clone()));
                self.p.reservations.insert(r.name.clone(), r);
            } else {
                self.p.reservations.remove(&r.name);
                self.entries.push(Entry::RemoveReservation(r.name.clone()));
            }
            self.dirty = true;
            self.sched_needed = true;
        }
    }

    // ------------------------------------------------------------------
    // Priority (multifactor)

    fn shares(&self) -> Vec<ShareInfo> {
        let Some(m) = &self.multifactor else {
            return Vec::new();
        };
        m.report()
            .rows
            .iter()
            .map(|r| ShareInfo {
                account: r.account.clone(),
                user: r.user.clone(),
                depth: r.depth as u32,
                raw_shares: r.raw_shares.to_string(),
                norm_shares: r.norm_shares,
                raw_usage: r.raw_usage,
                effective_usage: r.effective_usage,
                fairshare: r.fairshare,
                level_fs: r.level_fs.map(|v| if v.is_finite() { v } else { f64::MAX }),
            })
            .collect()
    }

    fn account_of(j: &JobRecord) -> String {
        if j.account.is_empty() {
            "default".to_string()
        } else {
            j.account.clone()
        }
    }

    /// Charge running jobs' CPU time to fair share, then recompute pending
    /// jobs' priorities when the calculation period has passed.
    fn multifactor_tick(&mut self, now: i64) {
        let Some(mut m) = self.multifactor.take() else {
            return;
        };
        let mut seen = Vec::new();
        for j in self.p.jobs.values() {
            let Some(start) = j.start_time.filter(|_| j.state != JobState::Pending) else {
                continue;
            };
            let until = match j.state {
                JobState::Running => now,
                // Charged up to the suspension; resuming restarts the clock.
                JobState::Suspended => j.suspend_time.unwrap_or(now),
                _ => j.end_time.unwrap_or(now),
            };
            let from = self.charged.get(&j.job_id).copied().unwrap_or(start);
            seen.push((j.job_id, until.max(from)));
            if until > from {
                if let Err(e) = m.tree.record_job_usage(
                    &j.user_name,
                    &Self::account_of(j),
                    j.alloc.total_cpus(),
                    (until - from) as u64,
                    now,
                ) {
                    tracing::warn!("fair share usage of job {}: {e}", j.job_id);
                }
            }
        }
        // Every job is charged up to where it has run (ended jobs stay
        // charged until they are purged).
        self.charged = seen.into_iter().collect();
        let recalc = m.tick(now);
        self.multifactor = Some(m);
        if recalc {
            self.recompute_priorities(now);
        }
    }

    fn priority_context(&self) -> slurm_plugins::priority::PriorityContext {
        slurm_plugins::priority::PriorityContext {
            total_nodes: self.nodes.len() as u32,
            total_cpus: self.nodes.iter().map(|n| n.cpus).sum(),
            total_mem_mb: self.nodes.iter().map(|n| n.real_memory).sum(),
            tres_totals: Vec::new(),
            max_partition_job_factor: self
                .partitions
                .iter()
                .map(|p| p.priority_job_factor)
                .max()
                .unwrap_or(1),
            max_qos_priority: 0,
            max_assoc_priority: 0,
        }
    }

    /// The multifactor priority of a pending job (`None` under priority/basic).
    fn multifactor_priority(&self, j: &JobRecord, now: i64) -> Option<JobPriority> {
        let m = self.multifactor.as_ref()?;
        let part = self.partitions.iter().find(|p| p.name == j.partition);
        let input = slurm_plugins::priority::PriorityInput {
            job_id: j.job_id,
            partition: j.partition.clone(),
            submit_time: j.submit_time,
            eligible_time: j.eligible_time.filter(|e| *e <= now),
            held: j.held.is_some(),
            nice: j.desc.nice.unwrap_or(0),
            site_factor: 0,
            req_nodes: j.min_nodes,
            req_cpus: j.req_cpus,
            req_mem_mb: j.desc.mem_per_node.unwrap_or(0) * j.min_nodes as u64,
            time_limit: j.time_limit,
            tres: Vec::new(),
            partition_priority_job_factor: part.map_or(1, |p| p.priority_job_factor),
            qos_priority: 0,
            assoc_priority: 0,
            assoc_path: m
                .report()
                .rows
                .iter()
                .find(|r| {
                    r.user.as_deref() == Some(j.user_name.as_str())
                        && r.account == Self::account_of(j)
                })
                .map(|r| r.path.clone()),
            prev_priority: Some(j.priority),
        };
        let f = m.priority(&input, &self.priority_context(), now);
        Some(JobPriority {
            job_id: j.job_id,
            partition: j.partition.clone(),
            user: j.user_name.clone(),
            priority: f.priority,
            site: f.site,
            age: f.age,
            assoc: f.assoc,
            fairshare: f.fairshare,
            job_size: f.job_size,
            partition_factor: f.partition,
            qos: f.qos,
            nice: f.nice,
            tres: f
                .tres
                .iter()
                .map(|(k, v)| format!("{k}={v:.2}"))
                .collect::<Vec<_>>()
                .join(","),
        })
    }

    fn recompute_priorities(&mut self, now: i64) {
        if self.multifactor.is_none() {
            return;
        }
        let pending: Vec<JobId> = self
            .p
            .jobs
            .values()
            .filter(|j| j.state == JobState::Pending)
            .map(|j| j.job_id)
            .collect();
        self.factors.retain(|id, _| pending.contains(id));
        for id in pending {
            let Some(f) = self
                .p
                .jobs
                .get(&id)
                .and_then(|j| self.multifactor_priority(j, now))
            else {
                continue;
            };
            let changed = self
                .p
                .jobs
                .get(&id)
                .is_some_and(|j| j.priority != f.priority);
            if changed {
                if let Some(j) = self.job_mut(id) {
                    j.priority = f.priority;
                }
                self.dirty = true;
            }
            self.factors.insert(id, f);
        }
        self.sched_needed = true;
    }

    // ------------------------------------------------------------------
    // Submission

    /// Validate a submission and build the job record (not yet stored).
    pub fn build_job(
        &self,
        who: Caller,
        desc: JobDesc,
        job_id: JobId,
        now: i64,
    ) -> Result<(JobRecord, Payload), RpcError> {
        self.build_job_kind(who, desc, job_id, now, true)
    }

    /// As [`Controller::build_job`]; `batch = false` for allocations without
    /// a script (`salloc`, `srun`).
    pub fn build_job_kind(
        &self,
        who: Caller,
        desc: JobDesc,
        job_id: JobId,
        now: i64,
        batch: bool,
    ) -> Result<(JobRecord, Payload), RpcError> {
        let part = match &desc.partition {
            Some(name) => self
                .partitions
                .iter()
                .find(|p| &p.name == name)
                .ok_or(RpcError::from(SlurmError::InvalidPartitionName))?,
            None => self
                .partitions
                .iter()
                .find(|p| p.default)
                .or(self.partitions.first())
                .ok_or(RpcError::from(SlurmError::DefaultPartitionNotSet))?,
        };
        self.check_partition_access(who, part, &desc)?;
        // DRAIN and INACTIVE partitions queue nothing new (DOWN ones do).
        if matches!(part.state, PartitionState::Drain | PartitionState::Inactive) {
            return err(SlurmError::PartitionNotAvail);
        }
        self.check_sizes(&desc)?;
        if desc.nice.is_some_and(|n| n < 0) && !who.privileged {
            return err_detail(
                SlurmError::AccessDenied,
                "only operators may set a negative nice",
            );
        }
        if let Some(rn) = &desc.reservation {
            let Some(r) = self.p.reservations.get(rn) else {
                return err(SlurmError::ReservationInvalid);
            };
            let uname = users::user_name_or_id(who.uid);
            let acct = desc.account.clone().unwrap_or_default();
            let allowed = who.privileged
                || r.users
                    .iter()
                    .any(|u| *u == uname || *u == who.uid.to_string())
                || (!acct.is_empty() && r.accounts.contains(&acct));
            if !allowed {
                return err(SlurmError::ReservationAccess);
            }
        }
        let batch = batch && !desc.external;
        if desc.external && !desc.script.is_empty() {
            return err_detail(
                SlurmError::InvalidRequest,
                "an EXTERNAL_JOB has no batch script",
            );
        }
        if batch && !desc.script.starts_with("#!") {
            return err_detail(
                SlurmError::InvalidRequest,
                "batch script must start with #!",
            );
        }
        for n in desc.req_nodes.iter().chain(&desc.exc_nodes) {
            if !self.node_index.contains_key(n) {
                return err_detail(SlurmError::InvalidNodeName, n.clone());
            }
        }
        if desc.min_nodes == Some(0) || desc.max_nodes == Some(0) {
            return err(SlurmError::TooManyRequestedNodes);
        }
        if desc.ntasks == Some(0)
            || desc.cpus_per_task == Some(0)
            || desc.ntasks_per_node == Some(0)
            || desc.ntasks_per_socket == Some(0)
            || desc.sockets_per_node == Some(0)
            || desc.cores_per_socket == Some(0)
            || desc.threads_per_core == Some(0)
        {
            return err_detail(
                SlurmError::InvalidRequest,
                "task and cpu counts must be positive",
            );
        }
        if let (Some(a), Some(b)) = (desc.min_nodes, desc.max_nodes) {
            if b < a {
                return err(SlurmError::TooManyRequestedNodes);
            }
        }
        if self.p.jobs.len() as u32 >= self.conf.max_job_count {
            return err(SlurmError::ReachedMaxJobCount);
        }
        if let Some(d) = &desc.dependency {
            let dep = jobspec::parse_dependency(d).map_err(|e| RpcError {
                error: SlurmError::Dependency,
                detail: Some(e.to_string()),
            })?;
            if dep.clauses.len() > MAX_DEPENDENCIES {
                return err_detail(
                    SlurmError::Dependency,
                    format!(
                        "more than {MAX_DEPENDENCIES} dependencies ({})",
                        dep.clauses.len()
                    ),
                );
            }
            for c in &dep.clauses {
                if let jobspec::DepClause::Job { job_id, .. } = c {
                    if self.dep_targets(*job_id).next().is_none() {
                        return err_detail(
                            SlurmError::Dependency,
                            format!("job {job_id} is not known"),
                        );
                    }
                }
            }
        }
        // Task and node counts as Slurm derives them.
        let part_nodes = part.nodes.len().max(1) as u32;
        let mut min_nodes = desc.min_nodes.unwrap_or(1);
        if desc.min_nodes.is_none() {
            if let (Some(n), Some(t)) = (desc.ntasks, desc.ntasks_per_node) {
                min_nodes = n.div_ceil(t).max(1);
            }
        }
        min_nodes = min_nodes.max(desc.req_nodes.len() as u32);
        let num_tasks = match (desc.ntasks, desc.ntasks_per_node) {
            (Some(n), _) => n,
            (None, Some(t)) => t * min_nodes,
            (None, None) => min_nodes,
        };
        let max_nodes = match (desc.max_nodes, desc.min_nodes) {
            (Some(m), _) => m,
            (None, Some(_)) => min_nodes,
            (None, None) => num_tasks.min(part_nodes).max(min_nodes),
        };
        if let Some(seg) = desc.segment {
            if seg == 0 || !min_nodes.is_multiple_of(seg) {
                return err_detail(
                    SlurmError::InvalidRequest,
                    format!("--segment={seg} does not divide the job's {min_nodes} nodes"),
                );
            }
            let topo = self
                .topologies
                .list
                .get(self.topologies.of_partition(&part.name));
            if let Some(slurm_plugins::topo::Topology::Block(b)) = topo {
                let base = b.sizes.first().copied().unwrap_or(1);
                if seg > base {
                    return err_detail(
                        SlurmError::InvalidRequest,
                        format!("--segment={seg} is larger than the base block size {base}"),
                    );
                }
            }
        }
        // --cpus-per-gpu / --mem-per-gpu: per node, from the GPUs each node gets.
        let mut desc = desc;
        if desc.cpus_per_gpu.is_some() || desc.mem_per_gpu.is_some() {
            let specs = match slurm_common::gres::job_per_node(
                desc.gres.as_deref(),
                desc.gpus.as_deref(),
                desc.gpus_per_node.as_deref(),
                desc.gpus_per_task.as_deref(),
                min_nodes,
                num_tasks,
            ) {
                Ok(s) => s,
                Err(e) => return err_detail(SlurmError::InvalidGres, e),
            };
            let gpus_per_node: u64 = specs
                .iter()
                .filter(|s| s.name == "gpu")
                .map(|s| s.count)
                .sum();
            if gpus_per_node == 0 {
                return err_detail(
                    SlurmError::InvalidGres,
                    "--cpus-per-gpu and --mem-per-gpu need GPUs (--gpus, --gres=gpu:N, ...)",
                );
            }
            if let Some(c) = desc.cpus_per_gpu {
                if desc.cpus_per_task.is_some() {
                    return err_detail(
                        SlurmError::InvalidRequest,
                        "--cpus-per-gpu and --cpus-per-task are mutually exclusive",
                    );
                }
                let tasks_here = desc
                    .ntasks_per_node
                    .unwrap_or(num_tasks.div_ceil(min_nodes.max(1)))
                    .max(1);
                let cpus = gpus_per_node.saturating_mul(u64::from(c));
                desc.cpus_per_task = Some(
                    cpus.div_ceil(u64::from(tasks_here))
                        .min(u64::from(u32::MAX)) as u32,
                );
            }
            if let Some(m) = desc.mem_per_gpu {
                if desc.mem_per_node.is_some() || desc.mem_per_cpu.is_some() {
                    return err_detail(
                        SlurmError::InvalidRequest,
                        "--mem-per-gpu, --mem and --mem-per-cpu are mutually exclusive",
                    );
                }
                desc.mem_per_node = Some(gpus_per_node.saturating_mul(m));
            }
        }
        let cpt = desc.cpus_per_task.unwrap_or(1);
        let time_limit = match desc.time_limit {
            Some(t) => t,
            None => part.default_time.or(part.max_time),
        };
        let held = desc.hold.then_some(if who.privileged {
            HoldKind::Admin
        } else {
            HoldKind::User
        });
        let user = users::user_by_uid(who.uid);
        let name = desc.name.clone().unwrap_or_else(|| {
            desc.command
                .as_deref()
                .and_then(|c| c.rsplit('/').next())
                .filter(|s| !s.is_empty())
                .unwrap_or("sbatch")
                .to_string()
        });
        let payload = Payload {
            script: desc.script.clone(),
            environment: desc.environment.clone(),
        };
        let mut stored = desc;
        stored.script = String::new();
        stored.environment = Vec::new();
        stored.min_nodes = Some(min_nodes);
        let mut job = JobRecord {
            job_id,
            name,
            user_id: who.uid,
            user_name: user.map(|u| u.name).unwrap_or_else(|| who.uid.to_string()),
            group_id: who.gid,
            group_name: users::group_name_or_id(who.gid),
            account: stored.account.clone().unwrap_or_default(),
            qos: stored.qos.clone().unwrap_or_else(|| "normal".into()),
            partition: part.name.clone(),
            priority: if held.is_some() {
                0
            } else {
                slurm_plugins::priority::basic(job_id as u64)
            },
            state: JobState::Pending,
            completing: false,
            reason: match held {
                Some(HoldKind::User) => JobReason::JobHeldUser,
                Some(HoldKind::Admin) => JobReason::JobHeldAdmin,
                None => JobReason::None,
            },
            time_limit,
            submit_time: now,
            eligible_time: Some(stored.begin_time.unwrap_or(now).max(now)),
            start_time: None,
            end_time: None,
            last_sched_eval: None,
            exit_status: 0,
            restarts: 0,
            batch_host: None,
            alloc: Allocation::default(),
            completing_nodes: Vec::new(),
            num_tasks,
            req_cpus: num_tasks * cpt,
            min_nodes,
            max_nodes,
            held,
            cancelled: false,
            timed_out: false,
            node_failed: false,
            steps: Vec::new(),
            batch,
            cancelled_by: None,
            suspend_time: None,
            suspended_secs: 0,
            preempt_suspended: false,
            gang_suspended: false,
            array: None,
            dependency: stored.dependency.clone(),
            desc: stored.into(),
        };
        // AccountingStorageEnforce: a valid association, an allowed QOS,
        // and submit limits.
        if let (true, Some(cache)) = (self.enforce.any(), &self.assocs) {
            let (account, qos) = cache.admit(
                self.enforce,
                &job.user_name,
                job.desc.account.as_deref(),
                job.desc.qos.as_deref(),
                &job.partition,
                job.time_limit,
                &job,
                self.p.jobs.values().map(|j| j.as_ref()),
            )?;
            if job.time_limit.is_none() {
                job.time_limit = cache.default_wall(&job.user_name, &account, &job.partition, &qos);
            }
            job.account = account;
            job.qos = qos;
        } else if let Some(cache) = &self.assocs {
            // Not enforced, but accounting knows the user's default account.
            if job.account.is_empty() {
                if let Some(u) = cache.users.get(&job.user_name) {
                    job.account = u.default_account.clone();
                }
            }
        }
        if job.desc.admin_comment.is_some() && !who.privileged {
            return err_detail(
                SlurmError::AccessDenied,
                "only administrators may set admin_comment",
            );
        }
        // Mail: known events, one recipient that cannot read as an option
        // of MailProg (REST and gRPC clients send these unchecked).
        if let Some(t) = &job.desc.mail_type {
            match slurm_common::mail::parse_types(t) {
                Ok(norm) => Arc::make_mut(&mut job.desc).mail_type = norm,
                Err(e) => return err_detail(SlurmError::InvalidRequest, e),
            }
        }
        if let Some(u) = &job.desc.mail_user {
            if let Err(e) = slurm_common::mail::check_user(u) {
                return err_detail(SlurmError::InvalidRequest, e);
            }
        }
        if let Some(s) = &job.desc.signal {
            if let Err(e) = slurm_common::signal::parse_warning(s) {
                return err_detail(SlurmError::InvalidRequest, e);
            }
        }
        if let Some(m) = &job.desc.open_mode {
            if m != "append" && m != "truncate" {
                return err_detail(
                    SlurmError::InvalidRequest,
                    format!("--open-mode={m} invalid: append or truncate"),
                );
            }
        }
        // Licenses: known ones, never more than the cluster has.
        if let Some(l) = &job.desc.licenses {
            let want = match slurm_common::licenses::parse(l) {
                Ok(w) => w,
                Err(e) => return err_detail(SlurmError::InvalidLicenses, e),
            };
            for (name, n) in want {
                match self.licenses.iter().find(|(x, _)| *x == name) {
                    Some((_, total)) if n <= *total => {}
                    Some((_, total)) => {
                        return err_detail(
                            SlurmError::InvalidLicenses,
                            format!("{name}:{n} is more than the cluster's {total}"),
                        )
                    }
                    None => {
                        return err_detail(
                            SlurmError::InvalidLicenses,
                            format!("no license '{name}' (Licenses= in slurm.conf)"),
                        )
                    }
                }
            }
        }
        // Generic resources every node of the job needs.
        if let Err(e) = self.job_gres(&job.desc, job.min_nodes, job.num_tasks) {
            return err_detail(SlurmError::InvalidGres, e);
        }
        if let Some(c) = &job.desc.constraint {
            let c = match slurm_common::constraint::Constraint::parse(c) {
                Ok(c) => c,
                Err(e) => return err_detail(SlurmError::InvalidFeature, e),
            };
            if let Some(f) = c
                .features()
                .into_iter()
                .find(|f| !self.nodes.iter().any(|n| n.features.iter().any(|x| x == f)))
            {
                return err_detail(
                    SlurmError::InvalidFeature,
                    format!("no node has feature '{f}'"),
                );
            }
            if let Some((f, n)) = c.counts().into_iter().find(|(_, n)| *n > job.max_nodes) {
                return err_detail(
                    SlurmError::InvalidFeature,
                    format!(
                        "{f}*{n} asks for more nodes than the job's {}",
                        job.max_nodes
                    ),
                );
            }
        }
        // Could it ever run on this partition (once other jobs'
        // reservations are over)?
        let view = self.cluster_view();
        let jv = self
            .job_view_with(&job, false)
            .ok_or(RpcError::from(SlurmError::InvalidPartitionName))?;
        if slurm_plugins::select::place(&view, &jv, true).is_err() {
            return err(SlurmError::RequestedNodeConfigUnavailable);
        }
        Ok((job, payload))
    }

    /// AllowGroups / AllowAccounts / AllowQos (and the Deny lists): who may
    /// use a partition. Root and SlurmUser may use any.
    /// Slurm's submission size limits (SchedulerParameters
    /// `max_script_size`, `max_submit_line_size`; `max_env_size` is ours),
    /// checked before the job is built.
    fn check_sizes(&self, desc: &JobDesc) -> Result<(), RpcError> {
        let limits = &self.limits;
        let total = |v: &[String]| v.iter().map(|x| x.len() + 1).sum::<usize>();
        let checks = [
            (
                "batch script is too large",
                desc.script.len(),
                limits.max_script_size,
                "max_script_size",
            ),
            (
                "job environment is too large",
                total(&desc.environment),
                limits.max_env_size,
                "max_env_size",
            ),
            (
                "submit line is too long",
                total(&desc.argv),
                limits.max_submit_line_size,
                "max_submit_line_size",
            ),
        ];
        for (what, size, max, name) in checks {
            if size > max {
                return err_detail(
                    SlurmError::InvalidRequest,
                    format!("{what} ({size} bytes; {name} is {max})"),
                );
            }
        }
        Ok(())
    }

    /// A pending job moved to another partition, account or QOS must pass
    /// what a submission of it would: the partition's Allow/Deny lists (for
    /// the user asking, unless privileged) and, with
    /// AccountingStorageEnforce, its association and QOS.
    fn check_placement_update(&self, who: Caller, job: &JobRecord) -> Result<(), RpcError> {
        let part = self
            .partitions
            .iter()
            .find(|p| p.name == job.partition)
            .ok_or(RpcError::from(SlurmError::InvalidPartitionName))?;
        let mut desc = (*job.desc).clone();
        desc.account = Some(job.account.clone()).filter(|a| !a.is_empty());
        desc.qos = Some(job.qos.clone()).filter(|q| !q.is_empty());
        self.check_partition_access(who, part, &desc)?;
        if let (true, Some(cache)) = (self.enforce.any(), &self.assocs) {
            cache.admit(
                self.enforce,
                &job.user_name,
                desc.account.as_deref(),
                desc.qos.as_deref(),
                &job.partition,
                job.time_limit,
                job,
                self.p
                    .jobs
                    .values()
                    .filter(|o| o.job_id != job.job_id)
                    .map(|j| j.as_ref()),
            )?;
        }
        Ok(())
    }

    fn check_partition_access(
        &self,
        who: Caller,
        part: &PartitionRecord,
        desc: &JobDesc,
    ) -> Result<(), RpcError> {
        if who.privileged {
            return Ok(());
        }
        let list = |s: &Option<String>| -> Option<Vec<String>> {
            s.as_ref()
                .filter(|v| !v.eq_ignore_ascii_case("ALL"))
                .map(|v| v.split(',').map(|x| x.trim().to_string()).collect())
        };
        let deny = |e: SlurmError, d: String| {
            Err(RpcError {
                error: e,
                detail: Some(d),
            })
        };
        if let Some(groups) = list(&part.allow_groups) {
            let user = users::user_by_uid(who.uid);
            let mine: Vec<u32> = match &user {
                Some(u) => users::group_list(&u.name, who.gid),
                None => vec![who.gid],
            };
            let names: Vec<String> = mine.iter().map(|g| users::group_name_or_id(*g)).collect();
            if !groups.iter().any(|g| names.contains(g)) {
                return deny(
                    SlurmError::AccessDenied,
                    format!("user's group not permitted to use partition {}", part.name),
                );
            }
        }
        let account = desc.account.clone().unwrap_or_default();
        let qos = desc.qos.clone().unwrap_or_else(|| "normal".into());
        let conf = self.conf.partition(&part.name);
        // (value, allow list, deny list, error, what)
        let checks = [
            (
                &account,
                list(&part.allow_accounts),
                conf.and_then(|p| list(&p.deny_accounts)),
                SlurmError::InvalidAccount,
                "account",
            ),
            (
                &qos,
                list(&part.allow_qos),
                conf.and_then(|p| list(&p.deny_qos)),
                SlurmError::InvalidQos,
                "QOS",
            ),
        ];
        for (value, allow, denied, error, what) in checks {
            let refused = allow.is_some_and(|a| !a.contains(value))
                || denied.is_some_and(|d| d.contains(value));
            if refused {
                return deny(
                    error,
                    format!("{what} '{value}' may not use partition {}", part.name),
                );
            }
        }
        Ok(())
    }

    fn submit(&mut self, who: Caller, desc: JobDesc, now: i64) -> Result<Response, RpcError> {
        let id = self.p.next_job_id;
        let array = match &desc.array {
            Some(spec) => Some(
                jobspec::parse_array(spec, self.conf.max_array_size).map_err(|e| RpcError {
                    error: SlurmError::InvalidArray,
                    detail: Some(e.to_string()),
                })?,
            ),
            None => None,
        };
        let count = array.as_ref().map_or(1, |a| a.tasks.len() as u32);
        if self.p.jobs.len() as u64 + count as u64 > self.conf.max_job_count as u64 {
            return err(SlurmError::ReachedMaxJobCount);
        }
        let (job, payload) = self.build_job(who, desc, id, now)?;
        self.p.next_job_id = id.wrapping_add(count).max(1);
        self.entries.push(Entry::NextJobId(self.p.next_job_id));
        let payload = Arc::new(payload);
        match array {
            None => {
                self.entries.push(Entry::Payload(id, payload.clone()));
                self.p.payloads.insert(id, payload);
                self.p.jobs.insert(id, Arc::new(job));
                self.touched.insert(id);
                self.save_job(id);
            }
            Some(a) => {
                let step = match a.tasks.as_slice() {
                    [x, y, ..] => {
                        let st = y - x;
                        a.tasks.windows(2).all(|w| w[1] - w[0] == st).then_some(st)
                    }
                    _ => None,
                };
                for (k, &task) in a.tasks.iter().enumerate() {
                    let tid = id + k as u32;
                    let mut t = job.clone();
                    t.job_id = tid;
                    if t.held.is_none() {
                        t.priority = slurm_plugins::priority::basic(tid as u64);
                    }
                    t.array = Some(ArrayInfo {
                        job_id: id,
                        task_id: task,
                        task_count: a.tasks.len() as u32,
                        task_min: a.tasks[0],
                        task_max: *a.tasks.last().unwrap_or(&a.tasks[0]),
                        task_step: step,
                        max_running: a.max_running,
                    });
                    self.entries.push(Entry::Payload(tid, payload.clone()));
                    self.p.payloads.insert(tid, payload.clone());
                    self.p.jobs.insert(tid, Arc::new(t));
                    self.touched.insert(tid);
                    self.save_job(tid);
                }
            }
        }
        self.sched_needed = true;
        self.stats.jobs_submitted += count as u64;
        if let Some(m) = self.multifactor.as_mut() {
            // A new user gets an association at once; the fair share then
            // reflects the usage charged so far.
            if let Some(j) = self.p.jobs.get(&id) {
                let (u, a) = (j.user_name.clone(), Self::account_of(j));
                if m.tree.find_user(&u, &a).is_none() {
                    if let Err(e) = m.tree.ensure_user(&u, &a) {
                        tracing::warn!("fair share association for {u}: {e}");
                    }
                    // The shares of everyone changed: recompute all.
                    m.recompute();
                    self.recompute_priorities(now);
                }
            }
            for tid in id..id + count {
                if let Some(f) = self
                    .p
                    .jobs
                    .get(&tid)
                    .and_then(|j| self.multifactor_priority(j, now))
                {
                    if let Some(j) = self.job_mut(tid) {
                        j.priority = f.priority;
                    }
                    self.factors.insert(tid, f);
                }
            }
        }
        Ok(Response::Submitted { job_id: id })
    }

    /// Where a job's dependencies stand.
    /// The job `job_id` names in a dependency: the job, or every task of
    /// the array with that id. Array tasks have consecutive ids from the
    /// array's, so this reads only them (never the whole job table).
    fn dep_targets(&self, job_id: JobId) -> impl Iterator<Item = &Arc<JobRecord>> {
        self.p
            .jobs
            .range(job_id..)
            .map(|(_, o)| o)
            .take_while(move |o| {
                o.job_id == job_id || o.array.as_ref().is_some_and(|a| a.job_id == job_id)
            })
    }

    /// `singleton`: for each (user, name), the lowest id among jobs not yet
    /// gone; built once per pass, at the first job that asks.
    fn singleton_index(&self) -> HashMap<(u32, &str), JobId> {
        let mut first: HashMap<(u32, &str), JobId> = HashMap::new();
        for o in self.p.jobs.values() {
            if !o.state.is_finished() || o.completing {
                first
                    .entry((o.user_id, o.name.as_str()))
                    .or_insert(o.job_id);
            }
        }
        first
    }

    fn dependency_state<'a>(
        &'a self,
        j: &JobRecord,
        singles: &std::cell::OnceCell<HashMap<(u32, &'a str), JobId>>,
        now: i64,
    ) -> DepState {
        let Some(spec) = &j.dependency else {
            return DepState::Satisfied;
        };
        let Ok(dep) = jobspec::parse_dependency(spec) else {
            return DepState::Never;
        };
        let states: Vec<DepState> = dep
            .clauses
            .iter()
            .map(|c| self.clause_state(j, c, singles, now))
            .collect();
        if dep.any {
            if states.contains(&DepState::Satisfied) {
                DepState::Satisfied
            } else if states.iter().all(|s| *s == DepState::Never) {
                DepState::Never
            } else {
                DepState::Waiting
            }
        } else if states.contains(&DepState::Never) {
            DepState::Never
        } else if states.iter().all(|s| *s == DepState::Satisfied) {
            DepState::Satisfied
        } else {
            DepState::Waiting
        }
    }

    fn clause_state<'a>(
        &'a self,
        me: &JobRecord,
        c: &jobspec::DepClause,
        singles: &std::cell::OnceCell<HashMap<(u32, &'a str), JobId>>,
        now: i64,
    ) -> DepState {
        use jobspec::{DepClause, DepKind};
        let (kind, job_id, task) = match c {
            DepClause::Singleton => {
                let first = singles.get_or_init(|| self.singleton_index());
                let earlier_active = first
                    .get(&(me.user_id, me.name.as_str()))
                    .is_some_and(|id| *id < me.job_id);
                return if earlier_active {
                    DepState::Waiting
                } else {
                    DepState::Satisfied
                };
            }
            DepClause::Job { kind, job_id, task } => (kind, *job_id, *task),
        };
        // The jobs a clause names: one job, one array task, or a whole array.
        let targets: Vec<&Arc<JobRecord>> = self
            .dep_targets(job_id)
            .filter(|o| match (&o.array, task, kind) {
                (Some(a), _, DepKind::AfterCorr) => {
                    a.job_id == job_id && Some(a.task_id) == me.array.as_ref().map(|m| m.task_id)
                }
                (Some(a), Some(t), _) => a.job_id == job_id && a.task_id == t,
                (Some(a), None, _) => a.job_id == job_id,
                (None, None, _) => o.job_id == job_id,
                (None, Some(_), _) => false,
            })
            .collect();
        // Purged jobs count as done.
        let each = |o: &JobRecord| -> DepState {
            let ended = o.state.is_finished() && !o.completing;
            match kind {
                DepKind::After(mins) => match o.start_time {
                    _ if o.state == JobState::Cancelled => DepState::Satisfied,
                    Some(s) if o.state != JobState::Pending && now >= s + *mins as i64 * 60 => {
                        DepState::Satisfied
                    }
                    _ => DepState::Waiting,
                },
                DepKind::AfterAny => {
                    if ended {
                        DepState::Satisfied
                    } else {
                        DepState::Waiting
                    }
                }
                DepKind::AfterOk | DepKind::AfterCorr => match (ended, o.state) {
                    (true, JobState::Completed) => DepState::Satisfied,
                    (true, _) => DepState::Never,
                    _ => DepState::Waiting,
                },
                DepKind::AfterNotOk => match (ended, o.state) {
                    (true, JobState::Completed) => DepState::Never,
                    (true, _) => DepState::Satisfied,
                    _ => DepState::Waiting,
                },
            }
        };
        let st: Vec<DepState> = targets.iter().map(|o| each(o)).collect();
        if st.contains(&DepState::Never) {
            DepState::Never
        } else if st.iter().all(|s| *s == DepState::Satisfied) {
            DepState::Satisfied
        } else {
            DepState::Waiting
        }
    }

    fn test_job(&mut self, who: Caller, desc: JobDesc, now: i64) -> Result<Response, RpcError> {
        let id = self.p.next_job_id;
        let (job, _) = self.build_job(who, desc, id, now)?;
        let view = self.cluster_view();
        let jv = self
            .job_view(&job)
            .ok_or(RpcError::from(SlurmError::InvalidPartitionName))?;
        // The queue ahead of it, as the policy would see it.
        let queue: Vec<JobView> = self
            .p
            .jobs
            .values()
            .filter(|j| j.state == JobState::Pending && !j.completing && j.held.is_none())
            .filter_map(|j| self.job_view(j))
            .collect();
        // Far future when it cannot be predicted, as Slurm reports it.
        let (start, alloc) = self
            .scheduler
            .expected_start(&view, &queue, &jv, now)
            .unwrap_or((now + 365 * 86400 * 1000, Vec::new()));
        Ok(Response::TestResult {
            job_id: id,
            start_time: start,
            cpus: if alloc.is_empty() {
                job.req_cpus
            } else {
                alloc.iter().map(|a| a.cpus).sum()
            },
            nodes: alloc
                .iter()
                .map(|a| self.nodes[a.node].name.clone())
                .collect(),
            partition: job.partition,
        })
    }

    /// Whether a job holds its GRES and memory: running, suspended or
    /// still cleaning up.
    fn holds_devices(j: &JobRecord) -> bool {
        j.state.is_active() || j.completing
    }

    fn allocs_of(&self, j: &JobRecord) -> Vec<NodeAlloc> {
        j.alloc
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(k, n)| {
                Some(NodeAlloc {
                    node: *self.node_index.get(n)?,
                    cpus: j.alloc.cpus.get(k).copied().unwrap_or(0),
                    mem: j.alloc.mem.get(k).copied().unwrap_or(0),
                    tasks: j.alloc.tasks.get(k).copied().unwrap_or(0),
                    exclusive: j.desc.exclusive || j.desc.exclusive_topo,
                    gres: j
                        .alloc
                        .gres
                        .get(k)
                        .map(|g| self.gres_kinds.alloc_counts(g))
                        .unwrap_or_default(),
                })
            })
            .collect()
    }

    // ------------------------------------------------------------------
    // Scheduling

    /// One scheduling pass: ask the policy, commit its decisions.
    pub fn schedule(&mut self, now: i64) {
        self.sched_needed = false;
        let t0 = std::time::Instant::now();
        // Preempted (suspended) jobs get their cores back before anyone else;
        // jobs sharing cores fill what ended jobs left.
        self.resume_preempted(now);
        self.gang_fit(now, false);
        // Dependencies and array task limits keep jobs out of the queue.
        let mut running_tasks: HashMap<JobId, u32> = HashMap::new();
        for j in self.p.jobs.values() {
            if let Some(a) = &j.array {
                let active = j.state.is_active();
                if active || (j.completing && j.state != JobState::Pending) {
                    *running_tasks.entry(a.job_id).or_default() += 1;
                }
            }
        }
        let mut held_back: Vec<(JobId, JobReason)> = Vec::new();
        let mut satisfied: Vec<JobId> = Vec::new();
        let mut queue: Vec<JobView> = Vec::new();
        let singles = std::cell::OnceCell::new();
        for j in self.p.jobs.values() {
            if j.state != JobState::Pending || j.completing {
                continue;
            }
            if j.held.is_none() && j.dependency.is_some() {
                match self.dependency_state(j, &singles, now) {
                    DepState::Satisfied => satisfied.push(j.job_id),
                    DepState::Waiting => {
                        held_back.push((j.job_id, JobReason::Dependency));
                        continue;
                    }
                    DepState::Never => {
                        held_back.push((j.job_id, JobReason::DependencyNeverSatisfied));
                        continue;
                    }
                }
            }
            if let Some(rn) = &j.desc.reservation {
                if !self
                    .p
                    .reservations
                    .get(rn)
                    .is_some_and(|r| r.is_active(now))
                {
                    held_back.push((j.job_id, JobReason::Reservation));
                    continue;
                }
            }
            if let Some(a) = &j.array {
                if let Some(max) = a.max_running {
                    let n = running_tasks.entry(a.job_id).or_default();
                    if *n >= max && j.held.is_none() {
                        held_back.push((j.job_id, JobReason::JobArrayTaskLimit));
                        continue;
                    }
                    // Tasks are offered lowest id first; count those offered.
                    *n += 1;
                }
            }
            if let Some(v) = self.job_view(j) {
                queue.push(v);
            }
        }
        // Licenses, highest priority first: a job waits for what it needs.
        if !self.licenses.is_empty() && !queue.is_empty() {
            let mut free: HashMap<String, u32> = self.licenses.iter().cloned().collect();
            for (name, n) in self.licenses_used() {
                if let Some(f) = free.get_mut(&name) {
                    *f = f.saturating_sub(n);
                }
            }
            hold_by_priority(&mut queue, &self.p.jobs, &mut held_back, |j| {
                let want = slurm_common::licenses::parse(j.desc.licenses.as_deref()?).ok()?;
                let fits = want
                    .iter()
                    .all(|(name, n)| free.get(name).is_some_and(|f| f >= n));
                if fits {
                    for (name, n) in want {
                        if let Some(f) = free.get_mut(&name) {
                            *f -= n;
                        }
                    }
                    None
                } else {
                    j.held
                        .is_none()
                        .then(|| JobReason::Other("Licenses".into()))
                }
            });
        }
        // Association and QOS limits, highest priority first.
        if let (true, Some(cache)) = (self.enforce.limits, &self.assocs) {
            let mut usage =
                crate::assoc::Usage::of(cache, self.p.jobs.values().map(|j| j.as_ref()));
            hold_by_priority(&mut queue, &self.p.jobs, &mut held_back, |j| {
                if j.held.is_some() {
                    return None;
                }
                usage.hold(cache, j).map(JobReason::Other)
            });
        }
        for (id, r) in held_back {
            if self.p.jobs.get(&id).is_some_and(|j| j.reason != r) {
                if let Some(j) = self.job_mut(id) {
                    j.reason = r;
                    j.last_sched_eval = Some(now);
                }
                self.dirty = true;
            }
        }
        for id in satisfied {
            if let Some(j) = self.job_mut(id) {
                j.dependency = None;
            }
            self.save_job(id);
        }
        if queue.is_empty() {
            return;
        }
        let queue_len = queue.len() as u64;
        let view = self.cluster_view();
        let users: Vec<u32> = queue
            .iter()
            .map(|v| self.p.jobs.get(&v.id).map_or(0, |j| j.user_id))
            .collect();
        let plan = self.scheduler.plan_with_users(&view, &queue, &users, now);
        let mut blocked_seen = false;
        let mut backfilled = 0u64;
        let mut on_resources: Vec<JobId> = Vec::new();
        // Built once a pending job may be waiting on reserved nodes.
        let mut reserved_view: Option<ClusterView> = None;
        for d in plan.decisions {
            match d {
                Decision::Start { job, alloc } => {
                    if blocked_seen {
                        backfilled += 1;
                    }
                    self.preempting.remove(&job);
                    self.start_job(job, &alloc, now)
                }
                Decision::Pending { job, reason } => {
                    if matches!(reason, PendingReason::Resources | PendingReason::Priority) {
                        blocked_seen = true;
                        on_resources.push(job);
                    }
                    let reserved = match reason {
                        PendingReason::Resources | PendingReason::BadConstraints
                            if !self.p.reservations.is_empty() =>
                        {
                            let view = reserved_view.get_or_insert_with(|| self.cluster_view());
                            self.reserved_reason(job, view)
                        }
                        _ => None,
                    };
                    let r = match (reserved, reason) {
                        (Some(r), _) => r,
                        (None, PendingReason::Priority) => JobReason::Priority,
                        (None, PendingReason::Resources) => JobReason::Resources,
                        (None, PendingReason::BeginTime) => JobReason::BeginTime,
                        (None, PendingReason::JobHeldUser) => JobReason::JobHeldUser,
                        (None, PendingReason::JobHeldAdmin) => JobReason::JobHeldAdmin,
                        (None, PendingReason::PartitionDown) => JobReason::PartitionDown,
                        (None, PendingReason::PartitionTimeLimit) => JobReason::PartitionTimeLimit,
                        (None, PendingReason::PartitionNodeLimit) => JobReason::PartitionNodeLimit,
                        (None, PendingReason::BadConstraints) => JobReason::BadConstraints,
                    };
                    // A requeue-held job keeps saying why it was held.
                    let changed = self.p.jobs.get(&job).is_some_and(|j| {
                        j.reason != r
                            && !(r == JobReason::JobHeldAdmin
                                && j.reason
                                    == JobReason::Other("launch failed requeued held".into()))
                    });
                    if changed {
                        if let Some(j) = self.job_mut(job) {
                            j.reason = r;
                            j.last_sched_eval = Some(now);
                        }
                        self.dirty = true;
                    }
                }
            }
        }
        // Blocked jobs may share cores (OverSubscribe), else displace lower
        // ones (PreemptType).
        let shared = self.share_pass(&on_resources, now);
        on_resources.retain(|id| !shared.contains(id));
        self.preempt_for(&on_resources, now);
        // Planned starts of pending jobs (what `squeue --start` shows).
        for v in &queue {
            let planned = plan.starts.get(&v.id).map(|p| p.start);
            let update = self
                .p
                .jobs
                .get(&v.id)
                .is_some_and(|j| j.state == JobState::Pending && j.start_time != planned);
            if update {
                if let Some(j) = self.job_mut(v.id) {
                    j.start_time = planned;
                }
                self.dirty = true;
            }
        }
        let us = t0.elapsed().as_micros() as u64;
        if self.scheduler.name() == "sched/backfill" {
            let st = &mut self.stats;
            st.bf_cycles += 1;
            st.bf_last_us = us;
            st.bf_max_us = st.bf_max_us.max(us);
            st.bf_total_us += us;
            st.bf_last_depth = queue_len;
            st.bf_total_depth += queue_len;
            st.bf_backfilled_jobs += backfilled;
            st.bf_last_when = Some(now);
            st.bf_last_queue = queue_len;
        }
        self.stats.sched_cycles += 1;
        self.stats.last_cycle_us = us;
        self.stats.max_cycle_us = self.stats.max_cycle_us.max(us);
        self.stats.total_cycle_us += us;
        self.stats.total_depth += queue_len;
        self.stats.last_queue = queue_len;
        self.refresh();
    }

    fn start_job(&mut self, id: JobId, alloc: &[NodeAlloc], now: i64) {
        let names: Vec<String> = alloc
            .iter()
            .map(|a| self.nodes[a.node].name.clone())
            .collect();
        let Some(payload) = self.p.payloads.get(&id).cloned() else {
            return;
        };
        // Device indices for the generic resources, lowest free first.
        let gres: Vec<Vec<GresAlloc>> = alloc
            .iter()
            .map(|a| {
                if a.gres.iter().all(|g| *g == 0) {
                    return Vec::new();
                }
                let node = &self.nodes[a.node];
                let busy: Vec<&GresAlloc> = self
                    .p
                    .jobs
                    .values()
                    .filter(|o| o.job_id != id && Self::holds_devices(o))
                    .filter_map(|o| {
                        let k = o.alloc.nodes.iter().position(|n| *n == node.name)?;
                        o.alloc.gres.get(k)
                    })
                    .flatten()
                    .collect();
                self.gres_kinds.assign(&node.gres, &a.gres, &busy)
            })
            .collect();
        let conf = self.conf.clone();
        let Some(j) = self.job_mut(id) else {
            return;
        };
        j.state = JobState::Running;
        j.reason = JobReason::None;
        j.start_time = Some(now);
        j.end_time = j.time_limit.map(|m| now + m as i64 * 60);
        j.last_sched_eval = Some(now);
        j.alloc = Allocation {
            nodes: names.clone(),
            cpus: alloc.iter().map(|a| a.cpus).collect(),
            mem: alloc.iter().map(|a| a.mem).collect(),
            tasks: alloc.iter().map(|a| a.tasks).collect(),
            gres,
        };
        let batch = j.batch;
        j.batch_host = if batch { names.first().cloned() } else { None };
        if batch {
            // The script itself runs as step `batch` on the first node.
            j.steps.push(StepRecord {
                step_id: BATCH_STEP,
                name: "batch".into(),
                state: JobState::Running,
                nodes: names.iter().take(1).cloned().collect(),
                ntasks: 1,
                tasks_per_node: vec![1],
                cpus_per_task: alloc.first().map_or(1, |a| a.cpus),
                start_time: now,
                end_time: None,
                exit_status: 0,
                usage: None,
                usage_node: None,
            });
        }
        let mut environment = payload.environment.clone();
        let (mut std_out, mut std_err) = (j.desc.std_out.clone(), j.desc.std_err.clone());
        // Copies inherited from a job the submission was made in go first.
        environment.retain(|kv| {
            !kv.split_once('=')
                .is_some_and(|(k, _)| JOB_ENV_VARS.contains(&k))
        });
        environment.extend(job_env(j));
        if let Some(a) = &j.array {
            // Default output names an array task by %A_%a, as Slurm does.
            let out = std_out.take().unwrap_or_else(|| "slurm-%A_%a.out".into());
            std_out = Some(expand_array_patterns(&out, a));
            std_err = std_err.map(|e| expand_array_patterns(&e, a));
        }
        let launch = BatchLaunch {
            job_id: id,
            job_name: j.name.clone(),
            uid: j.user_id,
            gid: j.group_id,
            user_name: j.user_name.clone(),
            account: j.account.clone(),
            qos: j.qos.clone(),
            partition: j.partition.clone(),
            cluster_name: conf.cluster_name.clone(),
            alloc: j.alloc.clone(),
            num_tasks: j.num_tasks,
            cpus_per_task: j.desc.cpus_per_task.unwrap_or(1),
            ntasks_per_node: j.desc.ntasks_per_node,
            mem_per_node: j.desc.mem_per_node,
            mem_per_cpu: j.desc.mem_per_cpu,
            time_limit: j.time_limit,
            work_dir: j.desc.work_dir.clone(),
            std_out,
            std_err,
            std_in: j.desc.std_in.clone(),
            script: payload.script.clone(),
            argv: j.desc.argv.clone(),
            environment,
            submit_host: j.desc.submit_host.clone(),
            ctld_host: conf.ctld_address(),
            ctld_port: conf.slurmctld_port,
            start_time: now,
            // --open-mode, else slurm.conf's JobFileAppend.
            append_output: match j.desc.open_mode.as_deref() {
                Some(m) => m == "append",
                None => conf.get("JobFileAppend").is_some_and(|v| v.trim() == "1"),
            },
        };
        self.save_job(id);
        self.stats.jobs_started += 1;
        for a in alloc {
            self.nodes[a.node].last_busy = Some(now);
        }
        if let Some(host) = names.first().filter(|_| batch) {
            if let Some(addr) = self.node_addr(host) {
                self.effects.push(Effect::Launch {
                    node: host.clone(),
                    addr,
                    launch: Box::new(launch),
                });
            }
        }
        // PrologFlags=Alloc (or Contain): every other node of the job runs
        // its Prolog now rather than at the job's first step there.
        let at_alloc = conf.get("PrologFlags").is_some_and(|f| {
            f.split(',')
                .any(|w| w.eq_ignore_ascii_case("alloc") || w.eq_ignore_ascii_case("contain"))
        });
        // A pod's placeholder job on nodes whose daemon runs beside a
        // kubelet: each of those daemons gives the job cores and applies
        // them to its pod's cgroup.
        if let Some(j) = self.p.jobs.get(&id).filter(|j| j.desc.external) {
            let uids = pod_uids(j.desc.admin_comment.as_deref());
            // (Another external job holds its cores there and nothing more.)
            let uids = if uids.len() == names.len() {
                uids
            } else {
                Vec::new()
            };
            let facts = prologue_facts(j, uids);
            let mut placed = Vec::new();
            for node in &names {
                let kubelet = self
                    .node_index
                    .get(node)
                    .is_some_and(|&i| self.nodes[i].kubelet);
                if let (true, false, Some(addr)) =
                    (kubelet, facts.pod_uids.is_empty(), self.node_addr(node))
                {
                    self.effects.push(Effect::Prologue {
                        node: node.clone(),
                        addr,
                        facts: Box::new(facts.clone()),
                    });
                    placed.push(node.clone());
                }
            }
            // The pods' usage on those nodes is recorded as the job's
            // extern step, as Slurm records what runs outside steps.
            if !placed.is_empty() {
                if let Some(j) = self.job_mut(id) {
                    let n = placed.len() as u32;
                    j.steps.push(slurm_proto::StepRecord {
                        step_id: slurm_proto::EXTERN_STEP,
                        name: "extern".into(),
                        state: JobState::Running,
                        ntasks: n,
                        tasks_per_node: vec![1; placed.len()],
                        cpus_per_task: j.desc.cpus_per_task.unwrap_or(1),
                        nodes: placed,
                        start_time: now,
                        end_time: None,
                        exit_status: 0,
                        usage: None,
                        usage_node: None,
                    });
                }
                self.save_job(id);
            }
        }
        if at_alloc && !self.p.jobs.get(&id).is_some_and(|j| j.desc.external) {
            if let Some(j) = self.p.jobs.get(&id) {
                let facts = prologue_facts(j, Vec::new());
                let first = if batch { 1 } else { 0 };
                for node in names.iter().skip(first) {
                    if let Some(addr) = self.node_addr(node) {
                        self.effects.push(Effect::Prologue {
                            node: node.clone(),
                            addr,
                            facts: Box::new(facts.clone()),
                        });
                    }
                }
            }
        }
        // Refresh now so the next decision of this pass sees the allocation.
        self.refresh();
    }

    // ------------------------------------------------------------------
    // Interactive allocations and steps

    fn allocate(&mut self, who: Caller, desc: JobDesc, now: i64) -> Result<Response, RpcError> {
        if desc.array.is_some() {
            return err_detail(SlurmError::InvalidArray, "job arrays need a batch script");
        }
        let id = self.p.next_job_id;
        let (job, payload) = self.build_job_kind(who, desc, id, now, false)?;
        self.p.next_job_id = id.wrapping_add(1).max(1);
        self.entries.push(Entry::NextJobId(self.p.next_job_id));
        let payload = Arc::new(payload);
        self.entries.push(Entry::Payload(id, payload.clone()));
        self.p.payloads.insert(id, payload);
        self.p.jobs.insert(id, Arc::new(job));
        self.touched.insert(id);
        self.save_job(id);
        self.sched_needed = true;
        self.stats.jobs_submitted += 1;
        Ok(Response::Submitted { job_id: id })
    }

    fn complete_job(
        &mut self,
        who: Caller,
        id: JobId,
        status: i32,
        now: i64,
    ) -> Result<Response, RpcError> {
        let Some(j) = self.p.jobs.get(&id) else {
            return err(SlurmError::InvalidJobId);
        };
        if !who.privileged && j.user_id != who.uid {
            return err(SlurmError::AccessDenied);
        }
        match j.state {
            JobState::Running | JobState::Suspended => {
                let (code, sig) = wait_status_pair(status);
                let (state, reason) = if sig != 0 {
                    (JobState::Failed, JobReason::RaisedSignal)
                } else if code != 0 {
                    (JobState::Failed, JobReason::NonZeroExitCode)
                } else {
                    (JobState::Completed, JobReason::None)
                };
                if let Some(j) = self.job_mut(id) {
                    j.exit_status = status;
                }
                self.end_running(id, state, reason, now, self.conf.kill_wait);
                Ok(Response::Ok)
            }
            // Released before it ever started: nothing ran.
            JobState::Pending => {
                self.cancel_one(who, id, None, now)
                    .map_err(RpcError::from)?;
                Ok(Response::Ok)
            }
            _ => err(SlurmError::AlreadyDone),
        }
    }

    fn create_step(&mut self, who: Caller, r: StepRequest, now: i64) -> Result<Response, RpcError> {
        let Some(j) = self.p.jobs.get(&r.job_id) else {
            return err(SlurmError::InvalidJobId);
        };
        if !who.privileged && j.user_id != who.uid {
            return err(SlurmError::AccessDenied);
        }
        if j.state == JobState::Suspended {
            return err_detail(
                SlurmError::Disabled,
                format!(
                    "job {} is suspended: no new steps until it resumes",
                    j.job_id
                ),
            );
        }
        if j.state != JobState::Running {
            return err(if j.state == JobState::Pending {
                SlurmError::JobPending
            } else {
                SlurmError::AlreadyDone
            });
        }
        let Some(key) = self.key.clone() else {
            return err(SlurmError::InternalError);
        };
        // Nodes: those named (in the job), else the first N, else all.
        let mut nodes: Vec<usize> = (0..j.alloc.nodes.len()).collect();
        if !r.nodelist.is_empty() {
            let mut picked = Vec::new();
            for n in &r.nodelist {
                match j.alloc.nodes.iter().position(|x| x == n) {
                    Some(k) => picked.push(k),
                    None => {
                        return err_detail(
                            SlurmError::RequestedNodeConfigUnavailable,
                            format!("node {n} is not in job {}", j.job_id),
                        )
                    }
                }
            }
            picked.sort_unstable();
            picked.dedup();
            nodes = picked;
        }
        nodes.retain(|&k| !r.exclude.contains(&j.alloc.nodes[k]));
        let cpt = r.cpus_per_task.unwrap_or(1).max(1);
        let want_nodes = match (r.min_nodes, r.ntasks) {
            (Some(n), _) => n as usize,
            (None, Some(t)) if r.nodelist.is_empty() => {
                // As few nodes as hold the tasks, in order.
                let mut cap = 0u32;
                let mut k = 0;
                while k < nodes.len() && cap < t {
                    cap += (j.alloc.cpus[nodes[k]] / cpt).max(1);
                    k += 1;
                }
                k.max(1)
            }
            _ => nodes.len(),
        };
        if want_nodes == 0 || want_nodes > nodes.len() {
            return err(SlurmError::TooManyRequestedNodes);
        }
        nodes.truncate(want_nodes);
        let ntasks = match (r.ntasks, r.ntasks_per_node) {
            (Some(t), _) => t,
            (None, Some(p)) => p * nodes.len() as u32,
            (None, None) if r.min_nodes.is_some() || !r.nodelist.is_empty() => nodes.len() as u32,
            (None, None) => j.num_tasks.max(nodes.len() as u32),
        };
        if (ntasks as usize) < nodes.len() {
            return err_detail(SlurmError::TooManyRequestedNodes, "fewer tasks than nodes");
        }
        let mut per_node = vec![0u32; nodes.len()];
        if let Some(p) = r.ntasks_per_node {
            per_node.iter_mut().for_each(|x| *x = p);
            if p * nodes.len() as u32 != ntasks {
                // -n wins; spread it as evenly as --ntasks-per-node allows.
                let mut left = ntasks;
                for x in per_node.iter_mut() {
                    *x = left.min(p);
                    left -= *x;
                }
                if left > 0 {
                    return err(SlurmError::TooManyRequestedCpus);
                }
            }
        } else {
            per_node.iter_mut().for_each(|x| *x = 1);
            let mut left = ntasks - nodes.len() as u32;
            for (k, &n) in nodes.iter().enumerate() {
                let cap = (j.alloc.cpus[n] / cpt).max(1);
                let add = left.min(cap.saturating_sub(1));
                per_node[k] += add;
                left -= add;
            }
            // More tasks than cpus: overcommit round-robin, as --overcommit.
            let mut k = 0;
            while left > 0 {
                per_node[k % nodes.len()] += 1;
                left -= 1;
                k += 1;
            }
        }
        let cyclic = r
            .distribution
            .as_deref()
            .is_some_and(|d| d.starts_with("cyclic"));
        let mut tasks: Vec<Vec<u32>> = vec![Vec::new(); nodes.len()];
        if cyclic {
            let mut t = 0;
            while t < ntasks {
                for (k, list) in tasks.iter_mut().enumerate() {
                    if (list.len() as u32) < per_node[k] && t < ntasks {
                        list.push(t);
                        t += 1;
                    }
                }
            }
        } else {
            let mut t = 0;
            for (k, list) in tasks.iter_mut().enumerate() {
                for _ in 0..per_node[k] {
                    list.push(t);
                    t += 1;
                }
            }
        }
        let names: Vec<String> = nodes.iter().map(|&k| j.alloc.nodes[k].clone()).collect();
        let step_id = j
            .steps
            .iter()
            .filter(|s| s.step_id != BATCH_STEP && s.step_id != slurm_proto::EXTERN_STEP)
            .count() as u32;
        let mut cred = StepCred {
            job_id: j.job_id,
            step_id,
            uid: j.user_id,
            gid: j.group_id,
            user_name: j.user_name.clone(),
            nodes: names.clone(),
            // `AuthInfo=cred_expire` (Slurm's 120 s by default): a step's
            // credential only has to reach its nodes.
            expires: now
                + self
                    .conf
                    .auth_info_value("cred_expire")
                    .and_then(|v| v.parse::<i64>().ok())
                    .filter(|v| *v > 0)
                    .unwrap_or(120),
            alloc: j.alloc.clone(),
            partition: j.partition.clone(),
            account: j.account.clone(),
            job_start: j.start_time,
            tasks: tasks.clone(),
            cpus_per_task: cpt,
            job_cpus: nodes.iter().map(|&k| j.alloc.cpus[k]).collect(),
            sig: String::new(),
        };
        key.sign_step(&mut cred);
        let layout = StepLayout {
            job_id: j.job_id,
            step_id,
            addrs: names
                .iter()
                .map(|n| self.node_addr(n).unwrap_or_default())
                .collect(),
            nodes: names.clone(),
            tasks,
            cpus_per_task: cpt,
            job_cpus: nodes.iter().map(|&k| j.alloc.cpus[k]).collect(),
            cred,
        };
        let rec = StepRecord {
            step_id,
            name: r.name.clone(),
            state: JobState::Running,
            nodes: names,
            ntasks,
            tasks_per_node: per_node,
            cpus_per_task: cpt,
            start_time: now,
            end_time: None,
            exit_status: 0,
            usage: None,
            usage_node: None,
        };
        let id = r.job_id;
        if let Some(j) = self.job_mut(id) {
            j.steps.push(rec);
        }
        self.save_job(id);
        Ok(Response::StepCreated(Box::new(layout)))
    }

    fn cancel_step(
        &mut self,
        who: Caller,
        id: JobId,
        step_id: u32,
        signal: Option<i32>,
    ) -> Result<Response, RpcError> {
        let Some(j) = self.p.jobs.get(&id) else {
            return err(SlurmError::InvalidJobId);
        };
        if !who.privileged && j.user_id != who.uid {
            return err(SlurmError::AccessDenied);
        }
        let Some(st) = j.steps.iter().find(|s| s.step_id == step_id) else {
            return err(SlurmError::InvalidJobId);
        };
        if st.state != JobState::Running {
            return err(SlurmError::AlreadyDone);
        }
        let signal = signal.unwrap_or(libc::SIGKILL);
        let nodes = st.nodes.clone();
        for n in nodes {
            if let Some(addr) = self.node_addr(&n) {
                self.effects.push(Effect::SignalStep {
                    node: n.clone(),
                    addr,
                    job_id: id,
                    step_id,
                    signal,
                });
            }
        }
        Ok(Response::Ok)
    }

    /// `--signal`: jobs within their warning time get it once per run, the
    /// batch shell (`B:`) or else every running step on each of its nodes.
    fn send_warnings(&mut self, now: i64) {
        let due: Vec<(JobId, i64, slurm_common::signal::Warning)> = self
            .p
            .jobs
            .values()
            .filter(|j| j.state == JobState::Running && !j.timed_out)
            .filter_map(|j| {
                let w = warning(j)?;
                let (start, end) = (j.start_time?, j.end_time?);
                (end - now <= i64::from(w.secs) && self.warned.get(&j.job_id) != Some(&start))
                    .then_some((j.job_id, start, w))
            })
            .collect();
        self.warned
            .retain(|id, _| self.p.jobs.get(id).is_some_and(|j| j.state.is_active()));
        for (id, start, w) in due {
            self.warned.insert(id, start);
            let Some(j) = self.p.jobs.get(&id) else {
                continue;
            };
            let mut targets: Vec<(String, Option<u32>)> = Vec::new();
            if w.batch_only {
                if let Some(h) = j.batch_host.clone() {
                    targets.push((h, None));
                }
            } else {
                for st in j.steps.iter().filter(|s| {
                    s.state == JobState::Running
                        && s.step_id != slurm_proto::BATCH_STEP
                        && s.step_id != slurm_proto::EXTERN_STEP
                }) {
                    targets.extend(st.nodes.iter().map(|n| (n.clone(), Some(st.step_id))));
                }
            }
            tracing::info!(
                job = id,
                signal = w.signal,
                "sending the job its --signal warning"
            );
            for (node, step) in targets {
                let Some(addr) = self.node_addr(&node) else {
                    continue;
                };
                self.effects.push(match step {
                    None => Effect::Signal {
                        node,
                        addr,
                        job_id: id,
                        signal: w.signal,
                    },
                    Some(step_id) => Effect::SignalStep {
                        node,
                        addr,
                        job_id: id,
                        step_id,
                        signal: w.signal,
                    },
                });
            }
        }
    }

    fn step_complete(
        &mut self,
        who: Caller,
        id: JobId,
        step_id: u32,
        status: i32,
        now: i64,
    ) -> Result<Response, RpcError> {
        let Some(j) = self.p.jobs.get(&id) else {
            return err(SlurmError::InvalidJobId);
        };
        if !who.privileged && j.user_id != who.uid {
            return err(SlurmError::AccessDenied);
        }
        let Some(j) = self.job_mut(id) else {
            return err(SlurmError::InvalidJobId);
        };
        let Some(st) = j.steps.iter_mut().find(|s| s.step_id == step_id) else {
            return err(SlurmError::InvalidJobId);
        };
        if st.state == JobState::Running {
            let (code, sig) = wait_status_pair(status);
            st.state = if code == 0 && sig == 0 {
                JobState::Completed
            } else if sig != 0 && sig != libc::SIGKILL && sig != libc::SIGTERM {
                JobState::Failed
            } else if sig != 0 {
                JobState::Cancelled
            } else {
                JobState::Failed
            };
            st.exit_status = status;
            st.end_time = Some(now);
        }
        self.save_job(id);
        Ok(Response::Ok)
    }

    // ------------------------------------------------------------------
    // Ending jobs

    /// Move a running job to a final state and start cleaning its nodes.
    fn end_running(
        &mut self,
        id: JobId,
        state: JobState,
        reason: JobReason,
        now: i64,
        kill_wait: u32,
    ) {
        self.count_end(state);
        self.close_suspension(id, now);
        let Some(j) = self.job_mut(id) else { return };
        j.state = state;
        for st in j
            .steps
            .iter_mut()
            .filter(|st| st.state == JobState::Running)
        {
            st.state = state;
            st.end_time = Some(now);
        }
        j.reason = reason;
        j.end_time = Some(now);
        j.completing = true;
        j.completing_nodes = j.alloc.nodes.clone();
        let nodes = j.alloc.nodes.clone();
        self.terminate_on(id, &nodes, kill_wait);
        self.save_job(id);
        self.sched_needed = true;
        self.refresh();
    }

    /// Put a job back in the queue (`scontrol requeue`, preemption): a
    /// running one is ended on its nodes first (after `kill_wait` seconds
    /// of grace), its steps closed.
    fn requeue_running(&mut self, id: JobId, kill_wait: u32, now: i64) {
        let Some(j) = self.job_mut(id) else { return };
        let running = j.state.is_active();
        let run = j.start_time;
        // As Slurm: a suspended job requeued is held.
        if j.state == JobState::Suspended && j.held.is_none() {
            j.held = Some(HoldKind::Admin);
        }
        j.clear_suspension();
        let nodes = j.alloc.nodes.clone();
        for st in j.steps.iter_mut().filter(|s| s.state == JobState::Running) {
            st.state = JobState::Cancelled;
            st.end_time = Some(now);
        }
        j.state = JobState::Pending;
        j.reason = JobReason::None;
        j.restarts += 1;
        j.start_time = None;
        j.end_time = None;
        j.exit_status = 0;
        j.cancelled = false;
        j.timed_out = false;
        j.node_failed = false;
        j.eligible_time = Some(now);
        if running {
            j.completing = true;
            j.completing_nodes = nodes.clone();
            self.terminate_run(id, &nodes, kill_wait, run);
        } else {
            j.alloc = Allocation::default();
            j.batch_host = None;
        }
        self.save_job(id);
        self.sched_needed = true;
        self.refresh();
    }

    /// Ask `nodes` to end the job; nodes that cannot answer are done at once.
    fn terminate_on(&mut self, id: JobId, nodes: &[String], kill_wait: u32) {
        let start_time = self.p.jobs.get(&id).and_then(|j| j.start_time);
        self.terminate_run(id, nodes, kill_wait, start_time);
    }

    /// [`Self::terminate_on`] for the run that started at `start_time`
    /// (a requeued job's record no longer has it; a terminate for "any
    /// run" could reach the node after the next run has started there).
    fn terminate_run(
        &mut self,
        id: JobId,
        nodes: &[String],
        kill_wait: u32,
        start_time: Option<i64>,
    ) {
        let mut gone = Vec::new();
        for n in nodes {
            if self.node_responding(n) {
                if let Some(addr) = self.node_addr(n) {
                    self.effects.push(Effect::Terminate {
                        node: n.clone(),
                        addr,
                        job_id: id,
                        kill_wait,
                        start_time,
                    });
                }
            } else {
                gone.push(n.clone());
            }
        }
        for n in gone {
            self.node_cleaned(id, &n);
        }
    }

    /// `node` has no process of job `id` left.
    fn node_cleaned(&mut self, id: JobId, node: &str) {
        // Only a node the job is completing on speaks for it.
        if !self.p.jobs.get(&id).is_some_and(|j| {
            j.completing
                && (j.completing_nodes.is_empty() || j.completing_nodes.iter().any(|n| n == node))
        }) {
            return;
        }
        let Some(j) = self.job_mut(id) else { return };
        j.completing_nodes.retain(|n| n != node);
        if j.completing_nodes.is_empty() {
            j.completing = false;
            if j.state == JobState::Pending {
                // Requeued: forget the old allocation.
                j.alloc = Allocation::default();
                j.batch_host = None;
            }
        }
        self.save_job(id);
        self.sched_needed = true;
        self.refresh();
    }

    /// Add one node's usage to a step: CPU times add up, MaxRSS is the
    /// largest of any node (and says which).
    fn step_usage(&mut self, id: JobId, step_id: u32, node: &str, u: TaskUsage) {
        // Only a node the job runs on reports its steps' usage.
        if !self
            .p
            .jobs
            .get(&id)
            .is_some_and(|j| j.alloc.nodes.iter().any(|n| n == node))
        {
            return;
        }
        let Some(st) = self
            .job_mut(id)
            .and_then(|j| j.steps.iter_mut().find(|s| s.step_id == step_id))
        else {
            return;
        };
        let mut total = st.usage.unwrap_or_default();
        total.cpu_usec += u.cpu_usec;
        total.user_usec += u.user_usec;
        total.system_usec += u.system_usec;
        if u.max_rss_bytes >= total.max_rss_bytes {
            total.max_rss_bytes = u.max_rss_bytes;
            st.usage_node = Some(node.to_string());
        }
        st.usage = Some(total);
        self.save_job(id);
    }

    fn batch_complete(
        &mut self,
        id: JobId,
        status: i32,
        oom: bool,
        usage: Option<(TaskUsage, String)>,
        node: &str,
        now: i64,
    ) {
        let Some(j) = self.p.jobs.get(&id) else {
            return;
        };
        // Only the node the script runs on reports its end: a report from
        // a node it no longer runs on (cut off while the job was requeued
        // and started elsewhere) is about an old run, and a job with no
        // script running (an allocation, a requeued job) has none to end.
        if j.batch_host.as_deref() != Some(node) {
            tracing::info!(
                "job {id}: batch completion from {node} ignored (its script runs on {})",
                j.batch_host.as_deref().unwrap_or("no node")
            );
            return;
        }
        if let Some((u, node)) = usage {
            if let Some(b) = self
                .job_mut(id)
                .and_then(|j| j.steps.iter_mut().find(|s| s.step_id == BATCH_STEP))
            {
                b.usage = Some(u);
                b.usage_node = Some(node);
            }
        }
        let Some(j) = self.p.jobs.get(&id) else {
            return;
        };
        if j.state.is_active() {
            let (code, sig) = wait_status_pair(status);
            let (state, reason) = if oom {
                (
                    JobState::OutOfMemory,
                    JobReason::Other("OutOfMemory".into()),
                )
            } else if sig != 0 {
                (JobState::Failed, JobReason::RaisedSignal)
            } else if code != 0 {
                (JobState::Failed, JobReason::NonZeroExitCode)
            } else {
                (JobState::Completed, JobReason::None)
            };
            self.count_end(state);
            let Some(j) = self.p.jobs.get(&id) else {
                return;
            };
            let batch = j.batch_host.clone();
            let others: Vec<String> = j
                .alloc
                .nodes
                .iter()
                .filter(|n| Some(*n) != batch.as_ref())
                .cloned()
                .collect();
            self.close_suspension(id, now);
            let Some(j) = self.job_mut(id) else { return };
            j.exit_status = status;
            j.state = state;
            if let Some(b) = j.steps.iter_mut().find(|s| s.step_id == BATCH_STEP) {
                b.state = state;
                b.exit_status = status;
                b.end_time = Some(now);
            }
            // Steps still running when the script ends end with the job (a
            // step's own completion may still be on its way from srun).
            for st in j.steps.iter_mut().filter(|s| s.state == JobState::Running) {
                st.state = state;
                st.end_time = Some(now);
            }
            j.reason = reason;
            j.end_time = Some(now);
            j.completing = true;
            j.completing_nodes = j.alloc.nodes.clone();
            // The batch host cleans up by itself and says so.
            self.terminate_on(id, &others, 0);
            self.save_job(id);
            self.sched_needed = true;
            self.refresh();
        } else if j.exit_status == 0 && j.state != JobState::Pending {
            // Cancelled, timed out or failed before the script's status came:
            // the status belongs to the batch step (and `scontrol show job`).
            if let Some(j) = self.job_mut(id) {
                j.exit_status = status;
                if let Some(b) = j.steps.iter_mut().find(|s| s.step_id == BATCH_STEP) {
                    b.exit_status = status;
                }
            }
            self.save_job(id);
        }
    }

    fn cancel_one(
        &mut self,
        who: Caller,
        id: JobId,
        signal: Option<i32>,
        now: i64,
    ) -> Result<(), SlurmError> {
        let Some(j) = self.p.jobs.get(&id) else {
            return Err(SlurmError::InvalidJobId);
        };
        if !who.privileged && j.user_id != who.uid {
            return Err(SlurmError::AccessDenied);
        }
        if j.state.is_finished() {
            return Err(SlurmError::AlreadyDone);
        }
        match (j.state, signal) {
            (JobState::Pending, None) | (JobState::Pending, Some(libc::SIGKILL)) => {
                let Some(j) = self.job_mut(id) else {
                    return Err(SlurmError::InvalidJobId);
                };
                j.state = JobState::Cancelled;
                j.cancelled = true;
                j.cancelled_by = Some(who.uid);
                self.stats.jobs_canceled += 1;
                let Some(j) = self.job_mut(id) else {
                    return Err(SlurmError::InvalidJobId);
                };
                j.reason = JobReason::None;
                j.end_time = Some(now);
                j.start_time = Some(now);
                self.save_job(id);
                self.sched_needed = true;
                Ok(())
            }
            (JobState::Pending, Some(_)) => Err(SlurmError::JobPending),
            (_, None) => {
                if let Some(j) = self.job_mut(id) {
                    j.cancelled = true;
                    j.cancelled_by = Some(who.uid);
                }
                let kw = self.conf.kill_wait;
                self.end_running(id, JobState::Cancelled, JobReason::None, now, kw);
                Ok(())
            }
            (_, Some(sig)) => {
                let host = j.batch_host.clone().unwrap_or_default();
                if let Some(addr) = self.node_addr(&host) {
                    self.effects.push(Effect::Signal {
                        node: host.clone(),
                        addr,
                        job_id: id,
                        signal: sig,
                    });
                }
                Ok(())
            }
        }
    }

    fn cancel(&mut self, who: Caller, f: CancelFilter, now: i64) -> Response {
        // PrivateData=jobs: other users' jobs do not exist for the caller
        // (no filter or id may tell them apart).
        let private = !who.privileged && self.conf.private_data().jobs;
        let ids: Vec<JobId> = if f.job_ids.is_empty() {
            let user = match private {
                true => Some(who.uid).filter(|me| f.user.is_none_or(|u| u == *me)),
                false => f.user.or((!who.privileged).then_some(who.uid)),
            };
            if private && user.is_none() {
                return Response::Cancelled(Vec::new());
            }
            self.p
                .jobs
                .values()
                .filter(|j| !j.state.is_finished())
                .filter(|j| user.is_none_or(|u| j.user_id == u))
                .filter(|j| f.states.is_empty() || f.states.contains(&j.state))
                .filter(|j| f.name.as_ref().is_none_or(|n| &j.name == n))
                .filter(|j| f.partition.as_ref().is_none_or(|p| &j.partition == p))
                .map(|j| j.job_id)
                .collect()
        } else {
            let mut ids = Vec::new();
            for id in &f.job_ids {
                let tasks: Vec<JobId> = self
                    .p
                    .jobs
                    .values()
                    .filter(|j| j.array.as_ref().is_some_and(|a| a.job_id == *id))
                    .map(|j| j.job_id)
                    .collect();
                if tasks.is_empty() {
                    ids.push(*id);
                } else {
                    ids.extend(tasks);
                }
            }
            ids
        };
        let out = ids
            .into_iter()
            .map(|id| {
                let hidden = private && self.p.jobs.get(&id).is_some_and(|j| j.user_id != who.uid);
                if hidden {
                    return (id, Some(SlurmError::InvalidJobId));
                }
                // Filters given with ids narrow them, as in Slurm.
                let skip = self.p.jobs.get(&id).is_some_and(|j| {
                    f.user.is_some_and(|u| j.user_id != u)
                        || (!f.states.is_empty() && !f.states.contains(&j.state))
                        || f.name.as_ref().is_some_and(|n| &j.name != n)
                        || f.partition.as_ref().is_some_and(|p| &j.partition != p)
                });
                if skip {
                    return (id, None);
                }
                (id, self.cancel_one(who, id, f.signal, now).err())
            })
            .collect();
        Response::Cancelled(out)
    }

    fn update_job(
        &mut self,
        who: Caller,
        id: JobId,
        u: JobUpdate,
        now: i64,
    ) -> Result<Response, RpcError> {
        let Some(j) = self.p.jobs.get(&id) else {
            return err(SlurmError::InvalidJobId);
        };
        if !who.privileged && j.user_id != who.uid {
            return err(SlurmError::AccessDenied);
        }
        let state = j.state;
        match u {
            JobUpdate::Hold => {
                if state != JobState::Pending {
                    return err(SlurmError::JobNotPending);
                }
                let kind = if who.privileged {
                    HoldKind::Admin
                } else {
                    HoldKind::User
                };
                let j = self
                    .job_mut(id)
                    .ok_or(RpcError::from(SlurmError::InvalidJobId))?;
                j.held = Some(kind);
                j.priority = 0;
                j.reason = match kind {
                    HoldKind::User => JobReason::JobHeldUser,
                    HoldKind::Admin => JobReason::JobHeldAdmin,
                };
            }
            JobUpdate::Release => {
                if state != JobState::Pending {
                    return err(SlurmError::JobNotPending);
                }
                if j.held == Some(HoldKind::Admin) && !who.privileged {
                    return err(SlurmError::AccessDenied);
                }
                let j = self
                    .job_mut(id)
                    .ok_or(RpcError::from(SlurmError::InvalidJobId))?;
                j.held = None;
                j.priority = slurm_plugins::priority::basic(id as u64);
                j.reason = JobReason::None;
            }
            JobUpdate::Requeue => {
                if state == JobState::Pending {
                    return err(SlurmError::JobPending);
                }
                if j.completing {
                    return err(SlurmError::TransitionStateNoUpdate);
                }
                let kw = self.conf.kill_wait;
                self.requeue_running(id, kw, now);
            }
            JobUpdate::TimeLimit(t) => {
                let cur = j.time_limit;
                let increase = match (t, cur) {
                    (None, Some(_)) => true,
                    (Some(a), Some(b)) => a > b,
                    (Some(_), None) => false,
                    (None, None) => false,
                };
                if increase && !who.privileged {
                    return err(SlurmError::AccessDenied);
                }
                if state.is_finished() {
                    return err(SlurmError::AlreadyDone);
                }
                let j = self
                    .job_mut(id)
                    .ok_or(RpcError::from(SlurmError::InvalidJobId))?;
                j.time_limit = t;
                let active = state.is_active();
                if let Some(s) = j.start_time.filter(|_| active) {
                    // Suspended time does not count (the current suspension
                    // is added on resume).
                    j.end_time = t.map(|m| s + m as i64 * 60 + j.suspended_secs);
                }
            }
            JobUpdate::Nice(n) => {
                if n < 0 && !who.privileged {
                    return err(SlurmError::AccessDenied);
                }
                let j = self
                    .job_mut(id)
                    .ok_or(RpcError::from(SlurmError::InvalidJobId))?;
                Arc::make_mut(&mut j.desc).nice = Some(n);
            }
            JobUpdate::Name(n) => {
                let j = self
                    .job_mut(id)
                    .ok_or(RpcError::from(SlurmError::InvalidJobId))?;
                j.name = n;
            }
            JobUpdate::Comment(c) => {
                let j = self
                    .job_mut(id)
                    .ok_or(RpcError::from(SlurmError::InvalidJobId))?;
                Arc::make_mut(&mut j.desc).comment = Some(c);
            }
            JobUpdate::AdminComment(c) => {
                if !who.privileged {
                    return err(SlurmError::AccessDenied);
                }
                let j = self
                    .job_mut(id)
                    .ok_or(RpcError::from(SlurmError::InvalidJobId))?;
                Arc::make_mut(&mut j.desc).admin_comment = Some(c);
            }
            JobUpdate::Partition(p) | JobUpdate::Account(p) | JobUpdate::Qos(p)
                if state != JobState::Pending =>
            {
                let _ = p;
                return err(SlurmError::JobNotPending);
            }
            JobUpdate::Partition(_) | JobUpdate::Account(_) | JobUpdate::Qos(_) => {
                let cur = self
                    .p
                    .jobs
                    .get(&id)
                    .ok_or(RpcError::from(SlurmError::InvalidJobId))?;
                let mut next = (**cur).clone();
                match u {
                    JobUpdate::Partition(p) => {
                        next.partition = p.clone();
                        Arc::make_mut(&mut next.desc).partition = Some(p);
                    }
                    JobUpdate::Account(a) => {
                        next.account = a.clone();
                        Arc::make_mut(&mut next.desc).account = Some(a);
                    }
                    JobUpdate::Qos(q) => {
                        next.qos = q.clone();
                        Arc::make_mut(&mut next.desc).qos = Some(q);
                    }
                    _ => unreachable!("matched above"),
                }
                self.check_placement_update(who, &next)?;
                let j = self
                    .job_mut(id)
                    .ok_or(RpcError::from(SlurmError::InvalidJobId))?;
                j.partition = next.partition;
                j.account = next.account;
                j.qos = next.qos;
                j.desc = next.desc;
            }
        }
        self.save_job(id);
        self.sched_needed = true;
        self.refresh();
        Ok(Response::Ok)
    }

    // ------------------------------------------------------------------
    // Nodes

    /// A node's jobs die with it: NODE_FAIL, other nodes are told to clean.
    fn fail_node_jobs(&mut self, node: &str, now: i64) {
        let ids: Vec<JobId> = self
            .p
            .jobs
            .values()
            .filter(|j| j.alloc.nodes.iter().any(|n| n == node))
            .filter(|j| Self::holds_devices(j))
            .map(|j| j.job_id)
            .collect();
        for id in ids {
            let running = self.p.jobs.get(&id).is_some_and(|j| j.state.is_active());
            if running {
                self.lose_job(id, now);
            }
            self.node_cleaned(id, node);
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
        self.gang_slice += d;
        self.suspend_resent += d;
        self.dirty = true;
        self.refresh();
    }

    /// A running job lost with a node: a batch job that may be requeued
    /// (`--requeue`, or `JobRequeue=1`, the default, unless
    /// `--no-requeue`) goes back to the queue, as Slurm's do; any other
    /// ends NODE_FAIL.
    fn lose_job(&mut self, id: JobId, now: i64) {
        let job_requeue = self.conf.get("JobRequeue").map(str::trim) != Some("0");
        let requeue = self
            .p
            .jobs
            .get(&id)
            .is_some_and(|j| j.batch && j.desc.requeue.unwrap_or(job_requeue));
        if requeue {
            tracing::info!("job {id} lost with its node: requeued");
            self.requeue_running(id, 0, now);
            return;
        }
        if let Some(j) = self.job_mut(id) {
            j.node_failed = true;
        }
        self.end_running(id, JobState::NodeFail, JobReason::NodeDown, now, 0);
    }

    fn set_admin(&mut self, name: &str, f: impl FnOnce(&mut NodeAdmin)) {
        let a = self.p.nodes.entry(name.to_string()).or_default();
        f(a);
        self.save_node(name);
        self.sched_needed = true;
        self.refresh();
    }

    fn register(&mut self, r: NodeRegistration, now: i64) -> Result<Response, RpcError> {
        let Some(&i) = self.node_index.get(&r.name) else {
            return err_detail(SlurmError::InvalidNodeName, r.name);
        };
        let restarted = self.nodes[i]
            .slurmd_start_time
            .is_some_and(|t| t != r.slurmd_start_time);
        {
            let n = &mut self.nodes[i];
            n.boot_time = Some(r.boot_time);
            n.slurmd_start_time = Some(r.slurmd_start_time);
            n.version = Some(r.version.clone());
            n.os = Some(r.os.clone());
            n.arch = Some(r.arch.clone());
            n.cpu_load = Some(r.cpu_load);
            n.free_mem = Some(r.free_mem);
            n.kubelet = r.kubelet && !n.external;
            n.last_heard = Some(now);
            n.flags.not_responding = false;
        }
        self.registered[i] = true;
        // Less hardware than its line says: drained, as Slurm does (unless
        // SlurmdParameters=config_overrides).
        if !self.conf.config_overrides() && !self.nodes[i].external {
            use slurm_common::conf::{low_hardware, HwCounts};
            let n = &self.nodes[i];
            let found = HwCounts::new(
                r.cpus,
                r.sockets,
                r.cores_per_socket,
                r.real_memory,
                r.tmp_disk,
            );
            let conf = HwCounts::new(
                n.cpus,
                n.sockets,
                n.cores_per_socket,
                n.real_memory,
                n.tmp_disk,
            );
            if let Some(why) = low_hardware(&found, &conf) {
                let same = self
                    .p
                    .nodes
                    .get(&r.name)
                    .is_some_and(|a| a.drain && a.reason.as_deref() == Some(why.as_str()));
                if !same {
                    tracing::warn!("node {} drained: {why}", r.name);
                    self.drain_for(&r.name, &why, now);
                }
            }
        }
        let admin = self.p.nodes.get(&r.name).cloned().unwrap_or_default();
        if admin.down {
            let by_timeout = admin.reason.as_deref() == Some(NOT_RESPONDING);
            let back = match self.conf.return_to_service {
                2 => true,
                1 => by_timeout,
                _ => false,
            };
            if back {
                self.set_admin(&r.name, |a| {
                    a.down = false;
                    if !a.drain {
                        a.reason = None;
                        a.reason_time = None;
                        a.reason_uid = None;
                    }
                });
            }
        }
        // Jobs we think run here but the daemon does not know: lost if the
        // daemon restarted after they started (a finished job's report may
        // still be on its way otherwise).
        let name = r.name.clone();
        // Jobs started before this controller's run were launched by
        // another: no launch of theirs is still on its way here.
        let recovered = self.recovered.remove(&name).unwrap_or_default();
        let lost: Vec<JobId> = self
            .p
            .jobs
            .values()
            .filter(|j| j.state.is_active() && j.batch_host.as_deref() == Some(name.as_str()))
            .filter(|j| !r.running_jobs.contains(&j.job_id))
            .filter(|j| {
                restarted
                    || j.start_time.is_some_and(|s| s < r.slurmd_start_time)
                    || recovered.contains(&j.job_id)
            })
            .map(|j| j.job_id)
            .collect();
        for id in lost {
            self.lose_job(id, now);
        }
        // Jobs the daemon runs that we consider over: make it stop them.
        for id in &r.running_jobs {
            let keep = self
                .p
                .jobs
                .get(id)
                .is_some_and(|j| Self::holds_devices(j) && j.alloc.nodes.contains(&name));
            if !keep {
                if let Some(addr) = self.node_addr(&name) {
                    self.effects.push(Effect::Terminate {
                        node: name.clone(),
                        addr,
                        job_id: *id,
                        kill_wait: 0,
                        start_time: None,
                    });
                }
            }
        }
        // Its jobs that were suspended (or resumed) stay so.
        self.suspends_for_node(&name);
        self.dirty = true;
        self.sched_needed = true;
        self.refresh();
        Ok(Response::Ok)
    }

    /// Heartbeats the RPC server answered itself (node, when).
    pub fn heard_from(&mut self, heard: HashMap<String, i64>, now: i64) {
        for (node, t) in heard {
            // A time from before a backward clock step is not in the future.
            let t = t.min(now);
            if let Some(&i) = self.node_index.get(&node) {
                let last = &mut self.nodes[i].last_heard;
                *last = Some(last.map_or(t, |l| l.max(t)));
            }
        }
    }

    fn heartbeat(&mut self, node: &str, now: i64) -> Result<Response, RpcError> {
        let Some(&i) = self.node_index.get(node) else {
            return err_detail(SlurmError::InvalidNodeName, node.to_string());
        };
        if !self.registered[i] || self.nodes[i].flags.not_responding {
            // Ask the daemon to register again (we restarted or marked it down).
            return err_detail(SlurmError::InvalidNodeState, "register");
        }
        self.nodes[i].last_heard = Some(now);
        Ok(Response::Ok)
    }

    fn update_node(
        &mut self,
        who: Caller,
        names: Vec<String>,
        state: Option<NodeStateRequest>,
        reason: Option<String>,
        features: Option<Vec<String>>,
        now: i64,
    ) -> Result<Response, RpcError> {
        if !who.privileged {
            return err(SlurmError::AccessDenied);
        }
        if let Some(f) = &features {
            if let Some(bad) = f.iter().find(|x| {
                x.is_empty()
                    || !x
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "_-.:=".contains(c))
            }) {
                return err_detail(
                    SlurmError::InvalidFeature,
                    format!("invalid feature '{bad}'"),
                );
            }
        }
        for n in &names {
            if !self.node_index.contains_key(n) {
                return err_detail(SlurmError::InvalidNodeName, n.clone());
            }
        }
        if matches!(
            state,
            Some(NodeStateRequest::Drain) | Some(NodeStateRequest::Down)
        ) && reason.as_deref().is_none_or(|r| r.trim().is_empty())
        {
            return err_detail(
                SlurmError::InvalidNodeState,
                "a reason is required to DOWN or DRAIN a node",
            );
        }
        for n in names {
            let uid = who.uid;
            let reason = reason.clone();
            if let Some(f) = &features {
                let f = f.clone();
                if let Some(&i) = self.node_index.get(&n) {
                    self.nodes[i].features = f.clone();
                }
                self.set_admin(&n, |a| a.features = Some(f));
            }
            match state {
                Some(NodeStateRequest::Drain) => self.set_admin(&n, |a| {
                    a.drain = true;
                    a.reason = reason;
                    a.reason_time = Some(now);
                    a.reason_uid = Some(uid);
                }),
                Some(NodeStateRequest::Down) => {
                    self.set_admin(&n, |a| {
                        a.down = true;
                        a.reason = reason;
                        a.reason_time = Some(now);
                        a.reason_uid = Some(uid);
                    });
                    self.fail_node_jobs(&n, now);
                }
                Some(NodeStateRequest::Resume) | Some(NodeStateRequest::Idle) => {
                    self.set_admin(&n, |a| {
                        *a = NodeAdmin {
                            features: a.features.take(),
                            ..NodeAdmin::default()
                        }
                    })
                }
                Some(NodeStateRequest::Undrain) => self.set_admin(&n, |a| {
                    a.drain = false;
                    if !a.down {
                        a.reason = None;
                        a.reason_time = None;
                        a.reason_uid = None;
                    }
                }),
                None => {
                    if let Some(r) = reason {
                        self.set_admin(&n, |a| {
                            a.reason = Some(r);
                            a.reason_time = Some(now);
                            a.reason_uid = Some(uid);
                        })
                    }
                }
            }
        }
        Ok(Response::Ok)
    }

    // ------------------------------------------------------------------
    // Time-driven work

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
                    !n.external && !n.flags.not_responding && n.base_state != NodeBaseState::Future
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
            if let Some(j) = self.job_mut(id) {
                j.timed_out = true;
            }
            let kw = self.conf.kill_wait;
            self.end_running(id, JobState::Timeout, JobReason::TimeLimit, now, kw);
        }
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
            RequestBody::AllocateJob(d) => self.allocate(who, d, now),
            RequestBody::CreateNode(n) => self.create_node(who, n),
            RequestBody::GetJobScript { job_id } => self.job_script(who, job_id),
            RequestBody::Reconfigure => self.reconfigure(who, now),
            RequestBody::DeleteNode { name } => self.delete_node(who, &name),
            RequestBody::CreateReservation(r) => self.create_reservation(who, r, now),
            RequestBody::UpdateReservation(r) => self.update_reservation(who, r, now),
            RequestBody::DeleteReservation { name } => self.delete_reservation(who, &name),
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
            } => self.step_complete(who, job_id, step_id, status, now),
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
            } if who.privileged => {
                let from = node.clone();
                self.batch_complete(job_id, status, oom, usage.map(|u| (u, node)), &from, now);
                Ok(Response::Ok)
            }
            RequestBody::JobCleaned { job_id, node } if who.privileged => {
                self.node_cleaned(job_id, &node);
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
            } if who.privileged => {
                self.step_usage(job_id, step_id, &node, usage);
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

    /// The Prolog failed on one of a running job's nodes (at its first
    /// step there): as at launch, drain the node and requeue the job held.
    fn prolog_failed(&mut self, id: JobId, node: &str, now: i64) {
        tracing::error!("prolog of job {id} failed on {node}: draining it");
        self.drain_for(node, "Prolog error", now);
        let running = self
            .p
            .jobs
            .get(&id)
            .is_some_and(|j| j.state.is_active() && j.alloc.nodes.iter().any(|n| n == node));
        if running {
            self.requeue_failed_launch(id, None, true, now);
        }
    }

    fn drain_for(&mut self, node: &str, reason: &str, now: i64) {
        self.set_admin(node, |a| {
            a.drain = true;
            a.reason = Some(reason.into());
            a.reason_time = Some(now);
            a.reason_uid = Some(0);
        });
    }

    /// A launch could not be delivered: put the job back in the queue;
    /// held (Slurm's "launch failed requeued held") when the node refused
    /// it, since it would be refused again (an output file the user may not
    /// write, say): requeued free it would be started and refused for ever.
    pub fn launch_failed(
        &mut self,
        id: JobId,
        node: &str,
        prolog_failed: bool,
        refused: bool,
        start_time: i64,
        now: i64,
    ) {
        let running = self.p.jobs.get(&id).is_some_and(|j| {
            j.state.is_active()
                && j.batch_host.as_deref() == Some(node)
                && j.start_time == Some(start_time)
        });
        if !running {
            return;
        }
        if prolog_failed {
            // As Slurm: the node is drained and the job requeued, held.
            tracing::error!("prolog of job {id} failed on {node}: draining it");
            self.drain_for(node, "Prolog error", now);
        }
        self.requeue_failed_launch(id, Some(node), prolog_failed || refused, now);
    }

    /// Put a job that could not start back in the queue (held after a
    /// failed prolog); `clean` is a node known to have nothing of it.
    fn requeue_failed_launch(&mut self, id: JobId, clean: Option<&str>, held: bool, now: i64) {
        let run = self.p.jobs.get(&id).and_then(|j| j.start_time);
        if let Some(j) = self.job_mut(id) {
            j.state = JobState::Pending;
            j.reason = if held {
                j.held = Some(HoldKind::Admin);
                j.priority = 0;
                JobReason::Other("launch failed requeued held".into())
            } else {
                JobReason::None
            };
            j.restarts += 1;
            j.start_time = None;
            j.end_time = None;
            j.clear_suspension();
            j.completing = true;
            j.completing_nodes = j.alloc.nodes.clone();
            j.eligible_time = Some(now);
        }
        let nodes = self
            .p
            .jobs
            .get(&id)
            .map(|j| j.alloc.nodes.clone())
            .unwrap_or_default();
        self.terminate_run(id, &nodes, 0, run);
        if let Some(node) = clean {
            self.node_cleaned(id, node);
        }
        self.save_job(id);
    }
}

/// Expand `%A` and `%a` (with optional zero-padding width) in an output
/// pattern for an array task; every other `%` sequence is left for the node.
pub fn expand_array_patterns(pat: &str, a: &ArrayInfo) -> String {
    let mut out = String::with_capacity(pat.len());
    let mut chars = pat.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut width = String::new();
        while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
            width.push(d);
            chars.next();
        }
        match chars.peek().copied() {
            Some(l @ ('A' | 'a')) => {
                chars.next();
                let v = if l == 'A' { a.job_id } else { a.task_id };
                let w: usize = width.parse().unwrap_or(0).min(10);
                out.push_str(&format!("{v:0w$}"));
            }
            Some('%') => {
                chars.next();
                out.push_str("%%");
            }
            _ => {
                out.push('%');
                out.push_str(&width);
            }
        }
    }
    out
}

/// What a node daemon is told of job `j` before any step runs there.
fn prologue_facts(j: &JobRecord, pod_uids: Vec<String>) -> JobPrologue {
    JobPrologue {
        job_id: j.job_id,
        uid: j.user_id,
        gid: j.group_id,
        user_name: j.user_name.clone(),
        partition: j.partition.clone(),
        account: j.account.clone(),
        alloc: j.alloc.clone(),
        pod_uids,
    }
}

/// The pod uids of a placeholder job made by slurm-bridge, one per node in
/// allocation order (its admin comment's `uids`); none for other jobs.
fn pod_uids(admin_comment: Option<&str>) -> Vec<String> {
    admin_comment
        .and_then(|c| serde_json::from_str::<serde_json::Value>(c).ok())
        .and_then(|v| {
            v.get("uids")?.as_array().map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
        })
        .unwrap_or_default()
}

/// The variables a batch script gets from its job record beside those its
/// node daemon sets (`SLURM_JOB_DEPENDENCY=...`): its place in an array, its
/// restarts, and what it asked for that Slurm repeats to the script.
/// A job's `--signal` warning, if it asked for one (checked at submission).
fn warning(j: &JobRecord) -> Option<slurm_common::signal::Warning> {
    slurm_common::signal::parse_warning(j.desc.signal.as_deref()?).ok()
}

/// Every name [`job_env`] may set.
pub const JOB_ENV_VARS: &[&str] = &[
    "SLURM_ARRAY_JOB_ID",
    "SLURM_ARRAY_TASK_ID",
    "SLURM_ARRAY_TASK_COUNT",
    "SLURM_ARRAY_TASK_MIN",
    "SLURM_ARRAY_TASK_MAX",
    "SLURM_ARRAY_TASK_STEP",
    "SLURM_RESTART_COUNT",
    "SLURM_JOB_DEPENDENCY",
    "SLURM_JOB_LICENSES",
    "SLURM_JOB_RESERVATION",
    "SLURM_GPUS",
    "SLURM_GPUS_PER_NODE",
    "SLURM_GPUS_PER_TASK",
    "SLURM_CPUS_PER_GPU",
    "SLURM_MEM_PER_GPU",
    "SLURM_NTASKS_PER_SOCKET",
    "SLURM_THREADS_PER_CORE",
];

pub fn job_env(j: &JobRecord) -> Vec<String> {
    let mut env = j.array.as_ref().map(array_env).unwrap_or_default();
    if j.restarts > 0 {
        env.push(format!("SLURM_RESTART_COUNT={}", j.restarts));
    }
    let d = &j.desc;
    let given: [(&str, Option<String>); 10] = [
        ("SLURM_JOB_DEPENDENCY", d.dependency.clone()),
        ("SLURM_JOB_LICENSES", d.licenses.clone()),
        ("SLURM_JOB_RESERVATION", d.reservation.clone()),
        ("SLURM_GPUS", d.gpus.clone()),
        ("SLURM_GPUS_PER_NODE", d.gpus_per_node.clone()),
        ("SLURM_GPUS_PER_TASK", d.gpus_per_task.clone()),
        ("SLURM_CPUS_PER_GPU", d.cpus_per_gpu.map(|n| n.to_string())),
        ("SLURM_MEM_PER_GPU", d.mem_per_gpu.map(|n| n.to_string())),
        (
            "SLURM_NTASKS_PER_SOCKET",
            d.ntasks_per_socket.map(|n| n.to_string()),
        ),
        (
            "SLURM_THREADS_PER_CORE",
            d.threads_per_core.map(|n| n.to_string()),
        ),
    ];
    for (k, v) in given {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            env.push(format!("{k}={v}"));
        }
    }
    env
}

/// The variables an array task's batch script gets beside the others
/// (`SLURM_ARRAY_JOB_ID=...`).
pub fn array_env(a: &ArrayInfo) -> Vec<String> {
    let mut env = vec![
        format!("SLURM_ARRAY_JOB_ID={}", a.job_id),
        format!("SLURM_ARRAY_TASK_ID={}", a.task_id),
        format!("SLURM_ARRAY_TASK_COUNT={}", a.task_count),
        format!("SLURM_ARRAY_TASK_MIN={}", a.task_min),
        format!("SLURM_ARRAY_TASK_MAX={}", a.task_max),
    ];
    if let Some(st) = a.task_step {
        env.push(format!("SLURM_ARRAY_TASK_STEP={st}"));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_script_gets_what_its_job_asked_for() {
        let mut j = JobRecord {
            restarts: 2,
            array: Some(ArrayInfo {
                job_id: 7,
                task_id: 3,
                task_count: 4,
                task_min: 1,
                task_max: 7,
                task_step: Some(2),
                max_running: None,
            }),
            ..Default::default()
        };
        let d = Arc::make_mut(&mut j.desc);
        d.dependency = Some("afterok:5".into());
        d.licenses = Some("matlab:2".into());
        d.reservation = Some("maint".into());
        d.gpus = Some("2".into());
        d.gpus_per_node = Some("a100:1".into());
        d.gpus_per_task = Some("1".into());
        d.cpus_per_gpu = Some(4);
        d.mem_per_gpu = Some(1024);
        d.ntasks_per_socket = Some(1);
        d.threads_per_core = Some(1);
        let env = job_env(&j);
        assert!(env.contains(&"SLURM_JOB_DEPENDENCY=afterok:5".to_string()));
        assert!(env.contains(&"SLURM_RESTART_COUNT=2".to_string()));
        assert!(env.contains(&"SLURM_ARRAY_TASK_STEP=2".to_string()));
        assert!(env.contains(&"SLURM_GPUS_PER_NODE=a100:1".to_string()));
        // Every name it sets is one a launch strips from an outer job's copy.
        let names: Vec<&str> = env.iter().filter_map(|kv| kv.split('=').next()).collect();
        assert_eq!(names.len(), JOB_ENV_VARS.len());
        assert!(names.iter().all(|n| JOB_ENV_VARS.contains(n)));
        // A first run of a plain job: nothing.
        assert!(job_env(&JobRecord::default()).is_empty());
    }

    #[test]
    fn job_change_stamps_follow_shared_records() {
        let (a, b, c) = (Arc::new(1u32), Arc::new(2u32), Arc::new(3u32));
        let id = |x: &u32| *x;
        // No previous stamps: everything changed now.
        assert_eq!(
            stamp_changes(None, &[a.clone(), b.clone()], id, 5),
            vec![5, 5]
        );
        let prev = [a.clone(), b.clone(), c.clone()];
        // 2 was replaced, 3 removed, 4 added; 1 is the same record.
        let now = [a.clone(), Arc::new(2u32), Arc::new(4u32)];
        assert_eq!(
            stamp_changes(Some((&prev, &[1, 2, 3])), &now, id, 9),
            vec![1, 9, 9]
        );
        // Stamps that do not match the jobs are ignored.
        assert_eq!(stamp_changes(Some((&prev, &[1])), &[a], id, 7), vec![7]);
    }

    #[test]
    fn array_patterns_leave_other_sequences_alone() {
        let a = ArrayInfo {
            job_id: 12,
            task_id: 3,
            task_count: 4,
            task_min: 0,
            task_max: 3,
            task_step: Some(1),
            max_running: None,
        };
        assert_eq!(
            expand_array_patterns("slurm-%A_%a.out", &a),
            "slurm-12_3.out"
        );
        assert_eq!(
            expand_array_patterns("o-%4a-%j-%%A-%x", &a),
            "o-0003-%j-%%A-%x"
        );
    }
}
