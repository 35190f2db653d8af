//! Jobs ending and changing: completion reports, cancel, requeue, update,
//! terminate requests to the nodes, a job lost with its node, failed
//! launches and prologs, and reading back a job's script.

use super::*;

impl Controller {
    /// `scontrol create PartitionName=NAME [Nodes=LIST] [Default=YES|NO]
    /// [State=] [MaxTime=] [DefaultTime=]`: operators only; kept over
    /// restarts and reconfigures until deleted.
    /// `scontrol write batch_script`: the job's script, for its owner,
    /// root, SlurmUser and operators. Under `PrivateData=jobs` another user's job does
    /// not exist for the caller.
    pub(super) fn job_script(&self, who: Caller, id: JobId) -> Result<Response, RpcError> {
        let j = match self.p.jobs.get(&id) {
            // Operators too (not coordinators), as Slurm's.
            Some(j) if who.operator => j,
            _ => self.job_of_owner(who, id, SlurmError::AccessDenied)?,
        };
        match self.p.payloads.get(&id) {
            Some(p) if j.batch && !p.script.is_empty() => Ok(Response::JobScript(p.script.clone())),
            _ => err_detail(SlurmError::InvalidRequest, "no batch script for this job"),
        }
    }

    /// Job `id` when `who` owns it or is root or SlurmUser; another user
    /// gets `denied`, or under `PrivateData=jobs` no such job.
    pub(super) fn job_of_owner(
        &self,
        who: Caller,
        id: JobId,
        denied: SlurmError,
    ) -> Result<&Arc<JobRecord>, RpcError> {
        let j = self.p.jobs.get(&id).ok_or(SlurmError::InvalidJobId)?;
        if !who.privileged && j.user_id != who.uid {
            // (A job the caller may see: an operator's or coordinator's.)
            let hidden = self.conf.private_data().jobs
                && !who.operator
                && !self.coordinates(who, &j.account);
            return Err(if hidden {
                SlurmError::InvalidJobId
            } else {
                denied
            }
            .into());
        }
        Ok(j)
    }

    /// `scontrol notify JOB MESSAGE`: the job's owner, root or SlurmUser
    /// (as Slurm's; not operators). A running batch job's script is told
    /// on its error file (`slurmstepd: error: MESSAGE`, by its node); an
    /// interactive job's running steps' sruns (`srun: MESSAGE`). Nothing to
    /// tell (pending, or no step running): Slurm's "presently disabled";
    /// over: "already completing or completed".
    pub(super) fn notify_job(
        &mut self,
        who: Caller,
        id: JobId,
        message: String,
    ) -> Result<Response, RpcError> {
        const MAX_NOTICE: usize = 8192;
        let j = self.job_of_owner(who, id, SlurmError::UserIdMissing)?;
        // Not operators or coordinators: the owner, root or SlurmUser.
        if j.user_id != who.uid && who.uid != 0 && who.uid != self.slurm_uid {
            return err(if self.conf.private_data().jobs {
                SlurmError::InvalidJobId
            } else {
                SlurmError::UserIdMissing
            });
        }
        if message.len() > MAX_NOTICE {
            return err_detail(
                SlurmError::InvalidRequest,
                format!("the message is longer than {MAX_NOTICE} bytes"),
            );
        }
        if j.state != JobState::Pending && (j.state != JobState::Running || j.completing) {
            return err(SlurmError::AlreadyDone);
        }
        let nodes: Vec<String> = match (j.state, j.batch) {
            (JobState::Running, true) => j.batch_host.clone().into_iter().collect(),
            (JobState::Running, false) => {
                let mut n: Vec<String> = j
                    .steps
                    .iter()
                    .filter(|s| s.state == JobState::Running)
                    .filter_map(|s| s.nodes.first().cloned())
                    .collect();
                n.sort();
                n.dedup();
                n
            }
            _ => Vec::new(),
        };
        if nodes.is_empty() {
            return err(SlurmError::Disabled);
        }
        for node in nodes {
            if let Some(addr) = self.node_addr(&node) {
                self.effects.push(Effect::Notify {
                    node,
                    addr,
                    job_id: id,
                    message: message.clone(),
                });
            }
        }
        Ok(Response::Ok)
    }

