//! GridFTP client driver: control connection, data channel set-up, transfers for `drsftp copy` and `drsftp ls`.
//!
//! A [`Client`] is one logged-in control connection driving the sans-IO `drsftp_proto::client::ClientSession`
//! ([`control`]); a transfer ([`transfer`]) runs the data engine (`crate::data`) next to it. Downloads go to a
//! hidden part file renamed into place only after the byte count and the server's CKSM agree ([`download`]);
//! uploads are checked the same way afterwards ([`upload`]).
//!
//! With [`ClientOptions::blast`] set and a server that lists `BLAST`, the data goes over the UDP blast channel
//! instead ([`blast`]); a server without it gets TCP, and the summary's notices say so.
//!
//! Mode rules (as globus-url-copy): `streams > 1` means MODE E with that many TCP streams; `streams == 1` is stream
//! mode unless `mode_e` is set. In MODE E the sender connects: for downloads the client listens (PORT) and the
//! server opens the streams; for uploads the client connects to the server's PASV address.

mod auto_start;
mod batch;
mod blast;
mod control;
mod download;
mod error;
pub mod job;
mod local;
mod observe;
pub mod profile;
mod relay;
mod resume;
mod stat;
mod task;
mod third_party;
mod third_party_resume;
mod third_party_run;
mod third_party_verify;
mod transfer;
mod upbatch;
mod upload;
mod upload_auto;
mod upload_resume;
mod verify;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use drsftp_proto::client::{Op, Outcome};
use drsftp_storage::ChecksumAlg;
use drsftp_tune::BufferPolicy;

use crate::blast::{BlastOpts, BlastReport};
use crate::data::{AutoEvent, AutoSender, DataOpts, Progress, ZeroCopy};
use crate::drs::TraceRow;
use control::Control;

pub use auto_start::{start_buffer, AutoChoice, AUTO_MEM_BUDGET, AUTO_START_MAX_STREAMS};
pub use batch::{BatchFile, BATCH_WINDOW};
pub use drsftp_proto::client::{Features, ListKind, Partial, TransferMode};
pub use error::ClientError;
pub use observe::peak_and_final;
pub use relay::{relay_batch, RelayFile, RELAY_WINDOW};
pub use third_party::copy as third_party_copy;
pub use upbatch::{UploadFile, UPLOAD_WINDOW};

/// How a transfer is run.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Parallel TCP streams. More than 1 selects MODE E.
    pub streams: u32,
    /// Use MODE E even with one stream.
    pub mode_e: bool,
    /// TCP buffer size to ask the server for (`SITE RETRBUFSIZE`/`STORBUFSIZE`, falling back to `SBUF`).
    pub tcp_buffer: Option<u64>,
    /// Our data sockets' buffer policy (kernel autotuning, DRS, or a fixed size).
    pub buffer: BufferPolicy,
    /// Move only this section (ERET/ESTO); the bytes land at the same offset on the other side.
    pub partial: Option<Partial>,
    /// After the transfer, compare CKSM with a local checksum when the server advertises one we know.
    pub verify: bool,
    /// Reply timeout for commands, connect timeout, and the longest time without data progress.
    pub timeout: Duration,
    /// TCP congestion control for our data sockets (e.g. "cubic"); `None`: the namespace's default.
    pub congestion: Option<String>,
    /// Use the UDP blast channel (docs/blast.md) with these settings when the server lists `BLAST` in FEAT;
    /// otherwise, and when `None`, TCP as `streams`/`mode_e` say.
    pub blast: Option<BlastOpts>,
    /// Record a per-stream trace of our data connections (TCP_INFO every 50 ms, bounded memory) into
    /// [`TransferSummary::traces`].
    pub trace: bool,
    /// `-p auto` online refinement (docs/drs.md §4.5): an upload runs in MODE E starting on `streams` connections
    /// and this controller (`drsftp_tune::AutoStreams` sampled every `interval`) adds and retires connections
    /// while it runs. On a download from a server that lists `DRS` (drsftp) the client sends
    /// `OPTS RETR Parallelism=<streams>,<min>,<max>;` from this config and the server runs the controller;
    /// other servers get `<streams>` fixed.
    pub auto_streams: Option<AutoSender>,
    /// Resume an interrupted whole-file download from the stable part file and checkpoint it left next to the
    /// destination (`resume.rs`); `false` discards them and starts afresh (`--no-resume`).
    pub resume: bool,
    /// Stripe MODE E transfers over every data mover of a striped server (GFD.20 SPAS/SPOR, docs/striping.md
    /// "Client") when its SPAS reply names more than one; `false` (`--no-stripes`) never sends SPAS.
    pub stripes: bool,
    /// `--transport auto` (docs/auto-transport.md): a download from a server with `BLAST` starts on TCP and moves
    /// the rest to blast (with [`Self::blast`]'s settings) when `drsftp_tune::TransportDecider` sees random loss,
    /// or starts on blast when the path profile says the path is lossy, falling back to TCP when no datagram
    /// arrives. `None`: [`Self::blast`] alone decides (`--transport udp|tcp`).
    pub auto_transport: Option<AutoTransport>,
    /// Which directions of a cleartext stream-mode transfer go through the kernel (`DataOpts::zero_copy`; the
    /// binary takes it from `DRSFTP_ZERO_COPY`). Default: off.
    pub zero_copy: ZeroCopy,
}

