//! `slurm.conf` settings of `priority/multifactor`, parsed from the
//! configuration's key/value entries (keys case-insensitive).

use crate::fairshare::{Algorithm, UsagePolicy, UsageReset};

/// A `Priority*` setting with a value it cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {key}={value}: expected {expected}")]
pub struct PriorityConfigError {
    pub key: String,
    pub value: String,
    pub expected: &'static str,
}

/// `PriorityFlags`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PriorityFlags {
    /// Age accrues from submission even while held or dependent.
    pub accrue_always: bool,
    /// Recompute running and suspended jobs' priorities too.
    pub calculate_running: bool,
    /// The depth-oblivious fair-share factor (implies `no_fair_tree`).
    pub depth_oblivious: bool,
    /// Classic fair share instead of Fair Tree.
    pub no_fair_tree: bool,
    /// A job's priority never goes down.
    pub incr_only: bool,
    /// Billing is the largest weighted node TRES plus global TRES.
    pub max_tres: bool,
    /// Like `max_tres`, with GRES summed rather than maxed.
    pub max_tres_gres: bool,
    pub no_normal_assoc: bool,
    pub no_normal_part: bool,
    pub no_normal_qos: bool,
    pub no_normal_tres: bool,
    /// Job size is CPUs per minute of time limit over the cluster's CPUs.
    pub small_relative_to_time: bool,
}

impl PriorityFlags {
    /// A comma-separated list (case-insensitive); an unknown flag is an
    /// error naming it.
    pub fn parse(s: &str) -> Result<PriorityFlags, String> {
        let mut f = PriorityFlags::default();
        for flag in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            match flag.to_ascii_uppercase().as_str() {
                "ACCRUE_ALWAYS" => f.accrue_always = true,
                "CALCULATE_RUNNING" => f.calculate_running = true,
                "DEPTH_OBLIVIOUS" => {
                    f.depth_oblivious = true;
                    f.no_fair_tree = true;
                }
                "NO_FAIR_TREE" => f.no_fair_tree = true,
                // The default since 19.05; still accepted.
                "FAIR_TREE" => {}
                "INCR_ONLY" => f.incr_only = true,
                "MAX_TRES" => f.max_tres = true,
                "MAX_TRES_GRES" => f.max_tres_gres = true,
                "NO_NORMAL_ALL" => {
                    f.no_normal_assoc = true;
                    f.no_normal_part = true;
                    f.no_normal_qos = true;
                    f.no_normal_tres = true;
                }
                "NO_NORMAL_ASSOC" => f.no_normal_assoc = true,
                "NO_NORMAL_PART" => f.no_normal_part = true,
                "NO_NORMAL_QOS" => f.no_normal_qos = true,
                "NO_NORMAL_TRES" => f.no_normal_tres = true,
                "SMALL_RELATIVE_TO_TIME" => f.small_relative_to_time = true,
                _ => return Err(flag.to_string()),
            }
        }
        Ok(f)
    }

    /// The fair-share algorithm these flags select.
    pub fn algorithm(&self) -> Algorithm {
        if self.depth_oblivious {
            Algorithm::DepthOblivious
        } else if self.no_fair_tree {
            Algorithm::Classic
        } else {
            Algorithm::FairTree
        }
    }

    /// How usage is billed (`MAX_TRES`, `MAX_TRES_GRES`).
    pub fn billing_mode(&self) -> crate::fairshare::BillingMode {
        use crate::fairshare::BillingMode;
        if self.max_tres_gres {
            BillingMode::MaxTresGres
        } else if self.max_tres {
            BillingMode::MaxTres
        } else {
            BillingMode::Sum
        }
    }
}

/// Everything `priority/multifactor` reads from `slurm.conf`.
#[derive(Debug, Clone, PartialEq)]
pub struct PriorityParams {
    pub weight_age: u32,
    pub weight_assoc: u32,
    pub weight_fairshare: u32,
    pub weight_job_size: u32,
    pub weight_partition: u32,
    pub weight_qos: u32,
    /// `PriorityWeightTRES`: lower-case TRES name (`cpu`, `mem`,
    /// `gres/gpu`, ...) and weight, in configuration order.
    pub weight_tres: Vec<(String, f64)>,
    /// `PriorityMaxAge`, seconds; `None` = `UNLIMITED`.
    pub max_age: Option<u64>,
    pub favor_small: bool,
    /// `PriorityDecayHalfLife`, seconds; 0 = no decay.
    pub decay_half_life: u64,
    pub usage_reset: UsageReset,
    /// `PriorityCalcPeriod`, seconds.
    pub calc_period: u64,
    pub flags: PriorityFlags,
    /// `FairShareDampeningFactor` (classic fair share), at least 1.
    pub dampening: u16,
}

