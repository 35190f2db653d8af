//! Wire types shared by every process: the RPC envelope, the requests and
//! responses, and the records the controller hands out (jobs, nodes,
//! partitions).
//!
//! Map:
//! - [`Request`] / [`RequestBody`]: what a client sends, with its [`Credential`].
//! - [`Response`]: the answer; errors carry a Slurm error code ([`SlurmError`]).
//! - [`JobDesc`]: a submission; [`JobRecord`]: the controller's record of a job.
//! - [`NodeRecord`], [`PartitionRecord`]: cluster state as readers see it.
//! - [`BatchLaunch`]: what the controller asks a node daemon to run.
//!
//! Invariants: these types carry data only (no I/O). Times are Unix seconds
//! (`i64`), memory is MiB, time limits are minutes (`None` = unlimited).
//! Slurm's display strings live in `Display` impls here so every process
//! prints them the same way.

pub mod acct;
pub mod grpc;
pub mod jobenv;
pub mod stdpath;
use serde::{Deserialize, Serialize};
use std::fmt;

pub type JobId = u32;

/// Version string reported by every binary, in Slurm's `MAJOR.MINOR.MICRO` form.
pub const SLURM_VERSION: &str = "25.11.0";

/// A signed statement of who is calling. Produced by `slurm_common::auth`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Credential {
    pub uid: u32,
    pub gid: u32,
    /// Host the credential was issued on.
    pub host: String,
    /// Unix seconds.
    pub issued: i64,
    pub expires: i64,
    pub nonce: u64,
    /// What it is good for: the request's method (its body's variant), the
    /// SHA-256 of the body's exact bytes (hex) and the receiver
    /// (`slurmctld`, `slurmdbd`, `slurmd:<node>`).
    #[serde(default)]
    pub method: String,
    #[serde(default)]
    pub body_hash: String,
    #[serde(default)]
    pub to: String,
    /// Hex HMAC-SHA256 over the fields above.
    pub sig: String,
    /// Instead of a signature: a user's JWT, passed on by a slurmrestd
    /// that holds no key (`AuthAltTypes=auth/jwt`); the receiver checks it
    /// and acts as the user it names (uid and gid above are ignored).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub token: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    pub cred: Credential,
    pub body: RequestBody,
}

/// Job states as Slurm names them (base states; COMPLETING is a flag on the record).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub enum JobState {
    #[default]
    Pending,
    Running,
    Suspended,
    Completed,
    Cancelled,
    Failed,
    Timeout,
    NodeFail,
    Preempted,
    BootFail,
    Deadline,
    OutOfMemory,
    /// A run ended by a requeue: only its accounting record and its
    /// completion line have it (the job itself is pending again).
    Requeued,
}

impl JobState {
    /// Started and not over: running or suspended.
    pub fn is_active(self) -> bool {
        matches!(self, JobState::Running | JobState::Suspended)
    }

    pub fn is_finished(self) -> bool {
        !matches!(
            self,
            JobState::Pending | JobState::Running | JobState::Suspended
        )
    }
    /// Long name, as `squeue -l` and `scontrol` print it.
    pub fn name(self) -> &'static str {
        match self {
            JobState::Pending => "PENDING",
            JobState::Running => "RUNNING",
            JobState::Suspended => "SUSPENDED",
            JobState::Completed => "COMPLETED",
            JobState::Cancelled => "CANCELLED",
            JobState::Failed => "FAILED",
            JobState::Timeout => "TIMEOUT",
            JobState::NodeFail => "NODE_FAIL",
            JobState::Preempted => "PREEMPTED",
            JobState::BootFail => "BOOT_FAIL",
            JobState::Deadline => "DEADLINE",
            JobState::OutOfMemory => "OUT_OF_MEMORY",
            JobState::Requeued => "REQUEUED",
        }
    }
    /// Compact name, as `squeue`'s `%t` prints it.
    pub fn short(self) -> &'static str {
        match self {
            JobState::Pending => "PD",
            JobState::Running => "R",
            JobState::Suspended => "S",
            JobState::Completed => "CD",
            JobState::Cancelled => "CA",
            JobState::Failed => "F",
            JobState::Timeout => "TO",
            JobState::NodeFail => "NF",
            JobState::Preempted => "PR",
            JobState::BootFail => "BF",
            JobState::Deadline => "DL",
            JobState::OutOfMemory => "OOM",
            JobState::Requeued => "RQ",
        }
    }
    /// Parse a long or compact name, case-insensitively (`squeue -t`).
    pub fn parse(s: &str) -> Option<JobState> {
        let u = s.to_ascii_uppercase();
        ALL_JOB_STATES
            .iter()
            .copied()
            .find(|st| st.name() == u || st.short() == u)
    }
}

pub const ALL_JOB_STATES: [JobState; 13] = [
    JobState::Pending,
    JobState::Running,
    JobState::Suspended,
    JobState::Completed,
    JobState::Cancelled,
    JobState::Failed,
    JobState::Timeout,
    JobState::NodeFail,
    JobState::Preempted,
    JobState::BootFail,
    JobState::Deadline,
    JobState::OutOfMemory,
    JobState::Requeued,
];

/// Why a job is in its state (the REASON column).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub enum JobReason {
    #[default]
    None,
    Priority,
    Resources,
    BeginTime,
    JobHeldUser,
    JobHeldAdmin,
    PartitionDown,
    PartitionInactive,
    PartitionNodeLimit,
    PartitionTimeLimit,
    NodeDown,
    BadConstraints,
    Dependency,
    NonZeroExitCode,
    TimeLimit,
    RaisedSignal,
    DependencyNeverSatisfied,
    JobArrayTaskLimit,
    Reservation,
    /// A reason string set by a policy that has no variant here yet.
    Other(String),
}

/// Each reason without text of its own, and its name (the REASON column).
pub(crate) const REASON_NAMES: [(JobReason, &str); 19] = [
    (JobReason::None, "None"),
    (JobReason::Priority, "Priority"),
    (JobReason::Resources, "Resources"),
    (JobReason::BeginTime, "BeginTime"),
    (JobReason::JobHeldUser, "JobHeldUser"),
    (JobReason::JobHeldAdmin, "JobHeldAdmin"),
    (JobReason::PartitionDown, "PartitionDown"),
    (JobReason::PartitionInactive, "PartitionInactive"),
    (JobReason::PartitionNodeLimit, "PartitionNodeLimit"),
    (JobReason::PartitionTimeLimit, "PartitionTimeLimit"),
    (JobReason::NodeDown, "NodeDown"),
    (JobReason::BadConstraints, "BadConstraints"),
    (JobReason::Dependency, "Dependency"),
    (JobReason::NonZeroExitCode, "NonZeroExitCode"),
    (JobReason::TimeLimit, "TimeLimit"),
    (JobReason::RaisedSignal, "RaisedSignal"),
    (
        JobReason::DependencyNeverSatisfied,
        "DependencyNeverSatisfied",
    ),
    (JobReason::JobArrayTaskLimit, "JobArrayTaskLimit"),
    (JobReason::Reservation, "Reservation"),
];

impl fmt::Display for JobReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            JobReason::Other(s) => s.as_str(),
            known => REASON_NAMES
                .iter()
                .find(|(r, _)| r == known)
                .map_or("", |(_, name)| name),
        };
        f.write_str(s)
    }
}

impl JobReason {
    /// The reason a text names (what [`fmt::Display`] writes): a known name
    /// is its variant, anything else `Other`.
    pub fn from_name(s: &str) -> JobReason {
        REASON_NAMES
            .iter()
            .find(|(_, name)| *name == s)
            .map_or_else(|| JobReason::Other(s.to_string()), |(r, _)| r.clone())
    }

    pub fn is_none(&self) -> bool {
        *self == JobReason::None
    }

    /// Whether `code` is one of Slurm's job reason codes (any case): the
    /// ones named here, the others `squeue(1)` lists (JOB REASON CODES) and
    /// this controller sets, and the per-limit ones by their form
    /// (`QOSMaxJobsPerUserLimit`, `AssocGrpCPUMinutesLimit`...).
    pub fn is_code(code: &str) -> bool {
        const MORE: &[&str] = &[
            "AssociationJobLimit",
            "AssociationResourceLimit",
            "AssociationTimeLimit",
            "Cleaning",
            "InactiveLimit",
            "InvalidAccount",
            "InvalidQOS",
            "JobLaunchFailure",
            "Licenses",
            "Prolog",
            "QOSJobLimit",
            "QOSResourceLimit",
            "QOSTimeLimit",
            "QOSUsageThreshold",
            "ReqNodeNotAvail",
            "SystemFailure",
            "WaitingForScheduling",
            "Preempted",
            "OutOfMemory",
            "DeadLine",
        ];
        let named = |n: &&str| n.eq_ignore_ascii_case(code);
        if REASON_NAMES.iter().map(|(_, n)| n).any(named) || MORE.iter().any(named) {
            return true;
        }
        let lower = code.to_ascii_lowercase();
        ["assocgrp", "assocmax", "qosgrp", "qosmax"]
            .iter()
            .any(|p| lower.starts_with(p) && lower.len() > p.len() + 5 && lower.ends_with("limit"))
    }

    /// Slurm's reason code: the name, without the text some reasons add
    /// after a comma (`ReqNodeNotAvail, May be reserved for other job`);
    /// a job requeued held after a failed launch is `JobHeldAdmin`.
    pub fn code(&self) -> std::borrow::Cow<'_, str> {
        match self {
            JobReason::Other(s) if s == "launch failed requeued held" => "JobHeldAdmin".into(),
            JobReason::Other(s) => s.split(',').next().unwrap_or_default().trim().into(),
            known => known.to_string().into(),
        }
    }

    /// Whether sacct's `Reason` keeps it: a wait for something other than
    /// priority or resources.
    pub fn is_notable(&self) -> bool {
        !matches!(
            self,
            JobReason::None | JobReason::Priority | JobReason::Resources
        ) && !matches!(self, JobReason::Other(s) if s.is_empty())
    }
}

