//! `slurm.conf`: parse → defaults → validate.
//!
//! Syntax, as the slurm.conf man page describes it:
//! - `Key=Value` pairs, keys case-insensitive, several pairs per line allowed;
//!   values may be double-quoted (`Reason="disk failed"`);
//! - `#` starts a comment to the end of the line (`\#` is a literal `#`; a `#` inside
//!   double quotes is kept); a trailing `\` continues the line on the next one;
//! - `Include <path>` inlines another file (relative paths resolve against the including
//!   file's directory; `%c` is replaced by the ClusterName read so far; `*`/`?` globs
//!   in the file name are expanded in sorted order);
//! - `NodeName=`, `PartitionName=`, `DownNodes=` and `NodeSet=` lines: the first key
//!   names the record, the other pairs are its attributes. `NodeName=DEFAULT` and
//!   `PartitionName=DEFAULT` set defaults for the lines that follow.
//!
//! Every error carries the file and line ([`ConfError`], shown `file:line: message`).
//! Unknown keys are not errors: they become [`ConfWarning`]s.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};

use crate::hostlist;
use crate::timefmt;

/// Where slurm.conf lives when `$SLURM_CONF` is not set.
pub const DEFAULT_CONF_PATH: &str = "/etc/slurm/slurm.conf";
/// The directory, beside the cluster key, where a configless host keeps the
/// files the controller hands out (`slurmd`/`sackd --conf-server`).
pub const CONFIG_CACHE: &str = "conf-cache";

const MAX_INCLUDE_DEPTH: usize = 16;

/// The variable naming slurm.conf for every command and daemon.
pub const CONF_ENV: &str = "SLURM_CONF";

/// `$SLURM_CONF`, or `/etc/slurm/slurm.conf`.
pub fn default_conf_path() -> PathBuf {
    match std::env::var_os(CONF_ENV) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from(DEFAULT_CONF_PATH),
    }
}

/// A configuration error, at `file:line` (line 0: the file as a whole).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}: {message}", file.display())]
pub struct ConfError {
    pub file: PathBuf,
    pub line: usize,
    pub message: String,
}

/// Something suspicious but accepted (an unknown key, an inconsistent CPU count...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfWarning {
    pub file: PathBuf,
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ConfWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
    }
}

/// One `SlurmctldHost=name(addr)` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtldHost {
    pub name: String,
    pub addr: Option<String>,
}

impl CtldHost {
    /// The address to connect to: `addr`, or the name.
    pub fn address(&self) -> &str {
        self.addr.as_deref().unwrap_or(&self.name)
    }
}

/// One node, defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeConf {
    pub name: String,
    /// Defaults to the name.
    pub node_addr: String,
    /// Defaults to the name.
    pub node_hostname: String,
    pub port: Option<u16>,
    pub cpus: u32,
    pub boards: u32,
    /// Total sockets on the node (Boards × SocketsPerBoard when that is given).
    pub sockets: u32,
    pub cores_per_socket: u32,
    pub threads_per_core: u32,
    /// MB; default 1.
    pub real_memory: u64,
    /// MB; default 0.
    pub tmp_disk: u64,
    /// Default 1.
    pub weight: u32,
    pub features: Vec<String>,
    /// `gpu:a100:4` entries, as written.
    pub gres: Vec<String>,
    /// As given, upper-cased (`UNKNOWN`, `FUTURE`, `CLOUD`, ...); set by DownNodes too.
    pub state: Option<String>,
    pub reason: Option<String>,
    pub core_spec_count: u32,
    pub cpu_spec_list: Option<String>,
    /// MB; default 0.
    pub mem_spec_limit: u64,
    /// Other attributes of the NodeName line (canonical key, value), for display.
    pub extra: Vec<(String, String)>,
    /// Where the node was defined.
    pub file: PathBuf,
    pub line: usize,
}

/// A partition's configured state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PartitionStateConf {
    #[default]
    Up,
    Down,
    Drain,
    Inactive,
}

impl PartitionStateConf {
    /// `UP`, `DOWN`, `DRAIN`, `INACTIVE`.
    pub fn as_str(&self) -> &'static str {
        match self {
            PartitionStateConf::Up => "UP",
            PartitionStateConf::Down => "DOWN",
            PartitionStateConf::Drain => "DRAIN",
            PartitionStateConf::Inactive => "INACTIVE",
        }
    }

    /// Case-insensitive parse of `UP`, `DOWN`, `DRAIN`, `INACTIVE`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_uppercase().as_str() {
            "UP" => Some(PartitionStateConf::Up),
            "DOWN" => Some(PartitionStateConf::Down),
            "DRAIN" => Some(PartitionStateConf::Drain),
            "INACTIVE" => Some(PartitionStateConf::Inactive),
            _ => None,
        }
    }
}

impl fmt::Display for PartitionStateConf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One partition, defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionConf {
    pub name: String,
    /// `Nodes=` as written.
    pub nodes_expr: String,
    /// Expanded (NodeSets and ALL resolved), in node definition order.
    pub nodes: Vec<String>,
    pub default: bool,
    /// Minutes; `None` = UNLIMITED (the default).
    pub max_time: Option<u32>,
    /// Minutes; `None` = not set.
    pub default_time: Option<u32>,
    pub state: PartitionStateConf,
    pub priority_job_factor: u32,
    pub priority_tier: u32,
    /// `NO` (default), `YES`, `EXCLUSIVE`, `FORCE`, upper-cased, `:N` kept.
    pub oversubscribe: String,
    /// `None` = UNLIMITED.
    pub max_nodes: Option<u32>,
    pub min_nodes: u32,
    pub hidden: bool,
    /// `None` = ALL.
    pub allow_groups: Option<String>,
    /// `None` = ALL.
    pub allow_accounts: Option<String>,
    /// `None` = ALL.
    pub allow_qos: Option<String>,
    pub deny_accounts: Option<String>,
    pub deny_qos: Option<String>,
    pub def_mem_per_cpu: Option<u64>,
    pub def_mem_per_node: Option<u64>,
    pub max_mem_per_cpu: Option<u64>,
    pub max_mem_per_node: Option<u64>,
    /// `None` = UNLIMITED.
    pub max_cpus_per_node: Option<u32>,
    /// Partition QOS.
    pub qos: Option<String>,
    /// Seconds.
    pub grace_time: u32,
    pub exclusive_user: bool,
    pub root_only: bool,
    pub req_resv: bool,
    pub lln: bool,
    pub disable_root_jobs: bool,
    pub preempt_mode: Option<String>,
    pub tres_billing_weights: Option<String>,
    pub alloc_nodes: Option<String>,
    pub alternate: Option<String>,
    /// Other attributes of the PartitionName line (canonical key, value).
    pub extra: Vec<(String, String)>,
    pub file: PathBuf,
    pub line: usize,
}

/// A `DownNodes=` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownNodesConf {
    pub nodes_expr: String,
    /// Expanded names.
    pub nodes: Vec<String>,
    pub reason: Option<String>,
    /// Upper-cased; default `DOWN`.
    pub state: String,
}

/// A `NodeSet=` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSetConf {
    pub name: String,
    pub nodes_expr: Option<String>,
    pub feature: Option<String>,
    /// Resolved members, in node definition order.
    pub nodes: Vec<String>,
}

/// A parsed, defaulted and validated slurm.conf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmConf {
    pub path: PathBuf,
    /// Lower-cased (as Slurm does, with a warning when it changed).
    pub cluster_name: String,
    pub slurmctld_hosts: Vec<CtldHost>,
    pub slurmctld_port: u16,
    pub slurmd_port: u16,
    pub state_save_location: PathBuf,
    pub slurmd_spool_dir: String,
    pub slurm_user: String,
    pub slurmd_user: String,
    pub auth_type: String,
    pub auth_info: Option<String>,
    pub auth_alt_types: Vec<String>,
    pub slurmd_timeout: u32,
    pub slurmctld_timeout: u32,
    pub kill_wait: u32,
    pub min_job_age: u32,
    pub max_job_count: u32,
    pub first_job_id: u32,
    pub max_job_id: u32,
    pub max_array_size: u32,
    pub return_to_service: u32,
    pub inactive_limit: u32,
    pub message_timeout: u32,
    pub batch_start_timeout: u32,
    pub wait_time: u32,
    pub scheduler_type: String,
    pub scheduler_parameters: Vec<String>,
    pub select_type: String,
    pub select_type_parameters: Option<String>,
    pub priority_type: String,
    pub slurmd_parameters: Vec<String>,
    pub slurmctld_parameters: Vec<String>,
    pub slurmctld_pidfile: Option<PathBuf>,
    pub slurmd_pidfile: Option<String>,
    pub slurmctld_logfile: Option<PathBuf>,
    pub slurmd_logfile: Option<String>,
    pub def_mem_per_cpu: Option<u64>,
    pub def_mem_per_node: Option<u64>,
    pub max_mem_per_cpu: Option<u64>,
    pub max_mem_per_node: Option<u64>,
    pub accounting_storage_type: String,
    pub accounting_storage_host: Option<String>,
    pub accounting_storage_port: u16,
    pub accounting_storage_enforce: Vec<String>,
    pub gres_types: Vec<String>,
    pub mpi_default: String,
    pub proctrack_type: String,
    pub task_plugin: Vec<String>,
    pub prolog: Option<String>,
    pub epilog: Option<String>,
    /// `TaskProlog`/`TaskEpilog`: run as the job's user before and after
    /// each task (the batch script is one).
    pub task_prolog: Option<String>,
    pub task_epilog: Option<String>,
    /// `SrunProlog`/`SrunEpilog`: run by srun before and after each step.
    pub srun_prolog: Option<String>,
    pub srun_epilog: Option<String>,
    pub tmp_fs: String,
    pub nodes: Vec<NodeConf>,
    pub partitions: Vec<PartitionConf>,
    pub down_nodes: Vec<DownNodesConf>,
    pub node_sets: Vec<NodeSetConf>,
    /// Every scalar `Key=Value` as written (canonical key), last wins. Repeated
    /// `SlurmctldHost` lines appear as `SlurmctldHost[0]`, `SlurmctldHost[1]`, ...
    pub entries: Vec<(String, String)>,
    pub warnings: Vec<ConfWarning>,
    /// Position of each node in `nodes`, by name ([`SlurmConf::node`]).
    node_index: HashMap<String, usize>,
}

impl SlurmConf {
    fn empty(path: &Path) -> SlurmConf {
        SlurmConf {
            path: path.to_path_buf(),
            cluster_name: String::new(),
            slurmctld_hosts: Vec::new(),
            slurmctld_port: 6817,
            slurmd_port: 6818,
            state_save_location: PathBuf::from("/var/spool/slurmctld"),
            slurmd_spool_dir: "/var/spool/slurmd".to_string(),
            slurm_user: "root".to_string(),
            slurmd_user: "root".to_string(),
            auth_type: "auth/munge".to_string(),
            auth_info: None,
            auth_alt_types: Vec::new(),
            slurmd_timeout: 300,
            slurmctld_timeout: 120,
            kill_wait: 30,
            min_job_age: 300,
            max_job_count: 10_000,
            first_job_id: 1,
            max_job_id: 67_043_328,
            max_array_size: 1001,
            return_to_service: 0,
            inactive_limit: 0,
            message_timeout: 10,
            batch_start_timeout: 10,
            wait_time: 0,
            scheduler_type: "sched/backfill".to_string(),
            scheduler_parameters: Vec::new(),
            select_type: "select/cons_tres".to_string(),
            select_type_parameters: None,
            priority_type: "priority/basic".to_string(),
            slurmd_parameters: Vec::new(),
            slurmctld_parameters: Vec::new(),
            slurmctld_pidfile: None,
            slurmd_pidfile: None,
            slurmctld_logfile: None,
            slurmd_logfile: None,
            def_mem_per_cpu: None,
            def_mem_per_node: None,
            max_mem_per_cpu: None,
            max_mem_per_node: None,
            accounting_storage_type: "accounting_storage/none".to_string(),
            accounting_storage_host: None,
            accounting_storage_port: 6819,
            accounting_storage_enforce: Vec::new(),
            gres_types: Vec::new(),
            mpi_default: "none".to_string(),
            proctrack_type: "proctrack/cgroup".to_string(),
            task_plugin: Vec::new(),
            prolog: None,
            epilog: None,
            task_prolog: None,
            task_epilog: None,
            srun_prolog: None,
            srun_epilog: None,
            tmp_fs: "/tmp".to_string(),
            nodes: Vec::new(),
            partitions: Vec::new(),
            down_nodes: Vec::new(),
            node_sets: Vec::new(),
            entries: Vec::new(),
            warnings: Vec::new(),
            node_index: HashMap::new(),
        }
    }

