//! Shared harness for the drsftp binary's integration tests, what only they use: the binary under test and a
//! `drsftp serve` of it, a Globus peer with a random file, commands run with a timeout, the `--json` summary, a raw
//! control connection and PASV parsing, a striped drsftp cluster (`cluster`). Data, server processes (killed by PID on drop) and the Globus tools come
//! from `drsftp_testkit`, re-exported here. Only loopback addresses are used.
// Every test binary compiles this module but uses only part of it.
#![allow(dead_code, unused_imports)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub mod auto;
pub mod cluster;
pub mod tree;

pub use drsftp_testkit::data::{chmod, random_file, sha256, sha256_file};
pub use drsftp_testkit::globus::{self, have};
pub use drsftp_testkit::server::{drsftp_serve, printed_addr, ServerProcess};

/// The drsftp binary under test.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_drsftp"))
}

/// Whether the tests run as root (effective uid 0, read from /proc), for tests that mount or capture.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        == Some("0")
}

/// A temporary directory every user may write to (Globus serves anonymous users as `nobody`).
pub fn open_tempdir() -> tempfile::TempDir {
    drsftp_testkit::data::open_tempdir("drsftp-it")
}

/// The one JSON object a `--json` run printed on stdout.
pub fn json_of(stdout: &str) -> serde_json::Value {
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON object on stdout: {stdout:?}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("bad JSON {line:?}: {e}"))
}

/// Start `drsftp serve` on a free loopback port, serving `root` anonymously, with extra args.
pub fn drsftp_server(root: &Path, extra: &[&str]) -> ServerProcess {
    drsftp_testkit::server::drsftp_server(&bin(), root, extra)
}

/// For a test against Globus (skipped with a printed reason, `None`, when the server is not installed): an open
/// temporary directory holding `name` with `len` random bytes (`seed`), the file's path, its SHA-256 and a running
/// globus-gridftp-server.
pub fn globus_with_file(
    test: &str,
    name: &str,
    len: usize,
    seed: u64,
) -> Option<(tempfile::TempDir, PathBuf, String, ServerProcess)> {
    let (dir, srv) = globus::start_in_tempdir(test, "drsftp-it", &[])?;
    let src = dir.path().join(name);
    let want = random_file(&src, len, seed);
    Some((dir, src, want, srv))
}

/// Runs `drsftp args` with its control dialogue logged on stderr (`RUST_LOG=drsftp_io=debug`, PASS masked),
/// for tests that check which commands went out; returns (success, stdout, stderr).
pub fn drsftp_logged(args: &[&str], timeout: Duration) -> (bool, String, String) {
    run(
        Command::new(bin())
            .env("RUST_LOG", "drsftp_io=debug")
            .args(args),
        timeout,
    )
}

/// Run a command with a timeout; returns (success, stdout, stderr).
pub fn run(cmd: &mut Command, timeout: Duration) -> (bool, String, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break Some(st);
        }
        if t0.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (o, e) = (
        t_out.join().unwrap_or_default(),
        t_err.join().unwrap_or_default(),
    );
    match status {
        Some(st) => (st.success(), o, e),
        None => (false, o, format!("{e}\n(timed out after {timeout:?})")),
    }
}

/// A raw control connection for hand-written dialogues.
pub struct Raw {
    pub r: BufReader<TcpStream>,
    pub w: TcpStream,
}

