//! Operating `drsftp serve`: the packaged example config (`packaging/drsftp.toml`, paths overridden to temp dirs)
//! serving a download and an upload that appear in the transfer log and move the `/metrics` counters by their
//! sizes; SIGHUP to a real server process while a download is held open mid-transfer (it completes, and a user
//! added to the users file meanwhile can log in); `--data-ports` keeping PASV, EPSV, SPAS and BPAS in range and
//! answering 425 when the range is used up; IPv6 end to end on `[::1]` (skipped with a reason without IPv6
//! loopback); the Debian package metadata; and `drsftp copy` defaults and host aliases from
//! `$XDG_CONFIG_HOME/drsftp/config.toml`; `drsftp doctor` measuring a real server (RTT, upload and download
//! probes, the route's offloads); and the transfer log naming the verb the client sent and its REST.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const T: Duration = Duration::from_secs(120);
const PW: &str = "correct horse battery";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A `drsftp serve` started with `args` (plus `--print-addr`), its control address and, with --metrics, the
/// metrics address. Killed by PID on drop (`ServerProcess`).
fn serve(dir: &Path, args: &[&str]) -> (ServerProcess, Option<SocketAddr>) {
    let log = dir.join("serve.log");
    let mut child = Command::new(bin())
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

/// GET http://addr/metrics.
fn scrape(addr: SocketAddr) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    text
}

