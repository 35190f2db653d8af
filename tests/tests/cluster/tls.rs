//! TLS between the daemons (`TLSType=tls/rustls`): who may send what,
//! tried the way an attacker on the network or on a node would.

use slurm_common::auth::{Binding, Key};
use slurm_common::tls::{Role, Tls, TlsSettings};
use slurm_proto::acct::{AcctRequest, AcctResponse};
use slurm_proto::grpc::{CtldCall, NodeCall};
use slurm_proto::{RequestBody, Response, SlurmError};
use slurm_tests::*;
use std::path::Path;
use std::time::Duration;

/// The TLS configuration of `role` made from `dir`'s files (`ca` the CA's
/// certificate, `cert`/`key` the identity shown).
fn tls_with(dir: &Path, ca: &Path, cert: &Path, key: &Path, role: &Role) -> Tls {
    let p = format!(
        "ca_cert_file={},slurmd_cert_file={},slurmd_cert_key_file={},ctld_cert_file={},ctld_cert_key_file={}",
        ca.display(),
        cert.display(),
        key.display(),
        cert.display(),
        key.display()
    );
    TlsSettings::parse(Some("tls/rustls"), Some(&p), dir)
        .unwrap()
        .unwrap()
        .load(role)
        .unwrap()
}

fn is_denied(r: &Response, why: &str) -> bool {
    matches!(r, Response::Error(e) if e.error == SlurmError::AccessDenied
        && e.detail.as_deref().is_some_and(|d| d.contains(why)))
}

