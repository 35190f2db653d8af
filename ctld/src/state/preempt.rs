//! Preemption (`PreemptType=preempt/partition_prio` or `preempt/qos`): a
//! pending job blocked on resources displaces running jobs it may preempt,
//! the fewest and lowest-priority ones that make it fit, by their
//! `PreemptMode`: CANCEL (ended PREEMPTED), REQUEUE (back in the queue) or
//! SUSPEND (stopped in place, resumed once the preemptor has gone: see
//! `suspend.rs`). `GraceTime` (partition or QOS) is how long a victim gets
//! between SIGTERM and SIGKILL. `GANG` on its own (time slicing of jobs
//! sharing cores) preempts nothing.
//!
//! The victims are chosen by the core (`slurm_plugins::preempt`); this
//! says who may be preempted and how, and acts on the choice.
//!
//! One preemptor per scheduling pass. Over suspended victims it starts at
//! once (their memory and GRES stay held, so it must fit beside those);
//! otherwise it starts once its victims have left their nodes, and does not
//! preempt again while they are leaving.

use super::Controller;
use slurm_plugins::preempt::{victims, Candidate};
use slurm_proto::{JobId, JobReason, JobRecord, JobState, SchedFlag};

/// How a victim goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Off,
    Cancel,
    Requeue,
    Suspend,
}

impl Mode {
    fn parse(s: &str) -> Option<Mode> {
        let first = s
            .split(',')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_uppercase();
        Some(match first.as_str() {
            "OFF" => Mode::Off,
            "CANCEL" => Mode::Cancel,
            "REQUEUE" => Mode::Requeue,
            "SUSPEND" => Mode::Suspend,
            // Gang scheduling alone (time slicing) preempts nothing.
            "GANG" => Mode::Off,
            _ => return None,
        })
    }
}

/// Blocked jobs looked at per pass.
const MAX_TRIED: usize = 32;

/// Seconds a preemptor waits for its victims to leave before it may
/// preempt again.
pub(super) const SETTLE: i64 = 60;

