//! The blast sender thread: acks in (recvmmsg), the `drsftp_blast::Sender` core in the middle, data out
//! (GSO or sendmmsg), sleeping in `ppoll` until the core's next timeout, a datagram, or socket-buffer room.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use drsftp_blast::{Batch, Bitmap, Circular, Sender, SenderConfig, SenderEvent};
use drsftp_sys::udp::{self, BatchSender, RecvBatch};

use super::io::FileSource;
use super::{BlastOpts, BlastReport, Clock};
use crate::data::DataError;

/// The sender's input: the packets the receiver already holds (a resumed download) are never sent.
type Job = super::Job<Option<Bitmap>>;

/// Longest sleep between checks of the stop flag.
const MAX_WAIT: Duration = Duration::from_millis(20);
/// Datagrams produced per wake-up before acks are read again.
const BUDGET: usize = 256;
/// Datagrams per `poll_transmit` call (one GSO/sendmmsg batch).
const BATCH: usize = 64;

/// Same host (the port may differ: only the announced address gets our datagrams anyway).
pub(super) fn same_host(from: Option<SocketAddr>, peer: SocketAddr) -> bool {
    from.is_some_and(|f| f.ip().to_canonical() == peer.ip().to_canonical())
}

pub(super) fn config(opts: &BlastOpts) -> SenderConfig {
    let first_ack = SenderConfig::default().first_ack_timeout;
    let mut cfg = SenderConfig {
        idle_timeout: opts.idle_timeout,
        // Without any ack, the idle timeout would fire first anyway; keep the message's figure true.
        first_ack_timeout: first_ack.min(opts.idle_timeout),
        // Real receivers and forwarders on a busy host hold acks for tens of ms now and then; a tighter loss
        // timer would resend everything in flight each time (ack coverage still finds real losses at once).
        ack_delay_allowance: Duration::from_millis(60),
        ..SenderConfig::default()
    };
    let r = &mut cfg.rate;
    if opts.start_rate > 0 {
        r.initial_rate_bps = opts.start_rate;
    }
    if opts.max_rate > 0 {
        r.max_rate_bps = opts.max_rate;
        r.initial_rate_bps = r.initial_rate_bps.min(opts.max_rate);
        r.min_rate_bps = r.min_rate_bps.min(opts.max_rate);
    }
    r.max_burst = opts.max_burst.max(1);
    cfg.protection = opts.protection.clone();
    cfg
}

/// A batch produced by the core, partly sent.
#[derive(Default)]
struct Outgoing {
    batch: Batch,
    lens: Vec<usize>,
    /// Datagrams and bytes already handed to the kernel.
    sent: usize,
    off: usize,
}

