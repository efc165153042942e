//! Filesystem backend confined to a served root ([`FsStorage`]): every operation resolved beneath the root
//! atomically by the kernel, positioned file I/O, and hidden part files that are renamed into place on commit and
//! deleted when dropped.
//!
//! Confinement is two layers. First the virtual path is validated and normalised lexically (`..` clamps at `/`),
//! which gives clear errors for bad names. Then the root is held open as a directory fd
//! ([`drsftp_sys::resolve::Root`]) and every path is resolved *from that fd* in the same syscall that opens it
//! (`openat2` with `RESOLVE_BENEATH`): a symlink is followed only while it stays beneath the root, and there is no
//! window between checking a path and using it for a local user to swap a directory for an escaping symlink.
//!
//! * Reads, stats and listings open the path itself beneath the root (following inner symlinks).
//! * Operations on a name (create, mkdir, remove, rmdir, rename, the part-file commit) resolve the *parent*
//!   beneath the root and then act on the single final component with an `*at` call relative to that parent
//!   fd, which never follows a symlink there. Uploads keep the parent fd, so the commit rename lands in the
//!   directory the part file was created in, whatever happens to its name meanwhile.
//! * Renaming a symlink moves the link itself, never its target. That is safe however the link points, because a
//!   link is only ever followed by a later beneath-the-root resolution, which refuses it if it leads out.
//!
//! Where `openat2` is unavailable (kernels before 5.6, seccomp filters) resolution walks one component at a time
//! with `O_NOFOLLOW` and refuses *every* symlink, inner ones included: stricter, never looser. Absolute symlinks
//! are refused even when they point inside the root (the kernel cannot tell), as are symlinks through `/proc`.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

pub use drsftp_sys::resolve::Strategy as ResolveStrategy;
use drsftp_sys::resolve::{self, Root};

use crate::path::{clean, file_name, is_part_name, is_strictly_below, PART_MARKER};
use crate::{
    EntryKind, FileHandle, KeptId, KeptLimits, Metadata, PartFile, Result, Storage, StorageError,
    WriteMode,
};

/// A directory tree on the local filesystem served as `/`.
#[derive(Debug, Clone)]
pub struct FsStorage {
    /// Canonical (symlink-free, absolute) root, for display; never used to reach files.
    root: PathBuf,
    /// The root held open: every operation resolves beneath this fd.
    dir: Arc<Root>,
}

/// Flags for opening files to read or write: never block on a FIFO, never acquire a controlling terminal.
const OPEN_FLAGS: i32 = libc::O_NONBLOCK | libc::O_NOCTTY;

/// Permission bits for new files and directories (less the umask), as `std::fs` uses.
const NEW_FILE_MODE: u32 = 0o666;
const NEW_DIR_MODE: u32 = 0o777;

impl FsStorage {
    /// Opens the regular file at the clean virtual path `v` for reading, beneath the root. It is classified first
    /// through a path-only fd, so a directory, socket or device gives NotAFile without being opened at all
    /// (opening a device can have side effects); then opened, beneath the root again, and checked again.
    fn open_regular(&self, v: &str) -> Result<File> {
        let probe = self
            .dir
            .open_beneath(rel(v), libc::O_PATH, 0)
            .map_err(|e| resolve_err(v, e))?;
        drop(regular(probe, v)?);
        let fd = self
            .dir
            .open_beneath(rel(v), libc::O_RDONLY | OPEN_FLAGS, 0)
            .map_err(|e| resolve_err(v, e))?;
        regular(fd, v)
    }

    /// Serve the directory `root`. It is canonicalised and opened once here; it must exist and be a directory.
    /// Paths resolve with `openat2` where the kernel allows it, else by the stricter component walk.
    pub fn new(root: impl Into<PathBuf>) -> Result<Self> {
        Self::with_strategy(root, ResolveStrategy::detect())
    }

    /// [`FsStorage::new`] with an explicit resolution strategy (tests force the fallback with it).
    pub fn with_strategy(root: impl Into<PathBuf>, strategy: ResolveStrategy) -> Result<Self> {
        let root = root.into();
        let shown = root.display().to_string();
        let canon = std::fs::canonicalize(&root).map_err(|e| StorageError::from_io(&shown, e))?;
        let md = std::fs::metadata(&canon).map_err(|e| StorageError::from_io(&shown, e))?;
        if !md.is_dir() {
            return Err(StorageError::NotADirectory(shown));
        }
        let dir =
            Root::open_with(&canon, strategy).map_err(|e| StorageError::from_io(&shown, e))?;
        Ok(FsStorage {
            root: canon,
            dir: Arc::new(dir),
        })
    }

