//! `auth/slurm` semantics: every request carries a credential (uid, gid, host,
//! issue and expiry times, nonce) signed with HMAC-SHA256 under the cluster
//! key, `slurm.key` beside `slurm.conf`. The signature also covers what the
//! credential is for ([`Binding`]): the request's method, the SHA-256 of its
//! body's exact bytes and its receiver, so a credential seen on the wire
//! cannot carry another body or go to another daemon; receivers remember
//! the nonces they accepted until expiry ([`ReplayCache`]), so it cannot
//! be sent twice either.
//!
//! Users never read the key: a command that cannot read it asks the local
//! daemon over a unix socket; the daemon reads the caller's uid/gid from the
//! socket (SO_PEERCRED) and signs a credential for exactly that identity.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use slurm_proto::Credential;
use std::io::Read;
use std::path::{Path, PathBuf};

/// How long a credential is valid, seconds.
pub const CRED_TTL: i64 = 300;
/// Clock skew tolerated for `issued` in the future, seconds.
const SKEW: i64 = 60;
/// Default socket path (Slurm's sackd default).
pub const DEFAULT_SACK_SOCKET: &str = "/run/slurm/sack.socket";

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("cannot read key {path}: {source}")]
    Key {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("key {0} is too short (need at least 16 bytes)")]
    ShortKey(PathBuf),
    #[error("invalid credential signature")]
    BadSignature,
    #[error("no credential with the request")]
    Missing,
    #[error("credential expired")]
    Expired,
    #[error("credential issued in the future")]
    NotYetValid,
    #[error("cannot get a credential from {path}: {source}")]
    Socket {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("malformed credential from {0}")]
    Malformed(PathBuf),
    #[error("credential is for another request")]
    WrongBody,
    #[error("credential is for {0}, not this daemon")]
    WrongReceiver(String),
    #[error("credential already used")]
    Replayed,
    #[error("too many credentials in use; try again")]
    Busy,
    #[error("credential issued before this daemon started; try again")]
    BeforeStart,
    #[error("token: {0}")]
    Token(String),
}

/// What a credential is good for: one request to one receiver.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Binding {
    /// The body's variant name (`SubmitBatchJob`).
    pub method: String,
    /// Hex SHA-256 of the body's exact bytes.
    pub body_hash: String,
    /// `slurmctld`, `slurmdbd` or `slurmd:<node>`.
    pub to: String,
}

/// The receiver name of the controller.
pub const TO_CTLD: &str = "slurmctld";
/// The receiver name of the accounting daemon.
pub const TO_DBD: &str = "slurmdbd";

/// The receiver name of the node daemon serving `node`.
pub fn to_slurmd(node: &str) -> String {
    format!("slurmd:{node}")
}

impl Binding {
    /// For the body whose JSON bytes are `body`, sent to `to`.
    pub fn for_bytes(body: &[u8], to: &str) -> Binding {
        use sha2::Digest;
        Binding {
            method: method_of(body),
            body_hash: hex::encode(Sha256::digest(body)),
            to: to.to_string(),
        }
    }

    /// For a gRPC request: its method's full path and its message's
    /// protobuf bytes.
    pub fn for_message(method: &str, body: &[u8], to: &str) -> Binding {
        use sha2::Digest;
        Binding {
            method: method.to_string(),
            body_hash: hex::encode(Sha256::digest(body)),
            to: to.to_string(),
        }
    }

    /// For `body` as it will be sent (serde_json's bytes of it).
    pub fn for_body<T: serde::Serialize>(body: &T, to: &str) -> Result<Binding, serde_json::Error> {
        Ok(Binding::for_bytes(&serde_json::to_vec(body)?, to))
    }
}

