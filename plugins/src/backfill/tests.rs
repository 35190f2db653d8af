use super::*;
use crate::plan::duration;
use crate::sched::Builtin;
use crate::select::place;
use crate::select::tests::{cluster, job};
use crate::topo::{Block, Blocks, SwitchDef, Topology, Tree};
use crate::view::{Hold, NodeView, PartitionView, RunningJob};
use proptest::prelude::*;
use std::sync::Arc;

fn node_alloc(node: usize, cpus: u32) -> NodeAlloc {
    NodeAlloc {
        node,
        cpus,
        mem: 0,
        tasks: cpus,
        exclusive: false,
        gres: Default::default(),
    }
}

fn run(v: &mut ClusterView, id: u32, end: Option<i64>, alloc: Vec<NodeAlloc>) {
    v.consume(&alloc);
    v.running.push(RunningJob {
        id,
        end,
        alloc,
        ..RunningJob::default()
    });
}

fn bf(params: &str) -> Backfill {
    Backfill::new(BackfillParams::parse(params).unwrap().0)
}

/// A job of `tasks` one-core tasks on up to `nodes` nodes for `minutes`.
fn sized(id: u32, prio: u32, nodes: u32, tasks: u32, minutes: Option<u32>) -> JobView {
    JobView {
        priority: prio,
        min_nodes: nodes,
        max_nodes: nodes,
        num_tasks: tasks,
        time_limit: minutes,
        ..job(id)
    }
}

fn outcome(p: &Plan) -> Vec<(u32, Option<PendingReason>)> {
    p.decisions
        .iter()
        .map(|d| match d {
            Decision::Start { job, .. } => (*job, None),
            Decision::Pending { job, reason } => (*job, Some(*reason)),
        })
        .collect()
}

fn start_of(p: &Plan, id: u32) -> Option<i64> {
    p.starts.get(&id).map(|s| s.start)
}

const RES: Option<PendingReason> = Some(PendingReason::Resources);
const PRIO: Option<PendingReason> = Some(PendingReason::Priority);

#[test]
fn short_job_backfills_without_delaying_the_blocked_one() {
    let mut v = cluster(2, 4, 4000);
    run(&mut v, 100, Some(600), vec![node_alloc(0, 4)]);
    let q = vec![
        sized(1, 100, 2, 8, Some(60)),
        sized(2, 50, 1, 4, Some(5)),
        sized(3, 40, 1, 4, Some(20)),
    ];
    let p = bf("").plan(&v, &q, 0);
    assert_eq!(outcome(&p), vec![(1, RES), (2, None), (3, PRIO)]);
    assert_eq!(start_of(&p, 1), Some(600));
    assert_eq!(start_of(&p, 2), Some(0));
    assert_eq!(p.starts[&2].end, Some(300));
    assert_eq!(start_of(&p, 3), Some(3600 + 600), "after job 1");
    // sched/builtin starts nothing behind the blocked job.
    let d = Builtin.schedule(&v, &q, 0);
    assert!(d.iter().all(|d| matches!(d, Decision::Pending { .. })));
    // Planned starts for squeue --start, in queue order.
    let ps = p.planned_starts(&q);
    assert_eq!(ps[0].0, 1);
    assert_eq!(ps[0].1, Some(600));
    assert_eq!(ps[0].2.len(), 2);
}

#[test]
fn a_job_with_a_time_min_starts_now_with_the_longest_limit_that_fits() {
    // One 2-core node; one core is busy for 10 minutes, then job 1 (both
    // cores) is planned. Job 2 (one core, 60 minutes) does not fit in
    // front of it; with `--time-min=5` it starts now with its limit
    // lowered to what ends before job 1's start.
    let mut v = cluster(1, 2, 4000);
    run(&mut v, 100, Some(600), vec![node_alloc(0, 1)]);
    let mut shrinkable = sized(2, 50, 1, 1, Some(60));
    shrinkable.time_min = Some(5);
    let q = vec![sized(1, 100, 1, 2, Some(60)), shrinkable.clone()];
    let p = bf("bf_resolution=60").plan(&v, &q, 0);
    assert_eq!(outcome(&p), vec![(1, RES), (2, None)]);
    assert_eq!(start_of(&p, 1), Some(600), "job 1 keeps its start");
    assert_eq!(p.limits.get(&2), Some(&10));
    assert_eq!(p.starts[&2].end, Some(600));
    // Without it, it waits behind job 1; with a time-min longer than the
    // hole, too.
    let q = vec![sized(1, 100, 1, 2, Some(60)), sized(2, 50, 1, 1, Some(60))];
    let p = bf("bf_resolution=60").plan(&v, &q, 0);
    assert_eq!(outcome(&p), vec![(1, RES), (2, PRIO)]);
    assert!(p.limits.is_empty());
    shrinkable.time_min = Some(11);
    let q = vec![sized(1, 100, 1, 2, Some(60)), shrinkable];
    let p = bf("bf_resolution=60").plan(&v, &q, 0);
    assert_eq!(outcome(&p), vec![(1, RES), (2, PRIO)]);
    // A job that fits for its whole limit keeps it.
    let mut whole = sized(3, 50, 1, 1, Some(8));
    whole.time_min = Some(2);
    let q = vec![sized(1, 100, 1, 2, Some(60)), whole];
    let p = bf("bf_resolution=60").plan(&v, &q, 0);
    assert_eq!(outcome(&p), vec![(1, RES), (3, None)]);
    assert!(p.limits.is_empty());
    assert_eq!(p.starts[&3].end, Some(480));
}

