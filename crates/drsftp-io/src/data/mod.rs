//! Data channels shared by server and client: stream mode and MODE E send/receive over parallel TCP streams,
//! reading and writing through `drsftp_storage::FileHandle` with positioned I/O, with per-stream buffer policy
//! (fixed / kernel / DRS) applied before connect/listen, and live progress for markers and progress bars.
//!
//! Contract (used by `server` and `client`):
//! - Sockets are made with [`listen`] / [`connect`], which apply the buffer policy *before* listen/connect
//!   (window scale is fixed at connection set-up).
//! - Stream mode: [`send_stream`] writes `range` of the file then shuts the socket down (EOF = close);
//!   [`recv_stream`] reads to EOF and writes at `offset + n`.
//! - MODE E: [`send_mode_e`] spreads `ranges` over the given sockets in blocks of `opts.block_size` (each stream
//!   pulls the next block, so faster streams carry more), every stream ends with EOD and exactly one carries
//!   EOF|EOD with the stream count; sockets stay open and are returned for reuse (Globus keeps them until QUIT).
//!   [`recv_mode_e`] takes connections from a channel (new accepts and/or cached sockets), validates every header
//!   with `drsftp_proto::mode_e::Limits`, writes each block at its offset, and ends when EOF was seen and the
//!   number of EODs equals the announced count: it never waits for TCP EOF.
//! - `-p auto`: [`send_mode_e_dynamic`] lets connections join and retire mid-transfer (the last one to finish sends
//!   EOF with the number that ever joined); [`AutoSender`] steers it with `drsftp_tune::AutoStreams`.
//! - With `DataOpts::trace`, every connection records a bounded TCP_INFO trace into `DataReport::traces`.
//! - Stream mode with DRS after opt-in: [`Progress::sbuf`] links the engine to the control driver, which carries
//!   the SBUF probes/echoes/notices and applies SO_SNDBUF (`ctrl_sbuf`).
//! - With `DataOpts::crc32c`, every block is CRC32C'd as it is moved (hot in cache) and `DataReport::crc32c` is the
//!   CRC32C of `0..end` when the blocks tile exactly that range: verification then needs no re-read of the file.
//!
//! Aborting: every entry point above is cancel-safe in the sense that dropping its future (or aborting the task it
//! runs in) stops the transfer at once: MODE E stream tasks are aborted with it and their sockets closed. A file
//! read or write already running on the blocking pool finishes in the background (one block at most).
//! None of these functions has an idle timeout (only `connect` does); the caller bounds a stalled transfer by
//! watching `Progress::bytes` and dropping the future.

mod auto;
mod crc;
mod ctrl_sbuf;
mod cursor;
mod fileio;
mod mode_e_recv;
mod mode_e_send;
mod sealed;
mod sockets;
mod stream;
#[cfg(test)]
mod tests;
mod trace;
mod writeback;
mod zerocopy;

pub use auto::{AutoEvent, AutoReport, AutoSender, GrowthGate, AUTO_INTERVAL};
pub(crate) use crc::CrcPieces;
pub use ctrl_sbuf::{SbufCounts, SbufLink, SbufObserver};
pub use mode_e_recv::{recv_mode_e, recv_mode_e_striped};
pub use mode_e_send::{send_mode_e, send_mode_e_dynamic, SendControl};
pub use sockets::{connect, connect_each, listen};
pub(crate) use stream::finish_send;
pub use stream::{recv_stream, send_stream};
pub(crate) use writeback::Writeback;
pub use zerocopy::ZeroCopy;

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use drsftp_proto::mode_e::HeaderError;
use drsftp_proto::ranges::RangeSet;
use drsftp_storage::StorageError;
use drsftp_tune::BufferPolicy;

/// Default MODE E block size (what globus-gridftp-server sends).
pub const DEFAULT_BLOCK: usize = 256 * 1024;

