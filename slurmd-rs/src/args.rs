//! The command line, as Slurm's `slurmd` takes it:
//! `slurmd [-D] [-C] [-N nodename] [-f slurm.conf] [-v...] [-L logfile] [-V] [-h]`.
//!
//! Short options may be clustered (`-Dvv`) and take their value attached or
//! as the next word (`-Nn1`, `-N n1`).

use std::path::PathBuf;

/// Options for a daemon run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Args {
    /// `-D`: stay in the foreground (we always do; accepted for compatibility).
    pub foreground: bool,
    /// `-N`: the node this daemon serves (default: the short hostname).
    pub node_name: Option<String>,
    /// `-f`: configuration file (default: `$SLURM_CONF` or /etc/slurm/slurm.conf).
    pub conf: Option<PathBuf>,
    /// Number of `-v`.
    pub verbose: u8,
    /// `-L`: log file (overrides `SlurmdLogFile`).
    pub logfile: Option<PathBuf>,
    /// `--mock[=SECONDS]`: jobs run without forking, for their time limit
    /// (or SECONDS when shorter); `Some(None)` = the time limit only.
    pub mock: Option<Option<u64>>,
    /// `--conf-server HOST[:PORT]`: fetch the configuration from this
    /// controller (configless) instead of reading slurm.conf.
    pub conf_server: Option<String>,
    /// `--ca-cert-file FILE`: with `--conf-server`, fetch over TLS and
    /// check the controller's certificate against this CA.
    pub ca_cert_file: Option<PathBuf>,
    /// `--kubelet[=CGROUP_ROOT]`: a kubelet runs on this node too (its
    /// `--cgroup-root`, empty for the default): pods' placeholder jobs come
    /// here beside batch jobs, each pod pinned to its job's CPUs.
    pub kubelet: Option<String>,
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Run(Args),
    /// `-C`: print this machine's hardware as a slurm.conf node line, and
    /// its uptime, then exit.
    PrintConfig(Args),
    Version,
    Help,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgsError {
    #[error("invalid option -- '{0}'")]
    Unknown(String),
    #[error("option requires an argument -- '{0}'")]
    Missing(char),
    #[error("unexpected argument '{0}'")]
    Extra(String),
}

pub const USAGE: &str = "\
Usage: slurmd [OPTIONS]
  -C             Print this machine's hardware configuration and exit.
  -D             Run in the foreground (always the case; accepted).
  -f file        Read the configuration from `file' instead of slurm.conf.
  -h, --help     Show this help and exit.
  -L logfile     Write log messages to `logfile'.
  -N nodename    Serve the node `nodename' (default: this host's short name);
                 a hostlist (`n[1-1000]') serves every node named, in one process.
  --conf-server host[:port][,host[:port]...]
                 Fetch slurm.conf and the files beside it from this controller
                 (SlurmctldParameters=enable_configless; several: tried in
                 turn) into conf-cache beside the key (the directory of -f, or
                 /etc/slurm), run with them, and fetch them again after each
                 scontrol reconfigure.
  --ca-cert-file file
                 With --conf-server: fetch over TLS, checking the controller's
                 certificate against this CA.
  --kubelet[=cgroup-root]
                 A kubelet runs on this node too (cgroup-root: its
                 --cgroup-root, default the top): Kubernetes pods placed by
                 slurm-bridge share the node with batch jobs, each pod's
                 cgroup pinned to the CPUs its placeholder job was given.
  --mock[=secs]  Run no job processes: each batch job \"runs\" for its time limit
                 (or secs when shorter), then completes. For scale tests.
  -v             Be more verbose; repeat for more.
  -V, --version  Print the version and exit.
";

fn set_long(args: &mut Args, name: &str, v: String) {
    if name == "--conf-server" {
        args.conf_server = Some(v);
    } else {
        args.ca_cert_file = Some(PathBuf::from(v));
    }
}

