//! The sans-IO GridFTP client session: turns operations ([`Op`]) into command lines in the order Globus needs
//! (TYPE/MODE/buffer/OPTS before PASV/PORT, because the server freezes data-channel parameters there), reads
//! replies, and tells the driver when to listen, connect and move data ([`Event`]). It owns no sockets and reads
//! no clock: bytes and `now` come in through `handle_*`, commands and events go out through `poll_*`.
//!
//! Dynamic Right-Sizing (docs/drs.md §4.3-4.4) is strictly opt-in: `OPTS DRS Inband=1;` goes out only when the
//! transfer asks for it ([`TransferSpec::drs`]) and the server listed `DRS` in FEAT, so a Globus server never sees
//! it; `SBUF <id> <size>` and `126 SBUF` notices are only used and reported after that (`drs.rs`). The UDP blast
//! channel is likewise only set up with a server that lists `BLAST` ([`Transport::Blast`]; `blast.rs`, `plan.rs`):
//! [`Event::BlastBind`] asks the driver for a UDP socket, and [`ClientSession::blast_channel`] tells it where the
//! server's is once the transfer starts. Without `BLAST` the transfer runs over TCP and the report says so.
//!
//! With a drsftp server (FEAT lists `DRS`) commands are pipelined (`pipeline.rs`): the transfer set-up (TYPE I,
//! MODE, buffer size, `OPTS DRS`, `OPTS RETR`) goes out back to back, then PORT with RETR/ERET, so a MODE E
//! download costs two round trips before data flows instead of six. Commands in flight form a FIFO queue; each
//! reply answers the oldest (1xx, markers and `126 SBUF` belong to it too: during a transfer, the transfer
//! command). When a reply ends the operation early, the replies still due are counted and dropped, never taken
//! for the next operation's. Any other server (Globus) gets one command at a time. The final reply's meaning per
//! command kind lives in `answer.rs`; which reply goes where, in `dispatch.rs`.

use super::addr::{port_command, spor_command};
use super::batch;
use super::blast::{self, BlastNeg};
use super::drs::Drs;
use super::feat::Features;
use super::pipeline::{listen_may_follow, may_follow};
use super::plan::{Kind, Step};
use super::reply::{Reply, ReplyReader};
use super::types::*;
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

#[derive(Debug)]
pub(super) struct Running {
    pub(super) steps: VecDeque<Step>,
    /// Commands sent whose final replies are due, oldest first: the next reply answers the front one. More than
    /// one only when pipelining with a drsftp server (`pipeline.rs`); a transfer command is always the last.
    pub(super) inflight: VecDeque<(String, Kind)>,
    /// Waiting for a driver call (listen / data ready).
    pub(super) parked: Option<Step>,
    /// The (stream count) for Connect events in this op.
    pub(super) streams: u32,
    pub(super) report: TransferReport,
    pub(super) started: bool,
    /// ABOR sent: number of final replies still to come (the in-flight commands' and ABOR's) before failing.
    pub(super) abort_pending: Option<usize>,
    /// While aborting: the transfer command's own refusal (e.g. `452` disk full), which says why the data
    /// connections broke better than the `Aborted` the operation would otherwise end with.
    pub(super) abort_refusal: Option<ClientError>,
    /// A blast transfer: what is known of its channel so far.
    pub(super) blast: Option<BlastNeg>,
    /// A batch ([`Op::Batch`], [`Op::UploadBatch`]): its window and gates (`batch.rs`).
    pub(super) batch: Option<batch::BatchRun>,
    /// A striped download: the server's stripes from its SPAS reply, for [`Event::ListenStriped`].
    pub(super) stripe_peers: Vec<SocketAddr>,
    /// Stripes the server named in its SPAS reply (0: no SPAS answered).
    pub(super) stripes: usize,
    /// USER logged in by itself (`230`) while PASS was already pipelined behind it: PASS's reply means nothing.
    pub(super) pass_moot: bool,
    /// ABOR sent with commands pipelined behind the transfer (its trailing CKSM): the server answers ABOR first
    /// (it jumps the queue), so these replies come after the operation ends and are swallowed then.
    pub(super) behind_abort: Vec<Kind>,
    /// [`Op::Commands`]: the final replies so far, in order.
    pub(super) replies: Vec<Reply>,
}

