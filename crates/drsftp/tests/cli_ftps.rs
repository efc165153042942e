//! `drsftp copy`/`ls` ⇄ `drsftp serve` over explicit FTPS in stream mode and MODE E (`-p 8`, `-p auto`, every
//! data connection TLS and resuming the control session): trust by `--cacert` and by
//! `--tls-fingerprint`; `-p 1` and `-p 4` of a file ending mid-record, CRC32C equal at both ends; a wrong fingerprint or an untrusted CA fails with a clear error before any USER goes
//! out; `--tls require` against a server without TLS fails; download and upload with a plain FTPS server
//! (pyftpdlib); a third-party copy from a TLS source without SSCN
//! (pyftpdlib) fails rather than going cleartext; and, as root with tcpdump, a capture of a `PROT P`
//! download with a password login holds neither the file's marker string nor the password.

mod common;
mod tlsfix;

use common::*;
use std::time::Duration;
use tlsfix::{url, TlsServer, PASSWORD, USER};

const T: Duration = Duration::from_secs(90);

/// `drsftp` with its control dialogue logged, within [`T`].
fn drsftp(args: &[&str]) -> (bool, String, String) {
    drsftp_logged(args, T)
}

#[test]
fn copy_both_ways_with_cacert_and_fingerprint() {
    let s = tlsfix::serve(true);
    let want = random_file(&s.root.join("data.bin"), 3 << 20, 31);
    let ca = s.pki.ca.display().to_string();
    for trust in [
        vec!["--cacert", ca.as_str()],
        vec!["--tls-fingerprint", s.pki.fingerprint.as_str()],
    ] {
        let dl = s.dir.path().join("dl.bin");
        let _ = std::fs::remove_file(&dl);
        let mut a = vec!["copy", "--quiet", "--tls", "require"];
        a.extend(&trust);
        let src = url(&s, "/data.bin");
        let dst = dl.display().to_string();
        a.extend([src.as_str(), dst.as_str()]);
        let (ok, out, err) = drsftp(&a);
        assert!(ok, "download {trust:?}: {out} {err}\n{}", s.srv.log_text());
        assert_eq!(sha256_file(&dl), want);
        assert!(
            err.contains("-> AUTH TLS") && err.contains("-> PROT P"),
            "{err}"
        );

        let mut a = vec!["copy", "--quiet"];
        a.extend(&trust);
        let up = url(&s, "/up.bin");
        a.extend([dst.as_str(), up.as_str()]);
        let (ok, out, err) = drsftp(&a);
        assert!(ok, "upload {trust:?}: {out} {err}\n{}", s.srv.log_text());
        assert_eq!(sha256_file(&s.root.join("up.bin")), want);
    }
    let (ok, out, err) = drsftp(&["ls", "--cacert", &ca, &url(&s, "/")]);
    assert!(ok && out.contains("data.bin"), "ls: {out} {err}");
}

/// MODE E under PROT P: `-p 8` and `-p auto`, download and upload, byte-identical (the client also compares the
/// server's CKSM); with `--tls-required` a cleartext data connection would get 521, so these ran under TLS, and
/// the client's log shows its data handshakes resuming the control session.
#[test]
fn mode_e_parallel_and_auto_both_ways() {
    let s = tlsfix::serve(true);
    let want = random_file(&s.root.join("data.bin"), 24 << 20, 34);
    let ca = s.pki.ca.display().to_string();
    for p in ["8", "auto"] {
        let dl = s.dir.path().join("dl.bin");
        let _ = std::fs::remove_file(&dl);
        let (src, dst) = (url(&s, "/data.bin"), dl.display().to_string());
        let (ok, out, err) = drsftp(&[
            "copy", "--quiet", "--tls", "require", "--cacert", &ca, "-p", p, &src, &dst,
        ]);
        assert!(ok, "download -p {p}: {out} {err}\n{}", s.srv.log_text());
        assert_eq!(sha256_file(&dl), want, "download -p {p}");
        assert!(
            err.contains("-> PROT P") && err.contains("-> MODE E"),
            "{err}"
        );
        let resumed = err
            .matches("TLS client handshake: Some(TLSv1_3) Some(Resumed)")
            .count();
        if p == "8" {
            assert!(err.contains("OPTS RETR Parallelism=8"), "{err}");
            assert!(resumed >= 8, "{resumed} resumed data handshakes: {err}");
        } else {
            assert!(resumed >= 1, "{resumed} resumed data handshakes: {err}");
        }

        let up = url(&s, &format!("/up-{p}.bin"));
        let (ok, out, err) = drsftp(&[
            "copy", "--quiet", "--tls", "require", "--cacert", &ca, "-p", p, &dst, &up,
        ]);
        assert!(ok, "upload -p {p}: {out} {err}\n{}", s.srv.log_text());
        assert_eq!(
            sha256_file(&s.root.join(format!("up-{p}.bin"))),
            want,
            "upload -p {p}"
        );
        assert!(err.contains("-> MODE E"), "{err}");
        let _ = std::fs::remove_file(&dl);
    }
}

