//! `squeue`: list jobs in the queue.
//!
//! Options follow Slurm's (`-o`/`--format` field letters, `-O`/`--Format`
//! long names, `-S` sort keys, `-j -u -t -p -w -n -A -q` filters, `-h`, `-l`,
//! `--start`, `-i`), with `SQUEUE_FORMAT`, `SQUEUE_FORMAT2`, `SQUEUE_SORT`,
//! `SQUEUE_STATES`, `SQUEUE_USERS`, `SQUEUE_PARTITION`, `SQUEUE_ACCOUNT`,
//! `SQUEUE_QOS` and `SQUEUE_NAMES` read from the environment (the command
//! line wins).
//!
//! [`format_jobs`] is pure (records, options, `now`, time zone → text) so the
//! layouts are checked against real Slurm output in the tests below.

use crate::fmt::{self, Arg, Field, Item, Opt, Parsed, Tz};
use slurm_proto::{JobRecord, JobState, RequestBody, Response, ALL_JOB_STATES};
use std::borrow::Cow;
use std::cmp::Ordering;

/// `squeue`'s default layout.
pub const DEFAULT_FORMAT: &str = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R";
/// `squeue -l`.
pub const LONG_FORMAT: &str = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R";
/// `squeue --start`.
pub const START_FORMAT: &str = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R";
/// Default sort: partition, then state, then decreasing priority.
pub const DEFAULT_SORT: &str = "P,t,-p";

const LETTERS: &str = "aAbBcCdDeEfFgGhHiIjJkKlLmMnNoOpPqQrRsStTuUvVwWxXyYzZ";

/// `-O` names → the key used internally (a `-o` letter where one exists).
const LONG_NAMES: &[(&str, &str)] = &[
    ("account", "a"),
    ("accruetime", "accruetime"),
    ("admin_comment", "admin_comment"),
    ("allocnodes", "allocnodes"),
    ("allocsid", "allocsid"),
    ("arrayjobid", "F"),
    ("arraytaskid", "K"),
    ("associd", "associd"),
    ("batchflag", "batchflag"),
    ("batchhost", "B"),
    ("boardspernode", "boardspernode"),
    ("burstbuffer", "burstbuffer"),
    ("burstbufferstate", "burstbufferstate"),
    ("cluster", "cluster"),
    ("clusterfeature", "clusterfeature"),
    ("command", "o"),
    ("comment", "k"),
    ("contiguous", "O"),
    ("cores", "I"),
    ("corespec", "X"),
    ("cpufreq", "cpufreq"),
    ("cpus-per-task", "cpus-per-task"),
    ("cpus-per-tres", "cpus-per-tres"),
    ("deadline", "deadline"),
    ("delayboot", "delayboot"),
    ("dependency", "E"),
    ("derivedec", "derivedec"),
    ("eligibletime", "eligibletime"),
    ("endtime", "e"),
    ("exit_code", "exit_code"),
    ("excnodes", "x"),
    ("feature", "f"),
    ("groupid", "G"),
    ("groupname", "g"),
    ("jobarrayid", "F"),
    ("jobid", "i"),
    ("lastschedeval", "lastschedeval"),
    ("licenses", "W"),
    ("maxcpus", "maxcpus"),
    ("maxnodes", "maxnodes"),
    ("mcslabel", "mcslabel"),
    ("mem-per-tres", "mem-per-tres"),
    ("mincpus", "c"),
    ("minmemory", "m"),
    ("mintime", "mintime"),
    ("mintmpdisk", "d"),
    ("name", "j"),
    ("network", "network"),
    ("nice", "y"),
    ("nodelist", "N"),
    ("nodes", "N"),
    ("numcpus", "C"),
    ("numnodes", "D"),
    ("numtasks", "numtasks"),
    ("oversubscribe", "h"),
    ("partition", "P"),
    ("pendingtime", "pendingtime"),
    ("priority", "p"),
    ("prioritylong", "Q"),
    ("qos", "q"),
    ("reason", "r"),
    ("reasonlist", "R"),
    ("reboot", "reboot"),
    ("reqnodes", "n"),
    ("requeue", "requeue"),
    ("reservation", "v"),
    ("restartcnt", "restartcnt"),
    ("schednodes", "Y"),
    ("sct", "z"),
    ("sockets", "H"),
    ("starttime", "S"),
    ("state", "T"),
    ("statecompact", "t"),
    ("stderr", "stderr"),
    ("stdin", "stdin"),
    ("stdout", "stdout"),
    ("submittime", "V"),
    ("system_comment", "system_comment"),
    ("threads", "J"),
    ("timeleft", "L"),
    ("timelimit", "l"),
    ("timeused", "M"),
    ("tres-alloc", "tres-alloc"),
    ("userid", "U"),
    ("username", "u"),
    ("wckey", "w"),
    ("workdir", "Z"),
];

fn canon_long(name: &str) -> Option<String> {
    LONG_NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, k)| k.to_string())
}

/// Column title for a field key.
pub fn header(key: &str) -> &'static str {
    match key {
        "a" => "ACCOUNT",
        "A" | "i" => "JOBID",
        "b" => "TRES_PER_NODE",
        "B" => "EXEC_HOST",
        "c" => "MIN_CPUS",
        "C" => "CPUS",
        "d" => "MIN_TMP_DISK",
        "D" => "NODES",
        "e" => "END_TIME",
        "E" => "DEPENDENCY",
        "f" => "FEATURES",
        "F" => "ARRAY_JOB_ID",
        "g" | "G" => "GROUP",
        "h" => "OVER_SUBSCRIBE",
        "H" => "SOCKETS_PER_NODE",
        "I" => "CORES_PER_SOCKET",
        "j" => "NAME",
        "J" => "THREADS_PER_CORE",
        "k" => "COMMENT",
        "K" => "ARRAY_TASK_ID",
        "l" => "TIME_LIMIT",
        "L" => "TIME_LEFT",
        "m" => "MIN_MEMORY",
        "M" => "TIME",
        "n" => "REQ_NODES",
        "N" => "NODELIST",
        "o" => "COMMAND",
        "O" => "CONTIGUOUS",
        "p" | "Q" => "PRIORITY",
        "P" => "PARTITION",
        "q" => "QOS",
        "r" => "REASON",
        "R" => "NODELIST(REASON)",
        "s" => "SELECT_JOBINFO",
        "S" => "START_TIME",
        "t" => "ST",
        "T" => "STATE",
        "u" => "USER",
        "U" => "UID",
        "v" => "RESERVATION",
        "V" => "SUBMIT_TIME",
        "w" => "WCKEY",
        "W" => "LICENSES",
        "x" => "EXC_NODES",
        "X" => "CORE_SPEC",
        "y" => "NICE",
        "Y" => "SCHEDNODES",
        "z" => "S:C:T",
        "Z" => "WORK_DIR",
        "accruetime" => "ACCRUE_TIME",
        "admin_comment" => "ADMIN_COMMENT",
        "allocnodes" => "ALLOC_NODES",
        "allocsid" => "ALLOC_SID",
        "associd" => "ASSOC_ID",
        "batchflag" => "BATCH_FLAG",
        "boardspernode" => "BOARDS_PER_NODE",
        "burstbuffer" => "BURST_BUFFER",
        "burstbufferstate" => "BURST_BUFFER_STATE",
        "cluster" => "CLUSTER",
        "clusterfeature" => "CLUSTER_FEATURE",
        "cpufreq" => "CPU_FREQ",
        "cpus-per-task" => "CPUS_PER_TASK",
        "cpus-per-tres" => "CPUS_PER_TRES",
        "deadline" => "DEADLINE",
        "delayboot" => "DELAY_BOOT",
        "derivedec" => "DERIVED_EC",
        "eligibletime" => "ELIGIBLE_TIME",
        "exit_code" => "EXIT_CODE",
        "lastschedeval" => "LAST_SCHED_EVAL",
        "maxcpus" => "MAX_CPUS",
        "maxnodes" => "MAX_NODES",
        "mcslabel" => "MCSLABEL",
        "mem-per-tres" => "MEM_PER_TRES",
        "mintime" => "MIN_TIME",
        "network" => "NETWORK",
        "numtasks" => "TASKS",
        "pendingtime" => "PENDING_TIME",
        "reboot" => "REBOOT",
        "requeue" => "REQUEUE",
        "restartcnt" => "RESTARTCNT",
        "stderr" => "STDERR",
        "stdin" => "STDIN",
        "stdout" => "STDOUT",
        "system_comment" => "SYSTEM_COMMENT",
        "tres-alloc" => "TRES_ALLOC",
        _ => "",
    }
}

