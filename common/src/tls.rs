//! TLS between the processes (rustls), configured with Slurm's names:
//! `TLSType=tls/rustls` (`tls/s2n` is taken as an alias) and
//! `TLSParameters=ca_cert_file=...,ctld_cert_file=...` in slurm.conf and
//! slurmdbd.conf. Without `TLSType` everything speaks clear text, as Slurm.
//!
//! Who is who: every certificate must chain to `ca_cert_file`. A server is
//! checked for the name its caller meant: the controller for its
//! `SlurmctldHost` name, a node daemon for its `NodeName`, slurmdbd for its
//! `DbdHost`/`AccountingStorageHost`. Daemons present their own certificate
//! when they call (mutual TLS), so a receiver knows which daemon sent a
//! request ([`Peer`]): a node daemon takes controller requests only from a
//! certificate naming a controller, the controller takes a node's reports
//! only from a certificate naming that node. Commands present none.
//!
//! Only TLS 1.3 is offered. Files are read once, at start.

use rustls::pki_types::pem::PemObject;
pub use rustls::pki_types::CertificateDer;
use rustls::pki_types::{PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

pub use tokio_rustls::TlsAcceptor;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("TLSType={0}: unknown (expected tls/rustls, tls/s2n or tls/none)")]
    UnknownType(String),
    #[error("TLSParameters: unknown parameter '{0}'")]
    UnknownParameter(String),
    #[error("TLSParameters: '{0}' is not key=value")]
    BadParameter(String),
    #[error("cannot read {what} {path}: {detail}")]
    File {
        what: &'static str,
        path: PathBuf,
        detail: String,
    },
    #[error("{0}")]
    Config(String),
}

/// The certificate files, Slurm's defaults in the configuration directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    pub ca_cert: PathBuf,
    pub ctld_cert: PathBuf,
    pub ctld_key: PathBuf,
    pub dbd_cert: PathBuf,
    pub dbd_key: PathBuf,
    /// `%n` stands for the node's name (several node daemons on one host).
    pub slurmd_cert: PathBuf,
    pub slurmd_key: PathBuf,
    pub restd_cert: PathBuf,
    pub restd_key: PathBuf,
    pub sackd_cert: PathBuf,
    pub sackd_key: PathBuf,
    /// Said once at start (`tls/s2n` taken as `tls/rustls`).
    pub notices: Vec<String>,
}

/// Which process loads the settings: what it serves and shows as itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    Ctld,
    Slurmd {
        node: String,
    },
    Dbd,
    Restd,
    Sackd,
    /// A command: verifies servers, shows no certificate.
    Command,
}

/// The names of `TLSParameters` and the file each defaults to.
const FILES: [(&str, &str); 11] = [
    ("ca_cert_file", "ca_cert.pem"),
    ("ctld_cert_file", "ctld_cert.pem"),
    ("ctld_cert_key_file", "ctld_cert_key.pem"),
    ("dbd_cert_file", "dbd_cert.pem"),
    ("dbd_cert_key_file", "dbd_cert_key.pem"),
    ("slurmd_cert_file", "slurmd_cert.pem"),
    ("slurmd_cert_key_file", "slurmd_cert_key.pem"),
    ("restd_cert_file", "restd_cert.pem"),
    ("restd_cert_key_file", "restd_cert_key.pem"),
    ("sackd_cert_file", "sackd_cert.pem"),
    ("sackd_cert_key_file", "sackd_cert_key.pem"),
];

impl TlsSettings {
    /// `None` when TLS is off (no `TLSType`, or `tls/none`). Relative
    /// paths are taken from `conf_dir`.
    pub fn parse(
        tls_type: Option<&str>,
        parameters: Option<&str>,
        conf_dir: &Path,
    ) -> Result<Option<TlsSettings>, TlsError> {
        let mut notices = Vec::new();
        match tls_type.map(str::trim) {
            None | Some("") | Some("tls/none") => return Ok(None),
            Some("tls/rustls") => {}
            Some("tls/s2n") => {
                notices.push("TLSType=tls/s2n: served by tls/rustls".to_string());
            }
            Some(other) => return Err(TlsError::UnknownType(other.to_string())),
        }
        let mut paths: Vec<PathBuf> = FILES.iter().map(|(_, f)| conf_dir.join(f)).collect();
        for p in parameters.unwrap_or("").split(',') {
            let p = p.trim();
            if p.is_empty() {
                continue;
            }
            let Some((k, v)) = p.split_once('=') else {
                return Err(TlsError::BadParameter(p.to_string()));
            };
            let k = k.trim().to_ascii_lowercase();
            let Some(i) = FILES.iter().position(|(name, _)| *name == k) else {
                return Err(TlsError::UnknownParameter(k));
            };
            let v = v.trim();
            if v.is_empty() {
                return Err(TlsError::BadParameter(p.to_string()));
            }
            paths[i] = conf_dir.join(v);
        }
        let mut it = paths.into_iter();
        let mut next = || it.next().unwrap_or_default();
        Ok(Some(TlsSettings {
            ca_cert: next(),
            ctld_cert: next(),
            ctld_key: next(),
            dbd_cert: next(),
            dbd_key: next(),
            slurmd_cert: next(),
            slurmd_key: next(),
            restd_cert: next(),
            restd_key: next(),
            sackd_cert: next(),
            sackd_key: next(),
            notices,
        }))
    }

