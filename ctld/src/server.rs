//! The RPC listener. A connection is told apart by its first bytes: HTTP
//! (metrics, probes), a TLS handshake, then gRPC (the HTTP/2 preface: kept
//! channels of node daemons, many calls each) or one framed JSON request.
//! Either way the credential is checked, reads are answered from the latest
//! snapshot (never waiting for the writer), changes go to the writer and
//! wait for its durable reply.

use crate::inbox::{Command, Published};
use crate::state::{Identity, Reconf};
use slurm_common::auth::{now, AuthError, Key};
use slurm_common::grpc::{self, Caller, Rewind};
use slurm_common::net::NetError;
use slurm_common::tls::Peer;
use slurm_proto::grpc::commands::{command_method, command_reply, encode_listed, CommandCall};
use slurm_proto::grpc::pb::{self, controller_server::ControllerServer};
use slurm_proto::grpc::{ctld_method, ctld_reply, CtldCall};
use slurm_proto::{JobId, JobRecord, Request, RequestBody, Response, RpcError, SlurmError};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

/// Requests being answered now (`sdiag`'s server thread count).
static SERVING: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Counts a request in [`SERVING`] while it is answered.
struct Serving;

impl Serving {
    fn start() -> Serving {
        SERVING.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Serving
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        SERVING.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}
use tokio::sync::{oneshot, Semaphore};

#[derive(Clone)]
pub struct Server {
    pub key: Key,
    /// `TLSType` on: the handshake every RPC connection must make.
    pub tls: Option<slurm_common::tls::TlsAcceptor>,
    pub published: Published,
    pub cmds: Sender<Command>,
    pub host: String,
    /// Wakes the association fetcher (slurmdbd says something changed).
    pub acct_kick: Option<Arc<tokio::sync::Notify>>,
    /// `AuthAltParameters=jwt_key=` (for `scontrol token`).
    pub jwt_key: Option<Vec<u8>>,
    /// SlurmUser's uid (may mint tokens for others, as root may).
    pub slurm_uid: u32,
    /// Per-user rate limiting (`SlurmctldParameters=rl_enable`).
    pub rate: Option<Arc<std::sync::Mutex<crate::ratelimit::RateLimiter>>>,
    /// Credentials accepted and not yet expired (each is good once).
    pub seen: Arc<slurm_common::auth::ReplayCache>,
    /// Largest request taken (`CommunicationParameters=max_message_size`).
    pub max_request: usize,
    /// Memory all requests being read may hold together (16 of the largest).
    pub budget: slurm_common::net::Budget,
    /// How long a client may take to send its request (`MessageTimeout`).
    pub message_timeout: Duration,
    /// `AuthAltParameters` limits on `scontrol token`.
    pub token_policy: slurm_common::jwt::TokenPolicy,
    /// Heartbeats answered here, for the writer to take.
    pub heard: crate::inbox::Heard,
    /// The scheduler's counters as of its last pass (`sdiag`).
    pub live_stats: crate::inbox::LiveStats,
    /// RPCs served, by message type and by user (`sdiag`).
    pub rpc_stats: Arc<std::sync::Mutex<RpcStats>>,
    /// Each job's encoding for listings, with the (epoch, change stamp) it
    /// was made at.
    pub listed: Listed,
    /// This controller among the controllers, and whether it is in
    /// control (a backup in standby answers only pings).
    pub ha: Arc<crate::ha::Ha>,
    /// `scontrol shutdown`: tells the process to stop (as SIGTERM does).
    pub stop: Arc<tokio::sync::Notify>,
    /// `SlurmctldParameters=replicate_state`: this controller's Raft node.
    pub replica: Option<Arc<crate::replica::Replica>>,
}

/// Jobs' listing encodings, by job id, with the (epoch, change stamp) of
/// the record each was made from.
pub type Listed =
    Arc<std::sync::Mutex<std::collections::HashMap<JobId, ((u64, u64), bytes::Bytes)>>>;

/// Counts and total microseconds of the RPCs served, by Slurm message type
/// and by user.
#[derive(Default)]
pub struct RpcStats {
    types: std::collections::HashMap<(&'static str, u32), (u64, u64)>,
    users: std::collections::HashMap<u32, (u64, u64)>,
}

impl RpcStats {
    pub fn record(&mut self, kind: (&'static str, u32), uid: u32, us: u64) {
        let t = self.types.entry(kind).or_default();
        t.0 += 1;
        t.1 += us;
        let u = self.users.entry(uid).or_default();
        u.0 += 1;
        u.1 += us;
    }

    /// (by type, by user), in no order; users by uid (`name` empty: see
    /// [`name_users`], done without the lock held).
    pub fn report(&self) -> (Vec<slurm_proto::RpcStat>, Vec<slurm_proto::RpcStat>) {
        let types = self
            .types
            .iter()
            .map(|(&(name, id), &(count, total_us))| slurm_proto::RpcStat {
                name: name.to_string(),
                id,
                count,
                total_us,
            })
            .collect();
        let users = self
            .users
            .iter()
            .map(|(&uid, &(count, total_us))| slurm_proto::RpcStat {
                name: String::new(),
                id: uid,
                count,
                total_us,
            })
            .collect();
        (types, users)
    }
}

/// Fill in users' names (look-ups that may go to a directory service).
pub fn name_users(users: &mut [slurm_proto::RpcStat]) {
    for u in users {
        u.name = slurm_common::users::user_name_or_id(u.id);
    }
}

/// Connections served at once; beyond, new ones wait to be accepted. Each
/// must send its request within `MessageTimeout`, so idle ones cannot hold
/// the others off for long.
const MAX_CONNECTIONS: usize = 4096;

/// Jobs in one message of a streamed listing: the command decodes one while
/// the controller makes and sends the next.
const LISTING_PART: usize = 4096;

/// How long a listing waits for its caller to take the next part.
const LISTING_STALL: std::time::Duration = std::time::Duration::from_secs(30);

/// Largest answer the controller sends over gRPC (a job listing of a big
/// queue).
const MAX_REPLY: usize = 1 << 30;

/// A gRPC connection whose last authenticated call is older than this
/// (and that holds no watch) is closed; one with none within
/// `MessageTimeout` of connecting, sooner.
const GRPC_IDLE: Duration = Duration::from_secs(300);

impl Server {
    pub async fn serve(self, listener: TcpListener) {
        let limit = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        loop {
            let (sock, _) = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = sock.set_nodelay(true);
            let Ok(permit) = limit.clone().acquire_owned().await else {
                return;
            };
            let me = self.clone();
            tokio::spawn(async move {
                me.connection(sock).await;
                drop(permit);
            });
        }
    }

