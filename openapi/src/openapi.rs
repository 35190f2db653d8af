//! JSON writers for the data_parser v0.0.44 shapes (Slurm 25.11): jobs,
//! nodes, partitions, reservations, plus the `meta`/`errors`/`warnings`
//! envelope every response carries. `slurmrestd` answers with them and the
//! commands' `--json` reuses them, so both print the same objects.
//!
//! Numbers that may be unset are `{set, infinite, number}` objects
//! ([`num`], [`unset`], [`infinite`]). Times are Unix seconds.

use serde_json::{json, Map, Value};
use slurm_proto::{
    JobRecord, JobState, NodeBaseState, NodeRecord, PartitionRecord, PartitionState,
    ReservationRecord, SLURM_VERSION,
};

/// The data parser these shapes follow.
pub const DATA_PARSER: &str = "data_parser/v0.0.44";
/// The REST path prefix of the controller half.
pub const SLURM_PREFIX: &str = "/slurm/v0.0.44";

/// A set number: `{"set": true, "infinite": false, "number": n}`.
/// The `statistics` of the controller (`GET diag/`, `sdiag --json`).
pub fn diag_statistics(d: &slurm_proto::DiagStats) -> Value {
    let i32c = |v: u64| v.min(i32::MAX as u64) as i64;
    let mean = |sum: u64, n: u64| sum.checked_div(n).unwrap_or(0);
    let minutes = ((d.now - d.since).max(60) / 60) as u64;
    json!({
            "parts_packed": 1,
            "req_time": num(d.now),
            "req_time_start": num(d.since),
            "schedule_cycle_max": i32c(d.main_max_us),
            "schedule_cycle_last": i32c(d.main_last_us),
            "schedule_cycle_sum": d.main_total_us,
            "schedule_cycle_total": i32c(d.main_cycles),
            "schedule_cycle_mean": mean(d.main_total_us, d.main_cycles),
            "schedule_cycle_mean_depth": mean(d.main_total_depth, d.main_cycles),
            "schedule_cycle_per_minute": d.main_cycles / minutes,
            "schedule_cycle_depth": i32c(d.main_total_depth),
            "schedule_queue_length": i32c(d.main_last_queue),
            "jobs_submitted": i32c(d.jobs_submitted),
            "jobs_started": i32c(d.jobs_started),
            "jobs_completed": i32c(d.jobs_completed),
            "jobs_canceled": i32c(d.jobs_canceled),
            "jobs_failed": i32c(d.jobs_failed),
            "jobs_pending": i32c(d.jobs_pending),
            "jobs_running": i32c(d.jobs_running),
            "job_states_ts": num(d.job_states_ts),
            "server_thread_count": i32c(d.server_threads),
            "agent_queue_size": i32c(d.agent_retrying),
            "agent_count": i32c(d.agent_count),
            "agent_thread_count": i32c(d.agent_count),
            "dbd_agent_queue_size": i32c(d.dbd_queue),
            "pending_rpcs": d.pending_rpcs.iter().map(|p| json!({
                "type_id": p.id,
                "message_type": p.name,
                "count": i32c(p.count),
            })).collect::<Vec<_>>(),
            "pending_rpcs_by_hostlist": d.pending_rpcs.iter().map(|p| json!({
                "type_id": p.id,
                "message_type": p.name,
                "count": slurm_common::hostlist::expand(&p.hosts).unwrap_or_default(),
            })).collect::<Vec<_>>(),
            "bf_backfilled_jobs": i32c(d.bf_backfilled_jobs),
            "bf_last_backfilled_jobs": i32c(d.bf_backfilled_jobs),
            "bf_backfilled_het_jobs": 0,
            "bf_cycle_counter": i32c(d.bf_cycles),
            "bf_cycle_mean": mean(d.bf_total_us, d.bf_cycles),
            "bf_depth_mean": mean(d.bf_total_depth, d.bf_cycles),
            "bf_cycle_sum": d.bf_total_us,
            "bf_cycle_last": i32c(d.bf_last_us),
            "bf_cycle_max": i32c(d.bf_max_us),
            "bf_last_depth": i32c(d.bf_last_depth),
            "bf_depth_sum": i32c(d.bf_total_depth),
            "bf_queue_len": i32c(d.bf_last_queue),
            "bf_when_last_cycle": time(d.bf_last_when),
            "bf_last_depth_try": i32c(d.bf_last_depth_try),
            "bf_depth_try_sum": i32c(d.bf_total_depth_try),
            "bf_depth_mean_try": mean(d.bf_total_depth_try, d.bf_cycles),
            "bf_queue_len_sum": i32c(d.bf_total_queue),
            "bf_queue_len_mean": mean(d.bf_total_queue, d.bf_cycles),
            "bf_table_size": i32c(d.bf_table_size),
            "bf_table_size_sum": i32c(d.bf_total_table_size),
            "bf_table_size_mean": mean(d.bf_total_table_size, d.bf_cycles),
            "bf_active": false,
            "bf_exit": {
                "end_job_queue": i32c(d.bf_exit_end),
                "bf_max_job_start": 0,
                "bf_max_job_test": i32c(d.bf_exit_max_job_test),
                "bf_max_time": 0,
                "bf_node_space_size": 0,
                "state_changed": 0,
            },
            "schedule_exit": {
                "end_job_queue": i32c(d.main_cycles),
                "default_queue_depth": 0,
                "max_job_start": 0,
                "max_rpc_cnt": 0,
                "max_sched_time": 0,
                "licenses": 0,
            },
            "gettimeofday_latency": i32c(d.gettimeofday_latency),
    })
}

