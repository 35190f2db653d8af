//! Association and QOS limits (`AccountingStorageEnforce=limits,qos`):
//! what a job may be refused at submission (`MaxSubmitJobs`, ...) and what
//! keeps a pending job back while others run (`MaxJobs`, `GrpTRES`,
//! `MaxJobsPerUser`, `GrpTRESMins`, ...), with Slurm's reason names. The
//! controller builds a [`Book`] from slurmdbd's records; `slurmsim` from a
//! case's `account:`/`user:`/`qos:` lines; both call the same checks.
//!
//! Pure arithmetic over what the caller says each job uses ([`Use`]).
//!
//! Invariants: a limit not set never holds anything back; jobs are let
//! through in the order the caller asks (highest priority first), each one
//! let through counted before the next is looked at; a user's `Max*` limits
//! not set on the user's association are inherited from its nearest account
//! that sets them, `Grp*` limits are checked at every level up the tree.

use std::collections::HashMap;

/// TRES counts a limit names (`cpu=4,node=2,mem=2G`, memory in MiB); a
/// TRES not named is not limited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tres {
    pub cpu: Option<u64>,
    pub node: Option<u64>,
    pub mem: Option<u64>,
}

impl Tres {
    /// Read a TRES string; parts it cannot read (and TRES it does not
    /// count) are left out.
    pub fn parse(s: &str) -> Tres {
        let mut t = Tres::default();
        for (k, v) in tres_map(s) {
            match k.as_str() {
                "cpu" => t.cpu = Some(v),
                "node" => t.node = Some(v),
                "mem" => t.mem = Some(v),
                _ => {}
            }
        }
        t
    }

    /// The first TRES that `used + job` takes over this limit (Slurm's
    /// spelling in reasons: `Cpu`, `Node`, `Mem`).
    fn over(&self, used: Use, job: Use) -> Option<&'static str> {
        [
            (self.cpu, used.cpu + job.cpu, "Cpu"),
            (self.node, used.node + job.node, "Node"),
            (self.mem, used.mem + job.mem, "Mem"),
        ]
        .into_iter()
        .find(|(max, v, _)| max.is_some_and(|m| *v > m))
        .map(|(_, _, name)| name)
    }
}

/// A TRES string as counts by lower-case name (memory in MiB: `K` is
/// divided, `G` and `T` multiplied).
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

/// What one job uses (or would use) of what limits count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Use {
    pub jobs: u64,
    pub cpu: u64,
    pub node: u64,
    /// MiB.
    pub mem: u64,
}

impl Use {
    fn add(&mut self, o: Use) {
        self.jobs += o.jobs;
        self.cpu += o.cpu;
        self.node += o.node;
        self.mem += o.mem;
    }
}

/// An association's limits (`sacctmgr ... set MaxJobs=...`): counts of
/// jobs, wall minutes, TRES.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AssocLimits {
    pub max_jobs: Option<u64>,
    pub max_submit_jobs: Option<u64>,
    pub grp_jobs: Option<u64>,
    pub grp_submit_jobs: Option<u64>,
    /// Minutes.
    pub max_wall: Option<u64>,
    /// Per job.
    pub max_tres: Tres,
    pub grp_tres: Tres,
    /// `GrpTRESMins=cpu=N`: CPU-minutes used and still to be used.
    pub grp_cpu_mins: Option<u64>,
}

/// A QOS's limits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QosLimits {
    pub max_jobs_per_user: Option<u64>,
    pub max_jobs_per_account: Option<u64>,
    pub grp_jobs: Option<u64>,
    pub max_submit_jobs_per_user: Option<u64>,
    pub max_submit_jobs_per_account: Option<u64>,
    pub grp_submit_jobs: Option<u64>,
    /// Minutes.
    pub max_wall: Option<u64>,
    pub max_tres_per_job: Tres,
    pub max_tres_per_user: Tres,
    pub grp_tres: Tres,
    /// `Flags=DenyOnLimit`: per-job limits refuse at submission instead
    /// of holding the job.
    pub deny_on_limit: bool,
}

/// An account: its parent and its own limits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Account {
    pub parent: Option<String>,
    pub limits: AssocLimits,
}

/// The associations and QOS limits are checked against.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Book {
    accounts: HashMap<String, Account>,
    /// (user, account) → (partition, "" for every partition; its limits).
    users: HashMap<(String, String), Vec<(String, AssocLimits)>>,
    qos: HashMap<String, QosLimits>,
}

