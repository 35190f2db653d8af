//! What the bridge decides from Kubernetes objects alone, with no I/O: which
//! placeholder job a pod belongs to, the job that holds a group's
//! resources, the order its pods are bound in, and which nodes a pod can
//! not use (sent to the controller as excluded nodes, never as required
//! ones: a required node that disappears would make the job impossible).

use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, Pod, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use slurm_proto::JobDesc;
use std::collections::BTreeMap;

/// The prefix of the annotations that set a placeholder job's fields, as
/// slurm-bridge names them.
pub const ANNOTATION_PREFIX: &str = "slurmjob.slinky.slurm.net/";
/// The label that puts pods of a `scheduling.x-k8s.io` PodGroup together.
pub const POD_GROUP_LABEL: &str = "scheduling.x-k8s.io/pod-group";
/// The label that puts the pods of one LeaderWorkerSet group together.
pub const LWS_GROUP_LABEL: &str = "leaderworkerset.sigs.k8s.io/group-key";
/// The annotation giving a LeaderWorkerSet group's size.
pub const LWS_SIZE_ANNOTATION: &str = "leaderworkerset.sigs.k8s.io/size";
/// The taint on bridged nodes: only pods the bridge places tolerate it.
pub const TAINT_KEY: &str = "slinky.slurm.net/slurm-bridge";
/// The finalizer the bridge puts on the pods it schedules, so a pod is not
/// gone before its job is.
pub const FINALIZER: &str = "slurm-bridge.slinky.slurm.net/placeholder-job";
/// Drain reasons the bridge sets start with this; it only undoes those.
pub const REASON_PREFIX: &str = "slurm-bridge:";

/// Which placeholder job a pod belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GroupKey {
    /// A pod on its own (a bare pod, or one pod of a batch Job, JobSet or
    /// Deployment).
    Pod { ns: String, name: String },
    /// Every pod of a PodGroup.
    PodGroup { ns: String, name: String },
    /// Every pod of one LeaderWorkerSet group.
    Lws { ns: String, key: String },
    /// Every pod of a gang of Kubernetes' own scheduling API
    /// (`scheduling.k8s.io`, feature gate GenericWorkload).
    Gang { ns: String, r: SchedRef },
}

/// A pod's gang in Kubernetes' own scheduling API, from the pod's spec:
/// Kubernetes 1.35's `spec.workloadRef` (a pod group of a Workload, split
/// by an optional replica key) or 1.36's `spec.schedulingGroup` (a
/// PodGroup object). Read from the pod's JSON: the typed `Pod` of the API
/// version compiled in has neither field.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SchedRef {
    Workload {
        name: String,
        pod_group: String,
        replica: String,
    },
    PodGroup {
        name: String,
    },
}

impl SchedRef {
    /// The reference in a pod's `spec` (JSON), if it has one.
    pub fn of_spec(spec: &serde_json::Value) -> Option<SchedRef> {
        let text = |v: &serde_json::Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_string);
        if let Some(name) = text(&spec["schedulingGroup"]["podGroupName"]) {
            return Some(SchedRef::PodGroup { name });
        }
        let w = &spec["workloadRef"];
        Some(SchedRef::Workload {
            name: text(&w["name"])?,
            pod_group: text(&w["podGroup"])?,
            replica: text(&w["podGroupReplicaKey"]).unwrap_or_default(),
        })
    }

    /// The object whose policy rules the gang: (kind, name).
    pub fn object(&self) -> (&'static str, &str) {
        match self {
            SchedRef::Workload { name, .. } => ("Workload", name),
            SchedRef::PodGroup { name } => ("PodGroup", name),
        }
    }
}

/// How Kubernetes' scheduling API says a group of pods is scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Each pod on its own.
    Basic,
    /// All or nothing, once this many pods are there.
    Gang(u32),
}

impl Policy {
    /// A `policy` / `schedulingPolicy` object: `{"gang": {"minCount": N}}`
    /// or `{"basic": {}}`.
    pub fn of(v: &serde_json::Value) -> Option<Policy> {
        if let Some(g) = v.get("gang") {
            let n = g["minCount"].as_u64()?;
            return Some(Policy::Gang(u32::try_from(n).ok()?.max(1)));
        }
        v.get("basic").map(|_| Policy::Basic)
    }
}

