//! The cleartext data path through the kernel (`drsftp_sys::zerocopy`): a sender `sendfile`s file ranges into
//! its TCP socket instead of writing them from a user-space buffer, a receiver `splice`s socket bytes through a
//! pipe into the file at their offset instead of reading them into a buffer and writing that. Verification
//! stays as strong: the sender CRC32Cs the bytes it read for the range just before sending it (a file changed in
//! between makes the end-to-end check fail, never pass), the receiver CRC32Cs what it reads back from the file
//! just written (cache-hot), so the check covers the bytes that really are in the destination.
//!
//! Used only where it applies: cleartext sockets (TLS stays on the copying path) and handles with a host file
//! descriptor; a file system without `splice`/`sendfile` support (EINVAL/ENOSYS) falls back to copying for the
//! rest of the transfer.
//!
//! Off unless `DataOpts::zero_copy` asks for it; the binary (`drsftp serve`, `drsftp copy`) sets that from
//! `DRSFTP_ZERO_COPY=1` (`send` / `recv`: one direction only). Off by default because on the 2-core loopback
//! benchmark (docs/bench/loopback.md) neither direction paid. `sendfile` saves the sender ~25 % of its CPU, but
//! the receiver on the same host then copies out of the source's page-cache pages instead of the freshly written
//! socket buffers, which cost it 30-45 % more CPU, and the receiver is the end that limits the rate; `splice`
//! into tmpfs still copies once, and the CRC's read-back costs what the socket read saved.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use drsftp_sys::zerocopy::{self as sys, SplicePipe};
use tokio::io::Interest;
use tokio::net::TcpStream;

use super::DataError;

/// Which directions of the stream-mode data path go through the kernel (`DataOpts::zero_copy`). It travels in
/// the options rather than living in a process-wide switch so that each transfer (and each test) picks its own
/// path; the binary sets it once from `DRSFTP_ZERO_COPY` ([`ZeroCopy::from_env`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ZeroCopy {
    /// Senders `sendfile` (see the module docs).
    pub send: bool,
    /// Receivers `splice` (see the module docs).
    pub recv: bool,
}

impl ZeroCopy {
    /// Both directions copy through user space (the default, see the module docs for why).
    pub const OFF: ZeroCopy = ZeroCopy {
        send: false,
        recv: false,
    };
    /// Both directions go through the kernel.
    pub const BOTH: ZeroCopy = ZeroCopy {
        send: true,
        recv: true,
    };

    /// A `DRSFTP_ZERO_COPY` value: `1`/`yes`/`on`/`true` both ways, `send` or `recv` one way, anything else off.
    pub fn parse(value: &str) -> ZeroCopy {
        match value.trim().to_ascii_lowercase().as_str() {
            "1" | "yes" | "on" | "true" => ZeroCopy::BOTH,
            "send" => ZeroCopy {
                send: true,
                recv: false,
            },
            "recv" => ZeroCopy {
                send: false,
                recv: true,
            },
            _ => ZeroCopy::OFF,
        }
    }

    /// What `DRSFTP_ZERO_COPY` asks for (unset: off).
    pub fn from_env() -> ZeroCopy {
        ZeroCopy::parse(&std::env::var("DRSFTP_ZERO_COPY").unwrap_or_default())
    }
}

/// How a kernel-side send ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Sent {
    /// Header and payload are queued on the socket.
    All,
    /// The file cannot be `sendfile`d (EINVAL/ENOSYS): the header and the first `done` payload bytes went, the
    /// caller sends the rest from its buffer and stops using this path.
    Unsupported { done: usize },
}

