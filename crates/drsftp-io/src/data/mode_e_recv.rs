//! MODE E receiver: a reader task per data connection (connections arrive on a channel: fresh accepts and/or
//! cached sockets) validates every header against `Limits`, reads payloads in bounded chunks and writes them at
//! their offsets while the next chunk arrives, and ends its part at EOD. The transfer ends as soon as EOF was
//! seen and the number of EODs equals the announced count: no waiting for TCP EOF or for the channel to close.
//! A striped transfer ([`recv_mode_e_striped`]) counts per stripe: each stripe's EOF announces its own EODs.
//! Connections that ended with EOD and no CLOSE (and any that never carried a header) are returned for reuse.
//! A connection may be cleartext or TLS (`PROT P`, [`MaybeTls`]): DRS, gauges and traces use the TCP socket beneath.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use drsftp_proto::mode_e::{Block, Header, HeaderError, Limits, HEADER_LEN};
use drsftp_proto::ranges::RangeSet;
use drsftp_storage::FileHandle;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use super::crc::CrcPieces;
use super::fileio::{Pending, Placement};
use super::sockets::{self, Gauge, GaugeSet, Side};
use super::trace::StreamTrace;
use super::{DataError, DataOpts, DataReport, Progress};
use crate::tls::MaybeTls;

/// Largest payload chunk read before it is written to the file: bounds memory per connection (two chunks)
/// whatever count a header announces, and keeps the chunk cache-hot between the socket read and the file write.
pub(crate) const CHUNK: usize = super::stream::RECV_CHUNK;

/// Most disjoint byte ranges a transfer may leave open at once. Real senders' blocks merge into a handful of
/// ranges (about one per stream); a peer that scatters tiny blocks with gaps between them would otherwise grow
/// the range sets and every `111` marker without bound, so the transfer fails (426) instead.
pub(crate) const MAX_RANGES: usize = 16_384;

/// After the last EOD, how long connections that are idle or mid-way may take to hand their sockets back.
const DRAIN: Duration = Duration::from_millis(200);

/// What every reader shares.
#[derive(Debug)]
struct Ctx {
    file: Arc<dyn FileHandle>,
    wire_add: u64,
    limits: Limits,
    opts: DataOpts,
    progress: Arc<Progress>,
    gauges: GaugeSet,
    /// When the transfer started (trace time zero).
    start: Instant,
    /// Payload bytes read by all connections, and the highest rate (bytes/s) over any [`RATE_WINDOW`] so far:
    /// what DRS splits among the streams (`DrsReceiver::set_transfer`).
    read: AtomicU64,
    top_rate: AtomicU64,
    /// The lowest RTT (microseconds) any connection's DRS saw: the path's, before streams that joined later
    /// filled it with a queue (`DrsReceiver::set_transfer`). `u64::MAX`: none yet.
    path_rtt_us: AtomicU64,
}

/// The transfer's rate meter (see `Ctx::top_rate`) reads the rate over the last `RATE_WINDOW` every `RATE_TICK`.
/// A shorter window reads a path's bursts as rate above the link (inflating many streams' shares); periods read
/// only at their end lag the joiners' slow start. A sliding window read often follows a ramp without the bursts
/// (docs/drs.md §4.5).
const RATE_WINDOW: Duration = Duration::from_millis(500);
const RATE_TICK: Duration = Duration::from_millis(50);

impl Ctx {
    fn path_rtt(&self) -> Option<Duration> {
        match self.path_rtt_us.load(Ordering::Relaxed) {
            u64::MAX => None,
            us => Some(Duration::from_micros(us)),
        }
    }
}

/// How one connection's part ended.
#[derive(Debug)]
enum ConnEnd {
    /// EOD received. `sock` is `None` if the sender announced CLOSE.
    Eod {
        sock: Option<MaybeTls>,
        eof: Option<u64>,
        ranges: RangeSet,
        /// Arrival index of the connection, and its trace.
        idx: usize,
        trace: Vec<crate::drs::TraceRow>,
        /// With `DataOpts::crc32c`: the CRC of every block this connection wrote.
        crc: CrcPieces,
    },
    /// The transfer completed elsewhere while this connection waited for a header (`sock`: it carried nothing
    /// in this transfer, so it is still clean for the next one).
    Stopped { sock: Option<MaybeTls> },
}

