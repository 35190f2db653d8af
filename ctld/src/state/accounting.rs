//! Accounting: the records the controller sends slurmdbd (jobs, steps, nodes,
//! each sent when it changed), the outbox of them, fair share fed from
//! slurmdbd's usage and the association cache.

use super::*;

/// A job's run as its completion record tells it.
pub(super) fn ended_run(j: &JobRecord) -> slurm_common::jobcomp::Ended {
    slurm_common::jobcomp::Ended {
        job: slurm_proto::acct::AcctJob::from_record(j),
        batch: j.batch,
        dependency: j.desc.dependency.clone().unwrap_or_default(),
        // The highest exit status of its steps, as Slurm keeps it.
        derived_ec: j
            .steps
            .iter()
            .filter(|s| s.step_id != BATCH_STEP && s.step_id != slurm_proto::EXTERN_STEP)
            .map(|s| s.exit_status)
            .max()
            .unwrap_or(0),
    }
}

/// `r`'s accounting record from `start` to `end`.
fn resv_record(r: &ReservationRecord, start: i64, end: i64) -> slurm_proto::acct::AcctResv {
    slurm_proto::acct::AcctResv {
        name: r.name.clone(),
        time_start: start,
        time_end: end,
        prev_start: None,
        nodes: slurm_common::hostlist::compress(&r.nodes),
        node_count: r.nodes.len() as u32,
        cpus: r.core_cnt,
        flags: r.flags.join(","),
        users: r.users.join(","),
        accounts: r.accounts.join(","),
        removed: false,
    }
}

impl Controller {
    /// Count a job reaching a final state (for `sdiag`), and note it for
    /// its completion record (`JobCompType`).
    pub(super) fn count_end(&mut self, id: JobId, state: JobState) {
        self.ended_now.push(id);
        if slurm_common::debugflags::on(slurm_common::debugflags::TRACE_JOBS) {
            tracing::info!("TraceJobs: JobId={id} ended {}", state.name());
        }
        match state {
            JobState::Completed => self.stats.jobs_completed += 1,
            JobState::Cancelled => self.stats.jobs_canceled += 1,
            _ => self.stats.jobs_failed += 1,
        }
    }

    /// Queue one record (journaled with the batch that caused it).
    pub(super) fn account(&mut self, record: slurm_proto::acct::AcctRecord) {
        let r = self.p.acct.make(&self.conf.cluster_name, record);
        self.p.acct.push(r.clone());
        self.entries.push(Entry::Acct(Box::new(r.clone())));
        self.acct_new.push(r);
    }

    /// The completion records of the jobs (and requeued runs) that ended
    /// in the batch just committed, as `JobCompType` asks for them
    /// (`jobcomp/filetxt` lines, or the jobs for `jobcomp/script`); `None`
    /// when there are none or it asks for none.
    pub fn take_jobcomp(&mut self) -> Option<slurm_common::jobcomp::Records> {
        use slurm_common::jobcomp::{line, JobCompConf, Records, ScriptRun};
        if self.ended_now.is_empty() && self.requeued_now.is_empty() {
            return None;
        }
        let ended_ids = std::mem::take(&mut self.ended_now);
        let requeued = std::mem::take(&mut self.requeued_now);
        let conf = JobCompConf::from_conf(&self.conf);
        if !matches!(conf, JobCompConf::File(_) | JobCompConf::Script(_)) {
            return None;
        }
        let ended: Vec<_> = requeued
            .into_iter()
            .chain(
                ended_ids
                    .iter()
                    .filter_map(|id| self.p.jobs.get(id))
                    .filter(|j| j.state.is_finished())
                    .map(|j| ended_run(j)),
            )
            .collect();
        if ended.is_empty() {
            return None;
        }
        let cluster = self.conf.cluster_name.clone();
        Some(match conf {
            JobCompConf::Script(script) => Records::Script(ScriptRun {
                script,
                cluster,
                user: self.conf.slurm_user.clone(),
                jobs: ended,
            }),
            JobCompConf::File(path) => {
                Records::Lines(path, ended.iter().map(|e| line(e, &cluster)).collect())
            }
            _ => return None,
        })
    }

