//! The bridge's loop: Kubernetes watches (pods for our scheduler, PodGroups,
//! labelled nodes) and the controller's watch stream feed one task, which
//! after each event brings both sides together: groups that are complete
//! get a placeholder job, started jobs get their pods bound, ended jobs get
//! their pods deleted, deleted pods get their job cancelled, and bridged
//! Kubernetes nodes are mirrored as `State=External` nodes.
//!
//! Nothing is polled: the only timer releases pods whose kubelet never
//! confirms a deletion and retries what failed.

use crate::ctld::Ctld;
use crate::plan::{self, GroupKey, Policy, SchedRef};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher;
use serde_json::json;
use slurm_proto::grpc::pb::{self, watch_event::Event as CtldEvent};
use slurm_proto::{CancelFilter, NodeSpec, NodeStateRequest, RequestBody, Response};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the bridge is told at start.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Pods whose `schedulerName` is this are ours.
    pub scheduler_name: String,
    /// Kubernetes nodes with this label (and value, when given) become
    /// external nodes.
    pub node_label: (String, Option<String>),
    /// The partition pods' jobs go to, and bridged nodes join.
    pub partition: Option<String>,
    /// How long after a pod's deletion grace period ends the bridge removes
    /// it itself (its kubelet never confirmed).
    pub release_after: Duration,
    /// Annotations honoured (see [`plan::DEFAULT_TRUSTED`]).
    pub trusted_annotations: Vec<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            scheduler_name: "slurm-bridge-scheduler".into(),
            node_label: ("slinky.slurm.net/slurm-bridge".into(), None),
            partition: None,
            release_after: Duration::from_secs(10),
            trusted_annotations: plan::DEFAULT_TRUSTED
                .iter()
                .map(|s| s.to_string())
                .collect(),
        }
    }
}

impl Settings {
    fn label_selector(&self) -> String {
        match &self.node_label.1 {
            Some(v) => format!("{}={v}", self.node_label.0),
            None => self.node_label.0.clone(),
        }
    }
}

/// A pod as the watch brings it, with its reference to Kubernetes' own
/// scheduling API read from the JSON (the typed `Pod` has no such field).
#[derive(Debug, Clone)]
pub struct KPod {
    pod: Pod,
    sched: Option<SchedRef>,
}

impl<'de> serde::Deserialize<'de> for KPod {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        let sched = SchedRef::of_spec(&v["spec"]);
        let pod = serde_json::from_value(v).map_err(serde::de::Error::custom)?;
        Ok(KPod { pod, sched })
    }
}

impl k8s_openapi::Resource for KPod {
    const API_VERSION: &'static str = <Pod as k8s_openapi::Resource>::API_VERSION;
    const GROUP: &'static str = <Pod as k8s_openapi::Resource>::GROUP;
    const KIND: &'static str = <Pod as k8s_openapi::Resource>::KIND;
    const VERSION: &'static str = <Pod as k8s_openapi::Resource>::VERSION;
    const URL_PATH_SEGMENT: &'static str = <Pod as k8s_openapi::Resource>::URL_PATH_SEGMENT;
    type Scope = <Pod as k8s_openapi::Resource>::Scope;
}

impl k8s_openapi::Metadata for KPod {
    type Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    fn metadata(&self) -> &Self::Ty {
        &self.pod.metadata
    }
    fn metadata_mut(&mut self) -> &mut Self::Ty {
        &mut self.pod.metadata
    }
}

enum Ev {
    Pod(Box<watcher::Event<KPod>>),
    PodGroup(Box<watcher::Event<DynamicObject>>),
    /// Kubernetes 1.35's `scheduling.k8s.io/v1alpha1` Workloads.
    Workload(Box<watcher::Event<DynamicObject>>),
    /// Kubernetes 1.36's (and later) `scheduling.k8s.io` PodGroups.
    SchedGroup(Box<watcher::Event<DynamicObject>>),
    Node(Box<watcher::Event<Node>>),
    Ctld(Box<CtldEvent>),
    /// The controller's stream ended; a new one starts with a full listing.
    CtldLost,
    Tick,
}

/// A placeholder job as the controller last told.
#[derive(Debug, Clone)]
struct Job {
    state: String,
    /// Its run: how many times it was requeued.
    run: u32,
    nodes: Vec<String>,
    /// `namespace/name` and uid of each pod, in the order they take the
    /// job's nodes.
    pods: Vec<(String, Option<String>)>,
}

fn ended(state: &str) -> bool {
    matches!(
        state,
        "COMPLETED"
            | "CANCELLED"
            | "FAILED"
            | "TIMEOUT"
            | "PREEMPTED"
            | "NODE_FAIL"
            | "BOOT_FAIL"
            | "DEADLINE"
            | "OUT_OF_MEMORY"
    )
}

fn pod_finished(p: &Pod) -> bool {
    matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn deleting(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_some()
}

fn bound(p: &Pod) -> bool {
    p.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

fn has_finalizer(p: &Pod) -> bool {
    p.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == plan::FINALIZER))
}

