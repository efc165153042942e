//! Replacing a small private file (the users file, the client's path profiles) atomically: a 0600 temporary
//! file beside it, written and synced, then renamed over it, so a reader sees the old file or the new one, never
//! half of one, and nobody else can read it on the way.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` as described above. `before_rename` runs on the synced temporary file (e.g. to give
/// it the old file's owner). On any failure the temporary file is removed and the old file is left as it was.
/// The error names the file it happened on.
pub(crate) fn replace(
    path: &Path,
    bytes: &[u8],
    before_rename: impl FnOnce(&File) -> io::Result<()>,
) -> Result<(), (PathBuf, io::Error)> {
    // The process id keeps two processes saving at once off each other's temporary file; the later rename wins.
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    // A leftover from a crashed run of a process with the same id.
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| (tmp.clone(), e))?;
    let written = f
        .write_all(bytes)
        .and_then(|()| f.sync_all())
        // create_new honours the umask, which can only remove bits; 0600 is then exact.
        .and_then(|()| f.set_permissions(std::fs::Permissions::from_mode(0o600)))
        .and_then(|()| before_rename(&f))
        .map_err(|e| (tmp.clone(), e))
        .and_then(|()| std::fs::rename(&tmp, path).map_err(|e| (path.to_path_buf(), e)));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn replaces_the_file_with_mode_0600_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.toml");
        std::fs::write(&p, b"old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        replace(&p, b"new", |_| Ok(())).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("f.toml")]);
    }

    #[test]
    fn a_failure_before_the_rename_keeps_the_old_file_and_removes_the_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.json");
        std::fs::write(&p, b"old").unwrap();
        let e = replace(&p, b"new", |_| Err(io::Error::other("refused"))).unwrap_err();
        assert!(e.0.to_string_lossy().ends_with(".tmp"), "{e:?}");
        assert_eq!(std::fs::read(&p).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_missing_directory_is_an_error_naming_the_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("absent/f.json");
        let (at, e) = replace(&p, b"x", |_| Ok(())).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(at.starts_with(dir.path().join("absent")), "{at:?}");
    }
}