    pub(super) fn complete_job(
        &mut self,
        who: Caller,
        id: JobId,
        status: i32,
        now: i64,
    ) -> Result<Response, RpcError> {
        let j = self.owned_job(who, id)?;
        match j.state {
            JobState::Running | JobState::Suspended => {
                let (code, sig) = wait_status_pair(status);
                let (state, reason) = if sig != 0 {
                    (JobState::Failed, JobReason::RaisedSignal)
                } else if code != 0 {
                    (JobState::Failed, JobReason::NonZeroExitCode)
                } else {
                    (JobState::Completed, JobReason::None)
                };
                if let Some(j) = self.job_mut(id) {
                    j.exit_status = status;
                }
                self.end_running(id, state, reason, now, self.conf.kill_wait);
                Ok(Response::Ok)
            }
            // Released before it ever started: nothing ran.
            JobState::Pending => {
                self.cancel_one(who, id, None, now)
                    .map_err(RpcError::from)?;
                Ok(Response::Ok)
            }
            _ => err(SlurmError::AlreadyDone),
        }
    }

    /// Move a running job to a final state and start cleaning its nodes.
    pub(super) fn end_running(
        &mut self,
        id: JobId,
        state: JobState,
        reason: JobReason,
        now: i64,
        kill_wait: u32,
    ) {
        self.count_end(id, state);
        self.close_suspension(id, now);
        let Some(j) = self.job_mut(id) else { return };
        j.state = state;
        for st in j
            .steps
            .iter_mut()
            .filter(|st| st.state == JobState::Running)
        {
            st.state = state;
            st.end_time = Some(now);
        }
        j.reason = reason;
        j.end_time = Some(now);
        j.completing = true;
        j.completing_nodes = j.alloc.nodes.clone();
        let nodes = j.alloc.nodes.clone();
        self.terminate_on(id, &nodes, kill_wait);
        self.save_job(id);
        self.sched_needed = true;
        self.refresh_jobs();
    }

    /// Put a job back in the queue (`scontrol requeue`, preemption, a lost
    /// node): a running one is ended on its nodes first (after `kill_wait`
    /// seconds of grace), its steps closed, and its run recorded as ended
    /// in state `recorded` ([`Self::record_requeued_run`]).
    pub(super) fn requeue_running(
        &mut self,
        id: JobId,
        recorded: JobState,
        kill_wait: u32,
        now: i64,
    ) {
        let Some(running) = self.p.jobs.get(&id).map(|j| j.state.is_active()) else {
            return;
        };
        let suspended = self
            .p
            .jobs
            .get(&id)
            .is_some_and(|j| j.state == JobState::Suspended);
        self.new_run_record(id, recorded, now);
        let Some(j) = self.job_mut(id) else { return };
        let run = j.run();
        // As Slurm: a suspended job requeued is held.
        if suspended && j.held.is_none() {
            j.held = Some(HoldKind::Admin);
        }
        j.clear_suspension();
        let nodes = j.alloc.nodes.clone();
        j.state = JobState::Pending;
        j.reason = JobReason::None;
        j.restarts += 1;
        j.start_time = None;
        j.run_start = None;
        j.end_time = None;
        j.exit_status = 0;
        j.cancelled = false;
        j.timed_out = false;
        j.node_failed = false;
        // (Its next start says which scheduler started it; a failed node
        // that sent it back stays named.)
        j.sched_flag = None;
        j.eligible_time = Some(now);
        if running {
            j.completing = true;
            j.completing_nodes = nodes.clone();
            self.terminate_run(id, &nodes, kill_wait, run);
        } else {
            j.alloc = Allocation::default();
            j.batch_host = None;
        }
        self.save_job(id);
        self.sched_needed = true;
        self.refresh();
    }

    /// A requeue, as Slurm records it: a running job's run ends in
    /// accounting in state `recorded` ([`Self::record_requeued_run`]), the
    /// job forgets that run's steps (the next run numbers them from 0) and
    /// takes a new submit time, so its next run is a record of its own.
    /// (The caller then puts it back in the queue; `record_requeued_run`
    /// reads its state first.)
    fn new_run_record(&mut self, id: JobId, recorded: JobState, now: i64) {
        let Some(j) = self.p.jobs.get(&id) else {
            return;
        };
        let (active, batch) = (j.state.is_active(), j.batch);
        let steps: Vec<u32> = j.steps.iter().map(|s| s.step_id).collect();
        if active {
            self.record_requeued_run(id, recorded, now);
        } else if let Some(k) = self.ended_now.iter().position(|&e| e == id) {
            // A job that ended in this batch and is requeued before the
            // batch's completion records are made: its record is made now,
            // while it still tells the run that ended.
            self.ended_now.remove(k);
            self.requeued_now.push(super::accounting::ended_run(j));
        }
        // The next record is the next run's (with the script again); its
        // steps are numbered from 0 again.
        self.acct_jobs.remove(&id);
        if batch && self.acct_enabled {
            self.acct_payload_due.insert(id);
        }
        for s in steps {
            self.acct_steps.remove(&(id, s));
        }
        if let Some(j) = self.job_mut(id) {
            j.steps.clear();
            j.submit_time = now.max(j.submit_time + 1);
            // As Slurm (which waits CredExpire): the next run begins no
            // sooner than the next second, so it starts at a time of its
            // own; a run is known by its start time on the nodes and in
            // their reports, and a late report of this run must not be
            // taken for the next one's.
            if active && j.desc.begin_time.is_none_or(|b| b <= now) {
                Arc::make_mut(&mut j.desc).begin_time = Some(now + 1);
            }
        }
    }

