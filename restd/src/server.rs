//! The HTTP daemon: listeners (TCP and unix sockets), authentication
//! (`rest_auth/jwt`, `rest_auth/local`) and the `slurm/v0.0.44` handlers,
//! each a translation to one or two controller RPCs.
//!
//! Every body is `fields + meta + errors + warnings`; on failure the
//! required fields of the path's schema are still present (empty), so error
//! bodies validate against the same schema. Status codes: 400 for a body or
//! query we cannot read (with where), 401 unauthenticated, 403 not allowed,
//! 404 unknown job/node/partition/reservation, 422 for a request the
//! controller rejects, 501 for what is not implemented, 503 when the
//! controller cannot be reached.

use crate::openapi::{self as oa, num, time, Client};
use crate::request::{self, BodyError};
use axum::body::Bytes;
use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response as HttpResponse};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Map, Value};
use slurm_common::auth::Key;
use slurm_common::conf::SlurmConf;
use slurm_proto::{
    JobId, JobRecord, NodeRecord, PartitionRecord, RequestBody, ReservationRecord, Response,
    RpcError, SlurmError,
};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

// Slurm error numbers for what the gateway itself reports.
const ESLURM_REST_INVALID_QUERY: i32 = 9000;
const ESLURM_REST_FAIL_PARSING: i32 = 9001;
const ESLURM_REST_INVALID_JOBS_DESC: i32 = 9002;
const ESLURM_REST_UNKNOWN_URL: i32 = 9010;
const SLURM_PROTOCOL_AUTHENTICATION_ERROR: i32 = 1007;
const SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR: i32 = 1800;
const SLURM_ERROR: i32 = -1;

/// Largest request body accepted.
pub const MAX_BODY: usize = 16 << 20;

/// Which `rest_auth` plugins are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthModes {
    pub jwt: bool,
    pub local: bool,
}

impl AuthModes {
    /// Parse `-a`: a comma-separated list of `rest_auth/jwt`,
    /// `rest_auth/local` (the `rest_auth/` prefix may be left out).
    pub fn parse(s: &str) -> Result<AuthModes, String> {
        let mut m = AuthModes {
            jwt: false,
            local: false,
        };
        for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match p.strip_prefix("rest_auth/").unwrap_or(p) {
                "jwt" => m.jwt = true,
                "local" => m.local = true,
                other => return Err(format!("unknown authentication plugin rest_auth/{other}")),
            }
        }
        if !m.jwt && !m.local {
            return Err("no authentication plugin given".into());
        }
        Ok(m)
    }
}

/// Where to listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    Tcp(String),
    Unix(PathBuf),
}

impl Listen {
    /// `host:port`, `[v6]:port`, `:port` or `unix:/path`.
    pub fn parse(s: &str) -> Result<Listen, String> {
        if let Some(p) = s.strip_prefix("unix:") {
            if p.is_empty() {
                return Err(format!("{s}: empty socket path"));
            }
            return Ok(Listen::Unix(PathBuf::from(p)));
        }
        let (host, port) = s
            .rsplit_once(':')
            .ok_or_else(|| format!("{s}: expected host:port or unix:/path"))?;
        port.parse::<u16>()
            .map_err(|_| format!("{s}: invalid port {port}"))?;
        let host = if host.is_empty() { "0.0.0.0" } else { host };
        Ok(Listen::Tcp(format!("{host}:{port}")))
    }
}

/// Who is on the other end of a connection.
#[derive(Debug, Clone)]
pub enum Peer {
    Tcp(std::net::SocketAddr),
    Unix { uid: Option<u32>, gid: Option<u32> },
}

impl Connected<axum::serve::IncomingStream<'_, tokio::net::TcpListener>> for Peer {
    fn connect_info(s: axum::serve::IncomingStream<'_, tokio::net::TcpListener>) -> Self {
        Peer::Tcp(*s.remote_addr())
    }
}

impl Connected<axum::serve::IncomingStream<'_, tokio::net::UnixListener>> for Peer {
    fn connect_info(s: axum::serve::IncomingStream<'_, tokio::net::UnixListener>) -> Self {
        match s.io().peer_cred() {
            Ok(c) => Peer::Unix {
                uid: Some(c.uid()),
                gid: Some(c.gid()),
            },
            Err(_) => Peer::Unix {
                uid: None,
                gid: None,
            },
        }
    }
}

impl Peer {
    fn source(&self) -> String {
        match self {
            Peer::Tcp(a) => a.to_string(),
            Peer::Unix { uid: Some(u), .. } => format!("unix socket (uid {u})"),
            Peer::Unix { .. } => "unix socket".into(),
        }
    }
}

/// The identity a request acts as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ident {
    pub uid: u32,
    pub gid: u32,
    pub user: String,
    pub group: String,
    /// The caller's token, passed on to the daemons when this gateway
    /// holds no key to sign for the user.
    pub token: Option<String>,
}

/// A failed request: the status and what goes in `errors`/`warnings`.
#[derive(Debug, Clone)]
pub struct Fail {
    pub status: StatusCode,
    pub errors: Vec<Value>,
    pub warnings: Vec<Value>,
    /// Fields to report even though the request failed.
    pub fields: Map<String, Value>,
}

impl Fail {
    fn new(status: StatusCode, number: i32, error: &str, description: &str, source: &str) -> Fail {
        Fail {
            status,
            errors: vec![oa::error_entry(number, error, description, source)],
            warnings: Vec::new(),
            fields: Map::new(),
        }
    }

    fn unauthorized(description: &str) -> Fail {
        Fail::new(
            StatusCode::UNAUTHORIZED,
            SLURM_PROTOCOL_AUTHENTICATION_ERROR,
            "Protocol authentication error",
            description,
            "rest_auth",
        )
    }

    fn body(e: BodyError, source: &str) -> Fail {
        Fail::new(
            StatusCode::BAD_REQUEST,
            ESLURM_REST_FAIL_PARSING,
            "Failure during parsing",
            &format!("{}: {}", e.path, e.message),
            source,
        )
    }

    fn query(description: String, source: &str) -> Fail {
        Fail::new(
            StatusCode::BAD_REQUEST,
            ESLURM_REST_INVALID_QUERY,
            "Query empty or not RFC7320 compliant",
            &description,
            source,
        )
    }

    fn rpc(e: &RpcError, not_found: &[SlurmError], source: &str) -> Fail {
        let status = if not_found.contains(&e.error) {
            StatusCode::NOT_FOUND
        } else {
            match e.error {
                SlurmError::AccessDenied => StatusCode::FORBIDDEN,
                SlurmError::InvalidCredential | SlurmError::ExpiredCredential => {
                    StatusCode::UNAUTHORIZED
                }
                SlurmError::InternalError | SlurmError::ProtocolError => {
                    StatusCode::INTERNAL_SERVER_ERROR
                }
                _ => StatusCode::UNPROCESSABLE_ENTITY,
            }
        };
        Fail::new(
            status,
            e.error.code(),
            e.error.message(),
            e.detail.as_deref().unwrap_or(""),
            source,
        )
    }
}

/// A successful answer.
#[derive(Debug, Clone, Default)]
pub struct Done {
    pub fields: Map<String, Value>,
    pub warnings: Vec<Value>,
    /// A field already serialized (the job list), spliced into the body.
    pub raw: Option<(&'static str, Arc<String>)>,
}

type HResult = Result<Done, Fail>;

fn done(fields: Value) -> Done {
    Done {
        fields: match fields {
            Value::Object(m) => m,
            _ => Map::new(),
        },
        warnings: Vec::new(),
        raw: None,
    }
}

/// The required fields of each response schema, empty, for error bodies.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Plain,
    Ping,
    Diag,
    Licenses,
    Shares,
    Jobs,
    Kill,
    Submit,
    Alloc,
    JobPost,
    Nodes,
    Partitions,
    Reservations,
    ReservationMod,
    Resources,
    DbPing,
    DbDiag,
    DbJobs,
    Accounts,
    Users,
    Assocs,
    Qos,
    Clusters,
    Tres,
    AccountsRemoved,
    AssocsRemoved,
    QosRemoved,
    ClustersRemoved,
}

