//! `sacctmgr dump` and `sacctmgr load`: a cluster's QOS, accounts, users and
//! associations as Slurm's flat file, so a site can carry its association
//! tree over from Slurm (`sacctmgr dump` there, `sacctmgr load` here) and
//! back.
//!
//! The file: one entity per line, `Title - 'name':Key=value:Key='a value'`,
//! titles `QOS`, `Cluster`, `Parent`, `Account` and `User`; `#` starts a
//! comment, a trailing `\` continues a line. QOS lines come first, then one
//! `Cluster` line (its options are the root association's), then for each
//! account with children a `Parent` line followed by its users and
//! sub-accounts. Parents are always defined before their children.
//!
//! Loading reconciles: what the file names and the database lacks is added,
//! what differs is modified, nothing is removed (unless `clean`). The plan
//! is made from the database's current state, shown, and sent as ordinary
//! add/modify requests (each checked by slurmdbd as if typed), in the order
//! parents before children; a load interrupted part way can be run again
//! and finishes the rest.

use crate::common::dbd_ask as ask;
use crate::sacctmgr::{assoc_setting, assoc_settings, qos_setting, Flags, Res, Spec, Specs};
use slurm_common::conf::SlurmConf;
use slurm_proto::acct::*;
use std::collections::{BTreeMap, BTreeSet};

// ------------------------------------------------------------------ reading

/// What a line of the file defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Title {
    Qos,
    Cluster,
    Parent,
    Account,
    User,
}

/// One line of the file: its number (from 1), title, name and options
/// (key in lower case, operator `=`, `+` or `-`, value without quotes).
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub no: usize,
    pub title: Title,
    pub name: String,
    pub opts: Vec<(String, char, String)>,
}

/// The text without its comments (a `#` outside quotes) and with continued
/// lines (`\` at the end) joined; each with the number of its first line.
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut acc = String::new();
    let mut start = 0;
    for (i, raw) in text.lines().enumerate() {
        if acc.is_empty() {
            start = i + 1;
        }
        let mut line = String::new();
        let mut quote: Option<char> = None;
        for c in raw.chars() {
            match (quote, c) {
                (None, '#') => break,
                (None, '\'' | '"') => quote = Some(c),
                (Some(q), c) if c == q => quote = None,
                _ => {}
            }
            line.push(c);
        }
        let trimmed = line.trim_end();
        if let Some(cont) = trimmed.strip_suffix('\\') {
            acc.push_str(cont);
            continue;
        }
        acc.push_str(trimmed);
        let l = acc.trim().to_string();
        acc.clear();
        if !l.is_empty() {
            out.push((start, l));
        }
    }
    if !acc.trim().is_empty() {
        out.push((start, acc.trim().to_string()));
    }
    out
}

/// Takes a quoted or bare value off the front of `s` (a bare one ends at
/// `stop`); the rest follows.
fn take_value<'a>(s: &'a str, stop: &dyn Fn(&str, usize) -> bool) -> (String, &'a str) {
    let mut chars = s.char_indices();
    if let Some((_, q @ ('\'' | '"'))) = chars.next() {
        if let Some(end) = s[1..].find(q) {
            return (s[1..1 + end].to_string(), &s[2 + end..]);
        }
        return (s[1..].to_string(), "");
    }
    let mut i = 0;
    while i < s.len() {
        if stop(s, i) {
            return (s[..i].to_string(), &s[i..]);
        }
        i += s[i..].chars().next().map_or(1, char::len_utf8);
    }
    (s.to_string(), "")
}

/// Does `s[i]` (a `:`) separate options? Not inside a typed TRES
/// (`gres/gpu:tesla=2`): the value's current item names a type with `/`.
fn option_colon(s: &str, i: usize) -> bool {
    if s.as_bytes()[i] != b':' {
        return false;
    }
    let item = s[..i].rsplit([',', '=']).next().unwrap_or("");
    !item.contains('/')
}

/// Splits one logical line into a [`Line`].
pub fn parse_line(no: usize, text: &str) -> Res<Line> {
    let bad = |m: &str| format!(" Line {no}: {m}: {text}");
    let (title, rest) = text
        .split_once('-')
        .ok_or_else(|| bad("expected 'Title - name'"))?;
    let title = match title.trim().to_ascii_lowercase().as_str() {
        "qos" => Title::Qos,
        "cluster" | "machine" => Title::Cluster,
        "parent" => Title::Parent,
        "account" | "project" => Title::Account,
        "user" => Title::User,
        other => {
            return Err(bad(&format!(
                "unknown title '{other}' (QOS, Cluster, Parent, Account or User)"
            )))
        }
    };
    let (name, mut rest) = take_value(rest.trim_start(), &|s, i| s.as_bytes()[i] == b':');
    let name = name.trim().to_string();
    if name.is_empty() {
        return Err(bad("no name given"));
    }
    let mut opts = Vec::new();
    while let Some(r) = rest.strip_prefix(':') {
        let r = r.trim_start();
        if r.is_empty() {
            break;
        }
        let eq = r
            .find('=')
            .ok_or_else(|| bad(&format!("option without a value: {r}")))?;
        let key = r[..eq].trim();
        let (key, op) = match (key.strip_suffix('+'), key.strip_suffix('-')) {
            (Some(k), _) => (k, '+'),
            (_, Some(k)) => (k, '-'),
            _ => (key, '='),
        };
        if key.is_empty() || key.contains(':') {
            return Err(bad(&format!("bad option: {r}")));
        }
        let (value, after) = take_value(&r[eq + 1..], &option_colon);
        opts.push((key.to_ascii_lowercase(), op, value));
        rest = after.trim_start();
    }
    if !rest.trim().is_empty() {
        return Err(bad(&format!("unexpected text '{}'", rest.trim())));
    }
    Ok(Line {
        no,
        title,
        name,
        opts,
    })
}

/// Every line of a flat file.
pub fn parse_file(text: &str) -> Res<Vec<Line>> {
    logical_lines(text)
        .into_iter()
        .map(|(no, l)| parse_line(no, &l))
        .collect()
}

/// Older spellings Slurm still loads, as today's TRES limits.
fn legacy_tres(key: &str) -> Option<(&'static str, &'static str)> {
    Some(match key {
        "grpnodes" => ("grptres", "node"),
        "grpcpus" => ("grptres", "cpu"),
        "grpcpumins" => ("grptresmins", "cpu"),
        "maxnodes" | "maxnodesperjob" => ("maxtres", "node"),
        "maxcpus" | "maxcpusperjob" => ("maxtres", "cpu"),
        "maxcpumins" | "maxcpuminsperjob" => ("maxtresmins", "cpu"),
        _ => return None,
    })
}

