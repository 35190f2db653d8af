//! Shared cores (`OverSubscribe=YES[:N]`/`FORCE[:N]`) and gang scheduling
//! (`PreemptMode=GANG`), as plain arithmetic over per-node core counts.
//!
//! - [`shared_free`]: how many cores one more sharing job of a partition
//!   may take on a node, when N jobs may share each core.
//! - [`choose`]: which of the jobs sharing cores run now so that no node
//!   has more cores in use than it has, taking jobs in the order given
//!   (the caller puts the longest-waiting first at a new time slice).

/// Cores one more sharing job may take on a node of `cpus` cores where
/// jobs that do not share with it hold `other` and its partition's sharing
/// jobs hold `own` (counting each job's cores), `n` jobs sharing a core:
/// never more than the node minus `other` (a job does not share with
/// itself), never more than N times that minus what sharing jobs hold.
pub fn shared_free(cpus: u32, other: u32, own: u32, n: u32) -> u32 {
    let cap = cpus.saturating_sub(other);
    cap.min(n.max(1).saturating_mul(cap).saturating_sub(own))
}

/// One job taking turns: its id and its cores per node (node index, cores).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    pub id: u32,
    pub cores: Vec<(usize, u32)>,
}

/// The jobs (by id) that run now: each in turn when its cores fit beside
/// those already chosen, within `free` (per node, what jobs not taking
/// turns leave).
pub fn choose(free: &[u32], jobs: &[Turn]) -> Vec<u32> {
    let mut used = vec![0u32; free.len()];
    let mut out = Vec::new();
    for j in jobs {
        let fits = j
            .cores
            .iter()
            .all(|&(n, c)| free.get(n).is_some_and(|f| used[n].saturating_add(c) <= *f));
        if fits {
            for &(n, c) in &j.cores {
                used[n] += c;
            }
            out.push(j.id);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sharing_capacity() {
        // A 4-core node, two jobs per core: a second 4-core job fits, a
        // third does not; another partition's 2 cores leave 2 to share.
        assert_eq!(shared_free(4, 0, 0, 2), 4);
        assert_eq!(shared_free(4, 0, 4, 2), 4);
        assert_eq!(shared_free(4, 0, 8, 2), 0);
        assert_eq!(shared_free(4, 0, 6, 2), 2);
        assert_eq!(shared_free(4, 2, 0, 2), 2);
        assert_eq!(shared_free(4, 2, 3, 2), 1);
        // N=1 is no sharing.
        assert_eq!(shared_free(4, 0, 3, 1), 1);
        assert_eq!(shared_free(4, 5, 0, 4), 0);
    }

    #[test]
    fn turns_in_order() {
        let t = |id, cores: &[(usize, u32)]| Turn {
            id,
            cores: cores.to_vec(),
        };
        let jobs = [
            t(1, &[(0, 4)]),
            t(2, &[(0, 4)]),
            t(3, &[(1, 2)]),
            t(4, &[(0, 1), (1, 2)]),
        ];
        assert_eq!(choose(&[4, 4], &jobs), vec![1, 3]);
        // Jobs not taking turns hold a core of node 1: job 3 still fits.
        assert_eq!(choose(&[4, 3], &jobs), vec![1, 3]);
        assert_eq!(choose(&[4, 4], &jobs[1..]), vec![2, 3]);
        // A node it does not know never fits.
        assert_eq!(choose(&[4], &[t(9, &[(3, 1)])]), Vec::<u32>::new());
    }

    fn turns() -> impl Strategy<Value = (Vec<u32>, Vec<Turn>)> {
        (1usize..6).prop_flat_map(|nodes| {
            let free = prop::collection::vec(0u32..9, nodes);
            let job = prop::collection::vec((0..nodes, 1u32..6), 1..4);
            let jobs = prop::collection::vec(job, 0..12);
            (free, jobs).prop_map(|(free, jobs)| {
                let jobs = jobs
                    .into_iter()
                    .enumerate()
                    .map(|(i, mut cores)| {
                        cores.sort_unstable();
                        cores.dedup_by_key(|c| c.0);
                        Turn {
                            id: i as u32,
                            cores,
                        }
                    })
                    .collect();
                (free, jobs)
            })
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// No node runs more cores than it has free; every job left out
        /// would overflow some node beside those chosen before it; the
        /// first job that fits alone always runs (nobody starves while it
        /// is first in line).
        #[test]
        fn turns_never_overcommit_and_leave_out_only_what_cannot_fit(
            (free, jobs) in turns()
        ) {
            let chosen = choose(&free, &jobs);
            let mut used = vec![0u32; free.len()];
            for j in jobs.iter().filter(|j| chosen.contains(&j.id)) {
                for &(n, c) in &j.cores {
                    used[n] += c;
                }
            }
            for (u, f) in used.iter().zip(&free) {
                prop_assert!(u <= f);
            }
            let mut before = vec![0u32; free.len()];
            for j in &jobs {
                let fits = j.cores.iter().all(|&(n, c)| before[n] + c <= free[n]);
                prop_assert_eq!(fits, chosen.contains(&j.id));
                if fits {
                    for &(n, c) in &j.cores {
                        before[n] += c;
                    }
                }
            }
            if let Some(first) = jobs.iter().find(|j| j.cores.iter().all(|&(n, c)| c <= free[n])) {
                let earlier_fit = jobs
                    .iter()
                    .take_while(|j| j.id != first.id)
                    .any(|j| chosen.contains(&j.id));
                prop_assert!(earlier_fit || chosen.contains(&first.id));
            }
            // Same input, same turns.
            prop_assert_eq!(chosen, choose(&free, &jobs));
        }

        /// A sharing job never gets more than the node minus what others
        /// hold, and N jobs of c cores fit where N·cap allows.
        #[test]
        fn shared_capacity_bounds(cpus in 0u32..64, other in 0u32..80, own in 0u32..300, n in 1u32..8) {
            let f = shared_free(cpus, other, own, n);
            let cap = cpus.saturating_sub(other);
            prop_assert!(f <= cap);
            prop_assert!(own + f <= (n * cap).max(own));
        }
    }
}
