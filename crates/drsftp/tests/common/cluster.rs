//! A striped drsftp cluster on loopback for the tests: `drsftp serve --movers` (the frontend on 127.0.0.1, moving
//! no data) with `drsftp serve --mover` data movers on 127.0.0.2, 127.0.0.3, ..., all sharing one root.

use super::*;
use drsftp_testkit::server::drsftp_serve_as;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A frontend with its movers, all serving `root`.
pub struct Cluster {
    pub front: ServerProcess,
    pub movers: Vec<ServerProcess>,
    pub root: PathBuf,
}

/// A mover on `ip` (port 0 picks one) for the frontend on 127.0.0.1.
pub fn mover(root: &Path, listen: &str, i: usize) -> ServerProcess {
    drsftp_serve_as(
        Command::new(bin()),
        listen,
        root,
        &format!("mover{i}"),
        &["--mover", "127.0.0.1", "--user", "mover:s3cret"],
    )
}

impl Cluster {
    pub fn start(dir: &Path, n: usize) -> Cluster {
        let root = dir.join("root");
        std::fs::create_dir_all(&root).unwrap();
        chmod(&root, 0o777);
        let movers: Vec<ServerProcess> = (0..n)
            .map(|i| mover(&root, &format!("127.0.0.{}:0", i + 2), i))
            .collect();
        let login = dir.join("movers.login");
        std::fs::write(&login, "mover:s3cret\n").unwrap();
        chmod(&login, 0o600);
        let list: Vec<String> = movers.iter().map(|m| m.authority()).collect();
        let front = drsftp_server(
            &root,
            &[
                "--movers",
                &list.join(","),
                "--movers-login",
                login.to_str().unwrap(),
                // globus-url-copy names the other session's movers (loopback) and sends no PEER.
                "--third-party",
                "all",
            ],
        );
        Cluster {
            front,
            movers,
            root,
        }
    }

    pub fn logs(&self) -> String {
        let mut s = format!("--- frontend ---\n{}", self.front.log_tail());
        for (i, m) in self.movers.iter().enumerate() {
            s.push_str(&format!("\n--- mover {i} ---\n{}", m.log_tail()));
        }
        s
    }
}
