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

/// Seconds between sending the last suspend/resume of each job again.
const RESEND_EVERY: i64 = 30;

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
        if !who.operator && !self.coordinates(who, &j.account) {
            return err_detail(
                SlurmError::AccessDenied,
                "only an operator, an administrator or the account's coordinator may suspend or resume jobs",
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
                    SlurmError::JobNotRunning,
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
                SlurmError::JobNotSuspended,
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
        if !self.cores_free_for(j, &[], true) {
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

    /// A job ending while suspended: its suspension ends now, and fair share
    /// charges it from now on (nothing for the time it was stopped).
    pub(super) fn close_suspension(&mut self, id: JobId, now: i64) {
        let Some(j) = self.job_mut(id) else { return };
        if j.state == JobState::Suspended {
            j.end_suspension(now);
            self.charged.insert(id, now);
        }
    }

    /// Let a suspended job go on.
    pub(super) fn resume_job(&mut self, id: JobId, now: i64) {
        let Some(j) = self.job_mut(id) else { return };
        if j.state != JobState::Suspended {
            return;
        }
        let before = j.suspended_secs;
        j.end_suspension(now);
        let stopped = j.suspended_secs - before;
        j.end_time = j.end_time.map(|e| e + stopped);
        j.state = JobState::Running;
        j.preempt_suspended = false;
        j.gang_suspended = false;
        j.reason = slurm_proto::JobReason::None;
        self.preempted_for.remove(&id);
        let Some(j) = self.p.jobs.get(&id) else {
            return;
        };
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
        self.suspend_seq += 1;
        let seq = self.suspend_seq;
        self.suspend_sent.insert(id, (seq, suspend));
        self.send_suspend(id, nodes, suspend, seq);
    }

    fn send_suspend(&mut self, id: JobId, nodes: &[String], suspend: bool, seq: u64) {
        let start_time = self.p.jobs.get(&id).and_then(|j| j.run());
        for n in nodes {
            if let Some(addr) = self.node_addr(n) {
                self.effects.push(Effect::Suspend {
                    node: n.clone(),
                    addr,
                    job_id: id,
                    suspend,
                    seq,
                    epoch: self.run_id,
                    start_time,
                });
            }
        }
    }

    /// A node daemon (re)registered: tell it again what its jobs that were
    /// ever suspended should be (a restarted controller knows nothing it
    /// sent before: it sends anew).
    pub(super) fn suspends_for_node(&mut self, node: &str) {
        let jobs: Vec<(JobId, bool)> = self
            .p
            .jobs
            .values()
            .filter(|j| !j.completing && j.alloc.nodes.iter().any(|n| n == node))
            .filter(|j| {
                j.state == JobState::Suspended
                    || (j.state == JobState::Running && j.suspend_time.is_some())
            })
            .map(|j| (j.job_id, j.state == JobState::Suspended))
            .collect();
        for (id, suspended) in jobs {
            let nodes = [node.to_string()];
            match self.suspend_sent.get(&id).copied() {
                Some((seq, s)) if s == suspended => self.send_suspend(id, &nodes, s, seq),
                _ => {
                    let all = self
                        .p
                        .jobs
                        .get(&id)
                        .map(|j| j.alloc.nodes.clone())
                        .unwrap_or_default();
                    self.tell_nodes(id, &all, suspended);
                }
            }
        }
    }

    /// Every 30 s, send each job's last suspend or resume again (the same
    /// sequence: a node that had it changes nothing), so a node that missed
    /// one, or restarted, catches up. Ended jobs are forgotten.
    pub(super) fn resend_suspends(&mut self, now: i64) {
        if now - self.suspend_resent < RESEND_EVERY {
            return;
        }
        self.suspend_resent = now;
        let jobs = &self.p.jobs;
        self.suspend_sent.retain(|id, _| {
            jobs.get(id)
                .is_some_and(|j| !j.completing && !j.state.is_finished())
        });
        let again: Vec<(JobId, u64, bool, Vec<String>)> = self
            .suspend_sent
            .iter()
            .filter_map(|(id, &(seq, s))| {
                let j = self.p.jobs.get(id)?;
                // Only what still holds (a requeued job is pending).
                let now_suspended = j.state == JobState::Suspended;
                (j.state.is_active() && now_suspended == s)
                    .then(|| (*id, seq, s, j.alloc.nodes.clone()))
            })
            .collect();
        for (id, seq, s, nodes) in again {
            self.send_suspend(id, &nodes, s, seq);
        }
    }

    /// Whether a suspended job's cores are free on each of its nodes: no
    /// running job holds them, nor a gang-suspended one (waiting for its
    /// turn), nor, with `victims`, another job suspended by preemption
    /// (`extra`: cores handed out earlier in this pass).
    fn cores_free_for(&self, j: &JobRecord, extra: &[u32], victims: bool) -> bool {
        let exclusive = j.desc.exclusive || j.desc.exclusive_topo;
        let (held, _) = self.cores_split(|o| o.job_id == j.job_id, victims);
        // Nodes a running (or cleaning up) exclusive job holds whole.
        let whole: std::collections::HashSet<&str> = self
            .p
            .jobs
            .values()
            .filter(|o| o.state == JobState::Running || o.completing)
            .filter(|o| o.desc.exclusive || o.desc.exclusive_topo)
            .flat_map(|o| o.alloc.nodes.iter().map(String::as_str))
            .collect();
        self.allocs_of(j).iter().all(|a| {
            let n = &self.nodes[a.node];
            let used = held[a.node] + extra.get(a.node).copied().unwrap_or(0);
            used + a.cpus <= n.cpus && !whole.contains(n.name.as_str()) && (!exclusive || used == 0)
        })
    }

    /// A job suspended by preemption whose preemptor is still pending
    /// (waiting for other victims to leave): its cores are the
    /// preemptor's to take, and it does not resume meanwhile.
    pub(super) fn victim_waits(&self, j: &JobRecord) -> bool {
        j.preempt_suspended
            && self.preempted_for.get(&j.job_id).is_some_and(|p| {
                self.preempting
                    .get(p)
                    .is_some_and(|t| self.last_update - *t < super::preempt::SETTLE)
                    && self
                        .p
                        .jobs
                        .get(p)
                        .is_some_and(|p| p.state == JobState::Pending)
            })
    }

    /// Whether a gang-suspended job no longer takes turns (gang scheduling
    /// or sharing was configured away): it resumes as preempted ones do.
    fn gang_orphan(&self, j: &JobRecord) -> bool {
        j.gang_suspended && !(self.gang_enabled() && self.share_factor(j).is_some())
    }

    /// Resume jobs suspended by preemption whose cores are free again,
    /// highest priority first (run at the start of every scheduling pass,
    /// before pending jobs may take those cores).
    pub(super) fn resume_preempted(&mut self, now: i64) {
        let waiting: Vec<&JobRecord> = self
            .p
            .jobs
            .values()
            .map(|j| j.as_ref())
            .filter(|j| j.state == JobState::Suspended && !j.completing)
            .filter(|j| (j.preempt_suspended && !self.victim_waits(j)) || self.gang_orphan(j))
            .collect();
        if waiting.is_empty() {
            return;
        }
        // Victims that share cores take gang turns again once their
        // preemptor has gone (not before: a preemptor sharing cores would
        // otherwise be taking turns with its own victim); they never resume
        // here.
        let gang = self.gang_enabled();
        let (sharing, mut waiting): (Vec<&JobRecord>, Vec<&JobRecord>) = waiting
            .into_iter()
            .partition(|j| j.preempt_suspended && gang && self.share_factor(j).is_some());
        let rejoin: Vec<JobId> = sharing
            .iter()
            .filter(|j| {
                !self.preempted_for.get(&j.job_id).is_some_and(|p| {
                    self.p
                        .jobs
                        .get(p)
                        .is_some_and(|p| !p.state.is_finished() || p.completing)
                })
            })
            .map(|j| j.job_id)
            .collect();
        waiting.sort_by_key(|j| (std::cmp::Reverse(j.priority), j.suspend_time, j.job_id));
        let mut extra = vec![0u32; self.nodes.len()];
        let ready: Vec<JobId> = waiting
            .into_iter()
            .filter(|j| {
                let ok = self.cores_free_for(j, &extra, false);
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
        for id in rejoin {
            self.preempted_for.remove(&id);
            if let Some(j) = self.job_mut(id) {
                j.preempt_suspended = false;
                j.gang_suspended = true;
                j.reason = slurm_proto::JobReason::None;
            }
            self.save_job(id);
        }
    }

    /// Cores held per node by jobs suspended by preemption (unless their
    /// preemptor still waits for them) or gang scheduling: kept from every
    /// job but their preemptors and the jobs they take turns with.
    pub(super) fn system_held_cpus(&self) -> Vec<u32> {
        let mut held = vec![0u32; self.nodes.len()];
        for j in self.p.jobs.values().filter(|j| {
            j.state == JobState::Suspended
                && !j.completing
                && (j.gang_suspended || (j.preempt_suspended && !self.victim_waits(j)))
        }) {
            for a in self.allocs_of(j) {
                held[a.node] += a.cpus;
            }
        }
        held
    }
}