    /// Records made durable by the batch just committed.
    pub fn take_acct(&mut self) -> Vec<slurm_proto::acct::SeqRecord> {
        std::mem::take(&mut self.acct_new)
    }

    /// Records still waiting for slurmdbd (from the saved state).
    pub fn acct_backlog(&self) -> std::collections::VecDeque<slurm_proto::acct::SeqRecord> {
        self.p.acct.pending.clone()
    }

    /// slurmdbd has every record up to `through`.
    pub fn acct_acked(&mut self, through: u64) {
        if self
            .p
            .acct
            .pending
            .front()
            .is_some_and(|r| r.seq <= through)
        {
            self.p.acct.acked(through);
            self.entries.push(Entry::AcctAcked(through));
        }
    }

    /// Record what changed about a job and its steps since last sent.
    pub(super) fn acct_job(&mut self, j: &JobRecord) {
        use slurm_proto::acct::{AcctJob, AcctRecord, AcctStep};
        let mut rec = AcctJob::from_record(j);
        // Accounting records a cancelled job's end when it is cancelled,
        // before any script status: its job line says 0:0, as Slurm's does.
        if j.state == JobState::Cancelled {
            rec.exit_status = 0;
        }
        // A pending job's priority moves every cycle: not worth a record.
        // What was sent is kept as a hash of the record (a copy per job
        // was a kilobyte of every pending job's memory).
        let key = {
            use std::hash::{Hash, Hasher};
            let priority = std::mem::take(&mut rec.priority);
            let mut h = std::collections::hash_map::DefaultHasher::new();
            rec.hash(&mut h);
            rec.priority = priority;
            h.finish()
        };
        if self.acct_jobs.get(&j.job_id) != Some(&key) {
            // AccountingStoreFlags: the script and environment go with the
            // first record of a batch job (just submitted, or its next run
            // after a requeue: a record of its own); after a controller
            // restart only jobs still waiting for their first run send
            // them again (slurmdbd keeps each content once).
            let fresh = j.batch
                && j.state == JobState::Pending
                && (j.restarts == 0 || self.acct_payload_due.remove(&j.job_id));
            if fresh && !self.acct_jobs.contains_key(&j.job_id) {
                self.attach_payload(j.job_id, &mut rec);
            }
            self.acct_jobs.insert(j.job_id, key);
            self.account(if j.state.is_finished() {
                AcctRecord::JobEnd(rec)
            } else {
                AcctRecord::JobStart(rec)
            });
        }
        for s in &j.steps {
            let now = (
                s.state,
                s.end_time,
                s.exit_status,
                s.usage.map_or(0, |u| u.cpu_usec.max(1)),
            );
            let k = (j.job_id, s.step_id);
            if self.acct_steps.get(&k) == Some(&now) {
                continue;
            }
            self.acct_steps.insert(k, now);
            let st = AcctStep::from_record(j, s);
            self.account(if s.end_time.is_some() {
                AcctRecord::StepEnd(st)
            } else {
                AcctRecord::StepStart(st)
            });
        }
    }

    /// With `AccountingStoreFlags=job_script` (or `job_env`), a batch
    /// job's script (or environment) on its accounting record.
    fn attach_payload(&self, id: JobId, rec: &mut slurm_proto::acct::AcctJob) {
        let flags = self.conf.get("AccountingStoreFlags").unwrap_or("");
        let has = |f: &str| flags.split(',').any(|w| w.trim().eq_ignore_ascii_case(f));
        let (script, env) = (has("job_script"), has("job_env"));
        if !script && !env {
            return;
        }
        let Some(p) = self.p.payloads.get(&id) else {
            return;
        };
        if script {
            rec.script = Some(p.script.clone());
        }
        if env {
            let mut lines = p.environment.join("\n");
            lines.push('\n');
            rec.env = Some(lines);
        }
        // One record must fit one request to slurmdbd (16 MiB) with room
        // for the rest: texts past this are not kept.
        const MOST: usize = 12 << 20;
        let size =
            rec.script.as_ref().map_or(0, String::len) + rec.env.as_ref().map_or(0, String::len);
        if size > MOST {
            tracing::warn!(
                "job {id}: script and environment ({size} bytes) too large to keep in accounting"
            );
            rec.script = None;
            rec.env = None;
        }
    }

