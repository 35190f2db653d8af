//! Scheduler cases: a small cluster and a job list in a readable text file,
//! run through the same engine as a trace replay, printed as a timeline.
//! `tests/golden/*.case` hold the expected timeline after a
//! `--- expected` line; `slurmsim --case FILE` prints it.
//!
//! ```text
//! # Comments start with '#' (at the start of a word, anywhere in a line).
//! cluster: 3 nodes x 4 cpus            (optional: x 4000 mem; partition "sim")
//! conf: NodeName=n[1-3] CPUs=4 ...     (or: slurm.conf lines, accumulated)
//! scheduler: sched/builtin             (overrides SchedulerType)
//! params: bf_window=60,bf_resolution=1 (overrides SchedulerParameters)
//! interval: 30                         (periodic passes instead of per event)
//! show: plan                           (print pending reasons and planned starts)
//! job 1 submit=0 tasks=8 nodes=2 limit=60 run=30
//! job 2 run=10 nodes=1-2 cpus-per-task=2 tasks-per-node=1 exclusive
//!       w=n1 x=n2,n3 partition=debug prio=500 mem=1000 mem-per-cpu=100 user=5
//! ```
//!
//! Job keys: `submit` (s, default 0), `run` (s, required), `limit`
//! (minutes, default none), `tasks` (default 1), `nodes` (`N` or `N-M`,
//! default 1 to `tasks`), `cpus-per-task`, `tasks-per-node`, `exclusive`,
//! `w`/`x` (node names), `partition`, `prio` (default: priority/basic by
//! submission order), `mem` (MiB per node, 0 = all), `mem-per-cpu`, `user`,
//! `licenses` (`matlab:2,abaqus`, against the `Licenses=` of `conf:`),
//! `array=A%N` (a task of array A, at most N of whose tasks run at once;
//! `array=A`: no limit), `dependency` (`afterok:1,afterany:2`; a job killed
//! at its limit did not complete), `account`, `qos`, `oversubscribe` (may
//! share cores where the partition's `OverSubscribe=YES:N` allows).
//!
//! Accounting (see `accounting.rs`): `account: NAME parent=P LIMIT=...`,
//! `user: ID account=A LIMIT=...`, `qos: NAME LIMIT=... Preempt=Q
//! PreemptMode=M`; with any of them, limits are enforced and a job needs an
//! association (`reject` lines name Slurm's reason).
//!
//! Output lines, in time order: `reject`, `end`, the pass's `pend` lines
//! (with `show: plan`), `start` with `node:cpus[/MiB]`; then one summary
//! line. `conf:` errors count lines among the `conf:` lines. A
//! configuration the scheduler refuses prints `error: ...` instead (so
//! broken configurations are cases too); the registry's warnings print as
//! `warning: ...` first.

use crate::accounting::Accounting;
use crate::cluster::{Cluster, PreemptMode};
use crate::engine::{self, Observer, Options};
use crate::metrics::Metrics;
use crate::workload::SimJob;
use slurm_common::conf::SlurmConf;
use slurm_plugins::{ClusterView, Decision, JobView, NodeAlloc, PendingReason, Plan};
use std::fmt::Write as _;
use std::path::Path;

/// The line that starts a case's expected output.
pub const EXPECTED_MARK: &str = "--- expected";

/// A mistake in the case file itself (not blessable: fix the file).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{file}:{line}: {message}")]
pub struct CaseError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

/// Split a case file into its input and its expected output (if any).
pub fn split(text: &str) -> (&str, Option<&str>) {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.trim_end() == EXPECTED_MARK {
            return (&text[..offset], Some(&text[offset + line.len()..]));
        }
        offset += line.len();
    }
    (text, None)
}

struct JobLine {
    line: usize,
    id: u32,
    kv: Vec<(String, Option<String>)>,
}

#[derive(Default)]
struct Input {
    flat: Option<(usize, u32, u64)>,
    conf: String,
    scheduler: Option<String>,
    params: Option<String>,
    interval: Option<i64>,
    show_plan: bool,
    jobs: Vec<JobLine>,
    accounting: Option<Accounting>,
}

fn num<T: std::str::FromStr>(v: &str, what: &str) -> Result<T, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("{what}: '{v}' is not a valid number"))
}

