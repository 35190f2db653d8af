//! The child side of a launch: everything between `fork` and `exec`.
//!
//! [`ChildPlan`] holds every byte the child needs, prepared in the parent
//! (C strings, pointer arrays, the group list, the messages it may print), so
//! the child only makes async-signal-safe calls: `open`/`write` of the
//! job's `cgroup.procs` files (see [`join_cgroups`]), `setsid`,
//! `getrlimit`/`setrlimit`, `setgroups`,
//! `setgid`, `setuid`, `open`, `dup2`, `chdir`, `signal`, `sigprocmask`,
//! `getpid`, `write`, `execve`, `nanosleep`, `_exit`.
//!
//! Failures before the job's stdio exists are reported to the parent through
//! a close-on-exec pipe as (step, errno), and the spawn fails. Failures after
//! that are the job's: a bad working directory is reported on the job's
//! stderr (and the job runs in /tmp, as Slurm does); a failed `execve` prints
//! an error there and exits 127.

use std::ffi::CString;
use std::io;
use std::os::raw::c_char;
use std::os::unix::io::RawFd;

/// Steps the child reports failures of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Step {
    Setsid = 1,
    Setgroups,
    Setgid,
    Setuid,
    CheckIds,
    OpenStdin,
    OpenStdout,
    OpenStderr,
    Dup2,
    JoinCgroup,
    CommitRecord,
}

impl Step {
    pub fn from_u8(b: u8) -> Option<Step> {
        use Step::*;
        [
            Setsid,
            Setgroups,
            Setgid,
            Setuid,
            CheckIds,
            OpenStdin,
            OpenStdout,
            OpenStderr,
            Dup2,
            JoinCgroup,
            CommitRecord,
        ]
        .into_iter()
        .find(|s| *s as u8 == b)
    }

    pub fn what(self) -> &'static str {
        match self {
            Step::Setsid => "setsid",
            Step::Setgroups => "setgroups",
            Step::Setgid => "setgid",
            Step::Setuid => "setuid",
            Step::CheckIds => "dropping privileges",
            Step::OpenStdin => "opening the input file",
            Step::OpenStdout => "opening the output file",
            Step::OpenStderr => "opening the error file",
            Step::Dup2 => "dup2",
            Step::JoinCgroup => "joining the job's cgroup",
            Step::CommitRecord => "writing the launch record",
        }
    }
}

pub const TASK_PID_PREFIX: &[u8] = b"SLURM_TASK_PID=";

/// Everything the child needs, built before `fork`.
pub struct ChildPlan {
    uid: libc::uid_t,
    gid: libc::gid_t,
    groups: Vec<libc::gid_t>,
    umask: libc::mode_t,
    stdin: CString,
    stdout: CString,
    /// `None`: stderr goes where stdout goes.
    stderr: Option<CString>,
    /// Output files are appended to rather than truncated.
    append: bool,
    work_dir: CString,
    chdir_msg: Vec<u8>,
    exec_msg: Vec<u8>,
    script: CString,
    _argv: Vec<CString>,
    argv_ptrs: Vec<*const c_char>,
    _env: Vec<CString>,
    envp: Vec<*const c_char>,
    pid_slot: Box<[u8; 32]>,
    pid_index: usize,
    /// `cgroup.procs` files the child moves itself into first.
    cgroup_procs: Vec<CString>,
    /// Resource limits from the submitting shell, set before the script
    /// runs (never above the node's hard limits).
    limits: Vec<slurm_common::rlimits::Limit>,
    /// Write end of the error pipe (set by the parent just before spawning).
    pub(crate) err_fd: RawFd,
    /// The launch record (see [`ChildPlan::commit_to`]): `-1` for none.
    commit_fd: RawFd,
    /// The daemon's pid: a child whose parent is gone before it commits
    /// never runs the script.
    parent_pid: libc::pid_t,
}

