//! Dynamic Right-Sizing: the receiver-side estimator (`DrsReceiver`) that keeps the receive buffer at about twice
//! the bandwidth-delay product (seeds 000 §4, 003 §4.3), and the sender side (`DrsSender`) that answers SBUF
//! requests (MODE E descriptor 0x02 / reply 0x01, or `SBUF <ID> <size>`) with a bounded send-buffer change.
//!
//! RTT comes from in-band SBUF echoes (portable; an application-to-application time that over-estimates the path
//! RTT, which only over-provisions) or from TCP_INFO `rcv_rtt` (sharper: the kernel's own receiver RTT estimate).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::sample::TcpSample;

/// What the I/O layer should do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrsAction {
    /// `setsockopt(SO_RCVBUF, n)` on the data socket (the usable window is about `n` on Linux).
    SetRecvBuf(u64),
    /// Send an SBUF request to the sender carrying our buffer size: in-band MODE E header with descriptor 0x02 and
    /// `size` in the count field, or `SBUF <id> <size>` on the control channel. Its echo gives an RTT sample.
    SendSbufProbe { id: u64, size: u64 },
    /// Sender side: `setsockopt(SO_SNDBUF, n)`.
    SetSendBuf(u64),
    /// Sender side: echo the request (descriptor 0x01 on the next outgoing header, or `200 SBUF <id> <size>`).
    SbufReply { id: u64, size: u64 },
}

/// Where the current RTT estimate comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RttSource {
    /// Nothing measured yet; `DrsConfig::initial_rtt` is used.
    Assumed,
    /// In-band SBUF request/echo round trip (application to application).
    SbufEcho,
    /// TCP_INFO (`rcv_rtt` or `rtt`), kernel-measured.
    TcpInfo,
}

