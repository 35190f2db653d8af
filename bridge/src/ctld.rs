//! The bridge's connection to the controllers: one kept gRPC channel each
//! (HTTP/2: many calls in flight at once), calls signed with the cluster
//! key, and the controllers tried in order when one cannot be reached or is
//! a backup in standby (as the commands' client does, but async, so the
//! bridge submits many groups at once).

use slurm_common::auth::CredSource;
use slurm_common::grpc::Channel;
use slurm_common::net::NetError;
use slurm_proto::grpc::commands::CommandCall;
use slurm_proto::{RequestBody, Response, SlurmError};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub struct Ctld {
    /// Name and `host:port` of each controller, primary first.
    pub controllers: Vec<(String, String)>,
    channels: Vec<OnceLock<Channel>>,
    /// The controller the last call succeeded with.
    current: AtomicUsize,
    creds: CredSource,
    /// How long a call keeps trying while no controller is in control.
    failover: Duration,
}

const WITHIN: Duration = Duration::from_secs(30);

/// A call that failed: the controller's words or the transport's, and
/// whether the request may still have been carried out (sent, then the
/// connection broke or the deadline passed before the answer came).
#[derive(Debug, Clone)]
pub struct CallFailed {
    pub msg: String,
    pub maybe_done: bool,
}

impl Ctld {
    pub fn from_conf(conf: &slurm_common::conf::SlurmConf) -> Ctld {
        let controllers = conf.controllers();
        let failover = if controllers.len() > 1 {
            Duration::from_secs(u64::from(conf.slurmctld_timeout) + 10)
        } else {
            Duration::ZERO
        };
        Ctld {
            channels: controllers.iter().map(|_| OnceLock::new()).collect(),
            controllers,
            current: AtomicUsize::new(0),
            creds: CredSource::from_conf(conf),
            failover,
        }
    }

    pub fn creds(&self) -> &CredSource {
        &self.creds
    }

    fn channel(&self, i: usize) -> Result<Channel, NetError> {
        if let Some(c) = self.channels[i].get() {
            return Ok(c.clone());
        }
        let (server, addr) = &self.controllers[i];
        let c = slurm_common::grpc::channel(slurm_common::tls::client().cloned(), addr, server)?;
        Ok(self.channels[i].get_or_init(|| c).clone())
    }

    /// One request; an error answer as `Err` with the controller's words.
    pub async fn call(&self, body: RequestBody) -> Result<Response, String> {
        self.call_detail(body).await.map_err(|e| e.msg)
    }

    /// One request; on failure also whether the controller may have acted
    /// on it (the call broke after it was sent).
    pub async fn call_detail(&self, body: RequestBody) -> Result<Response, CallFailed> {
        let sure = |msg: String| CallFailed {
            msg,
            maybe_done: false,
        };
        let call = CommandCall::from_body(body)
            .map_err(|b| sure(format!("no controller method for {}", b.message_type().0)))?;
        let n = self.controllers.len();
        if n == 0 {
            return Err(sure("no controller is configured".into()));
        }
        let start = Instant::now();
        let first = self.current.load(Ordering::Relaxed) % n;
        let mut tries = 0;
        loop {
            let i = (first + tries) % n;
            tries += 1;
            let server = &self.controllers[i].0;
            let r = match self.channel(i) {
                Ok(ch) => {
                    slurm_common::grpc::call_command(
                        &ch,
                        server,
                        call.clone(),
                        |b| self.creds.credential(b),
                        WITHIN,
                    )
                    .await
                }
                Err(e) => Err(e),
            };
            let next = match &r {
                Err(NetError::Connect { .. }) => true,
                Ok(Response::Error(e)) => e.error == SlurmError::InStandby,
                _ => false,
            };
            if !next {
                self.current.store(i, Ordering::Relaxed);
                return match r {
                    Ok(Response::Error(e)) => Err(sure(e.to_string())),
                    Ok(r) => Ok(r),
                    Err(e) => Err(CallFailed {
                        msg: e.to_string(),
                        maybe_done: true,
                    }),
                };
            }
            if tries % n == 0 {
                if start.elapsed() + Duration::from_secs(1) >= self.failover {
                    return Err(sure(match r {
                        Ok(Response::Error(e)) => e.to_string(),
                        Err(e) => e.to_string(),
                        Ok(_) => "no controller in control".into(),
                    }));
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
