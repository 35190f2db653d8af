//! From trace records to the jobs the simulation submits: which records are
//! usable, how processors become tasks or nodes, and the time limits the
//! traces do not record.

use crate::swf::{SwfJob, Trace};
use slurm_plugins::JobView;
use std::collections::{BTreeMap, BTreeSet};

/// One job to replay: the request as the scheduler sees it, how long it
/// really runs, and who owns it.
#[derive(Debug, Clone, PartialEq)]
pub struct SimJob {
    /// The request; `submit_time` is the submission, `priority` is set by
    /// the engine unless [`SimJob::priority`] fixes it.
    pub req: JobView,
    /// Seconds the job runs if its limit lets it (from the trace).
    pub run: i64,
    pub user: u32,
    /// A fixed priority; `None`: priority/basic by submission order.
    pub priority: Option<u32>,
    /// The array it is a task of, and the array's `%N` (the queue policy
    /// offers no more than N of its tasks at once).
    pub array: Option<(u32, Option<u32>)>,
    /// Licenses it needs while it runs.
    pub licenses: Vec<(String, u32)>,
    /// `--dependency`, parsed.
    pub dependency: Option<slurm_plugins::deps::Dependency>,
    /// `--account` (`None`: the user's default account).
    pub account: Option<String>,
    /// `--qos` (`None`: `normal`).
    pub qos: Option<String>,
    /// `--oversubscribe`: may share cores where its partition allows.
    pub oversubscribe: bool,
}

impl SimJob {
    /// A one-task job in partition 0, with no limit, owned by user 0.
    pub fn new(id: u32, submit: i64, run: i64) -> SimJob {
        SimJob {
            req: JobView {
                id,
                submit_time: submit,
                min_nodes: 1,
                max_nodes: 1,
                num_tasks: 1,
                cpus_per_task: 1,
                ..Default::default()
            },
            run,
            user: 0,
            priority: None,
            array: None,
            licenses: Vec::new(),
            dependency: None,
            account: None,
            qos: None,
            oversubscribe: false,
        }
    }

    /// Seconds the job holds its resources: its run time, cut at its limit.
    pub fn duration(&self) -> i64 {
        let run = self.run.max(0);
        match self.req.time_limit {
            Some(m) if m > 0 => run.min(i64::from(m) * 60),
            _ => run,
        }
    }

    /// Whether the job is killed at its time limit.
    pub fn killed(&self) -> bool {
        self.duration() < self.run
    }
}

/// How limits are derived for jobs whose trace has no requested time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LimitRule {
    /// The run time times this factor, rounded up to whole minutes.
    Factor(f64),
    /// Every job gets this many minutes (requested times too are ignored).
    Fixed(u32),
}

/// How trace records become jobs.
#[derive(Debug, Clone, PartialEq)]
pub struct MapOptions {
    pub limit: LimitRule,
    /// Use the trace's requested time (field 9) as the limit when it is
    /// known (ignored under [`LimitRule::Fixed`]).
    pub use_requested_time: bool,
    /// Processors per node when the trace counts nodes: a job of `k`
    /// processors gets `ceil(k / P)` whole nodes. `None`: one task of one
    /// CPU per processor, anywhere.
    pub procs_per_node: Option<u32>,
    /// Partition index for every job whose queue is not in `queue_map`.
    pub partition: usize,
    /// SWF queue number (field 15) → partition index.
    pub queue_map: BTreeMap<i64, usize>,
    /// Replay only the first this many usable jobs.
    pub max_jobs: Option<usize>,
}

