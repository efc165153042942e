//! The client session's vocabulary: operations the driver asks for ([`Op`]), what it gets back ([`Event`],
//! [`Outcome`], [`TransferReport`]) and the error type ([`ClientError`]). No logic lives here.

use super::feat::Features;
use super::markers::PerfMarker;
use super::reply::{Reply, ReplyError};
use std::net::SocketAddr;
use std::ops::Range;
use std::time::Duration;

/// Session settings.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// How long to wait for the reply to a command (not for the end of a running transfer: the driver watches
    /// data progress for that).
    pub reply_timeout: Duration,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            reply_timeout: Duration::from_secs(60),
        }
    }
}

/// Data transfer mode on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferMode {
    /// RFC 959 stream mode (`MODE S`): one connection, end of data is the socket close.
    Stream,
    /// GridFTP extended block mode (`MODE E`): N connections, 17-byte block headers, EOD/EOF accounting.
    Extended,
}

impl TransferMode {
    /// The letter sent in `MODE x` and reported in `--json` (`"S"`/`"E"`).
    pub fn letter(self) -> char {
        match self {
            TransferMode::Stream => 'S',
            TransferMode::Extended => 'E',
        }
    }
}

/// Which way the file moves, seen from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Server → client (RETR/ERET).
    Download,
    /// Client → server (STOR/ESTO).
    Upload,
}

/// A partial transfer: `ERET P offset length` for downloads, `ESTO A offset` (with `length` bytes sent) for
/// uploads. The bytes land at the same offset on the other side, as globus-url-copy `-off/-len` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partial {
    /// First byte of the section.
    pub offset: u64,
    /// Number of bytes in the section.
    pub length: u64,
}

/// Everything the session needs to drive one file transfer on the control channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferSpec {
    /// Download or upload.
    pub direction: Direction,
    /// Server path, sent as is.
    pub path: String,
    /// Stream or extended block mode.
    pub mode: TransferMode,
    /// Parallel TCP streams (MODE E). Stream mode always uses one.
    pub streams: u32,
    /// MODE E downloads: `(min, max)` to send as `OPTS RETR Parallelism=<streams>,<min>,<max>;` so that a server
    /// able to (drsftp) refines the stream count online in that range; `None` sends `<n>,<n>,<n>;` as
    /// globus-url-copy does. Only set it for servers that list `DRS` (Globus uses `<streams>` either way).
    pub streams_range: Option<(u32, u32)>,
    /// TCP buffer size to request from the server (`SITE RETRBUFSIZE`/`SITE STORBUFSIZE`, then `SBUF`).
    pub tcp_buffer: Option<u64>,
    /// Partial transfer, if any.
    pub partial: Option<Partial>,
    /// Upload size announced with `ALLO` (uploads only).
    pub alloc: Option<u64>,
    /// Ask for Dynamic Right-Sizing: if the server lists `DRS` in FEAT, send `OPTS DRS Inband=1;` before
    /// PASV/PORT (never otherwise). A transfer without it turns DRS off again (`OPTS DRS Inband=0;`) if an
    /// earlier one had switched it on.
    pub drs: bool,
    /// TCP (stream mode / MODE E as `mode` says) or the UDP blast channel.
    pub transport: Transport,
    /// Stripe when the server can (GFD.20, docs/striping.md "Client"): a MODE E transfer with a server listing
    /// `SPAS` (downloads: and `SPOR`) sends `SPAS` first; if the reply names more than one data mover, an upload
    /// connects `streams` connections to each ([`Event::ConnectStriped`]) and a download listens once per mover
    /// and sends `SPOR` with those addresses ([`Event::ListenStriped`]). One address, or a refused SPAS, is
    /// today's PASV/PORT transfer.
    pub stripes: bool,
}

/// The data channel a transfer asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    /// TCP: stream mode or MODE E, as [`TransferSpec::mode`] says.
    #[default]
    Tcp,
    /// The UDP blast channel (docs/blast.md) if the server lists `BLAST` in FEAT; otherwise TCP, with a notice.
    /// `mode`/`streams`/`tcp_buffer` do not apply to it.
    Blast(BlastRequest),
}

