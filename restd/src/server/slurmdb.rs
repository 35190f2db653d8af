//! `slurmdb/v0.0.44` (GET): each path one or a few slurmdbd queries, as the
//! authenticated user, written by [`crate::dbjson`]. slurmdbd's own access
//! rules apply (a user sees what `sacct`/`sacctmgr show` would show them).
//! Without `AccountingStorageType=accounting_storage/slurmdbd` every path
//! answers 503 naming the setting.

use super::*;
use crate::dbjson;
use slurm_proto::acct::{
    AccountFilter, AccountPatch, AccountRec, AcctErrorKind, AcctRequest, AcctResponse, AddAccounts,
    AddUsers, AssocFilter, AssocPatch, AssocRec, AssocSettings, ClusterFilter, ClusterRec,
    DbdRequest, JobQuery, ListChange, QosFilter, QosPatch, QosRec, Set, UserFilter, UserPatch,
    UserRec,
};

const DBD_CONNECTION_ERROR: i32 = 7000;

/// `id=1,2`: numbers, or a query error naming the bad one.
fn query_ids(q: &Q, src: &str) -> Result<Vec<u64>, Fail> {
    list(q, "id")
        .into_iter()
        .map(|i| {
            i.parse::<u64>()
                .map_err(|_| Fail::query(format!("id={i}: not a number"), src))
        })
        .collect()
}

/// The associations a query names (`id`, `cluster`, `account`, `user`,
/// `partition`).
fn assoc_filter(q: &Q, src: &str) -> Result<AssocFilter, Fail> {
    Ok(AssocFilter {
        ids: query_ids(q, src)?,
        clusters: list(q, "cluster"),
        accounts: list(q, "account"),
        users: list(q, "user"),
        partitions: list(q, "partition"),
        ..Default::default()
    })
}

fn unix_time(q: &Q, key: &str, src: &str) -> Result<Option<i64>, Fail> {
    match q.get(key).map(|s| s.trim()) {
        None | Some("") => Ok(None),
        Some(s) => s
            .parse::<i64>()
            .map(Some)
            .map_err(|_| Fail::query(format!("{key}={s}: expected a Unix timestamp"), src)),
    }
}

/// Query parameters a path reads; any other one gets a warning.
fn warn_unknown(q: &Q, known: &[&str], src: &str) -> Vec<Value> {
    let mut keys: Vec<&String> = q.keys().filter(|k| !known.contains(&k.as_str())).collect();
    keys.sort();
    keys.into_iter()
        .map(|k| {
            oa::warning_entry(
                &format!("query parameter {k} is not supported: ignored"),
                src,
            )
        })
        .collect()
}

fn not_found(what: &str, src: &str) -> Fail {
    Fail::new(StatusCode::NOT_FOUND, SLURM_ERROR, "Not found", what, src)
}

/// `App::$name`: one slurmdbd list request and its records.
macro_rules! db_list {
    ($name:ident, $filter:ty, $req:ident, $resp:ident, $rec:ty) => {
        async fn $name(&self, who: &Ident, f: $filter, src: &str) -> Result<Vec<$rec>, Fail> {
            match self.dbd(who, AcctRequest::$req(f), src).await? {
                AcctResponse::$resp(v) => Ok(v),
                r => Err(db_unexpected(&r, src)),
            }
        }
    };
}

/// The items of a `slurmdb` POST body, read by `parse`.
fn body_items<T>(
    body: &[u8],
    src: &str,
    parse: fn(&Value) -> Result<Vec<T>, request::BodyError>,
) -> Result<Vec<T>, Fail> {
    let v = request::parse_json(body).map_err(|e| Fail::body(e, src))?;
    parse(&v).map_err(|e| Fail::body(e, src))
}

