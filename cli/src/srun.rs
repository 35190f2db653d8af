//! `srun` and `salloc`.
//!
//! `srun` inside an allocation (`SLURM_JOB_ID` set, or `--jobid`) creates a
//! step: the controller lays the tasks out over the job's nodes and signs a
//! step credential; `srun` listens for the step's I/O, asks each node daemon
//! to start its tasks, prints their output (with `--label`, prefixed by the
//! task id), feeds its stdin to task 0, forwards signals, and exits with the
//! worst task's status. Outside an allocation it first allocates one (as
//! `salloc` does), runs the step, and releases the allocation.
//!
//! `salloc` allocates, runs a command (default: the user's shell) with the
//! allocation's environment, and releases the allocation when it exits.

use crate::common::{self, call, CallError};
use crate::fmt::{getopt, Arg, Opt, Parsed};
use slurm_common::auth::CredSource;
use slurm_common::conf::SlurmConf;
use slurm_common::stepio::{IoFrame, IoKind};
use slurm_common::{grpc, hostlist, net, timefmt};
use slurm_proto::grpc::NodeCall;
use slurm_proto::{
    JobDesc, JobRecord, JobState, RequestBody, Response, SlurmError, StepLayout, StepRequest,
    TaskLaunch,
};
use std::collections::HashMap;
use std::io::Write;
use std::time::Duration;

/// The GPUs a step asks for in a job (`--gres=none`: none), from
/// options already checked by the parser; none asked: the job's.
pub fn step_gpus(o: &AllocOpts) -> Option<slurm_proto::StepGpus> {
    use slurm_common::gres::{parse_gpus, parse_list};
    if o.gres
        .as_deref()
        .is_some_and(|g| g.eq_ignore_ascii_case("none"))
    {
        return Some(slurm_proto::StepGpus::default());
    }
    let mut g = slurm_proto::StepGpus::default();
    let mut asked = false;
    let n = |c: u64| u32::try_from(c).unwrap_or(u32::MAX);
    for spec in o
        .gres
        .as_deref()
        .and_then(|v| parse_list(v).ok())
        .unwrap_or_default()
        .into_iter()
        .filter(|s| s.name == "gpu")
    {
        (g.per_node, g.kind, asked) = (n(spec.count), spec.kind, true);
    }
    for (v, slot) in [(&o.gpus_per_node, 0), (&o.gpus_per_task, 1), (&o.gpus, 2)] {
        if let Some(spec) = v.as_deref().and_then(|v| parse_gpus(v).ok()) {
            let c = n(spec.count);
            match slot {
                0 => g.per_node = c,
                1 => g.per_task = c,
                _ => g.total = c,
            }
            if spec.kind.is_some() {
                g.kind = spec.kind;
            }
            asked = true;
        }
    }
    asked.then_some(g)
}

/// GPU options on srun's command line: the environment's (the job's, as
/// sbatch set them) are then not read, so `srun --gpus=1` in a
/// `--gpus-per-node=4` job asks one GPU, not both.
pub fn names_gpus(cli: &[String]) -> bool {
    // (A program's own words may be taken for srun's: then the step asks
    // none, which is the job's GPUs, the same as the environment's.)
    cli.iter().enumerate().any(|(i, w)| {
        ["--gpus", "--gpus-per-node", "--gpus-per-task"]
            .iter()
            .any(|o| w == o || w.starts_with(&format!("{o}=")))
            || (w.starts_with("-G") && !w.starts_with("--"))
            // --gres names GPUs only when it says gpu (or none).
            || match w.strip_prefix("--gres") {
                Some(v) if v.starts_with('=') => v.contains("gpu") || v.eq_ignore_ascii_case("=none"),
                Some("") => cli
                    .get(i + 1)
                    .is_some_and(|v| v.contains("gpu") || v.eq_ignore_ascii_case("none")),
                _ => false,
            }
    })
}

/// `--gpu-bind`'s forms: `[verbose,]` then `none`, `closest`,
/// `single:N`, `per_task:N`, `map_gpu:I[,I...]`, `mask_gpu:M[,M...]`.
pub fn valid_gpu_bind(v: &str) -> bool {
    let b = match v.get(..8) {
        Some(p) if p.eq_ignore_ascii_case("verbose,") => &v[8..],
        _ => v,
    };
    let (kind, arg) = b.split_once(':').unwrap_or((b, ""));
    let list_of = |ok: &dyn Fn(&str) -> bool| {
        !arg.is_empty()
            && arg.split(',').all(|item| match item.split_once('*') {
                Some((x, n)) => {
                    n.trim()
                        .parse::<u32>()
                        .is_ok_and(|n| (1..=1024).contains(&n))
                        && ok(x)
                }
                None => ok(item),
            })
    };
    match kind.to_ascii_lowercase().as_str() {
        "none" | "closest" => arg.is_empty(),
        "single" | "per_task" => arg.parse::<u32>().is_ok_and(|n| n > 0),
        "map_gpu" | "map" => list_of(&|x| x.trim().parse::<u32>().is_ok()),
        "mask_gpu" | "mask" => list_of(&|x| {
            let x = x.trim();
            let x = x.strip_prefix("0x").or(x.strip_prefix("0X")).unwrap_or(x);
            !x.is_empty() && u64::from_str_radix(x, 16).is_ok()
        }),
        _ => false,
    }
}

/// How long srun waits for a busy step before saying so: Slurm's
/// SlurmctldTimeout kept within 60 to 300 s, plus up to 9 s told apart by
/// the process id.
pub fn step_wait_secs(slurmctld_timeout: u32) -> u64 {
    u64::from(slurmctld_timeout.clamp(60, 300)) + u64::from(std::process::id() % 10)
}

/// Options shared by srun and salloc.
#[derive(Debug, Clone, Default)]
pub struct AllocOpts {
    pub ntasks: Option<u32>,
    pub nodes: Option<(u32, Option<u32>)>,
    pub cpus_per_task: Option<u32>,
    pub ntasks_per_node: Option<u32>,
    pub nodelist: Vec<String>,
    pub exclude: Vec<String>,
    pub job_name: Option<String>,
    pub time: Option<Option<u32>>,
    pub partition: Option<String>,
    pub account: Option<String>,
    pub qos: Option<String>,
    pub mem: Option<u64>,
    pub mem_per_cpu: Option<u64>,
    pub exclusive: bool,
    /// `--exclusive=topo`.
    pub exclusive_topo: bool,
    /// `-s`/`--oversubscribe`.
    pub oversubscribe: bool,
    /// `--switches=count[@max-time]` (count, wait in seconds).
    pub switches: Option<(u32, Option<u32>)>,
    /// `--segment`.
    pub segment: Option<u32>,
    /// `--sockets-per-node`, `--cores-per-socket`, `--threads-per-core`
    /// (or `-B`), `--ntasks-per-socket`, for a new allocation.
    pub sockets_per_node: Option<u32>,
    pub cores_per_socket: Option<u32>,
    pub threads_per_core: Option<u32>,
    pub ntasks_per_socket: Option<u32>,
    /// `--ntasks-per-core`: for a new allocation and for the step.
    pub ntasks_per_core: Option<u32>,
    /// `--ntasks-per-gpu`: for a new allocation (a step in an allocation
    /// takes the job's, derived by the controller).
    pub ntasks_per_gpu: Option<u32>,
    /// `--tmp`: MiB of TmpDisk per node, for a new allocation.
    pub tmp: Option<u64>,
    /// `--priority`, for a new allocation.
    pub priority: Option<u32>,
    /// `--mincpus`, for a new allocation.
    pub mincpus: Option<u32>,
    /// `--cpus-per-gpu` / `--mem-per-gpu` (MiB), for a new allocation.
    pub cpus_per_gpu: Option<u32>,
    pub mem_per_gpu: Option<u64>,
    pub contiguous: bool,
    /// `-I`/`--immediate[=secs]`: give up when the allocation has not
    /// started within that many seconds (1 without a value).
    pub immediate: Option<u32>,
    /// `-O`: allocate as if one task per node, run more tasks than CPUs.
    pub overcommit: bool,
    /// `-d`: the allocation waits for these jobs.
    pub dependency: Option<String>,
    /// `--reservation`, `--comment`, `-b/--begin`, `--nice`, `-H/--hold`:
    /// as sbatch's, for the allocation srun or salloc makes.
    pub reservation: Option<String>,
    pub comment: Option<String>,
    pub begin: Option<i64>,
    /// `--deadline` (Unix seconds), `--time-min` (minutes), `--extra`,
    /// `--wckey`: as sbatch's, for a new allocation.
    pub deadline: Option<i64>,
    pub time_min: Option<u32>,
    /// srun `--propagate[=LIMITS]` (checked; bare: ALL).
    pub propagate: Option<String>,
    /// `-k/--no-kill[=off]`, for a new allocation.
    pub no_kill: bool,
    pub extra: Option<String>,
    pub wckey: Option<String>,
    pub nice: Option<i32>,
    pub hold: bool,
    /// `--mail-type` (checked) and `--mail-user`.
    pub mail_type: Option<String>,
    pub mail_user: Option<String>,
    /// `--signal=SIG[@TIME]`: the warning signal, for a new allocation.
    pub signal: Option<String>,
    /// `--open-mode`: `append` (else output files are truncated).
    pub open_mode: Option<&'static str>,
    /// `--pty`: task 0 on a pseudo-terminal, srun's terminal in raw mode.
    pub pty: bool,
    /// `-X`: a Ctrl-C is sent on at once (no status shown first).
    pub disable_status: bool,
    /// `--gpu-bind` (or `--tres-bind=gres/gpu:...`), checked.
    pub gpu_bind: Option<String>,
    /// `--exact`: the step holds only the CPUs its tasks need (else all of
    /// the job's on its nodes); `--overlap`: it holds none, waits for none.
    pub exact: bool,
    pub overlap: bool,
    /// `--external-launcher`: a step (an MPI launcher's daemons) that
    /// holds nothing and has every CPU, GPU and byte of the job on its
    /// nodes, whatever its per-task or memory options say.
    pub external_launcher: bool,
    /// `--quit-on-interrupt`: a Ctrl-C ends the step at once.
    pub quit_on_interrupt: bool,
    /// `-E`: the tasks keep this environment's task and node counts.
    pub preserve_env: bool,
    /// `-r/--relative=N`: the step starts at node N of its allocation.
    pub relative: Option<u32>,
    /// `-M/--clusters`: only this cluster (or `all`) can be asked.
    pub clusters: Option<String>,
    /// `--prolog`/`--epilog`: run by srun before and after the step
    /// (`none`: not even slurm.conf's `SrunProlog`/`SrunEpilog`).
    pub prolog: Option<String>,
    pub epilog: Option<String>,
    /// `--task-prolog`/`--task-epilog`: run on the nodes around each task.
    pub task_prolog: Option<String>,
    pub task_epilog: Option<String>,
    /// `--multi-prog`: the command is a file naming each task's program.
    pub multi_prog: bool,
    /// `--bcast[=dest]`: the program copied to each node first (`""`: to
    /// BcastParameters' DestDir, else the working directory).
    pub bcast: Option<String>,
    /// salloc `--no-shell`: allocate, run nothing, leave the allocation.
    pub no_shell: bool,
    /// salloc `--bell` (`Some(true)`) / `--no-bell` (`Some(false)`).
    pub bell: Option<bool>,
    /// Warnings for options accepted without effect ([`IGNORED`]), printed
    /// once the command line is read.
    pub warnings: Vec<String>,
    /// salloc `-K/--kill-command[=SIG]`: the signal its command gets when
    /// the allocation is revoked (default SIGTERM).
    pub kill_command: Option<i32>,
    /// srun `--test-only`: say when and where the job would start.
    pub test_only: bool,
    /// `--gres`, `--gpus`, `--gpus-per-node`, `--gpus-per-task` (for a new allocation).
    pub gres: Option<String>,
    /// `--constraint` (node features).
    pub constraint: Option<String>,
    /// `--licenses`.
    pub licenses: Option<String>,
    pub gpus: Option<String>,
    pub gpus_per_node: Option<String>,
    pub gpus_per_task: Option<String>,
    /// `--tres-per-task` as given (its CPUs and GPUs are in
    /// `cpus_per_task` and `gpus_per_task`).
    pub tres_per_task: Option<String>,
    /// `--cpu-bind` (else `SLURM_CPU_BIND`).
    pub cpu_bind: Option<String>,
    pub label: bool,
    pub kill_on_bad_exit: bool,
    /// `-W`: seconds the other tasks may run on once one has ended (0:
    /// as long as they like).
    pub wait: Option<u32>,
    pub quiet: bool,
    pub verbose: u32,
    pub distribution: Option<String>,
    pub jobid: Option<u32>,
    pub chdir: Option<String>,
    pub export: Option<String>,
    /// `-o`/`-e`: file patterns for the tasks' stdout and stderr.
    pub output: Option<String>,
    /// `-i`: where task 0's stdin comes from (`none`, `all`, `0`, a file
    /// pattern); srun's own stdin by default.
    pub input: Option<String>,
    pub error: Option<String>,
    pub command: Vec<String>,
    pub version: bool,
    pub help: bool,
    pub usage: bool,
}

/// Options of [`OPTS`] that differ from Slurm's (for [`crate::compat`]).
pub(crate) const COMPAT_NOTES: &[(&str, crate::compat::Support)] = &[
    (
        "ntasks-per-gpu",
        crate::compat::Support::Differs(
            "in a job: with -n, GPUs enough for that many tasks each; with --gpus=G, G x N tasks; tasks bound single:N; no CPUs added to a step",
        ),
    ),
    ("extra", crate::sbatch::EXTRA_NOTE),
    ("wckey", crate::sbatch::WCKEY_NOTE),
    (
        "bcast",
        crate::compat::Support::Differs(
            "the program goes with each node's launch: at most 12 MiB, uncompressed, no --send-libs",
        ),
    ),
    (
        "unbuffered",
        crate::compat::Support::Differs("output is always passed on as it comes"),
    ),
    (
        "gpu-bind",
        crate::compat::Support::Differs(
            "per_task, single, map_gpu and mask_gpu set each task's CUDA_VISIBLE_DEVICES; closest binds nothing (no GPU topology here)",
        ),
    ),
    (
        "tres-bind",
        crate::compat::Support::Differs(
            "gres/gpu: as --gpu-bind; other resources are ignored with a warning",
        ),
    ),
    (
        "overlap",
        crate::compat::Support::Differs(
            "shares CPUs, memory and GPUs with every other step, as Slurm's; the CPUs it uses are not bound to it",
        ),
    ),
    (
        "exact",
        crate::compat::Support::Differs(
            "the step holds its tasks' CPUs (a cpuset of them, chosen by the node daemon, not Slurm's core-by-core pick)",
        ),
    ),
    (
        "signal",
        crate::compat::Support::Differs(
            "for the allocation srun makes; a step of an existing job gets no signal of its own (a warning says so)",
        ),
    ),
];

