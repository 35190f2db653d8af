//! `sched/backfill`: priority order, with lower-priority jobs started early
//! when that delays no reservation.
//!
//! One engine covers EASY and conservative backfill: `bf_reserve_depth`
//! says how many blocked jobs get a reservation (1 = EASY: only the first;
//! unlimited = conservative: every one within `bf_window`). A pass walks the
//! queue in [`queue_order`]:
//! 1. a job with a [`static_reason`] stays pending for it;
//! 2. a job that fits now for its whole time limit, around every
//!    reservation made so far, starts now (and its resources leave the plan
//!    until its limit);
//! 3. otherwise it is blocked (`Resources` for the first blocked job of a
//!    partition, `Priority` after that, as Slurm says it) and, while the
//!    depth allows, reserves its earliest start within `bf_window`.
//!
//! So a job only ever starts where nothing planned for a higher-priority
//! job is touched, and a job without a time limit only where no
//! reservation ever comes.

use crate::plan::{duration, Availability, FOREVER};
use crate::registry::PluginError;
use crate::sched::{
    queue_order, static_reason, Decision, PendingReason, Plan, PlannedStart, Scheduler,
};
use crate::select::prepare;
use crate::view::{ClusterView, JobView, NodeAlloc};
use std::collections::BTreeMap;

/// The `SchedulerParameters` the backfill scheduler reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackfillParams {
    /// `bf_window`: how far ahead reservations are made, minutes.
    pub window: u32,
    /// `bf_resolution`: planned times are rounded up to this, seconds.
    pub resolution: u32,
    /// `bf_max_job_test`: jobs examined per pass; the rest wait (Priority).
    pub max_job_test: u32,
    /// `bf_max_job_user`: jobs examined per user per pass; 0 = no limit.
    pub max_job_user: u32,
    /// `bf_reserve_depth` (ours): how many blocked jobs get a reservation;
    /// `None` = all of them (conservative), `Some(1)` = EASY.
    pub reserve_depth: Option<u32>,
    /// `bf_interval`: seconds between passes, for the controller's loop;
    /// `None` (-1) = no periodic backfill pass.
    pub interval: Option<u32>,
    /// `bf_continue`: accepted; a pass here always covers the whole queue
    /// in one go, so there is nothing to continue.
    pub continue_after_yield: bool,
}

impl Default for BackfillParams {
    /// Slurm's defaults, and conservative reservations.
    fn default() -> Self {
        BackfillParams {
            window: 1440,
            resolution: 60,
            max_job_test: 500,
            max_job_user: 0,
            reserve_depth: None,
            interval: Some(30),
            continue_after_yield: false,
        }
    }
}

/// `bf_` options Slurm has that this scheduler does not act on yet.
const UNSUPPORTED: &[&str] = &[
    "bf_busy_nodes",
    "bf_hetjob_immediate",
    "bf_hetjob_prio",
    "bf_ignore_newly_avail_nodes",
    "bf_job_part_count_reserve",
    "bf_licenses",
    "bf_max_job_array_resv",
    "bf_max_job_assoc",
    "bf_max_job_part",
    "bf_max_job_start",
    "bf_max_time",
    "bf_min_age_reserve",
    "bf_min_prio_reserve",
    "bf_node_space_size",
    "bf_one_resv_per_job",
    "bf_running_job_reserve",
    "bf_topopt_enable",
    "bf_topopt_iterations",
    "bf_yield_interval",
    "bf_yield_sleep",
];

/// What a valid value of `key` looks like (for [`PluginError::BadParam`]).
pub(crate) fn expected_value(key: &str) -> &'static str {
    match key {
        "bf_window" => "a number of minutes from 1 to 43200",
        "bf_resolution" => "a number of seconds from 1 to 3600",
        "bf_max_job_test" => "a number of jobs from 1 to 1000000",
        "bf_max_job_user" => "a number of jobs from 0 (no limit) to 1000000",
        "bf_reserve_depth" => "a number of jobs, or 0 or 'unlimited' for no limit",
        "bf_interval" => "a number of seconds from 1 to 10800, or -1 to disable",
        "bf_continue" => "no value",
        _ => "a valid value",
    }
}