/// The `licenses` body (`GET licenses/`, `scontrol show licenses --json`).
pub fn licenses_body(licenses: &[slurm_proto::LicenseInfo], last_update: i64) -> Value {
    let list: Vec<Value> = licenses
        .iter()
        .map(|l| {
            json!({
                "LicenseName": l.name,
                "Total": l.total,
                "Used": l.used,
                "Free": l.total.saturating_sub(l.used),
                "Remote": false,
                "Reserved": 0,
                "LastConsumed": 0,
                "LastDeficit": 0,
                "LastUpdate": last_update,
            })
        })
        .collect();
    json!({"licenses": list, "last_update": num(last_update)})
}

pub fn num(n: impl Into<Value>) -> Value {
    json!({"set": true, "infinite": false, "number": n.into()})
}

/// An unset number.
pub fn unset() -> Value {
    json!({"set": false, "infinite": false, "number": 0})
}

/// An infinite (UNLIMITED) number.
pub fn infinite() -> Value {
    json!({"set": false, "infinite": true, "number": 0})
}

/// `Some(n)` → set, `None` → unset.
pub fn opt_num<T: Into<Value>>(n: Option<T>) -> Value {
    match n {
        Some(n) => num(n),
        None => unset(),
    }
}

/// A time: Slurm reports an unknown time as a set 0.
pub fn time(t: Option<i64>) -> Value {
    num(t.unwrap_or(0).max(0))
}

/// A limit in minutes where `None` is UNLIMITED.
pub fn limit(m: Option<u32>) -> Value {
    match m {
        Some(m) => num(m),
        None => infinite(),
    }
}

/// `meta`: plugin, client, Slurm version and the command (empty for REST).
pub fn meta(cluster: &str, client: Option<&Client>, command: &[String]) -> Value {
    let mut parts = SLURM_VERSION.splitn(3, '.');
    let major = parts.next().unwrap_or("0");
    let minor = parts.next().unwrap_or("0");
    let micro = parts.next().unwrap_or("0");
    let client = match client {
        Some(c) => json!({"source": c.source, "user": c.user, "group": c.group}),
        None => json!({"source": "", "user": "", "group": ""}),
    };
    json!({
        "plugin": {
            "type": "openapi/slurmctld",
            "name": "Slurm OpenAPI slurmctld",
            "data_parser": DATA_PARSER,
            "accounting_storage": "",
        },
        "client": client,
        "command": command,
        "slurm": {
            "version": {"major": major, "micro": micro, "minor": minor},
            "release": SLURM_VERSION,
            "cluster": cluster,
        },
    })
}

/// Who asked, for `meta.client`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Client {
    /// `[::1]:port`, `unix:/path`, ...
    pub source: String,
    pub user: String,
    pub group: String,
}

/// One `errors` entry.
pub fn error_entry(error_number: i32, error: &str, description: &str, source: &str) -> Value {
    json!({
        "error_number": error_number,
        "error": error,
        "description": description,
        "source": source,
    })
}

/// One `warnings` entry.
pub fn warning_entry(description: &str, source: &str) -> Value {
    json!({"description": description, "source": source})
}

/// A response body: `fields` plus `meta`, `errors` and `warnings`.
pub fn envelope(
    fields: Map<String, Value>,
    meta: Value,
    errors: Vec<Value>,
    warnings: Vec<Value>,
) -> Value {
    let mut m = fields;
    m.insert("meta".into(), meta);
    m.insert("errors".into(), Value::Array(errors));
    m.insert("warnings".into(), Value::Array(warnings));
    Value::Object(m)
}

// ------------------------------------------------------------------ jobs

/// A signal's name without `SIG` (`KILL`), or its number as text.
pub fn signal_name(sig: i32) -> String {
    let n = match sig {
        libc::SIGHUP => "HUP",
        libc::SIGINT => "INT",
        libc::SIGQUIT => "QUIT",
        libc::SIGILL => "ILL",
        libc::SIGTRAP => "TRAP",
        libc::SIGABRT => "ABRT",
        libc::SIGBUS => "BUS",
        libc::SIGFPE => "FPE",
        libc::SIGKILL => "KILL",
        libc::SIGUSR1 => "USR1",
        libc::SIGSEGV => "SEGV",
        libc::SIGUSR2 => "USR2",
        libc::SIGPIPE => "PIPE",
        libc::SIGALRM => "ALRM",
        libc::SIGTERM => "TERM",
        libc::SIGCHLD => "CHLD",
        libc::SIGCONT => "CONT",
        libc::SIGSTOP => "STOP",
        libc::SIGTSTP => "TSTP",
        libc::SIGTTIN => "TTIN",
        libc::SIGTTOU => "TTOU",
        libc::SIGURG => "URG",
        libc::SIGXCPU => "XCPU",
        libc::SIGXFSZ => "XFSZ",
        libc::SIGVTALRM => "VTALRM",
        libc::SIGPROF => "PROF",
        libc::SIGWINCH => "WINCH",
        libc::SIGIO => "IO",
        libc::SIGSYS => "SYS",
        _ => return sig.to_string(),
    };
    n.to_string()
}

