//! Fault injection: each case breaks one part of a running cluster (kill
//! -9, a dead node daemon, a missing accounting daemon), checks that
//! nothing acknowledged is lost, and prints its figures on a line starting
//! `FIGURE` (collected in docs/reliability.md). Every case is bounded in
//! time and stops its daemons itself.

use super::write_script;
use slurm_proto::{JobState, RequestBody, Response};
use slurm_tests::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

fn figure(case: &str, what: &str) {
    eprintln!("FIGURE | {case} | {what}");
}

/// Whether process `pid` exists.
fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the pid exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// Wait (at most 30 s) for the copy of a job left on a cut-off node,
/// process `pid`, to be killed.
fn wait_killed(t: &TestCluster, pid: i32) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(pid) {
        assert!(
            Instant::now() < deadline,
            "the stale copy was never killed\n{}",
            t.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// 2000 submissions from eight threads; the controller is killed with
/// SIGKILL halfway (the journal compacting every few dozen jobs) and
/// restarted while the threads keep trying.
#[test]
fn controller_killed_during_2000_concurrent_submissions() {
    let mut t = TestCluster::start(1, |s| {
        s.extra_conf = "SlurmctldParameters=journal_compact_bytes=200000\n".into();
    });
    let script = write_script(
        &t,
        "s.sh",
        &format!("#!/bin/sh\n# {}\ntrue\n", "y".repeat(1500)),
    );
    let factory = t.cmd_factory("sbatch", &["--parsable", "-H", &script]);
    let sbatch = || factory.make();
    let acked = Mutex::new(Vec::new());
    let tried = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    let done = AtomicBool::new(false);
    let mut down_for = Duration::ZERO;
    std::thread::scope(|sc| {
        for _ in 0..8 {
            let (acked, tried, failed, sbatch) = (&acked, &tried, &failed, &sbatch);
            sc.spawn(move || {
                while tried.fetch_add(1, Ordering::Relaxed) < 2000 {
                    let out = sbatch().output().unwrap();
                    match stdout(&out).trim().parse::<u32>() {
                        Ok(id) if out.status.success() => acked.lock().unwrap().push(id),
                        _ => {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        while acked.lock().unwrap().len() < 1000 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        t.c.kill_ctld(libc::SIGKILL);
        let t0 = Instant::now();
        t.c.start_ctld().unwrap_or_else(|e| panic!("restart: {e}"));
        // Serving again: the first answered query after the restart.
        let deadline = Instant::now() + Duration::from_secs(60);
        while !matches!(t.c.call(RequestBody::Ping), Ok(Response::Pong { .. })) {
            assert!(Instant::now() < deadline, "not serving again\n{}", t.logs());
            std::thread::sleep(Duration::from_millis(5));
        }
        down_for = t0.elapsed();
        done.store(true, Ordering::Relaxed);
    });
    let acked = acked.into_inner().unwrap();
    let jobs = t.jobs();
    let have: std::collections::HashSet<u32> = jobs.iter().map(|j| j.job_id).collect();
    let lost = acked.iter().filter(|id| !have.contains(id)).count();
    figure(
        "kill -9 slurmctld during 2000 concurrent submissions",
        &format!(
            "{} acknowledged, {} refused while down, {lost} lost, serving again {} ms after restart",
            acked.len(),
            failed.load(Ordering::Relaxed),
            down_for.as_millis()
        ),
    );
    assert_eq!(lost, 0);
    assert!(acked.len() >= 1000);
    // Ids are never handed out twice.
    let mut ids = acked.clone();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), acked.len(), "an id was acknowledged twice");
}

/// A node daemon killed with running jobs and restarted within
/// SlurmdTimeout: the jobs run on and end well, their output whole (a job
/// whose launch was lost with the daemon is requeued and runs again).
#[test]
fn node_daemon_killed_and_back_within_its_timeout() {
    let mut t = TestCluster::start(2, |s| s.slurmd_timeout = 20);
    let script = write_script(
        &t,
        "count.sh",
        "#!/bin/sh\nfor i in 1 2 3 4 5 6; do echo line $i; sleep 1; done\n",
    );
    let ids: Vec<u32> = (0..4)
        .map(|k| t.sbatch(&["-o", &format!("count-{k}.out"), &script]))
        .collect();
    for id in &ids {
        t.wait_job(*id, 20, "running", |j| j.state == JobState::Running);
    }
    t.c.kill_slurmd(0, libc::SIGKILL);
    t.c.kill_slurmd(1, libc::SIGKILL);
    std::thread::sleep(Duration::from_secs(2));
    t.c.start_slurmd(0).unwrap();
    t.c.start_slurmd(1).unwrap();
    let mut ok = 0;
    for (k, id) in ids.iter().enumerate() {
        let j = t.wait_done(*id, 60);
        let out =
            std::fs::read_to_string(t.work.join(format!("count-{k}.out"))).unwrap_or_default();
        if j.state == JobState::Completed && out.lines().count() == 6 {
            ok += 1;
        }
        assert_eq!(j.state, JobState::Completed, "{:?}\n{}", j.reason, t.logs());
        assert_eq!(out.lines().count(), 6, "{out}");
    }
    figure(
        "kill -9 slurmd with running jobs, back within SlurmdTimeout",
        &format!("{ok} of {} jobs completed with whole output", ids.len()),
    );
}

/// A node daemon killed in the middle of a launch (the script's child
/// forked, blocked opening its output, a FIFO nobody reads yet): that child
/// never runs the script, the restarted daemon does not know the job, the
/// controller requeues it, and it runs exactly once.
#[test]
fn a_launch_cut_short_by_a_dead_node_daemon_runs_once() {
    let mut t = TestCluster::start(1, |s| s.slurmd_timeout = 30);
    let fifo = t.work.join("out.fifo");
    let path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo with a valid C string.
    assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o666) }, 0);
    let runs = t.work.join("runs");
    let script = write_script(
        &t,
        "once.sh",
        &format!(
            "#!/bin/sh\necho run $SLURM_RESTART_COUNT >> {}\necho hello\n",
            runs.display()
        ),
    );
    let id = t.sbatch(&["--requeue", "-o", fifo.to_str().unwrap(), &script]);
    t.wait_job(id, 20, "running", |j| j.state == JobState::Running);
    // The launch has reached the child, which waits for a reader.
    std::thread::sleep(Duration::from_secs(1));
    assert!(!runs.exists(), "the script ran before its output opened");
    t.c.kill_slurmd(0, libc::SIGKILL);
    std::thread::sleep(Duration::from_millis(500));
    t.c.start_slurmd(0).unwrap();
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut all = String::new();
            // Each run opens the FIFO once; read until the job is over.
            for _ in 0..2 {
                if let Ok(s) = std::fs::read_to_string(&fifo) {
                    all.push_str(&s);
                }
            }
            all
        })
    };
    let j = t.wait_done(id, 60);
    assert_eq!(j.state, JobState::Completed, "{:?}\n{}", j.reason, t.logs());
    // Another open lets the reader go if only one run wrote.
    std::thread::sleep(Duration::from_millis(500));
    {
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo);
    }
    let out = reader.join().unwrap();
    let ran = std::fs::read_to_string(&runs).unwrap_or_default();
    figure(
        "kill -9 slurmd during a launch (script not yet started)",
        &format!(
            "script ran {} time(s), job requeued {} time(s)",
            ran.lines().count(),
            j.restarts
        ),
    );
    assert_eq!(ran.lines().count(), 1, "runs:\n{ran}\n{}", t.logs());
    assert_eq!(out.matches("hello").count(), 1, "{out}");
}