    async fn connection(&self, sock: TcpStream) {
        // HTTP or RPC? Wait for the first four bytes (they may arrive split).
        // A client that sends nothing is dropped after MessageTimeout.
        let mut first = [0u8; 4];
        let peek = async {
            let mut n = 0;
            for _ in 0..100 {
                n = sock.peek(&mut first).await.unwrap_or(0);
                if n >= 4 || n == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            n
        };
        let Ok(n) = tokio::time::timeout(self.message_timeout, peek).await else {
            return;
        };
        if crate::http::is_http(&first[..n]) {
            crate::http::serve(sock, self.snapshot()).await;
            return;
        }
        let addr = sock
            .peer_addr()
            .unwrap_or_else(|_| std::net::SocketAddr::from(([0, 0, 0, 0], 0)));
        // A TLS record starts with its type: 0x16, a handshake.
        let (mut sock, peer) = match &self.tls {
            Some(a) if first[0] == 0x16 => {
                match slurm_common::net::accept_within(sock, Some(a), self.message_timeout).await {
                    Some(c) => c,
                    None => return,
                }
            }
            Some(_) => {
                tracing::info!(from = %addr, "refused a connection in clear text (TLSType is set)");
                return;
            }
            None => match slurm_common::net::accept(sock, None).await {
                Ok(c) => c,
                Err(_) => return,
            },
        };
        // gRPC (the HTTP/2 preface) or anything else?
        let mut head = [0u8; 4];
        match tokio::time::timeout(self.message_timeout, sock.read_exact(&mut head)).await {
            Ok(Ok(_)) => {}
            _ => return,
        }
        let sock = Rewind::new(head.to_vec(), sock);
        if &head == grpc::H2_PREFACE {
            let service = ControllerServer::new(CtldService {
                server: self.clone(),
            })
            .max_decoding_message_size(self.max_request)
            .max_encoding_message_size(MAX_REPLY);
            let routes = tonic::service::Routes::new(service);
            let life = grpc::Lifetime {
                first: self.message_timeout,
                idle: GRPC_IDLE,
            };
            let caller = Caller { peer, addr };
            grpc::serve_connection(sock, caller, routes, self.budget.clone(), life).await;
            return;
        }
        // Anything else (the framed JSON of earlier versions, say) is not
        // answered: the connection closes.
        tracing::info!(from = %addr, "refused a connection that does not speak gRPC");
    }

    /// Why a request whose credential holds is not taken from this
    /// caller: a node's report from another certificate than that node's,
    /// or a user over the rate limit.
    fn refused(&self, req: &Request, peer: &Peer) -> Option<Response> {
        if let Some(node) = req.body.reporting_node().filter(|_| peer.secured()) {
            if !peer.is(node) {
                tracing::warn!("refused a report for node {node}: not that node's certificate");
                return Some(Response::Error(RpcError {
                    error: SlurmError::AccessDenied,
                    detail: Some(format!(
                        "reports for node {node} are taken only from its certificate"
                    )),
                }));
            }
        }
        // Only another controller asks for control: with TLS, over a
        // controller's certificate.
        if matches!(req.body, RequestBody::RelinquishControl) && peer.secured() {
            let names = self.ha.controllers.iter().map(|c| c.0.as_str());
            if !self
                .ha
                .tls
                .as_ref()
                .is_some_and(|t| t.is_controller(peer, names))
            {
                tracing::warn!("refused a request for control: not a controller's certificate");
                return Some(Response::Error(RpcError {
                    error: SlurmError::AccessDenied,
                    detail: Some("control is given up only to a controller".into()),
                }));
            }
        }
        if self.rate_limited(req.cred.uid) {
            return Some(Response::Error(SlurmError::Backoff.into()));
        }
        None
    }

    /// Root or SlurmUser (not rate limited; may move control).
    fn root_or_slurm_user(&self, uid: u32) -> bool {
        uid == 0 || uid == self.slurm_uid
    }

    /// Slurm's super user: root, SlurmUser or AdminLevel=Administrator.
    fn super_user(&self, uid: u32) -> bool {
        self.root_or_slurm_user(uid) || {
            let s = self.snapshot();
            !s.administrators.is_empty()
                && s.administrators
                    .contains(&slurm_common::users::user_name_or_id(uid).to_ascii_lowercase())
        }
    }

    /// A reconfigure reaching a backup in standby (from the controller in
    /// control, or root): slurm.conf is checked, then the backup starts
    /// again with it.
    fn reread(&self, req: &Request) -> Response {
        if !self.root_or_slurm_user(req.cred.uid) {
            return Response::Error(SlurmError::AccessDenied.into());
        }
        if let Err(e) = slurm_common::conf::SlurmConf::load(&self.ha.conf_path) {
            return Response::Error(RpcError {
                error: SlurmError::InvalidRequest,
                detail: Some(e.to_string()),
            });
        }
        self.ha.request_reread();
        Response::Ok
    }

    /// `scontrol takeover` and another controller's request for control
    /// (root and SlurmUser only).
    async fn control(&self, req: Request) -> Response {
        if !self.root_or_slurm_user(req.cred.uid) {
            tracing::warn!(
                uid = req.cred.uid,
                "refused {:?}: not root or SlurmUser",
                req.body
            );
            return Response::Error(SlurmError::AccessDenied.into());
        }
        match req.body {
            RequestBody::Takeover => {
                if !self.ha.active() {
                    tracing::warn!("scontrol takeover: taking control");
                    self.ha.request_takeover();
                }
                Response::Ok
            }
            RequestBody::RelinquishControl => {
                // With replicated state, the asking controller is to be
                // chosen next: stand for no election meanwhile.
                if let Some(r) = &self.replica {
                    // (the one in control may wait up to 5 s for the others to
                    // catch up before it goes)
                    r.hold_elections(self.ha.timeout + std::time::Duration::from_secs(5));
                }
                self.ha.relinquish().await
            }
            _ => Response::Error(SlurmError::InternalError.into()),
        }
    }

    /// `scontrol shutdown` (root and SlurmUser only): unless
    /// `controller_only`, every node daemon that answers is told to stop
    /// first (its running jobs keep running) by the controller in control;
    /// then this controller, in control or in standby, stops as on SIGTERM,
    /// its state durable. The answer goes out first.
    async fn shutdown(&self, req: &Request, controller_only: bool) -> Response {
        if !self.root_or_slurm_user(req.cred.uid) {
            tracing::warn!(
                uid = req.cred.uid,
                "refused shutdown: not root or SlurmUser"
            );
            return Response::Error(SlurmError::AccessDenied.into());
        }
        // (A backup in standby only stops: the one in control tells nodes.)
        if !controller_only && self.ha.active() {
            let snap = self.published.latest();
            let mut calls = tokio::task::JoinSet::new();
            for n in snap
                .nodes
                .iter()
                .filter(|n| !n.external && !n.flags.not_responding && n.port != 0)
            {
                let (name, addr) = (n.name.clone(), format!("{}:{}", n.addr, n.port));
                let (key, host) = (self.key.clone(), self.host.clone());
                calls.spawn(async move {
                    let sign = |b: &_| Ok(key.sign(0, 0, &host, now(), b));
                    let r = match grpc::kept(&addr, &name) {
                        Ok(ch) => {
                            let call = slurm_proto::grpc::NodeCall::Shutdown(pb::Empty {});
                            grpc::call_node(&ch, &name, call, sign, Duration::from_secs(5)).await
                        }
                        Err(e) => Err(e),
                    };
                    match r {
                        Ok(Response::Ok) => tracing::info!("shutdown: told {name} to stop"),
                        other => tracing::warn!("shutdown: {name} did not take it: {other:?}"),
                    }
                });
            }
            while calls.join_next().await.is_some() {}
        }
        tracing::warn!(
            uid = req.cred.uid,
            controller_only,
            "scontrol shutdown: stopping"
        );
        let stop = self.stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            stop.notify_one();
        });
        Response::Ok
    }

    /// `scontrol setdebug LEVEL` (root, SlurmUser and Administrators): log at LEVEL
    /// until slurm.conf is read again.
    fn set_debug(&self, req: &Request, level: &str) -> Response {
        if !self.super_user(req.cred.uid) {
            tracing::warn!(
                uid = req.cred.uid,
                "refused setdebug: not root, SlurmUser or an Administrator"
            );
            return Response::Error(SlurmError::AccessDenied.into());
        }
        let Some(filter) = slurm_common::logging::debug_level(level) else {
            return Response::Error(RpcError {
                error: SlurmError::InvalidRequest,
                detail: Some(format!("invalid debug level: {level}")),
            });
        };
        if !slurm_common::logging::set_level(filter) {
            return Response::Error(RpcError {
                error: SlurmError::Disabled,
                detail: Some("the log level is set by SLURMCTLD_LOG".into()),
            });
        }
        tracing::info!(uid = req.cred.uid, "setdebug: logging at {level} now");
        Response::Ok
    }

    /// `scontrol schedloglevel`: scheduler logging to `SlurmSchedLogFile`
    /// off (0) or on (1, as any higher level) until slurm.conf is read
    /// again; root, SlurmUser and Administrators, as Slurm's. Disabled
    /// without a `SlurmSchedLogFile`.
    fn set_sched_log_level(&self, req: &Request, level: u32) -> Response {
        if !self.super_user(req.cred.uid) {
            tracing::warn!(
                uid = req.cred.uid,
                "refused schedloglevel: not root, SlurmUser or an Administrator"
            );
            return Response::Error(SlurmError::AccessDenied.into());
        }
        match crate::schedlog::SCHED.set_level(level) {
            Some(level) => {
                tracing::info!(uid = req.cred.uid, "scheduler log level set to {level}");
                Response::Ok
            }
            None => {
                tracing::error!("set scheduler log level failed: no log file!");
                Response::Error(RpcError {
                    error: SlurmError::Disabled,
                    detail: Some("no SlurmSchedLogFile is configured".into()),
                })
            }
        }
    }

    /// `scontrol setdebugflags`: the DebugFlags in force until slurm.conf is
    /// read again; root, SlurmUser and Administrators, as Slurm's.
    fn set_debug_flags(&self, req: &Request, plus: u64, minus: u64) -> Response {
        use slurm_common::debugflags::{self, DebugFlags};
        if !self.super_user(req.cred.uid) {
            tracing::warn!(
                uid = req.cred.uid,
                "refused setdebugflags: not root, SlurmUser or an Administrator"
            );
            return Response::Error(SlurmError::AccessDenied.into());
        }
        let now = DebugFlags((debugflags::current().0 & !minus) | plus);
        debugflags::set(now);
        tracing::info!(uid = req.cred.uid, "Set DebugFlags to {}", {
            let n = now.names();
            if n.is_empty() {
                "none".to_string()
            } else {
                n
            }
        });
        Response::Ok
    }

