//! `drsftp tune calibrate` and `drsftp copy -p auto` end to end on loopback against `drsftp serve`: calibration
//! writes a per-path profile (fit, rate, RTT) into paths.json, a later copy with no -p picks its streams from that
//! profile and says so in `--json`; without a profile the choice says so too; a directory URL is calibrated with an
//! uploaded test file that is deleted afterwards. Every server is killed by PID when its test ends.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const T: Duration = Duration::from_secs(300);

fn drsftp(args: &[&str], xdg: Option<&Path>) -> (bool, String, String) {
    let mut c = Command::new(bin());
    c.args(args);
    if let Some(x) = xdg {
        c.env("XDG_CONFIG_HOME", x);
    }
    run(&mut c, T)
}

/// Runs `drsftp tune calibrate ARGS`, which must succeed, and returns its `--json` summary.
fn calibrate(srv: &ServerProcess, args: &[&str]) -> Value {
    let (ok, o, e) = drsftp(&[&["tune", "calibrate"], args].concat(), None);
    assert!(
        ok,
        "calibrate failed: {o} {e}\nserver log:\n{}",
        srv.log_text()
    );
    json_of(&o)
}

#[test]
fn calibrate_stores_profile_and_copy_auto_uses_it() {
    let root = open_tempdir();
    let want = random_file(&root.path().join("src.bin"), 8 << 20, 51);
    let srv = drsftp_server(root.path(), &[]);
    let cfg = tempfile::tempdir().unwrap();
    let xdg = cfg.path().join("xdg");
    let pdir = xdg.join("drsftp");
    let url = srv.url("/src.bin");
    let j = calibrate(
        &srv,
        &[
            &url,
            "--streams",
            "1,2",
            "--buffers",
            "64K,1M",
            "--secs",
            "1",
            "--profile-dir",
            pdir.to_str().unwrap(),
            "--json",
        ],
    );
    let key = srv.addr.to_string();
    assert_eq!(j["host_port"].as_str(), Some(key.as_str()), "{j}");
    assert_eq!(j["points"].as_array().map(Vec::len), Some(4), "{j}");
    assert!(
        j["points"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["mbps"].as_f64().unwrap() > 0.0),
        "{j}"
    );
    assert_eq!(j["saturation"].as_array().map(Vec::len), Some(2), "{j}");
    let prof = &j["profile"];
    assert!(prof["rate_bps"].as_f64().is_some_and(|r| r > 1e6), "{j}");
    assert!(prof["rtt_ms"].as_f64().is_some_and(|r| r > 0.0), "{j}");
    assert!(
        prof["timestamp"]
            .as_u64()
            .is_some_and(|t| t > 1_600_000_000),
        "{j}"
    );
    // The stored file has this server's profile, keyed host:port.
    let stored: Value =
        serde_json::from_str(&std::fs::read_to_string(pdir.join("paths.json")).unwrap()).unwrap();
    assert_eq!(&stored["paths"][key.as_str()], prof, "{stored}");

    // drsftp copy with neither -p nor a buffer: -p auto, from the profile.
    let out = root.path().join("out.bin");
    let (ok, o, e) = drsftp(&["copy", "--json", &url, out.to_str().unwrap()], Some(&xdg));
    assert!(ok, "copy failed: {o} {e}\nserver log:\n{}", srv.log_text());
    let j = json_of(&o);
    assert_eq!(j["streams_auto"].as_bool(), Some(true), "{j}");
    let reason = j["auto_reason"].as_str().unwrap_or("");
    assert!(reason.contains("path profile for"), "{reason}");
    let p = j["streams"].as_u64().unwrap();
    assert!((2..=4).contains(&p), "loopback picks a few streams: {j}");
    assert_eq!(j["mode"].as_str(), Some("E"), "{j}");
    assert_eq!(j["verified"].as_bool(), Some(true), "{j}");
    assert_eq!(sha256_file(&out), want);

    // No profile: still a small P on loopback, and the reason says the rate was assumed.
    let empty = cfg.path().join("empty");
    let out2 = root.path().join("out2.bin");
    let (ok, o, e) = drsftp(
        &["copy", "--json", &url, out2.to_str().unwrap()],
        Some(&empty),
    );
    assert!(ok, "{o} {e}");
    let j = json_of(&o);
    assert!(
        j["auto_reason"]
            .as_str()
            .unwrap_or("")
            .contains("no path profile"),
        "{j}"
    );
    assert!((2..=4).contains(&j["streams"].as_u64().unwrap()), "{j}");

    // An explicit -p or a buffer keeps the old behaviour: no auto.
    let (ok, o, e) = drsftp(
        &[
            "copy",
            "--json",
            "--buffer",
            "kernel",
            &url,
            out2.to_str().unwrap(),
        ],
        Some(&xdg),
    );
    assert!(ok, "{o} {e}");
    let j = json_of(&o);
    assert_eq!(j["streams_auto"].as_bool(), Some(false), "{j}");
    assert_eq!(j["streams"].as_u64(), Some(1), "{j}");
    assert!(j["auto_reason"].is_null(), "{j}");
}

#[test]
fn calibrate_directory_url_uploads_and_cleans_up() {
    let root = open_tempdir();
    let srv = drsftp_server(root.path(), &[]);
    let url = srv.url("/");
    let j = calibrate(
        &srv,
        &[
            &url,
            "--size",
            "4M",
            "--streams",
            "1",
            "--buffers",
            "256K",
            "--secs",
            "0.3",
            "--no-save",
            "--json",
        ],
    );
    assert!(j["profile_path"].is_null(), "--no-save: {j}");
    assert!(
        j["profile"]["rate_bps"].as_f64().is_some_and(|r| r > 0.0),
        "{j}"
    );
    assert!(j["fit"].is_null(), "one buffer cannot be fitted: {j}");
    let left: Vec<_> = std::fs::read_dir(root.path()).unwrap().collect();
    assert!(left.is_empty(), "test file not deleted: {left:?}");
}
