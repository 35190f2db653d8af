//! `priority/multifactor`: a job's priority is the weighted sum of factors
//! in [0, 1] (age, association, fair share, job size, partition, QOS and
//! one per weighted TRES), plus the site factor, minus the nice value.
//! With a `NO_NORMAL_*` flag the matching factor is the raw value instead.

use super::params::PriorityParams;
use crate::fairshare::{FairShareReport, FairShareTree};

/// Slurm's `INFINITE` in seconds: the age normaliser when `PriorityMaxAge`
/// is unlimited (the factor then grows without ever reaching 1).
const INFINITE_AGE: f64 = u32::MAX as f64;

/// The highest priority a job can get (`u32::MAX` is Slurm's `INFINITE`).
pub const MAX_PRIORITY: u32 = u32::MAX - 1;

/// What one job brings to the calculation (for one of its partitions).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriorityInput {
    pub job_id: u32,
    /// For `sprio`'s PARTITION column.
    pub partition: String,
    pub submit_time: i64,
    /// When the job became eligible (its accrue time); `None` while it is
    /// not (held, dependent, begin time in the future).
    pub eligible_time: Option<i64>,
    /// Held jobs get priority 0.
    pub held: bool,
    pub nice: i32,
    /// Set by an administrator or a site plugin.
    pub site_factor: i64,
    /// Minimum nodes requested.
    pub req_nodes: u32,
    pub req_cpus: u32,
    /// MiB for the whole job.
    pub req_mem_mb: u64,
    /// Minutes; `None` = unlimited (for `SMALL_RELATIVE_TO_TIME`).
    pub time_limit: Option<u32>,
    /// Other requested TRES (`gres/gpu`, `license/x`, ...); `cpu`, `mem`
    /// and `node` come from the fields above unless given here.
    pub tres: Vec<(String, f64)>,
    /// The partition's `PriorityJobFactor`.
    pub partition_priority_job_factor: u32,
    pub qos_priority: u32,
    pub assoc_priority: u32,
    /// The user association in the fair-share tree, `root/acct/.../user`.
    pub assoc_path: Option<String>,
    /// The priority computed last time (for `INCR_ONLY`).
    pub prev_priority: Option<u32>,
}

/// What the factors are normalised against: the totals of the job's
/// partition (or cluster) and the maxima over partitions, QOS and
/// associations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriorityContext {
    pub total_nodes: u32,
    pub total_cpus: u32,
    /// MiB.
    pub total_mem_mb: u64,
    /// Totals of other TRES (`gres/gpu`, ...).
    pub tres_totals: Vec<(String, f64)>,
    pub max_partition_job_factor: u32,
    pub max_qos_priority: u32,
    pub max_assoc_priority: u32,
}

/// The factors before weighting (`sprio -n`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NormFactors {
    pub age: f64,
    pub assoc: f64,
    pub fairshare: f64,
    pub job_size: f64,
    pub partition: f64,
    pub qos: f64,
    /// One per weighted TRES, in `PriorityWeightTRES` order.
    pub tres: Vec<(String, f64)>,
}

/// A job's priority and its weighted parts, as `sprio` shows them:
/// JOBID PARTITION PRIORITY SITE AGE ASSOC FAIRSHARE JOBSIZE PARTITION QOS
/// NICE TRES.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriorityFactors {
    pub job_id: u32,
    pub partition_name: String,
    pub priority: u32,
    pub site: i64,
    pub age: f64,
    pub assoc: f64,
    pub fairshare: f64,
    pub job_size: f64,
    pub partition: f64,
    pub qos: f64,
    /// The nice value (subtracted).
    pub nice: i64,
    /// Weighted TRES parts.
    pub tres: Vec<(String, f64)>,
    pub norm: NormFactors,
}

impl PriorityFactors {
    /// The sum before clamping and truncation.
    pub fn total(&self) -> f64 {
        self.site as f64
            + self.age
            + self.assoc
            + self.fairshare
            + self.job_size
            + self.partition
            + self.qos
            + self.tres.iter().map(|(_, v)| v).sum::<f64>()
            - self.nice as f64
    }
}

fn clamp01(x: f64) -> f64 {
    if x.is_nan() {
        0.0
    } else {
        x.clamp(0.0, 1.0)
    }
}

/// `value / max` in [0, 1] (0 when max is 0), or the raw value when not
/// normalised.
fn ratio(value: f64, max: f64, normalise: bool) -> f64 {
    if !normalise {
        value
    } else if max > 0.0 {
        clamp01(value / max)
    } else {
        0.0
    }
}

