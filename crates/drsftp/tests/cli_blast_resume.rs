//! `drsftp copy --transport udp` resumes an interrupted download: the client binary, rate-capped, is killed by
//! PID (SIGKILL: only the periodic checkpoints count) once its checkpoint covers some data; the rerun reports
//! `blast.resumed_bytes` > 0 and fewer data datagrams than packets in `--json`, verifies, is byte-identical to
//! the source, and leaves no part file or checkpoint. The same after a SIGINT (the final checkpoint), and
//! `--no-resume` starts afresh.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;

const T: Duration = Duration::from_secs(120);

fn part_files(dst: &Path) -> (PathBuf, PathBuf) {
    let name = dst.file_name().unwrap().to_string_lossy();
    (
        dst.with_file_name(format!(".{name}.drsftp-part")),
        dst.with_file_name(format!(".{name}.drsftp-part.ck")),
    )
}

/// Runs a capped UDP download and stops it with `signal` (by its PID) once the checkpoint exists and is at least
/// 1.5 s old relative to the start of data.
fn cut(url: &str, dst: &Path, signal: &str) {
    let (part, ck) = part_files(dst);
    let mut child = Command::new(bin())
        .args([
            "copy",
            "--transport",
            "udp",
            "--max-rate",
            "40mbit",
            "-q",
            url,
        ])
        .arg(dst)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn drsftp copy");
    let t0 = Instant::now();
    loop {
        let big = std::fs::metadata(&part)
            .map(|m| m.len() > 2 << 20)
            .unwrap_or(false);
        if big && ck.exists() {
            break;
        }
        if let Ok(Some(st)) = child.try_wait() {
            panic!("the download ended before the cut: {st}");
        }
        assert!(t0.elapsed() < T, "no checkpoint appeared");
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = child.id().to_string();
    let ok = Command::new("kill")
        .args([signal, &pid])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {signal} {pid}");
    let t1 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            t1.elapsed() < Duration::from_secs(20),
            "drsftp copy ignored {signal}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        part.exists() && ck.exists(),
        "kept for resume after {signal}"
    );
}

fn rerun(url: &str, dst: &Path, extra: &[&str]) -> Value {
    let (ok, o, e) = run(
        Command::new(bin())
            .args(["copy", "--transport", "udp", "--json"])
            .args(extra)
            .arg(url)
            .arg(dst),
        T,
    );
    assert!(ok, "rerun: {o} {e}");
    json_of(&o)
}

#[test]
fn killed_udp_download_resumes() {
    let dir = open_tempdir();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let want = random_file(&root.join("src.bin"), (24 << 20) + 99, 77);
    let srv = drsftp_server(&root, &[]);
    let url = srv.url("/src.bin");

    for signal in ["-KILL", "-INT"] {
        let dst = dir.path().join(format!("out{signal}.bin"));
        cut(&url, &dst, signal);
        let j = rerun(&url, &dst, &[]);
        let b = &j["blast"];
        let resumed = b["resumed_bytes"].as_u64().expect("resumed_bytes");
        let (sent, packets) = (
            b["datagrams"].as_u64().unwrap(),
            b["packets"].as_u64().unwrap(),
        );
        eprintln!("{signal}: resumed {resumed} bytes, {sent} of {packets} packets sent");
        assert!(resumed >= 1 << 20, "{j}");
        assert!(sent < packets, "{j}");
        assert_eq!(j["verified"], true, "{j}");
        assert_eq!(sha256_file(&dst), want);
        let (part, ck) = part_files(&dst);
        assert!(!part.exists() && !ck.exists(), "left behind after success");
    }

    // --no-resume: discarded, with a notice.
    let dst = dir.path().join("fresh.bin");
    cut(&url, &dst, "-KILL");
    let j = rerun(&url, &dst, &["--no-resume"]);
    assert_eq!(j["blast"]["resumed_bytes"].as_u64(), Some(0), "{j}");
    assert!(j["notices"].to_string().contains("--no-resume"), "{j}");
    assert_eq!(sha256_file(&dst), want);
    let (part, ck) = part_files(&dst);
    assert!(!part.exists() && !ck.exists());
}
