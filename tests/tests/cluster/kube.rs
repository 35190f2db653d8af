//! Kubernetes: the test kit's stand-in API server checked with the real
//! `kubectl`, and the bridge against the real controller, node daemon and
//! that API server (a fake kubelet runs the pods).

use super::*;
use serde_json::{json, Value};
use slurm_proto::JobRecord;
use slurm_tests::k8s::{FakeApiServer, FakeKubelet};
use std::process::{Child, Command, Output, Stdio};

const LABEL: &str = "slinky.slurm.net/slurm-bridge";
const SCHED: &str = "slurm-bridge-scheduler";
const ANN: &str = "slurmjob.slinky.slurm.net/";

/// `kubectl` against the fake, with its own kubeconfig.
fn kubectl(kc: &std::path::Path, args: &[&str]) -> Output {
    Command::new("kubectl")
        .env("KUBECONFIG", kc)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .args(args)
        .output()
        .expect("kubectl")
}

/// [`wait_for`], the failure told by `what` when it happens (logs then).
fn wait_for_with<T>(secs: u64, what: impl Fn() -> String, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < end,
            "never happened within {secs}s: {}",
            what()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn wait_for<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < end,
            "never happened within {secs}s: {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn kubectl_works_against_the_stand_in_api_server() {
    let api = FakeApiServer::start("127.0.0.1").expect("api server");
    let dir = tempfile::tempdir().expect("tmp");
    let kc = dir.path().join("kubeconfig");
    std::fs::write(&kc, api.kubeconfig()).expect("kubeconfig");
    let pod = dir.path().join("pod.yaml");
    std::fs::write(
        &pod,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: hello\n  labels: {app: web}\n\
         spec:\n  containers:\n  - name: c\n    image: busybox\n",
    )
    .expect("pod.yaml");
    let ok = |o: Output| {
        assert!(o.status.success(), "kubectl failed: {}", stderr(&o));
        stdout(&o)
    };
    // The fake serves no OpenAPI schema: client-side validation is off.
    let out = ok(kubectl(
        &kc,
        &[
            "create",
            "--validate=false",
            "-f",
            &pod.display().to_string(),
        ],
    ));
    assert_eq!(out.trim(), "pod/hello created");
    let again = kubectl(
        &kc,
        &[
            "create",
            "--validate=false",
            "-f",
            &pod.display().to_string(),
        ],
    );
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("AlreadyExists") || stderr(&again).contains("already exists"),
        "{}",
        stderr(&again)
    );
    let got: Value =
        serde_json::from_str(&ok(kubectl(&kc, &["get", "pod", "hello", "-o", "json"])))
            .expect("json");
    assert_eq!(got["metadata"]["namespace"], "default");
    assert_eq!(got["status"]["phase"], "Pending");
    let rv: u64 = got["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .expect("rv");
    // Label and field selectors.
    assert!(ok(kubectl(
        &kc,
        &["get", "pods", "-l", "app=web", "-o", "name"]
    ))
    .contains("pod/hello"));
    assert!(!ok(kubectl(
        &kc,
        &["get", "pods", "-l", "app in (db,cache)", "-o", "name"]
    ))
    .contains("hello"));
    assert!(ok(kubectl(
        &kc,
        &[
            "get",
            "pods",
            "--field-selector",
            "status.phase=Pending",
            "-o",
            "name"
        ]
    ))
    .contains("pod/hello"));
    assert!(!ok(kubectl(
        &kc,
        &[
            "get",
            "pods",
            "--field-selector",
            "metadata.name!=hello",
            "-o",
            "name"
        ]
    ))
    .contains("hello"));
    // A watch sees a change made by another client.
    let mut w = Command::new("kubectl")
        .env("KUBECONFIG", &kc)
        .args([
            "get",
            "pods",
            "-w",
            "-o",
            "jsonpath={.metadata.labels.tier}{\"\\n\"}",
            "--request-timeout=20s",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .expect("kubectl -w");
    std::thread::sleep(Duration::from_millis(700));
    ok(kubectl(&kc, &["label", "pod", "hello", "tier=front"]));
    let mut seen = String::new();
    {
        use std::io::BufRead;
        let mut r = std::io::BufReader::new(w.stdout.take().expect("stdout"));
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end && !seen.contains("front") {
            let mut line = String::new();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                break;
            }
            seen.push_str(&line);
        }
    }
    let _ = w.kill();
    let _ = w.wait();
    assert!(seen.contains("front"), "watch saw: {seen:?}");
    // Versions only grow.
    let got: Value =
        serde_json::from_str(&ok(kubectl(&kc, &["get", "pod", "hello", "-o", "json"])))
            .expect("json");
    let rv2: u64 = got["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .expect("rv");
    assert!(rv2 > rv);
    // Nodes: cordon is a patch of spec.unschedulable.
    api.create(&json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "k1"}}))
        .expect("node");
    ok(kubectl(&kc, &["cordon", "k1"]));
    assert_eq!(
        api.get("nodes", "", "k1").expect("k1")["spec"]["unschedulable"],
        true
    );
    ok(kubectl(&kc, &["uncordon", "k1"]));
    assert_ne!(
        api.get("nodes", "", "k1").expect("k1")["spec"]["unschedulable"],
        true
    );
    // JSON patch, merge patch; a finalizer holds a deleted object.
    ok(kubectl(
        &kc,
        &[
            "patch",
            "pod",
            "hello",
            "--type=json",
            "-p",
            r#"[{"op":"add","path":"/metadata/finalizers","value":["example.com/hold"]}]"#,
        ],
    ));
    ok(kubectl(&kc, &["delete", "pod", "hello", "--wait=false"]));
    let held = api
        .get("pods", "default", "hello")
        .expect("held by its finalizer");
    assert!(held["metadata"]["deletionTimestamp"].is_string());
    ok(kubectl(
        &kc,
        &[
            "patch",
            "pod",
            "hello",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
    ));
    assert!(api.get("pods", "default", "hello").is_none());
    let gone = kubectl(&kc, &["get", "pod", "hello"]);
    assert!(
        stderr(&gone).contains("NotFound") && stderr(&gone).contains("\"hello\" not found"),
        "{}",
        stderr(&gone)
    );
    // A watch from a version no longer kept: 410 Gone ("Expired").
    api.compact(1);
    let raw = ok(kubectl(
        &kc,
        &[
            "get",
            "--raw",
            "/api/v1/pods?watch=1&resourceVersion=1&timeoutSeconds=2",
        ],
    ));
    let ev: Value = serde_json::from_str(raw.lines().next().unwrap_or("")).expect("event");
    assert_eq!(ev["type"], "ERROR");
    assert_eq!(ev["object"]["code"], 410);
    // A pod in a namespace that does not exist.
    let bad = kubectl(&kc, &["run", "x", "--image=busybox", "-n", "nowhere"]);
    assert!(
        stderr(&bad).contains("namespaces \"nowhere\" not found"),
        "{}",
        stderr(&bad)
    );
}