impl Kind {
    fn empty(self) -> Map<String, Value> {
        let v = match self {
            Kind::Plain | Kind::Submit | Kind::Alloc | Kind::JobPost => json!({}),
            Kind::Ping => json!({"pings": []}),
            Kind::Diag => json!({"statistics": {}}),
            Kind::Licenses => json!({"licenses": [], "last_update": num(0)}),
            Kind::Shares => json!({"shares": {"shares": [], "total_shares": 0}}),
            Kind::Jobs => json!({"jobs": [], "last_backfill": num(0), "last_update": num(0)}),
            Kind::Kill => json!({"status": []}),
            Kind::Nodes => json!({"nodes": [], "last_update": num(0)}),
            Kind::Partitions => json!({"partitions": [], "last_update": num(0)}),
            Kind::Reservations => json!({"reservations": [], "last_update": num(0)}),
            Kind::ReservationMod => json!({"reservations": []}),
            Kind::Resources => json!({"nodes": []}),
            Kind::DbPing => json!({"pings": []}),
            Kind::DbDiag => json!({"statistics": {}}),
            Kind::DbJobs => json!({"jobs": []}),
            Kind::Accounts => json!({"accounts": []}),
            Kind::Users => json!({"users": []}),
            Kind::Assocs => json!({"associations": []}),
            Kind::Qos => json!({"qos": []}),
            Kind::Clusters => json!({"clusters": []}),
            Kind::Tres => json!({"TRES": []}),
            Kind::AccountsRemoved => json!({"removed_accounts": []}),
            Kind::AssocsRemoved => json!({"removed_associations": []}),
            Kind::QosRemoved => json!({"removed_qos": []}),
            Kind::ClustersRemoved => json!({"deleted_clusters": []}),
        };
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }
}

/// The job list as last served: each job's JSON and the whole array, as of
/// a controller run (`epoch`) and state `version`.
struct JobsCache {
    epoch: u64,
    version: u64,
    last_update: i64,
    per_job: HashMap<JobId, Arc<String>>,
    raw: Arc<String>,
}

/// Shared state of the daemon.
pub struct App {
    pub conf: SlurmConf,
    pub modes: AuthModes,
    /// The cluster key, to sign requests as the authenticated user.
    key: Option<Key>,
    jwt_key: Option<Vec<u8>>,
    slurm_uid: u32,
    host: String,
    ctld_addrs: Vec<(String, String)>,
    /// slurmdbd, when accounting goes there.
    dbd_addr: Option<String>,
    timeout: Duration,
    /// The job list as last served, per job and whole.
    jobs_cache: std::sync::Mutex<Option<Arc<JobsCache>>>,
}

impl App {
    /// Build from `slurm.conf`. Errors name what is missing.
    pub fn new(conf: SlurmConf, modes: AuthModes) -> Result<App, String> {
        let key = Key::load(&slurm_common::auth::key_path(&conf.path)).ok();
        let jwt_key = if modes.jwt {
            match crate::jwt::conf_key(&conf) {
                Ok(k) => Some(k),
                Err(crate::jwt::JwtError::NoKey) if modes.local => None,
                // Run unprivileged, as Slurm's is: no key to read, so tokens
                // are passed on to the controller and slurmdbd, which check
                // them.
                Err(crate::jwt::JwtError::Key { .. }) => None,
                Err(e) => return Err(format!("rest_auth/jwt: {e}")),
            }
        } else {
            None
        };
        // TLS on: calls to the controller and slurmdbd check their
        // certificates against the CA (slurmrestd shows none of its own).
        slurm_common::tls::setup(&conf, &slurm_common::tls::Role::Restd)
            .map_err(|e| e.to_string())?;
        let slurm_uid = slurm_common::users::parse_user(&conf.slurm_user).unwrap_or(0);
        let ctld_addrs = conf.controllers();
        let timeout = Duration::from_secs(u64::from(conf.message_timeout.clamp(2, 60)) * 3);
        let dbd_addr = (conf.accounting_storage_type == "accounting_storage/slurmdbd")
            .then(|| conf.dbd_address());
        Ok(App {
            conf,
            modes,
            key,
            jwt_key,
            slurm_uid,
            host: slurm_common::users::hostname(),
            ctld_addrs,
            dbd_addr,
            timeout,
            jobs_cache: std::sync::Mutex::new(None),
        })
    }

    fn cluster(&self) -> &str {
        &self.conf.cluster_name
    }

    fn privileged(&self, uid: u32) -> bool {
        uid == 0 || uid == self.slurm_uid
    }

    fn ident_of_name(&self, name: &str) -> Result<Ident, Fail> {
        let u = slurm_common::users::user_by_name(name)
            .ok_or_else(|| Fail::unauthorized(&format!("unknown user \"{name}\"")))?;
        Ok(Ident {
            uid: u.uid,
            gid: u.gid,
            group: slurm_common::users::group_name_or_id(u.gid),
            user: u.name,
            token: None,
        })
    }

    /// Who the request acts as.
    pub fn authenticate(&self, headers: &HeaderMap, peer: &Peer) -> Result<Ident, Fail> {
        let hdr = |n: &str| -> Result<Option<String>, Fail> {
            match headers.get(n) {
                None => Ok(None),
                Some(v) => v
                    .to_str()
                    .map(|s| Some(s.trim().to_string()))
                    .map_err(|_| Fail::unauthorized(&format!("header {n} is not valid text"))),
            }
        };
        let user_hdr = hdr("x-slurm-user-name")?.filter(|s| !s.is_empty());
        let mut token = hdr("x-slurm-user-token")?.filter(|s| !s.is_empty());
        if token.is_none() {
            if let Some(a) = hdr("authorization")? {
                let (scheme, rest) = a.split_once(' ').unwrap_or((a.as_str(), ""));
                if scheme.eq_ignore_ascii_case("bearer") && !rest.trim().is_empty() {
                    token = Some(rest.trim().to_string());
                } else {
                    return Err(Fail::unauthorized(
                        "Authorization header must be \"Bearer <token>\"",
                    ));
                }
            }
        }
        if let Some(t) = token {
            if !self.modes.jwt {
                return Err(Fail::unauthorized("rest_auth/jwt is not enabled"));
            }
            let Some(key) = &self.jwt_key else {
                // No key here: the token goes on to the daemons, which
                // check it; acting for another user needs a key.
                let name = crate::jwt::unverified_user(&t)
                    .map_err(|e| Fail::unauthorized(&format!("rejecting token: {e}")))?;
                if user_hdr.as_deref().is_some_and(|u| u != name) {
                    return Err(Fail::unauthorized(
                        "X-SLURM-USER-NAME must name the token's user (slurmrestd holds no key)",
                    ));
                }
                let mut who = self.ident_of_name(&name)?;
                who.token = Some(t);
                return Ok(who);
            };
            let claims = crate::jwt::verify_token(key, &t, slurm_common::auth::now())
                .map_err(|e| Fail::unauthorized(&format!("rejecting token: {e}")))?;
            let token_user = self.ident_of_name(&claims.sun)?;
            return match user_hdr {
                Some(u) if u != claims.sun => {
                    if self.privileged(token_user.uid) {
                        self.ident_of_name(&u)
                    } else {
                        Err(Fail::unauthorized(&format!(
                            "token of {} may not act as {u} (only root and SlurmUser may)",
                            claims.sun
                        )))
                    }
                }
                _ => Ok(token_user),
            };
        }
        if self.modes.local {
            if let Peer::Unix {
                uid: Some(uid),
                gid: Some(gid),
            } = peer
            {
                let me = Ident {
                    uid: *uid,
                    gid: *gid,
                    user: slurm_common::users::user_name_or_id(*uid),
                    group: slurm_common::users::group_name_or_id(*gid),
                    token: None,
                };
                return match user_hdr {
                    Some(u) if u != me.user => {
                        if self.privileged(me.uid) {
                            self.ident_of_name(&u)
                        } else {
                            Err(Fail::unauthorized(&format!(
                                "{} may not act as {u} (only root and SlurmUser may)",
                                me.user
                            )))
                        }
                    }
                    _ => Ok(me),
                };
            }
        }
        Err(Fail::unauthorized(if self.modes.jwt {
            "no token: send X-SLURM-USER-TOKEN (and X-SLURM-USER-NAME) or Authorization: Bearer"
        } else {
            "rest_auth/local identifies callers on unix sockets only"
        }))
    }

