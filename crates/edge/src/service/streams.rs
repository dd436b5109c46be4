//! Streaming methods. Server streams answer in the framing Accept picks, one frame per
//! upstream message as it arrives; client streams are split from the body as it arrives; a
//! bidirectional stream does both at once (HTTP/2 only). Nothing is buffered beyond one
//! message and a few in flight: a slow client slows the upstream through HTTP/2 flow control,
//! and a client that goes away cancels the upstream call.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;
use futures_util::FutureExt as _;
use http_body::Frame;
use http_body_util::BodyExt;
use tokio::sync::{mpsc, oneshot};
use transcode::stream::Splitter;

use super::*;

/// Request messages converted and waiting for the upstream call.
const IN_FLIGHT: usize = 4;

/// A response frame takes the messages already waiting, up to about this size.
const COALESCE_BYTES: usize = 16 * 1024;

/// A message of the request stream, or its clean end.
enum Item {
    Message(Bytes),
    End,
}

/// The request stream handed to the upstream call. It ends cleanly only after an explicit
/// [`Item::End`]: if the body fails half-way (or the pump is gone), it yields the abort item,
/// which [`crate::upstream::StreamCodec`] refuses, so the call is reset — the upstream must
/// not take a truncated stream for a complete one, nor wait for the rest of it.
struct RequestStream {
    rx: mpsc::Receiver<Item>,
    ended: bool,
}

