//! Compressing answers: a whole answer at once ([`compress`]), a stream frame by frame, each
//! flushed so the client can decode every message as soon as it is sent ([`compress_stream`]).

use std::io::{self, Write};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_core::Stream;
use http_body::Frame;

use super::{Coding, Level};

/// One codec writing into a buffer the caller empties after each flush.
pub(crate) enum Encoder {
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    Deflate(flate2::write::ZlibEncoder<Vec<u8>>),
    Br(Box<brotli::CompressorWriter<Vec<u8>>>),
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
}

impl Encoder {
    pub(crate) fn new(coding: Coding, level: Level) -> io::Result<Encoder> {
        let n = level.for_coding(coding);
        Ok(match coding {
            Coding::Gzip => Encoder::Gzip(flate2::write::GzEncoder::new(
                Vec::new(),
                flate2::Compression::new(n),
            )),
            Coding::Deflate => Encoder::Deflate(flate2::write::ZlibEncoder::new(
                Vec::new(),
                flate2::Compression::new(n),
            )),
            // A 4 KiB working buffer; a 4 MiB window (lgwin 22, brotli's default).
            Coding::Br => Encoder::Br(Box::new(brotli::CompressorWriter::new(
                Vec::new(),
                4096,
                n,
                22,
            ))),
            Coding::Zstd => Encoder::Zstd(zstd::stream::write::Encoder::new(Vec::new(), n as i32)?),
        })
    }

    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Encoder::Gzip(e) => e,
            Encoder::Deflate(e) => e,
            Encoder::Br(e) => e.as_mut(),
            Encoder::Zstd(e) => e,
        }
    }

    fn output(&mut self) -> &mut Vec<u8> {
        match self {
            Encoder::Gzip(e) => e.get_mut(),
            Encoder::Deflate(e) => e.get_mut(),
            Encoder::Br(e) => e.get_mut(),
            Encoder::Zstd(e) => e.get_mut(),
        }
    }

    /// Compresses `data` and flushes: the bytes that make everything written so far
    /// decodable.
    pub(crate) fn write_flushed(&mut self, data: &[u8]) -> io::Result<Bytes> {
        let w = self.writer();
        w.write_all(data)?;
        w.flush()?;
        Ok(Bytes::from(std::mem::take(self.output())))
    }

    /// `data` compressed whole, by a new encoder.
    pub(crate) fn whole(mut self, data: &[u8]) -> io::Result<Bytes> {
        self.writer().write_all(data)?;
        self.finish()
    }

    /// Ends the compressed stream: its last bytes.
    pub(crate) fn finish(self) -> io::Result<Bytes> {
        let out = match self {
            Encoder::Gzip(e) => e.finish()?,
            Encoder::Deflate(e) => e.finish()?,
            Encoder::Br(e) => e.into_inner(),
            Encoder::Zstd(e) => e.finish()?,
        };
        Ok(Bytes::from(out))
    }
}

/// `data` compressed whole.
#[cfg(test)]
pub(crate) fn compress(data: &[u8], coding: Coding, level: Level) -> io::Result<Bytes> {
    Encoder::new(coding, level)?.whole(data)
}

/// A stream of answer frames compressed: every data frame is compressed and flushed as one
/// frame (so a stream stays live message by message), the end of the compressed data goes
/// before the trailers. A codec failure (it has none with an in-memory buffer but an
/// allocation failure) ends the body early: the client sees a truncated answer, as if the
/// connection broke.
pub(crate) fn compress_stream<S>(frames: S, encoder: Encoder) -> CompressedStream<S>
where
    S: Stream<Item = Frame<Bytes>> + Send + Unpin,
{
    CompressedStream {
        frames,
        encoder: Some(encoder),
        trailers: None,
    }
}

pub(crate) struct CompressedStream<S> {
    frames: S,
    /// `None` once the compressed data has ended.
    encoder: Option<Encoder>,
    /// Trailers waiting for the compressed data's last bytes to go first.
    trailers: Option<Frame<Bytes>>,
}