/// Age: time eligible over `PriorityMaxAge`, at most 1. With
/// `ACCRUE_ALWAYS` age counts from submission even when not eligible.
/// `PriorityMaxAge=0` gives every accruing job 1.
pub fn age_factor(p: &PriorityParams, job: &PriorityInput, now: i64) -> f64 {
    let since = match job.eligible_time {
        Some(t) if p.flags.accrue_always => Some(t.min(job.submit_time)),
        Some(t) => Some(t),
        None if p.flags.accrue_always => Some(job.submit_time),
        None => None,
    };
    let Some(since) = since else { return 0.0 };
    let age = now.saturating_sub(since).max(0) as f64;
    match p.max_age {
        Some(0) => 1.0,
        Some(max) => clamp01(age / max as f64),
        None => clamp01(age / INFINITE_AGE),
    }
}

/// Job size. By default the larger of the job's share of the nodes and of
/// the CPUs (a whole-cluster job gets 1). `PriorityFavorSmall=YES` turns it
/// round: a one-node, one-CPU job gets 1 and a whole-cluster job
/// `1/total`. `SMALL_RELATIVE_TO_TIME`: CPUs per minute of time limit over
/// the cluster's CPUs (a whole-cluster one-minute job gets 1; unlimited
/// time counts as 0), inverted under `PriorityFavorSmall`.
pub fn job_size_factor(p: &PriorityParams, job: &PriorityInput, ctx: &PriorityContext) -> f64 {
    let (n, c) = (f64::from(job.req_nodes), f64::from(job.req_cpus));
    let (tn, tc) = (f64::from(ctx.total_nodes), f64::from(ctx.total_cpus));
    if p.flags.small_relative_to_time {
        let s = match job.time_limit {
            Some(t) if t > 0 && tc > 0.0 => clamp01(c / f64::from(t) / tc),
            _ => 0.0,
        };
        return if p.favor_small { 1.0 - s } else { s };
    }
    if p.favor_small {
        let small = |req: f64, total: f64| {
            if total > 0.0 {
                clamp01((total - req.max(1.0) + 1.0) / total)
            } else {
                0.0
            }
        };
        let (ns, cs) = (small(n, tn), small(c, tc));
        match (tn > 0.0, tc > 0.0) {
            (true, true) => ns.min(cs),
            (true, false) => ns,
            (false, true) => cs,
            (false, false) => 0.0,
        }
    } else {
        let nf = if tn > 0.0 { clamp01(n / tn) } else { 0.0 };
        let cf = if tc > 0.0 { clamp01(c / tc) } else { 0.0 };
        nf.max(cf)
    }
}

fn lookup(list: &[(String, f64)], name: &str) -> Option<f64> {
    list.iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| *v)
}

fn requested(job: &PriorityInput, name: &str) -> f64 {
    if let Some(v) = lookup(&job.tres, name) {
        return v;
    }
    match name {
        "cpu" => f64::from(job.req_cpus),
        "mem" => job.req_mem_mb as f64,
        "node" => f64::from(job.req_nodes),
        _ => 0.0,
    }
}

fn total_of(ctx: &PriorityContext, name: &str) -> f64 {
    if let Some(v) = lookup(&ctx.tres_totals, name) {
        return v;
    }
    match name {
        "cpu" => f64::from(ctx.total_cpus),
        "mem" => ctx.total_mem_mb as f64,
        "node" => f64::from(ctx.total_nodes),
        _ => 0.0,
    }
}

/// Compute one job's priority and its parts. `fairshare` is the latest
/// [`FairShareTree::compute`] result; a job without a known association
/// gets a fair-share factor of 0.
pub fn multifactor(
    p: &PriorityParams,
    job: &PriorityInput,
    ctx: &PriorityContext,
    fairshare: Option<&FairShareReport>,
    now: i64,
) -> PriorityFactors {
    let fs = match (fairshare, &job.assoc_path) {
        (Some(r), Some(path)) => r.factor_for_path(path).unwrap_or(0.0),
        _ => 0.0,
    };
    multifactor_with_fairshare(p, job, ctx, fs, now)
}

