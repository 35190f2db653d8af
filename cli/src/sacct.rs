//! `sacct`: jobs and steps as slurmdbd recorded them, in Slurm's layouts
//! (fixed-width columns with `+` marking a cut value, or `-p`/`-P` lists).

use crate::common;
use crate::fmt::{getopt, Arg, Opt, Parsed};
use slurm_common::timefmt::{format_duration_hms, format_opt_timestamp, parse_timestamp};
use slurm_proto::acct::{
    AcctJob, AcctRequest, AcctResponse, AcctStep, AssocFilter, AssocRec, JobQuery, JobRow,
};
use slurm_proto::{JobState, BATCH_STEP};

const fn o(short: Option<char>, long: &'static str, arg: Arg) -> Opt {
    Opt { short, long, arg }
}

/// Options of [`OPTS`] that differ from Slurm's (for [`crate::compat`]).
pub(crate) const COMPAT_NOTES: &[(&str, crate::compat::Support)] = &[
    (
        "verbose",
        crate::compat::Support::Differs("prints nothing more"),
    ),
    (
        "federation",
        crate::compat::Support::Differs("no federations: this cluster's jobs"),
    ),
    (
        "local",
        crate::compat::Support::Differs("no federations: this cluster's jobs"),
    ),
];

pub(crate) const OPTS: &[Opt] = &[
    o(Some('a'), "allusers", Arg::No),
    o(Some('A'), "accounts", Arg::Required),
    o(Some('b'), "brief", Arg::No),
    o(Some('c'), "completion", Arg::No),
    o(Some('f'), "file", Arg::Required),
    o(Some('D'), "duplicates", Arg::No),
    o(Some('E'), "endtime", Arg::Required),
    o(Some('e'), "helpformat", Arg::No),
    o(Some('h'), "help", Arg::No),
    o(Some('j'), "jobs", Arg::Required),
    o(Some('L'), "allclusters", Arg::No),
    o(Some('l'), "long", Arg::No),
    o(Some('M'), "clusters", Arg::Required),
    o(Some('n'), "noheader", Arg::No),
    o(None, "name", Arg::Required),
    o(Some('o'), "format", Arg::Required),
    o(Some('p'), "parsable", Arg::No),
    o(Some('P'), "parsable2", Arg::No),
    o(Some('q'), "qos", Arg::Required),
    o(Some('r'), "partition", Arg::Required),
    o(Some('S'), "starttime", Arg::Required),
    o(Some('s'), "state", Arg::Required),
    o(Some('u'), "user", Arg::Required),
    o(None, "uid", Arg::Required),
    o(Some('g'), "gid", Arg::Required),
    o(None, "group", Arg::Required),
    o(None, "delimiter", Arg::Required),
    o(Some('N'), "nodelist", Arg::Required),
    o(Some('i'), "nnodes", Arg::Required),
    o(Some('I'), "ncpus", Arg::Required),
    o(Some('B'), "batch-script", Arg::No),
    o(None, "env-vars", Arg::No),
    o(Some('k'), "timelimit-min", Arg::Required),
    o(Some('K'), "timelimit-max", Arg::Required),
    o(Some('v'), "verbose", Arg::No),
    o(Some('T'), "truncate", Arg::No),
    o(None, "noconvert", Arg::No),
    o(Some('W'), "wckeys", Arg::Required),
    o(Some('C'), "constraints", Arg::Required),
    o(Some('F'), "flags", Arg::Required),
    o(Some('R'), "reason", Arg::Required),
    o(None, "expand-patterns", Arg::No),
    o(None, "whole-hetjob", Arg::Attached),
    o(None, "use-local-uid", Arg::No),
    o(None, "federation", Arg::No),
    o(Some('x'), "associations", Arg::Required),
    o(None, "local", Arg::No),
    o(None, "array", Arg::No),
    o(None, "units", Arg::Required),
    o(Some('V'), "version", Arg::No),
    o(Some('X'), "allocations", Arg::No),
    o(None, "json", Arg::Optional),
    o(None, "yaml", Arg::Optional),
    o(None, "usage", Arg::No),
];

/// Every field sacct can print: (name, default width, right-aligned).
const FIELDS: &[(&str, usize, bool)] = &[
    ("Account", 10, true),
    ("AllocCPUS", 10, true),
    ("AllocNodes", 10, true),
    ("AllocTRES", 10, true),
    ("Cluster", 10, true),
    ("Comment", 15, true),
    ("Constraints", 19, true),
    ("CPUTime", 10, true),
    ("CPUTimeRAW", 10, true),
    ("Elapsed", 10, true),
    ("ElapsedRaw", 10, true),
    ("Eligible", 19, true),
    ("End", 19, true),
    ("ExitCode", 8, true),
    ("FailedNode", 8, true),
    ("Flags", 19, true),
    ("GID", 6, true),
    ("Group", 9, true),
    ("JobID", 12, false),
    ("JobIDRaw", 12, false),
    ("JobName", 10, true),
    ("MaxRSS", 10, true),
    ("MaxRSSNode", 10, true),
    ("MaxVMSize", 10, true),
    ("NCPUS", 10, true),
    ("NNodes", 8, true),
    ("NodeList", 15, true),
    ("NTasks", 8, true),
    ("Partition", 10, true),
    ("Planned", 10, true),
    ("PlannedCPU", 10, true),
    ("PlannedCPURAW", 13, true),
    ("Priority", 10, true),
    ("QOS", 10, true),
    ("Reason", 22, true),
    ("ReqCPUS", 8, true),
    ("ReqMem", 10, true),
    ("ReqNodes", 8, true),
    ("ReqTRES", 10, true),
    ("Reservation", 20, true),
    ("Restarts", 8, true),
    ("Start", 19, true),
    ("State", 10, true),
    ("StdErr", 20, true),
    ("StdIn", 20, true),
    ("StdOut", 20, true),
    ("Submit", 19, true),
    ("SubmitLine", 20, true),
    ("Suspended", 10, true),
    ("SystemCPU", 10, true),
    ("Timelimit", 10, true),
    ("TimelimitRaw", 12, true),
    ("TotalCPU", 10, true),
    ("UID", 6, true),
    ("User", 9, true),
    ("UserCPU", 10, true),
    ("WCKey", 10, true),
    ("WorkDir", 15, true),
];

const DEFAULT_FORMAT: &str = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode";
const BRIEF_FORMAT: &str = "JobID,State,ExitCode";
const LONG_FORMAT: &str = "JobID,JobIDRaw,JobName,Partition,MaxVMSize,MaxRSS,MaxRSSNode,\
AveCPU,NTasks,AllocCPUS,Elapsed,State,ExitCode,ReqCPUS,ReqMem,AllocTRES,TotalCPU,UserCPU,\
SystemCPU,Start,End,Submit";

/// One column to print.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub name: &'static str,
    pub width: usize,
    pub right: bool,
    /// `--units`: sizes shown in this unit (K, M, G, T or P).
    pub units: Option<char>,
    /// `--noconvert`: sizes in the unit they were recorded in (else in the
    /// largest unit that shows them exactly: `2048M` is `2G`).
    pub noconvert: bool,
}

/// `--units=U`'s letter; the error names a bad one.
fn parse_units(v: &str) -> Result<char, String> {
    match v.trim().to_ascii_uppercase().as_str() {
        u @ ("K" | "M" | "G" | "T" | "P") => Ok(u.chars().next().unwrap_or('K')),
        _ => Err(format!(
            "sacct: error: Invalid --units value: {v} (K, M, G, T or P)"
        )),
    }
}