fn null_or(s: &Option<String>) -> String {
    match s {
        Some(v) if !v.is_empty() => v.clone(),
        _ => "(null)".to_string(),
    }
}

/// A job's reason shown in parentheses in NODELIST(REASON).
fn shows_reason(job: &JobRecord) -> bool {
    matches!(
        job.state,
        JobState::Pending
            | JobState::Failed
            | JobState::Timeout
            | JobState::NodeFail
            | JobState::BootFail
            | JobState::Deadline
            | JobState::OutOfMemory
    ) && !job.completing
}

fn time_left(job: &JobRecord, now: i64) -> String {
    match job.time_limit {
        None => "UNLIMITED".to_string(),
        Some(l) => {
            let left = i64::from(l) * 60 - fmt::job_run_secs(job, now);
            slurm_common::timefmt::format_elapsed(left.max(0))
        }
    }
}

/// The value of field `key` for `job`.
pub fn job_value<'a>(key: &str, job: &'a JobRecord, now: i64, tz: Tz) -> Cow<'a, str> {
    // What a table shows most, without a copy.
    match key {
        "a" => Cow::Borrowed(fmt::or_null(&job.account)),
        "g" => Cow::Borrowed(&job.group_name),
        "j" => Cow::Borrowed(&job.name),
        "P" => Cow::Borrowed(&job.partition),
        "q" => Cow::Borrowed(&job.qos),
        "u" => Cow::Borrowed(&job.user_name),
        "t" => Cow::Borrowed(fmt::job_state_short(job)),
        "T" => Cow::Borrowed(fmt::job_state_long(job)),
        "M" => match fmt::job_run_secs(job, now) {
            ..=0 => Cow::Borrowed("0:00"),
            s => Cow::Owned(slurm_common::timefmt::format_elapsed(s)),
        },
        _ => Cow::Owned(other_value(key, job, now, tz)),
    }
}

/// [`job_value`] for the keys it does not borrow.
fn other_value(key: &str, job: &JobRecord, now: i64, tz: Tz) -> String {
    use slurm_common::hostlist::compress;
    use slurm_common::timefmt::format_limit_squeue;
    match key {
        "i" => job.display_id(),
        "A" => job.job_id.to_string(),
        "F" => job
            .array
            .as_ref()
            .map_or(job.job_id, |a| a.job_id)
            .to_string(),
        "K" => job
            .array
            .as_ref()
            .map_or("N/A".to_string(), |a| a.task_id.to_string()),
        "b" => "N/A".to_string(),
        "B" => job.batch_host.clone().unwrap_or_else(|| "n/a".to_string()),
        "c" => fmt::job_min_cpus_node(job).to_string(),
        "C" => fmt::job_num_cpus(job).to_string(),
        "d" => "0".to_string(),
        "D" => fmt::job_num_nodes(job).to_string(),
        "e" => tz.opt_timestamp(fmt::job_end(job, now), "N/A"),
        "E" => "(null)".to_string(),
        "f" => "(null)".to_string(),
        "G" => job.group_id.to_string(),
        "h" => if job.desc.exclusive { "NO" } else { "OK" }.to_string(),
        "H" | "I" | "J" => "*".to_string(),
        "k" => null_or(&job.desc.comment),
        "l" => format_limit_squeue(job.time_limit),
        "L" => time_left(job, now),
        "m" => fmt::job_min_memory(job),
        "n" => compress(&job.desc.req_nodes),
        "N" => fmt::job_nodelist(job),
        "o" => null_or(&job.desc.command),
        "O" => "0".to_string(),
        "p" => format!("{:.8}", f64::from(job.priority) / f64::from(u32::MAX)),
        "Q" => job.priority.to_string(),
        "r" => job.reason.to_string(),
        "R" => {
            if shows_reason(job) {
                format!("({})", job.reason)
            } else {
                fmt::job_nodelist(job)
            }
        }
        "s" => "(null)".to_string(),
        "S" => tz.opt_timestamp(fmt::job_start(job, now), "N/A"),
        "U" => job.user_id.to_string(),
        "w" => null_or(&job.desc.wckey),
        "v" | "W" => "(null)".to_string(),
        "V" => tz.timestamp(job.submit_time),
        "x" => compress(&job.desc.exc_nodes),
        "X" => "N/A".to_string(),
        "y" => job.desc.nice.unwrap_or(0).to_string(),
        "Y" => "(null)".to_string(),
        "z" => "*:*:*".to_string(),
        "Z" => job.desc.work_dir.clone(),
        "accruetime" => tz.opt_timestamp(job.eligible_time.filter(|t| *t <= now), "Unknown"),
        "admin_comment" | "system_comment" => String::new(),
        "allocnodes" => job.desc.submit_host.clone(),
        "allocsid" | "associd" | "boardspernode" => "0".to_string(),
        "batchflag" => "1".to_string(),
        "burstbuffer" | "burstbufferstate" | "clusterfeature" | "cpus-per-tres"
        | "mem-per-tres" | "mcslabel" | "network" => "(null)".to_string(),
        "cluster" => "N/A".to_string(),
        "cpufreq" => "Unknown".to_string(),
        "cpus-per-task" => fmt::job_cpus_per_task(job).to_string(),
        "deadline" => tz.opt_timestamp(job.desc.deadline, "N/A"),
        "delayboot" => "00:00:00".to_string(),
        "derivedec" => "0:0".to_string(),
        "eligibletime" => tz.opt_timestamp(job.eligible_time, "N/A"),
        "exit_code" => {
            let (c, s) = job.exit_code_pair();
            format!("{c}:{s}")
        }
        "lastschedeval" => tz.opt_timestamp(job.last_sched_eval, "Unknown"),
        "maxcpus" => "0".to_string(),
        "maxnodes" => job.max_nodes.to_string(),
        "mintime" => "0".to_string(),
        "numtasks" => job.num_tasks.to_string(),
        "pendingtime" => {
            let until = job.start_time.filter(|s| *s > 0).unwrap_or(now);
            (until - job.submit_time).max(0).to_string()
        }
        "reboot" => "0".to_string(),
        "requeue" => u8::from(job.desc.requeue.unwrap_or(true)).to_string(),
        "restartcnt" => job.restarts.to_string(),
        // As the job keeps them; `--expand-patterns` expands them.
        "stdout" => fmt::job_std_patterns(job).0,
        "stderr" => fmt::job_std_patterns(job).1,
        "stdin" => fmt::job_std_patterns(job).2,
        "tres-alloc" => fmt::job_tres(job, None),
        _ => String::new(),
    }
}

pub use slurm_proto::{JobFilter, StateSel};

/// Job selection (`-j -u -t -p -w -n -A -q`). Empty lists select
/// everything. All but the nodes is sent to the controller, which answers
/// with the matching jobs only.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub query: JobFilter,
    /// Expanded node names.
    pub nodes: Vec<String>,
    /// `-L`: jobs asking for any of these licenses.
    pub licenses: Vec<String>,
    /// `-R`: jobs of this reservation.
    pub reservation: Option<String>,
    /// `--notme`: every user's jobs but this one's.
    pub not_uid: Option<u32>,
    /// `--running-over`: running jobs that have run at least this long (s).
    pub running_over: Option<i64>,
    /// `--running-under`: running jobs that have run less than this (s).
    pub running_under: Option<i64>,
}

