//! Sharing cores and gang scheduling.
//!
//! In a partition with `OverSubscribe=FORCE[:N]` every job, and with
//! `OverSubscribe=YES[:N]` every job that asked (`-s`/`--oversubscribe`),
//! may be given cores other sharing jobs of that partition hold, up to N
//! jobs per core (4 when N is not given). Memory and GRES are never
//! shared, nor cores across partitions, nor an `--exclusive` job's. The
//! planner places jobs on free cores as usual; a job it leaves blocked on
//! resources gets a second try here over the shared cores.
//!
//! With `PreemptMode=GANG` the jobs sharing cores take turns: at any time
//! only jobs whose cores do not overlap run, the rest are suspended (as
//! `scontrol suspend` does, their clocks stopped), and every
//! `SchedulerTimeSlice` seconds (default 30) the longest-waiting suspended
//! jobs are let in first. Without GANG sharing jobs run side by side.
//!
//! Core counts stand for cores (the controller tracks how many a job has
//! on a node, not which), so "overlap" means "more than the node has".

use super::suspend::By;
use super::Controller;
use slurm_common::conf::oversubscribe_sharing;
use slurm_plugins::gang::{choose, shared_free, Turn};
use slurm_plugins::select::place;
use slurm_proto::{JobId, JobRecord, JobState, SchedFlag};

/// Sharing jobs tried per scheduling pass.
const MAX_TRIED: usize = 64;

impl Controller {
    /// How many jobs may share a core with `j` in its partition, when it
    /// may share at all.
    pub(super) fn share_factor(&self, j: &JobRecord) -> Option<u32> {
        if j.desc.exclusive || j.desc.exclusive_topo || j.desc.external {
            return None;
        }
        let p = self.partitions.iter().find(|p| p.name == j.partition)?;
        let (force, n) = oversubscribe_sharing(&p.oversubscribe)?;
        (n > 1 && (force || j.desc.oversubscribe)).then_some(n)
    }

    /// Whether any partition lets jobs share cores (else sharing and gang
    /// scheduling have nothing to do).
    fn any_sharing(&self) -> bool {
        self.partitions
            .iter()
            .any(|p| oversubscribe_sharing(&p.oversubscribe).is_some_and(|(_, n)| n > 1))
    }

    /// `PreemptMode=...GANG...`: sharing jobs take turns.
    pub(super) fn gang_enabled(&self) -> bool {
        self.conf
            .get("PreemptMode")
            .is_some_and(|m| m.split(',').any(|w| w.trim().eq_ignore_ascii_case("GANG")))
    }

    /// `SchedulerTimeSlice` (seconds, default 30).
    fn time_slice(&self) -> i64 {
        self.conf
            .get("SchedulerTimeSlice")
            .and_then(|v| v.trim().parse::<i64>().ok())
            .filter(|s| *s > 0)
            .unwrap_or(30)
    }

    /// Cores per node of jobs holding them, split by `mine`: (the others',
    /// `mine`'s). Running jobs and gang-suspended ones hold cores, and with
    /// `victims` jobs suspended by preemption (unless their preemptor waits
    /// for them); a job cleaning up holds them on the nodes it has not left.
    pub(super) fn cores_split(
        &self,
        mine: impl Fn(&JobRecord) -> bool,
        victims: bool,
    ) -> (Vec<u32>, Vec<u32>) {
        let mut other = vec![0u32; self.nodes.len()];
        let mut own = vec![0u32; self.nodes.len()];
        for j in self.p.jobs.values() {
            let suspended = j.state == JobState::Suspended && !j.completing;
            let held = j.state == JobState::Running
                || j.completing
                || (suspended && j.gang_suspended)
                || (suspended && victims && j.preempt_suspended && !self.victim_waits(j));
            if !held {
                continue;
            }
            let into = if mine(j) { &mut own } else { &mut other };
            for a in self.allocs_of(j) {
                if j.completing && !j.completing_nodes.contains(&self.nodes[a.node].name) {
                    continue;
                }
                into[a.node] += a.cpus;
            }
        }
        (other, own)
    }