/// A batch submission as `sbatch` sends it. Unset options are `None` and get
/// the partition's or Slurm's defaults in the controller.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct JobDesc {
    pub name: Option<String>,
    pub partition: Option<String>,
    pub account: Option<String>,
    pub qos: Option<String>,
    /// Minutes; `Some(None)` is an explicit UNLIMITED.
    pub time_limit: Option<Option<u32>>,
    pub min_nodes: Option<u32>,
    pub max_nodes: Option<u32>,
    pub ntasks: Option<u32>,
    pub cpus_per_task: Option<u32>,
    pub ntasks_per_node: Option<u32>,
    /// MiB per node (`--mem`); 0 means "all of the node's memory".
    pub mem_per_node: Option<u64>,
    /// MiB per allocated CPU (`--mem-per-cpu`).
    pub mem_per_cpu: Option<u64>,
    /// `-w`: node names, expanded.
    pub req_nodes: Vec<String>,
    /// `-x`: node names, expanded.
    pub exc_nodes: Vec<String>,
    pub exclusive: bool,
    pub hold: bool,
    /// Unix seconds (`--begin`).
    pub begin_time: Option<i64>,
    pub nice: Option<i32>,
    pub requeue: Option<bool>,
    pub work_dir: String,
    /// Output patterns as given (`%j` etc. are expanded on the node).
    pub std_out: Option<String>,
    pub std_err: Option<String>,
    pub std_in: Option<String>,
    pub script: String,
    /// Arguments after the script name.
    pub argv: Vec<String>,
    /// The environment to run the job with (`--export` already applied).
    pub environment: Vec<String>,
    pub submit_host: String,
    /// `sbatch` itself, for `Command=` in `scontrol show job`.
    pub command: Option<String>,
    pub comment: Option<String>,
    /// `--array` as given (`0-99:2%10`).
    #[serde(default)]
    pub array: Option<String>,
    /// `--dependency` as given (`afterok:12,singleton`).
    #[serde(default)]
    pub dependency: Option<String>,
    /// `--reservation`.
    #[serde(default)]
    pub reservation: Option<String>,
    /// `EXTERNAL_JOB`: no script, nothing launched; holds its allocation on
    /// external nodes until cancelled or its time limit.
    #[serde(default)]
    pub external: bool,
    /// `--gres` (per node: `gpu:a100:2,gpu:1`).
    #[serde(default)]
    pub gres: Option<String>,
    /// `--gpus` (total: `[type:]count`).
    #[serde(default)]
    pub gpus: Option<String>,
    /// `--gpus-per-node` (`[type:]count`).
    #[serde(default)]
    pub gpus_per_node: Option<String>,
    /// `--gpus-per-task` (`[type:]count`).
    #[serde(default)]
    pub gpus_per_task: Option<String>,
    /// `--gpu-bind` (checked): how its steps' tasks get GPUs, given to its
    /// script as `SLURM_GPU_BIND` (srun reads it).
    #[serde(default)]
    pub gpu_bind: Option<String>,
    /// `--constraint` (node features: `intel&(ib|opa)`, `[rack1|rack2]`).
    #[serde(default)]
    pub constraint: Option<String>,
    /// `--licenses` (`matlab:2,abaqus`).
    #[serde(default)]
    pub licenses: Option<String>,
    /// Set by administrators only (REST `admin_comment`).
    #[serde(default)]
    pub admin_comment: Option<String>,
    /// `--cpus-per-gpu`: CPUs that come with each allocated GPU.
    #[serde(default)]
    pub cpus_per_gpu: Option<u32>,
    /// `--mem-per-gpu` (MiB): memory that comes with each allocated GPU.
    #[serde(default)]
    pub mem_per_gpu: Option<u64>,
    /// `--switches=N`: at most N leaf switches (topology/tree).
    #[serde(default)]
    pub switches: Option<u32>,
    /// `--switches=N@time`: how long to wait for them, seconds.
    #[serde(default)]
    pub wait4switch: Option<u32>,
    /// `--segment=N` (topology/block).
    #[serde(default)]
    pub segment: Option<u32>,
    /// `--exclusive=topo`.
    #[serde(default)]
    pub exclusive_topo: bool,
    /// `-s`/`--oversubscribe`: may share cores in an `OverSubscribe=YES`
    /// partition.
    #[serde(default)]
    pub oversubscribe: bool,
    /// `--contiguous`.
    #[serde(default)]
    pub contiguous: bool,
    /// `--sockets-per-node`, `--cores-per-socket`, `--threads-per-core`
    /// (or `-B S:C:T`): only nodes with at least these.
    #[serde(default)]
    pub sockets_per_node: Option<u32>,
    #[serde(default)]
    pub cores_per_socket: Option<u32>,
    #[serde(default)]
    pub threads_per_core: Option<u32>,
    /// `--ntasks-per-socket`: at most this many tasks per socket.
    #[serde(default)]
    pub ntasks_per_socket: Option<u32>,
    /// `--ntasks-per-core`: at most this many tasks per core (a task is
    /// given whole cores' share of threads to keep it so).
    #[serde(default)]
    pub ntasks_per_core: Option<u32>,
    /// `--ntasks-per-gpu`: this many tasks for each GPU (Slurm's
    /// ntasks_per_tres): with GPUs asked for, the task count follows
    /// them; otherwise one GPU per this many tasks.
    #[serde(default)]
    pub ntasks_per_gpu: Option<u32>,
    /// `--tmp`: MiB of temporary disk space each node must have (its
    /// `TmpDisk`).
    #[serde(default)]
    pub tmp_disk: Option<u64>,
    /// `--priority`: the job's priority, fixed (operators only; from
    /// anyone else only 0, which holds the job).
    #[serde(default)]
    pub priority: Option<u32>,
    /// `--mincpus`: at least this many CPUs on each node.
    #[serde(default)]
    pub min_cpus: Option<u32>,
    /// `--mail-type`: the events mailed about (`BEGIN,END`, upper case).
    #[serde(default)]
    pub mail_type: Option<String>,
    /// `--mail-user`: who gets the mail (the job's user by default).
    #[serde(default)]
    pub mail_user: Option<String>,
    /// `--signal=[B:]SIG[@TIME]`: a signal before the time limit.
    #[serde(default)]
    pub signal: Option<String>,
    /// `--open-mode`: `append` or `truncate` (slurm.conf's `JobFileAppend`
    /// when unset).
    #[serde(default)]
    pub open_mode: Option<String>,
    /// `--deadline`: Unix seconds by which the job must have ended; a job
    /// that can no longer end by then (even at its `--time-min`) ends
    /// DEADLINE.
    #[serde(default)]
    pub deadline: Option<i64>,
    /// `--time-min` (minutes): backfill may start the job with its limit
    /// lowered as far as this, when that lets it start earlier.
    #[serde(default)]
    pub time_min: Option<u32>,
    /// `--kill-on-invalid-dep=yes|no` (slurm.conf's `SchedulerParameters=
    /// kill_invalid_depend` when unset): a job whose dependency can never
    /// be satisfied is cancelled rather than left pending.
    #[serde(default)]
    pub kill_on_invalid_dep: Option<bool>,
    /// `--extra`: free text kept with the job (`Extra=`).
    #[serde(default)]
    pub extra: Option<String>,
    /// `--wckey`: the workload characterization key, kept with the job and
    /// in accounting.
    #[serde(default)]
    pub wckey: Option<String>,
    /// `sbatch --uid` / `--gid` (root and SlurmUser only): the user and
    /// group the job is submitted as and runs as. The controller checks
    /// the caller and makes the job the user's; it keeps neither.
    #[serde(default)]
    pub user_id: Option<u32>,
    #[serde(default)]
    pub group_id: Option<u32>,
    /// `-k/--no-kill`: a node of the job that fails leaves the job (which
    /// keeps running on the others) rather than ending it.
    #[serde(default)]
    pub no_kill: bool,
    /// `-O/--overcommit`: CPUs allocated as for one task per node; the job
    /// keeps its task count (its steps run that many tasks on them).
    #[serde(default)]
    pub overcommit: bool,
}

/// An advance reservation (`scontrol create reservation`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ReservationRecord {
    pub name: String,
    pub start_time: i64,
    pub end_time: i64,
    pub nodes: Vec<String>,
    pub users: Vec<String>,
    pub accounts: Vec<String>,
    pub partition: Option<String>,
    /// Upper-case flag names (`MAINT`, `IGNORE_JOBS`, `DAILY`, ...).
    pub flags: Vec<String>,
    pub core_cnt: u32,
    /// When its current accounting record began, when not at its start
    /// (it was changed after it began: see `acct::AcctResv`). The
    /// controller's own: not sent to commands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record_start: Option<i64>,
}

impl ReservationRecord {
    pub fn is_active(&self, now: i64) -> bool {
        self.start_time <= now && now < self.end_time
    }
    pub fn has_flag(&self, f: &str) -> bool {
        self.flags.iter().any(|x| x.eq_ignore_ascii_case(f))
    }
}

/// A node added at run time.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeSpec {
    pub name: String,
    pub cpus: u32,
    /// MiB.
    pub real_memory: u64,
    pub features: Vec<String>,
    /// Partitions to join (besides those with `Nodes=ALL`).
    pub partitions: Vec<String>,
    /// Upper-case state: `EXTERNAL`, `FUTURE`, `IDLE` (a daemon will register).
    pub state: String,
    pub addr: Option<String>,
    pub port: Option<u16>,
    /// `Gres=` as on a node line (`gpu:4`, `gpu:a100:2`).
    #[serde(default)]
    pub gres: Vec<String>,
}

/// What `scontrol create|update reservation` asks for; unset fields keep
/// their value on update.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ReservationSpec {
    pub name: Option<String>,
    pub start_time: Option<i64>,
    pub end_time: Option<i64>,
    /// Minutes.
    pub duration: Option<u32>,
    pub nodes: Option<Vec<String>>,
    pub node_cnt: Option<u32>,
    pub users: Option<Vec<String>>,
    pub accounts: Option<Vec<String>>,
    pub partition: Option<String>,
    pub flags: Option<Vec<String>>,
}

/// Where a job runs: one entry per allocated node, in node order.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Allocation {
    pub nodes: Vec<String>,
    pub cpus: Vec<u32>,
    /// MiB per node.
    pub mem: Vec<u64>,
    /// Tasks per node (what SLURM_TASKS_PER_NODE lists).
    pub tasks: Vec<u32>,
    /// Generic resources per node (same order as `nodes`).
    #[serde(default)]
    pub gres: Vec<Vec<GresAlloc>>,
}

/// Generic resources of one name and type given to a job on one node, by
/// device index (the node's GPU numbering: `gpu:a100:2(IDX:0-1)`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct GresAlloc {
    pub name: String,
    #[serde(default)]
    pub kind: Option<String>,
    pub indices: Vec<u32>,
}

impl GresAlloc {
    /// The GPU indices among a node's generic resources, sorted.
    pub fn gpu_indices(gres: &[GresAlloc]) -> Vec<u32> {
        let mut v: Vec<u32> = gres
            .iter()
            .filter(|g| g.name == "gpu")
            .flat_map(|g| g.indices.iter().copied())
            .collect();
        v.sort_unstable();
        v
    }

    /// `gpu:a100:2(IDX:0-1)` / `gpu:1(IDX:3)`.
    pub fn describe(&self) -> String {
        let idx = compress_indices(&self.indices);
        match &self.kind {
            Some(k) => format!("{}:{k}:{}(IDX:{idx})", self.name, self.indices.len()),
            None => format!("{}:{}(IDX:{idx})", self.name, self.indices.len()),
        }
    }
}

/// `0-1,3` from `[0, 1, 3]`.
pub fn compress_indices(v: &[u32]) -> String {
    let mut v = v.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    out.join(",")
}

impl Allocation {
    pub fn total_cpus(&self) -> u32 {
        self.cpus.iter().sum()
    }

