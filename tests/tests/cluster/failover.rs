//! A backup controller (`SlurmctldHost` twice, one StateSaveLocation):
//! takeover after `kill -9` of the primary under a stream of submissions,
//! the primary taking control back, `scontrol takeover` and `ping`, and who
//! may ask a controller to give control up.

use super::accounting::sacct_until;
use super::write_script;
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

    // Jobs running when the primary dies.
    let script = write_script(
        &t,
        "steady.sh",
        "#!/bin/sh\necho start\nsleep 8\necho end\n",
    );
    let running: Vec<u32> = (0..4)
        .map(|k| t.sbatch(&["-o", &format!("steady-{k}.out"), &script]))
        .collect();
    for id in &running {
        t.wait_job(*id, 20, "running", |j| j.state == JobState::Running);
    }

    // A stream of submissions across the kill.
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
        wait_for("submissions before the kill", &t, 30, || {
            acked.lock().unwrap().len() >= 20
        });
        t.c.kill_ctld(libc::SIGKILL);
        let t0 = Instant::now();
        // Commands find the backup once it is in control.
        wait_for("the backup in control", &t, 30, || {
            matches!(t.c.call(RequestBody::GetJobs), Ok(Response::Jobs { .. }))
        });
        served_after = t0.elapsed();
        let n = acked.lock().unwrap().len();
        wait_for("submissions to the backup", &t, 30, || {
            acked.lock().unwrap().len() >= n + 20
        });
        stop.store(true, Ordering::Relaxed);
    });
    eprintln!(
        "FIGURE | kill -9 of the primary (SlurmctldTimeout=3) | backup serving after {} ms; {} submissions acknowledged, {} refused",
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
    assert!(lost.is_empty(), "acknowledged and lost: {lost:?}");
    let mut ids = acked.clone();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), acked.len(), "an id was acknowledged twice");
    let out = t.run("scontrol", &["ping"]);
    assert_eq!(
        stdout(&out),
        "Slurmctld(primary) at localhost is DOWN\nSlurmctld(backup) at ctl2 is UP\n"
    );
    assert_eq!(out.status.code(), Some(1));

    // The running jobs end well under the backup, and are accounted once.
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
        &t,
        &["-X", "-n", "-P", "-j", &list, "--format=JobID,State"],
        30,
        |s| s.lines().filter(|l| l.ends_with("|COMPLETED")).count() == running.len(),
    );
    assert_eq!(text.lines().count(), running.len(), "{text}");

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