/// MODE E: receive from connections arriving on `conns` until EOF and all EODs; blocks land at
/// `wire offset + wire_add` (ESTO A offset).
///
/// Returns as soon as EOF was seen and the EOD count reached, without waiting for TCP EOF or for `conns` to
/// close. If `conns` closes and every connection has ended before that, the result is `Incomplete`. It does not
/// know the expected size: the caller checks `DataReport::ranges` against what it expected. `reusable` holds the
/// connections that ended with EOD and no CLOSE, plus any that carried nothing (including ones still queued in
/// `conns`).
pub async fn recv_mode_e<S: Into<MaybeTls> + Send + 'static>(
    conns: mpsc::Receiver<S>,
    file: Arc<dyn FileHandle>,
    wire_add: u64,
    opts: &DataOpts,
    progress: Arc<Progress>,
) -> Result<DataReport, DataError> {
    recv_tagged(conns, 1, |s| (0, s.into()), file, wire_add, opts, progress)
        .await
        .map(|(r, _)| r)
}

/// [`recv_mode_e`] for a striped transfer (GFD.20): every connection arrives tagged with its stripe (the
/// listener it came in on, below `stripes`), and each stripe ends with its own EOF announcing its own EODs; the
/// transfer is complete when every stripe is. Also returns the payload bytes each stripe carried.
pub async fn recv_mode_e_striped(
    conns: mpsc::Receiver<(usize, MaybeTls)>,
    stripes: usize,
    file: Arc<dyn FileHandle>,
    wire_add: u64,
    opts: &DataOpts,
    progress: Arc<Progress>,
) -> Result<(DataReport, Vec<u64>), DataError> {
    recv_tagged(conns, stripes, |c| c, file, wire_add, opts, progress).await
}