    /// `sdiag -r`: the RPC counters here and the scheduler's in the
    /// writer start again from zero; operators only (as Slurm's).
    fn reset_diag(&self, req: &Request) -> Response {
        let uid = req.cred.uid;
        let s = self.snapshot();
        if !s.sees_all(uid, self.slurm_uid, || {
            slurm_common::users::user_name_or_id(uid)
        }) {
            tracing::warn!(uid, "refused sdiag -r: not an operator");
            return Response::Error(RpcError {
                error: SlurmError::AccessDenied,
                detail: Some("only operators may reset the statistics".into()),
            });
        }
        if let Ok(mut st) = self.rpc_stats.lock() {
            *st = RpcStats::default();
        }
        if self.cmds.send(Command::ResetStats).is_err() {
            return self.writer_gone();
        }
        tracing::info!(uid, "statistics reset (sdiag -r)");
        Response::Ok
    }

    /// `uid` is over its rate (`SlurmctldParameters=rl_enable`).
    fn rate_limited(&self, uid: u32) -> bool {
        match (&self.rate, self.root_or_slurm_user(uid)) {
            (Some(rl), false) => !rl
                .lock()
                .map(|mut r| r.allow(uid, std::time::Instant::now()))
                .unwrap_or(true),
            _ => false,
        }
    }

    /// Feed a watch stream (`Controller.Watch`): everything `uid` may see
    /// of what `want` asks, `synced`, then each change, until the caller
    /// hangs up. Woken by each snapshot the writer publishes.
    async fn watch(
        self,
        uid: u32,
        want: pb::WatchRequest,
        tx: tokio::sync::mpsc::Sender<Result<pb::WatchEvent, tonic::Status>>,
    ) {
        use pb::watch_event::Event;
        let selected = |j: &JobRecord| {
            want.job_ids.is_empty()
                || want.job_ids.contains(&j.job_id)
                || j.array
                    .as_ref()
                    .is_some_and(|a| want.job_ids.contains(&a.job_id))
        };
        let mut seen: Option<(u64, u64)> = None;
        let mut jobs_known = std::collections::HashSet::new();
        let mut nodes_known: std::collections::HashMap<String, (String, Option<String>)> =
            Default::default();
        // The configuration the caller last heard of.
        // (Held, so its address is never another's.)
        let mut conf_known: Option<Arc<slurm_common::conf::SlurmConf>> = None;
        loop {
            let published = self.published.clone();
            let next = published.next();
            tokio::pin!(next);
            next.as_mut().enable();
            let s = self.snapshot();
            if seen != Some((s.epoch, s.version)) {
                let mut events = Vec::new();
                if want.jobs {
                    let only = self.job_viewer(&s, uid);
                    // A first listing, another controller run or a
                    // snapshot without stamps: every job.
                    let all = seen.is_none_or(|(e, _)| e != s.epoch)
                        || s.job_changed.len() != s.jobs.len();
                    let since = seen.map_or(0, |(_, v)| v);
                    let mut now_known = std::collections::HashSet::new();
                    for (k, j) in s.jobs.iter().enumerate() {
                        if !selected(j) || only.as_ref().is_some_and(|v| !v.sees(j)) {
                            continue;
                        }
                        now_known.insert(j.job_id);
                        if all || s.job_changed[k] > since || !jobs_known.contains(&j.job_id) {
                            events.push(Event::Job(pb::JobEvent::from(j.as_ref())));
                        }
                    }
                    let mut gone: Vec<u32> = jobs_known.difference(&now_known).copied().collect();
                    gone.sort_unstable();
                    events.extend(gone.into_iter().map(Event::JobGone));
                    jobs_known = now_known;
                }
                let private_nodes = s.private.nodes
                    && !s.sees_all(uid, self.slurm_uid, || {
                        slurm_common::users::user_name_or_id(uid)
                    });
                if want.nodes && !private_nodes {
                    for n in &s.nodes {
                        let st = (n.state_long(), n.reason.clone());
                        if nodes_known.get(&n.name) != Some(&st) {
                            events.push(Event::Node(pb::NodeEvent {
                                name: n.name.clone(),
                                state: st.0.clone(),
                                reason: st.1.clone(),
                            }));
                            nodes_known.insert(n.name.clone(), st);
                        }
                    }
                }
                if want.config {
                    let same = match (&s.conf, &conf_known) {
                        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                        (None, None) => true,
                        _ => false,
                    };
                    if seen.is_some() && !same {
                        events.push(Event::ConfigChanged(pb::ConfigChanged {}));
                    }
                    conf_known = s.conf.clone();
                }
                if seen.is_none() {
                    events.push(Event::Synced(pb::Synced { version: s.version }));
                }
                seen = Some((s.epoch, s.version));
                for e in events {
                    let e = pb::WatchEvent { event: Some(e) };
                    if tx.send(Ok(e)).await.is_err() {
                        return;
                    }
                }
            }
            tokio::select! {
                _ = tx.closed() => return,
                _ = next => {}
            }
        }
    }

    /// A node daemon's report (checked): a registered node's heartbeat is
    /// answered here, never behind the writer's backlog (liveness before
    /// throughput: a busy controller must not declare healthy nodes dead;
    /// the writer takes the times before it looks for silent nodes); the
    /// rest goes to the writer.
    async fn report(&self, req: Request) -> Response {
        if let RequestBody::Heartbeat { ref node, .. } = req.body {
            if req.cred.uid == 0 || req.cred.uid == self.slurm_uid {
                let s = self.snapshot();
                let known = s
                    .node_index
                    .get(node)
                    .and_then(|&i| s.nodes.get(i))
                    .is_some_and(|n| {
                        n.slurmd_start_time.is_some()
                            && !n.flags.not_responding
                            && !n.flags.reboot_issued
                    });
                if known {
                    if let Ok(mut h) = self.heard.lock() {
                        h.insert(node.clone(), now());
                    }
                    return Response::Ok;
                }
            }
        }
        self.to_writer(req).await
    }

    /// `scontrol token`: a JWT for the caller, or for `username` when the
    /// caller is root or SlurmUser.
    fn token(
        &self,
        cred: &slurm_proto::Credential,
        username: Option<String>,
        lifespan: Option<i64>,
    ) -> Response {
        let Some(key) = &self.jwt_key else {
            return Response::Error(RpcError {
                error: SlurmError::Disabled,
                detail: Some("JWT authentication is not configured (AuthAltTypes=auth/jwt)".into()),
            });
        };
        let deny = |d: String| {
            Response::Error(RpcError {
                error: SlurmError::AccessDenied,
                detail: Some(d),
            })
        };
        // A token must not beget tokens (it would outlive its expiry).
        if !cred.token.is_empty() {
            return deny("a request made with a token cannot get tokens".into());
        }
        let operator = cred.uid == 0 || cred.uid == self.slurm_uid;
        let me = slurm_common::users::user_name_or_id(cred.uid);
        let user = username.unwrap_or_else(|| me.clone());
        if user != me && !operator {
            return deny(format!(
                "only root or SlurmUser may get a token for '{user}'"
            ));
        }
        if self.token_policy.creation_disabled && !operator {
            return deny(
                "token creation is disabled (AuthAltParameters=disable_token_creation)".into(),
            );
        }
        let max = self.token_policy.max_lifespan.filter(|_| !operator);
        let life = match (lifespan, max) {
            (Some(l), Some(m)) if l > m => {
                return Response::Error(RpcError {
                    error: SlurmError::InvalidRequest,
                    detail: Some(format!(
                        "lifespan {l} exceeds max_token_lifespan={m} (AuthAltParameters)"
                    )),
                })
            }
            (Some(l), _) => l,
            (None, m) => m.map_or(1800, |m| m.min(1800)),
        };
        if life <= 0 {
            return Response::Error(RpcError {
                error: SlurmError::InvalidRequest,
                detail: Some(format!("invalid lifespan {life}")),
            });
        }
        match slurm_common::jwt::mint_token(key, &user, life) {
            Ok(t) => Response::Token(t),
            Err(e) => Response::Error(RpcError {
                error: SlurmError::InternalError,
                detail: Some(e.to_string()),
            }),
        }
    }

    /// `Some(uid)` when data of kind `private` (a `PrivateData` flag) must
    /// be cut down to what `uid` may see; `None` when it sees everything.
    fn private_to(&self, s: &crate::state::Snapshot, private: bool, uid: u32) -> Option<u32> {
        let all = !private
            || s.sees_all(uid, self.slurm_uid, || {
                slurm_common::users::user_name_or_id(uid)
            });
        (!all).then_some(uid)
    }

    /// Which jobs `uid` may see under `PrivateData=jobs` (`None`: all).
    fn job_viewer(&self, s: &crate::state::Snapshot, uid: u32) -> Option<crate::state::JobViewer> {
        s.job_viewer(s.private.jobs, uid, self.slurm_uid, || {
            slurm_common::users::user_name_or_id(uid)
        })
    }

