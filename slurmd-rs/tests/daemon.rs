//! The daemon end to end against a fake controller: registration,
//! heartbeats, credential checks, a batch job as `nobody`, termination,
//! jobs in cgroups (confined, killed whole, OOM noticed), and the binary's
//! command line.

use slurm_common::auth::{self, Key};
use slurm_common::grpc;
use slurm_proto::grpc::{ctld_method, ctld_reply, pb, CtldCall, NodeCall};
use slurm_proto::{Allocation, BatchLaunch, Request, RequestBody, Response, RpcError, SlurmError};
use slurmd::args::Args;
use slurmd::daemon::Daemon;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::mpsc;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A controller that records what node daemons send and answers Ok (or an
/// error to the next heartbeat, when asked).
struct FakeCtld {
    port: u16,
    rx: mpsc::UnboundedReceiver<RequestBody>,
    fail_heartbeat: Arc<AtomicBool>,
}

/// The fake controller's gRPC service: checks each report's credential,
/// records the report, answers.
struct FakeService {
    key: Key,
    seen: auth::ReplayCache,
    tx: mpsc::UnboundedSender<RequestBody>,
    fail: Arc<AtomicBool>,
}

type Answer = Result<tonic::Response<pb::CtldReply>, tonic::Status>;

impl FakeService {
    fn take<T: prost::Message>(
        &self,
        req: tonic::Request<T>,
        method: &str,
        into: fn(T) -> CtldCall,
    ) -> pb::CtldReply {
        let cred = grpc::verify_call(
            &req,
            method,
            auth::TO_CTLD,
            &self.key,
            auth::now(),
            &self.seen,
        )
        .expect("slurmd signs its reports, each for its message and once");
        assert_eq!(cred.uid, 0);
        let body = into(req.into_inner()).into_body().unwrap();
        let resp = match body {
            RequestBody::Heartbeat { .. } if self.fail.swap(false, Ordering::SeqCst) => {
                Response::Error(RpcError {
                    error: SlurmError::InvalidNodeName,
                    detail: None,
                })
            }
            _ => Response::Ok,
        };
        let _ = self.tx.send(body);
        ctld_reply(resp)
    }
}

/// A command's answer.
type Commanded = Result<tonic::Response<pb::CommandReply>, tonic::Status>;

/// Node daemons send no command requests.
fn not_for_nodes() -> tonic::Status {
    tonic::Status::unimplemented("node daemons send no command requests")
}

#[tonic::async_trait]
impl pb::controller_server::Controller for FakeService {
    type WatchStream = tonic::codegen::BoxStream<pb::WatchEvent>;

    async fn watch(
        &self,
        _: tonic::Request<pb::WatchRequest>,
    ) -> Result<tonic::Response<Self::WatchStream>, tonic::Status> {
        Err(tonic::Status::unimplemented("node daemons do not watch"))
    }

    async fn get_config_files(
        &self,
        _: tonic::Request<pb::ConfigFilesRequest>,
    ) -> Result<tonic::Response<pb::ConfigFiles>, tonic::Status> {
        Err(tonic::Status::unimplemented(
            "these daemons read slurm.conf",
        ))
    }

    async fn ping(&self, _: tonic::Request<pb::Empty>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn submit_job(&self, _: tonic::Request<pb::JobDesc>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn test_job(&self, _: tonic::Request<pb::JobDesc>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn allocate_job(&self, _: tonic::Request<pb::JobDesc>) -> Commanded {
        Err(not_for_nodes())
    }
    type GetJobsStream = tonic::codegen::BoxStream<pb::JobListing>;

    async fn get_jobs(
        &self,
        _: tonic::Request<pb::JobQuery>,
    ) -> Result<tonic::Response<Self::GetJobsStream>, tonic::Status> {
        Err(not_for_nodes())
    }
    async fn cancel_jobs(&self, _: tonic::Request<pb::CancelFilter>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn complete_job(&self, _: tonic::Request<pb::CompleteJobRequest>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn create_step(&self, _: tonic::Request<pb::StepRequest>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn step_complete(&self, _: tonic::Request<pb::StepCompleteRequest>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn cancel_step(&self, _: tonic::Request<pb::CancelStepRequest>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn get_nodes(&self, _: tonic::Request<pb::Empty>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn get_partitions(&self, _: tonic::Request<pb::Empty>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn update_job(&self, _: tonic::Request<pb::UpdateJobRequest>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn suspend_job(&self, _: tonic::Request<pb::SuspendRequest>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn update_node(&self, _: tonic::Request<pb::UpdateNodeRequest>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn top_jobs(&self, _: tonic::Request<pb::TopJobsRequest>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn notify_job(&self, _: tonic::Request<pb::JobNotifyRequest>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn update_step(&self, _: tonic::Request<pb::StepUpdateRequest>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn set_sched_log_level(&self, _: tonic::Request<pb::SchedLogLevel>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn set_debug_flags(&self, _: tonic::Request<pb::DebugFlagsRequest>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn set_fs_dampening_factor(&self, _: tonic::Request<pb::FsDampeningFactor>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn reboot_nodes(&self, _: tonic::Request<pb::RebootNodesRequest>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn reconfigure(&self, _: tonic::Request<pb::Empty>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn get_token(&self, _: tonic::Request<pb::TokenRequest>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn get_licenses(&self, _: tonic::Request<pb::Empty>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn get_topo_config(&self, _: tonic::Request<pb::Empty>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn get_job_script(&self, _: tonic::Request<pb::JobIdRequest>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn get_config(&self, _: tonic::Request<pb::Empty>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn get_topology(&self, _: tonic::Request<pb::Empty>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn get_diag(&self, _: tonic::Request<pb::Empty>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn reset_diag(&self, _: tonic::Request<pb::Empty>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn get_priorities(&self, _: tonic::Request<pb::Empty>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn get_shares(&self, _: tonic::Request<pb::Empty>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn get_reservations(&self, _: tonic::Request<pb::Empty>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn create_reservation(&self, _: tonic::Request<pb::ReservationSpec>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn update_reservation(&self, _: tonic::Request<pb::ReservationSpec>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn delete_reservation(&self, _: tonic::Request<pb::NameRequest>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn update_partition(&self, _: tonic::Request<pb::PartitionUpdate>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn create_node(&self, _: tonic::Request<pb::NodeSpec>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn delete_node(&self, _: tonic::Request<pb::NameRequest>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn acct_changed(&self, _: tonic::Request<pb::Empty>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn get_jobs_delta(&self, _: tonic::Request<pb::JobsDeltaRequest>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn create_partition(&self, _: tonic::Request<pb::PartitionUpdate>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn delete_partition(&self, _: tonic::Request<pb::NameRequest>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn takeover(&self, _: tonic::Request<pb::Empty>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn relinquish_control(&self, _: tonic::Request<pb::Empty>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn shutdown(&self, _: tonic::Request<pb::ShutdownRequest>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn set_debug(&self, _: tonic::Request<pb::DebugLevel>) -> Commanded {
        Err(not_for_nodes())
    }
    async fn replicate(
        &self,
        _: tonic::Request<pb::RaftMessage>,
    ) -> Result<tonic::Response<pb::RaftMessage>, tonic::Status> {
        Err(not_for_nodes())
    }
    async fn register_node(&self, r: tonic::Request<pb::NodeRegistration>) -> Answer {
        Ok(tonic::Response::new(self.take(
            r,
            ctld_method::REGISTER_NODE,
            CtldCall::RegisterNode,
        )))
    }
    async fn heartbeat(&self, r: tonic::Request<pb::HeartbeatRequest>) -> Answer {
        Ok(tonic::Response::new(self.take(
            r,
            ctld_method::HEARTBEAT,
            CtldCall::Heartbeat,
        )))
    }
    async fn batch_complete(&self, r: tonic::Request<pb::BatchCompleteRequest>) -> Answer {
        Ok(tonic::Response::new(self.take(
            r,
            ctld_method::BATCH_COMPLETE,
            CtldCall::BatchComplete,
        )))
    }
    async fn job_cleaned(&self, r: tonic::Request<pb::JobOnNode>) -> Answer {
        Ok(tonic::Response::new(self.take(
            r,
            ctld_method::JOB_CLEANED,
            CtldCall::JobCleaned,
        )))
    }
    async fn epilog_failed(&self, r: tonic::Request<pb::JobOnNode>) -> Answer {
        Ok(tonic::Response::new(self.take(
            r,
            ctld_method::EPILOG_FAILED,
            CtldCall::EpilogFailed,
        )))
    }
    async fn prolog_failed(&self, r: tonic::Request<pb::JobOnNode>) -> Answer {
        Ok(tonic::Response::new(self.take(
            r,
            ctld_method::PROLOG_FAILED,
            CtldCall::PrologFailed,
        )))
    }
    async fn node_reports(
        &self,
        req: tonic::Request<pb::NodeReportBatch>,
    ) -> Result<tonic::Response<pb::NodeReportReplies>, tonic::Status> {
        let cred = grpc::verify_call(
            &req,
            ctld_method::NODE_REPORTS,
            auth::TO_CTLD,
            &self.key,
            auth::now(),
            &self.seen,
        )
        .expect("slurmd signs its reports, each for its message and once");
        assert_eq!(cred.uid, 0);
        let RequestBody::NodeReports { reports, .. } =
            slurm_proto::grpc::node_reports_of(req.into_inner()).unwrap()
        else {
            panic!("not a batch of reports");
        };
        let mut replies = Vec::new();
        for body in reports {
            let _ = self.tx.send(body);
            replies.push(ctld_reply(Response::Ok));
        }
        Ok(tonic::Response::new(pb::NodeReportReplies { replies }))
    }
    async fn step_usage(&self, r: tonic::Request<pb::StepUsageRequest>) -> Answer {
        Ok(tonic::Response::new(self.take(
            r,
            ctld_method::STEP_USAGE,
            CtldCall::StepUsage,
        )))
    }
}

async fn fake_ctld(key: Key) -> FakeCtld {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let (tx, rx) = mpsc::unbounded_channel();
    let fail_heartbeat = Arc::new(AtomicBool::new(false));
    let service = FakeService {
        key,
        seen: auth::ReplayCache::default(),
        tx,
        fail: fail_heartbeat.clone(),
    };
    let incoming = grpc::incoming(l, None, 64, Duration::from_secs(5));
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(pb::controller_server::ControllerServer::new(service))
            .serve_with_incoming(incoming),
    );
    FakeCtld {
        port,
        rx,
        fail_heartbeat,
    }
}

impl FakeCtld {
    /// The next message matching `f`, skipping others (heartbeats...).
    async fn expect<T>(&mut self, what: &str, f: impl Fn(&RequestBody) -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let m = tokio::time::timeout_at(deadline, self.rx.recv())
                .await
                .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
                .expect("controller channel open");
            if let Some(t) = f(&m) {
                return t;
            }
        }
    }
}

struct Cluster {
    dir: tempfile::TempDir,
    key: Key,
    slurmd_port: u16,
}

fn write_conf(dir: &Path, ctld_port: u16, slurmd_port: u16) {
    let d = dir.display();
    std::fs::write(
        dir.join("slurm.conf"),
        format!(
            "ClusterName=testc
SlurmctldHost=ctl(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdSpoolDir={d}/spool.%n
SlurmdPidFile={d}/run/slurmd.%n.pid
SlurmdTimeout=3
SlurmUser=root
AuthType=auth/slurm
AuthInfo=socket={d}/sack.socket
SlurmdParameters=config_overrides
NodeName=n1 NodeAddr=127.0.0.1 Port={slurmd_port} CPUs=2 RealMemory=100
PartitionName=debug Nodes=n1 Default=YES
"
        ),
    )
    .unwrap();
}

fn cluster(ctld_port: u16) -> Cluster {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let key_path = dir.path().join("slurm.key");
    auth::generate_key(&key_path).unwrap();
    let key = Key::load(&key_path).unwrap();
    let slurmd_port = free_port();
    write_conf(dir.path(), ctld_port, slurmd_port);
    Cluster {
        dir,
        key,
        slurmd_port,
    }
}

/// `body` signed as `uid` for the daemon of node `to` at `now`.
fn signed(c: &Cluster, uid: u32, body: RequestBody, to: &str, now: i64) -> Request {
    let call = NodeCall::from_body(body.clone()).unwrap();
    let b = auth::Binding::for_message(call.method(), &call.encode(), &auth::to_slurmd(to));
    Request {
        cred: c.key.sign(uid, uid, "test", now, &b),
        body,
    }
}

/// Send `req`'s body to the daemon with `req`'s credential as it is.
async fn send(c: &Cluster, req: &Request) -> Response {
    let ch = grpc::kept(&format!("127.0.0.1:{}", c.slurmd_port), "n1").unwrap();
    let call = NodeCall::from_body(req.body.clone()).unwrap();
    let cred = req.cred.clone();
    grpc::call_node(&ch, "n1", call, |_| Ok(cred), Duration::from_secs(10))
        .await
        .unwrap()
}

/// srun's launch of `t` as `uid` (over a `RunTasks` stream with no
/// stdin): the node daemon's answer.
async fn run_tasks(c: &Cluster, uid: u32, t: slurm_proto::TaskLaunch) -> Response {
    let ch = grpc::kept(&format!("127.0.0.1:{}", c.slurmd_port), "n1").unwrap();
    let (_stdin, none) = mpsc::channel(1);
    let sign = |b: &_| Ok(c.key.sign(uid, uid, "test", auth::now(), b));
    grpc::run_tasks(&ch, "n1", t.into(), sign, none, Duration::from_secs(10))
        .await
        .unwrap()
        .0
}

async fn call(c: &Cluster, uid: u32, body: RequestBody) -> Response {
    send(c, &signed(c, uid, body, "n1", auth::now())).await
}

fn launch(job_id: u32, work: &Path, script: &str) -> BatchLaunch {
    BatchLaunch {
        job_id,
        job_name: "t".into(),
        uid: 65534,
        gid: 65534,
        user_name: slurm_common::users::user_name_or_id(65534),
        account: "acct".into(),
        qos: "normal".into(),
        partition: "debug".into(),
        cluster_name: "testc".into(),
        alloc: Allocation {
            nodes: vec!["n1".into()],
            cpus: vec![1],
            mem: vec![0],
            tasks: vec![1],
            gres: vec![],
        },
        num_tasks: 1,
        cpus_per_task: 1,
        ntasks_per_node: None,
        mem_per_node: None,
        mem_per_cpu: None,
        time_limit: Some(5),
        work_dir: work.to_string_lossy().into_owned(),
        std_out: None,
        std_err: None,
        std_in: None,
        script: script.into(),
        argv: vec![],
        environment: vec!["PATH=/usr/bin:/bin".into()],
        submit_host: "test".into(),
        ctld_host: "127.0.0.1".into(),
        ctld_port: 1,
        start_time: 0,
        append_output: false,
    }
}

fn is_err(r: &Response, code: SlurmError) -> bool {
    matches!(r, Response::Error(e) if e.error == code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_end_to_end() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to run jobs as another user");
        return;
    }
    // The controller must know the key before the daemon starts; make the
    // cluster directory first with a placeholder port, then rewrite.
    let c = cluster(1);
    let mut ctld = fake_ctld(c.key.clone()).await;
    write_conf(c.dir.path(), ctld.port, c.slurmd_port);
    let args = Args {
        node_name: Some("n1".into()),
        ..Args::default()
    };
    let settings = slurmd::settings::Settings::from_args(&Args {
        conf: Some(c.dir.path().join("slurm.conf")),
        ..args
    })
    .unwrap();
    let pidfile = settings.pidfile.clone().unwrap();
    let spool = settings.spool.clone();
    let d = Daemon::start(settings).await.unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(d.serve(async {
        let _ = stop_rx.await;
    }));
    assert!(pidfile.exists());

    // Registration with the configured hardware, then heartbeats.
    let reg = ctld
        .expect("registration", |m| match m {
            RequestBody::RegisterNode(r) => Some(r.clone()),
            _ => None,
        })
        .await;
    assert_eq!(
        (reg.name.as_str(), reg.cpus, reg.real_memory),
        ("n1", 2, 100)
    );
    assert_eq!(reg.version, slurm_proto::SLURM_VERSION);
    assert!(reg.running_jobs.is_empty());
    ctld.expect("heartbeat", |m| {
        matches!(m, RequestBody::Heartbeat { .. }).then_some(())
    })
    .await;
    // A refused heartbeat sends the daemon back to registering.
    ctld.fail_heartbeat.store(true, Ordering::SeqCst);
    ctld.expect("re-registration", |m| {
        matches!(m, RequestBody::RegisterNode(_)).then_some(())
    })
    .await;

    // Credentials.
    let mut forged = signed(&c, 0, RequestBody::NodePing, "n1", auth::now());
    forged.cred.uid = 5;
    let r = send(&c, &forged).await;
    assert!(is_err(&r, SlurmError::InvalidCredential), "{r:?}");
    let expired = signed(&c, 0, RequestBody::NodePing, "n1", auth::now() - 10_000);
    let r = send(&c, &expired).await;
    assert!(is_err(&r, SlurmError::ExpiredCredential), "{r:?}");
    // A root-signed request seen on the wire: not for another node, not
    // with another body, not twice.
    let seen = signed(&c, 0, RequestBody::NodePing, "n1", auth::now());
    assert!(matches!(send(&c, &seen).await, Response::NodePong { .. }));
    let r = send(&c, &seen).await;
    assert!(is_err(&r, SlurmError::InvalidCredential), "replayed: {r:?}");
    let for_n2 = signed(&c, 0, RequestBody::NodePing, "n2", auth::now());
    let r = send(&c, &for_n2).await;
    assert!(
        is_err(&r, SlurmError::InvalidCredential),
        "other node: {r:?}"
    );
    let fresh = signed(&c, 0, RequestBody::NodePing, "n1", auth::now());
    let swapped = Request {
        cred: fresh.cred.clone(),
        body: RequestBody::TerminateJob {
            job_id: 1,
            kill_wait: 0,
            start_time: None,
            cause: slurm_proto::TermCause::None,
        },
    };
    let r = send(&c, &swapped).await;
    assert!(
        is_err(&r, SlurmError::InvalidCredential),
        "other body: {r:?}"
    );

    let r = call(&c, 1000, RequestBody::NodePing).await;
    assert!(
        matches!(r, Response::NodePong { ref running_jobs } if running_jobs.is_empty()),
        "{r:?}"
    );
    // Step credentials: what the daemon applies is what the controller
    // signed (a user's own srun cannot claim a GPU or more CPUs), and a
    // credential of an ended run launches nothing.
    let start = auth::now();
    let mut cred = slurm_proto::StepCred {
        job_id: 500,
        step_id: 0,
        uid: 65534,
        gid: 65534,
        user_name: "nobody".into(),
        nodes: vec!["n1".into()],
        expires: start + 3600,
        alloc: Allocation {
            nodes: vec!["n1".into()],
            cpus: vec![1],
            mem: vec![50],
            tasks: vec![1],
            gres: Vec::new(),
        },
        partition: "debug".into(),
        account: "a".into(),
        job_start: Some(start),
        tasks: vec![vec![0]],
        cpus_per_task: 1,
        job_cpus: vec![1],
        sig: String::new(),
        step_cpus: Vec::new(),
        step_gres: Vec::new(),
        step_mem: Vec::new(),
    };
    c.key.sign_step(&mut cred);
    let tasks = slurm_proto::TaskLaunch {
        layout: slurm_proto::StepLayout {
            job_id: 500,
            step_id: 0,
            nodes: vec!["n1".into()],
            addrs: vec![],
            tasks: vec![vec![0]],
            cpus_per_task: 1,
            job_cpus: vec![1],
            cred: cred.clone(),
        },
        node_index: 0,
        argv: vec!["/bin/true".into()],
        environment: vec![],
        cwd: "/tmp".into(),
        // Nothing listens here: a launch that got this far would fail.
        job_name: "s".into(),
        partition: "debug".into(),
        account: "a".into(),
        cluster_name: "c".into(),
        job_nodes: vec!["n1".into()],
        job_cpus: vec![1],
        job_tasks: vec![1],
        job_gres: vec![],
        job_mem: vec![50],
        pty: None,
        task_prolog: None,
        task_epilog: None,
        preserve_env: false,
        cpu_bind: None,
        distribution: None,
        job_start: Some(start),
        bcast: None,
        gpu_bind: None,
    };
    // A RunTasks call whose credential was made for another launch (the
    // same step, other tasks' environment) is refused before anything runs.
    {
        let ch = grpc::kept(&format!("127.0.0.1:{}", c.slurmd_port), "n1").unwrap();
        let mut other = tasks.clone();
        other.environment.push("EVIL=1".into());
        let other: slurm_proto::grpc::pb::TaskLaunch = other.into();
        let signed_for = auth::Binding::for_message(
            slurm_proto::grpc::node_method::RUN_TASKS,
            &prost::Message::encode_to_vec(&other),
            &auth::to_slurmd("n1"),
        );
        let cred = c.key.sign(65534, 65534, "test", auth::now(), &signed_for);
        let (_stdin, none) = mpsc::channel(1);
        let (r, out) = grpc::run_tasks(
            &ch,
            "n1",
            tasks.clone().into(),
            |_| Ok(cred),
            none,
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        assert!(is_err(&r, SlurmError::InvalidCredential), "{r:?}");
        assert!(out.is_none());
    }
    let mut greedy = tasks.clone();
    greedy.job_gres = vec![vec![slurm_proto::GresAlloc {
        name: "gpu".into(),
        kind: None,
        indices: vec![0],
    }]];
    let r = run_tasks(&c, 65534, greedy).await;
    assert!(
        is_err(&r, SlurmError::InvalidCredential) && format!("{r:?}").contains("job GRES"),
        "{r:?}"
    );
    let mut more_cpus = tasks.clone();
    more_cpus.job_cpus = vec![2];
    more_cpus.layout.job_cpus = vec![2];
    let r = run_tasks(&c, 65534, more_cpus).await;
    assert!(is_err(&r, SlurmError::InvalidCredential), "{r:?}");
    let mut resigned = tasks.clone();
    resigned.layout.cred.alloc.cpus = vec![2];
    resigned.job_cpus = vec![2];
    let r = run_tasks(&c, 65534, resigned).await;
    assert!(is_err(&r, SlurmError::InvalidCredential), "{r:?}");
    let r = call(
        &c,
        0,
        RequestBody::TerminateJob {
            job_id: 500,
            kill_wait: 0,
            start_time: Some(start),
            cause: slurm_proto::TermCause::None,
        },
    )
    .await;
    assert!(matches!(r, Response::Ok), "{r:?}");
    let r = run_tasks(&c, 65534, tasks).await;
    assert!(
        is_err(&r, SlurmError::AlreadyDone) && format!("{r:?}").contains("has ended"),
        "{r:?}"
    );
    // What a restarted daemon loads from its spool says the same.
    let again = slurmd::ledger::Ledger::load(spool.join("voided.n1.json"), 120);
    let r = again.take(500, 0, Some(start), auth::now(), auth::now() + 60);
    assert!(r.as_ref().is_err_and(|e| e.contains("has ended")), "{r:?}");
    let work = tempfile::tempdir().unwrap();
    std::fs::set_permissions(work.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut l = launch(
        42,
        work.path(),
        "#!/bin/sh\necho hello from $SLURM_JOB_ID\n",
    );
    l.start_time = 1_700_000_042;
    let r = call(&c, 1000, RequestBody::LaunchBatch(Box::new(l.clone()))).await;
    assert!(is_err(&r, SlurmError::AccessDenied), "{r:?}");
    // A method the node daemon does not serve.
    {
        let ch = grpc::kept(&format!("127.0.0.1:{}", c.slurmd_port), "n1").unwrap();
        let mut g = tonic::client::Grpc::new(ch);
        g.ready().await.unwrap();
        let r: Result<tonic::Response<pb::NodeReply>, _> = g
            .unary(
                tonic::Request::new(pb::NodePing {}),
                "/slurm.v1.NodeDaemon/SubmitBatchJob".parse().unwrap(),
                tonic::codec::ProstCodec::default(),
            )
            .await;
        assert_eq!(r.unwrap_err().code(), tonic::Code::Unimplemented);
    }
    // A launch larger than the node daemon takes (64 MiB here), even
    // root-signed: refused as it is read, nothing runs, the daemon goes on.
    {
        let mut huge = l.clone();
        huge.job_id = 77;
        huge.script = format!("#!/bin/sh\n#{}\n", "x".repeat(70 << 20));
        let req = signed(
            &c,
            0,
            RequestBody::LaunchBatch(Box::new(huge)),
            "n1",
            auth::now(),
        );
        let ch = grpc::kept(&format!("127.0.0.1:{}", c.slurmd_port), "n1").unwrap();
        let big = NodeCall::from_body(req.body).unwrap();
        let cred = req.cred;
        let r = grpc::call_node(&ch, "n1", big, |_| Ok(cred), Duration::from_secs(30)).await;
        assert!(
            matches!(&r, Err(e) if e.to_string().contains("too large")),
            "{r:?}"
        );
        let r = call(&c, 0, RequestBody::NodePing).await;
        assert!(
            matches!(r, Response::NodePong { ref running_jobs } if !running_jobs.contains(&77)),
            "{r:?}"
        );
    }

    // Garbage on the socket is dropped without harm.
    {
        use tokio::io::AsyncWriteExt;
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", c.slurmd_port))
            .await
            .unwrap();
        s.write_all(&[0, 0, 0, 3, b'x', b'y', b'z']).await.unwrap();
    }

    // A terminate that overtakes its launch: that run's launch is refused,
    // a later run of the same job id is not.
    let work0 = tempfile::tempdir().unwrap();
    let mut early = launch(90, work0.path(), "#!/bin/sh\ntrue\n");
    early.start_time = 1_700_000_000;
    let r = call(
        &c,
        0,
        RequestBody::TerminateJob {
            job_id: 90,
            kill_wait: 0,
            start_time: Some(early.start_time),
            cause: slurm_proto::TermCause::None,
        },
    )
    .await;
    assert!(matches!(r, Response::Ok), "{r:?}");
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let r = call(&c, 0, RequestBody::LaunchBatch(Box::new(early.clone()))).await;
    assert!(is_err(&r, SlurmError::AlreadyDone), "{r:?}");

    // A batch job runs as nobody and is reported complete, then clean.
    let r = call(&c, 0, RequestBody::LaunchBatch(Box::new(l.clone()))).await;
    assert!(matches!(r, Response::Ok), "{r:?}");
    let status = ctld
        .expect("batch complete", |m| match m {
            // The report names the run the launch started.
            RequestBody::BatchComplete {
                job_id: 42,
                status,
                node,
                job_start,
                ..
            } if node == "n1" && *job_start == Some(l.start_time) => Some(*status),
            _ => None,
        })
        .await;
    assert_eq!(status, 0);
    ctld.expect("job cleaned", |m| {
        matches!(m, RequestBody::JobCleaned { job_id: 42, .. }).then_some(())
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(work.path().join("slurm-42.out")).unwrap(),
        "hello from 42\n"
    );
    assert!(!spool.join("job00042").exists());

    // Termination: SIGTERM reaches the script.
    let l = launch(43, work.path(), "#!/bin/sh\nsleep 60 &\nwait\n");
    let r = call(&c, 0, RequestBody::LaunchBatch(Box::new(l))).await;
    assert!(matches!(r, Response::Ok), "{r:?}");
    assert!(spool.join("job00043").join("slurm_script").exists());
    let r = call(&c, 1000, RequestBody::NodePing).await;
    assert!(
        matches!(r, Response::NodePong { ref running_jobs } if running_jobs.contains(&43)),
        "{r:?}"
    );
    let r = call(
        &c,
        0,
        RequestBody::SignalJob {
            job_id: 43,
            signal: 0,
        },
    )
    .await;
    assert!(matches!(r, Response::Ok), "{r:?}");
    // A notice for the job: taken from root only, written to its error
    // file (here its output file) as `slurmstepd: error: ...`.
    let notice = |uid| {
        call(
            &c,
            uid,
            RequestBody::NotifyJob {
                job_id: 43,
                message: format!("from uid {uid}"),
            },
        )
    };
    let r = notice(1000).await;
    assert!(is_err(&r, SlurmError::AccessDenied), "{r:?}");
    let r = notice(0).await;
    assert!(matches!(r, Response::Ok), "{r:?}");
    let told = std::fs::read_to_string(work.path().join("slurm-43.out")).unwrap();
    assert_eq!(told, "slurmstepd: error: from uid 0\n");
    // Ending a step for a cause (its time limit) is the controller's: a
    // user's request to is refused.
    let r = call(
        &c,
        1000,
        RequestBody::SignalTasks {
            job_id: 43,
            step_id: 0,
            signal: libc::SIGTERM,
            cause: slurm_proto::TermCause::TimeLimit,
            job_start: None,
        },
    )
    .await;
    assert!(is_err(&r, SlurmError::AccessDenied), "{r:?}");
    // The controller's, naming a run, for a step not running here (one
    // tried again late): taken for done, nothing ended.
    let r = call(
        &c,
        0,
        RequestBody::SignalTasks {
            job_id: 43,
            step_id: 0,
            signal: libc::SIGTERM,
            cause: slurm_proto::TermCause::TimeLimit,
            job_start: Some(12345),
        },
    )
    .await;
    assert!(
        is_err(&r, SlurmError::AlreadyDone) && format!("{r:?}").contains("not running here"),
        "{r:?}"
    );
    let r = call(
        &c,
        0,
        RequestBody::TerminateJob {
            job_id: 43,
            kill_wait: 2,
            start_time: None,
            cause: slurm_proto::TermCause::None,
        },
    )
    .await;
    assert!(matches!(r, Response::Ok), "{r:?}");
    let status = ctld
        .expect("batch complete after terminate", |m| match m {
            RequestBody::BatchComplete {
                job_id: 43, status, ..
            } => Some(*status),
            _ => None,
        })
        .await;
    assert_eq!(status & 0x7f, libc::SIGTERM, "status {status}");
    ctld.expect("job cleaned after terminate", |m| {
        matches!(m, RequestBody::JobCleaned { job_id: 43, .. }).then_some(())
    })
    .await;

    // A suspend that arrives before its launch stops the job as it starts;
    // an older request arriving late changes nothing; a newer one resumes.
    let count = work.path().join("count44");
    let script = format!(
        "#!/bin/sh\ni=0\nwhile [ $i -lt 600 ]; do i=$((i+1)); echo $i > {}; sleep 0.05; done\n",
        count.display()
    );
    let l44 = launch(44, work.path(), &script);
    let run = l44.start_time;
    let suspend = |job_id, suspend, seq| RequestBody::SuspendJobHere {
        job_id,
        suspend,
        seq,
        epoch: 7,
        start_time: Some(run),
    };
    let r = call(&c, 0, suspend(44, true, 10)).await;
    assert!(matches!(r, Response::Ok), "{r:?}");
    let r = call(&c, 0, RequestBody::LaunchBatch(Box::new(l44))).await;
    assert!(matches!(r, Response::Ok), "{r:?}");
    let read = || {
        std::fs::read_to_string(&count)
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
            .unwrap_or(0)
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let a = read();
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    assert_eq!(read(), a, "the job ran while suspended");
    let r = call(&c, 0, suspend(44, false, 9)).await;
    assert!(matches!(r, Response::Ok), "{r:?}");
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    assert_eq!(read(), a, "a stale resume resumed the job");
    // A running job's counter moves within a few seconds, however loaded
    // the machine (a stopped one never does).
    let moves_past = |v: u32| async move {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            if read() > v {
                return true;
            }
        }
        false
    };
    let r = call(&c, 0, suspend(44, false, 11)).await;
    assert!(matches!(r, Response::Ok), "{r:?}");
    assert!(moves_past(a).await, "the job did not go on after resume");
    // A late request for an earlier run of the job leaves this run alone.
    let r = call(
        &c,
        0,
        RequestBody::SuspendJobHere {
            job_id: 44,
            suspend: true,
            seq: 20,
            epoch: 7,
            start_time: Some(run - 100),
        },
    )
    .await;
    assert!(matches!(r, Response::Ok), "{r:?}");
    let b = read();
    assert!(
        moves_past(b).await,
        "a request for an earlier run stopped this one"
    );
    // A restarted controller (another epoch) counts from 1 again: heard.
    let r = call(
        &c,
        0,
        RequestBody::SuspendJobHere {
            job_id: 44,
            suspend: true,
            seq: 1,
            epoch: 8,
            start_time: Some(run),
        },
    )
    .await;
    assert!(matches!(r, Response::Ok), "{r:?}");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let b = read();
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    assert_eq!(read(), b, "a new controller's suspend was ignored");
    // Unprivileged users may not suspend jobs on a node.
    let r = call(&c, 1000, suspend(44, true, 12)).await;
    assert!(is_err(&r, SlurmError::AccessDenied), "{r:?}");
    let r = call(
        &c,
        0,
        RequestBody::TerminateJob {
            job_id: 44,
            kill_wait: 1,
            start_time: None,
            cause: slurm_proto::TermCause::None,
        },
    )
    .await;
    assert!(matches!(r, Response::Ok), "{r:?}");
    ctld.expect("job cleaned after suspend and resume", |m| {
        matches!(m, RequestBody::JobCleaned { job_id: 44, .. }).then_some(())
    })
    .await;

    // Jobs not running here: signal is refused, terminate reports clean.
    let r = call(
        &c,
        0,
        RequestBody::SignalJob {
            job_id: 77,
            signal: 15,
        },
    )
    .await;
    assert!(is_err(&r, SlurmError::InvalidJobId), "{r:?}");
    let r = call(
        &c,
        0,
        RequestBody::TerminateJob {
            job_id: 77,
            kill_wait: 1,
            start_time: None,
            cause: slurm_proto::TermCause::None,
        },
    )
    .await;
    assert!(matches!(r, Response::Ok), "{r:?}");
    ctld.expect("job cleaned for a foreign job", |m| {
        matches!(m, RequestBody::JobCleaned { job_id: 77, .. }).then_some(())
    })
    .await;

    // The credential socket is served.
    let sock = c.dir.path().join("sack.socket");
    let b = auth::Binding::for_body(&RequestBody::Ping, auth::TO_CTLD).unwrap();
    let b2 = b.clone();
    let cred = tokio::task::spawn_blocking(move || auth::fetch_from_socket(&sock, &b2))
        .await
        .unwrap()
        .unwrap();
    c.key.verify(&cred, auth::now(), &b).unwrap();

    let _ = stop_tx.send(());
    served.await.unwrap();
    assert!(!pidfile.exists());
}

/// Whether real cgroups can be made here (root, a writable cgroup fs).
fn cgroups_writable() -> bool {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return false;
    }
    let mount = Path::new("/sys/fs/cgroup");
    let probe_parent = match slurmd::cgroup::detect_version(mount) {
        Some(slurmd::cgroup::Version::V2) => mount.to_path_buf(),
        Some(slurmd::cgroup::Version::V1) => mount.join("freezer"),
        None => return false,
    };
    let probe = probe_parent.join(format!("slurmd-probe-{}", std::process::id()));
    let ok = std::fs::create_dir(&probe).is_ok();
    let _ = std::fs::remove_dir(&probe);
    ok
}

/// Kills whatever a failed test left in a daemon's cgroups, so the next
/// run finds them free.
struct CgroupSweep(std::path::PathBuf);

impl Drop for CgroupSweep {
    fn drop(&mut self) {
        for p in slurmd::cgroup::pids_under(&self.0) {
            // SAFETY: killing a leftover test job process.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
    }
}

fn alive(pid: i32) -> bool {
    matches!(slurmd::sysinfo::proc_start(pid), Some((_, s)) if s != 'Z' && s != 'X')
}

/// With task/cgroup: the script runs in its job's cgroup on its CPUs; on
/// termination a process that left its session dies too and the cgroup
/// goes; a memory hog over the job's memory is OOM-killed and the job's
/// output says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cgroup_jobs_end_to_end() {
    if !cgroups_writable() {
        eprintln!("skipped: needs root and a writable cgroup file system");
        return;
    }
    let c = cluster(1);
    let mut ctld = fake_ctld(c.key.clone()).await;
    write_conf(c.dir.path(), ctld.port, c.slurmd_port);
    let conf = c.dir.path().join("slurm.conf");
    let mut text = std::fs::read_to_string(&conf).unwrap();
    text.push_str(
        "ProctrackType=proctrack/cgroup\nTaskPlugin=task/affinity,task/cgroup\nJobAcctGatherType=jobacct_gather/cgroup\n",
    );
    std::fs::write(&conf, text).unwrap();
    std::fs::write(
        c.dir.path().join("cgroup.conf"),
        "CgroupPlugin=autodetect\nConstrainCores=yes\nConstrainRAMSpace=yes\nConstrainSwapSpace=yes\n",
    )
    .unwrap();
    let settings = slurmd::settings::Settings::from_args(&Args {
        conf: Some(conf),
        node_name: Some("n1".into()),
        ..Args::default()
    })
    .unwrap();
    let d = Daemon::start(settings).await.unwrap();
    let top = d
        .ctx()
        .cgroups
        .as_ref()
        .expect("cgroups are set up")
        .top()
        .to_path_buf();
    let _sweep = CgroupSweep(top.clone());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(d.serve(async {
        let _ = stop_rx.await;
    }));
    ctld.expect("registration", |m| {
        matches!(m, RequestBody::RegisterNode(_)).then_some(())
    })
    .await;
    let work = tempfile::tempdir().unwrap();
    std::fs::set_permissions(work.path(), std::fs::Permissions::from_mode(0o777)).unwrap();

    let l = launch(
        60,
        work.path(),
        "#!/bin/sh\nsetsid sh -c 'sleep 300 & echo $! > escaped.pid'\ncat /proc/self/cgroup > cgroup.txt\nsleep 300\n",
    );
    let r = call(&c, 0, RequestBody::LaunchBatch(Box::new(l))).await;
    assert!(matches!(r, Response::Ok), "{r:?}");
    let pidfile = work.path().join("escaped.pid");
    let mut escaped = None;
    for _ in 0..200 {
        escaped = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|s| s.trim().parse::<i32>().ok());
        let cg = std::fs::read_to_string(work.path().join("cgroup.txt")).unwrap_or_default();
        if escaped.is_some() && cg.contains("step_batch") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let escaped = escaped.expect("the job's double-forked sleep started");
    assert!(alive(escaped));
    let cg = std::fs::read_to_string(work.path().join("cgroup.txt")).unwrap();
    assert!(cg.contains("/uid_65534/job_60/step_batch"), "{cg}");
    // One CPU allocated: the first one of the node.
    let status = std::fs::read_to_string(format!("/proc/{escaped}/status")).unwrap();
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("Cpus_allowed_list:") && l.ends_with("\t0")),
        "{status}"
    );
    let r = call(
        &c,
        0,
        RequestBody::TerminateJob {
            job_id: 60,
            kill_wait: 1,
            start_time: None,
            cause: slurm_proto::TermCause::None,
        },
    )
    .await;
    assert!(matches!(r, Response::Ok), "{r:?}");
    ctld.expect("job 60 cleaned", |m| {
        matches!(m, RequestBody::JobCleaned { job_id: 60, .. }).then_some(())
    })
    .await;
    let mut waited = 0;
    while alive(escaped) && waited < 100 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += 1;
    }
    assert!(
        !alive(escaped),
        "the process that left the job's session survived"
    );
    assert!(!top.join("uid_65534/job_60").exists());

    // 64 MiB for a job that wants 300: the hog is killed, the script goes on.
    let mut l = launch(
        61,
        work.path(),
        "#!/bin/sh\nhead -c 300M /dev/zero | tail > /dev/null\necho after\n",
    );
    l.alloc.mem = vec![64];
    let r = call(&c, 0, RequestBody::LaunchBatch(Box::new(l))).await;
    assert!(matches!(r, Response::Ok), "{r:?}");
    let (status, oom, usage) = ctld
        .expect("job 61 complete", |m| match m {
            RequestBody::BatchComplete {
                job_id: 61,
                status,
                oom,
                usage,
                ..
            } => Some((*status, *oom, *usage)),
            _ => None,
        })
        .await;
    assert_eq!(status, 0);
    assert!(oom, "the OOM kill reaches the controller");
    let usage = usage.expect("usage gathered from the cgroup");
    assert!(usage.max_rss_bytes > 0 && usage.cpu_usec > 0, "{usage:?}");
    ctld.expect("job 61 cleaned", |m| {
        matches!(m, RequestBody::JobCleaned { job_id: 61, .. }).then_some(())
    })
    .await;
    let out = std::fs::read_to_string(work.path().join("slurm-61.out")).unwrap();
    // The shell reports its killed pipeline, then goes on.
    assert!(out.contains("after\n"), "{out}");
    assert!(
        out.contains("slurmstepd: error: Detected 1 oom_kill event in StepId=61.batch. Some of the step tasks have been OOM Killed."),
        "{out}"
    );
    assert!(!top.join("uid_65534/job_61").exists());

    let _ = stop_tx.send(());
    served.await.unwrap();
    // Nothing of our jobs is left (the directory's name may already serve
    // another test's daemon for a node called n1, so only ours are checked).
    for job in ["job_42", "job_43", "job_60", "job_61"] {
        assert!(!top.join("uid_65534").join(job).exists(), "{job} remains");
    }
}

/// A slurmd child process, killed if the test fails before stopping it.
struct DaemonProc(Option<std::process::Child>);

impl DaemonProc {
    fn stop(mut self) {
        let mut child = self.0.take().unwrap();
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let st = child.wait().unwrap();
        assert!(st.success(), "slurmd exited with {st:?}");
    }
}

impl Drop for DaemonProc {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A restarted daemon re-adopts the job the previous one left running, and
/// events queued before the restart are still delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_daemon_readopts_running_jobs() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to run jobs as another user");
        return;
    }
    let c = cluster(1);
    let mut ctld = fake_ctld(c.key.clone()).await;
    write_conf(c.dir.path(), ctld.port, c.slurmd_port);
    let conf = c.dir.path().join("slurm.conf");
    let log = c.dir.path().join("slurmd.log");
    let start = || {
        DaemonProc(Some(
            std::process::Command::new(env!("CARGO_BIN_EXE_slurmd"))
                .args(["-D", "-N", "n1", "-L"])
                .arg(&log)
                .arg("-f")
                .arg(&conf)
                .spawn()
                .unwrap(),
        ))
    };
    let d1 = start();
    ctld.expect("registration", |m| {
        matches!(m, RequestBody::RegisterNode(_)).then_some(())
    })
    .await;
    let work = tempfile::tempdir().unwrap();
    std::fs::set_permissions(work.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let l = launch(
        50,
        work.path(),
        "#!/bin/sh
echo started
exec sleep 60
",
    );
    let r = call(&c, 0, RequestBody::LaunchBatch(Box::new(l))).await;
    assert!(matches!(r, Response::Ok), "{r:?}");
    // Jobs 51 and 52's scripts will end while the daemon is down.
    for id in [51, 52] {
        let l = launch(id, work.path(), "#!/bin/sh\necho started\nexec sleep 60\n");
        let r = call(&c, 0, RequestBody::LaunchBatch(Box::new(l))).await;
        assert!(matches!(r, Response::Ok), "{r:?}");
    }
    d1.stop();
    // The jobs outlive the daemon.
    for id in [50, 51, 52] {
        let out = work.path().join(format!("slurm-{id}.out"));
        let mut waited = 0;
        while std::fs::read_to_string(&out).unwrap_or_default() != "started\n" {
            assert!(waited < 100, "job output never appeared");
            tokio::time::sleep(Duration::from_millis(50)).await;
            waited += 1;
        }
    }
    // As if the daemon had died between the scripts' start and the second
    // save of their state: the pid comes from the launch record (in the
    // daemon's own directory, out of the job's user's reach).
    let states = c.dir.path().join("spool.n1/jobstate.n1");
    let pid_of = |id: u32| {
        let state = states.join(format!("{id}.json"));
        let mut v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
        let pid = v["pid"].as_i64().unwrap();
        assert!(pid > 1, "{v}");
        v["pid"] = 0.into();
        v["start_ticks"] = 0.into();
        std::fs::write(&state, serde_json::to_vec(&v).unwrap()).unwrap();
        pid as i32
    };
    let pid50 = pid_of(50);
    std::fs::write(states.join("50.launched"), format!("{pid50}")).unwrap();
    // Job 51's script ends; its pid now names another process group leader
    // (root's): it must be neither adopted nor signalled.
    let pid51 = pid_of(51);
    // SAFETY: ending the test's own job script.
    unsafe { libc::kill(pid51, libc::SIGKILL) };
    let mut other = std::process::Command::new("setsid")
        .args(["sleep", "60"])
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let other_pid = other.id() as i32;
    std::fs::write(states.join("51.launched"), format!("{other_pid}")).unwrap();
    // Job 52's pid is reused by a process of the job's own user, started
    // after the record was written: not the script either.
    let pid52 = pid_of(52);
    // SAFETY: as above.
    unsafe { libc::kill(pid52, libc::SIGKILL) };
    let record52 = states.join("52.launched");
    let written = std::time::SystemTime::now() - Duration::from_secs(30);
    let mut reused = std::process::Command::new("setsid")
        .args([
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ])
        .args(["sleep", "60"])
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let reused_pid = reused.id() as i32;
    std::fs::write(&record52, format!("{reused_pid}")).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&record52)
        .unwrap()
        .set_modified(written)
        .unwrap();

    let d2 = start();
    let reg = ctld
        .expect("registration after restart", |m| match m {
            RequestBody::RegisterNode(r) => Some(r.clone()),
            _ => None,
        })
        .await;
    assert_eq!(reg.running_jobs, vec![50, 51, 52]);
    let mut ended = Vec::new();
    while ended.len() < 2 {
        let id = ctld
            .expect(
                "jobs 51 and 52 reported ended while the daemon was down",
                |m| match m {
                    RequestBody::BatchComplete { job_id, .. } if [51, 52].contains(job_id) => {
                        Some(*job_id)
                    }
                    _ => None,
                },
            )
            .await;
        ended.push(id);
    }
    ended.sort_unstable();
    assert_eq!(ended, [51, 52]);
    assert!(
        other.try_wait().unwrap().is_none(),
        "root's process named by the record was signalled"
    );
    assert!(
        reused.try_wait().unwrap().is_none(),
        "a process that took the script's pid later was signalled"
    );
    for p in [&mut other, &mut reused] {
        let _ = p.kill();
        let _ = p.wait();
    }
    let r = call(
        &c,
        0,
        RequestBody::TerminateJob {
            job_id: 50,
            kill_wait: 1,
            start_time: None,
            cause: slurm_proto::TermCause::None,
        },
    )
    .await;
    assert!(matches!(r, Response::Ok), "{r:?}");
    ctld.expect("batch complete of the adopted job", |m| {
        matches!(m, RequestBody::BatchComplete { job_id: 50, .. }).then_some(())
    })
    .await;
    ctld.expect("job cleaned of the adopted job", |m| {
        matches!(m, RequestBody::JobCleaned { job_id: 50, .. }).then_some(())
    })
    .await;
    // The job leaves running_jobs once the controller has acknowledged it clean.
    let mut tries = 0;
    loop {
        let r = call(&c, 0, RequestBody::NodePing).await;
        match r {
            Response::NodePong { running_jobs } if running_jobs.is_empty() => break,
            other => assert!(tries < 100, "{other:?}"),
        }
        tries += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    d2.stop();
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(log.contains("re-adopted running job"), "{log}");
}

#[test]
fn binary_command_line() {
    let exe = env!("CARGO_BIN_EXE_slurmd");
    let out = std::process::Command::new(exe).arg("-V").output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "slurm 25.11.0\n");

    let out = std::process::Command::new(exe).arg("-Q").output().unwrap();
    assert_eq!(out.status.code(), Some(1));

    let dir = tempfile::tempdir().unwrap();
    write_conf(dir.path(), 1, 2);
    let out = std::process::Command::new(exe)
        .args(["-D", "-N", "nosuch", "-f"])
        .arg(dir.path().join("slurm.conf"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("node name `nosuch' not found"), "{err}");

    // -C: the node line and the uptime.
    let out = std::process::Command::new(exe)
        .args(["-C", "-N", "n7"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].starts_with("NodeName=n7 CPUs=")
            && lines[0].contains(" Boards=1 SocketsPerBoard="),
        "{text}"
    );
    let up = lines[1].strip_prefix("UpTime=").unwrap();
    let (days, hms) = up.split_once('-').unwrap();
    assert!(days.parse::<u64>().is_ok() && hms.len() == 8, "{up}");
}
