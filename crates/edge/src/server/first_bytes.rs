//! A connection's first bytes, read under the header timeout before hyper sees them: hyper's
//! own head timer starts only once hyper-util has read enough to tell HTTP/1.1 from HTTP/2,
//! so a client that sends nothing, or part of HTTP/2's preface, would hold its connection for
//! ever. The bytes read are handed to hyper first ([`Replayed`]): nothing is peeked twice and
//! nothing waits on a timer.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

/// HTTP/2's connection preface; a connection whose first bytes could still be it is not yet
/// known to be HTTP/1.1.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Reads until the first bytes tell HTTP/1.1 from HTTP/2 (the whole preface, or a byte that
/// differs from it); the connection with those bytes put back. An error if the client closes
/// before sending anything.
pub(super) async fn read<T: AsyncRead + Unpin>(mut io: T) -> io::Result<Replayed<T>> {
    let mut first = [0u8; H2_PREFACE.len()];
    let mut len = 0;
    while len < first.len() && first[..len] == H2_PREFACE[..len] {
        let n = io.read(&mut first[len..]).await?;
        if n == 0 {
            if len == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            // Part of a preface, then the end: hyper reads the end and says so.
            break;
        }
        len += n;
    }
    Ok(Replayed {
        first,
        len,
        at: 0,
        io,
    })
}

/// A connection whose first bytes were already read: they are read again first.
pub(super) struct Replayed<T> {
    first: [u8; H2_PREFACE.len()],
    len: usize,
    /// How many of the first bytes have been read again.
    at: usize,
    io: T,
}

impl<T> Replayed<T> {
    /// Whether the first bytes are HTTP/2's preface.
    pub(super) fn is_h2(&self) -> bool {
        self.first[..self.len] == *H2_PREFACE
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Replayed<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.at < self.len {
            let n = (self.len - self.at).min(buf.remaining());
            let at = self.at;
            buf.put_slice(&self.first[at..at + n]);
            self.at += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Replayed<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// What `read` takes and what is read back afterwards, for inputs written in pieces.
    async fn through(pieces: &[&[u8]]) -> (usize, Vec<u8>) {
        let (mut client, server) = tokio::io::duplex(64);
        let all: Vec<u8> = pieces.concat();
        let pieces: Vec<Vec<u8>> = pieces.iter().map(|p| p.to_vec()).collect();
        let writer = tokio::spawn(async move {
            for p in pieces {
                client.write_all(&p).await.unwrap();
                tokio::task::yield_now().await;
            }
        });
        let mut replayed = read(server).await.unwrap();
        let taken = replayed.len;
        let mut back = vec![0u8; all.len()];
        replayed.read_exact(&mut back).await.unwrap();
        writer.await.unwrap();
        assert_eq!(back, all);
        (taken, back)
    }

    #[tokio::test]
    async fn the_first_bytes_are_read_again_whole() {
        // HTTP/1.1: one byte that differs from the preface is enough.
        let (taken, _) = through(&[b"GET / HTTP/1.1\r\n\r\n"]).await;
        assert!(taken >= 1);
        // HTTP/2: the preface, even in pieces, then frames.
        let (taken, _) =
            through(&[b"PRI * HT", b"TP/2.0\r\n", b"\r\nSM\r\n\r\n", b"\0\0\0\x04"]).await;
        assert_eq!(taken, H2_PREFACE.len());
        // A request that starts like the preface, then is not it.
        let (taken, _) = through(&[b"PRI", b"VATE / HTTP/1.1\r\n\r\n"]).await;
        assert!((4..=H2_PREFACE.len()).contains(&taken));
    }

    #[tokio::test]
    async fn a_client_that_closes_at_once_is_an_error() {
        let (client, server) = tokio::io::duplex(64);
        drop(client);
        assert!(read(server).await.is_err());
    }
}