fn number(key: &str, value: &str, min: u32, max: u32) -> Result<u32, PluginError> {
    value
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| PluginError::BadParam {
            key: key.to_string(),
            value: value.to_string(),
        })
}

impl BackfillParams {
    /// Read a `SchedulerParameters` string (`key=value` and flags, comma
    /// separated). Options that are not `bf_` ones belong to the main
    /// scheduler and are left to it. Returns the warnings to log: `bf_`
    /// options that are unknown or not supported yet.
    pub fn parse(s: &str) -> Result<(BackfillParams, Vec<String>), PluginError> {
        let mut p = BackfillParams::default();
        let mut warnings = Vec::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k.trim().to_ascii_lowercase(), Some(v.trim())),
                None => (item.to_ascii_lowercase(), None),
            };
            if !key.starts_with("bf_") {
                continue;
            }
            let bad = |v: &str| PluginError::BadParam {
                key: key.clone(),
                value: v.to_string(),
            };
            let need = || value.ok_or_else(|| bad(""));
            match key.as_str() {
                "bf_window" => p.window = number(&key, need()?, 1, 43_200)?,
                "bf_resolution" => p.resolution = number(&key, need()?, 1, 3600)?,
                "bf_max_job_test" => p.max_job_test = number(&key, need()?, 1, 1_000_000)?,
                "bf_max_job_user" => p.max_job_user = number(&key, need()?, 0, 1_000_000)?,
                "bf_reserve_depth" => {
                    let v = need()?;
                    p.reserve_depth = if v.eq_ignore_ascii_case("unlimited") {
                        None
                    } else {
                        match number(&key, v, 0, u32::MAX)? {
                            0 => None,
                            n => Some(n),
                        }
                    };
                }
                "bf_interval" => {
                    let v = need()?;
                    p.interval = if v == "-1" {
                        None
                    } else {
                        Some(number(&key, v, 1, 10_800)?)
                    };
                }
                "bf_continue" => match value {
                    None => p.continue_after_yield = true,
                    Some(v) => return Err(bad(v)),
                },
                k if UNSUPPORTED.contains(&k) => warnings.push(format!(
                    "SchedulerParameters option {k} is not supported yet: ignored"
                )),
                k => warnings.push(format!("unknown SchedulerParameters option {k}: ignored")),
            }
        }
        Ok((p, warnings))
    }
}

/// Counters of the last pass (for `sdiag`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackfillStats {
    /// Jobs examined (at most `bf_max_job_test`).
    pub examined: u32,
    pub started: u32,
    pub reserved: u32,
    /// Jobs were left unexamined at `bf_max_job_test`.
    pub hit_max_job_test: bool,
    /// Distinct instants of the plan it left (Slurm's backfill table size).
    pub table_size: u32,
}

/// The `sched/backfill` policy.
#[derive(Debug, Clone, Default)]
pub struct Backfill {
    pub params: BackfillParams,
    pub last: BackfillStats,
}

impl Backfill {
    pub fn new(params: BackfillParams) -> Backfill {
        Backfill {
            params,
            last: BackfillStats::default(),
        }
    }

