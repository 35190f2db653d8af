//! The availability plan: what every node has free (cores, MiB, whether it
//! is wholly unused) at every future time, from the running jobs' expected
//! ends and the reservations made during one backfill pass.
//!
//! Layout, chosen so a pass over 10k jobs on 5k nodes stays fast:
//! - per node, a short sorted list of segments `[t, next t)` holding what is
//!   *used* on it (a running job's end or a reservation's edges add one);
//! - per node and core-count threshold θ (16 even steps from the largest
//!   node's cores down to 1), the first time it has θ cores free: a flat
//!   array that turns most nodes away with one comparison;
//! - per partition, sums over its usable nodes on the union of their
//!   breakpoints: free cores, free MiB, unused nodes, nodes with θ free
//!   cores. They reject most start times without looking at any node, and
//!   give the only start times worth trying: a job that fits from `t` also
//!   fits from the breakpoint before it, so the earliest start is always
//!   `now` or a breakpoint.
//!
//! - per partition and threshold, the nodes that have θ cores free at some
//!   time before the search horizon (`bf_window`): the plan only loses free
//!   resources during a pass, so a node that drops out stays out.
//!
//! Searching for a job's earliest start alternates between the sums (the
//! first start they allow) and a placement at that start. A placement that
//! fails has looked at every node anyway, so it also says from when on each
//! node could be of use; the job needs `min_nodes` of them, which gives the
//! next start worth trying (exact for single-node jobs).
//!
//! Every time but `now` is rounded up to `bf_resolution`, which bounds the
//! number of breakpoints and only ever makes the plan more cautious (a
//! running job is taken to end at the tick after its time limit).
//! Placement over a window reuses [`crate::select`]'s greedy, given per node
//! the least it has free over the window.

use crate::select::{max_tasks_per_node, prepare, Free, Prepared, SelectFail};
use crate::view::{take_gres, ClusterView, GresCounts, GresReq, JobView, NodeAlloc, MAX_GRES};
use std::collections::BTreeMap;

/// The end of a job without a time limit, and of a plan.
pub const FOREVER: i64 = i64::MAX;

/// `t` rounded up to a whole multiple of `res` seconds.
pub fn round_up(t: i64, res: i64) -> i64 {
    if res <= 1 || t == FOREVER {
        return t;
    }
    match t.rem_euclid(res) {
        0 => t,
        r => t.saturating_add(res - r),
    }
}

/// How long `job` holds its resources, in seconds; `None` = no limit
/// (Slurm reads a time limit of 0 as "no limit" too).
pub fn duration(job: &JobView) -> Option<i64> {
    job.time_limit.filter(|m| *m > 0).map(|m| i64::from(m) * 60)
}

/// What is used on a node from `t` until the next segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seg {
    t: i64,
    cpus: u32,
    mem: u64,
    /// How many holders have the whole node.
    excl: u32,
    /// Generic resources used per kind.
    gres: GresCounts,
}

#[derive(Debug, Clone)]
struct NodeLine {
    cpus: u32,
    mem: u64,
    gres: GresCounts,
    weight: u32,
    usable: bool,
    /// Partitions whose plan this node is part of.
    parts: Vec<usize>,
    /// Never empty; `segs[0].t` is `now`; strictly increasing `t`.
    segs: Vec<Seg>,
}

impl NodeLine {
    fn free(&self, s: &Seg) -> Free {
        if s.excl > 0 {
            return Free::default();
        }
        Free {
            cpus: self.cpus.saturating_sub(s.cpus),
            mem: self.mem.saturating_sub(s.mem),
            empty: s.cpus == 0 && s.mem == 0 && s.gres.iter().all(|g| *g == 0),
            gres: self.free_gres(s),
        }
    }

    fn free_gres(&self, s: &Seg) -> GresCounts {
        let mut f = [0u16; MAX_GRES];
        for (k, v) in f.iter_mut().enumerate() {
            *v = self.gres[k].saturating_sub(s.gres[k]);
        }
        f
    }

    fn idx(&self, t: i64) -> usize {
        self.segs.partition_point(|s| s.t <= t).saturating_sub(1)
    }

    /// Make a segment start at `t` (≥ now) and return its index.
    fn split(&mut self, t: i64) -> usize {
        let k = self.idx(t);
        if self.segs[k].t == t {
            return k;
        }
        let s = Seg { t, ..self.segs[k] };
        self.segs.insert(k + 1, s);
        k + 1
    }

    /// The least the node offers over `[t, end)`, or, when some part of it
    /// leaves fewer than `min_cpus` cores free (or someone holds the node
    /// whole), the earliest start that could avoid those parts.
    fn window(&self, t: i64, end: i64, min_cpus: u32, gres: &[GresReq]) -> Result<Free, i64> {
        let mut k = self.idx(t);
        let (mut c, mut m) = (0u32, 0u64);
        let mut g = [0u16; MAX_GRES];
        let mut blocked_until = None;
        loop {
            let s = &self.segs[k];
            k += 1;
            let next = self.segs.get(k).map_or(FOREVER, |s| s.t);
            let short_gres = !gres.is_empty() && take_gres(&self.free_gres(s), gres).is_none();
            if s.excl > 0 || self.cpus.saturating_sub(s.cpus) < min_cpus.max(1) || short_gres {
                blocked_until = Some(next);
            } else {
                c = c.max(s.cpus);
                m = m.max(s.mem);
                for (x, used) in g.iter_mut().zip(s.gres) {
                    *x = (*x).max(used);
                }
            }
            if next >= end {
                break;
            }
        }
        match blocked_until {
            Some(b) => Err(b),
            None => {
                let mut free = [0u16; MAX_GRES];
                for (k, f) in free.iter_mut().enumerate() {
                    *f = self.gres[k].saturating_sub(g[k]);
                }
                Ok(Free {
                    cpus: self.cpus - c,
                    mem: self.mem.saturating_sub(m),
                    empty: c == 0 && m == 0 && g.iter().all(|x| *x == 0),
                    gres: free,
                })
            }
        }
    }

