//! Preemption's choice of victims: which running jobs a blocked job should
//! displace to fit. Pure: the caller says which jobs it may preempt (by
//! partition tier or QOS) and what each would give back (everything, or
//! only its cores for one to be suspended); the controller acts on the
//! answer.
//!
//! The rule (as Slurm's): candidates lowest priority first, among equals
//! the youngest, taken until the job fits; then every victim the job does
//! not need after all is given back, so the victims are the fewest that
//! greedy order finds, and none is preempted for nothing.

use crate::select::place;
use crate::view::{ClusterView, JobView, NodeAlloc};

/// A running job that may be preempted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub id: u32,
    pub priority: u32,
    pub start_time: Option<i64>,
    /// What preempting it gives back.
    pub frees: Vec<NodeAlloc>,
}

/// The victims that let `job` fit in `view` and where it would then run
/// (none when it fits as things are), or `None` when preempting every
/// candidate would not make it fit.
pub fn victims(
    view: &ClusterView,
    job: &JobView,
    mut cands: Vec<Candidate>,
) -> Option<(Vec<u32>, Vec<NodeAlloc>)> {
    if let Ok(alloc) = place(view, job, false) {
        return Some((Vec::new(), alloc));
    }
    cands.sort_by_key(|c| (c.priority, std::cmp::Reverse(c.start_time), c.id));
    let mut view = view.clone();
    let mut chosen: Vec<&Candidate> = Vec::new();
    let mut fits = false;
    for c in &cands {
        view.release(&c.frees);
        chosen.push(c);
        if place(&view, job, false).is_ok() {
            fits = true;
            break;
        }
    }
    if !fits {
        return None;
    }
    // The fewest: give back any victim the job does not need.
    for k in (0..chosen.len()).rev() {
        view.consume(&chosen[k].frees);
        if place(&view, job, false).is_ok() {
            chosen.remove(k);
        } else {
            view.release(&chosen[k].frees);
        }
    }
    let alloc = place(&view, job, false).ok()?;
    Some((chosen.iter().map(|c| c.id).collect(), alloc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::{NodeView, PartitionView};
    use proptest::prelude::*;

    fn cluster(nodes: usize, cpus: u32) -> ClusterView {
        ClusterView {
            nodes: (0..nodes)
                .map(|i| NodeView {
                    name: format!("n{i}"),
                    cpus,
                    mem: 1000,
                    available: true,
                    weight: 1,
                    ..Default::default()
                })
                .collect(),
            partitions: vec![PartitionView {
                name: "p".into(),
                nodes: (0..nodes).collect(),
                up: true,
                priority_tier: 1,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn wants(tasks: u32) -> JobView {
        JobView {
            id: 999,
            min_nodes: 1,
            max_nodes: 1,
            num_tasks: tasks,
            cpus_per_task: 1,
            ..Default::default()
        }
    }

    fn on(node: usize, cpus: u32) -> NodeAlloc {
        NodeAlloc {
            node,
            cpus,
            ..Default::default()
        }
    }

    fn running(
        view: &mut ClusterView,
        id: u32,
        priority: u32,
        start: i64,
        a: NodeAlloc,
    ) -> Candidate {
        view.consume(std::slice::from_ref(&a));
        Candidate {
            id,
            priority,
            start_time: Some(start),
            frees: vec![a],
        }
    }

    #[test]
    fn lowest_priority_youngest_first_and_no_more_than_needed() {
        let mut v = cluster(2, 4);
        let c = vec![
            running(&mut v, 1, 10, 100, on(0, 2)),
            running(&mut v, 2, 10, 200, on(0, 2)),
            running(&mut v, 3, 5, 50, on(1, 4)),
        ];
        // Two CPUs on one node: job 3 (lowest priority) frees a whole node,
        // so it alone goes.
        let (ids, alloc) = victims(&v, &wants(2), c.clone()).expect("fits");
        assert_eq!(ids, vec![3]);
        assert_eq!(alloc[0].node, 1);
        // Eight CPUs on one node: no node has that many.
        assert_eq!(victims(&v, &wants(8), c.clone()), None);
        // Among equals the youngest goes first: with 3 out of the way
        // (not a candidate), 2 CPUs take job 2 (started at 200), not 1.
        let (ids, alloc) = victims(&v, &wants(2), c[..2].to_vec()).expect("fits");
        assert_eq!(ids, vec![2]);
        assert_eq!(alloc[0].node, 0);
        // Four on n0 need both: taken youngest first, neither given back.
        let (mut ids, _) = victims(&v, &wants(4), c[..2].to_vec()).expect("fits");
        ids.sort();
        assert_eq!(ids, vec![1, 2]);
    }

    proptest! {
        /// Whatever is running: the victims make the job fit, each one is
        /// needed (giving any back leaves it not fitting), and no answer
        /// means even all of them would not do.
        #[test]
        fn victims_fit_and_are_each_needed(
            jobs in prop::collection::vec((0usize..3, 1u32..5, 0u32..4, 0i64..100), 0..10),
            want in 1u32..9,
        ) {
            let mut v = cluster(3, 8);
            let mut cands = Vec::new();
            for (k, &(node, cpus, prio, start)) in jobs.iter().enumerate() {
                if v.nodes[node].free_cpus() < cpus {
                    continue;
                }
                cands.push(running(&mut v, k as u32 + 1, prio, start, on(node, cpus)));
            }
            let job = wants(want);
            match victims(&v, &job, cands.clone()) {
                Some((ids, alloc)) => {
                    let mut after = v.clone();
                    for c in cands.iter().filter(|c| ids.contains(&c.id)) {
                        after.release(&c.frees);
                    }
                    prop_assert!(place(&after, &job, false).is_ok());
                    prop_assert_eq!(alloc.iter().map(|a| a.cpus).sum::<u32>(), want);
                    for c in cands.iter().filter(|c| ids.contains(&c.id)) {
                        let mut less = after.clone();
                        less.consume(&c.frees);
                        prop_assert!(place(&less, &job, false).is_err(), "victim {} not needed", c.id);
                    }
                }
                None => {
                    let mut all = v.clone();
                    for c in &cands {
                        all.release(&c.frees);
                    }
                    prop_assert!(place(&all, &job, false).is_err());
                }
            }
        }
    }
}
