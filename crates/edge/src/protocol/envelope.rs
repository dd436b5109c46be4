//! gRPC's message envelopes (a flags byte, a 4-byte big-endian length, the message) read as a
//! relayed request body passes through, and gRPC-Web's text encoding (base64) both ways.
//!
//! A relayed body is never re-framed: [`Envelopes`] passes each chunk on as it came and only
//! follows the envelopes in it, so that a message over the limit, a flags byte gRPC does not
//! define, a compressed message without a `grpc-encoding` or a body that ends inside an
//! envelope fails the request (the upstream's stream is reset) with the client's error, kept
//! in a [`Fault`] for the answer to report.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use base64::Engine as _;
use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};

use crate::error::EdgeError;

/// The envelope's flags: bit 0 a compressed message; gRPC-Web's trailers frame sets bit 7.
const COMPRESSED: u8 = 0x01;
pub(crate) const TRAILERS: u8 = 0x80;

/// base64 as gRPC-Web text writes it: standard alphabet, padded; padding read either way.
const TEXT: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

/// The request's own failure, when its body broke a rule: what the client is answered
/// instead of whatever the upstream made of the reset stream.
#[derive(Default)]
pub(crate) struct Fault(Mutex<Option<EdgeError>>);

impl Fault {
    fn set(&self, err: EdgeError) {
        if let Ok(mut slot) = self.0.lock() {
            slot.get_or_insert(err);
        }
    }

    /// The body's failure, if it failed (taken: asked once).
    pub(crate) fn take(&self) -> Option<EdgeError> {
        self.0.lock().ok().and_then(|mut slot| slot.take())
    }
}

/// The error a relayed body fails with (its cause is in the [`Fault`]).
#[derive(Debug)]
pub(crate) struct BrokenBody;

impl std::fmt::Display for BrokenBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body broke a rule of its protocol")
    }
}

impl std::error::Error for BrokenBody {}

/// What a relayed request body may hold.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// One message's length (`max_body_bytes`).
    pub(crate) message: usize,
    /// All messages' lengths together (`max_stream_bytes` for a request stream; the same as
    /// `message` when the method takes one message).
    pub(crate) total: usize,
    /// Whether the request names a `grpc-encoding` other than `identity` (a compressed
    /// message needs one).
    pub(crate) encoded: bool,
}

/// Where the reader is in the envelopes.
#[derive(Debug, Default)]
struct Reader {
    /// The current envelope's header bytes seen (0 to 5) and the header.
    seen: usize,
    header: [u8; 5],
    /// Message bytes still to come in the current envelope.
    rest: usize,
    total: usize,
    messages: usize,
}

impl Reader {
    /// Follows `chunk` through the envelopes.
    fn read(&mut self, mut chunk: &[u8], limits: Limits) -> Result<(), EdgeError> {
        while !chunk.is_empty() {
            if self.rest > 0 {
                let take = self.rest.min(chunk.len());
                self.rest -= take;
                chunk = &chunk[take..];
                continue;
            }
            let take = (5 - self.seen).min(chunk.len());
            self.header[self.seen..self.seen + take].copy_from_slice(&chunk[..take]);
            self.seen += take;
            chunk = &chunk[take..];
            if self.seen < 5 {
                break;
            }
            self.seen = 0;
            self.messages += 1;
            let flags = self.header[0];
            let [_, a, b, c, d] = self.header;
            let len = u32::from_be_bytes([a, b, c, d]) as usize;
            if flags & !COMPRESSED != 0 {
                return Err(EdgeError::BadRequest(format!(
                    "request message {}: flags byte {flags:#04x} is not gRPC's (0 or 1)",
                    self.messages
                )));
            }
            if flags & COMPRESSED != 0 && !limits.encoded {
                return Err(EdgeError::BadRequest(format!(
                    "request message {} is marked compressed but the request names no grpc-encoding",
                    self.messages
                )));
            }
            if len > limits.message {
                return Err(EdgeError::PayloadTooLarge {
                    limit: limits.message,
                });
            }
            self.total = self.total.saturating_add(len);
            if self.total > limits.total {
                return Err(EdgeError::PayloadTooLarge {
                    limit: limits.total,
                });
            }
            self.rest = len;
        }
        Ok(())
    }

    /// The body ended: inside an envelope is a truncated message.
    fn end(&self) -> Result<(), EdgeError> {
        if self.seen > 0 || self.rest > 0 {
            return Err(EdgeError::BadRequest(format!(
                "the request body ends inside message {}: its envelope promised {} more bytes",
                self.messages.max(1),
                if self.seen > 0 {
                    5 - self.seen
                } else {
                    self.rest
                }
            )));
        }
        Ok(())
    }
}

