//! Default `drsftp copy` uploads (`-p auto`, `--transport auto`) on the WAN lab: on a lossy path (100 Mbit/s · 50 ms
//! · 1 %, the client sending on cubic) the upload starts on TCP, holds `-p auto`'s stream growth until the transport
//! rule's first verdict, reads its own retransmissions and moves to UDP blast, saying why; with a lossy path
//! profile and the acknowledgements blackholed (UDP dropped on arrival at the client) it falls back to TCP within
//! about a second. On a clean 100 Mbit/s · 20 ms path one default upload, and then two at once into the same
//! server, stay on TCP (the loss they cause each other comes with a queue). Every upload is CKSM-verified by the
//! copy and its server-side file checked against the source's SHA-256. Needs root and /dev/net/tun; otherwise
//! prints `SKIPPED <test>: <reason>` and returns.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::auto::*;
use common::*;
use drsftp_io::client::profile::ProfileStore;
use drsftp_lab::Lab;

const T: Duration = Duration::from_secs(240);

/// `drsftp copy --json --congestion cubic src dst` on host 2 with its own profile directory: no `-p`, so `-p auto`
/// picks and grows the streams. Before the growth hold, `-p auto` grew this upload to 64 streams (5 -> 21 -> 64
/// in 4.3 s), whose own standing queue the rule read as congestion, and it stayed on TCP (one CI run).
fn upload(lab: &Lab, config: &Path, src: &Path, dst: &str) -> Command {
    let mut cmd = lab.exec(2, bin().to_str().unwrap());
    cmd.env("XDG_CONFIG_HOME", config)
        .args(["copy", "--json", "--no-resume", "--congestion", "cubic"])
        .arg(src)
        .arg(dst);
    cmd
}

/// A temporary directory holding `root` (served), `config` (the client's XDG_CONFIG_HOME) and `src` (files to
/// upload), and a drsftp server on lab host 1 serving `root`.
fn serving(lab: &Lab) -> (tempfile::TempDir, [PathBuf; 3], ServerProcess) {
    let dir = open_tempdir();
    let dirs = subdirs(dir.path(), ["root", "config", "src"]);
    let srv = drsftp_serve(
        lab.exec(1, bin().to_str().unwrap()),
        &format!("{}:0", lab.addr(1)),
        &dirs[0],
        &[],
    );
    (dir, dirs, srv)
}