#[test]
fn easy_versus_conservative() {
    let mut v = cluster(3, 4, 4000);
    run(&mut v, 100, Some(600), vec![node_alloc(0, 4)]);
    run(&mut v, 101, Some(1200), vec![node_alloc(1, 4)]);
    let q = vec![
        sized(1, 100, 3, 12, Some(10)),
        sized(2, 90, 2, 8, Some(10)),
        sized(3, 80, 1, 4, Some(15)),
    ];
    let easy = bf("bf_reserve_depth=1").plan(&v, &q, 0);
    assert_eq!(outcome(&easy), vec![(1, RES), (2, PRIO), (3, None)]);
    assert_eq!(start_of(&easy, 1), Some(1200));
    assert_eq!(start_of(&easy, 2), None, "EASY reserves for the first only");

    for depth in ["unlimited", "0", "2"] {
        let cons = bf(&format!("bf_reserve_depth={depth}")).plan(&v, &q, 0);
        assert_eq!(
            outcome(&cons),
            vec![(1, RES), (2, PRIO), (3, PRIO)],
            "{depth}"
        );
        assert_eq!(start_of(&cons, 1), Some(1200));
        assert_eq!(start_of(&cons, 2), Some(600), "fits before job 1");
        let nodes: Vec<usize> = cons.starts[&2].alloc.iter().map(|a| a.node).collect();
        assert_eq!(nodes, vec![0, 2]);
    }
    let mut b = bf("bf_reserve_depth=1");
    b.plan(&v, &q, 0);
    assert_eq!(
        (b.last.examined, b.last.started, b.last.reserved),
        (3, 1, 1)
    );
    // Nothing left untried; the plan has now and the running job's end
    // at least.
    assert!(!b.last.hit_max_job_test);
    assert!(b.last.table_size >= 2, "{:?}", b.last);
}

#[test]
fn window_limits_reservations() {
    let mut v = cluster(2, 4, 4000);
    run(&mut v, 100, Some(7200), vec![node_alloc(0, 4)]);
    let q = vec![sized(1, 100, 2, 8, Some(10)), sized(2, 50, 1, 4, Some(180))];
    let wide = bf("bf_window=120").plan(&v, &q, 0);
    assert_eq!(outcome(&wide), vec![(1, RES), (2, PRIO)]);
    assert_eq!(start_of(&wide, 1), Some(7200));
    let narrow = bf("bf_window=60").plan(&v, &q, 0);
    assert_eq!(outcome(&narrow), vec![(1, RES), (2, None)]);
    assert_eq!(start_of(&narrow, 1), None);
}

#[test]
fn unlimited_jobs_only_where_no_reservation_ever_comes() {
    let mut v = cluster(2, 4, 4000);
    run(&mut v, 100, Some(600), vec![node_alloc(0, 4)]);
    let q = vec![sized(1, 100, 2, 8, Some(10)), sized(2, 50, 1, 1, None)];
    let p = bf("").plan(&v, &q, 0);
    assert_eq!(outcome(&p), vec![(1, RES), (2, PRIO)]);
    assert_eq!(start_of(&p, 2), Some(1200), "after job 1, forever");
    assert_eq!(p.starts[&2].end, None);

    // With a third node the reservation leaves alone, it starts there.
    let mut v = cluster(3, 4, 4000);
    run(
        &mut v,
        100,
        Some(600),
        vec![node_alloc(0, 4), node_alloc(1, 4)],
    );
    let q = vec![
        JobView {
            exc_nodes: vec![2],
            ..sized(1, 100, 2, 8, Some(10))
        },
        sized(2, 50, 1, 1, None),
    ];
    let p = bf("").plan(&v, &q, 0);
    assert_eq!(start_of(&p, 1), Some(600));
    assert_eq!(outcome(&p), vec![(1, RES), (2, None)]);
    assert_eq!(p.starts[&2].alloc[0].node, 2);

    // A running job without a limit is never waited for.
    let mut v = cluster(1, 4, 4000);
    run(&mut v, 100, None, vec![node_alloc(0, 4)]);
    let p = bf("").plan(&v, &[sized(1, 100, 1, 1, Some(5))], 0);
    assert_eq!(outcome(&p), vec![(1, RES)]);
    assert!(p.starts.is_empty());
}

#[test]
fn resolution_rounds_planned_times_up() {
    let mut v = cluster(1, 4, 4000);
    run(&mut v, 100, Some(1001), vec![node_alloc(0, 4)]);
    let q = vec![sized(1, 100, 1, 4, Some(10))];
    for (res, want) in [(1, 1001), (60, 1020), (600, 1200)] {
        let p = bf(&format!("bf_resolution={res}")).plan(&v, &q, 0);
        assert_eq!(start_of(&p, 1), Some(want), "bf_resolution={res}");
    }
    // A job past its limit is assumed to end at the next tick.
    let p = bf("").plan(&v, &q, 5000);
    assert_eq!(start_of(&p, 1), Some(5040));
}