impl App {
    /// One request to slurmdbd as `who`.
    async fn dbd(&self, who: &Ident, body: AcctRequest, src: &str) -> Result<AcctResponse, Fail> {
        let Some(addr) = &self.dbd_addr else {
            return Err(Fail::new(
                StatusCode::SERVICE_UNAVAILABLE,
                DBD_CONNECTION_ERROR,
                "Unable to connect to database",
                "AccountingStorageType is not accounting_storage/slurmdbd",
                src,
            ));
        };
        let cred = self
            .credential(who, slurm_common::dbd::bound(&body))
            .await?;
        let req = DbdRequest { cred, body };
        match slurm_common::dbd::call(addr, self.conf.dbd_name(), &req, self.timeout).await {
            Ok(AcctResponse::Error(e)) => {
                let status = match e.kind {
                    AcctErrorKind::NotFound => StatusCode::NOT_FOUND,
                    AcctErrorKind::AccessDenied => StatusCode::FORBIDDEN,
                    AcctErrorKind::InvalidCredential | AcctErrorKind::ExpiredCredential => {
                        StatusCode::UNAUTHORIZED
                    }
                    AcctErrorKind::InvalidRequest
                    | AcctErrorKind::AlreadyExists
                    | AcctErrorKind::InUse => StatusCode::UNPROCESSABLE_ENTITY,
                    AcctErrorKind::Storage | AcctErrorKind::Protocol => {
                        StatusCode::INTERNAL_SERVER_ERROR
                    }
                };
                Err(Fail::new(
                    status,
                    SLURM_ERROR,
                    "slurmdbd error",
                    &e.message,
                    src,
                ))
            }
            Ok(r) => Ok(r),
            Err(e) => Err(Fail::new(
                StatusCode::SERVICE_UNAVAILABLE,
                DBD_CONNECTION_ERROR,
                "Unable to connect to database",
                &format!("{addr}: {e}"),
                src,
            )),
        }
    }

    db_list!(db_assocs, AssocFilter, ListAssocs, Assocs, AssocRec);
    db_list!(
        db_clusters,
        ClusterFilter,
        ListClusters,
        Clusters,
        ClusterRec
    );
    db_list!(
        db_accounts,
        AccountFilter,
        ListAccounts,
        Accounts,
        AccountRec
    );
    db_list!(db_users, UserFilter, ListUsers, Users, UserRec);
    db_list!(db_qos, QosFilter, ListQos, Qos, QosRec);

    pub(super) async fn db_ping(&self, who: &Ident) -> HResult {
        let src = "slurmdb_ping";
        let t0 = Instant::now();
        let ok = matches!(
            self.dbd(who, AcctRequest::Ping, src).await?,
            AcctResponse::Pong { .. }
        );
        let host = self
            .dbd_addr
            .as_deref()
            .and_then(|a| a.rsplit_once(':').map(|x| x.0.to_string()))
            .unwrap_or_default();
        Ok(done(json!({"pings": [{
            "hostname": host,
            "responding": ok,
            "latency": t0.elapsed().as_micros() as u64,
            "primary": true,
        }]})))
    }

    pub(super) async fn db_jobs(&self, who: &Ident, id: Option<&str>, q: &Q) -> HResult {
        let src = "slurmdb_jobs_get";
        let mut query = JobQuery {
            clusters: list(q, "cluster"),
            users: list(q, "users"),
            accounts: list(q, "account"),
            partitions: list(q, "partition"),
            qos: list(q, "qos"),
            names: list(q, "job_name"),
            start: unix_time(q, "start_time", src)?,
            end: unix_time(q, "end_time", src)?,
            with_steps: q.get("skip_steps").is_none_or(|v| v == "false" || v == "0"),
            ..Default::default()
        };
        for s in list(q, "state") {
            let st = slurm_proto::JobState::parse(&s)
                .ok_or_else(|| Fail::query(format!("state={s}: unknown job state"), src))?;
            query.states.push(st);
        }
        if let Some(id) = id {
            let (job, _) = parse_job_id(id).map_err(|e| Fail::query(e, src))?;
            query.job_ids = vec![job];
            query.with_steps = true;
        }
        let warnings = warn_unknown(
            q,
            &[
                "cluster",
                "users",
                "account",
                "partition",
                "qos",
                "job_name",
                "start_time",
                "end_time",
                "skip_steps",
                "state",
            ],
            src,
        );
        let rows = match self.dbd(who, AcctRequest::GetJobs(query), src).await? {
            AcctResponse::Jobs(rows) => rows,
            r => return Err(db_unexpected(&r, src)),
        };
        if let (Some(id), true) = (id, rows.is_empty()) {
            return Err(not_found(&format!("job {id} not found"), src));
        }
        let now = slurm_common::auth::now();
        let jobs: Vec<Value> = rows.iter().map(|r| dbjson::job(r, now)).collect();
        let mut d = done(json!({ "jobs": jobs }));
        d.warnings = warnings;
        Ok(d)
    }

