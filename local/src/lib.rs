//! `slurm-local`: a complete cluster on loopback in one directory: a
//! controller and N node daemons (default 3), with generated `slurm.conf` and
//! `slurm.key`. The whole-cluster tests start their clusters with the same
//! code ([`LocalCluster`]): this crate is the test kit of every crate whose
//! tests need a running cluster.
//!
//! Usage: `slurm-local [start|stop|status|demo] [--dir DIR] [--nodes N]
//! [--cpus N] [--mem MB] [--port P] [--no-accounting] [--no-tls]
//! [--backup[=ADDR]]`. The
//! cluster runs with TLS (a CA and certificates made in DIR) unless
//! `--no-tls`.

pub mod pki;

use slurm_proto::{NodeBaseState, RequestBody, Response};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The backup controller's `SlurmctldHost` name.
pub const BACKUP_NAME: &str = "ctl2";

/// Controller `i`'s `SlurmctldHost` name (0: the primary, `localhost`).
pub fn controller_name(i: usize) -> String {
    match i {
        0 => "localhost".into(),
        i => format!("ctl{}", i + 1),
    }
}

/// What cluster to make.
#[derive(Debug, Clone)]
pub struct ClusterSpec {
    pub dir: PathBuf,
    pub nodes: u32,
    pub cpus: u32,
    pub mem_mb: u64,
    /// Loopback address every daemon listens on.
    pub ip: String,
    pub ctld_port: u16,
    /// One port per node daemon.
    pub slurmd_ports: Vec<u16>,
    pub slurmd_timeout: u32,
    pub kill_wait: u32,
    pub min_job_age: u32,
    /// Lines appended to the generated slurm.conf.
    pub extra_conf: String,
    /// Lines appended to the generated slurmdbd.conf.
    pub extra_dbd_conf: String,
    /// Environment for every daemon and command started (tests use it to
    /// run the whole cluster under a fake clock).
    pub env: Vec<(String, String)>,
    /// Per node: another address for its daemon (`NodeAddr=`), and a
    /// command it is started under (`ip netns exec NS`): tests put a node
    /// in a network namespace of their own to cut it off.
    pub node_addrs: Vec<Option<String>>,
    pub slurmd_prefix: Vec<Vec<String>>,
    /// Arguments every slurmd gets after its own (`--kubelet=...`).
    pub slurmd_args: Vec<String>,
    /// Where slurmctld and slurmd are.
    pub bin_dir: PathBuf,
    /// `Some(secs)`: one `slurmd --mock[=secs]` process serves every node
    /// and runs no job processes (scale tests).
    pub mock: Option<Option<u64>>,
    /// Run slurmdbd on SQLite and send accounting to it.
    pub accounting: bool,
    /// A `cgroup.conf` to write beside slurm.conf.
    pub cgroup_conf: Option<String>,
    /// Other files to write beside slurm.conf (`topology.yaml`, ...):
    /// name and contents.
    pub conf_files: Vec<(String, String)>,
    /// Every node's `Gres=` (`gpu:a100:4`); GresTypes lists their names.
    pub node_gres: Option<String>,
    /// `Features=` of node i (none past the end).
    pub node_features: Vec<String>,
    /// `TmpDisk=` (MiB) of node i (none past the end, or 0).
    pub node_tmp_disk: Vec<u64>,
    /// `ThreadsPerCore=` on every node line (`None`: not written).
    pub threads_per_core: Option<u32>,
    /// `Sockets=` on every node line, with `CoresPerSocket=` making up
    /// the CPUs (`None`: not written).
    pub sockets: Option<u32>,
    pub dbd_port: u16,
    /// A backup controller (`SlurmctldHost=ctl2(ADDR)`, same port) at
    /// this loopback address, sharing the primary's StateSaveLocation.
    pub backup: Option<String>,
    /// Further backup controllers (`SlurmctldHost=ctl3(ADDR)`, ...) at
    /// these loopback addresses.
    pub more_backups: Vec<String>,
    /// `SlurmctldParameters=replicate_state`: the controllers agree on the
    /// state with Raft, each in a StateSaveLocation of its own (`state`
    /// for the primary, `state.ctlN` for controller N, written in its own
    /// `slurm.ctlN.conf`).
    pub replicated: bool,
    /// `SlurmctldTimeout` (written with a backup).
    pub slurmctld_timeout: u32,
    /// Every process speaks TLS (`TLSType=tls/rustls`) with certificates
    /// made here (see [`crate::pki`]).
    pub tls: bool,
}

/// A free TCP port on `ip` (bound then released).
pub fn free_port(ip: &str) -> std::io::Result<u16> {
    let l = std::net::TcpListener::bind((ip, 0))?;
    Ok(l.local_addr()?.port())
}

impl ClusterSpec {
    /// Defaults for `dir`, with ports picked free on 127.0.0.1.
    pub fn new(dir: &Path, nodes: u32, bin_dir: &Path) -> std::io::Result<ClusterSpec> {
        Self::with_ports(dir, nodes, bin_dir, None)
    }

