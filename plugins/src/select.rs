//! `select/cons_tres` placement (this part: whole cores and memory per
//! node, multi-node jobs, `-w`/`-x`, `--exclusive`, node weight).
//!
//! Nodes are tried lowest weight first, then in configuration order; required
//! nodes (`-w`) come first. Tasks are laid out block-wise: every chosen node
//! gets one task, then nodes are filled in order up to their free cores.

use crate::view::{ClusterView, JobView, NodeAlloc, NodeView};

/// Why a job cannot be placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectFail {
    /// Not enough free resources now; it could run on this partition later.
    Busy,
    /// Could never run here, even on an empty partition.
    Never,
}

fn tasks_capacity(n: &NodeView, job: &JobView, empty: bool) -> u32 {
    let cpt = job.cpus_per_task.max(1);
    let (cpus, mem) = if empty {
        (n.cpus, n.mem)
    } else {
        (n.free_cpus(), n.free_mem())
    };
    if job.exclusive && !(empty || n.is_empty()) {
        return 0;
    }
    let mut cap = cpus / cpt;
    if let Some(mpc) = job.mem_per_cpu.filter(|m| *m > 0) {
        cap = cap.min((mem / (mpc * cpt as u64)) as u32);
    }
    match job.mem_per_node {
        Some(0) if !(empty || n.is_empty()) => cap = 0,
        Some(m) if m > mem => cap = 0,
        _ => {}
    }
    if let Some(ntpn) = job.ntasks_per_node {
        if cap < ntpn.max(1) {
            return 0;
        }
        return ntpn.max(1);
    }
    cap
}

