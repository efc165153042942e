//! Debian's Globus GridFTP tools as test peers: finding `globus-gridftp-server` / `globus-url-copy` (a test
//! without them prints `SKIPPED <test>: ...` and passes), and a `globus-gridftp-server` on a free loopback port,
//! anonymous, home `/`, killed by its PID on drop (see [`ServerProcess`]); and a striped Globus endpoint
//! ([`StripedGlobus`]): a frontend (`-r`) on 127.0.0.1 and data nodes (`-dn`) on other loopback addresses sharing
//! one file system, as a cluster sharing a parallel file system would.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::data::open_tempdir;
use crate::server::{free_port, wait_for_port, ServerProcess};

/// The Globus GridFTP server.
pub const GLOBUS_SERVER: &str = "globus-gridftp-server";
/// The Globus GridFTP client.
pub const GLOBUS_URL_COPY: &str = "globus-url-copy";

/// Where `tool` is: itself if it is a path that exists, else the first match on PATH or in /usr/sbin and /sbin
/// (where Debian puts the Globus server, not always on a user's PATH).
pub fn find_tool(tool: &str) -> Option<PathBuf> {
    if tool.contains('/') {
        return Path::new(tool).exists().then(|| PathBuf::from(tool));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

/// True if `tool` is installed ([`find_tool`]); otherwise prints why `test` is skipped.
pub fn have(tool: &str, test: &str) -> bool {
    let found = find_tool(tool).is_some();
    if !found {
        eprintln!("SKIPPED {test}: `{tool}` is not installed (run scripts/setup.sh)");
    }
    found
}

/// Starts a globus-gridftp-server (trying up to five ports) with `extra` arguments, logging to `server.log` in
/// `dir`; panics if it will not start. Home is `/`, so URL paths are host paths.
pub fn start(dir: &Path, extra: &[&str]) -> ServerProcess {
    start_on(dir, "server", Ipv4Addr::LOCALHOST, extra)
}

/// [`start`] with control and data on `ip` (a loopback address), logging to `<name>.log` in `dir`.
fn start_on(dir: &Path, name: &str, ip: Ipv4Addr, extra: &[&str]) -> ServerProcess {
    let bin = find_tool(GLOBUS_SERVER).expect("globus-gridftp-server is installed");
    let log = dir.join(format!("{name}.log"));
    let host = ip.to_string();
    for _attempt in 0..5 {
        let port = free_port();
        let mut child = Command::new(&bin)
            .args(["-aa", "-anonymous-user", "nobody", "-p"])
            .arg(port.to_string())
            .args([
                "-control-interface",
                &host,
                "-data-interface",
                &host,
                "-home-dir",
                "/",
            ])
            .args(extra)
            .arg("-l")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn globus-gridftp-server");
        let addr = (ip, port).into();
        if wait_for_port(addr, &mut child, Duration::from_secs(10)) {
            return ServerProcess { child, addr, log };
        }
        // Exited (port taken?) or silent: retry with another port.
        eprintln!("globus-gridftp-server did not come up on {addr}; retrying");
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!(
        "globus-gridftp-server would not start (log in {})",
        log.display()
    );
}

/// A striped Globus GridFTP endpoint on loopback: data nodes (`-dn`), each on its own loopback address, and a
/// frontend on 127.0.0.1 that names them with `-r` and moves no data itself. A client that sends `SPAS` gets
/// one address per data node; a Globus frontend then uses as many stripes as the client's `SPOR` names
/// (at most one per node), each node moving its share of the file from or to the shared directory. Fields drop
/// in order: the frontend stops before its nodes.
#[derive(Debug)]
pub struct StripedGlobus {
    /// The frontend: the control connection goes here.
    pub frontend: ServerProcess,
    /// The data nodes, in `-r` order.
    pub nodes: Vec<ServerProcess>,
}

impl StripedGlobus {
    /// Starts one data node per address of `node_ips` (loopback addresses such as 127.0.0.2, each node on its own)
    /// and a frontend naming them, logging into `dir` (`frontend.log`, `node<i>.log`), all anonymous with home `/`.
    /// `extra` goes to the frontend (e.g. `-sbs 262144` for the stripe block size).
    pub fn start(dir: &Path, node_ips: &[Ipv4Addr], extra: &[&str]) -> StripedGlobus {
        let nodes: Vec<ServerProcess> = node_ips
            .iter()
            .enumerate()
            .map(|(i, ip)| start_on(dir, &format!("node{i}"), *ip, &["-dn"]))
            .collect();
        let remote = nodes
            .iter()
            .map(|n| n.addr.to_string())
            .collect::<Vec<_>>()
            .join(",");
        let mut args = vec!["-r", remote.as_str()];
        args.extend_from_slice(extra);
        let frontend = start_on(dir, "frontend", Ipv4Addr::LOCALHOST, &args);
        StripedGlobus { frontend, nodes }
    }

    /// The data nodes' addresses (what SPAS answers with, ports aside).
    pub fn node_ips(&self) -> Vec<IpAddr> {
        self.nodes.iter().map(|n| n.addr.ip()).collect()
    }

    /// The frontend's and every node's log tail, for a failure message.
    pub fn log_tail(&self) -> String {
        std::iter::once(&self.frontend)
            .chain(&self.nodes)
            .map(|p| format!("--- {}\n{}", p.log.display(), p.log_tail()))
            .collect()
    }
}

/// For a test against a striped Globus endpoint: an open temporary directory (see [`open_tempdir`], named
/// `prefix...`, shared by all nodes) and a [`StripedGlobus`] with data nodes on `node_ips`; `None`, with a
/// printed reason, when the server is not installed.
pub fn striped_in_tempdir(
    test: &str,
    prefix: &str,
    node_ips: &[Ipv4Addr],
    extra: &[&str],
) -> Option<(tempfile::TempDir, StripedGlobus)> {
    if !have(GLOBUS_SERVER, test) {
        return None;
    }
    let dir = open_tempdir(prefix);
    let g = StripedGlobus::start(dir.path(), node_ips, extra);
    Some((dir, g))
}

/// For a test against Globus: an open temporary directory (see [`open_tempdir`], named `prefix...`) and a server
/// started in it with `extra` arguments; `None`, with a printed reason, when the server is not installed.
pub fn start_in_tempdir(
    test: &str,
    prefix: &str,
    extra: &[&str],
) -> Option<(tempfile::TempDir, ServerProcess)> {
    if !have(GLOBUS_SERVER, test) {
        return None;
    }
    let dir = open_tempdir(prefix);
    let server = start(dir.path(), extra);
    Some((dir, server))
}
