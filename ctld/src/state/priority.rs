//! Job priority: `priority/multifactor` (fair share, age, size, partition,
//! QOS factors) and what `sprio` and `sshare` read of it.

use super::*;

impl Controller {
    pub(super) fn shares(&self) -> Vec<ShareInfo> {
        let Some(m) = &self.multifactor else {
            return Vec::new();
        };
        let rows = &m.report().rows;
        let names = self.tres_names();
        let run = self.tres_run_secs(rows, &names);
        // Each row's accounting association, found once (a user's: the
        // one without a partition first).
        let mut recs: HashMap<(&str, &str), &slurm_proto::acct::AssocRec> = HashMap::new();
        for a in self.assocs.iter().flat_map(|c| c.assocs.iter()) {
            let key = (a.account.as_str(), a.user.as_str());
            match recs.get(&key) {
                Some(have) if have.partition.is_empty() => {}
                _ => {
                    recs.insert(key, a);
                }
            }
        }
        let rec = |r: &slurm_plugins::fairshare::ShareRow| {
            recs.get(&(r.account.as_str(), r.user.as_deref().unwrap_or("")))
                .copied()
        };
        rows.iter()
            .zip(run)
            .map(|(r, run)| ShareInfo {
                account: r.account.clone(),
                user: r.user.clone(),
                depth: r.depth as u32,
                raw_shares: r.raw_shares.to_string(),
                norm_shares: r.norm_shares,
                raw_usage: r.raw_usage,
                norm_usage: r.norm_usage,
                effective_usage: r.effective_usage,
                fairshare: r.fairshare,
                level_fs: r.level_fs.map(|v| if v.is_finite() { v } else { f64::MAX }),
                partition: r
                    .user
                    .as_deref()
                    .and_then(|u| self.assoc_partition(u, &r.account)),
                assoc_id: rec(r).map(|a| a.id),
                tres_grp_mins: tres_limits(
                    rec(r)
                        .and_then(|a| a.limits.grp_tres_mins.as_deref())
                        .unwrap_or(""),
                    &names,
                ),
                tres_run_secs: run,
                tres_names: names.clone(),
            })
            .collect()
    }

    /// The TRES sshare lists (Slurm's order): the ones every cluster
    /// tracks, then `AccountingStorageTRES`'s others as written there.
    fn tres_names(&self) -> Vec<String> {
        let mut names: Vec<String> = [
            "cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages",
        ]
        .map(String::from)
        .to_vec();
        let extra = self.conf.get("AccountingStorageTRES").unwrap_or("");
        for t in extra.split(',').map(|t| t.trim().to_ascii_lowercase()) {
            if !t.is_empty() && !names.contains(&t) {
                names.push(t);
            }
        }
        names
    }

