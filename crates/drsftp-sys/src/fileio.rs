//! Positioned vectored file I/O (`preadv`, `pwritev`): one system call fills or drains many buffers, so a TLS
//! sender reads a file block straight into the plaintext slots of its records (drsftp-proto's `RecordShape`) and
//! a TLS receiver writes the records it opened in place straight from their slots, instead of copying through one
//! contiguous buffer.

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::BorrowedFd;

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
}