/// What `--transport auto` knows before the transfer (the path profile's readings).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AutoTransport {
    /// Random loss the path profile measured, a fraction.
    pub profile_loss: Option<f64>,
    /// The path profile's rate, bit/s: the decider's estimate of what blast could reach.
    pub link_bps: Option<f64>,
    /// A verdict carried over from an earlier file of the same `-r`/`--files-from` job, which comes before the
    /// profile: so each file does not learn the path again.
    pub carried: Option<CarriedVerdict>,
    /// Path memory: what an earlier default copy to this server learned (`profile::LearnedPath`), set only while
    /// fresh and when newer than the calibrated profile; it comes before [`Self::profile_loss`].
    pub learned: Option<profile::LearnedPath>,
}

/// What an earlier file of a job found out about the path (see [`AutoTransport::carried`]).
#[derive(Debug, Clone, PartialEq)]
pub enum CarriedVerdict {
    /// Start on blast, and why (random loss was seen).
    Blast(String),
    /// Stay on TCP, and why (blast was blocked, or the file is too small for its set-up to pay).
    Tcp(String),
    /// Start on TCP, watched as usual: a blast probe found the path clean, so the next files need not probe.
    Clean,
}

/// The words a [`TransportChoice::reason`] ends with when blast was chosen but UDP turned out blocked.
pub const FELL_BACK: &str = "fell back to TCP";

impl AutoTransport {
    /// How a transfer starts: a carried verdict if any, else the path profile's (`drsftp_tune::start_choice`).
    pub(crate) fn start(&self, peer_blast: bool, watchable: bool) -> drsftp_tune::StartChoice {
        use drsftp_tune::StartChoice;
        match &self.carried {
            Some(CarriedVerdict::Blast(why)) if peer_blast => StartChoice::Blast(why.clone()),
            Some(CarriedVerdict::Tcp(why)) => StartChoice::Tcp(why.clone()),
            Some(CarriedVerdict::Clean) => drsftp_tune::start_choice(peer_blast, None, watchable),
            _ if self.learned.is_some() => {
                let l = self.learned.as_ref().expect("checked");
                if l.blast_blocked && peer_blast {
                    StartChoice::Tcp(format!(
                        "path memory: a copy {} ago found UDP blast blocked",
                        age_words(l.age(profile::now_unix()))
                    ))
                } else if l.lossy && peer_blast {
                    StartChoice::Blast(format!(
                        "path memory: a copy {} ago saw {:.2} % random loss ({})",
                        age_words(l.age(profile::now_unix())),
                        l.loss * 100.0,
                        l.loss_from
                    ))
                } else {
                    drsftp_tune::start_choice(peer_blast, None, watchable)
                }
            }
            _ => {
                let loss = self
                    .profile_loss
                    .map(|loss| drsftp_tune::ProfileLoss { loss });
                drsftp_tune::start_choice(peer_blast, loss, watchable)
            }
        }
    }
}

impl AutoTransport {
    /// Whether anything is known of the path's loss (a carried verdict, path memory, a profile): only a copy to
    /// an unknown path starts with the blast probe (`drsftp_tune::probe`).
    pub fn knows_path(&self) -> bool {
        self.carried.is_some() || self.learned.is_some() || self.profile_loss.is_some()
    }

    /// The age in seconds of the path memory the start came from, if it did (no carried verdict, a learned
    /// reading in force).
    pub fn memory_age(&self) -> Option<u64> {
        match (&self.carried, &self.learned) {
            (None, Some(l)) => Some(l.age(profile::now_unix())),
            _ => None,
        }
    }
}