    pub(super) async fn db_accounts_get(&self, who: &Ident, name: Option<&str>, q: &Q) -> HResult {
        let src = "slurmdb_accounts_get";
        let f = AccountFilter {
            names: name.map(|n| vec![n.to_string()]).unwrap_or_default(),
            descriptions: list(q, "description"),
            ..Default::default()
        };
        let accounts = self.db_accounts(who, f, src).await?;
        if let (Some(n), true) = (name, accounts.is_empty()) {
            return Err(not_found(&format!("account {n} not found"), src));
        }
        let assocs = self
            .db_assocs(
                who,
                AssocFilter {
                    only_accounts: true,
                    ..Default::default()
                },
                src,
            )
            .await?;
        let list: Vec<Value> = accounts
            .iter()
            .map(|a| {
                let mine: Vec<&AssocRec> = assocs.iter().filter(|x| x.account == a.name).collect();
                dbjson::account(a, &mine)
            })
            .collect();
        let mut d = done(json!({ "accounts": list }));
        d.warnings = warn_unknown(q, &["description", "WithAssociations"], src);
        Ok(d)
    }

    pub(super) async fn db_users_get(&self, who: &Ident, name: Option<&str>, q: &Q) -> HResult {
        let src = "slurmdb_users_get";
        let mut f = UserFilter {
            names: name.map(|n| vec![n.to_string()]).unwrap_or_default(),
            default_accounts: list(q, "default_account"),
            ..Default::default()
        };
        for l in list(q, "admin_level") {
            f.admin_levels.push(
                slurm_proto::acct::AdminLevel::parse(&l)
                    .ok_or_else(|| Fail::query(format!("admin_level={l}: unknown level"), src))?,
            );
        }
        let users = self.db_users(who, f, src).await?;
        if let (Some(n), true) = (name, users.is_empty()) {
            return Err(not_found(&format!("user {n} not found"), src));
        }
        let assocs = self
            .db_assocs(
                who,
                AssocFilter {
                    only_users: true,
                    ..Default::default()
                },
                src,
            )
            .await?;
        let list: Vec<Value> = users
            .iter()
            .map(|u| {
                let mine: Vec<&AssocRec> = assocs.iter().filter(|x| x.user == u.name).collect();
                dbjson::user(u, &mine)
            })
            .collect();
        let mut d = done(json!({ "users": list }));
        d.warnings = warn_unknown(q, &["default_account", "admin_level", "with_assocs"], src);
        Ok(d)
    }

    pub(super) async fn db_assocs_get(&self, who: &Ident, q: &Q) -> HResult {
        let src = "slurmdb_associations_get";
        let f = assoc_filter(q, src)?;
        let assocs = self.db_assocs(who, f, src).await?;
        let users = self.db_users(who, UserFilter::default(), src).await?;
        let list: Vec<Value> = assocs
            .iter()
            .map(|a| {
                let default = users
                    .iter()
                    .any(|u| u.name == a.user && u.default_account == a.account);
                dbjson::assoc(a, default)
            })
            .collect();
        let mut d = done(json!({ "associations": list }));
        d.warnings = warn_unknown(q, &["id", "cluster", "account", "user", "partition"], src);
        Ok(d)
    }

