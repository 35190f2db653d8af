//! `sacctmgr`: clusters, accounts, users, associations and QOS in slurmdbd.
//!
//! `sacctmgr [-i] [-n] [-p|-P] [-Q] <add|modify|delete|show> <entity> [specs]`,
//! where specs are `Name=value` pairs, bare names, `where ...` (what to
//! touch) and `set ...` (what to change). A limit set to `-1` is removed;
//! `QOS+=x` / `QOS-=x` add to or take from a list. Changes are sent only after
//! the confirmation prompt (or at once with `-i`), in one transaction, so a
//! refused change changes nothing.

use crate::common;
use slurm_common::timefmt::{format_duration_hms, parse_time_limit};
use slurm_proto::acct::*;
use std::io::{BufRead, IsTerminal, Write};

/// A parse or usage error (printed as ` Unknown option: ...` style messages).
pub(crate) type Res<T> = Result<T, String>;

// ------------------------------------------------------------ command line

#[derive(Debug, Default, Clone)]
pub struct Flags {
    pub immediate: bool,
    pub header: bool,
    /// `-p` (`Some(true)`: trailing `|`) or `-P` (`Some(false)`).
    pub parsable: Option<bool>,
    pub quiet: bool,
    /// `--json` / `--yaml`: `show` prints slurmrestd's `slurmdb` body.
    pub json: bool,
    /// `-r`: nothing is changed (runaway jobs are listed, not fixed).
    pub readonly: bool,
    /// `-s`: `show` lists each entity with its associations (`WithAssoc`).
    pub with_assoc: bool,
}

/// One `key[op]=value` pair or a bare word, in the order given.
#[derive(Debug, Clone, PartialEq)]
pub enum Spec {
    Word(String),
    /// Key (lower case), operator (`=`, `+=`, `-=`), value.
    Pair(String, char, String),
}

/// The specs of a command, split into where (filter) and set parts.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Specs {
    pub filter: Vec<Spec>,
    pub set: Vec<Spec>,
}

pub fn parse_specs(words: &[String]) -> Specs {
    let mut s = Specs::default();
    let mut in_set = false;
    for w in words {
        let lw = w.to_ascii_lowercase();
        if lw == "where" {
            in_set = false;
            continue;
        }
        if lw == "set" {
            in_set = true;
            continue;
        }
        let spec = match w.split_once('=') {
            Some((k, v)) => {
                let (k, op) = if let Some(k) = k.strip_suffix('+') {
                    (k, '+')
                } else if let Some(k) = k.strip_suffix('-') {
                    (k, '-')
                } else {
                    (k, '=')
                };
                Spec::Pair(k.trim().to_ascii_lowercase(), op, v.trim().to_string())
            }
            None => Spec::Word(w.clone()),
        };
        if in_set {
            s.set.push(spec);
        } else {
            s.filter.push(spec);
        }
    }
    s
}

use crate::fmt::split_list as list;

fn lower_list(v: &str) -> Vec<String> {
    list(v)
        .into_iter()
        .map(|x| x.to_ascii_lowercase())
        .collect()
}

fn count(key: &str, v: &str) -> Res<Set<u64>> {
    if v == "-1" || v.eq_ignore_ascii_case("unlimited") {
        return Ok(Set::Clear);
    }
    v.parse::<u64>()
        .map(Set::To)
        .map_err(|_| format!("Invalid value '{v}' for {key}: expected a number or -1"))
}

fn wall(key: &str, v: &str) -> Res<Set<u64>> {
    if v == "-1" {
        return Ok(Set::Clear);
    }
    match parse_time_limit(v) {
        Ok(Some(m)) => Ok(Set::To(u64::from(m))),
        Ok(None) => Ok(Set::Clear),
        Err(e) => Err(format!("Invalid value '{v}' for {key}: {e}")),
    }
}

fn tres(v: &str) -> Set<String> {
    if v == "-1" {
        Set::Clear
    } else {
        Set::To(v.to_string())
    }
}

fn list_change(op: char, v: &str) -> ListChange {
    let l = lower_list(v);
    match op {
        '+' => ListChange::Add(l),
        '-' => ListChange::Remove(l),
        _ if v == "-1" || v.is_empty() => ListChange::Replace(Vec::new()),
        _ => ListChange::Replace(l),
    }
}

