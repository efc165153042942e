//! A striped drsftp cluster on loopback for the tests (docs/striping.md): `drsftp serve --movers` (the frontend,
//! on 127.0.0.1, moving no data) with `drsftp serve --mover` data movers on 127.0.0.2, 127.0.0.3, ... all
//! serving one root; extra arguments for the frontend and the movers (TLS, users), and a mover killed (SIGKILL
//! by PID) and restarted on the same address.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{bin, chmod, drsftp_server, ServerProcess};
use drsftp_testkit::server::drsftp_serve_as;

/// The mover account's password of a lone [`mover`].
pub const MOVER_PASSWORD: &str = "Mv-s3cret-4b9e-n0-leak";

/// A frontend with its movers, all serving `root`.
pub struct Cluster {
    pub front: ServerProcess,
    pub movers: Vec<ServerProcess>,
    pub root: PathBuf,
    /// The mover account's password, unique to this cluster (a capture test looks for it on the wire while
    /// other clusters log in in cleartext).
    pub mover_password: String,
    mover_extra: Vec<String>,
}

/// A mover on `listen` (port 0 picks one) for the frontend on 127.0.0.1.
pub fn mover(
    root: &Path,
    listen: &str,
    i: usize,
    password: &str,
    extra: &[String],
) -> ServerProcess {
    let login = format!("mover:{password}");
    let mut args = vec!["--mover", "127.0.0.1", "--user", login.as_str()];
    args.extend(extra.iter().map(String::as_str));
    drsftp_serve_as(
        Command::new(bin()),
        listen,
        root,
        &format!("mover{i}"),
        &args,
    )
}

impl Cluster {
    /// `n` movers; globus-url-copy third-party copies need `--third-party all` (it sends no PEER).
    pub fn start(dir: &Path, n: usize) -> Cluster {
        Cluster::with(dir, n, &["--third-party", "all"], &[])
    }

    /// `n` movers with `mover_extra` arguments; `front_extra` for the frontend.
    pub fn with(dir: &Path, n: usize, front_extra: &[&str], mover_extra: &[&str]) -> Cluster {
        let root = dir.join("root");
        std::fs::create_dir_all(&root).unwrap();
        chmod(&root, 0o777);
        let mover_extra: Vec<String> = mover_extra.iter().map(|s| s.to_string()).collect();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let mover_password = format!("Mv-{}-{nanos}-n0-leak", std::process::id());
        let movers: Vec<ServerProcess> = (0..n)
            .map(|i| {
                let listen = format!("127.0.0.{}:0", i + 2);
                mover(&root, &listen, i, &mover_password, &mover_extra)
            })
            .collect();
        let login = dir.join("movers.login");
        std::fs::write(&login, format!("mover:{mover_password}\n")).unwrap();
        chmod(&login, 0o600);
        let list: Vec<String> = movers.iter().map(|m| m.authority()).collect();
        let list = list.join(",");
        let mut args = vec![
            "--movers",
            list.as_str(),
            "--movers-login",
            login.to_str().unwrap(),
        ];
        args.extend(front_extra);
        let front = drsftp_server(&root, &args);
        Cluster {
            front,
            movers,
            root,
            mover_password,
            mover_extra,
        }
    }

    /// SIGKILL (by PID) mover `i` and reap it.
    pub fn kill_mover(&mut self, i: usize) {
        let m = &mut self.movers[i];
        m.child.kill().expect("kill mover");
        let _ = m.child.wait();
    }

    /// Stops mover `i` with SIGSTOP (by PID): it holds its connections but does nothing.
    pub fn stop_mover(&self, i: usize) {
        let ok = Command::new("kill")
            .args(["-STOP", &self.movers[i].child.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -STOP mover {i}");
    }

    /// A new mover `i` on the address the old one had.
    pub fn restart_mover(&mut self, i: usize) {
        let addr = self.movers[i].authority();
        self.movers[i] = mover(
            &self.root,
            &addr,
            i,
            &self.mover_password,
            &self.mover_extra,
        );
    }

    /// The frontend's and every mover's log tail, for failure messages.
    pub fn logs(&self) -> String {
        let mut s = format!("--- frontend ---\n{}", self.front.log_tail());
        for (i, m) in self.movers.iter().enumerate() {
            s.push_str(&format!("\n--- mover {i} ---\n{}", m.log_tail()));
        }
        s
    }
}