pub(crate) const OPTS: &[Opt] = &[
    Opt {
        short: Some('n'),
        long: "ntasks",
        arg: Arg::Required,
    },
    Opt {
        short: Some('N'),
        long: "nodes",
        arg: Arg::Required,
    },
    Opt {
        short: Some('c'),
        long: "cpus-per-task",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "ntasks-per-node",
        arg: Arg::Required,
    },
    Opt {
        short: Some('w'),
        long: "nodelist",
        arg: Arg::Required,
    },
    Opt {
        short: Some('F'),
        long: "nodefile",
        arg: Arg::Required,
    },
    Opt {
        short: Some('x'),
        long: "exclude",
        arg: Arg::Required,
    },
    Opt {
        short: Some('J'),
        long: "job-name",
        arg: Arg::Required,
    },
    Opt {
        short: Some('t'),
        long: "time",
        arg: Arg::Required,
    },
    Opt {
        short: Some('p'),
        long: "partition",
        arg: Arg::Required,
    },
    Opt {
        short: Some('A'),
        long: "account",
        arg: Arg::Required,
    },
    Opt {
        short: Some('q'),
        long: "qos",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "mem",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "mem-per-cpu",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "exclusive",
        arg: Arg::Optional,
    },
    Opt {
        short: Some('s'),
        long: "oversubscribe",
        arg: Arg::No,
    },
    Opt {
        short: None,
        long: "overlap",
        arg: Arg::No,
    },
    Opt {
        short: None,
        long: "external-launcher",
        arg: Arg::No,
    },
    Opt {
        short: None,
        long: "switches",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "segment",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "contiguous",
        arg: Arg::No,
    },
    Opt {
        short: None,
        long: "tmp",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "priority",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "mincpus",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "cpus-per-gpu",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "sockets-per-node",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "cores-per-socket",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "threads-per-core",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "ntasks-per-socket",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "ntasks-per-core",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "ntasks-per-gpu",
        arg: Arg::Required,
    },
    Opt {
        short: Some('B'),
        long: "extra-node-info",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "mem-per-gpu",
        arg: Arg::Required,
    },
    Opt {
        short: Some('l'),
        long: "label",
        arg: Arg::No,
    },
    Opt {
        short: Some('K'),
        long: "kill-on-bad-exit",
        arg: Arg::Optional,
    },
    Opt {
        short: None,
        long: "cpu-bind",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "cpu_bind",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "mpi",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "gres",
        arg: Arg::Required,
    },
    Opt {
        short: Some('C'),
        long: "constraint",
        arg: Arg::Required,
    },
    Opt {
        short: Some('L'),
        long: "licenses",
        arg: Arg::Required,
    },
    Opt {
        short: Some('G'),
        long: "gpus",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "gpus-per-node",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "gpus-per-task",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "tres-per-task",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "export",
        arg: Arg::Required,
    },
    Opt {
        short: Some('u'),
        long: "unbuffered",
        arg: Arg::No,
    },
    Opt {
        short: Some('Q'),
        long: "quiet",
        arg: Arg::No,
    },
    Opt {
        short: Some('I'),
        long: "immediate",
        arg: Arg::Optional,
    },
    Opt {
        short: Some('O'),
        long: "overcommit",
        arg: Arg::No,
    },
    Opt {
        short: Some('i'),
        long: "input",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "reservation",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "comment",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "deadline",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "propagate",
        arg: Arg::Attached,
    },
    Opt {
        short: None,
        long: "bcast",
        arg: Arg::Attached,
    },
    Opt {
        short: Some('k'),
        long: "no-kill",
        arg: Arg::Attached,
    },
    Opt {
        short: None,
        long: "time-min",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "extra",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "wckey",
        arg: Arg::Required,
    },
    Opt {
        short: Some('b'),
        long: "begin",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "nice",
        arg: Arg::Optional,
    },
    Opt {
        short: Some('H'),
        long: "hold",
        arg: Arg::No,
    },
    Opt {
        short: None,
        long: "exact",
        arg: Arg::No,
    },
    Opt {
        short: None,
        long: "mail-type",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "pty",
        arg: Arg::No,
    },
    Opt::new(Some('X'), "disable-status", Arg::No),
    Opt::new(Some('E'), "preserve-env", Arg::No),
    Opt::new(Some('r'), "relative", Arg::Required),
    Opt::new(Some('M'), "clusters", Arg::Required),
    Opt::new(None, "quit-on-interrupt", Arg::No),
    Opt::new(None, "prolog", Arg::Required),
    Opt::new(None, "epilog", Arg::Required),
    Opt::new(None, "task-prolog", Arg::Required),
    Opt::new(None, "task-epilog", Arg::Required),
    Opt {
        short: None,
        long: "multi-prog",
        arg: Arg::No,
    },
    Opt {
        short: None,
        long: "no-shell",
        arg: Arg::No,
    },
    Opt {
        short: None,
        long: "bell",
        arg: Arg::No,
    },
    Opt {
        short: None,
        long: "no-bell",
        arg: Arg::No,
    },
    Opt {
        short: Some('K'),
        long: "kill-command",
        arg: Arg::Optional,
    },
    Opt {
        short: None,
        long: "test-only",
        arg: Arg::No,
    },
    Opt {
        short: None,
        long: "mail-user",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "signal",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "open-mode",
        arg: Arg::Required,
    },
    Opt {
        short: Some('d'),
        long: "dependency",
        arg: Arg::Required,
    },
    Opt {
        short: Some('v'),
        long: "verbose",
        arg: Arg::No,
    },
    Opt {
        short: Some('V'),
        long: "version",
        arg: Arg::No,
    },
    Opt {
        short: Some('h'),
        long: "help",
        arg: Arg::No,
    },
    Opt {
        short: None,
        long: "usage",
        arg: Arg::No,
    },
    Opt {
        short: Some('m'),
        long: "distribution",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "jobid",
        arg: Arg::Required,
    },
    Opt {
        short: Some('D'),
        long: "chdir",
        arg: Arg::Required,
    },
    Opt {
        short: Some('W'),
        long: "wait",
        arg: Arg::Required,
    },
    Opt {
        short: Some('o'),
        long: "output",
        arg: Arg::Required,
    },
    Opt {
        short: Some('e'),
        long: "error",
        arg: Arg::Required,
    },
];

fn num(prog: &str, opt: &str, v: &str) -> Result<u32, String> {
    v.trim()
        .parse::<u32>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{prog}: error: Invalid numeric value \"{v}\" for --{opt}."))
}

/// Options given together on the command line that Slurm refuses there
/// (from the environment, the command line's wins): `--tres-per-task`
/// with the option its entry stands for or with `--ntasks-per-gpu`, and
/// CPUs per task with `--cpus-per-gpu`. Else what the command line gives
/// per task (then the environment's may disagree).
pub fn cli_tres_conflict(prog: &str, cli: &[String]) -> Result<CliPerTask, String> {
    let split = split_command(cli);
    // A command line getopt refuses is reported by `parse`.
    let Ok(parsed) = getopt(prog, &cli[..split], &table(prog)) else {
        return Ok(CliPerTask::default());
    };
    let (mut cpus, mut gpus, mut per_gpu, mut tres) = (false, false, false, None);
    let mut tres_given = false;
    let mut tasks_per_gpu = false;
    for p in parsed {
        if let Parsed::Opt(name, val) = p {
            match name {
                "cpus-per-task" => cpus = true,
                "gpus-per-task" => gpus = true,
                "cpus-per-gpu" => per_gpu = true,
                "ntasks-per-gpu" => tasks_per_gpu = true,
                "tres-per-task" => {
                    tres_given = true;
                    tres = val.and_then(|v| slurm_common::tres::parse(&v).ok());
                }
                _ => {}
            }
        }
    }
    let twice = |tres: &str, option: &str| {
        format!(
            "{prog}: fatal: {}",
            slurm_common::tres::given_twice(tres, option)
        )
    };
    if let Some(t) = &tres {
        if cpus && t.cpus.is_some() {
            return Err(twice("cpu", "cpus-per-task"));
        }
        if gpus && t.gpus.is_some() {
            return Err(twice("gres/gpu", "gpus-per-task"));
        }
        if tasks_per_gpu {
            return Err(format!(
                "{prog}: fatal: --tres-per-task is mutually exclusive with --ntasks-per-gpu and SLURM_NTASKS_PER_GPU"
            ));
        }
    }
    let tres_cpus = tres.is_some_and(|t| t.cpus.is_some());
    if per_gpu && (cpus || tres_cpus) {
        return Err(format!(
            "{prog}: fatal: {}",
            slurm_common::tres::CPUS_PER_GPU_EXCLUSIVE
        ));
    }
    Ok(CliPerTask {
        cpus: cpus || tres_cpus,
        tres: tres_given,
    })
}

/// What a command line gives per task ([`cli_tres_conflict`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CliPerTask {
    /// CPUs per task (`-c`, or a `--tres-per-task` with `cpu`).
    pub cpus: bool,
    /// A `--tres-per-task`: it replaces the environment's whole.
    pub tres: bool,
}

/// `SLURM_CPUS_PER_TASK` and `SLURM_TRES_PER_TASK` (srun's input
/// environment) giving different CPUs per task, which Slurm refuses.
pub fn env_tres_conflict(env: &dyn Fn(&str) -> Option<String>) -> Result<(), String> {
    let Some(tres) = env("SLURM_TRES_PER_TASK").filter(|v| !v.is_empty()) else {
        return Ok(());
    };
    let Some(cpus) = env("SLURM_CPUS_PER_TASK").and_then(|v| v.trim().parse::<u32>().ok()) else {
        return Ok(());
    };
    match slurm_common::tres::parse(&tres) {
        Ok(t) if t.cpus.is_some_and(|c| c != cpus) => Err(format!(
            "srun: fatal: cpus-per-task set by two different environment variables SLURM_CPUS_PER_TASK={cpus} != SLURM_TRES_PER_TASK=cpu={}",
            t.cpus.unwrap_or_default()
        )),
        _ => Ok(()),
    }
}

/// Where the options end and the command begins (srun stops at the first
/// word that is not an option or its argument).
fn split_command(args: &[String]) -> usize {
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a == "--" {
            return i;
        }
        if let Some(body) = a.strip_prefix("--") {
            let name = body.split('=').next().unwrap_or("");
            let takes = OPTS
                .iter()
                .chain(IGNORED)
                .find(|o| o.long == name || (!name.is_empty() && o.long.starts_with(name)))
                .map(|o| o.arg == Arg::Required)
                .unwrap_or(false);
            i += if takes && !body.contains('=') { 2 } else { 1 };
            continue;
        }
        if a.len() > 1 && a.starts_with('-') {
            let chars: Vec<char> = a[1..].chars().collect();
            let mut skip = 1;
            for (k, c) in chars.iter().enumerate() {
                if let Some(o) = OPTS.iter().chain(IGNORED).find(|o| o.short == Some(*c)) {
                    if o.arg != Arg::No {
                        if o.arg == Arg::Required && k + 1 == chars.len() {
                            skip = 2;
                        }
                        break;
                    }
                }
            }
            i += skip;
            continue;
        }
        return i;
    }
    args.len()
}

/// Options of [`OPTS`] that act on a step's tasks: salloc starts none, so
/// it does not know them (as Slurm's salloc).
const SRUN_ONLY: &[&str] = &[
    "propagate",
    "bcast",
    "msg-timeout",
    "slurmd-debug",
    "treewidth",
    "threads",
    "overlap",
    "external-launcher",
    "label",
    "kill-on-bad-exit",
    "cpu-bind",
    "cpu_bind",
    "mpi",
    "export",
    "unbuffered",
    "jobid",
    "wait",
    "output",
    "error",
    "input",
    "exact",
    "pty",
    "disable-status",
    "preserve-env",
    "relative",
    "quit-on-interrupt",
    "prolog",
    "epilog",
    "task-prolog",
    "task-epilog",
    "multi-prog",
    "test-only",
    "open-mode",
];

/// Options of [`OPTS`] and [`IGNORED`] only salloc has.
const SALLOC_ONLY: &[&str] = &[
    "no-shell",
    "kill-command",
    "bell",
    "no-bell",
    "wait-all-nodes",
];

/// Slurm options accepted with a warning and no effect yet (as sbatch's):
/// none of them changes what the job is given or where its tasks run.
pub(crate) const IGNORED: &[Opt] = &[
    Opt::new(None, "acctg-freq", Arg::Required),
    Opt::new(None, "cluster-constraint", Arg::Required),
    Opt::new(None, "cpu-freq", Arg::Required),
    Opt::new(None, "delay-boot", Arg::Required),
    Opt::new(None, "gpu-bind", Arg::Required),
    Opt::new(None, "gpu-freq", Arg::Required),
    Opt::new(None, "gres-flags", Arg::Required),
    Opt::new(None, "hint", Arg::Required),
    Opt::new(None, "mcs-label", Arg::Required),
    Opt::new(None, "mem-bind", Arg::Required),
    Opt::new(None, "network", Arg::Required),
    Opt::new(None, "prefer", Arg::Required),
    Opt::new(None, "profile", Arg::Required),
    Opt::new(None, "reboot", Arg::No),
    Opt::new(None, "spread-job", Arg::No),
    Opt::new(None, "tres-bind", Arg::Required),
    Opt::new(None, "use-min-nodes", Arg::No),
    Opt::new(None, "wait-all-nodes", Arg::Required),
    // srun's own, about how it talks to the nodes.
    Opt::new(None, "msg-timeout", Arg::Required),
    Opt::new(None, "slurmd-debug", Arg::Required),
    Opt::new(None, "treewidth", Arg::Required),
    Opt::new(Some('T'), "threads", Arg::Required),
];

/// Whether salloc rings the terminal bell once its allocation is granted:
/// `--bell` always, `--no-bell` never, else after a wait of more than ten
/// seconds; only ever on a terminal.
pub fn rings_bell(bell: Option<bool>, waited: Duration, tty: bool) -> bool {
    tty && bell.unwrap_or(waited > Duration::from_secs(10))
}

/// `srun --test-only`: the controller's estimate of when and where the job
/// would start; nothing is submitted or run.
fn test_only(client: &net::Client, o: &AllocOpts, name: &str, in_alloc: Option<u32>) -> i32 {
    if in_alloc.is_some() {
        eprintln!("srun: error: --test-only is for a new allocation, not a step of job");
        return 1;
    }
    // The controller checks a test like a batch submission, which needs a
    // script; this one is never stored or run.
    let mut desc = job_desc(o, name);
    desc.script = "#!/bin/sh\n".into();
    match call(client, RequestBody::TestJob(desc)) {
        Ok(Response::TestResult {
            job_id,
            start_time,
            cpus,
            nodes,
            partition,
        }) => {
            eprint!(
                "{}",
                common::will_start_line("srun", job_id, start_time, cpus, &nodes, &partition)
            );
            0
        }
        Ok(Response::Error(e)) | Err(CallError::Rpc(e)) => {
            let m = match &e.detail {
                Some(d) => format!("{} ({d})", e.error.message()),
                None => e.error.message().to_string(),
            };
            eprintln!("srun: error: Job allocation failure: {m}");
            1
        }
        Ok(_) => {
            eprintln!("srun: error: unexpected reply from the controller");
            1
        }
        Err(e) => {
            eprintln!("srun: error: {e}");
            1
        }
    }
}

/// The option table of `prog` (srun's without [`SALLOC_ONLY`], or
/// salloc's without [`SRUN_ONLY`]).
pub(crate) fn table(prog: &str) -> Vec<Opt> {
    OPTS.iter()
        .chain(IGNORED)
        .filter(|o| {
            if prog == "salloc" {
                !SRUN_ONLY.contains(&o.long)
            } else {
                !SALLOC_ONLY.contains(&o.long)
            }
        })
        .copied()
        .collect()
}

