//! Job steps: the tasks `srun` launches on this node.
//!
//! `srun` opens the `RunTasks` stream and sends [`TaskLaunch`] with a step
//! credential the controller signed (who may run which step of which job on
//! which nodes). After checking it, the daemon starts each task as the
//! job's user in its own session with the step environment, and sends the
//! tasks' stdout and stderr and each task's exit status back on the stream
//! ([`StepIo`]). Task 0 reads the stdin `srun` sends on it.
//!
//! Step tasks are registered per job so `TerminateJob` and `SignalTasks`
//! reach them; they are killed with the job. The first step of a job on a
//! node that does not run its batch script runs the Prolog there and makes
//! the job's cgroup (cpuset, memory, devices from the allocation), which
//! goes with the job. Each task joins its own directory
//! `.../job_<id>/step_<n>/task_<local id>` before it execs, and what a step
//! leaves behind is killed when it ends.

use crate::daemon::Ctx;
use slurm_common::auth::AuthError;
use slurm_common::hostlist;
use slurm_common::stepio::{IoFrame, IoKind};
use slurm_proto::{JobId, Response, RpcError, SlurmError, TaskLaunch};
use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tracing::{debug, warn};

struct StepEntry {
    uid: u32,
    /// The job's run this step belongs to (its start, from the credential).
    job_start: Option<i64>,
    /// Process groups (= task pids) still alive.
    pgids: Vec<i32>,
    /// Each task started here: (pid, local id, global id).
    tasks: Vec<(i32, u32, u32)>,
    /// On the step's first node: where its stderr goes to srun, and the
    /// task it is said of (why the step is ended is told there).
    notice_to: Option<(mpsc::Sender<IoFrame>, u32)>,
}

/// Running steps on this node, by (job, step).
static STEPS: LazyLock<Mutex<HashMap<(JobId, u32), StepEntry>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn steps() -> std::sync::MutexGuard<'static, HashMap<(JobId, u32), StepEntry>> {
    STEPS.lock().unwrap_or_else(|p| p.into_inner())
}

/// The sruns attached to each job's steps here: their RunTasks streams
/// still open (an srun holds its stream until it has written out what
/// its tasks sent and ended).
static ATTACHED: LazyLock<Mutex<HashMap<JobId, usize>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn attached() -> std::sync::MutexGuard<'static, HashMap<JobId, usize>> {
    ATTACHED.lock().unwrap_or_else(|p| p.into_inner())
}

/// An srun attached to a step of a job here, until dropped.
pub struct Attached(JobId);

/// Count an srun's stream as attached to job `job_id` here.
pub fn attach(job_id: JobId) -> Attached {
    *attached().entry(job_id).or_default() += 1;
    Attached(job_id)
}

impl Drop for Attached {
    fn drop(&mut self) {
        let mut a = attached();
        if let Some(n) = a.get_mut(&self.0) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                a.remove(&self.0);
            }
        }
    }
}