// SAFETY: the raw pointers point into heap buffers owned by the same struct
// (`_argv`, `_env`, `pid_slot`) and are only dereferenced by `execve` in the
// forked child; the struct is never shared between threads while in use.
unsafe impl Send for ChildPlan {}
unsafe impl Sync for ChildPlan {}

/// A string holding a NUL byte cannot be passed to the kernel.
#[derive(Debug, thiserror::Error)]
#[error("{0} contains a NUL byte")]
pub struct NulError(pub &'static str);

fn cstr(what: &'static str, s: impl Into<Vec<u8>>) -> Result<CString, NulError> {
    CString::new(s).map_err(|_| NulError(what))
}

/// Inputs of [`ChildPlan::new`].
pub struct PlanSpec<'a> {
    pub uid: u32,
    pub gid: u32,
    pub groups: &'a [u32],
    pub umask: u32,
    pub stdin: &'a str,
    pub stdout: &'a str,
    pub stderr: &'a str,
    /// `--open-mode=append`.
    pub append: bool,
    pub work_dir: &'a str,
    pub script: &'a str,
    pub args: &'a [String],
    pub env: &'a [(String, String)],
    /// Resource limits to set (`slurm_common::rlimits`).
    pub limits: &'a [slurm_common::rlimits::Limit],
}

impl ChildPlan {
    pub fn new(s: &PlanSpec) -> Result<ChildPlan, NulError> {
        let mut argv = vec![cstr("script path", s.script)?];
        for a in s.args {
            argv.push(cstr("a script argument", a.as_str())?);
        }
        let mut env = Vec::with_capacity(s.env.len());
        for (k, v) in s.env {
            if k.contains('=') {
                continue;
            }
            env.push(cstr("an environment variable", format!("{k}={v}"))?);
        }
        let mut argv_ptrs: Vec<*const c_char> = argv.iter().map(|c| c.as_ptr()).collect();
        argv_ptrs.push(std::ptr::null());
        let mut pid_slot = Box::new([0u8; 32]);
        pid_slot[..TASK_PID_PREFIX.len()].copy_from_slice(TASK_PID_PREFIX);
        let mut envp: Vec<*const c_char> = env.iter().map(|c| c.as_ptr()).collect();
        let pid_index = envp.len();
        envp.push(pid_slot.as_ptr() as *const c_char);
        envp.push(std::ptr::null());
        Ok(ChildPlan {
            uid: s.uid,
            gid: s.gid,
            groups: s.groups.to_vec(),
            umask: s.umask as libc::mode_t,
            stdin: cstr("the input path", s.stdin)?,
            stdout: cstr("the output path", s.stdout)?,
            stderr: if s.stderr == s.stdout {
                None
            } else {
                Some(cstr("the error path", s.stderr)?)
            },
            append: s.append,
            work_dir: cstr("the working directory", s.work_dir)?,
            chdir_msg: format!("slurmstepd: error: couldn't chdir to `{}': ", s.work_dir)
                .into_bytes(),
            exec_msg: format!("slurmstepd: error: execve(): {}: ", s.script).into_bytes(),
            script: cstr("script path", s.script)?,
            _argv: argv,
            argv_ptrs,
            _env: env,
            envp,
            pid_slot,
            pid_index,
            cgroup_procs: Vec::new(),
            limits: s.limits.to_vec(),
            err_fd: -1,
            commit_fd: -1,
            parent_pid: 0,
        })
    }

    /// Record the launch in `fd` (the job's launch record, open for
    /// writing): the child writes its pid there just before it execs the
    /// script, and not before its parent, `parent_pid`, is sure to be
    /// alive: until then it dies with its parent. A daemon killed during a
    /// launch thus finds, when it starts again, either a pid (the script
    /// runs or ran) or nothing (it never will), never a script it cannot
    /// know of.
    pub fn commit_to(&mut self, fd: RawFd, parent_pid: libc::pid_t) {
        self.commit_fd = fd;
        self.parent_pid = parent_pid;
    }

