//! MODE E sender: one task per data connection pulls the next block from a shared cursor (faster streams carry
//! more), reads it with a positioned read while the previous block goes out, and writes header + payload from one
//! buffer. Every connection ends with EOD; connection 0 ends with EOF|EOD carrying the connection count. With
//! in-band SBUF negotiated, each connection also reads the reverse direction for SBUF requests, applies them to
//! SO_SNDBUF and answers with an echo header between data blocks.
//!
//! The dynamic variant ([`send_mode_e_dynamic`], for `-p auto`) lets connections join the shared cursor while the
//! transfer runs and retire (finish the block in hand, EOD, stop) on request; the last connection to finish sends
//! EOF|EOD with the number of connections that ever carried the transfer (GFD.20: the receiver counts EODs).
//!
//! Connections may be cleartext or TLS (`PROT P`, [`MaybeTls`]); socket options and TCP_INFO go to the TCP socket
//! beneath through a duplicate of its descriptor, since the stream itself is borrowed for reading and writing.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drsftp_proto::mode_e::{Block, Header, Limits, HEADER_LEN};
use drsftp_proto::ranges::RangeSet;
use drsftp_storage::FileHandle;
use drsftp_tune::BufferPolicy;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinSet;

use super::crc::CrcPieces;
use super::cursor::Cursor;
use super::fileio::{Pending, Placement};
use super::sealed::{add_crc, block_ranges, seal_block, BlockSink, Shared};
use super::sockets::{self, Gauge, GaugeSet, Side};
use super::stream::send_chunk;
use super::trace::StreamTrace;
use super::{DataError, DataOpts, DataReport, Progress};
use crate::drs::TraceRow;
use crate::tls::MaybeTls;

/// What every sending task shares.
#[derive(Debug)]
struct Ctx {
    file: Arc<dyn FileHandle>,
    cursor: Cursor,
    wire_sub: u64,
    ends: Ends,
    chunk: usize,
    opts: DataOpts,
    progress: Arc<Progress>,
    gauges: GaugeSet,
    /// When the transfer started (trace time zero).
    start: Instant,
}

/// Who sends EOF and with which count.
#[derive(Debug)]
enum Ends {
    /// A fixed set of connections: connection 0 sends EOF|EOD announcing this many.
    Fixed(u64),
    /// Connections join and retire while the transfer runs: the last one to finish announces them all.
    Dynamic(SendControl),
}

/// Steers a running [`send_mode_e_dynamic`]: retire connections, watch how many run. One per transfer; clones
/// share the state.
#[derive(Debug, Clone, Default)]
pub struct SendControl(Arc<Mutex<DynState>>);

#[derive(Debug, Default)]
struct DynState {
    /// Connections still taking blocks.
    active: usize,
    /// Connections that joined this transfer (the EOF count).
    used: u64,
    /// Retirements asked for and not yet taken up.
    retire: usize,
    retired: usize,
    /// The last connection finished: nothing can join any more.
    closed: bool,
    /// Each active connection's rate potential (cwnd / smoothed RTT, bytes/s) from its last TCP_INFO reading:
    /// retirements take the weakest connections (see [`SendControl::try_retire`]).
    rates: HashMap<usize, f64>,
}

