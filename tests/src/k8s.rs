//! A stand-in for a Kubernetes API server, at its HTTP interface, for the
//! bridge's tests and demo (no real API server can run on these machines).
//!
//! It keeps objects in memory as JSON and answers as kube-apiserver does for
//! what the bridge, `kubectl` and a kubelet use: discovery (`/api`, `/apis`,
//! `/version`), create/get/list/replace/patch/delete of namespaces, nodes,
//! pods, leases, batch Jobs, Deployments, the `scheduling.x-k8s.io`
//! PodGroup and, when it plays Kubernetes 1.35 or 1.36, the built-in
//! `scheduling.k8s.io` Workload and PodGroup of that version; one `resourceVersion` counter over all objects; list and watch
//! with label and field selectors, bookmarks, `sendInitialEvents` and
//! `410 Gone` ("too old resource version") once an event has left the
//! window kept for watchers; the `pods/binding`, `pods/status`,
//! `nodes/status` (and other `/status`) subresources; JSON merge,
//! strategic merge (applied as a merge) and JSON patch; finalizers,
//! deletion timestamps and graceful deletion of bound pods (a kubelet
//! finishes it). `tests/tests/cluster/kube.rs` checks it against the real
//! `kubectl`.
//!
//! [`FakeKubelet`] plays the kubelets of some nodes: bound pods go Running,
//! then Succeeded after the seconds in their `fake-kubelet/run-seconds`
//! annotation, and pods being deleted on those nodes are removed.

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Body = BoxBody<Bytes, Infallible>;

/// A kind the server keeps.
struct Kind {
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    /// Subresources besides `status` (which every kind here has but
    /// namespaces' and leases').
    status: bool,
    binding: bool,
    /// The Kubernetes minor versions that serve it (the server plays one).
    served: (u32, u32),
}

/// Every Kubernetes version the stand-in can play serves these.
const ALWAYS: (u32, u32) = (0, u32::MAX);

impl Kind {
    fn served(&self, minor: u32) -> bool {
        (self.served.0..=self.served.1).contains(&minor)
    }
}

const KINDS: &[Kind] = &[
    Kind {
        group: "",
        version: "v1",
        plural: "namespaces",
        kind: "Namespace",
        namespaced: false,
        short: &["ns"],
        status: true,
        binding: false,
        served: ALWAYS,
    },
    Kind {
        group: "",
        version: "v1",
        plural: "nodes",
        kind: "Node",
        namespaced: false,
        short: &["no"],
        status: true,
        binding: false,
        served: ALWAYS,
    },
    Kind {
        group: "",
        version: "v1",
        plural: "pods",
        kind: "Pod",
        namespaced: true,
        short: &["po"],
        status: true,
        binding: true,
        served: ALWAYS,
    },
    Kind {
        group: "",
        version: "v1",
        plural: "events",
        kind: "Event",
        namespaced: true,
        short: &["ev"],
        status: false,
        binding: false,
        served: ALWAYS,
    },
    Kind {
        group: "batch",
        version: "v1",
        plural: "jobs",
        kind: "Job",
        namespaced: true,
        short: &[],
        status: true,
        binding: false,
        served: ALWAYS,
    },
    Kind {
        group: "apps",
        version: "v1",
        plural: "deployments",
        kind: "Deployment",
        namespaced: true,
        short: &["deploy"],
        status: true,
        binding: false,
        served: ALWAYS,
    },
    Kind {
        group: "coordination.k8s.io",
        version: "v1",
        plural: "leases",
        kind: "Lease",
        namespaced: true,
        short: &[],
        status: false,
        binding: false,
        served: ALWAYS,
    },
    Kind {
        group: "scheduling.x-k8s.io",
        version: "v1alpha1",
        plural: "podgroups",
        kind: "PodGroup",
        namespaced: true,
        short: &["pg", "pgs"],
        status: true,
        binding: false,
        served: ALWAYS,
    },
    // The built-in gang scheduling API (feature gate GenericWorkload):
    // Kubernetes 1.35 has Workloads whose pods name them in
    // `spec.workloadRef`; 1.36 has PodGroups (and Workloads as templates)
    // whose pods name them in `spec.schedulingGroup`.
    Kind {
        group: "scheduling.k8s.io",
        version: "v1alpha1",
        plural: "workloads",
        kind: "Workload",
        namespaced: true,
        short: &[],
        status: false,
        binding: false,
        served: (35, 35),
    },
    Kind {
        group: "scheduling.k8s.io",
        version: "v1alpha2",
        plural: "podgroups",
        kind: "PodGroup",
        namespaced: true,
        short: &[],
        status: true,
        binding: false,
        served: (36, 36),
    },
    Kind {
        group: "scheduling.k8s.io",
        version: "v1alpha2",
        plural: "workloads",
        kind: "Workload",
        namespaced: true,
        short: &[],
        status: false,
        binding: false,
        served: (36, 36),
    },
];

fn api_version(k: &Kind) -> String {
    if k.group.is_empty() {
        k.version.to_string()
    } else {
        format!("{}/{}", k.group, k.version)
    }
}

/// One change, as watchers see it.
#[derive(Clone)]
struct Change {
    rv: u64,
    kind: usize,
    /// The object before (none when created) and after (none when gone).
    old: Option<Value>,
    new: Option<Value>,
}

/// How many changes are kept for watchers that resume from a version.
const WINDOW: usize = 4096;

/// (kind index, namespace or "", name).
type ObjKey = (usize, String, String);

struct Store {
    rv: u64,
    uid: u64,
    /// (kind index, namespace or "", name) → object.
    objects: BTreeMap<(usize, String, String), Value>,
    changes: VecDeque<Change>,
}

impl Store {
    /// The object of kind `k` named `name` in `ns`, with its key.
    fn existing(&self, k: usize, ns: &str, name: &str) -> Result<(ObjKey, Value), ApiError> {
        let key = (k, ns.to_string(), name.to_string());
        let old = self
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| not_found(&KINDS[k], name))?;
        Ok((key, old))
    }

    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    /// The oldest version a watcher may resume from.
    fn oldest(&self) -> u64 {
        self.changes.front().map_or(self.rv, |c| c.rv - 1)
    }

    fn record(&mut self, kind: usize, old: Option<Value>, new: Option<Value>, rv: u64) {
        self.changes.push_back(Change { rv, kind, old, new });
        while self.changes.len() > WINDOW {
            self.changes.pop_front();
        }
    }
}

/// The server: its address and objects. Stopped when dropped.
pub struct FakeApiServer {
    pub addr: SocketAddr,
    /// The Kubernetes minor version it plays (`/version`; which kinds).
    minor: u32,
    store: Arc<Mutex<Store>>,
    changed: tokio::sync::watch::Sender<u64>,
    rt: Option<tokio::runtime::Runtime>,
}

/// An API error, answered as a `Status` object.
struct ApiError {
    code: StatusCode,
    reason: &'static str,
    message: String,
}

fn err(code: StatusCode, reason: &'static str, message: impl Into<String>) -> ApiError {
    ApiError {
        code,
        reason,
        message: message.into(),
    }
}