    /// Ask `nodes` to end the job; nodes that cannot answer are done at once.
    /// (Why, the job's error file is told: see [`term_cause`].)
    pub(super) fn terminate_on(&mut self, id: JobId, nodes: &[String], kill_wait: u32) {
        let run = self.p.jobs.get(&id).and_then(|j| j.run());
        self.terminate_run(id, nodes, kill_wait, run);
    }

    /// [`Self::terminate_on`] for the run that started at `start_time`
    /// (a requeued job's record no longer has it; a terminate for "any
    /// run" could reach the node after the next run has started there).
    pub(super) fn terminate_run(
        &mut self,
        id: JobId,
        nodes: &[String],
        kill_wait: u32,
        start_time: Option<i64>,
    ) {
        let mut gone = Vec::new();
        let cause = self
            .p
            .jobs
            .get(&id)
            .map_or(slurm_proto::TermCause::None, |j| term_cause(j));
        for n in nodes {
            if self.node_responding(n) {
                if let Some(addr) = self.node_addr(n) {
                    self.effects.push(Effect::Terminate {
                        node: n.clone(),
                        addr,
                        job_id: id,
                        kill_wait,
                        start_time,
                        cause,
                    });
                }
            } else {
                gone.push(n.clone());
            }
        }
        for n in gone {
            self.node_cleaned(id, &n, None);
        }
    }

    /// `node` has nothing left of job `id`'s run `run` (when it says
    /// which: a job requeued forgets its run's start, so any run is taken
    /// then).
    pub(super) fn node_cleaned(&mut self, id: JobId, node: &str, run: Option<i64>) {
        // Only a node the job is completing on speaks for it, and only of
        // the run that is completing (a report sent again of an earlier
        // run must not end the cleanup of this one).
        if !self.p.jobs.get(&id).is_some_and(|j| {
            j.completing
                && (j.completing_nodes.is_empty() || j.completing_nodes.iter().any(|n| n == node))
                && (run.is_none() || j.run().is_none() || run == j.run())
        }) {
            return;
        }
        let Some(j) = self.job_mut(id) else { return };
        j.completing_nodes.retain(|n| n != node);
        if j.completing_nodes.is_empty() {
            j.completing = false;
            if j.state == JobState::Pending {
                // Requeued: forget the old allocation.
                j.alloc = Allocation::default();
                j.batch_host = None;
            }
        }
        self.save_job(id);
        self.sched_needed = true;
        self.refresh_jobs();
    }

