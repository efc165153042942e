//! Process helpers for running a lab as a daemon (`drsftp lab up/serve/down`): PID liveness, SIGTERM, and
//! blocking the termination signals so one thread can wait for them.

use nix::sys::signal::{kill, SigSet, Signal};
use nix::unistd::Pid;

/// True if process `pid` exists and is not a zombie (a killed daemon may linger unreaped as a zombie).
pub fn pid_alive(pid: i32) -> bool {
    if kill(Pid::from_raw(pid), None).is_err() {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // Field 3, after the parenthesised command name, is the state.
        Ok(stat) => !matches!(
            stat.rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().next()),
            Some("Z" | "X")
        ),
        Err(_) => false,
    }
}

/// Send SIGTERM to `pid`.
pub fn terminate(pid: i32) -> std::io::Result<()> {
    kill(Pid::from_raw(pid), Signal::SIGTERM).map_err(std::io::Error::from)
}

/// SIGTERM, SIGINT and SIGHUP blocked in the calling thread (and every thread it spawns afterwards).
pub struct TermSignals(SigSet);

impl TermSignals {
    /// Block the signals; call before spawning threads (e.g. before `Lab::up`).
    pub fn block() -> std::io::Result<TermSignals> {
        let mut set = SigSet::empty();
        for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
            set.add(s);
        }
        set.thread_block()?;
        Ok(TermSignals(set))
    }

    /// Wait for one of them; returns its name.
    pub fn wait(&self) -> std::io::Result<&'static str> {
        Ok(self.0.wait()?.as_str())
    }

    /// Wait up to `timeout` for one of them (they must be blocked, as by [`TermSignals::block`]); `Some(name)` if
    /// one arrived or was already pending.
    pub fn wait_timeout(
        &self,
        timeout: std::time::Duration,
    ) -> std::io::Result<Option<&'static str>> {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        use nix::sys::signalfd::{SfdFlags, SignalFd};
        let sfd = SignalFd::with_flags(&self.0, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)?;
        let ms = PollTimeout::try_from(timeout.as_millis().min(60_000) as i32)
            .unwrap_or(PollTimeout::ZERO);
        let mut fds = [PollFd::new(
            std::os::fd::AsFd::as_fd(&sfd),
            PollFlags::POLLIN,
        )];
        match poll(&mut fds, ms) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e.into()),
        }
        Ok(sfd
            .read_signal()?
            .and_then(|i| Signal::try_from(i.ssi_signo as i32).ok())
            .map(|s| s.as_str()))
    }
}