/// Queues `head` (with `MSG_MORE`: it leaves in the payload's first segment) and then `len` bytes of `file` from
/// `at` on `tcp`, waiting for room as needed. A file that ends before `at + len` (truncated since the caller read
/// the range) is an `UnexpectedEof` error: the peer must never see a silently short block.
pub(crate) async fn send_file(
    tcp: &TcpStream,
    file: BorrowedFd<'_>,
    head: &[u8],
    at: u64,
    len: usize,
) -> io::Result<Sent> {
    let sock = tcp.as_fd();
    let mut h = 0;
    while h < head.len() {
        h += tcp
            .async_io(Interest::WRITABLE, || sys::send_more(sock, &head[h..]))
            .await?;
    }
    let mut done = 0;
    while done < len {
        let r = tcp
            .async_io(Interest::WRITABLE, || {
                sys::sendfile(sock, file, at + done as u64, len - done)
            })
            .await;
        match r {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                    "the file ended at {} while sending {at}..{} (truncated during the transfer?)",
                    at + done as u64,
                    at + len as u64
                ),
                ))
            }
            Ok(n) => done += n,
            Err(e) if sys::unsupported(&e) => return Ok(Sent::Unsupported { done }),
            Err(e) => return Err(e),
        }
    }
    Ok(Sent::All)
}

/// A file-side error of a splice, as the copying path would report it.
fn file_error(e: io::Error) -> DataError {
    DataError::Storage(drsftp_storage::StorageError::from_io("data file", e))
}

/// A receiver's pipe: socket bytes go in, then out into the file at their offset.
#[derive(Debug)]
pub(crate) struct SpliceIn {
    pipe: SplicePipe,
}

impl SpliceIn {
    /// A pipe of about `want` bytes (see [`SplicePipe::new`]).
    pub(crate) fn new(want: usize) -> io::Result<Self> {
        Ok(SpliceIn {
            pipe: SplicePipe::new(want)?,
        })
    }

    /// Bytes one fill may take.
    pub(crate) fn capacity(&self) -> usize {
        self.pipe.capacity()
    }

    /// Waits for bytes on `tcp` and moves up to `max` of them into the (empty) pipe; 0 when the peer has closed.
    pub(crate) async fn fill(&self, tcp: &TcpStream, max: usize) -> io::Result<usize> {
        let sock = tcp.as_fd();
        tcp.async_io(Interest::READABLE, || self.pipe.fill_from(sock, max))
            .await
    }

    /// Moves up to `max` more bytes into a pipe that already holds some, without waiting: `None` when nothing
    /// moved. `EAGAIN` here may mean a full pipe (its slots hold page pieces, so it can fill before `capacity`
    /// bytes) rather than an empty socket, so it must not clear the socket's readiness: a plain call, outside
    /// tokio's readiness tracking (a wrongly cleared readiness would wait for data that is already there).
    pub(crate) fn top_up(&self, tcp: &TcpStream, max: usize) -> io::Result<Option<usize>> {
        match self.pipe.fill_from(tcp.as_fd(), max) {
            Ok(n) => Ok(Some(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Moves the `len` bytes the pipe holds into `file` at `at`. On a file system that cannot take spliced
    /// bytes (EINVAL/ENOSYS) the rest is read out of the pipe into `buf` and written with `write` instead, and
    /// `Ok(false)` says to stop splicing.
    pub(crate) fn drain(
        &self,
        file: BorrowedFd<'_>,
        at: u64,
        len: usize,
        buf: &mut [u8],
        write: impl Fn(&[u8], u64) -> Result<(), DataError>,
    ) -> Result<bool, DataError> {
        let mut done = 0;
        while done < len {
            match self.pipe.to_file(file, at + done as u64, len - done) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero).into()),
                Ok(n) => done += n,
                Err(e) if sys::unsupported(&e) => {
                    while done < len {
                        let want = (len - done).min(buf.len());
                        let n = self.pipe.read(&mut buf[..want])?;
                        if n == 0 {
                            return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
                        }
                        write(&buf[..n], at + done as u64)?;
                        done += n;
                    }
                    return Ok(false);
                }
                // ENOSPC and friends keep their storage meaning (452, not 426).
                Err(e) => return Err(file_error(e)),
            }
        }
        Ok(true)
    }
}
