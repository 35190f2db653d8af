//! Request bodies (v0.0.44 `job_desc_msg`, `update_node_msg`,
//! `reservation_desc_msg`, `kill_jobs_msg`, `openapi_create_node_req`)
//! turned into controller requests. Numbers are accepted plain, as numeric
//! strings, or as `{set, infinite, number}`. Every error names where in the
//! body it was found (`job/time_limit`); fields we do not act on yet come
//! back as warnings, never silently dropped.

use serde_json::Value;
use slurm_proto::{CancelFilter, JobDesc, JobState, NodeSpec, NodeStateRequest, ReservationSpec};

/// A body that could not be used, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct BodyError {
    pub path: String,
    pub message: String,
}

fn bad(path: &str, message: impl Into<String>) -> BodyError {
    BodyError {
        path: path.to_string(),
        message: message.into(),
    }
}

/// Parse a request body as JSON, with the position of a syntax error.
pub fn parse_json(body: &[u8]) -> Result<Value, BodyError> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(bad("/", "request body is empty"));
    }
    serde_json::from_slice(body).map_err(|e| {
        bad(
            &format!("line {} column {}", e.line(), e.column()),
            format!("invalid JSON: {e}"),
        )
    })
}

/// A `*_no_val` number as given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoVal {
    Unset,
    Infinite,
    Num(u64),
}

fn path_join(base: &str, k: &str) -> String {
    if base.is_empty() {
        k.to_string()
    } else {
        format!("{base}/{k}")
    }
}

/// A non-negative integer, `{set, infinite, number}`, or a numeric string.
pub fn no_val(v: &Value, path: &str, max: u64) -> Result<NoVal, BodyError> {
    let n = match v {
        Value::Null => return Ok(NoVal::Unset),
        Value::Number(n) => n
            .as_u64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                    .map(|f| f as u64)
            })
            .ok_or_else(|| bad(path, format!("expected a non-negative integer, got {n}")))?,
        Value::String(s) => {
            let t = s.trim();
            if t.eq_ignore_ascii_case("infinite") || t.eq_ignore_ascii_case("unlimited") {
                return Ok(NoVal::Infinite);
            }
            t.parse::<u64>()
                .map_err(|_| bad(path, format!("expected a number, got \"{s}\"")))?
        }
        Value::Object(o) => {
            for k in o.keys() {
                if !matches!(k.as_str(), "set" | "infinite" | "number") {
                    return Err(bad(
                        &path_join(path, k),
                        "unexpected field (expected set, infinite, number)",
                    ));
                }
            }
            let flag = |k: &str| -> Result<Option<bool>, BodyError> {
                match o.get(k) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::Bool(b)) => Ok(Some(*b)),
                    Some(_) => Err(bad(&path_join(path, k), "expected true or false")),
                }
            };
            if flag("infinite")? == Some(true) {
                return Ok(NoVal::Infinite);
            }
            let number = match o.get("number") {
                None | Some(Value::Null) => None,
                Some(n) => match no_val(n, &path_join(path, "number"), max)? {
                    NoVal::Num(n) => Some(n),
                    other => return Ok(other),
                },
            };
            match (flag("set")?, number) {
                (Some(false), _) => return Ok(NoVal::Unset),
                (_, Some(n)) => n,
                (Some(true), None) => {
                    return Err(bad(path, "\"set\" is true but \"number\" is missing"))
                }
                (None, None) => return Ok(NoVal::Unset),
            }
        }
        other => {
            return Err(bad(
                path,
                format!(
                    "expected a number or {{set, infinite, number}}, got {}",
                    kind(other)
                ),
            ))
        }
    };
    if n > max {
        return Err(bad(path, format!("{n} is larger than {max}")));
    }
    Ok(NoVal::Num(n))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn u32_of(v: &Value, path: &str) -> Result<Option<u32>, BodyError> {
    match no_val(v, path, u64::from(u32::MAX - 2))? {
        NoVal::Num(n) => Ok(Some(n as u32)),
        NoVal::Unset => Ok(None),
        NoVal::Infinite => Err(bad(path, "infinite is not allowed here")),
    }
}

fn u64_of(v: &Value, path: &str) -> Result<Option<u64>, BodyError> {
    match no_val(v, path, u64::MAX - 2)? {
        NoVal::Num(n) => Ok(Some(n)),
        NoVal::Unset => Ok(None),
        NoVal::Infinite => Err(bad(path, "infinite is not allowed here")),
    }
}

fn string(v: &Value, path: &str) -> Result<String, BodyError> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        other => Err(bad(path, format!("expected a string, got {}", kind(other)))),
    }
}

fn opt_string(v: &Value, path: &str) -> Result<Option<String>, BodyError> {
    match v {
        Value::Null => Ok(None),
        _ => Ok(Some(string(v, path)?).filter(|s| !s.is_empty())),
    }
}

fn boolean(v: &Value, path: &str) -> Result<bool, BodyError> {
    match v {
        Value::Bool(b) => Ok(*b),
        Value::Number(n) if n.as_u64() == Some(0) => Ok(false),
        Value::Number(n) if n.as_u64() == Some(1) => Ok(true),
        Value::String(s) if s.eq_ignore_ascii_case("true") || s.eq_ignore_ascii_case("yes") => {
            Ok(true)
        }
        Value::String(s) if s.eq_ignore_ascii_case("false") || s.eq_ignore_ascii_case("no") => {
            Ok(false)
        }
        other => Err(bad(
            path,
            format!("expected true or false, got {}", kind(other)),
        )),
    }
}