    /// Have the child join these cgroups (`.../step_batch/cgroup.procs`)
    /// before anything else, so every process it starts is the job's.
    pub fn set_cgroups(&mut self, procs: &[std::path::PathBuf]) -> Result<(), NulError> {
        use std::os::unix::ffi::OsStrExt;
        self.cgroup_procs = procs
            .iter()
            .map(|p| cstr("a cgroup path", p.as_os_str().as_bytes()))
            .collect::<Result<_, _>>()?;
        Ok(())
    }

    /// Report `step` with the current errno to the parent and fail.
    fn fail(&self, step: Step) -> io::Result<()> {
        self.fail_with(step, errno())
    }

    fn fail_with(&self, step: Step, e: i32) -> io::Result<()> {
        let mut msg = [0u8; 5];
        msg[0] = step as u8;
        msg[1..].copy_from_slice(&e.to_ne_bytes());
        // SAFETY: write(2) on our pipe with a valid buffer.
        unsafe { libc::write(self.err_fd, msg.as_ptr().cast(), msg.len()) };
        Err(io::Error::from_raw_os_error(e))
    }

    /// Run in the child (from `pre_exec`). Returns only on failure.
    ///
    /// # Safety
    /// Must only be called in a freshly forked child.
    pub unsafe fn run(&mut self) -> io::Result<()> {
        if let Err(e) = join_cgroups(&self.cgroup_procs) {
            return self.fail_with(Step::JoinCgroup, e);
        }
        if libc::setsid() < 0 {
            return self.fail(Step::Setsid);
        }
        libc::umask(self.umask);
        slurm_common::rlimits::apply(&self.limits);
        if libc::setgroups(self.groups.len() as _, self.groups.as_ptr()) != 0 {
            return self.fail(Step::Setgroups);
        }
        if libc::setgid(self.gid) != 0 {
            return self.fail(Step::Setgid);
        }
        if libc::setuid(self.uid) != 0 {
            return self.fail(Step::Setuid);
        }
        if libc::getuid() != self.uid
            || libc::geteuid() != self.uid
            || libc::getgid() != self.gid
            || libc::getegid() != self.gid
            || (self.uid != 0 && libc::setuid(0) == 0)
        {
            return self.fail_with(Step::CheckIds, libc::EPERM);
        }
        // Die with the daemon until committed (set after the change of
        // identity, which clears it); a daemon already gone gets no run.
        if self.commit_fd >= 0 {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
            if libc::getppid() != self.parent_pid {
                libc::_exit(1);
            }
        }

        // Standard streams, opened as the user.
        let fd_in = libc::open(self.stdin.as_ptr(), libc::O_RDONLY);
        if fd_in < 0 {
            return self.fail(Step::OpenStdin);
        }
        // Always appending (truncated first unless asked not to), as
        // Slurm's: output and error files that are one file, and notices
        // the node daemon adds, never overwrite one another.
        let out_flags = libc::O_WRONLY
            | libc::O_CREAT
            | libc::O_APPEND
            | if self.append { 0 } else { libc::O_TRUNC };
        let fd_out = libc::open(self.stdout.as_ptr(), out_flags, 0o644 as libc::c_uint);
        if fd_out < 0 {
            return self.fail(Step::OpenStdout);
        }
        let fd_err = match &self.stderr {
            None => fd_out,
            Some(p) => {
                let fd = libc::open(p.as_ptr(), out_flags, 0o644 as libc::c_uint);
                if fd < 0 {
                    return self.fail(Step::OpenStderr);
                }
                fd
            }
        };
        for (fd, target) in [(fd_in, 0), (fd_out, 1), (fd_err, 2)] {
            if fd != target && libc::dup2(fd, target) < 0 {
                return self.fail(Step::Dup2);
            }
        }
        for fd in [fd_in, fd_out, fd_err] {
            if fd > 2 {
                libc::close(fd);
            }
        }

        if libc::chdir(self.work_dir.as_ptr()) != 0 {
            let e = errno();
            write_all(2, &self.chdir_msg);
            write_all(2, strerror(e).as_bytes());
            write_all(2, b": going to /tmp instead\n");
            libc::chdir(c"/tmp".as_ptr());
        }

        // A clean signal state: default dispositions, nothing blocked.
        for sig in 1..32 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());

