//! `AccountingStorageEnforce`: associations, QOS and their limits, from
//! slurmdbd's records (fetched by [`crate::acct::assoc_fetcher`] and kept
//! here), applied at submission (reject) and at scheduling (hold with
//! Slurm's reason, released as running jobs end).
//!
//! Pure: no I/O. The caller passes the jobs to count.

use slurm_proto::acct::{AssocRec, QosRec, UserRec, FAIRSHARE_PARENT};
use slurm_proto::{JobRecord, JobState, RpcError, SlurmError};
use std::collections::HashMap;

/// What `AccountingStorageEnforce` asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Enforce {
    pub associations: bool,
    pub limits: bool,
    pub qos: bool,
    pub safe: bool,
}

impl Enforce {
    /// `associations,limits,qos,safe` (limits, qos and safe imply associations).
    pub fn parse(words: &[String]) -> Enforce {
        let mut e = Enforce::default();
        for w in words {
            match w.to_ascii_lowercase().as_str() {
                "associations" => e.associations = true,
                "limits" => e.limits = true,
                "qos" => e.qos = true,
                "safe" => {
                    e.safe = true;
                    e.limits = true
                }
                "all" => {
                    e.limits = true;
                    e.qos = true;
                    e.safe = true
                }
                _ => {}
            }
        }
        if e.limits || e.qos || e.safe {
            e.associations = true;
        }
        e
    }

    pub fn any(&self) -> bool {
        self.associations
    }
}

/// slurmdbd's view of this cluster: associations, users and QOS.
#[derive(Debug, Clone, Default)]
pub struct AssocCache {
    pub assocs: Vec<AssocRec>,
    pub users: HashMap<String, UserRec>,
    pub qos: HashMap<String, QosRec>,
    /// Hourly CPU-seconds per (account, user) from slurmdbd's rollups
    /// (fetched when multifactor priority needs them).
    pub usage: Vec<slurm_proto::acct::AssocUsage>,
    /// The end of the last rolled-up hour: usage after it is the
    /// controller's own to count.
    pub rolled_until: Option<i64>,
}

impl AssocCache {
    /// A fair-share tree with slurmdbd's accounts, users and shares, and
    /// the rolled-up usage decayed to `now`.
    pub fn fair_share_tree(
        &self,
        policy: slurm_plugins::fairshare::UsagePolicy,
        now: i64,
    ) -> slurm_plugins::fairshare::FairShareTree {
        use slurm_plugins::fairshare::{FairShareTree, Shares};
        let shares = |v: u32| {
            if v == FAIRSHARE_PARENT {
                Shares::Parent
            } else {
                Shares::Value(v)
            }
        };
        let mut tree = FairShareTree::new(policy);
        // Parents before children, whatever order the list is in.
        let mut todo: Vec<&AssocRec> = self
            .assocs
            .iter()
            .filter(|a| !a.is_user() && a.account != "root" && a.partition.is_empty())
            .collect();
        while !todo.is_empty() {
            let before = todo.len();
            todo.retain(|a| {
                let parent = a.parent.as_deref().unwrap_or("root");
                if tree.find_account(parent).is_none() {
                    return true;
                }
                if let Err(e) = tree.add_account(&a.account, parent, shares(a.shares)) {
                    tracing::warn!("fair share tree: {e}");
                }
                false
            });
            if todo.len() == before {
                break;
            }
        }
        for a in self.assocs.iter().filter(|a| a.is_user()) {
            if tree.find_user(&a.user, &a.account).is_none() {
                if let Err(e) = tree.add_user(&a.user, &a.account, shares(a.shares)) {
                    tracing::warn!("fair share tree: {e}");
                }
            }
        }
        tree.decay(now);
        for u in &self.usage {
            if let Ok(id) = tree.ensure_user(&u.user, &u.account) {
                // Charged at the middle of its hour, decayed from there.
                let _ = tree.add_usage(id, u.alloc_secs as f64, u.time_start + 1800);
            }
        }
        tree
    }
}