    /// The canonical host directory served as `/`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory at virtual path `v` served as a tree of its own (a per-user root): resolved beneath this
    /// root once, here, so nothing outside this root is reachable from it either.
    pub fn subtree(&self, v: &str) -> Result<FsStorage> {
        let v = clean(v)?;
        let dir = self.dir.sub_root(rel(&v)).map_err(|e| resolve_err(&v, e))?;
        Ok(FsStorage {
            root: self.root.join(rel(&v)),
            dir: Arc::new(dir),
        })
    }

    /// How paths are resolved beneath the root.
    pub fn strategy(&self) -> ResolveStrategy {
        self.dir.strategy()
    }

    /// Metadata of one listing entry `name` of directory `dir` (virtual `v`, opened as `dir_fd`); symlinks are
    /// followed only beneath the root.
    fn entry_metadata(
        &self,
        dir_fd: &OwnedFd,
        v: &str,
        raw: &OsStr,
        name: &str,
    ) -> Option<Metadata> {
        let lmd = resolve::lstat_at(dir_fd.as_fd(), raw).ok()?;
        if !lmd.file_type().is_symlink() {
            return Some(metadata_from(name, &lmd));
        }
        // Resolved from the root, not from `dir_fd`, so a link to a sibling directory (`../x`) works as before.
        match self.dir.stat_beneath(&rel(v).join(raw), true) {
            Ok(md) => Some(metadata_from(name, &md)),
            // Escaping, dangling, or (in the fallback) any link: listed, never followed.
            Err(_) => Some(other_from(name, &lmd)),
        }
    }

    /// The parent directory fd of `v` (resolved beneath the root) and the final name; `None` for the root.
    fn parent(&self, v: &str) -> Result<Option<(OwnedFd, String)>> {
        if v == "/" {
            return Ok(None);
        }
        let (fd, name) = self
            .dir
            .parent_beneath(rel(v))
            .map_err(|e| resolve_err(v, e))?;
        let name = name.to_string_lossy().into_owned();
        Ok(Some((fd, name)))
    }
}

/// A normalised virtual path as a path relative to the root (empty for the root itself).
fn rel(v: &str) -> &Path {
    Path::new(v.trim_start_matches('/'))
}

/// Classify an error from resolving `v` beneath the root: `EXDEV` is the kernel's "this would leave the root"
/// (only resolution returns it here: renames across mounts go through [`StorageError::from_io`]).
fn resolve_err(v: &str, e: io::Error) -> StorageError {
    match e.raw_os_error() {
        Some(libc::EXDEV) => StorageError::Escape(v.into()),
        _ if e.kind() == io::ErrorKind::InvalidInput => StorageError::InvalidPath(v.into()),
        _ => StorageError::from_io(v, e),
    }
}