/// Whether job `j` is the placeholder of pod `default/pod` (its admin
/// comment lists the pod).
fn holds(j: &JobRecord, pod: &str) -> bool {
    let want = format!("\"default/{pod}\"");
    j.desc
        .admin_comment
        .as_deref()
        .is_some_and(|c| c.contains(&want))
}

/// The bridge process of a test, stopped when dropped.
struct BridgeProc(Child);

impl Drop for BridgeProc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A cluster with one batch node and a `kube` partition for pods, the
/// stand-in API server with `knodes` labelled nodes (CPUs each), the
/// kubelets of those not in `dead`, and the bridge.
struct Kube {
    t: TestCluster,
    api: FakeApiServer,
    _kubelet: FakeKubelet,
    bridge: Option<BridgeProc>,
    kc: std::path::PathBuf,
    partition: String,
    bridge_args: Vec<String>,
}

impl Kube {
    fn start(knodes: &[(&str, u32)], dead: &[&str]) -> Kube {
        Kube::start_as(33, knodes, dead)
    }

    /// As [`Kube::start`], the API server playing Kubernetes 1.`minor`.
    fn start_as(minor: u32, knodes: &[(&str, u32)], dead: &[&str]) -> Kube {
        let t = TestCluster::start(1, |s| {
            s.extra_conf
                .push_str("PartitionName=kube MaxTime=INFINITE State=UP\n");
        });
        Kube::on(t, minor, knodes, dead, None, "kube", &[])
    }

    /// The API server (as Kubernetes 1.`minor`), kubelets (making pods'
    /// cgroups under `cgroup_root`) and the bridge (its jobs in
    /// `partition`) beside cluster `t`.
    fn on(
        t: TestCluster,
        minor: u32,
        knodes: &[(&str, u32)],
        dead: &[&str],
        cgroup_root: Option<String>,
        partition: &str,
        bridge_args: &[&str],
    ) -> Kube {
        let api = FakeApiServer::start_as(&t.c.spec.ip, minor).expect("api server");
        for (name, cpus) in knodes {
            api.create(&json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": {LABEL: "true", "zone": format!("z-{name}")}},
                "spec": {},
                "status": {"allocatable": {"cpu": cpus.to_string(), "memory": "4Gi"}}}))
                .expect("node");
        }
        let live: Vec<String> = knodes
            .iter()
            .map(|(n, _)| n.to_string())
            .filter(|n| !dead.contains(&n.as_str()))
            .collect();
        let kubelet = FakeKubelet::with_cgroups(&api, live, cgroup_root);
        let kc = t.c.spec.dir.join("kubeconfig");
        std::fs::write(&kc, api.kubeconfig()).expect("kubeconfig");
        let mut k = Kube {
            t,
            api,
            _kubelet: kubelet,
            bridge: None,
            kc,
            partition: partition.to_string(),
            bridge_args: bridge_args.iter().map(|a| a.to_string()).collect(),
        };
        k.start_bridge();
        for (name, _) in knodes {
            k.t.wait_node(name, 20, "an external or kubelet node", |n| {
                n.external || n.kubelet
            });
        }
        k
    }

    fn start_bridge(&mut self) {
        let log =
            std::fs::File::create(self.t.c.spec.dir.join("log/slurm-bridge.log")).expect("log");
        let child = Command::new(self.t.c.spec.bin_dir.join("slurm-bridge"))
            .env("SLURM_CONF", self.t.c.spec.conf_path())
            .arg(format!("--kubeconfig={}", self.kc.display()))
            .arg(format!("--partition={}", self.partition))
            .arg("--release-after=1")
            .args(&self.bridge_args)
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("slurm-bridge");
        self.bridge = Some(BridgeProc(child));
    }

    fn pod(&self, name: &str, cpu: &str, extra: Value) {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "annotations": {}},
            "spec": {"schedulerName": SCHED, "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}]}});
        slurm_tests::k8s::merge_patch(&mut p, &extra);
        self.api.create(&p).expect("pod");
    }

    fn get_pod(&self, name: &str) -> Option<Value> {
        self.api.get("pods", "default", name)
    }

    /// A pod of 2 CPUs for node `node` (its zone label): its job, once
    /// running there.
    fn place(&self, name: &str, node: &str) -> JobRecord {
        self.pod(
            name,
            "2",
            json!({"spec": {"nodeSelector": {"zone": format!("z-{node}")}}}),
        );
        let j = self.job_of(name);
        assert_eq!(self.node_of(name), node);
        self.t
            .wait_job(j.job_id, 10, "running", |j| j.state == JobState::Running)
    }

    /// Wait until pod `name` is gone from the API server.
    fn wait_gone(&self, name: &str, secs: u64) {
        wait_for_with(
            secs,
            || format!("pod {name} gone\n{}", self.t.logs()),
            || self.get_pod(name).is_none().then_some(()),
        );
    }

    /// The placeholder job of pod `name`.
    fn job_of(&self, name: &str) -> JobRecord {
        wait_for_with(
            20,
            || format!("a job for pod {name}\n{}", self.t.logs()),
            || {
                self.t
                    .jobs()
                    .into_iter()
                    .filter(|j| holds(j, name))
                    .max_by_key(|j| j.job_id)
            },
        )
    }

    /// Whether some job holds pod `name` (no waiting).
    fn has_job(&self, name: &str) -> bool {
        self.t.jobs().iter().any(|j| holds(j, name))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.t.c.spec.dir.join("log/slurm-bridge.log")).unwrap_or_default()
    }

    fn node_of(&self, name: &str) -> String {
        wait_for_with(
            20,
            || format!("pod {name} bound\n{}", self.t.logs()),
            || {
                self.get_pod(name)?["spec"]["nodeName"]
                    .as_str()
                    .map(str::to_string)
            },
        )
    }

    fn phase(&self, name: &str) -> String {
        self.get_pod(name)
            .and_then(|p| p["status"]["phase"].as_str().map(str::to_string))
            .unwrap_or_default()
    }
}