/// A signal by name (`TERM`, `SIGTERM`, any case) or number (1..=64).
pub fn parse_signal(s: &str) -> Option<i32> {
    let t = s.trim();
    if let Ok(n) = t.parse::<i32>() {
        return (1..=64).contains(&n).then_some(n);
    }
    let upper = t.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    (1..=31).find(|&n| signal_name(n) == name)
}

/// `process_exit_code_verbose` for a raw wait status; `None` while the
/// process has not ended.
pub fn exit_code(status: Option<i32>) -> Value {
    match status {
        None => json!({
            "status": ["PENDING"],
            "return_code": unset(),
            "signal": {"id": unset(), "name": ""},
        }),
        Some(st) => {
            let (code, sig) = slurm_proto::wait_status_pair(st);
            let core = st & 0x80 != 0;
            let status = if sig != 0 {
                if core {
                    "CORE_DUMPED"
                } else {
                    "SIGNALED"
                }
            } else if code == 0 {
                "SUCCESS"
            } else {
                "ERROR"
            };
            json!({
                "status": [status],
                "return_code": num(code),
                "signal": {
                    "id": if sig != 0 { num(sig) } else { unset() },
                    "name": if sig != 0 { signal_name(sig) } else { String::new() },
                },
            })
        }
    }
}

/// Job state list as v0.0.44 prints it: the base state, then flags.
pub fn job_state(j: &JobRecord) -> Vec<&'static str> {
    let mut v = vec![j.state.name()];
    if j.completing {
        v.push("COMPLETING");
    }
    v
}

/// Expands an output-file pattern of `job` as Slurm shows it (see
/// [`slurm_proto::stdpath::expand`]).
pub fn expand_std_path(pattern: &str, job: &JobRecord) -> String {
    slurm_proto::stdpath::expand(pattern, &job.pattern_job())
}

/// The file patterns of `StdOut`, `StdErr`, `StdIn` as the job keeps them
/// (see [`JobRecord::std_patterns`]).
pub fn job_std_patterns(j: &JobRecord) -> (String, String, String) {
    j.std_patterns()
}

fn rel_to_cwd(p: &str, j: &JobRecord) -> String {
    if p.starts_with('/') || j.desc.work_dir.is_empty() {
        p.to_string()
    } else {
        format!("{}/{}", j.desc.work_dir.trim_end_matches('/'), p)
    }
}

fn tres_str(cpus: u32, mem: u64, nodes: usize) -> String {
    let mut s = format!("cpu={cpus}");
    if mem > 0 {
        s.push_str(&format!(",mem={mem}M"));
    }
    s.push_str(&format!(",node={nodes},billing={cpus}"));
    s
}

fn csv(v: &[String]) -> String {
    v.join(",")
}

