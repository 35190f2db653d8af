//! Whole-cluster test harness: starts the real binaries (controller and node
//! daemons) on loopback in a temporary directory through the same code as
//! `slurm-local`, and drives them with the real commands. The tests live in
//! `tests/tests/cluster.rs` (one integration-test binary).
//!
//! The binaries must be built first (`cargo build --workspace --bins`); the
//! project's test command does that.

pub mod compat;
pub mod fuzz;
pub mod k8s;

use slurm_local::{ClusterSpec, LocalCluster};
use slurm_proto::{JobId, JobRecord, NodeRecord, RequestBody, Response};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The user jobs run as in tests (`nobody`).
pub const TEST_UID: u32 = 65534;
pub const TEST_GID: u32 = 65534;

/// target/debug (or release), where the daemons and commands are.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let mut dir = exe.parent().expect("exe dir").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    for b in [
        "slurmctld",
        "slurmd",
        "sbatch",
        "squeue",
        "sinfo",
        "scancel",
        "scontrol",
    ] {
        assert!(
            dir.join(b).exists(),
            "{} missing in {}: run `cargo build --workspace --bins` first",
            b,
            dir.display()
        );
    }
    dir
}

/// A command line of a test cluster, made anew each time (see
/// [`TestCluster::cmd_factory`]).
#[derive(Debug, Clone)]
pub struct CmdFactory {
    bin: PathBuf,
    conf: PathBuf,
    work: PathBuf,
    path: String,
    args: Vec<String>,
}

impl CmdFactory {
    pub fn make(&self) -> Command {
        let mut c = Command::new(&self.bin);
        c.env("SLURM_CONF", &self.conf)
            .env("PATH", &self.path)
            .current_dir(&self.work)
            .args(&self.args);
        c
    }
}

/// A cluster for one test, removed with its directory when dropped.
pub struct TestCluster {
    pub c: LocalCluster,
    /// World-writable directory jobs run in.
    pub work: PathBuf,
    _tmp: tempfile::TempDir,
}

impl TestCluster {
    /// The TLS settings a command of this cluster uses (its CA only), and
    /// the controller's address: for tests that call the controller's
    /// gRPC service themselves.
    pub fn command_tls(&self) -> (slurm_common::tls::Tls, String) {
        use slurm_common::tls::{Role, TlsSettings};
        let dir = &self.c.spec.dir;
        let ca = format!("ca_cert_file={}", dir.join("ca_cert.pem").display());
        let tls = TlsSettings::parse(Some("tls/rustls"), Some(&ca), dir)
            .unwrap()
            .unwrap()
            .load(&Role::Command)
            .unwrap();
        (tls, format!("{}:{}", self.c.spec.ip, self.c.spec.ctld_port))
    }

    /// Start a cluster of `nodes` nodes; `tune` may change the spec first.
    pub fn start(nodes: u32, tune: impl FnOnce(&mut ClusterSpec)) -> TestCluster {
        let tmp = tempfile::Builder::new()
            .prefix("slurm-test-")
            .tempdir()
            .expect("tempdir");
        // Large clusters take a block below the kernel's ephemeral range, so
        // they never grab a port another test's daemon is about to reuse.
        let mut spec = if nodes > 16 {
            (0..20u16)
                .find_map(|k| {
                    let base = 20000 + ((std::process::id() % 16) as u16 + k * 3) * 500;
                    ClusterSpec::with_ports(
                        &tmp.path().join("cluster"),
                        nodes,
                        &bin_dir(),
                        Some(base),
                    )
                    .ok()
                })
                .expect("a free block of ports")
        } else {
            ClusterSpec::new(&tmp.path().join("cluster"), nodes, &bin_dir()).expect("spec")
        };
        tune(&mut spec);
        // A port is chosen free, then released until its daemon listens:
        // another test's process may take it meanwhile. Then the cluster is
        // started again on other ports (its daemons stopped, its logs and
        // state put aside); any other failure ends the test.
        let mut attempt = 0;
        let c = loop {
            match LocalCluster::start(spec.clone()) {
                Ok(c) => break c,
                Err(e) => {
                    let logs = dump_logs(&spec.dir.join("log"));
                    let clash = logs.contains("Address already in use");
                    if !clash || attempt == 2 || !spec.backups().is_empty() {
                        panic!("cluster did not start: {e}\n{logs}");
                    }
                    attempt += 1;
                    eprintln!("a port was taken meanwhile; starting again on others ({e})");
                    for sub in ["log", "state"] {
                        let _ = std::fs::rename(
                            spec.dir.join(sub),
                            spec.dir.join(format!("{sub}.clash{attempt}")),
                        );
                    }
                    let fresh =
                        ClusterSpec::new(&spec.dir, spec.nodes, &spec.bin_dir).expect("ports");
                    spec.ctld_port = fresh.ctld_port;
                    spec.dbd_port = fresh.dbd_port;
                    spec.slurmd_ports = fresh.slurmd_ports;
                }
            }
        };
        let work = tmp.path().join("work");
        std::fs::create_dir_all(&work).expect("work dir");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
        TestCluster { c, work, _tmp: tmp }
    }

