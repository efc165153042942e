//! Test harness for server-session tests: a scripted fake driver on a virtual clock, with helpers for the common
//! steps (login, PASV, answering filesystem requests, RETR of a file of a given size, ending a transfer).

use std::net::SocketAddr;
use std::time::{Duration, Instant, UNIX_EPOCH};

use drsftp_storage::{EntryKind, Metadata};

use super::*;

/// Modification time used by [`file`] and [`dir`]: 2026-11-22 14:51:17 UTC.
pub(crate) const MTIME: u64 = 1_795_359_077;

/// A regular file (mode 0644).
pub(crate) fn file(name: &str, size: u64) -> Metadata {
    Metadata {
        name: name.into(),
        kind: EntryKind::File,
        size,
        modified: UNIX_EPOCH + Duration::from_secs(MTIME),
        mode: 0o644,
    }
}

/// A directory (mode 0755).
pub(crate) fn dir(name: &str) -> Metadata {
    Metadata {
        name: name.into(),
        kind: EntryKind::Dir,
        size: 0,
        modified: UNIX_EPOCH + Duration::from_secs(MTIME),
        mode: 0o755,
    }
}

/// A session plus the virtual clock.
pub(crate) struct H {
    pub(crate) s: ServerSession,
    pub(crate) now: Instant,
    /// Users the fake driver accepts (name, password, read-only): `Action::CheckLogin` is answered at once.
    pub(crate) users: Vec<(String, String, bool)>,
    /// Answer a STOR's `FsRequest::OpenWrite` with `Done` at once (tests of the open itself turn it off).
    pub(crate) opens: bool,
}

impl H {
    /// Default config but anonymous sessions may write (most verb tests log in anonymously and write),
    /// control connection 127.0.0.1:2811 ← 127.0.0.1:50000; the greeting is consumed.
    pub(crate) fn new() -> Self {
        Self::with_cfg(ServerConfig {
            anonymous_write: true,
            ..ServerConfig::default()
        })
    }

    /// `cfg`, and a fake driver that accepts `users` (name, password, read-only).
    pub(crate) fn with_users(cfg: ServerConfig, users: &[(&str, &str, bool)]) -> Self {
        let mut h = Self::with_cfg(cfg);
        h.users = users
            .iter()
            .map(|(u, p, ro)| (u.to_string(), p.to_string(), *ro))
            .collect();
        h
    }

    pub(crate) fn with_cfg(cfg: ServerConfig) -> Self {
        Self::build(cfg, "127.0.0.1:2811", "127.0.0.1:50000")
    }

    pub(crate) fn with_addrs(local: &str, peer: &str) -> Self {
        Self::build(ServerConfig::default(), local, peer)
    }

    pub(crate) fn build(cfg: ServerConfig, local: &str, peer: &str) -> Self {
        // The only clock read: a base for virtual time.
        let now = Instant::now();
        let local: SocketAddr = local.parse().unwrap();
        let peer: SocketAddr = peer.parse().unwrap();
        let mut h = H {
            s: ServerSession::new(now, cfg, local, peer),
            now,
            users: vec![],
            opens: true,
        };
        let greeting = h.out();
        assert!(greeting.starts_with("220 "), "{greeting}");
        h
    }

    pub(crate) fn advance(&mut self, d: Duration) {
        self.now += d;
    }

    pub(crate) fn send_raw(&mut self, bytes: &[u8]) {
        self.s.handle_input(self.now, bytes);
        if !self.users.is_empty() {
            while let Some((user, password)) = self.s.take_check_login() {
                let verdict = match self.users.iter().find(|(u, _, _)| *u == user) {
                    Some((_, p, ro)) if *p == password => LoginVerdict::Granted { read_only: *ro },
                    _ => LoginVerdict::Denied,
                };
                self.s.handle_login(self.now, verdict);
            }
        }
        while self.opens
            && matches!(
                self.s.peek_action(),
                Some(Action::Fs(FsRequest::OpenWrite { .. }))
            )
        {
            self.s.poll_action();
            self.s.handle_fs(self.now, FsResult::Done);
        }
    }

    /// Moves the clock to the session's next timer and fires it; returns the replies.
    pub(crate) fn fire(&mut self) -> String {
        if let Some(t) = self.s.poll_timeout() {
            self.now = self.now.max(t);
            self.s.handle_timeout(self.now);
        }
        self.out()
    }

    /// Sends `line` + CRLF.
    pub(crate) fn send(&mut self, line: &str) {
        self.send_raw(format!("{line}\r\n").as_bytes());
    }

    /// All reply bytes queued so far.
    pub(crate) fn out(&mut self) -> String {
        let mut s = String::new();
        while let Some(b) = self.s.poll_transmit() {
            s.push_str(&String::from_utf8(b).expect("replies are UTF-8"));
        }
        s
    }

    /// Sends `line` and returns the replies it produced.
    pub(crate) fn cmd(&mut self, line: &str) -> String {
        self.send(line);
        self.out()
    }

    pub(crate) fn actions(&mut self) -> Vec<Action> {
        std::iter::from_fn(|| self.s.poll_action()).collect()
    }

    pub(crate) fn login(&mut self) {
        self.cmd("USER anonymous");
        assert_eq!(
            self.cmd("PASS drsftp@"),
            "230 User anonymous logged in.\r\n"
        );
    }

    /// Expects the next action to be `Fs(want)`, answers it, returns the replies.
    pub(crate) fn fs(&mut self, want: FsRequest, answer: FsResult) -> String {
        assert_eq!(self.s.poll_action(), Some(Action::Fs(want)));
        self.s.handle_fs(self.now, answer);
        self.out()
    }

    /// Expects the next action to be a transfer.
    pub(crate) fn transfer(&mut self) -> TransferPlan {
        match self.s.poll_action() {
            Some(Action::Transfer(p)) => p,
            other => panic!("expected a transfer, got {other:?}"),
        }
    }

    /// PASV answered with 127.0.0.1:40000.
    pub(crate) fn pasv(&mut self) {
        self.send("PASV");
        assert!(matches!(
            self.s.poll_action(),
            Some(Action::Listen { count: 1, .. })
        ));
        self.s
            .handle_listening(self.now, Ok(vec!["127.0.0.1:40000".parse().unwrap()]));
        assert_eq!(
            self.out(),
            "227 Entering Passive Mode (127,0,0,1,156,64)\r\n"
        );
    }

    /// `RETR path` (absolute) of a `size`-byte file: Stat answered, preliminary reply checked, plan returned.
    pub(crate) fn retr_file(&mut self, path: &str, size: u64) -> TransferPlan {
        self.send(&format!("RETR {path}"));
        let name = path.rsplit('/').next().unwrap_or(path);
        let r = self.fs(
            FsRequest::Stat(path.into()),
            FsResult::Stat(file(name, size)),
        );
        assert!(r.starts_with("150 ") || r.starts_with("125 "), "{r}");
        self.transfer()
    }

    /// Ends transfer `id` successfully; returns the replies.
    pub(crate) fn done_ok(&mut self, id: u64) -> String {
        self.s.handle_transfer_done(
            self.now,
            id,
            TransferResult::Ok {
                bytes: 0,
                streams: 1,
            },
        );
        self.out()
    }
}
