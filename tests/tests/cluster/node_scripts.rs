//! Prolog and Epilog from slurm.conf, run by the node daemons.

use slurm_proto::{JobReason, JobState};
use slurm_tests::*;

#[test]
fn prolog_and_epilog_run_and_failures_drain_the_node() {
    let mut dir = std::path::PathBuf::new();
    let t = TestCluster::start(2, |s| {
        dir = s.dir.clone();
        std::fs::create_dir_all(&s.dir).unwrap();
        for (name, ctx) in [("prolog.sh", "prolog"), ("epilog.sh", "epilog")] {
            let p = s.dir.join(name);
            std::fs::write(
                &p,
                format!(
                    "#!/bin/sh\necho \"$SLURM_SCRIPT_CONTEXT $SLURM_JOB_ID $SLURM_JOB_USER $SLURMD_NODENAME\" >> {d}/{ctx}.log\n\
                     [ -e {d}/fail-{ctx}-$SLURMD_NODENAME ] && exit 1\nexit 0\n",
                    d = s.dir.display()
                ),
            )
            .unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        s.extra_conf = format!(
            "Prolog={d}/prolog.sh\nEpilog={d}/epilog.sh\nPrologEpilogTimeout=30\n",
            d = s.dir.display()
        );
    });
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();

    // Both run, as root, with the job's facts, on the job's node.
    let id = t.sbatch(&["-w", "n1", "--wrap", "true"]);
    t.wait_done(id, 30);
    assert!(
        read("prolog.log").contains(&format!("prolog_slurmd {id} root n1\n")),
        "{}",
        read("prolog.log")
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !read("epilog.log").contains(&format!("epilog_slurmd {id} root n1\n")) {
        assert!(
            std::time::Instant::now() < deadline,
            "epilog: {}",
            read("epilog.log")
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }

    // A job's first step on another node runs the prolog there too, and
    // the epilog follows on every node.
    let id = t.sbatch(&["-N2", "--wrap", "srun -N2 true"]);
    assert_eq!(t.wait_done(id, 30).state, JobState::Completed);
    assert!(
        read("prolog.log").contains(&format!("prolog_slurmd {id} root n2\n")),
        "{}",
        read("prolog.log")
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !read("epilog.log").contains(&format!("epilog_slurmd {id} root n2\n")) {
        assert!(
            std::time::Instant::now() < deadline,
            "epilog: {}",
            read("epilog.log")
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }

    // A failing prolog drains the node and requeues the job, held.
    std::fs::write(dir.join("fail-prolog-n2"), "").unwrap();
    let id = t.sbatch(&["-w", "n2", "--wrap", "true"]);
    let j = t.wait_job(id, 30, "requeued held", |j| {
        j.state == JobState::Pending && j.held.is_some() && j.restarts == 1
    });
    assert_eq!(
        j.reason,
        JobReason::Other("launch failed requeued held".into())
    );
    let n2 = t.wait_node("n2", 10, "drained", |n| n.flags.drain);
    assert_eq!(n2.reason.as_deref(), Some("Prolog error"));
    assert!(t.run("scancel", &[&id.to_string()]).status.success());

    // A failing epilog drains the node once the job is done.
    std::fs::write(dir.join("fail-epilog-n1"), "").unwrap();
    let id = t.sbatch(&["-w", "n1", "--wrap", "true"]);
    let j = t.wait_done(id, 30);
    assert_eq!(j.state, JobState::Completed);
    let n1 = t.wait_node("n1", 10, "drained", |n| n.flags.drain);
    assert_eq!(n1.reason.as_deref(), Some("Epilog error"));
}

#[test]
fn srun_cpu_bind_pins_each_task() {
    let t = TestCluster::start(1, |_| {});
    let run_with = |opts: &[&str]| {
        let mut args = vec!["-n2", "-l"];
        args.extend_from_slice(opts);
        args.extend_from_slice(&["sh", "-c", "grep Cpus_allowed_list /proc/self/status"]);
        let o = t.run("srun", &args);
        let mut lines: Vec<String> = String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        lines.sort();
        (
            lines,
            String::from_utf8_lossy(&o.stderr).into_owned(),
            o.status.success(),
        )
    };
    let run = |bind: &str| run_with(&[bind]);
    let (lines, err, ok) = run("--cpu-bind=verbose,map_cpu:1,0");
    assert!(ok, "{err}");
    assert_eq!(
        lines,
        vec!["0: Cpus_allowed_list: 1", "1: Cpus_allowed_list: 0"],
        "{err}"
    );
    assert!(err.contains("cpu-bind=MASK - n1, task  0  0 ["), "{err}");
    assert!(err.contains("]: mask 0x2 set"), "{err}");
    let (lines, err, _) = run("--cpu-bind=cores");
    assert_eq!(
        lines,
        vec!["0: Cpus_allowed_list: 0", "1: Cpus_allowed_list: 1"],
        "{err}"
    );
    assert!(
        !err.contains("cpu-bind=MASK"),
        "quiet unless verbose: {err}"
    );
    let (_, err, ok) = run("--cpu-bind=sideways");
    assert!(
        !ok && err.contains("invalid --cpu-bind argument: sideways"),
        "{err}"
    );
    // Every CPU of the machine sits on the one socket here: `sockets`
    // gives each task all of the job's, from the real topology.
    let all = std::fs::read_to_string("/sys/fs/cgroup/cpuset/cpuset.cpus")
        .ok()
        .or_else(|| std::fs::read_to_string("/sys/devices/system/cpu/online").ok())
        .unwrap_or_default();
    let (lines, err, ok) = run("--cpu-bind=sockets");
    assert!(ok, "{err}");
    assert_eq!(
        lines,
        vec![
            format!("0: Cpus_allowed_list: {}", all.trim()),
            format!("1: Cpus_allowed_list: {}", all.trim())
        ],
        "{err}"
    );
    // One socket: block and fcyclic lay cores out alike.
    for dist in ["block:block", "cyclic:fcyclic"] {
        let (lines, err, ok) = run_with(&["--cpu-bind=cores", "-m", dist]);
        assert!(ok, "{err}");
        assert_eq!(
            lines,
            vec!["0: Cpus_allowed_list: 0", "1: Cpus_allowed_list: 1"],
            "{dist}: {err}"
        );
    }
    let (_, err, ok) = run_with(&["-m", "plane=2"]);
    assert!(
        !ok && err.contains("plane distribution is not supported"),
        "{err}"
    );
}

#[test]
fn node_with_less_hardware_than_its_line_is_drained() {
    // The line says 64 CPUs; this machine has fewer.
    let mut t = TestCluster::start(1, |s| s.cpus = 64);
    let path = t.c.spec.conf_path();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("SlurmdParameters=config_overrides\n"));
    std::fs::write(
        &path,
        text.replace("SlurmdParameters=config_overrides\n", ""),
    )
    .unwrap();
    t.c.kill_slurmd(0, libc::SIGKILL);
    t.c.kill_ctld(libc::SIGKILL);
    t.c.start_ctld().expect("controller restarts");
    t.c.start_slurmd(0).expect("slurmd restarts");
    let n = t.wait_node("n1", 30, "drained", |n| n.flags.drain);
    let why = n.reason.unwrap_or_default();
    assert!(
        why.starts_with("Low CPUs (reported:") && why.ends_with(" < configured:64)"),
        "{why}"
    );
}

#[test]
fn prolog_flags_alloc_runs_the_prolog_on_every_node_at_start() {
    let mut dir = std::path::PathBuf::new();
    let t = TestCluster::start(2, |s| {
        dir = s.dir.clone();
        std::fs::create_dir_all(&s.dir).unwrap();
        let p = s.dir.join("prolog.sh");
        std::fs::write(
            &p,
            format!(
                "#!/bin/sh\necho \"$SLURM_JOB_ID $SLURMD_NODENAME\" >> {}/prolog.log\n",
                s.dir.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        s.extra_conf = format!("Prolog={}/prolog.sh\nPrologFlags=Alloc\n", s.dir.display());
    });
    // No step ever runs on n2, yet its prolog runs.
    let id = t.sbatch(&["-N2", "--wrap", "sleep 1"]);
    assert_eq!(t.wait_done(id, 30).state, JobState::Completed);
    let log = std::fs::read_to_string(dir.join("prolog.log")).unwrap_or_default();
    assert!(
        log.contains(&format!("{id} n1\n")) && log.contains(&format!("{id} n2\n")),
        "{log}"
    );
}

#[test]
fn scontrol_reconfigure_applies_a_new_slurm_conf() {
    let t = TestCluster::start(1, |_| {});
    let path = t.c.spec.conf_path();
    let text = std::fs::read_to_string(&path).unwrap();
    let line = "PartitionName=debug Nodes=n[1-1] Default=YES MaxTime=INFINITE State=UP\n";
    assert!(text.contains(line), "{text}");
    // Partition limits and licenses change at once.
    std::fs::write(
        &path,
        text.replace(
            line,
            "PartitionName=debug Nodes=n[1-1] Default=YES MaxTime=10 State=UP\n",
        ) + "Licenses=matlab:2\n",
    )
    .unwrap();
    let out = t.run("scontrol", &["reconfigure"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let show = String::from_utf8_lossy(&t.run("scontrol", &["show", "partition", "debug"]).stdout)
        .into_owned();
    assert!(show.contains("MaxTime=00:10:00"), "{show}");
    let lic =
        String::from_utf8_lossy(&t.run("scontrol", &["show", "licenses"]).stdout).into_owned();
    assert!(lic.starts_with("LicenseName=matlab\n    Total=2"), "{lic}");
    // A broken file, or a change only a restart can apply, changes nothing.
    let good = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{good}Bogus Line Here\n")).unwrap();
    let out = t.run("scontrol", &["reconfigure"]);
    assert!(!out.status.success());
    std::fs::write(
        &path,
        good.replace("ClusterName=local", "ClusterName=other"),
    )
    .unwrap();
    let out = t.run("scontrol", &["reconfigure"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("restart"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let show = String::from_utf8_lossy(&t.run("scontrol", &["show", "partition", "debug"]).stdout)
        .into_owned();
    assert!(show.contains("MaxTime=00:10:00"), "{show}");
    // SlurmctldDebug applies at once: at `error`, a reconfigure's own
    // info line is no longer written.
    let log =
        || std::fs::read_to_string(t.c.spec.dir.join("log/slurmctld.log")).unwrap_or_default();
    let said = log().matches("reconfigured from").count();
    assert!(said >= 1, "{}", log());
    std::fs::write(&path, format!("{good}SlurmctldDebug=error\n")).unwrap();
    assert!(t.run("scontrol", &["reconfigure"]).status.success());
    let more = good.replace("Licenses=matlab:2", "Licenses=matlab:3");
    std::fs::write(&path, format!("{more}SlurmctldDebug=error\n")).unwrap();
    assert!(t.run("scontrol", &["reconfigure"]).status.success());
    assert_eq!(
        log().matches("reconfigured from").count(),
        said,
        "{}",
        log()
    );
    // Only root or SlurmUser may.
    let out = t
        .cmd_as(TEST_UID, TEST_GID, "scontrol")
        .arg("reconfigure")
        .output()
        .unwrap();
    assert!(!out.status.success());
}

/// The node daemon reads slurm.conf again on `scontrol reconfigure` (told
/// by the controller's watch) and on SIGHUP, without a restart: a Prolog
/// added, then an Epilog, apply to the next job; a file that does not
/// parse leaves the configuration in force.
#[test]
fn node_daemons_apply_a_changed_slurm_conf_without_a_restart() {
    let mut t = TestCluster::start(1, |_| {});
    let dir = t.c.spec.dir.clone();
    let path = t.c.spec.conf_path();
    for (name, log) in [("prolog.sh", "prolog.log"), ("epilog.sh", "epilog.log")] {
        let p = dir.join(name);
        std::fs::write(
            &p,
            format!(
                "#!/bin/sh\necho \"$SLURM_JOB_ID\" >> {}/{log}\n",
                dir.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
    let log = || std::fs::read_to_string(dir.join("log/slurmd.n1.log")).unwrap_or_default();
    let reconfigured = |n: usize| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while log().matches("reconfigured from").count() < n {
            assert!(
                std::time::Instant::now() < deadline,
                "slurmd did not read slurm.conf again\n{}",
                log()
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    };
    let before = t.sbatch(&["--wrap", "true"]);
    t.wait_done(before, 30);
    assert!(read("prolog.log").is_empty());

    // scontrol reconfigure: the controller's watch tells the node daemon.
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{text}Prolog={}/prolog.sh\n", dir.display())).unwrap();
    assert!(t.run("scontrol", &["reconfigure"]).status.success());
    reconfigured(1);
    let a = t.sbatch(&["--wrap", "true"]);
    t.wait_done(a, 30);
    assert_eq!(read("prolog.log"), format!("{a}\n"), "{}", log());

    // SIGHUP (systemd's ExecReload): the Epilog too.
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{text}Epilog={}/epilog.sh\n", dir.display())).unwrap();
    t.c.kill_slurmd(0, libc::SIGHUP);
    reconfigured(2);
    let b = t.sbatch(&["--wrap", "true"]);
    t.wait_done(b, 30);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while read("epilog.log") != format!("{b}\n") {
        assert!(std::time::Instant::now() < deadline, "epilog: {}", log());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }

    // SlurmdDebug changes the daemon's log level in place.
    assert!(!log().contains("launch request"), "{}", log());
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{text}SlurmdDebug=debug\n")).unwrap();
    t.c.kill_slurmd(0, libc::SIGHUP);
    reconfigured(3);
    let d = t.sbatch(&["--wrap", "true"]);
    t.wait_done(d, 30);
    assert!(log().contains("launch request"), "{}", log());

    // A broken file is refused: the daemon goes on with what it had.
    let good = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{good}Bogus Line Here\n")).unwrap();
    t.c.kill_slurmd(0, libc::SIGHUP);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !log().contains("keeping the configuration in force") {
        assert!(std::time::Instant::now() < deadline, "{}", log());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::fs::write(&path, good).unwrap();
    let c = t.sbatch(&["--wrap", "true"]);
    assert_eq!(t.wait_done(c, 30).state, JobState::Completed);
    assert!(read("prolog.log").ends_with(&format!("{c}\n")));
    // The same process all along.
    assert_eq!(log().matches("slurmd version").count(), 1, "{}", log());
}

/// `scontrol reboot` on real node daemons: an ordinary user is refused;
/// an operator's ASAP reboot drains the node, the node daemon runs
/// RebootProgram as root once the node is idle, and a node that does not
/// come back (the machine here does not reboot) is set DOWN after
/// ResumeTimeout, then resumes by hand.
#[test]
fn scontrol_reboot_runs_reboot_program_and_times_out_without_a_boot() {
    use slurm_proto::NodeBaseState;
    let mut dir = std::path::PathBuf::new();
    let t = TestCluster::start(2, |s| {
        dir = s.dir.clone();
        std::fs::create_dir_all(&s.dir).unwrap();
        let p = s.dir.join("reboot.sh");
        std::fs::write(
            &p,
            format!(
                "#!/bin/sh\necho \"$(id -u)\" >> {}/rebooted\n",
                s.dir.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        s.extra_conf = format!("RebootProgram={}\nResumeTimeout=4\n", p.display());
    });
    let marker = dir.join("rebooted");
    // An ordinary user may not.
    let o = t.run_as_user("scontrol", &["reboot", "n1"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("Access/permission denied"),
        "{}",
        stderr(&o)
    );
    // Bad requests: Slurm's words, nothing asked.
    for (args, says) in [
        (&["reboot"][..], "Missing node list. Specify ALL|<NodeList>"),
        (
            &["reboot", "nextstate=IDLE", "n1"][..],
            "Invalid state: IDLE",
        ),
        (&["reboot", "n1", "n2"][..], "Multiple node lists specified"),
        (
            &["cancel_reboot"][..],
            "missing argument for keyword:cancel_reboot",
        ),
    ] {
        let o = t.run("scontrol", args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
    assert!(t.nodes().iter().all(|n| !n.flags.reboot_requested));
    assert!(!marker.exists());

    let o = t.run("scontrol", &["reboot", "ASAP", "reason=kernel", "n1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let n = t.wait_node("n1", 20, "reboot issued", |n| n.flags.reboot_issued);
    assert_eq!(n.base_state, NodeBaseState::Down);
    assert!(n.flags.drain);
    let o = t.run("sinfo", &["-h", "-n", "n1", "-o", "%t"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "boot^");
    let o = t.run("sinfo", &["-h", "-N", "-t", "reboot_issued", "-o", "%N"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "n1");
    let o = t.run("scontrol", &["show", "node", "n1"]);
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(text.contains("State=DOWN+DRAIN+REBOOT_ISSUED"), "{text}");
    assert!(text.contains("Reason=kernel : reboot issued"), "{text}");
    // RebootProgram ran, as root, once.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !marker.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "0\n");
    // n2 was never asked.
    assert!(t.nodes().iter().any(|n| n.name == "n2"
        && !n.flags.reboot_requested
        && n.base_state == NodeBaseState::Idle));
    // The machine did not reboot: DOWN once ResumeTimeout has passed.
    let n = t.wait_node("n1", 20, "down after ResumeTimeout", |n| {
        !n.flags.reboot_issued && n.base_state == NodeBaseState::Down
    });
    assert_eq!(
        n.reason.as_deref(),
        Some("kernel : reboot issued : reboot timed out")
    );
    let o = t.run("scontrol", &["update", "nodename=n1", "state=resume"]);
    assert!(o.status.success(), "{}", stderr(&o));
    t.wait_node("n1", 20, "back", |n| n.base_state == NodeBaseState::Idle);
    let id = t.sbatch(&["-w", "n1", "--wrap", "true"]);
    t.wait_job(id, 20, "completed", |j| j.state == JobState::Completed);
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "0\n");
}

/// Mock node daemons "reboot" at once (a new boot time): `scontrol reboot
/// nextstate=DOWN` brings them back DOWN ("reboot complete"); a pending
/// reboot is cancelled with `scontrol cancel_reboot` (or `update
/// State=CANCEL_REBOOT`) while a job holds the node.
#[test]
fn mock_nodes_come_back_from_a_reboot_as_asked() {
    use slurm_proto::NodeBaseState;
    let t = TestCluster::start(3, |s| {
        s.mock = Some(None);
        s.extra_conf = "RebootProgram=/sbin/reboot\n".into();
    });
    let before = t.nodes();
    let booted = |name: &str| {
        before
            .iter()
            .find(|n| n.name == name)
            .and_then(|n| n.boot_time)
            .unwrap()
    };
    let o = t.run("scontrol", &["reboot", "nextstate=DOWN", "n[1-2]"]);
    assert!(o.status.success(), "{}", stderr(&o));
    for name in ["n1", "n2"] {
        let n = t.wait_node(name, 20, "back from its reboot", |n| {
            n.boot_time.unwrap_or(0) > booted(name)
                && !n.flags.reboot_issued
                && !n.flags.reboot_requested
        });
        assert_eq!(n.base_state, NodeBaseState::Down, "{name}");
        assert_eq!(
            n.reason.as_deref(),
            Some("reboot requested : reboot issued : reboot complete")
        );
    }
    // A job holds n3: the reboot waits, and is cancelled.
    let id = t.sbatch(&["-w", "n3", "--wrap", "sleep 30"]);
    t.wait_job(id, 20, "running", |j| j.state == JobState::Running);
    let o = t.run("scontrol", &["reboot", "ASAP", "n3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = t.run("sinfo", &["-h", "-n", "n3", "-o", "%t"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "drng@");
    let o = t.run(
        "scontrol",
        &["update", "nodename=n3", "state=CANCEL_REBOOT"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let n = t.wait_node("n3", 10, "reboot cancelled", |n| !n.flags.reboot_requested);
    assert!(!n.flags.drain && n.reason.is_none(), "{:?}", n);
    assert_eq!(t.job(id).unwrap().state, JobState::Running);
    assert_eq!(
        n.boot_time,
        before.iter().find(|n| n.name == "n3").unwrap().boot_time
    );
    let _ = t.run("scancel", &[&id.to_string()]);
}

/// Writes an executable `#!/bin/sh` script `name` in `dir`.
fn script(dir: &std::path::Path, name: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// slurm.conf's TaskProlog/TaskEpilog and srun's --task-prolog,
/// --task-epilog, --prolog and --epilog: the task scripts run as the job's
/// user around each task (a batch script is one), slurm.conf's prolog
/// first, its `export`/`unset`/`print` lines reaching the task; srun's own
/// run where srun runs, with the step's command as arguments; a failing
/// prolog stops what it stands before. An ordinary user's scripts (and
/// the site's, for that user's tasks) never run as root. srun's tasks get
/// the job's facts, srun's umask and the CPU binding made.
#[test]
fn task_and_srun_prologs_and_epilogs_run_as_the_user() {
    let mut dir = std::path::PathBuf::new();
    let t = TestCluster::start(1, |s| {
        dir = s.dir.clone();
        std::fs::create_dir_all(&s.dir).unwrap();
        script(
            &s.dir,
            "taskprolog.sh",
            "echo \"export FROM_CONF=$(id -u)\"\n\
             echo \"print   conf prolog for task ${SLURM_PROCID-none} $([ \"$SLURM_TASK_PID\" -gt 1 ] && echo with-pid)\"\n",
        );
        let log = s.dir.join("taskepilog.log");
        std::fs::write(&log, "").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o666)).unwrap();
        script(
            &s.dir,
            "taskepilog.sh",
            &format!(
                "echo \"$SLURM_SCRIPT_CONTEXT $(id -u) $SLURM_JOB_ID ${{SLURM_PROCID-none}}\" >> {}\n",
                log.display()
            ),
        );
        s.extra_conf = format!(
            "TaskProlog={d}/taskprolog.sh\nTaskEpilog={d}/taskepilog.sh\n",
            d = s.dir.display()
        );
    });
    let w = t.work.clone();
    script(
        &w,
        "tp.sh",
        "echo \"export FROM_USER=$FROM_CONF-user\"\necho 'unset DROPME'\n",
    );
    script(
        &w,
        "te.sh",
        &format!(
            "echo \"user epilog $(id -u) $SLURM_PROCID\" >> {}/te.log\n",
            w.display()
        ),
    );
    script(
        &w,
        "p.sh",
        "echo \"$SLURM_SCRIPT_CONTEXT $SLURM_JOB_ID.$SLURM_STEP_ID $(id -u) args=$*\" > p.log\n",
    );
    script(
        &w,
        "e.sh",
        "echo \"$SLURM_SCRIPT_CONTEXT $SLURM_JOB_ID.$SLURM_STEP_ID $(id -u) args=$*\" > e.log\n",
    );
    script(&w, "fail.sh", "exit 3\n");
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    let user = slurm_tests::TEST_UID;

    // An ordinary user's srun with all four.
    let out = t
        .cmd_as(user, slurm_tests::TEST_GID, "srun")
        .env("DROPME", "1")
        .env("SLURM_UMASK", "0077")
        .args([
            "-n2",
            "--cpu-bind=cores",
            "--task-prolog=tp.sh",
            "--task-epilog=./te.sh",
            "--prolog=p.sh",
            "--epilog=./e.sh",
            "sh",
            "-c",
            "echo \"task $SLURM_PROCID conf=$FROM_CONF user=$FROM_USER drop=${DROPME-unset} \
             umask=$(umask) qos=$SLURM_JOB_QOS debug=$SRUN_DEBUG dir=$SLURM_SUBMIT_DIR \
             bind=$SLURM_CPU_BIND_TYPE\"",
        ])
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    for task in 0..2 {
        assert!(
            text.contains(&format!("conf prolog for task {task} with-pid\n")),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "task {task} conf={user} user={user}-user drop=unset umask=0077 qos=normal \
                 debug=3 dir={} bind=mask_cpu:\n",
                w.display()
            )),
            "{text}"
        );
    }
    let id = t.jobs().iter().map(|j| j.job_id).max().unwrap();
    let args = "args=sh -c echo";
    assert!(
        read(&w.join("p.log")).starts_with(&format!("prolog_srun {id}.0 {user} {args}")),
        "{}",
        read(&w.join("p.log"))
    );
    assert!(
        read(&w.join("e.log")).starts_with(&format!("epilog_srun {id}.0 {user} {args}")),
        "{}",
        read(&w.join("e.log"))
    );
    let te = read(&w.join("te.log"));
    assert!(
        te.contains(&format!("user epilog {user} 0\n"))
            && te.contains(&format!("user epilog {user} 1\n")),
        "{te}"
    );
    let conf_log = read(&dir.join("taskepilog.log"));
    for task in 0..2 {
        assert!(
            conf_log.contains(&format!("epilog_task {user} {id} {task}\n")),
            "{conf_log}"
        );
    }

    // A batch script is a task: slurm.conf's scripts run around it.
    let b = t.sbatch_as_user(&["-o", "b.out", "--wrap", "echo batch conf=$FROM_CONF"]);
    assert_eq!(t.wait_done(b, 30).state, JobState::Completed);
    assert_eq!(
        read(&w.join("b.out")),
        format!("conf prolog for task 0 with-pid\nbatch conf={user}\n")
    );
    assert!(
        read(&dir.join("taskepilog.log")).contains(&format!("epilog_task {user} {b} 0\n")),
        "{}",
        read(&dir.join("taskepilog.log"))
    );

    // srun -E: the task keeps the batch job's SLURM_NTASKS.
    let e = t.sbatch(&[
        "-n2",
        "-o",
        "e.out",
        "--wrap",
        "srun -n1 -E printenv SLURM_NTASKS; srun -n1 printenv SLURM_NTASKS",
    ]);
    assert_eq!(t.wait_done(e, 30).state, JobState::Completed);
    let text = read(&w.join("e.out"));
    // (slurm.conf's TaskProlog prints its line before each task.)
    assert!(
        text.ends_with("with-pid\n2\nconf prolog for task 0 with-pid\n1\n"),
        "{text}"
    );

    // A failing task prolog ends the task with its status, said on stderr;
    // a failing srun prolog stops the step before any task runs.
    let out = t.run_as_user("srun", &["--task-prolog=fail.sh", "touch", "ran-1"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("slurmstepd: error: --task-prolog failed status=3"),
        "{}",
        stderr(&out)
    );
    assert!(!w.join("ran-1").exists());
    let out = t.run_as_user("srun", &["--prolog=./fail.sh", "touch", "ran-2"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("srun: error: srun prolog failed rc = 3. Aborting step."),
        "{}",
        stderr(&out)
    );
    assert!(!w.join("ran-2").exists());
    // A script that is not there is said, and srun goes on as Slurm's.
    let out = t.run_as_user("srun", &["--epilog=missing.sh", "true"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("srun: error: epilog 'missing.sh' not found in PATH or CWD"),
        "{}",
        stderr(&out)
    );
}