    pub(super) fn batch_complete(
        &mut self,
        id: JobId,
        status: i32,
        oom: bool,
        usage: Option<(TaskUsage, String)>,
        Run { node, start }: Run<'_>,
        now: i64,
    ) {
        let Some(j) = self.p.jobs.get(&id) else {
            return;
        };
        // Only the node the script runs on reports its end: a report from
        // a node it no longer runs on (cut off while the job was requeued
        // and started elsewhere) is about an old run, and a job with no
        // script running (an allocation, a requeued job) has none to end.
        if j.batch_host.as_deref() != Some(node) {
            tracing::info!(
                "job {id}: batch completion from {node} ignored (its script runs on {})",
                j.batch_host.as_deref().unwrap_or("no node")
            );
            return;
        }
        // Nor does the end of an earlier run on the same node (a report
        // sent again after the job was requeued and started there anew)
        // end this one.
        if start.is_some() && start != j.run() {
            tracing::info!(
                "job {id}: batch completion of the run started at {} ignored (this run started at {})",
                start.unwrap_or_default(),
                j.run().map_or("no time".to_string(), |s| s.to_string())
            );
            return;
        }
        if let Some((u, node)) = usage {
            if let Some(b) = self
                .job_mut(id)
                .and_then(|j| j.steps.iter_mut().find(|s| s.step_id == BATCH_STEP))
            {
                b.usage = Some(u);
                b.usage_node = Some(node);
            }
        }
        let Some(j) = self.p.jobs.get(&id) else {
            return;
        };
        if j.state.is_active() {
            let (code, sig) = wait_status_pair(status);
            let (state, reason) = if oom {
                (
                    JobState::OutOfMemory,
                    JobReason::Other("OutOfMemory".into()),
                )
            } else if sig != 0 {
                (JobState::Failed, JobReason::RaisedSignal)
            } else if code != 0 {
                (JobState::Failed, JobReason::NonZeroExitCode)
            } else {
                (JobState::Completed, JobReason::None)
            };
            self.count_end(id, state);
            let Some(j) = self.p.jobs.get(&id) else {
                return;
            };
            let batch = j.batch_host.clone();
            let others: Vec<String> = j
                .alloc
                .nodes
                .iter()
                .filter(|n| Some(*n) != batch.as_ref())
                .cloned()
                .collect();
            self.close_suspension(id, now);
            let Some(j) = self.job_mut(id) else { return };
            j.exit_status = status;
            j.state = state;
            if let Some(b) = j.steps.iter_mut().find(|s| s.step_id == BATCH_STEP) {
                b.state = state;
                b.exit_status = status;
                b.end_time = Some(now);
            }
            // Steps still running when the script ends end with the job (a
            // step's own completion may still be on its way from srun).
            for st in j.steps.iter_mut().filter(|s| s.state == JobState::Running) {
                st.state = state;
                st.end_time = Some(now);
            }
            j.reason = reason;
            j.end_time = Some(now);
            j.completing = true;
            j.completing_nodes = j.alloc.nodes.clone();
            // The batch host cleans up by itself and says so.
            self.terminate_on(id, &others, 0);
            self.save_job(id);
            self.sched_needed = true;
            self.refresh_jobs();
        } else if j.exit_status == 0 && j.state != JobState::Pending {
            // Cancelled, timed out or failed before the script's status came:
            // the status belongs to the batch step (and `scontrol show job`).
            if let Some(j) = self.job_mut(id) {
                j.exit_status = status;
                if let Some(b) = j.steps.iter_mut().find(|s| s.step_id == BATCH_STEP) {
                    b.exit_status = status;
                }
            }
            self.save_job(id);
        }
    }

    /// End pending job `id` without running it: cancelled, or past its
    /// deadline.
    pub(super) fn end_pending(&mut self, id: JobId, state: JobState, reason: JobReason, now: i64) {
        let Some(j) = self.job_mut(id) else {
            return;
        };
        j.state = state;
        j.cancelled |= state == JobState::Cancelled;
        j.reason = reason;
        j.end_time = Some(now);
        j.start_time = Some(now);
        self.count_end(id, state);
        self.save_job(id);
        self.sched_needed = true;
    }

    pub(super) fn cancel_one(
        &mut self,
        who: Caller,
        id: JobId,
        signal: Option<i32>,
        now: i64,
    ) -> Result<(), SlurmError> {
        let j = self.managed_job(who, id)?;
        if j.state.is_finished() {
            return Err(SlurmError::AlreadyDone);
        }
        match (j.state, signal) {
            (JobState::Pending, None) | (JobState::Pending, Some(libc::SIGKILL)) => {
                let Some(j) = self.job_mut(id) else {
                    return Err(SlurmError::InvalidJobId);
                };
                j.cancelled_by = Some(who.uid);
                self.end_pending(id, JobState::Cancelled, JobReason::None, now);
                Ok(())
            }
            (JobState::Pending, Some(_)) => Err(SlurmError::JobPending),
            (_, None) => {
                if let Some(j) = self.job_mut(id) {
                    j.cancelled = true;
                    j.cancelled_by = Some(who.uid);
                }
                let kw = self.conf.kill_wait;
                self.end_running(id, JobState::Cancelled, JobReason::None, now, kw);
                Ok(())
            }
            (_, Some(sig)) => {
                let host = j.batch_host.clone().unwrap_or_default();
                if let Some(addr) = self.node_addr(&host) {
                    self.effects.push(Effect::Signal {
                        node: host.clone(),
                        addr,
                        job_id: id,
                        signal: sig,
                    });
                }
                Ok(())
            }
        }
    }

