//! Backend conformance: one scenario written against `&dyn Storage`, run on both `FsStorage` and `MemStorage`,
//! so the in-memory backend used by protocol tests behaves like the real one. Also the io-error → reply mapping.

use std::collections::BTreeSet;
use std::io;
use std::sync::Arc;

use drsftp_storage::{
    checksum, checksum_bytes, ChecksumAlg, EntryKind, FileHandle, FsStorage, MemStorage,
    ResolveStrategy, Storage, StorageError, WriteMode,
};

mod common;
use common::read_all;

fn read(s: &dyn Storage, p: &str) -> Vec<u8> {
    read_all(&*s.open_read(p).unwrap())
}

fn names(s: &dyn Storage, p: &str) -> Vec<(String, EntryKind, u64)> {
    s.list(p)
        .unwrap()
        .into_iter()
        .map(|m| (m.name, m.kind, m.size))
        .collect()
}

fn upload(s: &dyn Storage, p: &str, data: &[u8]) {
    let part = s.open_write(p, WriteMode::Replace).unwrap();
    part.handle().write_at(data, 0).unwrap();
    part.commit().unwrap();
}

/// The shared scenario. Every observable result must be identical across backends.
fn scenario(s: &dyn Storage) {
    // Directories.
    s.mkdir("/data").unwrap();
    s.mkdir("data/sub").unwrap();
    assert!(matches!(
        s.mkdir("/data"),
        Err(StorageError::AlreadyExists(_))
    ));
    assert!(matches!(s.mkdir("/nope/x"), Err(StorageError::NotFound(_))));
    assert_eq!(s.stat("/data").unwrap().kind, EntryKind::Dir);
    assert_eq!(s.stat("/data").unwrap().name, "data");
    assert_eq!(s.stat("/").unwrap().name, "/");

    // An out-of-order upload is invisible until committed.
    let part = s.open_write("/data/f.bin", WriteMode::Replace).unwrap();
    let h = part.handle();
    h.write_at(b"world", 6).unwrap();
    h.write_at(b"hello ", 0).unwrap();
    assert_eq!(read_all(&*h), b"hello world");
    assert!(matches!(
        s.stat("/data/f.bin"),
        Err(StorageError::NotFound(_))
    ));
    assert_eq!(names(s, "/data"), [("sub".to_string(), EntryKind::Dir, 0)]);
    part.commit().unwrap();
    assert_eq!(read(s, "/data/f.bin"), b"hello world");
    let m = s.stat("/data/./sub/../f.bin").unwrap();
    assert_eq!(
        (m.name.as_str(), m.kind, m.size),
        ("f.bin", EntryKind::File, 11)
    );

    // A dropped upload leaves the old contents and nothing else.
    let part = s.open_write("/data/f.bin", WriteMode::Replace).unwrap();
    part.handle().write_at(b"partial", 0).unwrap();
    drop(part);
    assert_eq!(read(s, "/data/f.bin"), b"hello world");
    let part = s.open_write("/data/f.bin", WriteMode::Replace).unwrap();
    part.handle().write_at(b"partial", 0).unwrap();
    part.abort();
    assert_eq!(
        names(s, "/data"),
        [
            ("f.bin".to_string(), EntryKind::File, 11),
            ("sub".to_string(), EntryKind::Dir, 0)
        ]
    );

    // A reader opened before a replacing commit keeps the old bytes.
    let old = s.open_read("/data/f.bin").unwrap();
    upload(s, "/data/f.bin", b"replaced");
    assert_eq!(read(s, "/data/f.bin"), b"replaced");
    assert_eq!(read_all(&*old), b"hello world");

    // In place: keeps bytes, extends with holes, creates when missing.
    let part = s.open_write("/data/f.bin", WriteMode::InPlace).unwrap();
    part.handle().write_at(b"RE", 0).unwrap();
    part.handle().write_at(b"!", 10).unwrap();
    part.commit().unwrap();
    assert_eq!(read(s, "/data/f.bin"), b"REplaced\0\0!");
    let part = s.open_write("/data/new", WriteMode::InPlace).unwrap();
    part.handle().write_at(b"n", 2).unwrap();
    part.commit().unwrap();
    assert_eq!(read(s, "/data/new"), b"\0\0n");

    // Checksums through the trait.
    let fh: Arc<dyn FileHandle> = s.open_read("/data/f.bin").unwrap();
    assert_eq!(
        checksum(&*fh, ChecksumAlg::Adler32, 2, Some(6)).unwrap(),
        checksum_bytes(ChecksumAlg::Adler32, b"placed")
    );
    assert!(matches!(
        checksum(&*fh, ChecksumAlg::Md5, 12, None),
        Err(StorageError::Invalid(_))
    ));

    // Kind errors.
    assert!(matches!(
        s.open_read("/data"),
        Err(StorageError::NotAFile(_))
    ));
    assert!(matches!(
        s.open_read("/data/missing"),
        Err(StorageError::NotFound(_))
    ));
    assert!(matches!(
        s.open_write("/data", WriteMode::Replace),
        Err(StorageError::NotAFile(_))
    ));
    assert!(matches!(
        s.open_write("/data/sub", WriteMode::InPlace),
        Err(StorageError::NotAFile(_))
    ));
    assert!(matches!(
        s.list("/data/f.bin"),
        Err(StorageError::NotADirectory(_))
    ));
    assert!(matches!(
        s.stat("/data/f.bin/x"),
        Err(StorageError::NotADirectory(_))
    ));
    assert!(matches!(
        s.open_write("/data/f.bin/x", WriteMode::Replace),
        Err(StorageError::NotADirectory(_))
    ));
    assert!(matches!(
        s.open_write("/missing/x", WriteMode::Replace),
        Err(StorageError::NotFound(_))
    ));
    assert!(matches!(s.remove("/data"), Err(StorageError::NotAFile(_))));
    assert!(matches!(
        s.rmdir("/data/f.bin"),
        Err(StorageError::NotADirectory(_))
    ));
    assert!(matches!(s.rmdir("/data"), Err(StorageError::NotEmpty(_))));
    assert!(matches!(
        s.stat("/bad\0name"),
        Err(StorageError::InvalidPath(_))
    ));
    assert!(matches!(
        s.open_write("/.x.drsftp-part.1-2-3", WriteMode::Replace),
        Err(StorageError::InvalidPath(_))
    ));

    // `..` never climbs out.
    assert_eq!(read(s, "/../../data/f.bin"), b"REplaced\0\0!");
    assert_eq!(names(s, "/.."), names(s, "/"));

    // Renames.
    s.rename("/data/f.bin", "/data/sub/g.bin").unwrap();
    assert!(matches!(
        s.stat("/data/f.bin"),
        Err(StorageError::NotFound(_))
    ));
    assert_eq!(read(s, "/data/sub/g.bin"), b"REplaced\0\0!");
    upload(s, "/data/other", b"other");
    s.rename("/data/other", "/data/new").unwrap(); // over an existing file
    assert_eq!(read(s, "/data/new"), b"other");
    assert!(matches!(
        s.rename("/data/new", "/data/sub"),
        Err(StorageError::AlreadyExists(_))
    ));
    assert!(matches!(
        s.rename("/data", "/data/sub/x"),
        Err(StorageError::Invalid(_))
    ));
    assert!(matches!(
        s.rename("/data/sub", "/data/new"),
        Err(StorageError::NotADirectory(_))
    ));
    assert!(matches!(
        s.rename("/data/gone", "/data/x"),
        Err(StorageError::NotFound(_))
    ));
    s.rename("/data", "/moved").unwrap();
    assert_eq!(read(s, "/moved/sub/g.bin"), b"REplaced\0\0!");
    assert_eq!(names(s, "/"), [("moved".to_string(), EntryKind::Dir, 0)]);

    // Removal.
    s.remove("/moved/sub/g.bin").unwrap();
    assert!(matches!(
        s.remove("/moved/sub/g.bin"),
        Err(StorageError::NotFound(_))
    ));
    s.rmdir("/moved/sub").unwrap();
    s.remove("/moved/new").unwrap();
    s.rmdir("/moved").unwrap();
    assert!(s.list("/").unwrap().is_empty());

    // Concurrent writers into one upload (one per data stream).
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 253) as u8).collect();
    let part = s.open_write("/par", WriteMode::Replace).unwrap();
    let h = part.handle();
    std::thread::scope(|sc| {
        for stream in 0..4usize {
            let h = h.clone();
            let data = &data;
            sc.spawn(move || {
                // Stream k writes blocks k, k+4, ... in reverse order.
                let blocks: Vec<usize> = (0..data.len().div_ceil(4096))
                    .filter(|b| b % 4 == stream)
                    .collect();
                for b in blocks.into_iter().rev() {
                    let end = ((b + 1) * 4096).min(data.len());
                    h.write_at(&data[b * 4096..end], (b * 4096) as u64).unwrap();
                }
            });
        }
    });
    part.commit().unwrap();
    assert_eq!(read(s, "/par"), data);
    let sums: BTreeSet<String> = ChecksumAlg::ALL
        .iter()
        .map(|&a| checksum(&*s.open_read("/par").unwrap(), a, 0, None).unwrap())
        .collect();
    let expect: BTreeSet<String> = ChecksumAlg::ALL
        .iter()
        .map(|&a| checksum_bytes(a, &data))
        .collect();
    assert_eq!(sums, expect);
}

