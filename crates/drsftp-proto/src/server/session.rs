//! `ServerSession`: the sans-IO GridFTP server state machine. It frames command lines, runs them one at a time
//! through the verb registry, parks while the driver answers a filesystem or listen request, lets only
//! ABOR/STAT/NOOP/`SBUF <id> <size>` through while a transfer runs, and keeps the idle and marker timers.
//!
//! # Driver contract
//!
//! * After every `handle_*` call (and after `new`), drain [`ServerSession::poll_transmit`] and
//!   [`ServerSession::poll_action`] until both return `None`; write replies in order.
//! * [`Action::Fs`]: run it, then call `handle_fs` exactly once. No further command runs until then (input is
//!   buffered, up to a bound).
//! * [`Action::Listen`]: close old passive listeners, bind `count` new ones, call `handle_listening` once.
//! * [`Action::BlastBind`]: bind a UDP socket (port 0), call `handle_blast_bound` once with its address and a
//!   random transfer id; keep the socket for the [`DataEndpoint::Blast`](super::DataEndpoint::Blast) transfer.
//! * [`Action::Transfer`]: start it; call `handle_progress` with the latest counters periodically (at least as
//!   often as the marker interval, and once more right before the end), then `handle_transfer_done` with the
//!   plan's id exactly once, also after an [`Action::Abort`] (with [`TransferResult::Aborted`]).
//! * [`Action::Abort`]: stop the running transfer, then report it as above.
//! * [`Action::SetBuffer`]: apply the buffer to the running transfer's streams (no answer). It only comes after
//!   the client opted in to DRS (`OPTS DRS Inband=1;`); [`TransferPlan::inband_drs`](super::TransferPlan::inband_drs) says whether the MODE E
//!   data channels may carry SBUF headers (0x02/0x01), and [`ServerSession::send_sbuf_notice`] sends
//!   `126 SBUF <id> <size>` while receiving in stream mode.
//! * [`Action::CheckLogin`]: check the credentials off the event loop (they are hashed), then call
//!   `handle_login` once with the verdict (and pick the user's storage for the rest of the session).
//! * [`Action::Close`]: write the queued replies, then close the control connection; `is_closed` is then true.
//! * Drain [`ServerSession::poll_event`] too: audit events (logins) for the driver's log.
//! * Call `handle_timeout` at (or after) [`ServerSession::poll_timeout`] (it also ends the delay after a failed
//!   PASS and the pre-login deadline), and `set_epoch` once at the start so
//!   perf markers carry wall-clock time.
//!
//! QUIT during a transfer is deferred like other commands: it runs after the transfer's final reply (RFC 959
//! §4.1.1), then the session closes.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use super::ctx::{Ctx, Pending};
use super::framing::{Line, LineReader};
use super::types::{
    Action, AuditEvent, FsResult, LoginVerdict, ServerConfig, TlsPolicy, TransferProgress,
    TransferResult,
};
use super::verbs::{self, Busy};

/// Most complete command lines buffered (pipelined, or waiting behind a transfer or a driver request); beyond
/// it the client gets `421` and the connection is closed.
pub const MAX_QUEUED_COMMANDS: usize = 256;

/// The server side of one control connection. See the module docs for the driver contract.
#[derive(Debug)]
pub struct ServerSession {
    ctx: Ctx,
    reader: LineReader,
    queue: VecDeque<Line>,
}

/// Splits `VERB arg` at the first space.
fn split_command(line: &str) -> (&str, &str) {
    let line = line.trim_start();
    line.split_once(' ').unwrap_or((line, ""))
}

/// How a queued line behaves while a transfer runs.
fn busy_of(line: &Line) -> Busy {
    match line {
        Line::Text(t) => {
            let (verb, arg) = split_command(t);
            match verbs::lookup(verb).map(|(v, _)| v.busy) {
                Some(Busy::JumpIf(f)) if f(arg) => Busy::Jump,
                Some(Busy::JumpIf(_)) | None => Busy::Defer,
                Some(b) => b,
            }
        }
        Line::TooLong => Busy::Defer,
    }
}

impl ServerSession {
    /// A session for a freshly accepted control connection (`local` is our end, `peer` the client's). Queues the
    /// `220` greeting and starts the idle timer.
    pub fn new(now: Instant, cfg: ServerConfig, local: SocketAddr, peer: SocketAddr) -> Self {
        let reader = LineReader::new(cfg.max_line);
        let banner = cfg.banner.clone();
        let mut ctx = Ctx::new(now, cfg, local, peer);
        ctx.reply(220, &banner);
        ServerSession {
            ctx,
            reader,
            queue: VecDeque::new(),
        }
    }

