//! `srun --cpu-bind` and `--distribution`: which CPUs each task of a step
//! may run on.
//!
//! `[verbose,]none|no|cores|threads|sockets|ldoms|rank|map_cpu:<ids>|
//! mask_cpu:<masks>`. Tasks are bound within the CPUs the job has on the
//! node. `threads` hands out single CPUs, `cores` (and `rank`) whole cores
//! (every thread of the job on them), `sockets` (and `ldoms`) every CPU of
//! the job on the sockets the task's cores sit on; a task of
//! `cpus_per_task` CPUs gets that many threads, or enough cores for them.
//! Across sockets the units go by the distribution's second part
//! (`-m block:cyclic`): `cyclic` (the default) gives task k its units from
//! socket k mod S, `block` fills one socket before the next, `fcyclic`
//! takes each unit of a task from the next socket round-robin. `map_cpu`
//! and `mask_cpu` name CPUs per local task id (cycling when there are more
//! tasks than entries).

/// A parsed `--cpu-bind`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuBind {
    pub verbose: bool,
    pub kind: BindKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindKind {
    None,
    /// Single CPUs (hardware threads).
    Threads,
    /// Whole cores (`cores`, `rank`).
    Cores,
    /// Every CPU of the job on the task's sockets (`sockets`, `ldoms`).
    Sockets,
    Map(Vec<u32>),
    /// CPU bit masks.
    Mask(Vec<u128>),
}

/// How a node's CPUs go to tasks across sockets: the second part of
/// `--distribution` (`block:cyclic`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SocketDist {
    Block,
    #[default]
    Cyclic,
    FCyclic,
}

/// Parse `--distribution` / `SLURM_DISTRIBUTION`:
/// `{*|block|cyclic}[:{*|block|cyclic|fcyclic}[:{*|block|cyclic|fcyclic}]][,Pack|NoPack]`;
/// the distribution across sockets. `plane` and `arbitrary` are refused
/// (not supported), as is anything malformed.
pub fn parse_distribution(s: &str) -> Result<SocketDist, String> {
    let bad = || format!("Invalid --distribution specification: {s}");
    let lower = s.trim().to_ascii_lowercase();
    let (levels, pack) = match lower.split_once(',') {
        Some((l, p)) => (l, Some(p)),
        None => (lower.as_str(), None),
    };
    if pack.is_some_and(|p| p != "pack" && p != "nopack") {
        return Err(bad());
    }
    let parts: Vec<&str> = levels.split(':').collect();
    if parts.len() > 3 {
        return Err(bad());
    }
    match parts[0] {
        "" if pack.is_some() && parts.len() == 1 => {}
        "*" | "block" | "cyclic" => {}
        p if p == "arbitrary" || p.starts_with("plane") => {
            return Err(format!(
                "--distribution={s}: the {} distribution is not supported",
                p.split('=').next().unwrap_or(p)
            ))
        }
        _ => return Err(bad()),
    }
    let level = |p: Option<&&str>| -> Result<Option<SocketDist>, String> {
        Ok(match p.copied() {
            None | Some("*") => None,
            Some("block") => Some(SocketDist::Block),
            Some("cyclic") => Some(SocketDist::Cyclic),
            Some("fcyclic") => Some(SocketDist::FCyclic),
            Some(_) => return Err(bad()),
        })
    };
    let sockets = level(parts.get(1))?;
    level(parts.get(2))?;
    Ok(sockets.unwrap_or_default())
}

/// Where a CPU sits: (kernel id, socket, core within the socket).
pub type CpuPlace = (u32, u32, u32);

fn num(s: &str) -> Option<u32> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