    /// Reads and parses `path` (and its includes).
    pub fn load(path: &Path) -> Result<SlurmConf, ConfError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfError {
            file: path.to_path_buf(),
            line: 0,
            message: format!("cannot read configuration file: {e}"),
        })?;
        SlurmConf::parse_str(&text, path)
    }

    /// Parses `text` as if read from `path` (used for messages and relative includes).
    pub fn parse_str(text: &str, path: &Path) -> Result<SlurmConf, ConfError> {
        let mut p = Parser::new(path);
        p.include_stack.push(path.to_path_buf());
        p.parse_text(text, path)?;
        p.finish()
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&NodeConf> {
        match self.node_index.get(name) {
            Some(&i) => self.nodes.get(i).filter(|n| n.name == name),
            // Built by the parser; a configuration put together otherwise
            // is searched.
            None if self.node_index.len() == self.nodes.len() => None,
            None => self.nodes.iter().find(|n| n.name == name),
        }
    }

    /// The partition named `name`.
    pub fn partition(&self, name: &str) -> Option<&PartitionConf> {
        self.partitions.iter().find(|p| p.name == name)
    }

    /// The partition with `Default=YES`, else the first one.
    pub fn default_partition(&self) -> Option<&PartitionConf> {
        self.partitions
            .iter()
            .find(|p| p.default)
            .or_else(|| self.partitions.first())
    }

    /// The first controller's address (`127.0.0.1` when none is configured).
    /// `SlurmdParameters=config_overrides`: nodes are taken to have what
    /// their lines say, whatever they report.
    pub fn config_overrides(&self) -> bool {
        self.slurmd_parameters
            .iter()
            .any(|p| p.trim().eq_ignore_ascii_case("config_overrides"))
    }

    /// `SelectTypeParameters=CR_CPU*`: CPUs (threads) are allocated one by
    /// one; otherwise (CR_Core, the default) in whole cores.
    pub fn allocates_threads(&self) -> bool {
        self.select_type_parameters
            .as_deref()
            .is_some_and(|p| p.split(',').any(|x| x.trim().starts_with("CR_CPU")))
    }

    /// The name slurmdbd's TLS certificate carries: `AccountingStorageHost`.
    pub fn dbd_name(&self) -> &str {
        self.accounting_storage_host
            .as_deref()
            .unwrap_or("127.0.0.1")
    }

    /// `AccountingStorageHost:AccountingStoragePort` (slurmdbd).
    pub fn dbd_address(&self) -> String {
        format!(
            "{}:{}",
            self.accounting_storage_host
                .as_deref()
                .unwrap_or("127.0.0.1"),
            self.accounting_storage_port
        )
    }

    /// The name the controller's TLS certificate carries: the first
    /// `SlurmctldHost`'s.
    pub fn ctld_name(&self) -> &str {
        self.slurmctld_hosts
            .first()
            .map_or("127.0.0.1", |h| h.name.as_str())
    }

    /// Every controller's name (its `SlurmctldHost`, which its
    /// certificate carries) and `host:port`, in the order callers try
    /// them: the primary, then the backups.
    pub fn controllers(&self) -> Vec<(String, String)> {
        if self.slurmctld_hosts.is_empty() {
            return vec![(
                self.ctld_name().to_string(),
                format!("{}:{}", self.ctld_address(), self.slurmctld_port),
            )];
        }
        self.slurmctld_hosts
            .iter()
            .map(|h| {
                (
                    h.name.clone(),
                    format!("{}:{}", h.address(), self.slurmctld_port),
                )
            })
            .collect()
    }

    /// How Slurm names controller `index` of `count`: `primary`, `backup`
    /// (the only one), else `backupN`.
    pub fn controller_mode(index: usize, count: usize) -> String {
        match index {
            0 => "primary".into(),
            1 if count == 2 => "backup".into(),
            n => format!("backup{n}"),
        }
    }

    pub fn ctld_address(&self) -> String {
        self.slurmctld_hosts
            .first()
            .map(|h| h.address().to_string())
            .unwrap_or_else(|| "127.0.0.1".to_string())
    }

    /// A value from `AuthInfo` (`k=v,k=v`; a bare word gives `Some("")`), key
    /// case-insensitive: `auth_info_value("socket")`.
    pub fn auth_info_value(&self, key: &str) -> Option<String> {
        let info = self.auth_info.as_deref()?;
        for item in info.split(',') {
            let item = item.trim();
            match item.split_once('=') {
                Some((k, v)) if k.trim().eq_ignore_ascii_case(key) => {
                    return Some(v.trim().to_string())
                }
                None if item.eq_ignore_ascii_case(key) => return Some(String::new()),
                _ => {}
            }
        }
        None
    }

    /// `PrivateData=` as flags.
    pub fn private_data(&self) -> crate::private::PrivateData {
        crate::private::PrivateData::parse(self.get("PrivateData").unwrap_or("")).0
    }

    /// The value of `name=value` (or `""` for a bare `name`) in
    /// `SlurmctldParameters`, last one wins.
    pub fn ctld_param(&self, name: &str) -> Option<&str> {
        self.slurmctld_parameters.iter().rev().find_map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p.as_str(), ""));
            k.trim().eq_ignore_ascii_case(name).then_some(v.trim())
        })
    }

    /// The value of a scalar key as written (case-insensitive), last one wins.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
    }
}

// ---------------------------------------------------------------------------------
// Known parameter names (the slurm.conf man page, current and recently removed ones).

/// Scalar parameters of slurm.conf.
pub const KNOWN_KEYS: &[&str] = &[
    "AccountingStorageBackupHost",
    "AccountingStorageEnforce",
    "AccountingStorageExternalHost",
    "AccountingStorageHost",
    "AccountingStorageLoc",
    "AccountingStorageParameters",
    "AccountingStoragePass",
    "AccountingStoragePort",
    "AccountingStorageTRES",
    "AccountingStorageType",
    "AccountingStorageUser",
    "AccountingStoreFlags",
    "AccountingStoreJobComment",
    "AcctGatherEnergyType",
    "AcctGatherFilesystemType",
    "AcctGatherInfinibandType",
    "AcctGatherInterconnectType",
    "AcctGatherNodeFreq",
    "AcctGatherProfileType",
    "AllowSpecResourcesUsage",
    "AuthAltParameters",
    "AuthAltTypes",
    "AuthInfo",
    "AuthType",
    "BackupAddr",
    "BackupController",
    "BatchStartTimeout",
    "BcastExclude",
    "BcastParameters",
    "BurstBufferParameters",
    "BurstBufferType",
    "CacheGroups",
    "CertgenParameters",
    "CertgenType",
    "CertmgrParameters",
    "CertmgrType",
    "CheckpointType",
    "ChosLoc",
    "CliFilterParameters",
    "CliFilterPlugins",
    "ClusterName",
    "CommunicationParameters",
    "CompleteWait",
    "ControlAddr",
    "ControlMachine",
    "CoreSpecPlugin",
    "CpuFreqDef",
    "CpuFreqGovernors",
    "CredType",
    "CryptoType",
    "DataParserParameters",
    "DebugFlags",
    "DefCpuPerGPU",
    "DefMemPerCPU",
    "DefMemPerGPU",
    "DefMemPerNode",
    "DefaultStorageHost",
    "DefaultStorageLoc",
    "DefaultStoragePass",
    "DefaultStoragePort",
    "DefaultStorageType",
    "DefaultStorageUser",
    "DependencyParameters",
    "DisableRootJobs",
    "EioTimeout",
    "EnforcePartLimits",
    "Epilog",
    "EpilogMsgTime",
    "EpilogSlurmctld",
    "EpilogTimeout",
    "ExtSensorsFreq",
    "ExtSensorsType",
    "FairShareDampeningFactor",
    "FastSchedule",
    "FederationParameters",
    "FirstJobId",
    "GetEnvTimeout",
    "GpuFreqDef",
    "GresTypes",
    "GroupUpdateForce",
    "GroupUpdateTime",
    "HashPlugin",
    "HealthCheckInterval",
    "HealthCheckNodeState",
    "HealthCheckProgram",
    "HttpParserType",
    "InactiveLimit",
    "InteractiveStepOptions",
    "JobAcctGatherFrequency",
    "JobAcctGatherParams",
    "JobAcctGatherType",
    "JobCheckpointDir",
    "JobCompHost",
    "JobCompLoc",
    "JobCompParams",
    "JobCompPass",
    "JobCompPassScript",
    "JobCompPort",
    "JobCompType",
    "JobCompUser",
    "JobContainerType",
    "JobCredentialPrivateKey",
    "JobCredentialPublicCertificate",
    "JobFileAppend",
    "JobRequeue",
    "JobSubmitPlugins",
    "KeepAliveTime",
    "KillOnBadExit",
    "KillWait",
    "LaunchParameters",
    "LaunchType",
    "Licenses",
    "LogTimeFormat",
    "MailDomain",
    "MailProg",
    "MaxArraySize",
    "MaxBatchRequeue",
    "MaxDBDMsgs",
    "MaxJobCount",
    "MaxJobId",
    "MaxMemPerCPU",
    "MaxMemPerNode",
    "MaxNodeCount",
    "MaxStepCount",
    "MaxTasksPerNode",
    "MCSParameters",
    "MCSPlugin",
    "MemLimitEnforce",
    "MessageTimeout",
    "MetricsType",
    "MinJobAge",
    "MpiDefault",
    "MpiParams",
    "MsgAggregationParams",
    "NamespaceType",
    "NodeFeaturesPlugins",
    "OverTimeLimit",
    "PluginDir",
    "PlugStackConfig",
    "PowerParameters",
    "PowerPlugin",
    "PreemptExemptTime",
    "PreemptMode",
    "PreemptParameters",
    "PreemptType",
    "PrEpParameters",
    "PrEpPlugins",
    "PriorityCalcPeriod",
    "PriorityDecayHalfLife",
    "PriorityFavorSmall",
    "PriorityFlags",
    "PriorityMaxAge",
    "PriorityParameters",
    "PrioritySiteFactorParameters",
    "PrioritySiteFactorPlugin",
    "PriorityType",
    "PriorityUsageResetPeriod",
    "PriorityWeightAge",
    "PriorityWeightAssoc",
    "PriorityWeightFairshare",
    "PriorityWeightJobSize",
    "PriorityWeightPartition",
    "PriorityWeightQOS",
    "PriorityWeightTRES",
    "PrivateData",
    "ProctrackType",
    "Prolog",
    "PrologEpilogTimeout",
    "PrologFlags",
    "PrologSlurmctld",
    "PrologTimeout",
    "PropagatePrioProcess",
    "PropagateResourceLimits",
    "PropagateResourceLimitsExcept",
    "RebootProgram",
    "ReconfigFlags",
    "RequeueExit",
    "RequeueExitHold",
    "ResumeFailProgram",
    "ResumeProgram",
    "ResumeRate",
    "ResumeTimeout",
    "ResvEpilog",
    "ResvOverRun",
    "ResvProlog",
    "ReturnToService",
    "RoutePlugin",
    "SallocDefaultCommand",
    "SbcastParameters",
    "SchedulerParameters",
    "SchedulerPort",
    "SchedulerRootFilter",
    "SchedulerTimeSlice",
    "SchedulerType",
    "ScronParameters",
    "SelectType",
    "SelectTypeParameters",
    "SlurmctldAddr",
    "SlurmctldDebug",
    "SlurmctldHost",
    "SlurmctldLogFile",
    "SlurmctldParameters",
    "SlurmctldPidFile",
    "SlurmctldPlugstack",
    "SlurmctldPort",
    "SlurmctldPrimaryOffProg",
    "SlurmctldPrimaryOnProg",
    "SlurmctldSyslogDebug",
    "SlurmctldTimeout",
    "SlurmdDebug",
    "SlurmdLogFile",
    "SlurmdParameters",
    "SlurmdPidFile",
    "SlurmdPort",
    "SlurmdSpoolDir",
    "SlurmdSyslogDebug",
    "SlurmdTimeout",
    "SlurmdUser",
    "SlurmSchedLogFile",
    "SlurmSchedLogLevel",
    "SlurmUser",
    "SrunEpilog",
    "SrunPortRange",
    "SrunProlog",
    "StateSaveLocation",
    "SuspendExcNodes",
    "SuspendExcParts",
    "SuspendExcStates",
    "SuspendProgram",
    "SuspendRate",
    "SuspendTime",
    "SuspendTimeout",
    "SwitchParameters",
    "SwitchType",
    "TaskEpilog",
    "TaskPlugin",
    "TaskPluginParam",
    "TaskProlog",
    "TCPTimeout",
    "TLSParameters",
    "TLSType",
    "TmpFS",
    "TopologyParam",
    "TopologyPlugin",
    "TrackWCKey",
    "TreeWidth",
    "UnkillableStepProgram",
    "UnkillableStepTimeout",
    "UrlParserType",
    "UsePAM",
    "VSizeFactor",
    "WaitTime",
    "X11Parameters",
];

