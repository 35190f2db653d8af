//! The `SlurmDbd` gRPC service (`proto/slurm/v1/slurmdbd.proto`): each
//! call's credential is checked first, then its caller's rights, and it is
//! answered with a `DbdReply`. Plus the hourly maintenance task (rollup and
//! purge).
//!
//! Who may do what: ingestion only root and SlurmUser (the controller);
//! changes to the database root, SlurmUser and users whose AdminLevel is
//! Operator or Administrator (only an Administrator may make one); queries
//! any authenticated user.

use crate::conf::PurgeSettings;
use crate::storage::{Storage, StorageError};
use slurm_common::auth::{now, AuthError, Key};
use slurm_common::grpc;
use slurm_proto::acct::*;
use slurm_proto::grpc::dbd::{dbd_method as m, dbd_reply, DbdCall};
use slurm_proto::grpc::pb;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// How long a connection may sit idle between calls.
const IDLE: Duration = Duration::from_secs(300);

/// Connections served at once (the next waits until one closes).
const MAX_CONNECTIONS: usize = 256;

/// How long a caller may take over its TLS handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);

pub struct Server {
    /// `TLSType` on: the handshake every connection must make.
    pub tls: Option<slurm_common::tls::TlsAcceptor>,
    /// Memory all requests being read may hold together.
    pub budget: slurm_common::net::Budget,
    /// `ctld_cert_file`, when readable here: records only over exactly
    /// that certificate (else any daemon's).
    pub controller_cert: Option<slurm_common::tls::CertificateDer<'static>>,
    pub storage: Arc<Storage>,
    pub key: Key,
    /// The uid of slurmdbd.conf's SlurmUser (root is always allowed).
    pub slurm_user_uid: Option<u32>,
    /// Requests and rollups since start (REST `slurmdb/v0.0.44/diag`).
    pub stats: Arc<crate::stats::Stats>,
    /// slurmdbd.conf's `PrivateData`: query answers cut down to the
    /// caller's own for users below AdminLevel=Operator.
    pub private: slurm_common::private::PrivateData,
    /// slurmdbd.conf's `DisableCoordDBD`: account coordinators have no
    /// rights here.
    pub disable_coord: bool,
    /// Credentials accepted and not yet expired (each is good once).
    pub seen: slurm_common::auth::ReplayCache,
    /// Users' tokens are accepted (`AuthAltTypes=auth/jwt`) with this key.
    pub jwt_key: Option<Vec<u8>>,
    /// `sacctmgr shutdown`: tells the process to stop (as SIGTERM does).
    pub stop: Arc<tokio::sync::Notify>,
    /// slurmdbd.conf's settings as `sacctmgr show configuration` lists them.
    pub config: Vec<(String, String)>,
}

/// The answer to a call whose credential was refused.
fn refused(caller: &grpc::Caller, e: slurm_common::net::NetError) -> AcctResponse {
    use slurm_common::net::NetError;
    tracing::info!(from = %caller.addr, "refused a call: {e}");
    let kind = match &e {
        NetError::Auth(AuthError::Expired | AuthError::NotYetValid) => {
            AcctErrorKind::ExpiredCredential
        }
        NetError::Auth(_) => AcctErrorKind::InvalidCredential,
        NetError::Rpc { .. } => AcctErrorKind::AccessDenied,
        _ => AcctErrorKind::Protocol,
    };
    err(kind, e.to_string())
}

fn err(kind: AcctErrorKind, m: impl Into<String>) -> AcctResponse {
    AcctResponse::Error(AcctError::new(kind, m))
}

/// A storage error as the client sees it.
pub fn storage_error(e: StorageError) -> AcctResponse {
    let kind = match &e {
        StorageError::Invalid(_) => AcctErrorKind::InvalidRequest,
        StorageError::NotFound(_) => AcctErrorKind::NotFound,
        StorageError::Exists(_) => AcctErrorKind::AlreadyExists,
        StorageError::InUse(_) => AcctErrorKind::InUse,
        _ => {
            tracing::warn!("storage: {e}");
            AcctErrorKind::Storage
        }
    };
    err(kind, e.to_string())
}

/// Does the request make someone an Administrator?
fn grants_administrator(r: &AcctRequest) -> bool {
    match r {
        AcctRequest::AddUsers(a) => a.admin_level == Some(AdminLevel::Administrator),
        AcctRequest::ModifyUsers { set, .. } => {
            set.admin_level == Set::To(AdminLevel::Administrator)
        }
        _ => false,
    }
}

