//! The blast receiver thread: data in (recvmmsg, GRO split), the `drsftp_blast::Receiver` core in the middle, new
//! payloads into the write-back runs, acks out to the announced peer address. After completion it reports and
//! lingers (module docs of `blast`). A resumed receiver starts from a checkpoint; with a checkpoint sink it hands
//! out a copy of its packet map every so often and when it stops, each taken right after the pending runs were
//! written (so every set packet's bytes are in the file; the sink syncs the file before saving the map).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use drsftp_blast::{Bitmap, Phases, Receiver, ReceiverConfig, RxEvent, TransferParams};
use drsftp_sys::udp::{self, RecvBatch};
use tokio::sync::oneshot;

use super::io::WriteBack;
use super::sender::same_host;
use super::{BlastOpts, BlastReport, Clock, RecvResume};
use crate::data::DataError;

/// The receiver's input, with its resume state (checkpoint to start from, sink for new ones).
type Job = super::Job<RecvResume>;

const MAX_WAIT: Duration = Duration::from_millis(20);
/// Write pending runs at least this often, so progress (and markers) move.
const FLUSH_EVERY: Duration = Duration::from_millis(50);
/// Longest linger whatever arrives.
const LINGER_CAP: Duration = Duration::from_secs(30);

pub(super) fn config(opts: &BlastOpts, params: &TransferParams) -> ReceiverConfig {
    let mut cfg = ReceiverConfig {
        // As large as a data datagram (AEAD counter and tag included): the path carries those.
        max_ack_datagram: (params.payload_size
            + drsftp_blast::wire::DATA_HEADER_LEN
            + opts.protection.overhead())
        .min(drsftp_blast::wire::MAX_DATAGRAM),
        protection: opts.protection.clone(),
        ..ReceiverConfig::default()
    };
    // FOBS never resends while new packets remain, so with loss the state between the cumulative ack and the
    // newest packet spans most of the transfer. 16 chunks per ack event (the core's default) then make the ack
    // stream a quarter of the data stream at 5 % loss; 4 still carry the newest 11 000 packets every time (what
    // loss detection and rate samples need) and rotate over the rest.
    cfg.max_ack_chunks = opts.ack_chunks.max(1);
    if let Some(a) = opts.ack_every {
        cfg.ack_every = a.max(1);
    }
    if let Some(d) = opts.max_ack_delay {
        cfg.max_ack_delay = d;
    }
    cfg
}

struct Loop {
    sock: std::net::UdpSocket,
    peer: SocketAddr,
    rx: Receiver,
    rb: RecvBatch,
    wb: WriteBack,
    foreign: u64,
    acks_sent: u64,
    acks_dropped: u64,
    heard: Instant,
    last_flush: Instant,
    /// Where the time went (first datagram, ramp, first pass, tail), by kernel arrival times.
    phases: Phases,
    /// Checkpoint sink and interval, next checkpoint due.
    ck: Option<std::sync::mpsc::SyncSender<Bitmap>>,
    ck_every: Duration,
    next_ck: Instant,
}

impl Loop {
    /// Reads what is queued (waiting up to `wait` if nothing is), feeds the core, sends its acks. Returns whether
    /// anything was read.
    fn step(&mut self, wait: Duration) -> Result<bool, DataError> {
        let mut now = Instant::now();
        let got = match self.rb.recv(&self.sock) {
            Ok(_) => {
                let clock = Clock::read();
                now = clock.now;
                let mut owd = (i64::MAX, i64::MIN);
                for (from, at, d) in self.rb.datagrams_timed() {
                    if !same_host(from, self.peer) {
                        self.foreign += 1;
                        continue;
                    }
                    let arrived = clock.arrival(at);
                    match self.rx.handle_datagram(arrived, d) {
                        Ok(RxEvent::Data { seq, offset, data }) => {
                            self.phases.arrival(arrived, seq, true);
                            self.wb.push(offset, data)?;
                            self.heard = now;
                            if self.rx.is_complete() {
                                self.phases.complete(arrived);
                            }
                        }
                        Ok(RxEvent::Duplicate { seq }) => {
                            self.phases.arrival(arrived, seq, false);
                            self.heard = now
                        }
                        Err(_) => continue,
                    }
                    if let Some(d) = self.rx.last_owd_us() {
                        owd = (owd.0.min(d), owd.1.max(d));
                    }
                }
                if owd.0 <= owd.1 {
                    self.wb.progress().add_blast(
                        self.rx.transmissions(),
                        self.rx.stats().datagrams,
                        self.rb.socket_drops(),
                        owd,
                    );
                }
                true
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => false,
            Err(e) => return Err(DataError::Io(e)),
        };
        if self.rx.poll_timeout().is_some_and(|t| t <= now) {
            self.rx.handle_timeout(now);
        }
        self.send_acks()?;
        if self.wb.pending() > 0 && now >= self.last_flush + FLUSH_EVERY {
            self.wb.flush()?;
            self.last_flush = now;
        }
        if !got {
            let until = self
                .rx
                .poll_timeout()
                .map_or(wait, |t| t.saturating_duration_since(Instant::now()))
                .min(wait);
            udp::wait(&self.sock, true, false, Some(until)).map_err(DataError::Io)?;
        }
        Ok(got)
    }

    /// Writes the pending runs and hands a copy of the packet map to the checkpoint sink (`wait`: block until it
    /// takes it; otherwise skip if it is still busy with the previous one). Never after a failed write.
    fn checkpoint(&mut self, wait: bool) {
        let Some(ck) = &self.ck else {
            return;
        };
        if self.wb.failed || self.wb.flush().is_err() {
            return;
        }
        let map = self.rx.bitmap().clone();
        let _ = if wait {
            ck.send(map).map_err(|_| ())
        } else {
            ck.try_send(map).map_err(|_| ())
        };
    }

    fn send_acks(&mut self) -> Result<(), DataError> {
        while let Some(a) = self.rx.poll_transmit() {
            match self.sock.send_to(&a, self.peer) {
                Ok(_) => self.acks_sent += 1,
                // A full send buffer or an ICMP error from an earlier send: the next ack carries the state.
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::ConnectionRefused
                    ) =>
                {
                    self.acks_dropped += 1
                }
                Err(e) => return Err(DataError::Io(e)),
            }
        }
        Ok(())
    }
}