/// Parse the arguments after the program name.
pub fn parse<I, S>(argv: I) -> Result<Command, ArgsError>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    let mut args = Args::default();
    let mut print_config = false;
    let mut it = argv.into_iter().map(Into::into);
    while let Some(word) = it.next() {
        match word.as_str() {
            "--version" => return Ok(Command::Version),
            "--help" | "--usage" => return Ok(Command::Help),
            "--mock" => {
                args.mock = Some(None);
                continue;
            }
            "--kubelet" => {
                args.kubelet = Some(String::new());
                continue;
            }
            w if w.starts_with("--kubelet=") => {
                let root = &w["--kubelet=".len()..];
                if root.split('/').any(|c| c == "..") {
                    return Err(ArgsError::Unknown(w.to_string()));
                }
                args.kubelet = Some(root.to_string());
                continue;
            }
            w @ ("--conf-server" | "--ca-cert-file") => {
                let v = it
                    .next()
                    .ok_or_else(|| ArgsError::Unknown(format!("{w} needs a value")))?;
                set_long(&mut args, w, v);
                continue;
            }
            w if w.starts_with("--conf-server=") || w.starts_with("--ca-cert-file=") => {
                let (k, v) = w.split_once('=').unwrap_or((w, ""));
                set_long(&mut args, k, v.to_string());
                continue;
            }
            w if w.starts_with("--mock=") => {
                let v = &w["--mock=".len()..];
                let secs = v
                    .parse::<u64>()
                    .map_err(|_| ArgsError::Unknown(w.to_string()))?;
                args.mock = Some(Some(secs));
                continue;
            }
            _ => {}
        }
        if word.starts_with("--") || !word.starts_with('-') || word == "-" {
            return Err(if word.starts_with('-') {
                ArgsError::Unknown(word)
            } else {
                ArgsError::Extra(word)
            });
        }
        let flags: Vec<char> = word.chars().skip(1).collect();
        let mut i = 0;
        while i < flags.len() {
            let c = flags[i];
            match c {
                'D' => args.foreground = true,
                'C' => print_config = true,
                'v' => args.verbose = args.verbose.saturating_add(1),
                'V' => return Ok(Command::Version),
                'h' => return Ok(Command::Help),
                'N' | 'f' | 'L' => {
                    let rest: String = flags[i + 1..].iter().collect();
                    let value = if !rest.is_empty() {
                        rest
                    } else {
                        it.next().ok_or(ArgsError::Missing(c))?
                    };
                    match c {
                        'N' => args.node_name = Some(value),
                        'f' => args.conf = Some(PathBuf::from(value)),
                        _ => args.logfile = Some(PathBuf::from(value)),
                    }
                    break;
                }
                other => return Err(ArgsError::Unknown(other.to_string())),
            }
            i += 1;
        }
    }
    Ok(if print_config {
        Command::PrintConfig(args)
    } else {
        Command::Run(args)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(v: &[&str]) -> Args {
        match parse(v.iter().copied()) {
            Ok(Command::Run(a)) => a,
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn kubelet_takes_an_optional_cgroup_root_but_no_way_up() {
        assert_eq!(run(&["--kubelet"]).kubelet.as_deref(), Some(""));
        assert_eq!(
            run(&["--kubelet=k8s.slice"]).kubelet.as_deref(),
            Some("k8s.slice")
        );
        assert!(parse(["--kubelet=../etc"]).is_err());
        assert_eq!(run(&[]).kubelet, None);
    }

    #[test]
    fn empty_command_line_runs_with_defaults() {
        assert_eq!(run(&[]), Args::default());
    }

    #[test]
    fn flags_values_and_clusters() {
        let a = run(&["-D", "-N", "n1", "-f", "/etc/x.conf", "-vv", "-L", "/tmp/l"]);
        assert!(a.foreground);
        assert_eq!(a.node_name.as_deref(), Some("n1"));
        assert_eq!(a.conf, Some(PathBuf::from("/etc/x.conf")));
        assert_eq!(a.verbose, 2);
        assert_eq!(a.logfile, Some(PathBuf::from("/tmp/l")));
        let b = run(&["-DvNn2", "-v"]);
        assert!(b.foreground);
        assert_eq!(b.verbose, 2);
        assert_eq!(b.node_name.as_deref(), Some("n2"));
        let c = run(&["-fslurm.conf"]);
        assert_eq!(c.conf, Some(PathBuf::from("slurm.conf")));
    }

    #[test]
    fn mock_mode() {
        assert_eq!(run(&["--mock"]).mock, Some(None));
        let c = run(&["--conf-server", "ctl:6817", "--ca-cert-file=/etc/ca.pem"]);
        assert_eq!(c.conf_server.as_deref(), Some("ctl:6817"));
        assert_eq!(c.ca_cert_file, Some(PathBuf::from("/etc/ca.pem")));
        assert!(parse(["--conf-server"]).is_err());
        assert_eq!(run(&["--mock=30", "-N", "n[1-9]"]).mock, Some(Some(30)));
        assert!(parse(["--mock=x"]).is_err());
    }

    #[test]
    fn version_and_help() {
        assert_eq!(parse(["-V"]), Ok(Command::Version));
        assert_eq!(parse(["-D", "--version"]), Ok(Command::Version));
        assert_eq!(parse(["-Dh"]), Ok(Command::Help));
        assert_eq!(parse(["--help"]), Ok(Command::Help));
        match parse(["-C", "-N", "n7"]) {
            Ok(Command::PrintConfig(a)) => assert_eq!(a.node_name.as_deref(), Some("n7")),
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(parse(["-DC"]), Ok(Command::PrintConfig(_))));
    }

    #[test]
    fn bad_command_lines_are_errors() {
        assert_eq!(parse(["-N"]), Err(ArgsError::Missing('N')));
        assert_eq!(parse(["-x"]), Err(ArgsError::Unknown("x".into())));
        assert_eq!(
            parse(["--bogus"]),
            Err(ArgsError::Unknown("--bogus".into()))
        );
        assert_eq!(parse(["n1"]), Err(ArgsError::Extra("n1".into())));
        assert_eq!(
            ArgsError::Missing('f').to_string(),
            "option requires an argument -- 'f'"
        );
    }
}
