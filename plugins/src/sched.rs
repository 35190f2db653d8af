//! Scheduling policies and their common interface.
//!
//! A [`Scheduler`] looks at the cluster and the pending queue at `now` and
//! returns one [`Decision`] per pending job: start it on these nodes, or keep
//! it pending for a typed reason. The caller commits the decisions.

use crate::select::{place, SelectFail};
use crate::view::{ClusterView, Hold, JobView, NodeAlloc};
use std::collections::BTreeMap;

/// Why a job stays pending (becomes the REASON column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PendingReason {
    /// A higher-priority job in the same partition is waiting.
    Priority,
    /// Not enough free resources now.
    Resources,
    BeginTime,
    JobHeldUser,
    JobHeldAdmin,
    PartitionDown,
    PartitionTimeLimit,
    PartitionNodeLimit,
    /// The request can never be satisfied by this partition.
    BadConstraints,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Start { job: u32, alloc: Vec<NodeAlloc> },
    Pending { job: u32, reason: PendingReason },
}

/// When and where a job is planned to run: now (it starts in this pass) or
/// later (it holds a reservation in the plan).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedStart {
    pub start: i64,
    /// Start plus the time limit; `None` when the job has no limit.
    pub end: Option<i64>,
    pub alloc: Vec<NodeAlloc>,
}

/// What one pass decided, and the planned start of every job that starts
/// now or holds a reservation (`squeue --start`, `sbatch --test-only`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// One per queued job, in the order the jobs were considered.
    pub decisions: Vec<Decision>,
    pub starts: BTreeMap<u32, PlannedStart>,
    /// Jobs that start now with their time limit lowered toward their
    /// `--time-min` (minutes), so that they fit before a reservation.
    pub limits: BTreeMap<u32, u32>,
}

impl Plan {
    /// A plan with no reservations: the jobs that start now start at `now`.
    pub fn from_decisions(decisions: Vec<Decision>, queue: &[JobView], now: i64) -> Plan {
        let limits: BTreeMap<u32, Option<u32>> =
            queue.iter().map(|j| (j.id, j.time_limit)).collect();
        let starts = decisions
            .iter()
            .filter_map(|d| match d {
                Decision::Start { job, alloc } => Some((
                    *job,
                    PlannedStart {
                        start: now,
                        // A limit of 0 means none, as in Slurm.
                        end: limits
                            .get(job)
                            .copied()
                            .flatten()
                            .filter(|m| *m > 0)
                            .map(|m| now.saturating_add(m as i64 * 60)),
                        alloc: alloc.clone(),
                    },
                )),
                Decision::Pending { .. } => None,
            })
            .collect();
        Plan {
            decisions,
            starts,
            limits: BTreeMap::new(),
        }
    }

    /// The planned start of every job of `queue`, in queue order (`None`:
    /// not planned, e.g. beyond `bf_window` or the reservation depth).
    pub fn planned_starts(&self, queue: &[JobView]) -> Vec<(u32, Option<i64>, Vec<NodeAlloc>)> {
        queue
            .iter()
            .map(|j| match self.starts.get(&j.id) {
                Some(p) => (j.id, Some(p.start), p.alloc.clone()),
                None => (j.id, None, Vec::new()),
            })
            .collect()
    }
}

/// One scheduling policy (`SchedulerType`).
pub trait Scheduler: Send {
    /// The `slurm.conf` name of this policy.
    fn name(&self) -> &'static str;
    /// Decide for every job in `queue`. `view` is the cluster as it is now.
    fn schedule(&mut self, view: &ClusterView, queue: &[JobView], now: i64) -> Vec<Decision>;

    /// Decide, and say when each job is planned to start. Policies that do
    /// not plan ahead report only the jobs starting now.
    fn plan(&mut self, view: &ClusterView, queue: &[JobView], now: i64) -> Plan {
        let decisions = self.schedule(view, queue, now);
        Plan::from_decisions(decisions, queue, now)
    }

    /// [`Scheduler::plan`] with each queued job's user id (`users[i]` owns
    /// `queue[i]`), for per-user limits (`bf_max_job_user`). When `users`
    /// does not match `queue` in length, per-user limits are not applied.
    fn plan_with_users(
        &mut self,
        view: &ClusterView,
        queue: &[JobView],
        users: &[u32],
        now: i64,
    ) -> Plan {
        let _ = users;
        self.plan(view, queue, now)
    }

