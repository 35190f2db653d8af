//! Clusters, accounts, users, associations and QOS: what `sacctmgr` manages.
//!
//! The account tree lives in the associations: an account's own association
//! on a cluster (`user_name = ''`) names its parent; a user association hangs
//! under its account. Adding a cluster creates `root` and `root`'s user
//! association there. Names of clusters, accounts, users and QOS are
//! lower-cased, as Slurm does.

use super::sql::{split_list, RowExt, Val, Q};
use super::{Result, Storage, StorageError};
use crate::tres;
use slurm_proto::acct::*;
use sqlx::any::AnyRow;
use sqlx::AnyConnection;
use std::collections::{BTreeMap, BTreeSet, HashMap};

const ASSOC_COLS: &str = "id, cluster, account, user_name, part, parent_acct, shares, \
    grp_jobs, grp_submit_jobs, grp_wall, max_jobs, max_submit_jobs, max_wall, grp_tres, \
    grp_tres_mins, max_tres, max_tres_per_user, max_tres_mins, qos_list, default_qos";

const QOS_COLS: &str = "id, name, description, priority, flags, preempt, preempt_mode, \
    grace_time, usage_factor, grp_jobs, grp_submit_jobs, grp_wall, max_jobs_per_user, \
    max_submit_jobs_per_user, max_jobs_per_account, max_submit_jobs_per_account, max_wall, \
    grp_tres, grp_tres_mins, max_tres_per_user, max_tres_per_job, max_tres_per_node, \
    max_tres_per_account, min_tres_per_job";

const QOS_FLAGS: [&str; 11] = [
    "DENYONLIMIT",
    "ENFORCEUSAGETHRESHOLD",
    "NODECAY",
    "NORESERVE",
    "OVERPARTQOS",
    "PARTITIONMAXNODES",
    "PARTITIONMINNODES",
    "PARTITIONTIMELIMIT",
    "REQUIRESRESERVATION",
    "USAGEFACTORSAFE",
    "RELATIVE",
];

const PREEMPT_MODES: [&str; 6] = ["cluster", "off", "cancel", "requeue", "suspend", "gang"];

fn invalid(m: impl Into<String>) -> StorageError {
    StorageError::Invalid(m.into())
}

/// A clean, lower-cased name, or an error naming what is wrong.
pub fn check_name(kind: &str, s: &str, max: usize) -> Result<String> {
    let n = s.trim().to_ascii_lowercase();
    if n.is_empty() {
        return Err(invalid(format!("{kind} name is empty")));
    }
    if n.len() > max {
        return Err(invalid(format!(
            "{kind} name '{n}' is longer than {max} characters"
        )));
    }
    if let Some(c) = n
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || ",='\"`;".contains(*c))
    {
        return Err(invalid(format!("{kind} name '{n}' contains '{c}'")));
    }
    Ok(n)
}

fn lower(v: &[String]) -> Vec<String> {
    v.iter().map(|s| s.trim().to_ascii_lowercase()).collect()
}

fn normalize_tres(field: &str, v: &mut Option<String>) -> Result<()> {
    if let Some(s) = v {
        *v = tres::normalize(s).map_err(|e| invalid(format!("{field}: {e}")))?;
    }
    Ok(())
}

fn check_assoc_limits(l: &mut AssocLimits) -> Result<()> {
    normalize_tres("GrpTRES", &mut l.grp_tres)?;
    normalize_tres("GrpTRESMins", &mut l.grp_tres_mins)?;
    normalize_tres("MaxTRES", &mut l.max_tres)?;
    normalize_tres("MaxTRESPerUser", &mut l.max_tres_per_user)?;
    normalize_tres("MaxTRESMins", &mut l.max_tres_mins)
}

fn check_qos_limits(l: &mut QosLimits) -> Result<()> {
    normalize_tres("GrpTRES", &mut l.grp_tres)?;
    normalize_tres("GrpTRESMins", &mut l.grp_tres_mins)?;
    normalize_tres("MaxTRESPerUser", &mut l.max_tres_per_user)?;
    normalize_tres("MaxTRESPerJob", &mut l.max_tres_per_job)?;
    normalize_tres("MaxTRESPerNode", &mut l.max_tres_per_node)?;
    normalize_tres("MaxTRESPerAccount", &mut l.max_tres_per_account)?;
    normalize_tres("MinTRESPerJob", &mut l.min_tres_per_job)
}

fn check_tres_patch(values: Vec<&str>) -> Result<()> {
    for v in values {
        tres::validate(v).map_err(invalid)?;
    }
    Ok(())
}

fn merge_tres(old: Option<&str>, new: &str) -> Option<String> {
    tres::merge(old, new)
}

fn assoc_limit_vals(l: &AssocLimits) -> Vec<(&'static str, Val)> {
    vec![
        ("grp_jobs", l.grp_jobs.into()),
        ("grp_submit_jobs", l.grp_submit_jobs.into()),
        ("grp_wall", l.grp_wall.into()),
        ("max_jobs", l.max_jobs.into()),
        ("max_submit_jobs", l.max_submit_jobs.into()),
        ("max_wall", l.max_wall.into()),
        ("grp_tres", l.grp_tres.clone().into()),
        ("grp_tres_mins", l.grp_tres_mins.clone().into()),
        ("max_tres", l.max_tres.clone().into()),
        ("max_tres_per_user", l.max_tres_per_user.clone().into()),
        ("max_tres_mins", l.max_tres_mins.clone().into()),
    ]
}

fn qos_limit_vals(l: &QosLimits) -> Vec<(&'static str, Val)> {
    vec![
        ("grp_jobs", l.grp_jobs.into()),
        ("grp_submit_jobs", l.grp_submit_jobs.into()),
        ("grp_wall", l.grp_wall.into()),
        ("max_jobs_per_user", l.max_jobs_per_user.into()),
        (
            "max_submit_jobs_per_user",
            l.max_submit_jobs_per_user.into(),
        ),
        ("max_jobs_per_account", l.max_jobs_per_account.into()),
        (
            "max_submit_jobs_per_account",
            l.max_submit_jobs_per_account.into(),
        ),
        ("max_wall", l.max_wall.into()),
        ("grp_tres", l.grp_tres.clone().into()),
        ("grp_tres_mins", l.grp_tres_mins.clone().into()),
        ("max_tres_per_user", l.max_tres_per_user.clone().into()),
        ("max_tres_per_job", l.max_tres_per_job.clone().into()),
        ("max_tres_per_node", l.max_tres_per_node.clone().into()),
        (
            "max_tres_per_account",
            l.max_tres_per_account.clone().into(),
        ),
        ("min_tres_per_job", l.min_tres_per_job.clone().into()),
    ]
}

fn assoc_from_row(r: &AnyRow) -> Result<AssocRec> {
    Ok(AssocRec {
        id: r.u("id")?,
        cluster: r.s("cluster")?,
        account: r.s("account")?,
        user: r.s("user_name")?,
        partition: r.s("part")?,
        parent: r.os("parent_acct")?,
        shares: r.u32("shares")?,
        limits: AssocLimits {
            grp_jobs: r.ou("grp_jobs")?,
            grp_submit_jobs: r.ou("grp_submit_jobs")?,
            grp_wall: r.ou("grp_wall")?,
            max_jobs: r.ou("max_jobs")?,
            max_submit_jobs: r.ou("max_submit_jobs")?,
            max_wall: r.ou("max_wall")?,
            grp_tres: r.os("grp_tres")?,
            grp_tres_mins: r.os("grp_tres_mins")?,
            max_tres: r.os("max_tres")?,
            max_tres_per_user: r.os("max_tres_per_user")?,
            max_tres_mins: r.os("max_tres_mins")?,
        },
        qos: split_list(&r.s("qos_list")?),
        default_qos: r.os("default_qos")?,
    })
}

