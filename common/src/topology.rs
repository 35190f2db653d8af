//! Network topology configuration: `topology.yaml` or, when there is none,
//! `topology.conf`, beside slurm.conf.
//!
//! - `topology.conf` describes one topology, of the kind `TopologyPlugin`
//!   names: `SwitchName=s1 Switches=... Nodes=... [LinkSpeed=...]` lines
//!   for `topology/tree`; `BlockName=b1 Nodes=...` and `BlockSizes=4,16`
//!   for `topology/block`. Keys are case-insensitive, `#` starts a comment.
//! - `topology.yaml` lists named topologies (`topology:`, `cluster_default:`
//!   and one of `tree: {switches: [{switch, children, nodes}]}`,
//!   `block: {block_sizes: [...], blocks: [{block, nodes}]}` or
//!   `flat: true`); partitions pick one with `Topology=<name>`.
//!
//! Node and switch lists are hostlist expressions, expanded here.

use crate::hostlist;
use serde::Deserialize;
use std::path::Path;

/// One switch: its child switches and its own nodes (expanded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchConf {
    pub name: String,
    pub switches: Vec<String>,
    pub nodes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockConf {
    pub name: String,
    pub nodes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopologyKind {
    Flat,
    Tree(Vec<SwitchConf>),
    Block {
        /// `BlockSizes` (empty: derived from the blocks).
        sizes: Vec<u32>,
        blocks: Vec<BlockConf>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyDef {
    pub name: String,
    pub cluster_default: bool,
    pub kind: TopologyKind,
}

/// The cluster's topologies; the first is the default unless another is
/// marked `cluster_default`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopologyConf {
    pub topologies: Vec<TopologyDef>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TopologyConfError {
    #[error("{file}: {msg}")]
    Bad { file: String, msg: String },
    #[error("TopologyPlugin={0} is not a topology plugin (topology/tree, topology/block, topology/flat, topology/default)")]
    UnknownPlugin(String),
    #[error("cannot read {file}: {msg}")]
    Io { file: String, msg: String },
}

fn bad(file: &str, msg: impl Into<String>) -> TopologyConfError {
    TopologyConfError::Bad {
        file: file.to_string(),
        msg: msg.into(),
    }
}

fn expand(file: &str, what: &str, expr: &str) -> Result<Vec<String>, TopologyConfError> {
    if expr.trim().is_empty() {
        return Ok(Vec::new());
    }
    hostlist::expand(expr.trim()).map_err(|e| bad(file, format!("{what}={expr}: {e}")))
}

impl TopologyConf {
    /// The topology of the cluster whose slurm.conf is in `dir`, for
    /// `TopologyPlugin=plugin` (`None`: not set).
    pub fn load(dir: &Path, plugin: Option<&str>) -> Result<TopologyConf, TopologyConfError> {
        let read = |name: &str| -> Result<Option<String>, TopologyConfError> {
            let path = dir.join(name);
            match std::fs::read_to_string(&path) {
                Ok(s) => Ok(Some(s)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(TopologyConfError::Io {
                    file: path.display().to_string(),
                    msg: e.to_string(),
                }),
            }
        };
        if let Some(text) = read("topology.yaml")? {
            return Self::parse_yaml(&text, "topology.yaml");
        }
        let kind = match plugin.map(str::trim) {
            None | Some("") | Some("topology/default") | Some("topology/flat") => {
                return Ok(TopologyConf::default())
            }
            Some("topology/tree") => "tree",
            Some("topology/block") => "block",
            Some(other) => return Err(TopologyConfError::UnknownPlugin(other.to_string())),
        };
        match read("topology.conf")? {
            Some(text) => Self::parse_conf(&text, kind, "topology.conf"),
            None => Err(bad(
                "topology.conf",
                format!("TopologyPlugin=topology/{kind} needs topology.conf or topology.yaml beside slurm.conf"),
            )),
        }
    }

    /// `topology.conf` text for `kind` ("tree" or "block").
    pub fn parse_conf(
        text: &str,
        kind: &str,
        file: &str,
    ) -> Result<TopologyConf, TopologyConfError> {
        let mut switches = Vec::new();
        let mut blocks = Vec::new();
        let mut sizes: Vec<u32> = Vec::new();
        for (n, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let at = |m: String| bad(file, format!("line {}: {m}", n + 1));
            let mut pairs = Vec::new();
            for tok in line.split_whitespace() {
                let (k, v) = tok
                    .split_once('=')
                    .ok_or_else(|| at(format!("'{tok}' is not Key=Value")))?;
                pairs.push((k.to_ascii_lowercase(), v.to_string()));
            }
            let get = |key: &str| pairs.iter().find(|p| p.0 == key).map(|p| p.1.as_str());
            let first = pairs[0].0.as_str();
            match (first, kind) {
                ("switchname", "tree") => {
                    for (k, _) in &pairs {
                        if !matches!(
                            k.as_str(),
                            "switchname" | "switches" | "nodes" | "linkspeed"
                        ) {
                            return Err(at(format!("unknown key {k} on a SwitchName line")));
                        }
                    }
                    switches.push(SwitchConf {
                        name: pairs[0].1.clone(),
                        switches: expand(file, "Switches", get("switches").unwrap_or(""))?,
                        nodes: expand(file, "Nodes", get("nodes").unwrap_or(""))?,
                    });
                }
                ("blockname", "block") => {
                    for (k, _) in &pairs {
                        if !matches!(k.as_str(), "blockname" | "nodes") {
                            return Err(at(format!("unknown key {k} on a BlockName line")));
                        }
                    }
                    blocks.push(BlockConf {
                        name: pairs[0].1.clone(),
                        nodes: expand(file, "Nodes", get("nodes").unwrap_or(""))?,
                    });
                }
                ("blocksizes", "block") => {
                    sizes = pairs[0]
                        .1
                        .split(',')
                        .map(|s| s.trim().parse::<u32>())
                        .collect::<Result<_, _>>()
                        .map_err(|_| {
                            at(format!(
                                "BlockSizes={} is not a list of numbers",
                                pairs[0].1
                            ))
                        })?;
                }
                (k, _) => {
                    return Err(at(format!("unexpected {k} for topology/{kind}")));
                }
            }
        }
        let kind = match kind {
            "tree" => {
                if switches.is_empty() {
                    return Err(bad(file, "no SwitchName lines"));
                }
                TopologyKind::Tree(switches)
            }
            _ => {
                if blocks.is_empty() {
                    return Err(bad(file, "no BlockName lines"));
                }
                TopologyKind::Block { sizes, blocks }
            }
        };
        Ok(TopologyConf {
            topologies: vec![TopologyDef {
                name: "default".into(),
                cluster_default: true,
                kind,
            }],
        })
    }

    /// `topology.yaml` text.
    pub fn parse_yaml(text: &str, file: &str) -> Result<TopologyConf, TopologyConfError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Y {
            topology: String,
            #[serde(default)]
            cluster_default: bool,
            tree: Option<YTree>,
            block: Option<YBlock>,
            flat: Option<bool>,
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct YTree {
            switches: Vec<YSwitch>,
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct YSwitch {
            switch: String,
            #[serde(default)]
            children: Option<String>,
            #[serde(default)]
            nodes: Option<String>,
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct YBlock {
            #[serde(default)]
            block_sizes: Vec<u32>,
            blocks: Vec<YBlockDef>,
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct YBlockDef {
            block: String,
            #[serde(default)]
            nodes: Option<String>,
        }
        let list: Vec<Y> = serde_yaml::from_str(text).map_err(|e| bad(file, e.to_string()))?;
        let mut topologies = Vec::new();
        for y in list {
            let kinds = usize::from(y.tree.is_some())
                + usize::from(y.block.is_some())
                + usize::from(y.flat.is_some());
            if kinds != 1 {
                return Err(bad(
                    file,
                    format!(
                        "topology {} must have exactly one of tree, block, flat",
                        y.topology
                    ),
                ));
            }
            if topologies
                .iter()
                .any(|t: &TopologyDef| t.name == y.topology)
            {
                return Err(bad(
                    file,
                    format!("topology {} is defined twice", y.topology),
                ));
            }
            let kind = if let Some(t) = y.tree {
                TopologyKind::Tree(
                    t.switches
                        .into_iter()
                        .map(|s| {
                            Ok(SwitchConf {
                                switches: expand(
                                    file,
                                    "children",
                                    s.children.as_deref().unwrap_or(""),
                                )?,
                                nodes: expand(file, "nodes", s.nodes.as_deref().unwrap_or(""))?,
                                name: s.switch,
                            })
                        })
                        .collect::<Result<_, TopologyConfError>>()?,
                )
            } else if let Some(b) = y.block {
                TopologyKind::Block {
                    sizes: b.block_sizes,
                    blocks: b
                        .blocks
                        .into_iter()
                        .map(|d| {
                            Ok(BlockConf {
                                nodes: expand(file, "nodes", d.nodes.as_deref().unwrap_or(""))?,
                                name: d.block,
                            })
                        })
                        .collect::<Result<_, TopologyConfError>>()?,
                }
            } else {
                TopologyKind::Flat
            };
            topologies.push(TopologyDef {
                name: y.topology,
                cluster_default: y.cluster_default,
                kind,
            });
        }
        Ok(TopologyConf { topologies })
    }

    /// The index of the topology a partition with `Topology=name` uses
    /// (`None`: the cluster default). `Err` names an unknown topology.
    pub fn index_of(&self, name: Option<&str>) -> Result<usize, String> {
        match name {
            Some(n) => self
                .topologies
                .iter()
                .position(|t| t.name == n)
                .ok_or_else(|| format!("unknown topology {n}")),
            None => Ok(self
                .topologies
                .iter()
                .position(|t| t.cluster_default)
                .unwrap_or(0)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_conf() {
        let c = TopologyConf::parse_conf(
            "# two leaves\nSwitchName=s0 Nodes=n[1-2] LinkSpeed=100\nswitchname=s1 nodes=n[3-4]\nSwitchName=top Switches=s[0-1]\n",
            "tree",
            "topology.conf",
        )
        .unwrap();
        let TopologyKind::Tree(s) = &c.topologies[0].kind else {
            panic!("not a tree")
        };
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].nodes, vec!["n1", "n2"]);
        assert_eq!(s[2].switches, vec!["s0", "s1"]);
        let e = TopologyConf::parse_conf("SwitchName=s0 Nodez=n1\n", "tree", "topology.conf");
        assert_eq!(
            e.unwrap_err().to_string(),
            "topology.conf: line 1: unknown key nodez on a SwitchName line"
        );
        assert!(TopologyConf::parse_conf("BlockName=b1 Nodes=n1\n", "tree", "t").is_err());
    }

    #[test]
    fn block_conf() {
        let c = TopologyConf::parse_conf(
            "BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[5-8]\nBlockSizes=4,8\n",
            "block",
            "topology.conf",
        )
        .unwrap();
        assert_eq!(
            c.topologies[0].kind,
            TopologyKind::Block {
                sizes: vec![4, 8],
                blocks: vec![
                    BlockConf {
                        name: "b1".into(),
                        nodes: vec!["n1".into(), "n2".into(), "n3".into(), "n4".into()]
                    },
                    BlockConf {
                        name: "b2".into(),
                        nodes: vec!["n5".into(), "n6".into(), "n7".into(), "n8".into()]
                    },
                ]
            }
        );
        assert!(TopologyConf::parse_conf("BlockSizes=4,x\n", "block", "t").is_err());
        assert!(TopologyConf::parse_conf("BlockSizes=4\n", "block", "t").is_err());
    }

    #[test]
    fn yaml() {
        let text = "
- topology: fabric
  cluster_default: false
  tree:
    switches:
      - switch: top
        children: s[0-1]
      - switch: s0
        nodes: n[1-2]
      - switch: s1
        nodes: n[3-4]
- topology: nvl
  cluster_default: true
  block:
    block_sizes: [2]
    blocks:
      - block: b1
        nodes: n[1-2]
      - block: b2
        nodes: n[3-4]
- topology: none
  flat: true
";
        let c = TopologyConf::parse_yaml(text, "topology.yaml").unwrap();
        assert_eq!(c.topologies.len(), 3);
        assert_eq!(c.index_of(None), Ok(1));
        assert_eq!(c.index_of(Some("fabric")), Ok(0));
        assert!(c.index_of(Some("nope")).is_err());
        assert_eq!(c.topologies[2].kind, TopologyKind::Flat);
        let TopologyKind::Tree(s) = &c.topologies[0].kind else {
            panic!("not a tree")
        };
        assert_eq!(s[0].switches, vec!["s0", "s1"]);
        let both = "- topology: x\n  flat: true\n  block:\n    blocks: []\n";
        assert!(TopologyConf::parse_yaml(both, "topology.yaml")
            .unwrap_err()
            .to_string()
            .contains("exactly one of tree, block, flat"));
        assert!(
            TopologyConf::parse_yaml("- topology: x\n  flat: true\n  bogus: 1\n", "t").is_err()
        );
    }

    #[test]
    fn load_picks_yaml_then_conf() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(
            TopologyConf::load(d.path(), None).unwrap(),
            TopologyConf::default()
        );
        assert!(matches!(
            TopologyConf::load(d.path(), Some("topology/tree")),
            Err(TopologyConfError::Bad { .. })
        ));
        assert!(matches!(
            TopologyConf::load(d.path(), Some("topology/3d_torus")),
            Err(TopologyConfError::UnknownPlugin(_))
        ));
        std::fs::write(d.path().join("topology.conf"), "SwitchName=s0 Nodes=n1\n").unwrap();
        let c = TopologyConf::load(d.path(), Some("topology/tree")).unwrap();
        assert!(matches!(c.topologies[0].kind, TopologyKind::Tree(_)));
        std::fs::write(
            d.path().join("topology.yaml"),
            "- topology: f\n  flat: true\n",
        )
        .unwrap();
        let c = TopologyConf::load(d.path(), Some("topology/tree")).unwrap();
        assert_eq!(c.topologies[0].kind, TopologyKind::Flat);
    }
}
