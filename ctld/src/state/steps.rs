//! Job steps: created (with their credentials), cancelled, completed and
//! their usage.

use super::*;

impl Controller {
    pub(super) fn create_step(
        &mut self,
        who: Caller,
        r: StepRequest,
        now: i64,
    ) -> Result<Response, RpcError> {
        let Some(j) = self.p.jobs.get(&r.job_id) else {
            return err(SlurmError::InvalidJobId);
        };
        if !who.privileged && j.user_id != who.uid {
            return err(SlurmError::AccessDenied);
        }
        if j.state == JobState::Suspended {
            return err_detail(
                SlurmError::Disabled,
                format!(
                    "job {} is suspended: no new steps until it resumes",
                    j.job_id
                ),
            );
        }
        if j.state != JobState::Running {
            return err(if j.state == JobState::Pending {
                SlurmError::JobPending
            } else {
                SlurmError::AlreadyDone
            });
        }
        let Some(key) = self.key.clone() else {
            return err(SlurmError::InternalError);
        };
        // Nodes: those named (in the job), else the first N, else all.
        let mut nodes: Vec<usize> = (0..j.alloc.nodes.len()).collect();
        if !r.nodelist.is_empty() {
            let mut picked = Vec::new();
            for n in &r.nodelist {
                match j.alloc.nodes.iter().position(|x| x == n) {
                    Some(k) => picked.push(k),
                    None => {
                        return err_detail(
                            SlurmError::RequestedNodeConfigUnavailable,
                            format!("node {n} is not in job {}", j.job_id),
                        )
                    }
                }
            }
            picked.sort_unstable();
            picked.dedup();
            nodes = picked;
        }
        nodes.retain(|&k| !r.exclude.contains(&j.alloc.nodes[k]));
        // -r/--relative=N: the job's first N nodes are not the step's.
        if let Some(rel) = r.relative {
            if rel as usize >= j.alloc.nodes.len() {
                return err_detail(
                    SlurmError::TooManyRequestedNodes,
                    format!(
                        "--relative={rel}: job {} has {} node(s)",
                        j.job_id,
                        j.alloc.nodes.len()
                    ),
                );
            }
            nodes.retain(|&k| k >= rel as usize);
        }
        // `--ntasks-per-core=K`: each task a core's threads / K at least
        // (on the job's nodes with the most threads a core).
        let threads = if self.conf.allocates_threads() {
            1
        } else {
            j.alloc
                .nodes
                .iter()
                .filter_map(|n| {
                    self.node_index
                        .get(n)
                        .map(|&i| self.nodes[i].threads_per_core)
                })
                .max()
                .unwrap_or(1)
        };
        let cpt = slurm_plugins::view::cpus_per_task_with(
            r.cpus_per_task.unwrap_or(1),
            r.ntasks_per_core,
            threads,
        );
        let want_nodes = match (r.min_nodes, r.ntasks) {
            (Some(n), _) => n as usize,
            (None, Some(t)) if r.nodelist.is_empty() => {
                // As few nodes as hold the tasks, in order.
                let mut cap = 0u32;
                let mut k = 0;
                while k < nodes.len() && cap < t {
                    cap += (j.alloc.cpus[nodes[k]] / cpt).max(1);
                    k += 1;
                }
                k.max(1)
            }
            _ => nodes.len(),
        };
        if want_nodes == 0 || want_nodes > nodes.len() {
            return err(SlurmError::TooManyRequestedNodes);
        }
        nodes.truncate(want_nodes);
        let ntasks = match (r.ntasks, r.ntasks_per_node) {
            (Some(t), _) => t,
            (None, Some(p)) => p * nodes.len() as u32,
            (None, None) if r.min_nodes.is_some() || !r.nodelist.is_empty() => nodes.len() as u32,
            (None, None) => j.num_tasks.max(nodes.len() as u32),
        };
        if (ntasks as usize) < nodes.len() {
            return err_detail(SlurmError::TooManyRequestedNodes, "fewer tasks than nodes");
        }
        let mut per_node = vec![0u32; nodes.len()];
        if let Some(p) = r.ntasks_per_node {
            per_node.iter_mut().for_each(|x| *x = p);
            if p * nodes.len() as u32 != ntasks {
                // -n wins; spread it as evenly as --ntasks-per-node allows.
                let mut left = ntasks;
                for x in per_node.iter_mut() {
                    *x = left.min(p);
                    left -= *x;
                }
                if left > 0 {
                    return err(SlurmError::TooManyRequestedCpus);
                }
            }
        } else {
            per_node.iter_mut().for_each(|x| *x = 1);
            let mut left = ntasks - nodes.len() as u32;
            for (k, &n) in nodes.iter().enumerate() {
                let cap = (j.alloc.cpus[n] / cpt).max(1);
                let add = left.min(cap.saturating_sub(1));
                per_node[k] += add;
                left -= add;
            }
            // More tasks than cpus: overcommit round-robin, as --overcommit.
            let mut k = 0;
            while left > 0 {
                per_node[k % nodes.len()] += 1;
                left -= 1;
                k += 1;
            }
        }
        let cyclic = r
            .distribution
            .as_deref()
            .is_some_and(|d| d.starts_with("cyclic"));
        let mut tasks: Vec<Vec<u32>> = vec![Vec::new(); nodes.len()];
        if cyclic {
            let mut t = 0;
            while t < ntasks {
                for (k, list) in tasks.iter_mut().enumerate() {
                    if (list.len() as u32) < per_node[k] && t < ntasks {
                        list.push(t);
                        t += 1;
                    }
                }
            }
        } else {
            let mut t = 0;
            for (k, list) in tasks.iter_mut().enumerate() {
                for _ in 0..per_node[k] {
                    list.push(t);
                    t += 1;
                }
            }
        }
        let names: Vec<String> = nodes.iter().map(|&k| j.alloc.nodes[k].clone()).collect();
        let step_id = j
            .steps
            .iter()
            .filter(|s| s.step_id != BATCH_STEP && s.step_id != slurm_proto::EXTERN_STEP)
            .count() as u32;
        let mut cred = StepCred {
            job_id: j.job_id,
            step_id,
            uid: j.user_id,
            gid: j.group_id,
            user_name: j.user_name.clone(),
            nodes: names.clone(),
            // `AuthInfo=cred_expire` (Slurm's 120 s by default): a step's
            // credential only has to reach its nodes.
            expires: now
                + self
                    .conf
                    .auth_info_value("cred_expire")
                    .and_then(|v| v.parse::<i64>().ok())
                    .filter(|v| *v > 0)
                    .unwrap_or(120),
            alloc: j.alloc.clone(),
            partition: j.partition.clone(),
            account: j.account.clone(),
            job_start: j.run(),
            tasks: tasks.clone(),
            cpus_per_task: cpt,
            job_cpus: nodes.iter().map(|&k| j.alloc.cpus[k]).collect(),
            sig: String::new(),
        };
        key.sign_step(&mut cred);
        let layout = StepLayout {
            job_id: j.job_id,
            step_id,
            addrs: names
                .iter()
                .map(|n| self.node_addr(n).unwrap_or_default())
                .collect(),
            nodes: names.clone(),
            tasks,
            cpus_per_task: cpt,
            job_cpus: nodes.iter().map(|&k| j.alloc.cpus[k]).collect(),
            cred,
        };
        let rec = StepRecord {
            step_id,
            name: r.name.clone(),
            state: JobState::Running,
            nodes: names,
            ntasks,
            tasks_per_node: per_node,
            cpus_per_task: cpt,
            start_time: now,
            end_time: None,
            exit_status: 0,
            usage: None,
            usage_node: None,
            // `-t 0` (as none): no limit of its own.
            time_limit: r.time_limit.filter(|m| *m > 0),
            job_secs_at_start: Some(j.run_secs(now)),
        };
        let id = r.job_id;
        if slurm_common::debugflags::on(slurm_common::debugflags::STEPS) {
            tracing::info!(
                "Steps: StepId={id}.{step_id} created: {} task(s) on {}",
                rec.ntasks,
                slurm_common::hostlist::compress(&rec.nodes)
            );
        }
        if let Some(j) = self.job_mut(id) {
            j.steps.push(rec);
        }
        self.save_job(id);
        Ok(Response::StepCreated(Box::new(layout)))
    }

