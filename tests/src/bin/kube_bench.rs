//! The Kubernetes bridge under load: a local cluster (controller, one node
//! daemon, slurmdbd on SQLite), the test kit's stand-in API server with 125
//! bridged nodes of 8 CPUs, and `slurm-bridge`. Prints one line per case:
//!
//! - 1000 single pods created at once: pods bound per second;
//! - 100 PodGroups of 8 created at once: pods bound per second;
//! - one pod at a time (every 20 ms) with 1000 batch jobs pending in the
//!   queue: the time from the pod's creation to its binding (median, 99th
//!   percentile). slurm-bridge (SlinkyProject) takes 1.4 s per scheduling
//!   attempt at 900 jobs; the target here is under 1 s at the 99th.
//!
//! Usage: `kube-bench [--pods N] [--groups N] [--latency N] [--pending N]`,
//! run from the build directory (it starts the daemons beside it):
//! `cargo build --release --workspace --bins && target/release/kube_bench`.

use serde_json::json;
use slurm_local::{ClusterSpec, LocalCluster};
use slurm_proto::{JobDesc, RequestBody, Response};
use slurm_tests::k8s::FakeApiServer;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const NODES: usize = 125;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn pod(name: &str, group: Option<&str>) -> serde_json::Value {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "slurm-bridge-scheduler", "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "c", "image": "busybox",
                                 "resources": {"requests": {"cpu": "1", "memory": "100Mi"}}}]}});
    if let Some(g) = group {
        p["metadata"]["labels"] = json!({"scheduling.x-k8s.io/pod-group": g});
    }
    p
}