/// A list of strings, given as a JSON list or a comma-separated string.
fn string_list(v: &Value, path: &str) -> Result<Vec<String>, BodyError> {
    match v {
        Value::Null => Ok(Vec::new()),
        Value::String(s) => Ok(s
            .split(',')
            .map(|x| x.trim().to_string())
            .filter(|x| !x.is_empty())
            .collect()),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, x)| string(x, &format!("{path}[{i}]")))
            .collect(),
        other => Err(bad(
            path,
            format!("expected a list of strings, got {}", kind(other)),
        )),
    }
}

fn hostlist(v: &Value, path: &str) -> Result<Vec<String>, BodyError> {
    let mut out = Vec::new();
    for item in string_list(v, path)? {
        let names = slurm_common::hostlist::expand(&item)
            .map_err(|e| bad(path, format!("invalid node list \"{item}\": {e}")))?;
        out.extend(names);
    }
    Ok(out)
}

/// What a job description turns into, plus what was not used.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedJob {
    pub desc: JobDesc,
    pub warnings: Vec<String>,
}

/// `job_desc_msg` fields we act on; the rest of the schema's are accepted
/// with a warning.
const JOB_FIELDS_USED: &[&str] = &[
    "account",
    "admin_comment",
    "argv",
    "array",
    "begin_time",
    "comment",
    "cpus_per_task",
    "current_working_directory",
    "deadline",
    "dependency",
    "environment",
    "extra",
    "excluded_nodes",
    "flags",
    "hold",
    "maximum_nodes",
    "memory_per_cpu",
    "memory_per_node",
    "minimum_nodes",
    "name",
    "nice",
    "nodes",
    "partition",
    "qos",
    "required_nodes",
    "requeue",
    "reservation",
    "script",
    "shared",
    "standard_error",
    "standard_input",
    "standard_output",
    "tasks",
    "tasks_per_node",
    "ntasks_per_tres",
    "tres_per_task",
    "time_limit",
    "time_minimum",
    "user_id",
    "wckey",
    "group_id",
];

