//! The environment of a batch script: the submitted environment plus the
//! `SLURM_*` variables Slurm's batch step sets (see
//! `reference/slurm-22.05-outputs/env-batch-2tasks.out`; 23.11+ adds the job
//! start/end times).
//!
//! `SLURM_TASK_PID` is not here: it is the script's own pid, only known in
//! the child, which fills it in just before `exec` ([`super::exec`]).

use slurm_common::hostlist;
use slurm_proto::BatchLaunch;

/// Node-side facts the environment needs besides the launch request.
#[derive(Debug, Clone)]
pub struct EnvParams<'a> {
    /// This node's name.
    pub node: &'a str,
    /// Absolute path of slurm.conf (`SLURM_CONF`).
    pub conf_path: &'a str,
    /// When the job started (Unix seconds).
    pub start_time: i64,
    /// The job sees only its GPUs (ConstrainDevices), numbered from 0.
    pub renumber_gpus: bool,
}

/// An ordered environment: `set` replaces a variable in place or appends it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Env(pub Vec<(String, String)>);

impl Env {
    /// From `K=V` strings; entries without `=` (or with an empty name) are dropped,
    /// and a repeated name keeps its first position and its last value.
    pub fn from_kv(list: &[String]) -> Env {
        let mut e = Env::default();
        for kv in list {
            if let Some((k, v)) = kv.split_once('=') {
                if !k.is_empty() {
                    e.set(k, v);
                }
            }
        }
        e
    }

    pub fn set(&mut self, k: &str, v: impl Into<String>) {
        let v = v.into();
        match self.0.iter_mut().find(|(n, _)| n == k) {
            Some(slot) => slot.1 = v,
            None => self.0.push((k.to_string(), v)),
        }
    }

    pub fn get(&self, k: &str) -> Option<&str> {
        self.0.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
    }

    pub fn remove(&mut self, k: &str) {
        self.0.retain(|(n, _)| n != k);
    }
}

