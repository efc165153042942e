//! TCP downloads resume (docs/resume.md): `drsftp copy` inside lab host 2, downloading from `drsftp serve` on
//! host 1 over a rate-capped link (so a kill lands mid-file), is SIGKILLed by PID once its checkpoint covers some
//! data; the rerun asks only for the gaps (MODE E: `REST` ranges) or the rest (stream mode: `REST` offset), says
//! how much it resumed in `--json`, verifies the whole file and is byte-identical to the source. The bytes the
//! killed run had written that the rerun asks for again (4 KiB chunks of the part file equal to the source outside
//! what its last checkpoint held) stay within 1 % of the file plus one block per stream; what the server's transfer log counts
//! (killed run + rerun − size, which includes bytes still in socket buffers at the kill) is printed. A server killed and restarted mid-file is resumed from too, and a source that changed between runs is
//! never spliced: its stale part file is discarded with a notice. A file of a pipelined tree batch (up to 8 MiB)
//! resumes the same way. Needs root and /dev/net/tun; otherwise prints `SKIPPED <test>: <reason>` and returns.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use drsftp_lab::Lab;
use drsftp_testkit::require_lab;
use serde_json::Value;

const T: Duration = Duration::from_secs(120);
/// The MODE E block size our server sends.
const BLOCK: u64 = 256 << 10;

fn part_files(dst: &Path) -> (PathBuf, PathBuf) {
    let name = dst.file_name().unwrap().to_string_lossy();
    (
        dst.with_file_name(format!(".{name}.drsftp-part")),
        dst.with_file_name(format!(".{name}.drsftp-part.ck")),
    )
}

/// The ranges a TCP checkpoint holds.
fn held_ranges(ck: &Path) -> Vec<(u64, u64)> {
    checkpoint_ranges(&std::fs::read_to_string(ck).unwrap())
}

/// Bytes the part file holds of `src` (4 KiB chunks equal to the source, not all zero) outside the ranges its
/// checkpoint holds: what a rerun asks for a second time.
fn written_again(part: &Path, ck: &Path, src: &Path) -> u64 {
    let (p, s, held) = (
        std::fs::read(part).unwrap(),
        std::fs::read(src).unwrap(),
        held_ranges(ck),
    );
    let inside = |a: u64, b: u64| -> u64 {
        held.iter()
            .map(|&(x, y)| b.min(y).saturating_sub(a.max(x)))
            .sum()
    };
    p.chunks(4096)
        .zip(s.chunks(4096))
        .enumerate()
        .filter(|(_, (c, d))| c == d && c.iter().any(|&x| x != 0))
        .map(|(i, (c, _))| {
            let a = i as u64 * 4096;
            c.len() as u64 - inside(a, a + c.len() as u64)
        })
        .sum()
}

/// Bytes a TCP checkpoint says are held (0 if there is none or it is not a ranges checkpoint).
fn checkpointed(ck: &Path) -> u64 {
    let Ok(text) = std::fs::read_to_string(ck) else {
        return 0;
    };
    if !text.contains("\n\n") {
        return 0;
    }
    assert!(text.starts_with("drsftp-ranges-checkpoint 1\n"), "{text}");
    checkpoint_ranges(&text).iter().map(|(a, b)| b - a).sum()
}

/// Bytes of each RETR/ERET line of the server's transfer log so far.
fn sent_bytes(root: &Path) -> Vec<u64> {
    logged_bytes(root, &["RETR", "ERET"])
}

fn copy_cmd(lab: &Lab, args: &[&str], url: &str, dst: &Path) -> Command {
    let mut c = lab.exec(2, bin().to_str().unwrap());
    c.arg("copy").args(args).arg(url).arg(dst);
    c
}

/// Starts the download and waits until its checkpoint covers at least `at` bytes; then `cut` runs (it kills the
/// client or the server). Returns what the checkpoint held once the client had ended, and [`written_again`].
fn interrupted(
    lab: &Lab,
    args: &[&str],
    (url, src): (&str, &Path),
    dst: &Path,
    at: u64,
    cut: impl FnOnce(&mut std::process::Child),
) -> (u64, u64) {
    interrupted_in(lab, args, (url, src), dst, dst, at, cut)
}

/// [`interrupted`] for a copy to `target` (a tree) in which `dst` is the file watched.
fn interrupted_in(
    lab: &Lab,
    args: &[&str],
    (url, src): (&str, &Path),
    target: &Path,
    dst: &Path,
    at: u64,
    cut: impl FnOnce(&mut std::process::Child),
) -> (u64, u64) {
    let (part, ck) = part_files(dst);
    let mut child = copy_cmd(lab, args, url, target)
        .arg("-q")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn drsftp copy");
    cut_midway(
        &mut child,
        ("download", "checkpoint"),
        || checkpointed(&ck),
        at,
        cut,
        T,
    );
    assert!(
        !dst.exists(),
        "an interrupted download left a file that looks complete"
    );
    assert!(part.exists() && ck.exists(), "kept for resume");
    (checkpointed(&ck), written_again(&part, &ck, src))
}

