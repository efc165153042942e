//! A throwaway PKI for the FTPS tests: a CA and a server certificate for `localhost` and 127.0.0.1 made with
//! rcgen into a temporary directory, and a `drsftp serve` using it with a user whose password the tests look for;
//! also pyftpdlib's FTPS server over the same certificate (a TLS server without SSCN).
// Every test binary compiles this module but uses only part of it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::common::{drsftp_server, open_tempdir, ServerProcess};
use drsftp_testkit::server::{free_port, wait_for_port};

/// The password of [`USER`]: the capture test looks for it on the wire.
pub const PASSWORD: &str = "Pw-d0nt-l3ak-7e1f";
/// The configured user.
pub const USER: &str = "alice";

/// Certificate files in a directory.
pub struct Pki {
    /// The CA certificate (PEM), what clients trust.
    pub ca: PathBuf,
    /// The server's certificate (PEM).
    pub cert: PathBuf,
    /// The server's key (PEM).
    pub key: PathBuf,
    /// SHA-256 of the server certificate's DER, lower-case hex with colons.
    pub fingerprint: String,
    /// A second, unrelated CA (PEM): trusting only it must fail.
    pub other_ca: PathBuf,
}

fn ca(name: &str) -> (rcgen::Certificate, rcgen::KeyPair) {
    let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    p.distinguished_name
        .push(rcgen::DnType::CommonName, name.to_string());
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = p.self_signed(&key).expect("CA");
    (cert, key)
}

/// A fresh CA and server certificate under `dir`.
pub fn make(dir: &Path) -> Pki {
    let (ca_cert, ca_key) = ca("drsftp test CA");
    let mut p =
        rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .expect("params");
    p.distinguished_name
        .push(rcgen::DnType::CommonName, "localhost".to_string());
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = p.signed_by(&key, &ca_cert, &ca_key).expect("cert");
    let (other, _) = ca("someone else's CA");
    let pki = Pki {
        ca: dir.join("ca.pem"),
        cert: dir.join("server.pem"),
        key: dir.join("server.key"),
        fingerprint: Sha256::digest(cert.der())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":"),
        other_ca: dir.join("other-ca.pem"),
    };
    std::fs::write(&pki.ca, ca_cert.pem()).expect("write");
    std::fs::write(&pki.cert, cert.pem()).expect("write");
    std::fs::write(&pki.key, key.serialize_pem()).expect("write");
    std::fs::write(&pki.other_ca, other.pem()).expect("write");
    pki
}

/// The `serve` arguments for TLS with `pki` (plus `--tls-required` if `required`) and the user.
pub fn serve_args(pki: &Pki, required: bool) -> Vec<String> {
    let mut a = vec![
        "--tls-cert".to_string(),
        pki.cert.display().to_string(),
        "--tls-key".to_string(),
        pki.key.display().to_string(),
        "--user".to_string(),
        format!("{USER}:{PASSWORD}"),
    ];
    if required {
        a.push("--tls-required".into());
    }
    a
}

/// A `drsftp serve` over a fresh PKI in its own temporary directory, serving `root` to [`USER`].
pub struct TlsServer {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    pub pki: Pki,
    pub srv: ServerProcess,
}

/// Starts a [`TlsServer`]; `required`: `--tls-required`.
pub fn serve(required: bool) -> TlsServer {
    let dir = open_tempdir();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let pki = make(dir.path());
    let args = serve_args(&pki, required);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let srv = drsftp_server(&root, &args);
    TlsServer {
        dir,
        root,
        pki,
        srv,
    }
}

/// `ftp://alice:pw@127.0.0.1:port` + path on `s`.
pub fn url(s: &TlsServer, path: &str) -> String {
    format!("ftp://{USER}:{PASSWORD}@{}{path}", s.srv.authority())
}

