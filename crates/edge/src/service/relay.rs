//! relay: a gRPC or gRPC-Web call passed to the method's upstream and its answer passed back,
//! the messages untouched (unknown fields, compressed messages and all), every shape alike —
//! unary, server, client and bidirectional streams are one exchange of envelopes. A request
//! of one message is read whole and sent with the call's head (no task, no extra frame: a
//! unary gRPC call costs what a protobuf pass-through does); a request stream is relayed as
//! it comes, followed on its way (`protocol::envelope::Envelopes`: limits, a broken body
//! named). The answer is relayed as it arrives, pulled only as fast as the client reads.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_core::Stream;
use http_body::Frame;

use super::*;
use crate::protocol::envelope::{self, Envelopes, Fault, TextOut};
use crate::protocol::grpc;
use crate::upstream::AnswerBody;

impl Edge {
    /// Relays the call to `method`'s upstream under the plan's deadline (until the answer's
    /// head; after it, the upstream holds the call to the `grpc-timeout` it was sent).
    pub(super) async fn relay<'s, B>(
        &'s self,
        ctx: &mut RequestCtx<'s>,
        head: &'s http::request::Parts,
        method: &'s Method,
        plan: Plan,
        body: B,
    ) -> Result<Response<ResponseBody>, EdgeError>
    where
        B: Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let protocol = ctx.protocol;
        let limits = grpc::limits(
            method,
            &head.headers,
            self.config.max_body_bytes,
            self.config.max_stream_bytes,
        );
        let text = matches!(protocol, Protocol::GrpcWeb { text: true });
        let mut headers =
            protocol.relay_headers(&head.headers, plan.deadline, ctx.made_request_id.as_ref());
        self.put_identity(ctx, &mut headers);
        ctx.start_call_span(&self.upstreams, &mut headers);
        let (service, path) = (&*method.service, &*method.path);
        // Only a request stream can break after the call left (a whole body is checked
        // first): its failure is kept in `fault`.
        let (answer, latency, fault) = match method.streaming {
            // One request message: read whole (under the limits, held against the
            // admission's bytes as a converted body is) and sent with the head, on this task.
            StreamingKind::Unary | StreamingKind::ServerStreaming => {
                let wire = envelope::wire_limit(limits, text);
                let timeout = self.config.body_read_timeout;
                let body = read_limited(body, wire, timeout, ctx.ticket()?)
                    .await
                    .map_err(|e| match e {
                        EdgeError::PayloadTooLarge { .. } => EdgeError::PayloadTooLarge {
                            limit: limits.message,
                        },
                        e => e,
                    })?;
                let body = envelope::whole(body, limits, text)?;
                // A unary call's retry policy, under the plan's deadline (a unary plan has one).
                let retry = match (method.streaming, self.retries.of(method)) {
                    (StreamingKind::Unary, Some(policy)) => Some((
                        policy,
                        plan.deadline.unwrap_or(self.config.upstream_timeout),
                    )),
                    _ => None,
                };
                let call = self
                    .upstreams
                    .relay_whole(service, path, headers, body, retry);
                let (answer, latency) = self.call_upstream(method, plan.deadline, None, call).await;
                (answer, latency, None)
            }
            // A request stream: relayed as it comes, its envelopes followed on the way.
            StreamingKind::ClientStreaming | StreamingKind::Bidirectional => {
                let fault = Arc::new(Fault::default());
                let body = Envelopes::new(body, limits, text, fault.clone());
                let call = self.upstreams.relay(service, path, headers, body);
                let (answer, latency) = self.call_upstream(method, plan.deadline, None, call).await;
                (answer, latency, Some(fault))
            }
        };
        ctx.upstream_latency = Some(latency);
        // A body that broke a rule reset the upstream's stream: the client hears why.
        let broken = |fault: &Option<Arc<Fault>>| fault.as_ref().and_then(|f| f.take());
        let (answer, _call) = answer.map_err(|e| broken(&fault).unwrap_or(e))?;
        let (parts, answer) = answer.into_parts();
        let end = Arc::new(StreamEnd::new());
        ctx.stream_end = Some(end.clone());
        let trailers_only = answer.ended_with_head();
        if trailers_only {
            if let Some(err) = broken(&fault) {
                return Err(err);
            }
            end.set(grpc::status_of(&parts.headers).unwrap_or(Code::Unknown));
        }
        let body = if trailers_only {
            ResponseBody::full(Bytes::new())
        } else {
            ResponseBody::stream(Relayed {
                answer,
                protocol,
                text: text.then(TextOut::default),
                fault,
                end,
                done: false,
            })
        };
        let mut response = Response::new(body);
        *response.status_mut() = parts.status;
        *response.headers_mut() = protocol.relay_answer_head(parts.headers);
        Ok(response)
    }
}

/// A relayed answer's frames: the upstream's data as it comes (gRPC-Web text: as base64),
/// then its trailers — as trailers for gRPC, as a body frame for gRPC-Web. A failure (the
/// upstream's stream reset, its connection lost, the request body broken) ends it with a
/// status of its own; so does an upstream that ends without trailers.
struct Relayed {
    answer: AnswerBody,
    protocol: Protocol,
    text: Option<TextOut>,
    /// A request stream's failure, if it has one.
    fault: Option<Arc<Fault>>,
    end: Arc<StreamEnd>,
    done: bool,
}

impl Relayed {
    /// The answer's last frame, from the upstream's trailers.
    fn last(&mut self, trailers: HeaderMap) -> Frame<Bytes> {
        self.done = true;
        self.end
            .set(grpc::status_of(&trailers).unwrap_or(Code::Unknown));
        let Some(frame) = self.protocol.trailers_in_body(&trailers) else {
            return Frame::trailers(trailers);
        };
        Frame::data(match &mut self.text {
            Some(text) => text.end(&frame),
            None => Bytes::from(frame),
        })
    }

    /// The answer's last frame when it failed (`err`, unless the request body broke first),
    /// or ended without a status.
    fn failed(&mut self, err: EdgeError) -> Frame<Bytes> {
        let err = self.fault.as_ref().and_then(|f| f.take()).unwrap_or(err);
        let mut trailers = HeaderMap::new();
        put_status_headers(&mut trailers, self.protocol.code_of(&err), &err.to_string());
        self.last(trailers)
    }
}

impl Stream for Relayed {
    type Item = Frame<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Frame<Bytes>>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        let frame = match std::task::ready!(Pin::new(&mut this.answer).poll_frame(cx)) {
            Some(Ok(frame)) => frame,
            Some(Err(status)) => {
                return Poll::Ready(Some(this.failed(mid_stream_failure(&status))));
            }
            None => {
                let err = EdgeError::BadUpstreamAnswer(
                    "the upstream ended its answer without a gRPC status".into(),
                );
                return Poll::Ready(Some(this.failed(err)));
            }
        };
        Poll::Ready(Some(match frame.into_data() {
            Ok(data) => match &mut this.text {
                Some(text) => Frame::data(text.data(&data)),
                None => Frame::data(data),
            },
            Err(frame) => match frame.into_trailers() {
                Ok(trailers) => this.last(trailers),
                Err(_) => Frame::data(Bytes::new()),
            },
        }))
    }
}
