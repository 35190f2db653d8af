//! `sbatch`: submit a batch script.
//!
//! The flow follows Slurm's:
//!
//! 1. The command line is tokenised with getopt semantics ([`getopt`]): unknown
//!    options fail at once, and the "early" options act at once (`--help`,
//!    `--usage`, `--version`, `--wrap`, `-v`, `-Q`).
//! 2. The script is read: `--wrap` builds one, otherwise the file named by the
//!    first operand (or stdin when there is none, or it is `-`). It must start
//!    with `#!`.
//! 3. Options are taken from the script's `#SBATCH` lines (up to the first
//!    command), then from the `SBATCH_*` environment, then from the command
//!    line; each source is parsed into an [`Options`] and later sources
//!    override earlier ones ([`merge`]). All three go through one option table
//!    ([`SPECS`]) and one value parser ([`apply`]).
//! 4. The merged options become a [`JobDesc`] ([`build_desc`]), sent as
//!    `SubmitBatchJob` (or `TestJob` for `--test-only`); [`report`] prints the
//!    answer the way Slurm does.
//!
//! Exit codes are Slurm's: 0 on success, 1 for most errors, 255 where Slurm
//! exits with -1 (getopt failures and rejected option values).
//!
//! Nothing here reads the process environment or the current directory
//! directly except [`main`]: [`prepare`] takes them as arguments so tests can
//! drive it.

use crate::common::{self, CallError};
use getopt::HasArg;
use slurm_common::{hostlist, timefmt, users};
use slurm_proto::{JobDesc, JobRecord, RequestBody, Response, SlurmError, SLURM_VERSION};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Exit code Slurm uses when an option is rejected (`exit(-1)`).
pub const EXIT_BAD_OPTION: i32 = 255;

use crate::getopt;

/// What an option does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    TresPerTask,
    GpuBind,
    Uid,
    Gid,
    Account,
    Begin,
    Deadline,
    Distribution,
    NoKill,
    Overcommit,
    Propagate,
    TimeMin,
    KillOnInvalidDep,
    Extra,
    Wckey,
    Chdir,
    Comment,
    Array,
    Dependency,
    Reservation,
    Gres,
    CpusPerGpu,
    MemPerGpu,
    Licenses,
    Constraint,
    Gpus,
    GpusPerNode,
    GpusPerTask,
    Switches,
    Segment,
    Contiguous,
    SocketsPerNode,
    CoresPerSocket,
    ThreadsPerCore,
    ExtraNodeInfo,
    NtasksPerSocket,
    NtasksPerCore,
    NtasksPerGpu,
    External,
    CpusPerTask,
    Error,
    Exclude,
    Exclusive,
    Export,
    Help,
    Hold,
    IgnorePbs,
    Input,
    JobName,
    Mem,
    MemPerCpu,
    Nice,
    NoRequeue,
    Nodelist,
    Nodefile,
    Tmp,
    Priority,
    Mincpus,
    ExportFile,
    Nodes,
    Ntasks,
    NtasksPerNode,
    Output,
    Oversubscribe,
    Parsable,
    Partition,
    Qos,
    Quiet,
    Requeue,
    TestOnly,
    Wait,
    MailType,
    Signal,
    OpenMode,
    Clusters,
    MailUser,
    Time,
    Usage,
    Verbose,
    Version,
    Wrap,
    /// A Slurm option not implemented here: a warning (ignored), or an
    /// error when ignoring it would change what the job gets.
    Unsupported {
        fatal: bool,
    },
}

impl Key {
    /// Options acted on while the command line is first read; in `#SBATCH`
    /// lines they are ignored, as Slurm does.
    fn early(self) -> bool {
        matches!(
            self,
            Key::Help | Key::Usage | Key::Version | Key::Wrap | Key::Verbose | Key::Quiet
        )
    }
}

/// One option: its names, argument, meaning and input environment variable.
struct Spec {
    long: &'static str,
    short: Option<char>,
    arg: HasArg,
    key: Key,
    env: Option<&'static str>,
}

const fn spec(
    long: &'static str,
    short: Option<char>,
    arg: HasArg,
    key: Key,
    env: Option<&'static str>,
) -> Spec {
    Spec {
        long,
        short,
        arg,
        key,
        env,
    }
}

use HasArg::{No as NA, Optional as OA, Required as RA};
const WARN: Key = Key::Unsupported { fatal: false };
const FATAL: Key = Key::Unsupported { fatal: true };

/// The option table, used by the command line, `#SBATCH` lines and the
/// `SBATCH_*` environment alike.
#[rustfmt::skip]
static SPECS: &[Spec] = &[
    spec("account", Some('A'), RA, Key::Account, Some("SBATCH_ACCOUNT")),
    spec("begin", Some('b'), RA, Key::Begin, None),
    spec("chdir", Some('D'), RA, Key::Chdir, None),
    spec("comment", None, RA, Key::Comment, None),
    spec("array", Some('a'), RA, Key::Array, Some("SBATCH_ARRAY_INX")),
    spec("reservation", None, RA, Key::Reservation, Some("SBATCH_RESERVATION")),
    spec("external", None, NA, Key::External, None),
    spec("dependency", Some('d'), RA, Key::Dependency, None),
    spec("cpus-per-task", Some('c'), RA, Key::CpusPerTask, None),
    spec("error", Some('e'), RA, Key::Error, Some("SBATCH_ERROR")),
    spec("exclude", Some('x'), RA, Key::Exclude, None),
    spec("exclusive", None, OA, Key::Exclusive, Some("SBATCH_EXCLUSIVE")),
    spec("export", None, RA, Key::Export, Some("SBATCH_EXPORT")),
    spec("help", Some('h'), NA, Key::Help, None),
    spec("hold", Some('H'), NA, Key::Hold, None),
    spec("ignore-pbs", None, NA, Key::IgnorePbs, Some("SBATCH_IGNORE_PBS")),
    spec("input", Some('i'), RA, Key::Input, Some("SBATCH_INPUT")),
    spec("job-name", Some('J'), RA, Key::JobName, Some("SBATCH_JOB_NAME")),
    spec("mem", None, RA, Key::Mem, Some("SBATCH_MEM_PER_NODE")),
    spec("mem-per-cpu", None, RA, Key::MemPerCpu, Some("SBATCH_MEM_PER_CPU")),
    spec("nice", None, OA, Key::Nice, None),
    spec("no-requeue", None, NA, Key::NoRequeue, Some("SBATCH_NO_REQUEUE")),
    spec("nodelist", Some('w'), RA, Key::Nodelist, None),
    spec("nodes", Some('N'), RA, Key::Nodes, None),
    spec("ntasks", Some('n'), RA, Key::Ntasks, None),
    spec("ntasks-per-node", None, RA, Key::NtasksPerNode, None),
    spec("tasks-per-node", None, RA, Key::NtasksPerNode, None),
    spec("output", Some('o'), RA, Key::Output, Some("SBATCH_OUTPUT")),
    spec("oversubscribe", Some('s'), NA, Key::Oversubscribe, None),
    spec("parsable", None, NA, Key::Parsable, None),
    spec("partition", Some('p'), RA, Key::Partition, Some("SBATCH_PARTITION")),
    spec("qos", Some('q'), RA, Key::Qos, Some("SBATCH_QOS")),
    spec("quiet", Some('Q'), NA, Key::Quiet, None),
    spec("requeue", None, NA, Key::Requeue, Some("SBATCH_REQUEUE")),
    spec("test-only", None, NA, Key::TestOnly, None),
    spec("time", Some('t'), RA, Key::Time, Some("SBATCH_TIMELIMIT")),
    spec("usage", None, NA, Key::Usage, None),
    spec("verbose", Some('v'), NA, Key::Verbose, Some("SBATCH_DEBUG")),
    spec("version", Some('V'), NA, Key::Version, None),
    spec("wrap", None, RA, Key::Wrap, None),
    spec("wait", Some('W'), NA, Key::Wait, Some("SBATCH_WAIT")),
    spec("mail-type", None, RA, Key::MailType, None),
    spec("signal", None, RA, Key::Signal, Some("SBATCH_SIGNAL")),
    spec("open-mode", None, RA, Key::OpenMode, Some("SBATCH_OPEN_MODE")),
    spec("mail-user", None, RA, Key::MailUser, None),
    // Slurm options not implemented yet. Ignoring these would change what
    // the job is given or when it runs, so they are refused.
    spec("batch", None, RA, FATAL, Some("SBATCH_BATCH")),
    spec("bb", None, RA, FATAL, None),
    spec("bbf", None, RA, FATAL, None),
    spec("cluster", None, RA, Key::Clusters, None),
    spec("clusters", Some('M'), RA, Key::Clusters, Some("SBATCH_CLUSTERS")),
    spec("constraint", Some('C'), RA, Key::Constraint, Some("SBATCH_CONSTRAINT")),
    spec("container", None, RA, FATAL, Some("SBATCH_CONTAINER")),
    spec("container-id", None, RA, FATAL, Some("SBATCH_CONTAINER_ID")),
    spec("core-spec", Some('S'), RA, FATAL, Some("SBATCH_CORE_SPEC")),
    spec("cores-per-socket", None, RA, Key::CoresPerSocket, None),
    spec("cpus-per-gpu", None, RA, Key::CpusPerGpu, Some("SBATCH_CPUS_PER_GPU")),
    spec("deadline", None, RA, Key::Deadline, None),
    spec("export-file", None, RA, Key::ExportFile, None),
    spec("extra-node-info", Some('B'), RA, Key::ExtraNodeInfo, None),
    spec("gid", None, RA, Key::Gid, None),
    spec("gpus", Some('G'), RA, Key::Gpus, Some("SBATCH_GPUS")),
    spec("gpus-per-node", None, RA, Key::GpusPerNode, Some("SBATCH_GPUS_PER_NODE")),
    spec("gpus-per-socket", None, RA, FATAL, None),
    spec("gpus-per-task", None, RA, Key::GpusPerTask, Some("SBATCH_GPUS_PER_TASK")),
    spec("gres", None, RA, Key::Gres, Some("SBATCH_GRES")),
    spec("licenses", Some('L'), RA, Key::Licenses, Some("SBATCH_LICENSES")),
    spec("mem-per-gpu", None, RA, Key::MemPerGpu, Some("SBATCH_MEM_PER_GPU")),
    spec("nodefile", Some('F'), RA, Key::Nodefile, None),
    spec("ntasks-per-core", None, RA, Key::NtasksPerCore, None),
    spec("ntasks-per-gpu", None, RA, Key::NtasksPerGpu, None),
    spec("ntasks-per-socket", None, RA, Key::NtasksPerSocket, None),
    spec("sockets-per-node", None, RA, Key::SocketsPerNode, None),
    spec("switches", None, RA, Key::Switches, Some("SBATCH_REQ_SWITCH")),
    spec("segment", None, RA, Key::Segment, Some("SBATCH_SEGMENT_SIZE")),
    spec("thread-spec", None, RA, FATAL, Some("SBATCH_THREAD_SPEC")),
    spec("threads-per-core", None, RA, Key::ThreadsPerCore, Some("SBATCH_THREADS_PER_CORE")),
    spec("tres-per-task", None, RA, Key::TresPerTask, Some("SBATCH_TRES_PER_TASK")),
    spec("uid", None, RA, Key::Uid, None),
    // Slurm options not implemented yet whose absence does not change the
    // allocation: accepted with a warning.
    spec("acctg-freq", None, RA, WARN, Some("SBATCH_ACCTG_FREQ")),
    spec("cluster-constraint", None, RA, WARN, None),
    spec("contiguous", None, NA, Key::Contiguous, None),
    spec("cpu-freq", None, RA, WARN, None),
    spec("delay-boot", None, RA, WARN, Some("SBATCH_DELAY_BOOT")),
    spec("distribution", Some('m'), RA, Key::Distribution, Some("SBATCH_DISTRIBUTION")),
    spec("extra", None, RA, Key::Extra, None),
    spec("get-user-env", None, OA, WARN, Some("SBATCH_GET_USER_ENV")),
    spec("gpu-bind", None, RA, Key::GpuBind, Some("SBATCH_GPU_BIND")),
    spec("gpu-freq", None, RA, WARN, Some("SBATCH_GPU_FREQ")),
    spec("gres-flags", None, RA, WARN, Some("SBATCH_GRES_FLAGS")),
    spec("hint", None, RA, WARN, Some("SBATCH_HINT")),
    spec("kill-on-invalid-dep", None, RA, Key::KillOnInvalidDep, None),
    spec("mcs-label", None, RA, WARN, None),
    spec("mem-bind", None, RA, WARN, Some("SBATCH_MEM_BIND")),
    spec("mincpus", None, RA, Key::Mincpus, None),
    spec("network", None, RA, WARN, Some("SBATCH_NETWORK")),
    spec("no-kill", Some('k'), OA, Key::NoKill, Some("SBATCH_NO_KILL")),
    spec("overcommit", Some('O'), NA, Key::Overcommit, Some("SBATCH_OVERCOMMIT")),
    spec("power", None, RA, WARN, Some("SBATCH_POWER")),
    spec("prefer", None, RA, WARN, None),
    spec("priority", None, RA, Key::Priority, None),
    spec("profile", None, RA, WARN, Some("SBATCH_PROFILE")),
    spec("propagate", None, OA, Key::Propagate, None),
    spec("reboot", None, NA, WARN, None),
    spec("spread-job", None, NA, WARN, Some("SBATCH_SPREAD_JOB")),
    spec("time-min", None, RA, Key::TimeMin, None),
    spec("tmp", None, RA, Key::Tmp, None),
    spec("tres-bind", None, RA, WARN, Some("SBATCH_TRES_BIND")),
    spec("use-min-nodes", None, NA, WARN, Some("SBATCH_USE_MIN_NODES")),
    spec("wait-all-nodes", None, RA, WARN, Some("SBATCH_WAIT_ALL_NODES")),
    spec("wckey", None, RA, Key::Wckey, Some("SBATCH_WCKEY")),
];

/// `--extra` as every command that makes a job takes it (for
/// [`crate::compat`]).
pub(crate) const EXTRA_NOTE: crate::compat::Support = crate::compat::Support::Differs(
    "kept with the job (scontrol show job, REST); no node filtering (SchedulerParameters=extra_constraints)",
);
/// `--wckey`, likewise.
pub(crate) const WCKEY_NOTE: crate::compat::Support = crate::compat::Support::Differs(
    "with TrackWCKey=yes kept with the job and in accounting (sacct WCKey, -W), else ignored, as Slurm's; no wckey associations (AccountingStorageEnforce=wckeys)",
);

/// `--uid`, `--gid` (sbatch; the others refuse them).
pub(crate) const SUBMIT_AS_NOTE: crate::compat::Support = crate::compat::Support::Differs(
    "root only, as Slurm's sbatch (the controller takes it from root and SlurmUser, and checks); the partition's access is checked for the user the job runs as, not the invoking one",
);

/// Options of every command that makes a job (sbatch, srun, salloc) that
/// are acted on but differ from Slurm's.
pub(crate) const JOB_NOTES: &[(&str, crate::compat::Support)] = &[
    ("extra", EXTRA_NOTE),
    ("wckey", WCKEY_NOTE),
    ("gpu-bind", GPU_BIND_NOTE),
];

/// sbatch's and salloc's `--gpu-bind`.
const GPU_BIND_NOTE: crate::compat::Support = crate::compat::Support::Differs(
    "given to the job's steps (SLURM_GPU_BIND): per_task, single, map_gpu and mask_gpu set each task's CUDA_VISIBLE_DEVICES; closest binds nothing",
);

/// sbatch's own.
const SBATCH_NOTES: &[(&str, crate::compat::Support)] =
    &[("uid", SUBMIT_AS_NOTE), ("gid", SUBMIT_AS_NOTE)];

/// The table as [`crate::compat`] reports it: refused options are not yet
/// there, warned ones differ.
pub(crate) fn compat_options() -> Vec<crate::compat::Known> {
    use crate::compat::{Known, Support};
    SPECS
        .iter()
        .map(|s| Known {
            short: s.short,
            long: Some(s.long),
            optional: s.arg == HasArg::Optional,
            support: match s.key {
                Key::Unsupported { fatal: true } => {
                    Support::NotYet("refused with an error: not implemented yet")
                }
                Key::Unsupported { fatal: false } => crate::compat::IGNORED_NOTE,
                _ => JOB_NOTES
                    .iter()
                    .chain(SBATCH_NOTES)
                    .find(|(n, _)| *n == s.long)
                    .map_or(Support::Works, |(_, d)| d.clone()),
            },
        })
        .collect()
}

/// The `SBATCH_*` variables the table reads.
pub(crate) fn compat_env_in() -> Vec<String> {
    SPECS
        .iter()
        .filter_map(|s| s.env.map(String::from))
        .chain(ENV_ALIASES.iter().map(|(_, var, _)| var.to_string()))
        .chain([
            common::EXIT_ERROR_ENV.to_string(),
            // The job's umask (see `job_desc`).
            "SLURM_UMASK".to_string(),
        ])
        .collect()
}