    /// A credential for `who` and the request `b`.
    pub(crate) async fn credential(
        &self,
        who: &Ident,
        b: slurm_common::auth::Binding,
    ) -> Result<slurm_proto::Credential, Fail> {
        let now = slurm_common::auth::now();
        if let Some(k) = &self.key {
            return Ok(k.sign(who.uid, who.gid, &self.host, now, &b));
        }
        if let Some(token) = &who.token {
            return Ok(slurm_proto::Credential {
                uid: who.uid,
                gid: who.gid,
                host: self.host.clone(),
                issued: now,
                expires: now,
                nonce: 0,
                method: b.method,
                body_hash: b.body_hash,
                to: b.to,
                sig: String::new(),
                token: token.clone(),
            });
        }
        // SAFETY: getuid cannot fail.
        let me = unsafe { libc::getuid() };
        if who.uid != me {
            return Err(Fail::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                SLURM_ERROR,
                "Unable to act as the authenticated user",
                &format!(
                    "the cluster key is not readable by slurmrestd, so it cannot act as uid {}",
                    who.uid
                ),
                "slurmrestd",
            ));
        }
        let src = slurm_common::auth::CredSource::from_conf(&self.conf);
        tokio::task::spawn_blocking(move || src.credential(&b))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()))
            .map_err(|e| {
                Fail::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    SLURM_ERROR,
                    "Unable to get a credential",
                    &e,
                    "slurmrestd",
                )
            })
    }

    /// One RPC to the controller as `who`.
    async fn call(&self, who: &Ident, body: RequestBody, source: &str) -> Result<Response, Fail> {
        match slurm_proto::grpc::commands::CommandCall::from_body(body) {
            Ok(call) => self.call_grpc(who, call, source).await,
            Err(body) => Err(Fail::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                SLURM_ERROR,
                "No controller method for the request",
                body.message_type().0,
                source,
            )),
        }
    }

    /// One request to the controller over this process's kept gRPC
    /// channel to it (to the next controller when one cannot be reached).
    async fn call_grpc(
        &self,
        who: &Ident,
        call: slurm_proto::grpc::commands::CommandCall,
        source: &str,
    ) -> Result<Response, Fail> {
        use slurm_common::auth::{Binding, TO_CTLD};
        let unreachable = |why: &str| {
            Fail::new(
                StatusCode::SERVICE_UNAVAILABLE,
                SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR,
                "Unable to contact slurm controller (connect failure)",
                why,
                source,
            )
        };
        let binding = Binding::for_message(call.method(), &call.encode(), TO_CTLD);
        let cred = self.credential(who, binding).await?;
        let mut last = String::new();
        for (name, addr) in &self.ctld_addrs {
            let ch =
                slurm_common::grpc::kept(addr, name).map_err(|e| unreachable(&e.to_string()))?;
            let c = cred.clone();
            let sign = move |_: &Binding| Ok(c);
            match slurm_common::grpc::call_command(&ch, name, call.clone(), sign, self.timeout)
                .await
            {
                // A backup in standby: the next controller may be in control.
                Ok(Response::Error(e)) if e.error == slurm_proto::SlurmError::InStandby => {
                    last = e.to_string()
                }
                Ok(r) => return Ok(r),
                // Not reached (or not there): try the next controller.
                Err(e @ slurm_common::net::NetError::Connect { .. }) => last = e.to_string(),
                Err(slurm_common::net::NetError::Rpc { code, why }) if code == "Unavailable" => {
                    last = why
                }
                Err(e) => return Err(unreachable(&e.to_string())),
            }
        }
        Err(unreachable(&last))
    }

    fn meta(&self, peer: &Peer, who: Option<&Ident>) -> Value {
        let client = Client {
            source: peer.source(),
            user: who.map(|w| w.user.clone()).unwrap_or_default(),
            group: who.map(|w| w.group.clone()).unwrap_or_default(),
        };
        oa::meta(self.cluster(), Some(&client), &[])
    }

    fn respond(&self, kind: Kind, peer: &Peer, who: Option<&Ident>, r: HResult) -> HttpResponse {
        let meta = self.meta(peer, who);
        let (status, body) = match r {
            Ok(d) if d.raw.is_some() => {
                let mut fields = kind.empty();
                fields.extend(d.fields);
                let Some((name, raw)) = d.raw else {
                    unreachable!("checked above")
                };
                fields.remove(name);
                let body = oa::envelope(fields, meta, Vec::new(), d.warnings);
                // `{"name":<raw>,` + the rest of the object.
                let rest = serde_json::to_vec(&body).unwrap_or_else(|_| b"{}".to_vec());
                let mut bytes = Vec::with_capacity(raw.len() + rest.len() + name.len() + 4);
                bytes.extend_from_slice(b"{\"");
                bytes.extend_from_slice(name.as_bytes());
                bytes.extend_from_slice(b"\":");
                bytes.extend_from_slice(raw.as_bytes());
                if rest.len() > 2 {
                    bytes.push(b',');
                }
                bytes.extend_from_slice(&rest[1..]);
                return (
                    StatusCode::OK,
                    [(header::CONTENT_TYPE, "application/json")],
                    bytes,
                )
                    .into_response();
            }
            Ok(d) => {
                let mut fields = kind.empty();
                fields.extend(d.fields);
                (
                    StatusCode::OK,
                    oa::envelope(fields, meta, Vec::new(), d.warnings),
                )
            }
            Err(f) => {
                let mut fields = kind.empty();
                fields.extend(f.fields);
                (f.status, oa::envelope(fields, meta, f.errors, f.warnings))
            }
        };
        json_response(status, &body)
    }
}

fn json_response(status: StatusCode, body: &Value) -> HttpResponse {
    let bytes = serde_json::to_vec(body).unwrap_or_else(|_| b"{}".to_vec());
    (status, [(header::CONTENT_TYPE, "application/json")], bytes).into_response()
}

fn warnings(list: Vec<String>, source: &str) -> Vec<Value> {
    list.iter().map(|w| oa::warning_entry(w, source)).collect()
}

fn unexpected(r: &Response, source: &str) -> Fail {
    unexpected_from("slurmctld", r, source)
}

/// A reply of the wrong kind from `daemon`.
fn unexpected_from<T>(daemon: &str, r: &T, source: &str) -> Fail {
    Fail::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        SLURM_ERROR,
        &format!("Unexpected reply from {daemon}"),
        &format!("{:?}", std::mem::discriminant(r)),
        source,
    )
}

