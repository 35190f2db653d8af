//! A busy cluster and a deep queue for the scheduler benchmarks, generated
//! from a seed (same seed, same workload).
//!
//! Nodes: 32 cores, 128 GiB, one partition. About 90% of the cores are held
//! by running jobs (a quarter of the nodes by whole-node jobs of 1 to 8
//! nodes, the rest by smaller jobs) that end at random times over the next
//! day. The queue mixes small
//! single-node jobs, whole-node jobs of 1 to 32 nodes and a few wide
//! exclusive ones, with time limits from 30 minutes to a day.

use slurm_plugins::{ClusterView, JobView, NodeAlloc, NodeView, PartitionView, RunningJob};

pub const NOW: i64 = 1_700_000_000;
const CPUS: u32 = 32;
const MEM: u64 = 128_000;
const LIMITS: [u32; 7] = [30, 60, 120, 240, 480, 720, 1440];

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
}

fn node_alloc(node: usize, cpus: u32, mem: u64) -> NodeAlloc {
    NodeAlloc {
        node,
        cpus,
        mem,
        tasks: cpus,
        exclusive: false,
        gres: Default::default(),
    }
}

/// `nodes` nodes with their running jobs, and `pending` queued jobs.
pub fn workload(nodes: usize, pending: usize, seed: u64) -> (ClusterView, Vec<JobView>) {
    let mut r = Rng(seed | 1);
    let mut view = ClusterView {
        nodes: (0..nodes)
            .map(|i| NodeView {
                name: format!("n{i:05}"),
                cpus: CPUS,
                mem: MEM,
                available: true,
                weight: 1,
                ..NodeView::default()
            })
            .collect(),
        partitions: vec![PartitionView {
            name: "batch".into(),
            nodes: (0..nodes).collect(),
            up: true,
            priority_tier: 1,
            ..PartitionView::default()
        }],
        running: Vec::new(),
        ..Default::default()
    };
    let mut id = 1_000_000u32;
    let mut i = 0;
    while i < nodes {
        id += 1;
        let end = Some(NOW + r.range(60, 86_400) as i64);
        if r.below(4) == 0 {
            // A whole-node job over a few nodes.
            let k = (r.range(1, 8) as usize).min(nodes - i);
            let alloc: Vec<NodeAlloc> = (i..i + k).map(|n| node_alloc(n, CPUS, 8000)).collect();
            view.consume(&alloc);
            view.running.push(RunningJob {
                id,
                end,
                alloc,
                ..RunningJob::default()
            });
            i += k;
            continue;
        }
        // Smaller jobs filling 24 to 32 of the node's cores.
        let target = r.range(24, 32) as u32;
        let mut used = 0;
        while used < target {
            let c = (r.range(2, 16) as u32).min(target - used);
            used += c;
            id += 1;
            let alloc = vec![node_alloc(i, c, 2000 * c as u64)];
            view.consume(&alloc);
            view.running.push(RunningJob {
                id,
                end: Some(NOW + r.range(60, 86_400) as i64),
                alloc,
                ..RunningJob::default()
            });
        }
        i += 1;
    }

    let queue = (0..pending)
        .map(|k| {
            let kind = r.below(100);
            let time_limit = Some(LIMITS[r.below(LIMITS.len() as u64) as usize]);
            let base = JobView {
                id: k as u32 + 1,
                priority: 1_000_000 - (r.below(pending as u64 * 4) as u32),
                submit_time: NOW - 86_400 + r.below(86_400) as i64,
                partition: 0,
                cpus_per_task: 1,
                time_limit,
                ..JobView::default()
            };
            match kind {
                0..=49 => {
                    let tasks = r.range(1, 16) as u32;
                    JobView {
                        min_nodes: 1,
                        max_nodes: 1,
                        num_tasks: tasks,
                        mem_per_cpu: Some(1000),
                        ..base
                    }
                }
                50..=94 => {
                    let n = if kind < 80 {
                        r.range(1, 4)
                    } else {
                        r.range(8, 32)
                    } as u32;
                    JobView {
                        min_nodes: n,
                        max_nodes: n,
                        num_tasks: n * CPUS,
                        ntasks_per_node: Some(CPUS),
                        mem_per_node: Some(64_000),
                        ..base
                    }
                }
                _ => {
                    let n = r.range(64, 256).min(nodes as u64) as u32;
                    JobView {
                        min_nodes: n,
                        max_nodes: n,
                        num_tasks: n,
                        exclusive: true,
                        ..base
                    }
                }
            }
        })
        .collect();
    (view, queue)
}