struct Bridge {
    s: Settings,
    kube: kube::Client,
    slurm: Arc<Ctld>,
    submit_host: String,
    /// Who the bridge runs as: its jobs are this user's.
    uid: u32,
    pods: BTreeMap<String, Pod>,
    /// Pods' references to Kubernetes' own scheduling API, by pod id.
    sched_refs: BTreeMap<String, SchedRef>,
    pods_synced: bool,
    pod_groups: BTreeMap<(String, String), u32>,
    /// Workloads' pod group policies, by (namespace, name).
    workloads: BTreeMap<(String, String), BTreeMap<String, Policy>>,
    /// `scheduling.k8s.io` PodGroups' policies, by (namespace, name).
    sched_groups: BTreeMap<(String, String), Policy>,
    /// The `scheduling.k8s.io` kinds the API server serves and the bridge
    /// watches (set once discovery has answered).
    sched_kinds: Arc<std::sync::Mutex<Option<BTreeSet<&'static str>>>>,
    /// Gangs waiting for their Workload or PodGroup, said once each.
    said_waiting: BTreeSet<GroupKey>,
    knodes: BTreeMap<String, Node>,
    knodes_synced: bool,
    jobs: BTreeMap<u32, Job>,
    /// Controller nodes: state and reason.
    cnodes: BTreeMap<String, (String, Option<String>)>,
    ctld_synced: bool,
    /// Jobs the bridge asked to cancel or complete (asked once).
    closed: BTreeSet<u32>,
    /// Pods (by uid) whose job ended: never given another.
    done: BTreeSet<String>,
    /// Groups whose submission was refused: when to try again.
    retry: BTreeMap<GroupKey, Instant>,
    /// Groups whose submission got no answer (a job may exist for them),
    /// with their pods' uids: their job is looked for before they are
    /// submitted again.
    unsure: BTreeMap<GroupKey, Vec<String>>,
    /// Pods (by uid) the bridge bound.
    bound: BTreeSet<String>,
    /// The run (requeue count) each job's pods were bound for.
    bound_run: BTreeMap<u32, u32>,
    /// Labelled nodes listed since the node watch (re)started.
    knodes_listed: Option<BTreeSet<String>>,
    /// Nodes gone from Kubernetes still to remove from the cluster.
    to_remove: BTreeSet<String>,
    /// Pods (by uid) whose binding failed: when to try again, and how many
    /// times it failed (each wait twice the last, up to a minute).
    bind_retry: BTreeMap<String, (Instant, u32)>,
    /// Kubernetes nodes we asked the controller to create.
    created: BTreeSet<String>,
}

/// Run the bridge until a watch cannot be kept (an error to report).
pub async fn run(s: Settings, kube: kube::Client, slurm: Ctld) -> anyhow::Result<()> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Ev>(1024);
    let pods: Api<KPod> = Api::all(kube.clone());
    let pod_cfg =
        watcher::Config::default().fields(&format!("spec.schedulerName={}", s.scheduler_name));
    spawn_watch(watcher(pods, pod_cfg), tx.clone(), |e| Ev::Pod(Box::new(e)));
    let nodes: Api<Node> = Api::all(kube.clone());
    let node_cfg = watcher::Config::default().labels(&s.label_selector());
    spawn_watch(watcher(nodes, node_cfg), tx.clone(), |e| {
        Ev::Node(Box::new(e))
    });
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "scheduling.x-k8s.io",
        "v1alpha1",
        "PodGroup",
    ));
    let groups: Api<DynamicObject> = Api::all_with(kube.clone(), &ar);
    spawn_watch(
        watcher(groups, watcher::Config::default()),
        tx.clone(),
        |e| Ev::PodGroup(Box::new(e)),
    );
    let sched_kinds = Arc::new(std::sync::Mutex::new(None));
    tokio::spawn(watch_sched_api(
        kube.clone(),
        tx.clone(),
        sched_kinds.clone(),
    ));
    let slurm = Arc::new(slurm);
    tokio::spawn(watch_controller(slurm.clone(), tx.clone()));
    let ticker = tx.clone();
    tokio::spawn(async move {
        let mut t = tokio::time::interval(Duration::from_secs(1));
        loop {
            t.tick().await;
            if ticker.send(Ev::Tick).await.is_err() {
                return;
            }
        }
    });
    let mut b = Bridge {
        s,
        kube,
        slurm,
        submit_host: slurm_common::users::hostname(),
        // SAFETY: getuid cannot fail.
        uid: unsafe { libc::getuid() },
        pods: BTreeMap::new(),
        sched_refs: BTreeMap::new(),
        pods_synced: false,
        pod_groups: BTreeMap::new(),
        workloads: BTreeMap::new(),
        sched_groups: BTreeMap::new(),
        sched_kinds,
        said_waiting: BTreeSet::new(),
        knodes: BTreeMap::new(),
        knodes_synced: false,
        jobs: BTreeMap::new(),
        cnodes: BTreeMap::new(),
        ctld_synced: false,
        closed: BTreeSet::new(),
        done: BTreeSet::new(),
        retry: BTreeMap::new(),
        unsure: BTreeMap::new(),
        created: BTreeSet::new(),
        bound: BTreeSet::new(),
        bound_run: BTreeMap::new(),
        knodes_listed: None,
        to_remove: BTreeSet::new(),
        bind_retry: BTreeMap::new(),
    };
    tracing::info!(
        "slurm-bridge started: scheduling pods of schedulerName {}, bridging nodes labelled {}",
        b.s.scheduler_name,
        b.s.label_selector()
    );
    while let Some(ev) = rx.recv().await {
        let tick = matches!(ev, Ev::Tick);
        b.take(ev);
        // Take what else is already waiting before acting once.
        while let Ok(ev) = rx.try_recv() {
            b.take(ev);
        }
        b.reconcile(tick).await;
    }
    Ok(())
}