impl Running {
    /// The oldest command in flight is of this kind.
    pub(super) fn head_is(&self, f: impl Fn(Kind) -> bool) -> bool {
        self.inflight.front().is_some_and(|(_, k)| f(*k))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    AwaitGreeting,
    Ready,
    Dead,
}

/// The client session. See the module docs for the I/O contract.
#[derive(Debug)]
pub struct ClientSession {
    pub(super) cfg: ClientConfig,
    pub(super) reader: ReplyReader,
    pub(super) banner: Option<Reply>,
    /// The control channel runs TLS (`handle_tls_started` was called).
    control_tls: bool,
    /// The login running is anonymous (`USER anonymous` or `ftp`, RFC 1635) with our stand-in password
    /// ([`super::ANONYMOUS_PASSWORD`]), no secret, so it may ride behind USER in cleartext too (one round trip
    /// less per session).
    anonymous_login: bool,
    /// [`ClientSession::set_trailing_checksum`]: the algorithm for the next TCP transfer's pipelined CKSM.
    pub(super) trailing_cksm: Option<String>,
    /// [`ClientSession::set_trailing_size`]: SIZE pipelined behind the next transfer command.
    pub(super) trailing_size: bool,
    pub(super) out: VecDeque<Vec<u8>>,
    pub(super) events: VecDeque<Event>,
    pub(super) current: Option<Running>,
    /// Reply deadline: armed while a command is in flight (not once a transfer has started, nor while parked).
    pub(super) deadline: Option<Instant>,
    pub(super) peer_ip: Option<IpAddr>,
    pub(super) phase: Phase,
    pub(super) type_image: bool,
    /// The server's transfer mode; `None` when unknown (a MODE command's reply was swallowed).
    pub(super) mode: Option<TransferMode>,
    pub(super) features: Features,
    pub(super) drs: Drs,
    /// An `OPTS DRS` reply was swallowed: the next transfer states DRS on or off explicitly.
    pub(super) drs_unsure: bool,
    /// Final replies still due to commands of operations that already ended, to drop (`pipeline.rs`).
    pub(super) swallow: usize,
    /// Held ranges for the next download (`set_resume`, plan.rs).
    pub(super) resume: Option<crate::ranges::RangeSet>,
    /// [`ClientSession::abort_and_go_on`]: where among the swallowed replies the answer to a trailing CKSM may
    /// come, and what arrived (`pipeline.rs`).
    pub(super) late_cksm: Option<super::pipeline::LateCksm>,
    /// [`ClientSession::set_after_login`]: commands for the next login to pipeline behind its FEAT.
    pub(super) after_login: Vec<String>,
    /// Their final replies, once the login that sent them has ended ([`ClientSession::take_after_login`]).
    pub(super) after_login_replies: Vec<Reply>,
    /// `Op::Secure` with a drsftp server ended at the handshake: PBSZ 0 and PROT P go first in the next
    /// operation, in the same write as its own commands.
    pub(super) prot_pending: bool,
}

pub(super) fn mask(line: &str) -> String {
    if line.len() >= 5 && line[..5].eq_ignore_ascii_case("PASS ") {
        "PASS ****".to_string()
    } else {
        line.to_string()
    }
}

impl ClientSession {
    /// A session for a freshly connected control channel; it first waits for the 220 greeting.
    /// `now` starts the greeting timeout.
    pub fn new(cfg: ClientConfig, now: Instant) -> Self {
        let deadline = Some(now + cfg.reply_timeout);
        ClientSession {
            cfg,
            reader: ReplyReader::new(),
            phase: Phase::AwaitGreeting,
            banner: None,
            control_tls: false,
            anonymous_login: false,
            trailing_cksm: None,
            trailing_size: false,
            out: VecDeque::new(),
            events: VecDeque::new(),
            current: None,
            deadline,
            peer_ip: None,
            type_image: false,
            mode: Some(TransferMode::Stream),
            features: Features::default(),
            drs: Drs::default(),
            drs_unsure: false,
            swallow: 0,
            resume: None,
            late_cksm: None,
            after_login: Vec::new(),
            after_login_replies: Vec::new(),
            prot_pending: false,
        }
    }

    /// Tells the session the control connection's peer address (needed to use EPSV replies).
    pub fn set_peer_ip(&mut self, ip: IpAddr) {
        self.peer_ip = Some(ip);
    }

