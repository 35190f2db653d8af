//! Starting a batch script: spool files, environment, output files, and the
//! spawn as the job's user.
//!
//! [`prepare`] does everything that may block or allocate (user and group
//! look-ups, the spool directory, the environment, the paths) and builds the
//! [`exec::ChildPlan`]; [`spawn`] forks and execs it. The child joins the
//! job's cgroup when there is one ([`Prepared::join_cgroups`]), then becomes
//! a session and process-group leader, so without cgroups the job's
//! processes are its group.

pub mod env;
pub mod exec;
pub mod pattern;

use slurm_proto::BatchLaunch;
use std::io::{self, Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// Node-side facts a launch needs.
#[derive(Debug, Clone)]
pub struct LaunchParams<'a> {
    pub node: &'a str,
    /// Absolute path of slurm.conf (for `SLURM_CONF`).
    pub conf_path: &'a str,
    /// This daemon's spool directory.
    pub spool: &'a Path,
    /// Job start time, Unix seconds.
    pub start_time: i64,
    /// Devices are constrained to the job's GPUs, which it then sees as
    /// 0..n (CUDA_VISIBLE_DEVICES renumbered).
    pub renumber_gpus: bool,
    /// slurm.conf's `TaskProlog`/`TaskEpilog` (the script is a task) and
    /// how long the epilog may run (zero: no limit).
    pub task_prolog: Option<&'a str>,
    pub task_epilog: Option<&'a str>,
    pub epilog_limit: std::time::Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("user id {0} is not known on this node")]
    UnknownUser(u32),
    #[error("invalid launch request: {0}")]
    Nul(#[from] exec::NulError),
    #[error("cannot write {path}: {source}")]
    Spool { path: PathBuf, source: io::Error },
    #[error("{what} failed for {path}: {source}")]
    Child {
        what: &'static str,
        path: String,
        source: io::Error,
    },
    #[error("cannot start the batch script: {0}")]
    Spawn(io::Error),
    #[error("cannot set up the job's cgroup: {0}")]
    Cgroup(String),
}

/// A launch ready to be spawned.
pub struct Prepared {
    plan: exec::ChildPlan,
    pub job_dir: PathBuf,
    pub script_path: PathBuf,
    pub stdin: String,
    pub stdout: String,
    pub stderr: String,
    pub work_dir: String,
    pub user_name: String,
    /// `cgroup.procs` files the script joins before it execs.
    pub cgroup_procs: Vec<PathBuf>,
    /// What runs once the script has ended (`TaskEpilog`).
    pub epilogs: Option<crate::taskscript::Epilogs>,
}

impl Prepared {
    /// Have the script join these cgroups (the job's `step_batch`).
    pub fn join_cgroups(&mut self, procs: Vec<PathBuf>) -> Result<(), LaunchError> {
        self.plan.set_cgroups(&procs)?;
        if let Some(e) = self.epilogs.as_mut() {
            use std::os::unix::ffi::OsStrExt;
            e.cgroup_procs = std::sync::Arc::new(
                procs
                    .iter()
                    .filter_map(|p| std::ffi::CString::new(p.as_os_str().as_bytes()).ok())
                    .collect(),
            );
        }
        self.cgroup_procs = procs;
        Ok(())
    }
}

/// `job00004`: a job's directory name in the spool (5-digit zero padding).
pub fn job_dir_name(job_id: u32) -> String {
    format!("job{job_id:05}")
}

/// Expand an I/O pattern and make it absolute against the working directory.
pub fn resolve_io_path(pat: &str, vars: &pattern::PatternVars, work_dir: &str) -> String {
    let p = pattern::expand(pat, vars);
    if p.starts_with('/') {
        p
    } else {
        Path::new(work_dir).join(p).to_string_lossy().into_owned()
    }
}