        // SLURM_TASK_PID=<our pid>, written into the preallocated slot.
        let n = format_u32(
            libc::getpid() as u32,
            &mut self.pid_slot[TASK_PID_PREFIX.len()..],
        );
        self.pid_slot[TASK_PID_PREFIX.len() + n] = 0;
        self.envp[self.pid_index] = self.pid_slot.as_ptr() as *const c_char;

        // Committed: from here the script runs whatever becomes of the
        // daemon, and its launch record says so.
        if self.commit_fd >= 0 {
            libc::prctl(libc::PR_SET_PDEATHSIG, 0 as libc::c_ulong);
            let slot = &self.pid_slot[TASK_PID_PREFIX.len()..TASK_PID_PREFIX.len() + n];
            if libc::write(self.commit_fd, slot.as_ptr().cast(), slot.len()) != slot.len() as isize
            {
                // (A disk full: the launch fails and says why; the record
                // holds no pid, so a restarted daemon knows it never ran.)
                let e = match errno() {
                    0 => libc::ENOSPC,
                    e => e,
                };
                return self.fail_with(Step::CommitRecord, e);
            }
        }

        // ETXTBSY: another thread forked while the script was open for
        // writing and that child has not exec'd yet; it passes quickly.
        let mut tries = 0;
        let e = loop {
            libc::execve(
                self.script.as_ptr(),
                self.argv_ptrs.as_ptr(),
                self.envp.as_ptr(),
            );
            let e = errno();
            if e != libc::ETXTBSY || tries >= 200 {
                break e;
            }
            tries += 1;
            let pause = libc::timespec {
                tv_sec: 0,
                tv_nsec: 10_000_000,
            };
            libc::nanosleep(&pause, std::ptr::null_mut());
        };
        write_all(2, &self.exec_msg);
        write_all(2, strerror(e).as_bytes());
        write_all(2, b"\n");
        libc::_exit(127);
    }
}

/// Become `uid`:`gid` with only `groups` (in that order: groups, gid,
/// uid), and make sure it stuck: a process that is not root may not
/// become root again. Async-signal-safe, for a child between fork and exec.
pub fn become_user(
    groups: &[libc::gid_t],
    gid: libc::gid_t,
    uid: libc::uid_t,
) -> std::io::Result<()> {
    // SAFETY: setgroups reads `groups.len()` ids from a live slice; the
    // rest take plain integers.
    unsafe {
        if libc::setgroups(groups.len(), groups.as_ptr()) != 0
            || libc::setgid(gid) != 0
            || libc::setuid(uid) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
        if uid != 0 && libc::setuid(0) == 0 {
            return Err(std::io::Error::from_raw_os_error(libc::EPERM));
        }
    }
    Ok(())
}