    pub(super) fn cancel(&mut self, who: Caller, f: CancelFilter, now: i64) -> Response {
        // As Slurm's: an AdminComment only from a super user, or nothing.
        if f.admin_comment.is_some() && !who.admin {
            tracing::error!(uid = who.uid, "attempt to set AdminComment by {}", who.uid);
            return Response::Error(SlurmError::UserIdMissing.into());
        }
        const MAX_COMMENT: usize = 8192;
        if f.admin_comment
            .as_ref()
            .is_some_and(|c| c.len() > MAX_COMMENT)
        {
            return Response::Error(RpcError {
                error: SlurmError::InvalidRequest,
                detail: Some(format!(
                    "the admin comment is longer than {MAX_COMMENT} bytes"
                )),
            });
        }
        // PrivateData=jobs: other users' jobs do not exist for the caller
        // (no filter or id may tell them apart).
        let private = !who.operator && self.conf.private_data().jobs;
        let ids: Vec<JobId> = if f.job_ids.is_empty() {
            let user = match private {
                true => Some(who.uid).filter(|me| f.user.is_none_or(|u| u == *me)),
                false => f.user.or((!who.operator).then_some(who.uid)),
            };
            if private && user.is_none() {
                return Response::Cancelled(Vec::new());
            }
            self.p
                .jobs
                .values()
                .filter(|j| !j.state.is_finished())
                .filter(|j| user.is_none_or(|u| j.user_id == u))
                .filter(|j| f.states.is_empty() || f.states.contains(&j.state))
                .filter(|j| f.name.as_ref().is_none_or(|n| &j.name == n))
                .filter(|j| f.partition.as_ref().is_none_or(|p| &j.partition == p))
                .map(|j| j.job_id)
                .collect()
        } else {
            let mut ids = Vec::new();
            for id in &f.job_ids {
                let tasks: Vec<JobId> = self
                    .p
                    .jobs
                    .values()
                    .filter(|j| j.array.as_ref().is_some_and(|a| a.job_id == *id))
                    .map(|j| j.job_id)
                    .collect();
                if tasks.is_empty() {
                    ids.push(*id);
                } else {
                    ids.extend(tasks);
                }
            }
            ids
        };
        let out = ids
            .into_iter()
            .map(|id| {
                let hidden = private
                    && self.p.jobs.get(&id).is_some_and(|j| {
                        j.user_id != who.uid && !self.coordinates(who, &j.account)
                    });
                if hidden {
                    return (id, Some(SlurmError::InvalidJobId));
                }
                // Filters given with ids narrow them, as in Slurm.
                let skip = self.p.jobs.get(&id).is_some_and(|j| {
                    f.user.is_some_and(|u| j.user_id != u)
                        || (!f.states.is_empty() && !f.states.contains(&j.state))
                        || f.name.as_ref().is_some_and(|n| &j.name != n)
                        || f.partition.as_ref().is_some_and(|p| &j.partition != p)
                });
                if skip {
                    return (id, None);
                }
                let active = self.p.jobs.get(&id).is_some_and(|j| !j.state.is_finished());
                if let (Some(c), true) = (&f.admin_comment, active) {
                    if let Some(j) = self.job_mut(id) {
                        Arc::make_mut(&mut j.desc).admin_comment = Some(c.clone());
                        self.save_job(id);
                    }
                }
                (id, self.cancel_one(who, id, f.signal, now).err())
            })
            .collect();
        Response::Cancelled(out)
    }

