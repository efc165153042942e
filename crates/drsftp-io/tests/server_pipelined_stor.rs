//! A hostile client that pipelines many STORs and never connects a data channel (with PASV, or with PORT toward a
//! port nobody listens on), then QUITs or drops the control connection: since a STOR opens its part file before
//! its `150` (`FsRequest::OpenWrite`, the session's open slot), each one creates a hidden part and holds it open.
//! Afterwards no part file and no open file may be left under the served root, and the server still serves an
//! ordinary client. Real sockets, an in-process server; open files are read from this process's /proc/self/fd.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use drsftp_io::client::ClientOptions;
use drsftp_io::data::Progress;
use drsftp_io::server::{self, ServerParams, Shutdown};
use drsftp_testkit::ctl::{port_arg, Ctl};
use drsftp_testkit::data::random_bytes;
use drsftp_testkit::server::fs_params;
use tokio::time::timeout;

/// How many STORs one hostile session pipelines, each behind its ALLO: 241 lines with the QUIT, within the
/// `MAX_QUEUED_COMMANDS` (256) a session queues (more is answered `421` and closed, the last case below).
const STORS: usize = 120;

struct Srv {
    addr: std::net::SocketAddr,
    _shutdown: Shutdown,
}

async fn start(params: ServerParams) -> Srv {
    let (addr, shutdown, _task) = server::spawn("127.0.0.1:0".parse().unwrap(), params)
        .await
        .expect("server");
    Srv {
        addr,
        _shutdown: shutdown,
    }
}

/// Everything below `root` (recursively), as paths relative to it.
fn entries(root: &Path) -> Vec<String> {
    let mut out = vec![];
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p.clone());
            }
            out.push(p.strip_prefix(root).unwrap().display().to_string());
        }
    }
    out
}

/// Part files below `root` (hidden `.<name>.drsftp-part.<unique>` names).
fn parts(root: &Path) -> Vec<String> {
    entries(root)
        .into_iter()
        .filter(|p| {
            let name = p.rsplit('/').next().unwrap_or(p);
            drsftp_storage::is_part_name(name)
        })
        .collect()
}

/// This process's open files strictly below `root` (an unlinked part still open reads `... (deleted)`, and a part's
/// directory fd counts too); the served root's own directory fd is not one of them.
fn open_below(root: &Path) -> Vec<String> {
    let below = format!("{}/", root.canonicalize().unwrap().display());
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|t| t.display().to_string())
        .filter(|t| t.starts_with(&below))
        .collect()
}