fn getopt_table() -> Vec<getopt::Opt> {
    SPECS
        .iter()
        .enumerate()
        .map(|(i, s)| getopt::Opt {
            long: Some(s.long),
            short: s.short,
            has_arg: s.arg,
            id: i,
        })
        .collect()
}

/// Where an option came from (for the precedence rules and messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Script,
    Env,
    Cli,
}

/// Options as one source gives them; `None` = not given by that source.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Options {
    pub account: Option<String>,
    /// `--array` as given (validated).
    pub array: Option<String>,
    /// `--dependency` as given (validated).
    pub dependency: Option<String>,
    pub reservation: Option<String>,
    pub external: Option<bool>,
    pub gres: Option<String>,
    pub cpus_per_gpu: Option<u32>,
    pub mem_per_gpu: Option<u64>,
    pub licenses: Option<String>,
    pub constraint: Option<String>,
    pub gpus: Option<String>,
    pub gpus_per_node: Option<String>,
    pub gpus_per_task: Option<String>,
    /// `--switches=count[@max-time]`: (count, wait in seconds).
    pub switches: Option<(u32, Option<u32>)>,
    /// `--segment`.
    pub segment: Option<u32>,
    /// `--exclusive=topo`.
    pub exclusive_topo: Option<bool>,
    pub contiguous: Option<bool>,
    pub sockets_per_node: Option<u32>,
    pub cores_per_socket: Option<u32>,
    pub threads_per_core: Option<u32>,
    pub ntasks_per_socket: Option<u32>,
    /// `--ntasks-per-core`.
    pub ntasks_per_core: Option<u32>,
    /// `--ntasks-per-gpu`.
    pub ntasks_per_gpu: Option<u32>,
    /// `--tmp`: MiB of TmpDisk per node.
    pub tmp: Option<u64>,
    /// `--priority`.
    pub priority: Option<u32>,
    /// `--mincpus`.
    pub mincpus: Option<u32>,
    /// `--export-file`: a file (or a descriptor's number) of `NAME=value`
    /// definitions separated by NULs.
    pub export_file: Option<String>,
    /// Unix seconds.
    pub begin: Option<i64>,
    /// `--deadline` (Unix seconds).
    pub deadline: Option<i64>,
    /// `--propagate[=LIMITS]` (checked; bare: ALL).
    pub propagate: Option<String>,
    /// `-m` (checked): for the job's steps (`SLURM_DISTRIBUTION`).
    pub distribution: Option<String>,
    /// `-k/--no-kill[=off]`.
    pub no_kill: Option<bool>,
    /// `-O/--overcommit`: CPUs as for one task per node.
    pub overcommit: Option<bool>,
    /// `--time-min` (minutes).
    pub time_min: Option<u32>,
    /// `--kill-on-invalid-dep=yes|no`.
    pub kill_on_invalid_dep: Option<bool>,
    pub extra: Option<String>,
    pub wckey: Option<String>,
    /// `--uid` / `--gid` (root only), as numbers.
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub chdir: Option<String>,
    pub comment: Option<String>,
    /// `--gpu-bind` (checked).
    pub gpu_bind: Option<String>,
    /// `--mail-type` (checked, upper case) and `--mail-user`.
    pub mail_type: Option<String>,
    pub mail_user: Option<String>,
    /// `--signal` (checked).
    pub signal: Option<String>,
    /// `--open-mode`: `append` or `truncate`.
    pub open_mode: Option<String>,
    /// `-M`: the clusters named (this one is the only one there is).
    pub clusters: Option<String>,
    pub cpus_per_task: Option<u32>,
    /// `--tres-per-task` as given (its CPUs and GPUs are in
    /// `cpus_per_task` and `gpus_per_task`).
    pub tres_per_task: Option<String>,
    /// This source's `--tres-per-task` gave CPUs / GPUs per task (the
    /// same source may not give them again with `-c`/`--gpus-per-task`).
    pub tres_cpus: bool,
    pub tres_gpus: bool,
    pub error: Option<String>,
    /// `-x` as given (hostlist expression or file name).
    pub exclude: Option<String>,
    pub exclusive: Option<bool>,
    /// `-s`/`--oversubscribe`.
    pub oversubscribe: Option<bool>,
    pub export: Option<String>,
    pub hold: Option<bool>,
    /// `--ignore-pbs`: `#PBS` lines are not read.
    pub ignore_pbs: Option<bool>,
    pub input: Option<String>,
    pub job_name: Option<String>,
    /// MiB per node; 0 = all of the node's memory.
    pub mem: Option<u64>,
    /// MiB per CPU.
    pub mem_per_cpu: Option<u64>,
    pub nice: Option<i32>,
    /// `-w` as given (hostlist expression or file name).
    pub nodelist: Option<String>,
    /// (min, max); max `None` = no maximum.
    pub nodes: Option<(u32, Option<u32>)>,
    pub ntasks: Option<u32>,
    pub ntasks_per_node: Option<u32>,
    pub output: Option<String>,
    pub parsable: Option<bool>,
    pub partition: Option<String>,
    pub qos: Option<String>,
    pub requeue: Option<bool>,
    pub test_only: Option<bool>,
    /// `-W`: wait for the job to end and exit with its code.
    pub wait: Option<bool>,
    /// Minutes; `Some(None)` = UNLIMITED.
    pub time: Option<Option<u32>>,
}

macro_rules! overlay_fields {
    ($dst:expr, $src:expr, $($f:ident),*) => {
        $( if $src.$f.is_some() { $dst.$f = $src.$f.clone(); } )*
    };
}

impl Options {
    /// Fields set in `later` replace those in `self`.
    pub fn overlay(&mut self, later: &Options) {
        overlay_fields!(
            self,
            later,
            account,
            array,
            dependency,
            reservation,
            external,
            gres,
            cpus_per_gpu,
            mem_per_gpu,
            licenses,
            constraint,
            gpus,
            gpus_per_node,
            gpus_per_task,
            tres_per_task,
            switches,
            segment,
            exclusive_topo,
            contiguous,
            sockets_per_node,
            cores_per_socket,
            threads_per_core,
            ntasks_per_socket,
            ntasks_per_core,
            ntasks_per_gpu,
            tmp,
            priority,
            mincpus,
            export_file,
            begin,
            deadline,
            distribution,
            no_kill,
            overcommit,
            propagate,
            time_min,
            kill_on_invalid_dep,
            extra,
            wckey,
            uid,
            gid,
            chdir,
            comment,
            gpu_bind,
            cpus_per_task,
            error,
            exclude,
            exclusive,
            oversubscribe,
            export,
            hold,
            ignore_pbs,
            input,
            job_name,
            mem,
            mem_per_cpu,
            nice,
            nodelist,
            nodes,
            ntasks,
            ntasks_per_node,
            output,
            parsable,
            partition,
            qos,
            requeue,
            test_only,
            time,
            wait,
            mail_type,
            mail_user,
            signal,
            open_mode,
            clusters
        );
    }
}

/// A failure that ends the command: what to print on stderr, and the exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fail {
    pub stderr: String,
    pub code: i32,
}

impl Fail {
    fn error(msg: impl std::fmt::Display, code: i32) -> Fail {
        Fail {
            stderr: format!("sbatch: error: {msg}\n"),
            code,
        }
    }
    fn fatal(msg: impl std::fmt::Display) -> Fail {
        Fail {
            stderr: format!("sbatch: fatal: {msg}\n"),
            code: 1,
        }
    }
    /// A getopt failure: glibc's line and Slurm's hint.
    fn getopt(line: &str) -> Fail {
        Fail {
            stderr: format!("{line}\nTry \"sbatch --help\" for more information\n"),
            code: EXIT_BAD_OPTION,
        }
    }
}

/// `--tres-per-task` and its sibling option from one source, as Slurm
/// refuses them.
fn tres_twice(tres: &str, option: &str) -> Fail {
    Fail::fatal(slurm_common::tres::given_twice(tres, option))
}

/// Slurm's `parse_int`: a whole decimal number (optional sign, leading
/// blanks), not negative, and positive when `positive`.
/// `-B sockets[:cores[:threads]]` (`*` leaves one free).
pub fn parse_extra_node_info(v: &str) -> Option<(Option<u32>, Option<u32>, Option<u32>)> {
    let parts: Vec<&str> = v.split(':').collect();
    if parts.is_empty() || parts.len() > 3 {
        return None;
    }
    let mut out = [None, None, None];
    for (k, p) in parts.iter().enumerate() {
        out[k] = match p.trim() {
            "*" => None,
            x => Some(x.parse::<u32>().ok().filter(|n| *n > 0)?),
        };
    }
    Some((out[0], out[1], out[2]))
}

/// `--switches=count[@max-time]`: the count and the wait in seconds.
pub fn parse_switches(v: &str) -> Option<(u32, Option<u32>)> {
    let (count, wait) = match v.split_once('@') {
        Some((c, w)) => (c, Some(w)),
        None => (v, None),
    };
    let count: u32 = count.trim().parse().ok()?;
    let wait = match wait {
        Some(w) => Some(
            timefmt::parse_time_limit(w)
                .ok()
                .flatten()?
                .saturating_mul(60),
        ),
        None => None,
    };
    Some((count, wait))
}

pub fn parse_int(name: &str, val: &str, positive: bool) -> Result<u32, Fail> {
    let t = val.trim_start();
    let (neg, digits) = match t.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let bad = || Fail::error(format!("Invalid numeric value \"{val}\" for {name}."), 1);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = match digits.parse::<u64>() {
        Ok(n) => n,
        Err(_) if !neg => {
            return Err(Fail::error(
                format!("Numeric argument ({digits}) too large for {name}."),
                1,
            ))
        }
        Err(_) => return Err(bad()),
    };
    if (neg && n != 0) || (positive && n == 0) {
        return Err(bad());
    }
    if n > i32::MAX as u64 {
        return Err(Fail::error(
            format!("Numeric argument ({n}) too large for {name}."),
            1,
        ));
    }
    Ok(n as u32)
}