/// Turn a `job_desc_msg` at `path` into a [`JobDesc`]. `uid`/`user` is the
/// authenticated submitter (a `user_id` naming someone else is refused);
/// `home` is where a job without a working directory runs.
pub fn job_desc(
    v: &Value,
    path: &str,
    uid: u32,
    home: &str,
    submit_host: &str,
) -> Result<ParsedJob, BodyError> {
    let o = v.as_object().ok_or_else(|| {
        bad(
            path,
            format!("expected a job description object, got {}", kind(v)),
        )
    })?;
    let mut d = JobDesc {
        submit_host: submit_host.to_string(),
        ..Default::default()
    };
    let mut warnings = Vec::new();
    let mut min_nodes = None;
    let mut max_nodes = None;
    let mut cwd = None;
    let mut tres = None;
    for (k, val) in o {
        let p = path_join(path, k);
        let p = p.as_str();
        match k.as_str() {
            "account" => d.account = opt_string(val, p)?,
            "argv" => d.argv = string_list(val, p)?,
            "array" => d.array = opt_string(val, p)?,
            "begin_time" => d.begin_time = u64_of(val, p)?.filter(|&t| t > 0).map(|t| t as i64),
            "comment" => d.comment = opt_string(val, p)?,
            "deadline" => d.deadline = u64_of(val, p)?.filter(|&t| t > 0).map(|t| t as i64),
            "extra" => d.extra = opt_string(val, p)?,
            "wckey" => d.wckey = opt_string(val, p)?,
            "time_minimum" => {
                d.time_min = match no_val(val, p, u64::from(u32::MAX - 2))? {
                    NoVal::Num(n) if n > 0 => Some(n as u32),
                    _ => None,
                }
            }
            "mail_user" => d.mail_user = opt_string(val, p)?,
            "mail_type" => {
                // An array of flags (`["BEGIN", "END"]`); the controller checks them.
                let types = string_list(val, p)?;
                d.mail_type = (!types.is_empty()).then(|| types.join(","));
            }
            "admin_comment" => d.admin_comment = opt_string(val, p)?,
            "cpus_per_task" => d.cpus_per_task = u32_of(val, p)?.filter(|&n| n > 0),
            "current_working_directory" => cwd = opt_string(val, p)?,
            "dependency" => d.dependency = opt_string(val, p)?,
            "environment" => {
                d.environment = match val {
                    Value::Object(env) => env
                        .iter()
                        .map(|(ek, ev)| Ok(format!("{ek}={}", string(ev, &path_join(p, ek))?)))
                        .collect::<Result<_, BodyError>>()?,
                    _ => match val {
                        Value::Array(a) => a
                            .iter()
                            .enumerate()
                            .map(|(i, x)| string(x, &format!("{p}[{i}]")))
                            .collect::<Result<_, _>>()?,
                        Value::Null => Vec::new(),
                        other => {
                            return Err(bad(
                                p,
                                format!(
                                    "expected a list of NAME=value strings, got {}",
                                    kind(other)
                                ),
                            ))
                        }
                    },
                };
                if let Some((i, e)) = d
                    .environment
                    .iter()
                    .enumerate()
                    .find(|(_, e)| !e.contains('='))
                {
                    return Err(bad(
                        &format!("{p}[{i}]"),
                        format!("\"{e}\" is not NAME=value"),
                    ));
                }
            }
            "excluded_nodes" => d.exc_nodes = hostlist(val, p)?,
            "flags" => {
                for (i, f) in string_list(val, p)?.iter().enumerate() {
                    match f.as_str() {
                        "EXTERNAL_JOB" => d.external = true,
                        "KILL_INVALID_DEPENDENCY" => d.kill_on_invalid_dep = Some(true),
                        "NO_KILL_INVALID_DEPENDENCY" => d.kill_on_invalid_dep = Some(false),
                        other => warnings.push(format!(
                            "{p}[{i}]: flag {other} is not supported and was ignored"
                        )),
                    }
                }
            }
            "hold" => d.hold = boolean(val, p)?,
            "maximum_nodes" => max_nodes = u32_of(val, p)?.filter(|&n| n > 0),
            "memory_per_cpu" => d.mem_per_cpu = u64_of(val, p)?,
            "memory_per_node" => d.mem_per_node = u64_of(val, p)?,
            "minimum_nodes" => min_nodes = u32_of(val, p)?.filter(|&n| n > 0),
            "name" => d.name = opt_string(val, p)?,
            "nice" => {
                d.nice = match val {
                    Value::Null => None,
                    Value::Number(n) => Some(
                        n.as_i64()
                            .and_then(|n| i32::try_from(n).ok())
                            .filter(|n| n.unsigned_abs() <= 2_147_483_645)
                            .ok_or_else(|| bad(p, format!("invalid nice value {n}")))?,
                    ),
                    Value::String(s) => Some(
                        s.trim()
                            .parse()
                            .map_err(|_| bad(p, format!("invalid nice value \"{s}\"")))?,
                    ),
                    other => {
                        return Err(bad(p, format!("expected an integer, got {}", kind(other))))
                    }
                }
            }
            "nodes" => {
                let s = match val {
                    Value::Number(_) => string(val, p)?,
                    Value::String(s) => s.trim().to_string(),
                    Value::Null => continue,
                    other => {
                        return Err(bad(
                            p,
                            format!(
                                "expected a node count like \"2\" or \"1-4\", got {}",
                                kind(other)
                            ),
                        ))
                    }
                };
                let (lo, hi) = match s.split_once('-') {
                    Some((a, b)) => (a.trim(), Some(b.trim())),
                    None => (s.as_str(), None),
                };
                let parse = |x: &str| {
                    x.parse::<u32>()
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| bad(p, format!("invalid node count \"{s}\"")))
                };
                min_nodes = Some(parse(lo)?);
                max_nodes = match hi {
                    Some(h) => Some(parse(h)?),
                    None => min_nodes,
                };
            }
            "partition" => d.partition = opt_string(val, p)?,
            "qos" => d.qos = opt_string(val, p)?,
            "required_nodes" => d.req_nodes = hostlist(val, p)?,
            "requeue" => d.requeue = Some(boolean(val, p)?),
            "reservation" => d.reservation = opt_string(val, p)?,
            "script" => d.script = string(val, p)?,
            "shared" => {
                for (i, s) in string_list(val, p)?.iter().enumerate() {
                    match s.as_str() {
                        "none" | "exclusive" => d.exclusive = true,
                        "oversubscribe" => d.oversubscribe = true,
                        other => warnings.push(format!(
                            "{p}[{i}]: sharing mode {other} is not supported and was ignored"
                        )),
                    }
                }
            }
            "standard_error" => d.std_err = opt_string(val, p)?,
            "standard_input" => d.std_in = opt_string(val, p)?,
            "standard_output" => d.std_out = opt_string(val, p)?,
            "tasks" => d.ntasks = u32_of(val, p)?.filter(|&n| n > 0),
            "tasks_per_node" => d.ntasks_per_node = u32_of(val, p)?.filter(|&n| n > 0),
            "ntasks_per_tres" => d.ntasks_per_gpu = u32_of(val, p)?.filter(|&n| n > 0),
            "tres_per_task" => {
                if let Some(s) = opt_string(val, p)? {
                    let t = slurm_common::tres::parse(&s).map_err(|e| bad(p, e.to_string()))?;
                    tres = Some((t, p.to_string()));
                }
            }
            "time_limit" => {
                d.time_limit = match val {
                    Value::String(s) if s.contains(':') || s.contains('-') => Some(
                        slurm_common::timefmt::parse_time_limit(s)
                            .map_err(|e| bad(p, format!("invalid time limit \"{s}\": {e}")))?,
                    ),
                    _ => match no_val(val, p, u64::from(u32::MAX - 2))? {
                        NoVal::Unset => None,
                        NoVal::Infinite => Some(None),
                        NoVal::Num(n) => Some(Some(n as u32)),
                    },
                }
            }
            "user_id" | "group_id" => {
                let s = string(val, p)?;
                if k == "user_id" {
                    let named = slurm_common::users::parse_user(&s);
                    if named != Some(uid) {
                        return Err(bad(
                            p,
                            format!("jobs are submitted as the authenticated user (uid {uid}), not \"{s}\""),
                        ));
                    }
                } else {
                    warnings.push(format!(
                        "{p}: ignored; the job runs with the user's primary group"
                    ));
                }
            }
            other => {
                if JOB_FIELDS_USED.contains(&other) {
                    continue;
                }
                warnings.push(format!("{p}: field is not supported yet and was ignored"));
            }
        }
    }
    // `tres_per_task` gives CPUs and GPUs per task, as the options do;
    // given beside `cpus_per_task` it must agree.
    if let Some((t, p)) = tres {
        if let Some(c) = t.cpus {
            if d.cpus_per_task.is_some_and(|n| n != c) {
                return Err(bad(
                    &p,
                    format!(
                        "cpu={c} disagrees with cpus_per_task={}",
                        d.cpus_per_task.unwrap_or_default()
                    ),
                ));
            }
            d.cpus_per_task = Some(c);
        }
        if let Some(g) = t.gpus {
            if d.gpus_per_task.as_ref().is_some_and(|n| *n != g) {
                return Err(bad(
                    &p,
                    format!(
                        "gres/gpu={g} disagrees with gpus_per_task={}",
                        d.gpus_per_task.clone().unwrap_or_default()
                    ),
                ));
            }
            d.gpus_per_task = Some(g);
        }
    }
    d.min_nodes = min_nodes;
    d.max_nodes = max_nodes.or(min_nodes);
    if let (Some(lo), Some(hi)) = (d.min_nodes, d.max_nodes) {
        if hi < lo {
            return Err(bad(
                &path_join(path, "maximum_nodes"),
                format!("maximum node count {hi} is below the minimum {lo}"),
            ));
        }
    }
    d.work_dir = match cwd {
        Some(c) => c,
        None => {
            warnings.push(format!(
                "{}: not given; the job runs in {home}",
                path_join(path, "current_working_directory")
            ));
            home.to_string()
        }
    };
    if !d.work_dir.starts_with('/') {
        return Err(bad(
            &path_join(path, "current_working_directory"),
            format!("\"{}\" is not an absolute path", d.work_dir),
        ));
    }
    Ok(ParsedJob { desc: d, warnings })
}

