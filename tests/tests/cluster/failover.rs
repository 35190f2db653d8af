//! A backup controller (`SlurmctldHost` twice, one StateSaveLocation):
//! takeover after `kill -9` of the primary under a stream of submissions,
//! the primary taking control back, `scontrol takeover` and `ping`, and who
//! may ask a controller to give control up.

use super::accounting::sacct_until;
use super::{write_script, Killed};
use slurm_proto::{JobState, RequestBody, Response, SlurmError};
use slurm_tests::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const BACKUP_ADDR: &str = "127.0.0.2";

fn with_backup(timeout: u32, accounting: bool) -> TestCluster {
    TestCluster::start(2, |s| {
        s.backup = Some(BACKUP_ADDR.into());
        s.slurmctld_timeout = timeout;
        s.accounting = accounting;
    })
}

/// Whether controller `i` answers, and in standby or in control.
fn pong(t: &TestCluster, i: usize) -> Option<bool> {
    match t.c.call_at(i, RequestBody::Ping) {
        Ok(Response::Pong { standby, .. }) => Some(standby),
        _ => None,
    }
}

fn wait_for(what: &str, t: &TestCluster, secs: u64, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        assert!(Instant::now() < deadline, "{what}\n{}", t.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Four 8-second jobs, running when the primary dies.
fn steady_jobs(t: &TestCluster) -> Vec<u32> {
    let script = write_script(t, "steady.sh", "#!/bin/sh\necho start\nsleep 8\necho end\n");
    let running: Vec<u32> = (0..4)
        .map(|k| t.sbatch(&["-o", &format!("steady-{k}.out"), &script]))
        .collect();
    for id in &running {
        t.wait_job(*id, 20, "running", |j| j.state == JobState::Running);
    }
    running
}

/// `kill -9` of the primary under a stream of submissions (two threads of
/// `sbatch`): another controller serves within SlurmctldTimeout=3 and 8
/// s; no acknowledged job is lost or acknowledged twice. The
/// acknowledged ids. `what` names the case in its FIGURE line.
fn kill_primary_under_submissions(t: &mut TestCluster, what: &str) -> Vec<u32> {
    let acked = Mutex::new(Vec::<u32>::new());
    let refused = Mutex::new(Vec::<String>::new());
    let stop = AtomicBool::new(false);
    let mut served_after = Duration::ZERO;
    std::thread::scope(|sc| {
        for _ in 0..2 {
            let sbatch = t.cmd_factory("sbatch", &["-H", "--parsable", "--wrap", "true"]);
            let (acked, refused, stop) = (&acked, &refused, &stop);
            sc.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let out = sbatch.make().output().unwrap();
                    match stdout(&out).trim().parse::<u32>() {
                        Ok(id) if out.status.success() => acked.lock().unwrap().push(id),
                        _ => refused.lock().unwrap().push(stderr(&out)),
                    }
                }
            });
        }
        wait_for("submissions before the kill", t, 30, || {
            acked.lock().unwrap().len() >= 20
        });
        t.c.kill_ctld(libc::SIGKILL);
        let t0 = Instant::now();
        // Commands find another controller once it is in control.
        wait_for("another controller in control", t, 30, || {
            matches!(t.c.call(RequestBody::GetJobs), Ok(Response::Jobs { .. }))
        });
        served_after = t0.elapsed();
        let n = acked.lock().unwrap().len();
        wait_for("submissions to the new controller", t, 30, || {
            acked.lock().unwrap().len() >= n + 20
        });
        stop.store(true, Ordering::Relaxed);
    });
    eprintln!(
        "FIGURE | kill -9 of the primary, {what} (SlurmctldTimeout=3) | another controller serving after {} ms; {} submissions acknowledged, {} refused",
        served_after.as_millis(),
        acked.lock().unwrap().len(),
        refused.lock().unwrap().len()
    );
    for r in refused.lock().unwrap().iter() {
        eprintln!("refused during the takeover: {}", r.trim());
    }
    assert!(
        served_after < Duration::from_secs(3 + 8),
        "served after {served_after:?}\n{}",
        t.logs()
    );
    let acked = acked.into_inner().unwrap();
    let have: std::collections::HashSet<u32> = t.jobs().iter().map(|j| j.job_id).collect();
    let lost: Vec<&u32> = acked.iter().filter(|id| !have.contains(id)).collect();
    assert!(
        lost.is_empty(),
        "acknowledged and lost: {lost:?}\n{}",
        t.logs()
    );
    let mut ids = acked.clone();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), acked.len(), "an id was acknowledged twice");
    acked
}

