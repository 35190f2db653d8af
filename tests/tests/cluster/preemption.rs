//! Preemption: jobs in a higher PriorityTier partition displace running
//! jobs of lower ones, by the victims' PreemptMode.

use slurm_proto::JobState;
use slurm_tests::*;

#[test]
fn preemptor_displaces_lower_tier_jobs_by_their_mode() {
    let t = TestCluster::start(1, |s| {
        s.extra_conf = "PreemptType=preempt/partition_prio\nPreemptMode=REQUEUE\n\
PartitionName=low Nodes=n1 PriorityTier=1\n\
PartitionName=lowc Nodes=n1 PriorityTier=1 PreemptMode=CANCEL\n\
PartitionName=high Nodes=n1 PriorityTier=10\n"
            .into();
    });
    // REQUEUE: the victim goes back to the queue and runs again later.
    let low = t.sbatch(&["-p", "low", "-n", "4", "--wrap", "sleep 300"]);
    t.wait_job(low, 30, "running", |j| j.state == JobState::Running);
    let high = t.sbatch(&["-p", "high", "-n", "4", "--wrap", "sleep 2"]);
    t.wait_job(high, 30, "running", |j| j.state == JobState::Running);
    let l = t.job(low).unwrap();
    assert_eq!(
        (l.state, l.restarts),
        (JobState::Pending, 1),
        "{:?}",
        l.reason
    );
    t.wait_done(high, 30);
    t.wait_job(low, 30, "running again", |j| j.state == JobState::Running);
    assert!(t.run("scancel", &[&low.to_string()]).status.success());
    t.wait_done(low, 30);

    // CANCEL: the victim ends PREEMPTED.
    let lowc = t.sbatch(&["-p", "lowc", "-n", "4", "--wrap", "sleep 300"]);
    t.wait_job(lowc, 30, "running", |j| j.state == JobState::Running);
    let high = t.sbatch(&["-p", "high", "-n", "2", "--wrap", "sleep 1"]);
    let v = t.wait_done(lowc, 30);
    assert_eq!(v.state, JobState::Preempted);
    assert_eq!(t.wait_done(high, 30).state, JobState::Completed);
    let sq = t.run(
        "squeue",
        &["-t", "all", "-h", "-j", &lowc.to_string(), "-o", "%T"],
    );
    assert_eq!(String::from_utf8_lossy(&sq.stdout).trim(), "PREEMPTED");

    // Same tier: no preemption, the job waits.
    let a = t.sbatch(&["-p", "low", "-n", "4", "--wrap", "sleep 300"]);
    t.wait_job(a, 30, "running", |j| j.state == JobState::Running);
    let b = t.sbatch(&["-p", "lowc", "-n", "4", "--wrap", "true"]);
    t.wait_passes(2);
    assert_eq!(t.job(a).unwrap().state, JobState::Running);
    assert_eq!(t.job(b).unwrap().state, JobState::Pending);
}

