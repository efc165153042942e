//! Race-free path resolution confined beneath a root directory: open a root once as a directory fd, then open,
//! stat, list, create, remove and rename paths relative to it so that no component can lead outside it, even
//! while a local user rewrites directories and symlinks inside the tree.
//!
//! Checking a path and then opening it again by name is a race (a directory swapped for a symlink in between
//! escapes); here the kernel does the check and the open in one step:
//!
//! * [`Strategy::Openat2`] (Linux 5.6+): `openat2(root, path, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`. Symlinks
//!   are followed only while every step stays beneath the root: absolute symlinks, `..` above the root and
//!   `/proc` magic links fail with `EXDEV`/`ELOOP`. A relative symlink to another file inside the root works.
//! * [`Strategy::Walk`], the fallback when `openat2` is missing (`ENOSYS`, old kernels) or filtered (`EPERM`,
//!   seccomp sandboxes): one `openat(O_NOFOLLOW)` per component, each relative to the fd of the previous one, `..`
//!   popping back to an already opened ancestor and never above the root. It cannot tell an inner symlink from an
//!   escaping one without a second, racy look-up, so it **refuses every symlink** (`ELOOP`) instead.
//!
//! Operations on a name itself (mkdir, unlink, rmdir, rename, lstat) resolve the *parent* beneath the root and
//! then act on one validated final component with the `*at` call, which never follows a symlink in it: renaming
//! or removing a symlink moves or removes the link, never its target.

use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};

use nix::errno::Errno;
use nix::fcntl::{self, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::Mode;
use nix::unistd::{self, UnlinkatFlags};

/// How paths are resolved beneath a [`Root`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`: symlinks staying inside the root are followed.
    Openat2,
    /// Component-by-component `openat` with `O_NOFOLLOW`: every symlink is refused.
    Walk,
}

impl Strategy {
    /// `Openat2` if this process may use it, else `Walk`. Probed once per process.
    pub fn detect() -> Strategy {
        // 0 = not probed yet, 1 = openat2 works, 2 = it does not.
        static PROBED: AtomicU8 = AtomicU8::new(0);
        match PROBED.load(Ordering::Relaxed) {
            1 => return Strategy::Openat2,
            2 => return Strategy::Walk,
            _ => {}
        }
        let how = OpenHow::new()
            .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
            .resolve(ResolveFlag::RESOLVE_NO_MAGICLINKS);
        // Any failure to open "/" as a path fd means openat2 itself is unusable here (ENOSYS on kernels before
        // 5.6, EPERM from a seccomp filter that does not know it).
        let works = match fcntl::openat2(libc::AT_FDCWD, "/", how) {
            Ok(raw) => {
                drop(owned(raw));
                true
            }
            Err(_) => false,
        };
        PROBED.store(if works { 1 } else { 2 }, Ordering::Relaxed);
        if works {
            Strategy::Openat2
        } else {
            Strategy::Walk
        }
    }
}

/// Take ownership of a descriptor a successful nix call just returned.
fn owned(raw: RawFd) -> OwnedFd {
    // SAFETY: `raw` comes straight from a successful open-like syscall (openat/openat2), so it is a valid, open
    // descriptor that nothing else owns; wrapping it makes this the one place that closes it.
    unsafe { OwnedFd::from_raw_fd(raw) }
}

fn err(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

/// Retry a syscall interrupted by a signal.
fn retry<T>(mut f: impl FnMut() -> nix::Result<T>) -> io::Result<T> {
    loop {
        match f() {
            Err(Errno::EINTR) => continue,
            r => return r.map_err(err),
        }
    }
}

/// Whether `name` is one plain directory entry name: not empty, not `.`/`..`, no `/` or NUL. Final components
/// handed to the `*_at` functions must be, or a `..` or `a/b` there would step outside the resolved parent.
pub fn is_plain_name(name: &OsStr) -> bool {
    let b = name.as_bytes();
    !b.is_empty() && b != b"." && b != b".." && !b.contains(&b'/') && !b.contains(&0)
}

fn check_name(name: &OsStr) -> io::Result<()> {
    if is_plain_name(name) {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a single path component"),
        ))
    }
}

/// A relative path with its empty form spelled `.` (openat2 has no `AT_EMPTY_PATH`).
fn rel_or_dot(path: &Path) -> &Path {
    if path.as_os_str().is_empty() {
        Path::new(".")
    } else {
        path
    }
}