/// Records when each pod is first seen bound (polled every 2 ms) while the
/// pods are being created; [`Poller::wait`] waits until `names` are.
struct Poller {
    seen: std::sync::Arc<std::sync::Mutex<BTreeMap<String, Instant>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Poller {
    fn start(api: &std::sync::Arc<FakeApiServer>) -> Poller {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(BTreeMap::new()));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s, st, api) = (seen.clone(), stop.clone(), api.clone());
        let thread = std::thread::spawn(move || {
            while !st.load(std::sync::atomic::Ordering::Relaxed) {
                let now = Instant::now();
                let bound: Vec<String> = api
                    .list("pods")
                    .into_iter()
                    .filter(|p| p["spec"]["nodeName"].is_string())
                    .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
                    .collect();
                let mut m = s.lock().unwrap_or_else(|p| p.into_inner());
                for n in bound {
                    m.entry(n).or_insert(now);
                }
                drop(m);
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        Poller {
            seen,
            stop,
            thread: Some(thread),
        }
    }

    fn wait(mut self, names: &[String], within: Duration) -> BTreeMap<String, Instant> {
        let end = Instant::now() + within;
        loop {
            let done = {
                let m = self.seen.lock().unwrap_or_else(|p| p.into_inner());
                names.iter().all(|n| m.contains_key(n))
            };
            if done || Instant::now() > end {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let mut m = std::mem::take(&mut *self.seen.lock().unwrap_or_else(|p| p.into_inner()));
        m.retain(|k, _| names.contains(k));
        m
    }
}

fn clear(api: &FakeApiServer, c: &LocalCluster) {
    for p in api.list("pods") {
        let name = p["metadata"]["name"].as_str().unwrap_or("").to_string();
        let _ = api.delete("pods", "default", &name, Some(0));
    }
    // The bridge cancels their jobs and lets the pods go.
    let end = Instant::now() + Duration::from_secs(120);
    while Instant::now() < end {
        let busy = match c.call(RequestBody::GetJobs) {
            Ok(Response::Jobs { jobs, .. }) => jobs
                .iter()
                .filter(|j| j.desc.external && !j.state.is_finished())
                .count(),
            _ => 0,
        };
        if busy == 0 && api.list("pods").is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("kube-bench: pods or placeholder jobs left after a case");
}

fn main() {
    let pods = arg("--pods", 1000);
    let groups = arg("--groups", 100);
    let latency = arg("--latency", 200);
    let pending = arg("--pending", 1000);
    let bin = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|p| p.to_path_buf()))
        .expect("the binary's directory");
    let tmp = tempfile::Builder::new()
        .prefix("kube-bench-")
        .tempdir()
        .expect("tempdir");
    let mut spec = ClusterSpec::new(&tmp.path().join("cluster"), 1, &bin).expect("spec");
    spec.tls = true;
    spec.extra_conf
        .push_str("PartitionName=kube MaxTime=INFINITE State=UP\n");
    let c = LocalCluster::start(spec).expect("cluster");
    let api = std::sync::Arc::new(FakeApiServer::start(&c.spec.ip).expect("api server"));
    for i in 0..NODES {
        api.create(&json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": format!("k{}", i + 1),
                         "labels": {"slinky.slurm.net/slurm-bridge": "true"}},
            "spec": {}, "status": {"allocatable": {"cpu": "8", "memory": "32Gi"}}}))
            .expect("node");
    }
    let kc = c.spec.dir.join("kubeconfig");
    std::fs::write(&kc, api.kubeconfig()).expect("kubeconfig");
    let log = std::fs::File::create(c.spec.dir.join("log/slurm-bridge.log")).expect("log");
    let mut bridge = std::process::Command::new(bin.join("slurm-bridge"))
        .env("SLURM_CONF", c.spec.conf_path())
        .arg(format!("--kubeconfig={}", kc.display()))
        .arg("--partition=kube")
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("slurm-bridge");
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let n = match c.call(RequestBody::GetNodes) {
            Ok(Response::Nodes { nodes, .. }) => nodes.iter().filter(|n| n.external).count(),
            _ => 0,
        };
        if n == NODES {
            break;
        }
        assert!(Instant::now() < end, "the bridge did not add the nodes");
        std::thread::sleep(Duration::from_millis(100));
    }
    println!(
        "{:<46} {:>6} {:>9} {:>9} {:>8} {:>8}",
        "case", "pods", "seconds", "pods/s", "p50 ms", "p99 ms"
    );
    let row = |case: &str,
               created: &BTreeMap<String, Instant>,
               bound: &BTreeMap<String, Instant>,
               start: Instant| {
        let mut lat: Vec<f64> = bound
            .iter()
            .filter_map(|(n, t)| Some(t.duration_since(*created.get(n)?).as_secs_f64() * 1000.0))
            .collect();
        lat.sort_by(|a, b| a.total_cmp(b));
        let q = |f: f64| {
            lat.get(((lat.len() as f64 * f).ceil() as usize).saturating_sub(1))
                .copied()
                .unwrap_or(f64::NAN)
        };
        let last = bound.values().max().copied().unwrap_or(start);
        let secs = last.duration_since(start).as_secs_f64();
        println!(
            "{:<46} {:>6} {:>9.2} {:>9.0} {:>8.0} {:>8.0}",
            case,
            bound.len(),
            secs,
            bound.len() as f64 / secs.max(1e-9),
            q(0.5),
            q(0.99)
        );
        if bound.len() < created.len() {
            println!(
                "  ({} of {} pods never bound)",
                created.len() - bound.len(),
                created.len()
            );
        }
    };

    // 1. Single pods, all at once.
    let names: Vec<String> = (0..pods).map(|i| format!("single-{i}")).collect();
    let poll = Poller::start(&api);
    let start = Instant::now();
    let mut created = BTreeMap::new();
    for n in &names {
        api.create(&pod(n, None)).expect("pod");
        created.insert(n.clone(), Instant::now());
    }
    let bound = poll.wait(&names, Duration::from_secs(300));
    row(
        &format!("{pods} single pods at once"),
        &created,
        &bound,
        start,
    );
    clear(&api, &c);

    // 2. PodGroups of 8, all at once.
    let mut names = Vec::new();
    let mut created = BTreeMap::new();
    let poll = Poller::start(&api);
    let start = Instant::now();
    for g in 0..groups {
        let gname = format!("gang-{g}");
        api.create(
            &json!({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                           "metadata": {"name": gname, "namespace": "default"},
                           "spec": {"minMember": 8}}),
        )
        .expect("podgroup");
        for i in 0..8 {
            let n = format!("{gname}-{i}");
            api.create(&pod(&n, Some(&gname))).expect("pod");
            created.insert(n.clone(), Instant::now());
            names.push(n);
        }
    }
    let bound = poll.wait(&names, Duration::from_secs(300));
    row(
        &format!("{groups} PodGroups of 8 at once"),
        &created,
        &bound,
        start,
    );
    clear(&api, &c);

    // 3. One pod at a time against a queue of pending batch jobs (one long
    // job holds the batch node, the others wait for it).
    let desc = |hold_node: bool| JobDesc {
        name: Some("wait".into()),
        partition: Some("debug".into()),
        min_nodes: Some(1),
        ntasks: Some(1),
        exclusive: hold_node,
        script: "#!/bin/sh\nsleep 3600\n".into(),
        work_dir: "/tmp".into(),
        environment: vec!["PATH=/usr/bin:/bin".into()],
        ..Default::default()
    };
    let _ = c.call(RequestBody::SubmitBatchJob(desc(true)));
    for _ in 0..pending {
        let _ = c.call(RequestBody::SubmitBatchJob(desc(true)));
    }
    let names: Vec<String> = (0..latency).map(|i| format!("one-{i}")).collect();
    let mut created = BTreeMap::new();
    let poll = Poller::start(&api);
    let start = Instant::now();
    for n in &names {
        api.create(&pod(n, None)).expect("pod");
        created.insert(n.clone(), Instant::now());
        std::thread::sleep(Duration::from_millis(20));
    }
    let bound = poll.wait(&names, Duration::from_secs(120));
    row(
        &format!("one pod / 20 ms, {pending} batch jobs pending"),
        &created,
        &bound,
        start,
    );
    let _ = bridge.kill();
    let _ = bridge.wait();
    // The batch jobs' processes end before the cluster does (a node daemon
    // leaves running jobs behind when it stops).
    let _ = c.call(RequestBody::Cancel(slurm_proto::CancelFilter::default()));
    let end = Instant::now() + Duration::from_secs(60);
    while Instant::now() < end {
        let busy = match c.call(RequestBody::GetJobs) {
            Ok(Response::Jobs { jobs, .. }) => jobs
                .iter()
                .any(|j| !j.desc.external && (!j.state.is_finished() || j.completing)),
            _ => false,
        };
        if !busy {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    if std::env::var_os("KUBE_BENCH_KEEP").is_some() {
        let dir = tmp.keep();
        eprintln!("kube-bench: logs kept in {}", dir.display());
        c.detach();
    }
}