/// The variant of an externally tagged enum in its JSON: `"Ping"` or
/// `{"SubmitBatchJob":...}` (empty for anything else).
pub fn method_of(body: &[u8]) -> String {
    let s = std::str::from_utf8(&body[..body.len().min(256)]).unwrap_or("");
    let s = s.trim_start();
    let s = s.strip_prefix('{').map(str::trim_start).unwrap_or(s);
    match s.strip_prefix('"') {
        Some(rest) => rest
            .split('"')
            .next()
            .filter(|m| m.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or("")
            .to_string(),
        None => String::new(),
    }
}

/// The nonces a receiver accepted, until their credentials expire: a
/// credential is good once. Bounded: each user may hold at most a share of
/// the table (beyond it that user is told to wait, not everyone), and root
/// (the daemons) is never refused for room.
pub struct ReplayCache {
    inner: std::sync::Mutex<Seen>,
    cap: usize,
    /// When this daemon started: the credentials it saw before a restart
    /// are not remembered, so older ones are refused (callers sign anew).
    since: i64,
}

/// Clock difference between hosts allowed for [`ReplayCache`]'s start.
const START_SLACK: i64 = 2;

#[derive(Default)]
struct Seen {
    nonces: std::collections::HashMap<(u64, u32), i64>,
    per_uid: std::collections::HashMap<u32, usize>,
    pruned: i64,
}

impl Seen {
    fn prune(&mut self, now: i64) {
        self.nonces.retain(|_, exp| *exp >= now);
        self.per_uid.clear();
        for (_, uid) in self.nonces.keys() {
            *self.per_uid.entry(*uid).or_default() += 1;
        }
        self.pruned = now;
    }
}

impl ReplayCache {
    /// At most `cap` credentials remembered; one user at most `cap / 16`.
    pub fn new(cap: usize) -> ReplayCache {
        ReplayCache {
            inner: Default::default(),
            cap,
            since: now(),
        }
    }

    /// [`ReplayCache::new`] for a daemon that started at `since`.
    pub fn started_at(cap: usize, since: i64) -> ReplayCache {
        ReplayCache {
            since,
            ..ReplayCache::new(cap)
        }
    }

    /// Accept `c` once (a token, a bearer credential, may be used again).
    pub fn check(&self, c: &Credential, now: i64) -> Result<(), AuthError> {
        if !c.token.is_empty() {
            return Ok(());
        }
        // Issued before this daemon started: it may have been used with
        // the daemon that ran then, whose record of it is gone. (After a
        // backward clock step, the start is taken as now.)
        if c.issued < self.since.min(now) - START_SLACK {
            return Err(AuthError::BeforeStart);
        }
        let mut s = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let quota = (self.cap / 16).max(1);
        let over = |s: &Seen| {
            c.uid != 0
                && (s.nonces.len() >= self.cap
                    || s.per_uid.get(&c.uid).copied().unwrap_or(0) >= quota)
        };
        // Expired entries go at most once a second (a scan of the table).
        if over(&s) && s.pruned != now {
            s.prune(now);
        }
        if over(&s) {
            return Err(AuthError::Busy);
        }
        if s.nonces.insert((c.nonce, c.uid), c.expires).is_some() {
            return Err(AuthError::Replayed);
        }
        *s.per_uid.entry(c.uid).or_default() += 1;
        Ok(())
    }
}

impl Default for ReplayCache {
    fn default() -> ReplayCache {
        ReplayCache::new(1 << 20)
    }
}

/// The cluster key.
#[derive(Clone)]
pub struct Key(Vec<u8>);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    pub fn from_bytes(b: &[u8]) -> Key {
        Key(b.to_vec())
    }

    pub fn load(path: &Path) -> Result<Key, AuthError> {
        let mut buf = Vec::new();
        std::fs::File::open(path)
            .and_then(|mut f| f.read_to_end(&mut buf))
            .map_err(|source| AuthError::Key {
                path: path.to_path_buf(),
                source,
            })?;
        if buf.len() < 16 {
            return Err(AuthError::ShortKey(path.to_path_buf()));
        }
        Ok(Key(buf))
    }

    fn mac(&self, c: &Credential) -> Hmac<Sha256> {
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("hmac takes any key");
        // Newlines cannot occur in any field (host names, method names and
        // receivers are checked below), so the fields cannot be shifted.
        m.update(
            format!(
                "{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}",
                c.uid, c.gid, c.host, c.issued, c.expires, c.nonce, c.method, c.body_hash, c.to
            )
            .as_bytes(),
        );
        m
    }

    /// Sign a credential for `uid`/`gid` and the request `b`, valid from
    /// `now` for [`CRED_TTL`].
    pub fn sign(&self, uid: u32, gid: u32, host: &str, now: i64, b: &Binding) -> Credential {
        let clean = |s: &str| s.replace(['\n', '\r'], " ");
        let mut c = Credential {
            uid,
            gid,
            host: clean(host),
            issued: now,
            expires: now + CRED_TTL,
            nonce: rand::random(),
            method: clean(&b.method),
            body_hash: clean(&b.body_hash),
            to: clean(&b.to),
            sig: String::new(),
            token: String::new(),
        };
        c.sig = hex::encode(self.mac(&c).finalize().into_bytes());
        c
    }

    /// Check the signature, the validity window and that `c` was made for
    /// the request `b` (the receiver checks its own name in `b.to`).
    pub fn verify(&self, c: &Credential, now: i64, b: &Binding) -> Result<(), AuthError> {
        let sig = hex::decode(&c.sig).map_err(|_| AuthError::BadSignature)?;
        let fields = [&c.host, &c.method, &c.body_hash, &c.to];
        if fields.iter().any(|f| f.contains(['\n', '\r'])) {
            return Err(AuthError::BadSignature);
        }
        self.mac(c)
            .verify_slice(&sig)
            .map_err(|_| AuthError::BadSignature)?;
        if now > c.expires {
            return Err(AuthError::Expired);
        }
        if c.issued > now + SKEW {
            return Err(AuthError::NotYetValid);
        }
        if c.to != b.to {
            return Err(AuthError::WrongReceiver(c.to.clone()));
        }
        if c.method != b.method || c.body_hash != b.body_hash {
            return Err(AuthError::WrongBody);
        }
        Ok(())
    }
}

