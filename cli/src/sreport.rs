//! `sreport`: usage reports from slurmdbd's hourly/daily/monthly rollups.
//!
//! `sreport [-n] [-p|-P] [-t units] cluster utilization|AccountUtilizationByUser
//! [start=] [end=] [clusters=] [accounts=] [users=]`, `user topusage
//! [TopCount=N]` and `reservation utilization [names=] [format=]`.
//! Units: Seconds, Minutes (default), Hours, Percent, and the
//! `SecPer`/`MinPer`/`HourPer` forms that add the percentage.

use crate::common;
use slurm_common::timefmt::{format_timestamp, parse_timestamp};
use slurm_proto::acct::*;
use std::collections::{BTreeMap, HashMap};

/// How usage is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Units {
    Seconds,
    Minutes,
    Hours,
    Percent,
    SecPer,
    MinPer,
    HourPer,
}

impl Units {
    pub fn parse(s: &str) -> Option<Units> {
        Some(match s.to_ascii_lowercase().as_str() {
            "seconds" | "s" => Units::Seconds,
            "minutes" | "m" => Units::Minutes,
            "hours" | "h" => Units::Hours,
            "percent" | "p" => Units::Percent,
            "secper" => Units::SecPer,
            "minper" => Units::MinPer,
            "hourper" => Units::HourPer,
            _ => return None,
        })
    }

    /// How the banner names these units (after "Usage reported in "), of
    /// `what` ("CPU", or "TRES" for reservations), as Slurm's.
    fn label_of(self, what: &str) -> String {
        match self {
            Units::Seconds => format!("{what} Seconds"),
            Units::Minutes => format!("{what} Minutes"),
            Units::Hours => format!("{what} Hours"),
            Units::SecPer => format!("{what} Seconds/Percentage of Total"),
            Units::MinPer => format!("{what} Minutes/Percentage of Total"),
            Units::HourPer => format!("{what} Hours/Percentage of Total"),
            Units::Percent => "Percentage of Total".into(),
        }
    }

    fn label(self) -> String {
        self.label_of("CPU")
    }