/// A `--running-over/--running-under` time in seconds, as Slurm reads it:
/// `minutes`, `minutes:seconds`, `hours:minutes:seconds`, `days-hours`,
/// `days-hours:minutes`, `days-hours:minutes:seconds`, or
/// `UNLIMITED`/`INFINITE`.
fn running_secs(s: &str) -> Option<i64> {
    let t = s.trim();
    if ["unlimited", "infinite"].contains(&t.to_ascii_lowercase().as_str()) {
        return Some(i64::MAX);
    }
    let num = |f: &str| -> Option<i64> {
        (!f.is_empty() && f.chars().all(|c| c.is_ascii_digit()))
            .then(|| f.parse().ok())
            .flatten()
    };
    let (days, rest) = match t.split_once('-') {
        Some((d, r)) => (Some(num(d)?), r),
        None => (None, t),
    };
    let f: Vec<i64> = rest.split(':').map(num).collect::<Option<_>>()?;
    let secs = match (days, f.as_slice()) {
        (None, [m]) => m * 60,
        (None, [m, s]) => m * 60 + s,
        (None, [h, m, s]) | (Some(_), [h, m, s]) => h * 3600 + m * 60 + s,
        (Some(_), [h]) => h * 3600,
        (Some(_), [h, m]) => h * 3600 + m * 60,
        _ => return None,
    };
    Some(days.unwrap_or(0) * 86400 + secs).filter(|&v| v > 0)
}

impl Filter {
    pub fn matches(&self, job: &JobRecord) -> bool {
        if !self.query.matches(job) {
            return false;
        }
        if !self.nodes.is_empty() {
            let nodes = fmt::job_nodes(job);
            if !nodes.iter().any(|n| self.nodes.contains(n)) {
                return false;
            }
        }
        if !self.licenses.is_empty() {
            let asked = job.desc.licenses.as_deref().unwrap_or("");
            let names = asked
                .split(',')
                .map(|l| l.split([':', '=']).next().unwrap_or(""));
            if !names
                .into_iter()
                .any(|n| self.licenses.iter().any(|w| w == n))
            {
                return false;
            }
        }
        if self.not_uid == Some(job.user_id) {
            return false;
        }
        if self.running_over.is_some() || self.running_under.is_some() {
            if job.state != JobState::Running {
                return false;
            }
            let used = fmt::job_run_secs(job, crate::common::now());
            if self.running_over.is_some_and(|o| used < o)
                || self.running_under.is_some_and(|u| used >= u)
            {
                return false;
            }
        }
        if let Some(r) = &self.reservation {
            if job.desc.reservation.as_deref() != Some(r.as_str()) {
                return false;
            }
        }
        true
    }
}

/// One `-S` key: a field key and whether it sorts descending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortKey {
    pub key: String,
    pub desc: bool,
}

/// Parses a `-S` list (`P,t,-p`); unknown keys are returned as errors.
pub fn parse_sort(s: &str) -> (Vec<SortKey>, Vec<String>) {
    let mut keys = Vec::new();
    let mut errs = Vec::new();
    for item in s.split(',').filter(|x| !x.is_empty()) {
        let (desc, name) = if let Some(r) = item.strip_prefix('-') {
            (true, r)
        } else if let Some(r) = item.strip_prefix('+') {
            (false, r)
        } else {
            (false, item)
        };
        let key = if name.chars().count() == 1 && LETTERS.contains(name) {
            Some(name.to_string())
        } else {
            canon_long(&name.to_ascii_lowercase())
        };
        match key {
            Some(key) => keys.push(SortKey { key, desc }),
            None => errs.push(name.to_string()),
        }
    }
    (keys, errs)
}

fn state_rank(job: &JobRecord) -> (usize, bool) {
    let idx = ALL_JOB_STATES
        .iter()
        .position(|s| *s == job.state)
        .unwrap_or(0);
    (idx, job.completing)
}

fn cmp_key(key: &str, a: &JobRecord, b: &JobRecord, now: i64) -> Ordering {
    match key {
        "i" | "A" | "F" => a.job_id.cmp(&b.job_id),
        "t" | "T" => state_rank(a).cmp(&state_rank(b)),
        "p" | "Q" => a.priority.cmp(&b.priority),
        "P" => a.partition.cmp(&b.partition),
        "U" => a.user_id.cmp(&b.user_id),
        "G" => a.group_id.cmp(&b.group_id),
        "S" => {
            let k = |j: &JobRecord| fmt::job_start(j, now).unwrap_or(i64::MAX);
            k(a).cmp(&k(b))
        }
        "e" => {
            let k = |j: &JobRecord| fmt::job_end(j, now).unwrap_or(i64::MAX);
            k(a).cmp(&k(b))
        }
        "V" => a.submit_time.cmp(&b.submit_time),
        "M" => fmt::job_run_secs(a, now).cmp(&fmt::job_run_secs(b, now)),
        "l" => a
            .time_limit
            .unwrap_or(u32::MAX)
            .cmp(&b.time_limit.unwrap_or(u32::MAX)),
        "L" => {
            let k = |j: &JobRecord| match j.time_limit {
                None => i64::MAX,
                Some(l) => i64::from(l) * 60 - fmt::job_run_secs(j, now),
            };
            k(a).cmp(&k(b))
        }
        "D" => fmt::job_num_nodes(a).cmp(&fmt::job_num_nodes(b)),
        "C" => fmt::job_num_cpus(a).cmp(&fmt::job_num_cpus(b)),
        "y" => a.desc.nice.unwrap_or(0).cmp(&b.desc.nice.unwrap_or(0)),
        "N" => {
            let (x, y) = (fmt::job_nodes(a), fmt::job_nodes(b));
            let fa = x.first().map(String::as_str).unwrap_or("");
            let fb = y.first().map(String::as_str).unwrap_or("");
            fmt::host_cmp(fa, fb)
        }
        k => job_value(k, a, now, Tz::Utc).cmp(&job_value(k, b, now, Tz::Utc)),
    }
}

/// Sorts by `keys` in order (first key primary); ties keep job-id order.
pub fn sort_jobs(jobs: &mut [&JobRecord], keys: &[SortKey], now: i64) {
    jobs.sort_by_key(|j| j.job_id);
    jobs.sort_by(|a, b| {
        for k in keys {
            let o = cmp_key(&k.key, a, b, now);
            let o = if k.desc { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    });
}

/// What `squeue` prints, given its parsed options.
#[derive(Debug, Clone)]
pub struct Options {
    pub items: Vec<Item>,
    pub noheader: bool,
    /// Print the date line first (`-l`, `-i`).
    pub time_header: bool,
    pub sort: Vec<SortKey>,
    pub filter: Filter,
    /// `-s`: list job steps instead of jobs.
    pub steps: bool,
    /// `--json`: slurmrestd's job list instead of the table.
    pub json: bool,
    /// `--only-job-state`: ids and states only (REST `jobs/state/`).
    pub only_state: bool,
    /// `--expand-patterns`: `StdOut`, `StdErr`, `StdIn` with their file
    /// patterns expanded (else as the job keeps them).
    pub expand_patterns: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            items: fmt::parse_short(DEFAULT_FORMAT, &|_| true).0,
            noheader: false,
            steps: false,
            time_header: false,
            sort: parse_sort(DEFAULT_SORT).0,
            filter: Filter::default(),
            json: false,
            only_state: false,
            expand_patterns: false,
        }
    }
}

/// Format (`-o`) and sort (`-S`) keys whose values come from the job
/// record alone, never from its request (`desc`).
const FROM_RECORD: &[&str] = &[
    "i", "A", "F", "K", "a", "j", "u", "U", "g", "G", "P", "q", "Q", "p", "t", "T", "r", "R", "M",
    "D", "N", "l", "V",
];

/// Whether the table can be made from jobs listed without their requests
/// (`RequestBody::GetJobsBrief`): every field shown and sorted on is in
/// [`FROM_RECORD`] (the default formats' are).
fn brief_is_enough(opts: &Options) -> bool {
    !opts.json
        && !opts.steps
        && !opts.only_state
        && opts.filter.licenses.is_empty()
        && opts.filter.reservation.is_none()
        && opts.items.iter().all(|i| match i {
            Item::Field(f) => FROM_RECORD.contains(&f.key.as_str()),
            Item::Text(_) => true,
        })
        && opts
            .sort
            .iter()
            .all(|k| FROM_RECORD.contains(&k.key.as_str()))
}