/// Estimator tuning. All sizes are bytes in setsockopt units.
#[derive(Debug, Clone, PartialEq)]
pub struct DrsConfig {
    pub min_buf: u64,
    pub max_buf: u64,
    /// Buffer in force when the estimator starts (what the socket was given after window-scale set-up).
    pub initial_buf: u64,
    /// RTT assumed until one is measured.
    pub initial_rtt: Duration,
    /// Sampling interval floor (the interval is one RTT, but not below this nor above `max_interval`).
    pub min_interval: Duration,
    pub max_interval: Duration,
    /// Number of consecutive low samples before the buffer may shrink, and the per-interval shrink factor.
    /// The factor is gentle: after a loss hole the application reads the backlog at once, so one BDP sample is
    /// inflated, and a window that falls back from it in large steps meets cubic's recovery and provokes a second
    /// back-off (docs/drs.md).
    pub shrink_after: usize,
    pub shrink_factor: f64,
    /// Send SBUF probes in-band (only when the peer opted in).
    pub probes: bool,
    /// Re-probe when the last RTT sample is older than this many RTTs (and at least `min_probe_gap`).
    pub rtt_stale_rtts: u32,
    pub min_probe_gap: Duration,
    /// Ignore buffer changes smaller than this fraction of the current buffer (syscall and SBUF churn). Must be
    /// below `1 - shrink_factor`, or a shrink step is never taken.
    pub hysteresis: f64,
    /// Compute the BDP with the minimum RTT seen over the last `min_rtt_window` instead of the smoothed RTT, so a
    /// queue the sender builds (slow start's overshoot, a loss-based cc's standing queue) is not counted as path
    /// and then doubled by `gain`. After a lasting RTT increase it under-estimates for up to the window (10 s,
    /// as BBR's min-RTT filter), longer for an increase of 1.25-1.9x (`min_rtt_hold`: until the window halves);
    /// docs/drs.md has the measurements.
    pub bdp_min_rtt: bool,
    pub min_rtt_window: Duration,
    /// When the minimum RTT expires (`min_rtt_window`) while the RTT read shows a standing queue (`queue_ratio` x
    /// the minimum or more), keep the old minimum for up to this much longer instead of re-reading it behind the
    /// queue. A window-limited stream sized at `steady_gain` x rate x min RTT holds a queue of its own (RTT about
    /// `steady_gain` x the minimum), so re-reading there took that queue as path: the BDP grew by the ratio, the
    /// window with it, the queue again, every 10 s (a lone 500 Mbit/s copy's peak window 19-26 MB, 3-4x the BDP,
    /// 28-30 MB with `queue_share`; docs/drs.md). The minimum is re-read at once when a reading comes back within
    /// `queue_ratio` of it (the queue drained); with the reading of the moment when the window has halved since the
    /// hold began while the RTT stayed up (the queue is then not the stream's own: a longer path, or a competitor's
    /// queue, and the old minimum would only shrink the window further; the halving counts from the largest
    /// window since the minimum was set, so a change before the expiry is taken at it); else with the lowest reading of the hold
    /// when it ends, a safety net that lets a long transfer ratchet one step per window + hold instead of per
    /// window. Zero, or `queue_share` 0: re-read on expiry whatever the reading (the old behaviour).
    pub min_rtt_hold: Duration,
    /// Only while the lowest reading of the last second is below this multiple of the minimum is the queue held as
    /// DRS's own making: window-limited DRS streams, one or many transfers, settle at RTT = `steady_gain` x min /
    /// (1 - `queue_share` / window), about 1.5-1.6x, read 1.7-1.98x on the lab (two copies: noisy samples and the
    /// ordinary rule's quick growth hold the windows above it). Above it (a longer path, or a loss-based competitor filling a deeper
    /// queue) the minimum is re-read on expiry as before: holding there too left a path whose RTT rose 1.7-2.4x
    /// receive-window-limited in 0.16 of its rounds in the fluid profile (drs_fluid, in-band RTT), 0.09 at 1.9.
    pub min_rtt_hold_ratio: f64,
    /// Buffer = `gain` x BDP estimate while the sender ramps up (seeds: 2, for a sender doubling its window each
    /// RTT in slow start).
    pub gain: f64,
    /// Buffer = `steady_gain` x BDP estimate once the ramp is over: the first interval whose BDP sample grew by less
    /// than `ramp_growth` over the one before ends it, for good. Congestion avoidance grows the window by ~1 %
    /// per RTT (cubic at 100 ms) and BBR probes at 1.25x, so 2x only parks memory under a standing queue; a sender
    /// the window does limit still grows `steady_gain`x per interval (its flight is the whole window).
    pub steady_gain: f64,
    pub ramp_growth: f64,
    /// Take each TCP_INFO RTT reading as the estimate instead of smoothing it again. The kernel's `rcv_rtt` is
    /// already a moving average of per-segment timestamp samples, so it follows a filling queue within tens of
    /// milliseconds; a second 1/8 average on top (one reading per interval) lagged it by ~8 intervals. When a
    /// slow-start sender fills the bottleneck queue, delivered bytes stop growing and only the RTT does: with the
    /// lagging estimate the BDP samples grew by less than `ramp_growth`, the ramp ended while the sender was
    /// still in slow start, and the 1.5x window held it there. Linux keeps growing cwnd in slow start up to twice
    /// the packets in flight, so the next window step released a line-rate burst and a double back-off; taking the
    /// reading as it is avoids that (docs/drs.md). SBUF-echo samples (one every few seconds) are still smoothed.
    pub raw_tcp_rtt: bool,
    /// With at least this many parallel streams in the transfer ([`DrsReceiver::set_transfer`]), shrink after
    /// `parallel_shrink_after` low samples by `parallel_shrink_factor` per interval instead. One stream's shortfall
    /// costs the aggregate 1/N of it while every stream's excess adds up N times: the slow-start overshoot of 12
    /// streams joining a `-p auto` transfer held ~0.7-2 MB windows each for ~2 s on a 40 ms, 0.1 % loss path,
    /// half the transfer's peak window sum, against ~0.3 MB once settled.
    pub parallel_from: u64,
    pub parallel_shrink_after: usize,
    pub parallel_shrink_factor: f64,
    /// With `parallel_from` streams or more and the transfer's rate known ([`DrsReceiver::set_transfer`]), no
    /// stream's window exceeds `share_gain` x (the transfer's highest rate x the path's minimum RTT) / streams:
    /// DRS's 2x BDP applied to the whole transfer, split evenly. The path's minimum RTT is the lowest any of the
    /// transfer's streams saw (all share one path), else this stream's: streams that join a full path never see
    /// it without the queue (20 ms path, 0.1 % loss, 64 streams: 32-33 ms), and their windows then held the
    /// queue in place. Each stream alone sizes from its own flight, and
    /// many streams' slow starts overshoot together: on a 40 ms, 1 Gbit/s, 0.1 % loss path 64 streams' windows
    /// summed to ~20 MB, four times the path's BDP, where 64 x 128 KiB fixed buffers carried as much.
    pub share_gain: f64,
    /// Bytes of standing queue a window-limited stream may hold beyond `steady_gain` x its BDP sample, once the
    /// ramp is over and the RTT shows a queue (`queue_ratio`). A window sized only in proportion to the stream's
    /// own rate holds any split between window-limited flows that share a bottleneck: each delivers W / RTT and
    /// is given `steady_gain` x that x min RTT, which is W again at RTT = `steady_gain` x min RTT, whatever W is.
    /// Two default copies over one clean 500 Mbit/s, 100 ms cubic link kept their slow-start race's 1 : 2 for
    /// 25 s that way, where two iperf3 senders split evenly within 2 s. A constant term is the same for every
    /// stream, so the fixed point W (1 - `steady_gain` x min RTT / RTT) = `queue_share` is the same window, and
    /// rate, for each (the per-flow queue of TCP Vegas). Measured at 128 KiB it lifted the lower copy from
    /// 0.61-0.75 to 0.77-0.85 of half. Its cost alone was a peak window 1.15-1.45x higher, from the min-RTT
    /// re-read behind the queue it holds, which `min_rtt_hold` now stops; it still gives up "more bytes never give
    /// a smaller buffer" by one shrink step (a full window behind a queue follows its target down at once where a
    /// window that is not full is kept; tests/props.rs). 0 turns it off (docs/drs.md).
    pub queue_share: u64,
    /// A stream is window-limited when the bytes it delivers per (current) RTT reach this fraction of its buffer.
    pub limited_fraction: f64,
    /// A standing queue: the RTT reading at least this multiple of the minimum RTT.
    pub queue_ratio: f64,
    /// After the ramp, a window-limited stream behind a standing queue grows to the queue share's target from the
    /// smaller of its last two BDP samples, and shrinks toward it from the larger (a band), instead of following
    /// the larger both ways. The receiver reads in bursts and one interval's sample swings +-20 % around the
    /// stream's rate (lab traces, two copies on 500 Mbit/s · 100 ms); growing at once on any high sample, while
    /// intervals that read below `limited_fraction` (the low halves of the same swings) leave the window alone,
    /// ratcheted window, queue and RTT up. In the fluid model with +-20 % read bursts one transfer alone peaked at
    /// 6.6x the BDP with the RTT at 2.5x the minimum (1.7x and 1.66x without bursts); with the band 1.7x and 1.6x
    /// (tests/drs_noise.rs). The same two-sample rule on the ordinary growth (not window-limited, or no queue)
    /// changed nothing there and cost the fluid LANL-NY profile's in-band run 0.094 -> 0.140 of its rounds
    /// receive-window-limited: that growth is the ramp's and a path's, which must stay quick (docs/drs.md).
    pub grow_on_two: bool,
}

