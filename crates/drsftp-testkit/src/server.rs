//! drsftp servers for tests, on 127.0.0.1: a child process ([`ServerProcess`], the spawned `drsftp serve` binary
//! or any other server) killed by its PID on drop, and with the `server` feature an in-process server
//! ([`TestServer`]) shut down on drop. Also a free loopback port and the address `drsftp serve --print-addr`
//! announces.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[cfg(feature = "server")]
pub use in_process::{fs_params, login, TestServer};

/// A free loopback TCP port (racy but fine for tests).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A server running as a child process, logging to `log`. On drop, the children it forked (Globus forks one per
/// control connection) get up to 3 s to finish, so none is left an orphan; then the process we started is killed
/// by its PID and reaped; when the test panicked, the log's tail is printed.
#[derive(Debug)]
pub struct ServerProcess {
    pub child: Child,
    pub addr: SocketAddr,
    pub log: PathBuf,
}

impl ServerProcess {
    /// The listening port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `127.0.0.1:<port>`.
    pub fn authority(&self) -> String {
        self.addr.to_string()
    }

    /// `ftp://127.0.0.1:<port>` + `path` (which starts with '/').
    pub fn url(&self, path: &str) -> String {
        format!("ftp://{}{}", self.addr, path)
    }

    /// The server's log so far (for failure messages).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last 4000 bytes or so of the server's log.
    pub fn log_tail(&self) -> String {
        let s = self.log_text();
        let start = s.len().saturating_sub(4000);
        let at = s
            .char_indices()
            .find(|(i, _)| *i >= start)
            .map_or(0, |(i, _)| i);
        s[at..].to_string()
    }

    /// Waits (up to 3 s) until no process has this server as its parent.
    pub fn settle(&self) {
        self.settle_for(Duration::from_secs(3));
    }

    /// Waits up to `limit` until no process has this server as its parent (Globus's session processes ended).
    pub fn settle_for(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while has_children(self.child.id()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.settle();
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "--- server log tail ({}) ---\n{}",
                self.log.display(),
                self.log_tail()
            );
        }
    }
}

/// True while some process has `pid` as its parent.
fn has_children(pid: u32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    let pid = pid.to_string();
    dir.filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read_to_string(e.path().join("status")).ok())
        .any(|st| {
            st.lines()
                .any(|l| l.strip_prefix("PPid:").map(str::trim) == Some(pid.as_str()))
        })
}

/// Waits up to `timeout` for `addr` to accept connections; `false` if the child exited first or time ran out.
pub fn wait_for_port(addr: SocketAddr, child: &mut Child, timeout: Duration) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < timeout {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Starts `<bin> serve` (the drsftp binary under test, `env!("CARGO_BIN_EXE_drsftp")`) on a free loopback port,
/// serving `root` anonymously, with `extra` arguments; its stderr goes to `<root>.serve.log`.
pub fn drsftp_server(bin: &Path, root: &Path, extra: &[&str]) -> ServerProcess {
    drsftp_serve(Command::new(bin), "127.0.0.1:0", root, extra)
}

/// Runs `cmd` (the drsftp binary, or a command that runs it, e.g. in a lab host) as `serve --listen <listen>
/// --anonymous --anonymous-write --print-addr --root <root> <extra>` (the suites upload anonymously), its stderr going to `<root>.serve.log`, and waits for the
/// address it announces.
pub fn drsftp_serve(cmd: Command, listen: &str, root: &Path, extra: &[&str]) -> ServerProcess {
    let mut args = vec!["--anonymous", "--anonymous-write"];
    args.extend_from_slice(extra);
    drsftp_serve_as(cmd, listen, root, "serve", &args)
}

/// As [`drsftp_serve`] without the anonymous flags (servers that must refuse anonymous logins, such as data
/// movers); the log goes to `<root>.<log>.log`, so several servers may share one root.
pub fn drsftp_serve_as(
    mut cmd: Command,
    listen: &str,
    root: &Path,
    log: &str,
    extra: &[&str],
) -> ServerProcess {
    let log = root.with_extension(format!("{log}.log"));
    let mut child = cmd
        .args(["serve", "--listen", listen, "--print-addr"])
        .arg("--root")
        .arg(root)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let addr = printed_addr(&mut child);
    ServerProcess { child, addr, log }
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

#[cfg(feature = "server")]
mod in_process {
    use std::net::SocketAddr;
    use std::path::Path;
    use std::sync::Arc;
    use std::time::Duration;

    use drsftp_io::client::Client;
    use drsftp_io::data::DataOpts;
    use drsftp_io::server::{self, ServerParams, Shutdown};
    use drsftp_proto::server::ServerConfig;
    use drsftp_storage::FsStorage;
    use tokio::task::JoinHandle;

    /// Server parameters with defaults, serving the local tree `root`, except that anonymous sessions may
    /// write (the suites upload anonymously; the read-only default has its own tests).
    pub fn fs_params(root: &Path) -> ServerParams {
        ServerParams::new(
            ServerConfig {
                anonymous_write: true,
                ..ServerConfig::default()
            },
            DataOpts::default(),
            Arc::new(FsStorage::new(root).expect("served root")),
        )
    }

    /// An anonymous login at `addr`.
    pub async fn login(addr: impl std::fmt::Display) -> Client {
        Client::connect(&addr.to_string(), "anonymous", "x", Duration::from_secs(30))
            .await
            .expect("login")
    }

    /// A drsftp server in this process on a free loopback port. Dropping it triggers the shutdown (running
    /// sessions get `421`) and aborts the accept loop.
    #[derive(Debug)]
    pub struct TestServer {
        pub addr: SocketAddr,
        shutdown: Shutdown,
        task: Option<JoinHandle<std::io::Result<()>>>,
    }

    impl TestServer {
        /// Starts a server with `params`.
        pub async fn start(params: ServerParams) -> TestServer {
            let (addr, shutdown, task) = server::spawn("127.0.0.1:0".parse().unwrap(), params)
                .await
                .expect("spawn the drsftp server");
            TestServer {
                addr,
                shutdown,
                task: Some(task),
            }
        }

        /// Starts a server with default parameters serving `root` ([`fs_params`]).
        pub async fn serve(root: &Path) -> TestServer {
            TestServer::start(fs_params(root)).await
        }

        /// An anonymous login to this server.
        pub async fn login(&self) -> Client {
            login(self.addr).await
        }

        /// Triggers the shutdown and waits for the accept loop to end; its result.
        pub async fn stop(mut self) -> std::io::Result<()> {
            self.shutdown.trigger();
            let task = self.task.take().expect("task");
            task.await.unwrap_or_else(|e| Err(std::io::Error::other(e)))
        }
    }

    impl Drop for TestServer {
        fn drop(&mut self) {
            self.shutdown.trigger();
            if let Some(t) = self.task.take() {
                t.abort();
            }
        }
    }
}
