//! Operating `drsftp serve`: the packaged example config (`packaging/drsftp.toml`, paths overridden to temp dirs)
//! serving a download and an upload that appear in the transfer log and move the `/metrics` counters by their
//! sizes; SIGHUP to a real server process while a download is held open mid-transfer (it completes, and a user
//! added to the users file meanwhile can log in); `--data-ports` keeping PASV, EPSV, SPAS and BPAS in range and
//! answering 425 when the range is used up; IPv6 end to end on `[::1]` (skipped with a reason without IPv6
//! loopback); the transfer log naming the verb the client sent and its REST; and `DRSFTP_ZERO_COPY` reaching the
//! server's data path. The client's side of operations
//! is in `cli_client_ops.rs`, the Debian package in `package_install.rs`.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const T: Duration = Duration::from_secs(120);
const PW: &str = "correct horse battery";

/// A `drsftp serve` started with `args` (plus `--print-addr`), its control address and, with --metrics, the
/// metrics address. Killed by PID on drop (`ServerProcess`).
fn serve(dir: &Path, args: &[&str]) -> (ServerProcess, Option<SocketAddr>) {
    serve_zero_copy(dir, None, args)
}

/// [`serve`] with `DRSFTP_ZERO_COPY` set to `zero_copy` (or unset).
fn serve_zero_copy(
    dir: &Path,
    zero_copy: Option<&str>,
    args: &[&str],
) -> (ServerProcess, Option<SocketAddr>) {
    let log = dir.join("serve.log");
    let mut cmd = Command::new(bin());
    match zero_copy {
        Some(v) => cmd.env("DRSFTP_ZERO_COPY", v),
        None => cmd.env_remove("DRSFTP_ZERO_COPY"),
    };
    let mut child = cmd
        .args(["--log", "info", "serve", "--print-addr"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let Some(addr) = line
        .trim()
        .strip_prefix("listening ")
        .and_then(|a| a.parse().ok())
    else {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "drsftp serve printed {line:?}; log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    };
    let server = ServerProcess { child, addr, log };
    let metrics = args.contains(&"--metrics").then(|| {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        line.trim()
            .strip_prefix("metrics ")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("expected `metrics ADDR`, got {line:?}"))
    });
    (server, metrics)
}

/// `drsftp passwd FILE NAME` with the password on stdin.
fn passwd(file: &Path, name: &str) {
    let mut child = Command::new(bin())
        .arg("passwd")
        .arg(file)
        .arg(name)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "{PW}").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The transfer log's lines, waiting up to 10 s for `n` of them (the writer is a thread of its own).
fn log_lines(p: &Path, n: usize) -> Vec<serde_json::Value> {
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(p).unwrap_or_default();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if lines.len() >= n || t0.elapsed() > Duration::from_secs(10) {
            assert!(
                lines.len() >= n,
                "{} holds {} lines, want {n}:\n{text}",
                p.display(),
                lines.len()
            );
            return lines;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn copy(args: &[&str]) -> (bool, String, String) {
    run(
        Command::new(bin())
            .arg("copy")
            .args(args)
            .env("DRSFTP_PASSWORD", PW)
            .env("HOME", "/nonexistent"),
        T,
    )
}

#[test]
fn packaged_config_serves_logs_and_counts_transfers() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("srv");
    std::fs::create_dir(&root).unwrap();
    let users = d.path().join("users.toml");
    passwd(&users, "alice");
    let src = root.join("big.bin");
    let want = random_file(&src, 3 << 20, 21);
    let up = d.path().join("up.bin");
    random_file(&up, 1 << 20, 22);
    let xlog = d.path().join("log/transfers.jsonl");
    std::fs::create_dir(d.path().join("log")).unwrap();
    let config = repo().join("packaging/drsftp.toml");
    let (srv, metrics) = serve(
        d.path(),
        &[
            "--config",
            config.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--root",
            root.to_str().unwrap(),
            "--users",
            users.to_str().unwrap(),
            "--transfer-log",
            xlog.to_str().unwrap(),
            "--metrics",
            "127.0.0.1:0",
        ],
    );
    let metrics = metrics.unwrap();
    // The config's own settings are in force: its data-ports range.
    let mut raw = Raw::connect(srv.addr);
    assert!(raw.cmd("USER alice").starts_with("331"));
    let r = raw.cmd("PASS wrong");
    assert!(r.starts_with("530"), "{r}");
    drop(raw);
    let mut raw = Raw::connect(srv.addr);
    assert!(raw.cmd("USER alice").starts_with("331"));
    assert!(raw.cmd(&format!("PASS {PW}")).starts_with("230"));
    let port = pasv_addr(&raw.cmd("PASV")).port();
    assert!(
        (50000..=51000).contains(&port),
        "PASV port {port} outside the config's data-ports"
    );
    drop(raw);

    let before = scrape(metrics);
    let got = d.path().join("got.bin");
    let url = format!("ftp://alice@{}/big.bin", srv.addr);
    let (ok, _, err) = copy(&[&url, got.to_str().unwrap(), "-p", "4"]);
    assert!(ok, "{err}\n{}", srv.log_text());
    assert_eq!(sha256_file(&got), want);
    let dest = format!("ftp://alice@{}/up.bin", srv.addr);
    let (ok, _, err) = copy(&[up.to_str().unwrap(), &dest]);
    assert!(ok, "{err}\n{}", srv.log_text());
    // A blast download: its UDP port comes from the config's data-ports too.
    let udp = d.path().join("udp.bin");
    let url = format!("ftp://alice@{}/up.bin", srv.addr);
    let (ok, _, err) = copy(&[&url, udp.to_str().unwrap(), "--transport", "udp"]);
    assert!(ok, "{err}\n{}", srv.log_text());
    assert_eq!(sha256_file(&udp), sha256_file(&up));

    let lines = log_lines(&xlog, 3);
    let blast = lines
        .iter()
        .find(|l| l["transport"] == "udp")
        .expect("blast logged");
    assert_eq!(blast["command"], "RETR");
    assert_eq!(blast["bytes"], 1 << 20);
    assert_eq!(blast["buffer"], "blast");
    let retr = lines
        .iter()
        .find(|l| l["path"] == "/big.bin")
        .expect("download logged");
    assert_eq!(retr["command"], "RETR");
    assert_eq!(retr["user"], "alice");
    assert_eq!(retr["bytes"], 3 << 20);
    assert_eq!(retr["transport"], "mode-e");
    assert_eq!(retr["streams"], 4);
    assert_eq!(retr["code"], 226);
    assert_eq!(retr["result"], "ok");
    assert!(retr["peer"].as_str().unwrap().starts_with("127.0.0.1:"));
    assert!(retr["seconds"].as_f64().unwrap() >= 0.0);
    let stor = lines
        .iter()
        .find(|l| l["path"] == "/up.bin")
        .expect("upload logged");
    assert_eq!(stor["command"], "STOR");
    assert_eq!(stor["bytes"], 1 << 20);

    let after = scrape(metrics);
    let delta = |name: &str| sample(&after, name) - sample(&before, name);
    assert_eq!(
        delta("drsftp_sent_bytes_total"),
        (4 << 20) as f64,
        "{after}"
    );
    assert_eq!(
        delta("drsftp_received_bytes_total"),
        (1 << 20) as f64,
        "{after}"
    );
    assert_eq!(
        delta("drsftp_transfers_total{direction=\"out\",result=\"ok\"}"),
        2.0,
        "{after}"
    );
    assert_eq!(
        delta("drsftp_transfers_total{direction=\"in\",result=\"ok\"}"),
        1.0,
        "{after}"
    );
    assert_eq!(
        delta("drsftp_transfer_throughput_bytes_per_second_count"),
        3.0,
        "{after}"
    );
    // Loopback loses nothing; the blast counters are on the page all the same.
    assert!(
        after.contains("drsftp_blast_resent_datagrams_total "),
        "{after}"
    );
    assert_eq!(
        sample(&after, "drsftp_login_failures_total"),
        1.0,
        "{after}"
    );
    assert!(sample(&after, "drsftp_sessions_total") >= 4.0, "{after}");
    // No user names, paths or addresses on the page.
    for secret in ["alice", "big.bin", "127.0.0.1:"] {
        assert!(!after.contains(secret), "{secret} exposed:\n{after}");
    }
}

/// One stream-mode transfer on a raw session: `pre` commands (REST, ...), then `cmd` over a fresh PASV data
/// connection that sends `upload` (or reads everything), and the final reply.
fn raw_transfer(raw: &mut Raw, pre: &[&str], cmd: &str, upload: Option<&[u8]>) -> Vec<u8> {
    let data = pasv_addr(&raw.cmd("PASV"));
    for p in pre {
        let r = raw.cmd(p);
        assert!(r.starts_with('3') || r.starts_with('2'), "{p}: {r}");
    }
    let mut conn = TcpStream::connect(data).unwrap();
    let r = raw.cmd(cmd);
    assert!(r.starts_with("150"), "{cmd}: {r}");
    let mut got = Vec::new();
    match upload {
        Some(b) => {
            conn.write_all(b).unwrap();
            drop(conn);
        }
        None => {
            conn.read_to_end(&mut got).unwrap();
        }
    }
    let r = raw.final_reply();
    assert!(r.starts_with("226"), "{cmd}: {r}");
    got
}

/// `DRSFTP_ZERO_COPY=1` in `drsftp serve`'s environment puts its stream-mode RETR on `sendfile` and its STOR on
/// `splice` (`drsftp_kernel_copied_bytes_total` counts both); unset, both copy through user space.
#[test]
fn the_zero_copy_variable_reaches_the_server() {
    let len = (2 << 20) + 5;
    for (value, want) in [(Some("1"), 2 * len as u64), (None, 0)] {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("srv");
        std::fs::create_dir(&root).unwrap();
        random_file(&root.join("f.bin"), len, 33);
        let data = std::fs::read(root.join("f.bin")).unwrap();
        let (srv, metrics) = serve_zero_copy(
            d.path(),
            value,
            &[
                "--listen",
                "127.0.0.1:0",
                "--root",
                root.to_str().unwrap(),
                "--anonymous",
                "--anonymous-write",
                "--metrics",
                "127.0.0.1:0",
            ],
        );
        let mut raw = Raw::connect(srv.addr);
        raw.login();
        assert!(raw.cmd("TYPE I").starts_with("200"));
        let got = raw_transfer(&mut raw, &[], "RETR f.bin", None);
        assert!(got == data, "{value:?}: the download differs");
        raw_transfer(&mut raw, &[], "STOR up.bin", Some(&data));
        assert!(std::fs::read(root.join("up.bin")).unwrap() == data);
        let page = scrape(metrics.unwrap());
        assert_eq!(
            sample(&page, "drsftp_kernel_copied_bytes_total"),
            want as f64,
            "DRSFTP_ZERO_COPY={value:?}:\n{page}"
        );
    }
}

#[test]
fn transfer_log_names_the_command_sent_and_the_restart() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("srv");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("f.txt"), b"0123456789").unwrap();
    let xlog = d.path().join("transfers.jsonl");
    let (srv, _) = serve(
        d.path(),
        &[
            "--listen",
            "127.0.0.1:0",
            "--root",
            root.to_str().unwrap(),
            "--anonymous",
            "--anonymous-write",
            "--transfer-log",
            xlog.to_str().unwrap(),
        ],
    );
    let mut raw = Raw::connect(srv.addr);
    raw.login();
    assert!(raw.cmd("TYPE I").starts_with("200"));
    let got = raw_transfer(&mut raw, &["REST 4"], "RETR f.txt", None);
    assert_eq!(got, b"456789");
    raw_transfer(&mut raw, &[], "APPE f.txt", Some(b"ab"));
    raw_transfer(&mut raw, &[], "RETR f.txt", None);
    raw_transfer(&mut raw, &["REST 12"], "STOR f.txt", Some(b"cd"));
    assert_eq!(
        std::fs::read(root.join("f.txt")).unwrap(),
        b"0123456789abcd"
    );
    let lines = log_lines(&xlog, 4);
    let seen: Vec<_> = lines
        .iter()
        .map(|l| {
            (
                l["command"].as_str().unwrap().to_string(),
                l["restart_offset"].as_u64(),
                l["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("RETR".into(), Some(4), 6),
            ("APPE".into(), None, 2),
            ("RETR".into(), None, 12),
            ("STOR".into(), Some(12), 2),
        ],
        "{lines:?}"
    );
}

#[test]
fn sighup_reloads_users_while_a_transfer_runs() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("srv");
    std::fs::create_dir(&root).unwrap();
    let users = d.path().join("users.toml");
    passwd(&users, "alice");
    let len = 64 << 20;
    let want = random_file(&root.join("big.bin"), len, 7);
    let config = d.path().join("serve.toml");
    std::fs::write(
        &config,
        format!("root = {:?}\nusers = {:?}\nmax-sessions = 8\n", root, users),
    )
    .unwrap();
    let xlog = d.path().join("transfers.jsonl");
    let (srv, metrics) = serve(
        d.path(),
        &[
            "--config",
            config.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--transfer-log",
            xlog.to_str().unwrap(),
            "--metrics",
            "127.0.0.1:0",
        ],
    );
    let metrics = metrics.unwrap();

    // alice starts a stream-mode download and reads only its first MiB: the server's sends block on the window.
    let mut raw = Raw::connect(srv.addr);
    assert!(raw.cmd("USER alice").starts_with("331"));
    assert!(raw.cmd(&format!("PASS {PW}")).starts_with("230"));
    assert!(raw.cmd("TYPE I").starts_with("200"));
    let data_addr = pasv_addr(&raw.cmd("PASV"));
    raw.send_raw(b"RETR big.bin\r\n");
    let mut data = TcpStream::connect(data_addr).unwrap();
    data.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let r = raw.reply();
    assert!(r.starts_with("150"), "{r}");
    let mut got = vec![0u8; 1 << 20];
    data.read_exact(&mut got).unwrap();
    let page = scrape(metrics);
    assert_eq!(sample(&page, "drsftp_sessions_active"), 1.0, "{page}");
    assert!(
        sample(&page, "drsftp_data_buffer_bytes") > 0.0,
        "the running transfer's buffers: {page}"
    );
    // logrotate moves the transfer log away before the reload.
    let rotated = d.path().join("transfers.jsonl.1");
    std::fs::rename(&xlog, &rotated).unwrap();

    // bob is added, then SIGHUP.
    let mut bob = Raw::connect(srv.addr);
    assert!(bob.cmd("USER bob").starts_with("331"));
    let r = bob.cmd(&format!("PASS {PW}"));
    assert!(r.starts_with("530"), "bob before the reload: {r}");
    drop(bob);
    passwd(&users, "bob");
    let st = Command::new("kill")
        .args(["-HUP", &srv.child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let t0 = Instant::now();
    while !srv.log_text().contains("reloaded") {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "no reload:\n{}",
            srv.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut bob = Raw::connect(srv.addr);
    assert!(bob.cmd("USER bob").starts_with("331"));
    let r = bob.cmd(&format!("PASS {PW}"));
    assert!(
        r.starts_with("230"),
        "bob after the reload: {r}\n{}",
        srv.log_text()
    );

    // The download held open across the reload completes intact.
    data.read_to_end(&mut got).unwrap();
    assert_eq!(got.len(), len);
    assert_eq!(drsftp_testkit::data::sha256(&got), want);
    let r = raw.final_reply();
    assert!(r.starts_with("226"), "{r}");
    assert!(
        raw.cmd("NOOP").starts_with("200"),
        "alice's session survived the reload"
    );
    // The reopened log (a new file at the old path) holds the transfer; the rotated one is empty.
    let lines = log_lines(&xlog, 1);
    assert_eq!(lines[0]["bytes"], len);
    assert_eq!(lines[0]["transport"], "tcp-stream");
    assert_eq!(std::fs::read_to_string(&rotated).unwrap(), "");
}

#[test]
fn data_ports_hold_every_passive_listener_and_run_out_with_425() {
    let d = tempfile::tempdir().unwrap();
    // Two free adjacent ports are not guaranteed; one free port makes the range.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let range = format!("{port}-{port}");
    let (srv, _) = serve(
        d.path(),
        &[
            "--root",
            d.path().to_str().unwrap(),
            "--anonymous",
            "--listen",
            "127.0.0.1:0",
            "--data-ports",
            &range,
        ],
    );
    let mut a = Raw::connect(srv.addr);
    a.login();
    assert_eq!(pasv_addr(&a.cmd("PASV")).port(), port);
    // A second session finds the one port in use.
    let mut b = Raw::connect(srv.addr);
    b.login();
    for cmd in ["PASV", "EPSV", "SPAS"] {
        let r = b.cmd(cmd);
        assert!(r.starts_with("425"), "{cmd} with the range used up: {r}");
    }
    // The session still works, and a new PASV of the holder replaces its listener on the same port.
    assert!(b.cmd("NOOP").starts_with("200"));
    let r = a.cmd("EPSV");
    assert!(r.contains(&format!("|||{port}|")), "{r}");
    let r = a.cmd("SPAS");
    assert!(r.contains(&format!(",{},{}", port >> 8, port & 255)), "{r}");
    drop(a);
    // Blast's UDP socket uses the range too (UDP: the TCP listener does not hold it).
    let r = b.cmd("BPAS 127,0,0,1,200,1");
    assert!(r.starts_with("229"), "{r}");
    assert!(
        r.contains(&format!(",{},{})", port >> 8, port & 255)),
        "{r}"
    );
}

/// True if this machine can bind `[::1]`.
fn have_ipv6_loopback() -> bool {
    std::net::TcpListener::bind("[::1]:0").is_ok()
}

#[test]
fn ipv6_loopback_end_to_end() {
    if !have_ipv6_loopback() {
        eprintln!("SKIPPED ipv6_loopback_end_to_end (no IPv6 loopback: cannot bind [::1])");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("srv");
    std::fs::create_dir(&root).unwrap();
    let want = random_file(&root.join("f.bin"), 2 << 20, 6);
    let up = d.path().join("up.bin");
    let want_up = random_file(&up, 1 << 20, 66);
    let (srv, _) = serve(
        d.path(),
        &[
            "--root",
            root.to_str().unwrap(),
            "--anonymous",
            "--anonymous-write",
            "--listen",
            "[::1]:0",
        ],
    );
    assert!(srv.addr.is_ipv6());
    let host = format!("[::1]:{}", srv.port());
    // MODE E download: the client listens and sends EPRT; stream mode: EPSV.
    for (name, extra) in [("p4.bin", &["-p", "4"][..]), ("p1.bin", &["-p", "1"][..])] {
        let got = d.path().join(name);
        let (ok, _, err) = copy(
            &[&format!("ftp://{host}/f.bin"), got.to_str().unwrap()][..]
                .iter()
                .copied()
                .chain(extra.iter().copied())
                .collect::<Vec<_>>(),
        );
        assert!(ok, "{name}: {err}\n{}", srv.log_text());
        assert_eq!(sha256_file(&got), want, "{name}");
    }
    let (ok, _, err) = copy(&[
        up.to_str().unwrap(),
        &format!("ftp://{host}/up.bin"),
        "-p",
        "2",
    ]);
    assert!(ok, "{err}\n{}", srv.log_text());
    assert_eq!(sha256_file(&root.join("up.bin")), want_up);
    let (ok, out, err) = run(
        Command::new(bin()).args(["ls", &format!("ftp://{host}/")]),
        T,
    );
    assert!(ok, "{err}");
    assert!(out.contains("f.bin") && out.contains("up.bin"), "{out}");
    // A raw EPSV on the IPv6 control connection.
    let mut raw = Raw::connect(srv.addr);
    raw.login();
    let r = raw.cmd("EPSV");
    assert!(r.starts_with("229") && r.contains("(|||"), "{r}");
}
