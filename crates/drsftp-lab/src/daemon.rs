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
}