    /// Per row, the TRES-seconds left in its running (and suspended) jobs'
    /// time limits as of the last change, its children's included, as
    /// Slurm's `grp_used_tres_run_secs` (a job without a limit counts
    /// Slurm's INFINITE minutes); all 0 unless limits are enforced
    /// (`AccountingStorageEnforce=limits`), as Slurm keeps it only then.
    fn tres_run_secs(
        &self,
        rows: &[slurm_plugins::fairshare::ShareRow],
        names: &[String],
    ) -> Vec<Vec<u64>> {
        let mut run = vec![vec![0u64; names.len()]; rows.len()];
        if !self.enforce.limits {
            return run;
        }
        // Account rows by path (a user row has no children; a sub-account
        // may share its name and so its path).
        let by_path: HashMap<&str, usize> = rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.user.is_none())
            .map(|(i, r)| (r.path.as_str(), i))
            .collect();
        let user_rows: HashMap<(&str, &str), usize> = rows
            .iter()
            .enumerate()
            .filter_map(|(i, r)| Some(((r.account.as_str(), r.user.as_deref()?), i)))
            .collect();
        let now = self.last_update;
        // The jobs holding nodes (and any changed since they were counted):
        // the running ones are among them, not the whole queue.
        let mut ids: Vec<JobId> = self.shares.keys().chain(&self.touched).copied().collect();
        ids.sort_unstable();
        ids.dedup();
        for j in ids.iter().filter_map(|id| self.p.jobs.get(id)) {
            if !matches!(j.state, JobState::Running | JobState::Suspended) {
                continue;
            }
            let Some(start) = j.start_time else { continue };
            let account = Self::account_of(j);
            let Some(&first) = user_rows.get(&(account.as_str(), j.user_name.as_str())) else {
                continue;
            };
            // Slurm's INFINITE minutes for a job without a limit.
            let limit = j.time_limit.map_or(4_294_967_294u64, u64::from);
            let end = (start as i128) + i128::from(limit) * 60;
            let left = (end - i128::from(now.max(start))).clamp(0, i128::from(u64::MAX)) as u64;
            let tres = job_tres(j, names);
            // Its row and every row above it, up to root.
            let mut at = Some(first);
            while let Some(i) = at {
                for (slot, n) in run[i].iter_mut().zip(&tres) {
                    *slot = slot.saturating_add(n.saturating_mul(left));
                }
                at = rows[i]
                    .path
                    .rsplit_once('/')
                    .and_then(|(parent, _)| by_path.get(parent).copied());
            }
        }
        run
    }

    /// The partition of user `user`'s association with `account`, when it
    /// has one (the fair-share tree has one node per user and account).
    fn assoc_partition(&self, user: &str, account: &str) -> Option<String> {
        self.assocs
            .as_ref()?
            .assocs
            .iter()
            .find(|a| a.user == user && a.account == account && !a.partition.is_empty())
            .map(|a| a.partition.clone())
    }

    pub(super) fn account_of(j: &JobRecord) -> String {
        if j.account.is_empty() {
            "default".to_string()
        } else {
            j.account.clone()
        }
    }

    /// Charge running jobs' CPU time to fair share, then recompute pending
    /// jobs' priorities when the calculation period has passed.
    pub(super) fn multifactor_tick(&mut self, now: i64) {
        let Some(mut m) = self.multifactor.take() else {
            return;
        };
        let mut seen = Vec::new();
        for j in self.p.jobs.values() {
            let Some(start) = j.start_time.filter(|_| j.state != JobState::Pending) else {
                continue;
            };
            let until = match j.state {
                JobState::Running => now,
                // Charged up to the suspension; resuming restarts the clock.
                JobState::Suspended => j.suspend_time.unwrap_or(now),
                _ => j.end_time.unwrap_or(now),
            };
            let from = self.charged.get(&j.job_id).copied().unwrap_or(start);
            seen.push((j.job_id, until.max(from)));
            if until > from {
                if let Err(e) = m.tree.record_job_usage(
                    &j.user_name,
                    &Self::account_of(j),
                    j.alloc.total_cpus(),
                    (until - from) as u64,
                    now,
                ) {
                    tracing::warn!("fair share usage of job {}: {e}", j.job_id);
                }
            }
        }
        // Every job is charged up to where it has run (ended jobs stay
        // charged until they are purged).
        self.charged = seen.into_iter().collect();
        let recalc = m.tick(now);
        self.multifactor = Some(m);
        if recalc {
            self.recompute_priorities(now);
        }
    }

    pub(super) fn priority_context(&self) -> slurm_plugins::priority::PriorityContext {
        slurm_plugins::priority::PriorityContext {
            total_nodes: self.nodes.len() as u32,
            total_cpus: self.nodes.iter().map(|n| n.cpus).sum(),
            total_mem_mb: self.nodes.iter().map(|n| n.real_memory).sum(),
            tres_totals: Vec::new(),
            max_partition_job_factor: self
                .partitions
                .iter()
                .map(|p| p.priority_job_factor)
                .max()
                .unwrap_or(1),
            max_qos_priority: 0,
            max_assoc_priority: 0,
        }
    }

    /// The multifactor priority of a pending job (`None` under priority/basic).
    pub(super) fn multifactor_priority(&self, j: &JobRecord, now: i64) -> Option<JobPriority> {
        self.multifactor_priority_in(j, now, &self.priority_context())
    }

    /// [`Self::multifactor_priority`] against the cluster's totals `ctx`
    /// (made once for many jobs: they are sums over every node).
    fn multifactor_priority_in(
        &self,
        j: &JobRecord,
        now: i64,
        ctx: &slurm_plugins::priority::PriorityContext,
    ) -> Option<JobPriority> {
        // A priority an operator fixed stays (as Slurm's direct_set_prio).
        if j.desc.priority.is_some_and(|p| p > 0) {
            return None;
        }
        let m = self.multifactor.as_ref()?;
        let part = self.partitions.iter().find(|p| p.name == j.partition);
        let input = slurm_plugins::priority::PriorityInput {
            job_id: j.job_id,
            partition: j.partition.clone(),
            submit_time: j.submit_time,
            eligible_time: j.eligible_time.filter(|e| *e <= now),
            held: j.held.is_some(),
            nice: j.desc.nice.unwrap_or(0),
            site_factor: 0,
            req_nodes: j.min_nodes,
            req_cpus: j.req_cpus,
            req_mem_mb: j.desc.mem_per_node.unwrap_or(0) * j.min_nodes as u64,
            time_limit: j.time_limit,
            tres: Vec::new(),
            partition_priority_job_factor: part.map_or(1, |p| p.priority_job_factor),
            qos_priority: 0,
            assoc_priority: 0,
            assoc_path: m
                .report()
                .rows
                .iter()
                .find(|r| {
                    r.user.as_deref() == Some(j.user_name.as_str())
                        && r.account == Self::account_of(j)
                })
                .map(|r| r.path.clone()),
            prev_priority: Some(j.priority),
        };
        let f = m.priority(&input, ctx, now);
        Some(JobPriority {
            job_id: j.job_id,
            partition: j.partition.clone(),
            user: j.user_name.clone(),
            priority: f.priority,
            site: f.site,
            age: f.age,
            assoc: f.assoc,
            fairshare: f.fairshare,
            job_size: f.job_size,
            partition_factor: f.partition,
            qos: f.qos,
            nice: f.nice,
            tres: f
                .tres
                .iter()
                .map(|(k, v)| format!("{k}={v:.2}"))
                .collect::<Vec<_>>()
                .join(","),
            account: j.account.clone(),
            qos_name: j.qos.clone(),
        })
    }

    pub(super) fn recompute_priorities(&mut self, now: i64) {
        if self.multifactor.is_none() {
            return;
        }
        let pending: Vec<JobId> = self
            .p
            .jobs
            .values()
            .filter(|j| j.state == JobState::Pending)
            .map(|j| j.job_id)
            .collect();
        // (A set: a queue of 100,000 looked up in a list for each of its
        // jobs would be 10^10 comparisons.)
        let waiting: std::collections::HashSet<JobId> = pending.iter().copied().collect();
        self.factors.retain(|id, _| waiting.contains(id));
        let ctx = self.priority_context();
        for id in pending {
            let Some(f) = self
                .p
                .jobs
                .get(&id)
                .and_then(|j| self.multifactor_priority_in(j, now, &ctx))
            else {
                continue;
            };
            let changed = self
                .p
                .jobs
                .get(&id)
                .is_some_and(|j| j.priority != f.priority);
            if changed {
                if let Some(j) = self.job_mut(id) {
                    j.priority = f.priority;
                }
                self.dirty = true;
            }
            self.factors.insert(id, f);
        }
        self.sched_needed = true;
    }

    // ------------------------------------------------------------------
    // Submission
}