/// A TLS receiver writes the records it opened in place straight to the file (`pwritev` of their slots): `-p 1`
/// (stream mode) and `-p 4` (MODE E) downloads and uploads of a file ending mid-record arrive byte-identical, and
/// the CRC32C the receiving end computed from those slots equals the sender's (the client compares it with the
/// server's `CKSM CRC32C` and fails the copy on a mismatch).
#[test]
fn records_opened_in_place_arrive_whole_with_equal_crc() {
    let s = tlsfix::serve(true);
    let want = random_file(&s.root.join("odd.bin"), (9 << 20) + 16_381, 35);
    let ca = s.pki.ca.display().to_string();
    for p in ["1", "4"] {
        let dl = s.dir.path().join(format!("odd-{p}.bin"));
        let (src, dst) = (url(&s, "/odd.bin"), dl.display().to_string());
        let (ok, out, err) = drsftp(&[
            "copy", "--quiet", "--tls", "require", "--cacert", &ca, "-p", p, &src, &dst,
        ]);
        assert!(ok, "download -p {p}: {out} {err}\n{}", s.srv.log_text());
        assert_eq!(sha256_file(&dl), want, "download -p {p}");
        assert!(
            err.contains("-> PROT P") && err.contains("-> CKSM CRC32C"),
            "{err}"
        );
        assert_eq!(err.contains("-> MODE E"), p == "4", "-p {p}: {err}");

        let up = url(&s, &format!("/odd-up-{p}.bin"));
        let (ok, out, err) = drsftp(&[
            "copy", "--quiet", "--tls", "require", "--cacert", &ca, "-p", p, &dst, &up,
        ]);
        assert!(ok, "upload -p {p}: {out} {err}\n{}", s.srv.log_text());
        assert_eq!(
            sha256_file(&s.root.join(format!("odd-up-{p}.bin"))),
            want,
            "upload -p {p}"
        );
        assert!(err.contains("-> CKSM CRC32C"), "upload -p {p}: {err}");
    }
}

/// A second TLS server (same PKI, its own root) for third-party copies.
fn second_server(s: &TlsServer, required: bool) -> (std::path::PathBuf, ServerProcess) {
    let root = s.dir.path().join("root2");
    std::fs::create_dir_all(&root).unwrap();
    let args = tlsfix::serve_args(&s.pki, required);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let srv = drsftp_server(&root, &args);
    (root, srv)
}

/// `drsftp copy ftp://A/f ftp://B/f` between two TLS servers that both refuse cleartext data (`--tls-required`:
/// a data connection without `PROT P` gets 521): the copy works in stream mode and MODE E -p 4, so the
/// server-to-server channel was TLS, with the source as TLS client (`SSCN ON <destination's fingerprint>`).
#[test]
fn third_party_copy_is_tls_end_to_end() {
    let s = tlsfix::serve(true);
    let (root2, b) = second_server(&s, true);
    let want = random_file(&s.root.join("data.bin"), 8 << 20, 35);
    let ca = s.pki.ca.display().to_string();
    let fp = s.pki.fingerprint.replace(':', "");
    for p in ["1", "4"] {
        let dst = format!("ftp://{USER}:{PASSWORD}@{}/tp-{p}.bin", b.authority());
        let (ok, out, err) = drsftp(&[
            "copy",
            "--quiet",
            "--tls",
            "require",
            "--cacert",
            &ca,
            "-p",
            p,
            &url(&s, "/data.bin"),
            &dst,
        ]);
        assert!(
            ok,
            "-p {p}: {out} {err}\n{}\n{}",
            s.srv.log_text(),
            b.log_text()
        );
        assert_eq!(
            sha256_file(&root2.join(format!("tp-{p}.bin"))),
            want,
            "-p {p}"
        );
        assert!(err.contains(&format!("-> SSCN ON {fp}")), "{err}");
    }
    // Cleartext is no way around it: both servers refuse data without PROT P, and nothing arrives.
    let dst = format!("ftp://{USER}:{PASSWORD}@{}/never.bin", b.authority());
    let (ok, _, err) = drsftp(&[
        "copy",
        "--quiet",
        "--tls",
        "off",
        &url(&s, "/data.bin"),
        &dst,
    ]);
    assert!(!ok, "--tls off against two --tls-required servers: {err}");
    assert!(!root2.join("never.bin").exists());
}