impl Key {
    fn step_mac(&self, c: &slurm_proto::StepCred) -> Hmac<Sha256> {
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("hmac takes any key");
        m.update(
            format!(
                "step\n{}\n{}\n{}\n{}\n{}\n{}\n{}",
                c.job_id,
                c.step_id,
                c.uid,
                c.gid,
                c.user_name,
                c.nodes.join(","),
                c.expires
            )
            .as_bytes(),
        );
        // What the node daemon applies (a canonical JSON of it).
        let applied = (
            &c.alloc,
            &c.partition,
            &c.account,
            c.job_start,
            &c.tasks,
            c.cpus_per_task,
            &c.job_cpus,
        );
        m.update(b"\n");
        m.update(&serde_json::to_vec(&applied).unwrap_or_default());
        // The step's own CPUs (`srun --exact`), only where it has them: a
        // credential without them reads as it did before they existed.
        if !c.step_cpus.is_empty() {
            m.update(b"\nstep_cpus ");
            m.update(&serde_json::to_vec(&c.step_cpus).unwrap_or_default());
        }
        if !c.step_gres.is_empty() {
            m.update(b"\nstep_gres ");
            m.update(&serde_json::to_vec(&c.step_gres).unwrap_or_default());
        }
        if !c.step_mem.is_empty() {
            m.update(b"\nstep_mem ");
            m.update(&serde_json::to_vec(&c.step_mem).unwrap_or_default());
        }
        m
    }

    /// Sign a step credential (the controller does this).
    pub fn sign_step(&self, c: &mut slurm_proto::StepCred) {
        c.sig = hex::encode(self.step_mac(c).finalize().into_bytes());
    }

    /// Check a step credential's signature and expiry (node daemons do this).
    pub fn verify_step(&self, c: &slurm_proto::StepCred, now: i64) -> Result<(), AuthError> {
        let sig = hex::decode(&c.sig).map_err(|_| AuthError::BadSignature)?;
        self.step_mac(c)
            .verify_slice(&sig)
            .map_err(|_| AuthError::BadSignature)?;
        if now > c.expires {
            return Err(AuthError::Expired);
        }
        Ok(())
    }
}

/// `slurm.key` beside the configuration file.
pub fn key_path(conf_path: &Path) -> PathBuf {
    conf_path
        .parent()
        .unwrap_or_else(|| Path::new("/etc/slurm"))
        .join("slurm.key")
}

/// Where the local credential socket is: `$SLURM_SACK_SOCKET`, else
/// `AuthInfo=socket=...`, else [`DEFAULT_SACK_SOCKET`].
pub fn sack_socket_path(conf: &crate::conf::SlurmConf) -> PathBuf {
    if let Ok(p) = std::env::var("SLURM_SACK_SOCKET") {
        if !p.is_empty() {
            return PathBuf::from(p);
        }
    }
    if conf.auth_type == "auth/slurm" {
        if let Some(p) = conf.auth_info_value("socket") {
            return PathBuf::from(p);
        }
    }
    PathBuf::from(DEFAULT_SACK_SOCKET)
}

pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// How a command obtains credentials: sign itself when it can read the key,
/// otherwise ask the local daemon.
#[derive(Clone)]
pub struct CredSource {
    key_path: PathBuf,
    socket: PathBuf,
}

impl CredSource {
    pub fn from_conf(conf: &crate::conf::SlurmConf) -> CredSource {
        CredSource {
            key_path: key_path(&conf.path),
            socket: sack_socket_path(conf),
        }
    }

