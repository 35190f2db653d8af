//! A node daemon beside a kubelet (`slurmd --kubelet[=CGROUP_ROOT]`).
//!
//! The node registers as a kubelet node: the controller then gives it pods'
//! placeholder jobs (slurm-bridge's `EXTERNAL_JOB`s) as well as batch jobs,
//! counting both against the node's cores. When a placeholder job starts
//! here the controller sends its allocation with the uid of the pod bound
//! to this node; the daemon takes that many CPUs from the same book its
//! batch jobs' cpusets come from, waits for the kubelet to make the pod's
//! cgroup, and writes those CPUs into the pod's `cpuset.cpus` and those of
//! its containers (deepest first, as cgroup v1 wants a child's CPUs inside
//! its parent's), again for containers that come later. So pods and jobs
//! never share a core. When the job ends the CPUs go back.
//!
//! The pod's cgroup is found where the kubelet puts it, under
//! `CGROUP_ROOT` (its `--cgroup-root`, default the hierarchy's top) with
//! either cgroup driver: `kubepods[/burstable|/besteffort]/pod<uid>`
//! (cgroupfs) or `kubepods.slice[/kubepods-<qos>.slice]/kubepods[-<qos>]-
//! pod<uid with _>.slice` (systemd); in the `cpuset` hierarchy on cgroup v1,
//! in the unified one on v2.
//!
//! Each pinned pod is recorded in the spool (`pods.<node>/<job>.json`:
//! job, pod uid, CPUs) until its job ends, so a restarted daemon holds
//! those CPUs again, keeps the pod pinned, and reports the job as running
//! here (the controller then ends it here if it ended meanwhile).

use crate::daemon::Ctx;
use crate::hw::format_cpu_list;
use serde::{Deserialize, Serialize};
use slurm_proto::JobId;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::{info, warn};

/// How long a placement waits for the kubelet to make the pod's cgroup.
const FIND_WITHIN: Duration = Duration::from_secs(600);

/// The daemon's kubelet side: where pods' cgroups are, and the pods placed.
#[derive(Debug, Default)]
pub struct Kubelet {
    /// The kubelet's cgroup root below each hierarchy's top ("" for the top).
    root: String,
    placed: Mutex<HashMap<JobId, Placed>>,
}

/// A pod being followed: the flag that stops it, and what the pod had used
/// at the last look (reported at the end as the job's extern step).
#[derive(Debug)]
struct Placed {
    stop: Arc<AtomicBool>,
    usage: Arc<Mutex<Option<crate::cgroup::Usage>>>,
}

/// A pinned pod as the spool keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct PodFile {
    job: JobId,
    uid: String,
    cpus: Vec<u32>,
}

fn pods_dir(ctx: &Ctx) -> PathBuf {
    ctx.spool.join(format!("pods.{}", ctx.node))
}

fn pod_file(ctx: &Ctx, job: JobId) -> PathBuf {
    pods_dir(ctx).join(format!("{job}.json"))
}

/// Where pod `uid`'s cgroup may be, below the kubelet's root: the cgroupfs
/// driver's paths, then the systemd driver's.
pub fn pod_dirs(root: &str, uid: &str) -> Vec<PathBuf> {
    let base = PathBuf::from(root.trim_matches('/'));
    let under = uid.replace('-', "_");
    let mut v = vec![
        base.join("kubepods").join(format!("pod{uid}")),
        base.join("kubepods/burstable").join(format!("pod{uid}")),
        base.join("kubepods/besteffort").join(format!("pod{uid}")),
        base.join("kubepods.slice")
            .join(format!("kubepods-pod{under}.slice")),
    ];
    for qos in ["burstable", "besteffort"] {
        v.push(
            base.join("kubepods.slice")
                .join(format!("kubepods-{qos}.slice"))
                .join(format!("kubepods-{qos}-pod{under}.slice")),
        );
    }
    v
}

/// Every directory of the tree at `dir`, deepest first.
fn deepest_first(dir: &Path) -> Vec<PathBuf> {
    let mut all = vec![(0usize, dir.to_path_buf())];
    let mut i = 0;
    while i < all.len() {
        let (depth, d) = all[i].clone();
        if let Ok(rd) = std::fs::read_dir(&d) {
            for e in rd.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    all.push((depth + 1, e.path()));
                }
            }
        }
        i += 1;
    }
    all.sort_by_key(|a| std::cmp::Reverse(a.0));
    all.into_iter().map(|(_, d)| d).collect()
}

/// Write `cpus` into every `cpuset.cpus` of the tree at `dir`, deepest
/// first, where it differs; how many were written.
pub fn apply(dir: &Path, cpus: &[u32]) -> std::io::Result<usize> {
    let want = format_cpu_list(cpus);
    let mut n = 0;
    for d in deepest_first(dir) {
        let f = d.join("cpuset.cpus");
        let Ok(have) = std::fs::read_to_string(&f) else {
            continue;
        };
        let same = crate::hw::parse_cpu_list(have.trim()).is_some_and(|h| h == cpus);
        if !same {
            std::fs::write(&f, &want)?;
            n += 1;
        }
    }
    Ok(n)
}