    /// From slurm.conf's `TLSType` and `TLSParameters`. Relative paths
    /// are taken from slurm.conf's directory; for a configless host's copy
    /// (`DIR/conf-cache/slurm.conf`) from `DIR`, the host's own directory,
    /// which holds its key, the CA and its certificate (what the controller
    /// hands out never includes them).
    pub fn from_conf(conf: &crate::conf::SlurmConf) -> Result<Option<TlsSettings>, TlsError> {
        let mut dir = conf.path.parent().unwrap_or(Path::new("/etc/slurm"));
        if dir
            .file_name()
            .is_some_and(|n| n == crate::conf::CONFIG_CACHE)
        {
            dir = dir.parent().unwrap_or(dir);
        }
        Self::parse(conf.get("TLSType"), conf.get("TLSParameters"), dir)
    }

    /// The certificate and key `role` shows, if any.
    fn identity(&self, role: &Role) -> Option<(PathBuf, PathBuf)> {
        let node = |p: &Path, n: &str| PathBuf::from(p.to_string_lossy().replace("%n", n));
        match role {
            Role::Ctld => Some((self.ctld_cert.clone(), self.ctld_key.clone())),
            Role::Dbd => Some((self.dbd_cert.clone(), self.dbd_key.clone())),
            Role::Slurmd { node: n } => {
                Some((node(&self.slurmd_cert, n), node(&self.slurmd_key, n)))
            }
            Role::Sackd => Some((self.sackd_cert.clone(), self.sackd_key.clone())),
            // slurmrestd runs unprivileged and calls as its clients' tokens;
            // it needs no certificate of its own to call.
            Role::Restd | Role::Command => None,
        }
    }

    /// Read the files `role` needs and build its configurations.
    pub fn load(&self, role: &Role) -> Result<Tls, TlsError> {
        let roots = Arc::new(load_roots(&self.ca_cert)?);
        let identity = match self.identity(role) {
            Some((c, k)) => Some((load_certs(&c)?, load_key(&k)?)),
            None => None,
        };
        let client = client_config(
            roots.clone(),
            identity.as_ref().map(|(c, k)| (c.clone(), k.clone_key())),
        )?;
        // The controller's own certificate, where this host has it: then a
        // caller is the controller only if it shows exactly that one.
        let controller = load_certs(&self.ctld_cert)
            .ok()
            .and_then(|c| c.into_iter().next());
        let server = match (role, identity) {
            (Role::Ctld | Role::Slurmd { .. } | Role::Dbd, Some((certs, key))) => {
                Some(Arc::new(server_config(roots, certs, key)?))
            }
            _ => None,
        };
        Ok(Tls {
            client: Arc::new(client),
            server,
            controller,
        })
    }
}

/// ring, TLS 1.3's suites with AES-128-GCM first: its SHA-256 key
/// schedule costs less per handshake than SHA-384's.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    use rustls::crypto::ring::cipher_suite as cs;
    let mut p = rustls::crypto::ring::default_provider();
    p.cipher_suites = vec![
        cs::TLS13_AES_128_GCM_SHA256,
        cs::TLS13_CHACHA20_POLY1305_SHA256,
        cs::TLS13_AES_256_GCM_SHA384,
    ];
    Arc::new(p)
}

fn file_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(String) -> TlsError + 'a {
    move |detail| TlsError::File {
        what,
        path: path.to_path_buf(),
        detail,
    }
}

/// The CA certificates in a PEM file.
pub fn load_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for c in load_certs_as(path, "CA certificate")? {
        roots
            .add(c)
            .map_err(|e| file_err("CA certificate", path)(e.to_string()))?;
    }
    Ok(roots)
}

/// The certificate chain in a PEM file (leaf first).
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    load_certs_as(path, "certificate")
}

