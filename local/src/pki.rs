//! Certificates for a cluster on one machine (`slurm-local`, the
//! whole-cluster tests): a CA, and a certificate for the controller,
//! slurmdbd and each node daemon, each naming what its callers check
//! (see `slurm_common::tls`). A real site brings its own from its PKI.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use std::path::Path;
use std::sync::OnceLock;

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("cannot make a certificate: {0}")]
    Cert(#[from] rcgen::Error),
    #[error("cannot write {path}: {source}")]
    Write {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

/// A certificate authority kept in memory.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    pub fn new(name: &str) -> Result<Ca, PkiError> {
        let mut p = CertificateParams::default();
        p.distinguished_name.push(DnType::CommonName, name);
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let issuer = CertifiedIssuer::self_signed(p, KeyPair::generate()?)?;
        Ok(Ca { issuer })
    }

    /// The CA's certificate (PEM).
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A certificate for `names` (DNS names or IP addresses), good to serve
    /// and to call with: (certificate PEM, key PEM).
    pub fn issue(&self, common_name: &str, names: &[String]) -> Result<(String, String), PkiError> {
        let mut p = CertificateParams::new(names.to_vec())?;
        p.distinguished_name.push(DnType::CommonName, common_name);
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = KeyPair::generate()?;
        let cert = p.signed_by(&key, &self.issuer)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

/// One CA for every cluster this process writes, so a process that talks to
/// several (a test) trusts them all with one configuration.
pub fn process_ca() -> Result<&'static Ca, PkiError> {
    static CA: OnceLock<Ca> = OnceLock::new();
    if let Some(ca) = CA.get() {
        return Ok(ca);
    }
    let ca = Ca::new("slurm-local CA")?;
    Ok(CA.get_or_init(|| ca))
}

fn write(path: &Path, text: &str, mode: u32) -> Result<(), PkiError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let err = |source| PkiError::Write {
        path: path.to_path_buf(),
        source,
    };
    let _ = std::fs::remove_file(path);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(err)?;
    f.write_all(text.as_bytes()).map_err(err)
}

/// Write `prefix_cert.pem` and `prefix_cert_key.pem` (0600) for `names`.
pub fn write_identity(ca: &Ca, dir: &Path, prefix: &str, names: &[String]) -> Result<(), PkiError> {
    let (cert, key) = ca.issue(prefix, names)?;
    write(&dir.join(format!("{prefix}_cert.pem")), &cert, 0o644)?;
    write(&dir.join(format!("{prefix}_cert_key.pem")), &key, 0o600)
}

/// Write the CA's certificate as `ca_cert.pem` in `dir`.
pub fn write_ca(ca: &Ca, dir: &Path) -> Result<(), PkiError> {
    write(&dir.join("ca_cert.pem"), &ca.pem(), 0o644)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_certificates_chain_to_the_ca_and_name_their_holder() {
        let ca = Ca::new("test CA").unwrap();
        let d = tempfile::tempdir().unwrap();
        write_ca(&ca, d.path()).unwrap();
        write_identity(&ca, d.path(), "n1", &["n1".into(), "127.0.0.1".into()]).unwrap();
        let roots = slurm_common::tls::load_roots(&d.path().join("ca_cert.pem")).unwrap();
        assert_eq!(roots.len(), 1);
        let certs = slurm_common::tls::load_certs(&d.path().join("n1_cert.pem")).unwrap();
        let peer = slurm_common::tls::Peer::Cert(certs[0].clone());
        assert!(peer.is("n1"));
        assert!(peer.is("127.0.0.1"));
        assert!(!peer.is("n2"));
        assert!(slurm_common::tls::load_key(&d.path().join("n1_cert_key.pem")).is_ok());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(d.path().join("n1_cert_key.pem"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "key readable by others: {mode:o}");
    }

    /// A daemon calling the same server again resumes its TLS session
    /// (no certificate signatures), its certificate still known.
    #[test]
    fn daemons_resume_their_sessions() {
        let ca = Ca::new("test CA").unwrap();
        let d = tempfile::tempdir().unwrap();
        write_ca(&ca, d.path()).unwrap();
        write_identity(&ca, d.path(), "ctld", &["ctl".into()]).unwrap();
        write_identity(&ca, d.path(), "slurmd", &["n1".into()]).unwrap();
        let s = slurm_common::tls::TlsSettings::parse(Some("tls/rustls"), None, d.path())
            .unwrap()
            .unwrap();
        let server = s.load(&slurm_common::tls::Role::Ctld).unwrap();
        let node = s
            .load(&slurm_common::tls::Role::Slurmd { node: "n1".into() })
            .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap().to_string();
            let acceptor = server.acceptor().unwrap();
            let seen = tokio::spawn(async move {
                use tokio::io::AsyncWriteExt;
                let mut kinds = Vec::new();
                for _ in 0..2 {
                    let (sock, _) = l.accept().await.unwrap();
                    let (mut c, peer) = slurm_common::net::accept(sock, Some(&acceptor))
                        .await
                        .unwrap();
                    let slurm_common::net::Stream::Tls(t) = &c else {
                        panic!("not TLS")
                    };
                    kinds.push((t.get_ref().1.handshake_kind(), peer.is("n1")));
                    c.write_all(b"ok").await.unwrap();
                    c.flush().await.unwrap();
                }
                kinds
            });
            use tokio::io::AsyncReadExt;
            for _ in 0..2 {
                let mut c = slurm_common::net::connect_async_with(Some(&node.client), &addr, "ctl")
                    .await
                    .unwrap();
                let mut b = [0u8; 2];
                c.read_exact(&mut b).await.unwrap();
            }
            let kinds = seen.await.unwrap();
            use rustls::HandshakeKind::*;
            assert_eq!(kinds, vec![(Some(Full), true), (Some(Resumed), true)]);
        });
    }
}
