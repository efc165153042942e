//! `drsftp copy -r` and multi-file jobs end to end against `drsftp serve` on loopback: a tree with awkward names
//! (spaces, unicode, a leading dash), nested and empty directories and a symlink leaving the tree, downloaded,
//! uploaded and copied third-party; modification times kept on download; every `--sync` mode making a second run
//! move 0 bytes; retries riding out a server that starts late; a failed file that does not stop the job; and a
//! killed job finished by a rerun. Every server started here is killed by PID when its test ends.

mod common;

use common::tree::*;
use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(180);

fn drsftp(args: &[&str]) -> (bool, String, String) {
    run(Command::new(bin()).args(args), T)
}

/// `drsftp copy ARGS --json`, which must succeed; its JSON.
fn copy_ok(args: &[&str], what: &str) -> Value {
    let mut a = vec!["copy", "--json"];
    a.extend_from_slice(args);
    let (ok, o, e) = drsftp(&a);
    assert!(ok, "{what} failed:\nstdout {o}\nstderr {e}");
    json_of(&o)
}

/// Every file below `root` (relative path -> SHA-256) and every directory (-> "dir"), hidden part files included
/// so a leftover one shows.
fn tree(root: &Path) -> BTreeMap<String, String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        for e in std::fs::read_dir(dir).expect("read_dir") {
            let p = e.expect("entry").path();
            let rel = p
                .strip_prefix(root)
                .expect("prefix")
                .to_string_lossy()
                .into_owned();
            let m = std::fs::symlink_metadata(&p).expect("meta");
            if m.is_dir() {
                out.insert(rel, "dir".into());
                walk(root, &p, out);
            } else if m.is_file() {
                out.insert(rel, sha256_file(&p));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// The source tree: awkward names, nesting, an empty directory, a 12 MiB file (parallel streams with -p 4) and
/// small ones, modification times in 2020. Returns its expected `tree()`. `unicode`: the `ünïcødé dir` file too
/// (globus-gridftp-server 13 answers 550 to every non-ASCII path, even with the UTF8 feature it lists).
fn make_tree(src: &Path, unicode: bool) -> BTreeMap<String, String> {
    for d in ["nested/a/b", "empty/inner", "ünïcødé dir", "-dash dir"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    let files: [(&str, usize); 6] = [
        ("plain.bin", 200 << 10),
        ("with space.dat", 1000),
        ("ünïcødé dir/ファイル.txt", 5),
        ("-dash dir/-leading-dash", 64 << 10),
        ("nested/a/b/deep.bin", 12 << 20),
        ("zero", 0),
    ];
    for (i, (f, len)) in files.iter().enumerate() {
        if !unicode && !f.is_ascii() {
            std::fs::remove_dir(src.join("ünïcødé dir")).unwrap();
            continue;
        }
        let p = src.join(f);
        random_file(&p, *len, 100 + i as u64);
        set_mtime(&p, 1_600_000_000 + i as u64 * 1000);
    }
    tree(src)
}

/// Complete files below `root` while a job may be writing into it (no hashing; part files and entries that
/// vanish while we look are not counted).
fn complete_files(root: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(root) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => complete_files(&e.path()),
            Ok(t) if t.is_file() && !e.file_name().to_string_lossy().contains("drsftp-part") => 1,
            _ => 0,
        })
        .sum()
}

#[test]
fn tree_download_upload_and_third_party_with_awkward_names() {
    let dir = open_tempdir();
    let (ra, rb) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(ra.join("tree")).unwrap();
    std::fs::create_dir_all(&rb).unwrap();
    let want = make_tree(&ra.join("tree"), true);
    let (a, b) = (drsftp_server(&ra, &[]), drsftp_server(&rb, &[]));

    // Download.
    let out = dir.path().join("out");
    let j = copy_ok(
        &["-r", "-p", "4", &a.url("/tree/"), out.to_str().unwrap()],
        "download",
    );
    assert_eq!(tree(&out), want, "download: {j}");
    assert_eq!(
        (
            j["files"].as_u64(),
            j["copied"].as_u64(),
            j["failed"].as_u64()
        ),
        (Some(6), Some(6), Some(0)),
        "{j}"
    );
    assert_eq!(j["verified"], true, "{j}");
    for r in records(&j) {
        let dst = r["destination"].as_str().unwrap();
        assert_eq!(r["status"], "copied", "{r}");
        // Streams follow the size: 12 MiB over -p 4 gets 3 (4 MiB each); small files go in pipelined batches,
        // MODE E on the one connection the session keeps.
        let streams = if dst.ends_with("deep.bin") { 3 } else { 1 };
        assert_eq!(
            (r["streams"].as_u64(), r["wire_mode"].as_str()),
            (Some(streams), Some("E")),
            "{r}"
        );
    }
    // The server's modification times are kept (whole seconds).
    assert_eq!(
        mtime(&out.join("nested/a/b/deep.bin")),
        mtime(&ra.join("tree/nested/a/b/deep.bin"))
    );
    assert_eq!(mtime(&out.join("plain.bin")), 1_600_000_000);

    // Rerun: every --sync mode finds everything there and moves nothing.
    let tree_url = a.url("/tree/");
    for mode in [None, Some("exists"), Some("size"), Some("checksum")] {
        let mut args = vec!["-r", tree_url.as_str(), out.to_str().unwrap()];
        if let Some(m) = mode {
            args.extend(["--sync", m]);
        }
        let j = copy_ok(&args, "download rerun");
        assert_eq!(
            (j["skipped"].as_u64(), j["bytes"].as_u64()),
            (Some(6), Some(0)),
            "--sync {mode:?}: {j}"
        );
    }
    let j = copy_ok(
        &[
            "-r",
            "--sync",
            "none",
            &a.url("/tree/"),
            out.to_str().unwrap(),
        ],
        "sync none",
    );
    assert_eq!(j["copied"].as_u64(), Some(6), "{j}");

    // Upload, with a symlink leaving the tree (skipped with a note) and one inside it (copied as a file).
    std::fs::write(dir.path().join("secret"), b"do not upload").unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret"), out.join("escape")).unwrap();
    let (ok, o, e) = drsftp(&[
        "copy",
        "-r",
        "--json",
        out.to_str().unwrap(),
        &b.url("/in/up"),
    ]);
    assert!(ok, "upload: {o} {e}");
    let j = json_of(&o);
    assert!(e.contains("escape") && e.contains("leaves the tree"), "{e}");
    assert_eq!(tree(&rb.join("in/up")), want, "upload: {j}");
    // drsftp serve takes MFMT: the uploaded files keep their times, so even an mtime rerun moves nothing.
    assert_eq!(mtime(&rb.join("in/up/plain.bin")), 1_600_000_000);
    assert_eq!(
        mtime(&rb.join("in/up/nested/a/b/deep.bin")),
        mtime(&out.join("nested/a/b/deep.bin"))
    );
    for sync in ["size", "mtime"] {
        let j = copy_ok(
            &[
                "-r",
                "--sync",
                sync,
                out.to_str().unwrap(),
                &b.url("/in/up"),
            ],
            "upload rerun",
        );
        assert_eq!(
            (j["skipped"].as_u64(), j["bytes"].as_u64()),
            (Some(6), Some(0)),
            "--sync {sync}: {j}"
        );
    }

    // Third-party: server A to server B, no data through us.
    let j = copy_ok(
        &["-r", "-p", "2", &a.url("/tree"), &b.url("/tp/")],
        "third-party",
    );
    assert_eq!(tree(&rb.join("tp")), want, "third-party: {j}");
    assert_eq!(mtime(&rb.join("tp/plain.bin")), 1_600_000_000);
    let j = copy_ok(
        &["-r", &a.url("/tree"), &b.url("/tp/"), "--sync", "size"],
        "third-party rerun",
    );
    assert_eq!(j["bytes"].as_u64(), Some(0), "{j}");
}

/// The logins made while the tree is listed are the workers' sessions: a download of 12 files in two
/// subdirectories (listed in parallel) logs in exactly as many sessions as the job moves files over, none opened
/// for the listing and dropped; with `--concurrency 2`, two.
#[test]
fn a_tree_download_logs_in_once_per_session() {
    let dir = open_tempdir();
    let root = dir.path().join("root");
    for (i, d) in ["t/x", "t/y"].iter().cycle().take(12).enumerate() {
        std::fs::create_dir_all(root.join(d)).unwrap();
        random_file(&root.join(d).join(format!("f{i:02}")), 20_000 + i, i as u64);
    }
    let srv = drsftp_server(&root, &["--log", "info"]);
    let logins = || srv.log_text().matches("event=\"login\"").count() as u64;
    for (n, args) in [(8, vec![]), (2, vec!["--concurrency", "2"])] {
        let before = logins();
        let out = dir.path().join(format!("out{n}"));
        let mut a = vec!["-r"];
        a.extend(args);
        let url = srv.url("/t/");
        a.extend([url.as_str(), out.to_str().unwrap()]);
        let j = copy_ok(&a, "download");
        assert_eq!(tree(&out), tree(&root.join("t")), "{j}");
        assert_eq!(j["concurrency"].as_u64(), Some(n), "{j}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while logins() - before < n && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(logins() - before, n, "{}", srv.log_tail());
    }
}

#[test]
fn a_failed_file_does_not_stop_the_job() {
    let dir = open_tempdir();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("t")).unwrap();
    for (i, n) in ["a.bin", "b.bin", "c.bin"].iter().enumerate() {
        random_file(&root.join("t").join(n), 50_000, i as u64);
    }
    let srv = drsftp_server(&root, &[]);
    let out = dir.path().join("out");
    // A non-empty directory where b.bin must go: its rename fails (a local error, not retried).
    std::fs::create_dir_all(out.join("b.bin/x")).unwrap();
    let (ok, o, e) = drsftp(&[
        "copy",
        "-r",
        "--json",
        &srv.url("/t"),
        out.to_str().unwrap(),
    ]);
    assert!(!ok, "the job must fail: {o} {e}");
    let j = json_of(&o);
    assert_eq!(
        (j["copied"].as_u64(), j["failed"].as_u64()),
        (Some(2), Some(1)),
        "{j}"
    );
    assert!(e.contains("failed:") && e.contains("b.bin"), "{e}");
    assert!(e.contains("1 of 3 files failed"), "{e}");
    for n in ["a.bin", "c.bin"] {
        assert_eq!(
            sha256_file(&out.join(n)),
            sha256_file(&root.join("t").join(n))
        );
    }
    let left: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("drsftp-part"))
        .collect();
    assert!(left.is_empty(), "part files left: {left:?}");
}