/// The policies a Workload (`scheduling.k8s.io/v1alpha1`) gives its pod
/// groups, by pod group name.
pub fn workload_policies(w: &serde_json::Value) -> BTreeMap<String, Policy> {
    let mut m = BTreeMap::new();
    for g in w["spec"]["podGroups"].as_array().into_iter().flatten() {
        if let (Some(name), Some(p)) = (g["name"].as_str(), Policy::of(&g["policy"])) {
            m.insert(name.to_string(), p);
        }
    }
    m
}

/// The policy of a PodGroup (`scheduling.k8s.io/v1alpha2` and later).
pub fn pod_group_policy(g: &serde_json::Value) -> Option<Policy> {
    Policy::of(&g["spec"]["schedulingPolicy"])
}

impl std::fmt::Display for GroupKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GroupKey::Pod { ns, name } => write!(f, "pod {ns}/{name}"),
            GroupKey::PodGroup { ns, name } => write!(f, "PodGroup {ns}/{name}"),
            GroupKey::Lws { ns, key } => write!(f, "LeaderWorkerSet group {ns}/{key}"),
            GroupKey::Gang {
                ns,
                r:
                    SchedRef::Workload {
                        name,
                        pod_group,
                        replica,
                    },
            } => {
                write!(f, "Workload {ns}/{name} pod group {pod_group}")?;
                if !replica.is_empty() {
                    write!(f, " replica {replica}")?;
                }
                Ok(())
            }
            GroupKey::Gang {
                ns,
                r: SchedRef::PodGroup { name },
            } => write!(f, "PodGroup {ns}/{name} (scheduling.k8s.io)"),
        }
    }
}

pub fn pod_ns(p: &Pod) -> &str {
    p.metadata.namespace.as_deref().unwrap_or("default")
}

pub fn pod_name(p: &Pod) -> &str {
    p.metadata.name.as_deref().unwrap_or("")
}

/// `namespace/name`, as the job's admin comment lists pods.
pub fn pod_id(p: &Pod) -> String {
    format!("{}/{}", pod_ns(p), pod_name(p))
}

fn label<'a>(p: &'a Pod, k: &str) -> Option<&'a str> {
    p.metadata.labels.as_ref()?.get(k).map(String::as_str)
}

fn annotation<'a>(p: &'a Pod, k: &str) -> Option<&'a str> {
    p.metadata.annotations.as_ref()?.get(k).map(String::as_str)
}

/// The group pod `p` belongs to. `sched` is its reference to Kubernetes'
/// own scheduling API, if any, and `policy` the policy of that group (none
/// while its object is not known): a basic group's pods go on their own.
pub fn group_key(p: &Pod, sched: Option<&SchedRef>, policy: Option<Policy>) -> GroupKey {
    let ns = pod_ns(p).to_string();
    if let Some(r) = sched {
        if policy != Some(Policy::Basic) {
            return GroupKey::Gang { ns, r: r.clone() };
        }
        return GroupKey::Pod {
            ns,
            name: pod_name(p).to_string(),
        };
    }
    if let Some(g) = label(p, POD_GROUP_LABEL).filter(|g| !g.is_empty()) {
        return GroupKey::PodGroup {
            ns,
            name: g.to_string(),
        };
    }
    if let Some(k) = label(p, LWS_GROUP_LABEL).filter(|g| !g.is_empty()) {
        return GroupKey::Lws {
            ns,
            key: k.to_string(),
        };
    }
    GroupKey::Pod {
        ns,
        name: pod_name(p).to_string(),
    }
}

/// How many pods a group must have before its job is submitted (a PodGroup's
/// `minMember` or gang's `minCount`, a LeaderWorkerSet's size; one for a
/// pod of its own).
pub fn wanted(key: &GroupKey, pods: &[&Pod], min_member: Option<u32>) -> usize {
    match key {
        GroupKey::Pod { .. } => 1,
        GroupKey::PodGroup { .. } | GroupKey::Gang { .. } => {
            min_member.unwrap_or(1).max(1) as usize
        }
        GroupKey::Lws { .. } => pods
            .iter()
            .find_map(|p| annotation(p, LWS_SIZE_ANNOTATION)?.parse().ok())
            .unwrap_or(1usize)
            .max(1),
    }
}

