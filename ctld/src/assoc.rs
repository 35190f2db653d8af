//! `AccountingStorageEnforce`: associations, QOS and their limits, from
//! slurmdbd's records (fetched by [`crate::acct::assoc_fetcher`] and kept
//! here), applied at submission (reject) and at scheduling (hold with
//! Slurm's reason, released as running jobs end).
//!
//! Pure: no I/O. The caller passes the jobs to count. The limits' arithmetic
//! is the core's (`slurm_plugins::limits`, which `slurmsim` runs too); this
//! turns slurmdbd's records into its [`Book`] and says which account and QOS
//! a job gets.

use slurm_plugins::limits::{self, Book, Tres};
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

/// A job as the limits in the core see it: what it holds when it runs
/// (its allocation), what it asks for when it waits.
pub fn limit_job(j: &JobRecord) -> limits::Job<'_> {
    let running = j.state.is_active();
    let mem = match (j.desc.mem_per_node, j.desc.mem_per_cpu) {
        (Some(m), _) => m * u64::from(j.min_nodes.max(1)),
        (None, Some(m)) => m * u64::from(j.req_cpus),
        _ => 0,
    };
    limits::Job {
        user: &j.user_name,
        account: &j.account,
        partition: &j.partition,
        qos: &j.qos,
        time_limit: j.time_limit,
        running_since: j.start_time.filter(|_| j.state == JobState::Running),
        uses: limits::Use {
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
        },
    }
}

/// A TRES limit as the core reads it (none set: no limit).
fn tres(s: &Option<String>) -> Tres {
    s.as_deref().map(Tres::parse).unwrap_or_default()
}

fn assoc_limits(l: &slurm_proto::acct::AssocLimits) -> limits::AssocLimits {
    limits::AssocLimits {
        max_jobs: l.max_jobs,
        max_submit_jobs: l.max_submit_jobs,
        grp_jobs: l.grp_jobs,
        grp_submit_jobs: l.grp_submit_jobs,
        max_wall: l.max_wall,
        max_tres: tres(&l.max_tres),
        grp_tres: tres(&l.grp_tres),
        grp_cpu_mins: l
            .grp_tres_mins
            .as_deref()
            .and_then(|s| limits::tres_map(s).get("cpu").copied()),
    }
}

fn qos_limits(q: &QosRec) -> limits::QosLimits {
    let l = &q.limits;
    limits::QosLimits {
        max_jobs_per_user: l.max_jobs_per_user,
        max_jobs_per_account: l.max_jobs_per_account,
        grp_jobs: l.grp_jobs,
        max_submit_jobs_per_user: l.max_submit_jobs_per_user,
        max_submit_jobs_per_account: l.max_submit_jobs_per_account,
        grp_submit_jobs: l.grp_submit_jobs,
        max_wall: l.max_wall,
        max_tres_per_job: tres(&l.max_tres_per_job),
        max_tres_per_user: tres(&l.max_tres_per_user),
        grp_tres: tres(&l.grp_tres),
        deny_on_limit: q.flags.iter().any(|f| f == "DENYONLIMIT"),
    }
}

impl AssocCache {
    /// The limits of every association and QOS, for the core's checks.
    pub fn book(&self) -> Book {
        let mut b = Book::default();
        for a in self.assocs.iter().filter(|a| !a.is_user()) {
            // An account's first association is its node of the tree.
            if b.chain(&a.account).is_empty() {
                b.add_account(&a.account, a.parent.as_deref(), assoc_limits(&a.limits));
            }
        }
        for a in self.assocs.iter().filter(|a| a.is_user()) {
            b.add_user(&a.user, &a.account, &a.partition, assoc_limits(&a.limits));
        }
        for (name, q) in &self.qos {
            b.add_qos(name, qos_limits(q));
        }
        b
    }

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

    /// The QOS list and default QOS of a user's association, taken from
    /// its nearest account that sets them when it does not (Slurm's
    /// inheritance).
    fn qos_of(&self, a: &AssocRec) -> (Vec<String>, Option<String>) {
        let (mut list, mut default) = (a.qos.clone(), a.default_qos.clone());
        for p in self.account_chain(&a.account) {
            if list.is_empty() {
                list = p.qos.clone();
            }
            if default.is_none() {
                default = p.default_qos.clone();
            }
        }
        (list, default)
    }