    /// `secs` of `total`, as these units print it.
    pub fn fmt(self, secs: u64, total: u64) -> String {
        let pct = if total == 0 {
            0.0
        } else {
            secs as f64 * 100.0 / total as f64
        };
        let amount = |div: u64| ((secs + div / 2) / div).to_string();
        match self {
            Units::Seconds => secs.to_string(),
            Units::Minutes => amount(60),
            Units::Hours => amount(3600),
            Units::Percent => format!("{pct:.2}%"),
            Units::SecPer => format!("{}({pct:.2}%)", secs),
            Units::MinPer => format!("{}({pct:.2}%)", amount(60)),
            Units::HourPer => format!("{}({pct:.2}%)", amount(3600)),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Opts {
    pub header: bool,
    pub parsable: Option<bool>,
    pub units: Units,
    pub report: String,
    pub start: i64,
    pub end: i64,
    pub clusters: Vec<String>,
    pub accounts: Vec<String>,
    pub users: Vec<String>,
    pub top: usize,
    /// Job reports: the CPU counts where size columns begin (`Grouping=`).
    pub grouping: Vec<u32>,
    /// Job reports: jobs counted instead of time (`PrintJobCount`).
    pub job_count: bool,
    /// `FlatView`: every account on its own line, no tree.
    pub flat: bool,
    /// `AcctAsParent`: the accounts' children, each with its subtree.
    pub acct_as_parent: bool,
    pub partitions: Vec<String>,
    pub wckeys: Vec<String>,
    /// `reservation utilization`: the reservations (`Names=`, or words
    /// after the report's name) and nodes (`Nodes=`) asked for.
    pub names: Vec<String>,
    pub nodes: Vec<String>,
    /// `Format=` (the reservation report's columns).
    pub format: Option<String>,
}

use crate::fmt::split_list as list;

pub(crate) fn midnight(t: i64) -> i64 {
    use chrono::TimeZone;
    chrono::Local
        .timestamp_opt(t, 0)
        .single()
        .and_then(|d| d.date_naive().and_hms_opt(0, 0, 0))
        .and_then(|d| d.and_local_timezone(chrono::Local).single())
        .map(|d| d.timestamp())
        .unwrap_or(t - t.rem_euclid(86400))
}

/// sreport's options (the parser's table, also read by [`crate::compat`]).
pub(crate) const OPTS: &[crate::fmt::Opt] = {
    use crate::fmt::{Arg::*, Opt};
    &[
        Opt::new(Some('a'), "all_clusters", No),
        Opt::new(Some('M'), "cluster", Required),
        Opt::new(None, "federation", No),
        Opt::new(Some('h'), "help", No),
        Opt::new(None, "local", No),
        Opt::new(Some('n'), "noheader", No),
        Opt::new(Some('p'), "parsable", No),
        Opt::new(Some('P'), "parsable2", No),
        Opt::new(Some('Q'), "quiet", No),
        Opt::new(Some('t'), "time-format", Required),
        Opt::new(Some('T'), "tres", Required),
        Opt::new(Some('v'), "verbose", No),
        Opt::new(Some('V'), "version", No),
        Opt::new(None, "usage", No),
    ]
};

pub(crate) const COMPAT_NOTES: &[(&str, crate::compat::Support)] = {
    use crate::compat::Support::Differs;
    &[
        (
            "federation",
            Differs("no federations: the clusters named (or this one) are reported"),
        ),
        ("local", Differs("no federations: nothing to leave out")),
        (
            "tres",
            Differs("usage is kept for CPUs only: cpu is accepted, other TRES are refused"),
        ),
    ]
};

/// `-T`/`SREPORT_TRES`: usage is rolled up for CPUs only.
fn check_tres(v: &str) -> Result<(), String> {
    for t in list(v) {
        if !t.eq_ignore_ascii_case("cpu") {
            return Err(format!(
                "sreport: error: TRES '{t}' is not reported here: usage is kept for cpu only"
            ));
        }
    }
    Ok(())
}

/// The reports sreport makes: (kind, report, what [`main`] calls it).
const REPORTS: &[(&str, &str, &str)] = &[
    ("cluster", "Utilization", "utilization"),
    ("cluster", "AccountUtilizationByUser", "account_by_user"),
    ("cluster", "UserUtilizationByAccount", "user_by_account"),
    ("cluster", "AccountUtilizationByQOS", "account_by_qos"),
    ("cluster", "UserUtilizationByWckey", "user_by_wckey"),
    ("cluster", "WCKeyUtilizationByUser", "wckey_by_user"),
    ("user", "TopUsage", "topusage"),
    ("job", "SizesByAccount", "sizes_account"),
    ("job", "SizesByAccountAndWckey", "sizes_account_wckey"),
    ("job", "SizesByWckey", "sizes_wckey"),
    ("reservation", "Utilization", "resv_utilization"),
];

/// The reports sreport makes, as `report KIND REPORT` words.
pub(crate) fn compat_words() -> Vec<String> {
    let session = [
        "exit",
        "help",
        "nonparsable",
        "parsable",
        "parsable2",
        "quiet",
        "quit",
        "time",
        "verbose",
        "version",
        "!!",
    ];
    session
        .iter()
        .map(|w| format!("cmd {w}"))
        .chain(
            REPORTS
                .iter()
                .map(|(k, r, _)| format!("report {k} {}", r.to_ascii_lowercase())),
        )
        .collect()
}

pub fn parse_args(args: &[String], now: i64) -> Result<Opts, String> {
    parse_args_env(args, now, &|k| std::env::var(k).ok())
}

/// [`parse_args`] with the environment as `env` gives it (`SREPORT_CLUSTER`,
/// `SREPORT_TRES`; options win over them).
pub fn parse_args_env(
    args: &[String],
    now: i64,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Opts, String> {
    let today = midnight(now);
    let mut o = Opts {
        header: true,
        parsable: None,
        units: Units::Minutes,
        report: String::new(),
        // Default: yesterday.
        start: midnight(today - 1),
        end: today,
        clusters: Vec::new(),
        accounts: Vec::new(),
        users: Vec::new(),
        top: 10,
        grouping: vec![50, 250, 500, 1000],
        job_count: false,
        flat: false,
        acct_as_parent: false,
        partitions: Vec::new(),
        wckeys: Vec::new(),
        names: Vec::new(),
        nodes: Vec::new(),
        format: None,
    };
    if let Some(c) = env("SREPORT_CLUSTER") {
        o.clusters = list(&c);
    }
    if let Some(t) = env("SREPORT_TRES") {
        check_tres(&t)?;
    }
    // Federations do not exist here: these change nothing.
    let _ = (env("SREPORT_FEDERATION"), env("SREPORT_LOCAL"));
    let mut words = Vec::new();
    for p in crate::fmt::getopt("sreport", args, OPTS)? {
        let (name, v) = match p {
            crate::fmt::Parsed::Word(w) => {
                words.push(w);
                continue;
            }
            crate::fmt::Parsed::Opt(n, v) => (n, v.unwrap_or_default()),
        };
        match name {
            "noheader" => o.header = false,
            "parsable" => o.parsable = Some(true),
            "parsable2" => o.parsable = Some(false),
            "time-format" => {
                o.units = Units::parse(&v).ok_or_else(|| format!("Unknown time format {v}"))?
            }
            "cluster" => o.clusters = list(&v),
            "tres" => check_tres(&v)?,
            // One cluster; -v adds nothing to what is printed.
            _ => {}
        }
    }
    // The report's words (lower case), and as given (names keep their case).
    let mut report = Vec::new();
    let mut given: Vec<String> = Vec::new();
    for w in words {
        match w.split_once('=') {
            Some((k, v)) => match k.to_ascii_lowercase().as_str() {
                "start" => o.start = parse_timestamp(v, now).map_err(|e| e.to_string())?,
                "end" => o.end = parse_timestamp(v, now).map_err(|e| e.to_string())?,
                "cluster" | "clusters" => o.clusters = list(v),
                "account" | "accounts" => o.accounts = list(v),
                "user" | "users" => o.users = list(v),
                "topcount" => o.top = v.parse().map_err(|_| format!("Invalid TopCount '{v}'"))?,
                "grouping" => {
                    let mut g = Vec::new();
                    for x in list(v) {
                        let n: u32 = x
                            .parse()
                            .ok()
                            .filter(|n| *n > 0 && g.last().is_none_or(|l| n > l))
                            .ok_or_else(|| {
                                format!(" Invalid Grouping '{v}': increasing CPU counts")
                            })?;
                        g.push(n);
                    }
                    o.grouping = g;
                }
                "partition" | "partitions" => o.partitions = list(v),
                "wckey" | "wckeys" => o.wckeys = list(v),
                "names" | "name" => o.names.extend(list(v)),
                "nodes" | "node" => o.nodes.extend(
                    slurm_common::hostlist::expand(v)
                        .map_err(|e| format!(" Invalid node list '{v}': {e}"))?,
                ),
                "format" => o.format = Some(v.to_string()),
                "tree" | "group" => {}
                other => return Err(format!(" Unknown condition: {other}")),
            },
            None => match w.to_ascii_lowercase().as_str() {
                "printjobcount" => o.job_count = true,
                "flatview" => o.flat = true,
                "acctasparent" => o.acct_as_parent = true,
                lw => {
                    report.push(lw.to_string());
                    given.push(w.clone());
                }
            },
        }
    }
    // `reservation utilization NAME...`: the words after the report name
    // the reservations (Slurm's `Names=`).
    if report.len() > 2 && report[0] == "reservation" {
        report.truncate(2);
        o.names.extend(given.drain(2..));
    }
    o.report = match REPORTS.iter().find(|(kind, name, _)| {
        report.len() == 2 && report[0] == *kind && report[1] == name.to_ascii_lowercase()
    }) {
        Some((_, _, id)) => id.to_string(),
        None => {
            return Err(format!(
                "Not valid report {}: use cluster Utilization|AccountUtilizationByUser|\
                 UserUtilizationByAccount|AccountUtilizationByQOS|UserUtilizationByWckey|\
                 WCKeyUtilizationByUser, user TopUsage, \
                 job SizesByAccount|SizesByAccountAndWckey|SizesByWckey \
                 or reservation Utilization",
                report.join(" ")
            ))
        }
    };
    if o.end <= o.start {
        return Err("The end time must be after the start time".into());
    }
    Ok(o)
}

fn table(cols: &[(&str, usize)], rows: &[Vec<String>], o: &Opts) -> String {
    crate::fmt::acct_table(cols, rows, o.parsable, o.header)
}

fn banner(title: &str, o: &Opts) -> String {
    if !o.header || o.parsable.is_some() {
        return String::new();
    }
    let rule = "-".repeat(80);
    format!(
        "{rule}\n{title} {} - {} ({} secs)\nUsage reported in {}\n{rule}\n",
        format_timestamp(o.start),
        format_timestamp(o.end - 1),
        o.end - o.start,
        o.units.label()
    )
}

/// `reservation utilization`'s fields in the order Slurm's matches them:
/// name, the fewest letters that name it, its column (key, title, width;
/// `Allocated` and `Idle` are wider with a percentage). A field is named
/// by any beginning of its name at least that long; the first that
/// matches is taken (`tr` is TresTime, as Slurm's).
const RESV_FIELDS: &[(&str, usize, (&str, &str, i64))] = &[
    ("allocated", 2, ("allocated", "Allocated", 20)),
    ("cluster", 2, ("cluster", "Cluster", 9)),
    ("end", 2, ("end", "End", 19)),
    ("flags", 2, ("flags", "Flags", 20)),
    ("idle", 1, ("idle", "Idle", 20)),
    ("name", 2, ("name", "Name", 9)),
    ("nodes", 2, ("nodes", "Nodes", 15)),
    ("start", 2, ("start", "Start", 19)),
    ("totaltime", 2, ("totaltime", "TotalTime", 9)),
    ("trescount", 5, ("trescount", "TRES count", 10)),
    ("cpucount", 2, ("trescount", "TRES count", 10)),
    ("count", 2, ("trescount", "TRES count", 10)),
    ("tresname", 5, ("tresname", "TRES Name", 14)),
    ("trestime", 2, ("trestime", "TRES Time", 9)),
    ("cputime", 5, ("trestime", "TRES Time", 9)),
];

/// `reservation utilization [Names=] [Nodes=] [Start=] [End=]
/// [Clusters=] [Format=]`: for each record of each reservation in effect
/// in the period (as Slurm's, the record's whole time, not cut to the
/// period), its CPUs, what jobs used of them (`Allocated`) and the rest
/// (`Idle`). Default columns `Cluster,Name,Start,End,TresName,Allocated,Idle`.
pub fn resv_utilization(resvs: &[ResvRec], o: &Opts) -> Result<String, String> {
    let fmt = o
        .format
        .clone()
        .unwrap_or_else(|| "Cl,name,start,end,TresName,al,i".into());
    let per = matches!(o.units, Units::SecPer | Units::MinPer | Units::HourPer);
    let mut cols: Vec<(&str, &str, i64)> = Vec::new();
    for item in list(&fmt) {
        let (name, width) = match item.split_once('%') {
            Some((n, w)) => (
                n.to_string(),
                Some(
                    w.parse::<i64>()
                        .map_err(|_| format!(" Invalid field width in '{item}'"))?,
                ),
            ),
            None => (item.clone(), None),
        };
        let lower = name.to_ascii_lowercase();
        if ["reservationid", "associations"]
            .iter()
            .any(|f| lower.len() >= 2 && f.starts_with(&lower))
        {
            return Err(format!(
                " Field '{name}' is not kept here: reservations have no numeric ids or associations"
            ));
        }
        let (_, _, col) = RESV_FIELDS
            .iter()
            .find(|(full, min, _)| lower.len() >= *min && full.starts_with(&lower))
            .ok_or_else(|| format!(" Unknown field '{name}'"))?;
        let wide = matches!(col.0, "allocated" | "idle") && per;
        cols.push((col.0, col.1, width.unwrap_or(if wide { 29 } else { col.2 })));
    }
    let rows: Vec<Vec<String>> = resvs
        .iter()
        .filter(|r| r.time_end > r.time_start && r.cpus > 0)
        .map(|r| {
            let total_time = (r.time_end - r.time_start) as u64;
            let reported = total_time * u64::from(r.cpus);
            let idle = reported.saturating_sub(r.alloc_secs);
            cols.iter()
                .map(|(k, _, _)| match *k {
                    "allocated" => o.units.fmt(r.alloc_secs, reported),
                    "cluster" => r.cluster.clone(),
                    "end" => format_timestamp(r.time_end),
                    "flags" => r.flags.clone(),
                    "idle" => o.units.fmt(idle, reported),
                    "name" => r.name.clone(),
                    "nodes" => r.nodes.clone(),
                    "start" => format_timestamp(r.time_start),
                    "totaltime" => slurm_common::timefmt::format_duration_hms(total_time as i64),
                    "trescount" => r.cpus.to_string(),
                    "tresname" => "cpu".into(),
                    "trestime" => slurm_common::timefmt::format_duration_hms(reported as i64),
                    _ => String::new(),
                })
                .collect()
        })
        .collect();
    let mut out = String::new();
    if o.header && o.parsable.is_none() {
        let rule = "-".repeat(80);
        let units = o.units.label_of("TRES");
        out += &format!(
            "{rule}\nReservation Utilization {} - {}\nUsage reported in {units}\n{rule}\n",
            format_timestamp(o.start),
            format_timestamp(o.end - 1),
        );
    }
    let titles: Vec<(&str, i64)> = cols.iter().map(|c| (c.1, c.2)).collect();
    Ok(out + &crate::fmt::acct_table_aligned(&titles, &rows, o.parsable, o.header))
}

/// Each cluster's reported CPU-seconds (what percentages are of).
fn cluster_totals(r: &UsageReport) -> HashMap<&str, u64> {
    r.clusters
        .iter()
        .map(|c| (c.cluster.as_str(), c.total_secs))
        .collect()
}

/// `cluster utilization`.
pub fn utilization(r: &UsageReport, o: &Opts) -> String {
    let cols = [
        ("Cluster", 9),
        ("Allocated", 10),
        ("Down", 9),
        ("PLND Down", 9),
        ("Idle", 10),
        ("Planned", 9),
        ("Reported", 10),
    ];
    let rows: Vec<Vec<String>> = r
        .clusters
        .iter()
        .map(|c| {
            let t = c.total_secs;
            vec![
                c.cluster.clone(),
                o.units.fmt(c.alloc_secs, t),
                o.units.fmt(c.down_secs, t),
                o.units.fmt(0, t),
                o.units.fmt(c.idle_secs, t),
                o.units.fmt(0, t),
                o.units.fmt(t, t),
            ]
        })
        .collect();
    banner("Cluster Utilization", o) + &table(&cols, &rows, o)
}

fn proper_name(user: &str) -> String {
    slurm_common::users::user_by_name(user)
        .map(|u| u.gecos.split(',').next().unwrap_or("").to_string())
        .unwrap_or_default()
}

/// `cluster AccountUtilizationByUser`: each account (its subtree's usage)
/// followed by its users, in tree order.
pub fn account_by_user(r: &UsageReport, assocs: &[AssocRec], o: &Opts) -> String {
    let cols = [
        ("Cluster", 9),
        ("Account", 15),
        ("Login", 9),
        ("Proper Name", 15),
        ("Used", 9),
        ("Energy", 8),
    ];
    let total = cluster_totals(r);
    let mut used: HashMap<(String, String, String), u64> = HashMap::new();
    for a in &r.assocs {
        *used
            .entry((a.cluster.clone(), a.account.clone(), a.user.clone()))
            .or_default() += a.alloc_secs;
    }
    // Account usage = its users' plus its sub-accounts'.
    let mut acct_used: HashMap<(String, String), u64> = HashMap::new();
    let parent = account_parents(assocs);
    for ((c, acct, _), v) in &used {
        let mut cur = Some(acct.clone());
        let mut depth = 0;
        while let Some(a) = cur {
            *acct_used.entry((c.clone(), a.clone())).or_default() += v;
            cur = parent.get(&(c.clone(), a)).cloned();
            depth += 1;
            if depth > 64 {
                break;
            }
        }
    }
    let mut rows = Vec::new();
    for a in assocs {
        if !o.accounts.is_empty() && !o.accounts.contains(&a.account) {
            continue;
        }
        let t = total.get(a.cluster.as_str()).copied().unwrap_or(0);
        if a.is_user() {
            if !o.users.is_empty() && !o.users.contains(&a.user) {
                continue;
            }
            let v = used
                .get(&(a.cluster.clone(), a.account.clone(), a.user.clone()))
                .copied()
                .unwrap_or(0);
            rows.push(vec![
                a.cluster.clone(),
                a.account.clone(),
                a.user.clone(),
                proper_name(&a.user),
                o.units.fmt(v, t),
                "0".into(),
            ]);
        } else {
            let v = acct_used
                .get(&(a.cluster.clone(), a.account.clone()))
                .copied()
                .unwrap_or(0);
            rows.push(vec![
                a.cluster.clone(),
                a.account.clone(),
                String::new(),
                String::new(),
                o.units.fmt(v, t),
                "0".into(),
            ]);
        }
    }
    banner("Cluster/Account/User Utilization", o) + &table(&cols, &rows, o)
}

/// Each account's parent, by (cluster, account).
fn account_parents(assocs: &[AssocRec]) -> HashMap<(String, String), String> {
    assocs
        .iter()
        .filter(|a| !a.is_user())
        .filter_map(|a| {
            a.parent
                .clone()
                .map(|p| ((a.cluster.clone(), a.account.clone()), p))
        })
        .collect()
}

/// The job records of the report's window on `clusters`.
fn window_jobs(
    conf: &slurm_common::conf::SlurmConf,
    o: &Opts,
    clusters: &[String],
) -> Result<Vec<JobRow>, String> {
    let q = JobQuery {
        clusters: clusters.to_vec(),
        start: Some(o.start),
        end: Some(o.end),
        // Every run of a requeued job used the cluster.
        duplicates: true,
        ..Default::default()
    };
    match common::dbd_ask(conf, AcctRequest::GetJobs(q))? {
        AcctResponse::Jobs(rows) => Ok(rows),
        _ => Err("unexpected answer from slurmdbd".into()),
    }
}

/// The columns of the reports by user, then account.
const USER_ACCOUNT_COLS: [(&str, usize); 6] = [
    ("Cluster", 9),
    ("Login", 9),
    ("Proper Name", 15),
    ("Account", 15),
    ("Used", 9),
    ("Energy", 8),
];

/// `cluster UserUtilizationByAccount`: each user's usage in each account,
/// most used first.
pub fn user_by_account(r: &UsageReport, o: &Opts) -> String {
    let cols = USER_ACCOUNT_COLS;
    let total = cluster_totals(r);
    let mut per: BTreeMap<(String, String, String), u64> = BTreeMap::new();
    for a in &r.assocs {
        if !o.accounts.is_empty() && !o.accounts.contains(&a.account) {
            continue;
        }
        *per.entry((a.cluster.clone(), a.user.clone(), a.account.clone()))
            .or_default() += a.alloc_secs;
    }
    let mut v: Vec<_> = per.into_iter().filter(|(_, s)| *s > 0).collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let rows: Vec<Vec<String>> = v
        .into_iter()
        .map(|((c, u, a), s)| {
            let t = total.get(c.as_str()).copied().unwrap_or(0);
            vec![
                c,
                u.clone(),
                proper_name(&u),
                a,
                o.units.fmt(s, t),
                "0".into(),
            ]
        })
        .collect();
    banner("Cluster/User/Account Utilization", o) + &table(&cols, &rows, o)
}

/// The size columns of the job reports: `0-49 CPUs` ... `>= 1000 CPUs`.
fn size_columns(grouping: &[u32]) -> Vec<String> {
    let mut cols = Vec::new();
    let mut from = 0;
    for &g in grouping {
        cols.push(format!("{from}-{} CPUs", g - 1));
        from = g;
    }
    cols.push(format!(">= {from} CPUs"));
    cols
}

/// Which size column a job of `cpus` CPUs falls in.
fn size_column(grouping: &[u32], cpus: u32) -> usize {
    grouping.iter().take_while(|&&g| cpus >= g).count()
}

/// A job's CPU-seconds within the report's window (0 if it never ran).
fn cpu_secs_in(j: &AcctJob, o: &Opts, now: i64) -> u64 {
    let Some(start) = j.start_time else { return 0 };
    let end = j.end_time.unwrap_or(now);
    let secs = (end.min(o.end) - start.max(o.start)).max(0) as u64;
    secs * u64::from(j.alloc_cpus)
}

/// `job SizesByAccount`, `SizesByAccountAndWckey`, `SizesByWckey`: time
/// (or, with `PrintJobCount`, jobs) per account or wckey by job size.
/// Accounts: one line for the whole tree (root), the named accounts with
/// their subtrees, their children (`AcctAsParent`), or each account on its
/// own (`FlatView`).
pub fn job_sizes(rows: &[JobRow], assocs: &[AssocRec], o: &Opts, now: i64) -> String {
    let sizes = size_columns(&o.grouping);
    let by_wckey = o.report == "sizes_wckey";
    let with_wckey = o.report == "sizes_account_wckey";
    let label = if by_wckey { "Wckey" } else { "Account" };
    let parent = account_parents(assocs);
    // The line an account's jobs count on: itself (flat), or the listed
    // account (or child of one, with AcctAsParent) above it.
    let tops: Vec<String> = if o.accounts.is_empty() {
        vec!["root".to_string()]
    } else {
        o.accounts.clone()
    };
    let line_of = |cluster: &str, account: &str| -> Option<String> {
        if o.flat {
            return (o.accounts.is_empty() || o.accounts.iter().any(|a| a == account))
                .then(|| account.to_string());
        }
        let mut cur = account.to_string();
        let mut below: Option<String> = None;
        for _ in 0..64 {
            if tops.contains(&cur) {
                return Some(if o.acct_as_parent {
                    below.unwrap_or(cur)
                } else {
                    cur
                });
            }
            let up = parent.get(&(cluster.to_string(), cur.clone()))?.clone();
            below = Some(cur);
            cur = up;
        }
        None
    };
    let mut table_rows: BTreeMap<(String, String), Vec<u64>> = BTreeMap::new();
    let mut cluster_total: HashMap<String, u64> = HashMap::new();
    for (r, secs) in selected(rows, o, now) {
        let j = &r.job;
        let v = if o.job_count { 1 } else { secs };
        let name = if by_wckey {
            Some(j.wckey.clone())
        } else {
            line_of(&r.cluster, &j.account).map(|a| {
                if with_wckey {
                    format!("{a}:{}", j.wckey)
                } else {
                    a
                }
            })
        };
        if let Some(name) = name {
            *cluster_total.entry(r.cluster.clone()).or_default() += v;
            let e = table_rows
                .entry((r.cluster.clone(), name))
                .or_insert_with(|| vec![0; sizes.len()]);
            e[size_column(&o.grouping, j.alloc_cpus)] += v;
        }
    }
    let mut cols: Vec<(&str, usize)> = vec![("Cluster", 9), (label, 9)];
    cols.extend(sizes.iter().map(|s| (s.as_str(), 13)));
    cols.push(("% of cluster", 12));
    let out_rows: Vec<Vec<String>> = table_rows
        .into_iter()
        .map(|((c, name), v)| {
            let total = cluster_total.get(&c).copied().unwrap_or(0);
            let sum: u64 = v.iter().sum();
            let pct = if total == 0 {
                0.0
            } else {
                sum as f64 * 100.0 / total as f64
            };
            let mut row = vec![c, name];
            row.extend(v.iter().map(|&x| {
                if o.job_count {
                    x.to_string()
                } else {
                    o.units.fmt(x, total)
                }
            }));
            row.push(format!("{pct:.2}%"));
            row
        })
        .collect();
    let mut head = banner("Job Sizes", o);
    if o.job_count && !head.is_empty() {
        head = head.replace(
            &format!("Usage reported in {}", o.units.label()),
            "Units are in number of jobs ran",
        );
    } else if !head.is_empty() {
        head = head.replace("Usage reported in CPU ", "Time reported in ");
    }
    head + &table(&cols, &out_rows, o)
}

/// The jobs of `rows` the report's users, partitions and wckeys select
/// that have time in the window, with their CPU-seconds in it (jobs with
/// none are in no report).
fn selected<'a>(
    rows: &'a [JobRow],
    o: &'a Opts,
    now: i64,
) -> impl Iterator<Item = (&'a JobRow, u64)> + 'a {
    rows.iter().filter_map(move |r| {
        let j = &r.job;
        let picked = (o.partitions.is_empty() || o.partitions.contains(&j.partition))
            && (o.wckeys.is_empty() || o.wckeys.contains(&j.wckey))
            && (o.users.is_empty() || o.users.contains(&j.user));
        let secs = if picked { cpu_secs_in(j, o, now) } else { 0 };
        (secs > 0).then_some((r, secs))
    })
}

/// The window's CPU-seconds of `rows`' jobs (those the report's users,
/// partitions and wckeys select; accounts are chosen by the caller),
/// summed by `key` (`None`: left out), per cluster.
fn job_usage<K: Ord>(
    rows: &[JobRow],
    o: &Opts,
    now: i64,
    key: impl Fn(&str, &AcctJob) -> Option<K>,
) -> BTreeMap<(String, K), u64> {
    let mut out = BTreeMap::new();
    for (r, secs) in selected(rows, o, now) {
        let j = &r.job;
        if let Some(k) = key(&r.cluster, j) {
            *out.entry((r.cluster.clone(), k)).or_default() += secs;
        }
    }
    out
}

/// `cluster WCKeyUtilizationByUser` and `UserUtilizationByWckey`: the
/// window's CPU time of jobs by wckey and user (`by_user`: each user's
/// wckeys, most used first; else each wckey, by name, with its total line
/// and then its users). From the window's job records.
pub fn wckey_reports(
    rows: &[JobRow],
    usage: &UsageReport,
    o: &Opts,
    now: i64,
    by_user: bool,
) -> String {
    let total = cluster_totals(usage);
    let used = job_usage(rows, o, now, |_, j| Some((j.wckey.clone(), j.user.clone())));
    let fmt = |c: &str, v: u64| o.units.fmt(v, total.get(c).copied().unwrap_or(0));
    let mut out_rows = Vec::new();
    if by_user {
        let mut v: Vec<_> = used.iter().collect();
        // Users by their total, then each user's wckeys by use.
        let mut per_user: BTreeMap<(&str, &str), u64> = BTreeMap::new();
        for ((c, (_, u)), s) in &used {
            *per_user.entry((c.as_str(), u.as_str())).or_default() += s;
        }
        v.sort_by(|a, b| {
            let ua = per_user[&(a.0 .0.as_str(), a.0 .1 .1.as_str())];
            let ub = per_user[&(b.0 .0.as_str(), b.0 .1 .1.as_str())];
            (
                &a.0 .0,
                std::cmp::Reverse(ua),
                &a.0 .1 .1,
                std::cmp::Reverse(a.1),
            )
                .cmp(&(
                    &b.0 .0,
                    std::cmp::Reverse(ub),
                    &b.0 .1 .1,
                    std::cmp::Reverse(b.1),
                ))
        });
        for ((c, (w, u)), s) in v {
            out_rows.push(vec![
                c.clone(),
                u.clone(),
                proper_name(u),
                w.clone(),
                fmt(c, *s),
            ]);
        }
        let cols = [
            ("Cluster", 9),
            ("Login", 9),
            ("Proper Name", 15),
            ("WCKey", 15),
            ("Used", 9),
        ];
        return banner("Cluster/User/WCKey Utilization", o) + &table(&cols, &out_rows, o);
    }
    let mut per_key: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for ((c, (w, _)), s) in &used {
        *per_key.entry((c.as_str(), w.as_str())).or_default() += s;
    }
    for ((c, w), s) in &per_key {
        out_rows.push(vec![
            c.to_string(),
            w.to_string(),
            String::new(),
            String::new(),
            fmt(c, *s),
        ]);
        let mut users: Vec<_> = used
            .iter()
            .filter(|((uc, (uw, _)), _)| uc == c && uw == w)
            .collect();
        users.sort_by(|a, b| b.1.cmp(a.1).then(a.0 .1 .1.cmp(&b.0 .1 .1)));
        for ((_, (_, u)), s) in users {
            out_rows.push(vec![
                c.to_string(),
                w.to_string(),
                u.clone(),
                proper_name(u),
                fmt(c, *s),
            ]);
        }
    }
    let cols = [
        ("Cluster", 9),
        ("WCKey", 15),
        ("Login", 9),
        ("Proper Name", 15),
        ("Used", 9),
    ];
    banner("Cluster/WCKey/User Utilization", o) + &table(&cols, &out_rows, o)
}

/// `cluster AccountUtilizationByQOS`: each account's (and its
/// sub-accounts') CPU time by QOS, accounts in tree order, from the
/// window's job records.
pub fn account_by_qos(
    rows: &[JobRow],
    usage: &UsageReport,
    assocs: &[AssocRec],
    o: &Opts,
    now: i64,
) -> String {
    let total = cluster_totals(usage);
    let parent = account_parents(assocs);
    let used = job_usage(rows, o, now, |_, j| {
        Some((j.account.clone(), j.qos.clone()))
    });
    // An account's line counts its sub-accounts' jobs too.
    let mut sums: BTreeMap<(String, String, String), u64> = BTreeMap::new();
    for ((c, (acct, qos)), s) in &used {
        let mut cur = Some(acct.clone());
        for _ in 0..64 {
            let Some(a) = cur else { break };
            *sums.entry((c.clone(), a.clone(), qos.clone())).or_default() += s;
            cur = parent.get(&(c.clone(), a)).cloned();
        }
    }
    let mut out_rows = Vec::new();
    for a in assocs.iter().filter(|a| !a.is_user()) {
        if !o.accounts.is_empty() && !o.accounts.contains(&a.account) {
            continue;
        }
        for ((c, acct, qos), s) in &sums {
            if *c == a.cluster && *acct == a.account {
                let t = total.get(c.as_str()).copied().unwrap_or(0);
                out_rows.push(vec![
                    c.clone(),
                    acct.clone(),
                    qos.clone(),
                    o.units.fmt(*s, t),
                    "0".into(),
                ]);
            }
        }
    }
    let cols = [
        ("Cluster", 9),
        ("Account", 15),
        ("QOS", 12),
        ("Used", 9),
        ("Energy", 8),
    ];
    banner("Cluster/Account/QOS Utilization", o) + &table(&cols, &out_rows, o)
}

/// `user topusage`: the users with the most usage, each with the accounts
/// they used.
pub fn top_usage(r: &UsageReport, o: &Opts) -> String {
    let cols = USER_ACCOUNT_COLS;
    let total = cluster_totals(r);
    let mut per: BTreeMap<(String, String), (u64, Vec<String>)> = BTreeMap::new();
    for a in &r.assocs {
        let e = per.entry((a.cluster.clone(), a.user.clone())).or_default();
        e.0 += a.alloc_secs;
        if !e.1.contains(&a.account) {
            e.1.push(a.account.clone());
        }
    }
    let mut v: Vec<_> = per.into_iter().filter(|(_, (s, _))| *s > 0).collect();
    v.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.0.cmp(&b.0)));
    v.truncate(o.top);
    let rows: Vec<Vec<String>> = v
        .into_iter()
        .map(|((c, u), (s, accts))| {
            let t = total.get(c.as_str()).copied().unwrap_or(0);
            vec![
                c,
                u.clone(),
                proper_name(&u),
                accts.join(","),
                o.units.fmt(s, t),
                "0".into(),
            ]
        })
        .collect();
    banner(&format!("Top {} Users", o.top), o) + &table(&cols, &rows, o)
}

const USAGE: &str = "Usage: sreport [-n] [-p|-P] [-Q] [-t units] [-M clusters] \
     cluster utilization|AccountUtilizationByUser|UserUtilizationByAccount \
     | user topusage | job SizesByAccount|SizesByAccountAndWckey|SizesByWckey \
     | reservation utilization \
     [start=] [end=] [clusters=] [accounts=] [users=] [TopCount=] [Grouping=] \
     [PrintJobCount] [FlatView] [AcctAsParent] [partitions=] [wckeys=] \
     [names=] [nodes=] [format=]";

pub fn main() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed = crate::fmt::getopt("sreport", &args, OPTS).unwrap_or_default();
    let asks = |names: &[&str]| {
        parsed
            .iter()
            .any(|p| matches!(p, crate::fmt::Parsed::Opt(n, _) if names.contains(n)))
    };
    if asks(&["help"]) {
        println!("{}\n{USAGE}", crate::help::help("sreport").trim_end());
        return 0;
    }
    if asks(&["usage"]) {
        println!("{}", crate::help::usage("sreport").trim_end());
        return 0;
    }
    if asks(&["version"]) {
        println!("slurm {}", slurm_proto::SLURM_VERSION);
        return 0;
    }
    let has_words = parsed
        .iter()
        .any(|p| matches!(p, crate::fmt::Parsed::Word(_)));
    if !has_words && crate::fmt::getopt("sreport", &args, OPTS).is_ok() {
        return interactive(args);
    }
    run(&args)
}

/// Interactive mode: one report per line from stdin (a `sreport: ` prompt
/// on a terminal) until `exit`/`quit` or the end of input. `parsable`,
/// `parsable2`, `nonparsable`, `time UNITS`, `quiet` and `verbose` change
/// the options of the reports after them; `!!` repeats the last report.
/// The exit code is 1 when any report failed.
fn interactive(mut opts: Vec<String>) -> i32 {
    let mut rc = 0;
    common::read_commands("sreport", |words| {
        let first = words[0].to_ascii_lowercase();
        let no_parsable = |o: &mut Vec<String>| o.retain(|a| a != "-p" && a != "-P");
        let takes = if first == "time" { 2 } else { 1 };
        let session = matches!(
            first.as_str(),
            "exit"
                | "quit"
                | "help"
                | "parsable"
                | "parsable2"
                | "nonparsable"
                | "quiet"
                | "verbose"
                | "version"
                | "time"
        );
        if session && words.len() != takes {
            eprintln!("too many arguments for keyword:{first}");
            rc = 1;
            return true;
        }
        match first.as_str() {
            "exit" | "quit" => return false,
            "help" => println!("{USAGE}"),
            "version" => println!("slurm {}", slurm_proto::SLURM_VERSION),
            "parsable" | "parsable2" => {
                no_parsable(&mut opts);
                opts.push(if first == "parsable" { "-p" } else { "-P" }.into());
            }
            "nonparsable" => no_parsable(&mut opts),
            "quiet" => opts.push("-Q".into()),
            "verbose" => opts.push("-v".into()),
            "time" => match Units::parse(&words[1]) {
                Some(_) => opts.extend(["-t".to_string(), words[1].clone()]),
                None => {
                    eprintln!("Unknown time format {}", words[1]);
                    rc = 1;
                }
            },
            _ => {
                let all: Vec<String> = opts.iter().cloned().chain(words).collect();
                if run(&all) != 0 {
                    rc = 1;
                }
            }
        }
        true
    });
    rc
}

/// The job reports: the window's jobs, and the account tree they sum up.
fn job_report(
    conf: &slurm_common::conf::SlurmConf,
    o: &Opts,
    clusters: Vec<String>,
) -> Result<String, String> {
    let rows = window_jobs(conf, o, &clusters)?;
    let f = AssocFilter {
        clusters,
        only_accounts: true,
        ..Default::default()
    };
    let AcctResponse::Assocs(assocs) = common::dbd_ask(conf, AcctRequest::ListAssocs(f))? else {
        return Err("unexpected answer from slurmdbd".into());
    };
    Ok(job_sizes(&rows, &assocs, o, common::now()))
}

/// One report; the exit code.
fn run(args: &[String]) -> i32 {
    let o = match parse_args(args, common::now()) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    let conf = match common::load_conf("sreport") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let clusters = if o.clusters.is_empty() {
        vec![conf.cluster_name.clone()]
    } else {
        o.clusters.clone()
    };
    if o.report == "resv_utilization" {
        let f = ResvFilter {
            clusters: clusters.clone(),
            names: o.names.clone(),
            nodes: o.nodes.clone(),
            start: Some(o.start),
            end: Some(o.end),
            with_usage: true,
            ..Default::default()
        };
        let text = match common::dbd_call(&conf, AcctRequest::ListResvs(f)) {
            Ok(AcctResponse::Resvs(v)) => resv_utilization(&v, &o),
            Ok(AcctResponse::Error(e)) => Err(e.to_string()),
            Ok(_) => Err("unexpected answer from slurmdbd".into()),
            Err(e) => Err(e.to_string()),
        };
        return match text {
            Ok(t) => {
                print!("{t}");
                0
            }
            Err(e) => {
                eprintln!("sreport: error: {e}");
                1
            }
        };
    }
    if o.report.starts_with("sizes_") {
        return match job_report(&conf, &o, clusters) {
            Ok(text) => {
                print!("{text}");
                0
            }
            Err(e) => {
                eprintln!("sreport: error: {e}");
                1
            }
        };
    }
    let q = UsageQuery {
        clusters: clusters.clone(),
        accounts: Vec::new(),
        users: o.users.clone(),
        start: o.start,
        end: o.end,
        span: None,
        total: true,
    };
    let report = match common::dbd_call(&conf, AcctRequest::GetUsage(q)) {
        Ok(AcctResponse::Usage(r)) => r,
        Ok(AcctResponse::Error(e)) => {
            eprintln!("sreport: error: {e}");
            return 1;
        }
        Ok(_) => {
            eprintln!("sreport: error: unexpected answer from slurmdbd");
            return 1;
        }
        Err(e) => {
            eprintln!("sreport: error: {e}");
            return 1;
        }
    };
    let jobs = || window_jobs(&conf, &o, &clusters);
    if matches!(o.report.as_str(), "user_by_wckey" | "wckey_by_user") {
        return match jobs() {
            Ok(rows) => {
                let by_user = o.report == "user_by_wckey";
                print!(
                    "{}",
                    wckey_reports(&rows, &report, &o, common::now(), by_user)
                );
                0
            }
            Err(e) => {
                eprintln!("sreport: error: {e}");
                1
            }
        };
    }
    let text = match o.report.as_str() {
        "utilization" => utilization(&report, &o),
        "topusage" => top_usage(&report, &o),
        "user_by_account" => user_by_account(&report, &o),
        _ => {
            let assocs = match common::dbd_call(
                &conf,
                AcctRequest::ListAssocs(AssocFilter {
                    clusters: clusters.clone(),
                    ..Default::default()
                }),
            ) {
                Ok(AcctResponse::Assocs(v)) => v,
                Ok(other) => {
                    eprintln!("sreport: error: unexpected answer from slurmdbd: {other:?}");
                    return 1;
                }
                Err(e) => {
                    eprintln!("sreport: error: {e}");
                    return 1;
                }
            };
            if o.report == "account_by_qos" {
                match jobs() {
                    Ok(rows) => account_by_qos(&rows, &report, &assocs, &o, common::now()),
                    Err(e) => {
                        eprintln!("sreport: error: {e}");
                        return 1;
                    }
                }
            } else {
                account_by_user(&report, &assocs, &o)
            }
        }
    };
    print!("{text}");
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservation_utilization_reads_names_and_fields_as_slurms() {
        let o = opts(&["reservation", "utilization", "MyResv", "names=Other"]);
        assert_eq!(o.report, "resv_utilization");
        assert_eq!(o.names, ["Other", "MyResv"]);
        let r = ResvRec {
            cluster: "c".into(),
            name: "MyResv".into(),
            time_start: 1_700_000_000,
            time_end: 1_700_003_600,
            cpus: 4,
            alloc_secs: 3600,
            ..Default::default()
        };
        // `tr` is TresTime (the first that matches), `cpuc` CpuCount,
        // `cputi` CpuTime; a negative width left-aligns.
        let mut o = opts(&["-P", "-t", "seconds", "reservation", "utilization"]);
        o.format = Some("tr,cpuc,cputi,al,i,name%-8".into());
        let out = resv_utilization(std::slice::from_ref(&r), &o).unwrap();
        assert_eq!(
            out,
            "TRES Time|TRES count|TRES Time|Allocated|Idle|Name\n04:00:00|4|04:00:00|3600|10800|MyResv\n"
        );
        o.parsable = None;
        o.format = Some("Name%-8,co".into());
        let out = resv_utilization(std::slice::from_ref(&r), &o).unwrap();
        assert!(out.contains("\nName     TRES count \n--------"), "{out}");
        assert!(out.contains("\nMyResv            4 \n"), "{out}");
        assert!(out.contains("\nUsage reported in TRES Seconds\n"), "{out}");
        o.units = Units::MinPer;
        let out = resv_utilization(std::slice::from_ref(&r), &o).unwrap();
        assert!(
            out.contains("\nUsage reported in TRES Minutes/Percentage of Total\n"),
            "{out}"
        );
        o.format = Some("Bogus".into());
        assert_eq!(
            resv_utilization(&[r], &o).unwrap_err(),
            " Unknown field 'Bogus'"
        );
    }

    fn opts(args: &[&str]) -> Opts {
        let a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        parse_args(&a, 1_700_000_000).unwrap()
    }

    fn report() -> UsageReport {
        UsageReport {
            clusters: vec![ClusterUsage {
                cluster: "c".into(),
                cpu_count: 4,
                total_secs: 4 * 3600,
                alloc_secs: 3600,
                down_secs: 0,
                idle_secs: 3 * 3600,
                ..Default::default()
            }],
            assocs: vec![
                AssocUsage {
                    cluster: "c".into(),
                    account: "phys".into(),
                    user: "alice".into(),
                    alloc_secs: 2400,
                    ..Default::default()
                },
                AssocUsage {
                    cluster: "c".into(),
                    account: "chem".into(),
                    user: "bob".into(),
                    alloc_secs: 1200,
                    ..Default::default()
                },
            ],
        }
    }

    #[test]
    fn units_and_options() {
        assert_eq!(Units::Minutes.fmt(90, 0), "2");
        assert_eq!(Units::Hours.fmt(7200, 14400), "2");
        assert_eq!(Units::Percent.fmt(3600, 14400), "25.00%");
        assert_eq!(Units::MinPer.fmt(60, 240), "1(25.00%)");
        let o = opts(&[
            "-t",
            "hours",
            "cluster",
            "utilization",
            "start=2023-01-01",
            "end=2023-01-02",
        ]);
        assert_eq!(o.units, Units::Hours);
        assert_eq!(o.end - o.start, 86400);
        assert!(parse_args(&["bogus".into()], 0).is_err());
        assert!(parse_args(
            &[
                "-t".into(),
                "parsecs".into(),
                "user".into(),
                "topusage".into()
            ],
            0
        )
        .is_err());
    }

    #[test]
    fn clusters_and_tres_from_options_and_environment() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let env = |k: &str| (k == "SREPORT_CLUSTER").then(|| "a,b".to_string());
        let o = parse_args_env(&a(&["cluster", "utilization"]), 0, &env).unwrap();
        assert_eq!(o.clusters, vec!["a", "b"]);
        let o = parse_args_env(&a(&["-M", "c", "cluster", "utilization"]), 0, &env).unwrap();
        assert_eq!(o.clusters, vec!["c"]);
        let none = |_: &str| None;
        assert!(parse_args_env(&a(&["-T", "cpu", "user", "topusage"]), 0, &none).is_ok());
        let e = parse_args_env(&a(&["-T", "gres/gpu", "user", "topusage"]), 0, &none).unwrap_err();
        assert!(e.contains("gres/gpu"), "{e}");
        let tres = |k: &str| (k == "SREPORT_TRES").then(|| "mem".to_string());
        assert!(parse_args_env(&a(&["user", "topusage"]), 0, &tres).is_err());
    }

