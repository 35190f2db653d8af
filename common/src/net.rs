//! Connections (clear text or TLS, [`crate::tls`]) under the gRPC
//! transport, the requests' memory budget, and the blocking client the
//! commands use to call the controller.

use slurm_proto::{RequestBody, Response};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};

/// Largest request a daemon accepts by default (`CommunicationParameters=
/// max_message_size=N` sets another): a batch script (4 MiB by default)
/// and its environment fit with room to spare.
pub const MAX_REQUEST: usize = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("connection to {addr} failed: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    #[error("frame of {0} bytes exceeds the limit")]
    TooLarge(usize),
    #[error("malformed message: {0}")]
    Decode(#[from] serde_json::Error),
    #[error("connection closed before a reply")]
    Closed,
    #[error("credential: {0}")]
    Auth(#[from] crate::auth::AuthError),
    #[error("TLS: {0}")]
    Tls(String),
    #[error("too many large requests are being read: try again")]
    Busy,
    #[error("rpc failed ({code}): {why}")]
    Rpc { code: String, why: String },
    #[error("the controller has no method for {0}")]
    NoMethod(&'static str),
}

/// Memory that requests being read may hold at once, beyond the first
/// 64 KiB of each: a server's callers together cannot make it hold more,
/// however many connections they open and however slowly they send.
#[derive(Clone)]
pub struct Budget(std::sync::Arc<tokio::sync::Semaphore>, usize);

impl Budget {
    pub fn new(bytes: usize) -> Budget {
        let bytes = bytes.min(tokio::sync::Semaphore::MAX_PERMITS);
        Budget(
            std::sync::Arc::new(tokio::sync::Semaphore::new(bytes)),
            bytes,
        )
    }

    /// `bytes` of it, if that many are free now.
    pub fn take(&self, bytes: u32) -> Option<tokio::sync::OwnedSemaphorePermit> {
        self.0.clone().try_acquire_many_owned(bytes).ok()
    }

    /// All of it: what no request can ever exceed.
    pub fn total(&self) -> usize {
        self.1
    }

    /// Bytes not held by any request now.
    pub fn available(&self) -> usize {
        self.0.available_permits()
    }
}

/// A connection, in clear text or inside TLS.
pub enum Stream<P, T> {
    Plain(P),
    Tls(Box<T>),
}

/// A server's side of a connection.
pub type Conn =
    Stream<tokio::net::TcpStream, tokio_rustls::server::TlsStream<tokio::net::TcpStream>>;
/// A caller's side, async.
pub type ClientConn =
    Stream<tokio::net::TcpStream, tokio_rustls::client::TlsStream<tokio::net::TcpStream>>;

impl<P: AsyncRead + Unpin, T: AsyncRead + Unpin> AsyncRead for Stream<P, T> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(p) => std::pin::Pin::new(p).poll_read(cx, buf),
            Stream::Tls(t) => std::pin::Pin::new(t.as_mut()).poll_read(cx, buf),
        }
    }
}

impl<P: AsyncWrite + Unpin, T: AsyncWrite + Unpin> AsyncWrite for Stream<P, T> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(p) => std::pin::Pin::new(p).poll_write(cx, buf),
            Stream::Tls(t) => std::pin::Pin::new(t.as_mut()).poll_write(cx, buf),
        }
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(p) => std::pin::Pin::new(p).poll_flush(cx),
            Stream::Tls(t) => std::pin::Pin::new(t.as_mut()).poll_flush(cx),
        }
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(p) => std::pin::Pin::new(p).poll_shutdown(cx),
            Stream::Tls(t) => std::pin::Pin::new(t.as_mut()).poll_shutdown(cx),
        }
    }
}

/// A server takes a connection: with `acceptor` (TLS on) the handshake is
/// done and the caller's certificate, if it showed one, is known.
pub async fn accept(
    sock: tokio::net::TcpStream,
    acceptor: Option<&tokio_rustls::TlsAcceptor>,
) -> Result<(Conn, crate::tls::Peer), NetError> {
    let _ = sock.set_nodelay(true);
    let Some(a) = acceptor else {
        return Ok((Stream::Plain(sock), crate::tls::Peer::Clear));
    };
    let tls = a
        .accept(sock)
        .await
        .map_err(|e| NetError::Tls(e.to_string()))?;
    let peer = match tls.get_ref().1.peer_certificates().and_then(|c| c.first()) {
        Some(c) => crate::tls::Peer::Cert(c.clone().into_owned()),
        None => crate::tls::Peer::Anonymous,
    };
    Ok((Stream::Tls(Box::new(tls)), peer))
}

