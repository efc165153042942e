//! Stream mode (RFC 959): the file's bytes, then EOF by closing. The sender reads block-sized chunks with
//! positioned reads, one read in flight while the previous chunk is written to the socket; the receiver fills a
//! chunk from the socket while the previous one is written to the file. With control-channel DRS enabled on
//! `Progress::sbuf` (peer opted in), the receiver's DRS probes go to the control driver and its echoes come back,
//! and the sender's socket is registered there so the driver can resize SO_SNDBUF (`ctrl_sbuf`). Both take a
//! cleartext or a TLS (`PROT P`) connection ([`MaybeTls`]), as the MODE E engine does.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use drsftp_proto::ranges::RangeSet;
use drsftp_proto::tls_records::RECORD_ROOM;
use drsftp_storage::FileHandle;
use drsftp_tune::DrsAction;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::crc::CrcPieces;
use super::fileio::{self, read_full, Pending, Placement};
use super::sealed::{add_crc, seal_block, BlockSink};
use super::sockets::{self, Gauge, GaugeSet, Side};
use super::trace::StreamTrace;
use super::zerocopy::{self, Sent, SpliceIn};
use super::{DataError, DataOpts, DataReport, Progress};
use crate::tls::MaybeTls;

/// Largest chunk a receiver collects before writing it to the file. Small enough to stay in L2 between the socket
/// read and the file write (a 1 MiB chunk measured slower on the 2-core loopback box), large enough that the
/// per-write overhead vanishes; equal to the default MODE E block.
pub(crate) const RECV_CHUNK: usize = 256 << 10;

/// Payload bytes per read for a sender, from `opts.block_size` (0 = default), bounded to something sane.
pub(crate) fn send_chunk(opts: &DataOpts) -> usize {
    match opts.block_size {
        0 => super::DEFAULT_BLOCK,
        n => n.clamp(1, 64 << 20),
    }
}

/// The bookkeeping of a stream-mode transfer's one connection: its buffer gauge (in a set of one, for the
/// report's peaks) and its TCP_INFO trace.
fn one_stream(opts: &DataOpts, progress: &Arc<Progress>) -> (GaugeSet, Gauge, StreamTrace) {
    progress.set_streams(1);
    let gauges = GaugeSet::new(Arc::clone(progress));
    let gauge = gauges.stream();
    (gauges, gauge, StreamTrace::new(opts.trace, Instant::now()))
}

