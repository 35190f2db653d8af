//! The queue policy before placement: which pending jobs a pass may offer
//! the scheduler at all. An array's `%N` keeps its tasks beyond N running
//! out (`JobArrayTaskLimit`), and licenses (`Licenses=`, `--licenses`) are
//! handed out highest priority first, a job waiting for what it needs
//! (`Licenses`). The controller and `slurmsim` call this same code; what
//! they know of the jobs (dependencies, reservations, holds) they decide
//! before.
//!
//! Invariants: deterministic (the order is priority, then submit time, then
//! job id, highest priority first); no license is counted out twice; a held
//! job takes nothing and is given no reason here (its hold is its reason).

use std::collections::HashMap;

/// A pending job, as the queue policy sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Waiting {
    pub id: u32,
    pub priority: u32,
    pub submit_time: i64,
    /// Held by a user or an operator: never offered, takes nothing.
    pub held: bool,
    /// The array this job is a task of, and the array's `%N`.
    pub array: Option<(u32, Option<u32>)>,
    /// Licenses wanted: name and count.
    pub licenses: Vec<(String, u32)>,
}

/// Why a job is not offered to the scheduler in this pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Its array already runs `%N` tasks.
    ArrayTaskLimit,
    /// The licenses it wants are in use.
    Licenses,
}

/// What is in use before the pass: tasks of each array running or still
/// ending, and licenses held by running jobs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InUse {
    pub array_tasks: HashMap<u32, u32>,
    pub licenses: HashMap<String, u32>,
}