    /// The GPU indices given on `node`.
    pub fn gpus_on(&self, node: &str) -> Vec<u32> {
        self.nodes
            .iter()
            .position(|n| n == node)
            .and_then(|k| self.gres.get(k))
            .map(|g| {
                g.iter()
                    .filter(|x| x.name == "gpu")
                    .flat_map(|x| x.indices.iter().copied())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The controller's record of one job. Persisted as-is in the state journal.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct JobRecord {
    pub job_id: JobId,
    pub name: String,
    pub user_id: u32,
    pub user_name: String,
    pub group_id: u32,
    pub group_name: String,
    pub account: String,
    pub qos: String,
    pub partition: String,
    pub priority: u32,
    pub state: JobState,
    /// Still cleaning up on its nodes (shown as CG / COMPLETING).
    pub completing: bool,
    pub reason: JobReason,
    /// Minutes; `None` = UNLIMITED.
    pub time_limit: Option<u32>,
    pub submit_time: i64,
    pub eligible_time: Option<i64>,
    pub start_time: Option<i64>,
    /// The start time its current run was launched with: the run's name on
    /// the nodes and in their reports. Unlike `start_time` (moved with the
    /// clock when it steps, so elapsed time stays right) it never changes
    /// while the run lasts. `None` in records saved before it was kept
    /// (`start_time` stands for it then): see [`JobRecord::run`].
    #[serde(default)]
    pub run_start: Option<i64>,
    pub end_time: Option<i64>,
    pub last_sched_eval: Option<i64>,
    /// Raw wait status of the batch script (`exit << 8 | signal`).
    pub exit_status: i32,
    pub restarts: u32,
    pub batch_host: Option<String>,
    pub alloc: Allocation,
    /// Nodes still cleaning up after the job ended.
    pub completing_nodes: Vec<String>,
    pub desc: std::sync::Arc<JobDesc>,
    /// How many tasks (derived at submit: ntasks or nodes × ntasks-per-node).
    pub num_tasks: u32,
    /// Cpus the job asked for in total (before allocation).
    pub req_cpus: u32,
    pub min_nodes: u32,
    pub max_nodes: u32,
    /// Who held it (user or admin hold); `None` when not held.
    pub held: Option<HoldKind>,
    /// A signal asked for while the job ran (`scancel`), recorded so the end
    /// state is CANCELLED rather than FAILED.
    pub cancelled: bool,
    /// Set when the time limit was reached.
    pub timed_out: bool,
    /// Set when one of its nodes failed.
    pub node_failed: bool,
    /// Set for the tasks of a job array.
    #[serde(default)]
    pub array: Option<ArrayInfo>,
    /// Dependencies still to be met (`None` once satisfied or never set).
    #[serde(default)]
    pub dependency: Option<String>,
    /// Job steps (`srun` inside the allocation), oldest first.
    #[serde(default)]
    pub steps: Vec<StepRecord>,
    /// `false` for allocations without a script (`salloc`, `srun`).
    #[serde(default = "yes")]
    pub batch: bool,
    /// Who cancelled it (sacct's `CANCELLED by UID`).
    #[serde(default)]
    pub cancelled_by: Option<u32>,
    /// When it was last suspended or resumed (`SuspendTime=`).
    #[serde(default)]
    pub suspend_time: Option<i64>,
    /// Seconds spent suspended in earlier suspensions (not the current
    /// one): they do not count against the time limit.
    #[serde(default)]
    pub suspended_secs: i64,
    /// Suspended by preemption (`PreemptMode=SUSPEND`): it resumes by
    /// itself once its cores are free again; `scontrol suspend` jobs wait
    /// for `scontrol resume`.
    #[serde(default)]
    pub preempt_suspended: bool,
    /// Suspended by gang scheduling (`PreemptMode=GANG` time slicing in an
    /// `OverSubscribe` partition): it resumes at a later time slice.
    #[serde(default)]
    pub gang_suspended: bool,
    /// The last reason it waited for other than priority or resources
    /// (sacct's `Reason`; `None` if there was none).
    #[serde(default, skip_serializing_if = "JobReason::is_none")]
    pub reason_prev: JobReason,
    /// Which scheduler started it, last time it started (sacct's `Flags`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sched_flag: Option<SchedFlag>,
    /// The node whose failure ended it (sacct's `FailedNode`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_node: Option<String>,
}

/// Which scheduler started a job (Slurm's `SchedSubmit`, `SchedMain`,
/// `SchedBackfill`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum SchedFlag {
    Submit,
    Main,
    Backfill,
}

impl SchedFlag {
    pub const ALL: [SchedFlag; 3] = [SchedFlag::Submit, SchedFlag::Main, SchedFlag::Backfill];

    /// sacct's name (`SchedMain`).
    pub fn name(self) -> &'static str {
        match self {
            SchedFlag::Submit => "SchedSubmit",
            SchedFlag::Main => "SchedMain",
            SchedFlag::Backfill => "SchedBackfill",
        }
    }

    /// slurmrestd's job flag (`STARTED_ON_SCHEDULE`).
    pub fn rest_name(self) -> &'static str {
        match self {
            SchedFlag::Submit => "STARTED_ON_SUBMIT",
            SchedFlag::Main => "STARTED_ON_SCHEDULE",
            SchedFlag::Backfill => "STARTED_ON_BACKFILL",
        }
    }

    /// From [`SchedFlag::name`], any case.
    pub fn from_name(s: &str) -> Option<SchedFlag> {
        Self::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(s))
    }
}

fn yes() -> bool {
    true
}

/// The step id Slurm gives the batch script (`N.batch`).
pub const BATCH_STEP: u32 = 0xFFFF_FFFB;
/// Slurm's extern step (`SLURM_EXTERN_CONT`, `JOBID.extern`): here what a
/// Kubernetes pod placed by slurm-bridge used on a node whose daemon runs
/// beside a kubelet, recorded under the pod's placeholder job.
pub const EXTERN_STEP: u32 = 0xFFFF_FFFC;

/// What processes used, read from their cgroup when they end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskUsage {
    /// CPU time of every process, microseconds.
    pub cpu_usec: u64,
    pub user_usec: u64,
    pub system_usec: u64,
    /// Peak memory (`memory.max_usage_in_bytes` / `memory.peak`).
    pub max_rss_bytes: u64,
}

/// One job step as the controller records it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepRecord {
    pub step_id: u32,
    pub name: String,
    pub state: JobState,
    pub nodes: Vec<String>,
    pub ntasks: u32,
    pub tasks_per_node: Vec<u32>,
    pub cpus_per_task: u32,
    pub start_time: i64,
    pub end_time: Option<i64>,
    /// Raw wait status of the worst task.
    pub exit_status: i32,
    /// Usage gathered on the node (sacct's TotalCPU, MaxRSS).
    #[serde(default)]
    pub usage: Option<TaskUsage>,
    /// Node the usage (MaxRSS) was read on.
    #[serde(default)]
    pub usage_node: Option<String>,
    /// Its own time limit in minutes (`srun -t` in an allocation); none:
    /// unlimited (the job's limit still ends it).
    #[serde(default)]
    pub time_limit: Option<u32>,
    /// The seconds its job had run (suspensions left out) when it started:
    /// the step's own run time leaves out its job's suspensions too. The
    /// controller's alone (not sent).
    #[serde(default)]
    pub job_secs_at_start: Option<i64>,
    /// CPUs it holds on each of its nodes (same order as `nodes`); empty
    /// for a step recorded before steps held CPUs.
    #[serde(default)]
    pub cpus: Vec<u32>,
    /// `srun --overlap`: its CPUs are not held from other steps.
    #[serde(default)]
    pub overlap: bool,
    /// Its GPUs on each of its nodes (same order as `nodes`); held from
    /// other steps unless it overlaps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gres: Vec<Vec<GresAlloc>>,
    /// MiB it holds on each of its nodes (it asked `--mem` or
    /// `--mem-per-cpu`); empty: none (it has the job's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mem: Vec<u64>,
    /// Nodes where its tasks have ended (their daemons said so): it holds
    /// nothing there any more, even if its srun never reports. The
    /// controller's alone (not sent).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ended_on: Vec<String>,
}

impl StepRecord {
    /// The CPUs it holds (all of its job's on its nodes without `--exact`);
    /// a step recorded before steps held CPUs: its tasks'.
    pub fn alloc_cpus(&self) -> u32 {
        if self.cpus.is_empty() {
            self.ntasks * self.cpus_per_task.max(1)
        } else {
            self.cpus.iter().sum()
        }
    }

    /// Its TRES as Slurm writes a step's (`cpu=1,mem=100M,node=1,gres/gpu=1`):
    /// its memory its own where it asked some, else its job's on its nodes
    /// (`alloc`); GPUs its own (none listed: none held).
    pub fn tres(&self, alloc: &Allocation) -> String {
        let mem: u64 = if self.mem.is_empty() {
            self.nodes
                .iter()
                .filter_map(|n| alloc.nodes.iter().position(|x| x == n))
                .map(|k| alloc.mem.get(k).copied().unwrap_or(0))
                .sum()
        } else {
            self.mem.iter().fold(0u64, |s, m| s.saturating_add(*m))
        };
        let mut out = format!("cpu={}", self.alloc_cpus());
        if mem > 0 {
            out.push_str(&format!(",mem={mem}M"));
        }
        out.push_str(&format!(",node={}", self.nodes.len()));
        let gpus: usize = self
            .gres
            .iter()
            .flatten()
            .filter(|g| g.name == "gpu")
            .map(|g| g.indices.len())
            .sum();
        if gpus > 0 {
            out.push_str(&format!(",gres/gpu={gpus}"));
        }
        out
    }
}

/// A job's facts for a node daemon setting it up before any step
/// (`PrologFlags=Alloc`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct JobPrologue {
    pub job_id: JobId,
    pub uid: u32,
    pub gid: u32,
    pub user_name: String,
    pub partition: String,
    pub account: String,
    pub alloc: Allocation,
    /// A pod's placeholder job on kubelet nodes: the pod uid bound to each
    /// node of `alloc`, in order (empty for every other job).
    #[serde(default)]
    pub pod_uids: Vec<String>,
}

/// One cluster license (`Licenses=` in slurm.conf) and its use.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct LicenseInfo {
    pub name: String,
    pub total: u32,
    pub used: u32,
}

/// One switch or block of a network topology (`scontrol show topology`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct TopologyEntry {
    /// The topology it belongs to (`topology.yaml` name, `default` for
    /// topology.conf).
    pub topology: String,
    /// A block (topology/block) rather than a switch (topology/tree).
    pub block: bool,
    pub name: String,
    /// Switch level (0 = leaf), or the block's index.
    pub level: u32,
    /// Every node under it (expanded).
    pub nodes: Vec<String>,
    /// Child switches.
    pub switches: Vec<String>,
}

/// A node daemon's account of itself (`scontrol show slurmd`, Slurm's
/// RESPONSE_SLURMD_STATUS).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SlurmdStatus {
    /// The job steps running there: `5` (a batch script), `5.0`, `5.extern`.
    pub steps: Vec<String>,
    pub cpus: u32,
    pub boards: u32,
    pub sockets: u32,
    /// Cores per socket.
    pub cores: u32,
    pub threads: u32,
    /// MiB.
    pub real_memory: u64,
    /// MiB.
    pub tmp_disk: u64,
    /// When the daemon started.
    pub boot_time: i64,
    pub hostname: String,
    /// The last word from the controller.
    pub last_ctld_msg: Option<i64>,
    pub pid: u32,
    /// Slurm's number (0 quiet .. 9 debug5).
    pub debug: u32,
    pub log_file: Option<String>,
    pub version: String,
}

/// What `srun` asks for when it creates a step in an allocation.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct StepRequest {
    pub job_id: JobId,
    pub name: String,
    pub ntasks: Option<u32>,
    pub min_nodes: Option<u32>,
    pub max_nodes: Option<u32>,
    pub cpus_per_task: Option<u32>,
    pub ntasks_per_node: Option<u32>,
    /// `-w`, expanded.
    pub nodelist: Vec<String>,
    /// `-x`, expanded.
    pub exclude: Vec<String>,
    /// `cyclic` spreads tasks round-robin; anything else is block.
    pub distribution: Option<String>,
    /// `-r/--relative=N`: the step starts at node N of the job (0 first).
    #[serde(default)]
    pub relative: Option<u32>,
    /// `-t` in an allocation: the step's own time limit (minutes).
    #[serde(default)]
    pub time_limit: Option<u32>,
    /// `--ntasks-per-core`: at most this many tasks per core.
    #[serde(default)]
    pub ntasks_per_core: Option<u32>,
    /// `--exact` (or implied by `-c`, `--cpus-per-gpu`, `--exclusive`): the
    /// step holds only the CPUs its tasks need; else every CPU of the job
    /// on each of its nodes, where no other step may hold any.
    #[serde(default)]
    pub exact: bool,
    /// `--overlap`: the step holds nothing and waits for nothing.
    #[serde(default)]
    pub overlap: bool,
    /// `-O/--overcommit`: more tasks than CPUs (one CPU a node at least).
    #[serde(default)]
    pub overcommit: bool,
    /// The GPUs it asks for; none: the job's on each of its nodes.
    #[serde(default)]
    pub gpus: Option<StepGpus>,
    /// `--mem` (MiB a node) or `--mem-per-cpu` (MiB a CPU it holds): held
    /// from the job's memory, its cgroup's limit; neither: the job's
    /// memory, holding none (as Slurm's).
    #[serde(default)]
    pub mem_per_node: Option<u64>,
    #[serde(default)]
    pub mem_per_cpu: Option<u64>,
}