/// What the client asks for in `OPTS BLAST`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlastRequest {
    /// Path MTU, bytes: sets the packet size (MTU − 64 payload bytes).
    pub mtu: u32,
    /// Sending-rate cap, bit/s on the wire (0 = none; the server may lower it).
    pub max_rate: u64,
    /// Acknowledgement frequency for when the server receives (an upload), if not the server's default.
    pub ack_every: Option<u32>,
    /// Rate the sender should start at before its first measurement, bit/s on the wire (`Start=`; 0 = the
    /// sender's own default): the path profile's rate, so a short transfer does not spend its first round
    /// trips ramping up. The server clamps it to its caps (docs/blast.md "Start rate").
    pub start_rate: u64,
}

impl Default for BlastRequest {
    fn default() -> Self {
        BlastRequest {
            mtu: 1500,
            max_rate: 0,
            ack_every: None,
            start_rate: 0,
        }
    }
}

/// A blast channel as agreed with the server: what the driver needs for `drsftp_blast::TransferParams` and its
/// socket. Complete once the transfer command's `150` reply arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlastChannel {
    /// The server's UDP socket (from the `BPAS` reply; the control peer's address if it gave a wildcard).
    pub peer: SocketAddr,
    /// The channel's random transfer id.
    pub transfer_id: u64,
    /// Bytes the transfer moves (`Size=` of the `150` reply).
    pub size: u64,
    /// Payload bytes per data packet (`Packet=`).
    pub payload_size: usize,
    /// Sending-rate cap in force, bit/s on the wire (the `OPTS BLAST` reply's `Rate=`; 0 = none).
    pub max_rate: u64,
}

/// Which listing command to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// RFC 3659 machine-readable listing.
    Mlsd,
    /// Human-readable `LIST`.
    List,
    /// Names only.
    Nlst,
}

impl ListKind {
    /// The verb on the wire.
    pub fn verb(self) -> &'static str {
        match self {
            ListKind::Mlsd => "MLSD",
            ListKind::List => "LIST",
            ListKind::Nlst => "NLST",
        }
    }
}

/// One operation requested by the driver. Only one runs at a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// USER/PASS, then FEAT.
    Login {
        /// User name.
        user: String,
        /// Password.
        pass: String,
    },
    /// `SIZE path`.
    Size(String),
    /// `CKSM alg offset length path` (length `-1` = to the end).
    Checksum {
        /// Algorithm name as the server lists it (e.g. `SHA256`).
        algorithm: String,
        /// First byte.
        offset: u64,
        /// Bytes to cover, `None` for "to the end".
        length: Option<u64>,
        /// Server path.
        path: String,
    },
    /// A whole transfer: parameters, data-channel set-up, the transfer command and its completion.
    Transfer(TransferSpec),
    /// Whole-file MODE E downloads pipelined over one data connection the server keeps between files
    /// ([`BatchSpec`], `batch.rs`): per file [`Event::BatchStarted`], [`Event::BatchRetr`] and
    /// [`Event::BatchChecksum`]; ends in [`Outcome::Batch`] once every command is answered.
    Batch(BatchSpec),
    /// Whole-file MODE E uploads pipelined over one data connection kept between files ([`UploadBatchSpec`],
    /// `upbatch.rs`): per file [`Event::BatchStarted`] (its STOR's 150: only now may its data go out),
    /// [`Event::BatchStored`], [`Event::BatchMtime`] and [`Event::BatchChecksum`]; ends in [`Outcome::Batch`].
    UploadBatch(UploadBatchSpec),
    /// A directory listing over a stream-mode data connection.
    List {
        /// Server path (empty for the current directory).
        path: String,
        /// MLSD, LIST or NLST.
        kind: ListKind,
    },
    /// Any single command line; completes with its final (2xx/3xx) reply. RETR/ERET/STOR/ESTO/APPE (a third-party
    /// transfer whose data channel runs between two servers) wait through 1xx and markers like a transfer and
    /// complete with [`Outcome::Transferred`].
    Command(String),
    /// Independent commands, each to its final reply, in one write with a drsftp server (one at a time with any
    /// other): ends in [`Outcome::Replies`] with every final reply in order, refusals included, for the caller
    /// to judge. Nothing in it may change what the next command means (no transfer, PASV, REST or AUTH).
    Commands(Vec<String>),
    /// `QUIT`.
    Quit,
    /// Explicit FTPS (RFC 4217), before login: `AUTH TLS` (no FEAT first: a round trip saved), and on `234`
    /// [`Event::StartTls`] (the driver runs the TLS client handshake and calls
    /// [`handle_tls_started`](super::ClientSession::handle_tls_started)), then `PBSZ 0` and `PROT P`
    /// (unless `protect_data` is false). Ends in [`Outcome::Secured`]. A refused `AUTH TLS` fails with
    /// [`ClientError::TlsNotOffered`] if `require`, else ends in `Secured(false)` and the session stays cleartext;
    /// a `421` (the server is busy) fails the operation with its reply either way.
    Secure {
        /// Fail when the server does not offer TLS.
        require: bool,
        /// Send `PBSZ 0` + `PROT P` so data connections are TLS too.
        protect_data: bool,
    },
}