pub fn parse(prog: &str, args: &[String]) -> Result<AllocOpts, String> {
    let split = split_command(args);
    let mut o = AllocOpts::default();
    let mut rest: Vec<String> = args[split..].to_vec();
    if rest.first().is_some_and(|a| a == "--") {
        rest.remove(0);
    }
    o.command = rest;
    for p in getopt(prog, &args[..split], &table(prog))? {
        let Parsed::Opt(name, val) = p else { continue };
        let v = val.clone().unwrap_or_default();
        match name {
            "ntasks" => o.ntasks = Some(num(prog, name, &v)?),
            "nodes" => {
                let (a, b) = match v.split_once('-') {
                    Some((a, b)) => (num(prog, name, a)?, Some(num(prog, name, b)?)),
                    None => (num(prog, name, &v)?, None),
                };
                o.nodes = Some((a, b));
            }
            "cpus-per-task" => {
                o.cpus_per_task = Some(num(prog, name, &v)?);
                // --cpus-per-gpu from the environment gives way.
                o.cpus_per_gpu = None;
            }
            "ntasks-per-node" => o.ntasks_per_node = Some(num(prog, name, &v)?),
            "nodefile" => {
                o.nodelist = crate::common::read_hostfile(&v)
                    .ok_or_else(|| format!("{prog}: error: Invalid --nodefile node file"))?;
            }
            "nodelist" | "exclude" => {
                let names = hostlist::expand(&v).map_err(|e| format!("{prog}: error: {e}"))?;
                if name == "nodelist" {
                    o.nodelist = names;
                } else {
                    o.exclude = names;
                }
            }
            "job-name" => o.job_name = Some(v),
            "time" => {
                o.time = Some(
                    timefmt::parse_time_limit(&v)
                        .map_err(|_| format!("{prog}: error: Invalid --time specification"))?,
                )
            }
            "partition" => o.partition = Some(v),
            "account" => o.account = Some(v),
            "qos" => o.qos = Some(v),
            "mem" | "mem-per-cpu" => {
                let m = crate::sbatch::parse_mem_mib(&v)
                    .ok_or_else(|| format!("{prog}: error: Invalid --{name} specification"))?;
                if name == "mem" {
                    o.mem = Some(m);
                } else {
                    o.mem_per_cpu = Some(m);
                }
            }
            "exclusive" => {
                o.exclusive = true;
                o.exclusive_topo |= v.eq_ignore_ascii_case("topo");
            }
            "oversubscribe" => o.oversubscribe = true,
            "contiguous" => o.contiguous = true,
            "mincpus" => o.mincpus = Some(num(prog, name, &v)?).filter(|n| *n > 0),
            "priority" => {
                o.priority = Some(
                    crate::sbatch::parse_priority(&v).map_err(|e| format!("{prog}: error: {e}"))?,
                )
            }
            "tmp" => {
                o.tmp = Some(
                    crate::sbatch::parse_mem_mib(&v)
                        .ok_or_else(|| format!("{prog}: error: Invalid --tmp specification"))?,
                )
            }
            "sockets-per-node" => {
                o.sockets_per_node = Some(num(prog, name, &v)?).filter(|n| *n > 0)
            }
            "cores-per-socket" => {
                o.cores_per_socket = Some(num(prog, name, &v)?).filter(|n| *n > 0)
            }
            "threads-per-core" => {
                o.threads_per_core = Some(num(prog, name, &v)?).filter(|n| *n > 0)
            }
            "ntasks-per-socket" => {
                o.ntasks_per_socket = Some(num(prog, name, &v)?).filter(|n| *n > 0)
            }
            "ntasks-per-core" => o.ntasks_per_core = Some(num(prog, name, &v)?).filter(|n| *n > 0),
            "ntasks-per-gpu" => match num(prog, name, &v)? {
                0 => {
                    return Err(format!(
                        "{prog}: error: Invalid --ntasks-per-gpu value: {v}"
                    ))
                }
                n => o.ntasks_per_gpu = Some(n),
            },
            "extra-node-info" => {
                let (a, b, c) = crate::sbatch::parse_extra_node_info(&v).ok_or_else(|| {
                    format!("{prog}: error: Invalid --extra-node-info specification")
                })?;
                o.sockets_per_node = a;
                o.cores_per_socket = b;
                o.threads_per_core = c;
            }
            "cpus-per-gpu" => {
                let n = num(prog, name, &v)?;
                if n == 0 {
                    return Err(format!("{prog}: error: Invalid --cpus-per-gpu value: {v}"));
                }
                o.cpus_per_gpu = Some(n);
                // CPUs per task from before (the environment: both on the
                // command line is refused by `cli_tres_conflict`) give way.
                o.cpus_per_task = None;
            }
            "mem-per-gpu" => {
                o.mem_per_gpu =
                    Some(crate::sbatch::parse_mem_mib(&v).ok_or_else(|| {
                        format!("{prog}: error: Invalid --mem-per-gpu value: {v}")
                    })?);
            }
            "switches" => {
                o.switches =
                    Some(crate::sbatch::parse_switches(&v).ok_or_else(|| {
                        format!("{prog}: error: Invalid --switches specification")
                    })?);
            }
            "segment" => {
                o.segment =
                    Some(v.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| {
                        format!("{prog}: error: Invalid --segment specification")
                    })?);
            }
            "licenses" => {
                slurm_common::licenses::parse(&v).map_err(|e| format!("{prog}: error: {e}"))?;
                o.licenses = Some(v);
            }
            "constraint" => {
                slurm_common::constraint::Constraint::parse(&v)
                    .map_err(|e| format!("{prog}: error: {e}"))?;
                o.constraint = Some(v);
            }
            // (srun `--gres=none`: a step without the job's GPUs.)
            "gres" if prog == "srun" && v.eq_ignore_ascii_case("none") => o.gres = Some(v),
            "gres" => {
                slurm_common::gres::parse_list(&v).map_err(|e| format!("{prog}: error: {e}"))?;
                o.gres = Some(v);
            }
            "tres-per-task" => {
                use slurm_common::tres::{parse, TresError};
                let t = parse(&v).map_err(|e| match e {
                    TresError::Fatal(m) => format!("{prog}: fatal: {m}"),
                    e @ TresError::Invalid(_) => match prog {
                        "salloc" => format!("{prog}: error: Job submit/allocate failed: {e}"),
                        _ => format!("{prog}: error: Unable to allocate resources: {e}"),
                    },
                })?;
                // From the environment or the command line, the later wins
                // (the command line's comes later; both there is refused
                // before, by `cli_tres_conflict`).
                if let Some(c) = t.cpus {
                    o.cpus_per_task = Some(c);
                    o.cpus_per_gpu = None;
                }
                if let Some(g) = t.gpus {
                    o.gpus_per_task = Some(g);
                }
                o.tres_per_task = Some(v);
            }
            "gpus" | "gpus-per-node" | "gpus-per-task" => {
                slurm_common::gres::parse_gpus(&v).map_err(|e| format!("{prog}: error: {e}"))?;
                match name {
                    "gpus" => o.gpus = Some(v),
                    "gpus-per-node" => o.gpus_per_node = Some(v),
                    _ => o.gpus_per_task = Some(v),
                }
            }
            "cpu-bind" | "cpu_bind" => {
                slurm_common::cpubind::CpuBind::parse(&v)
                    .map_err(|e| format!("{prog}: error: {e}"))?;
                o.cpu_bind = Some(v);
            }
            "label" => o.label = true,
            "kill-on-bad-exit" => o.kill_on_bad_exit = v.is_empty() || v != "0",
            "quiet" => o.quiet = true,
            "immediate" => {
                o.immediate = Some(if v.is_empty() {
                    1
                } else {
                    num(prog, name, &v)?
                })
            }
            "verbose" => o.verbose += 1,
            "version" => o.version = true,
            "overcommit" => o.overcommit = true,
            "reservation" => o.reservation = Some(v),
            "comment" => o.comment = Some(v),
            "extra" => o.extra = Some(v),
            "no-kill" => {
                o.no_kill = crate::sbatch::parse_no_kill(val.as_deref())
                    .map_err(|e| format!("{prog}: error: {e}"))?
            }
            "propagate" => {
                let v = if v.is_empty() { "ALL".to_string() } else { v };
                slurm_common::rlimits::parse_list(&v).map_err(|e| {
                    format!("{prog}: error: Invalid --propagate specification: {e}")
                })?;
                o.propagate = Some(v);
            }
            "wckey" => o.wckey = Some(v),
            "deadline" => {
                let t = slurm_common::timefmt::parse_timestamp(&v, crate::common::now())
                    .map_err(|_| format!("{prog}: error: Invalid --deadline specification"))?;
                o.deadline = Some(t);
            }
            "time-min" => {
                o.time_min = slurm_common::timefmt::parse_time_limit(&v)
                    .map_err(|_| format!("{prog}: error: Invalid --time-min specification"))?
                    .filter(|m| *m != 0);
            }
            "begin" => {
                let t = slurm_common::timefmt::parse_timestamp(&v, crate::common::now())
                    .map_err(|_| format!("{prog}: error: Invalid --begin specification"))?;
                o.begin = Some(t);
            }
            "nice" => {
                let n: i32 = if v.is_empty() {
                    100
                } else {
                    v.trim()
                        .parse()
                        .map_err(|_| format!("{prog}: error: Invalid --nice value: {v}"))?
                };
                if n.unsigned_abs() > 2_147_483_645 {
                    return Err(format!(
                        "{prog}: error: Invalid --nice value, out of range (+/- 2147483645)"
                    ));
                }
                o.nice = Some(n);
            }
            "hold" => o.hold = true,
            "pty" => o.pty = true,
            "disable-status" => o.disable_status = true,
            "overlap" => o.overlap = true,
            "external-launcher" => o.external_launcher = true,
            "preserve-env" => o.preserve_env = true,
            "relative" => o.relative = Some(num(prog, name, &v)?),
            "clusters" => o.clusters = Some(v),
            "quit-on-interrupt" => o.quit_on_interrupt = true,
            "prolog" => o.prolog = Some(v),
            "epilog" => o.epilog = Some(v),
            "task-prolog" => o.task_prolog = Some(v),
            "task-epilog" => o.task_epilog = Some(v),
            "wait" => {
                o.wait = Some(
                    v.trim()
                        .parse()
                        .map_err(|_| format!("{prog}: error: Invalid --wait value: {v}"))?,
                )
            }
            "multi-prog" => o.multi_prog = true,
            "bcast" => o.bcast = Some(v),
            "no-shell" => o.no_shell = true,
            "bell" => o.bell = Some(true),
            "no-bell" => o.bell = Some(false),
            "gpu-bind" if prog != "sbatch" => {
                if !valid_gpu_bind(&v) {
                    return Err(format!("{prog}: error: Invalid --gpu-bind argument: {v}"));
                }
                o.gpu_bind = Some(v);
            }
            // (`gres/gpu:...` among `+`-joined resources; the others are
            // not bound here.)
            "tres-bind" if prog != "sbatch" && v.split('+').any(|p| p.starts_with("gres/gpu:")) => {
                let b = v
                    .split('+')
                    .find_map(|p| p.strip_prefix("gres/gpu:"))
                    .unwrap_or_default()
                    .to_string();
                if !valid_gpu_bind(&b) {
                    return Err(format!("{prog}: error: Invalid --tres-bind argument: {v}"));
                }
                o.gpu_bind = Some(b);
            }
            _ if IGNORED.iter().any(|i| i.long == name) => o.warnings.push(format!(
                "{prog}: warning: --{name} is not supported yet and was ignored"
            )),
            "kill-command" => {
                o.kill_command = Some(if v.is_empty() {
                    libc::SIGTERM
                } else {
                    slurm_common::signal::parse(&v)
                        .ok_or_else(|| format!("{prog}: error: Invalid signal name: {v}"))?
                })
            }
            "test-only" => o.test_only = true,
            "mail-type" => {
                o.mail_type = slurm_common::mail::parse_types(&v)
                    .map_err(|e| format!("{prog}: error: {e}"))?
            }
            "mail-user" => {
                slurm_common::mail::check_user(&v).map_err(|e| format!("{prog}: error: {e}"))?;
                o.mail_user = Some(v);
            }
            "signal" => {
                // (`B:` names a batch shell: there is none here.)
                if v.starts_with("B:") || v.starts_with("b:") {
                    return Err(format!("{prog}: error: Invalid --signal specification"));
                }
                slurm_common::signal::parse_warning(&v)
                    .map_err(|e| format!("{prog}: error: {e}"))?;
                o.signal = Some(v);
            }
            "open-mode" => {
                o.open_mode = Some(match v.chars().next().map(|c| c.to_ascii_lowercase()) {
                    Some('a') => "append",
                    Some('t') => "truncate",
                    _ => {
                        return Err(format!(
                            "{prog}: error: Invalid --open-mode argument: {v}. Ignored"
                        ))
                    }
                })
            }
            "exact" => o.exact = true,
            "dependency" => o.dependency = Some(v),
            "help" => o.help = true,
            "usage" => o.usage = true,
            "distribution" => {
                slurm_common::cpubind::parse_distribution(&v)
                    .map_err(|e| format!("{prog}: error: {e}"))?;
                o.distribution = Some(v);
            }
            "jobid" => o.jobid = Some(num(prog, name, &v)?),
            "chdir" => o.chdir = Some(v),
            "export" => o.export = Some(v),
            "output" => o.output = Some(v),
            "input" => {
                if let Ok(n) = v.parse::<u32>() {
                    if n != 0 {
                        return Err(format!(
                            "{prog}: error: --input={v}: only task 0 can be given stdin here"
                        ));
                    }
                }
                o.input = Some(v)
            }
            "error" => o.error = Some(v),
            "mpi" if !matches!(v.as_str(), "none" | "pmi2" | "pmix" | "openmpi") => {
                return Err(format!("{prog}: error: MPI type '{v}' is not known"));
            }
            // Buffering and the like do not change what runs where.
            _ => {}
        }
    }
    if let (Some(k), Some(t)) = (o.ntasks_per_core, o.threads_per_core) {
        if t < k {
            return Err(format!(
                "{prog}: error: --ntasks-per-core ({k}) can not be bigger than --threads-per-core ({t})"
            ));
        }
    }
    if o.ntasks_per_gpu.is_some() {
        for (given, other) in [
            // (A TRES of CPUs alone is refused on the command line only:
            // `cli_tres_conflict`.)
            (
                o.tres_per_task
                    .as_deref()
                    .and_then(|t| slurm_common::tres::parse(t).ok())
                    .is_some_and(|t| t.gpus.is_some()),
                "--tres-per-task",
            ),
            (o.gpus_per_task.is_some(), "--gpus-per-task"),
            (o.ntasks_per_node.is_some(), "--ntasks-per-node"),
        ] {
            if given {
                return Err(format!(
                    "{prog}: fatal: {other} is mutually exclusive with --ntasks-per-gpu and SLURM_NTASKS_PER_GPU"
                ));
            }
        }
    }
    // Fewer tasks than nodes: as many nodes as tasks, as Slurm's.
    if let (Some(nt), Some((min, max))) = (o.ntasks.filter(|n| *n > 0), o.nodes) {
        let max = max.map(|m| m.min(nt));
        if nt < min {
            o.warnings.push(format!(
                "{prog}: warning: can't run {nt} processes on {min} nodes, setting nnodes to {nt}"
            ));
            o.nodes = Some((nt, Some(nt)));
        } else {
            o.nodes = Some((min, max));
        }
    }
    Ok(o)
}

fn env_map() -> Vec<(String, String)> {
    std::env::vars().collect()
}

/// The environment a step's tasks get (`--export`, default ALL).
fn export_env(spec: Option<&str>) -> Vec<String> {
    let env = env_map();
    match spec {
        None => env.into_iter().map(|(k, v)| format!("{k}={v}")).collect(),
        Some(s) => {
            let mut out: Vec<String> = Vec::new();
            let items: Vec<&str> = s.split(',').collect();
            let all = items.iter().any(|i| i.eq_ignore_ascii_case("ALL"));
            let none = items.iter().any(|i| i.eq_ignore_ascii_case("NONE"));
            for (k, v) in &env {
                if all || (!none && items.contains(&k.as_str())) || k.starts_with("SLURM_") {
                    out.push(format!("{k}={v}"));
                }
            }
            for i in items {
                if i.contains('=') {
                    out.push(i.to_string());
                }
            }
            out
        }
    }
}

fn cwd() -> String {
    std::env::current_dir()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "/tmp".into())
}

fn job_desc(o: &AllocOpts, default_name: &str) -> JobDesc {
    let work_dir = match &o.chdir {
        Some(d) if d.starts_with('/') => d.clone(),
        Some(d) => format!("{}/{d}", cwd()),
        None => cwd(),
    };
    JobDesc {
        name: Some(
            o.job_name
                .clone()
                .unwrap_or_else(|| default_name.to_string()),
        ),
        partition: o.partition.clone(),
        account: o.account.clone(),
        qos: o.qos.clone(),
        time_limit: o.time,
        min_nodes: o.nodes.map(|n| n.0).or(if o.nodelist.is_empty() {
            None
        } else {
            Some(o.nodelist.len() as u32)
        }),
        max_nodes: o.nodes.and_then(|n| n.1),
        // Overcommitted, the allocation is one task per node; the step
        // then runs every task on it. (With --ntasks-per-gpu the GPUs
        // follow the real task count: the controller overcommits.)
        ntasks: if o.overcommit && o.ntasks_per_gpu.is_none() {
            o.ntasks
                .map(|_| o.nodes.map_or(1, |n| n.0).max(o.nodelist.len() as u32))
        } else {
            o.ntasks
        },
        overcommit: o.overcommit && o.ntasks_per_gpu.is_some(),
        cpus_per_task: o.cpus_per_task,
        ntasks_per_node: if o.overcommit {
            None
        } else {
            o.ntasks_per_node
        },
        dependency: o.dependency.clone(),
        reservation: o.reservation.clone(),
        comment: o.comment.clone(),
        begin_time: o.begin,
        deadline: o.deadline,
        no_kill: o.no_kill,
        time_min: o.time_min,
        extra: o.extra.clone(),
        wckey: o.wckey.clone(),
        nice: o.nice,
        hold: o.hold,
        mail_type: o.mail_type.clone(),
        mail_user: o.mail_user.clone(),
        signal: o.signal.clone(),
        mem_per_node: o.mem,
        mem_per_cpu: o.mem_per_cpu,
        req_nodes: o.nodelist.clone(),
        exc_nodes: o.exclude.clone(),
        exclusive: o.exclusive,
        exclusive_topo: o.exclusive_topo,
        oversubscribe: o.oversubscribe && !o.exclusive,
        switches: o.switches.map(|s| s.0),
        wait4switch: o.switches.and_then(|s| s.1),
        segment: o.segment,
        contiguous: o.contiguous,
        cpus_per_gpu: o.cpus_per_gpu,
        mem_per_gpu: o.mem_per_gpu,
        sockets_per_node: o.sockets_per_node,
        cores_per_socket: o.cores_per_socket,
        threads_per_core: o.threads_per_core,
        ntasks_per_socket: o.ntasks_per_socket,
        ntasks_per_core: o.ntasks_per_core,
        ntasks_per_gpu: o.ntasks_per_gpu,
        gpu_bind: o.gpu_bind.clone(),
        tmp_disk: o.tmp,
        priority: o.priority,
        min_cpus: o.mincpus,
        gres: o.gres.clone(),
        constraint: o.constraint.clone(),
        licenses: o.licenses.clone(),
        gpus: o.gpus.clone(),
        gpus_per_node: o.gpus_per_node.clone(),
        gpus_per_task: o.gpus_per_task.clone(),
        work_dir,
        environment: Vec::new(),
        submit_host: slurm_common::users::hostname(),
        ..Default::default()
    }
}

fn get_job(client: &net::Client, id: u32) -> Result<Option<JobRecord>, CallError> {
    let only = slurm_proto::JobFilter {
        job_ids: vec![id],
        states: Some(Vec::new()),
        ..Default::default()
    };
    match call(client, RequestBody::GetJobsMatching(only))? {
        Response::Jobs { jobs, .. } => Ok(jobs.into_iter().find(|j| j.job_id == id)),
        _ => Err(CallError::Unexpected),
    }
}

/// Why no allocation was made: the message, and whether `--immediate`
/// gave up (srun and salloc then exit with `SLURM_EXIT_IMMEDIATE`).
struct NotAllocated {
    msg: String,
    immediate: bool,
}

impl From<String> for NotAllocated {
    fn from(msg: String) -> Self {
        NotAllocated {
            msg,
            immediate: false,
        }
    }
}

impl NotAllocated {
    /// Reported, and the exit code for it.
    fn exit(self, codes: common::ExitCodes) -> i32 {
        eprintln!("{}", self.msg);
        if self.immediate {
            codes.immediate
        } else {
            codes.error
        }
    }
}