/// The GPUs a step asks for: so many a node (`--gpus-per-node`,
/// `--gres=gpu:N`), a task (`--gpus-per-task`) or in all (`--gpus`), of
/// one type or any; all zero: none (`--gres=none`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct StepGpus {
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub per_node: u32,
    #[serde(default)]
    pub per_task: u32,
    #[serde(default)]
    pub total: u32,
}

/// The controller's grant of a step: where each task runs, and the signed
/// credential node daemons check before launching anything.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepLayout {
    pub job_id: JobId,
    pub step_id: u32,
    pub nodes: Vec<String>,
    /// `host:port` of each node's daemon.
    pub addrs: Vec<String>,
    /// Global task ids on each node.
    pub tasks: Vec<Vec<u32>>,
    pub cpus_per_task: u32,
    /// Cpus of the job on each of the step's nodes.
    pub job_cpus: Vec<u32>,
    pub cred: StepCred,
}

/// Signed by the controller: this user may run step `step_id` of `job_id`
/// on `nodes` until `expires`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct StepCred {
    pub job_id: JobId,
    pub step_id: u32,
    pub uid: u32,
    pub gid: u32,
    pub user_name: String,
    pub nodes: Vec<String>,
    pub expires: i64,
    /// What the node daemons apply, signed with the rest so a step cannot
    /// claim more than its job holds: the job's allocation (CPUs, memory,
    /// GPUs per node), partition, account and run (start time), and the
    /// step's layout (tasks per node, CPUs per task, the job's CPUs on each
    /// of the step's nodes).
    #[serde(default)]
    pub alloc: Allocation,
    #[serde(default)]
    pub partition: String,
    #[serde(default)]
    pub account: String,
    #[serde(default)]
    pub job_start: Option<i64>,
    #[serde(default)]
    pub tasks: Vec<Vec<u32>>,
    #[serde(default)]
    pub cpus_per_task: u32,
    #[serde(default)]
    pub job_cpus: Vec<u32>,
    pub sig: String,
    /// CPUs the step holds on each of its nodes where fewer than the job's
    /// (`srun --exact`): its cpuset is that many of the job's CPUs there.
    /// Empty: the job's.
    #[serde(default)]
    pub step_cpus: Vec<u32>,
    /// The step's GPUs on each of its nodes where it asked for its own;
    /// empty: the job's.
    #[serde(default)]
    pub step_gres: Vec<Vec<GresAlloc>>,
    /// The step's memory limit (MiB) on each of its nodes where it asked
    /// for its own; empty: the job's.
    #[serde(default)]
    pub step_mem: Vec<u64>,
}

/// What `srun` sends each node daemon of a step.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TaskLaunch {
    pub layout: StepLayout,
    /// Index of the receiving node in `layout.nodes`.
    pub node_index: u32,
    pub argv: Vec<String>,
    pub environment: Vec<String>,
    pub cwd: String,
    /// Job facts for the environment.
    pub job_name: String,
    pub partition: String,
    pub account: String,
    pub cluster_name: String,
    pub job_nodes: Vec<String>,
    pub job_cpus: Vec<u32>,
    pub job_tasks: Vec<u32>,
    /// The job's generic resources per node (same order as `job_nodes`).
    #[serde(default)]
    pub job_gres: Vec<Vec<GresAlloc>>,
    /// `--cpu-bind` (`[verbose,]none|cores|threads|rank|map_cpu:..|mask_cpu:..`).
    #[serde(default)]
    pub cpu_bind: Option<String>,
    /// `--distribution` (its second part lays tasks out across sockets).
    #[serde(default)]
    pub distribution: Option<String>,
    /// When the job's current run started (which run the step belongs to).
    #[serde(default)]
    pub job_start: Option<i64>,
    /// The job's memory per node, MiB (same order as `job_nodes`).
    #[serde(default)]
    pub job_mem: Vec<u64>,
    /// `srun --pty`: task 0 on a pseudo-terminal of (rows, columns).
    #[serde(default)]
    pub pty: Option<(u16, u16)>,
    /// `srun --task-prolog`/`--task-epilog`: run as the job's user before
    /// and after each task (after and before slurm.conf's).
    #[serde(default)]
    pub task_prolog: Option<String>,
    #[serde(default)]
    pub task_epilog: Option<String>,
    /// `srun -E`: the tasks keep srun's `SLURM_NTASKS`, `SLURM_NPROCS`,
    /// `SLURM_NNODES` and `SLURM_TASKS_PER_NODE` instead of the step's.
    #[serde(default)]
    pub preserve_env: bool,
    /// `srun --bcast`: the program, written as the user on each node before
    /// its tasks start, which then run that copy.
    #[serde(default)]
    pub bcast: Option<Bcast>,
    /// `--gpu-bind` (`--tres-bind=gres/gpu:...`; `per_task:N` implied by
    /// `--gpus-per-task=N`): which of the step's GPUs each task sees.
    #[serde(default)]
    pub gpu_bind: Option<String>,
}

/// `srun --bcast`'s copy of the program.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Bcast {
    /// Where (absolute); ending in `/`: the directory, the file named
    /// `slurm_bcast_<job>.<step>_<node>` in it (as Slurm's).
    pub dest: String,
    /// Shared by every node's launch (one copy in srun, however many
    /// nodes).
    pub data: std::sync::Arc<[u8]>,
    /// Permission bits and modification time kept from the original.
    pub mode: u32,
    pub mtime: i64,
}

impl Bcast {
    /// The file it is written to on node `node` for step `job.step`.
    pub fn path_on(&self, job: JobId, step: u32, node: &str) -> String {
        if self.dest.ends_with('/') {
            format!("{}slurm_bcast_{job}.{step}_{node}", self.dest)
        } else {
            self.dest.clone()
        }
    }
}

/// Why a running job is ended by the controller: the batch script's error
/// file is told, as Slurm's `slurmstepd` tells it
/// (`*** JOB 5 ON n1 CANCELLED AT ... DUE TO TIME LIMIT ***`).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub enum TermCause {
    /// Nothing to say (its script already ended, or an old controller).
    #[default]
    None,
    /// Cancelled (`scancel`, a failed dependency, ...): its SIGTERM.
    Cancelled,
    TimeLimit,
    Preempted,
    NodeFailure,
    Requeued,
}

impl TermCause {
    pub fn code(self) -> u32 {
        match self {
            TermCause::None => 0,
            TermCause::Cancelled => 1,
            TermCause::TimeLimit => 2,
            TermCause::Preempted => 3,
            TermCause::NodeFailure => 4,
            TermCause::Requeued => 5,
        }
    }

    /// An unknown code (a newer controller's) says nothing.
    pub fn from_code(c: u32) -> TermCause {
        match c {
            1 => TermCause::Cancelled,
            2 => TermCause::TimeLimit,
            3 => TermCause::Preempted,
            4 => TermCause::NodeFailure,
            5 => TermCause::Requeued,
            _ => TermCause::None,
        }
    }

    /// The line the job's error file (`entity`: `JOB 5`) or a step's srun
    /// (`STEP 5.0`) gets when it is ended on `node` at `when` (Slurm's time
    /// format), if any.
    pub fn notice(self, entity: &str, node: &str, when: &str) -> Option<String> {
        let why = match self {
            TermCause::None => return None,
            TermCause::Cancelled => " DUE to SIGNAL Terminated",
            TermCause::TimeLimit => " DUE TO TIME LIMIT",
            TermCause::Preempted => " DUE TO PREEMPTION",
            TermCause::NodeFailure => " DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS",
            TermCause::Requeued => " DUE TO JOB REQUEUE",
        };
        Some(format!(
            "slurmstepd: error: *** {entity} ON {node} CANCELLED AT {when}{why} ***"
        ))
    }
}

#[cfg(test)]
mod term_cause_tests {
    use super::TermCause;

    #[test]
    fn causes_cross_the_wire_and_read_as_slurm_writes_them() {
        for c in [
            TermCause::None,
            TermCause::Cancelled,
            TermCause::TimeLimit,
            TermCause::Preempted,
            TermCause::NodeFailure,
            TermCause::Requeued,
        ] {
            assert_eq!(TermCause::from_code(c.code()), c);
        }
        assert_eq!(TermCause::from_code(99), TermCause::None);
        assert_eq!(TermCause::None.notice("JOB 5", "n1", "t"), None);
        assert_eq!(
            TermCause::TimeLimit
                .notice("JOB 5", "n1", "2026-11-28T15:00:00")
                .unwrap(),
            "slurmstepd: error: *** JOB 5 ON n1 CANCELLED AT 2026-11-28T15:00:00 DUE TO TIME LIMIT ***"
        );
    }
}

/// A job array task's place in its array.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ArrayInfo {
    /// The array's id (`%A`): the id of its first task.
    pub job_id: JobId,
    /// This task's index (`%a`).
    pub task_id: u32,
    pub task_count: u32,
    pub task_min: u32,
    pub task_max: u32,
    /// The step when the indices were given as one stepped range.
    pub task_step: Option<u32>,
    /// `%N`: tasks allowed to run at once.
    pub max_running: Option<u32>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum HoldKind {
    User,
    Admin,
}

impl JobRecord {
    /// The run the job has now, by the start time it was launched with
    /// (`None` for a pending job: its last run, if any, is over; and for a
    /// job that ended without one, e.g. cancelled while pending). A
    /// record saved before `run_start` was kept names a running job's run
    /// by its start time.
    pub fn run(&self) -> Option<i64> {
        if self.state == JobState::Pending {
            return None;
        }
        self.run_start
            .or(self.start_time.filter(|_| self.state.is_active()))
    }

    /// Set why it waits (or `None`), keeping the last notable reason for
    /// accounting (sacct's `Reason`); true when that one changed (worth
    /// saving: the pending reason itself is the scheduler's note, written
    /// again by every pass).
    pub fn set_reason(&mut self, reason: JobReason) -> bool {
        let noted = reason.is_notable() && reason != self.reason_prev;
        if noted {
            self.reason_prev = reason.clone();
        }
        self.reason = reason;
        noted
    }

    /// What an output-file pattern may name about it.
    pub fn pattern_job(&self) -> stdpath::PatternJob<'_> {
        stdpath::PatternJob {
            job_id: self.job_id,
            array: self.array.as_ref().map(|a| (a.job_id, a.task_id)),
            name: &self.name,
            user: &self.user_name,
            node: self.batch_host.as_deref(),
            work_dir: &self.desc.work_dir,
        }
    }

    /// `StdOut`, `StdErr`, `StdIn` as the job keeps them (see
    /// [`stdpath::patterns`]).
    pub fn std_patterns(&self) -> (String, String, String) {
        let d = &self.desc;
        stdpath::patterns(
            d.std_out.as_deref(),
            d.std_err.as_deref(),
            d.std_in.as_deref(),
            self.array.is_some(),
        )
    }

    /// The id users see: `123_7` for array tasks, `123` otherwise.
    pub fn display_id(&self) -> String {
        match &self.array {
            Some(a) => format!("{}_{}", a.job_id, a.task_id),
            None => self.job_id.to_string(),
        }
    }

    /// Close the current suspension (if any) at `now`: its time joins
    /// `suspended_secs`.
    pub fn end_suspension(&mut self, now: i64) {
        if self.state == JobState::Suspended {
            let since = self.suspend_time.unwrap_or(now);
            self.suspended_secs += (now - since).max(0);
            self.suspend_time = Some(now);
        }
    }

    /// Seconds it had run when last suspended (`SecsPreSuspend`); 0 if
    /// never suspended.
    pub fn secs_pre_suspend(&self) -> i64 {
        self.suspend_time
            .zip(self.start_time)
            .map_or(0, |(t, s)| (t - s - self.suspended_secs).max(0))
    }

    /// Forget every suspension (a job going back to the queue).
    pub fn clear_suspension(&mut self) {
        self.suspend_time = None;
        self.suspended_secs = 0;
        self.preempt_suspended = false;
        self.gang_suspended = false;
    }

    /// Seconds the job has run by `now`, suspended time left out.
    pub fn run_secs(&self, now: i64) -> i64 {
        let Some(start) = self.start_time else {
            return 0;
        };
        let until = if self.state == JobState::Suspended {
            self.suspend_time.unwrap_or(now)
        } else if self.state.is_finished() || self.completing {
            self.end_time.unwrap_or(now)
        } else {
            now
        };
        (until - start - self.suspended_secs).max(0)
    }

    /// Exit code and signal, as `ExitCode=N:S` shows them.
    pub fn exit_code_pair(&self) -> (i32, i32) {
        wait_status_pair(self.exit_status)
    }
}