impl Server {
    /// Serve `SlurmDbd` over gRPC on `listener` until `shutdown` completes:
    /// at most [`MAX_CONNECTIONS`] connections, each TLS handshake within
    /// [`HANDSHAKE`], each call's body drawing on the budget past its first
    /// 64 KiB, a connection with no authenticated call within [`HANDSHAKE`]
    /// (or none for [`IDLE`]) closed.
    pub async fn serve(self: Arc<Self>, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        let incoming = grpc::incoming(listener, self.tls.clone(), MAX_CONNECTIONS, HANDSHAKE);
        let service = pb::slurm_dbd_server::SlurmDbdServer::new(DbdService {
            server: self.clone(),
        })
        .max_decoding_message_size(slurm_common::net::MAX_REQUEST)
        .max_encoding_message_size(usize::MAX);
        let routes = tonic::service::Routes::new(service);
        let life = grpc::Lifetime {
            first: HANDSHAKE,
            idle: IDLE,
        };
        grpc::serve_incoming(incoming, routes, self.budget.clone(), life, shutdown).await;
    }

    /// A caller that may send the controller's accounting records.
    fn sent_by_controller(&self, peer: &slurm_common::tls::Peer) -> bool {
        match (&self.controller_cert, peer) {
            (Some(c), slurm_common::tls::Peer::Cert(p)) => c == p,
            (Some(_), _) => false,
            (None, p) => p.is_daemon(),
        }
    }

    /// One call: its credential (bound to its method and message, used
    /// once; a user's token with `AuthAltTypes=auth/jwt`), its message and
    /// its caller's right to it checked, then answered.
    async fn call<T: prost::Message>(
        &self,
        req: tonic::Request<T>,
        method: &'static str,
        into: fn(T) -> DbdCall,
    ) -> AcctResponse {
        let Some(caller) = grpc::caller_of(&req) else {
            return err(AcctErrorKind::Protocol, "no connection information");
        };
        let now = now();
        let jwt = self.jwt_key.as_deref();
        let to = slurm_common::auth::TO_DBD;
        let cred =
            match grpc::verify_call_or_token(&req, method, to, &self.key, jwt, now, &self.seen) {
                Ok(c) => c,
                Err(e) => return refused(&caller, e),
            };
        let body = match into(req.into_inner()).into_body() {
            Ok(b) => b,
            Err(e) => return err(AcctErrorKind::Protocol, e.to_string()),
        };
        // With TLS, records come only from a daemon's certificate (the
        // controller's), never from a command's connection.
        if body.is_ingest() && caller.peer.secured() && !self.sent_by_controller(&caller.peer) {
            return err(
                AcctErrorKind::AccessDenied,
                "accounting records are taken only from the controller's certificate",
            );
        }
        self.checked(cred.uid, body, now).await
    }

