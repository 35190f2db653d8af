//! The compatibility matrix is what the code gives (`docs/compat.md` and
//! the README's figures are rewritten by `scripts/compat-report --write`).

use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn the_compatibility_matrix_is_generated_from_the_parsers() {
    let pages = slurm_tests::compat::load(&root().join("cli/compat/slurm-25.11")).unwrap();
    let want = slurm_tests::compat::markdown(&pages);
    let have = std::fs::read_to_string(root().join("docs/compat.md")).unwrap_or_default();
    assert!(
        have == want,
        "docs/compat.md is stale: run scripts/compat-report --write"
    );
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    assert!(
        slurm_tests::compat::with_summary(&readme, &pages).as_ref() == Some(&readme),
        "README.md's compatibility table is stale: run scripts/compat-report --write"
    );
    // The matrix reads the code: sbatch's --account works, an option no
    // table has is not yet, a variable our launch code sets is there.
    let t = slurm_tests::compat::tallies(&pages);
    let sbatch = &t.iter().find(|(n, _)| n == "sbatch").unwrap().1;
    assert!(sbatch[0].works > 50 && sbatch[0].not_yet > 0);
    assert!(slurm_tests::compat::env_out("sbatch").contains("SLURM_ARRAY_TASK_ID"));
    assert!(slurm_tests::compat::env_out("srun").contains("SLURM_PROCID"));
    assert!(slurm_tests::compat::env_out("salloc").contains("SLURM_JOB_NODELIST"));
}