/// Allocate and wait until the job runs. Messages go to stderr as Slurm's.
fn allocate(
    prog: &str,
    client: &net::Client,
    o: &AllocOpts,
    name: &str,
) -> Result<JobRecord, NotAllocated> {
    let id = match call(client, RequestBody::AllocateJob(job_desc(o, name))) {
        Ok(Response::Submitted { job_id }) => job_id,
        Ok(_) => {
            return Err(
                format!("{prog}: error: Unable to allocate resources: unexpected reply").into(),
            )
        }
        Err(e) => {
            return Err(NotAllocated {
                immediate: o.immediate.is_some()
                    && matches!(&e, CallError::Rpc(r) if r.error == SlurmError::NodesBusy),
                msg: format!("{prog}: error: Unable to allocate resources: {e}"),
            })
        }
    };
    let mut announced = false;
    let asked = std::time::Instant::now();
    let give_up = o
        .immediate
        .map(|s| std::time::Instant::now() + Duration::from_secs(s.into()));
    loop {
        let j = get_job(client, id)
            .map_err(|e| format!("{prog}: error: {e}"))?
            .ok_or_else(|| format!("{prog}: error: job {id} vanished"))?;
        match j.state {
            JobState::Running => {
                if announced && !o.quiet {
                    eprintln!("{prog}: job {id} has been allocated resources");
                }
                if prog == "salloc" && !o.quiet {
                    eprintln!("salloc: Granted job allocation {id}");
                }
                if prog == "salloc" {
                    use std::io::IsTerminal;
                    let tty = std::io::stdout().is_terminal();
                    if rings_bell(o.bell, asked.elapsed(), tty) {
                        print!("\x07");
                        let _ = std::io::stdout().flush();
                    }
                }
                return Ok(j);
            }
            JobState::Pending if give_up.is_some_and(|t| std::time::Instant::now() >= t) => {
                let _ = call(
                    client,
                    RequestBody::Cancel(slurm_proto::CancelFilter {
                        job_ids: vec![id],
                        ..Default::default()
                    }),
                );
                return Err(NotAllocated {
                    msg: format!(
                        "{prog}: error: Unable to allocate resources: {}",
                        slurm_proto::SlurmError::NodesBusy.message()
                    ),
                    immediate: true,
                });
            }
            JobState::Pending => {
                if !announced && !o.quiet && give_up.is_none() {
                    if prog == "salloc" {
                        eprintln!("salloc: Pending job allocation {id}");
                    }
                    eprintln!("{prog}: job {id} queued and waiting for resources");
                    announced = true;
                }
            }
            s => {
                return Err(format!(
                    "{prog}: error: Unable to allocate resources: job {id} is {}",
                    s.name()
                )
                .into())
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn release(client: &net::Client, id: u32, status: i32) {
    let _ = call(client, RequestBody::CompleteJob { job_id: id, status });
}

/// Exit code of a raw wait status, as a shell reports it.
fn shell_code(status: i32) -> i32 {
    let (code, sig) = slurm_proto::wait_status_pair(status);
    if sig != 0 {
        128 + sig
    } else {
        code
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "Hangup",
        libc::SIGINT => "Interrupt",
        libc::SIGKILL => "Killed",
        libc::SIGSEGV => "Segmentation fault",
        libc::SIGTERM => "Terminated",
        libc::SIGABRT => "Aborted",
        libc::SIGBUS => "Bus error",
        _ => "Signal",
    }
}

/// `--multi-prog`'s file (`RANKS PROGRAM [ARGS...]` per line: ranks `3`,
/// `0-2,5` or `*`; `%t` the task's rank, `%o` its place in the line's
/// ranks; `#` comments) as the argv every task runs: a shell that picks
/// its line by `$SLURM_PROCID`, every word quoted. Every task needs a line.
pub fn multi_prog_argv(text: &str, ntasks: u32) -> Result<Vec<String>, String> {
    fn quote(w: &str) -> String {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
    let mut prog: Vec<Option<Vec<String>>> = vec![None; ntasks as usize];
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let words = crate::fmt::split_words(line);
        let Some((ranks, cmd)) = words.split_first() else {
            continue;
        };
        let ranks = ranks.as_str();
        if cmd.is_empty() {
            return Err(format!("line {}: no program for ranks {ranks}", n + 1));
        }
        let ids: Vec<u32> = if ranks == "*" {
            (0..ntasks)
                .filter(|t| prog[*t as usize].is_none())
                .collect()
        } else {
            let mut ids = Vec::new();
            for part in ranks.split(',') {
                let (a, b) = part.split_once('-').unwrap_or((part, part));
                let bad = || format!("line {}: invalid ranks {ranks}", n + 1);
                let a: u32 = a.parse().map_err(|_| bad())?;
                let b: u32 = b.parse().map_err(|_| bad())?;
                if a > b || b >= ntasks {
                    return Err(format!(
                        "line {}: ranks {ranks} outside the step's {ntasks} tasks",
                        n + 1
                    ));
                }
                ids.extend(a..=b);
            }
            ids
        };
        for (offset, id) in ids.iter().enumerate() {
            let slot = &mut prog[*id as usize];
            if slot.is_some() {
                return Err(format!("line {}: task {id} has a program already", n + 1));
            }
            *slot = Some(
                cmd.iter()
                    .map(|w| {
                        w.replace("%t", &id.to_string())
                            .replace("%o", &offset.to_string())
                    })
                    .collect(),
            );
        }
    }
    let mut script = String::from("case \"$SLURM_PROCID\" in\n");
    for (id, p) in prog.iter().enumerate() {
        let Some(words) = p else {
            return Err(format!("No executable program specified for task {id}"));
        };
        let cmd: Vec<String> = words.iter().map(|w| quote(w)).collect();
        script.push_str(&format!("{id}) exec {} ;;\n", cmd.join(" ")));
    }
    script.push_str("esac\nexit 1\n");
    Ok(vec!["/bin/sh".into(), "-c".into(), script])
}

/// `0-3,5`: sorted task ids as ranges.
fn ranges(ids: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            ids[i].to_string()
        } else {
            format!("{}-{}", ids[i], ids[j])
        });
        i = j + 1;
    }
    out.join(",")
}

/// The size of srun's terminal (rows, columns); 24x80 without one.
fn terminal_size() -> (u16, u16) {
    // SAFETY: TIOCGWINSZ fills the winsize it is given.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(0, libc::TIOCGWINSZ, &mut ws) } == 0;
    if ok && ws.ws_row > 0 && ws.ws_col > 0 {
        (ws.ws_row, ws.ws_col)
    } else {
        (24, 80)
    }
}

/// srun's terminal in raw mode while a `--pty` step runs (keys go to the
/// remote terminal as typed: Ctrl-C becomes its SIGINT there); put back
/// when dropped.
struct RawTerminal(Option<libc::termios>);

impl RawTerminal {
    fn enter() -> RawTerminal {
        // SAFETY: tcgetattr/tcsetattr on stdin with termios structs we own.
        unsafe {
            if libc::isatty(0) != 1 {
                return RawTerminal(None);
            }
            let mut old: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(0, &mut old) != 0 {
                return RawTerminal(None);
            }
            let mut raw = old;
            libc::cfmakeraw(&mut raw);
            if libc::tcsetattr(0, libc::TCSANOW, &raw) != 0 {
                return RawTerminal(None);
            }
            RawTerminal(Some(old))
        }
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        if let Some(old) = &self.0 {
            // SAFETY: restoring the attributes read in `enter`.
            unsafe {
                libc::tcsetattr(0, libc::TCSANOW, old);
            }
        }
    }
}

struct StepRun {
    layout: StepLayout,
    job: JobRecord,
    conf: SlurmConf,
    opts: AllocOpts,
}

/// Launch the step's tasks and relay their I/O; returns the worst raw status.
async fn run_step(r: StepRun) -> Result<i32, String> {
    // Signals srun gets from here on: handled in the output loop below
    // (Slurm's rules); one during the launch waits for it.
    let (sig_tx, mut sig_rx) = tokio::sync::mpsc::unbounded_channel::<i32>();
    // (Registered here, before anything starts, not in the task.)
    let mut streams: Vec<_> = {
        use tokio::signal::unix::{signal, SignalKind};
        [
            SignalKind::interrupt(),
            SignalKind::terminate(),
            SignalKind::hangup(),
            SignalKind::quit(),
            SignalKind::user_defined1(),
            SignalKind::user_defined2(),
        ]
        .iter()
        .filter_map(|k| signal(*k).ok().map(|s| (k.as_raw_value(), s)))
        .collect()
    };
    tokio::spawn(async move {
        loop {
            let futs = streams.iter_mut().map(|(n, s)| {
                let n = *n;
                Box::pin(async move {
                    s.recv().await;
                    n
                })
            });
            let sig = first_of(futs.collect()).await;
            if sig_tx.send(sig).is_err() {
                break;
            }
        }
    });
    let l = &r.layout;
    let ntasks: usize = l.tasks.iter().map(Vec::len).sum();
    // --multi-prog: each task's program from the configuration file.
    let argv = if r.opts.multi_prog {
        let path = r.opts.command.first().cloned().unwrap_or_default();
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("srun: error: Unable to open configuration file {path}: {e}"))?;
        multi_prog_argv(&text, ntasks as u32).map_err(|e| format!("srun: error: {path}: {e}"))?
    } else {
        r.opts.command.clone()
    };
    let creds = CredSource::from_conf(&r.conf);
    let mut environment = export_env(r.opts.export.as_deref());
    let inherited = |k: &str| std::env::var(k).ok();
    for (k, v) in step_vars(&r.job, &r.opts, &inherited) {
        let kv = format!("{k}={v}");
        match environment
            .iter_mut()
            .find(|e| e.split_once('=').is_some_and(|(n, _)| n == k))
        {
            Some(e) => *e = kv,
            None => environment.push(kv),
        }
    }
    // This shell's resource limits (`--propagate`, else slurm.conf's).
    let limits = slurm_common::rlimits::chosen(r.opts.propagate.as_deref(), &r.conf)
        .map_err(|e| format!("srun: error: PropagateResourceLimits: {e}"))?;
    slurm_common::rlimits::carry_in(&mut environment, &limits);
    let workdir = r.opts.chdir.clone().unwrap_or_else(cwd);
    // --bcast: the program itself goes with each node's launch.
    let bcast = match &r.opts.bcast {
        Some(_) if r.opts.multi_prog => {
            return Err("srun: fatal: --bcast is not supported with --multi-prog here".into())
        }
        Some(given) => Some(bcast_file(
            given,
            argv.first().map_or("", String::as_str),
            &workdir,
            r.conf.get("BcastParameters"),
        )?),
        None => None,
    };

    // Launch on every node at once, each on its own stream.
    let task0_node = l.tasks.iter().position(|t| t.contains(&0)).unwrap_or(0) as u32;
    // Where task 0's stdin comes from, opened before anything starts.
    let input: Box<dyn std::io::Read + Send> = match r.opts.input.as_deref() {
        None | Some("all") | Some("0") => Box::new(std::io::stdin()),
        Some("none") => Box::new(std::io::empty()),
        Some(p) => {
            let path = expand_io_pattern(p, &r, 0, task0_node);
            match std::fs::File::open(&path) {
                Ok(f) => Box::new(f),
                Err(e) => {
                    return Err(format!(
                        "srun: error: Could not open stdin file {path}: {e}"
                    ))
                }
            }
        }
    };
    let mut stdin_sink = None;
    // Each node's request stream stays open while srun runs: a node daemon
    // ending the job waits for its sruns to have gone before signalling
    // the batch script they may run in.
    let mut attached = Vec::new();
    let mut launches = Vec::new();
    for (k, addr) in l.addrs.iter().enumerate() {
        let t = TaskLaunch {
            layout: l.clone(),
            node_index: k as u32,
            argv: argv.clone(),
            environment: environment.clone(),
            cwd: workdir.clone(),
            job_name: r.job.name.clone(),
            // The job's facts as the controller signed them in the step's
            // credential (the node daemons check they match).
            partition: l.cred.partition.clone(),
            account: l.cred.account.clone(),
            cluster_name: r.conf.cluster_name.clone(),
            job_nodes: l.cred.alloc.nodes.clone(),
            job_cpus: l.cred.alloc.cpus.clone(),
            job_tasks: l.cred.alloc.tasks.clone(),
            job_gres: l.cred.alloc.gres.clone(),
            job_mem: l.cred.alloc.mem.clone(),
            pty: r.opts.pty.then(terminal_size),
            // (SLURM_CPU_BIND and SLURM_DISTRIBUTION came in as options.)
            cpu_bind: r.opts.cpu_bind.clone(),
            distribution: r.opts.distribution.clone(),
            job_start: l.cred.job_start,
            task_prolog: r.opts.task_prolog.clone(),
            task_epilog: r.opts.task_epilog.clone(),
            preserve_env: r.opts.preserve_env,
            bcast: bcast.clone(),
            // --gpus-per-task=N binds each task to N GPUs of the step,
            // unless --gpu-bind says otherwise (as Slurm's).
            // --ntasks-per-gpu=N: N tasks share each GPU (single:N).
            gpu_bind: r
                .opts
                .gpu_bind
                .clone()
                .or_else(|| {
                    r.opts
                        .gpus_per_task
                        .as_deref()
                        .and_then(|g| slurm_common::gres::parse_gpus(g).ok())
                        .filter(|g| g.count > 0)
                        .map(|g| format!("per_task:{}", g.count))
                })
                .or_else(|| {
                    r.opts
                        .ntasks_per_gpu
                        .filter(|n| *n > 0)
                        .map(|n| format!("single:{n}"))
                }),
        };
        let node = l.nodes[k].clone();
        let ch = grpc::kept(addr, &node).map_err(|e| format!("srun: error: {e}"))?;
        let creds = creds.clone();
        // Task 0's stdin goes on its node's stream; the others get none.
        let (in_tx, in_rx) = tokio::sync::mpsc::channel::<IoFrame>(16);
        attached.push(in_tx.clone());
        if k as u32 == task0_node {
            stdin_sink = Some(in_tx);
        }
        launches.push(tokio::spawn(async move {
            let sign = |b: &_| creds.credential(b);
            let r =
                grpc::run_tasks(&ch, &node, t.into(), sign, in_rx, Duration::from_secs(30)).await;
            (k as u32, node, r)
        }));
    }
    // Each node's stream: stdout/stderr/exit frames.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(u32, IoFrame)>(1024);
    let mut failed = None;
    for h in launches {
        match h.await {
            Ok((k, _, Ok((Response::Ok, Some(mut out))))) => {
                let tx = tx.clone();
                tokio::spawn(async move {
                    while let Some(f) = out.next().await {
                        if tx.send((k, f)).await.is_err() {
                            break;
                        }
                    }
                });
            }
            Ok((_, node, Ok((Response::Error(e), _)))) => {
                failed = Some(format!(
                    "srun: error: task launch failed on node {node}: {e}"
                ))
            }
            Ok((_, node, Ok(_))) => {
                failed = Some(format!(
                    "srun: error: task launch failed on node {node}: unexpected reply"
                ))
            }
            Ok((_, node, Err(e))) => {
                failed = Some(format!(
                    "srun: error: task launch failed on node {node}: {e}"
                ))
            }
            Err(e) => failed = Some(format!("srun: error: {e}")),
        }
    }
    if let Some(f) = failed {
        signal_all(&r, libc::SIGKILL).await;
        return Err(f);
    }

    drop(tx);

    // stdin → task 0, read by a thread so a terminal never blocks the runtime.
    if let Some(sink) = stdin_sink {
        let (itx, mut irx) = tokio::sync::mpsc::channel::<Option<Vec<u8>>>(16);
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 8192];
            let mut stdin = input;
            loop {
                match std::io::Read::read(&mut stdin, &mut buf) {
                    Ok(0) | Err(_) => {
                        let _ = itx.blocking_send(None);
                        break;
                    }
                    Ok(n) => {
                        if itx.blocking_send(Some(buf[..n].to_vec())).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        tokio::spawn(async move {
            while let Some(m) = irx.recv().await {
                let f = match m {
                    Some(data) => IoFrame {
                        kind: IoKind::Stdin,
                        task: 0,
                        data,
                    },
                    None => IoFrame {
                        kind: IoKind::StdinEof,
                        task: 0,
                        data: vec![],
                    },
                };
                let eof = f.kind == IoKind::StdinEof;
                if sink.send(f).await.is_err() || eof {
                    break;
                }
            }
        });
    }

    let mut intr = Interrupts::default();

    let width = (ntasks.saturating_sub(1)).to_string().len();
    let mut partial: HashMap<(u32, bool), Vec<u8>> = HashMap::new();
    let mut statuses: HashMap<u32, (u32, i32)> = HashMap::new();
    let mut files: HashMap<String, std::fs::File> = HashMap::new();
    let mut killed = false;
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    // -W (else slurm.conf's WaitTime): once a task has ended, the others
    // have this long.
    let wait_secs = r
        .opts
        .wait
        .or_else(|| r.conf.get("WaitTime").and_then(|v| v.trim().parse().ok()))
        .filter(|s| *s > 0);
    let step_name = format!("StepId={}.{}", l.job_id, l.step_id);
    let mut wait_until: Option<tokio::time::Instant> = None;
    loop {
        let timer = match (wait_until, wait_secs) {
            (Some(t), Some(secs)) if !killed => Some((t, secs)),
            _ => None,
        };
        let next = tokio::select! {
            m = rx.recv() => m,
            Some(sig) = sig_rx.recv() => {
                for (msg, send) in intr.on_signal(sig, &r.opts, std::time::Instant::now()) {
                    match msg {
                        Notice::Nothing => {}
                        Notice::Text(m) => eprintln!("srun: {m}"),
                        Notice::SendingCtrlC => eprintln!("srun: sending Ctrl-C to {step_name}"),
                        Notice::Status => {
                            for line in status_lines(&step_name, ntasks as u32, &statuses) {
                                eprintln!("srun: {line}");
                            }
                        }
                    }
                    if let Some(s) = send {
                        killed |= s == libc::SIGKILL;
                        signal_all(&r, s).await;
                    }
                }
                continue;
            }
            _ = async {
                match timer {
                    Some((t, _)) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            } => {
                let secs = timer.map_or(0, |t| t.1);
                eprintln!("srun: First task exited {secs}s ago");
                for line in status_lines(&step_name, ntasks as u32, &statuses) {
                    eprintln!("srun: {line}");
                }
                eprintln!("srun: Terminating {step_name}");
                killed = true;
                signal_all(&r, libc::SIGKILL).await;
                continue;
            }
        };
        let Some((node, f)) = next else { break };
        match f.kind {
            IoKind::Stdout | IoKind::Stderr => {
                let is_err = f.kind == IoKind::Stderr;
                let pattern = if is_err {
                    r.opts.error.as_ref().or(r.opts.output.as_ref())
                } else {
                    r.opts.output.as_ref()
                };
                let mut out: Box<dyn Write> = match pattern {
                    Some(p) if p == "none" => Box::new(std::io::sink()),
                    Some(p) => {
                        let path = expand_io_pattern(p, &r, f.task, node);
                        if !files.contains_key(&path) {
                            let append = r.opts.open_mode == Some("append");
                            let open = std::fs::OpenOptions::new()
                                .create(true)
                                .write(true)
                                .append(append)
                                .truncate(!append)
                                .open(&path);
                            match open {
                                Ok(file) => {
                                    files.insert(path.clone(), file);
                                }
                                Err(e) => eprintln!("srun: error: cannot open {path}: {e}"),
                            }
                        }
                        match files.get(&path) {
                            Some(f) => Box::new(f),
                            None => Box::new(std::io::sink()),
                        }
                    }
                    None if is_err => Box::new(stderr.lock()),
                    None => Box::new(stdout.lock()),
                };
                if r.opts.label {
                    let buf = partial.entry((f.task, is_err)).or_default();
                    buf.extend_from_slice(&f.data);
                    while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                        let line: Vec<u8> = buf.drain(..=pos).collect();
                        let _ = write!(out, "{:>width$}: ", f.task);
                        let _ = out.write_all(&line);
                    }
                } else {
                    let _ = out.write_all(&f.data);
                }
                let _ = out.flush();
            }
            IoKind::Exit => {
                let st = f.status();
                statuses.insert(f.task, (node, st));
                if let (None, Some(secs)) = (wait_until, wait_secs) {
                    wait_until =
                        Some(tokio::time::Instant::now() + Duration::from_secs(u64::from(secs)));
                }
                if st != 0 && r.opts.kill_on_bad_exit && !killed {
                    killed = true;
                    signal_all(&r, libc::SIGKILL).await;
                }
                if statuses.len() >= ntasks {
                    break;
                }
            }
            _ => {}
        }
    }
    // Unterminated last lines.
    for ((task, is_err), rest) in partial {
        if !rest.is_empty() {
            let mut out: Box<dyn Write> = if is_err {
                Box::new(stderr.lock())
            } else {
                Box::new(stdout.lock())
            };
            let _ = write!(out, "{task:>width$}: ");
            let _ = out.write_all(&rest);
            let _ = out.write_all(b"\n");
        }
    }
    let mut worst = 0i32;
    let mut tasks: Vec<u32> = (0..ntasks as u32).collect();
    tasks.sort_unstable();
    for t in tasks {
        let (node, st) = match statuses.get(&t) {
            Some(v) => *v,
            None => {
                eprintln!("srun: error: task {t}: lost (its node daemon stopped reporting)");
                worst = worst.max(1 << 8);
                continue;
            }
        };
        let node_name = l.nodes.get(node as usize).cloned().unwrap_or_default();
        let (code, sig) = slurm_proto::wait_status_pair(st);
        if sig != 0 {
            eprintln!("srun: error: {node_name}: task {t}: {}", signal_name(sig));
        } else if code != 0 {
            eprintln!("srun: error: {node_name}: task {t}: Exited with exit code {code}");
        }
        if shell_code(st) > shell_code(worst) {
            worst = st;
        }
    }
    Ok(worst)
}

/// Expand an `srun -o/-e` pattern for one task: `%j` job, `%s` step, `%J`
/// job.step, `%t` task, `%n` node index, `%N` node name, `%u` user, `%x` job
/// name, `%%`; relative paths are relative to the working directory.
fn expand_io_pattern(p: &str, r: &StepRun, task: u32, node: u32) -> String {
    let l = &r.layout;
    let mut out = String::new();
    let mut chars = p.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('j') => out.push_str(&l.job_id.to_string()),
            Some('s') => out.push_str(&l.step_id.to_string()),
            Some('J') => out.push_str(&format!("{}.{}", l.job_id, l.step_id)),
            Some('t') => out.push_str(&task.to_string()),
            Some('n') => out.push_str(&node.to_string()),
            Some('N') => out.push_str(l.nodes.get(node as usize).map(String::as_str).unwrap_or("")),
            Some('u') => out.push_str(&l.cred.user_name),
            Some('x') => out.push_str(&r.job.name),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    if out.starts_with('/') {
        out
    } else {
        format!("{}/{out}", r.opts.chdir.clone().unwrap_or_else(cwd))
    }
}

/// Wait for the first of several futures.
async fn first_of<F: std::future::Future<Output = i32> + Unpin>(mut futs: Vec<F>) -> i32 {
    std::future::poll_fn(move |cx| {
        for f in futs.iter_mut() {
            if let std::task::Poll::Ready(v) = std::pin::Pin::new(f).poll(cx) {
                return std::task::Poll::Ready(v);
            }
        }
        std::task::Poll::Pending
    })
    .await
}

async fn send_signal(conf: &SlurmConf, l: &StepLayout, sig: i32) {
    let creds = CredSource::from_conf(conf);
    for (addr, node) in l.addrs.iter().zip(&l.nodes) {
        let call = NodeCall::SignalTasks(slurm_proto::grpc::pb::SignalTasksRequest {
            job_id: l.job_id,
            step_id: l.step_id,
            signal: sig,
            cause: 0,
            job_start: l.cred.job_start,
        });
        let Ok(ch) = grpc::kept(addr, node) else {
            continue;
        };
        let sign = |b: &_| creds.credential(b);
        let _ = grpc::call_node(&ch, node, call, sign, Duration::from_secs(5)).await;
    }
}

async fn signal_all(r: &StepRun, sig: i32) {
    send_signal(&r.conf, &r.layout, sig).await;
}

/// What srun says when it gets a signal.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Notice {
    Nothing,
    Text(&'static str),
    /// `sending Ctrl-C to StepId=5.0`.
    SendingCtrlC,
    /// Its tasks' states (`StepId=5.0 tasks 0-1: running`).
    Status,
}

/// How srun answers signals, as Slurm's: a first Ctrl-C shows the tasks'
/// states (`-X`: sends it on instead), a second within a second (or any,
/// with `--quit-on-interrupt`) sends it on and kills the step; SIGTERM,
/// SIGHUP and SIGQUIT kill the step; other signals are sent on.
#[derive(Debug, Default)]
struct Interrupts {
    /// Until when a Ctrl-C aborts the step.
    abort_until: Option<std::time::Instant>,
    /// Kills sent so far.
    kills: u32,
}

impl Interrupts {
    /// What to say and which signals to send the tasks, in order.
    fn on_signal(
        &mut self,
        sig: i32,
        o: &AllocOpts,
        now: std::time::Instant,
    ) -> Vec<(Notice, Option<i32>)> {
        let mut out = Vec::new();
        match sig {
            libc::SIGINT if o.quit_on_interrupt || self.abort_until.is_some_and(|t| now < t) => {
                out.push((Notice::SendingCtrlC, Some(libc::SIGINT)));
                out.push(self.force());
            }
            libc::SIGINT => {
                if o.disable_status {
                    out.push((Notice::SendingCtrlC, Some(libc::SIGINT)));
                } else {
                    out.push((
                        Notice::Text("interrupt (one more within 1 sec to abort)"),
                        None,
                    ));
                    out.push((Notice::Status, None));
                }
                self.abort_until = Some(now + Duration::from_secs(1));
            }
            libc::SIGQUIT | libc::SIGTERM | libc::SIGHUP => {
                if sig == libc::SIGQUIT {
                    out.push((Notice::Text("Quit"), None));
                }
                out.push((Notice::Text("forcing job termination"), Some(libc::SIGKILL)));
            }
            other => out.push((Notice::Nothing, Some(other))),
        }
        out
    }

    /// Kill the step: said once, then "in progress".
    fn force(&mut self) -> (Notice, Option<i32>) {
        self.kills += 1;
        if self.kills == 1 {
            (Notice::Text("forcing job termination"), Some(libc::SIGKILL))
        } else {
            (Notice::Text("job abort in progress"), Some(libc::SIGKILL))
        }
    }
}

/// The tasks' states as srun reports them (`StepId=5.0 tasks 0-1: running`,
/// then those that exited abnormally, then those that exited).
fn status_lines(step: &str, ntasks: u32, statuses: &HashMap<u32, (u32, i32)>) -> Vec<String> {
    let mut running = Vec::new();
    let mut abnormal = Vec::new();
    let mut exited = Vec::new();
    for t in 0..ntasks {
        match statuses.get(&t) {
            None => running.push(t),
            Some((_, 0)) => exited.push(t),
            Some(_) => abnormal.push(t),
        }
    }
    [
        (running, "running"),
        (abnormal, "exited abnormally"),
        (exited, "exited"),
    ]
    .into_iter()
    .filter(|(v, _)| !v.is_empty())
    .map(|(v, what)| {
        let word = if v.len() == 1 { "task" } else { "tasks" };
        format!("{step} {word} {}: {what}", ranges(&v))
    })
    .collect()
}

/// slurm.conf for srun or salloc, once `-M/--clusters` is known to name
/// this cluster (or `all`); else the exit code, said why.
fn conf_for(cmd: &str, o: &AllocOpts, codes: &common::ExitCodes) -> Result<SlurmConf, i32> {
    let conf = common::load_conf(cmd).map_err(|code| codes.on_error(code))?;
    if let Some(Err(e)) = o
        .clusters
        .as_deref()
        .map(|l| common::check_clusters(cmd, l, &conf))
    {
        eprintln!("{e}");
        return Err(codes.error);
    }
    Ok(conf)
}

/// `-r N` with `-N M` past the end of job `j`'s nodes: Slurm's complaint.
/// Without `-N` the count is the job's (Slurm's srun reads
/// `SLURM_JOB_NUM_NODES` as `-N`), or `-n` when fewer.
fn relative_misfit(o: &AllocOpts, j: &slurm_proto::JobRecord) -> Option<String> {
    let rel = o.relative? as usize;
    let have = j.alloc.nodes.len();
    let (n, what) = match (o.nodes, o.ntasks) {
        (Some((n, _)), _) => (n as usize, "--nodes option"),
        // Fewer tasks than nodes: as few nodes (Slurm's srun cuts the
        // count it read from SLURM_JOB_NUM_NODES down to -n).
        (None, Some(t)) if (t as usize) < have => (t as usize, "SLURM_JOB_NUM_NODES option"),
        (None, _) => (have, "SLURM_JOB_NUM_NODES option"),
    };
    (rel + n > have).then(|| {
        format!(
            "--relative and {what} incompatible with count of allocated nodes ({rel}+{n}>{have})"
        )
    })
}

/// srun's input environment variables, as Slurm's man page lists them:
/// (variable, long option, takes a value). The first group counts inside
/// an allocation too; the second only outside one, since a batch job's or
/// salloc's environment sets those for the job (the job is what counts
/// there).
const INPUT_ENV: &[(&str, &str, bool)] = &[
    // The job's (sbatch --gpu-bind) binds its steps' tasks.
    ("SLURM_GPU_BIND", "gpu-bind", true),
    ("SLURM_CLUSTERS", "clusters", true),
    ("SLURM_LABELIO", "label", false),
    ("SLURM_KILL_BAD_EXIT", "kill-on-bad-exit", false),
    ("SLURM_UNBUFFEREDIO", "unbuffered", false),
    ("SLURM_OVERLAP", "overlap", false),
    ("SLURM_EXACT", "exact", false),
    // SRUN_EXPORT_ENV after SLURM_EXPORT_ENV: it wins when both are set.
    ("SLURM_EXPORT_ENV", "export", true),
    ("SRUN_EXPORT_ENV", "export", true),
    ("SLURM_STDOUTMODE", "output", true),
    ("SLURM_STDERRMODE", "error", true),
    ("SRUN_INPUT", "input", true),
    ("SRUN_OUTPUT", "output", true),
    ("SRUN_ERROR", "error", true),
    ("SLURM_OPEN_MODE", "open-mode", true),
    ("SLURM_REMOTE_CWD", "chdir", true),
    ("SLURM_WORKING_DIR", "chdir", true),
    ("SLURM_TIMELIMIT", "time", true),
    ("SLURM_MPI_TYPE", "mpi", true),
    ("SLURM_OVERCOMMIT", "overcommit", false),
    ("SLURM_CPU_BIND", "cpu-bind", true),
    ("SLURM_DISTRIBUTION", "distribution", true),
    ("SLURM_STEP_GRES", "gres", true),
    ("SLURM_WAIT", "wait", true),
    ("SLURM_DISABLE_STATUS", "disable-status", false),
    ("SLURM_PROLOG", "prolog", true),
    ("SLURM_EPILOG", "epilog", true),
    ("SLURM_TASK_PROLOG", "task-prolog", true),
    ("SLURM_TASK_EPILOG", "task-epilog", true),
    // The job's, set in its scripts: its steps keep to it. (CPUs and GPUs
    // per task too, as Slurm's srun since 23.11; SLURM_TRES_PER_TASK after
    // the others, whose values it repeats.)
    ("SLURM_CPUS_PER_TASK", "cpus-per-task", true),
    ("SLURM_GPUS_PER_TASK", "gpus-per-task", true),
    ("SLURM_TRES_PER_TASK", "tres-per-task", true),
    ("SLURM_NTASKS_PER_CORE", "ntasks-per-core", true),
    ("SLURM_NTASKS_PER_GPU", "ntasks-per-gpu", true),
];
/// Inside an overcommitted allocation the job holds fewer tasks than it
/// asked for, so the task count it was given still counts.
const INPUT_ENV_OVERCOMMITTED: &[(&str, &str, bool)] = &[
    ("SLURM_NPROCS", "ntasks", true),
    ("SLURM_NTASKS", "ntasks", true),
];
const INPUT_ENV_OUTSIDE: &[(&str, &str, bool)] = &[
    ("SLURM_ACCOUNT", "account", true),
    ("SLURM_PARTITION", "partition", true),
    ("SLURM_QOS", "qos", true),
    ("SLURM_WCKEY", "wckey", true),
    ("SLURM_NO_KILL", "no-kill", false),
    // SLURM_NTASKS after SLURM_NPROCS: it wins when both are set.
    ("SLURM_NPROCS", "ntasks", true),
    ("SLURM_NTASKS", "ntasks", true),
    ("SLURM_NNODES", "nodes", true),
    ("SLURM_NTASKS_PER_NODE", "ntasks-per-node", true),
    ("SLURM_JOB_NAME", "job-name", true),
    ("SLURM_MEM_PER_CPU", "mem-per-cpu", true),
    ("SLURM_MEM_PER_NODE", "mem", true),
    ("SLURM_CONSTRAINT", "constraint", true),
    ("SLURM_GRES", "gres", true),
    ("SLURM_EXCLUSIVE", "exclusive", false),
    ("SLURM_DEPENDENCY", "dependency", true),
    ("SLURM_RESERVATION", "reservation", true),
    ("SLURM_IMMEDIATE", "immediate", true),
    ("SLURM_SIGNAL", "signal", true),
    ("SLURM_JOB_NUM_NODES", "nodes", true),
    ("SLURM_CPUS_PER_GPU", "cpus-per-gpu", true),
    ("SLURM_GPUS", "gpus", true),
    ("SLURM_GPUS_PER_NODE", "gpus-per-node", true),
    ("SLURM_MEM_PER_GPU", "mem-per-gpu", true),
    ("SLURM_NTASKS_PER_SOCKET", "ntasks-per-socket", true),
    ("SLURM_THREADS_PER_CORE", "threads-per-core", true),
    ("SLURM_REQ_SWITCH", "switches", true),
    ("SRUN_SEGMENT_SIZE", "segment", true),
    // Accepted with a warning and no effect yet (as the options are).
    ("SLURM_HINT", "hint", true),
    ("SLURM_DELAY_BOOT", "delay-boot", true),
    ("SLURM_SPREAD_JOB", "spread-job", false),
    ("SLURM_USE_MIN_NODES", "use-min-nodes", false),
    ("SLURM_NETWORK", "network", true),
    ("SLURM_GRES_FLAGS", "gres-flags", true),
    ("SLURM_GPU_FREQ", "gpu-freq", true),
    ("SLURM_CPU_FREQ_REQ", "cpu-freq", true),
    ("SLURM_ACCTG_FREQ", "acctg-freq", true),
    ("SLURM_MEM_BIND", "mem-bind", true),
    ("SLURM_PROFILE", "profile", true),
    ("SLURM_TRES_BIND", "tres-bind", true),
];

/// The options srun's input environment gives, as words to put before the
/// command line's (whose options then win, as Slurm's do). A flag
/// variable counts unless empty or `0`.
pub fn env_options(env: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let inside = env("SLURM_JOB_ID").is_some() || env("SLURM_JOBID").is_some();
    let mut words = crate::fmt::env_words(INPUT_ENV, env);
    if !inside {
        words.extend(crate::fmt::env_words(INPUT_ENV_OUTSIDE, env));
    } else if env("SLURM_OVERCOMMIT").is_some_and(|v| !v.is_empty() && v != "0") {
        words.extend(crate::fmt::env_words(INPUT_ENV_OVERCOMMITTED, env));
    }
    words
}

pub fn srun_main() -> i32 {
    let codes = common::ExitCodes::from_env("srun", &|k| std::env::var(k).ok());
    let cli: Vec<String> = std::env::args().skip(1).collect();
    // (CPUs or TRES per task on the command line: the environment's pair
    // does not count; its TRES string is replaced, not read.)
    let given =
        match cli_tres_conflict("srun", &cli).and_then(|given| match given.cpus || given.tres {
            true => Ok(given),
            false => env_tres_conflict(&|k| std::env::var(k).ok()).map(|()| given),
        }) {
            Ok(given) => given,
            Err(e) => {
                eprintln!("{e}");
                return codes.error;
            }
        };
    let mut args = env_options(&|k| std::env::var(k).ok());
    if given.tres {
        args.retain(|w| !w.starts_with("--tres-per-task="));
    }
    if names_gpus(&cli) {
        args.retain(|w| {
            !["--gpus=", "--gpus-per-node=", "--gpus-per-task=", "--gres="]
                .iter()
                .any(|o| w.starts_with(o))
        });
    }
    args.extend(cli);
    let o = match parse("srun", &args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            eprintln!("Try \"srun --help\" for more information");
            return codes.error;
        }
    };
    for w in &o.warnings {
        eprintln!("{w}");
    }
    if o.version {
        println!("slurm {}", slurm_proto::SLURM_VERSION);
        return 0;
    }
    if o.help || o.usage {
        let text = if o.help {
            crate::help::help("srun")
        } else {
            crate::help::usage("srun")
        };
        print!("{text}");
        return 0;
    }
    if o.command.is_empty() {
        eprintln!("srun: fatal: No command given to execute.");
        return codes.error;
    }
    let conf = match conf_for("srun", &o, &codes) {
        Ok(c) => c,
        Err(code) => return code,
    };
    // The scripts named here, found as Slurm's srun finds them (one not
    // found is said and tried as given).
    let mut o = o;
    {
        let dir = o.chdir.clone().unwrap_or_else(cwd);
        let path = std::env::var("PATH").ok();
        for (what, slot) in [
            ("prolog", &mut o.prolog),
            ("epilog", &mut o.epilog),
            ("task-prolog", &mut o.task_prolog),
            ("task-epilog", &mut o.task_epilog),
        ] {
            let Some(p) = slot.as_deref().filter(|p| !p.eq_ignore_ascii_case("none")) else {
                continue;
            };
            match search_path(&dir, p, path.as_deref()) {
                Some(full) => *slot = Some(full),
                None => eprintln!(
                    "srun: error: {what} '{p}' not found in PATH or CWD ({dir}), or wrong permissions"
                ),
            }
        }
    }
    let prolog = srun_script(o.prolog.as_deref(), conf.srun_prolog.as_deref());
    let epilog = srun_script(o.epilog.as_deref(), conf.srun_epilog.as_deref());
    let client = common::client(&conf);
    let in_alloc = o.jobid.or_else(|| {
        std::env::var("SLURM_JOB_ID")
            .ok()
            .and_then(|v| v.parse().ok())
    });
    let name = o.command[0]
        .rsplit('/')
        .next()
        .unwrap_or("srun")
        .to_string();
    if o.test_only {
        return codes.on_error(test_only(&client, &o, &name, in_alloc));
    }
    if o.signal.is_some() && in_alloc.is_some() {
        // (Said, not silently dropped: the warning signal is the job's.)
        eprintln!(
            "srun: warning: --signal applies to a new allocation; this step of job {} gets none of its own",
            in_alloc.unwrap_or(0)
        );
    }
    if o.external_launcher {
        // Its options per task, CPU, GPU or memory are not its own (as
        // Slurm's): it overlaps every step and has the job's resources.
        o.overlap = true;
        o.exact = false;
        o.cpus_per_task = None;
        o.cpus_per_gpu = None;
        o.ntasks_per_node = None;
        o.ntasks_per_core = None;
        o.ntasks_per_gpu = None;
        o.mem = None;
        o.mem_per_cpu = None;
        o.gres = None;
        o.gpus = None;
        o.gpus_per_node = None;
        o.gpus_per_task = None;
        o.tres_per_task = None;
        o.gpu_bind = None;
    }
    if in_alloc.is_some() && o.mem.is_some() && o.mem_per_cpu.is_some() {
        eprintln!("srun: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive.");
        return codes.error;
    }
    if o.exclusive && o.overlap {
        eprintln!("srun: error: --exclusive and --overlap are mutually exclusive");
        return codes.error;
    }
    if o.relative.is_some() && !(o.nodelist.is_empty() && o.exclude.is_empty()) {
        eprintln!("srun: error: -r,--relative not allowed with -w,--nodelist or -x,--exclude.");
        return codes.error;
    }
    if o.relative.is_some() && in_alloc.is_none() {
        eprintln!("srun: fatal: --relative option invalid for job allocation request");
        return codes.error;
    }
    let (job, allocated) = match in_alloc {
        Some(id) => match get_job(&client, id) {
            Ok(Some(j)) if relative_misfit(&o, &j).is_some() => {
                eprintln!(
                    "srun: error: {}",
                    relative_misfit(&o, &j).unwrap_or_default()
                );
                return codes.error;
            }
            Ok(Some(j)) => (j, false),
            Ok(None) => {
                eprintln!("srun: error: Unable to confirm allocation for job {id}: Invalid job id specified");
                return codes.error;
            }
            Err(e) => {
                eprintln!("srun: error: {e}");
                return codes.error;
            }
        },
        None => match allocate("srun", &client, &o, &name) {
            Ok(j) => (j, true),
            Err(e) => return e.exit(codes),
        },
    };
    // --ntasks-per-gpu=N in a job: with -n, GPUs enough for N tasks each;
    // with --gpus=G and no -n, G x N tasks; with neither, the job's tasks.
    // (In srun's own allocation the controller derived the job's counts.)
    let (step_ntasks, gpus) = match (allocated, o.ntasks_per_gpu.filter(|n| *n > 0)) {
        (true, _) => (
            o.ntasks
                .or_else(|| o.ntasks_per_gpu.is_some().then_some(job.num_tasks)),
            None,
        ),
        (false, None) => (o.ntasks, step_gpus(&o)),
        (false, Some(n)) => {
            // GPUs asked (none with --gres=none) stay as asked; their
            // count gives the tasks where -n does not.
            let asked = step_gpus(&o);
            let nodes = o.nodes.map_or(job.alloc.nodes.len() as u32, |n| n.0);
            let asked_count = asked.as_ref().map(|g| {
                if g.total > 0 {
                    g.total
                } else {
                    g.per_node.saturating_mul(nodes)
                }
            });
            let tasks = o
                .ntasks
                .or(asked_count.filter(|c| *c > 0).map(|c| c.saturating_mul(n)))
                .unwrap_or(job.num_tasks);
            if asked.is_none() && !tasks.is_multiple_of(n) {
                eprintln!("srun: fatal: -n/--ntasks has to be a multiple of --ntasks-per-gpu");
                return codes.error;
            }
            let gpus = asked.unwrap_or_else(|| slurm_proto::StepGpus {
                total: (tasks / n).max(1),
                ..Default::default()
            });
            (Some(tasks), Some(gpus))
        }
    };
    let req = StepRequest {
        job_id: job.job_id,
        name: o.job_name.clone().unwrap_or(name),
        ntasks: step_ntasks,
        // With -r and -n alone, as few nodes as the tasks (Slurm's -N from
        // SLURM_JOB_NUM_NODES, cut down to -n).
        min_nodes: o.nodes.map(|n| n.0).or(o
            .relative
            .and(o.ntasks)
            .map(|t| t.min(job.alloc.nodes.len() as u32))),
        max_nodes: o.nodes.and_then(|n| n.1),
        // With --cpus-per-gpu the controller derived the job's CPUs per
        // task from the GPUs; the step's tasks get them.
        cpus_per_task: o
            .cpus_per_task
            .or(job.desc.cpus_per_task.filter(|_| o.cpus_per_gpu.is_some())),
        ntasks_per_node: o.ntasks_per_node,
        nodelist: o.nodelist.clone(),
        exclude: o.exclude.clone(),
        distribution: o.distribution.clone(),
        relative: o.relative,
        ntasks_per_core: o.ntasks_per_core,
        // -t in an allocation is the step's own limit (srun's own
        // allocation has it as the job's).
        time_limit: o.time.flatten().filter(|_| !allocated),
        // -c and --cpus-per-gpu imply --exact, as Slurm's; so does
        // --exclusive for a step.
        exact: o.exact
            || o.cpus_per_task.is_some()
            || o.cpus_per_gpu.is_some()
            || (o.exclusive && !allocated),
        overlap: o.overlap,
        overcommit: o.overcommit,
        // In srun's own allocation the step has the job's GPUs, which are
        // what it asked for.
        gpus,
        // --mem / --mem-per-cpu: the step's own, held from the job's. (The
        // job's SLURM_MEM_PER_NODE/_CPU are not read inside it, where
        // Slurm's srun reads them: steps asking nothing share the job's.)
        mem_per_node: o.mem.filter(|_| !allocated),
        mem_per_cpu: o.mem_per_cpu.filter(|_| !allocated),
    };
    // A suspended job takes no new step: wait (as Slurm's srun does) until
    // it runs again. A step whose CPUs other steps hold waits for them, as
    // Slurm's: asked again as they may have ended (here: polled), saying
    // so only after SlurmctldTimeout (60 to 300 s) plus a few seconds.
    let mut told = false;
    let mut waited = false;
    let begun = std::time::Instant::now();
    let say_after = Duration::from_secs(step_wait_secs(conf.slurmctld_timeout));
    let mut quiet_since = begun;
    let mut pause = Duration::from_millis(50);
    let created = loop {
        match call(&client, RequestBody::CreateStep(req.clone())) {
            Err(CallError::Rpc(e)) if e.error == SlurmError::Disabled => {
                if !told && !o.quiet {
                    eprintln!(
                        "srun: Job {} step creation temporarily disabled, retrying ({})",
                        job.job_id,
                        e.error.message()
                    );
                }
                told = true;
                std::thread::sleep(Duration::from_secs(1));
            }
            Err(CallError::Rpc(e)) if e.error == SlurmError::NodesBusy && !allocated => {
                // -I: at once; -I=secs: only that long.
                if let Some(secs) = o.immediate {
                    if secs <= 1 || begun.elapsed() >= Duration::from_secs(u64::from(secs)) {
                        break Err(CallError::Rpc(e));
                    }
                }
                waited = true;
                if quiet_since.elapsed() >= say_after {
                    if !o.quiet {
                        eprintln!(
                            "srun: Job {} step creation {} disabled, retrying ({})",
                            job.job_id,
                            if told { "still" } else { "temporarily" },
                            e.error.message()
                        );
                    }
                    told = true;
                    quiet_since = std::time::Instant::now();
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            other => break other,
        }
    };
    if (told || waited) && !o.quiet {
        if let Ok(Response::StepCreated(l)) = &created {
            eprintln!("srun: Step created for StepId={}.{}", l.job_id, l.step_id);
        }
    }
    let layout = match created {
        Ok(Response::StepCreated(l)) => *l,
        Ok(_) => {
            eprintln!(
                "srun: error: Unable to create step for job {}: unexpected reply",
                job.job_id
            );
            return codes.error;
        }
        Err(e) => {
            eprintln!(
                "srun: error: Unable to create step for job {}: {e}",
                job.job_id
            );
            if allocated {
                release(&client, job.job_id, 1 << 8);
            }
            return codes.error;
        }
    };
    let (job_id, step_id) = (layout.job_id, layout.step_id);
    // (Ends this run's step, never a later run's of the same number.)
    let job_start = layout.cred.job_start;
    // srun's prolog and epilog get the step's command as arguments and
    // srun's environment with the step's facts.
    let script_args = o.command.clone();
    let script_env = {
        let mut env = env_map();
        let inherited = |k: &str| std::env::var(k).ok();
        let mut add = step_vars(&job, &o, &inherited);
        let nodes = hostlist::compress(&layout.nodes);
        for (k, v) in [
            ("SLURM_JOB_ID", job_id.to_string()),
            ("SLURM_JOBID", job_id.to_string()),
            ("SLURM_STEP_ID", step_id.to_string()),
            ("SLURM_STEPID", step_id.to_string()),
            ("SLURM_JOB_NAME", job.name.clone()),
            ("SLURM_JOB_NODELIST", hostlist::compress(&job.alloc.nodes)),
            ("SLURM_STEP_NODELIST", nodes.clone()),
            ("SLURM_NODELIST", nodes),
        ] {
            add.push((k.to_string(), v));
        }
        for (k, v) in add {
            env.retain(|(n, _)| *n != k);
            env.push((k, v));
        }
        env
    };
    if let Some(p) = &prolog {
        let rc = run_srun_script(p, "prolog_srun", &script_args, &script_env);
        if rc != 0 {
            eprintln!("srun: error: srun prolog failed rc = {rc}. Aborting step.");
            let _ = call(
                &client,
                RequestBody::StepComplete {
                    job_id,
                    step_id,
                    status: 1 << 8,
                    job_start,
                },
            );
            if allocated {
                release(&client, job_id, 1 << 8);
            }
            return codes.error;
        }
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("srun: error: {e}");
            return codes.error;
        }
    };
    let raw = o.pty.then(RawTerminal::enter);
    let result = rt.block_on(run_step(StepRun {
        layout,
        job,
        conf,
        opts: o,
    }));
    drop(raw);
    let (status, failed) = match result {
        Ok(s) => (s, false),
        Err(e) => {
            eprintln!("{e}");
            (1 << 8, true)
        }
    };
    let _ = call(
        &client,
        RequestBody::StepComplete {
            job_id,
            step_id,
            status,
            job_start,
        },
    );
    if allocated {
        release(&client, job_id, status);
    }
    rt.shutdown_timeout(Duration::from_millis(100));
    if let Some(p) = &epilog {
        let rc = run_srun_script(p, "epilog_srun", &script_args, &script_env);
        if rc != 0 {
            eprintln!("srun: error: srun epilog failed status={rc}");
        }
    }
    if failed {
        return codes.error;
    }
    shell_code(status)
}

/// What a batch script is told of its job from its record, salloc's
/// command and srun's tasks are too: its account, QOS, times, array,
/// restarts and what it asked for that Slurm repeats.
fn job_facts(j: &JobRecord) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = slurm_proto::jobenv::job_env(j)
        .iter()
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    env.push(("SLURM_JOB_ACCOUNT".into(), j.account.clone()));
    env.push(("SLURM_JOB_QOS".into(), j.qos.clone()));
    if let Some(t) = j.start_time {
        env.push(("SLURM_JOB_START_TIME".into(), t.to_string()));
    }
    if let Some(t) = j.end_time {
        env.push(("SLURM_JOB_END_TIME".into(), t.to_string()));
    }
    env
}

/// The process's umask as Slurm passes it on (`SLURM_UMASK`: `0022`),
/// read from `/proc/self/status` (never set, even for a moment: other
/// threads may be making files).
pub fn umask_text() -> String {
    let m = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Umask:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
        })
        .unwrap_or(0o022);
    format!("{:04o}", m & 0o777)
}

