//! Task prologs and epilogs: slurm.conf's `TaskProlog`/`TaskEpilog` and
//! srun's `--task-prolog`/`--task-epilog`, run as the job's user for each
//! task (a batch script is one task).
//!
//! A task prolog runs inside the task, in the process that becomes it: a
//! small `/bin/sh` program runs each prolog (its pid is the task's,
//! `SLURM_TASK_PID`, its cgroup, CPUs, limits and identity the task's), reads
//! what it printed and then execs the task's program. As Slurm's, a line
//! `export NAME=value` sets a variable for the task, `unset NAME` removes
//! one and `print text` writes text to the task's output; a prolog that
//! fails ends the task with its status, saying so on the task's stderr.
//! slurm.conf's prolog runs first, then srun's.
//!
//! A task epilog runs after the task has ended, from the node daemon, as
//! the job's user in the task's cgroup, with the task's environment
//! (`SLURM_SCRIPT_CONTEXT=epilog_task`), its input and output discarded:
//! srun's first (at most 5 s, as Slurm's), then slurm.conf's (at most
//! `PrologEpilogTimeout`, none when unset). A failure is logged.

use std::ffi::CString;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

/// How long srun's `--task-epilog` may run (Slurm's limit).
pub const USER_EPILOG_LIMIT: Duration = Duration::from_secs(5);

/// Task epilogs running now, by job: (the epilog's session, its pid). Each
/// runs in a session of its own, out of the tasks' process groups, so a
/// job being ended kills these too ([`kill_epilogs`]).
static RUNNING: std::sync::LazyLock<std::sync::Mutex<Vec<(u32, i32)>>> =
    std::sync::LazyLock::new(Default::default);

fn running() -> std::sync::MutexGuard<'static, Vec<(u32, i32)>> {
    RUNNING.lock().unwrap_or_else(|p| p.into_inner())
}

/// Kill the task epilogs of `job` still running here.
pub fn kill_epilogs(job: u32) {
    for (_, pid) in running().iter().filter(|(j, _)| *j == job) {
        // SAFETY: signalling the session of an epilog we started and
        // have not reaped (it leaves the list before it is reaped; a
        // signal sent as it leaves reaches a zombie's session at worst).
        unsafe {
            libc::kill(-*pid, libc::SIGKILL);
        }
    }
}

/// The prologs of a task, in the order they run: (what it is, its path).
pub fn prologs(conf: Option<&str>, user: Option<&str>) -> Vec<(&'static str, String)> {
    let mut v = Vec::new();
    if let Some(p) = conf.filter(|p| !p.is_empty()) {
        v.push(("TaskProlog", p.to_string()));
    }
    if let Some(p) = user.filter(|p| !p.is_empty() && !p.eq_ignore_ascii_case("none")) {
        v.push(("--task-prolog", p.to_string()));
    }
    v
}

/// `s` as one word for `/bin/sh`.
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// What runs each prolog and reads its output (defined once per task).
const RUN_PROLOG: &str = r#"__slurm_tp() {
__slurm_o=$(SLURM_SCRIPT_CONTEXT=prolog_task "$1" </dev/null)
__slurm_s=$?
if [ "$__slurm_s" -ne 0 ]; then
printf 'slurmstepd: error: %s failed status=%d\n' "$2" "$__slurm_s" >&2
exit "$__slurm_s"
fi
while IFS= read -r __slurm_l; do
case $__slurm_l in
"print "*)
__slurm_v=${__slurm_l#print }
printf '%s\n' "${__slurm_v#"${__slurm_v%%[! 	]*}"}" ;;
"export "*)
__slurm_n=${__slurm_l#export }
case $__slurm_n in *=*) ;; *) continue ;; esac
__slurm_v=${__slurm_n#*=}
__slurm_n=${__slurm_n%%=*}
__slurm_n=${__slurm_n#"${__slurm_n%%[! 	]*}"}
__slurm_n=${__slurm_n%"${__slurm_n##*[! 	]}"}
case $__slurm_n in ''|[0-9]*|*[!A-Za-z0-9_]*) ;; *) export "$__slurm_n=$__slurm_v" ;; esac ;;
"unset "*)
__slurm_n=${__slurm_l#unset }
__slurm_n=${__slurm_n#"${__slurm_n%%[! 	]*}"}
__slurm_n=${__slurm_n%"${__slurm_n##*[! 	]}"}
case $__slurm_n in ''|[0-9]*|*[!A-Za-z0-9_]*) ;; *) unset "$__slurm_n" ;; esac ;;
esac
done <<__SLURM_PROLOG_OUTPUT__
$__slurm_o
__SLURM_PROLOG_OUTPUT__
}
"#;

