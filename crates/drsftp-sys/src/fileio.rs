//! Positioned vectored file I/O (`preadv`, `pwritev`): one system call fills or drains many buffers, so a TLS
//! sender reads a file block straight into the plaintext slots of its records (drsftp-proto's `RecordShape`) and
//! a TLS receiver writes the records it opened in place straight from their slots, instead of copying through one
//! contiguous buffer. Also early writeback (`sync_file_range`) for a file being received.

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd};

/// Reads at `offset` into `bufs` in order; returns the bytes read (0 at end of file), retrying on `EINTR`.
pub fn preadv(fd: BorrowedFd<'_>, bufs: &mut [IoSliceMut<'_>], offset: u64) -> io::Result<usize> {
    let off = i64::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    loop {
        match nix::sys::uio::preadv(fd, bufs, off) {
            Err(nix::errno::Errno::EINTR) => continue,
            r => return r.map_err(io::Error::from),
        }
    }
}

/// Most buffers one `pwritev` takes (Linux's `IOV_MAX`; more is `EINVAL`, not a short write).
const IOV_MAX: usize = 1024;

/// Writes all of `bufs`, in order, at `offset` (at most [`IOV_MAX`] buffers a call, looping over short writes,
/// retrying on `EINTR`).
pub fn pwritev_all(
    fd: BorrowedFd<'_>,
    mut bufs: &mut [IoSlice<'_>],
    offset: u64,
) -> io::Result<()> {
    let mut off =
        i64::try_from(offset).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    IoSlice::advance_slices(&mut bufs, 0);
    while !bufs.is_empty() {
        match nix::sys::uio::pwritev(fd, &bufs[..bufs.len().min(IOV_MAX)], off) {
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(io::Error::from(e)),
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                off = off
                    .checked_add(n as i64)
                    .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
                IoSlice::advance_slices(&mut bufs, n);
            }
        }
    }
    Ok(())
}

/// Starts writing every dirty page of `fd` back to disk and returns without waiting for the disk
/// (`sync_file_range(SYNC_FILE_RANGE_WRITE)` over the whole file). A receiver calls it as data lands so that the
/// `fsync` that makes the finished file durable finds little left to write. It may block briefly while the
/// device's request queue is full, so callers run it off the async workers. Errors (`ESPIPE` on a pipe, `EINVAL`
/// where a file system has no writeback) are returned for the caller to ignore: nothing is lost without it.
pub fn start_writeback(fd: BorrowedFd<'_>) -> io::Result<()> {
    loop {
        // SAFETY: `fd` is open for the borrow's life; the call reads and writes no memory of ours.
        let r = unsafe { libc::sync_file_range(fd.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE) };
        if r == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;

    #[test]
    fn fills_buffers_in_order_from_the_offset() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"0123456789").unwrap();
        let (mut a, mut b) = ([0u8; 3], [0u8; 4]);
        let mut bufs = [IoSliceMut::new(&mut a), IoSliceMut::new(&mut b)];
        assert_eq!(preadv(f.as_fd(), &mut bufs, 2).unwrap(), 7);
        assert_eq!((&a, &b), (b"234", b"5678"));
        let mut bufs = [IoSliceMut::new(&mut a)];
        assert_eq!(preadv(f.as_fd(), &mut bufs, 10).unwrap(), 0);
        assert!(preadv(f.as_fd(), &mut bufs, u64::MAX).is_err());
    }

    #[test]
    fn writes_every_buffer_in_order_at_the_offset() {
        let f = tempfile::tempfile().unwrap();
        // More buffers than one pwritev is guaranteed to take whole on every kernel (IOV_MAX is 1024).
        let pieces: Vec<Vec<u8>> = (0..1500u32)
            .map(|i| vec![i as u8; 1 + (i % 5) as usize])
            .collect();
        let mut bufs: Vec<IoSlice<'_>> = pieces.iter().map(|p| IoSlice::new(p)).collect();
        pwritev_all(f.as_fd(), &mut bufs, 3).unwrap();
        let want: Vec<u8> = [vec![0u8; 3], pieces.concat()].concat();
        let mut got = vec![0u8; want.len() + 10];
        let n = std::os::unix::fs::FileExt::read_at(&f, &mut got, 0).unwrap();
        assert_eq!(&got[..n], &want[..]);
        let mut empty: [IoSlice<'_>; 0] = [];
        pwritev_all(f.as_fd(), &mut empty, 0).unwrap();
    }

    #[test]
    fn writeback_starts_on_a_file_and_is_refused_on_a_socket() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&vec![7u8; 1 << 20]).unwrap();
        start_writeback(f.as_fd()).unwrap();
        // The data is unchanged by it, and a second call with nothing dirty is fine.
        let mut got = vec![0u8; 1 << 20];
        std::os::unix::fs::FileExt::read_exact_at(&f, &mut got, 0).unwrap();
        assert!(got.iter().all(|&b| b == 7));
        start_writeback(f.as_fd()).unwrap();
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let e = start_writeback(a.as_fd()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ESPIPE), "{e}");
    }
}
