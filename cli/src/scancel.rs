//! `scancel`: cancel or signal jobs.
//!
//! Job ids (`job_id[_array_id][.step_id]`, also comma-separated) and filters
//! (`-u`, `-t`, `-n`, `-p`, and client-side `-A`, `-q`, `-w`) select the jobs;
//! one `Cancel` request carries them to the controller, which answers with
//! one outcome per job. Messages and exit codes follow Slurm's scancel:
//!
//! - With only job ids (no filter, no `-s`), a job that does not exist or
//!   has already ended is silently ignored (exit 0) unless `-v`.
//! - With filters or `-s`, a named job that does not exist (or has ended) is
//!   an error: `Kill job error on job id N: Invalid job id specified`, exit 1.
//! - Any other refusal (`Access/permission denied`, ...) is printed and
//!   makes the exit code 1.
//!
//! [`parse`] and [`report`] are pure so tests drive them without a
//! controller; [`run`] glues them to one.

use crate::common::{self, CallError};
use crate::getopt::{self, HasArg, Opt};
use slurm_common::{hostlist, users};
use slurm_proto::{
    CancelFilter, JobId, JobRecord, JobState, RequestBody, Response, SlurmError, SLURM_VERSION,
};
use std::io::{BufRead, Write};

/// An array index in a job id argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArrayIdx {
    /// `_*`: every task.
    All,
    Task(u32),
}

/// One job named on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdArg {
    pub job: JobId,
    pub array: Option<ArrayIdx>,
    pub step: Option<u32>,
}

impl std::fmt::Display for IdArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.job)?;
        match self.array {
            Some(ArrayIdx::All) => write!(f, "_*")?,
            Some(ArrayIdx::Task(t)) => write!(f, "_{t}")?,
            None => {}
        }
        if let Some(s) = self.step {
            write!(f, ".{s}")?;
        }
        Ok(())
    }
}

/// `strtol`: (value, rest); value 0 and `s` unchanged when there are no digits.
fn strtol(s: &str) -> (i64, &str) {
    let t = s.trim_start();
    let (neg, body) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let n = body.bytes().take_while(u8::is_ascii_digit).count();
    if n == 0 {
        return (0, s);
    }
    let v = body[..n].parse::<i64>().unwrap_or(i64::MAX);
    (if neg { -v } else { v }, &body[n..])
}

/// `1,3-5` inside `_[...]`.
fn array_range(s: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let lo: u32 = lo.trim().parse().ok()?;
        let hi: u32 = hi.trim().parse().ok()?;
        if hi < lo || hi - lo > 1_000_000 {
            return None;
        }
        out.extend(lo..=hi);
    }
    Some(out)
}

/// Parses job id arguments as Slurm's scancel does. The error is the
/// offending text (`Invalid job id <text>`).
pub fn parse_ids(args: &[String]) -> Result<Vec<IdArg>, String> {
    let mut out = Vec::new();
    for arg in args {
        let mut cur: &str = arg;
        loop {
            let (job, mut next) = strtol(cur);
            if job <= 0 || job > u32::MAX as i64 {
                return Err(cur.to_string());
            }
            let job = job as JobId;
            let mut array = None;
            if let Some(r) = next.strip_prefix("_[") {
                // A range of array tasks ends the argument.
                let inner = r.strip_suffix(']').filter(|i| !i.contains(']'));
                let tasks = inner.and_then(array_range).ok_or_else(|| cur.to_string())?;
                for t in tasks {
                    out.push(IdArg {
                        job,
                        array: Some(ArrayIdx::Task(t)),
                        step: None,
                    });
                }
                break;
            } else if let Some(r) = next.strip_prefix("_*") {
                array = Some(ArrayIdx::All);
                next = r;
            } else if let Some(r) = next.strip_prefix('_') {
                let (t, r2) = strtol(r);
                if t < 0 || t > u32::MAX as i64 {
                    return Err(cur.to_string());
                }
                array = Some(ArrayIdx::Task(t as u32));
                next = r2;
            } else if let Some(r) = next.strip_prefix('+') {
                // Hetjob component: the whole job is meant.
                let (t, r2) = strtol(r);
                if t < 0 {
                    return Err(cur.to_string());
                }
                next = r2;
            }
            let mut step = None;
            if let Some(r) = next.strip_prefix('.') {
                let (s, r2) = strtol(r);
                if s < 0 || s > u32::MAX as i64 {
                    return Err(cur.to_string());
                }
                step = Some(s as u32);
                next = r2;
            }
            out.push(IdArg { job, array, step });
            if let Some(r) = next.strip_prefix(',') {
                cur = r;
                if cur.is_empty() {
                    break;
                }
            } else if !next.is_empty() {
                return Err(cur.to_string());
            } else {
                break;
            }
        }
    }
    Ok(out)
}

pub use slurm_common::signal::parse as parse_signal;

/// Everything the command line (and `SCANCEL_*`) asked for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CancelOpts {
    pub ids: Vec<IdArg>,
    pub account: Option<String>,
    pub batch: bool,
    pub interactive: bool,
    pub name: Option<String>,
    pub nodelist: Option<String>,
    pub partition: Option<String>,
    pub qos: Option<String>,
    /// `-R`: jobs of this reservation.
    pub reservation: Option<String>,
    pub signal: Option<i32>,
    pub states: Vec<JobState>,
    /// `-u` as given.
    pub user_name: Option<String>,
    /// `-u` resolved.
    pub uid: Option<u32>,
    /// -1 with `-Q`.
    pub verbose: i32,
    /// `--wckey`: jobs charged to this workload characterization key.
    pub wckey: Option<String>,
    /// `-M` (else `SLURM_CLUSTERS`): must name this cluster.
    pub clusters: Option<String>,
    /// `--admin-comment`: each cancelled job's AdminComment.
    pub admin_comment: Option<String>,
}

impl CancelOpts {
    fn has_filters(&self) -> bool {
        self.account.is_some()
            || self.name.is_some()
            || self.nodelist.is_some()
            || self.partition.is_some()
            || self.qos.is_some()
            || self.reservation.is_some()
            || !self.states.is_empty()
            || self.user_name.is_some()
            || self.wckey.is_some()
    }

    /// Slurm's "default" request: job ids only, no filter, no signal.
    fn is_default(&self) -> bool {
        !self.has_filters() && !self.batch && !self.interactive && self.signal.is_none()
    }