/// Attributes of a `NodeName=` line.
pub const NODE_KEYS: &[&str] = &[
    "NodeName",
    "NodeHostname",
    "NodeAddr",
    "BcastAddr",
    "Boards",
    "CoreSpecCount",
    "CoresPerSocket",
    "CpuBind",
    "CPUs",
    "CpuSpecList",
    "Features",
    "Gres",
    "MemSpecLimit",
    "Parameters",
    "Port",
    "RealMemory",
    "Reason",
    "ResumeTimeout",
    "RestrictedCoresPerGPU",
    "Sockets",
    "SocketsPerBoard",
    "State",
    "SuspendTime",
    "SuspendTimeout",
    "ThreadsPerCore",
    "TmpDisk",
    "Topology",
    "TRESWeights",
    "Weight",
];

/// Attributes of a `PartitionName=` line.
pub const PARTITION_KEYS: &[&str] = &[
    "PartitionName",
    "AllocNodes",
    "AllowAccounts",
    "AllowGroups",
    "AllowQos",
    "Alternate",
    "CpuBind",
    "Default",
    "DefaultTime",
    "DefCpuPerGPU",
    "DefMemPerCPU",
    "DefMemPerGPU",
    "DefMemPerNode",
    "DenyAccounts",
    "DenyQos",
    "DisableRootJobs",
    "ExclusiveTopo",
    "ExclusiveUser",
    "GraceTime",
    "Hidden",
    "LLN",
    "MaxCPUsPerNode",
    "MaxCPUsPerSocket",
    "MaxMemPerCPU",
    "MaxMemPerNode",
    "MaxNodes",
    "MaxTime",
    "MinNodes",
    "Nodes",
    "OverSubscribe",
    "OverTimeLimit",
    "PowerDownOnIdle",
    "PreemptMode",
    "Priority",
    "PriorityJobFactor",
    "PriorityTier",
    "QOS",
    "ReqResv",
    "ResumeTimeout",
    "RootOnly",
    "SelectTypeParameters",
    "State",
    "SuspendTime",
    "SuspendTimeout",
    "Topology",
    "TRESBillingWeights",
];

const DOWN_KEYS: &[&str] = &["DownNodes", "Reason", "State"];
const NODESET_KEYS: &[&str] = &["NodeSet", "Feature", "Nodes"];

/// Node states a NodeName or DownNodes line may give.
const NODE_STATES: &[&str] = &[
    "CLOUD", "DOWN", "DRAIN", "EXTERNAL", "FAIL", "FAILING", "FUTURE", "IDLE", "UNKNOWN",
];

fn canonical(list: &[&'static str], key: &str) -> Option<&'static str> {
    list.iter().find(|k| k.eq_ignore_ascii_case(key)).copied()
}

fn node_key(key: &str) -> Option<&'static str> {
    match key.to_ascii_lowercase().as_str() {
        "procs" => Some("CPUs"),
        "feature" | "availablefeatures" => Some("Features"),
        _ => canonical(NODE_KEYS, key),
    }
}

fn partition_key(key: &str) -> Option<&'static str> {
    match key.to_ascii_lowercase().as_str() {
        "shared" => Some("OverSubscribe"),
        _ => canonical(PARTITION_KEYS, key),
    }
}

fn nodeset_key(key: &str) -> Option<&'static str> {
    match key.to_ascii_lowercase().as_str() {
        "features" => Some("Feature"),
        _ => canonical(NODESET_KEYS, key),
    }
}

// ---------------------------------------------------------------------------------
// Lexing.

/// Removes a comment (`#` outside double quotes; `\#` is a literal `#`).
fn strip_comment(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_quote = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'#') => {
                out.push('#');
                chars.next();
            }
            '"' => {
                in_quote = !in_quote;
                out.push(c);
            }
            '#' if !in_quote => break,
            _ => out.push(c),
        }
    }
    out
}

/// Splits a logical line into `(key, value)` pairs. Values may be double-quoted.
fn tokenize(line: &str) -> Result<Vec<(String, String)>, String> {
    let b: Vec<char> = line.chars().collect();
    let n = b.len();
    let mut i = 0;
    let mut out = Vec::new();
    loop {
        while i < n && b[i].is_whitespace() {
            i += 1;
        }
        if i >= n {
            break;
        }
        let ks = i;
        while i < n && !b[i].is_whitespace() && b[i] != '=' {
            i += 1;
        }
        let key: String = b[ks..i].iter().collect();
        if key.is_empty() {
            return Err("malformed line: missing parameter name before '='".to_string());
        }
        while i < n && b[i].is_whitespace() {
            i += 1;
        }
        if i >= n || b[i] != '=' {
            return Err(format!("malformed line: expected Key=Value, found '{key}'"));
        }
        if key.contains('"') {
            return Err(format!("malformed line: bad parameter name '{key}'"));
        }
        i += 1;
        while i < n && b[i].is_whitespace() {
            i += 1;
        }
        let mut val = String::new();
        while i < n && !b[i].is_whitespace() {
            if b[i] == '"' {
                i += 1;
                let qs = i;
                while i < n && b[i] != '"' {
                    i += 1;
                }
                if i >= n {
                    return Err(format!("unterminated quote in value of '{key}'"));
                }
                val.extend(&b[qs..i]);
                i += 1;
            } else {
                val.push(b[i]);
                i += 1;
            }
        }
        out.push((key, val));
    }
    Ok(out)
}

/// Splits at commas outside brackets and parentheses, trimming and dropping empties.
pub fn split_top_commas(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '[' | '(' => {
                depth += 1;
                cur.push(c);
            }
            ']' | ')' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth <= 0 => {
                let t = cur.trim();
                if !t.is_empty() {
                    out.push(t.to_string());
                }
                cur.clear();
            }
            _ => cur.push(c),
        }
    }
    let t = cur.trim();
    if !t.is_empty() {
        out.push(t.to_string());
    }
    out
}

fn comma_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect()
}

/// Simple wildcard match (`*`, `?`).
fn wildcard_match(pat: &[char], s: &[char]) -> bool {
    match pat.split_first() {
        None => s.is_empty(),
        Some(('*', rest)) => (0..=s.len()).any(|k| wildcard_match(rest, &s[k..])),
        Some(('?', rest)) => !s.is_empty() && wildcard_match(rest, &s[1..]),
        Some((c, rest)) => s.first() == Some(c) && wildcard_match(rest, &s[1..]),
    }
}

// ---------------------------------------------------------------------------------
// Values.

/// One attribute as written, with where it came from.
#[derive(Debug, Clone)]
struct Attr {
    key: String,
    value: String,
    file: PathBuf,
    line: usize,
}

impl Attr {
    fn err(&self, message: impl Into<String>) -> ConfError {
        ConfError {
            file: self.file.clone(),
            line: self.line,
            message: message.into(),
        }
    }

    fn bad(&self, expected: &str) -> ConfError {
        self.err(format!(
            "invalid value '{}' for {}: expected {expected}",
            self.value, self.key
        ))
    }

    fn u64(&self) -> Result<u64, ConfError> {
        let v = self.value.trim();
        if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
            return Err(self.bad("a number"));
        }
        v.parse::<u64>().map_err(|_| self.bad("a number"))
    }

    fn u32(&self) -> Result<u32, ConfError> {
        let v = self.u64()?;
        u32::try_from(v).map_err(|_| self.bad("a number below 4294967296"))
    }

    fn u16(&self) -> Result<u16, ConfError> {
        let v = self.u64()?;
        u16::try_from(v).map_err(|_| self.bad("a number below 65536"))
    }

    fn positive_u32(&self) -> Result<u32, ConfError> {
        match self.u32()? {
            0 => Err(self.bad("a number of at least 1")),
            v => Ok(v),
        }
    }

    fn is_unlimited(&self) -> bool {
        let v = self.value.trim();
        v.eq_ignore_ascii_case("UNLIMITED") || v.eq_ignore_ascii_case("INFINITE")
    }

    /// A number or UNLIMITED/INFINITE (→ None).
    fn opt_u64(&self) -> Result<Option<u64>, ConfError> {
        if self.is_unlimited() {
            return Ok(None);
        }
        self.u64().map(Some)
    }

    fn opt_u32(&self) -> Result<Option<u32>, ConfError> {
        if self.is_unlimited() {
            return Ok(None);
        }
        self.u32().map(Some)
    }

    fn bool(&self) -> Result<bool, ConfError> {
        match self.value.trim().to_ascii_lowercase().as_str() {
            "yes" | "true" | "1" | "up" => Ok(true),
            "no" | "false" | "0" | "down" => Ok(false),
            _ => Err(self.bad("YES or NO")),
        }
    }

    fn time_limit(&self) -> Result<Option<u32>, ConfError> {
        if self.value.trim().eq_ignore_ascii_case("NONE") {
            return Ok(None);
        }
        timefmt::parse_time_limit(&self.value).map_err(|e| {
            self.err(format!(
                "invalid time '{}' for {}: {}",
                self.value, self.key, e.reason
            ))
        })
    }

    fn hostlist(&self) -> Result<Vec<String>, ConfError> {
        hostlist::expand(&self.value).map_err(|e| self.err(format!("{}: {e}", self.key)))
    }

    fn opt_string(&self) -> Option<String> {
        let v = self.value.trim();
        if v.is_empty() {
            None
        } else {
            Some(v.to_string())
        }
    }

    /// `None` for empty or `ALL`.
    fn opt_list_all(&self) -> Option<String> {
        self.opt_string().filter(|v| !v.eq_ignore_ascii_case("ALL"))
    }
}

/// Attributes of one record (line merged over defaults), unique by canonical key.
#[derive(Debug, Clone, Default)]
struct Attrs(Vec<Attr>);

impl Attrs {
    fn set(&mut self, a: Attr) {
        if let Some(x) = self.0.iter_mut().find(|x| x.key == a.key) {
            *x = a;
        } else {
            self.0.push(a);
        }
    }

    fn get(&self, key: &str) -> Option<&Attr> {
        self.0.iter().find(|x| x.key == key)
    }

    fn extra(&self, modelled: &[&str]) -> Vec<(String, String)> {
        self.0
            .iter()
            .filter(|a| !modelled.contains(&a.key.as_str()))
            .map(|a| (a.key.clone(), a.value.clone()))
            .collect()
    }
}

fn validate_node_state(a: &Attr) -> Result<String, ConfError> {
    let up = a.value.trim().to_ascii_uppercase();
    if up.is_empty() || !up.split('+').all(|w| NODE_STATES.contains(&w)) {
        return Err(a.err(format!(
            "invalid value '{}' for {}: expected one of {}",
            a.value,
            a.key,
            NODE_STATES.join(", ")
        )));
    }
    Ok(up)
}

/// Expands a per-node list (NodeAddr, NodeHostname, Port) for `count` nodes:
/// one value is used for all, else there must be exactly `count`.
fn per_node_list(
    a: Option<&Attr>,
    count: usize,
    name_attr: &Attr,
) -> Result<Option<Vec<String>>, ConfError> {
    let Some(a) = a else { return Ok(None) };
    let list = a.hostlist()?;
    if list.len() == 1 {
        return Ok(Some(vec![list[0].clone(); count]));
    }
    if list.len() != count {
        return Err(a.err(format!(
            "{} has {} entries but NodeName={} defines {} nodes",
            a.key,
            list.len(),
            name_attr.value,
            count
        )));
    }
    Ok(Some(list))
}

const NODE_MODELLED: &[&str] = &[
    "NodeName",
    "NodeHostname",
    "NodeAddr",
    "Port",
    "CPUs",
    "Boards",
    "Sockets",
    "SocketsPerBoard",
    "CoresPerSocket",
    "ThreadsPerCore",
    "RealMemory",
    "TmpDisk",
    "Weight",
    "Features",
    "Gres",
    "State",
    "Reason",
    "CoreSpecCount",
    "CpuSpecList",
    "MemSpecLimit",
];

