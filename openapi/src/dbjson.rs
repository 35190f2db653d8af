//! `slurmdb/v0.0.44` bodies from slurmdbd's records: jobs and steps,
//! accounts, users, associations, QOS, clusters and TRES. Used by the
//! `slurmdb` handlers and by `sacct --json` / `sacctmgr --json`.

use crate::openapi::{exit_code, infinite, limit, num, opt_num, unset};
use serde_json::{json, Value};
use slurm_proto::acct::{
    AccountRec, AcctJob, AcctStep, AssocLimits, AssocRec, ClusterRec, DbdStats, JobRow, QosLimits,
    QosRec, RollupLevel, RpcCount, UserRec,
};

/// Slurm's fixed TRES and their ids.
pub const BUILTIN_TRES: [(&str, u32); 8] = [
    ("cpu", 1),
    ("mem", 2),
    ("energy", 3),
    ("node", 4),
    ("billing", 5),
    ("fs/disk", 6),
    ("vmem", 7),
    ("pages", 8),
];

/// One TRES entry: `gres/gpu` is type `gres`, name `gpu`.
pub fn tres(name: &str, count: Option<u64>) -> Value {
    let (ty, nm) = match name.split_once('/') {
        Some((t, n)) if !BUILTIN_TRES.iter().any(|b| b.0 == name) => (t, n),
        _ => (name, ""),
    };
    let mut v = json!({"type": ty, "name": nm});
    if let Some(id) = BUILTIN_TRES.iter().find(|b| b.0 == name).map(|b| b.1) {
        v["id"] = json!(id);
    }
    if let Some(c) = count {
        v["count"] = json!(c);
    }
    v
}

/// A TRES string (`cpu=4,mem=2000M,gres/gpu=1`) as a TRES list; memory
/// counts in MiB.
pub fn tres_list(s: &str) -> Vec<Value> {
    s.split(',')
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .filter_map(|item| {
            let (name, value) = item.split_once('=')?;
            let digits = value.chars().take_while(|c| c.is_ascii_digit()).count();
            let n: u64 = value[..digits].parse().ok()?;
            let mult = match value[digits..].to_ascii_uppercase().as_str() {
                "G" => 1024,
                "T" => 1024 * 1024,
                "P" => 1024 * 1024 * 1024,
                _ => 1,
            };
            Some(tres(name.trim(), Some(n.saturating_mul(mult))))
        })
        .collect()
}

fn secs_usecs(usec: u64) -> Value {
    json!({"seconds": usec / 1_000_000, "microseconds": usec % 1_000_000})
}

fn step_id(job: u32, step: u32) -> String {
    match step {
        slurm_proto::BATCH_STEP => format!("{job}.batch"),
        slurm_proto::EXTERN_STEP => format!("{job}.extern"),
        s => format!("{job}.{s}"),
    }
}

/// One step of `job`.
pub fn step(s: &AcctStep, now: i64) -> Value {
    let end = s.end_time;
    let elapsed = end.unwrap_or(now).saturating_sub(s.start_time).max(0);
    let nodes = slurm_common::hostlist::expand(&s.nodelist).unwrap_or_default();
    json!({
        "time": {
            "elapsed": elapsed,
            "end": opt_num(end),
            "start": num(s.start_time),
            "suspended": 0,
            "system": secs_usecs(s.sys_cpu_usec),
            "total": secs_usecs(s.total_cpu_usec),
            "user": secs_usecs(s.user_cpu_usec),
            "limit": unset(),
        },
        "exit_code": exit_code(end.map(|_| s.exit_status)),
        "nodes": {"count": s.node_count, "range": s.nodelist, "list": nodes},
        "tasks": {"count": s.ntasks},
        "state": [s.state.0.name()],
        "step": {"id": step_id(s.job_id, s.step_id), "name": s.name},
        "tres": {
            "allocated": tres_list(&s.alloc_tres),
            "consumed": {
                "max": if s.max_rss_kib > 0 {
                    vec![json!({
                        "type": "mem", "name": "", "id": 2,
                        "count": s.max_rss_kib.saturating_mul(1024),
                        "node": s.max_rss_node, "task": 0,
                    })]
                } else {
                    Vec::new()
                },
            },
        },
    })
}

