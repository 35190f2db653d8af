//! Controllers in turn, Slurm's way (`SlurmctldHost` listed twice or more):
//! which controller this process is, the lock on `StateSaveLocation` that
//! only the controller in control holds, a backup's watch over the
//! controllers ahead of it, and the hand-over when one asks another to give
//! control up.
//!
//! - The first `SlurmctldHost` is the primary: it takes control at start,
//!   asking whichever controller holds the lock to give it up (a backup
//!   that took over returns to standby).
//! - A backup starts in standby: it answers pings, tells every other caller
//!   to try the next controller (`InStandby`), and pings the controllers
//!   ahead of it. When none has answered for `SlurmctldTimeout` (or
//!   `scontrol takeover` reached it) it takes the lock, reads the state the
//!   primary left in `StateSaveLocation` and serves.
//! - The lock is `flock` on `StateSaveLocation/slurmctld.lock`, held for as
//!   long as the controller is in control and let go by the kernel when its
//!   process dies: two controllers never write the journal at once, and a
//!   controller that cannot take it stays in standby.

use slurm_common::auth::{Binding, Key};
use slurm_common::conf::SlurmConf;
use slurm_common::grpc;
use slurm_proto::grpc::commands::CommandCall;
use slurm_proto::grpc::pb;
use slurm_proto::{Response, SlurmError};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, Notify};

/// The lock file's name in `StateSaveLocation`.
pub const LOCK_FILE: &str = "slurmctld.lock";

/// Which `SlurmctldHost` this process is: the one `host` names (`--host`),
/// else the one naming this machine's host name; with a single controller,
/// that one whatever its name.
pub fn which(conf: &SlurmConf, host: Option<&str>) -> Result<usize, String> {
    let hosts = &conf.slurmctld_hosts;
    if let Some(h) = host {
        return hosts
            .iter()
            .position(|c| c.name == h)
            .ok_or_else(|| format!("--host {h}: not a SlurmctldHost of {}", conf.path.display()));
    }
    if hosts.len() <= 1 {
        return Ok(0);
    }
    let me = slurm_common::users::hostname();
    hosts
        .iter()
        .position(|c| c.name == me || c.name.split('.').next() == Some(me.as_str()))
        .ok_or_else(|| {
            format!(
                "this host ({me}) is not one of the SlurmctldHost lines of {} (--host NAME says which one this is)",
                conf.path.display()
            )
        })
}

/// Control of `StateSaveLocation`: an exclusive `flock` on its lock file,
/// let go when dropped (or when the process ends).
#[derive(Debug)]
pub struct StateLock {
    _file: std::fs::File,
    path: PathBuf,
}

impl StateLock {
    /// Take the lock if no other controller holds it (`Ok(None)` when one
    /// does). Creates the directory (mode 0700) when missing; never follows
    /// a symbolic link planted in its place.
    pub fn try_take(dir: &Path) -> std::io::Result<Option<StateLock>> {
        if !dir.exists() {
            std::fs::create_dir_all(dir)?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
        let path = dir.join(LOCK_FILE);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)?;
        // SAFETY: flock on a descriptor we own.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EWOULDBLOCK) => Ok(None),
                _ => Err(e),
            };
        }
        Ok(Some(StateLock { _file: file, path }))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// This controller's place among the controllers and whether it is in
/// control; shared by the RPC server and the main thread.
pub struct Ha {
    /// This controller's index among the `SlurmctldHost` lines.
    pub index: usize,
    /// Every controller's name and `host:port`, in order.
    pub controllers: Vec<(String, String)>,
    /// `SlurmctldTimeout`.
    pub timeout: Duration,
    active: AtomicBool,
    /// `scontrol takeover` reached this controller.
    takeover: Notify,
    /// A backup in standby told to read its configuration again.
    reread: Notify,
    taking_over: AtomicBool,
    /// Asked to give control up: where the main thread is told, with the
    /// channel it answers on once the state is durable and the lock gone.
    give_up: mpsc::UnboundedSender<oneshot::Sender<()>>,
    key: Key,
    host: String,
    /// The TLS settings (to tell another controller's certificate).
    pub tls: Option<slurm_common::tls::Tls>,
    /// The slurm.conf this controller read.
    pub conf_path: PathBuf,
}