/// `Ok(None)` for a name that does not exist.
fn lstat_opt(dir: &OwnedFd, name: &str, v: &str) -> Result<Option<std::fs::Metadata>> {
    match resolve::lstat_at(dir.as_fd(), OsStr::new(name)) {
        Ok(md) => Ok(Some(md)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(resolve_err(v, e)),
    }
}

fn modified_of(md: &std::fs::Metadata) -> SystemTime {
    md.modified().unwrap_or(UNIX_EPOCH)
}

fn metadata_from(name: &str, md: &std::fs::Metadata) -> Metadata {
    let ft = md.file_type();
    let kind = if ft.is_file() {
        EntryKind::File
    } else if ft.is_dir() {
        EntryKind::Dir
    } else {
        EntryKind::Other
    };
    Metadata {
        name: name.into(),
        kind,
        size: if kind == EntryKind::File { md.len() } else { 0 },
        modified: modified_of(md),
        mode: md.permissions().mode() & 0o7777,
    }
}

fn other_from(name: &str, md: &std::fs::Metadata) -> Metadata {
    Metadata {
        name: name.into(),
        kind: EntryKind::Other,
        size: 0,
        modified: modified_of(md),
        mode: md.permissions().mode() & 0o7777,
    }
}

/// A freshly opened fd as a `File`, checked to be a regular file.
fn regular(fd: OwnedFd, v: &str) -> Result<File> {
    let file = File::from(fd);
    let md = file.metadata().map_err(|e| StorageError::from_io(v, e))?;
    if !md.is_file() {
        return Err(StorageError::NotAFile(v.into()));
    }
    Ok(file)
}

/// Whether any component of `v` is a part name: the final one (a part file) or one above it (the kept
/// partials' directory, `kept.rs`), so nothing beneath a hidden name can be named either.
fn names_part(v: &str) -> bool {
    v.split('/').any(is_part_name)
}

/// Refuse to create a name that would look like a hidden part file, or anything beneath one.
fn check_creatable_name(v: &str) -> Result<()> {
    if names_part(v) {
        return Err(StorageError::InvalidPath(v.into()));
    }
    Ok(())
}

/// Part files are invisible: naming one (or anything beneath a hidden name) is the same as naming nothing.
fn check_visible_name(v: &str) -> Result<()> {
    if names_part(v) {
        return Err(StorageError::NotFound(v.into()));
    }
    Ok(())
}

/// Distinguishes part files created by this process.
static PART_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh part-file name for destination `name`: `.<name>.drsftp-part.<pid>-<counter>-<nanos>`. Long names are
/// shortened so the part name still fits in `NAME_MAX`.
fn part_name(name: &str) -> String {
    const KEEP: usize = 180;
    let mut end = name.len().min(KEEP);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    let n = PART_COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        ".{}{PART_MARKER}{}-{n}-{nanos:08x}",
        &name[..end],
        std::process::id()
    )
}

impl Storage for FsStorage {
    fn stat(&self, path: &str) -> Result<Metadata> {
        let v = clean(path)?;
        check_visible_name(&v)?;
        let md = self
            .dir
            .stat_beneath(rel(&v), true)
            .map_err(|e| resolve_err(&v, e))?;
        Ok(metadata_from(file_name(&v), &md))
    }