    /// The greeting is a drsftp server's (`220 drsftp ...`): login may then be pipelined (`pipeline.rs`). A
    /// server that only claims to be one gets USER, PASS and FEAT in one write, which is all it can make of it.
    pub(super) fn greeted_by_drsftp(&self) -> bool {
        self.banner
            .as_ref()
            .is_some_and(|b| b.text().starts_with("drsftp "))
    }

    /// Asks for the whole file's CKSM with `alg` right behind the next [`Op::Transfer`]'s command when it runs
    /// over TCP with a drsftp server (which queues it and answers after the transfer): its result comes in
    /// [`TransferReport::checksum`]. Used by that transfer only; ignored for partial transfers and other servers.
    ///
    /// A bare transfer command ([`Op::Command`] with RETR/STOR/ERET/ESTO/APPE: one end of a third-party copy)
    /// takes it too, for the path the command names: the source then checksums its file while the destination
    /// still receives the tail, and the destination right after its own `226`, with no round trip between.
    pub fn set_trailing_checksum(&mut self, alg: &str) {
        self.trailing_cksm = Some(alg.to_string());
    }

    /// Asks for the file's SIZE right behind the next transfer command (before its trailing CKSM, if any) on the
    /// same terms as [`ClientSession::set_trailing_checksum`]; the result comes in [`TransferReport::size`].
    /// The session must already be in TYPE I (SIZE is defined in binary mode only).
    pub fn set_trailing_size(&mut self) {
        self.trailing_size = true;
    }

    /// Commands for the next [`Op::Login`] to send right behind its FEAT, in the same write, when the login is
    /// pipelined (a drsftp greeting, and a password that may go early: see [`Op::Login`]); their replies come in
    /// the login's round trip ([`ClientSession::take_after_login`]). With any other server, or a login that
    /// fails, they are not sent (or their replies are swallowed): the caller then asks again on its own. Meant
    /// for what a session asks first anyway (TYPE I, SIZE and MDTM of the file it will fetch): one round trip
    /// less per session. They run before the login is known to have succeeded, so they must not change
    /// anything on the server.
    pub fn set_after_login(&mut self, commands: Vec<String>) {
        self.after_login = commands;
    }

    /// The final replies to the commands [`ClientSession::set_after_login`] gave, in order, if the last login
    /// sent them and succeeded; empty otherwise. Taken once.
    pub fn take_after_login(&mut self) -> Vec<Reply> {
        std::mem::take(&mut self.after_login_replies)
    }

    /// The 220 greeting, once received.
    pub fn banner(&self) -> Option<&Reply> {
        self.banner.as_ref()
    }

    /// Features from the last successful login (empty before).
    pub fn features(&self) -> &Features {
        &self.features
    }

    /// True while the server has Dynamic Right-Sizing on for this session (it listed `DRS` in FEAT and accepted
    /// `OPTS DRS Inband=1;` for a transfer that asked for it): the data engine may then use in-band SBUF headers
    /// (MODE E descriptors 0x02/0x01) and [`ClientSession::send_sbuf`] may be used. Read it when the transfer
    /// starts ([`Event::TransferStarted`]); [`TransferReport::drs_negotiated`] repeats it at the end.
    pub fn drs_negotiated(&self) -> bool {
        self.drs.on
    }

    /// During a running transfer with DRS negotiated, sends `SBUF <id> <size>` (seed 000 §4.4: the receiving
    /// client tells the sending server its buffer; the command doubles as an RTT probe). The server's
    /// `200 SBUF <id> <size>` comes back as [`Event::SbufEcho`]; a refusal as [`Event::Notice`]. Nothing is sent
    /// and an error returned without DRS ([`ClientError::DrsNotNegotiated`]) or outside a file transfer
    /// ([`ClientError::NoTransfer`], also after ABOR).
    pub fn send_sbuf(&mut self, _now: Instant, id: u64, size: u64) -> Result<(), ClientError> {
        if !self.drs.on || self.phase != Phase::Ready {
            return Err(ClientError::DrsNotNegotiated);
        }
        if !self.in_file_transfer() {
            return Err(ClientError::NoTransfer);
        }
        self.out
            .push_back(format!("SBUF {id} {size}\r\n").into_bytes());
        self.drs.sent(id);
        Ok(())
    }

    /// A file transfer command (not a listing) waits for its final reply (the oldest in flight), and no ABOR
    /// was sent.
    pub(super) fn in_file_transfer(&self) -> bool {
        self.current.as_ref().is_some_and(|r| {
            r.abort_pending.is_none() && r.head_is(|k| k == Kind::Transfer { listing: false })
        })
    }