fn parse_flat(v: &str) -> Result<(usize, u32, u64), String> {
    let w: Vec<&str> = v.split_whitespace().collect();
    let bad = || format!("expected 'N nodes x C cpus [x M mem]', got '{v}'");
    match w.as_slice() {
        [n, "nodes", "x", c, "cpus"] => Ok((num(n, "nodes")?, num(c, "cpus")?, 0)),
        [n, "nodes", "x", c, "cpus", "x", m, "mem"] => {
            Ok((num(n, "nodes")?, num(c, "cpus")?, num(m, "mem")?))
        }
        _ => Err(bad()),
    }
}

/// The line without its comment: from a `#` that starts a word.
fn strip_comment(line: &str) -> &str {
    let mut prev_space = true;
    for (i, c) in line.char_indices() {
        if c == '#' && prev_space {
            return &line[..i];
        }
        prev_space = c.is_whitespace();
    }
    line
}

fn parse_input(text: &str, file: &str) -> Result<Input, CaseError> {
    let mut inp = Input::default();
    for (k, raw) in text.lines().enumerate() {
        let line = k + 1;
        let err = |message: String| CaseError {
            file: file.to_string(),
            line,
            message,
        };
        let l = strip_comment(raw).trim();
        if l.is_empty() {
            continue;
        }
        if let Some(rest) = l.strip_prefix("job ") {
            let mut words = rest.split_whitespace();
            let id = words
                .next()
                .and_then(|w| w.parse::<u32>().ok())
                .ok_or_else(|| err("a job line starts with 'job ID'".into()))?;
            let kv = words
                .map(|w| match w.split_once('=') {
                    Some((k, v)) => (k.to_string(), Some(v.to_string())),
                    None => (w.to_string(), None),
                })
                .collect();
            inp.jobs.push(JobLine { line, id, kv });
            continue;
        }
        let Some((key, value)) = l.split_once(':') else {
            return Err(err(format!("cannot read '{l}'")));
        };
        let value = value.trim();
        match key.trim() {
            "cluster" => inp.flat = Some(parse_flat(value).map_err(err)?),
            "conf" => {
                inp.conf.push_str(value);
                inp.conf.push('\n');
            }
            "scheduler" => inp.scheduler = Some(value.to_string()),
            "params" => inp.params = Some(value.to_string()),
            "interval" => inp.interval = Some(num(value, "interval").map_err(err)?),
            "show" if value == "plan" => inp.show_plan = true,
            "account" | "user" | "qos" => inp
                .accounting
                .get_or_insert_with(Accounting::default)
                .line(key.trim(), value)
                .map_err(err)?,
            k => return Err(err(format!("unknown key '{k}'"))),
        }
    }
    if inp.flat.is_some() != inp.conf.is_empty() {
        return Err(CaseError {
            file: file.to_string(),
            line: 0,
            message: "give either 'cluster:' or 'conf:' lines".into(),
        });
    }
    Ok(inp)
}

fn node_list(c: &Cluster, v: &str) -> Result<Vec<usize>, String> {
    let names = slurm_common::hostlist::expand(v).map_err(|e| e.to_string())?;
    names
        .iter()
        .map(|n| c.node(n).ok_or_else(|| format!("no node named '{n}'")))
        .collect()
}

