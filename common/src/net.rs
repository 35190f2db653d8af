//! RPC framing and the blocking client the commands use.
//!
//! A frame is a 4-byte big-endian length followed by that many bytes of JSON,
//! inside TLS when the process installed it ([`crate::tls`]).
//! A connection carries one request and its response; the client sets
//! TCP_NODELAY and read/write timeouts so a dead peer never hangs a command.

use serde::de::DeserializeOwned;
use serde::Serialize;
use slurm_proto::{RequestBody, Response};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest answer a client accepts (a full job table with thousands of
/// scripts fits).
pub const MAX_FRAME: usize = 256 << 20;

/// Largest request a daemon accepts by default (`CommunicationParameters=
/// max_message_size=N` sets another): a batch script (4 MiB by default)
/// and its environment fit with room to spare.
pub const MAX_REQUEST: usize = 16 << 20;

/// Memory reserved up front for a frame: the rest grows only as its bytes
/// arrive, so a length prefix alone costs nothing.
const FIRST_CHUNK: usize = 64 << 10;

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

pub fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>, NetError> {
    let body = serde_json::to_vec(msg)?;
    if body.len() > MAX_FRAME {
        return Err(NetError::TooLarge(body.len()));
    }
    let mut out = Vec::with_capacity(body.len() + 4);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// Read one frame of at most [`MAX_FRAME`] bytes; `Ok(None)` on a clean end
/// of stream before any byte.
pub async fn read_frame<T: DeserializeOwned, R: AsyncRead + Unpin>(
    r: &mut R,
) -> Result<Option<T>, NetError> {
    read_frame_max(r, MAX_FRAME).await
}

/// [`read_frame`] with a limit (daemons reading requests use theirs). A
/// larger length is refused before anything is allocated; memory grows
/// only with the bytes that really arrive.
pub async fn read_frame_max<T: DeserializeOwned, R: AsyncRead + Unpin>(
    r: &mut R,
    limit: usize,
) -> Result<Option<T>, NetError> {
    Ok(read_frame_budget(r, limit, None).await?.map(|(v, _)| v))
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

/// Bytes of a request counted against a [`Budget`] until dropped (keep it
/// while the request is handled: its body lives that long).
pub type Held = Option<tokio::sync::OwnedSemaphorePermit>;

/// [`read_frame_max`] under a budget: past its first 64 KiB a frame takes
/// its bytes from `budget` as they arrive, and is refused
/// ([`NetError::Busy`]) when the budget is spent.
pub async fn read_frame_budget<T: DeserializeOwned, R: AsyncRead + Unpin>(
    r: &mut R,
    limit: usize,
    budget: Option<&Budget>,
) -> Result<Option<(T, Held)>, NetError> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let n = u32::from_be_bytes(len) as usize;
    if n > limit {
        return Err(NetError::TooLarge(n));
    }
    let mut buf = Vec::with_capacity(n.min(FIRST_CHUNK));
    let mut held: Held = None;
    while buf.len() < n {
        let want = (n - buf.len()).min(FIRST_CHUNK);
        if let Some(b) = budget.filter(|_| buf.len() + want > FIRST_CHUNK) {
            let p =
                b.0.clone()
                    .try_acquire_many_owned(want as u32)
                    .map_err(|_| NetError::Busy)?;
            match &mut held {
                Some(h) => h.merge(p),
                None => held = Some(p),
            }
        }
        // Exactly what was counted: no doubling of the buffer.
        let start = buf.len();
        buf.reserve_exact(want);
        buf.resize(start + want, 0);
        match r.read_exact(&mut buf[start..]).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(NetError::Closed)
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Some((serde_json::from_slice(&buf)?, held)))
}

pub async fn write_frame<T: Serialize, W: AsyncWrite + Unpin>(
    w: &mut W,
    msg: &T,
) -> Result<(), NetError> {
    let buf = encode(msg)?;
    w.write_all(&buf).await?;
    w.flush().await?;
    Ok(())
}

/// Blocking: read one frame.
pub fn read_frame_sync<T: DeserializeOwned, R: Read>(r: &mut R) -> Result<T, NetError> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            NetError::Closed
        } else {
            NetError::Io(e)
        }
    })?;
    let n = u32::from_be_bytes(len) as usize;
    if n > MAX_FRAME {
        return Err(NetError::TooLarge(n));
    }
    let mut buf = Vec::with_capacity(n.min(FIRST_CHUNK));
    r.take(n as u64).read_to_end(&mut buf)?;
    if buf.len() < n {
        return Err(NetError::Closed);
    }
    Ok(serde_json::from_slice(&buf)?)
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
/// A caller's side, blocking.
pub type SyncConn = Stream<TcpStream, rustls::StreamOwned<rustls::ClientConnection, TcpStream>>;

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

impl<P: Read, T: Read> Read for Stream<P, T> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(p) => p.read(buf),
            Stream::Tls(t) => t.read(buf),
        }
    }
}