impl Default for DrsConfig {
    fn default() -> Self {
        DrsConfig {
            min_buf: 64 * 1024,
            max_buf: 64 * 1024 * 1024,
            initial_buf: 256 * 1024,
            initial_rtt: Duration::from_millis(100),
            min_interval: Duration::from_millis(20),
            max_interval: Duration::from_millis(1000),
            shrink_after: 8,
            shrink_factor: 0.9,
            probes: true,
            rtt_stale_rtts: 16,
            min_probe_gap: Duration::from_millis(500),
            hysteresis: 0.05,
            gain: 2.0,
            steady_gain: 1.5,
            ramp_growth: 1.25,
            raw_tcp_rtt: true,
            bdp_min_rtt: true,
            min_rtt_window: Duration::from_secs(10),
            min_rtt_hold: Duration::from_secs(60),
            min_rtt_hold_ratio: 1.9,
            parallel_from: 8,
            parallel_shrink_after: 4,
            parallel_shrink_factor: 0.75,
            share_gain: 2.0,
            queue_share: 128 * 1024,
            limited_fraction: 0.8,
            queue_ratio: 1.25,
            grow_on_two: true,
        }
    }
}

/// Receiver-side DRS estimator.
#[derive(Debug)]
pub struct DrsReceiver {
    cfg: DrsConfig,
    buf: u64,
    srtt: Option<Duration>,
    min_rtt: Option<(Duration, Instant)>,
    /// An expired minimum kept behind a standing queue (see [`DrsConfig::min_rtt_hold`]).
    hold: Option<MinRttHold>,
    /// Buffers in force over the last `FALL_ROUNDS` intervals, since the later of the ramp's end and the minimum
    /// RTT's last setting, and whether the window fell to half of one of them within that span: such a fall,
    /// before the minimum expired or during a hold, ends the hold at once.
    recent_bufs: VecDeque<(Instant, u64)>,
    fell: bool,
    /// Whether the window has shrunk since the ramp ended, and whether that first descent is over (`settle`).
    descended: bool,
    calm: usize,
    settled: bool,
    /// TCP_INFO/echo RTT readings of the last `RECENT_RTTS` (what [`DrsConfig::min_rtt_hold_ratio`] judges).
    recent_rtts: VecDeque<(Instant, Duration)>,
    source: RttSource,
    last_rtt_at: Option<Instant>,
    interval_start: Instant,
    interval_bytes: u64,
    recent: VecDeque<u64>,
    bdp: u64,
    ramping: bool,
    /// Parallel streams in the transfer, its highest rate (bytes/s) and the path's minimum RTT over all its streams,
    /// as last told (1, 0 and `None` until then).
    streams: u64,
    transfer_rate: u64,
    path_rtt: Option<Duration>,
    probe: Option<(u64, Instant)>,
    next_probe_id: u64,
    announce: bool,
    actions: VecDeque<DrsAction>,
}