impl<S> Stream for CompressedStream<S>
where
    S: Stream<Item = Frame<Bytes>> + Send + Unpin,
{
    type Item = Frame<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Frame<Bytes>>> {
        let this = &mut *self;
        loop {
            let Some(encoder) = this.encoder.as_mut() else {
                return Poll::Ready(this.trailers.take());
            };
            let frame = match Pin::new(&mut this.frames).poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(frame) => frame,
            };
            match frame.map(Frame::into_data) {
                Some(Ok(data)) => match encoder.write_flushed(&data) {
                    Ok(out) if out.is_empty() => continue,
                    Ok(out) => return Poll::Ready(Some(Frame::data(out))),
                    Err(error) => {
                        tracing::warn!(%error, "compressing a streamed answer failed");
                        this.encoder = None;
                        return Poll::Ready(None);
                    }
                },
                end => {
                    // Trailers, or the end: the compressed data ends first.
                    this.trailers = end.and_then(Result::err);
                    let Some(encoder) = this.encoder.take() else {
                        continue;
                    };
                    match encoder.finish() {
                        Ok(out) if !out.is_empty() => return Poll::Ready(Some(Frame::data(out))),
                        Ok(_) => continue,
                        Err(error) => {
                            tracing::warn!(%error, "ending a compressed streamed answer failed");
                            return Poll::Ready(None);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use futures_util::StreamExt;

    use super::*;

    pub(crate) fn decompress(data: &[u8], coding: Coding) -> Vec<u8> {
        let mut out = Vec::new();
        match coding {
            Coding::Gzip => flate2::read::GzDecoder::new(data)
                .read_to_end(&mut out)
                .unwrap(),
            Coding::Deflate => flate2::read::ZlibDecoder::new(data)
                .read_to_end(&mut out)
                .unwrap(),
            Coding::Br => brotli::Decompressor::new(data, 4096)
                .read_to_end(&mut out)
                .unwrap(),
            Coding::Zstd => zstd::stream::read::Decoder::new(data)
                .unwrap()
                .read_to_end(&mut out)
                .unwrap(),
        };
        out
    }

    #[test]
    fn every_coding_round_trips() {
        let data = br#"{"items":[{"sku":"A-1","qty":2},{"sku":"A-2","qty":3}]}"#.repeat(50);
        for coding in Coding::ALL {
            for level in [
                Level::Fastest,
                Level::Default,
                Level::Best,
                Level::Precise(5),
            ] {
                let c = compress(&data, coding, level).unwrap();
                assert!(
                    c.len() < data.len() / 4,
                    "{coding:?} {level:?}: {}",
                    c.len()
                );
                assert_eq!(decompress(&c, coding), data, "{coding:?} {level:?}");
            }
        }
    }

    /// Each frame's output alone decodes to everything sent so far: the client reads each
    /// message as it arrives, not when the stream ends.
    #[tokio::test]
    async fn a_stream_is_decodable_after_every_frame() {
        for coding in Coding::ALL {
            let messages: Vec<Bytes> = (0..5)
                .map(|i| Bytes::from(format!("{{\"n\":{i},\"pad\":\"{}\"}}\n", "x".repeat(100))))
                .collect();
            let mut frames: Vec<Frame<Bytes>> = messages.iter().cloned().map(Frame::data).collect();
            let mut trailers = http::HeaderMap::new();
            trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
            frames.push(Frame::trailers(trailers.clone()));
            let encoder = Encoder::new(coding, Level::Default).unwrap();
            let mut stream = compress_stream(futures_util::stream::iter(frames), encoder);
            let mut wire = Vec::new();
            let mut expected = Vec::new();
            for message in &messages {
                let frame = stream.next().await.unwrap();
                wire.extend_from_slice(frame.data_ref().unwrap());
                expected.extend_from_slice(message);
                assert_eq!(partial(&wire, coding), expected, "{coding:?}");
            }
            // The compressed data's end, then the trailers, then nothing.
            let last = stream.next().await.unwrap();
            wire.extend_from_slice(last.data_ref().unwrap());
            assert_eq!(decompress(&wire, coding), expected, "{coding:?}");
            assert_eq!(stream.next().await.unwrap().trailers_ref(), Some(&trailers));
            assert!(stream.next().await.is_none());
        }
    }

    /// Decodes what a stream sent so far (which has no end yet).
    fn partial(data: &[u8], coding: Coding) -> Vec<u8> {
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        let mut reader: Box<dyn Read> = match coding {
            Coding::Gzip => Box::new(flate2::read::GzDecoder::new(data)),
            Coding::Deflate => Box::new(flate2::read::ZlibDecoder::new(data)),
            Coding::Br => Box::new(brotli::Decompressor::new(data, 4096)),
            Coding::Zstd => Box::new(zstd::stream::read::Decoder::new(data).unwrap()),
        };
        // Reads until the decoder wants bytes that have not come yet.
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        out
    }
}