    /// A lower bound of the earliest start in `[from, latest]` from which
    /// the node has `min_cpus` cores free for the whole job (which ends at
    /// `end(start)`): exact unless it gives up after `steps` segments;
    /// [`FOREVER`] when there is none.
    fn next_good(
        &self,
        from: i64,
        latest: i64,
        min_cpus: u32,
        end: impl Fn(i64) -> i64,
        steps: usize,
    ) -> i64 {
        let mut c = from;
        let mut k = self.idx(from);
        for _ in 0..steps {
            if c > latest {
                return FOREVER;
            }
            let s = &self.segs[k];
            k += 1;
            let next = self.segs.get(k).map_or(FOREVER, |s| s.t);
            if s.excl > 0 || self.cpus.saturating_sub(s.cpus) < min_cpus.max(1) {
                if next == FOREVER {
                    return FOREVER;
                }
                c = next;
            } else if next >= end(c) {
                return c;
            }
        }
        if c > latest {
            FOREVER
        } else {
            c
        }
    }

    /// For each threshold, the first start of a stretch of at least
    /// `min_dur` seconds during which the node has that many cores free. No
    /// job of `min_dur` or longer can use the node for that many cores at an
    /// earlier start.
    fn reach(&self, thr: &[u32; NT], min_dur: i64) -> [i64; NT] {
        let mut r = [FOREVER; NT];
        if !self.usable {
            return r;
        }
        let mut run: [Option<i64>; NT] = [None; NT];
        for (k, s) in self.segs.iter().enumerate() {
            let f = self.free(s).cpus;
            let next = self.segs.get(k + 1).map_or(FOREVER, |s| s.t);
            for ((x, t), run) in r.iter_mut().zip(thr).zip(run.iter_mut()) {
                if *x != FOREVER {
                    continue;
                }
                if f < *t {
                    *run = None;
                    continue;
                }
                let from = *run.get_or_insert(s.t);
                if next == FOREVER || next.saturating_sub(from) >= min_dur {
                    *x = from;
                }
            }
            // A stretch with the most cores is one for every threshold.
            if r[0] != FOREVER {
                break;
            }
        }
        r
    }
}

/// How many segments of a node a failed placement looks through for the
/// node's next good start (beyond that it settles for a lower bound).
const STEPS: usize = 16;

/// How many core-count thresholds the plan tracks.
const NT: usize = 16;

/// What a set of nodes has free at one time: summed cores and MiB, how
/// many nodes are unused, and how many have at least `thr[k]` free cores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Sums {
    cpus: i64,
    mem: i128,
    empty: i32,
    ge: [i32; NT],
}

impl Sums {
    /// One node's part.
    fn of(f: Free, thr: &[u32; NT]) -> Sums {
        let mut ge = [0; NT];
        for (g, t) in ge.iter_mut().zip(thr) {
            *g = i32::from(f.cpus >= *t);
        }
        Sums {
            cpus: i64::from(f.cpus),
            mem: i128::from(f.mem),
            empty: i32::from(f.empty),
            ge,
        }
    }

    fn add(&mut self, d: &Sums, sign: i32) {
        self.cpus += i64::from(sign) * d.cpus;
        self.mem += i128::from(sign) * d.mem;
        self.empty += sign * d.empty;
        for (g, x) in self.ge.iter_mut().zip(d.ge) {
            *g += sign * x;
        }
    }

    fn delta(before: Free, after: Free, thr: &[u32; NT]) -> Sums {
        let mut d = Sums::of(after, thr);
        d.add(&Sums::of(before, thr), -1);
        d
    }

    fn is_zero(&self) -> bool {
        *self == Sums::default()
    }
}

/// What a job needs, as the plan's indexes see it.
#[derive(Debug, Clone, Copy, Default)]
struct Need {
    /// Lower bounds at every moment it runs, summed over its partition:
    /// cores, MiB, unused nodes, and `count` nodes with `thr[slot]` cores.
    cpus: i64,
    mem: i128,
    empty: i32,
    slot: Option<usize>,
    count: i32,
    /// Cores a node needs free to be of any use to the job, and the
    /// largest threshold not above that.
    node_min: u32,
    node_slot: usize,
}

impl Need {
    fn of(p: &Prepared, thr: &[u32; NT]) -> Need {
        let job: &JobView = &p.job;
        let cpt = job.cpus_per_task.max(1);
        let cpt64 = i64::from(cpt);
        let tasks = match job.ntasks_per_node {
            Some(n) => i64::from(job.min_nodes) * i64::from(n.max(1)),
            None => i64::from(job.num_tasks),
        };
        let cpus = tasks * cpt64;
        let mem = match (job.mem_per_node, job.mem_per_cpu) {
            (Some(0), _) => 0,
            (Some(m), _) => i128::from(m) * i128::from(job.min_nodes),
            (None, Some(m)) => i128::from(m) * i128::from(cpus),
            (None, None) => 0,
        };
        let min_nodes = i32::try_from(job.min_nodes).unwrap_or(i32::MAX);
        let empty = if job.exclusive || job.mem_per_node == Some(0) {
            min_nodes
        } else {
            0
        };
        // Cores some node must have free: every node's share with
        // --ntasks-per-node, otherwise the share of the fullest node when
        // the tasks are spread over as many nodes as allowed.
        let (per_node, count) = match job.ntasks_per_node {
            Some(n) => (i64::from(n.max(1)) * cpt64, min_nodes),
            None => {
                let m = i64::from(p.max_nodes.max(1));
                let t = i64::from(job.num_tasks);
                ((t + m - 1) / m * cpt64, i32::from(t > 0))
            }
        };
        let slot = thr
            .iter()
            .position(|t| i64::from(*t) <= per_node)
            .filter(|_| per_node > 0 && count > 0);
        // A node below this is never chosen: too small for a task, for
        // --ntasks-per-node, or (one node only) for the whole job.
        let node_min = match job.ntasks_per_node {
            Some(n) => n.max(1).saturating_mul(cpt),
            None if p.max_nodes == 1 => job.num_tasks.saturating_mul(cpt).max(cpt),
            None => cpt,
        };
        let node_slot = thr.iter().position(|t| *t <= node_min).unwrap_or(NT - 1);
        Need {
            cpus,
            mem,
            empty,
            slot,
            count,
            node_min,
            node_slot,
        }
    }
}