    pub(super) fn cancel_step(
        &mut self,
        who: Caller,
        id: JobId,
        step_id: u32,
        signal: Option<i32>,
    ) -> Result<Response, RpcError> {
        let j = self.managed_job(who, id)?;
        let Some(st) = j.steps.iter().find(|s| s.step_id == step_id) else {
            return err(SlurmError::InvalidJobId);
        };
        if st.state != JobState::Running {
            return err(SlurmError::AlreadyDone);
        }
        let signal = signal.unwrap_or(libc::SIGKILL);
        let nodes = st.nodes.clone();
        let run = j.run();
        for n in nodes {
            if let Some(addr) = self.node_addr(&n) {
                self.effects.push(Effect::SignalStep {
                    node: n.clone(),
                    addr,
                    job_id: id,
                    step_id,
                    signal,
                    cause: slurm_proto::TermCause::None,
                    job_start: run,
                });
            }
        }
        Ok(Response::Ok)
    }

    pub(super) fn step_complete(
        &mut self,
        who: Caller,
        id: JobId,
        step_id: u32,
        status: i32,
        job_start: Option<i64>,
        now: i64,
    ) -> Result<Response, RpcError> {
        let j = self.owned_job(who, id)?;
        // A step of an earlier run (the job was requeued since): not the
        // next run's step of the same number.
        if job_start.is_some() && job_start != j.run() {
            return err(SlurmError::AlreadyDone);
        }
        let Some(j) = self.job_mut(id) else {
            return err(SlurmError::InvalidJobId);
        };
        let Some(st) = j.steps.iter_mut().find(|s| s.step_id == step_id) else {
            return err(SlurmError::InvalidJobId);
        };
        if st.state == JobState::Timeout && st.exit_status == 0 {
            // Ended by its time limit: TIMEOUT stays, with how it ended.
            st.exit_status = status;
        }
        if st.state == JobState::Running {
            let (code, sig) = wait_status_pair(status);
            st.state = if code == 0 && sig == 0 {
                JobState::Completed
            } else if sig != 0 && sig != libc::SIGKILL && sig != libc::SIGTERM {
                JobState::Failed
            } else if sig != 0 {
                JobState::Cancelled
            } else {
                JobState::Failed
            };
            st.exit_status = status;
            st.end_time = Some(now);
            if slurm_common::debugflags::on(slurm_common::debugflags::STEPS) {
                tracing::info!("Steps: StepId={id}.{step_id} ended {}", st.state.name());
            }
        }
        self.save_job(id);
        Ok(Response::Ok)
    }

