//! `drsftp copy -p 4` uploads with no transport flag (`--transport auto`) on the WAN lab: on a lossy path (100 Mbit/s
//! · 50 ms · 1 %, the client sending on cubic) the upload starts on TCP, reads its own retransmissions and moves to
//! UDP blast, saying why; with a lossy path profile and the acknowledgements blackholed (UDP dropped on arrival
//! at the client) it falls back to TCP within about a second. Every upload is CKSM-verified by the copy and its
//! server-side file checked against the source's SHA-256. Needs root and /dev/net/tun; otherwise prints
//! `SKIPPED <test>: <reason>` and returns.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;
use drsftp_io::client::profile::{PathProfile, ProfileStore};
use drsftp_lab::{Lab, LabConfig};
use drsftp_netem::LossModel;

const T: Duration = Duration::from_secs(240);

/// `drsftp copy --json --congestion cubic -p 4 src dst` on host 2 with its own profile directory. Four fixed
/// streams, not `-p auto`: on this path `-p auto` grows an upload to 64 streams, whose standing queue the rule
/// rightly reads as congestion and stays on TCP (seen in one CI run); that interplay is issue 22's open work,
/// while this test checks the switch on random loss and the blocked-UDP fallback.
fn upload(lab: &Lab, config: &Path, src: &Path, dst: &str) -> Command {
    let mut cmd = lab.exec(2, bin().to_str().unwrap());
    cmd.env("XDG_CONFIG_HOME", config)
        .args([
            "copy",
            "--json",
            "--no-resume",
            "--congestion",
            "cubic",
            "-p",
            "4",
        ])
        .arg(src)
        .arg(dst);
    cmd
}

#[test]
fn auto_uploads_switch_on_a_lossy_path_and_fall_back_when_blocked() {
    drsftp_testkit::require_lab!("auto_uploads_switch_on_a_lossy_path_and_fall_back_when_blocked");
    let name = format!("aup{}", std::process::id() % 10_000);
    let mut cfg = LabConfig::new(&name, 2, Duration::from_millis(50), 100_000_000);
    cfg.link = cfg.link.with_loss(LossModel::Bernoulli { p: 0.01 });
    let lab = Lab::up(cfg).expect("lab up");
    let dir = open_tempdir();
    let [root, conf, src] = ["root", "config", "src"].map(|d| {
        let p = dir.path().join(d);
        std::fs::create_dir(&p).unwrap();
        p
    });
    let big = random_file(&src.join("big.bin"), (48 << 20) + 777, 41);
    let small = random_file(&src.join("small.bin"), (2 << 20) + 5, 42);
    let srv = drsftp_serve(
        lab.exec(1, bin().to_str().unwrap()),
        &format!("{}:0", lab.addr(1)),
        &root,
        &[],
    );
    let logs = || format!("server log:\n{}", srv.log_text());

    // No flag: TCP first, then the whole file over blast once the sender sees random loss.
    let (ok, o, e) = run(
        &mut upload(&lab, &conf, &src.join("big.bin"), &srv.url("/big.bin")),
        T,
    );
    assert!(ok, "lossy upload: {o} {e}\n{}", logs());
    let j = json_of(&o);
    eprintln!("transport_choice: {}", j["transport_choice"]);
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
    let key = srv
        .url("/")
        .trim_start_matches("ftp://")
        .trim_end_matches('/')
        .to_string();
    ProfileStore::in_dir(&conf.join("drsftp"))
        .put(&PathProfile {
            host_port: key,
            rtt_ms: 50.0,
            rate_bps: 100e6,
            c1: None,
            c2: None,
            fit_mean_rel_err: None,
            fit_max_rel_err: None,
            points: 0,
            timestamp: 0,
            loss: Some(0.01),
        })
        .unwrap();
    let ns = &lab.host(2).netns;
    let ip = |args: &[&str]| {
        let s = Command::new("ip")
            .args(["netns", "exec", ns, "ip", "rule"])
            .args(args)
            .status()
            .unwrap();
        assert!(s.success(), "ip rule {args:?}");
    };
    ip(&["add", "pref", "100", "lookup", "local"]);
    ip(&["del", "pref", "0", "lookup", "local"]);
    ip(&[
        "add",
        "pref",
        "10",
        "iif",
        "tun0",
        "ipproto",
        "udp",
        "blackhole",
    ]);
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
