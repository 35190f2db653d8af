//! The cluster's network topologies (`topology.yaml`, or `topology.conf`
//! with `TopologyPlugin`), resolved to node indices for the scheduling
//! core: read the same way by the controller and the simulator.

use crate::conf::SlurmConf;
use crate::topology::{TopologyConf, TopologyKind};
use slurm_plugins::topo::{Block, Blocks, SwitchDef, Topology, Tree};
use std::collections::HashMap;
use std::sync::Arc;

/// The topologies and which one each partition uses.
#[derive(Debug, Clone, Default)]
pub struct Topologies {
    pub list: Arc<Vec<Topology>>,
    /// Partition name → index into `list` (absent: the cluster default).
    pub by_partition: HashMap<String, usize>,
    pub default: usize,
    /// Partitions with `ExclusiveTopo=YES`.
    pub exclusive: std::collections::HashSet<String>,
    /// Every switch and block, for `scontrol show topology`.
    pub entries: Arc<Vec<slurm_proto::TopologyEntry>>,
}

impl Topologies {
    pub fn of_partition(&self, name: &str) -> usize {
        self.by_partition.get(name).copied().unwrap_or(self.default)
    }
}

/// Read and check the topology of `conf`; `nodes` are the configured node
/// names in index order.
pub fn load(conf: &SlurmConf, nodes: &[String]) -> Result<Topologies, String> {
    let dir = conf
        .path
        .parent()
        .map(|p| p.to_path_buf())
        .unwrap_or_default();
    let tc = TopologyConf::load(&dir, conf.get("TopologyPlugin")).map_err(|e| e.to_string())?;
    resolve(tc, conf, nodes)
}

fn resolve(tc: TopologyConf, conf: &SlurmConf, nodes: &[String]) -> Result<Topologies, String> {
    let index: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let find = |topo: &str, n: &String| {
        index
            .get(n.as_str())
            .copied()
            .ok_or_else(|| format!("topology {topo}: node {n} is not in slurm.conf"))
    };
    let mut list = Vec::new();
    for t in &tc.topologies {
        let topo = match &t.kind {
            TopologyKind::Flat => Topology::Flat,
            TopologyKind::Tree(switches) => {
                let defs = switches
                    .iter()
                    .map(|s| {
                        Ok(SwitchDef {
                            name: s.name.clone(),
                            switches: s.switches.clone(),
                            nodes: s
                                .nodes
                                .iter()
                                .map(|n| find(&t.name, n))
                                .collect::<Result<_, String>>()?,
                        })
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                Topology::Tree(
                    Tree::new(&defs, nodes.len())
                        .map_err(|e| format!("topology {}: {e}", t.name))?,
                )
            }
            TopologyKind::Block { sizes, blocks } => {
                let blocks = blocks
                    .iter()
                    .map(|b| {
                        Ok(Block {
                            name: b.name.clone(),
                            nodes: b
                                .nodes
                                .iter()
                                .map(|n| find(&t.name, n))
                                .collect::<Result<_, String>>()?,
                        })
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                Topology::Block(
                    Blocks::new(blocks, sizes, nodes.len(), |i| nodes[i].clone())
                        .map_err(|e| format!("topology {}: {e}", t.name))?,
                )
            }
        };
        list.push(topo);
    }
    let default = tc.index_of(None).unwrap_or(0);
    let mut by_partition = HashMap::new();
    for p in &conf.partitions {
        if let Some((_, v)) = p
            .extra
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("Topology"))
        {
            let i = tc
                .index_of(Some(v))
                .map_err(|e| format!("PartitionName={}: Topology={v}: {e}", p.name))?;
            by_partition.insert(p.name.clone(), i);
        }
    }
    let exclusive = conf
        .partitions
        .iter()
        .filter(|p| {
            p.extra.iter().any(|(k, v)| {
                k.eq_ignore_ascii_case("ExclusiveTopo")
                    && (v.eq_ignore_ascii_case("YES") || v.eq_ignore_ascii_case("TRUE") || v == "1")
            })
        })
        .map(|p| p.name.clone())
        .collect();
    let entries = Arc::new(entries_of(&tc, &list, nodes));
    Ok(Topologies {
        list: Arc::new(list),
        by_partition,
        default,
        exclusive,
        entries,
    })
}

/// The switches and blocks of `list` (resolved from `tc`) by name.
fn entries_of(
    tc: &TopologyConf,
    list: &[Topology],
    nodes: &[String],
) -> Vec<slurm_proto::TopologyEntry> {
    let names = |idx: &[usize]| idx.iter().filter_map(|i| nodes.get(*i).cloned()).collect();
    let mut out = Vec::new();
    for (t, topo) in tc.topologies.iter().zip(list) {
        match (&t.kind, topo) {
            (TopologyKind::Tree(conf), Topology::Tree(tree)) => {
                for (c, sw) in conf.iter().zip(&tree.switches) {
                    out.push(slurm_proto::TopologyEntry {
                        topology: t.name.clone(),
                        block: false,
                        name: sw.name.clone(),
                        level: sw.level,
                        nodes: names(&sw.nodes),
                        switches: c.switches.clone(),
                    });
                }
            }
            (_, Topology::Block(b)) => {
                for (k, blk) in b.blocks.iter().enumerate() {
                    out.push(slurm_proto::TopologyEntry {
                        topology: t.name.clone(),
                        block: true,
                        name: blk.name.clone(),
                        level: k as u32,
                        nodes: names(&blk.nodes),
                        switches: Vec::new(),
                    });
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(dir: &std::path::Path, extra: &str) -> SlurmConf {
        let text = format!(
            "ClusterName=t\nSlurmctldHost=h\nNodeName=n[1-4] CPUs=2\nPartitionName=p Nodes=ALL {extra}\n"
        );
        let path = dir.join("slurm.conf");
        std::fs::write(&path, &text).unwrap();
        SlurmConf::load(&path).unwrap()
    }

    #[test]
    fn resolves_names_and_refuses_unknown_ones() {
        let d = tempfile::tempdir().unwrap();
        let names: Vec<String> = (1..=4).map(|i| format!("n{i}")).collect();
        std::fs::write(
            d.path().join("topology.yaml"),
            "- topology: blocks\n  block:\n    blocks:\n      - block: b1\n        nodes: n[1-2]\n      - block: b2\n        nodes: n[3-4]\n- topology: flat\n  flat: true\n",
        )
        .unwrap();
        let c = conf(d.path(), "Topology=flat");
        let t = load(&c, &names).unwrap();
        assert_eq!(t.list.len(), 2);
        assert!(matches!(t.list[0], Topology::Block(_)));
        assert_eq!(t.of_partition("p"), 1);
        assert_eq!(t.of_partition("other"), 0);

        let c = conf(d.path(), "Topology=nosuch");
        assert!(load(&c, &names).unwrap_err().contains("Topology=nosuch"));

        std::fs::write(
            d.path().join("topology.yaml"),
            "- topology: t\n  tree:\n    switches:\n      - switch: s1\n        nodes: n[1-9]\n",
        )
        .unwrap();
        let c = conf(d.path(), "");
        assert_eq!(
            load(&c, &names).unwrap_err(),
            "topology t: node n5 is not in slurm.conf"
        );
    }
}
