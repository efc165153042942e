//! Positioned vectored file reads (`preadv`): one system call fills many buffers, so a TLS sender reads a file
//! block straight into the plaintext slots of its records (drsftp-proto's `RecordShape`) instead of reading it
//! into one buffer and copying.

use std::io::{self, IoSliceMut};
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
}
