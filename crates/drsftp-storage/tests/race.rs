//! Confinement under attack: a local user flips a directory inside the root between a real directory and a
//! symlink to a directory outside it while the backend serves reads, listings and stats through that name. The
//! backend must never hand out the outside secret, its size, or the outside listing, nor create, rename or
//! remove anything outside, however the race falls. Each race runs on the default resolver (`openat2` here) and
//! on the component-walk fallback.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use drsftp_storage::{FileHandle, FsStorage, ResolveStrategy, Storage, WriteMode};

const INSIDE: &[u8] = b"inside";
/// A different length from INSIDE so a leaked stat shows up in the size too.
const OUTSIDE: &[u8] = b"OUTSIDE-SECRET-CONTENT";
/// A name that exists only in the outside directory, so a leaked listing is recognisable.
const OUTSIDE_MARKER: &str = "only-outside";

/// Each operation runs at least this many times...
const MIN_TRIES: usize = 500;
/// ...and then keeps going until this much time has passed or MAX_TRIES is reached, whichever first.
const BUDGET: Duration = Duration::from_millis(1000);
const MAX_TRIES: usize = 20_000;

fn read_all(h: &dyn FileHandle) -> Vec<u8> {
    let mut out = vec![0u8; h.len().unwrap_or(0) as usize];
    let mut pos = 0;
    while pos < out.len() {
        match h.read_at(&mut out[pos..], pos as u64) {
            Ok(0) | Err(_) => break,
            Ok(n) => pos += n,
        }
    }
    out.truncate(pos);
    out
}

/// Swap `root/d` between a real directory and a symlink to `outside` until `stop`; returns the number of flips.
/// Not atomic on purpose: the window where `d` is missing is also a state the backend has to cope with.
fn flipper(root: &Path, outside: &Path, stop: &AtomicBool) -> u64 {
    let d = root.join("d");
    let stash = root.join("stash");
    let mut flips = 0;
    while !stop.load(Ordering::Relaxed) {
        if fs::rename(&d, &stash).is_ok() && symlink(outside, &d).is_ok() {
            flips += 1;
        }
        std::thread::yield_now();
        if fs::remove_file(&d).is_ok() && fs::rename(&stash, &d).is_ok() {
            flips += 1;
        }
        std::thread::yield_now();
    }
    flips
}

#[derive(Default, Debug)]
struct Tally {
    tries: usize,
    /// Tries that succeeded without escaping (the others failed cleanly, e.g. while `d` was a symlink).
    ok: usize,
    escapes: usize,
}

/// What an operation sees: the backend, and the outside directory (to detect, and undo, effects there).
type Op<'a> = &'a (dyn Fn(&FsStorage, &Path) -> Option<bool> + Sync);

/// Run `op` at least MIN_TRIES times (and while the budget lasts) while another thread flips `root/d`, on both
/// resolution strategies; returns the tallies (default, fallback).
fn race(name: &str, op: Op<'_>) -> [Tally; 2] {
    [
        race_with(name, ResolveStrategy::detect(), op),
        race_with(name, ResolveStrategy::Walk, op),
    ]
}

