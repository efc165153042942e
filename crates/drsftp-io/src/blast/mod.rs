//! The UDP blast data path (docs/blast.md): drives the sans-IO `drsftp_blast` [`Sender`](drsftp_blast::Sender) and
//! [`Receiver`](drsftp_blast::Receiver) over one UDP socket with `drsftp_sys::udp` batching (sendmmsg or UDP GSO
//! out, recvmmsg with GRO in), reading the file with positioned reads and writing each packet at its offset.
//!
//! Each side runs on its own OS thread, not a tokio task: pacing at ~80 000 packets/s needs timeouts far finer
//! than tokio's 1 ms timer, so the loop sleeps in `ppoll` until the core's `poll_timeout` (or a datagram) with a
//! 10 µs timer slack. The async [`send`] / [`recv`] wrappers start the thread, wait for its result and stop it
//! when dropped (ABOR, a failed control channel, shutdown), so a cancelled transfer leaves nothing running.
//!
//! * Sender ([`send`]): after each wake-up it reads every queued ack, hands them to the core, lets the core fill
//!   batches of datagrams (payloads through a read-ahead window over the file, see `io.rs`) and sends them; when
//!   the socket buffer is full the rest waits for writability. It ends when the receiver reports completion, and
//!   fails after `idle_timeout` without a valid ack.
//! * Receiver ([`recv`]): reads batches, gives each datagram from the peer's host to the core, coalesces the new
//!   payloads into contiguous runs written with one positioned write each, sends the core's acks to the peer's
//!   announced address, and reports once every packet is held and written. It then *lingers* (see [`Linger`]):
//!   if its final "complete" datagram was lost the sender keeps resending, and the lingering receiver answers
//!   again, until the caller releases it or the socket has been quiet for [`BlastOpts::linger`].
//! * Bad input: datagrams from another host are dropped and counted as `foreign`; the core rejects (and counts)
//!   truncated, forged (CRC), foreign-transfer, replayed-stale and out-of-range ones; duplicates are counted.
//!   None of them can fail the transfer or touch the file. Acks always go to the address announced on the
//!   control channel, never to a datagram's source.
//! * Resume (docs/blast.md "Resume"): [`recv_with`] starts the receiver from a checkpoint and hands copies of
//!   its packet map to a [`RecvResume::checkpoints`] sink every [`RecvResume::every`] and once more when it stops
//!   for any reason (complete, failed, cancelled), each taken right after the pending runs were written, never
//!   after a failed write. [`send_with`] starts the sender with the packets the receiver holds acknowledged, so
//!   they are never sent. [`BlastReport::resumed`] counts the bytes held from the start.

mod io;
mod receiver;
mod sender;
#[cfg(test)]
mod tests;

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use drsftp_blast::{Bitmap, RejectCounts, TransferParams};
use drsftp_proto::ranges::RangeSet;
use drsftp_storage::FileHandle;
use drsftp_sys::sockopt;

use crate::data::{DataError, Progress};

/// Blast data-path settings.
#[derive(Debug, Clone, PartialEq)]
pub struct BlastOpts {
    /// Path MTU asked for in `OPTS BLAST` (client side): packets are MTU − 64 payload bytes.
    pub mtu: u32,
    /// Sending-rate cap, bit/s on the wire (0 = none beyond what the peer announced).
    pub max_rate: u64,
    /// Receiver: acknowledge every this many new packets (`None`: the core's default, 64).
    pub ack_every: Option<u32>,
    /// Sender: pacing rate before the first delivery sample, bit/s on the wire (0: the core's default,
    /// 10 Mbit/s); clamped to `max_rate`. Client: asked of the server with `OPTS BLAST Start=`. The unacked
    /// budget still bounds what goes out before the first ack, whatever this says.
    pub start_rate: u64,
    /// Receiver: longest an ack is held after a packet arrived (`None`: the core's default, 10 ms). A long value
    /// leaves `ack_every` as the only regular trigger, as in FOBS.
    pub max_ack_delay: Option<Duration>,
    /// Receiver: most ack datagrams per ack event (the newest packets' state plus a rotating part of the rest).
    pub ack_chunks: u16,
    /// Client: bind the UDP socket to this port (0 or `None`: any).
    pub port: Option<u16>,
    /// Use UDP GSO for sending when the kernel and route allow it.
    pub gso: bool,
    /// Ask for UDP GRO when receiving.
    pub gro: bool,
    /// Packets the pacer may release back to back (lets one GSO send carry several).
    pub max_burst: u32,
    /// Socket buffer to request in each direction (forced past rmem_max/wmem_max when allowed), bytes.
    pub socket_buffer: usize,
    /// Whether `socket_buffer` may be forced past rmem_max/wmem_max (SO_*BUFFORCE, as root). The server clears
    /// it: any client's `BPAS` binds a socket, and those must not pin kernel memory beyond the host's caps.
    pub force_buffers: bool,
    /// Give up after this long without hearing from the peer.
    pub idle_timeout: Duration,
    /// Receiver: after completion keep answering for up to this long after the last datagram.
    pub linger: Duration,
    /// Client downloads: pick up a matching checkpoint left by an interrupted download of the same file
    /// (`false`: `--no-resume`, discard it and start afresh). Checkpoints are written either way.
    pub resume: bool,
    /// Per transfer: CRC32C datagrams, or AEAD with keys from the control connection's TLS exporter (`PROT P`,
    /// see [`blast_keys`]). Both ends must agree; a protected transfer never falls back to cleartext.
    pub protection: drsftp_blast::Protection,
}