pub(super) fn run(job: Job, result: oneshot::Sender<Result<BlastReport, DataError>>) {
    let stop = job.stop.clone();
    let linger = job.opts.linger;
    match receive(job) {
        Ok((report, mut l)) => {
            // The sink's owner may wait for it to close; lingering needs no checkpoints.
            l.ck = None;
            let _ = result.send(Ok(report));
            // Linger: answer a sender that missed our "complete" until released or quiet.
            let start = Instant::now();
            l.heard = start;
            while !stop.load(Ordering::Relaxed)
                && l.heard.elapsed() < linger
                && start.elapsed() < LINGER_CAP
            {
                if l.step(MAX_WAIT).is_err() {
                    break;
                }
            }
        }
        Err(e) => {
            let _ = result.send(Err(e));
        }
    }
}

fn receive(job: Job) -> Result<(BlastReport, Loop), DataError> {
    let Job {
        sock,
        peer,
        params,
        file,
        base,
        opts,
        progress,
        stop,
        side: resume,
    } = job;
    let _ = udp::set_timer_slack(10_000);
    let start = Instant::now();
    let from = resume
        .from
        .unwrap_or_else(|| Bitmap::new(params.total_packets()));
    let resumed = super::held_bytes(&params, &from);
    for r in drsftp_blast::resume::byte_ranges(&params, &from) {
        progress.add(base + r.start..base + r.end);
    }
    let rx = Receiver::resume(params, config(&opts, &params), from, start)
        .map_err(|e| DataError::Incomplete(format!("blast receiver: {e}")))?;
    let slot = if opts.gro {
        udp::GRO_MAX_BYTES
    } else {
        params.wire_len().max(2048)
    };
    let gro = opts.gro;
    progress.set_streams(1);
    let mut l = Loop {
        sock,
        peer,
        rx,
        rb: RecvBatch::new(32, slot),
        wb: WriteBack::new(file, base, progress),
        foreign: 0,
        acks_sent: 0,
        acks_dropped: 0,
        heard: start,
        last_flush: start,
        phases: Phases::new(start, params.total_packets()),
        ck: resume.checkpoints,
        ck_every: resume.every.max(Duration::from_millis(10)),
        next_ck: start + resume.every,
    };
    let mut first: Option<Instant> = None;
    let r = (|| {
        // A zero-length transfer is complete from the start: the core has queued its "complete" already.
        l.send_acks()?;
        while !l.rx.is_complete() {
            if stop.load(Ordering::Relaxed) {
                return Err(DataError::Aborted);
            }
            if l.step(MAX_WAIT)? && first.is_none() && l.rx.stats().datagrams > 0 {
                first = Some(Instant::now());
            }
            if l.heard.elapsed() > opts.idle_timeout {
                return Err(DataError::Timeout);
            }
            if l.ck.is_some() && Instant::now() >= l.next_ck {
                l.checkpoint(false);
                l.next_ck = Instant::now() + l.ck_every;
            }
        }
        l.wb.flush()?;
        l.send_acks()
    })();
    // Stopping for any reason: the last word on what is in the file.
    l.checkpoint(true);
    r?;
    let s = *l.rx.stats();
    let written = l.wb.written + resumed;
    if written != params.total_bytes {
        return Err(DataError::Incomplete(format!(
            "blast receiver wrote {written} of {} bytes",
            params.total_bytes
        )));
    }
    let report = BlastReport {
        bytes: written,
        packets: params.total_packets(),
        datagrams: s.datagrams,
        duplicates: s.duplicates,
        transmissions: l.rx.transmissions(),
        rejected: s.rejects.total() + l.foreign,
        foreign: l.foreign,
        rejects: s.rejects,
        resent: 0,
        hedge_copies: 0,
        acks: l.acks_sent,
        socket_drops: l.rb.socket_drops(),
        gso: false,
        gro,
        aead: opts.protection != drsftp_blast::Protection::None,
        ranges: std::iter::once(base..base + written)
            .filter(|r| !r.is_empty())
            .collect(),
        bitmap: l.rx.bitmap().to_bytes(),
        resumed,
        seconds: first.map_or(0.0, |f| f.elapsed().as_secs_f64()),
        phases: l.phases.report(),
        crc32c: l.wb.whole_crc(),
    };
    Ok((report, l))
}
