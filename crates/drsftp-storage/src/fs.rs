//! Filesystem backend confined to a served root ([`FsStorage`]): root confinement of virtual paths (`..`, absolute
//! host paths and symlinks pointing out are refused), positioned file I/O, and hidden part files that are renamed
//! into place on commit and deleted when dropped.
//!
//! Confinement: a virtual path is normalised lexically, joined to the canonical root, and the existing part is
//! canonicalised (all symlinks resolved) and must still lie under the root. For paths being created only the
//! parent is canonicalised; the final component is then opened with `O_NOFOLLOW`, so a symlink planted at the
//! destination is never followed. Operations that act on a name itself (remove, rmdir, rename) canonicalise only
//! the parent and never follow the final component. What remains is the usual check-then-use race against a
//! local user who can rewrite directories inside the root while a request is in flight.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::path::{clean, file_name, is_part_name, is_strictly_below, split_parent, PART_MARKER};
use crate::{EntryKind, FileHandle, Metadata, PartFile, Result, Storage, StorageError, WriteMode};

/// A directory tree on the local filesystem served as `/`.
#[derive(Debug, Clone)]
pub struct FsStorage {
    /// Canonical (symlink-free, absolute) root.
    root: PathBuf,
}

/// Open flags added to every open: never follow a symlink in the final component (the path was canonicalised,
/// so one there was planted after the check), and never block opening a FIFO or device.
const OPEN_FLAGS: i32 = libc::O_NOFOLLOW | libc::O_NONBLOCK;

impl FsStorage {
    /// Serve the directory `root`. It is canonicalised once here; it must exist and be a directory.
    pub fn new(root: impl Into<PathBuf>) -> Result<Self> {
        let root = root.into();
        let shown = root.display().to_string();
        let canon = fs::canonicalize(&root).map_err(|e| StorageError::from_io(&shown, e))?;
        let md = fs::metadata(&canon).map_err(|e| StorageError::from_io(&shown, e))?;
        if !md.is_dir() {
            return Err(StorageError::NotADirectory(shown));
        }
        Ok(FsStorage { root: canon })
    }

    /// The canonical host directory served as `/`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Host path of a normalised virtual path, before any symlink resolution.
    fn host(&self, norm: &str) -> PathBuf {
        let rel = norm.trim_start_matches('/');
        if rel.is_empty() {
            self.root.clone()
        } else {
            self.root.join(rel)
        }
    }

    fn confine(&self, canon: PathBuf, v: &str) -> Result<PathBuf> {
        if canon.starts_with(&self.root) {
            Ok(canon)
        } else {
            Err(StorageError::Escape(v.into()))
        }
    }

    /// Canonicalise the existing host path for `v` and check it stays under the root.
    fn canonical(&self, host: &Path, v: &str) -> Result<PathBuf> {
        match fs::canonicalize(host) {
            Ok(c) => self.confine(c, v),
            Err(e) => {
                // Before reporting NotFound/NotADirectory, check the deepest existing ancestor too, so a symlink
                // pointing out of the root cannot be used to probe which host paths exist.
                let mut anc = host.parent();
                while let Some(a) = anc {
                    if let Ok(c) = fs::canonicalize(a) {
                        self.confine(c, v)?;
                        break;
                    }
                    if a == self.root {
                        break;
                    }
                    anc = a.parent();
                }
                Err(StorageError::from_io(v, e))
            }
        }
    }

    /// Canonical host path of an existing virtual path (all symlinks resolved, confined).
    fn resolve_existing(&self, v: &str) -> Result<PathBuf> {
        if is_part_name(file_name(v)) {
            return Err(StorageError::NotFound(v.into()));
        }
        self.canonical(&self.host(v), v)
    }

    /// Host path of `v` with its parent canonicalised and confined; the final component is not resolved.
    /// `None` for the root.
    fn resolve_name(&self, v: &str) -> Result<Option<PathBuf>> {
        let Some((parent, name)) = split_parent(v) else {
            return Ok(None);
        };
        let parent = self.canonical(&self.host(parent), v)?;
        Ok(Some(parent.join(name)))
    }

    /// Like [`Self::resolve_name`] for an existing entry: part files are not visible.
    fn resolve_existing_name(&self, v: &str) -> Result<Option<PathBuf>> {
        if is_part_name(file_name(v)) {
            return Err(StorageError::NotFound(v.into()));
        }
        self.resolve_name(v)
    }