/// A partition's free resources over time (scanned a lot, updated rarely).
#[derive(Debug, Clone, Default)]
struct Agg {
    t: Vec<i64>,
    v: Vec<Sums>,
}

impl Agg {
    fn idx(&self, t: i64) -> usize {
        self.t.partition_point(|x| *x <= t).saturating_sub(1)
    }

    fn split(&mut self, t: i64) -> usize {
        let k = self.idx(t);
        if self.t[k] == t {
            return k;
        }
        self.t.insert(k + 1, t);
        self.v.insert(k + 1, self.v[k]);
        k + 1
    }

    /// Add changes given as `(from, delta)` steps (a delta holds until a
    /// later step takes it back), in one sweep.
    fn apply(&mut self, steps: &mut [(i64, Sums)]) {
        steps.sort_unstable_by_key(|s| s.0);
        let Some(first) = steps.first().map(|s| s.0) else {
            return;
        };
        for &(t, _) in steps.iter() {
            if t != FOREVER {
                self.split(t);
            }
        }
        let mut run = Sums::default();
        let mut e = 0;
        let mut k = self.idx(first);
        while k < self.t.len() {
            while e < steps.len() && steps[e].0 <= self.t[k] {
                run.add(&steps[e].1, 1);
                e += 1;
            }
            if run.is_zero() {
                if e == steps.len() {
                    break;
                }
            } else {
                self.v[k].add(&run, 1);
            }
            k += 1;
        }
    }

    fn ok(&self, k: usize, n: &Need) -> bool {
        let v = &self.v[k];
        v.cpus >= n.cpus
            && v.mem >= n.mem
            && v.empty >= n.empty
            && n.slot.is_none_or(|s| v.ge[s] >= n.count)
    }

    /// The earliest `s` in `[from, latest]` (`from` or a breakpoint) such
    /// that the sums cover `need` over all of `[s, end(s))`.
    fn first_ok(
        &self,
        from: i64,
        latest: i64,
        need: &Need,
        end: impl Fn(i64) -> i64,
    ) -> Option<i64> {
        let mut start = from;
        let mut k = self.idx(from);
        // Segments from `k` up to `good` are known to be fine.
        let mut good = k;
        loop {
            if start > latest {
                return None;
            }
            let e = end(start);
            let mut j = good.max(k);
            let mut last_bad = None;
            while j < self.t.len() && (self.t[j] < e || j == k) {
                if !self.ok(j, need) {
                    last_bad = Some(j);
                }
                j += 1;
            }
            match last_bad {
                None => return Some(start),
                Some(b) => {
                    k = b + 1;
                    good = j;
                    start = *self.t.get(k)?;
                }
            }
        }
    }
}

#[derive(Debug, Clone, Default)]
struct PartLine {
    /// Usable nodes, in placement order (weight, then index).
    order: Vec<usize>,
    /// Every node, usable or not, in placement order (the "ever" test).
    all: Vec<usize>,
    max_cpus: u32,
    agg: Agg,
    /// Free cores now → how many usable nodes have that many (> 0).
    hist_now: BTreeMap<u32, u32>,
    /// Per threshold, the nodes of `order` that have that many cores free
    /// at some time up to the horizon; the others are of no use to any
    /// search that ends there (and never will be again in this pass).
    live: [Vec<usize>; NT],
    /// How many entries of each `live` list have dropped out since it was
    /// last compacted (scans skip them anyway: their `reach` is too late).
    stale: [usize; NT],
    /// Per threshold, the first position in `order` whose node has that
    /// many cores free now. Free cores now only shrink during a pass, so
    /// nodes before it can be passed over for good.
    cursor: [usize; NT],
}

impl PartLine {
    fn track_now(&mut self, before: u32, after: u32) {
        if before == after {
            return;
        }
        if before > 0 {
            if let Some(c) = self.hist_now.get_mut(&before) {
                *c -= 1;
                if *c == 0 {
                    self.hist_now.remove(&before);
                }
            }
        }
        if after > 0 {
            *self.hist_now.entry(after).or_default() += 1;
        }
    }

    fn advance(&mut self, reach: &[i64], n: usize, now: i64) {
        for (k, c) in self.cursor.iter_mut().enumerate() {
            let r = &reach[k * n..(k + 1) * n];
            while *c < self.order.len() && r[self.order[*c]] > now {
                *c += 1;
            }
        }
    }
}