impl Default for BlastOpts {
    fn default() -> Self {
        BlastOpts {
            mtu: 1500,
            max_rate: 0,
            ack_every: None,
            start_rate: 0,
            max_ack_delay: None,
            ack_chunks: 4,
            port: None,
            gso: true,
            gro: true,
            max_burst: 128,
            socket_buffer: 32 << 20,
            force_buffers: true,
            idle_timeout: Duration::from_secs(60),
            linger: Duration::from_secs(3),
            resume: true,
            protection: drsftp_blast::Protection::None,
        }
    }
}

/// AEAD protection for one transfer under TLS: keying material exported from the control connection `tls` with
/// the drsftp blast label and the transfer's parameters as context (`drsftp_blast::crypt`), so each transfer has
/// its own keys and both ends derive the same ones. `None` if the connection is not TLS.
pub fn blast_keys(
    tls: &crate::tls::MaybeTls,
    params: &TransferParams,
    dir: drsftp_blast::DataDirection,
) -> Option<drsftp_blast::Protection> {
    let ctx = drsftp_blast::crypt::exporter_context(params, dir);
    let km = tls.export_keying_material::<{ drsftp_blast::crypt::KEY_MATERIAL_LEN }>(
        drsftp_blast::crypt::EXPORTER_LABEL,
        &ctx,
    )?;
    Some(drsftp_blast::Protection::Aead(
        drsftp_blast::KeyMaterial::new(km),
    ))
}

/// What one side of a blast transfer did.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BlastReport {
    /// File bytes delivered (receiver: written; sender: acknowledged).
    pub bytes: u64,
    /// Packets in the transfer.
    pub packets: u64,
    /// Data datagrams sent (sender) or received from the peer and valid (receiver).
    pub datagrams: u64,
    /// Data packets that arrived more than once (receiver's count; the sender learns it from acks).
    pub duplicates: u64,
    /// Receiver: the sender's transmissions from the oldest to the newest that arrived (each data datagram is
    /// numbered), so `transmissions - datagrams` were lost on the path or at our socket (`socket_drops`).
    /// Sender: the data datagrams it sent.
    pub transmissions: u64,
    /// Datagrams dropped as bad input: `foreign` plus every core rejection.
    pub rejected: u64,
    /// From a host other than the peer.
    pub foreign: u64,
    /// The core's rejections by reason.
    pub rejects: RejectCounts,
    /// Sender: retransmissions (not counting tail-hedge copies) and hedge copies.
    pub resent: u64,
    pub hedge_copies: u64,
    /// Ack datagrams sent (receiver) or received (sender).
    pub acks: u64,
    /// Datagrams the kernel dropped at our socket (receive buffer full).
    pub socket_drops: u64,
    /// Whether GSO / GRO were in use.
    pub gso: bool,
    pub gro: bool,
    /// Whether the datagrams were AEAD-sealed (`PROT P`).
    pub aead: bool,
    /// File ranges written (receiver) or acknowledged (sender), in file offsets.
    pub ranges: RangeSet,
    /// Receiver: the packet map when it stopped (the resume checkpoint), as `Bitmap::to_bytes`.
    pub bitmap: Vec<u8>,
    /// Bytes the receiver held before this session started (a resumed transfer); not sent again.
    pub resumed: u64,
    /// Seconds from the first datagram sent/received to completion.
    pub seconds: f64,
    /// Receiver: where the time went (first datagram, rate ramp, first pass, retransmission tail); empty at a
    /// sender.
    pub phases: drsftp_blast::PhaseReport,
    /// The CRC32C of the file's bytes `0..end`, when known without reading the file again: the receiver's from
    /// the runs it wrote (when they tile exactly that range), the sender's from its read-ahead windows (a whole
    /// transfer from offset 0).
    pub crc32c: Option<u32>,
}