fn user_name(uid: u32) -> String {
    slurm_common::users::user_name_or_id(uid)
}

/// slurmrestd's names for [`AcctJob::flags`].
fn job_flags(j: &AcctJob) -> Vec<&'static str> {
    j.flags()
        .into_iter()
        .filter_map(|f| match slurm_proto::SchedFlag::from_name(f) {
            Some(s) => Some(s.rest_name()),
            None => (f == "StartReceived").then_some("START_RECEIVED"),
        })
        .collect()
}

/// A job as `GET slurmdb/v0.0.44/jobs` lists it (`now` for the elapsed time
/// of jobs still running).
pub fn job(row: &JobRow, now: i64) -> Value {
    let j: &AcctJob = &row.job;
    let ended = j.state.0.is_finished() && j.end_time.is_some();
    let [out_x, err_x, in_x] =
        j.expanded_std(slurm_common::hostlist::first(&j.nodelist).as_deref());
    let elapsed = match j.start_time {
        Some(s) => (j.end_time.unwrap_or(now).saturating_sub(s) - j.suspended_by(now)).max(0),
        None => 0,
    };
    let sum = |f: fn(&AcctStep) -> u64| row.steps.iter().map(f).sum::<u64>();
    let (array_job, array_task) = match (j.array_job_id, j.array_task_id) {
        (Some(a), Some(t)) => (json!(a), num(t)),
        _ => (json!(0), unset()),
    };
    json!({
        "account": j.account,
        "comment": {"administrator": "", "job": j.comment, "system": ""},
        "wckey": {"wckey": j.wckey, "flags": []},
        "allocation_nodes": j.node_count,
        "array": {
            "job_id": array_job,
            "limits": {"max": {"running": {"tasks": 0}}},
            "task_id": array_task,
            "task": "",
        },
        "association": {
            "account": j.account,
            "cluster": row.cluster,
            "partition": "",
            "user": j.user,
        },
        "cluster": row.cluster,
        "constraints": j.constraints,
        "derived_exit_code": exit_code(ended.then_some(j.exit_status)),
        "time": {
            "elapsed": elapsed,
            "eligible": j.eligible_time.unwrap_or(j.submit_time),
            "end": j.end_time.unwrap_or(0),
            "planned": match j.start_time {
                Some(s) => num(s.saturating_sub(j.eligible_time.unwrap_or(j.submit_time)).max(0)),
                None => unset(),
            },
            "start": j.start_time.unwrap_or(0),
            "submission": j.submit_time,
            "suspended": j.suspended_by(now),
            "system": secs_usecs(sum(|s| s.sys_cpu_usec)),
            "limit": limit(j.time_limit),
            "total": secs_usecs(sum(|s| s.total_cpu_usec)),
            "user": secs_usecs(sum(|s| s.user_cpu_usec)),
        },
        "exit_code": exit_code(ended.then_some(j.exit_status)),
        "failed_node": j.failed_node,
        "flags": job_flags(j),
        "group": j.group,
        "job_id": j.job_id,
        "name": j.name,
        "nodes": if j.nodelist.is_empty() { "None assigned" } else { j.nodelist.as_str() },
        "partition": j.partition,
        "hold": false,
        "priority": num(j.priority),
        "qos": j.qos,
        "required": {
            "CPUs": j.req_cpus,
            "memory_per_cpu": unset(),
            "memory_per_node": num(j.req_mem),
        },
        "kill_request_user": j.requid.map(user_name).unwrap_or_default(),
        "reservation": {"name": j.reservation, "requested": j.reservation},
        "restart_cnt": j.restarts,
        "state": {
            "current": [j.state.0.name()],
            "reason": if j.reason.is_empty() { "None" } else { j.reason.as_str() },
        },
        "stdin": j.std_in,
        "stdout": j.std_out,
        "stderr": j.std_err,
        "stdin_expanded": in_x,
        "stdout_expanded": out_x,
        "stderr_expanded": err_x,
        "steps": row.steps.iter().map(|s| step(s, now)).collect::<Vec<_>>(),
        "submit_line": j.submit_line,
        "tres": {"allocated": tres_list(&j.alloc_tres), "requested": tres_list(&j.req_tres)},
        "user": j.user,
        "working_directory": j.work_dir,
    })
}