    /// Answer a request whose credential has been checked.
    async fn checked(&self, uid: u32, mut body: AcctRequest, now: i64) -> AcctResponse {
        let superuser = uid == 0 || Some(uid) == self.slurm_user_uid;
        if body.is_ingest() && !superuser {
            return err(
                AcctErrorKind::AccessDenied,
                format!("uid {uid} may not send accounting records (only root or SlurmUser)"),
            );
        }
        if body.is_admin() && !superuser {
            let (name, level) = match self.admin_level_of(uid).await {
                Ok(l) => l,
                Err(e) => return storage_error(e),
            };
            // A coordinator's new accounts are checked again under the
            // storage's write lock (none may exist by then).
            if level < AdminLevel::Operator {
                if let AcctRequest::AddAccounts(a) = &mut body {
                    a.only_new = true;
                }
            }
            if level < AdminLevel::Operator && !self.coordinator_may(&name, &body).await {
                if matches!(
                    body,
                    AcctRequest::AddCoords(_) | AcctRequest::RemoveCoords(_)
                ) {
                    return err(
                        AcctErrorKind::AccessDenied,
                        format!(
                            "user '{name}' is not an administrator, an operator or a \
                             coordinator of every account named"
                        ),
                    );
                }
                return err(
                    AcctErrorKind::AccessDenied,
                    format!(
                        "user '{name}' is not an administrator or operator \
                         (AdminLevel=Operator or Administrator is needed)"
                    ),
                );
            }
            if grants_administrator(&body) && level < AdminLevel::Administrator {
                return err(
                    AcctErrorKind::AccessDenied,
                    format!("only an Administrator may make user '{name}' an Administrator"),
                );
            }
        }
        // What slurmdbd has served, and to whom, and stopping it: super
        // users only (root, SlurmUser, AdminLevel=Administrator), as
        // Slurm's slurmdbd.
        if matches!(
            &body,
            AcctRequest::Stats | AcctRequest::Shutdown | AcctRequest::ClearStats
        ) && !superuser
        {
            match self.admin_level_of(uid).await {
                Ok((_, AdminLevel::Administrator)) => {}
                Ok((name, _)) => {
                    return err(
                        AcctErrorKind::AccessDenied,
                        format!(
                            "user '{name}' may not {} \
                             (root, SlurmUser or AdminLevel=Administrator only)",
                            match &body {
                                AcctRequest::Stats => "see slurmdbd's statistics",
                                AcctRequest::ClearStats => "clear slurmdbd's statistics",
                                _ => "shut slurmdbd down",
                            }
                        ),
                    )
                }
                Err(e) => return storage_error(e),
            }
        }
        // PrivateData=events: node events are for operators only; as
        // Slurm's, PrivateData=reservations keeps reservations' records
        // for them too.
        let private = match &body {
            AcctRequest::ListEvents(_) if self.private.events => Some(("events", "node events")),
            AcctRequest::ListResvs(_) if self.private.reservations => {
                Some(("reservations", "reservations"))
            }
            _ => None,
        };
        if let (Some((kind, what)), false) = (private, superuser) {
            match self.operator(uid).await {
                Ok((_, true)) => {}
                Ok((name, false)) => {
                    return err(
                        AcctErrorKind::AccessDenied,
                        format!("PrivateData={kind}: user '{name}' may not see {what}"),
                    )
                }
                Err(e) => return storage_error(e),
            }
        }
        // What jobs used of reservations: under PrivateData=jobs, only the
        // caller's own unless an operator (whatever the request said).
        if let AcctRequest::ListResvs(f) = &mut body {
            f.jobs_of_uid = None;
            if self.private.jobs && !superuser {
                match self.operator(uid).await {
                    Ok((_, true)) => {}
                    Ok((_, false)) => f.jobs_of_uid = Some(uid),
                    Err(e) => return storage_error(e),
                }
            }
        }
        let admin = body.is_admin();
        let rpc = body.name();
        let t0 = std::time::Instant::now();
        let hides = match &body {
            AcctRequest::GetJobs(_) => self.private.jobs,
            AcctRequest::GetUsage(_) => self.private.usage,
            AcctRequest::ListUsers(_) | AcctRequest::ListAssocs(_) => {
                self.private.users || self.private.accounts
            }
            AcctRequest::ListAccounts(_) => self.private.accounts,
            _ => false,
        };
        let texts = matches!(&body, AcctRequest::GetJobs(q) if q.with_script || q.with_env);
        // Cut to what the caller may see first, then to each job id's last
        // record (an id's last record may be another user's).
        let mut body = body;
        let last_after = match &mut body {
            AcctRequest::GetJobs(q) if hides && !superuser && !q.duplicates => {
                q.duplicates = true;
                true
            }
            _ => false,
        };
        // What a change will be recorded as (`sacctmgr show transaction`).
        let txn = crate::txn::describe(&body);
        let resp = self.answer(body, now).await;
        if let (Some(t), AcctResponse::Changed(names)) = (txn, &resp) {
            if !names.is_empty() {
                let actor =
                    tokio::task::spawn_blocking(move || slurm_common::users::user_name_or_id(uid))
                        .await
                        .unwrap_or_else(|_| uid.to_string());
                for (t, names) in crate::txn::split_assocs(t, names) {
                    if let Err(e) = self.storage.add_txn(now, &actor, &t, &names).await {
                        tracing::error!("recording transaction {}: {e}", t.action);
                    }
                }
            }
        }
        // Scripts and environments are their owners' (and operators').
        let resp = if texts && !superuser {
            match self.own_texts(uid, resp).await {
                Ok(r) => r,
                Err(e) => return storage_error(e),
            }
        } else {
            resp
        };
        let mut resp = if hides && !superuser {
            match self.private_view(uid, resp).await {
                Ok(r) => r,
                Err(e) => return storage_error(e),
            }
        } else {
            resp
        };
        if let (true, AcctResponse::Jobs(rows)) = (last_after, &mut resp) {
            crate::storage::jobs::keep_last_records(rows);
        }
        self.stats.request(rpc, uid, t0.elapsed());
        if admin && matches!(&resp, AcctResponse::Changed(v) if !v.is_empty()) {
            self.tell_controllers();
        }
        resp
    }