#[test]
fn retries_ride_out_a_server_that_starts_late() {
    let dir = open_tempdir();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("t/sub")).unwrap();
    random_file(&root.join("t/sub/f.bin"), 300_000, 7);
    let port = drsftp_testkit::server::free_port();
    let url = format!("ftp://127.0.0.1:{port}/t");
    let out = dir.path().join("out");
    // No retries: the refused connection fails the job at once.
    let t0 = Instant::now();
    let (ok, _, e) = drsftp(&["copy", "-r", "--retries", "0", &url, out.to_str().unwrap()]);
    assert!(!ok && t0.elapsed() < Duration::from_secs(10), "{e}");
    // With retries (0.5 + 1 + 2 + 4 s of backoff) the server may come up 1.5 s late.
    let out_s = out.to_str().unwrap().to_string();
    let client = std::thread::spawn(move || {
        drsftp(&["copy", "-r", "--retries", "4", "--json", &url, &out_s])
    });
    std::thread::sleep(Duration::from_millis(1500));
    let _srv = drsftp_serve(
        Command::new(bin()),
        &format!("127.0.0.1:{port}"),
        &root,
        &[],
    );
    let (ok, o, e) = client.join().unwrap();
    assert!(ok, "{o} {e}");
    assert_eq!(json_of(&o)["copied"].as_u64(), Some(1));
    assert_eq!(
        sha256_file(&out.join("sub/f.bin")),
        sha256_file(&root.join("t/sub/f.bin"))
    );
}

