//! Streaming calls on the same endpoints and connections as unary ones. tonic's client
//! (`tonic::client::Grpc`) frames and reads the messages; [`PoolService`] is the transport
//! under it: it takes an endpoint from the pool (retrying once elsewhere when the endpoint
//! cannot be reached, before anything is sent), opens an h2 stream on its connection, pipes
//! the request body into it on a task of its own (respecting flow control), and answers with
//! the stream's body ([`AnswerBody`]), which holds the call in flight until it ends.
//!
//! Every failure is a `Status` made here: the gateway's own (unreached upstream, lost
//! connection: UNAVAILABLE marked [`super::made_by_gateway`]) or the HTTP/2 reset the
//! upstream sent, in gRPC's mapping. The answer's `grpc-status-details-bin` is dropped when
//! it is not base64: tonic's `Status::from_header_map` panics on such a value.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use h2::{Reason, RecvStream, SendStream};
use http::uri::Authority;
use http::{HeaderMap, Request, Response, header};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use tonic::Status;
use tonic::body::Body as TonicBody;

use super::endpoint::{Endpoint, InFlight, raw_frame};
use super::exchange::{self, Failure};
use super::pool::Pool;

// A name made once: a `&str` name is parsed again on every lookup.
const DETAILS: http::HeaderName = http::HeaderName::from_static("grpc-status-details-bin");

/// The transport of streaming calls to one upstream.
#[derive(Clone, Debug)]
pub(crate) struct PoolService(pub(super) Arc<Pool>);

impl tower::Service<Request<TonicBody>> for PoolService {
    type Response = Response<AnswerBody>;
    type Error = Status;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Status>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<TonicBody>) -> Self::Future {
        Box::pin(open(self.0.clone(), request.map(Outgoing::Stream)))
    }
}

/// What a call sends: a body piped as it comes (on a task of its own), or one already whole
/// (sent at once, the stream ended with it: no task, no empty last frame).
pub(crate) enum Outgoing {
    Stream(TonicBody),
    Whole(Bytes),
}

/// Opens the call on an endpoint of `pool`: the answer's head, and its body to read.
pub(super) async fn open(
    pool: Arc<Pool>,
    request: Request<Outgoing>,
) -> Result<Response<AnswerBody>, Status> {
    let (parts, body) = request.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .cloned()
        .ok_or_else(|| Status::internal("a streaming call without a method path"))?;
    let mut headers = parts.headers;
    headers
        .entry(header::USER_AGENT)
        .or_insert(exchange::USER_AGENT);
    // Until the stream is open nothing of the body is taken: a call the upstream provably did
    // not get (its endpoint unreachable, the connection gone before the stream opened) goes
    // once more, on another endpoint when there is one.
    let mut failed: Option<(Arc<Endpoint>, Failure)> = None;
    let (call, conn, response, send) = loop {
        let retry = failed.is_some();
        let mut call = pool.attempt_on(failed.take()).await?;
        let endpoint = call.endpoint().clone();
        let conn = match endpoint.connection(&mut call).await {
            Ok(conn) => conn,
            Err(status) if !retry => {
                failed = Some((endpoint, Failure::Unreachable(status)));
                continue;
            }
            Err(status) => return Err(status),
        };
        let mut head = Request::new(());
        *head.method_mut() = parts.method.clone();
        *head.uri_mut() = exchange::call_uri(&endpoint, &path)?;
        *head.headers_mut() = headers.clone();
        pool.calls.inc();
        match exchange::open(&endpoint, &conn, head).await {
            Ok((response, send)) => break (call, conn, response, send),
            Err(failure @ Failure::NotSent(_)) if !retry => failed = Some((endpoint, failure)),
            Err(failure) => return Err(failure.into_status()),
        }
    };
    let endpoint = call.endpoint().clone();
    conn.opened(endpoint.options.max_streams_per_connection);
    match body {
        Outgoing::Stream(body) => {
            tokio::spawn(pipe(body, send));
        }
        Outgoing::Whole(bytes) => {
            let mut send = send;
            if send.send_data(raw_frame(bytes), true).is_err() {
                // The stream is over (reset, or the connection gone): the answer says why.
                send.send_reset(Reason::CANCEL);
            }
        }
    }
    let response = response
        .await
        .map_err(|e| exchange::stream_failure(&e, &endpoint.authority).into_status())?;
    let (mut head, recv) = response.into_parts();
    match recv
        .is_end_stream()
        .then(|| exchange::grpc_status(&head.headers, &HeaderMap::new()))
        .flatten()
    {
        Some(status) => endpoint.answered_status(&status),
        None => endpoint.succeeded(),
    }
    drop_unreadable_details(&mut head.headers);
    let authority = endpoint.authority.clone();
    drop(endpoint);
    Ok(Response::from_parts(
        head,
        AnswerBody {
            recv,
            data_done: false,
            done: false,
            authority,
            _call: call,
        },
    ))
}

