use super::*;
use crate::backfill::{Backfill, BackfillParams};
use crate::sched::{Builtin, Decision, Scheduler};
use crate::select::place;
use crate::select::tests::{cluster, job};
use crate::view::{ClusterView, JobView};
use std::sync::Arc;

fn sw(name: &str, switches: &[&str], nodes: &[usize]) -> SwitchDef {
    SwitchDef {
        name: name.into(),
        switches: switches.iter().map(|s| s.to_string()).collect(),
        nodes: nodes.to_vec(),
    }
}

/// n1-n2 on leaf s1, n3-n5 on leaf s2, both under s3; n6 on no switch.
fn tree_cluster() -> ClusterView {
    let mut v = cluster(6, 4, 4000);
    let t = Tree::new(
        &[
            sw("s1", &[], &[0, 1]),
            sw("s2", &[], &[2, 3, 4]),
            sw("s3", &["s1", "s2"], &[]),
        ],
        6,
    )
    .unwrap();
    v.topologies = Arc::new(vec![Topology::Tree(t)]);
    v
}

fn nodes_of(a: &[NodeAlloc]) -> Vec<usize> {
    let mut n: Vec<usize> = a.iter().map(|x| x.node).collect();
    n.sort_unstable();
    n
}

fn nodes_job(id: u32, n: u32) -> JobView {
    JobView {
        min_nodes: n,
        max_nodes: n,
        num_tasks: n,
        ntasks_per_node: Some(1),
        ..job(id)
    }
}

#[test]
fn tree_levels_and_best_fit() {
    let v = tree_cluster();
    let t = match &v.topologies[0] {
        Topology::Tree(t) => t.clone(),
        _ => unreachable!(),
    };
    assert_eq!(
        t.switches.iter().map(|s| s.level).collect::<Vec<_>>(),
        vec![0, 0, 1]
    );
    assert_eq!(t.switches[2].nodes, vec![0, 1, 2, 3, 4]);
    // Two nodes: the tighter leaf (s1) rather than s2.
    assert_eq!(
        nodes_of(&place(&v, &nodes_job(1, 2), false).unwrap()),
        [0, 1]
    );
    // Three: only s2 holds them alone.
    assert_eq!(
        nodes_of(&place(&v, &nodes_job(2, 3), false).unwrap()),
        [2, 3, 4]
    );
    // Four: the top switch, the fuller leaf first.
    assert_eq!(
        nodes_of(&place(&v, &nodes_job(3, 4), false).unwrap()),
        [0, 2, 3, 4]
    );
    // Six: n6 is on no switch, so never.
    assert_eq!(place(&v, &nodes_job(4, 6), true), Err(SelectFail::Never));
    // --switches=1: four nodes never fit one leaf.
    let one_leaf = JobView {
        switches: Some(1),
        ..nodes_job(5, 4)
    };
    assert_eq!(place(&v, &one_leaf, false), Err(SelectFail::Busy));
    let two_leaves = JobView {
        switches: Some(2),
        ..nodes_job(6, 4)
    };
    assert!(place(&v, &two_leaves, false).is_ok());
}

#[test]
fn tree_follows_what_is_free() {
    let mut v = tree_cluster();
    // s2 half busy: a two-node job still prefers a single leaf.
    v.nodes[2].alloc_cpus = 4;
    v.nodes[3].alloc_cpus = 4;
    assert_eq!(
        nodes_of(&place(&v, &nodes_job(1, 2), false).unwrap()),
        [0, 1]
    );
    v.nodes[0].alloc_cpus = 4;
    // One free node per leaf: the job spans them through s3.
    assert_eq!(
        nodes_of(&place(&v, &nodes_job(2, 2), false).unwrap()),
        [1, 4]
    );
}

#[test]
fn tree_definition_errors() {
    assert!(matches!(
        Tree::new(&[sw("a", &["b"], &[]), sw("b", &["a"], &[])], 1),
        Err(TopoError::Cycle(_))
    ));
    assert_eq!(
        Tree::new(&[sw("a", &["zz"], &[])], 1),
        Err(TopoError::UnknownSwitch {
            parent: "a".into(),
            child: "zz".into()
        })
    );
    assert!(matches!(
        Tree::new(&[sw("a", &[], &[0]), sw("a", &[], &[1])], 2),
        Err(TopoError::DuplicateSwitch(_))
    ));
    assert!(matches!(
        Tree::new(&[sw("a", &[], &[])], 2),
        Err(TopoError::EmptySwitch(_))
    ));
}

fn blk(name: &str, nodes: std::ops::Range<usize>) -> Block {
    Block {
        name: name.into(),
        nodes: nodes.collect(),
    }
}