fn spawn_watch<K, S>(
    stream: S,
    tx: tokio::sync::mpsc::Sender<Ev>,
    wrap: fn(watcher::Event<K>) -> Ev,
) where
    K: Send + 'static,
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        let mut said = String::new();
        while let Some(e) = stream.next().await {
            match e {
                Ok(e) => {
                    said.clear();
                    if tx.send(wrap(e)).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    // The watcher starts again on its own; wait a little.
                    let msg = e.to_string();
                    if msg != said {
                        tracing::warn!("Kubernetes watch: {msg}");
                        said = msg;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    });
}

/// The API group of Kubernetes' own gang scheduling.
const SCHED_GROUP: &str = "scheduling.k8s.io";

/// Find which of Kubernetes' own gang scheduling kinds the API server
/// serves (1.35: `v1alpha1` Workloads, named by pods' `workloadRef`; 1.36
/// and later: PodGroups, named by pods' `schedulingGroup`) and watch them.
/// Asked again while the server cannot be reached; a server without them
/// is final (their pods then wait, and the log says why).
async fn watch_sched_api(
    kube: kube::Client,
    tx: tokio::sync::mpsc::Sender<Ev>,
    kinds: Arc<std::sync::Mutex<Option<BTreeSet<&'static str>>>>,
) {
    let group = loop {
        match kube::discovery::group(&kube, SCHED_GROUP).await {
            Ok(g) => break Some(g),
            Err(kube::Error::Discovery(_)) => break None,
            Err(e) => {
                tracing::debug!("discovery of {SCHED_GROUP}: {e}; again");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
    };
    let mut found = BTreeSet::new();
    if let Some(g) = group {
        // 1.35's Workloads carry the policies pods' `workloadRef` reads;
        // later Workloads are templates, and PodGroups carry them.
        if let Some((ar, _)) = g
            .versioned_resources("v1alpha1")
            .into_iter()
            .find(|(ar, _)| ar.kind == "Workload")
        {
            let api: Api<DynamicObject> = Api::all_with(kube.clone(), &ar);
            spawn_watch(watcher(api, watcher::Config::default()), tx.clone(), |e| {
                Ev::Workload(Box::new(e))
            });
            found.insert("Workload");
        }
        if let Some((ar, _)) = g.recommended_kind("PodGroup") {
            let api: Api<DynamicObject> = Api::all_with(kube.clone(), &ar);
            spawn_watch(watcher(api, watcher::Config::default()), tx.clone(), |e| {
                Ev::SchedGroup(Box::new(e))
            });
            found.insert("PodGroup");
        }
    }
    tracing::info!(
        "{SCHED_GROUP} gangs: {}",
        if found.is_empty() {
            "not served by this API server".to_string()
        } else {
            found.iter().copied().collect::<Vec<_>>().join(" and ")
        }
    );
    *kinds.lock().unwrap_or_else(|p| p.into_inner()) = Some(found);
    let _ = tx.send(Ev::Tick).await;
}

/// Follow the controller's watch stream (jobs and nodes), trying the
/// controllers in turn, forever.
async fn watch_controller(slurm: Arc<Ctld>, tx: tokio::sync::mpsc::Sender<Ev>) {
    let creds = slurm.creds();
    let mut said = String::new();
    loop {
        for (server, addr) in &slurm.controllers {
            let r = async {
                let tls = slurm_common::tls::client().cloned();
                let ch =
                    slurm_common::grpc::channel(tls, addr, server).map_err(|e| e.to_string())?;
                let req = pb::WatchRequest {
                    jobs: true,
                    nodes: true,
                    ..Default::default()
                };
                let mut events =
                    slurm_common::grpc::watch(&ch, server, req, |b| creds.credential(b))
                        .await
                        .map_err(|e| e.to_string())?;
                while let Some(e) = events
                    .message()
                    .await
                    .map_err(|e| e.message().to_string())?
                {
                    if let Some(e) = e.event {
                        if tx.send(Ev::Ctld(Box::new(e))).await.is_err() {
                            return Ok(());
                        }
                    }
                }
                Ok::<(), String>(())
            }
            .await;
            let _ = tx.send(Ev::CtldLost).await;
            let why = match r {
                Ok(()) => format!("the controller at {addr} ended the watch"),
                Err(e) => format!("cannot watch the controller at {addr}: {e}"),
            };
            if why != said {
                tracing::info!("{why}");
                said = why;
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

impl Bridge {
    fn take(&mut self, ev: Ev) {
        match ev {
            Ev::Pod(e) => match *e {
                watcher::Event::Init => {
                    self.pods.clear();
                    self.sched_refs.clear();
                    self.pods_synced = false;
                }
                watcher::Event::InitApply(p) | watcher::Event::Apply(p) => {
                    let id = plan::pod_id(&p.pod);
                    match p.sched {
                        Some(r) => self.sched_refs.insert(id.clone(), r),
                        None => self.sched_refs.remove(&id),
                    };
                    self.pods.insert(id, p.pod);
                }
                watcher::Event::InitDone => self.pods_synced = true,
                watcher::Event::Delete(p) => {
                    let p = p.pod;
                    self.pods.remove(&plan::pod_id(&p));
                    self.sched_refs.remove(&plan::pod_id(&p));
                    if let Some(u) = &p.metadata.uid {
                        self.bound.remove(u);
                        self.done.remove(u);
                        self.bind_retry.remove(u);
                    }
                }
            },
            Ev::PodGroup(e) => match *e {
                watcher::Event::Init => self.pod_groups.clear(),
                watcher::Event::InitApply(g) | watcher::Event::Apply(g) => {
                    let key = (
                        g.metadata.namespace.clone().unwrap_or_default(),
                        g.metadata.name.clone().unwrap_or_default(),
                    );
                    let min = g.data["spec"]["minMember"].as_u64().unwrap_or(1) as u32;
                    self.pod_groups.insert(key, min);
                }
                watcher::Event::Delete(g) => {
                    self.pod_groups.remove(&(
                        g.metadata.namespace.clone().unwrap_or_default(),
                        g.metadata.name.clone().unwrap_or_default(),
                    ));
                }
                watcher::Event::InitDone => {}
            },
            Ev::Workload(e) => match *e {
                watcher::Event::Init => self.workloads.clear(),
                watcher::Event::InitApply(w) | watcher::Event::Apply(w) => {
                    let pols = plan::workload_policies(&w.data);
                    self.workloads.insert(object_key(&w), pols);
                }
                watcher::Event::Delete(w) => {
                    self.workloads.remove(&object_key(&w));
                }
                watcher::Event::InitDone => {}
            },
            Ev::SchedGroup(e) => match *e {
                watcher::Event::Init => self.sched_groups.clear(),
                watcher::Event::InitApply(g) | watcher::Event::Apply(g) => {
                    match plan::pod_group_policy(&g.data) {
                        Some(p) => self.sched_groups.insert(object_key(&g), p),
                        None => self.sched_groups.remove(&object_key(&g)),
                    };
                }
                watcher::Event::Delete(g) => {
                    self.sched_groups.remove(&object_key(&g));
                }
                watcher::Event::InitDone => {}
            },
            Ev::Node(e) => match *e {
                watcher::Event::Init => {
                    self.knodes_synced = false;
                    self.knodes_listed = Some(BTreeSet::new());
                }
                watcher::Event::InitApply(n) | watcher::Event::Apply(n) => {
                    let name = n.metadata.name.clone().unwrap_or_default();
                    if let Some(l) = self.knodes_listed.as_mut() {
                        l.insert(name.clone());
                    }
                    self.to_remove.remove(&name);
                    self.knodes.insert(name, n);
                }
                watcher::Event::InitDone => {
                    // Nodes deleted while no watch was open are gone too.
                    if let Some(listed) = self.knodes_listed.take() {
                        let gone: Vec<String> = self
                            .knodes
                            .keys()
                            .filter(|n| !listed.contains(*n))
                            .cloned()
                            .collect();
                        for name in gone {
                            self.knodes.remove(&name);
                            self.to_remove.insert(name);
                        }
                    }
                    self.knodes_synced = true;
                }
                watcher::Event::Delete(n) => {
                    let name = n.metadata.name.clone().unwrap_or_default();
                    self.knodes.remove(&name);
                    self.to_remove.insert(name);
                }
            },
            Ev::Ctld(e) => match *e {
                CtldEvent::Job(j) => {
                    // Only the bridge's own jobs speak for pods (an admin
                    // comment is set by administrators only, but a job of
                    // another administrator is not ours to follow).
                    if j.user_id != self.uid {
                        return;
                    }
                    let pods = plan::pods_of_job(j.admin_comment.as_deref());
                    if !pods.is_empty() {
                        self.jobs.insert(
                            j.job_id,
                            Job {
                                state: j.state,
                                run: j.restarts,
                                nodes: j.nodes,
                                pods,
                            },
                        );
                    }
                }
                CtldEvent::JobGone(id) => {
                    self.jobs.remove(&id);
                    self.bound_run.remove(&id);
                }
                CtldEvent::Node(n) => {
                    self.cnodes.insert(n.name, (n.state, n.reason));
                }
                CtldEvent::Synced(_) => self.ctld_synced = true,
                CtldEvent::ConfigChanged(_) => {}
            },
            Ev::CtldLost => {
                self.ctld_synced = false;
                self.jobs.clear();
                self.cnodes.clear();
            }
            Ev::Tick => {}
        }
    }

    /// Labelled Kubernetes nodes that were deleted: their external nodes
    /// go (tried again until the controller takes it: a node still running
    /// a job is refused until the job ends).
    async fn remove_nodes(&mut self) {
        let names: Vec<String> = self.to_remove.iter().cloned().collect();
        for name in names {
            // Only the external nodes the bridge mirrors: a node with its
            // own daemon (beside a kubelet) stays the cluster's.
            let external = self
                .cnodes
                .get(&name)
                .is_some_and(|(state, _)| state.contains("EXTERNAL"));
            if !external {
                self.to_remove.remove(&name);
                continue;
            }
            match self
                .slurm
                .call(RequestBody::DeleteNode { name: name.clone() })
                .await
            {
                Ok(_) => {
                    tracing::info!("node {name} left Kubernetes: removed");
                    self.to_remove.remove(&name);
                    self.created.remove(&name);
                    self.cnodes.remove(&name);
                }
                Err(e) => tracing::warn!("cannot remove node {name} yet: {e}"),
            }
        }
    }

    async fn reconcile(&mut self, tick: bool) {
        if !self.ctld_synced {
            return;
        }
        if self.knodes_synced {
            self.sync_nodes().await;
            if tick {
                self.remove_nodes().await;
            }
        }
        if !self.pods_synced {
            return;
        }
        self.follow_jobs().await;
        self.submit_groups().await;
        if tick {
            self.release_stuck().await;
        }
    }

    /// Bridged Kubernetes nodes as external nodes: created, drained while
    /// cordoned (and resumed when the bridge drained them), tainted.
    async fn sync_nodes(&mut self) {
        let knodes: Vec<Node> = self.knodes.values().cloned().collect();
        for n in knodes {
            let name = n.metadata.name.clone().unwrap_or_default();
            if let Some(taints) = plan::with_bridge_taint(&n) {
                let api: Api<Node> = Api::all(self.kube.clone());
                // With its version: a taint added meanwhile is not lost.
                let patch = Patch::Merge(json!({"spec": {"taints": taints},
                    "metadata": {"resourceVersion": n.metadata.resource_version}}));
                match api.patch(&name, &PatchParams::default(), &patch).await {
                    Ok(_) => {}
                    // Changed meanwhile: again with the version the watch
                    // brings.
                    Err(kube::Error::Api(e)) if e.code == 409 => {
                        tracing::debug!("node {name} changed while being tainted: again")
                    }
                    Err(e) => tracing::warn!("cannot taint node {name}: {e}"),
                }
            }
            let Some((state, reason)) = self.cnodes.get(&name).cloned() else {
                if self.created.contains(&name) {
                    continue;
                }
                let (cpus, mem, gpus) = plan::node_capacity(&n);
                let spec = NodeSpec {
                    name: name.clone(),
                    cpus: cpus.max(1),
                    real_memory: mem.max(1),
                    gres: if gpus > 0 {
                        vec![format!("gpu:{gpus}")]
                    } else {
                        Vec::new()
                    },
                    state: "EXTERNAL".into(),
                    partitions: self.s.partition.iter().cloned().collect(),
                    ..Default::default()
                };
                match self.slurm.call(RequestBody::CreateNode(spec)).await {
                    Ok(_) => {
                        tracing::info!(
                            "node {name}: added as an external node ({cpus} CPUs, {mem} MiB, {gpus} GPUs)"
                        );
                        self.created.insert(name);
                    }
                    Err(e) => tracing::warn!("cannot add node {name}: {e}"),
                }
                continue;
            };
            let drained = state.contains("DRAIN");
            let ours = reason
                .as_deref()
                .is_some_and(|r| r.starts_with(plan::REASON_PREFIX));
            let change = if plan::cordoned(&n) && !drained {
                Some((
                    NodeStateRequest::Drain,
                    Some(format!("{} cordoned in Kubernetes", plan::REASON_PREFIX)),
                ))
            } else if !plan::cordoned(&n) && drained && ours {
                Some((NodeStateRequest::Resume, None))
            } else {
                None
            };
            if let Some((st, reason)) = change {
                let body = RequestBody::UpdateNode {
                    names: vec![name.clone()],
                    state: Some(st),
                    reason: reason.clone(),
                    features: None,
                };
                match self.slurm.call(body).await {
                    Ok(_) => {
                        // Until the controller's event comes, as asked.
                        let st = if reason.is_some() {
                            format!("{state}+DRAIN")
                        } else {
                            state.replace("+DRAIN", "")
                        };
                        tracing::info!("node {name}: {st} as Kubernetes has it");
                        self.cnodes.insert(name.clone(), (st, reason));
                    }
                    Err(e) => tracing::warn!("cannot update node {name}: {e}"),
                }
            }
        }
    }

    /// Pods of placeholder jobs, by pod id.
    /// Pods of placeholder jobs, by pod uid.
    fn pod_jobs(&self) -> BTreeMap<String, u32> {
        let mut m = BTreeMap::new();
        for (id, j) in &self.jobs {
            for (name, uid) in &j.pods {
                if let Some(u) = self.pod_of(name, uid).and_then(|p| p.metadata.uid.clone()) {
                    m.insert(u, *id);
                }
            }
        }
        m
    }

    /// The pod `name` is now, if it is the pod a job was made for (its uid,
    /// when the job recorded one).
    fn pod_of(&self, name: &str, uid: &Option<String>) -> Option<&Pod> {
        self.pods
            .get(name)
            .filter(|p| uid.is_none() || p.metadata.uid == *uid)
    }

    /// Each placeholder job against its pods: bind when it runs, delete
    /// its pods when it ended, cancel it when a pod went, complete it when
    /// every pod finished.
    async fn follow_jobs(&mut self) {
        let jobs: Vec<(u32, Job)> = self.jobs.iter().map(|(k, v)| (*k, v.clone())).collect();
        let mut binds: Vec<(Pod, String, u32)> = Vec::new();
        for (id, job) in jobs {
            // In node order; a pod of the same name made since is not one.
            let present: Vec<Pod> = job
                .pods
                .iter()
                .filter_map(|(name, uid)| self.pod_of(name, uid).cloned())
                .collect();
            if ended(&job.state) {
                for p in &present {
                    if let Some(uid) = &p.metadata.uid {
                        self.done.insert(uid.clone());
                    }
                    if has_finalizer(p) {
                        self.drop_finalizer(p).await;
                    }
                    if !pod_finished(p) && !deleting(p) {
                        self.delete_pod(p, None, &format!("its job {id} ended ({})", job.state))
                            .await;
                    }
                }
                continue;
            }
            if self.closed.contains(&id) {
                continue;
            }
            let gone = present.len() < job.pods.len() || present.iter().any(deleting);
            let all_finished = !present.is_empty() && present.iter().all(pod_finished);
            if all_finished && job.state == "RUNNING" {
                let failed = present
                    .iter()
                    .any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed"));
                let status = if failed { 1 << 8 } else { 0 };
                self.closed.insert(id);
                match self
                    .slurm
                    .call(RequestBody::CompleteJob { job_id: id, status })
                    .await
                {
                    Ok(_) => tracing::info!("job {id}: its pods finished"),
                    Err(e) => {
                        self.closed.remove(&id);
                        tracing::warn!("cannot complete job {id}: {e}");
                    }
                }
                continue;
            }
            // A job sent back to the queue (`scontrol requeue`) no longer
            // holds the nodes its pods run on: it ends, and its pods with
            // it (their controller makes new ones, which get a new job).
            let requeued = present.iter().any(bound)
                && (job.state == "PENDING"
                    || self.bound_run.get(&id).is_some_and(|r| *r != job.run));
            if gone || requeued {
                self.closed.insert(id);
                let body = RequestBody::Cancel(CancelFilter {
                    job_ids: vec![id],
                    ..Default::default()
                });
                let why = if gone {
                    "a pod of it was deleted"
                } else {
                    "it was requeued while its pods ran"
                };
                match self.slurm.call(body).await {
                    Ok(_) => tracing::info!("job {id}: {why}, cancelled"),
                    Err(e) => {
                        self.closed.remove(&id);
                        tracing::warn!("cannot cancel job {id}: {e}");
                    }
                }
                continue;
            }
            // Each pod to the node of its rank when the job was made (the
            // order the node daemons pin pods' uids in).
            if job.state == "RUNNING" && job.nodes.len() >= present.len() {
                // The run its pods are bound for (a requeued job's next run
                // is not theirs).
                self.bound_run.entry(id).or_insert(job.run);
                for (p, node) in present.iter().zip(job.nodes.iter()) {
                    let asked = p
                        .metadata
                        .uid
                        .as_ref()
                        .is_some_and(|u| self.bound.contains(u));
                    let later = p
                        .metadata
                        .uid
                        .as_ref()
                        .and_then(|u| self.bind_retry.get(u))
                        .is_some_and(|(t, _)| *t > Instant::now());
                    if !bound(p) && !asked && !later {
                        binds.push((p.clone(), node.clone(), id));
                    }
                }
            }
        }
        // Every pod to bind, many at once.
        let kube = self.kube.clone();
        let done: Vec<(Option<String>, bool)> = futures::stream::iter(binds)
            .map(|(p, node, job)| {
                let kube = kube.clone();
                async move {
                    let ok = bind(&kube, &p, &node, job).await;
                    (p.metadata.uid.clone(), ok)
                }
            })
            .buffer_unordered(SUBMIT_AT_ONCE)
            .collect()
            .await;
        for (uid, ok) in done {
            let Some(uid) = uid else { continue };
            if ok {
                // Events from before the binding may still come: not again.
                self.bind_retry.remove(&uid);
                self.bound.insert(uid);
            } else {
                let tries = self.bind_retry.get(&uid).map_or(0, |(_, n)| *n) + 1;
                let wait = Duration::from_secs((1u64 << tries.min(6)).min(60));
                self.bind_retry.insert(uid, (Instant::now() + wait, tries));
            }
        }
        // Pods deleted while the bridge still held them: once their job is
        // cancelled (or they have none), let them go.
        let pod_jobs = self.pod_jobs();
        let held: Vec<Pod> = self
            .pods
            .values()
            .filter(|p| deleting(p) && has_finalizer(p))
            .cloned()
            .collect();
        for p in held {
            let open = p
                .metadata
                .uid
                .as_ref()
                .and_then(|u| pod_jobs.get(u))
                .and_then(|id| self.jobs.get(id).map(|j| (*id, j)))
                .is_some_and(|(id, j)| !ended(&j.state) && !self.closed.contains(&id));
            if !open {
                self.drop_finalizer(&p).await;
            }
        }
    }

    /// Groups whose submission got no answer: their job, if the controller
    /// made one, is taken as the watch would have brought it. Whether every
    /// such group was looked for (none is submitted again until then).
    async fn find_unsure(&mut self) -> bool {
        if self.unsure.is_empty() {
            return true;
        }
        let filter = slurm_proto::JobFilter {
            users: vec![self.uid.to_string()],
            states: Some(Vec::new()),
            ..Default::default()
        };
        let jobs = match self.slurm.call(RequestBody::GetJobsMatching(filter)).await {
            Ok(Response::Jobs { jobs, .. }) => jobs,
            Ok(other) => {
                tracing::warn!("cannot look for unanswered submissions: {other:?}");
                return false;
            }
            Err(e) => {
                tracing::warn!("cannot look for unanswered submissions: {e}");
                return false;
            }
        };
        for (key, uids) in std::mem::take(&mut self.unsure) {
            let found = jobs.iter().find(|j| {
                j.user_id == self.uid
                    && plan::pods_of_job(j.desc.admin_comment.as_deref())
                        .iter()
                        .any(|(_, u)| u.as_ref().is_some_and(|u| uids.contains(u)))
            });
            if let Some(j) = found {
                tracing::info!("{key}: its unanswered submission made job {}", j.job_id);
                self.retry.remove(&key);
                self.take(Ev::Ctld(Box::new(CtldEvent::Job(pb::JobEvent::from(j)))));
            }
        }
        true
    }

    /// Groups whose pods are all there, none bound or placed: one job each.
    async fn submit_groups(&mut self) {
        if !self.find_unsure().await {
            return;
        }
        let pod_jobs = self.pod_jobs();
        let mut groups: BTreeMap<GroupKey, Vec<&Pod>> = BTreeMap::new();
        for (id, p) in &self.pods {
            let r = self.sched_refs.get(id);
            let policy = r.and_then(|r| self.policy(plan::pod_ns(p), r));
            groups
                .entry(plan::group_key(p, r, policy))
                .or_default()
                .push(p);
        }
        let mut waiting = Vec::new();
        let now = Instant::now();
        let mut todo = Vec::new();
        for (key, pods) in groups {
            let has_job = |p: &Pod| {
                p.metadata
                    .uid
                    .as_ref()
                    .is_some_and(|u| pod_jobs.contains_key(u))
            };
            let fresh = |p: &Pod| {
                !(has_job(p)
                    || bound(p)
                    || deleting(p)
                    || pod_finished(p)
                    || p.metadata
                        .uid
                        .as_ref()
                        .is_some_and(|u| self.done.contains(u)))
            };
            let mut unplaced: Vec<&Pod> = pods.iter().copied().filter(|p| fresh(p)).collect();
            if unplaced.is_empty() || self.retry.get(&key).is_some_and(|t| *t > now) {
                continue;
            }
            // A group already under way (a member holds a job that has not
            // ended, or runs): members that come later get a job of their
            // own at once; otherwise the group waits for its size.
            let under_way = pods.iter().any(|p| {
                !pod_finished(p)
                    && (bound(p)
                        || p.metadata
                            .uid
                            .as_ref()
                            .and_then(|u| pod_jobs.get(u))
                            .is_some_and(|id| self.jobs.get(id).is_some_and(|j| !ended(&j.state))))
            });
            if matches!(key, GroupKey::Pod { .. }) && unplaced.len() < pods.len() {
                continue;
            }
            if !under_way {
                let min = match &key {
                    GroupKey::PodGroup { ns, name } => {
                        match self.pod_groups.get(&(ns.clone(), name.clone())) {
                            Some(m) => Some(*m),
                            // Its PodGroup is not there (yet): wait for it.
                            None => continue,
                        }
                    }
                    GroupKey::Gang { ns, r } => match self.policy(ns, r) {
                        Some(Policy::Gang(n)) => Some(n),
                        // Its Workload or PodGroup is not there (yet).
                        _ => {
                            waiting.push(key.clone());
                            continue;
                        }
                    },
                    _ => None,
                };
                if unplaced.len() < plan::wanted(&key, &unplaced, min) {
                    continue;
                }
            }
            let mut pods = std::mem::take(&mut unplaced);
            plan::rank_order(&mut pods);
            let excluded: Vec<String> = self
                .knodes
                .iter()
                .filter(|(_, n)| pods.iter().any(|p| !plan::fits(p, n)))
                .map(|(name, _)| name.clone())
                .collect();
            let d = plan::JobDefaults {
                partition: self.s.partition.clone(),
                submit_host: self.submit_host.clone(),
                trusted: self.s.trusted_annotations.clone(),
            };
            let pods: Vec<Pod> = pods.into_iter().cloned().collect();
            let desc = plan::job_desc(&key, &pods.iter().collect::<Vec<_>>(), excluded, &d);
            todo.push((key, pods, desc));
        }
        for key in waiting {
            self.say_waiting(key);
        }
        // Many groups at once: each is a finalizer patch and a submission.
        let kube = self.kube.clone();
        let slurm = self.slurm.clone();
        let results: Vec<(GroupKey, Vec<Pod>, Submitted)> = futures::stream::iter(todo)
            .map(|(key, pods, desc)| {
                let (kube, slurm) = (kube.clone(), slurm.clone());
                async move {
                    let r = submit_group(&kube, &slurm, &pods, desc).await;
                    (key, pods, r)
                }
            })
            .buffer_unordered(SUBMIT_AT_ONCE)
            .collect()
            .await;
        for (key, pods, r) in results {
            match r {
                Ok(job_id) => {
                    tracing::info!("{key}: submitted as job {job_id}");
                    self.retry.remove(&key);
                    self.said_waiting.remove(&key);
                    self.jobs.insert(
                        job_id,
                        Job {
                            state: "PENDING".into(),
                            run: 0,
                            nodes: Vec::new(),
                            pods: pods
                                .iter()
                                .map(|p| (plan::pod_id(p), p.metadata.uid.clone()))
                                .collect(),
                        },
                    );
                }
                Err(no) => {
                    tracing::warn!("{key}: {}", no.why);
                    if no.maybe_done {
                        self.unsure.insert(
                            key.clone(),
                            pods.iter().filter_map(|p| p.metadata.uid.clone()).collect(),
                        );
                    }
                    self.retry.insert(key, now + no.again);
                }
            }
        }
    }

    /// The policy Kubernetes gives the gang `r` in namespace `ns` (none
    /// while its object is not known).
    fn policy(&self, ns: &str, r: &SchedRef) -> Option<Policy> {
        match r {
            SchedRef::Workload {
                name, pod_group, ..
            } => self
                .workloads
                .get(&(ns.to_string(), name.clone()))?
                .get(pod_group)
                .copied(),
            SchedRef::PodGroup { name } => self
                .sched_groups
                .get(&(ns.to_string(), name.clone()))
                .copied(),
        }
    }

    /// Say (once) why a gang waits for its Workload or PodGroup.
    fn say_waiting(&mut self, key: GroupKey) {
        let GroupKey::Gang { ns, r } = &key else {
            return;
        };
        let (kind, name) = r.object();
        let served = self
            .sched_kinds
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|k| k.contains(kind));
        let why = match served {
            // Discovery has not answered yet.
            None => return,
            Some(true) => format!("waiting for {kind} {ns}/{name} (or its policy)"),
            Some(false) => format!(
                "its pods name a {SCHED_GROUP} {kind} ({ns}/{name}), which this API \
                 server does not serve: they wait"
            ),
        };
        if self.said_waiting.insert(key.clone()) {
            if served == Some(false) {
                tracing::warn!("{key}: {why}");
            } else {
                tracing::info!("{key}: {why}");
            }
        }
    }

    async fn drop_finalizer(&mut self, p: &Pod) {
        let f: Vec<String> = p
            .metadata
            .finalizers
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|x| x != plan::FINALIZER)
            .collect();
        if set_finalizers(&self.kube, p, f.clone()).await {
            if let Some(pod) = self.pods.get_mut(&plan::pod_id(p)) {
                pod.metadata.finalizers = Some(f);
            }
        }
    }

    async fn delete_pod(&self, p: &Pod, grace: Option<u32>, why: &str) {
        let api: Api<Pod> = Api::namespaced(self.kube.clone(), plan::pod_ns(p));
        let dp = DeleteParams {
            grace_period_seconds: grace,
            ..Default::default()
        };
        match api.delete(plan::pod_name(p), &dp).await {
            Ok(_) => tracing::info!("pod {} deleted: {why}", plan::pod_id(p)),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => tracing::warn!("cannot delete pod {}: {e}", plan::pod_id(p)),
        }
    }

    /// Pods being deleted whose grace ran out long ago (their kubelet never
    /// confirmed, or their node is gone): removed for good, so nothing stays
    /// Terminating.
    async fn release_stuck(&mut self) {
        let now = slurm_common::auth::now();
        let stuck: Vec<Pod> = self
            .pods
            .values()
            .filter(|p| !has_finalizer(p))
            .filter(|p| {
                let Some(ts) = &p.metadata.deletion_timestamp else {
                    return false;
                };
                // The deletion timestamp already includes the grace period.
                let at = ts.0.as_second() + self.s.release_after.as_secs() as i64;
                at <= now
            })
            .cloned()
            .collect();
        for p in stuck {
            self.delete_pod(&p, Some(0), "its kubelet never confirmed the deletion")
                .await;
        }
    }
}

/// (namespace, name) of an object.
fn object_key(o: &DynamicObject) -> (String, String) {
    (
        o.metadata.namespace.clone().unwrap_or_default(),
        o.metadata.name.clone().unwrap_or_default(),
    )
}

/// A group's submission: its job id, or why not, when to try again and
/// whether the job may exist all the same.
type Submitted = Result<u32, NotSubmitted>;

struct NotSubmitted {
    why: String,
    again: Duration,
    maybe_done: bool,
}

impl NotSubmitted {
    fn new(why: impl Into<String>, secs: u64) -> NotSubmitted {
        NotSubmitted {
            why: why.into(),
            again: Duration::from_secs(secs),
            maybe_done: false,
        }
    }
}

/// Submissions (and bindings) the bridge has in flight at once.
const SUBMIT_AT_ONCE: usize = 32;

/// One group's job: its pods get the bridge's finalizer first (a pod
/// deleted from then on waits for the bridge), then the job is submitted.
/// The job id, or why not and when to try again.
async fn submit_group(
    kube: &kube::Client,
    slurm: &Arc<Ctld>,
    pods: &[Pod],
    desc: Result<slurm_proto::JobDesc, String>,
) -> Submitted {
    let desc = desc.map_err(|e| NotSubmitted::new(e, 3600))?;
    for p in pods {
        if !has_finalizer(p) {
            let mut f = p.metadata.finalizers.clone().unwrap_or_default();
            f.push(plan::FINALIZER.into());
            if !set_finalizers(kube, p, f).await {
                return Err(NotSubmitted::new("cannot add the bridge's finalizer", 2));
            }
        }
    }
    match slurm.call_detail(RequestBody::SubmitBatchJob(desc)).await {
        Ok(Response::Submitted { job_id }) => Ok(job_id),
        Ok(other) => Err(NotSubmitted::new(
            format!("unexpected answer {other:?}"),
            10,
        )),
        Err(e) if e.maybe_done => Err(NotSubmitted {
            why: format!(
                "no answer to its submission ({}): its job is looked for before it is submitted again",
                e.msg
            ),
            again: Duration::from_secs(2),
            maybe_done: true,
        }),
        Err(e) => Err(NotSubmitted::new(
            format!("the controller refused its job: {}", e.msg),
            10,
        )),
    }
}

/// Set a pod's finalizers (with its version: others' added meanwhile are
/// kept, the patch is refused and tried again).
async fn set_finalizers(kube: &kube::Client, p: &Pod, f: Vec<String>) -> bool {
    let api: Api<Pod> = Api::namespaced(kube.clone(), plan::pod_ns(p));
    let patch = Patch::Merge(json!({"metadata": {
        "finalizers": f, "resourceVersion": p.metadata.resource_version}}));
    match api
        .patch(plan::pod_name(p), &PatchParams::default(), &patch)
        .await
    {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!("cannot set the finalizers of pod {}: {e}", plan::pod_id(p));
            false
        }
    }
}

/// Bind pod `p` to `node` (its toleration of the bridge's taint first);
/// whether it was bound.
async fn bind(kube: &kube::Client, p: &Pod, node: &str, job: u32) -> bool {
    let (ns, name) = (plan::pod_ns(p).to_string(), plan::pod_name(p).to_string());
    let api: Api<Pod> = Api::namespaced(kube.clone(), &ns);
    if let Some(tols) = plan::with_bridge_toleration(p) {
        let patch = Patch::Merge(json!({"spec": {"tolerations": tols}}));
        if let Err(e) = api.patch(&name, &PatchParams::default(), &patch).await {
            tracing::warn!("cannot add the bridge's toleration to pod {ns}/{name}: {e}");
        }
    }
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": name, "namespace": ns},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    });
    match api
        .create_subresource::<_, serde_json::Value>(
            "binding",
            &name,
            &PostParams::default(),
            &binding,
        )
        .await
    {
        Ok(_) => {
            tracing::info!("pod {ns}/{name} bound to {node} (job {job})");
            true
        }
        Err(e) => {
            tracing::warn!("cannot bind pod {ns}/{name} to {node}: {e}");
            false
        }
    }
}
