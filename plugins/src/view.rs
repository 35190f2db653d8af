//! The core's view of the cluster: plain data built by the caller.

/// How many kinds of generic resource (`gpu:a100`, `gpu:v100`, ...) the
/// core tracks; the caller maps the cluster's kinds to indices.
pub const MAX_GRES: usize = 4;

/// A count per GRES kind.
pub type GresCounts = [u16; MAX_GRES];

/// A job's need of one generic resource on each of its nodes: `count` units
/// of any kind whose bit is set in `mask` (`gpu` matches every GPU type,
/// `gpu:a100` one kind).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GresReq {
    pub mask: u8,
    pub count: u16,
}

/// Take `reqs` out of `free`, lowest kind first: what is taken per kind,
/// or `None` when they do not fit.
pub fn take_gres(free: &GresCounts, reqs: &[GresReq]) -> Option<GresCounts> {
    let mut left = *free;
    let mut took = [0u16; MAX_GRES];
    for r in reqs {
        let mut need = r.count;
        for k in 0..MAX_GRES {
            if need == 0 {
                break;
            }
            if r.mask & (1 << k) != 0 {
                let t = need.min(left[k]);
                left[k] -= t;
                took[k] += t;
                need -= t;
            }
        }
        if need > 0 {
            return None;
        }
    }
    Some(took)
}

/// One node's capacity and what is already used on it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeView {
    pub name: String,
    pub cpus: u32,
    /// MiB.
    pub mem: u64,
    pub alloc_cpus: u32,
    pub alloc_mem: u64,
    /// Up, responding and not draining.
    pub available: bool,
    /// Lower weight is allocated first.
    pub weight: u32,
    pub features: Vec<String>,
    /// Some job holds the whole node (`--exclusive`).
    pub exclusive_in_use: bool,
    /// Generic resources per kind, and how many are allocated.
    pub gres: GresCounts,
    pub alloc_gres: GresCounts,
    /// CPUs per core allocated together (`ThreadsPerCore` with CR_Core);
    /// 0 or 1: CPUs one by one (CR_CPU).
    pub threads_per_core: u32,
    /// Sockets (0 is read as 1).
    pub sockets: u32,
}

impl NodeView {
    /// CPUs that move together.
    pub fn core_cpus(&self) -> u32 {
        self.threads_per_core.max(1)
    }
}

impl NodeView {
    pub fn free_cpus(&self) -> u32 {
        if self.exclusive_in_use {
            0
        } else {
            self.cpus.saturating_sub(self.alloc_cpus)
        }
    }
    pub fn free_gres(&self) -> GresCounts {
        let mut f = [0u16; MAX_GRES];
        if !self.exclusive_in_use {
            for (k, v) in f.iter_mut().enumerate() {
                *v = self.gres[k].saturating_sub(self.alloc_gres[k]);
            }
        }
        f
    }
    pub fn free_mem(&self) -> u64 {
        if self.exclusive_in_use {
            0
        } else {
            self.mem.saturating_sub(self.alloc_mem)
        }
    }
    pub fn is_empty(&self) -> bool {
        self.alloc_cpus == 0
            && self.alloc_mem == 0
            && !self.exclusive_in_use
            && self.alloc_gres.iter().all(|g| *g == 0)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct PartitionView {
    pub name: String,
    /// Indices into [`ClusterView::nodes`].
    pub nodes: Vec<usize>,
    /// State UP (jobs may start).
    pub up: bool,
    /// Minutes; `None` = unlimited.
    pub max_time: Option<u32>,
    pub max_nodes: Option<u32>,
    /// `OverSubscribe=EXCLUSIVE`: every job gets whole nodes.
    pub exclusive: bool,
    pub priority_tier: u32,
    /// MiB per CPU given to jobs that ask for no memory.
    pub def_mem_per_cpu: Option<u64>,
    /// Index into [`ClusterView::topologies`] (none there: flat).
    pub topology: usize,
    /// `ExclusiveTopo=YES`: every job gets its leaves or blocks alone.
    pub exclusive_topo: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterView {
    pub nodes: Vec<NodeView>,
    pub partitions: Vec<PartitionView>,
    /// Jobs holding resources now, with their expected ends (for planning).
    pub running: Vec<RunningJob>,
    /// The network topologies partitions refer to (`topology.conf` or
    /// `topology.yaml`); empty = flat.
    pub topologies: std::sync::Arc<Vec<crate::topo::Topology>>,
}

/// A job that holds resources: what it holds and until when (its start plus
/// its time limit; `None` when it has no limit).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunningJob {
    pub id: u32,
    pub end: Option<i64>,
    pub alloc: Vec<NodeAlloc>,
    pub priority: u32,
    pub partition: usize,
}

/// Who holds a job back from scheduling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    User,
    Admin,
}

/// A pending job as the core sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobView {
    pub id: u32,
    pub priority: u32,
    pub submit_time: i64,
    /// Index into [`ClusterView::partitions`].
    pub partition: usize,
    pub min_nodes: u32,
    pub max_nodes: u32,
    pub num_tasks: u32,
    pub cpus_per_task: u32,
    pub ntasks_per_node: Option<u32>,
    /// MiB per node; `Some(0)` = all of each node's memory.
    pub mem_per_node: Option<u64>,
    pub mem_per_cpu: Option<u64>,
    /// Node indices that must be in the allocation (`-w`).
    pub req_nodes: Vec<usize>,
    /// Node indices that must not be (`-x`).
    pub exc_nodes: Vec<usize>,
    pub exclusive: bool,
    /// Minutes; `None` = unlimited.
    pub time_limit: Option<u32>,
    /// `--time-min` (minutes, below `time_limit`): backfill may start the
    /// job now with its limit lowered as far as this.
    pub time_min: Option<u32>,
    pub begin_time: Option<i64>,
    pub hold: Option<Hold>,
    /// Generic resources wanted on each node.
    pub gres: Vec<GresReq>,
    /// `--switches=N`: at most this many leaf switches (while the job is
    /// still willing to wait for them).
    pub switches: Option<u32>,
    /// `--segment=N`: nodes in segments of `N`, each inside one base block.
    pub segment: Option<u32>,
    /// `--exclusive=topo`.
    pub exclusive_topo: bool,
    /// `--contiguous`: nodes consecutive in configuration order.
    pub contiguous: bool,
    /// `--ntasks-per-socket`: at most this many tasks per socket.
    pub ntasks_per_socket: Option<u32>,
    /// `--ntasks-per-core`: at most this many tasks per core.
    pub ntasks_per_core: Option<u32>,
    /// `--mincpus`: at least this many CPUs on each of its nodes (0: no
    /// minimum beyond its tasks').
    pub min_cpus_per_node: u32,
    /// `--constraint` counts (`gpu*2`): at least `.1` of the job's nodes
    /// from the node indices `.0` (ascending).
    pub node_counts: Vec<(Vec<usize>, u32)>,
}