/// The `/bin/sh -c` program a task starts as: sets `SLURM_TASK_PID`, runs
/// `prologs` (see the module's notes) and execs `"$0" "$@"`.
pub fn wrapper(prologs: &[(&'static str, String)]) -> String {
    let mut s = String::from("SLURM_TASK_PID=$$; export SLURM_TASK_PID\n");
    if !prologs.is_empty() {
        s.push_str(RUN_PROLOG);
        for (what, path) in prologs {
            s.push_str(&format!("__slurm_tp {} {what}\n", sh_quote(path)));
        }
        s.push_str(
            "unset -f __slurm_tp; unset __slurm_o __slurm_s __slurm_l __slurm_n __slurm_v\n",
        );
    }
    s.push_str("exec \"$0\" \"$@\"");
    s
}

/// One task's epilogs and how to run them as its user.
#[derive(Debug, Clone)]
pub struct Epilogs {
    /// (what it is, path, longest it may run; `None`: no limit), in order.
    pub scripts: Vec<(&'static str, String, Option<Duration>)>,
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
    pub cwd: String,
    pub env: Vec<(String, String)>,
    /// `cgroup.procs` files the epilog joins (the task's).
    pub cgroup_procs: Arc<Vec<CString>>,
}

/// The epilogs of a task (srun's, then slurm.conf's), `None` when there
/// are none. `conf_limit`: `PrologEpilogTimeout` (zero: none).
pub fn epilogs(
    conf: Option<&str>,
    user: Option<&str>,
    conf_limit: Duration,
) -> Vec<(&'static str, String, Option<Duration>)> {
    let mut v = Vec::new();
    if let Some(p) = user.filter(|p| !p.is_empty() && !p.eq_ignore_ascii_case("none")) {
        v.push(("--task-epilog", p.to_string(), Some(USER_EPILOG_LIMIT)));
    }
    if let Some(p) = conf.filter(|p| !p.is_empty()) {
        v.push((
            "TaskEpilog",
            p.to_string(),
            (!conf_limit.is_zero()).then_some(conf_limit),
        ));
    }
    v
}

impl Epilogs {
    /// Run each epilog in turn; a failure is logged, never fatal.
    pub async fn run(self, job: u32) {
        let mut env = self.env.clone();
        env.retain(|(k, _)| k != "SLURM_SCRIPT_CONTEXT");
        env.push(("SLURM_SCRIPT_CONTEXT".into(), "epilog_task".into()));
        for (what, path, limit) in &self.scripts {
            match self.run_one(job, path, &env, *limit).await {
                Ok(0) => {}
                Ok(st) => tracing::warn!(job, "{what} {path} failed status={st}"),
                Err(e) => tracing::warn!(job, "{what} {path}: {e}"),
            }
        }
    }

    async fn run_one(
        &self,
        job: u32,
        path: &str,
        env: &[(String, String)],
        limit: Option<Duration>,
    ) -> std::io::Result<i32> {
        let cwd = CString::new(self.cwd.as_bytes()).unwrap_or_else(|_| c"/".to_owned());
        let groups: Vec<libc::gid_t> = self.groups.clone();
        let (uid, gid) = (self.uid, self.gid);
        let procs = self.cgroup_procs.clone();
        let mut cmd = tokio::process::Command::new(path);
        cmd.env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        // SAFETY: only async-signal-safe calls between fork and exec; the
        // group list, paths and directory were allocated before the fork.
        unsafe {
            cmd.pre_exec(move || {
                crate::launch::exec::join_cgroups(&procs)
                    .map_err(std::io::Error::from_raw_os_error)?;
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                crate::launch::exec::become_user(&groups, gid, uid)?;
                if libc::chdir(cwd.as_ptr()) != 0 && libc::chdir(c"/".as_ptr()) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn()?;
        let pid = child.id().map(|p| p as i32);
        if let Some(p) = pid {
            running().push((job, p));
        }
        // Wait for it to end without reaping it (its pid, and so its
        // session's id, stay its own until it is reaped).
        let deadline = limit.map(|l| tokio::time::Instant::now() + l);
        let mut over = false;
        if let Some(p) = pid {
            loop {
                // SAFETY: waitid writes the siginfo it is given; WNOWAIT
                // leaves the child to be reaped below.
                let ended = unsafe {
                    let mut info: libc::siginfo_t = std::mem::zeroed();
                    libc::waitid(
                        libc::P_PID,
                        p as libc::id_t,
                        &mut info,
                        libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
                    ) != 0
                        || info.si_pid() != 0
                };
                if ended {
                    break;
                }
                if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
                    over = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            running().retain(|e| e.1 != p);
            // Whatever it left in its session goes with it (and the
            // epilog itself, past its limit).
            // SAFETY: signalling the session of our child, not yet reaped.
            unsafe {
                libc::kill(-p, libc::SIGKILL);
            }
        }
        let status = child.wait().await?;
        if over {
            return Err(std::io::Error::other(format!(
                "ran past {} s and was killed",
                limit.map_or(0, |l| l.as_secs())
            )));
        }
        use std::os::unix::process::ExitStatusExt;
        Ok(status.code().unwrap_or(128 + status.signal().unwrap_or(0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_wrapper(
        prologs: &[(&'static str, String)],
        env: &[(&str, &str)],
    ) -> (i32, String, String) {
        let out = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(wrapper(prologs))
            .arg("/bin/sh")
            .arg("-c")
            .arg("echo \"pid=$([ \"$SLURM_TASK_PID\" = $$ ] && echo same) A=${A-unset} B=${B-unset} C=${C-unset} CTX=${SLURM_SCRIPT_CONTEXT-unset}\"")
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn script(dir: &std::path::Path, name: &str, body: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p.to_string_lossy().into_owned()
    }

    #[test]
    fn without_prologs_the_task_is_execed_with_its_pid() {
        let (code, out, err) = run_wrapper(&[], &[("B", "kept")]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(out, "pid=same A=unset B=kept C=unset CTX=unset\n");
    }

    #[test]
    fn prolog_output_sets_unsets_and_prints_in_order() {
        let d = tempfile::tempdir().unwrap();
        let first = script(
            d.path(),
            "first",
            "echo \"export A=one two  $SLURM_SCRIPT_CONTEXT\"\necho 'unset B'\necho 'print   hello $HOME'\necho 'export 1BAD=x'\necho 'export NOEQUALS'\necho 'junk line'\n",
        );
        // The second prolog sees what the first exported, and wins.
        let second = script(d.path(), "second it's", "echo \"export  C = $A\"\n");
        let (code, out, err) = run_wrapper(
            &[("TaskProlog", first), ("--task-prolog", second)],
            &[("B", "gone")],
        );
        assert_eq!(code, 0, "{err}");
        assert_eq!(
            out,
            "hello $HOME\npid=same A=one two  prolog_task B=unset C= one two  prolog_task CTX=unset\n"
        );
    }

    #[test]
    fn a_failing_prolog_ends_the_task_with_its_status() {
        let d = tempfile::tempdir().unwrap();
        let bad = script(d.path(), "bad", "echo 'print never'\nexit 7\n");
        let (code, out, err) = run_wrapper(&[("--task-prolog", bad)], &[]);
        assert_eq!(code, 7);
        assert_eq!(out, "");
        assert_eq!(err, "slurmstepd: error: --task-prolog failed status=7\n");
        let (code, _, err) = run_wrapper(&[("TaskProlog", "/nonexistent/prolog".into())], &[]);
        assert_eq!(code, 127, "{err}");
        assert!(
            err.ends_with("slurmstepd: error: TaskProlog failed status=127\n"),
            "{err}"
        );
    }

    #[test]
    fn none_and_empty_are_no_script() {
        assert!(prologs(Some(""), Some("none")).is_empty());
        assert_eq!(
            prologs(Some("/a"), Some("/b")),
            vec![("TaskProlog", "/a".into()), ("--task-prolog", "/b".into())]
        );
        let e = epilogs(Some("/a"), Some("/b"), Duration::ZERO);
        assert_eq!(
            e[0],
            ("--task-epilog", "/b".into(), Some(USER_EPILOG_LIMIT))
        );
        assert_eq!(e[1], ("TaskEpilog", "/a".into(), None));
    }

    #[tokio::test]
    async fn epilogs_run_in_turn_with_the_task_environment_and_a_limit() {
        // (Becoming a user, even oneself, takes root's setgroups.)
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let mark = d.path().join("mark");
        let m = mark.to_string_lossy().into_owned();
        let slow = script(
            d.path(),
            "slow",
            &format!("echo slow >> {m}\nsleep 30\necho never >> {m}\n"),
        );
        let after = script(
            d.path(),
            "after",
            &format!("echo \"$X $SLURM_SCRIPT_CONTEXT $(pwd)\" >> {m}\nexit 3\n"),
        );
        // SAFETY: getuid/getgid have no preconditions.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let e = Epilogs {
            scripts: vec![
                ("--task-epilog", slow, Some(Duration::from_secs(2))),
                ("TaskEpilog", after, None),
            ],
            uid,
            gid,
            groups: vec![gid],
            cwd: d.path().to_string_lossy().into_owned(),
            env: vec![
                ("X".into(), "x1".into()),
                ("SLURM_SCRIPT_CONTEXT".into(), "prolog_task".into()),
            ],
            cgroup_procs: Arc::new(Vec::new()),
        };
        let t0 = std::time::Instant::now();
        e.run(1).await;
        assert!(t0.elapsed() < Duration::from_secs(10));
        assert_eq!(
            std::fs::read_to_string(&mark).unwrap(),
            format!("slow\nx1 epilog_task {}\n", d.path().display())
        );
    }
}
