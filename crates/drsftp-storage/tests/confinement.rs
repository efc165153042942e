//! Root confinement without a race, on both resolvers: renaming symlinks (RNFR/RNTO) can never expose what they
//! point at outside the root, inner symlinks keep working where the resolver allows it, and bad paths (host
//! paths, `..`, `//`, NUL bytes, over-long names) get clear errors on the filesystem and in-memory backends alike.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use drsftp_storage::{
    EntryKind, FsStorage, MemStorage, ResolveStrategy, Storage, StorageError, WriteMode,
    MAX_COMPONENT_LEN, MAX_PATH_LEN,
};

mod common;
use common::read_all;

const SECRET: &[u8] = b"outside secret";

/// base/{secret, outdir/secret} outside; base/root served, with root/f ("in") and root/a/ (empty).
fn setup(strategy: ResolveStrategy) -> (tempfile::TempDir, PathBuf, FsStorage) {
    let base = tempfile::tempdir().unwrap();
    let root = base.path().join("root");
    fs::create_dir_all(root.join("a")).unwrap();
    fs::create_dir(base.path().join("outdir")).unwrap();
    fs::write(base.path().join("secret"), SECRET).unwrap();
    fs::write(base.path().join("outdir/secret"), SECRET).unwrap();
    fs::write(root.join("f"), b"in").unwrap();
    let s = FsStorage::with_strategy(&root, strategy).unwrap();
    (base, root, s)
}

fn strategies() -> [ResolveStrategy; 2] {
    [ResolveStrategy::detect(), ResolveStrategy::Walk]
}

/// Nothing reachable at `p` shows the outside secret: every access is refused or sees something inside.
fn never_exposes(s: &FsStorage, p: &str) {
    if let Ok(h) = s.open_read(p) {
        assert_ne!(read_all(&*h), SECRET, "{p}");
    }
    if let Ok(m) = s.stat(p) {
        assert_ne!(m.size, SECRET.len() as u64, "{p}: {m:?}");
    }
    if let Ok(l) = s.list(p) {
        assert!(l.iter().all(|m| m.name != "secret"), "{p}: {l:?}");
    }
    if let Ok(part) = s.open_write(p, WriteMode::InPlace) {
        assert_ne!(read_all(&*part.handle()), SECRET, "{p}");
    }
}

#[test]
fn renaming_an_escaping_symlink_moves_the_link_and_never_exposes_its_target() {
    for strategy in strategies() {
        let (base, root, s) = setup(strategy);
        symlink(base.path().join("secret"), root.join("abs")).unwrap();
        symlink("../outdir", root.join("rel")).unwrap();
        for (from, to) in [("/abs", "/a/abs2"), ("/rel", "/a/rel2")] {
            never_exposes(&s, from);
            // The rule: RNTO renames the link itself and never follows it; it stays refused wherever it goes.
            s.rename(from, to).unwrap();
            assert!(fs::symlink_metadata(root.join(&to[1..]))
                .unwrap()
                .file_type()
                .is_symlink());
            never_exposes(&s, to);
            never_exposes(&s, &format!("{to}/secret"));
            // Refused: as leaving the root, or (`../outdir` seen from /a is root/outdir) as missing inside it.
            let e = s.open_read(to).unwrap_err();
            assert!(
                matches!(e, StorageError::Escape(_) | StorageError::NotFound(_)),
                "{strategy:?} {to}: {e:?}"
            );
            assert_eq!(e.reply_code(), 550);
            let listed = s.list("/a").unwrap();
            let entry = listed.iter().find(|m| m.name == to[3..]).unwrap();
            assert_eq!((entry.kind, entry.size), (EntryKind::Other, 0));
        }
        // The targets are untouched.
        assert_eq!(fs::read(base.path().join("secret")).unwrap(), SECRET);
        assert_eq!(fs::read(base.path().join("outdir/secret")).unwrap(), SECRET);
    }
}

