//! The jobs on this node: launching, waiting, signalling, terminating,
//! cleaning up, and re-adopting after a daemon restart.
//!
//! A job's life here: `Launching` (spool files, spawn) → `Running` (script
//! alive; its process group is the job) → `Completing` (script ended:
//! `BatchComplete` queued, the rest of the group killed) → `Cleaned`
//! (`JobCleaned` queued, spool removed). The entry is dropped once the
//! outbox has delivered `JobCleaned`, so the controller sees the job in
//! `running_jobs` until it knows the node is clean.
//!
//! Each running job also has a state file `<spool>/jobstate.<node>/<id>.json`
//! (root's, unlike the job directory which the user owns) with its pid and
//! start time, and its exit status once reported; a restarted daemon
//! re-adopts live jobs from these files and finishes the cleanup of ended
//! ones. It cannot learn the exit status of a script that ended while no
//! daemon was its parent, so such jobs are reported with status 0 and a
//! warning in the log.

use crate::ctld_link::OutMsg;
use crate::daemon::Ctx;
use crate::launch;
use serde::{Deserialize, Serialize};
use slurm_proto::{BatchLaunch, JobId, Response, RpcError, SlurmError};
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tracing::{debug, error, info, warn};

/// Where a job is in its life on this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Launching,
    Running,
    Completing,
    Cleaned,
}

struct Entry {
    phase: Phase,
    /// Process group (= the script's pid); 0 while launching.
    pgid: i32,
    /// Becomes `true` when the script has ended.
    exited: Option<watch::Receiver<bool>>,
}

/// The table of jobs on this node.
#[derive(Default)]
pub struct JobTable {
    inner: Mutex<BTreeMap<JobId, Entry>>,
}

impl JobTable {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<JobId, Entry>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Ids of every job still here (running or cleaning up), ascending.
    pub fn ids(&self) -> Vec<JobId> {
        self.lock().keys().copied().collect()
    }

    pub fn phase(&self, id: JobId) -> Option<Phase> {
        self.lock().get(&id).map(|e| e.phase)
    }

    /// Reserve `id` for a launch; `Err(phase)` if the job is already here.
    fn begin_launch(&self, id: JobId) -> Result<(), Phase> {
        let mut t = self.lock();
        match t.get(&id).map(|e| e.phase) {
            Some(Phase::Cleaned) | None => {
                t.insert(
                    id,
                    Entry {
                        phase: Phase::Launching,
                        pgid: 0,
                        exited: None,
                    },
                );
                Ok(())
            }
            Some(p) => Err(p),
        }
    }

    fn abort_launch(&self, id: JobId) {
        let mut t = self.lock();
        if t.get(&id).map(|e| e.phase) == Some(Phase::Launching) {
            t.remove(&id);
        }
    }

    fn set_running(&self, id: JobId, pgid: i32, exited: watch::Receiver<bool>) {
        self.lock().insert(
            id,
            Entry {
                phase: Phase::Running,
                pgid,
                exited: Some(exited),
            },
        );
    }

    fn set_phase(&self, id: JobId, phase: Phase) {
        if let Some(e) = self.lock().get_mut(&id) {
            e.phase = phase;
        }
    }

    /// Drop a job whose cleanup the controller has acknowledged.
    pub fn remove_cleaned(&self, id: JobId) {
        let mut t = self.lock();
        if t.get(&id).map(|e| e.phase) == Some(Phase::Cleaned) {
            t.remove(&id);
        }
    }

    fn target(&self, id: JobId) -> Option<(Phase, i32, Option<watch::Receiver<bool>>)> {
        self.lock()
            .get(&id)
            .map(|e| (e.phase, e.pgid, e.exited.clone()))
    }
}

/// What a restarted daemon needs to find a running job again.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct StateFile {
    job_id: JobId,
    pid: i32,
    start_ticks: u64,
    job_dir: PathBuf,
    /// Set once `BatchComplete` is in the outbox.
    #[serde(default)]
    status: Option<i32>,
}

/// The directory of a node's job state files within its spool.
pub fn state_dir(spool: &Path, node: &str) -> PathBuf {
    spool.join(format!("jobstate.{node}"))
}

fn state_path(dir: &Path, id: JobId) -> PathBuf {
    dir.join(format!("{id}.json"))
}

fn rpc_error(error: SlurmError, detail: impl Into<String>) -> Response {
    Response::Error(RpcError {
        error,
        detail: Some(detail.into()),
    })
}

fn killpg(pgid: i32, sig: i32) -> bool {
    if pgid <= 1 {
        return false;
    }
    // SAFETY: kill(2) with a negative pid addresses a process group.
    unsafe { libc::kill(-pgid, sig) == 0 }
}