#[test]
fn reasons_per_partition_and_limits() {
    let mut v = cluster(2, 4, 4000);
    v.partitions.push(PartitionView {
        name: "other".into(),
        nodes: vec![1],
        ..v.partitions[0].clone()
    });
    v.partitions[0].nodes = vec![0];
    run(
        &mut v,
        100,
        Some(600),
        vec![node_alloc(0, 4), node_alloc(1, 4)],
    );
    let q = vec![
        sized(1, 100, 1, 4, Some(10)),
        sized(2, 90, 1, 4, Some(10)),
        JobView {
            partition: 1,
            ..sized(3, 80, 1, 4, Some(10))
        },
        JobView {
            hold: Some(Hold::Admin),
            ..sized(4, 200, 1, 1, Some(1))
        },
        sized(5, 70, 1, 5, Some(1)),
    ];
    let p = bf("").plan(&v, &q, 0);
    assert_eq!(
        outcome(&p),
        vec![
            (4, Some(PendingReason::JobHeldAdmin)),
            (1, RES),
            (2, PRIO),
            (3, RES),
            (5, Some(PendingReason::BadConstraints)),
        ]
    );
    assert_eq!(start_of(&p, 2), Some(1200));
    assert_eq!(start_of(&p, 3), Some(600));
}

#[test]
fn max_job_test_and_max_job_user() {
    let v = cluster(4, 4, 4000);
    let q: Vec<JobView> = (1..=4).map(|i| sized(i, 100, 1, 4, Some(5))).collect();
    // Past the limit jobs that fit now still start (Slurm's main scheduler
    // would start them), with nothing waiting ahead in their partition.
    let p = bf("bf_max_job_test=2").plan(&v, &q, 0);
    assert!(outcome(&p).iter().all(|o| o.1.is_none()));
    // Two nodes busy: job 3 is the first that waits; past the limit it gets
    // no reservation, and job 4 behind it in its partition waits too.
    let mut v2 = cluster(4, 4, 4000);
    run(
        &mut v2,
        100,
        Some(600),
        vec![node_alloc(0, 4), node_alloc(1, 4)],
    );
    let p = bf("bf_max_job_test=2").plan(&v2, &q, 0);
    assert_eq!(
        outcome(&p),
        vec![(1, None), (2, None), (3, PRIO), (4, PRIO)]
    );
    assert_eq!(start_of(&p, 3), None);
    // A job of another partition behind them that fits still starts.
    let mut v3 = cluster(3, 4, 4000);
    v3.partitions.push(PartitionView {
        name: "pods".into(),
        nodes: vec![2],
        ..v3.partitions[0].clone()
    });
    v3.partitions[0].nodes = vec![0, 1];
    run(
        &mut v3,
        100,
        Some(600),
        vec![node_alloc(0, 4), node_alloc(1, 4)],
    );
    let mut q3: Vec<JobView> = (1..=4).map(|i| sized(i, 100, 1, 4, Some(5))).collect();
    q3.push(JobView {
        partition: 1,
        ..sized(5, 1, 1, 2, Some(5))
    });
    let p = bf("bf_max_job_test=2").plan(&v3, &q3, 0);
    assert_eq!(
        outcome(&p),
        vec![(1, RES), (2, PRIO), (3, PRIO), (4, PRIO), (5, None)]
    );

    let users = [7, 7, 7, 8];
    let p = bf("bf_max_job_user=2").plan_with_users(&v, &q, &users, 0);
    assert_eq!(
        outcome(&p),
        vec![(1, None), (2, None), (3, PRIO), (4, None)]
    );
    // Without user ids there is no per-user limit.
    let p = bf("bf_max_job_user=2").plan(&v, &q, 0);
    assert!(outcome(&p).iter().all(|o| o.1.is_none()));
}

#[test]
fn exclusive_jobs_wait_for_empty_nodes() {
    let mut v = cluster(2, 4, 4000);
    run(&mut v, 100, Some(600), vec![node_alloc(0, 1)]);
    run(&mut v, 101, Some(1200), vec![node_alloc(1, 1)]);
    let q = vec![JobView {
        exclusive: true,
        ..sized(1, 100, 2, 2, Some(10))
    }];
    let p = bf("").plan(&v, &q, 0);
    assert_eq!(start_of(&p, 1), Some(1200));
    assert!(p.starts[&1]
        .alloc
        .iter()
        .all(|a| a.exclusive && a.cpus == 4));
}

#[test]
fn expected_start_is_behind_the_queue() {
    let mut v = cluster(2, 4, 4000);
    run(&mut v, 100, Some(600), vec![node_alloc(0, 4)]);
    let q = vec![sized(1, 100, 2, 8, Some(10))];
    let mut b = bf("");
    let probe = sized(9, 1, 2, 8, Some(10));
    let (t, a) = b.expected_start(&v, &q, &probe, 0).unwrap();
    assert_eq!((t, a.len()), (1200, 2));
    // It fits now on the free node before job 1's reservation.
    let small = sized(10, 1, 1, 4, Some(10));
    assert_eq!(b.expected_start(&v, &q, &small, 0).unwrap().0, 0);
    let never = sized(11, 1, 3, 12, Some(10));
    assert_eq!(b.expected_start(&v, &q, &never, 0), None);
    // sched/builtin estimates from running jobs only.
    assert_eq!(Builtin.expected_start(&v, &q, &probe, 0).unwrap().0, 600);
}

