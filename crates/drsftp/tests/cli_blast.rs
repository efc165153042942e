//! `drsftp copy --transport udp` end to end with the real binaries on loopback: download and upload against
//! `drsftp serve` (SHA-256 equal, `--json` reports `transport`, `duplicates`, `rejected`), the fallback to TCP
//! against `drsftp serve --no-blast` and against Debian's globus-gridftp-server (skipped with a printed reason when
//! it is not installed), and bad arguments.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;

const T: Duration = Duration::from_secs(120);

fn drsftp(args: &[&str]) -> (bool, String, String) {
    run(Command::new(bin()).args(args), T)
}

/// Runs `drsftp copy --transport udp ARGS...`.
fn udp_copy(args: &[&str]) -> (bool, String, String) {
    drsftp(&[&["copy", "--transport", "udp"], args].concat())
}

fn served(
    len: usize,
    extra: &[&str],
) -> (tempfile::TempDir, std::path::PathBuf, ServerProcess, String) {
    let dir = open_tempdir();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    chmod(&root, 0o777);
    let want = random_file(&root.join("src.bin"), len, 41);
    let srv = drsftp_server(&root, extra);
    (dir, root, srv, want)
}

#[test]
fn copy_udp_download_and_upload_against_drsftp_serve() {
    let len = (16 << 20) + 333;
    let (dir, root, srv, want) = served(len, &[]);
    let out = dir.path().join("down.bin");
    let (ok, o, e) = udp_copy(&["--json", &srv.url("/src.bin"), out.to_str().unwrap()]);
    assert!(ok, "udp download: {o} {e}\nserver log:\n{}", srv.log_text());
    let j = json_of(&o);
    assert_eq!(j["transport"], "udp", "{j}");
    assert_eq!(j["bytes"].as_u64(), Some(len as u64), "{j}");
    assert_eq!(j["verified"], true, "{j}");
    assert_eq!(j["rejected"].as_u64(), Some(0), "{j}");
    let dups = j["duplicates"].as_u64().expect("duplicates field");
    let packets = j["blast"]["packets"].as_u64().expect("blast.packets");
    assert!(dups * 100 <= packets * 3, "duplicates {dups} of {packets}");
    assert_eq!(sha256_file(&out), want);

    let (ok, o, e) = udp_copy(&[
        "--max-rate",
        "300mbit",
        "--json",
        out.to_str().unwrap(),
        &srv.url("/up.bin"),
    ]);
    assert!(ok, "udp upload: {o} {e}\nserver log:\n{}", srv.log_text());
    let j = json_of(&o);
    assert_eq!(j["transport"], "udp", "{j}");
    assert_eq!(j["verified"], true, "{j}");
    assert!(j["mbps"].as_f64().unwrap() < 330.0, "rate cap: {j}");
    assert_eq!(sha256_file(&root.join("up.bin")), want);

    // The human summary names the transport.
    let again = dir.path().join("again.bin");
    let (ok, _, e) = udp_copy(&[&srv.url("/src.bin"), again.to_str().unwrap()]);
    assert!(ok, "{e}");
    assert!(e.contains("(UDP blast, "), "{e}");
}

#[test]
fn copy_udp_falls_back_to_tcp_against_serve_without_blast() {
    let (dir, root, srv, want) = served(3 << 20, &["--no-blast"]);
    let out = dir.path().join("down.bin");
    let (ok, o, e) = udp_copy(&["--json", &srv.url("/src.bin"), out.to_str().unwrap()]);
    assert!(ok, "{o} {e}");
    let j = json_of(&o);
    assert_eq!(j["transport"], "tcp", "{j}");
    assert!(j["notices"].to_string().contains("no BLAST in FEAT"), "{j}");
    assert_eq!(sha256_file(&out), want);
    let (ok, o, e) = udp_copy(&["--json", out.to_str().unwrap(), &srv.url("/up.bin")]);
    assert!(ok, "{o} {e}");
    assert_eq!(json_of(&o)["transport"], "tcp");
    assert_eq!(sha256_file(&root.join("up.bin")), want);
}