impl SendControl {
    pub fn new() -> Self {
        Self::default()
    }
    fn state(&self) -> std::sync::MutexGuard<'_, DynState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// Ask `k` running connections to finish the block in hand, send EOD and stop (their sockets come back in
    /// `DataReport::reusable`). One connection always keeps going: requests beyond that are dropped.
    pub fn retire(&self, k: usize) {
        let mut s = self.state();
        s.retire = (s.retire + k).min(s.active.saturating_sub(1));
    }
    /// Connections taking blocks now.
    pub fn active(&self) -> usize {
        self.state().active
    }
    /// Connections that have carried (joined) this transfer so far.
    pub fn used(&self) -> u64 {
        self.state().used
    }
    /// Connections retired so far.
    pub fn retired(&self) -> usize {
        self.state().retired
    }
    /// True once the transfer's last connection finished: connections offered now are not used.
    pub fn is_closed(&self) -> bool {
        self.state().closed
    }
    /// Connection `idx` wants to join; false once closed. It counts as the weakest until its first reading.
    fn join(&self, idx: usize) -> bool {
        let mut s = self.state();
        if s.closed {
            return false;
        }
        s.active += 1;
        s.used += 1;
        s.rates.insert(idx, 0.0);
        true
    }
    /// Connection `idx` read its TCP_INFO: its current rate potential in bytes/s (cwnd / smoothed RTT). Only
    /// active connections are ranked: a connection that has retired still writes its last block and reads
    /// TCP_INFO after it, and must not come back into the ranking (it would count as weaker than every live
    /// connection and block the next retirement for good).
    fn note_rate(&self, idx: usize, rate: f64) {
        if let Some(r) = self.state().rates.get_mut(&idx) {
            *r = rate;
        }
    }
    /// Called by connection `idx` before it takes another block: true if it should retire now. Only the
    /// weakest connections retire: `idx` must be among the `retire` lowest rate potentials of the active
    /// connections (a connection with no reading yet counts as 0; ties go to the lower index). Otherwise the first connections
    /// to reach a block boundary would go, and those are the fastest: a lab run at 100 ms retired the three
    /// streams carrying 90 % of the data and kept four that had never left slow start's aftermath, halving the
    /// transfer's rate for 14 s while they grew.
    fn try_retire(&self, idx: usize) -> bool {
        let mut s = self.state();
        if s.retire == 0 || s.active <= 1 {
            return false;
        }
        let mine = s.rates.get(&idx).copied().unwrap_or(0.0);
        let weaker = s
            .rates
            .iter()
            .filter(|&(&k, &r)| k != idx && (r < mine || (r == mine && k < idx)))
            .count();
        if weaker >= s.retire {
            return false;
        }
        s.retire -= 1;
        s.active -= 1;
        s.retired += 1;
        s.rates.remove(&idx);
        true
    }
    /// A connection found the cursor dry: `Some(count)` if it is the last one, which then sends EOF|EOD.
    fn finish(&self, idx: usize) -> Option<u64> {
        let mut s = self.state();
        s.rates.remove(&idx);
        s.active -= 1;
        s.retire = s.retire.min(s.active.saturating_sub(1));
        if s.active == 0 {
            s.closed = true;
            Some(s.used)
        } else {
            None
        }
    }
}

impl Ctx {
    fn try_retire(&self, idx: usize) -> bool {
        match &self.ends {
            Ends::Fixed(_) => false,
            Ends::Dynamic(c) => {
                let r = c.try_retire(idx);
                if r {
                    self.progress.set_streams(c.active() as u64);
                }
                r
            }
        }
    }
    /// The header connection `idx` ends its part with.
    fn last_header(&self, idx: usize, retired: bool) -> Header {
        match &self.ends {
            Ends::Fixed(n) if idx == 0 => Header::eof(*n),
            Ends::Fixed(_) => Header::eod(),
            Ends::Dynamic(_) if retired => Header::eod(),
            Ends::Dynamic(c) => match c.finish(idx) {
                Some(n) => Header::eof(n),
                None => {
                    self.progress.set_streams(c.active() as u64);
                    Header::eod()
                }
            },
        }
    }
}

/// What one connection sent.
struct Sent {
    idx: usize,
    sock: MaybeTls,
    ranges: RangeSet,
    trace: Vec<TraceRow>,
    crc: CrcPieces,
}