/// `job_submit_req`: `{script?, job | jobs: [one]}`.
pub fn submit_request(v: &Value, uid: u32, home: &str, host: &str) -> Result<ParsedJob, BodyError> {
    let o = v.as_object().ok_or_else(|| {
        bad(
            "/",
            format!("expected an object with \"job\", got {}", kind(v)),
        )
    })?;
    let mut warnings = Vec::new();
    for k in o.keys() {
        if !matches!(k.as_str(), "script" | "job" | "jobs") {
            warnings.push(format!("{k}: unknown field was ignored"));
        }
    }
    let job = match (o.get("job"), o.get("jobs")) {
        (Some(j), None) => (j, "job".to_string()),
        (None, Some(Value::Array(js))) if js.len() == 1 => (&js[0], "jobs[0]".to_string()),
        (None, Some(Value::Array(js))) if js.len() > 1 => {
            return Err(bad(
                "jobs",
                "heterogeneous jobs (more than one component) are not supported",
            ))
        }
        (None, Some(_)) => return Err(bad("jobs", "expected a list with one job description")),
        (Some(_), Some(_)) => return Err(bad("jobs", "give either \"job\" or \"jobs\", not both")),
        (None, None) => return Err(bad("job", "job description is missing")),
    };
    let mut parsed = job_desc(job.0, &job.1, uid, home, host)?;
    if let Some(s) = o.get("script") {
        let s = string(s, "script")?;
        if parsed.desc.script.is_empty() {
            parsed.desc.script = s;
        } else if parsed.desc.script != s {
            return Err(bad(
                "script",
                format!("differs from {}/script; give the script once", job.1),
            ));
        }
    }
    warnings.append(&mut parsed.warnings);
    parsed.warnings = warnings;
    Ok(parsed)
}

/// `job_alloc_req`: `{job | hetjob: [one]}`.
pub fn alloc_request(v: &Value, uid: u32, home: &str, host: &str) -> Result<ParsedJob, BodyError> {
    let o = v.as_object().ok_or_else(|| {
        bad(
            "/",
            format!("expected an object with \"job\", got {}", kind(v)),
        )
    })?;
    let job = match (o.get("job"), o.get("hetjob")) {
        (Some(j), None) => (j, "job"),
        (None, Some(Value::Array(js))) if js.len() == 1 => (&js[0], "hetjob[0]"),
        (None, Some(_)) => {
            return Err(bad("hetjob", "heterogeneous allocations are not supported"))
        }
        (Some(_), Some(_)) => return Err(bad("hetjob", "give either \"job\" or \"hetjob\"")),
        (None, None) => return Err(bad("job", "job description is missing")),
    };
    let p = job_desc(job.0, job.1, uid, home, host)?;
    if !p.desc.script.is_empty() {
        return Err(bad(
            &format!("{}/script", job.1),
            "an allocation has no batch script (use job/submit)",
        ));
    }
    Ok(p)
}

/// A job update (`POST job/{id}`): the changes the controller can make.
#[derive(Debug, Clone, PartialEq)]
pub struct JobChanges {
    pub updates: Vec<slurm_proto::JobUpdate>,
    pub warnings: Vec<String>,
}

/// `job_desc_msg` as an update.
pub fn job_update(v: &Value) -> Result<JobChanges, BodyError> {
    use slurm_proto::JobUpdate;
    let o = v.as_object().ok_or_else(|| {
        bad(
            "/",
            format!("expected a job description object, got {}", kind(v)),
        )
    })?;
    let mut updates = Vec::new();
    let mut warnings = Vec::new();
    for (k, val) in o {
        let p = k.as_str();
        match p {
            "time_limit" => {
                let lim = match val {
                    Value::String(s) if s.contains(':') || s.contains('-') => {
                        slurm_common::timefmt::parse_time_limit(s)
                            .map_err(|e| bad(p, format!("invalid time limit \"{s}\": {e}")))?
                    }
                    _ => match no_val(val, p, u64::from(u32::MAX - 2))? {
                        NoVal::Unset => continue,
                        NoVal::Infinite => None,
                        NoVal::Num(n) => Some(n as u32),
                    },
                };
                updates.push(JobUpdate::TimeLimit(lim));
            }
            "nice" => {
                let n = val
                    .as_i64()
                    .and_then(|n| i32::try_from(n).ok())
                    .ok_or_else(|| bad(p, "expected an integer"))?;
                updates.push(JobUpdate::Nice(n));
            }
            "name" => updates.push(JobUpdate::Name(string(val, p)?)),
            "comment" => updates.push(JobUpdate::Comment(string(val, p)?)),
            "admin_comment" => updates.push(JobUpdate::AdminComment(string(val, p)?)),
            "partition" => updates.push(JobUpdate::Partition(string(val, p)?)),
            "account" => updates.push(JobUpdate::Account(string(val, p)?)),
            "qos" => updates.push(JobUpdate::Qos(string(val, p)?)),
            "hold" => updates.push(if boolean(val, p)? {
                JobUpdate::Hold
            } else {
                JobUpdate::Release
            }),
            "priority" => match no_val(val, p, u64::from(u32::MAX - 2))? {
                NoVal::Num(0) => updates.push(JobUpdate::Hold),
                NoVal::Infinite => updates.push(JobUpdate::Release),
                _ => warnings.push(format!(
                    "{p}: setting a priority is not supported yet and was ignored"
                )),
            },
            "job_id" => {}
            other => warnings.push(format!(
                "{other}: field cannot be updated yet and was ignored"
            )),
        }
    }
    Ok(JobChanges { updates, warnings })
}

