//! Accounting end to end: the controller's outbox, slurmdbd on SQLite and
//! the commands that read it.

use super::write_script;
use slurm_proto::JobState;
use slurm_tests::*;
use std::time::{Duration, Instant};

/// `sacct -P -n` lines for `jobs`, retried until `done` holds.
pub(crate) fn sacct_until(
    t: &TestCluster,
    args: &[&str],
    secs: u64,
    done: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut last = String::new();
    while Instant::now() < deadline {
        let out = t.run("sacct", args);
        last = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.success() && done(&last) {
            return last;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    panic!(
        "sacct {args:?} never showed what was expected; last:\n{last}\n{}",
        t.logs()
    );
}

#[test]
fn jobs_reach_sacct_exactly_once_across_a_slurmdbd_outage() {
    let mut t = TestCluster::start(2, |s| s.accounting = true);
    let ok = write_script(&t, "ok.sh", "#!/bin/sh\nsrun -n1 true\nsleep 2\nexit 0\n");
    let bad = write_script(&t, "bad.sh", "#!/bin/sh\nexit 3\n");
    let long = write_script(&t, "long.sh", "#!/bin/sh\nsleep 300\n");
    // Accounts and users made with sacctmgr.
    for args in [
        &["-i", "add", "account", "physics", "Description=Physics"][..],
        &["-i", "add", "user", "root", "Account=physics"][..],
    ] {
        let o = t.run("sacctmgr", args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let a = t.sbatch(&["-J", "okjob", "-A", "physics", &ok]);
    let b = t.sbatch(&["-J", "badjob", "-A", "physics", &bad]);
    let c = t.sbatch(&["-J", "longjob", "-A", "physics", &long]);
    t.wait_job(c, 30, "running", |j| {
        j.state == slurm_proto::JobState::Running
    });
    let out = t.run("scancel", &[&c.to_string()]);
    assert!(out.status.success());
    for id in [a, b, c] {
        t.wait_done(id, 60);
    }
    let ids = format!("{a},{b},{c}");
    let fmt = "--format=JobID,JobName,State,ExitCode,Elapsed";
    let text = sacct_until(&t, &["-P", "-n", "-j", &ids, fmt], 30, |s| {
        s.contains(&format!("{a}|okjob|COMPLETED|0:0"))
            && s.contains(&format!("{b}|badjob|FAILED|3:0"))
            && s.contains(&format!("{c}|longjob|CANCELLED by 0|0:0"))
            && s.contains(&format!("{a}.0|true|COMPLETED|0:0"))
            && s.contains(&format!("{c}.batch|batch|CANCELLED|0:15"))
    });
    assert!(
        text.contains(&format!("{a}.batch|batch|COMPLETED|0:0")),
        "{text}"
    );
    let accts = t.run(
        "sacct",
        &["-P", "-n", "-X", "-j", &ids, "--format=Account,User"],
    );
    assert_eq!(
        String::from_utf8_lossy(&accts.stdout),
        "physics|root\nphysics|root\nphysics|root\n"
    );
    // The 2-second job took at least 2 seconds.
    let elapsed = text
        .lines()
        .find(|l| l.starts_with(&format!("{a}|")))
        .and_then(|l| l.rsplit('|').next())
        .unwrap_or_default()
        .to_string();
    assert!(elapsed.as_str() >= "00:00:02", "{text}");
    // The default layout, as Slurm prints it.
    let out = t.run("sacct", &["-j", &b.to_string(), "-X"]);
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        s.starts_with(
            "JobID           JobName  Partition    Account  AllocCPUS      State ExitCode \n"
        ),
        "{s}"
    );
    assert!(s.contains("     badjob      debug "), "{s}");

    // slurmdbd goes away; jobs keep running and their records wait, even
    // across a controller crash.
    t.c.kill_dbd(libc::SIGKILL);
    let d = t.sbatch(&["-J", "during1", &bad]);
    let e = t.sbatch(&["-J", "during2", &ok]);
    t.wait_done(d, 60);
    t.wait_done(e, 60);
    t.c.kill_ctld(libc::SIGKILL);
    t.c.start_ctld().expect("controller restarts");
    let f = t.sbatch(&["-J", "during3", &bad]);
    t.wait_done(f, 60);
    let out = t.run("sacct", &["-j", &d.to_string()]);
    assert!(!out.status.success(), "sacct works without slurmdbd?");
    t.c.start_dbd().expect("slurmdbd restarts");
    let all = format!("{a},{b},{c},{d},{e},{f}");
    let text = sacct_until(
        &t,
        &["-P", "-n", "-j", &all, "--format=JobID,State"],
        30,
        |s| {
            s.contains(&format!("{d}|FAILED"))
                && s.contains(&format!("{e}|COMPLETED"))
                && s.contains(&format!("{e}.0|COMPLETED"))
                && s.contains(&format!("{f}|FAILED"))
        },
    );
    // Every job and step exactly once.
    let mut lines: Vec<&str> = text.lines().map(|l| l.split('|').next().unwrap()).collect();
    let n = lines.len();
    lines.sort();
    lines.dedup();
    assert_eq!(lines.len(), n, "a record doubled:\n{text}");
    for id in [a, b, c, d, e, f] {
        assert!(
            lines.contains(&id.to_string().as_str()),
            "{id} missing:\n{text}"
        );
        assert!(
            lines.contains(&format!("{id}.batch").as_str()),
            "{id}.batch missing:\n{text}"
        );
    }
    assert_eq!(
        n,
        6 * 2 + 2,
        "jobs, batch steps and two srun steps:\n{text}"
    );
}

#[test]
fn memory_hog_ends_out_of_memory_and_usage_reaches_sacct() {
    let v1 = std::path::Path::new("/sys/fs/cgroup/memory/cgroup.procs").exists();
    let v2 = std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    if unsafe { libc::geteuid() } != 0 || !(v1 || v2) {
        eprintln!("skipped: needs root and a memory cgroup");
        return;
    }
    let t = TestCluster::start(1, |s| {
        s.accounting = true;
        s.extra_conf =
            "ProctrackType=proctrack/cgroup\nTaskPlugin=task/affinity,task/cgroup\n".into();
        s.cgroup_conf = Some(
            "CgroupPlugin=autodetect\nConstrainCores=yes\nConstrainRAMSpace=yes\nConstrainSwapSpace=yes\n"
                .into(),
        );
    });
    // A step's usage is gathered on its node too.
    let step = write_script(
        &t,
        "step.sh",
        "#!/bin/sh\nsrun -n1 sh -c 'head -c 20M /dev/zero | tail > /dev/null'\n",
    );
    let sid = t.sbatch(&["--mem=200", &step]);
    t.wait_done(sid, 60);
    let text = sacct_until(
        &t,
        &[
            "-P",
            "-n",
            "--noconvert",
            "-j",
            &sid.to_string(),
            "--format=JobID,State,MaxRSS,MaxRSSNode",
        ],
        30,
        |s| {
            s.lines()
                .any(|l| l.starts_with(&format!("{sid}.0|COMPLETED|")) && l.ends_with("|n1"))
        },
    );
    let rss: u64 = text
        .lines()
        .find(|l| l.starts_with(&format!("{sid}.0|")))
        .and_then(|l| l.split('|').nth(2))
        .and_then(|v| v.trim_end_matches('K').parse().ok())
        .unwrap_or(0);
    assert!(rss > 1024, "MaxRSS of step 0: {text}");

    // Each task of a step has its own cgroup under the step's.
    let out = t.run(
        "srun",
        &[
            "-n2",
            "-l",
            "sh",
            "-c",
            "grep -E 'freezer|cpuacct|unified|^0::' /proc/self/cgroup | head -1",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("/step_0/task_0") && text.contains("/step_0/task_1"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let hog = write_script(
        &t,
        "hog.sh",
        "#!/bin/sh\nhead -c 300M /dev/zero | tail > /dev/null\necho after\n",
    );
    let id = t.sbatch(&["--mem=64", &hog]);
    let j = t.wait_done(id, 60);
    assert_eq!(j.state, slurm_proto::JobState::OutOfMemory, "{}", t.logs());
    let out = t.run(
        "squeue",
        &["-t", "all", "-h", "-j", &id.to_string(), "-o", "%T %r"],
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "OUT_OF_MEMORY OutOfMemory"
    );
    let fmt = "--format=JobID,State,MaxRSS,TotalCPU";
    let text = sacct_until(
        &t,
        &["-P", "-n", "--noconvert", "-j", &id.to_string(), fmt],
        30,
        |s| s.contains(&format!("{id}.batch|OUT_OF_MEMORY|")),
    );
    let batch: Vec<&str> = text
        .lines()
        .find(|l| l.starts_with(&format!("{id}.batch|")))
        .unwrap()
        .split('|')
        .collect();
    let rss_k: u64 = batch[2].trim_end_matches('K').parse().unwrap_or(0);
    assert!(rss_k > 1024, "MaxRSS of the batch step: {text}");
    assert!(
        !batch[3].is_empty() && batch[3] != "00:00.000",
        "TotalCPU: {text}"
    );
}

/// `AccountingStoreFlags=job_script,job_env`: `sacct -B` and `--env-vars`
/// show a job's batch script and environment (kept by slurmdbd) to its
/// owner and root; to another user they are NONE; the options' rules and
/// messages are Slurm's.
#[test]
fn sacct_shows_a_jobs_script_and_environment_to_its_owner() {
    let t = TestCluster::start(1, |s| {
        s.accounting = true;
        s.extra_conf = "AccountingStoreFlags=job_script,job_env\n".into();
    });
    let body = "#!/bin/sh\n# marker 7f3a\ntrue\n";
    let script = write_script(&t, "marked.sh", body);
    let id = t.sbatch_as_user(&["--export=ALL,MARK_7F3A=42", &script]);
    t.wait_done(id, 30);
    let j = id.to_string();
    let sacct = |uid: u32, args: &[&str]| {
        let o = t.cmd_as(uid, uid, "sacct").args(args).output().unwrap();
        (o.status.code(), stdout(&o), stderr(&o))
    };
    let rule = "-".repeat(80);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, out, _) = sacct(TEST_UID, &["-B", "-j", &j]);
        if out.contains("marker 7f3a") {
            assert_eq!(out, format!("Batch Script for {j}\n{rule}\n{body}"));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never recorded: {out}\n{}",
            t.logs()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let (_, env, _) = sacct(TEST_UID, &["--env-vars", "-j", &j]);
    assert!(
        env.starts_with(&format!(
            "Environment used for {j} (must be batch to display)\n{rule}\n"
        )),
        "{env}"
    );
    assert!(env.lines().any(|l| l == "MARK_7F3A=42"), "{env}");
    // Root sees it; another user does not.
    assert_eq!(sacct(0, &["-n", "-B", "-j", &j]).1, body);
    assert_eq!(
        sacct(1000, &["-B", "-j", &j]).1,
        format!("Batch Script for {j}\n{rule}\nNONE\n")
    );
    assert!(!sacct(1000, &["--env-vars", "-j", &j])
        .1
        .contains("MARK_7F3A"));
    // Slurm's rules.
    let (code, _, err) = sacct(TEST_UID, &["-B"]);
    assert_eq!(code, Some(1));
    assert!(
        err.starts_with("sacct: fatal: When requesting job scripts you must also request specific jobs with the '-j' option."),
        "{err}"
    );
    let (code, _, err) = sacct(TEST_UID, &["-B", "--env-vars", "-j", &j]);
    assert_eq!(code, Some(1));
    assert!(
        err.starts_with(
            "sacct: fatal: Options --batch-script and --env-vars are mutually exclusive"
        ),
        "{err}"
    );
}

/// `--wckey` with TrackWCKey=yes: kept in accounting, shown by `sacct -o
/// WCKey` and selected by `sacct -W`.
#[test]
fn wckeys_reach_accounting_and_select_jobs() {
    let t = TestCluster::start(1, |s| {
        s.accounting = true;
        s.extra_conf.push_str("TrackWCKey=yes\n");
    });
    // scancel --wckey (and SCANCEL_WCKEY) ends only the jobs of that key.
    let held: Vec<_> = ["alpha", "beta", "gamma"]
        .iter()
        .map(|k| t.sbatch(&["-H", &format!("--wckey={k}"), "--wrap", "true"]))
        .collect();
    assert!(t.run("scancel", &["--wckey=beta"]).status.success());
    let o = t
        .cmd("scancel")
        .env("SCANCEL_WCKEY", "gamma")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let states: Vec<_> = held.iter().map(|&id| t.job(id).unwrap().state).collect();
    assert_eq!(
        states,
        vec![JobState::Pending, JobState::Cancelled, JobState::Cancelled]
    );
    assert!(t.run("scancel", &[&held[0].to_string()]).status.success());
    let a = t.sbatch(&["--wckey=alpha", "--wrap", "true"]);
    let b = t.sbatch(&["--wckey=beta", "--wrap", "true"]);
    for id in [a, b] {
        t.wait_done(id, 30);
    }
    let text = sacct_until(
        &t,
        &["-P", "-n", "-X", "-W", "beta", "-o", "JobID,WCKey"],
        30,
        |s| s.contains(&format!("{b}|beta")) && s.contains(&format!("{}|beta", held[1])),
    );
    // The held one scancel ended is there too.
    assert_eq!(text, format!("{}|beta\n{b}|beta\n", held[1]));
    let text = sacct_until(
        &t,
        &["-P", "-n", "-X", "-j", &a.to_string(), "-o", "JobID,WCKey"],
        30,
        |s| !s.is_empty(),
    );
    assert_eq!(text, format!("{a}|alpha\n"));
}

/// What sacct keeps of how a job waited and ran: `Constraints`, `Flags`
/// (the scheduler that started it), `Reason` (why it last waited other than
/// for priority or resources), `Reservation` and the file patterns
/// (`StdOut`, expanded with `--expand-patterns`); `-C`, `-F` and `-R`
/// select by them.
#[test]
fn sacct_keeps_why_and_how_jobs_waited_and_ran() {
    let t = TestCluster::start(1, |s| {
        s.accounting = true;
        s.node_features = vec!["intel,ib".into()];
    });
    let out = t.run(
        "scontrol",
        &[
            "create",
            "reservation",
            "ReservationName=r1",
            "StartTime=now",
            "Duration=10",
            "Nodes=n1",
            "Users=root",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().to_str().unwrap();
    let a = t.sbatch(&[
        "-C",
        "intel",
        "--reservation=r1",
        "-D",
        cwd,
        "-o",
        "out-%j.log",
        "--wrap",
        "sleep 1",
    ]);
    // (In the reservation too: it holds the only node.)
    let b = t.sbatch(&[
        &format!("--dependency=afterok:{a}"),
        "--reservation=r1",
        "-D",
        cwd,
        "--wrap",
        "true",
    ]);
    for id in [a, b] {
        t.wait_done(id, 30);
    }
    let fmt = "JobID,Constraints,Flags,Reason,Reservation,StdOut";
    let text = sacct_until(
        &t,
        &["-P", "-n", "-X", "-j", &format!("{a},{b}"), "-o", fmt],
        30,
        |s| s.lines().count() == 2 && s.contains("Dependency"),
    );
    assert_eq!(
        text,
        format!(
            "{a}|intel|SchedMain,StartReceived|None|r1|out-%j.log\n\
             {b}||SchedMain,StartReceived|Dependency|r1|slurm-%j.out\n"
        )
    );
    let o = t.run(
        "sacct",
        &[
            "-P",
            "-n",
            "-X",
            "-j",
            &a.to_string(),
            "-o",
            "StdOut",
            "--expand-patterns",
        ],
    );
    assert_eq!(stdout(&o), format!("{cwd}/out-{a}.log\n"));
    assert!(dir.path().join(format!("out-{a}.log")).exists());
    // The filters, over both jobs.
    let ids = format!("{a},{b}");
    let sel = |extra: &[&str]| {
        let mut args = vec!["-P", "-n", "-X", "-j", &ids, "-o", "JobID"];
        args.extend_from_slice(extra);
        let o = t.run("sacct", &args);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    assert_eq!(sel(&["-C", "intel"]), format!("{a}\n"));
    assert_eq!(sel(&["-R", "Dependency"]), format!("{b}\n"));
    assert_eq!(sel(&["-F", "SchedBackfill"]), "");
    assert_eq!(sel(&["-F", "SchedMain"]), format!("{a}\n{b}\n"));
    let o = t.run("sacct", &["-R", "Sleepy"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("unrecognized job reason value 'Sleepy'"));
}

/// `JobCompType=jobcomp/script`: `JobCompLoc` is run once for each ended
/// job, as Slurm's plugin runs it: in /tmp, with only the job's variables
/// (Slurm's names) in its environment, nothing of the controller's.
#[test]
fn a_jobcomp_script_is_run_for_each_ended_job_with_the_job_in_its_environment() {
    use slurm_tests::TestCluster;
    use std::time::{Duration, Instant};
    let mut out_dir = std::path::PathBuf::new();
    let t = TestCluster::start(1, |s| {
        let script = s.dir.join("jobcomp.sh");
        out_dir = s.dir.join("comp");
        std::fs::create_dir_all(&out_dir).unwrap();
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\n{{ pwd; env | sort; }} > {}/$JOBID.tmp && mv {}/$JOBID.tmp {}/$JOBID\n",
                out_dir.display(),
                out_dir.display(),
                out_dir.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        s.extra_conf = format!(
            "JobCompType=jobcomp/script\nJobCompLoc={}\n",
            script.display()
        );
    });
    let ok = t.sbatch(&[
        "-J",
        "fine",
        "-t",
        "5",
        "--wrap",
        "srun sh -c 'exit 2'; true",
    ]);
    let held = t.sbatch(&["-H", "--wrap", "true"]);
    t.run("scancel", &[&held.to_string()]);
    for id in [ok, held] {
        t.wait_done(id, 30);
    }
    let read = |id: u32| {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(text) = std::fs::read_to_string(out_dir.join(id.to_string())) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "no record of job {id}\n{}",
                t.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let text = read(ok);
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("/tmp"), "{text}");
    let env: std::collections::BTreeMap<&str, &str> =
        lines.filter_map(|l| l.split_once('=')).collect();
    for (k, v) in [
        ("JOBID", ok.to_string().as_str()),
        ("JOBNAME", "fine"),
        ("JOBSTATE", "COMPLETED"),
        ("EXITCODE", "0:0"),
        ("DERIVED_EC", "2:0"),
        ("BATCH", "yes"),
        ("NODES", "n1"),
        ("NODECNT", "1"),
        ("PROCS", "1"),
        ("UID", "0"),
        ("USERNAME", "root"),
        ("ARRAYJOBID", "0"),
        ("ARRAYTASKID", "4294967294"),
        ("LIMIT", "00:05:00"),
        ("PATH", "/usr/bin:/bin:/usr/sbin:/sbin"),
    ] {
        assert_eq!(env.get(k).copied(), Some(v), "{k}: {text}");
    }
    for k in ["START", "END", "SUBMIT", "ELIGIBLE"] {
        assert!(
            env.get(k)
                .is_some_and(|v| v.parse::<i64>().is_ok_and(|t| t > 0)),
            "{k}: {text}"
        );
    }
    // Nothing of the controller's own environment (sh adds PWD and the like).
    for k in ["SLURM_CONF", "HOME"] {
        assert!(!env.contains_key(k), "{k}: {text}");
    }
    // An ordinary user's job named to look like shell: the script is run
    // without a shell, the name is a value only.
    let planted = t.work.join("planted");
    let name = format!("$(touch {});x", planted.display());
    let theirs = t.sbatch_as_user(&["-J", &name, "-o", "/dev/null", "--wrap", "true"]);
    t.wait_done(theirs, 30);
    let text = read(theirs);
    assert!(text.contains(&format!("\nJOBNAME={name}\n")), "{text}");
    assert!(text.contains("\nUSERNAME=nobody\n"), "{text}");
    assert!(!planted.exists(), "the job's name was run");
    let text = read(held);
    assert!(text.contains("\nJOBSTATE=CANCELLED\n"), "{text}");
    assert!(
        text.contains("\nNODES=\n") && text.contains("\nBATCH=yes\n"),
        "{text}"
    );
}

/// `JobCompType=jobcomp/filetxt`: each ended job gets one line in
/// `JobCompLoc`, in Slurm's layout, and `sacct -c` (`-f FILE`) reads them
/// back; a `JobCompLoc` turned into a link is not written through.
#[test]
fn job_completion_records_go_to_jobcomploc_and_back_through_sacct_c() {
    use slurm_proto::JobState;
    use slurm_tests::{stderr, stdout, TestCluster};
    use std::time::{Duration, Instant};
    let t = TestCluster::start(1, |s| {
        s.extra_conf = format!(
            "JobCompType=jobcomp/filetxt\nJobCompLoc={}\n",
            s.dir.join("jobcomp.log").display()
        );
    });
    let loc = t.c.spec.dir.join("jobcomp.log");
    let ok = t.sbatch(&["-J", "fine", "--wrap", "true"]);
    let bad = t.sbatch(&["-J", "bad", "--wrap", "exit 3"]);
    let held = t.sbatch(&["-H", "--wrap", "true"]);
    t.run("scancel", &[&held.to_string()]);
    // A step failed, the script did not: the step's exit is its derived one.
    let step_failed = t.sbatch(&["--wrap", "srun sh -c 'exit 5'; true"]);
    for id in [ok, bad, held, step_failed] {
        t.wait_done(id, 30);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = std::fs::read_to_string(&loc).unwrap_or_default();
        if text.lines().count() >= 4 || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(text.lines().count(), 4, "{text}\n{}", t.logs());
    let of = |id: u32| {
        text.lines()
            .find(|l| l.starts_with(&format!("JobId={id} ")))
            .unwrap_or_default()
            .to_string()
    };
    let l = of(ok);
    assert!(
        l.starts_with(&format!(
            "JobId={ok} UserId=root(0) GroupId=root(0) Name=fine JobState=COMPLETED Partition="
        )),
        "{l}"
    );
    assert!(l.contains(" NodeList=n1 NodeCnt=1 ProcCnt=1 "), "{l}");
    assert!(l.ends_with(" DerivedExitCode=0:0 ExitCode=0:0 "), "{l}");
    assert!(of(bad).contains(" JobState=FAILED "), "{}", of(bad));
    assert!(of(bad).ends_with(" ExitCode=3:0 "), "{}", of(bad));
    assert!(
        of(step_failed).ends_with(" DerivedExitCode=5:0 ExitCode=0:0 "),
        "{}",
        of(step_failed)
    );
    assert!(
        of(held).contains(" JobState=CANCELLED ") && of(held).contains(" NodeList=(null) "),
        "{}",
        of(held)
    );
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&loc).unwrap().permissions())
            & 0o777,
        0o644
    );

    // sacct -c, as an ordinary user too (every user's jobs, as Slurm's).
    let out = t.run_as_user(
        "sacct",
        &["-c", "-n", "-P", "-o", "JobID,JobName,State,ExitCode"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    // (In the file's order: as the jobs ended.)
    let mut rows: Vec<String> = stdout(&out).lines().map(str::to_string).collect();
    rows.sort();
    assert_eq!(
        rows,
        [
            format!("{ok}|fine|COMPLETED|0:0"),
            format!("{bad}|bad|FAILED|3:0"),
            format!("{held}|wrap|CANCELLED|0:0"),
            format!("{step_failed}|wrap|COMPLETED|0:0")
        ]
    );
    let out = t.run("sacct", &["-c", "-j", &bad.to_string()]);
    let s = stdout(&out);
    assert!(
        s.starts_with(
            "JobID           UID    JobName  Partition   NNodes        NodeList      State                 End \n"
        ),
        "{s}"
    );
    assert!(s.lines().nth(2).unwrap_or("").contains(" FAILED 20"), "{s}");
    assert_eq!(s.lines().count(), 3, "{s}");
    let copy = t.work.join("comp.copy");
    std::fs::copy(&loc, &copy).unwrap();
    let out = t.run("sacct", &["-f", copy.to_str().unwrap(), "-b", "-n", "-P"]);
    assert_eq!(stdout(&out).lines().count(), 4, "{}", stderr(&out));
    let out = t.run("sacct", &["-f", "/nonexistent/x", "-n"]);
    assert_eq!(
        (out.status.code(), stderr(&out).lines().next().unwrap_or("")),
        (Some(1), "/nonexistent/x is not a valid file")
    );
    // Without JobCompType: Slurm's refusal.
    let conf = std::fs::read_to_string(t.c.spec.conf_path()).unwrap();
    let plain: String = conf
        .lines()
        .filter(|l| !l.starts_with("JobComp"))
        .map(|l| format!("{l}\n"))
        .collect();
    // (Beside slurm.conf: the files it names are found relative to it.)
    let plain_path = t.c.spec.conf_path().with_file_name("plain.conf");
    std::fs::write(&plain_path, plain).unwrap();
    let out = t
        .cmd("sacct")
        .env("SLURM_CONF", &plain_path)
        .arg("-c")
        .output()
        .unwrap();
    assert_eq!(
        (out.status.code(), stderr(&out)),
        (Some(1), "Slurm job completion is disabled\n".to_string())
    );

    // JobCompLoc swapped for a link to another file: that file is left
    // alone (the record is lost, and said in the controller's log).
    let victim = t.work.join("victim");
    std::fs::write(&victim, "keep\n").unwrap();
    std::fs::remove_file(&loc).unwrap();
    std::os::unix::fs::symlink(&victim, &loc).unwrap();
    let more = t.sbatch(&["--wrap", "true"]);
    assert_eq!(t.wait_done(more, 30).state, JobState::Completed);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n");
    assert!(
        t.logs().contains("job completion record(s) lost"),
        "{}",
        t.logs()
    );
    // A FIFO there holds nothing up: its record is lost, the next one (a
    // regular file again) is written.
    std::fs::remove_file(&loc).unwrap();
    let name = std::ffi::CString::new(loc.to_str().unwrap()).unwrap();
    // SAFETY: a valid path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o644) }, 0);
    let fifo_job = t.sbatch(&["--wrap", "true"]);
    assert_eq!(t.wait_done(fifo_job, 30).state, JobState::Completed);
    std::thread::sleep(Duration::from_millis(500));
    std::fs::remove_file(&loc).unwrap();
    let after = t.sbatch(&["--wrap", "true"]);
    assert_eq!(t.wait_done(after, 30).state, JobState::Completed);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(&loc).unwrap_or_default();
        if text.contains(&format!("JobId={after} ")) {
            assert!(!text.contains(&format!("JobId={fifo_job} ")), "{text}");
            break;
        }
        assert!(Instant::now() < deadline, "the writer is stuck: {text:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A requeued job, as Slurm records it: the run that was requeued ends
/// REQUEUED in accounting and in `JobCompLoc`, and the next run is a
/// record of its own (a new submit time): `sacct` shows the last run,
/// `sacct -D` both, `sacct -s RQ` the requeued one.
#[test]
fn a_requeued_run_stays_in_accounting_as_requeued() {
    let t = TestCluster::start(1, |s| {
        s.accounting = true;
        s.extra_conf = format!(
            "JobCompType=jobcomp/filetxt\nJobCompLoc={}\n",
            s.dir.join("jobcomp.log").display()
        );
    });
    let id = t.sbatch(&["--requeue", "--wrap", "srun sleep 60"]);
    let first = t.wait_job(id, 30, "running", |j| j.state == JobState::Running);
    let out = t.run("scontrol", &["requeue", &id.to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let again = t.wait_job(id, 60, "running again", |j| {
        j.state == JobState::Running && j.restarts == 1
    });
    assert!(
        again.submit_time > first.submit_time,
        "a new submit time: {} then {}",
        first.submit_time,
        again.submit_time
    );
    t.run("scancel", &[&id.to_string()]);
    t.wait_done(id, 30);
    let jid = id.to_string();
    let all = sacct_until(
        &t,
        &["-D", "-X", "-n", "-P", "-j", &jid, "-o", "JobID,State"],
        30,
        |s| s.lines().count() == 2 && s.contains("CANCELLED"),
    );
    assert_eq!(
        all,
        format!("{id}|REQUEUED\n{id}|CANCELLED by 0\n"),
        "{}",
        t.logs()
    );
    let last = stdout(&t.run(
        "sacct",
        &["-X", "-n", "-P", "-j", &jid, "-o", "JobID,State"],
    ));
    assert_eq!(last, format!("{id}|CANCELLED by 0\n"));
    let rq = stdout(&t.run(
        "sacct",
        &["-s", "RQ", "-n", "-P", "-j", &jid, "-o", "JobID,State"],
    ));
    assert!(rq.starts_with(&format!("{id}|REQUEUED\n")), "{rq}");
    // The first run's steps stay with it.
    let steps = stdout(&t.run(
        "sacct",
        &["-D", "-n", "-P", "-j", &jid, "-o", "JobID,State"],
    ));
    assert!(
        steps.contains(&format!("{id}|REQUEUED\n{id}.batch|CANCELLED")),
        "{steps}"
    );
    let loc = t.c.spec.dir.join("jobcomp.log");
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = std::fs::read_to_string(&loc).unwrap_or_default();
        if text.lines().count() >= 2 || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let states: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(&format!("JobId={id} ")))
        .filter_map(|l| l.split(" JobState=").nth(1)?.split(' ').next())
        .collect();
    assert_eq!(states, ["REQUEUED", "CANCELLED"], "{text}");
}