/// One job as the limits see it.
#[derive(Debug, Clone, Copy)]
pub struct Job<'a> {
    pub user: &'a str,
    pub account: &'a str,
    pub partition: &'a str,
    pub qos: &'a str,
    /// Minutes.
    pub time_limit: Option<u32>,
    /// When it started, if it runs (or is suspended) now.
    pub running_since: Option<i64>,
    pub uses: Use,
}

/// The most accounts followed up a tree (a loop in bad records ends there).
const MAX_DEPTH: usize = 64;

impl Book {
    pub fn add_account(&mut self, name: &str, parent: Option<&str>, limits: AssocLimits) {
        self.accounts.insert(
            name.to_string(),
            Account {
                parent: parent.map(str::to_string),
                limits,
            },
        );
    }

    /// A user's association with `account` (`partition` "" for all).
    pub fn add_user(&mut self, user: &str, account: &str, partition: &str, limits: AssocLimits) {
        self.users
            .entry((user.to_string(), account.to_string()))
            .or_default()
            .push((partition.to_string(), limits));
    }

    pub fn add_qos(&mut self, name: &str, limits: QosLimits) {
        self.qos.insert(name.to_string(), limits);
    }

    pub fn qos(&self, name: &str) -> Option<&QosLimits> {
        self.qos.get(name)
    }

    /// `account` and its ancestors, nearest first.
    pub fn chain<'b>(&'b self, account: &str) -> Vec<(&'b str, &'b Account)> {
        let mut v = Vec::new();
        let mut next = self.accounts.get_key_value(account);
        while let Some((name, a)) = next.take() {
            if v.len() >= MAX_DEPTH {
                break;
            }
            v.push((name.as_str(), a));
            next = a
                .parent
                .as_deref()
                .and_then(|p| self.accounts.get_key_value(p));
        }
        v
    }

    /// The user's limits in `account` on `partition` (a partition's own
    /// association first), with the `Max*` limits it does not set taken from
    /// its nearest account that does; `None` without an association.
    pub fn effective(&self, user: &str, account: &str, partition: &str) -> Option<AssocLimits> {
        let list = self.users.get(&(user.to_string(), account.to_string()))?;
        let own = list
            .iter()
            .find(|(p, _)| p == partition)
            .or_else(|| list.iter().find(|(p, _)| p.is_empty()))?;
        let mut e = own.1.clone();
        for (_, a) in self.chain(account) {
            let p = &a.limits;
            e.max_jobs = e.max_jobs.or(p.max_jobs);
            e.max_submit_jobs = e.max_submit_jobs.or(p.max_submit_jobs);
            e.max_wall = e.max_wall.or(p.max_wall);
            if e.max_tres == Tres::default() {
                e.max_tres = p.max_tres;
            }
        }
        Some(e)
    }

    /// The limit (its name) that refuses `job` at submission, given the
    /// jobs not yet finished, if one does.
    pub fn refuse_submission<'b>(
        &self,
        job: &Job,
        others: impl Iterator<Item = Job<'b>>,
    ) -> Option<String> {
        let assoc = self.effective(job.user, job.account, job.partition)?;
        let (mut mine, mut in_qos_user, mut in_qos, mut in_account) = (0u64, 0u64, 0u64, 0u64);
        for o in others {
            if o.user == job.user && o.account == job.account {
                mine += 1;
            }
            if o.qos == job.qos {
                in_qos += 1;
                if o.user == job.user {
                    in_qos_user += 1;
                }
            }
            if o.account == job.account {
                in_account += 1;
            }
        }
        if reached(assoc.max_submit_jobs, mine) {
            return Some("MaxSubmitJobs".into());
        }
        if reached(assoc.grp_submit_jobs, mine) {
            return Some("GrpSubmitJobs".into());
        }
        let q = self.qos.get(job.qos)?;
        if reached(q.max_submit_jobs_per_user, in_qos_user) {
            return Some("MaxSubmitJobsPerUser".into());
        }
        if reached(q.grp_submit_jobs, in_qos) {
            return Some("QOS GrpSubmitJobs".into());
        }
        if reached(q.max_submit_jobs_per_account, in_account) {
            return Some("MaxSubmitJobsPerAccount".into());
        }
        if q.deny_on_limit {
            return per_job_reason(&assoc, Some(q), job.time_limit, job.uses);
        }
        None
    }

    /// The smallest `MaxWall` of the user's association and the QOS
    /// (minutes): the limit a job without one gets.
    pub fn default_wall(
        &self,
        user: &str,
        account: &str,
        partition: &str,
        qos: &str,
    ) -> Option<u64> {
        let a = self.effective(user, account, partition)?;
        let q = self.qos.get(qos).and_then(|q| q.max_wall);
        [a.max_wall, q].into_iter().flatten().min()
    }
}

