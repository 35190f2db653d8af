//! The scheduling pass: limits, licenses, dependencies and holds held back
//! first, then the scheduler plugin's decisions, preemption and sharing;
//! starting a job (its launch or prologue sent) and its `--signal` warnings.

use super::*;

/// Go through `queue` highest priority first; a job for which `hold` gives
/// a reason leaves the queue and is held back with it.
pub(super) fn hold_by_priority(
    queue: &mut Vec<JobView>,
    jobs: &std::collections::BTreeMap<JobId, Arc<JobRecord>>,
    held_back: &mut Vec<(JobId, JobReason)>,
    mut hold: impl FnMut(&JobRecord) -> Option<JobReason>,
) {
    let mut order: Vec<usize> = (0..queue.len()).collect();
    order.sort_by_key(|&i| {
        (
            std::cmp::Reverse(queue[i].priority),
            queue[i].submit_time,
            queue[i].id,
        )
    });
    let mut keep = vec![true; queue.len()];
    for i in order {
        let Some(j) = jobs.get(&queue[i].id) else {
            continue;
        };
        if let Some(r) = hold(j) {
            held_back.push((j.job_id, r));
            keep[i] = false;
        }
    }
    let mut k = keep.into_iter();
    queue.retain(|_| k.next().unwrap_or(true));
}

/// What a node daemon is told of job `j` before any step runs there.
pub(super) fn prologue_facts(j: &JobRecord, pod_uids: Vec<String>) -> JobPrologue {
    JobPrologue {
        job_id: j.job_id,
        uid: j.user_id,
        gid: j.group_id,
        user_name: j.user_name.clone(),
        partition: j.partition.clone(),
        account: j.account.clone(),
        alloc: j.alloc.clone(),
        pod_uids,
    }
}

/// The pod uids of a placeholder job made by slurm-bridge, one per node in
/// allocation order (its admin comment's `uids`); none for other jobs.
pub(super) fn pod_uids(admin_comment: Option<&str>) -> Vec<String> {
    admin_comment
        .and_then(|c| serde_json::from_str::<serde_json::Value>(c).ok())
        .and_then(|v| {
            v.get("uids")?.as_array().map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
        })
        .unwrap_or_default()
}

/// A job's time limit as it may run from `now`: never past its
/// `--deadline` (at least a minute, for a job still allowed to start).
pub(super) fn limit_from(j: &JobRecord, now: i64) -> Option<u32> {
    match j.desc.deadline {
        Some(dl) => {
            let left = (dl.saturating_sub(now) / 60).clamp(1, i64::from(u32::MAX)) as u32;
            Some(j.time_limit.map_or(left, |l| l.min(left)))
        }
        None => j.time_limit,
    }
}

/// Whether job `j`, not started, can no longer end by its `--deadline`,
/// even with its limit lowered to its `--time-min`.
pub(super) fn past_deadline(j: &JobRecord, now: i64) -> bool {
    j.desc.deadline.is_some_and(|dl| {
        j.desc
            .time_min
            .or(j.time_limit)
            .is_none_or(|m| now.saturating_add(i64::from(m) * 60) > dl)
    })
}

/// A job's `--signal` warning, if it asked for one (checked at submission).
pub(super) fn warning(j: &JobRecord) -> Option<slurm_common::signal::Warning> {
    slurm_common::signal::parse_warning(j.desc.signal.as_deref()?).ok()
}

