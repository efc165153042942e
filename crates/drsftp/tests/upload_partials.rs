//! Kept partial uploads against a hostile or careless client (docs/resume.md "Upload resume"), over loopback with
//! hand-written MODE E: a resumable `STOR` (armed with `SITE PARTIAL`) that dies keeps its partial, never under
//! the final name; another user asking for the same path, size and tag learns nothing and cannot splice into
//! it; no listing, `CWD`, `SIZE`, `DELE`, `RNFR` or `MKD` reaches the kept directory; a client claiming ranges
//! the server does not hold cannot get a file with holes committed; a user abandoning partials on many paths
//! never keeps more than `--partials-max` (oldest go first) and never evicts another user's; and an old partial
//! is removed after `--partials-max-age`.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use common::*;

fn code(r: &str) -> u16 {
    r[..3].parse().unwrap()
}

fn header(desc: u8, count: u64, offset: u64) -> Vec<u8> {
    let mut h = vec![desc];
    h.extend_from_slice(&count.to_be_bytes());
    h.extend_from_slice(&offset.to_be_bytes());
    h
}

fn login(c: &mut Raw, user: &str) {
    assert_eq!(code(&c.cmd(&format!("USER {user}"))), 331);
    assert_eq!(code(&c.cmd("PASS pw")), 230);
    assert_eq!(code(&c.cmd("TYPE I")), 200);
    assert_eq!(code(&c.cmd("MODE E")), 200);
}

/// `SITE PARTIAL`, then a STOR of `size` bytes of which only `blocks` (offset, bytes) are sent, then EOD+EOF
/// (`complete`) or nothing before the data connection closes; returns the SITE PARTIAL and final replies.
fn partial_upload(
    c: &mut Raw,
    path: &str,
    size: u64,
    rest: Option<&str>,
    blocks: &[(u64, Vec<u8>)],
    complete: bool,
) -> (String, String) {
    let asked = c.cmd(&format!("SITE PARTIAL {size} v1 {path}"));
    let r = c.cmd("PASV");
    let mut data = TcpStream::connect(pasv_addr(&r)).unwrap();
    assert_eq!(code(&c.cmd(&format!("ALLO {size}"))), 200);
    if let Some(r) = rest {
        assert_eq!(code(&c.cmd(&format!("REST {r}"))), 350);
    }
    c.send_raw(format!("STOR {path}\r\n").as_bytes());
    let r = c.reply();
    assert!(r.starts_with("150") || r.starts_with("125"), "{r}");
    for (off, b) in blocks {
        data.write_all(&header(0, b.len() as u64, *off)).unwrap();
        data.write_all(b).unwrap();
    }
    if complete {
        // EOD with EOF: one stream.
        data.write_all(&header(0x48, 0, 1)).unwrap();
    }
    drop(data);
    (asked, c.final_reply())
}

fn kept_dir(root: &Path) -> std::path::PathBuf {
    root.join(".drsftp-part.kept")
}

fn kept_parts(root: &Path) -> usize {
    std::fs::read_dir(kept_dir(root)).map_or(0, |d| {
        d.filter_map(|e| e.ok())
            .filter(|e| !e.file_name().to_string_lossy().contains('.'))
            .count()
    })
}