/// A TRES string (`cpu=4,mem=2G,node=1`) as counts (mem in MiB).
pub fn tres_map(s: &str) -> HashMap<String, u64> {
    let mut m = HashMap::new();
    for part in s.split(',') {
        let Some((k, v)) = part.split_once('=') else {
            continue;
        };
        let k = k.trim().to_ascii_lowercase();
        let v = v.trim();
        let (num, mult) = match v.chars().last() {
            Some('K' | 'k') => (&v[..v.len() - 1], 0),
            Some('M' | 'm') => (&v[..v.len() - 1], 1),
            Some('G' | 'g') => (&v[..v.len() - 1], 1024),
            Some('T' | 't') => (&v[..v.len() - 1], 1024 * 1024),
            _ => (v, 1),
        };
        if let Ok(n) = num.parse::<u64>() {
            m.insert(k, if mult == 0 { n / 1024 } else { n * mult });
        }
    }
    m
}

/// What a job uses of the limited TRES.
#[derive(Debug, Clone, Copy, Default)]
struct Use {
    jobs: u64,
    cpu: u64,
    node: u64,
    mem: u64,
}

impl Use {
    fn of(j: &JobRecord) -> Use {
        let running = j.state.is_active();
        let mem = match (j.desc.mem_per_node, j.desc.mem_per_cpu) {
            (Some(m), _) => m * u64::from(j.min_nodes.max(1)),
            (None, Some(m)) => m * u64::from(j.req_cpus),
            _ => 0,
        };
        Use {
            jobs: 1,
            cpu: if running {
                u64::from(j.alloc.total_cpus())
            } else {
                u64::from(j.req_cpus)
            },
            node: if running {
                j.alloc.nodes.len() as u64
            } else {
                u64::from(j.min_nodes.max(1))
            },
            mem,
        }
    }
    fn add(&mut self, o: Use) {
        self.jobs += o.jobs;
        self.cpu += o.cpu;
        self.node += o.node;
        self.mem += o.mem;
    }
}

/// Does `used + job` exceed `limit` (a TRES string)? The first TRES over.
fn over_tres(limit: Option<&str>, used: Use, job: Use) -> Option<&'static str> {
    let l = tres_map(limit?);
    let checks = [
        ("cpu", used.cpu + job.cpu, "Cpu"),
        ("node", used.node + job.node, "Node"),
        ("mem", used.mem + job.mem, "Mem"),
    ];
    checks
        .into_iter()
        .find(|(k, v, _)| l.get(*k).is_some_and(|max| v > max))
        .map(|(_, _, name)| name)
}

fn over_count(limit: Option<u64>, used: u64) -> bool {
    limit.is_some_and(|l| used >= l)
}

impl AssocCache {
    /// The user's association for `account` (a partition's own first).
    pub fn user_assoc(&self, account: &str, user: &str, partition: &str) -> Option<&AssocRec> {
        let mut found = None;
        for a in &self.assocs {
            if a.user == user && a.account == account {
                if a.partition == partition {
                    return Some(a);
                }
                if a.partition.is_empty() {
                    found = Some(a);
                }
            }
        }
        found
    }

    /// The user's association with `Max*` limits it does not set taken
    /// from its nearest account that does (Slurm's inheritance).
    pub fn effective(&self, a: &AssocRec) -> AssocRec {
        let mut e = a.clone();
        for p in self.account_chain(&a.account) {
            let (l, pl) = (&mut e.limits, &p.limits);
            l.max_jobs = l.max_jobs.or(pl.max_jobs);
            l.max_submit_jobs = l.max_submit_jobs.or(pl.max_submit_jobs);
            l.max_wall = l.max_wall.or(pl.max_wall);
            l.max_tres = l.max_tres.take().or(pl.max_tres.clone());
            l.max_tres_mins = l.max_tres_mins.take().or(pl.max_tres_mins.clone());
            if e.qos.is_empty() {
                e.qos = p.qos.clone();
            }
            if e.default_qos.is_none() {
                e.default_qos = p.default_qos.clone();
            }
        }
        e
    }

    /// The account's association and its ancestors', nearest first.
    pub fn account_chain(&self, account: &str) -> Vec<&AssocRec> {
        let mut v = Vec::new();
        let mut next = Some(account.to_string());
        while let Some(name) = next.take() {
            if v.len() > 64 {
                break;
            }
            if let Some(a) = self
                .assocs
                .iter()
                .find(|a| !a.is_user() && a.account == name)
            {
                v.push(a);
                next = a.parent.clone();
            }
        }
        v
    }

