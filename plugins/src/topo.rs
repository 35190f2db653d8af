//! Network topology: `topology/tree` and `topology/block` placement.
//!
//! Both work as a filter around cons_tres' greedy ([`crate::select`]): they
//! cut the candidate nodes into groups the job must stay inside (a switch's
//! subtree, an aggregated block), order each group's nodes so the greedy
//! uses few leaves or base blocks, and keep the best-fitting group at the
//! lowest level that holds the job.
//!
//! - tree: the lowest switch level at which some switch can hold the job;
//!   among those switches the one with the fewest usable nodes (best fit).
//!   Inside it, leaves with the most usable nodes come first.
//!   `--switches=N` refuses a placement over more than `N` leaves.
//! - block: levels are the `BlockSizes` (in nodes; the first is the base
//!   block size); a level-`L` aggregated block is `L / base` consecutive base
//!   blocks. The level is enforced: a job stays inside one aggregated block
//!   of the lowest level at least as large as its node count (best fit among
//!   them), waiting if none has room; jobs larger than the largest level may
//!   use any blocks. `--segment=N`
//!   splits the nodes into segments of `N`, each inside one base block.
//! - `--exclusive=topo` (either plugin): the job takes whole nodes, only in
//!   leaves or base blocks nothing else uses, and nothing else may use them while it runs
//!   ([`Topology::held_with`] gives the rest of them as whole-node holds).
//!
//! Nodes outside every switch or block are never allocated, as in Slurm.

use crate::select::{greedy, tasks_capacity, Free, Prepared, SelectFail};
use crate::view::{NodeAlloc, NodeView};

/// A topology over the cluster's node indices.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum Topology {
    /// No topology: any nodes (`topology/flat`, the default).
    #[default]
    Flat,
    Tree(Tree),
    Block(Blocks),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Switch {
    pub name: String,
    /// 0 for a leaf (it has nodes), one more than its highest child otherwise.
    pub level: u32,
    /// Every node under it, ascending.
    pub nodes: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tree {
    pub switches: Vec<Switch>,
    /// The leaf switch of each node (`None`: not in the tree).
    pub leaf_of: Vec<Option<usize>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub name: String,
    pub nodes: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Blocks {
    pub blocks: Vec<Block>,
    /// Level sizes in nodes, ascending; the first is the base block size.
    pub sizes: Vec<u32>,
    /// The base block of each node (`None`: in no block).
    pub block_of: Vec<Option<usize>>,
}

/// A topology description that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopoError {
    #[error("switch {0} is defined twice")]
    DuplicateSwitch(String),
    #[error("switch {parent} names unknown child switch {child}")]
    UnknownSwitch { parent: String, child: String },
    #[error("switch {0} is its own descendant")]
    Cycle(String),
    #[error("switch {0} has neither Nodes nor Switches")]
    EmptySwitch(String),
    #[error("block {0} is defined twice")]
    DuplicateBlock(String),
    #[error("block {0} has no nodes")]
    EmptyBlock(String),
    #[error("node {node} is in both block {first} and block {second}")]
    NodeInTwoBlocks {
        node: String,
        first: String,
        second: String,
    },
    #[error("BlockSizes {0}: each size must be the base size times a power of two, ascending")]
    BadBlockSizes(String),
    #[error("block {name} has {count} nodes, fewer than the base block size {base}")]
    SmallBlock {
        name: String,
        count: usize,
        base: u32,
    },
}

/// One switch as configured: its children switches and its own nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchDef {
    pub name: String,
    pub switches: Vec<String>,
    pub nodes: Vec<usize>,
}

