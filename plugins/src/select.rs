//! `select/cons_tres` placement (this part: whole cores and memory per
//! node, multi-node jobs, `-w`/`-x`, `--exclusive`, node weight).
//!
//! Nodes are tried lowest weight first, then in configuration order; required
//! nodes (`-w`) come first. A node is passed over when taking it would leave
//! too few node slots (`--nodes` max) for the remaining tasks. Tasks are laid
//! out block-wise: every chosen node gets one task, then nodes are filled in
//! order up to their free cores.
//!
//! The greedy is shared with the backfill planner ([`crate::plan`]), which
//! feeds it the resources free over a window of the future instead of now.

use crate::view::{
    take_gres, ClusterView, GresCounts, JobView, NodeAlloc, NodeView, PartitionView,
};
use std::borrow::Cow;

/// Why a job cannot be placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectFail {
    /// Not enough free resources now; it could run on this partition later.
    Busy,
    /// Could never run here, even on an empty partition.
    Never,
}

/// What one node offers a job: free cores and MiB, and whether nothing at
/// all is allocated on it (needed by `--exclusive` and `--mem=0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Free {
    pub cpus: u32,
    pub mem: u64,
    pub empty: bool,
    /// Free generic resources per kind.
    pub gres: GresCounts,
}

impl Free {
    /// What `n` offers now.
    pub fn of(n: &NodeView) -> Free {
        Free {
            cpus: n.free_cpus(),
            mem: n.free_mem(),
            empty: n.is_empty(),
            gres: n.free_gres(),
        }
    }

    /// What `n` would offer with nothing running on it.
    pub fn whole(n: &NodeView) -> Free {
        Free {
            cpus: n.cpus,
            mem: n.mem,
            empty: true,
            gres: n.gres,
        }
    }
}

/// How many of `job`'s tasks fit in `f` (0 = none; with `--ntasks-per-node`
/// either exactly that many or none). `mem` is the node's whole memory and
/// `def_mem_per_cpu` the partition's default for jobs that ask for none.
pub(crate) fn tasks_capacity(
    f: Free,
    n: &NodeView,
    def_mem_per_cpu: Option<u64>,
    job: &JobView,
) -> u32 {
    let mem = n.mem;
    let cpt = job.cpus_per_task_on(n);
    if job.exclusive && !f.empty {
        return 0;
    }
    if !job.gres.is_empty() && take_gres(&f.gres, &job.gres).is_none() {
        return 0;
    }
    // Whole cores only: the layout rounds a node's CPUs up to cores.
    let tpc = n.core_cpus();
    if f.cpus / tpc * tpc < job.min_cpus_per_node {
        return 0;
    }
    let mut cap = (f.cpus / tpc * tpc) / cpt;
    let per_cpu = match (job.mem_per_node, job.mem_per_cpu) {
        (_, Some(m)) => Some(m),
        // The default is charged up to the node's memory (see the layout
        // below), so it only limits a node whose memory is partly taken.
        (None, None) if f.mem < mem => def_mem_per_cpu,
        _ => None,
    };
    if let Some(mpc) = per_cpu.filter(|m| *m > 0) {
        // Memory is charged per allocated CPU, whole cores included.
        let cpus_by_mem = (f.mem / mpc) / u64::from(tpc) * u64::from(tpc);
        cap = cap.min((cpus_by_mem / u64::from(cpt)).min(u32::MAX as u64) as u32);
    }
    match job.mem_per_node {
        Some(0) if !f.empty => cap = 0,
        Some(m) if m > f.mem => cap = 0,
        _ => {}
    }
    if let Some(nps) = job.ntasks_per_socket {
        cap = cap.min(nps.max(1).saturating_mul(n.sockets.max(1)));
    }
    if let Some(ntpn) = job.ntasks_per_node {
        if cap < ntpn.max(1) {
            return 0;
        }
        return ntpn.max(1);
    }
    cap
}

/// A job checked against its partition once, ready to be placed against
/// any source of free resources (now, or a window of the future).
#[derive(Debug, Clone)]
pub(crate) struct Prepared<'a> {
    /// The job with `exclusive` forced on by `OverSubscribe=EXCLUSIVE`.
    pub job: Cow<'a, JobView>,
    pub part: &'a PartitionView,
    /// The job's node count bound by the partition's `MaxNodes`.
    pub max_nodes: u32,
}