#[test]
fn scenario_on_filesystem() {
    let dir = tempfile::tempdir().unwrap();
    let s = FsStorage::new(dir.path()).unwrap();
    scenario(&s);
    // Nothing hidden was left behind either.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn scenario_on_filesystem_fallback_resolver() {
    // The component walk used where openat2 is unavailable must behave the same (the scenario has no symlinks).
    let dir = tempfile::tempdir().unwrap();
    let s = FsStorage::with_strategy(dir.path(), ResolveStrategy::Walk).unwrap();
    scenario(&s);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn scenario_in_memory() {
    let s = MemStorage::new();
    scenario(&s);
    assert_eq!(s.get("/par").map(|d| d.len()), Some(300_000));
}

#[test]
fn storage_is_object_safe_and_shareable() {
    let dir = tempfile::tempdir().unwrap();
    let backends: Vec<Arc<dyn Storage>> = vec![
        Arc::new(FsStorage::new(dir.path()).unwrap()),
        Arc::new(MemStorage::new()),
    ];
    for s in backends {
        let s2 = s.clone();
        std::thread::spawn(move || upload(&*s2, "/t", b"threaded"))
            .join()
            .unwrap();
        assert_eq!(read(&*s, "/t"), b"threaded");
    }
}

#[test]
fn io_errors_map_to_reply_codes() {
    let e = StorageError::from_io("/f", io::Error::from_raw_os_error(libc::ENOSPC));
    assert!(matches!(e, StorageError::NoSpace));
    assert_eq!(e.reply_code(), 452);
    let e = StorageError::from_io("/f", io::Error::from(io::ErrorKind::NotFound));
    assert_eq!(e.reply_code(), 550);
    let e = StorageError::from_io("/f", io::Error::other("boom"));
    assert_eq!(e.reply_code(), 451);
}
