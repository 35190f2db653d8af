//! The listener: frames carry [`DbdRequest`]s (credential checked first) and
//! are answered with [`AcctResponse`]s; a connection may carry several
//! requests, one after another. Plus the hourly maintenance task (rollup and
//! purge).
//!
//! Who may do what: ingestion only root and SlurmUser (the controller);
//! changes to the database root, SlurmUser and users whose AdminLevel is
//! Operator or Administrator (only an Administrator may make one); queries
//! any authenticated user.

use crate::conf::PurgeSettings;
use crate::storage::{Storage, StorageError};
use slurm_common::auth::{now, AuthError, Key};
use slurm_common::net::write_frame;
use slurm_proto::acct::*;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// How long a connection may sit idle between requests.
const IDLE: Duration = Duration::from_secs(300);

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
    /// Credentials accepted and not yet expired (each is good once).
    pub seen: slurm_common::auth::ReplayCache,
    /// Users' tokens are accepted (`AuthAltTypes=auth/jwt`) with this key.
    pub jwt_key: Option<Vec<u8>>,
}

/// The answer to a request whose credential was refused.
fn refused(uid: u32, e: slurm_common::net::NetError) -> AcctResponse {
    use slurm_common::net::NetError;
    tracing::info!("refused request (uid {uid}): {e}");
    let kind = match &e {
        NetError::Auth(AuthError::Expired | AuthError::NotYetValid) => {
            AcctErrorKind::ExpiredCredential
        }
        NetError::Auth(_) => AcctErrorKind::InvalidCredential,
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
    /// Accept connections until `shutdown` completes.
    pub async fn serve(self: Arc<Self>, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        let limit = Arc::new(Semaphore::new(256));
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                _ = &mut shutdown => return,
                a = listener.accept() => a,
            };
            let sock = match accepted {
                Ok((s, _)) => s,
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
        let Some((mut sock, peer)) =
            slurm_common::net::accept_within(sock, self.tls.as_ref(), HANDSHAKE).await
        else {
            return;
        };
        loop {
            let (env, _held): (slurm_common::net::Envelope, _) = match tokio::time::timeout(
                IDLE,
                slurm_common::net::read_frame_budget(
                    &mut sock,
                    slurm_common::net::MAX_REQUEST,
                    Some(&self.budget),
                ),
            )
            .await
            {
                Err(_) | Ok(Ok(None)) => return,
                Ok(Ok(Some(r))) => r,
                Ok(Err(e)) => {
                    tracing::debug!("bad request: {e}");
                    let _ =
                        write_frame(&mut sock, &err(AcctErrorKind::Protocol, e.to_string())).await;
                    return;
                }
            };
            let now = now();
            let uid = env.cred.uid;
            let jwt = self.jwt_key.as_deref();
            let resp = match env.open_with::<AcctRequest>(
                &self.key,
                jwt,
                slurm_common::auth::TO_DBD,
                now,
                &self.seen,
            ) {
                // With TLS, records come only from a daemon's certificate
                // (the controller's), never from a command's connection.
                Ok((_, body))
                    if body.is_ingest() && peer.secured() && !self.sent_by_controller(&peer) =>
                {
                    err(
                        AcctErrorKind::AccessDenied,
                        "accounting records are taken only from the controller's certificate",
                    )
                }
                Ok((cred, body)) => self.checked(cred.uid, body, now).await,
                Err(e) => refused(uid, e),
            };
            if let Err(e) = write_frame(&mut sock, &resp).await {
                tracing::debug!("cannot reply: {e}");
                return;
            }
        }
    }

    /// A caller that may send the controller's accounting records.
    fn sent_by_controller(&self, peer: &slurm_common::tls::Peer) -> bool {
        match (&self.controller_cert, peer) {
            (Some(c), slurm_common::tls::Peer::Cert(p)) => c == p,
            (Some(_), _) => false,
            (None, p) => p.is_daemon(),
        }
    }

    /// Check the credential (bound to this body, for slurmdbd, used once)
    /// and the caller's rights, then answer.
    pub async fn handle(&self, req: DbdRequest, now: i64) -> AcctResponse {
        let b = slurm_common::dbd::bound(&req.body);
        if let Err(e) = self
            .key
            .verify(&req.cred, now, &b)
            .and_then(|_| self.seen.check(&req.cred, now))
        {
            return refused(req.cred.uid, slurm_common::net::NetError::Auth(e));
        }
        self.checked(req.cred.uid, req.body, now).await
    }

    /// Answer a request whose credential has been checked.
    async fn checked(&self, uid: u32, body: AcctRequest, now: i64) -> AcctResponse {
        let superuser = uid == 0 || Some(uid) == self.slurm_user_uid;
        if body.is_ingest() && !superuser {
            return err(
                AcctErrorKind::AccessDenied,
                format!("uid {uid} may not send accounting records (only root or SlurmUser)"),
            );
        }
        if body.is_admin() && !superuser {
            let name = slurm_common::users::user_by_uid(uid)
                .map(|u| u.name)
                .unwrap_or_else(|| uid.to_string());
            let level = match self.storage.admin_level(&name).await {
                Ok(l) => l.unwrap_or_default(),
                Err(e) => return storage_error(e),
            };
            if level < AdminLevel::Operator {
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
        let resp = self.answer(body, now).await;
        let resp = if hides && !superuser {
            match self.private_view(uid, resp).await {
                Ok(r) => r,
                Err(e) => return storage_error(e),
            }
        } else {
            resp
        };
        self.stats.request(rpc, uid, t0.elapsed());
        if admin && matches!(&resp, AcctResponse::Changed(v) if !v.is_empty()) {
            self.tell_controllers();
        }
        resp
    }

    /// Cut a query's answer down to what `uid` may see under PrivateData
    /// (operators and administrators see it whole).
    async fn private_view(
        &self,
        uid: u32,
        resp: AcctResponse,
    ) -> Result<AcctResponse, StorageError> {
        let me = slurm_common::users::user_by_uid(uid)
            .map(|u| u.name)
            .unwrap_or_else(|| uid.to_string());
        if self.storage.admin_level(&me).await?.unwrap_or_default() >= AdminLevel::Operator {
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
                v.retain(|r| r.job.uid == uid);
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
            AcctRequest::Record(r) => self.ingest(vec![r]).await,
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