#[test]
fn builtin_plan_reports_jobs_started_now() {
    let v = cluster(1, 4, 4000);
    let q = vec![sized(1, 100, 1, 2, Some(10)), sized(2, 90, 1, 4, None)];
    let p = Builtin.plan(&v, &q, 50);
    assert_eq!(start_of(&p, 1), Some(50));
    assert_eq!(p.starts[&1].end, Some(650));
    assert_eq!(start_of(&p, 2), None);
}

#[test]
fn one_node_job_skips_leftovers_for_a_node_that_holds_it() {
    let mut v = cluster(2, 4, 4000);
    run(&mut v, 100, None, vec![node_alloc(0, 2)]);
    let j = sized(1, 100, 1, 4, Some(10));
    assert_eq!(place(&v, &j, false).unwrap()[0].node, 1);
    let p = bf("").plan(&v, &[j], 0);
    assert_eq!(p.starts[&1].alloc[0].node, 1);
}

// ---------------------------------------------------------------------
// Property tests over random clusters, running jobs and queues.

/// A small deterministic generator (the scenario is a function of a seed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
}

#[derive(Debug, Clone)]
struct Scenario {
    view: ClusterView,
    queue: Vec<JobView>,
    users: Vec<u32>,
    now: i64,
    params: String,
}

fn random_job(r: &mut Rng, id: u32, parts: usize, nodes: usize) -> JobView {
    let min_nodes = [1, 1, 1, 2, 3][r.below(5) as usize];
    let mut j = JobView {
        id,
        priority: 10 * r.range(1, 3) as u32,
        submit_time: r.range(0, 5) as i64,
        partition: r.below(parts as u64) as usize,
        min_nodes,
        max_nodes: min_nodes + r.below(2) as u32,
        num_tasks: r.range(min_nodes as u64, 4 * min_nodes as u64 + 2) as u32,
        cpus_per_task: r.range(1, 2) as u32,
        time_limit: if r.chance(15) {
            None
        } else {
            Some(r.range(1, 180) as u32)
        },
        ..JobView::default()
    };
    if r.chance(15) {
        j.ntasks_per_node = Some(r.range(1, 3) as u32);
    }
    if let (Some(limit), true) = (j.time_limit, r.chance(20)) {
        j.time_min = Some(r.range(1, u64::from(limit)) as u32);
    }
    match r.below(5) {
        0 => j.mem_per_node = Some(r.range(0, 4) * 1000),
        1 => j.mem_per_cpu = Some(r.range(1, 4) * 250),
        _ => {}
    }
    j.exclusive = r.chance(10);
    // Topology options (the flat topology ignores segments and switches).
    if r.chance(15) {
        j.segment = Some(r.range(1, 2) as u32);
        j.min_nodes = j.min_nodes.div_ceil(2) * 2;
        j.max_nodes = j.max_nodes.max(j.min_nodes);
        j.num_tasks = j.num_tasks.max(j.min_nodes);
    }
    if r.chance(15) {
        j.switches = Some(r.range(1, 2) as u32);
    }
    j.exclusive_topo = r.chance(8);
    j.contiguous = r.chance(10);
    if r.chance(10) {
        j.ntasks_per_socket = Some(r.range(1, 3) as u32);
    }
    if r.chance(10) {
        j.ntasks_per_core = Some(r.range(1, 2) as u32);
    }
    if r.chance(10) {
        let set: Vec<usize> = (0..nodes).filter(|_| r.chance(50)).collect();
        if !set.is_empty() {
            let count = r.range(1, u64::from(j.min_nodes.max(1))) as u32;
            j.node_counts = vec![(set, count)];
        }
    }
    if r.chance(10) {
        j.req_nodes = vec![r.below(nodes as u64) as usize];
    }
    if r.chance(10) {
        j.exc_nodes = vec![r.below(nodes as u64) as usize];
    }
    j
}

/// Flat most of the time; otherwise a tree of 1-3 node leaves under one
/// or two roots, or blocks of a random base size; the last node may be
/// left out of either.
fn random_topology(r: &mut Rng, n: usize) -> Topology {
    let covered = if n > 1 && r.chance(20) { n - 1 } else { n };
    match r.below(10) {
        0..=5 => Topology::Flat,
        6 | 7 => {
            let mut defs = Vec::new();
            let mut i = 0;
            while i < covered {
                let k = (r.range(1, 3) as usize).min(covered - i);
                defs.push(SwitchDef {
                    name: format!("leaf{i}"),
                    switches: vec![],
                    nodes: (i..i + k).collect(),
                });
                i += k;
            }
            let leaves: Vec<String> = defs.iter().map(|d| d.name.clone()).collect();
            let split = if leaves.len() > 1 && r.chance(20) {
                leaves.len() / 2
            } else {
                leaves.len()
            };
            defs.push(SwitchDef {
                name: "top0".into(),
                switches: leaves[..split].to_vec(),
                nodes: vec![],
            });
            if split < leaves.len() {
                defs.push(SwitchDef {
                    name: "top1".into(),
                    switches: leaves[split..].to_vec(),
                    nodes: vec![],
                });
            }
            Topology::Tree(Tree::new(&defs, n).expect("valid tree"))
        }
        _ => {
            let base = r.range(1, 3) as usize;
            let blocks: Vec<Block> = (0..covered / base)
                .map(|k| Block {
                    name: format!("b{k}"),
                    nodes: (k * base..(k + 1) * base).collect(),
                })
                .collect();
            if blocks.is_empty() {
                return Topology::Flat;
            }
            Topology::Block(Blocks::new(blocks, &[], n, |i| format!("n{i}")).expect("valid blocks"))
        }
    }
}