/// Move the calling process into cgroups by writing its pid to each
/// `cgroup.procs` file; the errno of the first failure. Async-signal-safe
/// (`getpid`, `open`, `write`, `close`), for a child between fork and exec.
pub fn join_cgroups(procs: &[CString]) -> Result<(), i32> {
    if procs.is_empty() {
        return Ok(());
    }
    let mut buf = [0u8; 12];
    // SAFETY: getpid cannot fail.
    let n = format_u32(unsafe { libc::getpid() } as u32, &mut buf[..10]);
    buf[n] = b'\n';
    for p in procs {
        // O_CREAT|O_APPEND: harmless on a cgroup file system, and lets
        // tests use a fake tree of plain files.
        // SAFETY: a NUL-terminated path and a buffer of the given length.
        let fd = unsafe {
            libc::open(
                p.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_CLOEXEC,
                0o644 as libc::c_uint,
            )
        };
        if fd < 0 {
            return Err(errno());
        }
        let w = unsafe { libc::write(fd, buf.as_ptr().cast(), n + 1) };
        let e = errno();
        unsafe { libc::close(fd) };
        if w != (n + 1) as isize {
            return Err(if w < 0 { e } else { libc::EIO });
        }
    }
    Ok(())
}

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn write_all(fd: RawFd, mut buf: &[u8]) {
    while !buf.is_empty() {
        // SAFETY: valid buffer for its length.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n <= 0 {
            return;
        }
        buf = &buf[n as usize..];
    }
}

/// Decimal digits of `n` into `out` (no allocation); returns how many.
fn format_u32(mut n: u32, out: &mut [u8]) -> usize {
    let mut tmp = [0u8; 10];
    let mut len = 0;
    loop {
        tmp[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let len = len.min(out.len());
    for i in 0..len {
        out[i] = tmp[len - 1 - i];
    }
    len
}

/// `strerror` for the errors a chdir or exec can meet, without locale or
/// allocation (the C library's is not async-signal-safe).
pub fn strerror(e: i32) -> &'static str {
    match e {
        libc::EPERM => "Operation not permitted",
        libc::ENOENT => "No such file or directory",
        libc::EIO => "Input/output error",
        libc::E2BIG => "Argument list too long",
        libc::ENOEXEC => "Exec format error",
        libc::ENOMEM => "Cannot allocate memory",
        libc::EACCES => "Permission denied",
        libc::EFAULT => "Bad address",
        libc::ENOTDIR => "Not a directory",
        libc::EISDIR => "Is a directory",
        libc::EINVAL => "Invalid argument",
        libc::ENFILE => "Too many open files in system",
        libc::EMFILE => "Too many open files",
        libc::ETXTBSY => "Text file busy",
        libc::ENOSPC => "No space left on device",
        libc::EROFS => "Read-only file system",
        libc::ENAMETOOLONG => "File name too long",
        libc::ELOOP => "Too many levels of symbolic links",
        libc::EAGAIN => "Resource temporarily unavailable",
        libc::ELIBBAD => "Accessing a corrupted shared library",
        _ => "Unknown error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_without_allocation() {
        let mut b = [0u8; 12];
        let n = format_u32(0, &mut b);
        assert_eq!(&b[..n], b"0");
        let n = format_u32(29927, &mut b);
        assert_eq!(&b[..n], b"29927");
        let n = format_u32(u32::MAX, &mut b);
        assert_eq!(&b[..n], b"4294967295");
    }

    #[test]
    fn steps_round_trip_and_strerror_matches_libc() {
        for b in 1..=11u8 {
            assert_eq!(Step::from_u8(b).map(|s| s as u8), Some(b));
        }
        assert_eq!(Step::from_u8(0), None);
        for e in [libc::ENOENT, libc::EACCES, libc::ENOTDIR, libc::ENOEXEC] {
            assert_eq!(
                strerror(e),
                io::Error::from_raw_os_error(e)
                    .to_string()
                    .split(" (os error")
                    .next()
                    .unwrap()
            );
        }
    }

    #[test]
    fn plans_reject_nul_bytes() {
        let spec = |script: &'static str| PlanSpec {
            uid: 1,
            gid: 1,
            groups: &[1],
            umask: 0o22,
            stdin: "/dev/null",
            stdout: "/tmp/o",
            stderr: "/tmp/o",
            append: false,
            work_dir: "/tmp",
            script,
            args: &[],
            env: &[],
            limits: &[],
        };
        assert!(ChildPlan::new(&spec("/bin/true")).is_ok());
        assert!(ChildPlan::new(&spec("/bin/\0true")).is_err());
    }
}
