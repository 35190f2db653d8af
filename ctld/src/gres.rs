//! Generic resources between the controller's records and the scheduling
//! core: the cluster's GRES kinds (name + type, as the nodes' `Gres=` lines
//! name them) mapped to the core's counted slots, jobs' requests mapped to
//! masks of kinds, and device indices chosen for a job on each node.
//!
//! Indices are per node and per name, in the order of the node's `Gres=`
//! line (`gpu:a100:2,gpu:v100:2` numbers the A100s 0-1 and the V100s 2-3),
//! as slurmd numbers the devices of gres.conf.

use slurm_common::gres::{parse_list, GresSpec};
use slurm_plugins::view::{GresCounts, GresReq, MAX_GRES};
use slurm_proto::GresAlloc;

/// The cluster's kinds of generic resource, at most [`MAX_GRES`].
#[derive(Debug, Clone, Default)]
pub struct GresKinds {
    pub kinds: Vec<(String, Option<String>)>,
}

/// One kind on one node: which slot, and its device indices.
#[derive(Debug, Clone)]
struct NodeKind {
    slot: usize,
    first: u32,
    count: u32,
}

impl GresKinds {
    /// Every kind the nodes' lines name; warnings for what is left out.
    pub fn of<'a>(lines: impl Iterator<Item = &'a [String]>) -> (GresKinds, Vec<String>) {
        let mut k = GresKinds::default();
        let mut warn = Vec::new();
        for line in lines {
            for item in line {
                let spec = match parse_list(item) {
                    Ok(v) => v,
                    Err(e) => {
                        warn.push(e);
                        continue;
                    }
                };
                for s in spec {
                    let key = (s.name.clone(), s.kind.clone());
                    if k.kinds.contains(&key) {
                        continue;
                    }
                    if k.kinds.len() == MAX_GRES {
                        warn.push(format!(
                            "more than {MAX_GRES} kinds of generic resource: {} ignored",
                            item
                        ));
                        continue;
                    }
                    k.kinds.push(key);
                }
            }
        }
        (k, warn)
    }

    fn slot(&self, name: &str, kind: &Option<String>) -> Option<usize> {
        self.kinds.iter().position(|(n, t)| n == name && t == kind)
    }

    fn layout(&self, gres: &[String]) -> Vec<NodeKind> {
        let mut next: Vec<(String, u32)> = Vec::new();
        let mut out = Vec::new();
        for item in gres {
            for s in parse_list(item).unwrap_or_default() {
                let Some(slot) = self.slot(&s.name, &s.kind) else {
                    continue;
                };
                let n = match next.iter_mut().find(|(n, _)| *n == s.name) {
                    Some(e) => e,
                    None => {
                        next.push((s.name.clone(), 0));
                        next.last_mut().expect("just pushed")
                    }
                };
                let count = s.count.min(u64::from(u16::MAX)) as u32;
                out.push(NodeKind {
                    slot,
                    first: n.1,
                    count,
                });
                n.1 += count;
            }
        }
        out
    }

    /// How many of each kind a node with this `Gres=` line has.
    pub fn node_counts(&self, gres: &[String]) -> GresCounts {
        let mut c = [0u16; MAX_GRES];
        for k in self.layout(gres) {
            c[k.slot] = c[k.slot].saturating_add(k.count as u16);
        }
        c
    }

    /// A job's per-node needs as masks of kinds; `Err` names a resource no
    /// node has.
    pub fn job_reqs(&self, specs: &[GresSpec]) -> Result<Vec<GresReq>, String> {
        specs
            .iter()
            .map(|s| {
                let mut mask = 0u8;
                for (i, (n, t)) in self.kinds.iter().enumerate() {
                    if *n == s.name && (s.kind.is_none() || s.kind == *t) {
                        mask |= 1 << i;
                    }
                }
                if mask == 0 {
                    return Err(format!(
                        "Invalid generic resource (gres) specification: no node has {}{}",
                        s.name,
                        s.kind
                            .as_deref()
                            .map(|k| format!(":{k}"))
                            .unwrap_or_default()
                    ));
                }
                Ok(GresReq {
                    mask,
                    count: s.count.min(u64::from(u16::MAX)) as u16,
                })
            })
            .collect()
    }

    /// Counts per kind of what a job holds on a node.
    pub fn alloc_counts(&self, held: &[GresAlloc]) -> GresCounts {
        let mut c = [0u16; MAX_GRES];
        for g in held {
            if let Some(s) = self.slot(&g.name, &g.kind) {
                c[s] = c[s].saturating_add(g.indices.len() as u16);
            }
        }
        c
    }

    /// Device indices for `want` (counts per kind) on a node with this
    /// `Gres=` line, avoiding those `busy` (held by other jobs), lowest first.
    pub fn assign(
        &self,
        gres: &[String],
        want: &GresCounts,
        busy: &[&GresAlloc],
    ) -> Vec<GresAlloc> {
        let mut out = Vec::new();
        for k in self.layout(gres) {
            let need = want[k.slot] as usize;
            let already: usize = out
                .iter()
                .filter(|g: &&GresAlloc| self.slot(&g.name, &g.kind) == Some(k.slot))
                .map(|g| g.indices.len())
                .sum();
            if need <= already {
                continue;
            }
            let (name, kind) = &self.kinds[k.slot];
            let taken = |i: u32| {
                busy.iter()
                    .any(|b| b.name == *name && b.indices.contains(&i))
            };
            let idx: Vec<u32> = (k.first..k.first + k.count)
                .filter(|i| !taken(*i))
                .take(need - already)
                .collect();
            if idx.is_empty() {
                continue;
            }
            match out
                .iter_mut()
                .find(|g: &&mut GresAlloc| g.name == *name && g.kind == *kind)
            {
                Some(g) => g.indices.extend(idx),
                None => out.push(GresAlloc {
                    name: name.clone(),
                    kind: kind.clone(),
                    indices: idx,
                }),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_counts_requests_and_indices() {
        let n1 = vec!["gpu:a100:2,gpu:v100:2".to_string()];
        let n2 = vec!["gpu:a100:4".to_string()];
        let (k, warn) = GresKinds::of([n1.as_slice(), n2.as_slice()].into_iter());
        assert!(warn.is_empty());
        assert_eq!(k.kinds.len(), 2);
        assert_eq!(k.node_counts(&n1), [2, 2, 0, 0]);
        assert_eq!(k.node_counts(&n2), [4, 0, 0, 0]);
        let any = slurm_common::gres::parse_list("gpu:3").unwrap();
        assert_eq!(k.job_reqs(&any).unwrap()[0].mask, 0b11);
        let a100 = slurm_common::gres::parse_list("gpu:a100:1").unwrap();
        assert_eq!(k.job_reqs(&a100).unwrap()[0].mask, 0b01);
        assert!(k
            .job_reqs(&slurm_common::gres::parse_list("fpga").unwrap())
            .is_err());
        // V100s are 2-3 on n1; one A100 already held.
        let held = GresAlloc {
            name: "gpu".into(),
            kind: Some("a100".into()),
            indices: vec![0],
        };
        let got = k.assign(&n1, &[1, 2, 0, 0], &[&held]);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].indices, vec![1]);
        assert_eq!(got[1].indices, vec![2, 3]);
        assert_eq!(got[1].describe(), "gpu:v100:2(IDX:2-3)");
        assert_eq!(k.alloc_counts(&got), [1, 2, 0, 0]);
    }
}