impl Default for MapOptions {
    fn default() -> Self {
        MapOptions {
            limit: LimitRule::Factor(1.0),
            use_requested_time: true,
            procs_per_node: None,
            partition: 0,
            queue_map: BTreeMap::new(),
            max_jobs: None,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MapError {
    #[error("limit factor must be a positive number, not {0}")]
    BadFactor(f64),
    #[error("a fixed limit must be at least 1 minute")]
    ZeroLimit,
    #[error("processors per node must be at least 1")]
    ZeroProcsPerNode,
}

/// The jobs of a trace, and how many records were left out and why.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Workload {
    pub jobs: Vec<SimJob>,
    /// Why → how many records.
    pub skipped: BTreeMap<&'static str, usize>,
}

impl Workload {
    pub fn skipped_total(&self) -> usize {
        self.skipped.values().sum()
    }
}

/// Whole minutes, at least 1, for `secs` seconds.
fn minutes_up(secs: f64) -> u32 {
    let m = (secs / 60.0).ceil();
    if m.is_nan() || m < 1.0 {
        1
    } else if m >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        m as u32
    }
}

/// The time limit, in minutes, of a job that runs `run` seconds and asked
/// for `req_time` seconds (-1: unknown).
pub fn limit_minutes(opts: &MapOptions, run: i64, req_time: i64) -> u32 {
    match opts.limit {
        LimitRule::Fixed(m) => m.max(1),
        _ if opts.use_requested_time && req_time > 0 => minutes_up(req_time as f64),
        // Seconds first, then minutes: ceil(run × F) s, rounded up to 1 min.
        LimitRule::Factor(f) => minutes_up((run.max(0) as f64 * f).ceil()),
    }
}

/// Turn `trace` into jobs, in file order.
pub fn from_trace(trace: &Trace, opts: &MapOptions) -> Result<Workload, MapError> {
    match opts.limit {
        LimitRule::Factor(f) if !(f.is_finite() && f > 0.0) => return Err(MapError::BadFactor(f)),
        LimitRule::Fixed(0) => return Err(MapError::ZeroLimit),
        _ => {}
    }
    if opts.procs_per_node == Some(0) {
        return Err(MapError::ZeroProcsPerNode);
    }
    let mut w = Workload::default();
    let mut seen = BTreeSet::new();
    for r in &trace.jobs {
        if opts.max_jobs.is_some_and(|m| w.jobs.len() >= m) {
            break;
        }
        match job_of(r, opts) {
            Ok(j) if seen.insert(j.req.id) => w.jobs.push(j),
            Ok(_) => *w.skipped.entry("duplicate job number").or_default() += 1,
            Err(why) => *w.skipped.entry(why).or_default() += 1,
        }
    }
    Ok(w)
}

/// One record as a job, or why it cannot be replayed.
pub fn job_of(r: &SwfJob, opts: &MapOptions) -> Result<SimJob, &'static str> {
    if (2..=4).contains(&r.status) {
        return Err("partial record of a checkpointed job");
    }
    if r.run < 0 {
        return Err("unknown run time");
    }
    let procs = if r.procs > 0 { r.procs } else { r.req_procs };
    if procs <= 0 {
        return Err("unknown processor count");
    }
    let procs = u32::try_from(procs).map_err(|_| "processor count out of range")?;
    let id = u32::try_from(r.id).map_err(|_| "job number out of range")?;
    let mut j = SimJob::new(id, r.submit, r.run);
    j.user = u32::try_from(r.user).unwrap_or(u32::MAX);
    j.req.partition = opts
        .queue_map
        .get(&r.queue)
        .copied()
        .unwrap_or(opts.partition);
    j.req.time_limit = Some(limit_minutes(opts, r.run, r.req_time));
    match opts.procs_per_node {
        Some(p) => {
            let nodes = procs.div_ceil(p);
            j.req.min_nodes = nodes;
            j.req.max_nodes = nodes;
            j.req.num_tasks = nodes;
            j.req.ntasks_per_node = Some(1);
            j.req.exclusive = true;
        }
        None => {
            j.req.num_tasks = procs;
            j.req.max_nodes = procs;
        }
    }
    Ok(j)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: i64, run: i64, procs: i64) -> SwfJob {
        crate::swf::parse_record(&format!(
            "{id} 0 -1 {run} {procs} -1 -1 -1 -1 -1 1 3 1 -1 1 -1 -1 -1"
        ))
        .unwrap()
    }

    #[test]
    fn limits() {
        let o = MapOptions::default();
        assert_eq!(limit_minutes(&o, 0, -1), 1);
        assert_eq!(limit_minutes(&o, 60, -1), 1);
        assert_eq!(limit_minutes(&o, 61, -1), 2);
        assert_eq!(limit_minutes(&o, 61, 3600), 60, "requested time wins");
        let o = MapOptions {
            limit: LimitRule::Factor(1.5),
            use_requested_time: false,
            ..MapOptions::default()
        };
        assert_eq!(limit_minutes(&o, 41, 3600), 2, "ceil(61.5) = 62 s");
        assert_eq!(limit_minutes(&o, 40, 3600), 1);
        let o = MapOptions {
            limit: LimitRule::Fixed(30),
            ..MapOptions::default()
        };
        assert_eq!(limit_minutes(&o, 100_000, 3600), 30);
        assert_eq!(
            limit_minutes(
                &MapOptions {
                    limit: LimitRule::Factor(1e300),
                    ..MapOptions::default()
                },
                10,
                -1
            ),
            u32::MAX
        );
    }

    #[test]
    fn tasks_or_whole_nodes() {
        let o = MapOptions::default();
        let j = job_of(&rec(7, 100, 6), &o).unwrap();
        assert_eq!(
            (j.req.id, j.req.num_tasks, j.req.min_nodes, j.req.max_nodes),
            (7, 6, 1, 6)
        );
        assert_eq!(
            (j.user, j.req.time_limit, j.req.exclusive),
            (3, Some(2), false)
        );
        let o = MapOptions {
            procs_per_node: Some(4),
            ..MapOptions::default()
        };
        let j = job_of(&rec(7, 100, 6), &o).unwrap();
        assert_eq!(
            (j.req.num_tasks, j.req.min_nodes, j.req.max_nodes),
            (2, 2, 2)
        );
        assert!(j.req.exclusive);
        assert_eq!(j.req.ntasks_per_node, Some(1));
    }

    #[test]
    fn killed_at_limit() {
        let mut j = SimJob::new(1, 0, 130);
        assert_eq!((j.duration(), j.killed()), (130, false));
        j.req.time_limit = Some(2);
        assert_eq!((j.duration(), j.killed()), (120, true));
    }

    #[test]
    fn unusable_records_are_counted() {
        let mut t = Trace::default();
        t.jobs.push(rec(1, 10, 1));
        t.jobs.push(rec(1, 10, 1));
        t.jobs.push(rec(2, -1, 1));
        t.jobs.push(rec(3, 10, -1));
        let mut partial = rec(4, 10, 1);
        partial.status = 2;
        t.jobs.push(partial);
        t.jobs.push(rec(5_000_000_000, 10, 1));
        t.jobs.push(rec(6, 10, 2));
        let w = from_trace(&t, &MapOptions::default()).unwrap();
        assert_eq!(
            w.jobs.iter().map(|j| j.req.id).collect::<Vec<_>>(),
            vec![1, 6]
        );
        assert_eq!(w.skipped_total(), 5);
        assert_eq!(w.skipped["unknown run time"], 1);
        let w = from_trace(
            &t,
            &MapOptions {
                max_jobs: Some(1),
                ..MapOptions::default()
            },
        )
        .unwrap();
        assert_eq!(w.jobs.len(), 1);
        let bad = MapOptions {
            limit: LimitRule::Factor(0.0),
            ..MapOptions::default()
        };
        assert_eq!(from_trace(&t, &bad), Err(MapError::BadFactor(0.0)));
    }
}