    pub(super) async fn db_qos_get(&self, who: &Ident, name: Option<&str>, q: &Q) -> HResult {
        let src = "slurmdb_qos_get";
        let mut names: Vec<String> = name.map(|n| vec![n.to_string()]).unwrap_or_default();
        names.extend(list(q, "name"));
        let ids = query_ids(q, src)?;
        let qos = self.db_qos(who, QosFilter { names, ids }, src).await?;
        if let (Some(n), true) = (name, qos.is_empty()) {
            return Err(not_found(&format!("QOS {n} not found"), src));
        }
        let mut d = done(json!({ "qos": qos.iter().map(dbjson::qos).collect::<Vec<_>>() }));
        d.warnings = warn_unknown(q, &["name", "id"], src);
        Ok(d)
    }

    pub(super) async fn db_clusters_get(&self, who: &Ident, name: Option<&str>) -> HResult {
        let src = "slurmdb_clusters_get";
        let names: Vec<String> = name.map(|n| vec![n.to_string()]).unwrap_or_default();
        let clusters = self
            .db_clusters(
                who,
                ClusterFilter {
                    names: names.clone(),
                },
                src,
            )
            .await?;
        if let (Some(n), true) = (name, clusters.is_empty()) {
            return Err(not_found(&format!("cluster {n} not found"), src));
        }
        let roots = self
            .db_assocs(
                who,
                AssocFilter {
                    clusters: names,
                    accounts: vec!["root".into()],
                    only_accounts: true,
                    ..Default::default()
                },
                src,
            )
            .await?;
        let list: Vec<Value> = clusters
            .iter()
            .map(|c| dbjson::cluster(c, roots.iter().find(|r| r.cluster == c.name)))
            .collect();
        Ok(done(json!({ "clusters": list })))
    }

    pub(super) async fn db_diag(&self, who: &Ident) -> HResult {
        let src = "slurmdb_get_stats";
        match self.dbd(who, AcctRequest::Stats, src).await? {
            AcctResponse::Stats(st) => Ok(done(json!({ "statistics": dbjson::stats(&st) }))),
            r => Err(db_unexpected(&r, src)),
        }
    }

    pub(super) async fn db_tres(&self, who: &Ident) -> HResult {
        let src = "slurmdb_tres_get";
        let clusters = self.db_clusters(who, ClusterFilter::default(), src).await?;
        Ok(done(json!({ "TRES": dbjson::tres_table(&clusters) })))
    }

    pub(super) async fn db_config(&self, who: &Ident) -> HResult {
        let src = "slurmdb_config_get";
        let clusters = self.db_clusters(who, ClusterFilter::default(), src).await?;
        let accounts = self.db_accounts(who, AccountFilter::default(), src).await?;
        let users = self.db_users(who, UserFilter::default(), src).await?;
        let qos = self.db_qos(who, QosFilter::default(), src).await?;
        let assocs = self.db_assocs(who, AssocFilter::default(), src).await?;
        let of = |pred: &dyn Fn(&AssocRec) -> bool| -> Vec<&AssocRec> {
            assocs.iter().filter(|a| pred(a)).collect()
        };
        Ok(done(json!({
            "clusters": clusters
                .iter()
                .map(|c| dbjson::cluster(c, assocs.iter().find(|r| r.cluster == c.name && r.account == "root" && r.user.is_empty())))
                .collect::<Vec<_>>(),
            "tres": dbjson::tres_table(&clusters),
            "accounts": accounts
                .iter()
                .map(|a| dbjson::account(a, &of(&|x| x.account == a.name && x.user.is_empty())))
                .collect::<Vec<_>>(),
            "users": users
                .iter()
                .map(|u| dbjson::user(u, &of(&|x| x.user == u.name)))
                .collect::<Vec<_>>(),
            "qos": qos.iter().map(dbjson::qos).collect::<Vec<_>>(),
            "wckeys": [],
            "associations": assocs
                .iter()
                .map(|a| dbjson::assoc(a, users.iter().any(|u| u.name == a.user && u.default_account == a.account)))
                .collect::<Vec<_>>(),
            "instances": [],
        })))
    }
}