    /// Part of the listing of the jobs the caller may see (`viewer`: not all)
    /// that `filter` selects, from index `start` of snapshot `s`: at most
    /// [`LISTING_PART`] jobs, and where the next part starts (`None`: this
    /// is the last). Each job's encoding is made once per change of the
    /// job and kept (`listed`), so a listing of an unchanged queue only
    /// copies bytes; the kept encodings are locked a part at a time, so
    /// listings made at once take turns. The last part forgets purged jobs
    /// now and then (the map stays within twice the queue).
    fn listing_part(
        &self,
        s: &crate::state::Snapshot,
        viewer: Option<&crate::state::JobViewer>,
        filter: Option<&slurm_proto::JobFilter>,
        start: usize,
    ) -> (Vec<bytes::Bytes>, Option<usize>) {
        let stamped = s.job_changed.len() == s.jobs.len();
        let mut listed = self.listed.lock().unwrap_or_else(|p| p.into_inner());
        let mut jobs = Vec::new();
        let mut k = start;
        while k < s.jobs.len() && jobs.len() < LISTING_PART {
            let j = &s.jobs[k];
            k += 1;
            if viewer.is_some_and(|v| !v.sees(j)) || filter.is_some_and(|f| !f.matches(j)) {
                continue;
            }
            if !stamped {
                jobs.push(encode_listed(j));
                continue;
            }
            let stamp = (s.epoch, s.job_changed[k - 1]);
            match listed.get(&j.job_id) {
                Some((at, b)) if *at == stamp => jobs.push(b.clone()),
                _ => {
                    let b = encode_listed(j);
                    listed.insert(j.job_id, (stamp, b.clone()));
                    jobs.push(b);
                }
            }
        }
        if k < s.jobs.len() {
            return (jobs, Some(k));
        }
        if listed.len() > 2 * s.jobs.len() + 1024 {
            let live: std::collections::HashSet<JobId> = s.jobs.iter().map(|j| j.job_id).collect();
            listed.retain(|id, _| live.contains(id));
        }
        (jobs, None)
    }

    /// What changed in the job list since the caller's copy at (`epoch`,
    /// `since`), as a gRPC answer (see `RequestBody::GetJobsDelta`). Under
    /// PrivateData=jobs a user gets the jobs it may see (its own, and a
    /// coordinator its accounts'), always whole.
    fn jobs_delta(&self, uid: u32, epoch: u64, since: u64) -> pb::CommandReply {
        use pb::command_reply::Result as R;
        let s = self.snapshot();
        let delta = |jobs: Vec<&JobRecord>, all: bool| {
            R::JobsDelta(pb::JobsDelta {
                epoch: s.epoch,
                version: s.version,
                ids: jobs.iter().map(|j| j.job_id).collect(),
                changed: jobs
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| all || s.job_changed[*k] > since)
                    .map(|(_, j)| (*j).into())
                    .collect(),
                last_update: s.last_update,
            })
        };
        let result = if let Some(v) = self.job_viewer(&s, uid) {
            delta(
                s.jobs.iter().filter(|j| v.sees(j)).map(|j| &**j).collect(),
                true,
            )
        } else if s.epoch == epoch && s.version == since {
            R::JobsUnchanged(pb::JobsUnchanged { version: since })
        } else {
            // Another run's copy, or a snapshot without stamps: everything.
            let all = epoch != s.epoch || since == 0 || s.job_changed.len() != s.jobs.len();
            delta(s.jobs.iter().map(|j| &**j).collect(), all)
        };
        pb::CommandReply {
            result: Some(result),
        }
    }

    fn snapshot(&self) -> Arc<crate::state::Snapshot> {
        self.published.latest()
    }

    /// The answer to a request the snapshot answers (ping, nodes,
    /// partitions, configuration, diagnostics, priorities, shares,
    /// reservations, tokens, topology, licenses) or that needs no writer;
    /// `Err` gives back one for the writer.
    fn answer_from_snapshot(&self, req: Request) -> Result<Response, Box<Request>> {
        let uid = req.cred.uid;
        Ok(match req.body {
            RequestBody::Ping => Response::Pong {
                controller: self.host.clone(),
                standby: !self.ha.active(),
            },
            RequestBody::GetNodes => {
                let s = self.snapshot();
                if self.private_to(&s, s.private.nodes, uid).is_some() {
                    Response::Error(SlurmError::AccessDenied.into())
                } else {
                    Response::Nodes {
                        nodes: s.nodes.to_vec(),
                        last_update: s.last_update,
                    }
                }
            }
            RequestBody::GetPartitions => {
                let s = self.snapshot();
                if self.private_to(&s, s.private.partitions, uid).is_some() {
                    Response::Error(SlurmError::AccessDenied.into())
                } else {
                    Response::Partitions {
                        partitions: s.partitions.clone(),
                        last_update: s.last_update,
                    }
                }
            }
            RequestBody::GetConfig => {
                // DebugFlags as in force now (setdebugflags),
                let mut c = self.snapshot().config.clone();
                let flags = slurm_common::debugflags::current().names();
                let flags = if flags.is_empty() {
                    "(null)".to_string()
                } else {
                    flags
                };
                // And the scheduler log's level (schedloglevel).
                let sched_level = crate::schedlog::SCHED.level().to_string();
                for (key, value) in [("DebugFlags", flags), ("SlurmSchedLogLevel", sched_level)] {
                    match c
                        .entries
                        .iter_mut()
                        .find(|(k, _)| k.eq_ignore_ascii_case(key))
                    {
                        Some(e) => e.1 = value,
                        None => {
                            c.entries.push((key.into(), value));
                            c.entries.sort_by_key(|e| e.0.to_ascii_lowercase());
                        }
                    }
                }
                Response::Config(c)
            }
            RequestBody::GetDiag => {
                let mut d = self.snapshot().diag_counted();
                // Slurm's clock-read latency, measured as it is asked.
                let t0 = std::time::Instant::now();
                for _ in 0..1000 {
                    std::hint::black_box(std::time::SystemTime::now());
                }
                d.gettimeofday_latency = t0.elapsed().as_micros() as u64;
                if let Ok(live) = self.live_stats.lock() {
                    live.fill(&mut d);
                }
                if let Ok(st) = self.rpc_stats.lock() {
                    (d.rpc_types, d.rpc_users) = st.report();
                }
                name_users(&mut d.rpc_users);
                // (As Slurm's: the time of the request, and apart the time
                // of the state the job counts are of.)
                d.job_states_ts = d.now;
                d.now = now();
                d.server_threads = SERVING.load(std::sync::atomic::Ordering::Relaxed);
                (d.agent_count, d.agent_retrying, d.pending_rpcs) = crate::agent::in_flight();
                Response::Diag(Box::new(d))
            }
            RequestBody::GetPriorities => {
                let s = self.snapshot();
                let mut jobs = s.priorities.to_vec();
                if let Some(v) = self.job_viewer(&s, req.cred.uid) {
                    let seen: std::collections::HashSet<JobId> = s
                        .jobs
                        .iter()
                        .filter(|j| v.sees(j))
                        .map(|j| j.job_id)
                        .collect();
                    jobs.retain(|p| seen.contains(&p.job_id));
                }
                Response::Priorities {
                    jobs,
                    weights: s.weights.clone(),
                }
            }
            RequestBody::GetShares => {
                let s = self.snapshot();
                let mut shares = s.shares.clone();
                if let Some(uid) = self.private_to(&s, s.private.usage, req.cred.uid) {
                    let me = slurm_common::users::user_name_or_id(uid);
                    shares.retain(|r| r.user.as_deref() == Some(me.as_str()));
                }
                Response::Shares(shares)
            }
            RequestBody::GetReservations => {
                let s = self.snapshot();
                let mut reservations = s.reservations.clone();
                if let Some(uid) = self.private_to(&s, s.private.reservations, req.cred.uid) {
                    let me = slurm_common::users::user_name_or_id(uid);
                    let id = uid.to_string();
                    reservations.retain(|r| r.users.iter().any(|u| *u == me || *u == id));
                }
                Response::Reservations {
                    reservations,
                    last_update: s.last_update,
                }
            }
            RequestBody::GetToken { username, lifespan } => {
                self.token(&req.cred, username, lifespan)
            }
            RequestBody::GetTopology => Response::Topology(self.snapshot().topology.to_vec()),
            // As Slurm's: the file the topology was read from (beside
            // slurm.conf; read when asked, as `show config` reads nothing).
            RequestBody::GetTopoConfig => {
                let s = self.snapshot();
                let dir = s
                    .conf
                    .as_ref()
                    .and_then(|c| c.path.parent().map(std::path::Path::to_path_buf))
                    .unwrap_or_default();
                let text = ["topology.yaml", "topology.conf"]
                    .iter()
                    .find_map(|f| std::fs::read_to_string(dir.join(f)).ok())
                    .unwrap_or_default();
                Response::TopoConfig(text)
            }
            RequestBody::GetLicenses => {
                let s = self.snapshot();
                Response::Licenses {
                    licenses: s.licenses.clone(),
                    last_update: s.last_update,
                }
            }
            RequestBody::AcctChanged => match &self.acct_kick {
                Some(k) => {
                    k.notify_one();
                    Response::Ok
                }
                None => Response::Error(SlurmError::Disabled.into()),
            },
            body => {
                return Err(Box::new(Request {
                    cred: req.cred,
                    body,
                }))
            }
        })
    }

