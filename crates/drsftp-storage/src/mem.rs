//! In-memory backend for deterministic tests ([`MemStorage`]) and the in-memory [`FileHandle`] ([`BytesFile`]).
//!
//! Semantics follow the filesystem backend: uploads in `Replace` mode are invisible until commit, `InPlace`
//! writes land in the live file, and errors carry the same [`StorageError`] variants. Modification times come from
//! a per-storage counter (`UNIX_EPOCH + n s`), so tests are reproducible.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::path::{clean, file_name, is_part_name, is_strictly_below, split_parent};
use crate::{EntryKind, FileHandle, Metadata, PartFile, Result, Storage, StorageError, WriteMode};

/// An in-memory file: positioned reads, and writes that grow it (holes read as zeros).
#[derive(Default)]
pub struct BytesFile {
    data: RwLock<Vec<u8>>,
}

impl BytesFile {
    /// Largest size a write may grow the file to (4 GiB); beyond it writes fail with [`StorageError::NoSpace`].
    pub const MAX_LEN: u64 = 1 << 32;

    /// A file holding `data`.
    pub fn new(data: Vec<u8>) -> Self {
        BytesFile {
            data: RwLock::new(data),
        }
    }

    /// A copy of the current contents.
    pub fn to_vec(&self) -> Vec<u8> {
        self.read().clone()
    }

    /// The contents, consuming the file.
    pub fn into_inner(self) -> Vec<u8> {
        self.data
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn read(&self) -> RwLockReadGuard<'_, Vec<u8>> {
        self.data.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Vec<u8>> {
        self.data.write().unwrap_or_else(PoisonError::into_inner)
    }
}

impl From<Vec<u8>> for BytesFile {
    fn from(data: Vec<u8>) -> Self {
        BytesFile::new(data)
    }
}

impl std::fmt::Debug for BytesFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BytesFile")
            .field("len", &self.read().len())
            .finish()
    }
}

impl FileHandle for BytesFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize> {
        let data = self.read();
        let Ok(start) = usize::try_from(offset) else {
            return Ok(0);
        };
        if start >= data.len() {
            return Ok(0);
        }
        let n = buf.len().min(data.len() - start);
        buf[..n].copy_from_slice(&data[start..start + n]);
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= Self::MAX_LEN)
            .ok_or(StorageError::NoSpace)?;
        let (start, end) = match (usize::try_from(offset), usize::try_from(end)) {
            (Ok(s), Ok(e)) => (s, e),
            _ => return Err(StorageError::NoSpace),
        };
        let mut data = self.write();
        if data.len() < end {
            data.resize(end, 0);
        }
        data[start..end].copy_from_slice(buf);
        Ok(())
    }

    fn len(&self) -> Result<u64> {
        Ok(self.read().len() as u64)
    }

    fn sync(&self) -> Result<()> {
        Ok(())
    }
}

/// Permission bits reported for in-memory files.
const FILE_MODE: u32 = 0o644;
/// Permission bits reported for in-memory directories.
const DIR_MODE: u32 = 0o755;

/// An in-memory file tree. Cheap to clone: clones share the same tree.
#[derive(Debug, Default, Clone)]
pub struct MemStorage {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    tree: RwLock<Tree>,
    clock: AtomicU64,
}

/// Paths are normalised virtual paths; the root `/` is implicitly a directory and is in neither map.
#[derive(Debug, Default)]
struct Tree {
    files: BTreeMap<String, MemEntry>,
    dirs: BTreeMap<String, SystemTime>,
}

#[derive(Debug, Clone)]
struct MemEntry {
    data: Arc<BytesFile>,
    modified: SystemTime,
}

enum Node<'a> {
    Dir(SystemTime),
    File(&'a MemEntry),
}

impl Inner {
    fn tick(&self) -> SystemTime {
        let n = self.clock.fetch_add(1, Ordering::Relaxed) + 1;
        UNIX_EPOCH + Duration::from_secs(n)
    }