/// What srun adds to its tasks' environment beside what the node daemons
/// set: the job's facts ([`job_facts`]), where it was submitted from and
/// the umask (unless the environment already says: inside a batch job they
/// are the job's), `SLURM_OVERCOMMIT` and srun's log level (`SRUN_DEBUG`).
pub fn step_vars(
    j: &JobRecord,
    o: &AllocOpts,
    inherited: &dyn Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    let mut env = job_facts(j);
    // What the step asked per task, not the job (as Slurm's since 23.11):
    // CPUs only when asked (by -c, --tres-per-task or the job's copies it
    // read), never its layout's; the TRES string it read with each
    // sibling option's entry changed in place, or put first.
    env.retain(|(k, _)| k != "SLURM_TRES_PER_TASK" && k != "SLURM_CPUS_PER_TASK");
    let cpus = o
        .cpus_per_task
        .filter(|_| o.cpus_per_gpu.is_none())
        .map(|c| c.to_string());
    if let Some(c) = &cpus {
        env.push(("SLURM_CPUS_PER_TASK".into(), c.clone()));
    }
    let mut tres = o.tres_per_task.clone();
    if let Some(g) = o.gpus_per_task.as_deref().filter(|g| !g.is_empty()) {
        let (key, n) = slurm_common::tres::gpu_entry(g);
        tres = slurm_common::tres::update(tres.as_deref(), &key, Some(&n));
    }
    if let Some(t) = slurm_common::tres::update(tres.as_deref(), "cpu", cpus.as_deref()) {
        env.push(("SLURM_TRES_PER_TASK".into(), t));
    }
    let unset = |k: &str| inherited(k).is_none_or(|v| v.is_empty());
    if unset("SLURM_SUBMIT_DIR") {
        env.push(("SLURM_SUBMIT_DIR".into(), cwd()));
    }
    if unset("SLURM_SUBMIT_HOST") {
        env.push(("SLURM_SUBMIT_HOST".into(), slurm_common::users::hostname()));
    }
    if unset("SLURM_UMASK") {
        env.push(("SLURM_UMASK".into(), umask_text()));
    }
    if o.overcommit {
        env.push(("SLURM_OVERCOMMIT".into(), "1".into()));
    }
    let level = if o.quiet { 2 } else { 3 + o.verbose };
    env.push(("SRUN_DEBUG".into(), level.to_string()));
    env
}