fn load_certs_as(
    path: &Path,
    what: &'static str,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_err(what, path)(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_err(what, path)(e.to_string()))?;
    if certs.is_empty() {
        return Err(file_err(what, path)("no PEM certificate in it".into()));
    }
    Ok(certs)
}

/// The private key in a PEM file.
pub fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| file_err("private key", path)(e.to_string()))
}

fn client_config(
    roots: Arc<RootCertStore>,
    identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
) -> Result<ClientConfig, TlsError> {
    let b = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_root_certificates(roots);
    match identity {
        Some((certs, key)) => b
            .with_client_auth_cert(certs, key)
            .map_err(|e| TlsError::Config(format!("own certificate and key: {e}"))),
        None => Ok(b.with_no_client_auth()),
    }
}

/// A server that verifies the certificates its callers show against the
/// CA; callers may show none (commands), which [`Peer`] tells apart.
fn server_config(
    roots: Arc<RootCertStore>,
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<ServerConfig, TlsError> {
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(roots, provider())
        .allow_unauthenticated()
        .build()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let mut cfg = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .map_err(|e| TlsError::Config(format!("own certificate and key: {e}")))?;
    // Daemons calling again resume their session (no certificate
    // signatures to make or check) with a ticket the server keeps nothing
    // for: a thousand nodes' heartbeats cost key agreement only.
    cfg.ticketer = rustls::crypto::ring::Ticketer::new()
        .map_err(|e| TlsError::Config(format!("session tickets: {e}")))?;
    Ok(cfg)
}

/// A process's TLS: how it calls, and (daemons) how it serves.
#[derive(Clone)]
pub struct Tls {
    pub client: Arc<ClientConfig>,
    pub server: Option<Arc<ServerConfig>>,
    /// `ctld_cert_file`, when readable here.
    pub controller: Option<CertificateDer<'static>>,
}

impl Tls {
    /// The caller is the controller: it showed the controller's own
    /// certificate (when this host has `ctld_cert_file`), else one naming
    /// one of `controller_names` (the `SlurmctldHost` names).
    pub fn is_controller<'a>(
        &self,
        peer: &Peer,
        mut controller_names: impl Iterator<Item = &'a str>,
    ) -> bool {
        match (&self.controller, peer) {
            (Some(c), Peer::Cert(p)) => c == p,
            (Some(_), _) => false,
            (None, _) => controller_names.any(|n| peer.is(n)),
        }
    }

    pub fn acceptor(&self) -> Option<tokio_rustls::TlsAcceptor> {
        self.server.clone().map(tokio_rustls::TlsAcceptor::from)
    }
}

static CLIENT: OnceLock<Arc<ClientConfig>> = OnceLock::new();

/// Make every call this process makes ([`crate::net`]) use TLS. The first
/// configuration installed stays.
pub fn install_client(cfg: Arc<ClientConfig>) {
    let _ = CLIENT.set(cfg);
}

/// The installed client configuration (`None`: clear text).
pub fn client() -> Option<&'static Arc<ClientConfig>> {
    CLIENT.get()
}

/// Read slurm.conf's TLS settings as `role` and install the client side.
/// Returns the whole configuration (daemons serve with it); `None` when TLS
/// is off.
pub fn setup(conf: &crate::conf::SlurmConf, role: &Role) -> Result<Option<Tls>, TlsError> {
    let Some(s) = TlsSettings::from_conf(conf)? else {
        return Ok(None);
    };
    if *role != Role::Command {
        for n in &s.notices {
            eprintln!("notice: {n}");
        }
    }
    let tls = s.load(role)?;
    install_client(tls.client.clone());
    Ok(Some(tls))
}

/// The name a server's certificate must carry, as rustls wants it.
pub fn server_name(name: &str) -> Result<ServerName<'static>, TlsError> {
    ServerName::try_from(name.to_string())
        .map_err(|_| TlsError::Config(format!("'{name}' cannot be checked as a TLS name")))
}

/// Who is on the other end of a connection, as far as TLS can tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// TLS is off: nothing is known.
    Clear,
    /// TLS, and the caller showed no certificate (a command).
    Anonymous,
    /// TLS, and the caller showed this certificate, which chains to the CA.
    Cert(CertificateDer<'static>),
}

impl Peer {
    /// TLS is on for this connection.
    pub fn secured(&self) -> bool {
        !matches!(self, Peer::Clear)
    }