impl CpuBind {
    pub fn parse(s: &str) -> Result<CpuBind, String> {
        let bad = || format!("invalid --cpu-bind argument: {s}");
        let mut b = CpuBind {
            verbose: false,
            kind: BindKind::None,
        };
        // Lists after map_cpu:/mask_cpu: use commas too: take the rest.
        let mut rest = s.trim();
        loop {
            let (word, tail) = match rest.find(',') {
                Some(i) if !rest[..i].contains(':') => (&rest[..i], Some(&rest[i + 1..])),
                _ => (rest, None),
            };
            let lw = word.to_ascii_lowercase();
            match lw.as_str() {
                "verbose" | "v" => b.verbose = true,
                "quiet" | "q" => b.verbose = false,
                "none" | "no" => b.kind = BindKind::None,
                "threads" => b.kind = BindKind::Threads,
                "cores" | "rank" => b.kind = BindKind::Cores,
                "sockets" | "ldoms" | "rank_ldom" => b.kind = BindKind::Sockets,
                _ => {
                    if let Some(l) = lw.strip_prefix("map_cpu:") {
                        let v: Option<Vec<u32>> = l.split(',').map(num).collect();
                        b.kind = BindKind::Map(v.filter(|v| !v.is_empty()).ok_or_else(bad)?);
                    } else if let Some(l) = lw.strip_prefix("mask_cpu:") {
                        let v: Option<Vec<u128>> = l
                            .split(',')
                            .map(|m| {
                                let h = m.trim_start_matches("0x");
                                u128::from_str_radix(h, 16).ok().filter(|v| *v != 0)
                            })
                            .collect();
                        b.kind = BindKind::Mask(v.filter(|v| !v.is_empty()).ok_or_else(bad)?);
                    } else {
                        return Err(bad());
                    }
                }
            }
            match tail {
                Some(t) if !t.is_empty() => rest = t,
                _ => break,
            }
        }
        Ok(b)
    }

    /// The CPUs task `local` gets (see [`CpuBind::layout`]); `None`: not
    /// bound.
    pub fn cpus_for(
        &self,
        local: u32,
        cpus_per_task: u32,
        job_cpus: &[u32],
        topo: &[CpuPlace],
        dist: SocketDist,
    ) -> Option<Vec<u32>> {
        self.layout(local + 1, cpus_per_task, job_cpus, topo, dist)
            .pop()
            .flatten()
    }

    /// The CPUs each of a node's `tasks` tasks (by local id) gets, from
    /// the job's CPUs on the node (kernel ids) placed on sockets and cores
    /// by `topo` (CPUs it does not list count as cores of socket 0); `None`
    /// for a task not bound.
    pub fn layout(
        &self,
        tasks: u32,
        cpus_per_task: u32,
        job_cpus: &[u32],
        topo: &[CpuPlace],
        dist: SocketDist,
    ) -> Vec<Option<Vec<u32>>> {
        let tasks = tasks as usize;
        match &self.kind {
            BindKind::None => vec![None; tasks],
            BindKind::Threads | BindKind::Cores | BindKind::Sockets => {
                let units = units(self.kind == BindKind::Threads, job_cpus, topo, dist);
                if units.is_empty() {
                    return vec![None; tasks];
                }
                let per = units[0].1.len().max(1) as u32;
                let n = cpus_per_task.max(1).div_ceil(per) as usize;
                pick_all(&units, n, tasks, dist)
                    .into_iter()
                    .map(|picked| {
                        let mut out: Vec<u32> = if self.kind == BindKind::Sockets {
                            let sockets: Vec<u32> = picked.iter().map(|&u| units[u].0).collect();
                            units
                                .iter()
                                .filter(|u| sockets.contains(&u.0))
                                .flat_map(|u| u.1.iter().copied())
                                .collect()
                        } else {
                            picked
                                .iter()
                                .flat_map(|&u| units[u].1.iter().copied())
                                .collect()
                        };
                        out.sort_unstable();
                        out.dedup();
                        Some(out)
                    })
                    .collect()
            }
            BindKind::Map(v) => (0..tasks).map(|k| Some(vec![v[k % v.len()]])).collect(),
            BindKind::Mask(v) => (0..tasks)
                .map(|k| {
                    let m = v[k % v.len()];
                    Some((0..128).filter(|b| m & (1u128 << b) != 0).collect())
                })
                .collect(),
        }
    }
}