/// MODE E: send `ranges` of `file` over `socks`; block offsets on the wire are `file offset - wire_sub`
/// (ERET sends offsets relative to the section start).
///
/// Ranges are merged and clipped to the file's length when the transfer starts (`u64::MAX` ends = to EOF); if the
/// file shrinks while being sent, the transfer stops at the new EOF. Every socket ends with EOD, socket 0 with
/// EOF|EOD announcing `socks.len()` EODs; all sockets are returned in `reusable`, in the order given. A range
/// starting before `wire_sub`, or no sockets, is `DataError::Io(InvalidInput)`.
pub async fn send_mode_e(
    socks: Vec<impl Into<MaybeTls>>,
    file: Arc<dyn FileHandle>,
    ranges: Vec<Range<u64>>,
    wire_sub: u64,
    opts: &DataOpts,
    progress: Arc<Progress>,
) -> Result<DataReport, DataError> {
    let n = socks.len();
    let ctx = context(
        n,
        file,
        ranges,
        wire_sub,
        opts,
        &progress,
        Ends::Fixed(n as u64),
    )
    .await?;
    progress.set_streams(n as u64);
    let mut set = JoinSet::new();
    for (idx, sock) in socks.into_iter().enumerate() {
        set.spawn(send_one(idx, sock.into(), Arc::clone(&ctx)));
    }
    let mut done = Done::default();
    while let Some(j) = set.join_next().await {
        // The first failure returns at once; dropping `set` aborts the other streams.
        done.add(j.map_err(|e| super::join_error("send", e))??);
    }
    Ok(done.report(n, vec![], &ctx))
}

/// MODE E with a changing set of connections (`-p auto`): starts on `socks` (at least one); every connection
/// arriving on `more` joins the shared block cursor at once; `control.retire(k)` makes `k` connections finish the
/// block in hand, send EOD and stop (one always stays). The last connection to finish sends EOF|EOD announcing
/// every connection that joined (`DataReport::streams`). Connections offered after that are not used and come
/// back in `reusable` after the others (which are in joining order, retired ones included). Otherwise as
/// [`super::send_mode_e`]. `control` must be fresh (one per transfer).
#[allow(clippy::too_many_arguments)]
pub async fn send_mode_e_dynamic<S: Into<MaybeTls> + Send + 'static>(
    socks: Vec<S>,
    mut more: mpsc::Receiver<S>,
    control: SendControl,
    file: Arc<dyn FileHandle>,
    ranges: Vec<Range<u64>>,
    wire_sub: u64,
    opts: &DataOpts,
    progress: Arc<Progress>,
) -> Result<DataReport, DataError> {
    if control.used() != 0 || control.is_closed() {
        return Err(DataError::Io(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a SendControl steers one transfer only",
        )));
    }
    let ends = Ends::Dynamic(control.clone());
    let ctx = context(socks.len(), file, ranges, wire_sub, opts, &progress, ends).await?;
    let mut set = JoinSet::new();
    let mut idx = 0;
    // Count every initial connection in before any starts: a fast first stream could otherwise find the cursor
    // dry, see itself as the last one and send EOF with too small a count while the others still send EOD.
    for i in 0..socks.len() {
        control.join(i);
    }
    for sock in socks {
        set.spawn(send_one(idx, sock.into(), Arc::clone(&ctx)));
        idx += 1;
    }
    progress.set_streams(control.active() as u64);
    let mut done = Done::default();
    let mut unused = vec![];
    let mut open = true;
    // Every connection either retires (one always stays) or finishes; the last to finish closes the transfer, so
    // an empty set means it is complete.
    while !set.is_empty() {
        tokio::select! {
            s = more.recv(), if open => match s {
                Some(sock) if control.join(idx) => {
                    tracing::debug!(idx, "MODE E connection joins the transfer");
                    set.spawn(send_one(idx, sock.into(), Arc::clone(&ctx)));
                    idx += 1;
                    progress.set_streams(control.active() as u64);
                }
                Some(sock) => unused.push(sock.into()),
                None => open = false,
            },
            Some(j) = set.join_next() => {
                done.add(j.map_err(|e| super::join_error("send", e))??);
            }
        }
    }
    // Offered too late: never carried anything, so as good as new.
    more.close();
    while let Ok(s) = more.try_recv() {
        unused.push(s.into());
    }
    Ok(done.report(idx, unused, &ctx))
}