impl DrsReceiver {
    pub fn new(now: Instant, cfg: DrsConfig) -> Self {
        let buf = cfg.initial_buf.clamp(cfg.min_buf, cfg.max_buf);
        let mut r = DrsReceiver {
            buf,
            srtt: None,
            min_rtt: None,
            hold: None,
            recent_bufs: VecDeque::new(),
            fell: false,
            descended: false,
            calm: 0,
            settled: false,
            recent_rtts: VecDeque::new(),
            source: RttSource::Assumed,
            last_rtt_at: None,
            interval_start: now,
            interval_bytes: 0,
            recent: VecDeque::new(),
            bdp: 0,
            ramping: true,
            streams: 1,
            transfer_rate: 0,
            path_rtt: None,
            probe: None,
            next_probe_id: 1,
            announce: cfg.probes,
            actions: VecDeque::new(),
            cfg,
        };
        if buf != r.cfg.initial_buf {
            r.actions.push_back(DrsAction::SetRecvBuf(buf));
        }
        r.maybe_probe(now);
        r
    }

    /// Current receive buffer (setsockopt units).
    pub fn buffer(&self) -> u64 {
        self.buf
    }
    /// Current RTT estimate (or the assumed one).
    pub fn rtt(&self) -> Duration {
        self.srtt.unwrap_or(self.cfg.initial_rtt)
    }
    pub fn rtt_source(&self) -> RttSource {
        self.source
    }
    /// Last BDP sample (bytes per RTT delivered), 0 before the first full interval.
    pub fn bdp_estimate(&self) -> u64 {
        self.bdp
    }
    /// Gain in force: `gain` while the sender ramps up, `steady_gain` after.
    pub fn gain(&self) -> f64 {
        if self.ramping {
            self.cfg.gain
        } else {
            self.cfg.steady_gain
        }
    }
    /// Whether the sender still ramps up (BDP samples growing by `ramp_growth` per interval).
    pub fn ramping(&self) -> bool {
        self.ramping
    }
    /// Current sampling interval: one RTT, clamped to [min_interval, max_interval].
    pub fn interval(&self) -> Duration {
        self.rtt()
            .clamp(self.cfg.min_interval, self.cfg.max_interval)
    }

    /// The transfer now runs `n` parallel streams (this one included), its rate meter's highest reading so far is
    /// `rate` bytes/s (0: not known), and the lowest RTT any of its streams saw is `path_rtt`;
    /// see [`DrsConfig::parallel_from`] and [`DrsConfig::share_gain`].
    pub fn set_transfer(&mut self, n: u64, rate: u64, path_rtt: Option<Duration>) {
        self.streams = n.max(1);
        self.transfer_rate = rate;
        self.path_rtt = path_rtt;
    }