/// A size as printed (`2048K`, `3G`, `100M`) in `unit`, two decimals
/// (`2.00M`), as `--units` shows it; anything else as it is.
pub fn in_units(v: &str, unit: char) -> String {
    const UNITS: &str = "KMGTP";
    let Some(last) = v.chars().last() else {
        return String::new();
    };
    let (num, from) = match UNITS.find(last) {
        Some(i) => (&v[..v.len() - 1], i as i32),
        None => (v, 0),
    };
    let (Ok(n), Some(to)) = (num.parse::<f64>(), UNITS.find(unit)) else {
        return v.to_string();
    };
    let scaled = n * 1024f64.powi(from - to as i32);
    format!("{scaled:.2}{unit}")
}

/// Parse `--format` (`JobID,JobName%30,State`): unknown names are an error.
pub fn parse_format(s: &str) -> Result<Vec<Column>, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        let (name, width) = match item.split_once('%') {
            Some((n, w)) => {
                let w: usize = w
                    .parse()
                    .map_err(|_| format!("Invalid field width in '{item}'"))?;
                (n, Some(w))
            }
            None => (item, None),
        };
        // AveCPU and other averages are not gathered: print them as the max.
        let lookup = if name.eq_ignore_ascii_case("AveCPU") {
            "TotalCPU"
        } else {
            name
        };
        let f = FIELDS
            .iter()
            .find(|f| f.0.eq_ignore_ascii_case(lookup))
            .ok_or_else(|| format!("Invalid field requested: \"{name}\""))?;
        out.push(Column {
            name: f.0,
            width: width.unwrap_or(f.1),
            right: f.2,
            units: None,
            noconvert: false,
        });
    }
    if out.is_empty() {
        return Err("No fields requested in --format".into());
    }
    Ok(out)
}

/// How rows are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    Columns,
    /// `-p`: `|` after every field.
    Parsable,
    /// `-P`: `|` between fields.
    Parsable2,
}

/// `exit:signal` from a raw wait status.
pub fn exit_code(status: i32) -> String {
    if status & 0x7f != 0 {
        format!("0:{}", status & 0x7f)
    } else {
        format!("{}:0", (status >> 8) & 0xff)
    }
}

/// `sacct -B` / `--env-vars`: each job's batch script (or environment)
/// under a header line and a rule, `NONE` when accounting has none.
pub fn render_texts(rows: &[JobRow], script: bool, header: bool) -> String {
    let mut out = String::new();
    for r in rows {
        let id = job_id_str(&r.job);
        if header {
            if script {
                out.push_str(&format!("Batch Script for {id}\n"));
            } else {
                out.push_str(&format!(
                    "Environment used for {id} (must be batch to display)\n"
                ));
            }
            out.push_str(&"-".repeat(80));
            out.push('\n');
        }
        let text = if script { &r.job.script } else { &r.job.env };
        out.push_str(text.as_deref().unwrap_or("NONE\n"));
    }
    out
}

fn job_id_str(j: &AcctJob) -> String {
    match (j.array_job_id, j.array_task_id) {
        (Some(a), Some(t)) => format!("{a}_{t}"),
        _ => j.job_id.to_string(),
    }
}

fn step_suffix(s: &AcctStep) -> String {
    if s.step_id == BATCH_STEP {
        "batch".into()
    } else if s.step_id == slurm_proto::EXTERN_STEP {
        "extern".into()
    } else {
        s.step_id.to_string()
    }
}

fn elapsed(start: Option<i64>, end: Option<i64>, now: i64) -> i64 {
    match start {
        Some(s) if s > 0 => (end.unwrap_or(now) - s).max(0),
        _ => 0,
    }
}