/// Launch a batch script (`LaunchBatch`). Answers once it has been spawned.
pub async fn launch(ctx: &Arc<Ctx>, l: BatchLaunch) -> Response {
    let id = l.job_id;
    match ctx.jobs.begin_launch(id) {
        Ok(()) => {}
        // A repeated request for a job already started here.
        Err(Phase::Launching | Phase::Running) => return Response::Ok,
        Err(p) => {
            return rpc_error(
                SlurmError::AlreadyDone,
                format!("job {id} is still cleaning up on this node ({p:?})"),
            )
        }
    }
    if !l.alloc.nodes.is_empty() && !l.alloc.nodes.iter().any(|n| *n == ctx.node) {
        warn!(
            job = id,
            "launch request for a job not allocated to {}", ctx.node
        );
    }
    let start_time = crate::now();
    let c2 = ctx.clone();
    let prepared = tokio::task::spawn_blocking(move || {
        let params = launch::LaunchParams {
            node: &c2.node,
            conf_path: &c2.conf_path_str,
            spool: &c2.spool,
            start_time,
        };
        launch::prepare(&l, &params)
    })
    .await;
    let prepared = match prepared {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => {
            ctx.jobs.abort_launch(id);
            error!(job = id, "launch failed: {e}");
            let code = match e {
                launch::LaunchError::UnknownUser(_) | launch::LaunchError::Nul(_) => {
                    SlurmError::InvalidRequest
                }
                _ => SlurmError::InternalError,
            };
            return rpc_error(code, e.to_string());
        }
        Err(e) => {
            ctx.jobs.abort_launch(id);
            return rpc_error(
                SlurmError::InternalError,
                format!("launch task failed: {e}"),
            );
        }
    };
    let job_dir = prepared.job_dir.clone();
    let (stdout, user) = (prepared.stdout.clone(), prepared.user_name.clone());
    let child = match launch::spawn(prepared) {
        Ok(c) => c,
        Err(e) => {
            ctx.jobs.abort_launch(id);
            error!(job = id, "launch failed: {e}");
            return rpc_error(SlurmError::InternalError, e.to_string());
        }
    };
    let Some(pid) = child.id().map(|p| p as i32) else {
        ctx.jobs.abort_launch(id);
        return rpc_error(
            SlurmError::InternalError,
            "the batch script vanished at once",
        );
    };
    let (tx, rx) = watch::channel(false);
    ctx.jobs.set_running(id, pid, rx);
    let start_ticks = crate::sysinfo::proc_start(pid).map(|(t, _)| t).unwrap_or(0);
    let state = StateFile {
        job_id: id,
        pid,
        start_ticks,
        job_dir,
        status: None,
    };
    write_state(&ctx.state_dir, &state);
    info!(job = id, pid, user = %user, output = %stdout, "launched batch script");
    tokio::spawn(wait_child(ctx.clone(), child, state, tx));
    Response::Ok
}

fn write_state(dir: &Path, s: &StateFile) {
    let path = state_path(dir, s.job_id);
    let tmp = path.with_extension("tmp");
    let res = serde_json::to_vec(s)
        .map_err(std::io::Error::other)
        .and_then(|b| std::fs::write(&tmp, b))
        .and_then(|()| std::fs::rename(&tmp, &path));
    if let Err(e) = res {
        warn!(
            job = s.job_id,
            "cannot save job state {}: {e}",
            path.display()
        );
    }
}

async fn wait_child(
    ctx: Arc<Ctx>,
    mut child: tokio::process::Child,
    mut state: StateFile,
    tx: watch::Sender<bool>,
) {
    let status = match child.wait().await {
        Ok(s) => s.into_raw(),
        Err(e) => {
            error!(
                job = state.job_id,
                "waiting for the batch script failed: {e}"
            );
            poll_until_gone(state.pid, None).await;
            0
        }
    };
    state.status = Some(status);
    finish(ctx, state, true, tx).await;
}