/// The receiver behind both: `tag` splits what arrives into (stripe, connection); EOF/EOD are counted per stripe.
async fn recv_tagged<T: Send + 'static>(
    mut conns: mpsc::Receiver<T>,
    stripes: usize,
    tag: impl Fn(T) -> (usize, MaybeTls),
    file: Arc<dyn FileHandle>,
    wire_add: u64,
    opts: &DataOpts,
    progress: Arc<Progress>,
) -> Result<(DataReport, Vec<u64>), DataError> {
    let stripes = stripes.max(1);
    let _writeback = super::writeback::Writeback::start(&file);
    let ctx = Arc::new(Ctx {
        file,
        wire_add,
        limits: Limits {
            max_block: opts.max_block,
            max_end: opts.max_end,
            max_eod_count: 4096,
            sbuf: opts.inband_sbuf,
        },
        opts: opts.clone(),
        gauges: GaugeSet::new(Arc::clone(&progress)),
        progress: Arc::clone(&progress),
        start: Instant::now(),
        read: AtomicU64::new(0),
        top_rate: AtomicU64::new(0),
        path_rtt_us: AtomicU64::new(u64::MAX),
    });
    let mut meter = tokio::time::interval(RATE_TICK);
    meter.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // (when, bytes read) at each tick of the last RATE_WINDOW, oldest first.
    let mut readings = std::collections::VecDeque::from([(Instant::now(), 0u64)]);
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut set: JoinSet<Result<ConnEnd, DataError>> = JoinSet::new();
    let mut open = true;
    let mut streams = 0usize;
    // Per stripe: the EOF count announced, the EODs seen, the payload bytes. `stripe_of[idx]`: connection idx's.
    let mut eof: Vec<Option<u64>> = vec![None; stripes];
    let mut eods = vec![0u64; stripes];
    let mut stripe_bytes = vec![0u64; stripes];
    let mut stripe_of: Vec<usize> = Vec::new();
    let mut ranges = RangeSet::new();
    let mut reusable = vec![];
    let mut traces = vec![];
    let mut crc = CrcPieces::seeded(&ctx.opts.crc_held);
    let done =
        |eof: &[Option<u64>], eods: &[u64]| eof.iter().zip(eods).all(|(e, d)| *e == Some(*d));
    while !done(&eof, &eods) {
        tokio::select! {
            // Not on its own: with the channel closed and no reader left, `else` below must fire.
            _ = meter.tick(), if open || !set.is_empty() => {
                let (now, read) = (Instant::now(), ctx.read.load(Ordering::Relaxed));
                while readings.len() > 1 && now.saturating_duration_since(readings[1].0) >= RATE_WINDOW {
                    readings.pop_front();
                }
                let (then, before) = readings[0];
                let dt = now.saturating_duration_since(then);
                if dt >= RATE_WINDOW {
                    let rate = (read.saturating_sub(before) as f64 / dt.as_secs_f64()) as u64;
                    ctx.top_rate.fetch_max(rate, Ordering::Relaxed);
                }
                readings.push_back((now, read));
            },
            c = conns.recv(), if open => match c {
                Some(t) => {
                    let (stripe, s) = tag(t);
                    if stripe >= stripes {
                        return Err(DataError::Io(io::Error::new(
                            io::ErrorKind::InvalidInput,
                            format!("connection for stripe {stripe} of {stripes}"),
                        )));
                    }
                    set.spawn(recv_one(s, streams, Arc::clone(&ctx), stop_rx.clone()));
                    stripe_of.push(stripe);
                    streams += 1;
                    // Connections carrying data now (arrived and not yet ended with EOD).
                    progress.set_streams((streams as u64).saturating_sub(eods.iter().sum()));
                }
                None => open = false,
            },
            Some(j) = set.join_next(), if !set.is_empty() => {
                match joined(j)? {
                    ConnEnd::Eod { sock, eof: e, ranges: r, idx, trace, crc: c } => {
                        if ctx.opts.trace {
                            traces.push((idx, trace));
                        }
                        let st = stripe_of[idx];
                        eods[st] += 1;
                        stripe_bytes[st] += r.covered();
                        progress.set_streams((streams as u64).saturating_sub(eods.iter().sum()));
                        if let Some(n) = e {
                            if eof[st].is_some_and(|p| p != n) {
                                return Err(HeaderError::BadEodCount(n).into());
                            }
                            eof[st] = Some(n);
                        }
                        if let Some(n) = eof[st] {
                            if eods[st] > n {
                                return Err(HeaderError::BadEodCount(n).into());
                            }
                        }
                        ranges.extend(&r);
                        crc.extend(c);
                        reusable.extend(sock);
                    }
                    // Only produced once `stop_tx` fired, i.e. after this loop; harmless anyway.
                    ConnEnd::Stopped { sock } => reusable.extend(sock),
                }
            }
            else => {
                // The first stripe that is not complete says why.
                let (st, (e, d)) = eof.iter().zip(&eods).enumerate()
                    .find(|(_, (e, d))| **e != Some(**d))
                    .expect("some stripe is incomplete");
                let on = if stripes > 1 { format!(" on stripe {st}") } else { String::new() };
                return Err(DataError::Incomplete(match e {
                    Some(n) => format!("{d} of {n} data connections{on} ended with EOD"),
                    None => format!("{d} data connections{on} ended with EOD and no EOF was received"),
                }));
            }
        }
    }
    // Complete. Readers still waiting for a header hand their (clean) sockets back; anything else is dropped.
    let _ = stop_tx.send(true);
    let drain = async {
        while let Some(j) = set.join_next().await {
            match joined(j)? {
                ConnEnd::Stopped { sock } => reusable.extend(sock),
                ConnEnd::Eod { .. } => {
                    return Err(HeaderError::BadEodCount(eods.iter().sum()).into())
                }
            }
        }
        Ok::<(), DataError>(())
    };
    match tokio::time::timeout(DRAIN, drain).await {
        Ok(r) => r?,
        Err(_) => set.abort_all(),
    }
    // Connections queued but never used by this transfer are as good as new.
    while let Ok(t) = conns.try_recv() {
        reusable.push(tag(t).1);
    }
    tracing::debug!(
        bytes = ranges.covered(),
        streams,
        reusable = reusable.len(),
        "MODE E receive complete"
    );
    traces.sort_by_key(|(i, _)| *i);
    let report = DataReport {
        bytes: ranges.covered(),
        streams,
        ranges,
        reusable,
        peak_buffer: ctx.gauges.peak(),
        peak_window: ctx.gauges.window_peak(),
        traces: traces.into_iter().map(|(_, t)| t).collect(),
        crc32c: if ctx.opts.crc32c { crc.whole() } else { None },
    };
    Ok((report, stripe_bytes))
}