fn qos_from_row(r: &AnyRow) -> Result<QosRec> {
    Ok(QosRec {
        id: r.u("id")?,
        name: r.s("name")?,
        description: r.s("description")?,
        priority: r.u32("priority")?,
        flags: split_list(&r.s("flags")?),
        preempt: split_list(&r.s("preempt")?),
        preempt_mode: r.s("preempt_mode")?,
        grace_time: r.u32("grace_time")?,
        usage_factor: r.f("usage_factor")?,
        limits: QosLimits {
            grp_jobs: r.ou("grp_jobs")?,
            grp_submit_jobs: r.ou("grp_submit_jobs")?,
            grp_wall: r.ou("grp_wall")?,
            max_jobs_per_user: r.ou("max_jobs_per_user")?,
            max_submit_jobs_per_user: r.ou("max_submit_jobs_per_user")?,
            max_jobs_per_account: r.ou("max_jobs_per_account")?,
            max_submit_jobs_per_account: r.ou("max_submit_jobs_per_account")?,
            max_wall: r.ou("max_wall")?,
            grp_tres: r.os("grp_tres")?,
            grp_tres_mins: r.os("grp_tres_mins")?,
            max_tres_per_user: r.os("max_tres_per_user")?,
            max_tres_per_job: r.os("max_tres_per_job")?,
            max_tres_per_node: r.os("max_tres_per_node")?,
            max_tres_per_account: r.os("max_tres_per_account")?,
            min_tres_per_job: r.os("min_tres_per_job")?,
        },
    })
}

fn admin_from_i64(v: i64) -> AdminLevel {
    match v {
        1 => AdminLevel::Operator,
        2 => AdminLevel::Administrator,
        _ => AdminLevel::None,
    }
}

fn admin_to_i64(a: AdminLevel) -> i64 {
    match a {
        AdminLevel::None => 0,
        AdminLevel::Operator => 1,
        AdminLevel::Administrator => 2,
    }
}

/// How sacctmgr names an association in its messages.
pub fn assoc_label(a: &AssocRec) -> String {
    let mut s = format!("C = {} A = {}", a.cluster, a.account);
    if !a.user.is_empty() {
        s.push_str(&format!(" U = {}", a.user));
    }
    if !a.partition.is_empty() {
        s.push_str(&format!(" P = {}", a.partition));
    }
    s
}

fn assoc_where(q: &mut Q, f: &AssocFilter) {
    q.and_in("id", &f.ids);
    q.and_in("cluster", &lower(&f.clusters));
    q.and_in("account", &lower(&f.accounts));
    q.and_in("user_name", &lower(&f.users));
    q.and_in("part", &f.partitions);
    if f.only_accounts {
        q.push(" AND user_name=''");
    }
    if f.only_users {
        q.push(" AND user_name<>''");
    }
}

impl Storage {
    // ------------------------------------------------------------ helpers

    async fn load_assocs(&self, c: &mut AnyConnection, f: &AssocFilter) -> Result<Vec<AssocRec>> {
        let mut q = Q::new(&format!("SELECT {ASSOC_COLS} FROM assocs WHERE 1=1"));
        assoc_where(&mut q, f);
        q.push(" ORDER BY id");
        q.fetch_all(self.backend, c)
            .await?
            .iter()
            .map(assoc_from_row)
            .collect()
    }

    async fn cluster_names(&self, c: &mut AnyConnection) -> Result<Vec<String>> {
        Q::new("SELECT name FROM clusters ORDER BY name")
            .fetch_all(self.backend, c)
            .await?
            .iter()
            .map(|r| r.s("name").map_err(Into::into))
            .collect()
    }

    async fn qos_names(&self, c: &mut AnyConnection) -> Result<BTreeSet<String>> {
        Q::new("SELECT name FROM qos")
            .fetch_all(self.backend, c)
            .await?
            .iter()
            .map(|r| r.s("name").map_err(Into::into))
            .collect()
    }

    async fn check_qos_exist(&self, c: &mut AnyConnection, names: &[String]) -> Result<()> {
        if names.is_empty() {
            return Ok(());
        }
        let known = self.qos_names(c).await?;
        match names.iter().find(|n| !known.contains(*n)) {
            Some(n) => Err(StorageError::NotFound(format!("QOS '{n}' does not exist"))),
            None => Ok(()),
        }
    }

    async fn insert_assoc(&self, c: &mut AnyConnection, a: &AssocRec, now: i64) -> Result<()> {
        let lim = assoc_limit_vals(&a.limits);
        let mut cols = vec![
            "cluster",
            "account",
            "user_name",
            "part",
            "parent_acct",
            "shares",
        ];
        cols.extend(lim.iter().map(|(c, _)| *c));
        cols.extend(["qos_list", "default_qos", "created", "modified"]);
        let mut vals: Vec<Val> = vec![
            a.cluster.as_str().into(),
            a.account.as_str().into(),
            a.user.as_str().into(),
            a.partition.as_str().into(),
            a.parent.clone().into(),
            a.shares.into(),
        ];
        vals.extend(lim.into_iter().map(|(_, v)| v));
        vals.extend([
            a.qos.join(",").into(),
            a.default_qos.clone().into(),
            now.into(),
            now.into(),
        ]);
        let mut q = Q::new(&format!("INSERT INTO assocs ({}) VALUES ", cols.join(",")));
        q.bind_tuple(vals);
        q.execute(self.backend, c).await?;
        Ok(())
    }

    async fn update_assoc(&self, c: &mut AnyConnection, a: &AssocRec, now: i64) -> Result<()> {
        let mut q = Q::new("UPDATE assocs SET parent_acct=");
        q.bind(a.parent.clone()).push(", shares=").bind(a.shares);
        for (col, v) in assoc_limit_vals(&a.limits) {
            q.push(&format!(", {col}=")).bind(v);
        }
        q.push(", qos_list=")
            .bind(a.qos.join(","))
            .push(", default_qos=")
            .bind(a.default_qos.clone())
            .push(", modified=")
            .bind(now)
            .push(" WHERE id=")
            .bind(a.id);
        q.execute(self.backend, c).await?;
        Ok(())
    }

    async fn delete_assoc_ids(&self, c: &mut AnyConnection, ids: &[u64]) -> Result<()> {
        for chunk in ids.chunks(500) {
            let mut q = Q::new("DELETE FROM assocs WHERE 1=1");
            q.and_in("id", chunk);
            q.execute(self.backend, &mut *c).await?;
        }
        Ok(())
    }

    /// The account association of `account` on `cluster`.
    async fn account_assoc(
        &self,
        c: &mut AnyConnection,
        cluster: &str,
        account: &str,
    ) -> Result<Option<AssocRec>> {
        let f = AssocFilter {
            clusters: vec![cluster.into()],
            accounts: vec![account.into()],
            only_accounts: true,
            ..Default::default()
        };
        Ok(self.load_assocs(c, &f).await?.into_iter().next())
    }

    /// account → parent for the account tree of `cluster`.
    async fn parents(
        &self,
        c: &mut AnyConnection,
        cluster: &str,
    ) -> Result<HashMap<String, Option<String>>> {
        let mut q =
            Q::new("SELECT account, parent_acct FROM assocs WHERE user_name='' AND cluster=");
        q.bind(cluster);
        let mut m = HashMap::new();
        for r in q.fetch_all(self.backend, c).await? {
            m.insert(r.s("account")?, r.os("parent_acct")?);
        }
        Ok(m)
    }