#[test]
fn a_link_that_escapes_only_after_its_move_is_refused_after_it() {
    for strategy in strategies() {
        let (base, root, s) = setup(strategy);
        // root/a/l -> ../secret is root/secret (inside) here; moved to root/l it would be base/secret.
        fs::write(root.join("secret"), b"inside").unwrap();
        symlink("../secret", root.join("a/l")).unwrap();
        if strategy == ResolveStrategy::Openat2 {
            assert_eq!(read_all(&*s.open_read("/a/l").unwrap()), b"inside");
        }
        s.rename("/a/l", "/l").unwrap();
        never_exposes(&s, "/l");
        assert!(matches!(s.open_read("/l"), Err(StorageError::Escape(_))));
        assert!(matches!(s.stat("/l"), Err(StorageError::Escape(_))));
        assert_eq!(fs::read(base.path().join("secret")).unwrap(), SECRET);
    }
}

#[test]
fn renames_through_escaping_parents_are_refused() {
    for strategy in strategies() {
        let (base, root, s) = setup(strategy);
        symlink(base.path().join("outdir"), root.join("out")).unwrap();
        symlink("../outdir", root.join("up")).unwrap();
        for dir in ["/out", "/up"] {
            // RNFR from outside: the secret is not pulled in.
            let e = s.rename(&format!("{dir}/secret"), "/stolen").unwrap_err();
            assert!(
                matches!(e, StorageError::Escape(_)),
                "{strategy:?} {dir}: {e:?}"
            );
            // RNTO to outside: nothing is pushed out.
            let e = s.rename("/f", &format!("{dir}/pushed")).unwrap_err();
            assert!(
                matches!(e, StorageError::Escape(_)),
                "{strategy:?} {dir}: {e:?}"
            );
            for bad in [
                s.remove(&format!("{dir}/secret")),
                s.mkdir(&format!("{dir}/made")),
                s.rmdir(&format!("{dir}/secret")),
            ] {
                assert!(matches!(bad, Err(StorageError::Escape(_))), "{bad:?}");
            }
            assert!(matches!(
                s.open_write(&format!("{dir}/planted"), WriteMode::Replace),
                Err(StorageError::Escape(_))
            ));
        }
        assert!(!root.join("stolen").exists());
        let mut outside: Vec<_> = fs::read_dir(base.path().join("outdir"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        outside.sort();
        assert_eq!(outside, ["secret"]);
        assert_eq!(fs::read(root.join("f")).unwrap(), b"in");
    }
}

#[test]
fn inner_symlinks_follow_with_openat2_and_are_refused_by_the_fallback() {
    for strategy in strategies() {
        let (_base, root, s) = setup(strategy);
        fs::write(root.join("a/g"), b"gee").unwrap();
        symlink("a/g", root.join("glink")).unwrap();
        symlink("a", root.join("alink")).unwrap();
        symlink("../f", root.join("a/up")).unwrap();
        // Relative links that stay inside, including one through `..`.
        let cases = [
            ("/glink", &b"gee"[..]),
            ("/alink/g", b"gee"),
            ("/a/up", b"in"),
        ];
        for (p, want) in cases {
            match strategy {
                ResolveStrategy::Openat2 => {
                    assert_eq!(read_all(&*s.open_read(p).unwrap()), want, "{p}");
                    assert_eq!(s.stat(p).unwrap().size, want.len() as u64, "{p}");
                }
                ResolveStrategy::Walk => {
                    // The fallback cannot follow a link without a racy second look-up, so it follows none.
                    let e = s.open_read(p).unwrap_err();
                    assert!(matches!(e, StorageError::Escape(_)), "{p}: {e:?}");
                }
            }
        }
        let kinds: Vec<_> = s
            .list("/")
            .unwrap()
            .into_iter()
            .map(|m| (m.name, m.kind))
            .collect();
        let link_kind = |k| match strategy {
            ResolveStrategy::Openat2 => k,
            ResolveStrategy::Walk => EntryKind::Other,
        };
        assert_eq!(
            kinds,
            [
                ("a".to_string(), EntryKind::Dir),
                ("alink".to_string(), link_kind(EntryKind::Dir)),
                ("f".to_string(), EntryKind::File),
                ("glink".to_string(), link_kind(EntryKind::File)),
            ]
        );
        // Renaming an inner link keeps it a link to the same place (where it still resolves inside).
        s.rename("/glink", "/a/glink2").unwrap();
        assert_eq!(
            fs::read_link(root.join("a/glink2")).unwrap(),
            Path::new("a/g")
        );
    }
}

/// The same bad inputs give the same clear errors on every backend.
fn bad_paths(s: &dyn Storage, what: &str) {
    // Host paths and `..` are virtual: they clamp at the root and name nothing there.
    for p in [
        "/etc/passwd",
        "../../../etc/passwd",
        "/a/../../..//etc/passwd",
    ] {
        let e = s.open_read(p).unwrap_err();
        assert!(matches!(e, StorageError::NotFound(_)), "{what} {p}: {e:?}");
        assert_eq!(e.to_string(), "/etc/passwd: no such file or directory");
        assert_eq!(e.reply_code(), 550);
    }
    // `//` and `.` collapse.
    assert_eq!(s.stat("//a//.//").unwrap().name, "a", "{what}");
    assert_eq!(s.list("//a//").unwrap().len(), s.list("/a").unwrap().len());
    // NUL bytes.
    for p in ["/a\0b", "a/\0", "\0"] {
        let e = s.stat(p).unwrap_err();
        assert!(
            matches!(e, StorageError::InvalidPath(_)),
            "{what} {p:?}: {e:?}"
        );
        assert_eq!(e.reply_code(), 553);
        assert!(e.to_string().contains("\\0"), "{e}");
        assert!(
            s.mkdir(p).is_err() && s.rename("/a", p).is_err(),
            "{what} {p:?}"
        );
    }
    // An over-long component and an over-long path, on every operation.
    let long_name = format!("/a/{}", "n".repeat(MAX_COMPONENT_LEN + 1));
    let long_path = "/abcdefg".repeat(MAX_PATH_LEN / 8 + 1);
    for p in [&long_name, &long_path] {
        let results = [
            s.stat(p).map(drop),
            s.list(p).map(drop),
            s.open_read(p).map(drop),
            s.open_write(p, WriteMode::Replace).map(drop),
            s.mkdir(p),
            s.rmdir(p),
            s.remove(p),
            s.rename("/a", p),
            s.rename(p, "/b"),
        ];
        for r in results {
            let e = r.unwrap_err();
            assert!(matches!(e, StorageError::InvalidPath(_)), "{what}: {e:?}");
            assert!(e.to_string().ends_with("...: invalid path"), "{e}");
        }
    }
}

#[test]
fn bad_paths_get_clear_errors_on_every_backend() {
    for strategy in strategies() {
        let (_base, _root, s) = setup(strategy);
        bad_paths(&s, &format!("fs {strategy:?}"));
    }
    let m = MemStorage::new();
    m.mkdir("/a").unwrap();
    bad_paths(&m, "mem");
}

#[test]
fn escape_errors_are_550_with_a_clear_message() {
    for strategy in strategies() {
        let (base, root, s) = setup(strategy);
        symlink(base.path().join("outdir"), root.join("out")).unwrap();
        let e = s.open_read("/out/secret").unwrap_err();
        assert_eq!(e.to_string(), "/out/secret: path leaves the served root");
        assert_eq!(e.reply_code(), 550);
    }
}

/// A per-user root (`FsStorage::subtree`) is resolved beneath the served root: a symlink leading out, `..` or a
/// file is refused, and the subtree's own paths never reach its parent, let alone the outside.
#[test]
fn subtrees_are_confined_like_the_root() {
    for strategy in strategies() {
        let (base, root, s) = setup(strategy);
        symlink(base.path().join("outdir"), root.join("out")).unwrap();
        assert!(s.subtree("/out").is_err(), "{strategy:?}: escaping link");
        assert!(s.subtree("/f").is_err(), "{strategy:?}: a file");
        assert!(s.subtree("/missing").is_err(), "{strategy:?}: missing");
        // `..` clamps at the served root, so this is the root itself, never its parent.
        let top = s.subtree("/../..").unwrap();
        assert!(top.stat("/f").is_ok());
        fs::write(root.join("a/mine"), b"mine").unwrap();
        let a = s.subtree("a").unwrap();
        assert_eq!(a.stat("/mine").unwrap().size, 4);
        let outside = ["/f", "/../f", "../f", "/../../secret", "/../out/secret"];
        for p in outside {
            assert!(a.stat(p).is_err(), "{strategy:?}: {p}");
        }
        // (never_exposes may create files inside `a`: after the checks above.)
        for p in outside {
            never_exposes(&a, p);
        }
    }
}