    /// The lowest RTT this stream saw over the last `min_rtt_window` (what [`Self::set_transfer`] gathers).
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt.map(|(m, _)| m)
    }

    /// This stream's share of the transfer's window, if the rules for many streams apply and it is known.
    pub fn share_cap(&self) -> Option<u64> {
        let own = self.min_rtt()?;
        let min_rtt = self.path_rtt.map_or(own, |p| p.min(own));
        (self.many_streams() && self.transfer_rate > 0).then(|| {
            (self.cfg.share_gain * self.transfer_rate as f64 * min_rtt.as_secs_f64()
                / self.streams as f64) as u64
        })
    }

    /// Whether the rules for many parallel streams apply (see [`DrsConfig::parallel_from`]).
    fn many_streams(&self) -> bool {
        self.streams >= self.cfg.parallel_from
    }

    /// Low samples to wait for, and the factor per interval, of a shrink.
    fn shrink(&self) -> (usize, f64) {
        if self.many_streams() {
            (
                self.cfg.parallel_shrink_after,
                self.cfg.parallel_shrink_factor,
            )
        } else {
            (self.cfg.shrink_after, self.cfg.shrink_factor)
        }
    }

    /// `n` payload bytes were read from the data socket at `now`.
    pub fn handle_bytes(&mut self, now: Instant, n: u64) {
        self.close_interval(now);
        self.interval_bytes += n;
    }

    /// The sender echoed SBUF probe `id` (descriptor 0x01, or a `200 SBUF <id> <size>` reply).
    pub fn handle_sbuf_echo(&mut self, now: Instant, id: u64) {
        let Some((pid, sent)) = self.probe else {
            return;
        };
        if pid != id {
            return;
        }
        self.probe = None;
        let rtt = now.saturating_duration_since(sent);
        // TCP_INFO is sharper; an echo only replaces it when TCP_INFO has gone stale.
        let tcp_fresh = self.source == RttSource::TcpInfo
            && self
                .last_rtt_at
                .is_some_and(|t| now.saturating_duration_since(t) < self.rtt() * 4);
        if !tcp_fresh && rtt > Duration::ZERO {
            self.rtt_sample(now, rtt, RttSource::SbufEcho);
        }
        self.close_interval(now);
    }

    /// A TCP_INFO reading of the data socket. Uses `rcv_rtt` (receiver's estimate), else `rtt`.
    pub fn handle_tcp_info(&mut self, now: Instant, info: &TcpSample) {
        let rtt = if !info.rcv_rtt.is_zero() {
            info.rcv_rtt
        } else {
            info.rtt
        };
        if !rtt.is_zero() {
            self.rtt_sample(now, rtt, RttSource::TcpInfo);
        }
        self.close_interval(now);
    }

    /// Timer expiry (see [`poll_timeout`](Self::poll_timeout)).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.close_interval(now);
        self.maybe_probe(now);
    }

    pub fn poll_action(&mut self) -> Option<DrsAction> {
        self.actions.pop_front()
    }

    /// Next time `handle_timeout` should be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let end = self.interval_start + self.interval();
        if !self.cfg.probes {
            return Some(end);
        }
        let probe_at = match self.probe {
            Some((_, sent)) => sent + self.probe_timeout(),
            None => self.last_rtt_at.map_or(end, |t| t + self.stale_after()),
        };
        Some(end.min(probe_at))
    }

    fn probe_timeout(&self) -> Duration {
        (self.rtt() * 4).max(Duration::from_secs(1))
    }

    fn stale_after(&self) -> Duration {
        (self.rtt() * self.cfg.rtt_stale_rtts).max(self.cfg.min_probe_gap)
    }

    fn rtt_sample(&mut self, now: Instant, rtt: Duration, source: RttSource) {
        self.srtt = Some(match self.srtt {
            _ if source == RttSource::TcpInfo && self.cfg.raw_tcp_rtt => rtt,
            Some(s) if self.source == source => (s * 7 + rtt) / 8,
            _ => rtt,
        });
        self.source = source;
        self.last_rtt_at = Some(now);
        self.min_rtt_sample(now, rtt);
    }

    /// Keeps the windowed minimum RTT, holding an expired one behind a standing queue ([`DrsConfig::min_rtt_hold`]).
    fn min_rtt_sample(&mut self, now: Instant, rtt: Duration) {
        while self
            .recent_rtts
            .front()
            .is_some_and(|&(t, _)| now.saturating_duration_since(t) > RECENT_RTTS)
        {
            self.recent_rtts.pop_front();
        }
        self.recent_rtts.push_back((now, rtt));
        self.note_buffer(now);
        let Some((m, at)) = self.min_rtt else {
            self.set_min_rtt(now, rtt);
            return;
        };
        let queued = rtt.as_secs_f64() >= m.as_secs_f64() * self.cfg.queue_ratio;
        if rtt <= m || (self.hold.is_some() && !queued) {
            // A new minimum, or the queue drained during a hold: this reading is the path's.
            self.set_min_rtt(now, rtt);
            return;
        }
        if now.saturating_duration_since(at) <= self.cfg.min_rtt_window {
            return;
        }
        // Judged on the lowest reading of the last second: one RTT reading behind a window-limited queue swings
        // 10-15 % between intervals (170-198 ms on the 100 ms lab with two copies), a longer path does not.
        let low = self
            .recent_rtts
            .iter()
            .map(|&(_, r)| r)
            .min()
            .unwrap_or(rtt);
        let own = low.as_secs_f64() <= m.as_secs_f64() * self.cfg.min_rtt_hold_ratio;
        // Only with the queue share: it keeps a window held under a path that grew by less than the hold ratio
        // from sliding toward the floor until the halving releases it (without it the fluid profile's 119 -> 200 ms
        // step left the window short in 0.31 of all rounds, against 0.09 re-reading on expiry).
        let hold = !self.cfg.min_rtt_hold.is_zero() && self.cfg.queue_share > 0;
        if !queued || !own || !hold {
            self.set_min_rtt(now, rtt);
            return;
        }
        let hold = self.hold.get_or_insert(MinRttHold {
            since: now,
            lowest: rtt,
        });
        hold.lowest = hold.lowest.min(rtt);
        let (since, lowest) = (hold.since, hold.lowest);
        if self.fell {
            // The window fell under the held minimum and the RTT did not: the path (or a queue not ours) is what
            // is read now. The lowest reading of the hold may predate the change.
            self.set_min_rtt(now, rtt);
        } else if now.saturating_duration_since(since) >= self.cfg.min_rtt_hold {
            self.set_min_rtt(now, lowest);
        }
    }

    fn set_min_rtt(&mut self, now: Instant, rtt: Duration) {
        self.min_rtt = Some((rtt, now));
        self.hold = None;
        self.recent_bufs.clear();
        self.fell = false;
        self.note_buffer(now);
    }

    /// Keeps [`Self::recent_bufs`] and notes a fall to half within it. Only after the ramp, and only a quick fall
    /// (`FALL_ROUNDS`): a minimum held under a path 1.6x longer takes a lone window-limited stream's window to half
    /// in ~34 intervals (the share's target, ~0.94x per interval toward its fixed point; tests/drs_min_rtt.rs),
    /// while a window that comes down from slow start's overshoot as a competitor takes its share falls slower: on
    /// the lab (two default copies, 500 Mbit/s · 100 ms, cubic, 5421bb2) one copy's streams went 2.56 -> 1.35 MB
    /// over 11 s and 2.19 -> 1.18 MB over 13 s (65-75 intervals). Counted from the largest window since the minimum
    /// was set, as before, those falls ended the hold at the expiry and the minimum was re-read behind the copies'
    /// own queue (170 ms): the windows grew to 4.5 and 7.0 MB, the 1-BDP queue overflowed, the copies split
    /// 0.75 / 1.17 of half. The cost: a path only 1.5-1.6x longer, whose held window falls slower, keeps the
    /// held minimum for up to `min_rtt_hold`.
    fn note_buffer(&mut self, now: Instant) {
        if !self.settled {
            return;
        }
        let span = self.interval() * FALL_ROUNDS;
        while self
            .recent_bufs
            .front()
            .is_some_and(|&(t, _)| now.saturating_duration_since(t) > span)
        {
            self.recent_bufs.pop_front();
        }
        let peak = self.recent_bufs.iter().map(|&(_, b)| b).max().unwrap_or(0);
        if self.buf <= peak / 2 {
            self.fell = true;
        }
        self.recent_bufs.push_back((now, self.buf));
        if self.recent_bufs.len() > MAX_RECENT_BUFS {
            self.recent_bufs.pop_front();
        }
    }

    fn close_interval(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.interval_start);
        if elapsed < self.interval() {
            return;
        }
        // Bytes delivered per RTT over the interval: the flight size the sender sustained (a lower bound on its
        // window when the interval is about one RTT, seed 002). With `bdp_min_rtt` the RTT is the path's: a
        // sender filling the bottleneck queue inflates the RTT read, and delivered bytes x that RTT would count
        // the queue as path before `gain` doubles it again.
        let rtt = match (self.cfg.bdp_min_rtt, self.min_rtt) {
            (true, Some((m, _))) => m,
            _ => self.rtt(),
        };
        let bdp = (self.interval_bytes as f64 * rtt.as_secs_f64() / elapsed.as_secs_f64()) as u64;
        // Bytes in flight at the RTT read now: the flight the window allowed over this interval.
        let flight = self
            .srtt
            .filter(|_| self.source == RttSource::TcpInfo)
            .map(|r| (self.interval_bytes as f64 * r.as_secs_f64() / elapsed.as_secs_f64()) as u64);
        self.interval_start = now;
        self.interval_bytes = 0;
        if self.ramping
            && self.recent.len() >= 2
            && (bdp as f64) < self.bdp as f64 * self.cfg.ramp_growth
        {
            self.ramping = false;
        }
        self.bdp = bdp;
        self.recent.push_back(bdp);
        let (shrink_after, shrink_factor) = self.shrink();
        while self.recent.len() > shrink_after.max(1) {
            self.recent.pop_front();
        }
        let cur = self.buf;
        let mut next = cur;
        let gain = self.gain();
        let want = (bdp as f64 * gain) as u64;
        let mut step = cur as f64 * self.cfg.hysteresis;
        if let Some((up, down)) = self.queue_share_target(flight, cur) {
            // Window-limited behind a standing queue: follow the target both ways, shrinking by at most
            // `shrink_factor` per interval. The step threshold is a fraction of the queue share, not of the buffer:
            // the hysteresis (5 % of a 1.5x-BDP window, about a tenth of the queue) would otherwise leave a dead
            // band as wide as the imbalance being removed.
            next = if up > cur {
                up
            } else if down < cur {
                down.max((cur as f64 * shrink_factor) as u64)
            } else {
                cur
            };
            step = step.min(self.cfg.queue_share as f64 / 8.0);
        } else if want > cur {
            // Grow at once: in slow start the sender may double every RTT (seed 000 §4.3).
            next = want;
        } else if self.recent.len() >= shrink_after {
            let peak = self.recent.iter().copied().max().unwrap_or(0) as f64 * gain;
            let peak = peak as u64;
            if (peak as f64) < cur as f64 * (1.0 - self.cfg.hysteresis) {
                next = peak.max((cur as f64 * shrink_factor) as u64);
            }
        }
        let next = self
            .share_cap()
            .map_or(next, |c| next.min(c))
            .clamp(self.cfg.min_buf, self.cfg.max_buf);
        let change = next.abs_diff(cur) as f64;
        if next != cur && (change >= step || next == self.cfg.max_buf) {
            self.buf = next;
            self.actions.push_back(DrsAction::SetRecvBuf(next));
            self.announce = self.cfg.probes;
        }
        self.settle(cur);
        self.maybe_probe(now);
    }

    /// After the ramp the window comes down from slow start's overshoot (`gain` 2 -> `steady_gain` 1.5, and the
    /// overshoot itself) in shrinks with pauses between them; `shrink_after` intervals in a row that do not shrink
    /// it, after the first shrink, end that descent, and only from then on do windows count for the fall that ends
    /// a min-RTT hold (`note_buffer`).
    fn settle(&mut self, before: u64) {
        if self.ramping || self.settled {
            return;
        }
        if self.buf < before {
            self.descended = true;
            self.calm = 0;
        } else if self.descended {
            self.calm += 1;
            if self.calm >= self.shrink().0 {
                self.settled = true;
                self.recent_bufs.clear();
            }
        }
    }

    /// The window of a stream that fills its window behind a standing queue after the ramp (see
    /// [`DrsConfig::queue_share`]): `steady_gain` x a BDP sample plus the queue share, as the bounds (grow to, shrink
    /// toward) of a band: grown to from the smaller of the last two samples, shrunk toward from the larger. One low
    /// reading (a reader held off the CPU) must not cut the window, and one high one (a burst of reads) must not
    /// grow it (`grow_on_two`). `None` where the usual rules apply.
    fn queue_share_target(&self, flight: Option<u64>, cur: u64) -> Option<(u64, u64)> {
        if self.cfg.queue_share == 0 || self.ramping || !self.cfg.bdp_min_rtt {
            return None;
        }
        let limited = flight? as f64 >= cur as f64 * self.cfg.limited_fraction;
        if !self.standing_queue() || !limited {
            return None;
        }
        let last = self.recent.iter().rev().take(2).copied();
        let (lo, hi) = (last.clone().min()?, last.max()?);
        let target = |b: u64| (b as f64 * self.cfg.steady_gain) as u64 + self.cfg.queue_share;
        let up = if self.cfg.grow_on_two { lo } else { hi };
        Some((target(up), target(hi)))
    }

    /// The RTT read stands at `queue_ratio` x the minimum or more.
    fn standing_queue(&self) -> bool {
        match (self.srtt, self.min_rtt()) {
            (Some(s), Some(m)) => s.as_secs_f64() >= m.as_secs_f64() * self.cfg.queue_ratio,
            _ => false,
        }
    }

    fn maybe_probe(&mut self, now: Instant) {
        if !self.cfg.probes {
            return;
        }
        if let Some((_, sent)) = self.probe {
            if now.saturating_duration_since(sent) < self.probe_timeout() {
                return;
            }
            self.probe = None; // lost or ignored by the peer
        }
        let stale = self
            .last_rtt_at
            .is_none_or(|t| now.saturating_duration_since(t) >= self.stale_after());
        if self.announce
            || (stale && self.source != RttSource::TcpInfo)
            || self.last_rtt_at.is_none()
        {
            let id = self.next_probe_id;
            self.next_probe_id += 1;
            self.probe = Some((id, now));
            self.announce = false;
            self.actions
                .push_back(DrsAction::SendSbufProbe { id, size: self.buf });
        }
    }
}

