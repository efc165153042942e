//! Logins through the binaries: `drsftp passwd` writing a users file from stdin (never argv), `drsftp serve
//! --users` refusing a group-writable file and serving each user its own root, `drsftp copy` taking the password
//! from `DRSFTP_PASSWORD` or a netrc file (never on its command line), an anonymous upload refused by a default
//! (read-only) server with the tree unchanged, and the audit log lines `serve --log info` prints.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

const T: Duration = Duration::from_secs(120);
const PW: &str = "correct horse battery";

/// A served tree: `/secret.txt` and `/alice/mine.txt`.
fn tree() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("root")).unwrap();
    std::fs::write(d.path().join("root/secret.txt"), b"not for alice").unwrap();
    std::fs::create_dir(d.path().join("root/alice")).unwrap();
    std::fs::write(d.path().join("root/alice/mine.txt"), b"alice's file").unwrap();
    d
}

/// `drsftp serve` without the test kit's `--anonymous-write`.
fn serve(root: &Path, extra: &[&str]) -> ServerProcess {
    let log = root.with_extension("serve.log");
    let mut child = Command::new(bin())
        .args([
            "--log",
            "info",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--print-addr",
        ])
        .arg("--root")
        .arg(root)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let addr = printed_addr(&mut child);
    ServerProcess { child, addr, log }
}

#[test]
fn passwd_round_trip_and_per_user_root_with_env_and_netrc_passwords() {
    let d = tree();
    let users = d.path().join("users.toml");
    let (ok, err) = passwd(&users, "alice", &["--root", "/alice"], PW);
    assert!(ok, "{err}");
    let text = std::fs::read_to_string(&users).unwrap();
    assert!(text.contains("$argon2id$"), "{text}");
    assert!(!text.contains(PW));
    let mode = std::fs::metadata(&users).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // Updating keeps one entry.
    let (ok, err) = passwd(&users, "alice", &["--root", "/alice"], PW);
    assert!(ok && err.contains("updated"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&users)
            .unwrap()
            .matches("[[user]]")
            .count(),
        1
    );

    // A group-writable users file is refused at start-up.
    std::fs::set_permissions(&users, std::fs::Permissions::from_mode(0o660)).unwrap();
    let out = Command::new(bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--root"])
        .arg(d.path().join("root"))
        .arg("--users")
        .arg(&users)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("group- or world-writable"), "{err}");
    std::fs::set_permissions(&users, std::fs::Permissions::from_mode(0o600)).unwrap();

    let users_arg = users.to_str().unwrap();
    let srv = serve(&d.path().join("root"), &["--users", users_arg]);
    let port = srv.addr.port();
    let local = d.path().join("got.txt");
    // DRSFTP_PASSWORD: the user in the URL, the password in the environment.
    let args = [
        "copy".to_string(),
        format!("ftp://alice@127.0.0.1:{port}/mine.txt"),
        local.display().to_string(),
    ];
    assert!(args.iter().all(|a| !a.contains(PW)));
    let (ok, _, err) = run(
        Command::new(bin()).args(&args).env("DRSFTP_PASSWORD", PW),
        T,
    );
    assert!(ok, "{err}");
    assert_eq!(std::fs::read(&local).unwrap(), b"alice's file");
    // Outside alice's root: unreachable.
    let args = [
        "copy".to_string(),
        format!("ftp://alice@127.0.0.1:{port}/../secret.txt"),
        d.path().join("s.txt").display().to_string(),
    ];
    let (ok, _, _) = run(
        Command::new(bin()).args(&args).env("DRSFTP_PASSWORD", PW),
        T,
    );
    assert!(!ok);
    // netrc: user and password from the file; the URL names neither.
    let netrc = d.path().join("netrc");
    std::fs::write(
        &netrc,
        format!(
            "machine other login x password y\nmachine 127.0.0.1 login alice password \"{PW}\"\n"
        ),
    )
    .unwrap();
    std::fs::remove_file(&local).unwrap();
    let args = [
        "copy".to_string(),
        format!("ftp://127.0.0.1:{port}/mine.txt"),
        local.display().to_string(),
    ];
    let (ok, _, err) = run(
        Command::new(bin())
            .args(&args)
            .env("NETRC", &netrc)
            .env_remove("DRSFTP_PASSWORD"),
        T,
    );
    assert!(ok, "{err}");
    assert_eq!(std::fs::read(&local).unwrap(), b"alice's file");
    // A wrong password fails.
    let args = [
        "copy".to_string(),
        format!("ftp://alice@127.0.0.1:{port}/mine.txt"),
        local.display().to_string(),
    ];
    let (ok, _, _) = run(
        Command::new(bin())
            .args(&args)
            .env("NETRC", "/nonexistent")
            .env("DRSFTP_PASSWORD", "wrong"),
        T,
    );
    assert!(!ok);
    drop(srv);
    let log = std::fs::read_to_string(d.path().join("root.serve.log")).unwrap();
    assert!(
        log.contains("audit") && log.contains("event=\"login\"") && log.contains("user=\"alice\""),
        "{log}"
    );
    assert!(log.contains("result=\"denied\""), "{log}");
    assert!(log.contains("event=\"transfer\""), "{log}");
    assert!(!log.contains(PW));
}

/// Before: an anonymous upload to `drsftp serve --anonymous` succeeded. Now it is refused (550) and nothing is
/// written; `--anonymous-write` allows it.
#[test]
fn anonymous_upload_is_refused_by_default() {
    let d = tree();
    let root = d.path().join("root");
    let src = d.path().join("up.bin");
    std::fs::write(&src, b"upload").unwrap();
    let srv = serve(&root, &["--anonymous"]);
    let url = format!("ftp://127.0.0.1:{}/up.bin", srv.addr.port());
    let (ok, _, err) = run(
        Command::new(bin()).args(["copy", src.to_str().unwrap(), &url]),
        T,
    );
    assert!(!ok);
    assert!(err.contains("550") || err.contains("read-only"), "{err}");
    assert!(!root.join("up.bin").exists());
    drop(srv);
    let srv = serve(&root, &["--anonymous", "--anonymous-write"]);
    let url = format!("ftp://127.0.0.1:{}/up.bin", srv.addr.port());
    let (ok, _, err) = run(
        Command::new(bin()).args(["copy", src.to_str().unwrap(), &url]),
        T,
    );
    assert!(ok, "{err}");
    assert_eq!(std::fs::read(root.join("up.bin")).unwrap(), b"upload");
}
