//! Data-socket set-up (buffer policy applied before listen/connect, DRS buffer raise and start-up after set-up) and the per-stream
//! buffer gauge that feeds `Progress::buffer` and the transfer's peak.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use drsftp_sys::sockopt::{self, BufLimits};
use drsftp_tune::{BufferPolicy, DrsConfig};
use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

use super::{DataOpts, Progress};
use crate::drs::{self, DrsKnob, DrsStream};

/// How long [`connect`] waits for the TCP handshake.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Listen backlog for data listeners (many parallel streams may connect at once).
const BACKLOG: i32 = 128;

/// How often a stream re-reads its buffer size (TCP_INFO / getsockopt) for the gauge.
const GAUGE_INTERVAL: Duration = Duration::from_millis(100);
/// How often a receiving stream re-reads its advertised window (TCP_INFO `rcv_wnd`) for the window meter.
const WINDOW_INTERVAL: Duration = Duration::from_millis(20);

/// The namespace's buffer limits, as an `io::Error` on failure. Read on every call: values are per network
/// namespace, and a socket set-up is rare enough that four small /proc reads do not matter. FORCE past
/// rmem_max/wmem_max only when the sizes are not a peer's request ([`DataOpts::peer_buffers`]).
pub(crate) fn limits(opts: &DataOpts) -> io::Result<BufLimits> {
    let mut l = sockopt::buf_limits().map_err(io::Error::other)?;
    l.force &= !opts.peer_buffers;
    Ok(l)
}

fn new_socket(addr: SocketAddr, opts: &DataOpts) -> io::Result<Socket> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if let Some(cc) = &opts.congestion {
        sockopt::set_congestion(&s, cc).map_err(io::Error::other)?;
    }
    if opts.buffer != BufferPolicy::Kernel {
        drs::prepare_socket(&s, opts.buffer, &limits(opts)?, opts.drs_max)?;
    }
    Ok(s)
}

/// A data listener on `addr` (port 0 = any) with `opts.buffer` applied before `listen` (window scale).
/// SO_REUSEADDR, backlog 128.
pub async fn listen(addr: SocketAddr, opts: &DataOpts) -> io::Result<TcpListener> {
    let s = new_socket(addr, opts)?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    s.listen(BACKLOG)?;
    s.set_nonblocking(true)?;
    TcpListener::from_std(s.into())
}

/// A data connection to `addr` with `opts.buffer` applied before `connect`. Fails with `TimedOut` after 30 s.
pub async fn connect(addr: SocketAddr, opts: &DataOpts) -> io::Result<TcpStream> {
    let s = new_socket(addr, opts)?;
    s.set_nonblocking(true)?;
    let sock = TcpSocket::from_std_stream(s.into());
    match tokio::time::timeout(CONNECT_TIMEOUT, sock.connect(addr)).await {
        Ok(r) => r,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("data connection to {addr} timed out"),
        )),
    }
}

/// One data connection to each of `addrs`, all opened at once and returned in the order of `addrs`. Opened one
/// after another, P connections cost P round trips before the transfer moves: at 100 ms a `-p auto` download's 4
/// streams arrived 0.1, 0.2, 0.3 and 0.4 s after its `125`, and its data began only with the last.
pub async fn connect_each(addrs: &[SocketAddr], opts: &DataOpts) -> io::Result<Vec<TcpStream>> {
    let mut set = tokio::task::JoinSet::new();
    for (i, a) in addrs.iter().copied().enumerate() {
        let opts = opts.clone();
        set.spawn(async move { (i, connect(a, &opts).await) });
    }
    let mut socks: Vec<Option<TcpStream>> = addrs.iter().map(|_| None).collect();
    while let Some(r) = set.join_next().await {
        let (i, s) = r.map_err(|e| io::Error::other(e.to_string()))?;
        socks[i] = Some(s?);
    }
    Ok(socks.into_iter().flatten().collect())
}

/// DRS's starting window for a connection that does not join a running transfer. A smaller start leaves the sender
/// receive-window bound while slow start outruns the window (one sampling interval of lag per doubling); 1 MiB
/// keeps up with slow start on long paths at the same mean window (docs/drs.md).
const FIRST_INITIAL: u64 = 1 << 20;

/// The most a joining connection starts at (less if the running streams' average is less). Loss-limited streams
/// settle far below it, and a larger start lets dozens of joiners alone hold as much memory as a whole
/// fixed-buffer grid case of the same throughput (docs/drs.md §4.5).
const JOIN_MAX_INITIAL: u64 = 128 << 10;