    fn read(&self) -> RwLockReadGuard<'_, Tree> {
        self.tree.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Tree> {
        self.tree.write().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Tree {
    fn is_dir(&self, p: &str) -> bool {
        p == "/" || self.dirs.contains_key(p)
    }

    fn node(&self, p: &str) -> Option<Node<'_>> {
        if p == "/" {
            return Some(Node::Dir(UNIX_EPOCH));
        }
        if let Some(t) = self.dirs.get(p) {
            return Some(Node::Dir(*t));
        }
        self.files.get(p).map(Node::File)
    }

    /// Check that `dir` exists and is a directory, walking from the root like the kernel does: a missing prefix
    /// is `NotFound`, a file used as a directory is `NotADirectory` (both reported for `orig`).
    fn check_dir(&self, dir: &str, orig: &str) -> Result<()> {
        if dir == "/" {
            return Ok(());
        }
        let mut prefix = String::with_capacity(dir.len());
        for comp in dir.split('/').skip(1) {
            prefix.push('/');
            prefix.push_str(comp);
            if self.files.contains_key(&prefix) {
                return Err(StorageError::NotADirectory(orig.into()));
            }
            if !self.dirs.contains_key(&prefix) {
                return Err(StorageError::NotFound(orig.into()));
            }
        }
        Ok(())
    }

    /// Look `p` up, with kernel-like errors for missing or non-directory ancestors.
    fn lookup(&self, p: &str) -> Result<Node<'_>> {
        if let Some((parent, _)) = split_parent(p) {
            self.check_dir(parent, p)?;
        }
        self.node(p).ok_or_else(|| StorageError::NotFound(p.into()))
    }

    fn metadata(name: &str, node: &Node<'_>) -> Metadata {
        match node {
            Node::Dir(t) => Metadata {
                name: name.into(),
                kind: EntryKind::Dir,
                size: 0,
                modified: *t,
                mode: DIR_MODE,
            },
            Node::File(e) => Metadata {
                name: name.into(),
                kind: EntryKind::File,
                size: e.data.read().len() as u64,
                modified: e.modified,
                mode: FILE_MODE,
            },
        }
    }

