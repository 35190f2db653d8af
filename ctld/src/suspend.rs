//! Job suspension: `scontrol suspend|resume` and preemption's SUSPEND mode.
//!
//! A suspended job's processes are stopped on every node (the node daemon
//! freezes its cgroup, else sends SIGSTOP) and its time limit stops running:
//! on resume its end moves out by the time it spent suspended. Its memory
//! and GRES stay held; its cores do not.
//!
//! - `scontrol suspend` (operators): the cores go back to the scheduler;
//!   `scontrol resume` works only once they are free again.
//! - Preemption (`PreemptMode=SUSPEND,GANG`): the victim's cores stay held
//!   against every other pending job, the preemptor starts on them at once,
//!   and the victim resumes by itself as soon as they are free (the GANG
//!   part); an operator cannot resume it early.
//! - Gang scheduling (`gang.rs`): jobs sharing cores take turns.

use super::{err_detail, Caller, Controller, Effect};
use slurm_proto::{JobId, JobRecord, JobState, Response, RpcError, SlurmError};

/// Who suspends a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    Operator,
    Preemption,
    Gang,
}

impl Controller {
    /// `scontrol suspend|resume JOBID`.
    pub(super) fn suspend_request(
        &mut self,
        who: Caller,
        id: JobId,
        suspend: bool,
        now: i64,
    ) -> Result<Response, RpcError> {
        let Some(j) = self.p.jobs.get(&id) else {
            return err_detail(SlurmError::InvalidJobId, format!("job {id} does not exist"));
        };
        if !who.privileged {
            return err_detail(
                SlurmError::AccessDenied,
                "only an operator or administrator may suspend or resume jobs",
            );
        }
        if j.state == JobState::Pending {
            return err_detail(SlurmError::JobPending, format!("job {id} is pending"));
        }
        if j.state.is_finished() || j.completing {
            return err_detail(SlurmError::AlreadyDone, format!("job {id} has ended"));
        }
        if suspend {
            if j.state != JobState::Running {
                return err_detail(
                    SlurmError::TransitionStateNoUpdate,
                    format!("job {id} is already suspended"),
                );
            }
            if j.desc.external {
                return err_detail(
                    SlurmError::TransitionStateNoUpdate,
                    format!("job {id} runs on external nodes and cannot be suspended"),
                );
            }
            self.suspend_job(id, By::Operator, now);
            return Ok(Response::Ok);
        }
        if j.state != JobState::Suspended {
            return err_detail(
                SlurmError::TransitionStateNoUpdate,
                format!("job {id} is not suspended"),
            );
        }
        if j.gang_suspended {
            return err_detail(
                SlurmError::TransitionStateNoUpdate,
                format!("job {id} shares its cores by gang scheduling: it resumes at its turn"),
            );
        }
        if j.preempt_suspended {
            return err_detail(
                SlurmError::TransitionStateNoUpdate,
                format!(
                    "job {id} was suspended by preemption: it resumes by itself once its \
                     preemptor has left its cores"
                ),
            );
        }
        if !self.cores_free_for(j, &[]) {
            return err_detail(
                SlurmError::NodesBusy,
                format!("the cores job {id} had are in use by other jobs"),
            );
        }
        self.resume_job(id, now);
        Ok(Response::Ok)
    }

    /// Stop a running job's processes on all its nodes.
    pub(super) fn suspend_job(&mut self, id: JobId, by: By, now: i64) {
        let Some(j) = self.job_mut(id) else { return };
        if j.state != JobState::Running {
            return;
        }
        j.state = JobState::Suspended;
        j.suspend_time = Some(now);
        j.preempt_suspended = by == By::Preemption;
        j.gang_suspended = by == By::Gang;
        if by == By::Preemption {
            j.reason = slurm_proto::JobReason::Other("Preempted".into());
        }
        let nodes = j.alloc.nodes.clone();
        tracing::info!("job {id} suspended ({by:?})");
        self.tell_nodes(id, &nodes, true);
        self.save_job(id);
        self.sched_needed = true;
        self.refresh();
    }

