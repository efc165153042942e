//! `drsftp copy ftp://A/x ftp://B/y` (third-party, server to server) end to end with the real binaries on
//! loopback: stream mode and MODE E -p 4 between two `drsftp serve`, both directions with Debian's
//! globus-gridftp-server as one end (skipped with a printed reason when it is not installed), the UDP blast channel
//! between two `drsftp serve` (BPAS / BPAS addr / BPRT), the fallback to TCP when the destination cannot receive a
//! third-party blast transfer, and a refused source leaving an existing destination alone.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;
use serde_json::Value;

const T: Duration = Duration::from_secs(120);

fn drsftp(args: &[&str]) -> (bool, String, String) {
    run(Command::new(bin()).args(args), T)
}

/// A world-writable root directory under `dir`.
fn root(dir: &Path, name: &str) -> std::path::PathBuf {
    let r = dir.join(name);
    std::fs::create_dir(&r).unwrap();
    chmod(&r, 0o777);
    r
}

/// `drsftp copy --json <extra> src dst`, asserting success; the JSON summary.
fn copy_ok(extra: &[&str], src: &str, dst: &str, logs: &[&ServerProcess]) -> Value {
    let mut args = vec!["copy", "--json"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&[src, dst]);
    let (ok, o, e) = drsftp(&args);
    let logs: String = logs.iter().map(|p| p.log_text()).collect();
    assert!(
        ok,
        "copy {extra:?} {src} {dst}: {o} {e}\nserver logs:\n{logs}"
    );
    let j = json_of(&o);
    assert_eq!(j["mode"], "third-party", "{j}");
    assert_eq!(j["verified"], true, "{j}");
    j
}

#[test]
fn third_party_tcp_stream_and_mode_e_between_drsftp_servers() {
    let dir = open_tempdir();
    let (ra, rb) = (root(dir.path(), "a"), root(dir.path(), "b"));
    let len = (16 << 20) + 4321;
    let want = random_file(&ra.join("src.bin"), len, 61);
    let (a, b) = (drsftp_server(&ra, &[]), drsftp_server(&rb, &[]));
    let j = copy_ok(&[], &a.url("/src.bin"), &b.url("/"), &[&a, &b]);
    assert_eq!(
        (j["wire_mode"].as_str(), j["transport"].as_str()),
        (Some("S"), Some("tcp")),
        "{j}"
    );
    assert_eq!(j["bytes"].as_u64(), Some(len as u64), "{j}");
    assert!(
        j["checksum"].as_str().unwrap().starts_with("crc32c:"),
        "{j}"
    );
    assert_eq!(sha256_file(&rb.join("src.bin")), want);
    let j = copy_ok(
        &["-p", "4"],
        &a.url("/src.bin"),
        &b.url("/e.bin"),
        &[&a, &b],
    );
    assert_eq!(
        (j["wire_mode"].as_str(), j["streams"].as_u64()),
        (Some("E"), Some(4)),
        "{j}"
    );
    assert_eq!(sha256_file(&rb.join("e.bin")), want);
    // The human summary says what happened.
    let (ok, _, e) = drsftp(&["copy", &a.url("/src.bin"), &b.url("/h.bin")]);
    assert!(ok && e.contains("[third-party]"), "{e}");
}