/// The order pods take the job's nodes in: a Job's completion index, a
/// LeaderWorkerSet's worker index (the leader is 0), then the name.
pub fn rank_order(pods: &mut [&Pod]) {
    let index = |p: &Pod| {
        annotation(p, "batch.kubernetes.io/job-completion-index")
            .or_else(|| label(p, "leaderworkerset.sigs.k8s.io/worker-index"))
            .and_then(|i| i.parse::<u64>().ok())
            .unwrap_or(u64::MAX)
    };
    pods.sort_by(|a, b| {
        index(a)
            .cmp(&index(b))
            .then_with(|| pod_name(a).cmp(pod_name(b)))
    });
}

/// A Kubernetes quantity in units (`500m` → 0.5, `2Gi` → 2147483648).
pub fn quantity(q: &Quantity) -> Result<f64, String> {
    let s = q.0.trim();
    let bad = || format!("quantity {s:?} is not a Kubernetes quantity");
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let n: f64 = num.parse().map_err(|_| bad())?;
    let mult = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "u" => 1e-6,
        "n" => 1e-9,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        e if e.starts_with(['e', 'E']) => {
            let x: i32 = e[1..].parse().map_err(|_| bad())?;
            10f64.powi(x)
        }
        _ => return Err(bad()),
    };
    if !n.is_finite() || n < 0.0 {
        return Err(bad());
    }
    Ok(n * mult)
}

/// What a pod asks for: CPUs, memory (bytes), GPUs. As Kubernetes counts a
/// pod: the larger of its containers together and its largest init
/// container; a limit stands for a missing request.
pub fn pod_request(p: &Pod) -> Result<(f64, f64, u64), String> {
    let Some(spec) = &p.spec else {
        return Ok((0.0, 0.0, 0));
    };
    let one = |c: &k8s_openapi::api::core::v1::Container| -> Result<(f64, f64, f64), String> {
        let r = c.resources.as_ref();
        let get = |k: &str| -> Result<f64, String> {
            let q = r
                .and_then(|r| r.requests.as_ref().and_then(|m| m.get(k)))
                .or_else(|| r.and_then(|r| r.limits.as_ref().and_then(|m| m.get(k))));
            q.map_or(Ok(0.0), quantity)
        };
        Ok((get("cpu")?, get("memory")?, get("nvidia.com/gpu")?))
    };
    let mut sum = (0.0, 0.0, 0.0);
    for c in &spec.containers {
        let (a, b, g) = one(c)?;
        sum = (sum.0 + a, sum.1 + b, sum.2 + g);
    }
    for c in spec.init_containers.iter().flatten() {
        let (a, b, g) = one(c)?;
        sum = (sum.0.max(a), sum.1.max(b), sum.2.max(g));
    }
    Ok((sum.0, sum.1, sum.2.ceil() as u64))
}

/// The annotations (after [`ANNOTATION_PREFIX`]) the bridge reads.
pub const ANNOTATIONS: &[&str] = &[
    "job-name",
    "timelimit",
    "constraints",
    "licenses",
    "partition",
    "account",
    "qos",
    "reservation",
];

/// The annotations honoured unless the site says otherwise: those that ask
/// for nothing the pod's author may not have. The bridge submits with an
/// administrator's rights (it sets the admin comment), so an account, QOS,
/// partition or reservation named by whoever may create pods would be
/// granted with those rights: a site that trusts its Kubernetes users with
/// them lists them (`--trusted-annotations`).
pub const DEFAULT_TRUSTED: &[&str] = &["job-name", "timelimit", "constraints", "licenses"];

/// The settings the job description takes from the bridge.
#[derive(Debug, Clone, Default)]
pub struct JobDefaults {
    /// Partition when no annotation names one (none: the cluster default).
    pub partition: Option<String>,
    pub submit_host: String,
    /// Annotations honoured (names after the prefix); a pod carrying
    /// another of ours gets no job.
    pub trusted: Vec<String>,
}