    /// The caller's certificate is valid for `name` (a host or node name).
    pub fn is(&self, name: &str) -> bool {
        let Peer::Cert(der) = self else {
            return false;
        };
        let Ok(sn) = ServerName::try_from(name) else {
            return false;
        };
        match webpki::EndEntityCert::try_from(der) {
            Ok(cert) => cert.verify_is_valid_for_subject_name(&sn).is_ok(),
            Err(_) => false,
        }
    }

    /// The caller showed a certificate of the cluster (any daemon).
    pub fn is_daemon(&self) -> bool {
        matches!(self, Peer::Cert(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_take_slurms_names_and_defaults() {
        let d = Path::new("/etc/slurm");
        assert_eq!(TlsSettings::parse(None, None, d).unwrap(), None);
        assert_eq!(TlsSettings::parse(Some("tls/none"), None, d).unwrap(), None);
        let s = TlsSettings::parse(Some("tls/rustls"), None, d)
            .unwrap()
            .unwrap();
        assert_eq!(s.ca_cert, Path::new("/etc/slurm/ca_cert.pem"));
        assert_eq!(s.ctld_key, Path::new("/etc/slurm/ctld_cert_key.pem"));
        assert!(s.notices.is_empty());
        let s = TlsSettings::parse(
            Some("tls/s2n"),
            Some("ca_cert_file=/pki/ca.pem, slurmd_cert_file=certs/%n.pem"),
            d,
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.ca_cert, Path::new("/pki/ca.pem"));
        assert_eq!(s.slurmd_cert, Path::new("/etc/slurm/certs/%n.pem"));
        assert_eq!(s.notices.len(), 1);
        let id = s.identity(&Role::Slurmd { node: "n7".into() }).unwrap();
        assert_eq!(id.0, Path::new("/etc/slurm/certs/n7.pem"));
        assert!(s.identity(&Role::Command).is_none());
    }

    #[test]
    fn a_configless_copy_takes_its_files_from_the_hosts_own_directory() {
        let text = "ClusterName=c\nSlurmctldHost=ctl\nTLSType=tls/rustls\n\
                    TLSParameters=slurmd_cert_file=tls/%n.pem\n";
        let at = |p: &str| {
            let conf = crate::conf::SlurmConf::parse_str(text, Path::new(p)).unwrap();
            TlsSettings::from_conf(&conf).unwrap().unwrap()
        };
        let s = at("/etc/slurm/slurm.conf");
        assert_eq!(s.ca_cert, Path::new("/etc/slurm/ca_cert.pem"));
        // The copy a configless node fetched: the node's directory, where
        // its key and certificates are, not the cache.
        let s = at("/etc/slurm/conf-cache/slurm.conf");
        assert_eq!(s.ca_cert, Path::new("/etc/slurm/ca_cert.pem"));
        assert_eq!(s.slurmd_cert, Path::new("/etc/slurm/tls/%n.pem"));
    }

    #[test]
    fn bad_settings_are_named() {
        let d = Path::new("/etc/slurm");
        let e = TlsSettings::parse(Some("tls/openssl"), None, d).unwrap_err();
        assert!(e.to_string().contains("tls/openssl"), "{e}");
        let e = TlsSettings::parse(Some("tls/rustls"), Some("ca_file=/x"), d).unwrap_err();
        assert!(e.to_string().contains("ca_file"), "{e}");
        let e = TlsSettings::parse(Some("tls/rustls"), Some("ca_cert_file"), d).unwrap_err();
        assert!(e.to_string().contains("ca_cert_file"), "{e}");
        let e = TlsSettings::parse(Some("tls/rustls"), Some("ca_cert_file="), d).unwrap_err();
        assert!(e.to_string().contains("ca_cert_file"), "{e}");
    }

    #[test]
    fn missing_files_are_named() {
        let d = tempfile::tempdir().unwrap();
        let s = TlsSettings::parse(Some("tls/rustls"), None, d.path())
            .unwrap()
            .unwrap();
        let e = s.load(&Role::Command).err().unwrap();
        assert!(e.to_string().contains("ca_cert.pem"), "{e}");
        std::fs::write(d.path().join("ca_cert.pem"), "not pem").unwrap();
        let e = s.load(&Role::Command).err().unwrap();
        assert!(e.to_string().contains("no PEM certificate"), "{e}");
    }

    #[test]
    fn a_peer_without_certificate_is_nobody() {
        assert!(!Peer::Clear.secured());
        assert!(Peer::Anonymous.secured());
        assert!(!Peer::Anonymous.is("n1"));
        assert!(!Peer::Cert(CertificateDer::from(vec![1, 2, 3])).is("n1"));
    }
}