/// Open `path` relative to `root` without ever leaving it, with open(2) `flags` (e.g. `O_RDONLY | O_NONBLOCK`;
/// `O_CLOEXEC` is always added) and `mode` (used only with `O_CREAT`/`O_TMPFILE`). An empty path is `root`
/// itself; an absolute one is refused with `EXDEV`. Uses [`Strategy::detect`].
pub fn resolve_beneath(
    root: BorrowedFd<'_>,
    path: &Path,
    flags: i32,
    mode: u32,
) -> io::Result<OwnedFd> {
    resolve_with(Strategy::detect(), root, path, flags, mode)
}

/// [`resolve_beneath`] with an explicit strategy (tests use it to exercise the fallback on any kernel).
pub fn resolve_with(
    strategy: Strategy,
    root: BorrowedFd<'_>,
    path: &Path,
    flags: i32,
    mode: u32,
) -> io::Result<OwnedFd> {
    if path.is_absolute() {
        return Err(io::Error::from_raw_os_error(libc::EXDEV));
    }
    match strategy {
        Strategy::Openat2 => resolve_openat2(root, rel_or_dot(path), flags, mode),
        Strategy::Walk => resolve_walk(root, path, flags, mode),
    }
}

fn creates(flags: i32) -> bool {
    flags & libc::O_CREAT != 0 || flags & libc::O_TMPFILE == libc::O_TMPFILE
}

fn resolve_openat2(
    root: BorrowedFd<'_>,
    path: &Path,
    flags: i32,
    mode: u32,
) -> io::Result<OwnedFd> {
    let how = OpenHow::new()
        .flags(OFlag::from_bits_retain(flags | libc::O_CLOEXEC))
        // openat2 refuses a mode without O_CREAT/O_TMPFILE (EINVAL), unlike openat which ignores it.
        .mode(Mode::from_bits_truncate(if creates(flags) {
            mode
        } else {
            0
        }))
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    // EAGAIN: a rename elsewhere raced a `..` step and the kernel could not prove it stayed beneath; it asks
    // for a retry. Bounded, so a busy attacker gets an error rather than a livelock.
    let mut tries = 0;
    loop {
        match fcntl::openat2(root.as_raw_fd(), path, how) {
            Ok(raw) => return Ok(owned(raw)),
            Err(Errno::EINTR) => continue,
            Err(Errno::EAGAIN) if tries < 16 => tries += 1,
            Err(e) => return Err(err(e)),
        }
    }
}

/// Open one component below `dir` for walking: an `O_PATH` fd to a directory, never through a symlink.
fn walk_step(dir: BorrowedFd<'_>, comp: &OsStr) -> io::Result<OwnedFd> {
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = retry(|| fcntl::openat(Some(dir.as_raw_fd()), comp, flags, Mode::empty()))?;
    let fd = owned(fd);
    // O_PATH | O_NOFOLLOW opens a symlink itself rather than failing; look at what we got.
    let ft = File::from(fd.try_clone()?).metadata()?.file_type();
    if ft.is_symlink() {
        Err(io::Error::from_raw_os_error(libc::ELOOP))
    } else if !ft.is_dir() {
        Err(io::Error::from_raw_os_error(libc::ENOTDIR))
    } else {
        Ok(fd)
    }
}