/// Stream mode: send `range` of `file`, then shut the socket down. `range.end == u64::MAX` sends to EOF; a range
/// running past EOF stops at EOF (the report's `bytes` says how much went).
pub async fn send_stream(
    sock: impl Into<MaybeTls>,
    file: Arc<dyn FileHandle>,
    range: Range<u64>,
    opts: &DataOpts,
    progress: Arc<Progress>,
) -> Result<DataReport, DataError> {
    // A cleartext socket or a `PROT P` one: DRS, gauges and traces look at the TCP socket underneath.
    let mut sock: MaybeTls = sock.into();
    let (gauges, mut gauge, mut trace) = one_stream(opts, &progress);
    // The control driver resizes SO_SNDBUF when the receiver tells its buffer (`SBUF <id> <size>` / `126 SBUF`).
    let _sbuf = progress.sbuf().register_sender(sock.tcp(), opts)?;
    let chunk = send_chunk(opts);
    // Under TLS (our record layer) chunks are read straight into record slots and sealed where they lie.
    let shape = sock.shape();
    let buf_len = shape.map_or(chunk, |s| s.buffer_len(chunk));
    let end = range.end;
    let mut pos = range.start;
    let mut spare: Option<Vec<u8>> = None;
    let mut place = Placement::default();
    // The read for the chunk at `pos` is issued before the previous chunk is written to the socket.
    let next_read = |pos: u64,
                     spare: &mut Option<Vec<u8>>,
                     place: &mut Placement|
     -> Option<(u64, Pending<usize>)> {
        if pos >= end {
            return None;
        }
        let n = (end - pos).min(chunk as u64) as usize;
        let buf = spare.take().unwrap_or_else(|| vec![0u8; buf_len]);
        Some((
            pos,
            match shape {
                Some(s) => place.read_shaped(&file, buf, s, 0..n, pos),
                None => place.read(&file, buf, 0..n, pos),
            },
        ))
    };
    // Cleartext from a host file: `sendfile` (see `zerocopy`).
    let kernel = file
        .host_fd()
        .filter(|_| shape.is_none() && opts.zero_copy.send);
    let mut use_kernel = true;
    let mut pending = next_read(pos, &mut spare, &mut place);
    let mut sent = RangeSet::new();
    let mut crc = CrcPieces::default();
    while let Some((off, p)) = pending.take() {
        let (mut buf, got) = p.wait().await?;
        if got == 0 {
            break; // end of file (a range past EOF, or `u64::MAX` = to EOF)
        }
        pos = off + got as u64;
        if opts.crc32c {
            add_crc(&mut crc, shape, &buf, 0..got, off);
        }
        pending = next_read(pos, &mut spare, &mut place);
        if shape.is_some() {
            buf = seal_block(&mut sock, buf, got, buf_len).await?;
        } else if let (Some(fd), MaybeTls::Plain(tcp)) = (kernel.filter(|_| use_kernel), &sock) {
            // The bytes just read (and CRC'd) go out from the page cache, not from `buf`.
            match zerocopy::send_file(tcp, fd, &[], off, got).await? {
                Sent::All => progress.add_kernel_copied(got as u64),
                Sent::Unsupported { done } => {
                    progress.add_kernel_copied(done as u64);
                    sock.write_all(&buf[done..got]).await?;
                    use_kernel = false;
                }
            }
        } else {
            sock.write_all(&buf[..got]).await?;
        }
        progress.add(off..pos);
        sent.insert(off..pos);
        let now = Instant::now();
        gauge.sample(sock.tcp(), now, opts.buffer, Side::Send, None);
        trace.sample(
            sock.tcp(),
            now,
            got as u64,
            Side::Send,
            gauge.current(),
            None,
        );
        spare = Some(buf);
    }
    finish_send(&mut sock).await?;
    Ok(DataReport {
        bytes: sent.covered(),
        streams: 1,
        ranges: sent,
        reusable: vec![],
        peak_buffer: gauges.peak(),
        peak_window: gauges.window_peak(),
        traces: vec![trace.finish()],
        crc32c: if opts.crc32c { crc.whole() } else { None },
    })
}

/// The sender's end of a stream-mode connection: EOF by shutdown, and under TLS a wait (at most 5 s) for the
/// peer's close_notify. A TLS 1.3 server sends session tickets after the handshake; a sender that closes with
/// them unread makes its kernel answer with RST, which can reach the receiver before the last data does (seen
/// as `426 … Connection reset by peer` on uploads). Reading to the peer's close_notify makes the close a FIN.
pub(crate) async fn finish_send(sock: &mut MaybeTls) -> std::io::Result<()> {
    sock.shutdown().await?;
    if sock.is_tls() {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), sock.read_to_close()).await;
    }
    Ok(())
}

/// What a stream-mode receiver does after each socket read: DRS (its probes go to the control driver), the
/// buffer gauge and the trace.
struct Reads<'a> {
    opts: &'a DataOpts,
    link: &'a super::ctrl_sbuf::SbufLink,
    drs: Option<crate::drs::DrsStream>,
    gauge: Gauge,
    trace: StreamTrace,
}

impl Reads<'_> {
    fn after_read(&mut self, tcp: &tokio::net::TcpStream, k: usize) -> Result<(), DataError> {
        let now = Instant::now();
        if let Some(d) = self.drs.as_mut() {
            for a in d.on_read(tcp, now, k as u64)? {
                if let DrsAction::SendSbufProbe { id, size } = a {
                    self.link.push_probe(id, size);
                    if self.link.is_one_way() {
                        // A `126` notice is never answered: count it delivered at once. An echo at the probe's
                        // own instant is a zero RTT, which the estimator ignores (no RTT sample), so the next
                        // buffer change is announced without waiting for the probe timeout.
                        d.on_sbuf_echo(now, id);
                    }
                }
            }
            for (id, at) in self.link.take_echoes() {
                d.on_sbuf_echo(at, id);
            }
        }
        self.gauge
            .sample(tcp, now, self.opts.buffer, Side::Recv, self.drs.as_ref());
        let buffer = self.gauge.current();
        self.trace
            .sample(tcp, now, k as u64, Side::Recv, buffer, self.drs.as_ref());
        Ok(())
    }
}

