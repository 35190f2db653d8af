//! `slurmd`: the node daemon's entry point (see the library for the parts).

use anyhow::anyhow;
use slurmd::args::{self, Command};
use slurmd::daemon::{self, Daemon};
use slurmd::settings::Settings;
use std::process::ExitCode;

/// `SlurmdDebug` (raised by `-v`), to `SlurmdLogFile` (or `-L`) or stderr.
fn init_logging(
    settings: &Settings,
) -> anyhow::Result<Option<std::sync::Arc<slurm_common::logging::LogFile>>> {
    let time = slurm_common::logging::TimeFormat::parse(settings.conf.get("LogTimeFormat"))
        .map_err(|e| anyhow!("{e}"))?;
    slurm_common::logging::init(
        "SLURMD_LOG",
        settings.log_level(),
        settings.logfile.as_deref(),
        time,
    )
    .map_err(|e| anyhow!("{e}"))
}

/// Several nodes in one process (`-N n[1-1000]`, usually with `--mock`).
fn run_many(
    a: args::Args,
    names: Vec<String>,
    key_path: Option<std::path::PathBuf>,
) -> anyhow::Result<()> {
    let first = Settings::from_args(&args::Args {
        node_name: names.first().cloned(),
        ..a.clone()
    })?;
    let log = init_logging(&first)?;
    let mut all = Vec::with_capacity(names.len());
    for n in &names {
        let one = args::Args {
            node_name: Some(n.clone()),
            ..a.clone()
        };
        let mut s = Settings::resolve(first.conf.clone(), first.conf_path.clone(), &one)?;
        if let Some(k) = &key_path {
            s.key_path = k.clone();
        }
        all.push(s);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow!("cannot start the runtime: {e}"))?;
    rt.block_on(async move {
        let (tx, rx) = tokio::sync::watch::channel(false);
        let mut served = Vec::new();
        for s in all {
            let d = Daemon::start(s).await?;
            let mut rx = rx.clone();
            served.push(tokio::spawn(d.serve(async move {
                let _ = rx.changed().await;
            })));
        }
        tracing::info!("serving {} nodes", served.len());
        slurm_common::logging::reopen_on_sigusr2(log);
        slurm_common::logging::notify("READY=1\nSTATUS=serving");
        daemon::shutdown_signal().await;
        slurm_common::logging::notify("STOPPING=1");
        let _ = tx.send(true);
        for h in served {
            let _ = h.await;
        }
        Ok::<_, anyhow::Error>(())
    })?;
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    Ok(())
}

/// `--conf-server`: fetch the configuration files from the controller into
/// `conf-cache` beside the key (the directory of `-f`, or /etc/slurm), each
/// written whole and renamed into place, readable by all (jobs read
/// slurm.conf); the cached slurm.conf's path and the key's.
fn configless(
    a: &args::Args,
    server: &str,
) -> anyhow::Result<(std::path::PathBuf, std::path::PathBuf)> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let given = a
        .conf
        .clone()
        .unwrap_or_else(slurm_common::conf::default_conf_path);
    let key_path = slurm_common::auth::key_path(&given);
    let key = slurm_common::auth::Key::load(&key_path)?;
    let (host, port) = match server.rsplit_once(':') {
        Some((h, p)) => (
            h.to_string(),
            p.parse::<u16>()
                .map_err(|_| anyhow!("--conf-server {server}: bad port"))?,
        ),
        None => (server.to_string(), 6817),
    };
    let base = key_path
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default();
    let tls = match &a.ca_cert_file {
        Some(ca) => {
            let p = format!("ca_cert_file={}", ca.display());
            let t = slurm_common::tls::TlsSettings::parse(Some("tls/rustls"), Some(&p), &base)
                .map_err(|e| anyhow!("--ca-cert-file: {e}"))?
                .ok_or_else(|| anyhow!("--ca-cert-file: TLS is off"))?
                .load(&slurm_common::tls::Role::Command)
                .map_err(|e| anyhow!("--ca-cert-file: {e}"))?;
            Some(t.client)
        }
        None => None,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let addr = format!("{host}:{port}");
    let files = rt
        .block_on(async {
            let ch = slurm_common::grpc::channel(tls, &addr, &host)?;
            let me = slurm_common::users::hostname();
            let sign = |b: &_| Ok(key.sign(0, 0, &me, slurm_common::auth::now(), b));
            slurm_common::grpc::config_files(&ch, &host, sign, std::time::Duration::from_secs(30))
                .await
        })
        .map_err(|e| anyhow!("cannot fetch the configuration from {addr}: {e}"))?;
    let cache = base.join("conf-cache");
    match std::fs::symlink_metadata(&cache) {
        Ok(m) if !m.is_dir() => return Err(anyhow!("{} is not a directory", cache.display())),
        Ok(_) => {}
        Err(_) => std::fs::create_dir(&cache)?,
    }
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o755))?;
    let mut got = Vec::new();
    for (name, content) in files {
        // Only the names a configless node reads: never a path.
        if !slurm_proto::grpc::CONFIG_FILES.contains(&name.as_str()) {
            return Err(anyhow!("the controller sent an unexpected file {name:?}"));
        }
        let tmp = cache.join(format!(".{name}.new"));
        let _ = std::fs::remove_file(&tmp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        std::io::Write::write_all(&mut f, &content)?;
        f.sync_all()?;
        std::fs::rename(&tmp, cache.join(&name))?;
        got.push(name);
    }
    // What the controller no longer has goes from the cache too.
    for name in slurm_proto::grpc::CONFIG_FILES {
        if !got.iter().any(|g| g == name) {
            let _ = std::fs::remove_file(cache.join(name));
        }
    }
    if !got.iter().any(|g| g == "slurm.conf") {
        return Err(anyhow!("the controller at {addr} sent no slurm.conf"));
    }
    Ok((cache.join("slurm.conf"), key_path))
}

