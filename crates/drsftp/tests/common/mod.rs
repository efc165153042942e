//! Shared harness for the integration tests against real peers: a `drsftp serve` child process, a Debian
//! `globus-gridftp-server` child, a check for peer tools that skips with a printed reason, random files and
//! SHA-256. Every child is killed by PID in `Drop`; only loopback addresses are used.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// The drsftp binary under test.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_drsftp"))
}

/// True if `tool` is on PATH (or an absolute path that exists); otherwise prints why the test is skipped.
pub fn have(tool: &str, test: &str) -> bool {
    let found = if tool.starts_with('/') {
        Path::new(tool).exists()
    } else {
        Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !found {
        eprintln!("SKIPPED {test}: `{tool}` is not installed (run scripts/setup.sh)");
    }
    found
}

/// A temporary directory every user may write to (Globus serves anonymous users as `nobody`).
pub fn open_tempdir() -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("drsftp-it")
        .tempdir_in("/tmp")
        .expect("tempdir");
    chmod(d.path(), 0o777);
    d
}

/// Set Unix permission bits.
pub fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Write `len` pseudo-random bytes (seeded) to `path`, world-readable; returns their SHA-256.
pub fn random_file(path: &Path, len: usize, seed: u64) -> String {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut f = std::fs::File::create(path).expect("create");
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut left = len;
    while left > 0 {
        let n = left.min(buf.len());
        for chunk in buf[..n].chunks_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let b = x.to_le_bytes();
            chunk.copy_from_slice(&b[..chunk.len()]);
        }
        f.write_all(&buf[..n]).expect("write");
        h.update(&buf[..n]);
        left -= n;
    }
    chmod(path, 0o666);
    hex(&h.finalize())
}

/// SHA-256 of a file, hex.
pub fn sha256_file(path: &Path) -> String {
    let mut f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf).expect("read");
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    hex(&h.finalize())
}

/// SHA-256 of bytes, hex.
pub fn sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The one JSON object a `--json` run printed on stdout.
pub fn json_of(stdout: &str) -> serde_json::Value {
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON object on stdout: {stdout:?}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("bad JSON {line:?}: {e}"))
}

/// A free loopback TCP port (racy but fine for tests).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn wait_for_port(addr: SocketAddr, child: &mut Child, what: &str) {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(20) {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return;
        }
        if let Ok(Some(st)) = child.try_wait() {
            panic!("{what} exited early: {st}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what} did not start listening on {addr}");
}

/// A child process killed (by PID) and reaped on drop.
pub struct Proc {
    pub child: Child,
    pub addr: SocketAddr,
    pub log: PathBuf,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    /// `ftp://127.0.0.1:port` + `path` (path starts with '/').
    pub fn url(&self, path: &str) -> String {
        format!("ftp://{}{}", self.addr, path)
    }
    /// The server's log so far (for failure messages).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Start `drsftp serve` on a free loopback port, serving `root` anonymously, with extra args.
pub fn drsftp_server(root: &Path, extra: &[&str]) -> Proc {
    let log = root.with_extension("serve.log");
    let mut child = Command::new(bin())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--anonymous",
            "--print-addr",
            "--root",
        ])
        .arg(root)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("spawn drsftp serve");
    let addr = printed_addr(&mut child);
    Proc { child, addr, log }
}

/// The address a `drsftp serve --print-addr` child announces on its stdout (`listening <addr>`).
pub fn printed_addr(child: &mut Child) -> SocketAddr {
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read addr");
    line.trim()
        .strip_prefix("listening ")
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("drsftp serve printed {line:?}"))
}

/// Start Debian's globus-gridftp-server, anonymous, on loopback, home `/` (paths in URLs are host paths).
pub fn globus_server() -> Proc {
    let port = free_port();
    let log = std::env::temp_dir().join(format!("gftp-{port}.log"));
    let mut child = Command::new("globus-gridftp-server")
        .args(["-aa", "-anonymous-user", "nobody", "-home-dir", "/"])
        .args([
            "-control-interface",
            "127.0.0.1",
            "-data-interface",
            "127.0.0.1",
        ])
        .args(["-p", &port.to_string(), "-l"])
        .arg(&log)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn globus-gridftp-server");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    wait_for_port(addr, &mut child, "globus-gridftp-server");
    Proc { child, addr, log }
}

/// For a test against Globus (skipped with a printed reason, `None`, when the server is not installed): an open
/// temporary directory holding `name` with `len` random bytes (`seed`), the file's path, its SHA-256 and a running
/// globus-gridftp-server.
pub fn globus_with_file(
    test: &str,
    name: &str,
    len: usize,
    seed: u64,
) -> Option<(tempfile::TempDir, PathBuf, String, Proc)> {
    if !have("globus-gridftp-server", test) {
        return None;
    }
    let dir = open_tempdir();
    let src = dir.path().join(name);
    let want = random_file(&src, len, seed);
    let srv = globus_server();
    Some((dir, src, want, srv))
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