/// Stream mode: read to EOF, writing at `offset + n`.
pub async fn recv_stream(
    sock: impl Into<MaybeTls>,
    file: Arc<dyn FileHandle>,
    offset: u64,
    opts: &DataOpts,
    progress: Arc<Progress>,
) -> Result<DataReport, DataError> {
    // A cleartext socket or a `PROT P` one: DRS, gauges and traces look at the TCP socket underneath.
    let mut sock: MaybeTls = sock.into();
    let _writeback = super::writeback::Writeback::start(&file);
    let (gauges, gauge, trace) = one_stream(opts, &progress);
    // Stream mode has no in-band channel: probes go over the control channel, through the driver (only when it
    // enabled the link: the peer opted in).
    let link = progress.sbuf();
    let drs = sockets::start_drs(sock.tcp(), opts, link.is_enabled(), None)?;
    let mut reads = Reads {
        opts,
        link,
        drs,
        gauge,
        trace,
    };
    let mut got = RangeSet::new();
    let mut crc = CrcPieces::default();
    if let MaybeTls::Records(r) = &mut sock {
        recv_opened(r, &file, offset, &progress, &mut reads, &mut got, &mut crc).await?;
    } else {
        let mut from = Some(offset);
        if let (MaybeTls::Plain(tcp), Some(fd), true) = (&sock, file.host_fd(), opts.zero_copy.recv)
        {
            from = recv_spliced(
                tcp, &file, fd, offset, &progress, &mut reads, &mut got, &mut crc,
            )
            .await?;
        }
        if let Some(at) = from {
            recv_chunks(
                &mut sock, &file, at, &progress, &mut reads, &mut got, &mut crc,
            )
            .await?;
        }
    }
    // Under TLS this answers the sender's close_notify with ours (Python's ftplib waits for it in `unwrap`);
    // on plain TCP it is the FIN the drop would send anyway.
    let _ = sock.shutdown().await;
    Ok(DataReport {
        bytes: got.covered(),
        streams: 1,
        ranges: got,
        reusable: vec![],
        peak_buffer: gauges.peak(),
        peak_window: gauges.window_peak(),
        traces: vec![reads.trace.finish()],
        crc32c: if opts.crc32c { crc.whole() } else { None },
    })
}

/// Cleartext (and rustls-buffered TLS): fill a chunk from the socket, then write it to the file while the next
/// one fills.
async fn recv_chunks(
    sock: &mut MaybeTls,
    file: &Arc<dyn FileHandle>,
    mut at: u64,
    progress: &Progress,
    reads: &mut Reads<'_>,
    got: &mut RangeSet,
    crc: &mut CrcPieces,
) -> Result<(), DataError> {
    let mut spare: Option<Vec<u8>> = None;
    let mut pending: Option<(Range<u64>, Pending<()>)> = None;
    let mut place = Placement::default();
    let mut eof = false;
    while !eof {
        let mut buf = spare.take().unwrap_or_else(|| vec![0u8; RECV_CHUNK]);
        let mut n = 0;
        while n < buf.len() {
            let k = sock.read(&mut buf[n..]).await?;
            if k == 0 {
                eof = true;
                break;
            }
            n += k;
            reads.after_read(sock.tcp(), k)?;
        }
        if let Some((r, p)) = pending.take() {
            let (b, ()) = p.wait().await?;
            progress.add(r.clone());
            got.insert(r);
            spare = Some(b);
        }
        if n > 0 {
            let end = past(at, n)?;
            if reads.opts.crc32c {
                crc.add(at, &buf[..n]);
            }
            pending = Some((at..end, place.write(file, buf, n, at)));
            at = end;
        }
    }
    if let Some((r, p)) = pending.take() {
        p.wait().await?;
        progress.add(r.clone());
        got.insert(r);
    }
    Ok(())
}

