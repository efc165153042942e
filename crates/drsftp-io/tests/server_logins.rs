//! The trust boundary against an in-process server over real loopback sockets: anonymous sessions are read-only
//! by default, users from a users file see only their own root, failed logins are slowed and counted per address,
//! sessions are capped (overall and per address) without leaking descriptors, and unauthenticated connections
//! are closed after the login timeout.

use std::sync::Arc;
use std::time::{Duration, Instant};

use drsftp_io::data::DataOpts;
use drsftp_io::server::{hash_password, ServerLimits, ServerParams, UserEntry, Users, UsersFile};
use drsftp_proto::server::ServerConfig;
use drsftp_storage::FsStorage;
use drsftp_testkit::server::TestServer;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// A raw control connection: one command, one (possibly multi-line) reply.
struct Ctl {
    rd: BufReader<OwnedReadHalf>,
    wr: OwnedWriteHalf,
}

impl Ctl {
    async fn connect(addr: std::net::SocketAddr) -> (Ctl, String) {
        let (rd, wr) = TcpStream::connect(addr).await.unwrap().into_split();
        let mut c = Ctl {
            rd: BufReader::new(rd),
            wr,
        };
        let greeting = c.reply().await;
        (c, greeting)
    }

    /// The next whole reply ("" at EOF).
    async fn reply(&mut self) -> String {
        let mut all = String::new();
        loop {
            let mut line = String::new();
            if self.rd.read_line(&mut line).await.unwrap_or(0) == 0 {
                return all;
            }
            all.push_str(&line);
            let b = line.as_bytes();
            if b.len() >= 4 && b[..3].iter().all(u8::is_ascii_digit) && b[3] == b' ' {
                return all;
            }
        }
    }

    async fn cmd(&mut self, line: &str) -> String {
        self.wr
            .write_all(format!("{line}\r\n").as_bytes())
            .await
            .unwrap();
        self.reply().await
    }

    async fn login(&mut self, user: &str, pass: &str) -> String {
        assert!(self.cmd(&format!("USER {user}")).await.starts_with("331"));
        self.cmd(&format!("PASS {pass}")).await
    }
}

fn tree() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("keep.txt"), b"keep").unwrap();
    std::fs::write(d.path().join("secret.txt"), b"outside alice's root").unwrap();
    std::fs::create_dir(d.path().join("dir")).unwrap();
    std::fs::create_dir(d.path().join("alice")).unwrap();
    std::fs::write(d.path().join("alice/mine.txt"), b"mine").unwrap();
    d
}

fn listing(d: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = walk(d, d);
    v.sort();
    v
}

fn walk(base: &std::path::Path, d: &std::path::Path) -> Vec<String> {
    let mut v = vec![];
    for e in std::fs::read_dir(d).unwrap() {
        let p = e.unwrap().path();
        v.push(p.strip_prefix(base).unwrap().display().to_string());
        if p.is_dir() {
            v.extend(walk(base, &p));
        }
    }
    v
}

fn params(root: &std::path::Path, session: ServerConfig) -> ServerParams {
    ServerParams::new(
        session,
        DataOpts::default(),
        Arc::new(FsStorage::new(root).unwrap()),
    )
}

const WRITES: [&str; 6] = [
    "STOR new.bin",
    "DELE keep.txt",
    "RNFR dir",
    "MKD made",
    "RMD dir",
    "APPE keep.txt",
];

/// Before this change every one of these succeeded for `anonymous` (the tree lost keep.txt and dir).
#[tokio::test]
async fn anonymous_writes_are_refused_and_the_tree_is_unchanged() {
    let d = tree();
    let before = listing(d.path());
    let srv = TestServer::start(params(d.path(), ServerConfig::default())).await;
    let (mut c, _) = Ctl::connect(srv.addr).await;
    assert!(c.login("anonymous", "x@").await.starts_with("230"));
    assert!(c.cmd("PASV").await.starts_with("227"));
    for w in WRITES {
        assert_eq!(
            c.cmd(w).await,
            "550 Permission denied: read-only session.\r\n",
            "{w}"
        );
    }
    assert_eq!(
        c.cmd("RNTO moved").await,
        "550 Permission denied: read-only session.\r\n"
    );
    assert!(c.cmd("SIZE keep.txt").await.starts_with("213 4"));
    assert_eq!(listing(d.path()), before);

    // --anonymous-write: the same session may change the tree.
    let srv = TestServer::start(params(
        d.path(),
        ServerConfig {
            anonymous_write: true,
            ..ServerConfig::default()
        },
    ))
    .await;
    let (mut c, _) = Ctl::connect(srv.addr).await;
    c.login("anonymous", "x@").await;
    assert!(c.cmd("MKD made").await.starts_with("257"));
    assert!(c.cmd("RNFR made").await.starts_with("350"));
    assert!(c.cmd("RNTO made2").await.starts_with("250"));
    assert!(c.cmd("RMD made2").await.starts_with("250"));
    assert!(c.cmd("DELE keep.txt").await.starts_with("250"));
    assert!(!d.path().join("keep.txt").exists());
}