impl Controller {
    /// One scheduling pass: ask the policy, commit its decisions. Whether
    /// the policy was asked (the caller, which keeps the time, then tells
    /// how long the pass took, and this: [`Controller::pass_took`]).
    pub fn schedule(&mut self, now: i64) -> bool {
        self.sched_needed = false;
        // Preempted (suspended) jobs get their cores back before anyone else;
        // jobs sharing cores fill what ended jobs left.
        self.resume_preempted(now);
        self.gang_fit(now, false);
        // Dependencies and array task limits keep jobs out of the queue.
        let mut running_tasks: HashMap<JobId, u32> = HashMap::new();
        for j in self.p.jobs.values() {
            if let Some(a) = &j.array {
                let active = j.state.is_active();
                if active || (j.completing && j.state != JobState::Pending) {
                    *running_tasks.entry(a.job_id).or_default() += 1;
                }
            }
        }
        let mut held_back: Vec<(JobId, JobReason)> = Vec::new();
        let mut satisfied: Vec<JobId> = Vec::new();
        let mut queue: Vec<JobView> = Vec::new();
        let mut waiting: Vec<slurm_plugins::queue::Waiting> = Vec::new();
        let singles = std::cell::OnceCell::new();
        // Held jobs with a planned start left from before they were held.
        let mut unplanned: Vec<JobId> = Vec::new();
        // Jobs that end here without running: past their deadline, or
        // waiting on a dependency that can never be satisfied while asked
        // to be cancelled then (`--kill-on-invalid-dep`).
        let mut ended: Vec<(JobId, JobState, JobReason)> = Vec::new();
        let kill_invalid = self
            .conf
            .scheduler_parameters
            .iter()
            .any(|p| p.eq_ignore_ascii_case("kill_invalid_depend"));
        for j in self.p.jobs.values() {
            if j.state != JobState::Pending || j.completing {
                continue;
            }
            if past_deadline(j, now) {
                ended.push((j.job_id, JobState::Deadline, deadline_reason()));
                continue;
            }
            if j.held.is_none() && j.dependency.is_some() {
                match self.dependency_state(j, &singles, now) {
                    DepState::Satisfied => satisfied.push(j.job_id),
                    DepState::Waiting => {
                        held_back.push((j.job_id, JobReason::Dependency));
                        continue;
                    }
                    DepState::Never if j.desc.kill_on_invalid_dep.unwrap_or(kill_invalid) => {
                        ended.push((
                            j.job_id,
                            JobState::Cancelled,
                            JobReason::DependencyNeverSatisfied,
                        ));
                        continue;
                    }
                    DepState::Never => {
                        held_back.push((j.job_id, JobReason::DependencyNeverSatisfied));
                        continue;
                    }
                }
            }
            if let Some(rn) = &j.desc.reservation {
                if !self
                    .p
                    .reservations
                    .get(rn)
                    .is_some_and(|r| r.is_active(now))
                {
                    held_back.push((j.job_id, JobReason::Reservation));
                    continue;
                }
            }
            // A held job is offered nothing and takes nothing: it stays out
            // of the pass (whose cost so follows the jobs that may start).
            if let Some(h) = j.held {
                let r = match h {
                    HoldKind::User => JobReason::JobHeldUser,
                    HoldKind::Admin => JobReason::JobHeldAdmin,
                };
                // A requeue-held job keeps saying why it was held.
                let kept = r == JobReason::JobHeldAdmin && j.reason == requeue_held_reason();
                if j.reason != r && !kept {
                    held_back.push((j.job_id, r));
                }
                if j.start_time.is_some() {
                    unplanned.push(j.job_id);
                }
                continue;
            }
            if let Some(v) = self.job_view(j) {
                waiting.push(slurm_plugins::queue::Waiting {
                    id: v.id,
                    priority: v.priority,
                    submit_time: v.submit_time,
                    held: j.held.is_some(),
                    array: j.array.as_ref().map(|a| (a.job_id, a.max_running)),
                    licenses: j
                        .desc
                        .licenses
                        .as_deref()
                        .and_then(|l| slurm_common::licenses::parse(l).ok())
                        .unwrap_or_default(),
                });
                queue.push(v);
            }
        }
        // Array throttles and licenses (the queue policy in the core).
        let in_use = slurm_plugins::queue::InUse {
            array_tasks: running_tasks,
            licenses: self.licenses_used(),
        };
        let verdicts = slurm_plugins::queue::admit(&waiting, &in_use, &self.licenses);
        let mut keep = verdicts.iter().map(Option::is_none);
        for (w, v) in waiting.iter().zip(&verdicts) {
            match v {
                Some(slurm_plugins::queue::Held::ArrayTaskLimit) => {
                    held_back.push((w.id, JobReason::JobArrayTaskLimit))
                }
                Some(slurm_plugins::queue::Held::Licenses) => {
                    held_back.push((w.id, JobReason::Other("Licenses".into())))
                }
                None => {}
            }
        }
        queue.retain(|_| keep.next().unwrap_or(true));
        // Association and QOS limits, highest priority first.
        if let (true, Some(cache)) = (self.enforce.limits, &self.assocs) {
            let book = &self.book;
            let jobs = self.p.jobs.values().map(|j| j.as_ref());
            let mut usage = crate::assoc::usage(cache, book, jobs, now);
            hold_by_priority(&mut queue, &self.p.jobs, &mut held_back, |j| {
                if j.held.is_some() {
                    return None;
                }
                usage
                    .hold(book, &crate::assoc::limit_job(j))
                    .map(JobReason::Other)
            });
        }
        for (id, r) in held_back {
            if self.p.jobs.get(&id).is_some_and(|j| j.reason != r) {
                let noted = self.job_mut(id).is_some_and(|j| {
                    j.last_sched_eval = Some(now);
                    j.set_reason(r)
                });
                if noted {
                    self.save_job(id);
                }
                self.dirty = true;
            }
        }
        for (id, state, reason) in ended {
            self.end_pending(id, state, reason, now);
        }
        for id in unplanned {
            if let Some(j) = self.job_mut(id) {
                j.start_time = None;
            }
            self.dirty = true;
        }
        for id in satisfied {
            if let Some(j) = self.job_mut(id) {
                j.dependency = None;
            }
            self.save_job(id);
        }
        if queue.is_empty() {
            // A pass that found nothing to offer is a pass all the same;
            // what it ended or resumed shows on the nodes.
            self.stats.sched_cycles += 1;
            self.stats.last_queue = 0;
            self.refresh_jobs();
            return false;
        }
        let queue_len = queue.len() as u64;
        let view = self.cluster_view();
        let users: Vec<u32> = queue
            .iter()
            .map(|v| self.p.jobs.get(&v.id).map_or(0, |j| j.user_id))
            .collect();
        let plan = self.scheduler.plan_with_users(&view, &queue, &users, now);
        let mut blocked_seen = false;
        let mut backfilled = 0u64;
        let mut on_resources: Vec<JobId> = Vec::new();
        // Built once a pending job may be waiting on reserved nodes.
        let mut reserved_view: Option<ClusterView> = None;
        for d in plan.decisions {
            match d {
                Decision::Start { job, alloc } => {
                    // Started past a job that waits: backfilled.
                    let backfill = blocked_seen;
                    if backfill {
                        backfilled += 1;
                    }
                    self.preempting.remove(&job);
                    // Backfill lowered its limit toward its `--time-min`.
                    if let Some(&m) = plan.limits.get(&job) {
                        if let Some(j) = self.job_mut(job) {
                            j.time_limit = Some(m);
                        }
                    }
                    let by = if backfill {
                        SchedFlag::Backfill
                    } else {
                        SchedFlag::Main
                    };
                    self.start_job(job, &alloc, now, by);
                }
                Decision::Pending { job, reason } => {
                    if matches!(reason, PendingReason::Resources | PendingReason::Priority) {
                        blocked_seen = true;
                        on_resources.push(job);
                    }
                    let reserved = match reason {
                        PendingReason::Resources | PendingReason::BadConstraints
                            if !self.p.reservations.is_empty() =>
                        {
                            let view = reserved_view.get_or_insert_with(|| self.cluster_view());
                            self.reserved_reason(job, view)
                        }
                        _ => None,
                    };
                    let r = match (reserved, reason) {
                        (Some(r), _) => r,
                        (None, PendingReason::Priority) => JobReason::Priority,
                        (None, PendingReason::Resources) => JobReason::Resources,
                        (None, PendingReason::BeginTime) => JobReason::BeginTime,
                        (None, PendingReason::JobHeldUser) => JobReason::JobHeldUser,
                        (None, PendingReason::JobHeldAdmin) => JobReason::JobHeldAdmin,
                        (None, PendingReason::PartitionDown) => JobReason::PartitionDown,
                        (None, PendingReason::PartitionTimeLimit) => JobReason::PartitionTimeLimit,
                        (None, PendingReason::PartitionNodeLimit) => JobReason::PartitionNodeLimit,
                        (None, PendingReason::BadConstraints) => JobReason::BadConstraints,
                    };
                    // A requeue-held job keeps saying why it was held.
                    let changed = self.p.jobs.get(&job).is_some_and(|j| {
                        j.reason != r
                            && !(r == JobReason::JobHeldAdmin && j.reason == requeue_held_reason())
                    });
                    if changed {
                        let noted = self.job_mut(job).is_some_and(|j| {
                            j.last_sched_eval = Some(now);
                            j.set_reason(r)
                        });
                        if noted {
                            self.save_job(job);
                        }
                        self.dirty = true;
                    }
                }
            }
        }
        // Blocked jobs may share cores (OverSubscribe), else displace lower
        // ones (PreemptType).
        let shared = self.share_pass(&on_resources, now);
        on_resources.retain(|id| !shared.contains(id));
        self.preempt_for(&on_resources, now);
        // Planned starts of pending jobs (what `squeue --start` shows).
        for v in &queue {
            let planned = plan.starts.get(&v.id).map(|p| p.start);
            let update = self
                .p
                .jobs
                .get(&v.id)
                .is_some_and(|j| j.state == JobState::Pending && j.start_time != planned);
            if update {
                if let Some(j) = self.job_mut(v.id) {
                    j.start_time = planned;
                }
                self.dirty = true;
            }
        }
        if self.scheduler.name() == "sched/backfill" {
            let st = &mut self.stats;
            st.bf_cycles += 1;
            st.bf_last_depth = queue_len;
            st.bf_total_depth += queue_len;
            st.bf_backfilled_jobs += backfilled;
            st.bf_last_when = Some(now);
            st.bf_last_queue = queue_len;
            st.bf_total_queue += queue_len;
            if let Some(p) = self.scheduler.last_pass() {
                st.bf_last_depth_try = u64::from(p.examined);
                st.bf_total_depth_try += u64::from(p.examined);
                st.bf_table_size = u64::from(p.table_size);
                st.bf_total_table_size += u64::from(p.table_size);
                if p.hit_max_job_test {
                    st.bf_exit_max_job_test += 1;
                } else {
                    st.bf_exit_end += 1;
                }
            }
        }
        self.stats.sched_cycles += 1;
        self.stats.total_depth += queue_len;
        self.stats.last_queue = queue_len;
        self.refresh_jobs();
        true
    }

