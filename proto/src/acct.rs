//! Accounting wire types: what the controller's outbox and the commands
//! (`sacct`, `sacctmgr`, `sreport`, `sshare`) send `slurmdbd`, and its answers.
//!
//! Map:
//! - [`DbdRequest`] = credential + [`AcctRequest`]; the answer is an [`AcctResponse`].
//!   Framing is the same as the controller's (4-byte length + JSON).
//! - Ingestion: [`SeqRecord`] = `(cluster, epoch, seq)` + an [`AcctRecord`] (job
//!   start/end, step start/end, node state, cluster size). `seq` is the outbox's
//!   sequence number, starting at 1 and increasing by one per record; the daemon
//!   applies each `(cluster, epoch, seq)` exactly once, however often it is
//!   resent, and answers [`AcctResponse::Ack`] only once the whole batch is durable.
//! - Administration: clusters, accounts, users, associations and QOS, each with a
//!   record type (`*Rec`), a filter (`*Filter`, empty lists match everything) and
//!   a patch (`*Patch`, fields are [`Set::Keep`] unless changed).
//! - Queries: [`JobQuery`] (sacct's filters) → [`JobRow`]s; [`UsageQuery`] →
//!   [`UsageReport`] from the hourly/daily/monthly rollups.
//!
//! Invariants: data only, no I/O. Times are Unix seconds, wall limits minutes,
//! memory MiB, TRES strings `cpu=4,mem=1024M,node=1` (`-1` as a value in a patch
//! removes that TRES from the limit).

use crate::{Credential, JobId, JobRecord, JobState, StepRecord};
use serde::{Deserialize, Serialize};
use std::fmt;

/// `DbdPort` when slurmdbd.conf does not say.
pub const DEFAULT_DBD_PORT: u16 = 6819;

/// The shares value Slurm calls `Fairshare=parent`: use the parent's.
pub const FAIRSHARE_PARENT: u32 = 0x7FFF_FFFF;

/// One request to slurmdbd.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DbdRequest {
    pub cred: Credential,
    pub body: AcctRequest,
}

// ---------------------------------------------------------------- ingestion

/// One accounting record from a controller's outbox.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SeqRecord {
    pub cluster: String,
    /// Identifies the outbox: a controller whose saved state is wiped starts
    /// a new epoch (e.g. a random number made with the state), so its
    /// sequence may restart at 1 without its records being taken for resends.
    #[serde(default)]
    pub epoch: u64,
    /// Sequence number within `(cluster, epoch)`: 1, 2, 3, ... without gaps.
    pub seq: u64,
    pub record: AcctRecord,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum AcctRecord {
    /// A job was submitted or started: the full record (upserted).
    JobStart(AcctJob),
    /// A job ended: the full record again, with its end state and time.
    JobEnd(AcctJob),
    StepStart(AcctStep),
    StepEnd(AcctStep),
    NodeState(NodeEvent),
    /// The controller (re)started or the cluster changed size.
    ClusterInfo(ClusterInfo),
    /// A reservation made, changed, rolled over or removed.
    Resv(AcctResv),
}

/// A reservation as accounting keeps it: one record for each time it held
/// the same resources, as Slurm's (a reservation changed after it began
/// ends one record and begins the next; a daily or weekly one a record per
/// period). Identified by `(cluster, name, time_start)`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(default)]
pub struct AcctResv {
    pub name: String,
    pub time_start: i64,
    pub time_end: i64,
    /// This record replaces the one that began then (a reservation moved
    /// before it began).
    pub prev_start: Option<i64>,
    /// Its nodes, as a host list.
    pub nodes: String,
    pub node_count: u32,
    /// CPUs reserved (its TRES `cpu=`).
    pub cpus: u32,
    /// Upper-case flag names, comma-separated.
    pub flags: String,
    /// Who may use it: users and accounts, comma-separated.
    pub users: String,
    pub accounts: String,
    /// The reservation was removed before this record began: the record
    /// goes (one that began ends instead, with `time_end`).
    pub removed: bool,
}

/// A job as accounting keeps it. Identified by `(cluster, job_id, submit_time)`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(default)]
pub struct AcctJob {
    pub job_id: JobId,
    /// Set for array tasks: the array's id and this task's index.
    pub array_job_id: Option<JobId>,
    pub array_task_id: Option<u32>,
    pub name: String,
    pub user: String,
    pub uid: u32,
    pub group: String,
    pub gid: u32,
    pub account: String,
    pub partition: String,
    pub qos: String,
    pub state: JobStateWire,
    /// Raw wait status of the batch script (`exit << 8 | signal`).
    pub exit_status: i32,
    pub submit_time: i64,
    pub eligible_time: Option<i64>,
    pub start_time: Option<i64>,
    pub end_time: Option<i64>,
    /// Minutes; `None` = UNLIMITED.
    pub time_limit: Option<u32>,
    pub priority: u32,
    /// Hostlist expression (`n[1-3]`) or a comma list (the daemon compresses it);
    /// empty before the job has nodes.
    pub nodelist: String,
    pub node_count: u32,
    pub alloc_cpus: u32,
    pub req_cpus: u32,
    /// MiB asked for in total.
    pub req_mem: u64,
    pub alloc_tres: String,
    pub req_tres: String,
    pub work_dir: String,
    pub submit_line: String,
    pub comment: String,
    /// `--wckey`: the workload characterization key.
    #[serde(default)]
    pub wckey: String,
    /// `--constraint` as asked (sacct's `Constraints`).
    pub constraints: String,
    /// Which scheduler started it (`SchedMain`...; sacct's `Flags`); empty
    /// before it started.
    pub sched_flag: String,
    /// The last reason it waited for other than priority or resources
    /// (sacct's `Reason`; `None` if none).
    pub reason: String,
    /// `--reservation`.
    pub reservation: String,
    /// How many times it was requeued.
    pub restarts: u32,
    /// `StdOut`, `StdErr`, `StdIn` as the job keeps them (patterns,
    /// Slurm's defaults applied).
    pub std_out: String,
    pub std_err: String,
    pub std_in: String,
    /// The node whose failure ended it.
    pub failed_node: String,
    /// Who cancelled the job (`CANCELLED by UID`).
    pub requid: Option<u32>,
    /// Seconds spent suspended in finished suspensions (not part of the
    /// elapsed time).
    pub suspended_secs: i64,
    /// When the current suspension began (a job suspended now).
    pub suspend_start: Option<i64>,
    /// The batch script: sent with a job's first record when
    /// `AccountingStoreFlags=job_script`, answered only when a query asks
    /// (`sacct -B`), and only to the job's owner, operators and
    /// administrators.
    pub script: Option<String>,
    /// The batch environment (`NAME=value` lines), as `script` with
    /// `job_env` (`sacct --env-vars`).
    pub env: Option<String>,
}