/// A comma-separated query parameter (`users=a,b`), blanks dropped.
fn list(q: &Q, key: &str) -> Vec<String> {
    q.get(key)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

type Q = HashMap<String, String>;

/// `update_time`: Unix seconds (or empty).
fn update_time(q: &Q, source: &str) -> Result<Option<i64>, Fail> {
    match q.get("update_time").map(|s| s.trim()) {
        None | Some("") => Ok(None),
        Some(s) => s
            .parse::<i64>()
            .map(Some)
            .or_else(|_| {
                slurm_common::timefmt::parse_timestamp(s, slurm_common::auth::now()).map(Some)
            })
            .map_err(|_| Fail::query(format!("update_time: invalid time \"{s}\""), source)),
    }
}

// ----------------------------------------------------------------- handlers

impl App {
    async fn ping(&self, who: &Ident) -> HResult {
        let mut pings = Vec::new();
        for (i, (name, addr)) in self.ctld_addrs.iter().enumerate() {
            use slurm_proto::grpc::commands::CommandCall;
            let call = CommandCall::Ping(slurm_proto::grpc::pb::Empty {});
            let binding = slurm_common::auth::Binding::for_message(
                call.method(),
                &call.encode(),
                slurm_common::auth::TO_CTLD,
            );
            let cred = self.credential(who, binding).await?;
            let start = Instant::now();
            let r = match slurm_common::grpc::kept(addr, name) {
                Ok(ch) => {
                    let sign = move |_: &slurm_common::auth::Binding| Ok(cred);
                    slurm_common::grpc::call_command(&ch, name, call, sign, self.timeout).await
                }
                Err(e) => Err(e),
            };
            let up = matches!(r, Ok(Response::Pong { .. }));
            pings.push(json!({
                "hostname": name,
                "pinged": if up { "UP" } else { "DOWN" },
                "responding": up,
                "latency": start.elapsed().as_micros() as i64,
                "mode": slurm_common::conf::SlurmConf::controller_mode(i, self.ctld_addrs.len()),
                "primary": i == 0,
            }));
        }
        Ok(done(json!({ "pings": pings })))
    }

    async fn diag(&self, who: &Ident) -> HResult {
        let src = "slurm_get_statistics";
        let d = match self.call(who, RequestBody::GetDiag, src).await? {
            Response::Diag(d) => d,
            Response::Error(e) => return Err(Fail::rpc(&e, &[], src)),
            r => return Err(unexpected(&r, src)),
        };
        Ok(done(json!({ "statistics": oa::diag_statistics(&d) })))
    }

    async fn reconfigure(&self, who: &Ident) -> HResult {
        match self
            .call(who, RequestBody::Reconfigure, "slurm_reconfigure")
            .await?
        {
            Response::Ok => Ok(done(json!({}))),
            Response::Error(e) => Err(Fail::rpc(&e, &[], "slurm_reconfigure")),
            r => Err(unexpected(&r, "slurm_reconfigure")),
        }
    }

    async fn licenses(&self, who: &Ident) -> HResult {
        match self
            .call(who, RequestBody::GetLicenses, "slurm_load_licenses")
            .await?
        {
            Response::Licenses {
                licenses,
                last_update,
            } => Ok(done(oa::licenses_body(&licenses, last_update))),
            Response::Error(e) => Err(Fail::rpc(&e, &[], "slurm_load_licenses")),
            r => Err(unexpected(&r, "slurm_load_licenses")),
        }
    }

    async fn shares(&self, who: &Ident, q: &Q) -> HResult {
        let src = "slurm_associations_get_shares";
        let rows = match self.call(who, RequestBody::GetShares, src).await? {
            Response::Shares(s) => s,
            Response::Error(e) => return Err(Fail::rpc(&e, &[], src)),
            r => return Err(unexpected(&r, src)),
        };
        let (accounts, users) = (list(q, "accounts"), list(q, "users"));
        Ok(done(json!({
            "shares": oa::shares_info(&rows, self.cluster(), &accounts, &users)
        })))
    }

    async fn jobs(&self, who: &Ident) -> Result<(Vec<JobRecord>, i64), Fail> {
        let src = "slurm_load_jobs";
        match self.call(who, RequestBody::GetJobs, src).await? {
            Response::Jobs { jobs, last_update } => Ok((jobs, last_update)),
            Response::Error(e) => Err(Fail::rpc(&e, &[], src)),
            r => Err(unexpected(&r, src)),
        }
    }

    async fn last_backfill(&self, who: &Ident) -> Value {
        match self
            .call(who, RequestBody::GetDiag, "slurm_get_statistics")
            .await
        {
            Ok(Response::Diag(d)) => time(d.bf_last_when),
            _ => num(0),
        }
    }

    async fn get_jobs(&self, who: &Ident, q: &Q) -> HResult {
        let since = update_time(q, "slurm_load_jobs")?;
        if since.is_none() {
            return self.get_all_jobs(who).await;
        }
        let (jobs, last) = self.jobs(who).await?;
        let list: Vec<Value> = if since.is_some_and(|t| t >= last) {
            Vec::new()
        } else {
            jobs.iter()
                .map(|j| oa::job_info(j, self.cluster()))
                .collect()
        };
        let lb = self.last_backfill(who).await;
        Ok(done(
            json!({"jobs": list, "last_backfill": lb, "last_update": num(last)}),
        ))
    }

    /// The whole job list. Each job is serialized once per change of that
    /// job: the controller sends only the jobs that changed since our copy,
    /// and an unchanged queue costs one small round trip.
    async fn get_all_jobs(&self, who: &Ident) -> HResult {
        let src = "slurm_load_jobs";
        // With PrivateData=jobs each caller gets a list of its own: no copy
        // is kept, so none is ever served to another user.
        let shared = !self.conf.private_data().jobs;
        let cached = match shared {
            true => self.jobs_cache.lock().ok().and_then(|c| c.clone()),
            false => None,
        };
        // Version 0 is never published: a first call gets every job.
        let (epoch, since) = cached.as_ref().map_or((0, 0), |c| (c.epoch, c.version));
        let body = RequestBody::GetJobsDelta { epoch, since };
        let cache = match self.call(who, body, src).await? {
            Response::JobsUnchanged { .. } => match cached {
                Some(c) => c,
                None => return Err(unexpected(&Response::Ok, src)),
            },
            Response::JobsDelta {
                epoch: e,
                version,
                ids,
                changed,
                last_update,
            } => {
                let mut per_job = match cached {
                    Some(c) if c.epoch == e => c.per_job.clone(),
                    _ => HashMap::new(),
                };
                for j in &changed {
                    let text = serde_json::to_string(&oa::job_info(j, self.cluster()))
                        .unwrap_or_else(|_| "{}".into());
                    per_job.insert(j.job_id, Arc::new(text));
                }
                per_job.retain(|id, _| ids.binary_search(id).is_ok());
                let mut raw =
                    String::with_capacity(per_job.values().map(|t| t.len() + 1).sum::<usize>() + 2);
                raw.push('[');
                for (k, id) in ids.iter().enumerate() {
                    if k > 0 {
                        raw.push(',');
                    }
                    raw.push_str(per_job.get(id).map_or("{}", |t| t.as_str()));
                }
                raw.push(']');
                let c = Arc::new(JobsCache {
                    epoch: e,
                    version,
                    last_update,
                    per_job,
                    raw: Arc::new(raw),
                });
                if let (true, Ok(mut slot)) = (shared, self.jobs_cache.lock()) {
                    *slot = Some(c.clone());
                }
                c
            }
            Response::Error(e) => return Err(Fail::rpc(&e, &[], src)),
            r => return Err(unexpected(&r, src)),
        };
        let lb = self.last_backfill(who).await;
        let mut d = done(json!({"last_backfill": lb, "last_update": num(cache.last_update)}));
        d.raw = Some(("jobs", cache.raw.clone()));
        Ok(d)
    }

    async fn get_jobs_state(&self, who: &Ident, q: &Q) -> HResult {
        let src = "slurm_load_job_state";
        let mut wanted: Vec<(JobId, Option<u32>)> = Vec::new();
        if let Some(ids) = q.get("job_id") {
            for s in ids.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                wanted.push(parse_job_id(s).map_err(|e| Fail::query(format!("job_id: {e}"), src))?);
            }
        }
        let (jobs, last) = self.jobs(who).await?;
        let list: Vec<Value> = jobs
            .iter()
            .filter(|j| wanted.is_empty() || wanted.iter().any(|w| job_matches(j, *w)))
            .map(oa::job_state_info)
            .collect();
        if !wanted.is_empty() && list.is_empty() {
            return Err(Fail::rpc(
                &SlurmError::InvalidJobId.into(),
                &[SlurmError::InvalidJobId],
                src,
            ));
        }
        Ok(done(
            json!({"jobs": list, "last_backfill": num(0), "last_update": num(last)}),
        ))
    }

    async fn get_job(&self, who: &Ident, id: &str, q: &Q) -> HResult {
        let src = "slurm_load_job";
        let want = parse_job_id(id).map_err(|e| Fail::query(e, src))?;
        let since = update_time(q, src)?;
        let (jobs, last) = self.jobs(who).await?;
        let found: Vec<&JobRecord> = jobs.iter().filter(|j| job_matches(j, want)).collect();
        if found.is_empty() {
            return Err(invalid_job(id, src));
        }
        let list: Vec<Value> = if since.is_some_and(|t| t >= last) {
            Vec::new()
        } else {
            found
                .iter()
                .map(|j| oa::job_info(j, self.cluster()))
                .collect()
        };
        let lb = self.last_backfill(who).await;
        Ok(done(
            json!({"jobs": list, "last_backfill": lb, "last_update": num(last)}),
        ))
    }

    async fn resources(&self, who: &Ident, id: &str) -> HResult {
        let src = "slurm_get_job_resources";
        let want = parse_job_id(id).map_err(|e| Fail::query(e, src))?;
        let (jobs, _) = self.jobs(who).await?;
        let Some(j) = jobs.iter().find(|j| job_matches(j, want)) else {
            return Err(invalid_job(id, src));
        };
        let nodes = match self.call(who, RequestBody::GetNodes, src).await? {
            Response::Nodes { nodes, .. } => nodes,
            Response::Error(e) => return Err(Fail::rpc(&e, &[], src)),
            r => return Err(unexpected(&r, src)),
        };
        let mut d = done(json!({"nodes": oa::resource_layout(j, &nodes)}));
        if j.alloc.nodes.is_empty() {
            d.warnings.push(oa::warning_entry(
                &format!("job {} has no resources allocated yet", j.job_id),
                src,
            ));
        }
        Ok(d)
    }

    async fn cancel(&self, who: &Ident, id: &str, q: &Q) -> HResult {
        let src = "slurm_kill_job";
        let want = parse_job_id(id).map_err(|e| Fail::query(e, src))?;
        let signal = match q.get("signal").map(|s| s.trim()).filter(|s| !s.is_empty()) {
            None => None,
            Some(s) => Some(
                oa::parse_signal(s)
                    .ok_or_else(|| Fail::query(format!("signal: unknown signal \"{s}\""), src))?,
            ),
        };
        let mut warns = Vec::new();
        if let Some(f) = q.get("flags").filter(|f| !f.is_empty()) {
            warns.push(format!("flags={f} is not supported and was ignored"));
        }
        let job_id = match want {
            (n, None) => n,
            (n, Some(t)) => {
                // An array task has its own job id.
                let (jobs, _) = self.jobs(who).await?;
                jobs.iter()
                    .find(|j| job_matches(j, (n, Some(t))))
                    .map(|j| j.job_id)
                    .ok_or_else(|| invalid_job(id, src))?
            }
        };
        let filter = slurm_proto::CancelFilter {
            job_ids: vec![job_id],
            signal,
            ..Default::default()
        };
        self.kill(who, filter, warns, src, true).await
    }

    async fn kill(
        &self,
        who: &Ident,
        filter: slurm_proto::CancelFilter,
        warns: Vec<String>,
        src: &str,
        single: bool,
    ) -> HResult {
        let r = self
            .call(who, RequestBody::Cancel(filter.clone()), src)
            .await?;
        let results = match r {
            Response::Cancelled(v) => v,
            Response::Ok => filter.job_ids.iter().map(|&j| (j, None)).collect(),
            Response::Error(e) => {
                let mut f = Fail::rpc(&e, &[SlurmError::InvalidJobId], src);
                f.warnings = warnings(warns, src);
                return Err(f);
            }
            r => return Err(unexpected(&r, src)),
        };
        let status: Vec<Value> = results
            .iter()
            .map(|(id, e)| {
                let (code, string, message) = match e {
                    None => (0, "No error".to_string(), String::new()),
                    Some(e) => (e.code(), e.message().to_string(), e.message().to_string()),
                };
                json!({
                    "error": {"string": string, "code": code, "message": message},
                    "step_id": "",
                    "job_id": num(*id),
                    "federation": {"sibling": ""},
                })
            })
            .collect();
        let first_err = results.iter().find_map(|(_, e)| *e);
        if let (true, Some(e)) = (single, first_err) {
            let mut f = Fail::rpc(&e.into(), &[SlurmError::InvalidJobId], src);
            f.warnings = warnings(warns, src);
            f.fields.insert("status".into(), Value::Array(status));
            return Err(f);
        }
        let mut d = done(json!({ "status": status }));
        d.warnings = warnings(warns, src);
        Ok(d)
    }

    async fn kill_jobs(&self, who: &Ident, body: &[u8]) -> HResult {
        let src = "slurm_kill_jobs";
        let v = request::parse_json(body).map_err(|e| Fail::body(e, src))?;
        let (filter, warns) = request::kill_jobs(&v).map_err(|e| Fail::body(e, src))?;
        if filter.job_ids.is_empty()
            && filter.user.is_none()
            && filter.name.is_none()
            && filter.partition.is_none()
            && filter.states.is_empty()
        {
            return Err(Fail::body(
                BodyError {
                    path: "jobs".into(),
                    message: "no jobs and no filter given".into(),
                },
                src,
            ));
        }
        self.kill(who, filter, warns, src, false).await
    }

    async fn submit(&self, who: &Ident, body: &[u8], alloc: bool) -> HResult {
        let src = if alloc {
            "slurm_allocate_resources"
        } else {
            "slurm_submit_batch_job"
        };
        let v = request::parse_json(body).map_err(|e| Fail::body(e, src))?;
        let home = slurm_common::users::user_by_uid(who.uid)
            .map(|u| u.home)
            .filter(|h| h.starts_with('/'))
            .unwrap_or_else(|| "/tmp".into());
        let parsed = if alloc {
            request::alloc_request(&v, who.uid, &home, &self.host)
        } else {
            request::submit_request(&v, who.uid, &home, &self.host)
        }
        .map_err(|e| Fail::body(e, src))?;
        let mut desc = parsed.desc;
        if !alloc && desc.script.is_empty() && !desc.external {
            return Err(Fail::new(
                StatusCode::BAD_REQUEST,
                ESLURM_REST_INVALID_JOBS_DESC,
                "Batch script is missing",
                "job/script: a batch job needs a script (or flags: [\"EXTERNAL_JOB\"])",
                src,
            ));
        }
        if desc.name.is_none() && !alloc {
            desc.name = Some("slurmrestd".into());
        }
        let warns = warnings(parsed.warnings, src);
        let body = if alloc {
            RequestBody::AllocateJob(desc)
        } else {
            RequestBody::SubmitBatchJob(desc)
        };
        match self.call(who, body, src).await? {
            Response::Submitted { job_id } => {
                let mut d = if alloc {
                    done(json!({"job_id": job_id, "job_submit_user_msg": ""}))
                } else {
                    done(json!({"job_id": job_id, "step_id": "batch", "job_submit_user_msg": ""}))
                };
                d.warnings = warns;
                Ok(d)
            }
            Response::Error(e) => {
                let mut f = Fail::rpc(&e, &[], src);
                f.warnings = warns;
                Err(f)
            }
            r => Err(unexpected(&r, src)),
        }
    }

    async fn update_job(&self, who: &Ident, id: &str, body: &[u8]) -> HResult {
        let src = "slurm_update_job";
        let want = parse_job_id(id).map_err(|e| Fail::query(e, src))?;
        let v = request::parse_json(body).map_err(|e| Fail::body(e, src))?;
        let changes = request::job_update(&v).map_err(|e| Fail::body(e, src))?;
        let (jobs, _) = self.jobs(who).await?;
        let Some(job_id) = jobs.iter().find(|j| job_matches(j, want)).map(|j| j.job_id) else {
            return Err(invalid_job(id, src));
        };
        let mut warns = warnings(changes.warnings, src);
        if changes.updates.is_empty() {
            warns.push(oa::warning_entry("nothing to change", src));
        }
        for u in changes.updates {
            match self
                .call(who, RequestBody::UpdateJob { job_id, update: u }, src)
                .await?
            {
                Response::Ok => {}
                Response::Error(e) => {
                    let mut f = Fail::rpc(&e, &[SlurmError::InvalidJobId], src);
                    f.warnings = warns;
                    return Err(f);
                }
                r => return Err(unexpected(&r, src)),
            }
        }
        let mut d = done(json!({"results": [{
            "job_id": job_id,
            "step_id": "",
            "error": "No error",
            "error_code": 0,
            "why": "",
        }]}));
        d.warnings = warns;
        Ok(d)
    }

    async fn nodes(&self, who: &Ident) -> Result<(Vec<NodeRecord>, i64), Fail> {
        let src = "slurm_load_node";
        match self.call(who, RequestBody::GetNodes, src).await? {
            Response::Nodes { nodes, last_update } => Ok((nodes, last_update)),
            Response::Error(e) => Err(Fail::rpc(&e, &[], src)),
            r => Err(unexpected(&r, src)),
        }
    }

    async fn get_nodes(&self, who: &Ident, name: Option<&str>, q: &Q) -> HResult {
        let src = "slurm_load_node";
        let since = update_time(q, src)?;
        let (nodes, last) = self.nodes(who).await?;
        let sel: Vec<&NodeRecord> = match name {
            None => nodes.iter().collect(),
            Some(n) => {
                let names = slurm_common::hostlist::expand(n)
                    .map_err(|e| Fail::query(format!("node_name: {e}"), src))?;
                let sel: Vec<&NodeRecord> =
                    nodes.iter().filter(|r| names.contains(&r.name)).collect();
                if sel.is_empty() {
                    return Err(Fail::new(
                        StatusCode::NOT_FOUND,
                        SlurmError::InvalidNodeName.code(),
                        SlurmError::InvalidNodeName.message(),
                        &format!("node {n} not found"),
                        src,
                    ));
                }
                sel
            }
        };
        let list: Vec<Value> = if since.is_some_and(|t| t >= last) {
            Vec::new()
        } else {
            sel.iter()
                .map(|n| oa::node_info(n, self.cluster()))
                .collect()
        };
        Ok(done(json!({"nodes": list, "last_update": num(last)})))
    }

    async fn update_nodes(&self, who: &Ident, name: Option<&str>, body: &[u8]) -> HResult {
        let src = "slurm_update_node";
        let v = request::parse_json(body).map_err(|e| Fail::body(e, src))?;
        let c = request::node_update(&v).map_err(|e| Fail::body(e, src))?;
        let names = match name {
            Some(n) => slurm_common::hostlist::expand(n)
                .map_err(|e| Fail::query(format!("node_name: {e}"), src))?,
            None => {
                let list = v.get("name").cloned().unwrap_or(Value::Null);
                let items: Vec<String> = match &list {
                    Value::Array(a) => a
                        .iter()
                        .filter_map(|x| x.as_str().map(String::from))
                        .collect(),
                    Value::String(s) => vec![s.clone()],
                    _ => Vec::new(),
                };
                let mut out = Vec::new();
                for i in items {
                    out.extend(slurm_common::hostlist::expand(&i).map_err(|e| {
                        Fail::body(
                            BodyError {
                                path: "name".into(),
                                message: e.to_string(),
                            },
                            src,
                        )
                    })?);
                }
                if out.is_empty() {
                    return Err(Fail::body(
                        BodyError {
                            path: "name".into(),
                            message: "no node names given".into(),
                        },
                        src,
                    ));
                }
                out
            }
        };
        let warns = warnings(c.warnings, src);
        if names.is_empty() {
            return Err(Fail::query("node_name: empty".into(), src));
        }
        if c.state.is_none() && c.reason.is_none() && c.features.is_none() {
            return Ok(Done {
                fields: Map::new(),
                warnings: {
                    let mut w = warns;
                    w.push(oa::warning_entry("nothing to change", src));
                    w
                },
                raw: None,
            });
        }
        match self
            .call(
                who,
                RequestBody::UpdateNode {
                    names,
                    state: c.state,
                    reason: c.reason,
                    features: c.features,
                },
                src,
            )
            .await?
        {
            Response::Ok => Ok(Done {
                fields: Map::new(),
                warnings: warns,
                raw: None,
            }),
            Response::Error(e) => {
                let mut f = Fail::rpc(&e, &[SlurmError::InvalidNodeName], src);
                f.warnings = warns;
                Err(f)
            }
            r => Err(unexpected(&r, src)),
        }
    }

    async fn delete_node(&self, who: &Ident, name: &str) -> HResult {
        let src = "slurm_delete_node";
        match self
            .call(
                who,
                RequestBody::DeleteNode {
                    name: name.to_string(),
                },
                src,
            )
            .await?
        {
            Response::Ok => Ok(Done::default()),
            Response::Error(e) => Err(Fail::rpc(&e, &[SlurmError::InvalidNodeName], src)),
            r => Err(unexpected(&r, src)),
        }
    }

    async fn new_node(&self, who: &Ident, body: &[u8]) -> HResult {
        let src = "slurm_create_node";
        let v = request::parse_json(body).map_err(|e| Fail::body(e, src))?;
        let specs = request::create_node(&v).map_err(|e| Fail::body(e, src))?;
        for s in specs {
            match self.call(who, RequestBody::CreateNode(s), src).await? {
                Response::Ok => {}
                Response::Error(e) => return Err(Fail::rpc(&e, &[], src)),
                r => return Err(unexpected(&r, src)),
            }
        }
        Ok(Done::default())
    }

    async fn get_partitions(&self, who: &Ident, name: Option<&str>, q: &Q) -> HResult {
        let src = "slurm_load_partitions";
        let since = update_time(q, src)?;
        let (parts, last): (Vec<PartitionRecord>, i64) =
            match self.call(who, RequestBody::GetPartitions, src).await? {
                Response::Partitions {
                    partitions,
                    last_update,
                } => (partitions, last_update),
                Response::Error(e) => return Err(Fail::rpc(&e, &[], src)),
                r => return Err(unexpected(&r, src)),
            };
        let sel: Vec<&PartitionRecord> = parts
            .iter()
            .filter(|p| name.is_none_or(|n| p.name == n))
            .collect();
        if let (Some(n), true) = (name, sel.is_empty()) {
            return Err(Fail::new(
                StatusCode::NOT_FOUND,
                SlurmError::InvalidPartitionName.code(),
                SlurmError::InvalidPartitionName.message(),
                &format!("partition {n} not found"),
                src,
            ));
        }
        let list: Vec<Value> = if since.is_some_and(|t| t >= last) {
            Vec::new()
        } else {
            sel.iter()
                .map(|p| oa::partition_info(p, self.cluster()))
                .collect()
        };
        Ok(done(json!({"partitions": list, "last_update": num(last)})))
    }

    async fn reservations(&self, who: &Ident) -> Result<(Vec<ReservationRecord>, i64), Fail> {
        let src = "slurm_load_reservations";
        match self.call(who, RequestBody::GetReservations, src).await? {
            Response::Reservations {
                reservations,
                last_update,
            } => Ok((reservations, last_update)),
            Response::Error(e) => Err(Fail::rpc(&e, &[], src)),
            r => Err(unexpected(&r, src)),
        }
    }

    async fn get_reservations(&self, who: &Ident, name: Option<&str>, q: &Q) -> HResult {
        let src = "slurm_load_reservations";
        let since = update_time(q, src)?;
        let (res, last) = self.reservations(who).await?;
        let sel: Vec<&ReservationRecord> = res
            .iter()
            .filter(|r| name.is_none_or(|n| r.name == n))
            .collect();
        if let (Some(n), true) = (name, sel.is_empty()) {
            return Err(Fail::new(
                StatusCode::NOT_FOUND,
                SlurmError::ReservationInvalid.code(),
                SlurmError::ReservationInvalid.message(),
                &format!("reservation {n} not found"),
                src,
            ));
        }
        let list: Vec<Value> = if since.is_some_and(|t| t >= last) {
            Vec::new()
        } else {
            sel.iter().map(|r| oa::reservation_info(r)).collect()
        };
        Ok(done(
            json!({"reservations": list, "last_update": num(last)}),
        ))
    }

    /// Create or update each reservation (by name).
    async fn post_reservations(&self, who: &Ident, body: &[u8], many: bool) -> HResult {
        let src = "slurm_create_reservation";
        let v = request::parse_json(body).map_err(|e| Fail::body(e, src))?;
        let items: Vec<(Value, String)> = if many {
            match v.get("reservations") {
                Some(Value::Array(a)) if !a.is_empty() => a
                    .iter()
                    .enumerate()
                    .map(|(i, x)| (x.clone(), format!("reservations[{i}]")))
                    .collect(),
                _ => {
                    return Err(Fail::body(
                        BodyError {
                            path: "reservations".into(),
                            message: "expected a non-empty list of reservations".into(),
                        },
                        src,
                    ))
                }
            }
        } else {
            vec![(v, String::new())]
        };
        let mut parsed = Vec::new();
        let mut warns = Vec::new();
        for (item, path) in &items {
            let (spec, w) = request::reservation(item, path).map_err(|e| Fail::body(e, src))?;
            warns.extend(w);
            parsed.push(spec);
        }
        let (existing, _) = self.reservations(who).await?;
        let mut echoed = Vec::new();
        for spec in parsed {
            let exists = spec
                .name
                .as_ref()
                .is_some_and(|n| existing.iter().any(|r| &r.name == n));
            let mut shown = spec.clone();
            let body = if exists {
                RequestBody::UpdateReservation(spec)
            } else {
                RequestBody::CreateReservation(spec)
            };
            match self.call(who, body, src).await? {
                Response::ReservationCreated { name } => shown.name = Some(name),
                Response::Ok => {}
                Response::Error(e) => {
                    let mut f = Fail::rpc(&e, &[], src);
                    f.warnings = warnings(warns, src);
                    return Err(f);
                }
                r => return Err(unexpected(&r, src)),
            }
            echoed.push(oa::reservation_desc(&shown));
        }
        let mut d = done(json!({ "reservations": echoed }));
        d.warnings = warnings(warns, src);
        Ok(d)
    }

    async fn delete_reservation(&self, who: &Ident, name: &str) -> HResult {
        let src = "slurm_delete_reservation";
        match self
            .call(
                who,
                RequestBody::DeleteReservation {
                    name: name.to_string(),
                },
                src,
            )
            .await?
        {
            Response::Ok => Ok(Done::default()),
            Response::Error(e) => Err(Fail::rpc(&e, &[SlurmError::ReservationInvalid], src)),
            r => Err(unexpected(&r, src)),
        }
    }
}