/// The time-indexed plan of free resources. Build it from the cluster view
/// at `now`, ask it where jobs fit, and reserve what you decide.
#[derive(Debug, Clone)]
pub struct Availability {
    now: i64,
    res: i64,
    /// Core-count thresholds, largest first: even steps from the largest
    /// node's cores down to 1.
    thr: [u32; NT],
    nodes: Vec<NodeLine>,
    /// `reach[k * nodes + i]`: the first time node `i` has `thr[k]` cores
    /// free ([`FOREVER`]: never).
    reach: Vec<i64>,
    parts: Vec<PartLine>,
    /// The latest start searches will ask for, and the shortest job they
    /// will ask about (see [`Availability::set_horizon`]).
    horizon: i64,
    shortest: i64,
}

impl Availability {
    /// The plan of `view` at `now`: what each node has free now, and what
    /// each running job gives back at its expected end (rounded up to
    /// `resolution` seconds; jobs without an end hold theirs forever).
    /// Nodes that are not available stay out of the plan.
    pub fn new(view: &ClusterView, now: i64, resolution: i64) -> Availability {
        let res = resolution.max(1);
        let release = |end: Option<i64>| match end {
            None => FOREVER,
            Some(e) => round_up(e.max(now.saturating_add(1)), res),
        };
        let mut nodes: Vec<NodeLine> = view
            .nodes
            .iter()
            .map(|n| NodeLine {
                cpus: n.cpus,
                mem: n.mem,
                gres: n.gres,
                weight: n.weight,
                usable: n.available,
                parts: Vec::new(),
                segs: vec![Seg {
                    t: now,
                    cpus: n.alloc_cpus,
                    mem: n.alloc_mem,
                    excl: u32::from(n.exclusive_in_use),
                    gres: n.alloc_gres,
                }],
            })
            .collect();

        // What each node gets back, and when.
        let mut back: Vec<Vec<(i64, u32, u64, GresCounts)>> = vec![Vec::new(); nodes.len()];
        // Latest release among the holders flagged exclusive, and among all.
        let mut last_excl: Vec<Option<i64>> = vec![None; nodes.len()];
        let mut last_any: Vec<Option<i64>> = vec![None; nodes.len()];
        for r in &view.running {
            let at = release(r.end);
            for a in &r.alloc {
                let Some(b) = back.get_mut(a.node) else {
                    continue;
                };
                b.push((at, a.cpus, a.mem, a.gres));
                last_any[a.node] = Some(last_any[a.node].map_or(at, |x| x.max(at)));
                if a.exclusive {
                    last_excl[a.node] = Some(last_excl[a.node].map_or(at, |x| x.max(at)));
                }
            }
        }
        for (i, node) in nodes.iter_mut().enumerate() {
            let mut ev: Vec<(i64, u32, u64, u32, GresCounts)> = back[i]
                .iter()
                .filter(|e| e.0 != FOREVER)
                .map(|&(t, c, m, g)| (t, c, m, 0, g))
                .collect();
            if node.segs[0].excl > 0 {
                // A node held whole is freed when its exclusive holder ends;
                // when none says so, when everything on it has ended.
                let at = last_excl[i].or(last_any[i]).unwrap_or(FOREVER);
                if at != FOREVER {
                    ev.push((at, 0, 0, 1, [0; MAX_GRES]));
                }
            }
            ev.sort_unstable();
            let mut cur = node.segs[0];
            for (t, c, m, x, g) in ev {
                cur.cpus = cur.cpus.saturating_sub(c);
                cur.mem = cur.mem.saturating_sub(m);
                cur.excl = cur.excl.saturating_sub(x);
                for (u, r) in cur.gres.iter_mut().zip(g) {
                    *u = u.saturating_sub(r);
                }
                cur.t = t;
                match node.segs.last_mut() {
                    Some(last) if last.t == t => *last = cur,
                    _ => node.segs.push(cur),
                }
            }
        }

        let max_cpus = nodes.iter().map(|n| n.cpus).max().unwrap_or(1);
        // Even steps from the largest node's cores down to exactly 1 (which
        // every job needs, so every job has a threshold at or below its need).
        let mut thr = [1u32; NT];
        for (k, t) in thr.iter_mut().enumerate() {
            let steps = (NT - 1) as u64;
            *t = ((u64::from(max_cpus) * (steps - k as u64) / steps) as u32).max(1);
        }
        let n = nodes.len();
        let mut reach = vec![FOREVER; NT * n];
        for (i, node) in nodes.iter().enumerate() {
            for (k, r) in node.reach(&thr, 0).into_iter().enumerate() {
                reach[k * n + i] = r;
            }
        }

        let mut parts = Vec::with_capacity(view.partitions.len());
        for (pi, p) in view.partitions.iter().enumerate() {
            let mut all: Vec<usize> = p.nodes.iter().copied().filter(|i| *i < n).collect();
            all.sort_unstable_by_key(|&i| (nodes[i].weight, i));
            all.dedup();
            let order: Vec<usize> = all.iter().copied().filter(|&i| nodes[i].usable).collect();
            let mut line = PartLine {
                max_cpus: all.iter().map(|&i| nodes[i].cpus).max().unwrap_or(0),
                order,
                all,
                ..PartLine::default()
            };
            let mut start = Sums::default();
            let mut ev: Vec<(i64, Sums)> = Vec::new();
            for k in 0..line.order.len() {
                let i = line.order[k];
                let node = &mut nodes[i];
                node.parts.push(pi);
                let f0 = node.free(&node.segs[0]);
                start.add(&Sums::of(f0, &thr), 1);
                line.track_now(0, f0.cpus);
                for w in node.segs.windows(2) {
                    let d = Sums::delta(node.free(&w[0]), node.free(&w[1]), &thr);
                    ev.push((w[1].t, d));
                }
            }
            ev.sort_unstable_by_key(|e| e.0);
            let agg = &mut line.agg;
            agg.t.push(now);
            agg.v.push(start);
            for (t, d) in ev {
                if agg.t.last() != Some(&t) {
                    agg.t.push(t);
                    agg.v.push(agg.v[agg.v.len() - 1]);
                }
                if let Some(v) = agg.v.last_mut() {
                    v.add(&d, 1);
                }
            }
            line.advance(&reach, n, now);
            parts.push(line);
        }
        let mut a = Availability {
            now,
            res,
            thr,
            nodes,
            reach,
            parts,
            horizon: FOREVER,
            shortest: 0,
        };
        a.set_horizon(FOREVER, 0);
        a
    }

