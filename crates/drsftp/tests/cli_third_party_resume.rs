//! Third-party copies resume (docs/resume.md "Third-party resume"): `drsftp copy ftp://h1/src ftp://h2/dst` run
//! in lab host 1, between `drsftp serve` on host 1 (source) and on host 2 (destination, with its transfer log),
//! over a rate-capped link so a kill lands mid-file. Once the destination's kept partial holds some data, the
//! client is SIGKILLed by PID (or the destination server is, and restarted on the same address); nothing appears
//! under the final name; the rerun asks `SITE PARTIAL` with the source's version tag, sends `REST <ranges>` to
//! both servers, moves only the gaps, says how much it resumed in `--json`, and verifies the whole file with CKSM
//! on both ends. The bytes the destination received twice (transfer log: killed run + rerun − size) stay within
//! 1 % of the file plus one block per stream. A kept partial corrupted between runs is caught by the checksum and
//! the whole file is copied again. To globus-gridftp-server (no partials; `111 Range Marker` replies kept by the
//! client) the rerun sends at most `size − held + 1 % + one block per stream` (held: the length of Globus's file
//! after the kill). Needs root and /dev/net/tun (and Globus for its test); otherwise prints `SKIPPED ...`.

mod common;

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use drsftp_lab::Lab;
use drsftp_testkit::require_lab;
use serde_json::Value;

const T: Duration = Duration::from_secs(120);
/// The MODE E block size drsftp serve sends.
const BLOCK: u64 = 256 << 10;
const STREAMS: u64 = 2;
const THIRD_PARTY: &[&str] = &["--third-party", "all"];

/// `drsftp copy` in lab host 1, its marker records (Globus destinations) in `state`.
fn copy_cmd(lab: &Lab, state: &Path, args: &[&str], src: &str, dst: &str) -> Command {
    let mut c = lab.exec(1, bin().to_str().unwrap());
    c.env("XDG_STATE_HOME", state)
        .arg("copy")
        .args(args)
        .args([src, dst]);
    c
}

/// Starts the copy, waits until the destination keeps at least `at` bytes, then `cut` runs (it kills the client
/// or the destination server). Returns what the kept partial held once the client had ended.
fn interrupted(
    (lab, state): (&Lab, &Path),
    (src, dst): (&str, &str),
    root: &Path,
    final_name: &Path,
    at: u64,
    cut: impl FnOnce(&mut std::process::Child),
) -> u64 {
    let mut child = copy_cmd(lab, state, &["-p", "2", "--retries", "0", "-q"], src, dst)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn drsftp copy");
    cut_midway(
        &mut child,
        ("third-party copy", "kept partial"),
        || kept_bytes(root),
        at,
        cut,
        T,
    );
    assert!(
        !final_name.exists(),
        "an interrupted copy left a file that looks complete"
    );
    // The destination saves what arrived once it notices the dead connections.
    wait_for(|| kept_bytes(root) >= at, "the kept partial after the cut");
    kept_bytes(root)
}

fn wait_for(cond: impl Fn() -> bool, what: &str) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < Duration::from_secs(30), "waited for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn rerun((lab, state): (&Lab, &Path), src: &str, dst: &str) -> Value {
    let (ok, o, e) = run(
        &mut copy_cmd(lab, state, &["--json", "-p", "2"], src, dst),
        T,
    );
    assert!(ok, "rerun: {o} {e}");
    json_of(&o)
}

/// The destination's STOR transfer-log lines after the first `before`, once `n` of them are there.
fn stor_lines(root: &Path, before: usize, n: usize) -> Vec<u64> {
    wait_for(
        || logged_bytes(root, &["STOR"]).len() >= before + n,
        "the destination's transfer log",
    );
    logged_bytes(root, &["STOR"])[before..].to_vec()
}