    /// What the last pass did, for `sdiag` (policies that keep no count:
    /// `None`).
    fn last_pass(&self) -> Option<crate::backfill::BackfillStats> {
        None
    }

    /// When and where `job` (not in `queue`) would start if it were
    /// submitted now behind `queue` (`sbatch --test-only`). `None` when it
    /// cannot be predicted.
    fn expected_start(
        &mut self,
        view: &ClusterView,
        queue: &[JobView],
        job: &JobView,
        now: i64,
    ) -> Option<(i64, Vec<NodeAlloc>)> {
        let _ = queue;
        let running: Vec<Running> = view
            .running
            .iter()
            .map(|r| Running {
                end: r.end,
                alloc: r.alloc.clone(),
            })
            .collect();
        estimate_start(view, &running, job, now)
    }
}

/// Order of consideration: partition tier, priority (high first), submit
/// time, job id.
pub fn queue_order(view: &ClusterView, queue: &[JobView]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..queue.len()).collect();
    idx.sort_by(|&a, &b| {
        let (ja, jb) = (&queue[a], &queue[b]);
        let ta = view
            .partitions
            .get(ja.partition)
            .map_or(0, |p| p.priority_tier);
        let tb = view
            .partitions
            .get(jb.partition)
            .map_or(0, |p| p.priority_tier);
        tb.cmp(&ta)
            .then(jb.priority.cmp(&ja.priority))
            .then(ja.submit_time.cmp(&jb.submit_time))
            .then(ja.id.cmp(&jb.id))
    });
    idx
}

/// Reasons that do not depend on resources.
pub fn static_reason(view: &ClusterView, job: &JobView, now: i64) -> Option<PendingReason> {
    match job.hold {
        Some(Hold::User) => return Some(PendingReason::JobHeldUser),
        Some(Hold::Admin) => return Some(PendingReason::JobHeldAdmin),
        None => {}
    }
    let Some(part) = view.partitions.get(job.partition) else {
        return Some(PendingReason::BadConstraints);
    };
    if !part.up {
        return Some(PendingReason::PartitionDown);
    }
    if job.begin_time.is_some_and(|b| b > now) {
        return Some(PendingReason::BeginTime);
    }
    if let (Some(max), lim) = (part.max_time, job.time_limit) {
        if lim.is_none_or(|l| l > max) {
            return Some(PendingReason::PartitionTimeLimit);
        }
    }
    if part.max_nodes.is_some_and(|m| job.min_nodes > m) {
        return Some(PendingReason::PartitionNodeLimit);
    }
    None
}

/// `sched/builtin`: strict priority order. Once a job of a partition cannot
/// start, no lower-priority job of that partition starts in this pass.
#[derive(Debug, Default)]
pub struct Builtin;

impl Scheduler for Builtin {
    fn name(&self) -> &'static str {
        "sched/builtin"
    }

    fn schedule(&mut self, view: &ClusterView, queue: &[JobView], now: i64) -> Vec<Decision> {
        let mut work = view.clone();
        let mut blocked = vec![false; view.partitions.len()];
        let mut out = Vec::with_capacity(queue.len());
        for i in queue_order(view, queue) {
            let job = &queue[i];
            if let Some(reason) = static_reason(view, job, now) {
                out.push(Decision::Pending {
                    job: job.id,
                    reason,
                });
                continue;
            }
            if blocked[job.partition] {
                out.push(Decision::Pending {
                    job: job.id,
                    reason: PendingReason::Priority,
                });
                continue;
            }
            match place(&work, job, false) {
                Ok(alloc) => {
                    work.consume(&alloc);
                    work.consume(&view.held_beside(job, &alloc));
                    out.push(Decision::Start { job: job.id, alloc });
                }
                Err(SelectFail::Busy) => {
                    blocked[job.partition] = true;
                    out.push(Decision::Pending {
                        job: job.id,
                        reason: PendingReason::Resources,
                    });
                }
                Err(SelectFail::Never) => out.push(Decision::Pending {
                    job: job.id,
                    reason: PendingReason::BadConstraints,
                }),
            }
        }
        out
    }
}

/// A running job's hold on resources until its expected end.
#[derive(Debug, Clone, PartialEq)]
pub struct Running {
    /// `None` = no time limit.
    pub end: Option<i64>,
    pub alloc: Vec<NodeAlloc>,
}