fn reached(limit: Option<u64>, used: u64) -> bool {
    limit.is_some_and(|l| used >= l)
}

/// The reason a per-job limit (wall time, TRES per job) keeps this job back.
fn per_job_reason(
    assoc: &AssocLimits,
    qos: Option<&QosLimits>,
    time_limit: Option<u32>,
    job: Use,
) -> Option<String> {
    let none = Use::default();
    let wall_over =
        |max: Option<u64>| matches!((max, time_limit), (Some(m), Some(t)) if u64::from(t) > m);
    if let Some(q) = qos {
        if wall_over(q.max_wall) {
            return Some("QOSMaxWallDurationPerJobLimit".into());
        }
        if let Some(t) = q.max_tres_per_job.over(none, job) {
            return Some(format!("QOSMax{t}PerJobLimit"));
        }
    }
    if wall_over(assoc.max_wall) {
        return Some("AssocMaxWallDurationPerJobLimit".into());
    }
    assoc
        .max_tres
        .over(none, job)
        .map(|t| format!("AssocMax{t}PerJobLimit"))
}

/// What running jobs use, per association, account, QOS, QOS × user and
/// QOS × account, and CPU-minutes (recorded plus what running jobs may
/// still use) per user association and per account.
#[derive(Debug, Default, Clone)]
pub struct Usage {
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
    /// Usage as of `now`, starting from CPU-seconds already recorded per
    /// (user, account).
    pub fn new<'b>(
        book: &Book,
        recorded: impl Iterator<Item = (&'b str, &'b str, u64)>,
        now: i64,
    ) -> Usage {
        let mut u = Usage {
            now,
            ..Usage::default()
        };
        for (user, account, secs) in recorded {
            let m = secs / 60;
            *u.minutes_user
                .entry((user.to_string(), account.to_string()))
                .or_default() += m;
            for (a, _) in book.chain(account) {
                *u.minutes_account.entry(a.to_string()).or_default() += m;
            }
        }
        u
    }

    /// Count a job that runs (suspended ones count too, as in Slurm).
    pub fn charge(&mut self, book: &Book, j: &Job) {
        let x = j.uses;
        let m = self.job_minutes(j);
        let key = (j.user.to_string(), j.account.to_string());
        *self.minutes_user.entry(key.clone()).or_default() += m;
        self.user_assoc.entry(key).or_default().add(x);
        for (a, _) in book.chain(j.account) {
            *self.minutes_account.entry(a.to_string()).or_default() += m;
            self.account.entry(a.to_string()).or_default().add(x);
        }
        self.qos.entry(j.qos.to_string()).or_default().add(x);
        self.qos_user
            .entry((j.qos.to_string(), j.user.to_string()))
            .or_default()
            .add(x);
        self.qos_account
            .entry((j.qos.to_string(), j.account.to_string()))
            .or_default()
            .add(x);
    }

    /// CPU-minutes a job may still use: what is left of its time limit
    /// when it runs, its whole limit when it waits, an hour without one.
    fn job_minutes(&self, j: &Job) -> u64 {
        let mins = match (j.time_limit, j.running_since) {
            (Some(t), Some(s)) => ((s + i64::from(t) * 60 - self.now).max(0) / 60) as u64,
            (Some(t), None) => u64::from(t),
            (None, _) => 60,
        };
        mins * j.uses.cpu
    }

    /// Why the limits keep pending job `j` back (Slurm's reason), if they
    /// do; a job let through is counted, so later ones see it running.
    /// A job without an association is not held here (submission refuses
    /// those).
    pub fn hold(&mut self, book: &Book, j: &Job) -> Option<String> {
        let x = j.uses;
        let assoc = book.effective(j.user, j.account, j.partition)?;
        let q = book.qos.get(j.qos);
        if let Some(r) = per_job_reason(&assoc, q, j.time_limit, x) {
            return Some(r);
        }
        let get = |m: &HashMap<(String, String), Use>, a: &str, b: &str| {
            m.get(&(a.to_string(), b.to_string()))
                .copied()
                .unwrap_or_default()
        };
        if let Some(q) = q {
            let me = get(&self.qos_user, j.qos, j.user);
            if reached(q.max_jobs_per_user, me.jobs) {
                return Some("QOSMaxJobsPerUserLimit".into());
            }
            if let Some(t) = q.max_tres_per_user.over(me, x) {
                return Some(format!("QOSMax{t}PerUserLimit"));
            }
            if reached(
                q.max_jobs_per_account,
                get(&self.qos_account, j.qos, j.account).jobs,
            ) {
                return Some("QOSMaxJobsPerAccountLimit".into());
            }
            let all = self.qos.get(j.qos).copied().unwrap_or_default();
            if reached(q.grp_jobs, all.jobs) {
                return Some("QOSGrpJobsLimit".into());
            }
            if let Some(t) = q.grp_tres.over(all, x) {
                return Some(format!("QOSGrp{t}Limit"));
            }
        }
        let mine = get(&self.user_assoc, j.user, j.account);
        if reached(assoc.max_jobs, mine.jobs) {
            return Some("AssocMaxJobsLimit".into());
        }
        if reached(assoc.grp_jobs, mine.jobs) {
            return Some("AssocGrpJobsLimit".into());
        }
        if let Some(t) = assoc.grp_tres.over(mine, x) {
            return Some(format!("AssocGrp{t}Limit"));
        }
        // GrpTRESMins (cpu): recorded usage plus what running jobs and this
        // one may still use stays within it, at every level.
        let this_min = self.job_minutes(j);
        let mine_min = self
            .minutes_user
            .get(&(j.user.to_string(), j.account.to_string()))
            .copied()
            .unwrap_or(0);
        if assoc
            .grp_cpu_mins
            .is_some_and(|max| mine_min + this_min > max)
        {
            return Some("AssocGrpCPUMinutesLimit".into());
        }
        let chain = book.chain(j.account);
        for (name, a) in &chain {
            let used = self.minutes_account.get(*name).copied().unwrap_or(0);
            if a.limits
                .grp_cpu_mins
                .is_some_and(|max| used + this_min > max)
            {
                return Some("AssocGrpCPUMinutesLimit".into());
            }
        }
        for (name, a) in &chain {
            let used = self.account.get(*name).copied().unwrap_or_default();
            if reached(a.limits.grp_jobs, used.jobs) {
                return Some("AssocGrpJobsLimit".into());
            }
            if let Some(t) = a.limits.grp_tres.over(used, x) {
                return Some(format!("AssocGrp{t}Limit"));
            }
        }
        self.charge(book, j);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Account `phys` (GrpTRES cpu=8) under `root`, user alice in it
    /// (MaxSubmitJobs=3), QOS `normal` (MaxJobsPerUser=2).
    fn book() -> Book {
        let mut b = Book::default();
        b.add_account("root", None, AssocLimits::default());
        b.add_account(
            "phys",
            Some("root"),
            AssocLimits {
                grp_tres: Tres::parse("cpu=8"),
                ..Default::default()
            },
        );
        b.add_user(
            "alice",
            "phys",
            "",
            AssocLimits {
                max_submit_jobs: Some(3),
                ..Default::default()
            },
        );
        b.add_qos(
            "normal",
            QosLimits {
                max_jobs_per_user: Some(2),
                ..Default::default()
            },
        );
        b
    }

    fn job(cpus: u64, running: bool) -> Job<'static> {
        Job {
            user: "alice",
            account: "phys",
            partition: "debug",
            qos: "normal",
            time_limit: Some(10),
            running_since: running.then_some(0),
            uses: Use {
                jobs: 1,
                cpu: cpus,
                node: 1,
                mem: 0,
            },
        }
    }

    #[test]
    fn tres_strings() {
        assert_eq!(tres_map("cpu=4,mem=2G")["mem"], 2048);
        assert_eq!(tres_map("mem=2048K")["mem"], 2);
        let t = Tres::parse("cpu=4,gres/gpu=2,junk,node=x");
        assert_eq!((t.cpu, t.node, t.mem), (Some(4), None, None));
    }

    #[test]
    fn submission_counts_unfinished_jobs() {
        let b = book();
        let two = [job(1, true), job(1, false)];
        assert_eq!(
            b.refuse_submission(&job(1, false), two.iter().copied()),
            None
        );
        let three = [job(1, true), job(1, false), job(1, false)];
        assert_eq!(
            b.refuse_submission(&job(1, false), three.iter().copied())
                .as_deref(),
            Some("MaxSubmitJobs")
        );
        let mut stranger = job(1, false);
        stranger.user = "bob";
        assert_eq!(b.refuse_submission(&stranger, three.iter().copied()), None);
    }

    #[test]
    fn running_jobs_hold_later_ones_with_slurm_reasons() {
        let mut b = book();
        let mut u = Usage::new(&b, std::iter::empty(), 0);
        u.charge(&b, &job(1, true));
        assert_eq!(u.hold(&b, &job(1, false)), None);
        assert_eq!(
            u.hold(&b, &job(1, false)).as_deref(),
            Some("QOSMaxJobsPerUserLimit")
        );
        b.add_qos("normal", QosLimits::default());
        let mut u = Usage::new(&b, std::iter::empty(), 0);
        u.charge(&b, &job(1, true));
        assert_eq!(
            u.hold(&b, &job(8, false)).as_deref(),
            Some("AssocGrpCpuLimit")
        );
        // GrpTRESMins: 100 cpu-minutes recorded against 120.
        b.add_account(
            "phys",
            Some("root"),
            AssocLimits {
                grp_cpu_mins: Some(120),
                ..Default::default()
            },
        );
        let mut u = Usage::new(&b, [("alice", "phys", 100 * 60)].into_iter(), 0);
        assert_eq!(u.hold(&b, &job(1, false)), None);
        assert_eq!(
            u.hold(&b, &job(4, false)).as_deref(),
            Some("AssocGrpCPUMinutesLimit")
        );
    }

    #[test]
    fn max_limits_are_inherited_grp_limits_checked_up_the_tree() {
        let mut b = Book::default();
        b.add_account(
            "root",
            None,
            AssocLimits {
                grp_jobs: Some(3),
                max_wall: Some(60),
                ..Default::default()
            },
        );
        b.add_account(
            "chem",
            Some("root"),
            AssocLimits {
                max_jobs: Some(2),
                ..Default::default()
            },
        );
        b.add_user("bob", "chem", "", AssocLimits::default());
        b.add_user(
            "bob",
            "chem",
            "gpu",
            AssocLimits {
                max_jobs: Some(1),
                ..Default::default()
            },
        );
        let e = b.effective("bob", "chem", "cpu").unwrap();
        assert_eq!(
            (e.max_jobs, e.max_wall, e.grp_jobs),
            (Some(2), Some(60), None)
        );
        assert_eq!(b.effective("bob", "chem", "gpu").unwrap().max_jobs, Some(1));
        assert_eq!(b.default_wall("bob", "chem", "cpu", "none"), Some(60));
        let bob = |p| Job {
            user: "bob",
            account: "chem",
            partition: p,
            qos: "normal",
            time_limit: Some(90),
            running_since: None,
            uses: Use {
                jobs: 1,
                cpu: 1,
                node: 1,
                mem: 0,
            },
        };
        let mut u = Usage::new(&b, std::iter::empty(), 0);
        assert_eq!(
            u.hold(&b, &bob("cpu")).as_deref(),
            Some("AssocMaxWallDurationPerJobLimit")
        );
        let short = |p| Job {
            time_limit: Some(30),
            ..bob(p)
        };
        assert_eq!(u.hold(&b, &short("cpu")), None);
        assert_eq!(u.hold(&b, &short("cpu")), None);
        assert_eq!(
            u.hold(&b, &short("cpu")).as_deref(),
            Some("AssocMaxJobsLimit")
        );
    }

    proptest! {
        /// Whatever the order and sizes, the jobs let through never take a
        /// count past a limit: per user, per QOS and per account tree.
        #[test]
        fn what_is_let_through_stays_within_every_limit(
            cpus in proptest::collection::vec(1u64..6, 1..30),
            grp_cpu in 1u64..20,
            per_user in 1u64..6,
        ) {
            let mut b = Book::default();
            b.add_account("root", None, AssocLimits { grp_tres: Tres { cpu: Some(grp_cpu), ..Tres::default() }, ..Default::default() });
            b.add_user("u", "root", "", AssocLimits::default());
            b.add_qos("q", QosLimits { max_jobs_per_user: Some(per_user), ..Default::default() });
            let mut u = Usage::new(&b, std::iter::empty(), 0);
            let (mut n, mut c) = (0u64, 0u64);
            for &k in &cpus {
                let j = Job { user: "u", account: "root", partition: "", qos: "q", time_limit: None, running_since: None, uses: Use { jobs: 1, cpu: k, node: 1, mem: 0 } };
                if u.hold(&b, &j).is_none() {
                    n += 1;
                    c += k;
                }
            }
            prop_assert!(n <= per_user);
            prop_assert!(c <= grp_cpu);
        }
    }
}
