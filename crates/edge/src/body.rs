//! Bodies: reading a request body with the size limit enforced while reading, and the
//! response body (one buffer, or a stream of frames for streaming methods).

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_core::Stream;
use http_body::{Body, Frame, SizeHint};

/// A response body: one buffer (with its exact length), or a stream of frames (data, then
/// trailers) pulled only as fast as the client reads.
pub struct ResponseBody {
    inner: Inner,
    /// The request's share of the gateway's limits, given back when the answer is over.
    ticket: Option<Ticket>,
    /// Told when the body is dropped, and whether it was sent to its end.
    on_end: Option<Box<dyn BodyEnd>>,
    ended: bool,
    /// Data bytes handed to hyper so far.
    sent: u64,
}

/// What a [`ResponseBody`] tells when it is dropped: `complete` if every frame was taken (the
/// answer was sent), false if the client left before.
pub trait BodyEnd: Send {
    fn body_end(self: Box<Self>, complete: bool, sent: u64);
}

enum Inner {
    Full(Option<Bytes>),
    Stream(Pin<Box<dyn Stream<Item = Frame<Bytes>> + Send>>),
}

impl ResponseBody {
    pub fn full(bytes: Bytes) -> ResponseBody {
        ResponseBody::new(Inner::Full((!bytes.is_empty()).then_some(bytes)))
    }

    pub fn stream(frames: impl Stream<Item = Frame<Bytes>> + Send + 'static) -> ResponseBody {
        ResponseBody::new(Inner::Stream(Box::pin(frames)))
    }

    fn new(inner: Inner) -> ResponseBody {
        ResponseBody {
            inner,
            ticket: None,
            on_end: None,
            ended: false,
            sent: 0,
        }
    }

    pub fn is_stream(&self) -> bool {
        matches!(self.inner, Inner::Stream(_))
    }

    /// Keeps the request's ticket until the answer is sent or abandoned, counting the bytes
    /// of an answer held whole.
    pub(crate) fn hold(&mut self, mut ticket: Ticket) {
        if let Inner::Full(Some(bytes)) = &self.inner {
            ticket.hold_bytes(bytes.len());
        }
        self.ticket = Some(ticket);
    }

    /// Compresses the body in `coding`: a whole answer of at least `min_bytes` when that
    /// makes it smaller, a stream frame by frame. False when it stays as it is.
    pub(crate) fn compress(&mut self, coding: Coding, level: Level, min_bytes: usize) -> bool {
        // An answer below the minimum costs no encoder.
        if let Inner::Full(bytes) = &self.inner
            && bytes.as_ref().is_none_or(|b| b.len() < min_bytes)
        {
            return false;
        }
        let failed = |error: std::io::Error| {
            tracing::warn!(%error, coding = coding.as_str(), "compressing an answer failed: answered uncompressed");
            false
        };
        let encoder = match Encoder::new(coding, level) {
            Ok(encoder) => encoder,
            Err(error) => return failed(error),
        };
        match &mut self.inner {
            Inner::Full(None) => false,
            Inner::Full(Some(bytes)) => match encoder.whole(bytes) {
                Ok(smaller) if smaller.len() < bytes.len() => {
                    *bytes = smaller;
                    true
                }
                Ok(_) => false,
                Err(error) => failed(error),
            },
            Inner::Stream(frames) => {
                let frames = std::mem::replace(frames, Box::pin(futures_util::stream::empty()));
                self.inner = Inner::Stream(Box::pin(compress_stream(frames, encoder)));
                true
            }
        }
    }

    /// A whole answer's bytes, taken (a stream's: none).
    pub(crate) fn take_whole(&mut self) -> Bytes {
        match &mut self.inner {
            Inner::Full(bytes) => bytes.take().unwrap_or_default(),
            Inner::Stream(_) => Bytes::new(),
        }
    }

    /// Calls `on_end` when the body is dropped: sent to its end, or abandoned by the client.
    pub fn on_end(&mut self, on_end: impl BodyEnd + 'static) {
        self.on_end = Some(Box::new(on_end));
    }
}

impl Drop for ResponseBody {
    fn drop(&mut self) {
        if let Some(on_end) = self.on_end.take() {
            on_end.body_end(self.ended, self.sent);
        }
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        let next = match &mut this.inner {
            Inner::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Inner::Stream(s) => s.as_mut().poll_next(cx).map(|f| f.map(Ok)),
        };
        // Trailers are the last frame: hyper does not poll past them.
        if let Poll::Ready(Some(Ok(frame))) = &next
            && let Some(data) = frame.data_ref()
        {
            this.sent += data.len() as u64;
        }
        this.ended |= match &next {
            Poll::Ready(None) => true,
            Poll::Ready(Some(Ok(frame))) => frame.is_trailers(),
            _ => false,
        };
        next
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.inner, Inner::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Inner::Stream(_) => SizeHint::default(),
        }
    }
}