/// Every start and reservation stays inside the topology: nodes on it,
/// segments whole inside base blocks, and nothing else in the leaves or
/// blocks of an `--exclusive=topo` job while it runs.
fn check_topology(s: &Scenario, plan: &Plan) -> Result<(), String> {
    for (id, p) in &plan.starts {
        let j = s.queue.iter().find(|j| j.id == *id).ok_or("unknown job")?;
        let mut n: Vec<usize> = p.alloc.iter().map(|a| a.node).collect();
        n.sort_unstable();
        if let Some(nps) = j.ntasks_per_socket {
            for a in &p.alloc {
                let cap = nps * s.view.nodes[a.node].sockets.max(1);
                if a.tasks > cap && a.cpus > 0 {
                    return Err(format!(
                        "job {id}: {} tasks on node {}, cap {cap}",
                        a.tasks, a.node
                    ));
                }
            }
        }
        if let Some(k) = j.ntasks_per_core {
            // No core runs more than K of the job's tasks.
            for a in &p.alloc {
                let node = &s.view.nodes[a.node];
                let cores = a.cpus / node.core_cpus();
                if a.tasks > cores.saturating_mul(k) {
                    return Err(format!(
                        "job {id}: {} tasks on {cores} cores of node {}, {k} a core",
                        a.tasks, a.node
                    ));
                }
            }
        }
        for (set, count) in &j.node_counts {
            let have = n.iter().filter(|x| set.contains(x)).count();
            if have < *count as usize {
                return Err(format!("job {id}: {have} of {set:?}, wanted {count}"));
            }
        }
        let flat = s.view.topologies[0].is_flat();
        if flat && j.contiguous && n.windows(2).any(|w| w[1] != w[0] + 1) {
            return Err(format!("job {id}: nodes {n:?} are not contiguous"));
        }
    }
    let topo = &s.view.topologies[0];
    let (unit_of, units): (Vec<Option<usize>>, Vec<Vec<usize>>) = match topo {
        Topology::Flat => return Ok(()),
        Topology::Tree(t) => (
            t.leaf_of.clone(),
            t.switches.iter().map(|x| x.nodes.clone()).collect(),
        ),
        Topology::Block(b) => (
            b.block_of.clone(),
            b.blocks.iter().map(|x| x.nodes.clone()).collect(),
        ),
    };
    let mut holders: Vec<(u32, i64, i64, Vec<usize>)> = s
        .view
        .running
        .iter()
        .map(|r| {
            let end = r.end.map_or(FOREVER, |e| e.max(s.now + 1));
            (r.id, s.now, end, r.alloc.iter().map(|a| a.node).collect())
        })
        .collect();
    for (id, p) in &plan.starts {
        holders.push((
            *id,
            p.start,
            p.end.unwrap_or(FOREVER),
            p.alloc.iter().map(|a| a.node).collect(),
        ));
    }
    for (id, p) in &plan.starts {
        let j = s.queue.iter().find(|j| j.id == *id).ok_or("unknown job")?;
        let mut used: Vec<usize> = Vec::new();
        for a in &p.alloc {
            let u = unit_of[a.node]
                .ok_or(format!("job {id} on node {} outside the topology", a.node))?;
            used.push(u);
        }
        if let (Topology::Block(_), Some(seg)) = (topo, j.segment) {
            for u in &used {
                let c = used.iter().filter(|x| *x == u).count();
                if c % seg as usize != 0 {
                    return Err(format!("job {id}: {c} nodes in block {u}, segment {seg}"));
                }
            }
        }
        if j.exclusive_topo {
            let end = p.end.unwrap_or(FOREVER);
            for (other, os, oe, nodes) in &holders {
                if other == id || *oe <= p.start || *os >= end {
                    continue;
                }
                if nodes
                    .iter()
                    .any(|n| used.iter().any(|u| units[*u].contains(n)))
                {
                    return Err(format!(
                        "job {other} inside the exclusive units of job {id}"
                    ));
                }
            }
        }
    }
    Ok(())
}