/// Place `job` on `view` as it is now (`empty = false`) or on an empty,
/// fully available partition (`empty = true`, the "could it ever run" test).
pub fn place(view: &ClusterView, job: &JobView, empty: bool) -> Result<Vec<NodeAlloc>, SelectFail> {
    let part = view
        .partitions
        .get(job.partition)
        .ok_or(SelectFail::Never)?;
    let exclusive = job.exclusive || part.exclusive;
    let job_ex;
    let job = if exclusive != job.exclusive {
        job_ex = JobView {
            exclusive,
            ..job.clone()
        };
        &job_ex
    } else {
        job
    };
    let fail = if empty {
        SelectFail::Never
    } else {
        SelectFail::Busy
    };

    let max_nodes = job
        .max_nodes
        .max(job.min_nodes)
        .min(part.max_nodes.unwrap_or(u32::MAX));
    if job.min_nodes > max_nodes || job.min_nodes as usize > part.nodes.len() {
        return Err(SelectFail::Never);
    }
    for r in &job.req_nodes {
        if !part.nodes.contains(r) || job.exc_nodes.contains(r) {
            return Err(SelectFail::Never);
        }
    }
    let mut cands: Vec<usize> = part
        .nodes
        .iter()
        .copied()
        .filter(|i| !job.exc_nodes.contains(i))
        .filter(|i| empty || view.nodes.get(*i).is_some_and(|n| n.available))
        .collect();
    cands.sort_by_key(|&i| {
        let n = &view.nodes[i];
        (!job.req_nodes.contains(&i), n.weight, i)
    });

    let mut chosen: Vec<(usize, u32)> = Vec::new();
    let mut total = 0u32;
    for &i in &cands {
        let required = job.req_nodes.contains(&i);
        let enough = total >= job.num_tasks
            && chosen.len() as u32 >= job.min_nodes
            && job
                .req_nodes
                .iter()
                .all(|r| chosen.iter().any(|c| c.0 == *r));
        if enough && !required {
            break;
        }
        let cap = tasks_capacity(&view.nodes[i], job, empty);
        if cap == 0 {
            if required {
                return Err(fail);
            }
            continue;
        }
        chosen.push((i, cap));
        total = total.saturating_add(cap);
    }
    if job
        .req_nodes
        .iter()
        .any(|r| !chosen.iter().any(|c| c.0 == *r))
    {
        return Err(fail);
    }
    if chosen.len() as u32 > max_nodes {
        return Err(SelectFail::Never);
    }
    if job.ntasks_per_node.is_none() && total < job.num_tasks
        || (chosen.len() as u32) < job.min_nodes
    {
        return Err(fail);
    }
    if job.ntasks_per_node.is_none() && (chosen.len() as u32) > job.num_tasks {
        // More nodes than tasks: every node must run at least one task.
        return Err(SelectFail::Never);
    }

    // Lay the tasks out: one per node, then fill in order.
    let mut tasks: Vec<u32> = chosen.iter().map(|_| 1).collect();
    if let Some(ntpn) = job.ntasks_per_node {
        tasks.iter_mut().for_each(|t| *t = ntpn.max(1));
    } else {
        let mut left = job.num_tasks - chosen.len() as u32;
        for (k, (_, cap)) in chosen.iter().enumerate() {
            let add = left.min(cap - 1);
            tasks[k] += add;
            left -= add;
        }
    }
    let cpt = job.cpus_per_task.max(1);
    Ok(chosen
        .iter()
        .zip(tasks)
        .map(|(&(i, _), t)| {
            let n = &view.nodes[i];
            let cpus = if job.exclusive { n.cpus } else { t * cpt };
            let mem = match (job.mem_per_node, job.mem_per_cpu) {
                (Some(0), _) => n.mem,
                (Some(m), _) => m,
                (None, Some(m)) => m * cpus as u64,
                (None, None) => match part.def_mem_per_cpu {
                    Some(d) => (d * cpus as u64).min(n.mem),
                    None if job.exclusive => n.mem,
                    None => 0,
                },
            };
            NodeAlloc {
                node: i,
                cpus,
                mem,
                tasks: t,
                exclusive: job.exclusive,
            }
        })
        .collect())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::view::PartitionView;

    pub(crate) fn cluster(n: usize, cpus: u32, mem: u64) -> ClusterView {
        ClusterView {
            nodes: (0..n)
                .map(|i| NodeView {
                    name: format!("n{}", i + 1),
                    cpus,
                    mem,
                    alloc_cpus: 0,
                    alloc_mem: 0,
                    available: true,
                    weight: 1,
                    features: vec![],
                    exclusive_in_use: false,
                })
                .collect(),
            partitions: vec![PartitionView {
                name: "debug".into(),
                nodes: (0..n).collect(),
                up: true,
                max_time: None,
                max_nodes: None,
                exclusive: false,
                priority_tier: 1,
                def_mem_per_cpu: None,
            }],
            running: vec![],
        }
    }

    pub(crate) fn job(id: u32) -> JobView {
        JobView {
            id,
            priority: 100,
            submit_time: 0,
            partition: 0,
            min_nodes: 1,
            max_nodes: 1,
            num_tasks: 1,
            cpus_per_task: 1,
            ntasks_per_node: None,
            mem_per_node: None,
            mem_per_cpu: None,
            req_nodes: vec![],
            exc_nodes: vec![],
            exclusive: false,
            time_limit: None,
            begin_time: None,
            hold: None,
        }
    }

    #[test]
    fn two_tasks_share_one_node() {
        let v = cluster(3, 4, 4000);
        let j = JobView {
            num_tasks: 2,
            ..job(1)
        };
        let a = place(&v, &j, false).unwrap();
        assert_eq!(a.len(), 1);
        assert_eq!((a[0].node, a[0].cpus, a[0].tasks), (0, 2, 2));
    }

    #[test]
    fn three_nodes_one_task_each() {
        let v = cluster(3, 4, 4000);
        let j = JobView {
            min_nodes: 3,
            max_nodes: 3,
            num_tasks: 3,
            ntasks_per_node: Some(1),
            ..job(1)
        };
        let a = place(&v, &j, false).unwrap();
        assert_eq!(a.iter().map(|x| x.node).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert!(a.iter().all(|x| x.tasks == 1 && x.cpus == 1));
    }

    #[test]
    fn tasks_fill_nodes_in_order() {
        let v = cluster(3, 4, 4000);
        let j = JobView {
            min_nodes: 2,
            max_nodes: 2,
            num_tasks: 6,
            ..job(1)
        };
        let a = place(&v, &j, false).unwrap();
        assert_eq!(a.iter().map(|x| x.tasks).collect::<Vec<_>>(), vec![4, 2]);
    }

    #[test]
    fn busy_versus_never() {
        let mut v = cluster(2, 4, 4000);
        let big = JobView {
            num_tasks: 8,
            min_nodes: 1,
            max_nodes: 2,
            ..job(1)
        };
        assert!(place(&v, &big, false).is_ok());
        v.nodes[0].alloc_cpus = 1;
        assert_eq!(place(&v, &big, false), Err(SelectFail::Busy));
        let huge = JobView {
            num_tasks: 9,
            max_nodes: 2,
            ..job(2)
        };
        assert_eq!(place(&v, &huge, true), Err(SelectFail::Never));
        let mem = JobView {
            mem_per_node: Some(5000),
            ..job(3)
        };
        assert_eq!(place(&v, &mem, true), Err(SelectFail::Never));
    }

    #[test]
    fn exclusive_needs_empty_nodes_and_takes_them_whole() {
        let mut v = cluster(2, 4, 4000);
        v.nodes[0].alloc_cpus = 1;
        let j = JobView {
            exclusive: true,
            ..job(1)
        };
        let a = place(&v, &j, false).unwrap();
        assert_eq!((a[0].node, a[0].cpus, a[0].mem), (1, 4, 4000));
        v.consume(&a);
        let small = job(2);
        let b = place(&v, &small, false).unwrap();
        assert_eq!(b[0].node, 0);
    }

    #[test]
    fn required_and_excluded_nodes_and_weights() {
        let mut v = cluster(3, 4, 4000);
        v.nodes[0].weight = 10;
        let a = place(&v, &job(1), false).unwrap();
        assert_eq!(a[0].node, 1, "lowest weight first");
        let j = JobView {
            req_nodes: vec![0],
            ..job(2)
        };
        assert_eq!(place(&v, &j, false).unwrap()[0].node, 0);
        let j = JobView {
            exc_nodes: vec![1, 2],
            ..job(3)
        };
        assert_eq!(place(&v, &j, false).unwrap()[0].node, 0);
        v.nodes[0].available = false;
        let j = JobView {
            req_nodes: vec![0],
            ..job(4)
        };
        assert_eq!(place(&v, &j, false), Err(SelectFail::Busy));
    }

    #[test]
    fn memory_is_consumed() {
        let mut v = cluster(1, 4, 4000);
        let j = JobView {
            mem_per_node: Some(3000),
            ..job(1)
        };
        let a = place(&v, &j, false).unwrap();
        v.consume(&a);
        assert_eq!(place(&v, &j, false), Err(SelectFail::Busy));
        let small = JobView {
            mem_per_cpu: Some(500),
            num_tasks: 2,
            ..job(2)
        };
        let b = place(&v, &small, false).unwrap();
        assert_eq!(b[0].mem, 1000);
    }
}
