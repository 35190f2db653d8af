//! `sackd`: the credential daemon of a login host that runs no slurmd.
//!
//! It serves the local credential socket (`AuthInfo=socket=`, the same
//! service a node daemon offers) so the users' commands get credentials
//! without reading `slurm.key`, and with `--conf-server` it runs configless:
//! slurm.conf and its siblings are fetched from the controller into
//! `conf-cache` beside the key (see `slurmd::configless`), and fetched again
//! after each `scontrol reconfigure`.
//!
//! `sackd [-D] [-f slurm.conf] [--conf-server host[:port]]
//! [--ca-cert-file file] [-v] [-V] [-h]`

use anyhow::anyhow;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "\
Usage: sackd [OPTIONS]
  -D             Run in the foreground (always the case; accepted).
  -f file        The configuration (its slurm.key beside it).
  --conf-server host[:port][,host[:port]...]
                 Fetch the configuration from this controller
                 (SlurmctldParameters=enable_configless; several: tried in
                 turn) into conf-cache beside the key, run with it, and fetch
                 it again after each scontrol reconfigure.
  --ca-cert-file file
                 With --conf-server: fetch over TLS, checking the controller's
                 certificate against this CA.
  -v             Be more verbose; repeat for more.
  -h, --help     Show this help and exit.
  -V, --version  Print the version and exit.
";

#[derive(Default)]
struct Args {
    conf: Option<PathBuf>,
    conf_server: Option<String>,
    ca_cert_file: Option<PathBuf>,
    verbose: u8,
}

enum Cmd {
    Run(Args),
    Help,
    Version,
}

fn parse(argv: &[String]) -> Result<Cmd, String> {
    let mut a = Args::default();
    let mut it = argv.iter();
    while let Some(w) = it.next() {
        let (name, inline) = match w.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (w.as_str(), None),
        };
        let mut value = |what: &str| {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("option requires an argument -- '{what}'"))
        };
        match name {
            "-D" => {}
            "-h" | "--help" | "--usage" => return Ok(Cmd::Help),
            "-V" | "--version" => return Ok(Cmd::Version),
            "-f" => a.conf = Some(PathBuf::from(value("f")?)),
            "--conf-server" => a.conf_server = Some(value("conf-server")?),
            "--ca-cert-file" => a.ca_cert_file = Some(PathBuf::from(value("ca-cert-file")?)),
            v if v.starts_with("-v") && v[1..].chars().all(|c| c == 'v') => {
                a.verbose = a.verbose.saturating_add((v.len() - 1) as u8)
            }
            other => return Err(format!("invalid option -- '{other}'")),
        }
    }
    Ok(Cmd::Run(a))
}

fn run(a: Args) -> anyhow::Result<()> {
    let (conf_path, key_path, source) = match &a.conf_server {
        Some(server) => {
            let (c, k, s) =
                slurmd::configless::fetch(a.conf.clone(), server, a.ca_cert_file.as_deref())?;
            (c, k, Some(s))
        }
        None => {
            let c = a
                .conf
                .clone()
                .unwrap_or_else(slurm_common::conf::default_conf_path);
            let k = slurm_common::auth::key_path(&c);
            (c, k, None)
        }
    };
    let conf = slurm_common::conf::SlurmConf::load(&conf_path)?;
    let level = match a.verbose {
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    slurm_common::logging::init(
        "SACKD_LOG",
        level,
        None,
        slurm_common::logging::TimeFormat::default(),
    )
    .map_err(|e| anyhow!("{e}"))?;
    let key = slurm_common::auth::Key::load(&key_path)?;
    let socket = slurm_common::auth::sack_socket_path(&conf);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = slurm_common::auth::bind_sack(&socket)
            .map_err(|e| anyhow!("cannot serve {}: {e}", socket.display()))?
            .ok_or_else(|| {
                anyhow!(
                    "another daemon serves the credential socket {} already",
                    socket.display()
                )
            })?;
        tracing::info!(
            "sackd version {} serving credentials on {}",
            slurm_proto::SLURM_VERSION,
            socket.display()
        );
        slurm_common::logging::notify("READY=1\nSTATUS=serving");
        // Configless: the cache follows the controller's reconfigures.
        if let Some(s) = source {
            // (Commands read the cache's files afresh: nothing to reload.)
            tokio::spawn(s.follow(|| {}));
        }
        tokio::select! {
            _ = slurm_common::auth::serve_sack(listener, key) => {}
            _ = slurmd::daemon::shutdown_signal(|| {}) => {}
        }
        slurm_common::logging::notify("STOPPING=1");
        let _ = std::fs::remove_file(&socket);
        Ok::<_, anyhow::Error>(())
    })?;
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    Ok(())
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    match parse(&argv) {
        Ok(Cmd::Help) => {
            print!("{USAGE}");
            ExitCode::SUCCESS
        }
        Ok(Cmd::Version) => {
            println!("slurm {}", slurm_proto::SLURM_VERSION);
            ExitCode::SUCCESS
        }
        Ok(Cmd::Run(a)) => match run(a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("sackd: error: {e}");
                ExitCode::from(1)
            }
        },
        Err(e) => {
            eprintln!("sackd: {e}");
            eprint!("{USAGE}");
            ExitCode::from(1)
        }
    }
}
