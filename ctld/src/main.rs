use anyhow::Context;
use slurm_common::auth::{self, Key};
use slurm_common::conf::{default_conf_path, SlurmConf};
use slurmctld::agent::Agent;
use slurmctld::inbox::{self, Command};
use slurmctld::journal::Journal;
use slurmctld::server::Server;
use slurmctld::state::Controller;
use slurmctld::writer;
use std::sync::Arc;

// The writer allocates and frees a job's records by the thousand a second;
// glibc's malloc spent a fifth of its time consolidating and unlinking
// chunks (docs/performance.md, session 34).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args = match slurmctld::args::parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("slurmctld: {e}");
            eprint!("{}", slurmctld::args::USAGE);
            std::process::exit(1);
        }
    };
    if args.version {
        println!("slurm {}", slurm_proto::SLURM_VERSION);
        return;
    }
    if args.help {
        print!("{}", slurmctld::args::USAGE);
        return;
    }
    if let Err(e) = run(args) {
        eprintln!("slurmctld: fatal: {e:#}");
        std::process::exit(1);
    }
}

/// `SlurmctldDebug` (raised by `-v`), to `SlurmctldLogFile` (or `-L`) unless
/// in the foreground without `-L`.
fn init_logging(
    args: &slurmctld::args::Args,
    conf: &SlurmConf,
) -> anyhow::Result<Option<std::sync::Arc<slurm_common::logging::LogFile>>> {
    let level = slurm_common::logging::level(conf.get("SlurmctldDebug"), args.verbose as u32);
    let file = args.log_file.clone().or(conf.slurmctld_logfile.clone());
    let file = file.filter(|_| !args.foreground || args.log_file.is_some());
    let time = slurm_common::logging::TimeFormat::parse(conf.get("LogTimeFormat"))
        .map_err(anyhow::Error::msg)?;
    slurm_common::logging::init("SLURMCTLD_LOG", level, file.as_deref(), time)
        .map_err(anyhow::Error::msg)
}

/// Serve this host's credential socket (`AuthInfo=socket=`) unless another
/// daemon does. Call inside the runtime.
fn serve_sack(conf: &SlurmConf, key: &Key) {
    match auth::bind_sack(&auth::sack_socket_path(conf)) {
        Ok(Some(l)) => {
            tokio::spawn(auth::serve_sack(l, key.clone()));
        }
        Ok(None) => tracing::info!("credential socket already served by another daemon"),
        Err(e) => tracing::warn!("cannot serve the credential socket: {e}"),
    }
}