/// Send `call` to the controller `name` at `addr`, signed with the
/// cluster's key; `None` when it did not answer.
async fn call_signed(
    name: String,
    addr: String,
    key: Key,
    host: String,
    call: CommandCall,
    within: Duration,
) -> Option<Response> {
    let ch = grpc::kept(&addr, &name).ok()?;
    let sign = move |b: &Binding| Ok(key.sign(0, 0, &host, slurm_common::auth::now(), b));
    grpc::call_command(&ch, &name, call, sign, within)
        .await
        .ok()
}

/// How long a controller waits for another to give control up.
const GIVE_UP_WITHIN: Duration = Duration::from_secs(60);

impl Ha {
    /// This controller (`index`) of `conf`'s controllers, in standby; the
    /// receiver is where the main thread hears it is to give control up.
    pub fn new(
        conf: &SlurmConf,
        index: usize,
        key: Key,
        host: String,
        tls: Option<slurm_common::tls::Tls>,
    ) -> (Ha, mpsc::UnboundedReceiver<oneshot::Sender<()>>) {
        let controllers = conf.controllers();
        let (tx, rx) = mpsc::unbounded_channel();
        let ha = Ha {
            index,
            controllers,
            timeout: Duration::from_secs(u64::from(conf.slurmctld_timeout.max(1))),
            active: AtomicBool::new(false),
            takeover: Notify::new(),
            reread: Notify::new(),
            taking_over: AtomicBool::new(false),
            give_up: tx,
            key,
            host,
            tls,
            conf_path: conf.path.clone(),
        };
        (ha, rx)
    }

    /// `host:port` this controller listens on.
    pub fn listen_addr(&self) -> &str {
        &self.controllers[self.index].1
    }

    /// In control (else in standby).
    pub fn active(&self) -> bool {
        self.active.load(Ordering::SeqCst)
    }

    pub fn set_active(&self, on: bool) {
        self.active.store(on, Ordering::SeqCst);
    }

    /// `scontrol takeover` reached this controller: take control now.
    pub fn request_takeover(&self) {
        self.taking_over.store(true, Ordering::SeqCst);
        self.takeover.notify_one();
    }

    /// A backup in standby is to read slurm.conf again (it holds no state:
    /// it starts again).
    pub fn request_reread(&self) {
        self.reread.notify_one();
    }

    /// Resolves when [`Ha::request_reread`] was called.
    pub async fn reread_requested(&self) {
        self.reread.notified().await
    }

    /// After a reconfigure of the controller in control: tell the others,
    /// so a backup takes over with the configuration in force (best effort:
    /// one that does not answer reads the file when it starts).
    pub async fn tell_others_reconfigured(&self) {
        for i in (0..self.controllers.len()).filter(|&i| i != self.index) {
            let r = self
                .call(
                    i,
                    CommandCall::Reconfigure(pb::Empty {}),
                    Duration::from_secs(5),
                )
                .await;
            tracing::debug!(
                "told {} to read its configuration: {r:?}",
                self.controllers[i].0
            );
        }
    }

    /// Another controller asks for control: stop taking requests, have the
    /// main thread make the state durable and let the lock go, and answer
    /// once it has (`Ok` at once when not in control).
    pub async fn relinquish(&self) -> Response {
        if !self.active.swap(false, Ordering::SeqCst) {
            return Response::Ok;
        }
        tracing::warn!("another controller asks for control: giving it up");
        let (tx, rx) = oneshot::channel();
        if self.give_up.send(tx).is_err() {
            return Response::Error(SlurmError::InternalError.into());
        }
        match tokio::time::timeout(GIVE_UP_WITHIN, rx).await {
            Ok(Ok(())) => Response::Ok,
            _ => Response::Error(SlurmError::InternalError.into()),
        }
    }