    /// Filters the controller does not apply: done here on a job list.
    fn needs_job_list(&self) -> bool {
        self.account.is_some()
            || self.qos.is_some()
            || self.nodelist.is_some()
            || self.reservation.is_some()
            || self.wckey.is_some()
            || self.interactive
    }

    /// Cancelling (the default, or an explicit KILL) rather than signalling.
    fn is_kill(&self) -> bool {
        !matches!(self.signal, Some(s) if s != libc::SIGKILL)
    }
}

/// What ends the command early: output and exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
}

impl Exit {
    fn err(msg: impl std::fmt::Display) -> Exit {
        Exit {
            stdout: String::new(),
            stderr: format!("scancel: error: {msg}\n"),
            code: 1,
        }
    }
    fn raw(stderr: String) -> Exit {
        Exit {
            stdout: String::new(),
            stderr,
            code: 1,
        }
    }
    fn out(stdout: String) -> Exit {
        Exit {
            stdout,
            stderr: String::new(),
            code: 0,
        }
    }
}

fn bad_state(s: &str, env: bool) -> Exit {
    let first = if env {
        format!("Unrecognized SCANCEL_STATE value: {s}\n")
    } else {
        format!("Invalid job state specified: {s}\n")
    };
    Exit::raw(format!(
        "{first}Valid job states are PENDING, RUNNING, and SUSPENDED\n"
    ))
}

fn parse_states(s: &str, env: bool) -> Result<Vec<JobState>, Exit> {
    s.split(',')
        .filter(|p| !p.is_empty())
        .map(|p| JobState::parse(p.trim()).ok_or_else(|| bad_state(s, env)))
        .collect::<Result<Vec<_>, _>>()
        .and_then(|v| {
            if v.is_empty() {
                Err(bad_state(s, env))
            } else {
                Ok(v)
            }
        })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum K {
    Account,
    AdminComment,
    Batch,
    Ctld,
    Full,
    Help,
    Hurry,
    Interactive,
    Clusters,
    Name,
    Me,
    Nodelist,
    Partition,
    Qos,
    Quiet,
    Reservation,
    Sibling,
    Signal,
    State,
    Usage,
    User,
    Verbose,
    Version,
    Wckey,
}

const KEYS: &[K] = &[
    K::Account,
    K::AdminComment,
    K::Batch,
    K::Ctld,
    K::Full,
    K::Help,
    K::Hurry,
    K::Interactive,
    K::Clusters,
    K::Name,
    K::Me,
    K::Nodelist,
    K::Partition,
    K::Qos,
    K::Quiet,
    K::Reservation,
    K::Sibling,
    K::Signal,
    K::State,
    K::Usage,
    K::User,
    K::Verbose,
    K::Version,
    K::Wckey,
];

fn id_of(k: K) -> usize {
    KEYS.iter().position(|x| *x == k).unwrap_or(0)
}

/// Options of [`table`] that differ from Slurm's (for [`crate::compat`]).
pub(crate) const COMPAT_NOTES: &[(&str, crate::compat::Support)] = &[
    (
        "clusters",
        crate::compat::Support::Differs(
            "one cluster per controller: this one's name (or all); another is refused",
        ),
    ),
    (
        "cluster",
        crate::compat::Support::Differs(
            "one cluster per controller: this one's name (or all); another is refused",
        ),
    ),
    (
        "hurry",
        crate::compat::Support::Differs("no burst buffers: nothing to skip"),
    ),
    (
        "ctld",
        crate::compat::Support::Differs("every signal already goes through the controller"),
    ),
    (
        "full",
        crate::compat::Support::Differs("accepted without effect"),
    ),
    (
        "sibling",
        crate::compat::Support::NotYet("no federations; refused"),
    ),
];

pub(crate) fn table() -> Vec<Opt> {
    use HasArg::{No, Required};
    let o = |long: &'static str, short: Option<char>, has_arg: HasArg, k: K| Opt {
        long: Some(long),
        short,
        has_arg,
        id: id_of(k),
    };
    vec![
        o("account", Some('A'), Required, K::Account),
        o("admin-comment", None, Required, K::AdminComment),
        o("batch", Some('b'), No, K::Batch),
        o("ctld", None, No, K::Ctld),
        o("full", Some('f'), No, K::Full),
        o("help", None, No, K::Help),
        o("hurry", Some('H'), No, K::Hurry),
        o("interactive", Some('i'), No, K::Interactive),
        o("cluster", None, Required, K::Clusters),
        o("clusters", Some('M'), Required, K::Clusters),
        o("jobname", None, Required, K::Name),
        o("me", None, No, K::Me),
        o("name", Some('n'), Required, K::Name),
        o("nodelist", Some('w'), Required, K::Nodelist),
        o("partition", Some('p'), Required, K::Partition),
        o("qos", Some('q'), Required, K::Qos),
        o("quiet", Some('Q'), No, K::Quiet),
        o("reservation", Some('R'), Required, K::Reservation),
        o("sibling", None, Required, K::Sibling),
        o("signal", Some('s'), Required, K::Signal),
        o("state", Some('t'), Required, K::State),
        o("usage", None, No, K::Usage),
        o("user", Some('u'), Required, K::User),
        o("verbose", Some('v'), No, K::Verbose),
        o("version", Some('V'), No, K::Version),
        o("wckey", None, Required, K::Wckey),
    ]
}

fn is_true(v: &str) -> Option<bool> {
    if v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("t") {
        Some(true)
    } else if v.eq_ignore_ascii_case("false") || v.eq_ignore_ascii_case("f") {
        Some(false)
    } else {
        None
    }
}

/// Reads `SCANCEL_*` then the command line. `my_uid` is the caller (for
/// `--me`). Warnings that do not stop the command go to `warnings`.
pub fn parse(
    argv: &[String],
    env: &[(String, String)],
    my_uid: u32,
    warnings: &mut Vec<String>,
) -> Result<CancelOpts, Exit> {
    parse_with(
        argv,
        &|k| env.iter().find(|(ek, _)| ek == k).map(|(_, v)| v.clone()),
        my_uid,
        warnings,
    )
}

