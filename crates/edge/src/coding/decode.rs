//! Request bodies sent with `Content-Encoding`: decoded as they arrive by [`Decoded`], a body
//! wrapper in front of every reader (`read_limited`, the request-stream pump), so the size
//! limits apply to decoded bytes and a small bomb is refused after `limit` bytes of output,
//! whatever one chunk would have expanded to.

use std::io::{self, Write};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::HeaderMap;
use http::header::CONTENT_ENCODING;
use http_body::{Body, Frame, SizeHint};

use super::Coding;
use crate::error::EdgeError;

/// The coding of a request body by its `Content-Encoding`: `None` for none or `identity`;
/// 415 naming a coding the gateway cannot decode, or more than one (stacked codings).
pub(crate) fn request_coding(headers: &HeaderMap) -> Result<Option<Coding>, EdgeError> {
    let mut found = None;
    for value in headers.get_all(CONTENT_ENCODING) {
        let text = value.to_str().map_err(|_| {
            EdgeError::UnsupportedMediaType("content-encoding is not visible ASCII".into())
        })?;
        for token in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            if token.eq_ignore_ascii_case("identity") {
                continue;
            }
            let Some(coding) = Coding::parse(token) else {
                return Err(EdgeError::UnsupportedMediaType(format!(
                    "content-encoding {token:?} is not supported; send gzip, br, zstd, deflate or identity"
                )));
            };
            if found.replace(coding).is_some() {
                return Err(EdgeError::UnsupportedMediaType(format!(
                    "content-encoding {text:?} stacks codings; send one of gzip, br, zstd, deflate"
                )));
            }
        }
    }
    Ok(found)
}