    /// As [`ClusterSpec::new`]; with `Some(base)` the ports are a block
    /// `base..=base+nodes` (all checked free) instead of kernel-chosen ones,
    /// so a large cluster stays out of the range other clusters draw from.
    pub fn with_ports(
        dir: &Path,
        nodes: u32,
        bin_dir: &Path,
        base: Option<u16>,
    ) -> std::io::Result<ClusterSpec> {
        let ip = "127.0.0.1".to_string();
        // Hold every probe socket until all ports are chosen, so no port is
        // handed out twice.
        // Ports: controller, slurmdbd, then one per node daemon.
        let held = (0..=nodes + 1)
            .map(|k| {
                let port = match base {
                    Some(b) => b
                        .checked_add(k as u16)
                        .ok_or_else(|| std::io::Error::other("port range overflows"))?,
                    None => 0,
                };
                std::net::TcpListener::bind((ip.as_str(), port))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let ports = held
            .iter()
            .map(|l| l.local_addr().map(|a| a.port()))
            .collect::<Result<Vec<_>, _>>()?;
        drop(held);
        let ctld_port = ports[0];
        let dbd_port = ports[1];
        let slurmd_ports = ports[2..].to_vec();
        Ok(ClusterSpec {
            dir: dir.to_path_buf(),
            nodes,
            cpus: 4,
            mem_mb: 4000,
            ip,
            ctld_port,
            slurmd_ports,
            slurmd_timeout: 30,
            kill_wait: 5,
            min_job_age: 300,
            extra_conf: String::new(),
            extra_dbd_conf: String::new(),
            env: Vec::new(),
            node_addrs: Vec::new(),
            slurmd_prefix: Vec::new(),
            slurmd_args: Vec::new(),
            bin_dir: bin_dir.to_path_buf(),
            mock: None,
            accounting: false,
            cgroup_conf: None,
            conf_files: Vec::new(),
            node_gres: None,
            node_features: Vec::new(),
            node_tmp_disk: Vec::new(),
            threads_per_core: None,
            sockets: None,
            dbd_port,
            tls: true,
            backup: None,
            more_backups: Vec::new(),
            replicated: false,
            slurmctld_timeout: 120,
        })
    }

    pub fn conf_path(&self) -> PathBuf {
        self.dir.join("slurm.conf")
    }

    /// The slurm.conf controller `i` reads (0: the primary): its own with
    /// replicated state.
    pub fn ctld_conf_path(&self, i: usize) -> PathBuf {
        if self.replicated && i > 0 {
            self.dir.join(format!("slurm.{}.conf", controller_name(i)))
        } else {
            self.conf_path()
        }
    }

    /// Every backup controller's address, in order.
    pub fn backups(&self) -> Vec<String> {
        self.backup
            .iter()
            .chain(self.more_backups.iter())
            .cloned()
            .collect()
    }

    pub fn node_name(&self, i: usize) -> String {
        format!("n{}", i + 1)
    }

    /// The generated slurm.conf.
    pub fn slurm_conf(&self) -> String {
        let d = self.dir.display();
        let mut s = format!(
            "# Generated by slurm-local\n\
ClusterName=local\n\
SlurmctldHost=localhost({ip})\n\
{backup}SlurmctldPort={cp}\n\
SlurmdPort={sp}\n\
AuthType=auth/slurm\n\
AuthInfo=socket={d}/sack.socket\n\
StateSaveLocation={d}/state\n\
SlurmdSpoolDir={d}/spool/slurmd.%n\n\
SlurmctldPidFile={d}/run/slurmctld.pid\n\
SlurmdPidFile={d}/run/slurmd.%n.pid\n\
SlurmUser=root\n\
SlurmdParameters=config_overrides\n\
ReturnToService=2\n\
SchedulerType=sched/backfill\n\
SelectType=select/cons_tres\n\
SlurmdTimeout={to}\n\
KillWait={kw}\n\
MinJobAge={mja}\n\
MaxJobCount=200000\n",
            ip = self.ip,
            backup = match &self.backup {
                Some(addr) => {
                    let mut b = format!("SlurmctldHost={BACKUP_NAME}({addr})\n");
                    for (k, a) in self.more_backups.iter().enumerate() {
                        b.push_str(&format!("SlurmctldHost={}({a})\n", controller_name(k + 2)));
                    }
                    if self.replicated {
                        b.push_str("SlurmctldParameters=replicate_state\n");
                    }
                    b.push_str(&format!("SlurmctldTimeout={}\n", self.slurmctld_timeout));
                    b
                }
                None => String::new(),
            },
            cp = self.ctld_port,
            sp = self.slurmd_ports.first().copied().unwrap_or(6818),
            to = self.slurmd_timeout,
            kw = self.kill_wait,
            mja = self.min_job_age,
        );
        if self.tls {
            // The CA and the controller's certificate under Slurm's default
            // names beside slurm.conf; one certificate per node daemon.
            s.push_str(
                "TLSType=tls/rustls\n\
TLSParameters=slurmd_cert_file=tls/%n_cert.pem,slurmd_cert_key_file=tls/%n_cert_key.pem\n",
            );
        }
        if self.accounting {
            s.push_str(&format!(
                "AccountingStorageType=accounting_storage/slurmdbd\n\
AccountingStorageHost={}\n\
AccountingStoragePort={}\n\
JobAcctGatherType=jobacct_gather/cgroup\n",
                self.ip, self.dbd_port
            ));
        }
        let gres = match &self.node_gres {
            Some(g) => {
                let mut names: Vec<String> = slurm_common::gres::parse_list(g)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|x| x.name)
                    .collect();
                names.dedup();
                s.push_str(&format!("GresTypes={}\n", names.join(",")));
                format!(" Gres={g}")
            }
            None => String::new(),
        };
        for i in 0..self.nodes as usize {
            let mut feat = match self.node_features.get(i) {
                Some(f) if !f.is_empty() => format!(" Features={f}"),
                _ => String::new(),
            };
            if let Some(sk) = self.sockets.filter(|x| *x > 0) {
                let tpc = self.threads_per_core.unwrap_or(1).max(1);
                feat.push_str(&format!(
                    " Sockets={sk} CoresPerSocket={}",
                    (self.cpus / sk / tpc).max(1)
                ));
            }
            if let Some(t) = self.threads_per_core {
                feat.push_str(&format!(" ThreadsPerCore={t}"));
            }
            if let Some(t) = self.node_tmp_disk.get(i).filter(|t| **t > 0) {
                feat.push_str(&format!(" TmpDisk={t}"));
            }
            s.push_str(&format!(
                "NodeName={} NodeAddr={} Port={} CPUs={} RealMemory={}{gres}{feat} State=UNKNOWN\n",
                self.node_name(i),
                self.node_addrs
                    .get(i)
                    .cloned()
                    .flatten()
                    .unwrap_or_else(|| self.ip.clone()),
                self.slurmd_ports[i],
                self.cpus,
                self.mem_mb
            ));
        }
        s.push_str(&format!(
            "PartitionName=debug Nodes=n[1-{}] Default=YES MaxTime=INFINITE State=UP\n",
            self.nodes
        ));
        // Site additions last, so they may name the nodes above.
        s.push_str(&self.extra_conf);
        if !s.ends_with('\n') {
            s.push('\n');
        }
        s
    }

    /// Write slurm.conf, a key (kept if present) and the directories.
    pub fn write(&self) -> std::io::Result<()> {
        for sub in ["state", "spool", "run", "log"] {
            std::fs::create_dir_all(self.dir.join(sub))?;
        }
        std::fs::write(self.conf_path(), self.slurm_conf())?;
        if self.replicated {
            let d = self.dir.display();
            for i in 1..=self.backups().len() {
                let name = controller_name(i);
                std::fs::create_dir_all(self.dir.join(format!("state.{name}")))?;
                let own = self.slurm_conf().replace(
                    &format!("StateSaveLocation={d}/state\n"),
                    &format!("StateSaveLocation={d}/state.{name}\n"),
                );
                std::fs::write(self.ctld_conf_path(i), own)?;
            }
        }
        let key = self.dir.join("slurm.key");
        if !key.exists() {
            slurm_common::auth::generate_key(&key)?;
        }
        if self.tls {
            self.write_pki().map_err(std::io::Error::other)?;
        }
        if let Some(c) = &self.cgroup_conf {
            std::fs::write(self.dir.join("cgroup.conf"), c)?;
        }
        for (name, text) in &self.conf_files {
            std::fs::write(self.dir.join(name), text)?;
        }
        if self.accounting {
            let path = self.dbd_conf_path();
            std::fs::write(&path, self.slurmdbd_conf())?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        }
        Ok(())
    }

    /// The CA and every daemon's certificate, made with this process's CA
    /// unless all are there already (a cluster started again).
    fn write_pki(&self) -> Result<(), crate::pki::PkiError> {
        let tls = self.dir.join("tls");
        std::fs::create_dir_all(&tls).map_err(|source| crate::pki::PkiError::Write {
            path: tls.clone(),
            source,
        })?;
        let nodes: Vec<String> = (0..self.nodes as usize)
            .map(|i| self.node_name(i))
            .collect();
        let have = |p: &Path| p.exists();
        let complete = have(&self.dir.join("ca_cert.pem"))
            && have(&self.dir.join("ctld_cert_key.pem"))
            && have(&self.dir.join("dbd_cert_key.pem"))
            && nodes
                .iter()
                .all(|n| have(&tls.join(format!("{n}_cert_key.pem"))));
        if complete {
            return Ok(());
        }
        let ca = crate::pki::process_ca()?;
        crate::pki::write_ca(ca, &self.dir)?;
        // Callers check the names they mean: the controller's SlurmctldHost
        // name and the address slurmdbd reaches it at; slurmdbd's
        // AccountingStorageHost; each node's NodeName.
        let local = vec!["localhost".to_string(), self.ip.clone()];
        // Both controllers show one certificate naming each.
        let mut ctld = local.clone();
        for (k, b) in self.backups().iter().enumerate() {
            ctld.extend([controller_name(k + 1), b.clone()]);
        }
        crate::pki::write_identity(ca, &self.dir, "ctld", &ctld)?;
        crate::pki::write_identity(ca, &self.dir, "dbd", &local)?;
        for n in &nodes {
            crate::pki::write_identity(ca, &tls, n, std::slice::from_ref(n))?;
        }
        Ok(())
    }

    pub fn dbd_conf_path(&self) -> PathBuf {
        self.dir.join("slurmdbd.conf")
    }

    /// The generated slurmdbd.conf: SQLite in the cluster's directory.
    pub fn slurmdbd_conf(&self) -> String {
        let d = self.dir.display();
        format!(
            "# Generated by slurm-local\n\
DbdHost=localhost\n\
DbdAddr={ip}\n\
DbdPort={port}\n\
SlurmUser=root\n\
StorageType=accounting_storage/sqlite\n\
StorageLoc={d}/state/slurm_acct_db.sqlite\n\
PidFile={d}/run/slurmdbd.pid\n{tls}{extra}",
            tls = if self.tls { "TLSType=tls/rustls\n" } else { "" },
            ip = self.ip,
            port = self.dbd_port,
            extra = self.extra_dbd_conf,
        )
    }
}

/// A running local cluster. Dropping it kills every daemon it started (by
/// pid) unless [`LocalCluster::detach`] was called.
pub struct LocalCluster {
    pub spec: ClusterSpec,
    pub ctld: Option<Child>,
    /// The backup controllers (with [`ClusterSpec::backup`] and
    /// [`ClusterSpec::more_backups`]), in order.
    pub backups: Vec<Option<Child>>,
    pub slurmds: Vec<Option<Child>>,
    pub dbd: Option<Child>,
    detached: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Timeout(String),
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> LocalError {
    let what = what.into();
    move |source| LocalError::Io { what, source }
}

impl LocalCluster {
    /// Write the configuration, start the controller and node daemons, and
    /// wait until every node is up.
    pub fn start(spec: ClusterSpec) -> Result<LocalCluster, LocalError> {
        spec.write()
            .map_err(io_err(format!("writing {}", spec.dir.display())))?;
        let n = spec.nodes as usize;
        let mut c = LocalCluster {
            spec,
            ctld: None,
            backups: Vec::new(),
            slurmds: (0..n).map(|_| None).collect(),
            dbd: None,
            detached: false,
        };
        if c.spec.accounting {
            c.start_dbd()?;
        }
        c.start_ctld()?;
        for i in 1..=c.spec.backups().len() {
            c.start_backup_n(i)?;
        }
        if c.spec.replicated {
            c.wait_controller(0, "slurmctld.log", |standby| !standby)?;
        }
        match c.spec.mock {
            Some(secs) => c.start_mock_slurmd(secs)?,
            None => {
                for i in 0..n {
                    c.start_slurmd(i)?;
                }
            }
        }
        c.wait_nodes_up(Duration::from_secs(30))?;
        Ok(c)
    }

