//! Dropping root: switch the whole process to an unprivileged user for good (supplementary groups, gid, uid),
//! refusing root as the target and checking afterwards that the switch stuck.
//!
//! A server started as root (to bind port 2811 or below 1024, to open its root directory) drops to the account
//! it serves as, so that a confinement bug can only ever reach what that account may reach. The order matters:
//! groups and gid while still root (afterwards they can no longer be changed), the uid last. All three ids
//! (real, effective, saved) are set, so nothing can switch back. glibc applies each of these calls to every
//! thread of the process, so it is safe to call with a runtime's threads already running.

use std::ffi::CString;
use std::io;

use nix::unistd::{self, Gid, Uid, User};

/// Who the process runs as after [`drop_privileges`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// The user id now real, effective and saved.
    pub uid: u32,
    /// The group id now real, effective and saved.
    pub gid: u32,
}

fn denied(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, msg)
}

/// Look `user` up (name, or numeric uid) in the password database.
fn lookup(user: &str) -> io::Result<User> {
    let by_name = User::from_name(user).map_err(io::Error::from)?;
    let found = match by_name {
        Some(u) => Some(u),
        None => match user.parse::<u32>() {
            Ok(uid) => User::from_uid(Uid::from_raw(uid)).map_err(io::Error::from)?,
            Err(_) => None,
        },
    };
    found.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no such user: {user:?}")))
}

/// Switch the process to `user` (a name or a numeric uid) with its groups, irrevocably.
///
/// Refused: a target that is root (uid 0), and, when not running as root, any target other than the current
/// user (then nothing is changed and the current identity is returned). After switching, the real/effective/saved
/// ids are read back and regaining root must fail, or this returns an error (and the caller must not go on).
pub fn drop_privileges(user: &str) -> io::Result<Identity> {
    let target = lookup(user)?;
    if target.uid.is_root() {
        return Err(denied(format!(
            "refusing to run as {user:?}: it is root (uid 0), which drops nothing"
        )));
    }
    let want = Identity {
        uid: target.uid.as_raw(),
        gid: target.gid.as_raw(),
    };
    if !unistd::geteuid().is_root() {
        // Nothing to drop: fine if we already are that user, an error otherwise (we cannot become them).
        return if unistd::geteuid() == target.uid {
            Ok(Identity {
                uid: want.uid,
                gid: unistd::getegid().as_raw(),
            })
        } else {
            Err(denied(format!(
                "cannot switch to {user:?}: not running as root"
            )))
        };
    }
    let name = CString::new(target.name.as_str())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "user name holds a NUL byte"))?;
    // Groups first: only root may set them, so they go before the uid.
    unistd::initgroups(&name, target.gid).map_err(io::Error::from)?;
    unistd::setresgid(target.gid, target.gid, target.gid).map_err(io::Error::from)?;
    unistd::setresuid(target.uid, target.uid, target.uid).map_err(io::Error::from)?;
    verify(want)?;
    Ok(want)
}

/// Check that the switch to `want` stuck: all three uids and gids are the target's, and root cannot be regained.
fn verify(want: Identity) -> io::Result<()> {
    let r = unistd::getresuid().map_err(io::Error::from)?;
    let g = unistd::getresgid().map_err(io::Error::from)?;
    let uids = [r.real, r.effective, r.saved].map(Uid::as_raw);
    let gids = [g.real, g.effective, g.saved].map(Gid::as_raw);
    if uids != [want.uid; 3] || gids != [want.gid; 3] {
        return Err(denied(format!(
            "privilege drop did not stick: uids {uids:?}, gids {gids:?}, wanted {want:?}"
        )));
    }
    if unistd::setuid(Uid::from_raw(0)).is_ok() || unistd::setgid(Gid::from_raw(0)).is_ok() {
        return Err(denied(
            "privilege drop did not stick: root could be regained".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::process::Command;

    /// Set in the child process that actually drops (dropping is irreversible, so never in the test runner).
    const CHILD_ENV: &str = "DRSFTP_PRIVS_TEST_DIR";

    #[test]
    fn root_and_unknown_targets_are_refused() {
        let e = drop_privileges("root").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert!(e.to_string().contains("refusing"), "{e}");
        assert_eq!(
            drop_privileges("0").unwrap_err().kind(),
            io::ErrorKind::PermissionDenied
        );
        let e = drop_privileges("no-such-user-drsftp").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        // Still whoever we were.
        assert_eq!(unistd::getuid(), unistd::geteuid());
    }

    /// Runs only in the child started by `dropped_process_cannot_read_root_only_files`: drops to `nobody`, then
    /// must fail to read the 0600 root-owned file and still read the 0644 one.
    #[test]
    fn child_drops_and_is_confined() {
        let Ok(dir) = std::env::var(CHILD_ENV) else {
            return;
        };
        let dir = std::path::Path::new(&dir);
        let id = drop_privileges("nobody").unwrap();
        assert_ne!(id.uid, 0);
        assert_eq!(unistd::geteuid().as_raw(), id.uid);
        let e = std::fs::read(dir.join("private")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert_eq!(std::fs::read(dir.join("public")).unwrap(), b"public");
        assert!(drop_privileges("root").is_err());
    }

    #[test]
    fn dropped_process_cannot_read_root_only_files() {
        if !unistd::geteuid().is_root() || lookup("nobody").is_err() {
            eprintln!("skipped: needs root and a `nobody` user");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        for (name, mode) in [("private", 0o600), ("public", 0o644)] {
            let p = dir.path().join(name);
            std::fs::write(&p, name).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        // The same test binary, running only the child test, with the directory to probe.
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "privs::tests::child_drops_and_is_confined",
                "--nocapture",
            ])
            .args(["--test-threads", "1"])
            .env(CHILD_ENV, dir.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "child failed: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The parent (the test runner) is still root.
        assert!(unistd::geteuid().is_root());
    }
}
