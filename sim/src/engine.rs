//! The replay loop, in virtual time.
//!
//! Events are submissions (from the workload) and completions (a started
//! job ends after its run time, or at its time limit if that comes first).
//! At each event time the engine applies every completion, then every
//! submission (ties by job id), then runs one scheduler pass over the
//! pending queue and applies its starts; with an interval, passes run only
//! at multiples of it, as a controller's periodic scheduler does.
//!
//! The cluster view is kept up to date in place (allocations added and
//! removed, running jobs with their expected ends = start + limit), never
//! rebuilt. A pass is skipped when it cannot start anything: no job is
//! pending, or no usable node has a free CPU.
//!
//! Every start is one line of the decision log, `time job nodes` (nodes as
//! a hostlist); its SHA-256 is the run's fingerprint. Everything is ordered
//! (ties by job id), so the same input gives the same log.

use crate::accounting::Accounting;
use crate::cluster::{Cluster, PreemptKind, PreemptMode, Preemption};
use crate::workload::SimJob;
use sha2::{Digest, Sha256};
use slurm_plugins::deps::{self, Asking, DepState, Target};
use slurm_plugins::gang::{choose, shared_free, Turn};
use slurm_plugins::limits;
use slurm_plugins::preempt::{self, Candidate};
use slurm_plugins::queue::{self, Held, InUse, Waiting};
use slurm_plugins::sched::static_reason;
use slurm_plugins::select::{place, SelectFail};
use slurm_plugins::{priority, Scheduler};
use slurm_plugins::{ClusterView, Decision, JobView, NodeAlloc, PendingReason, Plan, RunningJob};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};
use std::io::Write;
use std::time::{Duration, Instant};

/// How the engine runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// Seconds between passes; `None`: a pass after every batch of events.
    pub interval: Option<i64>,
}

/// What happened to one job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobOutcome {
    pub id: u32,
    pub submit: i64,
    pub start: Option<i64>,
    pub end: Option<i64>,
    /// CPUs held while running.
    pub cpus: u64,
    pub killed: bool,
    /// Refused at submission: it could never run on its partition.
    pub rejected: Option<PendingReason>,
    /// Refused at submission by accounting (no association, a QOS that
    /// does not exist, a submit limit): Slurm's name for why.
    pub refused: Option<String>,
    /// Seconds it spent suspended by preemption (its clock stopped).
    pub suspended: i64,
    /// Times it was preempted (ended, or requeued to run again).
    pub preempted: u32,
    /// Its end was a preemption (`PreemptMode=CANCEL`), not its own.
    pub ended_preempted: bool,
}

/// Things an observer may want to see as they happen (the golden tests
/// print them). Every method has an empty default.
pub trait Observer {
    fn reject(&mut self, _t: i64, _job: &SimJob, _reason: PendingReason) {}
    /// Refused by accounting at submission (`why`: Slurm's name).
    fn refuse(&mut self, _t: i64, _job: &SimJob, _why: &str) {}
    fn start(&mut self, _t: i64, _job: &SimJob, _alloc: &[NodeAlloc], _view: &ClusterView) {}
    fn end(&mut self, _t: i64, _job: &SimJob, _killed: bool) {}
    /// `job` was preempted for job `by`: ended, requeued or suspended.
    fn preempt(&mut self, _t: i64, _job: &SimJob, _by: u32, _how: PreemptMode) {}
    /// A job suspended by preemption goes on.
    fn resume(&mut self, _t: i64, _job: &SimJob) {}
    /// A job sharing cores waits for its gang turn (`runs` false) or takes
    /// it (`runs` true).
    fn gang(&mut self, _t: i64, _job: &SimJob, _runs: bool) {}
    /// Whether [`Observer::pass`] wants to be called (it costs a little).
    fn wants_passes(&self) -> bool {
        false
    }
    fn pass(&mut self, _t: i64, _plan: &Plan, _queue: &[JobView], _view: &ClusterView) {}
    /// A job the queue policy (dependencies, array limits, licenses,
    /// association and QOS limits) kept out of a pass, and Slurm's name for
    /// why (called when [`Observer::wants_passes`]).
    fn held(&mut self, _t: i64, _job: u32, _reason: &str) {}
}

/// An observer that looks at nothing.
pub struct Quiet;
impl Observer for Quiet {}

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("job {0} is submitted twice")]
    DuplicateJob(u32),
    #[error("the scheduler started job {job}, which is not pending")]
    NotPending { job: u32 },
    #[error("the scheduler gave job {job} more than node {node} has free")]
    Overcommit { job: u32, node: String },
    #[error("the scheduler gave job {job} a node that does not exist ({node})")]
    NoSuchNode { job: u32, node: usize },
    #[error("writing the decision log: {0}")]
    Log(#[from] std::io::Error),
}

/// The result of a replay.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// One per submitted job, in submission order.
    pub jobs: Vec<JobOutcome>,
    /// Passes run (skipped ones are not counted).
    pub passes: u64,
    /// Passes that started at least one job.
    pub productive_passes: u64,
    /// Time spent inside the scheduler.
    pub sched_time: Duration,
    /// Most jobs pending at once.
    pub max_pending: usize,
    /// SHA-256 hex of the decision log.
    pub hash: String,
    pub usable_cpus: u64,
}

/// Replay `jobs` on `cluster` with `sched`. `log`, when given, receives the
/// decision log.
pub fn run(
    cluster: &Cluster,
    jobs: Vec<SimJob>,
    sched: &mut dyn Scheduler,
    opts: Options,
    obs: &mut dyn Observer,
    log: Option<&mut dyn Write>,
) -> Result<Outcome, SimError> {
    let mut ids: Vec<u32> = jobs.iter().map(|j| j.req.id).collect();
    ids.sort_unstable();
    if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
        return Err(SimError::DuplicateJob(w[0]));
    }
    Engine::new(cluster, jobs, opts, log).run(sched, obs)
}

struct Engine<'a> {
    view: ClusterView,
    /// In submission order: (submit time, id).
    jobs: Vec<SimJob>,
    outcomes: Vec<JobOutcome>,
    by_id: HashMap<u32, usize>,
    next_sub: usize,
    /// (end, id, index into jobs, run): a run preempted before its end
    /// leaves a stale entry, which `run` tells apart.
    ends: BinaryHeap<Reverse<(i64, u32, usize, u32)>>,
    /// Each job's current run (counted up when it is preempted).
    runs: Vec<u32>,
    /// Who preempts whom and how (`None`: nobody).
    preempt: Option<Preemption>,
    /// Accounts, users and QOS, with their limits (`None`: none enforced).
    acct: Option<Accounting>,
    /// Per job: its user (as accounting names it), account and QOS; the
    /// account and QOS are resolved at submission.
    who: Vec<(String, String, String)>,
    /// Jobs suspended by preemption.
    suspended: BTreeMap<u32, Suspension>,
    /// When each job's current run ends (its end event), while it runs.
    end_at: Vec<i64>,
    /// Per partition: (forced, N) where N jobs may share a core.
    sharing: Vec<Option<(bool, u32)>>,
    /// Gang scheduling's time slice (seconds), when jobs take turns.
    gang_slice: Option<i64>,
    /// Jobs sharing cores that wait for their gang turn (they stay in
    /// `view.running`, holding their cores, their clocks stopped).
    paused: BTreeMap<u32, Paused>,
    /// When each job sharing cores last started, went on or stopped.
    turn_since: HashMap<u32, i64>,
    pending: Vec<JobView>,
    pending_users: Vec<u32>,
    /// Job id → its position in `view.running`.
    running_pos: HashMap<u32, usize>,
    /// Free CPUs on usable nodes.
    free_cpus: u64,
    opts: Options,
    hasher: Sha256,
    log: Option<&'a mut dyn Write>,
    passes: u64,
    productive_passes: u64,
    sched_time: Duration,
    max_pending: usize,
    usable_cpus: u64,
    /// `Licenses=`.
    licenses: Vec<(String, u32)>,
    /// Array tasks and licenses held by running jobs.
    in_use: InUse,
    /// Some job has an array limit or licenses (else the queue policy has
    /// nothing to do and is skipped).
    queue_policy: bool,
}