    fn spawn(&self, prog: &str, args: &[String], log: &str) -> Result<Child, LocalError> {
        self.spawn_exe(&self.spec.bin_dir.join(prog), args, log)
    }

    fn spawn_exe(&self, exe: &Path, args: &[String], log: &str) -> Result<Child, LocalError> {
        let log_path = self.spec.dir.join("log").join(log);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(io_err(format!("opening {}", log_path.display())))?;
        let log2 = log.try_clone().map_err(io_err("dup log"))?;
        let mut cmd = Command::new(exe);
        cmd.args(args)
            .envs(self.spec.env.iter().map(|(k, v)| (k, v)))
            .env("SLURM_CONF", self.spec.conf_path())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2);
        // Own session, so a terminal's Ctrl-C reaches only slurm-local.
        // SAFETY: setsid is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        cmd.spawn()
            .map_err(io_err(format!("starting {}", exe.display())))
    }

    pub fn start_ctld(&mut self) -> Result<(), LocalError> {
        let conf = self.spec.conf_path().display().to_string();
        let mut args = vec!["-D".to_string(), "-f".into(), conf];
        if self.spec.backup.is_some() {
            args.extend(["--host".into(), "localhost".into()]);
        }
        let child = self.spawn("slurmctld", &args, "slurmctld.log")?;
        self.ctld = Some(child);
        // With replicated state the primary is chosen only once a majority
        // of the controllers runs: at first start the backups come next.
        if self.spec.replicated && self.backups.iter().flatten().count() == 0 {
            return self.wait_controller(0, "slurmctld.log", |_| true);
        }
        self.wait_controller(0, "slurmctld.log", |standby| !standby)
    }