fn build_nodes(
    m: &Attrs,
    name_attr: &Attr,
    warnings: &mut Vec<ConfWarning>,
) -> Result<Vec<NodeConf>, ConfError> {
    let names = name_attr.hostlist()?;
    if names.is_empty() {
        return Err(name_attr.err("NodeName is empty"));
    }
    let count = names.len();
    let addrs = per_node_list(m.get("NodeAddr"), count, name_attr)?;
    let hostnames = per_node_list(m.get("NodeHostname"), count, name_attr)?;
    let ports: Option<Vec<u16>> = match m.get("Port") {
        None => None,
        Some(a) => {
            let v = a.value.trim();
            let as_list = if !v.contains('[') && (v.contains('-') || v.contains(',')) {
                Attr {
                    value: format!("[{v}]"),
                    ..a.clone()
                }
            } else {
                a.clone()
            };
            let list = per_node_list(Some(&as_list), count, name_attr)?.unwrap_or_default();
            let mut ports = Vec::with_capacity(list.len());
            for p in list {
                let pa = Attr {
                    value: p,
                    ..a.clone()
                };
                ports.push(pa.u16().map_err(|_| a.bad("a port number or range"))?);
            }
            Some(ports)
        }
    };

    let get_pos = |k: &str| m.get(k).map(Attr::positive_u32).transpose();
    let cpus = get_pos("CPUs")?;
    let boards = get_pos("Boards")?.unwrap_or(1);
    let sockets = get_pos("Sockets")?;
    let spb = get_pos("SocketsPerBoard")?;
    let cores_given = get_pos("CoresPerSocket")?;
    let threads_given = get_pos("ThreadsPerCore")?;
    let cores = cores_given.unwrap_or(1);
    let threads = threads_given.unwrap_or(1);
    let overflow = || name_attr.err("CPU count overflows");
    let sockets = if let Some(spb) = spb {
        boards.checked_mul(spb).ok_or_else(overflow)?
    } else if let Some(s) = sockets {
        s
    } else if let Some(c) = cpus {
        if cores_given.is_some() || threads_given.is_some() {
            (c / cores.saturating_mul(threads)).max(1)
        } else {
            c
        }
    } else {
        boards
    };
    let full = sockets
        .checked_mul(cores)
        .and_then(|x| x.checked_mul(threads))
        .ok_or_else(overflow)?;
    let cpus = match cpus {
        Some(c) => {
            if c != full && c != sockets.saturating_mul(cores) {
                warnings.push(ConfWarning {
                    file: name_attr.file.clone(),
                    line: name_attr.line,
                    message: format!(
                        "NodeName={}: CPUs={c} does not match Sockets*CoresPerSocket*ThreadsPerCore={full}",
                        name_attr.value
                    ),
                });
            }
            c
        }
        None => full,
    };
    let real_memory = m.get("RealMemory").map(Attr::u64).transpose()?.unwrap_or(1);
    let tmp_disk = m.get("TmpDisk").map(Attr::u64).transpose()?.unwrap_or(0);
    let weight = m.get("Weight").map(Attr::u32).transpose()?.unwrap_or(1);
    let core_spec_count = m
        .get("CoreSpecCount")
        .map(Attr::u32)
        .transpose()?
        .unwrap_or(0);
    let mem_spec_limit = m
        .get("MemSpecLimit")
        .map(Attr::u64)
        .transpose()?
        .unwrap_or(0);
    let cpu_spec_list = m.get("CpuSpecList").and_then(Attr::opt_string);
    let features = m
        .get("Features")
        .map(|a| comma_list(&a.value))
        .unwrap_or_default();
    let gres = m
        .get("Gres")
        .map(|a| split_top_commas(&a.value))
        .unwrap_or_default();
    let state = m.get("State").map(validate_node_state).transpose()?;
    let reason = m.get("Reason").and_then(Attr::opt_string);
    let extra = m.extra(NODE_MODELLED);

    Ok(names
        .into_iter()
        .enumerate()
        .map(|(i, name)| NodeConf {
            node_addr: addrs
                .as_ref()
                .and_then(|v| v.get(i).cloned())
                .unwrap_or_else(|| name.clone()),
            node_hostname: hostnames
                .as_ref()
                .and_then(|v| v.get(i).cloned())
                .unwrap_or_else(|| name.clone()),
            port: ports.as_ref().and_then(|v| v.get(i).copied()),
            name,
            cpus,
            boards,
            sockets,
            cores_per_socket: cores,
            threads_per_core: threads,
            real_memory,
            tmp_disk,
            weight,
            features: features.clone(),
            gres: gres.clone(),
            state: state.clone(),
            reason: reason.clone(),
            core_spec_count,
            cpu_spec_list: cpu_spec_list.clone(),
            mem_spec_limit,
            extra: extra.clone(),
            file: name_attr.file.clone(),
            line: name_attr.line,
        })
        .collect())
}

const PARTITION_MODELLED: &[&str] = &[
    "PartitionName",
    "Nodes",
    "Default",
    "MaxTime",
    "DefaultTime",
    "State",
    "PriorityJobFactor",
    "PriorityTier",
    "Priority",
    "OverSubscribe",
    "MaxNodes",
    "MinNodes",
    "Hidden",
    "AllowGroups",
    "AllowAccounts",
    "AllowQos",
    "DenyAccounts",
    "DenyQos",
    "DefMemPerCPU",
    "DefMemPerNode",
    "MaxMemPerCPU",
    "MaxMemPerNode",
    "MaxCPUsPerNode",
    "QOS",
    "GraceTime",
    "ExclusiveUser",
    "RootOnly",
    "ReqResv",
    "LLN",
    "DisableRootJobs",
    "PreemptMode",
    "TRESBillingWeights",
    "AllocNodes",
    "Alternate",
];

/// How an `OverSubscribe=` value (as parsed: upper case) lets jobs share
/// cores: `Some((force, n))` for `FORCE[:N]` (every job) or `YES[:N]`
/// (jobs that ask), N jobs per core, 4 when not given.
pub fn oversubscribe_sharing(os: &str) -> Option<(bool, u32)> {
    let (base, n) = match os.split_once(':') {
        Some((b, n)) => (b, n.parse().ok()?),
        None => (os, 4),
    };
    match base {
        "FORCE" => Some((true, n)),
        "YES" => Some((false, n)),
        _ => None,
    }
}

fn parse_oversubscribe(a: &Attr) -> Result<String, ConfError> {
    let up = a.value.trim().to_ascii_uppercase();
    let (base, count) = match up.split_once(':') {
        Some((b, c)) => (b.to_string(), Some(c.to_string())),
        None => (up.clone(), None),
    };
    let base_ok = matches!(base.as_str(), "NO" | "YES" | "EXCLUSIVE" | "FORCE");
    let count_ok = match &count {
        None => true,
        Some(c) => {
            matches!(base.as_str(), "YES" | "FORCE")
                && !c.is_empty()
                && c.bytes().all(|b| b.is_ascii_digit())
                && c.parse::<u32>().is_ok_and(|n| n >= 1)
        }
    };
    if !base_ok || !count_ok {
        return Err(a.bad("NO, YES[:N], EXCLUSIVE or FORCE[:N]"));
    }
    Ok(up)
}

fn build_partition(m: &Attrs, name_attr: &Attr) -> Result<PartitionConf, ConfError> {
    let b = |k: &str| m.get(k).map(Attr::bool).transpose();
    let opt_u64 = |k: &str| -> Result<Option<u64>, ConfError> {
        Ok(m.get(k).map(Attr::opt_u64).transpose()?.flatten())
    };
    let s = |k: &str| m.get(k).and_then(Attr::opt_string);
    let state = match m.get("State") {
        None => PartitionStateConf::Up,
        Some(a) => PartitionStateConf::parse(a.value.trim())
            .ok_or_else(|| a.bad("UP, DOWN, DRAIN or INACTIVE"))?,
    };
    let legacy_priority = m.get("Priority").map(Attr::u32).transpose()?;
    let priority_job_factor = m
        .get("PriorityJobFactor")
        .map(Attr::u32)
        .transpose()?
        .or(legacy_priority)
        .unwrap_or(1);
    let priority_tier = m
        .get("PriorityTier")
        .map(Attr::u32)
        .transpose()?
        .or(legacy_priority)
        .unwrap_or(1);
    Ok(PartitionConf {
        name: name_attr.value.clone(),
        nodes_expr: m.get("Nodes").map(|a| a.value.clone()).unwrap_or_default(),
        nodes: Vec::new(),
        default: b("Default")?.unwrap_or(false),
        max_time: m
            .get("MaxTime")
            .map(Attr::time_limit)
            .transpose()?
            .flatten(),
        default_time: m
            .get("DefaultTime")
            .map(Attr::time_limit)
            .transpose()?
            .flatten(),
        state,
        priority_job_factor,
        priority_tier,
        oversubscribe: m
            .get("OverSubscribe")
            .map(parse_oversubscribe)
            .transpose()?
            .unwrap_or_else(|| "NO".to_string()),
        max_nodes: m.get("MaxNodes").map(Attr::opt_u32).transpose()?.flatten(),
        min_nodes: m.get("MinNodes").map(Attr::u32).transpose()?.unwrap_or(0),
        hidden: b("Hidden")?.unwrap_or(false),
        allow_groups: m.get("AllowGroups").and_then(Attr::opt_list_all),
        allow_accounts: m.get("AllowAccounts").and_then(Attr::opt_list_all),
        allow_qos: m.get("AllowQos").and_then(Attr::opt_list_all),
        deny_accounts: s("DenyAccounts"),
        deny_qos: s("DenyQos"),
        def_mem_per_cpu: opt_u64("DefMemPerCPU")?,
        def_mem_per_node: opt_u64("DefMemPerNode")?,
        max_mem_per_cpu: opt_u64("MaxMemPerCPU")?,
        max_mem_per_node: opt_u64("MaxMemPerNode")?,
        max_cpus_per_node: m
            .get("MaxCPUsPerNode")
            .map(Attr::opt_u32)
            .transpose()?
            .flatten(),
        qos: s("QOS"),
        grace_time: m.get("GraceTime").map(Attr::u32).transpose()?.unwrap_or(0),
        exclusive_user: b("ExclusiveUser")?.unwrap_or(false),
        root_only: b("RootOnly")?.unwrap_or(false),
        req_resv: b("ReqResv")?.unwrap_or(false),
        lln: b("LLN")?.unwrap_or(false),
        disable_root_jobs: b("DisableRootJobs")?.unwrap_or(false),
        preempt_mode: s("PreemptMode"),
        tres_billing_weights: s("TRESBillingWeights"),
        alloc_nodes: m.get("AllocNodes").and_then(Attr::opt_list_all),
        alternate: s("Alternate"),
        extra: m.extra(PARTITION_MODELLED),
        file: name_attr.file.clone(),
        line: name_attr.line,
    })
}

// ---------------------------------------------------------------------------------
// The parser.

struct PendingPartition {
    index: usize,
    nodes: Option<Attr>,
}

struct PendingNodeSet {
    name_attr: Attr,
    nodes: Option<Attr>,
    feature: Option<Attr>,
}

struct PendingDown {
    attr: Attr,
}

#[derive(Default)]
struct Legacy {
    control_machine: Option<String>,
    control_addr: Option<String>,
    backup_controller: Option<String>,
    backup_addr: Option<String>,
}

struct Parser {
    conf: SlurmConf,
    node_defaults: Attrs,
    part_defaults: Attrs,
    node_index: HashMap<String, (PathBuf, usize)>,
    part_index: HashMap<String, (PathBuf, usize)>,
    pending_parts: Vec<PendingPartition>,
    pending_sets: Vec<PendingNodeSet>,
    pending_down: Vec<PendingDown>,
    legacy: Legacy,
    include_stack: Vec<PathBuf>,
}

fn err_at(file: &Path, line: usize, message: impl Into<String>) -> ConfError {
    ConfError {
        file: file.to_path_buf(),
        line,
        message: message.into(),
    }
}

impl Parser {
    fn new(path: &Path) -> Parser {
        Parser {
            conf: SlurmConf::empty(path),
            node_defaults: Attrs::default(),
            part_defaults: Attrs::default(),
            node_index: HashMap::new(),
            part_index: HashMap::new(),
            pending_parts: Vec::new(),
            pending_sets: Vec::new(),
            pending_down: Vec::new(),
            legacy: Legacy::default(),
            include_stack: Vec::new(),
        }
    }

    fn warn(&mut self, file: &Path, line: usize, message: impl Into<String>) {
        self.conf.warnings.push(ConfWarning {
            file: file.to_path_buf(),
            line,
            message: message.into(),
        });
    }

    fn parse_text(&mut self, text: &str, file: &Path) -> Result<(), ConfError> {
        let mut pending = String::new();
        let mut start_line = 0usize;
        let mut lines = text.lines().enumerate().peekable();
        while let Some((idx, raw)) = lines.next() {
            let no = idx + 1;
            if pending.is_empty() {
                start_line = no;
            }
            let stripped = strip_comment(raw);
            let t = stripped.trim_end();
            if let Some(body) = t.strip_suffix('\\') {
                pending.push_str(body);
                pending.push(' ');
                if lines.peek().is_some() {
                    continue;
                }
            } else {
                pending.push_str(t);
            }
            let logical = std::mem::take(&mut pending);
            self.handle_line(&logical, file, start_line)?;
        }
        Ok(())
    }