impl Raw {
    /// Connect and read the greeting.
    pub fn connect(addr: SocketAddr) -> Raw {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        let mut raw = Raw {
            r: BufReader::new(s.try_clone().expect("clone")),
            w: s,
        };
        let g = raw.reply();
        assert!(g.starts_with("220"), "greeting {g:?}");
        raw
    }
    /// Read one whole reply (multi-line aware); returns all its lines joined with '\n'.
    pub fn reply(&mut self) -> String {
        let mut all = String::new();
        let mut first = String::new();
        self.r.read_line(&mut first).expect("reply");
        assert!(first.len() >= 4, "short reply line {first:?}");
        all.push_str(first.trim_end());
        if first.as_bytes()[3] == b'-' {
            let code = first[..3].to_string();
            loop {
                let mut l = String::new();
                if self.r.read_line(&mut l).expect("reply line") == 0 {
                    break;
                }
                all.push('\n');
                all.push_str(l.trim_end());
                if l.starts_with(&format!("{code} ")) {
                    break;
                }
            }
        }
        all
    }
    /// Read replies until one that is not a 1xx preliminary/marker reply (111, 112, ...), and return it.
    pub fn final_reply(&mut self) -> String {
        loop {
            let r = self.reply();
            if !r.starts_with('1') {
                return r;
            }
        }
    }
    /// Send raw bytes.
    pub fn send_raw(&mut self, b: &[u8]) {
        self.w.write_all(b).expect("send");
    }
    /// Send a command line and read its reply.
    pub fn cmd(&mut self, line: &str) -> String {
        self.send_raw(format!("{line}\r\n").as_bytes());
        self.reply()
    }
    /// Log in anonymously.
    pub fn login(&mut self) {
        let r = self.cmd("USER anonymous");
        assert!(r.starts_with("331") || r.starts_with("230"), "{r}");
        if r.starts_with("331") {
            let r = self.cmd("PASS test@");
            assert!(r.starts_with("230"), "{r}");
        }
    }
}

/// Parse `227 Entering Passive Mode (h1,h2,h3,h4,p1,p2)`.
pub fn pasv_addr(reply: &str) -> SocketAddr {
    let inner = reply
        .split('(')
        .nth(1)
        .and_then(|s| s.split(')').next())
        .unwrap_or_else(|| panic!("bad 227: {reply}"));
    let n: Vec<u16> = inner
        .split(',')
        .map(|x| x.trim().parse().expect("num"))
        .collect();
    format!("{}.{}.{}.{}:{}", n[0], n[1], n[2], n[3], n[4] * 256 + n[5])
        .parse()
        .expect("addr")
}

/// The workspace's root directory.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// GET http://addr/metrics (the Prometheus text of `serve --metrics`).
pub fn scrape(addr: SocketAddr) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    text
}

/// The value of the metrics sample named exactly `name` (with labels, if any), 0 if absent.
pub fn sample(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

/// The `a-b` ranges of a ranges checkpoint's text (the client's `.drsftp-part.ck`, a server's kept `.ck`): the
/// body after the header's blank line; none if there is no body.
pub fn checkpoint_ranges(text: &str) -> Vec<(u64, u64)> {
    let Some((_, body)) = text.split_once("\n\n") else {
        return vec![];
    };
    body.trim()
        .split(',')
        .filter(|r| !r.is_empty())
        .map(|r| {
            let (a, b) = r.split_once('-').unwrap();
            (a.parse().unwrap(), b.parse().unwrap())
        })
        .collect()
}

/// `drsftp serve` in lab host 1 on `listen`, serving `root`, its transfer log next to it ([`logged_bytes`]).
pub fn lab_server_logged(lab: &drsftp_lab::Lab, listen: &str, root: &Path) -> ServerProcess {
    lab_server_logged_on(lab, 1, listen, root, &[])
}

/// [`lab_server_logged`] in lab host `host`, with `extra` arguments.
pub fn lab_server_logged_on(
    lab: &drsftp_lab::Lab,
    host: usize,
    listen: &str,
    root: &Path,
    extra: &[&str],
) -> ServerProcess {
    let cmd = lab.exec(host, bin().to_str().unwrap());
    let log = root.with_extension("xfer.jsonl");
    let mut args = vec!["--transfer-log", log.to_str().unwrap()];
    args.extend_from_slice(extra);
    drsftp_serve(cmd, listen, root, &args)
}

/// Bytes the kept partial uploads of a `drsftp serve` serving `root` say they hold (the largest, 0 if none).
pub fn kept_bytes(root: &Path) -> u64 {
    let Ok(d) = std::fs::read_dir(root.join(".drsftp-part.kept")) else {
        return 0;
    };
    d.filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".ck"))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .map(|t| checkpoint_ranges(&t).iter().map(|(a, b)| b - a).sum())
        .max()
        .unwrap_or(0)
}