/// How an operation ended successfully.
// One per operation, moved once to its caller, never stored in bulk: boxing the report would only add an
// allocation per transfer.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Login done; the server's features (empty if FEAT is not supported).
    LoggedIn(Features),
    /// `SIZE` result.
    Size(u64),
    /// `CKSM` result, lower-case hex as the server sent it.
    Checksum(String),
    /// The transfer command completed (226/250).
    Transferred(TransferReport),
    /// The listing completed; its bytes came over the data channel.
    Listed(Reply),
    /// The final reply of an [`Op::Command`].
    Reply(Reply),
    /// The final replies of an [`Op::Commands`], in order.
    Replies(Vec<Reply>),
    /// `QUIT` answered; the control connection can be closed.
    Closed,
    /// [`Op::Secure`] done: true if the control connection is now TLS.
    Secured(bool),
    /// [`Op::Batch`] done: every file's commands were answered (each file's own result came as events).
    Batch,
}

/// A pipelined batch of whole-file downloads ([`Op::Batch`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchSpec {
    /// Server paths, downloaded in this order.
    pub paths: Vec<String>,
    /// The bytes the client already holds of file i (entry i; missing or empty: none), sent as `REST <ranges>`
    /// right before its RETR so the server sends only the gaps (GFD.20 MODE E restart). A refused REST is a
    /// notice and the whole file comes. Ignored in gated batches (a dropped file would leave its REST behind).
    pub held: Vec<crate::ranges::RangeSet>,
    /// `CKSM <alg> 0 -1 <path>` right behind each RETR (`None`: no checksum).
    pub checksum: Option<String>,
    /// `Some(addr)`: a new data channel (`OPTS RETR Parallelism=1,1,1;` and `PORT addr`, the server connects);
    /// `None`: the data connection the previous batch on this session left open carries this one too.
    pub port: Option<SocketAddr>,
    /// Most files whose RETR is unanswered at once (at least 1): bounds what the server queues.
    pub window: usize,
    /// Third-party batches (`relay.rs`): file k's RETR (and its CKSM) wait until the driver has decided file
    /// k with [`ClientSession::decide_batch_file`](super::ClientSession::decide_batch_file) (sent once the
    /// destination accepted file k's STOR, dropped if it refused it). False: RETRs go as the window allows.
    pub gated: bool,
}

/// One file of an upload batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadItem {
    /// Server path.
    pub path: String,
    /// Its size, announced with `ALLO` (the server then refuses to commit fewer bytes).
    pub size: u64,
    /// `MFMT` time (`YYYYMMDDHHMMSS`, UTC) sent after its STOR, if the caller wants it kept.
    pub mtime: Option<String>,
}

/// A pipelined batch of whole-file uploads ([`Op::UploadBatch`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadBatchSpec {
    /// The files, uploaded in this order.
    pub files: Vec<UploadItem>,
    /// `CKSM <alg> 0 -1 <path>` behind each STOR (`None`: no checksum).
    pub checksum: Option<String>,
    /// A new data channel: `PASV`, and the driver connects ([`Event::Connect`]). False: the connection the
    /// previous upload batch on this session left open carries this one too.
    pub pasv: bool,
    /// Most files whose STOR is unanswered at once (at least 1).
    pub window: usize,
    /// `PEER <host>` before PASV (third-party batches to a server whose FEAT lists PEER: the host whose data
    /// connections it is to accept). A refusal is a notice, as in the one-file third-party path.
    pub peer: Option<String>,
    /// The first file's STOR goes alone, the rest wait until it is answered (1xx or final). Third-party batches:
    /// a server that answers STOR only once the data connection is in (globus-gridftp-server on a fresh passive
    /// listener) has its first file started without a 1xx, and no other STOR may then be queued behind it.
    pub first_alone: bool,
}