#[test]
fn pods_become_placeholder_jobs_and_run_where_the_controller_placed_them() {
    let k = Kube::start(&[("k1", 2), ("k2", 2)], &[]);
    // Bridged nodes are tainted so only the bridge's pods go there, and
    // offer what Kubernetes says they have.
    let k1 = k.api.get("nodes", "", "k1").expect("k1");
    assert_eq!(k1["spec"]["taints"][0]["key"], LABEL);
    assert_eq!(k1["spec"]["taints"][0]["effect"], "NoExecute");
    let n =
        k.t.nodes()
            .into_iter()
            .find(|n| n.name == "k1")
            .expect("k1");
    assert_eq!((n.cpus, n.real_memory), (2, 4096));
    assert_eq!(n.partitions, vec!["kube".to_string()]);

    // A pod with annotations, a node selector and one second of work.
    k.pod("single", "1500m", json!({
        "metadata": {"annotations": {format!("{ANN}job-name"): "hello", format!("{ANN}timelimit"): "7",
                                     "fake-kubelet/run-seconds": "1"}},
        "spec": {"nodeSelector": {"zone": "z-k2"}}}));
    let j = k.job_of("single");
    assert_eq!(j.name, "hello");
    assert_eq!(j.partition, "kube");
    assert_eq!(j.time_limit, Some(7));
    assert!(j.desc.external);
    assert_eq!(j.desc.cpus_per_task, Some(2));
    assert_eq!(j.desc.exc_nodes, vec!["k1".to_string()]);
    assert!(j.desc.req_nodes.is_empty(), "never required nodes");
    let node = k.node_of("single");
    assert_eq!(node, "k2");
    let j = k.t.wait_job(j.job_id, 10, "running", |j| {
        j.state == JobState::Running || j.state.is_finished()
    });
    assert_eq!(j.alloc.nodes, vec!["k2".to_string()]);
    let pod = k.get_pod("single").expect("pod");
    let tols = pod["spec"]["tolerations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        tols.iter().any(|t| t["key"] == LABEL),
        "the bridge tolerates its own taint: {tols:?}"
    );
    // The kubelet runs it to the end; the job completes with it.
    let j = k.t.wait_done(j.job_id, 20);
    assert_eq!(j.state, JobState::Completed, "{}", k.t.logs());
    assert_eq!(k.phase("single"), "Succeeded");
    wait_for(
        10,
        "the bridge's finalizer removed from a finished pod",
        || {
            let p = k.get_pod("single")?;
            (!p["metadata"]["finalizers"]
                .to_string()
                .contains("slurm-bridge"))
            .then_some(())
        },
    );

    // Each pod of a batch Job (parallelism 3) is a job of its own.
    for i in 0..3 {
        k.pod(&format!("batch-{i}"), "1", json!({
            "metadata": {"annotations": {"batch.kubernetes.io/job-completion-index": i.to_string(),
                                         "fake-kubelet/run-seconds": "1"},
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "batch",
                                              "uid": "00000000-0000-4000-8000-0000000000ff", "controller": true}]}}));
    }
    let ids: Vec<u32> = (0..3)
        .map(|i| k.job_of(&format!("batch-{i}")).job_id)
        .collect();
    assert_eq!(
        ids.iter().collect::<std::collections::BTreeSet<_>>().len(),
        3
    );
    for id in ids {
        let j = k.t.wait_done(id, 30);
        assert_eq!(j.state, JobState::Completed);
        assert_eq!(j.alloc.nodes.len(), 1);
    }
    for i in 0..3 {
        assert_eq!(k.phase(&format!("batch-{i}")), "Succeeded");
    }
    // squeue and sacct-free views show the placeholder like any job.
    let out = stdout(&k.t.run("sinfo", &["-p", "kube", "-h", "-o", "%D %N"]));
    assert_eq!(out.trim(), "2 k[1-2]");
}

#[test]
fn a_pod_group_waits_for_all_its_nodes_while_single_pods_flow() {
    let k = Kube::start(&[("k1", 2), ("k2", 2), ("k3", 2), ("k4", 2)], &[]);
    // A long pod holds k-something whole.
    k.pod("long", "2", json!({}));
    let long = k.job_of("long");
    let long_node = k.node_of("long");
    k.api
        .create(
            &json!({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                        "metadata": {"name": "gang", "namespace": "default"},
                        "spec": {"minMember": 4}}),
        )
        .expect("podgroup");
    // Three of four members: no job yet.
    for i in 0..3 {
        k.pod(
            &format!("gang-{i}"),
            "2",
            json!({"metadata": {"labels": {"scheduling.x-k8s.io/pod-group": "gang"}}}),
        );
    }
    std::thread::sleep(Duration::from_secs(2));
    assert!(!k.has_job("gang-0"), "a PodGroup waits for minMember pods");
    k.pod(
        "gang-3",
        "2",
        json!({"metadata": {"labels": {"scheduling.x-k8s.io/pod-group": "gang"}}}),
    );
    let gang = k.job_of("gang-0");
    assert_eq!(gang.desc.min_nodes, Some(4));
    assert_eq!(
        gang.job_id,
        k.job_of("gang-3").job_id,
        "one job for the group"
    );
    let gang =
        k.t.wait_job(gang.job_id, 10, "pending", |j| j.state == JobState::Pending);
    assert_eq!(gang.state, JobState::Pending);
    // Single pods keep flowing past the waiting gang.
    k.pod(
        "quick",
        "1",
        json!({"metadata": {"annotations": {"fake-kubelet/run-seconds": "1"}}}),
    );
    let quick = k.job_of("quick");
    let quick_node = k.node_of("quick");
    assert_ne!(quick_node, long_node);
    assert_eq!(k.t.wait_done(quick.job_id, 20).state, JobState::Completed);
    for i in 0..4 {
        assert!(k.get_pod(&format!("gang-{i}")).expect("pod")["spec"]["nodeName"].is_null());
    }
    // The long pod goes: its job is cancelled, and the gang starts on all
    // four nodes, one pod each, in rank order.
    k.api
        .delete("pods", "default", "long", None)
        .expect("delete");
    let long = k.t.wait_done(long.job_id, 20);
    assert_eq!(long.state, JobState::Cancelled);
    let gang =
        k.t.wait_job(gang.job_id, 20, "running", |j| j.state == JobState::Running);
    let placed: Vec<String> = (0..4).map(|i| k.node_of(&format!("gang-{i}"))).collect();
    assert_eq!(
        placed, gang.alloc.nodes,
        "pods bound in rank order to the job's nodes"
    );
    k.wait_gone("long", 10);
    // A member that comes once its group is under way gets a job of its
    // own at once (it waits for a node like any job).
    k.pod(
        "gang-4",
        "2",
        json!({"metadata": {"labels": {"scheduling.x-k8s.io/pod-group": "gang"}}}),
    );
    let extra = k.job_of("gang-4");
    assert_ne!(extra.job_id, gang.job_id);
    assert_eq!(extra.desc.min_nodes, Some(1));
    assert_eq!(
        k.t.job(gang.job_id).expect("gang").state,
        JobState::Running,
        "the running group is not disturbed"
    );
}

