//! What start-up resolves before the runtime exists: the configuration, the
//! node this daemon serves, and its per-node paths (`%n` = node name, `%h` =
//! the node's hostname, as Slurm expands them in `SlurmdSpoolDir`,
//! `SlurmdLogFile` and `SlurmdPidFile`).

use crate::args::Args;
use slurm_common::conf::{default_conf_path, ConfError, NodeConf, SlurmConf};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error(transparent)]
    Conf(#[from] ConfError),
    #[error("node name `{name}' not found in {conf}")]
    UnknownNode { name: String, conf: String },
    #[error("this host (`{host}') is not a node in {conf}; name the node with -N")]
    HostNotANode { host: String, conf: String },
    #[error("cannot determine the current directory: {0}")]
    Cwd(std::io::Error),
}

/// The resolved start-up settings of one daemon.
#[derive(Debug, Clone)]
pub struct Settings {
    pub conf: SlurmConf,
    /// Absolute path of slurm.conf (exported to jobs as `SLURM_CONF`).
    pub conf_path: PathBuf,
    pub node: String,
    /// The node's hostname (`NodeHostname`), for `%h`.
    pub node_hostname: String,
    pub spool: PathBuf,
    pub logfile: Option<PathBuf>,
    pub pidfile: Option<PathBuf>,
    /// Extra verbosity from `-v`.
    pub verbose: u8,
    /// The cluster key (`slurm.key` beside slurm.conf; for a configless
    /// node, beside the `-f` path it was started with).
    pub key_path: PathBuf,
    /// `--kubelet[=CGROUP_ROOT]` (see [`crate::kubelet`]).
    pub kubelet: Option<String>,
}

/// Expand `%n` (node name), `%h` (node hostname) and `%%` in a per-node path.
pub fn expand_node_path(s: &str, node: &str, hostname: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.peek() {
            Some('n') => out.push_str(node),
            Some('h') => out.push_str(hostname),
            Some('%') => out.push('%'),
            _ => {
                out.push('%');
                continue;
            }
        }
        chars.next();
    }
    out
}

/// Which node a daemon started without `-N` serves: the one named like the
/// short hostname, else the only one whose `NodeHostname` is the hostname.
pub fn node_for_host<'a>(conf: &'a SlurmConf, host: &str) -> Option<&'a NodeConf> {
    if let Some(n) = conf.node(host) {
        return Some(n);
    }
    let mut by_host = conf
        .nodes
        .iter()
        .filter(|n| n.node_hostname == host || n.node_hostname.split('.').next() == Some(host));
    match (by_host.next(), by_host.next()) {
        (Some(n), None) => Some(n),
        _ => None,
    }
}

impl Settings {
    pub fn from_args(args: &Args) -> Result<Settings, SettingsError> {
        let path = args.conf.clone().unwrap_or_else(default_conf_path);
        let path = if path.is_absolute() {
            path
        } else {
            std::env::current_dir()
                .map_err(SettingsError::Cwd)?
                .join(path)
        };
        let conf = SlurmConf::load(&path)?;
        Self::resolve(conf, path, args)
    }

    /// Resolve the node and paths for an already loaded configuration.
    pub fn resolve(
        conf: SlurmConf,
        conf_path: PathBuf,
        args: &Args,
    ) -> Result<Settings, SettingsError> {
        let conf_name = conf_path.display().to_string();
        let node = match &args.node_name {
            Some(name) => conf.node(name).ok_or_else(|| SettingsError::UnknownNode {
                name: name.clone(),
                conf: conf_name.clone(),
            })?,
            None => {
                let host = slurm_common::users::hostname();
                node_for_host(&conf, &host).ok_or(SettingsError::HostNotANode {
                    host,
                    conf: conf_name.clone(),
                })?
            }
        };
        let (name, hostname) = (node.name.clone(), node.node_hostname.clone());
        let exp = |s: &str| PathBuf::from(expand_node_path(s, &name, &hostname));
        let spool = exp(&conf.slurmd_spool_dir);
        let logfile = match &args.logfile {
            Some(l) => Some(l.clone()),
            None => conf.slurmd_logfile.as_deref().map(exp),
        };
        let pidfile = conf.slurmd_pidfile.as_deref().map(exp);
        Ok(Settings {
            key_path: slurm_common::auth::key_path(&conf_path),
            conf,
            conf_path,
            node: name.clone(),
            node_hostname: hostname.clone(),
            spool,
            logfile,
            pidfile,
            verbose: args.verbose,
            kubelet: args.kubelet.clone(),
        })
    }

