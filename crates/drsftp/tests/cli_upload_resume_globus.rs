//! Uploads to globus-gridftp-server resume (docs/resume.md "Upload resume against Globus"): `drsftp copy` in lab
//! host 2 uploads to Globus on host 1 over a rate-capped link and is SIGKILLed by PID mid-file. Globus keeps the
//! bytes it wrote under the final name (it has no partials) and confirmed some with `111 Range Marker`; the rerun
//! sends `REST <held>` and only the gaps, its sent bytes stay within `size − held + 1 % + one block per stream`
//! (held: what Globus's file holds after the kill), CKSM verifies the whole file, and the local marker record is
//! gone. Also: a kill before the first marker (the rerun checks the server's bytes by CKSM alone), and a server
//! file corrupted inside the marked ranges (the final CKSM fails, the whole file is sent again and verified).
//! Needs root, /dev/net/tun and globus-gridftp-server; otherwise prints `SKIPPED <test>: <reason>` and returns.

mod common;

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use drsftp_lab::Lab;
use drsftp_testkit::require_lab;
use drsftp_testkit::server::ServerProcess;
use serde_json::Value;

const T: Duration = Duration::from_secs(120);
/// The MODE E block size our client sends.
const BLOCK: u64 = 256 << 10;
const STREAMS: u64 = 2;

fn copy_cmd(lab: &Lab, state: &Path, args: &[&str], src: &Path, url: &str) -> Command {
    let mut c = lab.exec(2, bin().to_str().unwrap());
    c.env("XDG_STATE_HOME", state)
        .arg("copy")
        .args(["-p", "2"])
        .args(args)
        .arg(src)
        .arg(url);
    c
}

fn size_of(p: &Path) -> u64 {
    std::fs::metadata(p).map_or(0, |m| m.len())
}

/// Marker records left in `state`.
fn records(state: &Path) -> usize {
    std::fs::read_dir(state.join("drsftp/uploads")).map_or(0, |d| d.count())
}

/// Starts the upload, SIGKILLs the client once Globus's file holds `at` bytes; returns what it holds after.
fn killed_at(
    lab: &Lab,
    srv: &ServerProcess,
    state: &Path,
    src: &Path,
    url: &str,
    dst: &Path,
    at: u64,
) -> u64 {
    let mut child = copy_cmd(lab, state, &["--retries", "0", "-q"], src, url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn drsftp copy");
    cut_midway(
        &mut child,
        ("upload", "file on the server"),
        || size_of(dst),
        at,
        |c| c.kill().unwrap(),
        T,
    );
    // Globus writes what is still in its buffers once it notices the dead connections, in the session process
    // it forked for the killed client: the rerun starts only once that process is gone (a fixed 500 ms was not
    // always enough under load, and a rerun racing the old session's last writes failed its final CKSM).
    srv.settle_for(Duration::from_secs(20));
    assert_eq!(
        records(state),
        1,
        "the killed upload kept its marker record"
    );
    size_of(dst)
}

fn rerun(lab: &Lab, state: &Path, src: &Path, url: &str) -> Value {
    let (ok, o, e) = run(&mut copy_cmd(lab, state, &["--json"], src, url), T);
    assert!(ok, "rerun: {o} {e}");
    json_of(&o)
}

#[test]
fn uploads_to_globus_resume_from_restart_markers() {
    require_lab!("uploads_to_globus_resume_from_restart_markers");
    if !have(
        globus::GLOBUS_SERVER,
        "uploads_to_globus_resume_from_restart_markers",
    ) {
        return;
    }
    let lab = drsftp_testkit::lab::up("glres", 2, Duration::from_millis(4), 40_000_000);
    let dir = open_tempdir();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    chmod(&root, 0o777);
    let state = dir.path().join("state");
    let size: u64 = (64 << 20) + 4321;
    let src = dir.path().join("src.bin");
    let want = random_file(&src, size as usize, 50);
    let srv = lab_globus(&lab, 1, 2, dir.path());
    let url = |name: &str| format!("ftp://{}{}", srv.addr, root.join(name).display());
    let mut report = vec![];

    // Killed after Globus's first range marker (every 5 s; 30 MiB take about 6 s at 40 Mbit/s).
    let dst = root.join("after-marker.bin");
    let held = killed_at(
        &lab,
        &srv,
        &state,
        &src,
        &url("after-marker.bin"),
        &dst,
        30 << 20,
    );
    let j = rerun(&lab, &state, &src, &url("after-marker.bin"));
    assert_eq!(j["verified"], true, "{j}");
    assert_eq!(sha256_file(&dst), want);
    let (resumed, sent) = (
        j["resumed_bytes"].as_u64().unwrap(),
        j["bytes"].as_u64().unwrap(),
    );
    assert_eq!(sent, size - resumed, "only the gaps: {j}");
    assert!(
        sent <= size - held + size / 100 + STREAMS * BLOCK,
        "held {held}, sent {sent}: {j}"
    );
    assert_eq!(records(&state), 0, "the record went with the upload");
    report.push(format!(
        "after a marker: size {size}, held {held}, resumed {resumed}, sent {sent}"
    ));

    // Killed before any marker: the record says an upload started; the rerun checks the server's bytes by CKSM.
    let dst = root.join("before-marker.bin");
    let held = killed_at(
        &lab,
        &srv,
        &state,
        &src,
        &url("before-marker.bin"),
        &dst,
        8 << 20,
    );
    let j = rerun(&lab, &state, &src, &url("before-marker.bin"));
    assert_eq!(j["verified"], true, "{j}");
    assert_eq!(sha256_file(&dst), want);
    let sent = j["bytes"].as_u64().unwrap();
    assert!(
        sent <= size - held + size / 100 + STREAMS * BLOCK,
        "held {held}, sent {sent}: {j}"
    );
    report.push(format!("before a marker: held {held}, sent {sent}"));

    // The server's file changed inside the marked ranges: the final CKSM catches it and all is sent again.
    let dst = root.join("corrupt.bin");
    killed_at(
        &lab,
        &srv,
        &state,
        &src,
        &url("corrupt.bin"),
        &dst,
        30 << 20,
    );
    let f = std::fs::OpenOptions::new().write(true).open(&dst).unwrap();
    f.write_all_at(b"not the source", 1000).unwrap();
    drop(f);
    let j = rerun(&lab, &state, &src, &url("corrupt.bin"));
    assert_eq!(j["verified"], true, "{j}");
    assert_eq!(sha256_file(&dst), want, "a bad splice was left");
    assert!(
        j.to_string().contains("sent the whole file again"),
        "the mismatch is reported: {j}"
    );
    assert_eq!(records(&state), 0);
    eprintln!("{}", report.join("\n"));
    drop(srv);
}
