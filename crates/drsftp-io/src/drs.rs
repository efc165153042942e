//! Per-stream DRS driver for data sockets: buffer set-up around connect/listen, then on each read it feeds
//! the sans-IO `drsftp_tune::DrsReceiver`, reads TCP_INFO at most once per sampling interval, applies SO_RCVBUF
//! changes, hands in-band SBUF probes back to the data engine, and records a buffer/RTT/throughput trace.
//! The sender half applies SBUF requests to SO_SNDBUF. Synchronous (socket options only), usable on tokio streams.

use std::io::{self, Write};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use drsftp_sys::sockopt::{self, BufLimits, Dir};
use drsftp_sys::tcp_info::{tcp_info, TcpInfo};
use drsftp_tune::{
    BufferPolicy, DrsAction, DrsConfig, DrsReceiver, DrsSender, LimitClassifier, LimitReport,
    TcpSample,
};

/// Convert the kernel's TCP_INFO into the tuner's portable sample.
pub fn sample_of(i: &TcpInfo) -> TcpSample {
    TcpSample {
        rtt: i.rtt,
        rcv_rtt: i.rcv_rtt,
        min_rtt: i.min_rtt,
        cwnd_bytes: i.cwnd_bytes(),
        delivery_rate: i.delivery_rate,
        bytes_received: i.bytes_received,
        bytes_acked: i.bytes_acked,
        rcv_space: i.rcv_space as u64,
        busy_time: i.busy_time,
        rwnd_limited: i.rwnd_limited,
        sndbuf_limited: i.sndbuf_limited,
    }
}

/// Largest receive buffer DRS may use on this host: rmem_max, or `want` if we may exceed it with SO_RCVBUFFORCE.
pub fn drs_max_buf(limits: &BufLimits, want: u64, root: bool) -> u64 {
    if root {
        want
    } else {
        want.min(limits.rmem_max as u64)
    }
}

/// Before `connect`/`listen`: arrange buffers for `policy`.
/// - `Kernel`: nothing (autotuning picks a scale for tcp_rmem[2]).
/// - `Fixed(b)`: SO_RCVBUF and SO_SNDBUF = b (FORCE above the caps when permitted).
/// - `Drs`: nothing either: SO_RCVBUF stays unlocked through set-up, so the kernel arranges the window scale
///   before connect/listen itself (`tcp_select_initial_window` sizes `rcv_wscale` for max(tcp_rmem[2],
///   rmem_max) when the buffer is not locked) while advertising only autotuning's small initial window. A large
///   SO_RCVBUF here would make Linux advertise a huge window at set-up that it never retracts (measured: 1.74x
///   the memory of a 16 MB fixed buffer at drs_max 64 MiB; docs/drs.md). [`after_connect`] raises the buffer
///   once the connection exists. (`_drs_max` is unused now; kept so the call sites stay uniform.)
pub fn prepare_socket(
    fd: impl AsFd,
    policy: BufferPolicy,
    limits: &BufLimits,
    _drs_max: u64,
) -> io::Result<()> {
    let fd = fd.as_fd();
    let e = |err: sockopt::SockoptError| io::Error::other(err);
    match policy {
        BufferPolicy::Kernel | BufferPolicy::Drs => {}
        BufferPolicy::Fixed(b) => {
            sockopt::set_buf_best(fd, Dir::Recv, b as usize, limits.force_cap(Dir::Recv))
                .map_err(e)?;
            sockopt::set_buf_best(fd, Dir::Send, b as usize, limits.force_cap(Dir::Send))
                .map_err(e)?;
        }
    }
    Ok(())
}

/// How DRS imposes its window on a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrsKnob {
    /// Seeds 000/003: set SO_RCVBUF to the starting size after connect and resize it. On Linux 6.x a locked
    /// buffer shrunk after set-up pins `rcv_ssthresh` (the advertised window stops growing when SO_RCVBUF is
    /// raised again); see docs/drs.md. Kept for comparison.
    RecvBuf,
    /// Move TCP_WINDOW_CLAMP (the advertised-window bound); raising the clamp also raises `rcv_ssthresh`.
    /// SO_RCVBUF follows the largest clamp so far (see [`after_connect`]) and is never lowered. Receive memory
    /// is bounded by the window.
    WindowClamp,
}