    /// Apply `p` to `a` and check the result (QOS exist, default QOS listed,
    /// TRES valid, no loop in the tree).
    async fn patch_assoc(
        &self,
        c: &mut AnyConnection,
        a: &mut AssocRec,
        p: &AssocPatch,
    ) -> Result<()> {
        check_tres_patch(p.limits.tres_values())?;
        match &p.shares {
            Set::Keep => {}
            Set::Clear => a.shares = 1,
            Set::To(v) => a.shares = *v,
        }
        match &p.parent {
            Set::Keep => {}
            Set::Clear => return Err(invalid("an association's parent cannot be cleared")),
            Set::To(newp) => {
                let newp = check_name("account", newp, 128)?;
                if a.is_user() {
                    return Err(invalid(format!(
                        "{}: only account associations have a parent; add the user to \
                         account '{newp}' instead",
                        assoc_label(a)
                    )));
                }
                if a.account == "root" {
                    return Err(invalid("the root account cannot be moved"));
                }
                let parents = self.parents(c, &a.cluster).await?;
                if !parents.contains_key(&newp) {
                    return Err(StorageError::NotFound(format!(
                        "parent account '{newp}' does not exist on cluster '{}'",
                        a.cluster
                    )));
                }
                let mut cur = Some(newp.clone());
                while let Some(x) = cur {
                    if x == a.account {
                        return Err(invalid(format!(
                            "cannot move account '{}' under its own descendant '{newp}'",
                            a.account
                        )));
                    }
                    cur = parents.get(&x).cloned().flatten();
                }
                a.parent = Some(newp);
            }
        }
        p.limits.apply(&mut a.limits, &merge_tres);
        let mut names = lower(p.qos.names());
        names.sort();
        names.dedup();
        self.check_qos_exist(c, &names).await?;
        let lowered = match &p.qos {
            ListChange::Keep => ListChange::Keep,
            ListChange::Replace(v) => ListChange::Replace(lower(v)),
            ListChange::Add(v) => ListChange::Add(lower(v)),
            ListChange::Remove(v) => ListChange::Remove(lower(v)),
        };
        lowered.apply(&mut a.qos);
        match &p.default_qos {
            Set::Keep => {}
            Set::Clear => a.default_qos = None,
            Set::To(q) => {
                let q = check_name("QOS", q, 64)?;
                self.check_qos_exist(c, std::slice::from_ref(&q)).await?;
                a.default_qos = Some(q);
            }
        }
        if let Some(d) = &a.default_qos {
            if !a.qos.contains(d) {
                return Err(invalid(format!(
                    "{}: default QOS '{d}' is not in its QOS list ({})",
                    assoc_label(a),
                    a.qos.join(",")
                )));
            }
        }
        Ok(())
    }

    /// A new association under `parent` (account assoc) with `settings`.
    async fn new_assoc(
        &self,
        c: &mut AnyConnection,
        parent: &AssocRec,
        account: &str,
        user: &str,
        partition: &str,
        settings: &AssocSettings,
    ) -> Result<AssocRec> {
        let mut limits = settings.limits.clone();
        check_assoc_limits(&mut limits)?;
        let qos = lower(&settings.qos);
        self.check_qos_exist(c, &qos).await?;
        let (qos, mut default_qos) = if qos.is_empty() {
            (parent.qos.clone(), parent.default_qos.clone())
        } else {
            (qos, None)
        };
        if let Some(d) = &settings.default_qos {
            default_qos = Some(check_name("QOS", d, 64)?);
        }
        let a = AssocRec {
            id: 0,
            cluster: parent.cluster.clone(),
            account: account.into(),
            user: user.into(),
            partition: partition.into(),
            parent: Some(if user.is_empty() {
                parent.account.clone()
            } else {
                account.to_string()
            }),
            shares: settings.shares.unwrap_or(1),
            limits,
            qos,
            default_qos,
        };
        if let Some(d) = &a.default_qos {
            if !a.qos.contains(d) {
                return Err(invalid(format!(
                    "{}: default QOS '{d}' is not in its QOS list ({})",
                    assoc_label(&a),
                    a.qos.join(",")
                )));
            }
        }
        Ok(a)
    }

    // ----------------------------------------------------------- clusters

    pub async fn add_clusters(&self, clusters: Vec<ClusterRec>) -> Result<Vec<String>> {
        let _w = self.write_lock.lock().await;
        let mut tx = self.write_tx().await?;
        let now = slurm_common::auth::now();
        let existing: BTreeSet<String> = self.cluster_names(&mut tx).await?.into_iter().collect();
        let mut added = Vec::new();
        for mut cl in clusters {
            cl.name = check_name("cluster", &cl.name, 64)?;
            if existing.contains(&cl.name) || added.contains(&cl.name) {
                continue;
            }
            self.create_cluster(&mut tx, &cl, now).await?;
            added.push(cl.name);
        }
        if added.is_empty() {
            return Err(StorageError::Exists("cluster(s) already exist".into()));
        }
        tx.commit().await?;
        Ok(added)
    }

    /// The cluster row plus its root associations.
    pub(crate) async fn create_cluster(
        &self,
        c: &mut AnyConnection,
        cl: &ClusterRec,
        now: i64,
    ) -> Result<()> {
        let mut q = Q::new(
            "INSERT INTO clusters (name, control_host, control_port, rpc_version, cpus, nodes, tres, created) VALUES ",
        );
        q.bind_tuple(vec![
            cl.name.as_str().into(),
            cl.control_host.as_str().into(),
            u32::from(cl.control_port).into(),
            cl.rpc_version.into(),
            cl.cpus.into(),
            cl.nodes.into(),
            cl.tres.as_str().into(),
            now.into(),
        ]);
        q.execute(self.backend, &mut *c).await?;
        let root = AssocRec {
            cluster: cl.name.clone(),
            account: "root".into(),
            shares: 1,
            qos: vec!["normal".into()],
            ..Default::default()
        };
        // The normal QOS may have been deleted: then the root gets none.
        let root = AssocRec {
            qos: if self.qos_names(c).await?.contains("normal") {
                root.qos
            } else {
                Vec::new()
            },
            ..root
        };
        self.insert_assoc(c, &root, now).await?;
        let user = AssocRec {
            user: "root".into(),
            parent: Some("root".into()),
            ..root
        };
        self.insert_assoc(c, &user, now).await?;
        Ok(())
    }

    pub async fn list_clusters(&self, f: &ClusterFilter) -> Result<Vec<ClusterRec>> {
        let mut q = Q::new(
            "SELECT name, control_host, control_port, rpc_version, cpus, nodes, tres, created FROM clusters WHERE 1=1",
        );
        q.and_in("name", &lower(&f.names));
        q.push(" ORDER BY name");
        q.fetch_all(self.backend, &self.pool)
            .await?
            .iter()
            .map(|r| {
                Ok(ClusterRec {
                    name: r.s("name")?,
                    control_host: r.s("control_host")?,
                    control_port: r.i("control_port")?.clamp(0, 65535) as u16,
                    rpc_version: r.u32("rpc_version")?,
                    cpus: r.u32("cpus")?,
                    nodes: r.u32("nodes")?,
                    tres: r.s("tres")?,
                    created: r.i("created")?,
                })
            })
            .collect()
    }

    /// Removes the clusters and their associations (their jobs stay).
    pub async fn delete_clusters(&self, f: &ClusterFilter) -> Result<Vec<String>> {
        if f.names.is_empty() {
            return Err(invalid("name the clusters to delete"));
        }
        let _w = self.write_lock.lock().await;
        let mut tx = self.write_tx().await?;
        let names = lower(&f.names);
        let mut q = Q::new("SELECT name FROM clusters WHERE 1=1");
        q.and_in("name", &names);
        let found: Vec<String> = q
            .fetch_all(self.backend, &mut *tx)
            .await?
            .iter()
            .map(|r| r.s("name"))
            .collect::<std::result::Result<_, _>>()?;
        if found.is_empty() {
            return Err(StorageError::NotFound(format!(
                "cluster(s) {} do not exist",
                names.join(",")
            )));
        }
        for table in ["assocs", "clusters"] {
            let col = if table == "clusters" {
                "name"
            } else {
                "cluster"
            };
            let mut q = Q::new(&format!("DELETE FROM {table} WHERE 1=1"));
            q.and_in(col, &found);
            q.execute(self.backend, &mut *tx).await?;
        }
        tx.commit().await?;
        Ok(found)
    }