/// Renders the job table.
pub fn format_jobs(jobs: &[JobRecord], opts: &Options, now: i64, tz: Tz) -> String {
    let mut sel: Vec<&JobRecord> = jobs.iter().filter(|j| opts.filter.matches(j)).collect();
    sort_jobs(&mut sel, &opts.sort, now);
    let mut out = String::new();
    if opts.time_header {
        out.push_str(&tz.header_time(now));
        out.push('\n');
    }
    if !opts.noheader {
        out.push_str(&fmt::render(&opts.items, &mut |f: &Field| {
            header(&f.key).to_string()
        }));
        out.push('\n');
    }
    out.reserve(sel.len() * 96);
    for job in sel {
        fmt::render_into(
            &mut out,
            &opts.items,
            &mut |f: &Field| match f.key.as_str() {
                "stdout" if opts.expand_patterns => fmt::job_std_paths(job).0.into(),
                "stderr" if opts.expand_patterns => fmt::job_std_paths(job).1.into(),
                "stdin" if opts.expand_patterns => fmt::job_std_paths(job).2.into(),
                _ => job_value(&f.key, job, now, tz),
            },
        );
        out.push('\n');
    }
    out
}

fn parse_states(s: &str) -> Result<Vec<StateSel>, String> {
    let mut out = Vec::new();
    for item in fmt::split_list(s) {
        if item.eq_ignore_ascii_case("all") {
            return Ok(Vec::new());
        }
        if item.eq_ignore_ascii_case("cg") || item.eq_ignore_ascii_case("completing") {
            out.push(StateSel::Completing);
            continue;
        }
        match JobState::parse(&item) {
            Some(st) => out.push(StateSel::State(st)),
            None => return Err(format!("Invalid job state specified: {item}")),
        }
    }
    Ok(out)
}

/// Options of [`OPTS`] that differ from Slurm's (for [`crate::compat`]).
pub(crate) const COMPAT_NOTES: &[(&str, crate::compat::Support)] = &[
    (
        "all",
        crate::compat::Support::Differs("jobs of hidden partitions are always shown"),
    ),
    (
        "hide",
        crate::compat::Support::Differs("jobs of hidden partitions are always shown"),
    ),
    (
        "array",
        crate::compat::Support::Differs("array tasks are always listed one per line"),
    ),
    (
        "federation",
        crate::compat::Support::Differs("no federations: nothing to add"),
    ),
    (
        "local",
        crate::compat::Support::Differs("no federations: nothing to add"),
    ),
    (
        "sibling",
        crate::compat::Support::Differs("no federations: each job is listed once"),
    ),
    (
        "clusters",
        crate::compat::Support::Differs("one cluster per controller: the name is not checked"),
    ),
    (
        "noconvert",
        crate::compat::Support::Differs("sizes are always shown in MB"),
    ),
    (
        "priority",
        crate::compat::Support::Differs("the sort is the same with or without it"),
    ),
];

/// `SQUEUE_*` variables that stand for options (the others are read
/// where they apply).
const ENV_OPTIONS: &fmt::EnvOptions = &[
    ("SQUEUE_ALL", "all", false),
    ("SQUEUE_ARRAY", "array", false),
    ("SQUEUE_FEDERATION", "federation", false),
    ("SQUEUE_LICENSES", "licenses", true),
    ("SQUEUE_LOCAL", "local", false),
    ("SQUEUE_SIBLING", "sibling", false),
    ("SQUEUE_PRIORITY", "priority", false),
    ("SLURM_CLUSTERS", "clusters", true),
];

pub(crate) const OPTS: &[Opt] = &[
    Opt {
        short: Some('A'),
        long: "account",
        arg: Arg::Required,
    },
    Opt {
        short: Some('a'),
        long: "all",
        arg: Arg::No,
    },
    Opt {
        short: Some('r'),
        long: "array",
        arg: Arg::No,
    },
    Opt {
        short: None,
        long: "federation",
        arg: Arg::No,
    },
    Opt {
        short: Some('h'),
        long: "noheader",
        arg: Arg::No,
    },
    Opt {
        short: None,
        long: "json",
        arg: Arg::Optional,
    },
    Opt {
        short: None,
        long: "yaml",
        arg: Arg::Optional,
    },
    Opt {
        short: None,
        long: "only-job-state",
        arg: Arg::No,
    },
    Opt {
        short: None,
        long: "running-over",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "running-under",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "help",
        arg: Arg::No,
    },
    Opt {
        short: None,
        long: "hide",
        arg: Arg::No,
    },
    Opt {
        short: Some('i'),
        long: "iterate",
        arg: Arg::Required,
    },
    Opt {
        short: Some('j'),
        long: "jobs",
        arg: Arg::Optional,
    },
    Opt {
        short: None,
        long: "local",
        arg: Arg::No,
    },
    Opt {
        short: None,
        long: "sibling",
        arg: Arg::No,
    },
    Opt {
        short: None,
        long: "expand-patterns",
        arg: Arg::No,
    },
    Opt {
        short: Some('l'),
        long: "long",
        arg: Arg::No,
    },
    Opt {
        short: Some('L'),
        long: "licenses",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "me",
        arg: Arg::No,
    },
    Opt {
        short: None,
        long: "notme",
        arg: Arg::No,
    },
    Opt {
        short: Some('M'),
        long: "clusters",
        arg: Arg::Required,
    },
    Opt {
        short: Some('n'),
        long: "name",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "noconvert",
        arg: Arg::No,
    },
    Opt {
        short: Some('o'),
        long: "format",
        arg: Arg::Required,
    },
    Opt {
        short: Some('O'),
        long: "Format",
        arg: Arg::Required,
    },
    Opt {
        short: Some('p'),
        long: "partition",
        arg: Arg::Required,
    },
    Opt {
        short: Some('P'),
        long: "priority",
        arg: Arg::No,
    },
    Opt {
        short: Some('q'),
        long: "qos",
        arg: Arg::Required,
    },
    Opt {
        short: Some('R'),
        long: "reservation",
        arg: Arg::Required,
    },
    Opt {
        short: Some('s'),
        long: "steps",
        arg: Arg::Optional,
    },
    Opt {
        short: Some('S'),
        long: "sort",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "start",
        arg: Arg::No,
    },
    Opt {
        short: Some('t'),
        long: "states",
        arg: Arg::Required,
    },
    Opt {
        short: Some('u'),
        long: "user",
        arg: Arg::Required,
    },
    Opt {
        short: None,
        long: "usage",
        arg: Arg::No,
    },
    Opt {
        short: Some('v'),
        long: "verbose",
        arg: Arg::No,
    },
    Opt {
        short: Some('V'),
        long: "version",
        arg: Arg::No,
    },
    Opt {
        short: Some('w'),
        long: "nodelist",
        arg: Arg::Required,
    },
];

/// What the command line asks for.
#[derive(Debug)]
pub enum Action {
    /// Print this text and exit 0 (`--help`, `--version`).
    Print(String),
    /// Query and print the queue (every `iterate` seconds when set).
    Run {
        opts: Box<Options>,
        iterate: Option<u64>,
        verbose: bool,
    },
}