/// [`accept`] within `within` (a caller that does not finish its TLS
/// handshake in time is dropped); a refusal is logged, and `None` returned.
pub async fn accept_within(
    sock: tokio::net::TcpStream,
    acceptor: Option<&tokio_rustls::TlsAcceptor>,
    within: Duration,
) -> Option<(Conn, crate::tls::Peer)> {
    match tokio::time::timeout(within, accept(sock, acceptor)).await {
        Ok(Ok(c)) => Some(c),
        Ok(Err(e)) => {
            tracing::info!("refused connection: {e}");
            None
        }
        Err(_) => {
            tracing::debug!("no TLS handshake within {within:?}: connection dropped");
            None
        }
    }
}

/// Connect to `addr`, inside TLS with `tls` (`None`: clear text), checking
/// that the server's certificate names `server` (no timeout of its own).
pub async fn connect_async_with(
    tls: Option<&std::sync::Arc<rustls::ClientConfig>>,
    addr: &str,
    server: &str,
) -> Result<ClientConn, NetError> {
    let s = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| NetError::Connect {
            addr: addr.to_string(),
            source: e,
        })?;
    s.set_nodelay(true)?;
    let Some(cfg) = tls else {
        return Ok(Stream::Plain(s));
    };
    let name = crate::tls::server_name(server).map_err(|e| NetError::Tls(e.to_string()))?;
    let tls = tokio_rustls::TlsConnector::from(cfg.clone())
        .connect(name, s)
        .await
        .map_err(|e| NetError::Tls(format!("{addr} ({server}): {e}")))?;
    Ok(Stream::Tls(Box::new(tls)))
}

/// The largest request a daemon takes: `CommunicationParameters=
/// max_message_size=N` (bytes), else [`MAX_REQUEST`].
pub fn max_request(communication_parameters: Option<&str>) -> Result<usize, String> {
    for p in communication_parameters.unwrap_or("").split(',') {
        if let Some((k, v)) = p.trim().split_once('=') {
            if k.trim().eq_ignore_ascii_case("max_message_size") {
                return match v.trim().parse::<usize>() {
                    Ok(n) if (1 << 20..=u32::MAX as usize).contains(&n) => Ok(n),
                    _ => Err(format!(
                        "CommunicationParameters=max_message_size={v}: expected bytes from 1048576 to 4294967295"
                    )),
                };
            }
        }
    }
    Ok(MAX_REQUEST)
}

/// How long a command waits when the controller says to back off.
const BACKOFF: Duration = Duration::from_secs(1);

/// A command's connection to the controllers: where they are and how to
/// prove who we are.
pub struct Client {
    /// Each controller's name (its `SlurmctldHost`, which its certificate
    /// carries) and `host:port`, in the order they are tried: the primary
    /// first, then the backups.
    pub controllers: Vec<(String, String)>,
    pub timeout: Duration,
    /// How long a call keeps trying the controllers while none can be
    /// reached or is in control: `MessageTimeout` (as Slurm's commands,
    /// which keep trying to connect that long: a controller too busy to
    /// take a connection at once is not taken for a dead one), or with
    /// backups the time for one to take over.
    pub failover: Duration,
    creds: crate::auth::CredSource,
    /// The runtime that drives this run's gRPC calls (made at the first).
    rt: std::sync::OnceLock<Result<tokio::runtime::Runtime, String>>,
    /// The run's channel, the controller it goes to, and when a call on it
    /// last ended.
    ch: std::sync::Mutex<Option<(crate::grpc::Channel, usize, std::time::Instant)>>,
}

/// A channel whose last call ended longer ago than this is not used again:
/// its connection was not driven meanwhile (the runtime runs only during a
/// call), so the controller's keepalive pings went unanswered and it may
/// have closed it. (The controller pings a connection silent for 30 s.)
const CHANNEL_STALE: Duration = Duration::from_secs(20);

/// Why a call to one controller may go to the next: it could not be
/// connected to, or it is a backup in standby. (Either way it did not act.)
fn try_next(r: &Result<Response, NetError>) -> bool {
    match r {
        Err(NetError::Connect { .. }) => true,
        Ok(Response::Error(e)) => e.error == slurm_proto::SlurmError::InStandby,
        _ => false,
    }
}