    /// Pairs `now` with the wall clock (`epoch_secs` = seconds since 1970 at `now`), for `112` timestamps and
    /// LIST dates. Without it, perf-marker timestamps count from the session start.
    pub fn set_epoch(&mut self, now: Instant, epoch_secs: f64) {
        self.ctx.set_epoch(now, epoch_secs);
    }

    /// Allow PORT/EPRT/SPOR/`BPAS <addr>`/BPRT to addresses other than the control peer's (third-party
    /// transfers between different hosts) for this session whatever its login. `false` (the initial state) leaves
    /// the decision to [`ServerConfig::third_party`] (default: real users yes, anonymous no); refused commands get
    /// `504` (FTP bounce protection, RFC 2577). Ports below 1024 are refused either way.
    pub fn set_allow_foreign_data(&mut self, allow: bool) {
        self.ctx.data.allow_foreign = allow;
    }

    /// More addresses of this server's own host (the control connection's local address is always one): a
    /// foreign data address naming one is refused unless [`ThirdParty::All`](crate::server::ThirdParty::All), so a
    /// client cannot aim the server at its own services.
    pub fn add_own_addrs(&mut self, addrs: impl IntoIterator<Item = IpAddr>) {
        self.ctx.data.own_addrs.extend(addrs);
    }

    /// Bytes read from the control connection, in any chunking.
    pub fn handle_input(&mut self, now: Instant, bytes: &[u8]) {
        if self.ctx.closed {
            return;
        }
        let before = self.queue.len();
        self.reader.push(bytes, &mut self.queue);
        if self.queue.len() > before {
            self.ctx.touch(now);
        }
        if self.queue.len() > MAX_QUEUED_COMMANDS {
            self.queue.clear();
            self.ctx
                .close(421, "Too many queued commands; closing control connection.");
            return;
        }
        self.pump(now);
    }