fn build_job(c: &Cluster, j: &JobLine) -> Result<SimJob, String> {
    let mut job = SimJob::new(j.id, 0, -1);
    job.req.partition = c.default_partition;
    let mut nodes: Option<(u32, u32)> = None;
    for (k, v) in &j.kv {
        let need = || v.as_deref().ok_or_else(|| format!("{k} needs a value"));
        match k.as_str() {
            "submit" => job.req.submit_time = num(need()?, k)?,
            "run" => job.run = num(need()?, k)?,
            "limit" => job.req.time_limit = Some(num(need()?, k)?),
            "tasks" => job.req.num_tasks = num(need()?, k)?,
            "nodes" => {
                let v = need()?;
                nodes = Some(match v.split_once('-') {
                    Some((a, b)) => (num(a, k)?, num(b, k)?),
                    None => (num(v, k)?, num(v, k)?),
                });
            }
            "cpus-per-task" => job.req.cpus_per_task = num(need()?, k)?,
            "tasks-per-node" => job.req.ntasks_per_node = Some(num(need()?, k)?),
            "exclusive" if v.is_none() => job.req.exclusive = true,
            "oversubscribe" if v.is_none() => job.oversubscribe = true,
            "w" => job.req.req_nodes = node_list(c, need()?)?,
            "x" => job.req.exc_nodes = node_list(c, need()?)?,
            "partition" => job.req.partition = c.partition(need()?).map_err(|e| e.to_string())?,
            "prio" => job.priority = Some(num(need()?, k)?),
            "mem" => job.req.mem_per_node = Some(num(need()?, k)?),
            "mem-per-cpu" => job.req.mem_per_cpu = Some(num(need()?, k)?),
            "user" => job.user = num(need()?, k)?,
            "account" => job.account = Some(need()?.to_ascii_lowercase()),
            "qos" => job.qos = Some(need()?.to_ascii_lowercase()),
            "licenses" => {
                job.licenses =
                    slurm_common::licenses::parse(need()?).map_err(|e| format!("licenses: {e}"))?
            }
            "dependency" => {
                job.dependency = Some(
                    slurm_common::jobspec::parse_dependency(need()?)
                        .map_err(|e| format!("dependency: {e}"))?,
                )
            }
            "array" => {
                let v = need()?;
                job.array = Some(match v.split_once('%') {
                    Some((a, n)) => (num(a, k)?, Some(num(n, k)?)),
                    None => (num(v, k)?, None),
                });
            }
            _ => return Err(format!("unknown job key '{k}'")),
        }
    }
    if job.run < 0 {
        return Err("run=SECONDS is required".into());
    }
    let (min, max) = nodes.unwrap_or((1, job.req.num_tasks.max(1)));
    job.req.min_nodes = min;
    job.req.max_nodes = max;
    Ok(job)
}