#[test]
fn partials_are_private_bounded_and_never_complete_early() {
    let dir = open_tempdir();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let srv = drsftp_server(
        &root,
        &[
            "--user",
            "alice:pw",
            "--user",
            "bob:pw",
            "--partials-max",
            "3",
        ],
    );
    let size = 1u64 << 20;
    let data: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
    let half = (size / 2) as usize;

    // Alice's upload ends after the first half (EOF, short of ALLO): nothing under the final name, the half is
    // kept. (A connection that just dies is the lab test's case: cli_upload_resume.rs.)
    let mut a = Raw::connect(srv.addr);
    login(&mut a, "alice");
    let (asked, r) = partial_upload(
        &mut a,
        "up.bin",
        size,
        None,
        &[(0, data[..half].to_vec())],
        true,
    );
    assert_eq!(code(&asked), 200, "{asked}");
    assert!((400..500).contains(&code(&r)), "{r}");
    assert!(!root.join("up.bin").exists());
    assert_eq!(kept_parts(&root), 1);
    let asked = a.cmd(&format!("SITE PARTIAL {size} v1 up.bin"));
    assert_eq!(asked, format!("213 Range Marker 0-{half}"));
    // Another tag (a changed source) or size holds nothing.
    assert_eq!(code(&a.cmd(&format!("SITE PARTIAL {size} v2 up.bin"))), 200);
    assert_eq!(
        code(&a.cmd(&format!("SITE PARTIAL {} v1 up.bin", size + 1))),
        200
    );

    // Bob, same path, size and tag: nothing held, and his claim of Alice's ranges commits nothing.
    let mut b = Raw::connect(srv.addr);
    login(&mut b, "bob");
    let (asked, r) = partial_upload(
        &mut b,
        "up.bin",
        size,
        Some(&format!("0-{half}")),
        &[(half as u64, data[half..].to_vec())],
        true,
    );
    assert_eq!(code(&asked), 200, "{asked}");
    assert!((400..500).contains(&code(&r)), "bob's splice: {r}");
    assert!(
        !root.join("up.bin").exists(),
        "a file with a hole was committed"
    );
    // Neither sees the kept directory in any way.
    for c in [&mut a, &mut b] {
        let r = c.cmd("STAT /");
        assert!(!r.contains("drsftp-part"), "{r}");
        for cmd in [
            "CWD /.drsftp-part.kept",
            "SIZE /.drsftp-part.kept",
            "DELE /.drsftp-part.kept",
            "RNFR /.drsftp-part.kept",
            "MKD /.drsftp-part.kept/x",
        ] {
            assert!(code(&c.cmd(cmd)) >= 500, "{cmd}");
        }
    }
    // Alice's partial is intact; she resumes with the second half only and gets the whole file.
    let (asked, r) = partial_upload(
        &mut a,
        "up.bin",
        size,
        Some(&format!("0-{half}")),
        &[(half as u64, data[half..].to_vec())],
        true,
    );
    assert_eq!(asked, format!("213 Range Marker 0-{half}"));
    assert_eq!(code(&r), 226, "{r}");
    assert_eq!(std::fs::read(root.join("up.bin")).unwrap(), data);

    // Claiming more than is held (a gap the server never received) is not committed either.
    let (_, r) = partial_upload(
        &mut a,
        "gap.bin",
        size,
        None,
        &[(0, data[..1000].to_vec())],
        true,
    );
    assert!((400..500).contains(&code(&r)), "{r}");
    let (asked, r) = partial_upload(
        &mut a,
        "gap.bin",
        size,
        Some(&format!("0-{half}")),
        &[(half as u64, data[half..].to_vec())],
        true,
    );
    assert_eq!(asked, "213 Range Marker 0-1000");
    assert!((400..500).contains(&code(&r)), "{r}");
    assert!(!root.join("gap.bin").exists());

    // Bob abandons partials on many paths: he never keeps more than --partials-max, and his never evict
    // Alice's (gap.bin stays hers: 3 of Bob's + 1 of Alice's at most).
    for i in 0..6 {
        let (_, r) = partial_upload(
            &mut b,
            &format!("junk{i}.bin"),
            size,
            None,
            &[(0, vec![1u8; 4096])],
            true,
        );
        assert!((400..500).contains(&code(&r)), "{r}");
        assert!(kept_parts(&root) <= 4, "after {i}: {}", kept_parts(&root));
    }
    assert!(a
        .cmd(&format!("SITE PARTIAL {size} v1 gap.bin"))
        .starts_with("213 "));
    // The newest survive: the last junk file is resumable, the first is gone.
    assert!(b
        .cmd(&format!("SITE PARTIAL {size} v1 junk5.bin"))
        .starts_with("213 "));
    assert!(b
        .cmd(&format!("SITE PARTIAL {size} v1 junk0.bin"))
        .starts_with("200 "));
    drop(srv);
}

#[test]
fn old_partials_are_removed() {
    let dir = open_tempdir();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let srv = drsftp_server(&root, &["--user", "alice:pw", "--partials-max-age", "2s"]);
    let mut a = Raw::connect(srv.addr);
    login(&mut a, "alice");
    let size = 100_000;
    let (_, r) = partial_upload(&mut a, "old.bin", size, None, &[(0, vec![5u8; 5000])], true);
    assert!((400..500).contains(&code(&r)), "{r}");
    assert!(a
        .cmd(&format!("SITE PARTIAL {size} v1 old.bin"))
        .starts_with("213 "));
    assert_eq!(kept_parts(&root), 1);
    std::thread::sleep(Duration::from_secs(3));
    assert!(a
        .cmd(&format!("SITE PARTIAL {size} v1 old.bin"))
        .starts_with("200 "));
    assert_eq!(kept_parts(&root), 0, "swept");
    // `--partials-max 0`: the server keeps none and says so.
    drop(srv);
    let srv = drsftp_server(&root, &["--user", "alice:pw", "--partials-max", "0"]);
    let mut a = Raw::connect(srv.addr);
    login(&mut a, "alice");
    assert_eq!(code(&a.cmd("SITE PARTIAL 10 v1 x")), 502);
}
