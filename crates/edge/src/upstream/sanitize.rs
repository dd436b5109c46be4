//! The streaming calls' tonic channel, minus one way for an upstream to crash a connection:
//! tonic's client reads a status with `Status::from_header_map`, which panics on a
//! `grpc-status-details-bin` that is not base64. [`Sanitized`] drops such a value from the
//! answer's headers and trailers before tonic sees them (the status keeps its code and
//! message; the unreadable details are lost either way).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use tonic::body::Body as TonicBody;
use tonic::transport::Channel;

const DETAILS: &str = "grpc-status-details-bin";

/// A tonic [`Channel`] whose answers carry only status details tonic can read.
#[derive(Clone, Debug)]
pub struct Sanitized(pub Channel);

impl tower::Service<http::Request<TonicBody>> for Sanitized {
    type Response = http::Response<SanitizedBody>;
    type Error = tonic::transport::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<TonicBody>) -> Self::Future {
        let answer = self.0.call(request);
        Box::pin(async move {
            let mut answer = answer.await?;
            drop_unreadable_details(answer.headers_mut());
            Ok(answer.map(SanitizedBody))
        })
    }
}

/// An answer body whose trailers carry only status details tonic can read.
pub struct SanitizedBody(TonicBody);

impl Body for SanitizedBody {
    type Data = bytes::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.0).poll_frame(cx).map(|frame| {
            frame.map(|frame| {
                frame.map(|mut frame| {
                    if let Some(trailers) = frame.trailers_mut() {
                        drop_unreadable_details(trailers);
                    }
                    frame
                })
            })
        })
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.0.size_hint()
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