/// An association in short (`assoc_short`).
pub fn assoc_short(a: &AssocRec) -> Value {
    json!({
        "account": a.account,
        "cluster": a.cluster,
        "partition": a.partition,
        "user": a.user,
        "id": a.id,
    })
}

fn count(v: Option<u64>) -> Value {
    match v {
        Some(n) => num(n),
        None => infinite(),
    }
}

fn tres_opt(v: &Option<String>) -> Vec<Value> {
    v.as_deref().map(tres_list).unwrap_or_default()
}

fn assoc_max(l: &AssocLimits) -> Value {
    json!({
        "jobs": {
            "per": {
                "count": count(l.max_jobs),
                "accruing": infinite(),
                "submitted": count(l.max_submit_jobs),
                "wall_clock": count(l.max_wall),
            },
            "active": count(l.grp_jobs),
            "accruing": infinite(),
            "total": count(l.grp_submit_jobs),
        },
        "tres": {
            "total": tres_opt(&l.grp_tres),
            "group": {"minutes": tres_opt(&l.grp_tres_mins), "active": []},
            "minutes": {"total": [], "per": {"job": tres_opt(&l.max_tres_mins)}},
            "per": {"job": tres_opt(&l.max_tres), "node": []},
        },
        "per": {"account": {"wall_clock": count(l.grp_wall)}},
    })
}

/// An association. `default_of(user)` is the user's default account.
pub fn assoc(a: &AssocRec, is_default: bool) -> Value {
    let lineage = match &a.parent {
        Some(p) if a.user.is_empty() => format!("/{p}/{}/", a.account),
        _ => String::new(),
    };
    json!({
        "account": a.account,
        "cluster": a.cluster,
        "comment": "",
        "default": {"qos": a.default_qos.clone().unwrap_or_default()},
        "flags": [],
        "max": assoc_max(&a.limits),
        "id": a.id,
        "is_default": is_default,
        "lineage": lineage,
        "parent_account": a.parent.clone().unwrap_or_default(),
        "partition": a.partition,
        "priority": unset(),
        "qos": a.qos,
        "shares_raw": a.shares,
        "user": a.user,
    })
}

/// An account and, when given, its associations.
pub fn account(a: &AccountRec, assocs: &[&AssocRec]) -> Value {
    json!({
        "associations": assocs.iter().map(|x| assoc_short(x)).collect::<Vec<_>>(),
        "coordinators": a
            .coordinators
            .iter()
            .map(|u| json!({"name": u, "direct": true}))
            .collect::<Vec<_>>(),
        "description": a.description,
        "name": a.name,
        "organization": a.organization,
        "flags": [],
    })
}

/// A user and, when given, their associations.
pub fn user(u: &UserRec, assocs: &[&AssocRec]) -> Value {
    json!({
        "administrator_level": [u.admin_level.name()],
        "associations": assocs.iter().map(|x| assoc_short(x)).collect::<Vec<_>>(),
        // The accounts coordinated, sub-accounts included.
        "coordinators": u
            .coord_accounts
            .iter()
            .map(|a| json!({"name": a, "direct": u.coord_direct.contains(a)}))
            .collect::<Vec<_>>(),
        "default": {"account": u.default_account, "wckey": ""},
        "flags": [],
        "name": u.name,
        "wckeys": [],
    })
}

