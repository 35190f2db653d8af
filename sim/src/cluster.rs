//! The simulated machine: nodes and partitions as the scheduling core sees
//! them, and the scheduler that drives it, from a `slurm.conf` or from a
//! flat `N nodes x C cpus` description.

use slurm_common::conf::{PartitionStateConf, SlurmConf};
use slurm_plugins::registry;
use slurm_plugins::{ClusterView, NodeView, PartitionView, Scheduler};

/// Nodes, partitions and scheduler settings of one simulation.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    /// Nodes and partitions, nothing allocated, nothing running.
    pub view: ClusterView,
    /// Index of the partition jobs go to unless told otherwise.
    pub default_partition: usize,
    /// `SchedulerType`.
    pub scheduler_type: String,
    /// `SchedulerParameters` as one comma-separated string.
    pub scheduler_params: String,
    /// `Licenses=`: name and count.
    pub licenses: Vec<(String, u32)>,
    /// `PreemptType`: who preempts whom, and how each partition's jobs
    /// go (`None`: no preemption).
    pub preempt: Option<Preemption>,
    /// Accounts, users and QOS with their limits (a case's `account:`,
    /// `user:`, `qos:` lines; `None`: nothing enforced).
    pub accounting: Option<crate::accounting::Accounting>,
    /// Per partition, `OverSubscribe=YES[:N]` or `FORCE[:N]`: (forced, N).
    pub sharing: Vec<Option<(bool, u32)>>,
    /// `PreemptMode=...,GANG`: jobs sharing cores take turns, every this
    /// many seconds (`SchedulerTimeSlice`).
    pub gang_slice: Option<i64>,
}

/// Which jobs may preempt which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreemptKind {
    /// `preempt/partition_prio`: jobs of a partition with a higher
    /// `PriorityTier` preempt those of lower ones.
    PartitionTier,
    /// `preempt/qos`: a job preempts jobs whose QOS its QOS lists in
    /// `Preempt=`.
    Qos,
}

/// `PreemptType` and the `PreemptMode` of each partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preemption {
    pub kind: PreemptKind,
    /// Per partition (a QOS's own mode comes first for its jobs).
    pub modes: Vec<PreemptMode>,
}

/// How a preempted job goes, where the simulator models it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreemptMode {
    Off,
    /// Ended (PREEMPTED).
    Cancel,
    /// Back in the queue, to run again from the start.
    Requeue,
    /// Stopped in place (its cores given up, its memory kept), resumed
    /// when its cores are free again, its clock stopped meanwhile.
    Suspend,
}

/// `PreemptMode` as the simulator models it (its first word; `GANG` alone
/// preempts nothing): `Err` names what it does not.
pub(crate) fn preempt_mode(v: &str) -> Result<PreemptMode, String> {
    match v
        .split(',')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_uppercase()
        .as_str()
    {
        "OFF" | "" | "GANG" => Ok(PreemptMode::Off),
        "SUSPEND" => Ok(PreemptMode::Suspend),
        "CANCEL" => Ok(PreemptMode::Cancel),
        "REQUEUE" => Ok(PreemptMode::Requeue),
        other => Err(other.to_string()),
    }
}