impl<P: Write, T: Write> Write for Stream<P, T> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(p) => p.write(buf),
            Stream::Tls(t) => t.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Plain(p) => p.flush(),
            Stream::Tls(t) => t.flush(),
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

fn resolve(addr: &str) -> Result<Vec<std::net::SocketAddr>, NetError> {
    addr.to_socket_addrs()
        .map(|a| a.collect())
        .map_err(|e| NetError::Connect {
            addr: addr.to_string(),
            source: e,
        })
}

/// Blocking: connect to `addr`, inside TLS when this process installed it
/// ([`crate::tls::install_client`]), checking that the server's certificate
/// names `server`. Reads and writes time out after `timeout`.
pub fn connect_sync(addr: &str, server: &str, timeout: Duration) -> Result<SyncConn, NetError> {
    let mut last = None;
    for a in resolve(addr)? {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(s) => {
                s.set_nodelay(true)?;
                s.set_read_timeout(Some(timeout))?;
                s.set_write_timeout(Some(timeout))?;
                let Some(cfg) = crate::tls::client() else {
                    return Ok(Stream::Plain(s));
                };
                let name =
                    crate::tls::server_name(server).map_err(|e| NetError::Tls(e.to_string()))?;
                let conn = rustls::ClientConnection::new(cfg.clone(), name)
                    .map_err(|e| NetError::Tls(e.to_string()))?;
                return Ok(Stream::Tls(Box::new(rustls::StreamOwned::new(conn, s))));
            }
            Err(e) => last = Some(e),
        }
    }
    Err(NetError::Connect {
        addr: addr.to_string(),
        source: last.unwrap_or_else(|| std::io::Error::other("no address")),
    })
}

/// Async twin of [`connect_sync`] (no timeout of its own).
pub async fn connect_async(addr: &str, server: &str) -> Result<ClientConn, NetError> {
    connect_async_with(crate::tls::client(), addr, server).await
}

/// [`connect_async`] with a TLS configuration of the caller's (`None`:
/// clear text): a process serving several nodes calls as each of them.
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

/// Blocking, for any framed protocol (controller, slurmdbd): send one
/// message to `addr` and read one back, within `timeout` for each part.
pub fn exchange_sync<Q: Serialize, R: DeserializeOwned>(
    addr: &str,
    server: &str,
    req: &Q,
    timeout: Duration,
) -> Result<R, NetError> {
    let mut s = connect_sync(addr, server, timeout)?;
    s.write_all(&encode(req)?)
        .map_err(|e| tls_io(e, addr, server))?;
    s.flush().map_err(|e| tls_io(e, addr, server))?;
    read_frame_sync(&mut s)
}

/// A TLS failure shows as an i/o error: say whom it was with.
fn tls_io(e: std::io::Error, addr: &str, server: &str) -> NetError {
    match e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
        Some(t) => NetError::Tls(format!("{addr} ({server}): {t}")),
        None => NetError::Io(e),
    }
}

/// Async twin of [`exchange_sync`], the whole exchange within `timeout`.
pub async fn exchange_async<Q: Serialize, R: DeserializeOwned>(
    addr: &str,
    server: &str,
    req: &Q,
    timeout: Duration,
) -> Result<R, NetError> {
    exchange_async_with(crate::tls::client(), addr, server, req, timeout).await
}

/// [`exchange_async`] with the caller's TLS configuration.
pub async fn exchange_async_with<Q: Serialize, R: DeserializeOwned>(
    tls: Option<&std::sync::Arc<rustls::ClientConfig>>,
    addr: &str,
    server: &str,
    req: &Q,
    timeout: Duration,
) -> Result<R, NetError> {
    let fut = async {
        let mut s = connect_async_with(tls, addr, server).await?;
        write_frame(&mut s, req).await?;
        match read_frame(&mut s).await? {
            Some(r) => Ok(r),
            None => Err(NetError::Closed),
        }
    };
    match tokio::time::timeout(timeout, fut).await {
        Ok(r) => r,
        Err(_) => Err(NetError::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no reply from {addr} within {timeout:?}"),
        ))),
    }
}

/// A request as it arrives: the credential and the body's exact bytes,
/// which the credential's signature covers (see `auth::Binding`).
#[derive(serde::Deserialize)]
pub struct Envelope {
    pub cred: slurm_proto::Credential,
    pub body: Box<serde_json::value::RawValue>,
}

impl Envelope {
    /// The body, once the credential is shown to be signed with `key`,
    /// valid now, made for exactly this body and for the receiver `me`,
    /// and not seen before (`seen`). Nothing is decoded before that.
    pub fn open<B: DeserializeOwned>(
        self,
        key: &crate::auth::Key,
        me: &str,
        now: i64,
        seen: &crate::auth::ReplayCache,
    ) -> Result<(slurm_proto::Credential, B), NetError> {
        self.open_with(key, None, me, now, seen)
    }

