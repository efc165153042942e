//! Explicit FTPS (RFC 4217) against `drsftp serve --tls-cert --tls-key --tls-required`: curl, lftp and Python's
//! `ftplib.FTP_TLS` log in over TLS and download and upload with `PROT P` (checked by SHA-256; ftplib in active
//! mode too, where the server connects but is still the TLS server), and a raw
//! socket shows what a cleartext client gets: `530` for USER, `536` for `PROT C`, nothing read after AUTH.

mod common;
mod tlsfix;

use common::*;
use std::io::Write;
use std::process::Command;
use std::time::Duration;
use tlsfix::{Pki, PASSWORD, USER};

const T: Duration = Duration::from_secs(90);

struct Setup {
    dir: tempfile::TempDir,
    root: std::path::PathBuf,
    pki: Pki,
    want: String,
    local: std::path::PathBuf,
    local_sha: String,
    srv: ServerProcess,
}

fn setup() -> Setup {
    let dir = open_tempdir();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let want = random_file(&root.join("data.bin"), 3 << 20, 21);
    let local = dir.path().join("local.bin");
    let local_sha = random_file(&local, 2 << 20, 22);
    let pki = tlsfix::make(dir.path());
    let args = tlsfix::serve_args(&pki, true);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let srv = drsftp_server(&root, &args);
    Setup {
        dir,
        root,
        pki,
        want,
        local,
        local_sha,
        srv,
    }
}

#[test]
fn curl_ftps_download_upload() {
    if !have("curl", "curl_ftps_download_upload") {
        return;
    }
    let s = setup();
    let user = format!("{USER}:{PASSWORD}");
    let dl = s.dir.path().join("curl.bin");
    let (ok, _, err) = run(
        Command::new("curl")
            .args(["-sS", "--ssl-reqd", "--cacert"])
            .arg(&s.pki.ca)
            .args(["-u", &user, "-o"])
            .arg(&dl)
            .arg(s.srv.url("/data.bin")),
        T,
    );
    assert!(ok, "curl download: {err}\n{}", s.srv.log_text());
    assert_eq!(sha256_file(&dl), s.want);
    let (ok, _, err) = run(
        Command::new("curl")
            .args(["-sS", "--ssl-reqd", "--cacert"])
            .arg(&s.pki.ca)
            .args(["-u", &user, "-T"])
            .arg(&s.local)
            .arg(s.srv.url("/curl-up.bin")),
        T,
    );
    assert!(ok, "curl upload: {err}\n{}", s.srv.log_text());
    assert_eq!(sha256_file(&s.root.join("curl-up.bin")), s.local_sha);
    // A CA curl does not know: the handshake fails, and curl does not carry on in cleartext.
    let (ok, _, err) = run(
        Command::new("curl")
            .args(["-sS", "--ssl-reqd", "--cacert"])
            .arg(&s.pki.other_ca)
            .args(["-u", &user, "-o"])
            .arg(s.dir.path().join("never.bin"))
            .arg(s.srv.url("/data.bin")),
        T,
    );
    assert!(!ok, "curl trusted an unrelated CA: {err}");
}

#[test]
fn lftp_ftps_download_upload() {
    if !have("lftp", "lftp_ftps_download_upload") {
        return;
    }
    let s = setup();
    let dl = s.dir.path().join("lftp.bin");
    let script = format!(
        "set net:max-retries 1; set net:timeout 20; set ftp:passive-mode on; set ftp:ssl-force true; \
         set ftp:ssl-protect-data true; set ssl:ca-file {ca}; set ssl:verify-certificate true; \
         open -u {USER},{PASSWORD} {addr}; get /data.bin -o {dl}; put {local} -o /lftp-up.bin; bye",
        ca = s.pki.ca.display(),
        addr = s.srv.url(""),
        dl = dl.display(),
        local = s.local.display()
    );
    let (ok, out, err) = run(Command::new("lftp").args(["-c", &script]), T);
    assert!(ok, "lftp: {out} {err}\n{}", s.srv.log_text());
    assert_eq!(sha256_file(&dl), s.want);
    assert_eq!(sha256_file(&s.root.join("lftp-up.bin")), s.local_sha);
}