/// Blocks b1 = n1-n4, b2 = n5-n8; levels 4 and 8.
fn block_cluster() -> ClusterView {
    let mut v = cluster(8, 4, 4000);
    let b = Blocks::new(vec![blk("b1", 0..4), blk("b2", 4..8)], &[], 8, |i| {
        format!("n{}", i + 1)
    })
    .unwrap();
    assert_eq!(b.sizes, vec![4, 8]);
    v.topologies = Arc::new(vec![Topology::Block(b)]);
    v
}

#[test]
fn block_levels() {
    let mut v = block_cluster();
    assert_eq!(
        nodes_of(&place(&v, &nodes_job(1, 3), false).unwrap()),
        [0, 1, 2]
    );
    // b1 has one node taken: four nodes go to b2 alone.
    v.nodes[0].alloc_cpus = 4;
    assert_eq!(
        nodes_of(&place(&v, &nodes_job(2, 4), false).unwrap()),
        [4, 5, 6, 7]
    );
    // Six nodes need the level-8 block: all of b2, then two of b1.
    assert_eq!(
        nodes_of(&place(&v, &nodes_job(3, 6), false).unwrap()),
        [1, 2, 4, 5, 6, 7]
    );
    // A 3-node job fits b1's three free nodes (best fit beats empty b2).
    assert_eq!(
        nodes_of(&place(&v, &nodes_job(4, 3), false).unwrap()),
        [1, 2, 3]
    );
}

#[test]
fn segments_stay_inside_base_blocks() {
    // BlockSizes=4 only: larger jobs may use any blocks.
    let mut v = cluster(12, 4, 4000);
    let b = Blocks::new(
        vec![blk("b1", 0..4), blk("b2", 4..8), blk("b3", 8..12)],
        &[4],
        12,
        |i| format!("n{}", i + 1),
    )
    .unwrap();
    v.topologies = Arc::new(vec![Topology::Block(b)]);
    // b1: three free nodes; b2: four; b3: none.
    v.nodes[0].alloc_cpus = 4;
    for i in 8..12 {
        v.nodes[i].alloc_cpus = 4;
    }
    // Without segments, six nodes: all of b2, then two of b1.
    let plain = place(&v, &nodes_job(1, 6), false).unwrap();
    assert_eq!(nodes_of(&plain), [1, 2, 4, 5, 6, 7]);
    // --segment=3: three from each block.
    let seg = JobView {
        segment: Some(3),
        ..nodes_job(2, 6)
    };
    assert_eq!(
        nodes_of(&place(&v, &seg, false).unwrap()),
        [1, 2, 3, 4, 5, 6]
    );
    // Node counts that are not whole segments never fit; nor do segments
    // larger than a base block.
    let odd = JobView {
        segment: Some(2),
        ..nodes_job(3, 3)
    };
    assert_eq!(place(&v, &odd, true), Err(SelectFail::Never));
    let big = JobView {
        segment: Some(8),
        ..nodes_job(4, 8)
    };
    assert_eq!(place(&v, &big, true), Err(SelectFail::Never));
    // Two segments of 3 with b1 down to two free nodes: only b2 has a
    // whole segment, so the job waits.
    v.nodes[1].alloc_cpus = 4;
    assert_eq!(place(&v, &seg, false), Err(SelectFail::Busy));
    // Enforced level: a 4-node job waits for a whole free base block even
    // though four nodes are free across blocks... b2 is whole, so it goes there.
    assert_eq!(
        nodes_of(&place(&v, &nodes_job(5, 4), false).unwrap()),
        [4, 5, 6, 7]
    );
    v.nodes[4].alloc_cpus = 4;
    assert_eq!(place(&v, &nodes_job(6, 4), false), Err(SelectFail::Busy));
}

#[test]
fn exclusive_topo_holds_whole_blocks() {
    let v = block_cluster();
    let excl = JobView {
        exclusive_topo: true,
        ..nodes_job(1, 1)
    };
    let small = nodes_job(2, 1);
    let q = vec![
        JobView {
            priority: 200,
            ..excl.clone()
        },
        small,
    ];
    let d = Builtin.schedule(&v, &q, 0);
    let started: Vec<(u32, Vec<usize>)> = d
        .iter()
        .filter_map(|d| match d {
            Decision::Start { job, alloc } => Some((*job, nodes_of(alloc))),
            _ => None,
        })
        .collect();
    assert_eq!(started, vec![(1, vec![0]), (2, vec![4])]);
    let held = v.held_beside(
        &excl,
        &[NodeAlloc {
            node: 0,
            cpus: 1,
            tasks: 1,
            ..Default::default()
        }],
    );
    assert_eq!(nodes_of(&held), [1, 2, 3]);
    assert!(held.iter().all(|h| h.exclusive && h.cpus == 0));
    // A block with anything running refuses an exclusive-topo job.
    let mut busy = block_cluster();
    busy.nodes[1].alloc_cpus = 1;
    assert_eq!(nodes_of(&place(&busy, &excl, false).unwrap()), [4]);
    busy.nodes[5].alloc_cpus = 1;
    assert_eq!(place(&busy, &excl, false), Err(SelectFail::Busy));
}