    /// The last pass took `us` microseconds (for sdiag; measured by the
    /// caller, so the state machine reads no clock).
    /// Every pass counts for the main scheduler's figures, one that found
    /// nothing to offer too (`planned`: it had a queue to plan, which is
    /// what a backfill cycle is).
    pub fn pass_took(&mut self, us: u64, planned: bool) {
        let st = &mut self.stats;
        if planned && self.scheduler.name() == "sched/backfill" {
            st.bf_last_us = us;
            st.bf_max_us = st.bf_max_us.max(us);
            st.bf_total_us += us;
        }
        st.last_cycle_us = us;
        st.max_cycle_us = st.max_cycle_us.max(us);
        st.total_cycle_us += us;
    }

    /// Start job `id` on `alloc`, started by the scheduler `by`.
    pub(super) fn start_job(&mut self, id: JobId, alloc: &[NodeAlloc], now: i64, by: SchedFlag) {
        let names: Vec<String> = alloc
            .iter()
            .map(|a| self.nodes[a.node].name.clone())
            .collect();
        let Some(payload) = self.p.payloads.get(&id).cloned() else {
            return;
        };
        // (As Slurm's: the main scheduler's allocations, not backfill's.)
        if matches!(by, SchedFlag::Main) && crate::schedlog::SCHED.wanted() {
            if let Some(j) = self.p.jobs.get(&id) {
                crate::schedlog::SCHED.info(format_args!(
                    "Allocate {} NodeList={} #CPUs={} Partition={}",
                    crate::schedlog::job_label(j),
                    slurm_common::hostlist::compress(&names),
                    alloc.iter().map(|a| a.cpus).sum::<u32>(),
                    j.partition
                ));
            }
        }
        let trace = slurm_common::debugflags::on(slurm_common::debugflags::TRACE_JOBS);
        if trace
            || (slurm_common::debugflags::on(slurm_common::debugflags::BACKFILL)
                && matches!(by, SchedFlag::Backfill))
        {
            tracing::info!(
                "{}: JobId={id} started by the {} scheduler on {}",
                if trace { "TraceJobs" } else { "Backfill" },
                match by {
                    SchedFlag::Backfill => "backfill",
                    SchedFlag::Main => "main",
                    SchedFlag::Submit => "submit-time",
                },
                slurm_common::hostlist::compress(&names)
            );
        }
        // Device indices for the generic resources, lowest free first.
        let gres: Vec<Vec<GresAlloc>> = alloc
            .iter()
            .map(|a| {
                if a.gres.iter().all(|g| *g == 0) {
                    return Vec::new();
                }
                let node = &self.nodes[a.node];
                let busy: Vec<&GresAlloc> = self
                    .p
                    .jobs
                    .values()
                    .filter(|o| o.job_id != id && Self::holds_devices(o))
                    .filter_map(|o| {
                        let k = o.alloc.nodes.iter().position(|n| *n == node.name)?;
                        o.alloc.gres.get(k)
                    })
                    .flatten()
                    .collect();
                self.gres_kinds.assign(&node.gres, &a.gres, &busy)
            })
            .collect();
        let conf = self.conf.clone();
        let Some(j) = self.job_mut(id) else {
            return;
        };
        j.state = JobState::Running;
        j.reason = JobReason::None;
        j.sched_flag = Some(by);
        j.start_time = Some(now);
        j.run_start = Some(now);
        j.time_limit = limit_from(j, now);
        j.end_time = j.time_limit.map(|m| now + m as i64 * 60);
        j.last_sched_eval = Some(now);
        j.alloc = Allocation {
            nodes: names.clone(),
            cpus: alloc.iter().map(|a| a.cpus).collect(),
            mem: alloc.iter().map(|a| a.mem).collect(),
            // Overcommitted: the job's tasks spread over its nodes (the
            // first ones one more), on one task's CPUs each.
            tasks: if j.desc.overcommit && !alloc.is_empty() {
                let (n, k) = (j.num_tasks, alloc.len() as u32);
                (0..k).map(|i| n / k + u32::from(i < n % k)).collect()
            } else {
                alloc.iter().map(|a| a.tasks).collect()
            },
            gres,
        };
        let batch = j.batch;
        j.batch_host = if batch { names.first().cloned() } else { None };
        if batch {
            // The script itself runs as step `batch` on the first node.
            j.steps.push(StepRecord {
                step_id: BATCH_STEP,
                name: "batch".into(),
                state: JobState::Running,
                nodes: names.iter().take(1).cloned().collect(),
                ntasks: 1,
                tasks_per_node: vec![1],
                cpus_per_task: alloc.first().map_or(1, |a| a.cpus),
                start_time: now,
                end_time: None,
                exit_status: 0,
                usage: None,
                usage_node: None,
                time_limit: None,
                job_secs_at_start: None,
                cpus: Vec::new(),
                overlap: false,
                gres: Vec::new(),
                mem: Vec::new(),
                ended_on: Vec::new(),
            });
        }
        let environment = slurm_proto::jobenv::batch_environment(&payload.environment, j);
        let (mut std_out, mut std_err) = (j.desc.std_out.clone(), j.desc.std_err.clone());
        if let Some(a) = &j.array {
            // Default output names an array task by %A_%a, as Slurm does.
            let out = std_out.take().unwrap_or_else(|| "slurm-%A_%a.out".into());
            std_out = Some(expand_array_patterns(&out, a));
            std_err = std_err.map(|e| expand_array_patterns(&e, a));
        }
        let launch = BatchLaunch {
            job_id: id,
            job_name: j.name.clone(),
            uid: j.user_id,
            gid: j.group_id,
            user_name: j.user_name.clone(),
            account: j.account.clone(),
            qos: j.qos.clone(),
            partition: j.partition.clone(),
            cluster_name: conf.cluster_name.clone(),
            alloc: j.alloc.clone(),
            num_tasks: j.num_tasks,
            cpus_per_task: j.desc.cpus_per_task.unwrap_or(1),
            ntasks_per_node: j.desc.ntasks_per_node,
            mem_per_node: j.desc.mem_per_node,
            mem_per_cpu: j.desc.mem_per_cpu,
            time_limit: j.time_limit,
            work_dir: j.desc.work_dir.clone(),
            std_out,
            std_err,
            std_in: j.desc.std_in.clone(),
            script: payload.script.clone(),
            argv: j.desc.argv.clone(),
            environment,
            submit_host: j.desc.submit_host.clone(),
            ctld_host: conf.ctld_address(),
            ctld_port: conf.slurmctld_port,
            start_time: now,
            // --open-mode, else slurm.conf's JobFileAppend.
            append_output: match j.desc.open_mode.as_deref() {
                Some(m) => m == "append",
                None => conf.get("JobFileAppend").is_some_and(|v| v.trim() == "1"),
            },
        };
        self.save_job(id);
        self.stats.jobs_started += 1;
        for a in alloc {
            self.nodes[a.node].last_busy = Some(now);
        }
        if let Some(host) = names.first().filter(|_| batch) {
            if let Some(addr) = self.node_addr(host) {
                self.effects.push(Effect::Launch {
                    node: host.clone(),
                    addr,
                    launch: Box::new(launch),
                });
            }
        }
        // PrologFlags=Alloc (or Contain): every other node of the job runs
        // its Prolog now rather than at the job's first step there.
        let at_alloc = conf.get("PrologFlags").is_some_and(|f| {
            f.split(',')
                .any(|w| w.eq_ignore_ascii_case("alloc") || w.eq_ignore_ascii_case("contain"))
        });
        // A pod's placeholder job on nodes whose daemon runs beside a
        // kubelet: each of those daemons gives the job cores and applies
        // them to its pod's cgroup.
        if let Some(j) = self.p.jobs.get(&id).filter(|j| j.desc.external) {
            let uids = pod_uids(j.desc.admin_comment.as_deref());
            // (Another external job holds its cores there and nothing more.)
            let uids = if uids.len() == names.len() {
                uids
            } else {
                Vec::new()
            };
            let facts = prologue_facts(j, uids);
            let mut placed = Vec::new();
            for node in &names {
                let kubelet = self
                    .node_index
                    .get(node)
                    .is_some_and(|&i| self.nodes[i].kubelet);
                if let (true, false, Some(addr)) =
                    (kubelet, facts.pod_uids.is_empty(), self.node_addr(node))
                {
                    self.effects.push(Effect::Prologue {
                        node: node.clone(),
                        addr,
                        facts: Box::new(facts.clone()),
                    });
                    placed.push(node.clone());
                }
            }
            // The pods' usage on those nodes is recorded as the job's
            // extern step, as Slurm records what runs outside steps.
            if !placed.is_empty() {
                if let Some(j) = self.job_mut(id) {
                    let n = placed.len() as u32;
                    j.steps.push(slurm_proto::StepRecord {
                        step_id: slurm_proto::EXTERN_STEP,
                        name: "extern".into(),
                        state: JobState::Running,
                        ntasks: n,
                        tasks_per_node: vec![1; placed.len()],
                        cpus_per_task: j.desc.cpus_per_task.unwrap_or(1),
                        nodes: placed,
                        start_time: now,
                        end_time: None,
                        exit_status: 0,
                        usage: None,
                        usage_node: None,
                        time_limit: None,
                        job_secs_at_start: None,
                        cpus: Vec::new(),
                        overlap: false,
                        gres: Vec::new(),
                        mem: Vec::new(),
                        ended_on: Vec::new(),
                    });
                }
                self.save_job(id);
            }
        }
        if at_alloc && !self.p.jobs.get(&id).is_some_and(|j| j.desc.external) {
            if let Some(j) = self.p.jobs.get(&id) {
                let facts = prologue_facts(j, Vec::new());
                let first = if batch { 1 } else { 0 };
                for node in names.iter().skip(first) {
                    if let Some(addr) = self.node_addr(node) {
                        self.effects.push(Effect::Prologue {
                            node: node.clone(),
                            addr,
                            facts: Box::new(facts.clone()),
                        });
                    }
                }
            }
        }
        // Refresh now so the next decision of this pass sees the allocation.
        self.refresh_jobs();
    }