/// What the server agreed to during a transfer, and what it reported.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TransferReport {
    /// The buffer-size command the server accepted (`SITE RETRBUFSIZE 4194304`, `SBUF ...`), if any.
    pub buffer_command: Option<String>,
    /// True if `OPTS RETR Parallelism=...;` got a 2xx.
    pub parallelism_accepted: bool,
    /// Range markers (111) received, in arrival order (not merged).
    pub ranges: Vec<Range<u64>>,
    /// The last 112 perf marker.
    pub last_perf: Option<PerfMarker>,
    /// Stripe connection counts from a 126 reply, if any.
    pub stripe_counts: Option<Vec<u64>>,
    /// Non-fatal refusals along the way (e.g. buffer size not accepted), as text.
    pub notices: Vec<String>,
    /// The final reply of the transfer command.
    pub final_reply: Option<Reply>,
    /// The reply to the CKSM pipelined behind the transfer command, if one was
    /// ([`ClientSession::set_trailing_checksum`](super::ClientSession::set_trailing_checksum)): the lower-case
    /// digest, or the refusal. Boxed: it is rarely there and the report travels in every transfer's outcome.
    pub checksum: Option<Box<Result<String, Reply>>>,
    /// The reply to the SIZE pipelined behind the transfer command, if one was
    /// ([`ClientSession::set_trailing_size`](super::ClientSession::set_trailing_size)): the size, or the reply
    /// that did not give one.
    pub size: Option<Box<Result<u64, Reply>>>,
    /// DRS was on for this transfer (`OPTS DRS Inband=1;` accepted, now or by an earlier transfer): in-band
    /// SBUF headers may flow on MODE E data channels and `SBUF <id> <size>` on the control channel.
    pub drs_negotiated: bool,
    /// The blast channel the transfer used; `None` if it went over TCP (also when blast was asked for but the
    /// server does not offer it: then `notices` says so).
    pub blast: Option<BlastChannel>,
}

/// Something the driver must act on or may report.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Bind a data listener now and call `handle_listening(now, addr)` with its address (MODE E download:
    /// the server is the sender and connects).
    Listen,
    /// A striped MODE E download: bind one listener per stripe (`peers.len()` of them) and call
    /// `handle_listening_striped(now, addrs)`; accept data connections only from the `peers`' addresses (the
    /// server's data movers, from its SPAS reply) or the control peer's, and count each listener's EODs against
    /// the EOF that arrives on it (GFD.20: one EOF per stripe).
    ListenStriped {
        /// The server's stripes (SPAS reply), one per data mover.
        peers: Vec<SocketAddr>,
    },
    /// Bind a UDP socket for a blast channel now and call `handle_blast_bound(now, addr)` with its address; keep
    /// it for the transfer ([`ClientSession::blast_channel`](super::ClientSession::blast_channel) says where to).
    BlastBind,
    /// Open `streams` data connections to `addr` (the server's passive address) and call
    /// `handle_data_ready(now)` once they are being set up.
    Connect {
        /// Server's passive data address.
        addr: SocketAddr,
        /// Connections to open.
        streams: u32,
    },
    /// A striped MODE E upload: open `streams` data connections to each of `addrs` (the server's SPAS reply, one
    /// per data mover) and call `handle_data_ready(now)`; each stripe's connections end with that stripe's own
    /// EOF (GFD.20).
    ConnectStriped {
        /// The server's stripes.
        addrs: Vec<SocketAddr>,
        /// Connections per stripe.
        streams: u32,
    },
    /// The server accepted the transfer/listing command (125/150): move data now.
    TransferStarted(Reply),
    /// The transfer command's final reply (2xx) arrived while commands pipelined behind it (its trailing SIZE
    /// and CKSM) are still due: the data has moved; [`Event::Done`] follows with their answers.
    TransferReplied(Reply),
    /// A `111 Range Marker`.
    RangeMarker(Vec<Range<u64>>),
    /// A `112 Perf Marker`.
    PerfMarker(PerfMarker),
    /// A `126` stripe-count reply.
    StripeCounts(Vec<u64>),
    /// The server's answer to [`ClientSession::send_sbuf`](super::ClientSession::send_sbuf):
    /// `200 SBUF <id> <size>`, `size` being what it applied (the RTT probe's echo, seed 000 §4.4).
    SbufEcho {
        /// Probe id from the command.
        id: u64,
        /// Send buffer the server applied.
        size: u64,
    },
    /// An informational `126 SBUF <id> <size>` from a server receiving in stream mode: its new receive buffer,
    /// for our send buffer (no answer is due). Only reported while a transfer runs with DRS negotiated.
    SbufNotice {
        /// Notice id.
        id: u64,
        /// The server's receive buffer, bytes.
        size: u64,
    },
    /// `234` to `AUTH TLS`: run the TLS client handshake on the control connection now, then call
    /// [`handle_tls_started`](super::ClientSession::handle_tls_started). A failed handshake is fatal: never go
    /// on in cleartext.
    StartTls,
    /// A non-fatal refusal (text for logs).
    Notice(String),
    /// The current operation finished.
    Done(Outcome),
    /// The current operation failed. If [`ClientError::is_fatal`], the control connection is unusable.
    Failed(ClientError),
    /// A reply arrived while no operation was running (e.g. `421` before closing).
    Unsolicited(Reply),
    /// [`Op::Batch`]: the server accepted file `index`'s RETR (125/150); its data follows the previous file's
    /// on the data connection. [`Op::UploadBatch`]: the server accepted file `index`'s STOR: its data may go
    /// out now, and not before.
    BatchStarted(usize),
    /// [`Op::UploadBatch`]: the final reply to file `index`'s STOR (226, or a refusal).
    BatchStored {
        /// Position in [`UploadBatchSpec::files`].
        index: usize,
        /// The reply.
        reply: Reply,
    },
    /// [`Op::UploadBatch`]: the reply to file `index`'s MFMT.
    BatchMtime {
        /// Position in [`UploadBatchSpec::files`].
        index: usize,
        /// The reply.
        reply: Reply,
    },
    /// [`Op::Batch`]: the final reply to file `index`'s RETR (226, or a refusal: then no data came for it).
    BatchRetr {
        /// Position in [`BatchSpec::paths`].
        index: usize,
        /// The reply.
        reply: Reply,
    },
    /// [`Op::Batch`]: the server's checksum of file `index` (lower-case hex), or its refusal.
    BatchChecksum {
        /// Position in [`BatchSpec::paths`].
        index: usize,
        /// Hex digest or the refusing reply.
        result: Result<String, Reply>,
    },
}

