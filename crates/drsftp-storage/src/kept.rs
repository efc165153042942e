//! Kept partial uploads (docs/resume.md "Upload resume"): an upload the client announced as resumable writes a
//! part file named by (user, path, size, source tag) in the hidden directory `/.drsftp-part.kept` of the user's
//! area, with a checkpoint of the byte ranges on disk next to it; a failed upload leaves both for a rerun, a
//! complete one is renamed to its destination. Both names are part names, so no client can list, open, create
//! or rename them through the FTP verbs; only [`crate::Storage::kept_open`] and [`crate::Storage::kept_held`]
//! reach them, and only with the identity that made them.
//!
//! Every query and open sweeps the directory first: partials older than the age limit go (anyone's), then the
//! user's own oldest until their count and byte caps hold (bytes as allocated on disk, so a sparse file counts
//! what it really costs); users sharing one area never evict each other's partials. A partial in use (its part
//! file `flock`ed by a running upload) is never removed.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use drsftp_sys::resolve::{self, Root};

use crate::fs::FsFile;
use sha2::{Digest, Sha256};

use crate::{FileHandle, PartFile, Result, StorageError};

/// The directory holding kept partials, at the root of the user's area (a part name: hidden from every verb).
pub const KEPT_DIR: &str = ".drsftp-part.kept";
const FORMAT: &str = "drsftp-kept 1";
/// A part file without a checkpoint this old is debris of a crash between the two creates.
const ORPHAN_AGE: Duration = Duration::from_secs(60);

/// Serialises sweeps and opens in this process, so two uploads cannot both see room under the caps.
static SWEEP: Mutex<()> = Mutex::new(());

/// What a kept partial belongs to: the same user uploading the same local source (tag) to the same path with
/// the same size. Anything else never sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptId {
    /// Login name.
    pub user: String,
    /// Absolute virtual destination path.
    pub path: String,
    /// Size announced with ALLO.
    pub size: u64,
    /// The client's name for its source's version (e.g. a hash of its size, mtime and inode).
    pub tag: String,
}

impl KeptId {
    /// The file name: a SHA-256 of the whole identity, so no part of a name a user chose reaches the disk.
    fn key(&self) -> String {
        let mut h = Sha256::new();
        for part in [
            self.user.as_bytes(),
            self.path.as_bytes(),
            self.tag.as_bytes(),
        ] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.update(self.size.to_le_bytes());
        h.finalize()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The checkpoint's header (control characters shown as `?`; the key already binds the exact identity).
    fn header(&self) -> String {
        let clean = |s: &str| -> String {
            s.chars()
                .map(|c| if c.is_control() { '?' } else { c })
                .collect()
        };
        format!(
            "{FORMAT}\nuser {}\npath {}\nsize {}\ntag {}\n\n",
            clean(&self.user),
            clean(&self.path),
            self.size,
            clean(&self.tag)
        )
    }
}

/// Per-user bounds on kept partials (`serve --partials-*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeptLimits {
    /// Most partials one user's area keeps; 0 turns upload resume off.
    pub max_files: usize,
    /// Most bytes (allocated on disk) they may take together.
    pub max_bytes: u64,
    /// A partial not written for this long is removed.
    pub max_age: Duration,
}

impl Default for KeptLimits {
    fn default() -> Self {
        KeptLimits {
            max_files: 8,
            max_bytes: 64 << 30,
            max_age: Duration::from_secs(24 * 3600),
        }
    }
}

/// A kept partial opened for an upload: its part file (locked), the ranges it held when opened, and the
/// destination it is renamed to on commit.
#[derive(Debug)]
pub(crate) struct KeptPart {
    /// The part file; the `flock` taken on open lasts as long as the file.
    file: Arc<FsFile>,
    kept: OwnedFd,
    key: String,
    header: String,
    dest_dir: OwnedFd,
    dest_name: String,
    vpath: String,
    committed: bool,
}

impl PartFile for KeptPart {
    fn handle(&self) -> Arc<dyn FileHandle> {
        self.file.clone()
    }

    fn commit(mut self: Box<Self>) -> Result<()> {
        self.file.sync()?;
        resolve::rename_at(
            self.kept.as_fd(),
            OsStr::new(&self.key),
            self.dest_dir.as_fd(),
            OsStr::new(&self.dest_name),
        )
        .map_err(|e| StorageError::from_io(&self.vpath, e))?;
        self.committed = true;
        let _ = resolve::unlink_at(self.kept.as_fd(), OsStr::new(&ck_name(&self.key)));
        let _ = resolve::sync_dir(self.dest_dir.as_fd());
        Ok(())
    }

    fn abort(self: Box<Self>) {}