    /// Hand a request to the writer and wait for its answer.
    /// `scontrol reconfigure` in control: slurm.conf and the files beside
    /// it are read here (the writer reads no files), then applied by the
    /// writer, which checks the caller again: root, SlurmUser or an
    /// administrator (AdminLevel=Administrator, as Slurm's).
    async fn reconfigure(&self, req: &Request) -> Response {
        let (uid, gid) = (req.cred.uid, req.cred.gid);
        if !self.super_user(uid) {
            return Response::Error(SlurmError::AccessDenied.into());
        }
        let identity = match self.root_or_slurm_user(uid) {
            true => None,
            false => match tokio::task::spawn_blocking(move || Identity::look_up(uid, gid, false))
                .await
            {
                Ok(id) => Some(Box::new(id)),
                Err(_) => return Response::Error(SlurmError::InternalError.into()),
            },
        };
        let path = self.ha.conf_path.clone();
        let read = match tokio::task::spawn_blocking(move || Reconf::read(&path)).await {
            Ok(r) => r,
            Err(_) => return Response::Error(SlurmError::InternalError.into()),
        };
        let (tx, rx) = oneshot::channel();
        let cmd = Command::Reconfigure {
            uid: req.cred.uid,
            gid: req.cred.gid,
            identity,
            read: Box::new(read),
            reply: tx,
        };
        self.send_to_writer(cmd, rx).await
    }

    /// `sbatch --uid/--gid`: a submission (or `--test-only`) made as
    /// another user or group. Only root and SlurmUser may; the request then
    /// goes on as that user's (their names and groups, their accounts; the
    /// partition's access is checked for them), the ids taken out of it.
    async fn submit_as(&self, req: &mut Request) -> Result<(), Response> {
        let refuse = |error, detail: String| {
            Err(Response::Error(RpcError {
                error,
                detail: Some(detail),
            }))
        };
        let desc = match &mut req.body {
            RequestBody::SubmitBatchJob(d) | RequestBody::TestJob(d) => d,
            RequestBody::AllocateJob(d) if d.user_id.is_some() || d.group_id.is_some() => {
                return refuse(
                    SlurmError::InvalidRequest,
                    "--uid and --gid are taken by batch submissions only".into(),
                )
            }
            _ => return Ok(()),
        };
        let (uid, gid) = (desc.user_id.take(), desc.group_id.take());
        if uid.is_none() && gid.is_none() {
            return Ok(());
        }
        if !self.root_or_slurm_user(req.cred.uid) {
            return refuse(
                SlurmError::AccessDenied,
                "--uid and --gid only permitted by root user".into(),
            );
        }
        let target = uid.unwrap_or(req.cred.uid);
        let look = move || {
            (
                slurm_common::users::user_by_uid(target),
                gid.map(slurm_common::users::group_name),
            )
        };
        let (user, group) = tokio::task::spawn_blocking(look)
            .await
            .map_err(|_| Response::Error(SlurmError::InternalError.into()))?;
        let Some(user) = user else {
            return refuse(
                SlurmError::InvalidRequest,
                format!("Invalid user id {target}"),
            );
        };
        if let (Some(g), Some(None)) = (gid, &group) {
            return refuse(SlurmError::InvalidRequest, format!("Invalid group id {g}"));
        }
        if slurm_common::users::is_nobody(target) || gid.is_some_and(slurm_common::users::is_nobody)
        {
            return refuse(
                SlurmError::InvalidRequest,
                "a job may not run as nobody".into(),
            );
        }
        let (by, by_gid) = (req.cred.uid, req.cred.gid);
        req.cred.uid = target;
        req.cred.gid = match (gid, uid) {
            (Some(g), _) => g,
            (None, Some(_)) => user.gid,
            (None, None) => req.cred.gid,
        };
        tracing::info!(
            "submission by uid {by} (gid {by_gid}) as uid {} gid {} (--uid/--gid)",
            req.cred.uid,
            req.cred.gid
        );
        Ok(())
    }

    async fn to_writer(&self, mut req: Request) -> Response {
        if let Err(refused) = self.submit_as(&mut req).await {
            return refused;
        }
        let (uid, gid) = (req.cred.uid, req.cred.gid);
        // Names are looked up here, off the writer's thread.
        let needed = Identity::needed_by(&req.body)
            || (Identity::needed_when_delegated(&req.body) && self.snapshot().delegated);
        let identity = if needed {
            let all_groups = self.snapshot().partitions.iter().any(|p| {
                p.allow_groups
                    .as_deref()
                    .is_some_and(|g| !g.eq_ignore_ascii_case("ALL"))
            });
            match tokio::task::spawn_blocking(move || Identity::look_up(uid, gid, all_groups)).await
            {
                Ok(id) => Some(Box::new(id)),
                Err(_) => return Response::Error(SlurmError::InternalError.into()),
            }
        } else {
            None
        };
        let (tx, rx) = oneshot::channel();
        let cmd = Command::Rpc {
            uid,
            gid,
            body: Box::new(req.body),
            identity,
            reply: tx,
        };
        self.send_to_writer(cmd, rx).await
    }

    async fn send_to_writer(&self, cmd: Command, rx: oneshot::Receiver<Response>) -> Response {
        if self.cmds.send(cmd).is_err() {
            self.writer_gone()
        } else {
            rx.await.unwrap_or_else(|_| self.writer_gone())
        }
    }

    /// The answer to a request the writer never took: gone because control
    /// was given up, the caller may send it to the controller now in
    /// control.
    fn writer_gone(&self) -> Response {
        if self.ha.active() {
            Response::Error(SlurmError::InternalError.into())
        } else {
            Response::Error(SlurmError::InStandby.into())
        }
    }

    /// A node's job events (`NodeReports`, checked): each goes to the
    /// writer as its own report, all of them before any answer is awaited
    /// (so one writer batch takes them, in order); the answers in order.
    async fn reports_to_writer(
        &self,
        uid: u32,
        gid: u32,
        reports: Vec<RequestBody>,
    ) -> Vec<Response> {
        let t0 = std::time::Instant::now();
        let mut sent = Vec::with_capacity(reports.len());
        for body in reports {
            let kind = body.message_type();
            let (tx, rx) = oneshot::channel();
            let cmd = Command::Rpc {
                uid,
                gid,
                body: Box::new(body),
                identity: None,
                reply: tx,
            };
            let taken = self.cmds.send(cmd).is_ok();
            sent.push((kind, taken.then_some(rx)));
        }
        let mut answers = Vec::with_capacity(sent.len());
        for (kind, rx) in sent {
            let r = match rx {
                Some(rx) => rx.await.unwrap_or_else(|_| self.writer_gone()),
                None => self.writer_gone(),
            };
            if let Ok(mut st) = self.rpc_stats.lock() {
                st.record(kind, uid, t0.elapsed().as_micros() as u64);
            }
            answers.push(r);
        }
        answers
    }
}

/// The Slurm error a refused credential is answered with.
fn refusal(e: &NetError) -> SlurmError {
    match e {
        NetError::Auth(AuthError::Expired | AuthError::NotYetValid) => {
            SlurmError::ExpiredCredential
        }
        // This user holds its share of live credentials: wait.
        NetError::Auth(AuthError::Busy | AuthError::BeforeStart) => SlurmError::Backoff,
        NetError::Auth(_) => SlurmError::InvalidCredential,
        _ => SlurmError::ProtocolError,
    }
}

/// The controller's gRPC service (the node daemons' reports so far).
/// A job listing's messages, as the controller sends them.
type ListingStream = tokio_stream::wrappers::ReceiverStream<Result<pb::JobListing, tonic::Status>>;

struct CtldService {
    server: Server,
}

type Answer = Result<tonic::Response<pb::CtldReply>, tonic::Status>;

impl CtldService {
    /// The caller's credential for a call that answers with a status of its
    /// own (not a `CtldReply`); `what` names the call in the log.
    fn authenticate<T: prost::Message>(
        &self,
        req: &tonic::Request<T>,
        method: &str,
        what: &str,
    ) -> Result<slurm_proto::Credential, Box<tonic::Status>> {
        let s = &self.server;
        let to = slurm_common::auth::TO_CTLD;
        let cred = grpc::verify_call(req, method, to, &s.key, now(), &s.seen).map_err(|e| {
            tracing::info!("refused {what}: {e}");
            Box::new(tonic::Status::unauthenticated(format!(
                "{}: {e}",
                refusal(&e).message()
            )))
        })?;
        if !s.ha.active() {
            return Err(Box::new(tonic::Status::unavailable(
                SlurmError::InStandby.message(),
            )));
        }
        Ok(cred)
    }