fn race_with(name: &str, strategy: ResolveStrategy, op: Op<'_>) -> Tally {
    let base = tempfile::tempdir().unwrap();
    let root = base.path().join("root");
    let outside = base.path().join("outside");
    fs::create_dir_all(root.join("d")).unwrap();
    fs::create_dir(&outside).unwrap();
    fs::write(root.join("d/secret"), INSIDE).unwrap();
    fs::write(outside.join("secret"), OUTSIDE).unwrap();
    fs::write(outside.join(OUTSIDE_MARKER), b"").unwrap();
    let s = FsStorage::with_strategy(&root, strategy).unwrap();
    let stop = AtomicBool::new(false);
    let flips = AtomicU64::new(0);
    let mut t = Tally::default();
    std::thread::scope(|sc| {
        sc.spawn(|| flips.store(flipper(&root, &outside, &stop), Ordering::Relaxed));
        let start = Instant::now();
        while t.tries < MIN_TRIES || (start.elapsed() < BUDGET && t.tries < MAX_TRIES) {
            t.tries += 1;
            match op(&s, &outside) {
                Some(true) => t.escapes += 1,
                Some(false) => t.ok += 1,
                None => {}
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    let flips = flips.load(Ordering::Relaxed);
    eprintln!(
        "race {name} ({strategy:?}): {} tries, {} succeeded inside, {} escapes, {flips} flips",
        t.tries, t.ok, t.escapes
    );
    // The race must really have happened, or a zero proves nothing.
    assert!(flips > 10, "{name}: the flipper barely ran ({flips} flips)");
    // The outside secret is untouched whatever happened.
    assert_eq!(fs::read(outside.join("secret")).unwrap(), OUTSIDE);
    t
}

fn no_escapes(t: [Tally; 2]) {
    assert!(t.iter().all(|t| t.escapes == 0), "{t:?}");
}

#[test]
fn open_read_never_reads_outside_while_a_directory_flips() {
    no_escapes(race("open_read", &|s, _| {
        let h = s.open_read("d/secret").ok()?;
        Some(read_all(&*h) == OUTSIDE)
    }));
}

#[test]
fn list_never_shows_outside_while_a_directory_flips() {
    no_escapes(race("list", &|s, _| {
        let l = s.list("d").ok()?;
        Some(l.iter().any(|m| m.name == OUTSIDE_MARKER))
    }));
}

#[test]
fn stat_never_describes_outside_while_a_directory_flips() {
    no_escapes(race("stat", &|s, _| {
        let m = s.stat("d/secret").ok()?;
        Some(m.size == OUTSIDE.len() as u64)
    }));
}

/// An escape here is a file or directory that appeared outside; it is removed again so later tries count too.
fn appeared(outside: &Path, name: &str) -> bool {
    let p = outside.join(name);
    let there = fs::symlink_metadata(&p).is_ok();
    let _ = fs::remove_file(&p);
    let _ = fs::remove_dir(&p);
    there
}

#[test]
fn uploads_never_create_outside_while_a_directory_flips() {
    no_escapes(race("stor", &|s, outside| {
        let p = s.open_write("d/planted", WriteMode::Replace).ok()?;
        p.handle().write_at(b"x", 0).ok()?;
        let committed = p.commit().is_ok();
        // Neither the destination nor a part file may ever land outside.
        let strays = fs::read_dir(outside)
            .unwrap()
            .filter_map(|e| e.ok())
            .any(|e| e.file_name() != "secret" && e.file_name() != OUTSIDE_MARKER);
        let escaped = appeared(outside, "planted") || strays;
        (committed || escaped).then_some(escaped)
    }));
}

#[test]
fn mkdir_never_creates_outside_while_a_directory_flips() {
    no_escapes(race("mkdir", &|s, outside| {
        let made = s.mkdir("d/made").is_ok();
        let escaped = appeared(outside, "made");
        if made && !escaped {
            let _ = s.rmdir("d/made");
        }
        (made || escaped).then_some(escaped)
    }));
}

#[test]
fn rename_never_moves_outside_files_while_a_directory_flips() {
    // RNFR d/secret, RNTO d/moved and back: an escape is the outside secret being renamed.
    no_escapes(race("rename", &|s, outside| {
        let moved = s.rename("d/secret", "d/moved").is_ok();
        let escaped = outside.join("moved").exists();
        if escaped {
            fs::rename(outside.join("moved"), outside.join("secret")).unwrap();
        } else if moved {
            // Put it back (retrying until `d` is the real directory again) so every try has a secret to move.
            for _ in 0..10_000 {
                if s.rename("d/moved", "d/secret").is_ok() {
                    break;
                }
                std::thread::yield_now();
            }
        }
        (moved || escaped).then_some(escaped)
    }));
}
