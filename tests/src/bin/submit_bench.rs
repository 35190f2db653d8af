//! Submissions into a running controller, many in flight: over one kept
//! gRPC channel (as a long-lived client such as slurmrestd or a workflow
//! manager holds it), and with a channel of its own each (a connection,
//! its TLS handshake and HTTP/2 set-up, as one-shot commands make them).
//! Prints one line per way.
//!
//! Usage: `submit-bench SLURM_CONF [--jobs N] [--in-flight N]` as root (it
//! signs with the cluster key beside slurm.conf). The jobs are held, so
//! what is measured is the controller taking them: checks, the journal's
//! group commit, accounting records queued.

use slurm_common::auth::{Binding, Key};
use slurm_proto::grpc::commands::CommandCall;
use slurm_proto::{JobDesc, RequestBody, Response};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn desc(i: usize) -> JobDesc {
    JobDesc {
        name: Some(format!("bench{i}")),
        hold: true,
        script: "#!/bin/sh\ntrue\n".into(),
        work_dir: "/tmp".into(),
        std_out: Some("/dev/null".into()),
        environment: vec!["PATH=/usr/bin:/bin".into()],
        submit_host: "localhost".into(),
        ..Default::default()
    }
}

fn check(r: Response) -> Result<(), String> {
    match r {
        Response::Submitted { .. } => Ok(()),
        other => Err(format!("submission refused: {other:?}")),
    }
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let conf_path = args
        .first()
        .ok_or("usage: submit-bench SLURM_CONF [--jobs N] [--in-flight N]")?;
    let opt = |name: &str, default: usize| -> Result<usize, String> {
        match args.iter().position(|a| a == name) {
            Some(i) => args
                .get(i + 1)
                .and_then(|v| v.parse().ok())
                .ok_or(format!("{name} takes a number")),
            None => Ok(default),
        }
    };
    let jobs = opt("--jobs", 20_000)?;
    let in_flight = opt("--in-flight", 64)?;
    let conf = slurm_common::conf::SlurmConf::load(std::path::Path::new(conf_path))
        .map_err(|e| e.to_string())?;
    slurm_common::tls::setup(&conf, &slurm_common::tls::Role::Command)
        .map_err(|e| e.to_string())?;
    let key_path = slurm_common::auth::key_path(&conf.path);
    let key = Arc::new(Key::load(&key_path).map_err(|e| format!("{}: {e}", key_path.display()))?);
    let addr = format!("{}:{}", conf.ctld_address(), conf.slurmctld_port);
    let server = conf.ctld_name().to_string();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;

    let kept = {
        let _in = rt.enter();
        slurm_common::grpc::channel(slurm_common::tls::client().cloned(), &addr, &server)
            .map_err(|e| e.to_string())?
    };
    let ways: [(&str, usize, Option<slurm_common::grpc::Channel>); 2] = [
        // One kept channel, `in_flight` calls at a time.
        ("one kept channel", jobs, Some(kept)),
        // A channel (a connection, its TLS handshake and HTTP/2 set-up) per
        // submission, as one-shot commands make them.
        ("a channel per submission", jobs / 4, None),
    ];
    for (way, n, kept) in ways {
        let next = Arc::new(AtomicUsize::new(0));
        let t0 = Instant::now();
        rt.block_on(async {
            let mut tasks = Vec::new();
            for _ in 0..in_flight {
                let (key, next) = (key.clone(), next.clone());
                let (server, addr, kept) = (server.clone(), addr.clone(), kept.clone());
                tasks.push(tokio::spawn(async move {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= n {
                            return Ok::<(), String>(());
                        }
                        let ch = match &kept {
                            Some(c) => c.clone(),
                            None => slurm_common::grpc::channel(
                                slurm_common::tls::client().cloned(),
                                &addr,
                                &server,
                            )
                            .map_err(|e| e.to_string())?,
                        };
                        let call = CommandCall::from_body(RequestBody::SubmitBatchJob(desc(i)))
                            .map_err(|_| "no gRPC method for submissions".to_string())?;
                        let sign =
                            |b: &Binding| Ok(key.sign(0, 0, "bench", slurm_common::auth::now(), b));
                        let r = slurm_common::grpc::call_command(
                            &ch,
                            &server,
                            call,
                            sign,
                            Duration::from_secs(60),
                        )
                        .await
                        .map_err(|e| e.to_string())?;
                        check(r)?;
                    }
                }));
            }
            for t in tasks {
                t.await.map_err(|e| e.to_string())??;
            }
            Ok::<(), String>(())
        })?;
        let dt = t0.elapsed().as_secs_f64();
        println!(
            "gRPC, {way}, {in_flight} in flight   {:>7.0} jobs/s  ({n} jobs in {dt:.2} s)",
            n as f64 / dt
        );
    }
    Ok(())
}