/// Options for one transfer's data channels.
#[derive(Debug, Clone)]
pub struct DataOpts {
    /// How each data socket's buffers are managed.
    pub buffer: BufferPolicy,
    /// MODE E payload bytes per block when sending.
    pub block_size: usize,
    /// Largest block accepted when receiving, and the end offset blocks may reach (`u64::MAX` = unbounded).
    pub max_block: u64,
    /// Receiving: reject blocks with `offset + count` past this (e.g. ERET length). `u64::MAX` = no limit.
    pub max_end: u64,
    /// In-band SBUF (descriptors 0x02/0x01) negotiated with the peer: probes are sent/answered only then.
    pub inband_sbuf: bool,
    /// Largest buffer DRS may grow a stream to.
    pub drs_max: u64,
    /// The buffer sizes were asked for by the peer (a client's SBUF or `SITE *BUFSIZE` on the server): set them
    /// only with the plain options, which the kernel caps at rmem_max/wmem_max, never with FORCE as root. The
    /// operator's own `--buffer` (false here) may still be forced past the caps.
    pub peer_buffers: bool,
    /// TCP congestion control for every data socket (TCP_CONGESTION, e.g. "cubic"), set before listen/connect;
    /// accepted sockets inherit it from the listener. `None`: the namespace's default.
    pub congestion: Option<String>,
    /// Record a per-stream trace (TCP_INFO every 50 ms, bounded memory) into `DataReport::traces`.
    pub trace: bool,
    /// CRC32C every block moved (received or sent) and combine them into `DataReport::crc32c`.
    pub crc32c: bool,
    /// Receiving with [`Self::crc32c`] in MODE E: (offset, length, CRC32C) of file ranges already in place that
    /// this transfer does not move (what blast wrote before `--transport auto` moved the rest to TCP), combined
    /// with the moved blocks' so that `DataReport::crc32c` covers the whole file without reading it again.
    pub crc_held: Vec<(u64, u64, u32)>,
    /// Sums what stream-mode control-channel DRS did on every transfer run with these options (`Progress::sbuf`
    /// per transfer; the server records each transfer's counts here when it ends).
    pub sbuf_observer: Option<std::sync::Arc<SbufObserver>>,
    /// Server: the TLS configuration for `AUTH TLS` on the control channel and for `PROT P` data connections
    /// (the server is the TLS server on both, RFC 4217 §7). `None`: no certificate, TLS is not offered.
    pub tls_server: Option<std::sync::Arc<rustls::ServerConfig>>,
    /// Client: TLS for `PROT P` data connections, sharing the control connection's config and resumption store.
    pub tls_client: Option<crate::tls::TlsClient>,
    /// Which directions of a cleartext stream-mode transfer between host files go through the kernel
    /// (`sendfile`/`splice`, see `zerocopy`). Off by default; the binary takes it from `DRSFTP_ZERO_COPY`.
    pub zero_copy: ZeroCopy,
}

impl Default for DataOpts {
    fn default() -> Self {
        DataOpts {
            buffer: BufferPolicy::Kernel,
            block_size: DEFAULT_BLOCK,
            max_block: 64 << 20,
            max_end: u64::MAX,
            inband_sbuf: false,
            drs_max: 64 << 20,
            congestion: None,
            trace: false,
            crc32c: false,
            crc_held: Vec::new(),
            sbuf_observer: None,
            tls_server: None,
            tls_client: None,
            peer_buffers: false,
            zero_copy: ZeroCopy::OFF,
        }
    }
}