/// Look up the user, write the spool files and build the child's plan.
/// Blocking (NSS, files): run it off the async workers.
pub fn prepare(l: &BatchLaunch, p: &LaunchParams) -> Result<Prepared, LaunchError> {
    let user = slurm_common::users::user_by_uid(l.uid).ok_or(LaunchError::UnknownUser(l.uid))?;
    let groups = slurm_common::users::group_list(&user.name, l.gid);
    let work_dir = if l.work_dir.is_empty() {
        user.home.clone()
    } else {
        l.work_dir.clone()
    };
    let user_name = if l.user_name.is_empty() {
        user.name.clone()
    } else {
        l.user_name.clone()
    };

    let vars = pattern::PatternVars::batch(l.job_id, &l.job_name, &user_name, p.node);
    let stdout = resolve_io_path(
        l.std_out.as_deref().unwrap_or("slurm-%j.out"),
        &vars,
        &work_dir,
    );
    let stderr = match l.std_err.as_deref() {
        Some(e) => resolve_io_path(e, &vars, &work_dir),
        None => stdout.clone(),
    };
    let stdin = match l.std_in.as_deref() {
        Some(i) => resolve_io_path(i, &vars, &work_dir),
        None => "/dev/null".to_string(),
    };

    let mut env = env::batch_env(
        l,
        &env::EnvParams {
            node: p.node,
            conf_path: p.conf_path,
            start_time: p.start_time,
            renumber_gpus: p.renumber_gpus,
        },
    );
    let umask = env::job_umask(&env);
    // The submitting shell's limits (`PropagateResourceLimits`).
    let limits = slurm_common::rlimits::take_from_env(&mut env.0);

    let job_dir = p.spool.join(job_dir_name(l.job_id));
    let script_path = write_spool(&job_dir, &l.script, l.uid, l.gid)?;
    let script_str = script_path.to_string_lossy().into_owned();

    // With a TaskProlog the script starts as a shell that runs it first.
    let prologs = crate::taskscript::prologs(p.task_prolog, None);
    let (script, args) = if prologs.is_empty() {
        (script_str.clone(), l.argv.clone())
    } else {
        let mut args = vec![
            "-c".to_string(),
            crate::taskscript::wrapper(&prologs),
            script_str.clone(),
        ];
        args.extend(l.argv.iter().cloned());
        ("/bin/sh".to_string(), args)
    };
    let scripts = crate::taskscript::epilogs(p.task_epilog, None, p.epilog_limit);
    let epilogs = (!scripts.is_empty()).then(|| crate::taskscript::Epilogs {
        scripts,
        uid: l.uid,
        gid: l.gid,
        groups: groups.clone(),
        cwd: work_dir.clone(),
        env: env.0.clone(),
        cgroup_procs: std::sync::Arc::new(Vec::new()),
    });
    let plan = exec::ChildPlan::new(&exec::PlanSpec {
        uid: l.uid,
        gid: l.gid,
        groups: &groups,
        umask,
        stdin: &stdin,
        stdout: &stdout,
        stderr: &stderr,
        append: l.append_output,
        work_dir: &work_dir,
        script: &script,
        args: &args,
        env: &env.0,
        limits: &limits,
    });
    let plan = match plan {
        Ok(p) => p,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&job_dir);
            return Err(e.into());
        }
    };
    Ok(Prepared {
        plan,
        job_dir,
        script_path,
        stdin,
        stdout,
        stderr,
        work_dir,
        user_name,
        cgroup_procs: Vec::new(),
        epilogs,
    })
}

/// Create `<spool>/jobNNNNN/slurm_script` (dir and file 0700, owned by the user).
pub fn write_spool(
    job_dir: &Path,
    script: &str,
    uid: u32,
    gid: u32,
) -> Result<PathBuf, LaunchError> {
    let err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| LaunchError::Spool { path, source }
    };
    if job_dir.exists() {
        std::fs::remove_dir_all(job_dir).map_err(err(job_dir))?;
    }
    std::fs::create_dir(job_dir).map_err(err(job_dir))?;
    std::fs::set_permissions(job_dir, std::fs::Permissions::from_mode(0o700))
        .map_err(err(job_dir))?;
    let path = job_dir.join("slurm_script");
    let write = || -> io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o700)
            .open(&path)?;
        f.write_all(script.as_bytes())?;
        f.sync_all()?;
        std::os::unix::fs::chown(&path, Some(uid), Some(gid))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))
    };
    let res = write().map_err(err(&path)).and_then(|()| {
        std::os::unix::fs::chown(job_dir, Some(uid), Some(gid)).map_err(err(job_dir))
    });
    if let Err(e) = res {
        let _ = std::fs::remove_dir_all(job_dir);
        return Err(e);
    }
    Ok(path)
}

fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 returned two fresh descriptors we now own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Where a batch script's child records that it runs (its pid, written
/// just before the exec; see [`exec::ChildPlan::commit_to`]): beside the
/// job's state file, in the daemon's own directory (root's alone: the
/// job's user owns its job directory and could write a record there).
pub fn launch_record(state_dir: &Path, job_id: u32) -> PathBuf {
    state_dir.join(format!("{job_id}.launched"))
}

/// The pid a launch record holds and when it was written: `None` when the
/// child never committed (it did not and will not run the script). Only
/// a regular file, never through a link, and only its first bytes.
pub fn read_launch_record(path: &Path) -> Option<(i32, std::time::SystemTime)> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = f.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    let mut buf = [0u8; 16];
    let n = (&f).read(&mut buf).ok()?;
    let pid = std::str::from_utf8(&buf[..n]).ok()?.trim().parse().ok()?;
    (pid > 1).then_some((pid, meta.modified().ok()?))
}

