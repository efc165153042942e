//! The per-session state verb handlers read and change, in named parts ([`Login`], [`DataParams`] for the next
//! data channel, [`Xfer`] for the running transfer, [`Limits`]) beside the working directory, RNFR and the MLSx
//! facts, and the session's output side: queued reply bytes, queued actions, and the one outstanding driver
//! request together with the continuation that consumes its answer.

use std::collections::VecDeque;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use drsftp_storage::StorageError;

use super::error::CommandError;
use super::listing::FactSet;
use super::reply;
use super::transfer::Running;
use super::types::{
    Action, AuditEvent, DataEndpoint, FsRequest, FsResult, LoginVerdict, Mode, ServerConfig,
};
use crate::ranges::RangeSet;

/// Continuation run with the driver's answer to an [`Action::Fs`].
pub(crate) type FsCont = Box<dyn FnOnce(&mut Ctx, Instant, FsResult) + Send>;
/// Continuation run with the driver's answer to an [`Action::Listen`].
pub(crate) type ListenCont =
    Box<dyn FnOnce(&mut Ctx, Instant, Result<Vec<SocketAddr>, String>) + Send>;

/// Continuation run with the driver's answer to an [`Action::BlastBind`]: local address and transfer id.
pub(crate) type BlastCont =
    Box<dyn FnOnce(&mut Ctx, Instant, Result<(SocketAddr, u64), String>) + Send>;

/// Continuation run with the driver's verdict on an [`Action::CheckLogin`].
pub(crate) type LoginCont = Box<dyn FnOnce(&mut Ctx, Instant, LoginVerdict) + Send>;
/// Continuation run when a [`Pending::Delay`] expires.
pub(crate) type DelayCont = Box<dyn FnOnce(&mut Ctx, Instant) + Send>;

/// The driver request the session waits for; no command is processed until it is answered.
pub(crate) enum Pending {
    /// Waiting for `handle_login`.
    Login(LoginCont),
    /// Waiting for the clock (the reply to a failed PASS): `handle_timeout` at or after `until` runs `then`.
    Delay { until: Instant, then: DelayCont },
    /// Waiting for `handle_fs`.
    Fs(FsCont),
    /// Waiting for `handle_listening`.
    Listen(ListenCont),
    /// Waiting for `handle_blast_bound`.
    BlastBind(BlastCont),
}

/// Blast parameters set with `OPTS BLAST` (verbs/blast.rs), used by the next `BPAS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BlastSettings {
    /// Path MTU, bytes.
    pub(crate) mtu: u32,
    /// Client's rate cap, bit/s (0 = none).
    pub(crate) rate: u64,
    pub(crate) ack_every: Option<u32>,
    /// Client's start-rate hint, bit/s (0 = none), as given: clamped when a channel opens.
    pub(crate) start: u64,
}

impl Default for BlastSettings {
    fn default() -> Self {
        BlastSettings {
            mtu: 1500,
            rate: 0,
            ack_every: None,
            start: 0,
        }
    }
}

impl fmt::Debug for Pending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Pending::Fs(_) => "Pending::Fs",
            Pending::Listen(_) => "Pending::Listen",
            Pending::BlastBind(_) => "Pending::BlastBind",
            Pending::Login(_) => "Pending::Login",
            Pending::Delay { .. } => "Pending::Delay",
        })
    }
}

/// A `REST` argument, kept for the next transfer command only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rest {
    /// `REST n`: stream-mode restart offset.
    Offset(u64),
    /// `REST a-b,c-d`: ranges the client already holds (MODE E).
    Ranges(RangeSet),
}

impl Rest {
    /// The ranges already held, as a set (`REST n` holds `0..n`).
    pub fn held(&self) -> RangeSet {
        match self {
            Rest::Offset(n) => std::iter::once(0..*n).collect(),
            Rest::Ranges(r) => r.clone(),
        }
    }
}

/// Who the client is: `USER`/`PASS` state (verbs/login.rs).
#[derive(Debug, Default)]
pub(crate) struct Login {
    /// Name from `USER`, waiting for `PASS`.
    pub(crate) user: Option<String>,
    /// The logged-in user.
    pub(crate) logged_in: Option<String>,
    /// The login in `logged_in` is an anonymous one (for [`ServerConfig::third_party`]).
    pub(crate) anonymous: bool,
    /// The session may not change the tree: verb rows marked `writes` are refused by the dispatcher.
    pub(crate) read_only: bool,
    /// Failed `PASS` attempts (the session closes after `MAX_LOGIN_FAILURES`, verbs/login.rs).
    pub(crate) failures: u32,
}