#[test]
fn certificates_decide_who_may_send_controller_and_node_requests() {
    let t = TestCluster::start(2, |s| s.accounting = true);
    let dir = &t.c.spec.dir;
    let key = Key::load(&dir.join("slurm.key")).unwrap();
    let ca = dir.join("ca_cert.pem");
    let node_id = |n: &str| {
        (
            dir.join(format!("tls/{n}_cert.pem")),
            dir.join(format!("tls/{n}_cert_key.pem")),
        )
    };
    let (n1c, n1k) = node_id("n1");
    let (n2c, n2k) = node_id("n2");
    let as_n1 = tls_with(dir, &ca, &n1c, &n1k, &Role::Slurmd { node: "n1".into() });
    let as_n2 = tls_with(dir, &ca, &n2c, &n2k, &Role::Slurmd { node: "n2".into() });
    let as_ctld = tls_with(
        dir,
        &ca,
        &dir.join("ctld_cert.pem"),
        &dir.join("ctld_cert_key.pem"),
        &Role::Ctld,
    );
    let anonymous = tls_with(dir, &ca, &n1c, &n1k, &Role::Command);
    // slurmdbd's certificate names the same host as the controller's.
    let as_dbd = tls_with(
        dir,
        &ca,
        &dir.join("dbd_cert.pem"),
        &dir.join("dbd_cert_key.pem"),
        &Role::Ctld,
    );
    // A certificate for "n1" from a CA of the attacker's own.
    let rogue_dir = tempfile::tempdir().unwrap();
    let rogue = slurm_local::pki::Ca::new("rogue CA").unwrap();
    slurm_local::pki::write_identity(&rogue, rogue_dir.path(), "n1", &["n1".into()]).unwrap();
    let as_rogue = tls_with(
        dir,
        &ca,
        &rogue_dir.path().join("n1_cert.pem"),
        &rogue_dir.path().join("n1_cert_key.pem"),
        &Role::Slurmd { node: "n1".into() },
    );

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ip = &t.c.spec.ip;
    let slurmd1 = format!("{ip}:{}", t.c.spec.slurmd_ports[0]);
    let ctld = format!("{ip}:{}", t.c.spec.ctld_port);
    let dbd = format!("{ip}:{}", t.c.spec.dbd_port);
    let now = slurm_common::auth::now();
    // A root-signed job request for n1, as the controller would send it,
    // over a channel of its own with the given TLS settings.
    let send_to =
        |tls: Option<&Tls>, addr: &str| -> Result<Response, slurm_common::net::NetError> {
            let call = NodeCall::TerminateJob(slurm_proto::grpc::pb::TerminateJobRequest {
                job_id: 999_999,
                kill_wait: 1,
                start_time: None,
                cause: 0,
            });
            rt.block_on(async {
                let ch = slurm_common::grpc::channel(tls.map(|t| t.client.clone()), addr, "n1")?;
                slurm_common::grpc::call_node(
                    &ch,
                    "n1",
                    call,
                    |b: &Binding| Ok(key.sign(0, 0, "test", now, b)),
                    Duration::from_secs(5),
                )
                .await
            })
        };
    let to_n1_with = |tls: Option<&Tls>| send_to(tls, &slurmd1);
    let to_n1 = |tls: &Tls| to_n1_with(Some(tls));

    // A certificate that does not chain to the CA: no connection at all.
    let r = to_n1(&as_rogue);
    assert!(r.is_err(), "a rogue certificate was served: {r:?}");
    // Clear text to a node daemon with TLS on: nothing is read.
    let r = to_n1_with(None);
    assert!(r.is_err(), "clear text was answered: {r:?}");
    // Root-signed, but from another node's certificate or from none: the
    // node daemon takes job requests only from the controller's.
    let why = "only from the controller's certificate";
    let r = to_n1(&as_n2).unwrap();
    assert!(is_denied(&r, why), "{r:?}");
    let r = to_n1(&anonymous).unwrap();
    assert!(is_denied(&r, why), "{r:?}");
    // Nor from another daemon on the controller's host: the node holds
    // the controller's certificate and takes exactly that one.
    let r = to_n1(&as_dbd).unwrap();
    assert!(is_denied(&r, why), "{r:?}");
    // The controller's own certificate is taken (the job is unknown there).
    let r = to_n1(&as_ctld).unwrap();
    assert!(!is_denied(&r, why), "{r:?}");
    // Launches sent together (LaunchBatches) are each checked as one:
    // root-signed from another node's certificate, or signed by a user
    // from the controller's, every one is refused and nothing runs.
    let launches = |tls: &Tls, uid: u32| {
        let bogus = |job_id| slurm_proto::BatchLaunch {
            job_id,
            uid: 1000,
            gid: 1000,
            script: "#!/bin/sh\ntouch /tmp/never-run\n".into(),
            work_dir: "/tmp".into(),
            ..Default::default()
        };
        rt.block_on(async {
            let ch = slurm_common::grpc::channel(Some(tls.client.clone()), &slurmd1, "n1")?;
            slurm_common::grpc::call_node_launches(
                &ch,
                "n1",
                vec![bogus(999_990), bogus(999_991)],
                |b: &Binding| Ok(key.sign(uid, uid, "test", now, b)),
                Duration::from_secs(5),
            )
            .await
        })
        .unwrap()
    };
    let r = launches(&as_n2, 0);
    assert!(r.len() == 2 && r.iter().all(|x| is_denied(x, why)), "{r:?}");
    let r = launches(&as_ctld, 1000);
    assert!(
        r.len() == 2 && r.iter().all(|x| is_denied(x, "may not send job requests")),
        "{r:?}"
    );
    assert!(!Path::new("/tmp/never-run").exists());
    // A reboot (the node daemon runs RebootProgram as root) likewise:
    // only root-signed, from the controller's certificate.
    let reboot = |tls: &Tls, uid: u32| {
        rt.block_on(async {
            let ch = slurm_common::grpc::channel(Some(tls.client.clone()), &slurmd1, "n1")?;
            slurm_common::grpc::call_node(
                &ch,
                "n1",
                NodeCall::Reboot(slurm_proto::grpc::pb::Empty {}),
                |b: &Binding| Ok(key.sign(uid, uid, "test", now, b)),
                Duration::from_secs(5),
            )
            .await
        })
        .unwrap()
    };
    let r = reboot(&as_n2, 0);
    assert!(is_denied(&r, why), "{r:?}");
    let r = reboot(&as_ctld, 1000);
    assert!(is_denied(&r, "may not send job requests"), "{r:?}");

    // The controller takes n1's reports only from n1's certificate, over
    // gRPC only.
    let report = |tls: &Tls, body: RequestBody| -> Response {
        let call = CtldCall::from_body(body).unwrap();
        rt.block_on(async {
            let ch = slurm_common::grpc::channel(Some(tls.client.clone()), &ctld, "localhost")?;
            slurm_common::grpc::call_ctld(
                &ch,
                "localhost",
                call,
                |b: &Binding| Ok(key.sign(0, 0, "test", slurm_common::auth::now(), b)),
                Duration::from_secs(5),
            )
            .await
        })
        .unwrap()
    };
    let heartbeat = || RequestBody::Heartbeat {
        node: "n1".into(),
        running_jobs: vec![],
    };
    let to_ctld = |tls: &Tls| report(tls, heartbeat());
    // A framed heartbeat (length + JSON, as earlier versions sent) over
    // n1's certificate: not answered, the connection closed.
    let framed: Vec<u8> = rt.block_on(async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let req = ctld_request(&key, 0, heartbeat(), slurm_common::auth::now());
        let body = serde_json::to_vec(&req).unwrap();
        let mut s = slurm_common::net::connect_async_with(Some(&as_n1.client), &ctld, "localhost")
            .await
            .unwrap();
        s.write_all(&(body.len() as u32).to_be_bytes())
            .await
            .unwrap();
        s.write_all(&body).await.unwrap();
        let mut back = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(15), s.read_to_end(&mut back)).await;
        assert!(read.is_ok(), "the connection is closed");
        back
    });
    assert!(framed.is_empty(), "no answer: {framed:?}");
    let why = "only from its certificate";
    assert!(is_denied(&to_ctld(&as_n2), why));
    assert!(is_denied(&to_ctld(&anonymous), why));
    let r = to_ctld(&as_n1);
    assert!(matches!(r, Response::Ok), "{r:?}");
    // From n1's certificate but signed by an ordinary user: refused.
    let r = rt
        .block_on(async {
            let ch = slurm_common::grpc::channel(Some(as_n1.client.clone()), &ctld, "localhost")?;
            slurm_common::grpc::call_ctld(
                &ch,
                "localhost",
                CtldCall::from_body(heartbeat()).unwrap(),
                |b: &Binding| Ok(key.sign(1000, 1000, "test", slurm_common::auth::now(), b)),
                Duration::from_secs(5),
            )
            .await
        })
        .unwrap();
    assert!(
        matches!(r, Response::Error(_)),
        "a user's heartbeat was taken: {r:?}"
    );
    // Events sent together (NodeReports) are checked as single ones: the
    // batch's node must be the certificate's, every event must name it,
    // and a user's signature makes nothing happen.
    let batch_call = |tls: &Tls, batch: slurm_proto::grpc::pb::NodeReportBatch, uid: u32| {
        rt.block_on(async {
            let ch = slurm_common::grpc::channel(Some(tls.client.clone()), &ctld, "localhost")?;
            slurm_common::grpc::call_ctld_reports(
                &ch,
                "localhost",
                batch,
                |b: &Binding| Ok(key.sign(uid, uid, "test", slurm_common::auth::now(), b)),
                Duration::from_secs(5),
            )
            .await
        })
        .unwrap()
    };
    let cleaned = |job_id, node: &str| RequestBody::JobCleaned {
        job_id,
        node: node.into(),
        job_start: None,
    };
    let batch = |node: &str| {
        slurm_proto::grpc::node_report_batch(
            node,
            vec![cleaned(999_999, node), cleaned(999_998, node)],
        )
        .unwrap()
    };
    let r = batch_call(&as_n2, batch("n1"), 0);
    assert!(r.len() == 1 && is_denied(&r[0], why), "{r:?}");
    let r = batch_call(&as_n1, batch("n1"), 1000);
    assert!(
        r.len() == 2
            && r.iter()
                .all(|x| matches!(x, Response::Error(e) if e.error == SlurmError::AccessDenied)),
        "{r:?}"
    );
    let r = batch_call(&as_n1, batch("n1"), 0);
    assert!(
        r.len() == 2 && r.iter().all(|x| matches!(x, Response::Ok)),
        "{r:?}"
    );
    // An event of n1 slipped into n2's batch: the batch is refused whole.
    let mut forged = batch("n2");
    forged.reports.extend(batch("n1").reports);
    let r = batch_call(&as_n2, forged, 0);
    assert!(
        r.len() == 1 && matches!(&r[0], Response::Error(e) if e.error == SlurmError::ProtocolError),
        "{r:?}"
    );
    // A node speaks only for the jobs it runs: n2 cannot end an
    // allocation (no batch script anywhere) running on n1.
    let mut holder = t
        .cmd_as(0, 0, "salloc")
        .args(["-J", "held-alloc", "-w", "n1", "sleep", "30"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let job = loop {
        if let Some(j) = t
            .jobs()
            .into_iter()
            .find(|j| j.name == "held-alloc" && j.state == slurm_proto::JobState::Running)
        {
            break j.job_id;
        }
        assert!(std::time::Instant::now() < deadline, "allocation never ran");
        std::thread::sleep(Duration::from_millis(100));
    };
    let fake_end = RequestBody::BatchComplete {
        job_id: job,
        node: "n2".into(),
        status: 0,
        oom: false,
        usage: None,
        job_start: None,
    };
    // Refused or not, the answer comes after the writer acted on it.
    let _ = report(&as_n2, fake_end);
    let j = t.jobs().into_iter().find(|j| j.job_id == job).unwrap();
    assert_eq!(j.state, slurm_proto::JobState::Running);
    assert!(t.run("scancel", &[&job.to_string()]).status.success());
    let _ = holder.kill();
    let _ = holder.wait();
    // The node is still up: nothing the refused reports said was taken.
    let nodes = t.nodes();
    assert!(nodes
        .iter()
        .all(|n| n.base_state != slurm_proto::NodeBaseState::Down));

    // slurmdbd takes accounting records only from a daemon's certificate.
    let records = || {
        dbd_request(
            &key,
            0,
            AcctRequest::Records(vec![]),
            slurm_common::auth::now(),
        )
    };
    let to_dbd = |tls: &Tls| -> AcctResponse {
        rt.block_on(async {
            let ch = slurm_common::grpc::channel(Some(tls.client.clone()), &dbd, ip).unwrap();
            let req = records();
            let call = slurm_proto::grpc::dbd::DbdCall::from_body(req.body);
            slurm_common::grpc::call_dbd(&ch, ip, call, req.cred, Duration::from_secs(5)).await
        })
        .unwrap()
    };
    // Records: not from a command, nor from a node daemon.
    for who in [&anonymous, &as_n1] {
        let r = to_dbd(who);
        assert!(
            matches!(&r, AcctResponse::Error(e) if e.message.contains("controller's certificate")),
            "{r:?}"
        );
    }
    let r = to_dbd(&as_ctld);
    assert!(!matches!(r, AcctResponse::Error(_)), "{r:?}");

    // A server whose certificate names another host is not believed: n2's
    // daemon answering for n1.
    let slurmd2 = format!("{ip}:{}", t.c.spec.slurmd_ports[1]);
    let r = send_to(Some(&as_ctld), &slurmd2);
    assert!(
        matches!(&r, Err(e) if e.to_string().contains("(n1)") && e.to_string().contains("not valid for name")),
        "{r:?}"
    );
}
