//! Filesystem backend tests: root confinement (`..`, host paths, symlinks out), part files, in-place writes,
//! out-of-order positioned writes, special files and metadata.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::UNIX_EPOCH;

use drsftp_storage::{is_part_name, EntryKind, FsStorage, Storage, StorageError, WriteMode};

mod common;
use common::read_all;

fn setup() -> (tempfile::TempDir, FsStorage) {
    let dir = tempfile::tempdir().unwrap();
    let s = FsStorage::new(dir.path()).unwrap();
    (dir, s)
}

fn part_files(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| is_part_name(n))
        .collect()
}

#[test]
fn new_requires_directory() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("f"), b"x").unwrap();
    assert!(matches!(
        FsStorage::new(dir.path().join("f")),
        Err(StorageError::NotADirectory(_))
    ));
    assert!(matches!(
        FsStorage::new(dir.path().join("missing")),
        Err(StorageError::NotFound(_))
    ));
    let s = FsStorage::new(dir.path()).unwrap();
    assert_eq!(s.root(), fs::canonicalize(dir.path()).unwrap());
}

#[test]
fn dot_dot_and_host_paths_stay_inside() {
    let (dir, s) = setup();
    fs::write(dir.path().join("passwd"), b"inside").unwrap();
    // `..` clamps at the root; absolute paths are virtual.
    for p in [
        "/../../etc/passwd",
        "../passwd",
        "/etc/passwd",
        "/a/../../../etc/passwd",
    ] {
        let r = s.open_read(p);
        if let Ok(h) = r {
            assert_eq!(read_all(&*h), b"inside", "{p}");
        } else {
            assert!(matches!(r, Err(StorageError::NotFound(_))), "{p}: {r:?}");
        }
    }
    assert_eq!(read_all(&*s.open_read("/../../passwd").unwrap()), b"inside");
    let host = fs::canonicalize("/etc/hostname").ok();
    if let Some(h) = host {
        assert!(s.stat(&h.display().to_string()).is_err());
    }
    assert_eq!(s.stat("/..").unwrap().kind, EntryKind::Dir);
    assert_eq!(s.stat("/..").unwrap().name, "/");
}

#[test]
fn symlink_out_of_root_is_refused() {
    let (dir, s) = setup();
    std::os::unix::fs::symlink("/etc", dir.path().join("etc")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join("pw")).unwrap();
    for p in [
        "/etc/passwd",
        "/pw",
        "/etc",
        "/etc/no-such-file-here",
        "/etc/passwd/x",
    ] {
        let e = s.stat(p).unwrap_err();
        assert!(matches!(e, StorageError::Escape(_)), "{p}: {e:?}");
        assert_eq!(e.reply_code(), 550);
    }
    assert!(matches!(
        s.open_read("/etc/passwd"),
        Err(StorageError::Escape(_))
    ));
    assert!(matches!(s.open_read("/pw"), Err(StorageError::Escape(_))));
    assert!(matches!(s.list("/etc"), Err(StorageError::Escape(_))));
    assert!(matches!(
        s.open_write("/etc/drsftp-test", WriteMode::Replace),
        Err(StorageError::Escape(_))
    ));
    assert!(matches!(
        s.mkdir("/etc/drsftp-test"),
        Err(StorageError::Escape(_))
    ));
    assert!(matches!(
        s.rename("/etc/passwd", "/stolen"),
        Err(StorageError::Escape(_))
    ));
    assert!(matches!(
        s.open_write("/pw", WriteMode::InPlace),
        Err(StorageError::Escape(_))
    ));
    // Listed as Other, never followed.
    let l = s.list("/").unwrap();
    assert_eq!(l.len(), 2);
    assert!(l.iter().all(|e| e.kind == EntryKind::Other && e.size == 0));
    // Removing the link removes the link only.
    s.remove("/pw").unwrap();
    assert!(Path::new("/etc/passwd").exists());
}

