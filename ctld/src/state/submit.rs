//! Submission: a job description checked (sizes, partition access,
//! limits) and turned into a record; `sbatch --test-only` and `salloc`.

use super::*;

/// How large a submission may be (Slurm's SchedulerParameters
/// `max_script_size`, default 4 MiB, and `max_submit_line_size`, default
/// 1 MiB; `max_env_size`, default 4 MiB, is ours).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubmitLimits {
    pub max_script_size: usize,
    pub max_submit_line_size: usize,
    pub max_env_size: usize,
    /// With replicated state: the most a script and environment may take
    /// as JSON, so that they travel between the controllers in one
    /// message (a quarter of `CommunicationParameters` max_message_size).
    pub max_replicated: Option<usize>,
}

/// The length of `s` as a JSON string (quotes, escapes).
fn json_len(s: &str) -> usize {
    2 + s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

impl SubmitLimits {
    pub fn from_conf(conf: &SlurmConf) -> SubmitLimits {
        let mut l = SubmitLimits {
            max_script_size: 4 << 20,
            max_submit_line_size: 1 << 20,
            max_env_size: 4 << 20,
            max_replicated: conf.ctld_param("replicate_state").is_some().then(|| {
                slurm_common::net::max_request(conf.get("CommunicationParameters"))
                    .unwrap_or(slurm_common::net::MAX_REQUEST)
                    / 4
            }),
        };
        for p in conf.get("SchedulerParameters").unwrap_or("").split(',') {
            let Some((k, v)) = p.trim().split_once('=') else {
                continue;
            };
            let Ok(n) = v.trim().parse::<usize>() else {
                continue;
            };
            match k.trim().to_ascii_lowercase().as_str() {
                "max_script_size" => l.max_script_size = n,
                "max_submit_line_size" => l.max_submit_line_size = n,
                "max_env_size" => l.max_env_size = n,
                _ => {}
            }
        }
        l
    }
}

/// `--ntasks-per-gpu=K` as Slurm's controller reads it (ntasks_per_tres):
/// with GPUs asked for, the job runs K tasks for each of them (its task
/// count follows); without, it gets one GPU for every K tasks (`-n` a
/// multiple of K), or with a fixed node count and no task count K tasks and
/// one GPU per node. Not with `--gpus-per-task` or `--ntasks-per-node`.
fn tasks_per_gpu(mut desc: JobDesc, k: u32) -> Result<JobDesc, RpcError> {
    use slurm_common::gres;
    for (given, name) in [
        (desc.gpus_per_task.is_some(), "--gpus-per-task"),
        (desc.ntasks_per_node.is_some(), "--ntasks-per-node"),
    ] {
        if given {
            return err_detail(
                SlurmError::InvalidRequest,
                format!("{name} is mutually exclusive with --ntasks-per-gpu"),
            );
        }
    }
    // (Slurm's field is 16 bits.)
    if k >= u32::from(u16::MAX) {
        return err_detail(
            SlurmError::InvalidRequest,
            format!("--ntasks-per-gpu={k} is too large"),
        );
    }
    let bad = |e: String| RpcError {
        error: SlurmError::InvalidGres,
        detail: Some(e),
    };
    let too_many = || bad("more GPUs than can be counted".to_string());
    let nodes = u64::from(
        desc.min_nodes
            .unwrap_or(1)
            .max(desc.req_nodes.len() as u32)
            .max(1),
    );
    let mut per_node: u64 = 0;
    if let Some(g) = &desc.gres {
        for s in gres::parse_list(g).map_err(bad)? {
            if s.name == "gpu" {
                per_node = per_node.checked_add(s.count).ok_or_else(too_many)?;
            }
        }
    }
    if let Some(g) = &desc.gpus_per_node {
        let n = gres::parse_gpus(g).map_err(bad)?.count;
        per_node = per_node.checked_add(n).ok_or_else(too_many)?;
    }
    let mut gpus = per_node.checked_mul(nodes).ok_or_else(too_many)?;
    if let Some(g) = &desc.gpus {
        let n = gres::parse_gpus(g).map_err(bad)?.count;
        gpus = gpus.checked_add(n).ok_or_else(too_many)?;
    }
    let fixed_nodes = desc
        .min_nodes
        .filter(|n| desc.max_nodes.is_none_or(|m| m == *n));
    if gpus > 0 {
        let tasks = gpus.saturating_mul(u64::from(k));
        desc.ntasks = Some(u32::try_from(tasks).map_err(|_| RpcError {
            error: SlurmError::BadTaskCount,
            detail: Some(format!("{gpus} GPUs at {k} tasks each is too many tasks")),
        })?);
    } else if let Some(n) = desc.ntasks {
        if n % k != 0 {
            return err_detail(
                SlurmError::InvalidGres,
                "-n/--ntasks has to be a multiple of --ntasks-per-gpu",
            );
        }
        // As Slurm's: at least a GPU per node, and no more nodes than GPUs.
        let gpus = n / k;
        if u64::from(gpus) < nodes {
            return err_detail(
                SlurmError::InvalidGres,
                format!("{gpus} GPU(s) for {nodes} nodes: fewer GPUs than nodes"),
            );
        }
        if let Some(m) = desc.max_nodes {
            desc.max_nodes = Some(m.min(gpus));
        }
        desc.gpus = Some(gpus.to_string());
    } else if let Some(n) = fixed_nodes {
        desc.ntasks = Some(n.checked_mul(k).ok_or(RpcError {
            error: SlurmError::BadTaskCount,
            detail: Some(format!("{k} tasks per GPU on {n} nodes is too many tasks")),
        })?);
        desc.gpus = Some(n.to_string());
    } else {
        return err_detail(
            SlurmError::InvalidGres,
            "--ntasks-per-gpu needs GPUs (--gpus, --gres=gpu:N, --gpus-per-node) or a task or node count",
        );
    }
    Ok(desc)
}

impl Controller {
    /// Validate a submission and build the job record (not yet stored).
    pub fn build_job(
        &self,
        who: Caller,
        desc: JobDesc,
        job_id: JobId,
        now: i64,
    ) -> Result<(JobRecord, Payload), RpcError> {
        self.build_job_kind(who, desc, job_id, now, true)
    }

    /// As [`Controller::build_job`]; `batch = false` for allocations without
    /// a script (`salloc`, `srun`).
    pub fn build_job_kind(
        &self,
        who: Caller,
        desc: JobDesc,
        job_id: JobId,
        now: i64,
        batch: bool,
    ) -> Result<(JobRecord, Payload), RpcError> {
        let part = match &desc.partition {
            Some(name) => self
                .partitions
                .iter()
                .find(|p| &p.name == name)
                .ok_or(RpcError::from(SlurmError::InvalidPartitionName))?,
            None => self
                .partitions
                .iter()
                .find(|p| p.default)
                .or(self.partitions.first())
                .ok_or(RpcError::from(SlurmError::DefaultPartitionNotSet))?,
        };
        self.check_partition_access(who, part, &desc)?;
        // DRAIN and INACTIVE partitions queue nothing new (DOWN ones do).
        if matches!(part.state, PartitionState::Drain | PartitionState::Inactive) {
            return err(SlurmError::PartitionNotAvail);
        }
        self.check_sizes(&desc)?;
        if desc.nice.is_some_and(|n| n < 0) && !who.operator {
            return err_detail(
                SlurmError::AccessDenied,
                "only operators may set a negative nice",
            );
        }
        if let Some(rn) = &desc.reservation {
            let Some(r) = self.p.reservations.get(rn) else {
                return err(SlurmError::ReservationInvalid);
            };
            let uname = self.identity(who).user_or(who.uid);
            let acct = desc.account.clone().unwrap_or_default();
            let allowed = who.privileged
                || r.users
                    .iter()
                    .any(|u| *u == uname || *u == who.uid.to_string())
                || (!acct.is_empty() && r.accounts.contains(&acct));
            if !allowed {
                return err(SlurmError::ReservationAccess);
            }
        }
        let batch = batch && !desc.external;
        if desc.external && !desc.script.is_empty() {
            return err_detail(
                SlurmError::InvalidRequest,
                "an EXTERNAL_JOB has no batch script",
            );
        }
        if batch && !desc.script.starts_with("#!") {
            return err_detail(
                SlurmError::InvalidRequest,
                "batch script must start with #!",
            );
        }
        for n in desc.req_nodes.iter().chain(&desc.exc_nodes) {
            if !self.node_index.contains_key(n) {
                return err_detail(SlurmError::InvalidNodeName, n.clone());
            }
        }
        if desc.min_nodes == Some(0) || desc.max_nodes == Some(0) {
            return err(SlurmError::TooManyRequestedNodes);
        }
        if desc.ntasks == Some(0)
            || desc.cpus_per_task == Some(0)
            || desc.ntasks_per_node == Some(0)
            || desc.ntasks_per_socket == Some(0)
            || desc.ntasks_per_core == Some(0)
            || desc.ntasks_per_gpu == Some(0)
            || desc.sockets_per_node == Some(0)
            || desc.cores_per_socket == Some(0)
            || desc.threads_per_core == Some(0)
        {
            return err_detail(
                SlurmError::InvalidRequest,
                "task and cpu counts must be positive",
            );
        }
        if let (Some(a), Some(b)) = (desc.min_nodes, desc.max_nodes) {
            if b < a {
                return err(SlurmError::TooManyRequestedNodes);
            }
        }
        if self.p.jobs.len() as u32 >= self.conf.max_job_count {
            return err(SlurmError::ReachedMaxJobCount);
        }
        if let Some(d) = &desc.dependency {
            let dep = jobspec::parse_dependency(d).map_err(|e| RpcError {
                error: SlurmError::Dependency,
                detail: Some(e.to_string()),
            })?;
            if dep.clauses.len() > MAX_DEPENDENCIES {
                return err_detail(
                    SlurmError::Dependency,
                    format!(
                        "more than {MAX_DEPENDENCIES} dependencies ({})",
                        dep.clauses.len()
                    ),
                );
            }
            for c in &dep.clauses {
                if let jobspec::DepClause::Job { job_id, .. } = c {
                    if self.dep_targets(*job_id).next().is_none() {
                        return err_detail(
                            SlurmError::Dependency,
                            format!("job {job_id} is not known"),
                        );
                    }
                }
            }
        }
        let desc = match desc.ntasks_per_gpu {
            Some(k) => tasks_per_gpu(desc, k)?,
            None => desc,
        };
        // Task and node counts as Slurm derives them.
        let part_nodes = part.nodes.len().max(1) as u32;
        let mut min_nodes = desc.min_nodes.unwrap_or(1);
        if desc.min_nodes.is_none() {
            if let (Some(n), Some(t)) = (desc.ntasks, desc.ntasks_per_node) {
                min_nodes = n.div_ceil(t).max(1);
            }
        }
        min_nodes = min_nodes.max(desc.req_nodes.len() as u32);
        let num_tasks = match (desc.ntasks, desc.ntasks_per_node) {
            (Some(n), _) => n,
            (None, Some(t)) => match t.checked_mul(min_nodes) {
                Some(n) => n,
                None => {
                    return err_detail(
                        SlurmError::BadTaskCount,
                        format!("{t} tasks per node on {min_nodes} nodes is too many"),
                    )
                }
            },
            (None, None) => min_nodes,
        };
        let max_nodes = match (desc.max_nodes, desc.min_nodes) {
            (Some(m), _) => m,
            (None, Some(_)) => min_nodes,
            (None, None) => num_tasks.min(part_nodes).max(min_nodes),
        };
        // Fewer tasks than nodes: a node with no task (Slurm's
        // ESLURM_BAD_TASK_COUNT; its commands lower the node count first).
        if desc.ntasks.is_some() && num_tasks < min_nodes {
            return err_detail(
                SlurmError::BadTaskCount,
                format!("{num_tasks} tasks cannot use {min_nodes} nodes"),
            );
        }
        // Overcommitted with --ntasks-per-node: enough nodes that none
        // runs more than that many tasks.
        if let (true, Some(t)) = (desc.overcommit, desc.ntasks_per_node) {
            let need = num_tasks.div_ceil(t);
            if need > max_nodes {
                return err_detail(
                    SlurmError::BadTaskCount,
                    format!(
                        "{num_tasks} tasks at {t} per node need {need} nodes, more than the \
                         job's {max_nodes}"
                    ),
                );
            }
            min_nodes = min_nodes.max(need);
        }
        if let Some(seg) = desc.segment {
            if seg == 0 || !min_nodes.is_multiple_of(seg) {
                return err_detail(
                    SlurmError::InvalidRequest,
                    format!("--segment={seg} does not divide the job's {min_nodes} nodes"),
                );
            }
            let topo = self
                .topologies
                .list
                .get(self.topologies.of_partition(&part.name));
            if let Some(slurm_plugins::topo::Topology::Block(b)) = topo {
                let base = b.sizes.first().copied().unwrap_or(1);
                if seg > base {
                    return err_detail(
                        SlurmError::InvalidRequest,
                        format!("--segment={seg} is larger than the base block size {base}"),
                    );
                }
            }
        }
        // --cpus-per-gpu / --mem-per-gpu: per node, from the GPUs each node gets.
        let mut desc = desc;
        if desc.cpus_per_gpu.is_some() || desc.mem_per_gpu.is_some() {
            let specs = match slurm_common::gres::job_per_node(
                desc.gres.as_deref(),
                desc.gpus.as_deref(),
                desc.gpus_per_node.as_deref(),
                desc.gpus_per_task.as_deref(),
                min_nodes,
                num_tasks,
            ) {
                Ok(s) => s,
                Err(e) => return err_detail(SlurmError::InvalidGres, e),
            };
            let gpus_per_node: u64 = specs
                .iter()
                .filter(|s| s.name == "gpu")
                .map(|s| s.count)
                .sum();
            if gpus_per_node == 0 {
                return err_detail(
                    SlurmError::InvalidGres,
                    "--cpus-per-gpu and --mem-per-gpu need GPUs (--gpus, --gres=gpu:N, ...)",
                );
            }
            if let Some(c) = desc.cpus_per_gpu {
                if desc.cpus_per_task.is_some() {
                    return err_detail(
                        SlurmError::InvalidRequest,
                        "--cpus-per-gpu and --cpus-per-task are mutually exclusive",
                    );
                }
                // Overcommitted: CPUs for one task per node.
                let tasks_here = if desc.overcommit {
                    1
                } else {
                    desc.ntasks_per_node
                        .unwrap_or(num_tasks.div_ceil(min_nodes.max(1)))
                        .max(1)
                };
                let cpus = gpus_per_node.saturating_mul(u64::from(c));
                desc.cpus_per_task = Some(
                    cpus.div_ceil(u64::from(tasks_here))
                        .min(u64::from(u32::MAX)) as u32,
                );
            }
            if let Some(m) = desc.mem_per_gpu {
                if desc.mem_per_node.is_some() || desc.mem_per_cpu.is_some() {
                    return err_detail(
                        SlurmError::InvalidRequest,
                        "--mem-per-gpu, --mem and --mem-per-cpu are mutually exclusive",
                    );
                }
                desc.mem_per_node = Some(gpus_per_node.saturating_mul(m));
            }
        }
        let cpt = desc.cpus_per_task.unwrap_or(1);
        let time_limit = match desc.time_limit {
            Some(t) => t,
            None => part.default_time.or(part.max_time),
        };
        // `--priority`: fixed by operators; from anyone else only 0 counts
        // (a hold), any other value is ignored, as Slurm's.
        if !who.operator && desc.priority.is_some_and(|p| p != 0) {
            desc.priority = None;
        }
        let held = (desc.hold || desc.priority == Some(0)).then_some(if who.operator {
            HoldKind::Admin
        } else {
            HoldKind::User
        });
        let ident = self.identity(who);
        let name = desc.name.clone().unwrap_or_else(|| {
            desc.command
                .as_deref()
                .and_then(|c| c.rsplit('/').next())
                .filter(|s| !s.is_empty())
                .unwrap_or("sbatch")
                .to_string()
        });
        let payload = Payload {
            script: desc.script.clone(),
            environment: desc.environment.clone(),
        };
        let mut stored = desc;
        // `--wckey` counts only with TrackWCKey=yes, as in Slurm.
        let track_wckey = self
            .conf
            .get("TrackWCKey")
            .is_some_and(|v| v.eq_ignore_ascii_case("yes") || v == "1");
        if !track_wckey {
            stored.wckey = None;
        }
        stored.script = String::new();
        stored.environment = Vec::new();
        stored.min_nodes = Some(min_nodes);
        let mut job = JobRecord {
            job_id,
            name,
            user_id: who.uid,
            user_name: ident.user_or(who.uid),
            group_id: who.gid,
            group_name: ident.group.clone(),
            account: stored.account.clone().unwrap_or_default(),
            qos: stored.qos.clone().unwrap_or_else(|| "normal".into()),
            partition: part.name.clone(),
            priority: if held.is_some() {
                0
            } else {
                fixed_or_basic(stored.priority, job_id)
            },
            state: JobState::Pending,
            completing: false,
            reason: JobReason::None,
            time_limit,
            submit_time: now,
            eligible_time: Some(stored.begin_time.unwrap_or(now).max(now)),
            start_time: None,
            run_start: None,
            end_time: None,
            last_sched_eval: None,
            exit_status: 0,
            restarts: 0,
            batch_host: None,
            alloc: Allocation::default(),
            completing_nodes: Vec::new(),
            num_tasks,
            // Overcommitted: one task's CPUs per node.
            req_cpus: if stored.overcommit {
                min_nodes.max(1) * cpt
            } else {
                num_tasks * cpt
            },
            min_nodes,
            max_nodes,
            held,
            cancelled: false,
            timed_out: false,
            node_failed: false,
            steps: Vec::new(),
            batch,
            cancelled_by: None,
            suspend_time: None,
            suspended_secs: 0,
            preempt_suspended: false,
            gang_suspended: false,
            reason_prev: JobReason::None,
            sched_flag: None,
            failed_node: None,
            array: None,
            dependency: stored.dependency.clone(),
            desc: stored.into(),
        };
        job.set_reason(match held {
            Some(HoldKind::User) => JobReason::JobHeldUser,
            Some(HoldKind::Admin) => JobReason::JobHeldAdmin,
            None => JobReason::None,
        });
        // AccountingStorageEnforce: a valid association, an allowed QOS,
        // and submit limits.
        if let (true, Some(cache)) = (self.enforce.any(), &self.assocs) {
            let (account, qos) = cache.admit(
                &self.book,
                self.enforce,
                &job.user_name,
                job.desc.account.as_deref(),
                job.desc.qos.as_deref(),
                &job.partition,
                &job,
                self.p.jobs.values().map(|j| j.as_ref()),
            )?;
            if job.time_limit.is_none() {
                job.time_limit = self
                    .book
                    .default_wall(&job.user_name, &account, &job.partition, &qos)
                    .map(|m| m.min(u64::from(u32::MAX)) as u32);
            }
            job.account = account;
            job.qos = qos;
        } else if let Some(cache) = &self.assocs {
            // Not enforced, but accounting knows the user's default account.
            if job.account.is_empty() {
                if let Some(u) = cache.users.get(&job.user_name) {
                    job.account = u.default_account.clone();
                }
            }
        }
        if job.desc.admin_comment.is_some() && !who.admin {
            return err_detail(
                SlurmError::AccessDenied,
                "only administrators may set admin_comment",
            );
        }
        // Mail: known events, one recipient that cannot read as an option
        // of MailProg (REST and gRPC clients send these unchecked).
        if let Some(t) = &job.desc.mail_type {
            match slurm_common::mail::parse_types(t) {
                Ok(norm) => Arc::make_mut(&mut job.desc).mail_type = norm,
                Err(e) => return err_detail(SlurmError::InvalidRequest, e),
            }
        }
        if let Some(u) = &job.desc.mail_user {
            if let Err(e) = slurm_common::mail::check_user(u) {
                return err_detail(SlurmError::InvalidRequest, e);
            }
        }
        if let Some(s) = &job.desc.signal {
            if let Err(e) = slurm_common::signal::parse_warning(s) {
                return err_detail(SlurmError::InvalidRequest, e);
            }
        }
        if let Some(m) = &job.desc.open_mode {
            if m != "append" && m != "truncate" {
                return err_detail(
                    SlurmError::InvalidRequest,
                    format!("--open-mode={m} invalid: append or truncate"),
                );
            }
        }
        // `--time-min` within the limit; a `--deadline` ahead, after the
        // begin time, and with a limit to end by it.
        if let (Some(m), Some(l)) = (job.desc.time_min, job.time_limit) {
            if m > l {
                return err_detail(
                    SlurmError::InvalidTimeLimit,
                    format!("--time-min of {m} minutes exceeds the time limit of {l} minutes"),
                );
            }
        }
        if let Some(dl) = job.desc.deadline {
            let begin = job.desc.begin_time.unwrap_or(now).max(now);
            if dl <= begin {
                return err_detail(
                    SlurmError::InvalidTimeLimit,
                    "--deadline is not later than the job's begin time (or now)",
                );
            }
            if job.time_limit.is_none() && job.desc.time_min.is_none() {
                return err_detail(
                    SlurmError::InvalidTimeLimit,
                    "--deadline needs a time limit (--time, or the partition's DefaultTime or MaxTime)",
                );
            }
        }
        // Licenses: known ones, never more than the cluster has.
        if let Some(l) = &job.desc.licenses {
            let want = match slurm_common::licenses::parse(l) {
                Ok(w) => w,
                Err(e) => return err_detail(SlurmError::InvalidLicenses, e),
            };
            for (name, n) in want {
                match self.licenses.iter().find(|(x, _)| *x == name) {
                    Some((_, total)) if n <= *total => {}
                    Some((_, total)) => {
                        return err_detail(
                            SlurmError::InvalidLicenses,
                            format!("{name}:{n} is more than the cluster's {total}"),
                        )
                    }
                    None => {
                        return err_detail(
                            SlurmError::InvalidLicenses,
                            format!("no license '{name}' (Licenses= in slurm.conf)"),
                        )
                    }
                }
            }
        }
        // Generic resources every node of the job needs.
        if let Err(e) = self.job_gres(&job.desc, job.min_nodes, job.num_tasks) {
            return err_detail(SlurmError::InvalidGres, e);
        }
        if let Some(c) = &job.desc.constraint {
            let c = match slurm_common::constraint::Constraint::parse(c) {
                Ok(c) => c,
                Err(e) => return err_detail(SlurmError::InvalidFeature, e),
            };
            if let Some(f) = c
                .features()
                .into_iter()
                .find(|f| !self.nodes.iter().any(|n| n.features.iter().any(|x| x == f)))
            {
                return err_detail(
                    SlurmError::InvalidFeature,
                    format!("no node has feature '{f}'"),
                );
            }
            if let Some((f, n)) = c.counts().into_iter().find(|(_, n)| *n > job.max_nodes) {
                return err_detail(
                    SlurmError::InvalidFeature,
                    format!(
                        "{f}*{n} asks for more nodes than the job's {}",
                        job.max_nodes
                    ),
                );
            }
        }
        // Could it ever run on this partition (once other jobs'
        // reservations are over)?
        let view = self.empty_view();
        let jv = self
            .job_view_with(&job, false)
            .ok_or(RpcError::from(SlurmError::InvalidPartitionName))?;
        let never = slurm_plugins::select::place(&view, &jv, true).is_err();
        // What jobs hold plays no part in it (checked in debug builds).
        debug_assert_eq!(
            never,
            slurm_plugins::select::place(&self.cluster_view(), &jv, true).is_err(),
            "the empty view and the full one disagree on whether job {} could ever run",
            job.job_id
        );
        if never {
            return err(SlurmError::RequestedNodeConfigUnavailable);
        }
        Ok((job, payload))
    }

    /// AllowGroups / AllowAccounts / AllowQos (and the Deny lists): who may
    /// use a partition. Root and SlurmUser may use any.
    /// Slurm's submission size limits (SchedulerParameters
    /// `max_script_size`, `max_submit_line_size`; `max_env_size` is ours),
    /// checked before the job is built.
    pub(super) fn check_sizes(&self, desc: &JobDesc) -> Result<(), RpcError> {
        let limits = &self.limits;
        let total = |v: &[String]| v.iter().map(|x| x.len() + 1).sum::<usize>();
        let checks = [
            (
                "batch script is too large",
                desc.script.len(),
                limits.max_script_size,
                "max_script_size",
            ),
            (
                "job environment is too large",
                total(&desc.environment),
                limits.max_env_size,
                "max_env_size",
            ),
            (
                "submit line is too long",
                total(&desc.argv),
                limits.max_submit_line_size,
                "max_submit_line_size",
            ),
        ];
        for (what, size, max, name) in checks {
            if size > max {
                return err_detail(
                    SlurmError::InvalidRequest,
                    format!("{what} ({size} bytes; {name} is {max})"),
                );
            }
        }
        if let Some(max) = limits.max_replicated {
            let size = json_len(&desc.script)
                + desc
                    .environment
                    .iter()
                    .map(|e| json_len(e) + 1)
                    .sum::<usize>();
            if size > max {
                return err_detail(
                    SlurmError::InvalidRequest,
                    format!(
                        "batch script and environment are too large to replicate ({size} bytes \
                         as JSON; the controllers take {max} in one message: \
                         CommunicationParameters=max_message_size)"
                    ),
                );
            }
        }
        // (As sbatch says; a client that is not sbatch gets it here. No
        // text store or shell takes a NUL.)
        if desc.script.contains('\0') || desc.environment.iter().any(|e| e.contains('\0')) {
            return err_detail(
                SlurmError::InvalidRequest,
                "The Slurm job script or environment contains a NULL character '\\0'",
            );
        }
        Ok(())
    }

    /// A pending job moved to another partition, account or QOS must pass
    /// what a submission of it would: the partition's Allow/Deny lists (for
    /// the job's user, unless root or SlurmUser asks) and, with
    /// AccountingStorageEnforce, its association and QOS.
    pub(super) fn check_placement_update(
        &self,
        who: Caller,
        job: &JobRecord,
    ) -> Result<(), RpcError> {
        let part = self
            .partitions
            .iter()
            .find(|p| p.name == job.partition)
            .ok_or(RpcError::from(SlurmError::InvalidPartitionName))?;
        let mut desc = (*job.desc).clone();
        desc.account = Some(job.account.clone()).filter(|a| !a.is_empty());
        desc.qos = Some(job.qos.clone()).filter(|q| !q.is_empty());
        // The job's user's rights, not the asker's (a coordinator's groups
        // are not its users'): the owner asking is known by the names just
        // looked up; for anyone else the owner's last looked-up names are
        // used (none known: refused, never allowed).
        if !who.privileged {
            let owner = if who.uid == job.user_id {
                who
            } else {
                self.caller(job.user_id, job.group_id)
            };
            self.check_partition_access(owner, part, &desc)?;
        }
        if let (true, Some(cache)) = (self.enforce.any(), &self.assocs) {
            cache.admit(
                &self.book,
                self.enforce,
                &job.user_name,
                desc.account.as_deref(),
                desc.qos.as_deref(),
                &job.partition,
                job,
                self.p
                    .jobs
                    .values()
                    .filter(|o| o.job_id != job.job_id)
                    .map(|j| j.as_ref()),
            )?;
        }
        Ok(())
    }

    pub(super) fn check_partition_access(
        &self,
        who: Caller,
        part: &PartitionRecord,
        desc: &JobDesc,
    ) -> Result<(), RpcError> {
        if who.privileged {
            return Ok(());
        }
        let list = |s: &Option<String>| -> Option<Vec<String>> {
            s.as_ref()
                .filter(|v| !v.eq_ignore_ascii_case("ALL"))
                .map(|v| v.split(',').map(|x| x.trim().to_string()).collect())
        };
        let deny = |e: SlurmError, d: String| {
            Err(RpcError {
                error: e,
                detail: Some(d),
            })
        };
        if let Some(groups) = list(&part.allow_groups) {
            let names = &self.identity(who).groups;
            if !groups.iter().any(|g| names.contains(g)) {
                return deny(
                    SlurmError::AccessDenied,
                    format!("user's group not permitted to use partition {}", part.name),
                );
            }
        }
        let account = desc.account.clone().unwrap_or_default();
        let qos = desc.qos.clone().unwrap_or_else(|| "normal".into());
        let conf = self.conf.partition(&part.name);
        // (value, allow list, deny list, error, what)
        let checks = [
            (
                &account,
                list(&part.allow_accounts),
                conf.and_then(|p| list(&p.deny_accounts)),
                SlurmError::InvalidAccount,
                "account",
            ),
            (
                &qos,
                list(&part.allow_qos),
                conf.and_then(|p| list(&p.deny_qos)),
                SlurmError::InvalidQos,
                "QOS",
            ),
        ];
        for (value, allow, denied, error, what) in checks {
            let refused = allow.is_some_and(|a| !a.contains(value))
                || denied.is_some_and(|d| d.contains(value));
            if refused {
                return deny(
                    error,
                    format!("{what} '{value}' may not use partition {}", part.name),
                );
            }
        }
        Ok(())
    }

    pub(super) fn submit(
        &mut self,
        who: Caller,
        desc: JobDesc,
        now: i64,
    ) -> Result<Response, RpcError> {
        let id = self.p.next_job_id;
        let array = match &desc.array {
            Some(spec) => Some(
                jobspec::parse_array(spec, self.conf.max_array_size).map_err(|e| RpcError {
                    error: SlurmError::InvalidArray,
                    detail: Some(e.to_string()),
                })?,
            ),
            None => None,
        };
        let count = array.as_ref().map_or(1, |a| a.tasks.len() as u32);
        if self.p.jobs.len() as u64 + count as u64 > self.conf.max_job_count as u64 {
            return err(SlurmError::ReachedMaxJobCount);
        }
        let (job, payload) = self.build_job(who, desc, id, now)?;
        self.p.next_job_id = id.wrapping_add(count).max(1);
        self.entries.push(Entry::NextJobId(self.p.next_job_id));
        let payload = Arc::new(payload);
        match array {
            None => {
                self.entries.push(Entry::Payload(id, payload.clone()));
                self.p.payloads.insert(id, payload);
                self.p.jobs.insert(id, Arc::new(job));
                self.touched.insert(id);
                self.save_job(id);
            }
            Some(a) => {
                let step = match a.tasks.as_slice() {
                    [x, y, ..] => {
                        let st = y - x;
                        a.tasks.windows(2).all(|w| w[1] - w[0] == st).then_some(st)
                    }
                    _ => None,
                };
                for (k, &task) in a.tasks.iter().enumerate() {
                    let tid = id + k as u32;
                    let mut t = job.clone();
                    t.job_id = tid;
                    if t.held.is_none() {
                        t.priority = fixed_or_basic(t.desc.priority, tid);
                    }
                    t.array = Some(ArrayInfo {
                        job_id: id,
                        task_id: task,
                        task_count: a.tasks.len() as u32,
                        task_min: a.tasks[0],
                        task_max: *a.tasks.last().unwrap_or(&a.tasks[0]),
                        task_step: step,
                        max_running: a.max_running,
                    });
                    self.p.payloads.insert(tid, payload.clone());
                    self.p.jobs.insert(tid, Arc::new(t));
                    self.touched.insert(tid);
                    self.save_job(tid);
                }
                // The tasks' one script and environment, journaled once.
                let ids: Vec<JobId> = (0..a.tasks.len() as u32).map(|k| id + k).collect();
                self.entries.push(Entry::Payloads(ids, payload.clone()));
            }
        }
        self.sched_needed = true;
        self.stats.jobs_submitted += count as u64;
        if let Some(m) = self.multifactor.as_mut() {
            // A new user gets an association at once; the fair share then
            // reflects the usage charged so far.
            if let Some(j) = self.p.jobs.get(&id) {
                let (u, a) = (j.user_name.clone(), Self::account_of(j));
                if m.tree.find_user(&u, &a).is_none() {
                    if let Err(e) = m.tree.ensure_user(&u, &a) {
                        tracing::warn!("fair share association for {u}: {e}");
                    }
                    // The shares of everyone changed: recompute all.
                    m.recompute();
                    self.recompute_priorities(now);
                }
            }
            for tid in id..id + count {
                if let Some(f) = self
                    .p
                    .jobs
                    .get(&tid)
                    .and_then(|j| self.multifactor_priority(j, now))
                {
                    if let Some(j) = self.job_mut(tid) {
                        j.priority = f.priority;
                    }
                    self.factors.insert(tid, f);
                }
            }
        }
        trace_submitted(self, id);
        Ok(Response::Submitted { job_id: id })
    }

    pub(super) fn test_job(
        &mut self,
        who: Caller,
        desc: JobDesc,
        now: i64,
    ) -> Result<Response, RpcError> {
        let id = self.p.next_job_id;
        let (job, _) = self.build_job(who, desc, id, now)?;
        let view = self.cluster_view();
        let jv = self
            .job_view(&job)
            .ok_or(RpcError::from(SlurmError::InvalidPartitionName))?;
        // The queue ahead of it, as the policy would see it.
        let queue: Vec<JobView> = self
            .p
            .jobs
            .values()
            .filter(|j| j.state == JobState::Pending && !j.completing && j.held.is_none())
            .filter_map(|j| self.job_view(j))
            .collect();
        // Far future when it cannot be predicted, as Slurm reports it.
        let (start, alloc) = self
            .scheduler
            .expected_start(&view, &queue, &jv, now)
            .unwrap_or((now + 365 * 86400 * 1000, Vec::new()));
        Ok(Response::TestResult {
            job_id: id,
            start_time: start,
            cpus: if alloc.is_empty() {
                job.req_cpus
            } else {
                alloc.iter().map(|a| a.cpus).sum()
            },
            nodes: alloc
                .iter()
                .map(|a| self.nodes[a.node].name.clone())
                .collect(),
            partition: job.partition,
        })
    }

    pub(super) fn allocate(
        &mut self,
        who: Caller,
        desc: JobDesc,
        now: i64,
    ) -> Result<Response, RpcError> {
        if desc.array.is_some() {
            return err_detail(SlurmError::InvalidArray, "job arrays need a batch script");
        }
        let id = self.p.next_job_id;
        let (job, payload) = self.build_job_kind(who, desc, id, now, false)?;
        self.p.next_job_id = id.wrapping_add(1).max(1);
        self.entries.push(Entry::NextJobId(self.p.next_job_id));
        let payload = Arc::new(payload);
        self.entries.push(Entry::Payload(id, payload.clone()));
        self.p.payloads.insert(id, payload);
        self.p.jobs.insert(id, Arc::new(job));
        self.touched.insert(id);
        self.save_job(id);
        self.sched_needed = true;
        self.stats.jobs_submitted += 1;
        trace_submitted(self, id);
        Ok(Response::Submitted { job_id: id })
    }
}

/// `DebugFlags=TraceJobs`: a job accepted, in the log.
fn trace_submitted(c: &Controller, id: JobId) {
    if slurm_common::debugflags::on(slurm_common::debugflags::TRACE_JOBS) {
        let uid = c.p.jobs.get(&id).map_or(0, |j| j.user_id);
        tracing::info!("TraceJobs: JobId={id} submitted by uid {uid}");
    }
}

/// A job's priority before any other policy: the one an operator fixed
/// (`--priority`), else priority/basic's by job id.
pub(super) fn fixed_or_basic(fixed: Option<u32>, id: JobId) -> u32 {
    fixed
        .filter(|p| *p > 0)
        .unwrap_or_else(|| slurm_plugins::priority::basic(u64::from(id)))
}

#[cfg(test)]
mod tests {
    use super::json_len;

    #[test]
    fn json_lengths_count_escapes() {
        for s in ["", "plain", "a\"b\\c\n", "\u{1}\u{7f}é\t"] {
            assert_eq!(
                json_len(s),
                serde_json::to_string(s).unwrap().len(),
                "{s:?}"
            );
        }
    }
}
