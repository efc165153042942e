//! The server session's vocabulary: configuration, the actions it asks the driver to perform, and the results the
//! driver hands back. No logic lives here.

use std::net::{IpAddr, SocketAddr};
use std::ops::Range;
use std::time::Duration;

use drsftp_storage::{ChecksumAlg, KeptId, KeptLimits, Metadata, StorageError, WriteMode};

use crate::ranges::RangeSet;

/// Server settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Accept `anonymous`/`ftp` logins with any password.
    pub anonymous: bool,
    /// Anonymous sessions may change the tree (STOR, DELE, RNFR/RNTO, MKD, RMD ...). Off (the default): they are
    /// read-only and every verb row marked `writes` gets `550 Permission denied: read-only session.`
    pub anonymous_write: bool,
    /// Close a connection that has not logged in this long after it connected (`421`), so idle unauthenticated
    /// connections cannot hold session slots.
    pub login_timeout: Duration,
    /// Delays of the `530` after failed PASS attempts on one connection (the n-th failure waits
    /// `login_delays[min(n-1, len-1)]`), so one connection gets few guesses per second.
    pub login_delays: Vec<Duration>,
    /// Failed PASS attempts on one connection before `421` and close.
    pub max_login_failures: u32,
    /// Text of the `220` greeting.
    pub banner: String,
    /// Longest accepted command line, bytes (longer lines get `500` and are discarded up to the next CRLF).
    pub max_line: usize,
    /// Close the control connection after this long without a command (no transfer running): `421`.
    pub idle_timeout: Duration,
    /// Address advertised in PASV/SPAS replies (default: the control connection's local address).
    pub data_interface: Option<IpAddr>,
    /// Interval of `111`/`112` markers while receiving in MODE E (Globus default: 5 s).
    pub marker_interval: Duration,
    /// Default parallelism for MODE E sends when the client gave no `OPTS RETR Parallelism`.
    pub default_parallelism: u32,
    /// Largest parallelism accepted from `OPTS RETR`.
    pub max_parallelism: u32,
    /// Largest buffer size accepted from SBUF/SITE *BUFSIZE (bytes).
    pub max_buffer: u64,
    /// Offer the UDP blast data channel (FEAT ` BLAST`, `OPTS BLAST`, `BPAS`; docs/blast.md). Off: those
    /// commands get `502` and clients fall back to TCP.
    pub blast: bool,
    /// Cap on blast sending rates, bit/s on the wire (0 = none): what this server sends, and announced to clients
    /// (the `Rate=` of the `OPTS BLAST` reply) as the cap for what they send.
    pub blast_max_rate: u64,
    /// Largest path MTU accepted in `OPTS BLAST` (smaller requests are kept, larger ones clamped).
    pub blast_max_mtu: u32,
    /// Which logins may send data-channel addresses other than the control peer's host (PORT/EPRT/SPOR,
    /// `BPAS <addr>`, `BPRT`, `PEER`): what a third-party (server-to-server) transfer between two hosts needs.
    /// Passive data connections are accepted only from the control peer's address, or from the host the session
    /// named with `PEER` (verbs/peer.rs); `All` alone also accepts them from any host.
    pub third_party: ThirdParty,
    /// A running transfer that moves no byte for this long ends with `426` (a never-connected data channel
    /// included: the driver's accept timeout is the same setting). Zero disables the rule.
    pub data_timeout: Duration,
    /// Explicit FTPS (RFC 4217): whether `AUTH TLS` is offered, and whether it is required. The driver holds
    /// the certificate; this only says what the session announces and enforces.
    pub tls: TlsPolicy,
    /// Bounds on the partial uploads kept for resume in each user's area (`SITE PARTIAL`, docs/resume.md);
    /// `max_files: 0` keeps none.
    pub kept: KeptLimits,
    /// A striped frontend's data movers (0: this server moves its own data). With N movers SPAS asks the driver
    /// for N listeners (one on each mover) and every passive reply advertises the addresses the driver returns
    /// as they are (they are the movers', not this host's); EPSV, which can name only a port on this host, is
    /// refused so clients fall back to PASV.
    pub data_nodes: usize,
}