/// A node daemon that stays dead past SlurmdTimeout: its jobs end
/// NODE_FAIL, and a requeueable one goes back to the queue.
#[test]
fn node_daemon_dead_past_its_timeout() {
    let mut t = TestCluster::start(2, |s| s.slurmd_timeout = 3);
    let keep = t.sbatch(&["-w", "n2", "--no-requeue", "--wrap", "sleep 120"]);
    let again = t.sbatch(&["-w", "n2", "--requeue", "--wrap", "sleep 120"]);
    for id in [keep, again] {
        t.wait_job(id, 20, "running", |j| j.state == JobState::Running);
    }
    let t0 = Instant::now();
    t.c.kill_slurmd(1, libc::SIGKILL);
    let j = t.wait_done(keep, 30);
    let failed_after = t0.elapsed();
    assert_eq!(j.state, JobState::NodeFail);
    let r = t.wait_job(again, 30, "requeued", |j| {
        j.state == JobState::Pending && j.restarts >= 1
    });
    figure(
        "kill -9 slurmd past SlurmdTimeout=3",
        &format!(
            "job NODE_FAIL after {:.1} s; requeueable job back in the queue (restarts={})",
            failed_after.as_secs_f64(),
            r.restarts
        ),
    );
}

/// `-k/--no-kill`: a job whose other node dies keeps running on the node
/// of its batch script, its allocation without the dead node.
#[test]
fn a_no_kill_job_survives_a_dead_node() {
    let mut t = TestCluster::start(2, |s| s.slurmd_timeout = 3);
    let id = t.sbatch(&["-N2", "-k", "--wrap", "sleep 120"]);
    let j = t.wait_job(id, 20, "running", |j| j.state == JobState::Running);
    assert_eq!(j.batch_host.as_deref(), Some("n1"));
    t.c.kill_slurmd(1, libc::SIGKILL);
    let j = t.wait_job(id, 30, "running without n2", |j| j.alloc.nodes == ["n1"]);
    assert_eq!(j.state, JobState::Running);
    let out = t.run("scontrol", &["show", "job", &id.to_string()]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("   NodeList=n1\n"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = t.run("scancel", &[&id.to_string()]);
    assert!(out.status.success());
    assert_eq!(t.wait_done(id, 30).state, JobState::Cancelled);
}

/// slurmdbd killed while 1000 jobs run and finish; started again after:
/// every job reaches accounting exactly once.
#[test]
fn accounting_daemon_down_while_1000_jobs_finish() {
    let mut t = TestCluster::start(3, |s| {
        s.accounting = true;
        s.cpus = 8;
    });
    t.c.kill_dbd(libc::SIGKILL);
    let t0 = Instant::now();
    let first = t.sbatch(&["--array=0-999", "-o", "/dev/null", "--wrap", "true"]);
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        let left = t
            .jobs()
            .iter()
            .filter(|j| j.job_id >= first && !j.state.is_finished())
            .count();
        if left == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{left} jobs left");
        std::thread::sleep(Duration::from_millis(500));
    }
    let ran_for = t0.elapsed();
    t.c.start_dbd().unwrap();
    let t1 = Instant::now();
    let (mut rows, mut ids) = (0, std::collections::HashSet::new());
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        let out = t.run(
            "sacct",
            &[
                "-a",
                "-X",
                "-n",
                "-P",
                "--format=JobID",
                "-j",
                &first.to_string(),
            ],
        );
        let text = stdout(&out);
        rows = text.lines().count();
        ids = text.lines().map(str::to_string).collect();
        if rows >= 1000 {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    figure(
        "slurmdbd down while 1000 jobs finish",
        &format!(
            "jobs done in {:.1} s without it; after restart {rows} records ({} distinct) in {:.1} s; lost {}, doubled {}",
            ran_for.as_secs_f64(),
            ids.len(),
            t1.elapsed().as_secs_f64(),
            1000usize.saturating_sub(ids.len()),
            rows - ids.len()
        ),
    );
    assert_eq!(ids.len(), 1000, "records lost");
    assert_eq!(rows, 1000, "records doubled");
}

/// A node daemon that stops answering (frozen, as behind a cut network)
/// past SlurmdTimeout, then comes back: its requeued job runs on the other
/// node meanwhile, and the copy left behind is killed once the daemon is
/// back, so the job never runs twice for long.
#[test]
fn node_daemon_unreachable_then_back_never_keeps_a_job_twice() {
    let mut t = TestCluster::start(2, |s| s.slurmd_timeout = 3);
    let runs = t.work.join("runs");
    let script = write_script(
        &t,
        "r.sh",
        &format!(
            "#!/bin/sh\necho \"$SLURMD_NODENAME $$\" >> {}\nexec sleep 300\n",
            runs.display()
        ),
    );
    let id = t.sbatch(&["--requeue", &script]);
    let j = t.wait_job(id, 20, "running", |j| j.state == JobState::Running);
    let first = j.batch_host.clone().unwrap();
    let i = if first == "n1" { 0 } else { 1 };
    let wait_line = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = std::fs::read_to_string(&runs).unwrap_or_default();
            if text.lines().count() >= n {
                return text;
            }
            assert!(Instant::now() < deadline, "{text}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let old_pid: i32 = wait_line(1)
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let t0 = Instant::now();
    t.c.kill_slurmd(i, libc::SIGSTOP);
    let j = t.wait_job(id, 40, "running on the other node", |j| {
        j.state == JobState::Running && j.batch_host.as_deref() != Some(first.as_str())
    });
    let moved_after = t0.elapsed();
    assert!(j.restarts >= 1);
    wait_line(2);
    assert!(alive(old_pid), "the frozen node's copy still runs");
    t.c.kill_slurmd(i, libc::SIGCONT);
    let t1 = Instant::now();
    wait_killed(&t, old_pid);
    let killed_after = t1.elapsed();
    // The node is back and the new run goes on.
    t.wait_node(&first, 20, "back", |n| !n.flags.not_responding);
    assert_eq!(t.job(id).unwrap().state, JobState::Running);
    figure(
        "slurmd frozen past SlurmdTimeout=3, then back",
        &format!(
            "job requeued and running on the other node {:.1} s after the freeze; stale copy killed {:.1} s after the daemon came back",
            moved_after.as_secs_f64(),
            killed_after.as_secs_f64()
        ),
    );
    let _ = t.run("scancel", &[&id.to_string()]);
}

/// The whole cluster's clock stepped an hour forward and then back (the
/// daemons and commands run under libfaketime, with a real monotonic
/// clock): no job reaches its limit early, no node is declared dead, and
/// the job's run time counts only the time that really passed.
#[test]
fn clock_stepped_an_hour_forward_and_back_ends_nothing_early() {
    let lib = ["x86_64-linux-gnu", "aarch64-linux-gnu"]
        .iter()
        .map(|a| std::path::PathBuf::from(format!("/usr/lib/{a}/faketime/libfaketime.so.1")))
        .find(|p| p.exists())
        .expect("libfaketime (scripts/setup installs it)");
    let tmp = tempfile::tempdir().unwrap();
    let offset = tmp.path().join("offset");
    std::fs::write(&offset, "+0\n").unwrap();
    let t = TestCluster::start(1, |s| {
        s.slurmd_timeout = 10;
        s.env = vec![
            ("LD_PRELOAD".into(), lib.display().to_string()),
            (
                "FAKETIME_TIMESTAMP_FILE".into(),
                offset.display().to_string(),
            ),
            ("FAKETIME_NO_CACHE".into(), "1".into()),
            ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
        ];
    });
    let run = |prog: &str, args: &[&str]| stdout(&t.cmd(prog).args(args).output().unwrap());
    let started = t.work.join("started");
    let wrap = format!("touch {}; sleep 12", started.display());
    let id = run("sbatch", &["--parsable", "-t", "2", "--wrap", &wrap]);
    let id = id.trim().to_string();
    let state = || {
        run("squeue", &["-h", "-j", &id, "-o", "%T"])
            .trim()
            .to_string()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    // Running, and its script really started (its launch is not in flight).
    while state() != "RUNNING" || !started.exists() {
        assert!(Instant::now() < deadline, "never ran: {}", state());
        std::thread::sleep(Duration::from_millis(100));
    }
    for (to, step) in [("+3600", 3600), ("+0", -3600)] {
        std::fs::write(&offset, format!("{to}\n")).unwrap();
        std::thread::sleep(Duration::from_secs(3));
        assert_eq!(state(), "RUNNING", "after a step of {step} s\n{}", t.logs());
        let node = run("sinfo", &["-h", "-o", "%t"]);
        assert!(
            !node.contains("down"),
            "node {node} after a step of {step} s"
        );
        assert!(
            t.logs()
                .contains(&format!("the system clock stepped by {step} s")),
            "{}",
            t.logs()
        );
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let show = loop {
        let show = run("scontrol", &["show", "job", &id]);
        if show.contains("JobState=COMPLETED") {
            break show;
        }
        assert!(Instant::now() < deadline, "{show}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let runtime = show
        .split_whitespace()
        .find_map(|w| w.strip_prefix("RunTime="))
        .unwrap()
        .to_string();
    assert!(
        ("00:00:11".."00:00:20").contains(&runtime.as_str()),
        "RunTime={runtime}"
    );
    figure(
        "system clock stepped +1 h then -1 h under a running job (libfaketime)",
        &format!("job ran to completion, RunTime={runtime} for a 12 s job with a 2 min limit; node stayed up"),
    );
}

/// A PostgreSQL server of the test's own, restarted in immediate mode (its
/// connections cut, as in a crash) while slurmdbd ingests the records of
/// 300 jobs: every job reaches accounting exactly once.
#[test]
fn database_server_restarted_during_ingestion() {
    // Debian's server binaries (scripts/setup installs them when missing).
    let bin = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL server binaries (scripts/setup)")
        .filter_map(|e| Some(e.ok()?.path().join("bin")))
        .find(|b| b.join("pg_ctl").exists())
        .expect("pg_ctl under /usr/lib/postgresql/*/bin");
    let pg_ctl = bin.join("pg_ctl").display().to_string();
    let initdb = bin.join("initdb").display().to_string();
    let tmp = tempfile::Builder::new()
        .prefix("slurm-pg-")
        .tempdir()
        .unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let chown = |p: &std::path::Path| {
        assert!(std::process::Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(p)
            .status()
            .unwrap()
            .success());
    };
    chown(tmp.path());
    let port = slurm_local::free_port("127.0.0.1").unwrap().to_string();
    let as_pg = |args: &[&str]| {
        let out = std::process::Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}{}",
            stdout(&out),
            stderr(&out)
        );
    };
    let d = data.display().to_string();
    let log = tmp.path().join("pg.log").display().to_string();
    let opts = format!(
        "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
        tmp.path().display()
    );
    as_pg(&[&initdb, "-D", &d, "-A", "trust", "-U", "postgres"]);
    as_pg(&[&pg_ctl, "-D", &d, "-o", &opts, "-l", &log, "-w", "start"]);
    struct Stop(String, String);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = std::process::Command::new("runuser")
                .args(["-u", "postgres", "--", &self.1, "-D", &self.0])
                .args(["-m", "immediate", "-w", "stop"])
                .output();
        }
    }
    let _stop = Stop(d.clone(), pg_ctl.clone());
    let t = TestCluster::start(3, |s| {
        s.accounting = true;
        s.cpus = 8;
        s.extra_dbd_conf = format!(
            "StorageType=accounting_storage/pgsql\nStorageHost=127.0.0.1\nStoragePort={port}\n\
             StorageUser=postgres\nStorageLoc=postgres\n"
        );
    });
    // Jobs end over several seconds, so records flow while the server
    // goes down and comes back.
    let first = t.sbatch(&["--array=0-299%24", "-o", "/dev/null", "--wrap", "sleep 0.3"]);
    // Records of ended jobs (each job's start was recorded at submission).
    let count = || {
        let out = t.run(
            "sacct",
            &[
                "-a",
                "-X",
                "-n",
                "-P",
                "--format=JobID,State",
                "-j",
                &first.to_string(),
            ],
        );
        let lines: Vec<String> = stdout(&out)
            .lines()
            .filter(|l| l.ends_with("|COMPLETED"))
            .map(str::to_string)
            .collect();
        let distinct: std::collections::HashSet<String> = lines.iter().cloned().collect();
        (lines.len(), distinct.len())
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut at = Vec::new();
    for when in [40, 120] {
        while count().0 < when {
            assert!(Instant::now() < deadline, "records stopped\n{}", t.logs());
            std::thread::sleep(Duration::from_millis(50));
        }
        at.push(count().0);
        as_pg(&[
            &pg_ctl,
            "-D",
            &d,
            "-o",
            &opts,
            "-l",
            &log,
            "-m",
            "immediate",
            "-w",
            "restart",
        ]);
    }
    assert!(
        at.iter().all(|n| *n < 300),
        "the restarts came after ingestion: {at:?}"
    );
    let (rows, distinct) = loop {
        let (rows, distinct) = count();
        if distinct >= 300 {
            break (rows, distinct);
        }
        assert!(
            Instant::now() < deadline,
            "{distinct} of 300 records\n{}",
            t.logs()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    figure(
        "PostgreSQL restarted twice (immediate) during ingestion of 300 jobs",
        &format!("restarted at {at:?} records; then {rows} records, {distinct} distinct: lost {}, doubled {}", 300 - distinct, rows - distinct),
    );
    assert_eq!((rows, distinct), (300, 300));
}

/// A network namespace of the test's own, with a veth pair to the host
/// (link-local addresses): deleted, with its link, when dropped.
struct Netns {
    name: String,
    host_if: String,
}

impl Netns {
    fn create(tag: u32) -> Netns {
        let name = format!("slurmt{tag}");
        let host_if = format!("vst{tag}a");
        let peer_if = format!("vst{tag}b");
        let n = Netns {
            name: name.clone(),
            host_if: host_if.clone(),
        };
        let third = tag % 250;
        let host = format!("169.254.{third}.1/30");
        let peer = format!("169.254.{third}.2/30");
        for cmd in [
            vec!["ip", "netns", "add", &name],
            vec![
                "ip", "link", "add", &host_if, "type", "veth", "peer", "name", &peer_if,
            ],
            vec!["ip", "link", "set", &peer_if, "netns", &name],
            vec!["ip", "addr", "add", &host, "dev", &host_if],
            vec!["ip", "link", "set", &host_if, "up"],
            vec![
                "ip", "netns", "exec", &name, "ip", "addr", "add", &peer, "dev", &peer_if,
            ],
            vec![
                "ip", "netns", "exec", &name, "ip", "link", "set", &peer_if, "up",
            ],
            vec![
                "ip", "netns", "exec", &name, "ip", "link", "set", "lo", "up",
            ],
        ] {
            let ok = std::process::Command::new(cmd[0])
                .args(&cmd[1..])
                .status()
                .unwrap()
                .success();
            assert!(ok, "{cmd:?}");
        }
        n
    }

    /// Cut (or restore) the namespace's only link.
    fn link(&self, up: bool) {
        let peer = self.host_if.replace('a', "b");
        let ok = std::process::Command::new("ip")
            .args(["netns", "exec", &self.name, "ip", "link", "set", &peer])
            .arg(if up { "up" } else { "down" })
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.host_if])
            .status();
    }
}

/// A node daemon in a network namespace of its own whose link is cut: its
/// node goes down after SlurmdTimeout and its requeueable job moves to the
/// other node, a job elsewhere is not disturbed; when the link returns the
/// node comes back and the copy left there is killed.
#[test]
fn node_daemon_network_cut_in_a_namespace() {
    let tag = std::process::id() % 100_000;
    let third = tag % 250;
    let ns = Netns::create(tag);
    let mut t = TestCluster::start(2, |s| {
        s.slurmd_timeout = 3;
        s.cpus = 1;
        s.ip = format!("169.254.{third}.1");
        s.node_addrs = vec![None, Some(format!("169.254.{third}.2"))];
        s.slurmd_prefix = vec![
            vec![],
            ["ip", "netns", "exec", &ns.name]
                .iter()
                .map(|x| x.to_string())
                .collect(),
        ];
    });
    let runs = t.work.join("runs");
    let script = write_script(
        &t,
        "cut.sh",
        &format!(
            "#!/bin/sh\necho \"$SLURMD_NODENAME $$\" >> {}\nexec sleep 300\n",
            runs.display()
        ),
    );
    let moved = t.sbatch(&["-w", "n2", "--requeue", &script]);
    t.wait_job(moved, 20, "running on n2", |j| j.state == JobState::Running);
    let other = t.sbatch(&["-w", "n1", "--wrap", "sleep 20"]);
    t.wait_job(other, 20, "running on n1", |j| j.state == JobState::Running);
    let t0 = Instant::now();
    ns.link(false);
    t.wait_node("n2", 20, "down", |n| n.flags.not_responding);
    let down_after = t0.elapsed();
    let j = t.wait_job(moved, 30, "requeued", |j| j.restarts >= 1);
    assert_eq!(
        t.job(other).unwrap().state,
        JobState::Running,
        "n1's job disturbed"
    );
    ns.link(true);
    t.wait_node("n2", 30, "back", |n| !n.flags.not_responding);
    // The copy left on n2 is gone once its daemon is heard again.
    let first_pid: i32 = std::fs::read_to_string(&runs)
        .unwrap()
        .lines()
        .find(|l| l.starts_with("n2 "))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap();
    wait_killed(&t, first_pid);
    figure(
        "node daemon's network cut (its netns link down) past SlurmdTimeout=3, then restored",
        &format!(
            "node NOT_RESPONDING after {:.1} s; its job requeued (restarts={}); the other node's job undisturbed; stale copy killed once the link returned",
            down_after.as_secs_f64(),
            j.restarts
        ),
    );
    let _ = t.run("scancel", &[&moved.to_string(), &other.to_string()]);
    t.c.kill_slurmd(1, libc::SIGKILL);
}

/// A controller kept busy (six arrays of 1000 jobs at once, on 1000
/// nodes served by one mock daemon) longer than SlurmdTimeout: heartbeats
/// are answered beside the busy writer, and the node daemons' own work
/// (reading slurm.conf again when their watch of the controller opens)
/// never holds up their heartbeats, so no healthy node is declared dead
/// and no job fails. Runs alone (`.config/nextest.toml`): beside other
/// tests its timings would not hold.
#[test]
fn a_saturated_controller_declares_no_healthy_node_dead() {
    let t = TestCluster::start(1000, |s| {
        s.mock = Some(Some(20));
        s.cpus = 8;
        s.slurmd_timeout = 3;
    });
    let first = t.sbatch(&["--array=0-999", "-o", "/dev/null", "--wrap", "true"]);
    let f = t.cmd_factory(
        "sbatch",
        &[
            "--parsable",
            "--array=0-999",
            "-o",
            "/dev/null",
            "--wrap",
            "true",
        ],
    );
    let t0 = Instant::now();
    std::thread::scope(|sc| {
        let hs: Vec<_> = (0..6)
            .map(|_| sc.spawn(|| f.make().output().unwrap()))
            .collect();
        for h in hs {
            let o = h.join().unwrap();
            assert!(o.status.success(), "{}", stderr(&o));
        }
    });
    let busy = t0.elapsed();
    std::thread::sleep(Duration::from_secs(5));
    let nodes = t.nodes();
    let down = nodes.iter().filter(|n| n.flags.not_responding).count();
    let failed = t
        .jobs()
        .iter()
        .filter(|j| j.job_id >= first && (j.state == JobState::NodeFail || j.restarts > 0))
        .count();
    figure(
        "six arrays of 1000 at once on 1000 mock nodes, SlurmdTimeout=3",
        &format!(
            "submissions took {:.1} s; {down} nodes declared dead, {failed} jobs failed or requeued",
            busy.as_secs_f64()
        ),
    );
    assert_eq!(down, 0, "healthy nodes declared dead");
    assert_eq!(failed, 0, "jobs failed or requeued with their nodes");
}

/// A user's batch scripts whose output files are FIFOs nobody reads wait
/// in their launch (as under Slurm's slurmstepd): that holds up neither the
/// node daemon (as many as it has worker threads) nor other jobs.
#[test]
fn fifo_outputs_nobody_reads_hold_up_no_other_job() {
    let t = TestCluster::start(1, |_| {});
    let held = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(3);
    let mut fifos = Vec::new();
    let mut ids = Vec::new();
    for i in 0..held {
        let fifo = t.work.join(format!("held{i}.fifo"));
        let path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo with a valid C string.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o666) }, 0);
        std::fs::set_permissions(&fifo, std::os::unix::fs::PermissionsExt::from_mode(0o666))
            .unwrap();
        ids.push(t.sbatch_as_user(&["-o", fifo.to_str().unwrap(), "--wrap", "echo held"]));
        fifos.push(fifo);
    }
    for id in &ids {
        t.wait_job(*id, 20, "running", |j| j.state == JobState::Running);
    }
    let other = t.sbatch(&["--wrap", "true"]);
    assert_eq!(
        t.wait_done(other, 30).state,
        JobState::Completed,
        "{}",
        t.logs()
    );
    let o = t.run("scontrol", &["show", "slurmd", "n1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Held past the controller's patience with a launch (10 s): the launch
    // still completes and its script is tracked once it runs.
    std::thread::sleep(Duration::from_secs(12));
    // Read each FIFO: the held scripts run and end.
    let readers: Vec<_> = fifos
        .into_iter()
        .map(|f| std::thread::spawn(move || std::fs::read_to_string(f).unwrap_or_default()))
        .collect();
    for id in ids {
        assert_eq!(t.wait_done(id, 30).state, JobState::Completed);
    }
    for r in readers {
        assert_eq!(r.join().unwrap(), "held\n");
    }
}

/// `sdiag` shows what the controller is still delivering to node daemons
/// (Slurm's agent counts and "Pending RPC statistics", with the nodes):
/// a cancel sent to a frozen node daemon stays on its way until the daemon
/// is back, then goes.
#[test]
fn sdiag_shows_messages_on_their_way_to_a_frozen_node() {
    let mut t = TestCluster::start(1, |_| {});
    let id = t.sbatch(&["--wrap", "sleep 60"]);
    t.wait_job(id, 20, "running", |j| j.state == JobState::Running);
    let sdiag = |t: &TestCluster| {
        let o = t.run("sdiag", &[]);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    // (Its launch is on its way a moment after it is running.)
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let idle = sdiag(&t);
        if idle.contains("\nPending RPC statistics\n\tNo pending RPCs\n") {
            // (This request at least; a heartbeat may be answered too.)
            let serving: u64 = idle
                .lines()
                .find_map(|l| l.strip_prefix("Server thread count:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            assert!(serving >= 1, "{idle}");
            break;
        }
        assert!(Instant::now() < deadline, "{idle}");
        std::thread::sleep(Duration::from_millis(100));
    }
    t.c.kill_slurmd(0, libc::SIGSTOP);
    let o = t.run("scancel", &[&id.to_string()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let deadline = Instant::now() + Duration::from_secs(15);
    let busy = loop {
        let out = sdiag(&t);
        if out.contains("\t 1: REQUEST_TERMINATE_JOB") {
            break out;
        }
        assert!(Instant::now() < deadline, "no pending terminate: {out}");
        std::thread::sleep(Duration::from_millis(200));
    };
    t.c.kill_slurmd(0, libc::SIGCONT);
    assert!(
        busy.contains(&format!(
            "\t{:<40}({:>5}) count:1     \n",
            "REQUEST_TERMINATE_JOB", 6011
        )),
        "{busy}"
    );
    assert!(
        busy.contains(&format!("\t 1: {:<36} n1\n", "REQUEST_TERMINATE_JOB")),
        "{busy}"
    );
    let agents: u64 = busy
        .lines()
        .find_map(|l| l.strip_prefix("Agent count:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    assert!(agents >= 1, "{busy}");
    // Back: delivered, nothing left on its way.
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let out = sdiag(&t);
        if out.contains("\tNo pending RPCs\n") && out.contains("Agent count:          0\n") {
            break;
        }
        assert!(Instant::now() < deadline, "still pending: {out}");
        std::thread::sleep(Duration::from_millis(300));
    }
    t.wait_done(id, 30);
}