/// Wait (at most `limit`) until no srun is attached to job `job_id`'s steps
/// here: an ending job's sruns have written out their steps' last words
/// (`*** STEP 5.0 ... CANCELLED ***`, the tasks' ends) before the batch
/// script they run in is signalled.
pub async fn wait_detached(job_id: JobId, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    while attached().contains_key(&job_id) {
        if tokio::time::Instant::now() >= deadline {
            debug!(
                job = job_id,
                "an srun of the job is still attached after {limit:?}; ending the job anyway"
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The first field of a launch that differs from its signed credential.
fn unsigned_field(t: &TaskLaunch) -> Option<&'static str> {
    let (c, l) = (&t.layout.cred, &t.layout);
    let checks = [
        (t.job_nodes == c.alloc.nodes, "job nodes"),
        (t.job_cpus == c.alloc.cpus, "job CPUs"),
        (t.job_mem == c.alloc.mem, "job memory"),
        (t.job_tasks == c.alloc.tasks, "job tasks"),
        (t.job_gres == c.alloc.gres, "job GRES"),
        (t.partition == c.partition, "partition"),
        (t.account == c.account, "account"),
        (t.job_start == c.job_start, "job start"),
        (l.job_id == c.job_id && l.step_id == c.step_id, "step id"),
        (l.nodes == c.nodes, "step nodes"),
        (l.tasks == c.tasks, "step tasks"),
        (l.cpus_per_task == c.cpus_per_task, "CPUs per task"),
        (l.job_cpus == c.job_cpus, "step CPUs"),
    ];
    checks.iter().find(|(ok, _)| !ok).map(|(_, what)| *what)
}

/// Jobs with steps on this node but not their batch script: their cgroup
/// here, by (node, job).
struct StepJob {
    uid: u32,
    info: crate::jobs::ScriptInfo,
    cgroup: Option<Arc<crate::cgroup::JobCgroup>>,
}

static STEP_JOBS: LazyLock<Mutex<HashMap<(String, JobId), StepJob>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn step_jobs() -> std::sync::MutexGuard<'static, HashMap<(String, JobId), StepJob>> {
    STEP_JOBS.lock().unwrap_or_else(|p| p.into_inner())
}

/// The job's cgroup for a step here. On a node without the batch script,
/// the job's first step runs the Prolog and makes the cgroup; `Err` when the
/// Prolog fails (the controller is told, to drain the node).
async fn job_here(
    ctx: &Arc<Ctx>,
    t: &TaskLaunch,
) -> Result<Option<Arc<crate::cgroup::JobCgroup>>, String> {
    let cred = &t.layout.cred;
    let facts = slurm_proto::JobPrologue {
        job_id: cred.job_id,
        uid: cred.uid,
        gid: cred.gid,
        user_name: cred.user_name.clone(),
        partition: t.partition.clone(),
        account: t.account.clone(),
        alloc: slurm_proto::Allocation {
            nodes: t.job_nodes.clone(),
            cpus: t.job_cpus.clone(),
            mem: t.job_mem.clone(),
            tasks: t.job_tasks.clone(),
            gres: t.job_gres.clone(),
        },
        pod_uids: Vec::new(),
    };
    prepare_job(ctx, &facts).await
}

/// Set a job up on this node (once): unless its batch script runs here, run
/// the Prolog and make the job's cgroup from the allocation. Called at the
/// job's first step here, or at allocation with `PrologFlags=Alloc`. `Err`
/// when the Prolog fails (the controller is told, to drain the node).
pub async fn prepare_job(
    ctx: &Arc<Ctx>,
    f: &slurm_proto::JobPrologue,
) -> Result<Option<Arc<crate::cgroup::JobCgroup>>, String> {
    let job = f.job_id;
    // A pod's placeholder job: nothing runs here but the pod.
    if !f.pod_uids.is_empty() {
        crate::kubelet::place(ctx, f);
        return Ok(None);
    }
    if ctx.jobs.phase(job).is_some() {
        return Ok(ctx.jobs.cgroup(job));
    }
    let key = (ctx.node.clone(), job);
    if let Some(j) = step_jobs().get(&key) {
        return Ok(j.cgroup.clone());
    }
    let info = crate::jobs::ScriptInfo {
        gid: f.gid,
        user: f.user_name.clone(),
        partition: f.partition.clone(),
        account: f.account.clone(),
        nodelist: hostlist::compress(&f.alloc.nodes),
    };
    if let Some(path) = ctx.conf().prolog.clone() {
        let env = crate::jobs::script_env(ctx, job, Some(f.uid), Some(&info));
        let timeout = crate::jobs::script_timeout(ctx);
        if let Err(e) = crate::prolog::run(crate::prolog::Kind::Prolog, &path, &env, timeout).await
        {
            ctx.outbox
                .push(crate::ctld_link::OutMsg::PrologFailed { job_id: job });
            return Err(e);
        }
    }
    let k = f.alloc.nodes.iter().position(|n| *n == ctx.node);
    let spec = crate::cgroup::JobSpec {
        job_id: job,
        uid: f.uid,
        cpus: k.and_then(|k| f.alloc.cpus.get(k)).copied().unwrap_or(1),
        mem_mib: k.and_then(|k| f.alloc.mem.get(k)).copied().unwrap_or(0),
        gpus: Some(f.alloc.gpus_on(&ctx.node)),
    };
    let c2 = ctx.clone();
    let cgroup = tokio::task::spawn_blocking(move || {
        let m = c2.cgroups.as_ref()?;
        match m.create_job(&spec) {
            Ok(jc) => Some(Arc::new(jc)),
            Err(e) => {
                warn!(
                    job = spec.job_id,
                    "cannot make the job's cgroup for its steps: {e}"
                );
                None
            }
        }
    })
    .await
    .ok()
    .flatten();
    step_jobs().insert(
        key,
        StepJob {
            uid: f.uid,
            info,
            cgroup: cgroup.clone(),
        },
    );
    Ok(cgroup)
}

/// The job ended: kill what is left of its steps here and remove the cgroup
/// its steps had (on nodes without its batch script). Returns the job's
/// user and facts (for the Epilog) when steps ran here.
pub(crate) async fn end_job(ctx: &Arc<Ctx>, job: JobId) -> Option<(u32, crate::jobs::ScriptInfo)> {
    crate::kubelet::release(ctx, job);
    let j = step_jobs().remove(&(ctx.node.clone(), job))?;
    if let Some(jc) = j.cgroup {
        let c2 = ctx.clone();
        let _ = tokio::task::spawn_blocking(move || {
            jc.signal(libc::SIGKILL);
            if let Some(m) = &c2.cgroups {
                for _ in 0..50 {
                    if m.remove_job(&jc).is_ok() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        })
        .await;
    }
    Some((j.uid, j.info))
}

fn refuse(error: SlurmError, detail: impl Into<String>) -> Response {
    Response::Error(RpcError {
        error,
        detail: Some(detail.into()),
    })
}

/// The environment of one task (without `SLURM_TASK_PID`, which the task's
/// shell sets to its own pid just before it execs the program).
pub fn task_env(
    t: &TaskLaunch,
    launcher: &str,
    node: &str,
    conf_path: &str,
    local_id: u32,
    global: u32,
    renumber_gpus: bool,
) -> Vec<(String, String)> {
    let l = &t.layout;
    let mut env: Vec<(String, String)> = t
        .environment
        .iter()
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| !k.is_empty())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    // `srun -E`: srun's own counts stay (Slurm's list).
    let kept: &[&str] = if t.preserve_env {
        &[
            "SLURM_NTASKS",
            "SLURM_NPROCS",
            "SLURM_NNODES",
            "SLURM_TASKS_PER_NODE",
        ]
    } else {
        &[]
    };
    let mut set = |k: &str, v: String| match env.iter_mut().find(|(n, _)| n == k) {
        Some(_) if kept.contains(&k) => {}
        Some(e) => e.1 = v,
        None => env.push((k.to_string(), v)),
    };
    let idx = t.node_index as usize;
    let here: Vec<String> = l
        .tasks
        .get(idx)
        .map(|v| v.iter().map(u32::to_string).collect())
        .unwrap_or_default();
    let per_node: Vec<u32> = l.tasks.iter().map(|v| v.len() as u32).collect();
    let ntasks: u32 = per_node.iter().sum();
    let step_nodes = hostlist::compress(&l.nodes);
    let (io_host, io_port) = launcher.rsplit_once(':').unwrap_or((launcher, "0"));
    let io_host = io_host.trim_start_matches('[').trim_end_matches(']');
    set("SLURMD_NODENAME", node.to_string());
    set("SLURM_CLUSTER_NAME", t.cluster_name.clone());
    set("SLURM_CONF", conf_path.to_string());
    // The step's CPUs here (its own with --exact), as Slurm's.
    set(
        "SLURM_CPUS_ON_NODE",
        l.cred
            .step_cpus
            .get(idx)
            .or(l.job_cpus.get(idx))
            .copied()
            .unwrap_or(1)
            .to_string(),
    );
    // (SLURM_CPUS_PER_TASK is srun's: what the step asked, not its layout.)
    set("SLURM_DISTRIBUTION", "block".to_string());
    set("SLURM_GTIDS", here.join(","));
    set("SLURM_JOBID", l.job_id.to_string());
    set("SLURM_JOB_ID", l.job_id.to_string());
    set("SLURM_JOB_ACCOUNT", t.account.clone());
    set(
        "SLURM_JOB_CPUS_PER_NODE",
        hostlist::compress_counts(&t.job_cpus),
    );
    set("SLURM_JOB_GID", l.cred.gid.to_string());
    set("SLURM_JOB_NAME", t.job_name.clone());
    set("SLURM_JOB_NODELIST", hostlist::compress(&t.job_nodes));
    set("SLURM_JOB_NUM_NODES", t.job_nodes.len().to_string());
    set("SLURM_JOB_PARTITION", t.partition.clone());
    set("SLURM_JOB_UID", l.cred.uid.to_string());
    set("SLURM_JOB_USER", l.cred.user_name.clone());
    set("SLURM_LAUNCH_NODE_IPADDR", io_host.to_string());
    set("SLURM_LOCALID", local_id.to_string());
    set("SLURM_NNODES", l.nodes.len().to_string());
    set("SLURM_NODEID", t.node_index.to_string());
    set("SLURM_NODELIST", step_nodes.clone());
    set("SLURM_NPROCS", ntasks.to_string());
    set("SLURM_NTASKS", ntasks.to_string());
    set("SLURM_PRIO_PROCESS", "0".to_string());
    set("SLURM_PROCID", global.to_string());
    set("SLURM_SRUN_COMM_HOST", io_host.to_string());
    set("SLURM_SRUN_COMM_PORT", io_port.to_string());
    set("SLURM_STEPID", l.step_id.to_string());
    set("SLURM_STEP_ID", l.step_id.to_string());
    set("SLURM_STEP_LAUNCHER_PORT", io_port.to_string());
    set("SLURM_STEP_NODELIST", step_nodes);
    set("SLURM_STEP_NUM_NODES", l.nodes.len().to_string());
    set("SLURM_STEP_NUM_TASKS", ntasks.to_string());
    set(
        "SLURM_STEP_TASKS_PER_NODE",
        hostlist::compress_counts(&per_node),
    );
    set("SLURM_TASKS_PER_NODE", hostlist::compress_counts(&per_node));
    set("SLURM_TOPOLOGY_ADDR", node.to_string());
    set("SLURM_TOPOLOGY_ADDR_PATTERN", "node".to_string());
    // The job's GPUs on this node (the batch script's are for its own node).
    let gres = t
        .job_nodes
        .iter()
        .position(|n| n == node)
        .and_then(|k| t.job_gres.get(k))
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    // The step's: its own where it asked for some (`--gpus=1`, or none
    // with `--gres=none`), else every GPU of its job on the node.
    let own = l
        .cred
        .step_gres
        .get(t.node_index as usize)
        .map(Vec::as_slice)
        .unwrap_or(gres);
    let mut e = crate::launch::env::Env(env);
    crate::launch::env::gpu_env(&mut e, gres, renumber_gpus);
    let job_gpus = e.get("SLURM_JOB_GPUS").map(str::to_string);
    crate::launch::env::gpu_env(&mut e, own, renumber_gpus);
    match e.get("SLURM_JOB_GPUS").map(str::to_string) {
        Some(g) => e.set("SLURM_STEP_GPUS", g),
        None => e.remove("SLURM_STEP_GPUS"),
    }
    match job_gpus {
        Some(g) => e.set("SLURM_JOB_GPUS", g),
        None => e.remove("SLURM_JOB_GPUS"),
    }
    // --gpu-bind (or --gpus-per-task's per_task): this task's share.
    let step_gpus = slurm_proto::GresAlloc::gpu_indices(own);
    if let Some(mine) = t
        .gpu_bind
        .as_deref()
        .and_then(|b| crate::launch::env::task_gpus(&step_gpus, b, local_id, renumber_gpus))
    {
        let seen: Vec<String> = mine
            .iter()
            .map(|g| {
                if renumber_gpus {
                    step_gpus
                        .iter()
                        .position(|x| x == g)
                        .unwrap_or(0)
                        .to_string()
                } else {
                    g.to_string()
                }
            })
            .collect();
        e.set("CUDA_VISIBLE_DEVICES", seen.join(","));
        e.set("GPU_DEVICE_ORDINAL", seen.join(","));
        // (The task's own, in the node's numbering, as Slurm's.)
        let own: Vec<String> = mine.iter().map(u32::to_string).collect();
        e.set("SLURM_STEP_GPUS", own.join(","));
    }
    e.0
}

/// The `SLURM_CPU_BIND*` variables of a task whose CPUs were bound: the
/// masks of the step's tasks on this node, as Slurm reports a binding it
/// made (`quiet,mask_cpu:0x1,0x2`).
pub fn cpu_bind_env(layout: &[Option<Vec<u32>>], verbose: bool) -> Vec<(String, String)> {
    let masks: Vec<String> = layout
        .iter()
        .flatten()
        .map(|c| slurm_common::cpubind::mask_hex(c))
        .collect();
    if masks.is_empty() {
        return Vec::new();
    }
    let v = if verbose { "verbose" } else { "quiet" };
    let list = masks.join(",");
    vec![
        ("SLURM_CPU_BIND".into(), format!("{v},mask_cpu:{list}")),
        ("SLURM_CPU_BIND_VERBOSE".into(), v.into()),
        ("SLURM_CPU_BIND_TYPE".into(), "mask_cpu:".into()),
        ("SLURM_CPU_BIND_LIST".into(), list),
    ]
}

/// A pseudo-terminal of `rows` x `cols`: (master, slave), both close-on-exec.
/// The terminal belongs to the task's user (mode 0620, as a login's), so
/// programs that open `/dev/tty` again can.
fn open_pty(
    rows: u16,
    cols: u16,
    uid: libc::uid_t,
    gid: libc::gid_t,
) -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd;
    let ws = libc::winsize {
        ws_row: rows.max(1),
        ws_col: cols.max(1),
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let (mut m, mut s) = (-1, -1);
    // SAFETY: openpty writes two descriptors it opened; the name buffer and
    // termios are not asked for.
    let rc = unsafe { libc::openpty(&mut m, &mut s, std::ptr::null_mut(), std::ptr::null(), &ws) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors are ours alone from here on.
    let (m, s) = unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(m),
            std::os::fd::OwnedFd::from_raw_fd(s),
        )
    };
    use std::os::fd::AsRawFd;
    for fd in [&m, &s] {
        // SAFETY: setting FD_CLOEXEC on a descriptor we own.
        unsafe {
            libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
    // SAFETY: fchown/fchmod of the slave descriptor we own.
    if unsafe { libc::fchown(s.as_raw_fd(), uid, gid) } != 0
        || unsafe { libc::fchmod(s.as_raw_fd(), 0o620) } != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok((m, s))
}

/// A task that could not start: `msg` on its stderr, then exit code 1.
async fn task_failed(tx: &mpsc::Sender<IoFrame>, task: u32, msg: String) {
    let _ = tx
        .send(IoFrame {
            kind: IoKind::Stderr,
            task,
            data: msg.into_bytes(),
        })
        .await;
    let _ = tx.send(IoFrame::exit(task, 1 << 8)).await;
}

/// Tell srun why this node's part of the step does not start, as
/// slurmstepd's error (on the stderr of the step's first task here).
async fn say_error(tx: &mpsc::Sender<IoFrame>, t: &TaskLaunch, idx: usize, why: &str) {
    let task = t
        .layout
        .tasks
        .get(idx)
        .and_then(|v| v.first())
        .copied()
        .unwrap_or(0);
    let _ = tx
        .send(IoFrame {
            kind: IoKind::Stderr,
            task,
            data: format!("slurmstepd: error: {why}\n").into_bytes(),
        })
        .await;
}

/// `TERM` for a pseudo-terminal: the user's, else a plain one.
fn term_of(environment: &[String]) -> String {
    environment
        .iter()
        .find_map(|kv| kv.strip_prefix("TERM="))
        .filter(|v| !v.is_empty())
        .unwrap_or("xterm")
        .to_string()
}

/// Check and start a step's tasks on this node. The tasks run on in the
/// background; the answer says only whether they were started.
/// The two ends of a step's I/O on this node: the tasks' output goes to
/// `out`, task 0's stdin comes from `input`; `launcher` is the address of
/// the srun that started it (for `SLURM_SRUN_COMM_HOST` and its kin).
pub struct StepIo {
    pub out: mpsc::Sender<IoFrame>,
    pub input: mpsc::Receiver<IoFrame>,
    pub launcher: String,
}

/// How long writing `srun --bcast`'s program may take on a node.
const BCAST_WRITE_LIMIT: Duration = Duration::from_secs(60);

/// Write `data` to `path` as the user (`uid`, `gid`, `groups`), with
/// permission bits `mode` and modification time `mtime`: in a child that
/// has become the user, so the file goes only where the user may write.
/// A path not absolute, a directory or another kind of file already there
/// (a FIFO would block) is refused; a write not done within
/// [`BCAST_WRITE_LIMIT`] (a hung file system) is killed and refused.
fn write_as_user(
    path: &str,
    data: &[u8],
    mode: u32,
    mtime: i64,
    uid: u32,
    gid: u32,
    groups: &[libc::gid_t],
) -> Result<(), String> {
    use std::io::{Read, Write};
    use std::os::unix::process::CommandExt;
    if !path.starts_with('/') || path.ends_with('/') {
        return Err(format!("{path}: not an absolute file name"));
    }
    let groups = groups.to_vec();
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(
            "umask 077; if [ -e \"$0\" ] && [ ! -f \"$0\" ]; then \
             echo \"$0: not a regular file\" >&2; exit 1; fi; \
             cat > \"$0\" && chmod \"$1\" \"$0\" && touch -m -d \"@$2\" \"$0\"",
        )
        .arg(path)
        .arg(format!("{mode:o}"))
        .arg(mtime.to_string())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .current_dir("/")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    // SAFETY: only async-signal-safe calls between fork and exec; the group
    // list was allocated before the fork. Its own session: killed whole
    // when it takes too long.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            crate::launch::exec::become_user(&groups, gid, uid)
        });
    }
    let mut child = cmd.spawn().map_err(|e| e.to_string())?;
    let pid = child.id() as i32;
    let stdin = child.stdin.take();
    let mut stderr = child.stderr.take();
    let status = std::thread::scope(|scope| {
        // Fed from a thread: a child that never reads must not hold this one.
        let fed = scope.spawn(move || stdin.map(|mut i| i.write_all(data)));
        let deadline = std::time::Instant::now() + BCAST_WRITE_LIMIT;
        let status = loop {
            match child.try_wait() {
                Ok(Some(st)) => break Ok(st),
                Err(e) => break Err(e.to_string()),
                Ok(None) if std::time::Instant::now() >= deadline => {
                    // SAFETY: a signal to the process group the child leads.
                    unsafe { libc::kill(-pid, libc::SIGKILL) };
                    let _ = child.wait();
                    break Err(format!(
                        "not written within {} s",
                        BCAST_WRITE_LIMIT.as_secs()
                    ));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            }
        };
        let fed = fed.join().ok().flatten().unwrap_or(Ok(()));
        status.map(|st| (st, fed))
    })?;
    let (status, fed) = status;
    if !status.success() {
        let mut why = String::new();
        if let Some(e) = stderr.as_mut() {
            let _ = e.take(4096).read_to_string(&mut why);
        }
        let why = why.lines().last().unwrap_or("cannot write it").trim();
        // (sh names the file itself: keep only why.)
        return Err(why.rsplit_once(": ").map_or(why, |(_, w)| w).to_string());
    }
    fed.map_err(|e| e.to_string())
}

pub async fn launch(
    ctx: &Arc<Ctx>,
    caller_uid: u32,
    privileged: bool,
    t: TaskLaunch,
    io: StepIo,
) -> Response {
    let cred = &t.layout.cred;
    if let Err(e) = ctx.key.verify_step(cred, crate::now()) {
        let code = match e {
            AuthError::Expired => SlurmError::ExpiredCredential,
            _ => SlurmError::InvalidCredential,
        };
        warn!(job = cred.job_id, "refused step credential: {e}");
        return refuse(code, format!("step credential: {e}"));
    }
    if !privileged && caller_uid != cred.uid {
        return refuse(
            SlurmError::AccessDenied,
            format!("uid {caller_uid} may not launch tasks of uid {}", cred.uid),
        );
    }
    // What is applied here must be what the controller signed.
    if let Some(field) = unsigned_field(&t) {
        warn!(job = cred.job_id, "step launch with {field} not as signed");
        return refuse(
            SlurmError::InvalidCredential,
            format!("step credential: the launch's {field} is not the one signed"),
        );
    }
    let idx = t.node_index as usize;
    if cred.nodes.get(idx) != Some(&ctx.node) || t.layout.nodes.get(idx) != Some(&ctx.node) {
        return refuse(
            SlurmError::InvalidRequest,
            format!(
                "step {}.{} does not run on {}",
                cred.job_id, cred.step_id, ctx.node
            ),
        );
    }
    let Some(mut prog) = t.argv.first().cloned() else {
        return refuse(SlurmError::InvalidRequest, "no program to run");
    };
    let key = (cred.job_id, cred.step_id);
    if steps().contains_key(&key) {
        return refuse(
            SlurmError::InvalidRequest,
            format!("step {}.{} already runs here", key.0, key.1),
        );
    }
    // A credential launches its step once, never after its run ended or
    // the step was cancelled (remembered across daemon restarts).
    if let Err(why) = ctx.ledger.take(
        cred.job_id,
        cred.step_id,
        cred.job_start,
        crate::now(),
        cred.expires,
    ) {
        return refuse(SlurmError::AlreadyDone, why);
    }
    let (uid, gid) = (cred.uid, cred.gid);
    let groups = slurm_common::users::user_by_uid(uid)
        .map(|u| slurm_common::users::group_list(&u.name, gid))
        .unwrap_or_else(|| vec![gid]);
    // The directory is entered in the task, after it has become the user
    // (never as root: a user must not start inside a directory they cannot
    // enter); if that fails the task starts in /tmp, as Slurm's do.
    let cwd = std::ffi::CString::new(t.cwd.as_bytes()).unwrap_or_default();
    let cwd_notes: Arc<[Vec<u8>; 3]> = Arc::new(
        [
            "No such file or directory",
            "Permission denied",
            "Not a directory",
        ]
        .map(|why| {
            format!(
                "slurmstepd: error: couldn't chdir to `{}': {why}: going to /tmp instead\n",
                t.cwd
            )
            .into_bytes()
        }),
    );

    let tx = io.out.clone();

    let mut job_cg = match job_here(ctx, &t).await {
        Ok(c) => c,
        Err(e) => {
            warn!(job = key.0, "{e}");
            say_error(&tx, &t, idx, &e).await;
            return refuse(SlurmError::PrologFailed, e);
        }
    };
    // The job's script is still being set up here (its cgroup with it): a
    // step asked for meanwhile waits for it, so it joins the job's cgroup
    // rather than none.
    if job_cg.is_none() {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while ctx.jobs.phase(key.0) == Some(crate::jobs::Phase::Launching)
            && std::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if ctx.jobs.phase(key.0).is_some() {
            job_cg = ctx.jobs.cgroup(key.0);
        }
    }
    // `srun --bcast`: the program written here as the user (never as
    // root: a user may not place a file where they may not write), and
    // run from there.
    if let Some(b) = t.bcast.as_ref() {
        let path = b.path_on(key.0, key.1, &ctx.node);
        let (data, mode, mtime) = (b.data.clone(), b.mode & 0o777, b.mtime);
        let (p2, groups2) = (path.clone(), groups.clone());
        let written = tokio::task::spawn_blocking(move || {
            write_as_user(&p2, &data, mode, mtime, uid, gid, &groups2)
        })
        .await
        .unwrap_or_else(|e| Err(e.to_string()));
        if let Err(e) = written {
            warn!(job = key.0, step = key.1, "--bcast to {path}: {e}");
            return refuse(
                SlurmError::InvalidRequest,
                format!("Failed to broadcast to {path}: {e}"),
            );
        }
        tracing::info!(
            job = key.0,
            step = key.1,
            "--bcast: program written to {path}"
        );
        prog = path;
    }
    let step_cg = match job_cg {
        Some(jc) => {
            let name = format!("step_{}", key.1);
            let (jc2, n2) = (jc.clone(), name.clone());
            // `srun --exact`: the step's own share of the job's CPUs here
            // (signed with the rest of the credential).
            let want = t.layout.cred.step_cpus.get(idx).copied();
            // Its own GPUs (`srun --gpus=1` in a job of more): the job's
            // others are denied to it.
            let own_gpus: Option<Vec<u32>> = t
                .layout
                .cred
                .step_gres
                .get(idx)
                .map(|g| slurm_proto::GresAlloc::gpu_indices(g));
            let own_mem = t.layout.cred.step_mem.get(idx).copied();
            let confining = own_mem.is_some_and(|m| m > 0) || own_gpus.is_some();
            let ctx3 = ctx.clone();
            match tokio::task::spawn_blocking(move || {
                let made = jc2.create_step_holding(&n2, want).map_err(|e| (e, false))?;
                // Its own memory and GPUs: a step that cannot be held to
                // them does not run (it would see the job's, or more).
                let confine = || -> Result<(), crate::cgroup::CgroupError> {
                    if let Some(mib) = own_mem.filter(|m| *m > 0) {
                        jc2.limit_step_memory(&n2, mib)?;
                    }
                    if let (Some(m), Some(own)) = (ctx3.cgroups.as_ref(), own_gpus) {
                        m.restrict_step_devices(&jc2, &n2, &own)?;
                    }
                    Ok(())
                };
                if let Err(e) = confine() {
                    jc2.end_step(&n2);
                    return Err((e, true));
                }
                Ok(made)
            })
            .await
            {
                Ok(Ok((procs, mine))) => {
                    use std::os::unix::ffi::OsStrExt;
                    let paths: Vec<std::ffi::CString> = procs
                        .iter()
                        .filter_map(|p| std::ffi::CString::new(p.as_os_str().as_bytes()).ok())
                        .collect();
                    Some((jc, name, Arc::new(paths), mine))
                }
                Ok(Err((e, true))) => {
                    let why = format!("cannot hold the step to its memory or GPUs: {e}");
                    warn!(job = key.0, step = key.1, "{why}");
                    say_error(&tx, &t, idx, &why).await;
                    return refuse(SlurmError::InternalError, why);
                }
                Ok(Err((e, false))) if !confining => {
                    warn!(
                        job = key.0,
                        step = key.1,
                        "cannot make the step's cgroup: {e}"
                    );
                    None
                }
                // A step of its own memory or GPUs without its cgroup
                // would have the job's (or the node's): not run.
                Ok(Err((e, _))) => {
                    let why = format!("cannot make the step's cgroup: {e}");
                    warn!(job = key.0, step = key.1, "{why}");
                    return refuse(SlurmError::InternalError, why);
                }
                Err(_) if !confining => None,
                Err(_) => {
                    return refuse(SlurmError::InternalError, "cannot make the step's cgroup")
                }
            }
        }
        None => None,
    };
    let cg_paths = step_cg
        .as_ref()
        .map(|(_, _, p, _)| p.clone())
        .unwrap_or_default();
    let here: Vec<u32> = t.layout.tasks.get(idx).cloned().unwrap_or_default();
    // --cpu-bind: within the job's cpuset here, else the node's CPUs.
    let bind = t
        .cpu_bind
        .as_deref()
        .map(slurm_common::cpubind::CpuBind::parse)
        .transpose()
        .unwrap_or(None);
    // Where each CPU sits, and how tasks spread over sockets (`-m *:X`).
    let topo: Vec<slurm_common::cpubind::CpuPlace> = crate::hw::host()
        .topology
        .pus
        .iter()
        .map(|p| (p.id, p.socket, p.core))
        .collect();
    let dist = t
        .distribution
        .as_deref()
        .and_then(|d| slurm_common::cpubind::parse_distribution(d).ok())
        .unwrap_or_default();
    // (The step's own where it holds fewer than the job's.)
    let job_cpus: Vec<u32> = match step_cg.as_ref().map(|(jc, _, _, mine)| {
        if mine.is_empty() {
            jc.cpus.clone()
        } else {
            mine.clone()
        }
    }) {
        Some(c) if !c.is_empty() => c,
        _ => {
            // SAFETY: sysconf has no preconditions.
            let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u32;
            (0..n).collect()
        }
    };
    // The job was suspended meanwhile: its tasks would freeze as they
    // start (holding a worker thread); wait until it may go on.
    let run = t.job_start;
    while crate::jobs::wanted_stopped(&ctx.node, key.0, run) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    steps().insert(
        key,
        StepEntry {
            uid,
            job_start: run,
            pgids: Vec::new(),
            tasks: Vec::new(),
            notice_to: (idx == 0)
                .then(|| here.first().map(|&task| (tx.clone(), task)))
                .flatten(),
        },
    );
    // Each task's CPUs (--cpu-bind), laid out once for the step.
    let layout = bind
        .as_ref()
        .map(|b| {
            b.layout(
                here.len() as u32,
                t.layout.cpus_per_task,
                &job_cpus,
                &topo,
                dist,
            )
        })
        .unwrap_or_default();
    // What each task starts as (slurm.conf's TaskProlog and srun's
    // --task-prolog run in it), and what runs after it.
    let conf = ctx.conf();
    let start_as = crate::taskscript::wrapper(&crate::taskscript::prologs(
        conf.task_prolog.as_deref(),
        t.task_prolog.as_deref(),
    ));
    let epilog_scripts = crate::taskscript::epilogs(
        conf.task_epilog.as_deref(),
        t.task_epilog.as_deref(),
        crate::jobs::script_timeout(ctx),
    );
    drop(conf);
    let mut stdin_of_task0: Option<Box<dyn tokio::io::AsyncWrite + Unpin + Send>> = None;
    // Task 0 is on a terminal: the end of srun's input is typed as ^D.
    let mut task0_pty = false;
    let mut waiters = Vec::new();
    for (local, &global) in here.iter().enumerate() {
        let renumber = ctx
            .cgroups
            .as_ref()
            .is_some_and(|m| m.constrains() && m.conf().constrain_devices && m.confines_devices());
        let mut env = task_env(
            &t,
            &io.launcher,
            &ctx.node,
            &ctx.conf_path_str,
            local as u32,
            global,
            renumber,
        );
        for (k, v) in cpu_bind_env(&layout, bind.as_ref().is_some_and(|b| b.verbose)) {
            env.retain(|(n, _)| *n != k);
            env.push((k, v));
        }
        // srun's limits (`PropagateResourceLimits`), set before the task runs.
        let limits = slurm_common::rlimits::take_from_env(&mut env);
        // The umask srun ran with (`SLURM_UMASK`), else 022.
        let umask = crate::launch::env::umask_of(&env) as libc::mode_t;
        let epilogs = (!epilog_scripts.is_empty()).then(|| crate::taskscript::Epilogs {
            scripts: epilog_scripts.clone(),
            uid,
            gid,
            groups: groups.clone(),
            cwd: t.cwd.clone(),
            env: env.clone(),
            cgroup_procs: Arc::new(Vec::new()),
        });
        // `srun --pty`: task 0 on a pseudo-terminal (its stdin, stdout and
        // stderr, and its controlling terminal).
        let pty = match t.pty.filter(|_| global == 0) {
            Some((rows, cols)) => match open_pty(rows, cols, uid, gid) {
                Ok(p) => Some(p),
                Err(e) => {
                    let msg = format!("slurmstepd: error: cannot open a pseudo-terminal: {e}\n");
                    task_failed(&tx, global, msg).await;
                    continue;
                }
            },
            None => None,
        };
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(&start_as)
            .arg(&prog)
            .args(&t.argv[1..])
            .env_clear()
            .envs(env)
            .kill_on_drop(false);
        let mut master = None;
        match pty {
            Some((m, slave)) => {
                let (Ok(a), Ok(b)) = (slave.try_clone(), slave.try_clone()) else {
                    let _ = tx.send(IoFrame::exit(global, 1 << 8)).await;
                    continue;
                };
                cmd.stdin(Stdio::from(a))
                    .stdout(Stdio::from(b))
                    .stderr(Stdio::from(slave))
                    .env("TERM", term_of(&t.environment));
                master = Some(m);
            }
            None => {
                cmd.stdin(if global == 0 {
                    Stdio::piped()
                } else {
                    Stdio::null()
                })
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            }
        }
        let ctty = master.is_some();
        let groups = groups.clone();
        let (cwd, cwd_notes) = (cwd.clone(), cwd_notes.clone());
        // Each task in its own directory under the step's (task_<local id>).
        let cg_paths = match &step_cg {
            Some((jc, name, _, _)) => match jc.create_step(&format!("{name}/task_{local}")) {
                Ok(procs) => {
                    use std::os::unix::ffi::OsStrExt;
                    Arc::new(
                        procs
                            .iter()
                            .filter_map(|p| std::ffi::CString::new(p.as_os_str().as_bytes()).ok())
                            .collect::<Vec<_>>(),
                    )
                }
                Err(e) => {
                    debug!(
                        job = key.0,
                        step = key.1,
                        "no task cgroup ({e}); the step's"
                    );
                    cg_paths.clone()
                }
            },
            None => cg_paths.clone(),
        };
        let epilogs = epilogs.map(|mut e| {
            e.cgroup_procs = cg_paths.clone();
            e
        });
        let task_cpus = layout.get(local).cloned().flatten();
        // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET only sets bits.
        let cpu_set = task_cpus.as_ref().map(|cpus| unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for &c in cpus {
                if (c as usize) < libc::CPU_SETSIZE as usize {
                    libc::CPU_SET(c as usize, &mut set);
                }
            }
            set
        });
        // SAFETY: only async-signal-safe calls between fork and exec; the
        // group list and cgroup paths were allocated before the fork.
        unsafe {
            cmd.pre_exec(move || {
                crate::launch::exec::join_cgroups(&cg_paths)
                    .map_err(std::io::Error::from_raw_os_error)?;
                if let Some(set) = &cpu_set {
                    if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                slurm_common::rlimits::apply(&limits);
                libc::umask(umask);
                if ctty && libc::ioctl(0, libc::TIOCSCTTY, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                crate::launch::exec::become_user(&groups, gid, uid)?;
                if libc::chdir(cwd.as_ptr()) != 0 {
                    let note = match *libc::__errno_location() {
                        libc::ENOENT => &cwd_notes[0],
                        libc::ENOTDIR => &cwd_notes[2],
                        _ => &cwd_notes[1],
                    };
                    libc::write(2, note.as_ptr().cast(), note.len());
                    if libc::chdir(c"/tmp".as_ptr()) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                let msg = format!("slurmstepd: error: execve(): {prog}: {e}\n");
                task_failed(&tx, global, msg).await;
                continue;
            }
        };
        // The terminal's other copies go, so its reader sees the end.
        drop(cmd);
        let pid = child.id().map(|p| p as i32).unwrap_or(0);
        if let Some(e) = steps().get_mut(&key) {
            e.pgids.push(pid);
            e.tasks.push((pid, local as u32, global));
        }
        if let (Some(cpus), Some(true)) = (&task_cpus, bind.as_ref().map(|b| b.verbose)) {
            let note = format!(
                "cpu-bind=MASK - {}, task {global:2} {local:2} [{pid}]: mask {} set\n",
                ctx.node,
                slurm_common::cpubind::mask_hex(cpus)
            );
            let _ = tx
                .send(IoFrame {
                    kind: IoKind::Stderr,
                    task: global,
                    data: note.into_bytes(),
                })
                .await;
        }
        type Reader = Box<dyn tokio::io::AsyncRead + Unpin + Send>;
        let (out, err): (Option<Reader>, Option<Reader>) = match master {
            Some(m) => {
                let Ok(w) = m.try_clone() else {
                    let _ = child.start_kill();
                    continue;
                };
                stdin_of_task0 = Some(Box::new(tokio::fs::File::from_std(std::fs::File::from(w)))
                    as Box<dyn tokio::io::AsyncWrite + Unpin + Send>);
                task0_pty = true;
                (
                    Some(Box::new(tokio::fs::File::from_std(std::fs::File::from(m)))),
                    None,
                )
            }
            None => {
                if global == 0 {
                    stdin_of_task0 = child
                        .stdin
                        .take()
                        .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncWrite + Unpin + Send>);
                }
                (
                    child.stdout.take().map(|s| Box::new(s) as Reader),
                    child.stderr.take().map(|s| Box::new(s) as Reader),
                )
            }
        };
        let tx2 = tx.clone();
        waiters.push(tokio::spawn(async move {
            let pump = |r: Option<Reader>, kind| {
                let tx = tx2.clone();
                async move {
                    let Some(mut r) = r else { return };
                    let mut buf = vec![0u8; 8192];
                    while let Ok(n) = r.read(&mut buf).await {
                        if n == 0
                            || tx
                                .send(IoFrame {
                                    kind,
                                    task: global,
                                    data: buf[..n].to_vec(),
                                })
                                .await
                                .is_err()
                        {
                            break;
                        }
                    }
                }
            };
            let pump_err = |r: Option<Reader>| {
                let tx = tx2.clone();
                async move {
                    let Some(mut r) = r else { return };
                    let mut buf = vec![0u8; 8192];
                    while let Ok(n) = r.read(&mut buf).await {
                        if n == 0
                            || tx
                                .send(IoFrame {
                                    kind: IoKind::Stderr,
                                    task: global,
                                    data: buf[..n].to_vec(),
                                })
                                .await
                                .is_err()
                        {
                            break;
                        }
                    }
                }
            };
            tokio::join!(pump(out, IoKind::Stdout), pump_err(err));
            let status = child.wait().await.map(|s| s.into_raw()).unwrap_or(1 << 8);
            // Anything the task left behind in its session dies with it.
            // SAFETY: signalling the task's own process group.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
            if let Some(e) = epilogs {
                e.run(key.0).await;
            }
            let _ = tx2.send(IoFrame::exit(global, status)).await;
            pid
        }));
    }
    drop(tx);
    debug!(
        job = key.0,
        step = key.1,
        tasks = here.len(),
        "step launched"
    );
    // A step of a job suspended meanwhile stops with it.
    {
        let c = ctx.clone();
        let job = key.0;
        let _ = tokio::task::spawn_blocking(move || crate::jobs::apply_wanted(&c, job, run)).await;
    }

    // stdin from srun goes to task 0.
    let mut input = io.input;
    tokio::spawn(async move {
        let mut stdin = stdin_of_task0;
        while let Some(f) = input.recv().await {
            match f.kind {
                IoKind::Stdin => {
                    if let Some(s) = stdin.as_mut() {
                        if s.write_all(&f.data).await.is_err() || s.flush().await.is_err() {
                            stdin = None;
                        }
                    }
                }
                IoKind::StdinEof => {
                    if let (true, Some(s)) = (task0_pty, stdin.as_mut()) {
                        let _ = s.write_all(b"\x04").await;
                        let _ = s.flush().await;
                    }
                    stdin = None
                }
                _ => {}
            }
        }
    });
    let ctx2 = ctx.clone();
    tokio::spawn(async move {
        for w in waiters {
            if let Ok(pid) = w.await {
                if let Some(e) = steps().get_mut(&key) {
                    e.pgids.retain(|p| *p != pid);
                    e.tasks.retain(|t| t.0 != pid);
                }
            }
        }
        let mut usage = None;
        if let Some((jc, name, _, _)) = step_cg {
            let gather = ctx2.acct_gather;
            usage = tokio::task::spawn_blocking(move || {
                let u = gather.then(|| jc.step_usage(&name));
                jc.end_step(&name);
                u
            })
            .await
            .ok()
            .flatten();
        }
        // Said whether or not there is usage: the controller frees what
        // the step held here even if its srun never reports (killed).
        ctx2.outbox.push(crate::ctld_link::OutMsg::StepUsage {
            job_id: key.0,
            step_id: key.1,
            usage,
            job_start: run,
        });
        steps().remove(&key);
    });
    Response::Ok
}

/// Signal a step's tasks (`srun` forwarding Ctrl-C, `--kill-on-bad-exit`).
pub fn signal(
    caller_uid: u32,
    privileged: bool,
    job_id: JobId,
    step_id: u32,
    sig: i32,
) -> Response {
    let map = steps();
    let Some(e) = map.get(&(job_id, step_id)) else {
        return refuse(
            SlurmError::InvalidJobId,
            format!("step {job_id}.{step_id} is not running here"),
        );
    };
    if !privileged && e.uid != caller_uid {
        return refuse(SlurmError::AccessDenied, "not your step");
    }
    for p in &e.pgids {
        // SAFETY: signalling the task's process group.
        unsafe {
            libc::kill(-*p, sig);
        }
    }
    Response::Ok
}

/// The controller ending one step here for `cause` (its time limit): its
/// srun, where its first node is here, is told why (`*** STEP 5.0 ON n1
/// CANCELLED AT ... DUE TO TIME LIMIT ***`), its tasks get SIGCONT and
/// SIGTERM, and SIGKILL once `kill_wait` seconds have passed.
/// Whether step `job_id.step_id` runs here, and of which run: `None` when
/// it does not; `Some(start)` (the run's start, when its credential said).
pub fn running_run(job_id: JobId, step_id: u32) -> Option<Option<i64>> {
    steps().get(&(job_id, step_id)).map(|e| e.job_start)
}

pub fn terminate_step(
    job_id: JobId,
    step_id: u32,
    cause: slurm_proto::TermCause,
    node: &str,
    kill_wait: u32,
) -> Response {
    let key = (job_id, step_id);
    let pgids = {
        let map = steps();
        let Some(e) = map.get(&key) else {
            return refuse(
                SlurmError::InvalidJobId,
                format!("step {job_id}.{step_id} is not running here"),
            );
        };
        let when = slurm_common::timefmt::format_timestamp(crate::now());
        if let (Some((tx, task)), Some(line)) = (
            &e.notice_to,
            cause.notice(&format!("STEP {job_id}.{step_id}"), node, &when),
        ) {
            let _ = tx.try_send(IoFrame {
                kind: IoKind::Stderr,
                task: *task,
                data: format!("{line}\n").into_bytes(),
            });
        }
        e.pgids.clone()
    };
    for p in &pgids {
        // SAFETY: signalling the step's tasks' process groups.
        unsafe {
            libc::kill(-*p, libc::SIGCONT);
            libc::kill(-*p, libc::SIGTERM);
        }
    }
    tokio::spawn(async move {
        let left = || {
            steps()
                .get(&key)
                .map(|e| e.pgids.clone())
                .unwrap_or_default()
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(kill_wait.into());
        while tokio::time::Instant::now() < deadline && !left().is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        for p in left() {
            // SAFETY: as above.
            unsafe {
                libc::kill(-p, libc::SIGKILL);
            }
        }
    });
    Response::Ok
}

/// The job steps running here as `scontrol show slurmd` lists them: a
/// batch script by its job id (`5`), a step as `5.0`; by job, then step.
pub fn running_here(ctx: &Ctx) -> Vec<String> {
    let mut all: Vec<(JobId, Option<u32>)> = ctx
        .jobs
        .running_scripts()
        .into_iter()
        .map(|(id, ..)| (id, None))
        .collect();
    all.extend(steps().keys().map(|(j, s)| (*j, Some(*s))));
    all.sort_unstable();
    all.into_iter()
        .map(|(j, s)| match s {
            None => j.to_string(),
            Some(s) => format!("{j}.{s}"),
        })
        .collect()
}

/// The cgroup of a job set up here for its steps (no batch script here).
pub fn job_cgroup(node: &str, job: JobId) -> Option<Arc<crate::cgroup::JobCgroup>> {
    step_jobs()
        .get(&(node.to_string(), job))
        .and_then(|j| j.cgroup.clone())
}

/// `scontrol listpids`: the processes of the jobs here (of job `job`, of
/// its step `step`), each with its step and, for a task itself, its task
/// ids. A user (not `privileged`) sees only their own jobs, and is refused
/// another user's job by name.
pub fn list_pids(
    ctx: &crate::daemon::Ctx,
    caller: u32,
    privileged: bool,
    job: Option<JobId>,
    step: Option<u32>,
) -> Response {
    let mine = |uid: u32| privileged || uid == caller;
    let wanted =
        |j: JobId, s: Option<u32>| job.is_none_or(|w| w == j) && step.is_none_or(|w| Some(w) == s);
    let mut out: Vec<slurm_proto::JobProcess> = Vec::new();
    let mut someone_elses = false;
    let row = |pid, job_id, step: String, ids: Option<(u32, u32)>| slurm_proto::JobProcess {
        pid,
        job_id,
        step,
        local_id: ids.map(|i| i.0),
        global_id: ids.map(|i| i.1),
    };
    // Steps: each task, then what it started (its process group).
    let mut in_steps = std::collections::HashSet::new();
    let mut tasks: Vec<_> = steps()
        .iter()
        .map(|(k, e)| (*k, e.uid, e.tasks.clone()))
        .collect();
    tasks.sort_by_key(|(k, _, _)| *k);
    for ((j, s), uid, ts) in tasks {
        for (pid, _, _) in &ts {
            in_steps.extend(crate::sysinfo::group_members(*pid));
            in_steps.insert(*pid);
        }
        if !wanted(j, Some(s)) {
            continue;
        }
        if !mine(uid) {
            someone_elses = true;
            continue;
        }
        for (pid, local, global) in ts {
            out.push(row(pid, j, s.to_string(), Some((local, global))));
            for p in crate::sysinfo::group_members(pid) {
                if p != pid {
                    out.push(row(p, j, s.to_string(), None));
                }
            }
        }
    }
    // Batch scripts: the script, then the rest of its process group and
    // cgroup that no step holds.
    if step.is_none() {
        for (j, uid, pgid, cgroup) in ctx.jobs.running_scripts() {
            if !wanted(j, None) {
                continue;
            }
            if !mine(uid) {
                someone_elses = true;
                continue;
            }
            out.push(row(pgid, j, "batch".into(), Some((0, 0))));
            let mut rest = crate::sysinfo::group_members(pgid);
            if let Some(cg) = cgroup {
                rest.extend(cg.pids());
            }
            rest.sort_unstable();
            rest.dedup();
            for p in rest {
                if p != pgid && !in_steps.contains(&p) {
                    out.push(row(p, j, "batch".into(), None));
                }
            }
        }
    }
    if out.is_empty() && someone_elses && job.is_some() {
        return refuse(SlurmError::AccessDenied, "not your job");
    }
    Response::Pids(out)
}

/// The process groups of a job's step tasks here.
pub fn job_pgids(job_id: JobId) -> Vec<i32> {
    steps()
        .iter()
        .filter(|((j, _), _)| *j == job_id)
        .flat_map(|(_, e)| e.pgids.clone())
        .collect()
}

/// Tell the sruns of job `job_id`'s steps here `text` (on their first
/// task's stderr, where their notices go); how many were told.
pub fn notify(job_id: JobId, text: &str) -> usize {
    let told: Vec<(mpsc::Sender<IoFrame>, u32)> = steps()
        .iter()
        .filter(|((j, _), _)| *j == job_id)
        .filter_map(|(_, e)| e.notice_to.clone())
        .collect();
    told.iter()
        .filter(|(tx, task)| {
            tx.try_send(IoFrame {
                kind: IoKind::Stderr,
                task: *task,
                data: text.as_bytes().to_vec(),
            })
            .is_ok()
        })
        .count()
}

/// End every step of a job here: SIGCONT and SIGTERM, then SIGKILL after
/// `kill_wait` seconds for what is left. On a step's first node its srun
/// is told why first (`*** STEP 5.0 ON n1 CANCELLED AT ... ***`).
pub async fn terminate_job(
    job_id: JobId,
    kill_wait: u32,
    cause: slurm_proto::TermCause,
    node: &str,
) {
    let pgids = job_pgids(job_id);
    if pgids.is_empty() {
        return;
    }
    let told: Vec<(u32, mpsc::Sender<IoFrame>, u32)> = steps()
        .iter()
        .filter(|((j, _), _)| *j == job_id)
        .filter_map(|((_, s), e)| e.notice_to.clone().map(|(tx, task)| (*s, tx, task)))
        .collect();
    let when = slurm_common::timefmt::format_timestamp(crate::now());
    for (step, tx, task) in told {
        let Some(line) = cause.notice(&format!("STEP {job_id}.{step}"), node, &when) else {
            continue;
        };
        let _ = tx.try_send(IoFrame {
            kind: IoKind::Stderr,
            task,
            data: format!("{line}\n").into_bytes(),
        });
    }
    for p in &pgids {
        // SAFETY: signalling the tasks' process groups.
        unsafe {
            libc::kill(-*p, libc::SIGCONT);
            libc::kill(-*p, libc::SIGTERM);
        }
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(kill_wait as u64);
    while tokio::time::Instant::now() < deadline && !job_pgids(job_id).is_empty() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for p in job_pgids(job_id) {
        // SAFETY: as above.
        unsafe {
            libc::kill(-p, libc::SIGKILL);
        }
    }
    // A task epilog still running is ended with its job.
    crate::taskscript::kill_epilogs(job_id);
    // Give the waiters a moment to reap and report.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while tokio::time::Instant::now() < deadline && !job_pgids(job_id).is_empty() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurm_proto::{StepCred, StepLayout};

    #[test]
    fn task_environment_describes_the_step_and_the_job() {
        let t = TaskLaunch {
            layout: StepLayout {
                job_id: 7,
                step_id: 2,
                nodes: vec!["n1".into(), "n2".into()],
                addrs: vec![],
                tasks: vec![vec![0, 1], vec![2]],
                cpus_per_task: 1,
                job_cpus: vec![2, 1],
                cred: StepCred {
                    job_id: 7,
                    step_id: 2,
                    uid: 1000,
                    gid: 100,
                    user_name: "alice".into(),
                    nodes: vec!["n1".into(), "n2".into()],
                    expires: 0,
                    ..Default::default()
                },
            },
            node_index: 1,
            argv: vec!["hostname".into()],
            environment: vec!["PATH=/bin".into(), "SLURM_PROCID=99".into()],
            cwd: "/tmp".into(),
            job_name: "j".into(),
            partition: "debug".into(),
            account: String::new(),
            cluster_name: "c".into(),
            job_nodes: vec!["n1".into(), "n2".into(), "n3".into()],
            job_cpus: vec![2, 1, 1],
            job_gres: vec![
                vec![],
                vec![slurm_proto::GresAlloc {
                    name: "gpu".into(),
                    kind: None,
                    indices: vec![1, 3],
                }],
            ],
            job_tasks: vec![2, 1, 1],
            cpu_bind: None,
            distribution: None,
            job_start: None,
            job_mem: vec![],
            pty: None,
            task_prolog: None,
            task_epilog: None,
            preserve_env: false,
            bcast: None,
            gpu_bind: None,
        };
        let env = task_env(
            &t,
            "127.0.0.1:4000",
            "n2",
            "/etc/slurm/slurm.conf",
            0,
            2,
            false,
        );
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("PATH"), Some("/bin"));
        assert_eq!(get("SLURM_PROCID"), Some("2"));
        assert_eq!(get("SLURM_LOCALID"), Some("0"));
        assert_eq!(get("SLURM_NODEID"), Some("1"));
        assert_eq!(get("SLURM_STEP_ID"), Some("2"));
        assert_eq!(get("SLURM_NTASKS"), Some("3"));
        assert_eq!(get("SLURM_STEP_NODELIST"), Some("n[1-2]"));
        assert_eq!(get("SLURM_STEP_TASKS_PER_NODE"), Some("2,1"));
        assert_eq!(get("SLURM_JOB_NODELIST"), Some("n[1-3]"));
        assert_eq!(get("SLURM_JOB_CPUS_PER_NODE"), Some("2,1(x2)"));
        assert_eq!(get("SLURM_SRUN_COMM_PORT"), Some("4000"));
        assert_eq!(get("SLURMD_NODENAME"), Some("n2"));
        // n2's GPUs, not the batch node's.
        assert_eq!(get("CUDA_VISIBLE_DEVICES"), Some("1,3"));
        assert_eq!(get("SLURM_JOB_GPUS"), Some("1,3"));
        assert_eq!(get("SLURM_STEP_GPUS"), Some("1,3"));
        assert_eq!(get("SLURM_GTIDS"), Some("2"));
        assert_eq!(get("SLURM_CPUS_ON_NODE"), Some("1"));
        // A step of its own CPUs and GPUs (--exact --gpus=1), bound per
        // task: its share, the job's GPUs still named as the job's.
        let mut own = t.clone();
        own.layout.job_cpus = vec![2, 4];
        own.layout.cred.step_cpus = vec![1, 1];
        own.layout.cred.step_gres = vec![
            vec![],
            vec![slurm_proto::GresAlloc {
                name: "gpu".into(),
                kind: None,
                indices: vec![3],
            }],
        ];
        own.gpu_bind = Some("per_task:1".into());
        let env = task_env(&own, "127.0.0.1:4000", "n2", "/c", 0, 2, false);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("SLURM_CPUS_ON_NODE"), Some("1"));
        assert_eq!(get("CUDA_VISIBLE_DEVICES"), Some("3"));
        assert_eq!(get("SLURM_STEP_GPUS"), Some("3"));
        assert_eq!(get("SLURM_JOB_GPUS"), Some("1,3"));
        // Renumbered where devices are confined: the step's first.
        let env = task_env(&own, "127.0.0.1:4000", "n2", "/c", 0, 2, true);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("CUDA_VISIBLE_DEVICES"), Some("0"));
        // srun -E: srun's counts stay, the rest is the step's.
        let mut t = t;
        t.environment = vec!["SLURM_NTASKS=9".into(), "SLURM_NNODES=7".into()];
        t.preserve_env = true;
        let env = task_env(&t, "127.0.0.1:4000", "n2", "/c", 0, 2, false);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("SLURM_NTASKS"), Some("9"));
        assert_eq!(get("SLURM_NNODES"), Some("7"));
        assert_eq!(get("SLURM_NPROCS"), Some("3"));
        assert_eq!(get("SLURM_STEP_NUM_TASKS"), Some("3"));
        t.preserve_env = false;
        let env = task_env(&t, "127.0.0.1:4000", "n2", "/c", 0, 2, false);
        assert!(env.contains(&("SLURM_NTASKS".to_string(), "3".to_string())));
    }

    #[test]
    fn bound_tasks_are_told_their_masks() {
        let env = cpu_bind_env(&[Some(vec![0]), Some(vec![1, 2])], false);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("SLURM_CPU_BIND"), Some("quiet,mask_cpu:0x1,0x6"));
        assert_eq!(get("SLURM_CPU_BIND_TYPE"), Some("mask_cpu:"));
        assert_eq!(get("SLURM_CPU_BIND_LIST"), Some("0x1,0x6"));
        assert_eq!(get("SLURM_CPU_BIND_VERBOSE"), Some("quiet"));
        assert!(cpu_bind_env(&[None, None], true).is_empty());
    }
}