    // ----------------------------------------------------------- accounts

    pub async fn add_accounts(&self, req: &AddAccounts) -> Result<Vec<String>> {
        if req.names.is_empty() {
            return Err(invalid("no account names given"));
        }
        let _w = self.write_lock.lock().await;
        let mut tx = self.write_tx().await?;
        let now = slurm_common::auth::now();
        let parent = check_name(
            "parent account",
            req.parent.as_deref().unwrap_or("root"),
            128,
        )?;
        let clusters = if req.clusters.is_empty() {
            self.cluster_names(&mut tx).await?
        } else {
            lower(&req.clusters)
        };
        if clusters.is_empty() {
            return Err(StorageError::NotFound(
                "no clusters: add one first (sacctmgr add cluster)".into(),
            ));
        }
        if req.only_new {
            for n in lower(&req.names) {
                let mut q = Q::new("SELECT name FROM accounts WHERE name=");
                q.bind(&n);
                if q.fetch_optional(self.backend, &mut *tx).await?.is_some() {
                    return Err(StorageError::Exists(format!(
                        "account '{n}' exists: only an operator may add it under another account"
                    )));
                }
            }
        }
        let mut changed = Vec::new();
        let parent_org = {
            let mut q = Q::new("SELECT organization FROM accounts WHERE name=");
            q.bind(&parent);
            q.fetch_optional(self.backend, &mut *tx)
                .await?
                .map(|r| r.s("organization"))
                .transpose()?
        };
        for name in &req.names {
            let name = check_name("account", name, 128)?;
            if name == parent {
                return Err(invalid(format!(
                    "account '{name}' cannot be its own parent"
                )));
            }
            let mut q = Q::new("SELECT name FROM accounts WHERE name=");
            q.bind(&name);
            if q.fetch_optional(self.backend, &mut *tx).await?.is_none() {
                let org = req
                    .organization
                    .clone()
                    .unwrap_or_else(|| match &parent_org {
                        Some(o) if parent != "root" => o.clone(),
                        _ => name.clone(),
                    });
                let mut q = Q::new(
                    "INSERT INTO accounts (name, description, organization, created) VALUES ",
                );
                q.bind_tuple(vec![
                    name.as_str().into(),
                    req.description
                        .clone()
                        .unwrap_or_else(|| name.clone())
                        .into(),
                    org.into(),
                    now.into(),
                ]);
                q.execute(self.backend, &mut *tx).await?;
                changed.push(name.clone());
            }
            for cl in &clusters {
                let Some(p) = self.account_assoc(&mut tx, cl, &parent).await? else {
                    return Err(StorageError::NotFound(format!(
                        "parent account '{parent}' does not exist on cluster '{cl}'"
                    )));
                };
                if self.account_assoc(&mut tx, cl, &name).await?.is_some() {
                    continue;
                }
                let a = self
                    .new_assoc(&mut tx, &p, &name, "", "", &req.assoc)
                    .await?;
                self.insert_assoc(&mut tx, &a, now).await?;
                changed.push(assoc_label(&a));
            }
        }
        if changed.is_empty() {
            return Err(StorageError::Exists(
                "nothing new added: the accounts and their associations already exist".into(),
            ));
        }
        tx.commit().await?;
        Ok(changed)
    }