/// The jobs of [`steady_jobs`] end well, and are accounted once.
fn steady_jobs_end_accounted_once(t: &TestCluster, running: &[u32]) {
    for (k, id) in running.iter().enumerate() {
        let j = t.wait_done(*id, 60);
        assert_eq!(j.state, JobState::Completed, "{j:?}\n{}", t.logs());
        let out = std::fs::read_to_string(t.work.join(format!("steady-{k}.out"))).unwrap();
        assert_eq!(out, "start\nend\n");
    }
    let list = running
        .iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let text = sacct_until(
        t,
        &["-X", "-n", "-P", "-j", &list, "--format=JobID,State"],
        30,
        |s| s.lines().filter(|l| l.ends_with("|COMPLETED")).count() == running.len(),
    );
    assert_eq!(text.lines().count(), running.len(), "{text}");
}

#[test]
fn the_backup_takes_over_from_a_killed_primary_and_gives_control_back() {
    let mut t = with_backup(3, true);
    // Both answer; the backup waits in standby and sends every other
    // caller on.
    let out = t.run("scontrol", &["ping"]);
    assert_eq!(
        stdout(&out),
        "Slurmctld(primary) at localhost is UP\nSlurmctld(backup) at ctl2 is UP\n"
    );
    assert!(out.status.success());
    assert_eq!(pong(&t, 1), Some(true));
    assert!(matches!(
        t.c.call_at(1, RequestBody::GetJobs),
        Ok(Response::Error(ref e)) if e.error == SlurmError::InStandby
    ));

    // Jobs running when the primary dies, and a stream of submissions
    // across the kill.
    let running = steady_jobs(&t);
    let acked = kill_primary_under_submissions(&mut t, "shared directory");
    let out = t.run("scontrol", &["ping"]);
    assert_eq!(
        stdout(&out),
        "Slurmctld(primary) at localhost is DOWN\nSlurmctld(backup) at ctl2 is UP\n"
    );
    assert_eq!(out.status.code(), Some(1));

    // The running jobs end well under the backup, and are accounted once.
    steady_jobs_end_accounted_once(&t, &running);

    // The primary comes back and takes control; the backup returns to
    // standby, with every job and node as they were.
    t.c.start_ctld()
        .unwrap_or_else(|e| panic!("primary back: {e}\n{}", t.logs()));
    wait_for("the backup back in standby", &t, 30, || {
        pong(&t, 1) == Some(true)
    });
    let have: std::collections::HashSet<u32> = t.jobs().iter().map(|j| j.job_id).collect();
    assert!(acked.iter().all(|id| have.contains(id)));
    t.c.wait_nodes_up(Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{e}\n{}", t.logs()));
    let id = t.sbatch(&["-o", "after.out", "--wrap", "echo back"]);
    assert_eq!(t.wait_done(id, 30).state, JobState::Completed);
    let out = t.run("scontrol", &["ping"]);
    assert_eq!(
        stdout(&out),
        "Slurmctld(primary) at localhost is UP\nSlurmctld(backup) at ctl2 is UP\n"
    );
}

#[test]
fn scontrol_takeover_moves_control_and_only_controllers_may_ask_for_it() {
    let mut t = with_backup(120, false);
    let now = slurm_common::auth::now();
    let key = slurm_common::auth::Key::load(&t.c.spec.dir.join("slurm.key")).unwrap();
    let refused = |r: Response, want: SlurmError| {
        assert!(
            matches!(r, Response::Error(ref e) if e.error == want),
            "{r:?}"
        )
    };
    // An ordinary user may neither have the backup take over nor ask the
    // primary to give control up; a peer without the key gets nowhere;
    // root's own request is refused over a connection without a
    // controller's certificate.
    let out = t
        .cmd_as(TEST_UID, TEST_GID, "scontrol")
        .arg("takeover")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "slurm_takeover error: Access/permission denied\n"
    );
    let r = grpc_call(&t, RequestBody::RelinquishControl, |b| {
        key.sign(TEST_UID, TEST_GID, "x", now, b)
    });
    refused(r, SlurmError::AccessDenied);
    let forged = slurm_common::auth::Key::from_bytes(b"not the cluster key at all");
    let r = grpc_call(&t, RequestBody::RelinquishControl, |b| {
        forged.sign(0, 0, "x", now, b)
    });
    refused(r, SlurmError::InvalidCredential);
    let r = grpc_call(&t, RequestBody::RelinquishControl, |b| {
        key.sign(0, 0, "x", now, b)
    });
    refused(r, SlurmError::AccessDenied);
    // Nor may a user make a backup in standby start again.
    let backup = format!("{BACKUP_ADDR}:{}", t.c.spec.ctld_port);
    let r = grpc_call_to(&t, &backup, "ctl2", RequestBody::Reconfigure, |b| {
        key.sign(TEST_UID, TEST_GID, "x", now, b)
    });
    refused(r, SlurmError::AccessDenied);
    std::thread::sleep(Duration::from_secs(1));
    let backup_log = t.c.spec.dir.join("log/slurmctld.ctl2.log");
    assert!(!std::fs::read_to_string(&backup_log)
        .unwrap_or_default()
        .contains("reconfigure: starting again"));
    assert_eq!(pong(&t, 0), Some(false), "the primary is still in control");
    assert_eq!(pong(&t, 1), Some(true), "the backup is still in standby");
    let out = t.run("scontrol", &["takeover", "2"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "Invalid backup controller index: 2 (backups are 1 to 1)\n"
    );

    // A reconfigure reaches the backup too: it starts again with the file.
    let mut conf = std::fs::read_to_string(t.c.spec.conf_path()).unwrap();
    conf.push_str("MinJobAge=299\n");
    std::fs::write(t.c.spec.conf_path(), conf).unwrap();
    let out = t.run("scontrol", &["reconfigure"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_for("the backup read its configuration again", &t, 20, || {
        std::fs::read_to_string(&backup_log)
            .unwrap_or_default()
            .contains("reconfigure: starting again")
    });
    wait_for("the backup back in standby", &t, 20, || {
        pong(&t, 1) == Some(true)
    });

    // Root: the backup takes control, the primary stops.
    let id = t.sbatch(&["-H", "--wrap", "true"]);
    let out = t.run("scontrol", &["takeover"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_for("the backup in control", &t, 30, || {
        pong(&t, 1) == Some(false)
    });
    let primary = t.c.ctld.as_mut().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = primary.try_wait().unwrap() {
            assert!(status.success(), "the primary stopped with {status}");
            break;
        }
        assert!(Instant::now() < deadline, "the primary did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
    t.c.ctld = None;
    // Everything the primary held, under the backup, which runs with the
    // configuration in force.
    assert_eq!(t.job(id).map(|j| j.state), Some(JobState::Pending));
    let config = stdout(&t.run("scontrol", &["show", "config"]));
    assert!(
        config
            .lines()
            .any(|l| l.starts_with("MinJobAge ") && l.ends_with("= 299")),
        "{config}"
    );
    assert!(
        config.contains(
            "SlurmctldHost[0]        = localhost(127.0.0.1)\nSlurmctldHost[1]        = ctl2(127.0.0.2)\n"
        ),
        "{config}"
    );
    t.c.wait_nodes_up(Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{e}\n{}", t.logs()));
    let out = t.run("scontrol", &["release", &id.to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(t.wait_done(id, 30).state, JobState::Completed);
}

/// The README's production setup on loopback, as it says it: the binaries
/// where `scripts/install` puts them, TLS between every process,
/// accounting, a backup controller, and a configless node daemon whose
/// directory holds only the cluster key, the CA and its own certificate
/// (it fetches the configuration over TLS from the controllers in turn). A
/// user's job runs on that node across a `kill -9` of the primary, ends
/// well and is accounted once; one the primary started there but could not
/// launch before it died runs once under the backup.
#[test]
fn the_readmes_production_setup_runs_a_job_across_a_failover() {
    use std::os::unix::fs::PermissionsExt;
    // Installed as the README says, into a staging root.
    let root = tempfile::tempdir().unwrap();
    std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = std::process::Command::new("bash")
        .arg(src.join("scripts/install"))
        .env("BIN", slurm_tests::bin_dir())
        .env("DESTDIR", root.path())
        .env("PREFIX", "/usr")
        .env("UNITDIR", "/lib/systemd/system")
        .env("SYSCONFDIR", "/etc/slurm")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    // The kit starts daemons and commands from one directory: the
    // installed files, daemons and commands side by side.
    let bin = root.path().join("installed");
    std::fs::create_dir(&bin).unwrap();
    for d in ["usr/sbin", "usr/bin"] {
        for e in std::fs::read_dir(root.path().join(d)).unwrap() {
            let e = e.unwrap();
            std::os::unix::fs::symlink(e.path(), bin.join(e.file_name())).unwrap();
        }
    }
    let mut t = TestCluster::start(2, |s| {
        s.bin_dir = bin.clone();
        s.backup = Some(BACKUP_ADDR.into());
        s.slurmctld_timeout = 3;
        s.accounting = true;
        s.extra_conf = "SlurmctldParameters=enable_configless\n".into();
    });
    assert!(t.c.spec.tls, "the production setup runs with TLS");

    // n2 comes back configless: its directory holds the key, the CA and
    // its certificate, nothing else.
    let before = t.wait_node("n2", 20, "up", |n| n.slurmd_start_time.is_some());
    t.c.kill_slurmd(1, libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(1100));
    let node = tempfile::tempdir().unwrap();
    let cluster = t.c.spec.dir.clone();
    std::fs::create_dir(node.path().join("tls")).unwrap();
    for f in [
        "slurm.key",
        "ca_cert.pem",
        "tls/n2_cert.pem",
        "tls/n2_cert_key.pem",
    ] {
        std::fs::copy(cluster.join(f), node.path().join(f)).unwrap();
    }
    for f in ["slurm.key", "tls/n2_cert_key.pem"] {
        std::fs::set_permissions(node.path().join(f), std::fs::Permissions::from_mode(0o600))
            .unwrap();
    }
    let servers = format!(
        "{ip}:{p},{BACKUP_ADDR}:{p}",
        ip = t.c.spec.ip,
        p = t.c.spec.ctld_port
    );
    let log = std::fs::File::create(node.path().join("slurmd.log")).unwrap();
    let n2 = Killed(
        std::process::Command::new(bin.join("slurmd"))
            .args(["-D", "-N", "n2", "-f"])
            .arg(node.path().join("slurm.conf"))
            .args(["--conf-server", &servers, "--ca-cert-file"])
            .arg(node.path().join("ca_cert.pem"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let node_log = || std::fs::read_to_string(node.path().join("slurmd.log")).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let n = t.nodes().into_iter().find(|n| n.name == "n2");
        if n.is_some_and(|n| {
            n.slurmd_start_time != before.slurmd_start_time
                && n.base_state == slurm_proto::NodeBaseState::Idle
                && !n.flags.not_responding
        }) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the configless node never registered\n{}\n{}",
            node_log(),
            t.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(node.path().join("conf-cache/slurm.conf").exists());

    // A user's job on that node, running when the primary dies.
    let script = write_script(&t, "prod.sh", "#!/bin/sh\necho start\nsleep 4\necho end\n");
    let id = t.sbatch_as_user(&["-w", "n2", "-o", "prod.out", &script]);
    let started = Instant::now() + Duration::from_secs(20);
    while std::fs::read_to_string(t.work.join("prod.out")).unwrap_or_default() != "start\n" {
        assert!(
            Instant::now() < started,
            "the job never started\n{}",
            node_log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // And one the primary starts but cannot launch before it dies (the
    // node daemon is frozen meanwhile): the backup finds it missing from
    // its node and sends it back to the queue, and it runs.
    let pid = n2.0.id() as i32;
    // SAFETY: signalling the node daemon this test started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let lost = t.sbatch_as_user(&["-w", "n2", "-o", "lost.out", &script]);
    t.wait_job(lost, 20, "started by the primary", |j| {
        j.state == JobState::Running
    });
    t.c.kill_ctld(libc::SIGKILL);
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    wait_for("the backup in control", &t, 30, || {
        matches!(t.c.call(RequestBody::GetJobs), Ok(Response::Jobs { .. }))
    });
    let out = t.run("scontrol", &["ping"]);
    assert_eq!(
        stdout(&out),
        "Slurmctld(primary) at localhost is DOWN\nSlurmctld(backup) at ctl2 is UP\n"
    );
    let done = |id: u32| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match t.job(id) {
                Some(j) if j.state.is_finished() && !j.completing => return j,
                j => assert!(
                    Instant::now() < deadline,
                    "job {id} never ended: {j:?}\n{}\n{}",
                    node_log(),
                    t.logs()
                ),
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let j = done(id);
    assert_eq!(j.state, JobState::Completed, "{j:?}\n{}", t.logs());
    assert_eq!(
        std::fs::read_to_string(t.work.join("prod.out")).unwrap(),
        "start\nend\n"
    );
    let l = done(lost);
    assert_eq!(l.state, JobState::Completed, "{l:?}\n{}", t.logs());
    assert_eq!(l.restarts, 1, "sent back to the queue once");
    assert_eq!(
        std::fs::read_to_string(t.work.join("lost.out")).unwrap(),
        "start\nend\n"
    );
    let text = sacct_until(
        &t,
        &[
            "-X",
            "-n",
            "-P",
            "-j",
            &id.to_string(),
            "--format=JobID,State",
        ],
        30,
        |s| s.lines().any(|l| l.ends_with("|COMPLETED")),
    );
    assert_eq!(text.trim(), format!("{id}|COMPLETED"));
}

/// `scontrol shutdown` stops every controller, the backup in standby too
/// (else it would take over once the primary is gone), and the node
/// daemons; a user's stops none.
#[test]
fn scontrol_shutdown_stops_the_backup_too() {
    let mut t = with_backup(120, false);
    wait_for("the backup in standby", &t, 20, || {
        pong(&t, 1) == Some(true)
    });
    let out = t
        .cmd_as(TEST_UID, TEST_GID, "scontrol")
        .arg("shutdown")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(pong(&t, 1), Some(true), "the backup still serves");
    let out = t.run("scontrol", &["shutdown"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        t.c.wait_backup_exit(Duration::from_secs(10)).is_some(),
        "backup stops"
    );
    assert!(
        t.c.wait_ctld_exit(Duration::from_secs(10)).is_some(),
        "primary stops"
    );
    for i in 0..2 {
        assert!(
            t.c.wait_slurmd_exit(i, Duration::from_secs(10)).is_some(),
            "n{} stops",
            i + 1
        );
    }
}

const THIRD_ADDR: &str = "127.0.0.3";

/// Three controllers agreeing on the state with Raft, each in a
/// StateSaveLocation of its own; snapshots past 300 kB of log, so a
/// controller that was away catches up from one.
fn replicated(timeout: u32) -> TestCluster {
    TestCluster::start(2, |s| {
        s.backup = Some(BACKUP_ADDR.into());
        s.more_backups = vec![THIRD_ADDR.into()];
        s.replicated = true;
        s.slurmctld_timeout = timeout;
        s.accounting = true;
        s.extra_conf = "SlurmctldParameters=replicate_state,journal_compact_bytes=300000\n".into();
    })
}

/// Whether `dir` holds a file named `name`.
fn dir_has(dir: &std::path::Path, name: &str) -> bool {
    dir.join(name).exists()
}

/// Which controller is in control (answers a ping as not in standby).
fn in_control(t: &TestCluster) -> Option<usize> {
    (0..3).find(|&i| pong(t, i) == Some(false))
}

/// `SlurmctldParameters=replicate_state`: no directory is shared. A
/// `kill -9` of the primary under a stream of submissions while jobs run:
/// another controller serves within SlurmctldTimeout and a few seconds,
/// no acknowledged job is lost, running jobs finish and are accounted
/// once; the primary, started again, catches up and takes control back.
#[test]
fn replicated_state_survives_kill_9_of_the_primary_without_a_shared_directory() {
    let mut t = replicated(3);
    let out = t.run("scontrol", &["ping"]);
    assert_eq!(
        stdout(&out),
        "Slurmctld(primary) at localhost is UP\nSlurmctld(backup1) at ctl2 is UP\nSlurmctld(backup2) at ctl3 is UP\n"
    );
    assert_eq!(in_control(&t), Some(0), "{}", t.logs());
    let dir = t.c.spec.dir.clone();
    for own in ["state", "state.ctl2", "state.ctl3"] {
        assert!(
            dir.join(own).join("raft/log").exists(),
            "{own}\n{}",
            t.logs()
        );
        // Nothing is written where a shared journal would be.
        assert!(!dir.join(own).join("journal").exists(), "{own}");
    }

    let running = steady_jobs(&t);
    let acked = kill_primary_under_submissions(&mut t, "replicated state");
    wait_for("a backup in control", &t, 30, || {
        matches!(in_control(&t), Some(1 | 2))
    });

    steady_jobs_end_accounted_once(&t, &running);

    // While the primary is away: an array of 1000 (its records larger
    // than one message: a batch sent in parts) and enough besides for the
    // log to be cut after a snapshot.
    let out = t.run(
        "sbatch",
        &["-H", "--parsable", "--array=0-999", "--wrap", "true"],
    );
    assert!(out.status.success(), "{}\n{}", stderr(&out), t.logs());
    let array: u32 = stdout(&out).trim().parse().unwrap();
    let cluster_dir = t.c.spec.dir.clone();
    let snapshots = |dir: &str| dir_has(&cluster_dir.join(dir).join("raft"), "snapshot");
    wait_for("a snapshot in the controller in control", &t, 30, || {
        snapshots("state.ctl2") || snapshots("state.ctl3")
    });
    // The primary comes back with its own, older copy: it catches up from
    // the others (from a snapshot) and takes control back.
    t.c.start_ctld()
        .unwrap_or_else(|e| panic!("primary back: {e}\n{}", t.logs()));
    wait_for("the others in standby", &t, 30, || {
        pong(&t, 1) == Some(true) && pong(&t, 2) == Some(true)
    });
    let have: std::collections::HashSet<u32> = t.jobs().iter().map(|j| j.job_id).collect();
    let lost: Vec<&u32> = acked.iter().filter(|id| !have.contains(id)).collect();
    assert!(
        lost.is_empty(),
        "lost on the way back: {lost:?}\n{}",
        t.logs()
    );
    let tasks = t
        .jobs()
        .iter()
        .filter(|j| j.array.as_ref().is_some_and(|a| a.job_id == array))
        .count();
    assert_eq!(tasks, 1000, "{}", t.logs());
    let primary_log = std::fs::read_to_string(t.c.spec.dir.join("log/slurmctld.log")).unwrap();
    assert!(
        primary_log.contains("caught up from a snapshot of the controller in control"),
        "{primary_log}"
    );
    assert!(snapshots("state"));
    t.c.wait_nodes_up(Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{e}\n{}", t.logs()));
    let id = t.sbatch(&["-o", "after.out", "--wrap", "echo back"]);
    assert_eq!(t.wait_done(id, 30).state, JobState::Completed);

    // `scontrol takeover`: the first backup is chosen; the primary gives
    // control up and stops (as Slurm's); two of three carry on.
    let out = t.run("scontrol", &["takeover"]);
    assert!(out.status.success(), "{}", stderr(&out));
    wait_for("the first backup in control", &t, 30, || {
        pong(&t, 1) == Some(false)
    });
    assert!(
        t.c.wait_ctld_exit(Duration::from_secs(20)).is_some(),
        "the primary did not stop\n{}",
        t.logs()
    );
    let have: std::collections::HashSet<u32> = t.jobs().iter().map(|j| j.job_id).collect();
    assert!(acked.iter().all(|id| have.contains(id)));
    let id = t.sbatch(&["--wrap", "true"]);
    assert_eq!(t.wait_done(id, 30).state, JobState::Completed);
}

/// Raft messages are taken only from another controller: an ordinary
/// user, a peer without the key and root over a connection without a
/// controller's certificate are refused, and nothing changes; a garbled
/// message is an error, not a crash.
#[test]
fn only_controllers_may_send_raft_messages() {
    let t = replicated(3);
    let now = slurm_common::auth::now();
    let key = slurm_common::auth::Key::load(&t.c.spec.dir.join("slurm.key")).unwrap();
    let forged = slurm_common::auth::Key::from_bytes(b"not the cluster key at all");
    // A vote for controller 2 at a far later term: were it taken, the
    // primary would step down.
    let vote =
        br#"{"vote":{"leader_id":{"term":1000,"node_id":2},"committed":false},"last_log_id":null}"#;
    let send_as =
        |role: slurm_common::tls::Role,
         body: &[u8],
         sign: &dyn Fn(&slurm_common::auth::Binding) -> slurm_proto::Credential| {
            use slurm_common::tls::TlsSettings;
            let dir = &t.c.spec.dir;
            let ca = format!("ca_cert_file={}", dir.join("ca_cert.pem").display());
            let tls = TlsSettings::parse(Some("tls/rustls"), Some(&ca), dir)
                .unwrap()
                .unwrap()
                .load(&role)
                .unwrap();
            let addr = t.command_tls().1;
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let ch = slurm_common::grpc::channel(Some(tls.client.clone()), &addr, "localhost")
                    .unwrap();
                let msg = slurm_proto::grpc::pb::RaftMessage {
                    kind: "vote".into(),
                    body: body.to_vec(),
                };
                slurm_common::grpc::call_replicate(
                    &ch,
                    "localhost",
                    msg,
                    |b| Ok(sign(b)),
                    Duration::from_secs(10),
                )
                .await
            })
        };
    let send =
        |body: &[u8], sign: &dyn Fn(&slurm_common::auth::Binding) -> slurm_proto::Credential| {
            send_as(slurm_common::tls::Role::Command, body, sign)
        };
    let e = send(vote, &|b| key.sign(TEST_UID, TEST_GID, "x", now, b)).unwrap_err();
    assert!(
        e.to_string().contains("only from another controller"),
        "{e}"
    );
    let e = send(vote, &|b| forged.sign(0, 0, "x", now, b)).unwrap_err();
    assert!(
        !e.to_string().contains("only from another controller"),
        "{e}"
    );
    // Root's own credential, but not a controller's certificate.
    let e = send(vote, &|b| key.sign(0, 0, "x", now, b)).unwrap_err();
    assert!(
        e.to_string().contains("only from another controller"),
        "{e}"
    );
    // Over a controller's certificate with root's credential: a garbled
    // message is answered with an error, and the controller lives on.
    let r = send_as(slurm_common::tls::Role::Ctld, b"{\"vote\":", &|b| {
        key.sign(0, 0, "x", now, b)
    })
    .unwrap();
    assert_eq!(r.kind, "error");
    assert!(
        String::from_utf8_lossy(&r.body).contains("bad Raft message"),
        "{r:?}"
    );
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(in_control(&t), Some(0), "{}", t.logs());
    assert_eq!(pong(&t, 1), Some(true));
    assert_eq!(pong(&t, 2), Some(true));
    // A script small enough for max_script_size but six times larger as
    // JSON (control characters) would never fit in a message between the
    // controllers: refused at submission, rather than stalling them.
    let submit = |name: &str, filler: &str| {
        let text = format!("#!/bin/sh\n# {}\ntrue\n", filler.repeat(1 << 20));
        let path = write_script(&t, name, &text);
        t.cmd_as(TEST_UID, TEST_GID, "sbatch")
            .args(["-H", "--parsable"])
            .arg(&path)
            .output()
            .unwrap()
    };
    let out = submit("escapes.sh", "\u{1}");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "sbatch: error: Batch job submission failed: Invalid request\n"
    );
    assert!(t.jobs().is_empty(), "{:?}", t.jobs());
    // The same size in plain characters is taken.
    let out = submit("plain.sh", "x");
    assert!(out.status.success(), "{}", stderr(&out));
    let out = t.run("sbatch", &["--parsable", "--wrap", "true"]);
    assert!(out.status.success(), "{}\n{}", stderr(&out), t.logs());
    let id: u32 = stdout(&out).trim().parse().unwrap();
    assert_eq!(t.wait_done(id, 30).state, JobState::Completed);
    let log = std::fs::read_to_string(t.c.spec.dir.join("log/slurmctld.log")).unwrap();
    assert!(log.contains("refused a Raft message"), "{log}");
}
