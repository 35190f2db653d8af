//! What the jobs hold of each node, kept job by job: a job's shares are
//! counted in when it starts and out when it ends, so a refresh costs what
//! changed, not the queue.

use super::*;

/// One job's share of one node (index into `Controller::nodes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Share {
    pub(super) node: usize,
    pub(super) mem: u64,
    /// Cores, 0 while the job is suspended (its memory stays held).
    pub(super) cpus: u32,
    pub(super) completing: bool,
    pub(super) exclusive: bool,
}

/// What the jobs hold of each node, summed over their [`Share`]s.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct NodeUse {
    pub(super) mem: Vec<u64>,
    /// Cores counted once per job (more than the node has when jobs share).
    pub(super) cpus: Vec<u32>,
    /// Jobs completing there.
    pub(super) completing: Vec<u32>,
    /// Exclusive jobs there.
    pub(super) exclusive: Vec<u32>,
}

impl NodeUse {
    pub(super) fn zeroed(n: usize) -> NodeUse {
        NodeUse {
            mem: vec![0; n],
            cpus: vec![0; n],
            completing: vec![0; n],
            exclusive: vec![0; n],
        }
    }

    /// Add (`sign` 1) or take out (-1) a job's shares.
    pub(super) fn add(&mut self, shares: &[Share], sign: i8) {
        for s in shares {
            let i = s.node;
            if i >= self.mem.len() {
                continue;
            }
            if sign > 0 {
                self.mem[i] += s.mem;
                self.cpus[i] += s.cpus;
                self.completing[i] += u32::from(s.completing);
                self.exclusive[i] += u32::from(s.exclusive);
            } else {
                self.mem[i] = self.mem[i].saturating_sub(s.mem);
                self.cpus[i] = self.cpus[i].saturating_sub(s.cpus);
                self.completing[i] = self.completing[i].saturating_sub(u32::from(s.completing));
                self.exclusive[i] = self.exclusive[i].saturating_sub(u32::from(s.exclusive));
            }
        }
    }
}

/// What `j` holds of each node now: nothing unless it holds its devices;
/// while completing, only the nodes still completing; while suspended, its
/// memory but not its cores.
pub(super) fn shares_of(node_index: &HashMap<String, usize>, j: &JobRecord) -> Vec<Share> {
    if !Controller::holds_devices(j) {
        return Vec::new();
    }
    let suspended = j.state == JobState::Suspended && !j.completing;
    j.alloc
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, name)| !j.completing || j.completing_nodes.contains(*name))
        .filter_map(|(k, name)| {
            Some(Share {
                node: *node_index.get(name)?,
                mem: j.alloc.mem.get(k).copied().unwrap_or(0),
                cpus: if suspended {
                    0
                } else {
                    j.alloc.cpus.get(k).copied().unwrap_or(0)
                },
                completing: !suspended && j.completing,
                exclusive: !suspended && j.desc.exclusive,
            })
        })
        .collect()
}

impl Controller {
    /// Recompute node allocation, node states and partition totals from the
    /// jobs and admin states (derived, never stored).
    /// Bring `node_use` up to date: the jobs touched since the last call
    /// are taken out as last counted and put back as they are now; the
    /// first time (or after the node list changed) every job is counted.
    /// Debug builds check the result against a count from scratch.
    pub(super) fn count_node_use(&mut self) {
        if !self.use_ready || self.node_use.mem.len() != self.nodes.len() {
            self.node_use = NodeUse::zeroed(self.nodes.len());
            self.shares.clear();
            for j in self.p.jobs.values() {
                let s = shares_of(&self.node_index, j);
                if !s.is_empty() {
                    self.node_use.add(&s, 1);
                    self.shares.insert(j.job_id, s);
                }
            }
            self.touched.clear();
            self.use_ready = true;
            self.use_changed_all = true;
        } else {
            for id in std::mem::take(&mut self.touched) {
                if let Some(old) = self.shares.remove(&id) {
                    self.node_use.add(&old, -1);
                    self.use_changed.extend(old.iter().map(|s| s.node));
                }
                if let Some(j) = self.p.jobs.get(&id) {
                    let s = shares_of(&self.node_index, j);
                    if !s.is_empty() {
                        self.node_use.add(&s, 1);
                        self.use_changed.extend(s.iter().map(|s| s.node));
                        self.shares.insert(id, s);
                    }
                }
            }
        }
        #[cfg(debug_assertions)]
        if super::check_from_scratch(self.nodes.len(), self.p.jobs.len()) {
            let mut fresh = NodeUse::zeroed(self.nodes.len());
            for j in self.p.jobs.values() {
                fresh.add(&shares_of(&self.node_index, j), 1);
            }
            assert_eq!(
                self.node_use, fresh,
                "node use counted job by job differs from a count from scratch"
            );
        }
    }
}