/// The job's CPUs as binding units, ordered by socket: each a (socket, its
/// CPUs); a core's CPUs, or one CPU for `threads` (then, unless the
/// distribution is `block`, the first thread of every core of a socket
/// before any second one: the third distribution level inherits the
/// second).
fn units(
    threads: bool,
    job_cpus: &[u32],
    topo: &[CpuPlace],
    dist: SocketDist,
) -> Vec<(u32, Vec<u32>)> {
    let mut placed: Vec<(u32, u32, u32)> = job_cpus
        .iter()
        .map(|&id| match topo.iter().find(|p| p.0 == id) {
            Some(&(_, socket, core)) => (socket, core, id),
            // Unknown to the topology: a core of its own on socket 0.
            None => (0, (1 << 31) | id, id),
        })
        .collect();
    placed.sort_unstable();
    let mut out: Vec<(u32, u32, Vec<u32>)> = Vec::new();
    for (socket, core, id) in placed {
        match out.last_mut() {
            Some(u) if !threads && u.0 == socket && u.1 == core => u.2.push(id),
            _ => out.push((socket, core, vec![id])),
        }
    }
    if threads && dist != SocketDist::Block {
        // Rank of each thread within its core, then reorder socket-wise.
        let mut rank = vec![0u32; out.len()];
        for i in 1..out.len() {
            if out[i].0 == out[i - 1].0 && out[i].1 == out[i - 1].1 {
                rank[i] = rank[i - 1] + 1;
            }
        }
        let mut idx: Vec<usize> = (0..out.len()).collect();
        idx.sort_by_key(|&i| (out[i].0, rank[i], out[i].1, out[i].2[0]));
        return idx
            .into_iter()
            .map(|i| (out[i].0, out[i].2.clone()))
            .collect();
    }
    out.into_iter().map(|(s, _, c)| (s, c)).collect()
}

/// Which `n` units (indices into `units`, ordered by socket) each of
/// `tasks` tasks gets under `dist`, in task order, so tasks share units
/// only once every unit is taken (then the layout starts over).
fn pick_all(
    units: &[(u32, Vec<u32>)],
    n: usize,
    tasks: usize,
    dist: SocketDist,
) -> Vec<Vec<usize>> {
    if dist == SocketDist::Block {
        return (0..tasks)
            .map(|k| (0..n).map(|i| (k * n + i) % units.len()).collect())
            .collect();
    }
    // Units of each socket, in order.
    let mut sockets: Vec<Vec<usize>> = Vec::new();
    for (i, u) in units.iter().enumerate() {
        match sockets.last_mut() {
            Some(s) if units[s[0]].0 == u.0 => s.push(i),
            _ => sockets.push(vec![i]),
        }
    }
    let mut next = vec![0usize; sockets.len()];
    let mut left = units.len();
    // The socket the next unit comes from (fcyclic), or the next task's.
    let mut turn = 0usize;
    let take = |from: usize, next: &mut Vec<usize>, left: &mut usize| -> (usize, usize) {
        if *left == 0 {
            next.iter_mut().for_each(|x| *x = 0);
            *left = units.len();
        }
        let mut s = from % sockets.len();
        while next[s] >= sockets[s].len() {
            s = (s + 1) % sockets.len();
        }
        let u = sockets[s][next[s]];
        next[s] += 1;
        *left -= 1;
        (u, s)
    };
    let mut all = Vec::with_capacity(tasks);
    for t in 0..tasks {
        let start = if dist == SocketDist::Cyclic {
            t % sockets.len()
        } else {
            turn
        };
        let mut s = start;
        let mut mine = Vec::with_capacity(n);
        for _ in 0..n {
            let (u, at) = take(s, &mut next, &mut left);
            mine.push(u);
            s = if dist == SocketDist::FCyclic {
                at + 1
            } else {
                at
            };
        }
        turn = s;
        all.push(mine);
    }
    all
}

