//! The `drsftp` binary end to end: `drsftp copy` against `drsftp serve` (download and upload, stream mode with
//! `-p 1` and MODE E with `-p 4`, the `--json` summary parsed and checked) and against Debian's
//! `globus-gridftp-server` (skipped with a printed reason when it is not installed), a failed download that must
//! exit 1 and leave nothing behind, `drsftp demo --json`, and `drsftp ls`. Loopback only; every server started here
//! is killed by PID when its test ends.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const T: Duration = Duration::from_secs(120);

/// Runs `drsftp ARGS...` and returns (success, stdout, stderr).
fn drsftp(args: &[&str]) -> (bool, String, String) {
    run(Command::new(bin()).args(args), T)
}

/// Runs `drsftp ARGS...` and returns its exit code, stdout and stderr.
fn drsftp_status(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(bin())
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("spawn drsftp");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Checks a `drsftp copy --json` summary: bytes, streams, mode, verified.
fn check_summary(j: &Value, bytes: u64, streams: u64, mode: &str, what: &str) {
    assert_eq!(j["bytes"].as_u64(), Some(bytes), "{what}: bytes in {j}");
    assert_eq!(
        j["streams"].as_u64(),
        Some(streams),
        "{what}: streams in {j}"
    );
    assert_eq!(j["mode"].as_str(), Some(mode), "{what}: mode in {j}");
    assert_eq!(
        j["verified"].as_bool(),
        Some(true),
        "{what}: verified in {j}"
    );
    let ck = j["checksum"].as_str().unwrap_or("");
    assert!(ck.contains(':'), "{what}: checksum {ck:?} in {j}");
    assert!(
        j["seconds"].as_f64().is_some_and(|s| s > 0.0),
        "{what}: seconds in {j}"
    );
}

/// Names in `dir` (to check nothing, not even a part file, was left behind).
fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `drsftp copy -p <p> --json <from> <to>`, which must succeed (else `what` and `srv`'s log are shown); the
/// JSON summary.
fn copy_json(p: &str, from: &str, to: &str, what: &str, srv: &ServerProcess) -> serde_json::Value {
    let (ok, o, e) = drsftp(&["copy", "-p", p, "--json", from, to]);
    assert!(
        ok,
        "{what} failed: {o} {e}\nserver log:\n{}",
        srv.log_text()
    );
    json_of(&o)
}

/// A served root with one random file, and a `drsftp serve` on it.
struct Served {
    dir: tempfile::TempDir,
    root: std::path::PathBuf,
    srv: ServerProcess,
}

fn served(file: &str, len: usize, seed: u64) -> (Served, String) {
    let dir = open_tempdir();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    chmod(&root, 0o777);
    let want = random_file(&root.join(file), len, seed);
    let srv = drsftp_server(&root, &[]);
    (Served { dir, root, srv }, want)
}

#[test]
fn copy_download_from_drsftp_serve_stream_and_mode_e() {
    let len = 12 << 20;
    let (s, want) = served("src.bin", len, 21);
    for (p, mode) in [("1", "S"), ("4", "E")] {
        let out = s.dir.path().join(format!("down-p{p}.bin"));
        let url = s.srv.url("/src.bin");
        let what = format!("drsftp copy -p {p}");
        let j = copy_json(p, &url, out.to_str().unwrap(), &what, &s.srv);
        check_summary(
            &j,
            len as u64,
            p.parse().unwrap(),
            mode,
            &format!("download -p {p}"),
        );
        assert_eq!(sha256_file(&out), want, "download -p {p}");
    }
    // A directory destination gets the source's name; the human summary goes to stderr.
    let into = s.dir.path().join("into");
    std::fs::create_dir(&into).unwrap();
    let (ok, o, e) = drsftp(&[
        "copy",
        "-p",
        "4",
        &s.srv.url("/src.bin"),
        into.to_str().unwrap(),
    ]);
    assert!(ok, "{o} {e}");
    assert!(
        e.contains("copied") && e.contains("MODE E"),
        "summary line: {e}"
    );
    assert_eq!(sha256_file(&into.join("src.bin")), want);
    assert_eq!(names_in(&into), ["src.bin"], "no part file left");
}

#[test]
fn copy_upload_to_drsftp_serve_stream_and_mode_e() {
    let (s, _) = served("unused.bin", 1, 22);
    let local = s.dir.path().join("local.bin");
    let len = 10 << 20;
    let want = random_file(&local, len, 23);
    for (p, mode) in [("1", "S"), ("4", "E")] {
        let url = s.srv.url(&format!("/up-p{p}.bin"));
        let what = format!("drsftp copy -p {p} (upload)");
        let j = copy_json(p, local.to_str().unwrap(), &url, &what, &s.srv);
        check_summary(
            &j,
            len as u64,
            p.parse().unwrap(),
            mode,
            &format!("upload -p {p}"),
        );
        assert_eq!(
            sha256_file(&s.root.join(format!("up-p{p}.bin"))),
            want,
            "upload -p {p}"
        );
    }
    // A URL ending in '/' gets the local file's name.
    let (ok, o, e) = drsftp(&["copy", "-p", "4", local.to_str().unwrap(), &s.srv.url("/")]);
    assert!(ok, "{o} {e}");
    assert_eq!(sha256_file(&s.root.join("local.bin")), want);
}

#[test]
fn copy_against_globus_gridftp_server() {
    let len = 16 << 20;
    let Some((dir, src, want, srv)) =
        globus_with_file("copy_against_globus_gridftp_server", "g-src.bin", len, 24)
    else {
        return;
    };
    // The server's home is `/`: URL paths are host paths.
    let url = |p: &Path| srv.url(p.to_str().unwrap());
    for (p, mode) in [("1", "S"), ("4", "E")] {
        let out = dir.path().join(format!("g-down-p{p}.bin"));
        let up = dir.path().join(format!("g-up-p{p}.bin"));
        let src_s = src.to_str().unwrap().to_string();
        let out_s = out.to_str().unwrap().to_string();
        for (what, way, from, to, result) in [
            ("download", "from", url(&src), out_s, &out),
            ("upload", "to", src_s, url(&up), &up),
        ] {
            let j = copy_json(p, &from, &to, &format!("{what} -p {p} {way} globus"), &srv);
            check_summary(
                &j,
                len as u64,
                p.parse().unwrap(),
                mode,
                &format!("globus {what} -p {p}"),
            );
            assert_eq!(sha256_file(result), want, "globus {what} -p {p}");
        }
    }
    // globus-gridftp-server forks one child per control connection: let those finish (after QUIT) while the
    // parent can still reap them, so none is orphaned when the harness kills the parent (by PID) on drop.
    srv.settle();
}

#[test]
fn failed_download_exits_1_and_leaves_nothing() {
    let (s, _) = served("present.bin", 1 << 20, 25);
    let dest_dir = s.dir.path().join("dest");
    std::fs::create_dir(&dest_dir).unwrap();
    let dest = dest_dir.join("missing.bin");
    for p in ["1", "4"] {
        let (code, o, e) = drsftp_status(&[
            "copy",
            "-p",
            p,
            &s.srv.url("/no-such-file.bin"),
            dest.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(1), "-p {p}: exit code; stdout {o} stderr {e}");
        assert!(
            e.contains("no-such-file.bin"),
            "-p {p}: error names the file: {e}"
        );
        assert!(!dest.exists(), "-p {p}: destination created");
        assert!(
            names_in(&dest_dir).is_empty(),
            "-p {p}: left behind {:?}",
            names_in(&dest_dir)
        );
    }
    // --json: the error is one JSON object on stdout, still exit 1.
    let (code, o, _) = drsftp_status(&[
        "copy",
        "--json",
        &s.srv.url("/no-such-file.bin"),
        dest.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1));
    assert!(
        json_of(&o)["error"].as_str().is_some_and(|m| !m.is_empty()),
        "{o}"
    );
    assert!(names_in(&dest_dir).is_empty());
}

#[test]
fn demo_small_json_reports_verified() {
    let (ok, o, e) = drsftp(&["demo", "--size", "32M", "--json"]);
    assert!(ok, "drsftp demo failed: {o} {e}");
    let j = json_of(&o);
    assert_eq!(j["bytes"].as_u64(), Some(32 << 20), "{j}");
    assert_eq!(j["streams"].as_u64(), Some(4), "{j}");
    assert_eq!(j["mode"].as_str(), Some("E"), "{j}");
    assert_eq!(j["verified"].as_bool(), Some(true), "{j}");
    assert!(
        j["checksum"]
            .as_str()
            .is_some_and(|c| c.starts_with("crc32c:")),
        "{j}"
    );
    assert_eq!(j["buffer_policy"].as_str(), Some("kernel"), "{j}");
    assert!(j["gbps"].as_f64().is_some_and(|g| g > 0.0), "{j}");
    assert!(j["peak_buffer_bytes"].is_u64(), "{j}");
    assert!(
        j["peak_window_bytes"].as_u64().is_some_and(|w| w > 0),
        "{j}"
    );
    let scratch = j["scratch_dir"].as_str().expect("scratch_dir");
    assert!(
        !Path::new(scratch).exists(),
        "scratch directory {scratch} not removed"
    );
}

#[test]
fn ls_lists_names() {
    let (s, _) = served("a.bin", 1000, 26);
    std::fs::write(s.root.join("b.txt"), b"hello\n").unwrap();
    std::fs::create_dir(s.root.join("sub")).unwrap();
    let (ok, o, e) = drsftp(&["ls", &s.srv.url("/")]);
    assert!(
        ok,
        "drsftp ls failed: {o} {e}\nserver log:\n{}",
        s.srv.log_text()
    );
    let mut names: Vec<&str> = o.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    names.sort();
    assert_eq!(names, ["a.bin", "b.txt", "sub"], "{o}");

    let (ok, o, e) = drsftp(&["ls", "--long", &s.srv.url("/")]);
    assert!(ok, "{e}");
    let a = o
        .lines()
        .find(|l| l.ends_with("a.bin"))
        .unwrap_or_else(|| panic!("{o}"));
    assert!(a.contains("1000"), "size in the long form: {a}");
}