impl AcctJob {
    /// Seconds suspended by `now` (the current suspension included).
    pub fn suspended_by(&self, now: i64) -> i64 {
        let current = match (self.state.0, self.suspend_start) {
            (JobState::Suspended, Some(t)) => (now - t).max(0),
            _ => 0,
        };
        self.suspended_secs + current
    }

    /// Its flags as sacct names them: the scheduler that started it, then
    /// `StartReceived` once accounting has its start (none: empty).
    pub fn flags(&self) -> Vec<&str> {
        let mut v: Vec<&str> = Vec::new();
        if !self.sched_flag.is_empty() {
            v.push(&self.sched_flag);
        }
        if self.start_time.is_some() {
            v.push("StartReceived");
        }
        v
    }

    /// `StdOut`, `StdErr`, `StdIn` as the files' paths (`node`: the first
    /// of its nodes, for `%N`); what was not recorded stays empty.
    pub fn expanded_std(&self, node: Option<&str>) -> [String; 3] {
        [&self.std_out, &self.std_err, &self.std_in].map(|p| {
            if p.is_empty() {
                String::new()
            } else {
                crate::stdpath::expand(p, &self.pattern_job(node))
            }
        })
    }

    /// What its output-file patterns may name (`node`: the node its
    /// script ran on, the first of its nodes).
    pub fn pattern_job<'a>(&'a self, node: Option<&'a str>) -> crate::stdpath::PatternJob<'a> {
        crate::stdpath::PatternJob {
            job_id: self.job_id,
            array: self.array_job_id.zip(self.array_task_id),
            name: &self.name,
            user: &self.user,
            node,
            work_dir: &self.work_dir,
        }
    }
}

/// `JobState` with a default, so records missing it still decode.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(transparent)]
pub struct JobStateWire(pub JobState);

impl Default for JobStateWire {
    fn default() -> Self {
        JobStateWire(JobState::Pending)
    }
}

impl From<JobState> for JobStateWire {
    fn from(s: JobState) -> Self {
        JobStateWire(s)
    }
}

/// A job step. Identified by `(cluster, job_id, job_submit, step_id)`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct AcctStep {
    pub job_id: JobId,
    /// The job's `submit_time` (part of the job's identity).
    pub job_submit: i64,
    /// `crate::BATCH_STEP` for `N.batch`.
    pub step_id: u32,
    pub name: String,
    pub state: JobStateWire,
    pub nodelist: String,
    pub node_count: u32,
    pub ntasks: u32,
    pub alloc_cpus: u32,
    pub start_time: i64,
    pub end_time: Option<i64>,
    /// Raw wait status of the worst task.
    pub exit_status: i32,
    /// User + system CPU time of all tasks, microseconds (TotalCPU).
    pub total_cpu_usec: u64,
    pub user_cpu_usec: u64,
    pub sys_cpu_usec: u64,
    /// Largest resident set of any task, KiB (MaxRSS).
    pub max_rss_kib: u64,
    pub max_rss_node: String,
    pub max_vmsize_kib: u64,
    pub alloc_tres: String,
}

/// A node changed state. A `reason` with a DOWN/DRAIN/FAIL state opens an
/// event (closing the node's previous one); any other state closes it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct NodeEvent {
    pub node: String,
    /// Upper-case long state, as `scontrol show node` prints it (`DOWN+DRAIN`).
    pub state: String,
    pub reason: Option<String>,
    pub reason_uid: Option<u32>,
    pub cpus: u32,
    pub time: i64,
}

impl NodeEvent {
    /// Does this state take the node out of service (an event to record)?
    pub fn is_outage(&self) -> bool {
        let s = self.state.to_ascii_uppercase();
        s.contains("DOWN") || s.contains("DRAIN") || s.contains("FAIL")
    }
}

/// The cluster as the controller sees it at `time`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ClusterInfo {
    pub control_host: String,
    pub control_port: u16,
    pub cpus: u32,
    pub nodes: u32,
    pub tres: String,
    pub time: i64,
}

impl AcctJob {
    /// The accounting view of a controller job record.
    pub fn from_record(r: &JobRecord) -> AcctJob {
        let mem: u64 = r.alloc.mem.iter().sum();
        let cpus = r.alloc.total_cpus();
        let nodes = r.alloc.nodes.len() as u32;
        let alloc_tres = if nodes == 0 {
            String::new()
        } else {
            format!("cpu={cpus},mem={mem}M,node={nodes},billing={cpus}")
        };
        let req_mem = match (r.desc.mem_per_node, r.desc.mem_per_cpu) {
            (Some(m), _) => m * u64::from(r.min_nodes.max(1)),
            (None, Some(m)) => m * u64::from(r.req_cpus),
            _ => 0,
        };
        // Only a batch job writes files of its own.
        let (std_out, std_err, std_in) = if r.batch {
            r.std_patterns()
        } else {
            Default::default()
        };
        // A pending job's times are the planner's guesses, not a start.
        let pending = r.state == JobState::Pending;
        let mut req_tres = format!("cpu={}", r.req_cpus);
        if req_mem > 0 {
            req_tres.push_str(&format!(",mem={req_mem}M"));
        }
        req_tres.push_str(&format!(",node={},billing={}", r.min_nodes, r.req_cpus));
        AcctJob {
            job_id: r.job_id,
            array_job_id: r.array.as_ref().map(|a| a.job_id),
            array_task_id: r.array.as_ref().map(|a| a.task_id),
            name: r.name.clone(),
            user: r.user_name.clone(),
            uid: r.user_id,
            group: r.group_name.clone(),
            gid: r.group_id,
            account: r.account.clone(),
            partition: r.partition.clone(),
            qos: r.qos.clone(),
            state: r.state.into(),
            exit_status: r.exit_status,
            submit_time: r.submit_time,
            eligible_time: r.eligible_time,
            start_time: r.start_time.filter(|_| !pending),
            end_time: r.end_time.filter(|_| !pending),
            time_limit: r.time_limit,
            priority: r.priority,
            nodelist: r.alloc.nodes.join(","),
            node_count: nodes,
            alloc_cpus: cpus,
            req_cpus: r.req_cpus,
            req_mem,
            alloc_tres,
            req_tres,
            work_dir: r.desc.work_dir.clone(),
            submit_line: r.desc.command.clone().unwrap_or_default(),
            comment: r.desc.comment.clone().unwrap_or_default(),
            wckey: r.desc.wckey.clone().unwrap_or_default(),
            constraints: r.desc.constraint.clone().unwrap_or_default(),
            sched_flag: r.sched_flag.map_or("", |f| f.name()).to_string(),
            reason: r.reason_prev.code().to_string(),
            reservation: r.desc.reservation.clone().unwrap_or_default(),
            restarts: r.restarts,
            std_out,
            std_err,
            std_in,
            failed_node: r.failed_node.clone().unwrap_or_default(),
            requid: r.cancelled_by.filter(|_| r.cancelled),
            suspended_secs: r.suspended_secs,
            suspend_start: r.suspend_time.filter(|_| r.state == JobState::Suspended),
            script: None,
            env: None,
        }
    }
}