impl Stream for RequestStream {
    type Item = Option<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Option<Bytes>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(Item::Message(b))) => Poll::Ready(Some(Some(b))),
            Poll::Ready(Some(Item::End)) => {
                self.ended = true;
                Poll::Ready(None)
            }
            Poll::Ready(None) => {
                self.ended = true;
                Poll::Ready(Some(None))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// An opened upstream stream: its headers' metadata, the first message when it was read
/// before answering, and the rest.
struct Opened {
    metadata: HeaderMap,
    first: Option<Bytes>,
    upstream: tonic::Streaming<Bytes>,
}

impl Edge {
    /// A server-streaming method: one request message, built as a unary request's.
    pub(super) async fn server_stream<'s, B>(
        self: &'s Arc<Self>,
        ctx: &mut RequestCtx<'s>,
        head: &http::request::Parts,
        target: Binding<'s, '_>,
        plan: Plan,
        body: B,
    ) -> Result<Response<ResponseBody>, EdgeError>
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let method = target.method;
        let framing = plan.out_framing()?;
        let timeout = plan.deadline;
        let (message, conversion) = self
            .decode_request(head, target, plan, body, ctx.ticket()?)
            .await?;
        ctx.noted.request_conversion = conversion;
        let sent = (plan.request == Format::Protobuf).then(|| message.clone());
        let call = self.upstreams.streaming(
            &method.service,
            &method.path,
            futures_util::stream::iter([Some(message)]),
            ctx.upstream_metadata(self)?,
            timeout,
        );
        let (opened, latency) = self.call_upstream(method, timeout, sent, call).await;
        ctx.upstream_latency = Some(latency);
        let ((metadata, mut upstream), call) = opened?;
        // An error before the first message is an ordinary error response.
        let first = upstream
            .message()
            .await
            .map_err(|s| self.upstream_failure(&call, &s))?;
        let opened = Opened {
            metadata,
            first,
            upstream,
        };
        self.stream_response(ctx, target, framing, opened, None)
    }

    /// A client-streaming method: the body is a stream of messages, the answer one message.
    /// The call and the pump run together; a failing body cancels the call (it is dropped
    /// without the request stream having ended).
    pub(super) async fn client_stream<'s, B>(
        self: &'s Arc<Self>,
        ctx: &mut RequestCtx<'s>,
        target: Binding<'s, '_>,
        plan: Plan,
        body: B,
    ) -> Result<Response<ResponseBody>, EdgeError>
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let method = target.method;
        let (requests, pump) = self.request_stream(method, plan, body, None)?;
        let call = self.upstreams.client_streaming(
            &method.service,
            &method.path,
            requests,
            ctx.upstream_metadata(self)?,
            plan.deadline,
        );
        let call = self.call_upstream(method, plan.deadline, None, call);
        tokio::pin!(call, pump);
        let mut pumping = true;
        let answer = loop {
            tokio::select! {
                answer = &mut call => break answer,
                pumped = &mut pump, if pumping => {
                    pumped?;
                    pumping = false;
                }
            }
        };
        let (answer, latency) = answer;
        ctx.upstream_latency = Some(latency);
        let (answer, _) = answer?;
        let mut response = self.encode_response(ctx, target, plan, &answer.body)?;
        response.headers_mut().extend(
            ctx.protocol
                .answer_metadata(&answer.metadata, &self.config.forward_response_headers),
        );
        // A protocol whose every stream answers in frames (Connect's streaming protocol):
        // the one message framed, then the stream's end.
        if let Some(framing) = plan.out_framing {
            let message = response.body_mut().take_whole();
            let mut out = Vec::with_capacity(message.len() + 16);
            framing.record(0, &message, &mut out);
            ctx.protocol.stream_ok(Some(framing), &mut out);
            *response.body_mut() = ResponseBody::full(Bytes::from(out));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(framing.content_type()),
            );
        }
        Ok(response)
    }

    /// A bidirectional method (HTTP/2 only, checked by `negotiate`): the request stream is
    /// pumped on its own task while the answers stream back; the pump's failure ends the
    /// response stream, and the response stream's end (its client gone) stops the pump.
    pub(super) async fn bidi_stream<'s, B>(
        self: &'s Arc<Self>,
        ctx: &mut RequestCtx<'s>,
        target: Binding<'s, '_>,
        plan: Plan,
        body: B,
    ) -> Result<Response<ResponseBody>, EdgeError>
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let method = target.method;
        let (alive, client_gone) = oneshot::channel::<()>();
        let (requests, pump) = self.request_stream(method, plan, body, Some(client_gone))?;
        let (failed_tx, mut failed) = oneshot::channel();
        tokio::spawn(async move {
            if let Err(e) = pump.await {
                let _ = failed_tx.send(e);
            }
        });
        let call = self.upstreams.streaming(
            &method.service,
            &method.path,
            requests,
            ctx.upstream_metadata(self)?,
            plan.deadline,
        );
        let call = self.call_upstream(method, plan.deadline, None, call);
        tokio::pin!(call);
        let mut watching = true;
        let opened = loop {
            tokio::select! {
                opened = &mut call => break opened,
                failure = &mut failed, if watching => match failure {
                    Ok(e) => return Err(e),
                    Err(_) => watching = false,
                },
            }
        };
        let (opened, latency) = opened;
        ctx.upstream_latency = Some(latency);
        let ((metadata, upstream), _) = opened?;
        let opened = Opened {
            metadata,
            first: None,
            upstream,
        };
        let request_side = watching.then_some(RequestSide {
            failed,
            _alive: alive,
        });
        let framing = plan.out_framing()?;
        self.stream_response(ctx, target, framing, opened, request_side)
    }

    /// The request stream of a client or bidirectional call: what the upstream call reads,
    /// and the pump that fills it from the body. A client stream (no `client_gone`) is held
    /// to `body_read_timeout` between messages; a bidirectional one lasts as long as both
    /// sides talk.
    fn request_stream<B>(
        self: &Arc<Self>,
        method: &Method,
        plan: Plan,
        body: B,
        client_gone: Option<oneshot::Receiver<()>>,
    ) -> Result<
        (
            RequestStream,
            impl Future<Output = Result<(), EdgeError>> + use<B>,
        ),
        EdgeError,
    >
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let (tx, rx) = mpsc::channel(IN_FLIGHT);
        let pump = Pump {
            edge: self.clone(),
            input: method.input.clone(),
            framing: plan.in_framing()?,
            message_coding: plan.message_coding,
            tx,
            idle_limit: client_gone
                .is_none()
                .then_some(self.config.body_read_timeout),
            client_gone,
        };
        Ok((RequestStream { rx, ended: false }, pump.run(body)))
    }

    /// The streaming response: headers now, then one frame per upstream message, then the
    /// end of the framing and trailers (`grpc-status`, `grpc-message`).
    fn stream_response(
        self: &Arc<Self>,
        ctx: &mut RequestCtx<'_>,
        target: Binding<'_, '_>,
        framing: Framing,
        opened: Opened,
        request_side: Option<RequestSide>,
    ) -> Result<Response<ResponseBody>, EdgeError> {
        let Opened {
            metadata,
            first,
            upstream,
        } = opened;
        let route = target.route().cloned();
        let raw = target.raw_response();
        let content_type = match &first {
            Some(first) if raw => {
                let (ct, _) = target.raw_response_parts(first).map_err(|e| {
                    EdgeError::BadUpstreamAnswer(format!(
                        "the upstream's HttpBody is malformed: {e}"
                    ))
                })?;
                raw_content_type(&ct)
            }
            _ if raw => raw_content_type(""),
            _ => HeaderValue::from_static(framing.content_type()),
        };
        let end = Arc::new(StreamEnd::new());
        ctx.stream_end = Some(end.clone());
        let state = StreamState {
            end,
            edge: self.clone(),
            method: target.method.clone(),
            route,
            client: ctx.caller.client.clone(),
            protocol: ctx.protocol,
            fallback: ctx.plan.is_some_and(|p| p.fallback),
            framing,
            options: self.json.of(target.method).options(Some(framing)).clone(),
            raw,
            first,
            upstream,
            request_side,
            count: 0,
            logged_loss: false,
            begun: false,
            done: false,
            trailers: None,
        };
        let frames = futures_util::stream::unfold(state, |mut st| async move {
            loop {
                // A protocol that ends its streams in the body (Connect) has no trailers.
                if let Some(trailers) = st.trailers.take()
                    && !trailers.is_empty()
                {
                    return Some((Frame::trailers(trailers), st));
                }
                if st.done {
                    return None;
                }
                let mut out = Vec::new();
                st.step(&mut out).await;
                // No empty DATA frame (a step that only ended the stream): it says nothing,
                // and h2 clients count them against the connection (h2 ≥ 0.4.16 tears one
                // down after 100 with ENHANCE_YOUR_CALM).
                if !out.is_empty() {
                    return Some((Frame::data(Bytes::from(out)), st));
                }
            }
        });
        let mut response = Response::new(ResponseBody::stream(frames));
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, content_type);
        ctx.protocol.stream_headers(ctx.head, headers);
        headers.extend(
            ctx.protocol
                .answer_metadata(&metadata, &self.config.forward_response_headers),
        );
        Ok(response)
    }
}