/// `job_info` (v0.0.44) for one job; `cluster` is `ClusterName`.
pub fn job_info(j: &JobRecord, cluster: &str) -> Value {
    let d = &j.desc;
    let alloc_cpus = j.alloc.total_cpus();
    let running_or_done = !j.alloc.nodes.is_empty();
    let cpus = if running_or_done {
        alloc_cpus
    } else {
        j.req_cpus
    };
    let node_count = if running_or_done {
        j.alloc.nodes.len() as u32
    } else {
        j.min_nodes
    };
    let (out_pat, err_pat, in_pat) = job_std_patterns(j);
    let mut flags: Vec<&str> = Vec::new();
    if d.external {
        flags.push("EXTERNAL_JOB");
    }
    if d.partition.is_none() {
        flags.push("USING_DEFAULT_PARTITION");
    }
    if d.account.is_none() {
        flags.push("USING_DEFAULT_ACCOUNT");
    }
    if d.qos.is_none() {
        flags.push("USING_DEFAULT_QOS");
    }
    let (array_job_id, array_task_id, array_max, array_str) = match &j.array {
        Some(a) => (
            num(a.job_id),
            num(a.task_id),
            num(a.max_running.unwrap_or(0)),
            String::new(),
        ),
        None => (num(0), unset(), num(0), String::new()),
    };
    let mem_alloc: u64 = j.alloc.mem.iter().sum();
    let req_mem = d
        .mem_per_node
        .map(|m| m * u64::from(j.min_nodes.max(1)))
        .or_else(|| d.mem_per_cpu.map(|m| m * u64::from(j.req_cpus)))
        .unwrap_or(0);
    let exit = j.state.is_finished().then_some(j.exit_status);
    let derived = if j.state.is_finished() {
        Some(j.steps.iter().map(|s| s.exit_status).fold(0, |a, b| {
            if slurm_proto::wait_status_pair(b) > slurm_proto::wait_status_pair(a) {
                b
            } else {
                a
            }
        }))
    } else {
        None
    };
    let shared: Vec<&str> = if d.exclusive {
        vec!["none"]
    } else if d.oversubscribe {
        vec!["oversubscribe"]
    } else {
        vec![]
    };
    let end_time = match (j.end_time, j.start_time, j.time_limit) {
        (Some(e), _, _) => Some(e),
        (None, Some(s), Some(l)) => Some(s + i64::from(l) * 60),
        _ => None,
    };
    let mut m = Map::new();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_string(), v);
    };
    put("account", json!(j.account));
    put("accrue_time", time(j.eligible_time));
    put(
        "admin_comment",
        json!(j.desc.admin_comment.clone().unwrap_or_default()),
    );
    put("allocating_node", json!(d.submit_host));
    put("array_job_id", array_job_id);
    put("array_task_id", array_task_id);
    put("array_max_tasks", array_max);
    put("array_task_string", json!(array_str));
    put("batch_features", json!(""));
    put("batch_flag", json!(j.batch));
    put(
        "batch_host",
        json!(j.batch_host.clone().unwrap_or_default()),
    );
    put("flags", json!(flags));
    put("burst_buffer", json!(""));
    put("burst_buffer_state", json!(""));
    put("cluster", json!(cluster));
    put("cluster_features", json!(""));
    put("command", json!(d.command.clone().unwrap_or_default()));
    put("comment", json!(d.comment.clone().unwrap_or_default()));
    put("container", json!(""));
    put("container_id", json!(""));
    put("contiguous", json!(false));
    put("core_spec", json!(0));
    put("thread_spec", json!(0));
    put("cores_per_socket", unset());
    put("billable_tres", num(f64::from(cpus)));
    put("cpus_per_task", num(d.cpus_per_task.unwrap_or(1)));
    put("cpu_frequency_minimum", unset());
    put("cpu_frequency_maximum", unset());
    put("cpu_frequency_governor", unset());
    put("cpus_per_tres", json!(""));
    put("cron", json!(""));
    put("deadline", num(d.deadline.unwrap_or(0)));
    put("delay_boot", num(0));
    put(
        "dependency",
        json!(j.dependency.clone().unwrap_or_default()),
    );
    put("derived_exit_code", exit_code(derived));
    put("eligible_time", time(j.eligible_time));
    put("end_time", time(end_time));
    put(
        "excluded_nodes",
        json!(slurm_common::hostlist::compress(&d.exc_nodes)),
    );
    put("exit_code", exit_code(exit));
    put("extra", json!(d.extra.clone().unwrap_or_default()));
    put("failed_node", json!(""));
    put("features", json!(""));
    put("federation_origin", json!(""));
    put("federation_siblings_active", json!(""));
    put("federation_siblings_viable", json!(""));
    put("gres_detail", json!([]));
    put("group_id", json!(j.group_id));
    put("group_name", json!(j.group_name));
    put("het_job_id", num(0));
    put("het_job_id_set", json!(""));
    put("het_job_offset", unset());
    put("job_id", json!(j.job_id));
    put("job_state", json!(job_state(j)));
    put("last_sched_evaluation", time(j.last_sched_eval));
    put("licenses", json!(""));
    put("licenses_allocated", json!(""));
    let mail_types: Vec<&str> = j
        .desc
        .mail_type
        .as_deref()
        .map(|t| t.split(',').collect())
        .unwrap_or_default();
    put("mail_type", json!(mail_types));
    put(
        "mail_user",
        json!(j.desc.mail_user.as_deref().unwrap_or(&j.user_name)),
    );
    put("max_cpus", num(0));
    put("max_nodes", num(j.max_nodes));
    put("mcs_label", json!(""));
    put("memory_per_tres", json!(""));
    put("name", json!(j.name));
    put("network", json!(""));
    put(
        "nodes",
        json!(slurm_common::hostlist::compress(&j.alloc.nodes)),
    );
    put("nice", json!(d.nice.unwrap_or(0)));
    put("tasks_per_core", d.ntasks_per_core.map_or_else(unset, num));
    put("tasks_per_tres", d.ntasks_per_gpu.map_or_else(unset, num));
    put("tasks_per_node", num(d.ntasks_per_node.unwrap_or(0)));
    put("tasks_per_socket", unset());
    put("tasks_per_board", num(0));
    put("cpus", num(cpus));
    put("node_count", num(node_count));
    put("tasks", num(j.num_tasks));
    put("partition", json!(j.partition));
    put("prefer", json!(""));
    put("memory_per_cpu", opt_num(d.mem_per_cpu));
    put("memory_per_node", opt_num(d.mem_per_node));
    put("minimum_cpus_per_node", num(d.cpus_per_task.unwrap_or(1)));
    put(
        "minimum_tmp_disk_per_node",
        num(j.desc.tmp_disk.unwrap_or(0)),
    );
    put("preempt_time", num(0));
    put("preemptable_time", num(0));
    put("pre_sus_time", num(j.secs_pre_suspend()));
    put("hold", json!(j.held.is_some()));
    put("priority", num(j.priority));
    put("priority_by_partition", json!([]));
    put("profile", json!(["NOT_SET"]));
    put("qos", json!(j.qos));
    put("reboot", json!(false));
    put(
        "required_nodes",
        json!(slurm_common::hostlist::compress(&d.req_nodes)),
    );
    put("required_switches", json!(0));
    put("requeue", json!(d.requeue.unwrap_or(true)));
    put("resize_time", num(0));
    put("restart_cnt", json!(j.restarts));
    put(
        "resv_name",
        json!(d.reservation.clone().unwrap_or_default()),
    );
    put("scheduled_nodes", json!(""));
    put("selinux_context", json!(""));
    put("shared", json!(shared));
    put("sockets_per_board", json!(0));
    put("sockets_per_node", unset());
    put("start_time", time(j.start_time));
    put("state_description", json!(""));
    put("state_reason", json!(j.reason.to_string()));
    put("standard_input", json!(rel_to_cwd(&in_pat, j)));
    put("standard_output", json!(rel_to_cwd(&out_pat, j)));
    put("standard_error", json!(rel_to_cwd(&err_pat, j)));
    put("stdin_expanded", json!(expand_std_path(&in_pat, j)));
    put("stdout_expanded", json!(expand_std_path(&out_pat, j)));
    put("stderr_expanded", json!(expand_std_path(&err_pat, j)));
    put("submit_time", time(Some(j.submit_time)));
    put("submit_line", json!(submit_line(j)));
    put("suspend_time", num(j.suspend_time.unwrap_or(0)));
    put("system_comment", json!(""));
    put("time_limit", limit(j.time_limit));
    put("time_minimum", num(d.time_min.unwrap_or(0)));
    put("threads_per_core", unset());
    put("tres_bind", json!(""));
    put("tres_freq", json!(""));
    put("tres_per_job", json!(""));
    put("tres_per_node", json!(""));
    put("tres_per_socket", json!(""));
    put(
        "tres_per_task",
        json!(slurm_proto::jobenv::job_tres_per_task(d).unwrap_or_default()),
    );
    put(
        "tres_req_str",
        json!(tres_str(j.req_cpus, req_mem, j.min_nodes as usize)),
    );
    put(
        "tres_alloc_str",
        json!(if running_or_done {
            tres_str(alloc_cpus, mem_alloc, j.alloc.nodes.len())
        } else {
            String::new()
        }),
    );
    put("user_id", json!(j.user_id));
    put("user_name", json!(j.user_name));
    put("maximum_switch_wait_time", json!(0));
    put("wckey", json!(d.wckey.clone().unwrap_or_default()));
    put("current_working_directory", json!(d.work_dir));
    Value::Object(m)
}

