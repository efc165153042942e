//! Local files on the client side: a positioned-I/O [`FileHandle`] over `std::fs::File`, and the destination of a
//! download, which is either a hidden part file (`.<name>.drsftp-part.<pid>` next to the destination, renamed into
//! place only after the transfer was checked) or, for partial downloads, the destination itself opened in place.
//! Dropping an uncommitted [`Destination`] removes what it created, so a failed download leaves no file behind.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use drsftp_storage::{FileHandle, StorageError};

use super::ClientError;

/// A local file read and written at offsets from several data streams at once.
#[derive(Debug)]
pub(crate) struct LocalFile {
    file: File,
    name: String,
}

impl LocalFile {
    /// Opens an existing file for reading.
    pub(crate) fn open_read(path: &Path) -> Result<LocalFile, ClientError> {
        let file = File::open(path).map_err(|e| ClientError::local(path, e))?;
        let meta = file.metadata().map_err(|e| ClientError::local(path, e))?;
        if !meta.is_file() {
            return Err(ClientError::local(
                path,
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"),
            ));
        }
        Ok(LocalFile {
            file,
            name: path.display().to_string(),
        })
    }

    fn wrap(file: File, path: &Path) -> LocalFile {
        LocalFile {
            file,
            name: path.display().to_string(),
        }
    }
}

impl FileHandle for LocalFile {
    fn host_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        Some(self.file.as_fd())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> drsftp_storage::Result<usize> {
        loop {
            match self.file.read_at(buf, offset) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => return r.map_err(|e| StorageError::from_io(&self.name, e)),
            }
        }
    }

    fn read_vectored_at(
        &self,
        bufs: &mut [std::io::IoSliceMut<'_>],
        offset: u64,
    ) -> drsftp_storage::Result<usize> {
        use std::os::fd::AsFd;
        drsftp_sys::fileio::preadv(self.file.as_fd(), bufs, offset)
            .map_err(|e| StorageError::from_io(&self.name, e))
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> drsftp_storage::Result<()> {
        self.file
            .write_all_at(buf, offset)
            .map_err(|e| StorageError::from_io(&self.name, e))
    }

    fn write_vectored_at(
        &self,
        bufs: &mut [std::io::IoSlice<'_>],
        offset: u64,
    ) -> drsftp_storage::Result<()> {
        use std::os::fd::AsFd;
        drsftp_sys::fileio::pwritev_all(self.file.as_fd(), bufs, offset)
            .map_err(|e| StorageError::from_io(&self.name, e))
    }

    fn len(&self) -> drsftp_storage::Result<u64> {
        self.file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| StorageError::from_io(&self.name, e))
    }

    fn sync(&self) -> drsftp_storage::Result<()> {
        self.file
            .sync_all()
            .map_err(|e| StorageError::from_io(&self.name, e))
    }

    fn start_writeback(&self) -> drsftp_storage::Result<()> {
        use std::os::fd::AsFd;
        drsftp_sys::fileio::start_writeback(self.file.as_fd())
            .map_err(|e| StorageError::from_io(&self.name, e))
    }
}

/// An in-memory file for listings (MLSD/LIST bytes), refusing to grow past a limit.
#[derive(Debug)]
pub(crate) struct MemFile {
    data: std::sync::Mutex<Vec<u8>>,
    limit: u64,
}

impl MemFile {
    /// Empty, holding at most `limit` bytes.
    pub(crate) fn new(limit: u64) -> MemFile {
        MemFile {
            data: std::sync::Mutex::new(Vec::new()),
            limit,
        }
    }

    /// The bytes written so far.
    pub(crate) fn take(&self) -> Vec<u8> {
        self.data
            .lock()
            .map(|mut d| std::mem::take(&mut *d))
            .unwrap_or_default()
    }
}

impl FileHandle for MemFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> drsftp_storage::Result<usize> {
        let d = self
            .data
            .lock()
            .map_err(|_| StorageError::Invalid("poisoned".into()))?;
        let start = (offset as usize).min(d.len());
        let n = buf.len().min(d.len() - start);
        buf[..n].copy_from_slice(&d[start..start + n]);
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> drsftp_storage::Result<()> {
        let end = offset.saturating_add(buf.len() as u64);
        if end > self.limit {
            return Err(StorageError::Invalid(format!(
                "listing larger than {} bytes",
                self.limit
            )));
        }
        let mut d = self
            .data
            .lock()
            .map_err(|_| StorageError::Invalid("poisoned".into()))?;
        if d.len() < end as usize {
            d.resize(end as usize, 0);
        }
        d[offset as usize..end as usize].copy_from_slice(buf);
        Ok(())
    }

    fn len(&self) -> drsftp_storage::Result<u64> {
        Ok(self.data.lock().map(|d| d.len() as u64).unwrap_or(0))
    }

    fn sync(&self) -> drsftp_storage::Result<()> {
        Ok(())
    }
}

/// Where a download writes. Removes its part file (or the in-place file it created) unless committed.
#[derive(Debug)]
pub(crate) struct Destination {
    handle: Arc<LocalFile>,
    dest: PathBuf,
    /// The hidden part file, for whole-file downloads.
    part: Option<PathBuf>,
    /// In place: the file did not exist before, so a failure removes it.
    created: bool,
    committed: bool,
    /// A resumable download's part file (`resume.rs` decides what stays): never removed here.
    keep: bool,
}

/// The hidden part-file name for `dest`: `.<name>.drsftp-part.<pid>` in the same directory.
pub(crate) fn part_path(dest: &Path) -> PathBuf {
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "download".into());
    dest.with_file_name(format!(".{name}.drsftp-part.{}", std::process::id()))
}