/// Reads the request body as it arrives, splits it into messages, converts each to protobuf
/// and hands it to the upstream call. The body is held to `max_stream_bytes` overall and each
/// message to `max_body_bytes`; a pause longer than `idle_limit` (when given) is a 408.
struct Pump {
    edge: Arc<Edge>,
    input: MessageDescriptor,
    framing: InFraming,
    tx: mpsc::Sender<Item>,
    idle_limit: Option<Duration>,
    /// A bidirectional stream's response side, gone when its client is.
    client_gone: Option<oneshot::Receiver<()>>,
    /// The coding of messages flagged compressed (Connect's `Connect-Content-Encoding`).
    message_coding: Option<crate::coding::Coding>,
}

impl Pump {
    async fn run<B>(self, mut body: B) -> Result<(), EdgeError>
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let Pump {
            edge,
            input,
            framing,
            tx,
            idle_limit,
            mut client_gone,
            message_coding,
        } = self;
        let config = &edge.config;
        let mut splitter = Splitter::new(framing, config.max_body_bytes);
        if message_coding.is_some() {
            splitter.take_compressed();
        }
        let mut total = 0usize;
        let mut ended = false;
        loop {
            if !ended {
                let next = async {
                    match idle_limit {
                        Some(limit) => tokio::time::timeout(limit, body.frame()).await,
                        None => Ok(body.frame().await),
                    }
                };
                // A client that drops the response need not close its request body first.
                let frame = match &mut client_gone {
                    Some(gone) => tokio::select! {
                        frame = next => frame,
                        _ = gone => return Err(EdgeError::ClientClosed("the client left the stream".into())),
                    },
                    None => next.await,
                };
                match frame {
                    Err(_) => return Err(EdgeError::BodyTimeout),
                    Ok(None) => {
                        ended = true;
                        splitter.end();
                    }
                    Ok(Some(Err(e))) => return Err(crate::body::read_error(&e)),
                    Ok(Some(Ok(frame))) => {
                        if let Ok(data) = frame.into_data() {
                            total += data.len();
                            if total > config.max_stream_bytes {
                                return Err(EdgeError::PayloadTooLarge {
                                    limit: config.max_stream_bytes,
                                });
                            }
                            splitter.push(&data);
                        }
                    }
                }
            }
            while let Some(message) = splitter.next_message().map_err(bad_request)? {
                let index = splitter.count() - 1;
                let message = match message_coding {
                    Some(coding) if splitter.compressed() => crate::coding::decode::decode_message(
                        coding,
                        &message,
                        config.max_body_bytes,
                    )
                    .map_err(|e| {
                        EdgeError::BadRequest(format!("request stream, message {index}: {e}"))
                    })?,
                    _ => message,
                };
                let bytes = match framing.format() {
                    Format::Protobuf => Bytes::from(message),
                    from => {
                        let mut out = Vec::with_capacity(message.len());
                        edge.schema
                            .to_protobuf(&input, from, &message, &mut out, &edge.transcode)
                            .map_err(|e| {
                                EdgeError::BadRequest(format!(
                                    "request stream, message {index}: {e}"
                                ))
                            })?;
                        Bytes::from(out)
                    }
                };
                if tx.send(Item::Message(bytes)).await.is_err() {
                    // The call is over (answered or cancelled): nobody needs the rest.
                    return Ok(());
                }
            }
            if ended {
                splitter.finish().map_err(bad_request)?;
                let _ = tx.send(Item::End).await;
                return Ok(());
            }
        }
    }
}