    /// True while an operation runs.
    pub fn is_busy(&self) -> bool {
        self.current.is_some()
    }

    /// True once the session can no longer be used (fatal error, or QUIT answered).
    pub fn is_dead(&self) -> bool {
        self.phase == Phase::Dead
    }

    /// Starts an operation. Fails with [`ClientError::Busy`] if one is running or the session is dead.
    pub fn start(&mut self, now: Instant, op: Op) -> Result<(), ClientError> {
        if self.current.is_some() || self.phase == Phase::Dead {
            return Err(ClientError::Busy);
        }
        let mut streams = 1;
        let mut blast = None;
        let mut batch = None;
        let mut report = TransferReport::default();
        let steps: VecDeque<Step> = match op {
            Op::Login { user, pass } => {
                // Only with our own stand-in password: a user who typed one for `anonymous` may mean it.
                self.anonymous_login = (user.eq_ignore_ascii_case("anonymous")
                    || user.eq_ignore_ascii_case("ftp"))
                    && pass == super::ANONYMOUS_PASSWORD;
                self.after_login_replies.clear();
                let after = std::mem::take(&mut self.after_login)
                    .into_iter()
                    .map(|c| Step::Cmd(c, Kind::AfterLogin));
                [
                    Step::Cmd(format!("USER {user}"), Kind::User),
                    Step::Cmd(format!("PASS {pass}"), Kind::Pass),
                    Step::Cmd("FEAT".into(), Kind::Feat),
                ]
                .into_iter()
                .chain(after)
                .collect()
            }
            // SIZE is only defined in binary mode: RFC 3659 §4 lets a server refuse it under TYPE A (the
            // default), and pyftpdlib and ProFTPD do.
            Op::Size(p) => {
                let mut s = self.prelude(None);
                s.push_back(Step::Cmd(format!("SIZE {p}"), Kind::Size));
                s
            }
            Op::Checksum {
                algorithm,
                offset,
                length,
                path,
            } => {
                let len = length.map_or("-1".to_string(), |l| l.to_string());
                [Step::Cmd(
                    format!("CKSM {algorithm} {offset} {len} {path}"),
                    Kind::Cksm,
                )]
                .into()
            }
            Op::Command(line) => self.plan_command(line),
            Op::Commands(lines) => {
                if lines.is_empty() {
                    self.events.push_back(Event::Done(Outcome::Replies(vec![])));
                    return Ok(());
                }
                lines
                    .into_iter()
                    .map(|l| Step::Cmd(l, Kind::Piped))
                    .collect()
            }
            Op::Quit => [Step::Cmd("QUIT".into(), Kind::Quit)].into(),
            Op::Batch(spec) => {
                batch = Some(batch::BatchRun::download(&spec));
                self.plan_batch(&spec)
            }
            Op::UploadBatch(spec) => {
                batch = Some(batch::BatchRun::upload(&spec));
                self.plan_upload_batch(&spec)
            }
            Op::Secure {
                require,
                protect_data,
            } => [Step::Cmd(
                "AUTH TLS".into(),
                Kind::Auth {
                    require,
                    protect_data,
                },
            )]
            .into(),
            Op::List { path, kind } => {
                let mut s = self.prelude(Some(TransferMode::Stream));
                s.push_back(Step::Cmd("PASV".into(), Kind::Pasv));
                let line = if path.is_empty() {
                    kind.verb().to_string()
                } else {
                    format!("{} {path}", kind.verb())
                };
                s.push_back(Step::Cmd(line, Kind::Transfer { listing: true }));
                s
            }
            Op::Transfer(spec) => {
                let resume = self.resume.take();
                // Used by this transfer only: a partial one takes none, nor a blast upload. A blast download's
                // rides behind its RETR: a drsftp server hashes the file while blast sends it (server conn.rs,
                // `Action::Prefetch`), so the final check does not wait for the hash after the data.
                let blast_down = matches!(spec.transport, Transport::Blast(_))
                    && spec.direction == Direction::Download
                    && self.features.has("BLAST");
                let whole =
                    spec.partial.is_none() && (spec.transport == Transport::Tcp || blast_down);
                let trailing = self.trailing_steps(Some(spec.path.clone()).filter(|_| whole));
                streams = if spec.mode == TransferMode::Extended {
                    spec.streams.max(1)
                } else {
                    1
                };
                match spec.transport {
                    Transport::Blast(req) if self.features.has("BLAST") => {
                        blast = Some(BlastNeg::default());
                        let mut s = self.plan_blast(&spec, &req, resume.as_ref());
                        s.extend(trailing);
                        s
                    }
                    Transport::Blast(_) => {
                        report.notices.push(
                            "the server does not offer BLAST (no FEAT line): using TCP".into(),
                        );
                        self.plan_transfer(&spec, resume.as_ref())
                    }
                    Transport::Tcp => {
                        let mut s = self.plan_transfer(&spec, resume.as_ref());
                        s.extend(trailing);
                        s
                    }
                }
            }
        };
        let steps = if std::mem::take(&mut self.prot_pending) {
            let mut s = VecDeque::from([
                Step::Cmd("PBSZ 0".into(), Kind::Pbsz),
                Step::Cmd("PROT P".into(), Kind::Prot),
            ]);
            s.extend(steps);
            s
        } else {
            steps
        };
        self.current = Some(Running {
            steps,
            inflight: VecDeque::new(),
            parked: None,
            streams,
            report,
            started: false,
            abort_pending: None,
            abort_refusal: None,
            blast,
            batch,
            stripe_peers: Vec::new(),
            stripes: 0,
            pass_moot: false,
            behind_abort: Vec::new(),
            replies: Vec::new(),
        });
        self.advance(now);
        Ok(())
    }