    /// Whether `name` may make this change as a coordinator: it touches
    /// only accounts `name` coordinates (named in the request, never
    /// "all"), changes only users' associations there, gives no
    /// AdminLevel, no QOS and moves no account (Slurm lets coordinators add
    /// users and new sub-accounts, change their users' associations,
    /// remove their accounts' associations and manage their coordinators;
    /// deleting whole users or an account's record, changing accounts and
    /// an account's own share of its parent stay with operators). Never
    /// with `DisableCoordDBD`.
    async fn coordinator_may(&self, name: &str, body: &AcctRequest) -> bool {
        use AcctRequest as R;
        if self.disable_coord {
            tracing::info!(
                "{name}: coordinator privilege revoked with DisableCoordDBD, \
                 only admins/operators may change the database"
            );
            return false;
        }
        let no_qos = |s: &AssocSettings| s.qos.is_empty() && s.default_qos.is_none();
        let keeps =
            |p: &AssocPatch| p.parent.is_keep() && p.qos.is_keep() && p.default_qos.is_keep();
        let users_only = |f: &AssocFilter| {
            f.only_users || (!f.users.is_empty() && f.users.iter().all(|u| !u.is_empty()))
        };
        let accounts: Vec<String> = match body {
            R::AddCoords(c) | R::RemoveCoords(c) => c.accounts.clone(),
            R::AddUsers(a)
                if a.admin_level.is_none_or(|l| l == AdminLevel::None) && no_qos(&a.assoc) =>
            {
                a.accounts
                    .iter()
                    .chain(&a.default_account)
                    .cloned()
                    .collect()
            }
            // New accounts only: linking an existing one under its own
            // would make it theirs.
            R::AddAccounts(a) if no_qos(&a.assoc) => {
                let f = AccountFilter {
                    names: a.names.clone(),
                    ..Default::default()
                };
                match self.storage.list_accounts(&f).await {
                    Ok(v) if v.is_empty() => {}
                    _ => return false,
                }
                vec![a.parent.clone().unwrap_or_else(|| "root".into())]
            }
            // Their associations in the accounts only: a user's own
            // settings (default account, AdminLevel) are not theirs.
            R::ModifyUsers { filter, set, assoc }
                if set.admin_level.is_keep() && set.default_account.is_keep() && keeps(assoc) =>
            {
                filter.accounts.clone()
            }
            R::DeleteUsers(f) => f.accounts.clone(),
            R::ModifyAssocs { filter, set } if keeps(set) && users_only(filter) => {
                filter.accounts.clone()
            }
            // Associations of their accounts, sub-accounts' too (their
            // users' under them go with them), as Slurm's; an account's
            // record without a cluster named stays with operators.
            R::DeleteAssocs(f) => f.accounts.clone(),
            R::DeleteAccounts(f) if !f.clusters.is_empty() && f.parents.is_empty() => {
                f.names.clone()
            }
            _ => return false,
        };
        if accounts.is_empty() {
            return false;
        }
        match self.coordinator_of(name).await {
            Ok(u) => u.is_some_and(|u| accounts.iter().all(|a| u.coordinates(a))),
            Err(_) => false,
        }
    }

    /// `name`'s accounting record when it coordinates any account.
    async fn coordinator_of(
        &self,
        name: &str,
    ) -> Result<Option<slurm_proto::acct::UserRec>, StorageError> {
        let f = UserFilter {
            names: vec![name.to_string()],
            ..Default::default()
        };
        let v = self.storage.list_users(&f).await?;
        Ok(v.into_iter()
            .next()
            .filter(|u| !u.coord_accounts.is_empty()))
    }

    /// `uid`'s user name, and whether accounting makes it an operator or
    /// an administrator.
    async fn operator(&self, uid: u32) -> Result<(String, bool), StorageError> {
        let (me, level) = self.admin_level_of(uid).await?;
        Ok((me, level >= AdminLevel::Operator))
    }

    /// `uid`'s user name, and the AdminLevel accounting gives it.
    async fn admin_level_of(&self, uid: u32) -> Result<(String, AdminLevel), StorageError> {
        let me = slurm_common::users::user_name_or_id(uid);
        let level = self.storage.admin_level(&me).await?.unwrap_or_default();
        Ok((me, level))
    }