    /// Send `body` to controller `i`, signed with the cluster's key.
    async fn call(&self, i: usize, call: CommandCall, within: Duration) -> Option<Response> {
        let (name, addr) = self.controllers.get(i)?.clone();
        call_signed(
            name,
            addr,
            self.key.clone(),
            self.host.clone(),
            call,
            within,
        )
        .await
    }

    /// Whether controller `i` answers a ping within `within`.
    async fn answers(&self, i: usize, within: Duration) -> bool {
        matches!(
            self.call(i, CommandCall::Ping(pb::Empty {}), within).await,
            Some(Response::Pong { .. })
        )
    }

    /// Ask every other controller to give control up, all at once (the one
    /// holding the lock answers once it has; the others at once; one that
    /// hangs holds up no other).
    async fn ask_others(&self) {
        let mut asks = tokio::task::JoinSet::new();
        for i in (0..self.controllers.len()).filter(|&i| i != self.index) {
            let (name, addr) = self.controllers[i].clone();
            let (key, host) = (self.key.clone(), self.host.clone());
            asks.spawn(async move {
                let call = CommandCall::RelinquishControl(pb::Empty {});
                let r = call_signed(name.clone(), addr, key, host, call, GIVE_UP_WITHIN).await;
                tracing::debug!("asked {name} to give up control: {r:?}");
            });
        }
        while asks.join_next().await.is_some() {}
    }