/// `kill_jobs_msg` (DELETE jobs/).
pub fn kill_jobs(v: &Value) -> Result<(CancelFilter, Vec<String>), BodyError> {
    let o = v
        .as_object()
        .ok_or_else(|| bad("/", format!("expected an object, got {}", kind(v))))?;
    let mut f = CancelFilter::default();
    let mut warnings = Vec::new();
    for (k, val) in o {
        let p = k.as_str();
        match p {
            "jobs" => {
                for (i, s) in string_list(val, p)?.iter().enumerate() {
                    let id = s.split(['_', '.']).next().unwrap_or("");
                    let n: u32 = id.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                        bad(&format!("jobs[{i}]"), format!("invalid job id \"{s}\""))
                    })?;
                    if s.contains(['_', '.']) {
                        warnings.push(format!("jobs[{i}]: \"{s}\" acts on the whole job {n}"));
                    }
                    f.job_ids.push(n);
                }
            }
            "signal" => {
                let s = string(val, p)?;
                f.signal = Some(
                    crate::openapi::parse_signal(&s)
                        .ok_or_else(|| bad(p, format!("unknown signal \"{s}\"")))?,
                );
            }
            "job_name" => f.name = opt_string(val, p)?,
            "partition" => f.partition = opt_string(val, p)?,
            "user_id" => {
                let s = string(val, p)?;
                f.user = Some(
                    slurm_common::users::parse_user(&s)
                        .ok_or_else(|| bad(p, format!("unknown user \"{s}\"")))?,
                );
            }
            "user_name" => {
                let s = string(val, p)?;
                f.user = Some(
                    slurm_common::users::user_by_name(&s)
                        .map(|u| u.uid)
                        .ok_or_else(|| bad(p, format!("unknown user \"{s}\"")))?,
                );
            }
            "job_state" => {
                for (i, s) in string_list(val, p)?.iter().enumerate() {
                    f.states.push(JobState::parse(s).ok_or_else(|| {
                        bad(&format!("{p}[{i}]"), format!("unknown job state \"{s}\""))
                    })?);
                }
            }
            "flags" => {
                for s in string_list(val, p)? {
                    warnings.push(format!("{p}: flag {s} is not supported and was ignored"));
                }
            }
            other => {
                if !val.is_null() {
                    return Err(bad(other, "filtering on this field is not supported yet"));
                }
            }
        }
    }
    Ok((f, warnings))
}

/// What `POST node/{name}` asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeChanges {
    pub state: Option<NodeStateRequest>,
    pub reason: Option<String>,
    pub features: Option<Vec<String>>,
    pub warnings: Vec<String>,
}

/// `update_node_msg`.
pub fn node_update(v: &Value) -> Result<NodeChanges, BodyError> {
    let o = v
        .as_object()
        .ok_or_else(|| bad("/", format!("expected an object, got {}", kind(v))))?;
    let mut c = NodeChanges {
        state: None,
        reason: None,
        features: None,
        warnings: Vec::new(),
    };
    for (k, val) in o {
        let p = k.as_str();
        match p {
            "state" => {
                let states = string_list(val, p)?;
                for (i, s) in states.iter().enumerate() {
                    let st = match s.to_ascii_uppercase().as_str() {
                        "DRAIN" => NodeStateRequest::Drain,
                        "RESUME" => NodeStateRequest::Resume,
                        "DOWN" => NodeStateRequest::Down,
                        "UNDRAIN" => NodeStateRequest::Undrain,
                        "IDLE" => NodeStateRequest::Idle,
                        other => {
                            return Err(bad(
                                &format!("{p}[{i}]"),
                                format!("node state {other} cannot be set (use DRAIN, RESUME, DOWN, UNDRAIN or IDLE)"),
                            ))
                        }
                    };
                    if c.state.is_some() {
                        return Err(bad(p, "give one state"));
                    }
                    c.state = Some(st);
                }
            }
            "reason" => c.reason = opt_string(val, p)?,
            "features" | "features_act" => c.features = Some(string_list(val, p)?),
            "reason_uid" | "name" => {}
            other => c.warnings.push(format!(
                "{other}: field cannot be updated yet and was ignored"
            )),
        }
    }
    Ok(c)
}

