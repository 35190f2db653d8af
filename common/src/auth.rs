//! `auth/slurm` semantics: every request carries a credential (uid, gid, host,
//! issue and expiry times, nonce) signed with HMAC-SHA256 under the cluster
//! key, `slurm.key` beside `slurm.conf`.
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
        m.update(
            format!(
                "{}\n{}\n{}\n{}\n{}\n{}",
                c.uid, c.gid, c.host, c.issued, c.expires, c.nonce
            )
            .as_bytes(),
        );
        m
    }

    /// Sign a credential for `uid`/`gid`, valid from `now` for [`CRED_TTL`].
    pub fn sign(&self, uid: u32, gid: u32, host: &str, now: i64) -> Credential {
        let mut c = Credential {
            uid,
            gid,
            host: host.to_string(),
            issued: now,
            expires: now + CRED_TTL,
            nonce: rand::random(),
            sig: String::new(),
        };
        c.sig = hex::encode(self.mac(&c).finalize().into_bytes());
        c
    }

    /// Check signature and validity window.
    pub fn verify(&self, c: &Credential, now: i64) -> Result<(), AuthError> {
        let sig = hex::decode(&c.sig).map_err(|_| AuthError::BadSignature)?;
        self.mac(c)
            .verify_slice(&sig)
            .map_err(|_| AuthError::BadSignature)?;
        if now > c.expires {
            return Err(AuthError::Expired);
        }
        if c.issued > now + SKEW {
            return Err(AuthError::NotYetValid);
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

    pub fn credential(&self) -> Result<Credential, AuthError> {
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        match Key::load(&self.key_path) {
            Ok(k) => Ok(k.sign(uid, gid, &crate::users::hostname(), now())),
            Err(_) => fetch_from_socket(&self.socket),
        }
    }
}

/// Ask the credential socket at `path` for a credential for ourselves.
pub fn fetch_from_socket(path: &Path) -> Result<Credential, AuthError> {
    let err = |source| AuthError::Socket {
        path: path.to_path_buf(),
        source,
    };
    let mut s = std::os::unix::net::UnixStream::connect(path).map_err(err)?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .map_err(err)?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).map_err(err)?;
    serde_json::from_slice(&buf).map_err(|_| AuthError::Malformed(path.to_path_buf()))
}

/// Serve credentials on a unix socket until the task is dropped. Each
/// connection gets one JSON credential for the peer's uid and gid.
pub async fn serve_sack(listener: tokio::net::UnixListener, key: Key) {
    let host = crate::users::hostname();
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
        let Ok(peer) = stream.peer_cred() else {
            continue;
        };
        let cred = key.sign(peer.uid(), peer.gid(), &host, now());
        if let Ok(body) = serde_json::to_vec(&cred) {
            use tokio::io::AsyncWriteExt;
            let _ = stream.write_all(&body).await;
            let _ = stream.shutdown().await;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed_credentials_verify_and_forgeries_do_not() {
        let k = Key::from_bytes(b"0123456789abcdef0123");
        let c = k.sign(1000, 1000, "h", 100);
        k.verify(&c, 150).unwrap();
        let mut forged = c.clone();
        forged.uid = 0;
        assert!(matches!(
            k.verify(&forged, 150),
            Err(AuthError::BadSignature)
        ));
        let other = Key::from_bytes(b"another key of 16+ bytes");
        assert!(matches!(
            other.verify(&c, 150),
            Err(AuthError::BadSignature)
        ));
        assert!(matches!(
            k.verify(&c, 100 + CRED_TTL + 1),
            Err(AuthError::Expired)
        ));
        assert!(matches!(k.verify(&c, 0), Err(AuthError::NotYetValid)));
        let mut junk = c;
        junk.sig = "zz".into();
        assert!(matches!(k.verify(&junk, 150), Err(AuthError::BadSignature)));
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
            sig: String::new(),
        };
        k.sign_step(&mut c);
        k.verify_step(&c, 400).unwrap();
        assert!(matches!(k.verify_step(&c, 501), Err(AuthError::Expired)));
        let mut other = c.clone();
        other.nodes.push("n3".into());
        assert!(matches!(
            k.verify_step(&other, 400),
            Err(AuthError::BadSignature)
        ));
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
        let c = tokio::task::spawn_blocking(move || fetch_from_socket(&p2))
            .await
            .unwrap()
            .unwrap();
        // SAFETY: getuid cannot fail.
        assert_eq!(c.uid, unsafe { libc::getuid() });
        key.verify(&c, now()).unwrap();
        // A second binder sees the live daemon and stands aside.
        assert!(bind_sack(&p).unwrap().is_none());
        task.abort();
    }
}
