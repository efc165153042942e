//! drsftp-storage: the `Storage` trait with positioned reads and writes (MODE E blocks arrive out of order), a
//! filesystem backend confined to a served root, part files renamed into place only when complete, CKSM checksums,
//! an in-memory backend for deterministic tests, and the one mapping from storage errors to FTP reply codes.
//!
//! Paths given to a [`Storage`] are *virtual*: `/`-separated, relative to the served root (a leading `/` is the
//! root itself). They are normalised lexically (`.`/`..` can never climb above `/`), and a backend must refuse to
//! follow a symlink whose target lies outside the root.

#![forbid(unsafe_code)]

mod checksum;
mod error;
mod fs;
mod kept;
mod mem;
mod path;

pub use checksum::{checksum, checksum_bytes, checksum_until, ChecksumAlg, Checksummer};
pub use error::StorageError;
pub use fs::{FsStorage, ResolveStrategy};
pub use kept::{KeptId, KeptLimits, KEPT_DIR};
pub use mem::{BytesFile, MemStorage};
pub use path::{
    is_part_name, join_virtual, normalize_virtual, validate, MAX_COMPONENT_LEN, MAX_PATH_LEN,
};

use std::sync::Arc;
use std::time::SystemTime;

/// `Result` with a [`StorageError`].
pub type Result<T> = std::result::Result<T, StorageError>;

/// What kind of directory entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// Regular file.
    File,
    /// Directory.
    Dir,
    /// Anything else (device, socket, dangling or escaping symlink): listed, never opened.
    Other,
}

/// Metadata of one path, as listings and SIZE/MDTM/MLST need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// Final path component (`/` for the root).
    pub name: String,
    /// File, directory or other.
    pub kind: EntryKind,
    /// Size in bytes (0 for directories).
    pub size: u64,
    /// Last modification time.
    pub modified: SystemTime,
    /// Unix permission bits (`0o644` etc.), for LIST/MLST `UNIX.mode`.
    pub mode: u32,
}

/// An open file supporting positioned I/O from many threads at once (one per data stream).
pub trait FileHandle: Send + Sync + std::fmt::Debug {
    /// Read up to `buf.len()` bytes at `offset`; returns 0 at end of file.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize>;
    /// Read at `offset` into `bufs` in order; returns the bytes read (short is allowed, 0 at end of file). Files
    /// on a host file system do it in one `preadv`; the default reads into the first non-empty buffer.
    fn read_vectored_at(&self, bufs: &mut [std::io::IoSliceMut<'_>], offset: u64) -> Result<usize> {
        match bufs.iter_mut().find(|b| !b.is_empty()) {
            Some(b) => self.read_at(b, offset),
            None => Ok(0),
        }
    }
    /// Write all of `buf` at `offset` (the file grows as needed; holes read as zeros).
    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()>;
    /// Write all of `bufs`, in order, from `offset` on. Files on a host file system do it in one `pwritev` (a TLS
    /// receiver writes the records it opened in place straight from their slots); the default writes each.
    fn write_vectored_at(&self, bufs: &mut [std::io::IoSlice<'_>], offset: u64) -> Result<()> {
        let mut at = offset;
        for b in bufs.iter() {
            self.write_at(b, at)?;
            at += b.len() as u64;
        }
        Ok(())
    }
    /// Current length in bytes.
    fn len(&self) -> Result<u64>;
    /// True if the file is empty.
    fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Flush data to stable storage.
    fn sync(&self) -> Result<()>;
    /// Start writing what was written so far back to stable storage without waiting for it, so that the final
    /// [`sync`](FileHandle::sync) has little left to do. Best effort: the default (memory, test doubles) does
    /// nothing.
    fn start_writeback(&self) -> Result<()> {
        Ok(())
    }
    /// The host file's descriptor, for the data engine's kernel-side copies (`sendfile`, `splice`); `None` for
    /// handles that are not one host file (memory, test doubles), which take the copying path.
    fn host_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }
}

/// How an upload is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// STOR: a new part file; the destination appears only on [`PartFile::commit`].
    Replace,
    /// APPE / ESTO / STOR after REST: write into the existing file in place (created if missing), keeping its
    /// bytes; writes land at their given offsets.
    InPlace,
}

/// An upload in progress. Dropping it without [`PartFile::commit`] removes the part file (`Replace`), so a failed
/// transfer never leaves a file that looks complete.
pub trait PartFile: Send + Sync + std::fmt::Debug {
    /// The handle to write blocks into.
    fn handle(&self) -> Arc<dyn FileHandle>;
    /// Make the upload visible at its destination path (fsync + rename for `Replace`). Consumes the upload.
    fn commit(self: Box<Self>) -> Result<()>;
    /// Throw the upload away (also what `Drop` does for `Replace`).
    fn abort(self: Box<Self>);
    /// A kept partial upload ([`Storage::kept_open`]): record that `ranges` (`a-b,c-d`, end exclusive) are on
    /// disk, after syncing them. Other uploads have nothing to record.
    fn save_held(&self, _ranges: &str) -> Result<()> {
        Ok(())
    }
}

/// A served file tree. All methods are synchronous and may block on disk; the I/O layer calls them from blocking
/// threads where that matters.
pub trait Storage: Send + Sync + std::fmt::Debug {
    /// Metadata of `path` (following symlinks that stay inside the root).
    fn stat(&self, path: &str) -> Result<Metadata>;
    /// Entries of directory `path`, sorted by name, without `.` and `..`.
    fn list(&self, path: &str) -> Result<Vec<Metadata>>;
    /// Calls `f` with each entry of directory `path` (without `.` and `..`), in no particular order, until it
    /// returns false: how listings reach a data connection without holding a huge directory in memory. An error
    /// opening the directory is returned before any entry; entries that vanish meanwhile are skipped.
    fn list_each(&self, path: &str, f: &mut dyn FnMut(Metadata) -> bool) -> Result<()> {
        for m in self.list(path)? {
            if !f(m) {
                break;
            }
        }
        Ok(())
    }
    /// Open an existing regular file for reading.
    fn open_read(&self, path: &str) -> Result<Arc<dyn FileHandle>>;
    /// Begin an upload to `path`.
    fn open_write(&self, path: &str, mode: WriteMode) -> Result<Box<dyn PartFile>>;
    /// Create a directory (parent must exist).
    fn mkdir(&self, path: &str) -> Result<()>;
    /// Remove an empty directory.
    fn rmdir(&self, path: &str) -> Result<()>;
    /// Remove a file.
    fn remove(&self, path: &str) -> Result<()>;
    /// Rename `from` to `to` (both inside the root).
    fn rename(&self, from: &str, to: &str) -> Result<()>;
    /// Set the modification time of regular file `path` (MFMT).
    fn set_modified(&self, path: &str, time: SystemTime) -> Result<()>;
    /// The byte ranges (`a-b,c-d` text) the kept partial upload `id` holds, if one is kept (`kept.rs`).
    /// Backends without kept partials hold none.
    fn kept_held(&self, _id: &KeptId, _limits: &KeptLimits) -> Result<Option<String>> {
        Ok(None)
    }
    /// Begin a resumable upload kept under `id` (`kept.rs`): with `resume`, the bytes already kept stay and their
    /// ranges are returned. `None` when this backend (or the limits, or a concurrent upload of the same partial)
    /// keeps none: the caller then uploads the ordinary way.
    fn kept_open(
        &self,
        _id: &KeptId,
        _resume: bool,
        _limits: &KeptLimits,
    ) -> Result<Option<(Box<dyn PartFile>, String)>> {
        Ok(None)
    }
}