#[test]
fn third_party_copies_resume_after_client_and_server_kills() {
    require_lab!("third_party_copies_resume_after_client_and_server_kills");
    let lab = drsftp_testkit::lab::up("tpres", 2, Duration::from_millis(4), 40_000_000);
    let dir = open_tempdir();
    let (r1, r2) = (dir.path().join("h1"), dir.path().join("h2"));
    for r in [&r1, &r2] {
        std::fs::create_dir(r).unwrap();
    }
    let size: u64 = (24 << 20) + 4321;
    let want = random_file(&r1.join("src.bin"), size as usize, 60);
    let a = lab_server_logged_on(&lab, 1, &format!("{}:0", lab.addr(1)), &r1, THIRD_PARTY);
    let mut b = lab_server_logged_on(&lab, 2, &format!("{}:0", lab.addr(2)), &r2, THIRD_PARTY);
    let src = a.url("/src.bin");
    let state = dir.path().join("state");
    let env = (&lab, state.as_path());
    let mut report = vec![];

    // The client SIGKILLed mid-file: the rerun sends only the gaps, from the source and to the destination.
    let dst = b.url("/client-kill.bin");
    let out = r2.join("client-kill.bin");
    let before = logged_bytes(&r2, &["STOR"]).len();
    let held = interrupted(env, (&src, &dst), &r2, &out, 6 << 20, |c| c.kill().unwrap());
    let sent_before = logged_bytes(&r1, &["RETR"]).len();
    let j = rerun(env, &src, &dst);
    assert_eq!(
        (j["verified"].as_bool(), j["mode"].as_str()),
        (Some(true), Some("third-party")),
        "{j}"
    );
    assert_eq!(sha256_file(&out), want);
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
    assert!(
        kept_part_files(&r2).is_empty(),
        "the partial became the file"
    );
    let runs = stor_lines(&r2, before, 2);
    assert_eq!(runs.len(), 2, "{runs:?}");
    let again = runs.iter().sum::<u64>().saturating_sub(size);
    // The source, too, sent only the gaps in the rerun (REST ranges on RETR).
    let rerun_sent = *logged_bytes(&r1, &["RETR"])[sent_before..]
        .last()
        .expect("the source logged the rerun's RETR");
    assert_eq!(rerun_sent, size - resumed, "the source sent only the gaps");
    report.push(format!(
        "client kill: size {size}, resumed {resumed}, destination received {runs:?}: {again} twice"
    ));
    assert!(
        again <= size / 100 + STREAMS * BLOCK,
        "{again} bytes received twice"
    );

    // The destination server SIGKILLed mid-file and restarted on the same address: its periodic checkpoint
    // is resumed from.
    let dst = b.url("/server-kill.bin");
    let out = r2.join("server-kill.bin");
    let listen = b.addr.to_string();
    let held = interrupted(env, (&src, &dst), &r2, &out, 6 << 20, |_| {
        b.child.kill().unwrap();
        b.child.wait().unwrap();
    });
    b = lab_server_logged_on(&lab, 2, &listen, &r2, THIRD_PARTY);
    let j = rerun(env, &src, &dst);
    assert_eq!(j["verified"], true, "{j}");
    assert_eq!(sha256_file(&out), want);
    let resumed = j["resumed_bytes"].as_u64().unwrap();
    assert!(
        resumed >= 6 << 20 && resumed <= held,
        "server kill: resumed {resumed}, held {held}: {j}"
    );
    assert_eq!(j["bytes"].as_u64(), Some(size - resumed), "{j}");
    report.push(format!("server kill: resumed {resumed} of {size}"));

    // The kept partial corrupted inside its held ranges between runs: the resumed file fails its checksum,
    // is deleted, and the whole file is copied again and verified.
    let dst = b.url("/corrupt.bin");
    let out = r2.join("corrupt.bin");
    interrupted(env, (&src, &dst), &r2, &out, 6 << 20, |c| c.kill().unwrap());
    let parts = kept_part_files(&r2);
    assert_eq!(parts.len(), 1, "{parts:?}");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(&parts[0])
        .unwrap();
    f.seek(SeekFrom::Start(1 << 20)).unwrap();
    f.write_all(&[0x5a; 4096]).unwrap();
    drop(f);
    let j = rerun(env, &src, &dst);
    assert_eq!(j["verified"], true, "{j}");
    assert_eq!(sha256_file(&out), want);
    assert_eq!(j["bytes"].as_u64(), Some(size), "copied all again: {j}");
    assert!(
        j.to_string().contains("failed its checksum"),
        "the summary says why: {j}"
    );

    // The source changed (same size, new content and time) between runs: the partial is not spliced in.
    let dst = b.url("/changed.bin");
    let out = r2.join("changed.bin");
    interrupted(env, (&src, &dst), &r2, &out, 6 << 20, |c| c.kill().unwrap());
    // MDTM has whole seconds: make sure the new version's time differs.
    std::thread::sleep(Duration::from_millis(1100));
    let new = random_file(&r1.join("src.bin"), size as usize, 61);
    let j = rerun(env, &src, &dst);
    assert_eq!(j["resumed_bytes"].as_u64(), Some(0), "{j}");
    assert_eq!(j["bytes"].as_u64(), Some(size), "{j}");
    assert_eq!(sha256_file(&out), new);
    eprintln!("{}", report.join("\n"));
    drop((a, b));
    lab.down().expect("lab down");
}