/// Split a raw wait status into (exit code, signal).
pub fn wait_status_pair(status: i32) -> (i32, i32) {
    let sig = status & 0x7f;
    if sig != 0 {
        (0, sig)
    } else {
        ((status >> 8) & 0xff, 0)
    }
}

/// A node's base state; drain, not-responding and completing are flags.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub enum NodeBaseState {
    #[default]
    Unknown,
    Idle,
    Allocated,
    Mixed,
    Down,
    Future,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct NodeFlags {
    pub drain: bool,
    pub not_responding: bool,
    pub completing: bool,
    /// In an active advance reservation.
    #[serde(default)]
    pub reserved: bool,
    /// In an active maintenance reservation.
    #[serde(default)]
    pub maint: bool,
    /// `scontrol reboot` asked for it; not yet sent to the node.
    #[serde(default)]
    pub reboot_requested: bool,
    /// Reboot sent; the node is down until it registers again with a new
    /// boot time (or `ResumeTimeout` passes).
    #[serde(default)]
    pub reboot_issued: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeRecord {
    pub name: String,
    pub addr: String,
    pub hostname: String,
    pub port: u16,
    pub cpus: u32,
    pub boards: u32,
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
    /// MiB.
    pub real_memory: u64,
    pub tmp_disk: u64,
    pub weight: u32,
    pub features: Vec<String>,
    pub gres: Vec<String>,
    pub base_state: NodeBaseState,
    pub flags: NodeFlags,
    pub reason: Option<String>,
    pub reason_time: Option<i64>,
    pub reason_uid: Option<u32>,
    pub alloc_cpus: u32,
    pub alloc_mem: u64,
    pub partitions: Vec<String>,
    pub boot_time: Option<i64>,
    pub slurmd_start_time: Option<i64>,
    pub last_busy: Option<i64>,
    pub last_heard: Option<i64>,
    pub version: Option<String>,
    pub os: Option<String>,
    pub arch: Option<String>,
    pub cpu_load: Option<f64>,
    pub free_mem: Option<u64>,
    /// No node daemon: a Kubernetes (or other external) node that only takes
    /// external jobs.
    #[serde(default)]
    pub external: bool,
    /// Its daemon runs beside a kubelet: it takes pods' placeholder jobs
    /// (external jobs) as well as batch jobs.
    #[serde(default)]
    pub kubelet: bool,
}

impl NodeRecord {
    /// Long state name as `scontrol show node` prints it, e.g. `IDLE`,
    /// `IDLE+DRAIN`, `DOWN+NOT_RESPONDING`, `ALLOCATED+COMPLETING`.
    pub fn state_long(&self) -> String {
        let mut s = match self.base_state {
            NodeBaseState::Unknown => "UNKNOWN",
            NodeBaseState::Idle => "IDLE",
            NodeBaseState::Allocated => "ALLOCATED",
            NodeBaseState::Mixed => "MIXED",
            NodeBaseState::Down => "DOWN",
            NodeBaseState::Future => "FUTURE",
        }
        .to_string();
        if self.flags.completing {
            s.push_str("+COMPLETING");
        }
        if self.flags.drain {
            s.push_str("+DRAIN");
        }
        if self.flags.maint {
            s.push_str("+MAINTENANCE");
        }
        if self.flags.reserved {
            s.push_str("+RESERVED");
        }
        if self.flags.reboot_requested {
            s.push_str("+REBOOT_REQUESTED");
        }
        if self.flags.reboot_issued {
            s.push_str("+REBOOT_ISSUED");
        }
        if self.external {
            s.push_str("+EXTERNAL");
        }
        if self.flags.not_responding {
            s.push_str("+NOT_RESPONDING");
        }
        s
    }

    /// Compact state as `sinfo` prints it (`idle`, `alloc`, `mix`, `down*`,
    /// `drain`, `drng`, `comp`, `unk*`, ...).
    pub fn state_short(&self) -> String {
        let busy = matches!(
            self.base_state,
            NodeBaseState::Allocated | NodeBaseState::Mixed
        ) || self.flags.completing;
        let rebooting = self.flags.reboot_requested || self.flags.reboot_issued;
        // As Slurm: `boot` (requested), `boot^` (issued) while no job runs
        // there; a draining or drained node marks it `@` or `^`.
        if rebooting && !busy {
            return match (self.flags.reboot_issued, self.flags.not_responding) {
                (true, _) => "boot^",
                (false, true) => "boot*",
                (false, false) => "boot",
            }
            .to_string();
        }
        let mut s = if self.flags.drain {
            let word = if busy { "drng" } else { "drain" };
            if self.flags.reboot_issued {
                return format!("{word}^");
            }
            if self.flags.reboot_requested {
                return format!("{word}@");
            }
            word
        } else if self.flags.completing {
            "comp"
        } else if self.flags.maint {
            "maint"
        } else if self.flags.reserved && self.base_state == NodeBaseState::Idle {
            "resv"
        } else {
            match self.base_state {
                NodeBaseState::Unknown => "unk",
                NodeBaseState::Idle => "idle",
                NodeBaseState::Allocated => "alloc",
                NodeBaseState::Mixed => "mix",
                NodeBaseState::Down => "down",
                NodeBaseState::Future => "futr",
            }
        }
        .to_string();
        if self.flags.not_responding {
            s.push('*');
        }
        s
    }

    /// Usable for new work: up, responding and not draining.
    pub fn is_available(&self) -> bool {
        !self.flags.drain
            && !self.flags.not_responding
            && !self.flags.reboot_issued
            && matches!(
                self.base_state,
                NodeBaseState::Idle | NodeBaseState::Mixed | NodeBaseState::Allocated
            )
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum PartitionState {
    Up,
    Down,
    Drain,
    Inactive,
}

impl PartitionState {
    pub fn name(self) -> &'static str {
        match self {
            PartitionState::Up => "UP",
            PartitionState::Down => "DOWN",
            PartitionState::Drain => "DRAIN",
            PartitionState::Inactive => "INACTIVE",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PartitionRecord {
    pub name: String,
    /// The node expression as configured (`n[1-3]`).
    pub nodes_expr: String,
    pub nodes: Vec<String>,
    pub default: bool,
    pub max_time: Option<u32>,
    pub default_time: Option<u32>,
    pub state: PartitionState,
    pub priority_job_factor: u32,
    pub priority_tier: u32,
    /// `NO`, `EXCLUSIVE`, `YES`, `FORCE`, with `:N` where given.
    pub oversubscribe: String,
    pub max_nodes: Option<u32>,
    pub min_nodes: u32,
    pub hidden: bool,
    pub allow_groups: Option<String>,
    pub allow_accounts: Option<String>,
    pub allow_qos: Option<String>,
    pub def_mem_per_cpu: Option<u64>,
    pub max_mem_per_node: Option<u64>,
    pub total_cpus: u32,
    pub total_mem: u64,
}

/// Slurm's error codes, with its messages (what `slurm_strerror` prints).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum SlurmError {
    InvalidJobId,
    AccessDenied,
    InvalidPartitionName,
    DefaultPartitionNotSet,
    RequestedNodeConfigUnavailable,
    InvalidNodeName,
    InvalidTimeLimit,
    JobPending,
    AlreadyDone,
    TransitionStateNoUpdate,
    InvalidNodeState,
    NodesBusy,
    PartitionDown,
    /// Submission to a partition in DRAIN or INACTIVE state.
    PartitionNotAvail,
    TooManyRequestedCpus,
    TooManyRequestedNodes,
    InvalidCredential,
    ExpiredCredential,
    InvalidRequest,
    ReachedMaxJobCount,
    JobNotPending,
    Disabled,
    ProtocolError,
    InternalError,
    Dependency,
    InvalidArray,
    InvalidAccount,
    InvalidQos,
    ReservationInvalid,
    ReservationBusy,
    ReservationAccess,
    AccountingPolicy,
    PrologFailed,
    InvalidGres,
    /// A step's memory more than its job has (or has free) on a node.
    InvalidTaskMemory,
    InvalidFeature,
    InvalidLicenses,
    NeedRestart,
    /// Per-user RPC rate limit (`rl_enable`): wait and send again.
    Backoff,
    /// A backup controller that is not in control: ask the next one.
    InStandby,
    /// A request about another user's job that only its owner (or root)
    /// may make (`scontrol notify`).
    UserIdMissing,
    /// A task count that cannot be (fewer tasks than nodes).
    BadTaskCount,
    /// Suspending a job that is not running.
    JobNotRunning,
    /// Resuming a job that is not suspended.
    JobNotSuspended,
}

impl SlurmError {
    /// Slurm's numeric error code.
    pub fn code(self) -> i32 {
        match self {
            SlurmError::InvalidJobId => 2017,
            SlurmError::AccessDenied => 2002,
            SlurmError::InvalidPartitionName => 2000,
            SlurmError::DefaultPartitionNotSet => 2001,
            SlurmError::RequestedNodeConfigUnavailable => 2014,
            SlurmError::InvalidNodeName => 2018,
            SlurmError::InvalidTimeLimit => 2051,
            SlurmError::JobPending => 2024,
            SlurmError::AlreadyDone => 2021,
            SlurmError::TransitionStateNoUpdate => 2020,
            SlurmError::InvalidNodeState => 2028,
            SlurmError::NodesBusy => 2016,
            SlurmError::PartitionDown => 2101,
            SlurmError::PartitionNotAvail => 2070,
            SlurmError::TooManyRequestedCpus => 2005,
            SlurmError::TooManyRequestedNodes => 2006,
            SlurmError::InvalidCredential => 6000,
            SlurmError::ExpiredCredential => 6001,
            SlurmError::InvalidRequest => 2072,
            SlurmError::ReachedMaxJobCount => 2050,
            SlurmError::JobNotPending => 2073,
            SlurmError::Disabled => 2037,
            SlurmError::ProtocolError => 1003,
            SlurmError::InternalError => 2090,
            SlurmError::Dependency => 2038,
            SlurmError::InvalidArray => 2081,
            SlurmError::InvalidAccount => 2045,
            SlurmError::InvalidQos => 2066,
            SlurmError::AccountingPolicy => 2050,
            SlurmError::PrologFailed => 4022,
            SlurmError::InvalidGres => 2072,
            SlurmError::InvalidTaskMemory => 2044,
            SlurmError::InvalidFeature => 2029,
            SlurmError::InvalidLicenses => 2048,
            SlurmError::NeedRestart => 2049,
            SlurmError::Backoff => 1804,
            SlurmError::InStandby => 2027,
            SlurmError::UserIdMissing => 2010,
            SlurmError::BadTaskCount => 2025,
            SlurmError::JobNotRunning => 2085,
            SlurmError::JobNotSuspended => 2087,
            SlurmError::ReservationInvalid => 2053,
            SlurmError::ReservationBusy => 2016,
            SlurmError::ReservationAccess => 2052,
        }
    }
    pub fn message(self) -> &'static str {
        match self {
            SlurmError::InvalidJobId => "Invalid job id specified",
            SlurmError::AccessDenied => "Access/permission denied",
            SlurmError::InvalidPartitionName => "Invalid partition name specified",
            SlurmError::DefaultPartitionNotSet => {
                "No partition specified or system default partition"
            }
            SlurmError::RequestedNodeConfigUnavailable => {
                "Requested node configuration is not available"
            }
            SlurmError::InvalidNodeName => "Invalid node name specified",
            SlurmError::InvalidTimeLimit => {
                "Requested time limit is invalid (missing or exceeds some limit)"
            }
            SlurmError::JobPending => "Job is pending execution",
            SlurmError::AlreadyDone => "Job/step already completing or completed",
            SlurmError::TransitionStateNoUpdate => "Job can not be altered now, try again later",
            SlurmError::InvalidNodeState => "Invalid node state specified",
            SlurmError::NodesBusy => "Requested nodes are busy",
            SlurmError::PartitionDown => "Partition in DOWN state",
            SlurmError::PartitionNotAvail => "Required partition not available (inactive or drain)",
            SlurmError::TooManyRequestedCpus => "More processors requested than permitted",
            SlurmError::TooManyRequestedNodes => "Node count specification invalid",
            SlurmError::InvalidCredential => "Invalid authentication credential",
            SlurmError::ExpiredCredential => "Authentication credential expired",
            SlurmError::InvalidRequest => "Invalid request",
            SlurmError::ReachedMaxJobCount => "Job count exceeds limit (MaxJobCount)",
            SlurmError::JobNotPending => "Job is no longer pending execution",
            SlurmError::Disabled => "Requested operation is presently disabled",
            SlurmError::ProtocolError => "Protocol error",
            SlurmError::InternalError => "Slurm internal error, contact system administrator",
            SlurmError::Dependency => "Job dependency problem",
            SlurmError::InvalidArray => "Invalid job array specification",
            SlurmError::InvalidAccount => {
                "Invalid account or account/partition combination specified"
            }
            SlurmError::InvalidQos => "Invalid qos specification",
            SlurmError::PrologFailed => "Job prolog failed",
            SlurmError::InvalidGres => "Invalid generic resource (gres) specification",
            SlurmError::InvalidTaskMemory => "Memory required by task is not available",
            SlurmError::InvalidFeature => "Invalid feature specification",
            SlurmError::InvalidLicenses => "Invalid license specification",
            SlurmError::NeedRestart => "The node configuration changes that were made require restart of the slurmctld daemon to take effect",
            SlurmError::Backoff => "Rate limit exceeded, please retry momentarily",
            SlurmError::InStandby => "Slurm backup controller in standby mode",
            SlurmError::UserIdMissing => "Invalid user id",
            SlurmError::BadTaskCount => "Task count specification invalid",
            SlurmError::JobNotRunning => "Job is not running",
            SlurmError::JobNotSuspended => "Job is not suspended",
            SlurmError::AccountingPolicy => {
                "Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"
            }
            SlurmError::ReservationInvalid => "Requested reservation is invalid",
            SlurmError::ReservationBusy => "Requested nodes are busy",
            SlurmError::ReservationAccess => "Access denied to requested reservation",
        }
    }
}

impl fmt::Display for SlurmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

/// An error answer: a Slurm code plus optional detail for logs and `-v`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RpcError {
    pub error: SlurmError,
    pub detail: Option<String>,
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.detail {
            Some(d) => write!(f, "{}: {}", self.error, d),
            None => write!(f, "{}", self.error),
        }
    }
}

impl From<SlurmError> for RpcError {
    fn from(error: SlurmError) -> Self {
        RpcError {
            error,
            detail: None,
        }
    }
}

/// Changes to a pending or running job (`scontrol hold|release|requeue|update job`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum JobUpdate {
    Hold,
    Release,
    Requeue,
    /// New time limit in minutes (`None` = UNLIMITED).
    TimeLimit(Option<u32>),
    Nice(i32),
    Name(String),
    Comment(String),
    /// Administrators only.
    AdminComment(String),
    /// Pending jobs only.
    Partition(String),
    Account(String),
    Qos(String),
}