/// Control- and data-channel security policy (RFC 4217). The session only decides *when* to switch
/// ([`Action::StartTls`]) and what the data channels carry ([`TransferPlan::protect`]); the handshake lives in
/// the driver. A later GSI mechanism (`AUTH GSSAPI` + `ADAT`, RFC 2228) would add a mechanism beside TLS in
/// the session's security part (`ctx.rs`, [`Action::StartTls`] becoming one of several upgrades), not here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsPolicy {
    /// No certificate: `AUTH` gets `504`, FEAT is unchanged.
    #[default]
    Off,
    /// `AUTH TLS`, `PBSZ` and `PROT` are offered; cleartext sessions are still allowed.
    Offered,
    /// As `Offered`, and USER/PASS before `AUTH TLS` get `530`, `PROT C` gets `536`, transfers before
    /// `PROT P` get `521` (RFC 4217 §9), so neither passwords nor data cross the network in cleartext.
    Required,
}

/// Which sessions may direct data connections at a host other than the control connection's peer (FTP bounce
/// protection, RFC 2577, versus GridFTP third-party transfers). Ports below 1024 are refused in every case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ThirdParty {
    /// Never: foreign data addresses get `504`.
    None,
    /// Sessions logged in as a configured user (not anonymous).
    #[default]
    Auth,
    /// Every logged-in session, anonymous ones included.
    All,
}

impl ThirdParty {
    /// Whether a session logged in this way (`anonymous` or with a configured user) may use foreign addresses.
    pub fn allows(self, anonymous: bool) -> bool {
        match self {
            ThirdParty::None => false,
            ThirdParty::Auth => !anonymous,
            ThirdParty::All => true,
        }
    }

    /// The policy's name: `none`, `auth` or `all`.
    pub fn as_str(self) -> &'static str {
        match self {
            ThirdParty::None => "none",
            ThirdParty::Auth => "auth",
            ThirdParty::All => "all",
        }
    }
}

impl std::fmt::Display for ThirdParty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ThirdParty {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(ThirdParty::None),
            "auth" => Ok(ThirdParty::Auth),
            "all" => Ok(ThirdParty::All),
            _ => Err(format!(
                "unknown third-party policy {s:?} (none, auth or all)"
            )),
        }
    }
}

/// The default delays of `530` after a failed PASS: 0.5 s, 1 s, 2 s, 4 s, then 5 s.
pub const DEFAULT_LOGIN_DELAYS: [Duration; 5] = [
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
    Duration::from_secs(5),
];

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            anonymous: true,
            anonymous_write: false,
            login_timeout: Duration::from_secs(30),
            login_delays: DEFAULT_LOGIN_DELAYS.to_vec(),
            max_login_failures: 3,
            banner: "drsftp GridFTP server ready.".into(),
            max_line: 4096,
            idle_timeout: Duration::from_secs(900),
            data_interface: None,
            marker_interval: Duration::from_secs(5),
            default_parallelism: 1,
            max_parallelism: 64,
            max_buffer: 256 << 20,
            blast: true,
            blast_max_rate: 0,
            blast_max_mtu: 65_535,
            third_party: ThirdParty::Auth,
            data_timeout: Duration::from_secs(60),
            tls: TlsPolicy::Off,
            kept: KeptLimits::default(),
            data_nodes: 0,
        }
    }
}

/// Most entries `STAT <dir>` shows over the control connection; past it the reply says to use MLSD or LIST.
pub const STAT_LIST_LIMIT: usize = 10_000;

/// A filesystem request; the driver runs it on its `Storage` and answers with [`ServerSession::handle_fs`].
/// Paths are already resolved against the session's working directory (absolute virtual paths).
///
/// [`ServerSession::handle_fs`]: super::ServerSession::handle_fs
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsRequest {
    /// `Storage::stat` → [`FsResult::Stat`].
    Stat(String),
    /// At most [`STAT_LIST_LIMIT`] + 1 entries of a directory (`Storage::list_each`), in any order →
    /// [`FsResult::List`]. Only `STAT <dir>` asks: its listing goes over the control connection, so it is
    /// capped; data-connection listings stream (`Payload::SendListing`).
    List(String),
    /// `Storage::mkdir` → [`FsResult::Done`].
    Mkdir(String),
    /// `Storage::rmdir` → [`FsResult::Done`].
    Rmdir(String),
    /// `Storage::remove` → [`FsResult::Done`].
    Remove(String),
    /// `Storage::rename` → [`FsResult::Done`].
    Rename {
        /// Source path.
        from: String,
        /// Destination path.
        to: String,
    },
    /// `Storage::set_modified` (MFMT) → [`FsResult::Done`].
    SetModified {
        /// File.
        path: String,
        /// The new modification time.
        time: std::time::SystemTime,
    },
    /// `drsftp_storage::checksum` over `offset..offset+length` (`None` = to the end) → [`FsResult::Checksum`].
    Checksum {
        /// Algorithm.
        alg: ChecksumAlg,
        /// File.
        path: String,
        /// First byte.
        offset: u64,
        /// Length, `None` = to the end.
        length: Option<u64>,
    },
    /// `Storage::kept_held` (SITE PARTIAL) → [`FsResult::Kept`].
    KeptHeld(Keep),
    /// `Storage::open_write` of an upload's destination before its preliminary reply → [`FsResult::Done`]; the
    /// driver keeps what it opened for the [`Action::Transfer`] that follows (a `RecvFile` of this path and
    /// mode). A destination that cannot be written (a directory of that name, no permission) is refused before
    /// the `150`, so a pipelined batch's next bytes never meet a transfer that already failed.
    OpenWrite {
        /// The resolved path.
        path: String,
        /// How it will be written.
        write_mode: WriteMode,
    },
}