/// `0x5` for CPUs 0 and 2 (what verbose binding prints).
pub fn mask_hex(cpus: &[u32]) -> String {
    let mut m: u128 = 0;
    for &c in cpus.iter().filter(|c| **c < 128) {
        m |= 1u128 << c;
    }
    format!("0x{m:X}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_per_task_cpus() {
        let b = CpuBind::parse("verbose,map_cpu:1,0x3").unwrap();
        assert!(b.verbose);
        assert_eq!(b.kind, BindKind::Map(vec![1, 3]));
        let none: &[CpuPlace] = &[];
        let d = SocketDist::Cyclic;
        assert_eq!(b.cpus_for(1, 1, &[], none, d), Some(vec![3]));
        assert_eq!(b.cpus_for(2, 1, &[], none, d), Some(vec![1]));
        // No topology: every CPU a core of socket 0, in the job's order.
        let b = CpuBind::parse("cores").unwrap();
        assert_eq!(b.cpus_for(1, 2, &[4, 5, 6, 7], none, d), Some(vec![6, 7]));
        let b = CpuBind::parse("mask_cpu:0x5,0x2").unwrap();
        assert_eq!(b.cpus_for(0, 1, &[], none, d), Some(vec![0, 2]));
        assert_eq!(
            CpuBind::parse("none")
                .unwrap()
                .cpus_for(0, 1, &[1], none, d),
            None
        );
        assert!(CpuBind::parse("bogus").is_err());
        assert!(CpuBind::parse("map_cpu:x").is_err());
        assert_eq!(mask_hex(&[0, 2]), "0x5");
    }

    /// Two sockets of two cores of two threads: CPU ids as Linux numbers
    /// them (siblings 8 apart), the job holding all of them.
    fn two_sockets() -> (Vec<CpuPlace>, Vec<u32>) {
        let mut topo = Vec::new();
        for socket in 0..2u32 {
            for core in 0..2u32 {
                let id = socket * 2 + core;
                topo.push((id, socket, core));
                topo.push((id + 8, socket, core));
            }
        }
        let cpus = topo.iter().map(|p| p.0).collect();
        (topo, cpus)
    }

    fn layout(bind: &str, dist: &str, tasks: u32, cpt: u32) -> Vec<Vec<u32>> {
        let (topo, cpus) = two_sockets();
        let b = CpuBind::parse(bind).unwrap();
        let d = parse_distribution(dist).unwrap();
        (0..tasks)
            .map(|k| b.cpus_for(k, cpt, &cpus, &topo, d).unwrap())
            .collect()
    }

    #[test]
    fn tasks_spread_over_sockets_by_the_distribution() {
        // cyclic (the default): task k on socket k mod 2, whole cores.
        assert_eq!(
            layout("cores", "block", 4, 1),
            vec![vec![0, 8], vec![2, 10], vec![1, 9], vec![3, 11]]
        );
        // block:block fills socket 0 first.
        assert_eq!(
            layout("cores", "block:block", 4, 1),
            vec![vec![0, 8], vec![1, 9], vec![2, 10], vec![3, 11]]
        );
        // A task of two cores stays on one socket under cyclic...
        assert_eq!(
            layout("cores", "cyclic:cyclic", 2, 4),
            vec![vec![0, 1, 8, 9], vec![2, 3, 10, 11]]
        );
        // ... and takes one core per socket under fcyclic.
        assert_eq!(
            layout("cores", "block:fcyclic", 2, 4),
            vec![vec![0, 2, 8, 10], vec![1, 3, 9, 11]]
        );
        // threads: single CPUs, alternating sockets, cores before their
        // second threads; block:block takes both threads of a core first.
        assert_eq!(
            layout("threads", "block:cyclic", 4, 1),
            vec![vec![0], vec![2], vec![1], vec![3]]
        );
        assert_eq!(
            layout("threads", "block:block", 3, 1),
            vec![vec![0], vec![8], vec![1]]
        );
        // sockets: every CPU of the task's socket.
        assert_eq!(
            layout("sockets", "block:cyclic", 2, 1),
            vec![vec![0, 1, 8, 9], vec![2, 3, 10, 11]]
        );
        // More tasks than cores: the layout starts over.
        assert_eq!(layout("cores", "block:block", 5, 1)[4], vec![0, 8]);
        assert_eq!(layout("cores", "block:cyclic", 6, 1)[4], vec![0, 8]);
    }

    #[test]
    fn distribution_syntax() {
        assert_eq!(parse_distribution("block"), Ok(SocketDist::Cyclic));
        assert_eq!(parse_distribution("*:block"), Ok(SocketDist::Block));
        assert_eq!(
            parse_distribution("cyclic:fcyclic:block,Pack"),
            Ok(SocketDist::FCyclic)
        );
        for bad in ["sideways", "block:up", "block:block:block:block", "block,x"] {
            assert!(parse_distribution(bad).is_err(), "{bad}");
        }
        let e = parse_distribution("plane=4").unwrap_err();
        assert!(e.contains("plane distribution is not supported"), "{e}");
        assert!(parse_distribution("arbitrary").is_err());
    }
}