fn joined(
    j: Result<Result<ConnEnd, DataError>, tokio::task::JoinError>,
) -> Result<ConnEnd, DataError> {
    j.map_err(|e| super::join_error("receive", e))?
}

/// One connection's state while it carries this transfer.
struct Conn {
    sock: MaybeTls,
    gauge: Gauge,
    drs: Option<crate::drs::DrsStream>,
    /// Payload buffers: one being filled from the socket, one being written to the file.
    spare: Option<Vec<u8>>,
    place: Placement,
    pending: Option<(std::ops::Range<u64>, Pending<()>)>,
    ranges: RangeSet,
    trace: StreamTrace,
    crc: CrcPieces,
}

async fn recv_one(
    sock: MaybeTls,
    idx: usize,
    ctx: Arc<Ctx>,
    mut stop: watch::Receiver<bool>,
) -> Result<ConnEnd, DataError> {
    // A connection joining a running transfer starts at the running streams' average buffer (if smaller).
    let running = ctx.progress.streams().saturating_sub(1);
    let joining =
        (running > 0 && ctx.progress.buffer() > 0).then(|| ctx.progress.buffer() / running);
    let drs = sockets::start_drs(sock.tcp(), &ctx.opts, ctx.opts.inband_sbuf, joining)?;
    let mut c = Conn {
        sock,
        gauge: ctx.gauges.stream(),
        drs,
        spare: None,
        place: Placement::default(),
        pending: None,
        ranges: RangeSet::new(),
        trace: StreamTrace::new(ctx.opts.trace, ctx.start),
        crc: CrcPieces::default(),
    };
    let mut eof = None;
    let mut headers = 0u64;
    loop {
        let h = match read_header(&mut c.sock, headers == 0, &mut stop).await? {
            Some(h) => h,
            None => {
                let sock = (headers == 0).then_some(c.sock);
                return Ok(ConnEnd::Stopped { sock });
            }
        };
        headers += 1;
        match h.classify(&ctx.limits)? {
            Block::Data {
                offset,
                count,
                eod,
                eof: e,
                close,
            } => {
                if let Some(n) = e {
                    if eof.is_some_and(|p| p != n) {
                        return Err(HeaderError::BadEodCount(n).into());
                    }
                    eof = Some(n);
                }
                if count > 0 {
                    let at = offset
                        .checked_add(ctx.wire_add)
                        .filter(|a| a.checked_add(count).is_some());
                    let at = at.ok_or(HeaderError::OutOfRange {
                        offset,
                        count,
                        limit: u64::MAX - ctx.wire_add,
                    })?;
                    read_payload(&mut c, &ctx, at, count).await?;
                }
                if eod {
                    finish_writes(&mut c, &ctx).await?;
                    let ranges = std::mem::take(&mut c.ranges);
                    let sock = (!close).then_some(c.sock);
                    let trace = c.trace.finish();
                    let crc = std::mem::take(&mut c.crc);
                    return Ok(ConnEnd::Eod {
                        sock,
                        eof,
                        ranges,
                        idx,
                        trace,
                        crc,
                    });
                }
            }
            Block::SbufEcho { id, .. } => {
                if let Some(d) = c.drs.as_mut() {
                    d.on_sbuf_echo(Instant::now(), id);
                }
            }
            // Requests flow receiver -> sender; one arriving here is ignored.
            Block::SbufRequest { .. } => {}
        }
    }
}

/// Read a 17-byte header. `idle`: nothing has arrived on this connection in this transfer yet, so the wait may be
/// abandoned (`Ok(None)`) when the transfer completes elsewhere. TCP EOF before a complete header is `Incomplete`.
async fn read_header(
    sock: &mut MaybeTls,
    idle: bool,
    stop: &mut watch::Receiver<bool>,
) -> Result<Option<Header>, DataError> {
    let mut hdr = [0u8; HEADER_LEN];
    let mut filled = 0;
    while filled < HEADER_LEN {
        let n = if idle && filled == 0 {
            // `read` is cancel-safe: if the stop wins, no byte was consumed.
            tokio::select! {
                biased;
                r = sock.read(&mut hdr) => r?,
                _ = stop.wait_for(|s| *s) => return Ok(None),
            }
        } else {
            sock.read(&mut hdr[filled..]).await?
        };
        if n == 0 {
            return Err(DataError::Incomplete(if filled == 0 {
                "a data connection closed before its EOD".into()
            } else {
                format!("a data connection closed inside a block header ({filled} of {HEADER_LEN} bytes)")
            }));
        }
        filled += n;
    }
    Ok(Some(Header::decode(&hdr)))
}