impl App {
    /// An add/modify/delete: what slurmdbd says changed.
    async fn db_change(
        &self,
        who: &Ident,
        body: AcctRequest,
        src: &str,
    ) -> Result<Vec<String>, Fail> {
        match self.dbd(who, body, src).await? {
            AcctResponse::Changed(v) => Ok(v),
            r => Err(db_unexpected(&r, src)),
        }
    }

    pub(super) async fn db_accounts_post(&self, who: &Ident, body: &[u8]) -> HResult {
        let src = "slurmdb_accounts_add";
        let list = body_items(body, src, request::db_accounts)?;
        for a in list {
            let filter = AccountFilter {
                names: vec![a.name.clone()],
                ..Default::default()
            };
            let exists = !self.db_accounts(who, filter.clone(), src).await?.is_empty();
            let req = if exists {
                let to = |x: Option<String>| x.map_or(Set::Keep, Set::To);
                AcctRequest::ModifyAccounts {
                    filter,
                    set: AccountPatch {
                        description: to(a.description),
                        organization: to(a.organization),
                    },
                    assoc: AssocPatch::default(),
                }
            } else {
                AcctRequest::AddAccounts(AddAccounts {
                    names: vec![a.name.clone()],
                    description: a.description,
                    organization: a.organization,
                    ..Default::default()
                })
            };
            self.db_change(who, req, src).await?;
        }
        Ok(done(json!({})))
    }

    pub(super) async fn db_users_post(&self, who: &Ident, body: &[u8]) -> HResult {
        let src = "slurmdb_users_add";
        let list = body_items(body, src, request::db_users)?;
        for u in list {
            let filter = UserFilter {
                names: vec![u.name.clone()],
                ..Default::default()
            };
            let exists = !self.db_users(who, filter.clone(), src).await?.is_empty();
            let req = if exists {
                AcctRequest::ModifyUsers {
                    filter,
                    set: UserPatch {
                        default_account: u.default_account.map_or(Set::Keep, Set::To),
                        admin_level: u.admin_level.map_or(Set::Keep, Set::To),
                    },
                    assoc: AssocPatch::default(),
                }
            } else {
                AcctRequest::AddUsers(AddUsers {
                    names: vec![u.name.clone()],
                    accounts: u.default_account.iter().cloned().collect(),
                    default_account: u.default_account,
                    admin_level: u.admin_level,
                    ..Default::default()
                })
            };
            self.db_change(who, req, src).await?;
        }
        Ok(done(json!({})))
    }

    pub(super) async fn db_assocs_post(&self, who: &Ident, body: &[u8]) -> HResult {
        let src = "slurmdb_associations_add";
        let list = body_items(body, src, request::db_assocs)?;
        for a in list {
            let filter = AssocFilter {
                accounts: vec![a.account.clone()],
                users: if a.user.is_empty() {
                    Vec::new()
                } else {
                    vec![a.user.clone()]
                },
                clusters: a.cluster.iter().cloned().collect(),
                partitions: a.partition.iter().cloned().collect(),
                only_accounts: a.user.is_empty(),
                only_users: !a.user.is_empty(),
                ..Default::default()
            };
            let exists = !self.db_assocs(who, filter.clone(), src).await?.is_empty();
            let settings = AssocSettings {
                shares: a.shares,
                qos: a.qos.clone().unwrap_or_default(),
                default_qos: a.default_qos.clone(),
                ..Default::default()
            };
            let req = if exists {
                AcctRequest::ModifyAssocs {
                    filter,
                    set: AssocPatch {
                        shares: a.shares.map_or(Set::Keep, Set::To),
                        parent: a.parent.clone().map_or(Set::Keep, Set::To),
                        qos: a.qos.clone().map_or(ListChange::Keep, ListChange::Replace),
                        default_qos: a.default_qos.clone().map_or(Set::Keep, Set::To),
                        ..Default::default()
                    },
                }
            } else if a.user.is_empty() {
                AcctRequest::AddAccounts(AddAccounts {
                    names: vec![a.account.clone()],
                    parent: a.parent.clone(),
                    clusters: a.cluster.iter().cloned().collect(),
                    assoc: settings,
                    ..Default::default()
                })
            } else {
                AcctRequest::AddUsers(AddUsers {
                    names: vec![a.user.clone()],
                    accounts: vec![a.account.clone()],
                    clusters: a.cluster.iter().cloned().collect(),
                    partitions: a.partition.iter().cloned().collect(),
                    assoc: settings,
                    ..Default::default()
                })
            };
            self.db_change(who, req, src).await?;
        }
        Ok(done(json!({})))
    }