    /// The wall limit a job without one gets: the smallest MaxWall of its
    /// association and QOS (minutes).
    pub fn default_wall(
        &self,
        user: &str,
        account: &str,
        partition: &str,
        qos: &str,
    ) -> Option<u32> {
        let a = self.effective(self.user_assoc(account, user, partition)?);
        let q = self.qos.get(qos).and_then(|q| q.limits.max_wall);
        [a.limits.max_wall, q]
            .into_iter()
            .flatten()
            .min()
            .map(|m| m.min(u64::from(u32::MAX)) as u32)
    }

    /// Check a submission; returns the account and QOS the job gets.
    #[allow(clippy::too_many_arguments)]
    pub fn admit<'a>(
        &self,
        enforce: Enforce,
        user: &str,
        account: Option<&str>,
        qos: Option<&str>,
        partition: &str,
        time_limit: Option<u32>,
        job: &JobRecord,
        others: impl Iterator<Item = &'a JobRecord>,
    ) -> Result<(String, String), RpcError> {
        let deny = |e: SlurmError, d: String| RpcError {
            error: e,
            detail: Some(d),
        };
        let account = match account.filter(|a| !a.is_empty()) {
            Some(a) => a.to_ascii_lowercase(),
            None => match self.users.get(user) {
                Some(u) if !u.default_account.is_empty() => u.default_account.clone(),
                _ => {
                    return Err(deny(
                        SlurmError::InvalidAccount,
                        format!("user '{user}' has no default account in accounting"),
                    ))
                }
            },
        };
        let Some(assoc) = self.user_assoc(&account, user, partition) else {
            return Err(deny(
                SlurmError::InvalidAccount,
                format!("no association for user '{user}' in account '{account}'"),
            ));
        };
        let assoc = &self.effective(assoc);
        let qos = match qos.filter(|q| !q.is_empty()) {
            Some(q) => q.to_ascii_lowercase(),
            None => assoc
                .default_qos
                .clone()
                .or_else(|| {
                    (assoc.qos.len() == 1)
                        .then(|| assoc.qos[0].clone())
                        .filter(|q| q != "normal")
                })
                .unwrap_or_else(|| "normal".into()),
        };
        if enforce.qos {
            if !self.qos.contains_key(&qos) {
                return Err(deny(
                    SlurmError::InvalidQos,
                    format!("QOS '{qos}' does not exist"),
                ));
            }
            if !assoc.qos.is_empty() && !assoc.qos.contains(&qos) {
                return Err(deny(
                    SlurmError::InvalidQos,
                    format!("QOS '{qos}' is not allowed for user '{user}' in account '{account}'"),
                ));
            }
        }
        if enforce.limits {
            let q = self.qos.get(&qos);
            let mut mine = 0u64;
            let mut in_qos_user = 0u64;
            let mut in_qos = 0u64;
            let mut in_account = 0u64;
            for o in others.filter(|o| !o.state.is_finished()) {
                if o.user_name == user && o.account == account {
                    mine += 1;
                }
                if o.qos == qos {
                    in_qos += 1;
                    if o.user_name == user {
                        in_qos_user += 1;
                    }
                }
                if o.account == account {
                    in_account += 1;
                }
            }
            let policy = |what: &str| {
                Err(deny(
                    SlurmError::AccountingPolicy,
                    format!("{what} reached for user '{user}' (account '{account}', QOS '{qos}')"),
                ))
            };
            if over_count(assoc.limits.max_submit_jobs, mine) {
                return policy("MaxSubmitJobs");
            }
            if over_count(assoc.limits.grp_submit_jobs, mine) {
                return policy("GrpSubmitJobs");
            }
            if let Some(q) = q {
                let l = &q.limits;
                if over_count(l.max_submit_jobs_per_user, in_qos_user) {
                    return policy("MaxSubmitJobsPerUser");
                }
                if over_count(l.grp_submit_jobs, in_qos) {
                    return policy("QOS GrpSubmitJobs");
                }
                if over_count(l.max_submit_jobs_per_account, in_account) {
                    return policy("MaxSubmitJobsPerAccount");
                }
                // DenyOnLimit: per-job limits refuse at once instead of holding.
                if q.flags.iter().any(|f| f == "DENYONLIMIT") {
                    if let Some(r) = job_limit_reason(assoc, Some(q), time_limit, Use::of(job)) {
                        return policy(&r);
                    }
                }
            }
        }
        Ok((account, qos))
    }
}