/// A job suspended by preemption: what it gave up and what it has left.
#[derive(Debug, Clone)]
struct Suspension {
    by: u32,
    since: i64,
    /// Seconds of its run left.
    left: i64,
    /// Seconds of its time limit left.
    limit_left: Option<i64>,
    /// Its allocation (its memory stays held; its cores do not).
    alloc: Vec<NodeAlloc>,
    /// Cores kept for it from other jobs while its preemptor runs (those
    /// the preemptor did not take).
    held: Vec<NodeAlloc>,
    priority: u32,
    partition: usize,
}

/// A job waiting for its gang turn: when it stopped and what it has left.
#[derive(Debug, Clone, Copy)]
struct Paused {
    since: i64,
    left: i64,
    limit_left: Option<i64>,
}

/// Only the cores (and a node held whole) of `alloc`.
fn cores_of(alloc: &[NodeAlloc]) -> Vec<NodeAlloc> {
    alloc
        .iter()
        .map(|a| NodeAlloc {
            node: a.node,
            cpus: a.cpus,
            mem: 0,
            tasks: 0,
            exclusive: a.exclusive,
            gres: Default::default(),
        })
        .collect()
}

fn node_free(n: &slurm_plugins::NodeView) -> u64 {
    if n.available {
        u64::from(n.free_cpus())
    } else {
        0
    }
}