    /// Start the backup controller ([`ClusterSpec::backup`]) and wait until
    /// it answers (in standby while the primary is in control).
    pub fn start_backup(&mut self) -> Result<(), LocalError> {
        self.start_backup_n(1)
    }

    /// Start controller `i` (1: the first backup) and wait until it
    /// answers.
    pub fn start_backup_n(&mut self, i: usize) -> Result<(), LocalError> {
        let conf = self.spec.ctld_conf_path(i).display().to_string();
        let name = controller_name(i);
        let args = [
            "-D".to_string(),
            "-f".into(),
            conf,
            "--host".into(),
            name.clone(),
        ];
        let log = format!("slurmctld.{name}.log");
        let child = self.spawn("slurmctld", &args, &log)?;
        if self.backups.len() < i {
            self.backups.resize_with(i, || None);
        }
        self.backups[i - 1] = Some(child);
        self.wait_controller(i, &log, |_| true)
    }

    /// Wait until controller `i` answers a ping as `ready` wants (given
    /// whether it says it is in standby).
    fn wait_controller(
        &self,
        i: usize,
        log: &str,
        ready: impl Fn(bool) -> bool,
    ) -> Result<(), LocalError> {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Response::Pong { standby, .. }) = self.call_at(i, RequestBody::Ping) {
                if ready(standby) {
                    return Ok(());
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(LocalError::Timeout(format!(
            "slurmctld did not answer within 20 s (see {})",
            self.spec.dir.join("log").join(log).display()
        )))
    }

    /// Send `body` to controller `i` alone (0: the primary, 1: the backup).
    pub fn call_at(&self, i: usize, body: RequestBody) -> Result<Response, LocalError> {
        let mut c = self.client()?;
        c.timeout = Duration::from_secs(5);
        let c = c.only(i).ok_or_else(|| LocalError::Io {
            what: "controller".into(),
            source: std::io::Error::other(format!("no controller {i}")),
        })?;
        c.call(body).map_err(|e| LocalError::Io {
            what: "controller".into(),
            source: std::io::Error::other(e.to_string()),
        })
    }

    /// Send `sig` to the backup controller.
    pub fn kill_backup(&mut self, sig: i32) {
        self.kill_controller(1, sig);
    }

    /// Send `sig` to controller `i` (0: the primary).
    pub fn kill_controller(&mut self, i: usize, sig: i32) {
        match i {
            0 => Self::kill_child(&mut self.ctld, sig),
            _ => {
                if let Some(c) = self.backups.get_mut(i - 1) {
                    Self::kill_child(c, sig);
                }
            }
        }
    }

    /// The backup controller's exit status once it stops by itself.
    pub fn wait_backup_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        match self.backups.first_mut() {
            Some(b) => Self::wait_exit(b, within),
            None => None,
        }
    }

