//! Accounts, users and QOS of a simulation (a case's `account:`, `user:`
//! and `qos:` lines), enforced as `AccountingStorageEnforce=limits,qos`
//! would be: a job needs an association, its QOS must exist, submit limits
//! refuse it, running limits hold it back (`slurm_plugins::limits`, the
//! controller's own checks). A QOS may also preempt others
//! (`PreemptType=preempt/qos`).
//!
//! ```text
//! account: phys parent=root GrpTRES=cpu=8 GrpJobs=4 MaxJobs=2 MaxWall=60
//! user: 5 account=phys MaxSubmitJobs=3      (the first line names the default account)
//! qos: high Preempt=normal PreemptMode=SUSPEND MaxJobsPerUser=2 Flags=DenyOnLimit
//! ```
//!
//! Limits: `MaxJobs`, `MaxSubmitJobs`, `GrpJobs`, `GrpSubmitJobs`,
//! `MaxWall` (minutes), `MaxTRES`, `GrpTRES`, `GrpTRESMins` (cpu) for
//! accounts and users; `MaxJobsPerUser`, `MaxJobsPerAccount`, `GrpJobs`,
//! `MaxSubmitJobsPerUser`, `MaxSubmitJobsPerAccount`, `GrpSubmitJobs`,
//! `MaxWall`, `MaxTRESPerJob`, `MaxTRESPerUser`, `GrpTRES`,
//! `Flags=DenyOnLimit`, `Preempt`, `PreemptMode` for QOS. A `normal` QOS
//! without limits exists unless a line names it.

use crate::cluster::PreemptMode;
use slurm_plugins::limits::{AssocLimits, Book, QosLimits, Tres};
use std::collections::HashMap;

/// What preempting with a QOS means.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QosPreempt {
    /// QOS whose jobs this one may preempt.
    pub preempt: Vec<String>,
    /// How its own jobs go when preempted (`None`: the partition's mode).
    pub mode: Option<PreemptMode>,
}

/// The accounts, users and QOS of a simulation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Accounting {
    pub book: Book,
    /// User id → default account (its first `user:` line).
    pub default_account: HashMap<u32, String>,
    pub qos: HashMap<String, QosPreempt>,
}

fn words(value: &str) -> impl Iterator<Item = Result<(String, &str), String>> {
    value.split_whitespace().map(|w| {
        w.split_once('=')
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .ok_or_else(|| format!("'{w}' is not KEY=VALUE"))
    })
}

fn count(v: &str, k: &str) -> Result<Option<u64>, String> {
    v.parse()
        .map(Some)
        .map_err(|_| format!("{k}={v}: not a number"))
}

/// Read an association's limit `k=v` into `l`; `false` when `k` is not one.
fn assoc_limit(l: &mut AssocLimits, k: &str, v: &str) -> Result<bool, String> {
    match k {
        "maxjobs" => l.max_jobs = count(v, k)?,
        "maxsubmitjobs" => l.max_submit_jobs = count(v, k)?,
        "grpjobs" => l.grp_jobs = count(v, k)?,
        "grpsubmitjobs" => l.grp_submit_jobs = count(v, k)?,
        "maxwall" => l.max_wall = count(v, k)?,
        "maxtres" => l.max_tres = Tres::parse(v),
        "grptres" => l.grp_tres = Tres::parse(v),
        "grptresmins" => {
            l.grp_cpu_mins = Some(
                Tres::parse(v)
                    .cpu
                    .ok_or_else(|| format!("{k}={v}: only cpu minutes are counted"))?,
            )
        }
        _ => return Ok(false),
    }
    Ok(true)
}