/// The driver's answer to an [`FsRequest`].
#[derive(Debug)]
pub enum FsResult {
    /// Metadata of the path.
    Stat(Metadata),
    /// Directory entries.
    List(Vec<Metadata>),
    /// The operation succeeded.
    Done,
    /// Lower-case hex checksum.
    Checksum(String),
    /// The ranges a kept partial upload holds (`a-b,c-d`), `None` if none is kept.
    Kept(Option<String>),
    /// The operation failed; the session maps it with `StorageError::reply_code`.
    Err(StorageError),
}

/// Where data connections come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataEndpoint {
    /// The driver's passive listener(s) from the last PASV/EPSV/SPAS (accept connections there).
    Passive,
    /// Connect to these addresses (PORT/EPRT: one; SPOR: several). In MODE E, `parallelism` connections to each.
    Active(Vec<SocketAddr>),
    /// The UDP blast channel set up with `BPAS` (docs/blast.md): good for one transfer, in either direction,
    /// whatever MODE says.
    Blast(BlastEndpoint),
}

/// A blast data channel: the UDP socket the driver bound for `BPAS`, the client's UDP address, and what was
/// agreed with `OPTS BLAST`. The driver runs a `drsftp_blast` sender (RETR/ERET) or receiver (STOR/APPE/ESTO)
/// with `TransferParams { transfer_id, total_bytes: the transfer's size, payload_size }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlastEndpoint {
    /// The driver's UDP socket (from [`ServerSession::handle_blast_bound`](super::ServerSession::handle_blast_bound)).
    pub local: SocketAddr,
    /// The client's UDP socket: data or acks go there; datagrams from other hosts are dropped.
    pub peer: SocketAddr,
    /// Random per channel (from the driver), in every datagram.
    pub transfer_id: u64,
    /// Payload bytes per data packet, from the agreed MTU.
    pub payload_size: usize,
    /// Sending-rate cap, bit/s on the wire (0 = none): the smaller non-zero of the client's and the server's.
    pub max_rate: u64,
    /// The client's acknowledgement frequency for when the server receives (`AckEvery=`), if it gave one.
    pub ack_every: Option<u32>,
    /// The sender's starting rate when the server sends (`Start=`), bit/s (0 = the sender's default), already
    /// clamped to the server's caps (`verbs/blast.rs`).
    pub start_rate: u64,
    /// The transfer id was adopted from `BPRT` (named by the client, not drawn here): such a channel is refused
    /// under `PROT P`, whose AEAD keys are fresh only if the id is.
    pub adopted_id: bool,
}

/// What flows over the data channel and where it comes from or goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// Server sends file bytes (RETR/ERET): `ranges` of the file in file offsets; in MODE E blocks carry
    /// `file offset - wire_sub` (ERET: offsets relative to the section start).
    SendFile {
        /// Absolute virtual path.
        path: String,
        /// File ranges to send (empty ranges never appear). For RETR without REST: `0..size` (the driver may
        /// pass `0..u64::MAX` semantics as "to EOF" — see `to_eof`).
        ranges: Vec<Range<u64>>,
        /// The last range runs to the end of the file (its `end` is only an upper bound).
        to_eof: bool,
        /// Subtracted from file offsets in MODE E headers.
        wire_sub: u64,
    },
    /// Server sends these bytes (a listing) over stream mode.
    SendBytes(Vec<u8>),
    /// Server sends a directory's listing over stream mode, formatting entries as the driver reads them
    /// (`Storage::list_each`), so a directory of any size costs no more memory than a few lines. A directory
    /// that cannot be read by then fails the transfer (`451`).
    SendListing {
        /// Absolute virtual path of the directory.
        path: String,
        /// How each entry becomes a line.
        format: crate::server::ListFormat,
    },
    /// Server receives a file (STOR/APPE/ESTO).
    RecvFile {
        /// Absolute virtual path.
        path: String,
        /// `Replace` for STOR (part file renamed on success), `InPlace` for APPE/ESTO/restarted STOR.
        write_mode: WriteMode,
        /// Stream mode: first byte lands here (REST offset, or the current size for APPE).
        /// MODE E: added to every block's wire offset (ESTO A offset).
        offset: u64,
        /// Expected size, if announced with ALLO (a short transfer is then an error).
        expected: Option<u64>,
        /// A resumable upload armed with `SITE PARTIAL` (MODE E STOR with ALLO): written to the kept partial
        /// of this identity, which a failed transfer leaves for a rerun; `write_mode` then does not apply.
        keep: Option<Keep>,
    },
}