    pub(super) fn update_job(
        &mut self,
        who: Caller,
        id: JobId,
        u: JobUpdate,
        now: i64,
    ) -> Result<Response, RpcError> {
        // Its owner, an operator or its account's coordinator; what each
        // field allows is checked below (a coordinator as its owner would
        // be, as Slurm's).
        let j = self.managed_job(who, id)?;
        let state = j.state;
        match u {
            JobUpdate::Hold => {
                if state != JobState::Pending {
                    return err(SlurmError::JobNotPending);
                }
                // An admin hold is no owner's to turn into its own: held
                // already, it stays so (Slurm's no-op).
                if j.held == Some(HoldKind::Admin) && !who.operator {
                    return Ok(Response::Ok);
                }
                let kind = if who.operator {
                    HoldKind::Admin
                } else {
                    HoldKind::User
                };
                let j = self
                    .job_mut(id)
                    .ok_or(RpcError::from(SlurmError::InvalidJobId))?;
                j.held = Some(kind);
                j.priority = 0;
                j.set_reason(match kind {
                    HoldKind::User => JobReason::JobHeldUser,
                    HoldKind::Admin => JobReason::JobHeldAdmin,
                });
                crate::schedlog::SCHED.info(format_args!(
                    "_hold_job_rec: hold on {} by uid {}",
                    crate::schedlog::job_label(j),
                    who.uid
                ));
            }
            JobUpdate::Release => {
                if state != JobState::Pending {
                    return err(SlurmError::JobNotPending);
                }
                if j.held == Some(HoldKind::Admin) && !who.operator {
                    return err(SlurmError::AccessDenied);
                }
                let j = self
                    .job_mut(id)
                    .ok_or(RpcError::from(SlurmError::InvalidJobId))?;
                j.held = None;
                j.priority = super::submit::fixed_or_basic(j.desc.priority, id);
                j.reason = JobReason::None;
                crate::schedlog::SCHED.info(format_args!(
                    "_release_job_rec: release hold on {} by uid {}",
                    crate::schedlog::job_label(j),
                    who.uid
                ));
            }
            JobUpdate::Requeue => {
                if state == JobState::Pending {
                    return err(SlurmError::JobPending);
                }
                if j.completing {
                    return err(SlurmError::TransitionStateNoUpdate);
                }
                let kw = self.conf.kill_wait;
                self.requeue_running(id, JobState::Requeued, kw, now);
            }
            JobUpdate::TimeLimit(t) => {
                let cur = j.time_limit;
                let increase = match (t, cur) {
                    (None, Some(_)) => true,
                    (Some(a), Some(b)) => a > b,
                    (Some(_), None) => false,
                    (None, None) => false,
                };
                if increase && !who.operator {
                    return err(SlurmError::AccessDenied);
                }
                if state.is_finished() {
                    return err(SlurmError::AlreadyDone);
                }
                let j = self
                    .job_mut(id)
                    .ok_or(RpcError::from(SlurmError::InvalidJobId))?;
                j.time_limit = t;
                let active = state.is_active();
                if let Some(s) = j.start_time.filter(|_| active) {
                    // Suspended time does not count (the current suspension
                    // is added on resume).
                    j.end_time = t.map(|m| s + m as i64 * 60 + j.suspended_secs);
                }
            }
            JobUpdate::Nice(n) => {
                if n < 0 && !who.operator {
                    return err(SlurmError::AccessDenied);
                }
                let j = self
                    .job_mut(id)
                    .ok_or(RpcError::from(SlurmError::InvalidJobId))?;
                Arc::make_mut(&mut j.desc).nice = Some(n);
            }
            JobUpdate::Name(n) => {
                let j = self
                    .job_mut(id)
                    .ok_or(RpcError::from(SlurmError::InvalidJobId))?;
                j.name = n;
            }
            JobUpdate::Comment(c) => {
                let j = self
                    .job_mut(id)
                    .ok_or(RpcError::from(SlurmError::InvalidJobId))?;
                Arc::make_mut(&mut j.desc).comment = Some(c);
            }
            JobUpdate::AdminComment(c) => {
                if !who.admin {
                    return err(SlurmError::AccessDenied);
                }
                let j = self
                    .job_mut(id)
                    .ok_or(RpcError::from(SlurmError::InvalidJobId))?;
                Arc::make_mut(&mut j.desc).admin_comment = Some(c);
            }
            JobUpdate::Partition(p) | JobUpdate::Account(p) | JobUpdate::Qos(p)
                if state != JobState::Pending =>
            {
                let _ = p;
                return err(SlurmError::JobNotPending);
            }
            JobUpdate::Partition(_) | JobUpdate::Account(_) | JobUpdate::Qos(_) => {
                let cur = self
                    .p
                    .jobs
                    .get(&id)
                    .ok_or(RpcError::from(SlurmError::InvalidJobId))?;
                let mut next = (**cur).clone();
                match u {
                    JobUpdate::Partition(p) => {
                        next.partition = p.clone();
                        Arc::make_mut(&mut next.desc).partition = Some(p);
                    }
                    JobUpdate::Account(a) => {
                        // A coordinator moves a job only into an account
                        // it also coordinates (as Slurm's).
                        if !who.operator && cur.user_id != who.uid && !self.coordinates(who, &a) {
                            return err_detail(
                                SlurmError::AccessDenied,
                                format!("not a coordinator of account {a}"),
                            );
                        }
                        next.account = a.clone();
                        Arc::make_mut(&mut next.desc).account = Some(a);
                    }
                    JobUpdate::Qos(q) => {
                        next.qos = q.clone();
                        Arc::make_mut(&mut next.desc).qos = Some(q);
                    }
                    _ => unreachable!("matched above"),
                }
                self.check_placement_update(who, &next)?;
                let j = self
                    .job_mut(id)
                    .ok_or(RpcError::from(SlurmError::InvalidJobId))?;
                j.partition = next.partition;
                j.account = next.account;
                j.qos = next.qos;
                j.desc = next.desc;
            }
        }
        self.save_job(id);
        self.sched_needed = true;
        self.refresh();
        Ok(Response::Ok)
    }