/// The full environment of a batch script (all but `SLURM_TASK_PID`).
pub fn batch_env(l: &BatchLaunch, p: &EnvParams) -> Env {
    let mut e = Env::from_kv(&l.environment);
    // A pid inherited from an outer job must not survive; the child sets ours.
    e.remove("SLURM_TASK_PID");

    // The controller's start time when it sent one, else the node's clock.
    let start = if l.start_time > 0 {
        l.start_time
    } else {
        p.start_time
    };
    let a = &l.alloc;
    let idx = a.nodes.iter().position(|n| n == p.node).unwrap_or(0);
    let cpus_here = a.cpus.get(idx).copied().unwrap_or_else(|| a.total_cpus());
    let nodelist = if a.nodes.is_empty() {
        p.node.to_string()
    } else {
        hostlist::compress(&a.nodes)
    };
    let nnodes = a.nodes.len().max(1).to_string();
    let job_id = l.job_id.to_string();

    e.set("ENVIRONMENT", "BATCH");
    e.set("SLURMD_NODENAME", p.node);
    e.set("SLURM_CLUSTER_NAME", &*l.cluster_name);
    e.set("SLURM_CONF", p.conf_path);
    e.set("SLURM_CPUS_ON_NODE", cpus_here.to_string());
    // SLURM_CPUS_PER_TASK comes with the job's variables from the
    // controller (only when the job asked for CPUs per task).
    e.set("SLURM_GTIDS", "0");
    e.set("SLURM_JOBID", &*job_id);
    e.set("SLURM_JOB_ACCOUNT", &*l.account);
    e.set(
        "SLURM_JOB_CPUS_PER_NODE",
        hostlist::compress_counts(&a.cpus),
    );
    e.set("SLURM_JOB_END_TIME", "");
    e.set("SLURM_JOB_GID", l.gid.to_string());
    e.set("SLURM_JOB_ID", &*job_id);
    e.set("SLURM_JOB_NAME", &*l.job_name);
    e.set("SLURM_JOB_NODELIST", &*nodelist);
    e.set("SLURM_JOB_NUM_NODES", &*nnodes);
    e.set("SLURM_JOB_PARTITION", &*l.partition);
    e.set("SLURM_JOB_QOS", &*l.qos);
    e.set("SLURM_JOB_START_TIME", start.to_string());
    e.set("SLURM_JOB_UID", l.uid.to_string());
    e.set("SLURM_JOB_USER", &*l.user_name);
    e.set("SLURM_LOCALID", "0");
    match l.mem_per_cpu {
        Some(m) => e.set("SLURM_MEM_PER_CPU", m.to_string()),
        None => e.remove("SLURM_MEM_PER_CPU"),
    }
    match l.mem_per_node {
        Some(m) => e.set("SLURM_MEM_PER_NODE", m.to_string()),
        None => e.remove("SLURM_MEM_PER_NODE"),
    }
    e.set("SLURM_NNODES", &*nnodes);
    e.set("SLURM_NODEID", "0");
    e.set("SLURM_NODELIST", &*nodelist);
    e.set("SLURM_NODE_ALIASES", "(null)");
    e.set("SLURM_NPROCS", l.num_tasks.to_string());
    e.set("SLURM_NTASKS", l.num_tasks.to_string());
    if let Some(n) = l.ntasks_per_node {
        e.set("SLURM_NTASKS_PER_NODE", n.to_string());
    }
    e.set("SLURM_PRIO_PROCESS", "0");
    e.set("SLURM_PROCID", "0");
    // sbatch sends where it was run; -D only changes the working directory.
    if e.get("SLURM_SUBMIT_DIR").is_none() {
        e.set("SLURM_SUBMIT_DIR", &*l.work_dir);
    }
    if e.get("SLURM_SUBMIT_HOST").is_none() {
        e.set("SLURM_SUBMIT_HOST", &*l.submit_host);
    }
    e.set("SLURM_TASKS_PER_NODE", hostlist::compress_counts(&a.tasks));
    gpu_env(
        &mut e,
        a.gres.get(idx).map(Vec::as_slice).unwrap_or(&[]),
        p.renumber_gpus,
    );
    e.set("SLURM_TOPOLOGY_ADDR", p.node);
    e.set("SLURM_TOPOLOGY_ADDR_PATTERN", "node");
    e.set(
        "SLURM_WORKING_CLUSTER",
        format!(
            "{}:{}:{}:{}:{}",
            l.cluster_name,
            l.ctld_host,
            l.ctld_port,
            crate::SLURM_PROTOCOL_NUM,
            crate::SELECT_CONS_TRES_ID
        ),
    );
    match l.time_limit {
        Some(min) => e.set(
            "SLURM_JOB_END_TIME",
            (start + i64::from(min) * 60).to_string(),
        ),
        None => e.remove("SLURM_JOB_END_TIME"),
    }
    e
}

/// The GPUs given on this node: `SLURM_JOB_GPUS` (the node's indices),
/// `CUDA_VISIBLE_DEVICES` and `GPU_DEVICE_ORDINAL` (as the job sees them),
/// `SLURM_GPUS_ON_NODE`. Without GPUs these are removed, so none leaks in
/// from the submitting environment.
pub fn gpu_env(e: &mut Env, gres: &[slurm_proto::GresAlloc], renumber: bool) {
    let idx = slurm_proto::GresAlloc::gpu_indices(gres);
    if idx.is_empty() {
        for k in [
            "SLURM_JOB_GPUS",
            "CUDA_VISIBLE_DEVICES",
            "GPU_DEVICE_ORDINAL",
            "SLURM_GPUS_ON_NODE",
        ] {
            e.remove(k);
        }
        return;
    }
    let join =
        |v: &mut dyn Iterator<Item = u32>| v.map(|i| i.to_string()).collect::<Vec<_>>().join(",");
    let global = join(&mut idx.iter().copied());
    let seen = if renumber {
        join(&mut (0..idx.len() as u32))
    } else {
        global.clone()
    };
    e.set("SLURM_JOB_GPUS", &*global);
    e.set("SLURM_GPUS_ON_NODE", idx.len().to_string());
    e.set("CUDA_VISIBLE_DEVICES", &*seen);
    e.set("GPU_DEVICE_ORDINAL", &*seen);
}