#[test]
fn qos_preemption_uses_slurmdbd_qos_lists() {
    let t = TestCluster::start(1, |s| {
        s.accounting = true;
        s.extra_conf = "PreemptType=preempt/qos\nPreemptMode=CANCEL\n".into();
    });
    for args in [
        &["-i", "add", "qos", "scavenger"][..],
        &[
            "-i",
            "add",
            "qos",
            "urgent",
            "Preempt=scavenger",
            "Priority=100",
        ][..],
    ] {
        let o = t.run("sacctmgr", args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    // The controller learns the QOS at once (slurmdbd tells it).
    let victim = t.sbatch(&["--qos=scavenger", "-n", "4", "--wrap", "sleep 300"]);
    t.wait_job(victim, 30, "running", |j| j.state == JobState::Running);
    let other = t.sbatch(&["--qos=normal", "-n", "4", "--wrap", "true"]);
    let urgent = t.sbatch(&["--qos=urgent", "-n", "4", "--wrap", "true"]);
    assert_eq!(t.wait_done(victim, 30).state, JobState::Preempted);
    assert_eq!(t.wait_done(urgent, 30).state, JobState::Completed);
    // normal may not preempt: it just waited its turn.
    assert_eq!(t.wait_done(other, 30).state, JobState::Completed);
}

/// A job that counts in `file` ten times a second (for at most 1500
/// counts, so nothing outlives a failed test for long). Each count is
/// renamed into place, so a reader never sees a file half written.
fn counter(t: &TestCluster, file: &str) -> String {
    let path = t.work.join(file);
    format!(
        "i=0; while [ $i -lt 1500 ]; do i=$((i+1)); echo $i > {p}.tmp; mv -f {p}.tmp {p}; sleep 0.1; done",
        p = path.display()
    )
}

fn count(t: &TestCluster, file: &str) -> u64 {
    std::fs::read_to_string(t.work.join(file))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Whether the count stays put for a second (the job is stopped).
fn stopped(t: &TestCluster, file: &str) -> bool {
    // A write under way when the job stopped may still land.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let a = count(t, file);
    std::thread::sleep(std::time::Duration::from_secs(1));
    a == count(t, file)
}

/// Whether the count goes up within a few seconds (a resume travels to the
/// node daemon after the controller already shows the job running).
fn advancing(t: &TestCluster, file: &str) -> bool {
    let a = count(t, file);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(200));
        if count(t, file) > a {
            return true;
        }
    }
    false
}

/// The v1 freezer state of the cgroup of job `job`'s batch script (found
/// through its process, as clusters of parallel tests reuse job ids).
fn freezer_state(t: &TestCluster, job: u32) -> Option<String> {
    let script = format!(
        "{}/spool/slurmd.n1/job{job:05}/slurm_script",
        t.c.spec.dir.display()
    );
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&cmd).contains(&script) {
            continue;
        }
        let cg = std::fs::read_to_string(e.path().join("cgroup")).ok()?;
        let rel = cg
            .lines()
            .find_map(|l| l.split_once(":freezer:").map(|(_, p)| p.to_string()))?;
        // The job's directory (the script sits in its step_batch).
        let job_dir = rel.trim_end_matches("/step_batch");
        let f = format!("/sys/fs/cgroup/freezer{job_dir}/freezer.state");
        return std::fs::read_to_string(f)
            .ok()
            .map(|s| s.trim().to_string());
    }
    None
}