    /// Batch scripts and environments only of `uid`'s own jobs, unless it
    /// is an operator or administrator (whatever PrivateData says).
    async fn own_texts(&self, uid: u32, resp: AcctResponse) -> Result<AcctResponse, StorageError> {
        let (_, operator) = self.operator(uid).await?;
        if operator {
            return Ok(resp);
        }
        Ok(match resp {
            AcctResponse::Jobs(mut v) => {
                for r in v.iter_mut().filter(|r| r.job.uid != uid) {
                    r.job.script = None;
                    r.job.env = None;
                }
                AcctResponse::Jobs(v)
            }
            other => other,
        })
    }

    /// Cut a query's answer down to what `uid` may see under PrivateData
    /// (operators and administrators see it whole).
    async fn private_view(
        &self,
        uid: u32,
        resp: AcctResponse,
    ) -> Result<AcctResponse, StorageError> {
        let (me, operator) = self.operator(uid).await?;
        if operator {
            return Ok(resp);
        }
        let p = self.private;
        // Accounts the caller has an association in.
        let mine = || async {
            let f = slurm_proto::acct::AssocFilter {
                users: vec![me.clone()],
                ..Default::default()
            };
            self.storage
                .list_assocs(&f)
                .await
                .map(|v| v.into_iter().map(|a| a.account).collect::<Vec<_>>())
        };
        Ok(match resp {
            AcctResponse::Jobs(mut v) => {
                // A coordinator also sees its accounts' jobs (and their
                // sub-accounts'), as Slurm's.
                // (Not with DisableCoordDBD.)
                let coord = match v.iter().any(|r| r.job.uid != uid) && !self.disable_coord {
                    true => self.coordinator_of(&me).await?,
                    false => None,
                };
                v.retain(|r| {
                    r.job.uid == uid
                        || coord
                            .as_ref()
                            .is_some_and(|u| u.coordinates(&r.job.account))
                });
                AcctResponse::Jobs(v)
            }
            AcctResponse::Usage(mut u) => {
                u.assocs.retain(|a| a.user == me);
                AcctResponse::Usage(u)
            }
            AcctResponse::Users(mut v) => {
                // Users' records name their accounts (and a filter by
                // account tells who is in one): with either kind private,
                // the caller sees its own record only.
                if p.users || p.accounts {
                    v.retain(|u| u.name == me);
                }
                AcctResponse::Users(v)
            }
            AcctResponse::Assocs(mut v) => {
                if p.users {
                    v.retain(|a| a.user.is_empty() || a.user == me);
                }
                if p.accounts {
                    let accounts = mine().await?;
                    v.retain(|a| accounts.contains(&a.account));
                }
                AcctResponse::Assocs(v)
            }
            AcctResponse::Accounts(mut v) => {
                let accounts = mine().await?;
                v.retain(|a| accounts.contains(&a.name));
                AcctResponse::Accounts(v)
            }
            other => other,
        })
    }

    /// Ask every registered controller to fetch associations again, so a
    /// change reaches them at once (they also poll).
    fn tell_controllers(&self) {
        let storage = self.storage.clone();
        let key = self.key.clone();
        tokio::spawn(async move {
            let Ok(clusters) = storage.list_clusters(&ClusterFilter::default()).await else {
                return;
            };
            for c in clusters.into_iter().filter(|c| c.control_port != 0) {
                let addr = format!("{}:{}", c.control_host, c.control_port);
                // The controller's certificate names the address it registered.
                let call = slurm_proto::grpc::commands::CommandCall::AcctChanged(
                    slurm_proto::grpc::pb::Empty {},
                );
                let sign =
                    |b: &slurm_common::auth::Binding| Ok(key.sign(0, 0, "slurmdbd", now(), b));
                let told = match slurm_common::grpc::kept(&addr, &c.control_host) {
                    Ok(ch) => {
                        slurm_common::grpc::call_command(
                            &ch,
                            &c.control_host,
                            call,
                            sign,
                            Duration::from_secs(5),
                        )
                        .await
                    }
                    Err(e) => Err(e),
                };
                if let Err(e) = told {
                    tracing::debug!("cannot tell cluster {} at {addr}: {e}", c.name);
                }
            }
        });
    }