/// Validate and clip `ranges` and build the state every connection shares.
async fn context(
    n: usize,
    file: Arc<dyn FileHandle>,
    ranges: Vec<Range<u64>>,
    wire_sub: u64,
    opts: &DataOpts,
    progress: &Arc<Progress>,
    ends: Ends,
) -> Result<Arc<Ctx>, DataError> {
    if n == 0 {
        return Err(DataError::Io(io::Error::new(
            io::ErrorKind::InvalidInput,
            "MODE E send needs at least one data connection",
        )));
    }
    let mut want: RangeSet = ranges.into_iter().collect();
    if let Some(r) = want.ranges().first() {
        if r.start < wire_sub {
            return Err(DataError::Io(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "range starts at {} before the section start {wire_sub}",
                    r.start
                ),
            )));
        }
        // Clip to the file as it is now ("to EOF" ranges end at u64::MAX); a later shrink is caught by short reads.
        let f = Arc::clone(&file);
        let len = tokio::task::spawn_blocking(move || f.len())
            .await
            .map_err(|e| DataError::Io(io::Error::other(e)))??;
        want = want
            .ranges()
            .iter()
            .map(|r| r.start..r.end.min(len))
            .collect();
    }
    let chunk = send_chunk(opts);
    Ok(Arc::new(Ctx {
        file,
        cursor: Cursor::new(&want, chunk),
        wire_sub,
        ends,
        chunk,
        opts: opts.clone(),
        gauges: GaugeSet::new(Arc::clone(progress)),
        progress: Arc::clone(progress),
        start: Instant::now(),
    }))
}

/// What the finished connections sent, by connection index.
#[derive(Default)]
struct Done {
    sent: RangeSet,
    socks: Vec<Option<MaybeTls>>,
    traces: Vec<Vec<TraceRow>>,
    crc: CrcPieces,
}

impl Done {
    fn add(&mut self, s: Sent) {
        self.sent.extend(&s.ranges);
        self.crc.extend(s.crc);
        if self.socks.len() <= s.idx {
            self.socks.resize_with(s.idx + 1, || None);
            self.traces.resize_with(s.idx + 1, Vec::new);
        }
        self.socks[s.idx] = Some(s.sock);
        self.traces[s.idx] = s.trace;
    }
    fn report(self, streams: usize, unused: Vec<MaybeTls>, ctx: &Ctx) -> DataReport {
        tracing::debug!(bytes = self.sent.covered(), streams, "MODE E send complete");
        DataReport {
            bytes: self.sent.covered(),
            streams,
            ranges: self.sent,
            reusable: self.socks.into_iter().flatten().chain(unused).collect(),
            peak_buffer: ctx.gauges.peak(),
            peak_window: 0,
            traces: if ctx.opts.trace { self.traces } else { vec![] },
            crc32c: if ctx.opts.crc32c {
                self.crc.whole()
            } else {
                None
            },
        }
    }
}

/// Echo replies waiting to be written before the next data block, and the signal that writing is over.
#[derive(Debug, Default)]
struct Reverse {
    echoes: Mutex<VecDeque<Header>>,
    done: Notify,
}

async fn send_one(idx: usize, mut sock: MaybeTls, ctx: Arc<Ctx>) -> Result<Sent, DataError> {
    // The stream is borrowed for I/O below; socket options and TCP_INFO use this duplicate of its descriptor.
    let fd = sock.tcp().as_fd().try_clone_to_owned()?;
    let (ranges, trace, crc) = if !ctx.opts.inband_sbuf {
        write_blocks(idx, &mut sock, fd.as_fd(), &ctx, None).await?
    } else if let MaybeTls::Plain(tcp) = &mut sock {
        let (rd, mut wr) = tcp.split();
        with_requests(idx, rd, &mut wr, fd.as_fd(), &ctx).await?
    } else {
        // TLS has one state for both directions: the halves share it (one task polls both).
        let shared = Shared::new(sock);
        let r = with_requests(idx, shared.half(), &mut shared.half(), fd.as_fd(), &ctx).await;
        sock = shared.into_inner();
        r?
    };
    Ok(Sent {
        idx,
        sock,
        ranges,
        trace,
        crc,
    })
}

type Moved = (RangeSet, Vec<TraceRow>, CrcPieces);

