//! Hostile and broken input against `drsftp serve` over real loopback sockets: malformed, overlong and unknown
//! commands, bad PORT arguments, paths that try to leave the root (`..`, absolute host paths, symlinks pointing
//! out), absurd MODE E headers, short and killed uploads. Each gets a proper FTP error, no file that looks
//! complete is left behind, and the session and the server keep working.

mod common;

use common::*;
use std::io::Write;
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

fn code(r: &str) -> u16 {
    r[..3].parse().unwrap_or(0)
}

fn served() -> (tempfile::TempDir, std::path::PathBuf, ServerProcess) {
    let dir = open_tempdir();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("ok.txt"), b"fine\n").unwrap();
    std::os::unix::fs::symlink("/etc", root.join("etc-link")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", root.join("passwd-link")).unwrap();
    std::os::unix::fs::symlink("ok.txt", root.join("inside-link")).unwrap();
    let srv = drsftp_server(&root, &[]);
    (dir, root, srv)
}

#[test]
fn malformed_and_unknown_commands_get_errors_and_the_session_lives() {
    let (_d, _root, srv) = served();
    let mut c = Raw::connect(srv.addr);
    assert_eq!(code(&c.cmd("RETR ok.txt")), 530, "not logged in");
    c.login();
    assert_eq!(code(&c.cmd("XYZZY plugh")), 500);
    c.send_raw(b"\r\n"); // an empty line is ignored
    let long = format!("NOOP {}", "A".repeat(100_000));
    assert_eq!(code(&c.cmd(&long)), 500, "overlong line");
    assert_eq!(
        code(&c.cmd("NOOP")),
        200,
        "session still works after an overlong line"
    );
    for bad in [
        "PORT 1,2,3",
        "PORT 127,0,0,1,300,1",
        "PORT a,b,c,d,e,f",
        "PORT 127,0,0,1,0,21",
        "EPRT |9|127.0.0.1|5000|",
        "EPRT |1|not-an-ip|5000|",
    ] {
        let r = c.cmd(bad);
        assert!((500..600).contains(&code(&r)), "{bad} -> {r}");
    }
    for bad in ["TYPE Q", "MODE Z", "STRU R"] {
        let r = c.cmd(bad);
        assert!(matches!(code(&r), 501 | 504), "{bad} -> {r}");
    }
    assert_eq!(code(&c.cmd("REST -5")), 501);
    assert_eq!(
        code(&c.cmd("OPTS RETR Parallelism=4,4,4")),
        501,
        "OPTS needs the trailing ; (a syntax error: 501, as every malformed OPTS RETR)"
    );
    assert_eq!(code(&c.cmd("OPTS RETR Parallelism=4,4,4;")), 200);
    assert_eq!(code(&c.cmd("RNTO x")), 503, "RNTO without RNFR");
    assert_eq!(code(&c.cmd("CKSM NOPE 0 -1 ok.txt")), 504);
    // Binary garbage and a NUL inside a line.
    c.send_raw(b"\xff\xfe\x00\x01garbage\r\n");
    let r = c.reply();
    assert!((500..600).contains(&code(&r)), "{r}");
    assert_eq!(code(&c.cmd("NOOP")), 200);
    assert!(c.cmd("QUIT").starts_with("221"));
}

#[test]
fn paths_cannot_leave_the_root() {
    let (_d, root, srv) = served();
    let mut c = Raw::connect(srv.addr);
    c.login();
    assert_eq!(code(&c.cmd("SIZE ../../../../etc/passwd")), 550);
    assert_eq!(code(&c.cmd("SIZE /etc/passwd")), 550);
    assert_eq!(
        code(&c.cmd("SIZE passwd-link")),
        550,
        "symlink to a file outside"
    );
    assert_eq!(
        code(&c.cmd("SIZE etc-link/passwd")),
        550,
        "through a symlink to a dir outside"
    );
    assert_eq!(code(&c.cmd("CWD etc-link")), 550);
    assert_eq!(
        code(&c.cmd("SIZE inside-link")),
        213,
        "symlinks inside the root work"
    );
    assert_eq!(
        code(&c.cmd("CWD ../../..")),
        250,
        "climbing above / stays at /"
    );
    assert!(c.cmd("PWD").contains("\"/\""));
    assert_eq!(code(&c.cmd("MKD ../../../../drsftp-escape-probe")), 257);
    assert!(
        root.join("drsftp-escape-probe").is_dir(),
        "MKD lands inside the root"
    );
    assert!(!std::path::Path::new("/drsftp-escape-probe").exists());
    assert_eq!(code(&c.cmd("DELE etc-link/passwd")), 550);
    assert_eq!(code(&c.cmd("CKSM SHA256 0 -1 passwd-link")), 550);
}