    /// One pass: the decisions, the planned starts and the plan it leaves
    /// (with every start and reservation taken out). `users[i]` owns
    /// `queue[i]` (for `bf_max_job_user`); without it there is no per-user
    /// limit.
    pub fn plan_pass(
        &mut self,
        view: &ClusterView,
        queue: &[JobView],
        users: Option<&[u32]>,
        now: i64,
    ) -> (Plan, Availability) {
        let prm = &self.params;
        let users = users.filter(|u| u.len() == queue.len());
        let mut avail = Availability::new(view, now, i64::from(prm.resolution));
        let latest = now.saturating_add(i64::from(prm.window) * 60);
        let shortest = queue
            .iter()
            .map(|j| duration(j).unwrap_or(FOREVER))
            .min()
            .unwrap_or(0);
        avail.set_horizon(latest, shortest);
        let mut blocked = vec![false; view.partitions.len()];
        let mut per_user: BTreeMap<u32, u32> = BTreeMap::new();
        let mut stats = BackfillStats::default();
        let mut decisions = Vec::with_capacity(queue.len());
        let mut starts = BTreeMap::new();
        let mut memo: BTreeMap<Shape, Memo> = BTreeMap::new();
        let mut limits = BTreeMap::new();
        let pending = |job: &JobView, reason| Decision::Pending {
            job: job.id,
            reason,
        };

        for i in queue_order(view, queue) {
            let job = &queue[i];
            if let Some(reason) = static_reason(view, job, now) {
                decisions.push(pending(job, reason));
                continue;
            }
            if stats.examined >= prm.max_job_test {
                stats.hit_max_job_test = true;
                // Past the limit, as Slurm's main scheduler: a job whose
                // partition has nothing waiting ahead of it starts if it
                // fits now around every reservation made, and is planned no
                // further; once one does not fit, its partition waits. (A
                // pod behind a thousand blocked batch jobs of another
                // partition still starts at once.)
                let fits = (!blocked[job.partition])
                    .then(|| prepare(view, job).ok())
                    .flatten()
                    .and_then(|p| avail.fits_now_prepared(view, &p));
                match fits {
                    Some(alloc) => {
                        let dur = duration(job);
                        start_now(&mut avail, view, job, alloc, dur, now, &mut starts);
                        stats.started += 1;
                        decisions.push(Decision::Start {
                            job: job.id,
                            alloc: starts[&job.id].alloc.clone(),
                        });
                    }
                    None => {
                        blocked[job.partition] = true;
                        decisions.push(pending(job, PendingReason::Priority));
                    }
                }
                continue;
            }
            if let (Some(users), true) = (users, prm.max_job_user > 0) {
                let n = per_user.entry(users[i]).or_default();
                if *n >= prm.max_job_user {
                    decisions.push(pending(job, PendingReason::Priority));
                    continue;
                }
                *n += 1;
            }
            stats.examined += 1;
            let p = match prepare(view, job) {
                Ok(p) if avail.ever_fits_prepared(view, &p) => p,
                _ => {
                    decisions.push(pending(job, PendingReason::BadConstraints));
                    continue;
                }
            };
            let dur = duration(job);
            // Topology makes fits depend on where, not only how much: no memo.
            let shape = Shape::of(&p, dur)
                .filter(|_| shape_memo_on() && view.topology_of(job.partition).fits_by_amount(job));
            let fails_now = match &shape {
                Some((key, size)) => memo.get(key).is_some_and(|m| m.fails_now(*size)),
                None => false,
            };
            let fits = if fails_now {
                None
            } else {
                avail.fits_now_prepared(view, &p)
            };
            if fits.is_none() {
                if let Some((key, size)) = &shape {
                    memo.entry(key.clone()).or_default().learn_now_fail(*size);
                }
            }
            // Not for its whole limit: for as long as it may be shortened
            // to (`--time-min`), the longest limit that fits now.
            let fits = match fits {
                Some(alloc) => Some((alloc, dur)),
                None => shortened(&avail, view, &p).map(|(alloc, minutes)| {
                    limits.insert(job.id, minutes);
                    (alloc, Some(i64::from(minutes) * 60))
                }),
            };
            if let Some((alloc, dur)) = fits {
                start_now(&mut avail, view, job, alloc, dur, now, &mut starts);
                stats.started += 1;
                decisions.push(Decision::Start {
                    job: job.id,
                    alloc: starts[&job.id].alloc.clone(),
                });
                continue;
            }
            let reason = if blocked[job.partition] {
                PendingReason::Priority
            } else {
                PendingReason::Resources
            };
            blocked[job.partition] = true;
            if prm.reserve_depth.is_none_or(|d| stats.reserved < d) {
                let from = match &shape {
                    Some((key, size)) => match memo.get(key) {
                        Some(m) if m.fails(*size) => None,
                        Some(m) => Some(m.lower_bound(*size).unwrap_or(now)),
                        None => Some(now),
                    },
                    None => Some(now),
                };
                let found = from.and_then(|f| avail.earliest_prepared(view, &p, f, latest, false));
                if let Some((key, size)) = shape {
                    memo.entry(key)
                        .or_default()
                        .learn(size, found.as_ref().map(|x| x.0));
                }
                if let Some((t, alloc)) = found {
                    let end = avail.end_of(t, dur);
                    avail.reserve(&alloc, t, end);
                    avail.reserve(&view.held_beside(job, &alloc), t, end);
                    starts.insert(job.id, planned(t, dur, alloc));
                    stats.reserved += 1;
                }
            }
            decisions.push(pending(job, reason));
        }
        stats.table_size = u32::try_from(avail.instants()).unwrap_or(u32::MAX);
        self.last = stats;
        (
            Plan {
                decisions,
                starts,
                limits,
            },
            avail,
        )
    }
}