/// [`parse`] with the environment as a lookup (so [`crate::compat`] can
/// see which variables are read).
pub(crate) fn parse_with(
    argv: &[String],
    env: &dyn Fn(&str) -> Option<String>,
    my_uid: u32,
    warnings: &mut Vec<String>,
) -> Result<CancelOpts, Exit> {
    let mut o = CancelOpts::default();
    let get = |k: &str| env(k);
    let flag = |var: &str, dst: &mut bool, warnings: &mut Vec<String>| {
        if let Some(v) = get(var) {
            match is_true(&v) {
                Some(b) => *dst = b,
                None => warnings.push(format!("Unrecognized {var} value: {v}")),
            }
        }
    };
    flag("SCANCEL_BATCH", &mut o.batch, warnings);
    flag("SCANCEL_INTERACTIVE", &mut o.interactive, warnings);
    let mut verbose_env = false;
    flag("SCANCEL_VERBOSE", &mut verbose_env, warnings);
    o.verbose = i32::from(verbose_env);
    // As --ctld, --full and --hurry: checked, and nothing more to do here.
    for var in ["SCANCEL_CTLD", "SCANCEL_FULL", "SCANCEL_HURRY"] {
        let mut unused = false;
        flag(var, &mut unused, warnings);
    }
    if let Some(v) = get("SLURM_CLUSTERS") {
        o.clusters = Some(v.to_string());
    }
    if let Some(v) = get("SCANCEL_ACCOUNT") {
        o.account = Some(v.to_ascii_lowercase());
    }
    if let Some(v) = get("SCANCEL_NAME") {
        o.name = Some(v.to_string());
    }
    if let Some(v) = get("SCANCEL_PARTITION") {
        o.partition = Some(v.to_string());
    }
    if let Some(v) = get("SCANCEL_QOS") {
        o.qos = Some(v.to_ascii_lowercase());
    }
    if let Some(v) = get("SCANCEL_STATE") {
        o.states = parse_states(&v, true)?;
    }
    if let Some(v) = get("SCANCEL_USER") {
        o.user_name = Some(v.to_string());
    }
    if let Some(v) = get("SCANCEL_WCKEY") {
        o.wckey = Some(v.to_string());
    }

    let prog = argv.first().map(String::as_str).unwrap_or("scancel");
    // Options act in order; a getopt error stops after those before it.
    let (parsed, bad) = match getopt::parse(prog, argv.get(1..).unwrap_or_default(), &table(), true)
    {
        Ok(p) => (p, None),
        Err(e) => (e.before, Some(e.message)),
    };
    for (id, val) in &parsed.opts {
        let v = val.clone().unwrap_or_default();
        match KEYS.get(*id).copied().unwrap_or(K::Help) {
            K::Account => o.account = Some(v.to_ascii_lowercase()),
            K::AdminComment => o.admin_comment = Some(v),
            K::Batch => o.batch = true,
            K::Ctld | K::Full | K::Hurry => {}
            K::Help => return Err(Exit::out(crate::help::help("scancel"))),
            K::Interactive => o.interactive = true,
            K::Name => o.name = Some(v),
            K::Me => o.user_name = Some(my_uid.to_string()),
            K::Nodelist => o.nodelist = Some(v),
            K::Partition => o.partition = Some(v),
            K::Qos => o.qos = Some(v.to_ascii_lowercase()),
            K::Quiet => o.verbose = -1,
            K::Signal => match parse_signal(&v) {
                Some(s) => o.signal = Some(s),
                None => return Err(Exit::raw(format!("Unknown job signal: {v}\n"))),
            },
            K::State => o.states = parse_states(&v, false)?,
            K::Usage => return Err(Exit::out(crate::help::usage("scancel"))),
            K::User => o.user_name = Some(v),
            K::Verbose => o.verbose += 1,
            K::Version => return Err(Exit::out(format!("slurm {SLURM_VERSION}\n"))),
            K::Clusters => o.clusters = Some(v),
            K::Reservation => o.reservation = Some(v),
            K::Sibling => return Err(Exit::err("--sibling is not supported yet")),
            K::Wckey => o.wckey = Some(v),
        }
    }
    if let Some(e) = bad {
        return Err(Exit::raw(format!(
            "{e}\nTry \"scancel --help\" for more information\n"
        )));
    }
    o.ids =
        parse_ids(&parsed.operands).map_err(|bad| Exit::err(format!("Invalid job id {bad}")))?;
    if let Some(u) = &o.user_name {
        match users::parse_user(u) {
            Some(uid) => o.uid = Some(uid),
            None => return Err(Exit::err(format!("Invalid user name: {u}"))),
        }
    }
    if o.ids.is_empty() && !o.has_filters() {
        return Err(Exit::err("No job identification provided"));
    }
    if let Some(expr) = &o.nodelist {
        if !expr.contains('/') && hostlist::expand(expr).is_err() {
            return Err(Exit::err(format!("Invalid node list: {expr}")));
        }
    }
    Ok(o)
}

/// Whether an active job passes the client-side filters (and, when ids were
/// given, is one of them).
fn job_matches(o: &CancelOpts, j: &JobRecord, nodes: &[String]) -> bool {
    if j.state.is_finished() {
        return false;
    }
    if o.account
        .as_ref()
        .is_some_and(|a| !j.account.eq_ignore_ascii_case(a))
        || o.qos
            .as_ref()
            .is_some_and(|q| !j.qos.eq_ignore_ascii_case(q))
        || o.name.as_ref().is_some_and(|n| &j.name != n)
        || o.partition.as_ref().is_some_and(|p| &j.partition != p)
        || o.reservation
            .as_ref()
            .is_some_and(|r| j.desc.reservation.as_deref() != Some(r.as_str()))
        || (!o.states.is_empty() && !o.states.contains(&j.state))
        || o.uid.is_some_and(|u| j.user_id != u)
        || o.wckey
            .as_ref()
            .is_some_and(|w| j.desc.wckey.as_deref() != Some(w.as_str()))
    {
        return false;
    }
    if o.nodelist.is_some() && !j.alloc.nodes.iter().any(|n| nodes.contains(n)) {
        return false;
    }
    o.ids.is_empty() || o.ids.iter().any(|id| id.job == j.job_id)
}

/// The nodes of `-w` (a hostlist, or a file of them when it contains `/`).
fn nodelist_hosts(expr: &str) -> Result<Vec<String>, Exit> {
    let text = if expr.contains('/') {
        std::fs::read_to_string(expr)
            .map_err(|e| Exit::err(format!("Unable to open file {expr}: {e}")))?
            .lines()
            .map(|l| l.split('#').next().unwrap_or_default().trim().to_string())
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(",")
    } else {
        expr.to_string()
    };
    hostlist::expand(&text).map_err(|_| Exit::err(format!("Invalid node list: {expr}")))
}

