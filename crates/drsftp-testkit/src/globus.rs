//! Debian's Globus GridFTP tools as test peers: finding `globus-gridftp-server` / `globus-url-copy` (a test
//! without them prints `SKIPPED <test>: ...` and passes), and a `globus-gridftp-server` on a free loopback port,
//! anonymous, home `/`, killed by its PID on drop (see [`ServerProcess`]).

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
    let bin = find_tool(GLOBUS_SERVER).expect("globus-gridftp-server is installed");
    let log = dir.join("server.log");
    for _attempt in 0..5 {
        let port = free_port();
        let mut child = Command::new(&bin)
            .args(["-aa", "-anonymous-user", "nobody", "-p"])
            .arg(port.to_string())
            .args([
                "-control-interface",
                "127.0.0.1",
                "-data-interface",
                "127.0.0.1",
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
        let addr = ([127, 0, 0, 1], port).into();
        if wait_for_port(addr, &mut child, Duration::from_secs(10)) {
            return ServerProcess { child, addr, log };
        }
        // Exited (port taken?) or silent: retry with another port.
        eprintln!("globus-gridftp-server did not come up on port {port}; retrying");
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!(
        "globus-gridftp-server would not start (log in {})",
        log.display()
    );
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