    /// A credential for ourselves and the request `b`.
    pub fn credential(&self, b: &Binding) -> Result<Credential, AuthError> {
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        match Key::load(&self.key_path) {
            Ok(k) => Ok(k.sign(uid, gid, &crate::users::hostname(), now(), b)),
            Err(_) => fetch_from_socket(&self.socket, b),
        }
    }
}

/// Ask the credential socket at `path` for a credential for ourselves and
/// the request `b`.
pub fn fetch_from_socket(path: &Path, b: &Binding) -> Result<Credential, AuthError> {
    use std::io::Write;
    let err = |source| AuthError::Socket {
        path: path.to_path_buf(),
        source,
    };
    let mut s = std::os::unix::net::UnixStream::connect(path).map_err(err)?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .map_err(err)?;
    let ask = serde_json::to_vec(b).map_err(|_| AuthError::Malformed(path.to_path_buf()))?;
    s.write_all(&ask).map_err(err)?;
    s.shutdown(std::net::Shutdown::Write).map_err(err)?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).map_err(err)?;
    serde_json::from_slice(&buf).map_err(|_| AuthError::Malformed(path.to_path_buf()))
}

/// Largest request on the credential socket.
const SACK_MAX: u64 = 4096;

/// Serve credentials on a unix socket until the task is dropped. Each
/// connection sends the [`Binding`] it wants a credential for and gets one
/// JSON credential for the peer's uid and gid, bound to it.
pub async fn serve_sack(listener: tokio::net::UnixListener, key: Key) {
    let host = crate::users::hostname();
    // Callers served at once: idle ones cannot use up the descriptors.
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(256));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
        let (key, host) = (key.clone(), host.clone());
        // One task per caller: a slow one holds up nobody else.
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let Ok(peer) = stream.peer_cred() else {
                return;
            };
            let mut stream = stream;
            let mut ask = Vec::new();
            let read = async { (&mut stream).take(SACK_MAX).read_to_end(&mut ask).await };
            let Ok(Ok(_)) = tokio::time::timeout(std::time::Duration::from_secs(5), read).await
            else {
                return;
            };
            let Ok(b) = serde_json::from_slice::<Binding>(&ask) else {
                return;
            };
            let cred = key.sign(peer.uid(), peer.gid(), &host, now(), &b);
            if let Ok(body) = serde_json::to_vec(&cred) {
                let _ = stream.write_all(&body).await;
                let _ = stream.shutdown().await;
            }
            drop(permit);
        });
    }
}

/// Bind the credential socket at `path` (world-connectable), unless a live
/// daemon already serves it. Returns `None` when another daemon has it.
pub fn bind_sack(path: &Path) -> std::io::Result<Option<tokio::net::UnixListener>> {
    use std::os::unix::fs::PermissionsExt;
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Ok(None);
        }
        std::fs::remove_file(path)?;
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let l = tokio::net::UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777))?;
    Ok(Some(l))
}

/// Write a new random key to `path` with mode 0600 (used by `slurm-local`).
pub fn generate_key(path: &Path) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let bytes: [u8; 32] = rand::random();
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(hex::encode(bytes).as_bytes())?;
    Ok(())
}