fn resolve_walk(root: BorrowedFd<'_>, path: &Path, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    let mut comps: Vec<&OsStr> = path
        .as_os_str()
        .as_bytes()
        .split(|&b| b == b'/')
        .filter(|c| !c.is_empty() && *c != b".")
        .map(OsStr::from_bytes)
        .collect();
    // The final component is opened with the caller's flags; a trailing `..` (or nothing) means the directory
    // reached by walking everything, opened as `.`.
    let last = match comps.last() {
        Some(c) if c.as_bytes() != b".." => comps.pop().unwrap_or(OsStr::new(".")),
        _ => OsStr::new("."),
    };
    // Ancestors opened so far; `..` pops one, so it can never go above the root.
    let mut stack: Vec<OwnedFd> = Vec::new();
    for comp in comps {
        if comp.as_bytes() == b".." {
            if stack.pop().is_none() {
                return Err(io::Error::from_raw_os_error(libc::EXDEV));
            }
            continue;
        }
        let cur = stack.last().map_or(root, |f| f.as_fd());
        let next = walk_step(cur, comp)?;
        stack.push(next);
    }
    let cur = stack.last().map_or(root, |f| f.as_fd());
    if flags & libc::O_PATH != 0 {
        // O_PATH | O_NOFOLLOW hands out a symlink itself (and O_DIRECTORY would then say ENOTDIR): open without
        // O_DIRECTORY and look, so a link is ELOOP like everywhere else in the fallback.
        let oflag = OFlag::from_bits_retain(
            (flags & !libc::O_DIRECTORY) | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        );
        let fd = owned(retry(|| {
            fcntl::openat(Some(cur.as_raw_fd()), last, oflag, Mode::empty())
        })?);
        let ft = File::from(fd.try_clone()?).metadata()?.file_type();
        if ft.is_symlink() {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        if flags & libc::O_DIRECTORY != 0 && !ft.is_dir() {
            return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
        }
        return Ok(fd);
    }
    let oflag = OFlag::from_bits_retain(flags | libc::O_NOFOLLOW | libc::O_CLOEXEC);
    let mode = Mode::from_bits_truncate(if creates(flags) { mode } else { 0 });
    match retry(|| fcntl::openat(Some(cur.as_raw_fd()), last, oflag, mode)) {
        Ok(raw) => Ok(owned(raw)),
        // With O_DIRECTORY a symlink fails as ENOTDIR before O_NOFOLLOW's ELOOP; report links uniformly.
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) && is_symlink_at(cur, last) => {
            Err(io::Error::from_raw_os_error(libc::ELOOP))
        }
        Err(e) => Err(e),
    }
}

/// Whether entry `name` of `dir` is a symlink (for error reporting only: nothing is opened through it).
fn is_symlink_at(dir: BorrowedFd<'_>, name: &OsStr) -> bool {
    lstat_at(dir, name).is_ok_and(|md| md.file_type().is_symlink())
}

/// Split a relative path into its parent (possibly empty: the root) and a plain final name.
fn split_final(path: &Path) -> io::Result<(&Path, &OsStr)> {
    let bytes = path.as_os_str().as_bytes();
    let trimmed = {
        let mut end = bytes.len();
        while end > 0 && bytes[end - 1] == b'/' {
            end -= 1;
        }
        &bytes[..end]
    };
    let (parent, name) = match trimmed.iter().rposition(|&b| b == b'/') {
        Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
        None => (&b""[..], trimmed),
    };
    let name = OsStr::from_bytes(name);
    check_name(name)?;
    Ok((Path::new(OsStr::from_bytes(parent)), name))
}

/// Open directory entry `name` of `dir` with `flags` plus `O_NOFOLLOW | O_CLOEXEC`: exactly one component, never
/// a symlink (with `O_PATH` a symlink is opened as itself, which is how [`lstat_at`] reads a link's metadata).
pub fn open_at(dir: BorrowedFd<'_>, name: &OsStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    check_name(name)?;
    let oflag = OFlag::from_bits_retain(flags | libc::O_NOFOLLOW | libc::O_CLOEXEC);
    let mode = Mode::from_bits_truncate(if creates(flags) { mode } else { 0 });
    Ok(owned(retry(|| {
        fcntl::openat(Some(dir.as_raw_fd()), name, oflag, mode)
    })?))
}

/// Metadata of entry `name` of `dir` itself (a symlink is described, not followed), like
/// `fstatat(AT_SYMLINK_NOFOLLOW)`.
pub fn lstat_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Metadata> {
    let fd = open_at(dir, name, libc::O_PATH, 0)?;
    File::from(fd).metadata()
}

/// Create directory `name` in `dir` with permission bits `mode` (less the umask).
pub fn mkdir_at(dir: BorrowedFd<'_>, name: &OsStr, mode: u32) -> io::Result<()> {
    check_name(name)?;
    let mode = Mode::from_bits_truncate(mode);
    retry(|| nix::sys::stat::mkdirat(Some(dir.as_raw_fd()), name, mode))
}

/// Remove non-directory `name` from `dir` (a symlink is removed itself). `EISDIR` for a directory.
pub fn unlink_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    check_name(name)?;
    retry(|| unistd::unlinkat(Some(dir.as_raw_fd()), name, UnlinkatFlags::NoRemoveDir))
}