/// Live counters of one transfer, shared between the engine and whoever reports progress (markers, bars).
#[derive(Debug, Default)]
pub struct Progress {
    bytes: AtomicU64,
    streams: AtomicU64,
    /// Sum over streams of the receive (or send) buffer currently in force, bytes.
    buffer: AtomicU64,
    /// Sending side, Linux: bytes the peer acknowledged (TCP_INFO `bytes_acked`), summed over MODE E streams.
    acked: AtomicU64,
    /// Sending side, Linux: cumulative TCP_INFO path readings over MODE E streams (see [`Self::path`]).
    tx_sent: AtomicU64,
    tx_retrans: AtomicU64,
    rtt_us: AtomicU64,
    min_rtt_us: AtomicU64,
    /// The largest send MSS read (not a sum).
    mss: AtomicU64,
    /// Sending side: the latest smoothed RTT read (not a sum), for [`Self::tx_reading`].
    tx_rtt_us: AtomicU64,
    /// Receiving side, Linux: cumulative TCP_INFO readings over the receiving streams (see [`Self::rx_reading`]):
    /// segments received, segments that arrived out of order, the latest receiver RTT estimate.
    rx_segments: AtomicU64,
    rx_ooo: AtomicU64,
    rx_rtt_us: AtomicU64,
    ranges: Mutex<RangeSet>,
    /// Sending side: the file ranges the receiving server confirmed with `111 Range Marker` replies (what it has
    /// written), which an upload's resume checkpoint keeps (docs/resume.md "Upload resume against Globus").
    marked: Mutex<RangeSet>,
    /// A striped frontend's bytes per stripe, as its movers report them (empty otherwise).
    stripes: Mutex<Vec<u64>>,
    /// Stream mode's control-channel SBUF link (docs/drs.md §4.4).
    sbuf: SbufLink,
    /// A job's shared counter that also counts the bytes moved here ([`Self::child`]).
    parent: Option<Arc<Progress>>,
    /// Payload bytes that went through the kernel-side path (`sendfile`, `splice`) rather than a user-space
    /// buffer (see `zerocopy`).
    kernel_copied: AtomicU64,
    /// A blast receiver's path readings, for `--transport auto`'s probe ([`Self::blast_reading`]).
    blast: BlastWatch,
}

/// What a blast receiver publishes for `drsftp_tune::BlastProbe`: cumulative counts, and the lowest and highest
/// one-way delay since the last reading (taken and reset by [`Progress::blast_reading`]).
#[derive(Debug)]
struct BlastWatch {
    transmissions: AtomicU64,
    datagrams: AtomicU64,
    socket_drops: AtomicU64,
    owd_lo: AtomicI64,
    owd_hi: AtomicI64,
}

impl Default for BlastWatch {
    fn default() -> Self {
        BlastWatch {
            transmissions: AtomicU64::new(0),
            datagrams: AtomicU64::new(0),
            socket_drops: AtomicU64::new(0),
            owd_lo: AtomicI64::new(i64::MAX),
            owd_hi: AtomicI64::new(i64::MIN),
        }
    }
}