/// The request for the controller, and the ids the command line named that
/// this implementation cannot send (array tasks and job steps).
pub fn build_filter(o: &CancelOpts) -> (CancelFilter, Vec<IdArg>) {
    let mut ids = Vec::new();
    let mut local = Vec::new();
    for id in &o.ids {
        match (id.array, id.step) {
            (None | Some(ArrayIdx::All), None) => {
                if !ids.contains(&id.job) {
                    ids.push(id.job);
                }
            }
            _ => local.push(id.clone()),
        }
    }
    let f = CancelFilter {
        job_ids: ids,
        user: o.uid,
        states: o.states.clone(),
        name: o.name.clone(),
        partition: o.partition.clone(),
        signal: o.signal,
        admin_comment: o.admin_comment.clone(),
    };
    (f, local)
}

/// What the controller said about the request.
pub type Outcome = Result<Vec<(JobId, Option<SlurmError>)>, CallError>;

fn call_error_text(e: &CallError) -> String {
    match e {
        CallError::Net(e) => crate::common::net_error_text(e).to_string(),
        CallError::Rpc(r) => r.error.message().to_string(),
        CallError::Unexpected => "unexpected reply from the controller".to_string(),
    }
}

fn silent_kind(e: SlurmError) -> bool {
    matches!(e, SlurmError::InvalidJobId | SlurmError::AlreadyDone)
}

/// Prints the outcome as Slurm's scancel does; returns the exit code.
/// `unsent` are named ids that were not sent (array tasks, steps).
pub fn report(o: &CancelOpts, unsent: &[IdArg], outcome: Outcome, err: &mut dyn Write) -> i32 {
    let mut rc = 0;
    macro_rules! say {
        ($s:expr) => {{
            let _ = writeln!(err, "scancel: {}", $s);
        }};
    }
    let act = |id: &str| match o.signal {
        Some(s) => format!("Signal {s} to job {id}"),
        None => format!("Terminating job {id}"),
    };
    let results = match outcome {
        Ok(r) => r,
        Err(e) => {
            let msg = call_error_text(&e);
            // (Refused as a whole, as Slurm's `kill_jobs` RPC: its error.)
            if o.admin_comment.is_some() && matches!(e, CallError::Rpc(_)) {
                say!(format!("error: {msg}"));
                return 1;
            }
            if o.is_default() || !o.ids.is_empty() {
                for id in &o.ids {
                    if o.verbose > 0 {
                        say!(act(&id.to_string()));
                    }
                    say!(format!("error: Kill job error on job id {id}: {msg}"));
                }
            } else if matches!(e, CallError::Net(_)) {
                let _ = writeln!(err, "slurm_load_jobs error: {msg}");
            } else {
                say!(format!("error: Kill job error: {msg}"));
            }
            return 1;
        }
    };

    for id in unsent {
        if id.step.is_some() {
            say!(format!(
                "error: Kill job error on job step id {id}: cancelling job steps is not supported yet"
            ));
            rc = 1;
        } else if o.is_default() {
            if o.verbose > 0 {
                say!(act(&id.to_string()));
                say!(format!(
                    "error: Kill job error on job id {id}: {}",
                    SlurmError::InvalidJobId.message()
                ));
            }
        } else {
            if o.verbose >= 0 {
                say!(format!(
                    "error: Kill job error on job id {id}: {}",
                    SlurmError::InvalidJobId.message()
                ));
            }
            rc = 1;
        }
    }

    if o.is_default() {
        // One outcome per named job, in the order given.
        let mut seen: Vec<JobId> = Vec::new();
        for id in o
            .ids
            .iter()
            .filter(|i| i.step.is_none() && !matches!(i.array, Some(ArrayIdx::Task(_))))
        {
            if seen.contains(&id.job) {
                continue;
            }
            seen.push(id.job);
            let res = results
                .iter()
                .find(|(j, _)| *j == id.job)
                .map(|(_, e)| *e)
                .unwrap_or(Some(SlurmError::InvalidJobId));
            if o.verbose > 0 {
                say!(act(&id.to_string()));
            }
            if let Some(e) = res {
                if o.verbose > 0 || !silent_kind(e) {
                    say!(format!(
                        "error: Kill job error on job id {id}: {}",
                        e.message()
                    ));
                }
                if !silent_kind(e) {
                    rc = 1;
                }
            }
        }
        return rc;
    }

    // Filters or a signal: named jobs must exist; then each job acted on.
    let mut acted = 0;
    for (job, res) in &results {
        let named = o.ids.iter().any(|i| i.job == *job);
        match res {
            Some(e) if named && silent_kind(*e) => {
                if o.verbose >= 0 {
                    say!(format!(
                        "error: Kill job error on job id {job}: {}",
                        SlurmError::InvalidJobId.message()
                    ));
                }
                rc = 1;
            }
            res => {
                acted += 1;
                if o.verbose > 0 {
                    say!(act(&job.to_string()));
                }
                if let Some(e) = res {
                    if o.verbose > 0 || !silent_kind(*e) {
                        say!(format!(
                            "error: Kill job error on job id {job}: {}",
                            e.message()
                        ));
                    }
                    if !(silent_kind(*e) && o.is_kill()) {
                        rc = 1;
                    }
                }
            }
        }
    }
    if acted == 0 && o.has_filters() && o.verbose > 0 {
        let mut m = String::new();
        if let Some(a) = &o.account {
            m.push_str(&format!("account={a} "));
        }
        if let Some(n) = &o.name {
            m.push_str(&format!("job_name={n} "));
        }
        if let Some(n) = &o.nodelist {
            m.push_str(&format!("nodelist={n} "));
        }
        if let Some(p) = &o.partition {
            m.push_str(&format!("partition={p} "));
        }
        if let Some(r) = &o.reservation {
            m.push_str(&format!("reservation={r} "));
        }
        if let Some(q) = &o.qos {
            m.push_str(&format!("qos={q} "));
        }
        if let Some(w) = &o.wckey {
            m.push_str(&format!("wckey={w} "));
        }
        if !o.states.is_empty() {
            let names: Vec<&str> = o.states.iter().map(|s| s.name()).collect();
            m.push_str(&format!("state={} ", names.join(",")));
        }
        if let Some(u) = &o.user_name {
            m.push_str(&format!("user_name={u} "));
        }
        say!(format!(
            "error: No active jobs match ALL job filters, including: {m}"
        ));
    }
    rc
}