fn run(args: slurmctld::args::Args) -> anyhow::Result<()> {
    let path = args.conf.clone().unwrap_or_else(default_conf_path);
    let conf = SlurmConf::load(&path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let log = init_logging(&args, &conf)?;
    for w in &conf.warnings {
        tracing::warn!("{w}");
    }
    // As Slurm's: a completion script that cannot run stops the controller
    // starting (before it listens, or a backup would fail only on taking
    // over).
    if let Err(e) = slurm_common::jobcomp::check_conf(&conf) {
        tracing::error!("{e}");
        anyhow::bail!("{e}");
    }
    if let Err(e) = slurmctld::schedlog::SCHED.configure(&conf) {
        tracing::error!("{e}");
        anyhow::bail!("{e}");
    }
    let index = slurmctld::ha::which(&conf, args.host.as_deref()).map_err(anyhow::Error::msg)?;
    let mode = SlurmConf::controller_mode(index, conf.controllers().len());
    tracing::info!(
        "slurmctld version {} started on cluster {} ({mode})",
        slurm_proto::SLURM_VERSION,
        conf.cluster_name,
    );
    let clear_state = if index > 0 && args.clear_state {
        // A backup takes over the primary's state: never its own blank one.
        tracing::warn!("-c is ignored by a backup controller");
        false
    } else {
        args.clear_state
    };
    let sched = slurm_plugins::registry::scheduler_with_params(
        &conf.scheduler_type,
        conf.get("SchedulerParameters").unwrap_or(""),
    )?;
    if let Some(w) = &sched.warning {
        tracing::warn!("{w}");
    }
    for w in [
        slurm_plugins::registry::select(&conf.select_type)?,
        slurm_plugins::registry::priority(&conf.priority_type)?,
    ]
    .into_iter()
    .flatten()
    {
        tracing::warn!("{w}");
    }
    if conf.auth_type != "auth/slurm" {
        tracing::warn!(
            "AuthType={} is not supported: using auth/slurm with {}",
            conf.auth_type,
            auth::key_path(&conf.path).display()
        );
    }
    let key = Key::load(&auth::key_path(&conf.path))?;
    let journal_reserve = conf
        .ctld_param("journal_reserve_bytes")
        .map(|v| {
            v.parse::<u64>().map_err(|_| {
                anyhow::anyhow!(
                    "SlurmctldParameters=journal_reserve_bytes={v}: not a number of bytes"
                )
            })
        })
        .transpose()?;
    let replicated = conf.ctld_param("replicate_state").is_some();
    let compact_bytes = match conf.ctld_param("journal_compact_bytes") {
        Some(v) => v.parse::<u64>().map_err(|_| {
            anyhow::anyhow!("SlurmctldParameters=journal_compact_bytes={v}: not a number of bytes")
        })?,
        None => writer::COMPACT_BYTES,
    };
    if let Some(pidfile) = &conf.slurmctld_pidfile {
        let _ = std::fs::write(pidfile, format!("{}\n", std::process::id()));
    }
    let tls = slurm_common::tls::setup(&conf, &slurm_common::tls::Role::Ctld)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if tls.is_some() {
        tracing::info!("TLS on: callers are checked against the CA");
    }
    let conf = Arc::new(conf);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let (tx, rx) = std::sync::mpsc::channel();
    let host = slurm_common::users::hostname();
    let (ha, mut give_up) =
        slurmctld::ha::Ha::new(&conf, index, key.clone(), host.clone(), tls.clone());
    let ha = Arc::new(ha);
    // `SlurmctldParameters=replicate_state`: the controllers agree on the
    // state with Raft, each keeping its own copy (no shared directory).
    let replica = if replicated {
        if args.clear_state {
            anyhow::bail!(
                "-c cannot clear a replicated state: stop every controller and remove {} on each",
                conf.state_save_location
                    .join(slurmctld::replica::DIR)
                    .display()
            );
        }
        let r = rt.block_on(slurmctld::replica::Replica::start(
            slurmctld::replica::Setup {
                dir: conf.state_save_location.join(slurmctld::replica::DIR),
                index,
                controllers: ha.controllers.clone(),
                key: key.clone(),
                host: host.clone(),
                timeout: ha.timeout,
                max_message: slurm_common::net::max_request(conf.get("CommunicationParameters"))
                    .map_err(|e| anyhow::anyhow!("{e}"))?,
                compact_bytes,
            },
        ))?;
        Some(Arc::new(r))
    } else {
        None
    };
    // Readers see an empty picture until this controller is in control.
    let published = Arc::new(inbox::Board::new(Arc::new(
        slurmctld::state::Snapshot::default(),
    )));
    // Mail about jobs that ask for it (`--mail-type`), from the snapshots.
    rt.spawn(slurmctld::mail::run(
        published.clone(),
        conf.get("MailProg").unwrap_or("/bin/mail").to_string(),
        conf.get("MailDomain").map(str::to_string),
    ));
    let acct_kick = (conf.accounting_storage_type == "accounting_storage/slurmdbd")
        .then(|| Arc::new(tokio::sync::Notify::new()));
    let shared = inbox::Shared::default();
    let addr = ha.listen_addr().to_string();
    // `scontrol shutdown`: the server asks, the loop below stops.
    let stop = Arc::new(tokio::sync::Notify::new());
    let mut term = {
        let _in = rt.enter();
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?
    };
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        tracing::info!("listening on {addr} ({mode})");
        serve_sack(&conf, &key);
        let max_request = slurm_common::net::max_request(conf.get("CommunicationParameters"))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let server = Server {
            key: key.clone(),
            tls: tls.as_ref().and_then(|t| t.acceptor()),
            published: published.clone(),
            cmds: tx.clone(),
            host: host.clone(),
            acct_kick: acct_kick.clone(),
            // Tokens only with AuthAltTypes=auth/jwt (its key alone is not
            // enough to turn them on).
            jwt_key: match slurm_common::jwt::conf_key(&conf) {
                _ if !conf
                    .get("AuthAltTypes")
                    .unwrap_or("")
                    .split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case("auth/jwt")) =>
                {
                    None
                }
                Ok(k) => Some(k),
                Err(slurm_common::jwt::JwtError::NoKey) => None,
                Err(e) => {
                    tracing::warn!("no JWT key for scontrol token: {e}");
                    None
                }
            },
            slurm_uid: slurm_common::users::parse_user(&conf.slurm_user).unwrap_or(0),
            seen: Arc::new(slurm_common::auth::ReplayCache::default()),
            heard: shared.heard.clone(),
            live_stats: shared.stats.clone(),
            rpc_stats: Default::default(),
            token_policy: slurm_common::jwt::TokenPolicy::from_conf(&conf)
                .map_err(|e| anyhow::anyhow!("{e}"))?,
            max_request,
            budget: slurm_common::net::Budget::new(max_request.saturating_mul(16)),
            message_timeout: std::time::Duration::from_secs(u64::from(conf.message_timeout.max(1))),
            rate: slurmctld::ratelimit::RateParams::from_conf(&conf)
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .map(|p| {
                    Arc::new(std::sync::Mutex::new(
                        slurmctld::ratelimit::RateLimiter::new(p),
                    ))
                }),
            listed: Default::default(),
            ha: ha.clone(),
            stop: stop.clone(),
            replica: replica.clone(),
        };
        tokio::spawn(server.serve(listener));
        slurm_common::logging::reopen_on_sigusr2(log);
        if let Ok(mut usr2) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined2())
        {
            tokio::spawn(async move {
                while usr2.recv().await.is_some() {
                    slurmctld::schedlog::SCHED.reopen();
                }
            });
        }
        anyhow::Ok(())
    })?;
    // A backup is ready (for systemd) once it serves in standby.
    if index > 0 {
        slurm_common::logging::notify("READY=1\nSTATUS=standby");
        tracing::info!("in standby: watching the controllers ahead of this one");
    }
    enum Standby {
        InControl(slurmctld::ha::StateLock),
        Leader(Box<slurmctld::journal::Saved>),
        Failed(slurmctld::replica::ReplicaError),
        Stop,
        Reread,
    }
    let lock = rt.block_on(async {
        let control = async {
            match &replica {
                Some(r) => match ha.gain_replicated_control(r).await {
                    Ok(saved) => Standby::Leader(Box::new(saved)),
                    Err(e) => Standby::Failed(e),
                },
                None => Standby::InControl(ha.gain_control(&conf.state_save_location).await),
            }
        };
        tokio::select! {
            l = control => l,
            _ = ha.reread_requested() => Standby::Reread,
            _ = term.recv() => Standby::Stop,
            _ = stop.notified() => Standby::Stop,
            _ = tokio::signal::ctrl_c() => Standby::Stop,
        }
    });
    let (lock, agreed) = match lock {
        Standby::InControl(l) => (Some(l), None),
        Standby::Leader(saved) => (None, Some(*saved)),
        Standby::Failed(e) => anyhow::bail!("replicated state: {e}"),
        Standby::Stop => {
            slurm_common::logging::notify("STOPPING=1");
            tracing::info!("shutting down");
            return Ok(());
        }
        Standby::Reread => {
            // Let the answer go out, then start again with the new file.
            std::thread::sleep(std::time::Duration::from_millis(300));
            slurm_common::logging::notify("RELOADING=1");
            tracing::info!(
                "reconfigure: starting again to read {}",
                conf.path.display()
            );
            return Err(start_again());
        }
    };
    if index > 0 {
        // The daemon that served this host's credential socket may have
        // been the controller this one takes over from.
        let _in = rt.enter();
        serve_sack(&conf, &key);
    }
    // Where this controller's batches become durable: the journal in
    // StateSaveLocation, or the other controllers' agreement.
    let (store, saved): (Store, _) = match (agreed, &replica) {
        (Some(saved), Some(r)) => (
            Store::Agreed(r.store(
                rt.handle().clone(),
                conf.state_save_location.join(slurmctld::replica::DIR),
                journal_reserve.unwrap_or(slurmctld::journal::DEFAULT_RESERVE),
            )),
            saved,
        ),
        _ => {
            let (journal, saved, recovery) = Journal::open_as(
                &conf.state_save_location,
                args.ignore_state_errors,
                clear_state,
                slurmctld::journal::Owner::slurm_user(&conf.slurm_user),
            )?;
            if recovery.from_previous || !recovery.skipped.is_empty() {
                tracing::warn!(
                    "state recovered with -i: {}{} damaged batches skipped ({})",
                    if recovery.from_previous {
                        "from state.json.prev; "
                    } else {
                        ""
                    },
                    recovery.skipped.len(),
                    recovery.skipped.join(", ")
                );
            }
            let mut journal = journal;
            if let Some(v) = journal_reserve {
                journal.set_reserve(v);
            }
            (
                Store::Journal(writer::Local::new(journal, compact_bytes)),
                saved,
            )
        }
    };
    let now = auth::now();
    let mut ctl = Controller::new(conf.clone(), saved, sched.plugin, now);
    ctl.log_verbose = u32::from(args.verbose);
    ctl.key = Some(key.clone());
    ctl.topologies = slurmctld::state::load_topology(&conf).map_err(|e| anyhow::anyhow!("{e}"))?;
    if conf.priority_type == "priority/multifactor" {
        let params = slurm_plugins::priority::PriorityParams::from_config(&conf.entries)?;
        for w in slurm_plugins::priority::PriorityParams::unsupported(&conf.entries) {
            tracing::warn!("{w}");
        }
        let offset = chrono::Local::now().offset().local_minus_utc() as i64;
        ctl.multifactor = Some(slurm_plugins::priority::Multifactor::new(params, offset));
    }
    tracing::info!("in control: {} jobs recovered", ctl.p.jobs.len());
    let my_address = conf
        .slurmctld_hosts
        .get(index)
        .map(|h| h.address().to_string())
        .unwrap_or_else(|| conf.ctld_address());
    let acct = match (conf.accounting_storage_type.as_str(), &acct_kick) {
        ("accounting_storage/slurmdbd", Some(kick)) => {
            let addr = conf.dbd_address();
            let backlog = ctl.acct_backlog();
            if !backlog.is_empty() {
                tracing::info!("{} accounting records still to send", backlog.len());
            }
            ctl.acct_start(&my_address, now);
            ctl.enforce = slurmctld::assoc::Enforce::parse(&conf.accounting_storage_enforce);
            // Multifactor fair share uses recorded usage over ~8 half-lives.
            // GrpTRESMins limits count usage too (over the last 60 days).
            let usage_window = ctl
                .multifactor
                .as_ref()
                .map(|m| {
                    let hl = m.params.decay_half_life.max(3600);
                    std::time::Duration::from_secs((hl * 8).min(60 * 86400))
                })
                .or(ctl
                    .enforce
                    .limits
                    .then(|| std::time::Duration::from_secs(60 * 86400)));
            // Associations, users and QOS serve enforcement, default
            // accounts, QOS preemption and fair share alike.
            rt.spawn(slurmctld::acct::assoc_fetcher(
                slurmctld::acct::DbdLink {
                    addr: addr.clone(),
                    name: conf.dbd_name().to_string(),
                    key: key.clone(),
                    host: host.clone(),
                },
                conf.cluster_name.clone(),
                tx.clone(),
                kick.clone(),
                std::time::Duration::from_secs(30),
                usage_window,
            ));
            let (atx, arx) = tokio::sync::mpsc::unbounded_channel();
            rt.spawn(slurmctld::acct::sender(
                slurmctld::acct::DbdLink {
                    addr,
                    name: conf.dbd_name().to_string(),
                    key: key.clone(),
                    host: host.clone(),
                },
                backlog,
                arx,
                tx.clone(),
            ));
            Some(atx)
        }
        ("accounting_storage/none" | "", _) => None,
        (other, _) => {
            tracing::warn!("AccountingStorageType={other} is not supported: no accounting");
            None
        }
    };
    match slurm_common::jobcomp::JobCompConf::from_conf(&conf) {
        slurm_common::jobcomp::JobCompConf::None => {}
        slurm_common::jobcomp::JobCompConf::File(path) => {
            tracing::info!("job completion records go to {}", path.display());
        }
        // (Checked at start: `check_conf`.)
        slurm_common::jobcomp::JobCompConf::Script(path) => {
            tracing::info!("job completion records run {}", path.display());
        }
        slurm_common::jobcomp::JobCompConf::NoScript => {}
        slurm_common::jobcomp::JobCompConf::Unsupported(t) => tracing::error!(
            "JobCompType={t} is not supported (jobcomp/filetxt and jobcomp/script are): no job completion records"
        ),
    }
    let agent = Agent {
        key: key.clone(),
        host: host.clone(),
        cmds: tx.clone(),
        rt: rt.handle().clone(),
        acct,
        // Always there: a reconfigure may turn completion records on.
        jobcomp: Some(slurmctld::agent::jobcomp_writer()),
    };
    published.publish(Arc::new(ctl.snapshot()));
    let pubw = published.clone();
    let shared_w = shared.clone();
    let (deposed_tx, deposed) = tokio::sync::oneshot::channel::<()>();
    let writer = std::thread::Builder::new()
        .name("writer".into())
        .spawn(move || {
            let ended = match store {
                Store::Journal(j) => writer::run(ctl, j, rx, pubw, agent, shared_w),
                Store::Agreed(r) => writer::run(ctl, r, rx, pubw, agent, shared_w),
            };
            if ended == writer::Ended::Deposed {
                let _ = deposed_tx.send(());
            }
        })?;
    ha.set_active(true);
    // systemd (Type=notify): serving now.
    slurm_common::logging::notify("READY=1\nSTATUS=in control");
    enum Leave {
        Stop,
        GiveUp(tokio::sync::oneshot::Sender<()>),
        Deposed,
    }
    let leave = rt.block_on(async {
        tokio::select! {
            _ = term.recv() => Leave::Stop,
            _ = tokio::signal::ctrl_c() => Leave::Stop,
            _ = stop.notified() => Leave::Stop,
            r = give_up.recv() => r.map(Leave::GiveUp).unwrap_or(Leave::Stop),
            Ok(()) = deposed => Leave::Deposed,
        }
    });
    if matches!(leave, Leave::Stop) {
        slurm_common::logging::notify("STOPPING=1");
        tracing::info!("shutting down");
    }
    ha.set_active(false);
    let _ = tx.send(Command::Shutdown);
    let _ = writer.join();
    // Completion records of what the writer committed are not lost.
    slurmctld::agent::jobcomp_drain(std::time::Duration::from_secs(30));
    drop(lock);
    if let (Some(r), Leave::GiveUp(_)) = (&replica, &leave) {
        rt.block_on(r.let_others_catch_up(ha.timeout));
    }
    if let Some(r) = &replica {
        // Leave the Raft group cleanly (a standby starts a new node), not
        // to be leader again by itself when it does.
        let _ = rt.block_on(r.raft.shutdown());
    }
    let released = match leave {
        Leave::Stop => return Ok(()),
        Leave::GiveUp(tx) => tx,
        Leave::Deposed => {
            // The other controllers chose another: nothing unacknowledged
            // of this one's may stand; back to standby with what they
            // agreed on.
            slurm_common::logging::notify("RELOADING=1");
            tracing::warn!("another controller is in control: back to standby");
            return Err(start_again());
        }
    };
    // The state is durable and the lock let go: the asking controller may
    // take control once it hears so.
    let _ = released.send(());
    std::thread::sleep(std::time::Duration::from_millis(300));
    if index == 0 {
        // As Slurm's: a primary that gave control up stops (it takes
        // control back when started again).
        slurm_common::logging::notify("STOPPING=1");
        tracing::info!("control given up: shutting down");
        return Ok(());
    }
    // A backup goes back to standby: this program again, from the start.
    slurm_common::logging::notify("RELOADING=1");
    tracing::info!("control given up: back to standby");
    Err(start_again())
}

/// Where the writer makes batches durable.
enum Store {
    Journal(writer::Local),
    Agreed(slurmctld::replica::Replicated),
}

/// Run this program again in this process, with the same arguments (a
/// backup going back to standby, or reading its configuration again); only
/// returns when that fails.
fn start_again() -> anyhow::Error {
    use std::os::unix::process::CommandExt;
    let mut argv = std::env::args_os();
    let arg0 = argv.next().unwrap_or_else(|| "slurmctld".into());
    let e = std::process::Command::new("/proc/self/exe")
        .arg0(arg0)
        .args(argv)
        .exec();
    anyhow::anyhow!("cannot start again in standby: {e}")
}