/// "40 s", "12 min", "3.5 h".
fn age_words(secs: u64) -> String {
    match secs {
        0..=119 => format!("{secs} s"),
        120..=7199 => format!("{} min", secs / 60),
        _ => format!("{:.1} h", secs as f64 / 3600.0),
    }
}

/// Which transport `--transport auto` used and why, for `--json` and the summary.
#[derive(Debug, Clone, PartialEq)]
pub struct TransportChoice {
    /// `"tcp"`, `"udp"`, `"tcp+udp"` (started on TCP, the rest over blast) or `"udp+tcp"` (a blast probe found
    /// the path clean or shared: the rest over TCP).
    pub chosen: &'static str,
    /// Why, in words.
    pub reason: String,
    /// For `"tcp+udp"`: bytes that had arrived over TCP when it switched; for `"udp+tcp"`: bytes that came over
    /// TCP after the probe.
    pub tcp_bytes: u64,
    /// What the TCP rule read of the path, when it judged (for path memory).
    pub judged: Option<drsftp_tune::Judged>,
    /// The start came from path memory learned this many seconds ago.
    pub learned_age: Option<u64>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            streams: 1,
            mode_e: false,
            tcp_buffer: None,
            buffer: BufferPolicy::Kernel,
            partial: None,
            verify: true,
            timeout: Duration::from_secs(60),
            congestion: None,
            blast: None,
            trace: false,
            auto_streams: None,
            resume: true,
            stripes: true,
            auto_transport: None,
            zero_copy: ZeroCopy::OFF,
        }
    }
}

impl ClientOptions {
    /// The wire mode these options select.
    pub fn mode(&self) -> TransferMode {
        if self.streams > 1 || self.mode_e {
            TransferMode::Extended
        } else {
            TransferMode::Stream
        }
    }

    fn data_opts(&self) -> DataOpts {
        DataOpts {
            buffer: self.buffer,
            congestion: self.congestion.clone(),
            trace: self.trace,
            zero_copy: self.zero_copy,
            ..DataOpts::default()
        }
    }
}

/// What a finished transfer did.
#[derive(Debug, Clone, PartialEq)]
pub struct TransferSummary {
    /// Payload bytes moved.
    pub bytes: u64,
    /// Bytes of a resumed download that were already held at the start and not asked for again.
    pub resumed: u64,
    /// Wall-clock seconds from the first transfer command to the end of data (verification not included).
    pub seconds: f64,
    /// Data connections used.
    pub streams: usize,
    /// Stream mode or MODE E.
    pub mode: TransferMode,
    /// Largest total socket buffer in force across our streams, bytes.
    pub peak_buffer: u64,
    /// Largest sum of our receiving sockets' advertised windows, bytes (0 when we sent).
    pub peak_window: u64,
    /// The buffer-size command the server accepted, if any.
    pub buffer_command: Option<String>,
    /// Algorithm name and hex digest both sides agreed on.
    pub checksum: Option<(String, String)>,
    /// True if the checksum was compared and matched.
    pub verified: bool,
    /// Non-fatal remarks (buffer size refused, checksum not verified and why).
    pub notices: Vec<String>,
    /// `"tcp"` or `"udp"` (the blast channel).
    pub transport: &'static str,
    /// Blast: data packets that arrived more than once (0 over TCP).
    pub duplicates: u64,
    /// Blast: datagrams dropped as bad input at our end (0 over TCP).
    pub rejected: u64,
    /// Blast: the data path's full report.
    pub blast: Option<BlastReport>,
    /// With [`ClientOptions::trace`]: one trace per data connection of ours (`drs::write_stream_traces_csv`).
    pub traces: Vec<Vec<TraceRow>>,
    /// With [`ClientOptions::auto_streams`]: on an upload the controller's decisions, in order; on a download
    /// from a drsftp server the changes in live streams seen by the receiver (see [`peak_and_final`]).
    pub stream_actions: Vec<AutoEvent>,
    /// A striped transfer: payload bytes each of the server's stripes (data movers) carried, in its SPAS order;
    /// empty when the transfer was not striped.
    pub stripes: Vec<u64>,
    /// With [`ClientOptions::auto_transport`]: the transport chosen and why.
    pub transport_choice: Option<TransportChoice>,
    /// Blast: seconds from the transfer command to the server's `150` (the data channel's set-up). Third-party:
    /// seconds from the end of the logins to the transfer commands (SIZE, channel set-up, resume checks).
    pub setup_seconds: Option<f64>,
    /// Blast download: seconds from the last packet written to the final reply (EOD/226).
    pub eod_seconds: Option<f64>,
    /// Seconds the end-to-end checksum (CKSM and the local digest) took, when verified.
    pub verify_seconds: Option<f64>,
}