/// Which jobs a cancel request names (`scancel`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CancelFilter {
    /// Explicit ids; empty = every job passing the other filters.
    pub job_ids: Vec<JobId>,
    pub user: Option<u32>,
    pub states: Vec<JobState>,
    pub name: Option<String>,
    pub partition: Option<String>,
    /// Signal number; `None` = cancel (terminate) the job.
    pub signal: Option<i32>,
    /// `scancel --admin-comment`: set as each job's AdminComment (super
    /// users only, as Slurm's).
    #[serde(default)]
    pub admin_comment: Option<String>,
}

/// `scontrol reboot [ASAP] [FORCE] [nextstate=RESUME|DOWN] [reason=...]
/// ALL|NODES` and, with `cancel`, `scontrol cancel_reboot NODES`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RebootNodes {
    /// Empty: every node.
    pub names: Vec<String>,
    pub asap: bool,
    pub force: bool,
    /// `Resume` or `Down` only.
    pub next_state: Option<NodeStateRequest>,
    pub reason: Option<String>,
    pub cancel: bool,
}

/// Node state changes an admin may request (`scontrol update nodename=...`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum NodeStateRequest {
    Drain,
    Resume,
    Down,
    Undrain,
    Idle,
}

/// What a node daemon has, sent when it (re-)registers.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeRegistration {
    pub name: String,
    pub cpus: u32,
    pub boards: u32,
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
    pub real_memory: u64,
    pub tmp_disk: u64,
    pub boot_time: i64,
    pub slurmd_start_time: i64,
    pub version: String,
    pub os: String,
    pub arch: String,
    pub cpu_load: f64,
    pub free_mem: u64,
    /// Jobs the daemon still runs (re-adopted after a controller restart).
    pub running_jobs: Vec<JobId>,
    /// A kubelet runs on the node too (`slurmd --kubelet`): it takes pods'
    /// placeholder jobs beside batch jobs.
    #[serde(default)]
    pub kubelet: bool,
}

/// What the controller asks the batch host to run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct BatchLaunch {
    pub job_id: JobId,
    pub job_name: String,
    pub uid: u32,
    pub gid: u32,
    pub user_name: String,
    pub account: String,
    pub qos: String,
    pub partition: String,
    pub cluster_name: String,
    pub alloc: Allocation,
    pub num_tasks: u32,
    pub cpus_per_task: u32,
    pub ntasks_per_node: Option<u32>,
    pub mem_per_node: Option<u64>,
    pub mem_per_cpu: Option<u64>,
    /// Minutes; `None` = unlimited.
    pub time_limit: Option<u32>,
    pub work_dir: String,
    pub std_out: Option<String>,
    pub std_err: Option<String>,
    pub std_in: Option<String>,
    pub script: String,
    pub argv: Vec<String>,
    pub environment: Vec<String>,
    pub submit_host: String,
    pub ctld_host: String,
    pub ctld_port: u16,
    /// When the controller started the job (Unix seconds).
    #[serde(default)]
    pub start_time: i64,
    /// Output files are appended to (`--open-mode=append`).
    #[serde(default)]
    pub append_output: bool,
}

/// A pending job's priority and its weighted factors (`sprio`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct JobPriority {
    pub job_id: JobId,
    pub partition: String,
    pub user: String,
    pub priority: u32,
    pub site: i64,
    pub age: f64,
    pub assoc: f64,
    pub fairshare: f64,
    pub job_size: f64,
    pub partition_factor: f64,
    pub qos: f64,
    pub nice: i64,
    /// `cpu=1.2,mem=3.0`.
    pub tres: String,
    /// The job's account and QOS (sprio's `%o`, `%n`).
    #[serde(default)]
    pub account: String,
    #[serde(default)]
    pub qos_name: String,
}

/// One association's fair share (`sshare`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ShareInfo {
    pub account: String,
    pub user: Option<String>,
    pub depth: u32,
    pub raw_shares: String,
    pub norm_shares: f64,
    pub raw_usage: f64,
    pub effective_usage: f64,
    /// `None` where sshare leaves the column empty.
    pub fairshare: Option<f64>,
    /// `None` when unset; `f64::MAX` stands for infinity (JSON has none).
    pub level_fs: Option<f64>,
    /// A user's association's partition (`sshare -m`), when it has one.
    #[serde(default)]
    pub partition: Option<String>,
    /// Its raw usage over the whole tree's (`NormUsage`).
    #[serde(default)]
    pub norm_usage: f64,
    /// slurmdbd's association id (`ID`); `None` without accounting.
    #[serde(default)]
    pub assoc_id: Option<u64>,
    /// The TRES `tres_grp_mins` and `tres_run_secs` are indexed by
    /// (`cpu`, `mem`, `energy`, `node`, `billing`, `fs/disk`, `vmem`,
    /// `pages`, then `AccountingStorageTRES`'s others).
    #[serde(default)]
    pub tres_names: Vec<String>,
    /// `GrpTRESMins` per TRES; `u64::MAX` is no limit.
    #[serde(default)]
    pub tres_grp_mins: Vec<u64>,
    /// TRES-seconds left in its running jobs' time limits, its
    /// children's included (`TRESRunMins`, in seconds).
    #[serde(default)]
    pub tres_run_secs: Vec<u64>,
}

/// Scheduler and controller counters, as `sdiag` prints them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DiagStats {
    /// When the controller started (the counters' origin).
    pub since: i64,
    pub now: i64,
    pub jobs_submitted: u64,
    pub jobs_started: u64,
    pub jobs_completed: u64,
    pub jobs_canceled: u64,
    pub jobs_failed: u64,
    pub jobs_pending: u64,
    pub jobs_running: u64,
    /// Main scheduler: passes, last/max/total cycle time (µs), jobs looked at.
    pub main_cycles: u64,
    pub main_last_us: u64,
    pub main_max_us: u64,
    pub main_total_us: u64,
    pub main_total_depth: u64,
    pub main_last_queue: u64,
    /// Backfill passes (when the policy plans ahead).
    pub bf_cycles: u64,
    pub bf_last_us: u64,
    pub bf_max_us: u64,
    pub bf_total_us: u64,
    pub bf_last_depth: u64,
    pub bf_total_depth: u64,
    pub bf_backfilled_jobs: u64,
    pub bf_last_when: Option<i64>,
    pub bf_last_queue: u64,
    /// RPCs served since the controller started, by Slurm message type.
    #[serde(default)]
    pub rpc_types: Vec<RpcStat>,
    /// The same by user (`id` is the uid).
    #[serde(default)]
    pub rpc_users: Vec<RpcStat>,
    /// When the pending and running counts were taken (the state's time;
    /// `now` is the request's).
    #[serde(default)]
    pub job_states_ts: i64,
    /// Requests being answered now (Slurm's server thread count).
    #[serde(default)]
    pub server_threads: u64,
    /// Messages to node daemons being delivered now (each its own task:
    /// Slurm's agent count and agent thread count), and those of them
    /// waiting to be tried again (Slurm's agent queue, its retry list).
    #[serde(default)]
    pub agent_count: u64,
    #[serde(default)]
    pub agent_retrying: u64,
    /// Accounting records not yet acknowledged by slurmdbd.
    #[serde(default)]
    pub dbd_queue: u64,
    /// The messages being delivered to node daemons, by message type,
    /// with their nodes (a host list).
    #[serde(default)]
    pub pending_rpcs: Vec<PendingRpc>,
    /// Backfill: jobs tried (within `bf_max_job_test`), last pass and
    /// summed; queue lengths summed; the plan's distinct instants (Slurm's
    /// table size), last and summed.
    #[serde(default)]
    pub bf_last_depth_try: u64,
    #[serde(default)]
    pub bf_total_depth_try: u64,
    #[serde(default)]
    pub bf_total_queue: u64,
    #[serde(default)]
    pub bf_table_size: u64,
    #[serde(default)]
    pub bf_total_table_size: u64,
    /// Backfill passes that ended at the end of the queue, and at
    /// `bf_max_job_test` (the others of Slurm's reasons cannot happen here).
    #[serde(default)]
    pub bf_exit_end: u64,
    #[serde(default)]
    pub bf_exit_max_job_test: u64,
    /// Microseconds 1000 reads of the clock took (when asked).
    #[serde(default)]
    pub gettimeofday_latency: u64,
}

