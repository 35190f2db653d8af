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

/// Where a configless host gets its files: the controllers `--conf-server`
/// names, how to reach them, and the key it signs with.
pub struct Source {
    /// Each controller's name and `host:port`, in the order tried.
    servers: Vec<(String, String)>,
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    key: Key,
    /// The directory holding the key (and `conf-cache`).
    base: PathBuf,
    /// Configless: fetch the files at each change (else only say so).
    fetch: bool,
}

/// How long a fetch may take.
const FETCH_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

impl Source {
    /// From `--conf-server` (`host[:port]`, or several, comma-separated:
    /// the primary first), `--ca-cert-file` (TLS, checking the controller
    /// against this CA) and the `-f` path (the key beside it, or the
    /// default's). The key's path too.
    pub fn new(
        conf: Option<PathBuf>,
        server: &str,
        ca: Option<&Path>,
    ) -> Result<(Source, PathBuf), ConfiglessError> {
        let given = conf.unwrap_or_else(slurm_common::conf::default_conf_path);
        let key_path = slurm_common::auth::key_path(&given);
        let key = Key::load(&key_path)?;
        let servers = server
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|one| match one.rsplit_once(':') {
                Some((h, p)) => p
                    .parse::<u16>()
                    .map(|p| (h.to_string(), format!("{h}:{p}")))
                    .map_err(|_| ConfiglessError::Port(one.to_string())),
                None => Ok((one.to_string(), format!("{one}:6817"))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        if servers.is_empty() {
            return Err(ConfiglessError::Port(server.to_string()));
        }
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
        let source = Source {
            servers,
            tls,
            key,
            base,
            fetch: true,
        };
        Ok((source, key_path))
    }

    /// A daemon with its own slurm.conf: watch the controllers (each
    /// name and `host:port`) only to hear of `scontrol reconfigure`.
    pub fn watching(
        servers: Vec<(String, String)>,
        tls: Option<std::sync::Arc<rustls::ClientConfig>>,
        key: Key,
    ) -> Source {
        Source {
            servers,
            tls,
            key,
            base: PathBuf::new(),
            fetch: false,
        }
    }

    fn sign(
        &self,
    ) -> impl FnOnce(&slurm_common::auth::Binding) -> Result<slurm_proto::Credential, AuthError> + '_
    {
        move |b| {
            let me = slurm_common::users::hostname();
            Ok(self.key.sign(0, 0, &me, slurm_common::auth::now(), b))
        }
    }

    /// The files from the first controller that gives them, written into
    /// the cache: the cached slurm.conf's path and the names that changed.
    pub async fn fetch(&self) -> Result<(PathBuf, Vec<String>), ConfiglessError> {
        let mut last = None;
        for (host, addr) in &self.servers {
            let files = async {
                let ch = slurm_common::grpc::channel(self.tls.clone(), addr, host)?;
                slurm_common::grpc::config_files(&ch, host, self.sign(), FETCH_WITHIN).await
            }
            .await;
            match files {
                Ok(files) => return write_cache(&self.base, files, addr),
                Err(e) => {
                    last = Some(ConfiglessError::Fetch {
                        addr: addr.clone(),
                        why: e.to_string(),
                    })
                }
            }
        }
        Err(last.unwrap_or_else(|| ConfiglessError::Port(String::new())))
    }

    /// Follow the controllers' configuration, forever: watch a controller
    /// for `scontrol reconfigure` (`Controller.Watch` with `config`) and,
    /// after each and at each (re)connection (changes may have come while
    /// no watch was open), fetch the files again into the cache
    /// (configless) and call `changed` when one changed; without the cache
    /// (a daemon with its own slurm.conf), call `changed` each time, for
    /// it to read its file again. Controllers are tried in turn; none
    /// answering, again 5 s later.
    pub async fn follow(self, changed: impl Fn() + Send + Sync + 'static) {
        let mut said = String::new();
        loop {
            for (host, addr) in &self.servers {
                let why = match self.follow_one(host, addr, &changed).await {
                    Ok(()) => format!("the controller at {addr} ended the watch"),
                    Err(e) => format!("cannot watch the controller at {addr}: {e}"),
                };
                if why != said {
                    tracing::info!("{why}");
                    said = why;
                }
            }
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
        }
    }

    async fn follow_one(
        &self,
        host: &str,
        addr: &str,
        changed: &(impl Fn() + Send + Sync),
    ) -> Result<(), String> {
        use slurm_proto::grpc::pb::{self, watch_event::Event};
        let ch =
            slurm_common::grpc::channel(self.tls.clone(), addr, host).map_err(|e| e.to_string())?;
        let want = pb::WatchRequest {
            config: true,
            ..Default::default()
        };
        let mut events = slurm_common::grpc::watch(&ch, host, want, self.sign())
            .await
            .map_err(|e| e.to_string())?;
        while let Some(e) = events
            .message()
            .await
            .map_err(|e| e.message().to_string())?
        {
            if !matches!(e.event, Some(Event::Synced(_) | Event::ConfigChanged(_))) {
                continue;
            }
            if !self.fetch {
                changed();
                continue;
            }
            let files =
                slurm_common::grpc::config_files(&ch, host, self.sign(), FETCH_WITHIN).await;
            match files
                .map_err(|e| e.to_string())
                .and_then(|f| write_cache(&self.base, f, addr).map_err(|e| e.to_string()))
            {
                Ok((_, names)) if !names.is_empty() => {
                    tracing::info!(
                        "configuration files updated from {addr}: {}",
                        names.join(", ")
                    );
                    changed();
                }
                Ok(_) => {}
                Err(e) => tracing::warn!("cannot refresh the configuration from {addr}: {e}"),
            }
        }
        Ok(())
    }
}

/// Fetch the configuration at start (see [`Source`]): each file written
/// whole and renamed into place, readable by all (jobs read slurm.conf),
/// only under the names expected, the ones the controller no longer has
/// removed. The cached slurm.conf's path, the key's, and the source to
/// [`Source::follow`].
pub fn fetch(
    conf: Option<PathBuf>,
    server: &str,
    ca: Option<&Path>,
) -> Result<(PathBuf, PathBuf, Source), ConfiglessError> {
    let (source, key_path) = Source::new(conf, server, ca)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ConfiglessError::Fetch {
            addr: server.to_string(),
            why: e.to_string(),
        })?;
    let (conf, _) = rt.block_on(source.fetch())?;
    Ok((conf, key_path, source))
}

/// Put the controller's `files` in `conf-cache` under `base`, after
/// checking them all: only the names a configless host reads (never a
/// path), slurm.conf among them. Each is written whole and renamed into
/// place, readable by all (jobs read slurm.conf); the ones the controller
/// no longer has are removed (a file the same as before is left alone).
/// The cached slurm.conf's path and the names that changed.
pub fn write_cache(
    base: &Path,
    files: Vec<(String, Vec<u8>)>,
    addr: &str,
) -> Result<(PathBuf, Vec<String>), ConfiglessError> {
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
    let cache = base.join(slurm_common::conf::CONFIG_CACHE);
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
    let mut changed = Vec::new();
    for name in slurm_proto::grpc::CONFIG_FILES {
        let dest = cache.join(name);
        let before = std::fs::read(&dest).ok();
        match files.iter().find(|(n, _)| n == name) {
            Some((_, content)) if before.as_ref() == Some(content) => {}
            Some((_, content)) => {
                crate::ledger::write_whole(&dest, content, 0o644).map_err(io(&dest))?;
                changed.push(name.to_string());
            }
            // What the controller no longer has goes from the cache too.
            None => {
                if std::fs::remove_file(&dest).is_ok() {
                    changed.push(name.to_string());
                }
            }
        }
    }
    Ok((cache.join("slurm.conf"), changed))
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
        let (conf, changed) = write_cache(
            &base,
            files(&[("slurm.conf", "ClusterName=c\n"), ("gres.conf", "g")]),
            "ctl:1",
        )
        .unwrap();
        assert_eq!(changed, ["slurm.conf", "gres.conf"]);
        assert_eq!(std::fs::read_to_string(&conf).unwrap(), "ClusterName=c\n");
        let mode = std::fs::metadata(&conf).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
        let (_, changed) =
            write_cache(&base, files(&[("slurm.conf", "ClusterName=d\n")]), "ctl:1").unwrap();
        assert_eq!(changed, ["slurm.conf", "gres.conf"]);
        assert!(!base.join("conf-cache/gres.conf").exists());
        // The same files again change nothing.
        let (_, changed) =
            write_cache(&base, files(&[("slurm.conf", "ClusterName=d\n")]), "ctl:1").unwrap();
        assert!(changed.is_empty());
        // A cache that is a link planted in its place is not followed.
        let other = tempfile::tempdir().unwrap();
        let base2 = d.path().join("etc2");
        std::fs::create_dir(&base2).unwrap();
        std::os::unix::fs::symlink(other.path(), base2.join("conf-cache")).unwrap();
        assert!(write_cache(&base2, files(&[("slurm.conf", "x")]), "ctl:1").is_err());
        assert!(!other.path().join("slurm.conf").exists());
    }
}