fn submit_line(j: &JobRecord) -> String {
    j.desc.command.clone().unwrap_or_default()
}

/// The small per-job object of `GET jobs/state/`.
pub fn job_state_info(j: &JobRecord) -> Value {
    let (aj, at) = match &j.array {
        Some(a) => (num(a.job_id), num(a.task_id)),
        None => (num(0), unset()),
    };
    json!({
        "job_id": j.job_id,
        "job_state": job_state(j),
        "array_job_id": aj,
        "array_task_id": at,
        "het_job_id": num(0),
    })
}

/// Per-node allocation of a job (`resources/{job_id}`:
/// `node_resource_layout`).
pub fn resource_layout(j: &JobRecord, nodes: &[NodeRecord]) -> Vec<Value> {
    j.alloc
        .nodes
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let node = nodes.iter().find(|n| &n.name == name);
            let mem = j.alloc.mem.get(i).copied().unwrap_or(0);
            let mut v = json!({
                "node": name,
                "mem_alloc": mem,
                "channel": unset(),
                "gres": [],
            });
            if let Some(n) = node {
                v["sockets_per_node"] = json!(n.sockets);
                v["cores_per_socket"] = json!(n.cores_per_socket);
            }
            v
        })
        .collect()
}

// ----------------------------------------------------------------- nodes

/// Node state list: the base state then its flags.
pub fn node_state(n: &NodeRecord) -> Vec<&'static str> {
    let mut v = vec![match n.base_state {
        NodeBaseState::Unknown => "UNKNOWN",
        NodeBaseState::Idle => "IDLE",
        NodeBaseState::Allocated => "ALLOCATED",
        NodeBaseState::Mixed => "MIXED",
        NodeBaseState::Down => "DOWN",
        NodeBaseState::Future => "FUTURE",
    }];
    if n.external {
        v.push("EXTERNAL");
    }
    if n.flags.completing {
        v.push("COMPLETING");
    }
    if n.flags.drain {
        v.push("DRAIN");
    }
    if n.flags.maint {
        v.push("MAINTENANCE");
    }
    if n.flags.reserved {
        v.push("RESERVED");
    }
    if n.flags.reboot_requested {
        v.push("REBOOT_REQUESTED");
    }
    if n.flags.reboot_issued {
        v.push("REBOOT_ISSUED");
    }
    if n.flags.not_responding {
        v.push("NOT_RESPONDING");
    }
    v
}