    pub(super) async fn db_qos_post(&self, who: &Ident, body: &[u8]) -> HResult {
        let src = "slurmdb_qos_add";
        let list = body_items(body, src, request::db_qos)?;
        for q in list {
            let filter = QosFilter {
                names: vec![q.name.clone()],
                ..Default::default()
            };
            let exists = !self.db_qos(who, filter.clone(), src).await?.is_empty();
            let req = if exists {
                AcctRequest::ModifyQos {
                    filter,
                    set: QosPatch {
                        description: q.description.map_or(Set::Keep, Set::To),
                        priority: q.priority.map_or(Set::Keep, Set::To),
                        ..Default::default()
                    },
                }
            } else {
                AcctRequest::AddQos(vec![QosRec {
                    name: q.name.clone(),
                    description: q.description.unwrap_or_default(),
                    priority: q.priority.unwrap_or(0),
                    ..Default::default()
                }])
            };
            self.db_change(who, req, src).await?;
        }
        Ok(done(json!({})))
    }

    pub(super) async fn db_clusters_post(&self, who: &Ident, body: &[u8]) -> HResult {
        let src = "slurmdb_clusters_add";
        let names = body_items(body, src, request::db_clusters)?;
        let known = self
            .db_clusters(
                who,
                ClusterFilter {
                    names: names.clone(),
                },
                src,
            )
            .await?;
        let new: Vec<ClusterRec> = names
            .into_iter()
            .filter(|n| !known.iter().any(|k| k.name.eq_ignore_ascii_case(n)))
            .map(|name| ClusterRec {
                name,
                ..Default::default()
            })
            .collect();
        if !new.is_empty() {
            self.db_change(who, AcctRequest::AddClusters(new), src)
                .await?;
        }
        Ok(done(json!({})))
    }

    pub(super) async fn db_delete(&self, who: &Ident, what: Delete, q: &Q) -> HResult {
        let (src, key, req) = match what {
            Delete::Account(n) => (
                "slurmdb_accounts_remove",
                "removed_accounts",
                AcctRequest::DeleteAccounts(AccountFilter {
                    names: vec![n],
                    ..Default::default()
                }),
            ),
            Delete::User(n) => (
                "slurmdb_users_remove",
                "",
                AcctRequest::DeleteUsers(UserFilter {
                    names: vec![n],
                    ..Default::default()
                }),
            ),
            Delete::Qos(n) => (
                "slurmdb_qos_remove",
                "removed_qos",
                AcctRequest::DeleteQos(QosFilter {
                    names: vec![n],
                    ..Default::default()
                }),
            ),
            Delete::Cluster(n) => (
                "slurmdb_clusters_remove",
                "deleted_clusters",
                AcctRequest::DeleteClusters(ClusterFilter { names: vec![n] }),
            ),
            Delete::Assocs => {
                let src = "slurmdb_associations_remove";
                let f = assoc_filter(q, src)?;
                if f == AssocFilter::default() {
                    return Err(Fail::query(
                        "name the associations to remove (account, user, cluster, partition or id)"
                            .into(),
                        src,
                    ));
                }
                (src, "removed_associations", AcctRequest::DeleteAssocs(f))
            }
        };
        let mut removed = self.db_change(who, req, src).await?;
        if removed.is_empty() {
            return Err(not_found("nothing matched", src));
        }
        // slurmdbd also lists the associations that went with an account
        // (`C = c A = a`): the names alone are what was asked for.
        if key != "removed_associations" && removed.iter().any(|r| !r.contains(" = ")) {
            removed.retain(|r| !r.contains(" = "));
        }
        Ok(done(if key.is_empty() {
            json!({})
        } else {
            json!({ key: removed })
        }))
    }
}