    /// A command of this cluster, run in the work directory.
    pub fn cmd(&self, prog: &str) -> Command {
        let mut c = self.c.command(prog);
        c.current_dir(&self.work).env("PATH", self.path());
        c
    }

    /// PATH for commands and jobs: this build's binaries first, then the
    /// system's (jobs run `srun`, `mpirun` and `python3` from it).
    pub fn path(&self) -> String {
        format!(
            "{}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            self.c.spec.bin_dir.display()
        )
    }

    /// The same command run as the unprivileged test user.
    pub fn cmd_as(&self, uid: u32, gid: u32, prog: &str) -> Command {
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={uid}"))
            .arg(format!("--regid={gid}"))
            .arg("--clear-groups")
            .arg(self.c.spec.bin_dir.join(prog))
            .env("SLURM_CONF", self.c.spec.conf_path())
            .env("PATH", self.path())
            .current_dir(&self.work);
        c
    }

    pub fn run(&self, prog: &str, args: &[&str]) -> Output {
        self.cmd(prog).args(args).output().expect("run command")
    }

    /// `srun --jobid JOB ARGS...` started (a step of a running job), its
    /// output piped.
    pub fn spawn_step(&self, job: JobId, args: &[&str]) -> std::process::Child {
        self.cmd("srun")
            .arg(format!("--jobid={job}"))
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start srun")
    }

    /// Runs `prog` with `args` as the test's ordinary user.
    pub fn run_as_user(&self, prog: &str, args: &[&str]) -> Output {
        self.cmd_as(TEST_UID, TEST_GID, prog)
            .args(args)
            .output()
            .expect("run command")
    }