    async fn answer(&self, body: AcctRequest, now: i64) -> AcctResponse {
        let s = &self.storage;
        let changed = |r: Result<Vec<String>, StorageError>| match r {
            Ok(v) => AcctResponse::Changed(v),
            Err(e) => storage_error(e),
        };
        match body {
            AcctRequest::Ping => AcctResponse::Pong {
                version: slurm_proto::SLURM_VERSION.to_string(),
            },
            AcctRequest::Record(r) => self.ingest(vec![*r]).await,
            AcctRequest::Records(v) => self.ingest(v).await,
            AcctRequest::AddClusters(v) => changed(s.add_clusters(v).await),
            AcctRequest::DeleteClusters(f) => changed(s.delete_clusters(&f).await),
            AcctRequest::AddAccounts(a) => changed(s.add_accounts(&a).await),
            AcctRequest::ModifyAccounts { filter, set, assoc } => {
                changed(s.modify_accounts(&filter, &set, &assoc).await)
            }
            AcctRequest::DeleteAccounts(f) => changed(s.delete_accounts(&f).await),
            AcctRequest::AddUsers(a) => changed(s.add_users(&a).await),
            AcctRequest::ModifyUsers { filter, set, assoc } => {
                changed(s.modify_users(&filter, &set, &assoc).await)
            }
            AcctRequest::DeleteUsers(f) => changed(s.delete_users(&f).await),
            AcctRequest::ModifyAssocs { filter, set } => {
                changed(s.modify_assocs(&filter, &set).await)
            }
            AcctRequest::DeleteAssocs(f) => changed(s.delete_assocs(&f).await),
            AcctRequest::AddQos(v) => changed(s.add_qos(v).await),
            AcctRequest::ModifyQos { filter, set } => changed(s.modify_qos(&filter, &set).await),
            AcctRequest::DeleteQos(f) => changed(s.delete_qos(&f).await),
            AcctRequest::AddCoords(c) => changed(s.add_coords(&c).await),
            AcctRequest::RemoveCoords(c) => changed(s.remove_coords(&c).await),
            AcctRequest::Rollup { now: at } => {
                let t0 = std::time::Instant::now();
                match s.rollup(at.unwrap_or(now)).await {
                    Ok(st) => {
                        self.stats.rollup(&st, now, t0.elapsed());
                        AcctResponse::RolledUp(st)
                    }
                    Err(e) => storage_error(e),
                }
            }
            AcctRequest::Stats => AcctResponse::Stats(self.stats.snapshot()),
            AcctRequest::ClearStats => {
                tracing::info!("clear stats requested");
                self.stats.clear(now);
                AcctResponse::Changed(vec![])
            }
            AcctRequest::GetConfig => AcctResponse::Config(self.config.clone()),
            AcctRequest::Shutdown => {
                tracing::info!("shutdown requested");
                self.stop.notify_one();
                AcctResponse::Changed(vec![])
            }
            AcctRequest::ListClusters(f) => match s.list_clusters(&f).await {
                Ok(v) => AcctResponse::Clusters(v),
                Err(e) => storage_error(e),
            },
            AcctRequest::ListAccounts(f) => match s.list_accounts(&f).await {
                Ok(v) => AcctResponse::Accounts(v),
                Err(e) => storage_error(e),
            },
            AcctRequest::ListUsers(f) => match s.list_users(&f).await {
                Ok(v) => AcctResponse::Users(v),
                Err(e) => storage_error(e),
            },
            AcctRequest::ListAssocs(f) => match s.list_assocs(&f).await {
                Ok(v) => AcctResponse::Assocs(v),
                Err(e) => storage_error(e),
            },
            AcctRequest::ListQos(f) => match s.list_qos(&f).await {
                Ok(v) => AcctResponse::Qos(v),
                Err(e) => storage_error(e),
            },
            AcctRequest::GetJobs(q) => match s.jobs(&q).await {
                Ok(v) => AcctResponse::Jobs(v),
                Err(e) => storage_error(e),
            },
            AcctRequest::GetUsage(q) => match s.usage(&q).await {
                Ok(v) => AcctResponse::Usage(v),
                Err(e) => storage_error(e),
            },
            AcctRequest::ListEvents(f) => match s.events(&f).await {
                Ok(v) => AcctResponse::Events(v),
                Err(e) => storage_error(e),
            },
            AcctRequest::ListTxns(f) => match s.txns(&f).await {
                Ok(v) => AcctResponse::Txns(v),
                Err(e) => storage_error(e),
            },
            AcctRequest::ListResvs(f) => match s.resvs(&f, now).await {
                Ok(v) => AcctResponse::Resvs(v),
                Err(e) => storage_error(e),
            },
            AcctRequest::FixRunaway(f) => changed(s.fix_runaway(&f).await),
        }
    }