    /// How many distinct instants the plan holds (when some node's use
    /// changes, `now` included): Slurm's backfill table size.
    pub fn instants(&self) -> usize {
        let mut ts: Vec<i64> = self
            .nodes
            .iter()
            .flat_map(|n| n.segs.iter().map(|s| s.t))
            .collect();
        ts.sort_unstable();
        ts.dedup();
        ts.len()
    }

    /// Promise that, until the next call, searches start no later than
    /// `latest` and are for jobs that run at least `shortest` seconds
    /// (unlimited ones count as forever), so the plan can leave out nodes
    /// that have no room that long before then. Jobs shorter than
    /// `shortest` are still answered right, only without that help.
    pub fn set_horizon(&mut self, latest: i64, shortest: i64) {
        let n = self.nodes.len();
        if shortest != self.shortest {
            self.shortest = shortest;
            for (i, node) in self.nodes.iter().enumerate() {
                for (k, r) in node.reach(&self.thr, shortest).into_iter().enumerate() {
                    self.reach[k * n + i] = r;
                }
            }
            for line in &mut self.parts {
                line.cursor = [0; NT];
                line.advance(&self.reach, n, self.now);
            }
        }
        self.horizon = latest;
        for line in &mut self.parts {
            line.stale = [0; NT];
            for (k, live) in line.live.iter_mut().enumerate() {
                let reach = &self.reach[k * n..(k + 1) * n];
                *live = line
                    .order
                    .iter()
                    .copied()
                    .filter(|&i| reach[i] <= latest)
                    .collect();
            }
        }
    }

    pub fn now(&self) -> i64 {
        self.now
    }

    /// Seconds every planned time is rounded up to.
    pub fn resolution(&self) -> i64 {
        self.res
    }

    /// Where a job starting at `start` and holding its resources for `dur`
    /// seconds (`None` = forever) ends in the plan.
    pub fn end_of(&self, start: i64, dur: Option<i64>) -> i64 {
        match dur {
            None => FOREVER,
            Some(d) => round_up(start.saturating_add(d.max(1)), self.res),
        }
    }

    /// What `node` has free over all of `[start, end)` (`None`: no core, or
    /// not in the plan).
    pub fn free_over(&self, node: usize, start: i64, end: i64) -> Option<Free> {
        let n = self.nodes.get(node)?;
        if !n.usable {
            return None;
        }
        n.window(start.max(self.now), end, 1, &[]).ok()
    }

    /// The times at which what `node` has in use changes (the first is `now`).
    pub fn breakpoints(&self, node: usize) -> Vec<i64> {
        self.nodes
            .get(node)
            .map(|n| n.segs.iter().map(|s| s.t).collect())
            .unwrap_or_default()
    }

    /// Could `job` ever run on its partition (all nodes up and empty)?
    pub fn ever_fits(&self, view: &ClusterView, job: &JobView) -> bool {
        prepare(view, job).is_ok_and(|p| self.ever_fits_prepared(view, &p))
    }

    /// Where `job` fits now for its whole time limit without touching any
    /// reservation.
    pub fn fits_now(&self, view: &ClusterView, job: &JobView) -> Option<Vec<NodeAlloc>> {
        let p = prepare(view, job).ok()?;
        self.fits_now_prepared(view, &p)
    }

    /// The earliest start in `[from, latest]` at which `job` fits for its
    /// whole time limit, and where.
    pub fn earliest_start(
        &self,
        view: &ClusterView,
        job: &JobView,
        from: i64,
        latest: i64,
    ) -> Option<(i64, Vec<NodeAlloc>)> {
        let p = prepare(view, job).ok()?;
        self.earliest_prepared(view, &p, from, latest, true)
    }