    /// `scontrol update StepId=J[.S] TimeLimit=M`: the job's owner, root or
    /// SlurmUser (as Slurm's, the owner may raise it: the job's own limit
    /// still ends every step). Without a step, every running step of the
    /// job (not its batch or extern step, which the job's limit governs);
    /// with one, that step. A time limit of 0 changes nothing (Slurm's
    /// would end every step at once without a step id). `u32::MAX`
    /// (Slurm's INFINITE): unlimited.
    pub(super) fn update_step(
        &mut self,
        who: Caller,
        id: JobId,
        step_id: Option<u32>,
        time_limit: u32,
    ) -> Result<Response, RpcError> {
        let j = match self.p.jobs.get(&id) {
            // Operators too, as Slurm's.
            Some(j) if who.operator => j,
            _ => self.job_of_owner(who, id, SlurmError::UserIdMissing)?,
        };
        if let Some(s) = step_id {
            if !j.steps.iter().any(|st| st.step_id == s) {
                return err(SlurmError::InvalidJobId);
            }
        }
        let Some(j) = self.job_mut(id) else {
            return err(SlurmError::InvalidJobId);
        };
        let mut changed = 0;
        for st in j.steps.iter_mut() {
            let own =
                st.step_id != slurm_proto::BATCH_STEP && st.step_id != slurm_proto::EXTERN_STEP;
            let chosen = time_limit > 0
                && own
                && match step_id {
                    Some(s) => st.step_id == s,
                    None => st.state == JobState::Running,
                };
            if chosen {
                st.time_limit = (time_limit != u32::MAX).then_some(time_limit);
                changed += 1;
                tracing::info!(
                    job = id,
                    step = st.step_id,
                    time_limit,
                    "step time limit updated"
                );
            }
        }
        if changed > 0 {
            self.save_job(id);
        }
        Ok(Response::Ok)
    }