#[test]
fn a_killed_job_is_finished_by_a_rerun() {
    let dir = open_tempdir();
    let root = dir.path().join("root");
    let n = 120;
    for i in 0..n {
        let p = root.join(format!("t/d{}/f{i:03}.bin", i % 4));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        random_file(&p, 256 << 10, i);
    }
    let srv = drsftp_server(&root, &[]);
    let out = dir.path().join("out");
    let mut child = Command::new(bin())
        .args([
            "copy",
            "-r",
            "--quiet",
            "--concurrency",
            "1",
            &srv.url("/t"),
            out.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let count = complete_files;
    let deadline = Instant::now() + Duration::from_secs(60);
    while (!out.exists() || count(&out) < 10) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before = count(&out);
    assert!(before >= 10, "{before} files before the kill");
    let j = copy_ok(&["-r", &srv.url("/t"), out.to_str().unwrap()], "rerun");
    let skipped = j["skipped"].as_u64().unwrap() as usize;
    assert!(
        skipped >= before,
        "skipped {skipped}, {before} were complete: {j}"
    );
    assert_eq!(
        j["copied"].as_u64().unwrap() as usize,
        n as usize - skipped,
        "{j}"
    );
    assert_eq!(tree(&out), tree(&root.join("t")), "after the rerun");
}

#[test]
fn files_from_copies_the_listed_pairs() {
    let dir = open_tempdir();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let a = random_file(&root.join("one file"), 10_000, 1);
    let b = random_file(&root.join("two"), 20_000, 2);
    let srv = drsftp_server(&root, &[]);
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let list = dir.path().join("list.txt");
    let mut text = String::from("# pairs\n");
    text.push_str(&format!(
        "\"{}\" '{}'\n",
        srv.url("/one file"),
        out.join("first copy").display()
    ));
    text.push_str(&format!(
        "{} {}/  # into the directory\n",
        srv.url("/two"),
        out.display()
    ));
    std::fs::write(&list, text).unwrap();
    let j = copy_ok(&["--files-from", list.to_str().unwrap()], "files-from");
    assert_eq!(j["copied"].as_u64(), Some(2), "{j}");
    assert_eq!(sha256_file(&out.join("first copy")), a);
    assert_eq!(sha256_file(&out.join("two")), b);
    let j = copy_ok(
        &["--files-from", list.to_str().unwrap()],
        "files-from rerun",
    );
    assert_eq!(
        (j["skipped"].as_u64(), j["bytes"].as_u64()),
        (Some(2), Some(0)),
        "{j}"
    );
    // A bad line is refused with its number before anything moves.
    std::fs::write(&list, "a b\nonly-one\n").unwrap();
    let (ok, _, e) = drsftp(&["copy", "--files-from", list.to_str().unwrap()]);
    assert!(!ok && e.contains("line 2"), "{e}");
}

/// A hostile FTP server on loopback: its MLSD of `/t` lists `../escape`, an absolute path, `a/b`, a `..` file
/// and a directory whose own listing climbs again; only `good` (and `sub/fine`) are real files. Answers
/// USER/PASS/FEAT/PASV/EPSV/PORT/MLSD/RETR/SIZE/MDTM, 200 to the rest.
fn hostile_server(abs: String) -> u16 {
    use std::io::{BufRead, BufReader, Write};
    use std::net::{TcpListener, TcpStream};
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(c) = c else { break };
            let abs = abs.clone();
            std::thread::spawn(move || {
                let mut w = c.try_clone().unwrap();
                let mut r = BufReader::new(c);
                let _ = w.write_all(b"220 hostile\r\n");
                let mut pasv: Option<TcpListener> = None;
                let mut port_to: Option<String> = None;
                let data =
                    |pasv: &mut Option<TcpListener>, port_to: &Option<String>| -> TcpStream {
                        match pasv.take() {
                            Some(l) => l.accept().unwrap().0,
                            None => TcpStream::connect(port_to.as_deref().unwrap()).unwrap(),
                        }
                    };
                let mut line = String::new();
                while r.read_line(&mut line).unwrap_or(0) > 0 {
                    let cmd = line.trim_end().to_string();
                    line.clear();
                    let (verb, arg) = cmd.split_once(' ').unwrap_or((cmd.as_str(), ""));
                    let reply: String = match verb.to_ascii_uppercase().as_str() {
                        "USER" => "331 pass\r\n".into(),
                        "PASS" => "230 in\r\n".into(),
                        "FEAT" => "211-Features:\r\n SIZE\r\n MDTM\r\n MLST type*;size*;modify*;\r\n211 End\r\n".into(),
                        "PASV" | "EPSV" => {
                            let dl = TcpListener::bind("127.0.0.1:0").unwrap();
                            let p = dl.local_addr().unwrap().port();
                            pasv = Some(dl);
                            if verb.eq_ignore_ascii_case("EPSV") {
                                format!("229 Entering Extended Passive Mode (|||{p}|)\r\n")
                            } else {
                                format!("227 Entering Passive Mode (127,0,0,1,{},{})\r\n", p >> 8, p & 255)
                            }
                        }
                        "PORT" => {
                            let n: Vec<u16> = arg.split(',').filter_map(|x| x.parse().ok()).collect();
                            port_to = Some(format!("{}.{}.{}.{}:{}", n[0], n[1], n[2], n[3], n[4] * 256 + n[5]));
                            "200 ok\r\n".into()
                        }
                        "MLSD" => {
                            let listing = if arg.ends_with("sub") {
                                "type=file;size=4; fine\r\ntype=dir; ../../up\r\n".to_string()
                            } else {
                                format!(
                                    "type=cdir; .\r\ntype=file;size=5; ../escape\r\ntype=file;size=5; {abs}\r\n\
                                     type=file;size=5; a/b\r\ntype=file;size=5; ..\r\ntype=dir; sub\r\n\
                                     type=file;size=5;modify=20200101000000; good\r\n"
                                )
                            };
                            let _ = w.write_all(b"150 here\r\n");
                            let mut d = data(&mut pasv, &port_to);
                            let _ = d.write_all(listing.as_bytes());
                            drop(d);
                            "226 done\r\n".into()
                        }
                        "SIZE" if arg.ends_with("/good") => "213 5\r\n".into(),
                        "SIZE" if arg.ends_with("/fine") => "213 4\r\n".into(),
                        "MDTM" => "213 20200101000000\r\n".into(),
                        "RETR" if arg.ends_with("/good") || arg.ends_with("/fine") => {
                            let _ = w.write_all(b"150 here\r\n");
                            let mut d = data(&mut pasv, &port_to);
                            let _ = d.write_all(if arg.ends_with("/good") { b"hello" } else { b"fine" });
                            drop(d);
                            "226 done\r\n".into()
                        }
                        "SIZE" | "RETR" => "550 no\r\n".into(),
                        "QUIT" => {
                            let _ = w.write_all(b"221 bye\r\n");
                            break;
                        }
                        _ => "200 ok\r\n".into(),
                    };
                    let _ = w.write_all(reply.as_bytes());
                }
            });
        }
    });
    port
}