/// What a `slurmdb` DELETE removes.
pub(super) enum Delete {
    Account(String),
    User(String),
    Qos(String),
    Cluster(String),
    Assocs,
}

fn db_unexpected(r: &AcctResponse, src: &str) -> Fail {
    unexpected_from("slurmdbd", r, src)
}

pub(super) async fn h_db_ping(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
) -> HttpResponse {
    handler!(Kind::DbPing, app, peer, headers, |who| app.db_ping(who))
}

/// A GET of a list: `app.$method(who, None, &query)`.
macro_rules! db_get_list {
    ($name:ident, $kind:expr, $method:ident) => {
        pub(super) async fn $name(
            State(app): St,
            ConnectInfo(peer): Peer_,
            headers: HeaderMap,
            query: Result<Query<Q>, axum::extract::rejection::QueryRejection>,
        ) -> HttpResponse {
            let query = q(query);
            handler!($kind, app, peer, headers, |who| app
                .$method(who, None, &query))
        }
    };
}

/// A GET of one by name: `app.$method(who, Some(&name), &query)`.
macro_rules! db_get_named {
    ($name:ident, $kind:expr, $method:ident) => {
        pub(super) async fn $name(
            State(app): St,
            ConnectInfo(peer): Peer_,
            headers: HeaderMap,
            name: Result<Path<String>, axum::extract::rejection::PathRejection>,
            query: Result<Query<Q>, axum::extract::rejection::QueryRejection>,
        ) -> HttpResponse {
            let (name, query) = (p(name), q(query));
            handler!($kind, app, peer, headers, |who| app.$method(
                who,
                Some(&name),
                &query
            ))
        }
    };
}

db_get_list!(h_db_jobs, Kind::DbJobs, db_jobs);
db_get_named!(h_db_job, Kind::DbJobs, db_jobs);
db_get_list!(h_db_accounts, Kind::Accounts, db_accounts_get);
db_get_named!(h_db_account, Kind::Accounts, db_accounts_get);
db_get_list!(h_db_users, Kind::Users, db_users_get);
db_get_named!(h_db_user, Kind::Users, db_users_get);
db_get_list!(h_db_qos_list, Kind::Qos, db_qos_get);
db_get_named!(h_db_qos, Kind::Qos, db_qos_get);

pub(super) async fn h_db_assocs(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    query: Result<Query<Q>, axum::extract::rejection::QueryRejection>,
) -> HttpResponse {
    let query = q(query);
    handler!(Kind::Assocs, app, peer, headers, |who| app
        .db_assocs_get(who, &query))
}

pub(super) async fn h_db_clusters(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
) -> HttpResponse {
    handler!(Kind::Clusters, app, peer, headers, |who| app
        .db_clusters_get(who, None))
}