impl TransferSummary {
    /// A TCP transfer of `bytes` in `seconds` over `streams` data connections, nothing else known yet (no
    /// checksum, buffers, notices or blast report): the base the summaries built outside a data engine's
    /// [`transfer::Moved`] fill in.
    pub fn tcp(mode: TransferMode, bytes: u64, seconds: f64, streams: usize) -> Self {
        TransferSummary {
            bytes,
            resumed: 0,
            seconds,
            streams,
            mode,
            peak_buffer: 0,
            peak_window: 0,
            buffer_command: None,
            checksum: None,
            verified: false,
            notices: vec![],
            transport: "tcp",
            duplicates: 0,
            rejected: 0,
            blast: None,
            traces: vec![],
            stream_actions: vec![],
            stripes: vec![],
            transport_choice: None,
            setup_seconds: None,
            eod_seconds: None,
            verify_seconds: None,
        }
    }

    fn new(mode: TransferMode, moved: &transfer::Moved) -> Self {
        TransferSummary {
            peak_buffer: moved.data.peak_buffer,
            peak_window: moved.data.peak_window,
            buffer_command: moved.report.buffer_command.clone(),
            notices: moved.report.notices.clone(),
            transport: if moved.blast.is_some() { "udp" } else { "tcp" },
            duplicates: moved.blast.as_ref().map_or(0, |b| b.duplicates),
            rejected: moved.blast.as_ref().map_or(0, |b| b.rejected),
            blast: moved.blast.clone(),
            traces: moved.data.traces.clone(),
            stream_actions: moved.actions.clone(),
            stripes: moved.stripes.clone(),
            setup_seconds: moved.setup,
            eod_seconds: moved.eod,
            ..Self::tcp(mode, moved.data.bytes, moved.seconds, moved.data.streams)
        }
    }

    /// Throughput in megabits (10^6 bit) per second.
    pub fn mbps(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 * 8.0 / 1e6 / self.seconds
        } else {
            0.0
        }
    }
}

/// One logged-in control connection to a GridFTP/FTP server. One operation at a time.
#[derive(Debug)]
pub struct Client {
    control: Control,
    timeout: Duration,
}

/// The host part of `host:port` (`[v6]:port` too), the name the server's certificate must carry.
fn host_of(host_port: &str) -> &str {
    match host_port.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => host_port.rsplit_once(':').map_or(host_port, |(h, _)| h),
    }
}

impl Client {
    /// Connects to `host_port` (`host:port`, names resolved here), reads the greeting and logs in (USER/PASS,
    /// then FEAT). `timeout` bounds the connect and every reply.
    pub async fn connect(
        host_port: &str,
        user: &str,
        pass: &str,
        timeout: Duration,
    ) -> Result<Client, ClientError> {
        let off = crate::tls::TlsSettings {
            mode: crate::tls::TlsMode::Off,
            ..Default::default()
        };
        Self::connect_tls(host_port, user, pass, timeout, &off).await
    }

    /// [`Client::connect`] with explicit FTPS (RFC 4217) as `tls` says: before USER, `AUTH TLS` (refused: the
    /// session stays cleartext, or fails if `tls.mode` is `Require`), the handshake (certificate
    /// checked against `tls.trust` for the host of `host_port`), `PBSZ 0` and `PROT P`, so the password and
    /// every stream-mode data connection are encrypted. A failed handshake is an error, never a cleartext retry.
    pub async fn connect_tls(
        host_port: &str,
        user: &str,
        pass: &str,
        timeout: Duration,
        tls: &crate::tls::TlsSettings,
    ) -> Result<Client, ClientError> {
        Self::login(host_port, user, pass, timeout, tls, None).await
    }

    /// [`Client::connect_tls`] for a session that will fetch `path` first: from a drsftp server whose login is
    /// pipelined, TYPE I, SIZE and MDTM of `path` ride behind FEAT, so the first [`Client::size`] and the
    /// download's resume identity cost no round trip of their own (0.2 s less per copy at 200 ms). With any
    /// other server this is [`Client::connect_tls`].
    pub async fn connect_to_fetch(
        host_port: &str,
        user: &str,
        pass: &str,
        timeout: Duration,
        tls: &crate::tls::TlsSettings,
        path: &str,
    ) -> Result<Client, ClientError> {
        Self::login(host_port, user, pass, timeout, tls, Some(path)).await
    }