#[test]
fn copy_udp_falls_back_to_tcp_against_globus() {
    let Some((dir, src, want, srv)) = globus_with_file(
        "copy_udp_falls_back_to_tcp_against_globus",
        "g-src.bin",
        8 << 20,
        42,
    ) else {
        return;
    };
    let url = |p: &Path| srv.url(p.to_str().unwrap());
    let out = dir.path().join("g-down.bin");
    let (ok, o, e) = udp_copy(&["--json", &url(&src), out.to_str().unwrap()]);
    assert!(ok, "{o} {e}\nserver log:\n{}", srv.log_text());
    let j = json_of(&o);
    assert_eq!(j["transport"], "tcp", "{j}");
    assert_eq!(j["verified"], true, "{j}");
    assert!(j["notices"].to_string().contains("no BLAST in FEAT"), "{j}");
    assert_eq!(sha256_file(&out), want);
    let up = dir.path().join("g-up.bin");
    let (ok, o, e) = udp_copy(&["-p", "4", "--json", src.to_str().unwrap(), &url(&up)]);
    assert!(ok, "{o} {e}");
    let j = json_of(&o);
    assert_eq!(
        (j["transport"].as_str(), j["mode"].as_str()),
        (Some("tcp"), Some("E")),
        "{j}"
    );
    assert_eq!(sha256_file(&up), want);
    // Let globus' per-connection children finish before the parent is killed on drop.
    srv.settle();
}

#[test]
fn bad_transport_arguments_are_refused() {
    let (ok, _, e) = drsftp(&[
        "copy",
        "--transport",
        "sctp",
        "ftp://127.0.0.1:1/x",
        "/tmp/x",
    ]);
    assert!(!ok && e.contains("sctp"), "{e}");
    let (ok, _, e) = udp_copy(&["--max-rate", "fast", "ftp://127.0.0.1:1/x", "/tmp/x"]);
    assert!(!ok && e.contains("fast"), "{e}");
    let (ok, _, e) = udp_copy(&["--mtu", "100", "ftp://127.0.0.1:1/x", "/tmp/x"]);
    assert!(!ok && e.contains("100"), "{e}");
}

/// ABOR of a blast download is answered at once, and the server's sender stops: a blast sender cannot see the
/// client leave (no connection breaks), so a grace period for it to end by itself would only keep it sending
/// into a path the client left (`--transport auto`'s probe moves to TCP on that path) and delay the reply by it
/// (1 s before the fix).
#[test]
fn abor_of_a_blast_download_is_answered_at_once_and_stops_the_sender() {
    let (_dir, _root, srv, _) = served(64 << 20, &[]);
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = udp.local_addr().unwrap().port();
    let mut c = Raw::connect(srv.addr);
    c.login();
    assert!(c.cmd("TYPE I").starts_with("200"));
    let r = c.cmd(&format!("BPAS 127,0,0,1,{},{}", port >> 8, port & 255));
    assert!(r.starts_with("229"), "{r}");
    let r = c.cmd("RETR src.bin");
    assert!(r.starts_with("150"), "{r}");
    // Datagrams flow (no acks from us: the sender sends its unacknowledged budget, then waits and resends).
    udp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = vec![0u8; 65536];
    assert!(udp.recv(&mut buf).is_ok(), "no blast datagram arrived");
    let t = std::time::Instant::now();
    c.send_raw(b"ABOR\r\n");
    let mut replies = vec![c.reply()];
    if replies[0].starts_with("426") {
        replies.push(c.reply());
    }
    let took = t.elapsed();
    assert!(replies.iter().any(|r| r.starts_with("226")), "{replies:?}");
    assert!(
        took < Duration::from_millis(500),
        "ABOR answered after {took:?}: {replies:?}"
    );
    // Nothing more is sent: drain what was in flight, then silence.
    udp.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    while udp.recv(&mut buf).is_ok() {}
    udp.set_read_timeout(Some(Duration::from_millis(1500)))
        .unwrap();
    assert!(
        udp.recv(&mut buf).is_err(),
        "the server still sends blast datagrams after answering ABOR"
    );
    // The session goes on.
    assert!(c.cmd("NOOP").starts_with("200"));
}