/// Options Slurm's files may carry that have no meaning here yet: named in
/// the error so the admin can remove them and load the rest.
fn not_here(key: &str) -> Option<&'static str> {
    Some(match key {
        "defaultwckey" | "wckeys" => "per-user WCKeys are not kept yet",
        "grpjobsaccrue" | "maxjobsaccrue" | "maxjobsaccruepa" | "maxjobsaccruepu" => {
            "accrue limits are not supported yet"
        }
        "grptresrunmins"
        | "maxtresrunmins"
        | "maxtresrunminsperaccount"
        | "maxtresrunminsperuser" => "running TRES-minute limits are not supported yet",
        "minpriothresh" => "MinPrioThresh is not supported yet",
        "priority" => "association priorities are not supported yet",
        "comment" => "association comments are not kept yet",
        "classification" => "cluster classifications are not kept",
        // Each is taken on the other kind of line.
        "maxtrespernode" => "associations' MaxTRESPerNode is not supported yet",
        "maxtresmins" | "maxtresminsperjob" => "QOS MaxTRESMinsPerJob is not supported yet",
        "limitfactor" | "usagethreshold" | "preemptexempttime" => {
            "this QOS setting is not supported yet"
        }
        _ => return None,
    })
}

fn refuse(l: &Line, key: &str) -> String {
    match not_here(key) {
        Some(why) => format!(
            " Line {}: {key} cannot be loaded here ({why}); remove it from the file to load the rest",
            l.no
        ),
        None => format!(" Line {}: Unknown option: {key}", l.no),
    }
}

/// An association's settings from a line's options; `other` takes the
/// title's own keys (description, default account, ...) and says whether
/// it did.
fn assoc_patch(l: &Line, other: &mut dyn FnMut(&str, &str) -> Res<bool>) -> Res<AssocPatch> {
    let mut p = AssocPatch::default();
    let mut legacy: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (k, op, v) in &l.opts {
        if let Some((field, tres)) = legacy_tres(k) {
            legacy.entry(field).or_default().push(format!("{tres}={v}"));
            continue;
        }
        let taken = assoc_setting(&mut p, k, *op, v).map_err(|e| format!(" Line {}: {e}", l.no))?;
        if !taken && !other(k, v).map_err(|e| format!(" Line {}: {e}", l.no))? {
            return Err(refuse(l, k));
        }
    }
    // Legacy limits join the TRES form of the same limit.
    for (field, items) in legacy {
        let slot = match field {
            "grptres" => &mut p.limits.grp_tres,
            "grptresmins" => &mut p.limits.grp_tres_mins,
            "maxtres" => &mut p.limits.max_tres,
            _ => &mut p.limits.max_tres_mins,
        };
        let mut all = match slot {
            Set::To(s) => vec![s.clone()],
            _ => Vec::new(),
        };
        all.extend(items);
        *slot = Set::To(all.join(","));
    }
    Ok(p)
}

fn qos_patch(l: &Line) -> Res<QosPatch> {
    let mut p = QosPatch::default();
    for (k, op, v) in &l.opts {
        if !qos_setting(&mut p, k, *op, v).map_err(|e| format!(" Line {}: {e}", l.no))? {
            return Err(refuse(l, k));
        }
    }
    Ok(p)
}

/// A QOS after a patch (TRES limits replaced, as a file states them whole).
pub fn apply_qos(q: &QosRec, p: &QosPatch) -> QosRec {
    let mut r = q.clone();
    if let Set::To(d) = &p.description {
        r.description = d.clone();
    }
    if let Set::To(v) = p.priority {
        r.priority = v;
    }
    p.flags.apply(&mut r.flags);
    p.preempt.apply(&mut r.preempt);
    if let Set::To(m) = &p.preempt_mode {
        r.preempt_mode = m.clone();
    }
    if let Set::To(g) = p.grace_time {
        r.grace_time = g;
    }
    if let Set::To(u) = p.usage_factor {
        r.usage_factor = u;
    }
    p.limits
        .apply(&mut r.limits, &|_, new| Some(new.to_string()));
    r.flags.sort();
    r.preempt.sort();
    r
}

/// An association after a patch.
fn apply_assoc(a: &AssocRec, p: &AssocPatch) -> AssocRec {
    let mut r = a.clone();
    if let Set::To(s) = p.shares {
        r.shares = s;
    }
    if let Set::To(par) = &p.parent {
        r.parent = Some(par.clone());
    }
    p.limits
        .apply(&mut r.limits, &|_, new| Some(new.to_string()));
    p.qos.apply(&mut r.qos);
    r.qos.sort();
    p.default_qos.apply(&mut r.default_qos);
    r
}

fn sorted_assoc(a: &AssocRec) -> AssocRec {
    let mut r = a.clone();
    r.qos.sort();
    r
}

// ------------------------------------------------------------------ dumping

/// What a dump reads from slurmdbd.
#[derive(Debug, Clone)]
pub struct Db {
    pub clusters: Vec<ClusterRec>,
    pub qos: Vec<QosRec>,
    pub accounts: Vec<AccountRec>,
    pub users: Vec<UserRec>,
    /// The cluster's associations.
    pub assocs: Vec<AssocRec>,
}

/// A quoted value: single quotes, or double ones around a value with an
/// apostrophe (the loader takes both).
fn q(v: &str) -> String {
    if v.contains('\'') {
        format!("\"{v}\"")
    } else {
        format!("'{v}'")
    }
}

/// `:Key=value` for each association setting that is set, in Slurm's order.
fn assoc_opts(a: &AssocRec) -> String {
    let l = &a.limits;
    let mut s = String::new();
    let mut add = |k: &str, v: String| s.push_str(&format!(":{k}={v}"));
    if let Some(d) = &a.default_qos {
        add("DefaultQOS", q(d));
    }
    add("Fairshare", a.shares.to_string());
    let tres = [("GrpTRESMins", &l.grp_tres_mins), ("GrpTRES", &l.grp_tres)];
    for (k, v) in tres {
        if let Some(v) = v {
            add(k, v.clone());
        }
    }
    for (k, v) in [
        ("GrpJobs", l.grp_jobs),
        ("GrpSubmitJobs", l.grp_submit_jobs),
        ("GrpWall", l.grp_wall),
    ] {
        if let Some(v) = v {
            add(k, v.to_string());
        }
    }
    for (k, v) in [
        ("MaxTRESMinsPerJob", &l.max_tres_mins),
        ("MaxTRESPerJob", &l.max_tres),
        ("MaxTRESPerUser", &l.max_tres_per_user),
    ] {
        if let Some(v) = v {
            add(k, v.clone());
        }
    }
    for (k, v) in [
        ("MaxJobs", l.max_jobs),
        ("MaxSubmitJobs", l.max_submit_jobs),
        ("MaxWallDurationPerJob", l.max_wall),
    ] {
        if let Some(v) = v {
            add(k, v.to_string());
        }
    }
    if !a.qos.is_empty() {
        let mut qos = a.qos.clone();
        qos.sort();
        add("QOS", q(&qos.join(",")));
    }
    s
}