/// Why an operation failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server refused a command.
    #[error("server refused `{command}`: {reply}")]
    Refused {
        /// The command line (password masked).
        command: String,
        /// The server's reply.
        reply: Reply,
    },
    /// A reply could not be understood (e.g. a 227 without an address).
    #[error("cannot understand the reply to `{command}`: {reply}")]
    BadReply {
        /// The command line.
        command: String,
        /// The reply.
        reply: Reply,
    },
    /// The server's byte stream is not FTP.
    #[error("control channel framing: {0}")]
    Framing(#[from] ReplyError),
    /// No reply within the configured time.
    #[error("no reply to `{0}` in time")]
    Timeout(String),
    /// The server closed the control connection.
    #[error("server closed the control connection")]
    Closed,
    /// An operation was started while another was running, or after the session failed.
    #[error("session busy or closed")]
    Busy,
    /// The transfer was aborted with ABOR.
    #[error("transfer aborted")]
    Aborted,
    /// `send_sbuf` without DRS negotiated (the server does not list `DRS`, or the transfer did not ask for it).
    #[error("DRS is not negotiated with the server (no `OPTS DRS Inband=1;` accepted)")]
    DrsNotNegotiated,
    /// `send_sbuf` while no file transfer command is running.
    #[error("no transfer is running")]
    NoTransfer,
    /// TLS was required but the server's FEAT does not list `AUTH TLS`.
    #[error("the server does not offer TLS (no `AUTH TLS` in FEAT) and TLS is required")]
    TlsNotOffered,
    /// The server sent bytes after its `234` to `AUTH TLS`, before the handshake: they cannot be trusted.
    #[error("cleartext bytes after `234` to AUTH TLS")]
    TlsInjected,
}

impl ClientError {
    /// True if the control connection cannot be used after this error.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            ClientError::Framing(_)
                | ClientError::Timeout(_)
                | ClientError::Closed
                | ClientError::TlsNotOffered
                | ClientError::TlsInjected
        )
    }
    /// The server's reply code, if the error carries a reply.
    pub fn reply_code(&self) -> Option<u16> {
        match self {
            ClientError::Refused { reply, .. } | ClientError::BadReply { reply, .. } => {
                Some(reply.code)
            }
            _ => None,
        }
    }
}
