//! Plain FTP clients against `drsftp serve`: curl, lftp and Python's ftplib list, download and upload, each
//! checked by SHA-256 (and listings by the names they show).

mod common;

use common::*;
use std::process::Command;
use std::time::Duration;

const T: Duration = Duration::from_secs(90);

struct Setup {
    dir: tempfile::TempDir,
    root: std::path::PathBuf,
    want: String,
    local: std::path::PathBuf,
    local_sha: String,
    srv: ServerProcess,
}

fn setup() -> Setup {
    let dir = open_tempdir();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    let want = random_file(&root.join("data.bin"), 5 << 20, 11);
    std::fs::write(root.join("sub/note.txt"), b"hello\nworld\n").unwrap();
    let local = dir.path().join("local.bin");
    let local_sha = random_file(&local, 3 << 20, 12);
    let srv = drsftp_server(&root, &[]);
    Setup {
        dir,
        root,
        want,
        local,
        local_sha,
        srv,
    }
}

#[test]
fn curl_list_download_upload() {
    if !have("curl", "curl_list_download_upload") {
        return;
    }
    let s = setup();
    let base = s.srv.url("/");
    let (ok, out, err) = run(Command::new("curl").args(["-sS", "--list-only", &base]), T);
    assert!(ok, "curl list: {err}\n{}", s.srv.log_text());
    let names: Vec<&str> = out.lines().map(str::trim).collect();
    assert!(
        names.contains(&"data.bin") && names.contains(&"sub"),
        "{names:?}"
    );

    let (ok, out, err) = run(Command::new("curl").args(["-sS", &base]), T);
    assert!(ok && out.contains("data.bin"), "curl LIST: {out} {err}");

    let dl = s.dir.path().join("curl.bin");
    let url = s.srv.url("/data.bin");
    let (ok, _, err) = run(
        Command::new("curl").args(["-sS", "-o"]).arg(&dl).arg(&url),
        T,
    );
    assert!(ok, "curl download: {err}\n{}", s.srv.log_text());
    assert_eq!(sha256_file(&dl), s.want);

    let up = s.srv.url("/sub/curl-up.bin");
    let (ok, _, err) = run(
        Command::new("curl")
            .args(["-sS", "-T"])
            .arg(&s.local)
            .arg(&up),
        T,
    );
    assert!(ok, "curl upload: {err}\n{}", s.srv.log_text());
    assert_eq!(sha256_file(&s.root.join("sub/curl-up.bin")), s.local_sha);
}

#[test]
fn lftp_list_download_upload() {
    if !have("lftp", "lftp_list_download_upload") {
        return;
    }
    let s = setup();
    let dl = s.dir.path().join("lftp.bin");
    let script = format!(
        "set net:max-retries 1; set net:timeout 20; set ftp:passive-mode on; \
         open -u anonymous,test@ {addr}; cls -1 /; get /data.bin -o {dl}; put {local} -o /lftp-up.bin; \
         cls -1 /sub; bye",
        addr = s.srv.url(""),
        dl = dl.display(),
        local = s.local.display()
    );
    let (ok, out, err) = run(Command::new("lftp").args(["-c", &script]), T);
    assert!(ok, "lftp: {out} {err}\n{}", s.srv.log_text());
    assert!(
        out.lines()
            .any(|l| l.trim().trim_start_matches('/') == "data.bin"),
        "{out}"
    );
    assert!(out.contains("note.txt"), "{out}");
    assert_eq!(sha256_file(&dl), s.want);
    assert_eq!(sha256_file(&s.root.join("lftp-up.bin")), s.local_sha);
}

#[test]
fn ftplib_list_download_upload() {
    if !have("python3", "ftplib_list_download_upload") {
        return;
    }
    let s = setup();
    let dl = s.dir.path().join("ftplib.bin");
    let py = r#"
import ftplib, sys, hashlib
host, port, dl, local = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
f = ftplib.FTP()
f.connect(host, port, timeout=30)
f.login()
names = f.nlst()
assert 'data.bin' in names and 'sub' in names, names
facts = dict(f.mlsd())
assert facts['data.bin']['type'] == 'file' and int(facts['data.bin']['size']) == 5 << 20, facts
assert facts['sub']['type'] == 'dir', facts
lines = []
f.retrlines('LIST', lines.append)
assert any(l.endswith(' data.bin') for l in lines), lines
assert f.size('data.bin') == 5 << 20
with open(dl, 'wb') as out:
    f.retrbinary('RETR data.bin', out.write)
f.cwd('sub')
assert f.pwd() == '/sub', f.pwd()
with open(local, 'rb') as src:
    f.storbinary('STOR ftplib-up.bin', src)
f.mkd('/newdir')
f.rename('/sub/ftplib-up.bin', '/newdir/moved.bin')
try:
    f.retrbinary('RETR /no/such/file', lambda b: None)
    raise SystemExit('missing file did not fail')
except ftplib.error_perm as e:
    assert str(e).startswith('550'), e
f.quit()
print('ok')
"#;
    let port = s.srv.addr.port().to_string();
    let (ok, out, err) = run(
        Command::new("python3")
            .args(["-c", py, "127.0.0.1", &port])
            .arg(&dl)
            .arg(&s.local),
        T,
    );
    assert!(
        ok && out.trim() == "ok",
        "ftplib: {out} {err}\n{}",
        s.srv.log_text()
    );
    assert_eq!(sha256_file(&dl), s.want);
    assert_eq!(sha256_file(&s.root.join("newdir/moved.bin")), s.local_sha);
}