/// Jobs whose fit only gets harder as one number grows, all else equal:
/// whole-node shapes (`--ntasks-per-node`, `--exclusive`) by node count and
/// single-node jobs by task count. Within a pass the plan only loses free
/// resources, so once a job of some shape does not fit now, or finds no
/// start within the window, no larger job of that shape will, and a larger
/// one never starts earlier than a smaller one did. That spares most of a
/// deep queue the search.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Shape {
    partition: usize,
    kind: u8,
    cpus_per_task: u32,
    ntasks_per_core: Option<u32>,
    ntasks_per_node: Option<u32>,
    mem_per_node: Option<u64>,
    mem_per_cpu: Option<u64>,
    exclusive: bool,
    dur: Option<i64>,
}

impl Shape {
    /// The shape of a job and its size, when its fit is monotone in size.
    fn of(p: &crate::select::Prepared, dur: Option<i64>) -> Option<(Shape, u32)> {
        let j: &JobView = &p.job;
        if !j.req_nodes.is_empty() || !j.exc_nodes.is_empty() {
            return None;
        }
        let (kind, size) = match j.ntasks_per_node {
            Some(n) if u64::from(j.num_tasks) <= u64::from(j.min_nodes) * u64::from(n.max(1)) => {
                (0, j.min_nodes)
            }
            Some(_) => return None,
            None if p.max_nodes == 1 => (1, j.num_tasks),
            None if j.exclusive && j.num_tasks <= j.min_nodes => (2, j.min_nodes),
            None => return None,
        };
        Some((
            Shape {
                partition: j.partition,
                kind,
                cpus_per_task: j.cpus_per_task.max(1),
                ntasks_per_core: j.ntasks_per_core,
                ntasks_per_node: j.ntasks_per_node,
                mem_per_node: j.mem_per_node,
                mem_per_cpu: j.mem_per_cpu,
                exclusive: j.exclusive,
                dur,
            },
            size,
        ))
    }
}