/// Slurm's name and number of a batch job's launch message.
pub const BATCH_JOB_LAUNCH: (&str, u32) = ("REQUEST_BATCH_JOB_LAUNCH", 4005);

/// Messages of one type on their way to node daemons (`sdiag`'s pending
/// RPCs).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PendingRpc {
    pub name: String,
    pub id: u32,
    pub count: u64,
    pub hosts: String,
}

/// How many requests of one kind (a message type, or a user's) the
/// controller answered, and the microseconds they took in all.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct RpcStat {
    pub name: String,
    pub id: u32,
    pub count: u64,
    pub total_us: u64,
}

/// Controller configuration as `scontrol show config` prints it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ConfigDump {
    pub entries: Vec<(String, String)>,
    pub boot_time: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum RequestBody {
    // ---- clients → controller
    Ping,
    SubmitBatchJob(JobDesc),
    /// `sbatch --test-only`: where and when the job would start.
    TestJob(JobDesc),
    GetJobs,
    /// The jobs matching a filter (answered with `Jobs`).
    GetJobsMatching(JobFilter),
    /// As `GetJobs` (no filter) or `GetJobsMatching`, for a caller that
    /// shows nothing of each job's request: the jobs come back with `desc`
    /// at its default (decoding it is most of a listing's cost).
    GetJobsBrief(Option<JobFilter>),
    GetNodes,
    GetPartitions,
    GetConfig,
    GetDiag,
    /// `sdiag -r`: the counters start again from zero (operators).
    ResetDiag,
    GetReservations,
    /// slurmdbd: associations, users or QOS changed; fetch them again.
    AcctChanged,
    /// `scontrol show licenses`, REST `licenses/`.
    GetLicenses,
    /// `scontrol show topoconf`: the topology configuration the controller
    /// read (topology.yaml, else topology.conf; empty when none).
    GetTopoConfig,
    /// `scontrol write batch_script JOBID`: the job's script.
    GetJobScript {
        job_id: JobId,
    },
    /// `scontrol show topology`.
    GetTopology,
    /// `scontrol reconfigure`: read slurm.conf again.
    Reconfigure,
    /// `scontrol takeover`: a backup controller takes control now.
    Takeover,
    /// A controller asks the one in control to give it up.
    RelinquishControl,
    /// What changed in the job list since the caller's copy at (`epoch`,
    /// `since`): `JobsDelta`, or `JobsUnchanged`. A copy from another
    /// controller run (other epoch) or version 0 gets every job.
    GetJobsDelta {
        epoch: u64,
        since: u64,
    },
    /// `scontrol token`: a JWT for the caller (or, for root and SlurmUser,
    /// for `username`), valid `lifespan` seconds.
    GetToken {
        username: Option<String>,
        lifespan: Option<i64>,
    },
    GetPriorities,
    GetShares,
    CreateReservation(ReservationSpec),
    UpdateReservation(ReservationSpec),
    DeleteReservation {
        name: String,
    },
    /// `scontrol update PartitionName=...`: an operator's change that
    /// outlives restarts (until `scontrol reconfigure` reads slurm.conf).
    UpdatePartition(PartitionUpdate),
    /// `scontrol create PartitionName=... Nodes=...`: a partition at run
    /// time (kept over restarts and reconfigures until deleted).
    CreatePartition(PartitionUpdate),
    /// `scontrol delete PartitionName=...`.
    DeletePartition {
        name: String,
    },
    /// `scontrol create NodeName=... State=External ...`: a node at run time.
    CreateNode(NodeSpec),
    /// `scontrol delete NodeName=...`: remove a node created at run time.
    DeleteNode {
        name: String,
    },
    Cancel(CancelFilter),
    /// `scontrol suspend|resume`: stop a running job (its cores go back to
    /// the scheduler, its memory and GRES stay held) or let it go on.
    SuspendJob {
        job_id: JobId,
        suspend: bool,
    },
    UpdateJob {
        job_id: JobId,
        update: JobUpdate,
    },
    UpdateNode {
        names: Vec<String>,
        state: Option<NodeStateRequest>,
        reason: Option<String>,
        /// `AvailableFeatures=` / REST `features`: replace the node's features.
        #[serde(default)]
        features: Option<Vec<String>>,
    },
    /// `scontrol top JOBS`: these pending jobs (in this order) first among
    /// their owner's jobs of the same partition, account and QOS.
    TopJobs {
        job_ids: Vec<JobId>,
    },
    /// `scontrol notify JOB MESSAGE` (to the controller), and from it to
    /// the nodes: the message goes to the batch script's error file, or to
    /// the sruns of an interactive job's steps.
    NotifyJob {
        job_id: JobId,
        message: String,
    },
    /// `scontrol reboot` and `cancel_reboot` (root and SlurmUser).
    RebootNodes(RebootNodes),
    // ---- node daemon → controller
    RegisterNode(NodeRegistration),
    Heartbeat {
        node: String,
        running_jobs: Vec<JobId>,
    },
    /// The batch script ended (raw wait status) on `node`.
    BatchComplete {
        job_id: JobId,
        node: String,
        status: i32,
        /// The kernel killed processes of the job for lack of memory.
        #[serde(default)]
        oom: bool,
        /// What the batch step used, from its cgroup (jobacct_gather).
        #[serde(default)]
        usage: Option<TaskUsage>,
        /// The run the script belonged to (its launch's start time): a
        /// late report of an earlier run of a requeued job is not taken
        /// for the end of the run now on the node.
        #[serde(default)]
        job_start: Option<i64>,
    },
    /// Every process of the job is gone on `node`.
    JobCleaned {
        job_id: JobId,
        node: String,
        /// The run that was cleaned up, where the node knows it.
        #[serde(default)]
        job_start: Option<i64>,
    },
    /// Several job events of `node` at once, in order (each one of
    /// `BatchComplete`, `JobCleaned`, `EpilogFailed`, `PrologFailed`,
    /// `StepUsage`, naming `node`): the controller answers each.
    NodeReports {
        node: String,
        reports: Vec<RequestBody>,
    },
    /// The Epilog failed on `node` (drain it with "Epilog error").
    EpilogFailed {
        job_id: JobId,
        node: String,
    },
    /// `PrologFlags=Alloc`: run the Prolog and set the job up on this node
    /// now, before any step comes.
    JobPrologue(Box<JobPrologue>),
    /// The Prolog failed on `node` before a step could start there.
    PrologFailed {
        job_id: JobId,
        node: String,
    },
    /// A step's tasks on `node` ended, and what they used there (from its
    /// cgroup; none without one).
    StepUsage {
        job_id: JobId,
        step_id: u32,
        node: String,
        #[serde(default)]
        usage: Option<TaskUsage>,
        /// The run the step belongs to (as `StepComplete`'s).
        #[serde(default)]
        job_start: Option<i64>,
    },
    // ---- controller → node daemon
    LaunchBatch(Box<BatchLaunch>),
    SignalJob {
        job_id: JobId,
        signal: i32,
    },
    /// Stop (`suspend`) or continue every process of the job on this node.
    /// `seq` orders one controller run's (`epoch`) requests (the node keeps
    /// the latest; older ones that arrive late are ignored; a new
    /// controller run's supersede the old one's), and the wanted state also
    /// applies to processes the job starts here later.
    SuspendJobHere {
        job_id: JobId,
        suspend: bool,
        #[serde(default)]
        seq: u64,
        #[serde(default)]
        epoch: u64,
        /// The run it is for (the job's start time): requests for an
        /// earlier run of a requeued job never touch a later one.
        #[serde(default)]
        start_time: Option<i64>,
    },
    /// End the job on this node: SIGCONT+SIGTERM, then SIGKILL after `kill_wait` s.
    TerminateJob {
        job_id: JobId,
        kill_wait: u32,
        /// The run being ended (its start time), so a launch of that run
        /// arriving after this request is refused.
        #[serde(default)]
        start_time: Option<i64>,
        /// Why it ends before its script did (said in its error file).
        #[serde(default)]
        cause: TermCause,
    },
    NodePing,
    // ---- steps and interactive allocations
    /// `salloc`/`srun`: an allocation with no batch script.
    AllocateJob(JobDesc),
    /// The holder of an allocation is done with it (raw wait status).
    CompleteJob {
        job_id: JobId,
        status: i32,
    },
    CreateStep(StepRequest),
    StepComplete {
        job_id: JobId,
        step_id: u32,
        status: i32,
        /// The run the step belongs to (its credential's `job_start`):
        /// a report of a requeued job's earlier run is refused.
        #[serde(default)]
        job_start: Option<i64>,
    },
    /// `scancel job.step`: signal (default: kill) one step's tasks.
    CancelStep {
        job_id: JobId,
        step_id: u32,
        signal: Option<i32>,
    },
    /// `srun` → node daemon: signal a step's tasks. With a cause (the
    /// controller ending the step: its time limit), the step's srun is told
    /// why, and the tasks get SIGTERM, then SIGKILL after KillWait.
    SignalTasks {
        job_id: JobId,
        step_id: u32,
        signal: i32,
        cause: TermCause,
        /// The run the step belongs to (its job's start): a node running
        /// another run's step of that number takes nothing (a signal tried
        /// again late after a requeue).
        #[serde(default)]
        job_start: Option<i64>,
    },
    /// `scontrol update StepId=J[.S] TimeLimit=M`: the step's (without a
    /// step, every running step's) time limit in minutes.
    UpdateStep {
        job_id: JobId,
        step_id: Option<u32>,
        time_limit: u32,
    },
    /// `scontrol show slurmd` → node daemon: its own account of itself.
    DaemonStatus,
    /// `scontrol listpids` → node daemon: the processes of its jobs.
    ListPids {
        job_id: Option<JobId>,
        step_id: Option<u32>,
    },
    /// `scontrol shutdown [slurmctld|controller]`: the controller saves
    /// its state and stops, the node daemons too unless `controller_only`
    /// (root and SlurmUser).
    Shutdown {
        controller_only: bool,
    },
    /// Controller → node daemon (`scontrol shutdown`): stop, leaving
    /// running jobs running.
    NodeShutdown,
    /// Controller → node daemon (`scontrol reboot`, the node idle): run
    /// `RebootProgram`.
    NodeReboot,
    /// `scontrol setdebug LEVEL [nodes=...]`: the daemon's log level until
    /// its slurm.conf is read again (root and SlurmUser).
    SetDebug {
        level: String,
    },
    /// `scontrol schedloglevel 0|1`: `SlurmSchedLogFile`'s logging off or
    /// on until slurm.conf is read again (root, SlurmUser, Administrators).
    SetSchedLogLevel {
        level: u32,
    },
    /// `scontrol setdebugflags +NAME -NAME`: the controller's DebugFlags
    /// (bits of `slurm_common::debugflags`) until slurm.conf is read again.
    SetDebugFlags {
        plus: u64,
        minus: u64,
    },
    /// `scontrol fsdampeningfactor N`: the FairShareDampeningFactor in
    /// force until slurm.conf is read again (super users).
    SetFsDampeningFactor {
        factor: u16,
    },
}

/// One process of a job on a node (`scontrol listpids`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobProcess {
    pub pid: i32,
    pub job_id: JobId,
    /// `batch`, or the step's number.
    pub step: String,
    /// A task's own ids; `None` for the processes it started.
    pub local_id: Option<u32>,
    pub global_id: Option<u32>,
}