/// A `--gpu-bind` list (`0,1`, `0*4,1*4`: repeated): its entries.
pub fn bind_list(arg: &str) -> Option<Vec<&str>> {
    let mut out = Vec::new();
    for item in arg.split(',') {
        let (v, times) = match item.split_once('*') {
            Some((v, n)) => (v.trim(), n.trim().parse::<usize>().ok().filter(|n| *n > 0)?),
            None => (item.trim(), 1),
        };
        if v.is_empty() || times > 1024 {
            return None;
        }
        out.extend(std::iter::repeat_n(v, times));
    }
    Some(out)
}

/// Which of its step's GPUs on this node (`step`, node indices, sorted)
/// task `local` sees under `--gpu-bind` (`[verbose,]per_task:N`,
/// `single:N`, `map_gpu:I,...` / `map:`, `mask_gpu:M,...` / `mask:`); none:
/// every one of them (`none`, `closest`). Map and mask name GPUs by their
/// place among the step's where devices are confined (`positional`), else
/// by the node's numbering, as Slurm's; a map or mask naming none of the
/// step's gives its first.
pub fn task_gpus(step: &[u32], bind: &str, local: u32, positional: bool) -> Option<Vec<u32>> {
    if step.is_empty() {
        return None;
    }
    let b = match bind.get(..8) {
        Some(p) if p.eq_ignore_ascii_case("verbose,") => &bind[8..],
        _ => bind,
    };
    let (kind, arg) = b.split_once(':').unwrap_or((b, ""));
    let (n, i) = (step.len(), local as usize);
    let count = || arg.trim().parse::<usize>().ok().filter(|k| *k > 0);
    // The GPU a map entry or mask bit names.
    let named = |id: u32| -> Option<u32> {
        if positional {
            step.get(id as usize).copied()
        } else {
            step.contains(&id).then_some(id)
        }
    };
    match kind.to_ascii_lowercase().as_str() {
        "per_task" => {
            let k = count()?;
            let mut v: Vec<u32> = (0..k.min(n)).map(|j| step[(i * k + j) % n]).collect();
            v.sort_unstable();
            v.dedup();
            Some(v)
        }
        "single" => {
            // Past the last GPU, as Slurm's: the task's id over them.
            let g = i / count()?;
            Some(vec![step[if g < n { g } else { i % n }]])
        }
        "map_gpu" | "map" => {
            let list = bind_list(arg)?;
            let id: u32 = list.get(i % list.len().max(1))?.parse().ok()?;
            Some(vec![named(id).unwrap_or(step[0])])
        }
        "mask_gpu" | "mask" => {
            let list = bind_list(arg)?;
            let x = list.get(i % list.len().max(1))?;
            let x = x.strip_prefix("0x").or(x.strip_prefix("0X")).unwrap_or(x);
            let m = u64::from_str_radix(x, 16).ok()?;
            let mut v: Vec<u32> = (0..64u32)
                .filter(|b| m & (1u64 << b) != 0)
                .filter_map(named)
                .collect();
            v.sort_unstable();
            v.dedup();
            if v.is_empty() {
                v.push(step[0]);
            }
            Some(v)
        }
        _ => None,
    }
}

/// The umask the job asked for (`SLURM_UMASK`, octal, set by `sbatch`), else 022.
pub fn job_umask(e: &Env) -> u32 {
    umask_of(&e.0)
}