/// A plain FTPS server that is not drsftp (pyftpdlib: stream mode only, TYPE A until told otherwise, so SIZE is
/// refused before `TYPE I`, no MODE E): download and upload with the default `-p auto` under `--tls require`
/// with the CA, byte-identical, PROT P, in stream mode.
#[test]
fn plain_ftps_server_download_and_upload() {
    let s = tlsfix::serve(false);
    let root = s.dir.path().join("py");
    std::fs::create_dir_all(&root).unwrap();
    let Some(py) = tlsfix::pyftpdlib("plain_ftps_server_download_and_upload", &s.pki, &root) else {
        return;
    };
    let want = random_file(&root.join("data.bin"), 2 << 20, 37);
    let ca = s.pki.ca.display().to_string();
    let base = format!("ftp://{USER}:{PASSWORD}@{}", py.authority());
    let dl = s.dir.path().join("dl.bin");
    let (ok, out, err) = drsftp(&[
        "copy",
        "--tls",
        "require",
        "--cacert",
        &ca,
        &format!("{base}/data.bin"),
        dl.to_str().unwrap(),
    ]);
    assert!(ok, "download: {out} {err}\n{}", py.log_text());
    assert_eq!(sha256_file(&dl), want);
    let size = err.find("-> SIZE").expect("SIZE was asked");
    let type_i = err.find("-> TYPE I").expect("TYPE I was sent");
    assert!(type_i < size, "SIZE went out before TYPE I:\n{err}");
    assert!(err.contains("-> PROT P"), "{err}");
    // No FEAT PARALLEL: the default -p auto stays in stream mode rather than failing on MODE E.
    assert!(!err.contains("-> MODE E"), "{err}");
    let (ok, out, err) = drsftp(&[
        "copy",
        "--tls",
        "require",
        "--cacert",
        &ca,
        dl.to_str().unwrap(),
        &format!("{base}/up.bin"),
    ]);
    assert!(ok, "upload: {out} {err}\n{}", py.log_text());
    assert!(!err.contains("-> MODE E"), "{err}");
    assert_eq!(sha256_file(&root.join("up.bin")), want);
}

/// A TLS source without SSCN (pyftpdlib) under `--tls require`, server to server: the source cannot be the TLS
/// client of the data channel, so the copy must fail with a clear error instead of falling back to `PROT C`,
/// although both servers would take cleartext data. The source never sees a RETR and no destination file appears.
#[test]
fn third_party_tls_source_without_sscn_fails_and_never_goes_cleartext() {
    let s = tlsfix::serve(false);
    let src_root = s.dir.path().join("py");
    std::fs::create_dir_all(&src_root).unwrap();
    let Some(py) = tlsfix::pyftpdlib(
        "third_party_tls_source_without_sscn_fails_and_never_goes_cleartext",
        &s.pki,
        &src_root,
    ) else {
        return;
    };
    random_file(&src_root.join("data.bin"), 1 << 20, 36);
    let ca = s.pki.ca.display().to_string();
    let src = format!("ftp://{USER}:{PASSWORD}@{}/data.bin", py.authority());
    let dst_file = s.root.join("never.bin");
    for p in ["1", "4"] {
        let (ok, out, err) = drsftp(&[
            "copy",
            "--tls",
            "require",
            "--cacert",
            &ca,
            "-p",
            p,
            &src,
            &url(&s, "/never.bin"),
        ]);
        let logs = format!("{}\n{}", py.log_text(), s.srv.log_text());
        assert!(!ok, "-p {p}: the copy succeeded: {out} {err}\n{logs}");
        assert!(err.contains("-> SSCN ON"), "-p {p}: {err}");
        assert!(
            err.contains("SSCN") && err.contains("cleartext; refusing"),
            "-p {p}: no clear error: {err}"
        );
        assert!(!dst_file.exists(), "-p {p}: data reached the destination");
        assert!(!py.log_text().contains("RETR"), "-p {p}: {logs}");
        // No cleartext fallback on the way: PROT C never went to either server.
        assert!(!err.contains("-> PROT C"), "-p {p}: {err}");
    }
}