/// When and where `job` would start if nothing else were queued: now if it
/// fits, otherwise after enough running jobs end (by their time limits).
/// `None` when it cannot be predicted (jobs without limits block it, or it
/// can never run).
pub fn estimate_start(
    view: &ClusterView,
    running: &[Running],
    job: &JobView,
    now: i64,
) -> Option<(i64, Vec<NodeAlloc>)> {
    if place(view, job, true).is_err() {
        return None;
    }
    let begin = job.begin_time.unwrap_or(now).max(now);
    if let Ok(a) = place(view, job, false) {
        return Some((begin, a));
    }
    let mut ends: Vec<&Running> = running.iter().filter(|r| r.end.is_some()).collect();
    ends.sort_by_key(|r| r.end);
    let mut work = view.clone();
    for r in ends {
        work.release(&r.alloc);
        if let Ok(a) = place(&work, job, false) {
            return Some((r.end.unwrap_or(now).max(begin), a));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::tests::{cluster, job};

    fn reasons(d: &[Decision]) -> Vec<(u32, Option<PendingReason>)> {
        d.iter()
            .map(|d| match d {
                Decision::Start { job, .. } => (*job, None),
                Decision::Pending { job, reason } => (*job, Some(*reason)),
            })
            .collect()
    }

    #[test]
    fn strict_priority_order_with_reasons() {
        let v = cluster(3, 4, 4000);
        let full = |id, prio| JobView {
            num_tasks: 4,
            priority: prio,
            ..job(id)
        };
        let q = vec![
            full(1, 100),
            full(2, 100),
            full(3, 100),
            full(4, 90),
            full(5, 80),
            JobView {
                begin_time: Some(1000),
                ..full(6, 200)
            },
            JobView {
                hold: Some(Hold::User),
                ..full(7, 200)
            },
        ];
        let d = Builtin.schedule(&v, &q, 10);
        assert_eq!(
            reasons(&d),
            vec![
                (6, Some(PendingReason::BeginTime)),
                (7, Some(PendingReason::JobHeldUser)),
                (1, None),
                (2, None),
                (3, None),
                (4, Some(PendingReason::Resources)),
                (5, Some(PendingReason::Priority)),
            ]
        );
    }

    #[test]
    fn ties_break_on_submit_time_then_id() {
        let v = cluster(1, 1, 100);
        let q = vec![
            JobView {
                submit_time: 5,
                ..job(3)
            },
            JobView {
                submit_time: 5,
                ..job(2)
            },
            JobView {
                submit_time: 9,
                ..job(1)
            },
        ];
        let d = Builtin.schedule(&v, &q, 10);
        assert_eq!(reasons(&d)[0], (2, None));
    }

    #[test]
    fn down_partition_and_limits() {
        let mut v = cluster(2, 4, 4000);
        v.partitions[0].max_time = Some(60);
        let d = Builtin.schedule(
            &v,
            &[
                JobView {
                    time_limit: Some(61),
                    ..job(1)
                },
                job(2),
            ],
            0,
        );
        assert_eq!(reasons(&d)[0], (1, Some(PendingReason::PartitionTimeLimit)));
        assert_eq!(
            reasons(&d)[1],
            (2, Some(PendingReason::PartitionTimeLimit)),
            "unlimited > 60"
        );
        v.partitions[0].max_time = None;
        v.partitions[0].up = false;
        let d = Builtin.schedule(&v, &[job(3)], 0);
        assert_eq!(reasons(&d)[0], (3, Some(PendingReason::PartitionDown)));
    }

    #[test]
    fn estimate_uses_running_end_times() {
        let mut v = cluster(1, 4, 4000);
        let run = Running {
            end: Some(500),
            alloc: vec![NodeAlloc {
                node: 0,
                cpus: 4,
                mem: 0,
                tasks: 4,
                exclusive: false,
                gres: Default::default(),
            }],
        };
        v.consume(&run.alloc);
        let (t, a) = estimate_start(&v, std::slice::from_ref(&run), &job(1), 100).unwrap();
        assert_eq!((t, a[0].node), (500, 0));
        let forever = Running { end: None, ..run };
        assert!(estimate_start(&v, &[forever], &job(1), 100).is_none());
        v.release(&[NodeAlloc {
            node: 0,
            cpus: 4,
            mem: 0,
            tasks: 4,
            exclusive: false,
            gres: Default::default(),
        }]);
        assert_eq!(estimate_start(&v, &[], &job(1), 100).unwrap().0, 100);
    }
}
