//! What the sender reads from and writes into: the [`DataSource`] of file bytes (positioned reads) and the
//! [`Batch`] of datagrams one `Sender::poll_transmit` produces, laid out for `sendmmsg` or one UDP GSO send.

/// Where file data comes from: `read_at` fills `buf` with the bytes at `offset` (a positioned read).
pub trait DataSource {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()>;
}

impl DataSource for [u8] {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let src = usize::try_from(offset)
            .ok()
            .and_then(|o| self.get(o..o.checked_add(buf.len())?))
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

impl DataSource for Vec<u8> {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.as_slice().read_at(offset, buf)
    }
}

impl<T: DataSource + ?Sized> DataSource for &T {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        (**self).read_at(offset, buf)
    }
}

#[cfg(unix)]
impl DataSource for std::fs::File {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, offset)
    }
}

/// What one datagram of a [`Batch`] carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatagramInfo {
    pub seq: u64,
    /// Transmission number (64-bit; the wire carries the low 32 bits).
    pub tx: u64,
    /// Resend round (0 = first transmission).
    pub round: u64,
    /// An extra copy sent by tail hedging.
    pub hedge: bool,
}

/// Datagrams produced by one [`Sender::poll_transmit`] call, stored back to back so the I/O layer can hand
/// them to `sendmmsg` or, when [`segment_size`](Self::segment_size) allows, to one UDP GSO send.
#[derive(Debug, Default, Clone)]
pub struct Batch {
    pub(crate) buf: Vec<u8>,
    pub(crate) ends: Vec<usize>,
    pub(crate) info: Vec<DatagramInfo>,
}

impl Batch {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn clear(&mut self) {
        self.buf.clear();
        self.ends.clear();
        self.info.clear();
    }
    pub fn len(&self) -> usize {
        self.ends.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
    /// Datagram `i`.
    pub fn datagram(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.buf[start..self.ends[i]]
    }
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        (0..self.len()).map(|i| self.datagram(i))
    }
    pub fn info(&self) -> &[DatagramInfo] {
        &self.info
    }
    /// All datagrams back to back.
    pub fn buffer(&self) -> &[u8] {
        &self.buf
    }
    /// `Some(size)` if every datagram but the last is `size` bytes and the last is not longer (GSO-compatible).
    pub fn segment_size(&self) -> Option<usize> {
        let first = self.ends.first().copied()?;
        let mut prev = 0;
        for (i, &e) in self.ends.iter().enumerate() {
            let len = e - prev;
            if len > first || (len != first && i + 1 != self.ends.len()) {
                return None;
            }
            prev = e;
        }
        Some(first)
    }
}