    fn list(&self, path: &str) -> Result<Vec<Metadata>> {
        let mut out = Vec::new();
        self.list_each(path, &mut |m| {
            out.push(m);
            true
        })?;
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn list_each(&self, path: &str, f: &mut dyn FnMut(Metadata) -> bool) -> Result<()> {
        let v = clean(path)?;
        check_visible_name(&v)?;
        let dir_fd = self
            .dir
            .open_beneath(rel(&v), libc::O_PATH | libc::O_DIRECTORY, 0)
            .map_err(|e| resolve_err(&v, e))?;
        // Entries are read from, and described relative to, this very directory fd (one getdents batch at a
        // time): swapping the directory's name for a symlink now changes nothing. An entry that vanished or
        // cannot be read while listing is skipped.
        resolve::for_each_name_at(dir_fd.as_fd(), |raw| {
            let name = raw.to_string_lossy();
            if is_part_name(&name) {
                return true;
            }
            match self.entry_metadata(&dir_fd, &v, raw, &name) {
                Some(md) => f(md),
                None => true,
            }
        })
        .map_err(|e| StorageError::from_io(&v, e))
    }

    fn open_read(&self, path: &str) -> Result<Arc<dyn FileHandle>> {
        let v = clean(path)?;
        check_visible_name(&v)?;
        let file = self.open_regular(&v)?;
        Ok(Arc::new(FsFile { file, vpath: v }))
    }

    fn open_write(&self, path: &str, mode: WriteMode) -> Result<Box<dyn PartFile>> {
        let v = clean(path)?;
        check_creatable_name(&v)?;
        let Some((dir, name)) = self.parent(&v)? else {
            return Err(StorageError::NotAFile(v));
        };
        let existing = lstat_opt(&dir, &name, &v)?;
        if existing.as_ref().is_some_and(|md| md.is_dir()) {
            return Err(StorageError::NotAFile(v));
        }
        match mode {
            WriteMode::Replace => {
                // The part file is created next to the destination, in the resolved parent; a symlink or
                // special file at the destination is simply replaced by the rename on commit.
                let mut last_err = None;
                for _ in 0..16 {
                    let part = part_name(&name);
                    let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | OPEN_FLAGS;
                    match resolve::open_at(dir.as_fd(), OsStr::new(&part), flags, NEW_FILE_MODE) {
                        Ok(fd) => {
                            return Ok(Box::new(FsPart {
                                file: Arc::new(FsFile {
                                    file: File::from(fd),
                                    vpath: v.clone(),
                                }),
                                dir,
                                part: Some(part),
                                name,
                                vpath: v,
                            }));
                        }
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_err = Some(e),
                        Err(e) => return Err(StorageError::from_io(&v, e)),
                    }
                }
                let e = last_err.unwrap_or_else(|| io::Error::from(io::ErrorKind::AlreadyExists));
                Err(StorageError::Io {
                    context: format!("{v}: creating part file"),
                    source: e,
                })
            }
            WriteMode::InPlace => {
                let fd = match &existing {
                    Some(md) if md.file_type().is_symlink() => {
                        // Follow only to an existing target beneath the root; never create through a link.
                        let flags = libc::O_RDWR | OPEN_FLAGS;
                        self.dir.open_beneath(rel(&v), flags, 0).map_err(|e| {
                            match e.raw_os_error() {
                                Some(libc::EXDEV | libc::ELOOP | libc::ENOENT) => {
                                    StorageError::Escape(v.clone())
                                }
                                _ => StorageError::from_io(&v, e),
                            }
                        })?
                    }
                    Some(md) if !md.is_file() => return Err(StorageError::NotAFile(v)),
                    _ => {
                        // O_NOFOLLOW (added by open_at): a link planted since the lstat fails with ELOOP.
                        let flags = libc::O_RDWR | libc::O_CREAT | OPEN_FLAGS;
                        resolve::open_at(dir.as_fd(), OsStr::new(&name), flags, NEW_FILE_MODE)
                            .map_err(|e| resolve_err(&v, e))?
                    }
                };
                let file = regular(fd, &v)?;
                Ok(Box::new(FsPart {
                    file: Arc::new(FsFile {
                        file,
                        vpath: v.clone(),
                    }),
                    dir,
                    part: None,
                    name,
                    vpath: v,
                }))
            }
        }
    }

    fn kept_held(&self, id: &KeptId, limits: &KeptLimits) -> Result<Option<String>> {
        let id = KeptId {
            path: clean(&id.path)?,
            ..id.clone()
        };
        crate::kept::held(&self.dir, &id, limits)
    }

    fn kept_open(
        &self,
        id: &KeptId,
        resume: bool,
        limits: &KeptLimits,
    ) -> Result<Option<(Box<dyn PartFile>, String)>> {
        let v = clean(&id.path)?;
        check_creatable_name(&v)?;
        let Some((dir, name)) = self.parent(&v)? else {
            return Err(StorageError::NotAFile(v));
        };
        if lstat_opt(&dir, &name, &v)?.is_some_and(|md| md.is_dir()) {
            return Err(StorageError::NotAFile(v));
        }
        let id = KeptId {
            path: v,
            ..id.clone()
        };
        crate::kept::open(&self.dir, &id, resume, limits, dir, name)
    }

    fn mkdir(&self, path: &str) -> Result<()> {
        let v = clean(path)?;
        check_creatable_name(&v)?;
        if v == "/" {
            return Err(StorageError::AlreadyExists(v));
        }
        self.dir
            .mkdir_beneath(rel(&v), NEW_DIR_MODE)
            .map_err(|e| resolve_err(&v, e))
    }

    fn rmdir(&self, path: &str) -> Result<()> {
        let v = clean(path)?;
        check_visible_name(&v)?;
        if v == "/" {
            return Err(StorageError::PermissionDenied(v));
        }
        self.dir
            .rmdir_beneath(rel(&v))
            .map_err(|e| resolve_err(&v, e))
    }

    fn remove(&self, path: &str) -> Result<()> {
        let v = clean(path)?;
        check_visible_name(&v)?;
        if v == "/" {
            return Err(StorageError::NotAFile(v));
        }
        self.dir
            .unlink_beneath(rel(&v))
            .map_err(|e| resolve_err(&v, e))
    }

    fn set_modified(&self, path: &str, time: SystemTime) -> Result<()> {
        let v = clean(path)?;
        check_visible_name(&v)?;
        self.open_regular(&v)?
            .set_modified(time)
            .map_err(|e| StorageError::from_io(&v, e))
    }

    fn rename(&self, from: &str, to: &str) -> Result<()> {
        let from = clean(from)?;
        let to = clean(to)?;
        check_visible_name(&from)?;
        let Some((src_dir, src_name)) = self.parent(&from)? else {
            return Err(StorageError::PermissionDenied(from));
        };
        check_creatable_name(&to)?;
        let Some((dst_dir, dst_name)) = self.parent(&to)? else {
            return Err(StorageError::AlreadyExists(to));
        };
        // The source is described, not followed: a symlink is renamed as a link (see the module docs).
        let src_md = lstat_opt(&src_dir, &src_name, &from)?
            .ok_or_else(|| StorageError::NotFound(from.clone()))?;
        if from == to {
            return Ok(());
        }
        match lstat_opt(&dst_dir, &dst_name, &to)? {
            Some(md) if md.is_dir() => return Err(StorageError::AlreadyExists(to)),
            Some(_) if src_md.is_dir() => return Err(StorageError::NotADirectory(to)),
            _ => {}
        }
        if src_md.is_dir() && is_strictly_below(&to, &from) {
            return Err(StorageError::Invalid(format!(
                "cannot move {from} into itself ({to})"
            )));
        }
        resolve::rename_at(
            src_dir.as_fd(),
            OsStr::new(&src_name),
            dst_dir.as_fd(),
            OsStr::new(&dst_name),
        )
        .map_err(|e| StorageError::from_io(&to, e))
    }
}

/// An open host file with positioned I/O (also a kept partial upload's, `kept.rs`).
#[derive(Debug)]
pub(crate) struct FsFile {
    pub(crate) file: File,
    /// Virtual path, for error messages (host paths are never shown to clients).
    pub(crate) vpath: String,
}

impl FileHandle for FsFile {
    fn host_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.file.as_fd())
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        loop {
            match self.file.read_at(buf, offset) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(StorageError::from_io(&self.vpath, e)),
            }
        }
    }

    fn read_vectored_at(&self, bufs: &mut [io::IoSliceMut<'_>], offset: u64) -> Result<usize> {
        drsftp_sys::fileio::preadv(self.file.as_fd(), bufs, offset)
            .map_err(|e| StorageError::from_io(&self.vpath, e))
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.file
            .write_all_at(buf, offset)
            .map_err(|e| StorageError::from_io(&self.vpath, e))
    }

    fn write_vectored_at(&self, bufs: &mut [io::IoSlice<'_>], offset: u64) -> Result<()> {
        drsftp_sys::fileio::pwritev_all(self.file.as_fd(), bufs, offset)
            .map_err(|e| StorageError::from_io(&self.vpath, e))
    }

    fn len(&self) -> Result<u64> {
        self.file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| StorageError::from_io(&self.vpath, e))
    }

    fn sync(&self) -> Result<()> {
        self.file
            .sync_all()
            .map_err(|e| StorageError::from_io(&self.vpath, e))
    }

    fn start_writeback(&self) -> Result<()> {
        drsftp_sys::fileio::start_writeback(self.file.as_fd())
            .map_err(|e| StorageError::from_io(&self.vpath, e))
    }
}