/// Slurm's node count word: a number with an optional `k` (×1024) or `m`
/// (×1024²) suffix; `None` when it is not one. Empty is 0.
fn str_to_nodes(s: &str) -> Option<u64> {
    let t = s.trim();
    if t.is_empty() {
        return Some(0);
    }
    let end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    if end == 0 {
        return None;
    }
    let n: u64 = t[..end].parse().ok()?;
    let mult = match t[end..].trim_end() {
        "" => 1,
        "k" | "K" => 1024,
        "m" | "M" => 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(mult).filter(|v| *v <= i32::MAX as u64)
}

/// `-N min[-max]`.
pub fn parse_nodes(arg: &str) -> Result<(u32, Option<u32>), Fail> {
    let invalid = |s: &str| {
        Fail::error(
            format!("\"{s}\" is not a valid node count"),
            EXIT_BAD_OPTION,
        )
    };
    let (min, max) = match arg.split_once('-') {
        Some((lo, hi)) => {
            let min = str_to_nodes(lo).ok_or_else(|| invalid(lo))?;
            let max = str_to_nodes(hi).ok_or_else(|| invalid(hi))?;
            (min.max(1), max)
        }
        None => {
            if arg.trim().is_empty() {
                return Err(invalid(arg));
            }
            let n = str_to_nodes(arg).ok_or_else(|| invalid(arg))?;
            (n, n)
        }
    };
    if max != 0 && max < min {
        return Err(Fail::error(
            format!("Maximum node count {max} is less than minimum node count {min}"),
            EXIT_BAD_OPTION,
        ));
    }
    Ok((min as u32, (max != 0).then_some(max as u32)))
}

/// A memory size as `--mem` takes it: a whole number with an optional unit
/// `K`, `M` (default), `G` or `T` (optionally followed by `B`), in MiB
/// (kibibytes round up). `None` when it is not one.
pub fn parse_mem_mib(s: &str) -> Option<u64> {
    let t = s.trim();
    let end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    if end == 0 {
        return None;
    }
    let n: u64 = t[..end].parse().ok()?;
    let unit = &t[end..];
    let unit = unit
        .strip_suffix('B')
        .or_else(|| unit.strip_suffix('b'))
        .filter(|u| !u.is_empty())
        .unwrap_or(unit);
    match unit {
        "" | "m" | "M" => Some(n),
        "k" | "K" => Some(n.div_ceil(1024)),
        "g" | "G" => n.checked_mul(1024),
        "t" | "T" => n.checked_mul(1024 * 1024),
        _ => None,
    }
}

/// Values that need the outside world: the time (for `--begin`).
#[derive(Debug, Clone)]
pub struct Context {
    /// The directory sbatch runs in (absolute).
    pub cwd: PathBuf,
    pub hostname: String,
    /// Unix seconds.
    pub now: i64,
    /// sbatch's scheduling priority (`SLURM_PRIO_PROCESS`).
    pub prio: i32,
    /// Who runs sbatch (`--uid`/`--gid` are root's).
    pub uid: u32,
    /// sbatch's umask as the job is told it (`SLURM_UMASK`, `0022`).
    pub umask: String,
}

/// Applies one option from `src` to `opts`. Warnings for ignored options
/// are appended to `warnings`.
fn apply(
    opts: &mut Options,
    spec: &Spec,
    val: Option<&str>,
    src: Source,
    ctx: &Context,
    warnings: &mut Vec<String>,
) -> Result<(), Fail> {
    let v = val.unwrap_or_default();
    let s = || Some(v.to_string());
    let path = || {
        if v.eq_ignore_ascii_case("none") {
            Some("/dev/null".to_string())
        } else {
            Some(v.to_string())
        }
    };
    match spec.key {
        Key::Account => opts.account = s(),
        Key::Begin => {
            let t = timefmt::parse_timestamp(v, ctx.now)
                .map_err(|_| Fail::error("Invalid --begin specification", EXIT_BAD_OPTION))?;
            opts.begin = Some(t);
        }
        Key::Deadline => {
            let t = timefmt::parse_timestamp(v, ctx.now)
                .map_err(|_| Fail::error("Invalid --deadline specification", EXIT_BAD_OPTION))?;
            opts.deadline = Some(t);
        }
        Key::NoKill => {
            opts.no_kill = Some(parse_no_kill(val).map_err(|e| Fail::error(e, EXIT_BAD_OPTION))?)
        }
        Key::Overcommit => opts.overcommit = Some(true),
        Key::Distribution => {
            slurm_common::cpubind::parse_distribution(v)
                .map_err(|e| Fail::error(e, EXIT_BAD_OPTION))?;
            opts.distribution = s();
        }
        Key::Propagate => {
            let v = val.unwrap_or("ALL");
            slurm_common::rlimits::parse_list(v).map_err(|e| {
                Fail::error(
                    format!("Invalid --propagate specification: {e}"),
                    EXIT_BAD_OPTION,
                )
            })?;
            opts.propagate = Some(v.to_string());
        }
        Key::TimeMin => {
            let t = timefmt::parse_time_limit(v)
                .map_err(|_| Fail::error("Invalid --time-min specification", EXIT_BAD_OPTION))?;
            opts.time_min = t.filter(|m| *m != 0);
        }
        Key::KillOnInvalidDep => {
            opts.kill_on_invalid_dep = Some(parse_yes_no(v).ok_or_else(|| {
                Fail::error(
                    "Invalid --kill-on-invalid-dep specification",
                    EXIT_BAD_OPTION,
                )
            })?)
        }
        Key::Extra => opts.extra = s(),
        Key::Wckey => opts.wckey = s(),
        Key::Uid | Key::Gid => {
            let what = if matches!(spec.key, Key::Uid) {
                "uid"
            } else {
                "gid"
            };
            if ctx.uid != 0 {
                return Err(Fail::error(
                    format!("--{what} only permitted by root user"),
                    EXIT_BAD_OPTION,
                ));
            }
            let id = match spec.key {
                Key::Uid => users::uid_from_string(v),
                _ => users::gid_from_string(v),
            }
            .ok_or_else(|| {
                Fail::error(format!("Invalid --{what} specification"), EXIT_BAD_OPTION)
            })?;
            if users::is_nobody(id) {
                return Err(Fail::error(
                    format!("Rejecting --{what} as nobody specification"),
                    EXIT_BAD_OPTION,
                ));
            }
            if matches!(spec.key, Key::Uid) {
                opts.uid = Some(id);
            } else {
                opts.gid = Some(id);
            }
        }
        Key::Chdir => opts.chdir = s(),
        Key::Comment => opts.comment = s(),
        Key::GpuBind => {
            if !crate::srun::valid_gpu_bind(v) {
                return Err(Fail::error(format!("Invalid --gpu-bind argument: {v}"), 1));
            }
            opts.gpu_bind = s();
        }
        Key::MailType => {
            let t =
                slurm_common::mail::parse_types(v).map_err(|e| Fail::error(e, EXIT_BAD_OPTION))?;
            // NONE after another type clears it (kept as an empty list).
            opts.mail_type = Some(t.unwrap_or_default());
        }
        Key::Clusters => opts.clusters = s(),
        Key::OpenMode => {
            // As Slurm's: the first letter decides.
            opts.open_mode = Some(
                match v.chars().next().map(|c| c.to_ascii_lowercase()) {
                    Some('a') => "append",
                    Some('t') => "truncate",
                    _ => {
                        return Err(Fail::error(
                            format!("Invalid --open-mode argument: {v}. Ignored"),
                            EXIT_BAD_OPTION,
                        ))
                    }
                }
                .to_string(),
            );
        }
        Key::Signal => {
            slurm_common::signal::parse_warning(v).map_err(|e| Fail::error(e, EXIT_BAD_OPTION))?;
            opts.signal = s();
        }
        Key::MailUser => {
            slurm_common::mail::check_user(v).map_err(|e| Fail::error(e, EXIT_BAD_OPTION))?;
            opts.mail_user = s();
        }
        Key::Array => {
            // Syntax only: the controller applies the cluster's MaxArraySize
            // (at most 4000001, the largest Slurm allows).
            slurm_common::jobspec::parse_array(v, 4_000_001)
                .map_err(|e| Fail::error(e.to_string(), 1))?;
            opts.array = s();
        }
        Key::Reservation => opts.reservation = s(),
        Key::CpusPerGpu => match v.parse::<u32>() {
            Ok(n) if n > 0 => opts.cpus_per_gpu = Some(n),
            _ => return Err(Fail::error(format!("Invalid --cpus-per-gpu value: {v}"), 1)),
        },
        Key::MemPerGpu => match parse_mem_mib(v) {
            Some(m) => opts.mem_per_gpu = Some(m),
            None => return Err(Fail::error(format!("Invalid --mem-per-gpu value: {v}"), 1)),
        },
        Key::Licenses => {
            slurm_common::licenses::parse(v).map_err(|e| Fail::error(e, 1))?;
            opts.licenses = s();
        }
        Key::Constraint => {
            slurm_common::constraint::Constraint::parse(v).map_err(|e| Fail::error(e, 1))?;
            opts.constraint = s();
        }
        Key::Gres => {
            slurm_common::gres::parse_list(v).map_err(|e| Fail::error(e, 1))?;
            opts.gres = s();
        }
        Key::Gpus | Key::GpusPerNode | Key::GpusPerTask => {
            slurm_common::gres::parse_gpus(v).map_err(|e| Fail::error(e, 1))?;
            if spec.key == Key::GpusPerTask && opts.tres_gpus {
                // In the environment both may be: the TRES wins.
                if src == Source::Env {
                    return Ok(());
                }
                return Err(tres_twice("gres/gpu", "gpus-per-task"));
            }
            match spec.key {
                Key::Gpus => opts.gpus = s(),
                Key::GpusPerNode => opts.gpus_per_node = s(),
                _ => opts.gpus_per_task = s(),
            }
        }
        Key::External => opts.external = Some(true),
        Key::Dependency => {
            slurm_common::jobspec::parse_dependency(v)
                .map_err(|e| Fail::error(e.to_string(), 1))?;
            opts.dependency = s();
        }
        Key::CpusPerTask => {
            if opts.tres_cpus {
                if src == Source::Env {
                    return Ok(());
                }
                return Err(tres_twice("cpu", "cpus-per-task"));
            }
            opts.cpus_per_task = Some(parse_int("--cpus-per-task", v, true)?)
        }
        Key::TresPerTask => {
            use slurm_common::tres::{parse, TresError};
            let t = parse(v).map_err(|e| match e {
                TresError::Fatal(m) => Fail::fatal(m),
                e @ TresError::Invalid(_) => {
                    Fail::error(format!("Batch job submission failed: {e}"), 1)
                }
            })?;
            if let Some(c) = t.cpus {
                if opts.cpus_per_task.is_some() && !opts.tres_cpus && src != Source::Env {
                    return Err(tres_twice("cpu", "cpus-per-task"));
                }
                opts.cpus_per_task = Some(c);
                opts.tres_cpus = true;
            }
            if let Some(g) = t.gpus {
                if opts.gpus_per_task.is_some() && !opts.tres_gpus && src != Source::Env {
                    return Err(tres_twice("gres/gpu", "gpus-per-task"));
                }
                opts.gpus_per_task = Some(g);
                opts.tres_gpus = true;
            }
            opts.tres_per_task = s();
        }
        Key::Error => opts.error = path(),
        Key::Exclude => opts.exclude = s(),
        Key::Exclusive => {
            let excl = match val {
                None => true,
                Some(a) if a.eq_ignore_ascii_case("exclusive") => true,
                Some(a) if a.eq_ignore_ascii_case("oversubscribe") => false,
                Some(a) if a.eq_ignore_ascii_case("topo") => {
                    // Whole leaves or blocks; the controller gives whole
                    // nodes with them.
                    opts.exclusive_topo = Some(true);
                    true
                }
                Some(a) if a.eq_ignore_ascii_case("user") || a.eq_ignore_ascii_case("mcs") => {
                    warnings.push(format!(
                        "--exclusive={a} is not supported yet; the job gets whole nodes (--exclusive)"
                    ));
                    true
                }
                Some(_) => {
                    return Err(Fail::error(
                        "Invalid --exclusive specification",
                        EXIT_BAD_OPTION,
                    ))
                }
            };
            opts.exclusive = Some(excl);
        }
        Key::Export => opts.export = s(),
        Key::Hold => opts.hold = Some(true),
        Key::IgnorePbs => opts.ignore_pbs = Some(true),
        Key::Input => opts.input = path(),
        Key::JobName => opts.job_name = s(),
        Key::Mem => {
            let m = parse_mem_mib(v)
                .ok_or_else(|| Fail::error("Invalid --mem specification", EXIT_BAD_OPTION))?;
            opts.mem = Some(m);
        }
        Key::MemPerCpu => {
            let m = parse_mem_mib(v).ok_or_else(|| {
                Fail::error("Invalid --mem-per-cpu specification", EXIT_BAD_OPTION)
            })?;
            opts.mem_per_cpu = Some(m);
        }
        Key::Nice => {
            // strtoll: leading number, anything after it ignored.
            let n: i64 = match val {
                None => 100,
                Some(a) => crate::fmt::leading_int(a),
            };
            const LIMIT: i64 = 2_147_483_645; // NICE_OFFSET - 3
            if n.abs() > LIMIT {
                return Err(Fail::error(
                    format!("Invalid --nice value, out of range (+/- {LIMIT})"),
                    EXIT_BAD_OPTION,
                ));
            }
            opts.nice = Some(n as i32);
        }
        Key::NoRequeue => opts.requeue = Some(false),
        Key::Nodelist => opts.nodelist = s(),
        Key::Mincpus => opts.mincpus = Some(parse_int("--mincpus", v, true)?),
        Key::ExportFile => opts.export_file = s(),
        Key::Priority => {
            opts.priority = Some(parse_priority(v).map_err(|e| Fail::error(e, EXIT_BAD_OPTION))?)
        }
        Key::Tmp => {
            opts.tmp = Some(
                parse_mem_mib(v)
                    .ok_or_else(|| Fail::error("Invalid --tmp specification", EXIT_BAD_OPTION))?,
            )
        }
        Key::Nodefile => {
            let names = crate::common::read_hostfile(v)
                .ok_or_else(|| Fail::error("Invalid --nodefile node file", 255))?;
            opts.nodelist = Some(names.join(","));
        }
        Key::Nodes => opts.nodes = Some(parse_nodes(v)?),
        Key::Ntasks => opts.ntasks = Some(parse_int("--ntasks", v, true)?),
        Key::NtasksPerNode => opts.ntasks_per_node = Some(parse_int("--ntasks-per-node", v, true)?),
        Key::Output => opts.output = path(),
        Key::Oversubscribe => {
            opts.exclusive = Some(false);
            opts.oversubscribe = Some(true);
        }
        Key::Parsable => opts.parsable = Some(true),
        Key::Partition => opts.partition = s(),
        Key::Qos => opts.qos = s(),
        Key::Requeue => opts.requeue = Some(true),
        Key::TestOnly => opts.test_only = Some(true),
        Key::Wait => opts.wait = Some(true),
        Key::Switches => {
            let sw = parse_switches(v)
                .ok_or_else(|| Fail::error("Invalid --switches specification", EXIT_BAD_OPTION))?;
            opts.switches = Some(sw);
        }
        Key::Contiguous => opts.contiguous = Some(true),
        Key::SocketsPerNode => {
            opts.sockets_per_node = Some(parse_int("--sockets-per-node", v, true)?)
        }
        Key::CoresPerSocket => {
            opts.cores_per_socket = Some(parse_int("--cores-per-socket", v, true)?)
        }
        Key::ThreadsPerCore => {
            opts.threads_per_core = Some(parse_int("--threads-per-core", v, true)?)
        }
        Key::NtasksPerSocket => {
            opts.ntasks_per_socket = Some(parse_int("--ntasks-per-socket", v, true)?)
        }
        Key::NtasksPerCore => opts.ntasks_per_core = Some(parse_int("--ntasks-per-core", v, true)?),
        Key::NtasksPerGpu => opts.ntasks_per_gpu = Some(parse_int("--ntasks-per-gpu", v, true)?),
        Key::ExtraNodeInfo => {
            let (s, c, t) = parse_extra_node_info(v).ok_or_else(|| {
                Fail::error("Invalid --extra-node-info specification", EXIT_BAD_OPTION)
            })?;
            opts.sockets_per_node = s.or(opts.sockets_per_node);
            opts.cores_per_socket = c.or(opts.cores_per_socket);
            opts.threads_per_core = t.or(opts.threads_per_core);
        }
        Key::Segment => {
            let n = parse_int("--segment", v, false)?;
            if n == 0 {
                return Err(Fail::error(
                    "Invalid --segment specification",
                    EXIT_BAD_OPTION,
                ));
            }
            opts.segment = Some(n);
        }
        Key::Time => {
            let t = timefmt::parse_time_limit(v)
                .map_err(|_| Fail::error("Invalid --time specification", EXIT_BAD_OPTION))?;
            // A limit of 0 asks for no limit, as in Slurm.
            opts.time = Some(t.filter(|m| *m != 0));
        }
        Key::Unsupported { fatal } => {
            let what = match src {
                Source::Env => format!("{} (--{})", spec.env.unwrap_or_default(), spec.long),
                _ => format!("--{}", spec.long),
            };
            if fatal {
                return Err(Fail::error(format!("{what} is not supported yet"), 1));
            }
            warnings.push(format!("{what} is not supported yet and was ignored"));
        }
        // Early options are handled where the command line is first read.
        Key::Help | Key::Usage | Key::Version | Key::Wrap | Key::Verbose | Key::Quiet => {}
    }
    Ok(())
}

/// What sbatch's options tell the batch script, as Slurm's output
/// variables: `--export` (which the job's `srun`s then follow) and `-m`.
pub fn option_env(o: &Options) -> Vec<(&'static str, String)> {
    let mut env = Vec::new();
    if let Some(e) = &o.export {
        env.push(("SLURM_EXPORT_ENV", e.clone()));
    }
    if let Some(d) = &o.distribution {
        env.push(("SLURM_DISTRIBUTION", d.clone()));
    }
    if o.overcommit == Some(true) {
        env.push(("SLURM_OVERCOMMIT", "1".into()));
    }
    env
}

/// `-k/--no-kill[=off]`: on without a value (or `set`, `yes`, `1`, as
/// its variables say it), `off` (`no`, `0`) turns it off.
pub fn parse_no_kill(v: Option<&str>) -> Result<bool, String> {
    match v.map(str::to_ascii_lowercase).as_deref() {
        None | Some("" | "set" | "yes" | "on" | "1") => Ok(true),
        Some("off" | "no" | "0") => Ok(false),
        Some(_) => Err("Invalid --no-kill specification".into()),
    }
}

/// `yes` or `no` (`--kill-on-invalid-dep`), as Slurm reads them.
pub fn parse_yes_no(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    }
}

/// `strtoll(s, NULL, 10)`: the leading integer of `s` (0 if none), clamped.
/// `--priority=N|TOP` as Slurm reads it (TOP: the highest there is).
pub fn parse_priority(v: &str) -> Result<u32, String> {
    const NO_VAL: i64 = 0xffff_fffe;
    if v.trim().eq_ignore_ascii_case("TOP") {
        return Ok((NO_VAL - 1) as u32);
    }
    match crate::fmt::leading_int(v) {
        p if p < 0 => Err("Priority must be >= 0".into()),
        p if p >= NO_VAL => Err(format!("Priority must be < {NO_VAL}")),
        p => Ok(p as u32),
    }
}

/// Parses getopt output from one source into `Options`.
fn options_from(
    parsed: &[(usize, Option<String>)],
    src: Source,
    ctx: &Context,
    warnings: &mut Vec<String>,
) -> Result<Options, Fail> {
    let mut o = Options::default();
    for (id, val) in parsed {
        let Some(spec) = SPECS.get(*id) else { continue };
        if spec.key.early() {
            continue;
        }
        apply(&mut o, spec, val.as_deref(), src, ctx, warnings)?;
    }
    Ok(o)
}

/// One `#SBATCH` word, Slurm-style: blanks separate words, `'` and `"` quote
/// (and are removed), `\` makes the next character literal, an unquoted `#`
/// starts a comment. Returns the word and the rest of the line, `None` at
/// the end of the line (or at an empty word, as Slurm stops there too).
fn directive_word(line: &str) -> Result<Option<(String, &str)>, char> {
    let s = line.trim_start();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut escape = false;
    let mut end = s.len();
    for (i, c) in s.char_indices() {
        if escape {
            escape = false;
            word.push(c);
            continue;
        }
        if c == '\\' {
            escape = true;
            continue;
        }
        if let Some(q) = quote {
            if c == q {
                quote = None;
            } else {
                word.push(c);
            }
            continue;
        }
        if c == '"' || c == '\'' {
            quote = Some(c);
            continue;
        }
        if c == '#' || c.is_whitespace() {
            end = i;
            break;
        }
        word.push(c);
    }
    if let Some(q) = quote {
        return Err(q);
    }
    if word.is_empty() {
        return Ok(None);
    }
    let rest = &s[end..];
    // A comment ends the line.
    let rest = if rest.starts_with('#') { "" } else { rest };
    Ok(Some((word, rest)))
}

/// The words of a script's directive lines (those `directive` gives the
/// rest of), read until the first line that is neither blank nor a comment.
fn directive_words(
    script: &str,
    file: &str,
    mut directive: impl FnMut(&str) -> Option<&str>,
) -> Result<Vec<String>, Fail> {
    let mut words = Vec::new();
    for (n, line) in script.split('\n').enumerate() {
        let Some(mut rest) = directive(line) else {
            match line.trim_start().chars().next() {
                None | Some('#') => continue,
                Some(_) => break,
            }
        };
        loop {
            match directive_word(rest) {
                Ok(Some((w, r))) => {
                    words.push(w);
                    rest = r;
                }
                Ok(None) => break,
                Err(q) => {
                    return Err(Fail::fatal(format!(
                        "{file}: line {}: Unmatched `{q}` in [{line}]",
                        n + 1
                    )))
                }
            }
        }
    }
    Ok(words)
}

/// The words of a script's `#SBATCH` (and legacy `#SLURM`) lines, read until
/// the first line that is neither blank nor a comment. Also returns whether
/// `#SLURM` was seen (Slurm warns about it).
pub fn script_directives(script: &str, file: &str) -> Result<(Vec<String>, bool), Fail> {
    let mut legacy = false;
    let words = directive_words(script, file, |line| {
        line.strip_prefix("#SBATCH").or_else(|| {
            let r = line.strip_prefix("#SLURM");
            legacy |= r.is_some();
            r
        })
    })?;
    Ok((words, legacy))
}

/// `sbatch -v`: the options given, with the value each ends up with (the
/// command line over the environment over `#SBATCH` lines), in the
/// table's order, as Slurm's sbatch lists them.
pub fn defined_options(
    script: &[(usize, Option<String>)],
    env: &[(String, String)],
    cli: &[(usize, Option<String>)],
    verbose: u32,
) -> String {
    let mut value: Vec<Option<String>> = vec![None; SPECS.len()];
    let mut set = |id: usize, v: Option<&str>| {
        if let Some(slot) = value.get_mut(id) {
            *slot = Some(v.map(str::to_string).unwrap_or_else(|| "set".into()));
        }
    };
    for (id, v) in script {
        set(*id, v.as_deref());
    }
    for (id, spec) in SPECS.iter().enumerate() {
        if let Some(v) = spec_env(spec, env) {
            set(id, (spec.arg != HasArg::No).then_some(v));
        }
    }
    for (id, v) in cli {
        set(*id, v.as_deref());
    }
    let rule = "sbatch: -------------------- --------------------\n";
    let mut out = String::from("sbatch: defined options\n");
    out.push_str(rule);
    for (id, spec) in SPECS.iter().enumerate() {
        let shown = if spec.key == Key::Verbose {
            Some(verbose.to_string())
        } else {
            value[id].clone()
        };
        if let Some(v) = shown {
            out.push_str(&format!("sbatch: {:<20}: {v}\n", spec.long));
        }
    }
    out.push_str(rule);
    out.push_str("sbatch: end of defined options\n");
    out
}