impl Progress {
    /// New, all zero.
    pub fn new() -> Self {
        Self::default()
    }
    /// New, all zero, with its bytes also counted in `parent`: one file of a batch keeps its own ranges (for its
    /// resume checkpoint) while the batch's display sees every file's bytes.
    pub fn child(parent: Arc<Progress>) -> Self {
        Progress {
            parent: Some(parent),
            ..Self::default()
        }
    }
    /// Payload bytes this end moved with `sendfile`/`splice` (no user-space copy of the payload).
    pub fn kernel_copied(&self) -> u64 {
        self.kernel_copied.load(Ordering::Relaxed)
    }
    pub(crate) fn add_kernel_copied(&self, n: u64) {
        self.kernel_copied.fetch_add(n, Ordering::Relaxed);
    }
    /// Payload bytes moved so far.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }
    /// Data connections in use.
    pub fn streams(&self) -> u64 {
        self.streams.load(Ordering::Relaxed)
    }
    /// Buffer bytes in force across streams.
    pub fn buffer(&self) -> u64 {
        self.buffer.load(Ordering::Relaxed)
    }
    /// Sending side: bytes the receivers' TCPs acknowledged so far over MODE E connections (wire bytes, headers
    /// included; read from TCP_INFO after each block, so 0 where that is unavailable). Unlike [`Self::bytes`],
    /// which counts what entered the socket buffers, this is what crossed the path: a new connection's send
    /// buffer filling up does not look like throughput. `-p auto` measures with it.
    pub fn acked(&self) -> u64 {
        self.acked.load(Ordering::Relaxed)
    }
    /// Sending side: cumulative bytes sent and retransmitted (TCP_INFO) and the sums of the smoothed and minimum
    /// RTTs read after each block, over MODE E streams; all 0 where TCP_INFO is unavailable. `-p auto`
    /// differences two readings to tell random loss from a full bottleneck (`drsftp_tune::AutoStreams`).
    pub fn path(&self) -> drsftp_tune::PathSample {
        drsftp_tune::PathSample {
            sent: self.tx_sent.load(Ordering::Relaxed),
            retrans: self.tx_retrans.load(Ordering::Relaxed),
            rtt_us: self.rtt_us.load(Ordering::Relaxed),
            min_rtt_us: self.min_rtt_us.load(Ordering::Relaxed),
            mss: self.mss.load(Ordering::Relaxed),
        }
    }
    /// File ranges written so far (receiving side) or sent (sending side), in file offsets.
    pub fn ranges(&self) -> RangeSet {
        self.ranges.lock().map(|r| r.clone()).unwrap_or_default()
    }
    /// Ranges the receiving server confirmed with range markers so far (file offsets).
    pub fn marked(&self) -> RangeSet {
        self.marked.lock().map(|r| r.clone()).unwrap_or_default()
    }
    /// The receiving server's `111 Range Marker`: it has written `ranges`.
    pub fn mark(&self, ranges: &[std::ops::Range<u64>]) {
        if let Ok(mut r) = self.marked.lock() {
            for x in ranges {
                r.insert(x.clone());
            }
        }
    }
    /// A striped frontend: bytes per stripe so far (empty otherwise).
    pub fn stripes(&self) -> Vec<u64> {
        self.stripes.lock().map(|s| s.clone()).unwrap_or_default()
    }
    /// A striped frontend: stripe `i` of `n` has moved `bytes` (a mover's perf marker); the total follows.
    pub fn set_stripe(&self, i: usize, n: usize, bytes: u64) {
        if let Ok(mut s) = self.stripes.lock() {
            let len = n.max(i + 1).max(s.len());
            s.resize(len, 0);
            s[i] = bytes;
            self.bytes.store(s.iter().sum(), Ordering::Relaxed);
        }
    }
    /// Counts `ranges` as moved (a mover's range marker), without counting bytes (those come per stripe).
    pub fn add_ranges(&self, ranges: &[std::ops::Range<u64>]) {
        if let Ok(mut r) = self.ranges.lock() {
            for x in ranges {
                r.insert(x.clone());
            }
        }
    }
    /// The control-channel SBUF link between this transfer's stream-mode engine and its control driver.
    pub fn sbuf(&self) -> &SbufLink {
        &self.sbuf
    }
    /// Counts `range` as moved; returns how many disjoint ranges are now held (O(log n): `RangeSet`).
    pub(crate) fn add(&self, range: std::ops::Range<u64>) -> usize {
        self.bytes
            .fetch_add(range.end - range.start, Ordering::Relaxed);
        if let Some(p) = &self.parent {
            p.bytes
                .fetch_add(range.end - range.start, Ordering::Relaxed);
        }
        match self.ranges.lock() {
            Ok(mut r) => {
                r.insert(range);
                r.len()
            }
            Err(_) => 0,
        }
    }
    /// One stream's TCP_INFO reading after a block: `last` holds that stream's previous (acked, sent, retrans)
    /// totals, whose increments are added here.
    pub(crate) fn add_tcp_info(&self, last: &mut [u64; 3], i: &drsftp_sys::tcp_info::TcpInfo) {
        let now = [i.bytes_acked, i.bytes_sent, i.bytes_retrans];
        for (k, c) in [&self.acked, &self.tx_sent, &self.tx_retrans]
            .into_iter()
            .enumerate()
        {
            c.fetch_add(now[k].saturating_sub(last[k]), Ordering::Relaxed);
            last[k] = last[k].max(now[k]);
        }
        self.mss.fetch_max(u64::from(i.snd_mss), Ordering::Relaxed);
        if !i.rtt.is_zero() {
            self.tx_rtt_us
                .store(i.rtt.as_micros() as u64, Ordering::Relaxed);
        }
        if !i.min_rtt.is_zero() && !i.rtt.is_zero() {
            self.rtt_us
                .fetch_add(i.rtt.as_micros() as u64, Ordering::Relaxed);
            self.min_rtt_us
                .fetch_add(i.min_rtt.as_micros() as u64, Ordering::Relaxed);
        }
    }
    /// What the sending MODE E streams have seen so far, for `--transport auto` on an upload
    /// (`drsftp_tune::TransportConfig::sender`): bytes the receiver acknowledged, segments sent and retransmitted
    /// (byte counts over the largest MSS), the latest smoothed RTT.
    pub fn tx_reading(&self) -> drsftp_tune::PathReading {
        let mss = self.mss.load(Ordering::Relaxed).max(536);
        drsftp_tune::PathReading {
            delivered: self.acked(),
            segments: self.tx_sent.load(Ordering::Relaxed) / mss,
            loss_marks: self.tx_retrans.load(Ordering::Relaxed) / mss,
            rtt: std::time::Duration::from_micros(self.tx_rtt_us.load(Ordering::Relaxed)),
        }
    }
    /// A blast receiver's counts so far (cumulative) and one batch's lowest and highest one-way delay.
    pub(crate) fn add_blast(
        &self,
        transmissions: u64,
        datagrams: u64,
        socket_drops: u64,
        owd: (i64, i64),
    ) {
        let b = &self.blast;
        b.transmissions.store(transmissions, Ordering::Relaxed);
        b.datagrams.store(datagrams, Ordering::Relaxed);
        b.socket_drops.store(socket_drops, Ordering::Relaxed);
        b.owd_lo.fetch_min(owd.0, Ordering::Relaxed);
        b.owd_hi.fetch_max(owd.1, Ordering::Relaxed);
    }
    /// What the blast receiver has seen, for `--transport auto`'s probe; the one-way delays are those since the
    /// previous call.
    pub fn blast_reading(&self) -> drsftp_tune::BlastReading {
        let b = &self.blast;
        let lo = b.owd_lo.swap(i64::MAX, Ordering::Relaxed);
        let hi = b.owd_hi.swap(i64::MIN, Ordering::Relaxed);
        drsftp_tune::BlastReading {
            transmissions: b.transmissions.load(Ordering::Relaxed),
            datagrams: b.datagrams.load(Ordering::Relaxed),
            socket_drops: b.socket_drops.load(Ordering::Relaxed),
            delivered: self.bytes(),
            owd_us: (lo <= hi).then_some((lo, hi)),
        }
    }
    /// What the receiving streams have seen so far, for `--transport auto` (`drsftp_tune::TransportDecider`):
    /// out-of-order segments stand for loss marks (a sender's retransmits are not visible here).
    pub fn rx_reading(&self) -> drsftp_tune::PathReading {
        drsftp_tune::PathReading {
            delivered: self.bytes(),
            segments: self.rx_segments.load(Ordering::Relaxed),
            loss_marks: self.rx_ooo.load(Ordering::Relaxed),
            rtt: std::time::Duration::from_micros(self.rx_rtt_us.load(Ordering::Relaxed)),
        }
    }
    /// One receiving stream's TCP_INFO reading: `last` holds that stream's previous (bytes received,
    /// out-of-order segments) totals, whose increments are added here.
    pub(crate) fn add_rx_info(&self, last: &mut [u64; 2], i: &drsftp_sys::tcp_info::TcpInfo) {
        let now = [i.bytes_received, u64::from(i.rcv_ooopack)];
        let d = [
            now[0].saturating_sub(last[0]),
            now[1].saturating_sub(last[1]),
        ];
        *last = [last[0].max(now[0]), last[1].max(now[1])];
        self.rx_segments
            .fetch_add(d[0] / u64::from(i.rcv_mss.max(536)), Ordering::Relaxed);
        self.rx_ooo.fetch_add(d[1], Ordering::Relaxed);
        if !i.rcv_rtt.is_zero() {
            self.rx_rtt_us
                .store(i.rcv_rtt.as_micros() as u64, Ordering::Relaxed);
        }
    }
    pub(crate) fn set_streams(&self, n: u64) {
        self.streams.store(n, Ordering::Relaxed);
    }
    pub(crate) fn add_buffer(&self, delta: i64) {
        if delta >= 0 {
            self.buffer.fetch_add(delta as u64, Ordering::Relaxed);
        } else {
            self.buffer.fetch_sub((-delta) as u64, Ordering::Relaxed);
        }
    }
}

