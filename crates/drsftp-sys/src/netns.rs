//! Network namespaces: create, enter (setns) and remove them for the WAN lab.
//!
//! Named namespaces follow iproute2's convention: a bind mount at `/run/netns/NAME`, so `ip netns exec NAME ...`
//! works on them. Creation and removal are delegated to `ip netns add/del` (no unsafe needed); entering one is
//! `setns(2)`, which affects only the calling thread, so [`run_in`] does it on a fresh thread.

use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::process::Command;

/// Directory holding named namespace bind mounts.
pub const NETNS_DIR: &str = "/run/netns";

/// Path of the bind mount for namespace `name`.
pub fn path(name: &str) -> PathBuf {
    PathBuf::from(NETNS_DIR).join(name)
}

/// Names of all named network namespaces.
pub fn list() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(NETNS_DIR)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn ip(args: &[&str]) -> io::Result<()> {
    let out = Command::new("ip").args(args).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// Create named namespace `name` (`ip netns add`).
pub fn create(name: &str) -> io::Result<()> {
    ip(&["netns", "add", name])
}

/// Delete named namespace `name` (`ip netns del`); deleting a missing one is not an error.
pub fn delete(name: &str) -> io::Result<()> {
    if !path(name).exists() {
        return Ok(());
    }
    ip(&["netns", "del", name])
}

/// Move the calling thread into namespace `name`.
pub fn enter(name: &str) -> io::Result<()> {
    let f = File::open(path(name))?;
    nix::sched::setns(&f, nix::sched::CloneFlags::CLONE_NEWNET).map_err(io::Error::from)
}

/// A handle on the calling thread's current network namespace, to return to it with [`NsHandle::restore`].
pub struct NsHandle(File);

impl NsHandle {
    /// Remember the calling thread's network namespace.
    pub fn current() -> io::Result<NsHandle> {
        // /proc/thread-self follows the calling thread, not the process's main thread.
        Ok(NsHandle(File::open("/proc/thread-self/ns/net")?))
    }
    /// Move the calling thread back into the remembered namespace.
    pub fn restore(&self) -> io::Result<()> {
        nix::sched::setns(&self.0, nix::sched::CloneFlags::CLONE_NEWNET).map_err(io::Error::from)
    }
}

/// Run `f` on a new thread that has entered namespace `name`, and return its result. Sockets and TUN devices
/// created inside `f` stay in that namespace after the thread ends.
pub fn run_in<F, R>(name: &str, f: F) -> io::Result<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let name = name.to_string();
    std::thread::spawn(move || -> io::Result<R> {
        enter(&name)?;
        Ok(f())
    })
    .join()
    .map_err(|_| io::Error::other("namespace thread panicked"))?
}