    /// The node's configuration entry.
    pub fn node_conf(&self) -> Option<&NodeConf> {
        self.conf.node(&self.node)
    }

    /// Where to listen: the node's `NodeAddr` and its `Port` (or `SlurmdPort`).
    pub fn listen_addr(&self) -> (String, u16) {
        match self.node_conf() {
            Some(n) => (n.node_addr.clone(), n.port.unwrap_or(self.conf.slurmd_port)),
            None => ("0.0.0.0".to_string(), self.conf.slurmd_port),
        }
    }

    /// `SlurmdParameters=config_overrides`: report the configured hardware.
    pub fn config_overrides(&self) -> bool {
        self.conf.config_overrides()
    }

    /// Log level from `SlurmdDebug`, raised by each `-v`.
    pub fn log_level(&self) -> &'static str {
        slurm_common::logging::level(self.conf.get("SlurmdDebug"), u32::from(self.verbose))
    }
}

/// For tests and tools: settings from a configuration text.
pub fn from_text(text: &str, conf_path: &Path, args: &Args) -> Result<Settings, SettingsError> {
    let conf = SlurmConf::parse_str(text, conf_path)?;
    Settings::resolve(conf, conf_path.to_path_buf(), args)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONF: &str = "\
ClusterName=anchor
SlurmctldHost=vm(127.0.0.1)
SlurmdPort=6831
SlurmdSpoolDir=/srv/slurm/spool/slurmd.%n
SlurmdPidFile=/srv/slurm/run/slurmd.%n.pid
SlurmdLogFile=/srv/slurm/log/slurmd.%h.log
SlurmdParameters=config_overrides
SlurmdDebug=debug
NodeName=n1 NodeHostname=h1 NodeAddr=127.0.0.1 Port=6841 CPUs=4 RealMemory=4000
NodeName=n2 NodeAddr=127.0.0.2 CPUs=4 RealMemory=4000
PartitionName=debug Nodes=n[1-2] Default=YES
";

    fn args(node: &str) -> Args {
        Args {
            node_name: Some(node.into()),
            ..Args::default()
        }
    }

    #[test]
    fn per_node_paths_and_addresses() {
        let s = from_text(CONF, Path::new("/etc/slurm/slurm.conf"), &args("n1")).unwrap();
        assert_eq!(s.node, "n1");
        assert_eq!(s.spool, PathBuf::from("/srv/slurm/spool/slurmd.n1"));
        assert_eq!(
            s.pidfile,
            Some(PathBuf::from("/srv/slurm/run/slurmd.n1.pid"))
        );
        assert_eq!(
            s.logfile,
            Some(PathBuf::from("/srv/slurm/log/slurmd.h1.log"))
        );
        assert_eq!(s.listen_addr(), ("127.0.0.1".to_string(), 6841));
        assert!(s.config_overrides());
        assert_eq!(s.log_level(), "debug");
        let mut a = args("n2");
        a.logfile = Some("/tmp/x.log".into());
        a.verbose = 3;
        let s2 = from_text(CONF, Path::new("/etc/slurm/slurm.conf"), &a).unwrap();
        assert_eq!(s2.listen_addr(), ("127.0.0.2".to_string(), 6831));
        assert_eq!(s2.logfile, Some(PathBuf::from("/tmp/x.log")));
        assert_eq!(s2.log_level(), "trace");
    }

    #[test]
    fn unknown_nodes_are_errors() {
        let e = from_text(CONF, Path::new("/etc/slurm/slurm.conf"), &args("n9")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "node name `n9' not found in /etc/slurm/slurm.conf"
        );
    }

    #[test]
    fn node_found_by_hostname() {
        let conf = SlurmConf::parse_str(CONF, Path::new("/x")).unwrap();
        assert_eq!(
            node_for_host(&conf, "n2").map(|n| n.name.as_str()),
            Some("n2")
        );
        assert_eq!(
            node_for_host(&conf, "h1").map(|n| n.name.as_str()),
            Some("n1")
        );
        assert!(node_for_host(&conf, "elsewhere").is_none());
    }

    #[test]
    fn node_path_expansion() {
        assert_eq!(
            expand_node_path("/s/%n/%h/100%%/%x", "n1", "h"),
            "/s/n1/h/100%/%x"
        );
        assert_eq!(expand_node_path("trailing%", "n1", "h"), "trailing%");
    }
}
