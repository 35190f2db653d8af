//! Mock execution (`slurmd --mock[=SECONDS]`): batch jobs run no process.
//! Each "runs" for its time limit, or the mock duration when shorter, or the
//! job environment's `SLURM_MOCK_RUNTIME` seconds when set, then reports
//! success; `TerminateJob` ends it early (as if killed by SIGTERM). With a
//! hostlist for `-N`, one process stands in for many nodes, so the
//! controller can be driven at thousands of nodes on two cores.

use crate::ctld_link::OutMsg;
use crate::daemon::Ctx;
use slurm_proto::{BatchLaunch, JobId, Response};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::oneshot;

static MODE: OnceLock<Option<u64>> = OnceLock::new();

type Table = HashMap<(String, JobId), oneshot::Sender<()>>;
static JOBS: LazyLock<Mutex<Table>> = LazyLock::new(|| Mutex::new(HashMap::new()));

fn jobs() -> std::sync::MutexGuard<'static, Table> {
    JOBS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Turn mock execution on for this process (once, at start-up).
pub fn enable(secs: Option<u64>) {
    let _ = MODE.set(secs);
}

/// `Some(limit)` when mock execution is on.
pub fn mode() -> Option<Option<u64>> {
    MODE.get().copied()
}

/// How long a mock job runs: `None` = until terminated.
pub fn runtime(l: &BatchLaunch, mock: Option<u64>) -> Option<u64> {
    let from_env = l
        .environment
        .iter()
        .find_map(|kv| kv.strip_prefix("SLURM_MOCK_RUNTIME="))
        .and_then(|v| v.parse::<u64>().ok());
    let limit = l.time_limit.map(|m| m as u64 * 60);
    [from_env.or(mock), limit].into_iter().flatten().min()
}

/// Ids of the mock jobs running on `node`.
pub fn ids(node: &str) -> Vec<JobId> {
    jobs()
        .keys()
        .filter(|(n, _)| n == node)
        .map(|(_, j)| *j)
        .collect()
}

pub fn launch(ctx: &Arc<Ctx>, l: BatchLaunch, mock: Option<u64>) -> Response {
    let key = (ctx.node.clone(), l.job_id);
    let (tx, rx) = oneshot::channel();
    if jobs().insert(key.clone(), tx).is_some() {
        return Response::Ok;
    }
    let secs = runtime(&l, mock);
    let ctx = ctx.clone();
    tokio::spawn(async move {
        let run = async {
            match secs {
                Some(s) => tokio::time::sleep(Duration::from_secs(s)).await,
                None => std::future::pending::<()>().await,
            }
        };
        let status = tokio::select! {
            _ = run => 0,
            _ = rx => libc::SIGTERM,
        };
        jobs().remove(&key);
        ctx.outbox.push(OutMsg::BatchComplete {
            job_id: key.1,
            status,
            oom: false,
            usage: None,
        });
        ctx.outbox.push(OutMsg::JobCleaned { job_id: key.1 });
        ctx.outbox.wake();
    });
    Response::Ok
}

/// End a mock job early; `false` when the job is not a mock job here.
pub fn terminate(node: &str, job_id: JobId) -> bool {
    match jobs().remove(&(node.to_string(), job_id)) {
        Some(tx) => {
            let _ = tx.send(());
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_is_the_shortest_of_limit_mock_and_env() {
        let mut l: BatchLaunch = serde_json::from_value(serde_json::json!({
            "job_id": 1, "job_name": "x", "uid": 0, "gid": 0, "user_name": "root",
            "account": "", "qos": "normal", "partition": "p", "cluster_name": "c",
            "alloc": {"nodes": [], "cpus": [], "mem": [], "tasks": []},
            "num_tasks": 1, "cpus_per_task": 1, "ntasks_per_node": null,
            "mem_per_node": null, "mem_per_cpu": null, "time_limit": 2,
            "work_dir": "/", "std_out": null, "std_err": null, "std_in": null,
            "script": "", "argv": [], "environment": [], "submit_host": "h",
            "ctld_host": "h", "ctld_port": 1
        }))
        .unwrap();
        assert_eq!(runtime(&l, None), Some(120));
        assert_eq!(runtime(&l, Some(30)), Some(30));
        l.environment.push("SLURM_MOCK_RUNTIME=5".into());
        assert_eq!(runtime(&l, Some(30)), Some(5));
        l.time_limit = None;
        l.environment.clear();
        assert_eq!(runtime(&l, None), None);
    }
}
