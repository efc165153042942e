//! A striped drsftp cluster (issue 23): `drsftp serve --movers` (the frontend, moving no data) with two
//! `drsftp serve --mover` data movers on 127.0.0.2 and 127.0.0.3 sharing its root. globus-url-copy `-stripe`
//! uploads to it (SPAS: one address per mover) and copies between two of its sessions third-party (SPOR: each
//! mover sends its share to its stripe); drsftp's own client stripes MODE E uploads and downloads over both
//! movers (`stripe_bytes` in `--json`), and with `-p 1` or `--no-stripes` goes through the first mover. Every
//! file is checked by SHA-256. The security tests: a
//! mover refuses control connections from anyone but its frontend and anonymous logins from it; a mover's
//! striped data listener accepts only the peer the frontend named; a mover that is down fails the transfer
//! with no file left, and the rerun after it is back completes it.

mod common;

use common::cluster::{mover, Cluster, MOVER_PASSWORD};
use common::*;
use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

const T: Duration = Duration::from_secs(120);

fn guc(args: &[&str]) -> (bool, String, String) {
    run(Command::new("globus-url-copy").args(args), T)
}

fn drsftp(args: &[&str]) -> (bool, String, String) {
    run(Command::new(bin()).args(args), T)
}

#[test]
fn guc_stripe_upload_and_third_party_through_a_frontend_with_two_movers() {
    if !have(
        "globus-url-copy",
        "guc_stripe_upload_and_third_party_through_a_frontend_with_two_movers",
    ) {
        return;
    }
    let dir = open_tempdir();
    let c = Cluster::start(dir.path(), 2);
    let local = dir.path().join("local.bin");
    let want = random_file(&local, 24 << 20, 23);
    // Upload: SPAS on the frontend names both movers; each receives what globus-url-copy sends it into one
    // part file, renamed into place when both are done.
    let from = format!("file://{}", local.display());
    let up = c.front.url("/up.bin");
    for extra in [vec!["-p", "2"], vec!["-p", "2", "-sbs", "1048576"]] {
        let mut args = vec!["-stripe"];
        args.extend(extra.iter().copied());
        args.extend([from.as_str(), up.as_str()]);
        let (ok, o, e) = guc(&args);
        assert!(ok, "globus-url-copy {args:?}: {o} {e}\n{}", c.logs());
        assert_eq!(sha256_file(&c.root.join("up.bin")), want, "{args:?}");
    }
    // Third-party between two sessions of the same cluster: the source frontend gets SPOR with the
    // destination's two mover addresses, and each source mover sends its share to one of them.
    for (name, sbs) in [("blocked", "262144"), ("partitioned", "0")] {
        let dst = c.front.url(&format!("/copy-{name}.bin"));
        let args = ["-stripe", "-p", "2", "-sbs", sbs, up.as_str(), dst.as_str()];
        let (ok, o, e) = guc(&args);
        assert!(ok, "globus-url-copy {args:?}: {o} {e}\n{}", c.logs());
        assert_eq!(
            sha256_file(&c.root.join(format!("copy-{name}.bin"))),
            want,
            "{name}"
        );
    }
    // Download to a local file (one client address: the first mover sends it all).
    let out = dir.path().join("down.bin");
    let to = format!("file://{}", out.display());
    let (ok, o, e) = guc(&["-stripe", "-p", "2", up.as_str(), to.as_str()]);
    assert!(ok, "download: {o} {e}\n{}", c.logs());
    assert_eq!(sha256_file(&out), want);
    // No part file left behind.
    let left: Vec<String> = std::fs::read_dir(&c.root)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("drsftp-stripe"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn drsftp_client_stripes_over_every_mover_or_uses_the_first() {
    let dir = open_tempdir();
    let c = Cluster::start(dir.path(), 2);
    let local = dir.path().join("local.bin");
    let want = random_file(&local, 8 << 20, 24);
    // Stream mode (-p 1) goes through the first mover; MODE E is striped over both (SPAS names two movers)
    // unless --no-stripes.
    for (p, extra, striped) in [
        ("1", None, false),
        ("4", None, true),
        ("4", Some("--no-stripes"), false),
    ] {
        let tag = format!("{p}{}", extra.unwrap_or(""));
        let run_copy = |src: &str, dst: &str| {
            let mut a = vec!["copy", "--json", "-p", p];
            a.extend(extra);
            a.extend([src, dst]);
            let (ok, o, e) = drsftp(&a);
            assert!(ok, "{tag} {src} -> {dst}: {o} {e}\n{}", c.logs());
            let per: Vec<u64> = json_of(&o)["stripe_bytes"]
                .as_array()
                .map(|v| v.iter().map(|b| b.as_u64().unwrap()).collect())
                .unwrap_or_default();
            if striped {
                assert_eq!(per.len(), 2, "{tag}: {o}");
                assert!(
                    per.iter().all(|b| *b > 0),
                    "{tag}: a mover carried nothing: {o}"
                );
            } else {
                assert!(per.len() <= 1, "{tag}: {o}");
            }
        };
        let dst = c.front.url(&format!("/plain-{tag}.bin"));
        run_copy(local.to_str().unwrap(), &dst);
        assert_eq!(sha256_file(&c.root.join(format!("plain-{tag}.bin"))), want);
        let out = dir.path().join(format!("back-{tag}.bin"));
        run_copy(&dst, out.to_str().unwrap());
        assert_eq!(sha256_file(&out), want);
    }
}

#[test]
fn a_mover_serves_only_its_frontend_and_no_anonymous_login() {
    let dir = open_tempdir();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let m = mover(&root, "127.0.0.2:0", 0, MOVER_PASSWORD, &[]);
    // Another host (127.0.0.9 plays it): 421 before any command.
    let mut from_elsewhere = String::new();
    let _ = std::io::Read::read_to_string(
        &mut socket2_connect("127.0.0.9", m.addr),
        &mut from_elsewhere,
    );
    assert!(from_elsewhere.starts_with("421"), "{from_elsewhere:?}");
    // The frontend's address, anonymous: refused; the mover account: accepted.
    let mut raw = Raw::connect(m.addr);
    raw.cmd("USER anonymous");
    let r = raw.cmd("PASS x@");
    assert!(r.starts_with("530"), "{r}");
    let mut raw = Raw::connect(m.addr);
    assert!(raw.cmd("USER mover").starts_with("331"));
    assert!(raw
        .cmd(&format!("PASS {MOVER_PASSWORD}"))
        .starts_with("230"));
}

/// A TCP connection to `to` from the loopback address `from`.
fn socket2_connect(from: &str, to: SocketAddr) -> std::net::TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let from: SocketAddr = format!("{from}:0").parse().unwrap();
    s.bind(&from.into()).unwrap();
    s.connect(&to.into()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.into()
}

/// A stranger (127.0.0.9) connecting to every stripe of a striped upload and writing: each mover must close it
/// unread at once. A connection kept open (the read timing out) is a stripe that took it, so only end-of-file
/// or a reset pass.
fn strangers_are_closed_unread(c: &Cluster, peer: Option<&str>) {
    use std::io::{ErrorKind, Read, Write};
    let mut raw = Raw::connect(c.front.addr);
    raw.login();
    assert!(raw.cmd("TYPE I").starts_with("200"));
    assert!(raw.cmd("MODE E").starts_with("200"));
    if let Some(p) = peer {
        let r = raw.cmd(&format!("PEER {p}"));
        assert!(r.starts_with("200"), "{r}");
    }
    let r = raw.cmd("SPAS");
    let addrs: Vec<SocketAddr> = r
        .lines()
        .filter(|l| l.starts_with(' '))
        .map(|l| pasv_addr(&format!("({})", l.trim())))
        .collect();
    assert_eq!(addrs.len(), 2, "{r}");
    assert_eq!(addrs[0].ip().to_string(), "127.0.0.2", "{r}");
    assert_eq!(addrs[1].ip().to_string(), "127.0.0.3", "{r}");
    raw.send_raw(b"STOR /hijack.bin\r\n");
    let r = raw.reply();
    assert!(r.starts_with("150") || r.starts_with("125"), "{r}");
    for a in &addrs {
        let mut s = socket2_connect("127.0.0.9", *a);
        let _ = s.write_all(b"INJECTED");
        let mut b = [0u8; 16];
        let r = s.read(&mut b);
        assert!(
            matches!(&r, Ok(0))
                || r.as_ref()
                    .is_err_and(|e| e.kind() == ErrorKind::ConnectionReset),
            "stripe {a} (peer {peer:?}) took a stranger: {r:?}\n{}",
            c.logs()
        );
    }
    raw.send_raw(b"ABOR\r\n");
    let r = raw.final_reply();
    assert!(!r.starts_with("226"), "{r}");
    assert!(!c.root.join("hijack.bin").exists());
}

#[test]
fn striped_listeners_take_only_the_named_peer() {
    // The default policy: the frontend names the client's host to its movers.
    let dir = open_tempdir();
    let c = Cluster::with(dir.path(), 2, &[], &[]);
    strangers_are_closed_unread(&c, None);
    // `--third-party all` takes any host unless the client names one with PEER: then only that one.
    let dir = open_tempdir();
    let c = Cluster::start(dir.path(), 2);
    strangers_are_closed_unread(&c, Some("127.0.0.1"));
}

#[test]
fn a_mover_that_is_down_fails_the_transfer_and_a_rerun_completes_it() {
    if !have(
        "globus-url-copy",
        "a_mover_that_is_down_fails_the_transfer_and_a_rerun_completes_it",
    ) {
        return;
    }
    let dir = open_tempdir();
    let mut c = Cluster::start(dir.path(), 2);
    let local = dir.path().join("local.bin");
    let want = random_file(&local, 8 << 20, 25);
    let from = format!("file://{}", local.display());
    let up = c.front.url("/up.bin");
    c.kill_mover(1);
    let (ok, o, e) = guc(&["-stripe", "-p", "2", from.as_str(), up.as_str()]);
    assert!(!ok, "succeeded with a mover down: {o}");
    assert!(e.contains("45") || e.contains("42"), "{e}");
    assert!(!c.root.join("up.bin").exists());
    c.restart_mover(1);
    let (ok, o, e) = guc(&["-stripe", "-p", "2", from.as_str(), up.as_str()]);
    assert!(ok, "rerun: {o} {e}\n{}", c.logs());
    assert_eq!(sha256_file(&c.root.join("up.bin")), want);
}