impl JobView {
    /// CPUs each task takes on `n`: `--cpus-per-task`, rounded up with
    /// `--ntasks-per-core=K` to a whole multiple of a core's threads / K, so
    /// no core runs more than K of the job's tasks.
    pub fn cpus_per_task_on(&self, n: &NodeView) -> u32 {
        cpus_per_task_with(self.cpus_per_task, self.ntasks_per_core, n.core_cpus())
    }
}

/// `cpus_per_task` rounded for `--ntasks-per-core` on a node whose cores
/// have `threads` CPUs (the step layout's rule too).
pub fn cpus_per_task_with(cpus_per_task: u32, ntasks_per_core: Option<u32>, threads: u32) -> u32 {
    let cpt = cpus_per_task.max(1);
    match ntasks_per_core {
        Some(k) => {
            let share = threads.max(1).div_ceil(k.max(1));
            cpt.div_ceil(share).saturating_mul(share)
        }
        None => cpt,
    }
}

/// What a job gets on one node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeAlloc {
    pub node: usize,
    pub cpus: u32,
    pub mem: u64,
    pub tasks: u32,
    /// The job holds the whole node.
    pub exclusive: bool,
    /// Generic resources taken per kind.
    pub gres: GresCounts,
}

impl ClusterView {
    /// The topology partition `part` places jobs in.
    pub fn topology_of(&self, part: usize) -> &crate::topo::Topology {
        static FLAT: crate::topo::Topology = crate::topo::Topology::Flat;
        self.partitions
            .get(part)
            .and_then(|p| self.topologies.get(p.topology))
            .unwrap_or(&FLAT)
    }

    /// What a job started with `alloc` holds besides it: with
    /// `--exclusive=topo`, the rest of its leaves or blocks (whole).
    pub fn held_beside(&self, job: &JobView, alloc: &[NodeAlloc]) -> Vec<NodeAlloc> {
        let excl = job.exclusive_topo
            || self
                .partitions
                .get(job.partition)
                .is_some_and(|p| p.exclusive_topo);
        self.topology_of(job.partition).held_with(excl, alloc)
    }

    /// Take `alloc` out of the free resources (used between decisions of one pass).
    pub fn consume(&mut self, alloc: &[NodeAlloc]) {
        for a in alloc {
            if let Some(n) = self.nodes.get_mut(a.node) {
                n.alloc_cpus += a.cpus;
                n.alloc_mem += a.mem;
                n.exclusive_in_use |= a.exclusive;
                for k in 0..MAX_GRES {
                    n.alloc_gres[k] = n.alloc_gres[k].saturating_add(a.gres[k]);
                }
            }
        }
    }

    /// Give `alloc` back (a job ended).
    pub fn release(&mut self, alloc: &[NodeAlloc]) {
        for a in alloc {
            if let Some(n) = self.nodes.get_mut(a.node) {
                n.alloc_cpus = n.alloc_cpus.saturating_sub(a.cpus);
                n.alloc_mem = n.alloc_mem.saturating_sub(a.mem);
                for k in 0..MAX_GRES {
                    n.alloc_gres[k] = n.alloc_gres[k].saturating_sub(a.gres[k]);
                }
                if a.exclusive {
                    n.exclusive_in_use = false;
                }
            }
        }
    }
}