/// The umask `SLURM_UMASK` in `env` says (octal, set by `sbatch` and
/// `srun`), else 022.
pub fn umask_of(env: &[(String, String)]) -> u32 {
    env.iter()
        .rev()
        .find(|(k, _)| k == "SLURM_UMASK")
        .and_then(|(_, s)| u32::from_str_radix(s.trim(), 8).ok())
        .filter(|m| *m <= 0o777)
        .unwrap_or(0o022)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `--gpu-bind`: each task's share of its step's GPUs on the node.
    #[test]
    fn gpu_bind_gives_each_task_its_share() {
        let step = [2, 3, 5, 7];
        let of = |b: &str, i| task_gpus(&step, b, i, false);
        assert_eq!(of("per_task:1", 0), Some(vec![2]));
        assert_eq!(of("per_task:1", 3), Some(vec![7]));
        assert_eq!(of("per_task:2", 1), Some(vec![5, 7]));
        assert_eq!(
            of("per_task:1", 5),
            Some(vec![3]),
            "more tasks than GPUs wrap"
        );
        assert_eq!(of("verbose,single:2", 0), Some(vec![2]));
        assert_eq!(of("single:2", 1), Some(vec![2]));
        assert_eq!(of("single:2", 2), Some(vec![3]));
        assert_eq!(of("map_gpu:7,2", 0), Some(vec![7]));
        assert_eq!(of("map_gpu:7,2", 3), Some(vec![2]));
        assert_eq!(
            of("map_gpu:4", 0),
            Some(vec![2]),
            "not the step's: its first"
        );
        assert_eq!(of("map:3*2,7", 1), Some(vec![3]));
        assert_eq!(of("map:3*2,7", 2), Some(vec![7]));
        assert_eq!(
            of("VERBOSE,single:4", 5),
            Some(vec![3]),
            "past the last: id over them"
        );
        // Confined devices: map and mask name places among the step's.
        assert_eq!(task_gpus(&step, "map_gpu:1,0", 0, true), Some(vec![3]));
        assert_eq!(task_gpus(&step, "mask_gpu:0x6", 0, true), Some(vec![3, 5]));
        assert_eq!(of("mask_gpu:0x24,0x80", 0), Some(vec![2, 5]));
        assert_eq!(of("mask_gpu:0x24,0x80", 1), Some(vec![7]));
        for none in [
            "none",
            "closest",
            "per_task:0",
            "single:x",
            "map_gpu:",
            "bogus",
        ] {
            assert_eq!(of(none, 0), None, "{none}");
        }
        assert_eq!(task_gpus(&[], "per_task:1", 0, false), None);
    }
    use slurm_proto::Allocation;

    /// The launch behind the reference output (job 4 of env-batch-2tasks).
    pub(crate) fn reference_launch() -> BatchLaunch {
        BatchLaunch {
            job_id: 4,
            job_name: "envdump".into(),
            uid: 999,
            gid: 995,
            user_name: "anchor".into(),
            account: "anchoracct".into(),
            qos: "normal".into(),
            partition: "debug".into(),
            cluster_name: "anchor".into(),
            alloc: Allocation {
                nodes: vec!["n1".into()],
                cpus: vec![2],
                mem: vec![0],
                tasks: vec![2],
                gres: vec![],
            },
            num_tasks: 2,
            cpus_per_task: 1,
            ntasks_per_node: None,
            mem_per_node: None,
            mem_per_cpu: None,
            time_limit: None,
            work_dir: "/home/alice/jobs".into(),
            std_out: Some("env-%j.out".into()),
            std_err: None,
            std_in: None,
            script: "#!/bin/sh\nenv | grep ^SLURM | sort\n".into(),
            argv: vec![],
            environment: vec![
                "PATH=/usr/bin:/bin".into(),
                "HOME=/home/alice".into(),
                "SLURM_TASK_PID=1".into(),
                "SLURM_MEM_PER_CPU=77".into(),
                "junk-without-equals".into(),
            ],
            submit_host: "vm".into(),
            ctld_host: "127.0.0.1".into(),
            ctld_port: 6817,
            start_time: 0,
            append_output: false,
        }
    }

    /// env-batch-2tasks.out without SLURM_TASK_PID.
    const REFERENCE: &str = "\
SLURMD_NODENAME=n1
SLURM_CLUSTER_NAME=anchor
SLURM_CONF=/etc/slurm/slurm.conf
SLURM_CPUS_ON_NODE=2
SLURM_GTIDS=0
SLURM_JOBID=4
SLURM_JOB_ACCOUNT=anchoracct
SLURM_JOB_CPUS_PER_NODE=2
SLURM_JOB_GID=995
SLURM_JOB_ID=4
SLURM_JOB_NAME=envdump
SLURM_JOB_NODELIST=n1
SLURM_JOB_NUM_NODES=1
SLURM_JOB_PARTITION=debug
SLURM_JOB_QOS=normal
SLURM_JOB_UID=999
SLURM_JOB_USER=anchor
SLURM_LOCALID=0
SLURM_NNODES=1
SLURM_NODEID=0
SLURM_NODELIST=n1
SLURM_NODE_ALIASES=(null)
SLURM_NPROCS=2
SLURM_NTASKS=2
SLURM_PRIO_PROCESS=0
SLURM_PROCID=0
SLURM_SUBMIT_DIR=/home/alice/jobs
SLURM_SUBMIT_HOST=vm
SLURM_TASKS_PER_NODE=2
SLURM_TOPOLOGY_ADDR=n1
SLURM_TOPOLOGY_ADDR_PATTERN=node
SLURM_WORKING_CLUSTER=anchor:127.0.0.1:6817:9728:109
";

    fn params() -> EnvParams<'static> {
        EnvParams {
            node: "n1",
            conf_path: "/etc/slurm/slurm.conf",
            start_time: 1_700_000_000,
            renumber_gpus: false,
        }
    }

    #[test]
    fn matches_the_reference_batch_environment() {
        let e = batch_env(&reference_launch(), &params());
        let mut got: Vec<String> =
            e.0.iter()
                .filter(|(k, _)| k.starts_with("SLURM"))
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
        got.sort();
        // The reference (22.05) lines, with the protocol number of 25.11 and
        // the 23.11+ start time; SLURM_TASK_PID is added by the child.
        let mut want: Vec<String> = REFERENCE
            .lines()
            .map(|l| {
                if l.starts_with("SLURM_WORKING_CLUSTER=") {
                    format!(
                        "SLURM_WORKING_CLUSTER=anchor:127.0.0.1:6817:{}:109",
                        crate::SLURM_PROTOCOL_NUM
                    )
                } else {
                    l.to_string()
                }
            })
            .collect();
        want.push("SLURM_JOB_START_TIME=1700000000".into());
        want.sort();
        assert_eq!(got, want);
        assert_eq!(e.get("ENVIRONMENT"), Some("BATCH"));
        assert_eq!(e.get("PATH"), Some("/usr/bin:/bin"));
        assert_eq!(e.0[0].0, "PATH", "submitted variables keep their order");
    }

    #[test]
    fn optional_variables_appear_when_asked_for() {
        let mut l = reference_launch();
        l.alloc = Allocation {
            nodes: vec!["n1".into(), "n2".into(), "n3".into(), "n4".into()],
            cpus: vec![2, 2, 2, 1],
            mem: vec![100; 4],
            tasks: vec![2, 2, 2, 1],
            gres: vec![],
        };
        l.cpus_per_task = 2;
        l.ntasks_per_node = Some(2);
        l.mem_per_node = Some(100);
        l.time_limit = Some(10);
        let e = batch_env(&l, &params());
        assert_eq!(e.get("SLURM_JOB_CPUS_PER_NODE"), Some("2(x3),1"));
        assert_eq!(e.get("SLURM_TASKS_PER_NODE"), Some("2(x3),1"));
        assert_eq!(e.get("SLURM_JOB_NODELIST"), Some("n[1-4]"));
        assert_eq!(e.get("SLURM_NNODES"), Some("4"));
        assert_eq!(e.get("SLURM_CPUS_ON_NODE"), Some("2"));
        // (From the controller, with the job's variables, when asked.)
        assert_eq!(e.get("SLURM_CPUS_PER_TASK"), None);
        assert_eq!(e.get("SLURM_NTASKS_PER_NODE"), Some("2"));
        assert_eq!(e.get("SLURM_MEM_PER_NODE"), Some("100"));
        assert_eq!(e.get("SLURM_MEM_PER_CPU"), None);
        assert_eq!(e.get("SLURM_JOB_END_TIME"), Some("1700000600"));
    }

    #[test]
    fn umask_comes_from_the_submission() {
        let mut e = Env::default();
        assert_eq!(job_umask(&e), 0o022);
        e.set("SLURM_UMASK", "0077");
        assert_eq!(job_umask(&e), 0o077);
        e.set("SLURM_UMASK", "99");
        assert_eq!(job_umask(&e), 0o022);
    }
}