#[test]
fn untrusted_certificate_fails_before_login() {
    let s = tlsfix::serve(false);
    random_file(&s.root.join("data.bin"), 1000, 32);
    let wrong = "00:".repeat(31) + "00";
    let other = s.pki.other_ca.display().to_string();
    let dst = s.dir.path().join("never.bin").display().to_string();
    for trust in [
        vec!["--tls-fingerprint", wrong.as_str()],
        vec!["--cacert", other.as_str()],
        // The built-in roots do not know the test CA either, and `auto` does not fall back to cleartext.
        vec![],
    ] {
        let mut a = vec!["copy", "--quiet"];
        a.extend(&trust);
        let src = url(&s, "/data.bin");
        a.extend([src.as_str(), dst.as_str()]);
        let (ok, out, err) = drsftp(&a);
        assert!(!ok, "{trust:?} succeeded: {out}");
        assert!(
            err.contains("TLS: handshake with the server failed"),
            "{trust:?}: {err}"
        );
        assert!(
            !err.contains("-> USER"),
            "USER sent after a failed handshake: {err}"
        );
        assert!(!std::path::Path::new(&dst).exists());
    }
}

#[test]
fn tls_require_against_a_cleartext_server_fails() {
    let dir = open_tempdir();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    random_file(&root.join("data.bin"), 1000, 33);
    let srv = drsftp_server(&root, &[]);
    let dst = dir.path().join("x.bin").display().to_string();
    let src = srv.url("/data.bin");
    let (ok, _, err) = drsftp(&["copy", "--quiet", "--tls", "require", &src, &dst]);
    assert!(!ok);
    assert!(err.contains("does not offer TLS"), "{err}");
    assert!(!err.contains("-> USER"), "{err}");
    // `auto` (the default) against the same server: plain FTP, as before.
    let (ok, out, err) = drsftp(&["copy", "--quiet", &src, &dst]);
    assert!(ok, "{out} {err}");
}

#[test]
fn capture_shows_neither_password_nor_data() {
    let s = tlsfix::serve(true);
    let (root2, b) = second_server(&s, true);
    const MARKER: &str = "DRSFTP-MARKER-5f0c2e7a-plaintext";
    let mut body = Vec::new();
    for i in 0..20_000 {
        body.extend_from_slice(format!("{MARKER} line {i}\n").as_bytes());
    }
    std::fs::write(s.root.join("marked.txt"), &body).unwrap();
    let Some(dump) = tlsfix::Capture::start(
        "capture_shows_neither_password_nor_data",
        &s.dir.path().join("ftps.pcap"),
    ) else {
        return;
    };
    let dl = s.dir.path().join("marked.dl");
    let ca = s.pki.ca.display().to_string();
    // Stream mode (-p 1), then MODE E on 8 TLS connections both ways (the upload puts the marker on the wire
    // from the client's side).
    let (src, dst) = (url(&s, "/marked.txt"), dl.display().to_string());
    let mut runs = vec![];
    for p in ["1", "8"] {
        runs.push(drsftp(&[
            "copy", "--quiet", "--cacert", &ca, "-p", p, &src, &dst,
        ]));
        assert_eq!(std::fs::read(&dl).unwrap(), body, "-p {p}");
    }
    runs.push(drsftp(&[
        "copy",
        "--quiet",
        "--cacert",
        &ca,
        "-p",
        "8",
        &dst,
        &url(&s, "/marked.up"),
    ]));
    // Server to server, MODE E -p 4: the source is the TLS client (SSCN), the destination the TLS server.
    let tp = format!("ftp://{USER}:{PASSWORD}@{}/marked.tp", b.authority());
    runs.push(drsftp(&[
        "copy", "--quiet", "--cacert", &ca, "-p", "4", &src, &tp,
    ]));
    let (ok, out, err) = runs
        .iter()
        .fold((true, String::new(), String::new()), |a, r| {
            (a.0 && r.0, a.1 + &r.1, a.2 + &r.2)
        });
    assert!(ok, "copy: {out} {err}\n{}", s.srv.log_text());
    assert!(err.contains("-> MODE E"), "{err}");
    assert_eq!(std::fs::read(&dl).unwrap(), body);
    assert_eq!(std::fs::read(s.root.join("marked.up")).unwrap(), body);
    assert_eq!(std::fs::read(root2.join("marked.tp")).unwrap(), body);
    assert!(err.contains("-> SSCN ON"), "{err}");
    // The copies' bytes went through the capture: four times the file's size, and more.
    let cap = dump.finish(4 * body.len());
    let find = |needle: &[u8]| cap.windows(needle.len()).any(|w| w == needle);
    assert!(
        !find(MARKER.as_bytes()),
        "the file's marker is in the capture"
    );
    assert!(!find(PASSWORD.as_bytes()), "the password is in the capture");
    // Sanity: what must be in cleartext is (the greeting and AUTH TLS precede the handshake).
    assert!(
        find(b"AUTH TLS"),
        "no AUTH TLS in the capture: was anything captured?"
    );
}