/// The data path and, next to it in the same task, the reverse direction's SBUF requests (in-band SBUF).
async fn with_requests<R, W>(
    idx: usize,
    rd: R,
    wr: &mut W,
    fd: BorrowedFd<'_>,
    ctx: &Ctx,
) -> Result<Moved, DataError>
where
    R: AsyncRead + Unpin,
    W: BlockSink,
{
    let rev = Reverse::default();
    let writer = async {
        let r = write_blocks(idx, wr, fd, ctx, Some(&rev)).await;
        rev.done.notify_one();
        r
    };
    // A broken reverse direction fails the stream at once (the writer is dropped mid-block with the socket).
    Ok(tokio::try_join!(writer, read_requests(rd, fd, ctx, &rev))?.0)
}

/// TCP_NOTSENT_LOWAT on connections of a dynamic (`-p auto`) send: at most 8 ms of unsent data at 1 Gbit/s, the
/// setting at connect; then what the connection itself moves in `LOWAT_TIME` (cwnd / smoothed RTT), at least
/// `LOWAT_MIN`. A fixed 1 MiB let each of 64 loss-limited streams at 100 ms (~5 Mbit/s) hold ~1.2 MiB of unsent
/// data plus a block when the file ran out, which they drained for ~1 s at a fraction of the path's rate.
const NOTSENT_LOWAT: usize = 1 << 20;
const LOWAT_MIN: usize = 128 << 10;
const LOWAT_TIME: f64 = 0.05;

/// The NOTSENT_LOWAT for a connection moving `rate` bytes/s, capped at `max` (see [`NOTSENT_LOWAT`]).
fn lowat_for(rate: f64, max: usize) -> usize {
    ((rate * LOWAT_TIME) as usize).clamp(LOWAT_MIN, max.max(LOWAT_MIN))
}

/// The data path of one connection: blocks until the cursor runs dry (or the connection is retired: after the
/// block in hand), then EOD or EOF|EOD.
async fn write_blocks<W: BlockSink>(
    idx: usize,
    wr: &mut W,
    fd: BorrowedFd<'_>,
    ctx: &Ctx,
    rev: Option<&Reverse>,
) -> Result<Moved, DataError> {
    let mut gauge: Gauge = ctx.gauges.stream();
    let mut trace = StreamTrace::new(ctx.opts.trace, ctx.start);
    let mut retired = false;
    // Under TLS (our record layer) blocks are read straight into record slots and sealed where they lie.
    let shape = wr.shape();
    let buf_len = shape.map_or(HEADER_LEN + ctx.chunk, |s| {
        s.buffer_len(HEADER_LEN + ctx.chunk)
    });
    let mut spare: Option<Vec<u8>> = None;
    let mut place = Placement::default();
    let next_read = |spare: &mut Option<Vec<u8>>,
                     place: &mut Placement|
     -> Option<(u64, usize, Pending<usize>)> {
        let streams = match &ctx.ends {
            Ends::Fixed(n) => *n as usize,
            Ends::Dynamic(c) => c.active(),
        };
        let (off, n) = ctx.cursor.next(streams)?;
        let buf = spare.take().unwrap_or_else(|| vec![0u8; buf_len]);
        let read = match shape {
            Some(s) => place.read_shaped(&ctx.file, buf, s, HEADER_LEN..HEADER_LEN + n, off),
            None => place.read(&ctx.file, buf, HEADER_LEN..HEADER_LEN + n, off),
        };
        Some((off, n, read))
    };
    let mut sent = RangeSet::new();
    let mut crc = CrcPieces::default();
    let mut pending = next_read(&mut spare, &mut place);
    let mut tcp_last = [0u64; 3];
    let lowat_max = NOTSENT_LOWAT.max(2 * ctx.chunk);
    let mut lowat = 0;
    if matches!(ctx.ends, Ends::Dynamic(_)) {
        // Connections come and go (`-p auto`): keep what is committed to this connection but not yet sent small,
        // so blocks go to the connections that move them and the tail does not wait for a slow stream to drain
        // megabytes of autotuned send buffer (seen: 8 s of tail at 64 loss-limited streams). Best effort.
        if drsftp_sys::sockopt::set_notsent_lowat(fd, lowat_max).is_ok() {
            lowat = lowat_max;
        }
    }
    while let Some((off, want, p)) = pending.take() {
        let (mut buf, got) = p.wait().await?;
        if got < want {
            ctx.cursor.hit_eof(off + got as u64);
        }
        if ctx.opts.crc32c {
            // Just read: still in cache. These are the bytes that go out.
            add_crc(&mut crc, shape, &buf, HEADER_LEN..HEADER_LEN + got, off);
        }
        // Read ahead while this block goes out (unless this connection retires after it).
        retired = retired || ctx.try_retire(idx);
        if !retired {
            pending = next_read(&mut spare, &mut place);
        }
        if let Some(rev) = rev {
            write_echoes(wr, rev).await?;
        }
        if got > 0 {
            let header = Header::data(off - ctx.wire_sub, got as u64).encode();
            let mut from = 0;
            for r in block_ranges(shape, 0..HEADER_LEN) {
                let n = r.len();
                buf[r].copy_from_slice(&header[from..from + n]);
                from += n;
            }
            if shape.is_some() {
                buf = seal_block(wr, buf, HEADER_LEN + got, buf_len).await?;
            } else {
                wr.write_all(&buf[..HEADER_LEN + got]).await?;
            }
            let r = off..off + got as u64;
            ctx.progress.add(r.clone());
            sent.insert(r);
            let now = Instant::now();
            if let Ok(i) = drsftp_sys::tcp_info::tcp_info(fd) {
                ctx.progress.add_tcp_info(&mut tcp_last, &i);
                if let (Ends::Dynamic(c), false) = (&ctx.ends, i.rtt.is_zero()) {
                    let rate = i.cwnd_bytes() as f64 / i.rtt.as_secs_f64();
                    c.note_rate(idx, rate);
                    // Follow the connection's rate within a factor of 2 (one setsockopt per change).
                    let want = lowat_for(rate, lowat_max);
                    if lowat > 0
                        && (want >= 2 * lowat || 2 * want <= lowat)
                        && drsftp_sys::sockopt::set_notsent_lowat(fd, want).is_ok()
                    {
                        lowat = want;
                    }
                }
            }
            gauge.sample(fd, now, ctx.opts.buffer, Side::Send, None);
            let buffer = gauge.current();
            trace.sample(fd, now, got as u64, Side::Send, buffer, None);
        }
        spare = Some(buf);
        if rev.is_some() {
            // The reverse reader shares this task (try_join): let it look at the socket between blocks even when
            // the socket always has room and the writer would otherwise never return Pending.
            tokio::task::yield_now().await;
        }
    }
    if let Some(rev) = rev {
        write_echoes(wr, rev).await?;
    }
    let last = ctx.last_header(idx, retired);
    wr.write_all(&last.encode()).await?;
    wr.flush().await?;
    Ok((sent, trace.finish(), crc))
}