/// `openapi_create_node_req`: a `node_conf` line as in slurm.conf.
pub fn create_node(v: &Value) -> Result<Vec<NodeSpec>, BodyError> {
    let line = v
        .get("node_conf")
        .ok_or_else(|| bad("node_conf", "node configuration line is missing"))?;
    let line = string(line, "node_conf")?;
    let mut names = Vec::new();
    let mut spec = NodeSpec {
        state: "IDLE".into(),
        cpus: 1,
        real_memory: 1,
        ..Default::default()
    };
    for word in line.split_whitespace() {
        let (k, val) = word
            .split_once('=')
            .ok_or_else(|| bad("node_conf", format!("\"{word}\" is not Key=Value")))?;
        let invalid = || bad("node_conf", format!("invalid value for {k}: {val}"));
        match k.to_ascii_lowercase().as_str() {
            "nodename" => {
                names = slurm_common::hostlist::expand(val).map_err(|_| invalid())?;
            }
            "state" => spec.state = val.to_ascii_uppercase(),
            "cpus" | "procs" => spec.cpus = val.parse().map_err(|_| invalid())?,
            "realmemory" => spec.real_memory = val.parse().map_err(|_| invalid())?,
            "feature" | "features" => spec.features = val.split(',').map(String::from).collect(),
            "partitions" | "partition" => {
                spec.partitions = val.split(',').map(String::from).collect()
            }
            "nodeaddr" => spec.addr = Some(val.to_string()),
            "gres" => spec.gres = slurm_common::conf::split_top_commas(val),
            "port" => spec.port = Some(val.parse().map_err(|_| invalid())?),
            _ => {
                return Err(bad(
                    "node_conf",
                    format!("{k} is not supported for a new node"),
                ))
            }
        }
    }
    if names.is_empty() {
        return Err(bad("node_conf", "NodeName= is missing"));
    }
    Ok(names
        .into_iter()
        .map(|name| NodeSpec {
            name,
            ..spec.clone()
        })
        .collect())
}

/// `reservation_desc_msg` as a create/update request.
pub fn reservation(v: &Value, path: &str) -> Result<(ReservationSpec, Vec<String>), BodyError> {
    let o = v.as_object().ok_or_else(|| {
        bad(
            path,
            format!("expected a reservation object, got {}", kind(v)),
        )
    })?;
    let mut r = ReservationSpec::default();
    let mut warnings = Vec::new();
    for (k, val) in o {
        let p = path_join(path, k);
        let p = p.as_str();
        match k.as_str() {
            "name" => r.name = opt_string(val, p)?,
            "start_time" => r.start_time = u64_of(val, p)?.map(|t| t as i64),
            "end_time" => r.end_time = u64_of(val, p)?.map(|t| t as i64),
            "duration" => r.duration = u32_of(val, p)?,
            "node_list" => {
                let n = hostlist(val, p)?;
                if !n.is_empty() {
                    r.nodes = Some(n);
                }
            }
            "node_count" => r.node_cnt = u32_of(val, p)?,
            "users" => r.users = Some(string_list(val, p)?).filter(|v| !v.is_empty()),
            "accounts" => r.accounts = Some(string_list(val, p)?).filter(|v| !v.is_empty()),
            "partition" => r.partition = opt_string(val, p)?,
            "flags" => {
                let flags = string_list(val, p)?;
                if let Some(f) = flags
                    .iter()
                    .find(|f| !crate::openapi::RESERVATION_FLAGS.contains(&f.as_str()))
                {
                    return Err(bad(p, format!("unknown reservation flag {f}")));
                }
                r.flags = Some(flags);
            }
            other => warnings.push(format!(
                "{path}/{other}: field is not supported yet and was ignored"
            )),
        }
    }
    Ok((r, warnings))
}

// ------------------------------------------------------- slurmdb bodies

/// The objects of list `key` in a `slurmdb` POST body.
fn db_list<'a>(v: &'a Value, key: &str) -> Result<&'a [Value], BodyError> {
    match v.get(key) {
        Some(Value::Array(a)) => {
            for (i, x) in a.iter().enumerate() {
                if !x.is_object() {
                    return Err(bad(
                        &format!("{key}[{i}]"),
                        format!("expected an object, got {}", kind(x)),
                    ));
                }
            }
            Ok(a)
        }
        Some(other) => Err(bad(key, format!("expected a list, got {}", kind(other)))),
        None => Err(bad(key, "missing")),
    }
}

fn db_name(x: &Value, path: &str, field: &str) -> Result<String, BodyError> {
    let p = path_join(path, field);
    match x.get(field) {
        None | Some(Value::Null) => Err(bad(&p, "missing")),
        Some(v) => {
            let s = string(v, &p)?;
            if s.trim().is_empty() || s.contains(char::is_whitespace) || s.contains(',') {
                return Err(bad(&p, format!("'{s}' is not a valid name")));
            }
            Ok(s)
        }
    }
}

fn field<'a>(x: &'a Value, name: &str) -> &'a Value {
    x.get(name).unwrap_or(&Value::Null)
}

/// An optional string field `f` of the item at `path`.
fn opt_field(x: &Value, path: &str, f: &str) -> Result<Option<String>, BodyError> {
    opt_string(field(x, f), &path_join(path, f))
}

/// Each object of the list `key`, read by `item` (given its path,
/// `key[i]`).
fn db_items<T>(
    v: &Value,
    key: &str,
    item: impl Fn(&Value, &str) -> Result<T, BodyError>,
) -> Result<Vec<T>, BodyError> {
    db_list(v, key)?
        .iter()
        .enumerate()
        .map(|(i, x)| item(x, &format!("{key}[{i}]")))
        .collect()
}

/// An account of `POST slurmdb/v0.0.44/accounts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbAccount {
    pub name: String,
    pub description: Option<String>,
    pub organization: Option<String>,
}

pub fn db_accounts(v: &Value) -> Result<Vec<DbAccount>, BodyError> {
    db_items(v, "accounts", |x, p| {
        Ok(DbAccount {
            name: db_name(x, p, "name")?,
            description: opt_field(x, p, "description")?,
            organization: opt_field(x, p, "organization")?,
        })
    })
}