impl AcctStep {
    /// The accounting view of one step of `job`.
    pub fn from_record(job: &JobRecord, s: &StepRecord) -> AcctStep {
        let cpus = s.alloc_cpus();
        AcctStep {
            job_id: job.job_id,
            job_submit: job.submit_time,
            step_id: s.step_id,
            name: s.name.clone(),
            state: s.state.into(),
            nodelist: s.nodes.join(","),
            node_count: s.nodes.len() as u32,
            ntasks: s.ntasks,
            alloc_cpus: cpus,
            start_time: s.start_time,
            end_time: s.end_time,
            exit_status: s.exit_status,
            alloc_tres: s.tres(&job.alloc),
            total_cpu_usec: s.usage.map_or(0, |u| u.cpu_usec),
            user_cpu_usec: s.usage.map_or(0, |u| u.user_usec),
            sys_cpu_usec: s.usage.map_or(0, |u| u.system_usec),
            max_rss_kib: s.usage.map_or(0, |u| u.max_rss_bytes / 1024),
            max_rss_node: s.usage_node.clone().unwrap_or_default(),
            ..AcctStep::default()
        }
    }
}

// ---------------------------------------------------------- administration

/// A change to one field: leave it, clear it (no limit), or set it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub enum Set<T> {
    #[default]
    Keep,
    Clear,
    To(T),
}

impl<T: Clone> Set<T> {
    pub fn is_keep(&self) -> bool {
        matches!(self, Set::Keep)
    }
    /// Apply to an optional slot.
    pub fn apply(&self, slot: &mut Option<T>) {
        match self {
            Set::Keep => {}
            Set::Clear => *slot = None,
            Set::To(v) => *slot = Some(v.clone()),
        }
    }
}

/// A change to a list (`qos=a,b`, `qos+=c`, `qos-=a`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub enum ListChange {
    #[default]
    Keep,
    Replace(Vec<String>),
    Add(Vec<String>),
    Remove(Vec<String>),
}

impl ListChange {
    pub fn is_keep(&self) -> bool {
        matches!(self, ListChange::Keep)
    }
    pub fn apply(&self, list: &mut Vec<String>) {
        match self {
            ListChange::Keep => {}
            ListChange::Replace(v) => *list = v.clone(),
            ListChange::Add(v) => {
                for x in v {
                    if !list.contains(x) {
                        list.push(x.clone());
                    }
                }
            }
            ListChange::Remove(v) => list.retain(|x| !v.contains(x)),
        }
    }
    /// Every name the change mentions (to check they exist).
    pub fn names(&self) -> &[String] {
        match self {
            ListChange::Keep => &[],
            ListChange::Replace(v) | ListChange::Add(v) | ListChange::Remove(v) => v,
        }
    }
}

/// Defines a limits record (every field optional: `None` = no limit), its
/// patch, and how a patch applies. TRES fields go through `merge_tres`
/// (old value, patch value) so `cpu=-1` can drop one TRES.
macro_rules! limits {
    ($(#[$m:meta])* $name:ident / $patch:ident {
        counts: [$($n:ident),* $(,)?],
        tres: [$($t:ident),* $(,)?] $(,)?
    }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(default)]
        pub struct $name {
            $(pub $n: Option<u64>,)*
            $(pub $t: Option<String>,)*
        }

        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(default)]
        pub struct $patch {
            $(pub $n: Set<u64>,)*
            $(pub $t: Set<String>,)*
        }

        impl $patch {
            pub fn is_empty(&self) -> bool {
                true $(&& self.$n.is_keep())* $(&& self.$t.is_keep())*
            }

            pub fn apply(
                &self,
                l: &mut $name,
                merge_tres: &dyn Fn(Option<&str>, &str) -> Option<String>,
            ) {
                $(self.$n.apply(&mut l.$n);)*
                $(
                    match &self.$t {
                        Set::Keep => {}
                        Set::Clear => l.$t = None,
                        Set::To(v) => l.$t = merge_tres(l.$t.as_deref(), v),
                    }
                )*
            }

            /// Every TRES string the patch sets (to validate).
            pub fn tres_values(&self) -> Vec<&str> {
                let mut v: Vec<&str> = Vec::new();
                $(if let Set::To(s) = &self.$t { v.push(s); })*
                v
            }
        }

        impl $name {
            /// Every TRES string set (to validate).
            pub fn tres_values(&self) -> Vec<&str> {
                let mut v: Vec<&str> = Vec::new();
                $(if let Some(s) = &self.$t { v.push(s); })*
                v
            }
        }
    };
}

limits!(
    /// Association limits (`sacctmgr ... set MaxJobs=...`). `max_wall` and
    /// `grp_wall` are minutes; `grp_tres_mins` is TRES-minutes.
    AssocLimits / AssocLimitsPatch {
        counts: [grp_jobs, grp_submit_jobs, grp_wall, max_jobs, max_submit_jobs, max_wall],
        tres: [grp_tres, grp_tres_mins, max_tres, max_tres_per_user, max_tres_mins],
    }
);