/// Globus's file at `p`: its length (0 if absent).
fn size_of(p: &Path) -> u64 {
    std::fs::metadata(p).map_or(0, |m| m.len())
}

#[test]
fn third_party_copies_to_globus_resume_from_restart_markers() {
    let name = "third_party_copies_to_globus_resume_from_restart_markers";
    require_lab!("third_party_copies_to_globus_resume_from_restart_markers");
    if !have(globus::GLOBUS_SERVER, name) {
        return;
    }
    let lab = drsftp_testkit::lab::up("tpglr", 2, Duration::from_millis(4), 40_000_000);
    let dir = open_tempdir();
    let (r1, r2) = (dir.path().join("h1"), dir.path().join("h2"));
    for r in [&r1, &r2] {
        std::fs::create_dir(r).unwrap();
    }
    chmod(&r2, 0o777);
    let state = dir.path().join("state");
    let size: u64 = (64 << 20) + 4321;
    let want = random_file(&r1.join("src.bin"), size as usize, 62);
    let a = lab_server_logged_on(&lab, 1, &format!("{}:0", lab.addr(1)), &r1, THIRD_PARTY);
    let g = lab_globus(&lab, 2, 1, dir.path());
    let src = a.url("/src.bin");
    let out = r2.join("globus.bin");
    let dst = format!("ftp://{}{}", g.addr, out.display());
    let records = || std::fs::read_dir(state.join("drsftp/uploads")).map_or(0, |d| d.count());

    // Killed after Globus's first range marker (every 5 s; 30 MiB take about 6 s at 40 Mbit/s).
    let mut child = copy_cmd(
        &lab,
        &state,
        &["-p", "2", "--retries", "0", "-q"],
        &src,
        &dst,
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("spawn drsftp copy");
    cut_midway(
        &mut child,
        ("third-party copy", "file at the destination"),
        || size_of(&out),
        30 << 20,
        |c| c.kill().unwrap(),
        T,
    );
    // The rerun starts only once Globus's session for the killed client is gone (it writes its last buffers).
    g.settle_for(Duration::from_secs(20));
    assert_eq!(records(), 1, "the killed copy kept its marker record");
    let held = size_of(&out);
    // The rerun's debug log names the markers and each tail comparison, for a failure's message.
    let (ok, o, log) = run(
        copy_cmd(&lab, &state, &["--json", "-p", "2"], &src, &dst)
            .env("RUST_LOG", "drsftp_io::client=debug"),
        T,
    );
    assert!(ok, "rerun: {o} {log}");
    let j = json_of(&o);
    assert_eq!(j["verified"], true, "{j}");
    assert_eq!(sha256_file(&out), want);
    let (resumed, sent) = (
        j["resumed_bytes"].as_u64().unwrap(),
        j["bytes"].as_u64().unwrap(),
    );
    assert!(resumed > 0, "{j}");
    assert_eq!(sent, size - resumed, "only the gaps: {j}");
    assert!(
        sent <= size - held + size / 100 + STREAMS * BLOCK,
        "held {held}, sent {sent}: {j}\n{log}"
    );
    assert_eq!(records(), 0, "the record went with the copy");
    eprintln!("globus destination: size {size}, held {held}, resumed {resumed}, sent {sent}");
    drop((a, g));
    lab.down().expect("lab down");
}