/// The part files of kept partial uploads under `root` (their names have no dot; their records end in `.ck`).
pub fn kept_part_files(root: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(root.join(".drsftp-part.kept")).map_or(vec![], |d| {
        d.filter_map(|e| e.ok())
            .filter(|e| !e.file_name().to_string_lossy().contains('.'))
            .map(|e| e.path())
            .collect()
    })
}

/// Bytes of each transfer-log line so far of a [`lab_server_logged`] server whose command is one of `commands`.
pub fn logged_bytes(root: &Path, commands: &[&str]) -> Vec<u64> {
    std::fs::read_to_string(root.with_extension("xfer.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|j| j["command"].as_str().is_some_and(|c| commands.contains(&c)))
        .map(|j| j["bytes"].as_u64().unwrap())
        .collect()
}

/// Kills a copy mid-file: waits (up to `limit`) while the `what` (`upload`, `download`) `child` runs until
/// `held()` reaches `at` bytes of its `kept` (the thing that records progress: a partial, a checkpoint), then runs
/// `cut` (which kills the client or the server) and waits for the child to end. Panics if the copy ends first or
/// does not end; the child is killed (by PID) before any panic, so a failed test leaves no process behind.
pub fn cut_midway(
    child: &mut std::process::Child,
    what_kept: (&str, &str),
    held: impl Fn() -> u64,
    at: u64,
    cut: impl FnOnce(&mut std::process::Child),
    limit: Duration,
) {
    cut_at(child, what_kept, held, at, cut, limit);
    let t1 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t1.elapsed() > limit {
            end_child(child);
            panic!("drsftp copy did not end after the cut");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The first half of [`cut_midway`]: runs `cut` once `held()` reaches `at`, without waiting for the child.
pub fn cut_at(
    child: &mut std::process::Child,
    (what, kept): (&str, &str),
    held: impl Fn() -> u64,
    at: u64,
    cut: impl FnOnce(&mut std::process::Child),
    limit: Duration,
) {
    let t0 = Instant::now();
    while held() < at {
        if let Ok(Some(st)) = child.try_wait() {
            panic!("the {what} ended before the cut: {st}");
        }
        if t0.elapsed() > limit {
            end_child(child);
            panic!("no {kept} of {at} bytes appeared");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    cut(child);
}

/// Kills `child` (by PID) and reaps it.
pub fn end_child(child: &mut std::process::Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// `drsftp passwd FILE NAME extra...` with the password on stdin (never argv); success and stderr.
pub fn passwd(file: &Path, name: &str, extra: &[&str], password: &str) -> (bool, String) {
    let mut child = Command::new(bin())
        .arg("passwd")
        .arg(file)
        .arg(name)
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn drsftp passwd");
    writeln!(child.stdin.take().unwrap(), "{password}").unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// globus-gridftp-server in lab host `host` on port 2811 (anonymous as `nobody`, home `/`, log in `dir`), killed
/// by its PID on drop. A lab host has no resolver and Globus looks its own address up by name, so it runs in a
/// private mount namespace with an `/etc/hosts` of its own. Waits until host `from` can connect.
pub fn lab_globus(lab: &drsftp_lab::Lab, host: usize, from: usize, dir: &Path) -> ServerProcess {
    let bin = globus::find_tool(globus::GLOBUS_SERVER).expect("globus-gridftp-server");
    let ip = lab.addr(host);
    let hosts = dir.join("hosts");
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    std::fs::write(
        &hosts,
        format!("127.0.0.1 localhost {}\n{ip} h{host}\n", name.trim()),
    )
    .unwrap();
    let log = dir.join("globus.log");
    let script = format!(
        "mount --bind {} /etc/hosts && exec {} -aa -anonymous-user nobody -p 2811 -control-interface {ip} \
         -data-interface {ip} -home-dir / -l {}",
        hosts.display(),
        bin.display(),
        log.display()
    );
    let mut cmd = lab.exec(host, "unshare");
    let child = cmd
        .args(["-m", "sh", "-c", &script])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn globus-gridftp-server");
    let addr = SocketAddr::from((ip, 2811));
    let t0 = Instant::now();
    let probe = format!("exec 3<>/dev/tcp/{ip}/2811");
    while !lab
        .exec(from, "bash")
        .args(["-c", &probe])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
    {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "globus-gridftp-server did not come up"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    ServerProcess { child, addr, log }
}