    async fn login(
        host_port: &str,
        user: &str,
        pass: &str,
        timeout: Duration,
        tls: &crate::tls::TlsSettings,
        fetch: Option<&str>,
    ) -> Result<Client, ClientError> {
        let mut control = Control::connect(host_port, timeout).await?;
        if tls.mode != crate::tls::TlsMode::Off {
            let cfg = crate::tls::client_config(&tls.trust)
                .map_err(|e| ClientError::Tls(e.to_string()))?;
            let c = crate::tls::TlsClient::new(cfg, host_of(host_port))
                .map_err(|e| ClientError::Tls(e.to_string()))?;
            control.set_tls(c);
            let op = Op::Secure {
                require: tls.mode == crate::tls::TlsMode::Require,
                protect_data: true,
            };
            match control.run(op).await? {
                Outcome::Secured(on) => control.set_data_tls(on),
                other => {
                    return Err(ClientError::Invalid(format!(
                        "unexpected AUTH TLS outcome {other:?}"
                    )))
                }
            }
        }
        if let Some(path) = fetch {
            control
                .session_mut()
                .set_after_login(stat::stat_commands(path));
        }
        match control
            .run(Op::Login {
                user: user.to_string(),
                pass: pass.to_string(),
            })
            .await?
        {
            Outcome::LoggedIn(_) => {
                if let Some(path) = fetch {
                    let replies = control.session_mut().take_after_login();
                    stat::keep_after_login(&mut control, path, &replies);
                }
                Ok(Client { control, timeout })
            }
            other => Err(ClientError::Invalid(format!(
                "unexpected login outcome {other:?}"
            ))),
        }
    }

    /// Whether data connections are TLS (`PROT P` accepted): stream mode and every MODE E connection.
    pub fn data_protected(&self) -> bool {
        self.control.data_tls().is_some()
    }

    /// Whether the control connection is TLS (`AUTH TLS` succeeded).
    pub fn is_tls(&self) -> bool {
        self.control.is_tls()
    }

    /// The control-channel round trip measured for free during login: the kernel's minimum RTT of the control
    /// connection (TCP_INFO), which a lost segment does not inflate; where the kernel has none, the median of the
    /// USER, PASS and FEAT exchanges (command written to first reply byte). `None` if neither is there (e.g. a
    /// server that logs in without PASS, timed once).
    pub fn login_rtt(&self) -> Option<Duration> {
        if let Some(r) = self.control.kernel_min_rtt() {
            return Some(r);
        }
        let s = self.control.rtt_samples();
        let mut v: Vec<Duration> = s.iter().take(3).copied().collect();
        if v.len() < 2 {
            return None;
        }
        v.sort();
        Some(v[v.len() / 2])
    }

    /// The server's 220 greeting.
    pub fn banner(&self) -> Option<String> {
        self.control.session().banner().map(|r| r.joined())
    }

    /// What the server listed in FEAT after login.
    pub fn features(&self) -> &Features {
        self.control.session().features()
    }

    /// True while the server has Dynamic Right-Sizing on for this connection: it listed `DRS` in FEAT and accepted
    /// `OPTS DRS Inband=1;` for the last transfer, which ran with `BufferPolicy::Drs` (docs/drs.md §4.3). Never
    /// true against a Globus server.
    pub fn drs_negotiated(&self) -> bool {
        self.control.session().drs_negotiated()
    }

    /// The checksum algorithm downloads and uploads are verified with on this server, if any.
    pub fn verify_algorithm(&self) -> Option<ChecksumAlg> {
        verify::pick_alg(self.features())
    }

    /// Downloads `remote` to the file `local` (see [`ClientOptions`]). Whole files go through a hidden part file
    /// renamed into place at the end; partial downloads write into `local` in place. On error nothing is left at
    /// `local` unless it existed before a partial download.
    pub async fn download(
        &mut self,
        remote: &str,
        local: &Path,
        opts: &ClientOptions,
        progress: Arc<Progress>,
    ) -> Result<TransferSummary, ClientError> {
        download::run(&mut self.control, remote, local, opts, progress).await
    }

