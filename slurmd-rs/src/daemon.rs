//! Start-up, the RPC listener and request dispatch.
//!
//! One TCP listener on the node's `NodeAddr:Port`; each connection carries one
//! request frame and gets one response frame. Every request's credential is
//! verified first; job requests (`LaunchBatch`, `SignalJob`, `TerminateJob`)
//! are taken only from root or `SlurmUser`.

use crate::auxconf::AuxConfError;
use crate::cgroup::{self, conf::CgroupConf};
use crate::ctld_link::{self, Outbox};
use crate::gres::{GresConf, NodeGres};
use crate::hw;
use crate::jobs::{self, JobTable};
use crate::settings::Settings;
use crate::sysinfo::Hardware;
use slurm_common::auth::{self, AuthError, Key};
use slurm_common::conf::SlurmConf;
use slurm_common::stepio::{IoFrame, IoKind};
use slurm_common::{grpc, net};
use slurm_proto::grpc::pb::{self, node_daemon_server::NodeDaemonServer};
use slurm_proto::grpc::{node_method, node_reply, NodeCall};
use slurm_proto::{JobId, Request, RequestBody, Response, RpcError, SlurmError, TaskLaunch};
use std::future::Future;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tracing::{debug, error, info, warn};

/// Connections served at once; more wait in the kernel's backlog.
const MAX_CONNECTIONS: usize = 128;
/// How long a peer may take to finish its TLS handshake, and to make its
/// first authenticated call.
const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a job ending waits at most, once its steps here have ended,
/// for their sruns to read what was left and go before its script is
/// signalled.
const SRUN_GRACE: Duration = Duration::from_secs(5);
/// A connection whose last authenticated call is older than this is closed
/// (the controller's kept channel connects again).
const GRPC_IDLE: Duration = Duration::from_secs(300);

/// Everything the daemon's tasks share.
pub struct Ctx {
    /// slurm.conf as last read (see [`Ctx::reconfigure`]).
    conf: std::sync::RwLock<Arc<SlurmConf>>,
    /// Absolute slurm.conf path, as jobs see it in `SLURM_CONF`.
    pub conf_path_str: String,
    pub node: String,
    pub key: Key,
    /// Credentials accepted and not yet expired (each is good once).
    pub seen: slurm_common::auth::ReplayCache,
    /// Largest request taken (`CommunicationParameters=max_message_size`).
    pub max_request: usize,
    /// Memory all requests being read may hold together (four launches
    /// of the largest size).
    pub budget: net::Budget,
    /// This host's name, put in the credentials we sign.
    pub host: String,
    pub spool: PathBuf,
    /// This node's job state files (see [`jobs`]).
    pub state_dir: PathBuf,
    /// Each controller's name and `host:port`, primary first.
    pub ctlds: Vec<(String, String)>,
    /// The kept gRPC channel to each controller (made at its first report).
    pub ctld_channels: Vec<std::sync::OnceLock<grpc::Channel>>,
    /// The controller reports go to: the one that took the registration.
    pub ctld_current: std::sync::atomic::AtomicUsize,
    pub start_time: i64,
    /// uid of `SlurmUser`, allowed to send job requests besides root.
    pub slurm_uid: Option<u32>,
    /// Hardware reported at registration.
    pub hardware: Hardware,
    /// Generic resources (gres.conf and auto-detection).
    pub gres: NodeGres,
    /// Job cgroups (`proctrack/cgroup`, `task/cgroup`); `None` without.
    pub cgroups: Option<cgroup::Manager>,
    /// A kubelet runs here too (`--kubelet`): pods placed by slurm-bridge.
    pub kubelet: Option<crate::kubelet::Kubelet>,
    /// `JobAcctGatherType` gathers usage (`jobacct_gather/cgroup` or `/linux`).
    pub acct_gather: bool,
    pub jobs: JobTable,
    pub outbox: Outbox,
    pub registered: AtomicBool,
    /// A mock node's boot time once it has "rebooted" (`scontrol reboot`);
    /// 0: the machine's.
    pub mock_boot: std::sync::atomic::AtomicI64,
    /// `TLSType` on: this node's certificate, to serve and to call with.
    pub tls: Option<slurm_common::tls::Tls>,
    /// Spent step credentials (see [`crate::ledger`]).
    pub ledger: crate::ledger::Ledger,
    /// `-v` given this many times (raises `SlurmdDebug`).
    pub verbose: u32,
    /// The debug level `scontrol setdebug` set (Slurm's number; `u32::MAX`:
    /// none, slurm.conf's `SlurmdDebug` and `-v` stand).
    pub debug_set: std::sync::atomic::AtomicU32,
    /// When the controller last asked or answered (0: never).
    pub last_ctld_msg: std::sync::atomic::AtomicI64,
}