/// The placeholder job of a group whose pods, in rank order, are `pods`:
/// one node per pod, one task per node, CPUs per task the largest pod's,
/// memory per node the largest pod's, GPUs per node the largest pod's, the
/// time limit from `activeDeadlineSeconds`, annotations over all that;
/// `excluded` are the nodes that some pod cannot use.
pub fn job_desc(
    key: &GroupKey,
    pods: &[&Pod],
    excluded: Vec<String>,
    d: &JobDefaults,
) -> Result<JobDesc, String> {
    let n = pods.len() as u32;
    let mut cpus: f64 = 0.0;
    let mut mem: f64 = 0.0;
    let mut gpus: u64 = 0;
    let mut deadline: Option<i64> = None;
    for p in pods {
        let (c, m, g) = pod_request(p).map_err(|e| format!("pod {}: {e}", pod_id(p)))?;
        cpus = cpus.max(c);
        mem = mem.max(m);
        gpus = gpus.max(g);
        if let Some(s) = p.spec.as_ref().and_then(|s| s.active_deadline_seconds) {
            deadline = Some(deadline.map_or(s, |d| d.min(s)));
        }
    }
    let first = pods.first().ok_or("a group with no pods")?;
    for p in pods {
        for k in p.metadata.annotations.iter().flat_map(|a| a.keys()) {
            let Some(name) = k.strip_prefix(ANNOTATION_PREFIX) else {
                continue;
            };
            if !ANNOTATIONS.contains(&name) {
                return Err(format!(
                    "pod {}: unknown annotation {k} (known: {})",
                    pod_id(p),
                    ANNOTATIONS.join(", ")
                ));
            }
            if !d.trusted.iter().any(|t| t == name) {
                return Err(format!(
                    "pod {}: annotation {k} is not trusted by this bridge \
                     (--trusted-annotations)",
                    pod_id(p)
                ));
            }
        }
    }
    let ann = |k: &str| annotation(first, &format!("{ANNOTATION_PREFIX}{k}")).map(str::to_string);
    let pod_list: Vec<String> = pods.iter().map(|p| pod_id(p)).collect();
    // The uids let a node daemon beside a kubelet find each pod's cgroup.
    let uids: Vec<&str> = pods
        .iter()
        .map(|p| p.metadata.uid.as_deref().unwrap_or(""))
        .collect();
    let mut desc = JobDesc {
        name: Some(ann("job-name").unwrap_or_else(|| match key {
            GroupKey::Pod { name, .. } => name.clone(),
            GroupKey::PodGroup { name, .. } => name.clone(),
            GroupKey::Lws { key, .. } => key.clone(),
            GroupKey::Gang {
                r: SchedRef::PodGroup { name },
                ..
            } => name.clone(),
            GroupKey::Gang {
                r:
                    SchedRef::Workload {
                        name,
                        pod_group,
                        replica,
                    },
                ..
            } => {
                let mut n = format!("{name}-{pod_group}");
                if !replica.is_empty() {
                    n = format!("{n}-{replica}");
                }
                n
            }
        })),
        partition: ann("partition").or_else(|| d.partition.clone()),
        account: ann("account"),
        qos: ann("qos"),
        reservation: ann("reservation"),
        constraint: ann("constraints"),
        licenses: ann("licenses"),
        min_nodes: Some(n),
        max_nodes: Some(n),
        ntasks: Some(n),
        ntasks_per_node: Some(1),
        cpus_per_task: Some((cpus.ceil() as u32).max(1)),
        mem_per_node: (mem > 0.0).then(|| ((mem / 1048576.0).ceil() as u64).max(1)),
        gres: (gpus > 0).then(|| format!("gpu:{gpus}")),
        time_limit: deadline.map(|s| Some(((s + 59) / 60).max(1) as u32)),
        exc_nodes: excluded,
        external: true,
        work_dir: "/".into(),
        submit_host: d.submit_host.clone(),
        comment: Some(format!("{key}")),
        admin_comment: Some(serde_json::json!({ "pods": pod_list, "uids": uids }).to_string()),
        ..Default::default()
    };
    if let Some(t) = ann("timelimit") {
        let m = slurm_common::timefmt::parse_time_limit(&t)
            .map_err(|e| format!("annotation {ANNOTATION_PREFIX}timelimit={t:?}: {e}"))?;
        desc.time_limit = Some(m);
    }
    Ok(desc)
}

