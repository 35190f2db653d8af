//! Job steps: created (with their credentials), cancelled, completed and
//! their usage.

use super::*;
use slurm_proto::GresAlloc;

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
        let held = if r.overlap {
            // (`--overlap`: held from by nothing.)
            StepHoldings::none(j.alloc.nodes.len())
        } else {
            StepHoldings::of(j, now, i64::from(self.conf.kill_wait) + 60)
        };
        let (used, held_gpus, held_mem) = (held.cpus, held.gpus, held.mem);
        let ask = StepAsk {
            cand: &nodes,
            named: !r.nodelist.is_empty(),
            min_nodes: r.min_nodes,
            ntasks: r.ntasks,
            ntasks_per_node: r.ntasks_per_node,
            job_tasks: j.num_tasks,
            cpt,
            exact: r.exact,
            overcommit: r.overcommit,
            gpus: GpuNeed::of(r.gpus.as_ref()),
            max_tasks_per_node: self
                .conf
                .get("MaxTasksPerNode")
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(512),
            mem: match (r.mem_per_node, r.mem_per_cpu) {
                (Some(m), _) if m > 0 => MemNeed::PerNode(m),
                (_, Some(m)) if m > 0 => MemNeed::PerCpu(m),
                _ => MemNeed::Whole,
            },
        };
        let mem_all = &j.alloc.mem;
        let mem_free: Vec<u64> = mem_all
            .iter()
            .zip(&held_mem)
            .map(|(a, h)| a.saturating_sub(*h))
            .collect();
        let kind = r.gpus.as_ref().and_then(|g| g.kind.as_deref());
        let no_gres = Vec::new();
        let node_gpus: Vec<(Vec<u32>, Vec<u32>)> = (0..j.alloc.nodes.len())
            .map(|k| gpus_of(j.alloc.gres.get(k).unwrap_or(&no_gres), kind, &held_gpus[k]))
            .collect();
        let gpu_all: Vec<u32> = node_gpus.iter().map(|(a, _)| a.len() as u32).collect();
        let gpu_free: Vec<u32> = node_gpus.iter().map(|(_, f)| f.len() as u32).collect();
        let placed = match place_step(
            &ask,
            &j.alloc.cpus,
            &used,
            &gpu_all,
            &gpu_free,
            mem_all,
            &mem_free,
        ) {
            Ok(p) => p,
            Err(_) => {
                // What fits once the other steps end waits (srun asks
                // again); what never fits is refused.
                let idle = vec![0u32; used.len()];
                let fits_idle = |ask: &StepAsk| {
                    place_step(
                        ask,
                        &j.alloc.cpus,
                        &idle,
                        &gpu_all,
                        &gpu_all,
                        mem_all,
                        mem_all,
                    )
                };
                let cpus_only = StepAsk {
                    gpus: GpuNeed::Nothing,
                    mem: MemNeed::Whole,
                    ..ask.clone()
                };
                let no_mem = StepAsk {
                    mem: MemNeed::Whole,
                    ..ask.clone()
                };
                return match fits_idle(&ask) {
                    Ok(_) => {
                        if slurm_common::debugflags::on(slurm_common::debugflags::STEPS) {
                            tracing::info!(
                                "Steps: JobId={} step deferred: other steps hold what it needs",
                                j.job_id
                            );
                        }
                        err(SlurmError::NodesBusy)
                    }
                    // Never: for its CPUs, GPUs or memory, said as Slurm's.
                    Err(e) => {
                        if fits_idle(&cpus_only).is_err() {
                            err(if e == SlurmError::NodesBusy {
                                SlurmError::TooManyRequestedCpus
                            } else {
                                e
                            })
                        } else if fits_idle(&no_mem).is_err() {
                            err(SlurmError::InvalidGres)
                        } else {
                            err(SlurmError::InvalidTaskMemory)
                        }
                    }
                };
            }
        };
        let StepPlace {
            nodes,
            per_node,
            cpus: step_cpus,
            gpus: step_gpus,
            mem: step_mem,
        } = placed;
        let own_mem = step_mem.iter().any(|&m| m > 0);
        // Which GPUs: the first free of the kind on each node (all of the
        // job's when it asked none); kept by type as the job's are.
        let step_gres: Vec<Vec<GresAlloc>> = nodes
            .iter()
            .zip(&step_gpus)
            .map(|(&k, &n)| {
                let (all, free) = &node_gpus[k];
                let pick: Vec<u32> = if r.gpus.is_none() {
                    all.clone()
                } else {
                    free.iter().copied().take(n as usize).collect()
                };
                j.alloc
                    .gres
                    .get(k)
                    .unwrap_or(&no_gres)
                    .iter()
                    .filter(|g| g.name == "gpu")
                    .filter_map(|g| {
                        let indices: Vec<u32> = g
                            .indices
                            .iter()
                            .copied()
                            .filter(|i| pick.contains(i))
                            .collect();
                        (!indices.is_empty()).then(|| GresAlloc {
                            name: g.name.clone(),
                            kind: g.kind.clone(),
                            indices,
                        })
                    })
                    .collect()
            })
            .collect();
        // What its tasks see differs from the job's there: told in the
        // credential.
        let own_gpus = nodes.iter().zip(&step_gres).any(|(&k, mine)| {
            GresAlloc::gpu_indices(mine)
                != GresAlloc::gpu_indices(j.alloc.gres.get(k).unwrap_or(&no_gres))
        });
        let ntasks: u32 = per_node.iter().sum();
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
            // The cpuset is cut to the step's CPUs only where it holds
            // fewer than the job's.
            step_cpus: if !r.overlap
                && nodes
                    .iter()
                    .zip(&step_cpus)
                    .any(|(&k, &c)| c < j.alloc.cpus[k])
            {
                step_cpus.clone()
            } else {
                Vec::new()
            },
            step_gres: if own_gpus {
                step_gres.clone()
            } else {
                Vec::new()
            },
            step_mem: if own_mem {
                step_mem.clone()
            } else {
                Vec::new()
            },
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
            cpus: step_cpus,
            overlap: r.overlap,
            gres: step_gres,
            mem: if own_mem { step_mem } else { Vec::new() },
            ended_on: Vec::new(),
        };
        let id = r.job_id;
        if slurm_common::debugflags::on(slurm_common::debugflags::STEPS) {
            tracing::info!(
                "Steps: StepId={id}.{step_id} created: {} task(s) on {}, CPUs {:?}{}",
                rec.ntasks,
                slurm_common::hostlist::compress(&rec.nodes),
                rec.cpus,
                if rec.overlap { " (overlapping)" } else { "" }
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
        if st.state == JobState::Timeout {
            if st.exit_status == 0 {
                // Ended by its time limit: TIMEOUT stays, with how it
                // ended.
                st.exit_status = status;
            }
            // Its tasks are gone: it holds nothing any more.
            st.ended_on = st.nodes.clone();
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
            st.ended_on.clear();
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
        u: Option<TaskUsage>,
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
        // Its tasks there ended: what it held there is free for other
        // steps.
        let mut changed = false;
        if matches!(st.state, JobState::Running | JobState::Timeout)
            && st.nodes.iter().any(|n| n == node)
            && !st.ended_on.iter().any(|n| n == node)
        {
            st.ended_on.push(node.to_string());
            changed = true;
        }
        if let Some(u) = u {
            changed = true;
            let mut total = st.usage.unwrap_or_default();
            total.cpu_usec += u.cpu_usec;
            total.user_usec += u.user_usec;
            total.system_usec += u.system_usec;
            if u.max_rss_bytes >= total.max_rss_bytes {
                total.max_rss_bytes = u.max_rss_bytes;
                st.usage_node = Some(node.to_string());
            }
            st.usage = Some(total);
        }
        if changed {
            self.save_job(id);
        }
    }
}

/// What the running steps of a job hold on each of its nodes (indexed as
/// its allocation): CPUs, GPU indices, MiB of memory of those that asked
/// their own. The batch script and the extern step hold none, `--overlap`
/// steps nothing; a step ended by its time limit holds until its tasks are
/// gone (`grace` seconds at most, should a node never say so), and nothing
/// where a node said its tasks ended.
pub(super) struct StepHoldings {
    pub cpus: Vec<u32>,
    pub gpus: Vec<Vec<u32>>,
    pub mem: Vec<u64>,
}

impl StepHoldings {
    fn none(nodes: usize) -> StepHoldings {
        StepHoldings {
            cpus: vec![0; nodes],
            gpus: vec![Vec::new(); nodes],
            mem: vec![0; nodes],
        }
    }

    fn of(j: &JobRecord, now: i64, grace: i64) -> StepHoldings {
        let mut h = StepHoldings::none(j.alloc.nodes.len());
        let holding = |s: &&StepRecord| {
            (s.state == JobState::Running
                || (s.state == JobState::Timeout && s.end_time.is_some_and(|t| now <= t + grace)))
                && !s.overlap
                && s.step_id != BATCH_STEP
                && s.step_id != slurm_proto::EXTERN_STEP
        };
        for s in j.steps.iter().filter(holding) {
            for (i, n) in s.nodes.iter().enumerate() {
                if s.ended_on.contains(n) {
                    continue;
                }
                let Some(k) = j.alloc.nodes.iter().position(|x| x == n) else {
                    continue;
                };
                h.cpus[k] = h.cpus[k].saturating_add(s.cpus.get(i).copied().unwrap_or(0));
                h.mem[k] = h.mem[k].saturating_add(s.mem.get(i).copied().unwrap_or(0));
                if let Some(g) = s.gres.get(i) {
                    h.gpus[k].extend(GresAlloc::gpu_indices(g));
                }
            }
        }
        h
    }
}

/// What a step asks of its job's nodes ([`place_step`]).
#[derive(Debug, Clone)]
pub(super) struct StepAsk<'a> {
    /// The job's nodes (indices) it may use, in order (after `-w`, `-x`,
    /// `-r`).
    pub cand: &'a [usize],
    /// `-w`: every one of `cand` is used.
    pub named: bool,
    pub min_nodes: Option<u32>,
    pub ntasks: Option<u32>,
    pub ntasks_per_node: Option<u32>,
    /// The job's task count (a step asking none takes it).
    pub job_tasks: u32,
    /// CPUs per task.
    pub cpt: u32,
    pub exact: bool,
    pub overcommit: bool,
    /// The GPUs it needs.
    pub gpus: GpuNeed,
    /// slurm.conf's MaxTasksPerNode (Slurm's default 512).
    pub max_tasks_per_node: u32,
    /// The memory it holds.
    pub mem: MemNeed,
}