/// `sbatch --wait` (`-W`): sbatch returns when the job has ended, with its
/// exit code (the highest of an array's tasks; 1 for a cancelled job).
#[test]
fn sbatch_wait_returns_the_jobs_exit_code() {
    use slurm_tests::{stderr, stdout, TestCluster};
    use std::time::{Duration, Instant};
    let t = TestCluster::start(1, |_| {});
    let started = Instant::now();
    let out = t.run("sbatch", &["--wait", "--wrap", "sleep 1; exit 3"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(started.elapsed() >= Duration::from_secs(1));
    let id: u32 = stdout(&out)
        .trim()
        .strip_prefix("Submitted batch job ")
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{}", stdout(&out)));
    let j = t.job(id).expect("the job is still listed");
    assert!(j.state.is_finished(), "{:?}", j.state);

    // An array: the highest task exit code; SBATCH_WAIT asks the same.
    let out = t
        .cmd("sbatch")
        .env("SBATCH_WAIT", "1")
        .args([
            "--parsable",
            "--array=1-2",
            "--wrap",
            "exit $SLURM_ARRAY_TASK_ID",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let array: u32 = stdout(&out).trim().parse().unwrap();
    assert!(t
        .jobs()
        .iter()
        .filter(|j| j.array.as_ref().is_some_and(|a| a.job_id == array))
        .all(|j| j.state.is_finished()));

    // -M names this cluster (or all): submitted; another: refused.
    let conf = std::fs::read_to_string(t.c.spec.conf_path()).unwrap();
    let name = conf
        .lines()
        .find_map(|l| l.strip_prefix("ClusterName="))
        .unwrap()
        .trim()
        .to_string();
    let out = t.run("sbatch", &["-W", "-Q", "-M", &name, "--wrap", "true"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = t.run("sbatch", &["--clusters=elsewhere", "--wrap", "true"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("sbatch: error: Invalid cluster name: elsewhere"),
        "{}",
        stderr(&out)
    );
    // scancel -M: another cluster's name is refused and cancels nothing.
    let held = t.sbatch(&["-H", "--wrap", "true"]).to_string();
    let out = t.run("scancel", &["-M", "elsewhere", &held]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("scancel: error: Invalid cluster name: elsewhere"),
        "{}",
        stderr(&out)
    );
    let held_id: u32 = held.parse().unwrap();
    assert_eq!(
        t.job(held_id).unwrap().state,
        slurm_proto::JobState::Pending
    );
    let out = t.run("scancel", &["-M", &name, &held]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        t.wait_done(held_id, 20).state,
        slurm_proto::JobState::Cancelled
    );
    // Success is 0; the script sees what its job asked for.
    let file = t.work.join("dep.out");
    let dep = format!("afterany:{id}");
    let out = t.run(
        "sbatch",
        &[
            "-W",
            "-Q",
            "-d",
            &dep,
            "-o",
            file.to_str().unwrap(),
            "--wrap",
            "echo dep=$SLURM_JOB_DEPENDENCY restarts=${SLURM_RESTART_COUNT-none}",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        format!("dep={dep} restarts=none\n")
    );

    // A job cancelled while sbatch waits: sbatch ends, not with 0.
    let mut waiting = t
        .cmd("sbatch")
        .args(["--wait", "--parsable", "--wrap", "sleep 60"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    {
        use std::io::BufRead;
        let mut r = std::io::BufReader::new(waiting.stdout.as_mut().unwrap());
        r.read_line(&mut line).unwrap();
    }
    let id: u32 = line.trim().parse().unwrap();
    t.wait_job(id, 20, "running", |j| {
        j.state == slurm_proto::JobState::Running
    });
    assert!(t.run("scancel", &[&id.to_string()]).status.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = waiting.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "sbatch --wait did not return");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status.code(), Some(1));
}

/// srun/salloc `-O` run more tasks than the node has CPUs (the allocation
/// is one task per node); `-d` makes the allocation wait for a job.
#[test]
fn srun_overcommits_and_waits_for_dependencies() {
    use slurm_tests::{stderr, stdout, TestCluster};
    let t = TestCluster::start(1, |_| {});
    let cpus = t.nodes()[0].cpus;
    let n = (2 * cpus + 1).to_string();
    let out = t.run("srun", &["-N1", "-n", &n, "true"]);
    assert!(!out.status.success(), "more tasks than CPUs without -O");
    let out = t.run(
        "srun",
        &["-N1", "-n", &n, "-O", "sh", "-c", "echo $SLURM_PROCID"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().count(), 2 * cpus as usize + 1);
    // salloc -O: its steps run the task count asked for.
    let out = t.run(
        "salloc",
        &[
            "-N1",
            "-n",
            &n,
            "--overcommit",
            "sh",
            "-c",
            "echo $SLURM_OVERCOMMIT; srun sh -c 'echo $SLURM_PROCID' | wc -l",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), format!("1\n{n}\n"));
    // -d: srun's allocation waits for the job it depends on.
    let first = t.sbatch(&["--wrap", "sleep 2"]);
    let dep = format!("afterok:{first}");
    let out = t.run("srun", &["-d", &dep, "sh", "-c", "echo done"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "done\n");
    let j = t.job(first).expect("the first job");
    assert_eq!(j.state, slurm_proto::JobState::Completed);
    // A dependency that can never be met: refused at once, as sbatch's.
    let out = t.run("srun", &["-d", "afterok:999999", "true"]);
    assert!(!out.status.success());
}

/// srun `-i`: task 0's stdin from a file, or none; the job options srun
/// shares with sbatch reach its allocation.
#[test]
fn srun_takes_stdin_from_a_file_and_the_jobs_options() {
    use slurm_tests::{stderr, stdout, TestCluster};
    use std::io::Write;
    use std::process::Stdio;
    let t = TestCluster::start(1, |_| {});
    let input = t.work.join("in.txt");
    std::fs::write(&input, "from the file\n").unwrap();
    let out = t.run("srun", &["-i", input.to_str().unwrap(), "cat"]);
    assert_eq!(stdout(&out), "from the file\n", "{}", stderr(&out));
    // -i none: the task reads nothing although srun's stdin has data.
    let mut c = t
        .cmd("srun")
        .args(["--input=none", "cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(b"typed\n").unwrap();
    let out = c.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(stdout(&out), "");
    // A file that is not there: an error before anything runs.
    let out = t.run("srun", &["-i", "/nonexistent/in", "true"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("srun: error: Could not open stdin file /nonexistent/in"),
        "{}",
        stderr(&out)
    );
    // Only task 0 can be given stdin.
    let out = t.run("srun", &["-n2", "-i", "1", "true"]);
    assert_eq!(out.status.code(), Some(1));
    // The job's own options.
    let out = t.run(
        "srun",
        &[
            "--comment=from-srun",
            "--nice=7",
            "--begin=now",
            "--exact",
            "sh",
            "-c",
            "scontrol show job $SLURM_JOB_ID",
        ],
    );
    let show = stdout(&out);
    assert!(show.contains("Comment=from-srun"), "{show}{}", stderr(&out));
    assert!(show.contains("Nice=7"), "{show}");
    let out = t.run("srun", &["--reservation=nosuch", "true"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("reservation"), "{}", stderr(&out));
}

/// srun `--open-mode=append` adds to its output file (truncated by
/// default); `--signal` warns a job srun allocates before its time limit.
#[test]
fn srun_open_mode_and_signal() {
    use slurm_tests::{stderr, TestCluster};
    let t = TestCluster::start(1, |_| {});
    let out = t.work.join("out.txt");
    let o = out.to_str().unwrap();
    for (args, want) in [
        (&["-o", o, "echo", "one"][..], "one\n"),
        (
            &["-o", o, "--open-mode=append", "echo", "two"][..],
            "one\ntwo\n",
        ),
        (&["-o", o, "echo", "three"][..], "three\n"),
    ] {
        let r = t.run("srun", args);
        assert!(r.status.success(), "{}", stderr(&r));
        assert_eq!(std::fs::read_to_string(&out).unwrap(), want);
    }
    // The same through srun's input variables.
    let r = t
        .cmd("srun")
        .args(["echo", "four"])
        .env("SRUN_OUTPUT", o)
        .env("SLURM_OPEN_MODE", "append")
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", stderr(&r));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "three\nfour\n");
    let r = t.run("srun", &["--open-mode=x", "true"]);
    assert!(
        stderr(&r).starts_with("srun: error: Invalid --open-mode argument: x. Ignored\n"),
        "{}",
        stderr(&r)
    );
    // USR1 58 s before a one-minute limit: within seconds of the start.
    let started = std::time::Instant::now();
    let r = t.run(
        "srun",
        &[
            "-t",
            "1",
            "--signal=USR1@58",
            "sh",
            "-c",
            "trap 'echo warned; exit 0' USR1; sleep 40 & wait",
        ],
    );
    assert_eq!(slurm_tests::stdout(&r), "warned\n", "{}", stderr(&r));
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    let r = t.run("srun", &["--signal=B:USR1@5", "true"]);
    assert!(!r.status.success());
}

/// `--mincpus`: a floor of CPUs on each of the job's nodes (sbatch, srun,
/// salloc); more than any node has is refused at submission.
#[test]
fn mincpus_gives_each_node_at_least_that_many_cpus() {
    use slurm_tests::{stderr, stdout, TestCluster};
    let t = TestCluster::start(2, |_| {});
    let id = t.sbatch(&["-n1", "--mincpus=3", "--wrap", "true"]);
    let j = t.wait_done(id, 30);
    assert_eq!(j.alloc.cpus, vec![3], "{:?}", j.alloc);
    let out = t.run("scontrol", &["show", "job", &id.to_string()]);
    assert!(stdout(&out).contains("MinCPUsNode=3 "), "{}", stdout(&out));
    let out = t.run(
        "srun",
        &["--mincpus", "2", "sh", "-c", "echo $SLURM_CPUS_ON_NODE"],
    );
    assert_eq!(stdout(&out).trim(), "2", "{}", stderr(&out));
    let out = t.run("sbatch", &["--mincpus=64", "--wrap", "true"]);
    assert!(
        stderr(&out).contains("Requested node configuration is not available"),
        "{}",
        stderr(&out)
    );
    let out = t.run("sbatch", &["--mincpus=x", "--wrap", "true"]);
    assert!(!out.status.success());
}

/// `--priority`: an operator's fixes the job's priority (TOP the highest
/// there is); a user's is ignored but 0, which holds the job (a user hold
/// its owner may release); bad values get Slurm's messages.
#[test]
fn priority_is_fixed_by_operators_and_zero_holds() {
    use slurm_proto::{JobReason, JobState};
    use slurm_tests::{stderr, stdout, TestCluster};
    let t = TestCluster::start(1, |_| {});
    let later = ["--begin=now+3600", "--wrap", "true"];
    let id = t.sbatch(&[&["--priority=4000000"][..], &later].concat());
    assert_eq!(t.job(id).unwrap().priority, 4_000_000);
    let top = t.sbatch(&[&["--priority=TOP"][..], &later].concat());
    assert_eq!(t.job(top).unwrap().priority, 4_294_967_293);
    // A user's value is ignored...
    let mine = t.sbatch_as_user(&[&["--priority=4000000"][..], &later].concat());
    let j = t.job(mine).unwrap();
    assert!(j.priority > 0 && j.priority != 4_000_000, "{}", j.priority);
    // ...but 0 holds the job; its owner releases it and it runs.
    let held = t.sbatch_as_user(&["--priority=0", "--wrap", "true"]);
    let j = t.job(held).unwrap();
    assert_eq!(
        (j.state, j.reason, j.priority),
        (JobState::Pending, JobReason::JobHeldUser, 0)
    );
    let out = t.run_as_user("scontrol", &["release", &held.to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(t.wait_done(held, 30).state, JobState::Completed);
    // srun's allocation too.
    let out = t.run(
        "srun",
        &[
            "--priority=77",
            "sh",
            "-c",
            "scontrol show job $SLURM_JOB_ID",
        ],
    );
    assert!(
        stdout(&out).contains(" Priority=77 "),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    for (bad, msg) in [
        ("-1", "Priority must be >= 0"),
        ("4294967294", "Priority must be < 4294967294"),
    ] {
        let out = t.run("sbatch", &["--priority", bad, "--wrap", "true"]);
        assert_eq!(stderr(&out), format!("sbatch: error: {msg}\n"));
    }
}

/// `--tmp`: only nodes with that much TmpDisk (sbatch, srun, salloc); a
/// size no node of the partition has is refused at submission; `scontrol
/// show job` says what was asked.
#[test]
fn tmp_asks_for_nodes_with_that_much_temporary_disk() {
    use slurm_tests::{stderr, stdout, TestCluster};
    let t = TestCluster::start(2, |s| s.node_tmp_disk = vec![100, 5000]);
    let id = t.sbatch(&["--tmp=1G", "--wrap", "true"]);
    let j = t.wait_done(id, 30);
    assert_eq!(j.alloc.nodes, vec!["n2"]);
    let out = t.run("scontrol", &["show", "job", &id.to_string()]);
    assert!(
        stdout(&out).contains("MinTmpDiskNode=1G"),
        "{}",
        stdout(&out)
    );
    let out = t.run("srun", &["--tmp", "2000", "printenv", "SLURMD_NODENAME"]);
    assert_eq!(stdout(&out), "n2\n", "{}", stderr(&out));
    let out = t.run(
        "salloc",
        &["--tmp=4000M", "sh", "-c", "echo $SLURM_JOB_NODELIST"],
    );
    assert_eq!(stdout(&out).trim(), "n2", "{}", stderr(&out));
    // No node has 10 GiB: refused, as a request no node can serve.
    let out = t.run("sbatch", &["--tmp=10G", "--wrap", "true"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("Requested node configuration is not available"),
        "{}",
        stderr(&out)
    );
    let out = t.run("sbatch", &["--tmp=lots", "--wrap", "true"]);
    assert_eq!(stderr(&out), "sbatch: error: Invalid --tmp specification\n");
}

/// salloc: a job cancelled under its command is said to be revoked; with
/// `-K` the command also gets SIGTERM (or the signal named), without it
/// runs on.
#[test]
fn salloc_kill_command_signals_the_command_when_revoked() {
    use slurm_proto::JobState;
    use slurm_tests::{stderr, stdout, TestCluster};
    use std::process::Stdio;
    let t = TestCluster::start(1, |_| {});
    for (k, script, want_out, want_code) in [
        (
            Some("-K"),
            "trap 'echo got TERM; exit 3' TERM; sleep 60 >/dev/null 2>&1 & wait",
            "got TERM\n",
            3,
        ),
        (
            Some("--kill-command=USR1"),
            "trap 'echo got USR1; exit 4' USR1; sleep 60 >/dev/null 2>&1 & wait",
            "got USR1\n",
            4,
        ),
        (None, "sleep 4; echo ran on", "ran on\n", 0),
    ] {
        let mut cmd = t.cmd("salloc");
        if let Some(k) = k {
            cmd.arg(k);
        }
        let child = cmd
            .args(["-J", "revoked", "sh", "-c", script])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let id = loop {
            let running = t
                .jobs()
                .into_iter()
                .find(|j| j.name == "revoked" && j.state == JobState::Running);
            if let Some(j) = running {
                break j.job_id;
            }
            assert!(std::time::Instant::now() < deadline, "never allocated");
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        assert!(t.run("scancel", &[&id.to_string()]).status.success());
        let out = child.wait_with_output().unwrap();
        assert_eq!(stdout(&out), want_out, "{k:?}: {}", stderr(&out));
        assert_eq!(
            out.status.code(),
            Some(want_code),
            "{k:?}: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains(&format!("salloc: Job allocation {id} has been revoked.")),
            "{}",
            stderr(&out)
        );
        t.wait_done(id, 30);
    }
}

/// `sbatch --export-file`: NUL-separated definitions reach the job, a
/// newline inside a value included.
#[test]
fn export_file_reaches_the_job() {
    use slurm_tests::TestCluster;
    let t = TestCluster::start(1, |_| {});
    let defs = t.work.join("env");
    std::fs::write(&defs, "FROM_FILE=two\nlines\0OTHER=1\0").unwrap();
    let out = t.work.join("job.out");
    let id = t.sbatch(&[
        "--export-file",
        defs.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--wrap",
        "printf '%s|%s' \"$FROM_FILE\" \"$OTHER\"",
    ]);
    t.wait_done(id, 30);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "two\nlines|1");
}

/// `-F/--nodefile`: sbatch, srun and salloc run on the nodes a hostfile
/// names (comments, commas and ranges as Slurm reads them); a file that
/// cannot be read, or holds no node, is refused before anything is asked.
#[test]
fn nodefile_names_the_nodes_to_run_on() {
    use slurm_tests::{stderr, stdout, TestCluster};
    let t = TestCluster::start(3, |_| {});
    let file = t.work.join("hosts");
    std::fs::write(&file, "# the nodes\nn3 # this one\nn[2-3]\n").unwrap();
    let f = file.to_str().unwrap();
    let id = t.sbatch(&["-F", f, "-N2", "--wrap", "true"]);
    let j = t.wait_done(id, 30);
    assert_eq!(j.alloc.nodes, vec!["n2", "n3"]);
    let out = t.run(
        "srun",
        &["--nodefile", f, "-N1", "printenv", "SLURMD_NODENAME"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        ["n2\n", "n3\n"].contains(&stdout(&out).as_str()),
        "{}",
        stdout(&out)
    );
    let out = t.run(
        "salloc",
        &["-F", f, "-N2", "sh", "-c", "echo $SLURM_JOB_NODELIST"],
    );
    assert_eq!(stdout(&out).trim(), "n[2-3]", "{}", stderr(&out));
    for bad in ["/nonexistent/hosts", "empty"] {
        let path = if bad == "empty" {
            let p = t.work.join("empty");
            std::fs::write(&p, "# nothing\n\n").unwrap();
            p.display().to_string()
        } else {
            bad.to_string()
        };
        let out = t.run("sbatch", &["-F", &path, "--wrap", "true"]);
        assert_eq!(out.status.code(), Some(255), "{bad}");
        assert_eq!(
            stderr(&out),
            "sbatch: error: Invalid --nodefile node file\n"
        );
        let out = t.run("srun", &["-F", &path, "true"]);
        assert!(!out.status.success());
        assert!(
            stderr(&out).contains("Invalid --nodefile node file"),
            "{}",
            stderr(&out)
        );
    }
}

/// `--mail-type`/`--mail-user`: the controller runs `MailProg -s SUBJECT
/// USER` for each event asked for, once; a recipient that would read as an
/// option of MailProg is refused.
#[test]
fn the_controller_mails_job_events_through_mailprog() {
    use slurm_tests::{stderr, TestCluster};
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("mail.log");
    let prog = dir.path().join("mailprog");
    std::fs::write(
        &prog,
        format!(
            "#!/bin/sh\nprintf '%s|%s|%s|%s|%s\\n' \"$1\" \"$2\" \"$3\" \"$SLURM_JOB_ID\" \"$SLURM_JOB_MAIL_TYPE\" >> {}\n",
            log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
    let t = TestCluster::start(1, |s| {
        s.extra_conf = format!("MailProg={}\nMailDomain=example.org\n", prog.display());
    });
    let id = t.sbatch(&[
        "--mail-type=BEGIN,END",
        "-J",
        "mailme",
        "-o",
        "/dev/null",
        "--wrap",
        "exit 2",
    ]);
    let quiet = t.sbatch(&["-o", "/dev/null", "--wrap", "true"]);
    let fail_only = t.sbatch(&[
        "--mail-type=FAIL",
        "--mail-user=ops@site.org",
        "-o",
        "/dev/null",
        "--wrap",
        "true",
    ]);
    for j in [id, quiet, fail_only] {
        t.wait_done(j, 20);
    }
    let want = [
        format!("-s|Slurm Job_id={id} Name=mailme Began, Queued time "),
        format!("-s|Slurm Job_id={id} Name=mailme Ended, Run time "),
    ];
    let deadline = Instant::now() + Duration::from_secs(15);
    let lines = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(String::from).collect();
        if lines.len() >= 2 || Instant::now() > deadline {
            break lines;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(lines.len(), 2, "{lines:?}");
    for (line, w) in lines.iter().zip(&want) {
        assert!(line.starts_with(w.as_str()), "{line} / {w}");
        assert!(
            line.ends_with(&format!(
                "|root@example.org|{id}|{}",
                if w.contains("Began") {
                    "Began"
                } else {
                    "Ended"
                }
            )),
            "{line}"
        );
    }
    assert!(lines[1].contains(", FAILED, ExitCode 2|"), "{}", lines[1]);
    // Nothing more comes (once each; none for the others).
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 2);

    // Misuse: a recipient MailProg would read as an option, or a second
    // address; an unknown event. Refused, nothing submitted.
    for bad in [
        &["--mail-user=-fattacker", "--mail-type=END"][..],
        &["--mail-user=a b", "--mail-type=END"][..],
        &["--mail-type=END,EVERYTHING"][..],
    ] {
        let out = t
            .cmd("sbatch")
            .args(bad)
            .args(["--wrap", "true"])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{bad:?}");
        assert!(stderr(&out).contains("invalid"), "{}", stderr(&out));
    }
    // The controller checks too (a client that sends it unchecked).
    let mut desc = slurm_proto::JobDesc {
        script: "#!/bin/sh\ntrue\n".into(),
        mail_type: Some("END".into()),
        mail_user: Some("-oevil".into()),
        work_dir: "/tmp".into(),
        ..Default::default()
    };
    desc.environment.push("PATH=/bin".into());
    match t.c.call(slurm_proto::RequestBody::SubmitBatchJob(desc)) {
        Ok(slurm_proto::Response::Error(e)) => {
            assert_eq!(e.error, slurm_proto::SlurmError::InvalidRequest);
            assert!(e.detail.unwrap_or_default().contains("mail-user"));
        }
        other => panic!("accepted: {other:?}"),
    }
}

/// `--signal`: the job gets the signal its time before the limit, once:
/// with `B:` the batch shell, else its steps (the shell is left alone).
#[test]
fn sbatch_signal_warns_the_job_before_its_time_limit() {
    use slurm_tests::{stderr, TestCluster};
    let t = TestCluster::start(1, |_| {});
    let shell = t.work.join("shell.txt");
    let step = t.work.join("step.txt");
    // A one-minute limit and a warning 55 s before it: about 5 s in.
    let batch = t.sbatch(&[
        "-t",
        "1",
        "--signal=B:USR1@55",
        "-o",
        "/dev/null",
        "--wrap",
        &format!(
            "trap 'echo shell got USR1 >> {}; exit 0' USR1; sleep 50 & wait",
            shell.display()
        ),
    ]);
    let steps = t.sbatch(&[
        "-t",
        "1",
        "--signal=USR1@55",
        "-o",
        "/dev/null",
        "--wrap",
        &format!(
            "srun sh -c \"trap 'echo step got USR1 >> {}; exit 0' USR1; sleep 50 & wait\"",
            step.display()
        ),
    ]);
    let a = t.wait_done(batch, 30);
    let b = t.wait_done(steps, 30);
    assert_eq!(a.state, slurm_proto::JobState::Completed);
    assert_eq!(b.state, slurm_proto::JobState::Completed, "{b:?}");
    let took = a.end_time.unwrap() - a.start_time.unwrap();
    assert!((3..=15).contains(&took), "signalled after {took}s");
    assert_eq!(std::fs::read_to_string(&shell).unwrap(), "shell got USR1\n");
    assert_eq!(std::fs::read_to_string(&step).unwrap(), "step got USR1\n");
    // A bad specification is refused at submission.
    let out = t.run("sbatch", &["--signal=B:USR1@later", "--wrap", "true"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("Invalid --signal specification"),
        "{}",
        stderr(&out)
    );
    // The controller checks too: an ordinary user's client sending it
    // unchecked is refused.
    let desc = slurm_proto::JobDesc {
        script: "#!/bin/sh\ntrue\n".into(),
        signal: Some("B:KILLALL@5".into()),
        work_dir: "/tmp".into(),
        environment: vec!["PATH=/bin".into()],
        ..Default::default()
    };
    let key = slurm_common::auth::Key::load(&t.c.spec.dir.join("slurm.key")).unwrap();
    let now = slurm_common::auth::now();
    let r = slurm_tests::grpc_call(&t, slurm_proto::RequestBody::SubmitBatchJob(desc), |b| {
        key.sign(slurm_tests::TEST_UID, slurm_tests::TEST_GID, "x", now, b)
    });
    match r {
        slurm_proto::Response::Error(e) => {
            assert_eq!(e.error, slurm_proto::SlurmError::InvalidRequest);
            assert!(e.detail.unwrap_or_default().contains("--signal"));
        }
        other => panic!("accepted: {other:?}"),
    }
}

/// `srun --pty`: task 0 runs on a terminal of the node, sized as srun's;
/// srun's own terminal is raw while it runs, so what is typed (Ctrl-C
/// included) reaches the remote terminal, and is back as it was after.
#[test]
fn srun_pty_gives_task_zero_a_terminal() {
    use slurm_tests::{stdout, TestCluster};
    use std::io::{Read, Write};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::time::{Duration, Instant};
    let t = TestCluster::start(1, |_| {});
    // Without a terminal of its own: task 0 still gets one, 24x80.
    let out = t.run(
        "srun",
        &[
            "-n2",
            "--pty",
            "sh",
            "-c",
            "test -t 0 && echo $SLURM_PROCID tty $(stty size) || echo $SLURM_PROCID none",
        ],
    );
    let text = stdout(&out).replace('\r', "");
    assert!(text.contains("0 tty 24 80\n"), "{text}");
    assert!(text.contains("1 none\n"), "{text}");

    // With one: a 30x100 terminal driven as a user would.
    let ws = libc::winsize {
        ws_row: 30,
        ws_col: 100,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let (mut m, mut s) = (-1, -1);
    assert_eq!(
        unsafe { libc::openpty(&mut m, &mut s, std::ptr::null_mut(), std::ptr::null(), &ws) },
        0
    );
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(m), OwnedFd::from_raw_fd(s)) };
    let before = unsafe {
        let mut tio: libc::termios = std::mem::zeroed();
        libc::tcgetattr(slave.as_raw_fd(), &mut tio);
        tio.c_lflag
    };
    let mut child = t
        .cmd("srun")
        .args(["--pty", "sh"])
        .stdin(std::process::Stdio::from(slave.try_clone().unwrap()))
        .stdout(std::process::Stdio::from(slave.try_clone().unwrap()))
        .stderr(std::process::Stdio::from(slave.try_clone().unwrap()))
        .spawn()
        .unwrap();
    let mut w = std::fs::File::from(master.try_clone().unwrap());
    let mut r = std::fs::File::from(master);
    unsafe {
        let fl = libc::fcntl(r.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(r.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
    }
    let mut seen = String::new();
    let mut wait_for = |what: &str, seen: &mut String| {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut buf = [0u8; 4096];
        while !seen.contains(what) {
            assert!(Instant::now() < deadline, "no {what:?} in {seen:?}");
            match r.read(&mut buf) {
                Ok(n) if n > 0 => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    };
    w.write_all(b"stty size; echo sum=$((6*7))\r").unwrap();
    wait_for("sum=42", &mut seen);
    assert!(seen.contains("30 100"), "{seen:?}");
    // srun's terminal is raw meanwhile (no echo, no signals of its own).
    let during = unsafe {
        let mut tio: libc::termios = std::mem::zeroed();
        libc::tcgetattr(slave.as_raw_fd(), &mut tio);
        tio.c_lflag
    };
    assert_eq!(during & (libc::ICANON | libc::ECHO | libc::ISIG), 0);
    // Ctrl-C interrupts the remote command, not srun.
    w.write_all(b"sleep 30\r").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    w.write_all(b"\x03").unwrap();
    wait_for("^C", &mut seen);
    w.write_all(b"echo after=$?\r").unwrap();
    wait_for("after=130", &mut seen);
    assert!(child.try_wait().unwrap().is_none(), "srun ended at Ctrl-C");
    w.write_all(b"exit 3\r").unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "srun --pty did not end");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(3));
    let after = unsafe {
        let mut tio: libc::termios = std::mem::zeroed();
        libc::tcgetattr(slave.as_raw_fd(), &mut tio);
        tio.c_lflag
    };
    assert_eq!(after, before, "the terminal is put back");
}

/// `srun --multi-prog`: each task runs the program its line names, `%t`
/// and `%o` filled in; a task without a line is an error before anything
/// runs.
#[test]
fn srun_multi_prog_runs_each_tasks_own_program() {
    use slurm_tests::{stderr, stdout, TestCluster};
    let t = TestCluster::start(1, |_| {});
    let conf = t.work.join("mp.conf");
    std::fs::write(
        &conf,
        "# rank program args\n0 echo first %t\n1-2 sh -c 'echo quoted' %o\n* echo rest %t:%o\n",
    )
    .unwrap();
    let out = t.run(
        "srun",
        &["-n4", "-l", "--multi-prog", conf.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let mut lines: Vec<String> = stdout(&out).lines().map(String::from).collect();
    lines.sort();
    assert_eq!(
        lines,
        ["0: first 0", "1: quoted", "2: quoted", "3: rest 3:0"],
        "{}",
        stderr(&out)
    );
    std::fs::write(&conf, "0-1 true\n").unwrap();
    let out = t.run("srun", &["-n3", "--multi-prog", conf.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("No executable program specified for task 2"),
        "{}",
        stderr(&out)
    );
}

/// `--open-mode=append` keeps what the output file held; `truncate` (the
/// default) starts it afresh; anything else is refused.
#[test]
fn sbatch_open_mode_appends_or_truncates() {
    use slurm_tests::{stderr, TestCluster};
    let t = TestCluster::start(1, |_| {});
    let out = t.work.join("shared.out");
    let path = out.to_str().unwrap();
    std::fs::write(&out, "before\n").unwrap();
    std::os::unix::fs::chown(
        &out,
        Some(slurm_tests::TEST_UID),
        Some(slurm_tests::TEST_GID),
    )
    .unwrap();
    let a = t.sbatch_as_user(&["--open-mode=append", "-o", path, "--wrap", "echo appended"]);
    t.wait_done(a, 20);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "before\nappended\n");
    let b = t.sbatch_as_user(&["--open-mode=t", "-o", path, "--wrap", "echo fresh"]);
    t.wait_done(b, 20);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "fresh\n");
    let c = t.sbatch_as_user(&["-o", path, "--wrap", "echo default"]);
    t.wait_done(c, 20);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "default\n");
    // Misuse: appending to a file of root's. The file is opened as the
    // job's user, so it is refused and left as it was.
    let roots = t.work.join("roots.log");
    std::fs::write(&roots, "root's\n").unwrap();
    let d = t.sbatch_as_user(&[
        "--open-mode=append",
        "-o",
        roots.to_str().unwrap(),
        "--wrap",
        "echo injected",
    ]);
    // The node refuses the launch; the job is held (as Slurm's "launch
    // failed requeued held"), not started and refused again for ever.
    let j = t.wait_job(d, 20, "held after a refused launch", |j| {
        j.state == slurm_proto::JobState::Pending && j.held.is_some()
    });
    assert_eq!(j.restarts, 1, "{j:?}");
    assert_eq!(std::fs::read_to_string(&roots).unwrap(), "root's\n");
    t.wait_passes(2);
    assert_eq!(t.job(d).unwrap().restarts, 1, "started again");
    assert!(t.run("scancel", &[&d.to_string()]).status.success());
    let bad = t.run("sbatch", &["--open-mode=sideways", "--wrap", "true"]);
    assert!(!bad.status.success());
    assert!(
        stderr(&bad).contains("Invalid --open-mode argument"),
        "{}",
        stderr(&bad)
    );
}

/// `srun -W`: once the first task has ended the others have that long,
/// then the step is ended, as Slurm's srun says.
#[test]
fn srun_wait_ends_the_step_after_the_first_task() {
    use slurm_tests::{stderr, TestCluster};
    use std::time::{Duration, Instant};
    let t = TestCluster::start(1, |_| {});
    let started = Instant::now();
    let out = t.run(
        "srun",
        &[
            "-n3",
            "-W",
            "2",
            "sh",
            "-c",
            "[ $SLURM_PROCID = 0 ] && exit 0; sleep 60",
        ],
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{}",
        stderr(&out)
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("srun: First task exited 2s ago\n"), "{err}");
    assert!(err.contains(" tasks 1-2: running\n"), "{err}");
    assert!(err.contains(" task 0: exited\n"), "{err}");
    assert!(err.contains("srun: Terminating StepId="), "{err}");
    // Without -W (and no WaitTime) every task runs to its end.
    let out = t.run(
        "srun",
        &["-n2", "sh", "-c", "[ $SLURM_PROCID = 0 ] || sleep 3"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

/// srun and Ctrl-C, as Slurm's: a first SIGINT shows the tasks' states and
/// the step goes on; a second within a second sends it on and ends the
/// step; `-X` sends the first on at once; `--quit-on-interrupt` ends the
/// step at the first; SIGTERM ends the step.
#[test]
fn srun_answers_ctrl_c_as_slurms() {
    use slurm_proto::JobState;
    use slurm_tests::TestCluster;
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let t = TestCluster::start(1, |_| {});
    let start = |args: &[&str]| {
        let mut c = t
            .cmd("srun")
            .args(args)
            .args(["sh", "-c", "echo started; exec sleep 60"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(c.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "started\n");
        c
    };
    let kill = |c: &std::process::Child, sig: i32| {
        // SAFETY: signalling the child we started.
        unsafe {
            libc::kill(c.id() as i32, sig);
        }
    };
    let finish = |c: std::process::Child| {
        let started = Instant::now();
        let out = c.wait_with_output().unwrap();
        assert!(started.elapsed() < Duration::from_secs(20));
        (
            out.status,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };

    // One Ctrl-C: the states, and the step goes on; two: it ends.
    let c = start(&[]);
    kill(&c, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(t.jobs().iter().any(|j| j.state == JobState::Running));
    kill(&c, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(200));
    kill(&c, libc::SIGINT);
    let (status, err) = finish(c);
    assert!(!status.success());
    assert!(
        err.contains("srun: interrupt (one more within 1 sec to abort)\nsrun: StepId="),
        "{err}"
    );
    assert!(err.contains(".0 task 0: running\n"), "{err}");
    assert!(err.contains("srun: sending Ctrl-C to StepId="), "{err}");
    assert!(err.contains("srun: forcing job termination\n"), "{err}");

    // -X: the first Ctrl-C reaches the task, which ends of it.
    let c = start(&["-X"]);
    kill(&c, libc::SIGINT);
    let (status, err) = finish(c);
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("srun: sending Ctrl-C to StepId="), "{err}");
    assert!(!err.contains("interrupt (one more"), "{err}");

    // --quit-on-interrupt: the first ends the step.
    let c = start(&["--quit-on-interrupt"]);
    kill(&c, libc::SIGINT);
    let (status, err) = finish(c);
    assert!(!status.success());
    assert!(err.contains("srun: forcing job termination\n"), "{err}");

    // SIGTERM ends the step.
    let c = start(&[]);
    kill(&c, libc::SIGTERM);
    let (status, err) = finish(c);
    assert!(!status.success());
    assert!(err.contains("srun: forcing job termination\n"), "{err}");
    let deadline = Instant::now() + Duration::from_secs(20);
    while t.jobs().iter().any(|j| j.state.is_active()) {
        assert!(Instant::now() < deadline, "a job was left running");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `scontrol write batch_script`: the owner and root read a job's script;
/// another user may not.
#[test]
fn scontrol_writes_a_jobs_batch_script_for_its_owner_only() {
    use slurm_tests::{stderr, stdout, TestCluster};
    let t = TestCluster::start(1, |_| {});
    let script = "#!/bin/sh\n#SBATCH -J secret\necho the recipe\n";
    let path = t.work.join("job.sh");
    std::fs::write(&path, script).unwrap();
    let id = t.sbatch_as_user(&["-H", "-o", "/dev/null", path.to_str().unwrap()]);
    let ids = id.to_string();
    // The owner, to stdout.
    let out = t.run_as_user("scontrol", &["write", "batch_script", &ids, "-"]);
    assert_eq!(stdout(&out), script, "{}", stderr(&out));
    // Root, to the default file in the working directory.
    let out = t.run("scontrol", &["write", "batch_script", &ids]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!("batch script for job {id} written to slurm-{id}.sh\n")
    );
    assert_eq!(
        std::fs::read_to_string(t.work.join(format!("slurm-{id}.sh"))).unwrap(),
        script
    );
    // Misuse: another ordinary user.
    let out = t
        .cmd_as(1, 1, "scontrol")
        .args(["write", "batch_script", &ids, "-"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), "");
    assert_eq!(
        stderr(&out),
        "slurm_job_batch_script error: Access/permission denied\n"
    );
    let out = t.run("scontrol", &["write", "batch_script", "999999", "-"]);
    assert_eq!(
        stderr(&out),
        "slurm_job_batch_script error: Invalid job id specified\n"
    );
    assert!(t.run("scancel", &[&ids]).status.success());
}

/// `SLURM_TIME_FORMAT`: the commands print times as it says (`%s`: Unix
/// seconds, as scripts ask to parse them); JSON keeps its numbers.
#[test]
fn slurm_time_format_sets_how_commands_print_times() {
    use slurm_tests::{stderr, stdout, TestCluster};
    let t = TestCluster::start(1, |_| {});
    let id = t.sbatch(&["-H", "--wrap", "true"]);
    let submit = t.job(id).unwrap().submit_time;
    let out = t
        .cmd("squeue")
        .env("SLURM_TIME_FORMAT", "%s")
        .args(["-h", "-o", "%V"])
        .output()
        .unwrap();
    assert_eq!(stdout(&out), format!("{submit}\n"), "{}", stderr(&out));
    let out = t
        .cmd("scontrol")
        .env("SLURM_TIME_FORMAT", "%s")
        .args(["show", "job", &id.to_string()])
        .output()
        .unwrap();
    assert!(
        stdout(&out).contains(&format!("SubmitTime={submit} ")),
        "{}",
        stdout(&out)
    );
    // relative: today's times as hour:minute:second.
    let out = t
        .cmd("squeue")
        .env("SLURM_TIME_FORMAT", "relative")
        .args(["-h", "-o", "%V"])
        .output()
        .unwrap();
    let v = stdout(&out);
    assert!(
        v.trim().len() == 8 && v.trim().chars().filter(|c| *c == ':').count() == 2,
        "{v}"
    );
    assert!(t.run("scancel", &[&id.to_string()]).status.success());
}

/// `salloc --no-shell`: the allocation is made and kept; steps reach it
/// with `srun --jobid`; srun itself does not know the option.
#[test]
fn salloc_no_shell_leaves_the_allocation_for_steps() {
    use slurm_tests::{stderr, stdout, TestCluster};
    let t = TestCluster::start(1, |_| {});
    let out = t.run("salloc", &["--no-shell", "-N1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let id: u32 = stderr(&out)
        .lines()
        .find_map(|l| l.strip_prefix("salloc: Granted job allocation "))
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("{}", stderr(&out)));
    let j = t.job(id).unwrap();
    assert_eq!(j.state, slurm_proto::JobState::Running);
    let out = t.run("srun", &["--jobid", &id.to_string(), "echo", "in it"]);
    assert_eq!(stdout(&out), "in it\n", "{}", stderr(&out));
    assert_eq!(t.job(id).unwrap().state, slurm_proto::JobState::Running);
    assert!(t.run("scancel", &[&id.to_string()]).status.success());
    let out = t.run("srun", &["--no-shell", "true"]);
    assert!(
        stderr(&out).contains("unrecognized option '--no-shell'"),
        "{}",
        stderr(&out)
    );
}

/// `srun --test-only`: when and where the job would start, nothing run.
#[test]
fn srun_test_only_estimates_and_runs_nothing() {
    use slurm_tests::{stderr, stdout, TestCluster};
    let t = TestCluster::start(1, |_| {});
    let marker = t.work.join("ran");
    let out = t.run("srun", &["--test-only", "touch", marker.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out).contains(" to start at ") && stderr(&out).contains(" in partition "),
        "{}",
        stderr(&out)
    );
    assert!(!marker.exists());
    assert!(t.jobs().is_empty(), "nothing submitted");
    let out = t.run("srun", &["--test-only", "-N", "99", "true"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("srun: error: Job allocation failure:"),
        "{}",
        stderr(&out)
    );
}

/// `--deadline`, `--time-min`, `--extra`, `--wckey` and
/// `--kill-on-invalid-dep` through sbatch and srun: kept with the job and
/// shown as Slurm shows them; a job that cannot end by its deadline ends
/// DEADLINE without running; a dependency that can never be met cancels
/// the job that asked; bad values get Slurm's messages and change nothing.
#[test]
fn deadline_time_min_and_invalid_dependencies() {
    use slurm_proto::{JobReason, JobState};
    use slurm_tests::{stderr, stdout, TestCluster};
    let t = TestCluster::start(1, |s| s.extra_conf.push_str("TrackWCKey=yes\n"));
    let id = t.sbatch(&[
        "--time=5",
        "--time-min=1",
        "--deadline=now+3600",
        "--extra=rack=a",
        "--wckey=proj1",
        "--wrap",
        "true",
    ]);
    let j = t.wait_done(id, 30);
    assert_eq!(j.state, JobState::Completed);
    let out = stdout(&t.run("scontrol", &["show", "job", &id.to_string()]));
    for want in [" TimeMin=00:01:00", "Extra=rack=a", "WCKey=proj1"] {
        assert!(out.contains(want), "{want}: {out}");
    }
    assert!(!out.contains("Deadline=N/A"), "{out}");
    let deadline = j.desc.deadline.expect("deadline kept");
    assert!((j.submit_time + 3590..=j.submit_time + 3610).contains(&deadline));
    // Two minutes of work by a deadline 90 seconds away: never runs.
    let late = t.sbatch(&["--time=2", "--deadline=now+90", "--wrap", "true"]);
    let j = t.wait_done(late, 30);
    assert_eq!(
        (j.state, j.reason.clone()),
        (JobState::Deadline, JobReason::Other("DeadLine".into()))
    );
    let out = stdout(&t.run("scontrol", &["show", "job", &late.to_string()]));
    assert!(out.contains("JobState=DEADLINE Reason=DeadLine"), "{out}");
    // An afternotok of a job that succeeded can never be met.
    let a = t.sbatch(&["--wrap", "true"]);
    t.wait_done(a, 30);
    let dep = format!("--dependency=afternotok:{a}");
    let killed = t.sbatch(&["--kill-on-invalid-dep=yes", &dep, "--wrap", "true"]);
    let kept = t.sbatch(&["--kill-on-invalid-dep=no", &dep, "--wrap", "true"]);
    assert_eq!(t.wait_done(killed, 30).state, JobState::Cancelled);
    t.wait_job(kept, 10, "left pending", |j| {
        j.reason == JobReason::DependencyNeverSatisfied
    });
    // srun's allocation takes them too.
    let out = t.run(
        "srun",
        &[
            "--time=10",
            "--time-min=2",
            "--extra=x",
            "sh",
            "-c",
            "scontrol show job $SLURM_JOB_ID",
        ],
    );
    assert!(
        stdout(&out).contains(" TimeMin=00:02:00") && stdout(&out).contains("Extra=x"),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    // Options without effect yet: a warning each, and the job runs.
    let out = t.run(
        "srun",
        &["--hint=nomultithread", "--mem-bind=local", "true"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("srun: warning: --hint is not supported yet and was ignored")
            && stderr(&out).contains("srun: warning: --mem-bind is not supported yet"),
        "{}",
        stderr(&out)
    );
    // Bad values: Slurm's messages; nothing submitted.
    let before = t.jobs().len();
    for (args, msg) in [
        (
            &["--deadline=tomorrowish"][..],
            "sbatch: error: Invalid --deadline specification\n",
        ),
        (
            &["--time-min=x"][..],
            "sbatch: error: Invalid --time-min specification\n",
        ),
        (
            &["--kill-on-invalid-dep=maybe"][..],
            "sbatch: error: Invalid --kill-on-invalid-dep specification\n",
        ),
    ] {
        let out = t.run("sbatch", &[args, &["--wrap", "true"]].concat());
        assert_eq!(stderr(&out), msg);
        assert!(!out.status.success());
    }
    let out = t.run("sbatch", &["--time=2", "--time-min=5", "--wrap", "true"]);
    assert!(
        stderr(&out).contains("Requested time limit is invalid"),
        "{}",
        stderr(&out)
    );
    let out = t.run("srun", &["--deadline=x", "true"]);
    assert!(
        stderr(&out).contains("srun: error: Invalid --deadline specification"),
        "{}",
        stderr(&out)
    );
    assert_eq!(t.jobs().len(), before);
}

/// The submitting shell's resource limits reach the job's processes
/// (slurm.conf's `PropagateResourceLimits`, default ALL; `--propagate`):
/// a batch script and srun's tasks see the soft limit their command had;
/// `--propagate=NONE` or a list without it leaves the node's; the carrying
/// variables are not left in the job's environment.
#[test]
fn resource_limits_follow_the_job_from_the_submitting_shell() {
    use slurm_tests::{stderr, stdout, TestCluster};
    use std::os::unix::process::CommandExt;
    let t = TestCluster::start(1, |_| {});
    // The command runs with a soft limit of 300 open files.
    let limited = |prog: &str, args: &[&str]| {
        let mut c = t.cmd(prog);
        c.args(args);
        // SAFETY: only system calls between fork and exec.
        unsafe {
            c.pre_exec(|| {
                let mut l = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                libc::getrlimit(libc::RLIMIT_NOFILE, &mut l);
                l.rlim_cur = 300.min(l.rlim_max);
                libc::setrlimit(libc::RLIMIT_NOFILE, &l);
                Ok(())
            });
        }
        c.output().expect("run")
    };
    let job_output = |args: &[&str]| {
        let out = limited(
            "sbatch",
            &[&["--parsable", "-o", "lim-%j.out"][..], args].concat(),
        );
        assert!(out.status.success(), "{}", stderr(&out));
        let id: u32 = stdout(&out).trim().parse().expect("job id");
        t.wait_done(id, 30);
        std::fs::read_to_string(t.work.join(format!("lim-{id}.out"))).unwrap()
    };
    let script = "ulimit -Sn; env | grep -c SLURM_RLIMIT_ || true";
    assert_eq!(job_output(&["--wrap", script]), "300\n0\n");
    let node_default = job_output(&["--propagate=NONE", "--wrap", script]);
    assert_ne!(node_default.lines().next(), Some("300"), "{node_default}");
    let other = job_output(&["--propagate=STACK,CORE", "--wrap", script]);
    assert_eq!(other, node_default);
    assert_eq!(
        job_output(&["--propagate=nofile", "--wrap", script]),
        "300\n0\n"
    );
    // srun's tasks.
    let out = limited("srun", &["sh", "-c", "ulimit -Sn"]);
    assert_eq!(stdout(&out), "300\n", "{}", stderr(&out));
    let out = limited("srun", &["--propagate=NONE", "sh", "-c", "ulimit -Sn"]);
    assert_ne!(stdout(&out), "300\n", "{}", stderr(&out));
    // A bad name: Slurm's error, nothing submitted.
    let before = t.jobs().len();
    let out = t.run("sbatch", &["--propagate=STACK,FOO", "--wrap", "true"]);
    assert_eq!(
        stderr(&out),
        "sbatch: error: Invalid --propagate specification: Bad rlimit name: FOO\n"
    );
    let out = t.run("srun", &["--propagate=BAR", "true"]);
    assert!(
        stderr(&out).contains("Invalid --propagate specification: Bad rlimit name: BAR"),
        "{}",
        stderr(&out)
    );
    assert_eq!(t.jobs().len(), before);
}

/// salloc's command is told of its job as a batch script is (account,
/// QOS, times, memory, licenses, ...), and sbatch's `-m` and `--export`
/// reach the script as `SLURM_DISTRIBUTION` and `SLURM_EXPORT_ENV` (which
/// the job's `srun`s then follow, as Slurm's).
#[test]
fn salloc_and_sbatch_tell_the_job_what_it_asked_for() {
    use slurm_tests::{stderr, stdout, TestCluster};
    let t = TestCluster::start(1, |_| {});
    let out = t.run(
        "salloc",
        &[
            "--mem=100",
            "-t",
            "5",
            "-m",
            "cyclic",
            "sh",
            "-c",
            "echo acct=$SLURM_JOB_ACCOUNT qos=$SLURM_JOB_QOS mem=$SLURM_MEM_PER_NODE \
             dist=$SLURM_DISTRIBUTION; echo $(( SLURM_JOB_END_TIME - SLURM_JOB_START_TIME ))",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains(" qos=normal mem=100 dist=cyclic\n300\n"),
        "{text}{}",
        stderr(&out)
    );
    let id = t.sbatch(&[
        "-m",
        "block:cyclic",
        "--export=ALL,MARK=1",
        "-o",
        "told.out",
        "--wrap",
        "echo $SLURM_DISTRIBUTION $SLURM_EXPORT_ENV $MARK",
    ]);
    t.wait_done(id, 30);
    assert_eq!(
        std::fs::read_to_string(t.work.join("told.out")).unwrap(),
        "block:cyclic ALL,MARK=1 1\n"
    );
    let out = t.run("sbatch", &["-m", "diagonal", "--wrap", "true"]);
    assert!(
        stderr(&out).contains("Invalid --distribution specification"),
        "{}",
        stderr(&out)
    );
}

/// CPUs per task asked of a batch job (`-c`, or `--tres-per-task=cpu=N`)
/// are its steps' too, as in Slurm since 23.11: the job is told
/// `SLURM_TRES_PER_TASK`, srun inside reads it (and
/// `SLURM_CPUS_PER_TASK`) unless its own command line says otherwise, and
/// tells each step what it asked; the two variables disagreeing, or
/// `--tres-per-task` beside `-c` on srun's command line, are Slurm's fatal
/// errors and start no step. `scontrol show job` shows `TresPerTask=`.
#[test]
fn a_jobs_cpus_per_task_reach_its_steps_through_tres_per_task() {
    use slurm_tests::{stderr, stdout, TestCluster};
    let t = TestCluster::start(1, |s| s.cpus = 4);
    let script = "echo job $SLURM_TRES_PER_TASK\n\
                  srun -n1 sh -c 'echo step $SLURM_CPUS_PER_TASK $SLURM_TRES_PER_TASK'\n\
                  srun -n1 -c1 sh -c 'echo one $SLURM_TRES_PER_TASK'\n\
                  SLURM_CPUS_PER_TASK=3 srun -n1 true; echo disagree=$?\n\
                  srun -n1 -c1 --tres-per-task=cpu=1 true; echo twice=$?\n";
    let id = t.sbatch(&[
        "--tres-per-task=cpu=2",
        "-n1",
        "-o",
        "tres.out",
        "-e",
        "tres.err",
        "--wrap",
        script,
    ]);
    t.wait_done(id, 60);
    let out = std::fs::read_to_string(t.work.join("tres.out")).unwrap();
    let err = std::fs::read_to_string(t.work.join("tres.err")).unwrap();
    assert_eq!(
        out, "job cpu=2\nstep 2 cpu=2\none cpu=1\ndisagree=1\ntwice=1\n",
        "{err}"
    );
    assert!(
        err.contains(
            "srun: fatal: cpus-per-task set by two different environment variables SLURM_CPUS_PER_TASK=3 != SLURM_TRES_PER_TASK=cpu=2"
        ),
        "{err}"
    );
    assert!(
        err.contains(
            "srun: fatal: You can not have --tres-per-task=cpu= and --cpus-per-task please use one or the other"
        ),
        "{err}"
    );
    let show = t.run("scontrol", &["show", "job", &id.to_string()]);
    assert!(show.status.success(), "{}", stderr(&show));
    assert!(
        stdout(&show).contains("\n   TresPerTask=cpu=2\n"),
        "{}",
        stdout(&show)
    );
    // Submitted from inside a job of 4 CPUs per task, a job that asks for
    // none is told its own (1, as Slurm's), and so are its steps; the
    // outer job's TRES string is not passed on (Slurm's is, and its plain
    // srun then dies on the two disagreeing).
    let out = t
        .cmd("sbatch")
        .args([
            "--parsable",
            "-o",
            "inner.out",
            "--wrap",
            "echo job=$SLURM_CPUS_PER_TASK; srun -n1 sh -c 'echo step=$SLURM_CPUS_PER_TASK'",
        ])
        .env("SLURM_CPUS_PER_TASK", "4")
        .env("SLURM_TRES_PER_TASK", "cpu=4")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let inner: u32 = stdout(&out).trim().parse().unwrap();
    t.wait_done(inner, 60);
    assert_eq!(
        std::fs::read_to_string(t.work.join("inner.out")).unwrap(),
        "job=1\nstep=1\n"
    );
}

/// `squeue --running-over/--running-under`: running jobs by how long they
/// have run; pending jobs never; a bad time is Slurm's fatal error.
#[test]
fn squeue_running_over_and_under_select_running_jobs_by_time() {
    use slurm_tests::{stderr, stdout, TestCluster};
    let t = TestCluster::start(1, |_| {});
    let run = t.sbatch(&["--wrap", "sleep 60"]);
    t.wait_job(run, 20, "running", |j| {
        j.state == slurm_proto::JobState::Running
    });
    let held = t.sbatch(&["-H", "--wrap", "true"]);
    let ids = |args: &[&str]| {
        let o = t
            .cmd("squeue")
            .args(["-h", "-o", "%i"])
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    // Let it run past two seconds.
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(ids(&["--running-over=0:02"]), format!("{run}\n"));
    assert_eq!(ids(&["--running-under=1:00:00"]), format!("{run}\n"));
    assert_eq!(ids(&["--running-over=10"]), "");
    assert_eq!(ids(&[]).lines().count(), 2, "{held} listed without them");
    let o = t.run("squeue", &["--running-over=soon"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o).trim(),
        "squeue: fatal: Invalid time limit specification"
    );
    assert!(t
        .run("scancel", &[&run.to_string(), &held.to_string()])
        .status
        .success());
}

/// `scontrol top`: pending jobs move first among their owner's (squeue's
/// priority order shows it); an ordinary user is refused unless
/// SchedulerParameters=enable_user_top.
#[test]
fn scontrol_top_moves_jobs_first_among_their_owners() {
    use slurm_tests::{stderr, stdout, TestCluster, TEST_GID, TEST_UID};
    let t = TestCluster::start(1, |_| {});
    let busy = t.sbatch(&["--exclusive", "--wrap", "sleep 60"]);
    t.wait_job(busy, 20, "running", |j| {
        j.state == slurm_proto::JobState::Running
    });
    let ids: Vec<String> = (0..3)
        .map(|_| t.sbatch_as_user(&["--wrap", "true"]).to_string())
        .collect();
    let order = || {
        let o = t.run("squeue", &["-h", "-t", "PD", "-S", "-p", "-o", "%i"]);
        stdout(&o).lines().map(str::to_string).collect::<Vec<_>>()
    };
    assert_eq!(order(), ids);
    let o = t
        .cmd_as(TEST_UID, TEST_GID, "scontrol")
        .args(["top", &ids[2]])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o).trim(),
        "slurm_top_job error: Access/permission denied"
    );
    assert_eq!(order(), ids);
    let o = t.run("scontrol", &["top", &format!("{},{}", ids[2], ids[1])]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        order(),
        vec![ids[2].clone(), ids[1].clone(), ids[0].clone()]
    );
    let o = t.run("scontrol", &["top", &busy.to_string()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("Job is no longer pending execution"),
        "{}",
        stderr(&o)
    );
    let mut all = ids.clone();
    all.push(busy.to_string());
    assert!(t
        .run(
            "scancel",
            &all.iter().map(String::as_str).collect::<Vec<_>>()
        )
        .status
        .success());
}

/// `scontrol show node|partition` leave out hidden partitions, nodes only
/// in them, and FUTURE nodes, unless `-a`/`all`/`SCONTROL_ALL` or
/// `-F`/`SCONTROL_FUTURE` (as Slurm's); `--hide` and `hide` undo `-a`.
#[test]
fn scontrol_shows_hidden_partitions_and_future_nodes_only_when_asked() {
    use slurm_tests::{stdout, TestCluster, TEST_GID, TEST_UID};
    let t = TestCluster::start(1, |s| {
        s.extra_conf = "NodeName=f1 CPUs=1 State=FUTURE\n\
                        PartitionName=secret Nodes=f1 Hidden=YES\n"
            .into()
    });
    let names = |args: &[&str], env: Option<(&str, &str)>| {
        // An ordinary user: root and SlurmUser see hidden partitions.
        let mut c = t.cmd_as(TEST_UID, TEST_GID, "scontrol");
        c.args(args);
        if let Some((k, v)) = env {
            c.env(k, v);
        }
        let o = c.output().unwrap();
        stdout(&o)
            .lines()
            .filter_map(|l| {
                l.strip_prefix("NodeName=")
                    .or_else(|| l.strip_prefix("PartitionName="))
                    .map(|r| r.split_whitespace().next().unwrap_or("").to_string())
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    assert_eq!(names(&["show", "partition"], None), "debug");
    assert_eq!(names(&["-a", "show", "partition"], None), "debug,secret");
    assert_eq!(
        names(&["show", "partition"], Some(("SCONTROL_ALL", "1"))),
        "debug,secret"
    );
    assert_eq!(names(&["-a", "--hide", "show", "partition"], None), "debug");
    assert_eq!(names(&["show", "node"], None), "n1");
    // FUTURE and only in a hidden partition: both flags are needed.
    assert_eq!(names(&["-F", "show", "node"], None), "n1");
    assert_eq!(names(&["-a", "-F", "show", "node"], None), "n1,f1");
    assert_eq!(
        names(&["-a", "show", "node"], Some(("SCONTROL_FUTURE", "1"))),
        "n1,f1"
    );
    let o = t.run_as_user("scontrol", &["show", "partition", "secret"]);
    assert!(!o.status.success(), "a hidden partition is not found");
    // Root sees hidden partitions and their nodes without -a (FUTURE
    // nodes still only with -F).
    let o = t.run("scontrol", &["show", "partition", "secret"]);
    assert!(o.status.success(), "{}", stdout(&o));
    let o = t.run("scontrol", &["-F", "show", "node", "f1"]);
    assert!(stdout(&o).starts_with("NodeName=f1 "), "{}", stdout(&o));
    let o = t.run("scontrol", &["show", "node", "f1"]);
    assert!(!o.status.success(), "{}", stdout(&o));
    // Interactive: `all` then `hide`.
    let o = t
        .cmd_as(TEST_UID, TEST_GID, "scontrol")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin
                .take()
                .unwrap()
                .write_all(b"all\nshow partition\nhide\nshow partition\n")?;
            c.wait_with_output()
        })
        .unwrap();
    let text = stdout(&o);
    let parts: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("PartitionName="))
        .collect();
    assert_eq!(parts, ["debug", "secret", "debug"], "{text}");
}

/// `sbatch --uid/--gid` (root only, by name or number): the job is that
/// user's and group's, and runs as them. An ordinary user is refused by
/// sbatch and, sending the request anyway, by the controller, which
/// creates nothing.
#[test]
fn root_submits_as_another_user_with_uid_and_gid() {
    use slurm_tests::{stderr, TestCluster, TEST_GID, TEST_UID};
    use std::os::unix::fs::PermissionsExt;
    let t = TestCluster::start(1, |_| {});
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let cwd = dir.path().to_str().unwrap();
    let user = slurm_common::users::user_name_or_id(TEST_UID);
    let group = slurm_common::users::group_name_or_id(TEST_GID);
    let (u, g) = (TEST_UID.to_string(), TEST_GID.to_string());
    for (uid, gid) in [(user.as_str(), group.as_str()), (u.as_str(), g.as_str())] {
        let id = t.sbatch(&[
            &format!("--uid={uid}"),
            "--gid",
            gid,
            "-D",
            cwd,
            "-o",
            "ids-%j",
            "--wrap",
            "echo $(id -u) $(id -g)",
        ]);
        let j = t.wait_done(id, 30);
        assert_eq!((j.user_id, j.group_id), (TEST_UID, TEST_GID));
        assert_eq!(j.user_name, user);
        assert_eq!(j.state, slurm_proto::JobState::Completed);
        let out = std::fs::read_to_string(dir.path().join(format!("ids-{id}"))).unwrap();
        assert_eq!(out, format!("{TEST_UID} {TEST_GID}\n"));
    }
    let o = t.run("sbatch", &["--uid=no-such-user-here", "--wrap", "true"]);
    assert_eq!(o.status.code(), Some(255));
    assert!(
        stderr(&o).contains("Invalid --uid specification"),
        "{}",
        stderr(&o)
    );
    // An ordinary user: refused by sbatch...
    let o = t.run_as_user("sbatch", &["--uid=0", "--wrap", "true"]);
    assert_eq!(o.status.code(), Some(255));
    assert!(
        stderr(&o).contains("sbatch: error: --uid only permitted by root user"),
        "{}",
        stderr(&o)
    );
    // ... and by the controller, for a request sent without sbatch.
    let before = t.jobs().len();
    let key = slurm_common::auth::Key::load(&t.c.spec.dir.join("slurm.key")).unwrap();
    let now = slurm_common::auth::now();
    for (user_id, group_id) in [(Some(0), None), (None, Some(0))] {
        let desc = slurm_proto::JobDesc {
            script: "#!/bin/sh\ntouch /root/owned\n".into(),
            work_dir: "/tmp".into(),
            environment: vec!["PATH=/bin".into()],
            user_id,
            group_id,
            ..Default::default()
        };
        let r = slurm_tests::grpc_call(&t, slurm_proto::RequestBody::SubmitBatchJob(desc), |b| {
            key.sign(TEST_UID, TEST_GID, "x", now, b)
        });
        match r {
            slurm_proto::Response::Error(e) => {
                assert_eq!(e.error, slurm_proto::SlurmError::AccessDenied);
                assert!(e
                    .detail
                    .unwrap_or_default()
                    .contains("only permitted by root"));
            }
            other => panic!("accepted: {other:?}"),
        }
    }
    assert_eq!(t.jobs().len(), before, "nothing was created");
}

/// A listing bigger than one streamed part (4096 jobs) arrives whole,
/// filtered in the controller, and cut to the caller's own jobs under
/// PrivateData=jobs.
#[test]
fn big_listings_arrive_whole_and_private() {
    use slurm_tests::{stdout, TestCluster};
    let t = TestCluster::start(1, |s| {
        s.extra_conf
            .push_str("MaxArraySize=10001\nPrivateData=jobs\n");
    });
    let theirs = t.sbatch_as_user(&["-H", "--array=0-4999", "-o", "/dev/null", "--wrap", "true"]);
    let mine = t.sbatch(&["-H", "--array=0-9", "-o", "/dev/null", "--wrap", "true"]);
    let lines = |o: std::process::Output| {
        assert!(o.status.success());
        stdout(&o).lines().map(str::to_string).collect::<Vec<_>>()
    };
    let all = lines(t.run("squeue", &["-h", "-r", "-o", "%i"]));
    assert_eq!(all.len(), 5010);
    let mut want: Vec<String> = (0..5000).map(|k| format!("{theirs}_{k}")).collect();
    want.extend((0..10).map(|k| format!("{mine}_{k}")));
    let mut got = all.clone();
    got.sort();
    want.sort();
    assert_eq!(got, want, "every task once");
    assert_eq!(
        lines(t.run_as_user("squeue", &["-h", "-r", "-o", "%i"])).len(),
        5000
    );
    assert_eq!(
        lines(t.run("squeue", &["-h", "-r", "-u", "root"])).len(),
        10
    );
}

/// `scontrol notify`: a running batch job's error file gets the message
/// (`slurmstepd: error: ...`, as Slurm's), an interactive job's srun
/// prints it; another user may not, and what has nothing to tell, or is
/// over, gets Slurm's errors; nothing is written then.
#[test]
fn scontrol_notify_tells_the_job_and_only_its_owner_may() {
    use slurm_proto::JobState;
    use slurm_tests::{stderr, TestCluster};
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    use std::time::Duration;
    let t = TestCluster::start(1, |_| {});
    let id = t.sbatch_as_user(&["-o", "n.out", "-e", "n.err", "--wrap", "sleep 60"]);
    t.wait_job(id, 20, "running", |j| j.state == JobState::Running);
    let err_file = t.work.join("n.err");
    let sid = id.to_string();
    let out = t.run_as_user("scontrol", &["notify", &sid, "hello", "from", "scontrol"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let wait_for = |text: &str| {
        for _ in 0..50 {
            if std::fs::read_to_string(&err_file)
                .unwrap_or_default()
                .contains(text)
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "{text:?} never reached the error file: {:?}\n{}",
            std::fs::read_to_string(&err_file),
            t.logs()
        );
    };
    wait_for("slurmstepd: error: hello from scontrol\n");
    // Root may too.
    let out = t.run("scontrol", &["notify", &sid, "from root"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_for("slurmstepd: error: from root\n");
    // Another user's job: refused, nothing written.
    let other = t.sbatch(&["-o", "o.out", "--wrap", "sleep 60"]);
    t.wait_job(other, 20, "running", |j| j.state == JobState::Running);
    let out = t.run_as_user("scontrol", &["notify", &other.to_string(), "boo"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr(&out), "job notify failure: Invalid user id\n");
    // Pending (nothing to tell), unknown, bad ids, too few words.
    let pending = t.sbatch(&["--hold", "--wrap", "true"]);
    let out = t.run("scontrol", &["notify", &pending.to_string(), "x"]);
    assert_eq!(
        stderr(&out),
        "job notify failure: Requested operation is presently disabled\n"
    );
    let out = t.run("scontrol", &["notify", "999999", "x"]);
    assert_eq!(
        stderr(&out),
        "job notify failure: Invalid job id specified\n"
    );
    let out = t.run("scontrol", &["notify", "abc", "x"]);
    assert_eq!(
        (out.status.code(), stderr(&out).as_str()),
        (Some(1), "Invalid job_id abc\n")
    );
    let out = t.run("scontrol", &["notify", &sid]);
    assert_eq!(stderr(&out), "too few arguments for keyword:notify\n");
    // A message over 8 KiB is refused, and nothing is written.
    let long = "y".repeat(9000);
    let out = t.run_as_user("scontrol", &["notify", &sid, &long]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("job notify failure: "),
        "{}",
        stderr(&out)
    );
    assert!(!std::fs::read_to_string(&err_file)
        .unwrap_or_default()
        .contains("yyyy"));
    // Over: Slurm's "already completing or completed".
    t.run("scancel", &[&other.to_string()]);
    t.wait_done(other, 30);
    let out = t.run("scontrol", &["notify", &other.to_string(), "late"]);
    assert_eq!(
        stderr(&out),
        "job notify failure: Job/step already completing or completed\n"
    );
    assert!(!std::fs::read_to_string(t.work.join("o.out"))
        .unwrap_or_default()
        .contains("boo"));
    // An interactive job: its srun says it.
    let mut srun = t
        .cmd_as(slurm_tests::TEST_UID, slurm_tests::TEST_GID, "srun")
        .args(["sh", "-c", "echo started; exec sleep 60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(srun.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "started\n");
    let job = t
        .jobs()
        .into_iter()
        .find(|j| j.state == JobState::Running && !j.batch)
        .expect("srun's job");
    let out = t.run_as_user("scontrol", &["notify", &job.job_id.to_string(), "to srun"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut err = BufReader::new(srun.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert_eq!(line, "srun: to srun\n");
    t.run("scancel", &[&job.job_id.to_string(), &sid]);
    let _ = srun.wait();
}

/// `srun -r/--relative=N`: the step starts at node N of the allocation;
/// Slurm's errors with `-w`/`-x`, outside an allocation, and past the end.
#[test]
fn srun_relative_starts_the_step_at_node_n() {
    use slurm_tests::{stderr, stdout, TestCluster};
    let t = TestCluster::start(3, |_| {});
    let script = super::write_script(
        &t,
        "rel.sh",
        "#!/bin/sh\n\
         echo one $(srun -N1 -r 1 printenv SLURMD_NODENAME)\n\
         echo two $(srun -N2 -r 1 printenv SLURMD_NODENAME | sort | tr '\\n' ' ')\n\
         echo last $(srun -n1 -r 2 printenv SLURMD_NODENAME)\n\
         srun -N2 -r 2 true; echo past $?\n\
         srun -r 1 true; echo all $?\n\
         srun -r 1 -w n1 true; echo withw $?\n",
    );
    let id = t.sbatch(&["-N3", "-o", "rel.out", &script]);
    let j = t.wait_done(id, 60);
    let out = std::fs::read_to_string(t.work.join("rel.out")).unwrap_or_default();
    assert_eq!(j.state, slurm_proto::JobState::Completed, "{out}");
    assert!(out.contains("one n2\n"), "{out}");
    assert!(out.contains("two n2 n3\n"), "{out}");
    assert!(
        out.contains(
            "srun: error: --relative and SLURM_JOB_NUM_NODES option incompatible with count of allocated nodes (1+3>3)\nall 1\n"
        ),
        "{out}"
    );
    assert!(out.contains("last n3\n"), "{out}");
    assert!(
        out.contains(
            "srun: error: --relative and --nodes option incompatible with count of allocated nodes (2+2>3)\npast 1\n"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "srun: error: -r,--relative not allowed with -w,--nodelist or -x,--exclude.\nwithw 1\n"
        ),
        "{out}"
    );
    let out = t.run("srun", &["-r", "1", "true"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "srun: fatal: --relative option invalid for job allocation request\n"
    );
    let out = t.run("srun", &["-r", "x", "true"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));

    // -M/--clusters (and SLURM_CLUSTERS): this cluster or all; another
    // is refused and nothing runs.
    let out = t.run("srun", &["-M", "all", "printenv", "SLURMD_NODENAME"]);
    assert_eq!(stdout(&out), "n1\n", "{}", stderr(&out));
    let jobs = t.jobs().len();
    let out = t.run("srun", &["-M", "elsewhere", "true"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("srun: error: Invalid cluster name: elsewhere (this is "),
        "{}",
        stderr(&out)
    );
    let out = t
        .cmd("salloc")
        .env("SLURM_CLUSTERS", "elsewhere")
        .args(["true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("salloc: error: Invalid cluster name: elsewhere"),
        "{}",
        stderr(&out)
    );
    assert_eq!(t.jobs().len(), jobs, "a refused request made a job");
}

/// `key`'s value in `scontrol show config` (empty when not shown).
fn config_value(t: &slurm_tests::TestCluster, key: &str) -> String {
    let o = t.run("scontrol", &["show", "config"]);
    slurm_tests::stdout(&o)
        .lines()
        .find(|l| l.split_whitespace().next() == Some(key))
        .and_then(|l| l.split_once('='))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default()
}

/// `scontrol setdebugflags`: root's `+TraceJobs` makes the controller log
/// each job's submission, start and end (`show config` says so), `-TraceJobs`
/// stops it; an ordinary user may not change them.
#[test]
fn setdebugflags_turns_the_controllers_job_trace_on_and_off() {
    use slurm_proto::JobState;
    use slurm_tests::{stderr, TestCluster};
    let t = TestCluster::start(1, |_| {});
    let flags = |t: &TestCluster| config_value(t, "DebugFlags");
    assert_eq!(flags(&t), "(null)");
    let out = t.run_as_user("scontrol", &["setdebugflags", "+TraceJobs"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("slurm_set_debug_flags error:"),
        "{}",
        stderr(&out)
    );
    assert_eq!(flags(&t), "(null)", "a refused change changed nothing");
    let out = t.run("scontrol", &["setdebugflags", "+TraceJobs", "+Steps"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(flags(&t), "Steps,TraceJobs");
    let traced = t.sbatch(&["--wrap", "true"]);
    assert_eq!(t.wait_done(traced, 30).state, JobState::Completed);
    let logs = t.logs();
    for what in ["submitted", "started by the", "ended COMPLETED"] {
        assert!(
            logs.contains(&format!("TraceJobs: JobId={traced} {what}")),
            "{what}: {logs}"
        );
    }
    let out = t.run("scontrol", &["setdebugflags", "-TraceJobs"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(flags(&t), "Steps");
    let quiet = t.sbatch(&["--wrap", "true"]);
    assert_eq!(t.wait_done(quiet, 30).state, JobState::Completed);
    assert!(!t.logs().contains(&format!("TraceJobs: JobId={quiet} ")));
}

/// `SlurmSchedLogFile` with `SlurmSchedLogLevel=1`: the main scheduler's
/// allocations, holds and releases are logged there as Slurm's
/// (`sched: Allocate JobId=N NodeList=... #CPUs=... Partition=...`);
/// `scontrol schedloglevel 0` stops it, `enable` starts it again (`show
/// config` says which); an ordinary user may not change it.
#[test]
fn the_scheduler_log_records_allocations_while_its_level_is_on() {
    use slurm_proto::JobState;
    use slurm_tests::{stderr, TestCluster};
    let t = TestCluster::start(1, |s| {
        s.extra_conf = format!(
            "SlurmSchedLogFile={}\nSlurmSchedLogLevel=1\n",
            s.dir.join("sched.log").display()
        );
    });
    let log = t.c.spec.dir.join("sched.log");
    let text = || std::fs::read_to_string(&log).unwrap_or_default();
    let first = t.sbatch(&["--wrap", "true"]);
    assert_eq!(t.wait_done(first, 30).state, JobState::Completed);
    // Each line as Slurm's: `sched: [time] message`.
    let want = format!("] Allocate JobId={first} NodeList=n1 #CPUs=1 Partition=");
    assert!(
        text()
            .lines()
            .any(|l| l.starts_with("sched: [") && l.contains(&want)),
        "{}",
        text()
    );
    let held = t.sbatch(&["-H", "--wrap", "true"]);
    let out = t.run("scontrol", &["release", &held.to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    t.wait_done(held, 30);
    assert!(
        text().contains(&format!(
            "] _release_job_rec: release hold on JobId={held} by uid 0\n"
        )),
        "{}",
        text()
    );
    assert_eq!(config_value(&t, "SlurmSchedLogLevel"), "1");
    // An ordinary user may not turn it off.
    let out = t.run_as_user("scontrol", &["schedloglevel", "0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("slurm_set_schedlog_level error:"),
        "{}",
        stderr(&out)
    );
    assert_eq!(config_value(&t, "SlurmSchedLogLevel"), "1");
    // Off: nothing more is written.
    let out = t.run("scontrol", &["schedloglevel", "disable"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(config_value(&t, "SlurmSchedLogLevel"), "0");
    let quiet = t.sbatch(&["--wrap", "true"]);
    t.wait_done(quiet, 30);
    assert!(!text().contains(&format!("JobId={quiet} ")), "{}", text());
    // On again, saying so first.
    let out = t.run("scontrol", &["schedloglevel", "1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let again = t.sbatch(&["--wrap", "true"]);
    t.wait_done(again, 30);
    let t2 = text();
    let set = t2
        .find("] Set scheduler log level to 1")
        .expect("level change logged");
    let alloc = t2
        .find(&format!("] Allocate JobId={again} "))
        .expect("allocation logged");
    assert!(set < alloc, "{t2}");
}

/// `scancel --admin-comment`: root's cancel marks the job's AdminComment
/// (`scontrol show job` shows it); an ordinary user's is refused whole,
/// with Slurm's error, and cancels nothing.
#[test]
fn scancel_admin_comment_marks_the_cancelled_job_and_is_root_only() {
    use slurm_proto::JobState;
    use slurm_tests::{stderr, stdout, TestCluster};
    let t = TestCluster::start(1, |_| {});
    let mine = t.sbatch_as_user(&["--wrap", "sleep 60"]);
    t.wait_job(mine, 20, "running", |j| j.state == JobState::Running);
    let out = t.run_as_user("scancel", &["--admin-comment=mine", &mine.to_string()]);
    assert_eq!(
        (out.status.code(), stderr(&out).as_str()),
        (Some(1), "scancel: error: Invalid user id\n")
    );
    assert_eq!(t.job(mine).unwrap().state, JobState::Running);
    assert_eq!(t.job(mine).unwrap().desc.admin_comment, None);
    let out = t.run(
        "scancel",
        &["--admin-comment=bad disk on n1", &mine.to_string()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(t.wait_done(mine, 30).state, JobState::Cancelled);
    let out = t.run("scontrol", &["show", "job", &mine.to_string()]);
    let shown = stdout(&out);
    assert!(
        shown
            .lines()
            .any(|l| l.trim() == "AdminComment=bad disk on n1"),
        "{shown}"
    );
}

/// `sbatch -O/--overcommit`: the job gets one task's CPUs per node and
/// keeps its task count, so its steps run all its tasks on them (8 tasks
/// on a 4-CPU node); without it the same request can never run.
#[test]
fn sbatch_overcommit_runs_more_tasks_than_cpus() {
    use slurm_proto::JobState;
    use slurm_tests::{stderr, TestCluster};
    let t = TestCluster::start(1, |_| {});
    let id = t.sbatch_as_user(&[
        "-O",
        "-n",
        "8",
        "-o",
        "oc.out",
        "--wrap",
        "echo $SLURM_NTASKS $SLURM_OVERCOMMIT $SLURM_TASKS_PER_NODE; srun sh -c 'echo task' | wc -l",
    ]);
    let j = t.wait_done(id, 60);
    assert_eq!(j.state, JobState::Completed, "{}", t.logs());
    assert_eq!(j.alloc.cpus, vec![1], "one task's CPUs on its node");
    assert_eq!(j.num_tasks, 8);
    let out = std::fs::read_to_string(t.work.join("oc.out")).unwrap();
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    assert_eq!(lines, ["8 1 8", "8"], "{out}");
    // Without it, 8 tasks never fit 4 CPUs: refused at submission.
    let out = t.run_as_user("sbatch", &["-n", "8", "--wrap", "true"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("Requested node configuration is not available"),
        "{}",
        stderr(&out)
    );
}

/// `scontrol fsdampeningfactor N`: root's value is the controller's
/// FairShareDampeningFactor (`show config` says so; the fair share is
/// computed again with it) until slurm.conf is read again; an ordinary
/// user is refused with Slurm's words and changes nothing.
#[test]
fn fsdampeningfactor_holds_until_slurm_conf_is_read_again() {
    use slurm_tests::{stderr, TestCluster};
    let t = TestCluster::start(1, |s| {
        s.extra_conf = "PriorityType=priority/multifactor\nFairShareDampeningFactor=2\n".into();
    });
    let factor = |t: &TestCluster| config_value(t, "FairShareDampeningFactor");
    assert_eq!(factor(&t), "2");
    let out = t.run_as_user("scontrol", &["fsdampeningfactor", "9"]);
    assert_eq!(
        (out.status.code(), stderr(&out)),
        (
            Some(1),
            "slurm_set_fs_dampeningfactor error:Access/permission denied\n".to_string()
        )
    );
    assert_eq!(factor(&t), "2", "a refused change changed nothing");
    let out = t.run("scontrol", &["fsdampeningfactor", "0"]);
    assert_eq!(stderr(&out), "invalid dampening factor: 0\n");
    let out = t.run("scontrol", &["fsdamp", "7"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(factor(&t), "7");
    assert!(t.logs().contains("Set FairShareDampeningFactor to 7"));
    let out = t.run("scontrol", &["reconfigure"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(factor(&t), "2");
}

/// `srun --bcast`: the program is copied to each node first, written as
/// the user, and the copy runs: to the path given, or named
/// `slurm_bcast_<job>.<step>_<node>` in the working directory, its mode
/// kept. Misuse: an ordinary user cannot place it where they may not
/// write (root's directory, another's file): the step is refused and
/// nothing is written or changed.
#[test]
fn srun_bcast_runs_a_copy_written_as_the_user() {
    use slurm_tests::{stderr, stdout, TestCluster, TEST_GID, TEST_UID};
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let t = TestCluster::start(2, |_| {});
    let dir = tempfile::Builder::new()
        .prefix("bcast")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let prog = dir.path().join("prog.sh");
    std::fs::write(&prog, "#!/bin/sh\necho \"ran $0\"\n").unwrap();
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o750)).unwrap();
    std::os::unix::fs::chown(&prog, Some(TEST_UID), Some(TEST_GID)).unwrap();
    let srun = |args: &[&str]| {
        t.cmd_as(TEST_UID, TEST_GID, "srun")
            .current_dir(dir.path())
            .args(args)
            .output()
            .unwrap()
    };
    // To a path given (one node: the nodes here share one disk).
    let dest = dir.path().join("copy.sh");
    let o = srun(&["-N1", &format!("--bcast={}", dest.display()), "./prog.sh"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), format!("ran {}\n", dest.display()));
    let m = std::fs::metadata(&dest).unwrap();
    assert_eq!((m.uid(), m.mode() & 0o777), (TEST_UID, 0o750));
    // Without one: in the working directory, one copy per node.
    let o = srun(&["-N2", "-n2", "--bcast", "prog.sh"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut ran: Vec<String> = stdout(&o).lines().map(str::to_string).collect();
    ran.sort();
    let at = format!("ran {}/slurm_bcast_", dir.path().display());
    assert_eq!(ran.len(), 2, "{ran:?}");
    for (line, node) in ran.iter().zip(["n1", "n2"]) {
        assert!(
            line.starts_with(&at) && line.ends_with(&format!(".0_{node}")),
            "{line}"
        );
        let path = line.trim_start_matches("ran ");
        assert_eq!(std::fs::metadata(path).unwrap().uid(), TEST_UID);
    }
    // Misuse: root's directory, and root's file.
    let root_dest = format!("/root/bcast-{}", std::process::id());
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
    for target in [root_dest.as_str(), victim.to_str().unwrap()] {
        let o = srun(&["-N1", &format!("--bcast={target}"), "./prog.sh"]);
        assert!(!o.status.success(), "{target}: {}", stdout(&o));
        assert!(
            stderr(&o).contains("Failed to broadcast") && stderr(&o).contains("Permission denied"),
            "{target}: {}",
            stderr(&o)
        );
        assert!(!stdout(&o).contains("ran "), "{}", stdout(&o));
    }
    assert!(!std::path::Path::new(&root_dest).exists());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n");
    // A FIFO of theirs (a write to it would never end): refused at once.
    let fifo = dir.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0);
    std::os::unix::fs::chown(&fifo, Some(TEST_UID), Some(TEST_GID)).unwrap();
    let o = srun(&["-N1", &format!("--bcast={}", fifo.display()), "./prog.sh"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("not a regular file"), "{}", stderr(&o));
    // A program that is not there: Slurm's fatal error, nothing runs.
    let o = srun(&["-N1", "--bcast", "./missing.sh"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o).trim(),
        "srun: fatal: Can not execute ./missing.sh"
    );
}

/// Steps hold CPUs as Slurm's: `srun -N1 -n1` steps of a two-node job run
/// one on each node at once; a third waits until one ends (then says
/// "Step created"), `-I` gives up at once, `--overlap` runs at once;
/// `--exact` steps share a node, each in a cpuset of its own CPUs; an srun
/// killed outright holds nothing once its tasks end.
#[test]
fn steps_hold_their_cpus_and_wait_for_busy_ones() {
    use slurm_proto::JobState;
    use slurm_tests::{stderr, stdout, TestCluster};
    use std::time::{Duration, Instant};
    let cpuset = std::path::Path::new("/sys/fs/cgroup/cpuset/cgroup.procs").exists()
        || std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    let confined = cpuset && unsafe { libc::geteuid() } == 0;
    let t = TestCluster::start(2, |s| {
        if confined {
            s.extra_conf =
                "ProctrackType=proctrack/cgroup\nTaskPlugin=task/affinity,task/cgroup\n".into();
            s.cgroup_conf = Some("CgroupPlugin=autodetect\nConstrainCores=yes\n".into());
        }
    });
    let job = t.sbatch(&["-N2", "-n8", "-t", "5", "--wrap", "sleep 300"]);
    t.wait_job(job, 30, "running", |j| j.state == JobState::Running);
    let id = job.to_string();
    let step = |args: &[&str]| t.spawn_step(job, args);
    // Ends in time or fails the test (a step that waits forever).
    let finish = |mut c: std::process::Child, secs: u64| {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while c.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = c.kill();
                panic!("a step still waits after {secs} s\n{}", t.logs());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        c.wait_with_output().unwrap()
    };
    let begun = Instant::now();
    let who = ["-N1", "-n1", "sh", "-c", "echo $SLURMD_NODENAME; sleep 3"];
    let a = step(&who);
    let b = step(&who);
    std::thread::sleep(Duration::from_millis(1200));
    let c = step(&["-N1", "-n1", "sh", "-c", "echo $SLURMD_NODENAME"]);
    let i = t.run("srun", &["--jobid", &id, "-I", "-N1", "-n1", "true"]);
    assert!(!i.status.success(), "-I ran on a busy node");
    assert!(
        stderr(&i).contains(&format!(
            "srun: error: Unable to create step for job {job}: Requested nodes are busy"
        )),
        "{}",
        stderr(&i)
    );
    let o = t.run(
        "srun",
        &["--jobid", &id, "--overlap", "-N1", "-n1", "echo", "overlap"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "overlap\n");
    // --external-launcher (an MPI launcher's daemons): at once, on both
    // busy nodes, whatever it says per task.
    let o = t.run(
        "srun",
        &[
            "--jobid",
            &id,
            "--external-launcher",
            "-N2",
            "-n2",
            "-c3",
            "--mem=10",
            "printenv",
            "SLURMD_NODENAME",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let mut on: Vec<&str> = text.lines().collect();
    on.sort();
    assert_eq!(on, ["n1", "n2"]);
    let (a, b) = (finish(a, 30), finish(b, 30));
    let mut nodes = vec![stdout(&a).trim().to_string(), stdout(&b).trim().to_string()];
    nodes.sort();
    assert_eq!(nodes, ["n1", "n2"], "{}{}", stderr(&a), stderr(&b));
    let c = finish(c, 30);
    assert!(c.status.success(), "{}", stderr(&c));
    assert!(
        begun.elapsed() >= Duration::from_millis(2900),
        "the third step did not wait"
    );
    assert!(
        stderr(&c).contains(&format!("srun: Step created for StepId={job}.")),
        "{}",
        stderr(&c)
    );
    // --exact: two one-task steps on one node at once, each its own CPU.
    let mask = "grep Cpus_allowed_list /proc/self/status; sleep 1";
    let e = [0, 1].map(|_| step(&["-w", "n1", "-N1", "-n1", "--exact", "sh", "-c", mask]));
    let begun = Instant::now();
    let [e1, e2] = e.map(|c| finish(c, 30));
    assert!(
        begun.elapsed() < Duration::from_millis(2500),
        "--exact steps ran one after the other"
    );
    for e in [&e1, &e2] {
        assert!(e.status.success(), "{}", stderr(e));
        assert!(!stderr(e).contains("Step created"), "{}", stderr(e));
    }
    if confined {
        let list = |o: &std::process::Output| {
            stdout(o)
                .trim()
                .trim_start_matches("Cpus_allowed_list:")
                .trim()
                .to_string()
        };
        let (l1, l2) = (list(&e1), list(&e2));
        assert!(
            !l1.contains([',', '-']) && !l2.contains([',', '-']),
            "{l1} / {l2}"
        );
        assert_ne!(l1, l2, "both steps got the same CPU");
    }
    // An srun killed outright: what its step held comes back once its
    // tasks end (told by the node daemon).
    let mut k = step(&["-w", "n2", "-N1", "-n1", "sleep", "2"]);
    std::thread::sleep(Duration::from_millis(800));
    let _ = k.kill();
    let _ = k.wait();
    let after = finish(step(&["-w", "n2", "-N1", "-n1", "echo", "after"]), 30);
    assert!(after.status.success(), "{}", stderr(&after));
    assert_eq!(stdout(&after), "after\n");
    // A step that never fits the job is refused, not kept waiting.
    let o = t.run("srun", &["--jobid", &id, "-n", "9", "true"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("More processors requested than permitted"),
        "{}",
        stderr(&o)
    );
    t.run("scancel", &[&id]);
}

/// Steps that ask memory of their own (`srun --mem`) hold it from the
/// job's, as Slurm's: another that would not fit beside them waits, one
/// asking more than the job has is refused with Slurm's error; with
/// ConstrainRAMSpace the step's cgroup has that limit.
#[test]
fn steps_hold_the_memory_they_ask_for() {
    use slurm_proto::JobState;
    use slurm_tests::{stderr, stdout, TestCluster};
    use std::time::{Duration, Instant};
    let v1_memory = std::path::Path::new("/sys/fs/cgroup/memory/cgroup.procs").exists();
    let confined = v1_memory && unsafe { libc::geteuid() } == 0;
    let t = TestCluster::start(1, |s| {
        if confined {
            s.extra_conf =
                "ProctrackType=proctrack/cgroup\nTaskPlugin=task/affinity,task/cgroup\n".into();
            s.cgroup_conf = Some("CgroupPlugin=autodetect\nConstrainRAMSpace=yes\n".into());
        }
    });
    let job = t.sbatch(&["-n2", "--mem=300", "-t", "5", "--wrap", "sleep 300"]);
    t.wait_job(job, 30, "running", |j| j.state == JobState::Running);
    let id = job.to_string();
    // The step's own limit, read from its cgroup (v1: the task's parent).
    let limit = "d=$(grep ':memory:' /proc/self/cgroup | cut -d: -f3); \
                 cat /sys/fs/cgroup/memory$d/../memory.limit_in_bytes 2>/dev/null || echo none; sleep 2";
    let begun = Instant::now();
    let a = t
        .cmd("srun")
        .args([
            "--jobid",
            &id,
            "-n1",
            "--exact",
            "--mem=200",
            "sh",
            "-c",
            limit,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let b = t.run(
        "srun",
        &[
            "--jobid",
            &id,
            "-n1",
            "--exact",
            "--mem=200",
            "echo",
            "second",
        ],
    );
    assert!(b.status.success(), "{}", stderr(&b));
    assert_eq!(stdout(&b), "second\n");
    assert!(
        begun.elapsed() >= Duration::from_secs(2),
        "the second did not wait"
    );
    assert!(
        stderr(&b).contains("Step created for StepId="),
        "{}",
        stderr(&b)
    );
    let a = a.wait_with_output().unwrap();
    assert!(a.status.success(), "{}", stderr(&a));
    if confined {
        assert_eq!(
            stdout(&a).trim(),
            (200u64 << 20).to_string(),
            "{}",
            t.logs()
        );
    }
    // One beside it fits: 100 of the 300 are free.
    let o = t.run(
        "srun",
        &[
            "--jobid",
            &id,
            "-n1",
            "--exact",
            "--mem=100",
            "echo",
            "fits",
        ],
    );
    assert_eq!(stdout(&o), "fits\n", "{}", stderr(&o));
    let o = t.run("srun", &["--jobid", &id, "-n1", "--mem=400", "true"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains(&format!(
            "Unable to create step for job {job}: Memory required by task is not available"
        )),
        "{}",
        stderr(&o)
    );
    t.run("scancel", &[&id]);
}