    fn save_held(&self, ranges: &str) -> Result<()> {
        if self.committed {
            return Ok(());
        }
        // The bytes first, then the claim: a checkpoint never names bytes that are not on disk.
        self.file.sync()?;
        write_ck(&self.kept, &self.key, &self.header, ranges)
            .map_err(|e| StorageError::from_io(&self.vpath, e))
    }
}

fn ck_name(key: &str) -> String {
    format!("{key}.ck")
}

fn write_ck(kept: &OwnedFd, key: &str, header: &str, ranges: &str) -> io::Result<()> {
    let tmp = format!("{key}.ck.tmp");
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC;
    let mut f = File::from(resolve::open_at(
        kept.as_fd(),
        OsStr::new(&tmp),
        flags,
        0o600,
    )?);
    f.write_all(header.as_bytes())?;
    f.write_all(ranges.as_bytes())?;
    f.sync_all()?;
    resolve::rename_at(
        kept.as_fd(),
        OsStr::new(&tmp),
        kept.as_fd(),
        OsStr::new(&ck_name(key)),
    )
}

/// The ranges text of `key`'s checkpoint if it belongs to `header`'s identity.
fn read_ck(kept: &OwnedFd, key: &str, header: &str) -> io::Result<Option<String>> {
    let flags = libc::O_RDONLY | libc::O_CLOEXEC;
    let mut f = match resolve::open_at(kept.as_fd(), OsStr::new(&ck_name(key)), flags, 0) {
        Ok(fd) => File::from(fd),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut s = String::new();
    // A checkpoint is a header and one line of ranges; anything far larger is not ours.
    (&mut f).take(1 << 20).read_to_string(&mut s)?;
    Ok(s.strip_prefix(header).map(|r| r.trim().to_string()))
}

/// Opens (creating if `create`) the kept directory beneath `root`.
fn kept_dir(root: &Root, create: bool) -> io::Result<Option<OwnedFd>> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    match root.open_beneath(Path::new(KEPT_DIR), flags, 0) {
        Ok(fd) => Ok(Some(fd)),
        Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
            match root.mkdir_beneath(Path::new(KEPT_DIR), 0o700) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
            root.open_beneath(Path::new(KEPT_DIR), flags, 0).map(Some)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// One partial found by a sweep.
struct Found {
    key: String,
    modified: SystemTime,
    bytes: u64,
    /// Whether it belongs to the user the caps are applied for.
    mine: bool,
}

/// Whether `key`'s checkpoint names `user` (the `user` line of its header).
fn owned_by(kept: &OwnedFd, key: &str, user: &str) -> bool {
    let flags = libc::O_RDONLY | libc::O_CLOEXEC;
    let Ok(fd) = resolve::open_at(kept.as_fd(), OsStr::new(&ck_name(key)), flags, 0) else {
        return false;
    };
    let mut head = String::new();
    let _ = File::from(fd).take(4096).read_to_string(&mut head);
    let want = KeptId {
        user: user.to_string(),
        path: String::new(),
        size: 0,
        tag: String::new(),
    };
    let line = want.header();
    let user_line = line.lines().nth(1).unwrap_or_default();
    head.lines().nth(1) == Some(user_line)
}

/// Whether `key`'s part file is locked by a running upload.
fn in_use(kept: &OwnedFd, key: &str) -> bool {
    let flags = libc::O_RDONLY | libc::O_CLOEXEC;
    match resolve::open_at(kept.as_fd(), OsStr::new(key), flags, 0) {
        Ok(fd) => File::from(fd).try_lock().is_err(),
        Err(_) => false,
    }
}

fn remove_kept(kept: &OwnedFd, key: &str) {
    let _ = resolve::unlink_at(kept.as_fd(), OsStr::new(key));
    let _ = resolve::unlink_at(kept.as_fd(), OsStr::new(&ck_name(key)));
}

/// Removes every partial past the age limit, and the oldest of `user`'s own until their count (with room for
/// `room` more) and bytes are within the caps: one user cannot evict another's partials.
fn sweep(
    kept: &OwnedFd,
    user: &str,
    limits: &KeptLimits,
    now: SystemTime,
    room: usize,
) -> io::Result<()> {
    let names: Vec<OsString> = resolve::read_dir_at(kept.as_fd())?;
    let mut found = Vec::new();
    for n in &names {
        let Some(name) = n.to_str() else {
            let _ = resolve::unlink_at(kept.as_fd(), n);
            continue;
        };
        let Ok(md) = resolve::lstat_at(kept.as_fd(), n) else {
            continue;
        };
        let age = now
            .duration_since(md.modified().unwrap_or(now))
            .unwrap_or_default();
        if let Some(key) = name.strip_suffix(".ck") {
            if !names.iter().any(|m| m == key) {
                let _ = resolve::unlink_at(kept.as_fd(), n);
            }
            continue;
        }
        if name.ends_with(".tmp") {
            if age > ORPHAN_AGE {
                let _ = resolve::unlink_at(kept.as_fd(), n);
            }
            continue;
        }
        let ck = lstat_at_str(kept, &ck_name(name));
        let modified = match &ck {
            Some(c) => c.modified().unwrap_or(now),
            None if age > ORPHAN_AGE && !in_use(kept, name) => {
                let _ = resolve::unlink_at(kept.as_fd(), n);
                continue;
            }
            None => md.modified().unwrap_or(now),
        };
        found.push(Found {
            key: name.to_string(),
            modified: modified.max(md.modified().unwrap_or(modified)),
            bytes: md.blocks() * 512,
            mine: ck.is_some() && owned_by(kept, name, user),
        });
    }
    // Oldest first: expired ones go, then the oldest until the caps hold with room for `room` more.
    found.sort_by_key(|f| f.modified);
    let mut count = found.iter().filter(|f| f.mine).count();
    let mut bytes: u64 = found.iter().filter(|f| f.mine).map(|f| f.bytes).sum();
    for f in &found {
        let expired = now.duration_since(f.modified).unwrap_or_default() > limits.max_age;
        let over = f.mine && (count + room > limits.max_files || bytes > limits.max_bytes);
        if (expired || over) && !in_use(kept, &f.key) {
            remove_kept(kept, &f.key);
            if f.mine {
                count -= 1;
                bytes -= f.bytes;
            }
        }
    }
    Ok(())
}

fn lstat_at_str(kept: &OwnedFd, name: &str) -> Option<std::fs::Metadata> {
    resolve::lstat_at(kept.as_fd(), OsStr::new(name)).ok()
}

/// The ranges text `id`'s partial holds, after a sweep; `None` if none is kept (or the limits keep none).
pub(crate) fn held(root: &Root, id: &KeptId, limits: &KeptLimits) -> Result<Option<String>> {
    if limits.max_files == 0 {
        return Ok(None);
    }
    let _g = SWEEP.lock().unwrap_or_else(|p| p.into_inner());
    let io = |e| StorageError::from_io(&id.path, e);
    let Some(kept) = kept_dir(root, false).map_err(io)? else {
        return Ok(None);
    };
    sweep(&kept, &id.user, limits, SystemTime::now(), 0).map_err(io)?;
    read_ck(&kept, &id.key(), &id.header()).map_err(io)
}

/// Opens `id`'s partial for an upload to the destination `dest_dir`/`dest_name`: with `resume`, the bytes it
/// holds are kept and their ranges returned; otherwise it starts empty. `Ok(None)` when it cannot be kept
/// (limits of 0, or another upload holds it): the caller uploads the ordinary way.
pub(crate) fn open(
    root: &Root,
    id: &KeptId,
    resume: bool,
    limits: &KeptLimits,
    dest_dir: OwnedFd,
    dest_name: String,
) -> Result<Option<(Box<dyn PartFile>, String)>> {
    if limits.max_files == 0 {
        return Ok(None);
    }
    let _g = SWEEP.lock().unwrap_or_else(|p| p.into_inner());
    let io = |e| StorageError::from_io(&id.path, e);
    let kept = kept_dir(root, true)
        .map_err(io)?
        .ok_or_else(|| StorageError::from_io(&id.path, io::Error::from(io::ErrorKind::NotFound)))?;
    let key = id.key();
    let header = id.header();
    let exists = resolve::lstat_at(kept.as_fd(), OsStr::new(&key)).is_ok();
    sweep(
        &kept,
        &id.user,
        limits,
        SystemTime::now(),
        usize::from(!exists),
    )
    .map_err(io)?;
    let flags = libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC;
    let file =
        File::from(resolve::open_at(kept.as_fd(), OsStr::new(&key), flags, 0o600).map_err(io)?);
    if file.try_lock().is_err() {
        return Ok(None);
    }
    let held = if resume {
        read_ck(&kept, &key, &header)
            .map_err(io)?
            .unwrap_or_default()
    } else {
        String::new()
    };
    if held.is_empty() {
        file.set_len(0).map_err(io)?;
    }
    write_ck(&kept, &key, &header, &held).map_err(io)?;
    let part = KeptPart {
        file: Arc::new(FsFile {
            file,
            vpath: id.path.clone(),
        }),
        kept,
        key,
        header,
        dest_dir,
        dest_name,
        vpath: id.path.clone(),
        committed: false,
    };
    Ok(Some((Box::new(part), held)))
}