/// `node` (v0.0.44) for one node.
/// `cluster` is accepted for symmetry with the other writers; Slurm fills
/// `cluster_name` only in federations, so it stays empty.
pub fn node_info(n: &NodeRecord, _cluster: &str) -> Value {
    let cores = n.cores_per_socket.max(1);
    let tres = format!("cpu={},mem={}M,billing={}", n.cpus, n.real_memory, n.cpus);
    let tres_used = if n.alloc_cpus > 0 || n.alloc_mem > 0 {
        let mut s = format!("cpu={}", n.alloc_cpus);
        if n.alloc_mem > 0 {
            s.push_str(&format!(",mem={}M", n.alloc_mem));
        }
        s
    } else {
        String::new()
    };
    let reason_user = n
        .reason_uid
        .map(slurm_common::users::user_name_or_id)
        .unwrap_or_default();
    json!({
        "architecture": n.arch.clone().unwrap_or_default(),
        "burstbuffer_network_address": "",
        "boards": n.boards,
        "boot_time": time(n.boot_time),
        "tls_cert_last_renewal": num(0),
        "cert_flags": [],
        "cluster_name": "",
        "cores": cores,
        "specialized_cores": 0,
        "cpu_binding": 0,
        "cpu_load": n.cpu_load.map(|l| (l * 100.0).round() as i64).unwrap_or(0),
        "free_mem": opt_num(n.free_mem),
        "cpus": n.cpus,
        "effective_cpus": n.cpus,
        "specialized_cpus": "",
        "energy": {
            "average_watts": 0,
            "base_consumed_energy": 0,
            "consumed_energy": 0,
            "current_watts": unset(),
            "previous_consumed_energy": 0,
            "last_collected": 0,
        },
        "external_sensors": {},
        "extra": "",
        "power": {},
        "features": n.features,
        "active_features": n.features,
        "gpu_spec": "",
        "gres": csv(&n.gres),
        "gres_drained": "N/A",
        "gres_used": "",
        "instance_id": "",
        "instance_type": "",
        "last_busy": time(n.last_busy),
        "mcs_label": "",
        "specialized_memory": 0,
        "name": n.name,
        "next_state_after_reboot": ["INVALID"],
        "address": n.addr,
        "hostname": n.hostname,
        "state": node_state(n),
        "operating_system": n.os.clone().unwrap_or_default(),
        "owner": "",
        "partitions": n.partitions,
        "port": n.port,
        "real_memory": n.real_memory,
        "res_cores_per_gpu": 0,
        "comment": "",
        "reason": n.reason.clone().unwrap_or_default(),
        "reason_changed_at": time(n.reason_time),
        "reason_set_by_user": reason_user,
        "resume_after": unset(),
        "reservation": "",
        "alloc_memory": n.alloc_mem,
        "alloc_cpus": n.alloc_cpus,
        "alloc_idle_cpus": n.cpus.saturating_sub(n.alloc_cpus),
        "tres_used": tres_used,
        "tres_weighted": 0.0,
        "slurmd_start_time": time(n.slurmd_start_time),
        "sockets": n.sockets,
        "threads": n.threads_per_core,
        "temporary_disk": n.tmp_disk,
        "weight": n.weight,
        "topology": "",
        "tres": tres,
        "version": n.version.clone().unwrap_or_default(),
    })
}

// ------------------------------------------------------------ partitions

fn opt_str(s: &Option<String>) -> String {
    s.clone().unwrap_or_default()
}

