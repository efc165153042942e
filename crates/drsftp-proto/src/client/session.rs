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

use super::addr::{parse_epsv, parse_pasv, port_command};
use super::blast::{self, BlastNeg};
use super::drs::{parse_sbuf, Drs};
use super::feat::Features;
use super::markers::{parse_perf_marker, parse_range_marker, parse_stripe_counts};
use super::plan::{Kind, Step};
use super::reply::{Reply, ReplyReader};
use super::types::*;
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

#[derive(Debug)]
struct Running {
    steps: VecDeque<Step>,
    /// The command sent whose final reply we wait for.
    waiting: Option<(String, Kind)>,
    /// Waiting for a driver call (listen / data ready).
    parked: Option<Step>,
    /// The (stream count) for Connect events in this op.
    streams: u32,
    report: TransferReport,
    started: bool,
    /// ABOR sent: number of final replies still to swallow.
    abort_pending: Option<u8>,
    /// A blast transfer: what is known of its channel so far.
    blast: Option<BlastNeg>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    AwaitGreeting,
    Ready,
    Dead,
}

/// The client session. See the module docs for the I/O contract.
#[derive(Debug)]
pub struct ClientSession {
    cfg: ClientConfig,
    reader: ReplyReader,
    phase: Phase,
    banner: Option<Reply>,
    out: VecDeque<Vec<u8>>,
    events: VecDeque<Event>,
    current: Option<Running>,
    deadline: Option<Instant>,
    peer_ip: Option<IpAddr>,
    pub(super) type_image: bool,
    pub(super) mode: TransferMode,
    pub(super) features: Features,
    pub(super) drs: Drs,
    /// Held ranges for the next blast download (`set_blast_resume`, plan.rs).
    pub(super) blast_resume: Option<crate::ranges::RangeSet>,
}