/// The status of an answer that ended with its head (trailers only), when it is not OK.
pub(super) fn trailers_only_status(response: &Response<AnswerBody>) -> Option<Status> {
    if !response.body().ended_with_head() {
        return None;
    }
    exchange::grpc_status(response.headers(), &HeaderMap::new())
        .filter(|status| status.code() != tonic::Code::Ok)
}

/// Sends the request body's frames on `send` as the upstream's flow control lets them go;
/// a body that fails resets the stream (the upstream sees the call cancelled, never a
/// request stream that ended cleanly). Stops when the upstream resets the stream.
async fn pipe(mut body: TonicBody, mut send: SendStream<super::endpoint::Frame>) {
    loop {
        let frame = tokio::select! {
            frame = body.frame() => frame,
            _ = std::future::poll_fn(|cx| send.poll_reset(cx)) => return,
        };
        match frame {
            None => {
                let _ = send.send_data(raw_frame(Bytes::new()), true);
                return;
            }
            Some(Err(_)) => {
                // INTERNAL_ERROR, as hyper's client resets a stream whose body failed: a
                // tonic server took a CANCEL that came before any message for the clean end
                // of the request stream (tests/tests/streams.rs).
                send.send_reset(Reason::INTERNAL_ERROR);
                return;
            }
            Some(Ok(frame)) => match frame.into_data() {
                Ok(mut data) => {
                    while !data.is_empty() {
                        send.reserve_capacity(data.len());
                        let room = std::future::poll_fn(|cx| send.poll_capacity(cx)).await;
                        let Some(Ok(room)) = room else { return };
                        let chunk = data.split_to(room.min(data.len()));
                        if send.send_data(raw_frame(chunk), false).is_err() {
                            return;
                        }
                    }
                }
                Err(frame) => {
                    if let Ok(trailers) = frame.into_trailers() {
                        let _ = send.send_trailers(trailers);
                    }
                    return;
                }
            },
        }
    }
}

/// The answer of a streaming call: the h2 stream's data, then its trailers. It holds the call
/// in flight on its endpoint until it is over or dropped (dropping it resets the stream).
pub(crate) struct AnswerBody {
    recv: RecvStream,
    data_done: bool,
    done: bool,
    authority: Authority,
    _call: InFlight,
}

impl AnswerBody {
    /// True when the answer's head ended the stream: a trailers-only answer (an error the
    /// upstream answered at once), whose status is in the head.
    pub(crate) fn ended_with_head(&self) -> bool {
        self.recv.is_end_stream()
    }

    fn failure(&self, e: &h2::Error) -> Status {
        exchange::stream_failure(e, &self.authority).into_status()
    }
}

impl Body for AnswerBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if self.done {
            return Poll::Ready(None);
        }
        if !self.data_done {
            match ready!(self.recv.poll_data(cx)) {
                Some(Ok(data)) => {
                    let _ = self.recv.flow_control().release_capacity(data.len());
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Some(Err(e)) => {
                    self.done = true;
                    return Poll::Ready(Some(Err(self.failure(&e))));
                }
                None => self.data_done = true,
            }
        }
        let trailers = ready!(self.recv.poll_trailers(cx));
        self.done = true;
        Poll::Ready(match trailers {
            Ok(Some(mut trailers)) => {
                drop_unreadable_details(&mut trailers);
                Some(Ok(Frame::trailers(trailers)))
            }
            Ok(None) => None,
            Err(e) => Some(Err(self.failure(&e))),
        })
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }
}

/// Removes `grpc-status-details-bin` values that are not base64 (padded or not, as gRPC
/// allows and tonic reads).
fn drop_unreadable_details(fields: &mut HeaderMap) {
    let Some(value) = fields.get(DETAILS) else {
        return;
    };
    if super::decode_binary_header(value.as_bytes()).is_none() {
        fields.remove(DETAILS);
    }
}