limits!(
    /// QOS limits. `max_wall` (MaxWall per job) and `grp_wall` are minutes.
    QosLimits / QosLimitsPatch {
        counts: [
            grp_jobs,
            grp_submit_jobs,
            grp_wall,
            max_jobs_per_user,
            max_submit_jobs_per_user,
            max_jobs_per_account,
            max_submit_jobs_per_account,
            max_wall,
        ],
        tres: [
            grp_tres,
            grp_tres_mins,
            max_tres_per_user,
            max_tres_per_job,
            max_tres_per_node,
            max_tres_per_account,
            min_tres_per_job,
        ],
    }
);

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ClusterRec {
    pub name: String,
    pub control_host: String,
    pub control_port: u16,
    pub rpc_version: u32,
    pub cpus: u32,
    pub nodes: u32,
    pub tres: String,
    /// Unix seconds.
    pub created: i64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct ClusterFilter {
    pub names: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct AccountRec {
    pub name: String,
    pub description: String,
    pub organization: String,
    /// Users made its coordinators (`sacctmgr add coordinator`), sorted.
    pub coordinators: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct AccountFilter {
    pub names: Vec<String>,
    pub descriptions: Vec<String>,
    pub organizations: Vec<String>,
    /// Only accounts with an association under one of these parents.
    pub parents: Vec<String>,
    /// Restricts which associations a modify or delete touches.
    pub clusters: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct AccountPatch {
    pub description: Set<String>,
    pub organization: Set<String>,
}

/// `sacctmgr add account`: the accounts plus one association per cluster.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct AddAccounts {
    pub names: Vec<String>,
    /// Defaults to the name.
    pub description: Option<String>,
    /// Defaults to the parent's organization, or the name under root.
    pub organization: Option<String>,
    /// Defaults to `root`.
    pub parent: Option<String>,
    /// Empty: every cluster.
    pub clusters: Vec<String>,
    pub assoc: AssocSettings,
    /// Refuse names that already exist (set by slurmdbd for a
    /// coordinator's request, never read from the wire).
    #[serde(skip)]
    pub only_new: bool,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub enum AdminLevel {
    #[default]
    None,
    Operator,
    Administrator,
}

impl AdminLevel {
    pub fn name(self) -> &'static str {
        match self {
            AdminLevel::None => "None",
            AdminLevel::Operator => "Operator",
            AdminLevel::Administrator => "Administrator",
        }
    }
    /// `none`, `operator`/`oper`, `administrator`/`admin`, case-insensitive.
    pub fn parse(s: &str) -> Option<AdminLevel> {
        match s.to_ascii_lowercase().as_str() {
            "none" | "" => Some(AdminLevel::None),
            "operator" | "oper" => Some(AdminLevel::Operator),
            "administrator" | "admin" => Some(AdminLevel::Administrator),
            _ => None,
        }
    }
}

impl fmt::Display for AdminLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct UserRec {
    pub name: String,
    pub default_account: String,
    pub admin_level: AdminLevel,
    /// The accounts the user coordinates: those it was made coordinator
    /// of and all their sub-accounts, sorted.
    pub coord_accounts: Vec<String>,
    /// Of those, the ones it was made coordinator of (Slurm's `direct`).
    pub coord_direct: Vec<String>,
}

impl UserRec {
    /// Whether the user coordinates `account` (or an account above it).
    pub fn coordinates(&self, account: &str) -> bool {
        self.coord_accounts
            .iter()
            .any(|a| a.eq_ignore_ascii_case(account))
    }
}

/// `sacctmgr add|remove coordinator`: these users, these accounts (and
/// their sub-accounts). A removal with no accounts takes the users from
/// every account; with no users, every coordinator of the accounts.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct CoordChange {
    pub users: Vec<String>,
    pub accounts: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct UserFilter {
    pub names: Vec<String>,
    pub default_accounts: Vec<String>,
    pub admin_levels: Vec<AdminLevel>,
    /// Restrict to users with associations in these accounts; for a delete,
    /// only those associations are removed.
    pub accounts: Vec<String>,
    pub clusters: Vec<String>,
    pub partitions: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct UserPatch {
    pub default_account: Set<String>,
    pub admin_level: Set<AdminLevel>,
}

/// `sacctmgr add user`: creates the users that do not exist and their
/// associations (each account × cluster × partition).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct AddUsers {
    pub names: Vec<String>,
    /// Required for a new user unless `accounts` has exactly one entry.
    pub default_account: Option<String>,
    pub admin_level: Option<AdminLevel>,
    /// Defaults to `[default_account]`.
    pub accounts: Vec<String>,
    /// Empty: every cluster where the account has an association.
    pub clusters: Vec<String>,
    /// Empty: one association without a partition.
    pub partitions: Vec<String>,
    pub assoc: AssocSettings,
}

/// Settings for new associations.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct AssocSettings {
    /// Default 1.
    pub shares: Option<u32>,
    pub limits: AssocLimits,
    /// Empty: inherit the parent's QOS list (`normal` at the root).
    pub qos: Vec<String>,
    pub default_qos: Option<String>,
}

/// An association: `(cluster, account, user, partition)`; `user` is empty for
/// an account's own association (a node of the account tree).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct AssocRec {
    pub id: u64,
    pub cluster: String,
    pub account: String,
    pub user: String,
    pub partition: String,
    /// For an account association: the parent account (`None` for root).
    /// For a user association: the account.
    pub parent: Option<String>,
    /// Fairshare ([`FAIRSHARE_PARENT`] = `parent`).
    pub shares: u32,
    pub limits: AssocLimits,
    pub qos: Vec<String>,
    pub default_qos: Option<String>,
}

impl AssocRec {
    pub fn is_user(&self) -> bool {
        !self.user.is_empty()
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct AssocFilter {
    pub ids: Vec<u64>,
    pub clusters: Vec<String>,
    pub accounts: Vec<String>,
    /// Names; `""` matches account associations.
    pub users: Vec<String>,
    pub partitions: Vec<String>,
    /// Only account associations (no users).
    pub only_accounts: bool,
    /// Only user associations.
    pub only_users: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct AssocPatch {
    pub shares: Set<u32>,
    /// Move an account association under another account (`Clear` is refused).
    pub parent: Set<String>,
    pub limits: AssocLimitsPatch,
    pub qos: ListChange,
    pub default_qos: Set<String>,
}

impl AssocPatch {
    pub fn is_empty(&self) -> bool {
        self.shares.is_keep()
            && self.parent.is_keep()
            && self.limits.is_empty()
            && self.qos.is_keep()
            && self.default_qos.is_keep()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct QosRec {
    pub id: u64,
    pub name: String,
    pub description: String,
    pub priority: u32,
    /// Upper-case flag names (`DENYONLIMIT`, `NOPREEMPT`, ...).
    pub flags: Vec<String>,
    /// QOS this one may preempt.
    pub preempt: Vec<String>,
    /// `cluster` (the cluster's PreemptMode), `off`, `cancel`, `requeue`, `suspend`.
    pub preempt_mode: String,
    /// Seconds.
    pub grace_time: u32,
    pub usage_factor: f64,
    pub limits: QosLimits,
}

impl Default for QosRec {
    fn default() -> Self {
        QosRec {
            id: 0,
            name: String::new(),
            description: String::new(),
            priority: 0,
            flags: Vec::new(),
            preempt: Vec::new(),
            preempt_mode: "cluster".into(),
            grace_time: 0,
            usage_factor: 1.0,
            limits: QosLimits::default(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct QosFilter {
    pub names: Vec<String>,
    pub ids: Vec<u64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct QosPatch {
    pub description: Set<String>,
    pub priority: Set<u32>,
    pub flags: ListChange,
    pub preempt: ListChange,
    pub preempt_mode: Set<String>,
    pub grace_time: Set<u32>,
    pub usage_factor: Set<f64>,
    pub limits: QosLimitsPatch,
}

// ----------------------------------------------------------------- queries

/// `sacct`'s selection. Empty lists match everything.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct JobQuery {
    pub clusters: Vec<String>,
    /// Matches the job id or, for array tasks, the array's id.
    pub job_ids: Vec<JobId>,
    pub users: Vec<String>,
    pub uids: Vec<u32>,
    pub accounts: Vec<String>,
    pub partitions: Vec<String>,
    pub qos: Vec<String>,
    pub names: Vec<String>,
    /// With a window: jobs that were in one of these states during it
    /// (RUNNING: ran at some point of it; PENDING: waited during it; an end
    /// state: ended within it). Without: jobs whose state is one of these.
    pub states: Vec<JobState>,
    /// Window `[start, end]` (`-S`/`-E`): without states, jobs that were
    /// eligible or running at some point of it.
    pub start: Option<i64>,
    pub end: Option<i64>,
    pub with_steps: bool,
    pub limit: Option<u32>,
    /// Answer each job's batch script (`sacct -B`).
    pub with_script: bool,
    /// Answer each job's batch environment (`sacct --env-vars`).
    pub with_env: bool,
    /// Every record of a job id (`sacct -D`: a requeued job's earlier
    /// runs, a job id used again); otherwise only the one submitted last.
    pub duplicates: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct JobRow {
    pub cluster: String,
    pub job: AcctJob,
    /// Oldest first (batch step, then 0, 1, ...), when asked for.
    pub steps: Vec<AcctStep>,
}

/// Granularity of rollups.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub enum Span {
    Hour,
    Day,
    Month,
}

impl Span {
    pub fn name(self) -> &'static str {
        match self {
            Span::Hour => "hour",
            Span::Day => "day",
            Span::Month => "month",
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct UsageQuery {
    pub clusters: Vec<String>,
    pub accounts: Vec<String>,
    pub users: Vec<String>,
    pub start: i64,
    pub end: i64,
    /// `None`: the coarsest rollup the window is aligned to.
    pub span: Option<Span>,
    /// Sum each cluster / (account, user) over the whole window.
    pub total: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct UsageReport {
    pub clusters: Vec<ClusterUsage>,
    pub assocs: Vec<AssocUsage>,
}

/// CPU-seconds of one cluster in one period.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ClusterUsage {
    pub cluster: String,
    pub time_start: i64,
    /// CPUs the cluster had (the largest during the period).
    pub cpu_count: u32,
    /// CPU count × seconds.
    pub total_secs: u64,
    pub alloc_secs: u64,
    pub down_secs: u64,
    pub idle_secs: u64,
}

/// CPU-seconds allocated to one user's jobs in one account in one period.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct AssocUsage {
    pub cluster: String,
    pub account: String,
    pub user: String,
    pub time_start: i64,
    pub alloc_secs: u64,
}

/// One rollup level's record since slurmdbd started.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct RollupLevel {
    /// Periods rolled up.
    pub count: u64,
    /// When it last rolled a period up (0: never).
    pub last_run: i64,
    /// Microseconds: the last run, the longest, and all together.
    pub last_us: u64,
    pub max_us: u64,
    pub total_us: u64,
}

/// Requests served for one RPC type or one user: count and microseconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct RpcCount {
    pub name: String,
    pub count: u64,
    pub total_us: u64,
}

/// What slurmdbd has done since it started (`sdiag` for slurmdbd, REST
/// `slurmdb/v0.0.44/diag`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct DbdStats {
    pub time_start: i64,
    pub hourly: RollupLevel,
    pub daily: RollupLevel,
    pub monthly: RollupLevel,
    /// Per request type, most used first.
    pub rpcs: Vec<RpcCount>,
    /// Per user, most active first.
    pub users: Vec<RpcCount>,
}

/// One job by its accounting identity.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct RunawayJob {
    pub job_id: JobId,
    pub submit_time: i64,
}

/// `sacctmgr show runawayjobs`, answered yes: end these jobs of `cluster`
/// that the database holds as pending or running but its controller no
/// longer knows (state COMPLETED, ended at the latest of their submit,
/// eligible and start times), and roll usage up again from the earliest.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct FixRunaway {
    pub cluster: String,
    pub jobs: Vec<RunawayJob>,
}

/// `sacctmgr show event`'s selection. Empty lists match everything.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct EventFilter {
    pub clusters: Vec<String>,
    pub nodes: Vec<String>,
    /// State names (`DOWN`, `DRAIN`, ...): an event matches when its state
    /// has any of them.
    pub states: Vec<String>,
    /// An event matches when its reason contains any of these.
    pub reasons: Vec<String>,
    /// Who set the reason.
    pub reason_uids: Vec<u32>,
    /// Events that were open at some point of `[start, end]`.
    pub start: Option<i64>,
    pub end: Option<i64>,
    pub min_cpus: Option<u32>,
    pub max_cpus: Option<u32>,
    /// Only events still open.
    pub open_only: bool,
    /// Which kinds: node events (a node out of service), cluster events
    /// (the cluster's size changed; their node is empty). Neither: both.
    pub node_events: bool,
    pub cluster_events: bool,
}

/// `sacctmgr show reservation` and `sreport reservation utilization`:
/// the records of reservations in effect at some time of `[start, end]`
/// (Slurm's: begun before `end`, not ended before `start`). Empty lists
/// match everything.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct ResvFilter {
    pub clusters: Vec<String>,
    pub names: Vec<String>,
    /// Records holding any of these nodes.
    pub nodes: Vec<String>,
    pub start: Option<i64>,
    pub end: Option<i64>,
    /// Count the CPU time jobs used in each record (`alloc_secs`) and the
    /// wall time they left unused (`unused_wall`).
    pub with_usage: bool,
    /// Count only this user's jobs (set by slurmdbd itself, whatever the
    /// caller sent: `PrivateData=jobs` for a caller who is no operator).
    pub jobs_of_uid: Option<u32>,
}

/// One record of a reservation (see [`AcctResv`]), with, when asked, what
/// jobs used of it, as Slurm counts it: the CPU-seconds of the jobs that
/// ran in it within its time (one still running, to its end), and its
/// wall time so far less the jobs' run time weighted by the share of its
/// CPUs each had (Slurm's `UnusedWall`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ResvRec {
    pub cluster: String,
    pub name: String,
    pub time_start: i64,
    pub time_end: i64,
    pub nodes: String,
    pub node_count: u32,
    pub cpus: u32,
    pub flags: String,
    pub users: String,
    pub accounts: String,
    pub alloc_secs: u64,
    pub unused_wall: f64,
}

/// `sacctmgr show transaction`'s selection. Empty lists match everything.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct TxnFilter {
    /// Action names (`Add Users`), any case.
    pub actions: Vec<String>,
    /// Who made the change.
    pub actors: Vec<String>,
    /// Changes whose subject names one of these accounts or users (as
    /// Slurm's, by the text of the subject).
    pub accounts: Vec<String>,
    pub users: Vec<String>,
    pub clusters: Vec<String>,
    /// Changes made in [start, end].
    pub start: Option<i64>,
    pub end: Option<i64>,
}

/// One change made through slurmdbd (`sacctmgr show transaction`): when,
/// what kind (`Add Users`, `Modify Associations`, ...), by whom, on which
/// cluster (empty: none named), to what (`name`, Slurm's `Where`) and how
/// (`info`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct TxnRec {
    pub id: u64,
    pub time: i64,
    pub action: String,
    pub actor: String,
    pub cluster: String,
    pub name: String,
    pub info: String,
}

impl TxnRec {
    /// Whether `f` selects it.
    pub fn matches(&self, f: &TxnFilter) -> bool {
        let any =
            |l: &[String], v: &str| l.is_empty() || l.iter().any(|x| x.eq_ignore_ascii_case(v));
        let named = |l: &[String]| {
            l.is_empty()
                || l.iter().any(|x| {
                    self.name
                        .split([',', ' ', '\'', '(', ')', '='])
                        .any(|w| w.eq_ignore_ascii_case(x))
                })
        };
        any(&f.actions, &self.action)
            && any(&f.actors, &self.actor)
            && (f.clusters.is_empty() || any(&f.clusters, &self.cluster))
            && named(&f.accounts)
            && named(&f.users)
            && f.start.is_none_or(|s| self.time >= s)
            && f.end.is_none_or(|e| self.time <= e)
    }
}

/// One event: a node out of service (down, drained, failing) from
/// `time_start` to `time_end` (`None`: still), or, with an empty `node`,
/// the cluster's size over that time (`state` `CLUSTER`, `reason` its TRES).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct EventRec {
    pub cluster: String,
    pub node: String,
    pub time_start: i64,
    pub time_end: Option<i64>,
    /// Upper-case long state (`DOWN+DRAIN`).
    pub state: String,
    pub reason: Option<String>,
    pub reason_uid: Option<u32>,
    pub cpus: u32,
}