/// One `QOS - ` line.
fn qos_line(r: &QosRec) -> String {
    let l = &r.limits;
    let mut s = format!("QOS - {}:Description={}", q(&r.name), q(&r.description));
    let mut add = |k: &str, v: String| s.push_str(&format!(":{k}={v}"));
    if !r.flags.is_empty() {
        add("Flags", q(&r.flags.join(",")));
    }
    if r.grace_time > 0 {
        add("GraceTime", r.grace_time.to_string());
    }
    let counts = [
        ("GrpJobs", l.grp_jobs),
        ("GrpSubmitJobs", l.grp_submit_jobs),
    ];
    for (k, v) in counts {
        if let Some(v) = v {
            add(k, v.to_string());
        }
    }
    for (k, v) in [("GrpTRES", &l.grp_tres), ("GrpTRESMins", &l.grp_tres_mins)] {
        if let Some(v) = v {
            add(k, v.clone());
        }
    }
    if let Some(v) = l.grp_wall {
        add("GrpWall", v.to_string());
    }
    for (k, v) in [
        ("MaxJobsPA", l.max_jobs_per_account),
        ("MaxJobsPU", l.max_jobs_per_user),
        ("MaxSubmitJobsPA", l.max_submit_jobs_per_account),
        ("MaxSubmitJobsPU", l.max_submit_jobs_per_user),
    ] {
        if let Some(v) = v {
            add(k, v.to_string());
        }
    }
    for (k, v) in [
        ("MaxTRESPerAccount", &l.max_tres_per_account),
        ("MaxTRESPerJob", &l.max_tres_per_job),
        ("MaxTRESPerNode", &l.max_tres_per_node),
        ("MaxTRESPerUser", &l.max_tres_per_user),
    ] {
        if let Some(v) = v {
            add(k, v.clone());
        }
    }
    if let Some(v) = l.max_wall {
        add("MaxWallDurationPerJob", v.to_string());
    }
    if let Some(v) = &l.min_tres_per_job {
        add("MinTRESPerJob", v.clone());
    }
    if !r.preempt.is_empty() {
        add("Preempt", q(&r.preempt.join(",")));
    }
    if r.preempt_mode != "cluster" && !r.preempt_mode.is_empty() {
        add("PreemptMode", q(&r.preempt_mode.to_ascii_lowercase()));
    }
    if r.priority > 0 {
        add("Priority", r.priority.to_string());
    }
    if r.usage_factor != 1.0 {
        add("UsageFactor", format!("{:.6}", r.usage_factor));
    }
    s
}

const HEADER: &str = "\
# To edit this file start with a cluster line for the new cluster
# Cluster - 'cluster_name':MaxTRESPerJob=node=50
# Followed by Accounts you want in this fashion (root is created by default)...
# Parent - 'root'
# Account - 'cs':MaxTRESPerJob=node=5:MaxJobs=4:MaxTRESMinsPerJob=cpu=20:FairShare=399:MaxWallDurationPerJob=40:Description='Computer Science':Organization='LC'
# Any of the options after a ':' can be left out and they can be in any order.
# If you want to add any sub accounts just list the Parent THAT HAS ALREADY
# BEEN CREATED before the account line in this fashion...
# Parent - 'cs'
# Account - 'test':MaxTRESPerJob=node=1:MaxJobs=1:MaxTRESMinsPerJob=cpu=1:FairShare=1:MaxWallDurationPerJob=1:Description='Test Account':Organization='Test'
# To add users to a account add a line like this after a Parent - 'line'
# User - 'lipari':MaxTRESPerJob=node=2:MaxJobs=3:MaxTRESMinsPerJob=cpu=4:FairShare=1:MaxWallDurationPerJob=1
";

/// The flat file of `cluster` (whose associations `db.assocs` holds).
pub fn render_dump(cluster: &str, db: &Db) -> Res<String> {
    let root = db
        .assocs
        .iter()
        .find(|a| !a.is_user() && a.account == "root")
        .ok_or_else(|| format!(" Cluster {cluster} returned nothing."))?;
    let mut out = String::from(HEADER);
    let mut qos: Vec<&QosRec> = db.qos.iter().collect();
    qos.sort_by_key(|r| r.id);
    for r in qos {
        out.push_str(&qos_line(r));
        out.push('\n');
    }
    out.push_str(&format!("Cluster - {}{}\n", q(cluster), assoc_opts(root)));
    // Children of each account: its users (by name, then partition), then
    // its sub-accounts (by name).
    let mut children: BTreeMap<&str, Vec<&AssocRec>> = BTreeMap::new();
    for a in &db.assocs {
        let parent = if a.is_user() {
            Some(a.account.as_str())
        } else {
            a.parent.as_deref()
        };
        if let Some(p) = parent {
            children.entry(p).or_default().push(a);
        }
    }
    for list in children.values_mut() {
        list.sort_by(|x, y| {
            (!x.is_user(), &x.user, &x.account, &x.partition).cmp(&(
                !y.is_user(),
                &y.user,
                &y.account,
                &y.partition,
            ))
        });
    }
    let users: BTreeMap<&str, &UserRec> = db.users.iter().map(|u| (u.name.as_str(), u)).collect();
    let accounts: BTreeMap<&str, &AccountRec> =
        db.accounts.iter().map(|a| (a.name.as_str(), a)).collect();
    let mut seen = BTreeSet::new();
    dump_children("root", &children, &users, &accounts, &mut seen, &mut out);
    Ok(out)
}

fn dump_children(
    account: &str,
    children: &BTreeMap<&str, Vec<&AssocRec>>,
    users: &BTreeMap<&str, &UserRec>,
    accounts: &BTreeMap<&str, &AccountRec>,
    seen: &mut BTreeSet<String>,
    out: &mut String,
) {
    let Some(list) = children.get(account) else {
        return;
    };
    // A cycle cannot be stored, but a dump must end whatever it reads.
    if !seen.insert(account.to_string()) {
        return;
    }
    out.push_str(&format!("Parent - {}\n", q(account)));
    for a in list {
        if a.is_user() {
            let mut line = format!("User - {}", q(&a.user));
            if !a.partition.is_empty() {
                line.push_str(&format!(":Partition={}", q(&a.partition)));
            }
            if let Some(u) = users.get(a.user.as_str()) {
                line.push_str(&format!(":DefaultAccount={}", q(&u.default_account)));
                if u.admin_level > AdminLevel::None {
                    line.push_str(&format!(":AdminLevel={}", q(u.admin_level.name())));
                }
                // The accounts it was made coordinator of (not those below).
                let direct: Vec<&str> = accounts
                    .values()
                    .filter(|r| r.coordinators.contains(&a.user))
                    .map(|r| r.name.as_str())
                    .collect();
                if !direct.is_empty() {
                    line.push_str(&format!(":Coordinator={}", q(&direct.join(","))));
                }
            }
            out.push_str(&line);
        } else {
            out.push_str(&format!("Account - {}", q(&a.account)));
            if let Some(r) = accounts.get(a.account.as_str()) {
                out.push_str(&format!(
                    ":Description={}:Organization={}",
                    q(&r.description),
                    q(&r.organization)
                ));
            }
        }
        out.push_str(&assoc_opts(a));
        out.push('\n');
    }
    for a in list.iter().filter(|a| !a.is_user()) {
        dump_children(&a.account, children, users, accounts, seen, out);
    }
}

// ------------------------------------------------------------------ loading