/// Options from `#SBATCH` lines.
fn script_options(
    script: &str,
    file: &str,
    ctx: &Context,
    warnings: &mut Vec<String>,
) -> Result<Options, Fail> {
    let (words, _legacy) = script_directives(script, file)?;
    let parsed = getopt::parse("sbatch", &words, &getopt_table(), false)
        .map_err(|e| Fail::getopt(&e.message))?;
    if let Some(first) = parsed.operands.first() {
        return Err(Fail::error(
            format!("Invalid directive found in batch script: {first}"),
            EXIT_BAD_OPTION,
        ));
    }
    options_from(&parsed.opts, Source::Script, ctx, warnings)
}

/// The `#PBS` directives of a script (PBS/Torque compatibility, as
/// Slurm's sbatch reads them), read like `#SBATCH` lines and translated
/// into sbatch's options. Options PBS has and Slurm does not act on
/// (`-c -C -I -j -k -r -S -u -V -z`, unknown `-l` resources, `-W` other than
/// `depend=`) are passed over, as Slurm does.
pub fn pbs_words(script: &str, file: &str) -> Result<Vec<String>, Fail> {
    let words = directive_words(script, file, |line| line.strip_prefix("#PBS"))?;
    let mut out = Vec::new();
    let mut it = words.into_iter();
    while let Some(w) = it.next() {
        let Some(flag) = w.strip_prefix('-').and_then(|f| f.chars().next()) else {
            return Err(Fail::error(format!("Invalid argument: {w}"), 1));
        };
        let attached = &w[1 + flag.len_utf8()..];
        let takes = "aAcCejJklmMNopqrStuvW".contains(flag);
        let value = if !takes {
            String::new()
        } else if !attached.is_empty() {
            attached.to_string()
        } else {
            it.next()
                .ok_or_else(|| Fail::error(format!("#PBS -{flag}: a value is needed"), 1))?
        };
        let mut opt = |name: &str, v: &str| out.push(format!("--{name}={v}"));
        match flag {
            'a' => opt("begin", &value),
            'A' => opt("account", &value),
            'e' => opt("error", &value),
            'h' => out.push("--hold".into()),
            'J' | 't' => opt("array", &value),
            'l' => pbs_resources(&value, &mut out)?,
            'm' => {
                let types: Vec<&str> = value
                    .chars()
                    .filter_map(|c| match c {
                        'a' => Some("FAIL"),
                        'b' => Some("BEGIN"),
                        'e' => Some("END"),
                        'n' => Some("NONE"),
                        _ => None,
                    })
                    .collect();
                if !types.is_empty() {
                    opt("mail-type", &types.join(","));
                }
            }
            'M' => opt("mail-user", &value),
            'N' => opt("job-name", &value),
            'o' => opt("output", &value),
            'p' => opt("nice", &value),
            'q' => opt("partition", &value),
            'v' => opt("export", &value),
            'W' => {
                if let Some(d) = value.strip_prefix("depend=") {
                    opt("dependency", d);
                }
            }
            'c' | 'C' | 'I' | 'j' | 'k' | 'r' | 'S' | 'u' | 'V' | 'z' => {}
            other => {
                return Err(Fail::error(
                    format!("Unrecognized command line parameter {other}"),
                    1,
                ))
            }
        }
    }
    Ok(out)
}

/// `#PBS -l`: `walltime=`, `nodes=N[:ppn=M]` (or host names), `mem=`,
/// `ncpus=`, `select=`, `mpiprocs=`, `naccelerators=`, `cput=`, `file=`,
/// `nice=`; other resources are passed over.
fn pbs_resources(list: &str, out: &mut Vec<String>) -> Result<(), Fail> {
    let bytes = |v: &str| v.strip_suffix(['b', 'B']).unwrap_or(v).to_string();
    let mut gpus = 0u32;
    for item in list.split(',') {
        let (k, v) = item.split_once('=').unwrap_or((item, ""));
        let k = k.to_ascii_lowercase();
        let mut opt = |name: &str, val: &str| out.push(format!("--{name}={val}"));
        match k.as_str() {
            "walltime" | "cput" | "pcput" => opt("time", v),
            "mem" => opt("mem", &bytes(v)),
            "file" => opt("tmp", &bytes(v)),
            "ncpus" => opt("mincpus", v),
            "select" => opt("nodes", v.split(':').next().unwrap_or(v)),
            "mpiprocs" => opt("ntasks-per-node", v),
            "nice" => opt("nice", v),
            "naccelerators" => {
                gpus = v
                    .parse()
                    .map_err(|_| Fail::error(format!("Invalid naccelerators value: {v}"), 1))?
            }
            "accelerator" if v.eq_ignore_ascii_case("true") => gpus = gpus.max(1),
            "nodes" => {
                // N[:ppn=M][+...] or host names.
                let (mut count, mut ppn) = (0u32, 0u32);
                let mut hosts = Vec::new();
                for part in v.split(['+', ':']) {
                    if let Some(p) = part.strip_prefix("ppn=") {
                        ppn += p.parse::<u32>().unwrap_or(0);
                    } else if part.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                        let digits: String =
                            part.chars().take_while(char::is_ascii_digit).collect();
                        count += digits.parse::<u32>().unwrap_or(0);
                    } else if part.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) {
                        hosts.push(part.to_string());
                    }
                }
                if count > 0 {
                    opt("nodes", &count.to_string());
                }
                if ppn > 0 {
                    opt("ntasks", &(ppn * count.max(1)).to_string());
                }
                if !hosts.is_empty() {
                    opt("nodelist", &hosts.join(","));
                }
            }
            _ => {}
        }
    }
    if gpus > 0 {
        out.push(format!("--gres=gpu:{gpus}"));
    }
    Ok(())
}

/// Options from `SBATCH_*` variables. Flags are set by an empty value,
/// `yes` or a non-zero number; other values leave them unset.
fn env_options(
    env: &[(String, String)],
    ctx: &Context,
    warnings: &mut Vec<String>,
) -> Result<(Options, u32), Fail> {
    let mut o = Options::default();
    let mut verbose = 0;
    for spec in SPECS {
        let Some(val) = spec_env(spec, env) else {
            continue;
        };
        if spec.key == Key::Verbose {
            verbose = parse_int("--verbose", val, false)?;
            continue;
        }
        let arg = match spec.arg {
            HasArg::No => {
                let on = val.is_empty()
                    || val.eq_ignore_ascii_case("yes")
                    || val.trim().parse::<i64>().is_ok_and(|n| n != 0);
                if !on {
                    continue;
                }
                None
            }
            HasArg::Optional | HasArg::OptionalNext => (!val.is_empty()).then_some(val),
            HasArg::Required => Some(val),
        };
        apply(&mut o, spec, arg, Source::Env, ctx, warnings)?;
    }
    Ok((o, verbose))
}

fn env_get<'a>(env: &'a [(String, String)], key: &str) -> Option<&'a str> {
    env.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// `SLURM_*` variables that stand for an option beside its `SBATCH_*` one:
/// (option, variable, whether it wins when both are set), as Slurm's
/// sbatch reads them.
const ENV_ALIASES: &[(&str, &str, bool)] = &[
    ("clusters", "SLURM_CLUSTERS", true),
    ("hint", "SLURM_HINT", false),
];

/// The value the environment gives `spec`'s option, if any.
fn spec_env<'a>(spec: &Spec, env: &'a [(String, String)]) -> Option<&'a str> {
    let own = spec.env.and_then(|var| env_get(env, var));
    let alias = ENV_ALIASES
        .iter()
        .find(|(long, _, _)| *long == spec.long)
        .and_then(|(_, var, wins)| env_get(env, var).map(|v| (v, *wins)));
    match (own, alias) {
        (Some(_), Some((v, true))) | (None, Some((v, _))) => Some(v),
        (own, _) => own,
    }
}

/// Combines the three sources: command line over environment over script.
/// `--mem` and `--mem-per-cpu` exclude each other: both on the command line
/// (or script) is an error; one there drops the other from the environment;
/// both from the environment is an error.
pub fn merge(script: &Options, env: &Options, cli: &Options) -> Result<Options, Fail> {
    let mut direct = script.clone();
    direct.overlay(cli);
    let mut env = env.clone();
    if direct.mem.is_some() && direct.mem_per_cpu.is_some() {
        return Err(Fail::fatal(
            "--mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.",
        ));
    } else if direct.mem.is_some() {
        env.mem_per_cpu = None;
    } else if direct.mem_per_cpu.is_some() {
        env.mem = None;
    } else if env.mem.is_some() && env.mem_per_cpu.is_some() {
        return Err(Fail::fatal(
            "SLURM_MEM_PER_CPU, SLURM_MEM_PER_GPU, and SLURM_MEM_PER_NODE are mutually exclusive.",
        ));
    }
    // CPUs per task and --cpus-per-gpu exclude each other the same way
    // (both on the command line or in the script: refused later).
    if direct.cpus_per_task.is_some() {
        env.cpus_per_gpu = None;
    } else if direct.cpus_per_gpu.is_some() {
        env.cpus_per_task = None;
    }
    let mut out = script.clone();
    out.overlay(&env);
    out.overlay(cli);
    if direct.mem.is_some() {
        out.mem_per_cpu = None;
    } else if direct.mem_per_cpu.is_some() {
        out.mem = None;
    }
    Ok(out)
}

/// The script given by `--wrap`.
pub fn wrap_script(cmd: &str) -> String {
    format!("#!/bin/sh\n# This script was created by sbatch --wrap.\n\n{cmd}\n")
}

/// Slurm's checks on a script's text.
pub fn check_script(script: &str) -> Result<(), Fail> {
    let lines = |ls: &[&str]| Fail {
        stderr: ls.iter().map(|l| format!("sbatch: error: {l}\n")).collect(),
        code: 1,
    };
    if script.is_empty() {
        return Err(lines(&["Batch script is empty!"]));
    }
    if script.chars().all(char::is_whitespace) {
        return Err(lines(&["Batch script contains only whitespace!"]));
    }
    if !script.starts_with("#!") {
        return Err(lines(&[
            "This does not look like a batch script.  The first",
            "line must start with #! followed by the path to an interpreter.",
            "For instance: #!/bin/sh",
        ]));
    }
    if script.contains('\0') {
        return Err(lines(&[
            "The Slurm job script contains a NULL character '\\0'.",
        ]));
    }
    if script.contains("\r\n") {
        return Err(lines(&[
            "Batch script contains DOS line breaks (\\r\\n)",
            "instead of expected UNIX line breaks (\\n).",
        ]));
    }
    Ok(())
}

/// Where sbatch looks for a script named on the command line: as given when
/// it contains a `/` or exists in the current directory, else on `PATH`.
fn resolve_script(name: &str, cwd: &Path, env: &[(String, String)]) -> PathBuf {
    let direct = cwd.join(name);
    if name.contains('/') || direct.exists() {
        return direct;
    }
    if let Some(path) = env_get(env, "PATH") {
        for dir in path.split(':').filter(|d| !d.is_empty()) {
            let p = Path::new(dir).join(name);
            if p.is_file() {
                return if p.is_absolute() { p } else { cwd.join(p) };
            }
        }
    }
    direct
}