impl Controller {
    fn preempt_type(&self) -> Option<&'static str> {
        match self.conf.get("PreemptType").map(str::trim) {
            Some("preempt/partition_prio") => Some("partition_prio"),
            Some("preempt/qos") => Some("qos"),
            _ => None,
        }
    }

    /// A victim's mode and grace time (seconds).
    fn victim_mode(&self, v: &JobRecord) -> (Mode, u32) {
        let cluster = self
            .conf
            .get("PreemptMode")
            .and_then(Mode::parse)
            .unwrap_or(Mode::Off);
        let part = self.conf.partition(&v.partition);
        let mut mode = part
            .and_then(|p| p.preempt_mode.as_deref())
            .and_then(Mode::parse)
            .unwrap_or(cluster);
        let mut grace = part.map_or(0, |p| p.grace_time);
        if let Some(q) = self.assocs.as_ref().and_then(|c| c.qos.get(&v.qos)) {
            if let Some(m) = Mode::parse(&q.preempt_mode) {
                mode = m;
            }
            grace = grace.max(q.grace_time);
        }
        (mode, grace)
    }

    fn may_preempt(&self, kind: &str, j: &JobRecord, v: &JobRecord) -> bool {
        // A job waiting for its gang turn may be preempted too.
        let active =
            v.state == JobState::Running || (v.state == JobState::Suspended && v.gang_suspended);
        if v.job_id == j.job_id || !active || v.completing || v.desc.external {
            return false;
        }
        match kind {
            "partition_prio" => {
                let tier = |name: &str| {
                    self.partitions
                        .iter()
                        .find(|p| p.name == name)
                        .map_or(0, |p| p.priority_tier)
                };
                tier(&j.partition) > tier(&v.partition)
            }
            _ => self
                .assocs
                .as_ref()
                .and_then(|c| c.qos.get(&j.qos))
                .is_some_and(|q| q.preempt.contains(&v.qos)),
        }
    }

    /// Try to make room for the first of `blocked` (pending on resources,
    /// highest priority first) that running jobs it may preempt could fit.
    pub(super) fn preempt_for(&mut self, blocked: &[JobId], now: i64) {
        let Some(kind) = self.preempt_type() else {
            return;
        };
        self.preempting.retain(|_, t| now - *t < SETTLE);
        // Nothing running may be preempted at all: nothing to try.
        let any = self.p.jobs.values().any(|v| {
            (v.state == JobState::Running || v.gang_suspended)
                && !v.completing
                && self.victim_mode(v).0 != Mode::Off
        });
        if !any {
            return;
        }
        let base = self.cluster_view();
        // The highest-priority blocked jobs only: this runs every pass.
        for &id in blocked.iter().take(MAX_TRIED) {
            if self.preempting.contains_key(&id) {
                return;
            }
            let Some(j) = self.p.jobs.get(&id).cloned() else {
                continue;
            };
            let Some(jv) = self.job_view(&j) else {
                continue;
            };
            let cands: Vec<Candidate> = self
                .p
                .jobs
                .values()
                .map(|v| v.as_ref())
                .filter(|v| self.may_preempt(kind, &j, v))
                .filter(|v| self.victim_mode(v).0 != Mode::Off)
                .map(|v| Candidate {
                    id: v.job_id,
                    priority: v.priority,
                    start_time: v.start_time,
                    frees: self.freed_by(v),
                })
                .collect();
            // (A job that fits without victims was held back by the plan,
            // not by resources: it is not this code's to start.)
            let Some((chosen, alloc)) = victims(&base, &jv, cands).filter(|(c, _)| !c.is_empty())
            else {
                continue;
            };
            // Over suspended victims only, the preemptor need not wait.
            let at_once = chosen.iter().all(|v| {
                self.p
                    .jobs
                    .get(v)
                    .is_some_and(|v| self.victim_mode(v).0 == Mode::Suspend)
            });
            for v in chosen {
                self.preempt_one(v, id, now);
            }
            if at_once {
                self.start_job(id, &alloc, now, SchedFlag::Main);
            } else {
                self.preempting.insert(id, now);
            }
            return;
        }
    }

    /// What preempting `v` gives back: everything, or for SUSPEND only its
    /// cores (its memory and GRES stay with it).
    fn freed_by(&self, v: &JobRecord) -> Vec<slurm_plugins::NodeAlloc> {
        let mut a = self.allocs_of(v);
        if self.victim_mode(v).0 == Mode::Suspend {
            for x in &mut a {
                x.mem = 0;
                x.gres = Default::default();
            }
        }
        a
    }

    fn preempt_one(&mut self, victim: JobId, by: JobId, now: i64) {
        let Some(v) = self.p.jobs.get(&victim).cloned() else {
            return;
        };
        let (mode, grace) = self.victim_mode(&v);
        let kill_wait = self.conf.kill_wait.max(grace);
        tracing::info!("job {victim} preempted ({mode:?}) for job {by}");
        match mode {
            Mode::Off => {}
            Mode::Cancel => {
                self.end_running(
                    victim,
                    JobState::Preempted,
                    JobReason::Other("Preempted".into()),
                    now,
                    kill_wait,
                );
            }
            Mode::Requeue => self.requeue_running(victim, JobState::Preempted, kill_wait, now),
            Mode::Suspend => {
                self.preempted_for.insert(victim, by);
                if v.state == JobState::Suspended {
                    // Waiting for its gang turn: now it waits for its
                    // preemptor instead.
                    if let Some(j) = self.job_mut(victim) {
                        j.gang_suspended = false;
                        j.preempt_suspended = true;
                        j.reason = JobReason::Other("Preempted".into());
                    }
                    self.save_job(victim);
                    self.refresh();
                } else {
                    self.suspend_job(victim, super::suspend::By::Preemption, now)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes() {
        assert_eq!(Mode::parse("REQUEUE"), Some(Mode::Requeue));
        assert_eq!(Mode::parse("cancel"), Some(Mode::Cancel));
        assert_eq!(Mode::parse("SUSPEND,GANG"), Some(Mode::Suspend));
        assert_eq!(Mode::parse("GANG"), Some(Mode::Off));
        assert_eq!(Mode::parse("bogus"), None);
    }
}