    /// A running (or suspended) job's run ended by a requeue, as Slurm
    /// records it: the run's accounting record ends in `state` (REQUEUED;
    /// PREEMPTED for a preemption, NODE_FAIL for a lost node) with its
    /// steps, and its completion line is written. The caller then gives
    /// the job a new submit time, so its next run is a record of its own
    /// (`sacct -D` lists both).
    pub(super) fn record_requeued_run(&mut self, id: JobId, state: JobState, now: i64) {
        let Some(j) = self.p.jobs.get(&id) else {
            return;
        };
        let mut run = JobRecord::clone(j);
        run.state = state;
        run.end_time = Some(now);
        for st in run
            .steps
            .iter_mut()
            .filter(|s| s.state == JobState::Running)
        {
            st.state = JobState::Cancelled;
            st.end_time = Some(now);
        }
        if self.acct_enabled {
            self.acct_job(&run);
        }
        self.requeued_now.push(ended_run(&run));
    }

    /// Record a node going out of or back into service.
    pub(super) fn acct_node(&mut self, name: &str, a: &NodeAdmin) {
        use slurm_proto::acct::{AcctRecord, NodeEvent};
        let key = (a.down, a.drain, a.reason.clone());
        let before = self.acct_nodes.insert(name.to_string(), key.clone());
        let was_out = before.as_ref().is_some_and(|b| b.0 || b.1);
        if before.as_ref() == Some(&key) || (!was_out && !a.down && !a.drain) {
            return;
        }
        let node = self.node_index.get(name).map(|&i| &self.nodes[i]);
        // As Slurm's events: the node's state then, so a drain of a node
        // with jobs on it shows as draining (`DRNG`).
        let base = match node.map(|n| n.base_state) {
            Some(NodeBaseState::Allocated) => "ALLOCATED",
            Some(NodeBaseState::Mixed) => "MIXED",
            _ => "IDLE",
        };
        let state = match (a.down, a.drain) {
            (true, true) => "DOWN+DRAIN".to_string(),
            (true, false) => "DOWN".to_string(),
            (false, true) => format!("{base}+DRAIN"),
            (false, false) => base.to_string(),
        };
        let cpus = node.map(|n| n.cpus).unwrap_or(0);
        self.account(AcctRecord::NodeState(NodeEvent {
            node: name.to_string(),
            state,
            reason: if a.down || a.drain {
                a.reason.clone()
            } else {
                None
            },
            reason_uid: a.reason_uid,
            cpus,
            time: a.reason_time.unwrap_or(self.last_update),
        }));
    }

    /// New associations, users and QOS from slurmdbd.
    pub fn set_assocs(&mut self, c: crate::assoc::AssocCache, now: i64) {
        self.book = c.book();
        self.delegates = Delegates::of(&c);
        self.assocs = Some(c);
        self.sched_needed = true;
        // Readers learn of new operators and coordinators (what they may
        // see) with the next snapshot: publish one.
        self.dirty = true;
        self.fair_share_from_accounting(now);
    }

    /// Multifactor with accounting: the fair-share tree is slurmdbd's, with
    /// its recorded usage; this controller adds only what ran after the
    /// last rolled-up hour.
    pub(super) fn fair_share_from_accounting(&mut self, now: i64) {
        let (Some(m), Some(c)) = (self.multifactor.as_mut(), self.assocs.as_ref()) else {
            return;
        };
        let Some(until) = c.rolled_until else {
            return;
        };
        m.tree = c.fair_share_tree(m.tree.policy(), now);
        for j in self.p.jobs.values() {
            if let Some(start) = j.start_time.filter(|_| j.state != JobState::Pending) {
                self.charged.insert(j.job_id, start.max(until));
            }
        }
        m.recompute();
        self.multifactor_tick(now);
        self.recompute_priorities(now);
    }