/// Parses squeue's arguments (without the program name); `env` reads the
/// environment (`SQUEUE_*`). Errors are the lines to print on stderr.
pub fn parse_args(args: &[String], env: &dyn Fn(&str) -> Option<String>) -> Result<Action, String> {
    let try_help = "Try \"squeue --help\" for more information";
    let mut words = fmt::env_words(ENV_OPTIONS, env);
    words.extend(args.iter().cloned());
    let parsed = fmt::getopt("squeue", &words, OPTS).map_err(|e| format!("{e}\n{try_help}"))?;
    let mut format: Option<String> = env("SQUEUE_FORMAT");
    let mut format_long: Option<String> = env("SQUEUE_FORMAT2");
    let mut sort: Option<String> = env("SQUEUE_SORT");
    let mut states: Option<String> = env("SQUEUE_STATES");
    let mut filter = Filter::default();
    let list_env = |k: &str| env(k).map(|v| fmt::split_list(&v)).unwrap_or_default();
    filter.query.users = list_env("SQUEUE_USERS");
    filter.query.partitions = list_env("SQUEUE_PARTITION");
    filter.query.accounts = list_env("SQUEUE_ACCOUNT");
    filter.query.qos = list_env("SQUEUE_QOS");
    filter.query.names = list_env("SQUEUE_NAMES");
    let mut noheader = false;
    let mut long = false;
    let mut start = false;
    let mut steps = false;
    let mut iterate = None;
    let mut verbose = false;
    let mut cli_format = false;
    let mut json = crate::jsonout::env_wants(env).map_err(|e| format!("squeue: error: {e}"))?;
    let mut only_state = false;
    let mut expand_patterns = false;
    for p in parsed {
        match p {
            Parsed::Word(w) => {
                return Err(format!(
                    "squeue: error: Unrecognized option: {w}\n{}",
                    crate::help::usage("squeue")
                )
                .trim_end()
                .to_string())
            }
            Parsed::Opt(name, val) => {
                let v = val.unwrap_or_default();
                match name {
                    "account" => filter.query.accounts = fmt::split_list(&v),
                    "noheader" => noheader = true,
                    "json" | "yaml" => {
                        crate::jsonout::check_parser(Some(v.as_str()))
                            .map_err(|e| format!("squeue: error: {e}"))?;
                        json = true;
                    }
                    "help" => return Ok(Action::Print(crate::help::help("squeue"))),
                    "usage" => return Ok(Action::Print(crate::help::usage("squeue"))),
                    "version" => {
                        return Ok(Action::Print(format!(
                            "slurm {}\n",
                            slurm_proto::SLURM_VERSION
                        )))
                    }
                    "iterate" => match v.parse::<u64>() {
                        Ok(n) if n > 0 => iterate = Some(n),
                        _ => return Err(format!("squeue: error: --iterate={v} is invalid")),
                    },
                    "jobs" => {
                        for id in fmt::split_list(&v) {
                            let base = id.split(['_', '+', '.']).next().unwrap_or("");
                            match base.parse::<u32>() {
                                Ok(n) if n > 0 => filter.query.job_ids.push(n),
                                _ => return Err(format!("squeue: error: Invalid job id: {id}")),
                            }
                        }
                    }
                    "long" => long = true,
                    "only-job-state" => only_state = true,
                    "expand-patterns" => expand_patterns = true,
                    "me" => filter.query.users = vec![current_uid().to_string()],
                    "notme" => filter.not_uid = Some(current_uid()),
                    "running-over" | "running-under" => {
                        let Some(secs) = running_secs(&v) else {
                            return Err("squeue: fatal: Invalid time limit specification".into());
                        };
                        if name == "running-over" {
                            filter.running_over = Some(secs);
                        } else {
                            filter.running_under = Some(secs);
                        }
                    }
                    "name" => filter.query.names = fmt::split_list(&v),
                    "format" => {
                        format = Some(v);
                        format_long = None;
                        cli_format = true;
                    }
                    "Format" => {
                        format_long = Some(v);
                        format = None;
                        cli_format = true;
                    }
                    "partition" => filter.query.partitions = fmt::split_list(&v),
                    "licenses" => filter.licenses = fmt::split_list(&v),
                    "reservation" => filter.reservation = Some(v),
                    "qos" => filter.query.qos = fmt::split_list(&v),
                    "sort" => sort = Some(v),
                    "start" => start = true,
                    "steps" => steps = true,
                    "states" => states = Some(v),
                    "user" => filter.query.users = fmt::split_list(&v),
                    "verbose" => verbose = true,
                    "nodelist" => {
                        let mut nodes = Vec::new();
                        for part in fmt::split_list(&v) {
                            let part = if part == "localhost" {
                                slurm_common::users::hostname()
                            } else {
                                part
                            };
                            match slurm_common::hostlist::expand(&part) {
                                Ok(n) => nodes.extend(n),
                                Err(e) => {
                                    return Err(format!(
                                        "squeue: error: Invalid node name {part}: {e}"
                                    ))
                                }
                            }
                        }
                        filter.nodes = nodes;
                    }
                    // Accepted and without effect here.
                    _ => {}
                }
            }
        }
    }
    let _ = cli_format;
    if let (Some(o), Some(u)) = (filter.running_over, filter.running_under) {
        if o > u {
            let show = |s: i64| {
                if s == i64::MAX {
                    "UNLIMITED".to_string()
                } else {
                    slurm_common::timefmt::format_duration_hms(s)
                }
            };
            return Err(format!(
                "squeue: fatal: --running-over={} and --running-under={} will return 0 jobs.",
                show(o),
                show(u)
            ));
        }
    }
    let mut errors = String::new();
    let items = if let Some(f) = &format_long {
        let (items, errs) = fmt::parse_long(f, 20, &canon_long);
        for e in errs {
            errors.push_str(&format!(
                "squeue: error: Invalid job format specification: {e}\n"
            ));
        }
        items
    } else {
        let f = match &format {
            Some(f) => f.clone(),
            None if only_state => "%.18i %.8T".to_string(),
            None if start => START_FORMAT.to_string(),
            None if long => LONG_FORMAT.to_string(),
            None => DEFAULT_FORMAT.to_string(),
        };
        let f = match (&format, steps) {
            (None, true) => STEP_FORMAT.to_string(),
            _ => f,
        };
        let (items, errs) = fmt::parse_short(&f, &|c| {
            LETTERS.contains(c) || (steps && "iAjPuMNlSbn".contains(c))
        });
        for e in errs {
            errors.push_str(&format!(
                "squeue: error: Invalid job format specification: {e}\n"
            ));
        }
        items
    };
    if !errors.is_empty() {
        eprint!("{errors}");
    }
    let sort_str = sort.unwrap_or_else(|| {
        if start {
            "S".into()
        } else {
            DEFAULT_SORT.into()
        }
    });
    let (sort_keys, errs) = parse_sort(&sort_str);
    if let Some(e) = errs.first() {
        return Err(format!("squeue: error: Invalid sort specification: {e}"));
    }
    filter.query.states = match states {
        Some(s) => Some(parse_states(&s).map_err(|e| format!("squeue: error: {e}"))?),
        None if start => Some(vec![StateSel::State(JobState::Pending)]),
        None => None,
    };
    Ok(Action::Run {
        opts: Box::new(Options {
            items,
            noheader,
            time_header: long || iterate.is_some(),
            sort: sort_keys,
            filter,
            steps,
            json,
            only_state,
            expand_patterns,
        }),
        iterate,
        verbose,
    })
}

fn current_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// The message Slurm prints for a failed call.
pub(crate) fn call_error_text(e: &crate::common::CallError) -> String {
    match e {
        crate::common::CallError::Net(e) => crate::common::net_error_text(e).to_string(),
        crate::common::CallError::Rpc(r) => r.error.message().to_string(),
        crate::common::CallError::Unexpected => "Unexpected message received".to_string(),
    }
}

/// A single `-j` id the controller does not know is an error in Slurm
/// (several ids just show the ones that exist).
pub fn single_job_error(filter: &Filter, jobs: &[JobRecord]) -> Option<String> {
    match filter.query.job_ids.as_slice() {
        [id] if !jobs.iter().any(|j| j.job_id == *id) => Some(format!(
            "slurm_load_jobs error: {}",
            slurm_proto::SlurmError::InvalidJobId.message()
        )),
        _ => None,
    }
}

/// `squeue -s`'s default layout.
pub const STEP_FORMAT: &str = "%.15i %.8j %.9P %.8u %.9M %N";

/// `squeue -s`: the running steps of the jobs passing the filter.
pub fn format_steps(jobs: &[JobRecord], opts: &Options, now: i64, tz: Tz) -> String {
    use slurm_common::hostlist::compress;
    use slurm_common::timefmt::{format_elapsed, format_limit_squeue};
    let mut rows: Vec<(&JobRecord, &slurm_proto::StepRecord)> = jobs
        .iter()
        .filter(|j| {
            opts.filter.query.job_ids.is_empty() || opts.filter.query.job_ids.contains(&j.job_id)
        })
        .filter(|j| {
            opts.filter.query.users.is_empty()
                || opts
                    .filter
                    .query
                    .users
                    .iter()
                    .any(|u| *u == j.user_name || *u == j.user_id.to_string())
        })
        .filter(|j| {
            opts.filter.query.partitions.is_empty()
                || opts.filter.query.partitions.contains(&j.partition)
        })
        .flat_map(|j| {
            j.steps
                .iter()
                .filter(|s| s.state == JobState::Running)
                .map(move |s| (j, s))
        })
        .collect();
    rows.sort_by_key(|(j, s)| (j.job_id, s.step_id));
    let step_id = |j: &JobRecord, s: &slurm_proto::StepRecord| {
        if s.step_id == slurm_proto::BATCH_STEP {
            format!("{}.batch", j.display_id())
        } else if s.step_id == slurm_proto::EXTERN_STEP {
            format!("{}.extern", j.display_id())
        } else {
            format!("{}.{}", j.display_id(), s.step_id)
        }
    };
    let mut out = String::new();
    if !opts.noheader {
        out.push_str(&fmt::render(&opts.items, &mut |f| {
            match f.key.as_str() {
                "i" | "A" => "STEPID",
                "j" => "NAME",
                "P" => "PARTITION",
                "u" => "USER",
                "M" => "TIME",
                "N" => "NODELIST",
                "l" => "TIME_LIMIT",
                "S" => "START_TIME",
                "b" => "TRES_PER_NODE",
                "n" => "NTASKS",
                _ => "",
            }
            .to_string()
        }));
        out.push('\n');
    }
    for (j, s) in rows {
        out.push_str(&fmt::render(&opts.items, &mut |f| match f.key.as_str() {
            "i" | "A" => step_id(j, s),
            "j" => s.name.clone(),
            "P" => j.partition.clone(),
            "u" => j.user_name.clone(),
            "M" => format_elapsed(now - s.start_time),
            "N" => compress(&s.nodes),
            // The step's own limit (the job's still ends it).
            "l" => format_limit_squeue(s.time_limit),
            "S" => tz.timestamp(s.start_time),
            "b" => "N/A".into(),
            "n" => s.ntasks.to_string(),
            _ => String::new(),
        }));
        out.push('\n');
    }
    out
}