impl Ctx {
    /// slurm.conf as in force now.
    pub fn conf(&self) -> Arc<SlurmConf> {
        match self.conf.read() {
            Ok(c) => c.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// slurm.conf read again from this daemon's file (`scontrol
    /// reconfigure`, SIGHUP), its warnings logged; for [`Ctx::apply_conf`]
    /// (of every node a process serves: they share the file, so it is
    /// read once). Blocking: call it off the runtime.
    pub fn read_conf(&self) -> Result<Arc<SlurmConf>, String> {
        let new = SlurmConf::load(Path::new(&self.conf_path_str)).map_err(|e| e.to_string())?;
        for w in &new.warnings {
            warn!("{w}");
        }
        Ok(Arc::new(new))
    }

    /// Apply slurm.conf as read again: what a running daemon can (the
    /// Prolog and Epilog, and every setting read when a job or step
    /// starts). What this daemon fixed at its start (its node's line,
    /// ports, the controllers, TLS, the cgroup and tracking plugins) is
    /// kept, with a warning that a restart applies it. Whether anything
    /// changed.
    pub fn apply_conf(&self, new: &Arc<SlurmConf>) -> bool {
        let old = self.conf();
        if Arc::ptr_eq(&old, new) || (new.entries == old.entries && new.nodes == old.nodes) {
            return false;
        }
        let node_line = |c: &SlurmConf| c.nodes.iter().find(|n| n.name == self.node).cloned();
        let fixed = [
            (
                "this node's NodeName line",
                node_line(&old) != node_line(new),
            ),
            ("ClusterName", old.cluster_name != new.cluster_name),
            ("SlurmdPort", old.slurmd_port != new.slurmd_port),
            (
                "the SlurmctldHost lines",
                old.controllers() != new.controllers(),
            ),
            (
                "TLSType or TLSParameters",
                old.get("TLSType") != new.get("TLSType")
                    || old.get("TLSParameters") != new.get("TLSParameters"),
            ),
            (
                "ProctrackType or TaskPlugin",
                cgroup_plugins(&old) != cgroup_plugins(new),
            ),
            (
                "SlurmdSpoolDir",
                old.get("SlurmdSpoolDir") != new.get("SlurmdSpoolDir"),
            ),
        ];
        for (what, _) in fixed.iter().filter(|(_, changed)| *changed) {
            warn!("reconfigure: {what} changed: restart slurmd to apply it");
        }
        if old.get("SlurmdDebug") != new.get("SlurmdDebug") {
            let level = slurm_common::logging::level(new.get("SlurmdDebug"), self.verbose);
            if slurm_common::logging::set_level(level) {
                info!("reconfigure: logging at {level} now (SlurmdDebug)");
                self.debug_set.store(u32::MAX, Ordering::Relaxed);
            }
        }
        match self.conf.write() {
            Ok(mut c) => *c = new.clone(),
            Err(p) => *p.into_inner() = new.clone(),
        }
        true
    }

    /// The caller showed the controller's certificate (TLS on).
    pub fn sent_by_controller(&self, who: &slurm_common::tls::Peer) -> bool {
        self.tls.as_ref().is_some_and(|t| {
            t.is_controller(
                who,
                self.conf().slurmctld_hosts.iter().map(|h| h.name.as_str()),
            )
        })
    }

    /// Jobs this daemon runs or has not yet reported clean, ascending.
    pub fn running_jobs(&self) -> Vec<JobId> {
        let mut ids = self.jobs.ids();
        ids.extend(self.outbox.pending_jobs());
        ids.extend(crate::mock::ids(&self.node));
        // Pods pinned for placeholder jobs: the controller ends here those
        // that ended while the daemon was away.
        if let Some(k) = &self.kubelet {
            ids.extend(k.jobs());
        }
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Key(#[from] AuthError),
    #[error("cannot create spool directory {path}: {source}")]
    Spool {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("cannot write pid file {path}: {source}")]
    PidFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    AuxConf(#[from] AuxConfError),
    #[error("task/cgroup cannot confine jobs: {0}")]
    Cgroup(cgroup::CgroupError),
    #[error(transparent)]
    Tls(#[from] slurm_common::tls::TlsError),
}

/// Whether slurm.conf asks for cgroups: (track processes, constrain them).
pub fn cgroup_plugins(conf: &SlurmConf) -> (bool, bool) {
    let task = conf
        .task_plugin
        .iter()
        .any(|t| t.trim().eq_ignore_ascii_case("task/cgroup"));
    let track = task
        || conf
            .proctrack_type
            .trim()
            .eq_ignore_ascii_case("proctrack/cgroup");
    (track, task)
}

/// The hardware to report: the configured one with
/// `SlurmdParameters=config_overrides`, else what detection finds (and a
/// warning when that is less than the node's slurm.conf line).
fn node_hardware(s: &Settings) -> Hardware {
    if let (Some(n), true) = (s.node_conf(), s.config_overrides()) {
        return Hardware {
            cpus: n.cpus,
            boards: n.boards,
            sockets: n.sockets,
            cores_per_socket: n.cores_per_socket,
            threads_per_core: n.threads_per_core,
            real_memory: n.real_memory,
            tmp_disk: n.tmp_disk,
        };
    }
    let found = hw::host().hardware(hw::tmp_disk(&s.conf.tmp_fs));
    if let Some(n) = s.node_conf() {
        if let Some(why) = hw::low_hardware(&found, n) {
            warn!(
                "node {} has less hardware than its slurm.conf line: {why}",
                s.node
            );
        }
    }
    found
}

/// The file in the spool that names the node's cgroup top directory (a
/// restarted daemon takes the same one back).
fn cgroup_name_file(s: &Settings) -> PathBuf {
    s.spool.join(format!("cgroup_top.{}", s.node))
}

/// Set up job cgroups as slurm.conf and cgroup.conf ask.
fn cgroup_manager(
    s: &Settings,
    conf_dir: &Path,
    gres: &NodeGres,
) -> Result<Option<cgroup::Manager>, DaemonError> {
    let (track, constrain) = cgroup_plugins(&s.conf);
    if !track || crate::mock::mode().is_some() {
        return Ok(None);
    }
    let conf = CgroupConf::load(conf_dir)?;
    for w in &conf.warnings {
        warn!("{w}");
    }
    let host = hw::host();
    let wants_limits = constrain
        && (conf.constrain_cores
            || conf.constrain_ram_space
            || conf.constrain_swap_space
            || conf.constrain_devices);
    let node_mem_mib = s
        .node_conf()
        .map(|n| n.real_memory)
        .filter(|m| *m > 1)
        .unwrap_or(host.real_memory);
    let opts = cgroup::ManagerOpts {
        conf,
        node: &s.node,
        constrain,
        cpu_order: host.topology.cpu_ids(),
        node_mem_mib,
        devices: gres.devices.clone(),
        prefer: std::fs::read_to_string(cgroup_name_file(s))
            .ok()
            .map(|n| n.trim().to_string()),
    };
    match cgroup::Manager::new(opts) {
        Ok(Some(m)) => {
            if let Some(name) = m.top().file_name() {
                let path = cgroup_name_file(s);
                if let Err(e) = crate::ledger::write_private(&path, name.as_encoded_bytes()) {
                    warn!("cannot remember the cgroup name in {}: {e}", path.display());
                }
            }
            for n in &m.notes {
                warn!("{n}");
            }
            info!(
                "job cgroups: {:?} under {}{}",
                m.version,
                m.top().display(),
                if m.constrains() {
                    ", confined"
                } else {
                    ", tracking only"
                }
            );
            Ok(Some(m))
        }
        Ok(None) => {
            info!("CgroupPlugin=disabled: jobs are tracked by process group");
            Ok(None)
        }
        Err(e) if wants_limits => Err(DaemonError::Cgroup(e)),
        Err(e) => {
            warn!("cgroups unavailable ({e}); jobs are tracked by process group only");
            Ok(None)
        }
    }
}

/// A started daemon: listening, not yet serving.
pub struct Daemon {
    ctx: Arc<Ctx>,
    listener: TcpListener,
    pidfile: Option<PathBuf>,
}

fn make_spool(spool: &Path, state: &Path) -> Result<(), DaemonError> {
    let err = |source| DaemonError::Spool {
        path: spool.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(spool).map_err(err)?;
    // Job directories inside must be reachable by their users.
    std::fs::set_permissions(spool, std::fs::Permissions::from_mode(0o755)).map_err(err)?;
    std::fs::create_dir_all(state).map_err(err)?;
    std::fs::set_permissions(state, std::fs::Permissions::from_mode(0o700)).map_err(err)?;
    Ok(())
}

async fn bind(addr: &str, port: u16) -> Result<TcpListener, DaemonError> {
    match TcpListener::bind((addr, port)).await {
        Ok(l) => Ok(l),
        Err(e)
            if !matches!(
                e.kind(),
                std::io::ErrorKind::AddrInUse | std::io::ErrorKind::PermissionDenied
            ) =>
        {
            warn!("cannot listen on {addr}:{port} ({e}); listening on all addresses instead");
            TcpListener::bind(("0.0.0.0", port))
                .await
                .map_err(|source| DaemonError::Bind {
                    addr: format!("0.0.0.0:{port}"),
                    source,
                })
        }
        Err(source) => Err(DaemonError::Bind {
            addr: format!("{addr}:{port}"),
            source,
        }),
    }
}

impl Daemon {
    /// Load the key, prepare the spool, bind the port, write the pid file.
    pub async fn start(s: Settings) -> Result<Daemon, DaemonError> {
        let key = Key::load(&s.key_path)?;
        let tls = match slurm_common::tls::TlsSettings::from_conf(&s.conf)? {
            Some(t) => {
                for n in &t.notices {
                    info!("{n}");
                }
                Some(t.load(&slurm_common::tls::Role::Slurmd {
                    node: s.node.clone(),
                })?)
            }
            None => None,
        };
        let state_dir = jobs::state_dir(&s.spool, &s.node);
        make_spool(&s.spool, &state_dir)?;
        let (addr, port) = s.listen_addr();
        let listener = bind(&addr, port).await?;
        let hardware = node_hardware(&s);
        let conf_dir = s
            .conf_path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let gres_conf = GresConf::load(&conf_dir, &s.node)?;
        for w in &gres_conf.warnings {
            warn!("{w}");
        }
        let gres = if gres_conf.lines.is_empty() && gres_conf.autodetect.is_none() {
            NodeGres::default()
        } else {
            crate::gres::node_gres(&gres_conf, Path::new("/"), &hw::host().topology)
        };
        for n in &gres.notes {
            warn!("{n}");
        }
        if !gres.counts.is_empty() {
            info!("generic resources: {}", gres.to_gres_string());
        }
        let cgroups = cgroup_manager(&s, &conf_dir, &gres)?;
        let acct_gather = matches!(
            s.conf
                .get("JobAcctGatherType")
                .map(|t| t.trim().to_ascii_lowercase())
                .as_deref(),
            Some("jobacct_gather/cgroup" | "jobacct_gather/linux")
        );
        let slurm_uid = slurm_common::users::parse_user(&s.conf.slurm_user);
        if slurm_uid.is_none() {
            warn!(
                "SlurmUser `{}' is unknown here; only root may send job requests",
                s.conf.slurm_user
            );
        }
        let ctx = Arc::new(Ctx {
            seen: Default::default(),
            max_request: net::max_request(s.conf.get("CommunicationParameters")).unwrap_or_else(
                |e| {
                    warn!("{e}; using {} bytes", net::MAX_REQUEST);
                    net::MAX_REQUEST
                },
            ),
            budget: net::Budget::new(
                net::max_request(s.conf.get("CommunicationParameters"))
                    .unwrap_or(net::MAX_REQUEST)
                    .max(64 << 20)
                    .saturating_mul(4),
            ),
            ctlds: s.conf.controllers(),
            ctld_channels: s
                .conf
                .controllers()
                .iter()
                .map(|_| Default::default())
                .collect(),
            ctld_current: Default::default(),
            conf_path_str: s.conf_path.to_string_lossy().into_owned(),
            node: s.node.clone(),
            key,
            host: slurm_common::users::hostname(),
            // A real node keeps its undelivered job events on its own disk;
            // a mock process stands for many nodes on one machine, where
            // that would be many nodes' writes on one disk (the scale
            // bench's bottleneck, not the controller's): kept in memory.
            outbox: if crate::mock::mode().is_some() {
                Outbox::in_memory()
            } else {
                Outbox::load(s.spool.join(format!("outbox.{}.json", s.node)))
            },
            ledger: crate::ledger::Ledger::load(
                s.spool.join(format!("voided.{}.json", s.node)),
                s.conf
                    .auth_info_value("cred_expire")
                    .and_then(|v| v.parse::<i64>().ok())
                    .filter(|v| *v > 0)
                    .unwrap_or(crate::ledger::DEFAULT_CRED_EXPIRE),
            ),
            spool: s.spool.clone(),
            state_dir,
            start_time: crate::now(),
            slurm_uid,
            hardware,
            gres,
            cgroups,
            kubelet: s.kubelet.as_deref().map(crate::kubelet::Kubelet::new),
            acct_gather,
            jobs: JobTable::default(),
            registered: AtomicBool::new(false),
            mock_boot: std::sync::atomic::AtomicI64::new(0),
            tls,
            verbose: u32::from(s.verbose),
            debug_set: std::sync::atomic::AtomicU32::new(u32::MAX),
            last_ctld_msg: std::sync::atomic::AtomicI64::new(0),
            conf: std::sync::RwLock::new(Arc::new(s.conf)),
        });
        if let Some(p) = &s.pidfile {
            let write = || -> std::io::Result<()> {
                if let Some(dir) = p.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                std::fs::write(p, format!("{}\n", std::process::id()))
            };
            write().map_err(|source| DaemonError::PidFile {
                path: p.clone(),
                source,
            })?;
        }
        Ok(Daemon {
            ctx,
            listener,
            pidfile: s.pidfile,
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn ctx(&self) -> &Arc<Ctx> {
        &self.ctx
    }

    /// Serve until `shutdown` completes. Running jobs are left running.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) {
        let ctx = self.ctx;
        info!(
            node = %ctx.node,
            "slurmd version {} started on {}",
            slurm_proto::SLURM_VERSION,
            self.listener
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_default()
        );
        jobs::adopt(&ctx);
        crate::kubelet::adopt(&ctx);
        let background = [
            tokio::spawn(ctld_link::run_link(ctx.clone())),
            tokio::spawn(ctld_link::run_outbox(ctx.clone())),
            tokio::spawn(sack_task(
                auth::sack_socket_path(&ctx.conf()),
                ctx.key.clone(),
            )),
        ];
        let acceptor = ctx.tls.as_ref().and_then(|t| t.acceptor());
        let incoming = grpc::incoming(self.listener, acceptor, MAX_CONNECTIONS, IO_TIMEOUT);
        // Launches carry a batch script and its environment (4 MiB each by
        // default): room for them whatever the setting.
        let limit = ctx.max_request.max(64 << 20);
        let service = NodeDaemonServer::new(NodeService { ctx: ctx.clone() })
            .max_decoding_message_size(limit)
            .max_encoding_message_size(1 << 20);
        let routes = tonic::service::Routes::new(service);
        let life = grpc::Lifetime {
            first: IO_TIMEOUT,
            idle: GRPC_IDLE,
        };
        grpc::serve_incoming(incoming, routes, ctx.budget.clone(), life, shutdown).await;
        info!(
            "shutting down; running jobs ({:?}) keep running",
            ctx.jobs.ids()
        );
        for t in background {
            t.abort();
        }
        if let Some(m) = &ctx.cgroups {
            m.tidy();
        }
        if let Some(p) = &self.pidfile {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Serve the local credential socket when no other daemon on this host
/// does; check again now and then in case that daemon goes away.
async fn sack_task(path: PathBuf, key: Key) {
    let mut warned = false;
    loop {
        match auth::bind_sack(&path) {
            Ok(Some(listener)) => {
                info!("serving credentials on {}", path.display());
                auth::serve_sack(listener, key.clone()).await;
            }
            Ok(None) => {
                if !warned {
                    debug!(
                        "credential socket {} is served by another daemon",
                        path.display()
                    );
                    warned = true;
                }
            }
            Err(e) => {
                if !warned {
                    warn!("cannot bind the credential socket {}: {e}", path.display());
                    warned = true;
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
}

/// The node daemon's gRPC service: each call's credential is checked,
/// its message turned into the request [`checked`] acts on, and the answer
/// sent back.
struct NodeService {
    ctx: Arc<Ctx>,
}

impl NodeService {
    async fn handle<T: prost::Message>(
        &self,
        req: tonic::Request<T>,
        method: &'static str,
        into: fn(T) -> NodeCall,
    ) -> Result<tonic::Response<pb::NodeReply>, tonic::Status> {
        let ctx = &self.ctx;
        let Some(caller) = grpc::caller_of(&req) else {
            return Err(tonic::Status::internal("the connection is unknown"));
        };
        let me = slurm_common::auth::to_slurmd(&ctx.node);
        let answer = match grpc::verify_call(&req, method, &me, &ctx.key, crate::now(), &ctx.seen) {
            Err(e) => refused(&caller.addr.to_string(), e),
            Ok(cred) => match into(req.into_inner()).into_body() {
                Ok(body) => checked(ctx, Request { cred, body }, &caller.peer).await,
                Err(e) => {
                    warn!(from = %caller.addr, "malformed request: {e}");
                    refuse(SlurmError::ProtocolError, e.to_string())
                }
            },
        };
        Ok(tonic::Response::new(node_reply(answer)))
    }
}

type Answer = Result<tonic::Response<pb::NodeReply>, tonic::Status>;

#[tonic::async_trait]
impl pb::node_daemon_server::NodeDaemon for NodeService {
    async fn launch_batch(&self, r: tonic::Request<pb::BatchLaunch>) -> Answer {
        self.handle(r, node_method::LAUNCH_BATCH, |m| {
            NodeCall::LaunchBatch(Box::new(m))
        })
        .await
    }
    /// Several launches under one credential: each checked and started as
    /// a `LaunchBatch` of its own would be (a refusal of the call answers
    /// the first).
    async fn launch_batches(
        &self,
        req: tonic::Request<pb::BatchLaunchList>,
    ) -> Result<tonic::Response<pb::NodeReplies>, tonic::Status> {
        let ctx = &self.ctx;
        let Some(caller) = grpc::caller_of(&req) else {
            return Err(tonic::Status::internal("the connection is unknown"));
        };
        let me = slurm_common::auth::to_slurmd(&ctx.node);
        let method = node_method::LAUNCH_BATCHES;
        let answers = match grpc::verify_call(&req, method, &me, &ctx.key, crate::now(), &ctx.seen)
        {
            Err(e) => vec![refused(&caller.addr.to_string(), e)],
            Ok(cred) => {
                // Each launch on its own task, at once: one held up (its
                // output a FIFO nobody reads) holds up none of the others.
                let mut pending = Vec::new();
                for l in req.into_inner().launches {
                    pending.push(match slurm_proto::BatchLaunch::try_from(l) {
                        Ok(l) => {
                            let body = RequestBody::LaunchBatch(Box::new(l));
                            let req = Request {
                                cred: cred.clone(),
                                body,
                            };
                            let (c, peer) = (ctx.clone(), caller.peer.clone());
                            Ok(tokio::spawn(async move { checked(&c, req, &peer).await }))
                        }
                        Err(e) => {
                            warn!(from = %caller.addr, "malformed launch: {e}");
                            Err(refuse(SlurmError::ProtocolError, e.to_string()))
                        }
                    });
                }
                let mut answers = Vec::new();
                for p in pending {
                    answers.push(match p {
                        Ok(task) => task.await.unwrap_or_else(|e| {
                            refuse(SlurmError::InternalError, format!("the launch failed: {e}"))
                        }),
                        Err(refused) => refused,
                    });
                }
                answers
            }
        };
        Ok(tonic::Response::new(pb::NodeReplies {
            replies: answers.into_iter().map(node_reply).collect(),
        }))
    }
    async fn prologue(&self, r: tonic::Request<pb::JobPrologue>) -> Answer {
        self.handle(r, node_method::PROLOGUE, |m| {
            NodeCall::Prologue(Box::new(m))
        })
        .await
    }
    async fn signal_job(&self, r: tonic::Request<pb::SignalJobRequest>) -> Answer {
        self.handle(r, node_method::SIGNAL_JOB, NodeCall::SignalJob)
            .await
    }
    async fn notify_job(&self, r: tonic::Request<pb::JobNotifyRequest>) -> Answer {
        self.handle(r, node_method::NOTIFY_JOB, NodeCall::NotifyJob)
            .await
    }
    async fn suspend_job(&self, r: tonic::Request<pb::SuspendJobRequest>) -> Answer {
        self.handle(r, node_method::SUSPEND_JOB, NodeCall::SuspendJob)
            .await
    }
    async fn terminate_job(&self, r: tonic::Request<pb::TerminateJobRequest>) -> Answer {
        self.handle(r, node_method::TERMINATE_JOB, NodeCall::TerminateJob)
            .await
    }
    type RunTasksStream =
        tokio_stream::wrappers::ReceiverStream<Result<pb::StepOutput, tonic::Status>>;

    /// srun's step: the launch first (its credential checked as any
    /// call's), then task 0's stdin; back, the launch's answer, then the
    /// tasks' output until the last task has ended.
    async fn run_tasks(
        &self,
        req: tonic::Request<tonic::Streaming<pb::StepInput>>,
    ) -> Result<tonic::Response<Self::RunTasksStream>, tonic::Status> {
        use pb::step_input::Input;
        use pb::step_output::Output;
        let ctx = self.ctx.clone();
        let Some(caller) = grpc::caller_of(&req) else {
            return Err(tonic::Status::internal("the connection is unknown"));
        };
        let open = grpc::hold_open(&req);
        let (meta, ext, mut input) = req.into_parts();
        let first = tokio::time::timeout(IO_TIMEOUT, input.message()).await;
        let Ok(Ok(Some(pb::StepInput {
            input: Some(Input::Launch(t)),
        }))) = first
        else {
            return Err(tonic::Status::invalid_argument(
                "the first message of RunTasks is the launch",
            ));
        };
        let (tx, rx) = tokio::sync::mpsc::channel(256);
        let reply = |r: Response| pb::StepOutput {
            output: Some(Output::Launched(node_reply(r))),
        };
        let me = slurm_common::auth::to_slurmd(&ctx.node);
        let checked = grpc::verify_cred(
            &meta,
            &ext,
            node_method::RUN_TASKS,
            &prost::Message::encode_to_vec(&t),
            &me,
            &ctx.key,
            crate::now(),
            &ctx.seen,
        )
        .map_err(|e| refused(&caller.addr.to_string(), e))
        .and_then(|cred| match TaskLaunch::try_from(t) {
            Ok(t) => Ok((cred, t)),
            Err(e) => Err(refuse(SlurmError::ProtocolError, e.to_string())),
        });
        let (cred, t) = match checked {
            Ok(x) => x,
            Err(no) => {
                let _ = tx.send(Ok(reply(no))).await;
                return Ok(tonic::Response::new(
                    tokio_stream::wrappers::ReceiverStream::new(rx),
                ));
            }
        };
        let privileged = cred.uid == 0 || Some(cred.uid) == ctx.slurm_uid;
        // The srun stays attached (its request stream open) until it has
        // ended.
        let attached = crate::steps::attach(t.layout.job_id);
        // Task 0's stdin, from the rest of the stream.
        let (in_tx, in_rx) = tokio::sync::mpsc::channel(16);
        tokio::spawn(async move {
            let _attached = attached;
            while let Ok(Some(m)) = input.message().await {
                let f = match m.input {
                    Some(Input::Stdin(data)) => IoFrame {
                        kind: IoKind::Stdin,
                        task: 0,
                        data,
                    },
                    Some(Input::StdinEof(_)) => IoFrame {
                        kind: IoKind::StdinEof,
                        task: 0,
                        data: vec![],
                    },
                    _ => continue,
                };
                if in_tx.send(f).await.is_err() {
                    break;
                }
            }
        });
        tokio::spawn(async move {
            let (out_tx, mut out_rx) = tokio::sync::mpsc::channel(256);
            let io = crate::steps::StepIo {
                out: out_tx,
                input: in_rx,
                launcher: caller.addr.to_string(),
            };
            let answer = crate::steps::launch(&ctx, cred.uid, privileged, t, io).await;
            if tx.send(Ok(reply(answer))).await.is_err() {
                return;
            }
            while let Some(f) = out_rx.recv().await {
                let m = pb::StepOutput {
                    output: Some(Output::Io(grpc::task_io(f))),
                };
                if tx.send(Ok(m)).await.is_err() {
                    break;
                }
            }
            drop(open);
        });
        Ok(tonic::Response::new(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        ))
    }
    async fn signal_tasks(&self, r: tonic::Request<pb::SignalTasksRequest>) -> Answer {
        self.handle(r, node_method::SIGNAL_TASKS, NodeCall::SignalTasks)
            .await
    }
    async fn ping(&self, r: tonic::Request<pb::NodePing>) -> Answer {
        self.handle(r, node_method::PING, NodeCall::Ping).await
    }
    async fn daemon_status(&self, r: tonic::Request<pb::Empty>) -> Answer {
        self.handle(r, node_method::DAEMON_STATUS, NodeCall::DaemonStatus)
            .await
    }
    async fn list_pids(&self, r: tonic::Request<pb::ListPidsRequest>) -> Answer {
        self.handle(r, node_method::LIST_PIDS, NodeCall::ListPids)
            .await
    }
    async fn shutdown(&self, r: tonic::Request<pb::Empty>) -> Answer {
        self.handle(r, node_method::SHUTDOWN, NodeCall::Shutdown)
            .await
    }
    async fn reboot(&self, r: tonic::Request<pb::Empty>) -> Answer {
        self.handle(r, node_method::REBOOT, NodeCall::Reboot).await
    }
    async fn set_debug(&self, r: tonic::Request<pb::DebugLevel>) -> Answer {
        self.handle(r, node_method::SET_DEBUG, NodeCall::SetDebug)
            .await
    }
}

/// `scontrol show slurmd`: this daemon's account of itself, as Slurm's
/// slurmd gives it (the hardware it found, the steps running here, when
/// the controller last spoke to it).
fn daemon_status(ctx: &Ctx) -> slurm_proto::SlurmdStatus {
    let conf = ctx.conf();
    let debug = match ctx.debug_set.load(Ordering::Relaxed) {
        u32::MAX => slurm_common::logging::level_number(conf.get("SlurmdDebug"), ctx.verbose),
        n => n,
    };
    let last = ctx.last_ctld_msg.load(Ordering::Relaxed);
    let hw = &ctx.hardware;
    slurm_proto::SlurmdStatus {
        steps: crate::steps::running_here(ctx),
        cpus: hw.cpus,
        boards: hw.boards,
        sockets: hw.sockets,
        cores: hw.cores_per_socket,
        threads: hw.threads_per_core,
        real_memory: hw.real_memory,
        tmp_disk: hw.tmp_disk,
        boot_time: ctx.start_time,
        hostname: ctx.node.clone(),
        last_ctld_msg: (last > 0).then_some(last),
        pid: std::process::id(),
        debug,
        log_file: conf.slurmd_logfile.clone(),
        version: slurm_proto::SLURM_VERSION.to_string(),
    }
}

fn refuse(error: SlurmError, detail: impl Into<String>) -> Response {
    Response::Error(RpcError {
        error,
        detail: Some(detail.into()),
    })
}

fn refused(from: &str, e: net::NetError) -> Response {
    warn!(from, "refused request: {e}");
    let code = match e {
        net::NetError::Auth(AuthError::Expired | AuthError::NotYetValid) => {
            SlurmError::ExpiredCredential
        }
        net::NetError::Auth(_) => SlurmError::InvalidCredential,
        _ => SlurmError::ProtocolError,
    };
    refuse(code, e.to_string())
}

/// `scontrol reboot`, sent by the controller once this node is idle: run
/// `RebootProgram` (from slurm.conf, as root, not waited for: it is to
/// reboot the machine, after which this daemon starts again and registers
/// with the new boot time). A mock node "reboots" at once: its boot time
/// becomes now, and it registers again when the controller asks it to.
fn reboot(ctx: &Arc<Ctx>) -> Response {
    if crate::mock::mode().is_some() {
        info!("reboot requested: a mock node, booted again now");
        ctx.mock_boot.store(crate::now(), Ordering::SeqCst);
        return Response::Ok;
    }
    let conf = ctx.conf();
    let Some(program) = conf
        .get("RebootProgram")
        .map(str::trim)
        .filter(|p| !p.is_empty())
    else {
        error!("reboot requested, but RebootProgram isn't defined in slurm.conf");
        return refuse(
            SlurmError::InvalidNodeState,
            "RebootProgram isn't defined in slurm.conf",
        );
    };
    warn!("reboot requested: running RebootProgram {program}");
    match std::process::Command::new("/bin/sh")
        .args(["-c", program])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        Ok(mut child) => {
            // Reaped when it ends (if the machine is still up then).
            std::thread::spawn(move || {
                let _ = child.wait();
            });
            Response::Ok
        }
        Err(e) => {
            error!("cannot run RebootProgram {program}: {e}");
            refuse(
                SlurmError::InvalidNodeState,
                format!("cannot run RebootProgram {program}: {e}"),
            )
        }
    }
}

/// Answer a request whose credential has been checked, from `who`.
async fn checked(ctx: &Arc<Ctx>, req: Request, who: &slurm_common::tls::Peer) -> Response {
    let cred = &req.cred;
    let privileged = cred.uid == 0 || Some(cred.uid) == ctx.slurm_uid;
    let job_request = matches!(
        req.body,
        RequestBody::LaunchBatch(_)
            | RequestBody::SignalJob { .. }
            | RequestBody::NotifyJob { .. }
            | RequestBody::SuspendJobHere { .. }
            | RequestBody::TerminateJob { .. }
            | RequestBody::JobPrologue(_)
            | RequestBody::NodeShutdown
            | RequestBody::NodeReboot
    );
    if job_request && !privileged {
        warn!(
            uid = cred.uid,
            "refused job request from an unprivileged user"
        );
        return refuse(
            SlurmError::AccessDenied,
            format!("uid {} may not send job requests to slurmd", cred.uid),
        );
    }
    // With TLS, a job request (root-signed) is taken only from the
    // controller's own certificate: a credential seen elsewhere cannot be
    // sent in by anyone else.
    if job_request && who.secured() && !ctx.sent_by_controller(who) {
        warn!(
            uid = cred.uid,
            "refused job request: the caller's certificate is not the controller's"
        );
        return refuse(
            SlurmError::AccessDenied,
            "job requests are taken only from the controller's certificate",
        );
    }
    if job_request || matches!(req.body, RequestBody::NodePing) && privileged {
        ctx.last_ctld_msg.store(crate::now(), Ordering::Relaxed);
    }
    match req.body {
        RequestBody::NodePing => Response::NodePong {
            running_jobs: ctx.running_jobs(),
        },
        // Anyone may ask, as of Slurm's slurmd.
        RequestBody::DaemonStatus => Response::SlurmdStatus(Box::new(daemon_status(ctx))),
        RequestBody::ListPids { job_id, step_id } => {
            crate::steps::list_pids(ctx, req.cred.uid, privileged, job_id, step_id)
        }
        RequestBody::NodeShutdown => {
            warn!("the controller asks this daemon to stop (scontrol shutdown)");
            // As SIGTERM: the same way out, after the answer has gone.
            tokio::spawn(async {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                // SAFETY: a signal to this process, which handles SIGTERM.
                unsafe {
                    libc::kill(libc::getpid(), libc::SIGTERM);
                }
            });
            Response::Ok
        }
        RequestBody::NodeReboot => reboot(ctx),
        RequestBody::SetDebug { level } => {
            if !privileged {
                warn!(uid = cred.uid, "refused setdebug from an unprivileged user");
                return refuse(
                    SlurmError::AccessDenied,
                    format!("uid {} may not change slurmd's log level", cred.uid),
                );
            }
            match slurm_common::logging::debug_level(&level) {
                None => refuse(
                    SlurmError::InvalidRequest,
                    format!("invalid debug level: {level}"),
                ),
                Some(filter) if slurm_common::logging::set_level(filter) => {
                    info!(uid = cred.uid, "setdebug: logging at {level} now");
                    if let Some(n) = slurm_common::logging::debug_level_number(&level) {
                        ctx.debug_set.store(n, Ordering::Relaxed);
                    }
                    Response::Ok
                }
                Some(_) => refuse(SlurmError::Disabled, "the log level is set by SLURMD_LOG"),
            }
        }
        RequestBody::LaunchBatch(l) => {
            debug!(job = l.job_id, "launch request");
            match crate::mock::mode() {
                Some(secs) => crate::mock::launch(ctx, *l, secs),
                // On a task of its own: a caller that gives up waiting (a
                // slow spawn) cannot cut the launch short between the
                // spawn and the tracking of its script.
                None => {
                    let c = ctx.clone();
                    tokio::spawn(async move { jobs::launch(&c, *l).await })
                        .await
                        .unwrap_or_else(|e| {
                            refuse(SlurmError::InternalError, format!("the launch failed: {e}"))
                        })
                }
            }
        }
        RequestBody::SignalJob { job_id, signal } => jobs::signal(ctx, job_id, signal),
        RequestBody::NotifyJob { job_id, message } => jobs::notify(ctx, job_id, &message).await,
        RequestBody::SuspendJobHere {
            job_id,
            suspend,
            seq,
            epoch,
            start_time,
        } => {
            let ctx = ctx.clone();
            let order = jobs::Order {
                run: start_time,
                epoch,
                seq,
            };
            tokio::task::spawn_blocking(move || jobs::suspend(&ctx, job_id, suspend, order))
                .await
                .unwrap_or_else(|_| refuse(SlurmError::InternalError, "suspend failed"))
        }
        RequestBody::TerminateJob {
            job_id,
            kill_wait,
            start_time,
            cause,
        } => {
            debug!(job = job_id, kill_wait, "terminate request");
            if crate::mock::terminate(&ctx.node, job_id) {
                return Response::Ok;
            }
            // What was asked for this run is over (a later run starts clean).
            jobs::forget_wanted(&ctx.node, job_id);
            ctx.ledger
                .job_ended(job_id, start_time, crate::now(), req.cred.issued);
            let ctx = ctx.clone();
            tokio::spawn(async move {
                // A suspended job is thawed so its signals reach it.
                let c = ctx.clone();
                let _ = tokio::task::spawn_blocking(move || jobs::thaw(&c, job_id)).await;
                // Each step's srun is told why as its step ends, the
                // script's error file once the script is gone; steps end
                // first, so the job is clean when the batch side reports.
                let notice = jobs::end_notice(&ctx, job_id, cause, start_time).await;
                crate::steps::terminate_job(job_id, kill_wait, cause, &ctx.node).await;
                // The sruns of its steps here write out those steps' last
                // words before the script they run in is signalled.
                crate::steps::wait_detached(job_id, SRUN_GRACE).await;
                jobs::terminate(ctx, job_id, kill_wait, start_time).await;
                if let Some(n) = notice {
                    jobs::tell_ended(n).await;
                }
            });
            Response::Ok
        }
        RequestBody::JobPrologue(f) => {
            if crate::mock::mode().is_some() {
                return Response::Ok;
            }
            match crate::steps::prepare_job(ctx, &f).await {
                Ok(_) => Response::Ok,
                Err(e) => refuse(SlurmError::PrologFailed, e),
            }
        }
        RequestBody::SignalTasks {
            job_id,
            step_id,
            cause,
            job_start,
            ..
        } if cause != slurm_proto::TermCause::None => {
            // Only the controller ends a step for a cause (with TLS, over
            // its own certificate).
            if !privileged || (who.secured() && !ctx.sent_by_controller(who)) {
                return refuse(
                    SlurmError::AccessDenied,
                    "only the controller ends a step for a cause",
                );
            }
            // A message that names its run (it may come late, tried again
            // while this node could not be reached): only that run's step
            // running here is ended, and nothing is remembered otherwise
            // (the next run's step of the same number may still come).
            if let Some(run) = job_start {
                match crate::steps::running_run(job_id, step_id) {
                    None => {
                        // (Told, so the controller frees what the step
                        // holds here: it may never have started.)
                        ctx.outbox.push(crate::ctld_link::OutMsg::StepUsage {
                            job_id,
                            step_id,
                            usage: None,
                            job_start,
                        });
                        return refuse(
                            SlurmError::AlreadyDone,
                            format!("step {job_id}.{step_id} is not running here"),
                        );
                    }
                    Some(Some(here)) if here != run => {
                        return refuse(
                            SlurmError::AlreadyDone,
                            format!("step {job_id}.{step_id} here is another run's"),
                        )
                    }
                    Some(_) => {}
                }
            }
            let kill_wait = ctx.conf().kill_wait;
            // As a cancel: a launch of it arriving late starts nothing.
            ctx.ledger
                .cancelled(job_id, step_id, crate::now(), req.cred.issued);
            crate::steps::terminate_step(job_id, step_id, cause, &ctx.node, kill_wait)
        }
        RequestBody::SignalTasks {
            job_id,
            step_id,
            signal,
            job_start,
            ..
        } => {
            // The controller cancelling a step: it launches nothing here
            // afterwards, even if its launch has not arrived yet.
            // (With TLS, only over the controller's own certificate.)
            if privileged
                && signal == libc::SIGKILL
                && (!who.secured() || ctx.sent_by_controller(who))
            {
                ctx.ledger
                    .cancelled(job_id, step_id, crate::now(), req.cred.issued);
                // Not running here (its srun died before launching it):
                // the controller frees what it holds here.
                if crate::steps::running_run(job_id, step_id).is_none() {
                    ctx.outbox.push(crate::ctld_link::OutMsg::StepUsage {
                        job_id,
                        step_id,
                        usage: None,
                        job_start,
                    });
                }
            }
            crate::steps::signal(req.cred.uid, privileged, job_id, step_id, signal)
        }
        other => {
            let name = format!("{other:?}");
            let name = name
                .split([' ', '(', '{'])
                .next()
                .unwrap_or("?")
                .to_string();
            refuse(
                SlurmError::InvalidRequest,
                format!("{name} is not a request slurmd serves"),
            )
        }
    }
}

/// Resolves on SIGTERM or SIGINT; on SIGHUP, `reload` (slurm.conf read
/// again, as systemd's `ExecReload` asks).
pub async fn shutdown_signal(reload: impl Fn()) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        error!("cannot install signal handlers");
        return std::future::pending().await;
    };
    loop {
        tokio::select! {
            _ = term.recv() => { info!("SIGTERM received"); return; }
            _ = int.recv() => { info!("SIGINT received"); return; }
            _ = hup.recv() => {
                info!("SIGHUP received: reading slurm.conf again");
                reload();
            }
        }
    }
}