    async fn ingest(&self, records: Vec<SeqRecord>) -> AcctResponse {
        let n = records.len();
        match self.storage.ingest(records).await {
            Ok(o) => {
                tracing::debug!(
                    "ingested {n} records: {} applied, {} already seen",
                    o.applied,
                    o.duplicates
                );
                AcctResponse::Ack {
                    applied: o.applied,
                    duplicates: o.duplicates,
                    clusters: o.clusters,
                }
            }
            Err(e) => storage_error(e),
        }
    }
}

/// The gRPC face of [`Server`].
pub struct DbdService {
    pub server: Arc<Server>,
}

type Reply = Result<tonic::Response<pb::DbdReply>, tonic::Status>;

impl DbdService {
    async fn answer<T: prost::Message>(
        &self,
        req: tonic::Request<T>,
        method: &'static str,
        into: fn(T) -> DbdCall,
    ) -> Reply {
        let r = self.server.call(req, method, into).await;
        Ok(tonic::Response::new(dbd_reply(r)))
    }
}

#[tonic::async_trait]
impl pb::slurm_dbd_server::SlurmDbd for DbdService {
    async fn ping(&self, r: tonic::Request<pb::Empty>) -> Reply {
        self.answer(r, m::Ping, DbdCall::Ping).await
    }
    async fn send_records(&self, r: tonic::Request<pb::RecordBatch>) -> Reply {
        self.answer(r, m::SendRecords, DbdCall::SendRecords).await
    }
    async fn add_clusters(&self, r: tonic::Request<pb::ClusterList>) -> Reply {
        self.answer(r, m::AddClusters, DbdCall::AddClusters).await
    }
    async fn delete_clusters(&self, r: tonic::Request<pb::ClusterFilter>) -> Reply {
        self.answer(r, m::DeleteClusters, DbdCall::DeleteClusters)
            .await
    }
    async fn add_accounts(&self, r: tonic::Request<pb::AddAccountsRequest>) -> Reply {
        self.answer(r, m::AddAccounts, DbdCall::AddAccounts).await
    }
    async fn modify_accounts(&self, r: tonic::Request<pb::ModifyAccountsRequest>) -> Reply {
        self.answer(r, m::ModifyAccounts, DbdCall::ModifyAccounts)
            .await
    }
    async fn delete_accounts(&self, r: tonic::Request<pb::AccountFilter>) -> Reply {
        self.answer(r, m::DeleteAccounts, DbdCall::DeleteAccounts)
            .await
    }
    async fn add_users(&self, r: tonic::Request<pb::AddUsersRequest>) -> Reply {
        self.answer(r, m::AddUsers, DbdCall::AddUsers).await
    }
    async fn modify_users(&self, r: tonic::Request<pb::ModifyUsersRequest>) -> Reply {
        self.answer(r, m::ModifyUsers, DbdCall::ModifyUsers).await
    }
    async fn delete_users(&self, r: tonic::Request<pb::UserFilter>) -> Reply {
        self.answer(r, m::DeleteUsers, DbdCall::DeleteUsers).await
    }
    async fn modify_assocs(&self, r: tonic::Request<pb::ModifyAssocsRequest>) -> Reply {
        self.answer(r, m::ModifyAssocs, DbdCall::ModifyAssocs).await
    }
    async fn delete_assocs(&self, r: tonic::Request<pb::AssocFilter>) -> Reply {
        self.answer(r, m::DeleteAssocs, DbdCall::DeleteAssocs).await
    }
    async fn add_qos(&self, r: tonic::Request<pb::QosList>) -> Reply {
        self.answer(r, m::AddQos, DbdCall::AddQos).await
    }
    async fn modify_qos(&self, r: tonic::Request<pb::ModifyQosRequest>) -> Reply {
        self.answer(r, m::ModifyQos, DbdCall::ModifyQos).await
    }
    async fn delete_qos(&self, r: tonic::Request<pb::QosFilter>) -> Reply {
        self.answer(r, m::DeleteQos, DbdCall::DeleteQos).await
    }
    async fn add_coords(&self, r: tonic::Request<pb::CoordChange>) -> Reply {
        self.answer(r, m::AddCoords, DbdCall::AddCoords).await
    }
    async fn remove_coords(&self, r: tonic::Request<pb::CoordChange>) -> Reply {
        self.answer(r, m::RemoveCoords, DbdCall::RemoveCoords).await
    }
    async fn rollup(&self, r: tonic::Request<pb::RollupRequest>) -> Reply {
        self.answer(r, m::Rollup, DbdCall::Rollup).await
    }
    async fn list_clusters(&self, r: tonic::Request<pb::ClusterFilter>) -> Reply {
        self.answer(r, m::ListClusters, DbdCall::ListClusters).await
    }
    async fn list_accounts(&self, r: tonic::Request<pb::AccountFilter>) -> Reply {
        self.answer(r, m::ListAccounts, DbdCall::ListAccounts).await
    }
    async fn list_users(&self, r: tonic::Request<pb::UserFilter>) -> Reply {
        self.answer(r, m::ListUsers, DbdCall::ListUsers).await
    }
    async fn list_assocs(&self, r: tonic::Request<pb::AssocFilter>) -> Reply {
        self.answer(r, m::ListAssocs, DbdCall::ListAssocs).await
    }
    async fn list_qos(&self, r: tonic::Request<pb::QosFilter>) -> Reply {
        self.answer(r, m::ListQos, DbdCall::ListQos).await
    }
    async fn get_jobs(&self, r: tonic::Request<pb::AcctJobQuery>) -> Reply {
        self.answer(r, m::GetJobs, DbdCall::GetJobs).await
    }
    async fn get_usage(&self, r: tonic::Request<pb::UsageQuery>) -> Reply {
        self.answer(r, m::GetUsage, DbdCall::GetUsage).await
    }
    async fn get_stats(&self, r: tonic::Request<pb::Empty>) -> Reply {
        self.answer(r, m::GetStats, DbdCall::GetStats).await
    }
    async fn list_events(&self, r: tonic::Request<pb::EventFilter>) -> Reply {
        self.answer(r, m::ListEvents, DbdCall::ListEvents).await
    }
    async fn list_txns(&self, r: tonic::Request<pb::TxnFilter>) -> Reply {
        self.answer(r, m::ListTxns, DbdCall::ListTxns).await
    }
    async fn list_resvs(&self, r: tonic::Request<pb::ResvFilter>) -> Reply {
        self.answer(r, m::ListResvs, DbdCall::ListResvs).await
    }
    async fn fix_runaway(&self, r: tonic::Request<pb::FixRunawayRequest>) -> Reply {
        self.answer(r, m::FixRunaway, DbdCall::FixRunaway).await
    }
    async fn shutdown(&self, r: tonic::Request<pb::Empty>) -> Reply {
        self.answer(r, m::Shutdown, DbdCall::Shutdown).await
    }
    async fn clear_stats(&self, r: tonic::Request<pb::Empty>) -> Reply {
        self.answer(r, m::ClearStats, DbdCall::ClearStats).await
    }
    async fn get_config(&self, r: tonic::Request<pb::Empty>) -> Reply {
        self.answer(r, m::GetConfig, DbdCall::GetConfig).await
    }
}