/// The reason a per-job limit (wall, TRES per job) keeps this job back.
fn job_limit_reason(
    assoc: &AssocRec,
    qos: Option<&QosRec>,
    time_limit: Option<u32>,
    job: Use,
) -> Option<String> {
    let none = Use::default();
    if let Some(q) = qos {
        if let (Some(max), Some(t)) = (q.limits.max_wall, time_limit) {
            if u64::from(t) > max {
                return Some("QOSMaxWallDurationPerJobLimit".into());
            }
        }
        if let Some(t) = over_tres(q.limits.max_tres_per_job.as_deref(), none, job) {
            return Some(format!("QOSMax{t}PerJobLimit"));
        }
    }
    if let (Some(max), Some(t)) = (assoc.limits.max_wall, time_limit) {
        if u64::from(t) > max {
            return Some("AssocMaxWallDurationPerJobLimit".into());
        }
    }
    if let Some(t) = over_tres(assoc.limits.max_tres.as_deref(), none, job) {
        return Some(format!("AssocMax{t}PerJobLimit"));
    }
    None
}

/// Running usage counted per association, account, QOS and QOS × user.
#[derive(Debug, Default)]
pub struct Usage {
    /// CPU-minutes recorded by slurmdbd per account subtree and per
    /// (user, account), plus what running jobs may still use.
    minutes_account: HashMap<String, u64>,
    minutes_user: HashMap<(String, String), u64>,
    user_assoc: HashMap<(String, String), Use>,
    account: HashMap<String, Use>,
    qos: HashMap<String, Use>,
    qos_user: HashMap<(String, String), Use>,
    qos_account: HashMap<(String, String), Use>,
    /// The time the count is for (what running jobs may still use is
    /// counted from it).
    now: i64,
}