#[test]
fn ending_either_side_ends_the_other_and_nothing_stays_terminating() {
    // k2's kubelet never answers.
    let k = Kube::start(&[("k1", 2), ("k2", 2)], &["k2"]);
    // scancel of a placeholder deletes its pod (k1: its kubelet confirms).
    let a = k.place("a", "k1");
    wait_for(10, "pod a running", || {
        (k.phase("a") == "Running").then_some(())
    });
    let out = k.t.run("scancel", &[&a.job_id.to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    k.wait_gone("a", 20);
    // A new pod of the same name (a StatefulSet's, say) is another pod: it
    // gets a job of its own while the old job is still on record, and the
    // old job's end does not delete it.
    k.pod(
        "a",
        "2",
        json!({"spec": {"nodeSelector": {"zone": "z-k1"}}}),
    );
    let a2 = wait_for(20, "a job for the new pod a", || {
        Some(k.job_of("a")).filter(|j| j.job_id != a.job_id)
    });
    k.t.wait_job(a2.job_id, 10, "running", |j| j.state == JobState::Running);
    assert_eq!(k.node_of("a"), "k1");
    assert!(
        k.t.job(a.job_id).is_some(),
        "the old job is still on record"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(k
        .get_pod("a")
        .is_some_and(|p| p["metadata"]["deletionTimestamp"].is_null()));
    k.t.run("scancel", &[&a2.job_id.to_string()]);
    k.wait_gone("a", 20);

    // A placeholder sent back to the queue ends, and its pod with it.
    let r = k.place("r", "k1");
    let out = k.t.run("scontrol", &["requeue", &r.job_id.to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(k.t.wait_done(r.job_id, 20).state, JobState::Cancelled);
    k.wait_gone("r", 20);

    // On k2 no kubelet confirms: the bridge releases the pod itself once
    // its grace period (1 s) and the release delay (1 s) are over.
    let b = k.place("b", "k2");
    k.t.run("scancel", &[&b.job_id.to_string()]);
    wait_for(10, "pod b terminating", || {
        k.get_pod("b")?["metadata"]["deletionTimestamp"]
            .as_str()
            .map(|_| ())
    });
    k.wait_gone("b", 20);

    // Deleting a pod that waits cancels its job at once (nothing fits it).
    k.pod(
        "c",
        "2",
        json!({"spec": {"nodeSelector": {"zone": "z-k1"}}}),
    );
    let c = k.job_of("c");
    k.t.wait_job(c.job_id, 10, "running", |j| j.state == JobState::Running);
    k.pod(
        "d",
        "2",
        json!({"spec": {"nodeSelector": {"zone": "z-k1"}}}),
    );
    let d = k.job_of("d");
    assert_eq!(k.t.job(d.job_id).expect("d").state, JobState::Pending);
    k.api
        .delete("pods", "default", "d", None)
        .expect("delete d");
    assert_eq!(k.t.wait_done(d.job_id, 20).state, JobState::Cancelled);
    k.wait_gone("d", 10);
    assert_eq!(
        k.t.job(c.job_id).expect("c").state,
        JobState::Running,
        "its neighbour runs on"
    );
}

#[test]
fn cordon_drains_uncordon_resumes_and_an_operators_drain_stays() {
    let k = Kube::start(&[("k1", 2), ("k2", 2)], &[]);
    let ok = |o: Output| assert!(o.status.success(), "kubectl failed: {}", stderr(&o));
    ok(kubectl(&k.kc, &["cordon", "k1"]));
    let n = k.t.wait_node("k1", 10, "drained", |n| n.flags.drain);
    assert!(
        n.reason
            .as_deref()
            .unwrap_or("")
            .starts_with("slurm-bridge:"),
        "{:?}",
        n.reason
    );
    ok(kubectl(&k.kc, &["uncordon", "k1"]));
    k.t.wait_node("k1", 10, "resumed", |n| !n.flags.drain);
    // An operator's drain is the operator's: uncordon does not undo it.
    let out = k.t.run(
        "scontrol",
        &["update", "NodeName=k2", "State=DRAIN", "Reason=disk swap"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    ok(kubectl(&k.kc, &["cordon", "k2"]));
    ok(kubectl(&k.kc, &["uncordon", "k2"]));
    std::thread::sleep(Duration::from_secs(2));
    let n =
        k.t.nodes()
            .into_iter()
            .find(|n| n.name == "k2")
            .expect("k2");
    assert!(
        n.flags.drain && n.reason.as_deref() == Some("disk swap"),
        "{:?}",
        n.reason
    );
    // A Kubernetes node that goes, goes from the cluster.
    k.api.delete("nodes", "", "k2", None).expect("delete node");
    wait_for(10, "k2 removed", || {
        (!k.t.nodes().iter().any(|n| n.name == "k2")).then_some(())
    });
}

#[test]
fn a_bad_pod_gets_no_job_and_others_are_not_held_up_and_users_cannot_speak_for_pods() {
    let k = Kube::start(&[("k1", 2)], &[]);
    // A pod whose annotation is not a time: no job, a clear log line.
    k.pod(
        "bad",
        "1",
        json!({"metadata": {"annotations": {format!("{ANN}timelimit"): "soon"}}}),
    );
    k.pod(
        "good",
        "1",
        json!({"metadata": {"annotations": {"fake-kubelet/run-seconds": "1"}}}),
    );
    let good = k.job_of("good");
    assert_eq!(k.t.wait_done(good.job_id, 20).state, JobState::Completed);
    assert!(!k.has_job("bad"));
    let log =
        std::fs::read_to_string(k.t.c.spec.dir.join("log/slurm-bridge.log")).unwrap_or_default();
    assert!(log.contains("timelimit") && log.contains("soon"), "{log}");
    // A pod naming a gang of Kubernetes' own scheduling API, which this
    // server (1.33) does not serve: it waits, and the log says why.
    k.pod(
        "gang-of-none",
        "1",
        json!({"spec": {"schedulingGroup": {"podGroupName": "pg"}}}),
    );
    wait_for(10, "the wait explained", || {
        k.log()
            .contains("PodGroup default/pg (scheduling.k8s.io): its pods name a scheduling.k8s.io PodGroup (default/pg), which this API server does not serve")
            .then_some(())
    });
    assert!(!k.has_job("gang-of-none"));
    // Whoever may create pods may not pick an account, QOS, partition or
    // reservation with the bridge's administrator rights unless the site
    // trusts them with it (--trusted-annotations).
    k.pod(
        "greedy",
        "1",
        json!({"metadata": {"annotations": {
        format!("{ANN}qos"): "high", format!("{ANN}reservation"): "maint"}}}),
    );
    wait_for(10, "the refusal logged", || {
        let log = std::fs::read_to_string(k.t.c.spec.dir.join("log/slurm-bridge.log")).ok()?;
        log.contains("default/greedy").then_some(())
    });
    let log =
        std::fs::read_to_string(k.t.c.spec.dir.join("log/slurm-bridge.log")).unwrap_or_default();
    assert!(log.contains("is not trusted by this bridge"), "{log}");
    assert!(!k.has_job("greedy"));
    // An ordinary user cannot write the admin comment that names pods on
    // their own job, so cannot make the bridge bind or delete pods for it.
    let id =
        k.t.sbatch_as_user(&["-p", "debug", "--hold", "--wrap=true"]);
    let out =
        k.t.cmd_as(TEST_UID, TEST_GID, "scontrol")
            .args([
                "update",
                &format!("JobId={id}"),
                r#"AdminComment={"pods":["default/good"]}"#,
            ])
            .output()
            .expect("scontrol");
    assert!(
        !out.status.success(),
        "a user set an admin comment: {}",
        stdout(&out)
    );
    assert!(
        stderr(&out).contains("Access/permission denied"),
        "{}",
        stderr(&out)
    );
    assert_eq!(k.t.job(id).expect("job").desc.admin_comment, None);
    // Even an administrator's job is not the bridge's to follow: the pod
    // stays as it is.
    let out = k.t.run(
        "scontrol",
        &[
            "update",
            &format!("JobId={id}"),
            r#"AdminComment={"pods":["default/good"]}"#,
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    k.t.run("scontrol", &["release", &id.to_string()]);
    k.t.wait_done(id, 20);
    std::thread::sleep(Duration::from_secs(1));
    assert!(k.get_pod("good").is_some());
    assert_eq!(k.phase("good"), "Succeeded");
}

#[test]
fn a_deleted_node_and_a_controller_restart_kill_no_job() {
    let mut k = Kube::start(&[("k1", 2), ("k2", 2), ("k3", 2)], &[]);
    let on_k1 = json!({"spec": {"nodeSelector": {"zone": "z-k1"}}});
    k.pod("first", "2", on_k1.clone());
    let first = k.job_of("first");
    assert_eq!(k.node_of("first"), "k1");
    k.pod("second", "2", on_k1);
    let second = k.job_of("second");
    assert_eq!(
        second.desc.exc_nodes,
        vec!["k2".to_string(), "k3".to_string()]
    );
    // k3 leaves Kubernetes, then the controller restarts.
    k.api.delete("nodes", "", "k3", None).expect("delete k3");
    wait_for(10, "k3 removed", || {
        (!k.t.nodes().iter().any(|n| n.name == "k3")).then_some(())
    });
    k.t.c.kill_ctld(libc::SIGKILL);
    k.t.c.start_ctld().expect("controller restart");
    std::thread::sleep(Duration::from_secs(2));
    let j = k.t.job(first.job_id).expect("first");
    assert_eq!(j.state, JobState::Running, "{}", k.t.logs());
    let j = k.t.job(second.job_id).expect("second");
    assert_eq!(j.state, JobState::Pending, "{:?} {}", j.reason, k.t.logs());
    // The bridge follows the new controller: the first pod goes, the
    // second takes its node.
    k.api
        .delete("pods", "default", "first", None)
        .expect("delete first");
    assert_eq!(k.t.wait_done(first.job_id, 20).state, JobState::Cancelled);
    k.t.wait_job(second.job_id, 20, "running", |j| {
        j.state == JobState::Running
    });
    assert_eq!(k.node_of("second"), "k1");
    // A stopped bridge loses nothing: a pod deleted meanwhile is held by the
    // finalizer until its job is cancelled; a pod created meanwhile gets one
    // job; the pods already placed get no second.
    k.bridge = None;
    k.pod("third", "1", json!({}));
    k.api
        .delete("pods", "default", "second", None)
        .expect("delete second");
    std::thread::sleep(Duration::from_millis(500));
    let held = k.get_pod("second").expect("held by the finalizer");
    assert!(held["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(
        k.t.job(second.job_id).expect("second").state,
        JobState::Running
    );
    k.start_bridge();
    assert_eq!(k.t.wait_done(second.job_id, 20).state, JobState::Cancelled);
    k.wait_gone("second", 20);
    let third = k.job_of("third");
    k.node_of("third");
    std::thread::sleep(Duration::from_secs(1));
    let theirs = |pod: &str| k.t.jobs().iter().filter(|j| holds(j, pod)).count();
    assert_eq!(
        (theirs("first"), theirs("second"), theirs("third")),
        (1, 1, 1)
    );
    assert_eq!(
        k.t.job(third.job_id).expect("third").state,
        JobState::Running
    );
}

/// The `cpuset.cpus` of job `id`'s cgroup on node `node` of cluster `t`
/// (this host's cpuset hierarchy at `top`). Other tests' clusters on the
/// host have nodes of the same name: the daemon's log says which top
/// directory it took.
fn job_cpuset(t: &TestCluster, top: &std::path::Path, node: &str, id: u32) -> Option<String> {
    let log = std::fs::read_to_string(t.c.spec.dir.join(format!("log/slurmd.{node}.log"))).ok()?;
    let line = log.lines().find(|l| l.contains("job cgroups:"))?;
    let path = line.split(" under ").nth(1)?.split([',', ' ']).next()?;
    let mine = std::path::Path::new(path).file_name()?;
    let dir = top.join(mine);
    for u in std::fs::read_dir(&dir).ok()?.flatten() {
        let f = u.path().join(format!("job_{id}")).join("cpuset.cpus");
        // A cpuset made a moment ago is empty until its CPUs are written.
        if let Ok(c) = std::fs::read_to_string(&f) {
            return Some(c.trim().to_string()).filter(|c| !c.is_empty());
        }
    }
    None
}

fn cpu_set(list: &str) -> std::collections::BTreeSet<u32> {
    let mut s = std::collections::BTreeSet::new();
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    s.extend(a..=b);
                }
            }
            None => {
                if let Ok(a) = part.parse() {
                    s.insert(a);
                }
            }
        }
    }
    s
}

#[test]
fn a_pod_beside_a_batch_job_on_a_kubelet_node_gets_cores_of_its_own() {
    let Some((top, v2)) = slurm_tests::k8s::cpuset_top() else {
        panic!("no cpuset cgroup hierarchy on this machine");
    };
    let root = format!("slurm-test-kubelet-{}", std::process::id());
    let t = TestCluster::start(1, |s| {
        s.cpus = 2;
        s.extra_conf =
            "ProctrackType=proctrack/cgroup\nTaskPlugin=task/affinity,task/cgroup\n".into();
        s.cgroup_conf = Some("CgroupPlugin=autodetect\nConstrainCores=yes\n".into());
        s.slurmd_args = vec![format!("--kubelet={root}")];
        s.accounting = true;
    });
    // n1 runs a kubelet too: a Kubernetes node of the same name.
    let mut k = Kube::on(t, 33, &[("n1", 2)], &[], Some(root.clone()), "debug", &[]);
    let n1 =
        k.t.nodes()
            .into_iter()
            .find(|n| n.name == "n1")
            .expect("n1");
    assert!(n1.kubelet && !n1.external, "n1 registers as a kubelet node");
    // A batch job takes one of its two CPUs.
    let batch = k.t.sbatch(&["-c", "1", "-t", "2", "--wrap", "sleep 120"]);
    k.t.wait_job(batch, 20, "running", |j| j.state == JobState::Running);
    let batch_cpus = wait_for(10, "the batch job's cpuset", || {
        job_cpuset(&k.t, &top, "n1", batch)
    });
    // A pod asking for one CPU comes to the same node, beside it.
    k.pod("shared", "1", json!({}));
    let job = k.job_of("shared");
    assert_eq!(k.node_of("shared"), "n1");
    let j =
        k.t.wait_job(job.job_id, 10, "running", |j| j.state == JobState::Running);
    assert_eq!(j.alloc.nodes, vec!["n1".to_string()]);
    let uid = k.get_pod("shared").expect("pod")["metadata"]["uid"]
        .as_str()
        .expect("uid")
        .to_string();
    let ctr = top
        .join(&root)
        .join("kubepods/besteffort")
        .join(format!("pod{uid}"))
        .join("c0");
    let file = if v2 {
        "cpuset.cpus.effective"
    } else {
        "cpuset.effective_cpus"
    };
    let pod_cpus = wait_for(
        20,
        &format!("the pod pinned apart from the batch job\n{}", k.t.logs()),
        || {
            let c = std::fs::read_to_string(ctr.join(file)).ok()?;
            let (p, b) = (cpu_set(&c), cpu_set(&batch_cpus));
            (!p.is_empty() && p.is_disjoint(&b)).then_some(c.trim().to_string())
        },
    );
    // Its process runs on those CPUs only.
    let procs = if v2 { "cgroup.procs" } else { "tasks" };
    let pid = std::fs::read_to_string(ctr.join(procs)).expect("procs");
    let pid = pid.lines().next().expect("a process in the pod");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list");
    assert_eq!(cpu_set(allowed), cpu_set(&pod_cpus));
    // An ordinary user cannot move the pod onto the batch job's CPU by
    // sending the node daemon a placement of their own.
    let key = slurm_common::auth::Key::load(&slurm_common::auth::key_path(&k.t.c.spec.conf_path()))
        .expect("key");
    let (tls, _) = k.t.command_tls();
    let facts = slurm_proto::JobPrologue {
        job_id: job.job_id,
        uid: TEST_UID,
        gid: TEST_GID,
        user_name: "nobody".into(),
        partition: "debug".into(),
        account: String::new(),
        alloc: slurm_proto::Allocation {
            nodes: vec!["n1".into()],
            cpus: vec![2],
            mem: vec![0],
            tasks: vec![1],
            gres: vec![],
        },
        pod_uids: vec![uid.clone()],
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let slurmd = format!("{}:{}", k.t.c.spec.ip, k.t.c.spec.slurmd_ports[0]);
    let r = rt
        .block_on(async {
            let ch = slurm_common::grpc::channel(Some(tls.client.clone()), &slurmd, "n1")?;
            slurm_common::grpc::call_node(
                &ch,
                "n1",
                slurm_proto::grpc::NodeCall::Prologue(Box::new(facts.into())),
                |b| Ok(key.sign(TEST_UID, TEST_GID, "test", slurm_common::auth::now(), b)),
                Duration::from_secs(5),
            )
            .await
        })
        .expect("slurmd answers");
    assert!(
        matches!(&r, Response::Error(e) if e.error == SlurmError::AccessDenied),
        "a user's placement was taken: {r:?}"
    );
    std::thread::sleep(Duration::from_millis(700));
    let now = std::fs::read_to_string(ctr.join(file)).expect("cpuset");
    assert_eq!(cpu_set(&now), cpu_set(&pod_cpus));
    // The pod goes: its job ends, what the pod used is the job's extern
    // step, and its CPU is the next job's.
    k.api
        .delete("pods", "default", "shared", None)
        .expect("delete");
    assert_eq!(k.t.wait_done(job.job_id, 20).state, JobState::Cancelled);
    let ext = wait_for(10, "the pod's usage as the job's extern step", || {
        let j = k.t.job(job.job_id)?;
        let st = j
            .steps
            .iter()
            .find(|s| s.step_id == slurm_proto::EXTERN_STEP)?
            .clone();
        st.usage.filter(|u| u.max_rss_bytes > 0).map(|u| (st, u))
    });
    assert_eq!(ext.0.name, "extern");
    assert_eq!(ext.0.nodes, vec!["n1".to_string()]);
    assert_eq!(ext.0.usage_node.as_deref(), Some("n1"));
    // ... and reaches accounting as JOBID.extern.
    wait_for(20, "the extern step in sacct", || {
        let out = stdout(&k.t.run(
            "sacct",
            &[
                "-j",
                &job.job_id.to_string(),
                "-n",
                "-P",
                "-o",
                "JobID,MaxRSS",
            ],
        ));
        out.lines()
            .any(|l| l.starts_with(&format!("{}.extern|", job.job_id)) && !l.ends_with('|'))
            .then_some(())
    });
    let next = k.t.sbatch(&["-c", "1", "-t", "2", "--wrap", "sleep 120"]);
    k.t.wait_job(next, 20, "running", |j| j.state == JobState::Running);
    let next_cpus = wait_for(10, "the next job's cpuset", || {
        job_cpuset(&k.t, &top, "n1", next)
    });
    assert_eq!(
        cpu_set(&next_cpus),
        cpu_set(&pod_cpus),
        "the pod's CPU went back to the book"
    );
    eprintln!("batch job: CPUs {batch_cpus}; pod: CPUs {pod_cpus} (its process: {allowed}); next job: CPUs {next_cpus}");
    // Their processes go before the cluster does: a job left running would
    // hold its cgroup for the next test's daemon on this host.
    k.t.run("scancel", &[&batch.to_string(), &next.to_string()]);
    k.t.wait_done(batch, 30);
    k.t.wait_done(next, 30);

    // A node daemon restarted while a pod runs pins it again and keeps its
    // CPU from batch jobs. The pod comes first now, so it has the CPU a
    // daemon that forgot it would give the next batch job.
    k.pod("again", "1", json!({}));
    let again = k.job_of("again");
    k.t.wait_job(again.job_id, 20, "running", |j| {
        j.state == JobState::Running
    });
    let uid = k.get_pod("again").expect("pod")["metadata"]["uid"]
        .as_str()
        .expect("uid")
        .to_string();
    let pod_dir = top
        .join(&root)
        .join("kubepods/besteffort")
        .join(format!("pod{uid}"));
    let pinned = wait_for(20, "the second pod pinned", || {
        let c = std::fs::read_to_string(pod_dir.join("cpuset.cpus")).ok()?;
        (cpu_set(&c).len() == 1).then(|| cpu_set(&c))
    });
    k.t.c.kill_slurmd(0, libc::SIGKILL);
    k.t.c.start_slurmd(0).expect("slurmd restarts");
    wait_for_with(
        20,
        || format!("the pod re-adopted\n{}", k.t.logs()),
        || {
            let log = std::fs::read_to_string(k.t.c.spec.dir.join("log/slurmd.n1.log")).ok()?;
            log.contains(&format!("re-adopted pod {uid}")).then_some(())
        },
    );
    // The kubelet widens the pod's cpuset: the daemon narrows it again.
    std::fs::write(pod_dir.join("cpuset.cpus"), "0-1").expect("widen the pod's cpuset");
    wait_for(10, "the pod pinned again after the restart", || {
        let c = std::fs::read_to_string(pod_dir.join("cpuset.cpus")).ok()?;
        (cpu_set(&c) == pinned).then_some(())
    });
    let after = k.t.sbatch(&["-c", "1", "-t", "2", "--wrap", "sleep 120"]);
    k.t.wait_job(after, 20, "running", |j| j.state == JobState::Running);
    let after_cpus = wait_for(30, "the batch job's cpuset after the restart", || {
        job_cpuset(&k.t, &top, "n1", after)
    });
    assert!(
        cpu_set(&after_cpus).is_disjoint(&pinned),
        "after a restart a batch job got the pod's CPU: job {after_cpus}, pod {pinned:?}"
    );
    // The pod's job ends while the daemon is away: once back, the daemon is
    // told and gives the CPU back.
    k.t.c.kill_slurmd(0, libc::SIGKILL);
    k.api
        .delete("pods", "default", "again", None)
        .expect("delete");
    k.t.wait_job(again.job_id, 30, "cancelled", |j| {
        j.state == JobState::Cancelled
    });
    k.t.c.start_slurmd(0).expect("slurmd restarts");
    assert_eq!(k.t.wait_done(again.job_id, 30).state, JobState::Cancelled);
    wait_for_with(
        30,
        || format!("the pod's record gone from the spool\n{}", k.t.logs()),
        || {
            let dir = k.t.c.spec.dir.join("spool/slurmd.n1/pods.n1");
            let left = std::fs::read_dir(&dir).map(|d| d.count()).unwrap_or(0);
            (left == 0).then_some(())
        },
    );
    k.t.run("scancel", &[&after.to_string()]);
    k.t.wait_done(after, 30);
}

#[test]
fn bridged_gpus_are_scheduled_as_gres() {
    let k = Kube::start(&[("k1", 2)], &[]);
    k.api
        .create(&json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "g1", "labels": {LABEL: "true"}},
            "spec": {},
            "status": {"allocatable": {"cpu": "4", "memory": "4Gi", "nvidia.com/gpu": "2"}}}))
        .expect("gpu node");
    let g1 = k.t.wait_node("g1", 20, "an external node", |n| n.external);
    assert_eq!(g1.gres, vec!["gpu:2".to_string()]);
    let gpus = |n: u32| {
        json!({"spec": {"containers": [{"name": "c", "image": "cuda",
        "resources": {"requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": n.to_string()}}}]}})
    };
    // Two GPUs: only g1 has them.
    k.pod("train", "1", gpus(2));
    let j = k.job_of("train");
    assert_eq!(j.desc.gres.as_deref(), Some("gpu:2"));
    assert_eq!(k.node_of("train"), "g1");
    // Three GPUs: no node has them, the job is refused and the pod waits.
    k.pod("huge", "1", gpus(3));
    std::thread::sleep(Duration::from_secs(1));
    assert!(k.get_pod("huge").expect("pod")["spec"]["nodeName"].is_null());
    let log =
        std::fs::read_to_string(k.t.c.spec.dir.join("log/slurm-bridge.log")).unwrap_or_default();
    assert!(
        log.contains("default/huge") && log.contains("refused"),
        "{log}"
    );
    // A bad Gres= on a new node is named and changes nothing.
    let out = k.t.run(
        "scontrol",
        &[
            "create",
            "NodeName=x1",
            "State=External",
            "Gres=gpu:a100:lots",
        ],
    );
    assert!(!out.status.success());
    assert!(stderr(&out).contains("gpu:a100:lots"), "{}", stderr(&out));
    assert!(!k.t.nodes().iter().any(|n| n.name == "x1"));
    // An ordinary user cannot add a node with GPUs (or any node).
    let out =
        k.t.cmd_as(TEST_UID, TEST_GID, "scontrol")
            .args([
                "create",
                "NodeName=x2",
                "State=External",
                "CPUs=64",
                "Gres=gpu:8",
            ])
            .output()
            .expect("scontrol");
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("Access/permission denied"),
        "{}",
        stderr(&out)
    );
    assert!(!k.t.nodes().iter().any(|n| n.name == "x2"));
}

#[test]
fn trusted_annotations_choose_partition_account_and_qos() {
    let t = TestCluster::start(1, |s| {
        s.extra_conf
            .push_str("PartitionName=kube MaxTime=INFINITE State=UP\n");
    });
    let k = Kube::on(
        t,
        33,
        &[("k1", 2)],
        &[],
        None,
        "kube",
        &["--trusted-annotations=job-name,timelimit,partition,account,qos"],
    );
    // A second partition holding k1: the pod asks for it by annotation.
    let out = k.t.run(
        "scontrol",
        &[
            "create",
            "PartitionName=other",
            "Nodes=k1",
            "MaxTime=INFINITE",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    k.pod(
        "chosen",
        "1",
        json!({"metadata": {"annotations": {
            format!("{ANN}partition"): "other",
            format!("{ANN}account"): "physics",
            format!("{ANN}qos"): "normal",
            format!("{ANN}timelimit"): "1:30:00"}}}),
    );
    let j = k.job_of("chosen");
    assert_eq!(j.partition, "other");
    assert_eq!(j.account, "physics");
    assert_eq!(j.qos, "normal");
    assert_eq!(j.time_limit, Some(90));
    assert_eq!(k.node_of("chosen"), "k1");
    // A partition a pod may not use is the controller's to refuse: the
    // pod gets no job and waits.
    k.pod(
        "nowhere",
        "1",
        json!({"metadata": {"annotations": {format!("{ANN}partition"): "debug"}}}),
    );
    wait_for(10, "the refusal logged", || {
        let log = std::fs::read_to_string(k.t.c.spec.dir.join("log/slurm-bridge.log")).ok()?;
        (log.contains("default/nowhere") && log.contains("refused")).then_some(())
    });
    assert!(k.get_pod("nowhere").expect("pod")["spec"]["nodeName"].is_null());
    // Still untrusted here: a reservation.
    k.pod(
        "resv",
        "1",
        json!({"metadata": {"annotations": {format!("{ANN}reservation"): "maint"}}}),
    );
    wait_for(10, "the refusal logged", || {
        let log = std::fs::read_to_string(k.t.c.spec.dir.join("log/slurm-bridge.log")).ok()?;
        (log.contains("default/resv") && log.contains("reservation is not trusted")).then_some(())
    });
}

#[test]
fn kubernetes_1_35_workloads_gang_their_pods_by_pod_group_and_replica() {
    let k = Kube::start_as(35, &[("k1", 2), ("k2", 2), ("k3", 2)], &[]);
    let wref = |group: &str, replica: Option<&str>| {
        let mut r = json!({"name": "train", "podGroup": group});
        if let Some(x) = replica {
            r["podGroupReplicaKey"] = json!(x);
        }
        json!({"spec": {"workloadRef": r}})
    };
    // Its Workload is not there yet: the pod waits.
    k.pod("w-0", "1", wref("workers", None));
    wait_for(10, "the wait for the Workload said", || {
        k.log()
            .contains(
                "Workload default/train pod group workers: waiting for Workload default/train",
            )
            .then_some(())
    });
    k.api
        .create(
            &json!({"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload",
            "metadata": {"name": "train", "namespace": "default"},
            "spec": {"podGroups": [
                {"name": "workers", "policy": {"gang": {"minCount": 2}}},
                {"name": "driver", "policy": {"basic": {}}}]}}),
        )
        .expect("workload");
    // One of two workers: still no job.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!k.has_job("w-0"), "a gang waits for minCount pods");
    k.pod("w-1", "1", wref("workers", None));
    let gang = k.job_of("w-0");
    assert_eq!(gang.job_id, k.job_of("w-1").job_id, "one job for the gang");
    assert_eq!(gang.desc.min_nodes, Some(2));
    assert_eq!(gang.name, "train-workers");
    let gang =
        k.t.wait_job(gang.job_id, 20, "running", |j| j.state == JobState::Running);
    let placed = vec![k.node_of("w-0"), k.node_of("w-1")];
    assert_eq!(placed, gang.alloc.nodes, "bound in rank order");
    // A basic pod group: each pod a job of its own.
    k.pod("d-0", "1", wref("driver", None));
    k.pod("d-1", "1", wref("driver", None));
    let (d0, d1) = (k.job_of("d-0"), k.job_of("d-1"));
    assert_ne!(d0.job_id, d1.job_id);
    assert_eq!((d0.desc.min_nodes, d1.desc.min_nodes), (Some(1), Some(1)));
    // A replica key splits a pod group into gangs of their own.
    k.pod("r-0", "1", wref("workers", Some("1")));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!k.has_job("r-0"), "replica 1 waits for its own minCount");
    k.pod("r-1", "1", wref("workers", Some("1")));
    let rep = k.job_of("r-0");
    assert_eq!(rep.job_id, k.job_of("r-1").job_id);
    assert_ne!(rep.job_id, gang.job_id);
    assert_eq!(rep.name, "train-workers-1");
    assert_eq!(rep.desc.min_nodes, Some(2));
}

#[test]
fn kubernetes_1_36_pod_groups_gang_their_pods() {
    let k = Kube::start_as(36, &[("k1", 2), ("k2", 2)], &[]);
    let member = |group: &str| json!({"spec": {"schedulingGroup": {"podGroupName": group}}});
    for (name, policy) in [
        ("pg", json!({"gang": {"minCount": 2}})),
        ("solo", json!({"basic": {}})),
    ] {
        k.api
            .create(
                &json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"schedulingPolicy": policy}}),
            )
            .expect("podgroup");
    }
    // kubectl finds them through discovery as on a real 1.36 server.
    let out = kubectl(&k.kc, &["get", "podgroups.scheduling.k8s.io", "-o", "name"]);
    assert_eq!(
        stdout(&out).lines().collect::<Vec<_>>(),
        vec![
            "podgroup.scheduling.k8s.io/pg",
            "podgroup.scheduling.k8s.io/solo"
        ],
        "{}",
        stderr(&out)
    );
    k.pod("a", "2", member("pg"));
    // A pod of a basic group goes on its own (and runs to the end).
    k.pod(
        "s",
        "1",
        json!({"metadata": {"annotations": {"fake-kubelet/run-seconds": "1"}},
               "spec": {"schedulingGroup": {"podGroupName": "solo"}}}),
    );
    let s = k.job_of("s");
    assert_eq!(k.t.wait_done(s.job_id, 20).state, JobState::Completed);
    assert!(!k.has_job("a"), "a gang waits for minCount pods");
    k.pod("b", "2", member("pg"));
    let gang = k.job_of("a");
    assert_eq!(gang.job_id, k.job_of("b").job_id);
    assert_eq!(gang.desc.min_nodes, Some(2));
    assert_eq!(gang.name, "pg");
    let gang =
        k.t.wait_job(gang.job_id, 20, "running", |j| j.state == JobState::Running);
    let mut placed = vec![k.node_of("a"), k.node_of("b")];
    assert_eq!(placed, gang.alloc.nodes);
    placed.sort();
    assert_eq!(placed, vec!["k1".to_string(), "k2".to_string()]);
    // Deleting a member ends the gang's job, and its other pod with it.
    k.api.delete("pods", "default", "a", None).expect("delete");
    assert_eq!(k.t.wait_done(gang.job_id, 20).state, JobState::Cancelled);
    k.wait_gone("b", 20);
}
