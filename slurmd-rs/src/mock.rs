//! Mock execution (`slurmd --mock[=SECONDS]`): batch jobs run no process.
//! Each "runs" for its time limit, or the mock duration when shorter, or the
//! job environment's `SLURM_MOCK_RUNTIME` seconds when set, then reports
//! success; `TerminateJob` ends it early (as if killed by SIGTERM). With a
//! hostlist for `-N`, one process stands in for many nodes, so the
//! controller can be driven at thousands of nodes on two cores. The nodes'
//! undelivered job events are kept in memory, not in the spool (a mock
//! daemon restarted loses them; its jobs are mock jobs).

use crate::ctld_link::OutMsg;
use crate::daemon::Ctx;
use slurm_proto::{BatchLaunch, JobId, Response};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::oneshot;

static MODE: OnceLock<Option<u64>> = OnceLock::new();

/// The mock jobs running here (node, job), and the runs that ended (with
/// their start times), so a launch sent again (the controller's reply
/// timed out) is taken for what it is: the run already going on, or one
/// over, never a second run, and never an end of the first.
#[derive(Default)]
struct Table {
    running: HashMap<(String, JobId), oneshot::Sender<()>>,
    ended: HashMap<(String, JobId), i64>,
}

/// Ended runs remembered, at most (the oldest half is forgotten then).
const ENDED_KEPT: usize = 100_000;

/// What a launch of `key`'s run `start` is here.
#[derive(Debug, PartialEq, Eq)]
enum Launch {
    New,
    Running,
    Ended,
}

impl Table {
    fn admit(&mut self, key: &(String, JobId), start: i64, tx: oneshot::Sender<()>) -> Launch {
        if self.running.contains_key(key) {
            return Launch::Running;
        }
        if self.ended.get(key) == Some(&start) {
            return Launch::Ended;
        }
        self.running.insert(key.clone(), tx);
        Launch::New
    }

    fn end(&mut self, key: &(String, JobId), start: i64) {
        self.running.remove(key);
        if self.ended.len() >= ENDED_KEPT {
            let mut starts: Vec<i64> = self.ended.values().copied().collect();
            let half = starts.len() / 2;
            let cut = *starts.select_nth_unstable(half).1;
            self.ended.retain(|_, s| *s > cut);
        }
        self.ended.insert(key.clone(), start);
    }
}

static JOBS: LazyLock<Mutex<Table>> = LazyLock::new(|| Mutex::new(Table::default()));

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
        .running
        .keys()
        .filter(|(n, _)| n == node)
        .map(|(_, j)| *j)
        .collect()
}

pub fn launch(ctx: &Arc<Ctx>, l: BatchLaunch, mock: Option<u64>) -> Response {
    let key = (ctx.node.clone(), l.job_id);
    let (tx, rx) = oneshot::channel();
    let start = l.start_time;
    match jobs().admit(&key, start, tx) {
        Launch::New => {}
        // The launch was taken, and the run's end is on its way in the
        // outbox: answered as delivered (an error would have the
        // controller requeue a job that ran).
        Launch::Running | Launch::Ended => return Response::Ok,
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
        jobs().end(&key, start);
        ctx.outbox.push(OutMsg::BatchComplete {
            job_id: key.1,
            status,
            oom: false,
            usage: None,
            job_start: (start != 0).then_some(start),
        });
        ctx.outbox.push(OutMsg::JobCleaned {
            job_id: key.1,
            job_start: (start != 0).then_some(start),
        });
        ctx.outbox.wake();
    });
    Response::Ok
}

/// End a mock job early; `false` when the job is not a mock job here.
pub fn terminate(node: &str, job_id: JobId) -> bool {
    match jobs().running.remove(&(node.to_string(), job_id)) {
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
    fn a_launch_sent_again_neither_ends_nor_repeats_the_run() {
        let mut t = Table::default();
        let key = ("n1".to_string(), 7);
        let (tx, mut rx) = oneshot::channel();
        assert_eq!(t.admit(&key, 100, tx), Launch::New);
        // The same launch again while it runs: the first run goes on (its
        // sender is not replaced, so it is not told to stop).
        let (again, _) = oneshot::channel();
        assert_eq!(t.admit(&key, 100, again), Launch::Running);
        assert!(rx
            .try_recv()
            .is_err_and(|e| e == oneshot::error::TryRecvError::Empty));
        t.end(&key, 100);
        let (late, _) = oneshot::channel();
        assert_eq!(t.admit(&key, 100, late), Launch::Ended);
        // A later run of the job (requeued) is a new one.
        let (next, _) = oneshot::channel();
        assert_eq!(t.admit(&key, 160, next), Launch::New);
    }

    #[test]
    fn ended_runs_are_forgotten_oldest_first() {
        let mut t = Table::default();
        for k in 0..ENDED_KEPT as u32 + 1 {
            t.end(&("n".to_string(), k), k as i64);
        }
        assert!(t.ended.len() <= ENDED_KEPT / 2 + 1);
        assert!(t.ended.contains_key(&("n".to_string(), ENDED_KEPT as u32)));
        assert!(!t.ended.contains_key(&("n".to_string(), 0)));
    }

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