impl Client {
    pub fn from_conf(conf: &crate::conf::SlurmConf) -> Client {
        let controllers = conf.controllers();
        // Slurm's commands keep trying to connect for MessageTimeout, and
        // wait out a takeover: the backup takes control once the primary
        // has been silent for SlurmctldTimeout.
        let mut failover = Duration::from_secs(u64::from(conf.message_timeout));
        if controllers.len() > 1 {
            failover = failover.max(Duration::from_secs(u64::from(conf.slurmctld_timeout) + 10));
        }
        Client {
            controllers,
            timeout: Duration::from_secs(30),
            failover,
            creds: crate::auth::CredSource::from_conf(conf),
            rt: std::sync::OnceLock::new(),
            ch: std::sync::Mutex::new(None),
        }
    }

    /// A client of controller `i` alone (`scontrol ping`, `takeover`):
    /// `None` when there is no such controller.
    pub fn only(&self, i: usize) -> Option<Client> {
        let c = self.controllers.get(i)?.clone();
        Some(Client {
            controllers: vec![c],
            timeout: self.timeout,
            failover: Duration::ZERO,
            creds: self.creds.clone(),
            rt: std::sync::OnceLock::new(),
            ch: std::sync::Mutex::new(None),
        })
    }

    /// Send `body` to the controller in control and wait for the answer.
    /// Told to back off (the controller's per-user rate limit), wait a
    /// second and send it again, as Slurm's commands do, for at most the
    /// client's timeout. A controller that cannot be reached, or a backup
    /// in standby, passes the call to the next; with backups, rounds go on
    /// for [`Client::failover`] while none is in control.
    pub fn call(&self, body: RequestBody) -> Result<Response, NetError> {
        let start = std::time::Instant::now();
        let give_up = start + self.timeout;
        let call = slurm_proto::grpc::commands::CommandCall::from_body(body)
            .map_err(|b| NetError::NoMethod(b.message_type().0))?;
        let n = self.controllers.len().max(1);
        let first = self
            .ch
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map_or(0, |c| c.1);
        let mut tries = 0usize;
        loop {
            let i = (first + tries) % n;
            tries += 1;
            match self.call_grpc(i, call.clone()) {
                Ok(Response::Error(e))
                    if e.error == slurm_proto::SlurmError::Backoff
                        && std::time::Instant::now() + BACKOFF < give_up =>
                {
                    tries -= 1;
                    std::thread::sleep(BACKOFF);
                }
                r if try_next(&r) => {
                    // Forget this controller's channel: the next call
                    // starts from the next one.
                    *self.ch.lock().unwrap_or_else(|p| p.into_inner()) = None;
                    if !tries.is_multiple_of(n) {
                        continue;
                    }
                    // A whole round and none in control: wait for a
                    // takeover, if there are backups to take over.
                    if start.elapsed() + Duration::from_secs(1) >= self.failover {
                        return r;
                    }
                    std::thread::sleep(Duration::from_secs(1));
                }
                r => return r,
            }
        }
    }

    /// One call to controller `i` over the run's channel (made the first
    /// time, again when it went to another controller, and again when the
    /// last call ended more than [`CHANNEL_STALE`] ago). Called from inside
    /// a tokio runtime, the call runs on a thread of its own.
    fn call_grpc(
        &self,
        i: usize,
        call: slurm_proto::grpc::commands::CommandCall,
    ) -> Result<Response, NetError> {
        let rt = self
            .rt
            .get_or_init(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| NetError::Io(std::io::Error::other(e.clone())))?;
        let (server, addr) = self
            .controllers
            .get(i)
            .ok_or_else(|| NetError::Io(std::io::Error::other("no controller is configured")))?;
        let ch = {
            let mut kept = self.ch.lock().unwrap_or_else(|p| p.into_inner());
            match kept.as_ref() {
                Some((c, at, last)) if *at == i && last.elapsed() < CHANNEL_STALE => c.clone(),
                _ => {
                    let _in = rt.enter();
                    let tls = crate::tls::client().cloned();
                    let c = crate::grpc::channel(tls, addr, server)?;
                    *kept = Some((c.clone(), i, std::time::Instant::now()));
                    c
                }
            }
        };
        let run = || {
            rt.block_on(crate::grpc::call_command(
                &ch,
                server,
                call,
                |b| self.creds.credential(b),
                self.timeout,
            ))
        };
        let r = if tokio::runtime::Handle::try_current().is_err() {
            run()
        } else {
            std::thread::scope(|s| s.spawn(run).join().unwrap_or(Err(NetError::Closed)))
        };
        if let Some((_, _, last)) = self.ch.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            *last = std::time::Instant::now();
        }
        r
    }
}