fn run(mut a: args::Args) -> anyhow::Result<()> {
    if let Some(m) = a.mock {
        slurmd::mock::enable(m);
    }
    let mut key_path = None;
    if let Some(server) = a.conf_server.clone() {
        let (conf, key) = configless(&a, &server)?;
        a.conf = Some(conf);
        key_path = Some(key);
    }
    if let Some(expr) = &a.node_name {
        let names = slurm_common::hostlist::expand(expr).map_err(|e| anyhow!("-N: {e}"))?;
        if names.len() > 1 {
            return run_many(a, names, key_path);
        }
    }
    let mut settings = Settings::from_args(&a)?;
    if let Some(k) = key_path {
        settings.key_path = k;
    }
    let log = init_logging(&settings)?;
    for w in &settings.conf.warnings {
        tracing::warn!("{w}");
    }
    let to_file = settings.logfile.is_some();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow!("cannot start the runtime: {e}"))?;
    rt.block_on(async move {
        let d = Daemon::start(settings).await.inspect_err(|e| {
            if to_file {
                tracing::error!("{e}");
            }
        })?;
        slurm_common::logging::reopen_on_sigusr2(log);
        // systemd (Type=notify): listening now (it registers on its own).
        slurm_common::logging::notify("READY=1\nSTATUS=serving");
        d.serve(async {
            daemon::shutdown_signal().await;
            slurm_common::logging::notify("STOPPING=1");
        })
        .await;
        Ok::<_, anyhow::Error>(())
    })?;
    // Do not wait for blocked helper threads: running jobs stay as they are.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    Ok(())
}

/// `slurmd -C`: the node line (with what gres.conf and GPU auto-detection
/// give, when gres.conf is beside slurm.conf) and the uptime.
fn print_config(a: &args::Args) -> anyhow::Result<()> {
    use slurmd::{gres, hw};
    let node = a
        .node_name
        .clone()
        .unwrap_or_else(slurm_common::users::hostname);
    let conf = a
        .conf
        .clone()
        .unwrap_or_else(slurm_common::conf::default_conf_path);
    let found = hw::host();
    let dir = conf.parent().unwrap_or(std::path::Path::new("/"));
    let gres_conf = gres::GresConf::load(dir, &node)?;
    let g = gres::node_gres(&gres_conf, std::path::Path::new("/"), &found.topology);
    println!(
        "{}",
        hw::config_line(&node, &found.hardware(0), &g.to_gres_string())
    );
    let up = hw::uptime(std::path::Path::new("/")).unwrap_or(0);
    println!("UpTime={}", hw::format_uptime(up));
    Ok(())
}

fn main() -> ExitCode {
    let cmd = match args::parse(std::env::args().skip(1)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("slurmd: {e}");
            eprint!("{}", args::USAGE);
            return ExitCode::from(1);
        }
    };
    match cmd {
        Command::Version => {
            println!("slurm {}", slurm_proto::SLURM_VERSION);
            ExitCode::SUCCESS
        }
        Command::Help => {
            print!("{}", args::USAGE);
            ExitCode::SUCCESS
        }
        Command::PrintConfig(a) => match print_config(&a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("slurmd: error: {e}");
                ExitCode::from(1)
            }
        },
        Command::Run(a) => match run(a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                // Every error's message already names its cause.
                eprintln!("slurmd: error: {e}");
                ExitCode::from(1)
            }
        },
    }
}