    /// Downloads whole files pipelined over one MODE E data connection that stays open between files and
    /// between calls (`batch.rs`): for many small files from a GridFTP server, without TLS data channels. One
    /// result per file, in order; after a broken connection [`Client::is_idle`] is false and the session
    /// should be dropped.
    pub async fn download_batch(
        &mut self,
        files: &[BatchFile],
        opts: &ClientOptions,
        progress: Arc<Progress>,
    ) -> Vec<Result<TransferSummary, ClientError>> {
        batch::run(&mut self.control, files, opts, progress).await
    }

    /// Data connections the server has opened for the batches on this session since the last other data
    /// transfer (1 when it kept one connection for them all).
    pub fn batch_connections(&self) -> u64 {
        self.control
            .batch_channel
            .as_ref()
            .map_or(0, |c| c.accepted)
    }

    /// True if the session can run another operation (none running, connection alive).
    pub fn is_idle(&self) -> bool {
        let s = self.control.session();
        !s.is_busy() && !s.is_dead()
    }

    /// Uploads whole files pipelined over one MODE E data connection to the server's PASV address, kept between
    /// files and between calls (`upbatch.rs`): for many small files to a GridFTP server, without TLS data
    /// channels. A file's data goes out only after the server accepted its STOR. One result per file, in order;
    /// after a broken batch [`Client::is_idle`] is false and the session should be dropped.
    pub async fn upload_batch(
        &mut self,
        files: &[UploadFile],
        opts: &ClientOptions,
        progress: Arc<Progress>,
    ) -> Vec<Result<TransferSummary, ClientError>> {
        upbatch::run(&mut self.control, files, opts, progress).await
    }

    /// Data connections opened to the server for the upload batches on this session since the last other data
    /// transfer (1 when one connection carried them all).
    pub fn upload_connections(&self) -> u64 {
        self.control
            .upload_channel
            .as_ref()
            .map_or(0, |c| c.connections)
    }

    /// Uploads the file `local` to `remote`.
    pub async fn upload(
        &mut self,
        local: &Path,
        remote: &str,
        opts: &ClientOptions,
        progress: Arc<Progress>,
    ) -> Result<TransferSummary, ClientError> {
        upload::run(&mut self.control, local, remote, opts, progress).await
    }

    /// A directory listing (MLSD, LIST or NLST) over a stream-mode data connection, as text.
    pub async fn list(&mut self, path: &str, kind: ListKind) -> Result<String, ClientError> {
        let mem = Arc::new(local::MemFile::new(256 << 20));
        let job = transfer::DataJob::RecvStream {
            file: mem.clone(),
            offset: 0,
        };
        self.control.start(Op::List {
            path: path.to_string(),
            kind,
        })?;
        transfer::run_started(
            &mut self.control,
            job,
            DataOpts::default(),
            Arc::new(Progress::new()),
            self.timeout,
        )
        .await?;
        Ok(String::from_utf8_lossy(&mem.take()).into_owned())
    }

    /// `SIZE path`.
    pub async fn size(&mut self, path: &str) -> Result<u64, ClientError> {
        stat::size(&mut self.control, path).await
    }

    /// `CKSM alg offset length path` (`length` `None` = to the end); lower-case hex.
    pub async fn checksum(
        &mut self,
        alg: &str,
        path: &str,
        offset: u64,
        length: Option<u64>,
    ) -> Result<String, ClientError> {
        let op = Op::Checksum {
            algorithm: alg.to_string(),
            offset,
            length,
            path: path.to_string(),
        };
        match self.control.run(op).await? {
            Outcome::Checksum(h) => Ok(h),
            other => Err(ClientError::Invalid(format!(
                "unexpected CKSM outcome {other:?}"
            ))),
        }
    }

    /// Any single command (e.g. `MKD /x`, `DELE /x`); returns the final reply's text.
    pub async fn command(&mut self, line: &str) -> Result<String, ClientError> {
        match self.control.run(Op::Command(line.to_string())).await? {
            Outcome::Reply(r) => Ok(r.to_string()),
            other => Err(ClientError::Invalid(format!(
                "unexpected outcome {other:?}"
            ))),
        }
    }

    /// `QUIT`, then closes the connection without waiting for the `221`: everything this session did has
    /// been answered already, and on a long path the goodbye would keep the process one round trip longer.
    pub async fn quit(mut self) -> Result<(), ClientError> {
        if self.control.session().is_dead() || self.control.session().is_busy() {
            return Ok(());
        }
        self.control.send_and_close(Op::Quit).await
    }
}