/// Whether an event's node state (`MIXED+DRAIN`) had jobs on the node.
fn event_busy(parts: &[String]) -> bool {
    parts
        .iter()
        .any(|p| matches!(p.as_str(), "ALLOCATED" | "MIXED" | "COMPLETING"))
}

/// The parts of an event's node state, upper case, without suffix marks.
fn event_parts(long: &str) -> Vec<String> {
    long.split('+')
        .map(|p| {
            p.trim_end_matches(['*', '~', '#', '!', '%', '$', '@', '^', '-'])
                .to_ascii_uppercase()
        })
        .collect()
}

/// Slurm's short name of an event's node state, as `sacctmgr show event`
/// prints it (`DRNG` for a drain with jobs on the node, `ALLOC`, ...).
pub fn event_short_state(long: &str) -> String {
    let parts = event_parts(long);
    let has = |s: &str| parts.iter().any(|p| p == s);
    let busy = event_busy(&parts);
    if has("DRAIN") {
        return if busy { "DRNG" } else { "DRAIN" }.into();
    }
    if has("FAIL") {
        return if busy { "FAILG" } else { "FAIL" }.into();
    }
    match parts.first().map(String::as_str) {
        Some("ALLOCATED") => "ALLOC".into(),
        Some("COMPLETING") => "COMP".into(),
        Some(p) => p.to_string(),
        None => String::new(),
    }
}