/// Largest window a connected socket can advertise: 65535 << its receive window scale (fixed at SYN time).
pub fn scale_limit(fd: impl AsFd) -> io::Result<u64> {
    Ok(65_535u64 << tcp_info(fd)?.rcv_wscale)
}

/// The ceiling [`after_connect`] will find, predicted before set-up: min(`drs_max`, 65535 << the window scale
/// Linux picks for an unlocked buffer, ilog2(max(tcp_rmem[2], rmem_max)) - 15, clamped to 0..=14).
pub fn expected_ceiling(limits: &BufLimits, drs_max: u64) -> u64 {
    let space = limits.tcp_rmem[2].max(limits.rmem_max).max(1) as u64;
    let wscale = (space.ilog2() as i64 - 15).clamp(0, 14);
    drs_max.min(65_535u64 << wscale)
}

/// After `connect`/`accept` under `Drs` (receiving side): size the buffer now that the connection exists, then
/// impose DRS's starting window (`initial`, capped at the ceiling) via `knob`. Returns the ceiling DRS may grow
/// to, min(`drs_max`, 65535 << rcv_wscale); 0 for the other policies.
/// - `WindowClamp`: SO_RCVBUF and the clamp are set to `initial`; the ceiling is capped at rmem_max unless
///   SO_RCVBUFFORCE is permitted. [`DrsStream`] raises SO_RCVBUF with the clamp, up to the ceiling. The window
///   scale needs no help: it was arranged before connect/listen by the kernel from max(tcp_rmem[2], rmem_max),
///   which is why [`prepare_socket`] leaves SO_RCVBUF alone; so the window opens from autotuning's small initial
///   value.
/// - `RecvBuf`: SO_RCVBUF = `initial` (DRS raises it later, up to the ceiling).
pub fn after_connect(
    fd: impl AsFd,
    policy: BufferPolicy,
    limits: &BufLimits,
    drs_max: u64,
    initial: u64,
    knob: DrsKnob,
) -> io::Result<u64> {
    if policy != BufferPolicy::Drs {
        return Ok(0);
    }
    let fd = fd.as_fd();
    let mut ceiling = drs_max.min(scale_limit(fd)?);
    let start = initial.min(ceiling);
    if knob == DrsKnob::WindowClamp {
        // SO_RCVBUF starts at twice DRS's window (`rcvbuf_for`), not at the ceiling: Linux re-derives the window
        // clamp from SO_RCVBUF (first full-sized segment) and advertises up to it before the first sampling
        // interval can put DRS's clamp back, and an advertised edge is never retracted: a ceiling-sized
        // buffer would let many joining streams advertise far more than their clamps.
        // [`DrsStream`] raises it with the clamp (never lowers it). Whether FORCE is permitted is learned here,
        // at the starting size.
        let forced = limits.force
            && ceiling > limits.rmem_max as u64
            && sockopt::set_recv_buf_force(fd, rcvbuf_for(start)).is_ok();
        if !forced {
            sockopt::set_recv_buf(fd, rcvbuf_for(start)).map_err(io::Error::other)?;
            ceiling = ceiling.min(limits.rmem_max as u64);
        }
    }
    apply_knob(fd, knob, limits, start)?;
    Ok(ceiling)
}

/// DRS's smallest window on this connection: `base`, or [`MIN_SEGMENTS`] segments if that is more. On loopback
/// (MSS 65483) a 64 KiB clamp is one segment, and a window that small stalled transfers for seconds (most likely
/// in zero-window probing); on Ethernet paths (MSS 1448) `base` is ~45 segments and this changes nothing.
pub fn min_buf_for(fd: impl AsFd, base: u64) -> u64 {
    let mss = tcp_info(fd).map_or(0, |i| i.snd_mss.max(i.rcv_mss) as u64);
    base.max(MIN_SEGMENTS * mss)
}
const MIN_SEGMENTS: u64 = 4;