pub const DEFAULT_MAX_AGE: u64 = 7 * 86_400;
pub const DEFAULT_HALF_LIFE: u64 = 7 * 86_400;
pub const DEFAULT_CALC_PERIOD: u64 = 5 * 60;

impl Default for PriorityParams {
    fn default() -> Self {
        PriorityParams {
            weight_age: 0,
            weight_assoc: 0,
            weight_fairshare: 0,
            weight_job_size: 0,
            weight_partition: 0,
            weight_qos: 0,
            weight_tres: Vec::new(),
            max_age: Some(DEFAULT_MAX_AGE),
            favor_small: false,
            decay_half_life: DEFAULT_HALF_LIFE,
            usage_reset: UsageReset::None,
            calc_period: DEFAULT_CALC_PERIOD,
            flags: PriorityFlags::default(),
            dampening: 1,
        }
    }
}

/// A parsed Slurm duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlurmDuration {
    Secs(u64),
    Infinite,
}

/// Slurm's time strings: `min`, `min:sec`, `hr:min:sec`, `days-hr`,
/// `days-hr:min`, `days-hr:min:sec`, and `INFINITE`/`UNLIMITED`. Returns
/// seconds; `None` when malformed or out of range.
pub fn parse_slurm_duration(s: &str) -> Option<SlurmDuration> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("infinite") || t.eq_ignore_ascii_case("unlimited") {
        return Some(SlurmDuration::Infinite);
    }
    let num = |x: &str| -> Option<u64> {
        if x.is_empty() || !x.bytes().all(|b| b.is_ascii_digit()) {
            None
        } else {
            x.parse().ok()
        }
    };
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (Some(num(d)?), r),
        None => (None, t),
    };
    let parts: Vec<&str> = rest.split(':').collect();
    let secs = match (days, parts.as_slice()) {
        (None, [m]) => num(m)?.checked_mul(60)?,
        (None, [m, s]) => num(m)?.checked_mul(60)?.checked_add(num(s)?)?,
        (_, [h, m, s]) => num(h)?
            .checked_mul(3600)?
            .checked_add(num(m)?.checked_mul(60)?)?
            .checked_add(num(s)?)?,
        (Some(_), [h]) => num(h)?.checked_mul(3600)?,
        (Some(_), [h, m]) => num(h)?
            .checked_mul(3600)?
            .checked_add(num(m)?.checked_mul(60)?)?,
        _ => return None,
    };
    let secs = match days {
        Some(d) => d.checked_mul(86_400)?.checked_add(secs)?,
        None => secs,
    };
    Some(SlurmDuration::Secs(secs))
}

/// The `Priority*` keys this module reads, and the related ones it knows
/// but does not act on.
const UNSUPPORTED: &[&str] = &[
    "PrioritySiteFactorPlugin",
    "PrioritySiteFactorParameters",
    "PriorityParameters",
];