fn cpu_time(usec: u64) -> String {
    let secs = usec / 1_000_000;
    let ms = (usec % 1_000_000) / 1000;
    let (d, h, m, s) = (secs / 86400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else if h > 0 {
        format!("{h:02}:{m:02}:{s:02}")
    } else {
        format!("{m:02}:{s:02}.{ms:03}")
    }
}

fn kib(v: u64) -> String {
    if v == 0 {
        String::new()
    } else {
        format!("{v}K")
    }
}

fn mem_mib(v: u64) -> String {
    if v == 0 {
        "0".into()
    } else {
        format!("{v}M")
    }
}

/// A size (`2048M`) in the largest unit that shows it exactly (`2G`), as
/// Slurm's sacct shows sizes unless `--noconvert`; anything else as it is.
pub fn exact_units(v: &str) -> String {
    const UNITS: &[char] = &['K', 'M', 'G', 'T', 'P'];
    let Some(unit) = v
        .chars()
        .last()
        .and_then(|u| UNITS.iter().position(|x| *x == u))
    else {
        return v.to_string();
    };
    let Ok(mut n) = v[..v.len() - 1].parse::<u64>() else {
        return v.to_string();
    };
    let mut unit = unit;
    while n > 0 && n.is_multiple_of(1024) && unit + 1 < UNITS.len() {
        n /= 1024;
        unit += 1;
    }
    format!("{n}{}", UNITS[unit])
}

fn nodelist(s: &str) -> String {
    if s.is_empty() {
        "None assigned".into()
    } else {
        s.to_string()
    }
}

fn job_state(j: &AcctJob) -> String {
    match (j.state.0, j.requid) {
        (JobState::Cancelled, Some(uid)) => format!("CANCELLED by {uid}"),
        (s, _) => s.name().to_string(),
    }
}

/// How long a job waited from eligible to its start, as Slurm's
/// `Planned`: to its end if it ended without starting, to `now` while it
/// waits.
fn planned(j: &AcctJob, now: i64) -> i64 {
    let Some(eligible) = j.eligible_time.filter(|&e| e > 0) else {
        return 0;
    };
    let until = match (j.start_time, j.end_time) {
        (Some(s), _) => s,
        (None, Some(e)) => e,
        (None, None) => now,
    };
    (until - eligible).max(0)
}

/// sacct's `Flags` ([`AcctJob::flags`]; `None` for none).
fn flags_str(j: &AcctJob) -> String {
    let v = j.flags();
    if v.is_empty() {
        "None".into()
    } else {
        v.join(",")
    }
}

/// `-F`: does the job carry any of `flags` (`None`: none at all)?
fn has_flags(j: &AcctJob, flags: &[String]) -> bool {
    let have = j.flags();
    flags.iter().any(|f| {
        (have.is_empty() && f.eq_ignore_ascii_case("None"))
            || have.iter().any(|h| h.eq_ignore_ascii_case(f))
    })
}

/// The value of `col` for a job row.
pub fn job_value(col: &str, cluster: &str, j: &AcctJob, now: i64) -> String {
    // Time suspended is not elapsed time (as Slurm counts it).
    let el = (elapsed(j.start_time, j.end_time, now) - j.suspended_by(now)).max(0);
    match col {
        "Account" => j.account.clone(),
        "AllocCPUS" | "NCPUS" => j.alloc_cpus.to_string(),
        "AllocNodes" => j.node_count.to_string(),
        "AllocTRES" => j.alloc_tres.clone(),
        "Cluster" => cluster.to_string(),
        "Comment" => j.comment.clone(),
        "WCKey" => j.wckey.clone(),
        "Constraints" => j.constraints.clone(),
        "FailedNode" => j.failed_node.clone(),
        "Flags" => flags_str(j),
        "Planned" => format_duration_hms(planned(j, now)),
        "PlannedCPU" => format_duration_hms(planned(j, now) * i64::from(j.req_cpus)),
        "PlannedCPURAW" => (planned(j, now) * i64::from(j.req_cpus)).to_string(),
        "Reason" => {
            if j.reason.is_empty() {
                "None".to_string()
            } else {
                j.reason.clone()
            }
        }
        "Reservation" => j.reservation.clone(),
        "Restarts" => j.restarts.to_string(),
        "StdErr" => j.std_err.clone(),
        "StdIn" => j.std_in.clone(),
        "StdOut" => j.std_out.clone(),
        "CPUTime" => format_duration_hms(el * i64::from(j.alloc_cpus)),
        "CPUTimeRAW" => (el * i64::from(j.alloc_cpus)).to_string(),
        "Elapsed" => format_duration_hms(el),
        "ElapsedRaw" => el.to_string(),
        "Eligible" => format_opt_timestamp(j.eligible_time, "Unknown"),
        "End" => format_opt_timestamp(j.end_time, "Unknown"),
        "ExitCode" => exit_code(j.exit_status),
        "GID" => j.gid.to_string(),
        "Group" => j.group.clone(),
        "JobID" => job_id_str(j),
        "JobIDRaw" => j.job_id.to_string(),
        "JobName" => j.name.clone(),
        "NNodes" => j.node_count.max(1).to_string(),
        "NodeList" => nodelist(&j.nodelist),
        "Partition" => j.partition.clone(),
        "Priority" => j.priority.to_string(),
        "QOS" => j.qos.clone(),
        "ReqCPUS" => j.req_cpus.to_string(),
        "ReqMem" => mem_mib(j.req_mem),
        "ReqNodes" => j.node_count.max(1).to_string(),
        "ReqTRES" => j.req_tres.clone(),
        "Start" => format_opt_timestamp(j.start_time, "Unknown"),
        "State" => job_state(j),
        "Submit" => format_opt_timestamp(Some(j.submit_time), "Unknown"),
        "SubmitLine" => j.submit_line.clone(),
        "Suspended" => format_duration_hms(j.suspended_by(now)),
        "Timelimit" => slurm_common::timefmt::format_time_limit(j.time_limit),
        "TimelimitRaw" => j
            .time_limit
            .map_or("UNLIMITED".to_string(), |m| m.to_string()),
        "UID" => j.uid.to_string(),
        "User" => j.user.clone(),
        "WorkDir" => j.work_dir.clone(),
        // Usage is per step; the job line leaves it blank, as Slurm does.
        _ => String::new(),
    }
}

/// The value of `col` for a step row of job `j`.
pub fn step_value(col: &str, cluster: &str, j: &AcctJob, s: &AcctStep, now: i64) -> String {
    let el = elapsed(Some(s.start_time), s.end_time, now);
    match col {
        "Account" => j.account.clone(),
        "AllocCPUS" | "NCPUS" => s.alloc_cpus.to_string(),
        "AllocNodes" | "NNodes" | "ReqNodes" => s.node_count.to_string(),
        "AllocTRES" => s.alloc_tres.clone(),
        "Cluster" => cluster.to_string(),
        "CPUTime" => format_duration_hms(el * i64::from(s.alloc_cpus)),
        "CPUTimeRAW" => (el * i64::from(s.alloc_cpus)).to_string(),
        "Elapsed" => format_duration_hms(el),
        "ElapsedRaw" => el.to_string(),
        "End" => format_opt_timestamp(s.end_time, "Unknown"),
        "ExitCode" => exit_code(s.exit_status),
        "GID" => j.gid.to_string(),
        "Group" => j.group.clone(),
        "JobID" => format!("{}.{}", job_id_str(j), step_suffix(s)),
        "JobIDRaw" => format!("{}.{}", j.job_id, step_suffix(s)),
        "JobName" => s.name.clone(),
        "MaxRSS" => kib(s.max_rss_kib),
        "MaxRSSNode" => s.max_rss_node.clone(),
        "MaxVMSize" => kib(s.max_vmsize_kib),
        "NodeList" => nodelist(&s.nodelist),
        "NTasks" => s.ntasks.to_string(),
        "QOS" => j.qos.clone(),
        "ReqCPUS" => s.alloc_cpus.to_string(),
        "ReqMem" => mem_mib(j.req_mem),
        "Start" => format_opt_timestamp(Some(s.start_time), "Unknown"),
        "State" => s.state.0.name().to_string(),
        "Submit" => format_opt_timestamp(Some(s.start_time), "Unknown"),
        "SystemCPU" => cpu_time(s.sys_cpu_usec),
        "TotalCPU" => cpu_time(s.total_cpu_usec),
        "UID" => j.uid.to_string(),
        "User" => String::new(),
        "UserCPU" => cpu_time(s.user_cpu_usec),
        _ => String::new(),
    }
}

/// Fit `v` in `width`: cut values end in `+`.
fn cell(v: &str, c: &Column) -> String {
    let n = v.chars().count();
    let v = if n > c.width && c.width > 0 {
        let mut t: String = v.chars().take(c.width - 1).collect();
        t.push('+');
        t
    } else {
        v.to_string()
    };
    if c.right {
        format!("{v:>w$}", w = c.width)
    } else {
        format!("{v:<w$}", w = c.width)
    }
}

fn line(values: &[String], cols: &[Column], layout: Layout, delim: &str) -> String {
    match layout {
        Layout::Columns => {
            let mut s = String::new();
            for (v, c) in values.iter().zip(cols) {
                s.push_str(&cell(v, c));
                s.push(' ');
            }
            s
        }
        Layout::Parsable => values.iter().map(|v| format!("{v}{delim}")).collect(),
        Layout::Parsable2 => values.join(delim),
    }
}

/// The whole listing.
pub fn render(
    rows: &[JobRow],
    cols: &[Column],
    layout: Layout,
    header: bool,
    steps: bool,
    now: i64,
) -> String {
    render_with(rows, cols, layout, "|", header, steps, now)
}

/// The value of a size column in `--units`' unit.
fn sized(c: &Column, v: String) -> String {
    if !SIZE_COLUMNS.contains(&c.name) || v.is_empty() {
        return v;
    }
    match c.units {
        Some(u) => in_units(&v, u),
        None if c.noconvert => v,
        None => exact_units(&v),
    }
}

/// Columns that are sizes (what `--units` converts).
const SIZE_COLUMNS: &[&str] = &["ReqMem", "MaxRSS", "MaxVMSize"];

/// [`render`] with `--delimiter`'s separator for `-p`/`-P`.
pub fn render_with(
    rows: &[JobRow],
    cols: &[Column],
    layout: Layout,
    delim: &str,
    header: bool,
    steps: bool,
    now: i64,
) -> String {
    let mut out = String::new();
    if header {
        let names: Vec<String> = cols.iter().map(|c| c.name.to_string()).collect();
        out.push_str(&line(&names, cols, layout, delim));
        out.push('\n');
        if layout == Layout::Columns {
            for c in cols {
                out.push_str(&"-".repeat(c.width));
                out.push(' ');
            }
            out.push('\n');
        }
    }
    for r in rows {
        let v: Vec<String> = cols
            .iter()
            .map(|c| sized(c, job_value(c.name, &r.cluster, &r.job, now)))
            .collect();
        out.push_str(&line(&v, cols, layout, delim));
        out.push('\n');
        if steps {
            for s in &r.steps {
                let v: Vec<String> = cols
                    .iter()
                    .map(|c| sized(c, step_value(c.name, &r.cluster, &r.job, s, now)))
                    .collect();
                out.push_str(&line(&v, cols, layout, delim));
                out.push('\n');
            }
        }
    }
    out
}

fn parse_states(s: &str) -> Result<Vec<JobState>, String> {
    crate::fmt::split_list(s)
        .iter()
        .map(|w| {
            let w = w.to_ascii_uppercase();
            let w = match w.as_str() {
                "CA" | "CANCELED" => "CANCELLED",
                "OOM" => "OUT_OF_MEMORY",
                other => other,
            };
            JobState::parse(w).ok_or_else(|| format!("Invalid state: {w}"))
        })
        .collect()
}

fn usage() -> &'static str {
    "Usage: sacct [-a] [-A accounts] [-E end] [-j jobs] [-L] [-M clusters] [-n] \
[--name names] [-o format] [-p|-P] [-q qos] [-r partitions] [-S start] [-s states] \
[-u users] [-X] [--json]\n"
}