fn invalid_job(id: &str, src: &str) -> Fail {
    Fail::new(
        StatusCode::NOT_FOUND,
        SlurmError::InvalidJobId.code(),
        SlurmError::InvalidJobId.message(),
        &format!("job {id} not found"),
        src,
    )
}

/// `123` or `123_4` (array task).
fn parse_job_id(s: &str) -> Result<(JobId, Option<u32>), String> {
    let bad = || format!("invalid job id \"{s}\"");
    let (j, t) = match s.split_once('_') {
        Some((j, t)) => (j, Some(t.parse::<u32>().map_err(|_| bad())?)),
        None => (s, None),
    };
    let j: JobId = j.parse().map_err(|_| bad())?;
    if j == 0 {
        return Err(bad());
    }
    Ok((j, t))
}

fn job_matches(j: &JobRecord, (id, task): (JobId, Option<u32>)) -> bool {
    match (task, &j.array) {
        (None, None) => j.job_id == id,
        (None, Some(a)) => j.job_id == id || a.job_id == id,
        (Some(t), Some(a)) => a.job_id == id && a.task_id == t,
        (Some(_), None) => false,
    }
}

// -------------------------------------------------------------- the router

type St = State<Arc<App>>;
type Peer_ = ConnectInfo<Peer>;

macro_rules! handler {
    ($kind:expr, $app:ident, $peer:ident, $headers:ident, |$who:ident| $body:expr) => {{
        let who = $app.authenticate(&$headers, &$peer);
        let r = match &who {
            Ok($who) => $body.await,
            Err(f) => Err(f.clone()),
        };
        $app.respond($kind, &$peer, who.ok().as_ref(), r)
    }};
}