/// Open a MODE E upload data connection: returns the data socket after `STOR name` was accepted.
fn mode_e_stor(c: &mut Raw, name: &str) -> TcpStream {
    assert_eq!(code(&c.cmd("TYPE I")), 200);
    assert_eq!(code(&c.cmd("MODE E")), 200);
    let r = c.cmd("PASV");
    let data = TcpStream::connect(pasv_addr(&r)).unwrap();
    c.send_raw(format!("STOR {name}\r\n").as_bytes());
    let r = c.reply();
    assert!(r.starts_with("150") || r.starts_with("125"), "{r}");
    data
}

fn header(desc: u8, count: u64, offset: u64) -> Vec<u8> {
    let mut h = vec![desc];
    h.extend_from_slice(&count.to_be_bytes());
    h.extend_from_slice(&offset.to_be_bytes());
    h
}

#[test]
fn absurd_mode_e_headers_fail_the_transfer_and_leave_no_file() {
    let (_d, root, srv) = served();
    let mut c = Raw::connect(srv.addr);
    c.login();
    for (name, bad) in [
        ("huge.bin", header(0, 1 << 62, 0)),
        ("wrap.bin", header(0, 100, u64::MAX - 10)),
        ("eof0.bin", header(0x48, 0, 0)),
        ("restart.bin", header(0x10, 8, 0)),
    ] {
        let mut data = mode_e_stor(&mut c, name);
        let _ = data.write_all(&bad);
        let r = c.final_reply();
        assert!((400..600).contains(&code(&r)), "{name}: {r}");
        drop(data);
        assert!(!root.join(name).exists(), "{name} left behind");
        assert_eq!(code(&c.cmd("NOOP")), 200);
    }
}