/// A stream task that did not return: a panic is re-raised in tests (so fuzzing sees it) and is an I/O error
/// otherwise (a bug in one transfer must not take the server down).
pub(crate) fn join_error(what: &str, e: tokio::task::JoinError) -> DataError {
    if cfg!(test) && e.is_panic() {
        std::panic::resume_unwind(e.into_panic());
    }
    DataError::Io(std::io::Error::other(format!("{what} task failed: {e}")))
}

/// What a finished transfer moved.
#[derive(Debug)]
pub struct DataReport {
    /// Payload bytes.
    pub bytes: u64,
    /// Data connections used.
    pub streams: usize,
    /// File ranges moved (file offsets).
    pub ranges: RangeSet,
    /// MODE E connections that ended with EOD and no CLOSE: may carry the next transfer (still TLS if they were).
    pub reusable: Vec<crate::tls::MaybeTls>,
    /// Largest total buffer in force across streams during the transfer, bytes.
    pub peak_buffer: u64,
    /// Largest sum of the receiving sockets' advertised windows (TCP_INFO `rcv_wnd`, sampled every 20 ms), bytes;
    /// 0 when sending. The same meter for every buffer policy.
    pub peak_window: u64,
    /// With `DataOpts::trace`: one trace per data connection that carried this transfer (senders in the order
    /// the connections were given/joined, receivers in arrival order); rows at least 50 ms apart, bounded in
    /// number (`drs::TraceLog`). Empty without tracing.
    pub traces: Vec<Vec<crate::drs::TraceRow>>,
    /// With `DataOpts::crc32c`: the CRC32C of the file bytes `0..end` moved, where `end` is the end of `ranges`,
    /// if the blocks moved cover exactly `0..end` (no gap, no overlap, nothing before 0 missing). Computed from the
    /// bytes as they were written (receiving) or read for sending, never by reading the file again.
    pub crc32c: Option<u32>,
}

/// Why a data transfer failed. Maps to FTP replies in the server (`reply_code`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DataError {
    /// Socket error on a data connection (reset, refused, timeout).
    #[error("data connection: {0}")]
    Io(#[from] std::io::Error),
    /// Reading or writing the file failed.
    #[error("storage: {0}")]
    Storage(#[from] StorageError),
    /// The peer sent a MODE E header we refuse.
    #[error("bad MODE E header: {0}")]
    Header(#[from] HeaderError),
    /// A data connection closed before its EOD, or the transfer ended with bytes missing.
    #[error("transfer incomplete: {0}")]
    Incomplete(String),
    /// No data connection arrived, or none made progress, in time.
    #[error("data connection timed out")]
    Timeout,
    /// ABOR or shutdown.
    #[error("transfer aborted")]
    Aborted,
}

impl DataError {
    /// The FTP reply code a server sends for this failure (426 connection trouble, 451 local error,
    /// 452 storage full, 425 no connection).
    pub fn reply_code(&self) -> u16 {
        match self {
            DataError::Io(_) | DataError::Incomplete(_) | DataError::Header(_) => 426,
            DataError::Aborted => 426,
            DataError::Timeout => 425,
            DataError::Storage(e) => e.reply_code(),
        }
    }
}