/// Asks whether to cancel one job (`-i`); end of input means no.
fn confirm(j: &JobRecord, input: &mut dyn BufRead, out: &mut dyn Write) -> bool {
    loop {
        let _ = write!(
            out,
            "Cancel job_id={} name={} partition={} [y/n]? ",
            j.job_id, j.name, j.partition
        );
        let _ = out.flush();
        let mut l = String::new();
        match input.read_line(&mut l) {
            Ok(0) | Err(_) => return false,
            Ok(_) => match l.chars().next() {
                Some('y' | 'Y') => return true,
                Some('n' | 'N') => return false,
                _ => {}
            },
        }
    }
}

/// Runs scancel against `ctl` (the controller). Returns the exit code.
pub fn run(
    argv: &[String],
    env: &[(String, String)],
    my_uid: u32,
    ctl: &mut dyn FnMut(RequestBody) -> Result<Response, CallError>,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    match parse_or_print(argv, env, my_uid, out, err) {
        Ok(o) => execute(&o, ctl, input, out, err),
        Err(code) => code,
    }
}

/// [`parse`], printing what stops the command (and warnings).
pub fn parse_or_print(
    argv: &[String],
    env: &[(String, String)],
    my_uid: u32,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<CancelOpts, i32> {
    let mut warnings = Vec::new();
    let res = parse(argv, env, my_uid, &mut warnings);
    for w in &warnings {
        let _ = writeln!(err, "scancel: error: {w}");
    }
    res.map_err(|e| {
        let _ = out.write_all(e.stdout.as_bytes());
        let _ = err.write_all(e.stderr.as_bytes());
        e.code
    })
}

/// Sends the request(s) for parsed options and reports the outcome.
pub fn execute(
    o: &CancelOpts,
    ctl: &mut dyn FnMut(RequestBody) -> Result<Response, CallError>,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> i32 {
    // Array tasks (`12_3`) are jobs of their own: find their ids.
    let resolved;
    let o = if o
        .ids
        .iter()
        .any(|i| i.step.is_none() && matches!(i.array, Some(ArrayIdx::Task(_))))
    {
        match ctl(RequestBody::GetJobs) {
            Ok(Response::Jobs { jobs, .. }) => {
                let mut c = o.clone();
                for id in &mut c.ids {
                    if let (Some(ArrayIdx::Task(t)), None) = (id.array, id.step) {
                        let found = jobs.iter().find(|j| {
                            j.array
                                .as_ref()
                                .is_some_and(|a| a.job_id == id.job && a.task_id == t)
                        });
                        if let Some(j) = found {
                            id.job = j.job_id;
                            id.array = None;
                        }
                    }
                }
                resolved = c;
                &resolved
            }
            _ => o,
        }
    } else {
        o
    };
    // Steps are cancelled one by one.
    let mut step_rc = 0;
    let stepless;
    let o = if o.ids.iter().any(|i| i.step.is_some() && i.array.is_none()) {
        for id in o.ids.iter().filter(|i| i.array.is_none()) {
            let Some(step) = id.step else { continue };
            if o.verbose > 0 {
                let _ = writeln!(err, "scancel: Terminating step {id}");
            }
            let r = ctl(RequestBody::CancelStep {
                job_id: id.job,
                step_id: step,
                signal: o.signal,
            });
            let msg = match r {
                Ok(Response::Ok) => None,
                Ok(Response::Error(e)) => Some(e.error.message().to_string()),
                Ok(_) => Some("unexpected reply from the controller".to_string()),
                Err(e) => Some(call_error_text(&e)),
            };
            if let Some(m) = msg {
                let _ = writeln!(
                    err,
                    "scancel: error: Kill job error on job step id {id}: {m}"
                );
                step_rc = 1;
            }
        }
        let mut c = o.clone();
        c.ids.retain(|i| !(i.step.is_some() && i.array.is_none()));
        if c.ids.is_empty() {
            return step_rc;
        }
        stepless = c;
        &stepless
    } else {
        o
    };
    let (mut filter, unsent) = build_filter(o);

    if o.needs_job_list() {
        let nodes = match &o.nodelist {
            Some(expr) => match nodelist_hosts(expr) {
                Ok(n) => n,
                Err(e) => {
                    let _ = err.write_all(e.stderr.as_bytes());
                    return e.code;
                }
            },
            None => Vec::new(),
        };
        let jobs = match ctl(RequestBody::GetJobs) {
            Ok(Response::Jobs { jobs, .. }) => jobs,
            Ok(Response::Error(e)) => {
                let _ = writeln!(err, "slurm_load_jobs error: {}", e.error.message());
                return 1;
            }
            Ok(_) => {
                let _ = writeln!(
                    err,
                    "slurm_load_jobs error: unexpected reply from the controller"
                );
                return 1;
            }
            Err(e) => {
                let _ = writeln!(err, "slurm_load_jobs error: {}", call_error_text(&e));
                return 1;
            }
        };
        let mut chosen = Vec::new();
        for j in jobs.iter().filter(|j| job_matches(o, j, &nodes)) {
            if o.interactive && !confirm(j, input, out) {
                continue;
            }
            chosen.push(j.job_id);
        }
        // Named jobs that are not active are reported as Slurm does.
        let mut missing: Vec<(JobId, Option<SlurmError>)> = filter
            .job_ids
            .iter()
            .filter(|id| {
                !jobs
                    .iter()
                    .any(|j| j.job_id == **id && !j.state.is_finished())
            })
            .map(|id| (*id, Some(SlurmError::InvalidJobId)))
            .collect();
        if chosen.is_empty() {
            return report(o, &unsent, Ok(missing), err);
        }
        filter.job_ids = chosen;
        let outcome = match ctl(RequestBody::Cancel(filter)) {
            Ok(Response::Cancelled(mut r)) => {
                missing.append(&mut r);
                Ok(missing)
            }
            Ok(Response::Error(e)) => Err(CallError::Rpc(e)),
            Ok(_) => Err(CallError::Unexpected),
            Err(e) => Err(e),
        };
        return report(o, &unsent, outcome, err);
    }

    if filter.job_ids.is_empty() && !o.has_filters() {
        // Only ids that cannot be sent.
        return report(o, &unsent, Ok(Vec::new()), err);
    }
    let outcome = match ctl(RequestBody::Cancel(filter)) {
        Ok(Response::Cancelled(r)) => Ok(r),
        Ok(Response::Error(e)) => Err(CallError::Rpc(e)),
        Ok(_) => Err(CallError::Unexpected),
        Err(e) => Err(e),
    };
    report(o, &unsent, outcome, err)
}

/// Entry point of the `scancel` binary.
pub fn main() -> i32 {
    let argv: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let env: Vec<(String, String)> = std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let stderr = std::io::stderr();
    let mut err = stderr.lock();
    let opts = match parse_or_print(&argv, &env, uid, &mut out, &mut err) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let conf = match common::load_conf("scancel") {
        Ok(c) => c,
        Err(code) => return code,
    };
    if let Some(Err(e)) = opts
        .clusters
        .as_deref()
        .map(|l| common::check_clusters("scancel", l, &conf))
    {
        let _ = writeln!(err, "{e}");
        return 1;
    }
    let client = common::client(&conf);
    let mut ctl = |body: RequestBody| common::call(&client, body);
    let code = execute(&opts, &mut ctl, &mut input, &mut out, &mut err);
    let _ = out.flush();
    code
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_proto::RpcError;

    fn argv(a: &[&str]) -> Vec<String> {
        std::iter::once("scancel")
            .chain(a.iter().copied())
            .map(String::from)
            .collect()
    }

    fn ids(a: &[&str]) -> Result<Vec<IdArg>, String> {
        parse_ids(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    fn j(job: u32) -> IdArg {
        IdArg {
            job,
            array: None,
            step: None,
        }
    }

    #[test]
    fn id_parsing() {
        assert_eq!(ids(&["12"]).unwrap(), vec![j(12)]);
        assert_eq!(ids(&["1,2", "3"]).unwrap(), vec![j(1), j(2), j(3)]);
        assert_eq!(
            ids(&["7_3.1"]).unwrap(),
            vec![IdArg {
                job: 7,
                array: Some(ArrayIdx::Task(3)),
                step: Some(1)
            }]
        );
        assert_eq!(ids(&["7_*"]).unwrap()[0].array, Some(ArrayIdx::All));
        assert_eq!(ids(&["7_[1-3,5]"]).unwrap().len(), 4);
        assert_eq!(ids(&["7.0"]).unwrap()[0].step, Some(0));
        assert_eq!(ids(&["abc"]).unwrap_err(), "abc");
        assert_eq!(ids(&["0"]).unwrap_err(), "0");
        assert_eq!(ids(&["12abc"]).unwrap_err(), "12abc");
        assert_eq!(ids(&["12,abc"]).unwrap_err(), "abc");
        assert_eq!(ids(&["-5"]).unwrap_err(), "-5");
        assert_eq!(ids(&["7_[1-"]).unwrap_err(), "7_[1-");
        assert_eq!(ids(&["99999999999"]).unwrap_err(), "99999999999");
        assert_eq!(j(7).to_string(), "7");
        assert_eq!(ids(&["7_3.1"]).unwrap()[0].to_string(), "7_3.1");
    }

    #[test]
    fn signals() {
        assert_eq!(parse_signal("USR1"), Some(libc::SIGUSR1));
        assert_eq!(parse_signal("sigusr2"), Some(libc::SIGUSR2));
        assert_eq!(parse_signal("SIGKILL"), Some(9));
        assert_eq!(parse_signal("15"), Some(15));
        assert_eq!(parse_signal("0"), None);
        assert_eq!(parse_signal("15x"), None);
        assert_eq!(parse_signal("FOO"), None);
    }

    fn p(a: &[&str], env: &[(&str, &str)]) -> Result<CancelOpts, Exit> {
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        parse(&argv(a), &env, 1000, &mut Vec::new())
    }

    #[test]
    fn reservation_selects_the_jobs_of_a_reservation() {
        let o = p(&["-R", "maint"], &[]).unwrap();
        assert!(o.has_filters() && o.needs_job_list());
        let mut inside = JobRecord {
            job_id: 4,
            ..Default::default()
        };
        std::sync::Arc::make_mut(&mut inside.desc).reservation = Some("maint".into());
        let outside = JobRecord {
            job_id: 5,
            ..Default::default()
        };
        assert!(job_matches(&o, &inside, &[]));
        assert!(!job_matches(&o, &outside, &[]));
    }

    #[test]
    fn option_parsing() {
        let o = p(
            &[
                "-u", "0", "-t", "PD", "-n", "x", "-p", "debug", "-s", "USR1", "-v", "5",
            ],
            &[],
        )
        .unwrap();
        assert_eq!(o.uid, Some(0));
        assert_eq!(o.states, vec![JobState::Pending]);
        assert_eq!(o.name.as_deref(), Some("x"));
        assert_eq!(o.partition.as_deref(), Some("debug"));
        assert_eq!(o.signal, Some(libc::SIGUSR1));
        assert_eq!(o.verbose, 1);
        assert_eq!(o.ids, vec![j(5)]);
        let o = p(
            &[
                "--user=root",
                "--state=running,SUSPENDED",
                "--jobname=y",
                "--signal=9",
                "--me",
            ],
            &[],
        )
        .unwrap();
        assert_eq!(o.uid, Some(1000));
        assert_eq!(o.states, vec![JobState::Running, JobState::Suspended]);
        assert_eq!(o.name.as_deref(), Some("y"));
        // Options after operands (getopt permutes).
        let o = p(&["5", "-Q"], &[]).unwrap();
        assert_eq!(o.verbose, -1);
        // Environment.
        let o = p(
            &[],
            &[
                ("SCANCEL_NAME", "n"),
                ("SCANCEL_STATE", "R"),
                ("SCANCEL_VERBOSE", "T"),
            ],
        )
        .unwrap();
        assert_eq!(o.name.as_deref(), Some("n"));
        assert_eq!(o.states, vec![JobState::Running]);
        assert_eq!(o.verbose, 1);
    }

    #[test]
    fn option_errors() {
        let e = p(&["abc"], &[]).unwrap_err();
        assert_eq!(
            (e.code, e.stderr.as_str()),
            (1, "scancel: error: Invalid job id abc\n")
        );
        let e = p(&[], &[]).unwrap_err();
        assert_eq!(e.stderr, "scancel: error: No job identification provided\n");
        let e = p(&["-s", "USR1"], &[]).unwrap_err();
        assert_eq!(e.stderr, "scancel: error: No job identification provided\n");
        let e = p(&["-s", "BOGUS", "1"], &[]).unwrap_err();
        assert_eq!(e.stderr, "Unknown job signal: BOGUS\n");
        let e = p(&["-t", "WAITING"], &[]).unwrap_err();
        assert_eq!(
            e.stderr,
            "Invalid job state specified: WAITING\nValid job states are PENDING, RUNNING, and SUSPENDED\n"
        );
        let e = p(&["-u", "no-such-user-xyz"], &[]).unwrap_err();
        assert_eq!(
            e.stderr,
            "scancel: error: Invalid user name: no-such-user-xyz\n"
        );
        let e = p(&["--bogus"], &[]).unwrap_err();
        assert_eq!(
            (e.code, e.stderr.as_str()),
            (1, "scancel: unrecognized option '--bogus'\nTry \"scancel --help\" for more information\n")
        );
        let e = p(&["-h"], &[]).unwrap_err();
        assert_eq!(
            e.stderr,
            "scancel: invalid option -- 'h'\nTry \"scancel --help\" for more information\n"
        );
        let e = p(&["-V", "--bogus"], &[]).unwrap_err();
        assert_eq!((e.code, e.stdout.as_str()), (0, "slurm 25.11.0\n"));
        let e = p(&["--help"], &[]).unwrap_err();
        assert!(e.stdout.starts_with("Usage: scancel"));
        let e = p(&["--usage"], &[]).unwrap_err();
        assert!(e.stdout.starts_with("Usage: scancel"));
        let o = p(&["--wckey=x"], &[]).unwrap();
        assert_eq!(o.wckey.as_deref(), Some("x"));
        let o = p(&["--admin-comment=bad node", "7"], &[]).unwrap();
        assert_eq!(o.admin_comment.as_deref(), Some("bad node"));
        assert_eq!(
            build_filter(&o).0.admin_comment.as_deref(),
            Some("bad node")
        );
        // Refused as a whole: Slurm's one error line.
        let mut err = Vec::new();
        let refused = Err(CallError::Rpc(SlurmError::UserIdMissing.into()));
        assert_eq!(report(&o, &[], refused, &mut err), 1);
        assert_eq!(
            String::from_utf8(err).unwrap(),
            "scancel: error: Invalid user id\n"
        );
        let o = p(&[], &[("SCANCEL_WCKEY", "y")]).unwrap();
        assert_eq!(o.wckey.as_deref(), Some("y"));
        // -M over SLURM_CLUSTERS; the names are checked against slurm.conf.
        let o = p(&["5"], &[("SLURM_CLUSTERS", "c1")]).unwrap();
        assert_eq!(o.clusters.as_deref(), Some("c1"));
        let o = p(&["-M", "c2", "5"], &[("SLURM_CLUSTERS", "c1")]).unwrap();
        assert_eq!(o.clusters.as_deref(), Some("c2"));
        let conf = slurm_common::conf::SlurmConf::parse_str(
            "ClusterName=c1\nSlurmctldHost=h\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n",
            std::path::Path::new("/etc/slurm/slurm.conf"),
        )
        .unwrap();
        assert!(crate::common::check_clusters("scancel", "c1,all", &conf).is_ok());
        assert_eq!(
            crate::common::check_clusters("scancel", "c1,c2", &conf),
            Err("scancel: error: Invalid cluster name: c2 (this is c1)".to_string())
        );
    }

    fn rep(a: &[&str], outcome: Outcome) -> (i32, String) {
        let o = p(a, &[]).unwrap();
        let (_, unsent) = build_filter(&o);
        let mut err = Vec::new();
        let code = report(&o, &unsent, outcome, &mut err);
        (code, String::from_utf8(err).unwrap())
    }

    #[test]
    fn nonexistent_job_is_silent_unless_verbose() {
        let none = || Ok(vec![(999999, Some(SlurmError::InvalidJobId))]);
        assert_eq!(rep(&["999999"], none()), (0, String::new()));
        assert_eq!(
            rep(&["-v", "999999"], none()),
            (
                0,
                "scancel: Terminating job 999999\nscancel: error: Kill job error on job id 999999: Invalid job id specified\n"
                    .into()
            )
        );
        // Missing from the answer counts as unknown.
        assert_eq!(rep(&["999999"], Ok(vec![])), (0, String::new()));
        assert_eq!(
            rep(&["5"], Ok(vec![(5, Some(SlurmError::AlreadyDone))])),
            (0, String::new())
        );
    }

    #[test]
    fn other_errors_are_printed() {
        let (code, err) = rep(&["12"], Ok(vec![(12, Some(SlurmError::AccessDenied))]));
        assert_eq!(code, 1);
        assert_eq!(
            err,
            "scancel: error: Kill job error on job id 12: Access/permission denied\n"
        );
        let (code, err) = rep(
            &["-Q", "12"],
            Ok(vec![(12, Some(SlurmError::AccessDenied))]),
        );
        assert_eq!((code, err.is_empty()), (1, false));
        assert_eq!(rep(&["12"], Ok(vec![(12, None)])), (0, String::new()));
    }

    #[test]
    fn signal_messages() {
        assert_eq!(
            rep(&["-v", "-s", "USR1", "12"], Ok(vec![(12, None)])),
            (0, "scancel: Signal 10 to job 12\n".into())
        );
        // With -s, a named job that does not exist is an error.
        assert_eq!(
            rep(
                &["-s", "USR1", "12"],
                Ok(vec![(12, Some(SlurmError::InvalidJobId))])
            ),
            (
                1,
                "scancel: error: Kill job error on job id 12: Invalid job id specified\n".into()
            )
        );
        assert_eq!(
            rep(
                &["-Q", "-s", "USR1", "12"],
                Ok(vec![(12, Some(SlurmError::InvalidJobId))])
            ),
            (1, String::new())
        );
    }

    #[test]
    fn filters() {
        assert_eq!(
            rep(&["-u", "0"], Ok(vec![(3, None), (4, None)])),
            (0, String::new())
        );
        assert_eq!(
            rep(&["-v", "-n", "x", "-t", "PD"], Ok(vec![])),
            (
                0,
                "scancel: error: No active jobs match ALL job filters, including: job_name=x state=PENDING \n"
                    .into()
            )
        );
        let (code, err) = rep(
            &["-p", "debug"],
            Ok(vec![(3, Some(SlurmError::AccessDenied))]),
        );
        assert_eq!(code, 1);
        assert_eq!(
            err,
            "scancel: error: Kill job error on job id 3: Access/permission denied\n"
        );
        let o = p(
            &[
                "-u", "0", "-t", "R", "-n", "n", "-p", "q", "-s", "TERM", "4", "4", "5_*",
            ],
            &[],
        )
        .unwrap();
        let (f, unsent) = build_filter(&o);
        assert_eq!(
            f,
            CancelFilter {
                job_ids: vec![4, 5],
                user: Some(0),
                states: vec![JobState::Running],
                name: Some("n".into()),
                partition: Some("q".into()),
                signal: Some(15),
                admin_comment: None,
            }
        );
        assert!(unsent.is_empty());
    }

    #[test]
    fn unsendable_ids() {
        assert_eq!(rep(&["7_3"], Ok(vec![])), (0, String::new()));
        let (code, err) = rep(&["7.0"], Ok(vec![]));
        assert_eq!(code, 1);
        assert_eq!(
            err,
            "scancel: error: Kill job error on job step id 7.0: cancelling job steps is not supported yet\n"
        );
    }

    #[test]
    fn controller_failures() {
        let net = || Err(CallError::Net(slurm_common::net::NetError::Closed));
        assert_eq!(
            rep(&["12"], net()),
            (
                1,
                "scancel: error: Kill job error on job id 12: Unable to contact slurm controller (connect failure)\n"
                    .into()
            )
        );
        assert_eq!(
            rep(&["-u", "0"], net()),
            (
                1,
                "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"
                    .into()
            )
        );
        let denied = RpcError {
            error: SlurmError::InvalidCredential,
            detail: None,
        };
        assert_eq!(
            rep(&["-u", "0"], Err(CallError::Rpc(denied))),
            (
                1,
                "scancel: error: Kill job error: Invalid authentication credential\n".into()
            )
        );
    }

    fn job(id: u32, account: &str, state: JobState, nodes: &[&str]) -> JobRecord {
        JobRecord {
            job_id: id,
            name: format!("j{id}"),
            user_id: 1000,
            user_name: "u".into(),
            group_id: 1000,
            group_name: "u".into(),
            account: account.into(),
            qos: "normal".into(),
            partition: "debug".into(),
            priority: 1,
            state,
            completing: false,
            reason: slurm_proto::JobReason::None,
            time_limit: None,
            submit_time: 0,
            eligible_time: None,
            start_time: None,
            run_start: None,
            end_time: None,
            last_sched_eval: None,
            exit_status: 0,
            restarts: 0,
            batch_host: None,
            alloc: slurm_proto::Allocation {
                nodes: nodes.iter().map(|n| n.to_string()).collect(),
                ..Default::default()
            },
            completing_nodes: vec![],
            desc: Default::default(),
            num_tasks: 1,
            req_cpus: 1,
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
            reason_prev: slurm_proto::JobReason::None,
            sched_flag: None,
            failed_node: None,
            array: None,
            dependency: None,
        }
    }

    #[test]
    fn client_side_filters_and_interactive() {
        let jobs = vec![
            job(1, "a", JobState::Running, &["n1"]),
            job(2, "b", JobState::Running, &["n2"]),
            job(3, "a", JobState::Completed, &["n1"]),
            job(4, "a", JobState::Pending, &[]),
        ];
        let sent = std::cell::RefCell::new(Vec::new());
        let mut ctl = |b: RequestBody| -> Result<Response, CallError> {
            match b {
                RequestBody::GetJobs => Ok(Response::Jobs {
                    jobs: jobs.clone(),
                    last_update: 0,
                }),
                RequestBody::Cancel(f) => {
                    let r = f.job_ids.iter().map(|i| (*i, None)).collect();
                    sent.borrow_mut().push(f);
                    Ok(Response::Cancelled(r))
                }
                _ => Err(CallError::Unexpected),
            }
        };
        let mut out = Vec::new();
        let mut err = Vec::new();
        let code = run(
            &argv(&["-A", "A"]),
            &[],
            0,
            &mut ctl,
            &mut &b""[..],
            &mut out,
            &mut err,
        );
        assert_eq!(code, 0);
        assert_eq!(sent.borrow().last().unwrap().job_ids, vec![1, 4]);
        let code = run(
            &argv(&["-w", "n1", "-v"]),
            &[],
            0,
            &mut ctl,
            &mut &b""[..],
            &mut out,
            &mut err,
        );
        assert_eq!(code, 0);
        assert_eq!(sent.borrow().last().unwrap().job_ids, vec![1]);
        assert_eq!(
            String::from_utf8(err.clone()).unwrap(),
            "scancel: Terminating job 1\n"
        );
        // Interactive: yes to job 1, no to job 2.
        let mut out = Vec::new();
        let code = run(
            &argv(&["-i", "-u", "1000"]),
            &[],
            0,
            &mut ctl,
            &mut &b"y\nn\n"[..],
            &mut out,
            &mut err,
        );
        assert_eq!(code, 0);
        assert_eq!(sent.borrow().last().unwrap().job_ids, vec![1]);
        assert!(String::from_utf8(out)
            .unwrap()
            .starts_with("Cancel job_id=1 name=j1 partition=debug [y/n]? "));
        // A named job that is not active, with a filter.
        let mut err = Vec::new();
        let code = run(
            &argv(&["-A", "a", "3"]),
            &[],
            0,
            &mut ctl,
            &mut &b""[..],
            &mut Vec::new(),
            &mut err,
        );
        assert_eq!(code, 1);
        assert_eq!(
            String::from_utf8(err).unwrap(),
            "scancel: error: Kill job error on job id 3: Invalid job id specified\n"
        );
    }

    #[test]
    fn run_sends_one_cancel() {
        let mut sent = Vec::new();
        let mut ctl = |b: RequestBody| -> Result<Response, CallError> {
            if let RequestBody::Cancel(f) = b {
                sent.push(f);
            }
            Ok(Response::Cancelled(vec![(
                999999,
                Some(SlurmError::InvalidJobId),
            )]))
        };
        let mut out = Vec::new();
        let mut err = Vec::new();
        let code = run(
            &argv(&["999999"]),
            &[],
            0,
            &mut ctl,
            &mut &b""[..],
            &mut out,
            &mut err,
        );
        assert_eq!((code, out.is_empty(), err.is_empty()), (0, true, true));
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].job_ids, vec![999999]);
        assert_eq!(sent[0].signal, None);
    }
}