    /// Check the call's credential and its caller as for a framed request,
    /// then act on the report.
    async fn handle<T: prost::Message>(
        &self,
        req: tonic::Request<T>,
        method: &'static str,
        into: fn(T) -> CtldCall,
    ) -> Answer {
        Ok(tonic::Response::new(ctld_reply(
            self.answer(req, method, into).await,
        )))
    }

    async fn answer<T: prost::Message>(
        &self,
        req: tonic::Request<T>,
        method: &'static str,
        into: fn(T) -> CtldCall,
    ) -> Response {
        let s = &self.server;
        // Reports never act on a user's token.
        let req = match self.admit(req, method, None, |m| into(m).into_body()) {
            Ok(r) => r,
            Err(no) => return no,
        };
        let (kind, uid) = (req.body.message_type(), req.cred.uid);
        let _serving = Serving::start();
        let t0 = std::time::Instant::now();
        let r = s.report(req).await;
        if let Ok(mut st) = s.rpc_stats.lock() {
            st.record(kind, uid, t0.elapsed().as_micros() as u64);
        }
        r
    }
}

/// A command's answer.
type Commanded = Result<tonic::Response<pb::CommandReply>, tonic::Status>;

impl CtldService {
    /// A command's request: its credential and caller checked as for a
    /// framed request, then answered from the snapshot (ping, job
    /// listings) or by the writer.
    async fn command<T: prost::Message>(
        &self,
        req: tonic::Request<T>,
        method: &'static str,
        into: fn(T) -> CommandCall,
    ) -> Commanded {
        Ok(tonic::Response::new(self.reply(req, method, into).await))
    }

    /// The request a call makes once its credential, its message and its
    /// caller are accepted; else the refusal.
    fn admit<T: prost::Message>(
        &self,
        req: tonic::Request<T>,
        method: &'static str,
        jwt_key: Option<&[u8]>,
        body: impl FnOnce(T) -> Result<RequestBody, slurm_proto::grpc::ConvError>,
    ) -> Result<Request, Response> {
        let s = &self.server;
        let Some(caller) = grpc::caller_of(&req) else {
            return Err(Response::Error(SlurmError::InternalError.into()));
        };
        let to = slurm_common::auth::TO_CTLD;
        let cred =
            match grpc::verify_call_or_token(&req, method, to, &s.key, jwt_key, now(), &s.seen) {
                Ok(c) => c,
                Err(e) => {
                    tracing::info!(from = %caller.addr, %method, "refused: {e}");
                    return Err(Response::Error(refusal(&e).into()));
                }
            };
        let body = body(req.into_inner()).map_err(|e| {
            Response::Error(RpcError {
                error: SlurmError::ProtocolError,
                detail: Some(e.to_string()),
            })
        })?;
        let req = Request { cred, body };
        // A backup in standby answers pings, requests for control and
        // reconfigures only.
        if !s.ha.active()
            && !matches!(
                req.body,
                RequestBody::Ping
                    | RequestBody::Takeover
                    | RequestBody::RelinquishControl
                    | RequestBody::Reconfigure
                    | RequestBody::Shutdown { .. }
            )
        {
            return Err(Response::Error(SlurmError::InStandby.into()));
        }
        match s.refused(&req, &caller.peer) {
            Some(no) => Err(no),
            None => Ok(req),
        }
    }

    /// [`Self::admit`] for a command's call: a user's JWT is taken in place
    /// of a signature with `AuthAltTypes=auth/jwt`.
    fn admit_command<T: prost::Message>(
        &self,
        req: tonic::Request<T>,
        method: &'static str,
        into: fn(T) -> CommandCall,
    ) -> Result<Request, Response> {
        let jwt = self.server.jwt_key.as_deref();
        self.admit(req, method, jwt, |m| into(m).into_body())
    }

    /// `GetJobs`: the listing, made of each job's kept encoding, sent a
    /// part at a time (a big queue's listing is tens of milliseconds of
    /// work: the command decodes the first parts meanwhile). Each part is
    /// made on a blocking thread and sent from a task that gives up when
    /// the caller has not taken a part within [`LISTING_STALL`] (a caller
    /// that stops reading holds no thread);
    /// the last part says so, so a listing cut short is never taken for a
    /// whole one.
    fn listing(&self, req: tonic::Request<pb::JobQuery>) -> ListingStream {
        use pb::job_listing::Result as R;
        let one = |result| {
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            // (A fresh channel with room: this cannot fail.)
            let _ = tx.try_send(Ok(pb::JobListing {
                result: Some(result),
            }));
            tokio_stream::wrappers::ReceiverStream::new(rx)
        };
        let open = grpc::hold_open(&req);
        let req = match self.admit_command(req, command_method::GET_JOBS, CommandCall::GetJobs) {
            Ok(req) => req,
            Err(Response::Error(e)) => return one(R::Error(e.into())),
            Err(other) => {
                return one(R::Error(
                    RpcError {
                        error: SlurmError::InternalError,
                        detail: Some(format!("unexpected answer {other:?}")),
                    }
                    .into(),
                ))
            }
        };
        let (tx, rx) = tokio::sync::mpsc::channel(2);
        let s = self.server.clone();
        tokio::spawn(async move {
            let (kind, uid) = (req.body.message_type(), req.cred.uid);
            let filter = match req.body {
                RequestBody::GetJobsMatching(f) => Some(Arc::new(f)),
                _ => None,
            };
            let snap = s.snapshot();
            let viewer = s.job_viewer(&snap, uid).map(Arc::new);
            let mut next = Some(0);
            let mut busy = std::time::Duration::ZERO;
            while let Some(start) = next {
                let (me, snap2, f, v) = (s.clone(), snap.clone(), filter.clone(), viewer.clone());
                let t0 = std::time::Instant::now();
                let made = tokio::task::spawn_blocking(move || {
                    me.listing_part(&snap2, v.as_deref(), f.as_deref(), start)
                })
                .await;
                busy += t0.elapsed();
                let part = match made {
                    Ok((jobs, more)) => {
                        next = more;
                        Ok(pb::JobListing {
                            result: Some(R::Jobs(pb::EncodedJobs {
                                jobs,
                                last_update: snap.last_update,
                                last: more.is_none(),
                            })),
                        })
                    }
                    Err(e) => {
                        next = None;
                        Err(tonic::Status::internal(format!("listing failed: {e}")))
                    }
                };
                match tokio::time::timeout(LISTING_STALL, tx.send(part)).await {
                    Ok(Ok(())) => {}
                    // The caller left, or stopped reading.
                    _ => break,
                }
            }
            if let Ok(mut st) = s.rpc_stats.lock() {
                st.record(kind, uid, busy.as_micros() as u64);
            }
            drop(open);
        });
        tokio_stream::wrappers::ReceiverStream::new(rx)
    }