/// SO_RCVBUF for a window clamp of `clamp` bytes, with headroom: the kernel also bounds the window by the
/// memory SO_RCVBUF allows (`tcp_win_from_space`: the doubled value times the payload/truesize ratio it measured).
/// With SO_RCVBUF equal to the clamp, cubic on the time-varying lab path ran at 52 Mbit/s in 3 of 3 runs with a
/// lower mean window (1.5-1.6 MiB) and fewer retransmissions (1000-1500) than with SO_RCVBUF at the ceiling
/// (60.7 Mbit/s, 2.1 MiB, ~2000): most likely that bound fell below the clamp, DRS saw a flight short of its
/// window, and its 1.5x steady gain no longer cleared the 5 % hysteresis. At twice the clamp: 60.8 in 2 of 2.
fn rcvbuf_for(clamp: u64) -> usize {
    (clamp * RCVBUF_PER_CLAMP) as usize
}
const RCVBUF_PER_CLAMP: u64 = 2;

fn apply_knob(
    fd: std::os::fd::BorrowedFd<'_>,
    knob: DrsKnob,
    limits: &BufLimits,
    n: u64,
) -> io::Result<()> {
    match knob {
        DrsKnob::RecvBuf => {
            sockopt::set_buf_best(fd, Dir::Recv, n as usize, limits.force_cap(Dir::Recv))
                .map_err(io::Error::other)?;
        }
        DrsKnob::WindowClamp => {
            sockopt::set_window_clamp(fd, n as usize).map_err(io::Error::other)?
        }
    }
    Ok(())
}

/// A listening socket with `policy`'s pre-listen buffers (see [`prepare_socket`]), bound to `addr`.
pub fn listen_with(
    addr: std::net::SocketAddr,
    policy: BufferPolicy,
    limits: &BufLimits,
    drs_max: u64,
) -> io::Result<std::net::TcpListener> {
    let s = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        None,
    )?;
    s.set_reuse_address(true)?;
    prepare_socket(&s, policy, limits, drs_max)?;
    s.bind(&addr.into())?;
    s.listen(128)?;
    Ok(s.into())
}

/// A blocking connect with `policy`'s pre-connect buffers and an optional congestion control (`cubic`, `bbr`).
pub fn connect_with(
    addr: std::net::SocketAddr,
    policy: BufferPolicy,
    limits: &BufLimits,
    drs_max: u64,
    congestion: Option<&str>,
) -> io::Result<std::net::TcpStream> {
    let s = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        None,
    )?;
    if let Some(cc) = congestion {
        sockopt::set_congestion(&s, cc).map_err(io::Error::other)?;
    }
    prepare_socket(&s, policy, limits, drs_max)?;
    s.connect(&addr.into())?;
    Ok(s.into())
}

/// One row of a transfer trace (`--trace FILE`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceRow {
    pub t: Duration,
    /// Receive buffer in force (setsockopt units; for `Kernel`, the kernel's rcv_space).
    pub buffer: u64,
    pub rtt: Duration,
    pub bdp: u64,
    pub bytes: u64,
    /// Throughput since the previous row, bits/s.
    pub bps: f64,
    /// Window the kernel actually advertises (tcpi_rcv_wnd) and its growth threshold (tcpi_rcv_ssthresh).
    pub rcv_wnd: u32,
    pub rcv_ssthresh: u32,
    /// Congestion window in bytes (tcpi_snd_cwnd × MSS): meaningful on a sending socket.
    pub cwnd: u64,
}