/// One request of a load, and how the preview names it.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub section: &'static str,
    pub what: String,
    pub request: AcctRequest,
}

/// What loading a file into `cluster` asks of slurmdbd, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub cluster: String,
    pub steps: Vec<Step>,
    /// What the loader assumed, printed before anything else.
    pub notes: Vec<String>,
}

impl Plan {
    /// The preview printed before the confirmation: each section's changes.
    pub fn preview(&self) -> String {
        let mut out = String::new();
        let mut section = "";
        for s in &self.steps {
            if s.section != section {
                if !section.is_empty() {
                    out.push('\n');
                }
                section = s.section;
                out.push_str(section);
                out.push('\n');
            }
            out.push_str(&format!("  {}\n", s.what));
        }
        out
    }
}

/// The key of an association in a plan: (account, user, partition).
type AssocKey = (String, String, String);

fn key(a: &AssocRec) -> AssocKey {
    (a.account.clone(), a.user.clone(), a.partition.clone())
}

fn patch_text(l: &Line) -> String {
    l.opts
        .iter()
        .map(|(k, op, v)| {
            let op = match op {
                '+' => "+=",
                '-' => "-=",
                _ => "=",
            };
            format!("{k}{op}{v}")
        })
        .map(|o| format!(" {o}"))
        .collect()
}