    /// The driver has bound the data listener requested by [`Event::Listen`].
    pub fn handle_listening(&mut self, now: Instant, addr: SocketAddr) {
        if let Some(run) = self.current.as_mut() {
            if run.parked == Some(Step::Listen) {
                run.parked = None;
                run.steps
                    .push_front(Step::Cmd(port_command(addr), Kind::Port));
                self.advance(now);
            }
        }
    }

    /// The driver has bound the listeners requested by [`Event::ListenStriped`], one per stripe: `SPOR` names
    /// them all. Ignored unless that event is what the session waits for, or if `addrs` is empty.
    pub fn handle_listening_striped(&mut self, now: Instant, addrs: &[SocketAddr]) {
        if let Some(run) = self.current.as_mut() {
            if run.parked == Some(Step::ListenStriped) && !addrs.is_empty() {
                run.parked = None;
                run.steps
                    .push_front(Step::Cmd(spor_command(addrs), Kind::Port));
                self.advance(now);
            }
        }
    }

    /// Stripes the server named in its answer to the running transfer's SPAS (0 if none was sent or answered):
    /// more than 1 means the transfer is striped.
    pub fn stripes(&self) -> usize {
        self.current.as_ref().map_or(0, |r| r.stripes)
    }

    /// The driver has bound the UDP socket requested by [`Event::BlastBind`].
    pub fn handle_blast_bound(&mut self, now: Instant, addr: SocketAddr) {
        if let Some(run) = self.current.as_mut() {
            if run.parked == Some(Step::BlastBind) {
                run.parked = None;
                let line = blast::bpas_line(addr);
                match run
                    .steps
                    .iter_mut()
                    .find(|s| matches!(s, Step::Cmd(l, Kind::Bpas) if l.is_empty()))
                {
                    Some(Step::Cmd(l, _)) => *l = line,
                    _ => run.steps.push_front(Step::Cmd(line, Kind::Bpas)),
                }
                self.advance(now);
            }
        }
    }

    /// The running transfer's blast channel, complete once the server accepted the transfer command
    /// ([`Event::TransferStarted`]); `None` for TCP transfers. [`TransferReport::blast`] repeats it at the end.
    pub fn blast_channel(&self) -> Option<BlastChannel> {
        self.current.as_ref()?.blast.as_ref()?.channel()
    }

    /// The driver finished the TLS handshake asked for by [`Event::StartTls`]; `PBSZ`/`PROT` follow.
    pub fn handle_tls_started(&mut self, now: Instant) {
        self.control_tls = true;
        if let Some(run) = self.current.as_mut() {
            if run.parked == Some(Step::StartTls) {
                run.parked = None;
                if run.steps.is_empty() && run.inflight.is_empty() {
                    // PBSZ/PROT wait for the next operation (`prot_pending`).
                    self.finish(Ok(Outcome::Secured(true)));
                    return;
                }
                self.advance(now);
            }
        }
    }