#[tokio::test]
async fn users_file_roots_read_only_users_and_wrong_passwords() {
    let d = tree();
    let hash = hash_password("alice-pw").unwrap();
    let file = UsersFile {
        user: vec![
            UserEntry {
                name: "alice".into(),
                hash: hash.clone(),
                root: Some("/alice".into()),
                read_only: false,
            },
            UserEntry {
                name: "bob".into(),
                hash: hash_password("bob-pw").unwrap(),
                root: None,
                read_only: true,
            },
        ],
    };
    let base = FsStorage::new(d.path()).unwrap();
    let mut users = Users::new();
    users.add_file(&file, &base).unwrap();
    let mut p = params(
        d.path(),
        ServerConfig {
            anonymous: false,
            ..ServerConfig::default()
        },
    );
    p.users = Arc::new(users);
    let srv = TestServer::start(p).await;

    let (mut c, _) = Ctl::connect(srv.addr).await;
    assert_eq!(
        c.login("alice", "alice-pw").await,
        "230 User alice logged in.\r\n"
    );
    assert!(c.cmd("SIZE /mine.txt").await.starts_with("213 4"));
    // The served root's file is outside alice's root: unreachable by any path.
    for p in [
        "/secret.txt",
        "../secret.txt",
        "/../secret.txt",
        "/alice/mine.txt",
    ] {
        assert!(c.cmd(&format!("SIZE {p}")).await.starts_with("550"), "{p}");
    }
    assert!(c.cmd("MKD /made").await.starts_with("257"));
    assert!(d.path().join("alice/made").is_dir());

    let (mut c, _) = Ctl::connect(srv.addr).await;
    assert!(c.login("bob", "bob-pw").await.starts_with("230"));
    assert!(c.cmd("SIZE /secret.txt").await.starts_with("213"));
    assert_eq!(
        c.cmd("DELE /secret.txt").await,
        "550 Permission denied: read-only session.\r\n"
    );
    assert!(d.path().join("secret.txt").exists());

    let (mut c, _) = Ctl::connect(srv.addr).await;
    let t = Instant::now();
    assert_eq!(c.login("alice", "wrong").await, "530 Login incorrect.\r\n");
    assert!(
        t.elapsed() >= Duration::from_millis(450),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(c.login("anonymous", "x").await, "530 Login incorrect.\r\n");
}

/// Guesses per second against one server from one address. Before: ~880/s (a new connection every 3 guesses).
/// Now: the first connection gets 3 guesses in 3.5 s, then the address is refused.
#[tokio::test]
async fn failed_logins_are_slowed_and_capped_per_address() {
    let d = tree();
    let mut p = params(
        d.path(),
        ServerConfig {
            anonymous: false,
            ..ServerConfig::default()
        },
    );
    let mut users = Users::new();
    users.add_password("alice", "right").unwrap();
    p.users = Arc::new(users);
    p.limits = ServerLimits {
        max_failures_per_ip: 4,
        ..ServerLimits::default()
    };
    let srv = TestServer::start(p).await;
    let t0 = Instant::now();
    let mut guesses = 0u32;
    let mut blocked = None;
    'outer: while t0.elapsed() < Duration::from_secs(5) {
        let (mut c, _) = Ctl::connect(srv.addr).await;
        loop {
            let u = c.cmd("USER alice").await;
            if !u.starts_with("331") {
                // 421 after this connection's third failure: reconnect.
                assert!(u.is_empty() || u.contains("Too many failed logins"), "{u}");
                break;
            }
            let r = c.cmd("PASS guess").await;
            if r.starts_with("530") {
                guesses += 1;
            } else if r.starts_with("421") {
                blocked = Some(r);
                break 'outer;
            } else if r.is_empty() {
                break;
            } else {
                panic!("{r}");
            }
        }
    }
    let rate = f64::from(guesses) / t0.elapsed().as_secs_f64();
    println!("{guesses} guesses in {:?}: {rate:.2}/s", t0.elapsed());
    assert!(rate <= 1.5, "{rate}/s");
    assert_eq!(guesses, 4, "the per-address cap");
    assert_eq!(
        blocked.as_deref(),
        Some("421 Too many failed logins from your address; try again later.\r\n")
    );
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

async fn wait_fds(want: usize) -> usize {
    let t = Instant::now();
    loop {
        let n = open_fds();
        if n <= want || t.elapsed() > Duration::from_secs(10) {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// 500 connections at once: the first `max_sessions` are greeted, the rest get a clean 421 and are closed; a fresh
/// client is served once they close, and the server holds no descriptor more than before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_beyond_the_limit_get_421_and_nothing_leaks() {
    let want = 2048;
    match drsftp_sys::rlimit::raise_nofile(want) {
        Ok(n) if n >= want => {}
        other => {
            println!("skipped: RLIMIT_NOFILE cannot reach {want} ({other:?})");
            return;
        }
    }
    let d = tree();
    let mut p = params(d.path(), ServerConfig::default());
    p.limits = ServerLimits {
        max_sessions: 200,
        max_sessions_per_ip: 1000,
        ..ServerLimits::default()
    };
    let srv = TestServer::start(p).await;
    // Warm up (runtime threads, blocking pool) before counting descriptors.
    let (mut c, _) = Ctl::connect(srv.addr).await;
    c.cmd("QUIT").await;
    drop(c);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let base = open_fds();

    let mut conns = Vec::new();
    for _ in 0..500 {
        conns.push(Ctl::connect(srv.addr).await);
    }
    let greeted = conns.iter().filter(|(_, g)| g.starts_with("220")).count();
    let refused: Vec<_> = conns.iter().filter(|(_, g)| g.starts_with("421")).collect();
    assert_eq!(greeted, 200);
    assert_eq!(refused.len(), 300);
    assert_eq!(refused[0].1, "421 Too many sessions, try again later.\r\n");
    // A refused connection is closed at once (EOF after the 421).
    let (mut c, _) = conns.pop().unwrap();
    assert_eq!(c.reply().await, "");
    drop(c);
    drop(conns);
    let (mut c, g) = Ctl::connect(srv.addr).await;
    assert!(g.starts_with("220"), "{g}");
    assert!(c.login("anonymous", "x").await.starts_with("230"));
    c.cmd("QUIT").await;
    drop(c);
    let after = wait_fds(base).await;
    assert!(after <= base, "descriptors: {base} before, {after} after");

    // Per address: the same rule with one client address.
    let mut p = params(d.path(), ServerConfig::default());
    p.limits.max_sessions_per_ip = 2;
    let srv = TestServer::start(p).await;
    let (_a, g1) = Ctl::connect(srv.addr).await;
    let (_b, g2) = Ctl::connect(srv.addr).await;
    let (_c, g3) = Ctl::connect(srv.addr).await;
    assert!(g1.starts_with("220") && g2.starts_with("220"));
    assert_eq!(g3, "421 Too many sessions, try again later.\r\n");
}

#[tokio::test]
async fn unauthenticated_connections_are_closed_after_the_login_timeout() {
    let d = tree();
    let srv = TestServer::start(params(
        d.path(),
        ServerConfig {
            login_timeout: Duration::from_secs(1),
            ..ServerConfig::default()
        },
    ))
    .await;
    let (mut c, _) = Ctl::connect(srv.addr).await;
    let t = Instant::now();
    assert_eq!(
        c.reply().await,
        "421 Login timeout (1 seconds): closing control connection.\r\n"
    );
    assert!(t.elapsed() < Duration::from_secs(3));
    assert_eq!(c.reply().await, "", "closed");
    // A logged-in session is not affected.
    let (mut c, _) = Ctl::connect(srv.addr).await;
    c.login("anonymous", "x").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(c.cmd("NOOP").await.starts_with("200"));
}
