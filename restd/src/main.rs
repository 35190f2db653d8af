//! `slurmrestd [-a rest_auth/jwt|rest_auth/local] [-f slurm.conf] [-v] [-V]
//! <host:port | unix:/path> ...`

use anyhow::{bail, Context};
use slurmrestd::server::{App, AuthModes, Listen};
use std::path::PathBuf;
use std::sync::Arc;

const USAGE: &str = "Usage: slurmrestd [OPTIONS] <[host]:port | unix:/path/to/socket> ...\n\
  -a <plugins>  authentication plugins, comma-separated: rest_auth/jwt, rest_auth/local\n\
                (default: both)\n\
  -f <file>     slurm.conf to read (default: $SLURM_CONF or /etc/slurm/slurm.conf)\n\
  -v            more logging (repeat for more)\n\
  -V            print the version and exit\n\
  -h            this help\n";

struct Args {
    modes: AuthModes,
    conf: Option<PathBuf>,
    verbose: u8,
    listen: Vec<Listen>,
}

fn parse_args(args: &[String]) -> anyhow::Result<Option<Args>> {
    let mut a = Args {
        modes: AuthModes {
            jwt: true,
            local: true,
        },
        conf: None,
        verbose: 0,
        listen: Vec::new(),
    };
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        let mut value = |name: &str| -> anyhow::Result<String> {
            let v = args
                .get(i)
                .cloned()
                .with_context(|| format!("option {name} requires an argument\n{USAGE}"))?;
            i += 1;
            Ok(v)
        };
        match arg.as_str() {
            "-h" | "--help" => {
                print!("{USAGE}");
                return Ok(None);
            }
            "-V" | "--version" => {
                println!("slurm {}", slurm_proto::SLURM_VERSION);
                return Ok(None);
            }
            "-a" => a.modes = AuthModes::parse(&value("-a")?).map_err(anyhow::Error::msg)?,
            "-f" => a.conf = Some(PathBuf::from(value("-f")?)),
            "-s" | "-d" | "-u" | "-g" | "-t" => {
                let v = value(arg)?;
                eprintln!("slurmrestd: warning: option {arg} {v} is not supported and was ignored");
            }
            s if s.starts_with("-v") && s[1..].chars().all(|c| c == 'v') => {
                a.verbose = a.verbose.saturating_add((s.len() - 1) as u8)
            }
            s if s.starts_with('-') && s.len() > 1 => bail!("unknown option {s}\n{USAGE}"),
            s => a.listen.push(Listen::parse(s).map_err(anyhow::Error::msg)?),
        }
    }
    if a.listen.is_empty() {
        bail!("no address to listen on\n{USAGE}");
    }
    Ok(Some(a))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => {}
        Err(e) => {
            eprintln!("slurmrestd: error: {e:#}");
            std::process::exit(1);
        }
    }
}

fn run(args: &[String]) -> anyhow::Result<()> {
    let Some(a) = parse_args(args)? else {
        return Ok(());
    };
    let level = match a.verbose {
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("SLURMRESTD_DEBUG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let path = a.conf.unwrap_or_else(slurm_common::conf::default_conf_path);
    let conf = slurm_common::conf::SlurmConf::load(&path)
        .map_err(|e| anyhow::anyhow!("{}:{}: {}", e.file.display(), e.line, e.message))?;
    for w in &conf.warnings {
        tracing::warn!("{}:{}: {}", w.file.display(), w.line, w.message);
    }
    let app = Arc::new(App::new(conf, a.modes).map_err(anyhow::Error::msg)?);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    rt.block_on(async move {
        let shutdown = async {
            let mut term =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(s) => s,
                    Err(_) => {
                        let _ = tokio::signal::ctrl_c().await;
                        return;
                    }
                };
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            tracing::info!("shutting down");
        };
        slurmrestd::server::serve(app, &a.listen, shutdown).await
    })?;
    Ok(())
}