impl<'a> Engine<'a> {
    fn new(
        cluster: &Cluster,
        mut jobs: Vec<SimJob>,
        opts: Options,
        log: Option<&'a mut dyn Write>,
    ) -> Engine<'a> {
        jobs.sort_by_key(|j| (j.req.submit_time, j.req.id));
        for (seq, j) in jobs.iter_mut().enumerate() {
            j.req.priority = j.priority.unwrap_or_else(|| priority::basic(seq as u64));
        }
        let jobs_need_policy = cluster.accounting.is_some()
            || jobs.iter().any(|j| {
                j.array.is_some_and(|a| a.1.is_some())
                    || !j.licenses.is_empty()
                    || j.dependency.is_some()
            });
        let who = jobs
            .iter()
            .map(|j| (j.user.to_string(), String::new(), String::new()))
            .collect();
        let end_at = vec![0; jobs.len()];
        let runs = vec![0; jobs.len()];
        let mut view = cluster.view.clone();
        view.running.clear();
        let free_cpus = view.nodes.iter().map(node_free).sum();
        Engine {
            outcomes: jobs
                .iter()
                .map(|j| JobOutcome {
                    id: j.req.id,
                    submit: j.req.submit_time,
                    ..Default::default()
                })
                .collect(),
            by_id: jobs
                .iter()
                .enumerate()
                .map(|(i, j)| (j.req.id, i))
                .collect(),
            jobs,
            view,
            next_sub: 0,
            ends: BinaryHeap::new(),
            pending: Vec::new(),
            pending_users: Vec::new(),
            running_pos: HashMap::new(),
            free_cpus,
            opts,
            hasher: Sha256::new(),
            log,
            passes: 0,
            productive_passes: 0,
            sched_time: Duration::ZERO,
            max_pending: 0,
            usable_cpus: cluster.usable_cpus(),
            licenses: cluster.licenses.clone(),
            runs,
            preempt: cluster.preempt.clone(),
            acct: cluster.accounting.clone(),
            who,
            suspended: BTreeMap::new(),
            end_at,
            sharing: cluster.sharing.clone(),
            gang_slice: cluster
                .gang_slice
                .filter(|_| cluster.sharing.iter().any(Option::is_some)),
            paused: BTreeMap::new(),
            turn_since: HashMap::new(),
            in_use: InUse::default(),
            queue_policy: jobs_need_policy,
        }
    }

    fn run(
        mut self,
        sched: &mut dyn Scheduler,
        obs: &mut dyn Observer,
    ) -> Result<Outcome, SimError> {
        let interval = self.opts.interval.filter(|s| *s > 0);
        let mut last_pass: Option<i64> = None;
        let mut last_t: i64 = i64::MIN;
        // Something changed since the last pass (periodic mode only).
        let mut dirty = false;
        loop {
            let t_sub = self.jobs.get(self.next_sub).map(|j| j.req.submit_time);
            let t_end = self.ends.peek().map(|Reverse((t, _, _, _))| *t);
            let t_tick = match interval {
                Some(s)
                    if (!self.pending.is_empty() || !self.suspended.is_empty())
                        && (dirty || t_sub.is_some() || t_end.is_some()) =>
                {
                    Some(round_up(last_t.saturating_add(1), s))
                }
                _ => None,
            };
            // Gang turns change at multiples of the time slice while some
            // job waits for its turn.
            let t_gang = match self.gang_slice {
                Some(s) if !self.paused.is_empty() => Some(round_up(last_t.saturating_add(1), s)),
                _ => None,
            };
            let Some(t) = [t_sub, t_end, t_tick, t_gang].into_iter().flatten().min() else {
                break;
            };
            last_t = t;
            while let Some(&Reverse((te, _, i, run))) = self.ends.peek() {
                if te != t {
                    break;
                }
                self.ends.pop();
                if run != self.runs[i] {
                    continue;
                }
                self.complete(i, t, obs);
                dirty = true;
            }
            while self
                .jobs
                .get(self.next_sub)
                .is_some_and(|j| j.req.submit_time == t)
            {
                let i = self.next_sub;
                self.next_sub += 1;
                self.submit(i, t, obs);
                dirty = true;
            }
            self.max_pending = self.max_pending.max(self.pending.len());
            if t_gang == Some(t) {
                self.gang_fit(t, true, obs)?;
                dirty = true;
            }
            let due = match interval {
                None => true,
                Some(s) => t.rem_euclid(s) == 0 && last_pass != Some(t),
            };
            if due {
                last_pass = Some(t);
                dirty = false;
                if !self.suspended.is_empty() {
                    self.resume(t, obs)?;
                }
                self.gang_fit(t, false, obs)?;
                // (With preemption or shared cores a full cluster may still
                // start a job.)
                let full_may_start =
                    self.preempt.is_some() || self.sharing.iter().any(Option::is_some);
                if !self.pending.is_empty() && (self.free_cpus > 0 || full_may_start) {
                    self.pass(sched, t, obs)?;
                }
            }
        }
        self.log_flush()?;
        Ok(Outcome {
            jobs: self.outcomes,
            passes: self.passes,
            productive_passes: self.productive_passes,
            sched_time: self.sched_time,
            max_pending: self.max_pending,
            hash: hex::encode(self.hasher.finalize()),
            usable_cpus: self.usable_cpus,
        })
    }

    fn log_flush(&mut self) -> Result<(), SimError> {
        if let Some(l) = self.log.as_mut() {
            l.flush()?;
        }
        Ok(())
    }

    /// Queue job `i`, or refuse it when it could never run where it asks.
    fn submit(&mut self, i: usize, t: i64, obs: &mut dyn Observer) {
        let job = &self.jobs[i];
        // Partitions never change state in a replay, so these are final.
        let reason = match static_reason(&self.view, &job.req, t) {
            Some(
                r @ (PendingReason::PartitionDown
                | PendingReason::PartitionTimeLimit
                | PendingReason::PartitionNodeLimit
                | PendingReason::BadConstraints),
            ) => Some(r),
            _ => match place(&self.view, &job.req, true) {
                Err(SelectFail::Never) => Some(PendingReason::BadConstraints),
                _ => None,
            },
        };
        if let Some(r) = reason {
            self.outcomes[i].rejected = Some(r);
            obs.reject(t, job, r);
            return;
        }
        if let Err(why) = self.admit(i) {
            obs.refuse(t, &self.jobs[i], &why);
            self.outcomes[i].refused = Some(why);
            return;
        }
        let job = &self.jobs[i];
        self.pending.push(job.req.clone());
        self.pending_users.push(job.user);
    }

    /// With accounting: the account and QOS job `i` runs under, or why it
    /// is refused (as `AccountingStorageEnforce=associations,limits,qos`).
    fn admit(&mut self, i: usize) -> Result<(), String> {
        let Some(a) = &self.acct else {
            return Ok(());
        };
        let job = &self.jobs[i];
        let account = job
            .account
            .clone()
            .or_else(|| a.default_account.get(&job.user).cloned())
            .ok_or("InvalidAccount (no default account)")?;
        let user = &self.who[i].0;
        let partition = self.partition_name(job.req.partition);
        if a.book.effective(user, &account, partition).is_none() {
            return Err(format!("InvalidAccount (no association with {account})"));
        }
        let qos = job.qos.clone().unwrap_or_else(|| "normal".into());
        if a.book.qos(&qos).is_none() {
            return Err(format!("InvalidQos ({qos})"));
        }
        self.who[i].1 = account;
        self.who[i].2 = qos;
        let me = self.limit_job(i, None);
        let others = self
            .pending
            .iter()
            .map(|v| self.limit_job(self.by_id[&v.id], None))
            .chain(self.view.running.iter().map(|r| {
                let k = self.by_id[&r.id];
                self.limit_job(k, Some(&r.alloc))
            }))
            .chain(self.suspended.iter().map(|(id, s)| limits::Job {
                running_since: None,
                ..self.limit_job(self.by_id[id], Some(&s.alloc))
            }));
        match a.book.refuse_submission(&me, others) {
            Some(what) => Err(format!("AccountingPolicy ({what})")),
            None => Ok(()),
        }
    }

    fn partition_name(&self, p: usize) -> &str {
        self.view.partitions.get(p).map_or("", |p| p.name.as_str())
    }

    /// Job `i` as the limits see it: what it asks for, or what it holds
    /// (`alloc`) once started.
    fn limit_job(&self, i: usize, alloc: Option<&[NodeAlloc]>) -> limits::Job<'_> {
        let j = &self.jobs[i];
        let (user, account, qos) = &self.who[i];
        let cpus = u64::from(j.req.num_tasks.max(1)) * u64::from(j.req.cpus_per_task.max(1));
        let nodes = u64::from(j.req.min_nodes.max(1));
        let uses = match alloc {
            Some(a) => limits::Use {
                jobs: 1,
                cpu: a.iter().map(|x| u64::from(x.cpus)).sum(),
                node: a.len() as u64,
                mem: a.iter().map(|x| x.mem).sum(),
            },
            None => limits::Use {
                jobs: 1,
                cpu: cpus,
                node: nodes,
                mem: match (j.req.mem_per_node, j.req.mem_per_cpu) {
                    (Some(m), _) => m * nodes,
                    (None, Some(m)) => m * cpus,
                    _ => 0,
                },
            },
        };
        limits::Job {
            user,
            account,
            partition: self.partition_name(j.req.partition),
            qos,
            time_limit: j.req.time_limit,
            running_since: alloc.and(self.outcomes[i].start),
            uses,
        }
    }

    fn complete(&mut self, i: usize, t: i64, obs: &mut dyn Observer) {
        let id = self.jobs[i].req.id;
        if let Some(pos) = self.running_pos.remove(&id) {
            let r = self.view.running.swap_remove(pos);
            if let Some(moved) = self.view.running.get(pos) {
                self.running_pos.insert(moved.id, pos);
            }
            self.change(&r.alloc, false);
            self.hold(i, false);
        }
        self.turn_since.remove(&id);
        self.outcomes[i].end = Some(t);
        obs.end(t, &self.jobs[i], self.outcomes[i].killed);
    }

    /// Why job `id`'s dependency keeps it out of a pass at `t`, if it does.
    fn dependency_hold(&self, id: u32, t: i64) -> Option<&'static str> {
        let job = &self.jobs[self.by_id[&id]];
        let dep = job.dependency.as_ref()?;
        let me = Asking {
            id,
            // Tasks are numbered from the array's id, as Slurm's ids are.
            task: job.array.map(|a| id.saturating_sub(a.0)),
            earlier_namesake: false,
        };
        let targets = |named: u32| {
            self.jobs
                .iter()
                .enumerate()
                .filter(move |(_, j)| j.req.id == named || j.array.is_some_and(|a| a.0 == named))
                .map(|(k, j)| self.target(k, j))
        };
        match deps::state(&me, dep, targets, t) {
            DepState::Satisfied => None,
            DepState::Waiting => Some("Dependency"),
            DepState::Never => Some("DependencyNeverSatisfied"),
        }
    }

    /// Job `k` as a dependency on it sees it.
    fn target(&self, k: usize, j: &SimJob) -> Target {
        let o = &self.outcomes[k];
        let outcome = match (o.start, o.end) {
            _ if o.rejected.is_some() => deps::Outcome::Failed,
            (Some(_), Some(_)) if o.killed || o.ended_preempted => deps::Outcome::Failed,
            (Some(_), Some(_)) => deps::Outcome::Completed,
            (Some(_), None) => deps::Outcome::Started,
            _ => deps::Outcome::Pending,
        };
        Target {
            id: j.req.id,
            array: j.array.map(|(a, _)| (a, j.req.id.saturating_sub(a))),
            outcome,
            start_time: o.start,
        }
    }

    /// Count job `i`'s array task and licenses in (`take`) or out.
    fn hold(&mut self, i: usize, take: bool) {
        let job = &self.jobs[i];
        let bump = |n: &mut u32, by: u32| {
            *n = if take {
                n.saturating_add(by)
            } else {
                n.saturating_sub(by)
            }
        };
        if let Some((a, _)) = job.array {
            bump(self.in_use.array_tasks.entry(a).or_default(), 1);
        }
        for (name, n) in &job.licenses {
            bump(self.in_use.licenses.entry(name.clone()).or_default(), *n);
        }
    }

    /// Add (`take`) or remove an allocation, keeping `free_cpus` right.
    fn change(&mut self, alloc: &[NodeAlloc], take: bool) {
        for a in alloc {
            if let Some(n) = self.view.nodes.get(a.node) {
                self.free_cpus -= node_free(n);
            }
            let one = std::slice::from_ref(a);
            if take {
                self.view.consume(one);
            } else {
                self.view.release(one);
            }
            if let Some(n) = self.view.nodes.get(a.node) {
                self.free_cpus += node_free(n);
            }
        }
    }

    fn pass(
        &mut self,
        sched: &mut dyn Scheduler,
        t: i64,
        obs: &mut dyn Observer,
    ) -> Result<(), SimError> {
        let clock = Instant::now();
        // The queue policy (array limits, licenses) first, as the
        // controller's pass does.
        let mut offered: Option<(Vec<JobView>, Vec<u32>)> = None;
        if self.queue_policy {
            let waiting: Vec<Waiting> = self
                .pending
                .iter()
                .map(|v| {
                    let j = &self.jobs[self.by_id[&v.id]];
                    Waiting {
                        id: v.id,
                        priority: v.priority,
                        submit_time: v.submit_time,
                        held: v.hold.is_some(),
                        array: j.array,
                        licenses: j.licenses.clone(),
                    }
                })
                .collect();
            // Dependencies first: a job they hold back takes nothing.
            let deps: Vec<Option<&'static str>> = self
                .pending
                .iter()
                .map(|v| self.dependency_hold(v.id, t))
                .collect();
            let (waiting, kept): (Vec<Waiting>, Vec<usize>) = waiting
                .into_iter()
                .enumerate()
                .filter(|(k, _)| deps[*k].is_none())
                .map(|(k, w)| (w, k))
                .unzip();
            let verdicts = queue::admit(&waiting, &self.in_use, &self.licenses);
            let mut why: Vec<Option<String>> =
                deps.into_iter().map(|d| d.map(str::to_string)).collect();
            for (k, v) in kept.iter().zip(&verdicts) {
                why[*k] = v.map(|h| {
                    match h {
                        Held::ArrayTaskLimit => "JobArrayTaskLimit",
                        Held::Licenses => "Licenses",
                    }
                    .to_string()
                });
            }
            self.limits_hold(&mut why, t);
            let (mut q, mut u) = (Vec::new(), Vec::new());
            for ((v, user), why) in self.pending.iter().zip(&self.pending_users).zip(&why) {
                match why {
                    None => {
                        q.push(v.clone());
                        u.push(*user);
                    }
                    Some(r) if obs.wants_passes() => obs.held(t, v.id, r),
                    Some(_) => {}
                }
            }
            offered = Some((q, u));
        }
        let (queue, users) = match &offered {
            Some((q, u)) => (&q[..], &u[..]),
            None => (&self.pending[..], &self.pending_users[..]),
        };
        let plan = sched.plan_with_users(&self.view, queue, users, t);
        self.sched_time += clock.elapsed();
        self.passes += 1;
        if obs.wants_passes() {
            obs.pass(t, &plan, queue, &self.view);
        }
        // Jobs blocked on resources or behind higher priority ones, highest
        // priority first: they may share cores, else preempt (looked for only
        // where jobs may share or be preempted), as in the controller.
        let mut blocked: Vec<&JobView> = Vec::new();
        if self.preempt.is_some() || self.sharing.iter().any(Option::is_some) {
            let waiting: HashSet<u32> = plan
                .decisions
                .iter()
                .filter_map(|d| match d {
                    Decision::Pending {
                        job,
                        reason: PendingReason::Resources | PendingReason::Priority,
                    } => Some(*job),
                    _ => None,
                })
                .collect();
            blocked = queue.iter().filter(|v| waiting.contains(&v.id)).collect();
            blocked.sort_by_key(|v| (Reverse(v.priority), v.submit_time, v.id));
        }
        let mut blocked: Vec<u32> = blocked.iter().map(|v| v.id).collect();
        let mut started = HashSet::new();
        for d in plan.decisions {
            if let Decision::Start { job, alloc } = d {
                if !started.insert(job) {
                    return Err(SimError::NotPending { job });
                }
                self.start(job, alloc, t, obs)?;
            }
        }
        if !started.is_empty() {
            self.productive_passes += 1;
            let queue = std::mem::take(&mut self.pending);
            let users = std::mem::take(&mut self.pending_users);
            for (j, u) in queue.into_iter().zip(users) {
                if !started.contains(&j.id) {
                    self.pending.push(j);
                    self.pending_users.push(u);
                }
            }
        }
        let shared = self.share_pass(&blocked, t, obs)?;
        blocked.retain(|id| !shared.contains(id));
        if let Some(p) = self.preempt.clone() {
            self.preempt_pass(&blocked, &p, t, obs)?;
        }
        Ok(())
    }

    /// Association and QOS limits over the pending jobs not already kept
    /// back (`why`), highest priority first, as the controller's pass.
    fn limits_hold(&self, why: &mut [Option<String>], t: i64) {
        let Some(a) = &self.acct else {
            return;
        };
        let mut usage = limits::Usage::new(&a.book, std::iter::empty(), t);
        for r in &self.view.running {
            usage.charge(&a.book, &self.limit_job(self.by_id[&r.id], Some(&r.alloc)));
        }
        for (id, s) in &self.suspended {
            let j = limits::Job {
                running_since: None,
                ..self.limit_job(self.by_id[id], Some(&s.alloc))
            };
            usage.charge(&a.book, &j);
        }
        let mut order: Vec<usize> = (0..self.pending.len())
            .filter(|&k| why[k].is_none() && self.pending[k].hold.is_none())
            .collect();
        order.sort_by_key(|&k| {
            let v = &self.pending[k];
            (Reverse(v.priority), v.submit_time, v.id)
        });
        for k in order {
            let i = self.by_id[&self.pending[k].id];
            why[k] = usage.hold(&a.book, &self.limit_job(i, None));
        }
    }

    /// `PreemptType=preempt/partition_prio` or `preempt/qos`: the first
    /// blocked job that jobs it may preempt could make room for displaces
    /// the victims the core chooses, and starts (the simulator has no
    /// cleanup to wait for). One preemptor per pass, as in the controller.
    fn preempt_pass(
        &mut self,
        blocked: &[u32],
        p: &Preemption,
        t: i64,
        obs: &mut dyn Observer,
    ) -> Result<(), SimError> {
        for &id in blocked.iter().take(32) {
            let Some(&i) = self.by_id.get(&id) else {
                continue;
            };
            let jv = self.jobs[i].req.clone();
            let cands: Vec<Candidate> = self
                .view
                .running
                .iter()
                .filter(|r| self.may_preempt(p, i, r))
                .filter_map(|r| {
                    let frees = match self.victim_mode(p, r)? {
                        PreemptMode::Off => return None,
                        PreemptMode::Suspend => cores_of(&r.alloc),
                        PreemptMode::Cancel | PreemptMode::Requeue => r.alloc.clone(),
                    };
                    Some(Candidate {
                        id: r.id,
                        priority: r.priority,
                        start_time: self.by_id.get(&r.id).and_then(|&k| self.outcomes[k].start),
                        frees,
                    })
                })
                .collect();
            if cands.is_empty() {
                continue;
            }
            let Some((victims, alloc)) =
                preempt::victims(&self.view, &jv, cands).filter(|(v, _)| !v.is_empty())
            else {
                continue;
            };
            for &v in &victims {
                self.preempt_one(v, id, p, t, obs)?;
            }
            self.start(id, alloc, t, obs)?;
            if let Some(k) = self.pending.iter().position(|v| v.id == id) {
                self.pending.remove(k);
                self.pending_users.remove(k);
            }
            // What suspended victims gave up beyond what their preemptor
            // took stays theirs (the controller keeps it from other jobs).
            for v in victims {
                self.hold_for(v);
            }
            return Ok(());
        }
        Ok(())
    }

    /// How many jobs may share a core with job `i`, when it may share.
    fn share_factor(&self, i: usize) -> Option<u32> {
        let j = &self.jobs[i];
        if j.req.exclusive {
            return None;
        }
        let (force, n) = (*self.sharing.get(j.req.partition)?)?;
        (force || j.oversubscribe).then_some(n)
    }

    /// Start blocked jobs (highest priority first) that may share cores on
    /// the cores their partition's sharing jobs hold: the same arithmetic
    /// as the controller's (`slurm_plugins::gang::shared_free`).
    fn share_pass(
        &mut self,
        blocked: &[u32],
        t: i64,
        obs: &mut dyn Observer,
    ) -> Result<Vec<u32>, SimError> {
        let mut started = Vec::new();
        let tries: Vec<(u32, usize, u32)> = blocked
            .iter()
            .filter_map(|id| {
                let i = *self.by_id.get(id)?;
                Some((*id, i, self.share_factor(i)?))
            })
            .take(64)
            .collect();
        for (id, i, n) in tries {
            let part = self.jobs[i].req.partition;
            let nodes = self.view.nodes.len();
            let (mut other, mut own) = (vec![0u32; nodes], vec![0u32; nodes]);
            let holders = self
                .view
                .running
                .iter()
                .map(|r| (r.id, &r.alloc))
                .chain(self.suspended.iter().map(|(id, s)| (*id, &s.alloc)));
            for (h, alloc) in holders {
                let k = self.by_id[&h];
                let mine = self.jobs[k].req.partition == part && self.share_factor(k).is_some();
                let into = if mine { &mut own } else { &mut other };
                for a in alloc {
                    into[a.node] += a.cpus;
                }
            }
            let mut view = self.view.clone();
            for (k, nv) in view.nodes.iter_mut().enumerate() {
                nv.alloc_cpus = nv.cpus - shared_free(nv.cpus, other[k], own[k], n);
            }
            if let Ok(alloc) = place(&view, &self.jobs[i].req, false) {
                self.start_checked(id, alloc, t, obs, false)?;
                if let Some(k) = self.pending.iter().position(|v| v.id == id) {
                    self.pending.remove(k);
                    self.pending_users.remove(k);
                }
                started.push(id);
            }
        }
        if !started.is_empty() {
            self.gang_fit(t, false, obs)?;
        }
        Ok(started)
    }

    /// With gang scheduling, choose which jobs sharing cores run so that no
    /// node's cores are used twice (`slurm_plugins::gang::choose`): at a
    /// new time slice (`rotate`) waiting jobs first, longest waiting first;
    /// otherwise running jobs keep their cores and waiting ones fill what
    /// is left.
    fn gang_fit(&mut self, t: i64, rotate: bool, obs: &mut dyn Observer) -> Result<(), SimError> {
        if self.gang_slice.is_none() {
            return Ok(());
        }
        let nodes = self.view.nodes.len();
        let mut other = vec![0u32; nodes];
        let mut jobs: Vec<(bool, i64, u32, Turn)> = Vec::new();
        for r in &self.view.running {
            let k = self.by_id[&r.id];
            if self.share_factor(k).is_none() {
                for a in &r.alloc {
                    other[a.node] += a.cpus;
                }
                continue;
            }
            let runs = !self.paused.contains_key(&r.id);
            let since = self.turn_since.get(&r.id).copied().unwrap_or(0);
            let cores = r.alloc.iter().map(|a| (a.node, a.cpus)).collect();
            jobs.push((runs == rotate, since, r.id, Turn { id: r.id, cores }));
        }
        if jobs.is_empty() {
            return Ok(());
        }
        jobs.sort_by_key(|(order, since, id, _)| (*order, *since, *id));
        let free: Vec<u32> = self
            .view
            .nodes
            .iter()
            .zip(&other)
            .map(|(n, o)| n.cpus.saturating_sub(*o))
            .collect();
        let turns: Vec<Turn> = jobs.into_iter().map(|(_, _, _, turn)| turn).collect();
        let chosen: HashSet<u32> = choose(&free, &turns).into_iter().collect();
        // Stop first, then let in (as the controller does).
        let (stop, go): (Vec<u32>, Vec<u32>) = turns
            .iter()
            .map(|turn| turn.id)
            .filter(|id| self.paused.contains_key(id) == chosen.contains(id))
            .partition(|id| !self.paused.contains_key(id));
        for id in stop {
            self.pause(id, t, obs)?;
        }
        for id in go {
            self.unpause(id, t, obs)?;
        }
        Ok(())
    }

    /// Job `id` (sharing cores) waits for its turn: its clock stops, its
    /// cores stay held.
    fn pause(&mut self, id: u32, t: i64, obs: &mut dyn Observer) -> Result<(), SimError> {
        let (i, pos) = (self.by_id[&id], self.running_pos[&id]);
        self.runs[i] += 1;
        let limit_left = self.view.running[pos].end.map(|e| e - t);
        self.paused.insert(
            id,
            Paused {
                since: t,
                left: self.end_at[i] - t,
                limit_left,
            },
        );
        self.turn_since.insert(id, t);
        obs.gang(t, &self.jobs[i], false);
        self.log_line(format_args!("{t} gang-suspend {id}"))
    }

    /// Job `id` takes its gang turn: its clock goes on.
    fn unpause(&mut self, id: u32, t: i64, obs: &mut dyn Observer) -> Result<(), SimError> {
        let Some(p) = self.paused.remove(&id) else {
            return Ok(());
        };
        let (i, pos) = (self.by_id[&id], self.running_pos[&id]);
        self.outcomes[i].suspended += t - p.since;
        self.end_at[i] = t + p.left;
        self.ends.push(Reverse((t + p.left, id, i, self.runs[i])));
        self.view.running[pos].end = p.limit_left.map(|l| t + l);
        self.turn_since.insert(id, t);
        obs.gang(t, &self.jobs[i], true);
        self.log_line(format_args!("{t} gang-resume {id}"))
    }

    /// One line of the decision log (and the hash).
    fn log_line(&mut self, line: std::fmt::Arguments) -> Result<(), SimError> {
        let line = format!("{line}\n");
        self.hasher.update(line.as_bytes());
        if let Some(l) = self.log.as_mut() {
            l.write_all(line.as_bytes())?;
        }
        Ok(())
    }

    /// Whether job `i` may preempt running job `r`.
    fn may_preempt(&self, p: &Preemption, i: usize, r: &RunningJob) -> bool {
        match p.kind {
            PreemptKind::PartitionTier => {
                let tier = |k: usize| self.view.partitions.get(k).map_or(0, |p| p.priority_tier);
                tier(r.partition) < tier(self.jobs[i].req.partition)
            }
            PreemptKind::Qos => {
                let (Some(a), Some(&k)) = (&self.acct, self.by_id.get(&r.id)) else {
                    return false;
                };
                a.qos
                    .get(&self.who[i].2)
                    .is_some_and(|q| q.preempt.contains(&self.who[k].2))
            }
        }
    }

    /// How running job `r` goes when preempted: its QOS's mode, else its
    /// partition's.
    fn victim_mode(&self, p: &Preemption, r: &RunningJob) -> Option<PreemptMode> {
        let qos = self.acct.as_ref().and_then(|a| {
            let k = *self.by_id.get(&r.id)?;
            a.qos.get(&self.who[k].2)?.mode
        });
        qos.or_else(|| p.modes.get(r.partition).copied())
    }

    /// Take running job `victim` off the cluster for job `by`: ended, put
    /// back in the queue, or suspended (its memory kept).
    fn preempt_one(
        &mut self,
        victim: u32,
        by: u32,
        p: &Preemption,
        t: i64,
        obs: &mut dyn Observer,
    ) -> Result<(), SimError> {
        let (Some(&i), Some(&pos)) = (self.by_id.get(&victim), self.running_pos.get(&victim))
        else {
            return Ok(());
        };
        let how = self
            .victim_mode(p, &self.view.running[pos])
            .unwrap_or(PreemptMode::Off);
        self.running_pos.remove(&victim);
        let r = self.view.running.swap_remove(pos);
        if let Some(moved) = self.view.running.get(pos) {
            self.running_pos.insert(moved.id, pos);
        }
        // Its end event is now stale (or it was waiting for its gang turn).
        self.runs[i] += 1;
        let (left, limit_left) = match self.paused.remove(&victim) {
            Some(p) => {
                self.outcomes[i].suspended += t - p.since;
                (p.left, p.limit_left)
            }
            None => (self.end_at[i] - t, r.end.map(|e| e - t)),
        };
        self.turn_since.remove(&victim);
        let line = format!("{t} preempt {victim} {by}\n");
        self.hasher.update(line.as_bytes());
        if let Some(l) = self.log.as_mut() {
            l.write_all(line.as_bytes())?;
        }
        obs.preempt(t, &self.jobs[i], by, how);
        self.outcomes[i].preempted += 1;
        if how == PreemptMode::Suspend {
            // Licenses and array slots stay with it, as its memory does.
            self.change(&cores_of(&r.alloc), false);
            self.suspended.insert(
                victim,
                Suspension {
                    by,
                    since: t,
                    left,
                    limit_left,
                    alloc: r.alloc,
                    held: Vec::new(),
                    priority: r.priority,
                    partition: r.partition,
                },
            );
            return Ok(());
        }
        self.change(&r.alloc, false);
        self.hold(i, false);
        let o = &mut self.outcomes[i];
        if how == PreemptMode::Requeue {
            o.start = None;
            o.cpus = 0;
            o.killed = false;
            o.suspended = 0;
            self.pending.push(self.jobs[i].req.clone());
            self.pending_users.push(self.jobs[i].user);
        } else {
            o.end = Some(t);
            o.ended_preempted = true;
        }
        Ok(())
    }

    /// Keep for suspended job `id` the cores it gave up that are still
    /// free (its preemptor took the rest).
    fn hold_for(&mut self, id: u32) {
        let Some(s) = self.suspended.get(&id) else {
            return;
        };
        let held: Vec<NodeAlloc> = cores_of(&s.alloc)
            .into_iter()
            .filter_map(|mut a| {
                let n = self.view.nodes.get(a.node)?;
                a.cpus = a.cpus.min(n.free_cpus());
                a.exclusive = false;
                (a.cpus > 0).then_some(a)
            })
            .collect();
        self.change(&held, true);
        if let Some(s) = self.suspended.get_mut(&id) {
            s.held = held;
        }
    }

    /// A suspended job's allocation among the running jobs again, its limit
    /// counted on from `t`.
    fn back_in_view(&mut self, id: u32, s: Suspension, t: i64) {
        self.running_pos.insert(id, self.view.running.len());
        self.view.running.push(RunningJob {
            id,
            end: s.limit_left.map(|l| t + l),
            alloc: s.alloc,
            priority: s.priority,
            partition: s.partition,
        });
    }

    /// Let jobs suspended by preemption go on once their preemptor has
    /// gone and their cores are free, highest priority first (before a
    /// pass, so pending jobs do not take those cores first).
    fn resume(&mut self, t: i64, obs: &mut dyn Observer) -> Result<(), SimError> {
        let mut ready: Vec<(u32, u32, i64)> = self
            .suspended
            .iter()
            .filter(|(_, s)| !self.running_pos.contains_key(&s.by))
            .map(|(id, s)| (*id, s.priority, s.since))
            .collect();
        ready.sort_by_key(|&(id, prio, since)| (Reverse(prio), since, id));
        for (id, _, _) in ready {
            let Some(s) = self.suspended.remove(&id) else {
                continue;
            };
            self.change(&s.held, false);
            let cores = cores_of(&s.alloc);
            let i = self.by_id[&id];
            if self.gang_slice.is_some() && self.share_factor(i).is_some() {
                // It takes gang turns again, from the back of the line.
                self.change(&cores, true);
                self.outcomes[i].suspended += t - s.since;
                self.paused.insert(
                    id,
                    Paused {
                        since: t,
                        left: s.left,
                        limit_left: s.limit_left,
                    },
                );
                self.turn_since.insert(id, t);
                self.back_in_view(id, s, t);
                continue;
            }
            let fits = cores.iter().all(|a| {
                self.view.nodes.get(a.node).is_some_and(|n| {
                    n.available
                        && !n.exclusive_in_use
                        && a.cpus <= n.free_cpus()
                        && (!a.exclusive || n.alloc_cpus == 0)
                })
            });
            if !fits {
                self.suspended.insert(id, s);
                self.hold_for(id);
                continue;
            }
            self.change(&cores, true);
            self.outcomes[i].suspended += t - s.since;
            self.end_at[i] = t + s.left;
            self.ends.push(Reverse((t + s.left, id, i, self.runs[i])));
            self.back_in_view(id, s, t);
            obs.resume(t, &self.jobs[i]);
            let line = format!("{t} resume {id}\n");
            self.hasher.update(line.as_bytes());
            if let Some(l) = self.log.as_mut() {
                l.write_all(line.as_bytes())?;
            }
        }
        Ok(())
    }

    fn start(
        &mut self,
        id: u32,
        alloc: Vec<NodeAlloc>,
        t: i64,
        obs: &mut dyn Observer,
    ) -> Result<(), SimError> {
        self.start_checked(id, alloc, t, obs, true)
    }

    /// Start job `id` on `alloc`; `free_cores`: its cores must be free (a
    /// job sharing cores is checked against its partition's sharing
    /// instead, by the share pass).
    fn start_checked(
        &mut self,
        id: u32,
        alloc: Vec<NodeAlloc>,
        t: i64,
        obs: &mut dyn Observer,
        free_cores: bool,
    ) -> Result<(), SimError> {
        let i = match self.by_id.get(&id) {
            Some(&i)
                if i < self.next_sub
                    && self.outcomes[i].start.is_none()
                    && self.outcomes[i].rejected.is_none() =>
            {
                i
            }
            _ => return Err(SimError::NotPending { job: id }),
        };
        // The core promises never to give a CPU twice; check it anyway, so a
        // broken policy fails the replay instead of skewing its figures.
        for a in &alloc {
            let Some(n) = self.view.nodes.get(a.node) else {
                return Err(SimError::NoSuchNode {
                    job: id,
                    node: a.node,
                });
            };
            if !n.available
                || n.exclusive_in_use
                || (a.exclusive && !n.is_empty())
                || (free_cores && a.cpus > n.free_cpus())
                || a.mem > n.free_mem()
            {
                return Err(SimError::Overcommit {
                    job: id,
                    node: n.name.clone(),
                });
            }
        }
        self.change(&alloc, true);
        self.hold(i, true);
        let job = &self.jobs[i];
        let end = t.saturating_add(job.duration());
        let o = &mut self.outcomes[i];
        o.start = Some(t);
        o.cpus = alloc.iter().map(|a| u64::from(a.cpus)).sum();
        o.killed = job.killed();

        let names: Vec<&str> = alloc
            .iter()
            .map(|a| self.view.nodes[a.node].name.as_str())
            .collect();
        let line = format!(
            "{t} {id} {}\n",
            slurm_common::hostlist::compress_str(&names)
        );
        self.hasher.update(line.as_bytes());
        if let Some(l) = self.log.as_mut() {
            l.write_all(line.as_bytes())?;
        }
        obs.start(t, job, &alloc, &self.view);

        self.running_pos.insert(id, self.view.running.len());
        self.view.running.push(RunningJob {
            id,
            end: job
                .req
                .time_limit
                .filter(|m| *m > 0)
                .map(|m| t.saturating_add(i64::from(m) * 60)),
            alloc,
            priority: job.req.priority,
            partition: job.req.partition,
        });
        self.ends.push(Reverse((end, id, i, self.runs[i])));
        self.end_at[i] = end;
        if self.gang_slice.is_some() && self.share_factor(i).is_some() {
            self.turn_since.insert(id, t);
        }
        Ok(())
    }
}