fn mask(line: &str) -> String {
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
            out: VecDeque::new(),
            events: VecDeque::new(),
            current: None,
            deadline,
            peer_ip: None,
            type_image: false,
            mode: TransferMode::Stream,
            features: Features::default(),
            drs: Drs::default(),
            blast_resume: None,
        }
    }

    /// Tells the session the control connection's peer address (needed to use EPSV replies).
    pub fn set_peer_ip(&mut self, ip: IpAddr) {
        self.peer_ip = Some(ip);
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

    /// A file transfer command (not a listing) waits for its final reply, and no ABOR was sent.
    fn in_file_transfer(&self) -> bool {
        matches!(
            &self.current,
            Some(Running {
                waiting: Some((_, Kind::Transfer { listing: false })),
                abort_pending: None,
                ..
            })
        )
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
        let mut report = TransferReport::default();
        let steps: VecDeque<Step> = match op {
            Op::Login { user, pass } => [
                Step::Cmd(format!("USER {user}"), Kind::User),
                Step::Cmd(format!("PASS {pass}"), Kind::Pass),
                Step::Cmd("FEAT".into(), Kind::Feat),
            ]
            .into(),
            Op::Size(p) => [Step::Cmd(format!("SIZE {p}"), Kind::Size)].into(),
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
            Op::Command(line) => {
                // A bare transfer command (third-party: the servers' data channel is set up between them) waits
                // through 1xx and markers like a transfer, with no reply deadline once started, and ends in
                // `Outcome::Transferred`; ABOR works on it.
                let verb = line.split(' ').next().unwrap_or("").to_ascii_uppercase();
                let kind = match verb.as_str() {
                    "RETR" | "ERET" | "STOR" | "ESTO" | "APPE" => Kind::Transfer { listing: false },
                    _ => Kind::Raw,
                };
                [Step::Cmd(line, kind)].into()
            }
            Op::Quit => [Step::Cmd("QUIT".into(), Kind::Quit)].into(),
            Op::List { path, kind } => {
                let mut s = self.prelude(TransferMode::Stream);
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
                let resume = self.blast_resume.take();
                streams = if spec.mode == TransferMode::Extended {
                    spec.streams.max(1)
                } else {
                    1
                };
                match spec.transport {
                    Transport::Blast(req) if self.features.has("BLAST") => {
                        blast = Some(BlastNeg::default());
                        self.plan_blast(&spec, &req, resume.as_ref())
                    }
                    Transport::Blast(_) => {
                        report.notices.push(
                            "the server does not offer BLAST (no FEAT line): using TCP".into(),
                        );
                        self.plan_transfer(&spec)
                    }
                    Transport::Tcp => self.plan_transfer(&spec),
                }
            }
        };
        self.current = Some(Running {
            steps,
            waiting: None,
            parked: None,
            streams,
            report,
            started: false,
            abort_pending: None,
            blast,
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

    /// The driver has bound the UDP socket requested by [`Event::BlastBind`].
    pub fn handle_blast_bound(&mut self, now: Instant, addr: SocketAddr) {
        if let Some(run) = self.current.as_mut() {
            if run.parked == Some(Step::BlastBind) {
                run.parked = None;
                run.steps
                    .push_front(Step::Cmd(blast::bpas_line(addr), Kind::Bpas));
                self.advance(now);
            }
        }
    }

    /// The running transfer's blast channel, complete once the server accepted the transfer command
    /// ([`Event::TransferStarted`]); `None` for TCP transfers. [`TransferReport::blast`] repeats it at the end.
    pub fn blast_channel(&self) -> Option<BlastChannel> {
        self.current.as_ref()?.blast.as_ref()?.channel()
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
    /// [`ClientError::Aborted`] once the server has answered. Without a running transfer this does nothing.
    pub fn abort(&mut self, now: Instant) {
        let Some(run) = self.current.as_mut() else {
            return;
        };
        if run.abort_pending.is_some() {
            return;
        }
        match run.waiting {
            Some((_, Kind::Transfer { .. })) => {
                // 426 for the transfer, then 226 for ABOR (or one reply if the transfer had just ended).
                run.abort_pending = Some(2);
            }
            _ => {
                // Not in the transfer command yet: drop the remaining steps; fail once the outstanding reply
                // (if any) is in.
                run.steps.clear();
                run.abort_pending = Some(0);
                if run.waiting.is_none() {
                    self.finish(Err(ClientError::Aborted));
                }
                return;
            }
        }
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
                let what = match (&self.current, self.phase) {
                    (_, Phase::AwaitGreeting) => "greeting".to_string(),
                    (
                        Some(Running {
                            waiting: Some((c, _)),
                            ..
                        }),
                        _,
                    ) => mask(c),
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

    fn die(&mut self, err: ClientError) {
        self.drs.reset();
        self.phase = Phase::Dead;
        self.deadline = None;
        self.current = None;
        self.events.push_back(Event::Failed(err));
    }

    fn finish(&mut self, result: Result<Outcome, ClientError>) {
        self.current = None;
        self.deadline = None;
        self.events.push_back(match result {
            Ok(o) => Event::Done(o),
            Err(e) => Event::Failed(e),
        });
    }

    /// Sends the next step if nothing is outstanding.
    fn advance(&mut self, now: Instant) {
        if self.phase != Phase::Ready {
            return;
        }
        let Some(run) = self.current.as_mut() else {
            return;
        };
        if run.waiting.is_some() || run.parked.is_some() {
            return;
        }
        match run.steps.pop_front() {
            Some(Step::Cmd(line, kind)) => {
                self.out.push_back(format!("{line}\r\n").into_bytes());
                run.waiting = Some((line, kind));
                self.deadline = Some(now + self.cfg.reply_timeout);
            }
            Some(Step::Listen) => {
                run.parked = Some(Step::Listen);
                self.deadline = None;
                self.events.push_back(Event::Listen);
            }
            Some(Step::BlastBind) => {
                run.parked = Some(Step::BlastBind);
                self.deadline = None;
                self.events.push_back(Event::BlastBind);
            }
            Some(Step::DataReady) => unreachable!("DataReady is only parked, never queued"),
            None => {
                // Only reached by ops whose last step completes without an outcome of its own.
                let report = std::mem::take(&mut run.report);
                self.finish(Ok(Outcome::Transferred(report)));
            }
        }
    }

    fn on_reply(&mut self, now: Instant, reply: Reply) {
        if self.phase == Phase::AwaitGreeting {
            match reply.code {
                120 => {}
                220 => {
                    self.banner = Some(reply);
                    self.phase = Phase::Ready;
                    self.deadline = None;
                    self.advance(now);
                }
                _ => self.die(ClientError::Refused {
                    command: "(connect)".into(),
                    reply,
                }),
            }
            return;
        }
        if reply.code == 126 {
            if let Some((id, size)) = parse_sbuf(reply.text()) {
                // drsFTP notice from a receiving server; ignored unless we opted in (seed 000 §4.4).
                if self.drs.on && self.in_file_transfer() {
                    self.events.push_back(Event::SbufNotice { id, size });
                }
                return;
            }
        }
        if self.drs.outstanding() && !reply.is_preliminary() {
            let waiting = matches!(
                &self.current,
                Some(Running {
                    waiting: Some((_, Kind::Transfer { .. })),
                    ..
                })
            );
            if let Some(ev) = self.drs.take_answer(&reply, waiting) {
                self.events.push_back(ev);
                return;
            }
        }
        let Some(run) = self.current.as_mut() else {
            if reply.code == 421 {
                self.phase = Phase::Dead;
            }
            self.events.push_back(Event::Unsolicited(reply));
            return;
        };
        // Intermediate GridFTP replies during a transfer.
        match reply.code {
            111 => {
                if let Some(r) = parse_range_marker(&reply) {
                    run.report.ranges.extend(r.iter().cloned());
                    self.events.push_back(Event::RangeMarker(r));
                }
                return;
            }
            112 => {
                if let Some(p) = parse_perf_marker(&reply) {
                    run.report.last_perf = Some(p.clone());
                    self.events.push_back(Event::PerfMarker(p));
                }
                return;
            }
            126 => {
                if let Some(c) = parse_stripe_counts(&reply) {
                    run.report.stripe_counts = Some(c.clone());
                    self.events.push_back(Event::StripeCounts(c));
                }
                return;
            }
            _ => {}
        }
        if let Some(left) = run.abort_pending {
            if matches!(run.waiting, Some((_, Kind::Transfer { .. }))) {
                if reply.is_preliminary() {
                    return;
                }
                // The transfer's own final reply, or the ABOR answer.
                let left = left.saturating_sub(1);
                if left == 0 {
                    self.finish(Err(ClientError::Aborted));
                } else {
                    run.abort_pending = Some(left);
                    self.deadline = Some(now + self.cfg.reply_timeout);
                }
                return;
            }
        }
        let Some((cmd, kind)) = run.waiting.clone() else {
            self.events.push_back(Event::Unsolicited(reply));
            return;
        };
        if reply.is_preliminary() {
            if let Kind::Transfer { .. } = kind {
                if let Some(b) = run.blast.as_mut() {
                    if b.start.is_none() {
                        b.start = blast::parse_start(&reply);
                    }
                }
                if !run.started {
                    run.started = true;
                    self.deadline = None;
                    self.events.push_back(Event::TransferStarted(reply));
                }
            }
            return;
        }
        run.waiting = None;
        if run.abort_pending.is_some() {
            self.finish(Err(ClientError::Aborted));
            return;
        }
        let refused = |reply: Reply| ClientError::Refused {
            command: mask(&cmd),
            reply,
        };
        match kind {
            Kind::User => match reply.code {
                230 => {
                    // Logged in without a password: drop the PASS step.
                    run.steps.retain(|s| !matches!(s, Step::Cmd(_, Kind::Pass)));
                }
                331 => {}
                _ => return self.finish(Err(refused(reply))),
            },
            Kind::Pass => {
                if !matches!(reply.code, 230 | 202) {
                    return self.finish(Err(refused(reply)));
                }
            }
            Kind::Feat => {
                let f = Features::parse(&reply);
                self.features = f.clone();
                return self.finish(Ok(Outcome::LoggedIn(f)));
            }
            Kind::TypeI => {
                if !reply.is_ok() {
                    return self.finish(Err(refused(reply)));
                }
                self.type_image = true;
            }
            Kind::Mode(m) => {
                if !reply.is_ok() {
                    return self.finish(Err(refused(reply)));
                }
                self.mode = m;
            }
            Kind::Buffer { sbuf_fallback } => {
                if reply.is_ok() {
                    run.report.buffer_command = Some(cmd.clone());
                } else if let Some(n) = sbuf_fallback {
                    run.steps.push_front(Step::Cmd(
                        format!("SBUF {n}"),
                        Kind::Buffer {
                            sbuf_fallback: None,
                        },
                    ));
                } else {
                    let n = format!("server refused buffer size: {reply}");
                    run.report.notices.push(n.clone());
                    self.events.push_back(Event::Notice(n));
                }
            }
            Kind::OptsRetr => {
                if reply.is_ok() {
                    run.report.parallelism_accepted = true;
                } else {
                    let n = format!("server refused `{cmd}`: {reply}");
                    run.report.notices.push(n.clone());
                    self.events.push_back(Event::Notice(n));
                }
            }
            Kind::OptsDrs(on) => {
                if reply.is_ok() {
                    self.drs.on = on;
                } else {
                    let n = format!("server refused `{cmd}`: {reply}");
                    run.report.notices.push(n.clone());
                    self.events.push_back(Event::Notice(n));
                }
            }
            Kind::OptsBlast => match blast::parse_opts_reply(&reply) {
                Some(rate) if reply.is_ok() => {
                    if let Some(b) = run.blast.as_mut() {
                        b.rate = rate;
                    }
                }
                _ => return self.finish(Err(refused(reply))),
            },
            Kind::Bpas => match blast::parse_bpas_reply(&reply, self.peer_ip) {
                Some(server) => {
                    if let Some(b) = run.blast.as_mut() {
                        b.server = Some(server);
                    }
                }
                None if reply.is_ok() => {
                    return self.finish(Err(ClientError::BadReply {
                        command: cmd,
                        reply,
                    }));
                }
                None => return self.finish(Err(refused(reply))),
            },
            Kind::Allo => {
                if !reply.is_ok() {
                    let n = format!("server refused `{cmd}`: {reply}");
                    run.report.notices.push(n.clone());
                    self.events.push_back(Event::Notice(n));
                }
            }
            Kind::Rest => {
                if reply.code != 350 {
                    let n = format!("server refused `{cmd}` (not resuming there): {reply}");
                    run.report.notices.push(n.clone());
                    self.events.push_back(Event::Notice(n));
                }
            }
            Kind::Port => {
                if !reply.is_ok() {
                    return self.finish(Err(refused(reply)));
                }
            }
            Kind::Pasv | Kind::Epsv => {
                let addr = if kind == Kind::Pasv {
                    parse_pasv(&reply)
                } else {
                    self.peer_ip.and_then(|ip| parse_epsv(&reply, ip))
                };
                match addr {
                    Some(addr) => {
                        run.parked = Some(Step::DataReady);
                        self.deadline = None;
                        self.events.push_back(Event::Connect {
                            addr,
                            streams: run.streams,
                        });
                    }
                    None if reply.is_ok() => {
                        return self.finish(Err(ClientError::BadReply {
                            command: cmd,
                            reply,
                        }));
                    }
                    None if kind == Kind::Pasv && self.peer_ip.is_some() => {
                        run.steps.push_front(Step::Cmd("EPSV".into(), Kind::Epsv));
                    }
                    None => return self.finish(Err(refused(reply))),
                }
            }
            Kind::Transfer { listing } => {
                if !reply.is_ok() {
                    return self.finish(Err(refused(reply)));
                }
                if listing {
                    return self.finish(Ok(Outcome::Listed(reply)));
                }
                run.report.final_reply = Some(reply);
                run.report.drs_negotiated = self.drs.on;
                run.report.blast = run.blast.as_ref().and_then(BlastNeg::channel);
                let report = std::mem::take(&mut run.report);
                return self.finish(Ok(Outcome::Transferred(report)));
            }
            Kind::Size => {
                if reply.code != 213 {
                    return self.finish(Err(refused(reply)));
                }
                return match reply.text().trim().parse() {
                    Ok(n) => self.finish(Ok(Outcome::Size(n))),
                    Err(_) => self.finish(Err(ClientError::BadReply {
                        command: cmd,
                        reply,
                    })),
                };
            }
            Kind::Cksm => {
                if reply.code != 213 {
                    return self.finish(Err(refused(reply)));
                }
                let hex = reply
                    .text()
                    .split_whitespace()
                    .next()
                    .unwrap_or("")
                    .to_ascii_lowercase();
                if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return self.finish(Err(ClientError::BadReply {
                        command: cmd,
                        reply,
                    }));
                }
                return self.finish(Ok(Outcome::Checksum(hex)));
            }
            Kind::Raw => {
                if reply.is_error() {
                    return self.finish(Err(refused(reply)));
                }
                return self.finish(Ok(Outcome::Reply(reply)));
            }
            Kind::Quit => {
                self.finish(Ok(Outcome::Closed));
                self.phase = Phase::Dead;
                return;
            }
        }
        self.deadline = None;
        self.advance(now);
    }
}