/// `conf`'s preemption, when it preempts in a way the simulator models.
fn preemption(conf: &SlurmConf) -> Option<Preemption> {
    let kind = match conf.get("PreemptType").map(str::trim) {
        Some("preempt/partition_prio") => PreemptKind::PartitionTier,
        Some("preempt/qos") => PreemptKind::Qos,
        _ => return None,
    };
    let cluster = preempt_mode(conf.get("PreemptMode").unwrap_or("OFF")).ok()?;
    let modes = conf
        .partitions
        .iter()
        .map(|p| match &p.preempt_mode {
            Some(m) => preempt_mode(m).ok(),
            None => Some(cluster),
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Preemption { kind, modes })
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ClusterError {
    #[error("the cluster has no nodes")]
    NoNodes,
    #[error("the cluster has no partitions")]
    NoPartitions,
    #[error("partition {0} has no nodes")]
    EmptyPartition(String),
    #[error("no partition named '{0}'")]
    UnknownPartition(String),
    #[error(transparent)]
    Plugin(#[from] registry::PluginError),
    /// `Licenses=` does not parse.
    #[error("Licenses: {0}")]
    Licenses(String),
    /// topology.yaml / topology.conf cannot be used.
    #[error("{0}")]
    Topology(String),
}

/// A resolved scheduler and, if it stands in for another or ignores
/// options, the warning to show.
pub struct SchedulerChoice {
    pub scheduler: Box<dyn Scheduler>,
    pub warning: Option<String>,
}

impl Cluster {
    /// `nodes` nodes of `cpus` CPUs and `mem` MiB, named `n1..nN` (zero
    /// padded to the width of N), in one partition `sim` with no limits,
    /// scheduled by `sched/backfill` with its default parameters.
    pub fn flat(nodes: usize, cpus: u32, mem: u64) -> Result<Cluster, ClusterError> {
        if nodes == 0 || cpus == 0 {
            return Err(ClusterError::NoNodes);
        }
        let width = nodes.to_string().len();
        let view = ClusterView {
            nodes: (1..=nodes)
                .map(|i| NodeView {
                    name: format!("n{i:0width$}"),
                    cpus,
                    mem,
                    available: true,
                    weight: 1,
                    ..Default::default()
                })
                .collect(),
            partitions: vec![PartitionView {
                name: "sim".into(),
                nodes: (0..nodes).collect(),
                up: true,
                priority_tier: 1,
                ..Default::default()
            }],
            running: vec![],
            ..Default::default()
        };
        Ok(Cluster {
            view,
            default_partition: 0,
            scheduler_type: "sched/backfill".into(),
            scheduler_params: String::new(),
            licenses: Vec::new(),
            preempt: None,
            accounting: None,
            sharing: vec![None],
            gang_slice: None,
        })
    }

    /// Nodes, partitions and scheduler of a loaded `slurm.conf`. Every node
    /// is taken to be up and registered, except those whose configured
    /// state is DOWN, DRAIN, FAIL or FUTURE (or that a `DownNodes` line
    /// names): those never run jobs.
    pub fn from_conf(conf: &SlurmConf) -> Result<Cluster, ClusterError> {
        if conf.nodes.is_empty() {
            return Err(ClusterError::NoNodes);
        }
        if conf.partitions.is_empty() {
            return Err(ClusterError::NoPartitions);
        }
        let down: Vec<&str> = conf
            .down_nodes
            .iter()
            .flat_map(|d| d.nodes.iter().map(String::as_str))
            .collect();
        let threads = conf.allocates_threads();
        let nodes: Vec<NodeView> = conf
            .nodes
            .iter()
            .map(|n| {
                let st = n.state.as_deref().unwrap_or("UNKNOWN").to_ascii_uppercase();
                let off = st.starts_with("DOWN")
                    || st.starts_with("DRAIN")
                    || st.contains("+DRAIN")
                    || st == "FAIL"
                    || st == "FUTURE"
                    || down.contains(&n.name.as_str());
                NodeView {
                    name: n.name.clone(),
                    cpus: n.cpus,
                    mem: n.real_memory,
                    available: !off,
                    weight: n.weight,
                    features: n.features.clone(),
                    threads_per_core: if threads { 1 } else { n.threads_per_core },
                    sockets: n.sockets,
                    ..Default::default()
                }
            })
            .collect();
        let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
        let topo = slurm_common::topologies::load(conf, &names).map_err(ClusterError::Topology)?;
        let index = |name: &str| nodes.iter().position(|n| n.name == name);
        let partitions: Vec<PartitionView> = conf
            .partitions
            .iter()
            .map(|p| PartitionView {
                name: p.name.clone(),
                nodes: p.nodes.iter().filter_map(|n| index(n)).collect(),
                up: p.state == PartitionStateConf::Up,
                max_time: p.max_time,
                max_nodes: p.max_nodes,
                exclusive: p.oversubscribe.eq_ignore_ascii_case("EXCLUSIVE"),
                priority_tier: p.priority_tier,
                def_mem_per_cpu: p.def_mem_per_cpu.or(conf.def_mem_per_cpu),
                topology: topo.of_partition(&p.name),
                exclusive_topo: topo.exclusive.contains(&p.name),
            })
            .collect();
        if let Some(p) = partitions.iter().find(|p| p.nodes.is_empty()) {
            return Err(ClusterError::EmptyPartition(p.name.clone()));
        }
        let default_partition = conf
            .default_partition()
            .and_then(|d| partitions.iter().position(|p| p.name == d.name))
            .unwrap_or(0);
        let scheduler_params = conf
            .get("SchedulerParameters")
            .map(str::to_string)
            .unwrap_or_else(|| conf.scheduler_parameters.join(","));
        Ok(Cluster {
            view: ClusterView {
                nodes,
                partitions,
                running: vec![],
                topologies: topo.list.clone(),
            },
            default_partition,
            scheduler_type: conf.scheduler_type.clone(),
            scheduler_params,
            licenses: slurm_common::licenses::parse(conf.get("Licenses").unwrap_or(""))
                .map_err(ClusterError::Licenses)?,
            preempt: preemption(conf),
            accounting: None,
            sharing: conf
                .partitions
                .iter()
                .map(|p| {
                    slurm_common::conf::oversubscribe_sharing(&p.oversubscribe)
                        .filter(|(_, n)| *n > 1)
                })
                .collect(),
            gang_slice: conf
                .get("PreemptMode")
                .is_some_and(|m| m.split(',').any(|w| w.trim().eq_ignore_ascii_case("GANG")))
                .then(|| {
                    conf.get("SchedulerTimeSlice")
                        .and_then(|v| v.trim().parse::<i64>().ok())
                        .filter(|s| *s > 0)
                        .unwrap_or(30)
                }),
        })
    }

    /// The index of partition `name`.
    pub fn partition(&self, name: &str) -> Result<usize, ClusterError> {
        self.view
            .partitions
            .iter()
            .position(|p| p.name == name)
            .ok_or_else(|| ClusterError::UnknownPartition(name.to_string()))
    }

    /// The index of node `name`.
    pub fn node(&self, name: &str) -> Option<usize> {
        self.view.nodes.iter().position(|n| n.name == name)
    }

    /// CPUs of the nodes that can run jobs (the utilisation denominator).
    pub fn usable_cpus(&self) -> u64 {
        self.view
            .nodes
            .iter()
            .filter(|n| n.available)
            .map(|n| u64::from(n.cpus))
            .sum()
    }

    /// The configured scheduler, through the same registry the controller
    /// uses.
    pub fn scheduler(&self) -> Result<SchedulerChoice, ClusterError> {
        let r = registry::scheduler_with_params(&self.scheduler_type, &self.scheduler_params)?;
        Ok(SchedulerChoice {
            scheduler: r.plugin,
            warning: r.warning,
        })
    }

    /// One line: `128 nodes (128 cpus), 1 partition`.
    pub fn describe(&self) -> String {
        let v = &self.view;
        let parts = v.partitions.len();
        format!(
            "{} nodes ({} usable cpus), {} partition{} ({})",
            v.nodes.len(),
            self.usable_cpus(),
            parts,
            if parts == 1 { "" } else { "s" },
            v.partitions
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(",")
        )
    }
}

/// What a `slurm.conf` asks for that the simulator does not model (the
/// controller does it around the scheduling core): one warning each.
pub fn unsimulated(conf: &SlurmConf) -> Vec<String> {
    let mut out = Vec::new();
    match conf
        .get("PreemptType")
        .map(str::trim)
        .filter(|t| !t.is_empty() && *t != "preempt/none")
    {
        None => {}
        Some("preempt/partition_prio" | "preempt/qos") => {
            let modes = std::iter::once(("PreemptMode", conf.get("PreemptMode"))).chain(
                conf.partitions
                    .iter()
                    .map(|p| ("PreemptMode", p.preempt_mode.as_deref())),
            );
            if let Some(bad) = modes.filter_map(|(_, m)| preempt_mode(m?).err()).next() {
                out.push(format!(
                    "PreemptMode={bad} is not simulated (only CANCEL, REQUEUE and SUSPEND): \
                     jobs are never preempted"
                ));
            }
        }
        Some(t) => out.push(format!(
            "PreemptType={t} is not simulated (only preempt/partition_prio and preempt/qos): \
             jobs are never preempted"
        )),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn what_is_not_simulated_is_named() {
        let text = "\
NodeName=a[1-2] CPUs=4
PreemptType=preempt/partition_prio
PreemptMode=WITHIN
PartitionName=p1 Nodes=ALL OverSubscribe=FORCE:2
PartitionName=p2 Nodes=ALL
";
        let conf = SlurmConf::parse_str(text, Path::new("slurm.conf")).unwrap();
        let w = unsimulated(&conf);
        // (Sharing cores and gang turns are simulated.)
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("PreemptMode=WITHIN is not simulated"),
            "{w:?}"
        );
        // Requeue, cancel and suspend, by partition tier or QOS, are
        // simulated; other preemption types are not.
        let requeue = SlurmConf::parse_str(
            "NodeName=a CPUs=1\nPreemptType=preempt/partition_prio\nPreemptMode=REQUEUE\n\
             PartitionName=p Nodes=ALL PreemptMode=CANCEL\n",
            Path::new("s"),
        )
        .unwrap();
        assert!(unsimulated(&requeue).is_empty());
        let qos = SlurmConf::parse_str(
            "NodeName=a CPUs=1\nPreemptType=preempt/qos\nPreemptMode=SUSPEND,GANG\n\
             PartitionName=p Nodes=ALL\n",
            Path::new("s"),
        )
        .unwrap();
        assert!(unsimulated(&qos).is_empty());
        let other = SlurmConf::parse_str(
            "NodeName=a CPUs=1\nPreemptType=preempt/other\nPartitionName=p Nodes=ALL\n",
            Path::new("s"),
        )
        .unwrap();
        assert!(unsimulated(&other)[0].starts_with("PreemptType=preempt/other is not simulated"));
        let plain = SlurmConf::parse_str(
            "NodeName=a CPUs=1\nPartitionName=p Nodes=ALL\n",
            Path::new("s"),
        )
        .unwrap();
        assert!(unsimulated(&plain).is_empty());
    }

    #[test]
    fn flat_cluster() {
        let c = Cluster::flat(128, 1, 0).unwrap();
        assert_eq!(c.view.nodes[0].name, "n001");
        assert_eq!(c.view.nodes[127].name, "n128");
        assert_eq!(c.usable_cpus(), 128);
        assert_eq!(c.view.partitions[0].nodes.len(), 128);
        assert_eq!(Cluster::flat(3, 4, 0).unwrap().view.nodes[2].name, "n3");
        assert_eq!(Cluster::flat(0, 4, 0), Err(ClusterError::NoNodes));
        assert_eq!(c.scheduler().unwrap().scheduler.name(), "sched/backfill");
    }

    #[test]
    fn from_conf() {
        let text = "\
NodeName=a[1-2] CPUs=4 RealMemory=1000 Weight=5
NodeName=b1 CPUs=8 RealMemory=2000 State=DRAIN
DownNodes=a2 State=DOWN
DefMemPerCPU=100
SchedulerType=sched/builtin
SchedulerParameters=bf_window=60,bf_resolution=1
PartitionName=p1 Nodes=a[1-2] MaxTime=60 OverSubscribe=EXCLUSIVE
PartitionName=p2 Nodes=ALL Default=YES State=DOWN PriorityTier=3
";
        let conf = SlurmConf::parse_str(text, Path::new("slurm.conf")).unwrap();
        let c = Cluster::from_conf(&conf).unwrap();
        let avail: Vec<bool> = c.view.nodes.iter().map(|n| n.available).collect();
        assert_eq!(avail, vec![true, false, false]);
        assert_eq!(c.usable_cpus(), 4);
        assert_eq!(c.default_partition, 1);
        let p = &c.view.partitions;
        assert_eq!(
            (p[0].max_time, p[0].exclusive, p[0].up),
            (Some(60), true, true)
        );
        assert_eq!(
            (p[1].nodes.clone(), p[1].up, p[1].priority_tier),
            (vec![0, 1, 2], false, 3)
        );
        assert_eq!(p[0].def_mem_per_cpu, Some(100));
        assert_eq!(c.scheduler_type, "sched/builtin");
        assert_eq!(c.scheduler_params, "bf_window=60,bf_resolution=1");
        assert_eq!(c.partition("p2"), Ok(1));
        assert!(c.partition("nope").is_err());

        let conf = SlurmConf::parse_str(
            "NodeName=a1 CPUs=1\nPartitionName=p Nodes=a1\nSchedulerType=sched/wiki\n",
            Path::new("x"),
        )
        .unwrap();
        let e = Cluster::from_conf(&conf)
            .unwrap()
            .scheduler()
            .err()
            .unwrap();
        assert_eq!(e.to_string(), "unknown SchedulerType plugin 'sched/wiki'");
        let conf = SlurmConf::parse_str("NodeName=a1 CPUs=1\n", Path::new("x")).unwrap();
        assert_eq!(Cluster::from_conf(&conf), Err(ClusterError::NoPartitions));
    }

    #[test]
    fn topology_beside_the_conf() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("slurm.conf");
        std::fs::write(
            &path,
            "NodeName=n[1-4] CPUs=4\nPartitionName=p Nodes=ALL Default=YES\n",
        )
        .unwrap();
        std::fs::write(
            d.path().join("topology.yaml"),
            "- topology: b\n  block:\n    blocks:\n      - block: b1\n        nodes: n[1-2]\n      - block: b2\n        nodes: n[3-4]\n",
        )
        .unwrap();
        let conf = SlurmConf::load(&path).unwrap();
        let mut c = Cluster::from_conf(&conf).unwrap();
        assert!(matches!(
            c.view.topologies[0],
            slurm_plugins::topo::Topology::Block(_)
        ));
        // A two-node job stays inside a block: with n2 busy, n3-n4.
        c.view.nodes[1].alloc_cpus = 4;
        let j = slurm_plugins::JobView {
            min_nodes: 2,
            max_nodes: 2,
            num_tasks: 2,
            cpus_per_task: 1,
            ..Default::default()
        };
        let a = slurm_plugins::select::place(&c.view, &j, false).unwrap();
        assert_eq!(a.iter().map(|x| x.node).collect::<Vec<_>>(), vec![2, 3]);
        std::fs::write(
            d.path().join("topology.yaml"),
            "- topology: b\n  bogus: 1\n",
        )
        .unwrap();
        assert!(matches!(
            Cluster::from_conf(&conf),
            Err(ClusterError::Topology(_))
        ));
    }
}