async fn write_echoes<W: AsyncWrite + Unpin>(wr: &mut W, rev: &Reverse) -> Result<(), DataError> {
    loop {
        let h = rev
            .echoes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front();
        match h {
            Some(h) => wr.write_all(&h.encode()).await?,
            None => return Ok(()),
        }
    }
}

/// How long to wait for the rest of a reverse header that had started arriving when the data path finished.
const TAIL_WAIT: Duration = Duration::from_secs(1);

/// The reverse direction of one connection (in-band SBUF only): SBUF requests from the receiver are applied to
/// SO_SNDBUF and queued as echoes. Ends when the data path is done (or the peer stops writing).
async fn read_requests<R: AsyncRead + Unpin>(
    mut rd: R,
    fd: BorrowedFd<'_>,
    ctx: &Ctx,
    rev: &Reverse,
) -> Result<(), DataError> {
    let limits = Limits {
        max_block: 0,
        max_end: 0,
        max_eod_count: 0,
        sbuf: true,
    };
    let mut tx: Option<crate::drs::DrsSendStream> = None;
    let mut hdr = [0u8; HEADER_LEN];
    let mut filled = 0;
    let mut finished = false;
    loop {
        let n = if filled == 0 {
            if finished {
                return Ok(());
            }
            tokio::select! {
                biased;
                _ = rev.done.notified() => return Ok(()),
                r = rd.read(&mut hdr) => r?,
            }
        } else if finished {
            match tokio::time::timeout(TAIL_WAIT, rd.read(&mut hdr[filled..])).await {
                Ok(r) => r?,
                Err(_) => return Ok(()),
            }
        } else {
            tokio::select! {
                biased;
                _ = rev.done.notified() => { finished = true; continue; }
                r = rd.read(&mut hdr[filled..]) => r?,
            }
        };
        if n == 0 {
            // The receiver will not write again; the data path is unaffected.
            return Ok(());
        }
        filled += n;
        if filled < HEADER_LEN {
            continue;
        }
        filled = 0;
        let h = Header::decode(&hdr);
        match h.classify(&limits)? {
            Block::SbufRequest { size, id } if !finished => {
                let reply = if let BufferPolicy::Fixed(_) = ctx.opts.buffer {
                    // The user pinned our buffers: report them, change nothing.
                    (drsftp_sys::sockopt::send_buf(fd).map_err(io::Error::other)? / 2) as u64
                } else {
                    let t = match tx.as_mut() {
                        Some(t) => t,
                        None => {
                            let now_buf = (drsftp_sys::sockopt::send_buf(fd)
                                .map_err(io::Error::other)?
                                / 2) as u64;
                            tx.insert(crate::drs::DrsSendStream::new(
                                now_buf,
                                sockets::limits(&ctx.opts)?,
                                ctx.opts.drs_max,
                            ))
                        }
                    };
                    t.on_sbuf_request(fd, Instant::now(), id, size)?
                };
                rev.echoes
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push_back(Header::sbuf_echo(reply, id));
            }
            Block::SbufRequest { .. } => {}
            // Anything else has no business on the reverse direction.
            Block::SbufEcho { .. } | Block::Data { .. } => {
                return Err(DataError::Header(
                    drsftp_proto::mode_e::HeaderError::Unsupported(h.descriptor),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{lowat_for, SendControl};

    #[test]
    fn lowat_follows_the_connections_rate_within_bounds() {
        // A loss-limited stream at 100 ms (5 Mbit/s): the floor. 100 Mbit/s: 50 ms of it. 1 Gbit/s: the cap.
        assert_eq!(lowat_for(5e6 / 8.0, 1 << 20), 128 << 10);
        assert_eq!(lowat_for(100e6 / 8.0, 1 << 20), 625_000);
        assert_eq!(lowat_for(1e9 / 8.0, 1 << 20), 1 << 20);
        // A block larger than the cap raises the cap (2 blocks), never the floor.
        assert_eq!(lowat_for(1e9 / 8.0, 8 << 20), 6_250_000);
    }

    /// Four connections; two retirements asked for. Connections reach block boundaries fastest-first (0, 1, 2,
    /// 3 by rate): only the two weakest (2 and 3) may retire, whoever asks first.
    #[test]
    fn retirement_takes_the_weakest_connections() {
        let c = SendControl::new();
        for (idx, rate) in [(0, 60e6), (1, 30e6), (2, 2e6), (3, 1e6)] {
            assert!(c.join(idx));
            c.note_rate(idx, rate);
        }
        c.retire(2);
        assert!(!c.try_retire(0));
        assert!(!c.try_retire(1));
        assert!(c.try_retire(2));
        // One retirement left: now only the weakest remaining (3) qualifies.
        assert!(!c.try_retire(1));
        assert!(c.try_retire(3));
        assert_eq!((c.active(), c.retired()), (2, 2));
        assert!(!c.try_retire(0), "nothing left to retire");
        // A retired connection's late reading (after its last block) does not bring it back into the ranking.
        c.note_rate(3, 0.5);
        c.retire(1);
        assert!(c.try_retire(1), "1 is the weakest live connection");
        assert_eq!((c.active(), c.retired()), (1, 3));
        // A connection that has no reading yet (just joined) counts as the weakest.
        assert!(c.join(4));
        c.retire(1);
        assert!(!c.try_retire(0));
        assert!(c.try_retire(4));
    }

    /// The last active connection never retires, whatever its rate.
    #[test]
    fn the_last_connection_keeps_going() {
        let c = SendControl::new();
        assert!(c.join(0));
        c.note_rate(0, 1.0);
        c.retire(5);
        assert!(!c.try_retire(0));
        assert_eq!(c.finish(0), Some(1));
    }
}