/// Poll until `pid` (with start time `start`, when known) is gone or a zombie.
async fn poll_until_gone(pid: i32, start: Option<u64>) {
    loop {
        match crate::sysinfo::proc_start(pid) {
            None => return,
            Some((_, 'Z' | 'X')) => return,
            Some((t, _)) if start.is_some_and(|s| s != t) => return,
            Some(_) => {}
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The script has ended (`state.status` set): report it (unless a previous
/// daemon already did), kill what is left, clean up, report clean.
async fn finish(ctx: Arc<Ctx>, state: StateFile, report: bool, tx: watch::Sender<bool>) {
    let (id, pgid) = (state.job_id, state.pid);
    let _ = tx.send(true);
    ctx.jobs.set_phase(id, Phase::Completing);
    if report {
        let status = state.status.unwrap_or(0);
        let (code, sig) = slurm_proto::wait_status_pair(status);
        info!(job = id, status, "batch script ended (exit {code}:{sig})");
        ctx.outbox
            .push(OutMsg::BatchComplete { job_id: id, status });
        write_state(&ctx.state_dir, &state);
    }

    killpg(pgid, libc::SIGKILL);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let left = tokio::task::spawn_blocking(move || crate::sysinfo::group_members(pgid))
            .await
            .unwrap_or_default();
        if left.is_empty() {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            warn!(
                job = id,
                "processes {left:?} survive SIGKILL; reporting the job clean anyway"
            );
            break;
        }
        killpg(pgid, libc::SIGKILL);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let (dir, job_dir) = (ctx.state_dir.clone(), state.job_dir);
    let _ = tokio::task::spawn_blocking(move || {
        if let Err(e) = std::fs::remove_dir_all(&job_dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                warn!(job = id, "cannot remove {}: {e}", job_dir.display());
            }
        }
        let _ = std::fs::remove_file(state_path(&dir, id));
    })
    .await;
    ctx.jobs.set_phase(id, Phase::Cleaned);
    ctx.outbox.push(OutMsg::JobCleaned { job_id: id });
    debug!(job = id, "job cleaned up");
}

/// Deliver `signal` to a job's processes (`SignalJob`).
pub fn signal(ctx: &Ctx, id: JobId, signal: i32) -> Response {
    if !(0..=64).contains(&signal) {
        return rpc_error(
            SlurmError::InvalidRequest,
            format!("invalid signal {signal}"),
        );
    }
    match ctx.jobs.target(id) {
        None => Response::Error(SlurmError::InvalidJobId.into()),
        Some((Phase::Running, pgid, _)) => {
            info!(job = id, signal, "signalling job");
            killpg(pgid, signal);
            Response::Ok
        }
        // Not started yet, or already ending: nothing to signal.
        Some(_) => Response::Ok,
    }
}

/// End a job on this node (`TerminateJob`): SIGCONT and SIGTERM to its
/// processes, SIGKILL after `kill_wait` seconds. A job not running here
/// (a node of a multi-node job without the script) is reported clean at once.
pub async fn terminate(ctx: Arc<Ctx>, id: JobId, kill_wait: u32) {
    // A launch in progress finishes first (bounded).
    let mut waited = 0;
    while ctx.jobs.phase(id) == Some(Phase::Launching) && waited < 600 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += 1;
    }
    match ctx.jobs.target(id) {
        None => {
            debug!(
                job = id,
                "terminate: job not running here; reporting it clean"
            );
            ctx.outbox.push(OutMsg::JobCleaned { job_id: id });
        }
        Some((Phase::Running, pgid, exited)) => {
            info!(job = id, kill_wait, "terminating job");
            killpg(pgid, libc::SIGCONT);
            killpg(pgid, libc::SIGTERM);
            let ended = match exited {
                Some(mut rx) => tokio::time::timeout(
                    Duration::from_secs(kill_wait.into()),
                    rx.wait_for(|done| *done),
                )
                .await
                .is_ok(),
                None => false,
            };
            if !ended && ctx.jobs.phase(id) == Some(Phase::Running) {
                info!(job = id, "job outlived KillWait; sending SIGKILL");
                killpg(pgid, libc::SIGKILL);
            }
        }
        // Already ending: its waiter reports as usual.
        Some(_) => {}
    }
}

/// Re-adopt the jobs a previous daemon left running (from the state files);
/// report those that ended meanwhile. Call once at start-up.
pub fn adopt(ctx: &Arc<Ctx>) {
    let Ok(rd) = std::fs::read_dir(&ctx.state_dir) else {
        return;
    };
    for e in rd.flatten() {
        let path = e.path();
        if path.extension().and_then(|x| x.to_str()) != Some("json") {
            let _ = std::fs::remove_file(&path);
            continue;
        }
        let st: StateFile = match std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
        {
            Some(s) => s,
            None => {
                warn!("ignoring malformed job state file {}", path.display());
                let _ = std::fs::remove_file(&path);
                continue;
            }
        };
        let alive = st.pid > 1
            && matches!(crate::sysinfo::proc_start(st.pid),
                Some((t, s)) if t == st.start_ticks && s != 'Z' && s != 'X');
        let (tx, rx) = watch::channel(false);
        ctx.jobs.set_running(st.job_id, st.pid, rx);
        let ctx2 = ctx.clone();
        let mut st = st;
        let report = st.status.is_none();
        if report && alive {
            info!(job = st.job_id, pid = st.pid, "re-adopted running job");
        } else if report {
            warn!(
                job = st.job_id,
                "job ended while slurmd was down; its exit status is unknown (reported as 0)"
            );
        } else {
            info!(job = st.job_id, "finishing the cleanup of an ended job");
        }
        tokio::spawn(async move {
            if report && alive {
                poll_until_gone(st.pid, Some(st.start_ticks)).await;
                warn!(
                    job = st.job_id,
                    "adopted job ended; its exit status is unknown (reported as 0)"
                );
            }
            if report {
                st.status = Some(0);
            }
            finish(ctx2, st, report, tx).await;
        });
    }
}
