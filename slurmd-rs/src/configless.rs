//! Configless hosts (`slurmd --conf-server`, `sackd --conf-server`): the
//! configuration files fetched from the controller
//! (`Controller.GetConfigFiles`, with `SlurmctldParameters=
//! enable_configless`) into `conf-cache` beside the cluster key.

use slurm_common::auth::{AuthError, Key};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum ConfiglessError {
    #[error("--conf-server {0}: bad port")]
    Port(String),
    #[error("--ca-cert-file: {0}")]
    Tls(String),
    #[error("cannot fetch the configuration from {addr}: {why}")]
    Fetch { addr: String, why: String },
    #[error("the controller at {addr} {why}")]
    Files { addr: String, why: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Key(#[from] AuthError),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ConfiglessError + '_ {
    move |source| ConfiglessError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Fetch the configuration from the controller at `server` (`host[:port]`,
/// TLS with `ca` when given), signing with the key beside `conf` (the `-f`
/// path, or the default), into `conf-cache` beside that key: each file
/// written whole and renamed into place, readable by all (jobs read
/// slurm.conf), only under the names expected, the ones the controller no
/// longer has removed. The cached slurm.conf's path and the key's.
pub fn fetch(
    conf: Option<PathBuf>,
    server: &str,
    ca: Option<&Path>,
) -> Result<(PathBuf, PathBuf), ConfiglessError> {
    let given = conf.unwrap_or_else(slurm_common::conf::default_conf_path);
    let key_path = slurm_common::auth::key_path(&given);
    let key = Key::load(&key_path)?;
    let (host, port) = match server.rsplit_once(':') {
        Some((h, p)) => (
            h.to_string(),
            p.parse::<u16>()
                .map_err(|_| ConfiglessError::Port(server.to_string()))?,
        ),
        None => (server.to_string(), 6817),
    };
    let base = key_path.parent().map(Path::to_path_buf).unwrap_or_default();
    let tls = match ca {
        Some(ca) => {
            let p = format!("ca_cert_file={}", ca.display());
            let t = slurm_common::tls::TlsSettings::parse(Some("tls/rustls"), Some(&p), &base)
                .map_err(|e| ConfiglessError::Tls(e.to_string()))?
                .ok_or_else(|| ConfiglessError::Tls("TLS is off".into()))?
                .load(&slurm_common::tls::Role::Command)
                .map_err(|e| ConfiglessError::Tls(e.to_string()))?;
            Some(t.client)
        }
        None => None,
    };
    let addr = format!("{host}:{port}");
    let fail = |why: String| ConfiglessError::Fetch {
        addr: addr.clone(),
        why,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| fail(e.to_string()))?;
    let files = rt
        .block_on(async {
            let ch = slurm_common::grpc::channel(tls, &addr, &host)?;
            let me = slurm_common::users::hostname();
            let sign = |b: &_| Ok(key.sign(0, 0, &me, slurm_common::auth::now(), b));
            slurm_common::grpc::config_files(&ch, &host, sign, std::time::Duration::from_secs(30))
                .await
        })
        .map_err(|e| fail(e.to_string()))?;
    let cache = base.join("conf-cache");
    match std::fs::symlink_metadata(&cache) {
        Ok(m) if !m.is_dir() => {
            return Err(ConfiglessError::Io {
                path: cache,
                source: std::io::Error::other("not a directory"),
            })
        }
        Ok(_) => {}
        Err(_) => std::fs::create_dir(&cache).map_err(io(&cache))?,
    }
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o755)).map_err(io(&cache))?;
    let mut got = Vec::new();
    for (name, content) in files {
        // Only the names a configless host reads: never a path.
        if !slurm_proto::grpc::CONFIG_FILES.contains(&name.as_str()) {
            return Err(ConfiglessError::Files {
                addr,
                why: format!("sent an unexpected file {name:?}"),
            });
        }
        let dest = cache.join(&name);
        crate::ledger::write_whole(&dest, &content, 0o644).map_err(io(&dest))?;
        got.push(name);
    }
    // What the controller no longer has goes from the cache too.
    for name in slurm_proto::grpc::CONFIG_FILES {
        if !got.iter().any(|g| g == name) {
            let _ = std::fs::remove_file(cache.join(name));
        }
    }
    if !got.iter().any(|g| g == "slurm.conf") {
        return Err(ConfiglessError::Files {
            addr,
            why: "sent no slurm.conf".into(),
        });
    }
    Ok((cache.join("slurm.conf"), key_path))
}