    /// Start blocked jobs (highest priority first) that may share cores on
    /// the cores their partition's sharing jobs hold.
    pub(super) fn share_pass(&mut self, blocked: &[JobId], now: i64) -> Vec<JobId> {
        let mut started = Vec::new();
        if !self.any_sharing() {
            return started;
        }
        let sharing: Vec<(JobId, u32)> = blocked
            .iter()
            .filter_map(|id| {
                let j = self.p.jobs.get(id)?;
                Some((*id, self.share_factor(j)?))
            })
            .take(MAX_TRIED)
            .collect();
        for (id, n) in sharing {
            let Some(j) = self.p.jobs.get(&id).cloned() else {
                continue;
            };
            if j.state != JobState::Pending || j.completing {
                continue;
            }
            let Some(jv) = self.job_view(&j) else {
                continue;
            };
            let part = j.partition.clone();
            let (other, own) = self.cores_split(
                |o| o.partition == part && self.share_factor(o).is_some() && !o.completing,
                true,
            );
            let mut view = self.cluster_view();
            for (i, nv) in view.nodes.iter_mut().enumerate() {
                nv.alloc_cpus = nv.cpus - shared_free(nv.cpus, other[i], own[i], n);
            }
            if let Ok(alloc) = place(&view, &jv, false) {
                tracing::info!("job {id} starts on shared cores");
                self.start_job(id, &alloc, now, SchedFlag::Main);
                started.push(id);
            }
        }
        if !started.is_empty() {
            self.gang_fit(now, false);
        }
        started
    }

    /// Every time slice: let the longest-waiting gang-suspended jobs run.
    pub(super) fn gang_tick(&mut self, now: i64) {
        if self.gang_enabled() && now - self.gang_slice >= self.time_slice() {
            self.gang_slice = now;
            self.gang_fit(now, true);
        }
    }

    /// Choose which sharing jobs run so that no node's cores are used
    /// twice: at a new time slice (`rotate`) suspended jobs first, longest
    /// waiting first, then running ones; otherwise running jobs keep their
    /// cores and suspended ones fill what is left. Suspend and resume to
    /// match.
    pub(super) fn gang_fit(&mut self, now: i64, rotate: bool) {
        if !self.gang_enabled() || !self.any_sharing() {
            return;
        }
        let cand = |c: &Controller, j: &JobRecord| {
            !j.completing
                && c.share_factor(j).is_some()
                && (j.state == JobState::Running
                    || (j.state == JobState::Suspended && j.gang_suspended))
        };
        let mut jobs: Vec<&JobRecord> = self
            .p
            .jobs
            .values()
            .map(|j| j.as_ref())
            .filter(|j| cand(self, j))
            .collect();
        if jobs.is_empty() {
            return;
        }
        // Victims of preemption gave their cores up to the jobs here.
        let (other, _) = self.cores_split(|j| cand(self, j), false);
        // When a job last started or went on (resumed), or was suspended.
        let since = |j: &JobRecord| j.suspend_time.or(j.start_time).unwrap_or(0);
        jobs.sort_by_key(|j| {
            let running = j.state == JobState::Running;
            (running == rotate, since(j), j.job_id)
        });
        let free: Vec<u32> = self
            .nodes
            .iter()
            .zip(&other)
            .map(|(n, o)| n.cpus.saturating_sub(*o))
            .collect();
        let turns: Vec<Turn> = jobs
            .iter()
            .map(|j| Turn {
                id: j.job_id,
                cores: self.allocs_of(j).iter().map(|a| (a.node, a.cpus)).collect(),
            })
            .collect();
        let chosen = choose(&free, &turns);
        let (stop, go): (Vec<JobId>, Vec<JobId>) = (
            jobs.iter()
                .filter(|j| j.state == JobState::Running && !chosen.contains(&j.job_id))
                .map(|j| j.job_id)
                .collect(),
            jobs.iter()
                .filter(|j| j.state == JobState::Suspended && chosen.contains(&j.job_id))
                .map(|j| j.job_id)
                .collect(),
        );
        for id in stop {
            self.suspend_job(id, By::Gang, now);
        }
        for id in go {
            self.resume_job(id, now);
        }
    }
}