/// Waits (up to 5 s: sessions end asynchronously) until no part and no open file is left below `root`.
async fn settled(root: &Path, what: &str) {
    let t = Instant::now();
    loop {
        let (p, o) = (parts(root), open_below(root));
        if p.is_empty() && o.is_empty() {
            eprintln!("{what}: clean after {:?}", t.elapsed());
            return;
        }
        if t.elapsed() > Duration::from_secs(5) {
            panic!(
                "{what}: after 5 s, {} part files ({:?}...) and {} open files ({:?}...) under the root",
                p.len(),
                p.first(),
                o.len(),
                o.first()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `n` STORs (each with its ALLO, as an upload batch sends them) in one write, then `tail` if any.
fn batch(n: usize, tail: Option<&str>) -> String {
    let mut lines: Vec<String> = (0..n)
        .flat_map(|i| [format!("ALLO {}", 1000 + i), format!("STOR /in/f{i}.bin")])
        .collect();
    lines.extend(tail.map(String::from));
    lines.join("\r\n")
}

/// An ordinary client still uploads and reads back a file (MODE E, two streams).
async fn serves_a_normal_client(srv: &Srv, root: &Path, what: &str) {
    let dir = tempfile::tempdir().unwrap();
    let data = random_bytes(300_000, 22);
    let src = dir.path().join("ok.bin");
    std::fs::write(&src, &data).unwrap();
    let mut c = drsftp_testkit::server::login(srv.addr).await;
    let opts = ClientOptions {
        streams: 2,
        mode_e: true,
        timeout: Duration::from_secs(15),
        ..ClientOptions::default()
    };
    let remote = format!("/in/ok-{}.bin", what.len());
    let up = timeout(
        Duration::from_secs(20),
        c.upload(&src, &remote, &opts, Arc::new(Progress::new())),
    )
    .await;
    assert!(matches!(up, Ok(Ok(_))), "{what}: upload after: {up:?}");
    assert!(std::fs::read(root.join(remote.trim_start_matches('/'))).unwrap() == data);
    let back = dir.path().join("back.bin");
    let down = timeout(
        Duration::from_secs(20),
        c.download(&remote, &back, &opts, Arc::new(Progress::new())),
    )
    .await;
    assert!(
        matches!(down, Ok(Ok(_))),
        "{what}: download after: {down:?}"
    );
    assert!(std::fs::read(&back).unwrap() == data);
    let _ = c.quit().await;
}

async fn hostile_session(srv: &Srv, mode_e: bool) -> Ctl {
    let mut c = Ctl::login(srv.addr).await;
    if mode_e {
        assert!(c.cmd("MODE E").await.starts_with("200"));
    }
    c
}

#[tokio::test]
async fn pipelined_stors_on_pasv_never_connected_then_dropped_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir(root.join("in")).unwrap();
    // The default data timeout (no limit of its own): only the session's end may release what the STOR opened.
    let srv = start(fs_params(root)).await;
    for mode_e in [false, true] {
        let what = if mode_e {
            "MODE E, PASV, dropped"
        } else {
            "stream, PASV, dropped"
        };
        let mut c = hostile_session(&srv, mode_e).await;
        let _port = c.pasv().await;
        c.send(&batch(STORS, Some("QUIT"))).await;
        let first = c.reply().await;
        assert!(first.starts_with("200"), "{what}: ALLO: {first}");
        let go = c.reply().await;
        assert!(
            go.starts_with("150") || go.starts_with("125"),
            "{what}: {go}"
        );
        // The first STOR's part is open while its transfer waits for the data connection that never comes: the
        // test sees what it checks for.
        assert_eq!(parts(root).len(), 1, "{what}: {:?}", entries(root));
        let open = open_below(root);
        assert!(
            open.iter().any(|t| t.contains(".drsftp-part.")),
            "{what}: {open:?}"
        );
        drop(c);
        settled(root, what).await;
    }
    serves_a_normal_client(&srv, root, "after PASV sessions dropped").await;
}

#[tokio::test]
async fn pipelined_stors_on_a_dead_port_then_quit_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir(root.join("in")).unwrap();
    let srv = start(fs_params(root)).await;
    // A port on the client's own address that nobody listens on: every STOR opens its part, gets its 150, fails to
    // connect (425), and the next one follows.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    for mode_e in [false, true] {
        let what = if mode_e {
            "MODE E, PORT, QUIT"
        } else {
            "stream, PORT, QUIT"
        };
        let mut c = hostile_session(&srv, mode_e).await;
        assert!(c
            .cmd(&format!("PORT {}", port_arg(dead)))
            .await
            .starts_with("200"));
        c.send(&batch(STORS, Some("QUIT"))).await;
        let t = Instant::now();
        let (mut prelim, mut refused) = (0, 0);
        loop {
            let r = match timeout(Duration::from_secs(60), c.try_reply()).await {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => panic!("{what}: closed before 221: {e}"),
                Err(_) => panic!("{what}: no 221 within 60 s"),
            };
            match &r[..3] {
                "150" | "125" => prelim += 1,
                "425" | "426" | "451" => refused += 1,
                "221" => break,
                _ => {}
            }
        }
        eprintln!(
            "{what}: {prelim} preliminary replies, {refused} refused of {STORS} STORs in {:?}",
            t.elapsed()
        );
        assert!(prelim >= 1, "{what}: no STOR opened its part");
        assert!(refused >= STORS - 1, "{what}: {refused}");
        settled(root, what).await;
        assert_eq!(entries(root), vec!["in".to_string()], "{what}");
    }
    // And one that drops the connection in the middle of its batch.
    let mut c = hostile_session(&srv, true).await;
    assert!(c
        .cmd(&format!("PORT {}", port_arg(dead)))
        .await
        .starts_with("200"));
    c.send(&batch(STORS, None)).await;
    for _ in 0..20 {
        c.reply().await;
    }
    drop(c);
    settled(root, "MODE E, PORT, dropped mid-batch").await;
    // More than the session queues: 421 and closed, wherever the first STORs had got to.
    let mut c = hostile_session(&srv, true).await;
    assert!(c
        .cmd(&format!("PORT {}", port_arg(dead)))
        .await
        .starts_with("200"));
    c.send(&batch(2 * STORS, Some("QUIT"))).await;
    let mut last = String::new();
    while let Ok(r) = c.try_reply().await {
        last = r;
    }
    assert!(last.starts_with("421"), "{last}");
    settled(root, "MODE E, PORT, flooded past the queue").await;
    serves_a_normal_client(&srv, root, "after PORT sessions").await;
}