    /// Take `alloc` out of the plan over `[start, end)` (`end` =
    /// [`FOREVER`] for no limit). The caller has checked that it fits.
    pub fn reserve(&mut self, alloc: &[NodeAlloc], start: i64, end: i64) {
        let start = start.max(self.now);
        if end <= start {
            return;
        }
        let n = self.nodes.len();
        // (partition, from, change of its sums), applied in one sweep each.
        let mut steps: Vec<(usize, i64, Sums)> = Vec::new();
        for a in alloc {
            let Some(node) = self.nodes.get_mut(a.node) else {
                continue;
            };
            let before0 = node.free(&node.segs[0]).cpus;
            let ks = node.split(start);
            let ke = if end == FOREVER {
                node.segs.len()
            } else {
                node.split(end)
            };
            let mut changes: Vec<(i64, i64, Free, Free)> = Vec::with_capacity(ke - ks);
            for k in ks..ke {
                let before = node.free(&node.segs[k]);
                let s = &mut node.segs[k];
                s.cpus = s.cpus.saturating_add(a.cpus);
                s.mem = s.mem.saturating_add(a.mem);
                s.excl = s.excl.saturating_add(u32::from(a.exclusive));
                for (u, g) in s.gres.iter_mut().zip(a.gres) {
                    *u = u.saturating_add(g);
                }
                let after = node.free(&node.segs[k]);
                let to = node.segs.get(k + 1).map_or(FOREVER, |s| s.t);
                changes.push((node.segs[k].t, to, before, after));
            }
            let after0 = node.free(&node.segs[0]).cpus;
            let mut gone = [false; NT];
            for (k, r) in node.reach(&self.thr, self.shortest).into_iter().enumerate() {
                let x = &mut self.reach[k * n + a.node];
                gone[k] = *x <= self.horizon && r > self.horizon;
                *x = r;
            }
            let parts = node.parts.clone();
            for p in parts {
                let line = &mut self.parts[p];
                for (k, _) in gone.iter().enumerate().filter(|g| *g.1) {
                    line.stale[k] += 1;
                    if line.stale[k] * 8 > line.live[k].len() {
                        let reach = &self.reach[k * n..(k + 1) * n];
                        let horizon = self.horizon;
                        line.live[k].retain(|&i| reach[i] <= horizon);
                        line.stale[k] = 0;
                    }
                }
                for &(from, to, before, after) in &changes {
                    let d = Sums::delta(before, after, &self.thr);
                    if to > from && !d.is_zero() {
                        steps.push((p, from, d));
                        if to != FOREVER {
                            let mut back = Sums::default();
                            back.add(&d, -1);
                            steps.push((p, to, back));
                        }
                    }
                }
                if ks == 0 {
                    line.track_now(before0, after0);
                    line.advance(&self.reach, n, self.now);
                }
            }
        }
        steps.sort_unstable_by_key(|s| s.0);
        for group in steps.chunk_by(|a, b| a.0 == b.0) {
            let mut by_time: Vec<(i64, Sums)> = group.iter().map(|s| (s.1, s.2)).collect();
            if let Some(line) = group.first().and_then(|s| self.parts.get_mut(s.0)) {
                line.agg.apply(&mut by_time);
            }
        }
    }

    pub(crate) fn ever_fits_prepared(&self, view: &ClusterView, p: &Prepared) -> bool {
        let Some(line) = self.parts.get(p.job.partition) else {
            return false;
        };
        let job: &JobView = &p.job;
        let req = self.required(p);
        let cands = req.iter().copied().chain(
            line.all
                .iter()
                .copied()
                .filter(|i| !job.req_nodes.contains(i) && !job.exc_nodes.contains(i)),
        );
        view.topology_of(job.partition)
            .place(
                &view.nodes,
                p,
                cands,
                |i| view.nodes.get(i).map(Free::whole),
                |_| true,
                max_tasks_per_node(line.max_cpus, job),
                SelectFail::Never,
            )
            .is_ok()
    }

    pub(crate) fn fits_now_prepared(
        &self,
        view: &ClusterView,
        p: &Prepared,
    ) -> Option<Vec<NodeAlloc>> {
        let line = self.parts.get(p.job.partition)?;
        let job: &JobView = &p.job;
        let need = Need::of(p, &self.thr);
        if !line.agg.ok(0, &need) {
            return None;
        }
        // The node with the most free cores bounds what any node can take.
        let most = line.hist_now.keys().next_back().copied().unwrap_or(0);
        if most < need.node_min {
            return None;
        }
        let per_node = max_tasks_per_node(most, job);
        if job.ntasks_per_node.is_none()
            && u64::from(per_node) * u64::from(p.max_nodes) < u64::from(job.num_tasks)
        {
            return None;
        }
        let end = self.end_of(self.now, duration(job));
        self.place_at(view, p, &need, self.now, end, None).ok()
    }

    /// The reference the fast paths must agree with: every candidate start
    /// in turn, every node looked at in full, no index.
    #[cfg(test)]
    pub(crate) fn earliest_slow(
        &self,
        view: &ClusterView,
        p: &Prepared,
        from: i64,
        latest: i64,
    ) -> Option<(i64, Vec<NodeAlloc>)> {
        let line = self.parts.get(p.job.partition)?;
        let job: &JobView = &p.job;
        let from = from.max(self.now);
        let mut times: Vec<i64> = line
            .order
            .iter()
            .flat_map(|&i| self.nodes[i].segs.iter().map(|s| s.t))
            .filter(|t| *t > from && *t <= latest)
            .collect();
        times.push(from);
        times.sort_unstable();
        times.dedup();
        let req = self.required(p);
        for t in times.into_iter().filter(|t| *t <= latest) {
            let end = self.end_of(t, duration(job));
            let rest = line
                .order
                .iter()
                .copied()
                .filter(|i| !job.req_nodes.contains(i) && !job.exc_nodes.contains(i));
            let placed = view.topology_of(job.partition).place(
                &view.nodes,
                p,
                req.iter().copied().chain(rest),
                |i| {
                    let n = &self.nodes[i];
                    n.usable
                        .then(|| n.window(t, end, 1, &p.job.gres).ok())
                        .flatten()
                },
                |i| self.empty_over(i, t, end),
                max_tasks_per_node(line.max_cpus, job),
                SelectFail::Busy,
            );
            if let Ok(a) = placed {
                return Some((t, a));
            }
        }
        None
    }

    /// [`Availability::earliest_start`]; `try_now: false` when the caller
    /// knows the job does not fit now.
    pub(crate) fn earliest_prepared(
        &self,
        view: &ClusterView,
        p: &Prepared,
        from: i64,
        latest: i64,
        try_now: bool,
    ) -> Option<(i64, Vec<NodeAlloc>)> {
        let line = self.parts.get(p.job.partition)?;
        let need = Need::of(p, &self.thr);
        let dur = duration(&p.job);
        let end = |s: i64| self.end_of(s, dur);
        let mut t = from.max(self.now);
        if t == self.now && !try_now {
            t = *line.agg.t.get(1)?;
        }
        // Per node, a start before which an earlier try found it of no use.
        let mut memo: Vec<i64> = vec![i64::MIN; self.nodes.len()];
        loop {
            let s = line.agg.first_ok(t, latest, &need, end)?;
            let r = self.place_at(view, p, &need, s, end(s), Some((latest, &mut memo)));
            let bound = match r {
                Ok(a) => return Some((s, a)),
                Err(b) => b?,
            };
            let next = *line.agg.t.get(line.agg.idx(s) + 1)?;
            t = next.max(bound);
        }
    }