    /// The driver is setting up the connections requested by [`Event::Connect`].
    pub fn handle_data_ready(&mut self, now: Instant) {
        if let Some(run) = self.current.as_mut() {
            if run.parked == Some(Step::DataReady) {
                run.parked = None;
                self.advance(now);
            }
        }
    }

    /// Asks the server to abort the running transfer (`ABOR`). The operation then fails with
    /// [`ClientError::Aborted`] once the server has answered, or with the transfer's own refusal if the server
    /// had refused it for a reason of its own (a full disk's `452`). Without a running transfer this does nothing.
    pub fn abort(&mut self, now: Instant) {
        let Some(run) = self.current.as_mut() else {
            return;
        };
        if run.abort_pending.is_some() {
            return;
        }
        run.steps.clear();
        if !run
            .inflight
            .iter()
            .any(|(_, k)| matches!(k, Kind::Transfer { .. }))
        {
            // Not in the transfer command yet: fail now; replies to set-up commands still in flight are dropped
            // when they come (and what they set is repeated by the next transfer).
            self.finish(Err(ClientError::Aborted));
            return;
        }
        // 426 for the transfer (or its own final reply if it had just ended), the replies to the commands
        // pipelined before it (PORT), then 226 for ABOR; what was pipelined behind it is answered later.
        let upto = run
            .inflight
            .iter()
            .position(|(_, k)| matches!(k, Kind::Transfer { .. }))
            .map_or(run.inflight.len(), |i| i + 1);
        run.behind_abort = run.inflight.drain(upto..).map(|(_, k)| k).collect();
        run.abort_pending = Some(run.inflight.len() + 1);
        self.out.push_back(b"ABOR\r\n".to_vec());
        self.deadline = Some(now + self.cfg.reply_timeout);
    }

    /// Feeds bytes read from the control connection.
    pub fn handle_input(&mut self, now: Instant, bytes: &[u8]) {
        if self.phase == Phase::Dead {
            return;
        }
        self.reader.push(bytes);
        loop {
            match self.reader.next_reply() {
                Ok(Some(reply)) => self.on_reply(now, reply),
                Ok(None) => break,
                Err(e) => {
                    self.die(ClientError::Framing(e));
                    break;
                }
            }
            if self.phase == Phase::Dead {
                break;
            }
        }
    }

    /// The control connection reached EOF.
    pub fn handle_eof(&mut self) {
        if self.phase == Phase::Dead {
            return;
        }
        self.die(ClientError::Closed);
    }