/// The pods a placeholder job holds, in the order they take its nodes, from
/// its admin comment (`{"pods":["ns/name",...],"uids":[...]}`): each pod's
/// `namespace/name` and uid (a pod of the same name made later is another
/// pod); none for any other job.
pub fn pods_of_job(admin_comment: Option<&str>) -> Vec<(String, Option<String>)> {
    let Some(v) = admin_comment.and_then(|c| serde_json::from_str::<serde_json::Value>(c).ok())
    else {
        return Vec::new();
    };
    let strings = |k: &str| -> Vec<String> {
        v.get(k)
            .and_then(|a| a.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (pods, uids) = (strings("pods"), strings("uids"));
    let uids_ok = uids.len() == pods.len();
    pods.into_iter()
        .enumerate()
        .map(|(i, p)| {
            let uid = uids_ok.then(|| uids[i].clone()).filter(|u| !u.is_empty());
            (p, uid)
        })
        .collect()
}

fn node_labels(n: &Node) -> BTreeMap<String, String> {
    n.metadata.labels.clone().unwrap_or_default()
}

fn match_requirement(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let vals = r.values.as_deref().unwrap_or_default();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| vals.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| vals.iter().all(|x| x != v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(w)) = (
                value.and_then(|v| v.parse::<i64>().ok()),
                vals.first().and_then(|w| w.parse::<i64>().ok()),
            ) else {
                return false;
            };
            if r.operator == "Gt" {
                v > w
            } else {
                v < w
            }
        }
        _ => false,
    }
}

fn tolerates(tols: &[Toleration], t: &Taint) -> bool {
    tols.iter().any(|tol| {
        let effect_ok = tol
            .effect
            .as_deref()
            .is_none_or(|e| e.is_empty() || e == t.effect);
        let key_ok = match tol.key.as_deref() {
            None | Some("") => tol.operator.as_deref() == Some("Exists"),
            Some(k) => k == t.key,
        };
        let value_ok = match tol.operator.as_deref() {
            Some("Exists") => true,
            _ => tol.value.as_deref().unwrap_or("") == t.value.as_deref().unwrap_or(""),
        };
        effect_ok && key_ok && value_ok
    })
}

/// Can `pod` run on `node` as Kubernetes sees it: its node selector, the
/// node's taints that repel new pods (the bridge's own aside: it adds the
/// toleration when it binds), and required node affinity. Resources are
/// the controller's business.
pub fn fits(pod: &Pod, node: &Node) -> bool {
    let Some(spec) = &pod.spec else {
        return true;
    };
    let labels = node_labels(node);
    let name = node.metadata.name.as_deref().unwrap_or("");
    if let Some(sel) = &spec.node_selector {
        if sel.iter().any(|(k, v)| labels.get(k) != Some(v)) {
            return false;
        }
    }
    let tols = spec.tolerations.as_deref().unwrap_or_default();
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default();
    for t in taints {
        if t.key == TAINT_KEY || t.effect == "PreferNoSchedule" {
            continue;
        }
        if !tolerates(tols, t) {
            return false;
        }
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    if let Some(req) = required {
        let any = req.node_selector_terms.iter().any(|term| {
            let exprs = term.match_expressions.as_deref().unwrap_or_default();
            let fields = term.match_fields.as_deref().unwrap_or_default();
            (!exprs.is_empty() || !fields.is_empty())
                && exprs
                    .iter()
                    .all(|r| match_requirement(r, labels.get(&r.key).map(String::as_str)))
                && fields.iter().all(|r| {
                    let v = (r.key == "metadata.name").then_some(name);
                    match_requirement(r, v)
                })
        });
        if !any {
            return false;
        }
    }
    true
}

/// What a bridged Kubernetes node offers: whole CPUs, memory in MiB and
/// GPUs, from its `allocatable`.
pub fn node_capacity(n: &Node) -> (u32, u64, u64) {
    let alloc = n
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref()));
    let get = |k: &str| {
        alloc
            .and_then(|a| a.get(k))
            .and_then(|q| quantity(q).ok())
            .unwrap_or(0.0)
    };
    (
        get("cpu").floor() as u32,
        (get("memory") / 1048576.0).floor() as u64,
        get("nvidia.com/gpu").floor() as u64,
    )
}