/// The memory a step holds ([`StepAsk`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MemNeed {
    /// None of its own: it has the job's, holding nothing (as Slurm's).
    Whole,
    /// `--mem`: MiB a node.
    PerNode(u64),
    /// `--mem-per-cpu`: MiB a CPU it holds.
    PerCpu(u64),
}

/// The GPUs a step needs ([`StepAsk`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum GpuNeed {
    /// Every GPU of the job on each node it uses (it asked none).
    All,
    /// None (`--gres=none`).
    Nothing,
    PerNode(u32),
    PerTask(u32),
    /// In all (`--gpus=N`), as many on each node as are free there, in
    /// order.
    Total(u32),
}

impl GpuNeed {
    pub fn of(g: Option<&slurm_proto::StepGpus>) -> GpuNeed {
        match g {
            None => GpuNeed::All,
            Some(g) if g.per_node > 0 => GpuNeed::PerNode(g.per_node),
            Some(g) if g.per_task > 0 => GpuNeed::PerTask(g.per_task),
            Some(g) if g.total > 0 => GpuNeed::Total(g.total),
            Some(_) => GpuNeed::Nothing,
        }
    }
}

/// The job's GPUs on a node (`gres`, of `kind` if one is named) others
/// (`held`) do not hold: (all of the kind, free), by index.
pub(super) fn gpus_of(
    gres: &[GresAlloc],
    kind: Option<&str>,
    held: &[u32],
) -> (Vec<u32>, Vec<u32>) {
    let mut all: Vec<u32> = gres
        .iter()
        .filter(|g| g.name == "gpu" && kind.is_none_or(|k| g.kind.as_deref() == Some(k)))
        .flat_map(|g| g.indices.iter().copied())
        .collect();
    all.sort_unstable();
    let free = all.iter().copied().filter(|i| !held.contains(i)).collect();
    (all, free)
}