impl PriorityParams {
    /// Read the priority settings from `slurm.conf` entries. Other keys
    /// are ignored; a later entry overrides an earlier one.
    pub fn from_config(entries: &[(String, String)]) -> Result<Self, PriorityConfigError> {
        let mut p = PriorityParams::default();
        for (key, value) in entries {
            let bad = |expected: &'static str| PriorityConfigError {
                key: key.clone(),
                value: value.clone(),
                expected,
            };
            let v = value.trim();
            let weight = || -> Result<u32, PriorityConfigError> {
                v.parse::<u32>()
                    .map_err(|_| bad("an integer from 0 to 4294967295"))
            };
            let duration = || -> Result<Option<u64>, PriorityConfigError> {
                match parse_slurm_duration(v) {
                    Some(SlurmDuration::Secs(s)) => Ok(Some(s)),
                    Some(SlurmDuration::Infinite) => Ok(None),
                    None => Err(bad(
                        "a time: minutes, [days-]hours:minutes:seconds, days-hours or UNLIMITED",
                    )),
                }
            };
            match key.trim().to_ascii_lowercase().as_str() {
                "priorityweightage" => p.weight_age = weight()?,
                "priorityweightassoc" => p.weight_assoc = weight()?,
                "priorityweightfairshare" => p.weight_fairshare = weight()?,
                "priorityweightjobsize" => p.weight_job_size = weight()?,
                "priorityweightpartition" => p.weight_partition = weight()?,
                "priorityweightqos" => p.weight_qos = weight()?,
                "priorityweighttres" => {
                    p.weight_tres = parse_tres_weights(v)
                        .ok_or_else(|| bad("a list like CPU=1000,Mem=2000,GRES/gpu=3000"))?
                }
                "prioritymaxage" => p.max_age = duration()?,
                "prioritydecayhalflife" => p.decay_half_life = duration()?.unwrap_or(0),
                "prioritycalcperiod" => {
                    p.calc_period = match duration()? {
                        Some(s) if s > 0 => s,
                        _ => return Err(bad("a time of at least one minute")),
                    }
                }
                "priorityfavorsmall" => {
                    p.favor_small = parse_bool(v).ok_or_else(|| bad("YES or NO"))?
                }
                "priorityusageresetperiod" => {
                    p.usage_reset = UsageReset::parse(v).ok_or_else(|| {
                        bad("NONE, NOW, DAILY, WEEKLY, MONTHLY, QUARTERLY or YEARLY")
                    })?
                }
                "priorityflags" => {
                    p.flags = PriorityFlags::parse(v).map_err(|_| {
                        bad(
                            "a comma-separated list of ACCRUE_ALWAYS, CALCULATE_RUNNING, \
                             DEPTH_OBLIVIOUS, NO_FAIR_TREE, INCR_ONLY, MAX_TRES, MAX_TRES_GRES, \
                             NO_NORMAL_ALL, NO_NORMAL_ASSOC, NO_NORMAL_PART, NO_NORMAL_QOS, \
                             NO_NORMAL_TRES, SMALL_RELATIVE_TO_TIME",
                        )
                    })?
                }
                "fairsharedampeningfactor" => {
                    p.dampening = match v.parse::<u16>() {
                        Ok(d) if d >= 1 => d,
                        _ => return Err(bad("an integer from 1 to 65535")),
                    }
                }
                _ => {}
            }
        }
        Ok(p)
    }

    /// Warnings for priority settings that are known but not acted on.
    pub fn unsupported(entries: &[(String, String)]) -> Vec<String> {
        entries
            .iter()
            .filter_map(|(k, _)| {
                UNSUPPORTED
                    .iter()
                    .find(|u| u.eq_ignore_ascii_case(k.trim()))
                    .map(|u| format!("{u} is not supported yet: ignored"))
            })
            .collect()
    }

    /// The fair-share algorithm the flags select.
    pub fn algorithm(&self) -> Algorithm {
        self.flags.algorithm()
    }

    /// Decay and reset for a [`crate::fairshare::FairShareTree`].
    pub fn usage_policy(&self, utc_offset: i64) -> UsagePolicy {
        UsagePolicy {
            half_life: self.decay_half_life,
            reset: self.usage_reset,
            utc_offset,
        }
    }

    /// The weight of one TRES (0 when not configured).
    pub fn tres_weight(&self, name: &str) -> f64 {
        self.weight_tres
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map_or(0.0, |(_, w)| *w)
    }
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "yes" | "true" | "1" => Some(true),
        "no" | "false" | "0" => Some(false),
        _ => None,
    }
}

/// `CPU=1000,Mem=2000,GRES/gpu=3000` → lower-case names with weights. A
/// name given twice keeps the last weight.
pub fn parse_tres_weights(s: &str) -> Option<Vec<(String, f64)>> {
    let mut out: Vec<(String, f64)> = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (k, v) = item.split_once('=')?;
        let name = k.trim().to_ascii_lowercase();
        if name.is_empty() || name.chars().any(char::is_whitespace) {
            return None;
        }
        let w: f64 = v.trim().parse().ok()?;
        if !w.is_finite() || w < 0.0 {
            return None;
        }
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some(e) => e.1 = w,
            None => out.push((name, w)),
        }
    }
    Some(out)
}