/// The checks that do not depend on what is free: partition, node counts,
/// required nodes inside the partition and not excluded.
pub(crate) fn prepare<'a>(
    view: &'a ClusterView,
    job: &'a JobView,
) -> Result<Prepared<'a>, SelectFail> {
    let part = view
        .partitions
        .get(job.partition)
        .ok_or(SelectFail::Never)?;
    // Nothing else may use the leaves or blocks of an `--exclusive=topo`
    // job: its own nodes included.
    let exclusive_topo = job.exclusive_topo || part.exclusive_topo;
    let exclusive = job.exclusive || part.exclusive || exclusive_topo;
    let job = if exclusive != job.exclusive || exclusive_topo != job.exclusive_topo {
        Cow::Owned(JobView {
            exclusive,
            exclusive_topo,
            ..job.clone()
        })
    } else {
        Cow::Borrowed(job)
    };
    let max_nodes = job
        .max_nodes
        .max(job.min_nodes)
        .min(part.max_nodes.unwrap_or(u32::MAX));
    if job.min_nodes > max_nodes || job.min_nodes as usize > part.nodes.len() {
        return Err(SelectFail::Never);
    }
    for r in &job.req_nodes {
        if *r >= view.nodes.len() || !part.nodes.contains(r) || job.exc_nodes.contains(r) {
            return Err(SelectFail::Never);
        }
    }
    Ok(Prepared {
        job,
        part,
        max_nodes,
    })
}

/// The greedy at the heart of cons_tres placement, over candidates already
/// in preference order (required nodes first, then lowest weight, then
/// configuration order). `free(i)` says what node `i` offers (`None`: not
/// usable); it is only asked for the nodes the greedy reaches. `max_cap`
/// bounds the tasks any candidate could hold; a node is skipped when taking
/// it would leave too few node slots (`max_nodes`) for the tasks still
/// needed, so small leftovers do not crowd out a node that can hold the job.
/// Whenever the plain first-fit succeeds, this picks exactly what it picks.
pub(crate) fn greedy(
    nodes: &[NodeView],
    p: &Prepared,
    cands: impl IntoIterator<Item = usize>,
    mut free: impl FnMut(usize) -> Option<Free>,
    max_cap: u32,
    fail: SelectFail,
) -> Result<Vec<NodeAlloc>, SelectFail> {
    let job: &JobView = &p.job;
    let req_all_chosen = |chosen: &[(usize, u32)]| {
        job.req_nodes
            .iter()
            .all(|r| chosen.iter().any(|c| c.0 == *r))
    };
    let mut chosen: Vec<(usize, u32)> = Vec::new();
    // Generic resources free on each chosen node (what it gets is taken
    // from them below).
    let mut chosen_gres: Vec<GresCounts> = Vec::new();
    let mut total = 0u32;
    for i in cands {
        let required = job.req_nodes.contains(&i);
        let enough = total >= job.num_tasks
            && chosen.len() as u32 >= job.min_nodes
            && req_all_chosen(&chosen);
        if enough && !required {
            break;
        }
        let (cap, fg) = match (free(i), nodes.get(i)) {
            (Some(f), Some(n)) => (tasks_capacity(f, n, p.part.def_mem_per_cpu, job), f.gres),
            _ => (0, GresCounts::default()),
        };
        if cap == 0 {
            if required {
                return Err(fail);
            }
            continue;
        }
        if !required && job.ntasks_per_node.is_none() {
            // Would taking this node leave room for the rest?
            let slots_after = (p.max_nodes as u64).saturating_sub(chosen.len() as u64 + 1);
            let need_after = (job.num_tasks as u64).saturating_sub(total as u64 + cap as u64);
            if need_after > slots_after.saturating_mul(max_cap as u64) {
                continue;
            }
        }
        chosen.push((i, cap));
        chosen_gres.push(fg);
        total = total.saturating_add(cap);
    }
    if !req_all_chosen(&chosen) {
        return Err(fail);
    }
    if chosen.len() as u32 > p.max_nodes {
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
        let mut left = job.num_tasks.saturating_sub(chosen.len() as u32);
        for (k, (_, cap)) in chosen.iter().enumerate() {
            let add = left.min(cap - 1);
            tasks[k] += add;
            left -= add;
        }
    }
    let part = p.part;
    Ok(chosen
        .iter()
        .zip(tasks)
        .zip(chosen_gres)
        .map(|((&(i, _), t), fg)| {
            let n = &nodes[i];
            let cpt = job.cpus_per_task_on(n);
            let cpus = if job.exclusive {
                n.cpus
            } else {
                // Whole cores (CR_Core): the last one's spare threads too.
                let tpc = n.core_cpus();
                t.saturating_mul(cpt)
                    .max(job.min_cpus_per_node)
                    .div_ceil(tpc)
                    .saturating_mul(tpc)
                    .min(n.cpus)
            };
            let mem = match (job.mem_per_node, job.mem_per_cpu) {
                (Some(0), _) => n.mem,
                (Some(m), _) => m,
                // A node held whole is charged at most all of its memory.
                (None, Some(m)) if job.exclusive => m.saturating_mul(cpus as u64).min(n.mem),
                (None, Some(m)) => m.saturating_mul(cpus as u64),
                (None, None) => match part.def_mem_per_cpu {
                    Some(d) => d.saturating_mul(cpus as u64).min(n.mem),
                    None if job.exclusive => n.mem,
                    None => 0,
                },
            };
            // A node held whole comes with all its generic resources.
            let gres = if job.exclusive {
                fg
            } else {
                take_gres(&fg, &job.gres).unwrap_or_default()
            };
            NodeAlloc {
                node: i,
                cpus,
                mem,
                tasks: t,
                exclusive: job.exclusive,
                gres,
            }
        })
        .collect())
}