    /// [`Envelope::open`] that also takes a user's JWT (passed on by a
    /// slurmrestd holding no key) when `jwt_key` is given: the request then
    /// acts as the user the token names.
    pub fn open_with<B: DeserializeOwned>(
        mut self,
        key: &crate::auth::Key,
        jwt_key: Option<&[u8]>,
        me: &str,
        now: i64,
        seen: &crate::auth::ReplayCache,
    ) -> Result<(slurm_proto::Credential, B), NetError> {
        if !self.cred.token.is_empty() {
            crate::auth::take_token(&mut self.cred, jwt_key, now)?;
        } else {
            let b = crate::auth::Binding::for_bytes(self.body.get().as_bytes(), me);
            key.verify(&self.cred, now, &b)?;
            seen.check(&self.cred, now)?;
        }
        let body = serde_json::from_str(self.body.get())?;
        Ok((self.cred, body))
    }
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

/// A command's connection to the controller: where it is and how to prove who
/// we are.
pub struct Client {
    pub addr: String,
    /// The name the controller's certificate carries (its `SlurmctldHost`).
    pub server: String,
    pub timeout: Duration,
    creds: crate::auth::CredSource,
    /// The runtime that drives this run's gRPC calls (made at the first).
    rt: std::sync::OnceLock<Result<tokio::runtime::Runtime, String>>,
    /// The run's channel to the controller and when a call on it last
    /// ended.
    ch: std::sync::Mutex<Option<(crate::grpc::Channel, std::time::Instant)>>,
}

/// A channel whose last call ended longer ago than this is not used again:
/// its connection was not driven meanwhile (the runtime runs only during a
/// call), so the controller's keepalive pings went unanswered and it may
/// have closed it. (The controller pings a connection silent for 30 s.)
const CHANNEL_STALE: Duration = Duration::from_secs(20);

impl Client {
    pub fn from_conf(conf: &crate::conf::SlurmConf) -> Client {
        Client {
            addr: format!("{}:{}", conf.ctld_address(), conf.slurmctld_port),
            server: conf.ctld_name().to_string(),
            timeout: Duration::from_secs(30),
            creds: crate::auth::CredSource::from_conf(conf),
            rt: std::sync::OnceLock::new(),
            ch: std::sync::Mutex::new(None),
        }
    }

    /// Send `body` over the run's gRPC channel and wait for the answer.
    /// Told to back off (the controller's per-user rate limit), wait a
    /// second and send it again, as Slurm's commands do, for at most the
    /// client's timeout.
    pub fn call(&self, body: RequestBody) -> Result<Response, NetError> {
        let give_up = std::time::Instant::now() + self.timeout;
        let call = slurm_proto::grpc::commands::CommandCall::from_body(body)
            .map_err(|b| NetError::NoMethod(b.message_type().0))?;
        loop {
            match self.call_grpc(call.clone())? {
                Response::Error(e)
                    if e.error == slurm_proto::SlurmError::Backoff
                        && std::time::Instant::now() + BACKOFF < give_up =>
                {
                    std::thread::sleep(BACKOFF);
                }
                r => return Ok(r),
            }
        }
    }

    /// One call over the run's channel (made the first time, and again
    /// when the last call ended more than [`CHANNEL_STALE`] ago). Called
    /// from inside a tokio runtime, the call runs on a thread of its own.
    fn call_grpc(
        &self,
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
        let ch = {
            let mut kept = self.ch.lock().unwrap_or_else(|p| p.into_inner());
            match kept.as_ref() {
                Some((c, last)) if last.elapsed() < CHANNEL_STALE => c.clone(),
                _ => {
                    let _in = rt.enter();
                    let tls = crate::tls::client().cloned();
                    let c = crate::grpc::channel(tls, &self.addr, &self.server)?;
                    *kept = Some((c.clone(), std::time::Instant::now()));
                    c
                }
            }
        };
        let run = || {
            rt.block_on(crate::grpc::call_command(
                &ch,
                &self.server,
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
        if let Some((_, last)) = self.ch.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            *last = std::time::Instant::now();
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_reject_oversize() {
        let buf = encode(&Response::Submitted { job_id: 7 }).unwrap();
        let r: Response = read_frame_sync(&mut &buf[..]).unwrap();
        assert!(matches!(r, Response::Submitted { job_id: 7 }));
        let mut huge = (MAX_FRAME as u32 + 1).to_be_bytes().to_vec();
        huge.extend_from_slice(b"{}");
        assert!(matches!(
            read_frame_sync::<Response, _>(&mut &huge[..]),
            Err(NetError::TooLarge(_))
        ));
        let garbage = [0u8, 0, 0, 3, b'x', b'y', b'z'];
        assert!(matches!(
            read_frame_sync::<Response, _>(&mut &garbage[..]),
            Err(NetError::Decode(_))
        ));
    }
}