/// A bidirectional stream's request side, as its response stream sees it.
struct RequestSide {
    /// The pump's failure (a closed channel: the request stream ended cleanly).
    failed: oneshot::Receiver<EdgeError>,
    /// Dropped with the response stream: tells the pump the client is gone.
    _alive: oneshot::Sender<()>,
}

/// A response stream in progress.
struct StreamState {
    /// Where the stream's final code is written for the request's record.
    end: Arc<StreamEnd>,
    edge: Arc<Edge>,
    method: Method,
    route: Option<Arc<Route>>,
    client: Client,
    protocol: Protocol,
    fallback: bool,
    framing: Framing,
    /// What its messages are rendered with (`[json]`, for the framing).
    options: transcode::Options,
    /// google.api.HttpBody messages (`route` says so): their bytes, unframed.
    raw: bool,
    first: Option<Bytes>,
    upstream: tonic::Streaming<Bytes>,
    /// A bidirectional stream's request side.
    request_side: Option<RequestSide>,
    count: usize,
    /// A dropped-data downgrade has been logged for this stream.
    logged_loss: bool,
    begun: bool,
    done: bool,
    trailers: Option<HeaderMap>,
}

impl StreamState {
    /// Writes the next piece of the stream: a message, or the end (clean or failed).
    async fn step(&mut self, out: &mut Vec<u8>) {
        if !self.begun {
            self.begun = true;
            if !self.raw {
                self.framing.begin(out);
            }
        }
        let next = match self.first.take() {
            Some(m) => Ok(Some(m)),
            None => self.next().await,
        };
        self.take(next, out);
        // Messages already waiting go into the same frame: one DATA frame per message would
        // flood a slow client with small frames (HTTP/2 peers refuse too many of them).
        while !self.done && out.len() < COALESCE_BYTES {
            let Some(next) = self.next().now_or_never() else {
                break;
            };
            self.take(next, out);
        }
    }