/// The most tasks of `job` any node of `part` could ever hold (for
/// [`greedy`]'s look-ahead).
pub(crate) fn max_tasks_per_node(max_node_cpus: u32, job: &JobView) -> u32 {
    let cap = max_node_cpus / job.cpus_per_task.max(1);
    match job.ntasks_per_node {
        Some(n) => cap.min(n.max(1)),
        None => cap,
    }
}

/// Place `job` on `view` as it is now (`empty = false`) or on an empty,
/// fully available partition (`empty = true`, the "could it ever run" test).
pub fn place(view: &ClusterView, job: &JobView, empty: bool) -> Result<Vec<NodeAlloc>, SelectFail> {
    let p = prepare(view, job)?;
    let fail = if empty {
        SelectFail::Never
    } else {
        SelectFail::Busy
    };
    let job: &JobView = &p.job;
    let mut cands: Vec<usize> = p
        .part
        .nodes
        .iter()
        .copied()
        .filter(|i| *i < view.nodes.len())
        .filter(|i| !job.exc_nodes.contains(i))
        .filter(|i| empty || view.nodes[*i].available)
        .collect();
    cands.sort_by_key(|&i| (!job.req_nodes.contains(&i), view.nodes[i].weight, i));
    cands.dedup();
    let max_cpus = p
        .part
        .nodes
        .iter()
        .filter_map(|i| view.nodes.get(*i))
        .map(|n| n.cpus)
        .max()
        .unwrap_or(0);
    let max_cap = max_tasks_per_node(max_cpus, job);
    view.topology_of(job.partition).place(
        &view.nodes,
        &p,
        cands,
        |i| {
            let n = &view.nodes[i];
            Some(if empty { Free::whole(n) } else { Free::of(n) })
        },
        |i| empty || view.nodes[i].is_empty(),
        max_cap,
        fail,
    )
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
                    gres: Default::default(),
                    alloc_gres: Default::default(),
                    threads_per_core: 1,
                    sockets: 1,
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
                ..Default::default()
            }],
            running: vec![],
            ..Default::default()
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
            gres: vec![],
            hold: None,
            ..Default::default()
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

    /// `--mincpus`: each node gives the job at least that many CPUs, and
    /// a node with fewer free is passed over.
    #[test]
    fn mincpus_is_a_floor_per_node() {
        let mut v = cluster(2, 4, 4000);
        let j = JobView {
            min_cpus_per_node: 3,
            ..job(1)
        };
        let a = place(&v, &j, false).unwrap();
        assert_eq!((a[0].node, a[0].cpus, a[0].tasks), (0, 3, 1));
        v.consume(&a);
        // Node 0 has one CPU left: the next goes to node 1.
        let a = place(&v, &j, false).unwrap();
        assert_eq!((a[0].node, a[0].cpus), (1, 3));
        v.consume(&a);
        assert!(place(&v, &j, false).is_err());
        // Tasks asking for more than the floor get what they ask.
        let big = JobView {
            num_tasks: 4,
            min_cpus_per_node: 2,
            ..job(2)
        };
        let w = cluster(1, 4, 4000);
        assert_eq!(place(&w, &big, false).unwrap()[0].cpus, 4);
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
    fn default_memory_per_cpu_never_overcommits() {
        let mut v = cluster(1, 4, 1000);
        v.partitions[0].def_mem_per_cpu = Some(400);
        // On an untouched node the default is charged up to its memory.
        let all = JobView {
            num_tasks: 4,
            ..job(1)
        };
        assert_eq!(place(&v, &all, false).unwrap()[0].mem, 1000);
        // Once some memory is taken, the default limits the cores.
        let one = place(&v, &job(2), false).unwrap();
        assert_eq!(one[0].mem, 400);
        v.consume(&one);
        // 600 MiB left: room for one more core at 400, not two.
        let two = JobView {
            num_tasks: 2,
            ..job(3)
        };
        assert_eq!(place(&v, &two, false), Err(SelectFail::Busy));
        assert_eq!(place(&v, &job(4), false).unwrap()[0].mem, 400);
    }

    #[test]
    fn exclusive_memory_per_cpu_is_capped_at_the_node() {
        let v = cluster(1, 8, 4000);
        let j = JobView {
            exclusive: true,
            mem_per_cpu: Some(250),
            num_tasks: 2,
            ..job(1)
        };
        assert_eq!(place(&v, &j, false).unwrap()[0].mem, 2000);
        let big = JobView {
            mem_per_cpu: Some(1000),
            ..j
        };
        assert_eq!(place(&v, &big, false).unwrap()[0].mem, 4000);
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

    #[test]
    fn whole_cores_with_threads() {
        let mut v = cluster(1, 8, 8000);
        v.nodes[0].threads_per_core = 2;
        // One task of one CPU gets a whole core: both its threads.
        let a = place(&v, &job(1), false).unwrap();
        assert_eq!((a[0].cpus, a[0].tasks), (2, 1));
        // Three tasks: two cores.
        let j = JobView {
            num_tasks: 3,
            ..job(2)
        };
        assert_eq!(place(&v, &j, false).unwrap()[0].cpus, 4);
        // Memory per CPU is charged on the whole cores, and limits them.
        let m = JobView {
            mem_per_cpu: Some(1000),
            ..job(3)
        };
        assert_eq!(place(&v, &m, false).unwrap()[0].mem, 2000);
        v.nodes[0].alloc_mem = 6500;
        assert_eq!(place(&v, &m, false), Err(SelectFail::Busy));
        // Free CPUs that are not whole cores are not used.
        v.nodes[0].alloc_mem = 0;
        v.nodes[0].alloc_cpus = 7;
        assert_eq!(place(&v, &job(4), false), Err(SelectFail::Busy));
    }

    #[test]
    fn tasks_per_socket_cap_each_node() {
        let mut v = cluster(2, 8, 8000);
        v.nodes[0].sockets = 2;
        v.nodes[1].sockets = 1;
        let j = JobView {
            num_tasks: 3,
            max_nodes: 2,
            ntasks_per_socket: Some(1),
            ..job(1)
        };
        // Two tasks fit on n1 (two sockets), the third goes to n2.
        let a = place(&v, &j, false).unwrap();
        assert_eq!(
            a.iter().map(|x| (x.node, x.tasks)).collect::<Vec<_>>(),
            vec![(0, 2), (1, 1)]
        );
        let one_node = JobView { max_nodes: 1, ..j };
        assert_eq!(place(&v, &one_node, true), Err(SelectFail::Never));
    }
}