    /// Direct children of directory `p`: (name, node).
    fn children<'a>(&'a self, p: &str) -> Vec<(String, Node<'a>)> {
        let prefix = if p == "/" {
            "/".to_string()
        } else {
            format!("{p}/")
        };
        let direct = |k: &str| k.starts_with(&prefix) && !k[prefix.len()..].contains('/');
        let mut out: Vec<(String, Node<'a>)> = Vec::new();
        for (k, t) in self.dirs.range(prefix.clone()..) {
            if !k.starts_with(&prefix) {
                break;
            }
            if direct(k) {
                out.push((k[prefix.len()..].to_string(), Node::Dir(*t)));
            }
        }
        for (k, e) in self.files.range(prefix.clone()..) {
            if !k.starts_with(&prefix) {
                break;
            }
            if direct(k) {
                out.push((k[prefix.len()..].to_string(), Node::File(e)));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    fn has_children(&self, p: &str) -> bool {
        let prefix = format!("{p}/");
        let below = |k: &String| k.starts_with(&prefix);
        self.dirs
            .range(prefix.clone()..)
            .next()
            .is_some_and(|(k, _)| below(k))
            || self
                .files
                .range(prefix.clone()..)
                .next()
                .is_some_and(|(k, _)| below(k))
    }
}

/// Refuse to create a name that would look like a hidden part file.
fn check_creatable_name(p: &str) -> Result<()> {
    if is_part_name(file_name(p)) {
        return Err(StorageError::InvalidPath(p.into()));
    }
    Ok(())
}

impl MemStorage {
    /// An empty tree (just `/`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Test helper: store `bytes` at `path`, creating missing parent directories and replacing any file there.
    ///
    /// # Panics
    /// If `path` is invalid, is the root, or a directory is in the way (a test-setup mistake).
    pub fn put(&self, path: &str, bytes: impl AsRef<[u8]>) {
        let p = clean(path).unwrap_or_else(|e| panic!("MemStorage::put: {e}"));
        let Some((parent, _)) = split_parent(&p) else {
            panic!("MemStorage::put: cannot write the root");
        };
        let modified = self.inner.tick();
        let mut tree = self.inner.write();
        let mut prefix = String::new();
        for comp in parent.split('/').skip(1).filter(|c| !c.is_empty()) {
            prefix.push('/');
            prefix.push_str(comp);
            assert!(
                !tree.files.contains_key(&prefix),
                "MemStorage::put: {prefix} is a file"
            );
            tree.dirs.entry(prefix.clone()).or_insert(modified);
        }
        assert!(!tree.is_dir(&p), "MemStorage::put: {p} is a directory");
        let data = Arc::new(BytesFile::new(bytes.as_ref().to_vec()));
        tree.files.insert(p, MemEntry { data, modified });
    }

    /// Test helper: the contents of the file at `path`, if there is one.
    pub fn get(&self, path: &str) -> Option<Vec<u8>> {
        let p = clean(path).ok()?;
        let tree = self.inner.read();
        tree.files.get(&p).map(|e| e.data.to_vec())
    }
}

impl Storage for MemStorage {
    fn stat(&self, path: &str) -> Result<Metadata> {
        let p = clean(path)?;
        let tree = self.inner.read();
        let node = tree.lookup(&p)?;
        Ok(Tree::metadata(file_name(&p), &node))
    }

    fn list(&self, path: &str) -> Result<Vec<Metadata>> {
        let p = clean(path)?;
        let tree = self.inner.read();
        match tree.lookup(&p)? {
            Node::File(_) => Err(StorageError::NotADirectory(p)),
            Node::Dir(_) => Ok(tree
                .children(&p)
                .iter()
                .map(|(name, node)| Tree::metadata(name, node))
                .collect()),
        }
    }

    fn open_read(&self, path: &str) -> Result<Arc<dyn FileHandle>> {
        let p = clean(path)?;
        let tree = self.inner.read();
        match tree.lookup(&p)? {
            Node::File(e) => Ok(e.data.clone()),
            Node::Dir(_) => Err(StorageError::NotAFile(p)),
        }
    }

    fn open_write(&self, path: &str, mode: WriteMode) -> Result<Box<dyn PartFile>> {
        let p = clean(path)?;
        let Some((parent, _)) = split_parent(&p) else {
            return Err(StorageError::NotAFile(p));
        };
        check_creatable_name(&p)?;
        let created = self.inner.tick();
        let mut tree = self.inner.write();
        tree.check_dir(parent, &p)?;
        if tree.is_dir(&p) {
            return Err(StorageError::NotAFile(p));
        }
        let file = match mode {
            WriteMode::Replace => Arc::new(BytesFile::default()),
            WriteMode::InPlace => {
                let entry = tree.files.entry(p.clone()).or_insert_with(|| MemEntry {
                    data: Arc::new(BytesFile::default()),
                    modified: created,
                });
                entry.data.clone()
            }
        };
        Ok(Box::new(MemPart {
            inner: self.inner.clone(),
            dest: p,
            file,
            mode,
        }))
    }

    fn mkdir(&self, path: &str) -> Result<()> {
        let p = clean(path)?;
        let Some((parent, _)) = split_parent(&p) else {
            return Err(StorageError::AlreadyExists(p));
        };
        check_creatable_name(&p)?;
        let modified = self.inner.tick();
        let mut tree = self.inner.write();
        tree.check_dir(parent, &p)?;
        if tree.node(&p).is_some() {
            return Err(StorageError::AlreadyExists(p));
        }
        tree.dirs.insert(p, modified);
        Ok(())
    }

    fn rmdir(&self, path: &str) -> Result<()> {
        let p = clean(path)?;
        if p == "/" {
            return Err(StorageError::PermissionDenied(p));
        }
        let mut tree = self.inner.write();
        match tree.lookup(&p)? {
            Node::File(_) => return Err(StorageError::NotADirectory(p)),
            Node::Dir(_) => {}
        }
        if tree.has_children(&p) {
            return Err(StorageError::NotEmpty(p));
        }
        tree.dirs.remove(&p);
        Ok(())
    }

    fn remove(&self, path: &str) -> Result<()> {
        let p = clean(path)?;
        let mut tree = self.inner.write();
        match tree.lookup(&p)? {
            Node::Dir(_) => Err(StorageError::NotAFile(p)),
            Node::File(_) => {
                tree.files.remove(&p);
                Ok(())
            }
        }
    }

    fn set_modified(&self, path: &str, time: SystemTime) -> Result<()> {
        let p = clean(path)?;
        let mut tree = self.inner.write();
        if matches!(tree.lookup(&p)?, Node::Dir(_)) {
            return Err(StorageError::NotAFile(p));
        }
        if let Some(e) = tree.files.get_mut(&p) {
            e.modified = time;
        }
        Ok(())
    }

    fn rename(&self, from: &str, to: &str) -> Result<()> {
        let from = clean(from)?;
        let to = clean(to)?;
        if from == "/" {
            return Err(StorageError::PermissionDenied(from));
        }
        let Some((to_parent, _)) = split_parent(&to) else {
            return Err(StorageError::AlreadyExists(to));
        };
        check_creatable_name(&to)?;
        let mut tree = self.inner.write();
        let from_is_dir = matches!(tree.lookup(&from)?, Node::Dir(_));
        tree.check_dir(to_parent, &to)?;
        if from == to {
            return Ok(());
        }
        if tree.is_dir(&to) {
            return Err(StorageError::AlreadyExists(to));
        }
        if !from_is_dir {
            if let Some(entry) = tree.files.remove(&from) {
                tree.files.insert(to, entry);
            }
            return Ok(());
        }
        if is_strictly_below(&to, &from) {
            return Err(StorageError::Invalid(format!(
                "cannot move {from} into itself ({to})"
            )));
        }
        if tree.files.contains_key(&to) {
            return Err(StorageError::NotADirectory(to));
        }
        let moved = |k: &str| k == from || is_strictly_below(k, &from);
        let retarget = |k: &str| format!("{to}{}", &k[from.len()..]);
        let dir_keys: Vec<String> = tree.dirs.keys().filter(|k| moved(k)).cloned().collect();
        for k in dir_keys {
            if let Some(t) = tree.dirs.remove(&k) {
                tree.dirs.insert(retarget(&k), t);
            }
        }
        let file_keys: Vec<String> = tree.files.keys().filter(|k| moved(k)).cloned().collect();
        for k in file_keys {
            if let Some(e) = tree.files.remove(&k) {
                tree.files.insert(retarget(&k), e);
            }
        }
        Ok(())
    }
}

/// An upload into a [`MemStorage`]. `Replace` uploads live outside the tree until commit, so dropping one simply
/// discards it.
#[derive(Debug)]
struct MemPart {
    inner: Arc<Inner>,
    dest: String,
    file: Arc<BytesFile>,
    mode: WriteMode,
}

impl PartFile for MemPart {
    fn handle(&self) -> Arc<dyn FileHandle> {
        self.file.clone()
    }

    fn commit(self: Box<Self>) -> Result<()> {
        let modified = self.inner.tick();
        let mut tree = self.inner.write();
        match self.mode {
            WriteMode::Replace => {
                if let Some((parent, _)) = split_parent(&self.dest) {
                    tree.check_dir(parent, &self.dest)?;
                }
                if tree.is_dir(&self.dest) {
                    return Err(StorageError::NotAFile(self.dest.clone()));
                }
                let entry = MemEntry {
                    data: self.file.clone(),
                    modified,
                };
                tree.files.insert(self.dest.clone(), entry);
            }
            WriteMode::InPlace => {
                if let Some(e) = tree.files.get_mut(&self.dest) {
                    if Arc::ptr_eq(&e.data, &self.file) {
                        e.modified = modified;
                    }
                }
            }
        }
        Ok(())
    }

    fn abort(self: Box<Self>) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_file_positioned_io() {
        let f = BytesFile::new(b"hello".to_vec());
        let mut buf = [0u8; 8];
        assert_eq!(f.read_at(&mut buf, 1).unwrap(), 4);
        assert_eq!(&buf[..4], b"ello");
        assert_eq!(f.read_at(&mut buf, 5).unwrap(), 0);
        assert_eq!(f.read_at(&mut buf, u64::MAX).unwrap(), 0);
        f.write_at(b"XY", 8).unwrap();
        assert_eq!(f.to_vec(), b"hello\0\0\0XY");
        assert_eq!(f.len().unwrap(), 10);
        assert!(!f.is_empty().unwrap());
        assert!(matches!(
            f.write_at(b"z", u64::MAX),
            Err(StorageError::NoSpace)
        ));
        assert!(matches!(
            f.write_at(b"z", BytesFile::MAX_LEN),
            Err(StorageError::NoSpace)
        ));
        assert_eq!(f.into_inner().len(), 10);
    }

    #[test]
    fn put_get_and_listing() {
        let m = MemStorage::new();
        m.put("/a/b/c.txt", b"abc");
        m.put("/a/top", "x");
        m.put("/z", Vec::new());
        assert_eq!(m.get("/a/b/c.txt").unwrap(), b"abc");
        assert_eq!(m.get("a/./b/../b/c.txt").unwrap(), b"abc");
        assert_eq!(m.get("/nope"), None);
        let names: Vec<_> = m
            .list("/")
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.kind))
            .collect();
        assert_eq!(
            names,
            vec![
                ("a".to_string(), EntryKind::Dir),
                ("z".to_string(), EntryKind::File)
            ]
        );
        let a: Vec<_> = m.list("/a").unwrap().into_iter().map(|e| e.name).collect();
        assert_eq!(a, ["b", "top"]);
        assert_eq!(m.stat("/a/b/c.txt").unwrap().size, 3);
        assert_eq!(m.stat("/").unwrap().name, "/");
        assert!(matches!(m.list("/z"), Err(StorageError::NotADirectory(_))));
        assert!(matches!(
            m.stat("/z/q"),
            Err(StorageError::NotADirectory(_))
        ));
        assert!(matches!(m.stat("/q/z"), Err(StorageError::NotFound(_))));
    }

    #[test]
    fn modification_times_are_deterministic() {
        let m = MemStorage::new();
        m.put("/f", b"1");
        let t1 = m.stat("/f").unwrap().modified;
        assert_eq!(t1, UNIX_EPOCH + Duration::from_secs(1));
        let p = m.open_write("/f", WriteMode::Replace).unwrap();
        p.handle().write_at(b"2", 0).unwrap();
        p.commit().unwrap();
        assert!(m.stat("/f").unwrap().modified > t1);
    }

    #[test]
    fn set_modified_on_files_only() {
        let m = MemStorage::new();
        m.put("/d/f", b"x");
        let t = UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
        m.set_modified("/d/f", t).unwrap();
        assert_eq!(m.stat("/d/f").unwrap().modified, t);
        assert!(matches!(
            m.set_modified("/d", t),
            Err(StorageError::NotAFile(_))
        ));
        assert!(matches!(
            m.set_modified("/nope", t),
            Err(StorageError::NotFound(_))
        ));
    }

    #[test]
    fn rename_moves_subtrees() {
        let m = MemStorage::new();
        m.put("/d/x/1", b"1");
        m.put("/d/2", b"2");
        m.put("/dd", b"sibling");
        m.rename("/d", "/e").unwrap();
        assert_eq!(m.get("/e/x/1").unwrap(), b"1");
        assert_eq!(m.get("/e/2").unwrap(), b"2");
        assert_eq!(m.get("/dd").unwrap(), b"sibling");
        assert!(matches!(m.stat("/d"), Err(StorageError::NotFound(_))));
        assert!(matches!(
            m.rename("/e", "/e/x/y"),
            Err(StorageError::Invalid(_))
        ));
        assert!(matches!(
            m.rename("/e", "/dd"),
            Err(StorageError::NotADirectory(_))
        ));
        assert!(matches!(
            m.rename("/", "/q"),
            Err(StorageError::PermissionDenied(_))
        ));
        m.rename("/e", "/e").unwrap();
    }

    #[test]
    fn in_place_shares_live_file() {
        let m = MemStorage::new();
        m.put("/f", b"0123456789");
        let reader = m.open_read("/f").unwrap();
        let p = m.open_write("/f", WriteMode::InPlace).unwrap();
        p.handle().write_at(b"ab", 3).unwrap();
        // In-place writes are visible immediately, like the filesystem.
        let mut buf = [0u8; 10];
        assert_eq!(reader.read_at(&mut buf, 0).unwrap(), 10);
        assert_eq!(&buf, b"012ab56789");
        p.commit().unwrap();
        assert_eq!(m.get("/f").unwrap(), b"012ab56789");
    }
}