    /// Cluster `c`'s accounts: root > sci > phys, and root > bio.
    fn tree() -> Vec<AssocRec> {
        let acct = |a: &str, p: Option<&str>| AssocRec {
            cluster: "c".into(),
            account: a.into(),
            parent: p.map(str::to_string),
            ..Default::default()
        };
        vec![
            acct("root", None),
            acct("sci", Some("root")),
            acct("phys", Some("sci")),
            acct("bio", Some("root")),
        ]
    }

    #[test]
    fn job_sizes_by_account_tree_wckey_and_count() {
        let job = |id: u32, account: &str, wckey: &str, cpus: u32, start: i64, end: i64| JobRow {
            cluster: "c".into(),
            job: AcctJob {
                job_id: id,
                account: account.into(),
                wckey: wckey.into(),
                alloc_cpus: cpus,
                start_time: Some(start),
                end_time: Some(end),
                ..Default::default()
            },
            steps: Vec::new(),
        };
        let assocs = tree();
        let o = |extra: &[&str]| {
            let mut a = vec![
                "-P",
                "-n",
                "-t",
                "seconds",
                "start=2023-11-14T00:00:00",
                "end=2023-11-15T00:00:00",
            ];
            a.extend_from_slice(extra);
            opts(&a)
        };
        let base = opts(&[
            "-P",
            "-n",
            "cluster",
            "utilization",
            "start=2023-11-14T00:00:00",
            "end=2023-11-15T00:00:00",
        ])
        .start;
        let rows = vec![
            job(1, "phys", "a", 4, base + 10, base + 20), // 40 s, first column
            job(2, "bio", "b", 64, base + 100, base + 110), // 640 s, 50-249
            // Started before the window: only its part inside counts.
            job(3, "phys", "a", 2, base - 50, base + 5), // 10 s
        ];
        let now = base + 86_400;
        let r = |extra: &[&str]| job_sizes(&rows, &assocs, &o(extra), now);
        assert_eq!(
            r(&["job", "SizesByAccount"]),
            "c|root|50|640|0|0|0|100.00%\n"
        );
        assert_eq!(
            r(&["job", "SizesByAccount", "FlatView"]),
            "c|bio|0|640|0|0|0|92.75%\nc|phys|50|0|0|0|0|7.25%\n"
        );
        assert_eq!(
            r(&["job", "SizesByAccount", "accounts=sci"]),
            "c|sci|50|0|0|0|0|100.00%\n"
        );
        // FlatView keeps the account filter.
        assert_eq!(
            r(&["job", "SizesByAccount", "FlatView", "accounts=bio"]),
            "c|bio|0|640|0|0|0|100.00%\n"
        );
        assert_eq!(
            r(&["job", "SizesByAccount", "AcctAsParent"]),
            "c|bio|0|640|0|0|0|92.75%\nc|sci|50|0|0|0|0|7.25%\n"
        );
        assert_eq!(
            r(&["job", "SizesByWckey", "PrintJobCount", "grouping=8"]),
            "c|a|2|0|66.67%\nc|b|0|1|33.33%\n"
        );
        assert_eq!(
            r(&["job", "SizesByAccountAndWckey", "FlatView"]),
            "c|bio:b|0|640|0|0|0|92.75%\nc|phys:a|50|0|0|0|0|7.25%\n"
        );
        assert_eq!(size_columns(&[8]), vec!["0-7 CPUs", ">= 8 CPUs"]);
        let bad: Vec<String> = ["job", "SizesByAccount", "grouping=50,10"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(parse_args(&bad, 1_700_000_000).is_err());
    }

    #[test]
    fn wckey_and_qos_reports_from_the_windows_jobs() {
        let job =
            |user: &str, account: &str, qos: &str, wckey: &str, cpus: u32, secs: i64| JobRow {
                cluster: "c".into(),
                job: AcctJob {
                    user: user.into(),
                    account: account.into(),
                    qos: qos.into(),
                    wckey: wckey.into(),
                    alloc_cpus: cpus,
                    start_time: Some(1_000),
                    end_time: Some(1_000 + secs),
                    ..Default::default()
                },
                steps: Vec::new(),
            };
        let rows = vec![
            job("ann", "phys", "normal", "x", 2, 100), // 200
            job("bob", "phys", "high", "x", 1, 500),   // 500
            job("ann", "bio", "normal", "y", 1, 50),   // 50
            job("ann", "phys", "normal", "", 1, 10),   // 10, no wckey
        ];
        let usage = UsageReport {
            clusters: vec![ClusterUsage {
                cluster: "c".into(),
                total_secs: 7600,
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut o = opts(&["-P", "-n", "-t", "seconds", "cluster", "utilization"]);
        (o.start, o.end) = (0, 10_000);
        let now = 20_000;
        assert_eq!(
            wckey_reports(&rows, &usage, &o, now, false),
            "c||||10\nc||ann||10\n\
             c|x|||700\nc|x|bob||500\nc|x|ann||200\n\
             c|y|||50\nc|y|ann||50\n"
        );
        // Users by their total (ann 260, bob 500), each one's wckeys by use.
        assert_eq!(
            wckey_reports(&rows, &usage, &o, now, true),
            "c|bob||x|500\nc|ann||x|200\nc|ann||y|50\nc|ann|||10\n"
        );
        let assocs = tree();
        assert_eq!(
            account_by_qos(&rows, &usage, &assocs, &o, now),
            "c|root|high|500|0\nc|root|normal|260|0\n\
             c|sci|high|500|0\nc|sci|normal|210|0\n\
             c|phys|high|500|0\nc|phys|normal|210|0\n\
             c|bio|normal|50|0\n"
        );
        // Percentages are of the cluster's reported time.
        o.units = parse_args(
            &[
                "-t".into(),
                "percent".into(),
                "cluster".into(),
                "utilization".into(),
            ],
            0,
        )
        .unwrap()
        .units;
        assert!(wckey_reports(&rows, &usage, &o, now, true).starts_with("c|bob||x|6.58%\n"));
    }

    #[test]
    fn users_by_account_most_used_first() {
        let mut r = report();
        r.assocs.push(AssocUsage {
            cluster: "c".into(),
            account: "chem".into(),
            user: "alice".into(),
            alloc_secs: 600,
            ..Default::default()
        });
        let o = opts(&["-P", "-n", "cluster", "UserUtilizationByAccount"]);
        assert_eq!(o.report, "user_by_account");
        assert_eq!(
            user_by_account(&r, &o),
            "c|alice||phys|40|0\nc|bob||chem|20|0\nc|alice||chem|10|0\n"
        );
        let o = opts(&[
            "-P",
            "-n",
            "cluster",
            "UserUtilizationByAccount",
            "accounts=chem",
        ]);
        assert_eq!(
            user_by_account(&r, &o),
            "c|bob||chem|20|0\nc|alice||chem|10|0\n"
        );
    }

    #[test]
    fn reports_lay_out_usage() {
        let o = opts(&["-P", "-n", "cluster", "utilization"]);
        assert_eq!(utilization(&report(), &o), "c|60|0|0|180|0|240\n");
        let o = opts(&["-P", "-n", "user", "topusage"]);
        assert_eq!(
            top_usage(&report(), &o),
            "c|alice||phys|40|0\nc|bob||chem|20|0\n"
        );
        let assocs = vec![
            AssocRec {
                cluster: "c".into(),
                account: "root".into(),
                ..Default::default()
            },
            AssocRec {
                cluster: "c".into(),
                account: "phys".into(),
                parent: Some("root".into()),
                ..Default::default()
            },
            AssocRec {
                cluster: "c".into(),
                account: "phys".into(),
                user: "alice".into(),
                parent: Some("phys".into()),
                ..Default::default()
            },
        ];
        let o = opts(&[
            "-P",
            "-n",
            "-t",
            "seconds",
            "cluster",
            "AccountUtilizationByUser",
        ]);
        assert_eq!(
            account_by_user(&report(), &assocs, &o),
            "c|root|||2400|0\nc|phys|||2400|0\nc|phys|alice||2400|0\n"
        );
    }
}
