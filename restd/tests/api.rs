//! End to end: a real controller and node daemons (`slurm_local`), a
//! `slurmrestd` process on 127.0.0.1 and on a unix socket, every served
//! path driven, and every response validated against the schema that our
//! OpenAPI document gives for its path, method and status.
//!
//! Needs the daemons built: `cargo build --workspace --bins`.

use serde_json::{json, Value};
use slurm_local::{free_port, ClusterSpec, LocalCluster};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NOBODY: &str = "nobody";

fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let mut dir = exe.parent().expect("exe dir").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    for b in ["slurmctld", "slurmd"] {
        assert!(
            dir.join(b).exists(),
            "{b} missing in {}: run `cargo build --workspace --bins` before these tests",
            dir.display()
        );
    }
    dir
}

// ------------------------------------------------------------- tiny client

struct Reply {
    status: u16,
    body: Value,
    raw: String,
}

enum Target<'a> {
    Tcp(&'a str),
    Unix(&'a Path),
}

fn http(
    target: &Target,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Reply {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    req.push_str("\r\n");
    if let Some(b) = body {
        req.push_str(b);
    }
    let mut buf = Vec::new();
    match target {
        Target::Tcp(addr) => {
            let mut s = std::net::TcpStream::connect(addr).expect("connect slurmrestd");
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            s.write_all(req.as_bytes()).unwrap();
            s.read_to_end(&mut buf).expect("read reply");
        }
        Target::Unix(p) => {
            let mut s = std::os::unix::net::UnixStream::connect(p).expect("connect unix socket");
            s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            s.write_all(req.as_bytes()).unwrap();
            s.read_to_end(&mut buf).expect("read reply");
        }
    }
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").expect("http head");
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status code");
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    });
    let raw = if chunked {
        dechunk(rest)
    } else {
        rest.to_string()
    };
    let body = serde_json::from_str(&raw).unwrap_or(Value::Null);
    Reply { status, body, raw }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
    out
}

// ---------------------------------------------------------- the validator

struct Checker {
    doc: Value,
    count: usize,
}

impl Checker {
    /// Validate `r` against the schema of `template` (a path of the
    /// document) for `method` and the reply's status; panic with every
    /// violation.
    fn check(&mut self, template: &str, method: &str, r: &Reply) {
        let op = &self.doc["paths"][template][method];
        assert!(op.is_object(), "{method} {template} is not in our document");
        let resp = op["responses"]
            .get(r.status.to_string())
            .unwrap_or(&op["responses"]["default"]);
        let reference = resp["content"]["application/json"]["schema"]["$ref"]
            .as_str()
            .unwrap_or_else(|| panic!("no schema for {method} {template} {}", r.status));
        let schema = json!({"$ref": reference, "components": self.doc["components"]});
        let v = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft4)
            .build(&schema)
            .expect("schema compiles");
        let errs: Vec<String> = v
            .iter_errors(&r.body)
            .map(|e| format!("{} at {}", e, e.instance_path))
            .collect();
        assert!(
            errs.is_empty(),
            "{method} {template} ({}) violates {reference}:\n{}\nbody: {}",
            r.status,
            errs.join("\n"),
            &r.raw[..r.raw.len().min(3000)]
        );
        for k in ["meta", "errors", "warnings"] {
            assert!(
                r.body.get(k).is_some(),
                "{method} {template}: no {k}: {}",
                r.raw
            );
        }
        self.count += 1;
    }
}

struct Restd {
    child: Child,
}

impl Drop for Restd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("timed out waiting for {what}");
}

/// A `slurm/v0.0.44` path.
fn p(x: &str) -> String {
    format!("/slurm/v0.0.44{x}")
}

fn first_error(r: &Reply) -> String {
    r.body["errors"][0]["error"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

// ------------------------------------------------- slurm/v0.0.44 tests

/// A 2-node cluster (JWT auth beside slurm.key, `Licenses=matlab:3`)
/// with slurmrestd in front of it on TCP and on a unix socket. Dropped in
/// field order: slurmrestd first.
struct Fixture {
    _restd: Restd,
    cluster: LocalCluster,
    bins: PathBuf,
    addr: String,
    sock: PathBuf,
    /// A directory every user may write (jobs' working directory).
    work: PathBuf,
    key_bytes: Vec<u8>,
    root_tok: String,
    nobody_tok: String,
    bearer: String,
    /// Our OpenAPI document, as served.
    doc: Value,
    _tmp: tempfile::TempDir,
}

impl Fixture {
    fn start() -> Fixture {
        let bins = bin_dir();
        let tmp = tempfile::Builder::new()
            .prefix("restd-test-")
            .tempdir()
            .unwrap();
        let dir = tmp.path().join("cluster");
        std::fs::create_dir_all(&dir).unwrap();
        let jwt_key = dir.join("jwt_hs256.key");
        let key_bytes: Vec<u8> = (0..32u8).map(|i| b'a' + i % 26).collect();
        std::fs::write(&jwt_key, &key_bytes).unwrap();
        let mut spec = ClusterSpec::new(&dir, 2, &bins).expect("spec");
        spec.extra_conf = format!(
            "AuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key={}\nLicenses=matlab:3\n",
            jwt_key.display()
        );
        let cluster = LocalCluster::start(spec).expect("cluster starts");
        let work = tmp.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o1777)).unwrap();

        let port = free_port("127.0.0.1").unwrap();
        let addr = format!("127.0.0.1:{port}");
        let sock = dir.join("restd.sock");
        let log = std::fs::File::create(dir.join("log/slurmrestd.log")).unwrap();
        let restd = Restd {
            child: Command::new(env!("CARGO_BIN_EXE_slurmrestd"))
                .arg("-f")
                .arg(cluster.spec.conf_path())
                .arg(&addr)
                .arg(format!("unix:{}", sock.display()))
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("start slurmrestd"),
        };
        wait_for("slurmrestd", Duration::from_secs(20), || {
            std::net::TcpStream::connect(&addr).is_ok() && sock.exists()
        });
        let root_tok = slurmrestd::jwt::mint_token(&key_bytes, "root", 600).unwrap();
        let nobody_tok = slurmrestd::jwt::mint_token(&key_bytes, NOBODY, 600).unwrap();
        let bearer = format!("Bearer {nobody_tok}");

        // Our document covers exactly what we serve.
        let r = http(&Target::Tcp(&addr), "GET", "/openapi/v3", &[], None);
        assert_eq!(r.status, 200);
        let served: Vec<&str> = slurmrestd::spec::SERVED.iter().map(|(p, _)| *p).collect();
        let mut got: Vec<&str> = r.body["paths"]
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        got.sort();
        let mut want = served.clone();
        want.sort();
        assert_eq!(got, want);
        Fixture {
            _restd: restd,
            cluster,
            bins,
            addr,
            sock,
            work,
            key_bytes,
            root_tok,
            nobody_tok,
            bearer,
            doc: r.body,
            _tmp: tmp,
        }
    }

    fn tcp(&self) -> Target<'_> {
        Target::Tcp(&self.addr)
    }

    fn checker(&self) -> Checker {
        Checker {
            doc: self.doc.clone(),
            count: 0,
        }
    }

    fn root(&self) -> Vec<(&'static str, &str)> {
        vec![
            ("X-SLURM-USER-NAME", "root"),
            ("X-SLURM-USER-TOKEN", &self.root_tok),
        ]
    }

    fn as_nobody(&self) -> Vec<(&'static str, &str)> {
        vec![("Authorization", &self.bearer)]
    }

    fn root_for_nobody(&self) -> Vec<(&'static str, &str)> {
        vec![
            ("X-SLURM-USER-NAME", NOBODY),
            ("X-SLURM-USER-TOKEN", &self.root_tok),
        ]
    }
}