    /// Tell accounting of a reservation made (`old` none), changed, rolled
    /// over to its next period (as made) or removed (`new` none), as
    /// Slurm's records: one per time it held the same resources and
    /// rights. A change before it begins changes its record (moved with
    /// its start); a change of its nodes, CPUs, users, accounts or flags
    /// after it began ends its record now and begins the next
    /// (`record_start` remembers when); a removal before it began removes
    /// its record, after, ends it now.
    pub(super) fn acct_resv(
        &mut self,
        old: Option<&ReservationRecord>,
        new: Option<&mut ReservationRecord>,
        now: i64,
    ) {
        use slurm_proto::acct::{AcctRecord, AcctResv};
        let mut out = Vec::new();
        match (old, new) {
            (None, Some(n)) => {
                n.record_start = None;
                out.push(resv_record(n, n.start_time, n.end_time));
            }
            (Some(o), None) => {
                let start = o.record_start.unwrap_or(o.start_time);
                out.push(if o.start_time > now {
                    AcctResv {
                        removed: true,
                        ..resv_record(o, start, o.end_time)
                    }
                } else {
                    resv_record(o, start, o.end_time.min(now))
                });
            }
            (Some(o), Some(n)) => {
                let start = o.record_start.unwrap_or(o.start_time);
                // (Moved to a start still to come: as one not begun.)
                let begun = start <= now && n.start_time <= now;
                // What accounting tells apart, as Slurm's: its nodes, CPUs,
                // users and accounts, flags (not its end).
                let same = o.nodes == n.nodes
                    && o.core_cnt == n.core_cnt
                    && o.users == n.users
                    && o.accounts == n.accounts
                    && o.flags == n.flags;
                if !begun || same {
                    n.record_start = if begun { o.record_start } else { None };
                    out.push(AcctResv {
                        prev_start: Some(start),
                        ..resv_record(n, n.record_start.unwrap_or(n.start_time), n.end_time)
                    });
                } else {
                    out.push(resv_record(o, start, now));
                    n.record_start = Some(now);
                    out.push(resv_record(n, now, n.end_time));
                }
            }
            (None, None) => {}
        }
        if self.acct_enabled {
            for r in out {
                self.account(AcctRecord::Resv(r));
            }
        }
    }

    /// Start accounting: tell slurmdbd what the cluster is (once per start).
    pub fn acct_start(&mut self, host: &str, now: i64) {
        use slurm_proto::acct::{AcctRecord, ClusterInfo};
        self.acct_enabled = true;
        for (name, a) in &self.p.nodes {
            self.acct_nodes
                .insert(name.clone(), (a.down, a.drain, a.reason.clone()));
        }
        let cpus: u32 = self.nodes.iter().map(|n| n.cpus).sum();
        let mem: u64 = self.nodes.iter().map(|n| n.real_memory).sum();
        let nodes = self.nodes.len() as u32;
        self.account(AcctRecord::ClusterInfo(ClusterInfo {
            control_host: host.to_string(),
            control_port: self.conf.slurmctld_port,
            cpus,
            nodes,
            tres: format!("cpu={cpus},mem={mem}M,energy=0,node={nodes},billing={cpus}"),
            time: now,
        }));
        // Each reservation's current record again (the same record: kept
        // once), so those made while accounting was off are known too.
        let resvs: Vec<_> = self
            .p
            .reservations
            .values()
            .map(|r| resv_record(r, r.record_start.unwrap_or(r.start_time), r.end_time))
            .collect();
        for r in resvs {
            self.account(AcctRecord::Resv(r));
        }
    }
}