#[test]
fn auto_uploads_switch_on_a_lossy_path_and_fall_back_when_blocked() {
    drsftp_testkit::require_lab!("auto_uploads_switch_on_a_lossy_path_and_fall_back_when_blocked");
    let lab = two_host_lab("aup", 50, 100_000_000, 0.01);
    let (_dir, [root, conf, src], srv) = serving(&lab);
    let big = random_file(&src.join("big.bin"), (48 << 20) + 777, 41);
    let small = random_file(&src.join("small.bin"), (2 << 20) + 5, 42);
    let logs = || format!("server log:\n{}", srv.log_text());

    // No flag: TCP first, then the whole file over blast once the sender sees random loss.
    let (ok, o, e) = run(
        &mut upload(&lab, &conf, &src.join("big.bin"), &srv.url("/big.bin")),
        T,
    );
    assert!(ok, "lossy upload: {o} {e}\n{}", logs());
    let j = json_of(&o);
    eprintln!(
        "lossy upload: {} streams, {} Mbit/s, {} s, transport_choice {}",
        j["streams"], j["mbps"], j["seconds"], j["transport_choice"]
    );
    assert_eq!(j["transport_choice"]["chosen"], "tcp+udp", "{j}");
    let why = j["transport_choice"]["reason"].as_str().unwrap();
    assert!(
        why.contains("random loss") && why.contains("were retransmitted"),
        "{j}"
    );
    assert!(
        j["transport_choice"]["tcp_bytes"].as_u64().unwrap() > 0,
        "{j}"
    );
    assert_eq!(j["transport"], "udp", "{j}");
    assert_eq!(j["verified"], true, "{j}");
    assert_eq!(sha256_file(&root.join("big.bin")), big);

    // A lossy profile starts on blast; with every UDP datagram to the client dropped no ack comes back, and the
    // upload runs on TCP instead.
    ProfileStore::in_dir(&conf.join("drsftp"))
        .put(&lossy_profile(&profile_key(&srv)))
        .unwrap();
    blackhole_udp_into(&lab, 2);
    // The first upload left path memory (lossy, newer than this profile): the profile is tested without it.
    let (ok, o, e) = run(
        upload(&lab, &conf, &src.join("small.bin"), &srv.url("/small.bin"))
            .env("DRSFTP_NO_PATH_MEMORY", "1"),
        T,
    );
    assert!(ok, "blocked upload: {o} {e}\n{}", logs());
    let j = json_of(&o);
    eprintln!("transport_choice: {}", j["transport_choice"]);
    assert_eq!(j["transport_choice"]["chosen"], "tcp", "{j}");
    let why = j["transport_choice"]["reason"].as_str().unwrap();
    assert!(
        why.contains("path profile") && why.contains("fell back to TCP"),
        "{j}"
    );
    assert_eq!(j["transport"], "tcp", "{j}");
    assert_eq!(j["verified"], true, "{j}");
    assert_eq!(sha256_file(&root.join("small.bin")), small);

    drop(srv);
    lab.down().expect("lab down");
}

#[test]
fn auto_uploads_stay_on_tcp_on_a_clean_shared_path() {
    drsftp_testkit::require_lab!("auto_uploads_stay_on_tcp_on_a_clean_shared_path");
    let lab = two_host_lab("aus", 20, 100_000_000, 0.0);
    let (_dir, [root, conf, src], srv) = serving(&lab);
    let want = random_file(&src.join("f.bin"), (64 << 20) + 5, 43);
    let logs = || format!("server log:\n{}", srv.log_text());
    let f = src.join("f.bin");

    let (ok, o, e) = run(&mut upload(&lab, &conf, &f, &srv.url("/one.bin")), T);
    assert!(ok, "clean upload: {o} {e}\n{}", logs());
    let j = json_of(&o);
    eprintln!("clean upload: transport_choice {}", j["transport_choice"]);
    assert_eq!(j["transport_choice"]["chosen"], "tcp", "{j}");
    assert_eq!(j["transport"], "tcp", "{j}");
    assert_eq!(j["verified"], true, "{j}");
    assert_eq!(sha256_file(&root.join("one.bin")), want);

    // Two default uploads from the same host into the same server at once: they share the link's queue, so the
    // loss they cause each other comes with a standing queue and neither moves to blast.
    let mut ca = upload(&lab, &conf, &f, &srv.url("/a.bin"));
    let mut cb = upload(&lab, &conf, &f, &srv.url("/b.bin"));
    let other = std::thread::spawn(move || run(&mut cb, T));
    let (ok, o, e) = run(&mut ca, T);
    assert!(ok, "first shared upload: {o} {e}\n{}", logs());
    let (ok2, o2, e2) = other.join().unwrap();
    assert!(ok2, "second shared upload: {o2} {e2}\n{}", logs());
    for (j, name) in [(json_of(&o), "a.bin"), (json_of(&o2), "b.bin")] {
        eprintln!(
            "shared upload {name}: {} Mbit/s, transport_choice {}",
            j["mbps"], j["transport_choice"]
        );
        assert_eq!(j["transport_choice"]["chosen"], "tcp", "{j}");
        assert_eq!(j["transport"], "tcp", "{j}");
        assert_eq!(j["verified"], true, "{j}");
        assert_eq!(sha256_file(&root.join(name)), want);
    }

    drop(srv);
    lab.down().expect("lab down");
}