/// Like [`multifactor`], with the job's fair-share factor given directly.
pub fn multifactor_with_fairshare(
    p: &PriorityParams,
    job: &PriorityInput,
    ctx: &PriorityContext,
    fairshare: f64,
    now: i64,
) -> PriorityFactors {
    let f = &p.flags;
    let fs = clamp01(fairshare);
    let tres: Vec<(String, f64)> = p
        .weight_tres
        .iter()
        .map(|(name, _)| {
            let v = ratio(requested(job, name), total_of(ctx, name), !f.no_normal_tres);
            (name.clone(), v)
        })
        .collect();
    let norm = NormFactors {
        age: age_factor(p, job, now),
        assoc: ratio(
            f64::from(job.assoc_priority),
            f64::from(ctx.max_assoc_priority),
            !f.no_normal_assoc,
        ),
        fairshare: fs,
        job_size: job_size_factor(p, job, ctx),
        partition: ratio(
            f64::from(job.partition_priority_job_factor),
            f64::from(ctx.max_partition_job_factor),
            !f.no_normal_part,
        ),
        qos: ratio(
            f64::from(job.qos_priority),
            f64::from(ctx.max_qos_priority),
            !f.no_normal_qos,
        ),
        tres,
    };
    let w = |weight: u32, factor: f64| f64::from(weight) * factor;
    let mut out = PriorityFactors {
        job_id: job.job_id,
        partition_name: job.partition.clone(),
        priority: 0,
        site: job.site_factor,
        age: w(p.weight_age, norm.age),
        assoc: w(p.weight_assoc, norm.assoc),
        fairshare: w(p.weight_fairshare, norm.fairshare),
        job_size: w(p.weight_job_size, norm.job_size),
        partition: w(p.weight_partition, norm.partition),
        qos: w(p.weight_qos, norm.qos),
        nice: i64::from(job.nice),
        tres: norm
            .tres
            .iter()
            .zip(&p.weight_tres)
            .map(|((n, v), (_, wt))| (n.clone(), wt * v))
            .collect(),
        norm,
    };
    out.priority = if job.held {
        0
    } else {
        let computed = to_priority(out.total());
        match job.prev_priority {
            Some(prev) if f.incr_only && prev > computed => prev.min(MAX_PRIORITY),
            _ => computed,
        }
    };
    out
}

/// Truncate toward zero, as Slurm stores the sum, clamped to
/// `1..=MAX_PRIORITY` (0 is reserved for held jobs).
pub fn to_priority(total: f64) -> u32 {
    if total.is_nan() || total < 1.0 {
        1
    } else if total >= f64::from(MAX_PRIORITY) {
        MAX_PRIORITY
    } else {
        total as u32
    }
}

/// The multifactor plugin's state in the controller: settings, the
/// association tree with its usage, and the fair-share factors of the last
/// calculation (redone every `PriorityCalcPeriod`).
#[derive(Debug, Clone, PartialEq)]
pub struct Multifactor {
    pub params: PriorityParams,
    pub tree: FairShareTree,
    report: FairShareReport,
    last_calc: Option<i64>,
}

impl Multifactor {
    /// With an empty tree; `utc_offset` (seconds east of UTC) places the
    /// daily to yearly usage resets.
    pub fn new(params: PriorityParams, utc_offset: i64) -> Self {
        let tree = FairShareTree::new(params.usage_policy(utc_offset));
        Self::with_tree(params, tree)
    }

    pub fn with_tree(params: PriorityParams, tree: FairShareTree) -> Self {
        let report = tree.compute(params.algorithm(), f64::from(params.dampening));
        Multifactor {
            params,
            tree,
            report,
            last_calc: None,
        }
    }

    /// New settings (`scontrol reconfigure`); the fair share is recomputed.
    pub fn reconfigure(&mut self, params: PriorityParams) {
        let policy = params.usage_policy(self.tree.policy().utc_offset);
        self.tree.set_policy(policy);
        self.params = params;
        self.recompute();
    }

    /// Call on every scheduler wake-up: once `PriorityCalcPeriod` has
    /// passed since the last calculation, reset usage if due, decay it to
    /// `now` and recompute the fair share. Returns whether it did.
    pub fn tick(&mut self, now: i64) -> bool {
        let due = match self.last_calc {
            None => true,
            Some(t) => now.saturating_sub(t) >= self.params.calc_period as i64,
        };
        if due {
            self.tree.tick(now);
            self.recompute();
            self.last_calc = Some(now);
        }
        due
    }

    /// Recompute the fair-share factors from the tree as it is.
    pub fn recompute(&mut self) {
        self.report = self
            .tree
            .compute(self.params.algorithm(), f64::from(self.params.dampening));
    }

    /// The fair share of the last calculation (for `sshare`).
    pub fn report(&self) -> &FairShareReport {
        &self.report
    }

    /// One job's priority against the last fair-share calculation.
    pub fn priority(
        &self,
        job: &PriorityInput,
        ctx: &PriorityContext,
        now: i64,
    ) -> PriorityFactors {
        multifactor(&self.params, job, ctx, Some(&self.report), now)
    }
}
