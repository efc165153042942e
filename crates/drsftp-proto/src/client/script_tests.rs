//! Test-only harness shared by the client session's scripted-server tests (`tests.rs`, `drs_tests.rs`,
//! `pipeline_tests.rs`, `stripe_tests.rs`, `switch_tests.rs`, ...): a fresh or logged-in session, with helpers to
//! read what it transmitted and feed it replies, and the transfer spec they start from.

use std::time::Instant;

use super::*;

pub(super) const GLOBUS_FEAT: &str =
    "211-Extensions supported\n CKSM MD5:10;ADLER32:10;SHA1:10;SHA256:11;SHA512:12;\n \
                           PARALLEL\n SIZE\n ERET\n ESTO\n SBUF\n211 End.\n";
pub(super) const DRSFTP_FEAT: &str =
    "211-Extensions supported:\n UTF8\n SIZE\n PARALLEL\n ERET\n ESTO\n SBUF\n DRS\n CKSM SHA256;\n211 End.\n";

/// A TCP transfer of `path` in `mode` over `streams` connections with nothing else asked for (no buffer size,
/// allocation, DRS or stripes): the spec the scripted tests start from, changing what each one is about.
pub(super) fn tcp_spec(
    direction: Direction,
    path: &str,
    mode: TransferMode,
    streams: u32,
) -> TransferSpec {
    TransferSpec {
        direction,
        path: path.into(),
        mode,
        streams,
        streams_range: None,
        tcp_buffer: None,
        partial: None,
        alloc: None,
        drs: false,
        transport: Transport::Tcp,
        stripes: false,
    }
}

/// A client session talking to a scripted server.
pub(super) struct Scripted {
    pub(super) s: ClientSession,
    pub(super) now: Instant,
}

impl Scripted {
    /// A session that has seen nothing yet (not even the greeting).
    pub(super) fn new() -> Self {
        let now = Instant::now();
        let mut s = ClientSession::new(ClientConfig::default(), now);
        s.set_peer_ip("127.0.0.1".parse().unwrap());
        Scripted { s, now }
    }
    /// Greeting, USER, PASS and FEAT (`feat`, the whole multi-line reply), one command at a time: login is never
    /// pipelined, not even with a drsftp server (its FEAT is not known yet anyway).
    pub(super) fn login(feat: &str) -> Self {
        let mut h = Scripted::new();
        h.reply("220 ready.\n");
        h.start(Op::Login {
            user: "anonymous".into(),
            pass: "x".into(),
        });
        h.expect("USER anonymous", "331 Password required.\n");
        h.expect("PASS x", "230 Logged in.\n");
        h.expect("FEAT", feat);
        assert!(matches!(
            &h.events()[..],
            [Event::Done(Outcome::LoggedIn(_))]
        ));
        h
    }
    /// Feeds `text` (LF line ends, sent as CRLF) in one read.
    pub(super) fn reply(&mut self, text: &str) {
        self.s
            .handle_input(self.now, text.replace('\n', "\r\n").as_bytes());
    }
    /// The next command line transmitted, if any.
    pub(super) fn sent_one(&mut self) -> Option<String> {
        self.s.poll_transmit().map(|b| {
            let s = String::from_utf8(b).unwrap();
            assert!(s.ends_with("\r\n"));
            s.trim_end().to_string()
        })
    }
    /// Everything transmitted since the last call, one entry per command line.
    pub(super) fn sent(&mut self) -> Vec<String> {
        std::iter::from_fn(|| self.sent_one()).collect()
    }
    /// Exactly `cmd` went out; then `reply` comes.
    pub(super) fn expect(&mut self, cmd: &str, reply: &str) {
        self.batch(&[cmd], reply);
    }
    /// Exactly `cmds` went out (pipelined, in one poll_transmit round, before any reply); then `replies` come in
    /// one read.
    pub(super) fn batch(&mut self, cmds: &[&str], replies: &str) {
        assert_eq!(self.sent(), cmds);
        self.reply(replies);
    }
    /// Starts `op` now; the session must accept it.
    pub(super) fn start(&mut self, op: Op) {
        self.s.start(self.now, op).unwrap();
    }
    pub(super) fn events(&mut self) -> Vec<Event> {
        std::iter::from_fn(|| self.s.poll_event()).collect()
    }
    /// The transfer's report from the last event, which must be its completion.
    pub(super) fn report(&mut self) -> TransferReport {
        let ev = self.events();
        match ev.last() {
            Some(Event::Done(Outcome::Transferred(r))) => r.clone(),
            _ => panic!("transfer did not complete: {ev:?}"),
        }
    }
}
