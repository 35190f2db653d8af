//! Job priority: `priority/multifactor` (fair share, age, size, partition,
//! QOS factors) and what `sprio` and `sshare` read of it.

use super::*;

impl Controller {
    pub(super) fn shares(&self) -> Vec<ShareInfo> {
        let Some(m) = &self.multifactor else {
            return Vec::new();
        };
        m.report()
            .rows
            .iter()
            .map(|r| ShareInfo {
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
            })
            .collect()
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