impl Destination {
    /// A fresh part file next to `dest` (whole-file download).
    pub(crate) fn part_file(dest: &Path) -> Result<Destination, ClientError> {
        if dest.is_dir() {
            return Err(ClientError::local(
                dest,
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "is a directory"),
            ));
        }
        let part = part_path(dest);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&part)
            .map_err(|e| ClientError::local(dest, e))?;
        Ok(Destination {
            handle: Arc::new(LocalFile::wrap(file, &part)),
            dest: dest.to_path_buf(),
            part: Some(part),
            created: true,
            committed: false,
            keep: false,
        })
    }

    /// The destination itself, opened without truncation (partial download: bytes land at their offsets).
    pub(crate) fn in_place(dest: &Path) -> Result<Destination, ClientError> {
        let existed = dest.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dest)
            .map_err(|e| ClientError::local(dest, e))?;
        Ok(Destination {
            handle: Arc::new(LocalFile::wrap(file, dest)),
            dest: dest.to_path_buf(),
            part: None,
            created: !existed,
            committed: false,
            keep: false,
        })
    }

    /// A resumable download's part file `part` (`resume.rs`), opened as it is (no truncation) and left alone
    /// when dropped uncommitted; `commit` renames it onto `dest` as usual.
    pub(crate) fn resumable(dest: &Path, part: &Path) -> Result<Destination, ClientError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(part)
            .map_err(|e| ClientError::local(dest, e))?;
        Ok(Destination {
            handle: Arc::new(LocalFile::wrap(file, part)),
            dest: dest.to_path_buf(),
            part: Some(part.to_path_buf()),
            created: true,
            committed: false,
            keep: true,
        })
    }

    /// The handle the data engine writes into.
    pub(crate) fn handle(&self) -> Arc<LocalFile> {
        self.handle.clone()
    }

    /// Flushes to disk and, for a part file, renames it onto the destination.
    pub(crate) fn commit(mut self) -> Result<(), ClientError> {
        self.handle.sync()?;
        if let Some(part) = &self.part {
            std::fs::rename(part, &self.dest).map_err(|e| ClientError::local(&self.dest, e))?;
        }
        self.committed = true;
        Ok(())
    }
}

impl Drop for Destination {
    fn drop(&mut self) {
        if self.committed || self.keep {
            return;
        }
        let victim = match (&self.part, self.created) {
            (Some(p), _) => Some(p.as_path()),
            (None, true) => Some(self.dest.as_path()),
            (None, false) => None,
        };
        if let Some(p) = victim {
            if let Err(e) = std::fs::remove_file(p) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!("cannot remove {}: {e}", p.display());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_file_is_removed_unless_committed() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("f.bin");
        let d = Destination::part_file(&dest).unwrap();
        d.handle().write_at(b"hello", 3).unwrap();
        let part = part_path(&dest);
        assert!(part.exists());
        assert!(part
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(".f.bin.drsftp-part."));
        drop(d);
        assert!(!part.exists() && !dest.exists());

        let d = Destination::part_file(&dest).unwrap();
        d.handle().write_at(b"abc", 0).unwrap();
        d.commit().unwrap();
        assert!(!part.exists());
        assert_eq!(std::fs::read(&dest).unwrap(), b"abc");
    }

    #[test]
    fn in_place_keeps_existing_and_removes_created() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("x");
        drop(Destination::in_place(&dest).unwrap());
        assert!(!dest.exists(), "a file we created is removed on failure");
        std::fs::write(&dest, b"0123456789").unwrap();
        let d = Destination::in_place(&dest).unwrap();
        d.handle().write_at(b"ab", 4).unwrap();
        drop(d);
        assert_eq!(std::fs::read(&dest).unwrap(), b"0123ab6789");
        let mut buf = [0u8; 4];
        let f = LocalFile::open_read(&dest).unwrap();
        assert_eq!(f.read_at(&mut buf, 8).unwrap(), 2);
        assert_eq!(f.len().unwrap(), 10);
    }
}