#[test]
fn ftplib_ftps_download_upload() {
    if !have("python3", "ftplib_ftps_download_upload") {
        return;
    }
    let s = setup();
    let dl = s.dir.path().join("py.bin");
    let script = format!(
        r#"
import ftplib, ssl
ctx = ssl.create_default_context(cafile={ca:?})
f = ftplib.FTP_TLS(context=ctx, timeout=30)
f.connect("127.0.0.1", {port})
f.login({USER:?}, {PASSWORD:?})
f.prot_p()
with open({dl:?}, "wb") as out:
    f.retrbinary("RETR /data.bin", out.write)
with open({local:?}, "rb") as src:
    f.storbinary("STOR /py-up.bin", src)
# Active mode: the server opens the TCP connection and is still the TLS server (RFC 4217 section 7).
f.set_pasv(False)
with open({dl:?} + ".active", "wb") as out:
    f.retrbinary("RETR /data.bin", out.write)
names = f.nlst("/")
assert "data.bin" in [n.rsplit("/", 1)[-1] for n in names], names
f.quit()
"#,
        ca = s.pki.ca.display().to_string(),
        port = s.srv.port(),
        dl = dl.display().to_string(),
        local = s.local.display().to_string(),
    );
    let (ok, out, err) = run(Command::new("python3").args(["-c", &script]), T);
    assert!(ok, "ftplib: {out} {err}\n{}", s.srv.log_text());
    assert_eq!(sha256_file(&dl), s.want);
    assert_eq!(sha256_file(&s.root.join("py-up.bin")), s.local_sha);
    assert_eq!(sha256_file(&dl.with_extension("bin.active")), s.want);
}

#[test]
fn tls_required_refuses_cleartext() {
    let s = setup();
    let mut raw = Raw::connect(s.srv.addr);
    let feat = raw.cmd("FEAT");
    assert!(feat.contains("\n AUTH TLS\n PBSZ\n PROT\n"), "{feat}");
    assert!(raw.cmd(&format!("USER {USER}")).starts_with("530 "));
    assert!(raw.cmd(&format!("PASS {PASSWORD}")).starts_with("530 "));
    assert!(raw.cmd("USER anonymous").starts_with("530 "));
    assert!(raw.cmd("PBSZ 0").starts_with("503 "));
    assert!(raw.cmd("PROT P").starts_with("503 "));
    // Bytes pipelined behind AUTH TLS are never acted on: the server closes instead of answering them.
    raw.send_raw(b"AUTH TLS\r\nUSER anonymous\r\n");
    let r = raw.reply();
    assert!(r.starts_with("421 "), "{r}");
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut raw.r, &mut rest);
    assert!(!rest.contains("331"), "{rest}");
    let _ = raw.w.flush();
}

#[test]
fn tls_required_refuses_prot_c() {
    if !have("python3", "tls_required_refuses_prot_c") {
        return;
    }
    let s = setup();
    // Python speaks the TLS part; the server must refuse PROT C (536) and a transfer before PROT P (521).
    let script = format!(
        r#"
import ftplib, ssl
ctx = ssl.create_default_context(cafile={ca:?})
f = ftplib.FTP_TLS(context=ctx, timeout=30)
f.connect("127.0.0.1", {port})
f.login({USER:?}, {PASSWORD:?})
print(f.sendcmd("PBSZ 0"))
try:
    f.sendcmd("PROT C")
    raise SystemExit("PROT C accepted")
except ftplib.error_perm as e:
    assert str(e).startswith("536"), e
try:
    f.retrbinary("RETR /data.bin", lambda b: None)
    raise SystemExit("cleartext RETR accepted")
except ftplib.error_perm as e:
    assert str(e).startswith("521"), e
f.quit()
"#,
        ca = s.pki.ca.display().to_string(),
        port = s.srv.port(),
    );
    let (ok, out, err) = run(Command::new("python3").args(["-c", &script]), T);
    assert!(ok, "ftplib: {out} {err}\n{}", s.srv.log_text());
}