/// `partition_info` (v0.0.44) for one partition.
pub fn partition_info(p: &PartitionRecord, cluster: &str) -> Value {
    let state = match p.state {
        PartitionState::Up => "UP",
        PartitionState::Down => "DOWN",
        PartitionState::Drain => "DRAIN",
        PartitionState::Inactive => "INACTIVE",
    };
    let (os_jobs, os_flags): (u32, Vec<&str>) = {
        let o = p.oversubscribe.to_ascii_uppercase();
        let (kind, n) = match o.split_once(':') {
            Some((k, n)) => (k.to_string(), n.parse().unwrap_or(4)),
            None => (o.clone(), if o == "NO" || o == "EXCLUSIVE" { 1 } else { 4 }),
        };
        (
            n,
            if kind == "FORCE" {
                vec!["force"]
            } else {
                vec![]
            },
        )
    };
    let def_mem = p.def_mem_per_cpu;
    json!({
        "nodes": {
            "allowed_allocation": "",
            "configured": p.nodes_expr,
            "total": p.nodes.len(),
        },
        "accounts": {"allowed": opt_str(&p.allow_accounts), "deny": ""},
        "groups": {"allowed": opt_str(&p.allow_groups)},
        "qos": {"allowed": opt_str(&p.allow_qos), "deny": "", "assigned": ""},
        "alternate": "",
        "tres": {
            "billing_weights": "",
            "configured": format!(
                "cpu={},mem={}M,node={},billing={}",
                p.total_cpus, p.total_mem, p.nodes.len(), p.total_cpus
            ),
        },
        "cluster": cluster,
        "select_type": [],
        "cpus": {"task_binding": 0, "total": p.total_cpus},
        "defaults": {
            "memory_per_cpu": def_mem.unwrap_or(0),
            "partition_memory_per_cpu": opt_num(def_mem),
            "partition_memory_per_node": unset(),
            "time": match p.default_time {
                Some(t) => num(t),
                None => unset(),
            },
            "job": "",
        },
        "grace_time": 0,
        "maximums": {
            "cpus_per_node": infinite(),
            "cpus_per_socket": infinite(),
            "memory_per_cpu": p.max_mem_per_node.unwrap_or(0),
            "partition_memory_per_cpu": unset(),
            "partition_memory_per_node": opt_num(p.max_mem_per_node),
            "nodes": limit(p.max_nodes),
            "shares": os_jobs,
            "oversubscribe": {"jobs": os_jobs, "flags": os_flags},
            "time": limit(p.max_time),
            "over_time_limit": unset(),
        },
        "minimums": {"nodes": p.min_nodes},
        "name": p.name,
        "node_sets": "",
        "priority": {"job_factor": p.priority_job_factor, "tier": p.priority_tier},
        "timeouts": {"resume": unset(), "suspend": unset()},
        "topology": "",
        "partition": {"state": [state]},
        "suspend_time": unset(),
    })
}

// ---------------------------------------------------------- reservations

/// `reservation_info` (v0.0.44) for one reservation.
pub fn reservation_info(r: &ReservationRecord) -> Value {
    let known: Vec<String> = r
        .flags
        .iter()
        .map(|f| f.to_ascii_uppercase())
        .filter(|f| RESERVATION_FLAGS.contains(&f.as_str()))
        .collect();
    json!({
        "accounts": r.accounts.join(","),
        "burst_buffer": "",
        "core_count": r.core_cnt,
        "end_time": time(Some(r.end_time)),
        "features": "",
        "flags": known,
        "groups": "",
        "licenses": "",
        "max_start_delay": 0,
        "name": r.name,
        "node_count": r.nodes.len(),
        "node_list": slurm_common::hostlist::compress(&r.nodes),
        "partition": opt_str(&r.partition),
        "purge_completed": {"time": unset()},
        "start_time": time(Some(r.start_time)),
        "watts": unset(),
        "tres": format!("cpu={}", r.core_cnt),
        "users": r.users.join(","),
    })
}

/// `reservation_desc_msg` (v0.0.44) echoing a create/update request.
pub fn reservation_desc(r: &slurm_proto::ReservationSpec) -> Value {
    let mut m = Map::new();
    if let Some(n) = &r.name {
        m.insert("name".into(), json!(n));
    }
    if let Some(t) = r.start_time {
        m.insert("start_time".into(), num(t));
    }
    if let Some(t) = r.end_time {
        m.insert("end_time".into(), num(t));
    }
    if let Some(d) = r.duration {
        m.insert("duration".into(), num(d));
    }
    if let Some(n) = &r.nodes {
        m.insert("node_list".into(), json!(n));
    }
    if let Some(c) = r.node_cnt {
        m.insert("node_count".into(), num(c));
    }
    if let Some(u) = &r.users {
        m.insert("users".into(), json!(u));
    }
    if let Some(a) = &r.accounts {
        m.insert("accounts".into(), json!(a));
    }
    if let Some(p) = &r.partition {
        m.insert("partition".into(), json!(p));
    }
    if let Some(f) = &r.flags {
        m.insert("flags".into(), json!(f));
    }
    Value::Object(m)
}

/// Reservation flags the v0.0.44 schema names.
pub const RESERVATION_FLAGS: &[&str] = &[
    "MAINT",
    "NO_MAINT",
    "DAILY",
    "NO_DAILY",
    "WEEKLY",
    "NO_WEEKLY",
    "IGNORE_JOBS",
    "NO_IGNORE_JOBS",
    "ANY_NODES",
    "NO_ANY_NODES",
    "STATIC",
    "NO_STATIC",
    "PART_NODES",
    "NO_PART_NODES",
    "OVERLAP",
    "SPEC_NODES",
    "TIME_FLOAT",
    "REPLACE",
    "ALL_NODES",
    "PURGE_COMP",
    "WEEKDAY",
    "NO_WEEKDAY",
    "WEEKEND",
    "NO_WEEKEND",
    "FLEX",
    "NO_FLEX",
    "DURATION_PLUS",
    "DURATION_MINUS",
    "NO_HOLD_JOBS_AFTER_END",
    "REPLACE_DOWN",
    "NO_PURGE_COMP",
    "MAGNETIC",
    "NO_MAGNETIC",
    "SKIP",
    "HOURLY",
    "NO_HOURLY",
    "USER_DELETE",
    "FORCE_START",
    "NO_USER_DELETE",
    "REOCCURRING",
    "TRES_PER_NODE",
];