/// Remove empty directory `name` from `dir`. `ENOTDIR` for anything else, a symlink to a directory included.
pub fn rmdir_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    check_name(name)?;
    retry(|| unistd::unlinkat(Some(dir.as_raw_fd()), name, UnlinkatFlags::RemoveDir))
}

/// Rename entry `from` of `from_dir` to `to` in `to_dir`, replacing a non-directory there. Neither name is
/// followed: a symlink is moved as a link.
pub fn rename_at(
    from_dir: BorrowedFd<'_>,
    from: &OsStr,
    to_dir: BorrowedFd<'_>,
    to: &OsStr,
) -> io::Result<()> {
    check_name(from)?;
    check_name(to)?;
    retry(|| {
        fcntl::renameat(
            Some(from_dir.as_raw_fd()),
            from,
            Some(to_dir.as_raw_fd()),
            to,
        )
    })
}

/// Names in directory `dir` (any fd to it, `O_PATH` included), without `.` and `..`, in directory order.
pub fn read_dir_at(dir: BorrowedFd<'_>) -> io::Result<Vec<OsString>> {
    let mut out = Vec::new();
    for_each_name_at(dir, |name| {
        out.push(name.to_os_string());
        true
    })?;
    Ok(out)
}

/// Calls `f` with each name in directory `dir` (any fd to it), without `.` and `..`, in directory order, as
/// getdents returns them: nothing is collected, so a huge directory costs no memory. Stops early when `f`
/// returns false.
pub fn for_each_name_at(dir: BorrowedFd<'_>, mut f: impl FnMut(&OsStr) -> bool) -> io::Result<()> {
    // Re-open the very directory (not its name) for reading: getdents needs a readable fd, and `.` relative to
    // the fd cannot be swapped by anyone.
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let fd = owned(retry(|| {
        fcntl::openat(Some(dir.as_raw_fd()), ".", flags, Mode::empty())
    })?);
    let mut d = nix::dir::Dir::from(fd).map_err(err)?;
    for entry in d.iter() {
        let entry = entry.map_err(err)?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." && !f(OsStr::from_bytes(name)) {
            break;
        }
    }
    Ok(())
}

/// Flush directory `dir` to stable storage (after a rename into it), through a readable fd to the same inode.
pub fn sync_dir(dir: BorrowedFd<'_>) -> io::Result<()> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let fd = owned(retry(|| {
        fcntl::openat(Some(dir.as_raw_fd()), ".", flags, Mode::empty())
    })?);
    File::from(fd).sync_all()
}

/// A directory opened once (as an `O_PATH` fd) under which every path is resolved. Moving or replacing the
/// directory's *name* afterwards does not change what is served: the fd pins the inode.
#[derive(Debug)]
pub struct Root {
    fd: OwnedFd,
    strategy: Strategy,
}

impl Root {
    /// Open directory `path` (resolved normally: it is the operator's choice) with [`Strategy::detect`].
    pub fn open(path: &Path) -> io::Result<Root> {
        Root::open_with(path, Strategy::detect())
    }

    /// Open directory `path` resolving beneath it with `strategy`.
    pub fn open_with(path: &Path, strategy: Strategy) -> io::Result<Root> {
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let fd = owned(retry(|| fcntl::open(path, flags, Mode::empty()))?);
        Ok(Root { fd, strategy })
    }

    /// How this root resolves paths.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// The directory `path` resolved beneath this root (same rules as every other operation, so it cannot lead
    /// out), opened as a root of its own: a per-user root inside the served tree.
    pub fn sub_root(&self, path: &Path) -> io::Result<Root> {
        let flags = (OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC).bits();
        let fd = self.open_beneath(path, flags, 0)?;
        Ok(Root {
            fd,
            strategy: self.strategy,
        })
    }

    /// [`resolve_beneath`] from this root.
    pub fn open_beneath(&self, path: &Path, flags: i32, mode: u32) -> io::Result<OwnedFd> {
        resolve_with(self.strategy, self.fd.as_fd(), path, flags, mode)
    }