/// `t` rounded up to a multiple of `s` (s > 0).
fn round_up(t: i64, s: i64) -> i64 {
    match t.rem_euclid(s) {
        0 => t,
        r => t.saturating_add(s - r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_plugins::sched::Builtin;

    fn job(id: u32, submit: i64, run: i64, tasks: u32, limit: u32) -> SimJob {
        let mut j = SimJob::new(id, submit, run);
        j.req.num_tasks = tasks;
        j.req.max_nodes = tasks;
        j.req.time_limit = Some(limit);
        j
    }

    fn replay(c: &Cluster, jobs: Vec<SimJob>, interval: Option<i64>) -> Outcome {
        let mut s = c.scheduler().unwrap().scheduler;
        run(c, jobs, s.as_mut(), Options { interval }, &mut Quiet, None).unwrap()
    }

    /// One pass as the scheduler saw it: now, running (id, end), queue ids.
    type Seen = (i64, Vec<(u32, Option<i64>)>, Vec<u32>);

    /// Delegates to sched/builtin and remembers what it was shown.
    struct Spy {
        seen: Vec<Seen>,
    }
    impl Scheduler for Spy {
        fn name(&self) -> &'static str {
            "spy"
        }
        fn schedule(&mut self, view: &ClusterView, queue: &[JobView], now: i64) -> Vec<Decision> {
            let mut running: Vec<_> = view.running.iter().map(|r| (r.id, r.end)).collect();
            running.sort();
            self.seen
                .push((now, running, queue.iter().map(|j| j.id).collect()));
            Builtin.schedule(view, queue, now)
        }
    }

    #[test]
    fn the_view_holds_running_jobs_until_their_limit() {
        let c = Cluster::flat(1, 2, 0).unwrap();
        let jobs = vec![
            job(1, 0, 30, 1, 2),
            job(2, 10, 30, 2, 1),
            job(3, 20, 5, 1, 1),
        ];
        let mut spy = Spy { seen: vec![] };
        let mut log = Vec::new();
        let o = run(
            &c,
            jobs,
            &mut spy,
            Options::default(),
            &mut Quiet,
            Some(&mut log),
        )
        .unwrap();
        assert_eq!(
            spy.seen,
            vec![
                (0, vec![], vec![1]),
                (10, vec![(1, Some(120))], vec![2]),
                (20, vec![(1, Some(120))], vec![2, 3]),
                (30, vec![], vec![2, 3]),
                (60, vec![], vec![3]),
            ]
        );
        assert_eq!(
            String::from_utf8(log).unwrap(),
            "0 1 n1\n30 2 n1\n60 3 n1\n"
        );
        assert_eq!(
            o.passes, 5,
            "the pass at 60 starts job 3; at 65 the queue is empty"
        );
        assert_eq!(o.productive_passes, 3);
        let starts: Vec<_> = o.jobs.iter().map(|j| (j.start, j.end)).collect();
        assert_eq!(
            starts,
            vec![
                (Some(0), Some(30)),
                (Some(30), Some(60)),
                (Some(60), Some(65))
            ]
        );
    }

    #[test]
    fn same_input_same_hash_and_ties_by_id() {
        let c = Cluster::flat(2, 1, 0).unwrap();
        let jobs = || {
            vec![
                job(3, 0, 10, 1, 1),
                job(1, 0, 10, 1, 1),
                job(2, 0, 10, 1, 1),
            ]
        };
        let a = replay(&c, jobs(), None);
        let b = replay(&c, jobs(), None);
        assert_eq!(
            a,
            Outcome {
                sched_time: a.sched_time,
                ..b
            }
        );
        let started: Vec<_> = a.jobs.iter().map(|j| (j.id, j.start)).collect();
        assert_eq!(started, vec![(1, Some(0)), (2, Some(0)), (3, Some(10))]);
        assert_eq!(a.hash.len(), 64);
    }

    #[test]
    fn zero_length_jobs_and_periodic_passes() {
        let c = Cluster::flat(1, 1, 0).unwrap();
        let jobs = vec![job(1, 0, 0, 1, 1), job(2, 0, 0, 1, 1), job(3, 5, 0, 1, 1)];
        let o = replay(&c, jobs.clone(), None);
        let s: Vec<_> = o.jobs.iter().map(|j| j.start).collect();
        assert_eq!(s, vec![Some(0), Some(0), Some(5)]);
        // One CPU: one start per tick (a zero-length job holds it for the pass).
        let o = replay(&c, jobs, Some(60));
        let s: Vec<_> = o.jobs.iter().map(|j| j.start).collect();
        assert_eq!(s, vec![Some(0), Some(60), Some(120)]);
    }

    #[test]
    fn nothing_usable_ends_instead_of_ticking_forever() {
        let conf = slurm_common::conf::SlurmConf::parse_str(
            "NodeName=n1 CPUs=1 State=DOWN\nPartitionName=p Nodes=n1\n",
            std::path::Path::new("x"),
        )
        .unwrap();
        let c = Cluster::from_conf(&conf).unwrap();
        for interval in [None, Some(30)] {
            let o = replay(&c, vec![job(1, 0, 10, 1, 1)], interval);
            assert_eq!(o.jobs[0].start, None);
            assert_eq!(o.passes, 0);
        }
    }

    /// Starts every pending job on node 0, whether or not it fits.
    struct Reckless(u32);
    impl Scheduler for Reckless {
        fn name(&self) -> &'static str {
            "reckless"
        }
        fn schedule(&mut self, _: &ClusterView, queue: &[JobView], _: i64) -> Vec<Decision> {
            queue
                .iter()
                .map(|j| Decision::Start {
                    job: j.id + self.0,
                    alloc: vec![NodeAlloc {
                        node: 0,
                        cpus: 1,
                        mem: 0,
                        tasks: 1,
                        exclusive: false,
                        gres: Default::default(),
                    }],
                })
                .collect()
        }
    }

    #[test]
    fn a_policy_that_breaks_the_rules_fails_the_replay() {
        let c = Cluster::flat(1, 1, 0).unwrap();
        let jobs = vec![job(1, 0, 10, 1, 1), job(2, 0, 10, 1, 1)];
        let e = run(
            &c,
            jobs.clone(),
            &mut Reckless(0),
            Options::default(),
            &mut Quiet,
            None,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the scheduler gave job 2 more than node n1 has free"
        );
        let e = run(
            &c,
            jobs.clone(),
            &mut Reckless(1),
            Options::default(),
            &mut Quiet,
            None,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the scheduler started job 3, which is not pending"
        );
        let e = run(
            &c,
            jobs,
            &mut Reckless(7),
            Options::default(),
            &mut Quiet,
            None,
        )
        .unwrap_err();
        assert!(matches!(e, SimError::NotPending { job: 8 }), "{e}");
        let twice = vec![job(1, 0, 10, 1, 1), job(1, 5, 10, 1, 1)];
        let e = run(
            &c,
            twice,
            &mut Builtin,
            Options::default(),
            &mut Quiet,
            None,
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "job 1 is submitted twice");
    }

    #[test]
    fn killed_jobs_end_at_their_limit() {
        let c = Cluster::flat(1, 1, 0).unwrap();
        let o = replay(&c, vec![job(1, 0, 500, 1, 2)], None);
        assert_eq!((o.jobs[0].end, o.jobs[0].killed), (Some(120), true));
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    struct Spec {
        submit: i64,
        run: i64,
        tasks: u32,
        nodes: Option<u32>,
        limit: u32,
        exclusive: bool,
    }

    fn spec() -> impl Strategy<Value = Spec> {
        (
            0i64..300,
            0i64..400,
            1u32..10,
            proptest::option::of(1u32..4),
            1u32..6,
            any::<bool>(),
        )
            .prop_map(|(submit, run, tasks, nodes, limit, exclusive)| Spec {
                submit,
                run,
                tasks,
                nodes,
                limit,
                exclusive,
            })
    }

    fn jobs(specs: &[Spec]) -> Vec<SimJob> {
        specs
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut j = SimJob::new(i as u32 + 1, s.submit, s.run);
                j.req.num_tasks = s.tasks;
                let (lo, hi) = s.nodes.map_or((1, s.tasks), |n| (n, n));
                j.req.min_nodes = lo;
                j.req.max_nodes = hi;
                j.req.time_limit = Some(s.limit);
                j.req.exclusive = s.exclusive;
                j
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever the workload and policy: the replay never overcommits
        /// (the engine checks every start), every accepted job starts and
        /// ends after its duration, and the log is reproducible. Under
        /// sched/builtin, jobs also start in priority order.
        #[test]
        fn replays_are_sound(
            specs in proptest::collection::vec(spec(), 1..25),
            nodes in 1usize..5,
            cpus in 1u32..5,
            builtin in any::<bool>(),
            interval in proptest::option::of(1i64..120),
        ) {
            let mut c = Cluster::flat(nodes, cpus, 0).unwrap();
            if builtin {
                c.scheduler_type = "sched/builtin".into();
            }
            let once = || {
                let mut s = c.scheduler().unwrap().scheduler;
                run(&c, jobs(&specs), s.as_mut(), Options { interval }, &mut Quiet, None)
            };
            let o = once().unwrap();
            prop_assert_eq!(&once().unwrap().hash, &o.hash);
            let by_id: HashMap<u32, SimJob> = jobs(&specs).into_iter().map(|j| (j.req.id, j)).collect();
            for j in &o.jobs {
                if j.rejected.is_some() {
                    prop_assert!(j.start.is_none());
                    continue;
                }
                let (Some(s), Some(e)) = (j.start, j.end) else {
                    return Err(TestCaseError::fail(format!("job {} never ran", j.id)));
                };
                prop_assert!(s >= j.submit);
                prop_assert_eq!(e - s, by_id[&j.id].duration());
                if let Some(i) = interval {
                    prop_assert_eq!(s.rem_euclid(i), 0);
                }
            }
            if builtin {
                let started: Vec<i64> = o.jobs.iter().filter_map(|j| j.start).collect();
                prop_assert!(started.windows(2).all(|w| w[0] <= w[1]), "{:?}", started);
            }
        }

        /// With cores shared two to a core (`OverSubscribe=FORCE:2`): a node
        /// never has more than twice its cores in use, and with gang turns
        /// never more than its cores running at once; every job runs for
        /// exactly its duration, less the time it waited for its turn.
        #[test]
        fn shared_cores_and_gang_turns_are_sound(
            specs in proptest::collection::vec(spec(), 1..20),
            nodes in 1usize..4,
            cpus in 1u32..5,
            slice in proptest::option::of(1i64..60),
        ) {
            let mut c = Cluster::flat(nodes, cpus, 0).unwrap();
            c.sharing = vec![Some((true, 2))];
            c.gang_slice = slice;
            let mut w = Watch { cpus, gang: slice.is_some(), ..Watch::default() };
            let mut s = c.scheduler().unwrap().scheduler;
            let o = run(&c, jobs(&specs), s.as_mut(), Options::default(), &mut w, None).unwrap();
            prop_assert!(w.broken.is_none(), "{:?}", w.broken);
            let by_id: HashMap<u32, SimJob> = jobs(&specs).into_iter().map(|j| (j.req.id, j)).collect();
            for j in o.jobs.iter().filter(|j| j.rejected.is_none()) {
                let (Some(s), Some(e)) = (j.start, j.end) else {
                    return Err(TestCaseError::fail(format!("job {} never ran", j.id)));
                };
                prop_assert_eq!(e - s - j.suspended, by_id[&j.id].duration(), "job {}", j.id);
                if slice.is_none() {
                    prop_assert_eq!(j.suspended, 0);
                }
            }
        }
    }

    /// Cores in use and running per node, as the observer sees starts,
    /// ends and gang turns; the first rule broken.
    #[derive(Default)]
    struct Watch {
        cpus: u32,
        gang: bool,
        alloc: HashMap<u32, Vec<NodeAlloc>>,
        held: HashMap<usize, u32>,
        running: HashMap<usize, u32>,
        waiting: HashSet<u32>,
        broken: Option<String>,
    }

    impl Watch {
        fn count(&mut self, t: i64, id: u32, held: i64, running: i64) {
            for a in self.alloc.get(&id).cloned().unwrap_or_default() {
                let h = self.held.entry(a.node).or_default();
                *h = (i64::from(*h) + held * i64::from(a.cpus)) as u32;
                let h = *h;
                let r = self.running.entry(a.node).or_default();
                *r = (i64::from(*r) + running * i64::from(a.cpus)) as u32;
                let r = *r;
                if self.broken.is_none() && h > 2 * self.cpus {
                    self.broken = Some(format!("t={t}: node {} holds {h} cores", a.node));
                }
                if self.broken.is_none() && self.gang && running > 0 && r > self.cpus {
                    self.broken = Some(format!("t={t}: node {} runs {r} cores", a.node));
                }
            }
        }
    }

    impl Observer for Watch {
        fn start(&mut self, t: i64, job: &SimJob, alloc: &[NodeAlloc], _: &ClusterView) {
            self.alloc.insert(job.req.id, alloc.to_vec());
            // (A job started on shared cores may be stopped at once: the
            // running count is checked when turns settle.)
            self.count(t, job.req.id, 1, 0);
            self.running_in(job.req.id, 1);
        }
        fn end(&mut self, t: i64, job: &SimJob, _: bool) {
            self.count(t, job.req.id, -1, 0);
            self.running_in(job.req.id, -1);
        }
        fn gang(&mut self, t: i64, job: &SimJob, runs: bool) {
            if runs {
                self.waiting.remove(&job.req.id);
                self.count(t, job.req.id, 0, 1);
            } else {
                self.waiting.insert(job.req.id);
                self.count(t, job.req.id, 0, -1);
            }
        }
    }

    impl Watch {
        fn running_in(&mut self, id: u32, by: i64) {
            for a in self.alloc.get(&id).cloned().unwrap_or_default() {
                let r = self.running.entry(a.node).or_default();
                *r = (i64::from(*r) + by * i64::from(a.cpus)) as u32;
            }
        }
    }
}