/// Apply an association setting (`Fairshare`, limits, `QOS`, `DefaultQOS`);
/// `false` when `key` is not one.
pub(crate) fn assoc_setting(p: &mut AssocPatch, key: &str, op: char, v: &str) -> Res<bool> {
    let l = &mut p.limits;
    match key {
        "fairshare" | "shares" => {
            p.shares = if v.eq_ignore_ascii_case("parent") {
                Set::To(FAIRSHARE_PARENT)
            } else if v == "-1" {
                Set::To(1)
            } else {
                Set::To(
                    v.parse()
                        .map_err(|_| format!("Invalid value '{v}' for Fairshare"))?,
                )
            }
        }
        "grpjobs" => l.grp_jobs = count(key, v)?,
        "grpsubmitjobs" | "grpsubmit" => l.grp_submit_jobs = count(key, v)?,
        "grpwall" => l.grp_wall = wall(key, v)?,
        "grptres" => l.grp_tres = tres(v),
        "grptresmins" => l.grp_tres_mins = tres(v),
        "maxjobs" => l.max_jobs = count(key, v)?,
        "maxsubmitjobs" | "maxsubmit" => l.max_submit_jobs = count(key, v)?,
        "maxwall" | "maxwalldurationperjob" => l.max_wall = wall(key, v)?,
        "maxtres" | "maxtresperjob" => l.max_tres = tres(v),
        "maxtresperuser" | "maxtrespu" => l.max_tres_per_user = tres(v),
        "maxtresmins" | "maxtresminsperjob" => l.max_tres_mins = tres(v),
        "qos" | "qoslevel" => p.qos = list_change(op, v),
        "defaultqos" | "defqos" => {
            p.default_qos = if v == "-1" || v.is_empty() {
                Set::Clear
            } else {
                Set::To(v.to_ascii_lowercase())
            }
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Settings for new associations, from the same keys.
pub(crate) fn assoc_settings(p: &AssocPatch) -> AssocSettings {
    let mut limits = AssocLimits::default();
    p.limits.apply(&mut limits, &|_, new| Some(new.to_string()));
    AssocSettings {
        shares: match p.shares {
            Set::To(s) => Some(s),
            _ => None,
        },
        limits,
        qos: match &p.qos {
            ListChange::Replace(v) | ListChange::Add(v) => v.clone(),
            _ => Vec::new(),
        },
        default_qos: match &p.default_qos {
            Set::To(q) => Some(q.clone()),
            _ => None,
        },
    }
}

/// Apply a QOS setting; `false` when `key` is not one.
pub(crate) fn qos_setting(p: &mut QosPatch, key: &str, op: char, v: &str) -> Res<bool> {
    let l = &mut p.limits;
    match key {
        "description" => p.description = Set::To(v.to_string()),
        "priority" => {
            p.priority = if v == "-1" {
                Set::To(0)
            } else {
                Set::To(
                    v.parse()
                        .map_err(|_| format!("Invalid value '{v}' for Priority"))?,
                )
            }
        }
        "flags" => {
            let up: Vec<String> = list(v).iter().map(|f| f.to_ascii_uppercase()).collect();
            p.flags = match op {
                '+' => ListChange::Add(up),
                '-' => ListChange::Remove(up),
                _ if v == "-1" => ListChange::Replace(Vec::new()),
                _ => ListChange::Replace(up),
            }
        }
        "preempt" => p.preempt = list_change(op, v),
        "preemptmode" => p.preempt_mode = Set::To(v.to_ascii_lowercase()),
        "gracetime" => {
            // Seconds, as Slurm takes it; a time form (`MM:SS`...) also.
            p.grace_time = Set::To(
                v.parse()
                    .ok()
                    .or_else(|| parse_time_limit(v).ok().flatten().map(|m| m * 60))
                    .ok_or_else(|| format!("Invalid value '{v}' for GraceTime"))?,
            )
        }
        "usagefactor" => {
            p.usage_factor = Set::To(
                v.parse()
                    .map_err(|_| format!("Invalid value '{v}' for UsageFactor"))?,
            )
        }
        "grpjobs" => l.grp_jobs = count(key, v)?,
        "grpsubmitjobs" | "grpsubmit" => l.grp_submit_jobs = count(key, v)?,
        "grpwall" => l.grp_wall = wall(key, v)?,
        "grptres" => l.grp_tres = tres(v),
        "grptresmins" => l.grp_tres_mins = tres(v),
        "maxjobsperuser" | "maxjobspu" | "maxjobs" => l.max_jobs_per_user = count(key, v)?,
        "maxsubmitjobsperuser" | "maxsubmitjobspu" | "maxsubmitpu" | "maxsubmitjobs" => {
            l.max_submit_jobs_per_user = count(key, v)?
        }
        "maxjobsperaccount" | "maxjobspa" => l.max_jobs_per_account = count(key, v)?,
        "maxsubmitjobsperaccount" | "maxsubmitjobspa" | "maxsubmitpa" => {
            l.max_submit_jobs_per_account = count(key, v)?
        }
        "maxwall" | "maxwalldurationperjob" => l.max_wall = wall(key, v)?,
        "maxtresperuser" | "maxtrespu" => l.max_tres_per_user = tres(v),
        "maxtresperjob" | "maxtres" => l.max_tres_per_job = tres(v),
        "maxtrespernode" => l.max_tres_per_node = tres(v),
        "maxtresperaccount" | "maxtrespa" => l.max_tres_per_account = tres(v),
        "mintresperjob" | "mintres" => l.min_tres_per_job = tres(v),
        _ => return Ok(false),
    }
    Ok(true)
}

fn unknown(key: &str) -> String {
    format!(" Unknown option: {key}\n Use keyword 'where' to modify condition")
}

// ---------------------------------------------------------------- requests

/// What one command line asks of slurmdbd, plus the text to show first.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub request: AcctRequest,
    /// Printed before the confirmation (Slurm's ` Adding Account(s)` lines).
    pub preview: String,
    /// Heading for the names slurmdbd reports changed.
    pub heading: &'static str,
}

fn names_of(specs: &[Spec], name_keys: &[&str]) -> Vec<String> {
    let mut v = Vec::new();
    for s in specs {
        match s {
            Spec::Word(w) => v.extend(list(w)),
            Spec::Pair(k, _, val) if name_keys.contains(&k.as_str()) => v.extend(list(val)),
            _ => {}
        }
    }
    v
}

fn clusters_in(k: &str) -> bool {
    matches!(k, "cluster" | "clusters")
}

/// `sacctmgr add ...`.
pub fn add(entity: &str, specs: &Specs) -> Res<Change> {
    let all: Vec<Spec> = specs.filter.iter().chain(&specs.set).cloned().collect();
    match entity {
        "cluster" => {
            let names = names_of(&all, &["name", "names", "cluster", "clusters"]);
            if names.is_empty() {
                return Err(" Need name of cluster to add.".into());
            }
            for s in &all {
                if let Spec::Pair(k, _, _) = s {
                    if !matches!(k.as_str(), "name" | "names" | "cluster" | "clusters") {
                        return Err(unknown(k));
                    }
                }
            }
            Ok(Change {
                preview: format!(
                    " Adding Cluster(s)\n  Name           = {}\n",
                    names.join(",")
                ),
                request: AcctRequest::AddClusters(
                    names
                        .into_iter()
                        .map(|n| ClusterRec {
                            name: n.to_ascii_lowercase(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                heading: " Associations",
            })
        }
        "account" => {
            let mut a = AddAccounts::default();
            let mut p = AssocPatch::default();
            for s in &all {
                match s {
                    Spec::Word(w) => a.names.extend(lower_list(w)),
                    Spec::Pair(k, op, v) => match k.as_str() {
                        "name" | "names" | "account" | "accounts" => a.names.extend(lower_list(v)),
                        "description" => a.description = Some(v.clone()),
                        "organization" => a.organization = Some(v.clone()),
                        "parent" => a.parent = Some(v.to_ascii_lowercase()),
                        k if clusters_in(k) => a.clusters = lower_list(v),
                        _ => {
                            if !assoc_setting(&mut p, k, *op, v)? {
                                return Err(unknown(k));
                            }
                        }
                    },
                }
            }
            if a.names.is_empty() {
                return Err(" Need name of account to add.".into());
            }
            a.assoc = assoc_settings(&p);
            let mut preview = format!(" Adding Account(s)\n  {}\n", a.names.join("\n  "));
            preview.push_str(&format!(
                " Settings\n  Parent        = {}\n",
                a.parent.as_deref().unwrap_or("root")
            ));
            Ok(Change {
                request: AcctRequest::AddAccounts(a),
                preview,
                heading: " Associations",
            })
        }
        "user" => {
            let mut a = AddUsers::default();
            let mut p = AssocPatch::default();
            for s in &all {
                match s {
                    Spec::Word(w) => a.names.extend(lower_list(w)),
                    Spec::Pair(k, op, v) => match k.as_str() {
                        "name" | "names" | "user" | "users" => a.names.extend(lower_list(v)),
                        "account" | "accounts" => a.accounts = lower_list(v),
                        "defaultaccount" => a.default_account = Some(v.to_ascii_lowercase()),
                        "adminlevel" => {
                            a.admin_level = Some(
                                AdminLevel::parse(v)
                                    .ok_or_else(|| format!("Invalid AdminLevel '{v}'"))?,
                            )
                        }
                        "partition" | "partitions" => a.partitions = list(v),
                        k if clusters_in(k) => a.clusters = lower_list(v),
                        _ => {
                            if !assoc_setting(&mut p, k, *op, v)? {
                                return Err(unknown(k));
                            }
                        }
                    },
                }
            }
            if a.names.is_empty() {
                return Err(" Need name of user to add.".into());
            }
            a.assoc = assoc_settings(&p);
            Ok(Change {
                preview: format!(" Adding User(s)\n  {}\n", a.names.join("\n  ")),
                request: AcctRequest::AddUsers(a),
                heading: " Associations",
            })
        }
        "qos" => {
            let mut names = Vec::new();
            let mut p = QosPatch::default();
            for s in &all {
                match s {
                    Spec::Word(w) => names.extend(lower_list(w)),
                    Spec::Pair(k, op, v) => match k.as_str() {
                        "name" | "names" => names.extend(lower_list(v)),
                        _ => {
                            if !qos_setting(&mut p, k, *op, v)? {
                                return Err(unknown(k));
                            }
                        }
                    },
                }
            }
            if names.is_empty() {
                return Err(" Need name of QOS to add.".into());
            }
            let recs = names
                .iter()
                .map(|n| {
                    let base = QosRec {
                        name: n.clone(),
                        description: n.clone(),
                        ..Default::default()
                    };
                    crate::sacctmgr_file::apply_qos(&base, &p)
                })
                .collect();
            Ok(Change {
                preview: format!(" Adding QOS(s)\n  {}\n", names.join("\n  ")),
                request: AcctRequest::AddQos(recs),
                heading: "",
            })
        }
        "coordinator" => {
            let c = coord_change(&all)?;
            if c.users.is_empty() && c.accounts.is_empty() {
                return Err(" You need to specify conditions to to add the coordinator.".into());
            }
            if c.users.is_empty() {
                return Err(" You need to specify a user list here.".into());
            }
            if c.accounts.is_empty() {
                return Err(" You need to specify an account list here.".into());
            }
            Ok(Change {
                preview: format!(
                    " Adding Coordinator User(s)\n  {}\n To Account(s) and all sub-accounts\n  {}\n",
                    c.users.join("\n  "),
                    c.accounts.join("\n  ")
                ),
                request: AcctRequest::AddCoords(c),
                heading: NO_LIST,
            })
        }
        other => Err(format!(" Unknown add entity: {other}")),
    }
}

/// A [`Change::heading`] for changes whose names are not listed (Slurm's
/// `add coordinator` prints none).
const NO_LIST: &str = "\0";

/// `names=`/`users=` and `accounts=` of `add|remove coordinator` (the
/// where and set words both count, as Slurm's).
fn coord_change(specs: &[Spec]) -> Res<CoordChange> {
    let mut c = CoordChange::default();
    for s in specs {
        match s {
            Spec::Word(w) => return Err(unknown(w)),
            Spec::Pair(k, _, v) => match k.as_str() {
                "name" | "names" | "user" | "users" => c.users.extend(lower_list(v)),
                "account" | "accounts" | "acct" => c.accounts.extend(lower_list(v)),
                other => return Err(unknown(other)),
            },
        }
    }
    Ok(c)
}

/// Filters shared by modify, delete and show.
#[derive(Debug, Default)]
struct Where {
    names: Vec<String>,
    clusters: Vec<String>,
    accounts: Vec<String>,
    users: Vec<String>,
    partitions: Vec<String>,
    parents: Vec<String>,
    ids: Vec<u64>,
}

/// Slurm's `WithCoordinators` word, abbreviated to 5 letters or more.
fn with_coord_word(w: &str) -> bool {
    w.len() >= 5 && "withcoordinators".starts_with(w.to_ascii_lowercase().as_str())
}

fn parse_where(entity: &str, specs: &[Spec]) -> Res<Where> {
    let mut w = Where::default();
    for s in specs {
        match s {
            Spec::Word(x) => w.names.extend(list(x)),
            Spec::Pair(k, _, v) => match k.as_str() {
                "name" | "names" => w.names.extend(list(v)),
                "cluster" | "clusters" if entity == "cluster" => w.names.extend(list(v)),
                "cluster" | "clusters" => w.clusters.extend(lower_list(v)),
                "account" | "accounts" | "acct" if entity == "account" => {
                    w.names.extend(lower_list(v))
                }
                "account" | "accounts" | "acct" => w.accounts.extend(lower_list(v)),
                "user" | "users" if entity == "user" => w.names.extend(lower_list(v)),
                "user" | "users" => w.users.extend(lower_list(v)),
                "partition" | "partitions" => w.partitions.extend(list(v)),
                "parent" | "parentname" => w.parents.extend(lower_list(v)),
                "id" | "ids" => {
                    for x in list(v) {
                        w.ids
                            .push(x.parse().map_err(|_| format!("Invalid id '{x}'"))?);
                    }
                }
                "qos" if entity == "qos" => w.names.extend(lower_list(v)),
                "format" | "withassoc" | "withcoord" | "tree" => {}
                other => return Err(unknown(other)),
            },
        }
    }
    if entity != "cluster" && entity != "partition" {
        w.names = w
            .names
            .into_iter()
            .map(|n| n.to_ascii_lowercase())
            .collect();
    }
    Ok(w)
}

fn assoc_filter(w: &Where, entity: &str) -> AssocFilter {
    let mut f = AssocFilter {
        ids: w.ids.clone(),
        clusters: w.clusters.clone(),
        accounts: w.accounts.clone(),
        users: w.users.clone(),
        partitions: w.partitions.clone(),
        ..Default::default()
    };
    match entity {
        "user" => f.users.extend(w.names.clone()),
        "account" => f.accounts.extend(w.names.clone()),
        _ => {}
    }
    f
}

/// `sacctmgr modify ...`.
pub fn modify(entity: &str, specs: &Specs) -> Res<Change> {
    if specs.set.is_empty() {
        return Err(" You didn't give me anything to set".into());
    }
    let w = parse_where(entity, &specs.filter)?;
    match entity {
        "account" => {
            let mut set = AccountPatch::default();
            let mut assoc = AssocPatch::default();
            for s in &specs.set {
                let Spec::Pair(k, op, v) = s else {
                    return Err(unknown(&format!("{s:?}")));
                };
                match k.as_str() {
                    "description" => set.description = Set::To(v.clone()),
                    "organization" => set.organization = Set::To(v.clone()),
                    "parent" => assoc.parent = Set::To(v.to_ascii_lowercase()),
                    _ => {
                        if !assoc_setting(&mut assoc, k, *op, v)? {
                            return Err(unknown(k));
                        }
                    }
                }
            }
            Ok(Change {
                preview: String::new(),
                request: AcctRequest::ModifyAccounts {
                    filter: AccountFilter {
                        names: w.names,
                        parents: w.parents,
                        clusters: w.clusters,
                        ..Default::default()
                    },
                    set,
                    assoc,
                },
                heading: " Modified account associations...",
            })
        }
        "user" => {
            let mut set = UserPatch::default();
            let mut assoc = AssocPatch::default();
            for s in &specs.set {
                let Spec::Pair(k, op, v) = s else {
                    return Err(unknown(&format!("{s:?}")));
                };
                match k.as_str() {
                    "defaultaccount" => set.default_account = Set::To(v.to_ascii_lowercase()),
                    "adminlevel" => {
                        set.admin_level = Set::To(
                            AdminLevel::parse(v)
                                .ok_or_else(|| format!("Invalid AdminLevel '{v}'"))?,
                        )
                    }
                    _ => {
                        if !assoc_setting(&mut assoc, k, *op, v)? {
                            return Err(unknown(k));
                        }
                    }
                }
            }
            Ok(Change {
                preview: String::new(),
                request: AcctRequest::ModifyUsers {
                    filter: UserFilter {
                        names: w.names,
                        accounts: w.accounts,
                        clusters: w.clusters,
                        partitions: w.partitions,
                        ..Default::default()
                    },
                    set,
                    assoc,
                },
                heading: " Modified user associations...",
            })
        }
        "association" => {
            let mut set = AssocPatch::default();
            for s in &specs.set {
                let Spec::Pair(k, op, v) = s else {
                    return Err(unknown(&format!("{s:?}")));
                };
                if !assoc_setting(&mut set, k, *op, v)? {
                    return Err(unknown(k));
                }
            }
            Ok(Change {
                preview: String::new(),
                request: AcctRequest::ModifyAssocs {
                    filter: assoc_filter(&w, entity),
                    set,
                },
                heading: " Modified account associations...",
            })
        }
        "qos" => {
            let mut set = QosPatch::default();
            for s in &specs.set {
                let Spec::Pair(k, op, v) = s else {
                    return Err(unknown(&format!("{s:?}")));
                };
                if !qos_setting(&mut set, k, *op, v)? {
                    return Err(unknown(k));
                }
            }
            Ok(Change {
                preview: String::new(),
                request: AcctRequest::ModifyQos {
                    filter: QosFilter {
                        names: w.names,
                        ids: w.ids,
                    },
                    set,
                },
                heading: " Modified qos...",
            })
        }
        other => Err(format!(" Unknown modify entity: {other}")),
    }
}

/// `sacctmgr delete ...`.
pub fn delete(entity: &str, specs: &Specs) -> Res<Change> {
    if entity == "coordinator" {
        let all: Vec<Spec> = specs.filter.iter().chain(&specs.set).cloned().collect();
        let c = coord_change(&all)?;
        if c.users.is_empty() && c.accounts.is_empty() {
            return Err(" You need to specify a user list or account list here.".into());
        }
        let preview = if c.users.is_empty() {
            format!(
                " Removing all users from Accounts\n  {}\n",
                c.accounts.join("\n  ")
            )
        } else {
            format!(
                " Removing Coordinators with user name\n  {}\n{}",
                c.users.join("\n  "),
                if c.accounts.is_empty() {
                    " From all accounts\n".to_string()
                } else {
                    format!(" From Account(s)\n  {}\n", c.accounts.join("\n  "))
                }
            )
        };
        return Ok(Change {
            request: AcctRequest::RemoveCoords(c),
            preview,
            heading: " Removed Coordinators (sub accounts not listed)...",
        });
    }
    let w = parse_where(entity, &specs.filter)?;
    let (request, heading) = match entity {
        "cluster" => (
            AcctRequest::DeleteClusters(ClusterFilter {
                names: w.names.iter().map(|n| n.to_ascii_lowercase()).collect(),
            }),
            " Deleting clusters...",
        ),
        "account" => (
            AcctRequest::DeleteAccounts(AccountFilter {
                names: w.names,
                parents: w.parents,
                clusters: w.clusters,
                ..Default::default()
            }),
            " Deleting accounts...",
        ),
        "user" => (
            AcctRequest::DeleteUsers(UserFilter {
                names: w.names,
                accounts: w.accounts,
                clusters: w.clusters,
                partitions: w.partitions,
                ..Default::default()
            }),
            " Deleting users...",
        ),
        "association" => (
            AcctRequest::DeleteAssocs(assoc_filter(&w, entity)),
            " Deleting associations...",
        ),
        "qos" => (
            AcctRequest::DeleteQos(QosFilter {
                names: w.names,
                ids: w.ids,
            }),
            " Deleting QOS(s)...",
        ),
        other => return Err(format!(" Unknown delete entity: {other}")),
    };
    let nothing = match &request {
        AcctRequest::DeleteClusters(f) => f.names.is_empty(),
        AcctRequest::DeleteAccounts(f) => f.names.is_empty(),
        AcctRequest::DeleteUsers(f) => f.names.is_empty(),
        AcctRequest::DeleteQos(f) => f.names.is_empty() && f.ids.is_empty(),
        AcctRequest::DeleteAssocs(f) => {
            f.ids.is_empty() && f.accounts.is_empty() && f.users.is_empty()
        }
        _ => false,
    };
    if nothing {
        return Err(format!(" No conditions given to delete {entity}s"));
    }
    Ok(Change {
        request,
        preview: String::new(),
        heading,
    })
}

// ------------------------------------------------------------------ show

/// A column of a listing: key, title, default width.
type Col = (&'static str, &'static str, usize);

const ACCOUNT_COLS: &[Col] = &[
    ("account", "Account", 10),
    ("descr", "Descr", 20),
    ("org", "Org", 20),
];
/// `WithCoordinators`: accounts coordinated (users), coordinators
/// (accounts); Slurm titles both `Coord Accounts`.
const COORD_COL: Col = ("coord", "Coord Accounts", 20);
const USER_COLS: &[Col] = &[
    ("user", "User", 10),
    ("defacct", "Def Acct", 10),
    ("admin", "Admin", 9),
];
const ASSOC_LIMIT_COLS: &[Col] = &[
    ("share", "Share", 9),
    ("priority", "Priority", 10),
    ("grpjobs", "GrpJobs", 7),
    ("grptres", "GrpTRES", 13),
    ("grpsubmit", "GrpSubmit", 9),
    ("grpwall", "GrpWall", 11),
    ("grptresmins", "GrpTRESMins", 13),
    ("maxjobs", "MaxJobs", 7),
    ("maxtres", "MaxTRES", 13),
    ("maxtrespu", "MaxTRESPU", 13),
    ("maxsubmit", "MaxSubmit", 9),
    ("maxwall", "MaxWall", 11),
    ("maxtresmins", "MaxTRESMins", 13),
    ("qos", "QOS", 20),
    ("defqos", "Def QOS", 9),
];
const ASSOC_KEY_COLS: &[Col] = &[
    ("cluster", "Cluster", 10),
    ("account", "Account", 10),
    ("user", "User", 10),
    ("partition", "Partition", 10),
];
const QOS_COLS: &[Col] = &[
    ("name", "Name", 10),
    ("priority", "Priority", 10),
    ("gracetime", "GraceTime", 10),
    ("preempt", "Preempt", 10),
    ("preemptmode", "PreemptMode", 11),
    ("flags", "Flags", 40),
    ("usagefactor", "UsageFactor", 11),
    ("grptres", "GrpTRES", 13),
    ("grptresmins", "GrpTRESMins", 13),
    ("grpjobs", "GrpJobs", 7),
    ("grpsubmit", "GrpSubmit", 9),
    ("grpwall", "GrpWall", 11),
    ("maxtres", "MaxTRES", 13),
    ("maxtrespernode", "MaxTRESPerNode", 14),
    ("maxwall", "MaxWall", 11),
    ("maxtrespu", "MaxTRESPU", 13),
    ("maxjobspu", "MaxJobsPU", 9),
    ("maxsubmitpu", "MaxSubmitPU", 11),
    ("maxtrespa", "MaxTRESPA", 13),
    ("maxjobspa", "MaxJobsPA", 9),
    ("maxsubmitpa", "MaxSubmitPA", 11),
    ("mintres", "MinTRES", 13),
];
const CLUSTER_COLS: &[Col] = &[
    ("cluster", "Cluster", 10),
    ("controlhost", "ControlHost", 15),
    ("controlport", "ControlPort", 12),
    ("rpc", "RPC", 5),
    ("share", "Share", 9),
    ("grpjobs", "GrpJobs", 7),
    ("grptres", "GrpTRES", 13),
    ("grpsubmit", "GrpSubmit", 9),
    ("maxjobs", "MaxJobs", 7),
    ("maxtres", "MaxTRES", 13),
    ("maxsubmit", "MaxSubmit", 9),
    ("maxwall", "MaxWall", 11),
    ("qos", "QOS", 20),
    ("defqos", "Def QOS", 9),
];

/// Names a user may type for a column key.
fn alias(name: &str) -> String {
    let n: String = name
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_ascii_lowercase();
    match n.as_str() {
        "description" => "descr",
        "organization" => "org",
        "defaultaccount" => "defacct",
        "adminlevel" => "admin",
        "coordinators" | "coordinator" | "coord" => "coord",
        "fairshare" | "shares" => "share",
        "defaultqos" => "defqos",
        "parent" => "parentname",
        "grpsubmitjobs" => "grpsubmit",
        "maxsubmitjobs" => "maxsubmit",
        "maxtresperuser" => "maxtrespu",
        "maxjobsperuser" => "maxjobspu",
        "maxsubmitjobsperuser" => "maxsubmitpu",
        "maxtresperaccount" => "maxtrespa",
        "maxjobsperaccount" => "maxjobspa",
        "maxsubmitjobsperaccount" => "maxsubmitpa",
        "maxtresperjob" => "maxtres",
        "maxwalldurationperjob" => "maxwall",
        "mintresperjob" => "mintres",
        "qoslevel" => "qos",
        "acct" => "account",
        "rpcversion" => "rpc",
        other => return other.to_string(),
    }
    .to_string()
}

/// Columns from `format=a,b%20` against what an entity offers.
fn pick(
    format: Option<&str>,
    offered: &[Col],
    default: &[Col],
) -> Res<Vec<(String, String, usize)>> {
    let Some(f) = format else {
        return Ok(default
            .iter()
            .map(|c| (c.0.to_string(), c.1.to_string(), c.2))
            .collect());
    };
    let mut out = Vec::new();
    for item in f.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        let (name, width) = field_width::<usize>(item)?;
        let c = find_col(offered, &alias(name), name)?;
        out.push((c.0.to_string(), c.1.to_string(), width.unwrap_or(c.2)));
    }
    Ok(out)
}

/// One `format=` item: the field's name and its `%width`, if given.
fn field_width<W: std::str::FromStr>(item: &str) -> Res<(&str, Option<W>)> {
    match item.split_once('%') {
        Some((n, w)) => Ok((
            n,
            Some(
                w.parse::<W>()
                    .map_err(|_| format!("Invalid field width in '{item}'"))?,
            ),
        )),
        None => Ok((item, None)),
    }
}

/// The column `key` (the field `name` as given, aliases applied) names
/// among `offered`: exactly or, as Slurm's, by a unique prefix of two
/// letters or more (`Cl`).
fn find_col<'a, W>(
    offered: &'a [(&'static str, &'static str, W)],
    key: &str,
    name: &str,
) -> Res<&'a (&'static str, &'static str, W)> {
    offered
        .iter()
        .find(|c| c.0 == key)
        .or_else(|| {
            let mut hits = offered.iter().filter(|c| c.0.starts_with(key));
            match (hits.next(), hits.next()) {
                (Some(c), None) if key.len() >= 2 => Some(c),
                _ => None,
            }
        })
        .ok_or_else(|| format!("Invalid field requested: \"{name}\""))
}

/// Lay out rows (values per column) as Slurm does.
fn table(cols: &[(String, String, usize)], rows: &[Vec<String>], f: &Flags) -> String {
    let c: Vec<(&str, usize)> = cols.iter().map(|c| (c.1.as_str(), c.2)).collect();
    crate::fmt::acct_table(&c, rows, f.parsable, f.header)
}

fn num(v: Option<u64>) -> String {
    v.map(|n| n.to_string()).unwrap_or_default()
}

fn mins(v: Option<u64>) -> String {
    v.map(|m| format_duration_hms(m as i64 * 60))
        .unwrap_or_default()
}

fn s(v: &Option<String>) -> String {
    v.clone().unwrap_or_default()
}

fn assoc_value(a: &AssocRec, key: &str, depth: usize) -> String {
    let l = &a.limits;
    match key {
        "cluster" => a.cluster.clone(),
        "account" => format!("{}{}", " ".repeat(depth), a.account),
        "user" => a.user.clone(),
        "partition" => a.partition.clone(),
        "parentname" => {
            if a.is_user() {
                String::new()
            } else {
                a.parent.clone().unwrap_or_default()
            }
        }
        "share" => {
            if a.shares == FAIRSHARE_PARENT {
                "parent".into()
            } else {
                a.shares.to_string()
            }
        }
        "priority" => String::new(),
        "grpjobs" => num(l.grp_jobs),
        "grptres" => s(&l.grp_tres),
        "grpsubmit" => num(l.grp_submit_jobs),
        "grpwall" => mins(l.grp_wall),
        "grptresmins" => s(&l.grp_tres_mins),
        "maxjobs" => num(l.max_jobs),
        "maxtres" => s(&l.max_tres),
        "maxtrespu" => s(&l.max_tres_per_user),
        "maxsubmit" => num(l.max_submit_jobs),
        "maxwall" => mins(l.max_wall),
        "maxtresmins" => s(&l.max_tres_mins),
        "qos" => {
            let mut q = a.qos.clone();
            q.sort();
            q.join(",")
        }
        "defqos" => s(&a.default_qos),
        "id" => a.id.to_string(),
        _ => String::new(),
    }
}

fn qos_value(q: &QosRec, key: &str) -> String {
    let l = &q.limits;
    match key {
        "name" => q.name.clone(),
        "descr" => q.description.clone(),
        "id" => q.id.to_string(),
        "priority" => q.priority.to_string(),
        "gracetime" => format_duration_hms(i64::from(q.grace_time)),
        "preempt" => q.preempt.join(","),
        "preemptmode" => q.preempt_mode.clone(),
        "flags" => q.flags.join(","),
        "usagefactor" => format!("{:.6}", q.usage_factor),
        "grptres" => s(&l.grp_tres),
        "grptresmins" => s(&l.grp_tres_mins),
        "grpjobs" => num(l.grp_jobs),
        "grpsubmit" => num(l.grp_submit_jobs),
        "grpwall" => mins(l.grp_wall),
        "maxtres" => s(&l.max_tres_per_job),
        "maxtrespernode" => s(&l.max_tres_per_node),
        "maxwall" => mins(l.max_wall),
        "maxtrespu" => s(&l.max_tres_per_user),
        "maxjobspu" => num(l.max_jobs_per_user),
        "maxsubmitpu" => num(l.max_submit_jobs_per_user),
        "maxtrespa" => s(&l.max_tres_per_account),
        "maxjobspa" => num(l.max_jobs_per_account),
        "maxsubmitpa" => num(l.max_submit_jobs_per_account),
        "mintres" => s(&l.min_tres_per_job),
        _ => String::new(),
    }
}

/// Lays out slurmdbd's answers to a `show`.
type Render = Box<dyn Fn(&[AcctResponse], &Flags) -> Res<String>>;

/// What `show` needs from slurmdbd, and how to print the answers.
pub struct Show {
    pub requests: Vec<AcctRequest>,
    render: Render,
}

/// `sacctmgr show ...`.
pub fn show(entity: &str, specs: &Specs) -> Res<Show> {
    let mut format = None;
    let mut with_assoc = false;
    let mut with_coord = false;
    let mut tree = false;
    let mut rest = Vec::new();
    for s in specs.filter.iter().chain(&specs.set) {
        match s {
            Spec::Pair(k, _, v) if k == "format" => format = Some(v.clone()),
            Spec::Word(w) if w.eq_ignore_ascii_case("withassoc") => with_assoc = true,
            Spec::Word(w) if w.eq_ignore_ascii_case("tree") => tree = true,
            Spec::Word(w) if with_coord_word(w) => with_coord = true,
            other => rest.push(other.clone()),
        }
    }
    match entity {
        "tres" => return show_tres(format.as_deref(), &rest),
        "stats" => return show_stats(&rest),
        "problem" => return show_problems(format.as_deref(), &rest),
        _ => {}
    }
    let w = parse_where(entity, &rest)?;
    let assoc_cols: Vec<Col> = ASSOC_KEY_COLS
        .iter()
        .chain(ASSOC_LIMIT_COLS)
        .copied()
        .chain([("parentname", "Par Name", 10), ("id", "ID", 6)])
        .collect();
    // An entity's own columns, then the associations' and Coord's.
    let offered_with = |own: &[Col]| -> Vec<Col> {
        own.iter()
            .chain(&assoc_cols)
            .copied()
            .chain([COORD_COL])
            .collect()
    };
    match entity {
        "account" => {
            let offered = offered_with(ACCOUNT_COLS);
            let mut default: Vec<Col> = if with_assoc {
                ACCOUNT_COLS
                    .iter()
                    .copied()
                    .chain([
                        ("cluster", "Cluster", 10),
                        ("parentname", "Par Name", 10),
                        ("user", "User", 10),
                    ])
                    .chain(ASSOC_LIMIT_COLS.iter().copied())
                    .collect()
            } else {
                ACCOUNT_COLS.to_vec()
            };
            if with_coord {
                default.insert(ACCOUNT_COLS.len(), COORD_COL);
            }
            let cols = pick(format.as_deref(), &offered, &default)?;
            let filter = AccountFilter {
                names: w.names.clone(),
                parents: w.parents.clone(),
                ..Default::default()
            };
            let mut requests = vec![AcctRequest::ListAccounts(filter)];
            if with_assoc {
                requests.push(AcctRequest::ListAssocs(AssocFilter {
                    accounts: w.names.clone(),
                    clusters: w.clusters.clone(),
                    ..Default::default()
                }));
            }
            Ok(Show {
                requests,
                render: Box::new(move |resp, f| {
                    let accounts = match resp.first() {
                        Some(AcctResponse::Accounts(v)) => v.clone(),
                        _ => return Err("unexpected answer from slurmdbd".into()),
                    };
                    let assocs = match resp.get(1) {
                        Some(AcctResponse::Assocs(v)) => Some(v),
                        _ => None,
                    };
                    let mut rows = Vec::new();
                    for a in &accounts {
                        let val = |k: &str, assoc: Option<&AssocRec>| match k {
                            "account" => a.name.clone(),
                            "descr" => a.description.clone(),
                            "org" => a.organization.clone(),
                            "coord" => a.coordinators.join(","),
                            _ => assoc.map(|x| assoc_value(x, k, 0)).unwrap_or_default(),
                        };
                        match assocs {
                            Some(list) => {
                                for x in list.iter().filter(|x| x.account == a.name) {
                                    rows.push(cols.iter().map(|c| val(&c.0, Some(x))).collect());
                                }
                            }
                            None => rows.push(cols.iter().map(|c| val(&c.0, None)).collect()),
                        }
                    }
                    Ok(table(&cols, &rows, f))
                }),
            })
        }
        "user" => {
            let offered = offered_with(USER_COLS);
            let mut default: Vec<Col> = if with_assoc {
                USER_COLS
                    .iter()
                    .copied()
                    .chain(ASSOC_KEY_COLS[..1].iter().copied())
                    .chain(ASSOC_KEY_COLS[1..2].iter().copied())
                    .chain(ASSOC_KEY_COLS[3..].iter().copied())
                    .chain(ASSOC_LIMIT_COLS.iter().copied())
                    .collect()
            } else {
                USER_COLS.to_vec()
            };
            if with_coord {
                default.insert(USER_COLS.len(), COORD_COL);
            }
            let cols = pick(format.as_deref(), &offered, &default)?;
            let mut requests = vec![AcctRequest::ListUsers(UserFilter {
                names: w.names.clone(),
                accounts: w.accounts.clone(),
                clusters: w.clusters.clone(),
                ..Default::default()
            })];
            if with_assoc {
                requests.push(AcctRequest::ListAssocs(AssocFilter {
                    users: w.names.clone(),
                    accounts: w.accounts.clone(),
                    clusters: w.clusters.clone(),
                    only_users: true,
                    ..Default::default()
                }));
            }
            Ok(Show {
                requests,
                render: Box::new(move |resp, f| {
                    let users = match resp.first() {
                        Some(AcctResponse::Users(v)) => v.clone(),
                        _ => return Err("unexpected answer from slurmdbd".into()),
                    };
                    let assocs = match resp.get(1) {
                        Some(AcctResponse::Assocs(v)) => Some(v),
                        _ => None,
                    };
                    let mut rows = Vec::new();
                    for u in &users {
                        let val = |k: &str, assoc: Option<&AssocRec>| match k {
                            "user" => u.name.clone(),
                            "defacct" => u.default_account.clone(),
                            "admin" => u.admin_level.name().to_string(),
                            "coord" => u.coord_accounts.join(","),
                            _ => assoc.map(|x| assoc_value(x, k, 0)).unwrap_or_default(),
                        };
                        match assocs {
                            Some(list) => {
                                for x in list.iter().filter(|x| x.user == u.name) {
                                    rows.push(cols.iter().map(|c| val(&c.0, Some(x))).collect());
                                }
                            }
                            None => rows.push(cols.iter().map(|c| val(&c.0, None)).collect()),
                        }
                    }
                    Ok(table(&cols, &rows, f))
                }),
            })
        }
        "association" => {
            let default: Vec<Col> = ASSOC_KEY_COLS
                .iter()
                .chain(ASSOC_LIMIT_COLS)
                .copied()
                .collect();
            let cols = pick(format.as_deref(), &assoc_cols, &default)?;
            let filter = assoc_filter(&w, entity);
            Ok(Show {
                requests: vec![AcctRequest::ListAssocs(filter)],
                render: Box::new(move |resp, f| {
                    let list = match resp.first() {
                        Some(AcctResponse::Assocs(v)) => v.clone(),
                        _ => return Err("unexpected answer from slurmdbd".into()),
                    };
                    let rows: Vec<Vec<String>> = list
                        .iter()
                        .map(|a| {
                            let depth = if tree { tree_depth(a, &list) } else { 0 };
                            cols.iter().map(|c| assoc_value(a, &c.0, depth)).collect()
                        })
                        .collect();
                    Ok(table(&cols, &rows, f))
                }),
            })
        }
        "qos" => {
            let offered: Vec<Col> = QOS_COLS
                .iter()
                .copied()
                .chain([("descr", "Descr", 20), ("id", "ID", 6)])
                .collect();
            let cols = pick(format.as_deref(), &offered, QOS_COLS)?;
            Ok(Show {
                requests: vec![AcctRequest::ListQos(QosFilter {
                    names: w.names.clone(),
                    ids: w.ids.clone(),
                })],
                render: Box::new(move |resp, f| {
                    let list = match resp.first() {
                        Some(AcctResponse::Qos(v)) => v.clone(),
                        _ => return Err("unexpected answer from slurmdbd".into()),
                    };
                    let rows: Vec<Vec<String>> = list
                        .iter()
                        .map(|q| cols.iter().map(|c| qos_value(q, &c.0)).collect())
                        .collect();
                    Ok(table(&cols, &rows, f))
                }),
            })
        }
        "cluster" => {
            let cols = pick(format.as_deref(), CLUSTER_COLS, CLUSTER_COLS)?;
            let names: Vec<String> = w.names.iter().map(|n| n.to_ascii_lowercase()).collect();
            Ok(Show {
                requests: vec![
                    AcctRequest::ListClusters(ClusterFilter {
                        names: names.clone(),
                    }),
                    AcctRequest::ListAssocs(AssocFilter {
                        clusters: names,
                        accounts: vec!["root".into()],
                        only_accounts: true,
                        ..Default::default()
                    }),
                ],
                render: Box::new(move |resp, f| {
                    let clusters = match resp.first() {
                        Some(AcctResponse::Clusters(v)) => v.clone(),
                        _ => return Err("unexpected answer from slurmdbd".into()),
                    };
                    let roots = match resp.get(1) {
                        Some(AcctResponse::Assocs(v)) => v.clone(),
                        _ => Vec::new(),
                    };
                    let rows: Vec<Vec<String>> = clusters
                        .iter()
                        .map(|c| {
                            let root = roots.iter().find(|a| a.cluster == c.name);
                            cols.iter()
                                .map(|col| match col.0.as_str() {
                                    "cluster" => c.name.clone(),
                                    "controlhost" => c.control_host.clone(),
                                    "controlport" => c.control_port.to_string(),
                                    "rpc" => c.rpc_version.to_string(),
                                    k => root.map(|r| assoc_value(r, k, 0)).unwrap_or_default(),
                                })
                                .collect()
                        })
                        .collect();
                    Ok(table(&cols, &rows, f))
                }),
            })
        }
        other => Err(format!(" Unknown show entity: {other}")),
    }
}

const TRES_COLS: &[Col] = &[("type", "Type", 8), ("name", "Name", 15), ("id", "ID", 6)];

/// `sacctmgr show tres [type=...] [name=...] [id=...]`: the TRES slurmdbd
/// accounts (the built-in ones, then those the clusters report).
fn show_tres(format: Option<&str>, specs: &[Spec]) -> Res<Show> {
    let (mut types, mut names, mut ids) = (Vec::new(), Vec::new(), Vec::new());
    for s in specs {
        match s {
            Spec::Pair(k, _, v) if matches!(k.as_str(), "type" | "types") => {
                types.extend(lower_list(v))
            }
            Spec::Pair(k, _, v) if matches!(k.as_str(), "name" | "names") => {
                names.extend(lower_list(v))
            }
            Spec::Pair(k, _, v) if matches!(k.as_str(), "id" | "ids") => {
                for x in list(v) {
                    ids.push(
                        x.parse::<u64>()
                            .map_err(|_| format!(" Bad TRES id '{x}'"))?,
                    );
                }
            }
            Spec::Word(w) if w.eq_ignore_ascii_case("withdeleted") => {}
            Spec::Word(w) => names.extend(lower_list(w)),
            Spec::Pair(k, ..) => return Err(unknown(k)),
        }
    }
    let cols = pick(format, TRES_COLS, TRES_COLS)?;
    Ok(Show {
        requests: vec![AcctRequest::ListClusters(ClusterFilter::default())],
        render: Box::new(move |resp, f| {
            let Some(AcctResponse::Clusters(clusters)) = resp.first() else {
                return Err("unexpected answer from slurmdbd".into());
            };
            let mut rows = Vec::new();
            for t in slurm_openapi::dbjson::tres_table(clusters) {
                let field = |k: &str| match &t[k] {
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Number(n) => n.to_string(),
                    _ => String::new(),
                };
                let id = t["id"].as_u64();
                if (!types.is_empty() && !types.contains(&field("type")))
                    || (!names.is_empty() && !names.contains(&field("name")))
                    || (!ids.is_empty() && !id.is_some_and(|i| ids.contains(&i)))
                {
                    continue;
                }
                rows.push(cols.iter().map(|c| field(&c.0)).collect());
            }
            Ok(table(&cols, &rows, f))
        }),
    })
}

/// `sacctmgr show transaction`'s columns: key, title, width.
const TXN_COLS: &[(&str, &str, i64)] = &[
    ("action", "Action", 20),
    ("actor", "Actor", 10),
    ("cluster", "Cluster", 10),
    ("id", "ID", 6),
    ("info", "Info", 20),
    ("time", "Time", 19),
    ("where", "Where", 20),
];

/// `sacctmgr show transaction [where] [Accounts=] [Action=] [Actor=]
/// [Clusters=] [Start=] [End=] [Users=] [format=]`: the changes made
/// through slurmdbd (default format `Time,Action,Actor,Where,Info`).
fn show_txns(specs: &[Spec], now: i64) -> Res<Show> {
    use slurm_common::timefmt::parse_timestamp;
    let mut f = TxnFilter::default();
    let mut format: Option<String> = None;
    let time = |k: &str, v: &str| {
        parse_timestamp(v, now).map_err(|e| format!(" Invalid time '{v}' for {k}: {e}"))
    };
    for s in specs {
        match s {
            Spec::Word(w) if w.eq_ignore_ascii_case("withassoc") => {
                return Err(" WithAssoc is not supported for transactions here".into())
            }
            Spec::Word(w) => return Err(format!(" Unknown condition: {w}")),
            Spec::Pair(k, _, v) => match k.as_str() {
                "format" => format = Some(v.clone()),
                "account" | "accounts" | "acct" | "accts" => f.accounts.extend(lower_list(v)),
                "action" | "actions" => f.actions.extend(list(v)),
                "actor" | "actors" => f.actors.extend(list(v)),
                "cluster" | "clusters" => f.clusters.extend(lower_list(v)),
                "end" => f.end = Some(time("End", v)?),
                "start" => f.start = Some(time("Start", v)?),
                "user" | "users" => f.users.extend(lower_list(v)),
                other => return Err(format!(" Unknown condition: {other}")),
            },
        }
    }
    let fmt = format.unwrap_or_else(|| "Time,Action,Actor,Where,Info".into());
    let cols = pick_cols(TXN_COLS, &fmt, |k| match k {
        "timestamp" | "ts" => "time".into(),
        k => k.into(),
    })?;
    Ok(Show {
        requests: vec![AcctRequest::ListTxns(f)],
        render: Box::new(move |resp, fl| {
            let Some(AcctResponse::Txns(txns)) = resp.first() else {
                return Err("unexpected answer from slurmdbd".into());
            };
            let rows: Vec<Vec<String>> = txns
                .iter()
                .map(|t| {
                    cols.iter()
                        .map(|(k, _)| match k.as_str() {
                            "action" => t.action.clone(),
                            "actor" => t.actor.clone(),
                            "cluster" => t.cluster.clone(),
                            "id" => t.id.to_string(),
                            "info" => t.info.clone(),
                            "time" => slurm_common::timefmt::format_timestamp(t.time),
                            "where" => t.name.clone(),
                            _ => String::new(),
                        })
                        .collect()
                })
                .collect();
            Ok(cols_table(TXN_COLS, &cols, &rows, fl))
        }),
    })
}

/// The columns `fmt` names (`Name[%width]`; see [`find_col`], after
/// `rename`), with their widths (negative: left-aligned).
fn pick_cols(
    offered: &[(&'static str, &'static str, i64)],
    fmt: &str,
    rename: impl Fn(&str) -> String,
) -> Res<Vec<(String, i64)>> {
    let mut cols = Vec::new();
    for item in fmt.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        let (name, width) = field_width::<i64>(item)?;
        let c = find_col(offered, &rename(&alias(name)), name)?;
        cols.push((c.0.to_string(), width.unwrap_or(c.2)));
    }
    Ok(cols)
}

/// A table of `rows` under `cols`' titles (from `offered`).
fn cols_table(
    offered: &[(&'static str, &'static str, i64)],
    cols: &[(String, i64)],
    rows: &[Vec<String>],
    fl: &Flags,
) -> String {
    let titles: Vec<(&str, i64)> = cols
        .iter()
        .map(|(k, w)| (offered.iter().find(|c| c.0 == k).map_or("", |c| c.1), *w))
        .collect();
    crate::fmt::acct_table_aligned(&titles, rows, fl.parsable, fl.header)
}

/// `sacctmgr show event`'s columns: key, title, width (negative: left-aligned).
const EVENT_COLS: &[(&str, &str, i64)] = &[
    ("cluster", "Cluster", 10),
    ("clusternodes", "ClusterNodes", 20),
    ("cpus", "CPUs", 9),
    ("duration", "Duration", 13),
    ("end", "TimeEnd", 19),
    ("event", "Event", 7),
    ("nodename", "NodeName", -15),
    ("reason", "Reason", 30),
    ("start", "TimeStart", 19),
    ("state", "State", 6),
    ("tres", "TRES", 20),
    ("user", "User", 10),
];

/// `sacctmgr show event [where] [Nodes=] [States=] [Reason=] [User=]
/// [Start=] [End=] [Clusters=|All_Clusters] [All_Time] [CondFlags=Open]
/// [MinCPUs=] [MaxCPUs=] [Event=Node|Cluster] [format=]`: the node events
/// slurmdbd keeps. Default: this cluster, since midnight yesterday (with
/// `States=`: events open now).
fn show_events(specs: &[Spec], cluster: &str, now: i64) -> Res<Show> {
    use slurm_common::timefmt::parse_timestamp;
    let mut f = EventFilter::default();
    let (mut all_clusters, mut all_time) = (false, false);
    let mut format: Option<String> = None;
    let time = |k: &str, v: &str| {
        parse_timestamp(v, now).map_err(|e| format!(" Invalid time '{v}' for {k}: {e}"))
    };
    let number = |k: &str, v: &str| {
        v.parse::<u32>()
            .map_err(|_| format!(" Invalid value '{v}' for {k}: expected a number"))
    };
    let event_types = |v: &str, f: &mut EventFilter| -> Res<()> {
        for t in list(v) {
            match t.to_ascii_lowercase().as_str() {
                "node" | "nodes" => f.node_events = true,
                "cluster" | "clusters" => f.cluster_events = true,
                _ => {
                    return Err(format!(
                        " Unknown event type: '{t}'  Valid events are Cluster and Node."
                    ))
                }
            }
        }
        Ok(())
    };
    for s in specs {
        match s {
            Spec::Word(w) => match w.to_ascii_lowercase().as_str() {
                "all_clusters" | "all_cluster" => all_clusters = true,
                "all_time" => all_time = true,
                _ => event_types(w, &mut f)?,
            },
            Spec::Pair(k, _, v) => match k.as_str() {
                "format" => format = Some(v.clone()),
                "cluster" | "clusters" => f.clusters.extend(lower_list(v)),
                "condflags" | "condflag" => {
                    for flag in list(v) {
                        if !flag.eq_ignore_ascii_case("open") {
                            return Err(format!(" Unknown condition flag {flag}"));
                        }
                        f.open_only = true;
                    }
                }
                "end" => f.end = Some(time("End", v)?),
                "start" => f.start = Some(time("Start", v)?),
                "event" | "events" => event_types(v, &mut f)?,
                "mincpus" => f.min_cpus = Some(number("MinCPUs", v)?),
                "maxcpus" => f.max_cpus = Some(number("MaxCPUs", v)?),
                "node" | "nodes" | "nodename" => f.nodes.extend(
                    slurm_common::hostlist::expand(v)
                        .map_err(|e| format!(" Invalid node list '{v}': {e}"))?,
                ),
                "reason" | "reasons" => f.reasons.extend(list(v)),
                "state" | "states" => f
                    .states
                    .extend(list(v).into_iter().map(|s| s.to_ascii_uppercase())),
                "user" | "users" => {
                    for u in list(v) {
                        let uid = slurm_common::users::parse_user(&u)
                            .ok_or_else(|| format!(" Invalid user id: {u}"))?;
                        f.reason_uids.push(uid);
                    }
                }
                other => return Err(format!(" Unknown condition: {other}")),
            },
        }
    }
    if f.clusters.is_empty() && !all_clusters {
        f.clusters.push(cluster.to_ascii_lowercase());
    }
    if f.start.is_none() && !all_time {
        f.start = Some(if f.states.is_empty() {
            crate::sreport::midnight(crate::sreport::midnight(now) - 1)
        } else {
            now
        });
    }
    let fmt = format.unwrap_or_else(|| {
        if f.cluster_events && !f.node_events {
            "Cluster,TRES,Start,End,ClusterNodes".into()
        } else {
            "Cluster,NodeName,Start,End,State,Reason,User".into()
        }
    });
    let cols = pick_cols(EVENT_COLS, &fmt, |k| match k {
        "timestart" => "start".into(),
        "timeend" => "end".into(),
        "node" => "nodename".into(),
        k => k.into(),
    })?;
    Ok(Show {
        requests: vec![AcctRequest::ListEvents(f)],
        render: Box::new(move |resp, fl| {
            let Some(AcctResponse::Events(events)) = resp.first() else {
                return Err("unexpected answer from slurmdbd".into());
            };
            let now = common::now();
            let rows: Vec<Vec<String>> = events
                .iter()
                .map(|e| {
                    cols.iter()
                        .map(|(k, _)| match k.as_str() {
                            "cluster" => e.cluster.clone(),
                            "nodename" => e.node.clone(),
                            "start" => slurm_common::timefmt::format_timestamp(e.time_start),
                            "end" => e
                                .time_end
                                .map(slurm_common::timefmt::format_timestamp)
                                .unwrap_or_else(|| "Unknown".into()),
                            "duration" => {
                                format_duration_hms(e.time_end.unwrap_or(now) - e.time_start)
                            }
                            "state" if e.is_cluster() => String::new(),
                            "state" => slurm_proto::acct::event_short_state(&e.state),
                            "reason" | "user" if e.is_cluster() => String::new(),
                            "reason" => e.reason.clone().unwrap_or_default(),
                            "user" => e
                                .reason_uid
                                .map(|u| {
                                    format!("{}({u})", slurm_common::users::user_name_or_id(u))
                                })
                                .unwrap_or_default(),
                            "event" if e.is_cluster() => "Cluster".into(),
                            "event" => "Node".into(),
                            "cpus" => e.cpus.to_string(),
                            // A cluster event keeps the cluster's TRES.
                            "tres" if e.is_cluster() => e.reason.clone().unwrap_or_default(),
                            "tres" => format!("cpu={}", e.cpus),
                            _ => String::new(),
                        })
                        .collect()
                })
                .collect();
            Ok(cols_table(EVENT_COLS, &cols, &rows, fl))
        }),
    })
}

/// `sacctmgr show reservation`'s columns: key, title, width (negative:
/// left-aligned).
const RESV_COLS: &[(&str, &str, i64)] = &[
    ("cluster", "Cluster", 10),
    ("flags", "Flags", 20),
    ("name", "Name", 10),
    ("nodenames", "NodeName", -15),
    ("end", "TimeEnd", 19),
    ("start", "TimeStart", 19),
    ("tres", "TRES", 20),
    ("unusedwall", "UnusedWall", 10),
];

/// `sacctmgr show reservation [where] [Clusters=] [Names=] [Nodes=]
/// [Start=] [End=] [format=]`: the reservations' records slurmdbd keeps
/// (one per time each held the same resources). With no condition, those
/// in effect since midnight yesterday; a `Start=` without `End=` ends now
/// (as Slurm's query).
fn show_resvs(specs: &[Spec], now: i64) -> Res<Show> {
    use slurm_common::timefmt::parse_timestamp;
    let mut f = ResvFilter {
        with_usage: true,
        ..Default::default()
    };
    let mut format: Option<String> = None;
    let time = |k: &str, v: &str| {
        parse_timestamp(v, now).map_err(|e| format!(" Invalid time '{v}' for {k}: {e}"))
    };
    for s in specs {
        match s {
            Spec::Word(w) => return Err(format!(" Unknown condition: {w}")),
            Spec::Pair(k, _, v) => match k.as_str() {
                "format" => format = Some(v.clone()),
                "cluster" | "clusters" => f.clusters.extend(lower_list(v)),
                "end" => f.end = Some(time("End", v)?),
                "start" => f.start = Some(time("Start", v)?),
                "name" | "names" => f.names.extend(list(v)),
                "node" | "nodes" | "nodename" | "nodenames" => f.nodes.extend(
                    slurm_common::hostlist::expand(v)
                        .map_err(|e| format!(" Invalid node list '{v}': {e}"))?,
                ),
                "id" | "ids" => {
                    return Err(
                        " Reservations have no numeric ids here: select them by Names=".into(),
                    )
                }
                other => return Err(format!(" Unknown condition: {other}")),
            },
        }
    }
    if specs.is_empty() {
        f.start = Some(crate::sreport::midnight(crate::sreport::midnight(now) - 1));
    }
    if f.start.is_some() && f.end.is_none() {
        f.end = Some(now);
    }
    let fmt = format.unwrap_or_else(|| "Cluster,Name%15,TRES%30,TimeStart,TimeEnd,Unused".into());
    let cols = pick_cols(RESV_COLS, &fmt, |k| match k {
        "timestart" => "start".into(),
        "timeend" => "end".into(),
        "node" | "nodes" => "nodenames".into(),
        k => k.into(),
    })?;
    Ok(Show {
        requests: vec![AcctRequest::ListResvs(f)],
        render: Box::new(move |resp, fl| {
            let Some(AcctResponse::Resvs(resvs)) = resp.first() else {
                return Err("unexpected answer from slurmdbd".into());
            };
            let rows: Vec<Vec<String>> = resvs
                .iter()
                .map(|r| {
                    cols.iter()
                        .map(|(k, width)| match k.as_str() {
                            "cluster" => r.cluster.clone(),
                            "flags" => r.flags.clone(),
                            "name" => r.name.clone(),
                            "nodenames" => r.nodes.clone(),
                            "start" => slurm_common::timefmt::format_timestamp(r.time_start),
                            "end" => slurm_common::timefmt::format_timestamp(r.time_end),
                            "tres" => format!("cpu={}", r.cpus),
                            // Slurm's is a double, printed as C's `%f`.
                            "unusedwall" => crate::fmt::acct_double(
                                r.unused_wall,
                                width.unsigned_abs() as usize,
                                fl.parsable.is_some(),
                            ),
                            _ => String::new(),
                        })
                        .collect()
                })
                .collect();
            Ok(cols_table(RESV_COLS, &cols, &rows, fl))
        }),
    })
}

/// Jobs slurmdbd holds as pending, running or suspended that `known` (the
/// controller's jobs, by id and submit time) does not have.
pub fn runaways(db: Vec<JobRow>, known: &std::collections::HashSet<(u32, i64)>) -> Vec<JobRow> {
    db.into_iter()
        .filter(|r| {
            r.job.end_time.is_none()
                && matches!(
                    r.job.state.0,
                    slurm_proto::JobState::Pending
                        | slurm_proto::JobState::Running
                        | slurm_proto::JobState::Suspended
                )
                && !known.contains(&(r.job.job_id, r.job.submit_time))
        })
        .collect()
}

/// `sacctmgr show runawayjobs [cluster=NAME]`: jobs the database holds as
/// pending or running that this cluster's controller no longer knows; with
/// a yes (or `-i`), slurmdbd ends them. Operators and administrators only
/// (the controller shows them every job).
fn runaway_jobs(conf: &slurm_common::conf::SlurmConf, specs: &Specs, f: &Flags) -> Res<i32> {
    let mut cluster = conf.cluster_name.to_ascii_lowercase();
    for s in specs.filter.iter().chain(&specs.set) {
        match s {
            Spec::Pair(k, _, v) if k == "cluster" || k == "clusters" => {
                cluster = v.to_ascii_lowercase()
            }
            Spec::Pair(k, ..) => return Err(format!(" Unknown condition: {k}")),
            Spec::Word(w) => return Err(format!(" Unknown condition: {w}")),
        }
    }
    if cluster != conf.cluster_name.to_ascii_lowercase() {
        return Err(format!(
            " Runaway jobs are looked for on this cluster only ({}): its controller is the one asked",
            conf.cluster_name
        ));
    }
    let ask = |r: AcctRequest| common::dbd_ask(conf, r);
    let uid = unsafe { libc::getuid() };
    let me = slurm_common::users::user_name_or_id(uid);
    // Under PrivateData=jobs the controller may show an operator only their
    // own jobs (if it has not learned the operator's level): everyone
    // else's would look like runaways. Only root and SlurmUser see all.
    if uid != 0 && me != conf.slurm_user && conf.private_data().jobs {
        return Err(
            " With PrivateData=jobs only root or SlurmUser may look for runaway jobs (the controller shows others only some jobs)"
                .into(),
        );
    }
    if uid != 0 && me != conf.slurm_user {
        let level = match ask(AcctRequest::ListUsers(UserFilter {
            names: vec![me.clone()],
            ..Default::default()
        }))? {
            AcctResponse::Users(u) => u.first().map(|u| u.admin_level).unwrap_or_default(),
            _ => AdminLevel::None,
        };
        if level < AdminLevel::Operator {
            return Err(format!(
                " User '{me}' may not look for runaway jobs (AdminLevel=Operator or Administrator is needed)"
            ));
        }
    }
    let AcctResponse::Jobs(db) = ask(AcctRequest::GetJobs(JobQuery {
        clusters: vec![cluster.clone()],
        states: vec![
            slurm_proto::JobState::Pending,
            slurm_proto::JobState::Running,
            slurm_proto::JobState::Suspended,
        ],
        // Every record: an earlier run left open is the runaway.
        duplicates: true,
        ..Default::default()
    }))?
    else {
        return Err("unexpected answer from slurmdbd".into());
    };
    // Without the controller's answer nothing can be called a runaway.
    let known: std::collections::HashSet<(u32, i64)> =
        match common::call(&common::client(conf), slurm_proto::RequestBody::GetJobs) {
            Ok(slurm_proto::Response::Jobs { jobs, .. }) => {
                jobs.iter().map(|j| (j.job_id, j.submit_time)).collect()
            }
            Ok(_) => return Err("unexpected answer from slurmctld".into()),
            Err(e) => return Err(format!(" Cannot ask the controller for its jobs: {e}")),
        };
    let found = runaways(db, &known);
    if found.is_empty() {
        println!("Runaway Jobs: No runaway jobs found on cluster {cluster}");
        return Ok(0);
    }
    println!(
        "NOTE: Runaway jobs are jobs that don't exist in the controller but have a start time and no end time in the database"
    );
    let cols = [
        ("ID", 12),
        ("Name", 10),
        ("Partition", 10),
        ("Cluster", 10),
        ("State", 10),
        ("TimeSubmit", 19),
        ("TimeStart", 19),
        ("TimeEnd", 19),
    ];
    let ts = slurm_common::timefmt::format_timestamp;
    let rows: Vec<Vec<String>> = found
        .iter()
        .map(|r| {
            let j = &r.job;
            vec![
                j.job_id.to_string(),
                j.name.clone(),
                j.partition.clone(),
                r.cluster.clone(),
                j.state.0.name().to_string(),
                ts(j.submit_time),
                j.start_time.map(ts).unwrap_or_else(|| "Unknown".into()),
                "Unknown".into(),
            ]
        })
        .collect();
    print!(
        "{}",
        crate::fmt::acct_table(&cols, &rows, f.parsable, f.header)
    );
    println!(
        "\nWould you like to fix these runaway jobs?\n(This will set the end time for each job to the latest out of the start, eligible, or submit times, and set the state to completed.\nOnce corrected, this will trigger the rollup to reroll usage from before the earliest submit time of all the runaway jobs.)\n"
    );
    if f.readonly {
        println!(" Not fixed: sacctmgr runs read-only (-r)");
        return Ok(0);
    }
    if !f.immediate && !confirm() {
        println!(" Changes Discarded");
        return Ok(0);
    }
    let jobs = found
        .iter()
        .map(|r| RunawayJob {
            job_id: r.job.job_id,
            submit_time: r.job.submit_time,
        })
        .collect();
    ask(AcctRequest::FixRunaway(FixRunaway { cluster, jobs }))?;
    Ok(0)
}

/// Slurm's message type number for slurmdbd's request names (0 for ours
/// that Slurm has no number for).
fn dbd_msg_id(name: &str) -> u32 {
    match name {
        "DBD_ADD_ACCOUNTS" => 1402,
        "DBD_ADD_CLUSTERS" => 1405,
        "DBD_ADD_USERS" => 1406,
        "DBD_GET_ACCOUNTS" => 1409,
        "DBD_GET_ASSOCS" => 1410,
        "DBD_GET_ASSOC_USAGE" => 1411,
        "DBD_GET_CLUSTERS" => 1412,
        "DBD_GET_USERS" => 1415,
        "DBD_MODIFY_ACCOUNTS" => 1428,
        "DBD_MODIFY_ASSOCS" => 1429,
        "DBD_MODIFY_USERS" => 1431,
        "DBD_REMOVE_ACCOUNTS" => 1435,
        "DBD_REMOVE_ASSOCS" => 1437,
        "DBD_REMOVE_CLUSTERS" => 1438,
        "DBD_REMOVE_USERS" => 1439,
        "DBD_ROLL_USAGE" => 1440,
        "DBD_GET_JOBS_COND" => 1444,
        "DBD_ADD_QOS" => 1447,
        "DBD_GET_QOS" => 1448,
        "DBD_REMOVE_QOS" => 1450,
        "DBD_MODIFY_QOS" => 1451,
        "DBD_GET_STATS" => 1489,
        "DBD_CLEAR_STATS" => 1491,
        "DBD_SHUTDOWN" => 1492,
        _ => 0,
    }
}

const PROBLEM_COLS: &[Col] = &[
    ("cluster", "Cluster", 10),
    ("account", "Account", 10),
    ("user", "User", 10),
    ("problem", "Problem", 40),
];

/// One finding of `sacctmgr show problem`: (cluster, account, user, what).
type Problem = (String, String, String, &'static str);

/// What `sacctmgr show problem` reports, in Slurm's order: accounts with no
/// association, account associations with no user directly under them
/// (by cluster, then account; with `partitions`, no user association in
/// them), users with no uid on this host or no association. `clusters`
/// empty: every cluster. `accounts` and `users` are those asked about;
/// `assocs` are all of the clusters'.
fn problems(
    accounts: &[AccountRec],
    users: &[UserRec],
    assocs: &[AssocRec],
    clusters: &[String],
    partitions: &[String],
    has_uid: &dyn Fn(&str) -> bool,
) -> Vec<Problem> {
    let on = |a: &&AssocRec| clusters.is_empty() || clusters.contains(&a.cluster);
    let asked: Vec<&str> = accounts.iter().map(|a| a.name.as_str()).collect();
    let mut out = Vec::new();
    for a in accounts {
        if !assocs.iter().filter(on).any(|x| x.account == a.name) {
            out.push((
                String::new(),
                a.name.clone(),
                String::new(),
                "Account has no Associations",
            ));
        }
    }
    let mut lonely: Vec<(&str, &str)> = assocs
        .iter()
        .filter(on)
        .filter(|a| a.user.is_empty() && asked.contains(&a.account.as_str()))
        .filter(|a| {
            !assocs.iter().any(|u| {
                !u.user.is_empty()
                    && u.cluster == a.cluster
                    && u.account == a.account
                    && (partitions.is_empty() || partitions.contains(&u.partition))
            })
        })
        .map(|a| (a.cluster.as_str(), a.account.as_str()))
        .collect();
    lonely.sort();
    lonely.dedup();
    for (c, a) in lonely {
        out.push((c.into(), a.into(), String::new(), "Account has no users"));
    }
    for u in users {
        if !has_uid(&u.name) {
            out.push((
                String::new(),
                String::new(),
                u.name.clone(),
                "User does not have a uid",
            ));
        } else if !assocs.iter().filter(on).any(|x| x.user == u.name) {
            out.push((
                String::new(),
                String::new(),
                u.name.clone(),
                "User has no Associations",
            ));
        }
    }
    out
}

/// `sacctmgr show problem [Accounts=] [Clusters=] [Users=] [Partitions=]
/// [Format=]`.
fn show_problems(format: Option<&str>, specs: &[Spec]) -> Res<Show> {
    let (mut accounts, mut clusters, mut users, mut partitions) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for s in specs {
        match s {
            Spec::Pair(k, _, v) => match k.as_str() {
                "account" | "accounts" | "acct" | "accts" => accounts.extend(lower_list(v)),
                "cluster" | "clusters" => clusters.extend(lower_list(v)),
                "user" | "users" => users.extend(lower_list(v)),
                "partition" | "partitions" => partitions.extend(lower_list(v)),
                other => return Err(format!(" Unknown condition: {other}")),
            },
            Spec::Word(w) => return Err(format!(" Unknown condition: {w}")),
        }
    }
    let cols = pick(format, PROBLEM_COLS, PROBLEM_COLS)?;
    let requests = vec![
        AcctRequest::ListAccounts(AccountFilter {
            names: accounts.clone(),
            ..Default::default()
        }),
        AcctRequest::ListUsers(UserFilter {
            names: users.clone(),
            ..Default::default()
        }),
        AcctRequest::ListAssocs(AssocFilter {
            clusters: clusters.clone(),
            ..Default::default()
        }),
    ];
    Ok(Show {
        requests,
        render: Box::new(move |resp, f| {
            let (
                Some(AcctResponse::Accounts(a)),
                Some(AcctResponse::Users(u)),
                Some(AcctResponse::Assocs(s)),
            ) = (resp.first(), resp.get(1), resp.get(2))
            else {
                return Err("unexpected answer from slurmdbd".into());
            };
            let has_uid = |n: &str| slurm_common::users::user_by_name(n).is_some();
            let found = problems(a, u, s, &clusters, &partitions, &has_uid);
            let rows: Vec<Vec<String>> = found
                .into_iter()
                .map(|(c, a, u, p)| {
                    cols.iter()
                        .map(|(k, ..)| match k.as_str() {
                            "cluster" => c.clone(),
                            "account" => a.clone(),
                            "user" => u.clone(),
                            _ => p.to_string(),
                        })
                        .collect()
                })
                .collect();
            Ok(table(&cols, &rows, f))
        }),
    })
}

/// `sacctmgr show stats [ave_time|total_time]`: slurmdbd's rollups and
/// requests since it started, in microseconds.
fn show_stats(specs: &[Spec]) -> Res<Show> {
    let mut sort = "count";
    for s in specs {
        match s {
            Spec::Word(w) if w.to_ascii_lowercase().starts_with("av") => sort = "ave",
            Spec::Word(w) if w.to_ascii_lowercase().starts_with("to") => sort = "total",
            Spec::Word(w) => return Err(unknown(w)),
            Spec::Pair(k, ..) => return Err(unknown(k)),
        }
    }
    Ok(Show {
        requests: vec![AcctRequest::Stats],
        render: Box::new(move |resp, _| match resp.first() {
            Some(AcctResponse::Stats(st)) => Ok(stats_text(st, common::now(), sort)),
            _ => Err("unexpected answer from slurmdbd".into()),
        }),
    })
}

fn stats_text(st: &DbdStats, now: i64, sort: &str) -> String {
    let when = crate::sdiag::when;
    let stars = "*******************************************************************\n";
    let mut s = String::from(stars);
    s.push_str(&format!("sacctmgr show stats output at {}\n", when(now)));
    s.push_str(&format!(
        "Data since                    {}\n",
        when(st.time_start)
    ));
    s.push_str("All statistics are in microseconds\n");
    s.push_str(stars);
    let levels = [
        ("Hour", &st.hourly),
        ("Day", &st.daily),
        ("Month", &st.monthly),
    ];
    if levels.iter().any(|(_, l)| l.total_us > 0) {
        s.push_str("\nRollup statistics (all clusters)\n");
    }
    for (name, l) in levels.iter().filter(|(_, l)| l.total_us > 0) {
        s.push_str(&format!("{name:<5} last ran {}\n", when(l.last_run)));
        s.push_str(&format!("\tLast cycle:   {}\n", l.last_us));
        s.push_str(&format!("\tMax cycle:    {}\n", l.max_us));
        s.push_str(&format!("\tTotal time:   {}\n", l.total_us));
        s.push_str(&format!("\tTotal cycles: {}\n", l.count));
        s.push_str(&format!(
            "\tMean cycle:   {}\n",
            l.total_us / l.count.max(1)
        ));
    }
    fn ordered<'a>(
        v: &'a [RpcCount],
        id: &dyn Fn(&str) -> u32,
        sort: &str,
    ) -> Vec<(u32, &'a RpcCount)> {
        let mut v: Vec<(u32, &RpcCount)> = v.iter().map(|r| (id(&r.name), r)).collect();
        let ave = |r: &RpcCount| r.total_us / r.count.max(1);
        v.sort_by(|(ia, a), (ib, b)| {
            let primary = match sort {
                "ave" => ave(b).cmp(&ave(a)),
                "total" => b.total_us.cmp(&a.total_us),
                _ => b.count.cmp(&a.count).then(b.total_us.cmp(&a.total_us)),
            };
            primary.then(ia.cmp(ib))
        });
        v
    }
    let line = |r: &RpcCount| {
        format!(
            " count:{:<6} ave_time:{:<6} total_time:{}\n",
            r.count,
            r.total_us / r.count.max(1),
            r.total_us
        )
    };
    s.push_str("\nRemote Procedure Call statistics by message type\n");
    for (id, r) in ordered(&st.rpcs, &dbd_msg_id, sort) {
        s.push_str(&format!("\t{:<25}({id:>5}){}", r.name, line(r)));
    }
    s.push_str("\nRemote Procedure Call statistics by user\n");
    let uid = |n: &str| {
        slurm_common::users::user_by_name(n)
            .map(|u| u.uid)
            .or_else(|| n.parse().ok())
            .unwrap_or(0)
    };
    for (id, r) in ordered(&st.users, &uid, sort) {
        s.push_str(&format!("\t{:<20}({id:>10}){}", r.name, line(r)));
    }
    s
}

/// How deep an association sits in its cluster's account tree.
fn tree_depth(a: &AssocRec, all: &[AssocRec]) -> usize {
    let mut depth = if a.is_user() { 1 } else { 0 };
    let mut parent = if a.is_user() {
        Some(a.account.clone())
    } else {
        a.parent.clone()
    };
    if a.is_user() {
        // The user's account itself is one level above it.
        parent = all
            .iter()
            .find(|x| !x.is_user() && x.cluster == a.cluster && x.account == a.account)
            .and_then(|x| x.parent.clone());
    }
    while let Some(p) = parent {
        depth += 1;
        parent = all
            .iter()
            .find(|x| !x.is_user() && x.cluster == a.cluster && x.account == p)
            .and_then(|x| x.parent.clone());
        if depth > 64 {
            break;
        }
    }
    depth
}

// ------------------------------------------------------------------- main

fn entity_name(w: &str) -> Option<&'static str> {
    let w = w.to_ascii_lowercase();
    ENTITIES
        .iter()
        .find(|(names, _)| names.contains(&w.as_str()))
        .map(|(_, e)| *e)
}

const USAGE: &str = "Usage: sacctmgr [-i] [-n] [-p|-P] [-Q] <command> <entity> [specs]\n\
  commands: add|create, modify|update, delete|remove, show|list\n\
  entities: cluster, account, user, association, qos, coordinator (add, delete); for show also event, problem, configuration, reservation, transaction, tres, stats, runawayjobs\n\
  also: dump <cluster> [file=FILE], load [file=]FILE [cluster=NAME] [clean], ping, version, shutdown, clear stats\n";

/// `sacctmgr ping`: Slurm's line for slurmdbd, exit 1 when it is down.
fn ping(conf: &slurm_common::conf::SlurmConf) -> i32 {
    let host = conf.dbd_name().to_string();
    match common::dbd_call(conf, AcctRequest::Ping) {
        Ok(AcctResponse::Pong { .. }) => {
            println!("slurmdbd(primary) at {host} is UP");
            0
        }
        _ => {
            println!("slurmdbd(primary) at {host} is DOWN");
            1
        }
    }
}

/// `sacctmgr show configuration`: this host's accounting settings from
/// slurm.conf, then slurmdbd.conf's as slurmdbd reports them (Slurm's
/// layout).
fn show_configuration(conf: &slurm_common::conf::SlurmConf, f: &Flags) -> i32 {
    if f.json {
        eprintln!("sacctmgr: error: --json/--yaml is not supported for show configuration yet");
        return 1;
    }
    let dbd = match common::dbd_ask(conf, AcctRequest::GetConfig) {
        Ok(AcctResponse::Config(pairs)) => pairs,
        Ok(_) => {
            eprintln!(" sacctmgr: error: unexpected answer from slurmdbd");
            return 1;
        }
        Err(e) => {
            eprintln!(" sacctmgr: error: Unable to query slurmdbd.conf: {e}");
            return 1;
        }
    };
    print!("{}", configuration_text(conf, &dbd, common::now()));
    0
}

fn configuration_text(
    conf: &slurm_common::conf::SlurmConf,
    dbd: &[(String, String)],
    now: i64,
) -> String {
    let val = |k: &str| conf.get(k).unwrap_or("(null)").to_string();
    let slurm_uid = slurm_common::users::user_by_name(&conf.slurm_user).map_or(0, |u| u.uid);
    let mut s = format!(
        "Configuration data as of {}\n",
        slurm_common::timefmt::format_timestamp(now)
    );
    let lines = [
        (
            "AccountingStorageBackupHost  ",
            val("AccountingStorageBackupHost"),
        ),
        ("AccountingStorageHost  ", conf.dbd_name().to_string()),
        (
            "AccountingStorageParameters ",
            val("AccountingStorageParameters"),
        ),
        ("AccountingStoragePass  ", val("AccountingStoragePass")),
        (
            "AccountingStoragePort  ",
            conf.accounting_storage_port.to_string(),
        ),
        (
            "AccountingStorageType  ",
            conf.accounting_storage_type.clone(),
        ),
        ("AuthType               ", conf.auth_type.clone()),
        (
            "MessageTimeout         ",
            format!("{} sec", conf.message_timeout),
        ),
        ("PluginDir              ", val("PluginDir")),
        ("PrivateData            ", conf.private_data().names()),
        (
            "SlurmUserId            ",
            format!("{}({slurm_uid})", conf.slurm_user),
        ),
        ("SLURM_CONF             ", conf.path.display().to_string()),
        (
            "SLURM_VERSION          ",
            slurm_proto::SLURM_VERSION.to_string(),
        ),
        (
            "TCPTimeout             ",
            format!("{} sec", conf.get("TCPTimeout").unwrap_or("2")),
        ),
        (
            "TrackWCKey             ",
            if conf
                .get("TrackWCKey")
                .is_some_and(|v| v.eq_ignore_ascii_case("yes"))
            {
                "Yes".into()
            } else {
                "No".into()
            },
        ),
    ];
    for (k, v) in lines {
        s.push_str(&format!("{k}= {v}\n"));
    }
    s.push_str("\nSlurmDBD configuration:\n");
    for (k, v) in dbd {
        s.push_str(&format!("{k:<22} = {v}\n"));
    }
    s
}

/// `sacctmgr shutdown`: slurmdbd stops (super users only).
fn shutdown(conf: &slurm_common::conf::SlurmConf) -> i32 {
    let problem = |e: &dyn std::fmt::Display| {
        eprintln!(" Problem shutting down server: {e}");
        1
    };
    match common::dbd_call(conf, AcctRequest::Shutdown) {
        Ok(AcctResponse::Changed(_)) => 0,
        Ok(AcctResponse::Error(e)) => problem(&e),
        Ok(_) => problem(&"unexpected answer from slurmdbd"),
        Err(e) => problem(&e),
    }
}

/// `sacctmgr clear stats`: slurmdbd forgets what `show stats` counted
/// (root, SlurmUser and AdminLevel=Administrator).
fn clear_stats(conf: &slurm_common::conf::SlurmConf) -> i32 {
    match common::dbd_call(conf, AcctRequest::ClearStats) {
        Ok(AcctResponse::Changed(_)) => 0,
        Ok(AcctResponse::Error(e)) => {
            eprintln!("sacctmgr: error: {e}");
            1
        }
        Ok(_) => {
            eprintln!("sacctmgr: error: unexpected answer from slurmdbd");
            1
        }
        Err(e) => {
            eprintln!("sacctmgr: error: {e}");
            1
        }
    }
}

pub(crate) fn confirm() -> bool {
    print!(" Would you like to commit changes? (You have 30 seconds to decide)\n(N/y): ");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    if !std::io::stdin().is_terminal() {
        println!();
    }
    matches!(line.trim(), "y" | "Y" | "yes")
}

fn run_change(conf: &slurm_common::conf::SlurmConf, c: Change, f: &Flags) -> i32 {
    if !f.quiet && !c.preview.is_empty() {
        print!("{}", c.preview);
    }
    if !f.immediate && !confirm() {
        println!(" Changes Discarded");
        return 0;
    }
    match common::dbd_call(conf, c.request) {
        Ok(AcctResponse::Changed(v)) => {
            if v.is_empty() {
                if !f.quiet {
                    println!(" Nothing new added.");
                }
                return 0;
            }
            if !f.quiet {
                if c.heading == NO_LIST {
                    return 0;
                }
                if !c.heading.is_empty() {
                    println!("{}", c.heading);
                }
                for n in v {
                    println!("  {n}");
                }
            }
            0
        }
        Ok(AcctResponse::Error(e)) => {
            eprintln!(" sacctmgr: error: {e}");
            1
        }
        Ok(_) => {
            eprintln!(" sacctmgr: error: unexpected answer from slurmdbd");
            1
        }
        Err(e) => {
            eprintln!("sacctmgr: error: {e}");
            1
        }
    }
}

/// sacctmgr's options (the parser's table, also read by [`crate::compat`]).
pub(crate) const OPTS: &[crate::fmt::Opt] = {
    use crate::fmt::{Arg::*, Opt};
    &[
        Opt::new(Some('s'), "associations", No),
        Opt::new(Some('h'), "help", No),
        Opt::new(Some('i'), "immediate", No),
        Opt::new(None, "json", Optional),
        Opt::new(Some('n'), "noheader", No),
        Opt::new(Some('p'), "parsable", No),
        Opt::new(Some('P'), "parsable2", No),
        Opt::new(Some('Q'), "quiet", No),
        Opt::new(Some('r'), "readonly", No),
        Opt::new(None, "usage", No),
        Opt::new(Some('v'), "verbose", No),
        Opt::new(Some('V'), "version", No),
        Opt::new(None, "yaml", Optional),
    ]
};

pub(crate) const COMPAT_NOTES: &[(&str, crate::compat::Support)] = &[];

/// The commands (with their aliases) and what they become.
const COMMANDS: &[(&[&str], &str)] = &[
    (&["add", "create"], "add"),
    (&["modify", "update"], "modify"),
    (&["delete", "remove"], "delete"),
    (&["show", "list"], "show"),
    (&["dump"], "dump"),
    (&["load"], "load"),
    (&["ping"], "ping"),
    (&["version"], "version"),
    (&["shutdown"], "shutdown"),
    (&["clear"], "clear"),
];

/// Commands that take no entity.
const NO_ENTITY: &[&str] = &["dump", "load", "ping", "version", "shutdown"];

/// The entities, with their aliases.
const ENTITIES: &[(&[&str], &str)] = &[
    (&["cluster", "clusters"], "cluster"),
    (&["account", "accounts"], "account"),
    (&["user", "users"], "user"),
    (
        &["association", "associations", "assoc", "assocs"],
        "association",
    ),
    (&["qos"], "qos"),
    (&["coordinator", "coordinators", "coord"], "coordinator"),
    (&["tres"], "tres"),
    (&["stats", "statistics"], "stats"),
    (&["event", "events"], "event"),
    (&["problem", "problems"], "problem"),
    (&["transaction", "transactions", "txn"], "transaction"),
    (&["reservation", "reservations", "resv"], "reservation"),
    (&["configuration", "config"], "configuration"),
    (
        &["runawayjobs", "runawayjob", "runaway", "runaways"],
        "runawayjobs",
    ),
];

/// The commands and entities sacctmgr knows (`cmd add`, `entity user`).
pub(crate) fn compat_words() -> Vec<String> {
    let mut w: Vec<String> = COMMANDS
        .iter()
        .flat_map(|(names, _)| names.iter().map(|n| format!("cmd {n}")))
        .collect();
    w.push("cmd help".into());
    // Interactive mode's own words.
    for k in ["exit", "quit", "quiet", "verbose", "readonly", "!!"] {
        w.push(format!("cmd {k}"));
    }
    w.extend(
        ENTITIES
            .iter()
            .flat_map(|(names, _)| names.iter().map(|n| format!("entity {n}"))),
    );
    w
}

/// Parse flags and the command; `Err` is (message, exit code).
pub fn parse_command(args: &[String]) -> Result<(Flags, String, String, Specs), (String, i32)> {
    let (f, readonly, words) = parse_flags(args)?;
    parse_words(f, readonly, &words)
}

/// The options (anywhere before the command, as getopt permutes them),
/// whether `-r` was given, and the command's words.
type Parsed = (Flags, bool, Vec<String>);

/// Options and words; `Err` is (message, exit code).
pub fn parse_flags(args: &[String]) -> Result<Parsed, (String, i32)> {
    parse_flags_env(args, &|k| std::env::var(k).ok())
}

/// [`parse_flags`] with the environment as `env` gives it (`SLURM_JSON`,
/// `SLURM_YAML`).
pub fn parse_flags_env(
    args: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Parsed, (String, i32)> {
    let mut f = Flags {
        header: true,
        json: crate::jsonout::env_wants(env).map_err(|e| (format!("sacctmgr: error: {e}"), 1))?,
        ..Default::default()
    };
    // Options may come anywhere (as getopt permutes them); after the
    // command, a word that is not one of them is a spec (`MaxWall=-1`...).
    let mut readonly = false;
    let mut parsed = Vec::new();
    let mut words = Vec::new();
    for a in args {
        if !a.starts_with('-') || a == "-" {
            words.push(a.clone());
            continue;
        }
        match crate::fmt::getopt("sacctmgr", std::slice::from_ref(a), OPTS) {
            Ok(p) => parsed.extend(p),
            Err(_) if !words.is_empty() => words.push(a.clone()),
            Err(e) => return Err((format!("{e}\n{USAGE}"), 1)),
        }
    }
    for p in parsed {
        let crate::fmt::Parsed::Opt(name, v) = p else {
            continue;
        };
        match name {
            "immediate" => f.immediate = true,
            "associations" => f.with_assoc = true,
            "noheader" => f.header = false,
            "parsable" => f.parsable = Some(true),
            "parsable2" => f.parsable = Some(false),
            "quiet" => f.quiet = true,
            "json" | "yaml" => {
                crate::jsonout::check_parser(v.as_deref())
                    .map_err(|e| (format!("sacctmgr: error: {e}"), 1))?;
                f.json = true;
            }
            "version" => return Err((format!("slurm {}", slurm_proto::SLURM_VERSION), 0)),
            "help" => {
                let commands = USAGE.split_once('\n').map_or("", |x| x.1);
                let text = format!("{}\n{}", crate::help::help("sacctmgr"), commands);
                return Err((text.trim_end().to_string(), 0));
            }
            "usage" => return Err((crate::help::usage("sacctmgr").trim_end().to_string(), 0)),
            "readonly" => {
                readonly = true;
                f.readonly = true;
            }
            // Nothing more to say than what every command prints.
            _ => {}
        }
    }
    Ok((f, readonly, words))
}

/// A command's words (after the options); `Err` is (message, exit code).
pub fn parse_words(
    f: Flags,
    readonly: bool,
    words: &[String],
) -> Result<(Flags, String, String, Specs), (String, i32)> {
    if words
        .first()
        .is_some_and(|w| w.eq_ignore_ascii_case("help"))
    {
        return Err((USAGE.trim_end().to_string(), 0));
    }
    let Some(first) = words.first().map(|w| w.to_ascii_lowercase()) else {
        return Err((USAGE.trim_end().to_string(), 1));
    };
    let Some(cmd) = COMMANDS
        .iter()
        .find(|(names, _)| names.contains(&first.as_str()))
        .map(|(_, c)| *c)
    else {
        return Err((format!(" Unknown command: {first}"), 1));
    };
    if readonly && !matches!(cmd, "show" | "dump" | "ping" | "version") {
        return Err((
            format!("sacctmgr: error: {first}: not allowed in readonly mode (-r)"),
            1,
        ));
    }
    // `clear stats` (Slurm's only thing to clear; abbreviations too).
    if cmd == "clear" {
        let stats = words
            .get(1)
            .is_some_and(|w| !w.is_empty() && "stats".starts_with(w.to_ascii_lowercase().as_str()));
        if !stats || words.len() > 2 {
            return Err((
                "No valid entity in list command\nInput line must include \"Stats\"".into(),
                1,
            ));
        }
        return Ok((f, cmd.to_string(), "stats".into(), parse_specs(&[])));
    }
    if NO_ENTITY.contains(&cmd) {
        if matches!(cmd, "ping" | "version" | "shutdown") && words.len() > 1 {
            return Err((format!("too many arguments for {first} keyword"), 1));
        }
        return Ok((f, cmd.to_string(), String::new(), parse_specs(&words[1..])));
    }
    if words.len() < 2 {
        return Err((USAGE.trim_end().to_string(), 1));
    }
    let entity =
        entity_name(&words[1]).ok_or_else(|| (format!(" Unknown entity: {}", words[1]), 1))?;
    Ok((
        f,
        cmd.to_string(),
        entity.to_string(),
        parse_specs(&words[2..]),
    ))
}

/// `show --json`: the first answer as slurmrestd's `slurmdb` body, with
/// the associations and users answered after it.
fn json_fields(answers: &[AcctResponse]) -> Option<serde_json::Map<String, serde_json::Value>> {
    use slurm_openapi::dbjson;
    let assocs: &[AssocRec] = match answers.get(1) {
        Some(AcctResponse::Assocs(a)) => a,
        _ => &[],
    };
    let users: &[UserRec] = match answers.get(2) {
        Some(AcctResponse::Users(u)) => u,
        _ => &[],
    };
    let of = |pred: &dyn Fn(&AssocRec) -> bool| -> Vec<&AssocRec> {
        assocs.iter().filter(|a| pred(a)).collect()
    };
    let (key, list): (&str, Vec<serde_json::Value>) = match answers.first()? {
        AcctResponse::Accounts(v) => (
            "accounts",
            v.iter()
                .map(|a| dbjson::account(a, &of(&|x| x.account == a.name && x.user.is_empty())))
                .collect(),
        ),
        AcctResponse::Users(v) => (
            "users",
            v.iter()
                .map(|u| dbjson::user(u, &of(&|x| x.user == u.name)))
                .collect(),
        ),
        AcctResponse::Assocs(v) => (
            "associations",
            v.iter()
                .map(|a| {
                    let default = users
                        .iter()
                        .any(|u| u.name == a.user && u.default_account == a.account);
                    dbjson::assoc(a, default)
                })
                .collect(),
        ),
        AcctResponse::Qos(v) => ("qos", v.iter().map(dbjson::qos).collect()),
        AcctResponse::Clusters(v) => (
            "clusters",
            v.iter()
                .map(|c| {
                    let root = assocs
                        .iter()
                        .find(|r| r.cluster == c.name && r.account == "root" && r.user.is_empty());
                    dbjson::cluster(c, root)
                })
                .collect(),
        ),
        _ => return None,
    };
    let mut m = serde_json::Map::new();
    m.insert(key.into(), serde_json::Value::Array(list));
    Some(m)
}

/// Prints a parse result that ends the command: help on stdout, errors on
/// stderr; the exit code.
fn say(msg: &str, code: i32) -> i32 {
    if code == 0 {
        println!("{msg}");
    } else {
        eprintln!("{msg}");
    }
    code
}

pub fn main() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (f, readonly, words) = match parse_flags(&args) {
        Ok(x) => x,
        Err((msg, code)) => return say(&msg, code),
    };
    // Without a command, commands are read from stdin (before the
    // configuration is read, as `sacctmgr help` needs none).
    if !words.is_empty() {
        if let Err((msg, code)) = parse_words(f.clone(), readonly, &words) {
            return say(&msg, code);
        }
    }
    let conf = match common::load_conf("sacctmgr") {
        Ok(c) => c,
        Err(code) => return code,
    };
    if words.is_empty() {
        return interactive(&conf, f, readonly);
    }
    match parse_words(f, readonly, &words) {
        Ok((f, cmd, entity, specs)) => execute(&conf, &f, &cmd, &entity, &specs, &args),
        Err((msg, code)) => say(&msg, code),
    }
}

/// Interactive mode: one command per line from stdin (a `sacctmgr: `
/// prompt on a terminal) until `exit`, `quit` or the end of input; `!!`
/// repeats the last command, `quiet`/`verbose`/`readonly` change the
/// session. The exit code is 1 when any command failed.
fn interactive(conf: &slurm_common::conf::SlurmConf, mut f: Flags, mut readonly: bool) -> i32 {
    let mut rc = 0;
    common::read_commands("sacctmgr", |words| {
        let first = words[0].to_ascii_lowercase();
        let session = matches!(
            first.as_str(),
            "exit" | "quit" | "\\q" | "quiet" | "verbose" | "readonly"
        );
        if session {
            if words.len() > 1 {
                eprintln!("too many arguments for keyword:{first}");
                rc = 1;
                return true;
            }
            match first.as_str() {
                "quiet" => f.quiet = true,
                "verbose" => f.quiet = false,
                "readonly" => {
                    readonly = true;
                    f.readonly = true;
                }
                _ => return false,
            }
            return true;
        }
        let code = match parse_words(f.clone(), readonly, &words) {
            Ok((f, cmd, entity, specs)) => execute(conf, &f, &cmd, &entity, &specs, &words),
            Err((msg, code)) => say(&msg, code),
        };
        if code != 0 {
            rc = 1;
        }
        true
    });
    rc
}

/// Runs one parsed command; the exit code.
fn execute(
    conf: &slurm_common::conf::SlurmConf,
    f: &Flags,
    cmd: &str,
    entity: &str,
    specs: &Specs,
    args: &[String],
) -> i32 {
    let change = match cmd {
        "version" => {
            println!("slurm {}", slurm_proto::SLURM_VERSION);
            return 0;
        }
        "ping" => return ping(conf),
        "shutdown" => return shutdown(conf),
        "clear" => return clear_stats(conf),
        "show" if entity == "configuration" => return show_configuration(conf, f),
        "dump" => return crate::sacctmgr_file::dump(conf, specs),
        "load" => return crate::sacctmgr_file::load(conf, specs, f),
        "add" => add(entity, specs),
        "modify" => modify(entity, specs),
        "delete" => delete(entity, specs),
        _ => {
            if entity == "runawayjobs" {
                return runaway_jobs(conf, specs, f).unwrap_or_else(|e| {
                    eprintln!("{e}");
                    1
                });
            }
            if f.json
                && matches!(
                    entity,
                    "event" | "tres" | "stats" | "problem" | "transaction" | "reservation"
                )
            {
                eprintln!("sacctmgr: error: --json/--yaml is not supported for show {entity} yet");
                return 1;
            }
            let sh = match entity {
                "event" => {
                    let all: Vec<Spec> = specs.filter.iter().chain(&specs.set).cloned().collect();
                    show_events(&all, &conf.cluster_name, common::now())
                }
                "transaction" => {
                    let all: Vec<Spec> = specs.filter.iter().chain(&specs.set).cloned().collect();
                    show_txns(&all, common::now())
                }
                "reservation" => {
                    let all: Vec<Spec> = specs.filter.iter().chain(&specs.set).cloned().collect();
                    show_resvs(&all, common::now())
                }
                _ if f.with_assoc && matches!(entity, "account" | "user") => {
                    let mut s = specs.clone();
                    s.filter.push(Spec::Word("withassoc".into()));
                    show(entity, &s)
                }
                _ => show(entity, specs),
            };
            let sh = match sh {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("{e}");
                    return 1;
                }
            };
            let mut requests = sh.requests;
            if f.json {
                // The REST bodies carry associations and default accounts.
                requests.truncate(1);
                requests.push(AcctRequest::ListAssocs(AssocFilter::default()));
                requests.push(AcctRequest::ListUsers(UserFilter::default()));
            }
            let mut answers = Vec::new();
            for r in requests {
                match common::dbd_call(conf, r) {
                    Ok(AcctResponse::Error(e)) => {
                        eprintln!(" sacctmgr: error: {e}");
                        return 1;
                    }
                    Ok(a) => answers.push(a),
                    Err(e) => {
                        eprintln!("sacctmgr: error: {e}");
                        return 1;
                    }
                }
            }
            if f.json {
                return match json_fields(&answers) {
                    Some(fields) => {
                        let name = &conf.cluster_name;
                        print!(
                            "{}",
                            crate::jsonout::fields_text("sacctmgr", args, name, fields)
                        );
                        0
                    }
                    None => {
                        eprintln!("sacctmgr: error: unexpected answer from slurmdbd");
                        1
                    }
                };
            }
            return match (sh.render)(&answers, f) {
                Ok(s) => {
                    print!("{s}");
                    0
                }
                Err(e) => {
                    eprintln!("sacctmgr: error: {e}");
                    1
                }
            };
        }
    };
    match change {
        Ok(c) => run_change(conf, c, f),
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_anywhere_specs_may_start_with_a_dash_and_readonly_reads_only() {
        let cmd =
            |s: &str| parse_command(&s.split_whitespace().map(str::to_string).collect::<Vec<_>>());
        let (f, c, e, _) = cmd("show account --json").unwrap();
        assert!(f.json);
        assert_eq!((c.as_str(), e.as_str()), ("show", "account"));
        let (f, ..) = cmd("--parsable2 -n list users").unwrap();
        assert_eq!((f.parsable, f.header), (Some(false), false));
        // Abbreviations, as getopt takes them.
        assert!(cmd("--imm add account a").unwrap().0.immediate);
        // After the command, an unknown dash word is a spec.
        let (.., specs) = cmd("modify qos normal set -weird=1").unwrap();
        assert!(format!("{specs:?}").contains("-weird"), "{specs:?}");
        // Before it, an error.
        let (msg, code) = cmd("--bogus show qos").unwrap_err();
        assert_eq!(code, 1);
        assert!(
            msg.starts_with("sacctmgr: unrecognized option '--bogus'"),
            "{msg}"
        );
        // -r: reading only.
        assert!(cmd("-r show qos").is_ok());
        let (msg, code) = cmd("-r add account a").unwrap_err();
        assert_eq!(code, 1);
        assert!(msg.contains("readonly"), "{msg}");
    }

    #[test]
    fn stats_and_tres_as_slurm_lays_them_out() {
        let st = DbdStats {
            time_start: 1_000,
            hourly: RollupLevel {
                count: 2,
                last_run: 3_600,
                last_us: 40,
                max_us: 60,
                total_us: 100,
            },
            rpcs: vec![
                RpcCount {
                    name: "DBD_GET_JOBS_COND".into(),
                    count: 3,
                    total_us: 30,
                },
                RpcCount {
                    name: "DBD_GET_QOS".into(),
                    count: 1,
                    total_us: 90,
                },
            ],
            users: vec![RpcCount {
                name: "root".into(),
                count: 4,
                total_us: 120,
            }],
            ..Default::default()
        };
        let text = stats_text(&st, 2_000, "count");
        assert!(
            text.contains("All statistics are in microseconds\n"),
            "{text}"
        );
        assert!(
            text.contains("\tTotal cycles: 2\n\tMean cycle:   50\n"),
            "{text}"
        );
        assert!(!text.contains("Day "), "{text}");
        let by_count = "\tDBD_GET_JOBS_COND        ( 1444) count:3      ave_time:10     total_time:30\n\
                        \tDBD_GET_QOS              ( 1448) count:1      ave_time:90     total_time:90\n";
        assert!(text.contains(by_count), "{text}");
        assert!(
            text.contains(
                "\troot                (         0) count:4      ave_time:30     total_time:120\n"
            ),
            "{text}"
        );
        let by_ave = stats_text(&st, 2_000, "ave");
        assert!(by_ave.find("DBD_GET_QOS").unwrap() < by_ave.find("DBD_GET_JOBS_COND").unwrap());
        assert!(show_stats(&[Spec::Word("bogus".into())]).is_err());

        let sh = show_tres(None, &parse_specs(&["type=gres".to_string()]).filter).unwrap();
        let answer = vec![AcctResponse::Clusters(vec![ClusterRec {
            tres: "cpu=8,mem=100M,node=2,billing=8,gres/gpu=4".into(),
            ..Default::default()
        }])];
        let f = Flags {
            header: false,
            parsable: Some(false),
            ..Default::default()
        };
        assert_eq!((sh.render)(&answer, &f).unwrap(), "gres|gpu|\n");
        let all = show_tres(None, &[]).unwrap();
        let out = (all.render)(&answer, &f).unwrap();
        assert!(out.starts_with("cpu||1\nmem||2\n"), "{out}");
        assert!(show_tres(None, &parse_specs(&["bogus=1".to_string()]).filter).is_err());
    }

    #[test]
    fn events_select_and_lay_out_as_slurm() {
        assert_eq!(slurm_proto::acct::event_short_state("IDLE+DRAIN"), "DRAIN");
        assert_eq!(slurm_proto::acct::event_short_state("MIXED+DRAIN"), "DRNG");
        assert_eq!(slurm_proto::acct::event_short_state("DOWN"), "DOWN");
        assert_eq!(
            slurm_proto::acct::event_short_state("ALLOCATED+FAIL"),
            "FAILG"
        );
        let now = common::now();
        let sh = |s: &str| {
            show_events(
                &parse_specs(&s.split_whitespace().map(str::to_string).collect::<Vec<_>>()).filter,
                "Tux",
                now,
            )
        };
        let filter = |s: &str| match sh(s).unwrap().requests.remove(0) {
            AcctRequest::ListEvents(f) => f,
            other => panic!("{other:?}"),
        };
        let f = filter("");
        assert_eq!(f.clusters, vec!["tux"]);
        assert!(
            f.start.unwrap() < now - 86_400 + 3600 && f.start.unwrap() > now - 2 * 86_400 - 3600
        );
        // States: events open now; All_Time: no window; nodes expanded.
        assert_eq!(filter("States=down").start, Some(now));
        assert_eq!(filter("all_time all_clusters").start, None);
        assert!(filter("all_clusters").clusters.is_empty());
        assert_eq!(filter("Nodes=n[1-3]").nodes, vec!["n1", "n2", "n3"]);
        assert!(filter("CondFlags=open Event=Cluster").open_only);
        assert!(filter("Event=Cluster").cluster_events);
        for (bad, want) in [
            ("Bogus=1", "Unknown condition: bogus"),
            ("Event=Switch", "Unknown event type: 'Switch'"),
            ("CondFlags=closed", "Unknown condition flag closed"),
            ("MinCPUs=many", "Invalid value 'many' for MinCPUs"),
            ("Start=yesterdayish", "Invalid time 'yesterdayish'"),
            (
                "format=NodeName,Bogus",
                "Invalid field requested: \"Bogus\"",
            ),
        ] {
            let e = sh(bad).err().unwrap_or_default();
            assert!(e.contains(want), "{bad}: {e}");
        }
        let events = vec![
            EventRec {
                cluster: "tux".into(),
                time_start: now - 60,
                state: "CLUSTER".into(),
                reason: Some("cpu=8,mem=100M,node=2".into()),
                cpus: 8,
                ..Default::default()
            },
            EventRec {
                cluster: "tux".into(),
                node: "n1".into(),
                time_start: now - 60,
                time_end: Some(now),
                state: "IDLE+DRAIN".into(),
                reason: Some("bad disk".into()),
                reason_uid: Some(0),
                cpus: 4,
            },
        ];
        let f = Flags {
            header: false,
            parsable: Some(false),
            ..Default::default()
        };
        let out = (sh("format=Event,NodeName,State,Reason,TRES,Duration,User")
            .unwrap()
            .render)(&[AcctResponse::Events(events)], &f)
        .unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[0].starts_with("Cluster||||cpu=8,mem=100M,node=2|00:0"),
            "{out}"
        );
        assert!(lines[0].ends_with('|'), "no user on a cluster event: {out}");
        assert_eq!(lines[1], "Node|n1|DRAIN|bad disk|cpu=4|00:01:00|root(0)");
    }

    fn specs(s: &str) -> Specs {
        parse_specs(&s.split_whitespace().map(str::to_string).collect::<Vec<_>>())
    }

    #[test]
    fn add_account_and_user_with_limits() {
        let c = add(
            "account",
            &specs(
                "physics Description=Physics parent=science Fairshare=10 MaxJobs=5 GrpTRES=cpu=8",
            ),
        )
        .unwrap();
        let AcctRequest::AddAccounts(a) = c.request else {
            panic!()
        };
        assert_eq!(a.names, vec!["physics"]);
        assert_eq!(a.parent.as_deref(), Some("science"));
        assert_eq!(a.assoc.shares, Some(10));
        assert_eq!(a.assoc.limits.max_jobs, Some(5));
        assert_eq!(a.assoc.limits.grp_tres.as_deref(), Some("cpu=8"));
        let c = add(
            "user",
            &specs("alice,bob Account=physics MaxWall=1:00:00 qos=normal,high"),
        )
        .unwrap();
        let AcctRequest::AddUsers(u) = c.request else {
            panic!()
        };
        assert_eq!(u.names, vec!["alice", "bob"]);
        assert_eq!(u.accounts, vec!["physics"]);
        assert_eq!(u.assoc.limits.max_wall, Some(60));
        assert_eq!(u.assoc.qos, vec!["normal", "high"]);
        assert!(add("user", &specs("alice Bogus=1"))
            .unwrap_err()
            .contains("Unknown option: bogus"));
        assert!(add("account", &specs("x MaxJobs=lots")).is_err());
    }

    #[test]
    fn modify_with_where_and_set() {
        let c = modify(
            "user",
            &specs("where name=alice account=physics set MaxJobs=-1 qos+=high"),
        )
        .unwrap();
        let AcctRequest::ModifyUsers { filter, assoc, .. } = c.request else {
            panic!()
        };
        assert_eq!(filter.names, vec!["alice"]);
        assert_eq!(filter.accounts, vec!["physics"]);
        assert_eq!(assoc.limits.max_jobs, Set::Clear);
        assert_eq!(assoc.qos, ListChange::Add(vec!["high".into()]));
        let c = modify(
            "qos",
            &specs("normal set MaxJobsPerUser=2 Flags=DenyOnLimit"),
        )
        .unwrap();
        let AcctRequest::ModifyQos { filter, set } = c.request else {
            panic!()
        };
        assert_eq!(filter.names, vec!["normal"]);
        assert_eq!(set.limits.max_jobs_per_user, Set::To(2));
        assert_eq!(set.flags, ListChange::Replace(vec!["DENYONLIMIT".into()]));
        assert!(modify("qos", &specs("normal")).is_err());
        assert!(delete("user", &specs("")).is_err());
    }

    #[test]
    fn listings_fit_columns_and_formats() {
        let f = Flags {
            header: true,
            ..Default::default()
        };
        let cols = pick(None, USER_COLS, USER_COLS).unwrap();
        let rows = vec![vec!["root".into(), "root".into(), "Administrator".into()]];
        assert_eq!(
            table(&cols, &rows, &f),
            "      User   Def Acct     Admin \n---------- ---------- --------- \n      root       root Administ+ \n"
        );
        let cols = pick(Some("User,DefaultAccount%4"), USER_COLS, USER_COLS).unwrap();
        assert_eq!(cols[1].2, 4);
        assert!(pick(Some("Nope"), USER_COLS, USER_COLS).is_err());
        let p = Flags {
            header: false,
            parsable: Some(false),
            ..Default::default()
        };
        assert_eq!(table(&cols, &rows, &p), "root|root|Administrator\n");
    }

    #[test]
    fn problems_are_found_as_slurm_reports_them() {
        let acct = |n: &str| AccountRec {
            name: n.into(),
            ..Default::default()
        };
        let user = |n: &str| UserRec {
            name: n.into(),
            ..Default::default()
        };
        let assoc = |c: &str, a: &str, u: &str| AssocRec {
            cluster: c.into(),
            account: a.into(),
            user: u.into(),
            ..Default::default()
        };
        let accounts = [acct("root"), acct("phys"), acct("chem"), acct("idle")];
        let users = [user("root"), user("ann"), user("ghost"), user("bob")];
        let assocs = [
            assoc("tux", "root", ""),
            assoc("tux", "root", "root"),
            assoc("tux", "phys", ""),
            assoc("tux", "phys", "ann"),
            assoc("tux", "chem", ""),
            assoc("zed", "phys", ""),
        ];
        let has_uid = |n: &str| n != "ghost";
        let p = problems(&accounts, &users, &assocs, &[], &[], &has_uid);
        let s = |c: &str, a: &str, u: &str, w: &'static str| -> Problem {
            (c.into(), a.into(), u.into(), w)
        };
        assert_eq!(
            p,
            vec![
                s("", "idle", "", "Account has no Associations"),
                s("tux", "chem", "", "Account has no users"),
                s("zed", "phys", "", "Account has no users"),
                s("", "", "ghost", "User does not have a uid"),
                s("", "", "bob", "User has no Associations"),
            ]
        );
        // One cluster: the other's associations do not count.
        let p = problems(
            &accounts,
            &users,
            &assocs,
            &["zed".to_string()],
            &[],
            &has_uid,
        );
        assert!(p.contains(&s("", "root", "", "Account has no Associations")));
        assert!(p.contains(&s("", "", "ann", "User has no Associations")));
        // Asked about one account: users are judged by all associations.
        let p = problems(&accounts[1..2], &users, &assocs, &[], &[], &has_uid);
        assert_eq!(
            p,
            vec![
                s("zed", "phys", "", "Account has no users"),
                s("", "", "ghost", "User does not have a uid"),
                s("", "", "bob", "User has no Associations"),
            ]
        );
        // In a partition nobody's association names: phys on tux has no
        // users there.
        let p = problems(
            &accounts[1..2],
            &[],
            &assocs,
            &[],
            &["gpu".into()],
            &has_uid,
        );
        assert_eq!(
            p,
            vec![
                s("tux", "phys", "", "Account has no users"),
                s("zed", "phys", "", "Account has no users"),
            ]
        );
    }

    #[test]
    fn configuration_is_slurm_confs_part_then_slurmdbds() {
        let conf = slurm_common::conf::SlurmConf::parse_str(
            "ClusterName=tux\nSlurmctldHost=h\nNodeName=n1 CPUs=1\n\
             PartitionName=p Nodes=n1\nAccountingStorageType=accounting_storage/slurmdbd\n\
             AccountingStorageHost=db1\nAccountingStoragePort=7031\nPrivateData=jobs,usage\n\
             TrackWCKey=yes\n",
            std::path::Path::new("/etc/slurm/slurm.conf"),
        )
        .unwrap();
        let dbd = vec![
            ("DbdPort".to_string(), "7031".to_string()),
            (
                "StorageType".to_string(),
                "accounting_storage/mysql".to_string(),
            ),
        ];
        let text = configuration_text(&conf, &dbd, 0);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("Configuration data as of "), "{text}");
        assert_eq!(lines[1], "AccountingStorageBackupHost  = (null)");
        assert_eq!(lines[2], "AccountingStorageHost  = db1");
        assert_eq!(lines[5], "AccountingStoragePort  = 7031");
        assert!(
            text.contains("\nPrivateData            = jobs,usage\n"),
            "{text}"
        );
        assert!(text.contains("\nSLURM_CONF             = /etc/slurm/slurm.conf\n"));
        assert!(text.contains("\nTrackWCKey             = Yes\n"));
        assert!(
            text.ends_with(
                "TrackWCKey             = Yes\n\nSlurmDBD configuration:\n\
                 DbdPort                = 7031\n\
                 StorageType            = accounting_storage/mysql\n"
            ),
            "{text}"
        );
    }
}