/// SIGKILL by PID (`Child::kill`), at once: only the periodic checkpoints count.
fn sigkill(child: &mut std::process::Child) {
    child.kill().unwrap();
}

fn rerun(lab: &Lab, args: &[&str], url: &str, dst: &Path) -> Value {
    let (ok, o, e) = run(
        &mut copy_cmd(lab, &[&["--json"], args].concat(), url, dst),
        T,
    );
    assert!(ok, "rerun: {o} {e}");
    json_of(&o)
}

#[test]
fn tcp_downloads_resume_after_client_and_server_kills() {
    require_lab!("tcp_downloads_resume_after_client_and_server_kills");
    let lab = drsftp_testkit::lab::up("rsm", 2, Duration::from_millis(4), 40_000_000);
    let dir = open_tempdir();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let size: u64 = (24 << 20) + 4321;
    let src = root.join("src.bin");
    let want = random_file(&src, size as usize, 20);
    let mut srv = lab_server_logged(&lab, &format!("{}:0", lab.addr(1)), &root);
    let url = srv.url("/src.bin");
    let mut report = vec![];

    // Client SIGKILLed, MODE E on 2 streams and stream mode.
    for (name, args, streams) in [
        ("mode-e", &["-p", "2"][..], 2u64),
        ("stream", &["-p", "1"][..], 1),
    ] {
        let dst = dir.path().join(format!("{name}.bin"));
        let before = sent_bytes(&root).len();
        let (held, written) = interrupted(
            &lab,
            args,
            (url.as_str(), src.as_path()),
            &dst,
            6 << 20,
            sigkill,
        );
        let j = rerun(&lab, args, &url, &dst);
        assert_eq!(j["verified"], true, "{j}");
        assert_eq!(sha256_file(&dst), want, "{name}");
        let resumed = j["resumed_bytes"].as_u64().unwrap();
        assert!(
            resumed >= 6 << 20 && resumed <= held,
            "{name}: resumed {resumed}, held {held}: {j}"
        );
        assert_eq!(
            j["bytes"].as_u64(),
            Some(size - resumed),
            "{name}: only the gaps: {j}"
        );
        let (part, ck) = part_files(&dst);
        assert!(!part.exists() && !ck.exists(), "left behind after success");
        // The killed run's record is written once the server notices the dead connection.
        let t0 = Instant::now();
        while sent_bytes(&root).len() < before + 2 && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(100));
        }
        let runs = sent_bytes(&root)[before..].to_vec();
        let server_again = runs.iter().sum::<u64>().saturating_sub(size);
        let again = written;
        report.push(format!(
            "{name}: size {size}, resumed {resumed}, asked again {again}, server sent {runs:?} \
             ({server_again} twice by its count)"
        ));
        assert!(
            again <= size / 100 + streams * BLOCK,
            "{name}: {again} bytes asked for again (held {resumed})"
        );
    }

    // The server SIGKILLed mid-file and restarted on the same address: the rerun resumes.
    let dst = dir.path().join("server-kill.bin");
    let listen = srv.addr.to_string();
    let (held, _) = interrupted(
        &lab,
        &["-p", "2"],
        (url.as_str(), src.as_path()),
        &dst,
        6 << 20,
        |_| {
            srv.child.kill().unwrap();
            srv.child.wait().unwrap();
        },
    );
    srv = lab_server_logged(&lab, &listen, &root);
    let j = rerun(&lab, &["-p", "2"], &url, &dst);
    assert_eq!(sha256_file(&dst), want);
    let resumed = j["resumed_bytes"].as_u64().unwrap();
    assert!(
        resumed >= 6 << 20 && resumed <= held,
        "server kill: resumed {resumed}, held {held}: {j}"
    );
    report.push(format!("server-kill: resumed {resumed} of {size}"));

    // The source changes (same size, new content and time) between runs: the part file is not spliced in.
    let dst = dir.path().join("changed.bin");
    interrupted(
        &lab,
        &["-p", "2"],
        (url.as_str(), src.as_path()),
        &dst,
        6 << 20,
        sigkill,
    );
    let new = random_file(&root.join("src.bin"), size as usize, 21);
    let t = std::time::SystemTime::now() + Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(root.join("src.bin"))
        .unwrap()
        .set_modified(t)
        .unwrap();
    let j = rerun(&lab, &["-p", "2"], &url, &dst);
    assert_eq!(j["resumed_bytes"].as_u64(), Some(0), "{j}");
    assert!(j["notices"].to_string().contains("source changed"), "{j}");
    assert_eq!(sha256_file(&dst), new);
    eprintln!("{}", report.join("\n"));
    drop(srv);
}