#[test]
fn backfill_plans_inside_blocks() {
    let mut v = block_cluster();
    // b1 is busy until t=600 on one node, b2 on two until t=1200.
    for (node, end) in [(0usize, 600i64), (4, 1200), (5, 1200)] {
        let alloc = vec![NodeAlloc {
            node,
            cpus: 4,
            tasks: 4,
            ..Default::default()
        }];
        v.consume(&alloc);
        v.running.push(crate::view::RunningJob {
            id: 100 + node as u32,
            end: Some(end),
            alloc,
            ..Default::default()
        });
    }
    // Four nodes must share one base block: b1 frees at 600, b2 at 1200.
    let big = JobView {
        time_limit: Some(10),
        exclusive: true,
        ..nodes_job(1, 4)
    };
    // Two segments of two: b1's three free nodes give a pair, b2's two
    // free nodes the other; it ends at 600, when job 1 begins.
    let seg = JobView {
        segment: Some(2),
        time_limit: Some(10),
        exclusive: true,
        priority: 50,
        ..nodes_job(2, 4)
    };
    // Not in segments, four nodes cannot start now at level 4 either.
    let mut bf = Backfill::new(BackfillParams {
        resolution: 60,
        ..Default::default()
    });
    let plan = bf.plan(&v, &[big, seg], 0);
    let s1 = &plan.starts[&1];
    assert_eq!((s1.start, nodes_of(&s1.alloc)), (600, vec![0, 1, 2, 3]));
    // Level 4 is enforced for the segment job too: no base block has two
    // pairs now, so it is planned at 1200, when both blocks are free again
    // (the tie goes to the first block).
    let s2 = &plan.starts[&2];
    assert_eq!((s2.start, nodes_of(&s2.alloc)), (1200, vec![0, 1, 2, 3]));
}

#[test]
fn block_definition_errors() {
    let name = |i: usize| format!("n{}", i + 1);
    assert!(matches!(
        Blocks::new(vec![blk("a", 0..2), blk("b", 1..3)], &[], 3, name),
        Err(TopoError::NodeInTwoBlocks { .. })
    ));
    assert_eq!(
        Blocks::new(vec![blk("a", 0..2)], &[2, 6], 2, name),
        Err(TopoError::BadBlockSizes("2,6".into()))
    );
    assert!(matches!(
        Blocks::new(vec![blk("a", 0..2), blk("b", 2..3)], &[2], 3, name),
        Err(TopoError::SmallBlock { .. })
    ));
    assert!(matches!(
        Blocks::new(vec![blk("a", 0..2), blk("a", 2..4)], &[], 4, name),
        Err(TopoError::DuplicateBlock(_))
    ));
}

#[test]
fn contiguous_takes_the_shortest_run_that_holds_the_job() {
    let mut v = cluster(8, 4, 4000);
    // Free runs: n1-n3 (three), n5-n6 (two), n8 (one).
    v.nodes[3].alloc_cpus = 4;
    v.nodes[6].alloc_cpus = 4;
    let two = JobView {
        contiguous: true,
        ..nodes_job(1, 2)
    };
    assert_eq!(nodes_of(&place(&v, &two, false).unwrap()), [4, 5]);
    let three = JobView {
        contiguous: true,
        ..nodes_job(2, 3)
    };
    assert_eq!(nodes_of(&place(&v, &three, false).unwrap()), [0, 1, 2]);
    let four = JobView {
        contiguous: true,
        ..nodes_job(3, 4)
    };
    assert_eq!(place(&v, &four, false), Err(SelectFail::Busy));
    // Without --contiguous four nodes fit.
    assert!(place(&v, &nodes_job(4, 4), false).is_ok());
    // A required node picks its run.
    let req = JobView {
        contiguous: true,
        req_nodes: vec![7],
        ..nodes_job(5, 1)
    };
    assert_eq!(nodes_of(&place(&v, &req, false).unwrap()), [7]);
}

#[test]
fn feature_counts_hold_on_the_allocation() {
    let mut v = cluster(6, 4, 4000);
    // "gpu" nodes: n4-n6, the last three by preference order.
    let gpu = vec![3, 4, 5];
    let j = JobView {
        node_counts: vec![(gpu.clone(), 2)],
        ..nodes_job(1, 3)
    };
    // Two of the three nodes come from the gpu set, the first free ones.
    assert_eq!(nodes_of(&place(&v, &j, false).unwrap()), [0, 3, 4]);
    // With only one gpu node free the job waits.
    v.nodes[3].alloc_cpus = 4;
    v.nodes[4].alloc_cpus = 4;
    assert_eq!(place(&v, &j, false), Err(SelectFail::Busy));
    // More than the job's nodes can never be.
    let too_many = JobView {
        node_counts: vec![(gpu, 4)],
        ..nodes_job(2, 3)
    };
    assert_eq!(place(&v, &too_many, true), Err(SelectFail::Never));
}