/// Security state (RFC 4217, verbs/tls.rs). TLS is the one mechanism; GSI (`AUTH GSSAPI`/`ADAT`) would add a
/// `mechanism` here and its own upgrade action, with PBSZ/PROT shared.
#[derive(Debug, Default)]
pub(crate) struct Security {
    /// `AUTH TLS` was accepted: the control connection is (or is becoming) TLS.
    pub(crate) tls: bool,
    /// The session must check, after the `AUTH` line, that no cleartext byte followed it (`session.rs`).
    pub(crate) upgrade_requested: bool,
    /// `PBSZ 0` was accepted (PROT needs it first).
    pub(crate) pbsz: bool,
    /// `PROT P`: data connections are TLS.
    pub(crate) protect_data: bool,
    /// `SSCN ON`: we are the TLS client on those data connections (a server-to-server copy's connecting end).
    pub(crate) sscn: bool,
    /// `SSCN ON <sha256>`: the only certificate the TLS server at the other end may present.
    pub(crate) sscn_pin: Option<[u8; 32]>,
}

/// Data-channel parameters: what the next transfer will use, set by the parameter verbs and read when a
/// transfer starts (`transfer.rs`). Everything here but `rest` and `allo` persists across transfers.
#[derive(Debug)]
pub(crate) struct DataParams {
    /// TYPE A (stream-mode line-end conversion).
    pub(crate) ascii: bool,
    pub(crate) mode: Mode,
    /// From `OPTS RETR Parallelism=`.
    pub(crate) parallelism: Option<u32>,
    /// From `OPTS RETR Parallelism=<start>,<min>,<max>;` with `min < max`: refine online in that range.
    pub(crate) parallelism_range: Option<(u32, u32)>,
    /// From `OPTS RETR StripeLayout=...;[BlockSize=n;]`: how a send over several SPOR addresses is divided.
    pub(crate) layout: crate::server::StripeLayout,
    /// From SBUF / SITE *BUFSIZE.
    pub(crate) tcp_buffer: Option<u64>,
    /// `OPTS DRS Inband=1;` was accepted: two-argument SBUF, `126 SBUF` notices and in-band MODE E SBUF are on.
    pub(crate) drs_inband: bool,
    /// From `OPTS BLAST`.
    pub(crate) blast: BlastSettings,
    /// From `REST`, for the next transfer command only ([`Ctx::take_rest`]).
    pub(crate) rest: Option<Rest>,
    /// From `ALLO`, for the next upload.
    pub(crate) allo: Option<u64>,
    /// From `SITE PARTIAL` (verbs/partial.rs): the next STOR of this identity's path is kept for resume.
    pub(crate) kept: Option<drsftp_storage::KeptId>,
    /// Set by a successful PASV/EPSV/SPAS or PORT/EPRT/SPOR (or BPAS); kept across transfers (MODE E reuses it).
    pub(crate) endpoint: Option<DataEndpoint>,
    /// `EPSV ALL` was sent: PORT/PASV/EPRT/SPOR/SPAS are refused (RFC 2428 §4).
    pub(crate) epsv_all: bool,
    /// Allow PORT/EPRT/SPOR to addresses other than the control peer's (third-party transfers) whatever
    /// [`ServerConfig::third_party`] says (`ServerSession::set_allow_foreign_data`).
    pub(crate) allow_foreign: bool,
    /// The host named with `PEER` (verbs/peer.rs): passive data connections come from it instead of the
    /// control peer (the sending server of a third-party copy).
    pub(crate) data_peer: Option<IpAddr>,
    /// More addresses of this server's host beyond the control connection's local one (from the driver,
    /// `ServerSession::add_own_addrs`): a foreign data address naming one of them is refused (bounce protection).
    pub(crate) own_addrs: Vec<IpAddr>,
}