/// A relayed request body: the client's bytes passed on as they come (gRPC-Web text decoded
/// from base64 first), their envelopes followed.
pub(crate) struct Envelopes<B> {
    body: B,
    reader: Reader,
    limits: Limits,
    /// gRPC-Web text: base64 characters of a group not complete yet.
    text: Option<BytesMut>,
    fault: Arc<Fault>,
    done: bool,
}

impl<B> Envelopes<B> {
    pub(crate) fn new(body: B, limits: Limits, text: bool, fault: Arc<Fault>) -> Envelopes<B> {
        Envelopes {
            body,
            reader: Reader::default(),
            limits,
            text: text.then(BytesMut::new),
            fault,
            done: false,
        }
    }

    fn fail(&mut self, err: EdgeError) -> Poll<Option<Result<Frame<Bytes>, BrokenBody>>> {
        self.done = true;
        self.fault.set(err);
        Poll::Ready(Some(Err(BrokenBody)))
    }
}

impl<B> Body for Envelopes<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    type Data = Bytes;
    type Error = BrokenBody;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BrokenBody>>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        let frame = match ready!(Pin::new(&mut this.body).poll_frame(cx)) {
            None => {
                let rest = this.text.as_ref().map_or(0, |t| t.len());
                if rest > 0 {
                    return this.fail(EdgeError::BadRequest(format!(
                        "the gRPC-Web text body ends with {rest} base64 characters of an incomplete group"
                    )));
                }
                if let Err(e) = this.reader.end() {
                    return this.fail(e);
                }
                this.done = true;
                return Poll::Ready(None);
            }
            Some(Err(e)) => {
                // The client's body failed (it left, or its framing broke): the upstream's
                // stream is reset; the answer reports the read error.
                return this.fail(crate::body::read_error(&e));
            }
            Some(Ok(frame)) => frame,
        };
        let data = match frame.into_data() {
            Ok(data) => data,
            // A client's trailers mean nothing to gRPC: dropped.
            Err(_) => return Poll::Ready(Some(Ok(Frame::data(Bytes::new())))),
        };
        let data = match &mut this.text {
            Some(pending) => match decode_text(pending, &data) {
                Ok(data) => data,
                Err(e) => return this.fail(e),
            },
            None => data,
        };
        if let Err(e) = this.reader.read(&data, this.limits) {
            return this.fail(e);
        }
        Poll::Ready(Some(Ok(Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

/// A whole relayed body (a method that takes one message), read: its envelopes checked as
/// [`Envelopes`] checks them on the way; gRPC-Web text decoded first.
pub(crate) fn whole(body: Bytes, limits: Limits, text: bool) -> Result<Bytes, EdgeError> {
    let body = if text {
        let mut pending = BytesMut::new();
        let decoded = decode_text(&mut pending, &body)?;
        if !pending.is_empty() {
            return Err(EdgeError::BadRequest(format!(
                "the gRPC-Web text body ends with {} base64 characters of an incomplete group",
                pending.len()
            )));
        }
        decoded
    } else {
        body
    };
    let mut reader = Reader::default();
    reader.read(&body, limits)?;
    reader.end()?;
    Ok(body)
}

/// The most bytes a whole body within `limits` takes as sent: its messages and their
/// envelopes' prefixes, as base64 for gRPC-Web text.
pub(crate) fn wire_limit(limits: Limits, text: bool) -> usize {
    let raw = limits.total.saturating_add(5);
    if text {
        raw.saturating_add(2) / 3 * 4
    } else {
        raw
    }
}

/// Decodes what `chunk` completes of gRPC-Web text: whole groups of four characters (a
/// padded group ends a base64 run, and another may follow: each is decoded apart), the
/// characters of an incomplete group kept in `pending` for the next chunk.
fn decode_text(pending: &mut BytesMut, chunk: &[u8]) -> Result<Bytes, EdgeError> {
    pending.extend_from_slice(chunk);
    let whole = pending.len() / 4 * 4;
    let text = pending.split_to(whole);
    let mut out = Vec::with_capacity(whole / 4 * 3);
    let mut start = 0;
    for (i, group) in text.chunks_exact(4).enumerate() {
        let end = (i + 1) * 4;
        if group[3] == b'=' || end == whole {
            TEXT.decode_vec(&text[start..end], &mut out).map_err(|e| {
                EdgeError::BadRequest(format!("the gRPC-Web text body is not base64: {e}"))
            })?;
            start = end;
        }
    }
    Ok(Bytes::from(out))
}

/// gRPC-Web text's answer: data encoded as it goes, three bytes to four characters, the
/// one or two bytes left over kept for the next chunk (so that the text is one base64 run
/// until the trailers frame, which ends it padded).
#[derive(Default)]
pub(crate) struct TextOut {
    carry: Vec<u8>,
}

impl TextOut {
    /// `data` as base64, what does not fill a group kept.
    pub(crate) fn data(&mut self, data: &[u8]) -> Bytes {
        self.carry.extend_from_slice(data);
        let whole = self.carry.len() / 3 * 3;
        let text = TEXT.encode(&self.carry[..whole]);
        self.carry.drain(..whole);
        Bytes::from(text)
    }

    /// The last of it: what was kept and `last`, padded.
    pub(crate) fn end(&mut self, last: &[u8]) -> Bytes {
        self.carry.extend_from_slice(last);
        let text = TEXT.encode(&self.carry);
        self.carry.clear();
        Bytes::from(text)
    }
}

/// An envelope: `flags`, the length, `message`.
pub(crate) fn envelope(flags: u8, message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + message.len());
    out.push(flags);
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        message: 100,
        total: 150,
        encoded: false,
    };

    fn read_all(chunks: &[&[u8]], limits: Limits) -> Result<usize, EdgeError> {
        let mut reader = Reader::default();
        for chunk in chunks {
            reader.read(chunk, limits)?;
        }
        reader.end()?;
        Ok(reader.messages)
    }

    #[test]
    fn envelopes_are_followed_across_any_split() {
        let mut body = envelope(0, b"hello");
        body.extend(envelope(0, b""));
        body.extend(envelope(0, &[7; 60]));
        for cut in 0..=body.len() {
            for cut2 in cut..=body.len() {
                let parts = [&body[..cut], &body[cut..cut2], &body[cut2..]];
                assert_eq!(read_all(&parts, LIMITS).unwrap(), 3, "cuts {cut} {cut2}");
            }
        }
    }

    #[test]
    fn broken_bodies_are_named() {
        let body = envelope(0, b"hello");
        for cut in 1..body.len() {
            let err = read_all(&[&body[..cut]], LIMITS).unwrap_err();
            assert!(err.to_string().contains("ends inside message 1"), "{err}");
        }
        let err = read_all(&[&envelope(0, &[0; 101])], LIMITS).unwrap_err();
        assert!(
            matches!(err, EdgeError::PayloadTooLarge { limit: 100 }),
            "{err:?}"
        );
        let two = [envelope(0, &[0; 80]), envelope(0, &[0; 80])].concat();
        let err = read_all(&[&two], LIMITS).unwrap_err();
        assert!(
            matches!(err, EdgeError::PayloadTooLarge { limit: 150 }),
            "{err:?}"
        );
        let err = read_all(&[&envelope(2, b"x")], LIMITS).unwrap_err();
        assert!(err.to_string().contains("flags byte 0x02"), "{err}");
        let err = read_all(&[&envelope(1, b"x")], LIMITS).unwrap_err();
        assert!(err.to_string().contains("no grpc-encoding"), "{err}");
        let encoded = Limits {
            encoded: true,
            ..LIMITS
        };
        assert_eq!(read_all(&[&envelope(1, b"x")], encoded).unwrap(), 1);
    }

    #[test]
    fn text_decodes_across_chunks_and_padded_runs() {
        let a = envelope(0, b"first message");
        let b = envelope(0, b"second");
        // Two separately padded runs, as some clients send one per message.
        let text = [TEXT.encode(&a), TEXT.encode(&b)].concat();
        let want = [a.clone(), b.clone()].concat();
        for cut in 0..=text.len() {
            let mut pending = BytesMut::new();
            let mut got = decode_text(&mut pending, &text.as_bytes()[..cut])
                .unwrap()
                .to_vec();
            got.extend(decode_text(&mut pending, &text.as_bytes()[cut..]).unwrap());
            assert!(pending.is_empty());
            assert_eq!(got, want, "cut {cut}");
        }
        let mut pending = BytesMut::new();
        let err = decode_text(&mut pending, b"AAA*").unwrap_err();
        assert!(err.to_string().contains("not base64"), "{err}");
    }

    #[test]
    fn text_answers_are_one_base64_run() {
        let data: Vec<u8> = (0..=255).collect();
        for cut in 0..=100 {
            let mut out = TextOut::default();
            let mut text = out.data(&data[..cut]).to_vec();
            text.extend(out.data(&data[cut..100]));
            text.extend(out.end(&data[100..]));
            assert_eq!(TEXT.decode(&text).unwrap(), data, "cut {cut}");
        }
    }
}