/// A trace whose memory stays bounded however long the transfer runs: rows are kept at least `spacing` apart,
/// and when `max` rows are held every other row is dropped (each survivor's throughput re-computed over the
/// merged interval) and the spacing widened to the new average gap. So the trace always covers the whole
/// transfer, at a resolution that halves each time it fills up. `max == 0` records nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceLog {
    spacing: Duration,
    max: usize,
    rows: Vec<TraceRow>,
}

impl TraceLog {
    /// Rows at least `spacing` apart, at most `max` of them (rounded up to an even number, at least 2).
    pub fn new(spacing: Duration, max: usize) -> Self {
        TraceLog {
            spacing,
            max: if max == 0 {
                0
            } else {
                max.max(2).next_multiple_of(2)
            },
            rows: vec![],
        }
    }

    /// True if a row at time `t` would be kept (check before paying for a TCP_INFO read).
    pub fn wants(&self, t: Duration) -> bool {
        self.max > 0 && self.rows.last().is_none_or(|l| t >= l.t + self.spacing)
    }

    /// Record `row` if [`wants`](Self::wants) says so; its `bps` is computed from the previous kept row (from
    /// zero bytes at t = 0 for the first).
    pub fn push(&mut self, mut row: TraceRow) {
        if !self.wants(row.t) {
            return;
        }
        let (t0, b0) = self
            .rows
            .last()
            .map_or((Duration::ZERO, 0), |l| (l.t, l.bytes));
        row.bps = rate(t0, b0, row.t, row.bytes);
        self.rows.push(row);
        if self.rows.len() >= self.max {
            self.decimate();
        }
    }

    fn decimate(&mut self) {
        let mut keep = 0;
        for i in (0..self.rows.len()).step_by(2) {
            self.rows[keep] = self.rows[i];
            if keep > 0 {
                let p = self.rows[keep - 1];
                let r = &mut self.rows[keep];
                r.bps = rate(p.t, p.bytes, r.t, r.bytes);
            }
            keep += 1;
        }
        self.rows.truncate(keep);
        let span = match (self.rows.first(), self.rows.last()) {
            (Some(a), Some(b)) => b.t.saturating_sub(a.t),
            _ => Duration::ZERO,
        };
        let gap = span / (keep.max(2) as u32 - 1);
        self.spacing = (self.spacing * 2).max(gap);
    }

    /// The rows kept, oldest first.
    pub fn rows(&self) -> &[TraceRow] {
        &self.rows
    }

    /// Current minimum gap between rows.
    pub fn spacing(&self) -> Duration {
        self.spacing
    }

    pub fn into_rows(self) -> Vec<TraceRow> {
        self.rows
    }
}

/// Bits per second between two (time, cumulative bytes) points.
fn rate(t0: Duration, b0: u64, t1: Duration, b1: u64) -> f64 {
    let dt = t1.saturating_sub(t0).as_secs_f64();
    if dt > 0.0 {
        b1.saturating_sub(b0) as f64 * 8.0 / dt
    } else {
        0.0
    }
}

/// Write a trace as CSV: `t_s,buffer_bytes,rtt_ms,bdp_bytes,bytes,mbps`.
pub fn write_trace_csv(mut w: impl Write, rows: &[TraceRow]) -> io::Result<()> {
    writeln!(
        w,
        "t_s,buffer_bytes,rtt_ms,bdp_bytes,bytes,mbps,rcv_wnd,rcv_ssthresh"
    )?;
    for r in rows {
        writeln!(w, "{:.3},{}", r.t.as_secs_f64(), csv_fields(r))?;
    }
    Ok(())
}

/// A row's fields from `buffer_bytes` to `rcv_ssthresh`, the part both trace formats share.
fn csv_fields(r: &TraceRow) -> String {
    format!(
        "{},{:.3},{},{},{:.3},{},{}",
        r.buffer,
        r.rtt.as_secs_f64() * 1e3,
        r.bdp,
        r.bytes,
        r.bps / 1e6,
        r.rcv_wnd,
        r.rcv_ssthresh
    )
}