/// What `scontrol update PartitionName=NAME ...` changes.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PartitionUpdate {
    pub name: String,
    pub state: Option<PartitionState>,
    /// Minutes; `Some(None)` is UNLIMITED.
    pub max_time: Option<Option<u32>>,
    pub default_time: Option<Option<u32>>,
    /// A hostlist (`Nodes=`, at creation).
    pub nodes: Option<String>,
    /// `Default=YES|NO` (at creation).
    pub default: Option<bool>,
}

/// Which states `squeue -t` selects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StateSel {
    State(JobState),
    Completing,
}

/// Which jobs a query wants (squeue's `-j -u -t -p -n -A -q`), applied by
/// the controller so only those are sent. Empty lists select everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobFilter {
    /// Job ids; an array's id selects its tasks too.
    pub job_ids: Vec<u32>,
    /// Names or numeric uids.
    pub users: Vec<String>,
    /// `None` = Slurm's default (pending, running, suspended, completing; all
    /// states when job ids are given); `Some(empty)` = all states.
    pub states: Option<Vec<StateSel>>,
    pub partitions: Vec<String>,
    pub names: Vec<String>,
    pub accounts: Vec<String>,
    pub qos: Vec<String>,
}

impl JobFilter {
    pub fn matches(&self, job: &JobRecord) -> bool {
        if !self.job_ids.is_empty()
            && !self.job_ids.contains(&job.job_id)
            && !job
                .array
                .as_ref()
                .is_some_and(|a| self.job_ids.contains(&a.job_id))
        {
            return false;
        }
        if !self.users.is_empty()
            && !self
                .users
                .iter()
                .any(|u| *u == job.user_name || u.parse::<u32>().ok() == Some(job.user_id))
        {
            return false;
        }
        match &self.states {
            None => {
                if self.job_ids.is_empty() && job.state.is_finished() && !job.completing {
                    return false;
                }
            }
            Some(list) if list.is_empty() => {}
            Some(list) => {
                let ok = list.iter().any(|s| match s {
                    StateSel::Completing => job.completing,
                    StateSel::State(st) => job.state == *st,
                });
                if !ok {
                    return false;
                }
            }
        }
        let listed = |l: &[String], v: &String| l.is_empty() || l.contains(v);
        listed(&self.partitions, &job.partition)
            && listed(&self.names, &job.name)
            && listed(&self.accounts, &job.account)
            && listed(&self.qos, &job.qos)
    }
}

impl RequestBody {
    /// The Slurm message type the controller counts this request under in
    /// `sdiag`: its name and number (0 where Slurm has no such message).
    pub fn message_type(&self) -> (&'static str, u32) {
        match self {
            RequestBody::Ping => ("REQUEST_PING", 1008),
            RequestBody::RegisterNode(_) | RequestBody::Heartbeat { .. } => {
                ("MESSAGE_NODE_REGISTRATION_STATUS", 1002)
            }
            RequestBody::Reconfigure => ("REQUEST_RECONFIGURE", 1003),
            RequestBody::Shutdown { .. } => ("REQUEST_SHUTDOWN", 1005),
            RequestBody::SetDebug { .. } => ("REQUEST_SET_DEBUG_LEVEL", 1010),
            RequestBody::SetDebugFlags { .. } => ("REQUEST_SET_DEBUG_FLAGS", 1014),
            RequestBody::SetSchedLogLevel { .. } => ("REQUEST_SET_SCHEDLOG_LEVEL", 1013),
            RequestBody::SetFsDampeningFactor { .. } => ("REQUEST_SET_FS_DAMPENING_FACTOR", 1023),
            RequestBody::DaemonStatus => ("REQUEST_DAEMON_STATUS", 5024),
            RequestBody::GetLicenses => ("REQUEST_LICENSE_INFO", 1021),
            RequestBody::GetTopoConfig => ("REQUEST_TOPO_CONFIG", 2011),
            RequestBody::GetJobScript { .. } => ("REQUEST_BATCH_SCRIPT", 2051),
            RequestBody::GetConfig => ("REQUEST_BUILD_INFO", 2001),
            RequestBody::GetJobs
            | RequestBody::GetJobsDelta { .. }
            | RequestBody::GetJobsMatching(_)
            | RequestBody::GetJobsBrief(_) => ("REQUEST_JOB_INFO", 2003),
            RequestBody::GetNodes => ("REQUEST_NODE_INFO", 2007),
            RequestBody::GetPartitions => ("REQUEST_PARTITION_INFO", 2009),
            RequestBody::GetShares => ("REQUEST_SHARE_INFO", 2022),
            RequestBody::GetReservations => ("REQUEST_RESERVATION_INFO", 2024),
            RequestBody::GetPriorities => ("REQUEST_PRIORITY_FACTORS", 2026),
            RequestBody::GetTopology => ("REQUEST_TOPO_INFO", 2028),
            RequestBody::GetDiag | RequestBody::ResetDiag => ("REQUEST_STATS_INFO", 2035),
            RequestBody::UpdateJob { .. } => ("REQUEST_UPDATE_JOB", 3001),
            RequestBody::UpdateNode { .. } => ("REQUEST_UPDATE_NODE", 3002),
            RequestBody::RebootNodes(_) => ("REQUEST_REBOOT_NODES", 1015),
            RequestBody::TopJobs { .. } => ("REQUEST_TOP_JOB", 5038),
            RequestBody::NotifyJob { .. } => ("REQUEST_JOB_NOTIFY", 4022),
            RequestBody::UpdateStep { .. } => ("REQUEST_UPDATE_JOB_STEP", 5007),
            RequestBody::UpdatePartition(_) => ("REQUEST_UPDATE_PARTITION", 3005),
            RequestBody::CreatePartition(_) => ("REQUEST_CREATE_PARTITION", 3004),
            RequestBody::DeletePartition { .. } => ("REQUEST_DELETE_PARTITION", 3007),
            RequestBody::CreateReservation(_) => ("REQUEST_CREATE_RESERVATION", 3006),
            RequestBody::DeleteReservation { .. } => ("REQUEST_DELETE_RESERVATION", 3008),
            RequestBody::UpdateReservation(_) => ("REQUEST_UPDATE_RESERVATION", 3009),
            RequestBody::AllocateJob(_) => ("REQUEST_RESOURCE_ALLOCATION", 4001),
            RequestBody::SubmitBatchJob(_) => ("REQUEST_SUBMIT_BATCH_JOB", 4003),
            RequestBody::TestJob(_) => ("REQUEST_JOB_WILL_RUN", 4012),
            RequestBody::CreateStep(_) => ("REQUEST_JOB_STEP_CREATE", 5001),
            RequestBody::CancelStep { .. } => ("REQUEST_CANCEL_JOB_STEP", 5005),
            RequestBody::SuspendJob { .. } => ("REQUEST_SUSPEND", 5014),
            RequestBody::StepComplete { .. } => ("REQUEST_STEP_COMPLETE", 5016),
            RequestBody::CompleteJob { .. } => ("REQUEST_COMPLETE_JOB_ALLOCATION", 5017),
            RequestBody::BatchComplete { .. } => ("REQUEST_COMPLETE_BATCH_SCRIPT", 5018),
            RequestBody::NodeReports { .. } => ("MESSAGE_NODE_REPORTS", 0),
            RequestBody::Cancel(_) => ("REQUEST_KILL_JOB", 5032),
            RequestBody::JobCleaned { .. } | RequestBody::EpilogFailed { .. } => {
                ("MESSAGE_EPILOG_COMPLETE", 6012)
            }
            RequestBody::AcctChanged => ("ACCOUNTING_UPDATE_MSG", 10001),
            RequestBody::RelinquishControl => ("REQUEST_CONTROL", 1009),
            RequestBody::Takeover => ("REQUEST_TAKEOVER", 0),
            RequestBody::GetToken { .. } => ("REQUEST_AUTH_TOKEN", 0),
            RequestBody::CreateNode(_) => ("REQUEST_CREATE_NODE", 0),
            RequestBody::DeleteNode { .. } => ("REQUEST_DELETE_NODE", 0),
            RequestBody::PrologFailed { .. } => ("REQUEST_COMPLETE_PROLOG", 0),
            RequestBody::StepUsage { .. } => ("MESSAGE_STEP_USAGE", 0),
            // What the controller sends node daemons (`sdiag`'s pending
            // RPCs).
            RequestBody::LaunchBatch(_) => BATCH_JOB_LAUNCH,
            RequestBody::TerminateJob { .. } => ("REQUEST_TERMINATE_JOB", 6011),
            RequestBody::SignalTasks { .. } | RequestBody::SignalJob { .. } => {
                ("REQUEST_SIGNAL_TASKS", 6004)
            }
            RequestBody::SuspendJobHere { .. } => ("REQUEST_SUSPEND_INT", 5031),
            RequestBody::NodeReboot => ("REQUEST_REBOOT_NODES", 1015),
            RequestBody::JobPrologue(_) => ("REQUEST_LAUNCH_PROLOG", 6017),
            // Other node daemon and srun requests never reach the controller.
            _ => ("REQUEST_OTHER", 0),
        }
    }
}

impl RequestBody {
    /// The node a node daemon's report speaks for (`None` for any other
    /// request): with TLS on, only that node's certificate may send it.
    pub fn reporting_node(&self) -> Option<&str> {
        match self {
            RequestBody::RegisterNode(r) => Some(&r.name),
            RequestBody::Heartbeat { node, .. }
            | RequestBody::BatchComplete { node, .. }
            | RequestBody::JobCleaned { node, .. }
            | RequestBody::EpilogFailed { node, .. }
            | RequestBody::PrologFailed { node, .. }
            | RequestBody::StepUsage { node, .. }
            | RequestBody::NodeReports { node, .. } => Some(node),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Response {
    Ok,
    /// A JWT (`scontrol token`).
    Token(String),
    /// A batch job's script (`GetJobScript`).
    JobScript(String),
    /// The topology configuration's text (`GetTopoConfig`).
    TopoConfig(String),
    /// The state is still at this version.
    JobsUnchanged {
        version: u64,
    },
    /// Every job id now, in order, and the jobs that changed since the
    /// version asked about (all of them for a new copy).
    JobsDelta {
        epoch: u64,
        version: u64,
        ids: Vec<JobId>,
        changed: Vec<JobRecord>,
        last_update: i64,
    },
    Licenses {
        licenses: Vec<LicenseInfo>,
        last_update: i64,
    },
    Topology(Vec<TopologyEntry>),
    Pong {
        controller: String,
        /// A backup controller waiting to take over.
        standby: bool,
    },
    Submitted {
        job_id: JobId,
    },
    TestResult {
        job_id: JobId,
        start_time: i64,
        cpus: u32,
        nodes: Vec<String>,
        partition: String,
    },
    Jobs {
        jobs: Vec<JobRecord>,
        last_update: i64,
    },
    Nodes {
        nodes: Vec<NodeRecord>,
        last_update: i64,
    },
    Partitions {
        partitions: Vec<PartitionRecord>,
        last_update: i64,
    },
    Config(ConfigDump),
    Diag(Box<DiagStats>),
    Priorities {
        jobs: Vec<JobPriority>,
        /// The weights, `(name, weight)`, in sprio's column order.
        weights: Vec<(String, u32)>,
    },
    Shares(Vec<ShareInfo>),
    Reservations {
        reservations: Vec<ReservationRecord>,
        last_update: i64,
    },
    ReservationCreated {
        name: String,
    },
    /// Per-job outcome of a cancel: (id, error if any).
    Cancelled(Vec<(JobId, Option<SlurmError>)>),
    StepCreated(Box<StepLayout>),
    /// Node daemon's answer to a ping.
    NodePong {
        running_jobs: Vec<JobId>,
    },
    /// Node daemon's processes of jobs (`scontrol listpids`).
    Pids(Vec<JobProcess>),
    /// A node daemon's account of itself (`scontrol show slurmd`).
    SlurmdStatus(Box<SlurmdStatus>),
    Error(RpcError),
}