#[test]
fn a_hostile_listing_cannot_write_outside_the_destination() {
    let dir = open_tempdir();
    let abs = dir.path().join("absolute-victim");
    let port = hostile_server(abs.to_str().unwrap().to_string());
    let out = dir.path().join("deep/out");
    let (ok, o, e) = drsftp(&[
        "copy",
        "-r",
        "--json",
        "-p",
        "1",
        &format!("ftp://127.0.0.1:{port}/t"),
        out.to_str().unwrap(),
    ]);
    assert!(ok, "{o} {e}");
    let j = json_of(&o);
    assert_eq!(j["copied"].as_u64(), Some(2), "{j}");
    let mut want = BTreeMap::new();
    want.insert("good".to_string(), sha256(b"hello"));
    want.insert("sub".to_string(), "dir".to_string());
    want.insert("sub/fine".to_string(), sha256(b"fine"));
    assert_eq!(tree(&out), want);
    // Nothing above the destination: only deep/out exists under the temp dir's deep/, no escape, no victim.
    assert_eq!(
        tree(&dir.path().join("deep")).len(),
        4,
        "{:?}",
        tree(&dir.path().join("deep"))
    );
    assert!(
        !abs.exists()
            && !dir.path().join("deep/escape").exists()
            && !dir.path().join("up").exists()
    );
    assert!(e.contains("refused"), "{e}");
    assert_eq!(mtime(&out.join("good")), 1_577_836_800);
}