#[test]
fn dangling_link_out_is_never_created_through() {
    let (dir, s) = setup();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::os::unix::fs::symlink(&victim, dir.path().join("out")).unwrap();
    // An absolute link is refused as leaving the root before its target is looked at, so the reply does not
    // tell whether a host path exists (it used to be NotFound here, Escape for an existing target).
    assert!(matches!(s.stat("/out"), Err(StorageError::Escape(_))));
    assert_eq!(s.list("/").unwrap()[0].kind, EntryKind::Other);
    assert!(matches!(
        s.open_write("/out", WriteMode::InPlace),
        Err(StorageError::Escape(_))
    ));
    assert!(!victim.exists());
    // Replace swaps the link itself for a regular file.
    let p = s.open_write("/out", WriteMode::Replace).unwrap();
    p.handle().write_at(b"data", 0).unwrap();
    p.commit().unwrap();
    assert!(!victim.exists());
    assert_eq!(fs::read(dir.path().join("out")).unwrap(), b"data");
    assert!(!fs::symlink_metadata(dir.path().join("out"))
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn symlink_inside_root_works() {
    let (dir, s) = setup();
    fs::create_dir(dir.path().join("real")).unwrap();
    fs::write(dir.path().join("real/f"), b"hello").unwrap();
    std::os::unix::fs::symlink("real", dir.path().join("alias")).unwrap();
    std::os::unix::fs::symlink("real/f", dir.path().join("flink")).unwrap();
    assert_eq!(read_all(&*s.open_read("/alias/f").unwrap()), b"hello");
    assert_eq!(read_all(&*s.open_read("/flink").unwrap()), b"hello");
    let st = s.stat("/alias").unwrap();
    assert_eq!((st.name.as_str(), st.kind), ("alias", EntryKind::Dir));
    let l = s.list("/").unwrap();
    let kinds: Vec<_> = l
        .iter()
        .map(|e| (e.name.as_str(), e.kind, e.size))
        .collect();
    assert_eq!(
        kinds,
        [
            ("alias", EntryKind::Dir, 0),
            ("flink", EntryKind::File, 5),
            ("real", EntryKind::Dir, 0)
        ]
    );
    // In-place writes through an inner link land in the target.
    let p = s.open_write("/flink", WriteMode::InPlace).unwrap();
    p.handle().write_at(b"J", 0).unwrap();
    p.commit().unwrap();
    assert_eq!(fs::read(dir.path().join("real/f")).unwrap(), b"Jello");
}

#[test]
fn out_of_order_writes_assemble_the_file() {
    let (dir, s) = setup();
    let data = drsftp_testkit::data::pattern(100_000, 1);
    let p = s.open_write("/big", WriteMode::Replace).unwrap();
    let h = p.handle();
    let mut blocks: Vec<(usize, &[u8])> = data
        .chunks(7_000)
        .enumerate()
        .map(|(i, c)| (i * 7_000, c))
        .collect();
    blocks.reverse();
    blocks.swap(1, 5);
    std::thread::scope(|sc| {
        for half in blocks.chunks(blocks.len() / 2 + 1) {
            let h = h.clone();
            sc.spawn(move || {
                for (off, c) in half {
                    h.write_at(c, *off as u64).unwrap();
                }
            });
        }
    });
    assert_eq!(h.len().unwrap(), data.len() as u64);
    assert_eq!(read_all(&*h), data);
    p.commit().unwrap();
    assert_eq!(fs::read(dir.path().join("big")).unwrap(), data);
}

#[test]
fn part_file_invisible_until_commit_and_removed_on_drop() {
    let (dir, s) = setup();
    fs::write(dir.path().join("f"), b"old").unwrap();
    let p = s.open_write("/f", WriteMode::Replace).unwrap();
    p.handle().write_at(b"new!", 0).unwrap();
    assert_eq!(part_files(dir.path()).len(), 1);
    let l = s.list("/").unwrap();
    assert_eq!(l.len(), 1);
    assert_eq!(l[0].size, 3);
    assert_eq!(fs::read(dir.path().join("f")).unwrap(), b"old");
    let part = part_files(dir.path()).remove(0);
    assert!(part.starts_with(".f.drsftp-part."), "{part}");
    assert!(matches!(s.stat(&part), Err(StorageError::NotFound(_))));
    assert!(matches!(s.open_read(&part), Err(StorageError::NotFound(_))));
    assert!(matches!(s.remove(&part), Err(StorageError::NotFound(_))));
    assert!(matches!(
        s.open_write(&part, WriteMode::InPlace),
        Err(StorageError::InvalidPath(_))
    ));
    drop(p);
    assert!(part_files(dir.path()).is_empty());
    assert_eq!(fs::read(dir.path().join("f")).unwrap(), b"old");

    let p = s.open_write("/f", WriteMode::Replace).unwrap();
    p.handle().write_at(b"new!", 0).unwrap();
    p.abort();
    assert!(part_files(dir.path()).is_empty());

    let p = s.open_write("/f", WriteMode::Replace).unwrap();
    p.handle().write_at(b"new!", 0).unwrap();
    p.commit().unwrap();
    assert!(part_files(dir.path()).is_empty());
    assert_eq!(fs::read(dir.path().join("f")).unwrap(), b"new!");
}

#[test]
fn long_names_get_valid_part_names() {
    let (dir, s) = setup();
    let name = format!("/{}", "n".repeat(255));
    let p = s.open_write(&name, WriteMode::Replace).unwrap();
    p.handle().write_at(b"x", 0).unwrap();
    p.commit().unwrap();
    assert_eq!(fs::read(dir.path().join(&name[1..])).unwrap(), b"x");
    assert!(matches!(
        s.open_write(&format!("{name}n"), WriteMode::Replace),
        Err(StorageError::InvalidPath(_))
    ));
}

#[test]
fn in_place_keeps_existing_bytes() {
    let (dir, s) = setup();
    fs::write(dir.path().join("f"), b"0123456789").unwrap();
    let p = s.open_write("/f", WriteMode::InPlace).unwrap();
    p.handle().write_at(b"AB", 4).unwrap();
    p.handle().write_at(b"XYZ", 12).unwrap();
    assert!(part_files(dir.path()).is_empty());
    p.commit().unwrap();
    assert_eq!(
        fs::read(dir.path().join("f")).unwrap(),
        b"0123AB6789\0\0XYZ"
    );
    // Created when missing; dropping without commit keeps what was written.
    let p = s.open_write("/g", WriteMode::InPlace).unwrap();
    p.handle().write_at(b"g", 0).unwrap();
    drop(p);
    assert_eq!(fs::read(dir.path().join("g")).unwrap(), b"g");
}

#[test]
fn special_files_are_other_and_not_opened() {
    let (dir, s) = setup();
    let _sock = std::os::unix::net::UnixListener::bind(dir.path().join("sock")).unwrap();
    let l = s.list("/").unwrap();
    assert_eq!((l[0].name.as_str(), l[0].kind), ("sock", EntryKind::Other));
    assert!(matches!(
        s.open_read("/sock"),
        Err(StorageError::NotAFile(_))
    ));
    assert!(matches!(
        s.open_write("/sock", WriteMode::InPlace),
        Err(StorageError::NotAFile(_))
    ));
    assert!(matches!(s.open_read("/"), Err(StorageError::NotAFile(_))));
}

#[test]
fn metadata_and_errors() {
    let (dir, s) = setup();
    fs::write(dir.path().join("f"), b"12345").unwrap();
    fs::set_permissions(dir.path().join("f"), fs::Permissions::from_mode(0o640)).unwrap();
    let m = s.stat("/f").unwrap();
    assert_eq!(
        (m.name.as_str(), m.kind, m.size, m.mode),
        ("f", EntryKind::File, 5, 0o640)
    );
    assert!(m.modified > UNIX_EPOCH);
    assert!(matches!(
        s.stat("/f/x"),
        Err(StorageError::NotADirectory(_))
    ));
    assert!(matches!(s.list("/f"), Err(StorageError::NotADirectory(_))));
    assert!(matches!(s.stat("/a\0b"), Err(StorageError::InvalidPath(_))));
    assert!(matches!(s.mkdir("/"), Err(StorageError::AlreadyExists(_))));
    assert!(matches!(
        s.rmdir("/"),
        Err(StorageError::PermissionDenied(_))
    ));
    assert!(matches!(s.remove("/"), Err(StorageError::NotAFile(_))));
    assert!(matches!(
        s.open_write("/", WriteMode::Replace),
        Err(StorageError::NotAFile(_))
    ));
    assert!(matches!(
        s.rename("/", "/x"),
        Err(StorageError::PermissionDenied(_))
    ));
    assert!(matches!(
        s.rename("/f", "/"),
        Err(StorageError::AlreadyExists(_))
    ));
}

#[test]
fn set_modified_sets_files_and_never_follows_out() {
    let (dir, s) = setup();
    fs::write(dir.path().join("f"), b"x").unwrap();
    fs::create_dir(dir.path().join("d")).unwrap();
    let outside = tempfile::NamedTempFile::new().unwrap();
    let before = fs::metadata(outside.path()).unwrap().modified().unwrap();
    std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
    let t = UNIX_EPOCH + std::time::Duration::from_secs(1_234_567_890);
    s.set_modified("/f", t).unwrap();
    assert_eq!(
        fs::metadata(dir.path().join("f"))
            .unwrap()
            .modified()
            .unwrap(),
        t
    );
    assert_eq!(s.stat("/f").unwrap().modified, t);
    assert!(matches!(
        s.set_modified("/d", t),
        Err(StorageError::NotAFile(_))
    ));
    assert!(matches!(
        s.set_modified("/nope", t),
        Err(StorageError::NotFound(_))
    ));
    let e = s.set_modified("/out", t).unwrap_err();
    assert!(matches!(e, StorageError::Escape(_)), "{e:?}");
    assert_eq!(
        fs::metadata(outside.path()).unwrap().modified().unwrap(),
        before
    );
}