/// Run the case `text` (its input part; anything after the expected mark
/// is ignored) and return its output. `file` names it in messages.
pub fn run_case(text: &str, file: &str) -> Result<String, CaseError> {
    let (input, _) = split(text);
    let inp = parse_input(input, file)?;
    let mut out = String::new();
    let cluster = match inp.flat {
        Some((n, c, m)) => Cluster::flat(n, c, m).map_err(|e| e.to_string()),
        None => SlurmConf::parse_str(&inp.conf, Path::new("slurm.conf"))
            .map_err(|e| e.to_string())
            .and_then(|conf| Cluster::from_conf(&conf).map_err(|e| e.to_string())),
    };
    let mut cluster = match cluster {
        Ok(c) => c,
        Err(e) => return Ok(format!("error: {e}\n")),
    };
    if let Some(s) = &inp.scheduler {
        cluster.scheduler_type = s.clone();
    }
    if let Some(p) = &inp.params {
        cluster.scheduler_params = p.clone();
    }
    if let Some(mut a) = inp.accounting.clone() {
        a.finish();
        cluster.accounting = Some(a);
    }
    let mut choice = match cluster.scheduler() {
        Ok(c) => c,
        Err(e) => return Ok(format!("error: {e}\n")),
    };
    if let Some(w) = &choice.warning {
        let _ = writeln!(out, "warning: {w}");
    }
    let jobs = inp
        .jobs
        .iter()
        .map(|j| {
            build_job(&cluster, j).map_err(|message| CaseError {
                file: file.to_string(),
                line: j.line,
                message,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut obs = Timeline {
        out,
        show_plan: inp.show_plan,
    };
    let opts = Options {
        interval: inp.interval,
    };
    match engine::run(
        &cluster,
        jobs,
        choice.scheduler.as_mut(),
        opts,
        &mut obs,
        None,
    ) {
        Ok(o) => {
            let m = Metrics::of(&o);
            let _ = writeln!(
                obs.out,
                "summary: {} jobs, {} started, {} rejected, {} killed at limit; \
                 utilisation {:.4}, mean wait {:.1} s, mean bounded slowdown {:.2}, \
                 makespan {} s, {} passes",
                m.submitted,
                m.started,
                m.rejected,
                m.killed,
                m.utilisation,
                m.mean_wait,
                m.mean_bsld,
                m.makespan,
                o.passes
            );
        }
        Err(e) => {
            let _ = writeln!(obs.out, "error: {e}");
        }
    }
    Ok(obs.out)
}

/// `n1:4 n2:4/2000M`: each node of an allocation with its CPUs and, when
/// any, its memory.
pub fn placement(alloc: &[NodeAlloc], view: &ClusterView) -> String {
    alloc
        .iter()
        .map(|a| {
            let name = view.nodes.get(a.node).map_or("?", |n| n.name.as_str());
            match a.mem {
                0 => format!("{name}:{}", a.cpus),
                m => format!("{name}:{}/{m}M", a.cpus),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn reason_name(r: PendingReason) -> String {
    format!("{r:?}")
}

struct Timeline {
    out: String,
    show_plan: bool,
}

impl Timeline {
    fn line(&mut self, t: i64, what: &str, id: u32, rest: &str) {
        let line = format!("{t:>6} {what:<6} job {id:<4} {rest}");
        let _ = writeln!(self.out, "{}", line.trim_end());
    }
}

impl Observer for Timeline {
    fn reject(&mut self, t: i64, job: &SimJob, reason: PendingReason) {
        self.line(t, "reject", job.req.id, &reason_name(reason));
    }
    fn refuse(&mut self, t: i64, job: &SimJob, why: &str) {
        self.line(t, "reject", job.req.id, why);
    }
    fn start(&mut self, t: i64, job: &SimJob, alloc: &[NodeAlloc], view: &ClusterView) {
        self.line(t, "start", job.req.id, &placement(alloc, view));
    }
    fn end(&mut self, t: i64, job: &SimJob, killed: bool) {
        self.line(
            t,
            "end",
            job.req.id,
            if killed {
                "killed at its time limit"
            } else {
                ""
            },
        );
    }
    fn wants_passes(&self) -> bool {
        self.show_plan
    }
    fn preempt(&mut self, t: i64, job: &SimJob, by: u32, how: PreemptMode) {
        let how = match how {
            PreemptMode::Requeue => "requeued",
            PreemptMode::Suspend => "suspended",
            PreemptMode::Cancel | PreemptMode::Off => "cancelled",
        };
        self.line(t, "preempt", job.req.id, &format!("for job {by}, {how}"));
    }
    fn resume(&mut self, t: i64, job: &SimJob) {
        self.line(t, "resume", job.req.id, "");
    }
    fn gang(&mut self, t: i64, job: &SimJob, runs: bool) {
        let what = if runs { "resume" } else { "suspend" };
        self.line(t, what, job.req.id, "(gang turn)");
    }

    fn held(&mut self, t: i64, job: u32, reason: &str) {
        self.line(t, "pend", job, reason);
    }

    fn pass(&mut self, t: i64, plan: &Plan, _queue: &[JobView], view: &ClusterView) {
        for d in &plan.decisions {
            if let Decision::Pending { job, reason } = d {
                let planned = match plan.starts.get(job) {
                    Some(p) => format!(", planned at {} on {}", p.start, placement(&p.alloc, view)),
                    None => String::new(),
                };
                self.line(
                    t,
                    "pend",
                    *job,
                    &format!("{}{planned}", reason_name(*reason)),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_at_the_mark() {
        assert_eq!(split("a\nb\n"), ("a\nb\n", None));
        assert_eq!(split("a\n--- expected\nx\ny\n"), ("a\n", Some("x\ny\n")));
    }

    #[test]
    fn mistakes_in_the_case_name_their_line() {
        let e = run_case("cluster: 2 nodes x 1 cpus\njob 1 run=5 colour=red\n", "c").unwrap_err();
        assert_eq!(e.to_string(), "c:2: unknown job key 'colour'");
        let e = run_case("cluster: 2 nodes\n", "c").unwrap_err();
        assert!(e.message.contains("expected 'N nodes x C cpus"), "{e}");
        let e = run_case("cluster: 2 nodes x 1 cpus\njob 1 w=n9 run=1\n", "c").unwrap_err();
        assert_eq!(e.message, "no node named 'n9'");
        let e = run_case("job 1 run=1\n", "c").unwrap_err();
        assert_eq!(e.line, 0);
        let e = run_case("cluster: 2 nodes x 1 cpus\njob 1\n", "c").unwrap_err();
        assert_eq!(e.message, "run=SECONDS is required");
    }
}