/// How far back the readings go that [`DrsConfig::min_rtt_hold_ratio`] judges.
const RECENT_RTTS: Duration = Duration::from_secs(1);

/// How many sampling intervals back a fall of the window to half counts as quick (see `DrsReceiver::note_buffer`).
const FALL_ROUNDS: u32 = 40;

/// A bound on the buffers kept for it (one per RTT reading: normally one per interval).
const MAX_RECENT_BUFS: usize = 4 * FALL_ROUNDS as usize;

/// An expired minimum RTT kept while a standing queue lasts: when the hold began and the lowest reading since.
#[derive(Debug, Clone, Copy)]
struct MinRttHold {
    since: Instant,
    lowest: Duration,
}

/// Seed 002's bounds on the sender's window from `bytes` seen by the receiver over `period`, given the RTT and the
/// timer granularity `g`: a period of about k RTTs spans between ⌊(T−g)/RTT⌋ and ⌈(T+g)/RTT⌉+1 partial rounds.
/// A period shorter than one RTT only gives a lower bound (`upper == None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowBounds {
    pub lower: u64,
    pub upper: Option<u64>,
}

pub fn window_bounds(bytes: u64, period: Duration, rtt: Duration, g: Duration) -> WindowBounds {
    if rtt.is_zero() {
        return WindowBounds {
            lower: bytes,
            upper: None,
        };
    }
    let lo_t = period.saturating_sub(g).as_secs_f64() / rtt.as_secs_f64();
    let hi_t = (period + g).as_secs_f64() / rtt.as_secs_f64();
    let k_max = hi_t.ceil().max(1.0) + 1.0;
    let k_min = lo_t.floor();
    let lower = (bytes as f64 / k_max).ceil() as u64;
    if k_min < 1.0 {
        let lower = if hi_t <= 1.0 { bytes } else { lower };
        return WindowBounds { lower, upper: None };
    }
    WindowBounds {
        lower,
        upper: Some((bytes as f64 / k_min).floor() as u64),
    }
}