    /// Makes `prog` commands of this cluster without borrowing it, for
    /// threads that submit while the test restarts daemons.
    pub fn cmd_factory(&self, prog: &str, args: &[&str]) -> CmdFactory {
        CmdFactory {
            bin: self.c.spec.bin_dir.join(prog),
            conf: self.c.spec.conf_path(),
            work: self.work.clone(),
            path: self.path(),
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    }

    /// Submit with sbatch (as root) and return the job id.
    pub fn sbatch(&self, args: &[&str]) -> JobId {
        let out = self
            .cmd("sbatch")
            .arg("--parsable")
            .args(args)
            .output()
            .expect("sbatch");
        parse_id(&out)
    }

    /// Submit as the unprivileged test user.
    pub fn sbatch_as_user(&self, args: &[&str]) -> JobId {
        let out = self
            .cmd_as(TEST_UID, TEST_GID, "sbatch")
            .arg("--parsable")
            .args(args)
            .output()
            .expect("sbatch");
        parse_id(&out)
    }

    pub fn jobs(&self) -> Vec<JobRecord> {
        match self.c.call(RequestBody::GetJobs) {
            Ok(Response::Jobs { jobs, .. }) => jobs,
            other => panic!("GetJobs failed: {:?}", other.err()),
        }
    }

    pub fn job(&self, id: JobId) -> Option<JobRecord> {
        self.jobs().into_iter().find(|j| j.job_id == id)
    }

    pub fn nodes(&self) -> Vec<NodeRecord> {
        match self.c.call(RequestBody::GetNodes) {
            Ok(Response::Nodes { nodes, .. }) => nodes,
            other => panic!("GetNodes failed: {:?}", other.err()),
        }
    }

    /// Wait until `pred` holds for job `id`, or fail the test with its record.
    pub fn wait_job(
        &self,
        id: JobId,
        secs: u64,
        what: &str,
        pred: impl Fn(&JobRecord) -> bool,
    ) -> JobRecord {
        let deadline = Instant::now() + Duration::from_secs(secs);
        let mut last = None;
        while Instant::now() < deadline {
            if let Ok(Response::Jobs { jobs, .. }) = self.c.call(RequestBody::GetJobs) {
                if let Some(j) = jobs.into_iter().find(|j| j.job_id == id) {
                    if pred(&j) {
                        return j;
                    }
                    last = Some(j);
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "job {id} never became {what} within {secs}s; last: {:?}\n{}",
            last.map(|j| (j.state, j.reason, j.completing)),
            self.logs()
        );
    }

    /// The scheduling passes the controller has run (sdiag's main cycles).
    pub fn passes(&self) -> u64 {
        match self.c.call(RequestBody::GetDiag) {
            Ok(Response::Diag(d)) => d.main_cycles,
            other => panic!("GetDiag failed: {:?}", other.err()),
        }
    }

    /// Wait until the controller has run `n` more scheduling passes (each
    /// plans the whole queue, backfill and preemption included), so what
    /// was submitted before has been considered: a job still pending then
    /// was held back by the scheduler, not yet to be looked at. A pass runs
    /// after each change and every second while a job waits.
    pub fn wait_passes(&self, n: u64) {
        let from = self.passes();
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.passes() < from + n {
            assert!(
                Instant::now() < deadline,
                "no scheduling pass in 30 s\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Wait until the job has finished and cleaned up.
    pub fn wait_done(&self, id: JobId, secs: u64) -> JobRecord {
        self.wait_job(id, secs, "finished", |j| {
            j.state.is_finished() && !j.completing
        })
    }

    pub fn wait_node(
        &self,
        name: &str,
        secs: u64,
        what: &str,
        pred: impl Fn(&NodeRecord) -> bool,
    ) -> NodeRecord {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            if let Ok(Response::Nodes { nodes, .. }) = self.c.call(RequestBody::GetNodes) {
                if let Some(n) = nodes.into_iter().find(|n| n.name == name) {
                    if pred(&n) {
                        return n;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "node {name} never became {what} within {secs}s\n{}",
            self.logs()
        );
    }

    pub fn logs(&self) -> String {
        dump_logs(&self.c.spec.dir.join("log"))
    }
}

fn parse_id(out: &Output) -> JobId {
    let s = String::from_utf8_lossy(&out.stdout);
    s.trim()
        .split(';')
        .next()
        .unwrap_or("")
        .parse()
        .unwrap_or_else(|_| {
            panic!(
                "sbatch failed ({}): stdout {s:?} stderr {:?}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

/// The tail of every log in `dir`, for failure messages.
pub fn dump_logs(dir: &Path) -> String {
    let mut s = String::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        let mut files: Vec<_> = rd.flatten().map(|e| e.path()).collect();
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            s.push_str(&format!("==== {}\n", f.display()));
            for l in tail.into_iter().rev() {
                s.push_str(l);
                s.push('\n');
            }
        }
    }
    s
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A request to the controller signed with `key` as `uid` at `now`, its
/// credential bound to it (as the commands make them).
pub fn ctld_request(
    key: &slurm_common::auth::Key,
    uid: u32,
    body: RequestBody,
    now: i64,
) -> slurm_proto::Request {
    let b = slurm_common::auth::Binding::for_body(&body, slurm_common::auth::TO_CTLD).unwrap();
    slurm_proto::Request {
        cred: key.sign(uid, uid, "test", now, &b),
        body,
    }
}

/// The same for slurmdbd.
pub fn dbd_request(
    key: &slurm_common::auth::Key,
    uid: u32,
    body: slurm_proto::acct::AcctRequest,
    now: i64,
) -> slurm_proto::acct::DbdRequest {
    let b = slurm_common::dbd::bound(&body);
    slurm_proto::acct::DbdRequest {
        cred: key.sign(uid, uid, "test", now, &b),
        body,
    }
}

/// A raw HTTP/2 connection to the controller at `addr` (inside TLS with
/// `tls`), for tests that send what a gRPC client would not: a message
/// length that lies, a body left half sent. Call inside a tokio runtime;
/// the connection is driven by a task of its own.
pub async fn raw_grpc(
    addr: &str,
    tls: &std::sync::Arc<rustls::ClientConfig>,
) -> h2::client::SendRequest<bytes::Bytes> {
    let conn = slurm_common::net::connect_async_with(Some(tls), addr, "localhost")
        .await
        .expect("connect");
    let (send, connection) = h2::client::handshake(conn).await.expect("HTTP/2 handshake");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    send
}

/// Start a gRPC call of `method` (a full path) on `send` with no
/// credential, and send `head` of its body without ending it.
pub async fn raw_grpc_call(
    send: &mut h2::client::SendRequest<bytes::Bytes>,
    method: &str,
    head: bytes::Bytes,
) -> (h2::client::ResponseFuture, h2::SendStream<bytes::Bytes>) {
    let req = http::Request::post(format!("http://localhost{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .expect("a request");
    let mut ready = send.clone().ready().await.expect("stream slot");
    let (resp, mut body) = ready.send_request(req, false).expect("send request");
    body.send_data(head, false).expect("send body");
    *send = ready;
    (resp, body)
}

/// The gRPC status (code, message) an answer carries in its headers or
/// trailers; `None` while it has none.
pub async fn grpc_status(resp: h2::client::ResponseFuture) -> Option<(i32, String)> {
    let r = resp.await.ok()?;
    let pick = |h: &http::HeaderMap| {
        let code = h.get("grpc-status")?.to_str().ok()?.parse().ok()?;
        let msg = h
            .get("grpc-message")
            .and_then(|m| m.to_str().ok())
            .unwrap_or("")
            .to_string();
        Some((code, msg))
    };
    if let Some(s) = pick(r.headers()) {
        return Some(s);
    }
    let mut body = r.into_body();
    while let Some(d) = body.data().await {
        if d.is_err() {
            break;
        }
    }
    let trailers = body.trailers().await.ok()??;
    pick(&trailers)
}

/// Send `body` to the controller of `t` over a gRPC channel of its own,
/// with the credential `cred` makes for the call's binding (a test's own
/// signature, token or forgery).
pub fn grpc_call(
    t: &TestCluster,
    body: RequestBody,
    cred: impl FnOnce(&slurm_common::auth::Binding) -> slurm_proto::Credential,
) -> Response {
    let (_, addr) = t.command_tls();
    grpc_call_to(t, &addr, "localhost", body, cred)
}

/// [`grpc_call`] to the controller at `addr` whose certificate names
/// `server` (a backup controller, say).
pub fn grpc_call_to(
    t: &TestCluster,
    addr: &str,
    server: &str,
    body: RequestBody,
    cred: impl FnOnce(&slurm_common::auth::Binding) -> slurm_proto::Credential,
) -> Response {
    let call = slurm_proto::grpc::commands::CommandCall::from_body(body)
        .unwrap_or_else(|b| panic!("no controller method for {b:?}"));
    let (tls, _) = t.command_tls();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let ch = slurm_common::grpc::channel(Some(tls.client.clone()), addr, server)?;
        slurm_common::grpc::call_command(
            &ch,
            server,
            call,
            |b| Ok(cred(b)),
            Duration::from_secs(10),
        )
        .await
    })
    .expect("the controller answers")
}
