//! Which of this node's CPUs each job holds, for cpusets.
//!
//! The controller does not send core indices yet, so the daemon picks: the
//! first free CPUs in topology order (socket, core, thread), the same choice
//! for the same state. CPUs of suspended jobs count as free (the controller
//! gave their cores away) but are taken after truly free ones. When fewer
//! are free than asked (a node configured with more CPUs than the host has,
//! as when several daemons share a test host), the least shared CPUs are
//! added, lowest first.

use slurm_proto::JobId;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuBook {
    /// Kernel CPU ids in allocation order.
    order: Vec<u32>,
    held: BTreeMap<JobId, Vec<u32>>,
    /// Jobs suspended (stopped) on this node.
    stopped: BTreeSet<JobId>,
}

impl CpuBook {
    pub fn new(order: Vec<u32>) -> CpuBook {
        CpuBook {
            order,
            held: BTreeMap::new(),
            stopped: BTreeSet::new(),
        }
    }

    /// How many running jobs, and how many jobs at all, hold `cpu`.
    fn users(&self, cpu: u32) -> (usize, usize) {
        let holders = self.held.iter().filter(|(_, v)| v.contains(&cpu));
        let (mut running, mut all) = (0, 0);
        for (job, _) in holders {
            all += 1;
            if !self.stopped.contains(job) {
                running += 1;
            }
        }
        (running, all)
    }

    /// A job was suspended (`true`) or resumed.
    pub fn set_stopped(&mut self, job: JobId, stopped: bool) {
        if stopped {
            self.stopped.insert(job);
        } else {
            self.stopped.remove(&job);
        }
    }

    /// Give `n` CPUs (at least one, at most all) to `job`; sorted ids.
    pub fn take(&mut self, job: JobId, n: u32) -> Vec<u32> {
        self.release(job);
        let n = (n.max(1) as usize).min(self.order.len());
        let mut by_use: Vec<((usize, usize), usize, u32)> = self
            .order
            .iter()
            .enumerate()
            .map(|(pos, &cpu)| (self.users(cpu), pos, cpu))
            .collect();
        by_use.sort_unstable();
        let mut got: Vec<u32> = by_use.into_iter().take(n).map(|(_, _, c)| c).collect();
        got.sort_unstable();
        if !got.is_empty() {
            self.held.insert(job, got.clone());
        }
        got
    }

    /// Record CPUs a job already holds (a job re-adopted after a restart).
    pub fn hold(&mut self, job: JobId, cpus: Vec<u32>) {
        if !cpus.is_empty() {
            self.held.insert(job, cpus);
        }
    }

    pub fn release(&mut self, job: JobId) {
        self.held.remove(&job);
        self.stopped.remove(&job);
    }

    pub fn held_by(&self, job: JobId) -> Option<&[u32]> {
        self.held.get(&job).map(Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_free_cpus_then_least_shared() {
        let mut b = CpuBook::new(vec![0, 4, 1, 5, 2, 6, 3, 7]);
        assert_eq!(b.take(1, 2), vec![0, 4]);
        assert_eq!(b.take(2, 3), vec![1, 2, 5]);
        b.release(1);
        assert_eq!(b.take(3, 2), vec![0, 4]);
        assert_eq!(b.held_by(2), Some(&[1, 2, 5][..]));
        // More than are free: the free ones, then the least shared.
        assert_eq!(b.take(4, 4), vec![0, 3, 6, 7]);
        assert_eq!(b.take(5, 100).len(), 8);
        // A suspended job's CPUs go before running jobs' ones.
        let mut b = CpuBook::new(vec![0, 1, 2, 3]);
        assert_eq!(b.take(1, 2), vec![0, 1]);
        assert_eq!(b.take(2, 2), vec![2, 3]);
        b.set_stopped(2, true);
        assert_eq!(b.take(3, 2), vec![2, 3]);
        b.set_stopped(2, false);
        b.release(3);
        b.set_stopped(1, true);
        assert_eq!(b.take(4, 1), vec![0]);
        // Zero asks for one; the same job asking again replaces its CPUs.
        let mut b = CpuBook::new(vec![0, 1]);
        assert_eq!(b.take(9, 0), vec![0]);
        assert_eq!(b.take(9, 2), vec![0, 1]);
        b.hold(10, vec![1]);
        assert_eq!(b.take(11, 1), vec![0]);
        assert!(CpuBook::new(vec![]).take(1, 3).is_empty());
    }
}