impl Usage {
    /// Count the running jobs as of `now`.
    pub fn of<'a>(
        cache: &AssocCache,
        jobs: impl Iterator<Item = &'a JobRecord>,
        now: i64,
    ) -> Usage {
        let mut u = Usage {
            now,
            ..Usage::default()
        };
        for r in &cache.usage {
            let m = r.alloc_secs / 60;
            *u.minutes_user
                .entry((r.user.clone(), r.account.clone()))
                .or_default() += m;
            for a in cache.account_chain(&r.account) {
                *u.minutes_account.entry(a.account.clone()).or_default() += m;
            }
        }
        // Suspended jobs still count against limits (as in Slurm).
        for j in jobs.filter(|j| j.state.is_active()) {
            u.charge(cache, j, Use::of(j));
        }
        u
    }

    /// CPU-minutes a job may still use (its time limit, else one hour).
    fn job_minutes(&self, j: &JobRecord, x: Use) -> u64 {
        let mins = match (j.time_limit, j.start_time, j.state) {
            (Some(t), Some(s), JobState::Running) => {
                let left = (s + i64::from(t) * 60 - self.now).max(0) / 60;
                left as u64
            }
            (Some(t), _, _) => u64::from(t),
            (None, _, _) => 60,
        };
        mins * x.cpu
    }

    fn charge(&mut self, cache: &AssocCache, j: &JobRecord, x: Use) {
        let m = self.job_minutes(j, x);
        *self
            .minutes_user
            .entry((j.user_name.clone(), j.account.clone()))
            .or_default() += m;
        for a in cache.account_chain(&j.account) {
            *self.minutes_account.entry(a.account.clone()).or_default() += m;
        }
        self.user_assoc
            .entry((j.user_name.clone(), j.account.clone()))
            .or_default()
            .add(x);
        for a in cache.account_chain(&j.account) {
            self.account.entry(a.account.clone()).or_default().add(x);
        }
        self.qos.entry(j.qos.clone()).or_default().add(x);
        self.qos_user
            .entry((j.qos.clone(), j.user_name.clone()))
            .or_default()
            .add(x);
        self.qos_account
            .entry((j.qos.clone(), j.account.clone()))
            .or_default()
            .add(x);
    }

    /// Why association or QOS limits keep pending job `j` back, if they do.
    /// A job let through is counted, so later jobs see it as running.
    pub fn hold(&mut self, cache: &AssocCache, j: &JobRecord) -> Option<String> {
        let x = Use::of(j);
        let assoc = &cache.effective(cache.user_assoc(&j.account, &j.user_name, &j.partition)?);
        let q = cache.qos.get(&j.qos);
        if let Some(r) = job_limit_reason(assoc, q, j.time_limit, x) {
            return Some(r);
        }
        if let Some(q) = q {
            let l = &q.limits;
            let me = self
                .qos_user
                .get(&(j.qos.clone(), j.user_name.clone()))
                .copied()
                .unwrap_or_default();
            if over_count(l.max_jobs_per_user, me.jobs) {
                return Some("QOSMaxJobsPerUserLimit".into());
            }
            if let Some(t) = over_tres(l.max_tres_per_user.as_deref(), me, x) {
                return Some(format!("QOSMax{t}PerUserLimit"));
            }
            let acct = self
                .qos_account
                .get(&(j.qos.clone(), j.account.clone()))
                .copied()
                .unwrap_or_default();
            if over_count(l.max_jobs_per_account, acct.jobs) {
                return Some("QOSMaxJobsPerAccountLimit".into());
            }
            let all = self.qos.get(&j.qos).copied().unwrap_or_default();
            if over_count(l.grp_jobs, all.jobs) {
                return Some("QOSGrpJobsLimit".into());
            }
            if let Some(t) = over_tres(l.grp_tres.as_deref(), all, x) {
                return Some(format!("QOSGrp{t}Limit"));
            }
        }
        let mine = self
            .user_assoc
            .get(&(j.user_name.clone(), j.account.clone()))
            .copied()
            .unwrap_or_default();
        if over_count(assoc.limits.max_jobs, mine.jobs) {
            return Some("AssocMaxJobsLimit".into());
        }
        if over_count(assoc.limits.grp_jobs, mine.jobs) {
            return Some("AssocGrpJobsLimit".into());
        }
        if let Some(t) = over_tres(assoc.limits.grp_tres.as_deref(), mine, x) {
            return Some(format!("AssocGrp{t}Limit"));
        }
        // GrpTRESMins (cpu): recorded usage plus what running jobs and this
        // one may still use must stay within it.
        let mine_min = self
            .minutes_user
            .get(&(j.user_name.clone(), j.account.clone()))
            .copied()
            .unwrap_or(0);
        let this_min = self.job_minutes(j, x);
        if let Some(l) = assoc.limits.grp_tres_mins.as_deref().map(tres_map) {
            if l.get("cpu").is_some_and(|&max| mine_min + this_min > max) {
                return Some("AssocGrpCPUMinutesLimit".into());
            }
        }
        for a in cache.account_chain(&j.account) {
            let used_min = self.minutes_account.get(&a.account).copied().unwrap_or(0);
            if let Some(l) = a.limits.grp_tres_mins.as_deref().map(tres_map) {
                if l.get("cpu").is_some_and(|&max| used_min + this_min > max) {
                    return Some("AssocGrpCPUMinutesLimit".into());
                }
            }
        }
        for a in cache.account_chain(&j.account) {
            let used = self.account.get(&a.account).copied().unwrap_or_default();
            if over_count(a.limits.grp_jobs, used.jobs) {
                return Some("AssocGrpJobsLimit".into());
            }
            if let Some(t) = over_tres(a.limits.grp_tres.as_deref(), used, x) {
                return Some(format!("AssocGrp{t}Limit"));
            }
        }
        self.charge(cache, j, x);
        None
    }
}