/// Parsed command line.
#[derive(Debug, Default)]
pub struct Options {
    pub query: JobQuery,
    pub format: Option<String>,
    pub layout: Option<Layout>,
    pub header: bool,
    pub all_users: bool,
    pub all_clusters: bool,
    pub json: bool,
    pub help: Option<String>,
    /// `--delimiter`: the separator of `-p`/`-P`.
    pub delimiter: Option<String>,
    /// `-g`: groups (names or gids).
    pub groups: Vec<String>,
    /// `-W`: workload characterization keys.
    pub wckeys: Vec<String>,
    /// `-N`: jobs that ran on any of these nodes.
    pub nodes: Vec<String>,
    /// `-i`: node counts (min, max).
    pub nnodes: Option<(u32, u32)>,
    /// `-k`: jobs with this time limit (minutes; `u32::MAX` unlimited), or
    /// with `-K` at least this.
    pub timelimit_min: Option<u32>,
    /// `-K`: with `-k`, at most this (alone it is ignored, as Slurm's).
    pub timelimit_max: Option<u32>,
    /// `-I`: CPU counts (min, max).
    pub ncpus: Option<(u32, u32)>,
    /// `-T`: start and end times cut to the window asked for.
    pub truncate: bool,
    /// `--units`: sizes in this unit.
    pub units: Option<char>,
    /// `--noconvert`: sizes in the unit they were recorded in.
    pub noconvert: bool,
    /// `--use-local-uid`: UIDs looked up on this machine by user name (else
    /// as recorded).
    pub use_local_uid: bool,
    /// `-x`: only the jobs of these associations (by id).
    pub assoc_ids: Vec<u64>,
    /// `-C`: jobs whose constraint names each of these (`""`: none).
    pub constraints: Vec<String>,
    /// `-F`: jobs with any of these flags.
    pub flags: Vec<String>,
    /// `-R`: jobs whose last reason for waiting is one of these.
    pub reasons: Vec<String>,
    /// `--expand-patterns`: `StdOut`, `StdErr`, `StdIn` expanded.
    pub expand_patterns: bool,
    /// `-c`/`-f FILE`: the job completion records (`JobCompType`), read
    /// from `JobCompLoc` or FILE, instead of accounting.
    pub completion: bool,
    pub comp_file: Option<String>,
    /// How the output fields were chosen (the completion records have
    /// their own defaults for `-b`, `-l` and none).
    pub fields_by: FieldsBy,
}

/// Where sacct's output fields came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FieldsBy {
    #[default]
    Default,
    /// `SACCT_FORMAT`.
    Env,
    Brief,
    Long,
    /// `-o/--format`.
    Format,
}

/// The completion records' fields: default, `-b`, `-l` (Slurm's).
const COMP_FORMAT: &str = "JobID,UID,JobName,Partition,NNodes,NodeList,State,End";
const COMP_BRIEF_FORMAT: &str = "JobID,UID,State";
const COMP_LONG_FORMAT: &str =
    "JobID,UID,JobName,Partition,NNodes,NodeList,State,Start,End,Timelimit";

/// `N` or `MIN-MAX` (`-i`, `-I`).
/// A `-k`/`-K` time limit in minutes (`UNLIMITED` is `u32::MAX`).
fn limit_minutes(v: &str) -> Result<u32, String> {
    slurm_common::timefmt::parse_time_limit(v)
        .map(|m| m.unwrap_or(u32::MAX))
        .map_err(|_| format!("sacct: error: Invalid time limit: {v}"))
}

fn count_range(name: &str, v: &str) -> Result<(u32, u32), String> {
    let bad = || format!("sacct: error: Invalid --{name} value: {v}");
    match v.split_once('-') {
        Some((a, b)) => {
            let a = a.trim().parse().map_err(|_| bad())?;
            let b = b.trim().parse().map_err(|_| bad())?;
            if a > b {
                return Err(bad());
            }
            Ok((a, b))
        }
        None => {
            let n = v.trim().parse().map_err(|_| bad())?;
            Ok((n, n))
        }
    }
}

impl Options {
    /// `-T`: each job's and step's start and end cut to the window
    /// (`-S`/`-E`), so elapsed and CPU times count only what fell in it.
    pub fn truncate(&self, rows: &mut [JobRow]) {
        if !self.truncate {
            return;
        }
        let (lo, hi) = (self.query.start, self.query.end);
        let cut = |t: i64| {
            let t = lo.map_or(t, |l| t.max(l));
            hi.map_or(t, |h| t.min(h))
        };
        for r in rows {
            if let Some(s) = r.job.start_time.as_mut() {
                *s = cut(*s);
            }
            if let Some(e) = r.job.end_time.as_mut() {
                *e = cut(*e);
            }
            for st in &mut r.steps {
                st.start_time = cut(st.start_time);
                if let Some(e) = st.end_time.as_mut() {
                    *e = cut(*e);
                }
            }
        }
    }

    /// `--expand-patterns`: each job's `StdOut`, `StdErr`, `StdIn` as the
    /// files' paths (the first node of a job for `%N`).
    pub fn expand_patterns(&self, rows: &mut [JobRow]) {
        if !self.expand_patterns {
            return;
        }
        for r in rows {
            let j = &mut r.job;
            let first = slurm_common::hostlist::first(&j.nodelist);
            let [o, e, i] = j.expanded_std(first.as_deref());
            (j.std_out, j.std_err, j.std_in) = (o, e, i);
        }
    }

    /// The filters slurmdbd is not asked for, applied to its answer.
    pub fn keeps(&self, r: &JobRow) -> bool {
        let j = &r.job;
        if !self.groups.is_empty()
            && !self
                .groups
                .iter()
                .any(|g| *g == j.group || g.parse::<u32>().ok() == Some(j.gid))
        {
            return false;
        }
        if !self.wckeys.is_empty() && !self.wckeys.contains(&j.wckey) {
            return false;
        }
        // As Slurm's query: each named feature somewhere in the constraint.
        if !self.constraints.iter().all(|c| {
            if c.is_empty() {
                j.constraints.is_empty()
            } else {
                j.constraints.contains(c.as_str())
            }
        }) {
            return false;
        }
        if !self.flags.is_empty() && !has_flags(j, &self.flags) {
            return false;
        }
        if !self.reasons.is_empty()
            && !self.reasons.iter().any(|r| {
                let have = if j.reason.is_empty() {
                    "None"
                } else {
                    &j.reason
                };
                r.eq_ignore_ascii_case(have)
            })
        {
            return false;
        }
        if !self.nodes.is_empty() {
            let ran = slurm_common::hostlist::expand(&j.nodelist).unwrap_or_default();
            if !ran.iter().any(|n| self.nodes.contains(n)) {
                return false;
            }
        }
        if let Some((lo, hi)) = self.nnodes {
            if j.node_count < lo || j.node_count > hi {
                return false;
            }
        }
        if let Some((lo, hi)) = self.ncpus {
            if j.alloc_cpus < lo || j.alloc_cpus > hi {
                return false;
            }
        }
        if let Some(lo) = self.timelimit_min {
            let hi = self.timelimit_max.unwrap_or(lo);
            let limit = j.time_limit.unwrap_or(u32::MAX);
            if limit < lo || limit > hi {
                return false;
            }
        }
        true
    }
}