/// The environment a job gets under `--export` (Slurm's rules): `ALL`
/// (default) is everything; `NONE` is only the `SLURM_*` variables; otherwise
/// a comma list applied in order: `ALL`, `NAME` (its current value) or
/// `NAME=value`, with the `SLURM_*` variables added at the end.
pub fn export_environment(export: Option<&str>, env: &[(String, String)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    fn set(out: &mut Vec<(String, String)>, k: &str, v: &str) {
        match out.iter_mut().find(|(ok, _)| ok == k) {
            Some(e) => e.1 = v.to_string(),
            None => out.push((k.to_string(), v.to_string())),
        }
    }
    let merge_slurm = |out: &mut Vec<(String, String)>| {
        for (k, v) in env.iter().filter(|(k, _)| k.starts_with("SLURM_")) {
            set(out, k, v);
        }
    };
    match export {
        None => return env.to_vec(),
        Some(e) if e.eq_ignore_ascii_case("ALL") => return env.to_vec(),
        Some(e) if e.eq_ignore_ascii_case("NONE") => merge_slurm(&mut out),
        Some(list) => {
            for tok in split_quoted(list, ',') {
                if tok.eq_ignore_ascii_case("ALL") {
                    for (k, v) in env {
                        set(&mut out, k, v);
                    }
                } else if let Some((k, v)) = tok.split_once('=') {
                    set(&mut out, k, &unquote(v));
                } else if let Some(v) = env_get(env, &tok) {
                    set(&mut out, &tok, v);
                }
            }
            merge_slurm(&mut out);
        }
    }
    out
}

/// `--export-file`'s definitions: `NAME=value` separated by NULs (so a
/// value may hold anything else, newlines included); a number from 3 up is
/// a descriptor already open (`/dev/fd/N`), as Slurm reads it.
fn read_export_file(f: &str) -> Result<Vec<(String, String)>, Fail> {
    let path = match f.parse::<u32>() {
        Ok(fd) if fd >= 3 => format!("/dev/fd/{fd}"),
        Ok(_) => {
            return Err(Fail::error(
                format!("Invalid --export-file descriptor: {f}"),
                EXIT_BAD_OPTION,
            ))
        }
        Err(_) => f.to_string(),
    };
    let bytes = std::fs::read(&path).map_err(|e| {
        Fail::error(
            format!("Could not read --export-file {f}: {e}"),
            EXIT_BAD_OPTION,
        )
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let mut out = Vec::new();
    for def in text.split('\0').filter(|d| !d.is_empty()) {
        match def.split_once('=') {
            Some((k, v)) if !k.is_empty() && !k.contains(char::is_whitespace) => {
                out.push((k.to_string(), v.to_string()))
            }
            _ => {
                return Err(Fail::error(
                    format!("Invalid environment definition in --export-file {f}: {def}"),
                    EXIT_BAD_OPTION,
                ))
            }
        }
    }
    Ok(out)
}

/// Splits at `sep` outside `'…'`/`"…"`, dropping empty pieces.
fn split_quoted(s: &str, sep: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    for c in s.chars() {
        match quote {
            Some(q) if c == q => {
                quote = None;
                cur.push(c);
            }
            Some(_) => cur.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                cur.push(c);
            }
            None if c == sep => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            None => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn unquote(v: &str) -> String {
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return v[1..v.len() - 1].to_string();
        }
    }
    v.to_string()
}

/// Expands a `-w`/`-x` value: a hostlist expression, or (when it contains a
/// `/`) a file of host names, one expression per line, `#` comments allowed.
pub fn expand_nodes(value: &str, cwd: &Path) -> Result<Vec<String>, Fail> {
    let expr = if value.contains('/') {
        let text = std::fs::read_to_string(cwd.join(value))
            .map_err(|e| Fail::error(format!("Unable to open file {value}: {e}"), 1))?;
        text.lines()
            .map(|l| l.split('#').next().unwrap_or_default().trim())
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(",")
    } else {
        value.to_string()
    };
    // An expression the controller could not read is its error in Slurm.
    hostlist::expand(&expr).map_err(|_| {
        Fail::error(
            format!(
                "Batch job submission failed: {}",
                SlurmError::InvalidNodeName.message()
            ),
            1,
        )
    })
}

/// The script and where it came from.
#[derive(Debug, Clone)]
pub struct Script {
    pub text: String,
    /// Absolute path of the script file; `None` for `--wrap` and stdin.
    pub path: Option<String>,
    /// The name as given on the command line (for the default job name).
    pub name: Option<String>,
    pub argv: Vec<String>,
    pub wrapped: bool,
}

/// Turns merged options into the submission.
pub fn build_desc(
    o: &Options,
    script: &Script,
    env: &[(String, String)],
    ctx: &Context,
    notes: &mut Vec<String>,
) -> Result<JobDesc, Fail> {
    let work_dir = match &o.chdir {
        Some(d) if d.starts_with('/') => d.clone(),
        Some(d) => ctx.cwd.join(d).to_string_lossy().into_owned(),
        None => ctx.cwd.to_string_lossy().into_owned(),
    };
    if let (Some(k), Some(t)) = (o.ntasks_per_core, o.threads_per_core) {
        if t < k {
            return Err(Fail::error(
                format!("--ntasks-per-core ({k}) can not be bigger than --threads-per-core ({t})"),
                1,
            ));
        }
    }
    if o.cpus_per_gpu.is_some() && o.cpus_per_task.is_some() {
        return Err(Fail::fatal(slurm_common::tres::CPUS_PER_GPU_EXCLUSIVE));
    }
    if o.ntasks_per_gpu.is_some() {
        for (given, name) in [
            (o.tres_per_task.is_some(), "--tres-per-task"),
            (o.gpus_per_task.is_some(), "--gpus-per-task"),
            (o.ntasks_per_node.is_some(), "--ntasks-per-node"),
        ] {
            if given {
                return Err(Fail::fatal(format!(
                    "{name} is mutually exclusive with --ntasks-per-gpu and SLURM_NTASKS_PER_GPU"
                )));
            }
        }
    }
    let req_nodes = match &o.nodelist {
        Some(v) => expand_nodes(v, &ctx.cwd)?,
        None => Vec::new(),
    };
    let exc_nodes = match &o.exclude {
        Some(v) => expand_nodes(v, &ctx.cwd)?,
        None => Vec::new(),
    };
    let (mut min_nodes, mut max_nodes) = match o.nodes {
        Some((lo, hi)) => (Some(lo), hi),
        None => (None, None),
    };
    if !req_nodes.is_empty() {
        let mut uniq = req_nodes.clone();
        uniq.sort();
        uniq.dedup();
        let n = uniq.len() as u32;
        min_nodes = Some(min_nodes.map_or(n, |m| m.max(n)));
    }
    if let (Some(nt), Some(min)) = (o.ntasks, min_nodes) {
        if max_nodes.is_some_and(|mx| nt < mx) {
            max_nodes = Some(nt);
        }
        if nt < min {
            notes.push(format!(
                "Warning: can't run {nt} processes on {min} nodes, setting nnodes to {nt}"
            ));
            min_nodes = Some(nt);
            max_nodes = Some(nt);
        }
    }
    let name = o.job_name.clone().or_else(|| {
        if script.wrapped {
            Some("wrap".to_string())
        } else {
            match script.name.as_deref() {
                Some(n) if n != "-" => Some(base_name(n)),
                _ => Some("sbatch".to_string()),
            }
        }
    });
    let mut environment = export_environment(o.export.as_deref(), env);
    let mut set = |k: &str, v: String| match environment.iter_mut().find(|(ek, _)| ek == k) {
        Some(e) => e.1 = v,
        None => environment.push((k.to_string(), v)),
    };
    if let Some(f) = &o.export_file {
        for (k, v) in read_export_file(f)? {
            set(&k, v);
        }
    }
    for (k, v) in option_env(o) {
        set(k, v);
    }
    set("SLURM_SUBMIT_DIR", ctx.cwd.to_string_lossy().into_owned());
    set("SLURM_SUBMIT_HOST", ctx.hostname.clone());
    set("SLURM_PRIO_PROCESS", ctx.prio.to_string());
    // The umask the job's files are made with: the one the submitter
    // exported in SLURM_UMASK, else sbatch's own (as Slurm's sbatch).
    let umask = env
        .iter()
        .find(|(k, v)| k == "SLURM_UMASK" && !v.trim().is_empty())
        .map_or_else(|| ctx.umask.clone(), |(_, v)| v.clone());
    set("SLURM_UMASK", umask);
    Ok(JobDesc {
        name,
        partition: o.partition.clone(),
        account: o.account.clone(),
        qos: o.qos.clone(),
        time_limit: o.time,
        min_nodes,
        max_nodes,
        ntasks: o.ntasks,
        cpus_per_task: o.cpus_per_task,
        ntasks_per_node: o.ntasks_per_node,
        mem_per_node: o.mem,
        mem_per_cpu: o.mem_per_cpu,
        req_nodes,
        exc_nodes,
        exclusive: o.exclusive.unwrap_or(false),
        oversubscribe: o.oversubscribe.unwrap_or(false) && !o.exclusive.unwrap_or(false),
        hold: o.hold.unwrap_or(false),
        begin_time: o.begin,
        deadline: o.deadline,
        no_kill: o.no_kill.unwrap_or(false),
        overcommit: o.overcommit.unwrap_or(false),
        time_min: o.time_min,
        kill_on_invalid_dep: o.kill_on_invalid_dep,
        extra: o.extra.clone(),
        wckey: o.wckey.clone(),
        user_id: o.uid,
        group_id: o.gid,
        nice: o.nice,
        requeue: o.requeue,
        work_dir,
        std_out: o.output.clone(),
        std_err: o.error.clone(),
        std_in: o.input.clone(),
        script: script.text.clone(),
        argv: script.argv.clone(),
        environment: environment
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
        submit_host: ctx.hostname.clone(),
        command: script.path.clone(),
        comment: o.comment.clone(),
        gpu_bind: o.gpu_bind.clone(),
        mail_type: o.mail_type.clone().filter(|t| !t.is_empty()),
        mail_user: o.mail_user.clone(),
        signal: o.signal.clone(),
        open_mode: o.open_mode.clone(),
        array: o.array.clone(),
        dependency: o.dependency.clone(),
        reservation: o.reservation.clone(),
        external: o.external.unwrap_or(false),
        gres: o.gres.clone(),
        licenses: o.licenses.clone(),
        admin_comment: None,
        cpus_per_gpu: o.cpus_per_gpu,
        mem_per_gpu: o.mem_per_gpu,
        switches: o.switches.map(|s| s.0),
        wait4switch: o.switches.and_then(|s| s.1),
        segment: o.segment,
        exclusive_topo: o.exclusive_topo.unwrap_or(false),
        contiguous: o.contiguous.unwrap_or(false),
        sockets_per_node: o.sockets_per_node,
        cores_per_socket: o.cores_per_socket,
        threads_per_core: o.threads_per_core,
        ntasks_per_socket: o.ntasks_per_socket,
        ntasks_per_core: o.ntasks_per_core,
        ntasks_per_gpu: o.ntasks_per_gpu,
        tmp_disk: o.tmp,
        priority: o.priority,
        min_cpus: o.mincpus,
        constraint: o.constraint.clone(),
        gpus: o.gpus.clone(),
        gpus_per_node: o.gpus_per_node.clone(),
        gpus_per_task: o.gpus_per_task.clone(),
    })
}

fn base_name(p: &str) -> String {
    let t = p.trim_end_matches('/');
    t.rsplit('/').next().unwrap_or(t).to_string()
}

/// A submission ready to send.
#[derive(Debug, Clone)]
pub struct Submission {
    pub desc: JobDesc,
    pub test_only: bool,
    /// `-M`: clusters named; each must be this one.
    pub clusters: Option<String>,
    /// `--wait`: wait for the job to end.
    pub wait: bool,
    /// `--propagate`: the resource limits to carry (else slurm.conf's).
    pub propagate: Option<String>,
    pub parsable: bool,
    pub quiet: bool,
    pub verbose: u32,
}

impl Submission {
    /// Carry this shell's resource limits in the job's environment
    /// (`--propagate`, else slurm.conf's `PropagateResourceLimits`).
    pub fn propagate_limits(&mut self, conf: &slurm_common::conf::SlurmConf) -> Result<(), String> {
        let names = slurm_common::rlimits::chosen(self.propagate.as_deref(), conf)?;
        slurm_common::rlimits::carry_in(&mut self.desc.environment, &names);
        Ok(())
    }

    pub fn request(&self) -> RequestBody {
        if self.test_only {
            RequestBody::TestJob(self.desc.clone())
        } else {
            RequestBody::SubmitBatchJob(self.desc.clone())
        }
    }
}

/// What [`prepare`] decided.
#[derive(Debug)]
pub enum Prepared {
    Submit(Box<Submission>),
    /// Nothing to send; exit with this code (messages already written).
    Exit(i32),
}

/// stdout and stderr.
pub struct Term<'a> {
    pub out: &'a mut dyn Write,
    pub err: &'a mut dyn Write,
}

impl Term<'_> {
    fn out(&mut self, s: &str) {
        let _ = self.out.write_all(s.as_bytes());
    }
    fn err(&mut self, s: &str) {
        let _ = self.err.write_all(s.as_bytes());
    }
    fn fail(&mut self, f: Fail) -> Prepared {
        self.err(&f.stderr);
        Prepared::Exit(f.code)
    }
}

/// `--help`, `--usage` and `--version` act as soon as they are read.
fn early_exit(parsed: &getopt::Parsed, term: &mut Term) -> Option<Prepared> {
    for (id, _) in &parsed.opts {
        match SPECS.get(*id).map(|s| s.key) {
            Some(Key::Help) => term.out(&crate::help::help("sbatch")),
            Some(Key::Usage) => term.out(&crate::help::usage("sbatch")),
            Some(Key::Version) => term.out(&format!("slurm {SLURM_VERSION}\n")),
            _ => continue,
        }
        return Some(Prepared::Exit(0));
    }
    None
}

/// Reads the command line, the script and the environment, and builds the
/// submission (or prints what stops it).
pub fn prepare(
    argv: &[String],
    env: &[(String, String)],
    ctx: &Context,
    stdin: &mut dyn Read,
    term: &mut Term,
) -> Prepared {
    let prog = argv.first().map(String::as_str).unwrap_or("sbatch");
    let args = argv.get(1..).unwrap_or_default();
    let parsed = match getopt::parse(prog, args, &getopt_table(), false) {
        Ok(p) => p,
        Err(e) => {
            // Options before the bad one still act (`--version --bogus`).
            if let Some(done) = early_exit(&e.before, term) {
                return done;
            }
            return term.fail(Fail::getopt(&e.message));
        }
    };
    if let Some(done) = early_exit(&parsed, term) {
        return done;
    }

    // Early pass.
    let mut verbose = 0u32;
    let mut quiet = 0u32;
    let mut wrap: Option<String> = None;
    let mut external = false;
    for (id, val) in &parsed.opts {
        match SPECS.get(*id).map(|s| s.key) {
            Some(Key::External) => external = true,
            Some(Key::Verbose) => verbose += 1,
            Some(Key::Quiet) => quiet += 1,
            Some(Key::Wrap) => wrap = val.clone(),
            _ => {}
        }
    }

    // The script (an external job has none: it only holds its allocation).
    let script = if external {
        if wrap.is_some() || !parsed.operands.is_empty() {
            return term.fail(Fail::error("--external jobs take no batch script", 1));
        }
        Script {
            text: String::new(),
            path: None,
            name: None,
            argv: Vec::new(),
            wrapped: false,
        }
    } else if let Some(cmd) = &wrap {
        if !parsed.operands.is_empty() {
            return term.fail(Fail::error(
                "Script arguments not permitted with --wrap option",
                1,
            ));
        }
        Script {
            text: wrap_script(cmd),
            path: None,
            name: None,
            argv: Vec::new(),
            wrapped: true,
        }
    } else {
        let name = parsed.operands.first().cloned();
        let (bytes, path) = match name.as_deref() {
            None | Some("-") => {
                let mut buf = Vec::new();
                if let Err(e) = stdin.read_to_end(&mut buf) {
                    return term.fail(Fail::error(
                        format!("unable to read the script from stdin: {e}"),
                        1,
                    ));
                }
                (buf, None)
            }
            Some(n) => {
                let p = resolve_script(n, &ctx.cwd, env);
                match std::fs::read(&p) {
                    Ok(b) => (b, Some(p.to_string_lossy().into_owned())),
                    Err(_) => return term.fail(Fail::error(format!("Unable to open file {n}"), 1)),
                }
            }
        };
        let text = match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(e) => {
                if quiet == 0 {
                    term.err("sbatch: warning: the batch script is not valid UTF-8; invalid bytes were replaced\n");
                }
                String::from_utf8_lossy(e.as_bytes()).into_owned()
            }
        };
        Script {
            text,
            path,
            argv: parsed.operands.iter().skip(1).cloned().collect(),
            name,
            wrapped: false,
        }
    };
    if !external {
        if let Err(f) = check_script(&script.text) {
            return term.fail(f);
        }
    }

    // Options: script, then environment, then command line.
    let mut warnings = Vec::new();
    let file = script.name.clone().unwrap_or_else(|| "stdin".to_string());
    let from_script = match script_options(&script.text, &file, ctx, &mut warnings) {
        Ok(o) => o,
        Err(f) => return term.fail(f),
    };
    if matches!(script_directives(&script.text, &file), Ok((_, true))) {
        term.err("sbatch: error: Change from #SLURM to #SBATCH in your script and verify the options are valid in sbatch\n");
    }
    let (from_env, env_verbose) = match env_options(env, ctx, &mut warnings) {
        Ok(o) => o,
        Err(f) => return term.fail(f),
    };
    let from_cli = match options_from(&parsed.opts, Source::Cli, ctx, &mut warnings) {
        Ok(o) => o,
        Err(f) => return term.fail(f),
    };
    if verbose == 0 {
        verbose = env_verbose;
    }
    let mut merged = match merge(&from_script, &from_env, &from_cli) {
        Ok(o) => o,
        Err(f) => return term.fail(f),
    };
    // `#PBS` lines, unless --ignore-pbs: below every other source.
    if merged.ignore_pbs != Some(true) {
        let words = match pbs_words(&script.text, &file) {
            Ok(w) => w,
            Err(f) => return term.fail(f),
        };
        if !words.is_empty() {
            let parsed = match getopt::parse("sbatch", &words, &getopt_table(), false) {
                Ok(p) => p,
                Err(e) => return term.fail(Fail::getopt(&e.message)),
            };
            let mut pbs = match options_from(&parsed.opts, Source::Script, ctx, &mut warnings) {
                Ok(o) => o,
                Err(f) => return term.fail(f),
            };
            if merged.mem.is_some() || merged.mem_per_cpu.is_some() {
                pbs.mem = None;
            }
            pbs.overlay(&merged);
            merged = pbs;
        }
    }
    if verbose > 0 && quiet == 0 {
        let script_opts = script_directives(&script.text, &file)
            .ok()
            .and_then(|(w, _)| getopt::parse("sbatch", &w, &getopt_table(), false).ok())
            .map(|p| p.opts)
            .unwrap_or_default();
        term.err(&defined_options(&script_opts, env, &parsed.opts, verbose));
    }
    if quiet > 0 && verbose > 0 {
        return term.fail(Fail::error(
            "don't specify both --verbose (-v) and --quiet (-Q)",
            1,
        ));
    }
    if quiet == 0 {
        for w in &warnings {
            term.err(&format!("sbatch: warning: {w}\n"));
        }
    }
    let mut notes = Vec::new();
    let desc = match build_desc(&merged, &script, env, ctx, &mut notes) {
        Ok(d) => d,
        Err(f) => return term.fail(f),
    };
    if quiet == 0 {
        for n in &notes {
            term.err(&format!("sbatch: {n}\n"));
        }
    }
    Prepared::Submit(Box::new(Submission {
        desc,
        test_only: merged.test_only.unwrap_or(false),
        wait: merged.wait.unwrap_or(false),
        propagate: merged.propagate.clone(),
        clusters: merged.clusters.clone(),
        parsable: merged.parsable.unwrap_or(false),
        quiet: quiet > 0,
        verbose,
    }))
}

/// Prints the controller's answer as Slurm does; returns the exit code.
pub fn report(sub: &Submission, result: Result<Response, CallError>, term: &mut Term) -> i32 {
    match result {
        Ok(Response::Submitted { job_id }) => {
            if !sub.quiet {
                if sub.parsable {
                    term.out(&format!("{job_id}\n"));
                } else {
                    term.out(&format!("Submitted batch job {job_id}\n"));
                }
            }
            0
        }
        Ok(Response::TestResult {
            job_id,
            start_time,
            cpus,
            nodes,
            partition,
        }) => {
            if !sub.quiet {
                term.err(&common::will_start_line(
                    "sbatch", job_id, start_time, cpus, &nodes, &partition,
                ));
            }
            0
        }
        Ok(Response::Error(e)) | Err(CallError::Rpc(e)) => {
            let what = if sub.test_only {
                "allocation failure"
            } else {
                "Batch job submission failed"
            };
            term.err(&format!("sbatch: error: {what}: {}\n", e.error.message()));
            if sub.verbose > 0 {
                if let Some(d) = &e.detail {
                    term.err(&format!("sbatch: error: {d}\n"));
                }
            }
            1
        }
        Err(CallError::Net(e)) => {
            let what = if sub.test_only {
                "allocation failure"
            } else {
                "Batch job submission failed"
            };
            term.err(&format!(
                "sbatch: error: {what}: {}\n",
                crate::common::net_error_text(&e)
            ));
            if sub.verbose > 0 {
                term.err(&format!("sbatch: error: {e}\n"));
            }
            1
        }
        Ok(_) | Err(CallError::Unexpected) => {
            term.err("sbatch: error: Batch job submission failed: unexpected reply from the controller\n");
            1
        }
    }
}

/// Unix scheduling priority of this process.
fn process_priority() -> i32 {
    // SAFETY: getpriority has no memory-safety preconditions.
    unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
}