/// Write the per-stream traces of one transfer as CSV, rows ordered by time then stream:
/// `t_s,stream,buffer_bytes,rtt_ms,bdp_bytes,bytes,mbps,rcv_wnd,rcv_ssthresh,cwnd_bytes`. `stream` is the index
/// into `traces`; `bytes` is that stream's cumulative payload.
pub fn write_stream_traces_csv(mut w: impl Write, traces: &[Vec<TraceRow>]) -> io::Result<()> {
    writeln!(
        w,
        "t_s,stream,buffer_bytes,rtt_ms,bdp_bytes,bytes,mbps,rcv_wnd,rcv_ssthresh,cwnd_bytes"
    )?;
    let mut all: Vec<(usize, &TraceRow)> = traces
        .iter()
        .enumerate()
        .flat_map(|(i, rows)| rows.iter().map(move |r| (i, r)))
        .collect();
    all.sort_by_key(|&(i, r)| (r.t, i));
    for (i, r) in all {
        writeln!(
            w,
            "{:.3},{i},{},{}",
            r.t.as_secs_f64(),
            csv_fields(r),
            r.cwnd
        )?;
    }
    Ok(())
}

/// A receiving stream checks the window clamp after every read until it has read this much (see
/// [`DrsStream::reclamp`]); from then on once per sampling interval. On the 40 ms, 0.1 % loss lab path 48 `-p auto`
/// joiners with a 128 KiB clamp advertised ~320 KB each for their first RTTs (the kernel's clamp was 2.5x DRS's
/// from the first segment until the first interval ended).
const EARLY_RECLAMP_BYTES: u64 = 1 << 20;

/// Rows a [`DrsStream`] keeps by default (about 1.2 MB); see [`TraceLog`].
pub const DRS_TRACE_ROWS: usize = 16 * 1024;

/// Receiving end of one data stream.
#[derive(Debug)]
pub struct DrsStream {
    apply: bool,
    knob: DrsKnob,
    rx: DrsReceiver,
    limits: BufLimits,
    start: Instant,
    next_info: Instant,
    bytes: u64,
    trace: TraceLog,
    applied: Vec<u64>,
    reclamped: u64,
    /// SO_RCVBUF as last set (the kernel's halved view), 0 until first needed.
    rcvbuf: u64,
}

impl DrsStream {
    /// `policy` Drs applies SO_RCVBUF; Kernel/Fixed only observe (trace, RTT) without touching the buffer.
    pub fn new(now: Instant, policy: BufferPolicy, cfg: DrsConfig, limits: BufLimits) -> Self {
        let apply = policy == BufferPolicy::Drs;
        let cfg = if apply {
            cfg
        } else {
            DrsConfig {
                probes: false,
                ..cfg
            }
        };
        DrsStream {
            apply,
            knob: DrsKnob::WindowClamp,
            rx: DrsReceiver::new(now, cfg),
            limits,
            start: now,
            next_info: now,
            bytes: 0,
            trace: TraceLog::new(Duration::ZERO, DRS_TRACE_ROWS),
            applied: vec![],
            reclamped: 0,
            rcvbuf: 0,
        }
    }

    /// Call after every read of `n` payload bytes from `fd`. Returns in-band actions the engine must send
    /// (only `SendSbufProbe`, and only if probes were enabled because the peer opted in).
    pub fn on_read(&mut self, fd: impl AsFd, now: Instant, n: u64) -> io::Result<Vec<DrsAction>> {
        self.bytes += n;
        self.rx.handle_bytes(now, n);
        self.poll(fd, now)
    }

    /// The transfer now runs `n` parallel streams, moved at most `rate` bytes/s so far, and its streams saw at
    /// least `path_rtt` (see `DrsReceiver::set_transfer`).
    pub fn set_transfer(&mut self, n: u64, rate: u64, path_rtt: Option<Duration>) {
        self.rx.set_transfer(n, rate, path_rtt);
    }