    /// Start slurmdbd and wait until it accepts connections.
    pub fn start_dbd(&mut self) -> Result<(), LocalError> {
        let conf = self.spec.dbd_conf_path().display().to_string();
        let child = self.spawn(
            "slurmdbd",
            &["-D".into(), "-f".into(), conf],
            "slurmdbd.log",
        )?;
        self.dbd = Some(child);
        let addr = (self.spec.ip.as_str(), self.spec.dbd_port);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(addr).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(LocalError::Timeout(format!(
            "slurmdbd did not listen within 30 s (see {})",
            self.spec.dir.join("log/slurmdbd.log").display()
        )))
    }

    /// Send `sig` to slurmdbd.
    pub fn kill_dbd(&mut self, sig: i32) {
        Self::kill_child(&mut self.dbd, sig);
    }

    pub fn start_slurmd(&mut self, i: usize) -> Result<(), LocalError> {
        let conf = self.spec.conf_path().display().to_string();
        let name = self.spec.node_name(i);
        let mut args = vec!["-D".into(), "-N".into(), name.clone(), "-f".into(), conf];
        args.extend(self.spec.slurmd_args.iter().cloned());
        let log = format!("slurmd.{name}.log");
        let child = match self.spec.slurmd_prefix.get(i).filter(|p| !p.is_empty()) {
            Some(prefix) => {
                let exe = self.spec.bin_dir.join("slurmd").display().to_string();
                let mut all: Vec<String> = prefix[1..].to_vec();
                all.push(exe);
                all.extend(args);
                self.spawn_exe(std::path::Path::new(&prefix[0]), &all, &log)?
            }
            None => self.spawn("slurmd", &args, &log)?,
        };
        self.slurmds[i] = Some(child);
        Ok(())
    }

    /// One daemon in mock mode for every node (kept as node 0's process).
    pub fn start_mock_slurmd(&mut self, secs: Option<u64>) -> Result<(), LocalError> {
        let conf = self.spec.conf_path().display().to_string();
        let mock = match secs {
            Some(s) => format!("--mock={s}"),
            None => "--mock".to_string(),
        };
        let nodes = format!("n[1-{}]", self.spec.nodes);
        let child = self.spawn(
            "slurmd",
            &["-D".into(), "-N".into(), nodes, "-f".into(), conf, mock],
            "slurmd.mock.log",
        )?;
        if let Some(slot) = self.slurmds.first_mut() {
            *slot = Some(child);
        }
        Ok(())
    }

    fn kill_child(child: &mut Option<Child>, sig: i32) {
        if let Some(mut c) = child.take() {
            // SAFETY: kill on a pid we own.
            unsafe {
                libc::kill(c.id() as i32, sig);
            }
            if sig == libc::SIGKILL || sig == libc::SIGTERM {
                let _ = c.wait();
            } else {
                *child = Some(c);
            }
        }
    }

    /// Wait up to `within` for a process to end by itself; its status,
    /// the process forgotten (so it can be started again).
    fn wait_exit(child: &mut Option<Child>, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + within;
        loop {
            match child.as_mut()?.try_wait() {
                Ok(Some(status)) => {
                    child.take();
                    return Some(status);
                }
                Ok(None) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                _ => return None,
            }
        }
    }

    /// The controller's exit status once it stops by itself (`scontrol
    /// shutdown`), waiting up to `within`.
    pub fn wait_ctld_exit(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        Self::wait_exit(&mut self.ctld, within)
    }

    /// Node daemon `i`'s exit status once it stops by itself.
    pub fn wait_slurmd_exit(
        &mut self,
        i: usize,
        within: Duration,
    ) -> Option<std::process::ExitStatus> {
        Self::wait_exit(self.slurmds.get_mut(i)?, within)
    }

    /// Send `sig` to the controller (SIGKILL simulates a crash).
    pub fn kill_ctld(&mut self, sig: i32) {
        Self::kill_child(&mut self.ctld, sig);
    }

    pub fn kill_slurmd(&mut self, i: usize, sig: i32) {
        if let Some(c) = self.slurmds.get_mut(i) {
            Self::kill_child(c, sig);
        }
    }