/// A kept partial upload: whose it is and the bounds of the user's area (`drsftp_storage::kept`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keep {
    /// User, path, size and the client's source tag.
    pub id: KeptId,
    /// From [`ServerConfig::kept`].
    pub limits: KeptLimits,
}

impl Payload {
    /// A directory listing (always stream mode, never over blast).
    pub fn is_listing(&self) -> bool {
        matches!(self, Payload::SendBytes(_) | Payload::SendListing { .. })
    }
}

/// Data transfer mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// MODE S.
    Stream,
    /// MODE E.
    Extended,
}

/// A transfer the driver must run, then report with `handle_transfer_done`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferPlan {
    /// Identifies the transfer in later calls.
    pub id: u64,
    /// The command the client sent to start it (`RETR`, `ERET`, `STOR`, `APPE`, `ESTO`, `LIST`, ...).
    pub verb: &'static str,
    /// The `REST` the client sent before that command, if any.
    pub restart: Option<super::Rest>,
    /// What moves.
    pub payload: Payload,
    /// MODE S or MODE E (listings are always stream mode).
    pub mode: Mode,
    /// Where the data connections come from.
    pub endpoint: DataEndpoint,
    /// MODE E sending: connections to open per address (`OPTS RETR Parallelism`).
    pub parallelism: u32,
    /// MODE E sending (RETR/ERET) only: `(min, max)` from `OPTS RETR Parallelism=<start>,<min>,<max>;` when
    /// `min < max`. The driver starts on `parallelism` connections and may add or retire connections online
    /// within this range (`-p auto` on a download; the EOF count covers every connection used). `None`: exactly
    /// `parallelism` connections, as globus-url-copy's `Parallelism=n,n,n;` asks.
    pub parallelism_range: Option<(u32, u32)>,
    /// MODE E sending to several SPOR addresses: which ranges go to which address (each address is one
    /// receiving stripe and gets its own EOF with the count of connections made to it, GFD.20).
    pub layout: super::StripeLayout,
    /// TCP buffer size requested with SBUF / SITE RETRBUFSIZE / STORBUFSIZE, if any.
    pub tcp_buffer: Option<u64>,
    /// TYPE A: convert line ends (LF ↔ CRLF) in stream mode.
    pub ascii: bool,
    /// In-band DRS on the data channels (MODE E headers with descriptors 0x02 = SBUF request, 0x01 = its
    /// reply): true only in MODE E after the client opted in with `OPTS DRS Inband=1;`. The driver must neither
    /// send such headers nor expect them otherwise (a Globus peer would take them for data).
    pub inband_drs: bool,
    /// A blast RETR/ERET after `REST a-b,c-d` (a resumed blast download, docs/blast.md "Resume"): the byte
    /// ranges of the section, relative to its start, the client already holds. The driver starts its blast
    /// sender with the packets wholly inside them acknowledged (`drsftp_blast::resume::packets_within`, the
    /// same rule the client applies), so only the rest is sent. Empty otherwise.
    pub resume: crate::ranges::RangeSet,
    /// [`DataEndpoint::Passive`]: the only host whose data connections the driver may accept (the control
    /// peer's address, or the one named with `PEER`); connections from any other address are closed unread and
    /// the driver keeps waiting. `None`: any host (`ThirdParty::All` without `PEER`).
    pub data_peer: Option<IpAddr>,
    /// Most data connections the transfer may use (accepted or opened, cached ones included): `parallelism`,
    /// or for a MODE E receive the most the client may open (`OPTS RETR Parallelism` max, else the server's
    /// `max_parallelism`). The driver closes extra connections at once.
    pub max_connections: u32,
    /// `PROT P` (RFC 4217): every data connection of this transfer is TLS, with the server as the TLS server
    /// whichever side connects (RFC 4217 §7), on every connection of stream mode and MODE E.
    pub protect: bool,
    /// With `protect`: `SSCN ON` was given, so this server is the TLS *client* on the data connections (the
    /// other end of a server-to-server copy is the TLS server).
    pub tls_client: bool,
    /// With `tls_client`: the SHA-256 of the only certificate the peer may present (`SSCN ON <pin>`); `None`:
    /// the peer must chain to the system roots.
    pub tls_peer_pin: Option<[u8; 32]>,
}