/// Why a compressed body could not be read.
#[derive(Debug)]
pub(crate) enum DecodeError {
    /// The decoded body went past the limit.
    TooLarge { limit: usize },
    /// The bytes are not valid data of the coding (or end inside it).
    Corrupt { coding: Coding, reason: String },
    /// The body itself failed (the client left, broken framing).
    Body(Box<dyn std::error::Error + Send + Sync>),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::TooLarge { limit } => {
                write!(f, "the decoded request body is over {limit} bytes")
            }
            DecodeError::Corrupt { coding, reason } => write!(
                f,
                "the request body is not valid {} data: {reason}",
                coding.as_str()
            ),
            DecodeError::Body(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for DecodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DecodeError::Body(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}

impl DecodeError {
    /// The client's error this is, when it is one of decoding (not of the body beneath).
    pub(crate) fn edge_error(&self) -> Option<EdgeError> {
        match self {
            DecodeError::TooLarge { limit } => Some(EdgeError::PayloadTooLarge { limit: *limit }),
            DecodeError::Corrupt { .. } => Some(EdgeError::BadRequest(self.to_string())),
            DecodeError::Body(_) => None,
        }
    }
}

/// Where a decoder writes: the output not yet handed on, refused past `limit` bytes in all.
struct Output {
    buf: Vec<u8>,
    total: usize,
    limit: usize,
    over: bool,
}

impl Write for Output {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if self.total + data.len() > self.limit {
            self.over = true;
            return Err(io::Error::other("over the limit"));
        }
        self.total += data.len();
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

enum Codec {
    Gzip(flate2::write::GzDecoder<Output>),
    Deflate(flate2::write::ZlibDecoder<Output>),
    Br(Box<brotli::DecompressorWriter<Output>>),
    /// zstd's raw decoder: its hint tells whether the input ended inside a frame, which the
    /// writer does not.
    Zstd(Box<zstd::stream::raw::Decoder<'static>>, Output, usize),
}

impl Codec {
    fn new(coding: Coding, limit: usize) -> io::Result<Codec> {
        let out = Output {
            buf: Vec::new(),
            total: 0,
            limit,
            over: false,
        };
        Ok(match coding {
            Coding::Gzip => Codec::Gzip(flate2::write::GzDecoder::new(out)),
            Coding::Deflate => Codec::Deflate(flate2::write::ZlibDecoder::new(out)),
            Coding::Br => Codec::Br(Box::new(brotli::DecompressorWriter::new(out, 4096))),
            Coding::Zstd => Codec::Zstd(Box::new(zstd::stream::raw::Decoder::new()?), out, 0),
        })
    }

    fn output(&mut self) -> &mut Output {
        match self {
            Codec::Gzip(d) => d.get_mut(),
            Codec::Deflate(d) => d.get_mut(),
            Codec::Br(d) => d.get_mut(),
            Codec::Zstd(_, out, _) => out,
        }
    }

    fn write(&mut self, mut data: &[u8]) -> io::Result<()> {
        match self {
            Codec::Gzip(d) => d.write_all(data),
            Codec::Deflate(d) => d.write_all(data),
            Codec::Br(d) => d.write_all(data),
            Codec::Zstd(d, out, hint) => {
                use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
                let mut chunk = [0u8; 16 * 1024];
                // Until every input byte is taken and the decoder has nothing more to give.
                loop {
                    let mut input = InBuffer::around(data);
                    let mut output = OutBuffer::around(&mut chunk[..]);
                    *hint = d.run(&mut input, &mut output)?;
                    let (taken, produced) = (input.pos(), output.pos());
                    out.write_all(&chunk[..produced])?;
                    data = &data[taken..];
                    if data.is_empty() && produced < chunk.len() {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// The input ended: checks that it ended where the coding's data does.
    fn finish(&mut self) -> io::Result<()> {
        let truncated = || io::Error::new(io::ErrorKind::UnexpectedEof, "the data ends early");
        match self {
            Codec::Gzip(d) => d.try_finish(),
            Codec::Deflate(d) => d.try_finish(),
            Codec::Br(d) => d.close(),
            Codec::Zstd(_, _, hint) if *hint != 0 => Err(truncated()),
            Codec::Zstd(..) => Ok(()),
        }
    }
}

/// One compressed message (a Connect stream's, flagged so in its envelope) decoded whole,
/// refused past `limit` decoded bytes, as a body is.
pub(crate) fn decode_message(
    coding: Coding,
    data: &[u8],
    limit: usize,
) -> Result<Vec<u8>, EdgeError> {
    let corrupt = |e: io::Error| {
        DecodeError::Corrupt {
            coding,
            reason: e.to_string(),
        }
        .edge_error()
        .unwrap_or_else(|| EdgeError::BadRequest(e.to_string()))
    };
    let mut codec = Codec::new(coding, limit).map_err(corrupt)?;
    let written = codec.write(data).and_then(|()| codec.finish());
    if codec.output().over {
        return Err(EdgeError::PayloadTooLarge { limit });
    }
    written.map_err(corrupt)?;
    Ok(std::mem::take(&mut codec.output().buf))
}

/// A request body decoded from its content coding as it arrives, or passed through as it is
/// (with its size hint) when it has none.
pub(crate) struct Decoded<B> {
    inner: B,
    codec: Option<(Coding, Codec)>,
    /// The decoded data has ended (and was checked complete).
    done: bool,
    /// A frame of trailers held while the decoded data's end goes first.
    trailers: Option<HeaderMap>,
}

impl<B> Decoded<B> {
    /// `limit`: the most decoded bytes the body may have.
    pub(crate) fn new(inner: B, coding: Option<Coding>, limit: usize) -> Result<Self, EdgeError> {
        let codec = coding
            .map(|c| Codec::new(c, limit).map(|codec| (c, codec)))
            .transpose()
            .map_err(|e| EdgeError::Internal(format!("a decoder could not be made: {e}")))?;
        Ok(Decoded {
            inner,
            codec,
            done: false,
            trailers: None,
        })
    }
}

impl<B> Decoded<B> {
    fn failed(&mut self, coding: Coding, e: io::Error) -> DecodeError {
        self.done = true;
        let Some((_, codec)) = self.codec.as_mut() else {
            return DecodeError::Body(Box::new(e));
        };
        let out = codec.output();
        if out.over {
            DecodeError::TooLarge { limit: out.limit }
        } else {
            DecodeError::Corrupt {
                coding,
                reason: e.to_string(),
            }
        }
    }
}

impl<B> Body for Decoded<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    type Data = Bytes;
    type Error = DecodeError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, DecodeError>>> {
        let this = &mut *self;
        let Some((coding, _)) = this.codec else {
            return Pin::new(&mut this.inner)
                .poll_frame(cx)
                .map_err(|e| DecodeError::Body(Box::new(e)));
        };
        loop {
            if this.done {
                return Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t))));
            }
            // A chunk to decode, or `None`: the end (trailers end a body too).
            let data = match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(e))) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(DecodeError::Body(Box::new(e)))));
                }
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => Some(data),
                    Err(frame) => {
                        this.trailers = frame.into_trailers().ok();
                        None
                    }
                },
                Poll::Ready(None) => None,
            };
            let Some((_, codec)) = this.codec.as_mut() else {
                continue;
            };
            // At the end, the decoder must agree the data is complete.
            let step = match &data {
                Some(data) => codec.write(data),
                None => codec.finish(),
            };
            if let Err(e) = step {
                return Poll::Ready(Some(Err(this.failed(coding, e))));
            }
            let out = std::mem::take(&mut codec.output().buf);
            this.done = data.is_none();
            if !out.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self.codec {
            None => self.inner.is_end_stream(),
            Some(_) => self.done && self.trailers.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self.codec {
            // The announced length is the encoded one: the decoded size is not known.
            None => self.inner.size_hint(),
            Some(_) => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;
    use http_body_util::{BodyExt, Full, StreamBody};

    use super::super::Level;
    use super::super::encode::compress;
    use super::*;

    fn body(
        chunks: Vec<Bytes>,
    ) -> impl Body<Data = Bytes, Error = std::convert::Infallible> + Unpin {
        StreamBody::new(futures_util::stream::iter(
            chunks.into_iter().map(|c| Ok(Frame::data(c))),
        ))
    }

    async fn decode_all(
        chunks: Vec<Bytes>,
        coding: Option<Coding>,
        limit: usize,
    ) -> Result<Vec<u8>, DecodeError> {
        let mut d = Decoded::new(body(chunks), coding, limit).unwrap();
        let mut out = Vec::new();
        while let Some(frame) = d.frame().await {
            if let Ok(data) = frame?.into_data() {
                out.extend_from_slice(&data);
            }
        }
        Ok(out)
    }

    /// A compressed body split into chunks of `size`.
    fn split(data: &[u8], size: usize) -> Vec<Bytes> {
        data.chunks(size).map(Bytes::copy_from_slice).collect()
    }

    #[tokio::test]
    async fn every_coding_decodes_in_any_chunking() {
        let data = br#"{"sku":"A-1","qty":2}"#.repeat(2000);
        for coding in Coding::ALL {
            let compressed = compress(&data, coding, Level::Default).unwrap();
            for size in [1, 7, 1000, compressed.len()] {
                let out = decode_all(split(&compressed, size), Some(coding), data.len())
                    .await
                    .unwrap();
                assert_eq!(out, data, "{coding:?} in chunks of {size}");
            }
        }
    }

    #[tokio::test]
    async fn a_bomb_is_refused_at_the_limit() {
        // 10 MB of zeros: tens of KB or less compressed.
        let data = vec![0u8; 10_000_000];
        for coding in Coding::ALL {
            let compressed = compress(&data, coding, Level::Default).unwrap();
            assert!(
                compressed.len() < 20_000,
                "{coding:?}: {}",
                compressed.len()
            );
            let r = decode_all(vec![compressed], Some(coding), 1_000_000).await;
            assert!(
                matches!(r, Err(DecodeError::TooLarge { limit: 1_000_000 })),
                "{coding:?}: {r:?}"
            );
        }
    }

    #[tokio::test]
    async fn truncated_or_corrupt_data_is_refused() {
        let data = br#"{"sku":"A-1","qty":2}"#.repeat(100);
        for coding in Coding::ALL {
            let compressed = compress(&data, coding, Level::Default).unwrap();
            let cut = compressed.slice(..compressed.len() - 3);
            let r = decode_all(vec![cut], Some(coding), 1 << 20).await;
            assert!(
                matches!(r, Err(DecodeError::Corrupt { .. })),
                "{coding:?} truncated: {r:?}"
            );
            let r = decode_all(
                vec![Bytes::from_static(b"not compressed at all")],
                Some(coding),
                1 << 20,
            )
            .await;
            assert!(
                matches!(r, Err(DecodeError::Corrupt { .. })),
                "{coding:?} garbage: {r:?}"
            );
        }
    }

    #[tokio::test]
    async fn identity_passes_through_with_its_length() {
        let d = Decoded::new(Full::new(Bytes::from_static(b"abc")), None, 10).unwrap();
        assert_eq!(d.size_hint().exact(), Some(3));
        assert_eq!(&d.collect().await.unwrap().to_bytes()[..], b"abc");
    }

    #[test]
    fn content_encoding_is_read_or_refused_by_name() {
        let coding = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(CONTENT_ENCODING, HeaderValue::from_str(v).unwrap());
            request_coding(&h)
        };
        assert_eq!(request_coding(&HeaderMap::new()).unwrap(), None);
        assert_eq!(coding("identity").unwrap(), None);
        assert_eq!(coding("GZIP").unwrap(), Some(Coding::Gzip));
        assert_eq!(coding("br").unwrap(), Some(Coding::Br));
        assert_eq!(coding("identity, zstd").unwrap(), Some(Coding::Zstd));
        let e = coding("compress").unwrap_err().to_string();
        assert!(e.contains("\"compress\""), "{e}");
        let e = coding("gzip, br").unwrap_err().to_string();
        assert!(e.contains("stacks"), "{e}");
    }
}
