//! Where a sender's blocks go: [`BlockSink`] lets the data engine read a block straight into the record slots of
//! a TLS data connection ([`crate::tls::Records`]) and seal it there, and plain writes everywhere else; and
//! [`Shared`], the two halves of one connection polled by one task (MODE E with in-band SBUF reads requests while
//! it writes data), which keeps the connection's own type so its sealing stays reachable (tokio's `split` would
//! hide it behind `AsyncWrite`).

use std::io;
use std::ops::Range;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll};

use drsftp_proto::tls_records::RecordShape;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::crc::CrcPieces;
use crate::tls::MaybeTls;

/// A sender's connection (or its write half).
pub(crate) trait BlockSink: AsyncWrite + Unpin {
    /// The layout to read blocks into when this connection seals records in place; `None`: write plain bytes.
    fn shape(&self) -> Option<RecordShape>;
    /// Seals and queues a block laid out by [`BlockSink::shape`] (plaintext bytes `0..plain`); returns a buffer for
    /// the next block. Only called when `shape` is `Some`.
    fn poll_seal_shaped(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut Option<Vec<u8>>,
        plain: usize,
    ) -> Poll<io::Result<Vec<u8>>>;
}

fn not_shaped() -> io::Error {
    io::Error::other("this connection does not seal records in place")
}

impl BlockSink for MaybeTls {
    fn shape(&self) -> Option<RecordShape> {
        match self {
            MaybeTls::Records(r) => Some(r.shape()),
            MaybeTls::Plain(_) | MaybeTls::Tls(_) => None,
        }
    }

    fn poll_seal_shaped(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut Option<Vec<u8>>,
        plain: usize,
    ) -> Poll<io::Result<Vec<u8>>> {
        match self {
            MaybeTls::Records(r) => r.poll_seal_shaped(cx, buf, plain),
            MaybeTls::Plain(_) | MaybeTls::Tls(_) => Poll::Ready(Err(not_shaped())),
        }
    }
}

impl BlockSink for tokio::net::tcp::WriteHalf<'_> {
    fn shape(&self) -> Option<RecordShape> {
        None
    }

    fn poll_seal_shaped(
        &mut self,
        _: &mut Context<'_>,
        _: &mut Option<Vec<u8>>,
        _: usize,
    ) -> Poll<io::Result<Vec<u8>>> {
        Poll::Ready(Err(not_shaped()))
    }
}

impl<T: BlockSink + ?Sized> BlockSink for &mut T {
    fn shape(&self) -> Option<RecordShape> {
        (**self).shape()
    }

    fn poll_seal_shaped(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut Option<Vec<u8>>,
        plain: usize,
    ) -> Poll<io::Result<Vec<u8>>> {
        (**self).poll_seal_shaped(cx, buf, plain)
    }
}

/// Seals and sends `block` (see [`BlockSink::poll_seal_shaped`]); the returned buffer is at least `len` long.
pub(crate) async fn seal_block<W: BlockSink>(
    wr: &mut W,
    block: Vec<u8>,
    plain: usize,
    len: usize,
) -> io::Result<Vec<u8>> {
    let mut block = Some(block);
    let mut spare = std::future::poll_fn(|cx| wr.poll_seal_shaped(cx, &mut block, plain)).await?;
    if spare.len() < len {
        // Only while the buffers settle in (the layer's first send buffer, a short last block, a control record).
        spare.resize(len, 0);
    }
    Ok(spare)
}

/// Plaintext byte ranges `plain` of a block as buffer ranges: itself when contiguous, record slots when shaped.
pub(crate) fn block_ranges(
    shape: Option<RecordShape>,
    plain: Range<usize>,
) -> Box<dyn Iterator<Item = Range<usize>>> {
    match shape {
        Some(s) => Box::new(s.plain_ranges(plain)),
        None => Box::new(std::iter::once(plain)),
    }
}

/// Adds a block's file bytes (plaintext `plain` of `buf`, from file offset `off`) to a running CRC32C.
pub(crate) fn add_crc(
    crc: &mut CrcPieces,
    shape: Option<RecordShape>,
    buf: &[u8],
    plain: Range<usize>,
    mut off: u64,
) {
    for r in block_ranges(shape, plain) {
        let n = r.len() as u64;
        crc.add(off, &buf[r]);
        off += n;
    }
}

/// One connection shared by its read and write halves within one task (both are polled by the same task, so
/// the lock is never contended; it only makes the sharing safe).
#[derive(Debug)]
pub(crate) struct Shared(Mutex<MaybeTls>);

impl Shared {
    pub(crate) fn new(sock: MaybeTls) -> Self {
        Shared(Mutex::new(sock))
    }

    pub(crate) fn into_inner(self) -> MaybeTls {
        self.0.into_inner().unwrap_or_else(|p| p.into_inner())
    }

    /// A handle for one direction (any number may exist; each poll locks briefly).
    pub(crate) fn half(&self) -> Half<'_> {
        Half(&self.0)
    }
}

/// One direction of a [`Shared`] connection.
#[derive(Debug)]
pub(crate) struct Half<'a>(&'a Mutex<MaybeTls>);

impl Half<'_> {
    fn lock(&self) -> MutexGuard<'_, MaybeTls> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl AsyncRead for Half<'_> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.lock()).poll_read(cx, buf)
    }
}

impl AsyncWrite for Half<'_> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.lock()).poll_write(cx, b)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.lock()).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.lock()).poll_shutdown(cx)
    }
}

impl BlockSink for Half<'_> {
    fn shape(&self) -> Option<RecordShape> {
        self.lock().shape()
    }

    fn poll_seal_shaped(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut Option<Vec<u8>>,
        plain: usize,
    ) -> Poll<io::Result<Vec<u8>>> {
        self.lock().poll_seal_shaped(cx, buf, plain)
    }
}