/// QOS flag names as the API spells them (ours are sacctmgr's).
fn qos_flag(f: &str) -> Option<&'static str> {
    Some(match f.to_ascii_lowercase().as_str() {
        "denyonlimit" => "DENY_LIMIT",
        "nodecay" => "NO_DECAY",
        "noreserve" => "NO_RESERVE",
        "overpartqos" => "OVERRIDE_PARTITION_QOS",
        "partitionminnodes" => "PARTITION_MINIMUM_NODE",
        "partitionmaxnodes" => "PARTITION_MAXIMUM_NODE",
        "partitiontimelimit" => "PARTITION_TIME_LIMIT",
        "requiresreservation" => "REQUIRED_RESERVATION",
        "enforceusagethreshold" => "ENFORCE_USAGE_THRESHOLD",
        "usagefactorsafe" => "USAGE_FACTOR_SAFE",
        "relative" => "RELATIVE",
        _ => return None,
    })
}

fn qos_limits(l: &QosLimits, grace: u32, factor: f64) -> Value {
    json!({
        "grace_time": grace,
        "max": {
            "active_jobs": {"accruing": infinite(), "count": count(l.grp_jobs)},
            "jobs": {
                "count": count(l.grp_submit_jobs),
                "active_jobs": {"per": {
                    "account": count(l.max_jobs_per_account),
                    "user": count(l.max_jobs_per_user),
                }},
                "per": {
                    "account": count(l.max_submit_jobs_per_account),
                    "user": count(l.max_submit_jobs_per_user),
                },
            },
            "tres": {
                "total": tres_opt(&l.grp_tres),
                "minutes": {"total": tres_opt(&l.grp_tres_mins), "per": {}},
                "per": {
                    "account": tres_opt(&l.max_tres_per_account),
                    "job": tres_opt(&l.max_tres_per_job),
                    "node": tres_opt(&l.max_tres_per_node),
                    "user": tres_opt(&l.max_tres_per_user),
                },
            },
            "wall_clock": {"per": {"qos": count(l.grp_wall), "job": count(l.max_wall)}},
        },
        "factor": {"set": true, "infinite": false, "number": factor},
        "min": {"tres": {"per": {"job": tres_opt(&l.min_tres_per_job)}}},
    })
}

/// A QOS; `names` maps QOS names to ids for its preempt list.
pub fn qos(q: &QosRec) -> Value {
    let mode = match q.preempt_mode.to_ascii_uppercase().as_str() {
        "" | "CLUSTER" | "OFF" => vec!["DISABLED".to_string()],
        m => m.split(',').map(str::to_string).collect(),
    };
    json!({
        "description": q.description,
        "flags": q.flags.iter().filter_map(|f| qos_flag(f)).collect::<Vec<_>>(),
        "id": q.id,
        "limits": qos_limits(&q.limits, q.grace_time, q.usage_factor),
        "name": q.name,
        "preempt": {"list": q.preempt, "mode": mode, "exempt_time": unset()},
        "priority": num(q.priority),
        "usage_factor": {"set": true, "infinite": false, "number": q.usage_factor},
        "usage_threshold": unset(),
    })
}

/// A cluster; `root` is its root association when known.
pub fn cluster(c: &ClusterRec, root: Option<&AssocRec>) -> Value {
    let mut v = json!({
        "controller": {"host": c.control_host, "port": c.control_port},
        "flags": [],
        "name": c.name,
        "nodes": "",
        "select_plugin": "",
        "rpc_version": c.rpc_version,
        "tres": tres_list(&c.tres),
    });
    if let Some(r) = root {
        v["associations"] = json!({"root": assoc_short(r)});
    }
    v
}

/// The TRES the clusters have: Slurm's fixed ones, then the typed ones any
/// cluster reports (counts summed over the clusters).
pub fn tres_table(clusters: &[ClusterRec]) -> Vec<Value> {
    let mut totals: std::collections::BTreeMap<String, u64> = Default::default();
    for c in clusters {
        for t in tres_list(&c.tres) {
            let name = match (t["type"].as_str(), t["name"].as_str()) {
                (Some(ty), Some("")) | (Some(ty), None) => ty.to_string(),
                (Some(ty), Some(n)) => format!("{ty}/{n}"),
                _ => continue,
            };
            *totals.entry(name).or_default() += t["count"].as_u64().unwrap_or(0);
        }
    }
    let mut out: Vec<Value> = BUILTIN_TRES
        .iter()
        .map(|(n, _)| tres(n, Some(totals.get(*n).copied().unwrap_or(0))))
        .collect();
    out.extend(
        totals
            .iter()
            .filter(|(n, _)| !BUILTIN_TRES.iter().any(|b| b.0 == n.as_str()))
            .map(|(n, c)| tres(n, Some(*c))),
    );
    out
}