/// Where a step runs: the job's nodes (indices), tasks on each, and the
/// CPUs it holds on each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct StepPlace {
    pub nodes: Vec<usize>,
    pub per_node: Vec<u32>,
    pub cpus: Vec<u32>,
    /// GPUs on each node.
    pub gpus: Vec<u32>,
    /// MiB held on each node (0: none of its own).
    pub mem: Vec<u64>,
}

/// Lay a step out on its job's nodes, `used[k]` CPUs of job node `k` being
/// held by other steps, as Slurm's step manager does: a step with
/// `--exact` takes its tasks' CPUs from those free; one without takes
/// every CPU of the job on each node it uses, so only nodes where no other
/// step holds any; nodes without room for a task are passed over when the
/// step does not need them all. The error is what the request meets with
/// these steps running (the caller tells waiting from never fitting).
pub(super) fn place_step(
    a: &StepAsk,
    job_cpus: &[u32],
    used: &[u32],
    gpu_all: &[u32],
    gpu_free: &[u32],
    mem_all: &[u64],
    mem_free: &[u64],
) -> Result<StepPlace, SlurmError> {
    let cpt = a.cpt.max(1);
    // Memory counts where the job has some (0: not tracked).
    let mem_of = |k: usize| {
        (mem_all.get(k).copied().unwrap_or(0) > 0).then(|| mem_free.get(k).copied().unwrap_or(0))
    };
    let all_gpus = |k: usize| gpu_all.get(k).copied().unwrap_or(0);
    let free_gpus = |k: usize| gpu_free.get(k).copied().unwrap_or(0);
    // GPUs a node must have free to take the step at all.
    let gpus_ok = |k: usize| match a.gpus {
        GpuNeed::All => free_gpus(k) >= all_gpus(k),
        GpuNeed::Nothing => true,
        GpuNeed::PerNode(n) | GpuNeed::PerTask(n) => free_gpus(k) >= n,
        GpuNeed::Total(_) => free_gpus(k) >= 1,
    };
    let room = |k: usize| -> u32 {
        let (all, held) = (job_cpus[k], used.get(k).copied().unwrap_or(0));
        if !a.exact && held > 0 {
            0
        } else {
            all.saturating_sub(held)
        }
    };
    // A node takes one task at least (one CPU of it with --overcommit).
    // Memory a node must have free for one task (for all it takes,
    // without --exact).
    let mem_ok = |k: usize| match (a.mem, mem_of(k)) {
        (_, None) | (MemNeed::Whole, _) => true,
        (MemNeed::PerNode(x), Some(free)) => free >= x,
        (MemNeed::PerCpu(y), Some(free)) => {
            free >= y.saturating_mul(u64::from(cpt)).min(mem_all[k])
        }
    };
    let fits_one =
        |k: usize| room(k) >= if a.overcommit { 1 } else { cpt } && gpus_ok(k) && mem_ok(k);
    let nodes: Vec<usize> = if a.named {
        // -w: those nodes, the first -N of them when -N says fewer.
        let want = a.min_nodes.map_or(a.cand.len(), |n| n as usize);
        if want == 0 || want > a.cand.len() {
            return Err(SlurmError::TooManyRequestedNodes);
        }
        if a.cand[..want].iter().any(|&k| !fits_one(k)) {
            return Err(SlurmError::TooManyRequestedCpus);
        }
        a.cand[..want].to_vec()
    } else {
        let open: Vec<usize> = a.cand.iter().copied().filter(|&k| fits_one(k)).collect();
        let want = match (a.min_nodes, a.ntasks) {
            (Some(n), _) => n as usize,
            (None, Some(t)) => {
                // As few nodes as hold the tasks, in order.
                let mut cap = 0u32;
                let mut k = 0;
                // (--gpus=N: and as many nodes as hold the N GPUs.)
                let gpus_wanted = match a.gpus {
                    GpuNeed::Total(n) => n,
                    _ => 0,
                };
                let mut gpus_seen = 0u32;
                while k < open.len() && (cap < t || gpus_seen < gpus_wanted) {
                    gpus_seen = gpus_seen.saturating_add(free_gpus(open[k]));
                    let mut c = (room(open[k]) / cpt).max(1);
                    if let GpuNeed::PerTask(n) = a.gpus {
                        c = c.min(free_gpus(open[k]) / n.max(1));
                    }
                    if let Some(p) = a.ntasks_per_node {
                        c = c.min(p);
                    }
                    cap = cap.saturating_add(c.max(1));
                    k += 1;
                }
                k.max(1)
            }
            _ => a.cand.len(),
        };
        if want == 0 || want > a.cand.len() {
            return Err(SlurmError::TooManyRequestedNodes);
        }
        if want > open.len() {
            return Err(SlurmError::NodesBusy);
        }
        open[..want].to_vec()
    };
    let cap = |k: usize| {
        let mut c = (room(k) / cpt).max(1);
        if let GpuNeed::PerTask(n) = a.gpus {
            c = c.min(free_gpus(k) / n.max(1)).max(1);
        }
        // --exact --mem-per-cpu: as many tasks as the free memory holds.
        if let (MemNeed::PerCpu(y), Some(free), true) = (a.mem, mem_of(k), a.exact) {
            let per_task = y.saturating_mul(u64::from(cpt)).max(1);
            c = c
                .min(u32::try_from(free / per_task).unwrap_or(u32::MAX))
                .max(1);
        }
        c
    };
    let ntasks = match (a.ntasks, a.ntasks_per_node) {
        (Some(t), _) => t,
        (None, Some(p)) => p.saturating_mul(nodes.len() as u32),
        (None, None) if a.min_nodes.is_some() || a.named => nodes.len() as u32,
        // The job's task count, as many as these nodes hold (fewer when
        // -r or -x leave some of the job's out).
        // (From the job's CPUs and GPUs there, not what is free now: a
        // busy job makes the step wait, not shrink.)
        (None, None) => {
            let held: u32 = nodes.iter().fold(0u32, |s, &k| {
                let mut c = (job_cpus[k] / cpt).max(1);
                if let GpuNeed::PerTask(n) = a.gpus {
                    c = c.min(all_gpus(k) / n.max(1)).max(1);
                }
                s.saturating_add(c)
            });
            a.job_tasks.min(held).max(nodes.len() as u32)
        }
    };
    if (ntasks as usize) < nodes.len() {
        return Err(SlurmError::TooManyRequestedNodes);
    }
    // MaxTasksPerNode, however overcommitted.
    if u64::from(ntasks) > u64::from(a.max_tasks_per_node.max(1)) * nodes.len() as u64 {
        return Err(SlurmError::BadTaskCount);
    }
    let mut per_node = vec![0u32; nodes.len()];
    if let Some(p) = a.ntasks_per_node {
        // -n wins, spread evenly (never more than p a node).
        if u64::from(ntasks) > u64::from(p) * nodes.len() as u64 {
            return Err(SlurmError::TooManyRequestedCpus);
        }
        let n = nodes.len() as u32;
        for (i, x) in per_node.iter_mut().enumerate() {
            *x = ntasks / n + u32::from((i as u32) < ntasks % n);
        }
        if !a.overcommit && nodes.iter().zip(&per_node).any(|(&k, &t)| t > cap(k)) {
            return Err(SlurmError::TooManyRequestedCpus);
        }
    } else {
        per_node.iter_mut().for_each(|x| *x = 1);
        let mut left = ntasks - nodes.len() as u32;
        for (x, &k) in per_node.iter_mut().zip(&nodes) {
            let add = left.min(cap(k).saturating_sub(1));
            *x += add;
            left -= add;
        }
        if left > 0 && !a.overcommit {
            return Err(SlurmError::TooManyRequestedCpus);
        }
        // -O: the rest round-robin.
        let mut i = 0;
        while left > 0 {
            per_node[i % nodes.len()] += 1;
            left -= 1;
            i += 1;
        }
    }
    let cpus: Vec<u32> = nodes
        .iter()
        .zip(&per_node)
        .map(|(&k, &t)| {
            if a.exact {
                t.saturating_mul(cpt).min(room(k)).max(1)
            } else {
                room(k)
            }
        })
        .collect();
    let mut gpus: Vec<u32> = nodes
        .iter()
        .zip(&per_node)
        .map(|(&k, &t)| match a.gpus {
            GpuNeed::All => all_gpus(k),
            GpuNeed::Nothing | GpuNeed::Total(_) => 0,
            GpuNeed::PerNode(n) => n,
            GpuNeed::PerTask(n) => n.saturating_mul(t),
        })
        .collect();
    if let GpuNeed::Total(n) = a.gpus {
        // One a node first (each node's tasks get one), then the rest in
        // order.
        let mut left = n;
        for g in gpus.iter_mut() {
            if left > 0 {
                *g = 1;
                left -= 1;
            }
        }
        for (g, &k) in gpus.iter_mut().zip(&nodes) {
            let more = left.min(free_gpus(k).saturating_sub(*g));
            *g += more;
            left -= more;
        }
        if left > 0 {
            return Err(SlurmError::InvalidGres);
        }
    }
    if nodes.iter().zip(&gpus).any(|(&k, &g)| g > free_gpus(k)) {
        return Err(SlurmError::InvalidGres);
    }
    // (Held only where the job's memory is counted; --mem-per-cpu for its
    // tasks' CPUs, never more than the job has there.)
    let mem: Vec<u64> = nodes
        .iter()
        .zip(&per_node)
        .map(|(&k, &t)| match (a.mem, mem_of(k)) {
            (MemNeed::Whole, _) | (_, None) => 0,
            (MemNeed::PerNode(x), _) => x,
            (MemNeed::PerCpu(y), _) => y
                .saturating_mul(u64::from(t.saturating_mul(cpt)))
                .min(mem_all[k]),
        })
        .collect();
    if nodes
        .iter()
        .zip(&mem)
        .any(|(&k, &m)| mem_of(k).is_some_and(|free| m > free))
    {
        return Err(SlurmError::InvalidTaskMemory);
    }
    Ok(StepPlace {
        nodes,
        per_node,
        cpus,
        gpus,
        mem,
    })
}
