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

/// Read slurm.conf again once for every node this process serves (they
/// share it) and apply it to each; a file that does not parse is reported
/// and changes nothing. Blocking (a file read and a parse): run by
/// [`reconfigure_soon`], never on a runtime worker, where a thousand mock
/// nodes' worth of it once held up every heartbeat of the process.
fn reconfigure(ctxs: &[std::sync::Arc<daemon::Ctx>]) {
    // Two requests close together: the later reads the file last.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let Some(first) = ctxs.first() else {
        return;
    };
    let new = match first.read_conf() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("reconfigure: {e}; keeping the configuration in force");
            return;
        }
    };
    let changed = ctxs.iter().filter(|ctx| ctx.apply_conf(&new)).count();
    if changed > 0 {
        tracing::info!("reconfigured from {}", first.conf_path_str);
        // systemd (Type=notify) hears of it: reloaded, ready again.
        slurm_common::logging::notify("RELOADING=1");
        slurm_common::logging::notify("READY=1");
    }
}

/// [`reconfigure`] on the runtime's blocking threads.
fn reconfigure_soon(ctxs: &std::sync::Arc<[std::sync::Arc<daemon::Ctx>]>) {
    let ctxs = ctxs.clone();
    tokio::task::spawn_blocking(move || reconfigure(&ctxs));
}

/// Follow the controllers' `scontrol reconfigure`: a configless daemon
/// through its cache (fetched again at each), one with its own slurm.conf
/// by reading that again. One watch per process, however many nodes it
/// serves.
fn follow_reconfigures(
    source: Option<slurmd::configless::Source>,
    ctxs: &[std::sync::Arc<daemon::Ctx>],
) {
    let Some(first) = ctxs.first() else {
        return;
    };
    let source = source.unwrap_or_else(|| {
        slurmd::configless::Source::watching(
            first.ctlds.clone(),
            first.tls.as_ref().map(|t| t.client.clone()),
            first.key.clone(),
        )
    });
    let ctxs: std::sync::Arc<[_]> = ctxs.into();
    tokio::spawn(source.follow(move || reconfigure_soon(&ctxs)));
}

/// Several nodes in one process (`-N n[1-1000]`, usually with `--mock`).
fn run_many(
    a: args::Args,
    names: Vec<String>,
    key_path: Option<std::path::PathBuf>,
    source: Option<slurmd::configless::Source>,
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
        let mut ctxs = Vec::new();
        for s in all {
            let d = Daemon::start(s).await?;
            ctxs.push(d.ctx().clone());
            let mut rx = rx.clone();
            served.push(tokio::spawn(d.serve(async move {
                let _ = rx.changed().await;
            })));
        }
        tracing::info!("serving {} nodes", served.len());
        let ctxs: std::sync::Arc<[_]> = ctxs.into();
        follow_reconfigures(source, &ctxs);
        slurm_common::logging::reopen_on_sigusr2(log);
        slurm_common::logging::notify("READY=1\nSTATUS=serving");
        daemon::shutdown_signal(|| reconfigure_soon(&ctxs)).await;
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

fn run(mut a: args::Args) -> anyhow::Result<()> {
    if let Some(m) = a.mock {
        slurmd::mock::enable(m);
    }
    let mut key_path = None;
    let mut source = None;
    if let Some(server) = a.conf_server.clone() {
        let (conf, key, s) =
            slurmd::configless::fetch(a.conf.clone(), &server, a.ca_cert_file.as_deref())?;
        a.conf = Some(conf);
        key_path = Some(key);
        source = Some(s);
    }
    if let Some(expr) = &a.node_name {
        let names = slurm_common::hostlist::expand(expr).map_err(|e| anyhow!("-N: {e}"))?;
        if names.len() > 1 {
            return run_many(a, names, key_path, source);
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
        let ctxs: std::sync::Arc<[_]> = vec![d.ctx().clone()].into();
        follow_reconfigures(source, &ctxs);
        slurm_common::logging::reopen_on_sigusr2(log);
        // systemd (Type=notify): listening now (it registers on its own).
        slurm_common::logging::notify("READY=1\nSTATUS=serving");
        d.serve(async {
            daemon::shutdown_signal(|| reconfigure_soon(&ctxs)).await;
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
