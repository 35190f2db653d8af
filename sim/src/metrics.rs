//! The figures of a replay, from its outcome alone.
//!
//! - utilisation: CPU-seconds held by jobs / (usable CPUs × makespan);
//! - wait: start − submit;
//! - bounded slowdown (Feitelson): max((wait + run) / max(run, 10 s), 1),
//!   with run the time the job really held its nodes;
//! - makespan: first submission to last completion.

use crate::engine::Outcome;

/// Bound of the bounded slowdown, seconds.
pub const BSLD_BOUND: i64 = 10;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metrics {
    pub submitted: usize,
    pub started: usize,
    pub completed: usize,
    pub rejected: usize,
    /// Accepted but still pending when nothing more could happen.
    pub never_started: usize,
    pub killed: usize,
    pub cpu_seconds: u128,
    pub utilisation: f64,
    pub mean_wait: f64,
    pub max_wait: i64,
    pub mean_bsld: f64,
    pub makespan: i64,
}

impl Metrics {
    pub fn of(o: &Outcome) -> Metrics {
        let mut m = Metrics {
            submitted: o.jobs.len(),
            ..Metrics::default()
        };
        let first = o.jobs.iter().map(|j| j.submit).min();
        let mut last = None::<i64>;
        let (mut wait_sum, mut bsld_sum) = (0f64, 0f64);
        for j in &o.jobs {
            if j.rejected.is_some() || j.refused.is_some() {
                m.rejected += 1;
                continue;
            }
            let Some(start) = j.start else {
                m.never_started += 1;
                continue;
            };
            m.started += 1;
            m.killed += usize::from(j.killed);
            let wait = start - j.submit;
            wait_sum += wait as f64;
            m.max_wait = m.max_wait.max(wait);
            if let Some(end) = j.end {
                m.completed += 1;
                let run = end - start;
                last = Some(last.map_or(end, |l| l.max(end)));
                // (A job suspended by preemption held no cores meanwhile.)
                let held = (run - j.suspended).max(0);
                m.cpu_seconds += u128::from(j.cpus) * held as u128;
                let s = (wait + run) as f64 / run.max(BSLD_BOUND) as f64;
                bsld_sum += s.max(1.0);
            }
        }
        if m.started > 0 {
            m.mean_wait = wait_sum / m.started as f64;
        }
        if m.completed > 0 {
            m.mean_bsld = bsld_sum / m.completed as f64;
        }
        if let (Some(f), Some(l)) = (first, last) {
            m.makespan = (l - f).max(0);
        }
        let capacity = o.usable_cpus as f64 * m.makespan as f64;
        if capacity > 0.0 {
            m.utilisation = m.cpu_seconds as f64 / capacity;
        }
        m
    }
}

/// Seconds as `[Dd-]HH:MM:SS`, Slurm's elapsed-time layout.
pub fn hms(secs: i64) -> String {
    let s = secs.max(0);
    let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::JobOutcome;
    use slurm_plugins::PendingReason;

    #[test]
    fn figures() {
        let j = |id, submit, start: Option<i64>, end: Option<i64>, cpus| JobOutcome {
            id,
            submit,
            start,
            end,
            cpus,
            ..Default::default()
        };
        let o = Outcome {
            jobs: vec![
                j(1, 0, Some(0), Some(100), 2),
                j(2, 0, Some(100), Some(105), 4),
                JobOutcome {
                    rejected: Some(PendingReason::BadConstraints),
                    ..j(3, 0, None, None, 0)
                },
                j(4, 50, None, None, 0),
            ],
            passes: 2,
            productive_passes: 1,
            sched_time: Default::default(),
            max_pending: 2,
            hash: String::new(),
            usable_cpus: 4,
        };
        let m = Metrics::of(&o);
        assert_eq!(
            (m.submitted, m.started, m.rejected, m.never_started),
            (4, 2, 1, 1)
        );
        assert_eq!((m.makespan, m.cpu_seconds, m.max_wait), (105, 220, 100));
        assert!((m.utilisation - 220.0 / 420.0).abs() < 1e-12);
        assert_eq!(m.mean_wait, 50.0);
        // Job 1: 100/100 = 1; job 2: (100 + 5) / 10 = 10.5.
        assert_eq!(m.mean_bsld, 5.75);
        assert_eq!(hms(3661), "01:01:01");
        assert_eq!(hms(90_061), "1-01:01:01");
    }
}
