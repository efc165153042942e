//! Kernel-side copies for the cleartext data path: `sendfile` (file pages into a TCP socket without a trip
//! through user space), `send` with `MSG_MORE` (a MODE E header that waits for its payload), and a pipe with
//! `splice` (socket -> pipe -> file at an offset). All calls are non-blocking on the socket side: `WouldBlock`
//! comes back for the caller's readiness loop (tokio's `async_io`), `EINTR` is retried here.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use nix::errno::Errno;
use nix::fcntl::{fcntl, splice as nix_splice, FcntlArg, OFlag, SpliceFFlags};
use nix::sys::socket::{send, MsgFlags};

fn retry<T>(mut f: impl FnMut() -> nix::Result<T>) -> io::Result<T> {
    loop {
        match f() {
            Err(Errno::EINTR) => continue,
            r => return r.map_err(io::Error::from),
        }
    }
}

fn offset(at: u64) -> io::Result<i64> {
    i64::try_from(at).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// True for the errors that mean "this file system or socket does not do it": the caller falls back to copying.
pub fn unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP)
    )
}

/// `sendfile(2)`: up to `count` bytes of `file` from `at` into `sock`; returns the bytes queued (0 at end of
/// file; `WouldBlock` when the socket is full). The file's offset is not touched.
pub fn sendfile(
    sock: BorrowedFd<'_>,
    file: BorrowedFd<'_>,
    at: u64,
    count: usize,
) -> io::Result<usize> {
    let start = offset(at)?;
    retry(|| {
        let mut off = start;
        nix::sys::sendfile::sendfile64(sock, file, Some(&mut off), count)
    })
}

/// `send(2)` with `MSG_MORE`: the bytes wait in the socket for what follows (a MODE E header before its
/// `sendfile`d payload goes out in the payload's first segment, not a 17-byte one of its own).
pub fn send_more(sock: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    retry(|| {
        send(
            sock.as_raw_fd(),
            buf,
            MsgFlags::from_bits_retain(libc::MSG_MORE)
                | MsgFlags::MSG_DONTWAIT
                | MsgFlags::MSG_NOSIGNAL,
        )
    })
}

/// A pipe for `splice`: socket -> pipe -> file. Both ends are non-blocking (the socket side is driven by
/// readiness; the file side only ever moves what the pipe already holds).
#[derive(Debug)]
pub struct SplicePipe {
    rd: OwnedFd,
    wr: OwnedFd,
    cap: usize,
}

impl SplicePipe {
    /// A pipe holding up to `want` bytes if the system allows it (`F_SETPIPE_SZ`; an unprivileged process is
    /// capped by `/proc/sys/fs/pipe-max-size`, 1 MiB by default), else the default 64 KiB.
    pub fn new(want: usize) -> io::Result<Self> {
        let (rd, wr) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
        let cap = match fcntl(
            wr.as_raw_fd(),
            FcntlArg::F_SETPIPE_SZ(want.min(i32::MAX as usize) as i32),
        ) {
            Ok(n) => n as usize,
            Err(_) => {
                fcntl(wr.as_raw_fd(), FcntlArg::F_GETPIPE_SZ).map_or(64 << 10, |n| n as usize)
            }
        };
        Ok(SplicePipe { rd, wr, cap })
    }

    /// Bytes the pipe holds at most.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Moves up to `max` bytes from `sock` into the pipe; returns the bytes moved (0: the peer closed;
    /// `WouldBlock`: nothing to read yet, or the pipe is full).
    pub fn fill_from(&self, sock: BorrowedFd<'_>, max: usize) -> io::Result<usize> {
        retry(|| {
            nix_splice(
                sock,
                None,
                self.wr.as_fd(),
                None,
                max,
                SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK,
            )
        })
    }

    /// Moves up to `max` of the bytes the pipe holds into `file` at `at` (the file's offset is not touched);
    /// returns the bytes moved. EINVAL: the file system cannot take spliced bytes (see [`unsupported`]).
    pub fn to_file(&self, file: BorrowedFd<'_>, at: u64, max: usize) -> io::Result<usize> {
        let start = offset(at)?;
        retry(|| {
            let mut off = start;
            nix_splice(
                self.rd.as_fd(),
                None,
                file,
                Some(&mut off),
                max,
                SpliceFFlags::SPLICE_F_MOVE,
            )
        })
    }

    /// Reads bytes the pipe holds into `buf` (the fallback when the file cannot take spliced bytes).
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        retry(|| nix::unistd::read(self.rd.as_fd().as_raw_fd(), buf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::unix::fs::FileExt;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    #[test]
    fn sendfile_sends_the_range_and_stops_at_end_of_file() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"0123456789").unwrap();
        let (a, mut b) = pair();
        assert_eq!(send_more(a.as_fd(), b"hd").unwrap(), 2);
        assert_eq!(sendfile(a.as_fd(), f.as_fd(), 3, 4).unwrap(), 4);
        // Past the end: nothing, not an error.
        assert_eq!(sendfile(a.as_fd(), f.as_fd(), 10, 4).unwrap(), 0);
        drop(a);
        let mut got = Vec::new();
        b.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"hd3456");
    }

    #[test]
    fn splice_moves_socket_bytes_into_the_file_at_an_offset() {
        let f = tempfile::tempfile().unwrap();
        let (mut a, b) = pair();
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7) as u8).collect();
        let w = std::thread::spawn(move || a.write_all(&data).map(|()| data));
        let pipe = SplicePipe::new(1 << 20).unwrap();
        assert!(pipe.capacity() >= 4096);
        b.set_nonblocking(false).unwrap();
        let mut at = 5u64;
        loop {
            let n = pipe.fill_from(b.as_fd(), pipe.capacity());
            match n {
                Ok(0) => break,
                Ok(n) => {
                    let mut done = 0;
                    while done < n {
                        done += pipe.to_file(f.as_fd(), at + done as u64, n - done).unwrap();
                    }
                    at += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
        let data = w.join().unwrap().unwrap();
        let mut got = vec![0u8; data.len() + 5];
        f.read_exact_at(&mut got, 0).unwrap();
        assert_eq!(&got[..5], &[0u8; 5]);
        assert_eq!(&got[5..], &data[..]);
    }
}