    /// Running steps past their own time limit (whole minutes run, as
    /// Slurm counts them) end TIMEOUT: each node tells the step's srun
    /// (`*** STEP 5.0 ON n1 CANCELLED AT ... DUE TO TIME LIMIT ***`) and
    /// ends its tasks (SIGTERM, SIGKILL after KillWait). The job goes on.
    pub(super) fn end_timed_out_steps(&mut self, now: i64) {
        let due: Vec<(JobId, u32, Vec<String>, Option<i64>)> = self
            .p
            .jobs
            .values()
            .filter(|j| j.state == JobState::Running)
            .flat_map(|j| {
                // Its run time leaves out its job's suspensions.
                let job_secs = j.run_secs(now);
                j.steps
                    .iter()
                    .filter(|st| st.state == JobState::Running)
                    .filter(|st| {
                        st.step_id != slurm_proto::BATCH_STEP
                            && st.step_id != slurm_proto::EXTERN_STEP
                    })
                    .filter(move |st| {
                        let ran = match st.job_secs_at_start {
                            Some(at) => job_secs - at,
                            None => now - st.start_time,
                        };
                        st.time_limit.is_some_and(|m| ran / 60 >= i64::from(m))
                    })
                    .map(|st| (j.job_id, st.step_id, st.nodes.clone(), j.run()))
            })
            .collect();
        for (id, step_id, nodes, run) in due {
            tracing::info!(job = id, step = step_id, "step has timed out");
            if slurm_common::debugflags::on(slurm_common::debugflags::STEPS) {
                tracing::info!("Steps: StepId={id}.{step_id} ended TIMEOUT (its own time limit)");
            }
            if let Some(j) = self.job_mut(id) {
                if let Some(st) = j.steps.iter_mut().find(|s| s.step_id == step_id) {
                    st.state = JobState::Timeout;
                    st.end_time = Some(now);
                }
            }
            for n in nodes {
                if let Some(addr) = self.node_addr(&n) {
                    self.effects.push(Effect::SignalStep {
                        node: n,
                        addr,
                        job_id: id,
                        step_id,
                        signal: libc::SIGTERM,
                        cause: slurm_proto::TermCause::TimeLimit,
                        job_start: run,
                    });
                }
            }
            self.save_job(id);
        }
    }

    // ------------------------------------------------------------------
    // Ending jobs

    /// Add one node's usage to a step: CPU times add up, MaxRSS is the
    /// largest of any node (and says which).
    pub(super) fn step_usage(
        &mut self,
        id: JobId,
        step_id: u32,
        node: &str,
        u: TaskUsage,
        job_start: Option<i64>,
    ) {
        // Only a node the job runs on reports its steps' usage, and only
        // for this run's steps.
        if !self.p.jobs.get(&id).is_some_and(|j| {
            j.alloc.nodes.iter().any(|n| n == node) && (job_start.is_none() || job_start == j.run())
        }) {
            return;
        }
        let Some(st) = self
            .job_mut(id)
            .and_then(|j| j.steps.iter_mut().find(|s| s.step_id == step_id))
        else {
            return;
        };
        let mut total = st.usage.unwrap_or_default();
        total.cpu_usec += u.cpu_usec;
        total.user_usec += u.user_usec;
        total.system_usec += u.system_usec;
        if u.max_rss_bytes >= total.max_rss_bytes {
            total.max_rss_bytes = u.max_rss_bytes;
            st.usage_node = Some(node.to_string());
        }
        st.usage = Some(total);
        self.save_job(id);
    }
}