/// A user of `POST slurmdb/v0.0.44/users`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbUser {
    pub name: String,
    pub default_account: Option<String>,
    pub admin_level: Option<slurm_proto::acct::AdminLevel>,
}

pub fn db_users(v: &Value) -> Result<Vec<DbUser>, BodyError> {
    db_items(v, "users", |x, p| {
        let default_account = match field(x, "default") {
            Value::Null => None,
            d => opt_string(field(d, "account"), &path_join(p, "default/account"))?,
        };
        let lp = path_join(p, "administrator_level");
        let admin_level = match string_list(field(x, "administrator_level"), &lp)?.first() {
            None => None,
            Some(l) if l == "Not Set" => None,
            Some(l) => Some(
                slurm_proto::acct::AdminLevel::parse(l)
                    .ok_or_else(|| bad(&lp, format!("unknown level '{l}'")))?,
            ),
        };
        Ok(DbUser {
            name: db_name(x, p, "name")?,
            default_account,
            admin_level,
        })
    })
}

/// An association of `POST slurmdb/v0.0.44/associations`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbAssoc {
    pub account: String,
    /// Empty for the account's own association.
    pub user: String,
    pub cluster: Option<String>,
    pub partition: Option<String>,
    pub parent: Option<String>,
    pub shares: Option<u32>,
    pub qos: Option<Vec<String>>,
    pub default_qos: Option<String>,
}

pub fn db_assocs(v: &Value) -> Result<Vec<DbAssoc>, BodyError> {
    db_items(v, "associations", |x, p| {
        let opt = |f: &str| opt_field(x, p, f);
        Ok(DbAssoc {
            account: db_name(x, p, "account")?,
            user: opt("user")?.unwrap_or_default(),
            cluster: opt("cluster")?,
            partition: opt("partition")?,
            parent: opt("parent_account")?,
            shares: u32_of(field(x, "shares_raw"), &path_join(p, "shares_raw"))?,
            qos: match field(x, "qos") {
                Value::Null => None,
                q => Some(string_list(q, &path_join(p, "qos"))?),
            },
            default_qos: match field(x, "default") {
                Value::Null => None,
                d => opt_string(field(d, "qos"), &path_join(p, "default/qos"))?,
            },
        })
    })
}

/// A QOS of `POST slurmdb/v0.0.44/qos`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbQos {
    pub name: String,
    pub description: Option<String>,
    pub priority: Option<u32>,
}

pub fn db_qos(v: &Value) -> Result<Vec<DbQos>, BodyError> {
    db_items(v, "qos", |x, p| {
        Ok(DbQos {
            name: db_name(x, p, "name")?,
            description: opt_field(x, p, "description")?,
            priority: u32_of(field(x, "priority"), &path_join(p, "priority"))?,
        })
    })
}