pub(super) fn run(job: Job) -> Result<BlastReport, DataError> {
    let Job {
        sock,
        peer,
        params,
        file,
        base,
        opts,
        progress,
        stop,
        side: acked,
    } = job;
    let _ = udp::set_timer_slack(10_000);
    let start = Instant::now();
    let acked = acked.unwrap_or_else(|| Bitmap::new(params.total_packets()));
    let resumed = super::held_bytes(&params, &acked);
    let mut tx = Sender::resume(params, config(&opts), Circular::new(), acked, start)
        .map_err(|e| DataError::Incomplete(format!("blast sender: {e}")))?;
    let src = FileSource::new(file, base, params.total_bytes);
    let mut out = BatchSender::new(&sock, opts.gso);
    let mut acks = RecvBatch::new(16, udp::GRO_MAX_BYTES);
    let mut q = Outgoing::default();
    let mut foreign = 0u64;
    let mut reported = 0u64;
    let mut next_log = start;
    progress.set_streams(1);
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err(DataError::Aborted);
        }
        loop {
            match acks.recv(&sock) {
                Ok(_) => {
                    let clock = Clock::read();
                    for (from, at, d) in acks.datagrams_timed() {
                        if same_host(from, peer) {
                            let _ = tx.handle_input(clock.arrival(at), d);
                        } else {
                            foreign += 1;
                        }
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                // An ICMP error from an earlier send (the peer's port closed for a moment): not fatal; the idle
                // timeout decides.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => break,
                Err(e) => return Err(DataError::Io(e)),
            }
        }
        let now = Instant::now();
        let mut done = false;
        while let Some(ev) = tx.poll_event() {
            match ev {
                SenderEvent::Complete => done = true,
                // No ack at all: nothing was ever listening at `peer` (or it is not a blast receiver), and the
                // core stopped after its unacked budget; say so rather than a bare timeout.
                SenderEvent::Failed if !tx.heard_from_receiver() => {
                    return Err(DataError::Incomplete(format!(
                        "blast: no acknowledgement from the receiver at {peer} within {:?} \
                         ({} bytes sent); giving up",
                        config(&opts).first_ack_timeout,
                        tx.stats().unacked_bytes
                    )))
                }
                SenderEvent::Failed => return Err(DataError::Timeout),
            }
        }
        let acked = (tx.stats().acked * params.payload_size as u64).min(params.total_bytes);
        if acked > reported {
            progress.add(base + reported..base + acked);
            reported = acked;
        }
        if done {
            break;
        }
        if now >= next_log {
            next_log = now + Duration::from_secs(1);
            let r = tx.rate();
            tracing::debug!(
                "blast send: {:.0} Mbit/s pacing, bw {:.0} Mbit/s, capacity {:.0} Mbit/s, {:?}, min_rtt {:?}, \
                 srtt {:?}, inflight {}/{}, loss {:.3}, {:?}, {:?}",
                r.pacing_rate_bps() / 1e6,
                r.bw_bps() / 1e6,
                r.capacity_bps() / 1e6,
                r.phase(),
                r.min_rtt(),
                r.srtt(),
                tx.inflight(),
                r.inflight_cap(),
                r.loss_rate(),
                r.stats(),
                tx.stats()
            );
        }
        if tx.poll_timeout().is_some_and(|t| t <= now) {
            tx.handle_timeout(now);
        }
        let mut budget = BUDGET;
        let mut blocked = false;
        loop {
            if q.sent == q.lens.len() {
                if budget == 0 {
                    break;
                }
                q.batch.clear();
                let n = tx
                    .poll_transmit(now, budget.min(BATCH), &src, &mut q.batch)
                    .map_err(|e| DataError::Io(std::io::Error::other(e.to_string())))?;
                if n == 0 {
                    break;
                }
                budget -= n;
                q.lens.clear();
                q.lens.extend((0..n).map(|i| q.batch.datagram(i).len()));
                q.sent = 0;
                q.off = 0;
            }
            match out.send(&sock, &peer, &q.batch.buffer()[q.off..], &q.lens[q.sent..]) {
                Ok(k) => {
                    q.off += q.lens[q.sent..q.sent + k].iter().sum::<usize>();
                    q.sent += k;
                    if q.sent < q.lens.len() {
                        blocked = true;
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    blocked = true;
                    break;
                }
                Err(e) => return Err(DataError::Io(e)),
            }
        }
        let wait = if budget == 0 && !blocked {
            Duration::ZERO
        } else {
            tx.poll_timeout()
                .map_or(MAX_WAIT, |t| t.saturating_duration_since(Instant::now()))
                .min(MAX_WAIT)
        };
        if !wait.is_zero() {
            udp::wait(&sock, true, blocked, Some(wait)).map_err(DataError::Io)?;
        }
    }
    let s = *tx.stats();
    Ok(BlastReport {
        bytes: params.total_bytes,
        packets: params.total_packets(),
        datagrams: s.datagrams,
        duplicates: s.receiver_duplicates,
        transmissions: s.datagrams,
        rejected: s.rejects.total() + foreign,
        foreign,
        rejects: s.rejects,
        resent: s.resent,
        hedge_copies: s.hedge_copies,
        acks: s.ack_datagrams,
        socket_drops: acks.socket_drops(),
        gso: out.gso(),
        gro: false,
        aead: opts.protection != drsftp_blast::Protection::None,
        ranges: std::iter::once(base..base + params.total_bytes)
            .filter(|r| !r.is_empty())
            .collect(),
        bitmap: vec![],
        resumed,
        seconds: start.elapsed().as_secs_f64(),
        phases: drsftp_blast::PhaseReport::default(),
        crc32c: src.whole_crc(),
    })
}