/// Job `j`'s TRES, as `names` lists them (what it holds while it runs:
/// billing is its CPUs, as its accounting record says; what a job is not
/// given, such as energy, is 0).
fn job_tres(j: &JobRecord, names: &[String]) -> Vec<u64> {
    let a = &j.alloc;
    names
        .iter()
        .map(|n| match n.as_str() {
            "cpu" | "billing" => a.cpus.iter().map(|&c| u64::from(c)).sum(),
            "mem" => a.mem.iter().sum(),
            "node" => a.nodes.len() as u64,
            n => match n.strip_prefix("gres/") {
                Some(g) => {
                    let (name, kind) = match g.split_once(':') {
                        Some((name, kind)) => (name, Some(kind)),
                        None => (g, None),
                    };
                    a.gres
                        .iter()
                        .flatten()
                        .filter(|x| {
                            x.name.eq_ignore_ascii_case(name)
                                && kind.is_none_or(|k| {
                                    x.kind
                                        .as_deref()
                                        .is_some_and(|xk| xk.eq_ignore_ascii_case(k))
                                })
                        })
                        .map(|x| x.indices.len() as u64)
                        .sum()
                }
                None => 0,
            },
        })
        .collect()
}

/// A TRES limit list as slurmdbd keeps it (`cpu=600,mem=1000M,gres/gpu=2`),
/// per TRES of `names`: minutes (memory in MB-minutes), `u64::MAX` where
/// none is set.
fn tres_limits(limit: &str, names: &[String]) -> Vec<u64> {
    let mut out = vec![u64::MAX; names.len()];
    for item in limit.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((name, v)) = item.split_once('=') else {
            continue;
        };
        let name = name.trim().to_ascii_lowercase();
        let Some(i) = names.iter().position(|n| *n == name) else {
            continue;
        };
        let v = v.trim();
        // slurmdbd keeps memory with an `M` (MB); other units as written.
        let (digits, mult) = match v.chars().last().map(|c| c.to_ascii_uppercase()) {
            Some('M') => (&v[..v.len() - 1], 1),
            Some('G') => (&v[..v.len() - 1], 1024),
            Some('T') => (&v[..v.len() - 1], 1024 * 1024),
            _ => (v, 1),
        };
        if let Ok(n) = digits.parse::<u64>() {
            out[i] = n.saturating_mul(mult);
        }
    }
    out
}