/// The cluster names of `POST slurmdb/v0.0.44/clusters`.
pub fn db_clusters(v: &Value) -> Result<Vec<String>, BodyError> {
    db_items(v, "clusters", |x, p| db_name(x, p, "name"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_come_plain_or_as_no_val_objects() {
        assert_eq!(no_val(&json!(5), "x", 10).unwrap(), NoVal::Num(5));
        assert_eq!(no_val(&json!("7"), "x", 10).unwrap(), NoVal::Num(7));
        assert_eq!(
            no_val(&json!({"set": true, "number": 3}), "x", 10).unwrap(),
            NoVal::Num(3)
        );
        assert_eq!(
            no_val(&json!({"infinite": true}), "x", 10).unwrap(),
            NoVal::Infinite
        );
        assert_eq!(
            no_val(&json!({"set": false, "number": 3}), "x", 10).unwrap(),
            NoVal::Unset
        );
        let e = no_val(&json!(-1), "job/tasks", 10).unwrap_err();
        assert_eq!(e.path, "job/tasks");
        assert!(no_val(&json!(11), "x", 10).is_err());
        assert!(no_val(&json!([1]), "x", 10).is_err());
        assert_eq!(
            no_val(&json!({"bogus": 1}), "t", 10).unwrap_err().path,
            "t/bogus"
        );
    }

    #[test]
    fn submit_bodies_become_job_descriptions() {
        let body = json!({
            "script": "#!/bin/sh\ntrue\n",
            "job": {
                "name": "x", "partition": "debug", "time_limit": {"set": true, "number": 5},
                "nodes": "1-2", "tasks": 2, "cpus_per_task": 1,
                "memory_per_node": 100, "environment": ["A=1"],
                "current_working_directory": "/tmp", "standard_output": "o.txt",
                "flags": ["EXTERNAL_JOB"], "mail_user": "x", "mail_type": ["BEGIN", "END"],
                "mcs_label": "m",
            }
        });
        let p = submit_request(&body, 0, "/root", "h").unwrap();
        let d = p.desc;
        assert_eq!(d.time_limit, Some(Some(5)));
        assert_eq!((d.min_nodes, d.max_nodes), (Some(1), Some(2)));
        assert_eq!(d.mem_per_node, Some(100));
        assert_eq!(d.script, "#!/bin/sh\ntrue\n");
        assert!(d.external);
        assert_eq!(d.mail_user.as_deref(), Some("x"));
        assert_eq!(d.mail_type.as_deref(), Some("BEGIN,END"));
        assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
        let e = submit_request(&json!({"job": {"time_limit": "x"}}), 0, "/", "h").unwrap_err();
        assert_eq!(e.path, "job/time_limit");
        let e =
            submit_request(&json!({"job": {"environment": ["NOEQ"]}}), 0, "/", "h").unwrap_err();
        assert_eq!(e.path, "job/environment[0]");
        assert!(submit_request(&json!([]), 0, "/", "h").is_err());
        assert_eq!(
            submit_request(&json!({}), 0, "/", "h").unwrap_err().path,
            "job"
        );
        let inf = submit_request(
            &json!({"job": {"time_limit": {"infinite": true}}}),
            0,
            "/",
            "h",
        )
        .unwrap();
        assert_eq!(inf.desc.time_limit, Some(None));
        let d = submit_request(
            &json!({"job": {
                "deadline": 1_900_000_000u64, "time_minimum": {"set": true, "number": 7},
                "extra": "e", "wckey": "w", "flags": ["KILL_INVALID_DEPENDENCY"],
                "current_working_directory": "/tmp",
            }}),
            0,
            "/",
            "h",
        )
        .unwrap();
        assert!(d.warnings.is_empty(), "{:?}", d.warnings);
        let d = d.desc;
        assert_eq!(d.deadline, Some(1_900_000_000));
        assert_eq!(d.time_min, Some(7));
        assert_eq!(
            (d.extra.as_deref(), d.wckey.as_deref()),
            (Some("e"), Some("w"))
        );
        assert_eq!(d.kill_on_invalid_dep, Some(true));
        let e = submit_request(&json!({"job": {"deadline": "soon"}}), 0, "/", "h").unwrap_err();
        assert_eq!(e.path, "job/deadline");
        // tres_per_task: CPUs and GPUs per task; beside cpus_per_task it
        // must agree; a bad one is refused naming the field.
        let job = |j: Value| submit_request(&json!({ "job": j }), 0, "/", "h");
        let d = job(json!({"tres_per_task": "cpu=3,gres/gpu:a100=1", "cpus_per_task": 3}))
            .unwrap()
            .desc;
        assert_eq!(
            (d.cpus_per_task, d.gpus_per_task.as_deref()),
            (Some(3), Some("a100:1"))
        );
        for bad in [
            json!({"tres_per_task": "cpu=2", "cpus_per_task": 3}),
            json!({"tres_per_task": "mem=1G"}),
            json!({"tres_per_task": "gres/shard=1"}),
            json!({"tres_per_task": 5}),
        ] {
            assert_eq!(
                job(bad.clone()).unwrap_err().path,
                "job/tres_per_task",
                "{bad}"
            );
        }
    }

    #[test]
    fn node_and_reservation_bodies() {
        let c = node_update(&json!({"state": ["DRAIN"], "reason": "r"})).unwrap();
        assert_eq!(c.state, Some(NodeStateRequest::Drain));
        assert!(node_update(&json!({"state": ["FLY"]})).is_err());
        let n =
            create_node(&json!({"node_conf": "NodeName=k[1-2] State=External CPUs=8"})).unwrap();
        assert_eq!(n.len(), 2);
        assert_eq!(n[0].state, "EXTERNAL");
        let g =
            create_node(&json!({"node_conf": "NodeName=g1 State=External Gres=gpu:a100:2,gpu:1"}))
                .unwrap();
        assert_eq!(
            g[0].gres,
            vec!["gpu:a100:2".to_string(), "gpu:1".to_string()]
        );
        assert!(create_node(&json!({"node_conf": "CPUs=8"})).is_err());
        let (r, _) = reservation(
            &json!({"name": "m", "node_list": ["n1"], "flags": ["MAINT"], "duration": 10}),
            "reservations[0]",
        )
        .unwrap();
        assert_eq!(r.nodes, Some(vec!["n1".to_string()]));
        assert!(reservation(&json!({"flags": ["BOGUS"]}), "r").is_err());
    }

    #[test]
    fn json_errors_say_where() {
        let e = parse_json(b"{\n \"a\": }").unwrap_err();
        assert!(e.path.starts_with("line 2"), "{e:?}");
        assert!(parse_json(b"  ").is_err());
    }

    #[test]
    fn slurmdb_bodies() {
        let v = json!({"accounts": [{"name": "phys", "description": "d", "organization": "o"}]});
        assert_eq!(
            db_accounts(&v).unwrap(),
            vec![DbAccount {
                name: "phys".into(),
                description: Some("d".into()),
                organization: Some("o".into())
            }]
        );
        assert_eq!(
            db_accounts(&json!({"accounts": [{"description": "x"}]}))
                .unwrap_err()
                .to_string(),
            "accounts[0]/name: missing"
        );
        assert!(db_accounts(&json!({"accounts": {}})).is_err());
        assert!(db_accounts(&json!({"accounts": [{"name": "a b"}]})).is_err());
        let u = db_users(
            &json!({"users": [{"name": "u1", "default": {"account": "phys"},
            "administrator_level": ["Operator"]}]}),
        )
        .unwrap();
        assert_eq!(u[0].default_account.as_deref(), Some("phys"));
        assert_eq!(
            u[0].admin_level,
            Some(slurm_proto::acct::AdminLevel::Operator)
        );
        assert!(
            db_users(&json!({"users": [{"name": "u", "administrator_level": ["God"]}]})).is_err()
        );
        let a = db_assocs(&json!({"associations": [{"account": "phys", "user": "u1",
            "shares_raw": {"set": true, "infinite": false, "number": 5}, "qos": ["normal"]}]}))
        .unwrap();
        assert_eq!(
            (a[0].shares, a[0].qos.clone()),
            (Some(5), Some(vec!["normal".to_string()]))
        );
        let q = db_qos(&json!({"qos": [{"name": "high", "priority": 10}]})).unwrap();
        assert_eq!(q[0].priority, Some(10));
        assert_eq!(
            db_clusters(&json!({"clusters": [{"name": "c2"}]})).unwrap(),
            vec!["c2"]
        );
    }
}