/// Entry point of the `sbatch` binary.
pub fn main() -> i32 {
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let env: Vec<(String, String)> = std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    let codes = common::ExitCodes::from_env("sbatch", &|k| {
        env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    });
    let cwd = match std::env::current_dir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("sbatch: error: getcwd failed: {e}");
            return codes.error;
        }
    };
    let ctx = Context {
        cwd,
        hostname: users::hostname(),
        now: common::now(),
        prio: process_priority(),
        // SAFETY: getuid cannot fail.
        uid: unsafe { libc::getuid() },
        umask: crate::srun::umask_text(),
    };
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let mut out = stdout.lock();
    let mut err = stderr.lock();
    let mut term = Term {
        out: &mut out,
        err: &mut err,
    };
    let mut stdin = std::io::stdin();
    let mut sub = match prepare(&argv, &env, &ctx, &mut stdin, &mut term) {
        Prepared::Exit(code) => return codes.on_error(code),
        Prepared::Submit(s) => s,
    };
    let conf = match common::load_conf("sbatch") {
        Ok(c) => c,
        Err(code) => return codes.on_error(code),
    };
    if let Err(e) = sub.propagate_limits(&conf) {
        term.err(&format!("sbatch: error: PropagateResourceLimits: {e}\n"));
        return codes.error;
    }
    // -M: one cluster per controller; any other name is refused.
    if let Some(Err(e)) = sub
        .clusters
        .as_deref()
        .map(|l| common::check_clusters("sbatch", l, &conf))
    {
        term.err(&format!("{e}\n"));
        return codes.error;
    }
    let client = common::client(&conf);
    let result = common::call(&client, sub.request());
    let job_id = match &result {
        Ok(Response::Submitted { job_id }) => Some(*job_id),
        _ => None,
    };
    let code = codes.on_error(report(&sub, result, &mut term));
    let _ = term.out.flush();
    match job_id {
        Some(id) if sub.wait && !sub.test_only => wait_for(&client, id, &mut term, codes.error),
        _ => code,
    }
}

/// `sbatch --wait`: polls the controller until the job (every task of an
/// array) has ended; the exit code is the job's (the highest of an array's
/// tasks), 1 for one killed by a signal, as Slurm's sbatch; `error` when
/// the job cannot be followed.
fn wait_for(client: &slurm_common::net::Client, job_id: u32, term: &mut Term, error: i32) -> i32 {
    let filter = slurm_proto::JobFilter {
        job_ids: vec![job_id],
        states: Some(vec![]),
        ..Default::default()
    };
    let mut pause = std::time::Duration::from_millis(200);
    loop {
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_secs(2));
        match common::call(client, RequestBody::GetJobsBrief(Some(filter.clone()))) {
            Ok(Response::Jobs { jobs, .. }) => {
                let jobs: Vec<&JobRecord> = jobs.iter().filter(|j| filter.matches(j)).collect();
                if jobs.is_empty() {
                    term.err(&format!(
                        "sbatch: error: Job {job_id} is no longer known to the controller\n"
                    ));
                    return error;
                }
                if jobs.iter().all(|j| j.state.is_finished() && !j.completing) {
                    return wait_exit_code(&jobs);
                }
            }
            Ok(Response::Error(e)) => {
                term.err(&format!("sbatch: error: {}\n", e.error.message()));
                return error;
            }
            Ok(_) => {}
            // The controller may be restarting or failing over: keep asking.
            Err(_) => {}
        }
    }
}

