//! `srun --cpu-bind`: which CPUs each task of a step may run on.
//!
//! `[verbose,]none|no|cores|threads|sockets|ldoms|rank|map_cpu:<ids>|
//! mask_cpu:<masks>`. Tasks are bound within the CPUs the job has on the
//! node: `cores`/`threads`/`rank` give the k-th task (local id) the k-th
//! run of `cpus_per_task` CPUs; `map_cpu` and `mask_cpu` name CPUs per local
//! task id (cycling when there are more tasks than entries).

/// A parsed `--cpu-bind`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuBind {
    pub verbose: bool,
    pub kind: BindKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BindKind {
    None,
    /// Consecutive runs of the job's CPUs (cores, threads, rank, ...).
    Block,
    Map(Vec<u32>),
    /// CPU bit masks.
    Mask(Vec<u128>),
}

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
                "cores" | "threads" | "sockets" | "ldoms" | "rank" | "rank_ldom" => {
                    b.kind = BindKind::Block
                }
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

    /// The CPUs task `local` gets, from the job's CPUs on the node (kernel
    /// ids, in allocation order); `None`: not bound.
    pub fn cpus_for(&self, local: u32, cpus_per_task: u32, job_cpus: &[u32]) -> Option<Vec<u32>> {
        let k = local as usize;
        match &self.kind {
            BindKind::None => None,
            BindKind::Block => {
                if job_cpus.is_empty() {
                    return None;
                }
                let cpt = cpus_per_task.max(1) as usize;
                Some(
                    (0..cpt)
                        .map(|i| job_cpus[(k * cpt + i) % job_cpus.len()])
                        .collect(),
                )
            }
            BindKind::Map(v) => Some(vec![v[k % v.len()]]),
            BindKind::Mask(v) => {
                let m = v[k % v.len()];
                Some((0..128).filter(|b| m & (1u128 << b) != 0).collect())
            }
        }
    }
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
        assert_eq!(b.cpus_for(1, 1, &[]), Some(vec![3]));
        assert_eq!(b.cpus_for(2, 1, &[]), Some(vec![1]));
        let b = CpuBind::parse("cores").unwrap();
        assert_eq!(b.cpus_for(1, 2, &[4, 5, 6, 7]), Some(vec![6, 7]));
        let b = CpuBind::parse("mask_cpu:0x5,0x2").unwrap();
        assert_eq!(b.cpus_for(0, 1, &[]), Some(vec![0, 2]));
        assert_eq!(CpuBind::parse("none").unwrap().cpus_for(0, 1, &[1]), None);
        assert!(CpuBind::parse("bogus").is_err());
        assert!(CpuBind::parse("map_cpu:x").is_err());
        assert_eq!(mask_hex(&[0, 2]), "0x5");
    }
}