impl Accounting {
    /// Read one `account:`, `user:` or `qos:` line (`kind` is the key).
    pub fn line(&mut self, kind: &str, value: &str) -> Result<(), String> {
        let mut it = value.split_whitespace();
        let name = it
            .next()
            .ok_or_else(|| format!("{kind}: needs a name"))?
            .to_string();
        let rest = value.trim_start()[name.len()..].trim();
        match kind {
            "account" => {
                // (Account names in any case, as jobs' `account=` are.)
                let name = name.to_ascii_lowercase();
                let mut limits = AssocLimits::default();
                let mut parent = None;
                for kv in words(rest) {
                    let (k, v) = kv?;
                    if k == "parent" {
                        parent = Some(v.to_ascii_lowercase());
                    } else if !assoc_limit(&mut limits, &k, v)? {
                        return Err(format!("account: unknown key '{k}'"));
                    }
                }
                if let Some(p) = &parent {
                    if self.book.chain(p).is_empty() {
                        return Err(format!("account {name}: no account named '{p}' above it"));
                    }
                }
                self.book.add_account(&name, parent.as_deref(), limits);
            }
            "user" => {
                let user: u32 = name
                    .parse()
                    .map_err(|_| format!("user: '{name}' is not a user id"))?;
                let mut limits = AssocLimits::default();
                let (mut account, mut partition) = (None, String::new());
                for kv in words(rest) {
                    let (k, v) = kv?;
                    match k.as_str() {
                        "account" => account = Some(v.to_ascii_lowercase()),
                        "partition" => partition = v.to_string(),
                        _ if assoc_limit(&mut limits, &k, v)? => {}
                        _ => return Err(format!("user: unknown key '{k}'")),
                    }
                }
                let account = account.ok_or("user: account=NAME is required")?;
                if self.book.chain(&account).is_empty() {
                    return Err(format!("user {name}: no account named '{account}'"));
                }
                self.default_account
                    .entry(user)
                    .or_insert_with(|| account.clone());
                self.book.add_user(&name, &account, &partition, limits);
            }
            "qos" => {
                let mut l = QosLimits::default();
                let mut p = QosPreempt::default();
                for kv in words(rest) {
                    let (k, v) = kv?;
                    match k.as_str() {
                        "maxjobsperuser" => l.max_jobs_per_user = count(v, &k)?,
                        "maxjobsperaccount" => l.max_jobs_per_account = count(v, &k)?,
                        "grpjobs" => l.grp_jobs = count(v, &k)?,
                        "maxsubmitjobsperuser" => l.max_submit_jobs_per_user = count(v, &k)?,
                        "maxsubmitjobsperaccount" => l.max_submit_jobs_per_account = count(v, &k)?,
                        "grpsubmitjobs" => l.grp_submit_jobs = count(v, &k)?,
                        "maxwall" => l.max_wall = count(v, &k)?,
                        "maxtresperjob" => l.max_tres_per_job = Tres::parse(v),
                        "maxtresperuser" => l.max_tres_per_user = Tres::parse(v),
                        "grptres" => l.grp_tres = Tres::parse(v),
                        "flags" => {
                            for f in v.split(',') {
                                if f.eq_ignore_ascii_case("DenyOnLimit") {
                                    l.deny_on_limit = true;
                                } else {
                                    return Err(format!("qos: flag '{f}' is not simulated"));
                                }
                            }
                        }
                        "preempt" => {
                            p.preempt = v.split(',').map(|q| q.to_ascii_lowercase()).collect()
                        }
                        "preemptmode" if v.eq_ignore_ascii_case("cluster") => p.mode = None,
                        "preemptmode" => {
                            p.mode =
                                Some(crate::cluster::preempt_mode(v).map_err(|m| {
                                    format!("qos: PreemptMode={m} is not simulated")
                                })?)
                        }
                        _ => return Err(format!("qos: unknown key '{k}'")),
                    }
                }
                let name = name.to_ascii_lowercase();
                self.book.add_qos(&name, l);
                self.qos.insert(name, p);
            }
            _ => return Err(format!("unknown key '{kind}'")),
        }
        Ok(())
    }

    /// Every line read: a `normal` QOS unless one was named.
    pub fn finish(&mut self) {
        if !self.qos.contains_key("normal") {
            self.book.add_qos("normal", QosLimits::default());
            self.qos.insert("normal".into(), QosPreempt::default());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_the_book() {
        let mut a = Accounting::default();
        a.line("account", "Root").unwrap();
        a.line("account", "phys parent=ROOT GrpTRES=cpu=8 MaxWall=60")
            .unwrap();
        a.line("user", "5 account=phys MaxJobs=2").unwrap();
        a.line("user", "5 account=root").unwrap();
        a.line(
            "qos",
            "High Preempt=normal PreemptMode=requeue Flags=DenyOnLimit",
        )
        .unwrap();
        a.finish();
        assert_eq!(a.default_account[&5], "phys");
        let e = a.book.effective("5", "phys", "").unwrap();
        assert_eq!((e.max_jobs, e.max_wall), (Some(2), Some(60)));
        assert!(a.book.qos("high").unwrap().deny_on_limit);
        assert!(a.book.qos("normal").is_some());
        assert_eq!(a.qos["high"].mode, Some(PreemptMode::Requeue));
        for (kind, bad) in [
            ("account", "x parent=nowhere"),
            ("account", "x Bogus=1"),
            ("user", "bob account=phys"),
            ("user", "6 account=nowhere"),
            ("user", "6"),
            ("qos", "q MaxJobsPerUser=many"),
            ("qos", "q Flags=NoReserve"),
            ("qos", "q PreemptMode=sometimes"),
            ("account", "y GrpTRESMins=mem=5"),
        ] {
            assert!(a.line(kind, bad).is_err(), "{kind}: {bad}");
        }
    }
}