impl Default for DataParams {
    /// A fresh session: TYPE A, MODE S, no endpoint, nothing negotiated.
    fn default() -> Self {
        DataParams {
            ascii: true,
            mode: Mode::Stream,
            parallelism: None,
            parallelism_range: None,
            layout: crate::server::StripeLayout::default(),
            tcp_buffer: None,
            drs_inband: false,
            blast: BlastSettings::default(),
            rest: None,
            allo: None,
            kept: None,
            endpoint: None,
            epsv_all: false,
            allow_foreign: false,
            data_peer: None,
            own_addrs: Vec::new(),
        }
    }
}

/// Transfer state: the one running transfer and a count of the finished ones.
#[derive(Debug, Default)]
pub(crate) struct Xfer {
    /// Between [`Action::Transfer`] and the driver's `handle_transfer_done`.
    pub(crate) running: Option<Running>,
    /// Transfers finished in this session (STAT).
    pub(crate) done: u64,
}

/// Session limits: the idle timer and the pre-login deadline; per-session limits (transfers, bytes, time) will
/// join them.
#[derive(Debug)]
pub(crate) struct Limits {
    /// When an idle session is closed (`421`); restarted by each command ([`Ctx::touch`]).
    pub(crate) idle_deadline: Option<Instant>,
    /// When a session that has not logged in is closed (`421`); `None` once logged in.
    pub(crate) login_deadline: Option<Instant>,
}

/// Session state shared by the session loop and the verb handlers.
#[derive(Debug)]
pub(crate) struct Ctx {
    pub(crate) cfg: ServerConfig,
    /// Our end of the control connection.
    pub(crate) local: SocketAddr,
    /// The client's end of the control connection.
    pub(crate) peer: SocketAddr,
    pub(crate) login: Login,
    /// Control- and data-channel security: `AUTH TLS`, `PBSZ`, `PROT` (verbs/tls.rs).
    pub(crate) sec: Security,
    /// Working directory (absolute virtual path).
    pub(crate) cwd: String,
    /// Source path accepted by `RNFR`, valid for the very next command only.
    pub(crate) rnfr: Option<String>,
    /// MLSx facts selected with `OPTS MLST`.
    pub(crate) facts: FactSet,
    pub(crate) data: DataParams,
    pub(crate) xfer: Xfer,
    pub(crate) limits: Limits,
    /// The driver request the session waits for.
    pub(crate) pending: Option<Pending>,
    /// `Action::Close` was emitted; nothing more is processed.
    pub(crate) closed: bool,
    out: Vec<u8>,
    actions: VecDeque<Action>,
    /// Audit events for the driver's log ([`super::ServerSession::poll_event`]).
    events: VecDeque<AuditEvent>,
    next_id: u64,
    /// `(instant, epoch seconds)` pairing from `set_epoch`; else timestamps count from `started`.
    epoch: Option<(Instant, f64)>,
    started: Instant,
}

impl Ctx {
    pub(crate) fn new(
        now: Instant,
        cfg: ServerConfig,
        local: SocketAddr,
        peer: SocketAddr,
    ) -> Self {
        let idle_deadline = now.checked_add(cfg.idle_timeout);
        let login_deadline = now.checked_add(cfg.login_timeout);
        Ctx {
            cfg,
            local,
            peer,
            login: Login::default(),
            sec: Security::default(),
            cwd: "/".into(),
            rnfr: None,
            facts: FactSet::default(),
            data: DataParams::default(),
            xfer: Xfer::default(),
            limits: Limits {
                idle_deadline,
                login_deadline,
            },
            pending: None,
            closed: false,
            out: Vec::new(),
            actions: VecDeque::new(),
            events: VecDeque::new(),
            next_id: 1,
            epoch: None,
            started: now,
        }
    }

    /// Whether data-channel addresses on a host other than the control peer's are allowed: the driver's
    /// override, or the configured third-party policy for the current login.
    pub(crate) fn foreign_data_allowed(&self) -> bool {
        self.data.allow_foreign
            || (self.login.logged_in.is_some() && self.cfg.third_party.allows(self.login.anonymous))
    }

    /// The only host passive data connections are accepted from: the one named with `PEER`, else the control
    /// peer; `None` (any host) only under `ThirdParty::All` with nothing named.
    pub(crate) fn passive_peer(&self) -> Option<IpAddr> {
        match self.data.data_peer {
            Some(ip) => Some(ip),
            None if self.cfg.third_party == super::types::ThirdParty::All => None,
            None => Some(self.peer.ip().to_canonical()),
        }
    }

