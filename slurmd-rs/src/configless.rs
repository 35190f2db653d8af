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
    Ok((write_cache(&base, files, &addr)?, key_path))
}

/// Put the controller's `files` in `conf-cache` under `base`, after
/// checking them all: only the names a configless host reads (never a
/// path), slurm.conf among them. Each is written whole and renamed into
/// place, readable by all (jobs read slurm.conf); the ones the controller
/// no longer has are removed. The cached slurm.conf's path.
pub fn write_cache(
    base: &Path,
    files: Vec<(String, Vec<u8>)>,
    addr: &str,
) -> Result<PathBuf, ConfiglessError> {
    let refuse = |why: String| ConfiglessError::Files {
        addr: addr.to_string(),
        why,
    };
    if let Some((name, _)) = files
        .iter()
        .find(|(n, _)| !slurm_proto::grpc::CONFIG_FILES.contains(&n.as_str()))
    {
        return Err(refuse(format!("sent an unexpected file {name:?}")));
    }
    if !files.iter().any(|(n, _)| n == "slurm.conf") {
        return Err(refuse("sent no slurm.conf".into()));
    }
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
    for name in slurm_proto::grpc::CONFIG_FILES {
        let dest = cache.join(name);
        match files.iter().find(|(n, _)| n == name) {
            Some((_, content)) => {
                crate::ledger::write_whole(&dest, content, 0o644).map_err(io(&dest))?
            }
            // What the controller no longer has goes from the cache too.
            None => {
                let _ = std::fs::remove_file(&dest);
            }
        }
    }
    Ok(cache.join("slurm.conf"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(v: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
        v.iter()
            .map(|(n, c)| (n.to_string(), c.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn a_controller_can_put_only_the_expected_files_in_the_cache() {
        let d = tempfile::tempdir().unwrap();
        let base = d.path().join("etc");
        std::fs::create_dir(&base).unwrap();
        // A path, or a name not read here: refused before anything is
        // written.
        for bad in ["../evil", "slurm.key", "slurmdbd.conf", "/etc/passwd", ""] {
            let r = write_cache(&base, files(&[("slurm.conf", "x"), (bad, "y")]), "ctl:1");
            assert!(
                r.as_ref()
                    .is_err_and(|e| e.to_string().contains("unexpected file")),
                "{bad}: {r:?}"
            );
        }
        assert!(!base.join("conf-cache").exists());
        assert!(!d.path().join("evil").exists());
        let r = write_cache(&base, files(&[("gres.conf", "g")]), "ctl:1");
        assert!(r.unwrap_err().to_string().contains("no slurm.conf"));
        // The expected ones land, readable by all; a later fetch without
        // gres.conf takes it away.
        let conf = write_cache(
            &base,
            files(&[("slurm.conf", "ClusterName=c\n"), ("gres.conf", "g")]),
            "ctl:1",
        )
        .unwrap();
        assert_eq!(std::fs::read_to_string(&conf).unwrap(), "ClusterName=c\n");
        let mode = std::fs::metadata(&conf).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
        write_cache(&base, files(&[("slurm.conf", "ClusterName=d\n")]), "ctl:1").unwrap();
        assert!(!base.join("conf-cache/gres.conf").exists());
        // A cache that is a link planted in its place is not followed.
        let other = tempfile::tempdir().unwrap();
        let base2 = d.path().join("etc2");
        std::fs::create_dir(&base2).unwrap();
        std::os::unix::fs::symlink(other.path(), base2.join("conf-cache")).unwrap();
        assert!(write_cache(&base2, files(&[("slurm.conf", "x")]), "ctl:1").is_err());
        assert!(!other.path().join("slurm.conf").exists());
    }
}