    async fn select_accounts(
        &self,
        c: &mut AnyConnection,
        f: &AccountFilter,
    ) -> Result<Vec<AccountRec>> {
        let mut q = Q::new("SELECT name, description, organization FROM accounts WHERE 1=1");
        q.and_in("name", &lower(&f.names));
        q.and_in("description", &f.descriptions);
        q.and_in("organization", &f.organizations);
        if !f.parents.is_empty() {
            q.push(" AND name IN (SELECT account FROM assocs WHERE user_name=''");
            q.and_in("parent_acct", &lower(&f.parents));
            q.and_in("cluster", &lower(&f.clusters));
            q.push(")");
        }
        q.push(" ORDER BY name");
        let mut out = q
            .fetch_all(self.backend, &mut *c)
            .await?
            .iter()
            .map(|r| {
                Ok(AccountRec {
                    name: r.s("name")?,
                    description: r.s("description")?,
                    organization: r.s("organization")?,
                    coordinators: Vec::new(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let coords = self.coord_rows(c).await?;
        for a in &mut out {
            a.coordinators = coords
                .iter()
                .filter(|(_, acct)| *acct == a.name)
                .map(|(u, _)| u.clone())
                .collect();
        }
        Ok(out)
    }

    /// Every (user, account) a user was made coordinator of, sorted.
    async fn coord_rows(&self, c: &mut AnyConnection) -> Result<Vec<(String, String)>> {
        let q = Q::new("SELECT user_name, account FROM coords ORDER BY user_name, account");
        q.fetch_all(self.backend, c)
            .await?
            .iter()
            .map(|r| Ok((r.s("user_name")?, r.s("account")?)))
            .collect()
    }

    /// Each account's sub-accounts, on any cluster (parent → children).
    async fn all_children(&self, c: &mut AnyConnection) -> Result<BTreeMap<String, Vec<String>>> {
        let q = Q::new("SELECT DISTINCT account, parent_acct FROM assocs WHERE user_name=''");
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for r in q.fetch_all(self.backend, c).await? {
            if let Some(p) = r.os("parent_acct")?.filter(|p| !p.is_empty()) {
                out.entry(p).or_default().push(r.s("account")?);
            }
        }
        Ok(out)
    }

    /// The accounts `direct` names and all accounts below them, sorted.
    fn with_sub_accounts(
        direct: impl IntoIterator<Item = String>,
        children: &BTreeMap<String, Vec<String>>,
    ) -> Vec<String> {
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut todo: Vec<String> = direct.into_iter().collect();
        while let Some(a) = todo.pop() {
            if seen.insert(a.clone()) {
                todo.extend(children.get(&a).into_iter().flatten().cloned());
            }
        }
        seen.into_iter().collect()
    }

    // ------------------------------------------------------- coordinators

    /// `sacctmgr add coordinator`: the users (who must exist) coordinate
    /// the accounts (which must exist) and their sub-accounts. Answers the
    /// users made coordinators of something new.
    pub async fn add_coords(&self, c: &CoordChange) -> Result<Vec<String>> {
        if c.users.is_empty() {
            return Err(invalid("You need to specify a user list here."));
        }
        if c.accounts.is_empty() {
            return Err(invalid("You need to specify an account list here."));
        }
        let _w = self.write_lock.lock().await;
        let mut tx = self.write_tx().await?;
        let users = lower(&c.users);
        let accounts = lower(&c.accounts);
        for a in &accounts {
            let mut q = Q::new("SELECT name FROM accounts WHERE name=");
            q.bind(a);
            if q.fetch_optional(self.backend, &mut *tx).await?.is_none() {
                return Err(StorageError::NotFound(format!(
                    "You specified a non-existent account '{a}'."
                )));
            }
        }
        for u in &users {
            let mut q = Q::new("SELECT name FROM users WHERE name=");
            q.bind(u);
            if q.fetch_optional(self.backend, &mut *tx).await?.is_none() {
                return Err(StorageError::NotFound(format!(
                    "You specified a non-existent user '{u}'."
                )));
            }
        }
        let have = self.coord_rows(&mut tx).await?;
        let now = slurm_common::auth::now();
        let mut changed = Vec::new();
        for u in &users {
            for a in &accounts {
                if have.iter().any(|(hu, ha)| hu == u && ha == a) {
                    continue;
                }
                let mut q = Q::new("INSERT INTO coords (user_name, account, created) VALUES (");
                q.bind(u).push(", ").bind(a).push(", ").bind(now).push(")");
                q.execute(self.backend, &mut *tx).await?;
                if !changed.contains(u) {
                    changed.push(u.clone());
                }
            }
        }
        // Nothing new is no error (Slurm's re-add succeeds too).
        tx.commit().await?;
        Ok(changed)
    }

    /// `sacctmgr remove coordinator`: the users from the accounts (no
    /// accounts: from all; no users: every coordinator of the accounts).
    /// Answers `U = user A = account` per removal, as Slurm's.
    pub async fn remove_coords(&self, c: &CoordChange) -> Result<Vec<String>> {
        if c.users.is_empty() && c.accounts.is_empty() {
            return Err(invalid(
                "You need to specify a user list or an account list here.",
            ));
        }
        let _w = self.write_lock.lock().await;
        let mut tx = self.write_tx().await?;
        let (users, accounts) = (lower(&c.users), lower(&c.accounts));
        let doomed: Vec<(String, String)> = self
            .coord_rows(&mut tx)
            .await?
            .into_iter()
            .filter(|(u, a)| {
                (users.is_empty() || users.contains(u))
                    && (accounts.is_empty() || accounts.contains(a))
            })
            .collect();
        if doomed.is_empty() {
            return Err(StorageError::NotFound("Nothing removed".into()));
        }
        for (u, a) in &doomed {
            let mut q = Q::new("DELETE FROM coords WHERE user_name=");
            q.bind(u).push(" AND account=").bind(a);
            q.execute(self.backend, &mut *tx).await?;
        }
        tx.commit().await?;
        Ok(doomed
            .iter()
            .map(|(u, a)| format!("U = {u:<9} A = {a:<10}"))
            .collect())
    }

    pub async fn list_accounts(&self, f: &AccountFilter) -> Result<Vec<AccountRec>> {
        let mut c = self.pool.acquire().await?;
        self.select_accounts(&mut c, f).await
    }

    pub async fn modify_accounts(
        &self,
        f: &AccountFilter,
        set: &AccountPatch,
        assoc: &AssocPatch,
    ) -> Result<Vec<String>> {
        if set.description.is_keep() && set.organization.is_keep() && assoc.is_empty() {
            return Err(invalid("nothing to change"));
        }
        let _w = self.write_lock.lock().await;
        let mut tx = self.write_tx().await?;
        let accounts = self.select_accounts(&mut tx, f).await?;
        if accounts.is_empty() {
            return Err(StorageError::NotFound("no matching accounts".into()));
        }
        let names: Vec<String> = accounts.iter().map(|a| a.name.clone()).collect();
        let mut changed = Vec::new();
        if !(set.description.is_keep() && set.organization.is_keep()) {
            for a in &accounts {
                let mut d = Some(a.description.clone());
                let mut o = Some(a.organization.clone());
                set.description.apply(&mut d);
                set.organization.apply(&mut o);
                let mut q = Q::new("UPDATE accounts SET description=");
                q.bind(d.unwrap_or_default())
                    .push(", organization=")
                    .bind(o.unwrap_or_default())
                    .push(" WHERE name=")
                    .bind(&a.name);
                q.execute(self.backend, &mut *tx).await?;
                changed.push(a.name.clone());
            }
        }
        if !assoc.is_empty() {
            let af = AssocFilter {
                clusters: f.clusters.clone(),
                accounts: names,
                only_accounts: true,
                ..Default::default()
            };
            let now = slurm_common::auth::now();
            for mut a in self.load_assocs(&mut tx, &af).await? {
                self.patch_assoc(&mut tx, &mut a, assoc).await?;
                self.update_assoc(&mut tx, &a, now).await?;
                changed.push(assoc_label(&a));
            }
        }
        tx.commit().await?;
        Ok(changed)
    }

    /// Removes the accounts' associations (with `clusters` in the filter, only
    /// there) and the accounts that are left with none. Refused while an
    /// account has sub-accounts or is a user's default account.
    pub async fn delete_accounts(&self, f: &AccountFilter) -> Result<Vec<String>> {
        if f.names.is_empty() && f.parents.is_empty() {
            return Err(invalid("name the accounts to delete"));
        }
        let _w = self.write_lock.lock().await;
        let mut tx = self.write_tx().await?;
        let accounts = self.select_accounts(&mut tx, f).await?;
        if accounts.is_empty() {
            return Err(StorageError::NotFound("no matching accounts".into()));
        }
        let names: BTreeSet<String> = accounts.iter().map(|a| a.name.clone()).collect();
        if names.contains("root") {
            return Err(invalid("the root account cannot be deleted"));
        }
        let af = AssocFilter {
            clusters: f.clusters.clone(),
            accounts: names.iter().cloned().collect(),
            ..Default::default()
        };
        let doomed = self.load_assocs(&mut tx, &af).await?;
        // Sub-accounts not themselves being deleted keep their parents.
        let mut q = Q::new("SELECT cluster, account, parent_acct FROM assocs WHERE user_name=''");
        q.and_in("parent_acct", &names.iter().cloned().collect::<Vec<_>>());
        q.and_in("cluster", &lower(&f.clusters));
        for r in q.fetch_all(self.backend, &mut *tx).await? {
            let child = r.s("account")?;
            if !names.contains(&child) {
                return Err(StorageError::InUse(format!(
                    "account '{}' has sub-account '{child}' on cluster '{}': delete or move it first",
                    r.s("parent_acct")?,
                    r.s("cluster")?
                )));
            }
        }
        let ids: Vec<u64> = doomed.iter().map(|a| a.id).collect();
        self.delete_assoc_ids(&mut tx, &ids).await?;
        // Accounts left without any association go, unless a user still
        // defaults to them; with clusters named only those associations
        // go, the record stays (as Slurm's `delete account X cluster=C`).
        let mut changed: Vec<String> = doomed.iter().map(assoc_label).collect();
        for n in names.iter().filter(|_| f.clusters.is_empty()) {
            let mut q = Q::new("SELECT id FROM assocs WHERE account=");
            q.bind(n);
            if q.fetch_optional(self.backend, &mut *tx).await?.is_some() {
                continue;
            }
            let mut q = Q::new("SELECT name FROM users WHERE default_account=");
            q.bind(n);
            if let Some(r) = q.fetch_optional(self.backend, &mut *tx).await? {
                return Err(StorageError::InUse(format!(
                    "account '{n}' is the default account of user '{}': change it first",
                    r.s("name")?
                )));
            }
            let mut q = Q::new("DELETE FROM accounts WHERE name=");
            q.bind(n);
            q.execute(self.backend, &mut *tx).await?;
            let mut q = Q::new("DELETE FROM coords WHERE account=");
            q.bind(n);
            q.execute(self.backend, &mut *tx).await?;
            changed.push(n.clone());
        }
        tx.commit().await?;
        Ok(changed)
    }

    // -------------------------------------------------------------- users

    pub async fn add_users(&self, req: &AddUsers) -> Result<Vec<String>> {
        if req.names.is_empty() {
            return Err(invalid("no user names given"));
        }
        let _w = self.write_lock.lock().await;
        let mut tx = self.write_tx().await?;
        let now = slurm_common::auth::now();
        let mut accounts = lower(&req.accounts);
        // Without one, a new user's default is the first account named
        // (as Slurm's).
        let default = match &req.default_account {
            Some(d) => Some(check_name("account", d, 128)?),
            None => accounts.first().cloned(),
        };
        if accounts.is_empty() {
            if let Some(d) = &default {
                accounts.push(d.clone());
            }
        }
        let partitions: Vec<String> = if req.partitions.is_empty() {
            vec![String::new()]
        } else {
            req.partitions
                .iter()
                .map(|p| p.trim().to_string())
                .collect()
        };
        let mut changed = Vec::new();
        for name in &req.names {
            let name = check_name("user", name, 128)?;
            let mut q = Q::new("SELECT name FROM users WHERE name=");
            q.bind(&name);
            let exists = q.fetch_optional(self.backend, &mut *tx).await?.is_some();
            if !exists {
                let Some(d) = &default else {
                    return Err(invalid(format!(
                        "user '{name}' needs a default account (DefaultAccount=)"
                    )));
                };
                if !accounts.contains(d) {
                    accounts.push(d.clone());
                }
                let mut q = Q::new(
                    "INSERT INTO users (name, default_account, admin_level, created) VALUES ",
                );
                q.bind_tuple(vec![
                    name.as_str().into(),
                    d.as_str().into(),
                    admin_to_i64(req.admin_level.unwrap_or_default()).into(),
                    now.into(),
                ]);
                q.execute(self.backend, &mut *tx).await?;
                changed.push(name.clone());
            }
            for acct in &accounts {
                let acct = check_name("account", acct, 128)?;
                let parents = self
                    .load_assocs(
                        &mut tx,
                        &AssocFilter {
                            clusters: lower(&req.clusters),
                            accounts: vec![acct.clone()],
                            only_accounts: true,
                            ..Default::default()
                        },
                    )
                    .await?;
                if parents.is_empty() {
                    return Err(StorageError::NotFound(if req.clusters.is_empty() {
                        format!("account '{acct}' does not exist on any cluster")
                    } else {
                        format!(
                            "account '{acct}' does not exist on cluster(s) {}",
                            req.clusters.join(",")
                        )
                    }));
                }
                for cl in lower(&req.clusters) {
                    if !parents.iter().any(|p| p.cluster == cl) {
                        return Err(StorageError::NotFound(format!(
                            "account '{acct}' does not exist on cluster '{cl}'"
                        )));
                    }
                }
                for p in &parents {
                    for part in &partitions {
                        let f = AssocFilter {
                            clusters: vec![p.cluster.clone()],
                            accounts: vec![acct.clone()],
                            users: vec![name.clone()],
                            partitions: vec![part.clone()],
                            ..Default::default()
                        };
                        if !self.load_assocs(&mut tx, &f).await?.is_empty() {
                            continue;
                        }
                        let a = self
                            .new_assoc(&mut tx, p, &acct, &name, part, &req.assoc)
                            .await?;
                        self.insert_assoc(&mut tx, &a, now).await?;
                        changed.push(assoc_label(&a));
                    }
                }
            }
        }
        if changed.is_empty() {
            return Err(StorageError::Exists(
                "nothing new added: the users and their associations already exist".into(),
            ));
        }
        tx.commit().await?;
        Ok(changed)
    }

    async fn select_users(&self, c: &mut AnyConnection, f: &UserFilter) -> Result<Vec<UserRec>> {
        let mut q = Q::new("SELECT name, default_account, admin_level FROM users WHERE 1=1");
        q.and_in("name", &lower(&f.names));
        q.and_in("default_account", &lower(&f.default_accounts));
        let levels: Vec<i64> = f.admin_levels.iter().map(|l| admin_to_i64(*l)).collect();
        q.and_in("admin_level", &levels);
        if !(f.accounts.is_empty() && f.clusters.is_empty() && f.partitions.is_empty()) {
            q.push(" AND name IN (SELECT user_name FROM assocs WHERE user_name<>''");
            q.and_in("account", &lower(&f.accounts));
            q.and_in("cluster", &lower(&f.clusters));
            q.and_in("part", &f.partitions);
            q.push(")");
        }
        q.push(" ORDER BY name");
        let mut out = q
            .fetch_all(self.backend, &mut *c)
            .await?
            .iter()
            .map(|r| {
                Ok(UserRec {
                    name: r.s("name")?,
                    default_account: r.s("default_account")?,
                    admin_level: admin_from_i64(r.i("admin_level")?),
                    coord_accounts: Vec::new(),
                    coord_direct: Vec::new(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let coords = self.coord_rows(c).await?;
        if !coords.is_empty() {
            let children = self.all_children(c).await?;
            for u in &mut out {
                u.coord_direct = coords
                    .iter()
                    .filter(|(cu, _)| *cu == u.name)
                    .map(|(_, a)| a.clone())
                    .collect();
                u.coord_accounts = Self::with_sub_accounts(u.coord_direct.clone(), &children);
            }
        }
        Ok(out)
    }

    pub async fn list_users(&self, f: &UserFilter) -> Result<Vec<UserRec>> {
        let mut c = self.pool.acquire().await?;
        self.select_users(&mut c, f).await
    }

    /// A user's admin level (`None` when not in the database).
    pub async fn admin_level(&self, user: &str) -> Result<Option<AdminLevel>> {
        let mut q = Q::new("SELECT admin_level FROM users WHERE name=");
        q.bind(user.to_ascii_lowercase());
        Ok(q.fetch_optional(self.backend, &self.pool)
            .await?
            .map(|r| r.i("admin_level").map(admin_from_i64))
            .transpose()?)
    }

    pub async fn modify_users(
        &self,
        f: &UserFilter,
        set: &UserPatch,
        assoc: &AssocPatch,
    ) -> Result<Vec<String>> {
        if set.default_account.is_keep() && set.admin_level.is_keep() && assoc.is_empty() {
            return Err(invalid("nothing to change"));
        }
        let _w = self.write_lock.lock().await;
        let mut tx = self.write_tx().await?;
        let users = self.select_users(&mut tx, f).await?;
        if users.is_empty() {
            return Err(StorageError::NotFound("no matching users".into()));
        }
        let mut changed = Vec::new();
        let now = slurm_common::auth::now();
        for u in &users {
            let mut touched = false;
            match &set.default_account {
                Set::Keep => {}
                Set::Clear => return Err(invalid("a user's default account cannot be cleared")),
                Set::To(d) => {
                    let d = check_name("account", d, 128)?;
                    let mut q = Q::new("SELECT id FROM assocs WHERE user_name=");
                    q.bind(&u.name).push(" AND account=").bind(&d);
                    if q.fetch_optional(self.backend, &mut *tx).await?.is_none() {
                        return Err(invalid(format!(
                            "user '{}' has no association with account '{d}'",
                            u.name
                        )));
                    }
                    let mut q = Q::new("UPDATE users SET default_account=");
                    q.bind(&d).push(" WHERE name=").bind(&u.name);
                    q.execute(self.backend, &mut *tx).await?;
                    touched = true;
                }
            }
            if !set.admin_level.is_keep() {
                let l = match &set.admin_level {
                    Set::To(l) => *l,
                    _ => AdminLevel::None,
                };
                let mut q = Q::new("UPDATE users SET admin_level=");
                q.bind(admin_to_i64(l)).push(" WHERE name=").bind(&u.name);
                q.execute(self.backend, &mut *tx).await?;
                touched = true;
            }
            if touched {
                changed.push(u.name.clone());
            }
        }
        if !assoc.is_empty() {
            let af = AssocFilter {
                clusters: f.clusters.clone(),
                accounts: f.accounts.clone(),
                partitions: f.partitions.clone(),
                users: users.iter().map(|u| u.name.clone()).collect(),
                only_users: true,
                ..Default::default()
            };
            for mut a in self.load_assocs(&mut tx, &af).await? {
                self.patch_assoc(&mut tx, &mut a, assoc).await?;
                self.update_assoc(&mut tx, &a, now).await?;
                changed.push(assoc_label(&a));
            }
        }
        tx.commit().await?;
        Ok(changed)
    }

    /// Without accounts/clusters/partitions in the filter: removes the users
    /// and all their associations. With them: only those associations, and
    /// never the last association in a user's default account while others remain.
    pub async fn delete_users(&self, f: &UserFilter) -> Result<Vec<String>> {
        if f.names.is_empty() {
            return Err(invalid("name the users to delete"));
        }
        let _w = self.write_lock.lock().await;
        let mut tx = self.write_tx().await?;
        let users = self.select_users(&mut tx, f).await?;
        if users.is_empty() {
            return Err(StorageError::NotFound("no matching users".into()));
        }
        let whole = f.accounts.is_empty() && f.clusters.is_empty() && f.partitions.is_empty();
        let mut changed = Vec::new();
        for u in &users {
            if u.name == "root" && whole {
                return Err(invalid("user root cannot be deleted"));
            }
            let af = AssocFilter {
                users: vec![u.name.clone()],
                accounts: f.accounts.clone(),
                clusters: f.clusters.clone(),
                partitions: f.partitions.clone(),
                only_users: true,
                ..Default::default()
            };
            let doomed = self.load_assocs(&mut tx, &af).await?;
            let ids: Vec<u64> = doomed.iter().map(|a| a.id).collect();
            self.delete_assoc_ids(&mut tx, &ids).await?;
            changed.extend(doomed.iter().map(assoc_label));
            if whole {
                let mut q = Q::new("DELETE FROM users WHERE name=");
                q.bind(&u.name);
                q.execute(self.backend, &mut *tx).await?;
                let mut q = Q::new("DELETE FROM coords WHERE user_name=");
                q.bind(&u.name);
                q.execute(self.backend, &mut *tx).await?;
                changed.push(u.name.clone());
            } else {
                let left = self
                    .load_assocs(
                        &mut tx,
                        &AssocFilter {
                            users: vec![u.name.clone()],
                            ..Default::default()
                        },
                    )
                    .await?;
                if !left.is_empty() && !left.iter().any(|a| a.account == u.default_account) {
                    return Err(StorageError::InUse(format!(
                        "that would remove user '{}''s default account '{}' while other \
                         associations remain: change the default account first",
                        u.name, u.default_account
                    )));
                }
            }
        }
        tx.commit().await?;
        Ok(changed)
    }

    // ------------------------------------------------------- associations

    /// Associations in tree order: per cluster, each account followed by its
    /// users, then its sub-accounts.
    pub async fn list_assocs(&self, f: &AssocFilter) -> Result<Vec<AssocRec>> {
        let mut c = self.pool.acquire().await?;
        let rows = self.load_assocs(&mut c, f).await?;
        let mut trees: HashMap<String, HashMap<String, Option<String>>> = HashMap::new();
        for a in &rows {
            if !trees.contains_key(&a.cluster) {
                let t = self.parents(&mut c, &a.cluster).await?;
                trees.insert(a.cluster.clone(), t);
            }
        }
        let path = |cluster: &str, account: &str| -> Vec<String> {
            let mut p = vec![account.to_string()];
            let t = trees.get(cluster);
            let mut cur = t.and_then(|t| t.get(account).cloned().flatten());
            while let Some(x) = cur {
                if p.len() > 64 || p.contains(&x) {
                    break;
                }
                cur = t.and_then(|t| t.get(&x).cloned().flatten());
                p.push(x);
            }
            p.reverse();
            p
        };
        let mut keyed: Vec<(String, Vec<String>, AssocRec)> = rows
            .into_iter()
            .map(|a| {
                let mut k = path(&a.cluster, &a.account);
                if a.is_user() {
                    k.push(format!("\u{0}{}", a.user));
                    k.push(a.partition.clone());
                }
                (a.cluster.clone(), k, a)
            })
            .collect();
        keyed.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        Ok(keyed.into_iter().map(|(_, _, a)| a).collect())
    }

    pub async fn modify_assocs(&self, f: &AssocFilter, set: &AssocPatch) -> Result<Vec<String>> {
        if set.is_empty() {
            return Err(invalid("nothing to change"));
        }
        let _w = self.write_lock.lock().await;
        let mut tx = self.write_tx().await?;
        let rows = self.load_assocs(&mut tx, f).await?;
        if rows.is_empty() {
            return Err(StorageError::NotFound("no matching associations".into()));
        }
        let now = slurm_common::auth::now();
        let mut changed = Vec::new();
        for mut a in rows {
            self.patch_assoc(&mut tx, &mut a, set).await?;
            self.update_assoc(&mut tx, &a, now).await?;
            changed.push(assoc_label(&a));
        }
        tx.commit().await?;
        Ok(changed)
    }

    /// Refused for root associations and for accounts with children left.
    pub async fn delete_assocs(&self, f: &AssocFilter) -> Result<Vec<String>> {
        if *f == AssocFilter::default() {
            return Err(invalid("say which associations to delete"));
        }
        let _w = self.write_lock.lock().await;
        let mut tx = self.write_tx().await?;
        let rows = self.load_assocs(&mut tx, f).await?;
        if rows.is_empty() {
            return Err(StorageError::NotFound("no matching associations".into()));
        }
        let ids: BTreeSet<u64> = rows.iter().map(|a| a.id).collect();
        for a in rows.iter().filter(|a| !a.is_user()) {
            if a.account == "root" {
                return Err(invalid(format!(
                    "{}: the root association goes only with its cluster",
                    assoc_label(a)
                )));
            }
            let mut q = Q::new("SELECT id, user_name, account FROM assocs WHERE cluster=");
            q.bind(&a.cluster).push(" AND (account=").bind(&a.account);
            q.push(" OR parent_acct=").bind(&a.account).push(")");
            for r in q.fetch_all(self.backend, &mut *tx).await? {
                if !ids.contains(&r.u("id")?) {
                    return Err(StorageError::InUse(format!(
                        "{}: it still has {} '{}'",
                        assoc_label(a),
                        if r.s("user_name")?.is_empty() {
                            "sub-account"
                        } else {
                            "user"
                        },
                        {
                            let u = r.s("user_name")?;
                            if u.is_empty() {
                                r.s("account")?
                            } else {
                                u
                            }
                        }
                    )));
                }
            }
        }
        self.delete_assoc_ids(&mut tx, &ids.into_iter().collect::<Vec<_>>())
            .await?;
        tx.commit().await?;
        Ok(rows.iter().map(assoc_label).collect())
    }

    // ---------------------------------------------------------------- QOS

    fn check_qos_fields(q: &mut QosRec) -> Result<()> {
        q.name = check_name("QOS", &q.name, 64)?;
        q.flags = q
            .flags
            .iter()
            .map(|f| f.trim().to_ascii_uppercase())
            .collect();
        if let Some(bad) = q.flags.iter().find(|f| !QOS_FLAGS.contains(&f.as_str())) {
            return Err(invalid(format!(
                "QOS '{}': unknown flag '{bad}' (known: {})",
                q.name,
                QOS_FLAGS.join(",")
            )));
        }
        q.preempt_mode = q.preempt_mode.trim().to_ascii_lowercase();
        if q.preempt_mode.is_empty() {
            q.preempt_mode = "cluster".into();
        }
        for m in q.preempt_mode.split(',') {
            if !PREEMPT_MODES.contains(&m) {
                return Err(invalid(format!(
                    "QOS '{}': invalid PreemptMode '{}' (expected cluster, off, cancel, \
                     requeue or suspend)",
                    q.name, q.preempt_mode
                )));
            }
        }
        if !(q.usage_factor.is_finite() && q.usage_factor >= 0.0) {
            return Err(invalid(format!(
                "QOS '{}': UsageFactor must be a number >= 0",
                q.name
            )));
        }
        q.preempt = lower(&q.preempt);
        if q.preempt.contains(&q.name) {
            return Err(invalid(format!("QOS '{}' cannot preempt itself", q.name)));
        }
        check_qos_limits(&mut q.limits)
    }

    async fn write_qos(&self, c: &mut AnyConnection, q: &QosRec, insert: bool) -> Result<()> {
        let mut cols: Vec<(&str, Val)> = vec![
            ("description", q.description.as_str().into()),
            ("priority", q.priority.into()),
            ("flags", q.flags.join(",").into()),
            ("preempt", q.preempt.join(",").into()),
            ("preempt_mode", q.preempt_mode.as_str().into()),
            ("grace_time", q.grace_time.into()),
            ("usage_factor", q.usage_factor.into()),
        ];
        cols.extend(qos_limit_vals(&q.limits));
        let sql = if insert {
            let names: Vec<&str> = cols.iter().map(|(c, _)| *c).collect();
            let mut s = Q::new(&format!(
                "INSERT INTO qos (name, created, {}) VALUES ",
                names.join(",")
            ));
            let mut vals: Vec<Val> = vec![q.name.as_str().into(), slurm_common::auth::now().into()];
            vals.extend(cols.into_iter().map(|(_, v)| v));
            s.bind_tuple(vals);
            s
        } else {
            let mut s = Q::new("UPDATE qos SET name=");
            s.bind(&q.name);
            for (c, v) in cols {
                s.push(&format!(", {c}=")).bind(v);
            }
            s.push(" WHERE id=").bind(q.id);
            s
        };
        sql.execute(self.backend, c).await?;
        Ok(())
    }

    pub async fn add_qos(&self, list: Vec<QosRec>) -> Result<Vec<String>> {
        if list.is_empty() {
            return Err(invalid("no QOS names given"));
        }
        let _w = self.write_lock.lock().await;
        let mut tx = self.write_tx().await?;
        let mut known = self.qos_names(&mut tx).await?;
        let mut added = Vec::new();
        let mut checked = Vec::new();
        for mut q in list {
            Self::check_qos_fields(&mut q)?;
            if known.contains(&q.name) {
                continue;
            }
            known.insert(q.name.clone());
            checked.push(q);
        }
        for q in &checked {
            if let Some(p) = q.preempt.iter().find(|p| !known.contains(*p)) {
                return Err(StorageError::NotFound(format!(
                    "QOS '{}': preempted QOS '{p}' does not exist",
                    q.name
                )));
            }
            self.write_qos(&mut tx, q, true).await?;
            added.push(q.name.clone());
        }
        if added.is_empty() {
            return Err(StorageError::Exists("QOS already exist".into()));
        }
        tx.commit().await?;
        Ok(added)
    }

    async fn select_qos(&self, c: &mut AnyConnection, f: &QosFilter) -> Result<Vec<QosRec>> {
        let mut q = Q::new(&format!("SELECT {QOS_COLS} FROM qos WHERE 1=1"));
        q.and_in("name", &lower(&f.names));
        q.and_in("id", &f.ids);
        q.push(" ORDER BY id");
        q.fetch_all(self.backend, c)
            .await?
            .iter()
            .map(qos_from_row)
            .collect()
    }

    pub async fn list_qos(&self, f: &QosFilter) -> Result<Vec<QosRec>> {
        let mut c = self.pool.acquire().await?;
        self.select_qos(&mut c, f).await
    }

    pub async fn modify_qos(&self, f: &QosFilter, set: &QosPatch) -> Result<Vec<String>> {
        if *set == QosPatch::default() {
            return Err(invalid("nothing to change"));
        }
        check_tres_patch(set.limits.tres_values())?;
        let _w = self.write_lock.lock().await;
        let mut tx = self.write_tx().await?;
        let rows = self.select_qos(&mut tx, f).await?;
        if rows.is_empty() {
            return Err(StorageError::NotFound("no matching QOS".into()));
        }
        let known = self.qos_names(&mut tx).await?;
        if let Some(p) = lower(set.preempt.names())
            .iter()
            .find(|p| !known.contains(*p))
        {
            return Err(StorageError::NotFound(format!("QOS '{p}' does not exist")));
        }
        let mut changed = Vec::new();
        for mut q in rows {
            let mut d = Some(q.description.clone());
            set.description.apply(&mut d);
            q.description = d.unwrap_or_default();
            match set.priority {
                Set::Keep => {}
                Set::Clear => q.priority = 0,
                Set::To(p) => q.priority = p,
            }
            set.flags.apply(&mut q.flags);
            let upper = |v: &Vec<String>| v.iter().map(|f| f.to_ascii_uppercase()).collect();
            q.flags = match &set.flags {
                ListChange::Remove(v) => {
                    let v: Vec<String> = upper(v);
                    q.flags.retain(|f| !v.contains(&f.to_ascii_uppercase()));
                    q.flags
                }
                _ => q.flags,
            };
            let lowered = match &set.preempt {
                ListChange::Keep => ListChange::Keep,
                ListChange::Replace(v) => ListChange::Replace(lower(v)),
                ListChange::Add(v) => ListChange::Add(lower(v)),
                ListChange::Remove(v) => ListChange::Remove(lower(v)),
            };
            lowered.apply(&mut q.preempt);
            match &set.preempt_mode {
                Set::Keep => {}
                Set::Clear => q.preempt_mode = "cluster".into(),
                Set::To(m) => q.preempt_mode = m.clone(),
            }
            match set.grace_time {
                Set::Keep => {}
                Set::Clear => q.grace_time = 0,
                Set::To(g) => q.grace_time = g,
            }
            match set.usage_factor {
                Set::Keep => {}
                Set::Clear => q.usage_factor = 1.0,
                Set::To(u) => q.usage_factor = u,
            }
            set.limits.apply(&mut q.limits, &merge_tres);
            Self::check_qos_fields(&mut q)?;
            self.write_qos(&mut tx, &q, false).await?;
            changed.push(q.name.clone());
        }
        tx.commit().await?;
        Ok(changed)
    }

    /// Removes the QOS, and takes them out of association QOS lists and
    /// other QOS' preempt lists.
    pub async fn delete_qos(&self, f: &QosFilter) -> Result<Vec<String>> {
        if f.names.is_empty() && f.ids.is_empty() {
            return Err(invalid("name the QOS to delete"));
        }
        let _w = self.write_lock.lock().await;
        let mut tx = self.write_tx().await?;
        let rows = self.select_qos(&mut tx, f).await?;
        if rows.is_empty() {
            return Err(StorageError::NotFound("no matching QOS".into()));
        }
        let names: BTreeSet<String> = rows.iter().map(|q| q.name.clone()).collect();
        let now = slurm_common::auth::now();
        for mut a in self.load_assocs(&mut tx, &AssocFilter::default()).await? {
            let before = (a.qos.len(), a.default_qos.clone());
            a.qos.retain(|q| !names.contains(q));
            if a.default_qos.as_ref().is_some_and(|d| names.contains(d)) {
                a.default_qos = None;
            }
            if (a.qos.len(), a.default_qos.clone()) != before {
                self.update_assoc(&mut tx, &a, now).await?;
            }
        }
        for mut q in self.select_qos(&mut tx, &QosFilter::default()).await? {
            if names.contains(&q.name) {
                continue;
            }
            let n = q.preempt.len();
            q.preempt.retain(|p| !names.contains(p));
            if q.preempt.len() != n {
                self.write_qos(&mut tx, &q, false).await?;
            }
        }
        let mut q = Q::new("DELETE FROM qos WHERE 1=1");
        q.and_in("name", &names.iter().cloned().collect::<Vec<_>>());
        q.execute(self.backend, &mut *tx).await?;
        tx.commit().await?;
        Ok(names.into_iter().collect())
    }

    /// Usage totals by account (descendants included) are summed by callers;
    /// this gives the account tree of a cluster as parent → children.
    pub async fn account_children(&self, cluster: &str) -> Result<BTreeMap<String, Vec<String>>> {
        let mut c = self.pool.acquire().await?;
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (a, p) in self.parents(&mut c, &cluster.to_ascii_lowercase()).await? {
            if let Some(p) = p {
                out.entry(p).or_default().push(a);
            }
        }
        for v in out.values_mut() {
            v.sort();
        }
        Ok(out)
    }
}