/// Associations for tests: account `phys` (GrpTRES cpu=8) under root,
/// user alice in it (default account, MaxSubmitJobs=3), QOS `normal` with
/// MaxJobsPerUser=2.
#[cfg(test)]
pub(crate) fn sample_cache() -> AssocCache {
    let mut c = AssocCache::default();
    c.assocs.push(AssocRec {
        account: "root".into(),
        ..Default::default()
    });
    c.assocs.push(AssocRec {
        account: "phys".into(),
        parent: Some("root".into()),
        limits: slurm_proto::acct::AssocLimits {
            grp_tres: Some("cpu=8".into()),
            ..Default::default()
        },
        ..Default::default()
    });
    c.assocs.push(AssocRec {
        account: "phys".into(),
        user: "alice".into(),
        parent: Some("phys".into()),
        limits: slurm_proto::acct::AssocLimits {
            max_submit_jobs: Some(3),
            ..Default::default()
        },
        ..Default::default()
    });
    c.users.insert(
        "alice".into(),
        UserRec {
            name: "alice".into(),
            default_account: "phys".into(),
            ..Default::default()
        },
    );
    c.qos.insert(
        "normal".into(),
        QosRec {
            name: "normal".into(),
            limits: slurm_proto::acct::QosLimits {
                max_jobs_per_user: Some(2),
                ..Default::default()
            },
            ..Default::default()
        },
    );
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u32, state: JobState, cpus: u32) -> JobRecord {
        let mut j: JobRecord = serde_json::from_value(serde_json::json!({
            "job_id": id, "name": "j", "user_id": 1, "user_name": "alice", "group_id": 1,
            "group_name": "g", "account": "phys", "qos": "normal", "partition": "debug",
            "priority": 1, "state": "Pending", "completing": false, "reason": "None",
            "time_limit": 10, "submit_time": 0, "eligible_time": null, "start_time": null,
            "end_time": null, "last_sched_eval": null, "exit_status": 0, "restarts": 0,
            "batch_host": null, "alloc": {"nodes": [], "cpus": [], "mem": [], "tasks": []},
            "completing_nodes": [], "desc": serde_json::to_value(slurm_proto::JobDesc::default()).unwrap(), "num_tasks": 1, "req_cpus": cpus,
            "min_nodes": 1, "max_nodes": 1, "held": null, "cancelled": false,
            "timed_out": false, "node_failed": false
        }))
        .unwrap();
        j.state = state;
        if state == JobState::Running {
            j.alloc.nodes = vec!["n1".into()];
            j.alloc.cpus = vec![cpus];
        }
        j
    }

    #[test]
    fn admission_resolves_default_account_and_refuses_strangers() {
        let c = sample_cache();
        let e = Enforce::parse(&["associations".into(), "limits".into(), "qos".into()]);
        let j = job(1, JobState::Pending, 1);
        let (acct, qos) = c
            .admit(
                e,
                "alice",
                None,
                None,
                "debug",
                Some(10),
                &j,
                [].into_iter(),
            )
            .unwrap();
        assert_eq!((acct.as_str(), qos.as_str()), ("phys", "normal"));
        let err = c
            .admit(e, "bob", None, None, "debug", None, &j, [].into_iter())
            .unwrap_err();
        assert_eq!(err.error, SlurmError::InvalidAccount);
        let err = c
            .admit(
                e,
                "alice",
                Some("phys"),
                Some("gold"),
                "debug",
                None,
                &j,
                [].into_iter(),
            )
            .unwrap_err();
        assert_eq!(err.error, SlurmError::InvalidQos);
        let three = [
            job(2, JobState::Pending, 1),
            job(3, JobState::Running, 1),
            job(4, JobState::Pending, 1),
        ];
        let err = c
            .admit(e, "alice", None, None, "debug", None, &j, three.iter())
            .unwrap_err();
        assert_eq!(err.error, SlurmError::AccountingPolicy);
    }

    #[test]
    fn running_jobs_hold_later_ones_with_slurm_reasons() {
        let c = sample_cache();
        let running = [job(1, JobState::Running, 1)];
        let mut u = Usage::of(&c, running.iter(), 0);
        assert_eq!(u.hold(&c, &job(2, JobState::Pending, 1)), None);
        assert_eq!(
            u.hold(&c, &job(3, JobState::Pending, 1)).as_deref(),
            Some("QOSMaxJobsPerUserLimit")
        );
        let mut c2 = c.clone();
        c2.qos.get_mut("normal").unwrap().limits.max_jobs_per_user = None;
        let mut u = Usage::of(&c2, running.iter(), 0);
        assert_eq!(
            u.hold(&c2, &job(4, JobState::Pending, 8)).as_deref(),
            Some("AssocGrpCpuLimit")
        );
        assert_eq!(tres_map("cpu=4,mem=2G")["mem"], 2048);
        // GrpTRESMins: 100 cpu-minutes recorded against a limit of 120.
        let mut c3 = c2.clone();
        c3.assocs[1].limits.grp_tres = None;
        c3.assocs[1].limits.grp_tres_mins = Some("cpu=120".into());
        c3.usage.push(slurm_proto::acct::AssocUsage {
            account: "phys".into(),
            user: "alice".into(),
            alloc_secs: 100 * 60,
            ..Default::default()
        });
        let mut u = Usage::of(&c3, [].iter(), 0);
        // 1 cpu x 10 minutes fits; 4 cpus x 10 minutes does not.
        assert_eq!(u.hold(&c3, &job(5, JobState::Pending, 1)), None);
        assert_eq!(
            u.hold(&c3, &job(6, JobState::Pending, 4)).as_deref(),
            Some("AssocGrpCPUMinutesLimit")
        );
    }
}