    /// This stream's minimum RTT (see `DrsReceiver::min_rtt`).
    pub fn min_rtt(&self) -> Option<Duration> {
        self.rx.min_rtt()
    }

    /// The peer echoed SBUF probe `id`.
    pub fn on_sbuf_echo(&mut self, now: Instant, id: u64) {
        self.rx.handle_sbuf_echo(now, id);
    }

    /// Timer/poll hook: reads TCP_INFO once per interval and applies pending actions.
    pub fn poll(&mut self, fd: impl AsFd, now: Instant) -> io::Result<Vec<DrsAction>> {
        let fd = fd.as_fd();
        let sampled = now >= self.next_info;
        if sampled {
            let info = tcp_info(fd)?;
            self.rx.handle_tcp_info(now, &sample_of(&info));
            self.next_info = now + self.rx.interval();
            let buffer = if self.apply {
                self.rx.buffer()
            } else {
                info.rcv_space as u64
            };
            self.trace.push(TraceRow {
                t: now.saturating_duration_since(self.start),
                buffer,
                rtt: self.rx.rtt(),
                bdp: self.rx.bdp_estimate(),
                bytes: self.bytes,
                bps: 0.0,
                rcv_wnd: info.rcv_wnd,
                rcv_ssthresh: info.rcv_ssthresh,
                cwnd: info.cwnd_bytes(),
            });
        }
        if self.rx.poll_timeout().is_some_and(|t| now >= t) {
            self.rx.handle_timeout(now);
        }
        let mut out = vec![];
        while let Some(a) = self.rx.poll_action() {
            match a {
                DrsAction::SetRecvBuf(b) if self.apply => {
                    if self.knob == DrsKnob::WindowClamp {
                        self.raise_recv_buf(fd, b)?;
                    }
                    apply_knob(fd, self.knob, &self.limits, b)?;
                    self.applied.push(b);
                }
                DrsAction::SetRecvBuf(_) => {}
                other => out.push(other),
            }
        }
        if sampled || self.early() {
            self.reclamp(fd)?;
        }
        Ok(out)
    }

    /// Whether the window clamp should be checked after every read (see [`Self::reclamp`]): under the clamp knob,
    /// until [`EARLY_RECLAMP_BYTES`] have been read. [`Self::poll`] does so on every call meanwhile; a reader that
    /// reports large chunks at a time (the MODE E reader: 256 KiB) calls [`Self::reclamp`] after each partial read.
    pub fn early(&self) -> bool {
        self.apply && self.knob == DrsKnob::WindowClamp && self.bytes <= EARLY_RECLAMP_BYTES
    }

    /// Put DRS's window clamp back if the kernel lifted it. Linux 6.x re-derives TCP_WINDOW_CLAMP from SO_RCVBUF
    /// when it revises the payload/truesize ratio (tcp_measure_rcv_mss: the first full-sized segment, GRO size
    /// changes), to 2.5x DRS's clamp with SO_RCVBUF at twice it. [`Self::poll`] checks once per sampling interval,
    /// and after every read while [`Self::early`]: the first full-sized segment arrives long before the first
    /// interval ends, and slow start grows the window toward the lifted clamp meanwhile.
    pub fn reclamp(&mut self, fd: impl AsFd) -> io::Result<()> {
        if !self.apply || self.knob != DrsKnob::WindowClamp {
            return Ok(());
        }
        let fd = fd.as_fd();
        let want = self.rx.buffer();
        let cur = sockopt::window_clamp(fd).map_err(io::Error::other)? as u64;
        if cur > want {
            apply_knob(fd, self.knob, &self.limits, want)?;
            self.reclamped += 1;
        }
        Ok(())
    }