/// Cleartext into a host file: socket -> pipe -> file with `splice` (see `zerocopy`), one pipe-full at a time;
/// with CRC32C the bytes are read back from the file while cache-hot. Returns where the copying path must take
/// over (`Some(at)`: the file system refused spliced writes, or they turned slow, i.e. a disk that the worker
/// must not wait on), `None` when the stream ended.
#[allow(clippy::too_many_arguments)]
async fn recv_spliced(
    tcp: &tokio::net::TcpStream,
    file: &Arc<dyn FileHandle>,
    fd: std::os::fd::BorrowedFd<'_>,
    mut at: u64,
    progress: &Progress,
    reads: &mut Reads<'_>,
    got: &mut RangeSet,
    crc: &mut CrcPieces,
) -> Result<Option<u64>, DataError> {
    let pipe = SpliceIn::new(RECV_CHUNK)?;
    let cap = pipe.capacity();
    let mut buf = vec![0u8; cap];
    loop {
        let mut n = 0;
        let mut eof = false;
        while n < cap {
            let k = if n == 0 {
                pipe.fill(tcp, cap).await?
            } else {
                match pipe.top_up(tcp, cap - n)? {
                    Some(k) => k,
                    None => break, // nothing more now, or the pipe is full: write what it holds
                }
            };
            if k == 0 {
                eof = true;
                break;
            }
            n += k;
            reads.after_read(tcp, k)?;
        }
        if n > 0 {
            let end = past(at, n)?;
            let t0 = Instant::now();
            let spliced = pipe.drain(fd, at, n, &mut buf, |b, o| {
                file.write_at(b, o).map_err(DataError::Storage)
            })?;
            if reads.opts.crc32c {
                // What the file now holds, not what the socket said: the check covers the destination itself.
                let k = read_full(&**file, &mut buf[..n], at)?;
                if k < n {
                    return Err(DataError::Incomplete(format!(
                        "the file ended at {} right after writing {at}..{end} (truncated during the transfer?)",
                        at + k as u64
                    )));
                }
                crc.add(at, &buf[..n]);
            }
            progress.add(at..end);
            got.insert(at..end);
            if spliced {
                progress.add_kernel_copied(n as u64);
            }
            at = end;
            if !spliced || fileio::is_slow(t0.elapsed(), n) {
                return Ok(if eof { None } else { Some(at) });
            }
        }
        if eof {
            return Ok(None);
        }
    }
}

/// TLS on our record layer: records are opened in place in the record buffer as they arrive, and once it is
/// about full (or the peer's close_notify is in) the opened plaintext goes to the file straight from the record
/// slots in one `pwritev`, while receiving goes on in the other of two buffers. The only plaintext copy left
/// is the kernel's into the file (docs/bench/tls.md: the copy into a chunk cost ~0.05 CPU-s/GiB on the receiver,
/// the saturated core of a loopback transfer).
async fn recv_opened(
    sock: &mut crate::tls::Records,
    file: &Arc<dyn FileHandle>,
    mut at: u64,
    progress: &Progress,
    reads: &mut Reads<'_>,
    got: &mut RangeSet,
    crc: &mut CrcPieces,
) -> Result<(), DataError> {
    let mut spare: Option<(Vec<u8>, Vec<Range<usize>>)> = None;
    // A write in flight: its file range, and the buffer's plaintext ranges (kept for the next take).
    type Write = (Range<u64>, Pending<Vec<Range<usize>>>);
    let mut pending: Option<Write> = None;
    let mut place = Placement::default();
    loop {
        // Receive until the buffer cannot take another whole record, or the end.
        while !sock.peer_closed() && (sock.held_len() == 0 || sock.recv_room() >= RECORD_ROOM) {
            let k = sock.recv_opened().await?;
            if k > 0 {
                reads.after_read(sock.tcp(), k)?;
            }
        }
        if let Some((r, p)) = pending.take() {
            let (b, ranges) = p.wait().await?;
            progress.add(r.clone());
            got.insert(r);
            spare = Some((b, ranges));
        }
        let n = sock.held_len();
        if n == 0 {
            break; // closed, everything written
        }
        let (b, mut ranges) = spare.take().unwrap_or_default();
        let buf = sock.take_opened(b, &mut ranges);
        let end = past(at, n)?;
        if reads.opts.crc32c {
            let mut off = at;
            for r in &ranges {
                crc.add(off, &buf[r.clone()]);
                off += r.len() as u64;
            }
        }
        pending = Some((at..end, place.write_ranges(file, buf, ranges, at)));
        at = end;
    }
    Ok(())
}

/// The file offset `n` bytes past `at`, refused past the largest offset.
fn past(at: u64, n: usize) -> Result<u64, DataError> {
    at.checked_add(n as u64).ok_or_else(|| {
        DataError::Incomplete(format!(
            "stream runs past the largest file offset ({at}+{n})"
        ))
    })
}