#[test]
fn third_party_with_globus_as_either_end() {
    if !have(
        "globus-gridftp-server",
        "third_party_with_globus_as_either_end",
    ) {
        return;
    }
    let dir = open_tempdir();
    let rd = root(dir.path(), "d");
    let len = (8 << 20) + 77;
    let src = dir.path().join("g-src.bin");
    let want = random_file(&src, len, 62);
    let ours = drsftp_server(&rd, &[]);
    let g = globus::start(dir.path(), &[]);
    let gurl = |p: &Path| g.url(p.to_str().unwrap());
    for (k, extra) in [&[][..], &["-p", "4"][..]].into_iter().enumerate() {
        // Globus sends (it accepts our PORT to the drsftp server's PASV address).
        let name = format!("/from-g-{k}.bin");
        let j = copy_ok(extra, &gurl(&src), &ours.url(&name), &[&ours, &g]);
        assert!(
            j["checksum"].as_str().unwrap().starts_with("sha256:"),
            "{j}"
        );
        assert_eq!(sha256_file(&rd.join(&name[1..])), want);
        // Globus receives (PASV on Globus, PORT on drsftp serve).
        let back = dir.path().join(format!("to-g-{k}.bin"));
        copy_ok(extra, &ours.url(&name), &gurl(&back), &[&ours, &g]);
        assert_eq!(sha256_file(&back), want);
    }
    // UDP asked for, Globus has no BLAST: TCP, with a note.
    let back = dir.path().join("to-g-udp.bin");
    let j = copy_ok(
        &["--transport", "udp"],
        &ours.url("/from-g-0.bin"),
        &gurl(&back),
        &[&ours, &g],
    );
    assert_eq!(j["transport"], "tcp", "{j}");
    assert!(j["notices"].to_string().contains("BPRT"), "{j}");
    assert_eq!(sha256_file(&back), want);
    // Let globus' per-connection children finish before the parent is killed on drop.
    g.settle();
}

#[test]
fn third_party_blast_between_drsftp_servers() {
    let dir = open_tempdir();
    let (ra, rb) = (root(dir.path(), "a"), root(dir.path(), "b"));
    let len = (12 << 20) + 999;
    let want = random_file(&ra.join("src.bin"), len, 63);
    let (a, b) = (drsftp_server(&ra, &[]), drsftp_server(&rb, &[]));
    let j = copy_ok(
        &["--transport", "udp", "--mtu", "9000"],
        &a.url("/src.bin"),
        &b.url("/u.bin"),
        &[&a, &b],
    );
    assert_eq!(j["transport"], "udp", "{j}");
    assert_eq!(j["bytes"].as_u64(), Some(len as u64), "{j}");
    assert_eq!(sha256_file(&rb.join("u.bin")), want);
}

#[test]
fn third_party_blast_falls_back_to_tcp_without_bprt() {
    let dir = open_tempdir();
    let (ra, rb) = (root(dir.path(), "a"), root(dir.path(), "b"));
    let want = random_file(&ra.join("src.bin"), (4 << 20) + 1, 64);
    let a = drsftp_server(&ra, &[]);
    let b = drsftp_server(&rb, &["--no-blast"]);
    let (ok, o, e) = drsftp(&[
        "copy",
        "--transport",
        "udp",
        "--json",
        &a.url("/src.bin"),
        &b.url("/f.bin"),
    ]);
    assert!(ok, "{o} {e}");
    let j = json_of(&o);
    assert_eq!(j["transport"], "tcp", "{j}");
    assert!(
        e.contains("note:") && e.contains("BPRT") && e.contains("using TCP"),
        "{e}"
    );
    assert_eq!(sha256_file(&rb.join("f.bin")), want);
}

#[test]
fn third_party_failure_leaves_an_existing_destination_alone() {
    let dir = open_tempdir();
    let (ra, rb) = (root(dir.path(), "a"), root(dir.path(), "b"));
    random_file(&ra.join("src.bin"), 1000, 65);
    std::fs::write(rb.join("keep.bin"), b"keep").unwrap();
    let (a, b) = (drsftp_server(&ra, &[]), drsftp_server(&rb, &[]));
    let (ok, o, e) = drsftp(&[
        "copy",
        "--json",
        &a.url("/missing.bin"),
        &b.url("/keep.bin"),
    ]);
    assert!(!ok, "{o} {e}");
    assert!(
        json_of(&o)["error"].as_str().unwrap().contains("550"),
        "{o}"
    );
    assert_eq!(std::fs::read(rb.join("keep.bin")).unwrap(), b"keep");
    // A destination the server refuses: nothing created, a clear error.
    let (ok, _, e) = drsftp(&["copy", &a.url("/src.bin"), &b.url("/no/such/dir/x.bin")]);
    assert!(!ok && e.contains("destination server"), "{e}");
    // Partial third-party copies are refused up front.
    let (ok, _, e) = drsftp(&["copy", "--off", "10", &a.url("/src.bin"), &b.url("/p.bin")]);
    assert!(!ok && e.contains("--off/--len"), "{e}");
    assert!(!rb.join("p.bin").exists());
}