/// The value of the sample named exactly `name` (with labels, if any), 0 if absent.
fn sample(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')))
        .map_or(0.0, |v| v.trim().parse().unwrap())
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

#[test]
fn debian_metadata_names_files_that_exist() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    let doc: toml::Table = toml::from_str(&manifest).unwrap();
    let deb = &doc["package"]["metadata"]["deb"];
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dests = vec![];
    for a in deb["assets"].as_array().unwrap() {
        let a = a.as_array().unwrap();
        let (src, dest) = (a[0].as_str().unwrap(), a[1].as_str().unwrap());
        dests.push(dest.to_string());
        if !src.starts_with("target/") {
            assert!(crate_dir.join(src).is_file(), "asset {src} missing");
        }
    }
    assert!(dests.iter().any(|d| d == "usr/bin/"));
    assert!(dests.iter().any(|d| d == "etc/drsftp/drsftp.toml"));
    let units = deb["systemd-units"]["unit-scripts"].as_str().unwrap();
    assert!(crate_dir.join(units).join("drsftp.service").is_file());
    assert!(crate_dir
        .join(deb["maintainer-scripts"].as_str().unwrap())
        .join("postinst")
        .is_file());
    // The unit starts the server on the packaged config, which itself parses (every key a serve flag).
    let unit = std::fs::read_to_string(repo().join("packaging/drsftp.service")).unwrap();
    assert!(unit
        .contains("ExecStart=/usr/bin/drsftp --log info serve --config /etc/drsftp/drsftp.toml"));
    for k in [
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ReadWritePaths=/srv/drsftp /var/log/drsftp",
        "PrivateTmp=yes",
    ] {
        assert!(unit.contains(k), "{k}");
    }
    let config = repo().join("packaging/drsftp.toml");
    let (ok, out, err) = run(
        Command::new(bin()).args([
            "serve",
            "--config",
            config.to_str().unwrap(),
            "--print-config",
        ]),
        T,
    );
    assert!(ok, "{err}");
    assert!(out.contains("data-ports = \"50000-51000\""), "{out}");
    assert!(
        out.contains("transfer-log = \"/var/log/drsftp/transfers.jsonl\""),
        "{out}"
    );

    // With cargo-deb installed, build the package and list it (skipped with the reason otherwise).
    let have_deb = Command::new("cargo")
        .args(["deb", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    let have_dpkg = Command::new("dpkg-deb")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !(have_deb && have_dpkg) {
        eprintln!("SKIPPED building the .deb (cargo-deb: {have_deb}, dpkg-deb: {have_dpkg}; `cargo install cargo-deb --locked`)");
        return;
    }
    let out = Command::new("cargo")
        .current_dir(repo())
        .args([
            "deb",
            "-p",
            "drsftp",
            "--no-build",
            "--strip",
            "--fast",
            "-o",
        ])
        .arg(std::env::temp_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deb_path = String::from_utf8_lossy(&out.stdout)
        .trim()
        .lines()
        .last()
        .unwrap()
        .to_string();
    let list = Command::new("dpkg-deb")
        .args(["-c", &deb_path])
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    for f in [
        "./usr/bin/drsftp",
        "./etc/drsftp/drsftp.toml",
        "drsftp.service",
    ] {
        assert!(list.contains(f), "{f} not in the package:\n{list}");
    }
    let _ = std::fs::remove_file(&deb_path);
}

#[test]
fn client_config_gives_copy_defaults_and_host_aliases() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("srv");
    std::fs::create_dir(&root).unwrap();
    let want = random_file(&root.join("f.bin"), 1 << 20, 9);
    let (srv, _) = serve(
        d.path(),
        &[
            "--root",
            root.to_str().unwrap(),
            "--anonymous",
            "--listen",
            "127.0.0.1:0",
        ],
    );
    let xdg = d.path().join("xdg");
    std::fs::create_dir_all(xdg.join("drsftp")).unwrap();
    std::fs::write(
        xdg.join("drsftp/config.toml"),
        format!(
            "[copy]\nparallel = 3\njson = true\n\n[hosts.lab]\nhost = \"{}\"\n",
            srv.addr
        ),
    )
    .unwrap();
    let copy_with = |extra: &[&str], out: &Path| {
        run(
            Command::new(bin())
                .arg("copy")
                .arg("ftp://lab/f.bin")
                .arg(out)
                .args(extra)
                .env("XDG_CONFIG_HOME", &xdg)
                .env("HOME", "/nonexistent"),
            T,
        )
    };
    // The alias reaches the server; [copy] asks for 3 streams and a JSON summary.
    let got = d.path().join("a.bin");
    let (ok, out, err) = copy_with(&[], &got);
    assert!(ok, "{err}");
    assert_eq!(sha256_file(&got), want);
    assert_eq!(json_of(&out)["streams"], 3, "{out}");
    // The command line wins over the file.
    let got = d.path().join("b.bin");
    let (ok, out, err) = copy_with(&["-p", "2"], &got);
    assert!(ok, "{err}");
    assert_eq!(json_of(&out)["streams"], 2, "{out}");
    // An unknown key is named.
    std::fs::write(xdg.join("drsftp/config.toml"), "[copy]\nparalel = 3\n").unwrap();
    let (ok, _, err) = copy_with(&[], &d.path().join("c.bin"));
    assert!(!ok && err.contains("unknown key \"paralel\""), "{err}");
}

#[test]
fn doctor_reports_host_facts_and_measures_a_server() {
    let d = tempfile::tempdir().unwrap();
    let (srv, _) = serve(
        d.path(),
        &[
            "--root",
            d.path().to_str().unwrap(),
            "--anonymous",
            "--anonymous-write",
            "--listen",
            "127.0.0.1:0",
        ],
    );
    let (ok, out, err) = run(
        Command::new(bin())
            .args([
                "doctor",
                &srv.url("/"),
                "--rate",
                "10gbit",
                "--probe-secs",
                "0.5",
                "--json",
                "--path",
            ])
            .arg(d.path()),
        T,
    );
    assert!(ok, "{err}");
    let r: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    // The host facts are this machine's.
    if let Ok(v) = std::fs::read_to_string("/proc/sys/net/core/rmem_max") {
        assert_eq!(r["host"]["rmem_max"], v.trim().parse::<u64>().unwrap());
    }
    let rtt = r["path"]["rtt_s"].as_f64().unwrap();
    assert!(rtt > 0.0 && rtt < 0.5, "loopback RTT {rtt}");
    // BDP = rate × RTT.
    let bdp = r["bdp_bytes"].as_u64().unwrap();
    assert_eq!(bdp, (1e10 / 8.0 * rtt) as u64);
    assert!(r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["topic"] == "congestion"));
    assert_eq!(r["path"]["rate_source"], "flag");
    // The directory URL: an upload probe, measured as the sender (loss is a number), its scratch file gone.
    let p = &r["probe"];
    assert_eq!(p["direction"], "upload", "{r}");
    assert!(p["bytes"].as_u64().unwrap() > 0, "{p}");
    assert!(p["rate_bps"].as_f64().unwrap() > 0.0, "{p}");
    let loss = p["loss"].as_f64().unwrap();
    assert!((0.0..1.0).contains(&loss), "{p}");
    let left: Vec<_> = std::fs::read_dir(d.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains("drsftp-doctor"))
        .collect();
    assert!(left.is_empty(), "scratch file left: {left:?}");
    // The route to the server is loopback, whose offloads the kernel reports.
    assert_eq!(r["host"]["route"]["interface"], "lo", "{r}");
    assert_eq!(r["host"]["route"]["mtu"], 65536);
    assert!(r["host"]["route"]["gso"].is_boolean(), "{r}");
    // A file URL: a download probe of that file; a receiver cannot see loss. Without --rate the BDP uses the
    // probe's rate or says it assumed one.
    std::fs::write(d.path().join("probe.bin"), vec![7u8; 4 << 20]).unwrap();
    let (ok, out, err) = run(
        Command::new(bin()).args([
            "doctor",
            &srv.url("/probe.bin"),
            "--probe-secs",
            "0.5",
            "--json",
        ]),
        T,
    );
    assert!(ok, "{err}");
    let r: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let p = &r["probe"];
    assert_eq!(p["direction"], "download", "{r}");
    assert_eq!(p["bytes"], 4 << 20, "{p}");
    assert!(p["loss"].is_null(), "{p}");
    let source = r["path"]["rate_source"].as_str().unwrap();
    assert!(source == "probe" || source == "assumed", "{r}");
    if source == "probe" {
        assert_eq!(r["path"]["rate_bps"], p["rate_bps"]);
    }
    // A server that is not there is an error, not a report.
    let (ok, _, err) = run(
        Command::new(bin()).args(["doctor", "ftp://127.0.0.1:1/"]),
        T,
    );
    assert!(!ok && err.contains("connect"), "{err}");
}