    /// When [`ClientSession::handle_timeout`] should be called next, if at all.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.phase == Phase::Dead {
            None
        } else {
            self.deadline
        }
    }

    /// Checks the reply deadline.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(d) = self.deadline {
            if now >= d && self.phase != Phase::Dead {
                let head = self.current.as_ref().and_then(|r| r.inflight.front());
                let what = match (head, self.phase) {
                    (_, Phase::AwaitGreeting) => "greeting".to_string(),
                    (Some((c, _)), _) => mask(c),
                    _ => "ABOR".to_string(),
                };
                self.die(ClientError::Timeout(what));
            }
        }
    }

    /// Next command bytes to write to the control connection (CRLF included).
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.out.pop_front()
    }

    /// Next event for the driver.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    pub(super) fn die(&mut self, err: ClientError) {
        self.drs.reset();
        self.phase = Phase::Dead;
        self.deadline = None;
        self.current = None;
        self.swallow = 0;
        self.late_cksm = None;
        self.events.push_back(Event::Failed(err));
    }

    pub(super) fn finish(&mut self, result: Result<Outcome, ClientError>) {
        if let Some(run) = self.current.take() {
            // Commands pipelined behind the one that ended the operation: their replies are still to come.
            self.swallow_rest(run.inflight.into_iter().map(|(_, k)| k));
            self.swallow_rest(run.behind_abort);
        }
        self.deadline = None;
        self.events.push_back(match result {
            Ok(o) => Event::Done(o),
            Err(e) => Event::Failed(e),
        });
    }

    /// `AUTH TLS` leaves as soon as the connection is up, without waiting for the greeting: the reply to it
    /// then comes right behind the `220`, one round trip sooner (RFC 959 lets a client send before the server
    /// reads; servers buffer it). Only AUTH: the greeting still decides everything that depends on the server
    /// (pipelined login), and a refused or failed AUTH costs nothing a waited one would not. A greeting other
    /// than `220` still ends the session.
    fn auth_before_greeting(&mut self, now: Instant) {
        let Some(run) = self.current.as_mut() else {
            return;
        };
        if !run.inflight.is_empty()
            || run.parked.is_some()
            || !matches!(run.steps.front(), Some(Step::Cmd(_, Kind::Auth { .. })))
        {
            return;
        }
        if let Some(Step::Cmd(line, kind)) = run.steps.pop_front() {
            self.out.push_back(format!("{line}\r\n").into_bytes());
            run.inflight.push_back((line, kind));
            // The greeting's deadline covers the greeting; this one covers the reply behind it.
            self.deadline = Some(now + self.cfg.reply_timeout);
        }
    }

    /// Sends the next step if nothing is outstanding, and with a drsftp server every following command that
    /// may be pipelined behind the ones in flight ([`may_follow`]).
    pub(super) fn advance(&mut self, now: Instant) {
        if self.phase == Phase::AwaitGreeting {
            self.auth_before_greeting(now);
            return;
        }
        if self.phase != Phase::Ready {
            return;
        }
        // Before FEAT (login) only the greeting can say it is a drsftp server.
        let pipelining = self.features.drs() || self.greeted_by_drsftp();
        // A password goes out only once the server has asked for it (`331`), unless the control channel is
        // TLS: a cleartext USER the server refuses (`--tls-required`) must not be followed by the password. An
        // anonymous login's password is no secret (`anonymous_login`).
        let pass_early = self.control_tls || self.anonymous_login;
        loop {
            let Some(run) = self.current.as_mut() else {
                return;
            };
            if run.parked.is_some() {
                return;
            }
            if let (Some(Step::Cmd(_, next)), Some(b)) = (run.steps.front(), run.batch) {
                // A batch's own rules (window, channel, gates) hold whether or not anything is in flight.
                if !batch::may_go(run, b, *next) {
                    return;
                }
            } else if let Some((_, last)) = run.inflight.back() {
                let more = match (run.steps.front(), run.batch) {
                    (Some(Step::Cmd(_, next)), None) => {
                        pipelining
                            && may_follow(*last, *next)
                            && (*next != Kind::Pass || pass_early)
                    }
                    (Some(Step::Listen), None) => {
                        pipelining && run.inflight.iter().all(|(_, k)| listen_may_follow(*k))
                    }
                    _ => false,
                };
                if !more {
                    return;
                }
            }
            match run.steps.pop_front() {
                Some(Step::Cmd(line, kind)) => {
                    self.out.push_back(format!("{line}\r\n").into_bytes());
                    run.inflight.push_back((line, kind));
                    // A batch file moving data has no reply deadline; commands queued behind it wait with it.
                    if !(run.batch.is_some() && run.started) {
                        self.deadline = Some(now + self.cfg.reply_timeout);
                    }
                }
                Some(Step::Listen) => {
                    run.parked = Some(Step::Listen);
                    // Set-up commands may still be in flight (`listen_may_follow`): their replies keep theirs.
                    if run.inflight.is_empty() {
                        self.deadline = None;
                    }
                    self.events.push_back(Event::Listen);
                    return;
                }
                Some(Step::ListenStriped) => {
                    run.parked = Some(Step::ListenStriped);
                    self.deadline = None;
                    self.events.push_back(Event::ListenStriped {
                        peers: run.stripe_peers.clone(),
                    });
                    return;
                }
                Some(Step::BlastBind) => {
                    run.parked = Some(Step::BlastBind);
                    self.deadline = None;
                    self.events.push_back(Event::BlastBind);
                    return;
                }
                Some(Step::StartTls) => {
                    run.parked = Some(Step::StartTls);
                    self.deadline = None;
                    self.events.push_back(Event::StartTls);
                    return;
                }
                Some(Step::DataReady) => unreachable!("DataReady is only parked, never queued"),
                None if run.batch.is_some() => {
                    if run.inflight.is_empty() {
                        self.finish(Ok(Outcome::Batch));
                    }
                    return;
                }
                None => {
                    // Only reached by ops whose last step completes without an outcome of its own.
                    let report = std::mem::take(&mut run.report);
                    self.finish(Ok(Outcome::Transferred(report)));
                    return;
                }
            }
        }
    }
}