    async fn reply<T: prost::Message>(
        &self,
        req: tonic::Request<T>,
        method: &'static str,
        into: fn(T) -> CommandCall,
    ) -> pb::CommandReply {
        let s = &self.server;
        let req = match self.admit_command(req, method, into) {
            Ok(r) => r,
            Err(no) => return command_reply(no),
        };
        let (kind, uid) = (req.body.message_type(), req.cred.uid);
        let _serving = Serving::start();
        let t0 = std::time::Instant::now();
        let reply = match req.body {
            RequestBody::GetJobsDelta { epoch, since } => s.jobs_delta(uid, epoch, since),
            RequestBody::Takeover | RequestBody::RelinquishControl => {
                command_reply(s.control(req).await)
            }
            RequestBody::Shutdown { controller_only } => {
                command_reply(s.shutdown(&req, controller_only).await)
            }
            RequestBody::SetDebug { ref level } => command_reply(s.set_debug(&req, level)),
            RequestBody::SetDebugFlags { plus, minus } => {
                command_reply(s.set_debug_flags(&req, plus, minus))
            }
            RequestBody::SetSchedLogLevel { level } => {
                command_reply(s.set_sched_log_level(&req, level))
            }
            RequestBody::ResetDiag => command_reply(s.reset_diag(&req)),
            RequestBody::Reconfigure if !s.ha.active() => command_reply(s.reread(&req)),
            RequestBody::Reconfigure => {
                let r = s.reconfigure(&req).await;
                if matches!(r, Response::Ok) {
                    let ha = s.ha.clone();
                    tokio::spawn(async move { ha.tell_others_reconfigured().await });
                }
                command_reply(r)
            }
            _ => command_reply(match s.answer_from_snapshot(req) {
                Ok(r) => r,
                Err(req) => s.to_writer(*req).await,
            }),
        };
        if let Ok(mut st) = s.rpc_stats.lock() {
            st.record(kind, uid, t0.elapsed().as_micros() as u64);
        }
        reply
    }
}

#[tonic::async_trait]
impl pb::controller_server::Controller for CtldService {
    async fn get_config_files(
        &self,
        req: tonic::Request<pb::ConfigFilesRequest>,
    ) -> Result<tonic::Response<pb::ConfigFiles>, tonic::Status> {
        let s = &self.server;
        self.authenticate(&req, ctld_method::GET_CONFIG_FILES, "a configuration fetch")
            .map_err(|e| *e)?;
        let snap = s.snapshot();
        let Some(conf) = snap
            .conf
            .as_ref()
            .filter(|c| c.ctld_param("enable_configless").is_some())
        else {
            return Err(tonic::Status::failed_precondition(
                "configless mode is off (SlurmctldParameters=enable_configless)",
            ));
        };
        let dir = conf
            .path
            .parent()
            .map(std::path::Path::to_path_buf)
            .unwrap_or_default();
        let files = tokio::task::spawn_blocking(move || {
            slurm_proto::grpc::CONFIG_FILES
                .iter()
                .filter_map(|name| {
                    std::fs::read(dir.join(name))
                        .ok()
                        .map(|content| pb::ConfigFile {
                            name: name.to_string(),
                            content,
                        })
                })
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|_| tonic::Status::internal("cannot read the configuration"))?;
        Ok(tonic::Response::new(pb::ConfigFiles { files }))
    }

    type WatchStream =
        tokio_stream::wrappers::ReceiverStream<Result<pb::WatchEvent, tonic::Status>>;

    async fn watch(
        &self,
        req: tonic::Request<pb::WatchRequest>,
    ) -> Result<tonic::Response<Self::WatchStream>, tonic::Status> {
        let s = &self.server;
        let cred = self
            .authenticate(&req, ctld_method::WATCH, "a watch")
            .map_err(|e| *e)?;
        if s.rate_limited(cred.uid) {
            return Err(tonic::Status::resource_exhausted(
                SlurmError::Backoff.message(),
            ));
        }
        let (tx, rx) = tokio::sync::mpsc::channel(256);
        // The connection stays while the watch does.
        let open = grpc::hold_open(&req);
        let me = s.clone();
        tokio::spawn(async move {
            me.watch(cred.uid, req.into_inner(), tx).await;
            drop(open);
        });
        Ok(tonic::Response::new(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        ))
    }

    async fn register_node(&self, r: tonic::Request<pb::NodeRegistration>) -> Answer {
        self.handle(r, ctld_method::REGISTER_NODE, CtldCall::RegisterNode)
            .await
    }
    async fn heartbeat(&self, r: tonic::Request<pb::HeartbeatRequest>) -> Answer {
        self.handle(r, ctld_method::HEARTBEAT, CtldCall::Heartbeat)
            .await
    }
    async fn batch_complete(&self, r: tonic::Request<pb::BatchCompleteRequest>) -> Answer {
        self.handle(r, ctld_method::BATCH_COMPLETE, CtldCall::BatchComplete)
            .await
    }
    async fn job_cleaned(&self, r: tonic::Request<pb::JobOnNode>) -> Answer {
        self.handle(r, ctld_method::JOB_CLEANED, CtldCall::JobCleaned)
            .await
    }
    async fn epilog_failed(&self, r: tonic::Request<pb::JobOnNode>) -> Answer {
        self.handle(r, ctld_method::EPILOG_FAILED, CtldCall::EpilogFailed)
            .await
    }
    async fn prolog_failed(&self, r: tonic::Request<pb::JobOnNode>) -> Answer {
        self.handle(r, ctld_method::PROLOG_FAILED, CtldCall::PrologFailed)
            .await
    }
    async fn step_usage(&self, r: tonic::Request<pb::StepUsageRequest>) -> Answer {
        self.handle(r, ctld_method::STEP_USAGE, CtldCall::StepUsage)
            .await
    }
    async fn node_reports(
        &self,
        r: tonic::Request<pb::NodeReportBatch>,
    ) -> Result<tonic::Response<pb::NodeReportReplies>, tonic::Status> {
        // Checked as any report (credential, and with TLS the node's own
        // certificate for the node every event names); a refusal answers
        // the first event.
        let answers = match self.admit(
            r,
            ctld_method::NODE_REPORTS,
            None,
            slurm_proto::grpc::node_reports_of,
        ) {
            Err(no) => vec![no],
            Ok(Request {
                cred,
                body: RequestBody::NodeReports { reports, .. },
            }) => {
                self.server
                    .reports_to_writer(cred.uid, cred.gid, reports)
                    .await
            }
            Ok(_) => vec![Response::Error(SlurmError::ProtocolError.into())],
        };
        Ok(tonic::Response::new(pb::NodeReportReplies {
            replies: answers.into_iter().map(ctld_reply).collect(),
        }))
    }

    async fn ping(&self, r: tonic::Request<pb::Empty>) -> Commanded {
        self.command(r, command_method::PING, CommandCall::Ping)
            .await
    }
    async fn submit_job(&self, r: tonic::Request<pb::JobDesc>) -> Commanded {
        self.command(r, command_method::SUBMIT_JOB, |d| {
            CommandCall::SubmitJob(Box::new(d))
        })
        .await
    }
    async fn test_job(&self, r: tonic::Request<pb::JobDesc>) -> Commanded {
        self.command(r, command_method::TEST_JOB, |d| {
            CommandCall::TestJob(Box::new(d))
        })
        .await
    }
    async fn allocate_job(&self, r: tonic::Request<pb::JobDesc>) -> Commanded {
        self.command(r, command_method::ALLOCATE_JOB, |d| {
            CommandCall::AllocateJob(Box::new(d))
        })
        .await
    }
    type GetJobsStream = ListingStream;

    async fn get_jobs(
        &self,
        r: tonic::Request<pb::JobQuery>,
    ) -> Result<tonic::Response<ListingStream>, tonic::Status> {
        Ok(tonic::Response::new(self.listing(r)))
    }
    async fn cancel_jobs(&self, r: tonic::Request<pb::CancelFilter>) -> Commanded {
        self.command(r, command_method::CANCEL_JOBS, CommandCall::CancelJobs)
            .await
    }
    async fn complete_job(&self, r: tonic::Request<pb::CompleteJobRequest>) -> Commanded {
        self.command(r, command_method::COMPLETE_JOB, CommandCall::CompleteJob)
            .await
    }
    async fn create_step(&self, r: tonic::Request<pb::StepRequest>) -> Commanded {
        self.command(r, command_method::CREATE_STEP, CommandCall::CreateStep)
            .await
    }
    async fn step_complete(&self, r: tonic::Request<pb::StepCompleteRequest>) -> Commanded {
        self.command(r, command_method::STEP_COMPLETE, CommandCall::StepComplete)
            .await
    }
    async fn cancel_step(&self, r: tonic::Request<pb::CancelStepRequest>) -> Commanded {
        self.command(r, command_method::CANCEL_STEP, CommandCall::CancelStep)
            .await
    }
    async fn get_nodes(&self, r: tonic::Request<pb::Empty>) -> Commanded {
        self.command(r, command_method::GET_NODES, CommandCall::GetNodes)
            .await
    }
    async fn get_partitions(&self, r: tonic::Request<pb::Empty>) -> Commanded {
        self.command(
            r,
            command_method::GET_PARTITIONS,
            CommandCall::GetPartitions,
        )
        .await
    }
    async fn update_job(&self, r: tonic::Request<pb::UpdateJobRequest>) -> Commanded {
        self.command(r, command_method::UPDATE_JOB, CommandCall::UpdateJob)
            .await
    }
    async fn suspend_job(&self, r: tonic::Request<pb::SuspendRequest>) -> Commanded {
        self.command(r, command_method::SUSPEND_JOB, CommandCall::SuspendJob)
            .await
    }
    async fn update_node(&self, r: tonic::Request<pb::UpdateNodeRequest>) -> Commanded {
        self.command(r, command_method::UPDATE_NODE, CommandCall::UpdateNode)
            .await
    }
    async fn top_jobs(&self, r: tonic::Request<pb::TopJobsRequest>) -> Commanded {
        self.command(r, command_method::TOP_JOBS, CommandCall::TopJobs)
            .await
    }
    async fn notify_job(&self, r: tonic::Request<pb::JobNotifyRequest>) -> Commanded {
        self.command(r, command_method::NOTIFY_JOB, CommandCall::NotifyJob)
            .await
    }
    async fn update_step(&self, r: tonic::Request<pb::StepUpdateRequest>) -> Commanded {
        self.command(r, command_method::UPDATE_STEP, CommandCall::UpdateStep)
            .await
    }
    async fn reboot_nodes(&self, r: tonic::Request<pb::RebootNodesRequest>) -> Commanded {
        self.command(r, command_method::REBOOT_NODES, CommandCall::RebootNodes)
            .await
    }
    async fn reconfigure(&self, r: tonic::Request<pb::Empty>) -> Commanded {
        self.command(r, command_method::RECONFIGURE, CommandCall::Reconfigure)
            .await
    }
    async fn get_token(&self, r: tonic::Request<pb::TokenRequest>) -> Commanded {
        self.command(r, command_method::GET_TOKEN, CommandCall::GetToken)
            .await
    }
    async fn get_licenses(&self, r: tonic::Request<pb::Empty>) -> Commanded {
        self.command(r, command_method::GET_LICENSES, CommandCall::GetLicenses)
            .await
    }
    async fn get_topo_config(&self, r: tonic::Request<pb::Empty>) -> Commanded {
        self.command(
            r,
            command_method::GET_TOPO_CONFIG,
            CommandCall::GetTopoConfig,
        )
        .await
    }
    async fn get_job_script(&self, r: tonic::Request<pb::JobIdRequest>) -> Commanded {
        self.command(r, command_method::GET_JOB_SCRIPT, CommandCall::GetJobScript)
            .await
    }
    async fn get_config(&self, r: tonic::Request<pb::Empty>) -> Commanded {
        self.command(r, command_method::GET_CONFIG, CommandCall::GetConfig)
            .await
    }
    async fn get_topology(&self, r: tonic::Request<pb::Empty>) -> Commanded {
        self.command(r, command_method::GET_TOPOLOGY, CommandCall::GetTopology)
            .await
    }
    async fn get_diag(&self, r: tonic::Request<pb::Empty>) -> Commanded {
        self.command(r, command_method::GET_DIAG, CommandCall::GetDiag)
            .await
    }
    async fn reset_diag(&self, r: tonic::Request<pb::Empty>) -> Commanded {
        self.command(r, command_method::RESET_DIAG, CommandCall::ResetDiag)
            .await
    }
    async fn get_priorities(&self, r: tonic::Request<pb::Empty>) -> Commanded {
        self.command(
            r,
            command_method::GET_PRIORITIES,
            CommandCall::GetPriorities,
        )
        .await
    }
    async fn get_shares(&self, r: tonic::Request<pb::Empty>) -> Commanded {
        self.command(r, command_method::GET_SHARES, CommandCall::GetShares)
            .await
    }
    async fn get_reservations(&self, r: tonic::Request<pb::Empty>) -> Commanded {
        self.command(
            r,
            command_method::GET_RESERVATIONS,
            CommandCall::GetReservations,
        )
        .await
    }
    async fn create_reservation(&self, r: tonic::Request<pb::ReservationSpec>) -> Commanded {
        self.command(
            r,
            command_method::CREATE_RESERVATION,
            CommandCall::CreateReservation,
        )
        .await
    }
    async fn update_reservation(&self, r: tonic::Request<pb::ReservationSpec>) -> Commanded {
        self.command(
            r,
            command_method::UPDATE_RESERVATION,
            CommandCall::UpdateReservation,
        )
        .await
    }
    async fn delete_reservation(&self, r: tonic::Request<pb::NameRequest>) -> Commanded {
        self.command(
            r,
            command_method::DELETE_RESERVATION,
            CommandCall::DeleteReservation,
        )
        .await
    }
    async fn update_partition(&self, r: tonic::Request<pb::PartitionUpdate>) -> Commanded {
        self.command(
            r,
            command_method::UPDATE_PARTITION,
            CommandCall::UpdatePartition,
        )
        .await
    }
    async fn create_node(&self, r: tonic::Request<pb::NodeSpec>) -> Commanded {
        self.command(r, command_method::CREATE_NODE, CommandCall::CreateNode)
            .await
    }
    async fn delete_node(&self, r: tonic::Request<pb::NameRequest>) -> Commanded {
        self.command(r, command_method::DELETE_NODE, CommandCall::DeleteNode)
            .await
    }
    async fn acct_changed(&self, r: tonic::Request<pb::Empty>) -> Commanded {
        self.command(r, command_method::ACCT_CHANGED, CommandCall::AcctChanged)
            .await
    }
    async fn create_partition(&self, r: tonic::Request<pb::PartitionUpdate>) -> Commanded {
        self.command(
            r,
            command_method::CREATE_PARTITION,
            CommandCall::CreatePartition,
        )
        .await
    }
    async fn delete_partition(&self, r: tonic::Request<pb::NameRequest>) -> Commanded {
        self.command(
            r,
            command_method::DELETE_PARTITION,
            CommandCall::DeletePartition,
        )
        .await
    }
    async fn takeover(&self, r: tonic::Request<pb::Empty>) -> Commanded {
        self.command(r, command_method::TAKEOVER, CommandCall::Takeover)
            .await
    }
    async fn shutdown(&self, r: tonic::Request<pb::ShutdownRequest>) -> Commanded {
        self.command(r, command_method::SHUTDOWN, CommandCall::Shutdown)
            .await
    }
    async fn replicate(
        &self,
        r: tonic::Request<pb::RaftMessage>,
    ) -> Result<tonic::Response<pb::RaftMessage>, tonic::Status> {
        let s = &self.server;
        let method = command_method::REPLICATE;
        let Some(caller) = grpc::caller_of(&r) else {
            return Err(tonic::Status::internal("no caller"));
        };
        let cred = grpc::verify_call_or_token(
            &r,
            method,
            slurm_common::auth::TO_CTLD,
            &s.key,
            None,
            now(),
            &s.seen,
        )
        .map_err(|e| {
            tracing::info!(from = %caller.addr, %method, "refused: {e}");
            tonic::Status::unauthenticated(e.to_string())
        })?;
        // Only another controller: root or SlurmUser, and with TLS over a
        // controller's certificate.
        let names = s.ha.controllers.iter().map(|c| c.0.as_str());
        let from_controller = !caller.peer.secured()
            || s.ha
                .tls
                .as_ref()
                .is_some_and(|t| t.is_controller(&caller.peer, names));
        if !s.root_or_slurm_user(cred.uid) || !from_controller {
            tracing::warn!(
                uid = cred.uid,
                from = %caller.addr,
                "refused a Raft message: not another controller"
            );
            return Err(tonic::Status::permission_denied(
                "Raft messages are taken only from another controller",
            ));
        }
        let Some(rep) = &s.replica else {
            return Err(tonic::Status::failed_precondition(
                "this controller does not replicate its state (SlurmctldParameters=replicate_state)",
            ));
        };
        let m = r.into_inner();
        let reply = match rep.serve(&m.kind, &m.body).await {
            Ok(body) => pb::RaftMessage {
                kind: "ok".into(),
                body,
            },
            Err(e) => pb::RaftMessage {
                kind: "error".into(),
                body: e.into_bytes(),
            },
        };
        Ok(tonic::Response::new(reply))
    }
    async fn set_debug(&self, r: tonic::Request<pb::DebugLevel>) -> Commanded {
        self.command(r, command_method::SET_DEBUG, CommandCall::SetDebug)
            .await
    }
    async fn set_sched_log_level(&self, r: tonic::Request<pb::SchedLogLevel>) -> Commanded {
        self.command(
            r,
            command_method::SET_SCHED_LOG_LEVEL,
            CommandCall::SetSchedLogLevel,
        )
        .await
    }
    async fn set_debug_flags(&self, r: tonic::Request<pb::DebugFlagsRequest>) -> Commanded {
        self.command(
            r,
            command_method::SET_DEBUG_FLAGS,
            CommandCall::SetDebugFlags,
        )
        .await
    }
    async fn set_fs_dampening_factor(&self, r: tonic::Request<pb::FsDampeningFactor>) -> Commanded {
        self.command(
            r,
            command_method::SET_FS_DAMPENING_FACTOR,
            CommandCall::SetFsDampeningFactor,
        )
        .await
    }
    async fn relinquish_control(&self, r: tonic::Request<pb::Empty>) -> Commanded {
        self.command(
            r,
            command_method::RELINQUISH_CONTROL,
            CommandCall::RelinquishControl,
        )
        .await
    }
    async fn get_jobs_delta(&self, r: tonic::Request<pb::JobsDeltaRequest>) -> Commanded {
        self.command(r, command_method::GET_JOBS_DELTA, CommandCall::GetJobsDelta)
            .await
    }
}