impl Kubelet {
    pub fn new(root: &str) -> Kubelet {
        Kubelet {
            root: root.to_string(),
            placed: Mutex::new(HashMap::new()),
        }
    }

    fn placed(&self) -> std::sync::MutexGuard<'_, HashMap<JobId, Placed>> {
        self.placed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The placeholder jobs whose pods are pinned here.
    pub fn jobs(&self) -> Vec<JobId> {
        self.placed().keys().copied().collect()
    }

    /// The hierarchy holding pods' cpusets, from the daemon's cgroups.
    fn cpuset_top(ctx: &Ctx) -> Option<PathBuf> {
        let m = ctx.cgroups.as_ref()?;
        let mount = m.conf().mountpoint.clone();
        Some(match m.version {
            crate::cgroup::Version::V1 => mount.join("cpuset"),
            crate::cgroup::Version::V2 => mount,
        })
    }
}

/// A pod's placeholder job starts here: take its CPUs and pin its pod to
/// them once the kubelet has made the pod's cgroup.
pub fn place(ctx: &Arc<Ctx>, f: &slurm_proto::JobPrologue) {
    let Some(k) = ctx.kubelet.as_ref() else {
        warn!(
            job = f.job_id,
            "a pod's placeholder job came to a daemon started without --kubelet"
        );
        return;
    };
    let Some(i) = f.alloc.nodes.iter().position(|n| *n == ctx.node) else {
        return;
    };
    let Some(uid) = f.pod_uids.get(i).filter(|u| valid_uid(u)).cloned() else {
        warn!(job = f.job_id, "no valid pod uid for this node in the job");
        return;
    };
    let n = f.alloc.cpus.get(i).copied().unwrap_or(1);
    let (Some(m), Some(top)) = (ctx.cgroups.as_ref(), Kubelet::cpuset_top(ctx)) else {
        warn!(job = f.job_id, "no cgroups here: pod {uid} is not pinned");
        return;
    };
    if !m.conf().constrain_cores {
        info!(job = f.job_id, "ConstrainCores=no: pod {uid} is not pinned");
        return;
    }
    let cpus = m.take_cpus(f.job_id, n);
    let rec = PodFile {
        job: f.job_id,
        uid: uid.clone(),
        cpus: cpus.clone(),
    };
    let saved = std::fs::create_dir_all(pods_dir(ctx)).and_then(|_| {
        let b = serde_json::to_vec(&rec).map_err(std::io::Error::other)?;
        crate::ledger::write_private(&pod_file(ctx, f.job_id), &b)
    });
    if let Err(e) = saved {
        warn!(
            job = f.job_id,
            "cannot record pod {uid} in the spool: {e} (a restart would not pin it again)"
        );
    }
    follow(ctx, k, top, f.job_id, uid, cpus);
}

/// Re-adopt the pods a previous daemon pinned (from the spool): their CPUs
/// are held again and they are pinned as before. Call once at start-up.
pub fn adopt(ctx: &Arc<Ctx>) {
    let (Some(k), Some(m), Some(top)) = (
        ctx.kubelet.as_ref(),
        ctx.cgroups.as_ref(),
        Kubelet::cpuset_top(ctx),
    ) else {
        return;
    };
    let Ok(rd) = std::fs::read_dir(pods_dir(ctx)) else {
        return;
    };
    for e in rd.flatten() {
        let path = e.path();
        let rec = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<PodFile>(&b).ok())
            .filter(|r| valid_uid(&r.uid));
        let Some(rec) = rec else {
            warn!("ignoring malformed pod record {}", path.display());
            let _ = std::fs::remove_file(&path);
            continue;
        };
        info!(
            job = rec.job,
            "re-adopted pod {} on CPUs {}",
            rec.uid,
            format_cpu_list(&rec.cpus)
        );
        m.hold_cpus(rec.job, rec.cpus.clone());
        follow(ctx, k, top.clone(), rec.job, rec.uid, rec.cpus);
    }
}