fn scenario(seed: u64) -> Scenario {
    let mut r = Rng(seed | 1);
    let n = r.range(1, 8) as usize;
    let mut view = ClusterView {
        nodes: (0..n)
            .map(|i| NodeView {
                name: format!("n{i}"),
                cpus: [2, 4, 8, 16][r.below(4) as usize],
                mem: [2000, 8000, 16000][r.below(3) as usize],
                available: r.chance(90),
                weight: r.range(1, 3) as u32,
                threads_per_core: [1, 1, 2][r.below(3) as usize],
                sockets: [1, 2][r.below(2) as usize],
                ..NodeView::default()
            })
            .collect(),
        ..ClusterView::default()
    };
    view.topologies = Arc::new(vec![random_topology(&mut r, n)]);
    for pi in 0..r.range(1, 2) {
        let mut nodes: Vec<usize> = (0..n).filter(|_| r.chance(70)).collect();
        if nodes.is_empty() {
            nodes.push(r.below(n as u64) as usize);
        }
        view.partitions.push(PartitionView {
            name: format!("p{pi}"),
            nodes,
            up: r.chance(95),
            max_time: r.chance(10).then_some(120),
            max_nodes: r.chance(15).then(|| r.range(1, 3) as u32),
            exclusive: r.chance(10),
            priority_tier: r.range(1, 2) as u32,
            def_mem_per_cpu: r.chance(20).then_some(500),
            ..Default::default()
        });
    }
    let now = 10_000 + r.below(1000) as i64;
    let parts = view.partitions.len();
    for id in 1000..1000 + r.below(16) as u32 {
        let j = random_job(&mut r, id, parts, n);
        if let Ok(mut alloc) = place(&view, &j, false) {
            let end = (!r.chance(10)).then(|| now - 100 + r.below(7300) as i64);
            alloc.extend(view.held_beside(&j, &alloc));
            view.consume(&alloc);
            view.running.push(RunningJob {
                id,
                end,
                alloc,
                priority: j.priority,
                partition: j.partition,
            });
        }
    }
    let m = r.below(16) as u32;
    let mut queue: Vec<JobView> = Vec::new();
    for id in 1..=m {
        // Often the same shape as an earlier job, one size up or down (what
        // the pass's shape memo keys on).
        let j = match queue.len() {
            k if k > 0 && r.chance(35) => {
                let mut j = queue[r.below(k as u64) as usize].clone();
                j.id = id;
                j.priority = 10 * r.range(1, 3) as u32;
                let grow = r.chance(50);
                let step = |x: u32| {
                    if grow {
                        x + 1
                    } else {
                        x.saturating_sub(1).max(1)
                    }
                };
                j.num_tasks = step(j.num_tasks);
                j.min_nodes = step(j.min_nodes).min(j.num_tasks);
                j.max_nodes = j.max_nodes.max(j.min_nodes);
                j
            }
            _ => random_job(&mut r, id, parts, n),
        };
        queue.push(j);
    }
    for j in &mut queue {
        if r.chance(5) {
            j.begin_time = Some(now + 100);
        }
        if r.chance(5) {
            j.hold = Some(Hold::User);
        }
    }
    let users = queue.iter().map(|_| r.below(3) as u32).collect();
    let params = format!(
        "bf_resolution={},bf_window={},bf_reserve_depth={},bf_max_job_test={},bf_max_job_user={}",
        [1, 60, 300][r.below(3) as usize],
        [5, 300, 1440][r.below(3) as usize],
        ["1", "2", "unlimited"][r.below(3) as usize],
        [3, 500][r.below(2) as usize],
        [0, 2][r.below(2) as usize],
    );
    Scenario {
        view,
        queue,
        users,
        now,
        params,
    }
}

/// Something holding part of a node over `[start, end)`.
#[derive(Debug)]
struct Held {
    who: u32,
    start: i64,
    end: i64,
    alloc: NodeAlloc,
}

/// Independent of the plan's own bookkeeping: lay every running job, every
/// start and every reservation on the nodes over its true interval and
/// check no node is ever over capacity, and a node held whole is held by
/// one job only.
fn check_capacity(s: &Scenario, plan: &Plan) -> Result<(), String> {
    let mut held: Vec<Held> = Vec::new();
    for r in &s.view.running {
        let end = r.end.map_or(FOREVER, |e| e.max(s.now + 1));
        for a in &r.alloc {
            held.push(Held {
                who: r.id,
                start: s.now,
                end,
                alloc: a.clone(),
            });
        }
    }
    for (id, p) in &plan.starts {
        for a in &p.alloc {
            held.push(Held {
                who: *id,
                start: p.start,
                end: p.end.unwrap_or(FOREVER),
                alloc: a.clone(),
            });
        }
    }
    for (i, n) in s.view.nodes.iter().enumerate() {
        let on: Vec<&Held> = held.iter().filter(|h| h.alloc.node == i).collect();
        for h in &on {
            if plan.starts.contains_key(&h.who) && !n.available {
                return Err(format!("job {} planned on unavailable node {i}", h.who));
            }
        }
        for t in on.iter().map(|h| h.start) {
            let live: Vec<&&Held> = on.iter().filter(|h| h.start <= t && t < h.end).collect();
            let cpus: u64 = live.iter().map(|h| h.alloc.cpus as u64).sum();
            let mem: u64 = live.iter().map(|h| h.alloc.mem).sum();
            if cpus > n.cpus as u64 || mem > n.mem {
                return Err(format!(
                    "node {i} at {t}: {cpus}/{} cpus {mem}/{} MiB by {:?}",
                    n.cpus,
                    n.mem,
                    live.iter().map(|h| h.who).collect::<Vec<_>>()
                ));
            }
            if live.len() > 1 && live.iter().any(|h| h.alloc.exclusive) {
                return Err(format!(
                    "node {i} at {t}: held whole but shared by {:?}",
                    live.iter().map(|h| h.who).collect::<Vec<_>>()
                ));
            }
        }
    }
    Ok(())
}