/// Sender side of DRS: applies SBUF requests to the send buffer, never below what the connection already has in
/// flight (TCP_INFO cwnd, or seed 002's lower bound from bytes sent per RTT) and never above `max_buf`.
#[derive(Debug)]
pub struct DrsSender {
    min_buf: u64,
    max_buf: u64,
    buf: u64,
    cwnd: u64,
    actions: VecDeque<DrsAction>,
}

impl DrsSender {
    pub fn new(initial_buf: u64, min_buf: u64, max_buf: u64) -> Self {
        DrsSender {
            min_buf,
            max_buf,
            buf: initial_buf,
            cwnd: 0,
            actions: VecDeque::new(),
        }
    }
    pub fn buffer(&self) -> u64 {
        self.buf
    }
    /// TCP_INFO of the sending socket: its congestion window is a floor for the send buffer.
    pub fn handle_tcp_info(&mut self, _now: Instant, info: &TcpSample) {
        self.cwnd = info.cwnd_bytes;
    }
    /// An SBUF request (`size` = the receiver's buffer).
    pub fn handle_sbuf_request(&mut self, _now: Instant, id: u64, size: u64) {
        let floor = self.min_buf.max(self.cwnd).min(self.max_buf);
        let n = size.clamp(floor, self.max_buf);
        if n != self.buf {
            self.buf = n;
            self.actions.push_back(DrsAction::SetSendBuf(n));
        }
        self.actions.push_back(DrsAction::SbufReply { id, size: n });
    }
    pub fn poll_action(&mut self) -> Option<DrsAction> {
        self.actions.pop_front()
    }
}

#[cfg(test)]
mod tests;