pub fn parse_args(args: &[String], now: i64) -> Result<Options, String> {
    parse_args_env(args, now, &|_| None)
}

/// [`parse_args`] with `SACCT_FORMAT` read through `env`.
pub fn parse_args_env(
    args: &[String],
    now: i64,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Options, String> {
    let format = env("SACCT_FORMAT").filter(|f| !f.is_empty());
    let mut o = Options {
        header: true,
        fields_by: if format.is_some() {
            FieldsBy::Env
        } else {
            FieldsBy::Default
        },
        format,
        json: crate::jsonout::env_wants(env).map_err(|e| format!("sacct: error: {e}"))?,
        ..Default::default()
    };
    // As --federation and --local: no federations, nothing to change.
    let _ = (env("SACCT_FEDERATION"), env("SACCT_LOCAL"));
    let mut start_given = false;
    for p in getopt("sacct", args, OPTS)? {
        let (name, val) = match p {
            Parsed::Opt(n, v) => (n, v.unwrap_or_default()),
            Parsed::Word(w) => return Err(format!("sacct: unexpected argument '{w}'")),
        };
        let list = || crate::fmt::split_list(&val);
        match name {
            "allusers" => o.all_users = true,
            "associations" => {
                for id in list() {
                    o.assoc_ids.push(
                        id.parse()
                            .map_err(|_| format!("sacct: error: Invalid association id '{id}'"))?,
                    );
                }
            }
            "accounts" => o.query.accounts = list(),
            "brief" => {
                o.format = Some(BRIEF_FORMAT.into());
                o.fields_by = FieldsBy::Brief;
            }
            "completion" => o.completion = true,
            "file" => {
                let regular = std::fs::metadata(&val).is_ok_and(|m| m.is_file());
                if !regular {
                    return Err(format!("{val} is not a valid file"));
                }
                o.comp_file = Some(val.clone());
                o.completion = true;
            }
            "duplicates" => o.query.duplicates = true,
            // Every array task has its own record here, each on its own
            // line already.
            "array" => {}
            "endtime" => o.query.end = Some(parse_timestamp(&val, now).map_err(|e| e.to_string())?),
            "starttime" => {
                start_given = true;
                o.query.start = Some(parse_timestamp(&val, now).map_err(|e| e.to_string())?)
            }
            "helpformat" => {
                let names: Vec<&str> = FIELDS.iter().map(|f| f.0).collect();
                o.help = Some(
                    names
                        .chunks(5)
                        .map(|c| {
                            c.iter()
                                .map(|n| format!("{n:<20}"))
                                .collect::<String>()
                                .trim_end()
                                .to_string()
                                + "\n"
                        })
                        .collect(),
                );
            }
            "help" => o.help = Some(crate::help::help("sacct")),
            "usage" => o.help = Some(crate::help::usage("sacct")),
            "version" => o.help = Some(format!("slurm {}\n", slurm_proto::SLURM_VERSION)),
            "jobs" => {
                for w in list() {
                    let id = w.split(['.', '_']).next().unwrap_or("");
                    let id: u32 = id.parse().map_err(|_| format!("Invalid job id: {w}"))?;
                    o.query.job_ids.push(id);
                }
            }
            "allclusters" => o.all_clusters = true,
            "clusters" => {
                let l = list();
                if l.iter().any(|c| c.eq_ignore_ascii_case("all")) {
                    o.all_clusters = true;
                } else {
                    o.query.clusters = l;
                }
            }
            "long" => {
                o.format = Some(LONG_FORMAT.into());
                o.fields_by = FieldsBy::Long;
            }
            "noheader" => o.header = false,
            "name" => o.query.names = list(),
            "format" => {
                o.format = Some(val.clone());
                o.fields_by = FieldsBy::Format;
            }
            "parsable" => o.layout = Some(Layout::Parsable),
            "parsable2" => o.layout = Some(Layout::Parsable2),
            "qos" => o.query.qos = list(),
            "partition" => o.query.partitions = list(),
            "state" => o.query.states = parse_states(&val)?,
            "user" | "uid" => {
                for u in list() {
                    match u.parse::<u32>() {
                        Ok(uid) => o.query.uids.push(uid),
                        Err(_) => o.query.users.push(u),
                    }
                }
            }
            "allocations" => o.query.with_steps = false,
            "truncate" => o.truncate = true,
            "noconvert" => o.noconvert = true,
            "use-local-uid" => o.use_local_uid = true,
            "units" => o.units = Some(parse_units(&val)?),
            "gid" | "group" => o.groups = list(),
            "wckeys" => o.wckeys = list(),
            // (Split on commas only: an empty item asks for jobs without one.)
            "constraints" => o.constraints = val.split(',').map(str::to_string).collect(),
            "flags" => {
                for f in list() {
                    let known = f.eq_ignore_ascii_case("None")
                        || f.eq_ignore_ascii_case("StartReceived")
                        || slurm_proto::SchedFlag::from_name(&f).is_some();
                    if !known {
                        return Err(format!(
                            "sacct: error: str_2_job_flags: Invalid job flag {f}"
                        ));
                    }
                    o.flags.push(f);
                }
            }
            "reason" => {
                for r in list() {
                    if !slurm_proto::JobReason::is_code(&r) {
                        return Err(format!("sacct: fatal: unrecognized job reason value '{r}'"));
                    }
                    o.reasons.push(r);
                }
            }
            "expand-patterns" => o.expand_patterns = true,
            // Heterogeneous jobs are not made here: every job is whole,
            // so either way lists the same (the value is checked, as
            // Slurm's).
            "whole-hetjob" => match val.to_ascii_lowercase().as_str() {
                "" | "yes" | "y" | "no" | "n" => {}
                _ => {
                    return Err(format!(
                    "sacct: error: Invalid --whole-hetjob value \"{val}\". Valid values: [yes|no]."
                ))
                }
            },
            "delimiter" => o.delimiter = Some(val.clone()),
            "nodelist" => {
                for part in list() {
                    let names = slurm_common::hostlist::expand(&part)
                        .map_err(|e| format!("sacct: error: Invalid node list {part}: {e}"))?;
                    o.nodes.extend(names);
                }
            }
            "nnodes" => o.nnodes = Some(count_range("nnodes", &val)?),
            "batch-script" => o.query.with_script = true,
            "env-vars" => o.query.with_env = true,
            "timelimit-min" => o.timelimit_min = Some(limit_minutes(&val)?),
            "timelimit-max" => o.timelimit_max = Some(limit_minutes(&val)?),
            "ncpus" => o.ncpus = Some(count_range("ncpus", &val)?),
            "json" | "yaml" => {
                crate::jsonout::check_parser(Some(val.as_str()))
                    .map_err(|e| format!("sacct: error: {e}"))?;
                o.json = true;
            }
            _ => {}
        }
    }
    if !args
        .iter()
        .any(|a| a == "-X" || a == "--allocations" || a.starts_with("--alloc"))
    {
        o.query.with_steps = true;
    }
    // -B / --env-vars: one job's text, no steps (as Slurm's).
    if o.query.with_script || o.query.with_env {
        if o.query.job_ids.is_empty() {
            let what = if o.query.with_script {
                "job scripts"
            } else {
                "job environment"
            };
            return Err(format!(
                "sacct: fatal: When requesting {what} you must also request specific jobs with the '-j' option."
            ));
        }
        if o.query.with_script && o.query.with_env {
            return Err(
                "sacct: fatal: Options --batch-script and --env-vars are mutually exclusive".into(),
            );
        }
        o.query.with_steps = false;
    }
    // Without -S: since midnight, or since ever when jobs or states are named.
    if !start_given && o.query.job_ids.is_empty() && o.query.states.is_empty() {
        let midnight = chrono::Local::now()
            .date_naive()
            .and_hms_opt(0, 0, 0)
            .and_then(|d| d.and_local_timezone(chrono::Local).single())
            .map(|d| d.timestamp())
            .unwrap_or(now - 86400);
        o.query.start = Some(midnight);
    }
    Ok(o)
}

/// What went wrong with an answer that is not the one asked for.
fn refusal(r: Result<AcctResponse, String>) -> String {
    r.err()
        .unwrap_or_else(|| "unexpected answer from slurmdbd".into())
}

/// `-x`: is the job one of these associations'? Jobs run under user
/// associations (an account's own matches none); one without a partition
/// takes every partition.
fn of_assocs(r: &JobRow, assocs: &[AssocRec]) -> bool {
    assocs.iter().any(|a| {
        a.cluster == r.cluster
            && a.account == r.job.account
            && !a.user.is_empty()
            && a.user == r.job.user
            && (a.partition.is_empty() || a.partition == r.job.partition)
    })
}

/// `sacct -c` (`-f FILE`): the job completion records of `JobCompType`
/// (`jobcomp/filetxt`: the lines of `JobCompLoc` or FILE), filtered by
/// `-j` and `-r` as Slurm's (every user's jobs), each with the fields asked
/// for (Slurm's own defaults for these records).
fn completion_main(o: &Options, now: i64) -> i32 {
    use slurm_common::jobcomp::{parse, JobCompConf};
    let conf = match common::load_conf("sacct") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let loc = match JobCompConf::from_conf(&conf) {
        JobCompConf::None => {
            eprintln!("Slurm job completion is disabled");
            return 1;
        }
        JobCompConf::Unsupported(_) => {
            eprintln!("Slurm unable to initialize jobcomp plugin");
            return 1;
        }
        JobCompConf::File(p) => Some(p),
        // jobcomp/script keeps no records to read back (Slurm's says so
        // and lists none).
        JobCompConf::Script(_) | JobCompConf::NoScript => {
            eprintln!("sacct: This function is not implemented.");
            None
        }
    };
    let text = match loc {
        None => String::new(),
        Some(loc) => {
            let path = o
                .comp_file
                .clone()
                .map(std::path::PathBuf::from)
                .unwrap_or(loc);
            match std::fs::read(&path) {
                Ok(b) => String::from_utf8_lossy(&b).into_owned(),
                Err(e) => {
                    let msg = e.to_string();
                    let msg = msg.split(" (os error").next().unwrap_or(&msg);
                    eprintln!("{}: {msg}", path.display());
                    return 1;
                }
            }
        }
    };
    let format = match o.fields_by {
        FieldsBy::Format => o.format.as_deref().unwrap_or(COMP_FORMAT),
        FieldsBy::Brief => COMP_BRIEF_FORMAT,
        FieldsBy::Long => COMP_LONG_FORMAT,
        FieldsBy::Default | FieldsBy::Env => COMP_FORMAT,
    };
    let cols = match parse_format(format) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sacct: error: {e}");
            return 1;
        }
    };
    let q = &o.query;
    let rows: Vec<JobRow> = text
        .lines()
        .filter_map(parse)
        .filter(|r| q.job_ids.is_empty() || q.job_ids.contains(&r.job.job_id))
        .filter(|r| {
            q.partitions.is_empty()
                || q.partitions
                    .iter()
                    .any(|p| p.eq_ignore_ascii_case(&r.job.partition))
        })
        .map(|r| {
            let mut job = r.job;
            // Shown by their own ids, as Slurm's records are.
            (job.array_job_id, job.array_task_id) = (None, None);
            JobRow {
                cluster: r.cluster,
                job,
                steps: Vec::new(),
            }
        })
        .collect();
    print_rows(o, &rows, &cols, false, now);
    0
}