use crate::admission::Ticket;
use crate::coding::encode::{Encoder, compress_stream};
use crate::coding::{Coding, Level};
use crate::error::EdgeError;

/// A body that failed while being read. Bytes that break HTTP/1.1's chunked framing (hyper
/// reports those as `InvalidData` / `InvalidInput`) are the client's bad request: 400, and the
/// connection closes. Anything else (a reset, an early close) means the client is gone: 499.
pub(crate) fn read_error(e: &(dyn std::error::Error + 'static)) -> EdgeError {
    let mut cause = Some(e);
    while let Some(err) = cause {
        if let Some(decode) = err.downcast_ref::<crate::coding::decode::DecodeError>()
            && let Some(e) = decode.edge_error()
        {
            return e;
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::InvalidData | std::io::ErrorKind::InvalidInput
            )
        {
            return EdgeError::BadRequest(format!("malformed request body framing: {io}"));
        }
        cause = err.source();
    }
    EdgeError::ClientClosed(e.to_string())
}

/// Reads the whole body: 413 as soon as `limit` is exceeded (the rest is never buffered), 408
/// when the client stops sending for `timeout`. A body that arrives in one piece is returned
/// without a copy.
pub(crate) async fn read_limited<B>(
    mut body: B,
    limit: usize,
    timeout: Duration,
    ticket: &mut Ticket,
) -> Result<Bytes, EdgeError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    if let Some(len) = body.size_hint().exact()
        && len > limit as u64
    {
        return Err(EdgeError::PayloadTooLarge { limit });
    }
    // The bytes held are taken from the budget before they are read: all at once when the
    // length is known, else as they arrive.
    let announced = body.size_hint().exact().map(|len| len as usize);
    if let Some(len) = announced {
        ticket.take_bytes(len)?;
    }
    let mut first: Option<Bytes> = None;
    let mut rest: Option<BytesMut> = None;
    let mut total = 0usize;
    while !body.is_end_stream() {
        let frame = match next_frame(&mut body, timeout).await {
            None => return Err(EdgeError::BodyTimeout),
            Some(None) => break,
            Some(Some(Err(e))) => return Err(read_error(&e)),
            Some(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if data.is_empty() {
            continue;
        }
        total += data.len();
        if total > limit {
            return Err(EdgeError::PayloadTooLarge { limit });
        }
        if announced.is_none() {
            ticket.take_bytes(data.len())?;
        }
        match (&mut first, &mut rest) {
            (None, _) => first = Some(data),
            (Some(f), None) => {
                // The whole body when its length was announced; else what came and what the
                // body says at least remains (a size hint counts what is left, not the total:
                // taken as the total it left the buffer to grow by copying).
                let came = f.len() + data.len();
                let mut buf = BytesMut::with_capacity(
                    announced
                        .unwrap_or(0)
                        .max(came + body.size_hint().lower() as usize),
                );
                buf.extend_from_slice(f);
                buf.extend_from_slice(&data);
                rest = Some(buf);
            }
            (Some(_), Some(buf)) => buf.extend_from_slice(&data),
        }
    }
    Ok(match (first, rest) {
        (_, Some(buf)) => buf.freeze(),
        (Some(f), None) => f,
        (None, None) => Bytes::new(),
    })
}

/// The body's next frame (`Some(None)` at its end), or None when none came within
/// `timeout`. The timer is armed only once the frame is not there: a small request's body is
/// usually in hand when it is first asked for, and a timer per request costs more than the
/// rest of reading it (`make bench-ir`, BENCHMARKS.md, history of 2026-12-02).
async fn next_frame<B: Body + Unpin>(
    body: &mut B,
    timeout: Duration,
) -> Option<Option<Result<Frame<B::Data>, B::Error>>> {
    let mut timer = std::pin::pin!(None::<tokio::time::Sleep>);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(frame) = Pin::new(&mut *body).poll_frame(cx) {
            return Poll::Ready(Some(frame));
        }
        if timer.is_none() {
            timer.set(Some(tokio::time::sleep(timeout)));
        }
        match timer.as_mut().as_pin_mut() {
            Some(timer) => timer.poll(cx).map(|()| None),
            None => Poll::Pending,
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use http_body::Frame;
    use http_body_util::Full;

    use super::*;

    /// A body that yields the given chunks, then stalls forever if `stall` is set.
    struct Chunks {
        chunks: VecDeque<Bytes>,
        stall: bool,
    }

    impl Body for Chunks {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            match self.chunks.pop_front() {
                Some(c) => Poll::Ready(Some(Ok(Frame::data(c)))),
                None if self.stall => Poll::Pending,
                None => Poll::Ready(None),
            }
        }
    }

    fn ticket() -> Ticket {
        crate::admission::tests::unlimited().admit().unwrap()
    }

    #[tokio::test]
    async fn bytes_past_the_budget_are_shed_before_they_are_read() {
        let admission = std::sync::Arc::new(crate::admission::Admission::new(
            10,
            250,
            Default::default(),
        ));
        // A length announced past the budget: refused before a byte is read.
        let mut t = admission.admit().unwrap();
        let r = read_limited(
            Full::new(Bytes::from(vec![0; 300])),
            1000,
            Duration::from_secs(1),
            &mut t,
        )
        .await;
        assert!(
            matches!(r, Err(EdgeError::Shed(crate::ShedReason::Memory))),
            "{r:?}"
        );
        // Unannounced: refused at the chunk that crosses it; the stalled rest is never awaited.
        let r = read_limited(chunks(10, 100, true), 1000, Duration::from_secs(5), &mut t).await;
        assert!(
            matches!(r, Err(EdgeError::Shed(crate::ShedReason::Memory))),
            "{r:?}"
        );
        // What was read stays held by the ticket until it is dropped.
        let mut other = admission.admit().unwrap();
        assert!(other.take_bytes(51).is_err());
        drop(t);
        other.take_bytes(250).unwrap();
    }

    fn chunks(n: usize, size: usize, stall: bool) -> Chunks {
        Chunks {
            chunks: (0..n).map(|_| Bytes::from(vec![b'x'; size])).collect(),
            stall,
        }
    }

    #[tokio::test]
    async fn limit_is_enforced_while_reading() {
        let r = read_limited(
            chunks(10, 100, true),
            550,
            Duration::from_secs(5),
            &mut ticket(),
        )
        .await;
        // The sixth chunk crosses the limit; the stalled rest is never awaited.
        assert!(
            matches!(r, Err(EdgeError::PayloadTooLarge { limit: 550 })),
            "{r:?}"
        );
        let ok = read_limited(
            chunks(3, 100, false),
            300,
            Duration::from_secs(1),
            &mut ticket(),
        )
        .await
        .unwrap();
        assert_eq!(ok.len(), 300);
        let one = read_limited(
            Full::new(Bytes::from_static(b"abc")),
            3,
            Duration::from_secs(1),
            &mut ticket(),
        )
        .await
        .unwrap();
        assert_eq!(&one[..], b"abc");
        let big = read_limited(
            Full::new(Bytes::from_static(b"abcd")),
            3,
            Duration::from_secs(1),
            &mut ticket(),
        )
        .await;
        assert!(matches!(big, Err(EdgeError::PayloadTooLarge { .. })));
    }

    #[test]
    fn a_body_in_hand_is_read_without_a_timer() {
        // No runtime here: arming a timer would panic.
        let mut ticket = ticket();
        let read = read_limited(
            chunks(3, 100, false),
            1000,
            Duration::from_secs(1),
            &mut ticket,
        );
        let body = futures_util::FutureExt::now_or_never(read).expect("read at once");
        assert_eq!(body.unwrap().len(), 300);
    }

    /// A body whose one chunk comes from a channel, when it is sent.
    struct Late(Option<tokio::sync::oneshot::Receiver<Bytes>>);

    impl Body for Late {
        type Data = Bytes;
        type Error = tokio::sync::oneshot::error::RecvError;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            let Some(rx) = &mut self.0 else {
                return Poll::Ready(None);
            };
            let chunk = std::task::ready!(Pin::new(rx).poll(cx));
            self.0 = None;
            Poll::Ready(Some(chunk.map(Frame::data)))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_chunk_that_comes_late_is_waited_for_until_the_timeout() {
        for (after, timeout, arrives) in [(5, 10, true), (5, 1, false)] {
            let (tx, rx) = tokio::sync::oneshot::channel();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(after)).await;
                let _ = tx.send(Bytes::from_static(b"late"));
            });
            let r = read_limited(
                Late(Some(rx)),
                1000,
                Duration::from_secs(timeout),
                &mut ticket(),
            )
            .await;
            match r {
                Ok(body) => assert!(arrives && &body[..] == b"late"),
                Err(e) => assert!(!arrives && matches!(e, EdgeError::BodyTimeout), "{e:?}"),
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_stops_sending_times_out() {
        let r = read_limited(
            chunks(2, 10, true),
            1000,
            Duration::from_secs(10),
            &mut ticket(),
        )
        .await;
        assert!(matches!(r, Err(EdgeError::BodyTimeout)), "{r:?}");
    }
}