    /// Whether `ip` is one of this server's own addresses: the control connection's local address, the data
    /// interface, or one the driver added.
    pub(crate) fn is_own_addr(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        ip == self.local.ip().to_canonical()
            || self.cfg.data_interface.map(|d| d.to_canonical()) == Some(ip)
            || self.data.own_addrs.iter().any(|o| o.to_canonical() == ip)
    }

    /// `530` unless a user is logged in: for OPTS hooks, which the session's per-row login check does not cover.
    pub(crate) fn require_login(&self) -> Result<(), CommandError> {
        if self.login.logged_in.is_none() {
            return Err(CommandError::Reply(
                530,
                "Please login with USER and PASS.".into(),
            ));
        }
        Ok(())
    }

    /// Queues a single-line reply.
    pub(crate) fn reply(&mut self, code: u16, text: &str) {
        self.out.extend_from_slice(&reply::single(code, text));
    }

    /// Queues a multi-line reply.
    pub(crate) fn reply_multi(&mut self, code: u16, first: &str, body: &[String], last: &str) {
        self.out
            .extend_from_slice(&reply::multi(code, first, body, last));
    }

    /// Queues preformatted reply bytes.
    pub(crate) fn reply_raw(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }

    /// Queues the reply for a refused command.
    pub(crate) fn refuse(&mut self, e: &CommandError) {
        self.reply(e.code(), &e.to_string());
    }

    /// Queues the reply for a storage failure (code from `StorageError::reply_code`).
    fn storage_error(&mut self, e: &StorageError) {
        self.reply(e.reply_code(), &e.to_string());
    }

    /// The reply for an Fs answer a continuation has no arm for: the storage error's own reply, or `451` for an
    /// answer of the wrong kind. Every Fs continuation ends in this arm.
    pub(crate) fn fs_failed(&mut self, got: FsResult) {
        match got {
            FsResult::Err(e) => self.storage_error(&e),
            other => self.unexpected(&other),
        }
    }

    /// The driver answered an Fs request with the wrong kind of result.
    fn unexpected(&mut self, got: &FsResult) {
        let kind = match got {
            FsResult::Stat(_) => "Stat",
            FsResult::List(_) => "List",
            FsResult::Done => "Done",
            FsResult::Checksum(_) => "Checksum",
            FsResult::Kept(_) => "Kept",
            FsResult::Err(_) => "Err",
        };
        self.reply(
            451,
            &format!("Local error: unexpected storage answer ({kind})."),
        );
    }

    pub(crate) fn take_output(&mut self) -> Option<Vec<u8>> {
        (!self.out.is_empty()).then(|| std::mem::take(&mut self.out))
    }

    pub(crate) fn action(&mut self, a: Action) {
        self.actions.push_back(a);
    }

    pub(crate) fn take_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// The next action, left in place (test drivers answer some kinds themselves).
    #[cfg(test)]
    pub(crate) fn peek_action(&self) -> Option<&Action> {
        self.actions.front()
    }

    /// Removes a queued [`Action::CheckLogin`] (test drivers answer it themselves).
    #[cfg(test)]
    pub(crate) fn take_check_login(&mut self) -> Option<(String, String)> {
        let i = self
            .actions
            .iter()
            .position(|a| matches!(a, Action::CheckLogin { .. }))?;
        match self.actions.remove(i)? {
            Action::CheckLogin { user, password } => Some((user, password.0)),
            _ => None,
        }
    }

    pub(crate) fn event(&mut self, e: AuditEvent) {
        self.events.push_back(e);
    }

    pub(crate) fn take_event(&mut self) -> Option<AuditEvent> {
        self.events.pop_front()
    }

    /// Asks the driver to check `user`/`password`; `k` gets the verdict. Commands wait until then.
    pub(crate) fn check_login(
        &mut self,
        user: String,
        password: String,
        k: impl FnOnce(&mut Ctx, Instant, LoginVerdict) + Send + 'static,
    ) {
        self.action(Action::CheckLogin {
            user,
            password: super::types::Secret(password),
        });
        self.pending = Some(Pending::Login(Box::new(k)));
    }

    /// Runs `then` at `until` (via `handle_timeout`); commands wait until then.
    pub(crate) fn delay(
        &mut self,
        until: Instant,
        then: impl FnOnce(&mut Ctx, Instant) + Send + 'static,
    ) {
        self.pending = Some(Pending::Delay {
            until,
            then: Box::new(then),
        });
    }