/// Receiving side, per connection: under `Drs`, impose DRS's starting window and learn the ceiling it may grow to
/// (both in [`drs::after_connect`]), and return the stream driver; for
/// the other policies `None` (the gauge observes the kernel instead). `probes`: in-band SBUF probes may be sent.
/// `joining`: the average DRS buffer of the transfer's streams already running, for a MODE E connection that
/// joins a running transfer (`-p auto` adding streams); it starts at the smaller of that and [`JOIN_MAX_INITIAL`]
/// (a first connection at [`FIRST_INITIAL`]), and the socket's clamp starts there too.
pub(crate) fn start_drs(
    sock: &TcpStream,
    opts: &DataOpts,
    probes: bool,
    joining: Option<u64>,
) -> io::Result<Option<DrsStream>> {
    if opts.buffer != BufferPolicy::Drs {
        return Ok(None);
    }
    let limits = limits(opts)?;
    let base = DrsConfig {
        min_buf: drs::min_buf_for(sock, DrsConfig::default().min_buf),
        ..DrsConfig::default()
    };
    // The socket's first clamp is DRS's first window, so a joiner does not advertise more than DRS counts.
    let initial = joining
        .map_or(FIRST_INITIAL, |j| j.min(JOIN_MAX_INITIAL))
        .max(base.min_buf);
    // The ceiling actually in force: min(drs_max, 65535 << rcv_wscale), less if FORCE was refused.
    let ceiling = drs::after_connect(
        sock,
        BufferPolicy::Drs,
        &limits,
        opts.drs_max,
        initial,
        DrsKnob::WindowClamp,
    )?;
    let max_buf = ceiling.max(base.min_buf);
    let initial = initial.min(max_buf);
    let cfg = DrsConfig {
        probes,
        max_buf,
        initial_buf: initial,
        ..base
    };
    // The engine keeps its own, fixed-cadence trace (`super::trace`).
    Ok(Some(
        DrsStream::new(Instant::now(), BufferPolicy::Drs, cfg, limits).with_trace_rows(0),
    ))
}

/// Shared by every stream of one transfer: the live buffer sum lives in `Progress::buffer`, the peak here; and the
/// window meter: the sum of the receiving sockets' advertised windows (TCP_INFO `rcv_wnd`, what the kernel has
/// promised the senders, the same meter for every buffer policy) and its peak.
#[derive(Debug, Clone)]
pub(crate) struct GaugeSet {
    progress: Arc<Progress>,
    peak: Arc<AtomicU64>,
    window: Arc<AtomicU64>,
    window_peak: Arc<AtomicU64>,
}

impl GaugeSet {
    pub(crate) fn new(progress: Arc<Progress>) -> Self {
        GaugeSet {
            progress,
            peak: Arc::new(AtomicU64::new(0)),
            window: Arc::new(AtomicU64::new(0)),
            window_peak: Arc::new(AtomicU64::new(0)),
        }
    }
    pub(crate) fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }
    /// Largest sum of advertised receive windows seen (0 for a sending side).
    pub(crate) fn window_peak(&self) -> u64 {
        self.window_peak.load(Ordering::Relaxed)
    }
    pub(crate) fn stream(&self) -> Gauge {
        let now = Instant::now();
        Gauge {
            set: self.clone(),
            cur: 0,
            next: now,
            win: 0,
            win_next: now,
            rx_last: [0; 2],
        }
    }
}

/// One stream's contribution to the buffer gauge and window meter; removed again when dropped (the stream ended).
#[derive(Debug)]
pub(crate) struct Gauge {
    set: GaugeSet,
    cur: u64,
    next: Instant,
    win: u64,
    win_next: Instant,
    /// This stream's last TCP_INFO totals handed to `Progress::add_rx_info`.
    rx_last: [u64; 2],
}

/// Which buffer a stream reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Recv,
    Send,
}

impl Gauge {
    /// This stream's buffer as last recorded.
    pub(crate) fn current(&self) -> u64 {
        self.cur
    }

    /// Record this stream's buffer as `v` bytes.
    pub(crate) fn set(&mut self, v: u64) {
        if v == self.cur {
            return;
        }
        let p = &self.set.progress;
        p.add_buffer(v as i64 - self.cur as i64);
        self.cur = v;
        self.set.peak.fetch_max(p.buffer(), Ordering::Relaxed);
    }

    /// Re-read the buffer from the socket at most every [`GAUGE_INTERVAL`]: DRS's value if a driver runs, else
    /// SO_RCVBUF for `Fixed`, TCP_INFO rcv_space for `Kernel` (receiving), SO_SNDBUF (sending).
    pub(crate) fn sample(
        &mut self,
        fd: impl AsFd,
        now: Instant,
        policy: BufferPolicy,
        side: Side,
        drs: Option<&DrsStream>,
    ) {
        if side == Side::Recv && now >= self.win_next {
            self.win_next = now + WINDOW_INTERVAL;
            if let Ok(i) = drsftp_sys::tcp_info::tcp_info(fd.as_fd()) {
                self.set_window(i.rcv_wnd as u64);
                self.set.progress.add_rx_info(&mut self.rx_last, &i);
            }
        }
        if let Some(d) = drs {
            self.set(d.buffer());
            return;
        }
        if now < self.next {
            return;
        }
        self.next = now + GAUGE_INTERVAL;
        let v = match (side, policy) {
            (Side::Send, _) => sockopt::send_buf(fd).ok().map(|b| b as u64 / 2),
            (Side::Recv, BufferPolicy::Kernel) => drsftp_sys::tcp_info::tcp_info(fd)
                .ok()
                .map(|i| i.rcv_space as u64),
            (Side::Recv, _) => sockopt::recv_buf(fd).ok().map(|b| b as u64 / 2),
        };
        if let Some(v) = v {
            self.set(v);
        }
    }
}

impl Gauge {
    fn set_window(&mut self, v: u64) {
        let w = &self.set.window;
        let sum = if v >= self.win {
            w.fetch_add(v - self.win, Ordering::Relaxed) + (v - self.win)
        } else {
            w.fetch_sub(self.win - v, Ordering::Relaxed) - (self.win - v)
        };
        self.win = v;
        self.set.window_peak.fetch_max(sum, Ordering::Relaxed);
    }
}

impl Drop for Gauge {
    fn drop(&mut self) {
        self.set.progress.add_buffer(-(self.cur as i64));
        self.set.window.fetch_sub(self.win, Ordering::Relaxed);
    }
}