#[test]
fn tokens_and_authentication() {
    let f = Fixture::start();
    let mut ck = f.checker();
    let tcp = f.tcp();
    let unix = Target::Unix(&f.sock);
    let as_nobody = f.as_nobody();
    let nobody_tok = &f.nobody_tok;
    let cluster = &f.cluster;
    let bins = &f.bins;
    let key_bytes = &f.key_bytes;
    // ---- scontrol token: the controller mints tokens restd accepts; a user
    // gets only their own, root may ask for anyone's.
    let scontrol = bins.join("scontrol");
    let as_user = |args: &[&str]| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&scontrol)
            .args(args)
            .env("SLURM_CONF", cluster.spec.conf_path())
            .output()
            .unwrap()
    };
    let o = as_user(&["token"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let tok = out
        .trim()
        .strip_prefix("SLURM_JWT=")
        .unwrap_or_else(|| panic!("{out}{}", String::from_utf8_lossy(&o.stderr)))
        .to_string();
    assert_eq!(
        slurmrestd::jwt::verify_token(key_bytes, &tok, now_secs())
            .unwrap()
            .sun,
        NOBODY
    );
    let hdr = format!("Bearer {tok}");
    let r = http(&tcp, "GET", &p("/jobs/"), &[("Authorization", &hdr)], None);
    assert_eq!(r.status, 200, "{}", r.raw);
    let o = as_user(&["token", "username=root"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr).to_lowercase();
    assert!(
        err.contains("slurm_request_token") && err.contains("denied"),
        "{err}"
    );
    let o = Command::new(&scontrol)
        .args(["token", "username=nobody", "lifespan=60"])
        .env("SLURM_CONF", cluster.spec.conf_path())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let tok = out
        .trim()
        .strip_prefix("SLURM_JWT=")
        .expect("root gets nobody's token");
    let c = slurmrestd::jwt::verify_token(key_bytes, tok, now_secs()).unwrap();
    assert!(c.exp - now_secs() <= 60);

    // ---- authentication
    let r = http(&tcp, "GET", &p("/jobs/"), &[], None);
    assert_eq!(r.status, 401, "{}", r.raw);
    ck.check(&p("/jobs/"), "get", &r);
    let r = http(
        &tcp,
        "GET",
        &p("/jobs/"),
        &[("X-SLURM-USER-TOKEN", "not.a.token")],
        None,
    );
    assert_eq!(r.status, 401);
    let forged = slurmrestd::jwt::mint_token(b"some other key, 16+ bytes", "root", 600).unwrap();
    let r = http(
        &tcp,
        "GET",
        &p("/ping/"),
        &[("X-SLURM-USER-TOKEN", &forged)],
        None,
    );
    assert_eq!(r.status, 401);
    ck.check(&p("/ping/"), "get", &r);
    let expired = slurmrestd::jwt::mint_token_at(key_bytes, "root", 1000, 10).unwrap();
    let r = http(
        &tcp,
        "GET",
        &p("/ping/"),
        &[("X-SLURM-USER-TOKEN", &expired)],
        None,
    );
    assert_eq!(r.status, 401);
    assert!(r.raw.contains("expired"), "{}", r.raw);
    // Only root/SlurmUser may act for someone else.
    let r = http(
        &tcp,
        "GET",
        &p("/ping/"),
        &[
            ("X-SLURM-USER-NAME", "root"),
            ("X-SLURM-USER-TOKEN", nobody_tok),
        ],
        None,
    );
    assert_eq!(r.status, 401, "{}", r.raw);
    let r = http(&tcp, "GET", &p("/ping/"), &as_nobody, None);
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_eq!(r.body["meta"]["client"]["user"], NOBODY);
    // rest_auth/local over the unix socket: we are root.
    let r = http(&unix, "GET", &p("/ping/"), &[], None);
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_eq!(r.body["meta"]["client"]["user"], "root");
    ck.check(&p("/ping/"), "get", &r);
    let r = http(
        &unix,
        "GET",
        &p("/ping/"),
        &[("X-SLURM-USER-NAME", NOBODY)],
        None,
    );
    assert_eq!(r.body["meta"]["client"]["user"], NOBODY, "{}", r.raw);

    eprintln!("{} responses validated", ck.count);
}

#[test]
fn ping_diag_licenses_shares_and_reconfigure() {
    let f = Fixture::start();
    let mut ck = f.checker();
    let tcp = f.tcp();
    let root = f.root();
    let as_nobody = f.as_nobody();
    // ---- ping, diag, licenses, shares, reconfigure
    let r = http(&tcp, "GET", &p("/ping/"), &root, None);
    assert_eq!(r.status, 200);
    assert_eq!(r.body["pings"][0]["responding"], true);
    assert_eq!(
        r.body["meta"]["slurm"]["release"],
        slurm_proto::SLURM_VERSION
    );
    ck.check(&p("/ping/"), "get", &r);
    let r = http(&tcp, "GET", &p("/diag/"), &root, None);
    assert_eq!(r.status, 200, "{}", r.raw);
    ck.check(&p("/diag/"), "get", &r);
    let r = http(&tcp, "GET", &p("/licenses/"), &root, None);
    assert_eq!(r.status, 200);
    ck.check(&p("/licenses/"), "get", &r);
    assert_eq!(r.body["licenses"][0]["LicenseName"], "matlab", "{}", r.raw);
    assert_eq!(r.body["licenses"][0]["Total"], 3, "{}", r.raw);
    let r = http(&tcp, "GET", &p("/shares"), &root, None);
    assert!(r.status == 200 || r.status == 422, "{}", r.raw);
    ck.check(&p("/shares"), "get", &r);
    // Without slurmdbd accounting the slurmdb paths say so.
    let r = http(&tcp, "GET", "/slurmdb/v0.0.44/ping/", &root, None);
    assert_eq!(r.status, 503, "{}", r.raw);
    assert!(r.raw.contains("AccountingStorageType"), "{}", r.raw);
    ck.check("/slurmdb/v0.0.44/ping/", "get", &r);
    let r = http(&tcp, "GET", &p("/reconfigure/"), &root, None);
    assert_eq!(r.status, 200, "{}", r.raw);
    ck.check(&p("/reconfigure/"), "get", &r);
    let r = http(&tcp, "GET", &p("/reconfigure/"), &as_nobody, None);
    assert!(r.status >= 400, "{}", r.raw);
    ck.check(&p("/reconfigure/"), "get", &r);

    eprintln!("{} responses validated", ck.count);
}

#[test]
fn jobs_are_submitted_read_updated_and_cancelled() {
    let f = Fixture::start();
    let mut ck = f.checker();
    let tcp = f.tcp();
    let root = f.root();
    let as_nobody = f.as_nobody();
    let root_for_nobody = f.root_for_nobody();
    let work = &f.work;
    // ---- submit as nobody (root acting for nobody), read back
    let wd = work.display().to_string();
    let body = json!({
        "script": "#!/bin/sh\nsleep 60\n",
        "job": {
            "name": "rest1",
            "current_working_directory": wd,
            "environment": ["PATH=/usr/bin:/bin"],
            "time_limit": {"set": true, "infinite": false, "number": 5},
            "tasks": 1,
            "memory_per_node": 10,
            "standard_output": "rest-%j.out",
            "comment": "from rest",
        }
    })
    .to_string();
    let r = http(
        &tcp,
        "POST",
        &p("/job/submit"),
        &root_for_nobody,
        Some(&body),
    );
    assert_eq!(r.status, 200, "{}", r.raw);
    ck.check(&p("/job/submit"), "post", &r);
    let id = r.body["job_id"].as_u64().expect("job id");
    assert_eq!(r.body["step_id"], "batch");
    let jp = p(&format!("/job/{id}"));
    let r = http(&tcp, "GET", &jp, &as_nobody, None);
    assert_eq!(r.status, 200, "{}", r.raw);
    ck.check(&p("/job/{job_id}"), "get", &r);
    let j = &r.body["jobs"][0];
    assert_eq!(j["job_id"], id);
    assert_eq!(j["name"], "rest1");
    assert_eq!(j["user_name"], NOBODY);
    assert_eq!(j["comment"], "from rest");
    assert_eq!(
        j["time_limit"],
        json!({"set": true, "infinite": false, "number": 5})
    );
    assert_eq!(j["standard_output"], format!("{wd}/rest-%j.out"));
    assert_eq!(j["current_working_directory"], wd);
    assert!(j["job_state"].is_array());
    wait_for("job to run", Duration::from_secs(30), || {
        http(&tcp, "GET", &jp, &as_nobody, None).body["jobs"][0]["job_state"] == json!(["RUNNING"])
    });
    let r = http(&tcp, "GET", &jp, &as_nobody, None);
    ck.check(&p("/job/{job_id}"), "get", &r);
    assert!(!r.body["jobs"][0]["nodes"].as_str().unwrap().is_empty());
    assert_eq!(r.body["jobs"][0]["start_time"]["set"], true);

    // jobs/ and update_time
    let r = http(&tcp, "GET", &p("/jobs/"), &root, None);
    assert_eq!(r.status, 200);
    ck.check(&p("/jobs/"), "get", &r);
    assert!(r.body["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|j| j["job_id"] == id));
    let last = r.body["last_update"]["number"].as_i64().unwrap();
    let r = http(
        &tcp,
        "GET",
        &p(&format!("/jobs/?update_time={last}")),
        &root,
        None,
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.body["jobs"], json!([]));
    assert_eq!(r.body["last_update"]["number"], last);
    ck.check(&p("/jobs/"), "get", &r);
    let r = http(
        &tcp,
        "GET",
        &p("/jobs/?update_time=yesterday-ish"),
        &root,
        None,
    );
    assert_eq!(r.status, 400);
    ck.check(&p("/jobs/"), "get", &r);
    let r = http(
        &tcp,
        "GET",
        &p(&format!("/jobs/state/?job_id={id}")),
        &root,
        None,
    );
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_eq!(r.body["jobs"][0]["job_state"], json!(["RUNNING"]));
    ck.check(&p("/jobs/state/"), "get", &r);
    let r = http(&tcp, "GET", &p("/jobs/state/"), &root, None);
    assert_eq!(r.status, 200);
    ck.check(&p("/jobs/state/"), "get", &r);

    // resources
    let r = http(&tcp, "GET", &p(&format!("/resources/{id}")), &root, None);
    assert_eq!(r.status, 200, "{}", r.raw);
    assert!(!r.body["nodes"].as_array().unwrap().is_empty());
    ck.check(&p("/resources/{job_id}"), "get", &r);

    // update
    let r = http(&tcp, "POST", &jp, &as_nobody, Some(r#"{"time_limit": 4}"#));
    assert_eq!(r.status, 200, "{}", r.raw);
    ck.check(&p("/job/{job_id}"), "post", &r);
    let r = http(&tcp, "GET", &jp, &as_nobody, None);
    assert_eq!(r.body["jobs"][0]["time_limit"]["number"], 4);
    let r = http(&tcp, "POST", &jp, &as_nobody, Some("{\"time_limit\": }"));
    assert_eq!(r.status, 400);
    assert!(r.raw.contains("line 1 column"), "{}", r.raw);
    ck.check(&p("/job/{job_id}"), "post", &r);

    // errors: unknown job, bad id, bad body, semantic rejection
    let r = http(&tcp, "GET", &p("/job/999999"), &root, None);
    assert_eq!(r.status, 404);
    assert_eq!(first_error(&r), "Invalid job id specified");
    ck.check(&p("/job/{job_id}"), "get", &r);
    let r = http(&tcp, "GET", &p("/job/abc"), &root, None);
    assert_eq!(r.status, 400);
    ck.check(&p("/job/{job_id}"), "get", &r);
    let r = http(&tcp, "DELETE", &p("/job/999999"), &root, None);
    assert_eq!(r.status, 404, "{}", r.raw);
    ck.check(&p("/job/{job_id}"), "delete", &r);
    let bad = json!({"job": {"script": "#!/bin/sh\n", "current_working_directory": wd, "time_limit": "soon"}}).to_string();
    let r = http(&tcp, "POST", &p("/job/submit"), &root, Some(&bad));
    assert_eq!(r.status, 400);
    assert!(r.raw.contains("job/time_limit"), "{}", r.raw);
    ck.check(&p("/job/submit"), "post", &r);
    let r = http(&tcp, "POST", &p("/job/submit"), &root, Some("[1,2"));
    assert_eq!(r.status, 400);
    ck.check(&p("/job/submit"), "post", &r);
    let nopart = json!({"job": {"script": "#!/bin/sh\n", "current_working_directory": wd, "partition": "nosuch"}}).to_string();
    let r = http(&tcp, "POST", &p("/job/submit"), &root, Some(&nopart));
    assert_eq!(r.status, 422, "{}", r.raw);
    assert_eq!(first_error(&r), "Invalid partition name specified");
    ck.check(&p("/job/submit"), "post", &r);

    // allocate, bulk cancel
    let alloc = json!({"job": {"current_working_directory": wd, "tasks": 1, "time_limit": 2, "name": "alloc1"}}).to_string();
    let r = http(
        &tcp,
        "POST",
        &p("/job/allocate"),
        &root_for_nobody,
        Some(&alloc),
    );
    assert_eq!(r.status, 200, "{}", r.raw);
    ck.check(&p("/job/allocate"), "post", &r);
    let aid = r.body["job_id"].as_u64().unwrap();
    let kill = json!({"jobs": [aid.to_string()]}).to_string();
    let r = http(&tcp, "DELETE", &p("/jobs/"), &root, Some(&kill));
    assert_eq!(r.status, 200, "{}", r.raw);
    ck.check(&p("/jobs/"), "delete", &r);
    let r = http(&tcp, "DELETE", &p("/jobs/"), &root, Some("{}"));
    assert_eq!(r.status, 400);
    ck.check(&p("/jobs/"), "delete", &r);

    // cancel the batch job
    let r = http(&tcp, "DELETE", &jp, &as_nobody, None);
    assert_eq!(r.status, 200, "{}", r.raw);
    ck.check(&p("/job/{job_id}"), "delete", &r);
    wait_for("job to be cancelled", Duration::from_secs(30), || {
        let st = &http(&tcp, "GET", &jp, &as_nobody, None).body["jobs"][0]["job_state"];
        st.as_array()
            .is_some_and(|a| a.contains(&json!("CANCELLED")))
    });
    let r = http(&tcp, "GET", &jp, &as_nobody, None);
    ck.check(&p("/job/{job_id}"), "get", &r);

    eprintln!("{} responses validated", ck.count);
}

#[test]
fn nodes_and_what_slurm_bridge_does() {
    let f = Fixture::start();
    let mut ck = f.checker();
    let tcp = f.tcp();
    let root = f.root();
    let as_nobody = f.as_nobody();
    let root_for_nobody = f.root_for_nobody();
    let work = &f.work;
    // A job of nobody's, held, to read and to refuse changes to.
    let wd = work.display().to_string();
    let (_, jp) = held_job_of_nobody(&tcp, &root_for_nobody, &wd);
    // ---- nodes
    let r = http(&tcp, "GET", &p("/nodes/"), &root, None);
    assert_eq!(r.status, 200);
    assert_eq!(r.body["nodes"].as_array().unwrap().len(), 2);
    ck.check(&p("/nodes/"), "get", &r);
    let r = http(&tcp, "GET", &p("/node/n1"), &root, None);
    assert_eq!(r.status, 200);
    assert_eq!(r.body["nodes"][0]["name"], "n1");
    assert_eq!(r.body["nodes"][0]["cpus"], 4);
    ck.check(&p("/node/{node_name}"), "get", &r);
    let r = http(&tcp, "GET", &p("/node/zz9"), &root, None);
    assert_eq!(r.status, 404);
    ck.check(&p("/node/{node_name}"), "get", &r);
    let r = http(
        &tcp,
        "POST",
        &p("/node/n1"),
        &root,
        Some(r#"{"state": ["DRAIN"], "reason": "rest test"}"#),
    );
    assert_eq!(r.status, 200, "{}", r.raw);
    ck.check(&p("/node/{node_name}"), "post", &r);
    let r = http(&tcp, "GET", &p("/node/n1"), &root, None);
    assert!(
        r.body["nodes"][0]["state"]
            .as_array()
            .unwrap()
            .contains(&json!("DRAIN")),
        "{}",
        r.raw
    );
    assert_eq!(r.body["nodes"][0]["reason"], "rest test");
    let r = http(
        &tcp,
        "POST",
        &p("/node/n1"),
        &as_nobody,
        Some(r#"{"state": ["RESUME"]}"#),
    );
    assert_eq!(r.status, 403, "{}", r.raw);
    ck.check(&p("/node/{node_name}"), "post", &r);
    let r = http(
        &tcp,
        "POST",
        &p("/node/n1"),
        &root,
        Some(r#"{"state": ["RESUME"]}"#),
    );
    assert_eq!(r.status, 200, "{}", r.raw);
    let r = http(
        &tcp,
        "POST",
        &p("/node/n1"),
        &root,
        Some(r#"{"state": ["FLYING"]}"#),
    );
    assert_eq!(r.status, 400);
    ck.check(&p("/node/{node_name}"), "post", &r);
    let r = http(
        &tcp,
        "POST",
        &p("/nodes/"),
        &root,
        Some(r#"{"name": ["n2"], "state": ["DRAIN"], "reason": "bulk"}"#),
    );
    assert_eq!(r.status, 200, "{}", r.raw);
    ck.check(&p("/nodes/"), "post", &r);
    let r = http(
        &tcp,
        "POST",
        &p("/nodes/"),
        &root,
        Some(r#"{"name": ["n2"], "state": ["RESUME"]}"#),
    );
    assert_eq!(r.status, 200, "{}", r.raw);

    // ---- node features change through REST
    let r = http(
        &tcp,
        "POST",
        &p("/node/n2"),
        &root,
        Some(r#"{"features": ["fast", "ib"]}"#),
    );
    assert_eq!(r.status, 200, "{}", r.raw);
    let r = http(&tcp, "GET", &p("/node/n2"), &root, None);
    assert!(r.raw.contains("\"fast\""), "{}", r.raw);

    // ---- what slurm-bridge does: an admin_comment set by an administrator
    // reads back unchanged; comment, partition and account change while the
    // job waits; users may not touch admin_comment.
    let body = json!({
        "script": "#!/bin/sh\ntrue\n",
        "job": {
            "name": "bridge",
            "current_working_directory": wd,
            "environment": ["PATH=/usr/bin:/bin"],
            "hold": true,
            "admin_comment": "pod=default/p1",
        }
    })
    .to_string();
    let before = http(&tcp, "GET", &p("/jobs/"), &root, None);
    let again = http(&tcp, "GET", &p("/jobs/"), &root, None);
    assert_eq!(
        before.body["jobs"], again.body["jobs"],
        "an unchanged list reads the same"
    );
    ck.check(&p("/jobs/"), "get", &again);
    let r = http(&tcp, "POST", &p("/job/submit"), &root, Some(&body));
    assert_eq!(r.status, 200, "{}", r.raw);
    let bid = r.body["job_id"].as_u64().unwrap();
    // The list follows the change at once.
    let after = http(&tcp, "GET", &p("/jobs/"), &root, None);
    ck.check(&p("/jobs/"), "get", &after);
    let n = |r: &Reply| r.body["jobs"].as_array().map_or(0, |v| v.len());
    assert_eq!(n(&after), n(&before) + 1, "{}", after.raw);
    assert!(after.body["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|j| j["job_id"] == bid));
    let bp = p(&format!("/job/{bid}"));
    let r = http(&tcp, "GET", &bp, &root, None);
    assert_eq!(
        r.body["jobs"][0]["admin_comment"], "pod=default/p1",
        "{}",
        r.raw
    );
    let r = http(
        &tcp,
        "POST",
        &bp,
        &root,
        Some(
            r#"{"comment": "c2", "admin_comment": "pod=default/p2", "account": "acct9", "partition": "debug"}"#,
        ),
    );
    assert_eq!(r.status, 200, "{}", r.raw);
    ck.check(&p("/job/{job_id}"), "post", &r);
    let r = http(&tcp, "GET", &bp, &root, None);
    let j = &r.body["jobs"][0];
    assert_eq!(
        (j["comment"].clone(), j["admin_comment"].clone()),
        (json!("c2"), json!("pod=default/p2"))
    );
    assert_eq!(j["account"], "acct9");
    // The whole list (served per job from restd's cache, refreshed with the
    // controller's changes) agrees with the single job, and then sees the
    // next change too.
    let whole = |tcp: &Target| -> Value {
        let r = http(tcp, "GET", &p("/jobs/"), &root, None);
        assert_eq!(r.status, 200, "{}", r.raw);
        r.body["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["admin_comment"] == "pod=default/p2")
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(whole(&tcp)["comment"], "c2");
    let r = http(&tcp, "POST", &bp, &root, Some(r#"{"comment": "c3"}"#));
    assert_eq!(r.status, 200, "{}", r.raw);
    assert_eq!(whole(&tcp)["comment"], "c3");
    let r = http(&tcp, "POST", &bp, &root, Some(r#"{"partition": "nope"}"#));
    assert!(r.status >= 400, "{}", r.raw);
    let r = http(
        &tcp,
        "POST",
        &jp,
        &as_nobody,
        Some(r#"{"admin_comment": "mine"}"#),
    );
    assert!(r.status >= 400, "a user set admin_comment: {}", r.raw);
    let r = http(&tcp, "DELETE", &bp, &root, None);
    assert_eq!(r.status, 200, "{}", r.raw);

    // new/node, external, delete
    let r = http(
        &tcp,
        "POST",
        &p("/new/node/"),
        &root,
        Some(r#"{"node_conf": "NodeName=ext1 State=External CPUs=2 RealMemory=100"}"#),
    );
    assert_eq!(r.status, 200, "{}", r.raw);
    ck.check(&p("/new/node/"), "post", &r);
    let r = http(&tcp, "GET", &p("/node/ext1"), &root, None);
    assert_eq!(r.status, 200, "{}", r.raw);
    assert!(
        r.body["nodes"][0]["state"]
            .as_array()
            .unwrap()
            .contains(&json!("EXTERNAL")),
        "{}",
        r.raw
    );
    let r = http(&tcp, "DELETE", &p("/node/ext1"), &root, None);
    assert_eq!(r.status, 200, "{}", r.raw);
    ck.check(&p("/node/{node_name}"), "delete", &r);
    let r = http(
        &tcp,
        "POST",
        &p("/new/node/"),
        &root,
        Some(r#"{"node_conf": "CPUs=2"}"#),
    );
    assert_eq!(r.status, 400);
    ck.check(&p("/new/node/"), "post", &r);

    eprintln!("{} responses validated", ck.count);
}

#[test]
fn partitions_reservations_and_unknown_paths() {
    let f = Fixture::start();
    let mut ck = f.checker();
    let tcp = f.tcp();
    let root = f.root();
    // ---- partitions
    let r = http(&tcp, "GET", &p("/partitions/"), &root, None);
    assert_eq!(r.status, 200);
    assert_eq!(r.body["partitions"][0]["name"], "debug");
    ck.check(&p("/partitions/"), "get", &r);
    let r = http(&tcp, "GET", &p("/partition/debug"), &root, None);
    assert_eq!(r.status, 200);
    assert_eq!(r.body["partitions"][0]["nodes"]["total"], 2);
    ck.check(&p("/partition/{partition_name}"), "get", &r);
    let r = http(&tcp, "GET", &p("/partition/nope"), &root, None);
    assert_eq!(r.status, 404);
    ck.check(&p("/partition/{partition_name}"), "get", &r);

    // ---- reservations
    let now = slurm_common::auth::now();
    let resv = json!({
        "name": "maint1", "node_list": ["n2"], "start_time": {"set": true, "number": now + 3600},
        "duration": 10, "flags": ["MAINT"], "users": ["root"],
    })
    .to_string();
    let r = http(&tcp, "POST", &p("/reservation"), &root, Some(&resv));
    assert_eq!(r.status, 200, "{}", r.raw);
    ck.check(&p("/reservation"), "post", &r);
    let r = http(&tcp, "GET", &p("/reservations/"), &root, None);
    assert_eq!(r.status, 200);
    ck.check(&p("/reservations/"), "get", &r);
    assert_eq!(r.body["reservations"][0]["name"], "maint1");
    let r = http(&tcp, "GET", &p("/reservation/maint1"), &root, None);
    assert_eq!(r.status, 200);
    assert_eq!(r.body["reservations"][0]["node_list"], "n2");
    assert_eq!(r.body["reservations"][0]["flags"], json!(["MAINT"]));
    ck.check(&p("/reservation/{reservation_name}"), "get", &r);
    let upd = json!({"reservations": [{"name": "maint1", "duration": 20}]}).to_string();
    let r = http(&tcp, "POST", &p("/reservations/"), &root, Some(&upd));
    assert_eq!(r.status, 200, "{}", r.raw);
    ck.check(&p("/reservations/"), "post", &r);
    let r = http(&tcp, "DELETE", &p("/reservation/maint1"), &root, None);
    assert_eq!(r.status, 200, "{}", r.raw);
    ck.check(&p("/reservation/{reservation_name}"), "delete", &r);
    let r = http(&tcp, "GET", &p("/reservation/maint1"), &root, None);
    assert_eq!(r.status, 404);
    ck.check(&p("/reservation/{reservation_name}"), "get", &r);

    // ---- unknown paths and methods
    let r = http(&tcp, "GET", "/slurm/v0.0.44/nothing/", &root, None);
    assert_eq!(r.status, 404);
    assert!(r.body["errors"].as_array().is_some_and(|e| !e.is_empty()));
    let r = http(&tcp, "PUT", &p("/jobs/"), &root, None);
    assert_eq!(r.status, 405);

    eprintln!("{} responses validated", ck.count);
}

#[test]
fn rest_auth_local_alone_and_bad_command_lines() {
    let f = Fixture::start();
    let mut ck = f.checker();
    let root = f.root();
    let cluster = &f.cluster;
    // ---- rest_auth/local alone identifies nobody over TCP
    let port2 = free_port("127.0.0.1").unwrap();
    let addr2 = format!("127.0.0.1:{port2}");
    let _local_only = Restd {
        child: Command::new(env!("CARGO_BIN_EXE_slurmrestd"))
            .args(["-a", "rest_auth/local", "-f"])
            .arg(cluster.spec.conf_path())
            .arg(&addr2)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start slurmrestd"),
    };
    wait_for("second slurmrestd", Duration::from_secs(20), || {
        std::net::TcpStream::connect(&addr2).is_ok()
    });
    let r = http(&Target::Tcp(&addr2), "GET", &p("/ping/"), &root, None);
    assert_eq!(r.status, 401, "{}", r.raw);
    ck.check(&p("/ping/"), "get", &r);

    // ---- bad command lines are refused with a message
    let out = Command::new(env!("CARGO_BIN_EXE_slurmrestd"))
        .args(["-a", "rest_auth/munge", "127.0.0.1:1"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("rest_auth/munge"));
    let out = Command::new(env!("CARGO_BIN_EXE_slurmrestd"))
        .arg("-V")
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("slurm {}", slurm_proto::SLURM_VERSION)
    );

    eprintln!("{} responses validated", ck.count);
}

#[test]
fn the_commands_json_is_the_rest_schemas() {
    let f = Fixture::start();
    let mut ck = f.checker();
    let tcp = f.tcp();
    let root_for_nobody = f.root_for_nobody();
    let cluster = &f.cluster;
    let work = &f.work;
    // A job of nobody's, held, for the listings.
    let wd = work.display().to_string();
    held_job_of_nobody(&tcp, &root_for_nobody, &wd);
    // ---- the commands' --json bodies are the REST responses' schemas
    for (cmd, args, path) in [
        ("squeue", &["--json"][..], "/jobs/"),
        ("squeue", &["--json=v0.0.44", "-t", "all"][..], "/jobs/"),
        ("sinfo", &["--json"][..], "/nodes/"),
        ("sshare", &["--json"][..], "/shares"),
        ("squeue", &["--yaml"][..], "/jobs/"),
        (
            "squeue",
            &["--json", "--only-job-state"][..],
            "/jobs/state/",
        ),
        ("sinfo", &["--yaml=v0.0.44"][..], "/nodes/"),
        ("sshare", &["--yaml"][..], "/shares"),
        (
            "scontrol",
            &["--yaml", "show", "partition"][..],
            "/partitions/",
        ),
        ("scontrol", &["--json", "show", "job"][..], "/jobs/"),
        ("scontrol", &["show", "node", "--json"][..], "/nodes/"),
        (
            "scontrol",
            &["show", "partition", "--json"][..],
            "/partitions/",
        ),
        (
            "scontrol",
            &["show", "reservation", "--json"][..],
            "/reservations/",
        ),
    ] {
        let o = cluster.command(cmd).args(args).output().unwrap();
        let raw = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            o.status.success(),
            "{cmd} {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let yaml = args.iter().any(|a| a.starts_with("--yaml"));
        let body: Value = if yaml {
            serde_yaml::from_str(&raw).unwrap_or_else(|e| panic!("{cmd} {args:?}: {e}\n{raw}"))
        } else {
            serde_json::from_str(&raw).unwrap_or_else(|e| panic!("{cmd} {args:?}: {e}\n{raw}"))
        };
        assert_eq!(body["meta"]["command"][0], cmd, "{raw}");
        assert_eq!(yaml, !raw.trim_start().starts_with('{'), "{raw}");
        ck.check(
            &p(path),
            "get",
            &Reply {
                status: 200,
                body,
                raw,
            },
        );
    }
    let o = cluster
        .command("squeue")
        .arg("--json=v0.0.38")
        .output()
        .unwrap();
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("data_parser"));

    eprintln!("{} responses validated", ck.count);
}

/// Submit a held job as nobody (root acting for them): its id and path.
fn held_job_of_nobody(tcp: &Target, root_for_nobody: &[(&str, &str)], wd: &str) -> (u64, String) {
    let body = json!({
        "script": "#!/bin/sh\ntrue\n",
        "job": {
            "name": "held",
            "current_working_directory": wd,
            "environment": ["PATH=/usr/bin:/bin"],
            "hold": true,
        }
    })
    .to_string();
    let r = http(tcp, "POST", &p("/job/submit"), root_for_nobody, Some(&body));
    assert_eq!(r.status, 200, "{}", r.raw);
    let id = r.body["job_id"].as_u64().expect("job id");
    (id, p(&format!("/job/{id}")))
}

/// A cluster with slurmdbd and JWT (`key`) auth, and slurmrestd on
/// 127.0.0.1 in front of it. Dropped in field order: restd first.
struct WithDbd {
    _restd: Restd,
    cluster: LocalCluster,
    addr: String,
    dir: PathBuf,
    key: Vec<u8>,
    tmp: tempfile::TempDir,
}

fn cluster_with_dbd(prefix: &str, nodes: u32, key: Vec<u8>, extra_conf: &str) -> WithDbd {
    let bins = bin_dir();
    let tmp = tempfile::Builder::new().prefix(prefix).tempdir().unwrap();
    let dir = tmp.path().join("cluster");
    std::fs::create_dir_all(&dir).unwrap();
    let jwt_key = dir.join("jwt_hs256.key");
    std::fs::write(&jwt_key, &key).unwrap();
    let mut spec = ClusterSpec::new(&dir, nodes, &bins).expect("spec");
    spec.accounting = true;
    spec.extra_conf = format!(
        "AuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key={}\n{extra_conf}",
        jwt_key.display()
    );
    let cluster = LocalCluster::start(spec).expect("cluster starts");
    let port = free_port("127.0.0.1").unwrap();
    let addr = format!("127.0.0.1:{port}");
    let log = std::fs::File::create(dir.join("log/slurmrestd.log")).unwrap();
    let restd = Restd {
        child: Command::new(env!("CARGO_BIN_EXE_slurmrestd"))
            .arg("-f")
            .arg(cluster.spec.conf_path())
            .arg(&addr)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start slurmrestd"),
    };
    wait_for("slurmrestd", Duration::from_secs(20), || {
        std::net::TcpStream::connect(&addr).is_ok()
    });
    WithDbd {
        _restd: restd,
        cluster,
        addr,
        dir,
        key,
        tmp,
    }
}

/// `slurmdb/v0.0.44` against slurmdbd (SQLite) behind a running cluster:
/// every path, each response validated, contents checked against what
/// sbatch and sacctmgr put there.
#[test]
fn slurmdb_api_against_slurmdbd() {
    let setup = cluster_with_dbd(
        "restd-db-test-",
        1,
        (0..32u8).map(|i| b'A' + i % 26).collect(),
        "",
    );
    let (cluster, dir, addr, key_bytes) = (&setup.cluster, &setup.dir, &setup.addr, &setup.key);
    let conf = slurm_common::conf::SlurmConf::load(&cluster.spec.conf_path()).unwrap();
    let tcp = Target::Tcp(addr);
    let tok = slurmrestd::jwt::mint_token(key_bytes, "root", 600).unwrap();
    let root: Vec<(&str, &str)> = vec![("X-SLURM-USER-NAME", "root"), ("X-SLURM-USER-TOKEN", &tok)];
    let doc = http(&tcp, "GET", "/openapi/v3", &[], None);
    let mut ck = Checker {
        doc: doc.body.clone(),
        count: 0,
    };
    let s = "/slurmdb/v0.0.44";
    let p = |x: &str| format!("{s}{x}");
    let get = |path: &str| http(&tcp, "GET", path, &root, None);
    let mut call = |method: &str, template: &str, path: &str, body: Option<&str>, status: u16| {
        let r = http(&tcp, method, path, &root, body);
        assert_eq!(r.status, status, "{method} {path}: {}", r.raw);
        ck.check(template, &method.to_ascii_lowercase(), &r);
        r
    };
    macro_rules! check {
        ($t:expr, $p:expr, $s:expr $(,)?) => {
            call("GET", $t, $p, None, $s)
        };
    }

    // What the database holds: an account, a user in it, a QOS, a job.
    let sacctmgr = |args: &[&str]| {
        let o = cluster
            .command("sacctmgr")
            .arg("-i")
            .args(args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "sacctmgr {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    sacctmgr(&[
        "add",
        "account",
        "physics",
        "Description=particles",
        "Organization=sci",
    ]);
    sacctmgr(&["add", "user", NOBODY, "Account=physics"]);
    sacctmgr(&["add", "qos", "high", "Priority=10", "MaxWall=60"]);
    let o = cluster
        .command("sbatch")
        .args(["--parsable", "-J", "dbjob", "--wrap", "true"])
        .current_dir(dir)
        .output()
        .unwrap();
    let id: u32 = String::from_utf8_lossy(&o.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("sbatch: {}", String::from_utf8_lossy(&o.stderr)));
    let job_path = p(&format!("/job/{id}"));
    wait_for("the job in slurmdbd", Duration::from_secs(60), || {
        let r = get(&job_path);
        r.status == 200 && r.body["jobs"][0]["state"]["current"][0] == "COMPLETED"
    });

    let r = check!(&p("/ping/"), &p("/ping/"), 200);
    assert_eq!(r.body["pings"][0]["responding"], true);
    let r = check!(&p("/diag/"), &p("/diag/"), 200);
    let st = &r.body["statistics"];
    assert!(st["time_start"].as_i64().unwrap() > 0, "{}", r.raw);
    let rpcs = st["RPCs"].as_array().unwrap();
    let count = |name: &str| {
        rpcs.iter()
            .find(|x| x["rpc"] == name)
            .and_then(|x| x["count"].as_u64())
            .unwrap_or(0)
    };
    // The controller's records and our own queries were counted.
    assert!(count("DBD_SEND_RECORDS") > 0, "{}", r.raw);
    assert!(count("DBD_GET_JOBS_COND") > 0, "{}", r.raw);
    assert!(st["users"]
        .as_array()
        .unwrap()
        .iter()
        .any(|u| u["user"] == "root"));
    let r = check!(&p("/job/{job_id}"), &job_path, 200);
    let j = &r.body["jobs"][0];
    assert_eq!(
        (j["job_id"].as_u64(), j["name"].as_str()),
        (Some(id as u64), Some("dbjob"))
    );
    assert_eq!(j["exit_code"]["status"][0], "SUCCESS");
    assert_eq!(j["cluster"], conf.cluster_name.as_str());
    assert!(
        j["steps"].as_array().is_some_and(|s| !s.is_empty()),
        "{}",
        r.raw
    );
    check!(&p("/job/{job_id}"), &p("/job/999999"), 404);
    let r = check!(&p("/jobs/"), &p("/jobs/?users=root&state=COMPLETED"), 200);
    assert!(r.body["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x["job_id"] == id));
    let r = check!(&p("/jobs/"), &p("/jobs/?users=nobody"), 200);
    assert_eq!(r.body["jobs"].as_array().unwrap().len(), 0);
    check!(&p("/jobs/"), &p("/jobs/?state=SLEEPY"), 400);
    check!(&p("/jobs/"), &p("/jobs/?start_time=yesterday"), 400);
    let r = check!(&p("/jobs/"), &p("/jobs/?frobnicate=1"), 200);
    assert!(r.raw.contains("frobnicate"), "{}", r.raw);

    let r = check!(&p("/accounts/"), &p("/accounts/"), 200);
    let acct = r.body["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "physics")
        .cloned()
        .unwrap_or_else(|| panic!("{}", r.raw));
    assert_eq!(
        (acct["description"].as_str(), acct["organization"].as_str()),
        (Some("particles"), Some("sci"))
    );
    check!(&p("/account/{account_name}"), &p("/account/physics"), 200);
    check!(&p("/account/{account_name}"), &p("/account/nosuch"), 404);
    let r = check!(&p("/users/"), &p("/users/"), 200);
    assert!(r.body["users"]
        .as_array()
        .unwrap()
        .iter()
        .any(|u| u["name"] == NOBODY));
    let r = check!(&p("/user/{name}"), &p(&format!("/user/{NOBODY}")), 200);
    assert_eq!(r.body["users"][0]["default"]["account"], "physics");
    assert_eq!(r.body["users"][0]["associations"][0]["account"], "physics");
    check!(&p("/user/{name}"), &p("/user/nosuchuser"), 404);
    let r = check!(
        &p("/associations/"),
        &p(&format!("/associations/?user={NOBODY}")),
        200,
    );
    let a = r.body["associations"].as_array().unwrap();
    assert_eq!(a.len(), 1, "{}", r.raw);
    assert_eq!(
        (a[0]["account"].as_str(), a[0]["is_default"].as_bool()),
        (Some("physics"), Some(true))
    );
    check!(
        &p("/association/"),
        &p("/association/?account=physics"),
        200,
    );
    check!(&p("/associations/"), &p("/associations/?id=x"), 400);
    let r = check!(&p("/qos/"), &p("/qos/"), 200);
    assert!(r.body["qos"]
        .as_array()
        .unwrap()
        .iter()
        .any(|q| q["name"] == "normal"));
    let r = check!(&p("/qos/{qos}"), &p("/qos/high"), 200);
    assert_eq!(r.body["qos"][0]["priority"]["number"], 10);
    assert_eq!(
        r.body["qos"][0]["limits"]["max"]["wall_clock"]["per"]["job"]["number"],
        60
    );
    check!(&p("/qos/{qos}"), &p("/qos/nosuch"), 404);
    let r = check!(&p("/clusters/"), &p("/clusters/"), 200);
    assert_eq!(r.body["clusters"][0]["name"], conf.cluster_name.as_str());
    let one = p(&format!("/cluster/{}", conf.cluster_name));
    let r = check!(&p("/cluster/{cluster_name}"), &one, 200);
    assert_eq!(
        r.body["clusters"][0]["associations"]["root"]["account"],
        "root"
    );
    check!(&p("/cluster/{cluster_name}"), &p("/cluster/nosuch"), 404);
    let r = check!(&p("/tres/"), &p("/tres/"), 200);
    assert_eq!(r.body["TRES"][0]["type"], "cpu");
    assert!(r.body["TRES"][0]["count"].as_u64().unwrap() > 0);
    let r = check!(&p("/config"), &p("/config"), 200);
    for k in [
        "clusters",
        "tres",
        "accounts",
        "users",
        "qos",
        "associations",
    ] {
        assert!(
            r.body[k].as_array().is_some_and(|a| !a.is_empty()),
            "{k}: {}",
            r.raw
        );
    }
    // Writes: add, update, remove (slurmdbd's own checks apply).
    let accounts = p("/accounts/");
    call(
        "POST",
        &accounts,
        &accounts,
        Some(
            r#"{"accounts": [{"name": "chem", "description": "molecules", "organization": "sci"}]}"#,
        ),
        200,
    );
    call(
        "POST",
        &accounts,
        &accounts,
        Some(r#"{"accounts": [{"name": "chem", "description": "reactions"}]}"#),
        200,
    );
    call(
        "POST",
        &accounts,
        &accounts,
        Some(r#"{"accounts": [{"description": "x"}]}"#),
        400,
    );
    call("POST", &accounts, &accounts, Some("{not json"), 400);
    let users = p("/users/");
    call(
        "POST",
        &users,
        &users,
        Some(r#"{"users": [{"name": "daemon", "default": {"account": "chem"}}]}"#),
        200,
    );
    let assocs = p("/associations/");
    call(
        "POST",
        &assocs,
        &assocs,
        Some(r#"{"associations": [{"account": "chem", "user": "daemon", "shares_raw": 7}]}"#),
        200,
    );
    let qos = p("/qos/");
    call(
        "POST",
        &qos,
        &qos,
        Some(r#"{"qos": [{"name": "low", "priority": 1}]}"#),
        200,
    );
    let clusters = p("/clusters/");
    call(
        "POST",
        &clusters,
        &clusters,
        Some(r#"{"clusters": [{"name": "other"}]}"#),
        200,
    );
    let r = check!(&p("/account/{account_name}"), &p("/account/chem"), 200);
    assert_eq!(r.body["accounts"][0]["description"], "reactions");
    assert_eq!(r.body["accounts"][0]["organization"], "sci");
    let r = check!(&p("/user/{name}"), &p("/user/daemon"), 200);
    assert_eq!(r.body["users"][0]["default"]["account"], "chem");
    let r = check!(
        &p("/associations/"),
        &p("/associations/?user=daemon&account=chem"),
        200,
    );
    assert_eq!(r.body["associations"][0]["shares_raw"], 7, "{}", r.raw);
    let r = check!(&p("/qos/{qos}"), &p("/qos/low"), 200);
    assert_eq!(r.body["qos"][0]["priority"]["number"], 1);
    check!(&p("/cluster/{cluster_name}"), &p("/cluster/other"), 200);
    call("DELETE", &assocs, &assocs, None, 400);
    call("DELETE", &p("/user/{name}"), &p("/user/daemon"), None, 200);
    let r = call(
        "DELETE",
        &p("/account/{account_name}"),
        &p("/account/chem"),
        None,
        200,
    );
    assert_eq!(r.body["removed_accounts"][0], "chem", "{}", r.raw);
    call(
        "DELETE",
        &p("/account/{account_name}"),
        &p("/account/chem"),
        None,
        404,
    );
    let r = call("DELETE", &p("/qos/{qos}"), &p("/qos/low"), None, 200);
    assert!(r.raw.contains("low"), "{}", r.raw);
    let r = call(
        "DELETE",
        &p("/cluster/{cluster_name}"),
        &p("/cluster/other"),
        None,
        200,
    );
    assert!(r.raw.contains("other"), "{}", r.raw);
    check!(&p("/account/{account_name}"), &p("/account/chem"), 404);
    // Users may read but not write.
    let nob = slurmrestd::jwt::mint_token(key_bytes, NOBODY, 600).unwrap();
    let r = http(
        &tcp,
        "POST",
        &accounts,
        &[("X-SLURM-USER-NAME", NOBODY), ("X-SLURM-USER-TOKEN", &nob)],
        Some(r#"{"accounts": [{"name": "mine"}]}"#),
    );
    assert_eq!(r.status, 403, "{}", r.raw);

    // The commands' --json and --yaml print the same bodies.
    let jobs_q = format!("-j{id}");
    for (cmd, args, path) in [
        ("sacct", vec![jobs_q.as_str(), "--json"], "/jobs/"),
        ("sacct", vec![jobs_q.as_str(), "--yaml"], "/jobs/"),
        ("sacctmgr", vec!["show", "account", "--json"], "/accounts/"),
        ("sacctmgr", vec!["show", "user", "--yaml"], "/users/"),
        (
            "sacctmgr",
            vec!["show", "assoc", "--json"],
            "/associations/",
        ),
        ("sacctmgr", vec!["show", "qos", "--json"], "/qos/"),
        ("sacctmgr", vec!["show", "cluster", "--json"], "/clusters/"),
    ] {
        let o = cluster.command(cmd).args(&args).output().unwrap();
        let raw = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(
            o.status.success(),
            "{cmd} {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let body: Value = if args.contains(&"--yaml") {
            serde_yaml::from_str(&raw).unwrap_or_else(|e| panic!("{cmd} {args:?}: {e}\n{raw}"))
        } else {
            serde_json::from_str(&raw).unwrap_or_else(|e| panic!("{cmd} {args:?}: {e}\n{raw}"))
        };
        assert_eq!(body["meta"]["command"][0], cmd, "{raw}");
        ck.check(
            &p(path),
            "get",
            &Reply {
                status: 200,
                body: body.clone(),
                raw: raw.clone(),
            },
        );
        let key = path.trim_matches('/');
        assert!(
            body[key].as_array().is_some_and(|a| !a.is_empty()),
            "{cmd} {args:?}: no {key}: {raw}"
        );
    }
    let o = cluster
        .command("sacct")
        .args([jobs_q.as_str(), "--json"])
        .output()
        .unwrap();
    let body: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(body["jobs"][0]["name"], "dbjob");

    // Unauthenticated: 401, in the path's own schema.
    let r = http(&tcp, "GET", &p("/accounts/"), &[], None);
    assert_eq!(r.status, 401);
    ck.check(&p("/accounts/"), "get", &r);
    eprintln!("{} responses validated", ck.count);
    drop(setup);
}

/// schemathesis (installed by scripts/setup) fuzzes every served operation
/// from our document, as root, against a cluster with slurmdbd: no answer
/// may be a 5xx or break its schema.
#[test]
fn schemathesis_finds_no_server_error_or_schema_violation() {
    let st = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv-schemathesis/bin/schemathesis");
    assert!(st.exists(), "{} missing: run scripts/setup", st.display());
    let setup = cluster_with_dbd(
        "restd-fuzz-",
        2,
        (0..32u8).map(|i| b'a' + (i * 7) % 26).collect(),
        "Licenses=matlab:3\n",
    );
    let (cluster, dir, addr, key_bytes) = (&setup.cluster, &setup.dir, &setup.addr, &setup.key);
    // Something to find: a held job.
    let o = cluster
        .command("sbatch")
        .args(["-H", "--wrap", "true"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tok = slurmrestd::jwt::mint_token(key_bytes, "root", 3600).unwrap();
    let url = format!("http://{addr}");
    let out = Command::new(&st)
        .arg("run")
        .arg(format!("{url}/openapi/v3"))
        .args(["--url", &url])
        .args(["-H", "X-SLURM-USER-NAME: root"])
        .args(["-H", &format!("X-SLURM-USER-TOKEN: {tok}")])
        .args(["--checks", "not_a_server_error,response_schema_conformance"])
        .args(["--phases", "coverage,fuzzing"])
        .args([
            "--max-examples",
            "20",
            "--seed",
            "1",
            "--max-time",
            "60",
            // One worker: with two threads, hypothesis's `ast.parse` of a
            // lambda's source sometimes fails inside CPython 3.11
            // ("AST constructor recursion depth mismatch": the parser's
            // depth counter is shared between threads), which schemathesis
            // reports as a runtime error of its own.
            "-w",
            "1",
        ])
        .args(["--generation-database", "none", "--no-color"])
        .arg("--report-dir")
        .arg(setup.tmp.path().join("report"))
        .current_dir(setup.tmp.path())
        .env("SLURM_CONF", cluster.spec.conf_path())
        .output()
        .expect("run schemathesis");
    let text = String::from_utf8_lossy(&out.stdout);
    let tail: String = text
        .lines()
        .rev()
        .take(80)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        out.status.success(),
        "schemathesis found problems:\n{tail}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = text
        .lines()
        .skip_while(|l| !l.contains("Test cases:"))
        .nth(1)
        .unwrap_or("")
        .trim()
        .to_string();
    assert!(summary.contains("passed"), "{tail}");
    eprintln!("schemathesis: {summary}");
    drop(setup);
}

/// slurmrestd run as an ordinary user, as Slurm's docs say: it can read
/// neither slurm.key nor the JWT key, and passes each client's token on;
/// the controller checks it and acts as its user. Forged and expired
/// tokens are refused there.
#[test]
fn unprivileged_restd_passes_tokens_to_the_controller() {
    use std::os::unix::fs::PermissionsExt;
    let bins = bin_dir();
    let tmp = tempfile::Builder::new()
        .prefix("restd-nobody-")
        .tempdir()
        .unwrap();
    let dir = tmp.path().join("cluster");
    std::fs::create_dir_all(&dir).unwrap();
    let jwt_key = dir.join("jwt_hs256.key");
    let key_bytes: Vec<u8> = (0..32u8).map(|i| b'k' + i % 13).collect();
    std::fs::write(&jwt_key, &key_bytes).unwrap();
    std::fs::set_permissions(&jwt_key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut spec = ClusterSpec::new(&dir, 1, &bins).expect("spec");
    spec.extra_conf = format!(
        "AuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key={}\n",
        jwt_key.display()
    );
    let cluster = LocalCluster::start(spec).expect("cluster starts");
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o1777)).unwrap();
    // Neither key is readable by nobody.
    for k in [jwt_key.clone(), dir.join("slurm.key")] {
        let mode = std::fs::metadata(&k).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", k.display());
    }
    let port = free_port("127.0.0.1").unwrap();
    let addr = format!("127.0.0.1:{port}");
    let log = std::fs::File::create(dir.join("log/slurmrestd-nobody.log")).unwrap();
    let _restd = Restd {
        child: Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_slurmrestd"))
            .arg("-a")
            .arg("rest_auth/jwt")
            .arg("-f")
            .arg(cluster.spec.conf_path())
            .arg(&addr)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start slurmrestd"),
    };
    let logs =
        || std::fs::read_to_string(dir.join("log/slurmrestd-nobody.log")).unwrap_or_default();
    wait_for("slurmrestd as nobody", Duration::from_secs(20), || {
        std::net::TcpStream::connect(&addr).is_ok()
    });
    let tcp = Target::Tcp(&addr);
    let tok = slurmrestd::jwt::mint_token(&key_bytes, NOBODY, 600).unwrap();
    let auth = [("X-SLURM-USER-TOKEN", tok.as_str())];
    let r = http(&tcp, "GET", "/slurm/v0.0.44/jobs/", &auth, None);
    assert_eq!(r.status, 200, "{}\n{}", r.raw, logs());
    let body = json!({
        "script": "#!/bin/sh\ntrue\n",
        "job": {
            "name": "bytoken",
            "current_working_directory": work.display().to_string(),
            "environment": ["PATH=/usr/bin:/bin"],
            "hold": true,
        }
    })
    .to_string();
    let r = http(
        &tcp,
        "POST",
        "/slurm/v0.0.44/job/submit",
        &auth,
        Some(&body),
    );
    assert_eq!(r.status, 200, "{}\n{}", r.raw, logs());
    let id = r.body["job_id"].as_u64().expect("job id");
    let r = http(
        &tcp,
        "GET",
        &format!("/slurm/v0.0.44/job/{id}"),
        &auth,
        None,
    );
    assert_eq!(r.body["jobs"][0]["user_name"], NOBODY, "{}", r.raw);
    // A token signed with another key, or expired: refused by the
    // controller, nothing submitted.
    let forged =
        slurmrestd::jwt::mint_token(b"not the cluster's jwt key at all", "root", 600).unwrap();
    let expired =
        slurmrestd::jwt::mint_token_at(&key_bytes, NOBODY, now_secs() - 7200, 60).unwrap();
    for (what, bad) in [("forged", forged), ("expired", expired)] {
        let h = [("X-SLURM-USER-TOKEN", bad.as_str())];
        let r = http(&tcp, "POST", "/slurm/v0.0.44/job/submit", &h, Some(&body));
        assert_ne!(r.status, 200, "{what} token accepted: {}", r.raw);
        assert!(
            r.raw.contains("credential") || r.raw.contains("token"),
            "{what}: {}",
            r.raw
        );
    }
    // Only the job made with the good token exists.
    let r = http(&tcp, "GET", "/slurm/v0.0.44/jobs/", &auth, None);
    assert_eq!(
        r.body["jobs"].as_array().map(Vec::len),
        Some(1),
        "{}",
        r.raw
    );
}
