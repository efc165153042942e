//! File access for the blast threads. [`FileSource`] gives the sender's core its payloads from a read-ahead
//! window (first transmissions move forward through the file, so one large positioned read serves thousands of
//! packets; resends behind the window are read directly), CRC'ing each window as it fills. [`WriteBack`] coalesces the receiver's new packets into
//! contiguous runs and writes each run with one positioned write, reporting it to the shared [`Progress`] and
//! CRC'ing it while it is hot in cache (the download's check then needs no re-read of the file).

use std::cell::RefCell;
use std::ops::Range;
use std::sync::Arc;

use drsftp_blast::DataSource;
use drsftp_storage::{FileHandle, StorageError};

use crate::data::{CrcPieces, Progress};

/// Read-ahead window size.
const WINDOW: usize = 4 << 20;
/// Largest run written at once.
const RUN: usize = 4 << 20;
/// Most CRC pieces a receiver keeps (24 bytes each): a piece per run, and a run ends at every loss, so 1 GiB at
/// 1 % loss makes ~15 000. Past this the CRC is dropped and the check reads the file back instead.
const MAX_CRC_PIECES: usize = 1 << 18;

/// Fills `buf` from `offset`, failing on a short file.
fn read_full(file: &dyn FileHandle, buf: &mut [u8], mut offset: u64) -> Result<(), StorageError> {
    let mut done = 0;
    while done < buf.len() {
        let n = file.read_at(&mut buf[done..], offset)?;
        if n == 0 {
            return Err(StorageError::Invalid(format!(
                "file ends at byte {offset}, before the transfer does"
            )));
        }
        done += n;
        offset += n as u64;
    }
    Ok(())
}

struct Window {
    start: u64,
    data: Vec<u8>,
}

/// The sender's payloads: transfer offset `o` is file offset `base + o`; the transfer is `len` bytes.
pub(super) struct FileSource {
    file: Arc<dyn FileHandle>,
    base: u64,
    len: u64,
    window: RefCell<Window>,
    /// Positioned reads issued (window fills and direct reads).
    pub(super) reads: std::cell::Cell<u64>,
    /// The CRC32C of transfer bytes `0..end` the windows have covered, as (end, crc); `None` after a window that
    /// started past `end` (the bytes in between were never read in order).
    crc: std::cell::Cell<Option<(u64, u32)>>,
}

impl FileSource {
    pub(super) fn new(file: Arc<dyn FileHandle>, base: u64, len: u64) -> FileSource {
        FileSource {
            file,
            base,
            len,
            window: RefCell::new(Window {
                start: 0,
                data: Vec::new(),
            }),
            reads: std::cell::Cell::new(0),
            crc: std::cell::Cell::new(Some((0, 0))),
        }
    }

    /// The CRC32C of the file's bytes `0..len`, when the transfer starts at file offset 0 and the windows read
    /// all of it in order (they do for a whole transfer: first transmissions move forward): the sender's end
    /// of the check then reads nothing back.
    pub(super) fn whole_crc(&self) -> Option<u32> {
        match self.crc.get() {
            Some((end, crc)) if end == self.len && self.base == 0 => Some(crc),
            _ => None,
        }
    }

    /// Extends the running CRC with a window just read at transfer offset `at`.
    fn crc_window(&self, at: u64, data: &[u8]) {
        let next = self.crc.get().and_then(|(end, crc)| {
            let skip = usize::try_from(end.checked_sub(at)?).ok()?;
            Some(match data.get(skip..) {
                Some(new) if !new.is_empty() => {
                    (end + new.len() as u64, crc32c::crc32c_append(crc, new))
                }
                _ => (end, crc),
            })
        });
        self.crc.set(next);
    }
}

impl DataSource for FileSource {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let to_io = |e: StorageError| std::io::Error::other(e.to_string());
        let end = offset + buf.len() as u64;
        if end > self.len {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let mut w = self.window.borrow_mut();
        let w_end = w.start + w.data.len() as u64;
        if offset >= w.start && end <= w_end {
            let i = (offset - w.start) as usize;
            buf.copy_from_slice(&w.data[i..i + buf.len()]);
            return Ok(());
        }
        self.reads.set(self.reads.get() + 1);
        if offset >= w.start || w.data.is_empty() {
            // Moving forward: refill the window from here.
            let n = ((self.len - offset) as usize).clamp(buf.len(), WINDOW.max(buf.len()));
            w.data.resize(n, 0);
            read_full(&*self.file, &mut w.data, self.base + offset).map_err(to_io)?;
            self.crc_window(offset, &w.data);
            w.start = offset;
            buf.copy_from_slice(&w.data[..buf.len()]);
            return Ok(());
        }
        // A resend behind the window: read just this packet.
        read_full(&*self.file, buf, self.base + offset).map_err(to_io)
    }
}