/// A credential that carries a user's JWT instead of a signature (passed
/// on by a slurmrestd holding no key): with `jwt_key` (`AuthAltTypes=
/// auth/jwt`), the token is checked and the credential then acts as the
/// user it names, until the token expires.
pub fn take_token(
    cred: &mut Credential,
    jwt_key: Option<&[u8]>,
    now: i64,
) -> Result<(), AuthError> {
    let Some(jk) = jwt_key else {
        return Err(AuthError::Token(
            "tokens are not accepted here (AuthAltTypes=auth/jwt)".into(),
        ));
    };
    let claims = crate::jwt::verify_token(jk, &cred.token, now)
        .map_err(|e| AuthError::Token(e.to_string()))?;
    let user = crate::users::user_by_name(&claims.sun)
        .ok_or_else(|| AuthError::Token(format!("unknown user {}", claims.sun)))?;
    cred.uid = user.uid;
    cred.gid = user.gid;
    cred.expires = claims.exp;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bind(body: &str, to: &str) -> Binding {
        Binding::for_bytes(body.as_bytes(), to)
    }

    #[test]
    fn signed_credentials_verify_and_forgeries_do_not() {
        let k = Key::from_bytes(b"0123456789abcdef0123");
        let b = bind(r#"{"LaunchBatch":{"job_id":1}}"#, "slurmd:n1");
        assert_eq!(b.method, "LaunchBatch");
        let c = k.sign(1000, 1000, "h", 100, &b);
        k.verify(&c, 150, &b).unwrap();
        let mut forged = c.clone();
        forged.uid = 0;
        assert!(matches!(
            k.verify(&forged, 150, &b),
            Err(AuthError::BadSignature)
        ));
        let other = Key::from_bytes(b"another key of 16+ bytes");
        assert!(matches!(
            other.verify(&c, 150, &b),
            Err(AuthError::BadSignature)
        ));
        assert!(matches!(
            k.verify(&c, 100 + CRED_TTL + 1, &b),
            Err(AuthError::Expired)
        ));
        assert!(matches!(k.verify(&c, 0, &b), Err(AuthError::NotYetValid)));
        let mut junk = c.clone();
        junk.sig = "zz".into();
        assert!(matches!(
            k.verify(&junk, 150, &b),
            Err(AuthError::BadSignature)
        ));
        // Bound to its body and its receiver.
        let body2 = bind(r#"{"LaunchBatch":{"job_id":2}}"#, "slurmd:n1");
        assert!(matches!(
            k.verify(&c, 150, &body2),
            Err(AuthError::WrongBody)
        ));
        let n2 = bind(r#"{"LaunchBatch":{"job_id":1}}"#, "slurmd:n2");
        assert!(matches!(
            k.verify(&c, 150, &n2),
            Err(AuthError::WrongReceiver(_))
        ));
        // Rewriting the binding in the credential breaks the signature.
        let mut moved = c.clone();
        moved.to = "slurmd:n2".into();
        assert!(matches!(
            k.verify(&moved, 150, &n2),
            Err(AuthError::BadSignature)
        ));
        let mut swapped = c;
        swapped.body_hash = body2.body_hash.clone();
        assert!(matches!(
            k.verify(&swapped, 150, &body2),
            Err(AuthError::BadSignature)
        ));
    }

    /// A restarted daemon remembers no credential: those issued before it
    /// started are refused (a caller signs anew), those after are taken.
    #[test]
    fn credentials_from_before_a_restart_are_refused() {
        let k = Key::from_bytes(b"0123456789abcdef0123");
        let b = bind(r#""Ping""#, TO_CTLD);
        let cache = ReplayCache::started_at(32, 1000);
        let old = k.sign(5, 5, "h", 990, &b);
        assert!(matches!(
            cache.check(&old, 1001),
            Err(AuthError::BeforeStart)
        ));
        // A little clock difference between hosts is allowed.
        cache.check(&k.sign(5, 5, "h", 999, &b), 1001).unwrap();
        cache.check(&k.sign(0, 0, "h", 1001, &b), 1001).unwrap();
        // The clock stepped back an hour: fresh credentials still pass.
        cache.check(&k.sign(5, 5, "h", 2, &b), 3).unwrap();
    }

    #[test]
    fn methods_and_replays() {
        assert_eq!(method_of(br#""Ping""#), "Ping");
        assert_eq!(method_of(br#"{"Cancel":{}}"#), "Cancel");
        assert_eq!(method_of(b"[1]"), "");
        let k = Key::from_bytes(b"0123456789abcdef0123");
        let b = bind(r#""Ping""#, TO_CTLD);
        let c = k.sign(5, 5, "h", 100, &b);
        let cache = ReplayCache::started_at(32, 99);
        cache.check(&c, 100).unwrap();
        assert!(matches!(cache.check(&c, 101), Err(AuthError::Replayed)));
        let c2 = k.sign(5, 5, "h", 100, &b);
        cache.check(&c2, 100).unwrap();
        // User 5 holds its share (32 / 16) of live credentials: it waits;
        // another user and root do not.
        let c3 = k.sign(5, 5, "h", 100, &b);
        assert!(matches!(cache.check(&c3, 150), Err(AuthError::Busy)));
        cache.check(&k.sign(6, 6, "h", 100, &b), 150).unwrap();
        for _ in 0..40 {
            cache.check(&k.sign(0, 0, "h", 100, &b), 150).unwrap();
        }
        // Once user 5's expire, room again.
        cache.check(&c3, 100 + CRED_TTL + 1).unwrap();
    }

    #[test]
    fn step_credentials_are_bound_to_their_fields() {
        let k = Key::from_bytes(b"0123456789abcdef0123");
        let mut c = slurm_proto::StepCred {
            job_id: 5,
            step_id: 0,
            uid: 1000,
            gid: 1000,
            user_name: "u".into(),
            nodes: vec!["n1".into(), "n2".into()],
            expires: 500,
            alloc: slurm_proto::Allocation {
                nodes: vec!["n1".into(), "n2".into()],
                cpus: vec![2, 2],
                mem: vec![100, 100],
                tasks: vec![1, 1],
                gres: Vec::new(),
            },
            ..Default::default()
        };
        let mut own = c.clone();
        own.step_cpus = vec![1, 1];
        let gpu = |i| {
            vec![vec![slurm_proto::GresAlloc {
                name: "gpu".into(),
                kind: None,
                indices: vec![i],
            }]]
        };
        own.step_gres = gpu(1);
        k.sign_step(&mut own);
        k.verify_step(&own, 400).unwrap();
        // Another GPU of the job (another step's): refused.
        let mut other_gpu = own.clone();
        other_gpu.step_gres = gpu(0);
        assert!(matches!(
            k.verify_step(&other_gpu, 400),
            Err(AuthError::BadSignature)
        ));
        for cut in [vec![], vec![2, 2], vec![1]] {
            let mut x = own.clone();
            x.step_cpus = cut;
            assert!(matches!(
                k.verify_step(&x, 400),
                Err(AuthError::BadSignature)
            ));
        }
        k.sign_step(&mut c);
        k.verify_step(&c, 400).unwrap();
        assert!(matches!(k.verify_step(&c, 501), Err(AuthError::Expired)));
        let mut other = c.clone();
        other.nodes.push("n3".into());
        assert!(matches!(
            k.verify_step(&other, 400),
            Err(AuthError::BadSignature)
        ));
        // Every field the node daemon applies is signed too.
        let mut more = c.clone();
        more.alloc.gres = vec![vec![slurm_proto::GresAlloc {
            name: "gpu".into(),
            kind: None,
            indices: vec![0, 1, 2, 3],
        }]];
        assert!(matches!(
            k.verify_step(&more, 400),
            Err(AuthError::BadSignature)
        ));
        for change in [
            |c: &mut slurm_proto::StepCred| c.alloc.cpus = vec![64],
            |c: &mut slurm_proto::StepCred| c.alloc.mem = vec![1 << 20],
            |c: &mut slurm_proto::StepCred| c.account = "rich".into(),
            |c: &mut slurm_proto::StepCred| c.partition = "gpu".into(),
            |c: &mut slurm_proto::StepCred| c.job_start = Some(1),
            |c: &mut slurm_proto::StepCred| c.cpus_per_task = 8,
            |c: &mut slurm_proto::StepCred| c.step_cpus = vec![2, 1],
            |c: &mut slurm_proto::StepCred| c.step_mem = vec![1 << 20],
            |c: &mut slurm_proto::StepCred| {
                c.step_gres = vec![vec![slurm_proto::GresAlloc {
                    name: "gpu".into(),
                    kind: None,
                    indices: vec![0],
                }]]
            },
        ] {
            let mut x = c.clone();
            change(&mut x);
            assert!(matches!(
                k.verify_step(&x, 400),
                Err(AuthError::BadSignature)
            ));
        }
    }

    #[test]
    fn short_or_missing_keys_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("slurm.key");
        assert!(matches!(Key::load(&p), Err(AuthError::Key { .. })));
        std::fs::write(&p, b"short").unwrap();
        assert!(matches!(Key::load(&p), Err(AuthError::ShortKey(_))));
        std::fs::remove_file(&p).unwrap();
        generate_key(&p).unwrap();
        Key::load(&p).unwrap();
    }

    #[tokio::test]
    async fn socket_hands_out_the_callers_identity() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sack.socket");
        let key = Key::from_bytes(b"0123456789abcdef0123");
        let l = bind_sack(&p).unwrap().unwrap();
        let task = tokio::spawn(serve_sack(l, key.clone()));
        let p2 = p.clone();
        let b = bind(r#""Ping""#, TO_CTLD);
        let b2 = b.clone();
        let c = tokio::task::spawn_blocking(move || fetch_from_socket(&p2, &b2))
            .await
            .unwrap()
            .unwrap();
        // SAFETY: getuid cannot fail.
        assert_eq!(c.uid, unsafe { libc::getuid() });
        key.verify(&c, now(), &b).unwrap();
        // A second binder sees the live daemon and stands aside.
        assert!(bind_sack(&p).unwrap().is_none());
        task.abort();
    }
}