    /// The account's association and its ancestors', nearest first.
    fn account_chain(&self, account: &str) -> Vec<&AssocRec> {
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

    /// Check a submission against `book` (this cache's [`AssocCache::book`]);
    /// returns the account and QOS the job gets.
    #[allow(clippy::too_many_arguments)]
    pub fn admit<'a>(
        &self,
        book: &Book,
        enforce: Enforce,
        user: &str,
        account: Option<&str>,
        qos: Option<&str>,
        partition: &str,
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
        let (allowed, default_qos) = self.qos_of(assoc);
        let qos = match qos.filter(|q| !q.is_empty()) {
            Some(q) => q.to_ascii_lowercase(),
            None => default_qos
                .or_else(|| {
                    (allowed.len() == 1)
                        .then(|| allowed[0].clone())
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
            if !allowed.is_empty() && !allowed.contains(&qos) {
                return Err(deny(
                    SlurmError::InvalidQos,
                    format!("QOS '{qos}' is not allowed for user '{user}' in account '{account}'"),
                ));
            }
        }
        if enforce.limits {
            let me = limits::Job {
                user,
                account: &account,
                partition,
                qos: &qos,
                ..limit_job(job)
            };
            let others = others.filter(|o| !o.state.is_finished()).map(limit_job);
            if let Some(what) = book.refuse_submission(&me, others) {
                return Err(deny(
                    SlurmError::AccountingPolicy,
                    format!("{what} reached for user '{user}' (account '{account}', QOS '{qos}')"),
                ));
            }
        }
        Ok((account, qos))
    }
}

/// Running usage for the limits, as of `now`: slurmdbd's recorded usage and
/// the jobs that run (suspended ones count too, as in Slurm).
pub fn usage<'a>(
    cache: &AssocCache,
    book: &Book,
    jobs: impl Iterator<Item = &'a JobRecord>,
    now: i64,
) -> limits::Usage {
    let recorded = cache
        .usage
        .iter()
        .map(|r| (r.user.as_str(), r.account.as_str(), r.alloc_secs));
    let mut u = limits::Usage::new(book, recorded, now);
    for j in jobs.filter(|j| j.state.is_active()) {
        u.charge(book, &limit_job(j));
    }
    u
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
        let b = c.book();
        let e = Enforce::parse(&["associations".into(), "limits".into(), "qos".into()]);
        let j = job(1, JobState::Pending, 1);
        let admit = |user, account, qos, others: &[JobRecord]| {
            c.admit(&b, e, user, account, qos, "debug", &j, others.iter())
        };
        let (acct, qos) = admit("alice", None, None, &[]).unwrap();
        assert_eq!((acct.as_str(), qos.as_str()), ("phys", "normal"));
        let err = admit("bob", None, None, &[]).unwrap_err();
        assert_eq!(err.error, SlurmError::InvalidAccount);
        let err = admit("alice", Some("phys"), Some("gold"), &[]).unwrap_err();
        assert_eq!(err.error, SlurmError::InvalidQos);
        let three = [
            job(2, JobState::Pending, 1),
            job(3, JobState::Running, 1),
            job(4, JobState::Pending, 1),
        ];
        let err = admit("alice", None, None, &three).unwrap_err();
        assert_eq!(err.error, SlurmError::AccountingPolicy);
        // Finished jobs do not count.
        let mut done = three.clone();
        done[0].state = JobState::Completed;
        assert!(admit("alice", None, None, &done).is_ok());
    }

    /// slurmdbd's records as the core's limits: a running job counts its
    /// allocation, recorded usage counts against GrpTRESMins.
    #[test]
    fn records_become_the_cores_limits() {
        let c = sample_cache();
        let b = c.book();
        let running = [job(1, JobState::Running, 1)];
        let mut u = usage(&c, &b, running.iter(), 0);
        assert_eq!(u.hold(&b, &limit_job(&job(2, JobState::Pending, 1))), None);
        assert_eq!(
            u.hold(&b, &limit_job(&job(3, JobState::Pending, 1)))
                .as_deref(),
            Some("QOSMaxJobsPerUserLimit")
        );
        let mut c2 = c.clone();
        c2.qos.get_mut("normal").unwrap().limits.max_jobs_per_user = None;
        let b2 = c2.book();
        let mut u = usage(&c2, &b2, running.iter(), 0);
        assert_eq!(
            u.hold(&b2, &limit_job(&job(4, JobState::Pending, 8)))
                .as_deref(),
            Some("AssocGrpCpuLimit")
        );
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
        let b3 = c3.book();
        let mut u = usage(&c3, &b3, [].iter(), 0);
        // 1 cpu x 10 minutes fits; 4 cpus x 10 minutes does not.
        assert_eq!(u.hold(&b3, &limit_job(&job(5, JobState::Pending, 1))), None);
        assert_eq!(
            u.hold(&b3, &limit_job(&job(6, JobState::Pending, 4)))
                .as_deref(),
            Some("AssocGrpCPUMinutesLimit")
        );
        let dq = QosRec {
            flags: vec!["DENYONLIMIT".into()],
            ..Default::default()
        };
        assert!(qos_limits(&dq).deny_on_limit);
    }
}
