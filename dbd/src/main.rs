use anyhow::Context;
use slurm_common::auth::Key;
use slurmdbd::conf::{default_conf_path, DbdConf};
use slurmdbd::server::{maintenance, Server};
use slurmdbd::storage::Storage;
use std::sync::Arc;

fn main() {
    let args = match slurmdbd::args::parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("slurmdbd: {e}");
            eprint!("{}", slurmdbd::args::USAGE);
            std::process::exit(1);
        }
    };
    if args.version {
        println!("slurm {}", slurm_proto::SLURM_VERSION);
        return;
    }
    if args.help {
        print!("{}", slurmdbd::args::USAGE);
        return;
    }
    if let Err(e) = run(args) {
        eprintln!("slurmdbd: fatal: {e:#}");
        std::process::exit(1);
    }
}

/// `DebugLevel` (raised by `-v`), to `LogFile` unless in the foreground.
fn init_logging(
    args: &slurmdbd::args::Args,
    conf: &DbdConf,
) -> anyhow::Result<Option<Arc<slurm_common::logging::LogFile>>> {
    let level = slurm_common::logging::level(Some(&conf.debug_level), args.verbose as u32);
    let file = conf.log_file.as_deref().filter(|_| !args.foreground);
    slurm_common::logging::init("SLURMDBD_LOG", level, file, conf.log_time_format)
        .map_err(anyhow::Error::msg)
}

fn run(args: slurmdbd::args::Args) -> anyhow::Result<()> {
    let path = args.conf.clone().unwrap_or_else(default_conf_path);
    let conf = DbdConf::load(&path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let log = init_logging(&args, &conf)?;
    for w in &conf.warnings {
        tracing::warn!("{w}");
    }
    let key = Key::load(&conf.key_path())?;
    let slurm_user_uid = match slurm_common::users::user_by_name(&conf.slurm_user) {
        Some(u) => Some(u.uid),
        None => {
            tracing::warn!("SlurmUser '{}' is not a known user", conf.slurm_user);
            None
        }
    };
    let tls = match &conf.tls {
        Some(t) => {
            for n in &t.notices {
                tracing::info!("{n}");
            }
            let tls = t
                .load(&slurm_common::tls::Role::Dbd)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            slurm_common::tls::install_client(tls.client.clone());
            Some(tls)
        }
        None => None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let target = conf.storage_target();
        let storage = Arc::new(
            Storage::open(&target)
                .await
                .with_context(|| format!("accounting storage {}", target.display()))?,
        );
        let addr = conf.listen_addr();
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        tracing::info!(
            "slurmdbd version {} started: {} storage at {}, listening on {addr}",
            slurm_proto::SLURM_VERSION,
            storage.backend().name(),
            target.display()
        );
        if let Some(pidfile) = &conf.pid_file {
            if let Err(e) = std::fs::write(pidfile, format!("{}\n", std::process::id())) {
                tracing::warn!("cannot write {}: {e}", pidfile.display());
            }
        }
        let stats = Arc::new(slurmdbd::stats::Stats::new(slurm_common::auth::now()));
        tokio::spawn(maintenance(
            storage.clone(),
            conf.purge.clone(),
            stats.clone(),
        ));
        let stop = Arc::new(tokio::sync::Notify::new());
        let server = Arc::new(Server {
            stop: stop.clone(),
            config: conf.key_pairs(),
            tls: tls.as_ref().and_then(|t| t.acceptor()),
            budget: slurm_common::net::Budget::new(16 * slurm_common::net::MAX_REQUEST),
            controller_cert: tls.as_ref().and_then(|t| t.controller.clone()),
            storage: storage.clone(),
            key,
            slurm_user_uid,
            stats,
            private: conf.private,
            disable_coord: conf.disable_coord,
            seen: Default::default(),
            jwt_key: match conf.jwt_key_path() {
                Some(p) => {
                    Some(slurm_common::jwt::load_key(p).map_err(|e| anyhow::anyhow!("{e}"))?)
                }
                None => None,
            },
        });
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let shutdown = async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
                _ = stop.notified() => {}
            }
            slurm_common::logging::notify("STOPPING=1");
        };
        slurm_common::logging::reopen_on_sigusr2(log);
        slurm_common::logging::notify("READY=1\nSTATUS=serving");
        server.serve(listener, shutdown).await;
        tracing::info!("shutting down");
        storage.close().await;
        if let Some(pidfile) = &conf.pid_file {
            let _ = std::fs::remove_file(pidfile);
        }
        anyhow::Ok(())
    })
}