    fn handle_line(&mut self, text: &str, file: &Path, line: usize) -> Result<(), ConfError> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Ok(());
        }
        if let Some(first) = trimmed.split_whitespace().next() {
            if first.eq_ignore_ascii_case("include") {
                let rest = trimmed[first.len()..].trim();
                return self.include(rest, file, line);
            }
        }
        let pairs = tokenize(trimmed).map_err(|m| err_at(file, line, m))?;
        let Some((first_key, _)) = pairs.first() else {
            return Ok(());
        };
        let kind = first_key.to_ascii_lowercase();
        for (k, _) in pairs.iter().skip(1) {
            let lk = k.to_ascii_lowercase();
            if matches!(
                lk.as_str(),
                "nodename" | "partitionname" | "downnodes" | "nodeset"
            ) && lk != kind
            {
                return Err(err_at(file, line, format!("'{k}' must start its own line")));
            }
        }
        match kind.as_str() {
            "nodename" => self.node_line(pairs, file, line),
            "partitionname" => self.partition_line(pairs, file, line),
            "downnodes" => self.down_line(pairs, file, line),
            "nodeset" => self.nodeset_line(pairs, file, line),
            "frontendname" => {
                self.warn(file, line, "FrontendName lines are not supported; ignored");
                Ok(())
            }
            _ => {
                for (k, v) in pairs {
                    self.scalar(k, v, file, line)?;
                }
                Ok(())
            }
        }
    }

    fn include(&mut self, arg: &str, file: &Path, line: usize) -> Result<(), ConfError> {
        let arg = arg.trim();
        let arg = arg
            .strip_prefix('"')
            .and_then(|a| a.strip_suffix('"'))
            .unwrap_or(arg);
        if arg.is_empty() {
            return Err(err_at(file, line, "Include without a file name"));
        }
        let arg = arg.replace("%c", &self.conf.cluster_name);
        let mut target = PathBuf::from(&arg);
        if target.is_relative() {
            let base = file.parent().unwrap_or_else(|| Path::new("."));
            target = base.join(target);
        }
        let fname = target
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let files: Vec<PathBuf> = if fname.contains('*') || fname.contains('?') {
            let dir = target
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from("."));
            let pat: Vec<char> = fname.chars().collect();
            let rd = std::fs::read_dir(&dir).map_err(|e| {
                err_at(
                    file,
                    line,
                    format!("cannot read include directory '{}': {e}", dir.display()),
                )
            })?;
            let mut found: Vec<PathBuf> = rd
                .filter_map(Result::ok)
                .filter(|e| {
                    let n: Vec<char> = e.file_name().to_string_lossy().chars().collect();
                    wildcard_match(&pat, &n)
                })
                .map(|e| e.path())
                .collect();
            found.sort();
            if found.is_empty() {
                return Err(err_at(
                    file,
                    line,
                    format!("Include pattern '{}' matches no file", target.display()),
                ));
            }
            found
        } else {
            vec![target]
        };
        for f in files {
            if self.include_stack.contains(&f) {
                return Err(err_at(
                    file,
                    line,
                    format!("include loop: '{}' includes itself", f.display()),
                ));
            }
            if self.include_stack.len() > MAX_INCLUDE_DEPTH {
                return Err(err_at(file, line, "includes nested too deeply"));
            }
            let text = std::fs::read_to_string(&f).map_err(|e| {
                err_at(
                    file,
                    line,
                    format!("cannot read included file '{}': {e}", f.display()),
                )
            })?;
            self.include_stack.push(f.clone());
            let res = self.parse_text(&text, &f);
            self.include_stack.pop();
            res?;
        }
        Ok(())
    }

    fn collect_attrs(
        &mut self,
        pairs: Vec<(String, String)>,
        file: &Path,
        line: usize,
        kind: &str,
        canon: fn(&str) -> Option<&'static str>,
    ) -> Attrs {
        let mut attrs = Attrs::default();
        for (k, v) in pairs {
            let key = match canon(&k) {
                Some(c) => c.to_string(),
                None => {
                    self.warn(file, line, format!("unknown {kind} parameter '{k}'"));
                    k
                }
            };
            attrs.set(Attr {
                key,
                value: v,
                file: file.to_path_buf(),
                line,
            });
        }
        attrs
    }

    fn node_line(
        &mut self,
        pairs: Vec<(String, String)>,
        file: &Path,
        line: usize,
    ) -> Result<(), ConfError> {
        let attrs = self.collect_attrs(pairs, file, line, "NodeName", node_key);
        let Some(name_attr) = attrs.get("NodeName").cloned() else {
            return Err(err_at(file, line, "NodeName line without NodeName"));
        };
        if name_attr.value.eq_ignore_ascii_case("DEFAULT") {
            for a in attrs.0 {
                if a.key != "NodeName" {
                    self.node_defaults.set(a);
                }
            }
            return Ok(());
        }
        let mut merged = self.node_defaults.clone();
        for a in attrs.0 {
            merged.set(a);
        }
        let mut warnings = Vec::new();
        let nodes = build_nodes(&merged, &name_attr, &mut warnings)?;
        self.conf.warnings.extend(warnings);
        for n in nodes {
            if let Some((f, l)) = self.node_index.get(&n.name) {
                return Err(name_attr.err(format!(
                    "duplicate node name '{}' (first defined at {}:{})",
                    n.name,
                    f.display(),
                    l
                )));
            }
            self.node_index
                .insert(n.name.clone(), (file.to_path_buf(), line));
            self.conf.nodes.push(n);
        }
        Ok(())
    }

    fn partition_line(
        &mut self,
        pairs: Vec<(String, String)>,
        file: &Path,
        line: usize,
    ) -> Result<(), ConfError> {
        let attrs = self.collect_attrs(pairs, file, line, "PartitionName", partition_key);
        let Some(name_attr) = attrs.get("PartitionName").cloned() else {
            return Err(err_at(
                file,
                line,
                "PartitionName line without PartitionName",
            ));
        };
        if name_attr.value.eq_ignore_ascii_case("DEFAULT") {
            for a in attrs.0 {
                if a.key != "PartitionName" {
                    self.part_defaults.set(a);
                }
            }
            return Ok(());
        }
        if name_attr.value.trim().is_empty() {
            return Err(name_attr.err("PartitionName is empty"));
        }
        let mut merged = self.part_defaults.clone();
        for a in attrs.0 {
            merged.set(a);
        }
        let part = build_partition(&merged, &name_attr)?;
        if let Some((f, l)) = self.part_index.get(&part.name) {
            return Err(name_attr.err(format!(
                "duplicate partition name '{}' (first defined at {}:{})",
                part.name,
                f.display(),
                l
            )));
        }
        self.part_index
            .insert(part.name.clone(), (file.to_path_buf(), line));
        self.pending_parts.push(PendingPartition {
            index: self.conf.partitions.len(),
            nodes: merged.get("Nodes").cloned(),
        });
        self.conf.partitions.push(part);
        Ok(())
    }

    fn down_line(
        &mut self,
        pairs: Vec<(String, String)>,
        file: &Path,
        line: usize,
    ) -> Result<(), ConfError> {
        let attrs = self.collect_attrs(pairs, file, line, "DownNodes", |k| canonical(DOWN_KEYS, k));
        let Some(attr) = attrs.get("DownNodes").cloned() else {
            return Err(err_at(file, line, "DownNodes line without DownNodes"));
        };
        let nodes = attr.hostlist()?;
        let state = match attrs.get("State") {
            Some(a) => validate_node_state(a)?,
            None => "DOWN".to_string(),
        };
        self.conf.down_nodes.push(DownNodesConf {
            nodes_expr: attr.value.clone(),
            nodes,
            reason: attrs.get("Reason").and_then(Attr::opt_string),
            state,
        });
        self.pending_down.push(PendingDown { attr });
        Ok(())
    }

    fn nodeset_line(
        &mut self,
        pairs: Vec<(String, String)>,
        file: &Path,
        line: usize,
    ) -> Result<(), ConfError> {
        let attrs = self.collect_attrs(pairs, file, line, "NodeSet", nodeset_key);
        let Some(name_attr) = attrs.get("NodeSet").cloned() else {
            return Err(err_at(file, line, "NodeSet line without NodeSet"));
        };
        let nodes = attrs.get("Nodes").cloned();
        let feature = attrs.get("Feature").cloned();
        if nodes.is_none() && feature.is_none() {
            return Err(name_attr.err(format!(
                "NodeSet={} needs Nodes= or Feature=",
                name_attr.value
            )));
        }
        if let Some(n) = &nodes {
            // Syntax check now, so the error points at this line.
            if !n.value.eq_ignore_ascii_case("ALL") {
                n.hostlist()?;
            }
        }
        self.pending_sets.push(PendingNodeSet {
            name_attr,
            nodes,
            feature,
        });
        Ok(())
    }

    fn set_entry(&mut self, key: &str, value: &str) {
        if let Some(e) = self
            .conf
            .entries
            .iter_mut()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
        {
            e.1 = value.to_string();
        } else {
            self.conf.entries.push((key.to_string(), value.to_string()));
        }
    }

    fn scalar(
        &mut self,
        key: String,
        value: String,
        file: &Path,
        line: usize,
    ) -> Result<(), ConfError> {
        let Some(canon) = canonical(KNOWN_KEYS, &key) else {
            self.warn(file, line, format!("unknown key '{key}'"));
            self.set_entry(&key, &value);
            return Ok(());
        };
        let a = Attr {
            key: canon.to_string(),
            value: value.clone(),
            file: file.to_path_buf(),
            line,
        };
        let v = value.trim().to_string();
        let opt = |v: &str| {
            if v.is_empty() {
                None
            } else {
                Some(v.to_string())
            }
        };
        let c = &mut self.conf;
        match canon {
            "PrivateData" => {
                for w in crate::private::PrivateData::parse(&v).1 {
                    c.warnings.push(ConfWarning {
                        file: file.to_path_buf(),
                        line,
                        message: format!("PrivateData value '{w}' is not known: ignored"),
                    });
                }
            }
            "ClusterName" => {
                let lower = v.to_ascii_lowercase();
                if lower != v {
                    c.warnings.push(ConfWarning {
                        file: file.to_path_buf(),
                        line,
                        message: format!("ClusterName '{v}' converted to lowercase"),
                    });
                }
                c.cluster_name = lower;
            }
            "SlurmctldHost" => {
                let host = parse_ctld_host(&a)?;
                let idx = c.slurmctld_hosts.len();
                c.slurmctld_hosts.push(host);
                let k = format!("SlurmctldHost[{idx}]");
                self.set_entry(&k, &value);
                return Ok(());
            }
            "ControlMachine" => self.legacy.control_machine = opt(&v),
            "ControlAddr" => self.legacy.control_addr = opt(&v),
            "BackupController" => self.legacy.backup_controller = opt(&v),
            "BackupAddr" => self.legacy.backup_addr = opt(&v),
            "SlurmctldPort" => {
                let first = match v.split_once('-') {
                    Some((lo, hi)) => {
                        let lo_a = Attr {
                            value: lo.to_string(),
                            ..a.clone()
                        };
                        let hi_a = Attr {
                            value: hi.to_string(),
                            ..a.clone()
                        };
                        let (l, h) = (
                            lo_a.u16().map_err(|_| a.bad("a port or port range"))?,
                            hi_a.u16().map_err(|_| a.bad("a port or port range"))?,
                        );
                        if h < l {
                            return Err(a.bad("a port or port range"));
                        }
                        l
                    }
                    None => a.u16()?,
                };
                c.slurmctld_port = first;
            }
            "SlurmdPort" => c.slurmd_port = a.u16()?,
            "StateSaveLocation" => c.state_save_location = PathBuf::from(&v),
            "SlurmdSpoolDir" => c.slurmd_spool_dir = v.clone(),
            "SlurmUser" => c.slurm_user = v.clone(),
            "SlurmdUser" => c.slurmd_user = v.clone(),
            "AuthType" => c.auth_type = v.clone(),
            "AuthInfo" => c.auth_info = opt(&v),
            "AuthAltTypes" => c.auth_alt_types = comma_list(&v),
            "SlurmdTimeout" => c.slurmd_timeout = a.u32()?,
            "SlurmctldTimeout" => c.slurmctld_timeout = a.u32()?,
            "KillWait" => c.kill_wait = a.u32()?,
            "MinJobAge" => c.min_job_age = a.u32()?,
            "MaxJobCount" => c.max_job_count = a.u32()?,
            "FirstJobId" => c.first_job_id = a.u32()?,
            "MaxJobId" => c.max_job_id = a.u32()?,
            "MaxArraySize" => {
                let n = a.u32()?;
                if n > 4_000_001 {
                    return Err(a.bad("a number from 0 to 4000001"));
                }
                c.max_array_size = n;
            }
            "ReturnToService" => {
                let n = a.u32()?;
                if n > 2 {
                    return Err(a.bad("0, 1 or 2"));
                }
                c.return_to_service = n;
            }
            "InactiveLimit" => c.inactive_limit = a.u32()?,
            "MessageTimeout" => c.message_timeout = a.u32()?,
            "BatchStartTimeout" => c.batch_start_timeout = a.u32()?,
            "WaitTime" => c.wait_time = a.u32()?,
            "SchedulerType" => c.scheduler_type = v.clone(),
            "SchedulerParameters" => c.scheduler_parameters = comma_list(&v),
            "SelectType" => c.select_type = v.clone(),
            "DebugFlags" => {
                if let Err(bad) = crate::debugflags::DebugFlags::parse(&v) {
                    return Err(a.err(format!("DebugFlags invalid: {v} (no flag '{bad}')")));
                }
            }
            "SelectTypeParameters" => c.select_type_parameters = opt(&v),
            "PriorityType" => c.priority_type = v.clone(),
            "SlurmdParameters" => c.slurmd_parameters = comma_list(&v),
            "SlurmctldParameters" => c.slurmctld_parameters = comma_list(&v),
            "SlurmctldPidFile" => c.slurmctld_pidfile = opt(&v).map(PathBuf::from),
            "SlurmdPidFile" => c.slurmd_pidfile = opt(&v),
            "SlurmctldLogFile" => c.slurmctld_logfile = opt(&v).map(PathBuf::from),
            "SlurmdLogFile" => c.slurmd_logfile = opt(&v),
            "DefMemPerCPU" => c.def_mem_per_cpu = a.opt_u64()?,
            "DefMemPerNode" => c.def_mem_per_node = a.opt_u64()?,
            "MaxMemPerCPU" => c.max_mem_per_cpu = a.opt_u64()?,
            "MaxMemPerNode" => c.max_mem_per_node = a.opt_u64()?,
            "AccountingStorageType" => c.accounting_storage_type = v.clone(),
            "AccountingStorageHost" => c.accounting_storage_host = opt(&v),
            "AccountingStoragePort" => c.accounting_storage_port = a.u16()?,
            "AccountingStorageEnforce" => c.accounting_storage_enforce = comma_list(&v),
            "GresTypes" => c.gres_types = comma_list(&v),
            "MpiDefault" => c.mpi_default = v.clone(),
            "ProctrackType" => c.proctrack_type = v.clone(),
            "TaskPlugin" => c.task_plugin = comma_list(&v),
            "Prolog" => c.prolog = opt(&v),
            "Epilog" => c.epilog = opt(&v),
            "TaskProlog" => c.task_prolog = opt(&v),
            "TaskEpilog" => c.task_epilog = opt(&v),
            "SrunProlog" => c.srun_prolog = opt(&v),
            "SrunEpilog" => c.srun_epilog = opt(&v),
            "TmpFS" => c.tmp_fs = v.clone(),
            _ => {}
        }
        self.set_entry(canon, &value);
        Ok(())
    }

    /// Resolves a `Nodes=` value (hostlists, NodeSet names, ALL) to known nodes, in
    /// node definition order.
    fn resolve_nodes(
        &self,
        a: &Attr,
        sets: &HashMap<String, Vec<String>>,
        what: &str,
    ) -> Result<Vec<String>, ConfError> {
        let mut members: HashSet<String> = HashSet::new();
        for tok in split_top_commas(&a.value) {
            if tok.eq_ignore_ascii_case("ALL") {
                members.extend(self.conf.nodes.iter().map(|n| n.name.clone()));
            } else if let Some(set) = sets.get(&tok) {
                members.extend(set.iter().cloned());
            } else {
                let names = hostlist::expand(&tok).map_err(|e| a.err(format!("{}: {e}", a.key)))?;
                for n in names {
                    if !self.node_index.contains_key(&n) {
                        return Err(a.err(format!("{what} references undefined node '{n}'")));
                    }
                    members.insert(n);
                }
            }
        }
        Ok(self
            .conf
            .nodes
            .iter()
            .filter(|n| members.contains(&n.name))
            .map(|n| n.name.clone())
            .collect())
    }

    fn finish(mut self) -> Result<SlurmConf, ConfError> {
        let path = self.conf.path.clone();

        // NodeSets.
        let mut sets: HashMap<String, Vec<String>> = HashMap::new();
        for ps in std::mem::take(&mut self.pending_sets) {
            let name = ps.name_attr.value.clone();
            let mut members: HashSet<String> = HashSet::new();
            if let Some(n) = &ps.nodes {
                let what = format!("NodeSet '{name}'");
                members.extend(self.resolve_nodes(n, &sets, &what)?);
            }
            if let Some(f) = &ps.feature {
                let feat = f.value.trim();
                members.extend(
                    self.conf
                        .nodes
                        .iter()
                        .filter(|n| n.features.iter().any(|x| x == feat))
                        .map(|n| n.name.clone()),
                );
            }
            let nodes: Vec<String> = self
                .conf
                .nodes
                .iter()
                .filter(|n| members.contains(&n.name))
                .map(|n| n.name.clone())
                .collect();
            if sets.contains_key(&name) {
                return Err(ps.name_attr.err(format!("duplicate NodeSet '{name}'")));
            }
            sets.insert(name.clone(), nodes.clone());
            self.conf.node_sets.push(NodeSetConf {
                name,
                nodes_expr: ps.nodes.as_ref().map(|a| a.value.clone()),
                feature: ps.feature.as_ref().map(|a| a.value.clone()),
                nodes,
            });
        }

        // Partitions.
        for pp in std::mem::take(&mut self.pending_parts) {
            let Some(a) = pp.nodes else { continue };
            let what = match self.conf.partitions.get(pp.index) {
                Some(p) => format!("partition '{}'", p.name),
                None => continue,
            };
            let nodes = self.resolve_nodes(&a, &sets, &what)?;
            if let Some(p) = self.conf.partitions.get_mut(pp.index) {
                p.nodes = nodes;
            }
        }

        // Only one default partition: the last Default=YES wins, as in Slurm.
        let defaults: Vec<usize> = self
            .conf
            .partitions
            .iter()
            .enumerate()
            .filter(|(_, p)| p.default)
            .map(|(i, _)| i)
            .collect();
        if let Some((&last, earlier)) = defaults.split_last() {
            for &i in earlier {
                if let Some(p) = self.conf.partitions.get_mut(i) {
                    p.default = false;
                }
            }
            if !earlier.is_empty() {
                if let Some(p) = self.conf.partitions.get(last) {
                    let (f, l, n) = (p.file.clone(), p.line, p.name.clone());
                    self.warn(
                        &f,
                        l,
                        format!("more than one Default=YES partition; using '{n}'"),
                    );
                }
            }
        }

        // DownNodes: check names and apply state/reason to the nodes.
        let downs = std::mem::take(&mut self.pending_down);
        for (i, pd) in downs.iter().enumerate() {
            let Some(d) = self.conf.down_nodes.get(i).cloned() else {
                continue;
            };
            for n in &d.nodes {
                if !self.node_index.contains_key(n) {
                    return Err(pd
                        .attr
                        .err(format!("DownNodes references undefined node '{n}'")));
                }
            }
            let down: HashSet<&String> = d.nodes.iter().collect();
            for node in self.conf.nodes.iter_mut() {
                if down.contains(&node.name) {
                    node.state = Some(d.state.clone());
                    if d.reason.is_some() {
                        node.reason = d.reason.clone();
                    }
                }
            }
        }

        // Legacy ControlMachine/ControlAddr/BackupController/BackupAddr.
        if self.conf.slurmctld_hosts.is_empty() {
            let legacy = std::mem::take(&mut self.legacy);
            if let Some(name) = legacy.control_machine {
                self.conf.slurmctld_hosts.push(CtldHost {
                    name,
                    addr: legacy.control_addr,
                });
            }
            if let Some(name) = legacy.backup_controller {
                self.conf.slurmctld_hosts.push(CtldHost {
                    name,
                    addr: legacy.backup_addr,
                });
            }
        }
        if self.conf.slurmctld_hosts.is_empty() {
            self.warn(&path, 0, "no SlurmctldHost configured");
        }
        if self.conf.cluster_name.is_empty() {
            self.warn(&path, 0, "ClusterName is not set");
        }
        self.conf.node_index = self
            .conf
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.name.clone(), i))
            .collect();
        Ok(self.conf)
    }
}

