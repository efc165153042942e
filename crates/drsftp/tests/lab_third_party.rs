//! Third-party copies between `drsftp serve` instances on two different (emulated) hosts: a 2-host
//! `drsftp_lab::Lab`, one server per host, and `drsftp copy ftp://h1/x ftp://h2/y` run inside host 1 over TCP
//! (MODE E, 2 streams) and over the UDP blast channel. The sender is told to connect to the other host, which only
//! works when bounce protection allows it (`--third-party all` for these anonymous servers); a host-1 server with
//! `--third-party none` shows the 504 that used to end every cross-host copy. Needs root and /dev/net/tun;
//! otherwise prints `SKIPPED <test>: <reason>` and returns.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use drsftp_lab::Lab;
use drsftp_testkit::require_lab;

const T: Duration = Duration::from_secs(120);

/// `drsftp serve` inside lab host `k`, listening on the host's lab address, anonymous, with extra args.
fn lab_server(lab: &Lab, k: usize, root: &Path, extra: &[&str]) -> ServerProcess {
    let cmd = lab.exec(k, bin().to_str().expect("utf-8 binary path"));
    drsftp_serve(cmd, &format!("{}:0", lab.addr(k)), root, extra)
}

/// `drsftp copy --json <extra> src dst` inside lab host `k`: (success, stdout, stderr).
fn lab_copy(lab: &Lab, k: usize, extra: &[&str], src: &str, dst: &str) -> (bool, String, String) {
    let mut cmd = lab.exec(k, bin().to_str().expect("utf-8 binary path"));
    cmd.args(["copy", "--json"]).args(extra).args([src, dst]);
    run(&mut cmd, T)
}

#[test]
fn third_party_copy_between_two_lab_hosts_tcp_and_udp() {
    require_lab!("third_party_copy_between_two_lab_hosts_tcp_and_udp");
    let lab = drsftp_testkit::lab::up("3p", 2, Duration::from_millis(2), 500_000_000);
    let dir = open_tempdir();
    let (r1, r2, r3) = (
        dir.path().join("h1"),
        dir.path().join("h2"),
        dir.path().join("h1-strict"),
    );
    for r in [&r1, &r2, &r3] {
        std::fs::create_dir(r).unwrap();
    }
    let len = (8 << 20) + 4321;
    let want = random_file(&r1.join("src.bin"), len, 71);
    std::fs::copy(r1.join("src.bin"), r3.join("src.bin")).unwrap();
    let a = lab_server(&lab, 1, &r1, &["--third-party", "all"]);
    let b = lab_server(&lab, 2, &r2, &["--third-party", "all"]);
    let strict = lab_server(&lab, 1, &r3, &["--third-party", "none"]);
    let logs = || format!("h1 log:\n{}\nh2 log:\n{}", a.log_text(), b.log_text());

    // TCP, MODE E with 2 streams: host-1 server connects to host 2's PASV address.
    let (ok, o, e) = lab_copy(
        &lab,
        1,
        &["-p", "2"],
        &a.url("/src.bin"),
        &b.url("/tcp.bin"),
    );
    assert!(ok, "TCP copy: {o} {e}\n{}", logs());
    let j = json_of(&o);
    assert_eq!(j["mode"], "third-party", "{j}");
    assert_eq!(
        (
            j["wire_mode"].as_str(),
            j["streams"].as_u64(),
            j["transport"].as_str()
        ),
        (Some("E"), Some(2), Some("tcp")),
        "{j}"
    );
    assert_eq!(sha256_file(&r2.join("tcp.bin")), want);

    // UDP blast: BPAS on host 2, `BPAS <host-2 addr>` on host 1, BPRT on host 2.
    let (ok, o, e) = lab_copy(
        &lab,
        1,
        &["--transport", "udp"],
        &a.url("/src.bin"),
        &b.url("/udp.bin"),
    );
    assert!(ok, "UDP copy: {o} {e}\n{}", logs());
    let j = json_of(&o);
    assert_eq!(j["transport"], "udp", "{j}");
    assert_eq!(j["bytes"].as_u64(), Some(len as u64), "{j}");
    assert_eq!(sha256_file(&r2.join("udp.bin")), want);

    // Bounce protection on: the host-1 server refuses to connect to host 2.
    let (ok, o, e) = lab_copy(&lab, 1, &[], &strict.url("/src.bin"), &b.url("/no.bin"));
    assert!(
        !ok,
        "copy from a --third-party none server succeeded: {o} {e}"
    );
    assert!(format!("{o} {e}").contains("504"), "{o} {e}");
    assert!(!r2.join("no.bin").exists());

    drop((a, b, strict));
    lab.down().expect("lab down");
}

/// The client on the destination's host, so the destination's passive port is reached by a third host (the
/// source server): the copy works only because the client names the source with `PEER`, which the destination's
/// `--third-party auth` policy allows for a configured user and refuses for an anonymous one (whose copy then
/// fails at the data connection: the destination closes the source's connection unread, leaving no file).
#[test]
fn third_party_copy_names_the_sending_host_with_peer() {
    require_lab!("third_party_copy_names_the_sending_host_with_peer");
    let lab = drsftp_testkit::lab::up("3q", 2, Duration::from_millis(2), 500_000_000);
    let dir = open_tempdir();
    let (r1, r2) = (dir.path().join("h1"), dir.path().join("h2"));
    for r in [&r1, &r2] {
        std::fs::create_dir(r).unwrap();
    }
    let len = (2 << 20) + 77;
    let want = random_file(&r1.join("src.bin"), len, 72);
    let a = lab_server(&lab, 1, &r1, &["--third-party", "all"]);
    let b = lab_server(
        &lab,
        2,
        &r2,
        &[
            "--third-party",
            "auth",
            "--user",
            "u:p",
            "--data-timeout",
            "3s",
        ],
    );
    let logs = || format!("h1 log:\n{}\nh2 log:\n{}", a.log_text(), b.log_text());
    let dst = |path: &str| format!("ftp://u:p@{}{path}", b.authority());
    for p in ["1", "2"] {
        let name = format!("/peer-{p}.bin");
        let (ok, o, e) = lab_copy(&lab, 2, &["-p", p], &a.url("/src.bin"), &dst(&name));
        assert!(ok, "-p {p} copy: {o} {e}\n{}", logs());
        assert_eq!(json_of(&o)["mode"], "third-party", "{o}");
        assert_eq!(sha256_file(&r2.join(&name[1..])), want);
    }
    // Anonymous on the destination: PEER refused, the source's connection is not accepted.
    let (ok, o, e) = lab_copy(&lab, 2, &[], &a.url("/src.bin"), &b.url("/anon.bin"));
    assert!(
        !ok,
        "anonymous copy with a foreign sender succeeded: {o} {e}"
    );
    assert!(
        b.log_text().contains("refused") || format!("{o} {e}").contains("PEER"),
        "{o} {e}\n{}",
        logs()
    );
    assert!(!r2.join("anon.bin").exists());
    drop((a, b));
    lab.down().expect("lab down");
}