#[cfg(test)]
thread_local! {
    /// Tests turn the shape memo off to check it changes nothing.
    pub(crate) static NO_SHAPE_MEMO: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn shape_memo_on() -> bool {
    #[cfg(test)]
    return !NO_SHAPE_MEMO.with(|c| c.get());
    #[cfg(not(test))]
    true
}

/// What the pass learnt about one [`Shape`].
#[derive(Debug, Clone, Default)]
struct Memo {
    /// The smallest size that did not fit now.
    now_fail_from: Option<u32>,
    /// The smallest size that found no start.
    fail_from: Option<u32>,
    /// Size → the start it found.
    found: BTreeMap<u32, i64>,
}

impl Memo {
    fn fails(&self, size: u32) -> bool {
        self.fail_from.is_some_and(|f| size >= f)
    }

    fn fails_now(&self, size: u32) -> bool {
        self.now_fail_from.is_some_and(|f| size >= f)
    }

    fn learn_now_fail(&mut self, size: u32) {
        self.now_fail_from = Some(self.now_fail_from.map_or(size, |f| f.min(size)));
    }

    fn lower_bound(&self, size: u32) -> Option<i64> {
        self.found.range(..=size).map(|(_, t)| *t).max()
    }

    fn learn(&mut self, size: u32, start: Option<i64>) {
        match start {
            Some(t) => {
                let e = self.found.entry(size).or_insert(t);
                *e = (*e).max(t);
            }
            None => self.fail_from = Some(self.fail_from.map_or(size, |f| f.min(size))),
        }
    }
}

/// A job with a `--time-min` below its limit that does not fit now for its
/// whole limit: where it fits now for the longest limit it may be lowered
/// to, and that limit in minutes. Fitting only gets easier as the limit
/// shrinks, so the longest is found by bisection.
fn shortened(
    avail: &Availability,
    view: &ClusterView,
    p: &crate::select::Prepared,
) -> Option<(Vec<NodeAlloc>, u32)> {
    let min = p.job.time_min.filter(|m| *m > 0)?;
    let limit = p.job.time_limit.filter(|l| *l > min)?;
    let try_with = |minutes: u32| {
        let mut q = p.clone();
        q.job.to_mut().time_limit = Some(minutes);
        avail.fits_now_prepared(view, &q)
    };
    let mut best = (min, try_with(min)?);
    // Fits at `best.0`; does not at `hi`.
    let mut hi = limit;
    while hi - best.0 > 1 {
        let mid = best.0 + (hi - best.0) / 2;
        match try_with(mid) {
            Some(alloc) => best = (mid, alloc),
            None => hi = mid,
        }
    }
    Some((best.1, best.0))
}

/// Start `job` now on `alloc`: its cores (and what it holds beside them)
/// are taken from `avail` for its run, and it is planned.
fn start_now(
    avail: &mut Availability,
    view: &ClusterView,
    job: &JobView,
    alloc: Vec<NodeAlloc>,
    dur: Option<i64>,
    now: i64,
    starts: &mut BTreeMap<u32, PlannedStart>,
) {
    let end = avail.end_of(now, dur);
    avail.reserve(&alloc, now, end);
    avail.reserve(&view.held_beside(job, &alloc), now, end);
    starts.insert(job.id, planned(now, dur, alloc));
}

fn planned(start: i64, dur: Option<i64>, alloc: Vec<NodeAlloc>) -> PlannedStart {
    PlannedStart {
        start,
        end: dur.map(|d| start.saturating_add(d)),
        alloc,
    }
}

impl Scheduler for Backfill {
    fn name(&self) -> &'static str {
        "sched/backfill"
    }

    fn last_pass(&self) -> Option<BackfillStats> {
        Some(self.last)
    }

    fn schedule(&mut self, view: &ClusterView, queue: &[JobView], now: i64) -> Vec<Decision> {
        self.plan(view, queue, now).decisions
    }

    fn plan(&mut self, view: &ClusterView, queue: &[JobView], now: i64) -> Plan {
        self.plan_pass(view, queue, None, now).0
    }

    fn plan_with_users(
        &mut self,
        view: &ClusterView,
        queue: &[JobView],
        users: &[u32],
        now: i64,
    ) -> Plan {
        self.plan_pass(view, queue, Some(users), now).0
    }

    /// Planned behind every reservation of the queue, with no `bf_window`
    /// limit.
    fn expected_start(
        &mut self,
        view: &ClusterView,
        queue: &[JobView],
        job: &JobView,
        now: i64,
    ) -> Option<(i64, Vec<NodeAlloc>)> {
        let others: Vec<JobView> = queue.iter().filter(|j| j.id != job.id).cloned().collect();
        let saved = self.last;
        let (_, mut avail) = self.plan_pass(view, &others, None, now);
        self.last = saved;
        avail.set_horizon(FOREVER, 0);
        let p = prepare(view, job).ok()?;
        if !avail.ever_fits_prepared(view, &p) {
            return None;
        }
        let from = job.begin_time.unwrap_or(now).max(now);
        avail.earliest_prepared(view, &p, from, FOREVER, true)
    }
}

#[cfg(test)]
mod tests;