impl EventRec {
    /// A cluster event (the cluster's size), not a node's.
    pub fn is_cluster(&self) -> bool {
        self.node.is_empty()
    }

    /// Whether the event matches `f`'s kind, state, reason, user and CPU
    /// conditions (the rest are the query's). States, reasons and users
    /// select node events only.
    pub fn matches(&self, f: &EventFilter) -> bool {
        let node_only = !f.states.is_empty() || !f.reasons.is_empty() || !f.reason_uids.is_empty();
        let (nodes, clusters) = match (f.node_events || node_only, f.cluster_events && !node_only) {
            (false, false) => (true, true),
            k => k,
        };
        if self.is_cluster() {
            return clusters
                && f.min_cpus.is_none_or(|m| self.cpus >= m)
                && f.max_cpus.is_none_or(|m| self.cpus <= m);
        }
        if !nodes {
            return false;
        }
        let parts = event_parts(&self.state);
        let reason = self.reason.as_deref().unwrap_or("").to_ascii_lowercase();
        let has = |p: &str| parts.iter().any(|x| x == p);
        let busy = event_busy(&parts);
        let state_is = |s: &str| match s.to_ascii_uppercase().as_str() {
            // Slurm's short names (sinfo's), and the derived drain states.
            "ALLOC" | "ALLOCATED" => has("ALLOCATED"),
            "MIX" | "MIXED" => has("MIXED"),
            "COMP" | "COMPLETING" => has("COMPLETING"),
            "DRNG" | "DRAINING" => has("DRAIN") && busy,
            "DRAINED" => has("DRAIN") && !busy,
            "DRAIN" => has("DRAIN"),
            "FAIL" | "FAILING" => has("FAIL"),
            "FUTR" | "FUTURE" => has("FUTURE"),
            "MAINT" => has("MAINT") || has("MAINTENANCE"),
            "NPC" | "PERFCTRS" => has("PERFCTRS"),
            "PLND" | "PLANNED" => has("PLANNED"),
            "RESV" | "RESERVED" => has("RESERVED"),
            "UNK" | "UNKNOWN" => has("UNKNOWN"),
            "NO_RESPOND" | "NOT_RESPONDING" => has("NOT_RESPONDING") || has("NO_RESPOND"),
            "POWER_DOWN" | "POWERED_DOWN" | "POW_DN" => has("POWERED_DOWN") || has("POWER_DOWN"),
            other => has(other),
        };
        (f.states.is_empty() || f.states.iter().any(|s| state_is(s)))
            && (f.reasons.is_empty()
                || f.reasons
                    .iter()
                    .any(|r| reason.contains(&r.to_ascii_lowercase())))
            && (f.reason_uids.is_empty()
                || self.reason_uid.is_some_and(|u| f.reason_uids.contains(&u)))
            && f.min_cpus.is_none_or(|m| self.cpus >= m)
            && f.max_cpus.is_none_or(|m| self.cpus <= m)
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct RollupStats {
    pub hours: u32,
    pub days: u32,
    pub months: u32,
}

// --------------------------------------------------------------- the enums

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum AcctRequest {
    Ping,
    // ---- controller outbox (root or SlurmUser only)
    Record(Box<SeqRecord>),
    /// Applied in one transaction, in seq order; answered with one `Ack`.
    Records(Vec<SeqRecord>),
    // ---- administration (root, SlurmUser, or AdminLevel Operator+)
    AddClusters(Vec<ClusterRec>),
    DeleteClusters(ClusterFilter),
    AddAccounts(AddAccounts),
    ModifyAccounts {
        filter: AccountFilter,
        set: AccountPatch,
        /// Applied to the accounts' own associations.
        assoc: AssocPatch,
    },
    DeleteAccounts(AccountFilter),
    AddUsers(AddUsers),
    ModifyUsers {
        filter: UserFilter,
        set: UserPatch,
        /// Applied to the users' associations matching the filter.
        assoc: AssocPatch,
    },
    /// Removes the users, or with `accounts` in the filter only those associations.
    DeleteUsers(UserFilter),
    ModifyAssocs {
        filter: AssocFilter,
        set: AssocPatch,
    },
    DeleteAssocs(AssocFilter),
    AddQos(Vec<QosRec>),
    ModifyQos {
        filter: QosFilter,
        set: QosPatch,
    },
    DeleteQos(QosFilter),
    /// Make users coordinators of accounts (administrators, or the
    /// accounts' own coordinators).
    AddCoords(CoordChange),
    /// Take coordinators away (as [`AcctRequest::AddCoords`]).
    RemoveCoords(CoordChange),
    /// Roll usage up to `now` (default: the clock) at once.
    Rollup {
        now: Option<i64>,
    },
    // ---- queries (any authenticated user)
    ListClusters(ClusterFilter),
    ListAccounts(AccountFilter),
    ListUsers(UserFilter),
    ListAssocs(AssocFilter),
    ListQos(QosFilter),
    GetJobs(JobQuery),
    GetUsage(UsageQuery),
    /// What slurmdbd has served and rolled up since it started.
    Stats,
    /// Node events (`sacctmgr show event`).
    ListEvents(EventFilter),
    /// `sacctmgr show transaction`.
    ListTxns(TxnFilter),
    /// `sacctmgr show reservation`, `sreport reservation utilization`.
    ListResvs(ResvFilter),
    /// End runaway jobs (operators).
    FixRunaway(FixRunaway),
    /// Stop slurmdbd (super users).
    Shutdown,
    /// `sacctmgr clear stats`: forget what `Stats` counted (super users).
    ClearStats,
    /// slurmdbd.conf's settings (`sacctmgr show configuration`).
    GetConfig,
}

impl AcctRequest {
    /// The request's type, as slurmdbd's statistics name it.
    pub fn name(&self) -> &'static str {
        match self {
            AcctRequest::Ping => "DBD_PING",
            AcctRequest::Record(_) | AcctRequest::Records(_) => "DBD_SEND_RECORDS",
            AcctRequest::AddClusters(_) => "DBD_ADD_CLUSTERS",
            AcctRequest::DeleteClusters(_) => "DBD_REMOVE_CLUSTERS",
            AcctRequest::AddAccounts(_) => "DBD_ADD_ACCOUNTS",
            AcctRequest::ModifyAccounts { .. } => "DBD_MODIFY_ACCOUNTS",
            AcctRequest::DeleteAccounts(_) => "DBD_REMOVE_ACCOUNTS",
            AcctRequest::AddUsers(_) => "DBD_ADD_USERS",
            AcctRequest::ModifyUsers { .. } => "DBD_MODIFY_USERS",
            AcctRequest::DeleteUsers(_) => "DBD_REMOVE_USERS",
            AcctRequest::ModifyAssocs { .. } => "DBD_MODIFY_ASSOCS",
            AcctRequest::DeleteAssocs(_) => "DBD_REMOVE_ASSOCS",
            AcctRequest::AddQos(_) => "DBD_ADD_QOS",
            AcctRequest::ModifyQos { .. } => "DBD_MODIFY_QOS",
            AcctRequest::DeleteQos(_) => "DBD_REMOVE_QOS",
            AcctRequest::AddCoords(_) => "DBD_ADD_ACCOUNT_COORDS",
            AcctRequest::RemoveCoords(_) => "DBD_REMOVE_ACCOUNT_COORDS",
            AcctRequest::Rollup { .. } => "DBD_ROLL_USAGE",
            AcctRequest::ListClusters(_) => "DBD_GET_CLUSTERS",
            AcctRequest::ListAccounts(_) => "DBD_GET_ACCOUNTS",
            AcctRequest::ListUsers(_) => "DBD_GET_USERS",
            AcctRequest::ListAssocs(_) => "DBD_GET_ASSOCS",
            AcctRequest::ListQos(_) => "DBD_GET_QOS",
            AcctRequest::GetJobs(_) => "DBD_GET_JOBS_COND",
            AcctRequest::GetUsage(_) => "DBD_GET_ASSOC_USAGE",
            AcctRequest::Stats => "DBD_GET_STATS",
            AcctRequest::ClearStats => "DBD_CLEAR_STATS",
            AcctRequest::ListEvents(_) => "DBD_GET_EVENTS",
            AcctRequest::ListTxns(_) => "DBD_GET_TXN",
            AcctRequest::ListResvs(_) => "DBD_GET_RESVS",
            AcctRequest::FixRunaway(_) => "DBD_FIX_RUNAWAY_JOB",
            AcctRequest::Shutdown => "DBD_SHUTDOWN",
            AcctRequest::GetConfig => "DBD_GET_CONFIG",
        }
    }
}

impl AcctRequest {
    /// Changes the database (admin only)?
    pub fn is_admin(&self) -> bool {
        matches!(
            self,
            AcctRequest::AddClusters(_)
                | AcctRequest::DeleteClusters(_)
                | AcctRequest::AddAccounts(_)
                | AcctRequest::ModifyAccounts { .. }
                | AcctRequest::DeleteAccounts(_)
                | AcctRequest::AddUsers(_)
                | AcctRequest::ModifyUsers { .. }
                | AcctRequest::DeleteUsers(_)
                | AcctRequest::ModifyAssocs { .. }
                | AcctRequest::DeleteAssocs(_)
                | AcctRequest::AddQos(_)
                | AcctRequest::ModifyQos { .. }
                | AcctRequest::DeleteQos(_)
                | AcctRequest::AddCoords(_)
                | AcctRequest::RemoveCoords(_)
                | AcctRequest::Rollup { .. }
                | AcctRequest::FixRunaway(_)
        )
    }
    /// Only the controller (root / SlurmUser) sends these.
    pub fn is_ingest(&self) -> bool {
        matches!(self, AcctRequest::Record(_) | AcctRequest::Records(_))
    }
}

/// Per-outbox acknowledgement of a batch.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClusterAck {
    pub cluster: String,
    pub epoch: u64,
    /// Every seq up to and including this one is applied.
    pub through: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum AcctResponse {
    Ok,
    Pong {
        version: String,
    },
    /// Every record of the request is durable (new ones applied, resent ones skipped).
    Ack {
        applied: u32,
        duplicates: u32,
        clusters: Vec<ClusterAck>,
    },
    /// What an add/modify/delete changed, named as sacctmgr lists them
    /// (`C = cluster A = account U = user P = partition` for associations).
    Changed(Vec<String>),
    Clusters(Vec<ClusterRec>),
    Accounts(Vec<AccountRec>),
    Users(Vec<UserRec>),
    Assocs(Vec<AssocRec>),
    Qos(Vec<QosRec>),
    Jobs(Vec<JobRow>),
    Usage(UsageReport),
    RolledUp(RollupStats),
    Stats(DbdStats),
    Events(Vec<EventRec>),
    Txns(Vec<TxnRec>),
    Resvs(Vec<ResvRec>),
    /// slurmdbd.conf's settings, in order (key, value).
    Config(Vec<(String, String)>),
    Error(AcctError),
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum AcctErrorKind {
    InvalidCredential,
    ExpiredCredential,
    AccessDenied,
    /// Bad input: a name, value or combination that cannot be.
    InvalidRequest,
    NotFound,
    AlreadyExists,
    /// Still referenced (an account with sub-accounts, a user's default account...).
    InUse,
    /// The database failed.
    Storage,
    Protocol,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct AcctError {
    pub kind: AcctErrorKind,
    pub message: String,
}

impl fmt::Display for AcctError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for AcctError {}

impl AcctError {
    pub fn new(kind: AcctErrorKind, message: impl Into<String>) -> AcctError {
        AcctError {
            kind,
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_match_kinds_states_reasons_users_and_cpus() {
        let node = EventRec {
            node: "n1".into(),
            state: "IDLE+DRAIN".into(),
            reason: Some("Bad Disk".into()),
            reason_uid: Some(7),
            cpus: 4,
            ..Default::default()
        };
        let cluster = EventRec {
            state: "CLUSTER".into(),
            cpus: 8,
            ..Default::default()
        };
        let f = |g: fn(&mut EventFilter)| {
            let mut f = EventFilter::default();
            g(&mut f);
            f
        };
        let all = f(|_| {});
        assert!(node.matches(&all) && cluster.matches(&all));
        let nodes = f(|f| f.node_events = true);
        assert!(node.matches(&nodes) && !cluster.matches(&nodes));
        let clusters = f(|f| f.cluster_events = true);
        assert!(!node.matches(&clusters) && cluster.matches(&clusters));
        // States, reasons and users are node conditions.
        let drain = f(|f| f.states = vec!["drain".into()]);
        assert!(node.matches(&drain) && !cluster.matches(&drain));
        assert!(!node.matches(&f(|f| f.states = vec!["DOWN".into()])));
        // Slurm's short names; draining is a drain with jobs still on it.
        assert!(!node.matches(&f(|f| f.states = vec!["drng".into()])));
        assert!(node.matches(&f(|f| f.states = vec!["drained".into()])));
        let busy = EventRec {
            state: "MIXED+DRAIN".into(),
            ..node.clone()
        };
        assert!(busy.matches(&f(|f| f.states = vec!["drng".into()])));
        assert!(busy.matches(&f(|f| f.states = vec!["mix".into()])));
        assert!(!busy.matches(&f(|f| f.states = vec!["alloc".into()])));
        assert!(node.matches(&f(|f| f.reasons = vec!["disk".into()])));
        assert!(!node.matches(&f(|f| f.reasons = vec!["power".into()])));
        assert!(node.matches(&f(|f| f.reason_uids = vec![7])));
        assert!(!node.matches(&f(|f| f.reason_uids = vec![0])));
        assert!(!node.matches(&f(|f| f.min_cpus = Some(5))));
        assert!(node.matches(&f(|f| f.max_cpus = Some(4))));
    }

    #[test]
    fn patches_apply_and_default_to_keep() {
        let p: AssocLimitsPatch = serde_json::from_str(r#"{"max_jobs":{"To":5}}"#).unwrap();
        let mut l = AssocLimits {
            grp_jobs: Some(3),
            grp_tres: Some("cpu=4".into()),
            ..Default::default()
        };
        let merge = |_: Option<&str>, new: &str| Some(new.to_string());
        p.apply(&mut l, &merge);
        assert_eq!((l.max_jobs, l.grp_jobs), (Some(5), Some(3)));
        let p = AssocLimitsPatch {
            grp_jobs: Set::Clear,
            grp_tres: Set::To("mem=1M".into()),
            ..Default::default()
        };
        p.apply(&mut l, &merge);
        assert_eq!(l.grp_jobs, None);
        assert_eq!(l.grp_tres.as_deref(), Some("mem=1M"));
        assert_eq!(p.tres_values(), vec!["mem=1M"]);
        let mut q = vec!["a".to_string()];
        ListChange::Add(vec!["b".into(), "a".into()]).apply(&mut q);
        ListChange::Remove(vec!["a".into()]).apply(&mut q);
        assert_eq!(q, vec!["b"]);
    }

    #[test]
    fn requests_round_trip() {
        let r = AcctRequest::Records(vec![SeqRecord {
            cluster: "c".into(),
            epoch: 0,
            seq: 1,
            record: AcctRecord::JobStart(AcctJob {
                job_id: 7,
                state: JobState::Running.into(),
                ..Default::default()
            }),
        }]);
        let s = serde_json::to_string(&r).unwrap();
        let back: AcctRequest = serde_json::from_str(&s).unwrap();
        assert_eq!(back, r);
        assert!(!r.is_admin() && r.is_ingest());
        assert_eq!(AdminLevel::parse("Admin"), Some(AdminLevel::Administrator));
    }
}
