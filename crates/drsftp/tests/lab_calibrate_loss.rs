//! `drsftp tune calibrate` measures the path's random loss (a paced blast probe) and stores it in the profile:
//! on a 100 Mbit/s · 50 ms · 1 % lab path the stored loss is near 1 %, on a clean 100 Mbit/s · 20 ms path near 0;
//! a default copy (`--transport auto`) then starts on blast from the lossy profile and on TCP from the clean one.
//! Every destination is checked against the source's SHA-256. Needs root and /dev/net/tun; otherwise prints
//! `SKIPPED <test>: <reason>` and returns.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use drsftp_io::client::profile::ProfileStore;
use drsftp_lab::{Lab, LabConfig};
use drsftp_netem::LossModel;

const T: Duration = Duration::from_secs(240);

/// A 2-host lab named `acal<pid><suffix>` (this helper's prefix, unique per test process).
fn lab(suffix: &str, rtt_ms: u64, rate: u64, loss: f64) -> Lab {
    let name = format!("acal{}{suffix}", std::process::id() % 10_000);
    let mut cfg = LabConfig::new(&name, 2, Duration::from_millis(rtt_ms), rate);
    if loss > 0.0 {
        cfg.link = cfg.link.with_loss(LossModel::Bernoulli { p: loss });
    }
    Lab::up(cfg).expect("lab up")
}

/// Serves `root` on host 1, calibrates from host 2 into `config/drsftp`, returns the stored loss and the JSON.
fn calibrate_and_copy(
    lab: &Lab,
    dir: &Path,
    want_choice: &str,
) -> (Option<f64>, serde_json::Value) {
    let [root, cfg, out] = ["root", "config", "out"].map(|d| {
        let p = dir.join(d);
        std::fs::create_dir(&p).unwrap();
        p
    });
    let want = random_file(&root.join("big.bin"), (24 << 20) + 11, 31);
    let srv = drsftp_serve(
        lab.exec(1, bin().to_str().unwrap()),
        &format!("{}:0", lab.addr(1)),
        &root,
        &[],
    );
    let logs = || format!("server log:\n{}", srv.log_text());
    let profiles: PathBuf = cfg.join("drsftp");
    let mut cal = lab.exec(2, bin().to_str().unwrap());
    cal.args([
        "tune",
        "calibrate",
        "--json",
        "--streams",
        "1,2",
        "--buffers",
        "1M",
    ])
    .args([
        "--secs",
        "1",
        "--size",
        "24M",
        "--loss-secs",
        "4",
        "--profile-dir",
    ])
    .arg(&profiles)
    .arg(srv.url("/big.bin"));
    let (ok, o, e) = run(&mut cal, T);
    assert!(ok, "calibrate: {o} {e}\n{}", logs());
    let j = json_of(&o);
    eprintln!("loss_probe: {}", j["loss_probe"]);
    let key = j["host_port"].as_str().unwrap().to_string();
    let stored = ProfileStore::in_dir(&profiles)
        .get(&key)
        .unwrap()
        .expect("a stored profile");
    assert_eq!(stored.loss, j["loss_probe"]["loss"].as_f64(), "{j}");

    // A default copy reads the profile (XDG_CONFIG_HOME/drsftp).
    let dst = out.join("big.bin");
    let mut cp = lab.exec(2, bin().to_str().unwrap());
    cp.env("XDG_CONFIG_HOME", &cfg)
        .args(["copy", "--json", "--no-resume", &srv.url("/big.bin")])
        .arg(&dst);
    let (ok, o, e) = run(&mut cp, T);
    assert!(ok, "copy: {o} {e}\n{}", logs());
    let c = json_of(&o);
    eprintln!("transport_choice: {}", c["transport_choice"]);
    assert_eq!(c["transport_choice"]["chosen"], want_choice, "{c}");
    assert_eq!(sha256_file(&dst), want);
    (stored.loss, c)
}

#[test]
fn calibrate_stores_the_path_loss_and_auto_starts_from_it() {
    drsftp_testkit::require_lab!("calibrate_stores_the_path_loss_and_auto_starts_from_it");
    let lossy = lab("l", 50, 100_000_000, 0.01);
    let dir = open_tempdir();
    let (loss, c) = calibrate_and_copy(&lossy, dir.path(), "udp");
    let loss = loss.expect("loss measured");
    assert!(
        (0.004..0.025).contains(&loss),
        "1 % lab path: stored {loss}"
    );
    assert!(
        c["transport_choice"]["reason"]
            .as_str()
            .unwrap()
            .contains("path profile"),
        "{c}"
    );
    assert_eq!(c["transport"], "udp", "{c}");
    lossy.down().expect("lab down");

    let clean = lab("c", 20, 100_000_000, 0.0);
    let dir = open_tempdir();
    let (loss, _) = calibrate_and_copy(&clean, dir.path(), "tcp");
    let loss = loss.expect("loss measured");
    assert!(loss < 0.0005, "clean lab path: stored {loss}");
    clean.down().expect("lab down");
}
