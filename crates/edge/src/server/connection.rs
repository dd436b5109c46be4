//! Connections beside hyper: which are open, whether one has a request in flight, since when
//! it is idle and when an idle HTTP/1.1 connection began its next head. A connection is closed
//! when it idles past `idle_timeout` (HTTP/2: GOAWAY, then the close), when an HTTP/1.1 head
//! takes longer than `header_read_timeout` from its first byte, and when `max_connections` is
//! reached and it is the longest idle. hyper's own HTTP/1.1 head timer is not used: it runs
//! whenever hyper waits for a head, so it also closed every idle keep-alive connection after
//! `header_read_timeout`, before a load balancer in front would (they keep idle connections
//! for 60 s and more, and send a request on one the gateway is closing).

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use prometheus_client::metrics::gauge::Gauge;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;

/// "Not set" for the millisecond stamps.
const NEVER: u64 = u64::MAX;

/// The open connections, for `max_connections`.
pub(super) struct Registry {
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    next_id: AtomicU64,
    max: usize,
    /// Stamps are milliseconds since this.
    epoch: Instant,
    gauge: Gauge,
}

/// What is known of one connection.
pub(super) struct Conn {
    /// Requests in flight (until their answer's body is sent or dropped).
    active: AtomicUsize,
    /// When it last had no request in flight (ms since the epoch).
    idle_since: AtomicU64,
    /// HTTP/1.1: when a byte of the next head arrived while idle (ms since the epoch), or
    /// [`NEVER`].
    head_since: AtomicU64,
    /// Tells its task to close it (the registry made room with it).
    close: Notify,
    closing: AtomicBool,
    epoch: Instant,
}

/// Why a connection is closed by its timers.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Expired {
    Idle,
    Head,
}

impl Registry {
    pub(super) fn new(max: usize, gauge: Gauge) -> Registry {
        Registry {
            conns: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            max,
            epoch: Instant::now(),
            gauge,
        }
    }

    /// Registers a new connection; at `max_connections` the longest-idle one is told to
    /// close to make room, and when none is idle the new one is refused (`None`).
    pub(super) fn open(self: &Arc<Self>) -> Option<Registered> {
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        if conns.len() >= self.max {
            let idlest = conns
                .values()
                .filter(|c| c.is_idle() && !c.closing.load(Ordering::Relaxed))
                .min_by_key(|c| c.idle_since.load(Ordering::Relaxed))?;
            idlest.closing.store(true, Ordering::Relaxed);
            idlest.close.notify_one();
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            active: AtomicUsize::new(0),
            idle_since: AtomicU64::new(0),
            head_since: AtomicU64::new(NEVER),
            close: Notify::new(),
            closing: AtomicBool::new(false),
            epoch: self.epoch,
        });
        conn.idle_since.store(conn.now(), Ordering::Relaxed);
        conns.insert(id, Arc::clone(&conn));
        self.gauge.inc();
        Some(Registered {
            registry: Arc::clone(self),
            id,
            conn,
        })
    }
}

/// A connection's place in the registry, left when dropped.
pub(super) struct Registered {
    registry: Arc<Registry>,
    id: u64,
    pub(super) conn: Arc<Conn>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut conns = self
            .registry
            .conns
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        conns.remove(&self.id);
        self.registry.gauge.dec();
    }
}

impl Conn {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn is_idle(&self) -> bool {
        self.active.load(Ordering::Relaxed) == 0
    }

    /// A request begins; the returned guard ends it.
    pub(super) fn begin(self: &Arc<Self>) -> Active {
        self.active.fetch_add(1, Ordering::Relaxed);
        self.head_since.store(NEVER, Ordering::Relaxed);
        Active(Arc::clone(self))
    }

    /// The first bytes of a head arrived while idle (a connection's very first request, or
    /// an HTTP/1.1 keep-alive connection's next).
    pub(super) fn head_began(&self) {
        if self.is_idle() && self.head_since.load(Ordering::Relaxed) == NEVER {
            self.head_since.store(self.now(), Ordering::Relaxed);
        }
    }

    /// Waits until told to make room.
    pub(super) async fn closed(&self) {
        self.close.notified().await
    }

    /// When to look again, and whether a timer ran out: idle past `idle`, or (HTTP/1.1) a
    /// head begun more than `head` ago. An HTTP/1.1 connection is looked at every `head`
    /// while idle, since its next head may begin at any time.
    pub(super) fn check(
        &self,
        idle: Duration,
        head: Duration,
        h1: bool,
    ) -> Result<Instant, Expired> {
        // Stamps are whole milliseconds, rounded down: a timer runs out only past its last
        // millisecond, never early.
        let now = self.now();
        let at = |ms: u64| self.epoch + Duration::from_millis(ms);
        let (idle_ms, head_ms) = (idle.as_millis() as u64, head.as_millis() as u64);
        if !self.is_idle() {
            return Ok(at(now) + idle);
        }
        let head_since = self.head_since.load(Ordering::Relaxed);
        if h1 && head_since != NEVER {
            if now.saturating_sub(head_since) > head_ms {
                return Err(Expired::Head);
            }
            return Ok(at(head_since + head_ms + 1));
        }
        let idle_since = self.idle_since.load(Ordering::Relaxed);
        if now.saturating_sub(idle_since) > idle_ms {
            return Err(Expired::Idle);
        }
        let idle_at = at(idle_since + idle_ms + 1);
        Ok(if h1 {
            idle_at.min(at(now) + head)
        } else {
            idle_at
        })
    }
}