    /// Nothing at all uses node `i` over `[start, end)`.
    fn empty_over(&self, i: usize, start: i64, end: i64) -> bool {
        self.nodes
            .get(i)
            .is_some_and(|n| n.window(start, end, 1, &[]).is_ok_and(|f| f.empty))
    }

    /// Required nodes in placement order.
    fn required(&self, p: &Prepared) -> Vec<usize> {
        let mut req: Vec<usize> = p
            .job
            .req_nodes
            .iter()
            .copied()
            .filter(|i| *i < self.nodes.len())
            .collect();
        req.sort_unstable_by_key(|&i| (self.nodes[i].weight, i));
        req.dedup();
        req
    }

    /// Place over `[start, end)` with, per node, the least free in it.
    /// During a search (`search`: its latest start and its per-node memo),
    /// a failure comes with the next start worth trying: the job needs
    /// `min_nodes` nodes, and each node says from when on it could be of
    /// use (`None`: never within the search).
    fn place_at(
        &self,
        view: &ClusterView,
        p: &Prepared,
        need: &Need,
        start: i64,
        end: i64,
        search: Option<(i64, &mut [i64])>,
    ) -> Result<Vec<NodeAlloc>, Option<i64>> {
        let Some(line) = self.parts.get(p.job.partition) else {
            return Err(None);
        };
        let job: &JobView = &p.job;
        let n = self.nodes.len();
        let dur = duration(job);
        // The per-node index only speaks for jobs at least `shortest` long.
        let indexed = dur.is_none_or(|d| d >= self.shortest);
        let unindexed = vec![i64::MIN; if indexed { 0 } else { n }];
        let reach = if indexed {
            &self.reach[need.node_slot * n..(need.node_slot + 1) * n]
        } else {
            &unindexed[..]
        };
        let end_of = |s: i64| self.end_of(s, dur);
        // (first start that avoids what blocked the node, node)
        let mut blocked: Vec<(i64, usize)> = Vec::new();
        let (latest, mut memo) = match search {
            Some((l, m)) => (Some(l), Some(m)),
            None => (None, None),
        };
        let free = |i: usize| {
            let usable = self.nodes.get(i)?.usable;
            let r = if usable { *reach.get(i)? } else { FOREVER };
            let known = memo.as_ref().and_then(|m| m.get(i)).copied();
            let b = if r > start {
                r
            } else if let Some(m) = known.filter(|m| *m > start) {
                m
            } else {
                match self.nodes[i].window(start, end, need.node_min, &job.gres) {
                    Ok(f) => return Some(f),
                    Err(b) => b,
                }
            };
            if let Some(m) = memo.as_mut().and_then(|m| m.get_mut(i)) {
                *m = b;
            }
            if latest.is_some() {
                blocked.push((b, i));
            }
            None
        };
        let req = self.required(p);
        // Now, nodes before the cursor have too few cores free; later, nodes
        // out of the live list have too few until after the horizon.
        let (list, skip) = if !indexed {
            (&line.order, 0)
        } else if start == self.now {
            (
                &line.order,
                line.cursor[need.node_slot].min(line.order.len()),
            )
        } else if latest.is_some_and(|l| l <= self.horizon) {
            (&line.live[need.node_slot], 0)
        } else {
            (&line.order, 0)
        };
        let keep = |i: &usize| !job.req_nodes.contains(i) && !job.exc_nodes.contains(i);
        let rest = list[skip..]
            .iter()
            .copied()
            .filter(|i| reach[*i] <= start && keep(i));
        let placed = view.topology_of(job.partition).place(
            &view.nodes,
            p,
            req.iter().copied().chain(rest),
            free,
            |i| self.empty_over(i, start, end),
            max_tasks_per_node(line.max_cpus, job),
            SelectFail::Busy,
        );
        placed.map_err(|_| {
            let latest = latest?;
            if !req.is_empty() || job.min_nodes == 0 {
                return Some(start);
            }
            let candidates = list.iter().filter(|i| keep(i)).count();
            // Those with too few cores at `start` were left out above.
            blocked.extend(
                list.iter()
                    .enumerate()
                    .filter(|&(k, i)| (k < skip || reach[*i] > start) && keep(i))
                    .map(|(_, &i)| (reach[i], i)),
            );
            let k = job.min_nodes as usize;
            if candidates < k {
                return None;
            }
            // The nodes that were of use (or refused for other reasons than
            // cores) could be again right after `start`.
            let usable = candidates - blocked.len().min(candidates);
            if usable >= k {
                return Some(start);
            }
            let good = |&(b, i): &(i64, usize)| {
                self.nodes[i].next_good(b, latest, need.node_min, end_of, STEPS)
            };
            let need = k - usable;
            Some(kth_bound(&mut blocked, need, 512 + 4 * need, good)).filter(|b| *b != FOREVER)
        })
    }
}