pub(super) async fn h_db_cluster(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    name: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> HttpResponse {
    let name = p(name);
    handler!(Kind::Clusters, app, peer, headers, |who| app
        .db_clusters_get(who, Some(&name)))
}

pub(super) async fn h_db_diag(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
) -> HttpResponse {
    handler!(Kind::DbDiag, app, peer, headers, |who| app.db_diag(who))
}

pub(super) async fn h_db_tres(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
) -> HttpResponse {
    handler!(Kind::Tres, app, peer, headers, |who| app.db_tres(who))
}

pub(super) async fn h_db_config(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
) -> HttpResponse {
    handler!(Kind::Plain, app, peer, headers, |who| app.db_config(who))
}

macro_rules! db_post {
    ($name:ident, $kind:expr, $method:ident) => {
        pub(super) async fn $name(
            State(app): St,
            ConnectInfo(peer): Peer_,
            headers: HeaderMap,
            body: Result<Bytes, axum::extract::rejection::BytesRejection>,
        ) -> HttpResponse {
            let body = body_of(body);
            handler!($kind, app, peer, headers, |who| async {
                app.$method(who, &body.clone()?).await
            })
        }
    };
}

db_post!(h_db_accounts_post, Kind::Plain, db_accounts_post);
db_post!(h_db_users_post, Kind::Plain, db_users_post);
db_post!(h_db_assocs_post, Kind::Plain, db_assocs_post);
db_post!(h_db_qos_post, Kind::Plain, db_qos_post);
db_post!(h_db_clusters_post, Kind::Plain, db_clusters_post);

macro_rules! db_delete_named {
    ($name:ident, $kind:expr, $variant:ident) => {
        pub(super) async fn $name(
            State(app): St,
            ConnectInfo(peer): Peer_,
            headers: HeaderMap,
            name: Result<Path<String>, axum::extract::rejection::PathRejection>,
        ) -> HttpResponse {
            let name = p(name);
            let q = Q::new();
            handler!($kind, app, peer, headers, |who| app.db_delete(
                who,
                Delete::$variant(name.clone()),
                &q
            ))
        }
    };
}

db_delete_named!(h_db_account_delete, Kind::AccountsRemoved, Account);
db_delete_named!(h_db_user_delete, Kind::Plain, User);
db_delete_named!(h_db_qos_delete, Kind::QosRemoved, Qos);
db_delete_named!(h_db_cluster_delete, Kind::ClustersRemoved, Cluster);

pub(super) async fn h_db_assocs_delete(
    State(app): St,
    ConnectInfo(peer): Peer_,
    headers: HeaderMap,
    query: Result<Query<Q>, axum::extract::rejection::QueryRejection>,
) -> HttpResponse {
    let query = q(query);
    handler!(Kind::AssocsRemoved, app, peer, headers, |who| app
        .db_delete(who, Delete::Assocs, &query))
}

/// The `slurmdb/v0.0.44` routes.
pub(super) fn routes(mut r: Router<Arc<App>>) -> Router<Arc<App>> {
    let s = "/slurmdb/v0.0.44";
    r = both(r, &format!("{s}/ping/"), get(h_db_ping));
    r = both(r, &format!("{s}/diag/"), get(h_db_diag));
    r = both(r, &format!("{s}/jobs/"), get(h_db_jobs));
    r = both(r, &format!("{s}/job/{{job_id}}"), get(h_db_job));
    r = both(
        r,
        &format!("{s}/accounts/"),
        get(h_db_accounts).post(h_db_accounts_post),
    );
    r = both(
        r,
        &format!("{s}/account/{{account_name}}"),
        get(h_db_account).delete(h_db_account_delete),
    );
    r = both(
        r,
        &format!("{s}/users/"),
        get(h_db_users).post(h_db_users_post),
    );
    r = both(
        r,
        &format!("{s}/user/{{name}}"),
        get(h_db_user).delete(h_db_user_delete),
    );
    r = both(
        r,
        &format!("{s}/associations/"),
        get(h_db_assocs)
            .post(h_db_assocs_post)
            .delete(h_db_assocs_delete),
    );
    r = both(
        r,
        &format!("{s}/association/"),
        get(h_db_assocs).delete(h_db_assocs_delete),
    );
    r = both(
        r,
        &format!("{s}/qos/"),
        get(h_db_qos_list).post(h_db_qos_post),
    );
    r = both(
        r,
        &format!("{s}/qos/{{qos}}"),
        get(h_db_qos).delete(h_db_qos_delete),
    );
    r = both(
        r,
        &format!("{s}/clusters/"),
        get(h_db_clusters).post(h_db_clusters_post),
    );
    r = both(
        r,
        &format!("{s}/cluster/{{cluster_name}}"),
        get(h_db_cluster).delete(h_db_cluster_delete),
    );
    r = both(r, &format!("{s}/tres/"), get(h_db_tres));
    r = both(r, &format!("{s}/config"), get(h_db_config));
    r
}