    /// Wait until this controller may take control, and take the lock on
    /// `dir`: the primary at once (asking a backup in control to give it
    /// up), a backup once no controller ahead of it has answered for
    /// `SlurmctldTimeout`, or when `scontrol takeover` asks.
    pub async fn gain_control(&self, dir: &Path) -> StateLock {
        let ping_every =
            (self.timeout / 4).clamp(Duration::from_millis(250), Duration::from_secs(10));
        let ping_within =
            (self.timeout / 2).clamp(Duration::from_millis(500), Duration::from_secs(5));
        let mut heard = Instant::now();
        let mut asked: Option<Instant> = None;
        let mut said_locked = false;
        let mut said_taking = false;
        let mut said_error = String::new();
        loop {
            let takeover = self.taking_over.load(Ordering::SeqCst);
            let want = self.index == 0 || takeover || heard.elapsed() >= self.timeout;
            if want {
                if self.index > 0 && !takeover && !said_taking {
                    said_taking = true;
                    tracing::warn!(
                        "no controller ahead of this one has answered for {:?}: taking over",
                        self.timeout
                    );
                }
                match StateLock::try_take(dir) {
                    Ok(Some(l)) => {
                        tracing::info!("in control: holding {}", l.path().display());
                        return l;
                    }
                    Ok(None) => {
                        if !said_locked {
                            said_locked = true;
                            tracing::warn!(
                                "{} is held by another controller: waiting for it",
                                dir.join(LOCK_FILE).display()
                            );
                        }
                        // The primary (and a backup told to take over) asks
                        // the controller in control to give it up.
                        if (self.index == 0 || takeover)
                            && asked.is_none_or(|t| t.elapsed() > Duration::from_secs(5))
                        {
                            asked = Some(Instant::now());
                            self.ask_others().await;
                            continue;
                        }
                    }
                    Err(e) => {
                        let e = format!("cannot lock {}: {e}", dir.join(LOCK_FILE).display());
                        if e != said_error {
                            tracing::error!("{e}");
                            said_error = e;
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            // A backup in standby: is any controller ahead of it alive?
            for i in 0..self.index {
                if self.answers(i, ping_within).await {
                    heard = Instant::now();
                    break;
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(ping_every) => {}
                _ = self.takeover.notified() => {}
            }
        }
    }
}

impl Ha {
    /// With replicated state: wait until the controllers choose this one
    /// (the Raft leader) and it has applied everything agreed before; the
    /// state to start from. A backup is chosen when the controller in
    /// control stops answering (Raft's election, timed from
    /// `SlurmctldTimeout`). The primary, and a backup told to take over,
    /// once caught up ask the controller in control to give it up and stand
    /// for election.
    pub async fn gain_replicated_control(
        &self,
        r: &crate::replica::Replica,
    ) -> Result<crate::journal::Saved, crate::replica::ReplicaError> {
        let mut metrics = r.raft.metrics();
        let mut asked: Option<Instant> = None;
        let mut stood = Instant::now();
        let mut said = String::new();
        loop {
            if r.is_leader() {
                match r.leader_state().await {
                    Ok(saved) => {
                        tracing::info!("in control: chosen by the controllers (Raft leader)");
                        return Ok(saved);
                    }
                    Err(e) => tracing::warn!("chosen, but cannot confirm it: {e}"),
                }
            }
            let (leader, caught_up) = r.view();
            let now = match leader {
                Some(l) => format!("controller {l} is in control"),
                None => "no controller is in control".into(),
            };
            if now != said {
                tracing::info!("replicated state: {now}");
                said = now;
            }
            let want = self.index == 0 || self.taking_over.load(Ordering::SeqCst);
            if want
                && caught_up
                && leader.is_some_and(|l| l != r.id)
                && asked.is_none_or(|t| t.elapsed() > Duration::from_secs(5))
            {
                asked = Some(Instant::now());
                self.ask_others().await;
                if let Err(e) = r.raft.trigger().elect().await {
                    tracing::warn!("cannot stand for election: {e}");
                }
                continue;
            }
            // Having asked, stand again whenever no controller is in
            // control, until chosen (the others hold their elections for a
            // while; a single try may meet a lease not yet run out).
            if want
                && caught_up
                && leader.is_none()
                && asked.is_some_and(|t| t.elapsed() < self.timeout * 3)
                && stood.elapsed() >= self.timeout / 4
            {
                stood = Instant::now();
                if let Err(e) = r.raft.trigger().elect().await {
                    tracing::warn!("cannot stand for election: {e}");
                }
            }
            if let Err(e) = &metrics.borrow().running_state {
                return Err(crate::replica::ReplicaError::Raft(format!("stopped: {e}")));
            }
            tokio::select! {
                r = metrics.changed() => if r.is_err() {
                    return Err(crate::replica::ReplicaError::Raft("stopped".into()));
                },
                _ = tokio::time::sleep(Duration::from_millis(250)) => {}
                _ = self.takeover.notified() => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_lock_holder_at_a_time() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("state");
        let first = StateLock::try_take(&dir).unwrap().expect("free");
        // Another open file description (another controller) is refused
        // while the first holds it.
        assert!(StateLock::try_take(&dir).unwrap().is_none());
        drop(first);
        assert!(StateLock::try_take(&dir).unwrap().is_some());
    }

    #[test]
    fn a_planted_link_is_not_followed() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("elsewhere");
        std::fs::write(&target, "x").unwrap();
        std::os::unix::fs::symlink(&target, d.path().join(LOCK_FILE)).unwrap();
        assert!(StateLock::try_take(d.path()).is_err());
    }

    fn conf(text: &str) -> SlurmConf {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("slurm.conf");
        std::fs::write(
            &p,
            format!("{text}NodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n"),
        )
        .unwrap();
        SlurmConf::load(&p).unwrap()
    }

    #[test]
    fn which_controller_this_is() {
        let two = conf("SlurmctldHost=ctl1(127.0.0.1)\nSlurmctldHost=ctl2(127.0.0.2)\n");
        assert_eq!(which(&two, Some("ctl2")), Ok(1));
        assert_eq!(which(&two, Some("ctl1")), Ok(0));
        let e = which(&two, Some("ctl3")).unwrap_err();
        assert!(e.contains("--host ctl3: not a SlurmctldHost"), "{e}");
        // One controller is this one whatever its name.
        let one = conf("SlurmctldHost=elsewhere(127.0.0.1)\n");
        assert_eq!(which(&one, None), Ok(0));
        assert_eq!(SlurmConf::controller_mode(0, 2), "primary");
        assert_eq!(SlurmConf::controller_mode(1, 2), "backup");
        assert_eq!(SlurmConf::controller_mode(2, 3), "backup2");
    }
}