    /// The parent of `path` as an `O_PATH` directory fd resolved beneath the root, and the final name (plain:
    /// not empty, `.` or `..`; `EINVAL` otherwise, so the root itself has no parent).
    pub fn parent_beneath<'p>(&self, path: &'p Path) -> io::Result<(OwnedFd, &'p OsStr)> {
        let (parent, name) = split_final(path)?;
        let dir = self.open_beneath(parent, libc::O_PATH | libc::O_DIRECTORY, 0)?;
        Ok((dir, name))
    }

    /// Metadata of `path`: with `follow`, of what it leads to (symlinks followed only beneath the root, see
    /// [`Strategy`]); without, of the final component itself.
    pub fn stat_beneath(&self, path: &Path, follow: bool) -> io::Result<Metadata> {
        if follow || split_final(path).is_err() {
            // The root (or a path ending in `..`) has no final name to not-follow.
            let fd = self.open_beneath(path, libc::O_PATH, 0)?;
            return File::from(fd).metadata();
        }
        let (dir, name) = self.parent_beneath(path)?;
        lstat_at(dir.as_fd(), name)
    }

    /// Create directory `path` (its parent must exist) beneath the root.
    pub fn mkdir_beneath(&self, path: &Path, mode: u32) -> io::Result<()> {
        let (dir, name) = self.parent_beneath(path)?;
        mkdir_at(dir.as_fd(), name, mode)
    }

    /// Remove non-directory `path` beneath the root (a symlink is removed itself).
    pub fn unlink_beneath(&self, path: &Path) -> io::Result<()> {
        let (dir, name) = self.parent_beneath(path)?;
        unlink_at(dir.as_fd(), name)
    }

    /// Remove empty directory `path` beneath the root.
    pub fn rmdir_beneath(&self, path: &Path) -> io::Result<()> {
        let (dir, name) = self.parent_beneath(path)?;
        rmdir_at(dir.as_fd(), name)
    }

    /// Rename `from` to `to`, both parents resolved beneath the root; the final components are not followed.
    pub fn rename_beneath(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (fdir, fname) = self.parent_beneath(from)?;
        let (tdir, tname) = self.parent_beneath(to)?;
        rename_at(fdir.as_fd(), fname, tdir.as_fd(), tname)
    }

    /// Names in directory `path` beneath the root, without `.` and `..`.
    pub fn read_dir_beneath(&self, path: &Path) -> io::Result<Vec<OsString>> {
        let dir = self.open_beneath(path, libc::O_PATH | libc::O_DIRECTORY, 0)?;
        read_dir_at(dir.as_fd())
    }
}

impl AsFd for Root {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    /// base/root with root/d/f ("in"), root/link -> d/f, root/out -> ../secret, root/abs -> <abs path>;
    /// base/secret ("out").
    fn tree() -> (tempfile::TempDir, std::path::PathBuf) {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("root");
        fs::create_dir_all(root.join("d/e")).unwrap();
        fs::write(root.join("d/f"), b"in").unwrap();
        fs::write(base.path().join("secret"), b"out").unwrap();
        symlink("d/f", root.join("link")).unwrap();
        symlink("d", root.join("dlink")).unwrap();
        symlink("../secret", root.join("out")).unwrap();
        symlink("..", root.join("up")).unwrap();
        symlink(base.path().join("secret"), root.join("abs")).unwrap();
        (base, root)
    }

    fn read(root: &Root, p: &str) -> io::Result<Vec<u8>> {
        let fd = root.open_beneath(Path::new(p), libc::O_RDONLY, 0)?;
        let mut v = Vec::new();
        io::Read::read_to_end(&mut File::from(fd), &mut v)?;
        Ok(v)
    }

    fn errno(r: io::Result<impl std::fmt::Debug>) -> i32 {
        r.unwrap_err().raw_os_error().unwrap_or(-1)
    }

    #[test]
    fn both_strategies_confine() {
        let (_base, root_path) = tree();
        for s in [Strategy::detect(), Strategy::Walk] {
            let root = Root::open_with(&root_path, s).unwrap();
            assert_eq!(read(&root, "d/f").unwrap(), b"in", "{s:?}");
            assert_eq!(read(&root, "d/e/../f").unwrap(), b"in", "{s:?}");
            assert_eq!(read(&root, "./d//f").unwrap(), b"in", "{s:?}");
            assert!(read(&root, "out").is_err(), "{s:?}");
            assert!(read(&root, "abs").is_err(), "{s:?}");
            assert!(read(&root, "up/secret").is_err(), "{s:?}");
            assert_eq!(errno(read(&root, "../secret")), libc::EXDEV, "{s:?}");
            assert_eq!(errno(read(&root, "d/../../secret")), libc::EXDEV, "{s:?}");
            assert_eq!(errno(read(&root, "/etc/hostname")), libc::EXDEV, "{s:?}");
            assert_eq!(errno(read(&root, "missing")), libc::ENOENT, "{s:?}");
            assert_eq!(errno(read(&root, "d/f/x")), libc::ENOTDIR, "{s:?}");
            // The root itself, under any spelling.
            for p in ["", ".", "d/.."] {
                let md = File::from(root.open_beneath(Path::new(p), libc::O_PATH, 0).unwrap())
                    .metadata()
                    .unwrap();
                assert!(md.is_dir(), "{s:?} {p:?}");
            }
        }
    }