    /// Keep the daemons running after this value is dropped.
    pub fn detach(mut self) {
        self.detached = true;
        let mut pids = String::new();
        for c in self.ctld.iter().chain(self.backups.iter().flatten()) {
            pids.push_str(&format!("{}\n", c.id()));
        }
        for c in self.slurmds.iter().flatten().chain(self.dbd.iter()) {
            pids.push_str(&format!("{}\n", c.id()));
        }
        let _ = std::fs::write(self.spec.dir.join("run/pids"), pids);
    }

    pub fn client(&self) -> Result<slurm_common::net::Client, LocalError> {
        let conf = slurm_common::conf::SlurmConf::load(&self.spec.conf_path()).map_err(|e| {
            LocalError::Io {
                what: "slurm.conf".into(),
                source: std::io::Error::other(e.to_string()),
            }
        })?;
        // This process calls the cluster too: over TLS when it is on.
        slurm_common::tls::setup(&conf, &slurm_common::tls::Role::Command).map_err(|e| {
            LocalError::Io {
                what: "TLS".into(),
                source: std::io::Error::other(e.to_string()),
            }
        })?;
        Ok(slurm_common::net::Client::from_conf(&conf))
    }

    pub fn call(&self, body: RequestBody) -> Result<Response, LocalError> {
        let mut c = self.client()?;
        c.timeout = Duration::from_secs(5);
        c.call(body).map_err(|e| LocalError::Io {
            what: "controller".into(),
            source: std::io::Error::other(e.to_string()),
        })
    }