/// Whether the job has not ended (pending, running or suspended).
pub fn is_active(j: &JobRecord) -> bool {
    matches!(
        j.state,
        JobState::Pending | JobState::Running | JobState::Suspended
    )
}

/// The `shares` object of `GET shares` (and `sshare --json`): the fair-share
/// rows, parents found from the tree order, filtered by account and user.
pub fn shares_info(
    rows: &[slurm_proto::ShareInfo],
    cluster: &str,
    accounts: &[String],
    users: &[String],
) -> Value {
    let f64num = |v: Option<f64>| match v {
        Some(x) if x.is_finite() && x < f64::MAX => num(x),
        Some(_) => infinite(),
        None => unset(),
    };
    // Parents from the tree order: the nearest shallower account row.
    let mut stack: Vec<String> = Vec::new();
    let mut out = Vec::new();
    let mut total = 0u64;
    for (i, s) in rows.iter().enumerate() {
        stack.truncate(s.depth as usize);
        let parent = if s.user.is_some() {
            s.account.clone()
        } else {
            stack.last().cloned().unwrap_or_default()
        };
        if s.user.is_none() {
            stack.push(s.account.clone());
        }
        let keep = (accounts.is_empty() || accounts.contains(&s.account))
            && (users.is_empty() || s.user.as_ref().is_some_and(|u| users.contains(u)));
        let raw: Option<u32> = s.raw_shares.parse().ok();
        if s.depth == 1 {
            total += u64::from(raw.unwrap_or(0));
        }
        if !keep {
            continue;
        }
        let tres = |vals: &[u64]| -> Vec<Value> {
            s.tres_names
                .iter()
                .zip(vals)
                .map(|(n, v)| {
                    let value = if *v == u64::MAX { infinite() } else { num(*v) };
                    json!({"name": n, "value": value})
                })
                .collect()
        };
        out.push(json!({
            // The association's id (the row's place without accounting).
            "id": s.assoc_id.unwrap_or(i as u64),
            "cluster": cluster,
            "name": s.user.clone().unwrap_or_else(|| s.account.clone()),
            "tres": {
                "run_seconds": tres(&s.tres_run_secs),
                "group_minutes": tres(&s.tres_grp_mins),
            },
            "parent": parent,
            "partition": s.partition.clone().unwrap_or_default(),
            "shares_normalized": f64num(Some(s.norm_shares)),
            "shares": match raw { Some(r) => num(r), None => unset() },
            "effective_usage": f64num(Some(s.effective_usage)),
            "usage_normalized": f64num(Some(s.norm_usage)),
            "usage": s.raw_usage.max(0.0).round() as i64,
            "fairshare": {"factor": f64num(s.fairshare), "level": f64num(s.level_fs)},
            "type": [if s.user.is_some() { "USER" } else { "ASSOCIATION" }],
        }));
    }
    json!({"shares": out, "total_shares": total})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_carry_the_association_id_and_tres_lists() {
        let row = slurm_proto::ShareInfo {
            account: "phys".into(),
            user: Some("alice".into()),
            depth: 2,
            assoc_id: Some(4),
            tres_names: vec!["cpu".into(), "mem".into()],
            tres_grp_mins: vec![600, u64::MAX],
            tres_run_secs: vec![720, 0],
            ..Default::default()
        };
        let v = shares_info(&[row], "c", &[], &[]);
        let s = &v["shares"][0];
        assert_eq!(s["id"], 4);
        assert_eq!(s["tres"]["run_seconds"][0]["name"], "cpu");
        assert_eq!(s["tres"]["run_seconds"][0]["value"]["number"], 720);
        assert_eq!(s["tres"]["group_minutes"][0]["value"]["number"], 600);
        assert_eq!(s["tres"]["group_minutes"][1]["value"]["infinite"], true);
    }

    #[test]
    fn numbers_and_exit_codes() {
        assert_eq!(num(5)["number"], 5);
        assert_eq!(unset()["set"], false);
        assert_eq!(infinite()["infinite"], true);
        assert_eq!(limit(None)["infinite"], true);
        let e = exit_code(Some(2 << 8));
        assert_eq!(e["status"], json!(["ERROR"]));
        assert_eq!(e["return_code"]["number"], 2);
        let e = exit_code(Some(9));
        assert_eq!(e["status"], json!(["SIGNALED"]));
        assert_eq!(e["signal"]["name"], "KILL");
        assert_eq!(exit_code(Some(0))["status"], json!(["SUCCESS"]));
        assert_eq!(exit_code(None)["status"], json!(["PENDING"]));
        assert_eq!(parse_signal("SIGTERM"), Some(15));
        assert_eq!(parse_signal("usr1"), Some(libc::SIGUSR1));
        assert_eq!(parse_signal("9"), Some(9));
        assert_eq!(parse_signal("0"), None);
        assert_eq!(parse_signal("BOGUS"), None);
    }

    #[test]
    fn meta_names_the_version() {
        let m = meta("c", None, &[]);
        assert_eq!(m["slurm"]["release"], SLURM_VERSION);
        assert_eq!(m["plugin"]["data_parser"], DATA_PARSER);
    }
}