#[test]
fn tree_both_ways_against_globus_gridftp_server() {
    let Some((dir, srv)) = globus::start_in_tempdir(
        "tree_both_ways_against_globus_gridftp_server",
        "drsftp-it",
        &[],
    ) else {
        return;
    };
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    let want = make_tree(&src, false);
    // Globus serves anonymous users as `nobody`: the tree must be readable and the upload target writable.
    chmod(dir.path(), 0o777);
    // The server's home is `/`: URL paths are host paths.
    let url = |p: &Path| srv.url(p.to_str().unwrap());
    let down = dir.path().join("down");
    let j = copy_ok(
        &["-r", "-p", "4", &url(&src), down.to_str().unwrap()],
        "download from globus",
    );
    assert_eq!(tree(&down), want, "{j}");
    assert_eq!(j["verified"], true, "{j}");
    assert_eq!(mtime(&down.join("plain.bin")), 1_600_000_000);
    let up = dir.path().join("up");
    let j = copy_ok(
        &["-r", "-p", "4", down.to_str().unwrap(), &url(&up)],
        "upload to globus",
    );
    assert_eq!(tree(&up), want, "{j}");
    // Globus lists MFMT: the uploaded files keep their times, so an mtime rerun moves nothing.
    assert_eq!(
        mtime(&up.join("nested/a/b/deep.bin")),
        mtime(&src.join("nested/a/b/deep.bin"))
    );
    let j = copy_ok(&["-r", down.to_str().unwrap(), &url(&up)], "upload rerun");
    assert_eq!(
        (j["skipped"].as_u64(), j["bytes"].as_u64()),
        (Some(5), Some(0)),
        "{j}"
    );
    srv.settle();
}