fn rollup_level(l: &RollupLevel) -> Value {
    // The document counts rollup time in seconds.
    json!({
        "count": l.count,
        "last_run": l.last_run,
        "duration": {
            "last": l.last_us / 1_000_000,
            "max": l.max_us / 1_000_000,
            "time": l.total_us / 1_000_000,
        },
    })
}

fn rpc_counts(v: &[RpcCount], key: &str) -> Vec<Value> {
    v.iter()
        .map(|r| {
            json!({
                key: r.name,
                "count": r.count,
                "time": {"average": r.total_us / r.count.max(1), "total": r.total_us},
            })
        })
        .collect()
}

/// slurmdbd's statistics (`slurmdb/v0.0.44/diag`).
pub fn stats(s: &DbdStats) -> Value {
    json!({
        "time_start": s.time_start,
        "rollups": {
            "hourly": rollup_level(&s.hourly),
            "daily": rollup_level(&s.daily),
            "monthly": rollup_level(&s.monthly),
        },
        "RPCs": rpc_counts(&s.rpcs, "rpc"),
        "users": rpc_counts(&s.users, "user"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tres_strings() {
        let l = tres_list("cpu=4,mem=2G,node=1,gres/gpu=2");
        assert_eq!(
            l[0],
            json!({"type": "cpu", "name": "", "id": 1, "count": 4})
        );
        assert_eq!(l[1]["count"], json!(2048));
        assert_eq!(l[3], json!({"type": "gres", "name": "gpu", "count": 2}));
        assert!(tres_list("").is_empty());
        let t = tres_table(&[ClusterRec {
            tres: "cpu=8,mem=100M,node=2,billing=8,gres/gpu=4".into(),
            ..Default::default()
        }]);
        assert_eq!(t.len(), 9);
        assert_eq!(t[0]["count"], json!(8));
        assert_eq!(t[8]["name"], json!("gpu"));
    }

    #[test]
    fn coordinators_in_users_and_accounts() {
        let u = user(
            &UserRec {
                name: "ann".into(),
                coord_accounts: vec!["lab".into(), "phys".into()],
                coord_direct: vec!["phys".into()],
                ..Default::default()
            },
            &[],
        );
        assert_eq!(
            u["coordinators"],
            json!([{"name": "lab", "direct": false}, {"name": "phys", "direct": true}])
        );
        let a = account(
            &AccountRec {
                name: "phys".into(),
                coordinators: vec!["ann".into()],
                ..Default::default()
            },
            &[],
        );
        assert_eq!(a["coordinators"], json!([{"name": "ann", "direct": true}]));
    }

    #[test]
    fn a_finished_job_and_its_steps() {
        let row = JobRow {
            cluster: "c".into(),
            job: AcctJob {
                job_id: 7,
                state: slurm_proto::JobState::Completed.into(),
                submit_time: 100,
                start_time: Some(110),
                end_time: Some(170),
                nodelist: "n[1-2]".into(),
                node_count: 2,
                ..Default::default()
            },
            steps: vec![AcctStep {
                job_id: 7,
                step_id: slurm_proto::BATCH_STEP,
                start_time: 110,
                end_time: Some(170),
                nodelist: "n1".into(),
                total_cpu_usec: 2_500_000,
                ..Default::default()
            }],
        };
        let v = job(&row, 1000);
        assert_eq!(v["time"]["elapsed"], json!(60));
        assert_eq!(
            v["time"]["total"],
            json!({"seconds": 2, "microseconds": 500000})
        );
        assert_eq!(v["state"]["current"], json!(["COMPLETED"]));
        assert_eq!(v["exit_code"]["status"], json!(["SUCCESS"]));
        assert_eq!(v["steps"][0]["step"]["id"], json!("7.batch"));
        assert_eq!(v["steps"][0]["nodes"]["list"], json!(["n1"]));
    }
}