/// `squeue`'s entry point; returns the exit code.
pub fn main() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let action = match parse_args(&args, &|k| std::env::var(k).ok()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    let (opts, iterate, verbose) = match action {
        Action::Print(s) => {
            print!("{s}");
            return 0;
        }
        Action::Run {
            opts,
            iterate,
            verbose,
        } => (opts, iterate, verbose),
    };
    let conf = match crate::common::load_conf("squeue") {
        Ok(c) => c,
        Err(code) => return code,
    };
    let client = crate::common::client(&conf);
    // The controller sends only the jobs the filter takes (all states for
    // -s, whose steps ignore -t; only the ids when ids are given, so an
    // unknown id is told from one in another state). Finished jobs that
    // the default hides still come with an unfiltered list.
    let mut query = opts.filter.query.clone();
    if opts.steps {
        query.states = Some(Vec::new());
    }
    if !query.job_ids.is_empty() {
        query = slurm_proto::JobFilter {
            job_ids: query.job_ids,
            states: Some(Vec::new()),
            ..Default::default()
        };
    }
    loop {
        // No filter: the whole list. A table asks the controller for the
        // states it shows (Slurm's default ones too), so jobs that ended
        // and wait out MinJobAge do not travel.
        let whole = query == slurm_proto::JobFilter::default();
        let ask = match (brief_is_enough(&opts), whole) {
            (true, _) => RequestBody::GetJobsBrief(Some(query.clone())),
            (false, true) => RequestBody::GetJobs,
            (false, false) => RequestBody::GetJobsMatching(query.clone()),
        };
        let jobs = match crate::common::call(&client, ask) {
            Ok(Response::Jobs { jobs, .. }) => jobs,
            Ok(_) => {
                eprintln!("slurm_load_jobs error: Unexpected message received");
                return 1;
            }
            Err(e) => {
                if verbose {
                    eprintln!("squeue: error: {e}");
                }
                eprintln!("slurm_load_jobs error: {}", call_error_text(&e));
                return 1;
            }
        };
        if let Some(e) = single_job_error(&opts.filter, &jobs) {
            eprintln!("{e}");
            return 1;
        }
        let text = if opts.json {
            let mut sel: Vec<&JobRecord> = jobs.iter().filter(|j| opts.filter.matches(j)).collect();
            sort_jobs(&mut sel, &opts.sort, crate::common::now());
            let last = sel.iter().map(|j| j.submit_time).max().unwrap_or(0);
            let argv: Vec<String> = std::iter::once("squeue".to_string())
                .chain(args.iter().cloned())
                .collect();
            let body = if opts.only_state {
                // The body of REST `jobs/state/`.
                let mut f = serde_json::Map::new();
                f.insert(
                    "jobs".into(),
                    sel.iter()
                        .map(|j| slurm_openapi::openapi::job_state_info(j))
                        .collect(),
                );
                f.insert("last_backfill".into(), slurm_openapi::openapi::num(0));
                f.insert(
                    "last_update".into(),
                    slurm_openapi::openapi::num(crate::common::now().max(last)),
                );
                crate::jsonout::Body::Fields(f)
            } else {
                crate::jsonout::Body::Jobs(&sel, crate::common::now().max(last), None)
            };
            crate::jsonout::render(body, &conf.cluster_name, &argv)
        } else if opts.steps {
            format_steps(&jobs, &opts, crate::common::now(), Tz::Local)
        } else {
            format_jobs(&jobs, &opts, crate::common::now(), Tz::Local)
        };
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let written = out.write_all(text.as_bytes()).and_then(|_| out.flush());
        if iterate.is_none() {
            // The process ends here: leave the listing to the exit rather
            // than free each of its thousands of strings one by one.
            std::mem::forget(jobs);
            std::mem::forget(text);
        }
        if written.is_err() {
            return 1;
        }
        match iterate {
            Some(n) => {
                if out.write_all(b"\n").is_err() {
                    return 1;
                }
                drop(out);
                std::thread::sleep(std::time::Duration::from_secs(n));
            }
            None => return 0,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use slurm_proto::{Allocation, JobDesc, JobReason};

    pub const T_SUBMIT: i64 = 1_795_325_854; // 2026-11-22T05:37:34Z
    pub const T_START: i64 = 1_795_325_856; // 05:37:36
    pub const T_NOW: i64 = 1_795_325_861; // 05:37:41

    /// A job as the reference cluster had it (user anchor, 4 CPUs, unlimited).
    pub fn job(id: u32, name: &str, state: JobState, reason: JobReason, prio: u32) -> JobRecord {
        JobRecord {
            job_id: id,
            name: name.to_string(),
            user_id: 999,
            user_name: "anchor".into(),
            group_id: 995,
            group_name: "anchor".into(),
            account: "anchoracct".into(),
            qos: "normal".into(),
            partition: "debug".into(),
            priority: prio,
            state,
            completing: false,
            reason,
            time_limit: None,
            submit_time: T_SUBMIT,
            eligible_time: Some(T_SUBMIT),
            start_time: None,
            run_start: None,
            end_time: None,
            last_sched_eval: Some(T_START),
            exit_status: 0,
            restarts: 0,
            batch_host: None,
            alloc: Allocation::default(),
            completing_nodes: vec![],
            desc: JobDesc {
                name: Some(name.to_string()),
                ntasks: Some(4),
                work_dir: "/home/alice/jobs".into(),
                std_out: Some("/dev/null".into()),
                std_in: Some("/dev/null".into()),
                submit_host: "localhost".into(),
                ..Default::default()
            }
            .into(),
            num_tasks: 4,
            req_cpus: 4,
            min_nodes: 1,
            max_nodes: 1,
            held: None,
            cancelled: false,
            timed_out: false,
            node_failed: false,
            steps: Vec::new(),
            batch: true,
            cancelled_by: None,
            suspend_time: None,
            suspended_secs: 0,
            preempt_suspended: false,
            gang_suspended: false,
            reason_prev: JobReason::None,
            sched_flag: None,
            failed_node: None,
            array: None,
            dependency: None,
        }
    }

    pub fn running(id: u32, name: &str, node: &str) -> JobRecord {
        let mut j = job(id, name, JobState::Running, JobReason::None, 11333);
        j.start_time = Some(T_START);
        j.batch_host = Some(node.to_string());
        j.alloc = Allocation {
            nodes: vec![node.to_string()],
            cpus: vec![4],
            mem: vec![0],
            tasks: vec![4],
            gres: vec![],
        };
        j
    }

    /// Jobs 6–12 of the reference run.
    pub fn reference_jobs() -> Vec<JobRecord> {
        let mut held = job(11, "held", JobState::Pending, JobReason::JobHeldUser, 0);
        held.held = Some(slurm_proto::HoldKind::User);
        held.eligible_time = None;
        let mut later = job(12, "later", JobState::Pending, JobReason::BeginTime, 11300);
        std::sync::Arc::make_mut(&mut later.desc).begin_time = Some(T_SUBMIT + 3600);
        later.eligible_time = Some(T_SUBMIT + 3600);
        vec![
            later,
            running(8, "long3", "n3"),
            running(6, "long1", "n1"),
            running(7, "long2", "n2"),
            job(9, "waitres", JobState::Pending, JobReason::Resources, 11333),
            job(
                10,
                "waitprio",
                JobState::Pending,
                JobReason::Priority,
                11350,
            ),
            held,
        ]
    }

    fn run(args: &[&str]) -> String {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        match parse_args(&args, &|_| None).unwrap() {
            Action::Run { opts, .. } => format_jobs(&reference_jobs(), &opts, T_NOW, Tz::Utc),
            Action::Print(s) => s,
        }
    }

    #[test]
    fn default_layout_matches_slurm() {
        assert_eq!(run(&[]), include_str!("../tests/golden/squeue.out"));
    }

    #[test]
    fn format_option_matches_slurm() {
        assert_eq!(
            run(&["-o", "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"]),
            include_str!("../tests/golden/squeue-o-format.out")
        );
        assert_eq!(
            run(&["--format=%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"]),
            include_str!("../tests/golden/squeue-o-format.out")
        );
    }

    #[test]
    fn long_layout_matches_slurm() {
        assert_eq!(run(&["-l"]), include_str!("../tests/golden/squeue-l.out"));
    }

    #[test]
    fn start_layout_matches_slurm() {
        assert_eq!(
            run(&["--start"]),
            include_str!("../tests/golden/squeue-start.out")
        );
    }

    #[test]
    fn filters_select_jobs() {
        assert_eq!(
            run(&["-h", "-o", "%i", "-j", "6,9"]),
            "9\n6\n",
            "pending first"
        );
        assert_eq!(run(&["-h", "-o", "%i", "-t", "R"]), "6\n7\n8\n");
        assert_eq!(
            run(&["-h", "-o", "%i", "-tPD", "-n", "held,later"]),
            "12\n11\n"
        );
        assert_eq!(run(&["-h", "-o", "%i", "-w", "n[2-3]"]), "7\n8\n");
        assert_eq!(run(&["-h", "-o", "%i", "-u", "bob"]), "");
        assert_eq!(
            run(&["-h", "-o", "%i", "-u", "999", "-p", "debug", "-t", "r"]),
            "6\n7\n8\n"
        );
    }

    #[test]
    fn unknown_single_job_is_an_error() {
        let f = |ids: &[u32]| Filter {
            query: JobFilter {
                job_ids: ids.to_vec(),
                ..Default::default()
            },
            ..Default::default()
        };
        let jobs = reference_jobs();
        assert_eq!(
            single_job_error(&f(&[999]), &jobs).as_deref(),
            Some("slurm_load_jobs error: Invalid job id specified")
        );
        assert_eq!(single_job_error(&f(&[6]), &jobs), None);
        assert_eq!(single_job_error(&f(&[6, 999]), &jobs), None);
    }

    #[test]
    fn sort_keys() {
        assert_eq!(
            run(&["-h", "-o", "%i", "-S", "i"]),
            "6\n7\n8\n9\n10\n11\n12\n"
        );
        assert_eq!(
            run(&["-h", "-o", "%i", "-S", "-i"]),
            "12\n11\n10\n9\n8\n7\n6\n"
        );
        assert_eq!(
            run(&["-h", "-o", "%i", "-S", "j", "-t", "pd"]),
            "11\n12\n10\n9\n"
        );
        assert_eq!(
            run(&["-h", "-o", "%i %Q", "-S", "-p", "-t", "pd"]),
            "10 11350\n9 11333\n12 11300\n11 0\n"
        );
    }

    #[test]
    fn long_format_option() {
        assert_eq!(
            run(&["-O", "jobid:6,name:.9,state", "-j", "6"]),
            "JOBID      NAMESTATE               \n6         long1RUNNING             \n"
        );
        assert_eq!(
            run(&["--Format=JobID:4|,UserName:7", "-h", "-t", "R"]),
            "6   |anchor \n7   |anchor \n8   |anchor \n"
        );
    }

    #[test]
    fn env_format_and_precedence() {
        let env = |k: &str| match k {
            "SQUEUE_FORMAT" => Some("%i:%t".to_string()),
            "SQUEUE_STATES" => Some("R".to_string()),
            _ => None,
        };
        let a = parse_args(&["-h".to_string()], &env).unwrap();
        let Action::Run { opts, .. } = a else {
            panic!()
        };
        assert_eq!(
            format_jobs(&reference_jobs(), &opts, T_NOW, Tz::Utc),
            "6:R\n7:R\n8:R\n"
        );
        let a = parse_args(&["-h".into(), "-o".into(), "%j".into()], &env).unwrap();
        let Action::Run { opts, .. } = a else {
            panic!()
        };
        assert_eq!(
            format_jobs(&reference_jobs(), &opts, T_NOW, Tz::Utc),
            "long1\nlong2\nlong3\n"
        );
    }

    #[test]
    fn slurm_clusters_is_taken_as_dash_m() {
        let env = |k: &str| (k == "SLURM_CLUSTERS").then(|| "local".to_string());
        assert!(matches!(
            parse_args(&["-h".to_string()], &env),
            Ok(Action::Run { .. })
        ));
        assert_eq!(
            fmt::env_words(ENV_OPTIONS, &env),
            vec!["--clusters=local".to_string()]
        );
    }

    #[test]
    fn std_paths_as_kept_or_expanded() {
        let mut j = running(14, "arr", "n1");
        let d = std::sync::Arc::make_mut(&mut j.desc);
        d.work_dir = "/w".into();
        (d.std_out, d.std_err, d.std_in) = (None, None, None);
        j.array = Some(slurm_proto::ArrayInfo {
            job_id: 12,
            task_id: 3,
            task_count: 4,
            task_min: 0,
            task_max: 3,
            task_step: None,
            max_running: None,
        });
        let run_on = |j: &JobRecord, args: &[&str]| {
            let a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            let Action::Run { opts, .. } = parse_args(&a, &|_| None).unwrap() else {
                panic!()
            };
            format_jobs(std::slice::from_ref(j), &opts, T_NOW, Tz::Utc)
        };
        let run = |args: &[&str]| run_on(&j, args);
        let f = ["-h", "-O", "stdout:40,stderr:40,stdin:20"];
        assert_eq!(
            run(&f).split_whitespace().collect::<Vec<_>>(),
            ["slurm-%A_%a.out", "slurm-%A_%a.out", "/dev/null"]
        );
        let mut e = f.to_vec();
        e.push("--expand-patterns");
        assert_eq!(
            run(&e).split_whitespace().collect::<Vec<_>>(),
            ["/w/slurm-12_3.out", "/w/slurm-12_3.out", "/dev/null"]
        );
        let mut j = j.clone();
        std::sync::Arc::make_mut(&mut j.desc).std_err = Some("e-%j-%4a.txt".into());
        let out = run_on(&j, &e);
        assert!(out.contains(" /w/e-14-0003.txt "), "{out}");
    }

    #[test]
    fn field_letters() {
        let mut j = running(6, "averyveryverylongname", "n1");
        j.time_limit = Some(90);
        j.completing = true;
        j.state = JobState::Completed;
        j.end_time = Some(T_START + 65);
        j.completing_nodes = vec!["n1".into()];
        let opts = |f: &str| Options {
            items: fmt::parse_short(f, &|_| true).0,
            noheader: true,
            time_header: false,
            sort: vec![],
            filter: Filter::default(),
            steps: false,
            json: false,
            only_state: false,
            expand_patterns: false,
        };
        let out = format_jobs(
            std::slice::from_ref(&j),
            &opts("%t|%T|%M|%l|%L|%.5j|%D|%C|%R|%%|%u(%U)|%g(%G)|%e"),
            T_NOW,
            Tz::Utc,
        );
        assert_eq!(
            out,
            "CG|COMPLETING|1:05|1:30:00|1:28:55|avery|1|4|n1|%|anchor(999)|anchor(995)|2026-11-22T05:38:41\n"
        );
        // Completed jobs are hidden by default, shown with -t all or -j.
        j.completing = false;
        assert_eq!(
            format_jobs(std::slice::from_ref(&j), &opts("%i"), T_NOW, Tz::Utc),
            ""
        );
        let mut o = opts("%i %t");
        o.filter.query.states = Some(vec![]);
        assert_eq!(
            format_jobs(std::slice::from_ref(&j), &o, T_NOW, Tz::Utc),
            "6 CD\n"
        );
        let mut o = opts("%i %t %R");
        o.filter.query.job_ids = vec![6];
        j.state = JobState::Failed;
        j.reason = JobReason::NonZeroExitCode;
        assert_eq!(
            format_jobs(std::slice::from_ref(&j), &o, T_NOW, Tz::Utc),
            "6 F (NonZeroExitCode)\n"
        );
    }

    #[test]
    fn bad_options_are_reported() {
        let p = |a: &[&str]| {
            parse_args(
                &a.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                &|_| None,
            )
        };
        assert_eq!(
            p(&["-z"]).unwrap_err(),
            "squeue: invalid option -- 'z'\nTry \"squeue --help\" for more information"
        );
        assert!(p(&["-t", "bogus"])
            .unwrap_err()
            .contains("Invalid job state specified: bogus"));
        assert!(p(&["-j", "abc"])
            .unwrap_err()
            .contains("Invalid job id: abc"));
        assert!(p(&["-S", "%"])
            .unwrap_err()
            .contains("Invalid sort specification"));
        assert!(matches!(p(&["-V"]).unwrap(), Action::Print(s) if s == "slurm 25.11.0\n"));
    }

    #[test]
    fn running_over_and_under_select_by_time_run() {
        let opts = |args: &[&str]| {
            let a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            parse_args(&a, &|_| None)
        };
        let now = crate::common::now();
        let started = |id, ago: i64| {
            let mut j = running(id, "r", "n1");
            j.start_time = Some(now - ago);
            j
        };
        // Ran 30 s, 10 min, 2 h; one pending.
        let jobs = [
            started(1, 30),
            started(2, 600),
            started(3, 7200),
            job(4, "p", JobState::Pending, JobReason::Priority, 1),
        ];
        let ids = |args: &[&str]| -> Vec<u32> {
            let Action::Run { opts, .. } = opts(args).unwrap() else {
                panic!("printed")
            };
            jobs.iter()
                .filter(|j| opts.filter.matches(j))
                .map(|j| j.job_id)
                .collect()
        };
        assert_eq!(ids(&["--running-over=5"]), vec![2, 3]);
        assert_eq!(ids(&["--running-over=0:40"]), vec![2, 3]);
        assert_eq!(ids(&["--running-under=1:00:00"]), vec![1, 2]);
        assert_eq!(ids(&["--running-over=1", "--running-under=0-1"]), vec![2]);
        assert_eq!(ids(&["--running-under=UNLIMITED"]), vec![1, 2, 3]);
        assert_eq!(ids(&[]), vec![1, 2, 3, 4]);
        for bad in ["0", "x", "1:2:3:4", "-5", ""] {
            assert_eq!(
                opts(&[&format!("--running-over={bad}")]).unwrap_err(),
                "squeue: fatal: Invalid time limit specification",
                "{bad}"
            );
        }
        assert_eq!(
            opts(&["--running-over=2:00:00", "--running-under=10"]).unwrap_err(),
            "squeue: fatal: --running-over=02:00:00 and --running-under=00:10:00 will return 0 jobs."
        );
    }

    /// Jobs listed brief (their requests skipped as they are decoded) show
    /// the same values under every key `FROM_RECORD` names, and sort alike,
    /// as the whole records do; the default formats ask for brief ones.
    #[test]
    fn licenses_and_reservation_filter_jobs() {
        let opts = |args: &[&str], env: &dyn Fn(&str) -> Option<String>| {
            let a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            match parse_args(&a, env).unwrap() {
                Action::Run { opts, .. } => opts,
                Action::Print(p) => panic!("{p}"),
            }
        };
        let none = |_: &str| None;
        let mut a = job(1, "a", JobState::Pending, JobReason::Priority, 1);
        std::sync::Arc::make_mut(&mut a.desc).licenses = Some("matlab:2,fluent".into());
        let mut b = job(2, "b", JobState::Pending, JobReason::Priority, 1);
        std::sync::Arc::make_mut(&mut b.desc).reservation = Some("maint".into());
        let c = job(3, "c", JobState::Pending, JobReason::Priority, 1);
        let ids = |o: &Options| -> Vec<u32> {
            [&a, &b, &c]
                .iter()
                .filter(|j| o.filter.matches(j))
                .map(|j| j.job_id)
                .collect()
        };
        assert_eq!(ids(&opts(&["-L", "fluent"], &none)), vec![1]);
        assert_eq!(ids(&opts(&["--licenses=abaqus"], &none)), Vec::<u32>::new());
        assert_eq!(ids(&opts(&["-R", "maint"], &none)), vec![2]);
        assert_eq!(ids(&opts(&[], &none)), vec![1, 2, 3]);
        // SQUEUE_LICENSES stands for -L; the command line wins.
        let env = |k: &str| (k == "SQUEUE_LICENSES").then(|| "matlab".to_string());
        assert_eq!(ids(&opts(&[], &env)), vec![1]);
        assert_eq!(ids(&opts(&["-L", "none"], &env)), Vec::<u32>::new());
        // --notme: the caller's own jobs go (here the jobs' user, 999).
        let mut notme = opts(&["--notme"], &none);
        assert_eq!(notme.filter.not_uid, Some(current_uid()));
        notme.filter.not_uid = Some(999);
        assert_eq!(ids(&notme), Vec::<u32>::new());
        // Such filters need each job's request, so no brief listing.
        assert!(!brief_is_enough(&opts(&["-R", "maint"], &none)));
    }

    #[test]
    fn brief_listings_show_what_whole_ones_show_for_record_fields() {
        use slurm_proto::grpc::commands::{encode_listed, listing_response_as};
        use slurm_proto::grpc::pb;
        let mut pending = job(7, "wait", JobState::Pending, JobReason::Priority, 5);
        let mut run = running(8, "go", "n1");
        for j in [&mut pending, &mut run] {
            j.time_limit = Some(30);
            j.desc = JobDesc {
                name: Some("other".into()),
                partition: Some("elsewhere".into()),
                account: Some("acct2".into()),
                qos: Some("high".into()),
                nice: Some(-5),
                begin_time: Some(T_NOW + 3600),
                cpus_per_task: Some(3),
                ntasks_per_node: Some(2),
                mem_per_node: Some(2048),
                min_nodes: Some(2),
                max_nodes: Some(4),
                req_nodes: vec!["n2".into()],
                exc_nodes: vec!["n3".into()],
                exclusive: true,
                comment: Some("c".into()),
                command: Some("/bin/x".into()),
                time_limit: Some(Some(99)),
                ..(*j.desc).clone()
            }
            .into();
        }
        let listing = |brief: bool| {
            let l = pb::JobListing {
                result: Some(pb::job_listing::Result::Jobs(pb::EncodedJobs {
                    jobs: vec![encode_listed(&pending), encode_listed(&run)],
                    last_update: 0,
                    last: true,
                })),
            };
            match listing_response_as(l, brief) {
                Response::Jobs { jobs, .. } => jobs,
                other => panic!("{other:?}"),
            }
        };
        let (whole, brief) = (listing(false), listing(true));
        for (w, b) in whole.iter().zip(&brief) {
            assert_eq!(*b.desc, JobDesc::default(), "the request is left out");
            assert_eq!(
                JobRecord {
                    desc: Default::default(),
                    ..w.clone()
                },
                *b,
                "all else comes whole"
            );
            for key in FROM_RECORD {
                assert_eq!(
                    job_value(key, w, T_NOW, Tz::Utc),
                    job_value(key, b, T_NOW, Tz::Utc),
                    "key {key}"
                );
                assert_eq!(
                    cmp_key(key, &whole[0], &whole[1], T_NOW),
                    cmp_key(key, &brief[0], &brief[1], T_NOW),
                    "sort key {key}"
                );
            }
        }
        assert!(brief_is_enough(&Options::default()));
        let long = |f: &str| Options {
            items: fmt::parse_short(f, &|_| true).0,
            ..Options::default()
        };
        assert!(brief_is_enough(&long(LONG_FORMAT)));
        assert!(
            !brief_is_enough(&long("%i %Z")),
            "the work directory is the request's"
        );
        assert!(!brief_is_enough(&Options {
            json: true,
            ..Options::default()
        }));
    }
}