/// For each of `jobs` (in the given order), `None` when it may be offered
/// to the scheduler, else why not. `total` is every license there is
/// (`Licenses=`): a job wanting one that is not there waits (submission
/// refuses what can never be had).
///
/// Array tasks are offered lowest id first, up to `%N` less those running;
/// a task offered counts even if the pass then does not start it, so a
/// pass never starts more than N. Licenses go to the jobs left, highest
/// priority first: a job whose licenses do not all fit waits and takes
/// none, and lower-priority jobs that fit still get theirs.
pub fn admit(jobs: &[Waiting], in_use: &InUse, total: &[(String, u32)]) -> Vec<Option<Held>> {
    let mut out = vec![None; jobs.len()];
    // Array throttles, lowest id first.
    let mut by_id: Vec<usize> = (0..jobs.len()).collect();
    by_id.sort_by_key(|&i| jobs[i].id);
    let mut offered: HashMap<u32, u32> = in_use.array_tasks.clone();
    for i in by_id {
        let j = &jobs[i];
        if j.held {
            continue;
        }
        if let Some((array, Some(max))) = j.array {
            let n = offered.entry(array).or_default();
            if *n >= max {
                out[i] = Some(Held::ArrayTaskLimit);
            } else {
                *n += 1;
            }
        }
    }
    // Licenses, highest priority first.
    if jobs.iter().any(|j| !j.licenses.is_empty()) {
        let mut free: HashMap<&str, u32> = total
            .iter()
            .map(|(n, c)| {
                let used = in_use.licenses.get(n).copied().unwrap_or(0);
                (n.as_str(), c.saturating_sub(used))
            })
            .collect();
        let mut order: Vec<usize> = (0..jobs.len()).collect();
        order.sort_by_key(|&i| {
            (
                std::cmp::Reverse(jobs[i].priority),
                jobs[i].submit_time,
                jobs[i].id,
            )
        });
        for i in order {
            let j = &jobs[i];
            if j.held || out[i].is_some() || j.licenses.is_empty() {
                continue;
            }
            let fits = j
                .licenses
                .iter()
                .all(|(n, c)| free.get(n.as_str()).is_some_and(|f| f >= c));
            if fits {
                for (n, c) in &j.licenses {
                    if let Some(f) = free.get_mut(n.as_str()) {
                        *f -= c;
                    }
                }
            } else {
                out[i] = Some(Held::Licenses);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn job(id: u32, priority: u32) -> Waiting {
        Waiting {
            id,
            priority,
            submit_time: 0,
            ..Default::default()
        }
    }

    fn lic(n: &str, c: u32) -> Vec<(String, u32)> {
        vec![(n.to_string(), c)]
    }

    #[test]
    fn array_tasks_are_offered_lowest_id_first_up_to_their_limit() {
        let task = |id| Waiting {
            array: Some((10, Some(2))),
            ..job(id, 100 - id)
        };
        let mut jobs = vec![task(13), task(11), task(12), task(14)];
        jobs[1].held = true;
        let mut in_use = InUse::default();
        in_use.array_tasks.insert(10, 1);
        // One runs; 11 is held (counts for nothing): 12 is offered, 13 and
        // 14 wait.
        let got = admit(&jobs, &in_use, &[]);
        assert_eq!(
            got,
            vec![
                Some(Held::ArrayTaskLimit),
                None,
                None,
                Some(Held::ArrayTaskLimit)
            ]
        );
        // Another array, or none, is not limited by it.
        let free = Waiting {
            array: Some((20, None)),
            ..job(21, 1)
        };
        assert_eq!(admit(&[free, job(22, 1)], &in_use, &[]), vec![None, None]);
    }

    #[test]
    fn licenses_go_highest_priority_first_and_a_job_takes_all_or_none() {
        let total = vec![("matlab".to_string(), 3), ("abaqus".to_string(), 1)];
        let mut in_use = InUse::default();
        in_use.licenses.insert("matlab".into(), 1);
        let mut both = job(1, 10);
        both.licenses = vec![("matlab".into(), 1), ("abaqus".into(), 2)];
        let big = Waiting {
            licenses: lic("matlab", 2),
            ..job(2, 5)
        };
        let small = Waiting {
            licenses: lic("matlab", 1),
            ..job(3, 1)
        };
        let unknown = Waiting {
            licenses: lic("ansys", 1),
            ..job(4, 50)
        };
        // `both` cannot have two abaqus and takes no matlab; `big` takes the
        // two left; `small` waits; `unknown` waits.
        let got = admit(&[both, big, small, unknown], &in_use, &total);
        assert_eq!(
            got,
            vec![
                Some(Held::Licenses),
                None,
                Some(Held::Licenses),
                Some(Held::Licenses)
            ]
        );
    }

    #[test]
    fn a_job_held_back_by_its_array_takes_no_license() {
        let total = lic("matlab", 1);
        let mut in_use = InUse::default();
        in_use.array_tasks.insert(7, 1);
        let throttled = Waiting {
            array: Some((7, Some(1))),
            licenses: lic("matlab", 1),
            ..job(8, 100)
        };
        let other = Waiting {
            licenses: lic("matlab", 1),
            ..job(9, 1)
        };
        assert_eq!(
            admit(&[throttled, other], &in_use, &total),
            vec![Some(Held::ArrayTaskLimit), None]
        );
    }

    proptest! {
        /// Whatever the queue: no license is counted out beyond what is
        /// free, no array is offered beyond its limit, held jobs are left
        /// alone, and the answer does not depend on the order jobs come in.
        #[test]
        fn never_more_than_there_is(
            specs in prop::collection::vec(
                (0u32..20, 0u32..5, any::<bool>(), prop::option::of(0u32..3), 0u32..3),
                0..24,
            ),
            running in prop::collection::vec(0u32..3, 3),
            maxes in prop::collection::vec(1u32..3, 3),
            have in 0u32..5,
            used in 0u32..3,
        ) {
            let mut jobs: Vec<Waiting> = specs
                .iter()
                .enumerate()
                .map(|(k, &(p, t, held, arr, want))| Waiting {
                    id: k as u32 + 1,
                    priority: p,
                    submit_time: i64::from(t),
                    held,
                    array: arr.map(|a| (a, Some(maxes[a as usize]))),
                    licenses: if want > 0 { lic("l", want) } else { Vec::new() },
                })
                .collect();
            let mut in_use = InUse::default();
            for (a, n) in running.iter().enumerate() {
                in_use.array_tasks.insert(a as u32, *n);
            }
            in_use.licenses.insert("l".into(), used);
            let total = lic("l", have);
            let got = admit(&jobs, &in_use, &total);
            let offered: Vec<&Waiting> = jobs
                .iter()
                .zip(&got)
                .filter(|(j, g)| !j.held && g.is_none())
                .map(|(j, _)| j)
                .collect();
            let lic_taken: u32 = offered.iter().flat_map(|j| &j.licenses).map(|(_, c)| c).sum();
            prop_assert!(lic_taken <= have.saturating_sub(used));
            for a in 0..3u32 {
                let max = jobs.iter().filter_map(|j| j.array).find(|x| x.0 == a).and_then(|x| x.1);
                if let Some(max) = max {
                    let n = offered.iter().filter(|j| j.array.map(|x| x.0) == Some(a)).count() as u32;
                    prop_assert!(n <= max.saturating_sub(in_use.array_tasks[&a]));
                }
            }
            for (j, g) in jobs.iter().zip(&got) {
                if j.held {
                    prop_assert_eq!(*g, None);
                }
            }
            // Same answer per job in reverse order.
            jobs.reverse();
            let mut again = admit(&jobs, &in_use, &total);
            again.reverse();
            prop_assert_eq!(again, got);
        }
    }
}