    /// Metadata of one listing entry; symlinks are followed only when they stay inside the root.
    fn entry_metadata(&self, dir: &Path, name: &str, raw: &std::ffi::OsStr) -> Option<Metadata> {
        let p = dir.join(raw);
        let lmd = fs::symlink_metadata(&p).ok()?;
        if !lmd.file_type().is_symlink() {
            return Some(metadata_from(name, &lmd));
        }
        match fs::canonicalize(&p) {
            Ok(t) if t.starts_with(&self.root) => match fs::metadata(&t) {
                Ok(md) => Some(metadata_from(name, &md)),
                Err(_) => Some(other_from(name, &lmd)),
            },
            // Escaping or dangling: listed, never followed.
            _ => Some(other_from(name, &lmd)),
        }
    }
}

fn modified_of(md: &fs::Metadata) -> SystemTime {
    md.modified().unwrap_or(UNIX_EPOCH)
}

fn metadata_from(name: &str, md: &fs::Metadata) -> Metadata {
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

fn other_from(name: &str, md: &fs::Metadata) -> Metadata {
    Metadata {
        name: name.into(),
        kind: EntryKind::Other,
        size: 0,
        modified: modified_of(md),
        mode: md.permissions().mode() & 0o7777,
    }
}

/// Open `path` (already confined) and check it is a regular file.
fn open_regular(opts: &OpenOptions, path: &Path, v: &str) -> Result<File> {
    let file = opts.open(path).map_err(|e| StorageError::from_io(v, e))?;
    let md = file.metadata().map_err(|e| StorageError::from_io(v, e))?;
    if !md.is_file() {
        return Err(StorageError::NotAFile(v.into()));
    }
    Ok(file)
}

/// Refuse to create a name that would look like a hidden part file.
fn check_creatable_name(v: &str) -> Result<()> {
    if is_part_name(file_name(v)) {
        return Err(StorageError::InvalidPath(v.into()));
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

/// Best-effort fsync of a directory, so a rename into it is durable.
fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

impl Storage for FsStorage {
    fn stat(&self, path: &str) -> Result<Metadata> {
        let v = clean(path)?;
        let canon = self.resolve_existing(&v)?;
        let md = fs::symlink_metadata(&canon).map_err(|e| StorageError::from_io(&v, e))?;
        Ok(metadata_from(file_name(&v), &md))
    }

    fn list(&self, path: &str) -> Result<Vec<Metadata>> {
        let v = clean(path)?;
        let dir = self.resolve_existing(&v)?;
        let rd = fs::read_dir(&dir).map_err(|e| StorageError::from_io(&v, e))?;
        let mut out = Vec::new();
        for entry in rd {
            // An entry that vanished or cannot be read while listing is skipped.
            let Ok(entry) = entry else { continue };
            let raw = entry.file_name();
            let name = raw.to_string_lossy().into_owned();
            if is_part_name(&name) {
                continue;
            }
            if let Some(md) = self.entry_metadata(&dir, &name, &raw) {
                out.push(md);
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn open_read(&self, path: &str) -> Result<Arc<dyn FileHandle>> {
        let v = clean(path)?;
        let canon = self.resolve_existing(&v)?;
        let md = fs::symlink_metadata(&canon).map_err(|e| StorageError::from_io(&v, e))?;
        if !md.is_file() {
            return Err(StorageError::NotAFile(v));
        }
        let mut opts = OpenOptions::new();
        opts.read(true).custom_flags(OPEN_FLAGS);
        let file = open_regular(&opts, &canon, &v)?;
        Ok(Arc::new(FsFile { file, vpath: v }))
    }

    fn open_write(&self, path: &str, mode: WriteMode) -> Result<Box<dyn PartFile>> {
        let v = clean(path)?;
        check_creatable_name(&v)?;
        let Some(dest) = self.resolve_name(&v)? else {
            return Err(StorageError::NotAFile(v));
        };
        let existing = match fs::symlink_metadata(&dest) {
            Ok(md) => Some(md),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(StorageError::from_io(&v, e)),
        };
        if existing.as_ref().is_some_and(|md| md.is_dir()) {
            return Err(StorageError::NotAFile(v));
        }
        match mode {
            WriteMode::Replace => {
                // A symlink or special file at the destination is simply replaced by the rename on commit.
                let dir = dest.parent().unwrap_or(&self.root).to_path_buf();
                let mut last_err = None;
                for _ in 0..16 {
                    let part = dir.join(part_name(file_name(&v)));
                    let mut opts = OpenOptions::new();
                    opts.read(true)
                        .write(true)
                        .create_new(true)
                        .custom_flags(OPEN_FLAGS);
                    match opts.open(&part) {
                        Ok(file) => {
                            return Ok(Box::new(FsPart {
                                file: Arc::new(FsFile {
                                    file,
                                    vpath: v.clone(),
                                }),
                                part: Some(part),
                                dest,
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
                let target = match &existing {
                    Some(md) if md.file_type().is_symlink() => {
                        // Follow only to an existing target inside the root; never create through a link.
                        let t =
                            fs::canonicalize(&dest).map_err(|_| StorageError::Escape(v.clone()))?;
                        self.confine(t, &v)?
                    }
                    Some(md) if !md.is_file() => return Err(StorageError::NotAFile(v)),
                    _ => dest.clone(),
                };
                let mut opts = OpenOptions::new();
                opts.read(true)
                    .write(true)
                    .create(true)
                    .custom_flags(OPEN_FLAGS);
                let file = open_regular(&opts, &target, &v)?;
                Ok(Box::new(FsPart {
                    file: Arc::new(FsFile {
                        file,
                        vpath: v.clone(),
                    }),
                    part: None,
                    dest: target,
                    vpath: v,
                }))
            }
        }
    }

    fn mkdir(&self, path: &str) -> Result<()> {
        let v = clean(path)?;
        check_creatable_name(&v)?;
        let Some(target) = self.resolve_name(&v)? else {
            return Err(StorageError::AlreadyExists(v));
        };
        fs::create_dir(&target).map_err(|e| StorageError::from_io(&v, e))
    }

    fn rmdir(&self, path: &str) -> Result<()> {
        let v = clean(path)?;
        let Some(target) = self.resolve_existing_name(&v)? else {
            return Err(StorageError::PermissionDenied(v));
        };
        fs::remove_dir(&target).map_err(|e| StorageError::from_io(&v, e))
    }

    fn remove(&self, path: &str) -> Result<()> {
        let v = clean(path)?;
        let Some(target) = self.resolve_existing_name(&v)? else {
            return Err(StorageError::NotAFile(v));
        };
        fs::remove_file(&target).map_err(|e| StorageError::from_io(&v, e))
    }

    fn rename(&self, from: &str, to: &str) -> Result<()> {
        let from = clean(from)?;
        let to = clean(to)?;
        let Some(src) = self.resolve_existing_name(&from)? else {
            return Err(StorageError::PermissionDenied(from));
        };
        check_creatable_name(&to)?;
        let Some(dst) = self.resolve_name(&to)? else {
            return Err(StorageError::AlreadyExists(to));
        };
        let src_md = fs::symlink_metadata(&src).map_err(|e| StorageError::from_io(&from, e))?;
        if from == to {
            return Ok(());
        }
        match fs::symlink_metadata(&dst) {
            Ok(md) if md.is_dir() => return Err(StorageError::AlreadyExists(to)),
            Ok(_) if src_md.is_dir() => return Err(StorageError::NotADirectory(to)),
            _ => {}
        }
        if src_md.is_dir() && is_strictly_below(&to, &from) {
            return Err(StorageError::Invalid(format!(
                "cannot move {from} into itself ({to})"
            )));
        }
        fs::rename(&src, &dst).map_err(|e| StorageError::from_io(&to, e))
    }
}

/// An open host file with positioned I/O.
#[derive(Debug)]
struct FsFile {
    file: File,
    /// Virtual path, for error messages (host paths are never shown to clients).
    vpath: String,
}

impl FileHandle for FsFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        loop {
            match self.file.read_at(buf, offset) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(StorageError::from_io(&self.vpath, e)),
            }
        }
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        self.file
            .write_all_at(buf, offset)
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
}

/// An upload on the filesystem: a hidden part file next to the destination (`Replace`) or the destination itself
/// (`InPlace`, `part` is `None`).
#[derive(Debug)]
struct FsPart {
    file: Arc<FsFile>,
    /// The part file, while it exists and has not been renamed into place.
    part: Option<PathBuf>,
    /// Host path of the destination (parent canonical).
    dest: PathBuf,
    vpath: String,
}

impl PartFile for FsPart {
    fn handle(&self) -> Arc<dyn FileHandle> {
        self.file.clone()
    }

    fn commit(mut self: Box<Self>) -> Result<()> {
        self.file.sync()?;
        if let Some(part) = self.part.as_ref() {
            fs::rename(part, &self.dest).map_err(|e| StorageError::from_io(&self.vpath, e))?;
            self.part = None;
            if let Some(dir) = self.dest.parent() {
                sync_dir(dir);
            }
        }
        Ok(())
    }

    fn abort(self: Box<Self>) {}
}

impl Drop for FsPart {
    fn drop(&mut self) {
        if let Some(part) = self.part.take() {
            let _ = fs::remove_file(part);
        }
    }
}
