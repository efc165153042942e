//! globus-url-copy (Debian's globus-gass-copy-progs) against `drsftp serve`: downloads and uploads in stream mode
//! and with `-p 4` (MODE E, the server connects for downloads), and a partial transfer (`-off/-len` → ERET/ESTO),
//! each checked by SHA-256.

mod common;

use common::*;
use std::process::Command;
use std::time::Duration;

const T: Duration = Duration::from_secs(120);

fn guc(args: &[&str]) -> (bool, String, String) {
    run(Command::new("globus-url-copy").args(args), T)
}

#[test]
fn guc_download_stream_and_parallel() {
    if !have("globus-url-copy", "guc_download_stream_and_parallel") {
        return;
    }
    let dir = open_tempdir();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    chmod(&root, 0o777);
    let want = random_file(&root.join("src.bin"), 24 << 20, 1);
    let srv = drsftp_server(&root, &[]);
    for (name, extra) in [("stream", vec![]), ("p4", vec!["-p", "4"])] {
        let out = dir.path().join(format!("out-{name}"));
        let dst = format!("file://{}", out.display());
        let mut args: Vec<&str> = extra.clone();
        let src = srv.url("/src.bin");
        args.extend([src.as_str(), dst.as_str()]);
        let (ok, o, e) = guc(&args);
        assert!(
            ok,
            "globus-url-copy {args:?} failed: {o} {e}\nserver log:\n{}",
            srv.log_text()
        );
        assert_eq!(sha256_file(&out), want, "{name}");
    }
}

#[test]
fn guc_upload_stream_and_parallel() {
    if !have("globus-url-copy", "guc_upload_stream_and_parallel") {
        return;
    }
    let dir = open_tempdir();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let src = dir.path().join("local.bin");
    let want = random_file(&src, 20 << 20, 2);
    let srv = drsftp_server(&root, &[]);
    for (name, extra) in [("stream", vec![]), ("p4", vec!["-p", "4"])] {
        let dst = srv.url(&format!("/up-{name}.bin"));
        let from = format!("file://{}", src.display());
        let mut args: Vec<&str> = extra.clone();
        args.extend([from.as_str(), dst.as_str()]);
        let (ok, o, e) = guc(&args);
        assert!(
            ok,
            "globus-url-copy {args:?} failed: {o} {e}\nserver log:\n{}",
            srv.log_text()
        );
        assert_eq!(
            sha256_file(&root.join(format!("up-{name}.bin"))),
            want,
            "{name}"
        );
    }
}

#[test]
fn guc_partial_download_and_upload() {
    if !have("globus-url-copy", "guc_partial_download_and_upload") {
        return;
    }
    let dir = open_tempdir();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    random_file(&root.join("src.bin"), 4 << 20, 3);
    let whole = std::fs::read(root.join("src.bin")).unwrap();
    let srv = drsftp_server(&root, &[]);
    let (off, len) = (1_000_000usize, 600_000usize);

    // Download a section: ERET P off len; the bytes land at the same offset of the local file.
    let out = dir.path().join("part.bin");
    let dst = format!("file://{}", out.display());
    let src = srv.url("/src.bin");
    let (o_s, l_s) = (off.to_string(), len.to_string());
    let (ok, o, e) = guc(&["-off", &o_s, "-len", &l_s, &src, &dst]);
    assert!(ok, "partial download: {o} {e}\n{}", srv.log_text());
    let got = std::fs::read(&out).unwrap();
    assert!(got.len() >= off + len, "local file {} bytes", got.len());
    assert_eq!(sha256(&got[off..off + len]), sha256(&whole[off..off + len]));

    // Upload a section: ESTO A off; only that section is written on the server.
    let local = dir.path().join("local.bin");
    random_file(&local, 2 << 20, 4);
    let lbytes = std::fs::read(&local).unwrap();
    let from = format!("file://{}", local.display());
    let to = srv.url("/partial-up.bin");
    let (ok, o, e) = guc(&["-off", &o_s, "-len", &l_s, &from, &to]);
    assert!(ok, "partial upload: {o} {e}\n{}", srv.log_text());
    let server_side = std::fs::read(root.join("partial-up.bin")).unwrap();
    assert_eq!(server_side.len(), off + len);
    assert_eq!(sha256(&server_side[off..]), sha256(&lbytes[off..off + len]));
}