/// The rows as the options lay them out (`-p`, `-P`, `--delimiter`, `-n`).
fn print_rows(o: &Options, rows: &[JobRow], cols: &[Column], steps: bool, now: i64) {
    print!(
        "{}",
        render_with(
            rows,
            cols,
            o.layout.unwrap_or(Layout::Columns),
            o.delimiter.as_deref().unwrap_or("|"),
            o.header,
            steps,
            now
        )
    );
}

pub fn main() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let now = common::now();
    let o = match parse_args_env(&args, now, &|k| std::env::var(k).ok()) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            eprint!("{}", usage());
            return 1;
        }
    };
    if let Some(h) = &o.help {
        print!("{h}");
        return 0;
    }
    if o.completion {
        return completion_main(&o, now);
    }
    let cols = match parse_format(o.format.as_deref().unwrap_or(DEFAULT_FORMAT)) {
        Ok(mut c) => {
            for col in &mut c {
                col.units = o.units;
                col.noconvert = o.noconvert;
            }
            c
        }
        Err(e) => {
            eprintln!("sacct: error: {e}");
            return 1;
        }
    };
    let conf = match common::load_conf("sacct") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let mut q = o.query.clone();
    if q.clusters.is_empty() && !o.all_clusters {
        q.clusters = vec![conf.cluster_name.clone()];
    }
    // Without -a, -u, -A or -j a user sees their own jobs.
    let me = unsafe { libc::getuid() };
    if !o.all_users
        && q.users.is_empty()
        && q.uids.is_empty()
        && q.job_ids.is_empty()
        && q.accounts.is_empty()
        && o.assoc_ids.is_empty()
        && me != 0
    {
        q.uids.push(me);
    }
    // -x: the associations' (cluster, account, user, partition).
    let assocs = if o.assoc_ids.is_empty() {
        None
    } else {
        let f = AssocFilter {
            ids: o.assoc_ids.clone(),
            ..Default::default()
        };
        match common::dbd_ask(&conf, AcctRequest::ListAssocs(f)) {
            Ok(AcctResponse::Assocs(a)) => Some(a),
            other => {
                eprintln!("sacct: error: {}", refusal(other));
                return 1;
            }
        }
    };
    let rows = match common::dbd_ask(&conf, AcctRequest::GetJobs(q)) {
        Ok(AcctResponse::Jobs(rows)) => {
            let mut rows: Vec<JobRow> = rows
                .into_iter()
                .filter(|r| o.keeps(r) && assocs.as_deref().is_none_or(|a| of_assocs(r, a)))
                .collect();
            o.truncate(&mut rows);
            o.expand_patterns(&mut rows);
            if o.use_local_uid {
                for r in &mut rows {
                    if let Some(uid) = slurm_common::users::user_by_name(&r.job.user).map(|u| u.uid)
                    {
                        r.job.uid = uid;
                    }
                }
            }
            rows
        }
        other => {
            eprintln!("sacct: error: {}", refusal(other));
            return 1;
        }
    };
    if o.query.with_script || o.query.with_env {
        print!("{}", render_texts(&rows, o.query.with_script, o.header));
        return 0;
    }
    if o.json {
        // The body of slurmrestd's `GET slurmdb/v0.0.44/jobs`.
        let jobs: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| slurm_openapi::dbjson::job(r, now))
            .collect();
        let mut fields = serde_json::Map::new();
        fields.insert("jobs".into(), serde_json::Value::Array(jobs));
        let text = crate::jsonout::fields_text("sacct", &args, &conf.cluster_name, fields);
        print!("{text}");
        return 0;
    }
    print_rows(&o, &rows, &cols, o.query.with_steps, now);
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u32, name: &str, state: JobState, cpus: u32) -> AcctJob {
        AcctJob {
            job_id: id,
            name: name.into(),
            partition: "debug".into(),
            account: "anchoracct".into(),
            state: state.into(),
            alloc_cpus: cpus,
            nodelist: "n1".into(),
            node_count: 1,
            ..Default::default()
        }
    }

    fn step(id: u32, name: &str, state: JobState, cpus: u32, status: i32) -> AcctStep {
        AcctStep {
            step_id: id,
            name: name.into(),
            state: state.into(),
            alloc_cpus: cpus,
            exit_status: status,
            nodelist: "n1".into(),
            node_count: 1,
            ntasks: 1,
            ..Default::default()
        }
    }

    /// The ids of `rs` that sacct with arguments `a` keeps.
    fn kept_ids(rs: &[JobRow], a: &[&str]) -> Vec<u32> {
        let argv: Vec<String> = a.iter().map(|s| s.to_string()).collect();
        let o = parse_args(&argv, 0).unwrap();
        rs.iter()
            .filter(|r| o.keeps(r))
            .map(|r| r.job.job_id)
            .collect()
    }

    fn rows() -> Vec<JobRow> {
        let mut cancelled = job(6, "long1", JobState::Cancelled, 4);
        cancelled.requid = Some(0);
        let mut pending = job(12, "later", JobState::Cancelled, 1);
        pending.requid = Some(999);
        pending.nodelist.clear();
        vec![
            JobRow {
                cluster: "c".into(),
                job: job(5, "envstep", JobState::Completed, 2),
                steps: vec![
                    step(BATCH_STEP, "batch", JobState::Completed, 2, 0),
                    step(0, "bash", JobState::Completed, 2, 0),
                ],
            },
            JobRow {
                cluster: "c".into(),
                job: cancelled,
                steps: vec![step(BATCH_STEP, "batch", JobState::Cancelled, 4, 15)],
            },
            JobRow {
                cluster: "c".into(),
                job: pending,
                steps: vec![],
            },
        ]
    }

    /// `-k` alone: exactly that limit; with `-K`: the range; `-K` alone
    /// changes nothing (as Slurm's).
    #[test]
    fn time_limit_filters() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut rs = rows();
        rs[0].job.time_limit = Some(10);
        rs[1].job.time_limit = Some(60);
        rs[2].job.time_limit = None;
        let ids: Vec<u32> = rs.iter().map(|r| r.job.job_id).collect();
        let kept = |a: &[&str]| kept_ids(&rs, a);
        assert_eq!(kept(&["-k", "10"]), vec![ids[0]]);
        assert_eq!(kept(&["-k", "10", "-K", "1:00:00"]), vec![ids[0], ids[1]]);
        assert_eq!(kept(&["--timelimit-max=5"]), ids);
        assert_eq!(kept(&["--timelimit-min=UNLIMITED"]), vec![ids[2]]);
        assert_eq!(
            parse_args(&args(&["-k", "soon"]), 0).unwrap_err(),
            "sacct: error: Invalid time limit: soon"
        );
    }

    /// `--whole-hetjob[=yes|no]`: every job is whole here, so the same
    /// jobs either way; a bad value is Slurm's error.
    #[test]
    fn whole_hetjob_lists_the_same_jobs_and_checks_its_value() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let rs = rows();
        let all: Vec<u32> = rs.iter().map(|r| r.job.job_id).collect();
        for a in ["--whole-hetjob", "--whole-hetjob=yes", "--whole-hetjob=N"] {
            assert_eq!(kept_ids(&rs, &[a]), all, "{a}");
        }
        assert_eq!(
            parse_args(&args(&["--whole-hetjob=maybe"]), 0).unwrap_err(),
            "sacct: error: Invalid --whole-hetjob value \"maybe\". Valid values: [yes|no]."
        );
    }

    #[test]
    fn filters_slurmdbd_is_not_asked_for_and_the_delimiter() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let env = |k: &str| (k == "SACCT_FORMAT").then(|| "JobID,State".to_string());
        let o = parse_args_env(&args(&["-I", "2-4", "-P", "--delimiter=;"]), 0, &env).unwrap();
        assert_eq!(o.format.as_deref(), Some("JobID,State"));
        let kept: Vec<u32> = rows()
            .into_iter()
            .filter(|r| o.keeps(r))
            .map(|r| r.job.job_id)
            .collect();
        assert_eq!(kept, vec![5, 6]);
        let cols = parse_format(o.format.as_deref().unwrap()).unwrap();
        let out = render_with(&rows()[..1], &cols, Layout::Parsable2, ";", true, false, 0);
        assert_eq!(out, "JobID;State\n5;COMPLETED\n");
        // -o on the command line wins over SACCT_FORMAT.
        let o = parse_args_env(&args(&["-o", "JobName"]), 0, &env).unwrap();
        assert_eq!(o.format.as_deref(), Some("JobName"));
        // Nodes and groups.
        let o = parse_args(&args(&["-N", "n[2-3]"]), 0).unwrap();
        assert!(rows().iter().all(|r| !o.keeps(r)));
        let o = parse_args(&args(&["-N", "n1", "--group", "0"]), 0).unwrap();
        assert_eq!(rows().iter().filter(|r| o.keeps(r)).count(), 2);
        // --units: sizes in one unit, two decimals.
        assert_eq!(in_units("2048K", 'M'), "2.00M");
        assert_eq!(in_units("3G", 'M'), "3072.00M");
        assert_eq!(in_units("100M", 'G'), "0.10G");
        assert_eq!(in_units("x", 'M'), "x");
        let o = parse_args(&args(&["--units=m"]), 0).unwrap();
        assert_eq!(o.units, Some('M'));
        assert!(parse_args(&args(&["--units=Q"]), 0).is_err());
        let mut cols = parse_format("JobID,ReqMem").unwrap();
        cols.iter_mut().for_each(|c| c.units = Some('M'));
        let mut rs = rows();
        rs[0].job.req_mem = 2048;
        let out = render_with(&rs[..1], &cols, Layout::Parsable2, "|", false, false, 0);
        assert_eq!(out, "5|2048.00M\n");
        // Without --units: the largest exact unit, unless --noconvert.
        cols.iter_mut().for_each(|c| c.units = None);
        let out = render_with(&rs[..1], &cols, Layout::Parsable2, "|", false, false, 0);
        assert_eq!(out, "5|2G\n");
        cols.iter_mut().for_each(|c| c.noconvert = true);
        let out = render_with(&rs[..1], &cols, Layout::Parsable2, "|", false, false, 0);
        assert_eq!(out, "5|2048M\n");
        assert!(parse_args(&args(&["--noconvert"]), 0).unwrap().noconvert);
        assert_eq!(exact_units("10240K"), "10M");
        assert_eq!(exact_units("1057408K"), "1057408K");
        assert_eq!(exact_units("3145728M"), "3T");
        assert_eq!(exact_units("0"), "0");
        assert_eq!(exact_units("x"), "x");
        // -T: times cut to the window, elapsed with them.
        let mut o = parse_args(&args(&["-T"]), 0).unwrap();
        o.query.start = Some(1_500);
        o.query.end = Some(1_800);
        let mut rs = rows();
        rs[0].job.start_time = Some(1_000);
        rs[0].job.end_time = Some(2_000);
        o.truncate(&mut rs);
        assert_eq!(
            (rs[0].job.start_time, rs[0].job.end_time),
            (Some(1_500), Some(1_800))
        );
        let cols = parse_format("Elapsed").unwrap();
        let out = render_with(&rs[..1], &cols, Layout::Parsable2, "|", false, false, 0);
        assert_eq!(out, "00:05:00\n");
        assert!(parse_args(&args(&["-i", "3-1"]), 0).is_err());
        assert!(parse_args(&args(&["-i", "x"]), 0).is_err());
    }

    #[test]
    fn suspended_time_is_not_elapsed_time() {
        let mut j = job(9, "s", JobState::Suspended, 2);
        j.start_time = Some(1_000);
        j.suspended_secs = 30;
        j.suspend_start = Some(1_100);
        // At 1_200: 200 s since start, 30 + 100 of them suspended.
        assert_eq!(job_value("Suspended", "c", &j, 1_200), "00:02:10");
        assert_eq!(job_value("ElapsedRaw", "c", &j, 1_200), "70");
        // Resumed and ended: only the finished suspensions count.
        j.state = JobState::Completed.into();
        j.suspended_secs = 130;
        j.end_time = Some(1_300);
        assert_eq!(job_value("ElapsedRaw", "c", &j, 9_999), "170");
        assert_eq!(job_value("CPUTimeRAW", "c", &j, 9_999), "340");
    }

    #[test]
    fn default_layout_matches_slurm() {
        let cols = parse_format(DEFAULT_FORMAT).unwrap();
        let out = render(&rows(), &cols, Layout::Columns, true, true, 0);
        let want = "\
JobID           JobName  Partition    Account  AllocCPUS      State ExitCode 
------------ ---------- ---------- ---------- ---------- ---------- -------- 
5               envstep      debug anchoracct          2  COMPLETED      0:0 
5.batch           batch            anchoracct          2  COMPLETED      0:0 
5.0                bash            anchoracct          2  COMPLETED      0:0 
6                 long1      debug anchoracct          4 CANCELLED+      0:0 
6.batch           batch            anchoracct          4  CANCELLED     0:15 
12                later      debug anchoracct          1 CANCELLED+      0:0 
";
        assert_eq!(out, want);
    }

    #[test]
    fn parsable_and_nodelist() {
        let cols = parse_format("JobID,State,ExitCode,NodeList").unwrap();
        let out = render(&rows(), &cols, Layout::Parsable2, true, false, 0);
        assert_eq!(
            out,
            "JobID|State|ExitCode|NodeList\n5|COMPLETED|0:0|n1\n\
             6|CANCELLED by 0|0:0|n1\n12|CANCELLED by 999|0:0|None assigned\n"
        );
        assert!(parse_format("JobID,Bogus").unwrap_err().contains("Bogus"));
        assert_eq!(parse_format("JobName%30").unwrap()[0].width, 30);
    }

    #[test]
    fn options_build_the_query() {
        let a: Vec<String> = ["-j", "4,5_2,6.batch", "-X", "-s", "CD,ca", "-u", "alice"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let o = parse_args(&a, 1_000_000).unwrap();
        assert_eq!(o.query.job_ids, vec![4, 5, 6]);
        assert!(!o.query.with_steps);
        assert_eq!(
            o.query.states,
            vec![JobState::Completed, JobState::Cancelled]
        );
        assert_eq!(o.query.users, vec!["alice"]);
        assert_eq!(o.query.start, None);
        assert!(parse_args(&["-s".into(), "bogus".into()], 0).is_err());
    }

    /// Constraints, Flags, Reason, Reservation, Restarts, FailedNode,
    /// Planned and the file patterns, with the filters that select by them
    /// (`-C` all named features, `-F` any flag, `-R` any reason) and
    /// `--expand-patterns`.
    #[test]
    fn scheduling_fields_and_their_filters() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let mut rs = rows();
        let j = &mut rs[0].job;
        j.constraints = "intel&ib".into();
        j.sched_flag = "SchedBackfill".into();
        j.reason = "Dependency".into();
        j.reservation = "maint".into();
        j.restarts = 2;
        j.failed_node = "n9".into();
        j.eligible_time = Some(100);
        j.start_time = Some(190);
        j.end_time = Some(400);
        j.req_cpus = 4;
        j.user = "alice".into();
        j.work_dir = "/home/alice".into();
        j.std_out = "%x-%j.out".into();
        j.std_err = "/var/log/%u/%N.err".into();
        j.std_in = "/dev/null".into();
        // The pending one has waited since 1000.
        rs[2].job.eligible_time = Some(1_000);
        rs[2].job.end_time = None;
        let cols = parse_format(
            "Constraints,Flags,Reason,Reservation,Restarts,FailedNode,Planned,PlannedCPURAW,StdOut,StdErr",
        )
        .unwrap();
        let out = render_with(&rs, &cols, Layout::Parsable2, "|", false, false, 1_030);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "intel&ib|SchedBackfill,StartReceived|Dependency|maint|2|n9|00:01:30|360|%x-%j.out|/var/log/%u/%N.err"
        );
        // Never started, no scheduler: None; no reason recorded: None.
        assert_eq!(lines[2], "|None|None||0||00:00:30|0||");
        let mut o = parse_args(&args(&["--expand-patterns"]), 0).unwrap();
        o.expand_patterns(&mut rs);
        assert_eq!(rs[0].job.std_out, "/home/alice/envstep-5.out");
        assert_eq!(rs[0].job.std_err, "/var/log/alice/n1.err");
        assert_eq!(rs[0].job.std_in, "/dev/null");
        assert_eq!(rs[1].job.std_out, "", "nothing recorded stays empty");
        o.expand_patterns = false;
        let kept = |a: &[&str]| kept_ids(&rs, a);
        assert_eq!(kept(&["-C", "intel,ib"]), vec![5]);
        assert_eq!(kept(&["-C", "intel,gpu"]), Vec::<u32>::new());
        assert_eq!(kept(&["-C", ""]), vec![6, 12]);
        assert_eq!(kept(&["-F", "schedbackfill"]), vec![5]);
        assert_eq!(kept(&["-F", "SchedMain,StartReceived"]), vec![5]);
        assert_eq!(kept(&["-F", "None"]), vec![6, 12]);
        assert_eq!(kept(&["-R", "dependency"]), vec![5]);
        assert_eq!(kept(&["-R", "None,BeginTime"]), vec![6, 12]);
        assert_eq!(kept(&["-R", "QOSMaxJobsPerUserLimit"]), Vec::<u32>::new());
        let e = parse_args(&args(&["-F", "Fast"]), 0).unwrap_err();
        assert!(e.contains("Invalid job flag Fast"), "{e}");
        let e = parse_args(&args(&["-R", "Sleepy"]), 0).unwrap_err();
        assert_eq!(e, "sacct: fatal: unrecognized job reason value 'Sleepy'");
    }
}