fn parse_ctld_host(a: &Attr) -> Result<CtldHost, ConfError> {
    let v = a.value.trim();
    let bad = || a.bad("a host name, optionally followed by (address)");
    match v.find('(') {
        None => {
            if v.is_empty() || v.contains(')') {
                return Err(bad());
            }
            Ok(CtldHost {
                name: v.to_string(),
                addr: None,
            })
        }
        Some(open) => {
            let name = &v[..open];
            let addr = v[open + 1..].strip_suffix(')').ok_or_else(bad)?;
            if name.is_empty() || addr.is_empty() || addr.contains('(') || addr.contains(')') {
                return Err(bad());
            }
            Ok(CtldHost {
                name: name.to_string(),
                addr: Some(addr.to_string()),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

    fn fixture(name: &str) -> PathBuf {
        Path::new(FIXTURES).join(name)
    }

    fn parse(text: &str) -> Result<SlurmConf, ConfError> {
        SlurmConf::parse_str(text, Path::new("/test/slurm.conf"))
    }

    fn ok(text: &str) -> SlurmConf {
        match parse(text) {
            Ok(c) => c,
            Err(e) => panic!("unexpected error: {e}"),
        }
    }

    fn names(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }

    #[test]
    fn an_unknown_debug_flag_is_refused_with_the_line() {
        let e = parse("ClusterName=c\nDebugFlags=Backfill,Loud\n").expect_err("Loud");
        assert_eq!(e.line, 2);
        assert!(
            e.message.contains("DebugFlags invalid: Backfill,Loud"),
            "{e}"
        );
        let c = ok("ClusterName=c\nDebugFlags=backfill,WorkQ,Task\n");
        assert_eq!(c.get("DebugFlags"), Some("backfill,WorkQ,Task"));
    }

    #[test]
    fn reference_config() {
        let c = SlurmConf::load(&fixture("reference.conf")).unwrap();
        assert_eq!(c.cluster_name, "anchor");
        assert_eq!(
            c.slurmctld_hosts,
            vec![CtldHost {
                name: "vm".into(),
                addr: Some("127.0.0.1".into())
            }]
        );
        assert_eq!(c.ctld_address(), "127.0.0.1");
        assert_eq!(c.slurmctld_port, 6817);
        assert_eq!(c.slurmd_port, 6831);
        assert_eq!(c.slurm_user, "slurm");
        assert_eq!(c.slurmd_user, "root");
        assert_eq!(c.auth_type, "auth/munge");
        assert_eq!(
            c.auth_info_value("socket").as_deref(),
            Some("/srv/slurm/munge/munge.socket")
        );
        assert_eq!(c.auth_info_value("ttl"), None);
        assert_eq!(c.state_save_location, PathBuf::from("/srv/slurm/state"));
        assert_eq!(c.slurmd_spool_dir, "/srv/slurm/spool/slurmd.%n");
        assert_eq!(
            c.slurmd_pidfile.as_deref(),
            Some("/srv/slurm/run/slurmd.%n.selfpid")
        );
        assert_eq!(
            c.slurmctld_logfile,
            Some(PathBuf::from("/srv/slurm/log/slurmctld.log"))
        );
        assert_eq!(c.slurmd_parameters, vec!["config_overrides".to_string()]);
        assert_eq!(c.return_to_service, 2);
        assert_eq!(c.select_type, "select/cons_tres");
        assert_eq!(c.select_type_parameters.as_deref(), Some("CR_Core"));
        assert_eq!(c.scheduler_type, "sched/backfill");
        assert_eq!(c.priority_type, "priority/multifactor");
        assert_eq!(c.max_job_count, 20000);
        assert_eq!(c.min_job_age, 60);
        assert_eq!(c.slurmctld_timeout, 120);
        assert_eq!(c.slurmd_timeout, 300);
        assert_eq!(c.kill_wait, 30);
        assert_eq!(c.accounting_storage_type, "accounting_storage/slurmdbd");
        assert_eq!(c.accounting_storage_port, 6819);
        assert_eq!(c.get("priorityweightfairshare"), Some("10000"));
        assert_eq!(c.get("SlurmctldHost[0]"), Some("vm(127.0.0.1)"));
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);

        assert_eq!(c.nodes.len(), 3);
        let n2 = c.node("n2").unwrap();
        assert_eq!(n2.node_addr, "127.0.0.1");
        assert_eq!(n2.node_hostname, "n2");
        assert_eq!(n2.port, Some(6832));
        assert_eq!(
            (
                n2.cpus,
                n2.boards,
                n2.sockets,
                n2.cores_per_socket,
                n2.threads_per_core
            ),
            (4, 1, 4, 1, 1)
        );
        assert_eq!(n2.real_memory, 4000);
        assert_eq!(n2.tmp_disk, 0);
        assert_eq!(n2.weight, 1);
        assert_eq!(n2.state.as_deref(), Some("UNKNOWN"));
        assert!(c.node("n4").is_none());

        let p = c.default_partition().unwrap();
        assert_eq!(p.name, "debug");
        assert!(p.default);
        assert_eq!(p.nodes_expr, "n[1-3]");
        assert_eq!(names(&p.nodes), vec!["n1", "n2", "n3"]);
        assert_eq!(p.max_time, None);
        assert_eq!(p.default_time, None);
        assert_eq!(p.state, PartitionStateConf::Up);
        assert_eq!((p.priority_job_factor, p.priority_tier), (1, 1));
        assert_eq!(p.oversubscribe, "NO");
        assert_eq!((p.max_nodes, p.min_nodes, p.hidden), (None, 0, false));
        assert_eq!(p.allow_groups, None);
    }

    #[test]
    fn site_example_config() {
        let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../etc/slurm.conf"));
        let c = SlurmConf::load(path).unwrap();
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        assert_eq!(c.cluster_name, "aurora");
        assert_eq!(c.slurmctld_hosts.len(), 2);
        assert_eq!(c.ctld_address(), "10.1.0.10");
        assert_eq!(c.slurmctld_hosts[1].address(), "ctl2");
        assert_eq!(c.auth_type, "auth/slurm");
        let cn = c.nodes.iter().filter(|n| n.name.starts_with("cn")).count();
        assert_eq!(cn, 128);
        let cn001 = c.node("cn001").unwrap();
        assert_eq!(
            (
                cn001.cpus,
                cn001.sockets,
                cn001.cores_per_socket,
                cn001.threads_per_core
            ),
            (128, 2, 32, 2)
        );
        assert_eq!(cn001.node_addr, "10.2.0.1");
        assert_eq!(c.node("cn128").unwrap().node_addr, "10.2.0.128");
        let gpu = c.node("gpu01").unwrap();
        assert_eq!(gpu.gres, vec!["gpu:a100:4".to_string()]);
        assert!(gpu.features.contains(&"a100".to_string()));
        let compute = c.partition("compute").unwrap();
        assert!(compute.default);
        assert_eq!(compute.nodes.len(), 128);
        assert_eq!(compute.max_time, Some(2 * 24 * 60));
        assert_eq!(compute.default_time, Some(60));
        let gpup = c.partition("gpu").unwrap();
        assert_eq!(names(&gpup.nodes), vec!["gpu01", "gpu02", "gpu03", "gpu04"]);
        let all = c.partition("all").unwrap();
        assert_eq!(all.nodes.len(), c.nodes.len());
        assert!(all.hidden);
        assert_eq!(c.down_nodes.len(), 1);
        assert_eq!(c.node("cn127").unwrap().state.as_deref(), Some("DOWN"));
        assert!(c.node("cn127").unwrap().reason.is_some());
        assert_eq!(c.default_partition().unwrap().name, "compute");
    }

    #[test]
    fn include_fixture() {
        let c = SlurmConf::load(&fixture("include_main.conf")).unwrap();
        assert_eq!(c.cluster_name, "inc");
        assert_eq!(c.nodes.len(), 4);
        assert_eq!(c.node("c3").unwrap().cpus, 8);
        assert_eq!(names(&c.partitions[0].nodes), vec!["c1", "c2", "c3", "c4"]);
        // A setting after the Include overrides one inside it.
        assert_eq!(c.slurmd_timeout, 600);
        assert_eq!(c.kill_wait, 45);
        let w = c
            .warnings
            .iter()
            .find(|w| w.message.contains("FooBar"))
            .unwrap();
        assert!(w.file.ends_with("include_nodes.conf"), "{w}");
        assert_eq!(w.line, 4);
        assert!(w
            .to_string()
            .ends_with("include_nodes.conf:4: unknown key 'FooBar'"));
    }

    #[test]
    fn include_glob_and_cluster_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.part.conf"), "NodeName=a[1-2]\n").unwrap();
        std::fs::write(dir.path().join("b.part.conf"), "NodeName=b1\n").unwrap();
        std::fs::write(dir.path().join("site-x.conf"), "KillWait=7\n").unwrap();
        let main = dir.path().join("slurm.conf");
        std::fs::write(
            &main,
            "ClusterName=x\ninclude *.part.conf\nINCLUDE \"site-%c.conf\"\nPartitionName=p Nodes=ALL\n",
        )
        .unwrap();
        let c = SlurmConf::load(&main).unwrap();
        let all: Vec<&str> = c.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(all, vec!["a1", "a2", "b1"]);
        assert_eq!(c.kill_wait, 7);

        // Include loop.
        let looped = dir.path().join("loop.conf");
        std::fs::write(&looped, "Include loop.conf\n").unwrap();
        let e = SlurmConf::load(&looped).unwrap_err();
        assert!(e.message.contains("include loop"), "{e}");
        assert_eq!(e.line, 1);

        let e = SlurmConf::load(&dir.path().join("nope.conf")).unwrap_err();
        assert_eq!(e.line, 0);
        assert!(e.message.contains("cannot read"), "{e}");
    }

    #[test]
    fn syntax_fixture() {
        let c = SlurmConf::load(&fixture("syntax.conf")).unwrap();
        assert_eq!(c.cluster_name, "syntax");
        // Case-insensitive keys, canonical capitalisation in entries.
        assert_eq!(c.slurmctld_port, 7000);
        assert_eq!(c.slurmd_port, 7001);
        assert_eq!(c.get("SlurmctldPort"), Some("7000-7002"));
        assert!(c.entries.iter().any(|(k, _)| k == "SlurmdPort"));
        assert!(c.entries.iter().any(|(k, _)| k == "MpiDefault"));
        // Last wins.
        assert_eq!(c.kill_wait, 20);
        assert_eq!(c.get("KillWait"), Some("20"));
        // Quoting and \# escapes.
        assert_eq!(c.get("MailProg"), Some("/usr/bin/mail #1"));
        assert_eq!(
            c.auth_info.as_deref(),
            Some("socket=/run/munge/x.socket,ttl=60")
        );
        assert_eq!(c.auth_info_value("TTL").as_deref(), Some("60"));
        // Continuation lines and DEFAULT.
        assert_eq!(c.nodes.len(), 5);
        let n1 = c.node("n1").unwrap();
        assert_eq!(n1.real_memory, 2000);
        assert_eq!(n1.cpus, 8);
        assert_eq!(
            (n1.sockets, n1.cores_per_socket, n1.threads_per_core),
            (2, 4, 1)
        );
        assert_eq!(n1.features, vec!["intel".to_string(), "ib".to_string()]);
        assert_eq!(n1.reason.as_deref(), Some("being # tested"));
        let big = c.node("big1").unwrap();
        assert_eq!(big.real_memory, 64000);
        assert_eq!(big.cpus, 16);
        assert_eq!(big.tmp_disk, 100);
        assert_eq!(big.weight, 10);
        let p = c.partition("short").unwrap();
        assert_eq!(p.max_time, Some(30));
        assert_eq!(p.state, PartitionStateConf::Drain);
        assert_eq!(p.priority_tier, 5);
        assert_eq!(p.oversubscribe, "FORCE:4");
        let q = c.partition("long").unwrap();
        // From PartitionName=DEFAULT.
        assert_eq!(q.priority_tier, 5);
        assert_eq!(q.max_time, None);
        assert_eq!(q.oversubscribe, "EXCLUSIVE");
        assert_eq!(q.allow_accounts.as_deref(), Some("physics,chem"));
        assert!(q.default);
        assert_eq!(names(&q.nodes), vec!["n1", "n2", "n3", "big1", "big2"]);
        assert_eq!(c.default_partition().unwrap().name, "long");
        assert!(c
            .warnings
            .iter()
            .any(|w| w.message == "unknown key 'NotARealKey'" && w.line == 31));
    }

    #[test]
    fn broken_fixtures() {
        let cases: &[(&str, usize, &str)] = &[
            (
                "malformed_line.conf",
                3,
                "expected Key=Value, found 'NodeName'",
            ),
            ("bad_number.conf", 2, "invalid value 'abc' for CPUs"),
            (
                "bad_hostlist.conf",
                2,
                "invalid hostlist expression 'n[1-3'",
            ),
            ("bad_reversed_range.conf", 2, "reversed range"),
            (
                "bad_part_state.conf",
                3,
                "invalid value 'SIDEWAYS' for State",
            ),
            ("dup_node.conf", 4, "duplicate node name 'n2'"),
            (
                "undefined_node.conf",
                3,
                "partition 'batch' references undefined node 'n4'",
            ),
            ("bad_rts.conf", 2, "invalid value '5' for ReturnToService"),
            ("missing_include.conf", 2, "cannot read included file"),
            ("bad_time.conf", 3, "invalid time 'abc' for MaxTime"),
            (
                "bad_bool.conf",
                3,
                "invalid value 'MAYBE' for Default: expected YES or NO",
            ),
            ("bad_quote.conf", 2, "unterminated quote"),
            (
                "bad_nodeaddr_count.conf",
                2,
                "NodeAddr has 2 entries but NodeName=n[1-3] defines 3 nodes",
            ),
            ("bad_node_state.conf", 2, "invalid value 'ASLEEP' for State"),
            (
                "bad_default_value.conf",
                2,
                "invalid value 'lots' for RealMemory",
            ),
            (
                "bad_downnodes.conf",
                3,
                "DownNodes references undefined node 'n9'",
            ),
            (
                "bad_ctld_host.conf",
                2,
                "invalid value 'vm(127.0.0.1' for SlurmctldHost",
            ),
            (
                "bad_oversubscribe.conf",
                3,
                "invalid value 'SOMETIMES' for OverSubscribe",
            ),
            (
                "bad_port.conf",
                1,
                "invalid value '70000' for SlurmctldPort",
            ),
            ("bad_continued.conf", 2, "invalid value 'zz' for CPUs"),
        ];
        for (file, line, msg) in cases {
            let path = fixture(&format!("broken/{file}"));
            let err = match SlurmConf::load(&path) {
                Ok(_) => panic!("{file}: expected an error"),
                Err(e) => e,
            };
            assert_eq!(err.line, *line, "{file}: {err}");
            assert!(err.message.contains(msg), "{file}: {err}");
            assert_eq!(err.file, path, "{file}");
            let shown = err.to_string();
            assert!(
                shown.starts_with(&format!("{}:{}: ", path.display(), line)),
                "{shown}"
            );
        }
        // An error inside an included file names that file.
        let path = fixture("broken/include_bad.conf");
        let err = SlurmConf::load(&path).unwrap_err();
        assert!(err.file.ends_with("broken/included_bad.inc"), "{err}");
        assert_eq!(err.line, 2, "{err}");
        assert!(
            err.message.contains("invalid value 'x' for Weight"),
            "{err}"
        );
    }

    #[test]
    fn defaults_when_empty() {
        let c = ok("");
        assert_eq!(c.slurmctld_port, 6817);
        assert_eq!(c.slurmd_port, 6818);
        assert_eq!(c.state_save_location, PathBuf::from("/var/spool/slurmctld"));
        assert_eq!(c.slurmd_spool_dir, "/var/spool/slurmd");
        assert_eq!(c.slurm_user, "root");
        assert_eq!(c.auth_type, "auth/munge");
        assert_eq!(c.slurmd_timeout, 300);
        assert_eq!(c.slurmctld_timeout, 120);
        assert_eq!(c.kill_wait, 30);
        assert_eq!(c.min_job_age, 300);
        assert_eq!(c.max_job_count, 10_000);
        assert_eq!(c.first_job_id, 1);
        assert_eq!(c.return_to_service, 0);
        assert_eq!(c.scheduler_type, "sched/backfill");
        assert_eq!(c.select_type, "select/cons_tres");
        assert_eq!(c.priority_type, "priority/basic");
        assert_eq!(c.ctld_address(), "127.0.0.1");
        assert!(c.default_partition().is_none());
        assert!(c
            .warnings
            .iter()
            .any(|w| w.message.contains("SlurmctldHost")));
        assert!(c.warnings.iter().any(|w| w.message.contains("ClusterName")));
    }

    #[test]
    fn node_cpu_defaults() {
        let c = ok("NodeName=a CPUs=4\n\
                    NodeName=b Sockets=2 CoresPerSocket=8 ThreadsPerCore=2\n\
                    NodeName=c\n\
                    NodeName=d CPUs=16 CoresPerSocket=4 ThreadsPerCore=2\n\
                    NodeName=e Boards=2 SocketsPerBoard=2 CoresPerSocket=4\n\
                    NodeName=f Procs=3 Feature=x,y\n");
        let st = |n: &str| {
            let n = c.node(n).unwrap();
            (
                n.cpus,
                n.boards,
                n.sockets,
                n.cores_per_socket,
                n.threads_per_core,
            )
        };
        assert_eq!(st("a"), (4, 1, 4, 1, 1));
        assert_eq!(st("b"), (32, 1, 2, 8, 2));
        assert_eq!(st("c"), (1, 1, 1, 1, 1));
        assert_eq!(st("d"), (16, 1, 2, 4, 2));
        assert_eq!(st("e"), (16, 2, 4, 4, 1));
        assert_eq!(st("f"), (3, 1, 3, 1, 1));
        assert_eq!(c.node("f").unwrap().features, vec!["x", "y"]);
        assert_eq!(c.node("c").unwrap().real_memory, 1);
        assert!(c
            .warnings
            .iter()
            .all(|w| !w.message.contains("does not match")));

        let c = ok("NodeName=g CPUs=10 Sockets=2 CoresPerSocket=4\n");
        assert!(c
            .warnings
            .iter()
            .any(|w| w.message.contains("does not match")));
        assert_eq!(c.node("g").unwrap().cpus, 10);
        // CPUs equal to the core count (threads not counted) is fine.
        let c = ok("NodeName=h CPUs=8 Sockets=2 CoresPerSocket=4 ThreadsPerCore=2\n");
        assert!(c
            .warnings
            .iter()
            .all(|w| !w.message.contains("does not match")));

        let e = parse("NodeName=z CPUs=0\n").unwrap_err();
        assert!(e.message.contains("at least 1"), "{e}");
    }

    #[test]
    fn node_addr_zip_and_ports() {
        let c = ok(
            "NodeName=n[1-3] NodeAddr=10.0.0.[1-3] NodeHostname=h[1-3] Port=[6001-6003]\n\
                    NodeName=m[1-2] NodeAddr=127.0.0.1 Port=7001-7002\n\
                    NodeName=k[1-2] Port=8000\n",
        );
        let n3 = c.node("n3").unwrap();
        assert_eq!(
            (n3.node_addr.as_str(), n3.node_hostname.as_str()),
            ("10.0.0.3", "h3")
        );
        assert_eq!(n3.port, Some(6003));
        let m2 = c.node("m2").unwrap();
        assert_eq!(
            (m2.node_addr.as_str(), m2.node_hostname.as_str()),
            ("127.0.0.1", "m2")
        );
        assert_eq!(m2.port, Some(7002));
        assert_eq!(c.node("k2").unwrap().port, Some(8000));
        let e = parse("NodeName=n[1-2] Port=6001-6003\n").unwrap_err();
        assert!(e.message.contains("Port has 3 entries"), "{e}");
        let e = parse("NodeName=n1 Port=x\n").unwrap_err();
        assert!(e.message.contains("invalid value 'x' for Port"), "{e}");
    }

    #[test]
    fn nodesets_and_partition_nodes() {
        let c = ok("NodeName=n[1-4] Features=cpu\n\
                    NodeName=g[1-2] Features=gpu,a100\n\
                    NodeSet=gpus Feature=gpu\n\
                    NodeSet=firsts Nodes=n[1-2],g1\n\
                    PartitionName=p1 Nodes=gpus,n4\n\
                    PartitionName=p2 Nodes=firsts\n\
                    PartitionName=p3 Nodes=all\n\
                    PartitionName=p4 Nodes=g2,n[3,1]\n");
        assert_eq!(
            names(&c.partition("p1").unwrap().nodes),
            vec!["n4", "g1", "g2"]
        );
        assert_eq!(
            names(&c.partition("p2").unwrap().nodes),
            vec!["n1", "n2", "g1"]
        );
        assert_eq!(c.partition("p3").unwrap().nodes.len(), 6);
        assert_eq!(
            names(&c.partition("p4").unwrap().nodes),
            vec!["n1", "n3", "g2"]
        );
        assert_eq!(c.node_sets.len(), 2);
        assert_eq!(names(&c.node_sets[0].nodes), vec!["g1", "g2"]);
        // n[3-1] is reversed: error at that line.
        let e = parse("NodeName=n[1-3]\nPartitionName=p Nodes=n[3-1]\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = parse("NodeName=n1\nNodeSet=s\n").unwrap_err();
        assert!(e.message.contains("needs Nodes= or Feature="), "{e}");
    }

    #[test]
    fn partition_options() {
        let c = ok("NodeName=n1\n\
                    PartitionName=a Nodes=n1 Default=YES MaxTime=1-00:00:00 DefaultTime=30 \
                    State=inactive Shared=yes:2 MaxNodes=10 MinNodes=1 Hidden=yes \
                    AllowGroups=wheel AllowAccounts=ALL AllowQos=normal,high DefMemPerCPU=1024 \
                    MaxMemPerNode=UNLIMITED Priority=7 GraceTime=30 QOS=part LLN=YES \
                    MaxCPUsPerNode=64 OverTimeLimit=5\n\
                    PartitionName=b Nodes=n1 Default=YES MaxTime=UNLIMITED MaxNodes=UNLIMITED\n");
        let a = c.partition("a").unwrap();
        assert_eq!(a.max_time, Some(1440));
        assert_eq!(a.default_time, Some(30));
        assert_eq!(a.state, PartitionStateConf::Inactive);
        assert_eq!(a.state.to_string(), "INACTIVE");
        assert_eq!(a.oversubscribe, "YES:2");
        assert_eq!((a.max_nodes, a.min_nodes, a.hidden), (Some(10), 1, true));
        assert_eq!(a.allow_groups.as_deref(), Some("wheel"));
        assert_eq!(a.allow_accounts, None);
        assert_eq!(a.allow_qos.as_deref(), Some("normal,high"));
        assert_eq!(a.def_mem_per_cpu, Some(1024));
        assert_eq!(a.max_mem_per_node, None);
        assert_eq!((a.priority_job_factor, a.priority_tier), (7, 7));
        assert_eq!(a.grace_time, 30);
        assert_eq!(a.qos.as_deref(), Some("part"));
        assert!(a.lln);
        assert_eq!(a.max_cpus_per_node, Some(64));
        assert_eq!(
            a.extra,
            vec![("OverTimeLimit".to_string(), "5".to_string())]
        );
        // Two Default=YES: the last wins, with a warning.
        assert!(!a.default);
        assert!(c.partition("b").unwrap().default);
        assert_eq!(c.default_partition().unwrap().name, "b");
        assert!(c
            .warnings
            .iter()
            .any(|w| w.message.contains("more than one Default")));
        // No Default=YES: the first.
        let c = ok("PartitionName=x\nPartitionName=y\n");
        assert_eq!(c.default_partition().unwrap().name, "x");
        assert!(c.partition("x").unwrap().nodes.is_empty());
        let e = parse("PartitionName=x\nPartitionName=x\n").unwrap_err();
        assert!(e.message.contains("duplicate partition name 'x'"), "{e}");
        assert_eq!(e.line, 2);
    }

    #[test]
    fn scalars_and_legacy() {
        let c = ok(
            "ControlMachine=head\nControlAddr=10.0.0.1\nBackupController=head2\n\
                    SlurmctldPort=6817-6820\nDefMemPerCPU=2000\nMaxMemPerNode=UNLIMITED\n\
                    ClusterName=MyCluster\nSlurmctldHost=ignored-if-legacy-only\n",
        );
        // SlurmctldHost present: legacy ignored.
        assert_eq!(c.slurmctld_hosts.len(), 1);
        assert_eq!(c.slurmctld_hosts[0].name, "ignored-if-legacy-only");
        assert_eq!(c.cluster_name, "mycluster");
        assert!(c.warnings.iter().any(|w| w.message.contains("lowercase")));
        let c = ok("ControlMachine=head\nControlAddr=10.0.0.1\nBackupController=head2\n");
        assert_eq!(
            c.slurmctld_hosts,
            vec![
                CtldHost {
                    name: "head".into(),
                    addr: Some("10.0.0.1".into())
                },
                CtldHost {
                    name: "head2".into(),
                    addr: None
                }
            ]
        );
        assert_eq!(c.ctld_address(), "10.0.0.1");
        let c = ok("SlurmctldPort=6817-6820\nDefMemPerCPU=2000\nMaxMemPerNode=UNLIMITED\n");
        assert_eq!(c.slurmctld_port, 6817);
        assert_eq!(c.def_mem_per_cpu, Some(2000));
        assert_eq!(c.max_mem_per_node, None);
        let c = ok("AuthInfo=cred_expire=60,use_client_ids\n");
        assert_eq!(c.auth_info_value("cred_expire").as_deref(), Some("60"));
        assert_eq!(c.auth_info_value("use_client_ids").as_deref(), Some(""));
        assert_eq!(c.auth_info_value("socket"), None);
        let c = ok("SlurmctldHost=a(1.1.1.1)\nSlurmctldHost=b\n");
        assert_eq!(c.get("SlurmctldHost[1]"), Some("b"));
        assert_eq!(c.slurmctld_hosts[1].address(), "b");
        // Several scalars on one line; spaces around '='.
        let c = ok("SlurmdPort=1 KillWait = 3\n");
        assert_eq!((c.slurmd_port, c.kill_wait), (1, 3));
    }

    #[test]
    fn lexing() {
        assert_eq!(strip_comment("a=b # c"), "a=b ");
        assert_eq!(strip_comment("a=\"b # c\" # d"), "a=\"b # c\" ");
        assert_eq!(strip_comment("a=b\\#c"), "a=b#c");
        assert_eq!(
            tokenize("NodeName=n1 Reason=\"a b\"  CPUs=2").unwrap(),
            vec![
                ("NodeName".to_string(), "n1".to_string()),
                ("Reason".to_string(), "a b".to_string()),
                ("CPUs".to_string(), "2".to_string()),
            ]
        );
        assert_eq!(
            tokenize("Key=").unwrap(),
            vec![("Key".to_string(), String::new())]
        );
        assert!(tokenize("=x").is_err());
        assert!(tokenize("garbage").is_err());
        assert_eq!(
            split_top_commas("gpu:2(S:0,1),mps:100"),
            vec!["gpu:2(S:0,1)".to_string(), "mps:100".to_string()]
        );
        assert!(wildcard_match(
            &"*.conf".chars().collect::<Vec<_>>(),
            &"a.conf".chars().collect::<Vec<_>>()
        ));
        assert!(!wildcard_match(
            &"?.conf".chars().collect::<Vec<_>>(),
            &"ab.conf".chars().collect::<Vec<_>>()
        ));
        // A line-type key not first.
        let e = parse("CPUs=1 NodeName=n1\n").unwrap_err();
        assert!(e.message.contains("must start its own line"), "{e}");
        // Continuation at end of file.
        let c = ok("NodeName=n1 \\\n");
        assert_eq!(c.nodes.len(), 1);
    }

    #[test]
    fn never_panics_on_garbage() {
        for text in [
            "\"",
            "=",
            "NodeName=",
            "NodeName=[",
            "PartitionName=",
            "DownNodes=",
            "NodeSet=",
            "Include",
            "Include \"\"",
            "NodeName=n1 Port=[1-99999999]",
            "SlurmctldHost=()",
            "\\",
            "NodeName=DEFAULT\nNodeName=n[0-2000000]",
            "a=b=c",
        ] {
            let _ = parse(text);
        }
    }
}

/// A node's countable hardware, as configured or as reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HwCounts {
    pub cpus: u32,
    /// Sockets × cores per socket.
    pub cores: u32,
    /// MiB.
    pub real_memory: u64,
    /// MiB.
    pub tmp_disk: u64,
}

impl HwCounts {
    pub fn new(
        cpus: u32,
        sockets: u32,
        cores_per_socket: u32,
        real_memory: u64,
        tmp_disk: u64,
    ) -> Self {
        HwCounts {
            cpus,
            cores: sockets * cores_per_socket,
            real_memory,
            tmp_disk,
        }
    }
}

/// Why `found` falls short of `conf`, in Slurm's words for the drain reason
/// (`Low RealMemory (reported:2000 < 100.00% of configured:4000)`); `None`
/// when it does not.
pub fn low_hardware(found: &HwCounts, conf: &HwCounts) -> Option<String> {
    let mut why = Vec::new();
    if found.cpus < conf.cpus {
        why.push(format!(
            "Low CPUs (reported:{} < configured:{})",
            found.cpus, conf.cpus
        ));
    } else if found.cores < conf.cores {
        why.push(format!(
            "Low socket*core count (reported:{} < configured:{})",
            found.cores, conf.cores
        ));
    }
    if found.real_memory < conf.real_memory {
        why.push(format!(
            "Low RealMemory (reported:{} < 100.00% of configured:{})",
            found.real_memory, conf.real_memory
        ));
    }
    if found.tmp_disk < conf.tmp_disk {
        why.push(format!(
            "Low TmpDisk (reported:{} < configured:{})",
            found.tmp_disk, conf.tmp_disk
        ));
    }
    (!why.is_empty()).then(|| why.join(", "))
}
