//! TCP uploads resume (docs/resume.md "Upload resume"): `drsftp copy` inside lab host 2 uploads to `drsftp serve`
//! on host 1 over a rate-capped link, so a kill lands mid-file. Once the server's kept partial holds some data,
//! the client is SIGKILLed by PID (or the server is, and restarted on the same address); nothing appears under
//! the final name; the rerun asks `SITE PARTIAL`, sends only the gaps (`REST` ranges + `STOR` in MODE E), says
//! how much it resumed in `--json`, verifies the whole file with CKSM, and the server's file is byte-identical.
//! The bytes the server received twice (its transfer log: killed run + rerun − size) stay within 1 % of the file
//! plus one block per stream. A local source changed between runs starts from 0. Needs root and /dev/net/tun;
//! otherwise prints `SKIPPED <test>: <reason>` and returns.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use drsftp_lab::Lab;
use drsftp_testkit::require_lab;
use serde_json::Value;

const T: Duration = Duration::from_secs(120);
/// The MODE E block size our client sends.
const BLOCK: u64 = 256 << 10;
const STREAMS: u64 = 2;

fn kept_parts(root: &Path) -> usize {
    kept_part_files(root).len()
}

/// Bytes of each STOR line of the server's transfer log so far.
fn received(root: &Path) -> Vec<u64> {
    logged_bytes(root, &["STOR"])
}

fn copy_cmd(lab: &Lab, args: &[&str], src: &Path, url: &str) -> Command {
    let mut c = lab.exec(2, bin().to_str().unwrap());
    c.arg("copy").args(args).arg(src).arg(url);
    c
}

/// Starts the upload, waits until the server keeps at least `at` bytes of it, then `cut` runs (it kills the
/// client or the server). Returns what the server's partial held once the client had ended.
fn interrupted(
    lab: &Lab,
    src: &Path,
    url: &str,
    root: &Path,
    dst: &Path,
    at: u64,
    cut: impl FnOnce(&mut std::process::Child),
) -> u64 {
    let mut child = copy_cmd(lab, &["-p", "2", "--retries", "0"], src, url)
        .arg("-q")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn drsftp copy");
    cut_midway(
        &mut child,
        ("upload", "partial"),
        || kept_bytes(root),
        at,
        cut,
        T,
    );
    assert!(
        !dst.exists(),
        "an interrupted upload left a file that looks complete"
    );
    // The server records what arrived once it notices the dead connections.
    std::thread::sleep(Duration::from_millis(500));
    kept_bytes(root)
}

fn rerun(lab: &Lab, src: &Path, url: &str) -> Value {
    let (ok, o, e) = run(&mut copy_cmd(lab, &["--json", "-p", "2"], src, url), T);
    assert!(ok, "rerun: {o} {e}");
    json_of(&o)
}

#[test]
fn uploads_resume_after_client_and_server_kills() {
    require_lab!("uploads_resume_after_client_and_server_kills");
    let lab = drsftp_testkit::lab::up("upres", 2, Duration::from_millis(4), 40_000_000);
    let dir = open_tempdir();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let size: u64 = (24 << 20) + 4321;
    let src: PathBuf = dir.path().join("src.bin");
    let want = random_file(&src, size as usize, 40);
    let mut srv = lab_server_logged(&lab, &format!("{}:0", lab.addr(1)), &root);
    let mut report = vec![];

    // The client SIGKILLed mid-file: the rerun sends only the gaps.
    let url = srv.url("/client-kill.bin");
    let dst = root.join("client-kill.bin");
    let before = received(&root).len();
    let held = interrupted(&lab, &src, &url, &root, &dst, 6 << 20, |c| {
        c.kill().unwrap()
    });
    let j = rerun(&lab, &src, &url);
    assert_eq!(j["verified"], true, "{j}");
    assert_eq!(sha256_file(&dst), want);
    let resumed = j["resumed_bytes"].as_u64().unwrap();
    assert!(
        resumed >= 6 << 20 && resumed <= held,
        "resumed {resumed}, held {held}: {j}"
    );
    assert_eq!(
        j["bytes"].as_u64(),
        Some(size - resumed),
        "only the gaps: {j}"
    );
    assert_eq!(kept_parts(&root), 0, "the partial became the file");
    // The killed run's record is written once the server has noticed the dead connections.
    let t0 = Instant::now();
    while received(&root).len() < before + 2 && t0.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let runs = received(&root)[before..].to_vec();
    assert_eq!(
        runs.len(),
        2,
        "{runs:?}: {}",
        std::fs::read_to_string(root.with_extension("xfer.jsonl")).unwrap_or_default()
    );
    let again = runs.iter().sum::<u64>().saturating_sub(size);
    report.push(format!(
        "client kill: size {size}, resumed {resumed}, server received {runs:?}: {again} twice"
    ));
    assert!(
        again <= size / 100 + STREAMS * BLOCK,
        "{again} bytes received twice"
    );

    // The server SIGKILLed mid-file and restarted on the same address: its periodic checkpoint is resumed from.
    let url = srv.url("/server-kill.bin");
    let dst = root.join("server-kill.bin");
    let listen = srv.addr.to_string();
    let held = interrupted(&lab, &src, &url, &root, &dst, 6 << 20, |_| {
        srv.child.kill().unwrap();
        srv.child.wait().unwrap();
    });
    srv = lab_server_logged(&lab, &listen, &root);
    let j = rerun(&lab, &src, &url);
    assert_eq!(j["verified"], true, "{j}");
    assert_eq!(sha256_file(&dst), want);
    let resumed = j["resumed_bytes"].as_u64().unwrap();
    assert!(
        resumed >= 6 << 20 && resumed <= held,
        "server kill: resumed {resumed}, held {held}: {j}"
    );
    report.push(format!("server kill: resumed {resumed} of {size}"));

    // The local source changes (same size, new content and time) between runs: the partial is not spliced in.
    let url = srv.url("/changed.bin");
    let dst = root.join("changed.bin");
    interrupted(&lab, &src, &url, &root, &dst, 6 << 20, |c| {
        c.kill().unwrap()
    });
    let new = random_file(&src, size as usize, 41);
    let j = rerun(&lab, &src, &url);
    assert_eq!(j["resumed_bytes"].as_u64(), Some(0), "{j}");
    assert_eq!(j["bytes"].as_u64(), Some(size), "{j}");
    assert_eq!(sha256_file(&dst), new);
    eprintln!("{}", report.join("\n"));
    drop(srv);
}