/// pyftpdlib's FTPS server (`TLS_FTPHandler`: AUTH TLS, PBSZ, PROT, and no SSCN) serving `root` to [`USER`] with
/// `pki`'s server certificate; cleartext data connections are allowed, so only the client can keep data out of
/// cleartext. Left at its defaults otherwise: it starts in TYPE A and refuses SIZE there, as RFC 3659 allows. `None`, with a printed reason, when no Python on this machine has pyftpdlib and pyOpenSSL
/// (scripts/setup.sh installs Debian's python3-pyftpdlib).
pub fn pyftpdlib(test: &str, pki: &Pki, root: &Path) -> Option<ServerProcess> {
    const SERVER: &str = r#"
import logging, sys
from pyftpdlib.authorizers import DummyAuthorizer
from pyftpdlib.handlers import TLS_FTPHandler
from pyftpdlib.servers import FTPServer
root, port, cert, key, user, pw = sys.argv[1:7]
logging.basicConfig(level=logging.DEBUG)
auth = DummyAuthorizer()
auth.add_user(user, pw, root, perm="elradfmw")
class Handler(TLS_FTPHandler):
    certfile = cert
    keyfile = key
    authorizer = auth
FTPServer(("127.0.0.1", int(port)), Handler).serve_forever()
"#;
    let has = |py: &&&str| {
        Command::new(py)
            .args(["-c", "import pyftpdlib.handlers, OpenSSL"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    // Debian's package goes to the system Python, which a pyenv `python3` on PATH does not see.
    let Some(py) = ["python3", "/usr/bin/python3"].iter().find(has) else {
        eprintln!("SKIPPED {test}: no python3 with pyftpdlib and pyOpenSSL (run scripts/setup.sh)");
        return None;
    };
    let log = root.with_extension("pyftpdlib.log");
    let port = free_port();
    let mut child = Command::new(py)
        .args(["-c", SERVER])
        .arg(root)
        .arg(port.to_string())
        .args([&pki.cert, &pki.key])
        .args([USER, PASSWORD])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("spawn pyftpdlib");
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let up = wait_for_port(addr, &mut child, Duration::from_secs(20));
    let srv = ServerProcess { child, addr, log };
    assert!(up, "pyftpdlib did not start: {}", srv.log_text());
    Some(srv)
}

/// A tcpdump capture of every TCP packet on loopback into a file, for the tests that look for cleartext on the
/// wire. Stopped by its own PID (SIGINT flushes the file).
pub struct Capture {
    child: std::process::Child,
    pcap: PathBuf,
    /// tcpdump's stderr after its "listening on" line (the closing "N packets dropped by kernel" lines).
    said: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Capture {
    /// Starts capturing into `pcap` and returns once tcpdump says it is listening; `None` (with a printed
    /// reason) unless root with tcpdump installed.
    pub fn start(test: &str, pcap: &Path) -> Option<Capture> {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        if !root {
            eprintln!("SKIPPED {test}: the capture needs root for tcpdump");
            return None;
        }
        if !crate::common::have("tcpdump", test) {
            return None;
        }
        // The whole interface, only for the test's duration; -U writes each packet at once; a 64 MiB kernel
        // buffer (-B, KiB) holds the whole test's traffic, so a tcpdump starved of CPU on a loaded machine
        // falls behind instead of dropping packets.
        let mut child = Command::new("tcpdump")
            .args(["-i", "lo", "-U", "-s", "0", "-B", "65536", "-w"])
            .arg(pcap)
            .arg("tcp")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tcpdump");
        // tcpdump prints "listening on lo" once the capture is open (warnings may come first; EOF means it
        // failed).
        use std::io::{BufRead, BufReader};
        let mut r = BufReader::new(child.stderr.take().expect("stderr"));
        let mut before = String::new();
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                let _ = child.kill();
                let _ = child.wait();
                panic!("tcpdump did not start listening: {before}");
            }
            if line.contains("listening on") {
                break;
            }
            before.push_str(&line);
        }
        let said = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = said.clone();
        std::thread::spawn(move || {
            let mut line = String::new();
            while r.read_line(&mut line).unwrap_or(0) > 0 {
                sink.lock().unwrap().push_str(&line);
                line.clear();
            }
        });
        Some(Capture {
            child,
            pcap: pcap.to_path_buf(),
            said,
        })
    }

    /// Stops the capture once tcpdump has written what the kernel handed it and returns the file's bytes;
    /// panics, with tcpdump's packet counts, unless it holds at least `floor` bytes (a capture that missed the
    /// data connections proves nothing by lacking a marker).
    pub fn finish(mut self, floor: usize) -> Vec<u8> {
        // A tcpdump behind on a loaded machine is still draining its buffer: wait (bounded) until the file
        // has not grown for a second, since SIGINT ends it without reading what is left.
        let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
        let t0 = std::time::Instant::now();
        let mut last = (size(&self.pcap), std::time::Instant::now());
        while last.1.elapsed() < Duration::from_secs(1) && t0.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(100));
            let now = size(&self.pcap);
            if now != last.0 {
                last = (now, std::time::Instant::now());
            }
        }
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        let cap = std::fs::read(&self.pcap).expect("capture file");
        // The reader thread sees EOF once tcpdump has exited; give it a moment to take the last lines.
        let t0 = std::time::Instant::now();
        while !self.said.lock().unwrap().contains("dropped by kernel")
            && t0.elapsed() < Duration::from_secs(2)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            cap.len() >= floor,
            "capture too small: {} bytes, want at least {floor}; tcpdump said: {}",
            cap.len(),
            self.said.lock().unwrap()
        );
        cap
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        // A panicking test: the capture must not outlive it.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