    // ------------------------------------------------------------------
    // Interactive allocations and steps

    /// `--signal`: jobs within their warning time get it once per run, the
    /// batch shell (`B:`) or else every running step on each of its nodes.
    pub(super) fn send_warnings(&mut self, now: i64) {
        let due: Vec<(JobId, i64, slurm_common::signal::Warning)> = self
            .p
            .jobs
            .values()
            .filter(|j| j.state == JobState::Running && !j.timed_out)
            .filter_map(|j| {
                let w = warning(j)?;
                let (start, end) = (j.start_time?, j.end_time?);
                (end - now <= i64::from(w.secs) && self.warned.get(&j.job_id) != Some(&start))
                    .then_some((j.job_id, start, w))
            })
            .collect();
        self.warned
            .retain(|id, _| self.p.jobs.get(id).is_some_and(|j| j.state.is_active()));
        for (id, start, w) in due {
            self.warned.insert(id, start);
            let Some(j) = self.p.jobs.get(&id) else {
                continue;
            };
            let run = j.run();
            let mut targets: Vec<(String, Option<u32>)> = Vec::new();
            if w.batch_only {
                if let Some(h) = j.batch_host.clone() {
                    targets.push((h, None));
                }
            } else {
                for st in j.steps.iter().filter(|s| {
                    s.state == JobState::Running
                        && s.step_id != slurm_proto::BATCH_STEP
                        && s.step_id != slurm_proto::EXTERN_STEP
                }) {
                    targets.extend(st.nodes.iter().map(|n| (n.clone(), Some(st.step_id))));
                }
            }
            tracing::info!(
                job = id,
                signal = w.signal,
                "sending the job its --signal warning"
            );
            for (node, step) in targets {
                let Some(addr) = self.node_addr(&node) else {
                    continue;
                };
                self.effects.push(match step {
                    None => Effect::Signal {
                        node,
                        addr,
                        job_id: id,
                        signal: w.signal,
                    },
                    Some(step_id) => Effect::SignalStep {
                        node,
                        addr,
                        job_id: id,
                        step_id,
                        signal: w.signal,
                        cause: slurm_proto::TermCause::None,
                        job_start: run,
                    },
                });
            }
        }
    }
}

/// The reason a job requeued and held after a failed launch keeps.
/// Why a job ended DEADLINE (Slurm's reason text).
pub(super) fn deadline_reason() -> JobReason {
    JobReason::Other("DeadLine".into())
}

pub(super) fn requeue_held_reason() -> JobReason {
    JobReason::Other("launch failed requeued held".into())
}