    /// Next reply bytes to write (everything queued so far, in order).
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.ctx.take_output()
    }

    /// Next action for the driver.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.ctx.take_action()
    }

    /// The next action, left in place.
    #[cfg(test)]
    pub(crate) fn peek_action(&self) -> Option<&Action> {
        self.ctx.peek_action()
    }

    /// The answer to the pending [`Action::Fs`]. Ignored if none is pending.
    pub fn handle_fs(&mut self, now: Instant, result: FsResult) {
        self.resume(now, |pending| match pending {
            Pending::Fs(k) => Ok(move |ctx: &mut Ctx| k(ctx, now, result)),
            other => Err(other),
        });
    }

    /// The driver's verdict on the pending [`Action::CheckLogin`]. Ignored if none is pending.
    pub fn handle_login(&mut self, now: Instant, verdict: LoginVerdict) {
        self.resume(now, |pending| match pending {
            Pending::Login(k) => Ok(move |ctx: &mut Ctx| k(ctx, now, verdict)),
            other => Err(other),
        });
    }

    /// Removes a queued [`Action::CheckLogin`] and returns its user and password (test drivers).
    #[cfg(test)]
    pub(crate) fn take_check_login(&mut self) -> Option<(String, String)> {
        self.ctx.take_check_login()
    }

    /// Next audit event (logins) for the driver's log.
    pub fn poll_event(&mut self) -> Option<AuditEvent> {
        self.ctx.take_event()
    }

    /// The answer to the pending [`Action::Listen`]: the bound addresses, or why binding failed (`425`).
    pub fn handle_listening(&mut self, now: Instant, result: Result<Vec<SocketAddr>, String>) {
        self.resume(now, |pending| match pending {
            Pending::Listen(k) => Ok(move |ctx: &mut Ctx| k(ctx, now, result)),
            other => Err(other),
        });
    }

    /// The answer to the pending [`Action::BlastBind`]: the UDP socket's address and a random transfer id, or
    /// why binding failed (`425`).
    pub fn handle_blast_bound(&mut self, now: Instant, result: Result<(SocketAddr, u64), String>) {
        self.resume(now, |pending| match pending {
            Pending::BlastBind(k) => Ok(move |ctx: &mut Ctx| k(ctx, now, result)),
            other => Err(other),
        });
    }

    /// Answers the pending request: `answer` returns its continuation applied to the driver's result (`Ok`),
    /// or gives the request back (`Err`) when the result answers another kind of request, which is then ignored
    /// and the request stays pending. After a continuation ran, queued commands run.
    fn resume<F: FnOnce(&mut Ctx)>(
        &mut self,
        now: Instant,
        answer: impl FnOnce(Pending) -> Result<F, Pending>,
    ) {
        if self.ctx.closed {
            return;
        }
        let Some(pending) = self.ctx.pending.take() else {
            return;
        };
        match answer(pending) {
            Ok(run) => {
                run(&mut self.ctx);
                self.pump(now);
            }
            Err(other) => self.ctx.pending = Some(other),
        }
    }

    /// Latest counters of the running transfer (replaces the previous ones).
    pub fn handle_progress(&mut self, now: Instant, p: TransferProgress) {
        self.ctx.on_progress(now, p);
    }

    /// Transfer `id` ended: final markers, `226` or the failure reply (and `426` + `226` after ABOR); then
    /// commands queued behind the transfer run. Unknown ids are ignored.
    pub fn handle_transfer_done(&mut self, now: Instant, id: u64, r: TransferResult) {
        if self.ctx.closed {
            return;
        }
        self.ctx.finish_transfer(now, id, r);
        self.pump(now);
    }

    /// Timers: markers of a MODE E receive, the data timeout of a running transfer ([`Action::Abort`], then
    /// `426` once the driver reports the end), the delayed reply to a failed PASS, the pre-login deadline and the
    /// idle timeout (`421`, then [`Action::Close`]).
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.ctx.closed {
            return;
        }
        if self.ctx.login.logged_in.is_none()
            && self.ctx.limits.login_deadline.is_some_and(|d| now >= d)
        {
            let secs = self.ctx.cfg.login_timeout.as_secs();
            self.ctx.close(
                421,
                &format!("Login timeout ({secs} seconds): closing control connection."),
            );
            return;
        }
        if matches!(self.ctx.pending, Some(Pending::Delay { until, .. }) if now >= until) {
            self.resume(now, |pending| match pending {
                Pending::Delay { then, .. } => Ok(move |ctx: &mut Ctx| then(ctx, now)),
                other => Err(other),
            });
            if self.ctx.closed {
                return;
            }
        }
        self.ctx.on_marker_timer(now);
        self.ctx.on_data_timer(now);
        let idle = self.ctx.xfer.running.is_none() && self.ctx.pending.is_none();
        if idle && self.ctx.limits.idle_deadline.is_some_and(|d| now >= d) {
            let secs = self.ctx.cfg.idle_timeout.as_secs();
            self.ctx.close(
                421,
                &format!("Idle timeout ({secs} seconds): closing control connection."),
            );
        }
    }

    /// When `handle_timeout` should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.ctx.closed {
            return None;
        }
        let marker = self.ctx.xfer.running.as_ref().and_then(|r| r.next_marker);
        let idle = if self.ctx.xfer.running.is_none() && self.ctx.pending.is_none() {
            self.ctx.limits.idle_deadline
        } else {
            None
        };
        let delay = match self.ctx.pending {
            Some(Pending::Delay { until, .. }) => Some(until),
            _ => None,
        };
        let login = self
            .ctx
            .limits
            .login_deadline
            .filter(|_| self.ctx.login.logged_in.is_none());
        [marker, idle, self.ctx.data_deadline(), delay, login]
            .into_iter()
            .flatten()
            .min()
    }

    /// True once [`Action::Close`] has been emitted.
    pub fn is_closed(&self) -> bool {
        self.ctx.closed
    }

    /// True while a transfer runs (between [`Action::Transfer`] and `handle_transfer_done`).
    pub fn is_transferring(&self) -> bool {
        self.ctx.xfer.running.is_some()
    }

    /// True once the client opted in to Dynamic Right-Sizing (`OPTS DRS Inband=1;`, FEAT token ` DRS`) and has
    /// not turned it off. Only then may the driver use control-channel SBUF (`send_sbuf_notice`) or, in MODE E,
    /// in-band SBUF headers (also given per transfer as [`super::TransferPlan::inband_drs`]).
    pub fn drs_inband(&self) -> bool {
        self.ctx.data.drs_inband
    }

    /// While the server *receives* in stream mode with DRS opted in, queue the informational
    /// `126 SBUF <id> <size>` (seed 000 §4.4: the receiver's new buffer, for the sending client's send buffer;
    /// the client does not answer). Returns false, and sends nothing, in every other case (no opt-in, no transfer,
    /// the server is sending, MODE E where in-band headers do this, session closed). Drain `poll_transmit` after.
    pub fn send_sbuf_notice(&mut self, _now: Instant, id: u64, size: u64) -> bool {
        self.ctx.sbuf_notice(id, size)
    }

    /// Runs queued commands until one needs the driver, a transfer blocks the rest, or the queue is empty.
    fn pump(&mut self, now: Instant) {
        loop {
            if self.ctx.closed {
                self.queue.clear();
                return;
            }
            if self.ctx.pending.is_some() {
                return;
            }
            if self.ctx.xfer.running.is_some() {
                if let Some(i) = self
                    .queue
                    .iter()
                    .position(|l| matches!(busy_of(l), Busy::Jump))
                {
                    if let Some(line) = self.queue.remove(i) {
                        self.execute(now, line);
                    }
                    continue;
                }
                match self.queue.front().map(busy_of) {
                    Some(Busy::Inline) => {}
                    _ => {
                        self.consider_prefetch();
                        return;
                    }
                }
            }
            let Some(line) = self.queue.pop_front() else {
                return;
            };
            self.execute(now, line);
            if self.ctx.sec.upgrade_requested {
                self.start_tls();
            }
        }
    }

    /// A `CKSM` at the head of the queue behind a running transfer that will not yield its digest: tell the
    /// driver it may start now ([`Action::Prefetch`]), once per transfer. Only the head: commands between it
    /// and the transfer could change what its path names.
    fn consider_prefetch(&mut self) {
        let Some(Line::Text(t)) = self.queue.front() else {
            return;
        };
        let (verb, arg) = split_command(t);
        if !verb.eq_ignore_ascii_case("CKSM") {
            return;
        }
        let req = verbs::cksm_request(&self.ctx, arg);
        let Some(run) = self.ctx.xfer.running.as_mut() else {
            return;
        };
        if std::mem::replace(&mut run.prefetch_seen, true) {
            return;
        }
        let Some(req) = req else {
            return;
        };
        let engine = matches!(
            (&req, &run.engine_digest_of),
            (crate::server::types::FsRequest::Checksum {
                alg: drsftp_storage::ChecksumAlg::Crc32c,
                path,
                offset: 0,
                length: None,
            }, Some(p)) if p == path
        );
        if !engine {
            self.ctx.action(Action::Prefetch(req));
        }
    }

    /// After `AUTH TLS` was accepted: anything already received behind the line is cleartext the peer (or a
    /// man in the middle) injected before the handshake, and RFC 4217 §15 warns that acting on it would let
    /// it pass as protected. So it is dropped with the connection; otherwise `234` and [`Action::StartTls`].
    fn start_tls(&mut self) {
        self.ctx.sec.upgrade_requested = false;
        if !self.queue.is_empty() || self.reader.has_partial() {
            self.queue.clear();
            self.reader = LineReader::new(self.ctx.cfg.max_line);
            self.ctx.sec.tls = false;
            self.ctx.close(
                421,
                "Cleartext received after AUTH TLS; closing control connection.",
            );
            return;
        }
        self.ctx.reply(234, "AUTH TLS successful.");
        self.ctx.action(Action::StartTls);
    }

    fn execute(&mut self, now: Instant, line: Line) {
        let text = match line {
            Line::TooLong => {
                self.ctx.reply(500, "Command line too long.");
                return;
            }
            Line::Text(t) => t,
        };
        if text.trim().is_empty() {
            return;
        }
        let (verb, arg) = split_command(&text);
        let rnfr = self.ctx.rnfr.take();
        let Some((v, run)) = verbs::lookup(verb) else {
            self.ctx.reply(500, "Unknown command.");
            return;
        };
        if v.name == "RNTO" {
            self.ctx.rnfr = rnfr;
        }
        if matches!(v.name, "USER" | "PASS")
            && self.ctx.cfg.tls == TlsPolicy::Required
            && !self.ctx.sec.tls
        {
            // 530 is in RFC 959's replies to USER and PASS, so every client reports it; vsftpd does the same.
            self.ctx.reply(530, "TLS required: send AUTH TLS first.");
            return;
        }
        if v.login && self.ctx.login.logged_in.is_none() {
            self.ctx.reply(530, "Please login with USER and PASS.");
            return;
        }
        if v.writes && self.ctx.login.read_only {
            let (code, text) = verbs::READ_ONLY_REPLY;
            self.ctx.reply(code, text);
            return;
        }
        if let Err(e) = run(&mut self.ctx, now, arg) {
            self.ctx.refuse(&e);
        }
    }
}