    // ------------------------------------------------------------------
    // Nodes

    /// A running job lost with a node: a batch job that may be requeued
    /// (`--requeue`, or `JobRequeue=1`, the default, unless
    /// `--no-requeue`) goes back to the queue, as Slurm's do; any other
    /// ends NODE_FAIL.
    pub(super) fn lose_job(&mut self, id: JobId, node: &str, now: i64) {
        let job_requeue = self.conf.get("JobRequeue").map(str::trim) != Some("0");
        let requeue = self
            .p
            .jobs
            .get(&id)
            .is_some_and(|j| j.batch && j.desc.requeue.unwrap_or(job_requeue));
        if let Some(j) = self.job_mut(id) {
            j.failed_node = Some(node.to_string());
        }
        if requeue {
            tracing::info!("job {id} lost with {node}: requeued");
            self.requeue_running(id, JobState::NodeFail, 0, now);
            return;
        }
        if let Some(j) = self.job_mut(id) {
            j.node_failed = true;
        }
        self.end_running(id, JobState::NodeFail, JobReason::NodeDown, now, 0);
    }

    /// The Prolog failed on one of a running job's nodes (at its first
    /// step there): as at launch, drain the node and requeue the job held.
    pub(super) fn prolog_failed(&mut self, id: JobId, node: &str, now: i64) {
        tracing::error!("prolog of job {id} failed on {node}: draining it");
        self.drain_for(node, "Prolog error", now);
        let running = self
            .p
            .jobs
            .get(&id)
            .is_some_and(|j| j.state.is_active() && j.alloc.nodes.iter().any(|n| n == node));
        if running {
            self.requeue_failed_launch(id, None, true, now);
        }
    }

    /// A launch could not be delivered: put the job back in the queue;
    /// held (Slurm's "launch failed requeued held") when the node refused
    /// it, since it would be refused again (an output file the user may not
    /// write, say): requeued free it would be started and refused for ever.
    pub fn launch_failed(
        &mut self,
        id: JobId,
        node: &str,
        prolog_failed: bool,
        refused: bool,
        start_time: i64,
        now: i64,
    ) {
        let running = self.p.jobs.get(&id).is_some_and(|j| {
            j.state.is_active()
                && j.batch_host.as_deref() == Some(node)
                && j.run() == Some(start_time)
        });
        if !running {
            return;
        }
        if prolog_failed {
            // As Slurm: the node is drained and the job requeued, held.
            tracing::error!("prolog of job {id} failed on {node}: draining it");
            self.drain_for(node, "Prolog error", now);
        }
        self.requeue_failed_launch(id, Some(node), prolog_failed || refused, now);
    }

    /// Put a job that could not start back in the queue (held after a
    /// failed prolog); `clean` is a node known to have nothing of it.
    pub(super) fn requeue_failed_launch(
        &mut self,
        id: JobId,
        clean: Option<&str>,
        held: bool,
        now: i64,
    ) {
        let run = self.p.jobs.get(&id).and_then(|j| j.run());
        self.new_run_record(id, JobState::Requeued, now);
        if let Some(j) = self.job_mut(id) {
            j.state = JobState::Pending;
            let reason = if held {
                j.held = Some(HoldKind::Admin);
                j.priority = 0;
                super::schedule::requeue_held_reason()
            } else {
                JobReason::None
            };
            j.set_reason(reason);
            j.restarts += 1;
            j.sched_flag = None;
            j.start_time = None;
            j.run_start = None;
            j.end_time = None;
            j.clear_suspension();
            j.completing = true;
            j.completing_nodes = j.alloc.nodes.clone();
            j.eligible_time = Some(now);
        }
        let nodes = self
            .p
            .jobs
            .get(&id)
            .map(|j| j.alloc.nodes.clone())
            .unwrap_or_default();
        self.terminate_run(id, &nodes, 0, run);
        if let Some(node) = clean {
            self.node_cleaned(id, node, None);
        }
        self.save_job(id);
        // Its nodes now show it completing (a held job may leave the queue
        // empty, and a pass with nothing to offer refreshes nothing).
        self.refresh_jobs();
    }
}