fn body_of(r: Result<Bytes, axum::extract::rejection::BytesRejection>) -> Result<Bytes, Fail> {
    r.map_err(|e| {
        Fail::new(
            e.status(),
            ESLURM_REST_FAIL_PARSING,
            "Failure during parsing",
            &format!("request body: {e} (at most {MAX_BODY} bytes)"),
            "slurmrestd",
        )
    })
}

fn q(r: Result<Query<Q>, axum::extract::rejection::QueryRejection>) -> Q {
    r.map(|Query(q)| q).unwrap_or_default()
}

fn p(r: Result<Path<String>, axum::extract::rejection::PathRejection>) -> String {
    r.map(|Path(p)| p).unwrap_or_default()
}

async fn h_ping(State(app): St, ConnectInfo(peer): Peer_, headers: HeaderMap) -> HttpResponse {
    handler!(Kind::Ping, app, peer, headers, |who| app.ping(who))
}

async fn h_diag(State(app): St, ConnectInfo(peer): Peer_, headers: HeaderMap) -> HttpResponse {
    handler!(Kind::Diag, app, peer, headers, |who| app.diag(who))
}

async fn h_reconfigure(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
) -> HttpResponse {
    handler!(Kind::Plain, app, peer, headers, |who| app.reconfigure(who))
}