    /// Under the clamp knob, keep SO_RCVBUF at least [`rcvbuf_for`] `want` (the clamp about to be set), so the
    /// receive memory never binds below the window; never lowered (a locked buffer shrunk after set-up pins
    /// `rcv_ssthresh`).
    fn raise_recv_buf(&mut self, fd: std::os::fd::BorrowedFd<'_>, want: u64) -> io::Result<()> {
        if self.rcvbuf == 0 {
            self.rcvbuf = (sockopt::recv_buf(fd).map_err(io::Error::other)? / 2) as u64;
        }
        let want = rcvbuf_for(want) as u64;
        if want > self.rcvbuf {
            sockopt::set_buf_best(
                fd,
                Dir::Recv,
                want as usize,
                self.limits.force_cap(Dir::Recv),
            )
            .map_err(io::Error::other)?;
            self.rcvbuf = want;
        }
        Ok(())
    }

    /// Choose how the window is imposed (default [`DrsKnob::WindowClamp`]); must match [`after_connect`].
    pub fn with_knob(mut self, knob: DrsKnob) -> Self {
        self.knob = knob;
        self
    }
    pub fn buffer(&self) -> u64 {
        self.rx.buffer()
    }
    pub fn estimator(&self) -> &DrsReceiver {
        &self.rx
    }
    /// The buffer/RTT/throughput trace (bounded: see [`TraceLog`]).
    pub fn trace(&self) -> &[TraceRow] {
        self.trace.rows()
    }
    /// Keep at most `rows` trace rows (0: no trace; the data engine records its own at a fixed cadence).
    pub fn with_trace_rows(mut self, rows: usize) -> Self {
        self.trace = TraceLog::new(Duration::ZERO, rows);
        self
    }
    /// Every buffer/clamp value DRS decided on and applied, in order.
    pub fn applied(&self) -> &[u64] {
        &self.applied
    }
    /// How often the kernel had lifted the window clamp above DRS's value and it was put back.
    pub fn reclamped(&self) -> u64 {
        self.reclamped
    }
}

/// Sending end of one data stream: applies SBUF requests to SO_SNDBUF and says what to reply.
#[derive(Debug)]
pub struct DrsSendStream {
    tx: DrsSender,
    limits: BufLimits,
    classifier: LimitClassifier,
}

impl DrsSendStream {
    pub fn new(initial: u64, limits: BufLimits, max_buf: u64) -> Self {
        DrsSendStream {
            tx: DrsSender::new(initial, 64 * 1024, max_buf),
            // Every size here is the peer's SBUF request: never FORCE past wmem_max for it.
            limits: BufLimits {
                force: false,
                ..limits
            },
            classifier: LimitClassifier::new(),
        }
    }

    /// Handle an SBUF request (in-band 0x02 or `SBUF <id> <size>`); returns the size to echo (0x01 / `200 SBUF`).
    pub fn on_sbuf_request(
        &mut self,
        fd: impl AsFd,
        now: Instant,
        id: u64,
        size: u64,
    ) -> io::Result<u64> {
        let fd = fd.as_fd();
        let info = tcp_info(fd)?;
        let s = sample_of(&info);
        self.tx.handle_tcp_info(now, &s);
        self.classifier.handle_tcp_info(now, &s);
        self.tx.handle_sbuf_request(now, id, size);
        let mut reply = size;
        while let Some(a) = self.tx.poll_action() {
            match a {
                DrsAction::SetSendBuf(n) => {
                    sockopt::set_buf_best(
                        fd,
                        Dir::Send,
                        n as usize,
                        self.limits.force_cap(Dir::Send),
                    )
                    .map_err(io::Error::other)?;
                }
                DrsAction::SbufReply { size, .. } => reply = size,
                _ => {}
            }
        }
        Ok(reply)
    }

    /// Sample TCP_INFO for the limit classifier (call at the end of a transfer, and periodically if wanted).
    pub fn observe(&mut self, fd: impl AsFd, now: Instant) -> io::Result<()> {
        self.classifier
            .handle_tcp_info(now, &sample_of(&tcp_info(fd)?));
        Ok(())
    }

    /// Which limit bound this stream so far.
    pub fn limits_report(&self) -> Option<LimitReport> {
        self.classifier.report()
    }
}

#[cfg(test)]
mod tests;