/// A lower bound of the `k`-th smallest (1-based) of `good(x)` over `xs`,
/// where `good(x)` is never below `x.0` and costs more than a comparison.
/// Entries are refined in increasing `x.0` while they can still beat the
/// answer, at most `budget` of them past the first `k`; the bound is exact
/// unless the budget runs out.
fn kth_bound(
    xs: &mut [(i64, usize)],
    k: usize,
    budget: usize,
    good: impl Fn(&(i64, usize)) -> i64,
) -> i64 {
    if k == 0 || xs.len() < k {
        return FOREVER;
    }
    xs.select_nth_unstable(k - 1);
    let (first, rest) = xs.split_at_mut(k);
    // The k smallest refined values so far; the top is the k-th.
    let mut best: std::collections::BinaryHeap<i64> = first.iter().map(&good).collect();
    let top = |b: &std::collections::BinaryHeap<i64>| b.peek().copied().unwrap_or(FOREVER);
    let t = top(&best);
    // Smallest first, built in linear time and popped only as far as needed.
    let mut cand: std::collections::BinaryHeap<std::cmp::Reverse<(i64, usize)>> = rest
        .iter()
        .filter(|x| x.0 < t)
        .map(|x| std::cmp::Reverse(*x))
        .collect();
    let mut n = 0;
    while let Some(std::cmp::Reverse(x)) = cand.pop() {
        let t = top(&best);
        if x.0 >= t {
            break;
        }
        if n >= budget {
            // Unrefined entries are all at least x.0: either the answer is
            // below x.0 (and then it is `t`), or it is at least x.0.
            return x.0.min(t);
        }
        n += 1;
        let g = good(&x);
        if g < t {
            best.pop();
            best.push(g);
        }
    }
    top(&best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::place;
    use crate::select::tests::{cluster, job};
    use crate::view::RunningJob;

    fn alloc(node: usize, cpus: u32) -> NodeAlloc {
        NodeAlloc {
            node,
            cpus,
            mem: 0,
            tasks: cpus,
            exclusive: false,
            gres: Default::default(),
        }
    }

    fn run(v: &mut ClusterView, id: u32, end: Option<i64>, a: Vec<NodeAlloc>) {
        v.consume(&a);
        v.running.push(RunningJob {
            id,
            end,
            alloc: a,
            ..RunningJob::default()
        });
    }

    #[test]
    fn rounding() {
        assert_eq!(round_up(61, 60), 120);
        assert_eq!(round_up(120, 60), 120);
        assert_eq!(round_up(-1, 60), 0);
        assert_eq!(round_up(7, 1), 7);
        assert_eq!(round_up(i64::MAX - 3, 60), i64::MAX);
    }

    #[test]
    fn running_ends_free_resources_at_rounded_times() {
        let mut v = cluster(2, 4, 4000);
        run(&mut v, 1, Some(1000), vec![alloc(0, 4)]);
        run(&mut v, 2, None, vec![alloc(1, 2)]);
        let a = Availability::new(&v, 100, 60);
        assert_eq!(a.breakpoints(0), vec![100, 1020]);
        assert_eq!(a.breakpoints(1), vec![100]);
        assert_eq!(a.free_over(0, 100, 1020), None);
        assert_eq!(a.free_over(0, 1020, FOREVER).unwrap().cpus, 4);
        assert_eq!(a.free_over(1, 100, FOREVER).unwrap().cpus, 2);
        let big = JobView {
            num_tasks: 4,
            time_limit: Some(10),
            ..job(9)
        };
        let (t, al) = a.earliest_start(&v, &big, 100, FOREVER).unwrap();
        assert_eq!((t, al[0].node), (1020, 0));
        assert!(a.fits_now(&v, &big).is_none());
    }

    #[test]
    fn reservations_carve_the_future() {
        let v = cluster(1, 4, 4000);
        let mut a = Availability::new(&v, 0, 60);
        a.reserve(&[alloc(0, 4)], 600, 1200);
        let short = JobView {
            num_tasks: 4,
            time_limit: Some(10),
            ..job(1)
        };
        let long = JobView {
            time_limit: Some(11),
            ..short.clone()
        };
        assert!(a.fits_now(&v, &short).is_some(), "ends exactly at 600");
        assert!(a.fits_now(&v, &long).is_none());
        assert_eq!(a.earliest_start(&v, &long, 0, FOREVER).unwrap().0, 1200);
        let forever = JobView {
            time_limit: None,
            num_tasks: 1,
            ..job(2)
        };
        assert!(a.fits_now(&v, &forever).is_none());
        assert_eq!(a.earliest_start(&v, &forever, 0, FOREVER).unwrap().0, 1200);
        assert_eq!(a.earliest_start(&v, &forever, 0, 1199), None);
    }

    #[test]
    fn exclusive_holder_frees_the_node_when_it_ends() {
        let mut v = cluster(1, 4, 4000);
        let mut held = alloc(0, 4);
        held.exclusive = true;
        held.mem = 4000;
        run(&mut v, 1, Some(300), vec![held]);
        let a = Availability::new(&v, 0, 60);
        assert_eq!(a.free_over(0, 0, 300), None);
        assert!(a.free_over(0, 300, FOREVER).unwrap().empty);
    }

    #[test]
    fn fits_now_matches_place_without_reservations() {
        let mut v = cluster(3, 4, 4000);
        run(&mut v, 1, Some(500), vec![alloc(0, 3), alloc(1, 1)]);
        let a = Availability::new(&v, 0, 60);
        for j in [
            JobView {
                num_tasks: 4,
                max_nodes: 2,
                time_limit: Some(5),
                ..job(1)
            },
            JobView {
                num_tasks: 2,
                ..job(2)
            },
            JobView {
                exclusive: true,
                ..job(3)
            },
        ] {
            assert_eq!(a.fits_now(&v, &j), place(&v, &j, false).ok(), "{j:?}");
        }
    }
}