impl BlastReport {
    /// Duplicates as a fraction of the transfer's packets.
    pub fn duplicate_ratio(&self) -> f64 {
        if self.packets == 0 {
            0.0
        } else {
            self.duplicates as f64 / self.packets as f64
        }
    }
}

/// A fresh random transfer id (from the OS random source).
pub fn random_id() -> u64 {
    use std::io::Read;
    let mut b = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_ok()
    {
        return u64::from_le_bytes(b);
    }
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

/// Binds a non-blocking UDP socket on `ip:port` with large buffers, GRO (if `opts.gro`) and the kernel's drop
/// counter.
pub fn bind(ip: IpAddr, port: u16, opts: &BlastOpts) -> std::io::Result<std::net::UdpSocket> {
    let sock = std::net::UdpSocket::bind(SocketAddr::new(ip, port))?;
    sock.set_nonblocking(true)?;
    let limits = sockopt::buf_limits().ok().map(|l| sockopt::BufLimits {
        force: l.force && opts.force_buffers,
        ..l
    });
    let (rcap, wcap) = limits.map_or((0, 0), |l| {
        (
            l.force_cap(sockopt::Dir::Recv),
            l.force_cap(sockopt::Dir::Send),
        )
    });
    let _ = sockopt::set_buf_best(&sock, sockopt::Dir::Recv, opts.socket_buffer, rcap);
    let _ = sockopt::set_buf_best(
        &sock,
        sockopt::Dir::Send,
        opts.socket_buffer.min(8 << 20),
        wcap,
    );
    if opts.gro {
        drsftp_sys::udp::enable_gro(&sock);
    }
    drsftp_sys::udp::enable_drop_counter(&sock);
    drsftp_sys::udp::enable_timestamps(&sock);
    Ok(sock)
}

/// The clocks right after a receive: `Instant` for the cores, wall time to place kernel arrival stamps.
#[derive(Clone, Copy)]
struct Clock {
    now: std::time::Instant,
    wall: Duration,
}

impl Clock {
    fn read() -> Clock {
        Clock {
            now: std::time::Instant::now(),
            wall: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default(),
        }
    }

    /// When a datagram stamped `at` (wall time, from the kernel) arrived, on the `Instant` clock: its real
    /// arrival, not when this thread got round to reading it (delivery-rate samples depend on it).
    fn arrival(&self, at: Option<Duration>) -> std::time::Instant {
        at.and_then(|a| self.wall.checked_sub(a))
            .filter(|age| *age < Duration::from_secs(1))
            .and_then(|age| self.now.checked_sub(age))
            .unwrap_or(self.now)
    }
}

/// Stops a blast thread when dropped.
#[derive(Debug)]
struct Cancel(Arc<AtomicBool>);

impl Drop for Cancel {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A receiver that has delivered the file and keeps answering the sender (see the module docs). Dropping it
/// stops it at once; [`Linger::detach`] lets it run until the socket has been quiet for [`BlastOpts::linger`].
#[derive(Debug)]
pub struct Linger(Option<Cancel>);

impl Linger {
    /// Let the receiver answer late datagrams on its own until it times out.
    pub fn detach(mut self) {
        if let Some(c) = self.0.take() {
            std::mem::forget(c);
        }
    }
}

fn thread_gone() -> DataError {
    DataError::Io(std::io::Error::other("blast thread ended without a result"))
}

/// Where a resumed receiver starts and where its checkpoints go (see the module docs).
#[derive(Debug, Default)]
pub struct RecvResume {
    /// The packets already in the file (`None`: none).
    pub from: Option<Bitmap>,
    /// Gets a copy of the packet map every `every` and when the receiver stops; every set packet's bytes were
    /// written (not synced) before the copy was taken. A busy sink misses periodic copies, never the last one.
    pub checkpoints: Option<std::sync::mpsc::SyncSender<Bitmap>>,
    pub every: Duration,
    /// Set to stop the receiver from outside (as dropping the future does), e.g. by the checkpoint's owner.
    pub stop: Option<Arc<AtomicBool>>,
}

/// Bytes of the transfer covered by the set packets of `held`.
pub fn held_bytes(params: &TransferParams, held: &Bitmap) -> u64 {
    drsftp_blast::resume::byte_ranges(params, held)
        .iter()
        .map(|r| r.end - r.start)
        .sum()
}

/// What a blast thread runs on, the same for both ends; `side` is what only one end has (the sender: the packets
/// the receiver already holds; the receiver: its resume state).
struct Job<S> {
    sock: std::net::UdpSocket,
    peer: SocketAddr,
    params: TransferParams,
    file: Arc<dyn FileHandle>,
    base: u64,
    opts: BlastOpts,
    progress: Arc<Progress>,
    stop: Arc<AtomicBool>,
    side: S,
}

/// Runs a blast loop on its own thread: it blocks in ppoll and sendmmsg/recvmmsg, so not on the runtime.
fn spawn_thread(name: &str, f: impl FnOnce() + Send + 'static) -> Result<(), DataError> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map(drop)
        .map_err(DataError::Io)
}

/// Sends `params.total_bytes` bytes of `file`, starting at file offset `base`, to the receiver at `peer`.
/// Completes when the receiver holds everything.
pub async fn send(
    sock: std::net::UdpSocket,
    peer: SocketAddr,
    params: TransferParams,
    file: Arc<dyn FileHandle>,
    base: u64,
    opts: &BlastOpts,
    progress: Arc<Progress>,
) -> Result<BlastReport, DataError> {
    send_with(sock, peer, params, file, base, opts, progress, None).await
}

/// [`send`] to a receiver that already holds the packets set in `acked` (a resumed download): they are never
/// sent.
#[allow(clippy::too_many_arguments)]
pub async fn send_with(
    sock: std::net::UdpSocket,
    peer: SocketAddr,
    params: TransferParams,
    file: Arc<dyn FileHandle>,
    base: u64,
    opts: &BlastOpts,
    progress: Arc<Progress>,
    acked: Option<Bitmap>,
) -> Result<BlastReport, DataError> {
    let stop = Arc::new(AtomicBool::new(false));
    let _guard = Cancel(stop.clone());
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job = Job {
        sock,
        peer,
        params,
        file,
        base,
        opts: opts.clone(),
        progress,
        stop,
        side: acked,
    };
    spawn_thread("blast-send", move || {
        let _ = tx.send(sender::run(job));
    })?;
    rx.await.unwrap_or_else(|_| Err(thread_gone()))
}

/// Receives `params.total_bytes` bytes from the sender on host `peer.ip()` into `file` at `base + offset`,
/// acknowledging to `peer`. Returns once every packet is written, with the [`Linger`] that keeps answering.
pub async fn recv(
    sock: std::net::UdpSocket,
    peer: SocketAddr,
    params: TransferParams,
    file: Arc<dyn FileHandle>,
    base: u64,
    opts: &BlastOpts,
    progress: Arc<Progress>,
) -> Result<(BlastReport, Linger), DataError> {
    let r = RecvResume::default();
    recv_with(sock, peer, params, file, base, opts, progress, r).await
}

/// [`recv`] resuming from `resume.from` and reporting checkpoints to `resume.checkpoints`.
#[allow(clippy::too_many_arguments)]
pub async fn recv_with(
    sock: std::net::UdpSocket,
    peer: SocketAddr,
    params: TransferParams,
    file: Arc<dyn FileHandle>,
    base: u64,
    opts: &BlastOpts,
    progress: Arc<Progress>,
    mut resume: RecvResume,
) -> Result<(BlastReport, Linger), DataError> {
    let stop = resume.stop.take().unwrap_or_default();
    let guard = Cancel(stop.clone());
    let _writeback = crate::data::Writeback::start(&file);
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job = Job {
        sock,
        peer,
        params,
        file,
        base,
        opts: opts.clone(),
        progress,
        stop,
        side: resume,
    };
    spawn_thread("blast-recv", move || receiver::run(job, tx))?;
    let report = rx.await.unwrap_or_else(|_| Err(thread_gone()))?;
    Ok((report, Linger(Some(guard))))
}

/// The packet map a checkpoint holds, as a [`Bitmap`] for `drsftp_blast::Receiver::resume`.
pub fn checkpoint(params: &TransferParams, bitmap: &[u8]) -> Result<Bitmap, DataError> {
    Bitmap::from_bytes(params.total_packets(), bitmap)
        .map_err(|e| DataError::Incomplete(format!("resume checkpoint: {e}")))
}