/// Contiguous received payloads waiting to be written.
pub(super) struct WriteBack {
    file: Arc<dyn FileHandle>,
    base: u64,
    progress: Arc<Progress>,
    start: u64,
    buf: Vec<u8>,
    /// Bytes written so far and the positioned writes it took.
    pub(super) written: u64,
    pub(super) writes: u64,
    /// A write failed: queued packets may not be on disk, so no further checkpoint may be taken.
    pub(super) failed: bool,
    /// The CRC32C of every run written, by file offset; `None` once past [`MAX_CRC_PIECES`].
    crc: Option<CrcPieces>,
}

impl WriteBack {
    /// The progress counter the written runs are added to.
    pub(super) fn progress(&self) -> &Progress {
        &self.progress
    }

    pub(super) fn new(file: Arc<dyn FileHandle>, base: u64, progress: Arc<Progress>) -> WriteBack {
        WriteBack {
            file,
            base,
            progress,
            start: 0,
            buf: Vec::with_capacity(RUN),
            written: 0,
            writes: 0,
            failed: false,
            crc: Some(CrcPieces::default()),
        }
    }

    /// Queues `data` for transfer offset `offset`; writes the pending run first if it does not continue it or
    /// is full.
    pub(super) fn push(&mut self, offset: u64, data: &[u8]) -> Result<(), StorageError> {
        let contiguous = !self.buf.is_empty() && self.start + self.buf.len() as u64 == offset;
        if !self.buf.is_empty() && (!contiguous || self.buf.len() + data.len() > RUN) {
            self.flush()?;
        }
        if self.buf.is_empty() {
            self.start = offset;
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    /// Writes the pending run.
    pub(super) fn flush(&mut self) -> Result<(), StorageError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let at = self.base + self.start;
        if let Err(e) = self.file.write_at(&self.buf, at) {
            self.failed = true;
            return Err(e);
        }
        if let Some(c) = &mut self.crc {
            c.add(at, &self.buf);
            if c.len() > MAX_CRC_PIECES {
                self.crc = None;
            }
        }
        let r: Range<u64> = at..at + self.buf.len() as u64;
        self.progress.add(r);
        self.written += self.buf.len() as u64;
        self.writes += 1;
        self.buf.clear();
        Ok(())
    }

    /// The CRC32C of the file's bytes `0..end` from the runs written, if they tile exactly that range (a
    /// section not starting at 0, a resumed transfer or too many pieces give `None`).
    pub(super) fn whole_crc(&mut self) -> Option<u32> {
        self.crc.take().and_then(CrcPieces::whole)
    }

    /// Bytes queued, not yet written.
    pub(super) fn pending(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;
    use drsftp_storage::BytesFile;

    #[test]
    fn source_reads_ahead_and_directly_behind() {
        let data = drsftp_testkit::data::pattern(10_000_000, 1);
        let file: Arc<dyn FileHandle> = Arc::new(BytesFile::new(data.clone()));
        let src = FileSource::new(file, 1000, 9_000_000);
        let mut buf = vec![0u8; 1436];
        let mut off = 0;
        while off + 1436 <= 9_000_000 {
            src.read_at(off, &mut buf).unwrap();
            assert_eq!(buf, data[1000 + off as usize..][..1436]);
            off += 1436;
        }
        assert_eq!(src.reads.get(), 3, "9 MB forward = three 4 MiB windows");
        src.read_at(1436 * 5, &mut buf).unwrap();
        assert_eq!(buf, data[1000 + 1436 * 5..][..1436]);
        assert_eq!(src.reads.get(), 4, "behind the window: one direct read");
        let mut tail = vec![0u8; 100];
        src.read_at(9_000_000 - 100, &mut tail).unwrap();
        assert!(src.read_at(9_000_000 - 99, &mut tail).is_err());
        // All of it read in order, but from file offset 1000: not a CRC of the file from 0.
        assert_eq!(src.whole_crc(), None);
    }

    #[test]
    fn source_crc_covers_the_file_read_in_order() {
        let data = drsftp_testkit::data::pattern(9_000_000, 2);
        let len = data.len() as u64;
        let file: Arc<dyn FileHandle> = Arc::new(BytesFile::new(data.clone()));
        let src = FileSource::new(file.clone(), 0, len);
        // Packets forward, one straddling each window's end (the next window overlaps the last), a resend behind.
        let mut off = 0u64;
        while off < len {
            let n = (1436u64).min(len - off) as usize;
            src.read_at(off, &mut vec![0u8; n]).unwrap();
            off += n as u64;
            if off == 1436 * 4000 {
                src.read_at(1436 * 10, &mut [0u8; 1436]).unwrap();
            }
        }
        assert_eq!(src.whole_crc(), Some(crc32c::crc32c(&data)));
        // Not read to the end: no CRC.
        let part = FileSource::new(file.clone(), 0, len);
        part.read_at(0, &mut [0u8; 1436]).unwrap();
        assert_eq!(part.whole_crc(), None);
        // A window that starts past what was read: the bytes between were never CRC'd.
        let skip = FileSource::new(file, 0, len);
        skip.read_at(0, &mut [0u8; 1436]).unwrap();
        skip.read_at(WINDOW as u64 + 1436, &mut [0u8; 1436])
            .unwrap();
        let mut off = WINDOW as u64 + 2 * 1436;
        while off < len {
            let n = (1436u64).min(len - off) as usize;
            skip.read_at(off, &mut vec![0u8; n]).unwrap();
            off += n as u64;
        }
        assert_eq!(skip.whole_crc(), None);
    }

    #[test]
    fn writeback_coalesces_runs() {
        let file = Arc::new(BytesFile::new(vec![]));
        let progress = Arc::new(Progress::new());
        let mut wb = WriteBack::new(file.clone(), 10, progress.clone());
        wb.push(0, b"abc").unwrap();
        wb.push(3, b"def").unwrap();
        wb.push(9, b"xyz").unwrap();
        assert_eq!(wb.writes, 1);
        wb.push(6, b"ghi").unwrap();
        wb.flush().unwrap();
        assert_eq!(wb.writes, 3);
        assert_eq!(wb.written, 12);
        let mut out = vec![0u8; 22];
        assert_eq!(file.read_at(&mut out, 0).unwrap(), 22);
        assert_eq!(&out[10..], b"abcdefghixyz");
        assert_eq!(progress.bytes(), 12);
        assert_eq!(progress.ranges().ranges(), &[10..22]);
        // Its runs start at file offset 10: no CRC of the file from 0.
        assert_eq!(wb.whole_crc(), None);
    }

    #[test]
    fn writeback_crc_covers_runs_written_out_of_order() {
        let data = drsftp_testkit::data::random_bytes(100_000, 5);
        let file = Arc::new(BytesFile::new(vec![]));
        let mut wb = WriteBack::new(file.clone(), 0, Arc::new(Progress::new()));
        // A first pass with losses, then the holes filled by resends (one packet each), as a lossy path gives.
        let pkt = 1436;
        let holes = [3usize, 4, 17, 40, 69];
        let chunks: Vec<std::ops::Range<usize>> = (0..data.len())
            .step_by(pkt)
            .map(|o| o..(o + pkt).min(data.len()))
            .collect();
        for (i, r) in chunks.iter().enumerate() {
            if !holes.contains(&i) {
                wb.push(r.start as u64, &data[r.clone()]).unwrap();
            }
        }
        for &i in holes.iter().rev() {
            wb.push(chunks[i].start as u64, &data[chunks[i].clone()])
                .unwrap();
        }
        wb.flush().unwrap();
        assert_eq!(wb.whole_crc(), Some(crc32c::crc32c(&data)));
        // A hole never filled: no CRC (the check reads the file instead).
        let mut wb = WriteBack::new(file, 0, Arc::new(Progress::new()));
        wb.push(0, &data[..pkt]).unwrap();
        wb.push(2 * pkt as u64, &data[2 * pkt..3 * pkt]).unwrap();
        wb.flush().unwrap();
        assert_eq!(wb.whole_crc(), None);
    }

    #[test]
    fn writeback_drops_its_crc_past_the_piece_limit() {
        let file = Arc::new(BytesFile::new(vec![]));
        let mut wb = WriteBack::new(file, 0, Arc::new(Progress::new()));
        // Every other byte: each write a piece of its own, the gaps filled afterwards.
        for o in (0..=2 * MAX_CRC_PIECES as u64).step_by(2) {
            wb.push(o, b"a").unwrap();
            wb.flush().unwrap();
        }
        for o in (1..2 * MAX_CRC_PIECES as u64).step_by(2) {
            wb.push(o, b"a").unwrap();
            wb.flush().unwrap();
        }
        assert_eq!(wb.whole_crc(), None);
    }
}