async fn h_licenses(State(app): St, ConnectInfo(peer): Peer_, headers: HeaderMap) -> HttpResponse {
    handler!(Kind::Licenses, app, peer, headers, |who| app.licenses(who))
}

async fn h_shares(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    query: Result<Query<Q>, axum::extract::rejection::QueryRejection>,
) -> HttpResponse {
    let query = q(query);
    handler!(Kind::Shares, app, peer, headers, |who| app
        .shares(who, &query))
}

async fn h_jobs(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    query: Result<Query<Q>, axum::extract::rejection::QueryRejection>,
) -> HttpResponse {
    let query = q(query);
    handler!(Kind::Jobs, app, peer, headers, |who| app
        .get_jobs(who, &query))
}

async fn h_jobs_delete(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> HttpResponse {
    let body = body_of(body);
    handler!(Kind::Kill, app, peer, headers, |who| async {
        app.kill_jobs(who, &body.clone()?).await
    })
}

async fn h_jobs_state(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    query: Result<Query<Q>, axum::extract::rejection::QueryRejection>,
) -> HttpResponse {
    let query = q(query);
    handler!(Kind::Jobs, app, peer, headers, |who| app
        .get_jobs_state(who, &query))
}

async fn h_submit(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> HttpResponse {
    let body = body_of(body);
    handler!(Kind::Submit, app, peer, headers, |who| async {
        app.submit(who, &body.clone()?, false).await
    })
}

async fn h_allocate(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> HttpResponse {
    let body = body_of(body);
    handler!(Kind::Alloc, app, peer, headers, |who| async {
        app.submit(who, &body.clone()?, true).await
    })
}

async fn h_job_get(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    id: Result<Path<String>, axum::extract::rejection::PathRejection>,
    query: Result<Query<Q>, axum::extract::rejection::QueryRejection>,
) -> HttpResponse {
    let (id, query) = (p(id), q(query));
    handler!(Kind::Jobs, app, peer, headers, |who| app
        .get_job(who, &id, &query))
}

async fn h_job_post(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    id: Result<Path<String>, axum::extract::rejection::PathRejection>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> HttpResponse {
    let body = body_of(body);
    let id = p(id);
    handler!(Kind::JobPost, app, peer, headers, |who| async {
        app.update_job(who, &id, &body.clone()?).await
    })
}

async fn h_job_delete(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    id: Result<Path<String>, axum::extract::rejection::PathRejection>,
    query: Result<Query<Q>, axum::extract::rejection::QueryRejection>,
) -> HttpResponse {
    let (id, query) = (p(id), q(query));
    handler!(Kind::Kill, app, peer, headers, |who| app
        .cancel(who, &id, &query))
}

async fn h_resources(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    id: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> HttpResponse {
    let id = p(id);
    handler!(Kind::Resources, app, peer, headers, |who| app
        .resources(who, &id))
}

async fn h_nodes(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    query: Result<Query<Q>, axum::extract::rejection::QueryRejection>,
) -> HttpResponse {
    let query = q(query);
    handler!(Kind::Nodes, app, peer, headers, |who| app
        .get_nodes(who, None, &query))
}

async fn h_nodes_post(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> HttpResponse {
    let body = body_of(body);
    handler!(Kind::Plain, app, peer, headers, |who| async {
        app.update_nodes(who, None, &body.clone()?).await
    })
}

async fn h_node_get(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    name: Result<Path<String>, axum::extract::rejection::PathRejection>,
    query: Result<Query<Q>, axum::extract::rejection::QueryRejection>,
) -> HttpResponse {
    let (name, query) = (p(name), q(query));
    handler!(Kind::Nodes, app, peer, headers, |who| app.get_nodes(
        who,
        Some(&name),
        &query
    ))
}

async fn h_node_post(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    name: Result<Path<String>, axum::extract::rejection::PathRejection>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> HttpResponse {
    let body = body_of(body);
    let name = p(name);
    handler!(Kind::Plain, app, peer, headers, |who| async {
        app.update_nodes(who, Some(&name), &body.clone()?).await
    })
}

async fn h_node_delete(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    name: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> HttpResponse {
    let name = p(name);
    handler!(Kind::Plain, app, peer, headers, |who| app
        .delete_node(who, &name))
}

async fn h_new_node(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> HttpResponse {
    let body = body_of(body);
    handler!(Kind::Plain, app, peer, headers, |who| async {
        app.new_node(who, &body.clone()?).await
    })
}

async fn h_partitions(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    query: Result<Query<Q>, axum::extract::rejection::QueryRejection>,
) -> HttpResponse {
    let query = q(query);
    handler!(Kind::Partitions, app, peer, headers, |who| app
        .get_partitions(who, None, &query))
}

async fn h_partition(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    name: Result<Path<String>, axum::extract::rejection::PathRejection>,
    query: Result<Query<Q>, axum::extract::rejection::QueryRejection>,
) -> HttpResponse {
    let (name, query) = (p(name), q(query));
    handler!(Kind::Partitions, app, peer, headers, |who| app
        .get_partitions(who, Some(&name), &query))
}

async fn h_reservations(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    query: Result<Query<Q>, axum::extract::rejection::QueryRejection>,
) -> HttpResponse {
    let query = q(query);
    handler!(Kind::Reservations, app, peer, headers, |who| app
        .get_reservations(who, None, &query))
}

async fn h_reservations_post(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> HttpResponse {
    let body = body_of(body);
    handler!(Kind::ReservationMod, app, peer, headers, |who| async {
        app.post_reservations(who, &body.clone()?, true).await
    })
}

async fn h_reservation_post(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> HttpResponse {
    let body = body_of(body);
    handler!(Kind::ReservationMod, app, peer, headers, |who| async {
        app.post_reservations(who, &body.clone()?, false).await
    })
}

async fn h_reservation_get(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    name: Result<Path<String>, axum::extract::rejection::PathRejection>,
    query: Result<Query<Q>, axum::extract::rejection::QueryRejection>,
) -> HttpResponse {
    let (name, query) = (p(name), q(query));
    handler!(Kind::Reservations, app, peer, headers, |who| app
        .get_reservations(who, Some(&name), &query))
}

async fn h_reservation_delete(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    name: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> HttpResponse {
    let name = p(name);
    handler!(Kind::Plain, app, peer, headers, |who| app
        .delete_reservation(who, &name))
}

async fn h_openapi() -> HttpResponse {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        crate::spec::document_bytes(),
    )
        .into_response()
}

async fn h_fallback(
    State(app): St,
    ConnectInfo(peer): Peer_,
    method: Method,
    uri: Uri,
) -> HttpResponse {
    let path = uri.path();
    let known = crate::spec::SERVED
        .iter()
        .find(|(p, _)| path_matches(p, path));
    let (status, number, error, desc) = match known {
        Some((_, methods)) => (
            StatusCode::METHOD_NOT_ALLOWED,
            ESLURM_REST_UNKNOWN_URL,
            "Method not allowed",
            format!(
                "{method} is not served for {path} (allowed: {})",
                methods.join(", ").to_ascii_uppercase()
            ),
        ),
        None => (
            StatusCode::NOT_FOUND,
            ESLURM_REST_UNKNOWN_URL,
            "Unable to find requested URL",
            format!("{method} {path} is not served"),
        ),
    };
    let body = oa::envelope(
        Map::new(),
        app.meta(&peer, None),
        vec![oa::error_entry(number, error, &desc, "slurmrestd")],
        Vec::new(),
    );
    json_response(status, &body)
}

fn path_matches(pattern: &str, path: &str) -> bool {
    let a: Vec<&str> = pattern.trim_end_matches('/').split('/').collect();
    let b: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    a.len() == b.len()
        && a.iter()
            .zip(&b)
            .all(|(x, y)| x == y || (x.starts_with('{') && !y.is_empty()))
}

/// Both `path` and `path/` route to the same handler (Slurm accepts either).
fn both(
    r: Router<Arc<App>>,
    path: &str,
    m: axum::routing::MethodRouter<Arc<App>>,
) -> Router<Arc<App>> {
    let m = m.fallback(h_fallback);
    let trimmed = path.trim_end_matches('/');
    let slashed = format!("{trimmed}/");
    r.route(trimmed, m.clone()).route(&slashed, m)
}

/// The router for `app`.
pub fn router(app: Arc<App>) -> Router {
    let s = "/slurm/v0.0.44";
    let mut r = Router::new();
    r = both(r, &format!("{s}/ping/"), get(h_ping));
    r = both(r, &format!("{s}/diag/"), get(h_diag));
    r = both(r, &format!("{s}/reconfigure/"), get(h_reconfigure));
    r = both(r, &format!("{s}/licenses/"), get(h_licenses));
    r = both(r, &format!("{s}/shares"), get(h_shares));
    r = both(r, &format!("{s}/jobs/"), get(h_jobs).delete(h_jobs_delete));
    r = both(r, &format!("{s}/jobs/state/"), get(h_jobs_state));
    r = both(r, &format!("{s}/job/submit"), post(h_submit));
    r = both(r, &format!("{s}/job/allocate"), post(h_allocate));
    r = both(
        r,
        &format!("{s}/job/{{job_id}}"),
        get(h_job_get).post(h_job_post).delete(h_job_delete),
    );
    r = both(r, &format!("{s}/resources/{{job_id}}"), get(h_resources));
    r = both(r, &format!("{s}/nodes/"), get(h_nodes).post(h_nodes_post));
    r = both(
        r,
        &format!("{s}/node/{{node_name}}"),
        get(h_node_get).post(h_node_post).delete(h_node_delete),
    );
    r = both(r, &format!("{s}/new/node/"), post(h_new_node));
    r = both(r, &format!("{s}/partitions/"), get(h_partitions));
    r = both(
        r,
        &format!("{s}/partition/{{partition_name}}"),
        get(h_partition),
    );
    r = both(
        r,
        &format!("{s}/reservations/"),
        get(h_reservations).post(h_reservations_post),
    );
    r = both(r, &format!("{s}/reservation"), post(h_reservation_post));
    r = both(
        r,
        &format!("{s}/reservation/{{reservation_name}}"),
        get(h_reservation_get).delete(h_reservation_delete),
    );
    r = slurmdb::routes(r);
    for p in ["/openapi/v3", "/openapi", "/openapi.json"] {
        r = r.route(p, get(h_openapi));
    }
    r.fallback(h_fallback)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(app)
}

/// Bind every address, then serve until `shutdown` resolves. Unix socket
/// files are created world-connectable (callers are identified by their
/// peer credentials) and removed on the way out.
pub async fn serve(
    app: Arc<App>,
    listen: &[Listen],
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (tx, _) = tokio::sync::broadcast::channel::<()>(1);
    let mut tasks = Vec::new();
    let mut sockets = Vec::new();
    for l in listen {
        let rt = router(app.clone());
        let mut rx = tx.subscribe();
        let stop = async move {
            let _ = rx.recv().await;
        };
        match l {
            Listen::Tcp(addr) => {
                let lis = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
                    std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}"))
                })?;
                tracing::info!("listening on {}", lis.local_addr()?);
                let svc = rt.into_make_service_with_connect_info::<Peer>();
                tasks.push(tokio::spawn(async move {
                    axum::serve(lis, svc).with_graceful_shutdown(stop).await
                }));
            }
            Listen::Unix(path) => {
                if path.exists() {
                    if std::os::unix::net::UnixStream::connect(path).is_ok() {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::AddrInUse,
                            format!("{} is in use by another process", path.display()),
                        ));
                    }
                    std::fs::remove_file(path)?;
                }
                let lis = tokio::net::UnixListener::bind(path).map_err(|e| {
                    std::io::Error::new(
                        e.kind(),
                        format!("cannot listen on {}: {e}", path.display()),
                    )
                })?;
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777))?;
                tracing::info!("listening on unix:{}", path.display());
                sockets.push(path.clone());
                let svc = rt.into_make_service_with_connect_info::<Peer>();
                tasks.push(tokio::spawn(async move {
                    axum::serve(lis, svc).with_graceful_shutdown(stop).await
                }));
            }
        }
    }
    // systemd (Type=notify): every socket is listening.
    slurm_common::logging::notify("READY=1\nSTATUS=serving");
    shutdown.await;
    slurm_common::logging::notify("STOPPING=1");
    let _ = tx.send(());
    for t in tasks {
        let _ = t.await;
    }
    for s in sockets {
        let _ = std::fs::remove_file(s);
    }
    Ok(())
}

mod slurmdb;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_and_auth_arguments() {
        assert_eq!(
            Listen::parse("127.0.0.1:6820").unwrap(),
            Listen::Tcp("127.0.0.1:6820".into())
        );
        assert_eq!(
            Listen::parse(":6820").unwrap(),
            Listen::Tcp("0.0.0.0:6820".into())
        );
        assert_eq!(
            Listen::parse("unix:/run/r.sock").unwrap(),
            Listen::Unix("/run/r.sock".into())
        );
        assert!(Listen::parse("localhost").is_err());
        assert!(Listen::parse("h:99999").is_err());
        let m = AuthModes::parse("rest_auth/jwt,local").unwrap();
        assert!(m.jwt && m.local);
        assert!(AuthModes::parse("rest_auth/munge").is_err());
    }

    #[test]
    fn job_ids_and_paths() {
        assert_eq!(parse_job_id("12").unwrap(), (12, None));
        assert_eq!(parse_job_id("12_3").unwrap(), (12, Some(3)));
        assert!(parse_job_id("x").is_err());
        assert!(parse_job_id("0").is_err());
        assert!(path_matches(
            "/slurm/v0.0.44/job/{job_id}",
            "/slurm/v0.0.44/job/5/"
        ));
        assert!(!path_matches(
            "/slurm/v0.0.44/job/{job_id}",
            "/slurm/v0.0.44/job/"
        ));
    }
}