fn not_found(kind: &Kind, name: &str) -> ApiError {
    let what = if kind.group.is_empty() {
        kind.plural.to_string()
    } else {
        format!("{}.{}", kind.plural, kind.group)
    };
    err(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("{what} \"{name}\" not found"),
    )
}

fn status_body(code: StatusCode, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": if code.is_success() { "Success" } else { "Failure" },
        "message": message, "reason": reason, "code": code.as_u16(),
    })
}

fn full(code: StatusCode, v: &Value) -> Response<Body> {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(v.to_string())).boxed())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
}

fn now_rfc3339() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

impl FakeApiServer {
    /// Start on `ip` (a free port) with the `default`, `kube-system` and
    /// `kube-public` namespaces, as Kubernetes 1.33.
    pub fn start(ip: &str) -> std::io::Result<FakeApiServer> {
        FakeApiServer::start_as(ip, 33)
    }

    /// Start as Kubernetes 1.`minor` (what `/version` says and the kinds
    /// served: 1.35's `scheduling.k8s.io/v1alpha1` Workloads, 1.36's
    /// `v1alpha2` PodGroups).
    pub fn start_as(ip: &str, minor: u32) -> std::io::Result<FakeApiServer> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let listener = rt.block_on(tokio::net::TcpListener::bind((ip, 0)))?;
        let addr = listener.local_addr()?;
        let store = Arc::new(Mutex::new(Store {
            rv: 0,
            uid: 0,
            objects: BTreeMap::new(),
            changes: VecDeque::new(),
        }));
        let (changed, _) = tokio::sync::watch::channel(0u64);
        let shared = Arc::new(Shared {
            minor,
            store: store.clone(),
            changed: changed.clone(),
        });
        let ns_kind = KINDS
            .iter()
            .position(|k| k.plural == "namespaces")
            .unwrap_or(0);
        for ns in ["default", "kube-system", "kube-public"] {
            shared
                .create(
                    ns_kind,
                    "",
                    json!({"apiVersion": "v1", "kind": "Namespace",
                                             "metadata": {"name": ns}}),
                )
                .map_err(|e| std::io::Error::other(e.message))?;
        }
        rt.spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    continue;
                };
                let shared = shared.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        let shared = shared.clone();
                        async move { Ok::<_, Infallible>(shared.handle(req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(sock), svc)
                        .await;
                });
            }
        });
        Ok(FakeApiServer {
            addr,
            minor,
            store,
            changed,
            rt: Some(rt),
        })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kubeconfig for this server (no credentials: it takes anyone).
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\n\
             contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n\
             current-context: fake\nusers:\n- name: fake\n  user: {{}}\n",
            self.url()
        )
    }

    fn shared(&self) -> Shared {
        Shared {
            minor: self.minor,
            store: self.store.clone(),
            changed: self.changed.clone(),
        }
    }

    /// Create an object (its kind from `apiVersion` and `kind`).
    pub fn create(&self, obj: &Value) -> Result<Value, String> {
        let k = kind_of(obj, self.minor).ok_or("unknown kind")?;
        let ns = obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or(if KINDS[k].namespaced { "default" } else { "" })
            .to_string();
        self.shared()
            .create(k, &ns, obj.clone())
            .map_err(|e| e.message)
    }

    /// The object of `plural` (`pods`, `nodes`, ...) named `name` in `ns`
    /// (empty for nodes and namespaces).
    pub fn get(&self, plural: &str, ns: &str, name: &str) -> Option<Value> {
        let k = self.kind(plural)?;
        let s = self.store.lock().unwrap_or_else(|p| p.into_inner());
        s.objects
            .get(&(k, ns.to_string(), name.to_string()))
            .cloned()
    }

    /// Every object of `plural`.
    pub fn list(&self, plural: &str) -> Vec<Value> {
        let Some(k) = self.kind(plural) else {
            return Vec::new();
        };
        let s = self.store.lock().unwrap_or_else(|p| p.into_inner());
        s.objects
            .iter()
            .filter(|((kk, _, _), _)| *kk == k)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Delete an object as a client would (finalizers and grace apply).
    pub fn delete(
        &self,
        plural: &str,
        ns: &str,
        name: &str,
        grace: Option<i64>,
    ) -> Result<(), String> {
        let k = self.kind(plural).ok_or("unknown kind")?;
        self.shared()
            .delete(k, ns, name, grace)
            .map(|_| ())
            .map_err(|e| e.message)
    }

    /// The kind served as `plural` (its preferred version).
    fn kind(&self, plural: &str) -> Option<usize> {
        KINDS
            .iter()
            .rposition(|k| k.plural == plural && k.served(self.minor))
    }

    /// Forget changes older than the last `keep` (watchers resuming from
    /// before them get 410 Gone).
    pub fn compact(&self, keep: usize) {
        let mut s = self.store.lock().unwrap_or_else(|p| p.into_inner());
        while s.changes.len() > keep {
            s.changes.pop_front();
        }
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

fn kind_of(obj: &Value, minor: u32) -> Option<usize> {
    let av = obj["apiVersion"].as_str()?;
    let kind = obj["kind"].as_str()?;
    KINDS
        .iter()
        .position(|k| api_version(k) == av && k.kind == kind && k.served(minor))
}

struct Shared {
    minor: u32,
    store: Arc<Mutex<Store>>,
    changed: tokio::sync::watch::Sender<u64>,
}

/// A request's target, from its path.
struct Target {
    kind: usize,
    ns: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

fn query_map(q: Option<&str>) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for pair in q.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        m.insert(unescape(k), unescape(v));
    }
    m
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => match u8::from_str_radix(&s[i + 1..i + 3], 16) {
                Ok(c) => {
                    out.push(c);
                    i += 2;
                }
                Err(_) => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Shared {
    async fn handle(&self, req: Request<hyper::body::Incoming>) -> Response<Body> {
        let method = req.method().clone();
        let path = req.uri().path().to_string();
        let query = query_map(req.uri().query());
        let ctype = req
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/json")
            .to_string();
        let body = match req.into_body().collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => Bytes::new(),
        };
        match self.route(&method, &path, &query, &ctype, &body).await {
            Ok(r) => r,
            Err(e) => full(e.code, &status_body(e.code, e.reason, &e.message)),
        }
    }

    async fn route(
        &self,
        method: &Method,
        path: &str,
        q: &BTreeMap<String, String>,
        ctype: &str,
        body: &[u8],
    ) -> Result<Response<Body>, ApiError> {
        let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
        // Discovery.
        match segs.as_slice() {
            ["version"] => {
                return Ok(full(
                    StatusCode::OK,
                    &json!({"major": "1", "minor": self.minor.to_string(),
                            "gitVersion": format!("v1.{}.0-fake", self.minor),
                            "platform": "linux/amd64"}),
                ))
            }
            ["api"] => {
                return Ok(full(
                    StatusCode::OK,
                    &json!({"kind": "APIVersions", "versions": ["v1"],
                            "serverAddressByClientCIDRs": []}),
                ))
            }
            ["apis"] => return Ok(full(StatusCode::OK, &group_list(self.minor))),
            ["api", v] if *v == "v1" => {
                return Ok(full(StatusCode::OK, &resource_list("", v, self.minor)))
            }
            ["apis", g, v]
                if KINDS
                    .iter()
                    .any(|k| k.group == *g && k.version == *v && k.served(self.minor)) =>
            {
                return Ok(full(StatusCode::OK, &resource_list(g, v, self.minor)))
            }
            ["apis", g] if KINDS.iter().any(|k| k.group == *g && k.served(self.minor)) => {
                return Ok(full(StatusCode::OK, &group_of(g, self.minor)))
            }
            ["healthz"] | ["readyz"] | ["livez"] => {
                return Ok(Response::new(Full::new(Bytes::from("ok")).boxed()))
            }
            _ => {}
        }
        let t = target(&segs, self.minor).ok_or_else(|| {
            err(
                StatusCode::NOT_FOUND,
                "NotFound",
                "the server could not find the requested resource",
            )
        })?;
        let kind = &KINDS[t.kind];
        let ns = t.ns.clone().unwrap_or_default();
        match (method, &t.name, t.sub.as_deref()) {
            (&Method::GET, None, None) => {
                if matches!(q.get("watch").map(String::as_str), Some("true" | "1")) {
                    return self.watch(t.kind, t.ns.clone(), q);
                }
                self.list(t.kind, t.ns.as_deref(), q)
            }
            (&Method::GET, Some(name), None | Some("status")) => {
                let s = self.store.lock().unwrap_or_else(|p| p.into_inner());
                s.objects
                    .get(&(t.kind, ns.clone(), name.clone()))
                    .map(|o| full(StatusCode::OK, o))
                    .ok_or_else(|| not_found(kind, name))
            }
            (&Method::POST, None, None) => {
                let obj = parse(body)?;
                let created = self.create(t.kind, &ns, obj)?;
                Ok(full(StatusCode::CREATED, &created))
            }
            (&Method::POST, Some(name), Some("binding")) if kind.binding => {
                let b = parse(body)?;
                let node = b["target"]["name"]
                    .as_str()
                    .filter(|n| !n.is_empty())
                    .ok_or_else(|| {
                        err(
                            StatusCode::BAD_REQUEST,
                            "BadRequest",
                            "Binding.target.name: Required value",
                        )
                    })?
                    .to_string();
                self.update(t.kind, &ns, name, Some("binding"), |o| {
                    if let Some(n) = o["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
                        return Err(err(
                            StatusCode::CONFLICT,
                            "Conflict",
                            format!(
                                "Operation cannot be fulfilled on pods/binding \"{name}\": \
                                 pod {name} is already assigned to node \"{n}\""
                            ),
                        ));
                    }
                    if o["metadata"]["deletionTimestamp"].is_string() {
                        return Err(err(
                            StatusCode::CONFLICT,
                            "Conflict",
                            format!("pod {name} is being deleted, cannot be assigned to a host"),
                        ));
                    }
                    o["spec"]["nodeName"] = json!(node);
                    set_condition(o, "PodScheduled", "True");
                    Ok(())
                })?;
                Ok(full(
                    StatusCode::CREATED,
                    &status_body(StatusCode::CREATED, "", ""),
                ))
            }
            (&Method::PUT, Some(name), sub @ (None | Some("status"))) => {
                let new = parse(body)?;
                let want_rv = new["metadata"]["resourceVersion"]
                    .as_str()
                    .map(str::to_string);
                let o = self.update(t.kind, &ns, name, sub, |o| {
                    if let Some(rv) = &want_rv {
                        if o["metadata"]["resourceVersion"].as_str() != Some(rv) {
                            return Err(conflict(kind, name));
                        }
                    }
                    *o = new.clone();
                    Ok(())
                })?;
                Ok(full(StatusCode::OK, &o))
            }
            (&Method::PATCH, Some(name), sub @ (None | Some("status"))) => {
                let patch = parse(body)?;
                let ct = ctype.split(';').next().unwrap_or("").trim().to_string();
                let o = self.update(t.kind, &ns, name, sub, |o| {
                    match ct.as_str() {
                        "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
                            if let Some(rv) = patch["metadata"]["resourceVersion"].as_str() {
                                if o["metadata"]["resourceVersion"].as_str() != Some(rv) {
                                    return Err(conflict(kind, name));
                                }
                            }
                            merge_patch(o, &patch)
                        }
                        "application/json-patch+json" => json_patch(o, &patch)?,
                        other => {
                            return Err(err(
                                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                                "UnsupportedMediaType",
                                format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {other})"),
                            ))
                        }
                    }
                    Ok(())
                })?;
                Ok(full(StatusCode::OK, &o))
            }
            (&Method::DELETE, Some(name), None) => {
                let opts: Value = if body.is_empty() {
                    Value::Null
                } else {
                    parse(body)?
                };
                let grace = q
                    .get("gracePeriodSeconds")
                    .and_then(|g| g.parse().ok())
                    .or_else(|| opts["gracePeriodSeconds"].as_i64());
                let o = self.delete(t.kind, &ns, name, grace)?;
                Ok(full(StatusCode::OK, &o))
            }
            _ => Err(err(
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                format!("the server does not allow this method on the requested resource ({method} {path})"),
            )),
        }
    }

    fn list(
        &self,
        k: usize,
        ns: Option<&str>,
        q: &BTreeMap<String, String>,
    ) -> Result<Response<Body>, ApiError> {
        let sel = Selectors::parse(q)?;
        let s = self.store.lock().unwrap_or_else(|p| p.into_inner());
        let items: Vec<Value> = s
            .objects
            .iter()
            .filter(|((kk, n, _), o)| *kk == k && ns.is_none_or(|ns| ns == n) && sel.matches(o))
            .map(|(_, o)| o.clone())
            .collect();
        let kind = &KINDS[k];
        Ok(full(
            StatusCode::OK,
            &json!({"kind": format!("{}List", kind.kind), "apiVersion": api_version(kind),
                    "metadata": {"resourceVersion": s.rv.to_string()}, "items": items}),
        ))
    }

    fn watch(
        &self,
        k: usize,
        ns: Option<String>,
        q: &BTreeMap<String, String>,
    ) -> Result<Response<Body>, ApiError> {
        let sel = Selectors::parse(q)?;
        let bookmarks = q.get("allowWatchBookmarks").is_some_and(|v| v == "true");
        let initial = q.get("sendInitialEvents").is_some_and(|v| v == "true");
        let timeout = q
            .get("timeoutSeconds")
            .and_then(|t| t.parse::<u64>().ok())
            .map(Duration::from_secs)
            .unwrap_or(Duration::from_secs(1800));
        let from = q.get("resourceVersion").cloned().unwrap_or_default();
        let (tx, rx) =
            tokio::sync::mpsc::channel::<Result<hyper::body::Frame<Bytes>, Infallible>>(64);
        let store = self.store.clone();
        let mut changed = self.changed.subscribe();
        let kind = &KINDS[k];
        let av = api_version(kind);
        let kname = kind.kind;
        tokio::spawn(async move {
            let line = |v: Value| Ok(hyper::body::Frame::data(Bytes::from(format!("{v}\n"))));
            let in_ns = |o: &Value| {
                ns.as_deref()
                    .is_none_or(|n| o["metadata"]["namespace"].as_str().unwrap_or("") == n)
            };
            // Where to start: the current objects (no version, "0", or an
            // initial-events stream), else the changes after `from`.
            let mut last;
            let mut first = Vec::new();
            let mut expired = false;
            {
                let s = store.lock().unwrap_or_else(|p| p.into_inner());
                last = s.rv;
                if from.is_empty() || from == "0" || initial {
                    for ((kk, _, _), o) in &s.objects {
                        if *kk == k && in_ns(o) && sel.matches(o) {
                            first.push(json!({"type": "ADDED", "object": o}));
                        }
                    }
                    if initial {
                        first.push(json!({"type": "BOOKMARK", "object": {
                            "kind": kname, "apiVersion": av,
                            "metadata": {"resourceVersion": s.rv.to_string(),
                                         "annotations": {"k8s.io/initial-events-end": "true"}}}}));
                    }
                } else {
                    match from.parse::<u64>() {
                        Ok(v) if v >= s.oldest() => last = v,
                        _ => {
                            let gone = json!({"type": "ERROR", "object": {
                                "kind": "Status", "apiVersion": "v1", "metadata": {},
                                "status": "Failure",
                                "message": format!("too old resource version: {from} ({})", s.oldest() + 1),
                                "reason": "Expired", "code": 410}});
                            first.push(gone);
                            expired = true;
                        }
                    }
                }
            }
            for e in first {
                if tx.send(line(e)).await.is_err() {
                    return;
                }
            }
            if expired {
                return;
            }
            let end = tokio::time::Instant::now() + timeout;
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                let events: Vec<Value> = {
                    let s = store.lock().unwrap_or_else(|p| p.into_inner());
                    if last < s.oldest() {
                        Vec::new()
                    } else {
                        let out = s
                            .changes
                            .iter()
                            .filter(|c| c.rv > last && c.kind == k)
                            .filter_map(|c| {
                                let was =
                                    c.old.as_ref().is_some_and(|o| in_ns(o) && sel.matches(o));
                                let is = c.new.as_ref().is_some_and(|o| in_ns(o) && sel.matches(o));
                                match (was, is) {
                                    (false, true) if c.old.is_none() => {
                                        Some(json!({"type": "ADDED", "object": c.new}))
                                    }
                                    (false, true) => {
                                        Some(json!({"type": "ADDED", "object": c.new}))
                                    }
                                    (true, true) => {
                                        Some(json!({"type": "MODIFIED", "object": c.new}))
                                    }
                                    (true, false) => {
                                        // Gone, or no longer selected: the
                                        // last state with the new version.
                                        let mut o = c.new.clone().or_else(|| c.old.clone())?;
                                        o["metadata"]["resourceVersion"] = json!(c.rv.to_string());
                                        Some(json!({"type": "DELETED", "object": o}))
                                    }
                                    (false, false) => None,
                                }
                            })
                            .collect();
                        last = s.rv;
                        out
                    }
                };
                for e in events {
                    if tx.send(line(e)).await.is_err() {
                        return;
                    }
                }
                tokio::select! {
                    r = changed.changed() => if r.is_err() { return },
                    _ = tick.tick() => {
                        if bookmarks {
                            let b = json!({"type": "BOOKMARK", "object": {
                                "kind": kname, "apiVersion": av,
                                "metadata": {"resourceVersion": last.to_string()}}});
                            if tx.send(line(b)).await.is_err() {
                                return;
                            }
                        }
                    }
                    _ = tokio::time::sleep_until(end) => return,
                }
            }
        });
        let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
        Ok(Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "application/json")
            .body(BodyExt::boxed(StreamBody::new(stream)))
            .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed())))
    }

    fn create(&self, k: usize, ns: &str, mut obj: Value) -> Result<Value, ApiError> {
        let kind = &KINDS[k];
        if !obj.is_object() {
            return Err(err(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                "the body is not an object",
            ));
        }
        obj["apiVersion"] = json!(api_version(kind));
        obj["kind"] = json!(kind.kind);
        if !obj["metadata"].is_object() {
            obj["metadata"] = json!({});
        }
        let mut s = self.store.lock().unwrap_or_else(|p| p.into_inner());
        let name = match obj["metadata"]["name"].as_str().filter(|n| !n.is_empty()) {
            Some(n) => n.to_string(),
            None => match obj["metadata"]["generateName"].as_str() {
                Some(g) => {
                    s.uid += 1;
                    format!("{g}{:05x}", s.uid)
                }
                None => {
                    return Err(err(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "Invalid",
                        format!("{} \"\" is invalid: metadata.name: Required value: name or generateName is required", kind.kind),
                    ))
                }
            },
        };
        if !valid_name(&name) {
            return Err(err(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid",
                format!("{} \"{name}\" is invalid: metadata.name: Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'", kind.kind),
            ));
        }
        if kind.namespaced {
            if let Some(n) = obj["metadata"]["namespace"].as_str() {
                if n != ns {
                    return Err(err(
                        StatusCode::BAD_REQUEST,
                        "BadRequest",
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
            }
            let ns_kind = 0;
            if !s
                .objects
                .contains_key(&(ns_kind, String::new(), ns.to_string()))
            {
                return Err(err(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    format!("namespaces \"{ns}\" not found"),
                ));
            }
            obj["metadata"]["namespace"] = json!(ns);
        }
        let key = (
            k,
            if kind.namespaced {
                ns.to_string()
            } else {
                String::new()
            },
            name.clone(),
        );
        if s.objects.contains_key(&key) {
            let what = if kind.group.is_empty() {
                kind.plural.to_string()
            } else {
                format!("{}.{}", kind.plural, kind.group)
            };
            return Err(err(
                StatusCode::CONFLICT,
                "AlreadyExists",
                format!("{what} \"{name}\" already exists"),
            ));
        }
        s.uid += 1;
        let uid = format!("00000000-0000-4000-8000-{:012x}", s.uid);
        let rv = s.next_rv();
        let m = &mut obj["metadata"];
        m["name"] = json!(name);
        m["uid"] = json!(uid);
        m["resourceVersion"] = json!(rv.to_string());
        m["creationTimestamp"] = json!(now_rfc3339());
        if let Some(mm) = m.as_object_mut() {
            mm.remove("deletionTimestamp");
        }
        if kind.kind == "Pod" {
            if obj["status"]["phase"].as_str().is_none() {
                obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
            }
            if obj["spec"]["schedulerName"].as_str().is_none() {
                obj["spec"]["schedulerName"] = json!("default-scheduler");
            }
        }
        if kind.kind == "Namespace" {
            obj["status"] = json!({"phase": "Active"});
        }
        s.objects.insert(key, obj.clone());
        s.record(k, None, Some(obj.clone()), rv);
        drop(s);
        self.changed.send_replace(rv);
        Ok(obj)
    }

    /// Change an object with `f`. `sub`: `None` changes all but the status
    /// (for kinds with a status subresource), `Some("status")` only the
    /// status, `Some("binding")` anything.
    fn update(
        &self,
        k: usize,
        ns: &str,
        name: &str,
        sub: Option<&str>,
        f: impl FnOnce(&mut Value) -> Result<(), ApiError>,
    ) -> Result<Value, ApiError> {
        let kind = &KINDS[k];
        let mut s = self.store.lock().unwrap_or_else(|p| p.into_inner());
        let (key, old) = s.existing(k, ns, name)?;
        let mut new = old.clone();
        f(&mut new)?;
        // What the request may not change.
        new["apiVersion"] = old["apiVersion"].clone();
        new["kind"] = old["kind"].clone();
        for f in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ] {
            match old["metadata"].get(f) {
                Some(v) => new["metadata"][f] = v.clone(),
                None => {
                    if let Some(m) = new["metadata"].as_object_mut() {
                        m.remove(f);
                    }
                }
            }
        }
        match sub {
            Some("status") => {
                let status = new["status"].clone();
                new = old.clone();
                new["status"] = status;
            }
            None if kind.status => new["status"] = old["status"].clone(),
            _ => {}
        }
        if kind.kind == "Pod" && sub.is_none() {
            // A pod's node is set by binding only.
            let (a, b) = (&old["spec"]["nodeName"], &new["spec"]["nodeName"]);
            if a != b && !(a.is_null() && b.is_null()) {
                return Err(err(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid",
                    format!("Pod \"{name}\" is invalid: spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`, `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing tolerations), `spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"),
                ));
            }
        }
        let same = {
            let mut a = old.clone();
            let mut b = new.clone();
            a["metadata"]["resourceVersion"] = Value::Null;
            b["metadata"]["resourceVersion"] = Value::Null;
            a == b
        };
        if same {
            return Ok(old);
        }
        let rv = s.next_rv();
        new["metadata"]["resourceVersion"] = json!(rv.to_string());
        let finalizing = new["metadata"]["deletionTimestamp"].is_string()
            && new["metadata"]["finalizers"]
                .as_array()
                .is_none_or(|f| f.is_empty());
        let graceful = kind.kind == "Pod"
            && new["metadata"]["deletionGracePeriodSeconds"]
                .as_i64()
                .unwrap_or(0)
                > 0;
        if finalizing && !graceful {
            s.objects.remove(&key);
            s.record(k, Some(old), None, rv);
        } else {
            s.objects.insert(key, new.clone());
            s.record(k, Some(old), Some(new.clone()), rv);
        }
        drop(s);
        self.changed.send_replace(rv);
        Ok(new)
    }

    /// Delete as kube-apiserver does: an object with finalizers gets a
    /// deletion timestamp and stays until they are gone; a pod on a node
    /// with a grace period waits for its kubelet (which deletes it again
    /// with no grace); anything else goes at once.
    fn delete(
        &self,
        k: usize,
        ns: &str,
        name: &str,
        grace: Option<i64>,
    ) -> Result<Value, ApiError> {
        let kind = &KINDS[k];
        let mut s = self.store.lock().unwrap_or_else(|p| p.into_inner());
        let (key, old) = s.existing(k, ns, name)?;
        let bound = kind.kind == "Pod"
            && old["spec"]["nodeName"]
                .as_str()
                .is_some_and(|n| !n.is_empty())
            && !matches!(
                old["status"]["phase"].as_str(),
                Some("Succeeded" | "Failed")
            );
        let grace = grace
            .or_else(|| old["spec"]["terminationGracePeriodSeconds"].as_i64())
            .unwrap_or(30);
        let finalizers = old["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        let rv = s.next_rv();
        let mut new = old.clone();
        new["metadata"]["resourceVersion"] = json!(rv.to_string());
        let keep = finalizers || (bound && grace > 0);
        if keep {
            let g = if bound { grace } else { 0 };
            if !old["metadata"]["deletionTimestamp"].is_string() {
                // As kube-apiserver: the time the object goes, grace included.
                let at = chrono::Utc::now() + chrono::Duration::seconds(g.max(0));
                new["metadata"]["deletionTimestamp"] =
                    json!(at.format("%Y-%m-%dT%H:%M:%SZ").to_string());
            }
            let had = old["metadata"]["deletionGracePeriodSeconds"].as_i64();
            let g = had.map_or(g, |h| h.min(g));
            new["metadata"]["deletionGracePeriodSeconds"] = json!(g);
            if !finalizers && g == 0 {
                s.objects.remove(&key);
                s.record(k, Some(old), None, rv);
            } else {
                s.objects.insert(key, new.clone());
                s.record(k, Some(old), Some(new.clone()), rv);
            }
        } else {
            s.objects.remove(&key);
            s.record(k, Some(old), None, rv);
        }
        // Deleting a namespace deletes what is in it.
        if kind.kind == "Namespace" && !keep {
            let inside: Vec<_> = s
                .objects
                .keys()
                .filter(|(kk, n, _)| KINDS[*kk].namespaced && n == name)
                .cloned()
                .collect();
            for key in inside {
                if let Some(o) = s.objects.remove(&key) {
                    let rv = s.next_rv();
                    s.record(key.0, Some(o), None, rv);
                }
            }
        }
        let rv = s.rv;
        drop(s);
        self.changed.send_replace(rv);
        Ok(new)
    }
}

fn conflict(kind: &Kind, name: &str) -> ApiError {
    err(
        StatusCode::CONFLICT,
        "Conflict",
        format!(
            "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
            kind.plural
        ),
    )
}

fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 253
        && n.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && n.as_bytes()[0].is_ascii_alphanumeric()
        && n.as_bytes()[n.len() - 1].is_ascii_alphanumeric()
}

fn parse(body: &[u8]) -> Result<Value, ApiError> {
    if let Ok(v) = serde_json::from_slice(body) {
        return Ok(v);
    }
    // kubectl may send YAML (apply-patch); accept it as kube-apiserver does.
    serde_yaml::from_slice(body).map_err(|e| {
        err(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            format!("the body of the request could not be decoded: {e}"),
        )
    })
}

fn set_condition(o: &mut Value, ty: &str, status: &str) {
    let now = now_rfc3339();
    if !o["status"]["conditions"].is_array() {
        o["status"]["conditions"] = json!([]);
    }
    if let Some(cs) = o["status"]["conditions"].as_array_mut() {
        cs.retain(|c| c["type"] != ty);
        cs.push(json!({"type": ty, "status": status, "lastTransitionTime": now}));
    }
}

fn target(segs: &[&str], minor: u32) -> Option<Target> {
    let (group, version, rest) = match segs {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    let find = |plural: &str| {
        KINDS.iter().position(|k| {
            k.group == group && k.version == version && k.plural == plural && k.served(minor)
        })
    };
    let s = |x: &&str| x.to_string();
    match rest {
        ["namespaces", ns, plural, tail @ ..]
            if find(plural).is_some_and(|k| KINDS[k].namespaced) =>
        {
            let kind = find(plural)?;
            match tail {
                [] => Some(Target {
                    kind,
                    ns: Some(s(ns)),
                    name: None,
                    sub: None,
                }),
                [name] => Some(Target {
                    kind,
                    ns: Some(s(ns)),
                    name: Some(s(name)),
                    sub: None,
                }),
                [name, sub] => Some(Target {
                    kind,
                    ns: Some(s(ns)),
                    name: Some(s(name)),
                    sub: Some(s(sub)),
                }),
                _ => None,
            }
        }
        [plural, tail @ ..] => {
            let kind = find(plural)?;
            let namespaced = KINDS[kind].namespaced;
            match tail {
                [] => Some(Target {
                    kind,
                    ns: None,
                    name: None,
                    sub: None,
                }),
                [name] if !namespaced => Some(Target {
                    kind,
                    ns: None,
                    name: Some(s(name)),
                    sub: None,
                }),
                [name, sub] if !namespaced => Some(Target {
                    kind,
                    ns: None,
                    name: Some(s(name)),
                    sub: Some(s(sub)),
                }),
                _ => None,
            }
        }
        _ => None,
    }
}

fn group_of(g: &str, minor: u32) -> Value {
    // Newest first, as the first listed is the preferred one.
    let versions: Vec<Value> = KINDS
        .iter()
        .rev()
        .filter(|k| k.group == g && k.served(minor))
        .map(|k| json!({"groupVersion": format!("{g}/{}", k.version), "version": k.version}))
        .fold(Vec::new(), |mut v, x| {
            if !v.contains(&x) {
                v.push(x);
            }
            v
        });
    json!({"kind": "APIGroup", "apiVersion": "v1", "name": g, "versions": versions,
           "preferredVersion": versions[0]})
}

fn group_list(minor: u32) -> Value {
    let mut groups: Vec<&str> = KINDS
        .iter()
        .filter(|k| k.served(minor))
        .map(|k| k.group)
        .filter(|g| !g.is_empty())
        .collect();
    groups.dedup();
    let groups: Vec<Value> = groups.iter().map(|g| group_of(g, minor)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

fn resource_list(g: &str, v: &str, minor: u32) -> Value {
    let mut res = Vec::new();
    for k in KINDS
        .iter()
        .filter(|k| k.group == g && k.version == v && k.served(minor))
    {
        res.push(
            json!({"name": k.plural, "singularName": k.kind.to_lowercase(),
                        "namespaced": k.namespaced, "kind": k.kind, "shortNames": k.short,
                        "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]}),
        );
        if k.status {
            res.push(
                json!({"name": format!("{}/status", k.plural), "singularName": "",
                            "namespaced": k.namespaced, "kind": k.kind,
                            "verbs": ["get", "patch", "update"]}),
            );
        }
        if k.binding {
            res.push(
                json!({"name": format!("{}/binding", k.plural), "singularName": "",
                            "namespaced": true, "kind": "Binding", "verbs": ["create"]}),
            );
        }
    }
    let gv = if g.is_empty() {
        v.to_string()
    } else {
        format!("{g}/{v}")
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": res})
}

/// RFC 7386 merge patch (also used for strategic merge patches: lists are
/// replaced whole, which is what the clients here send).
pub fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            if let Value::Object(t) = target {
                for (k, v) in p {
                    if k.starts_with("$") {
                        continue;
                    }
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
        }
        other => *target = other.clone(),
    }
}

/// RFC 6902 JSON patch.
fn json_patch(target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    let bad = |m: String| err(StatusCode::UNPROCESSABLE_ENTITY, "Invalid", m);
    let ops = patch
        .as_array()
        .ok_or_else(|| bad("a JSON patch is an array of operations".into()))?;
    let mut work = target.clone();
    for op in ops {
        let path = op["path"]
            .as_str()
            .ok_or_else(|| bad("an operation has no path".into()))?;
        match op["op"].as_str().unwrap_or("") {
            "add" => pointer_set(&mut work, path, op["value"].clone(), true).map_err(bad)?,
            "replace" => {
                if work.pointer(path).is_none() {
                    return Err(bad(format!(
                        "replace operation does not apply: doc is missing key: {path}"
                    )));
                }
                pointer_set(&mut work, path, op["value"].clone(), false).map_err(bad)?
            }
            "remove" => {
                pointer_remove(&mut work, path).ok_or_else(|| {
                    bad(format!(
                        "remove operation does not apply: doc is missing path: {path}"
                    ))
                })?;
            }
            "test" => {
                if work.pointer(path) != Some(&op["value"]) {
                    return Err(bad(format!("testing value {path} failed")));
                }
            }
            "move" | "copy" => {
                let from = op["from"].as_str().ok_or_else(|| bad("no from".into()))?;
                let v = work
                    .pointer(from)
                    .cloned()
                    .ok_or_else(|| bad(format!("missing path {from}")))?;
                if op["op"] == "move" {
                    pointer_remove(&mut work, from);
                }
                pointer_set(&mut work, path, v, true).map_err(bad)?;
            }
            other => return Err(bad(format!("unknown operation {other:?}"))),
        }
    }
    *target = work;
    Ok(())
}

fn unescape_pointer(s: &str) -> String {
    s.replace("~1", "/").replace("~0", "~")
}

fn pointer_set(doc: &mut Value, path: &str, v: Value, insert: bool) -> Result<(), String> {
    let (parent, last) = path.rsplit_once('/').ok_or(format!("bad path {path}"))?;
    let last = unescape_pointer(last);
    let p = doc.pointer_mut(parent).ok_or(format!(
        "add operation does not apply: doc is missing path: {parent}"
    ))?;
    match p {
        Value::Object(m) => {
            m.insert(last, v);
            Ok(())
        }
        Value::Array(a) => {
            if last == "-" {
                a.push(v);
                return Ok(());
            }
            let i: usize = last.parse().map_err(|_| format!("bad index {last}"))?;
            if insert && i <= a.len() {
                a.insert(i, v);
                Ok(())
            } else if !insert && i < a.len() {
                a[i] = v;
                Ok(())
            } else {
                Err(format!("index {i} out of range"))
            }
        }
        _ => Err(format!("{parent} is not a container")),
    }
}

fn pointer_remove(doc: &mut Value, path: &str) -> Option<Value> {
    let (parent, last) = path.rsplit_once('/')?;
    let last = unescape_pointer(last);
    match doc.pointer_mut(parent)? {
        Value::Object(m) => m.remove(&last),
        Value::Array(a) => {
            let i: usize = last.parse().ok()?;
            (i < a.len()).then(|| a.remove(i))
        }
        _ => None,
    }
}

/// A list's `labelSelector` and `fieldSelector`.
#[derive(Clone, Default)]
struct Selectors {
    labels: Vec<LabelReq>,
    fields: Vec<(String, bool, String)>,
}

#[derive(Clone)]
enum LabelReq {
    Eq(String, String),
    Ne(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    Absent(String),
}

impl Selectors {
    fn parse(q: &BTreeMap<String, String>) -> Result<Selectors, ApiError> {
        let bad = |m: String| err(StatusCode::BAD_REQUEST, "BadRequest", m);
        let mut s = Selectors::default();
        for term in
            slurm_common::conf::split_top_commas(q.get("labelSelector").map_or("", String::as_str))
        {
            let t = term.trim();
            let set = |rest: &str| -> Vec<String> {
                rest.trim()
                    .trim_start_matches('(')
                    .trim_end_matches(')')
                    .split(',')
                    .map(|x| x.trim().to_string())
                    .collect()
            };
            let req = if let Some(k) = t.strip_prefix('!') {
                LabelReq::Absent(k.trim().to_string())
            } else if let Some((k, v)) = t.split_once("!=") {
                LabelReq::Ne(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = t.split_once("==") {
                LabelReq::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = t.split_once('=') {
                LabelReq::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = t.split_once(" notin ") {
                LabelReq::NotIn(k.trim().into(), set(v))
            } else if let Some((k, v)) = t.split_once(" in ") {
                LabelReq::In(k.trim().into(), set(v))
            } else if !t.contains(' ') && !t.is_empty() {
                LabelReq::Exists(t.to_string())
            } else {
                return Err(bad(format!("unable to parse requirement: {t:?}")));
            };
            s.labels.push(req);
        }
        for term in q
            .get("fieldSelector")
            .map_or("", String::as_str)
            .split(',')
            .filter(|t| !t.trim().is_empty())
        {
            let (k, eq, v) = if let Some((k, v)) = term.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = term.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = term.split_once('=') {
                (k, true, v)
            } else {
                return Err(bad(format!(
                    "invalid selector: '{term}'; can't understand '{term}'"
                )));
            };
            s.fields
                .push((k.trim().to_string(), eq, v.trim().to_string()));
        }
        Ok(s)
    }

    fn matches(&self, o: &Value) -> bool {
        let labels = &o["metadata"]["labels"];
        let label = |k: &str| labels.get(k).and_then(Value::as_str);
        let labels_ok = self.labels.iter().all(|r| match r {
            LabelReq::Eq(k, v) => label(k) == Some(v),
            LabelReq::Ne(k, v) => label(k) != Some(v),
            LabelReq::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelReq::NotIn(k, vs) => label(k).is_none_or(|l| vs.iter().all(|v| v != l)),
            LabelReq::Exists(k) => label(k).is_some(),
            LabelReq::Absent(k) => label(k).is_none(),
        });
        labels_ok
            && self.fields.iter().all(|(path, eq, want)| {
                let mut v = o;
                for p in path.split('.') {
                    v = &v[p];
                }
                let got = match v {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    other => other.to_string(),
                };
                (got == *want) == *eq
            })
    }
}

/// The kubelets of some nodes, played in the test: a pod bound to one of
/// them goes Running at once and Succeeded after its
/// `fake-kubelet/run-seconds` annotation (never without it); a pod being
/// deleted there is removed (its containers stopped). Stopped when dropped.
///
/// With a cgroup root ([`FakeKubelet::with_cgroups`]) it makes each running
/// pod's cgroup as a kubelet with the cgroupfs driver does, in the real
/// `cpuset` hierarchy: `ROOT/kubepods/besteffort/pod<uid>/<container>`,
/// each level starting with its parent's CPUs, and runs one process
/// (`sleep`) in the container; they go when the pod ends.
pub struct FakeKubelet {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// A running pod's container process and cgroup.
struct Container {
    child: std::process::Child,
    /// The pod's directory in each hierarchy it was made in.
    pod_dirs: Vec<std::path::PathBuf>,
}

/// The top of the cpuset hierarchy and whether it is cgroup v2.
pub fn cpuset_top() -> Option<(std::path::PathBuf, bool)> {
    let v1 = std::path::Path::new("/sys/fs/cgroup/cpuset");
    if v1.join("cpuset.cpus").is_file() {
        return Some((v1.to_path_buf(), false));
    }
    let v2 = std::path::Path::new("/sys/fs/cgroup");
    let ctl = std::fs::read_to_string(v2.join("cgroup.controllers")).ok()?;
    ctl.split_whitespace()
        .any(|c| c == "cpuset")
        .then(|| (v2.to_path_buf(), true))
}

/// Make `dir` (and its parents below `top`) as a kubelet would: on v1 each
/// new level takes its parent's CPUs and memory nodes; on v2 the parent
/// hands the cpuset controller down.
fn make_cgroup(top: &std::path::Path, v2: bool, dir: &std::path::Path) -> std::io::Result<()> {
    let rel = dir.strip_prefix(top).map_err(std::io::Error::other)?;
    let mut cur = top.to_path_buf();
    for part in rel.components() {
        let parent = cur.clone();
        cur.push(part);
        if v2 {
            let _ = std::fs::write(parent.join("cgroup.subtree_control"), "+cpuset");
        }
        if !cur.is_dir() {
            std::fs::create_dir(&cur)?;
            if !v2 {
                for f in ["cpuset.mems", "cpuset.cpus"] {
                    let v = std::fs::read_to_string(parent.join(f))?;
                    std::fs::write(cur.join(f), v.trim())?;
                }
            }
        }
    }
    Ok(())
}

/// Remove the tree at `dir`, deepest first (its processes are gone).
fn remove_cgroup(dir: &std::path::Path) {
    let mut all = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < all.len() {
        if let Ok(rd) = std::fs::read_dir(&all[i]) {
            for e in rd.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    all.push(e.path());
                }
            }
        }
        i += 1;
    }
    for d in all.iter().rev() {
        for _ in 0..50 {
            if std::fs::remove_dir(d).is_ok() || !d.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl FakeKubelet {
    pub fn start(api: &FakeApiServer, nodes: Vec<String>) -> FakeKubelet {
        FakeKubelet::with_cgroups(api, nodes, None)
    }

    /// [`FakeKubelet::start`], making pods' cgroups under `root` (a
    /// directory name below the top of the cpuset hierarchy, as a kubelet's
    /// `--cgroup-root`).
    pub fn with_cgroups(
        api: &FakeApiServer,
        nodes: Vec<String>,
        root: Option<String>,
    ) -> FakeKubelet {
        let shared = api.shared();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::spawn(move || {
            let pods = KINDS.iter().position(|k| k.plural == "pods").unwrap_or(2);
            let mut started: BTreeMap<String, std::time::Instant> = BTreeMap::new();
            let mut containers: BTreeMap<String, Container> = BTreeMap::new();
            let cg = root
                .as_ref()
                .and_then(|r| cpuset_top().map(|(t, v2)| (t.join(r), t, v2)));
            let stop_container = |containers: &mut BTreeMap<String, Container>, uid: &str| {
                if let Some(mut c) = containers.remove(uid) {
                    let _ = c.child.kill();
                    let _ = c.child.wait();
                    for d in &c.pod_dirs {
                        remove_cgroup(d);
                    }
                }
            };
            while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
                let mine: Vec<Value> = {
                    let s = shared.store.lock().unwrap_or_else(|p| p.into_inner());
                    s.objects
                        .iter()
                        .filter(|((k, _, _), o)| {
                            *k == pods
                                && o["spec"]["nodeName"]
                                    .as_str()
                                    .is_some_and(|n| nodes.iter().any(|x| x == n))
                        })
                        .map(|(_, o)| o.clone())
                        .collect()
                };
                for p in mine {
                    let ns = p["metadata"]["namespace"]
                        .as_str()
                        .unwrap_or("")
                        .to_string();
                    let name = p["metadata"]["name"].as_str().unwrap_or("").to_string();
                    let uid = p["metadata"]["uid"].as_str().unwrap_or("").to_string();
                    if p["metadata"]["deletionTimestamp"].is_string() {
                        stop_container(&mut containers, &uid);
                        let _ = shared.update(pods, &ns, &name, Some("binding"), |o| {
                            o["metadata"]["deletionGracePeriodSeconds"] = json!(0);
                            Ok(())
                        });
                        let _ = shared.delete(pods, &ns, &name, Some(0));
                        started.remove(&uid);
                        continue;
                    }
                    match p["status"]["phase"].as_str() {
                        Some("Pending") | None => {
                            if let Some((base, top, v2)) = &cg {
                                let rel = std::path::Path::new("kubepods/besteffort")
                                    .join(format!("pod{uid}"));
                                let pod_dir = base.join(&rel);
                                let ctr = pod_dir.join("c0");
                                // On v1 also where the kubelet counts CPU time
                                // and memory, as a real one does.
                                let mut others = Vec::new();
                                if !*v2 {
                                    let root = base.strip_prefix(top).unwrap_or(base);
                                    for h in ["memory", "cpuacct"] {
                                        let t = top.with_file_name(h);
                                        if t.join("tasks").is_file() {
                                            others.push((t.clone(), t.join(root).join(&rel)));
                                        }
                                    }
                                }
                                let made = make_cgroup(top, *v2, &ctr).and_then(|_| {
                                    for (t, d) in &others {
                                        make_cgroup(t, true, &d.join("c0"))?;
                                    }
                                    let child =
                                        std::process::Command::new("sleep").arg("3600").spawn()?;
                                    let procs = if *v2 { "cgroup.procs" } else { "tasks" };
                                    std::fs::write(ctr.join(procs), child.id().to_string())?;
                                    for (_, d) in &others {
                                        std::fs::write(d.join("c0/tasks"), child.id().to_string())?;
                                    }
                                    Ok(child)
                                });
                                let mut pod_dirs = vec![pod_dir];
                                pod_dirs.extend(others.into_iter().map(|(_, d)| d));
                                match made {
                                    Ok(child) => {
                                        containers
                                            .insert(uid.clone(), Container { child, pod_dirs });
                                    }
                                    Err(e) => eprintln!("fake kubelet: pod {name}: cgroup: {e}"),
                                }
                            }
                            let _ = shared.update(pods, &ns, &name, Some("status"), |o| {
                                o["status"]["phase"] = json!("Running");
                                o["status"]["startTime"] = json!(now_rfc3339());
                                set_condition(o, "Ready", "True");
                                Ok(())
                            });
                            started.insert(uid, std::time::Instant::now());
                        }
                        Some("Running") => {
                            let secs = p["metadata"]["annotations"]["fake-kubelet/run-seconds"]
                                .as_str()
                                .and_then(|s| s.parse::<f64>().ok());
                            let at = *started
                                .entry(uid.clone())
                                .or_insert_with(std::time::Instant::now);
                            if secs.is_some_and(|s| at.elapsed().as_secs_f64() >= s) {
                                stop_container(&mut containers, &uid);
                                let _ = shared.update(pods, &ns, &name, Some("status"), |o| {
                                    o["status"]["phase"] = json!("Succeeded");
                                    set_condition(o, "Ready", "False");
                                    Ok(())
                                });
                            }
                        }
                        _ => {}
                    }
                }
                // Pods gone from the API (deleted at once) stop too.
                let live: Vec<String> = {
                    let s = shared.store.lock().unwrap_or_else(|p| p.into_inner());
                    s.objects
                        .iter()
                        .filter(|((k, _, _), _)| *k == pods)
                        .filter_map(|(_, o)| o["metadata"]["uid"].as_str().map(str::to_string))
                        .collect()
                };
                let gone: Vec<String> = containers
                    .keys()
                    .filter(|u| !live.contains(u))
                    .cloned()
                    .collect();
                for u in gone {
                    stop_container(&mut containers, &u);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let all: Vec<String> = containers.keys().cloned().collect();
            for u in all {
                stop_container(&mut containers, &u);
            }
            if let Some((base, top, v2)) = &cg {
                remove_cgroup(base);
                if !*v2 {
                    let root = base.strip_prefix(top).unwrap_or(base);
                    for h in ["memory", "cpuacct"] {
                        remove_cgroup(&top.with_file_name(h).join(root));
                    }
                }
            }
        });
        FakeKubelet {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for FakeKubelet {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_patch_removes_nulls_and_replaces_lists() {
        let mut o = json!({"a": 1, "b": {"c": 2, "d": [1, 2]}});
        merge_patch(&mut o, &json!({"a": null, "b": {"d": [3], "e": "x"}}));
        assert_eq!(o, json!({"b": {"c": 2, "d": [3], "e": "x"}}));
    }

    #[test]
    fn json_patch_applies_all_or_nothing() {
        let mut o = json!({"metadata": {"finalizers": ["a", "b"]}});
        json_patch(
            &mut o,
            &json!([{"op": "remove", "path": "/metadata/finalizers/0"}]),
        )
        .ok();
        assert_eq!(o, json!({"metadata": {"finalizers": ["b"]}}));
        let before = o.clone();
        let r = json_patch(
            &mut o,
            &json!([{"op": "add", "path": "/x", "value": 1},
                    {"op": "test", "path": "/x", "value": 2}]),
        );
        assert!(r.is_err());
        assert_eq!(o, before);
    }

    #[test]
    fn selectors_follow_kubernetes_syntax() {
        let mut q = BTreeMap::new();
        q.insert("labelSelector".into(), "app in (a,b),!gone,tier!=db".into());
        q.insert(
            "fieldSelector".into(),
            "spec.nodeName=n1,status.phase!=Failed".into(),
        );
        let s = Selectors::parse(&q).unwrap_or_default();
        let pod = |app: &str, node: &str, phase: &str| {
            json!({"metadata": {"labels": {"app": app, "tier": "web"}},
                   "spec": {"nodeName": node}, "status": {"phase": phase}})
        };
        assert!(s.matches(&pod("a", "n1", "Running")));
        assert!(!s.matches(&pod("c", "n1", "Running")));
        assert!(!s.matches(&pod("a", "n2", "Running")));
        assert!(!s.matches(&pod("a", "n1", "Failed")));
    }
}