    /// Let a suspended job go on.
    pub(super) fn resume_job(&mut self, id: JobId, now: i64) {
        let Some(j) = self.job_mut(id) else { return };
        if j.state != JobState::Suspended {
            return;
        }
        let stopped = (now - j.suspend_time.unwrap_or(now)).max(0);
        j.suspended_secs += stopped;
        j.end_time = j.end_time.map(|e| e + stopped);
        j.state = JobState::Running;
        j.suspend_time = Some(now);
        j.preempt_suspended = false;
        j.gang_suspended = false;
        j.reason = slurm_proto::JobReason::None;
        let nodes = j.alloc.nodes.clone();
        // Fair share charges run time only: not the time it was stopped.
        self.charged.insert(id, now);
        tracing::info!("job {id} resumed after {stopped}s suspended");
        self.tell_nodes(id, &nodes, false);
        self.save_job(id);
        self.sched_needed = true;
        self.refresh();
    }

    fn tell_nodes(&mut self, id: JobId, nodes: &[String], suspend: bool) {
        for n in nodes {
            if let Some(addr) = self.node_addr(n) {
                self.effects.push(Effect::Suspend {
                    addr,
                    job_id: id,
                    suspend,
                });
            }
        }
    }

    /// Whether a suspended job's cores are free on each of its nodes: no
    /// running job holds them (`extra`: cores handed out earlier in this
    /// pass).
    fn cores_free_for(&self, j: &JobRecord, extra: &[u32]) -> bool {
        let exclusive = j.desc.exclusive || j.desc.exclusive_topo;
        self.allocs_of(j).iter().all(|a| {
            let n = &self.nodes[a.node];
            let used = n.alloc_cpus + extra.get(a.node).copied().unwrap_or(0);
            let node_exclusive = self.p.jobs.values().any(|o| {
                (o.state == JobState::Running || o.completing)
                    && (o.desc.exclusive || o.desc.exclusive_topo)
                    && o.alloc.nodes.contains(&n.name)
            });
            used + a.cpus <= n.cpus && !node_exclusive && (!exclusive || used == 0)
        })
    }

    /// Resume jobs suspended by preemption whose cores are free again,
    /// highest priority first (run at the start of every scheduling pass,
    /// before pending jobs may take those cores).
    pub(super) fn resume_preempted(&mut self, now: i64) {
        let mut waiting: Vec<&JobRecord> = self
            .p
            .jobs
            .values()
            .map(|j| j.as_ref())
            .filter(|j| j.state == JobState::Suspended && j.preempt_suspended)
            .collect();
        if waiting.is_empty() {
            return;
        }
        waiting.sort_by_key(|j| (std::cmp::Reverse(j.priority), j.suspend_time, j.job_id));
        let mut extra = vec![0u32; self.nodes.len()];
        let ready: Vec<JobId> = waiting
            .into_iter()
            .filter(|j| {
                let ok = self.cores_free_for(j, &extra);
                if ok {
                    for a in self.allocs_of(j) {
                        extra[a.node] += a.cpus;
                    }
                }
                ok
            })
            .map(|j| j.job_id)
            .collect();
        for id in ready {
            self.resume_job(id, now);
        }
    }

    /// Cores held per node by jobs suspended by preemption or gang
    /// scheduling (kept from every job but their preemptors and the jobs
    /// they take turns with).
    pub(super) fn system_held_cpus(&self) -> Vec<u32> {
        let mut held = vec![0u32; self.nodes.len()];
        for j in
            self.p.jobs.values().filter(|j| {
                j.state == JobState::Suspended && (j.preempt_suspended || j.gang_suspended)
            })
        {
            for a in self.allocs_of(j) {
                held[a.node] += a.cpus;
            }
        }
        held
    }
}