/// The exit code `sbatch --wait` ends with for these ended jobs: the
/// script's exit code, 1 when a signal ended it; a job that did not
/// complete (cancelled, timed out, lost with its node) never gives 0.
pub fn wait_exit_code(jobs: &[&JobRecord]) -> i32 {
    jobs.iter()
        .map(|j| {
            let status = j.exit_status;
            let code = if status & 0x7f != 0 {
                1
            } else {
                (status >> 8) & 0xff
            };
            if code == 0 && j.state != slurm_proto::JobState::Completed {
                1
            } else {
                code
            }
        })
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_proto::RpcError;

    fn ctx(dir: &Path) -> Context {
        Context {
            cwd: dir.to_path_buf(),
            hostname: "login1".into(),
            now: 1_800_000_000,
            prio: 0,
            uid: 0,
            umask: "0027".into(),
        }
    }

    fn args(s: &[&str]) -> Vec<String> {
        std::iter::once("sbatch")
            .chain(s.iter().copied())
            .map(String::from)
            .collect()
    }

    fn envv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    struct Run {
        prepared: Option<Submission>,
        code: Option<i32>,
        out: String,
        err: String,
    }

    fn run_with(argv: &[&str], env: &[(&str, &str)], stdin: &str, dir: &Path) -> Run {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let mut input = stdin.as_bytes();
        let p = {
            let mut term = Term {
                out: &mut out,
                err: &mut err,
            };
            prepare(&args(argv), &envv(env), &ctx(dir), &mut input, &mut term)
        };
        let (prepared, code) = match p {
            Prepared::Submit(s) => (Some(*s), None),
            Prepared::Exit(c) => (None, Some(c)),
        };
        Run {
            prepared,
            code,
            out: String::from_utf8(out).unwrap(),
            err: String::from_utf8(err).unwrap(),
        }
    }

    fn run(argv: &[&str], env: &[(&str, &str)], stdin: &str) -> Run {
        run_with(argv, env, stdin, Path::new("/home/u/jobs"))
    }

    fn desc(argv: &[&str], env: &[(&str, &str)], stdin: &str) -> JobDesc {
        let r = run(argv, env, stdin);
        match r.prepared {
            Some(s) => s.desc,
            None => panic!("no submission: code {:?} err {}", r.code, r.err),
        }
    }

    /// `--tres-per-task`: its CPUs and GPUs are the job's per task; given
    /// beside the option it stands for in one place, refused as Slurm
    /// refuses it; the command line wins over the environment; what tasks
    /// cannot be given is refused naming it, and nothing is submitted.
    #[test]
    fn tres_per_task_gives_cpus_and_gpus_per_task() {
        let d = desc(
            &["--tres-per-task=cpu=4,gres/gpu:a100=1", "--wrap=true"],
            &[],
            "",
        );
        assert_eq!(d.cpus_per_task, Some(4));
        assert_eq!(d.gpus_per_task.as_deref(), Some("a100:1"));
        let d = desc(
            &["-c", "2", "--wrap=true"],
            &[("SBATCH_TRES_PER_TASK", "cpu=4")],
            "",
        );
        assert_eq!(d.cpus_per_task, Some(2), "the command line wins");
        let d = desc(
            &["--tres-per-task=gres:gpu=2"],
            &[],
            "#!/bin/sh\n#SBATCH -c 3\ntrue\n",
        );
        assert_eq!(
            (d.cpus_per_task, d.gpus_per_task.as_deref()),
            (Some(3), Some("2"))
        );
        // Both in the environment: the TRES wins; the command line's
        // --cpus-per-gpu drops the environment's CPUs per task.
        let env = [
            ("SBATCH_GPUS_PER_TASK", "2"),
            ("SBATCH_TRES_PER_TASK", "cpu=4,gres/gpu=1"),
        ];
        let d = desc(&["--wrap=true"], &env, "");
        assert_eq!(
            (d.cpus_per_task, d.gpus_per_task.as_deref()),
            (Some(4), Some("1"))
        );
        let d = desc(&["--cpus-per-gpu=2", "--wrap=true"], &env, "");
        assert_eq!((d.cpus_per_task, d.cpus_per_gpu), (None, Some(2)));
        for (argv, err) in [
            (
                vec!["-c", "2", "--tres-per-task=cpu=4", "--wrap=true"],
                "sbatch: fatal: You can not have --tres-per-task=cpu= and --cpus-per-task please use one or the other\n",
            ),
            (
                vec!["--tres-per-task=gres/gpu=1", "--gpus-per-task=1", "--wrap=true"],
                "sbatch: fatal: You can not have --tres-per-task=gres/gpu= and --gpus-per-task please use one or the other\n",
            ),
            (
                vec!["--tres-per-task=mem=4G", "--wrap=true"],
                "sbatch: fatal: Invalid TRES for --tres-per-task: mem\n",
            ),
            (
                vec!["--tres-per-task=cpu=0", "--wrap=true"],
                "sbatch: fatal: Invalid --tres-per-task=cpu=0\n",
            ),
            (
                vec!["--tres-per-task=license/ansys=1", "--wrap=true"],
                "sbatch: error: Batch job submission failed: Invalid Trackable RESource (TRES) specification (license/ansys=1: licenses cannot be asked for each task here (use -L/--licenses))\n",
            ),
            (
                vec!["--tres-per-task=cpu=2", "--cpus-per-gpu=1", "--wrap=true"],
                "sbatch: fatal: --cpus-per-task, --tres-per-task=cpu:#, and --cpus-per-gpu are mutually exclusive\n",
            ),
            (
                vec!["--tres-per-task=gres/gpu=1", "--ntasks-per-gpu=1", "--wrap=true"],
                "sbatch: fatal: --tres-per-task is mutually exclusive with --ntasks-per-gpu and SLURM_NTASKS_PER_GPU\n",
            ),
        ] {
            let r = run(&argv, &[], "");
            assert!(r.prepared.is_none(), "{argv:?} submitted");
            assert_eq!((r.code, r.err.as_str()), (Some(1), err), "{argv:?}");
        }
    }

    /// `--uid`/`--gid`: root's, by name or number of a user or group the
    /// system knows; anyone else, unknown ones and Slurm's nobody (99) are
    /// refused with Slurm's messages.
    #[test]
    fn uid_and_gid_are_roots() {
        let d = desc(&["--uid=root", "--gid", "0", "--wrap=true"], &[], "");
        assert_eq!((d.user_id, d.group_id), (Some(0), Some(0)));
        let d = desc(&["--uid=0", "--wrap=true"], &[], "");
        assert_eq!((d.user_id, d.group_id), (Some(0), None));
        let d = desc(&["--wrap=true"], &[], "");
        assert_eq!((d.user_id, d.group_id), (None, None));
        for (argv, msg) in [
            ("--uid=no-such-user-here", "Invalid --uid specification"),
            ("--gid=no-such-group-here", "Invalid --gid specification"),
            ("--uid=4000000001", "Invalid --uid specification"),
        ] {
            let r = run(&[argv, "--wrap=true"], &[], "");
            assert_eq!(r.code, Some(EXIT_BAD_OPTION), "{argv}");
            assert!(r.err.contains(msg), "{argv}: {}", r.err);
        }
        let mut out = Vec::new();
        let mut err = Vec::new();
        let mut term = Term {
            out: &mut out,
            err: &mut err,
        };
        let user = Context {
            uid: 1000,
            ..ctx(Path::new("/tmp"))
        };
        let p = prepare(
            &args(&["--uid=0", "--wrap=true"]),
            &[],
            &user,
            &mut &b""[..],
            &mut term,
        );
        assert!(matches!(p, Prepared::Exit(EXIT_BAD_OPTION)));
        let err = String::from_utf8(err).unwrap();
        assert!(
            err.contains("sbatch: error: --uid only permitted by root user"),
            "{err}"
        );
    }

    /// `--export-file`: NUL-separated definitions added to what `--export`
    /// gives (a value may hold a newline); bad files are refused.
    #[test]
    fn export_file_adds_definitions() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("env");
        std::fs::write(&f, "A=1\0MULTI=two\nlines\0B=x=y\0").unwrap();
        let p = f.to_str().unwrap();
        let d = desc(
            &["--export=NONE", "--export-file", p, "--wrap=true"],
            &[("HOME", "/h")],
            "",
        );
        for want in ["A=1", "MULTI=two\nlines", "B=x=y"] {
            assert!(
                d.environment.iter().any(|e| e == want),
                "{want}: {:?}",
                d.environment
            );
        }
        assert!(!d.environment.iter().any(|e| e.starts_with("HOME=")));
        std::fs::write(&f, "A=1\0not a definition\0").unwrap();
        let r = run(&["--export-file", p, "--wrap=true"], &[], "");
        assert!(
            r.err.contains("Invalid environment definition"),
            "{}",
            r.err
        );
        let r = run(&["--export-file=/nonexistent/env", "--wrap=true"], &[], "");
        assert!(
            r.err
                .starts_with("sbatch: error: Could not read --export-file"),
            "{}",
            r.err
        );
        let r = run(&["--export-file=1", "--wrap=true"], &[], "");
        assert!(
            r.err.contains("Invalid --export-file descriptor: 1"),
            "{}",
            r.err
        );
    }

    /// A Torque script's `#PBS` lines become sbatch's options, below
    /// `#SBATCH` and the command line; `--ignore-pbs` drops them.
    #[test]
    fn pbs_directives_are_read_as_slurm_reads_them() {
        let script = "#!/bin/sh\n#PBS -N torque -q debug\n#PBS -l walltime=01:30:00,nodes=2:ppn=4,mem=2gb\n#PBS -l naccelerators=1\n#PBS -m ae -M me@x\n#PBS -j oe -V\ntrue\n";
        assert_eq!(
            pbs_words(script, "s").unwrap(),
            [
                "--job-name=torque",
                "--partition=debug",
                "--time=01:30:00",
                "--nodes=2",
                "--ntasks=8",
                "--mem=2g",
                "--gres=gpu:1",
                "--mail-type=FAIL,END",
                "--mail-user=me@x",
            ]
        );
        let d = desc(&[], &[], script);
        assert_eq!(d.name.as_deref(), Some("torque"));
        assert_eq!(d.partition.as_deref(), Some("debug"));
        assert_eq!(d.time_limit, Some(Some(90)));
        assert_eq!(d.min_nodes, Some(2));
        assert_eq!(d.mem_per_node, Some(2048));
        assert_eq!(d.mail_type.as_deref(), Some("END,FAIL"));
        // #SBATCH and the command line come first.
        let both = "#!/bin/sh\n#SBATCH -J slurm\n#PBS -N torque -l walltime=10:00\ntrue\n";
        let d = desc(&["-t", "5"], &[], both);
        assert_eq!(d.name.as_deref(), Some("slurm"));
        assert_eq!(d.time_limit, Some(Some(5)));
        let d = desc(&["--ignore-pbs"], &[], "#!/bin/sh\n#PBS -N torque\ntrue\n");
        assert_ne!(d.name.as_deref(), Some("torque"));
        // PBS lines after the first command are not directives.
        assert!(pbs_words("#!/bin/sh\ntrue\n#PBS -N late\n", "s")
            .unwrap()
            .is_empty());
        let r = run(&[], &[], "#!/bin/sh\n#PBS -Y\ntrue\n");
        assert_eq!(r.code, Some(1));
        assert!(
            r.err.contains("Unrecognized command line parameter Y"),
            "{}",
            r.err
        );
    }

    const SH: &str = "#!/bin/sh\ntrue\n";

    #[test]
    fn getopt_forms() {
        let t = getopt_table();
        let p = getopt::parse(
            "sbatch",
            &[
                "-n2",
                "-N",
                "3",
                "--time=5",
                "--partition",
                "debug",
                "-vvQ",
                "x.sh",
                "-n",
                "9",
            ]
            .map(String::from),
            &t,
            false,
        )
        .unwrap();
        assert_eq!(p.operands, vec!["x.sh", "-n", "9"]);
        let keys: Vec<(Key, Option<String>)> = p
            .opts
            .iter()
            .map(|(i, v)| (SPECS[*i].key, v.clone()))
            .collect();
        assert_eq!(
            keys,
            vec![
                (Key::Ntasks, Some("2".into())),
                (Key::Nodes, Some("3".into())),
                (Key::Time, Some("5".into())),
                (Key::Partition, Some("debug".into())),
                (Key::Verbose, None),
                (Key::Verbose, None),
                (Key::Quiet, None),
            ]
        );
        // Prefix abbreviation, and `--` ending options.
        let p = getopt::parse(
            "sbatch",
            &["--part=x", "--", "-J"].map(String::from),
            &t,
            false,
        )
        .unwrap();
        assert_eq!(SPECS[p.opts[0].0].key, Key::Partition);
        assert_eq!(p.operands, vec!["-J"]);
        // Optional arguments attach only.
        let p = getopt::parse("sbatch", &["--nice", "5"].map(String::from), &t, false).unwrap();
        assert_eq!(p.opts[0].1, None);
        assert_eq!(p.operands, vec!["5"]);
        // Required arguments take the next word even if it looks like an option.
        let p = getopt::parse("sbatch", &["-J", "-x"].map(String::from), &t, false).unwrap();
        assert_eq!(p.opts[0].1.as_deref(), Some("-x"));
    }

    #[test]
    fn getopt_errors_are_glibcs() {
        let t = getopt_table();
        let e = |a: &[&str]| {
            getopt::parse(
                "sbatch",
                &a.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                &t,
                false,
            )
            .unwrap_err()
            .message
        };
        assert_eq!(e(&["--foo"]), "sbatch: unrecognized option '--foo'");
        assert_eq!(e(&["--foo=1"]), "sbatch: unrecognized option '--foo=1'");
        assert_eq!(e(&["-y"]), "sbatch: invalid option -- 'y'");
        assert_eq!(e(&["-p"]), "sbatch: option requires an argument -- 'p'");
        assert_eq!(
            e(&["--partition"]),
            "sbatch: option '--partition' requires an argument"
        );
        assert_eq!(
            e(&["--hold=1"]),
            "sbatch: option '--hold' doesn't allow an argument"
        );
        assert!(e(&["--nt"])
            .starts_with("sbatch: option '--nt' is ambiguous; possibilities: '--ntasks'"));
    }

    #[test]
    fn unknown_option_message_and_code() {
        let r = run(&["--foo", "x.sh"], &[], "");
        assert_eq!(r.code, Some(255));
        assert_eq!(
            r.err,
            "sbatch: unrecognized option '--foo'\nTry \"sbatch --help\" for more information\n"
        );
    }

    #[test]
    fn every_option_long_and_short() {
        let d = desc(
            &[
                "-J",
                "name",
                "-o",
                "out.%j",
                "-e",
                "err.%j",
                "-i",
                "in.txt",
                "-t",
                "1:00:00",
                "-N",
                "2-3",
                "-n",
                "4",
                "-c",
                "2",
                "--ntasks-per-node",
                "2",
                "--mem",
                "2G",
                "-p",
                "debug",
                "-A",
                "acct",
                "-q",
                "high",
                "-D",
                "sub",
                "-w",
                "n[1-2]",
                "-x",
                "n3",
                "-H",
                "--begin",
                "now+60",
                "--export",
                "NONE",
                "--exclusive",
                "--nice=10",
                "--requeue",
                "--comment",
                "hi there",
                "--wrap",
                "echo hi",
            ],
            &[("SLURM_CONF", "/etc/slurm.conf"), ("HOME", "/home/u")],
            "",
        );
        assert_eq!(d.name.as_deref(), Some("name"));
        assert_eq!(d.std_out.as_deref(), Some("out.%j"));
        assert_eq!(d.std_err.as_deref(), Some("err.%j"));
        assert_eq!(d.std_in.as_deref(), Some("in.txt"));
        assert_eq!(d.time_limit, Some(Some(60)));
        assert_eq!((d.min_nodes, d.max_nodes), (Some(2), Some(3)));
        assert_eq!(d.ntasks, Some(4));
        assert_eq!(d.cpus_per_task, Some(2));
        assert_eq!(d.ntasks_per_node, Some(2));
        assert_eq!(d.mem_per_node, Some(2048));
        assert_eq!(d.partition.as_deref(), Some("debug"));
        assert_eq!(d.account.as_deref(), Some("acct"));
        assert_eq!(d.qos.as_deref(), Some("high"));
        assert_eq!(d.work_dir, "/home/u/jobs/sub");
        assert_eq!(d.req_nodes, vec!["n1", "n2"]);
        assert_eq!(d.exc_nodes, vec!["n3"]);
        assert!(d.hold);
        assert_eq!(d.begin_time, Some(1_800_000_060));
        assert!(d.exclusive);
        assert_eq!(d.nice, Some(10));
        assert_eq!(d.requeue, Some(true));
        assert_eq!(d.comment.as_deref(), Some("hi there"));
        assert_eq!(d.command, None);
        assert_eq!(d.submit_host, "login1");
        assert!(d
            .environment
            .contains(&"SLURM_CONF=/etc/slurm.conf".to_string()));
        assert!(!d.environment.iter().any(|e| e.starts_with("HOME=")));
        assert!(d
            .environment
            .contains(&"SLURM_SUBMIT_DIR=/home/u/jobs".to_string()));
        assert!(d
            .environment
            .contains(&"SLURM_SUBMIT_HOST=login1".to_string()));
    }

    #[test]
    fn attached_short_and_equals_long_forms() {
        let d = desc(
            &[
                "-n2",
                "-N1",
                "-c4",
                "-pdebug",
                "-Jx",
                "-t10",
                "--mem-per-cpu=512",
                "--nodes=1",
                "--ntasks=3",
                "--wrap=true",
            ],
            &[],
            "",
        );
        assert_eq!(d.ntasks, Some(3));
        assert_eq!(d.min_nodes, Some(1));
        assert_eq!(d.cpus_per_task, Some(4));
        assert_eq!(d.partition.as_deref(), Some("debug"));
        assert_eq!(d.name.as_deref(), Some("x"));
        assert_eq!(d.time_limit, Some(Some(10)));
        assert_eq!(d.mem_per_cpu, Some(512));
    }

    #[test]
    fn wrap_builds_the_script() {
        let r = run(&["-o", "/dev/null", "--wrap=true"], &[], "");
        let s = r.prepared.unwrap();
        assert_eq!(
            s.desc.script,
            "#!/bin/sh\n# This script was created by sbatch --wrap.\n\ntrue\n"
        );
        assert_eq!(s.desc.name.as_deref(), Some("wrap"));
        assert_eq!(s.desc.command, None);
        let r = run(&["--wrap=true", "extra"], &[], "");
        assert_eq!(r.code, Some(1));
        assert_eq!(
            r.err,
            "sbatch: error: Script arguments not permitted with --wrap option\n"
        );
    }

    #[test]
    fn script_from_stdin_and_file() {
        let d = desc(&[], &[], "#!/bin/bash\n#SBATCH -J fromstdin\necho hi\n");
        assert_eq!(d.name.as_deref(), Some("fromstdin"));
        assert_eq!(d.command, None);
        let d = desc(&["-"], &[], SH);
        assert_eq!(d.name.as_deref(), Some("sbatch"));

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("job.sh"),
            "#!/bin/sh\n#SBATCH -n 3\nexit 0\n",
        )
        .unwrap();
        let r = run_with(&["job.sh", "a", "b c"], &[], "", dir.path());
        let d = r.prepared.unwrap().desc;
        assert_eq!(d.ntasks, Some(3));
        assert_eq!(d.argv, vec!["a", "b c"]);
        assert_eq!(d.name.as_deref(), Some("job.sh"));
        assert_eq!(
            d.command,
            Some(dir.path().join("job.sh").to_string_lossy().into_owned())
        );
        assert_eq!(d.work_dir, dir.path().to_string_lossy());

        let r = run_with(&["missing.sh"], &[], "", dir.path());
        assert_eq!(r.code, Some(1));
        assert_eq!(r.err, "sbatch: error: Unable to open file missing.sh\n");
    }

    #[test]
    fn script_path_search() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::fs::write(bin.join("onpath.sh"), SH).unwrap();
        let path = bin.to_string_lossy().into_owned();
        let r = run_with(&["onpath.sh"], &[("PATH", &path)], "", dir.path());
        let d = r.prepared.unwrap().desc;
        assert_eq!(
            d.command,
            Some(bin.join("onpath.sh").to_string_lossy().into_owned())
        );
    }

    #[test]
    fn bad_scripts_are_refused() {
        let r = run(&[], &[], "echo hi\n");
        assert_eq!(r.code, Some(1));
        assert_eq!(
            r.err,
            "sbatch: error: This does not look like a batch script.  The first\n\
             sbatch: error: line must start with #! followed by the path to an interpreter.\n\
             sbatch: error: For instance: #!/bin/sh\n"
        );
        let r = run(&[], &[], "");
        assert_eq!(r.err, "sbatch: error: Batch script is empty!\n");
        let r = run(&[], &[], " \n\t\n");
        assert_eq!(
            r.err,
            "sbatch: error: Batch script contains only whitespace!\n"
        );
        let r = run(&[], &[], "#!/bin/sh\r\ntrue\r\n");
        assert_eq!(r.code, Some(1));
        assert!(r.err.contains("DOS line breaks"));
    }

    #[test]
    fn directives_stop_at_first_command() {
        let script = "#!/bin/bash\n\n# a comment\n#SBATCH -J first\n   \n#SBATCH -n 2 -c 3\n  #SBATCH -p ignored-indented\nhostname\n#SBATCH -p after-command\n";
        let (words, _) = script_directives(script, "x").unwrap();
        assert_eq!(words, vec!["-J", "first", "-n", "2", "-c", "3"]);
        let d = desc(&[], &[], script);
        assert_eq!(d.partition, None);
        assert_eq!(d.cpus_per_task, Some(3));
    }

    #[test]
    fn directive_quoting_and_comments() {
        let script = "#!/bin/sh\n#SBATCH -J \"my job\" # trailing comment -p x\n#SBATCH --comment='a b'#c\n#SBATCH --output=a\\ b\n#SBATCH -e e#notcomment\ntrue\n";
        let (words, _) = script_directives(script, "x").unwrap();
        assert_eq!(
            words,
            vec!["-J", "my job", "--comment=a b", "--output=a b", "-e", "e"]
        );
        let d = desc(&[], &[], script);
        assert_eq!(d.name.as_deref(), Some("my job"));
        assert_eq!(d.comment.as_deref(), Some("a b"));

        let r = run(&[], &[], "#!/bin/sh\n#SBATCH -J \"open\ntrue\n");
        assert_eq!(r.code, Some(1));
        assert_eq!(
            r.err,
            "sbatch: fatal: stdin: line 2: Unmatched `\"` in [#SBATCH -J \"open]\n"
        );
    }

    #[test]
    fn bad_directives() {
        let r = run(&[], &[], "#!/bin/sh\n#SBATCH --nice 5\ntrue\n");
        assert_eq!(r.code, Some(255));
        assert_eq!(
            r.err,
            "sbatch: error: Invalid directive found in batch script: 5\n"
        );
        let r = run(&[], &[], "#!/bin/sh\n#SBATCH --bogus\ntrue\n");
        assert_eq!(r.code, Some(255));
        assert_eq!(
            r.err,
            "sbatch: unrecognized option '--bogus'\nTry \"sbatch --help\" for more information\n"
        );
        // Early options in a script are ignored, as Slurm does.
        let d = desc(&[], &[], "#!/bin/sh\n#SBATCH --wrap=x -v\ntrue\n");
        assert_eq!(d.script, "#!/bin/sh\n#SBATCH --wrap=x -v\ntrue\n");
    }

    #[test]
    fn precedence_cli_over_env_over_script() {
        let script = "#!/bin/sh\n#SBATCH -J s -p sp -A sa -t 5 -o so\ntrue\n";
        let env = [
            ("SBATCH_JOB_NAME", "e"),
            ("SBATCH_PARTITION", "ep"),
            ("SBATCH_TIMELIMIT", "7"),
        ];
        let d = desc(&["-J", "c"], &env, script);
        assert_eq!(d.name.as_deref(), Some("c"));
        assert_eq!(d.partition.as_deref(), Some("ep"));
        assert_eq!(d.account.as_deref(), Some("sa"));
        assert_eq!(d.time_limit, Some(Some(7)));
        assert_eq!(d.std_out.as_deref(), Some("so"));
    }

    #[test]
    fn environment_inputs() {
        let env = [
            ("SBATCH_ACCOUNT", "ea"),
            ("SBATCH_QOS", "eq"),
            ("SBATCH_EXCLUSIVE", ""),
            ("SBATCH_OUTPUT", "o"),
            ("SBATCH_ERROR", "e"),
            ("SBATCH_INPUT", "none"),
            ("SBATCH_REQUEUE", "1"),
            ("SBATCH_MEM_PER_NODE", "1G"),
            ("SBATCH_EXPORT", "NONE"),
        ];
        let d = desc(&["--wrap=x"], &env, "");
        assert_eq!(d.account.as_deref(), Some("ea"));
        assert_eq!(d.qos.as_deref(), Some("eq"));
        assert!(d.exclusive);
        assert_eq!(d.std_out.as_deref(), Some("o"));
        assert_eq!(d.std_err.as_deref(), Some("e"));
        assert_eq!(d.std_in.as_deref(), Some("/dev/null"));
        assert_eq!(d.requeue, Some(true));
        assert_eq!(d.mem_per_node, Some(1024));
        assert!(!d.environment.iter().any(|e| e.starts_with("SBATCH_")));
        // A flag variable with a false value leaves the flag unset.
        let d = desc(&["--wrap=x"], &[("SBATCH_REQUEUE", "no")], "");
        assert_eq!(d.requeue, None);
        // Verbose from SBATCH_DEBUG.
        let r = run(&["--wrap=x"], &[("SBATCH_DEBUG", "2")], "");
        assert_eq!(r.prepared.unwrap().verbose, 2);
        // A value error in the environment names the option.
        let r = run(&["--wrap=x"], &[("SBATCH_TIMELIMIT", "soon")], "");
        assert_eq!(r.code, Some(255));
        assert_eq!(r.err, "sbatch: error: Invalid --time specification\n");
    }

    #[test]
    fn export_variants() {
        let env = envv(&[("A", "1"), ("B", "2"), ("SLURM_X", "s"), ("PATH", "/bin")]);
        let kv = |v: Vec<(String, String)>| {
            v.into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            kv(export_environment(None, &env)),
            ["A=1", "B=2", "SLURM_X=s", "PATH=/bin"]
        );
        assert_eq!(
            kv(export_environment(Some("all"), &env)),
            ["A=1", "B=2", "SLURM_X=s", "PATH=/bin"]
        );
        assert_eq!(kv(export_environment(Some("NONE"), &env)), ["SLURM_X=s"]);
        assert_eq!(
            kv(export_environment(Some("A,C=3"), &env)),
            ["A=1", "C=3", "SLURM_X=s"]
        );
        assert_eq!(
            kv(export_environment(Some("ALL,B=9"), &env)),
            ["A=1", "B=9", "SLURM_X=s", "PATH=/bin"]
        );
        assert_eq!(
            kv(export_environment(Some("D=\"x,y\",B"), &env)),
            ["D=x,y", "B=2", "SLURM_X=s"]
        );
        assert_eq!(kv(export_environment(Some("MISSING"), &env)), ["SLURM_X=s"]);
    }

    #[test]
    fn slurm_variables_stand_for_options_beside_sbatchs() {
        let c = ctx(Path::new("/tmp"));
        let vars = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(k, x)| (k.to_string(), x.to_string()))
                .collect()
        };
        let mut w = Vec::new();
        let (o, _) = env_options(&vars(&[("SLURM_CLUSTERS", "c2")]), &c, &mut w).unwrap();
        assert_eq!(o.clusters.as_deref(), Some("c2"));
        // Both set: SLURM_CLUSTERS wins, as Slurm reads it last.
        let both = vars(&[("SBATCH_CLUSTERS", "c1"), ("SLURM_CLUSTERS", "c2")]);
        let (o, _) = env_options(&both, &c, &mut w).unwrap();
        assert_eq!(o.clusters.as_deref(), Some("c2"));
        // SLURM_HINT is --hint (accepted with its warning); SBATCH_HINT wins.
        let mut w = Vec::new();
        env_options(&vars(&[("SLURM_HINT", "nomultithread")]), &c, &mut w).unwrap();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("--hint"), "{w:?}");
        assert!(compat_env_in().contains(&"SLURM_CLUSTERS".to_string()));
    }

    #[test]
    fn job_environment_gets_submit_variables() {
        let d = desc(
            &["--wrap=x"],
            &[("A", "1"), ("SLURM_SUBMIT_HOST", "old")],
            "",
        );
        assert_eq!(
            d.environment,
            vec![
                "A=1",
                "SLURM_SUBMIT_HOST=login1",
                "SLURM_SUBMIT_DIR=/home/u/jobs",
                "SLURM_PRIO_PROCESS=0",
                "SLURM_UMASK=0027"
            ]
        );
        // The submitter's SLURM_UMASK wins over sbatch's umask, even when
        // not exported.
        let d = desc(
            &["--export=NONE", "--wrap=x"],
            &[("SLURM_UMASK", "0077")],
            "",
        );
        assert!(d.environment.contains(&"SLURM_UMASK=0077".to_string()));
        assert_eq!(
            d.environment
                .iter()
                .filter(|e| e.starts_with("SLURM_UMASK="))
                .count(),
            1
        );
    }

    #[test]
    fn size_suffixes() {
        assert_eq!(parse_mem_mib("100"), Some(100));
        assert_eq!(parse_mem_mib("100M"), Some(100));
        assert_eq!(parse_mem_mib("1500K"), Some(2));
        assert_eq!(parse_mem_mib("1k"), Some(1));
        assert_eq!(parse_mem_mib("2G"), Some(2048));
        assert_eq!(parse_mem_mib("2gb"), Some(2048));
        assert_eq!(parse_mem_mib("1T"), Some(1024 * 1024));
        assert_eq!(parse_mem_mib("0"), Some(0));
        assert_eq!(parse_mem_mib("1.5G"), None);
        assert_eq!(parse_mem_mib("G"), None);
        assert_eq!(parse_mem_mib("-1"), None);
        assert_eq!(parse_mem_mib("4X"), None);
        assert_eq!(parse_mem_mib(""), None);
        assert_eq!(parse_mem_mib("99999999999999999999T"), None);
        let r = run(&["--mem=lots", "--wrap=x"], &[], "");
        assert_eq!(r.code, Some(255));
        assert_eq!(r.err, "sbatch: error: Invalid --mem specification\n");
        let r = run(&["--mem-per-cpu=1x", "--wrap=x"], &[], "");
        assert_eq!(
            r.err,
            "sbatch: error: Invalid --mem-per-cpu specification\n"
        );
    }

    #[test]
    fn mem_options_exclude_each_other() {
        let r = run(&["--mem=1G", "--mem-per-cpu=100", "--wrap=x"], &[], "");
        assert_eq!(r.code, Some(1));
        assert_eq!(
            r.err,
            "sbatch: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.\n"
        );
        // One on the command line drops the other from the environment.
        let d = desc(
            &["--mem-per-cpu=100", "--wrap=x"],
            &[("SBATCH_MEM_PER_NODE", "1G")],
            "",
        );
        assert_eq!((d.mem_per_node, d.mem_per_cpu), (None, Some(100)));
        let r = run(
            &["--wrap=x"],
            &[("SBATCH_MEM_PER_NODE", "1G"), ("SBATCH_MEM_PER_CPU", "1")],
            "",
        );
        assert_eq!(r.code, Some(1));
        assert!(r.err.starts_with("sbatch: fatal: SLURM_MEM_PER_CPU"));
        let d = desc(&["--mem=0", "--wrap=x"], &[], "");
        assert_eq!(d.mem_per_node, Some(0));
    }

    #[test]
    fn numbers_and_nodes() {
        assert_eq!(parse_nodes("2").unwrap(), (2, Some(2)));
        assert_eq!(parse_nodes("2-4").unwrap(), (2, Some(4)));
        assert_eq!(parse_nodes("2-").unwrap(), (2, None));
        assert_eq!(parse_nodes("1k").unwrap(), (1024, Some(1024)));
        assert_eq!(
            parse_nodes("abc").unwrap_err().stderr,
            "sbatch: error: \"abc\" is not a valid node count\n"
        );
        assert_eq!(
            parse_nodes("4-2").unwrap_err().stderr,
            "sbatch: error: Maximum node count 2 is less than minimum node count 4\n"
        );
        let r = run(&["-n", "abc", "--wrap=x"], &[], "");
        assert_eq!(r.code, Some(1));
        assert_eq!(
            r.err,
            "sbatch: error: Invalid numeric value \"abc\" for --ntasks.\n"
        );
        let r = run(&["-c", "0", "--wrap=x"], &[], "");
        assert_eq!(
            r.err,
            "sbatch: error: Invalid numeric value \"0\" for --cpus-per-task.\n"
        );
        let r = run(&["--ntasks-per-node=-1", "--wrap=x"], &[], "");
        assert_eq!(
            r.err,
            "sbatch: error: Invalid numeric value \"-1\" for --ntasks-per-node.\n"
        );
        assert!(parse_int("n", "99999999999", true)
            .unwrap_err()
            .stderr
            .contains("too large"));
        let r = run(&["-N", "x", "--wrap=x"], &[], "");
        assert_eq!(r.code, Some(255));
    }

    #[test]
    fn topology_options() {
        let d = desc(
            &[
                "--switches=2@1:00:00",
                "--segment=4",
                "--exclusive=topo",
                "--wrap=x",
            ],
            &[],
            "",
        );
        assert_eq!(
            (d.switches, d.wait4switch, d.segment, d.exclusive_topo),
            (Some(2), Some(3600), Some(4), true)
        );
        let d = desc(&["--wrap=x"], &[("SBATCH_REQ_SWITCH", "1")], "");
        assert_eq!((d.switches, d.wait4switch), (Some(1), None));
        let d = desc(&["--switches=3", "--wrap=x"], &[], "");
        assert!(!d.exclusive_topo && d.segment.is_none() && !d.contiguous);
        assert!(desc(&["--contiguous", "--wrap=x"], &[], "").contiguous);
        let d = desc(
            &["-B", "2:*:1", "--ntasks-per-socket=2", "--wrap=x"],
            &[],
            "",
        );
        assert_eq!(
            (
                d.sockets_per_node,
                d.cores_per_socket,
                d.threads_per_core,
                d.ntasks_per_socket
            ),
            (Some(2), None, Some(1), Some(2))
        );
        let d = desc(&["--cores-per-socket=4", "--wrap=x"], &[], "");
        assert_eq!(d.cores_per_socket, Some(4));
        let d = desc(&["--ntasks-per-core=1", "--wrap=x"], &[], "");
        assert_eq!(d.ntasks_per_core, Some(1));
        let r = run(
            &["--ntasks-per-core=2", "--threads-per-core=1", "--wrap=x"],
            &[],
            "",
        );
        assert_eq!(r.code, Some(1));
        assert!(
            r.err
                .contains("--ntasks-per-core (2) can not be bigger than --threads-per-core (1)"),
            "{}",
            r.err
        );
        assert_ne!(
            run(&["--ntasks-per-core=0", "--wrap=x"], &[], "").code,
            Some(0)
        );
        assert!(parse_extra_node_info("1:2:3:4").is_none());
        assert!(parse_extra_node_info("x").is_none());
        assert_ne!(
            run(&["--sockets-per-node=0", "--wrap=x"], &[], "").code,
            Some(0)
        );
        for bad in [
            "--switches=x",
            "--switches=2@soon",
            "--segment=0",
            "--segment=two",
        ] {
            let r = run(&[bad, "--wrap=x"], &[], "");
            assert_ne!(r.code, Some(0), "{bad}");
            assert!(r.err.contains("--s"), "{bad}: {}", r.err);
        }
    }

    #[test]
    fn time_values() {
        assert_eq!(
            desc(&["-t", "0", "--wrap=x"], &[], "").time_limit,
            Some(None)
        );
        assert_eq!(
            desc(&["-t", "UNLIMITED", "--wrap=x"], &[], "").time_limit,
            Some(None)
        );
        assert_eq!(
            desc(&["-t", "1-0", "--wrap=x"], &[], "").time_limit,
            Some(Some(1440))
        );
        assert_eq!(desc(&["--wrap=x"], &[], "").time_limit, None);
        let r = run(&["-t", "abc", "--wrap=x"], &[], "");
        assert_eq!(r.code, Some(255));
        assert_eq!(r.err, "sbatch: error: Invalid --time specification\n");
        let r = run(&["--begin", "whenever", "--wrap=x"], &[], "");
        assert_eq!(r.err, "sbatch: error: Invalid --begin specification\n");
    }

    #[test]
    fn nice_exclusive_requeue() {
        assert_eq!(desc(&["--nice", "--wrap=x"], &[], "").nice, Some(100));
        assert_eq!(desc(&["--nice=-5", "--wrap=x"], &[], "").nice, Some(-5));
        let r = run(&["--nice=9999999999", "--wrap=x"], &[], "");
        assert_eq!(
            r.err,
            "sbatch: error: Invalid --nice value, out of range (+/- 2147483645)\n"
        );
        assert!(!desc(&["--exclusive=oversubscribe", "--wrap=x"], &[], "").exclusive);
        assert!(desc(&["-s", "--wrap=x"], &[], "").oversubscribe);
        assert!(!desc(&["-s", "--exclusive", "--wrap=x"], &[], "").oversubscribe);
        assert!(desc(&["--exclusive=user", "--wrap=x"], &[], "").exclusive);
        let r = run(&["--exclusive=bogus", "--wrap=x"], &[], "");
        assert_eq!(r.err, "sbatch: error: Invalid --exclusive specification\n");
        assert_eq!(
            desc(&["--requeue", "--no-requeue", "--wrap=x"], &[], "").requeue,
            Some(false)
        );
        assert_eq!(
            desc(&["-o", "NONE", "--wrap=x"], &[], "")
                .std_out
                .as_deref(),
            Some("/dev/null")
        );
    }

    #[test]
    fn ntasks_per_node_without_ntasks_leaves_ntasks_unset() {
        let d = desc(&["-N", "2", "--ntasks-per-node=4", "--wrap=x"], &[], "");
        assert_eq!(d.ntasks, None);
        assert_eq!(d.min_nodes, Some(2));
        assert_eq!(d.ntasks_per_node, Some(4));
    }

    #[test]
    fn fewer_tasks_than_nodes() {
        let r = run(&["-N", "3", "-n", "2", "--wrap=x"], &[], "");
        let d = r.prepared.unwrap().desc;
        assert_eq!((d.min_nodes, d.max_nodes), (Some(2), Some(2)));
        assert_eq!(
            r.err,
            "sbatch: Warning: can't run 2 processes on 3 nodes, setting nnodes to 2\n"
        );
    }

    #[test]
    fn nodelists() {
        let d = desc(&["-w", "n[1-3],n1", "--wrap=x"], &[], "");
        assert_eq!(d.req_nodes, vec!["n1", "n2", "n3", "n1"]);
        assert_eq!(d.min_nodes, Some(3));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("hosts"), "# nodes\nn1\nn[2-3] # more\n\n").unwrap();
        let r = run_with(&["-w", "./hosts", "--wrap=x"], &[], "", dir.path());
        assert_eq!(r.prepared.unwrap().desc.req_nodes, vec!["n1", "n2", "n3"]);
        let r = run(&["-x", "n[1-", "--wrap=x"], &[], "");
        assert_eq!(r.code, Some(1));
        assert_eq!(
            r.err,
            "sbatch: error: Batch job submission failed: Invalid node name specified\n"
        );
    }

    #[test]
    fn unsupported_options() {
        let r = run(&["--array=1-", "--wrap=x"], &[], "");
        assert_eq!(r.code, Some(1));
        assert_eq!(
            r.err,
            "sbatch: error: Invalid job array specification: 1-\n"
        );
        let r = run(&["--hint=nomultithread", "--wrap=x"], &[], "");
        assert!(r.prepared.is_some());
        assert_eq!(
            r.err,
            "sbatch: warning: --hint is not supported yet and was ignored\n"
        );
        let r = run(&["-Q", "--hint=nomultithread", "--wrap=x"], &[], "");
        assert_eq!(r.err, "");
        let d = desc(&["--signal=B:USR1@90", "--wrap=x"], &[], "");
        assert_eq!(d.signal.as_deref(), Some("B:USR1@90"));
        let r = run(&["--signal=USR1@soon", "--wrap=x"], &[], "");
        assert!(
            r.err.contains("Invalid --signal specification"),
            "{}",
            r.err
        );
        // Mail reaches the request, checked.
        let d = desc(
            &["--mail-type=end,BEGIN", "--mail-user=me@x", "--wrap=x"],
            &[],
            "",
        );
        assert_eq!(d.mail_type.as_deref(), Some("BEGIN,END"));
        assert_eq!(d.mail_user.as_deref(), Some("me@x"));
        assert_eq!(
            desc(&["--mail-type=NONE", "--wrap=x"], &[], "").mail_type,
            None
        );
        let r = run(&["--mail-type=SOMETIMES", "--wrap=x"], &[], "");
        assert!(r.err.contains("unknown type SOMETIMES"), "{}", r.err);
        let r = run(&["--wrap=x"], &[("SBATCH_BATCH", "x")], "");
        assert!(r.err.contains("is not supported yet"), "{}", r.err);
        // GRES options reach the request; a malformed one is refused.
        let r = run(&["--wrap=x"], &[("SBATCH_GRES", "gpu:a100:1")], "");
        assert_eq!(r.prepared.unwrap().desc.gres.as_deref(), Some("gpu:a100:1"));
        let r = run(&["--gpus-per-node=a100:2", "--wrap=x"], &[], "");
        assert_eq!(
            r.prepared.unwrap().desc.gpus_per_node.as_deref(),
            Some("a100:2")
        );
        let r = run(&["--gres=gpu:a:b:c", "--wrap=x"], &[], "");
        assert_eq!(r.code, Some(1));
        assert!(r.err.contains("Invalid generic resource"), "{}", r.err);
    }

    #[test]
    fn help_usage_version_and_quiet_verbose() {
        let r = run(&["--version"], &[], "");
        assert_eq!((r.code, r.out.as_str()), (Some(0), "slurm 25.11.0\n"));
        let r = run(&["-V", "--bogus-after-version"], &[], "");
        assert_eq!((r.code, r.out.as_str()), (Some(0), "slurm 25.11.0\n"));
        let r = run(&["--bogus-before-version", "-V"], &[], "");
        assert_eq!(r.code, Some(255));
        let r = run(&["-h"], &[], "");
        assert_eq!(r.code, Some(0));
        assert!(r.out.starts_with("Usage: sbatch"));
        let r = run(&["--usage"], &[], "");
        assert!(r.out.starts_with("Usage: sbatch"));
        let r = run(&["-v", "-Q", "--wrap=x"], &[], "");
        assert_eq!(r.code, Some(1));
        assert_eq!(
            r.err,
            "sbatch: error: don't specify both --verbose (-v) and --quiet (-Q)\n"
        );
    }

    #[test]
    fn verbose_lists_the_options_defined_and_where_they_end() {
        let script = "#!/bin/sh\n#SBATCH -J fromscript\n#SBATCH --time=10\n#SBATCH -H\ntrue\n";
        let r = run(
            &["-v", "-v", "--time=20", "-p", "debug"],
            &[("SBATCH_ACCOUNT", "acct")],
            script,
        );
        assert!(r.prepared.is_some(), "{}", r.err);
        let listing: Vec<&str> = r
            .err
            .lines()
            .skip_while(|l| *l != "sbatch: defined options")
            .take_while(|l| *l != "sbatch: end of defined options")
            .collect();
        assert_eq!(
            listing,
            [
                "sbatch: defined options",
                "sbatch: -------------------- --------------------",
                "sbatch: account             : acct",
                "sbatch: hold                : set",
                "sbatch: job-name            : fromscript",
                "sbatch: partition           : debug",
                "sbatch: time                : 20",
                "sbatch: verbose             : 2",
                "sbatch: -------------------- --------------------",
            ]
        );
        // Without -v, nothing of it.
        let r = run(&["--time=20"], &[], script);
        assert!(!r.err.contains("defined options"), "{}", r.err);
    }

    fn report_of(sub: &Submission, res: Result<Response, CallError>) -> (i32, String, String) {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let code = {
            let mut term = Term {
                out: &mut out,
                err: &mut err,
            };
            report(sub, res, &mut term)
        };
        (
            code,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    }

    #[test]
    fn reports() {
        let sub = run(&["-o", "/dev/null", "--wrap=true"], &[], "")
            .prepared
            .unwrap();
        assert!(matches!(sub.request(), RequestBody::SubmitBatchJob(_)));
        assert_eq!(
            report_of(&sub, Ok(Response::Submitted { job_id: 1 })),
            (0, "Submitted batch job 1\n".into(), "".into())
        );
        let p = run(&["--parsable", "--wrap=true"], &[], "")
            .prepared
            .unwrap();
        assert_eq!(
            report_of(&p, Ok(Response::Submitted { job_id: 2 })).1,
            "2\n"
        );
        let q = run(&["-Q", "--wrap=true"], &[], "").prepared.unwrap();
        assert_eq!(report_of(&q, Ok(Response::Submitted { job_id: 2 })).1, "");
        let e = RpcError {
            error: SlurmError::InvalidPartitionName,
            detail: Some("no partition 'x'".into()),
        };
        assert_eq!(
            report_of(&sub, Ok(Response::Error(e.clone()))),
            (
                1,
                "".into(),
                "sbatch: error: Batch job submission failed: Invalid partition name specified\n"
                    .into()
            )
        );
        assert_eq!(report_of(&sub, Err(CallError::Rpc(e))).0, 1);
        let net = slurm_common::net::NetError::Closed;
        assert_eq!(
            report_of(&sub, Err(CallError::Net(net))).2,
            "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)\n"
        );
        // A controller reached but silent past the time allowed: Slurm's
        // socket timeout.
        let late = slurm_common::net::NetError::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "no reply from h within 30s",
        ));
        assert_eq!(
            report_of(&sub, Err(CallError::Net(late))).2,
            "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation\n"
        );
    }

    #[test]
    fn test_only_report() {
        let sub = run(&["--test-only", "-n", "1", "--wrap=true"], &[], "")
            .prepared
            .unwrap();
        assert!(matches!(sub.request(), RequestBody::TestJob(_)));
        let (code, out, err) = report_of(
            &sub,
            Ok(Response::TestResult {
                job_id: 3,
                start_time: 1_800_000_000,
                cpus: 1,
                nodes: vec!["n2".into(), "n1".into()],
                partition: "debug".into(),
            }),
        );
        assert_eq!((code, out.as_str()), (0, ""));
        assert_eq!(
            err,
            format!(
                "sbatch: Job 3 to start at {} using 1 processors on nodes n[1-2] in partition debug\n",
                timefmt::format_timestamp(1_800_000_000)
            )
        );
    }
}