/// Seconds until the next hour boundary (+ a few seconds so the hour is complete).
fn until_next_hour(now: i64) -> Duration {
    Duration::from_secs((3600 - now.rem_euclid(3600) + 5) as u64)
}

/// Hourly: roll usage up and purge old records. Runs once at start.
pub async fn maintenance(
    storage: Arc<Storage>,
    purge: PurgeSettings,
    stats: Arc<crate::stats::Stats>,
) {
    loop {
        let t = now();
        let t0 = std::time::Instant::now();
        let rolled = storage.rollup(t).await;
        if let Ok(st) = &rolled {
            stats.rollup(st, t, t0.elapsed());
        }
        match rolled {
            Ok(st) if st.hours > 0 => tracing::info!(
                "rollup: {} hours, {} days, {} months",
                st.hours,
                st.days,
                st.months
            ),
            Ok(_) => {}
            Err(e) => tracing::error!("rollup failed: {e}"),
        }
        match storage.purge(&purge, t).await {
            Ok(p) if p != Default::default() => tracing::info!(
                "purged {} jobs, {} steps, {} events, {} usage rows",
                p.jobs,
                p.steps,
                p.events,
                p.usage
            ),
            Ok(_) => {}
            Err(e) => tracing::error!("purge failed: {e}"),
        }
        tokio::time::sleep(until_next_hour(now())).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_hour() {
        assert_eq!(until_next_hour(3600), Duration::from_secs(3605));
        assert_eq!(until_next_hour(7199), Duration::from_secs(6));
    }
}