pub fn cordoned(n: &Node) -> bool {
    n.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

/// The node's taints with the bridge's added, or `None` when it has it.
pub fn with_bridge_taint(n: &Node) -> Option<Vec<Taint>> {
    let mut taints = n
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    if taints.iter().any(|t| t.key == TAINT_KEY) {
        return None;
    }
    taints.push(Taint {
        key: TAINT_KEY.into(),
        value: Some("slurm-bridge".into()),
        effect: "NoExecute".into(),
        time_added: None,
    });
    Some(taints)
}

/// The pod's tolerations with the one for the bridge's taint, or `None`
/// when it has it.
pub fn with_bridge_toleration(p: &Pod) -> Option<Vec<Toleration>> {
    let mut tols = p
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default();
    if tols.iter().any(|t| t.key.as_deref() == Some(TAINT_KEY)) {
        return None;
    }
    tols.push(Toleration {
        key: Some(TAINT_KEY.into()),
        operator: Some("Exists".into()),
        effect: Some("NoExecute".into()),
        ..Default::default()
    });
    Some(tols)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap_or_default()
    }

    fn node(v: serde_json::Value) -> Node {
        serde_json::from_value(v).unwrap_or_default()
    }

    #[test]
    fn quantities_parse_as_kubernetes_writes_them() {
        let q = |s: &str| quantity(&Quantity(s.into()));
        assert_eq!(q("500m"), Ok(0.5));
        assert_eq!(q("2"), Ok(2.0));
        assert_eq!(q("1.5"), Ok(1.5));
        assert_eq!(q("1Gi"), Ok(1073741824.0));
        assert_eq!(q("128974848"), Ok(128974848.0));
        assert_eq!(q("129e6"), Ok(129e6));
        assert_eq!(q("1M"), Ok(1e6));
        assert!(q("1Zi").is_err());
        assert!(q("-1").is_err());
        assert!(q("").is_err());
    }

    #[test]
    fn a_group_becomes_one_job_of_its_largest_pod() {
        let mk = |name: &str, cpu: &str, mem: &str, gpu: Option<&str>| {
            let mut res = json!({"requests": {"cpu": cpu, "memory": mem}});
            if let Some(g) = gpu {
                res["limits"] = json!({"nvidia.com/gpu": g});
            }
            pod(json!({"metadata": {"name": name, "namespace": "ml",
                                    "labels": {POD_GROUP_LABEL: "train"},
                                    "annotations": {"slurmjob.slinky.slurm.net/account": "physics",
                                                    "slurmjob.slinky.slurm.net/timelimit": "30"}},
                       "spec": {"containers": [{"name": "c", "resources": res}],
                                "activeDeadlineSeconds": 600}}))
        };
        let a = mk("w-0", "1500m", "1Gi", Some("2"));
        let b = mk("w-1", "2", "512Mi", None);
        let key = group_key(&a, None, None);
        assert_eq!(
            key,
            GroupKey::PodGroup {
                ns: "ml".into(),
                name: "train".into()
            }
        );
        let d = job_desc(
            &key,
            &[&a, &b],
            vec!["k3".into()],
            &JobDefaults {
                partition: Some("kube".into()),
                submit_host: "h".into(),
                trusted: vec!["account".into(), "timelimit".into()],
            },
        )
        .unwrap_or_default();
        assert!(d.external);
        assert_eq!(d.min_nodes, Some(2));
        assert_eq!(d.max_nodes, Some(2));
        assert_eq!(d.ntasks, Some(2));
        assert_eq!(d.ntasks_per_node, Some(1));
        assert_eq!(d.cpus_per_task, Some(2));
        assert_eq!(d.mem_per_node, Some(1024));
        assert_eq!(d.gres.as_deref(), Some("gpu:2"));
        assert_eq!(d.account.as_deref(), Some("physics"));
        assert_eq!(d.partition.as_deref(), Some("kube"));
        // The annotation wins over activeDeadlineSeconds (10 minutes).
        assert_eq!(d.time_limit, Some(Some(30)));
        assert_eq!(d.exc_nodes, vec!["k3".to_string()]);
        assert!(d.req_nodes.is_empty());
        assert_eq!(
            pods_of_job(d.admin_comment.as_deref()),
            vec![("ml/w-0".to_string(), None), ("ml/w-1".to_string(), None)]
        );
        let c = r#"{"pods":["a/x","a/y"],"uids":["u1","u2"]}"#;
        assert_eq!(
            pods_of_job(Some(c)),
            vec![
                ("a/x".into(), Some("u1".into())),
                ("a/y".into(), Some("u2".into()))
            ]
        );
        assert!(pods_of_job(Some("not json")).is_empty());
        assert!(pods_of_job(None).is_empty());
    }

    #[test]
    fn a_bad_annotation_is_named() {
        let p = pod(json!({"metadata": {"name": "p", "annotations": {
            "slurmjob.slinky.slurm.net/timelimit": "soon"}},
            "spec": {"containers": [{"name": "c"}]}}));
        let trusted = JobDefaults {
            trusted: DEFAULT_TRUSTED.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        let e = job_desc(&group_key(&p, None, None), &[&p], vec![], &trusted)
            .err()
            .unwrap_or_default();
        assert!(e.contains("timelimit") && e.contains("soon"), "{e}");
        // An account (or QOS, partition, reservation) only where the site
        // trusts pods' authors with it; an unknown annotation is named.
        let acct = pod(json!({"metadata": {"name": "p", "annotations": {
            "slurmjob.slinky.slurm.net/account": "physics"}},
            "spec": {"containers": [{"name": "c"}]}}));
        let e = job_desc(&group_key(&acct, None, None), &[&acct], vec![], &trusted)
            .err()
            .unwrap_or_default();
        assert!(e.contains("not trusted") && e.contains("account"), "{e}");
        let typo = pod(json!({"metadata": {"name": "p", "annotations": {
            "slurmjob.slinky.slurm.net/acount": "physics"}},
            "spec": {"containers": [{"name": "c"}]}}));
        let e = job_desc(&group_key(&typo, None, None), &[&typo], vec![], &trusted)
            .err()
            .unwrap_or_default();
        assert!(
            e.contains("unknown annotation") && e.contains("acount"),
            "{e}"
        );
    }

    #[test]
    fn pods_are_ranked_by_index_then_name() {
        let p = |name: &str, idx: Option<&str>| {
            let mut v = json!({"metadata": {"name": name}});
            if let Some(i) = idx {
                v["metadata"]["annotations"] =
                    json!({"batch.kubernetes.io/job-completion-index": i});
            }
            pod(v)
        };
        let (a, b, c) = (p("z", Some("0")), p("a", Some("10")), p("m", Some("2")));
        let mut v = vec![&b, &a, &c];
        rank_order(&mut v);
        let names: Vec<&str> = v.iter().map(|p| pod_name(p)).collect();
        assert_eq!(names, ["z", "m", "a"]);
    }

    #[test]
    fn feasibility_follows_selectors_taints_and_affinity() {
        let n = |name: &str, zone: &str, taint: bool| {
            let mut v = json!({"metadata": {"name": name, "labels": {"zone": zone}}, "spec": {}});
            if taint {
                v["spec"]["taints"] =
                    json!([{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]);
            }
            node(v)
        };
        let plain = pod(json!({"metadata": {"name": "p"}, "spec": {"containers": []}}));
        let sel = pod(json!({"metadata": {"name": "p"},
                             "spec": {"containers": [], "nodeSelector": {"zone": "a"}}}));
        let tol = pod(json!({"metadata": {"name": "p"}, "spec": {"containers": [],
            "tolerations": [{"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}]}}));
        let aff = pod(json!({"metadata": {"name": "p"}, "spec": {"containers": [],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "zone", "operator": "NotIn", "values": ["b"]}]}]}}}}}));
        let a = n("n1", "a", false);
        let b = n("n2", "b", false);
        let t = n("n3", "a", true);
        assert!(fits(&plain, &a) && fits(&plain, &b) && !fits(&plain, &t));
        assert!(fits(&sel, &a) && !fits(&sel, &b));
        assert!(fits(&tol, &t));
        assert!(fits(&aff, &a) && !fits(&aff, &b));
        // The bridge's own taint never excludes a node.
        let mut own = n("n4", "a", false);
        if let Some(s) = own.spec.as_mut() {
            s.taints = with_bridge_taint(&a);
        }
        assert!(fits(&plain, &own));
        assert!(with_bridge_taint(&own).is_none());
    }

    #[test]
    fn node_capacity_reads_allocatable() {
        let n = node(json!({"metadata": {"name": "k1"}, "status": {
            "capacity": {"cpu": "16", "memory": "64Gi"},
            "allocatable": {"cpu": "15500m", "memory": "63Gi", "nvidia.com/gpu": "4"}}}));
        assert_eq!(node_capacity(&n), (15, 63 * 1024, 4));
    }

    #[test]
    fn kubernetes_own_gangs_are_read_from_the_pod_and_their_policy() {
        // 1.35: a Workload's pod group, split by replica key.
        let spec = json!({"workloadRef": {"name": "train", "podGroup": "workers",
                                          "podGroupReplicaKey": "1"}});
        let w = SchedRef::of_spec(&spec).expect("workloadRef");
        assert_eq!(
            w,
            SchedRef::Workload {
                name: "train".into(),
                pod_group: "workers".into(),
                replica: "1".into()
            }
        );
        assert_eq!(w.object(), ("Workload", "train"));
        // 1.36: a PodGroup object.
        let spec = json!({"schedulingGroup": {"podGroupName": "train-0"}});
        assert_eq!(
            SchedRef::of_spec(&spec),
            Some(SchedRef::PodGroup {
                name: "train-0".into()
            })
        );
        // Incomplete references are none.
        assert_eq!(
            SchedRef::of_spec(&json!({"workloadRef": {"name": "x"}})),
            None
        );
        assert_eq!(SchedRef::of_spec(&json!({"schedulingGroup": {}})), None);
        assert_eq!(SchedRef::of_spec(&json!({})), None);

        let wl = json!({"spec": {"podGroups": [
            {"name": "workers", "policy": {"gang": {"minCount": 4}}},
            {"name": "driver", "policy": {"basic": {}}},
            {"name": "odd", "policy": {"gang": {}}}]}});
        let pols = workload_policies(&wl);
        assert_eq!(pols.get("workers"), Some(&Policy::Gang(4)));
        assert_eq!(pols.get("driver"), Some(&Policy::Basic));
        assert_eq!(pols.get("odd"), None, "a gang without minCount is not read");
        let pg = json!({"spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}});
        assert_eq!(pod_group_policy(&pg), Some(Policy::Gang(2)));

        // A gang's pods share a key; a basic group's pods go alone; an
        // unknown group's pods wait under the gang's key.
        let p = pod(json!({"metadata": {"name": "w-0", "namespace": "ml"}, "spec": {}}));
        let gang = group_key(&p, Some(&w), Some(Policy::Gang(4)));
        assert_eq!(
            gang,
            GroupKey::Gang {
                ns: "ml".into(),
                r: w.clone()
            }
        );
        assert_eq!(wanted(&gang, &[&p], Some(4)), 4);
        assert_eq!(group_key(&p, Some(&w), None), gang);
        assert_eq!(
            group_key(&p, Some(&w), Some(Policy::Basic)),
            GroupKey::Pod {
                ns: "ml".into(),
                name: "w-0".into()
            }
        );
        assert_eq!(
            gang.to_string(),
            "Workload ml/train pod group workers replica 1"
        );
        let d = job_desc(
            &gang,
            &[&p],
            vec![],
            &JobDefaults {
                partition: None,
                submit_host: "h".into(),
                trusted: vec![],
            },
        )
        .expect("desc");
        assert_eq!(d.name.as_deref(), Some("train-workers-1"));
    }
}