#[test]
fn short_and_killed_uploads_leave_no_file() {
    let (_d, root, srv) = served();
    let mut c = Raw::connect(srv.addr);
    c.login();
    // MODE E: a data block, then the connection dies before EOD/EOF.
    let mut data = mode_e_stor(&mut c, "killed.bin");
    let mut blk = header(0, 4, 0);
    blk.extend_from_slice(b"abcd");
    data.write_all(&blk).unwrap();
    drop(data);
    let r = c.final_reply();
    assert!((400..500).contains(&code(&r)), "{r}");
    assert!(!root.join("killed.bin").exists());

    // Stream mode with ALLO: fewer bytes than announced.
    assert_eq!(code(&c.cmd("MODE S")), 200);
    assert_eq!(code(&c.cmd("ALLO 1000")), 200);
    let r = c.cmd("PASV");
    let mut data = TcpStream::connect(pasv_addr(&r)).unwrap();
    c.send_raw(b"STOR short.bin\r\n");
    assert!(c.reply().starts_with("150"));
    data.write_all(b"only ten b").unwrap();
    drop(data);
    let r = c.final_reply();
    assert!((400..500).contains(&code(&r)), "{r}");
    assert!(!root.join("short.bin").exists());
    assert_eq!(code(&c.cmd("NOOP")), 200);

    // A client killed mid-transfer: the server keeps serving others and leaves nothing behind.
    let mut c2 = Raw::connect(srv.addr);
    c2.login();
    let mut d2 = mode_e_stor(&mut c2, "dead-client.bin");
    d2.write_all(&header(0, 1 << 20, 0)).unwrap();
    d2.write_all(&vec![7u8; 1000]).unwrap();
    drop(d2);
    drop(c2);
    let mut c3 = Raw::connect(srv.addr);
    c3.login();
    assert_eq!(code(&c3.cmd("SIZE ok.txt")), 213);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let leftovers: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("dead-client") || n.contains("drsftp-part"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// An upload that fills the server's disk fails with the server's reason (`452`, no space), not with the reset
/// data connection the client notices first, in stream mode and MODE E; no file appears under its name. The
/// server's root is a 4 MiB tmpfs in its own mount namespace (root only; skipped with the reason otherwise).
#[test]
fn an_upload_to_a_full_disk_reports_the_servers_reason() {
    const NAME: &str = "an_upload_to_a_full_disk_reports_the_servers_reason";
    if !is_root() {
        eprintln!("SKIPPED {NAME}: needs root (a tmpfs in a private mount namespace)");
        return;
    }
    let dir = open_tempdir();
    let root = dir.path().join("small");
    std::fs::create_dir_all(&root).unwrap();
    let src = dir.path().join("f.bin");
    random_file(&src, 12 << 20, 7);
    // `sh -c` mounts the tmpfs over the root, then becomes the server ($0 is the binary, "$@" what
    // drsftp_serve appends: serve --listen ... --root ...).
    let mut cmd = Command::new("unshare");
    cmd.args([
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        r#"mount -t tmpfs -o size=4m,mode=0777 tmpfs "$FULL_ROOT" && exec "$0" "$@""#,
    ])
    .arg(bin())
    .env("FULL_ROOT", &root);
    let srv = drsftp_serve(cmd, "127.0.0.1:0", &root, &[]);
    for p in ["1", "4"] {
        let url = srv.url(&format!("/f{p}.bin"));
        let (ok, o, e) = run(
            Command::new(bin()).args(["copy", "-p", p, "-q", src.to_str().unwrap(), &url]),
            Duration::from_secs(120),
        );
        assert!(!ok, "-p {p}: the upload must fail: {o} {e}");
        assert!(
            e.contains("452") && e.contains("no space"),
            "-p {p}: the error must be the server's: {e}\nserver log:\n{}",
            srv.log_tail()
        );
        let (ok, o, e) = run(
            Command::new(bin()).args(["ls", &srv.url("/")]),
            Duration::from_secs(60),
        );
        assert!(ok, "{e}");
        assert!(!o.contains(&format!("f{p}.bin")), "-p {p}: {o}");
    }
}

/// CPU seconds `pid` has used (user + system; /proc reports them in 1/100 s on Linux).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the parenthesised name: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0
}

/// A client that asks for the digest of a huge file and hangs up leaves no hashing behind, whether its CKSM ran
/// as a command or was started early behind a transfer (the prefetch): otherwise a few such clients, each gone in
/// a moment, keep every core and the disk busy for minutes.
#[test]
fn a_checksum_stops_when_its_client_hangs_up() {
    let (_d, root, srv) = served();
    // Sparse: its 64 GiB read as zeros from memory, and SHA-256 of them takes minutes.
    std::fs::File::create(root.join("huge"))
        .unwrap()
        .set_len(64 << 30)
        .unwrap();
    let started = |c: &mut Raw| {
        // Let the server take the command and start reading before the client goes.
        std::thread::sleep(Duration::from_millis(300));
        let _ = c.w.shutdown(std::net::Shutdown::Both);
    };
    for _ in 0..2 {
        let mut c = Raw::connect(srv.addr);
        c.login();
        c.send_raw(b"CKSM SHA256 0 -1 /huge\r\n");
        started(&mut c);
    }
    for _ in 0..2 {
        // A transfer waiting for its data connection, the CKSM of another file queued behind it: the server
        // starts that digest at once.
        let mut c = Raw::connect(srv.addr);
        c.login();
        assert_eq!(code(&c.cmd("TYPE I")), 200);
        assert_eq!(code(&c.cmd("PASV")), 227);
        c.send_raw(b"RETR ok.txt\r\nCKSM SHA256 0 -1 /huge\r\n");
        started(&mut c);
    }
    std::thread::sleep(Duration::from_millis(500));
    let pid = srv.child.id();
    let before = cpu_seconds(pid);
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_seconds(pid) - before;
    assert!(
        used < 0.4,
        "the server used {used:.2} CPU-s in 2 s after its clients hung up: still hashing for them"
    );
    // And it still serves.
    let mut c = Raw::connect(srv.addr);
    c.login();
    assert_eq!(code(&c.cmd("CKSM CRC32C 0 -1 ok.txt")), 213);
}