/// Something the driver must do.
// A session queues a handful of actions and a transfer plan is one per transfer, so the size of the largest
// variant costs nothing worth a Box (and a Box would change every driver's match).
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Run a filesystem request and call `handle_fs`.
    Fs(FsRequest),
    /// A `CKSM` waits in the queue right behind the running transfer, which will not yield that digest itself
    /// (it is a blast send, a partial one, or of another file): the driver may start computing this request
    /// now, so the answer is ready when the transfer ends. No reply depends on it: the command still runs in
    /// order, as an [`Action::Fs`] of the same request, which the driver may answer from what it computed if
    /// the file is unchanged. Ignoring it is always correct.
    Prefetch(FsRequest),
    /// Bind `count` passive data listeners (one for PASV/EPSV, one per stripe for SPAS) on `ip` (port 0) and
    /// call `handle_listening`. Any previous passive listeners are closed.
    Listen {
        /// Address to bind.
        ip: IpAddr,
        /// Number of listeners.
        count: usize,
    },
    /// Bind a UDP socket on `ip` (port 0) for a blast channel and call `handle_blast_bound` with its address and
    /// a fresh random transfer id. Any previous blast socket may be dropped.
    BlastBind {
        /// Address to bind.
        ip: IpAddr,
    },
    /// Start a transfer and call `handle_transfer_done` when it ends (and `handle_progress` while it runs).
    Transfer(TransferPlan),
    /// Stop the running transfer (ABOR); the driver still calls `handle_transfer_done` (with `Aborted`).
    Abort,
    /// Apply an in-transfer buffer change (control-channel `SBUF <id> <size>` during a transfer, seed 000).
    SetBuffer {
        /// Probe id from the command.
        id: u64,
        /// Requested size.
        size: u64,
    },
    /// Flush pending replies (the `234` to `AUTH TLS`), then run a TLS server handshake on the control
    /// connection and read every later byte through it. The session has already checked that no cleartext
    /// byte followed the `AUTH` line; a failed handshake just closes the connection.
    StartTls,
    /// Check a (non-anonymous) login off the event loop (password hashing takes tens of milliseconds) and call
    /// `handle_login` with the verdict. No command runs until then.
    CheckLogin {
        /// Name from USER.
        user: String,
        /// Text of PASS (never printed by `Debug`).
        password: Secret,
    },
    /// Flush pending replies and close the control connection (QUIT, idle timeout, fatal framing error).
    Close,
}

/// A password on its way to the driver: `Debug` prints `<redacted>` so logging an action never leaks it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// The driver's verdict on an [`Action::CheckLogin`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoginVerdict {
    /// Good credentials; `read_only` sessions get `550` for every verb that changes the tree.
    Granted {
        /// The user may not change the tree.
        read_only: bool,
    },
    /// Unknown user or wrong password: `530` after the failure delay.
    Denied,
    /// Too many recent failures from this address: `421` and close, whatever the password.
    Blocked,
}

/// What the session reports for the audit log (the driver logs it with its clock and the peer address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditEvent {
    /// A PASS was answered.
    Login {
        /// Name from USER (truncated to 64 characters).
        user: String,
        /// An anonymous login.
        anonymous: bool,
        /// `230` (true) or refused.
        ok: bool,
        /// The session is read-only.
        read_only: bool,
    },
}

/// How a transfer ended, from the driver.
#[derive(Debug)]
pub enum TransferResult {
    /// All data moved (and, for receives, the file was committed).
    Ok {
        /// Payload bytes.
        bytes: u64,
        /// Data connections used.
        streams: usize,
    },
    /// It failed; `code` is the FTP reply code to use (425/426/451/452/550/553) and `message` the text.
    Failed {
        /// Reply code.
        code: u16,
        /// Reply text.
        message: String,
    },
    /// ABOR stopped it.
    Aborted,
}

/// Live progress of a running transfer, for markers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransferProgress {
    /// Payload bytes so far.
    pub bytes: u64,
    /// File ranges received so far (receiving side), for `111 Range Marker`.
    pub ranges: RangeSet,
    /// A striped frontend: bytes per stripe (one `112` per stripe, GFD.20 `Stripe Index`); empty otherwise.
    pub stripes: Vec<u64>,
}