#[test]
fn a_server_restarted_mid_job_is_retried() {
    let dir = open_tempdir();
    let root = dir.path().join("root");
    let n = 150;
    std::fs::create_dir_all(root.join("t")).unwrap();
    for i in 0..n {
        random_file(&root.join(format!("t/f{i:03}.bin")), 256 << 10, 1000 + i);
    }
    let port = drsftp_testkit::server::free_port();
    let listen = format!("127.0.0.1:{port}");
    let srv = drsftp_serve(Command::new(bin()), &listen, &root, &[]);
    let out = dir.path().join("out");
    let (url, out_s) = (srv.url("/t"), out.to_str().unwrap().to_string());
    let client = std::thread::spawn(move || {
        drsftp(&[
            "copy",
            "-r",
            "--json",
            "--concurrency",
            "1",
            "--retries",
            "5",
            &url,
            &out_s,
        ])
    });
    let count = complete_files;
    let deadline = Instant::now() + Duration::from_secs(60);
    while count(&out) < 10 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    // Killed by PID mid-job; back on the same port 300 ms later.
    let at_kill = count(&out);
    drop(srv);
    std::thread::sleep(Duration::from_millis(300));
    let _srv = drsftp_serve(Command::new(bin()), &listen, &root, &[]);
    let (ok, o, e) = client.join().unwrap();
    assert!(ok, "{o} {e}");
    let j = json_of(&o);
    assert_eq!(j["copied"].as_u64(), Some(n), "{j}");
    assert_eq!(tree(&out), tree(&root.join("t")));
    let retried = records(&j)
        .iter()
        .filter(|r| r["attempts"].as_u64() > Some(1))
        .count();
    // Unless the whole job beat the kill, the file in flight (or the next one, on the dead session) needed
    // another attempt.
    assert!(
        retried > 0 || at_kill == n as usize,
        "no file was retried: {j}"
    );
}

#[test]
fn a_killed_upload_is_finished_by_a_rerun() {
    let dir = open_tempdir();
    let (src, root) = (dir.path().join("src"), dir.path().join("root"));
    std::fs::create_dir_all(&root).unwrap();
    let n = 120;
    for i in 0..n {
        let p = src.join(format!("d{}/f{i:03}.bin", i % 3));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        random_file(&p, 256 << 10, 5000 + i);
    }
    let srv = drsftp_server(&root, &[]);
    let up = root.join("up");
    let mut child = Command::new(bin())
        .args([
            "copy",
            "-r",
            "--quiet",
            "--concurrency",
            "1",
            src.to_str().unwrap(),
            &srv.url("/up"),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while complete_files(&up) < 10 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before = complete_files(&up);
    assert!(before >= 10, "{before} files before the kill");
    let j = copy_ok(
        &["-r", src.to_str().unwrap(), &srv.url("/up")],
        "upload rerun",
    );
    let skipped = j["skipped"].as_u64().unwrap() as usize;
    assert!(
        skipped + 1 >= before,
        "skipped {skipped}, {before} were there: {j}"
    );
    assert_eq!(
        j["copied"].as_u64().unwrap() as usize,
        n as usize - skipped,
        "{j}"
    );
    // The server's part file of the killed upload is gone once the server notices the closed connection.
    let deadline = Instant::now() + Duration::from_secs(10);
    while tree(&up) != tree(&src) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(tree(&up), tree(&src), "after the rerun");
}