    #[test]
    fn inner_symlinks_follow_only_with_openat2() {
        let (_base, root_path) = tree();
        let root = Root::open_with(&root_path, Strategy::Walk).unwrap();
        assert_eq!(errno(read(&root, "link")), libc::ELOOP);
        assert_eq!(errno(read(&root, "dlink/f")), libc::ELOOP);
        for flags in [
            libc::O_PATH,
            libc::O_PATH | libc::O_DIRECTORY,
            libc::O_RDONLY | libc::O_DIRECTORY,
        ] {
            assert_eq!(
                errno(root.open_beneath(Path::new("dlink"), flags, 0)),
                libc::ELOOP,
                "{flags:#x}"
            );
        }
        assert_eq!(
            errno(root.open_beneath(Path::new("d/f"), libc::O_PATH | libc::O_DIRECTORY, 0)),
            libc::ENOTDIR
        );
        if Strategy::detect() == Strategy::Openat2 {
            let root = Root::open(&root_path).unwrap();
            assert_eq!(read(&root, "link").unwrap(), b"in");
            assert_eq!(read(&root, "dlink/f").unwrap(), b"in");
            assert_eq!(errno(read(&root, "out")), libc::EXDEV);
            assert_eq!(errno(read(&root, "abs")), libc::EXDEV);
        }
    }

    #[test]
    fn name_operations_stay_in_the_resolved_parent() {
        let (base, root_path) = tree();
        let root = Root::open(&root_path).unwrap();
        root.mkdir_beneath(Path::new("d/new"), 0o755).unwrap();
        assert!(root_path.join("d/new").is_dir());
        root.rename_beneath(Path::new("d/new"), Path::new("moved"))
            .unwrap();
        root.rmdir_beneath(Path::new("moved")).unwrap();
        // A link is renamed and removed as a link; its target is untouched.
        root.rename_beneath(Path::new("out"), Path::new("d/out"))
            .unwrap();
        assert!(!root
            .stat_beneath(Path::new("d/out"), false)
            .unwrap()
            .is_file());
        assert!(root.stat_beneath(Path::new("d/out"), true).is_err());
        root.unlink_beneath(Path::new("d/out")).unwrap();
        assert_eq!(fs::read(base.path().join("secret")).unwrap(), b"out");
        // Parents through escaping links are refused; bad final names are refused.
        assert_eq!(
            errno(root.mkdir_beneath(Path::new("up/x"), 0o755)),
            libc::EXDEV
        );
        assert!(!base.path().join("x").exists());
        for bad in ["", ".", "..", "d/..", "/"] {
            assert_eq!(
                root.unlink_beneath(Path::new(bad)).unwrap_err().kind(),
                io::ErrorKind::InvalidInput,
                "{bad:?}"
            );
        }
        assert_eq!(errno(root.unlink_beneath(Path::new("d"))), libc::EISDIR);
        assert_eq!(errno(root.rmdir_beneath(Path::new("dlink"))), libc::ENOTDIR);
        let mut names = root.read_dir_beneath(Path::new("d")).unwrap();
        names.sort();
        assert_eq!(names, [OsString::from("e"), OsString::from("f")]);
        assert!(root.read_dir_beneath(Path::new("up")).is_err());
        let (dir, name) = root.parent_beneath(Path::new("d/f")).unwrap();
        assert_eq!(name, "f");
        assert!(lstat_at(dir.as_fd(), name).unwrap().is_file());
        sync_dir(dir.as_fd()).unwrap();
        assert!(!is_plain_name(OsStr::new("a\0b")));
        assert!(open_at(dir.as_fd(), OsStr::new("../f"), libc::O_RDONLY, 0).is_err());
    }
}