    /// Wait until every node has registered and is usable.
    pub fn wait_nodes_up(&self, timeout: Duration) -> Result<(), LocalError> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Response::Nodes { nodes, .. }) = self.call(RequestBody::GetNodes) {
                // FUTURE nodes (in `extra_conf`) are not expected to come up.
                let nodes: Vec<_> = nodes
                    .iter()
                    .filter(|n| n.base_state != NodeBaseState::Future)
                    .collect();
                if nodes.len() == self.spec.nodes as usize
                    && nodes
                        .iter()
                        .all(|n| n.is_available() && n.base_state != NodeBaseState::Unknown)
                {
                    return Ok(());
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(LocalError::Timeout(format!(
            "nodes did not come up within {timeout:?} (logs in {})",
            self.spec.dir.join("log").display()
        )))
    }

    /// A command from `bin_dir` with `SLURM_CONF` pointing at this cluster.
    pub fn command(&self, prog: &str) -> Command {
        let mut c = Command::new(self.spec.bin_dir.join(prog));
        c.envs(self.spec.env.iter().map(|(k, v)| (k, v)))
            .env("SLURM_CONF", self.spec.conf_path());
        c
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        if self.detached {
            return;
        }
        for i in 0..self.slurmds.len() {
            self.kill_slurmd(i, libc::SIGKILL);
        }
        self.kill_ctld(libc::SIGKILL);
        for i in 1..=self.backups.len() {
            self.kill_controller(i, libc::SIGKILL);
        }
        self.kill_dbd(libc::SIGKILL);
        // Jobs outlive their node daemons (as in Slurm): end this cluster's.
        kill_jobs_of(&self.spec.conf_path());
    }
}

/// The parent of `pid` (from `/proc/<pid>/stat`).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name in parentheses: state, then the parent.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Kill every job process of one cluster (its environment has
/// `SLURM_CONF=<conf>` and a `SLURM_JOB_ID`), by pid, never this process
/// or its ancestors; frozen (suspended) ones are thawed first so they can
/// die.
fn kill_jobs_of(conf: &Path) {
    let want = format!("SLURM_CONF={}", conf.display());
    let mut mine = vec![std::process::id()];
    while let Some(p) = mine.last().and_then(|p| parent_of(*p)).filter(|p| *p > 1) {
        if mine.contains(&p) {
            break;
        }
        mine.push(p);
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if mine.contains(&pid) {
            continue;
        }
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        let mut vars = env.split(|b| *b == 0);
        let ours = vars.clone().any(|v| v == want.as_bytes());
        if !ours || !vars.any(|v| v.starts_with(b"SLURM_JOB_ID=")) {
            continue;
        }
        if let Ok(cg) = std::fs::read_to_string(e.path().join("cgroup")) {
            thaw_ancestors(&cg);
        }
        // SAFETY: kill(2) on a pid we found.
        unsafe {
            libc::kill(pid as i32, libc::SIGCONT);
            libc::kill(pid as i32, libc::SIGKILL);
        }
    }
}

/// Thaw the freezer cgroups (v1 `freezer.state`, v2 `cgroup.freeze`) a
/// process sits in, from the top down, as given by `/proc/<pid>/cgroup`.
fn thaw_ancestors(proc_cgroup: &str) {
    for line in proc_cgroup.lines() {
        let (base, file, thawed) = if let Some((_, p)) = line.split_once(":freezer:") {
            (
                format!("/sys/fs/cgroup/freezer{p}"),
                "freezer.state",
                "THAWED",
            )
        } else if let Some(p) = line.strip_prefix("0::") {
            (format!("/sys/fs/cgroup{p}"), "cgroup.freeze", "0")
        } else {
            continue;
        };
        let mut dirs: Vec<&Path> = Path::new(&base).ancestors().collect();
        dirs.reverse();
        // Only our own hierarchy (`slurm_<node>/...`).
        for d in dirs
            .iter()
            .filter(|d| d.to_string_lossy().contains("/slurm_"))
        {
            let f = d.join(file);
            if f.exists() {
                let _ = std::fs::write(&f, thawed);
            }
        }
    }
}

// ----------------------------------------------------------------------
// The command

const USAGE: &str = "Usage: slurm-local [start|stop|status|demo] [--dir DIR] [--nodes N] [--cpus N] [--mem MB] [--port PORT] [--no-accounting] [--no-tls] [--mock[=SECS]] [--backup[=ADDR]] [--replicated]\n\
  start   start slurmdbd (SQLite), a controller and N node daemons in DIR (default ./slurm-local) and leave them running\n\
  stop    stop the daemons started in DIR\n\
  status  show squeue and sinfo for the cluster in DIR\n\
  demo    start a cluster, run a 3-node batch job, show squeue, sinfo and its output, stop\n\
  --mock[=SECS]  one node daemon serves every node and ends each job after SECS seconds without running it (scale tests)\n\
  --backup[=ADDR]  a backup controller (SlurmctldHost ctl2) on loopback address ADDR (default 127.0.0.2), SlurmctldTimeout=10\n\
  --replicated  three controllers (on 127.0.0.1, 127.0.0.2, 127.0.0.3) agreeing on the state with SlurmctldParameters=replicate_state, each in its own state directory\n";

struct Opts {
    action: String,
    dir: PathBuf,
    nodes: u32,
    cpus: u32,
    mem: u64,
    port: Option<u16>,
    accounting: bool,
    tls: bool,
    mock: Option<Option<u64>>,
    backup: Option<String>,
    replicated: bool,
}

fn parse(args: &[String]) -> Result<Opts, String> {
    let mut o = Opts {
        action: "start".into(),
        dir: std::env::var_os("SLURM_LOCAL_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("slurm-local")),
        nodes: 3,
        cpus: 4,
        mem: 4000,
        port: None,
        accounting: true,
        tls: true,
        mock: None,
        backup: None,
        replicated: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (k, inline) = match a.split_once('=') {
            Some((k, v)) if k.starts_with("--") => (k, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        let mut val = |name: &str| -> Result<String, String> {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or(format!("option {name} needs a value"))
        };
        let num = |name: &str, v: String| -> Result<u64, String> {
            v.parse::<u64>()
                .map_err(|_| format!("invalid value '{v}' for {name}"))
        };
        match k {
            "start" | "stop" | "status" | "demo" => o.action = k.to_string(),
            "--dir" | "-d" => o.dir = PathBuf::from(val(k)?),
            "--nodes" | "-n" => o.nodes = num(k, val(k)?)?.clamp(1, 1000) as u32,
            "--cpus" => o.cpus = num(k, val(k)?)?.clamp(1, 4096) as u32,
            "--mem" => o.mem = num(k, val(k)?)?.max(1),
            "--port" => o.port = Some(num(k, val(k)?)?.clamp(1, 65535) as u16),
            "--no-accounting" => o.accounting = false,
            "--no-tls" => o.tls = false,
            "--mock" => {
                o.mock = Some(match inline.clone() {
                    Some(v) => Some(num(k, v)?),
                    None => None,
                })
            }
            "--backup" => {
                let addr = inline.clone().unwrap_or_else(|| "127.0.0.2".into());
                if addr.parse::<std::net::Ipv4Addr>().is_err() {
                    return Err(format!(
                        "invalid value '{addr}' for --backup: an IPv4 address"
                    ));
                }
                o.backup = Some(addr);
            }
            "--replicated" => o.replicated = true,
            "-h" | "--help" => o.action = "help".into(),
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    Ok(o)
}

fn bin_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."))
}

fn spec_for(o: &Opts) -> Result<ClusterSpec, String> {
    let dir = std::path::absolute(&o.dir).map_err(|e| format!("{}: {e}", o.dir.display()))?;
    let mut s = ClusterSpec::new(&dir, o.nodes, &bin_dir()).map_err(|e| e.to_string())?;
    s.accounting = o.accounting;
    s.tls = o.tls;
    s.mock = o.mock;
    s.cpus = o.cpus;
    s.mem_mb = o.mem;
    if o.replicated {
        s.backup = Some(o.backup.clone().unwrap_or_else(|| "127.0.0.2".into()));
        s.more_backups = vec!["127.0.0.3".into()];
        s.replicated = true;
        s.slurmctld_timeout = 10;
    } else if let Some(b) = &o.backup {
        s.backup = Some(b.clone());
        s.slurmctld_timeout = 10;
    }
    if let Some(p) = o.port {
        s.ctld_port = p;
        s.dbd_port = p.saturating_add(1);
        s.slurmd_ports = (0..o.nodes)
            .map(|i| p.saturating_add(2 + i as u16))
            .collect();
    }
    Ok(s)
}

fn stop(dir: &Path) -> i32 {
    let pids = std::fs::read_to_string(dir.join("run/pids")).unwrap_or_default();
    let mut n = 0;
    for pid in pids.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
        // SAFETY: kill by the pids we recorded when starting.
        if unsafe { libc::kill(pid, libc::SIGTERM) } == 0 {
            n += 1;
        }
    }
    let _ = std::fs::remove_file(dir.join("run/pids"));
    println!("slurm-local: stopped {n} daemons in {}", dir.display());
    0
}

fn show(c: &LocalCluster, prog: &str, args: &[&str]) {
    println!("$ {prog} {}", args.join(" "));
    let _ = std::io::stdout().flush();
    let _ = c.command(prog).args(args).status();
}

fn demo(c: &LocalCluster) -> Result<(), String> {
    let work = c.spec.dir.join("demo");
    std::fs::create_dir_all(&work).map_err(|e| e.to_string())?;
    let script = work.join("hello.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\n#SBATCH --job-name=hello\n#SBATCH --nodes=3\n#SBATCH --ntasks-per-node=1\n#SBATCH --output=hello-%j.out\n\
echo \"job $SLURM_JOB_ID on $SLURM_JOB_NUM_NODES nodes: $SLURM_JOB_NODELIST (tasks per node $SLURM_TASKS_PER_NODE)\"\n\
echo \"batch host $SLURMD_NODENAME, running as $(id -un)\"\nsleep 3\necho done\n",
    )
    .map_err(|e| e.to_string())?;
    let out = c
        .command("sbatch")
        .arg("--parsable")
        .arg(&script)
        .current_dir(&work)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let id: u32 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .map_err(|_| "sbatch printed no job id".to_string())?;
    println!("Submitted batch job {id}");
    std::thread::sleep(Duration::from_millis(700));
    show(c, "squeue", &[]);
    show(c, "sinfo", &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let done = match c.call(RequestBody::GetJobs) {
            Ok(Response::Jobs { jobs, .. }) => jobs
                .iter()
                .any(|j| j.job_id == id && j.state.is_finished() && !j.completing),
            _ => false,
        };
        if done {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("job {id} did not finish within 60 s"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    show(c, "scontrol", &["show", "job", &id.to_string()]);
    if c.spec.accounting {
        // The end record reaches slurmdbd within a moment of the job's end.
        std::thread::sleep(Duration::from_millis(1500));
        show(c, "sacct", &["-j", &id.to_string()]);
    }
    let outfile = work.join(format!("hello-{id}.out"));
    println!("$ cat {}", outfile.display());
    print!(
        "{}",
        std::fs::read_to_string(&outfile).map_err(|e| format!("{}: {e}", outfile.display()))?
    );
    Ok(())
}

pub fn main() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let o = match parse(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("slurm-local: error: {e}");
            eprint!("{USAGE}");
            return 1;
        }
    };
    if o.action == "help" {
        print!("{USAGE}");
        return 0;
    }
    if o.action == "stop" {
        return stop(&o.dir);
    }
    let spec = match spec_for(&o) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("slurm-local: error: {e}");
            return 1;
        }
    };
    if o.action == "status" {
        let c = LocalCluster {
            spec,
            ctld: None,
            backups: Vec::new(),
            slurmds: vec![],
            dbd: None,
            detached: true,
        };
        show(&c, "squeue", &[]);
        show(&c, "sinfo", &[]);
        return 0;
    }
    if o.dir.join("run/pids").exists() {
        eprintln!(
            "slurm-local: a cluster seems to run in {} (slurm-local stop --dir {} first)",
            o.dir.display(),
            o.dir.display()
        );
        return 1;
    }
    let conf = spec.conf_path();
    let c = match LocalCluster::start(spec) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("slurm-local: error: {e}");
            return 1;
        }
    };
    println!(
        "slurm-local: controller on {}:{} and {} node daemons are up{}.\nUse the commands with:\n  export SLURM_CONF={}\n",
        c.spec.ip,
        c.spec.ctld_port,
        c.spec.nodes,
        if c.spec.accounting {
            format!(", slurmdbd (SQLite) on {}:{}", c.spec.ip, c.spec.dbd_port)
        } else {
            String::new()
        },
        conf.display()
    );
    if o.action == "demo" {
        let r = demo(&c);
        drop(c);
        let _ = std::fs::remove_file(o.dir.join("run/pids"));
        return match r {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("slurm-local: demo failed: {e}");
                1
            }
        };
    }
    println!("Stop it with: slurm-local stop --dir {}", o.dir.display());
    c.detach();
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_config_parses_and_names_every_node() {
        let d = tempfile::tempdir().unwrap();
        let mut s = ClusterSpec::new(d.path(), 3, Path::new("/nonexistent")).unwrap();
        s.extra_conf = "KillWait=7\n".into();
        s.write().unwrap();
        let conf = slurm_common::conf::SlurmConf::load(&s.conf_path()).unwrap();
        assert_eq!(conf.nodes.len(), 3);
        assert_eq!(conf.partitions[0].nodes, vec!["n1", "n2", "n3"]);
        assert_eq!(conf.kill_wait, 7);
        assert!(conf.warnings.is_empty(), "{:?}", conf.warnings);
        assert!(slurm_common::auth::Key::load(&d.path().join("slurm.key")).is_ok());
    }

    #[test]
    fn arguments() {
        let o = parse(&[
            "demo".into(),
            "--nodes=5".into(),
            "--dir".into(),
            "/tmp/x".into(),
        ])
        .unwrap();
        assert_eq!((o.action.as_str(), o.nodes), ("demo", 5));
        assert_eq!(o.dir, PathBuf::from("/tmp/x"));
        assert!(parse(&["--bogus".into()]).is_err());
        assert!(parse(&["--nodes=abc".into()]).is_err());
    }
}