/// A killed `drsftp copy -r` rerun with the same arguments finishes the job: complete files are skipped, the
/// file that was in flight is resumed (its record says how much), and the tree is byte-identical.
#[test]
fn a_killed_tree_download_resumes_its_partial_file() {
    require_lab!("a_killed_tree_download_resumes_its_partial_file");
    let lab = drsftp_testkit::lab::up("rsmr", 2, Duration::from_millis(4), 40_000_000);
    let dir = open_tempdir();
    let root = dir.path().join("root");
    let size: u64 = (20 << 20) + 17;
    for i in 0..4 {
        std::fs::create_dir_all(root.join("t/small")).unwrap();
        random_file(&root.join(format!("t/small/{i}.bin")), 40_000, 30 + i);
    }
    let want = random_file(&root.join("t/zz-big.bin"), size as usize, 29);
    let srv = lab_server_logged(&lab, &format!("{}:0", lab.addr(1)), &root);
    let url = srv.url("/t/");
    let out = dir.path().join("out");
    let args = ["-r", "-p", "2", "--concurrency", "1"];
    let big = out.join("zz-big.bin");
    let (held, _) = interrupted_in(
        &lab,
        &args,
        (url.as_str(), root.join("t/zz-big.bin").as_path()),
        &out,
        &big,
        4 << 20,
        sigkill,
    );
    let j = rerun(&lab, &args, &url, &out);
    assert_eq!(j["failed"].as_u64(), Some(0), "{j}");
    let rec = j["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["destination"].as_str().unwrap().ends_with("zz-big.bin"))
        .unwrap();
    let resumed = rec["resumed_bytes"].as_u64().unwrap();
    assert!(
        resumed >= 4 << 20 && resumed <= held,
        "resumed {resumed}, held {held}: {rec}"
    );
    assert_eq!(rec["bytes"].as_u64(), Some(size - resumed), "{rec}");
    assert_eq!(rec["verified"], true, "{rec}");
    assert_eq!(sha256_file(&big), want);
    for i in 0..4 {
        assert_eq!(
            sha256_file(&out.join(format!("small/{i}.bin"))),
            sha256_file(&root.join(format!("t/small/{i}.bin")))
        );
    }
    let (part, ck) = part_files(&big);
    assert!(!part.exists() && !ck.exists());
}

/// Files up to 8 MiB go in pipelined batches; one killed mid-file resumes too: the rerun's batch sends
/// `REST <ranges>` before its RETR, so only the gaps travel (within 1 % plus one block), and the tree verifies.
#[test]
fn a_killed_tree_download_resumes_its_batched_file() {
    require_lab!("a_killed_tree_download_resumes_its_batched_file");
    let lab = drsftp_testkit::lab::up("rsmb", 2, Duration::from_millis(4), 40_000_000);
    let dir = open_tempdir();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("t/sub")).unwrap();
    let size: u64 = (6 << 20) + 1234;
    let mut want = vec![];
    for i in 0..5u64 {
        let p = root.join(format!("t/sub/f{i}.bin"));
        want.push((p.clone(), random_file(&p, size as usize, 40 + i)));
    }
    let srv = lab_server_logged(&lab, &format!("{}:0", lab.addr(1)), &root);
    let url = srv.url("/t/");
    let out = dir.path().join("out");
    let args = ["-r", "--concurrency", "1"];
    let first = out.join("sub/f0.bin");
    let (held, again) = interrupted_in(
        &lab,
        &args,
        (url.as_str(), root.join("t/sub/f0.bin").as_path()),
        &out,
        &first,
        2 << 20,
        sigkill,
    );
    let j = rerun(&lab, &args, &url, &out);
    assert_eq!(j["failed"].as_u64(), Some(0), "{j}");
    assert_eq!(j["copied"].as_u64(), Some(5), "{j}");
    let rec = j["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["destination"].as_str().unwrap().ends_with("f0.bin"))
        .unwrap();
    let resumed = rec["resumed_bytes"].as_u64().unwrap();
    assert!(
        resumed >= 2 << 20 && resumed <= held,
        "resumed {resumed}, held {held}: {rec}"
    );
    assert_eq!(rec["bytes"].as_u64(), Some(size - resumed), "{rec}");
    assert_eq!(rec["verified"], true, "{rec}");
    assert!(
        again <= size / 100 + BLOCK,
        "{again} bytes asked for again (held {held})"
    );
    eprintln!("batched file: size {size}, held {held}, resumed {resumed}, asked again {again}");
    for (i, (p, sum)) in want.iter().enumerate() {
        let got = out.join(format!("sub/f{i}.bin"));
        assert_eq!(&sha256_file(&got), sum, "{}", p.display());
        let (part, ck) = part_files(&got);
        assert!(
            !part.exists() && !ck.exists(),
            "left behind: {}",
            part.display()
        );
    }
    let left: Vec<_> = std::fs::read_dir(out.join("sub"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("drsftp-part"))
        .collect();
    assert!(left.is_empty(), "part files left: {left:?}");
}