    /// Writes one outcome of the upstream stream.
    fn take(&mut self, next: Result<Option<Bytes>, EdgeError>, out: &mut Vec<u8>) {
        match next {
            Ok(Some(message)) => {
                if let Err(e) = self.message(&message, out) {
                    self.fail(&e, out);
                }
            }
            Ok(None) => {
                let framing = (!self.raw).then_some(self.framing);
                self.trailers = Some(self.protocol.stream_ok(framing, out));
                self.done = true;
                self.end.set(Code::Ok);
            }
            Err(e) => self.fail(&e, out),
        }
    }

    async fn next(&mut self) -> Result<Option<Bytes>, EdgeError> {
        if let Some(side) = &mut self.request_side {
            tokio::select! {
                biased;
                failure = &mut side.failed => match failure {
                    Ok(e) => return Err(e),
                    Err(_) => self.request_side = None,
                },
                message = self.upstream.message() => {
                    return message.map_err(|s| mid_stream_failure(&s));
                }
            }
        }
        self.upstream
            .message()
            .await
            .map_err(|s| mid_stream_failure(&s))
    }

    fn message(&mut self, message: &[u8], out: &mut Vec<u8>) -> Result<(), EdgeError> {
        let edge = &self.edge;
        let binding = Binding::of_answer(&self.method, self.route.as_ref());
        if self.raw {
            let (_, data) = binding.raw_response_parts(message).map_err(|e| {
                EdgeError::BadUpstreamAnswer(format!("the upstream's HttpBody is malformed: {e}"))
            })?;
            out.extend_from_slice(&data);
            self.count += 1;
            return Ok(());
        }
        let to = self.framing.format();
        if binding.response_passes_through(to) {
            edge.migration.record_conversion(
                &self.method.full_name,
                Direction::Answer,
                &Conversion {
                    format: Format::Protobuf,
                    protobuf_bytes: message.len(),
                    format_bytes: message.len(),
                    elapsed: Duration::ZERO,
                },
            );
            self.framing.record(self.count, message, out);
            self.count += 1;
            return Ok(());
        }
        // Rendered straight into the frame, unless the framing needs the length first.
        let in_place = self.framing.frames_in_place();
        let mark = out.len();
        let mut separate = Vec::new();
        let rendered = if in_place {
            self.framing.record_start(self.count, out);
            &mut *out
        } else {
            separate.reserve(message.len() * 2);
            &mut separate
        };
        let (start, began) = (rendered.len(), Instant::now());
        let findings = binding
            .response(&edge.schema, to, message, rendered, &self.options)
            .map_err(|e| {
                out.truncate(mark);
                EdgeError::BadUpstreamAnswer(format!(
                    "the upstream's message {} does not render as {}: {e}",
                    self.count,
                    to.as_str()
                ))
            })?;
        edge.migration.record_conversion(
            &self.method.full_name,
            Direction::Answer,
            &Conversion {
                format: to,
                protobuf_bytes: message.len(),
                format_bytes: if in_place { out.len() } else { separate.len() } - start,
                elapsed: began.elapsed(),
            },
        );
        // Counted per message, logged once per stream: with its first message, and with the
        // first that drops unknown fields.
        let first_loss = findings.dropped_data() && !self.logged_loss;
        self.logged_loss |= findings.dropped_data();
        let of = Rendering {
            method: &self.method,
            client: &self.client,
            fallback: self.fallback,
        };
        edge.note_downgrades(&of, to, &findings, self.count == 0 || first_loss);
        if in_place {
            self.framing.record_end(out);
        } else {
            self.framing.record(self.count, &separate, out);
        }
        self.count += 1;
        Ok(())
    }

    /// Ends the stream with a status record and trailers.
    fn fail(&mut self, err: &EdgeError, out: &mut Vec<u8>) {
        tracing::warn!(method = &*self.method.full_name, after = self.count, error = %err, "stream failed");
        let framing = (!self.raw).then_some(self.framing);
        let status = match framing {
            Some(framing) => self.edge.status_body(err, framing.format()),
            None => Bytes::new(),
        };
        self.trailers = Some(
            self.protocol
                .stream_failed(framing, self.count, err, &status, out),
        );
        self.done = true;
        self.end.set(err.code_and_status().0);
    }
}