impl Tree {
    /// Build the tree over `node_count` nodes (node indices in `defs`).
    pub fn new(defs: &[SwitchDef], node_count: usize) -> Result<Tree, TopoError> {
        let mut index = std::collections::BTreeMap::new();
        for (k, d) in defs.iter().enumerate() {
            if index.insert(d.name.as_str(), k).is_some() {
                return Err(TopoError::DuplicateSwitch(d.name.clone()));
            }
            if d.switches.is_empty() && d.nodes.is_empty() {
                return Err(TopoError::EmptySwitch(d.name.clone()));
            }
        }
        let children: Vec<Vec<usize>> = defs
            .iter()
            .map(|d| {
                d.switches
                    .iter()
                    .map(|c| {
                        index
                            .get(c.as_str())
                            .copied()
                            .ok_or_else(|| TopoError::UnknownSwitch {
                                parent: d.name.clone(),
                                child: c.clone(),
                            })
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<_, _>>()?;
        // Levels and node sets bottom-up (depth-first, cycles refused).
        let mut level: Vec<Option<u32>> = vec![None; defs.len()];
        let mut nodes: Vec<Vec<usize>> = vec![Vec::new(); defs.len()];
        fn visit(
            k: usize,
            defs: &[SwitchDef],
            children: &[Vec<usize>],
            level: &mut [Option<u32>],
            nodes: &mut [Vec<usize>],
            on_path: &mut Vec<bool>,
        ) -> Result<(), TopoError> {
            if level[k].is_some() {
                return Ok(());
            }
            if on_path[k] {
                return Err(TopoError::Cycle(defs[k].name.clone()));
            }
            on_path[k] = true;
            let mut lv = 0;
            let mut set = defs[k].nodes.clone();
            for &c in &children[k] {
                visit(c, defs, children, level, nodes, on_path)?;
                lv = lv.max(level[c].unwrap_or(0) + 1);
                set.extend(nodes[c].iter().copied());
            }
            set.sort_unstable();
            set.dedup();
            on_path[k] = false;
            level[k] = Some(lv);
            nodes[k] = set;
            Ok(())
        }
        let mut on_path = vec![false; defs.len()];
        for k in 0..defs.len() {
            visit(k, defs, &children, &mut level, &mut nodes, &mut on_path)?;
        }
        let mut leaf_of = vec![None; node_count];
        for (k, d) in defs.iter().enumerate() {
            for &n in &d.nodes {
                if let Some(l) = leaf_of.get_mut(n) {
                    l.get_or_insert(k);
                }
            }
        }
        Ok(Tree {
            switches: defs
                .iter()
                .zip(level)
                .zip(nodes)
                .map(|((d, l), n)| Switch {
                    name: d.name.clone(),
                    level: l.unwrap_or(0),
                    nodes: n,
                })
                .collect(),
            leaf_of,
        })
    }
}

impl Blocks {
    /// Build the blocks over `node_count` nodes; `node_name` names a node
    /// index for errors. `sizes` empty: the base size is the smallest
    /// block, and every power-of-two multiple up to all blocks is a level.
    pub fn new(
        blocks: Vec<Block>,
        sizes: &[u32],
        node_count: usize,
        node_name: impl Fn(usize) -> String,
    ) -> Result<Blocks, TopoError> {
        let mut block_of = vec![None; node_count];
        let mut names = std::collections::BTreeSet::new();
        for (k, b) in blocks.iter().enumerate() {
            if !names.insert(b.name.as_str()) {
                return Err(TopoError::DuplicateBlock(b.name.clone()));
            }
            if b.nodes.is_empty() {
                return Err(TopoError::EmptyBlock(b.name.clone()));
            }
            for &n in &b.nodes {
                if let Some(slot) = block_of.get_mut(n) {
                    if let Some(first) = *slot {
                        let first: &Block = &blocks[first];
                        return Err(TopoError::NodeInTwoBlocks {
                            node: node_name(n),
                            first: first.name.clone(),
                            second: b.name.clone(),
                        });
                    }
                    *slot = Some(k);
                }
            }
        }
        let smallest = blocks.iter().map(|b| b.nodes.len()).min().unwrap_or(1) as u32;
        let sizes = if sizes.is_empty() {
            let mut v = vec![smallest.max(1)];
            let total = smallest.max(1) as u64 * blocks.len() as u64;
            while u64::from(*v.last().unwrap_or(&1)) * 2 <= total {
                let next = v.last().copied().unwrap_or(1) * 2;
                v.push(next);
            }
            v
        } else {
            let base = sizes[0];
            let ok = base > 0
                && sizes.windows(2).all(|w| w[1] > w[0])
                && sizes
                    .iter()
                    .all(|s| s % base == 0 && (s / base).is_power_of_two());
            if !ok {
                let text: Vec<String> = sizes.iter().map(u32::to_string).collect();
                return Err(TopoError::BadBlockSizes(text.join(",")));
            }
            sizes.to_vec()
        };
        if let Some(b) = blocks.iter().find(|b| (b.nodes.len() as u32) < sizes[0]) {
            return Err(TopoError::SmallBlock {
                name: b.name.clone(),
                count: b.nodes.len(),
                base: sizes[0],
            });
        }
        Ok(Blocks {
            blocks,
            sizes,
            block_of,
        })
    }
}

impl Topology {
    /// Whether a job's placement here depends only on how much each node
    /// has free, not on which nodes (no topology, `--contiguous` or
    /// feature counts): the plain greedy, and fits worth remembering by
    /// shape.
    pub fn fits_by_amount(&self, job: &crate::view::JobView) -> bool {
        self.is_flat() && !job.contiguous && job.node_counts.is_empty()
    }

    pub fn is_flat(&self) -> bool {
        matches!(self, Topology::Flat)
    }

    /// The groups `--exclusive=topo` takes whole: base blocks or leaves.
    fn unit_of(&self, node: usize) -> Option<usize> {
        match self {
            Topology::Flat => None,
            Topology::Tree(t) => t.leaf_of.get(node).copied().flatten(),
            Topology::Block(b) => b.block_of.get(node).copied().flatten(),
        }
    }

    fn unit_nodes(&self, unit: usize) -> &[usize] {
        match self {
            Topology::Flat => &[],
            Topology::Tree(t) => t.switches.get(unit).map_or(&[], |s| &s.nodes),
            Topology::Block(b) => b.blocks.get(unit).map_or(&[], |b| &b.nodes),
        }
    }

    /// What a job holding `alloc` keeps from others besides its own nodes:
    /// with `--exclusive=topo`, the other nodes of its leaves or base
    /// blocks, each held whole.
    pub fn held_with(&self, exclusive_topo: bool, alloc: &[NodeAlloc]) -> Vec<NodeAlloc> {
        if !exclusive_topo || self.is_flat() {
            return Vec::new();
        }
        let mut units: Vec<usize> = alloc.iter().filter_map(|a| self.unit_of(a.node)).collect();
        units.sort_unstable();
        units.dedup();
        let mut out = Vec::new();
        for u in units {
            for &n in self.unit_nodes(u) {
                if !alloc.iter().any(|a| a.node == n) {
                    out.push(NodeAlloc {
                        node: n,
                        exclusive: true,
                        ..NodeAlloc::default()
                    });
                }
            }
        }
        out
    }

    /// Place `p` on `cands` (in preference order, required nodes first)
    /// within this topology. `free` as for [`greedy`]; `empty(i)`: nothing
    /// at all uses node `i` over the placement's time (for
    /// `--exclusive=topo`; asked of any node, not only candidates).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn place(
        &self,
        nodes: &[NodeView],
        p: &Prepared,
        cands: impl IntoIterator<Item = usize>,
        free: impl FnMut(usize) -> Option<Free>,
        empty: impl Fn(usize) -> bool,
        max_cap: u32,
        fail: SelectFail,
    ) -> Result<Vec<NodeAlloc>, SelectFail> {
        if self.fits_by_amount(&p.job) {
            return greedy(nodes, p, cands, free, max_cap, fail);
        }
        let cands: Vec<usize> = cands.into_iter().collect();
        let mut ctx = Ctx {
            nodes,
            p,
            free,
            empty: &empty,
            cache: vec![None; nodes.len()],
        };
        let mut a = match self {
            Topology::Flat if p.job.contiguous => contiguous(&mut ctx, &cands, max_cap, fail),
            Topology::Flat => {
                let order = ctx.counts_first(&cands);
                greedy(nodes, p, order, |i| ctx.get(i), max_cap, fail)
            }
            Topology::Tree(t) => self.place_tree(t, &mut ctx, &cands, max_cap, fail),
            Topology::Block(b) => self.place_block(b, &mut ctx, &cands, max_cap, fail),
        }?;
        // `--constraint` counts hold on the allocation as a whole.
        for (set, count) in &p.job.node_counts {
            let have = a
                .iter()
                .filter(|x| set.binary_search(&x.node).is_ok())
                .count();
            if have < *count as usize {
                return Err(fail);
            }
        }
        // In node order, as Slurm lists an allocation.
        a.sort_by_key(|x| x.node);
        Ok(a)
    }

    fn place_tree<F: FnMut(usize) -> Option<Free>>(
        &self,
        t: &Tree,
        ctx: &mut Ctx<'_, '_, F>,
        cands: &[usize],
        max_cap: u32,
        fail: SelectFail,
    ) -> Result<Vec<NodeAlloc>, SelectFail> {
        let job = &ctx.p.job;
        let leaf_of = |i: usize| t.leaf_of.get(i).copied().flatten();
        // With --switches, no more leaves than asked for.
        let few_leaves = |a: &[NodeAlloc]| {
            job.switches.is_none_or(|max| {
                let mut leaves: Vec<usize> = a.iter().filter_map(|x| leaf_of(x.node)).collect();
                leaves.sort_unstable();
                leaves.dedup();
                leaves.len() <= max.max(1) as usize
            })
        };
        let mut levels: Vec<u32> = t.switches.iter().map(|s| s.level).collect();
        levels.sort_unstable();
        levels.dedup();
        for lv in levels {
            let groups = t
                .switches
                .iter()
                .filter(|s| s.level == lv)
                .map(|s| |i: &usize| s.nodes.binary_search(i).is_ok());
            let found = self.best_fit(
                ctx,
                cands,
                groups,
                leaf_of,
                max_cap,
                fail,
                |_, o| Some(o),
                few_leaves,
            );
            if let Some(a) = found {
                return Ok(a);
            }
        }
        Err(fail)
    }

    fn place_block<F: FnMut(usize) -> Option<Free>>(
        &self,
        b: &Blocks,
        ctx: &mut Ctx<'_, '_, F>,
        cands: &[usize],
        max_cap: u32,
        fail: SelectFail,
    ) -> Result<Vec<NodeAlloc>, SelectFail> {
        let job = &ctx.p.job;
        let want = job.min_nodes.max(1);
        let base = b.sizes.first().copied().unwrap_or(1).max(1);
        if let Some(seg) = job.segment {
            if seg == 0 || seg > base || !want.is_multiple_of(seg) {
                return Err(SelectFail::Never);
            }
        }
        let segment = job.segment;
        // The group size (in base blocks) that is enforced: the lowest level
        // that can hold the job, or all blocks for jobs beyond the largest.
        let span = b
            .sizes
            .iter()
            .find(|s| **s >= want)
            .map_or(b.blocks.len().max(1), |s| (s / base) as usize);
        let block_of = |i: usize| b.block_of.get(i).copied().flatten();
        let groups = (0..b.blocks.len()).step_by(span).map(|first| {
            let range = first..(first + span).min(b.blocks.len());
            move |i: &usize| block_of(*i).is_some_and(|k| range.contains(&k))
        });
        let in_segments = |ctx: &mut Ctx<'_, '_, F>, order: Vec<usize>| match segment {
            Some(seg) => ctx.segments(&order, seg, want / seg, block_of),
            None => Some(order),
        };
        self.best_fit(
            ctx,
            cands,
            groups,
            block_of,
            max_cap,
            fail,
            in_segments,
            |_| true,
        )
        .ok_or(fail)
    }

    /// Among `groups` (each a test of whether a node is inside one switch
    /// or aggregated block), the placement in the group with the fewest
    /// usable nodes, the first of equals. A group must hold every required
    /// node; `arrange` may reorder or cut its candidates (segments), and
    /// `accept` may still refuse a placement (`--switches`).
    #[allow(clippy::too_many_arguments)]
    fn best_fit<F: FnMut(usize) -> Option<Free>, G: Fn(&usize) -> bool>(
        &self,
        ctx: &mut Ctx<'_, '_, F>,
        cands: &[usize],
        groups: impl Iterator<Item = G>,
        unit_of: impl Fn(usize) -> Option<usize>,
        max_cap: u32,
        fail: SelectFail,
        mut arrange: impl FnMut(&mut Ctx<'_, '_, F>, Vec<usize>) -> Option<Vec<usize>>,
        accept: impl Fn(&[NodeAlloc]) -> bool,
    ) -> Option<Vec<NodeAlloc>> {
        let (nodes, p) = (ctx.nodes, ctx.p);
        let mut best: Option<(usize, Vec<NodeAlloc>)> = None;
        for in_group in groups {
            if !p.job.req_nodes.iter().all(&in_group) {
                continue;
            }
            let inside: Vec<usize> = cands.iter().copied().filter(&in_group).collect();
            let Some((usable, order)) = ctx.grouped(&inside, &unit_of, self) else {
                continue;
            };
            if best.as_ref().is_some_and(|b| b.0 <= usable) {
                continue;
            }
            let Some(order) = arrange(ctx, order) else {
                continue;
            };
            match greedy(nodes, p, order, |i| ctx.get(i), max_cap, fail) {
                Ok(a) if accept(&a) => best = Some((usable, a)),
                _ => {}
            }
        }
        best.map(|b| b.1)
    }
}

/// `--contiguous` (with no topology: tree and block order nodes their own
/// way and ignore it, as in Slurm): the shortest run of consecutive
/// usable nodes (in configuration order) that holds the job, the first of
/// equals; required nodes must be inside it.
fn contiguous<F: FnMut(usize) -> Option<Free>>(
    ctx: &mut Ctx<'_, '_, F>,
    cands: &[usize],
    max_cap: u32,
    fail: SelectFail,
) -> Result<Vec<NodeAlloc>, SelectFail> {
    let (nodes, p) = (ctx.nodes, ctx.p);
    let job = &p.job;
    let mut sorted: Vec<usize> = cands.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut runs: Vec<Vec<usize>> = Vec::new();
    let mut run: Vec<usize> = Vec::new();
    for i in sorted {
        if !ctx.usable(i) {
            continue;
        }
        if run.last().is_some_and(|l| l + 1 != i) {
            runs.push(std::mem::take(&mut run));
        }
        run.push(i);
    }
    runs.push(run);
    let want = job.min_nodes.max(1) as usize;
    runs.retain(|r| r.len() >= want && job.req_nodes.iter().all(|q| r.contains(q)));
    runs.sort_by_key(|r| (r.len(), r[0]));
    for r in runs {
        // Required nodes first, then the run in order; the greedy stops
        // as soon as the job fits, so the nodes it takes stay consecutive
        // when nothing is required.
        let order: Vec<usize> = job
            .req_nodes
            .iter()
            .copied()
            .chain(r.iter().copied().filter(|i| !job.req_nodes.contains(i)))
            .collect();
        let Ok(a) = greedy(nodes, p, order, |i| ctx.get(i), max_cap, fail) else {
            continue;
        };
        let mut got: Vec<usize> = a.iter().map(|x| x.node).collect();
        got.sort_unstable();
        if got.windows(2).all(|w| w[1] == w[0] + 1) {
            return Ok(a);
        }
    }
    Err(fail)
}

/// One placement's state: what each node offers, asked once.
struct Ctx<'a, 'b, F> {
    nodes: &'a [NodeView],
    p: &'a Prepared<'b>,
    free: F,
    empty: &'a dyn Fn(usize) -> bool,
    cache: Vec<Option<Option<Free>>>,
}

impl<F: FnMut(usize) -> Option<Free>> Ctx<'_, '_, F> {
    fn get(&mut self, i: usize) -> Option<Free> {
        match self.cache.get(i) {
            Some(Some(f)) => *f,
            Some(None) => {
                let f = (self.free)(i);
                self.cache[i] = Some(f);
                f
            }
            None => None,
        }
    }

    /// Whether node `i` could be part of the job: room for a task, or for
    /// all of them when the job has one node (the same test the plan's
    /// indexes make, so best fit counts the same nodes there).
    fn usable(&mut self, i: usize) -> bool {
        let Some(f) = self.get(i) else {
            return false;
        };
        let n = &self.nodes[i];
        let job = &self.p.job;
        let least = if job.ntasks_per_node.is_none() && self.p.max_nodes == 1 {
            job.num_tasks.max(1)
        } else {
            1
        };
        tasks_capacity(f, n, self.p.part.def_mem_per_cpu, job) >= least
    }

    /// `cands` with, after the required nodes, the first usable nodes of
    /// each `--constraint` count (`gpu*2`: two usable `gpu` nodes), so the
    /// greedy takes them before others.
    fn counts_first(&mut self, cands: &[usize]) -> Vec<usize> {
        let p = self.p;
        let job = &p.job;
        let mut first: Vec<usize> = Vec::new();
        for (set, count) in &job.node_counts {
            let mut have = first
                .iter()
                .chain(&job.req_nodes)
                .filter(|i| set.binary_search(i).is_ok())
                .count();
            for &i in cands {
                if have >= *count as usize {
                    break;
                }
                if set.binary_search(&i).is_ok()
                    && !first.contains(&i)
                    && !job.req_nodes.contains(&i)
                    && self.usable(i)
                {
                    first.push(i);
                    have += 1;
                }
            }
        }
        let mut order: Vec<usize> = cands
            .iter()
            .copied()
            .filter(|i| job.req_nodes.contains(i))
            .collect();
        order.extend(first.iter().copied());
        order.extend(
            cands
                .iter()
                .copied()
                .filter(|i| !job.req_nodes.contains(i) && !first.contains(i)),
        );
        order
    }

    /// Nothing uses the leaf or base block of node `i` (nodes that are down
    /// do not count), as `--exclusive=topo` needs.
    fn unit_unused(&self, topo: &Topology, i: usize) -> bool {
        let unit = topo.unit_nodes(topo.unit_of(i).unwrap_or(usize::MAX));
        unit.iter()
            .all(|&n| !self.nodes.get(n).is_some_and(|v| v.available) || (self.empty)(n))
    }

    /// `inside` reordered so the greedy fills few groups (`group_of`):
    /// required nodes first, then groups with the most usable nodes, each
    /// in preference order. With `--exclusive=topo`, groups some other job
    /// uses are left out. `None` when fewer than `min_nodes` are usable;
    /// otherwise also the usable count (smaller = tighter fit).
    fn grouped(
        &mut self,
        inside: &[usize],
        group_of: impl Fn(usize) -> Option<usize>,
        topo: &Topology,
    ) -> Option<(usize, Vec<usize>)> {
        let p = self.p;
        let job = &p.job;
        let excl_topo = job.exclusive_topo;
        let mut counts: std::collections::BTreeMap<usize, usize> = Default::default();
        let mut refused: std::collections::BTreeSet<usize> = Default::default();
        let mut usable_nodes = Vec::with_capacity(inside.len());
        for &i in inside {
            let Some(g) = group_of(i) else { continue };
            if excl_topo && !refused.contains(&g) && !counts.contains_key(&g) {
                let all_empty = self.unit_unused(topo, i);
                if !all_empty {
                    refused.insert(g);
                }
            }
            if refused.contains(&g) {
                continue;
            }
            if self.usable(i) {
                *counts.entry(g).or_default() += 1;
                usable_nodes.push((g, i));
            }
        }
        let usable = usable_nodes.len();
        if usable < job.min_nodes.max(1) as usize {
            return None;
        }
        let mut order: Vec<usize> = job
            .req_nodes
            .iter()
            .copied()
            .filter(|r| usable_nodes.iter().any(|u| u.1 == *r))
            .collect();
        let mut groups: Vec<(usize, usize)> = counts.into_iter().collect();
        groups.sort_by_key(|&(g, c)| (std::cmp::Reverse(c), g));
        for (g, _) in groups {
            order.extend(
                usable_nodes
                    .iter()
                    .filter(|u| u.0 == g && !job.req_nodes.contains(&u.1))
                    .map(|u| u.1),
            );
        }
        Some((usable, order))
    }

    /// From `order` (grouped by base block), `count` segments of `seg`
    /// nodes, each inside one base block: whole segments from the fullest
    /// blocks first. `None` when the blocks hold too few.
    fn segments(
        &mut self,
        order: &[usize],
        seg: u32,
        count: u32,
        block_of: impl Fn(usize) -> Option<usize>,
    ) -> Option<Vec<usize>> {
        let seg = seg as usize;
        let mut left = count as usize;
        let mut out = Vec::with_capacity(seg * left);
        let mut k = 0;
        while k < order.len() && left > 0 {
            let g = block_of(order[k]);
            let run: Vec<usize> = order[k..]
                .iter()
                .copied()
                .take_while(|i| block_of(*i) == g)
                .collect();
            k += run.len();
            let take = (run.len() / seg).min(left);
            out.extend(run.into_iter().take(take * seg));
            left -= take;
        }
        (left == 0).then_some(out)
    }
}

#[cfg(test)]
mod tests;