/// srun's prolog or epilog: the command line's (`none`: none at all),
/// else slurm.conf's `SrunProlog`/`SrunEpilog`.
fn srun_script(given: Option<&str>, conf: Option<&str>) -> Option<String> {
    match given {
        Some(p) if p.eq_ignore_ascii_case("none") || p.is_empty() => None,
        Some(p) => Some(p.to_string()),
        None => conf.filter(|c| !c.is_empty()).map(str::to_string),
    }
}

/// Whether `path` may be read and run by this process.
fn runnable(path: &str) -> Result<(), std::io::Error> {
    let c = std::ffi::CString::new(path).map_err(std::io::Error::other)?;
    // SAFETY: access reads the NUL-terminated path only.
    if unsafe { libc::access(c.as_ptr(), libc::R_OK | libc::X_OK) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The most of a program `--bcast` carries in a launch here (the launch
/// goes to each node in one message).
pub const BCAST_MAX: u64 = 12 << 20;

/// `srun --bcast[=given]`: program `prog` (found as srun finds it, from
/// `workdir`), read to go to the nodes, and where it goes there: `given`
/// when absolute, else BcastParameters' `DestDir`, else `workdir` (a
/// directory: each node names the file `slurm_bcast_<job>.<step>_<node>`),
/// as Slurm's.
pub fn bcast_file(
    given: &str,
    prog: &str,
    workdir: &str,
    params: Option<&str>,
) -> Result<slurm_proto::Bcast, String> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let path = std::env::var("PATH").ok();
    let src = search_path(workdir, prog, path.as_deref())
        .ok_or_else(|| format!("srun: fatal: Can not execute {prog}"))?;
    let failed = |why: String| {
        format!(
            "srun: error: {why}\nsrun: fatal: Failed to broadcast '{src}'. Step launch aborted."
        )
    };
    let meta = std::fs::metadata(&src).map_err(|e| failed(format!("{src}: {e}")))?;
    if meta.len() > BCAST_MAX {
        return Err(failed(format!(
            "{src}: {} bytes, more than the {} MiB a launch carries here",
            meta.len(),
            BCAST_MAX >> 20
        )));
    }
    let data: std::sync::Arc<[u8]> = std::fs::read(&src)
        .map_err(|e| failed(format!("{src}: {e}")))?
        .into();
    let dest_dir = params.and_then(|p| {
        p.split(',')
            .filter_map(|kv| kv.trim().split_once('='))
            .find(|(k, _)| k.eq_ignore_ascii_case("DestDir"))
            .map(|(_, v)| v.trim().to_string())
    });
    let dest = if given.starts_with('/') {
        given.to_string()
    } else {
        format!("{}/", dest_dir.unwrap_or_else(|| workdir.to_string()))
    };
    Ok(slurm_proto::Bcast {
        dest,
        data,
        mode: meta.permissions().mode() & 0o777,
        mtime: meta.mtime(),
    })
}

/// Where a program named on srun's command line is, as Slurm looks: a
/// name with a `/` from the working directory `cwd`, else the first
/// directory of `PATH` holding it readable and runnable, else `cwd`.
pub fn search_path(cwd: &str, name: &str, path: Option<&str>) -> Option<String> {
    let at = |dir: &str| {
        let p = std::path::Path::new(dir).join(name);
        let s = p.to_string_lossy().into_owned();
        (p.is_file() && runnable(&s).is_ok()).then_some(s)
    };
    if name.contains('/') {
        return if name.starts_with('/') {
            (std::path::Path::new(name).is_file() && runnable(name).is_ok())
                .then(|| name.to_string())
        } else {
            at(cwd)
        };
    }
    path.unwrap_or_default()
        .split(':')
        .filter(|d| !d.is_empty())
        .find_map(at)
        .or_else(|| at(cwd))
}

/// Run srun's prolog or epilog `path` with the step's command as its
/// arguments and `env` as its environment; its exit status. One that
/// cannot be read and run is skipped (status 0), as Slurm's srun does.
fn run_srun_script(path: &str, context: &str, args: &[String], env: &[(String, String)]) -> i32 {
    if let Err(e) = runnable(path) {
        eprintln!("srun: Access denied for {path}: {e}");
        return 0;
    }
    let status = std::process::Command::new(path)
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("SLURM_SCRIPT_CONTEXT", context)
        .status();
    match status {
        Ok(s) => s.code().unwrap_or(1),
        Err(e) => {
            eprintln!("srun: error: Failed to execute srun prolog/epilog script: {e}");
            1
        }
    }
}

/// The environment `salloc` gives its command.
pub fn alloc_env(j: &JobRecord, conf: &SlurmConf, o: &AllocOpts) -> Vec<(String, String)> {
    let nodes = hostlist::compress(&j.alloc.nodes);
    let mut env = vec![
        ("SLURM_CLUSTER_NAME".to_string(), conf.cluster_name.clone()),
        ("SLURM_JOB_ID".into(), j.job_id.to_string()),
        ("SLURM_JOBID".into(), j.job_id.to_string()),
        ("SLURM_JOB_NAME".into(), j.name.clone()),
        ("SLURM_JOB_NODELIST".into(), nodes.clone()),
        ("SLURM_NODELIST".into(), nodes),
        (
            "SLURM_JOB_NUM_NODES".into(),
            j.alloc.nodes.len().to_string(),
        ),
        ("SLURM_NNODES".into(), j.alloc.nodes.len().to_string()),
        (
            "SLURM_JOB_CPUS_PER_NODE".into(),
            hostlist::compress_counts(&j.alloc.cpus),
        ),
        (
            "SLURM_TASKS_PER_NODE".into(),
            hostlist::compress_counts(&j.alloc.tasks),
        ),
        ("SLURM_JOB_PARTITION".into(), j.partition.clone()),
        ("SLURM_SUBMIT_DIR".into(), cwd()),
        ("SLURM_SUBMIT_HOST".into(), slurm_common::users::hostname()),
    ];
    if o.ntasks.is_some() || o.ntasks_per_node.is_some() {
        // Overcommitted, the job holds fewer tasks than asked for; its
        // steps run as many as asked.
        let n = match o.ntasks {
            Some(n) if o.overcommit => n,
            _ => j.num_tasks,
        };
        env.push(("SLURM_NTASKS".into(), n.to_string()));
        env.push(("SLURM_NPROCS".into(), n.to_string()));
    }
    if o.overcommit {
        env.push(("SLURM_OVERCOMMIT".into(), "1".into()));
    }
    if let Some(n) = o.ntasks_per_node {
        env.push(("SLURM_NTASKS_PER_NODE".into(), n.to_string()));
    }
    env.extend(job_facts(j));
    match (j.desc.mem_per_cpu, j.desc.mem_per_node) {
        (Some(m), _) => env.push(("SLURM_MEM_PER_CPU".into(), m.to_string())),
        (None, Some(m)) => env.push(("SLURM_MEM_PER_NODE".into(), m.to_string())),
        (None, None) => {}
    }
    if let Some(d) = &o.distribution {
        env.push(("SLURM_DISTRIBUTION".into(), d.clone()));
    }
    // The GPUs of the first node (where the command's steps start).
    let gpus: Vec<String> = j
        .alloc
        .gres
        .first()
        .into_iter()
        .flatten()
        .filter(|g| g.name == "gpu")
        .flat_map(|g| g.indices.iter().map(u32::to_string))
        .collect();
    if !gpus.is_empty() {
        env.push(("SLURM_JOB_GPUS".into(), gpus.join(",")));
    }
    env
}

/// `SALLOC_*` variables that stand for salloc's options (before the
/// command line's, which win).
const SALLOC_ENV: &crate::fmt::EnvOptions = &[
    ("SALLOC_ACCOUNT", "account", true),
    // SLURM_CLUSTERS after SALLOC_CLUSTERS: it wins, as Slurm's.
    ("SALLOC_CLUSTERS", "clusters", true),
    ("SLURM_CLUSTERS", "clusters", true),
    ("SALLOC_CONSTRAINT", "constraint", true),
    ("SALLOC_CPUS_PER_GPU", "cpus-per-gpu", true),
    ("SALLOC_DEBUG", "verbose", false),
    ("SALLOC_EXCLUSIVE", "exclusive", false),
    ("SALLOC_GPUS", "gpus", true),
    ("SALLOC_GPUS_PER_NODE", "gpus-per-node", true),
    ("SALLOC_GPUS_PER_TASK", "gpus-per-task", true),
    ("SALLOC_TRES_PER_TASK", "tres-per-task", true),
    ("SALLOC_GRES", "gres", true),
    ("SALLOC_IMMEDIATE", "immediate", true),
    ("SALLOC_MEM_PER_CPU", "mem-per-cpu", true),
    ("SALLOC_MEM_PER_GPU", "mem-per-gpu", true),
    ("SALLOC_MEM_PER_NODE", "mem", true),
    ("SALLOC_OVERCOMMIT", "overcommit", false),
    ("SALLOC_PARTITION", "partition", true),
    ("SALLOC_QOS", "qos", true),
    ("SALLOC_REQ_SWITCH", "switches", true),
    ("SALLOC_RESERVATION", "reservation", true),
    ("SALLOC_SEGMENT_SIZE", "segment", true),
    ("SALLOC_THREADS_PER_CORE", "threads-per-core", true),
    ("SALLOC_TIMELIMIT", "time", true),
    ("SALLOC_WCKEY", "wckey", true),
    ("SALLOC_NO_KILL", "no-kill", false),
    ("SALLOC_SIGNAL", "signal", true),
    ("SALLOC_KILL_CMD", "kill-command", true),
    ("SALLOC_BELL", "bell", false),
    ("SALLOC_NO_BELL", "no-bell", false),
    // Accepted with a warning and no effect yet (as the options are).
    ("SALLOC_ACCTG_FREQ", "acctg-freq", true),
    ("SALLOC_DELAY_BOOT", "delay-boot", true),
    ("SALLOC_GPU_BIND", "gpu-bind", true),
    ("SALLOC_GPU_FREQ", "gpu-freq", true),
    ("SALLOC_GRES_FLAGS", "gres-flags", true),
    ("SLURM_HINT", "hint", true),
    ("SALLOC_HINT", "hint", true),
    ("SALLOC_MEM_BIND", "mem-bind", true),
    ("SALLOC_NETWORK", "network", true),
    ("SALLOC_PROFILE", "profile", true),
    ("SALLOC_SPREAD_JOB", "spread-job", false),
    ("SALLOC_TRES_BIND", "tres-bind", true),
    ("SALLOC_USE_MIN_NODES", "use-min-nodes", false),
    ("SALLOC_WAIT_ALL_NODES", "wait-all-nodes", true),
];

/// The options salloc's input environment gives, as words to put before
/// the command line's.
pub fn salloc_env_options(env: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    crate::fmt::env_words(SALLOC_ENV, env)
}

/// Wait for salloc's command, watching its allocation: once the job has
/// ended under it (cancelled, out of time), say so, as Slurm's salloc does,
/// and with `-K` send the command `kill` (Slurm has the controller tell
/// salloc; here salloc asks every two seconds). The command's wait status.
fn watch_allocation(
    mut child: std::process::Child,
    client: &net::Client,
    id: u32,
    kill: Option<i32>,
) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    let mut next_check = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let mut revoked = false;
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return s.into_raw(),
            Ok(None) => {}
            Err(_) => return child.wait().map(|s| s.into_raw()).unwrap_or(1 << 8),
        }
        if !revoked && std::time::Instant::now() >= next_check {
            next_check += std::time::Duration::from_secs(2);
            let over = match get_job(client, id) {
                Ok(Some(j)) => j.state.is_finished() || j.completing,
                Ok(None) => true,
                Err(_) => false,
            };
            if over {
                revoked = true;
                eprintln!("salloc: Job allocation {id} has been revoked.");
                if let Some(sig) = kill {
                    // SAFETY: a signal to the command this process started.
                    unsafe {
                        libc::kill(child.id() as i32, sig);
                    }
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

pub fn salloc_main() -> i32 {
    let codes = common::ExitCodes::from_env("salloc", &|k| std::env::var(k).ok());
    let cli: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = cli_tres_conflict("salloc", &cli).map(|_| ()) {
        eprintln!("{e}");
        return codes.error;
    }
    let mut args = salloc_env_options(&|k| std::env::var(k).ok());
    args.extend(cli);
    let o = match parse("salloc", &args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            eprintln!("Try \"salloc --help\" for more information");
            return codes.error;
        }
    };
    for w in &o.warnings {
        eprintln!("{w}");
    }
    if o.version {
        println!("slurm {}", slurm_proto::SLURM_VERSION);
        return 0;
    }
    if o.help || o.usage {
        let text = if o.help {
            crate::help::help("salloc")
        } else {
            crate::help::usage("salloc")
        };
        print!("{text}");
        return 0;
    }
    let conf = match conf_for("salloc", &o, &codes) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let client = common::client(&conf);
    let shell = std::env::var("SHELL").unwrap_or_else(|_| "/bin/sh".into());
    let command = if o.command.is_empty() {
        vec![shell]
    } else {
        o.command.clone()
    };
    let name = command[0]
        .rsplit('/')
        .next()
        .unwrap_or("salloc")
        .to_string();
    let job = match allocate("salloc", &client, &o, &name) {
        Ok(j) => j,
        Err(e) => return e.exit(codes),
    };
    // --no-shell: the allocation stays until its time limit or scancel;
    // steps reach it with `srun --jobid`.
    if o.no_shell {
        return 0;
    }
    let mut child = std::process::Command::new(&command[0]);
    // What an outer job told of itself is not this job's (a batch launch
    // strips the same names).
    for k in slurm_proto::jobenv::JOB_ENV_VARS {
        child.env_remove(k);
    }
    let child = child
        .args(&command[1..])
        .envs(alloc_env(&job, &conf, &o))
        .spawn();
    let status = match child {
        Ok(c) => watch_allocation(c, &client, job.job_id, o.kill_command),
        Err(e) => {
            eprintln!("salloc: error: {}: {e}", command[0]);
            127 << 8
        }
    };
    if !o.quiet {
        eprintln!("salloc: Relinquishing job allocation {}", job.job_id);
    }
    release(&client, job.job_id, status);
    shell_code(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `-r N` with Slurm's checks against the job's node count: `-N`, else
    /// the job's count cut down to `-n`.
    #[test]
    fn gpu_bind_forms_are_checked() {
        for ok in [
            "none",
            "closest",
            "verbose,single:2",
            "per_task:1",
            "map_gpu:0,1,3",
            "mask_gpu:0x3,0xc",
        ] {
            assert!(valid_gpu_bind(ok), "{ok}");
        }
        for bad in [
            "",
            "per_task:0",
            "single:",
            "map_gpu:",
            "map_gpu:a",
            "mask_gpu:0xz",
            "rank",
            "none:1",
        ] {
            assert!(!valid_gpu_bind(bad), "{bad}");
        }
        let o = parse("srun", &["--gpu-bind=single:2".into(), "true".into()]).unwrap();
        assert_eq!(o.gpu_bind.as_deref(), Some("single:2"));
        assert!(o.warnings.is_empty(), "{:?}", o.warnings);
        let o = parse(
            "srun",
            &["--tres-bind=gres/gpu:per_task:1".into(), "true".into()],
        )
        .unwrap();
        assert_eq!(o.gpu_bind.as_deref(), Some("per_task:1"));
        let o = parse(
            "srun",
            &[
                "--tres-bind=gres/nic:closest+gres/gpu:map:0*2,1".into(),
                "true".into(),
            ],
        )
        .unwrap();
        assert_eq!(o.gpu_bind.as_deref(), Some("map:0*2,1"));
        assert!(valid_gpu_bind("VERBOSE,mask:0x3*4"));
        assert!(!valid_gpu_bind("map:0*0"));
        let e = parse("srun", &["--gpu-bind=rank".into(), "true".into()]).unwrap_err();
        assert_eq!(e, "srun: error: Invalid --gpu-bind argument: rank");
    }

    #[test]
    fn relative_misfits_as_slurm_counts_them() {
        let mut j = slurm_proto::JobRecord::default();
        j.alloc.nodes = vec!["n1".into(), "n2".into(), "n3".into()];
        let misfit = |rel: u32, nodes: Option<u32>, ntasks: Option<u32>| {
            let o = AllocOpts {
                relative: Some(rel),
                nodes: nodes.map(|n| (n, None)),
                ntasks,
                ..Default::default()
            };
            relative_misfit(&o, &j)
        };
        assert_eq!(misfit(1, Some(2), None), None);
        assert_eq!(
            misfit(2, Some(2), None).as_deref(),
            Some(
                "--relative and --nodes option incompatible with count of allocated nodes (2+2>3)"
            )
        );
        assert_eq!(
            misfit(1, None, None).as_deref(),
            Some("--relative and SLURM_JOB_NUM_NODES option incompatible with count of allocated nodes (1+3>3)")
        );
        assert_eq!(misfit(2, None, Some(1)), None);
        assert_eq!(
            misfit(2, None, Some(2)).as_deref(),
            Some("--relative and SLURM_JOB_NUM_NODES option incompatible with count of allocated nodes (2+2>3)")
        );
    }

    fn a(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn options_without_effect_yet_are_accepted_with_a_warning() {
        let o = parse(
            "srun",
            &a(&[
                "--hint=nomultithread",
                "--cpu-freq",
                "high",
                "-k",
                "-T4",
                "true",
            ]),
        )
        .unwrap();
        assert_eq!(o.command, a(&["true"]));
        assert!(o.no_kill, "-k is taken");
        assert!(
            !parse("srun", &a(&["--no-kill=off", "true"]))
                .unwrap()
                .no_kill
        );
        assert!(parse("srun", &a(&["--no-kill=maybe", "true"])).is_err());
        assert_eq!(
            o.warnings,
            a(&[
                "srun: warning: --hint is not supported yet and was ignored",
                "srun: warning: --cpu-freq is not supported yet and was ignored",
                "srun: warning: --threads is not supported yet and was ignored",
            ])
        );
        // Each command knows only its own.
        assert!(parse("salloc", &a(&["--treewidth=4"])).is_err());
        assert!(parse("srun", &a(&["--bell", "true"])).is_err());
        let o = parse("salloc", &a(&["--bell", "--wait-all-nodes=1"])).unwrap();
        assert_eq!(o.bell, Some(true));
        assert_eq!(o.warnings.len(), 1);
        assert_eq!(
            parse("salloc", &a(&["--no-bell"])).unwrap().bell,
            Some(false)
        );
    }

    #[test]
    fn salloc_rings_the_bell_on_a_terminal_when_asked_or_after_a_wait() {
        let (short, long) = (Duration::from_secs(1), Duration::from_secs(11));
        assert!(!rings_bell(None, short, true));
        assert!(rings_bell(None, long, true));
        assert!(rings_bell(Some(true), short, true));
        assert!(!rings_bell(Some(false), long, true));
        assert!(!rings_bell(Some(true), long, false), "never off a terminal");
    }

    #[test]
    fn options_stop_at_the_command() {
        let o = parse(
            "srun",
            &a(&["-N", "3", "-n3", "--label", "hostname", "-s", "--x"]),
        )
        .unwrap();
        assert_eq!(o.nodes, Some((3, None)));
        assert_eq!(o.ntasks, Some(3));
        assert!(o.label);
        assert_eq!(o.command, a(&["hostname", "-s", "--x"]));
        let o = parse(
            "srun",
            &a(&[
                "--ntasks-per-node=1",
                "--kill-on-bad-exit",
                "--cpu_bind=none",
                "--nodes=3",
                "--nodelist=n1,n2,n3",
                "--ntasks=3",
                "orted",
                "-mca",
                "x",
            ]),
        )
        .unwrap();
        assert!(o.kill_on_bad_exit);
        assert_eq!(o.nodelist, a(&["n1", "n2", "n3"]));
        assert_eq!(o.command[0], "orted");
        let o = parse("srun", &a(&["--", "-weird"])).unwrap();
        assert_eq!(o.command, a(&["-weird"]));
    }

    #[test]
    fn bad_options_name_themselves() {
        assert!(parse("srun", &a(&["-n", "abc", "true"]))
            .unwrap_err()
            .contains("\"abc\" for --ntasks"));
        // The input environment: its options first, so the command
        // line's win; job-level ones only outside an allocation.
        let env = crate::fmt::test_env;
        let outside = env(&[
            ("SLURM_NTASKS", "3"),
            ("SLURM_NPROCS", "9"),
            ("SLURM_ACCOUNT", "phys"),
            ("SLURM_LABELIO", "1"),
            ("SLURM_KILL_BAD_EXIT", "0"),
        ]);
        let words = env_options(&outside);
        assert_eq!(
            words,
            ["--label", "--account=phys", "--ntasks=9", "--ntasks=3"]
        );
        let mut all = words.clone();
        all.extend(a(&["-A", "chem", "hostname"]));
        let o = parse("srun", &all).unwrap();
        assert_eq!(o.ntasks, Some(3));
        assert_eq!(o.account.as_deref(), Some("chem"));
        assert!(o.label && !o.kill_on_bad_exit);
        assert_eq!(o.command, ["hostname"]);
        let inside = env(&[
            ("SLURM_JOB_ID", "12"),
            ("SLURM_NTASKS", "3"),
            ("SLURM_LABELIO", "yes"),
        ]);
        assert_eq!(env_options(&inside), ["--label"]);
        // Overcommitted, the job's task count stands inside it too.
        let over = env(&[
            ("SLURM_JOB_ID", "12"),
            ("SLURM_NTASKS", "9"),
            ("SLURM_OVERCOMMIT", "1"),
        ]);
        assert_eq!(env_options(&over), ["--overcommit", "--ntasks=9"]);
        // Inside a job, the job's CPUs and GPUs per task stand for its
        // steps (as in Slurm since 23.11); the command line's win.
        let job_c4 = env(&[
            ("SLURM_JOB_ID", "12"),
            ("SLURM_CPUS_PER_TASK", "4"),
            ("SLURM_TRES_PER_TASK", "cpu=4,gres/gpu=1"),
        ]);
        let words = env_options(&job_c4);
        assert_eq!(
            words,
            ["--cpus-per-task=4", "--tres-per-task=cpu=4,gres/gpu=1"]
        );
        let o = parse("srun", &words).unwrap();
        assert_eq!(
            (o.cpus_per_task, o.gpus_per_task.as_deref()),
            (Some(4), Some("1"))
        );
        let mut all = words.clone();
        all.extend(a(&["-c", "2", "true"]));
        assert_eq!(parse("srun", &all).unwrap().cpus_per_task, Some(2));
        let mut all = words;
        all.extend(a(&["--cpus-per-gpu=3", "true"]));
        let o = parse("srun", &all).unwrap();
        assert_eq!((o.cpus_per_task, o.cpus_per_gpu), (None, Some(3)));
        assert_eq!(env_tres_conflict(&job_c4), Ok(()));
        let disagree = env(&[
            ("SLURM_CPUS_PER_TASK", "3"),
            ("SLURM_TRES_PER_TASK", "cpu=4"),
        ]);
        assert_eq!(
            env_tres_conflict(&disagree).unwrap_err(),
            "srun: fatal: cpus-per-task set by two different environment variables SLURM_CPUS_PER_TASK=3 != SLURM_TRES_PER_TASK=cpu=4"
        );
        // Both on the command line: refused as Slurm's.
        for (cli, err) in [
            (
                vec!["-c2", "--tres-per-task=cpu=2", "true"],
                "srun: fatal: You can not have --tres-per-task=cpu= and --cpus-per-task please use one or the other",
            ),
            (
                vec!["--gpus-per-task=1", "--tres-per-task=gres/gpu:1", "true"],
                "srun: fatal: You can not have --tres-per-task=gres/gpu= and --gpus-per-task please use one or the other",
            ),
            (
                vec!["-c", "2", "--cpus-per-gpu", "1", "true"],
                "srun: fatal: --cpus-per-task, --tres-per-task=cpu:#, and --cpus-per-gpu are mutually exclusive",
            ),
        ] {
            assert_eq!(cli_tres_conflict("srun", &a(&cli)).unwrap_err(), err, "{cli:?}");
        }
        // The command's own arguments are not srun's.
        assert_eq!(
            cli_tres_conflict("srun", &a(&["-c2", "prog", "--tres-per-task=cpu=2"])),
            Ok(CliPerTask {
                cpus: true,
                tres: false
            })
        );
        assert_eq!(
            cli_tres_conflict("srun", &a(&["--gpus-per-task=1", "prog"])),
            Ok(CliPerTask::default())
        );
        assert_eq!(
            cli_tres_conflict("srun", &a(&["--tres-per-task=gres/gpu=1", "prog"])),
            Ok(CliPerTask {
                cpus: false,
                tres: true
            })
        );
        assert_eq!(
            cli_tres_conflict("srun", &a(&["--tres-per-task=cpu=2", "--ntasks-per-gpu=1", "prog"]))
                .unwrap_err(),
            "srun: fatal: --tres-per-task is mutually exclusive with --ntasks-per-gpu and SLURM_NTASKS_PER_GPU"
        );
        // A job's CPUs per task (in its environment) beside its
        // --ntasks-per-gpu: its steps are not refused.
        let job = env(&[
            ("SLURM_JOB_ID", "12"),
            ("SLURM_TRES_PER_TASK", "cpu=8"),
            ("SLURM_NTASKS_PER_GPU", "1"),
        ]);
        let mut all = env_options(&job);
        all.push("true".into());
        assert_eq!(parse("srun", &all).unwrap().cpus_per_task, Some(8));
        assert_eq!(
            parse("srun", &a(&["--tres-per-task=vmem=1", "true"])).unwrap_err(),
            "srun: fatal: Invalid TRES for --tres-per-task: vmem"
        );
        assert_eq!(
            parse("salloc", &a(&["--tres-per-task=gres/mps=1"])).unwrap_err(),
            "salloc: error: Job submit/allocate failed: Invalid Trackable RESource (TRES) specification (gres/mps=1: only gres/gpu can be asked for each task (use --gres for the others))"
        );
        let o = parse(
            "srun",
            &a(&["--tres-per-task=gres/gpu:1", "--ntasks-per-gpu=1", "true"]),
        );
        assert_eq!(
            o.unwrap_err(),
            "srun: fatal: --tres-per-task is mutually exclusive with --ntasks-per-gpu and SLURM_NTASKS_PER_GPU"
        );
        // Fewer tasks than nodes: the node count comes down, with Slurm's
        // warning.
        let o = parse("salloc", &a(&["-N3", "-n2"])).unwrap();
        assert_eq!(o.nodes, Some((2, Some(2))));
        assert_eq!(
            o.warnings,
            ["salloc: warning: can't run 2 processes on 3 nodes, setting nnodes to 2"]
        );
        let o = parse("srun", &a(&["-N1-4", "-n2", "true"])).unwrap();
        assert_eq!(o.nodes, Some((1, Some(2))));
        // A job's --ntasks-per-core reaches its steps.
        let per_core = env(&[("SLURM_JOB_ID", "12"), ("SLURM_NTASKS_PER_CORE", "1")]);
        let o = parse("srun", &[env_options(&per_core), a(&["true"])].concat()).unwrap();
        assert_eq!(o.ntasks_per_core, Some(1));
        let e = parse(
            "srun",
            &a(&["--ntasks-per-core=2", "--threads-per-core=1", "true"]),
        )
        .err()
        .unwrap();
        assert_eq!(
            e,
            "srun: error: --ntasks-per-core (2) can not be bigger than --threads-per-core (1)"
        );
        // Step options count inside a job too; the job's only outside.
        let step = env(&[
            ("SLURM_JOB_ID", "12"),
            ("SRUN_OUTPUT", "out-%t"),
            ("SLURM_OPEN_MODE", "append"),
            ("SLURM_DISTRIBUTION", "cyclic"),
            ("SLURM_CPU_BIND", "cores"),
            ("SLURM_EXPORT_ENV", "ALL"),
            ("SRUN_EXPORT_ENV", "NONE"),
            ("SLURM_DEPENDENCY", "afterok:3"),
            ("SLURM_IMMEDIATE", "5"),
        ]);
        let o = parse("srun", &[env_options(&step), a(&["true"])].concat()).unwrap();
        assert_eq!(o.output.as_deref(), Some("out-%t"));
        assert_eq!(o.distribution.as_deref(), Some("cyclic"));
        assert_eq!(o.cpu_bind.as_deref(), Some("cores"));
        assert_eq!(o.export.as_deref(), Some("NONE"), "SRUN_EXPORT_ENV wins");
        assert!(o.dependency.is_none() && o.immediate.is_none());
        let job = env(&[("SLURM_DEPENDENCY", "afterok:3"), ("SLURM_IMMEDIATE", "5")]);
        let o = parse("srun", &[env_options(&job), a(&["true"])].concat()).unwrap();
        assert_eq!(o.dependency.as_deref(), Some("afterok:3"));
        assert_eq!(o.immediate, Some(5));
        // A bad value is refused as the option's would be.
        let bad = env(&[("SLURM_CPU_BIND", "sideways")]);
        assert!(parse("srun", &[env_options(&bad), a(&["true"])].concat()).is_err());
        // salloc's own variables; its command line wins.
        let salloc = env(&[("SALLOC_PARTITION", "gpu"), ("SALLOC_OVERCOMMIT", "1")]);
        let mut all = salloc_env_options(&salloc);
        assert_eq!(all, ["--overcommit", "--partition=gpu"]);
        all.extend(a(&["-p", "debug"]));
        let o = parse("salloc", &all).unwrap();
        assert_eq!(o.partition.as_deref(), Some("debug"));
        assert!(o.overcommit);
        assert!(parse("srun", &a(&["--bogus", "true"]))
            .unwrap_err()
            .contains("unrecognized option '--bogus'"));
        assert!(parse("srun", &a(&["--mpi=weird", "true"]))
            .unwrap_err()
            .contains("MPI type"));
    }

    #[test]
    fn exit_codes_as_a_shell_reports_them() {
        assert_eq!(shell_code(3 << 8), 3);
        assert_eq!(shell_code(9), 137);
    }

    #[test]
    fn ctrl_c_shows_then_aborts_as_slurms() {
        let t0 = std::time::Instant::now();
        let o = AllocOpts::default();
        let mut i = Interrupts::default();
        assert_eq!(
            i.on_signal(libc::SIGINT, &o, t0),
            vec![
                (
                    Notice::Text("interrupt (one more within 1 sec to abort)"),
                    None
                ),
                (Notice::Status, None)
            ]
        );
        // More than a second later: the states again.
        let later = t0 + Duration::from_millis(1500);
        assert_eq!(
            i.on_signal(libc::SIGINT, &o, later)[1],
            (Notice::Status, None)
        );
        // Within a second: sent on, and the step killed; then in progress.
        let soon = later + Duration::from_millis(300);
        assert_eq!(
            i.on_signal(libc::SIGINT, &o, soon),
            vec![
                (Notice::SendingCtrlC, Some(libc::SIGINT)),
                (Notice::Text("forcing job termination"), Some(libc::SIGKILL))
            ]
        );
        assert_eq!(
            i.on_signal(libc::SIGINT, &o, soon)[1],
            (Notice::Text("job abort in progress"), Some(libc::SIGKILL))
        );
        // -X: sent on at once; --quit-on-interrupt: ended at once.
        let x = AllocOpts {
            disable_status: true,
            ..Default::default()
        };
        assert_eq!(
            Interrupts::default().on_signal(libc::SIGINT, &x, t0),
            vec![(Notice::SendingCtrlC, Some(libc::SIGINT))]
        );
        let q = AllocOpts {
            quit_on_interrupt: true,
            ..Default::default()
        };
        assert_eq!(
            Interrupts::default().on_signal(libc::SIGINT, &q, t0)[1].1,
            Some(libc::SIGKILL)
        );
        // TERM, HUP and QUIT kill; others are sent on.
        for s in [libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
            let v = Interrupts::default().on_signal(s, &o, t0);
            assert_eq!(
                v.last(),
                Some(&(Notice::Text("forcing job termination"), Some(libc::SIGKILL)))
            );
        }
        assert_eq!(
            Interrupts::default().on_signal(libc::SIGUSR1, &o, t0),
            vec![(Notice::Nothing, Some(libc::SIGUSR1))]
        );
        let mut st = HashMap::new();
        st.insert(0, (0, 0));
        st.insert(2, (0, 1 << 8));
        assert_eq!(
            status_lines("StepId=5.0", 4, &st),
            [
                "StepId=5.0 tasks 1,3: running",
                "StepId=5.0 task 2: exited abnormally",
                "StepId=5.0 task 0: exited"
            ]
        );
    }

    #[test]
    fn srun_scripts_come_from_the_command_line_else_slurm_conf() {
        assert_eq!(srun_script(Some("none"), Some("/c")), None);
        assert_eq!(srun_script(Some("NONE"), None), None);
        assert_eq!(srun_script(None, Some("/c")), Some("/c".into()));
        assert_eq!(srun_script(Some("/a"), Some("/c")), Some("/a".into()));
        assert_eq!(srun_script(None, Some("")), None);
        assert_eq!(srun_script(None, None), None);
        let o = parse(
            "srun",
            &[
                "--prolog=p",
                "--epilog",
                "e",
                "--task-prolog=tp",
                "--task-epilog=te",
                "x",
            ]
            .map(String::from),
        )
        .unwrap();
        assert_eq!(
            [o.prolog, o.epilog, o.task_prolog, o.task_epilog],
            ["p", "e", "tp", "te"].map(|s| Some(s.to_string()))
        );
        // The variables stand for the options, inside a job too.
        let env = |k: &str| (k == "SLURM_TASK_PROLOG").then(|| "/x".to_string());
        let words = env_options(&|k| {
            if k == "SLURM_JOB_ID" {
                Some("5".into())
            } else {
                env(k)
            }
        });
        assert_eq!(
            parse("srun", &[words, vec!["x".into()]].concat())
                .unwrap()
                .task_prolog
                .as_deref(),
            Some("/x")
        );
    }

    #[test]
    fn programs_are_found_as_slurm_finds_them() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let bin = d.path().join("bin");
        let here = d.path().join("here");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&here).unwrap();
        for (dir, name, mode) in [
            (&bin, "both", 0o755),
            (&here, "both", 0o755),
            (&here, "only-here", 0o755),
            (&bin, "not-runnable", 0o644),
        ] {
            let p = dir.join(name);
            std::fs::write(&p, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let (cwd, path) = (here.to_str().unwrap(), Some(bin.to_str().unwrap()));
        let found = |n: &str| search_path(cwd, n, path);
        assert_eq!(found("both"), Some(format!("{}/both", bin.display())));
        assert_eq!(found("only-here"), Some(format!("{cwd}/only-here")));
        assert_eq!(found("./both"), Some(format!("{cwd}/./both")));
        let abs = format!("{}/both", bin.display());
        assert_eq!(found(&abs), Some(abs.clone()));
        // (As root every file with an x bit may run; the mode is 644.)
        assert_eq!(found("not-runnable"), None);
        assert_eq!(found("missing"), None);
    }

    #[test]
    fn steps_are_told_the_job_and_the_umask_unless_inherited() {
        let mut j = JobRecord {
            qos: "high".into(),
            start_time: Some(100),
            end_time: Some(160),
            ..Default::default()
        };
        std::sync::Arc::make_mut(&mut j.desc).reservation = Some("r1".into());
        let o = AllocOpts {
            overcommit: true,
            verbose: 2,
            ..Default::default()
        };
        let none = |_: &str| None;
        let v = step_vars(&j, &o, &none);
        let get = |k: &str| v.iter().find(|(n, _)| n == k).map(|(_, x)| x.as_str());
        assert_eq!(get("SLURM_JOB_QOS"), Some("high"));
        assert_eq!(get("SLURM_JOB_START_TIME"), Some("100"));
        assert_eq!(get("SLURM_JOB_END_TIME"), Some("160"));
        assert_eq!(get("SLURM_JOB_RESERVATION"), Some("r1"));
        assert_eq!(get("SLURM_OVERCOMMIT"), Some("1"));
        assert_eq!(get("SRUN_DEBUG"), Some("5"));
        assert_eq!(get("SLURM_UMASK").map(str::len), Some(4));
        assert!(get("SLURM_SUBMIT_DIR").is_some());
        let inside = |k: &str| k.starts_with("SLURM_SUBMIT_").then(|| "x".to_string());
        let v = step_vars(&j, &AllocOpts::default(), &inside);
        assert!(!v
            .iter()
            .any(|(k, _)| k.starts_with("SLURM_SUBMIT_") || k == "SLURM_OVERCOMMIT"));
    }

    #[test]
    fn a_steps_cpus_and_tres_per_task_are_what_it_asked() {
        // In a `-c 4` job.
        let mut j = JobRecord::default();
        std::sync::Arc::make_mut(&mut j.desc).cpus_per_task = Some(4);
        let none = |_: &str| None;
        let vars = |o: &AllocOpts| {
            let v = step_vars(&j, o, &none);
            let get = |k: &str| v.iter().find(|(n, _)| n == k).map(|(_, x)| x.clone());
            (get("SLURM_CPUS_PER_TASK"), get("SLURM_TRES_PER_TASK"))
        };
        // Asking nothing (nor reading the job's copies): neither.
        assert_eq!(vars(&AllocOpts::default()), (None, None));
        let o = AllocOpts {
            cpus_per_task: Some(1),
            ..Default::default()
        };
        assert_eq!(vars(&o), (Some("1".into()), Some("cpu=1".into())));
        // The job's copies read, a GPU per task added: first, as Slurm's.
        let o = AllocOpts {
            cpus_per_task: Some(4),
            tres_per_task: Some("cpu=4".into()),
            gpus_per_task: Some("1".into()),
            ..Default::default()
        };
        assert_eq!(
            vars(&o),
            (Some("4".into()), Some("gres/gpu=1,cpu=4".into()))
        );
        // CPUs per GPU: no CPUs per task, the cpu entry gone.
        let o = AllocOpts {
            cpus_per_gpu: Some(2),
            tres_per_task: Some("cpu=4,gres/gpu=1".into()),
            gpus_per_task: Some("1".into()),
            ..Default::default()
        };
        assert_eq!(vars(&o), (None, Some("gres/gpu=1".into())));
    }
}