    /// Asks the driver to run `req`; `k` gets the answer. Commands wait until then.
    pub(crate) fn fs(
        &mut self,
        req: FsRequest,
        k: impl FnOnce(&mut Ctx, Instant, FsResult) + Send + 'static,
    ) {
        self.action(Action::Fs(req));
        self.pending = Some(Pending::Fs(Box::new(k)));
    }

    /// Asks the driver for `count` passive listeners on `ip`; `k` gets the answer. The old endpoint is gone.
    pub(crate) fn listen(
        &mut self,
        ip: IpAddr,
        count: usize,
        k: impl FnOnce(&mut Ctx, Instant, Result<Vec<SocketAddr>, String>) + Send + 'static,
    ) {
        self.data.endpoint = None;
        self.action(Action::Listen { ip, count });
        self.pending = Some(Pending::Listen(Box::new(k)));
    }

    /// Asks the driver for a blast UDP socket on `ip`; `k` gets its address and a transfer id. The old endpoint
    /// is gone.
    pub(crate) fn blast_bind(
        &mut self,
        ip: IpAddr,
        k: impl FnOnce(&mut Ctx, Instant, Result<(SocketAddr, u64), String>) + Send + 'static,
    ) {
        self.data.endpoint = None;
        self.action(Action::BlastBind { ip });
        self.pending = Some(Pending::BlastBind(Box::new(k)));
    }

    /// Queues `code text` and [`Action::Close`]; the session stops processing input.
    pub(crate) fn close(&mut self, code: u16, text: &str) {
        if self.closed {
            return;
        }
        self.reply(code, text);
        self.action(Action::Close);
        self.closed = true;
        self.pending = None;
    }

    /// `arg` resolved against the working directory (absolute, normalised, never above `/`).
    pub(crate) fn resolve(&self, arg: &str) -> String {
        drsftp_storage::join_virtual(&self.cwd, arg)
    }

    /// The endpoint for the next transfer, or `425`.
    pub(crate) fn endpoint(&self) -> Result<DataEndpoint, CommandError> {
        self.data.endpoint.clone().ok_or_else(|| {
            CommandError::NoData("Use PORT, EPRT, SPOR, PASV, EPSV or SPAS first.".into())
        })
    }

    /// The address passive listeners bind to: the data interface, else the control connection's local address.
    pub(crate) fn data_ip(&self) -> IpAddr {
        self.cfg
            .data_interface
            .unwrap_or(self.local.ip())
            .to_canonical()
    }

    /// The address PASV/EPSV/SPAS advertise: [`Ctx::data_ip`], or the control connection's local address when
    /// the data interface is a wildcard (`0.0.0.0` / `::`).
    pub(crate) fn advertised_ip(&self) -> IpAddr {
        let ip = self.data_ip();
        if ip.is_unspecified() {
            self.local.ip().to_canonical()
        } else {
            ip
        }
    }

    /// REST is good for the next transfer command only: every transfer command takes it.
    pub(crate) fn take_rest(&mut self) -> Option<Rest> {
        self.data.rest.take()
    }

    pub(crate) fn next_transfer_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        id
    }

    pub(crate) fn set_epoch(&mut self, now: Instant, epoch_secs: f64) {
        if epoch_secs.is_finite() && epoch_secs >= 0.0 {
            self.epoch = Some((now, epoch_secs));
        }
    }

    /// Seconds since the Unix epoch at `now` (from `set_epoch`; without it, seconds since the session began).
    pub(crate) fn epoch_at(&self, now: Instant) -> f64 {
        let (base, secs) = self.epoch.unwrap_or((self.started, 0.0));
        match now.checked_duration_since(base) {
            Some(d) => secs + d.as_secs_f64(),
            None => (secs - base.duration_since(now).as_secs_f64()).max(0.0),
        }
    }

    /// Whole epoch seconds at `now`, only if the driver gave the wall clock.
    pub(crate) fn epoch_secs(&self, now: Instant) -> Option<i64> {
        self.epoch.map(|_| self.epoch_at(now) as i64)
    }

    /// Restarts the idle timer.
    pub(crate) fn touch(&mut self, now: Instant) {
        self.limits.idle_deadline = now.checked_add(self.cfg.idle_timeout);
    }
}