#[test]
fn scontrol_suspend_stops_a_job_frees_its_cores_and_stops_its_clock() {
    let cgroups = std::path::Path::new("/sys/fs/cgroup/freezer/cgroup.procs").exists()
        || std::path::Path::new("/sys/fs/cgroup/cgroup.freeze").exists()
        || std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    let t = TestCluster::start(1, |s| {
        s.accounting = true;
        if cgroups && unsafe { libc::geteuid() } == 0 {
            // Frozen through the job's cgroup.
            s.extra_conf =
                "ProctrackType=proctrack/cgroup\nTaskPlugin=task/affinity,task/cgroup\n".into();
            s.cgroup_conf = Some("CgroupPlugin=autodetect\nConstrainCores=yes\n".into());
        }
    });
    let job = t.sbatch(&["-n", "4", "-t", "2", "--wrap", &counter(&t, "a")]);
    let before = t.wait_job(job, 30, "running", |j| j.state == JobState::Running);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while count(&t, "a") == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(advancing(&t, "a"), "the job never counted\n{}", t.logs());

    // Only operators may suspend.
    let o = t
        .cmd_as(1000, 1000, "scontrol")
        .args(["suspend", &job.to_string()])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("Access/permission denied"),
        "{}",
        stderr(&o)
    );

    let o = t.run("scontrol", &["suspend", &job.to_string()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j = t.wait_job(job, 10, "suspended", |j| j.state == JobState::Suspended);
    assert!(j.suspend_time.is_some());
    assert!(stopped(&t, "a"), "the job kept running while suspended");
    let v1_freezer = std::path::Path::new("/sys/fs/cgroup/freezer/cgroup.procs").exists();
    if v1_freezer && unsafe { libc::geteuid() } == 0 {
        assert_eq!(freezer_state(&t, job).as_deref(), Some("FROZEN"));
    }
    let sq = t.run("squeue", &["-h", "-j", &job.to_string(), "-o", "%t %T"]);
    assert_eq!(stdout(&sq).trim(), "S SUSPENDED");
    let o = t.run("scontrol", &["suspend", &job.to_string()]);
    assert!(!o.status.success(), "suspended twice");

    // Its cores went back: a job needing all of them starts.
    let other = t.sbatch(&["-n", "4", "--wrap", "sleep 2"]);
    t.wait_job(other, 30, "running", |j| j.state == JobState::Running);
    let o = t.run("scontrol", &["resume", &job.to_string()]);
    assert!(!o.status.success(), "resumed onto busy cores");
    assert!(stderr(&o).contains("busy"), "{}", stderr(&o));
    t.wait_done(other, 30);

    // A step asked for meanwhile waits until the job runs again.
    let mut step = t
        .cmd("srun")
        .args(["--jobid", &job.to_string(), "-n1", "true"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(
        step.try_wait().unwrap().is_none(),
        "a step ran in a suspended job"
    );
    let o = t.run("scontrol", &["resume", &job.to_string()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j = t.wait_job(job, 10, "running", |j| j.state == JobState::Running);
    let out = step.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("step creation temporarily disabled, retrying"),
        "{}",
        stderr(&out)
    );
    assert!(
        advancing(&t, "a"),
        "the job did not go on after resume\n{}",
        t.logs()
    );
    // The time limit did not run while it was stopped.
    let pushed = j.end_time.unwrap() - before.end_time.unwrap();
    assert!(j.suspended_secs >= 3, "{}", j.suspended_secs);
    assert_eq!(pushed, j.suspended_secs);
    let show = stdout(&t.run("scontrol", &["show", "job", &job.to_string()]));
    assert!(!show.contains("SuspendTime=None"), "{show}");
    let o = t.run("scontrol", &["resume", &job.to_string()]);
    assert!(!o.status.success(), "resumed a running job");

    // A suspended job can be cancelled (it is thawed to see its signals).
    assert!(t
        .run("scontrol", &["suspend", &job.to_string()])
        .status
        .success());
    t.wait_job(job, 10, "suspended", |j| j.state == JobState::Suspended);
    assert!(t.run("scancel", &[&job.to_string()]).status.success());
    let done = t.wait_done(job, 30);
    assert_eq!(done.state, JobState::Cancelled);
    assert!(stopped(&t, "a"));
    // Accounting keeps the suspended time, and leaves it out of Elapsed.
    let id = job.to_string();
    let want = done.suspended_secs.to_string();
    let line = crate::accounting::sacct_until(
        &t,
        &[
            "-X",
            "-n",
            "-P",
            "-j",
            &id,
            "-o",
            "State,Suspended,ElapsedRaw",
        ],
        30,
        |o| o.starts_with("CANCELLED") && !o.contains("|00:00:00|"),
    );
    let f: Vec<&str> = line.trim().split('|').collect();
    let (h, m, s) = (f[1][0..2].parse::<i64>().unwrap(), &f[1][3..5], &f[1][6..8]);
    let secs = h * 3600 + m.parse::<i64>().unwrap() * 60 + s.parse::<i64>().unwrap();
    assert_eq!(secs.to_string(), want, "{line}");
    assert_eq!(f[2].parse::<i64>().unwrap(), done.run_secs(0), "{line}");
}

#[test]
fn suspend_preemption_stops_the_victim_and_resumes_it_first() {
    let t = TestCluster::start(1, |s| {
        // The preemptor's partition shares cores with gang scheduling: the
        // victim's cores are its own, not taken turns with.
        s.extra_conf = "PreemptType=preempt/partition_prio\nPreemptMode=SUSPEND,GANG\n\
SchedulerTimeSlice=1\n\
PartitionName=low Nodes=n1 PriorityTier=1 Default=YES\n\
PartitionName=high Nodes=n1 PriorityTier=10 OverSubscribe=FORCE:2\n"
            .into();
    });
    let low = t.sbatch(&["-p", "low", "-n", "4", "--wrap", &counter(&t, "v")]);
    t.wait_job(low, 30, "running", |j| j.state == JobState::Running);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while count(&t, "v") == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let high = t.sbatch(&["-p", "high", "-n", "4", "--wrap", "sleep 4"]);
    t.wait_job(high, 30, "running", |j| j.state == JobState::Running);
    let v = t.job(low).unwrap();
    assert_eq!(v.state, JobState::Suspended);
    assert!(v.preempt_suspended);
    assert!(stopped(&t, "v"), "the victim kept running");
    // Time slices pass: the preemptor keeps running, the victim waits.
    assert_eq!(t.job(high).unwrap().state, JobState::Running);
    assert_eq!(t.job(low).unwrap().state, JobState::Suspended);
    // Operators cannot resume it while its preemptor has its cores.
    assert!(!t
        .run("scontrol", &["resume", &low.to_string()])
        .status
        .success());
    // A later job of its own tier does not get the victim's cores.
    let later = t.sbatch(&["-p", "low", "-n", "1", "--wrap", "true"]);
    t.wait_done(high, 30);
    let v = t.wait_job(low, 15, "resumed", |j| j.state == JobState::Running);
    assert!(v.suspended_secs >= 2, "{}", v.suspended_secs);
    assert!(advancing(&t, "v"), "the victim did not go on");
    assert_eq!(t.job(later).unwrap().state, JobState::Pending);
    assert!(t.run("scancel", &[&low.to_string()]).status.success());
    assert_eq!(t.wait_done(later, 30).state, JobState::Completed);
}

#[test]
fn oversubscribe_partitions_share_cores_up_to_their_count() {
    let t = TestCluster::start(1, |s| {
        s.extra_conf = "PartitionName=force Nodes=n1 OverSubscribe=FORCE:2 Default=YES\n\
PartitionName=yes Nodes=n1 OverSubscribe=YES:2\n"
            .into();
    });
    let running = |id| t.wait_job(id, 30, "running", |j| j.state == JobState::Running);
    let a = t.sbatch(&["-n", "4", "--wrap", "sleep 300"]);
    running(a);
    // Two jobs per core: the second shares every core, a third waits.
    let b = t.sbatch(&["-n", "4", "--wrap", "sleep 300"]);
    running(b);
    // Shown as Slurm shows shared cores: allocated once.
    let n1 = t.nodes().into_iter().find(|n| n.name == "n1").unwrap();
    assert_eq!((n1.alloc_cpus, n1.cpus), (4, 4));
    let c = t.sbatch(&["-n", "1", "--wrap", "true"]);
    t.wait_passes(2);
    assert_eq!(t.job(c).unwrap().state, JobState::Pending);
    // Nor do other partitions' jobs get those cores.
    let other = t.sbatch(&["-p", "yes", "-s", "-n", "1", "--wrap", "true"]);
    t.wait_passes(2);
    assert_eq!(t.job(other).unwrap().state, JobState::Pending);
    assert_eq!(t.job(a).unwrap().state, JobState::Running);
    assert!(t
        .run("scancel", &[&a.to_string(), &b.to_string()])
        .status
        .success());
    t.wait_done(c, 30);
    t.wait_done(other, 30);

    // OverSubscribe=YES: only jobs that ask (-s) share, and only with
    // jobs that asked too.
    let d = t.sbatch(&["-p", "yes", "-s", "-n", "4", "--wrap", "sleep 300"]);
    running(d);
    let e = t.sbatch(&["-p", "yes", "-n", "4", "--wrap", "sleep 300"]);
    let f = t.sbatch(&[
        "-p",
        "yes",
        "--oversubscribe",
        "-n",
        "4",
        "--wrap",
        "sleep 300",
    ]);
    running(f);
    t.wait_passes(2);
    assert_eq!(t.job(e).unwrap().state, JobState::Pending);
    let sq = t.run("squeue", &["-h", "-t", "R", "-o", "%i"]);
    let mut ids: Vec<String> = stdout(&sq).lines().map(|l| l.trim().to_string()).collect();
    ids.sort();
    let mut want = vec![d.to_string(), f.to_string()];
    want.sort();
    assert_eq!(ids, want);
    assert!(t
        .run("scancel", &[&d.to_string(), &f.to_string(), &e.to_string()])
        .status
        .success());
}

#[test]
fn gang_scheduling_time_slices_jobs_sharing_cores() {
    let t = TestCluster::start(1, |s| {
        s.extra_conf = "PreemptMode=GANG\nSchedulerTimeSlice=2\n\
PartitionName=gang Nodes=n1 OverSubscribe=FORCE:2 Default=YES\n"
            .into();
    });
    let a = t.sbatch(&["-n", "4", "--wrap", &counter(&t, "ga")]);
    t.wait_job(a, 30, "running", |j| j.state == JobState::Running);
    let b = t.sbatch(&["-n", "4", "--wrap", &counter(&t, "gb")]);
    // It started, and waits for its turn.
    t.wait_job(b, 30, "started", |j| {
        j.start_time.is_some() && j.state != JobState::Pending
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while (count(&t, "ga") == 0 || count(&t, "gb") == 0) && std::time::Instant::now() < deadline {
        // Never both at once (seen in one answer: two queries could fall
        // either side of a turn).
        let jobs = t.jobs();
        let state = |id| jobs.iter().find(|j| j.job_id == id).map(|j| j.state);
        assert!(
            !(state(a) == Some(JobState::Running) && state(b) == Some(JobState::Running)),
            "both ran at once"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(
        count(&t, "ga") > 0 && count(&t, "gb") > 0,
        "one never ran\n{}",
        t.logs()
    );
    // Turns go on: each is suspended for part of the time.
    std::thread::sleep(std::time::Duration::from_secs(5));
    for id in [a, b] {
        let j = t.job(id).unwrap();
        assert!(
            j.suspended_secs > 0 || j.state == JobState::Suspended,
            "job {id} never waited its turn: {:?}",
            j.state
        );
        assert!(matches!(j.state, JobState::Running | JobState::Suspended));
    }
    let sq = t.run("squeue", &["-h", "-o", "%t"]);
    let mut states: Vec<String> = stdout(&sq).lines().map(|l| l.trim().to_string()).collect();
    states.sort();
    assert_eq!(states, vec!["R", "S"], "one runs while the other waits");
    // Operators cannot cut in.
    let waiting = if t.job(a).unwrap().state == JobState::Suspended {
        a
    } else {
        b
    };
    assert!(!t
        .run("scontrol", &["resume", &waiting.to_string()])
        .status
        .success());
    assert!(t
        .run("scancel", &[&a.to_string(), &b.to_string()])
        .status
        .success());
    t.wait_done(a, 30);
    t.wait_done(b, 30);
}

#[test]
fn suspended_job_stays_suspended_across_controller_and_node_restarts() {
    let mut t = TestCluster::start(1, |_| {});
    let job = t.sbatch(&["-n", "2", "--wrap", &counter(&t, "r")]);
    t.wait_job(job, 30, "running", |j| j.state == JobState::Running);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while count(&t, "r") == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(t
        .run("scontrol", &["suspend", &job.to_string()])
        .status
        .success());
    t.wait_job(job, 10, "suspended", |j| j.state == JobState::Suspended);
    assert!(stopped(&t, "r"));
    // The controller crashes and comes back: the job is still suspended,
    // and its node (registering again) keeps it stopped.
    t.c.kill_ctld(libc::SIGKILL);
    t.c.start_ctld().expect("restart");
    assert_eq!(t.job(job).unwrap().state, JobState::Suspended);
    assert!(stopped(&t, "r"));
    // So does a restarted node daemon.
    t.c.kill_slurmd(0, libc::SIGKILL);
    t.c.start_slurmd(0).expect("slurmd restart");
    // Once the new daemon has registered and been told, the job is stopped
    // again (a loaded machine may take a few seconds).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !stopped(&t, "r") {
        assert!(
            std::time::Instant::now() < deadline,
            "the job runs after the node daemon's restart\n{}",
            t.logs()
        );
    }
    assert_eq!(t.job(job).unwrap().state, JobState::Suspended);
    let o = t.run("scontrol", &["resume", &job.to_string()]);
    assert!(o.status.success(), "{}", stderr(&o));
    t.wait_job(job, 10, "running", |j| j.state == JobState::Running);
    assert!(
        advancing(&t, "r"),
        "the job did not go on after the restarts"
    );
    assert!(t.run("scancel", &[&job.to_string()]).status.success());
    t.wait_done(job, 30);
}