/// Read `count` payload bytes destined for file offset `at`, in chunks of at most [`CHUNK`]; each chunk's file
/// write runs while the next chunk is read.
async fn read_payload(c: &mut Conn, ctx: &Ctx, mut at: u64, count: u64) -> Result<(), DataError> {
    let mut left = count;
    while left > 0 {
        let n = left.min(CHUNK as u64) as usize;
        let mut buf = c.spare.take().unwrap_or_default();
        if buf.len() < n {
            buf.resize(n, 0);
        }
        let mut got = 0;
        while got < n {
            let k = c.sock.read(&mut buf[got..n]).await?;
            if k == 0 {
                return Err(DataError::Incomplete(
                    "a data connection closed inside a block".into(),
                ));
            }
            got += k;
            // Early in a connection, put DRS's window clamp back after every partial read (`DrsStream::reclamp`).
            if let Some(d) = c.drs.as_mut().filter(|d| d.early()) {
                d.reclamp(c.sock.tcp())?;
            }
        }
        if ctx.opts.crc32c {
            // Still in cache from the socket read; hardware CRC32C costs a few percent of the copy.
            c.crc.add(at, &buf[..n]);
        }
        let now = Instant::now();
        ctx.read.fetch_add(n as u64, Ordering::Relaxed);
        if let Some(d) = c.drs.as_mut() {
            if let Some(m) = d.min_rtt() {
                ctx.path_rtt_us
                    .fetch_min(m.as_micros() as u64, Ordering::Relaxed);
            }
            d.set_transfer(
                ctx.progress.streams(),
                ctx.top_rate.load(Ordering::Relaxed),
                ctx.path_rtt(),
            );
            for a in d.on_read(c.sock.tcp(), now, n as u64)? {
                if let drsftp_tune::DrsAction::SendSbufProbe { id, size } = a {
                    if ctx.opts.inband_sbuf {
                        send_probe(&mut c.sock, Header::sbuf_request(size, id)).await?;
                    }
                }
            }
        }
        c.gauge.sample(
            c.sock.tcp(),
            now,
            ctx.opts.buffer,
            Side::Recv,
            c.drs.as_ref(),
        );
        let buffer = c.gauge.current();
        c.trace.sample(
            c.sock.tcp(),
            now,
            n as u64,
            Side::Recv,
            buffer,
            c.drs.as_ref(),
        );
        finish_writes(c, ctx).await?;
        let r = at..at + n as u64;
        c.pending = Some((r, c.place.write(&ctx.file, buf, n, at)));
        at += n as u64;
        left -= n as u64;
    }
    Ok(())
}

/// Write an SBUF request without ever waiting for room: a sender that does not read the reverse direction must not
/// be able to block the data path. A probe that finds no room is dropped (DRS times it out and probes again later);
/// one that partly fits is completed, to keep the reverse direction framed.
async fn send_probe(sock: &mut MaybeTls, h: Header) -> Result<(), DataError> {
    let b = h.encode();
    match sock.try_write(&b).await {
        Ok(n) if n < b.len() => sock.write_all(&b[n..]).await?,
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            tracing::debug!("no room for an SBUF probe on a data connection: dropped");
        }
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

/// Wait for the file write in flight (if any) and account its range.
async fn finish_writes(c: &mut Conn, ctx: &Ctx) -> Result<(), DataError> {
    if let Some((r, p)) = c.pending.take() {
        let (buf, ()) = p.wait().await?;
        let held = ctx.progress.add(r.clone());
        c.ranges.insert(r);
        if held > MAX_RANGES {
            return Err(DataError::Incomplete(format!(
                "MODE E blocks too fragmented: more than {MAX_RANGES} separate byte ranges"
            )));
        }
        c.spare = Some(buf);
    }
    Ok(())
}