/// A request in flight on a connection; dropped when its answer is over.
pub(super) struct Active(Arc<Conn>);

impl Drop for Active {
    fn drop(&mut self) {
        let conn = &self.0;
        conn.idle_since.store(conn.now(), Ordering::Relaxed);
        conn.active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// An answer's body that ends its request on the connection when dropped.
pub(super) struct Tracked<B> {
    body: B,
    _active: Active,
}

impl<B> Tracked<B> {
    pub(super) fn new(body: B, active: Active) -> Tracked<B> {
        Tracked {
            body,
            _active: active,
        }
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for Tracked<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A connection's IO. HTTP/1.1: it notes when bytes of a head arrive while the connection is
/// idle, and when dropped it lingers: the write side is shut and what the client still sends
/// is read and thrown away for a while (at most [`LINGER_TIME`] and [`LINGER_BYTES`]), so an
/// answer given before its body was read (413, 503, …) reaches a client still uploading
/// instead of being lost to the reset a close with unread bytes sends.
pub(super) struct Watched<T: Io> {
    io: Option<T>,
    conn: Arc<Conn>,
    h1: bool,
}

/// What a connection's IO must be to linger after it is dropped.
pub(super) trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

/// How long a closed HTTP/1.1 connection reads what its client still sends.
const LINGER_TIME: Duration = Duration::from_secs(2);
/// How much it reads at most (the body of a request refused before it was read).
const LINGER_BYTES: usize = 8 << 20;

impl<T: Io> Watched<T> {
    pub(super) fn new(io: T, conn: Arc<Conn>, h1: bool) -> Watched<T> {
        Watched {
            io: Some(io),
            conn,
            h1,
        }
    }

    fn io(&mut self) -> io::Result<Pin<&mut T>> {
        match &mut self.io {
            Some(io) => Ok(Pin::new(io)),
            None => Err(io::ErrorKind::NotConnected.into()),
        }
    }
}

impl<T: Io> Drop for Watched<T> {
    fn drop(&mut self) {
        let (Some(mut io), true) = (self.io.take(), self.h1) else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let _ = tokio::time::timeout(LINGER_TIME, async {
                let _ = io.shutdown().await;
                let mut buf = vec![0u8; 16 * 1024];
                let mut read = 0;
                while read < LINGER_BYTES {
                    match io.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => read += n,
                    }
                }
            })
            .await;
        });
    }
}

impl<T: Io> AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = self.io()?.poll_read(cx, buf);
        if self.h1 && buf.filled().len() > before {
            self.conn.head_began();
        }
        polled
    }
}

impl<T: Io> AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.io()?.poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.io()?.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.as_ref().is_some_and(|io| io.is_write_vectored())
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.io()?.poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.io()?.poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry(max: usize) -> Arc<Registry> {
        Arc::new(Registry::new(max, Gauge::default()))
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_limit_the_longest_idle_connection_makes_room() {
        let r = registry(2);
        let a = r.open().unwrap();
        tokio::time::advance(Duration::from_secs(1)).await;
        let b = r.open().unwrap();
        let _busy = b.conn.begin();
        // a is the only idle one: it is told to close, and the new one is let in.
        let c = r.open().unwrap();
        assert!(a.conn.closing.load(Ordering::Relaxed));
        assert!(!c.conn.closing.load(Ordering::Relaxed));
        // Nothing idle that is not already closing: refused.
        let _busy_c = c.conn.begin();
        assert!(r.open().is_none());
        assert_eq!(r.gauge.get(), 3);
        drop(a);
        assert_eq!(r.gauge.get(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn timers_run_from_idle_and_from_a_heads_first_byte() {
        let r = registry(10);
        let reg = r.open().unwrap();
        let conn = &reg.conn;
        let (idle, head) = (Duration::from_secs(90), Duration::from_secs(10));
        // Idle HTTP/2: looked at when the idle timeout would run out.
        let ms = Duration::from_millis(1);
        let at = conn.check(idle, head, false).unwrap();
        assert_eq!(at - Instant::now(), idle + ms);
        // Idle HTTP/1.1: looked at every head timeout, closed after the idle timeout.
        assert_eq!(conn.check(idle, head, true).unwrap() - Instant::now(), head);
        tokio::time::advance(idle).await;
        assert!(conn.check(idle, head, true).is_ok());
        tokio::time::advance(ms).await;
        assert_eq!(conn.check(idle, head, true), Err(Expired::Idle));
        // A request in flight: never expired, however long.
        let active = conn.begin();
        tokio::time::advance(idle * 2).await;
        assert!(conn.check(idle, head, true).is_ok());
        drop(active);
        assert!(conn.check(idle, head, true).is_ok());
        // A head's first byte: the head timeout runs from it.
        tokio::time::advance(Duration::from_secs(3)).await;
        conn.head_began();
        assert_eq!(
            conn.check(idle, head, true).unwrap() - Instant::now(),
            head + ms
        );
        tokio::time::advance(head + ms).await;
        assert_eq!(conn.check(idle, head, true), Err(Expired::Head));
        // HTTP/2 ignores it (its frames arrive while idle: PINGs, SETTINGS).
        assert!(conn.check(idle, head, false).is_ok());
    }
}