/// Every decision respects the job's request: one per job, nodes of its
/// partition, required ones in, excluded ones out, starts match the plan.
fn check_decisions(s: &Scenario, plan: &Plan) -> Result<(), String> {
    if plan.decisions.len() != s.queue.len() {
        return Err("not one decision per job".into());
    }
    for d in &plan.decisions {
        let Decision::Start { job, alloc } = d else {
            continue;
        };
        let j = s.queue.iter().find(|j| j.id == *job).ok_or("unknown job")?;
        let part = &s.view.partitions[j.partition];
        if plan.starts.get(job).map(|p| (p.start, &p.alloc)) != Some((s.now, alloc)) {
            return Err(format!("job {job}: start not in the plan"));
        }
        for a in alloc {
            if !part.nodes.contains(&a.node) || j.exc_nodes.contains(&a.node) {
                return Err(format!("job {job} on node {} outside its request", a.node));
            }
        }
        if j.req_nodes
            .iter()
            .any(|r| !alloc.iter().any(|a| a.node == *r))
        {
            return Err(format!("job {job} misses a required node"));
        }
    }
    for (id, p) in &plan.starts {
        let j = s.queue.iter().find(|j| j.id == *id).ok_or("unknown job")?;
        // A limit lowered toward `--time-min` only for a job starting now.
        let limit = match plan.limits.get(id) {
            Some(&m) if p.start == s.now && j.time_min.is_some_and(|t| t <= m) => Some(m),
            Some(_) => return Err(format!("job {id}: limit lowered wrongly")),
            None => j.time_limit,
        };
        if j.time_limit.is_some_and(|l| limit.is_some_and(|m| m > l)) {
            return Err(format!("job {id}: limit raised"));
        }
        let want = limit.filter(|m| *m > 0).map(|m| p.start + m as i64 * 60);
        if p.end != want || p.start < s.now {
            return Err(format!("job {id}: planned over the wrong interval"));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// (a) No core or MiB is given twice at any time, and (b) no backfilled
    /// job breaks a reservation: every reserved start stays feasible next to
    /// everything started in the pass.
    #[test]
    fn never_over_capacity_and_reservations_hold(seed in any::<u64>()) {
        let s = scenario(seed);
        let plan = bf(&s.params).plan_with_users(&s.view, &s.queue, &s.users, s.now);
        check_decisions(&s, &plan).map_err(TestCaseError::fail)?;
        check_capacity(&s, &plan).map_err(TestCaseError::fail)?;
        check_topology(&s, &plan).map_err(TestCaseError::fail)?;
    }

    /// Every reservation is the earliest start its job had when it was made:
    /// replaying the pass up to that job gives the same time.
    #[test]
    fn reservations_are_earliest_in_order(seed in any::<u64>()) {
        let s = scenario(seed);
        let mut b = bf(&s.params);
        let (plan, _) = b.plan_pass(&s.view, &s.queue, None, s.now);
        let order = queue_order(&s.view, &s.queue);
        for (k, &i) in order.iter().enumerate() {
            let j = &s.queue[i];
            let Some(ps) = plan.starts.get(&j.id) else { continue };
            if ps.start == s.now {
                continue;
            }
            let before: Vec<JobView> = order[..k].iter().map(|&x| s.queue[x].clone()).collect();
            let (_, avail) = b.plan_pass(&s.view, &before, None, s.now);
            let latest = s.now + b.params.window as i64 * 60;
            let got = avail.earliest_start(&s.view, j, s.now, latest).map(|x| x.0);
            prop_assert_eq!(got, Some(ps.start), "job {}", j.id);
        }
    }

    /// On a fresh plan, "fits now" is exactly cons_tres placement now.
    #[test]
    fn fits_now_agrees_with_select(seed in any::<u64>()) {
        let s = scenario(seed);
        let avail = Availability::new(&s.view, s.now, 60);
        for j in &s.queue {
            prop_assert_eq!(avail.fits_now(&s.view, j), place(&s.view, j, false).ok(), "job {:?}", j);
        }
    }

    /// The indexed search finds what looking at every node at every
    /// breakpoint finds, on plans full of reservations, for every horizon.
    #[test]
    fn search_agrees_with_brute_force(seed in any::<u64>()) {
        let s = scenario(seed);
        let mut b = bf(&s.params);
        let latest = s.now + b.params.window as i64 * 60;
        let (_, mut avail) = b.plan_pass(&s.view, &s.queue, None, s.now);
        let shortest = s.queue.iter().map(|j| duration(j).unwrap_or(FOREVER)).min().unwrap_or(0);
        for (horizon, short) in [(latest, shortest), (FOREVER, 0), (latest, 0), (FOREVER, 3600)] {
            avail.set_horizon(horizon, short);
            for j in &s.queue {
                let Ok(p) = prepare(&s.view, j) else { continue };
                let slow = avail.earliest_slow(&s.view, &p, s.now, horizon);
                let fast = avail.earliest_prepared(&s.view, &p, s.now, horizon, true);
                prop_assert_eq!(&fast, &slow, "job {:?}", j);
                let now = avail.fits_now_prepared(&s.view, &p);
                prop_assert_eq!(&now, &slow.clone().filter(|x| x.0 == s.now).map(|x| x.1), "job {:?}", j);
                if now.is_none() {
                    // How the pass searches for a job that does not fit now.
                    let later = avail.earliest_prepared(&s.view, &p, s.now, horizon, false);
                    prop_assert_eq!(later, slow, "job {:?}", j);
                }
            }
        }
    }

    /// The shape memo only saves work: without it the pass decides and
    /// plans exactly the same.
    #[test]
    fn shape_memo_changes_nothing(seed in any::<u64>()) {
        let s = scenario(seed);
        let with = bf(&s.params).plan_with_users(&s.view, &s.queue, &s.users, s.now);
        NO_SHAPE_MEMO.with(|c| c.set(true));
        let without = bf(&s.params).plan_with_users(&s.view, &s.queue, &s.users, s.now);
        NO_SHAPE_MEMO.with(|c| c.set(false));
        prop_assert_eq!(with, without);
    }

    /// (c) Same state, queue and now → same plan, whatever the queue's order
    /// and however often it runs.
    #[test]
    fn deterministic(seed in any::<u64>(), rot in 0usize..16) {
        let s = scenario(seed);
        let a = bf(&s.params).plan_with_users(&s.view, &s.queue, &s.users, s.now);
        let b = bf(&s.params).plan_with_users(&s.view, &s.queue, &s.users, s.now);
        prop_assert_eq!(&a, &b);
        let mut pairs: Vec<(JobView, u32)> = s.queue.iter().cloned().zip(s.users.iter().copied()).collect();
        pairs.reverse();
        let len = pairs.len().max(1);
        pairs.rotate_left(rot % len);
        let (q, u): (Vec<JobView>, Vec<u32>) = pairs.into_iter().unzip();
        let c = bf(&s.params).plan_with_users(&s.view, &q, &u, s.now);
        prop_assert_eq!(&a, &c);
    }

    /// Garbage in never panics.
    #[test]
    fn no_panics_on_odd_input(seed in any::<u64>()) {
        let mut s = scenario(seed);
        let mut r = Rng(seed ^ 0x9e37_79b9_7f4a_7c15 | 1);
        for j in &mut s.queue {
            match r.below(6) {
                0 => j.partition = 7,
                1 => j.req_nodes.push(99),
                2 => j.num_tasks = 0,
                3 => j.time_limit = Some(u32::MAX),
                4 => j.mem_per_cpu = Some(u64::MAX),
                _ => j.min_nodes = u32::MAX,
            }
        }
        if let Some(r0) = s.view.running.first_mut() {
            r0.alloc.push(node_alloc(42, 3));
            r0.end = Some(i64::MAX);
        }
        let mut b = bf(&s.params);
        let _ = b.plan(&s.view, &s.queue, s.now);
        let _ = b.plan(&s.view, &s.queue, i64::MAX - 10);
        let _ = b.plan(&s.view, &s.queue, i64::MIN + 10);
        if let Some(j) = s.queue.first() {
            let _ = b.expected_start(&s.view, &s.queue[1..], j, s.now);
        }
    }
}

/// `n` nodes of 4 cores with two GPUs each (kind 0).
fn gpu_cluster(n: usize) -> ClusterView {
    let mut v = cluster(n, 4, 4000);
    for node in &mut v.nodes {
        node.gres[0] = 2;
    }
    v
}

fn gpus(mut j: JobView, count: u16) -> JobView {
    j.gres = vec![crate::view::GresReq { mask: 1, count }];
    j
}

#[test]
fn gpus_are_counted_per_node_and_never_given_twice() {
    let mut v = gpu_cluster(2);
    let a = place(&v, &gpus(job(1), 2), false).unwrap();
    assert_eq!((a[0].node, a[0].gres[0]), (0, 2));
    v.consume(&a);
    let b = place(&v, &gpus(job(2), 1), false).unwrap();
    assert_eq!((b[0].node, b[0].gres[0]), (1, 1));
    v.consume(&b);
    assert_eq!(
        place(&v, &gpus(job(3), 2), false),
        Err(crate::select::SelectFail::Busy)
    );
    assert_eq!(
        place(&v, &gpus(job(4), 3), true),
        Err(crate::select::SelectFail::Never)
    );
    // A job without GPUs still fits next to them.
    assert!(place(&v, &job(5), false).is_ok());
    v.release(&a);
    assert!(place(&v, &gpus(job(3), 2), false).is_ok());
}

#[test]
fn backfill_plans_gpu_jobs_after_the_gpus_free_up() {
    let mut v = gpu_cluster(1);
    // One core but both GPUs busy until t=600.
    let mut hold = node_alloc(0, 1);
    hold.gres[0] = 2;
    run(&mut v, 100, Some(600), vec![hold]);
    let q = vec![
        gpus(sized(1, 100, 1, 1, Some(60)), 1),
        sized(2, 50, 1, 2, Some(5)),
        gpus(sized(3, 40, 1, 1, Some(5)), 1),
    ];
    let p = bf("").plan(&v, &q, 0);
    assert_eq!(outcome(&p), vec![(1, RES), (2, None), (3, PRIO)]);
    assert_eq!(start_of(&p, 1), Some(600));
    assert!(
        start_of(&p, 3).unwrap() >= 600,
        "never before the GPUs are back"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Whatever the queue, a backfill pass never hands out more GPUs on a
    /// node than it has.
    #[test]
    fn no_gpu_given_twice(reqs in proptest::collection::vec((0u16..3, 1u32..3, 1u32..4), 1..20)) {
        let mut v = gpu_cluster(3);
        let q: Vec<JobView> = reqs
            .iter()
            .enumerate()
            .map(|(i, &(g, n, t))| gpus(sized(i as u32 + 1, 100 - i as u32, n, t.max(n), Some(10)), g))
            .map(|mut j| { if j.gres[0].count == 0 { j.gres.clear(); } j })
            .collect();
        let p = bf("").plan(&v, &q, 0);
        for d in &p.decisions {
            if let Decision::Start { alloc, .. } = d {
                v.consume(alloc);
            }
        }
        for n in &v.nodes {
            prop_assert!(n.alloc_gres[0] <= n.gres[0], "{:?}", n);
            prop_assert!(n.alloc_cpus <= n.cpus);
        }
    }
}