/// Fork and exec the prepared script, its child recording at `record` that
/// it runs. Must run inside a tokio runtime. On failure the spool
/// directory is removed.
pub fn spawn(prep: Prepared, record: &Path) -> Result<tokio::process::Child, LaunchError> {
    let Prepared {
        mut plan,
        job_dir,
        script_path,
        stdin,
        stdout,
        stderr,
        cgroup_procs,
        ..
    } = prep;
    let res = (|| {
        let (r, w) = pipe_cloexec().map_err(LaunchError::Spawn)?;
        plan.err_fd = std::os::fd::AsRawFd::as_raw_fd(&w);
        let _ = std::fs::remove_file(record);
        let record = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(record)
            .map_err(LaunchError::Spawn)?;
        plan.commit_to(
            std::os::fd::AsRawFd::as_raw_fd(&record),
            std::process::id() as libc::pid_t,
        );
        let mut cmd = tokio::process::Command::new(&script_path);
        cmd.env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(false);
        // SAFETY: ChildPlan::run only makes async-signal-safe calls on data
        // prepared before the fork (see the exec module).
        unsafe {
            cmd.pre_exec(move || plan.run());
        }
        let spawned = cmd.spawn();
        drop(cmd);
        drop(w);
        drop(record);
        match spawned {
            Ok(child) => Ok(child),
            Err(e) => {
                let mut buf = [0u8; 5];
                let mut f = std::fs::File::from(r);
                let n = f.read(&mut buf).unwrap_or(0);
                if n == 5 {
                    if let Some(step) = exec::Step::from_u8(buf[0]) {
                        let errno = i32::from_ne_bytes([buf[1], buf[2], buf[3], buf[4]]);
                        let path = match step {
                            exec::Step::OpenStdin => stdin.clone(),
                            exec::Step::OpenStdout => stdout.clone(),
                            exec::Step::OpenStderr => stderr.clone(),
                            exec::Step::JoinCgroup => cgroup_procs
                                .first()
                                .map(|p| p.display().to_string())
                                .unwrap_or_default(),
                            _ => script_path.to_string_lossy().into_owned(),
                        };
                        return Err(LaunchError::Child {
                            what: step.what(),
                            path,
                            source: io::Error::from_raw_os_error(errno),
                        });
                    }
                }
                Err(LaunchError::Spawn(e))
            }
        }
    })();
    if res.is_err() {
        let _ = std::fs::remove_dir_all(&job_dir);
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn io_paths_resolve_against_the_work_dir() {
        let v = pattern::PatternVars::batch(7, "j", "u", "n1");
        assert_eq!(resolve_io_path("slurm-%j.out", &v, "/w"), "/w/slurm-7.out");
        assert_eq!(resolve_io_path("/abs/%x.%N", &v, "/w"), "/abs/j.n1");
        assert_eq!(job_dir_name(4), "job00004");
        assert_eq!(job_dir_name(123456), "job123456");
    }

    fn is_root() -> bool {
        // SAFETY: geteuid cannot fail.
        unsafe { libc::geteuid() == 0 }
    }

    fn world_writable_tempdir() -> tempfile::TempDir {
        let d = tempfile::Builder::new()
            .prefix("slurmd-test")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        d
    }

    /// A spool as the daemon makes it: root's, traversable by everyone.
    fn spool_tempdir() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        d
    }

    fn launch_for(uid: u32, gid: u32, work: &Path, script: &str) -> BatchLaunch {
        let mut l = env::tests::reference_launch();
        l.uid = uid;
        l.gid = gid;
        l.user_name = slurm_common::users::user_name_or_id(uid);
        l.work_dir = work.to_string_lossy().into_owned();
        l.script = script.into();
        l.std_out = Some("out-%j.txt".into());
        l.argv = vec!["first arg".into()];
        l
    }

    #[tokio::test]
    async fn runs_a_script_as_nobody() {
        if !is_root() {
            eprintln!("skipped: needs root to switch users");
            return;
        }
        let work = world_writable_tempdir();
        let spool = spool_tempdir();
        let l = launch_for(
            65534,
            65534,
            work.path(),
            "#!/bin/sh\nid -u\nid -g\necho \"arg=$1\"\necho \"pid=$SLURM_TASK_PID self=$$\"\necho \"job=$SLURM_JOB_ID dir=$(pwd)\"\necho to-stderr >&2\nexit 3\n",
        );
        let p = LaunchParams {
            node: "n1",
            conf_path: "/etc/slurm/slurm.conf",
            spool: spool.path(),
            start_time: 1,
            renumber_gpus: false,
            task_prolog: None,
            task_epilog: None,
            epilog_limit: std::time::Duration::ZERO,
        };
        let prep = prepare(&l, &p).unwrap();
        let script = prep.script_path.clone();
        let meta = std::fs::metadata(&script).unwrap();
        assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), 65534);
        assert_eq!(meta.permissions().mode() & 0o777, 0o700);
        assert!(script.ends_with("job00004/slurm_script"));
        let record = spool.path().join("4.launched");
        let mut child = spawn(prep, &record).unwrap();
        let pid = child.id().unwrap() as i32;
        let status = child.wait().await.unwrap();
        assert_eq!(status.into_raw(), 3 << 8);
        // The child wrote its pid into the record just before the exec.
        assert_eq!(read_launch_record(&record).map(|r| r.0), Some(pid));
        // A record that is a link (to anything) is no record.
        let link = spool.path().join("5.launched");
        std::os::unix::fs::symlink(&record, &link).unwrap();
        assert_eq!(read_launch_record(&link), None);
        let fifo = spool.path().join("6.launched");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        assert_eq!(
            read_launch_record(&fifo),
            None,
            "a FIFO neither blocks nor counts"
        );
        let out = std::fs::read_to_string(work.path().join("out-4.txt")).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "65534", "{out}");
        assert_eq!(lines[1], "65534", "{out}");
        assert_eq!(lines[2], "arg=first arg");
        let (a, b) = lines[3].split_once(' ').unwrap();
        assert_eq!(a.trim_start_matches("pid="), b.trim_start_matches("self="));
        assert_eq!(lines[4], format!("job=4 dir={}", work.path().display()));
        assert_eq!(lines[5], "to-stderr");
        let meta = std::fs::metadata(work.path().join("out-4.txt")).unwrap();
        assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), 65534);
    }

    #[tokio::test]
    async fn bad_work_dir_goes_to_tmp_and_bad_output_fails_the_spawn() {
        if !is_root() {
            eprintln!("skipped: needs root to switch users");
            return;
        }
        let work = world_writable_tempdir();
        let spool = spool_tempdir();
        let p = LaunchParams {
            node: "n1",
            conf_path: "/etc/slurm/slurm.conf",
            spool: spool.path(),
            start_time: 1,
            renumber_gpus: false,
            task_prolog: None,
            task_epilog: None,
            epilog_limit: std::time::Duration::ZERO,
        };
        // Working directory missing: message on stderr, runs in /tmp.
        let mut l = launch_for(
            65534,
            65534,
            Path::new("/nonexistent-dir"),
            "#!/bin/sh\npwd\n",
        );
        let out = work.path().join("o.txt");
        l.std_out = Some(out.to_string_lossy().into_owned());
        let mut child = spawn(prepare(&l, &p).unwrap(), &spool.path().join("launched")).unwrap();
        assert_eq!(child.wait().await.unwrap().into_raw(), 0);
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "slurmstepd: error: couldn't chdir to `/nonexistent-dir': No such file or directory: going to /tmp instead\n/tmp\n"
        );
        // Separate stderr file and a missing interpreter: exit 127 with a message.
        let mut l = launch_for(65534, 65534, work.path(), "#!/no/such/shell\n");
        l.job_id = 5;
        l.std_err = Some("err-%j.txt".into());
        let mut child = spawn(prepare(&l, &p).unwrap(), &spool.path().join("launched")).unwrap();
        assert_eq!(child.wait().await.unwrap().into_raw(), 127 << 8);
        let err = std::fs::read_to_string(work.path().join("err-5.txt")).unwrap();
        assert!(
            err.contains("execve()") && err.contains("No such file or directory"),
            "{err}"
        );
        assert_eq!(
            std::fs::read_to_string(work.path().join("out-5.txt")).unwrap(),
            ""
        );
        // Output in a directory nobody may write: the spawn fails and says why.
        let locked = tempfile::tempdir().unwrap();
        let mut l = launch_for(65534, 65534, locked.path(), "#!/bin/sh\ntrue\n");
        l.job_id = 6;
        match spawn(prepare(&l, &p).unwrap(), &spool.path().join("launched")) {
            Err(LaunchError::Child { what, path, source }) => {
                assert_eq!(what, "opening the output file");
                assert!(path.ends_with("out-6.txt"));
                assert_eq!(source.raw_os_error(), Some(libc::EACCES));
            }
            other => panic!("unexpected {:?}", other.map(|_| ())),
        }
        assert!(!spool.path().join("job00006").exists());
    }

    #[test]
    fn unknown_users_are_refused() {
        let spool = tempfile::tempdir().unwrap();
        let l = launch_for(3_999_999_999, 1, Path::new("/tmp"), "#!/bin/sh\n");
        let p = LaunchParams {
            node: "n1",
            conf_path: "/etc/slurm/slurm.conf",
            spool: spool.path(),
            start_time: 1,
            renumber_gpus: false,
            task_prolog: None,
            task_epilog: None,
            epilog_limit: std::time::Duration::ZERO,
        };
        assert!(matches!(
            prepare(&l, &p),
            Err(LaunchError::UnknownUser(3_999_999_999))
        ));
    }
}