/// An upload on the filesystem: a hidden part file next to the destination (`Replace`) or the destination itself
/// (`InPlace`, `part` is `None`).
#[derive(Debug)]
struct FsPart {
    file: Arc<FsFile>,
    /// The destination's parent, resolved beneath the root when the upload began: commit and cleanup act on
    /// names in this directory only.
    dir: OwnedFd,
    /// The part file's name in `dir`, while it exists and has not been renamed into place.
    part: Option<String>,
    /// The destination's name in `dir`.
    name: String,
    vpath: String,
}

impl PartFile for FsPart {
    fn handle(&self) -> Arc<dyn FileHandle> {
        self.file.clone()
    }

    fn commit(mut self: Box<Self>) -> Result<()> {
        self.file.sync()?;
        if let Some(part) = self.part.as_ref() {
            resolve::rename_at(
                self.dir.as_fd(),
                OsStr::new(part),
                self.dir.as_fd(),
                OsStr::new(&self.name),
            )
            .map_err(|e| StorageError::from_io(&self.vpath, e))?;
            self.part = None;
            // Best effort: makes the rename durable.
            let _ = resolve::sync_dir(self.dir.as_fd());
        }
        Ok(())
    }

    fn abort(self: Box<Self>) {}
}

impl Drop for FsPart {
    fn drop(&mut self) {
        if let Some(part) = self.part.take() {
            let _ = resolve::unlink_at(self.dir.as_fd(), OsStr::new(&part));
        }
    }
}