impl Controller {
    /// `scontrol top JOBS`: the listed pending jobs take, in their order,
    /// the highest priorities among them and their owner's other pending
    /// jobs of the same partition, account and QOS; those others move
    /// down by what the listed ones gained, so the owner gains nothing on
    /// other users (as Slurm's: through the jobs' nice values, which the
    /// multifactor priority keeps applying). Operators, or the jobs' owner
    /// with `SchedulerParameters=enable_user_top`.
    pub(super) fn top_jobs(&mut self, who: Caller, ids: Vec<JobId>) -> Result<Response, RpcError> {
        let user_top = self
            .conf
            .scheduler_parameters
            .iter()
            .any(|p| p.eq_ignore_ascii_case("enable_user_top"));
        if !who.operator && !user_top {
            return err_detail(
                SlurmError::AccessDenied,
                "scontrol top is for operators (SchedulerParameters=enable_user_top lets users)",
            );
        }
        if ids.is_empty() {
            return err(SlurmError::InvalidJobId);
        }
        let mut top: Vec<JobId> = Vec::new();
        let mut skipped = None;
        for id in ids {
            let Some(j) = self.p.jobs.get(&id) else {
                return err_detail(SlurmError::InvalidJobId, id.to_string());
            };
            if !who.operator && j.user_id != who.uid {
                return err(SlurmError::AccessDenied);
            }
            if j.state != JobState::Pending {
                skipped = Some(err_detail(SlurmError::JobNotPending, format!("job {id}")));
                continue;
            }
            if j.priority == 0 {
                skipped = Some(err_detail(
                    SlurmError::JobNotPending,
                    format!("job {id} is held"),
                ));
                continue;
            }
            if !top.contains(&id) {
                top.push(id);
            }
        }
        let Some(first) = top.first().and_then(|id| self.p.jobs.get(id)) else {
            return skipped.unwrap_or_else(|| err(SlurmError::InvalidJobId));
        };
        let same = |j: &JobRecord| {
            j.user_id == first.user_id
                && j.partition == first.partition
                && j.account == first.account
                && j.qos == first.qos
        };
        let mut others: Vec<JobId> = self
            .p
            .jobs
            .values()
            .filter(|j| j.state == JobState::Pending && j.priority > 1 && same(j))
            .filter(|j| !top.contains(&j.job_id))
            .map(|j| j.job_id)
            .collect();
        others.sort_unstable();
        let prio = |c: &Self, id: &JobId| c.p.jobs.get(id).map_or(0, |j| j.priority);
        let mut prios: Vec<u32> = top.iter().chain(&others).map(|id| prio(self, id)).collect();
        prios.sort_unstable_by(|a, b| b.cmp(a));
        let mut prios = prios.into_iter();
        let mut last: Option<u32> = None;
        let mut total: i64 = 0;
        for id in &top {
            let mut next = prios.next().unwrap_or(1);
            if let Some(l) = last.filter(|&l| l == next && l > 2) {
                next = l - 1;
            }
            last = Some(next);
            let Some(j) = self.job_mut(*id) else { continue };
            let delta = i64::from(next) - i64::from(j.priority);
            total += delta;
            j.priority = next;
            let d = Arc::make_mut(&mut j.desc);
            d.nice = Some((i64::from(d.nice.unwrap_or(0)) - delta) as i32);
            self.save_job(*id);
        }
        let floor = last.unwrap_or(2);
        let mut left = others.len() as i64;
        for id in &others {
            let Some(j) = self.job_mut(*id) else { continue };
            let mut delta = total / left.max(1);
            let mut next = (i64::from(j.priority) - delta).max(1) as u32;
            if next >= floor {
                next = floor.saturating_sub(1).max(1);
                delta = i64::from(j.priority) - i64::from(next);
            }
            j.priority = next;
            let d = Arc::make_mut(&mut j.desc);
            d.nice = Some((i64::from(d.nice.unwrap_or(0)) + delta) as i32);
            total -= delta;
            left -= 1;
            self.save_job(*id);
        }
        self.sched_needed = true;
        Ok(Response::Ok)
    }
}

/// Why job `j`, whose run is being ended, ends (set before its nodes are
/// told): requeued, past its time limit, its node failed, preempted or
/// cancelled; nothing to say for a job that ended by itself.
pub(super) fn term_cause(j: &JobRecord) -> slurm_proto::TermCause {
    use slurm_proto::TermCause;
    match j.state {
        JobState::Pending => TermCause::Requeued,
        _ if j.timed_out => TermCause::TimeLimit,
        _ if j.node_failed => TermCause::NodeFailure,
        JobState::Preempted => TermCause::Preempted,
        JobState::Cancelled => TermCause::Cancelled,
        JobState::Timeout => TermCause::TimeLimit,
        JobState::NodeFail => TermCause::NodeFailure,
        _ => TermCause::None,
    }
}

/// Who reports the end of a batch script: the node, and the run (the
/// start time its launch carried) where the node says.
pub(super) struct Run<'a> {
    pub(super) node: &'a str,
    pub(super) start: Option<i64>,
}