/// Pin pod `uid` (job `job`) to `cpus` under hierarchy `top`, and keep it
/// so, until the job ends here.
fn follow(ctx: &Arc<Ctx>, k: &Kubelet, top: PathBuf, job: JobId, uid: String, cpus: Vec<u32>) {
    let stop = Arc::new(AtomicBool::new(false));
    let usage = Arc::new(Mutex::new(None));
    let placed = Placed {
        stop: stop.clone(),
        usage: usage.clone(),
    };
    if let Some(old) = k.placed().insert(job, placed) {
        old.stop.store(true, Ordering::Relaxed);
    }
    let dirs: Vec<PathBuf> = pod_dirs(&k.root, &uid)
        .into_iter()
        .map(|d| top.join(d))
        .collect();
    info!(job, "pod {uid}: CPUs {} here", format_cpu_list(&cpus));
    let ctx = ctx.clone();
    let mut f = Follow {
        job,
        uid,
        dirs,
        cpus,
        found: None,
        said: false,
        start: std::time::Instant::now(),
    };
    // One look at a time on the blocking pool, none held between looks.
    tokio::spawn(async move {
        while !stop.load(Ordering::Relaxed) {
            let (ctx, top, usage) = (ctx.clone(), top.clone(), usage.clone());
            let Ok((back, go)) = tokio::task::spawn_blocking(move || {
                let go = f.step(|d| {
                    let rel = d.strip_prefix(&top).unwrap_or(d);
                    if let Some(m) = ctx.cgroups.as_ref() {
                        let u = m.usage_at(rel);
                        *usage.lock().unwrap_or_else(|p| p.into_inner()) = Some(u);
                    }
                });
                (f, go)
            })
            .await
            else {
                return;
            };
            f = back;
            if !go {
                return;
            }
            let wait = if f.found.is_some() { 500 } else { 100 };
            tokio::time::sleep(Duration::from_millis(wait)).await;
        }
    });
}

/// Following one pod: pin its tree, and keep it pinned as containers come.
struct Follow {
    job: JobId,
    uid: String,
    dirs: Vec<PathBuf>,
    cpus: Vec<u32>,
    found: Option<PathBuf>,
    said: bool,
    start: std::time::Instant,
}

impl Follow {
    /// One look: find the pod's cgroup, pin it, read its usage with `look`;
    /// whether to look again.
    fn step(&mut self, look: impl Fn(&Path)) -> bool {
        let (job, uid) = (self.job, &self.uid);
        if self.found.is_none() {
            self.found = self.dirs.iter().find(|d| d.is_dir()).cloned();
            if self.found.is_none() && self.start.elapsed() > FIND_WITHIN {
                warn!(job, "pod {uid}: its cgroup never appeared; not pinned");
                return false;
            }
        }
        let Some(d) = &self.found else {
            return true;
        };
        if !d.is_dir() {
            return false;
        }
        match apply(d, &self.cpus).inspect(|_| look(d)) {
            Ok(n) if n > 0 && !self.said => {
                info!(
                    job,
                    "pod {uid}: pinned to CPUs {} ({})",
                    format_cpu_list(&self.cpus),
                    d.display()
                );
                self.said = true;
            }
            Ok(_) => {}
            Err(e) => warn!(
                job,
                "pod {uid}: cannot set its cpuset under {}: {e}",
                d.display()
            ),
        }
        true
    }
}

/// The job ended here: stop following its pod, report what it used (the
/// job's extern step) and give its CPUs back.
pub fn release(ctx: &Ctx, job: JobId) {
    let Some(k) = ctx.kubelet.as_ref() else {
        return;
    };
    let Some(p) = k.placed().remove(&job) else {
        return;
    };
    let _ = std::fs::remove_file(pod_file(ctx, job));
    p.stop.store(true, Ordering::Relaxed);
    if let Some(m) = ctx.cgroups.as_ref() {
        m.release_cpus(job);
    }
    let usage = p.usage.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(usage) = usage {
        ctx.outbox.push(crate::ctld_link::OutMsg::StepUsage {
            job_id: job,
            step_id: slurm_proto::EXTERN_STEP,
            usage: Some(usage),
            // (A pod's job is never requeued.)
            job_start: None,
        });
    }
}

/// A pod uid as Kubernetes makes them (no path separators, no dots).
fn valid_uid(u: &str) -> bool {
    !u.is_empty() && u.len() <= 64 && u.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_cgroups_are_looked_for_under_both_drivers() {
        let d = pod_dirs("", "ab-12");
        assert!(d.contains(&PathBuf::from("kubepods/besteffort/podab-12")));
        assert!(d.contains(&PathBuf::from(
            "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podab_12.slice"
        )));
        let d = pod_dirs("/site/", "x");
        assert!(d.iter().all(|p| p.starts_with("site")));
        assert!(!valid_uid("../etc"));
        assert!(!valid_uid(""));
        assert!(valid_uid("00000000-0000-4000-8000-0000000000ff"));
    }

    #[test]
    fn a_pod_tree_is_pinned_deepest_first_and_only_where_it_differs() {
        let t = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let pod = t.path().join("podx");
        let ctr = pod.join("ctr");
        std::fs::create_dir_all(&ctr).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(pod.join("cpuset.cpus"), "0-3\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(ctr.join("cpuset.cpus"), "0-3\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(apply(&pod, &[2, 3]).ok(), Some(2));
        assert_eq!(
            std::fs::read_to_string(pod.join("cpuset.cpus"))
                .ok()
                .as_deref(),
            Some("2-3")
        );
        assert_eq!(
            std::fs::read_to_string(ctr.join("cpuset.cpus"))
                .ok()
                .as_deref(),
            Some("2-3")
        );
        assert_eq!(apply(&pod, &[2, 3]).ok(), Some(0));
        let order = deepest_first(&pod);
        assert_eq!(order.first(), Some(&ctr));
    }
}