/// Plans loading `lines` into the database `db` (whose `assocs` are those
/// of the target cluster). `cluster` overrides the file's cluster name;
/// `clean` removes the cluster first.
pub fn plan(lines: &[Line], cluster: Option<&str>, clean: bool, db: &Db) -> Res<Plan> {
    let cluster_line = lines
        .iter()
        .find(|l| l.title == Title::Cluster)
        .ok_or(" You need to specify a cluster name first with 'Cluster - $NAME' in your file")?;
    if let Some(second) = lines.iter().filter(|l| l.title == Title::Cluster).nth(1) {
        return Err(format!(
            " Line {}: Only one cluster per file (already doing {})",
            second.no, cluster_line.name
        ));
    }
    let name = cluster
        .map(str::to_string)
        .unwrap_or_else(|| cluster_line.name.clone())
        .to_ascii_lowercase();
    let exists = db.clusters.iter().any(|c| c.name == name);
    let mut steps = Vec::new();
    let fresh = clean || !exists;
    if clean && exists {
        steps.push(Step {
            section: "Cluster",
            what: format!("Removing {name} and its associations (clean)"),
            request: AcctRequest::DeleteClusters(ClusterFilter {
                names: vec![name.clone()],
            }),
        });
    }

    // QOS first: associations may name them.
    let current_qos: BTreeMap<&str, &QosRec> =
        db.qos.iter().map(|r| (r.name.as_str(), r)).collect();
    let mut new_qos = Vec::new();
    let mut qos_mods = Vec::new();
    for l in lines.iter().filter(|l| l.title == Title::Qos) {
        if l.no > cluster_line.no {
            return Err(format!(
                " Line {}: QOS lines come before the Cluster line",
                l.no
            ));
        }
        let name = l.name.to_ascii_lowercase();
        let p = qos_patch(l)?;
        match current_qos.get(name.as_str()) {
            Some(cur) => {
                let mut cur = (*cur).clone();
                cur.flags.sort();
                cur.preempt.sort();
                if apply_qos(&cur, &p) != cur {
                    qos_mods.push((name, p, patch_text(l)));
                }
            }
            None => {
                let base = QosRec {
                    name: name.clone(),
                    description: name.clone(),
                    ..Default::default()
                };
                let mut rec = apply_qos(&base, &p);
                // Preemption may name QOS defined later: set once all exist.
                if !rec.preempt.is_empty() {
                    qos_mods.push((
                        name.clone(),
                        QosPatch {
                            preempt: ListChange::Replace(rec.preempt.clone()),
                            ..Default::default()
                        },
                        format!(" preempt={}", rec.preempt.join(",")),
                    ));
                    rec.preempt.clear();
                }
                new_qos.push(rec);
            }
        }
    }
    let added_qos: BTreeSet<String> = new_qos.iter().map(|r| r.name.clone()).collect();
    if !new_qos.is_empty() {
        steps.push(Step {
            section: "QOS",
            what: format!(
                "Adding {}",
                new_qos
                    .iter()
                    .map(|r| r.name.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            request: AcctRequest::AddQos(new_qos),
        });
    }
    for (n, p, text) in qos_mods {
        steps.push(Step {
            section: "QOS",
            what: format!("Modifying {n}:{text}"),
            request: AcctRequest::ModifyQos {
                filter: QosFilter {
                    names: vec![n],
                    ..Default::default()
                },
                set: p,
            },
        });
    }

    // The cluster and its root association.
    if fresh {
        steps.push(Step {
            section: "Cluster",
            what: format!("Adding {name}"),
            request: AcctRequest::AddClusters(vec![ClusterRec {
                name: name.clone(),
                ..Default::default()
            }]),
        });
    }
    // A new cluster starts with the root account and root user, given the
    // `normal` QOS when there is one (as slurmdbd creates them).
    let cur_assocs: BTreeMap<AssocKey, AssocRec> = if fresh {
        let normal = current_qos.contains_key("normal") || added_qos.contains("normal");
        let root = AssocRec {
            cluster: name.clone(),
            account: "root".into(),
            shares: 1,
            qos: if normal {
                vec!["normal".into()]
            } else {
                Vec::new()
            },
            ..Default::default()
        };
        let user = AssocRec {
            user: "root".into(),
            parent: Some("root".into()),
            ..root.clone()
        };
        [root, user].into_iter().map(|a| (key(&a), a)).collect()
    } else {
        db.assocs.iter().map(|a| (key(a), a.clone())).collect()
    };
    let root_patch = assoc_patch(cluster_line, &mut |_, _| Ok(false))?;
    let root_key: AssocKey = ("root".into(), String::new(), String::new());
    let root_differs = match cur_assocs.get(&root_key) {
        Some(cur) => apply_assoc(&sorted_assoc(cur), &root_patch) != sorted_assoc(cur),
        None => return Err(format!(" Cluster {name} has no root association")),
    };
    if root_differs {
        steps.push(Step {
            section: "Cluster",
            what: format!(
                "Modifying {name} root association:{}",
                patch_text(cluster_line)
            ),
            request: AcctRequest::ModifyAssocs {
                filter: AssocFilter {
                    clusters: vec![name.clone()],
                    accounts: vec!["root".into()],
                    only_accounts: true,
                    ..Default::default()
                },
                set: root_patch,
            },
        });
    }

    // The tree, in file order: parents before children.
    let accounts: BTreeMap<&str, &AccountRec> =
        db.accounts.iter().map(|a| (a.name.as_str(), a)).collect();
    let users: BTreeMap<&str, &UserRec> = db.users.iter().map(|u| (u.name.as_str(), u)).collect();
    // Account associations on the cluster, as they will be.
    let mut tree: BTreeSet<String> = BTreeSet::from(["root".to_string()]);
    tree.extend(
        cur_assocs
            .keys()
            .filter(|k| k.1.is_empty())
            .map(|k| k.0.clone()),
    );
    let mut planned: BTreeSet<AssocKey> = BTreeSet::new();
    // Users as the file wants them (first occurrence), and as they will be.
    let mut want_user: BTreeMap<String, (Option<String>, Option<AdminLevel>, usize)> =
        BTreeMap::new();
    // `Coordinator=` of user lines: made once, after everything else.
    let mut want_coord: BTreeSet<(String, String)> = BTreeSet::new();
    let mut coord_steps: Vec<Step> = Vec::new();
    let mut user_default: BTreeMap<String, String> = users
        .iter()
        .map(|(n, u)| (n.to_string(), u.default_account.clone()))
        .collect();
    let mut user_admin: BTreeMap<String, AdminLevel> = users
        .iter()
        .map(|(n, u)| (n.to_string(), u.admin_level))
        .collect();
    let mut user_assocs: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for k in cur_assocs.keys().filter(|k| !k.1.is_empty()) {
        user_assocs
            .entry(k.1.clone())
            .or_default()
            .insert(k.0.clone());
    }
    let mut parent: Option<String> = None;
    let mut notes = Vec::new();
    for l in lines.iter().filter(|l| l.no > cluster_line.no) {
        // As Slurm: children before any Parent line are the root's.
        if parent.is_none() && matches!(l.title, Title::Account | Title::User) {
            parent = Some("root".to_string());
            notes.push(
                " No parent given creating off root, If incorrect specify 'Parent - name' \
                 before any children in your file"
                    .to_string(),
            );
        }
        match l.title {
            Title::Qos => unreachable!("QOS lines after the cluster line are refused above"),
            Title::Cluster => unreachable!("only one cluster line"),
            Title::Parent => {
                let p = l.name.to_ascii_lowercase();
                if !tree.contains(&p) {
                    return Err(format!(
                        " Line {}: Parent '{p}' is not on cluster {name} and not defined above it in the file",
                        l.no
                    ));
                }
                if !l.opts.is_empty() {
                    return Err(format!(" Line {}: a Parent line takes no options", l.no));
                }
                parent = Some(p);
            }
            Title::Account => {
                let par = parent.clone().unwrap_or_else(|| "root".to_string());
                let acct = l.name.to_ascii_lowercase();
                let (mut descr, mut org) = (None, None);
                let p = assoc_patch(l, &mut |k, v| {
                    match k {
                        "description" => descr = Some(v.to_string()),
                        "organization" => org = Some(v.to_string()),
                        _ => return Ok(false),
                    }
                    Ok(true)
                })?;
                let k: AssocKey = (acct.clone(), String::new(), String::new());
                if !planned.insert(k.clone()) {
                    return Err(format!(" Line {}: account '{acct}' is defined twice", l.no));
                }
                if acct == "root" {
                    return Err(format!(
                        " Line {}: the root account is the Cluster line's (it has no parent)",
                        l.no
                    ));
                }
                let rec_differs = accounts.get(acct.as_str()).map(|r| {
                    descr.as_ref().is_some_and(|d| *d != r.description)
                        || org.as_ref().is_some_and(|o| *o != r.organization)
                });
                match cur_assocs.get(&k) {
                    None => {
                        let mut settings = assoc_settings(&p);
                        settings.qos.sort();
                        steps.push(Step {
                            section: "Accounts",
                            what: format!("Adding {acct} (parent {par}){}", patch_text(l)),
                            request: AcctRequest::AddAccounts(AddAccounts {
                                names: vec![acct.clone()],
                                description: descr.clone(),
                                organization: org.clone(),
                                parent: Some(par.clone()),
                                clusters: vec![name.clone()],
                                assoc: settings,
                                only_new: false,
                            }),
                        });
                    }
                    Some(cur) => {
                        let mut p = p;
                        if cur.parent.as_deref() != Some(par.as_str()) {
                            p.parent = Set::To(par.clone());
                        }
                        if apply_assoc(&sorted_assoc(cur), &p) != sorted_assoc(cur) {
                            steps.push(Step {
                                section: "Accounts",
                                what: format!("Modifying {acct} (parent {par}){}", patch_text(l)),
                                request: AcctRequest::ModifyAssocs {
                                    filter: AssocFilter {
                                        clusters: vec![name.clone()],
                                        accounts: vec![acct.clone()],
                                        only_accounts: true,
                                        ..Default::default()
                                    },
                                    set: p,
                                },
                            });
                        }
                    }
                }
                if rec_differs == Some(true) {
                    steps.push(Step {
                        section: "Accounts",
                        what: format!("Modifying {acct}'s description/organization"),
                        request: AcctRequest::ModifyAccounts {
                            filter: AccountFilter {
                                names: vec![acct.clone()],
                                ..Default::default()
                            },
                            set: AccountPatch {
                                description: descr.map_or(Set::Keep, Set::To),
                                organization: org.map_or(Set::Keep, Set::To),
                            },
                            assoc: AssocPatch::default(),
                        },
                    });
                }
                tree.insert(acct);
            }
            Title::User => {
                let par = parent.clone().unwrap_or_else(|| "root".to_string());
                let user = l.name.to_ascii_lowercase();
                let (mut def, mut admin, mut part) = (None, None, String::new());
                let mut coord: Vec<String> = Vec::new();
                let p = assoc_patch(l, &mut |k, v| {
                    match k {
                        "defaultaccount" => def = Some(v.to_ascii_lowercase()),
                        "coordinator" => coord.extend(
                            v.split(',')
                                .map(|a| a.trim().to_ascii_lowercase())
                                .filter(|a| !a.is_empty()),
                        ),
                        "adminlevel" => {
                            admin = Some(
                                AdminLevel::parse(v)
                                    .ok_or_else(|| format!("Invalid AdminLevel '{v}'"))?,
                            )
                        }
                        "partition" => part = v.to_string(),
                        _ => return Ok(false),
                    }
                    Ok(true)
                })?;
                let k: AssocKey = (par.clone(), user.clone(), part.clone());
                if !planned.insert(k.clone()) {
                    return Err(format!(
                        " Line {}: user '{user}' is defined twice under account '{par}'",
                        l.no
                    ));
                }
                if !want_user.contains_key(&user) {
                    want_user.insert(user.clone(), (def.clone(), admin, l.no));
                }
                for a in coord {
                    let has = db
                        .accounts
                        .iter()
                        .any(|r| r.name == a && r.coordinators.contains(&user));
                    if !has && want_coord.insert((user.clone(), a.clone())) {
                        coord_steps.push(Step {
                            section: "Coordinators",
                            what: format!("Making {user} coordinator of {a}"),
                            request: AcctRequest::AddCoords(CoordChange {
                                users: vec![user.clone()],
                                accounts: vec![a],
                            }),
                        });
                    }
                }
                match cur_assocs.get(&k) {
                    None => {
                        let new_user = !user_default.contains_key(&user);
                        let mut settings = assoc_settings(&p);
                        settings.qos.sort();
                        steps.push(Step {
                            section: "Users",
                            what: format!(
                                "Adding {user} to {par}{}{}",
                                if part.is_empty() {
                                    String::new()
                                } else {
                                    format!(" (partition {part})")
                                },
                                patch_text(l)
                            ),
                            request: AcctRequest::AddUsers(AddUsers {
                                names: vec![user.clone()],
                                // A new user starts with this account as its
                                // default; the file's default is set once
                                // all its associations exist.
                                default_account: new_user.then(|| par.clone()),
                                admin_level: if new_user { admin } else { None },
                                accounts: vec![par.clone()],
                                clusters: vec![name.clone()],
                                partitions: if part.is_empty() {
                                    Vec::new()
                                } else {
                                    vec![part.clone()]
                                },
                                assoc: settings,
                            }),
                        });
                        if new_user {
                            user_default.insert(user.clone(), par.clone());
                            user_admin.insert(user.clone(), admin.unwrap_or_default());
                        }
                        user_assocs
                            .entry(user.clone())
                            .or_default()
                            .insert(par.clone());
                    }
                    Some(cur) => {
                        if apply_assoc(&sorted_assoc(cur), &p) != sorted_assoc(cur) {
                            steps.push(Step {
                                section: "Users",
                                what: format!("Modifying {user} in {par}{}", patch_text(l)),
                                request: AcctRequest::ModifyAssocs {
                                    filter: AssocFilter {
                                        clusters: vec![name.clone()],
                                        accounts: vec![par.clone()],
                                        users: vec![user.clone()],
                                        partitions: vec![part.clone()],
                                        ..Default::default()
                                    },
                                    set: p,
                                },
                            });
                        }
                    }
                }
            }
        }
    }
    // Default accounts and admin levels, once every association exists.
    for (user, (def, admin, no)) in want_user {
        let mut set = UserPatch::default();
        if let Some(d) = def {
            if user_default.get(&user) != Some(&d) {
                if !user_assocs.get(&user).is_some_and(|a| a.contains(&d)) {
                    return Err(format!(
                        " Line {no}: user '{user}' has DefaultAccount='{d}' but no association with it"
                    ));
                }
                set.default_account = Set::To(d);
            }
        }
        if let Some(a) = admin {
            if user_admin.get(&user) != Some(&a) {
                set.admin_level = Set::To(a);
            }
        }
        let mut what = Vec::new();
        if let Set::To(d) = &set.default_account {
            what.push(format!("DefaultAccount={d}"));
        }
        if let Set::To(a) = &set.admin_level {
            what.push(format!("AdminLevel={a}"));
        }
        if what.is_empty() {
            continue;
        }
        steps.push(Step {
            section: "Users",
            what: format!("Modifying {user}: {}", what.join(" ")),
            request: AcctRequest::ModifyUsers {
                filter: UserFilter {
                    names: vec![user.clone()],
                    ..Default::default()
                },
                set,
                assoc: AssocPatch::default(),
            },
        });
    }
    // Coordinators last: their users and accounts exist by then.
    steps.extend(coord_steps);
    Ok(Plan {
        cluster: name,
        steps,
        notes,
    })
}

// ------------------------------------------------------------ the commands

/// Reads what a dump or a load needs; `assocs` only for `cluster`.
fn read_db(conf: &SlurmConf, cluster: &str) -> Res<Db> {
    let unexpected = || "unexpected answer from slurmdbd".to_string();
    let AcctResponse::Clusters(clusters) =
        ask(conf, AcctRequest::ListClusters(Default::default()))?
    else {
        return Err(unexpected());
    };
    let AcctResponse::Qos(qos) = ask(conf, AcctRequest::ListQos(Default::default()))? else {
        return Err(unexpected());
    };
    let AcctResponse::Accounts(accounts) =
        ask(conf, AcctRequest::ListAccounts(Default::default()))?
    else {
        return Err(unexpected());
    };
    let AcctResponse::Users(users) = ask(conf, AcctRequest::ListUsers(Default::default()))? else {
        return Err(unexpected());
    };
    let AcctResponse::Assocs(assocs) = ask(
        conf,
        AcctRequest::ListAssocs(AssocFilter {
            clusters: vec![cluster.to_string()],
            ..Default::default()
        }),
    )?
    else {
        return Err(unexpected());
    };
    Ok(Db {
        clusters,
        qos,
        accounts,
        users,
        assocs,
    })
}

/// The one name a `Cluster=` or bare word gives (Slurm's message for two).
fn one_cluster(slot: &mut Option<String>, v: &str) -> Res<()> {
    if let Some(c) = slot {
        return Err(format!(
            " Can only do one cluster at a time.  Already doing {c}"
        ));
    }
    *slot = Some(v.to_ascii_lowercase());
    Ok(())
}

/// `sacctmgr dump CLUSTER [file=FILE]`.
pub fn dump(conf: &SlurmConf, specs: &Specs) -> i32 {
    match try_dump(conf, specs) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}

fn try_dump(conf: &SlurmConf, specs: &Specs) -> Res<()> {
    let (mut cluster, mut file) = (None, None);
    for s in specs.filter.iter().chain(&specs.set) {
        match s {
            Spec::Word(w) => one_cluster(&mut cluster, w)?,
            Spec::Pair(k, _, v) if k == "cluster" || k == "clusters" => {
                one_cluster(&mut cluster, v)?
            }
            Spec::Pair(k, _, v) if k == "file" => {
                if let Some(f) = &file {
                    return Err(format!(" File name already set to {f}"));
                }
                file = Some(v.clone());
            }
            Spec::Pair(k, _, _) => return Err(format!(" Unknown option: {k}")),
        }
    }
    let cluster = cluster.ok_or(" We need a cluster to dump.")?;
    let db = read_db(conf, &cluster)?;
    if !db.clusters.iter().any(|c| c.name == cluster) {
        return Err(format!(" Cluster {cluster} doesn't exist."));
    }
    // Only administrators dump (as Slurm checks).
    let uid = unsafe { libc::getuid() };
    let me = slurm_common::users::user_name_or_id(uid);
    let Some(user) = db.users.iter().find(|u| u.name == me) else {
        return Err(format!(
            " Your uid ({uid}) is not in the accounting system, can't dump cluster."
        ));
    };
    if uid != 0 && me != conf.slurm_user && user.admin_level < AdminLevel::Administrator {
        return Err(" Your user does not have sufficient privileges to dump clusters.".into());
    }
    let text = render_dump(&cluster, &db)?;
    let file = match file {
        Some(f) => f,
        None => {
            let f = format!("./{cluster}.cfg");
            println!(" No filename given, using {f}.");
            f
        }
    };
    std::fs::write(&file, text).map_err(|e| format!("Can't open file {file}, {e}"))
}

/// `sacctmgr load [file=]FILE [cluster=NAME] [clean]`.
pub fn load(conf: &SlurmConf, specs: &Specs, f: &Flags) -> i32 {
    match try_load(conf, specs, f) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}

fn try_load(conf: &SlurmConf, specs: &Specs, f: &Flags) -> Res<i32> {
    let (mut cluster, mut file, mut clean) = (None, None, false);
    for s in specs.filter.iter().chain(&specs.set) {
        match s {
            Spec::Word(w) if w.eq_ignore_ascii_case("clean") => clean = true,
            Spec::Pair(k, _, v) if k == "clean" => {
                if !v.is_empty() {
                    return Err(format!(
                        " clean={v}: removing accounts, users or QOS is not supported here;                          'clean' alone removes the cluster and its associations"
                    ));
                }
                clean = true;
            }
            Spec::Pair(k, _, v) if k == "cluster" || k == "clusters" => {
                one_cluster(&mut cluster, v)?
            }
            Spec::Word(v) | Spec::Pair(_, _, v)
                if matches!(s, Spec::Word(_)) || matches!(s, Spec::Pair(k, ..) if k == "file") =>
            {
                if let Some(f) = &file {
                    return Err(format!(" File name already set to {f}"));
                }
                file = Some(v.clone());
            }
            Spec::Pair(k, _, _) => return Err(format!(" Unknown option: {k}")),
            Spec::Word(_) => unreachable!("bare words are file names"),
        }
    }
    let file = file.ok_or(" No filename given, specify one with file=''")?;
    let text =
        std::fs::read_to_string(&file).map_err(|e| format!(" Unable to read \"{file}\": {e}"))?;
    let lines = parse_file(&text)?;
    let target = cluster.clone().or_else(|| {
        lines
            .iter()
            .find(|l| l.title == Title::Cluster)
            .map(|l| l.name.to_ascii_lowercase())
    });
    let db = read_db(conf, target.as_deref().unwrap_or(""))?;
    let plan = plan(&lines, cluster.as_deref(), clean, &db)?;
    for n in &plan.notes {
        println!("{n}");
    }
    if plan.steps.is_empty() {
        println!(" Nothing new added.");
        return Ok(0);
    }
    if !f.quiet {
        print!("{}", plan.preview());
    }
    if !f.immediate && !crate::sacctmgr::confirm() {
        println!(" Changes Discarded");
        return Ok(0);
    }
    let total = plan.steps.len();
    for (i, step) in plan.steps.into_iter().enumerate() {
        if let Err(e) = ask(conf, step.request) {
            eprintln!(" sacctmgr: error: {}: {e}", step.what);
            eprintln!(
                " Stopped after {i} of {total} changes (those are kept); fix the cause and load the file again to make the rest."
            );
            return Ok(1);
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_with_quotes_comments_continuations_and_typed_tres() {
        let text = "# header\n\
            Cluster - 'tux':Fairshare=1:QOS='normal,high' # trailing\n\
            Parent - 'root'\n\
            Account - 'cs':Description='Computer: Science':\\\n  Organization='LC #1':MaxTRESPerJob=gres/gpu:tesla=2,cpu=4:MaxJobs=3\n\
            User - \"adam\":DefaultAccount=cs:QOS+=high\n";
        let l = parse_file(text).unwrap();
        assert_eq!(l.len(), 4);
        assert_eq!(l[0].title, Title::Cluster);
        assert_eq!(l[0].name, "tux");
        assert_eq!(l[0].opts[1], ("qos".into(), '=', "normal,high".into()));
        assert_eq!(l[2].no, 4);
        assert_eq!(
            l[2].opts,
            vec![
                ("description".into(), '=', "Computer: Science".into()),
                ("organization".into(), '=', "LC #1".into()),
                ("maxtresperjob".into(), '=', "gres/gpu:tesla=2,cpu=4".into()),
                ("maxjobs".into(), '=', "3".into()),
            ]
        );
        assert_eq!(l[3].name, "adam");
        assert_eq!(l[3].opts[1], ("qos".into(), '+', "high".into()));
        for bad in [
            "Acount - 'x'",
            "User - ''",
            "Account - x:MaxJobs",
            "no dash here",
            "Account - 'x' junk",
        ] {
            let e = parse_file(bad).unwrap_err();
            assert!(e.contains("Line 1"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_value_with_an_apostrophe_is_dumped_so_it_loads_back() {
        let line = format!("Account - {}:Description={}", q("a"), q("Women's lab"));
        let l = parse_line(1, &line).unwrap();
        assert_eq!(l.opts[0].2, "Women's lab");
    }

    fn db() -> Db {
        let assoc = |account: &str, user: &str, parent: &str| AssocRec {
            cluster: "tux".into(),
            account: account.into(),
            user: user.into(),
            parent: (!parent.is_empty()).then(|| parent.into()),
            shares: 1,
            qos: vec!["normal".into()],
            ..Default::default()
        };
        Db {
            clusters: vec![ClusterRec {
                name: "tux".into(),
                ..Default::default()
            }],
            qos: vec![QosRec {
                id: 1,
                name: "normal".into(),
                description: "Normal QOS default".into(),
                ..Default::default()
            }],
            accounts: vec![
                AccountRec {
                    name: "root".into(),
                    description: "default root account".into(),
                    organization: "root".into(),
                    ..Default::default()
                },
                AccountRec {
                    name: "cs".into(),
                    description: "Computer Science".into(),
                    organization: "LC".into(),
                    coordinators: vec!["adam".into()],
                },
            ],
            users: vec![
                UserRec {
                    name: "root".into(),
                    default_account: "root".into(),
                    admin_level: AdminLevel::Administrator,
                    ..Default::default()
                },
                UserRec {
                    name: "adam".into(),
                    default_account: "cs".into(),
                    admin_level: AdminLevel::None,
                    ..Default::default()
                },
            ],
            assocs: vec![
                assoc("root", "", ""),
                assoc("root", "root", "root"),
                AssocRec {
                    limits: AssocLimits {
                        max_jobs: Some(4),
                        max_wall: Some(40),
                        max_tres: Some("node=5".into()),
                        ..Default::default()
                    },
                    shares: 399,
                    ..assoc("cs", "", "root")
                },
                assoc("cs", "adam", "cs"),
            ],
        }
    }

    #[test]
    fn a_dump_is_slurms_flat_file_and_loads_back_as_no_change() {
        let d = db();
        let text = render_dump("tux", &d).unwrap();
        assert!(text.starts_with("# To edit this file"), "{text}");
        let body: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            body,
            vec![
                "QOS - 'normal':Description='Normal QOS default'",
                "Cluster - 'tux':Fairshare=1:QOS='normal'",
                "Parent - 'root'",
                "User - 'root':DefaultAccount='root':AdminLevel='Administrator':Fairshare=1:QOS='normal'",
                "Account - 'cs':Description='Computer Science':Organization='LC':Fairshare=399:MaxTRESPerJob=node=5:MaxJobs=4:MaxWallDurationPerJob=40:QOS='normal'",
                "Parent - 'cs'",
                "User - 'adam':DefaultAccount='cs':Coordinator='cs':Fairshare=1:QOS='normal'",
            ]
        );
        // Loaded back into the same database: nothing to do.
        let p = plan(&parse_file(&text).unwrap(), None, false, &d).unwrap();
        assert_eq!(p.steps, vec![], "{}", p.preview());
        // Without the coordinator: made last, once all else exists.
        let mut bare = d.clone();
        bare.accounts
            .iter_mut()
            .for_each(|a| a.coordinators.clear());
        let p = plan(&parse_file(&text).unwrap(), None, false, &bare).unwrap();
        assert_eq!(
            p.steps.iter().map(|s| &s.request).collect::<Vec<_>>(),
            vec![&AcctRequest::AddCoords(CoordChange {
                users: vec!["adam".into()],
                accounts: vec!["cs".into()],
            })]
        );
        assert!(p
            .preview()
            .contains("Coordinators\n  Making adam coordinator of cs"));
        // Into a cluster that does not exist: everything, parents first.
        let p = plan(&parse_file(&text).unwrap(), Some("Other"), false, &d).unwrap();
        assert_eq!(p.cluster, "other");
        let kinds: Vec<&str> = p
            .steps
            .iter()
            .map(|s| match &s.request {
                AcctRequest::AddClusters(_) => "cluster",
                AcctRequest::ModifyAssocs { .. } => "root",
                AcctRequest::AddAccounts(_) => "account",
                AcctRequest::AddUsers(_) => "user",
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        // The root account and user come with the cluster, as the file has them.
        assert_eq!(kinds, vec!["cluster", "account", "user"]);
        let AcctRequest::AddAccounts(a) = &p.steps[1].request else {
            panic!()
        };
        assert_eq!(a.parent.as_deref(), Some("root"));
        assert_eq!(a.clusters, vec!["other"]);
        assert_eq!(a.assoc.shares, Some(399));
        assert_eq!(a.assoc.limits.max_wall, Some(40));
        assert_eq!(a.description.as_deref(), Some("Computer Science"));
    }

    #[test]
    fn a_load_adds_what_is_missing_modifies_what_differs_and_refuses_what_it_cannot_keep() {
        let d = db();
        let text = "QOS - 'high':Description='High':Priority=10:Preempt='normal':GraceTime=120\n\
            QOS - 'normal':Description='Normal QOS default':MaxJobsPU=5\n\
            Cluster - 'tux':Fairshare=1:QOS='normal'\n\
            Parent - 'root'\n\
            Account - 'cs':Description='CS':Organization='LC':Fairshare=399:MaxNodesPerJob=5:MaxJobs=4:MaxWallDurationPerJob=40:QOS='normal'\n\
            Account - 'bio'\n\
            Parent - 'bio'\n\
            User - 'eve':DefaultAccount='cs':Partition='gpu'\n\
            Parent - 'cs'\n\
            User - 'adam':Fairshare=2\n\
            User - 'eve'\n";
        let p = plan(&parse_file(text).unwrap(), None, false, &d).unwrap();
        let preview = p.preview();
        let AcctRequest::AddQos(q) = &p.steps[0].request else {
            panic!("{preview}")
        };
        // Seconds, as Slurm's files give GraceTime; preemption set after.
        assert_eq!((q[0].priority, q[0].grace_time), (10, 120));
        assert!(q[0].preempt.is_empty());
        assert!(
            preview.contains("Modifying high: preempt=normal"),
            "{preview}"
        );
        assert!(
            preview.contains("Modifying normal: description=Normal QOS default maxjobspu=5"),
            "{preview}"
        );
        // The legacy MaxNodesPerJob is MaxTRESPerJob=node=5: no change there,
        // but the description differs.
        assert!(!preview.contains("Modifying cs (parent"), "{preview}");
        assert!(preview.contains("Modifying cs's description"), "{preview}");
        assert!(preview.contains("Adding bio (parent root)"), "{preview}");
        assert!(
            preview.contains("Adding eve to bio (partition gpu)"),
            "{preview}"
        );
        assert!(
            preview.contains("Modifying adam in cs fairshare=2"),
            "{preview}"
        );
        assert!(preview.contains("Adding eve to cs"), "{preview}");
        // eve's first association made her default bio; the file says cs.
        let last = p.steps.last().unwrap();
        let AcctRequest::ModifyUsers { filter, set, .. } = &last.request else {
            panic!("{preview}")
        };
        assert_eq!(filter.names, vec!["eve"]);
        assert_eq!(set.default_account, Set::To("cs".into()));
        let AcctRequest::AddUsers(u) = &p
            .steps
            .iter()
            .find(|s| s.what.starts_with("Adding eve to bio"))
            .unwrap()
            .request
        else {
            panic!()
        };
        assert_eq!(u.default_account.as_deref(), Some("bio"));
        assert_eq!(u.partitions, vec!["gpu"]);

        // Slurm's older titles, and children before any Parent line: the
        // root's, with Slurm's note.
        let p = plan(
            &parse_file("Machine - 'tux'\nProject - 'phys'\nUser - 'adam'\n").unwrap(),
            None,
            false,
            &d,
        )
        .unwrap();
        assert_eq!(p.notes.len(), 1, "{:?}", p.notes);
        assert!(p.notes[0].contains("No parent given creating off root"));
        assert!(
            p.preview().contains("Adding phys (parent root)")
                && p.preview().contains("Adding adam to root"),
            "{}",
            p.preview()
        );

        // Clean: the cluster is removed and everything added again.
        let p = plan(&parse_file(text).unwrap(), None, true, &d).unwrap();
        assert!(matches!(p.steps[0].request, AcctRequest::DeleteClusters(_)));

        // What cannot be kept here is refused, naming the line and option.
        for (bad, want) in [
            ("Cluster - 'tux'\nParent - 'root'\nAccount - 'a':Bogus=1\n", "Line 3: Unknown option: bogus"),
            ("Cluster - 'tux'\nParent - 'root'\nUser - 'a':DefaultAccount='root':MaxTRESPerNode=cpu=2\n", "Line 3: maxtrespernode cannot be loaded"),
            ("QOS - 'q':MaxTRESMinsPerJob=cpu=2\nCluster - 'tux'\n", "Line 1: maxtresminsperjob cannot be loaded"),
            ("Cluster - 'tux'\nParent - 'nosuch'\n", "Line 2: Parent 'nosuch'"),
            ("Parent - 'root'\n", "You need to specify a cluster name first"),
            ("Cluster - 'tux'\nCluster - 'b'\n", "Line 2: Only one cluster"),
            ("Cluster - 'tux'\nQOS - 'x'\n", "Line 2: QOS lines come before"),
            ("Cluster - 'tux'\nParent - 'root'\nAccount - 'a':MaxJobs=many\n", "Line 3: Invalid value 'many'"),
            ("Cluster - 'tux'\nParent - 'root'\nAccount - 'a'\nAccount - 'a'\n", "Line 4: account 'a' is defined twice"),
            ("Cluster - 'tux'\nParent - 'root'\nUser - 'z':DefaultAccount='cs'\n", "Line 3: user 'z' has DefaultAccount='cs' but no association"),
        ] {
            let e = parse_file(bad)
                .and_then(|l| plan(&l, None, false, &d))
                .unwrap_err();
            assert!(e.contains(want), "{bad:?}: {e}");
        }
    }
}
