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
    /// The factor is gentle (0.9, not the 0.75 this had): after a loss hole the application reads the backlog at
    /// once, one BDP sample is inflated (2.99 -> 6.22 MB on the time-varying lab path), and a window that falls
    /// back from it in 0.75x steps met cubic's recovery and provoked a second back-off in 3 of 9 runs (~0.85 of the
    /// best static buffer). 0.9 per interval with a 5 % `hysteresis` was 3 of 3 at the static buffer's rate with
    /// ~1.1x the mean window (docs/bench/drs-gridftp.md, swing-shrink3-ab.md).
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
    /// standing queue the sender builds (loss-based cc) is not counted twice.
    pub bdp_min_rtt: bool,
    pub min_rtt_window: Duration,
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
    /// the packets in flight, so the next window step released a line-rate burst and a double back-off. On the
    /// time-varying lab path that cost cubic 0.75-0.85 of the best static buffer in 7 of 9 runs; taking the reading
    /// as it is gave 0.96-1.00 in 4 of 5 (docs/bench/drs-gridftp.md). SBUF-echo samples (one every few seconds)
    /// are still smoothed.
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
    /// stream's window exceeds `share_gain` x (the transfer's highest rate x this stream's minimum RTT) / streams:
    /// DRS's 2x BDP applied to the whole transfer, split evenly. Each stream alone sizes from its own flight, and
    /// many streams' slow starts overshoot together: on a 40 ms, 1 Gbit/s, 0.1 % loss path 64 streams' windows
    /// summed to ~20 MB, four times the path's BDP, where 64 x 128 KiB fixed buffers carried as much.
    pub share_gain: f64,
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
            bdp_min_rtt: false,
            min_rtt_window: Duration::from_secs(10),
            parallel_from: 8,
            parallel_shrink_after: 4,
            parallel_shrink_factor: 0.75,
            share_gain: 2.0,
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
    source: RttSource,
    last_rtt_at: Option<Instant>,
    interval_start: Instant,
    interval_bytes: u64,
    recent: VecDeque<u64>,
    bdp: u64,
    ramping: bool,
    /// Parallel streams in the transfer and its highest rate (bytes/s), as last told (1 and 0 until then).
    streams: u64,
    transfer_rate: u64,
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
            source: RttSource::Assumed,
            last_rtt_at: None,
            interval_start: now,
            interval_bytes: 0,
            recent: VecDeque::new(),
            bdp: 0,
            ramping: true,
            streams: 1,
            transfer_rate: 0,
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

    /// The transfer now runs `n` parallel streams (this one included) and has moved at most `rate` bytes/s over
    /// any of its measuring periods so far (0: not known); see [`DrsConfig::parallel_from`] and
    /// [`DrsConfig::share_gain`].
    pub fn set_transfer(&mut self, n: u64, rate: u64) {
        self.streams = n.max(1);
        self.transfer_rate = rate;
    }

    /// This stream's share of the transfer's window, if the rules for many streams apply and it is known.
    pub fn share_cap(&self) -> Option<u64> {
        let (min_rtt, _) = self.min_rtt?;
        (self.streams >= self.cfg.parallel_from && self.transfer_rate > 0).then(|| {
            (self.cfg.share_gain * self.transfer_rate as f64 * min_rtt.as_secs_f64()
                / self.streams as f64) as u64
        })
    }

    /// Low samples to wait for, and the factor per interval, of a shrink.
    fn shrink(&self) -> (usize, f64) {
        if self.streams >= self.cfg.parallel_from {
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
        let expired = self
            .min_rtt
            .is_some_and(|(_, at)| now.saturating_duration_since(at) > self.cfg.min_rtt_window);
        if expired || self.min_rtt.is_none_or(|(m, _)| rtt <= m) {
            self.min_rtt = Some((rtt, now));
        }
    }

    fn close_interval(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.interval_start);
        if elapsed < self.interval() {
            return;
        }
        // Bytes delivered per RTT over the interval: the flight size the sender sustained (a lower bound on its
        // window when the interval is about one RTT, seed 002).
        let rtt = match (self.cfg.bdp_min_rtt, self.min_rtt) {
            (true, Some((m, _))) => m,
            _ => self.rtt(),
        };
        let bdp = (self.interval_bytes as f64 * rtt.as_secs_f64() / elapsed.as_secs_f64()) as u64;
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
        if want > cur {
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
        if next != cur && (change >= cur as f64 * self.cfg.hysteresis || next == self.cfg.max_buf) {
            self.buf = next;
            self.actions.push_back(DrsAction::SetRecvBuf(next));
            self.announce = self.cfg.probes;
        }
        self.maybe_probe(now);
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
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn drain(r: &mut DrsReceiver) -> Vec<DrsAction> {
        std::iter::from_fn(|| r.poll_action()).collect()
    }

    #[test]
    fn first_action_is_a_probe_announcing_the_buffer() {
        let t0 = Instant::now();
        let mut r = DrsReceiver::new(t0, DrsConfig::default());
        assert_eq!(
            drain(&mut r),
            vec![DrsAction::SendSbufProbe {
                id: 1,
                size: 256 * 1024
            }]
        );
        r.handle_sbuf_echo(t0 + ms(80), 1);
        assert_eq!(r.rtt(), ms(80));
        assert_eq!(r.rtt_source(), RttSource::SbufEcho);
        // Wrong id is ignored.
        r.handle_sbuf_echo(t0 + ms(90), 7);
        assert_eq!(r.rtt(), ms(80));
    }

    #[test]
    fn window_limited_flow_doubles_buffer_each_interval() {
        let t0 = Instant::now();
        let cfg = DrsConfig {
            probes: false,
            initial_rtt: ms(100),
            ..DrsConfig::default()
        };
        let mut r = DrsReceiver::new(t0, cfg);
        let mut t = t0;
        let mut sizes = vec![];
        for _ in 0..5 {
            // Sender fills exactly the advertised window each RTT.
            let w = r.buffer();
            for k in 0..10 {
                r.handle_bytes(t + ms(10 * k), w / 10);
            }
            t += ms(100);
            r.handle_timeout(t);
            sizes.push(r.buffer());
        }
        for w in sizes.windows(2) {
            assert!(w[1] >= 2 * w[0] * 9 / 10, "{sizes:?}");
        }
    }

    #[test]
    fn ramp_uses_gain_two_then_the_steady_gain() {
        let t0 = Instant::now();
        let cfg = DrsConfig {
            probes: false,
            initial_rtt: ms(100),
            initial_buf: 64 << 10,
            gain: 2.0,
            steady_gain: 1.5,
            ..DrsConfig::default()
        };
        let mut r = DrsReceiver::new(t0, cfg);
        let mut t = t0;
        let path = 1u64 << 20; // the path carries 1 MiB per RTT
        let mut flight = 64u64 << 10;
        let mut log = vec![];
        for round in 0..30 {
            // Slow start: the sender doubles every RTT, up to what the window and the path allow.
            let sent = flight.min(r.buffer()).min(path);
            for k in 0..10 {
                r.handle_bytes(t + ms(10 * k), sent / 10);
            }
            t += ms(100);
            r.handle_timeout(t);
            log.push((round, sent, r.buffer(), r.ramping()));
            flight = sent * 2;
        }
        // While the flight doubles, the window is 2x the last sample: the sender is never held below its doubling.
        let ramp: Vec<_> = log.iter().filter(|e| e.3).collect();
        assert!(ramp.len() >= 4, "{log:?}");
        for e in &ramp[1..] {
            assert!(e.2 >= 2 * e.1 * 9 / 10, "{log:?}");
        }
        // Once the path is full the ramp is over and the window settles at 1.5x the BDP, not 2x.
        let (_, sent, buf, ramping) = *log.last().unwrap();
        assert!(!ramping && sent == path, "{log:?}");
        assert!(
            buf >= path * 3 / 2 * 9 / 10 && buf <= path * 3 / 2 * 11 / 10,
            "{log:?}"
        );
    }

    /// Slow start past a full pipe: 1 MiB per 100 ms base RTT and room to queue 3 MiB more. Once the flight
    /// exceeds the pipe only the RTT grows (the queue fills), so the BDP samples keep doubling only if the RTT
    /// estimate follows the kernel's reading. Returns (flight sent, window after the round, ramping) per round.
    fn slow_start_into_a_queue(raw_tcp_rtt: bool) -> Vec<(u64, u64, bool)> {
        let t0 = Instant::now();
        let cfg = DrsConfig {
            probes: false,
            initial_rtt: ms(100),
            initial_buf: 64 << 10,
            raw_tcp_rtt,
            ..DrsConfig::default()
        };
        let mut r = DrsReceiver::new(t0, cfg);
        let rate = (1u64 << 20) as f64 / 0.1; // bytes per second at the bottleneck
        let (mut t, mut flight, mut log) = (t0, 64u64 << 10, vec![]);
        for _ in 0..9 {
            let sent = flight.min(r.buffer()).min(4 << 20);
            let rtt = Duration::from_secs_f64((sent as f64 / rate).max(0.1));
            let info = TcpSample {
                rcv_rtt: rtt,
                ..TcpSample::default()
            };
            r.handle_tcp_info(t, &info);
            for k in 0..10 {
                r.handle_bytes(t + rtt * k / 10, sent / 10);
            }
            t += rtt;
            r.handle_timeout(t);
            log.push((sent, r.buffer(), r.ramping()));
            flight = sent * 2;
        }
        log
    }

    #[test]
    fn the_ramp_lasts_while_slow_start_fills_the_queue() {
        // A round in which the flight doubled past the pipe but not yet to the queue's limit: the queue filling.
        let filling_queue = |e: &&(u64, u64, bool)| e.0 > 1 << 20 && e.0 < 4 << 20;
        let raw = slow_start_into_a_queue(true);
        // Every such round keeps gain 2 and a window of at least twice that flight, so the sender is never held
        // below its doubling.
        let filling: Vec<_> = raw.iter().filter(filling_queue).collect();
        assert!(!filling.is_empty(), "{raw:?}");
        for e in &filling {
            assert!(e.2 && e.1 >= 2 * e.0 * 9 / 10, "{raw:?}");
        }
        // Smoothing the kernel's reading again lags the queue: the ramp ended while the flight was still doubling.
        let smoothed = slow_start_into_a_queue(false);
        assert!(
            smoothed.iter().filter(filling_queue).any(|e| !e.2),
            "{smoothed:?}"
        );
    }

    #[test]
    fn a_window_limited_sender_still_grows_after_the_ramp() {
        let t0 = Instant::now();
        let cfg = DrsConfig {
            probes: false,
            initial_rtt: ms(100),
            steady_gain: 1.5,
            ..DrsConfig::default()
        };
        let mut r = DrsReceiver::new(t0, cfg);
        let mut t = t0;
        let mut feed = |r: &mut DrsReceiver, bytes: u64| {
            for k in 0..10 {
                r.handle_bytes(t + ms(10 * k), bytes / 10);
            }
            t += ms(100);
            r.handle_timeout(t);
        };
        // A flat 200 KB per RTT ends the ramp.
        for _ in 0..4 {
            feed(&mut r, 200_000);
        }
        assert!(!r.ramping());
        // Then the sender fills whatever window it gets (the path opened up): >= 1.5x per interval.
        let mut sizes = vec![r.buffer()];
        for _ in 0..4 {
            let w = r.buffer();
            feed(&mut r, w);
            sizes.push(r.buffer());
        }
        for w in sizes.windows(2) {
            assert!(w[1] as f64 >= w[0] as f64 * 1.5 * 0.9, "{sizes:?}");
        }
    }

    #[test]
    fn shrinks_slowly_after_sustained_low_samples() {
        let t0 = Instant::now();
        let cfg = DrsConfig {
            probes: false,
            initial_buf: 8 << 20,
            initial_rtt: ms(50),
            ..DrsConfig::default()
        };
        let mut r = DrsReceiver::new(t0, cfg.clone());
        let mut t = t0;
        let mut bufs = vec![];
        for _ in 0..80 {
            r.handle_bytes(t, 100_000);
            t += ms(50);
            r.handle_timeout(t);
            bufs.push(r.buffer());
        }
        // No shrink before `shrink_after` samples, then at most `1 - shrink_factor` per step, converging to the
        // steady gain (the flat samples ended the ramp) x 100 KB. The hysteresis lets every such step through.
        assert!(cfg.hysteresis < 1.0 - cfg.shrink_factor);
        assert!(
            bufs[..cfg.shrink_after - 1].iter().all(|&b| b == 8 << 20),
            "{bufs:?}"
        );
        for w in bufs.windows(2) {
            assert!(
                w[1] as f64 >= w[0] as f64 * cfg.shrink_factor - 1.0,
                "{bufs:?}"
            );
        }
        // It stops inside the hysteresis band above the target: a smaller step is not worth a setsockopt.
        let (last, want) = (*bufs.last().unwrap() as f64, 100_000.0 * cfg.steady_gain);
        assert!(
            last >= want && last <= want / (1.0 - cfg.hysteresis),
            "{bufs:?}"
        );
    }

    #[test]
    fn many_parallel_streams_shrink_sooner_and_faster() {
        // The same 8 MB window over 100 KB per RTT, with 1 and with 16 streams in the transfer.
        let run = |streams: u64| {
            let t0 = Instant::now();
            let cfg = DrsConfig {
                probes: false,
                initial_buf: 8 << 20,
                initial_rtt: ms(50),
                ..DrsConfig::default()
            };
            let mut r = DrsReceiver::new(t0, cfg);
            r.set_transfer(streams, 0);
            let mut t = t0;
            (0..80)
                .map(|_| {
                    r.handle_bytes(t, 100_000);
                    t += ms(50);
                    r.handle_timeout(t);
                    r.buffer()
                })
                .collect::<Vec<_>>()
        };
        let (one, many) = (run(1), run(16));
        let c = DrsConfig::default();
        let first_shrink = |b: &[u64]| b.iter().position(|&x| x < 8 << 20).unwrap();
        assert!(c.parallel_from <= 16 && c.parallel_shrink_after < c.shrink_after);
        assert_eq!(first_shrink(&one), c.shrink_after - 1, "{one:?}");
        assert_eq!(first_shrink(&many), c.parallel_shrink_after - 1, "{many:?}");
        let i = first_shrink(&many);
        assert_eq!(
            many[i],
            ((8 << 20) as f64 * c.parallel_shrink_factor) as u64
        );
        // Both settle on the same target (steady gain x 100 KB), the parallel one ~3x sooner.
        let target = 100_000.0 * c.steady_gain / (1.0 - c.hysteresis);
        let settled = |b: &[u64]| b.iter().position(|&x| x as f64 <= target).unwrap();
        assert!(settled(&many) * 2 < settled(&one), "{one:?} {many:?}");
        assert!(*many.last().unwrap() as f64 >= 100_000.0 * c.steady_gain);
        // Below `parallel_from` streams nothing changes.
        assert_eq!(run(c.parallel_from - 1), one);
    }

    #[test]
    fn many_streams_share_twice_the_transfers_bdp() {
        // A stream in slow start (its flight doubles every 40 ms interval) among `n` streams of a transfer that
        // peaked at 125 MB/s (1 Gbit/s) over a 40 ms path: at most 2 x 5 MB / n each.
        let run = |n: u64, rate: u64| {
            let t0 = Instant::now();
            let cfg = DrsConfig {
                probes: false,
                initial_buf: 64 << 10,
                ..DrsConfig::default()
            };
            let mut r = DrsReceiver::new(t0, cfg);
            r.set_transfer(n, rate);
            let info = TcpSample {
                rcv_rtt: ms(40),
                ..TcpSample::default()
            };
            let (mut t, mut flight) = (t0, 32_000u64);
            let mut top = 0;
            for _ in 0..12 {
                r.handle_tcp_info(t, &info);
                r.handle_bytes(t + ms(1), flight.min(r.buffer()));
                t += ms(40);
                flight *= 2;
                top = top.max(r.buffer());
            }
            r.handle_tcp_info(t, &info);
            (top, r.share_cap())
        };
        let c = DrsConfig::default();
        let (top, cap) = run(16, 125_000_000);
        let want = (c.share_gain * 125e6 * 0.040 / 16.0) as u64;
        assert_eq!(cap, Some(want));
        assert!(
            top <= want && top as f64 > want as f64 * 0.9,
            "{top} vs {want}"
        );
        // Without the transfer's rate, or with fewer streams than `parallel_from`, a stream sizes alone.
        let (alone, cap) = run(16, 0);
        assert_eq!(cap, None);
        assert!(alone > 4 * want, "{alone}");
        assert_eq!(run(c.parallel_from - 1, 125_000_000), (alone, None));
    }

    #[test]
    fn tcp_info_rtt_is_preferred_over_echo() {
        let t0 = Instant::now();
        let mut r = DrsReceiver::new(t0, DrsConfig::default());
        drain(&mut r);
        let s = TcpSample {
            rcv_rtt: ms(40),
            ..TcpSample::default()
        };
        r.handle_tcp_info(t0 + ms(5), &s);
        assert_eq!((r.rtt(), r.rtt_source()), (ms(40), RttSource::TcpInfo));
        r.handle_sbuf_echo(t0 + ms(150), 1); // app-level echo, 150 ms: ignored while TCP_INFO is fresh
        assert_eq!(r.rtt(), ms(40));
    }

    #[test]
    fn min_rtt_bdp_ignores_standing_queue() {
        // 10 MB/s path, 100 ms base RTT; the sender's queue raises the RTT to 170 ms.
        let run = |min_rtt: bool| {
            let t0 = Instant::now();
            let cfg = DrsConfig {
                probes: false,
                bdp_min_rtt: min_rtt,
                initial_buf: 1 << 20,
                steady_gain: 2.0,
                ..DrsConfig::default()
            };
            let mut r = DrsReceiver::new(t0, cfg);
            let mut t = t0;
            r.handle_tcp_info(
                t,
                &TcpSample {
                    rcv_rtt: ms(100),
                    ..TcpSample::default()
                },
            );
            for _ in 0..20 {
                r.handle_tcp_info(
                    t,
                    &TcpSample {
                        rcv_rtt: ms(170),
                        ..TcpSample::default()
                    },
                );
                for _ in 0..10 {
                    t += ms(17);
                    r.handle_bytes(t, 170_000);
                }
            }
            r.buffer()
        };
        let smoothed = run(false);
        let min = run(true);
        assert!(
            smoothed >= 2_900_000,
            "2 x 10 MB/s x ~150-170 ms: {smoothed}"
        );
        // An interval of one RTT (170 ms, as read) closes on the read that ends it, before counting it: 9 of the
        // 10 reads of 17 ms, so the sample is 0.9 of the rate.
        assert!(
            (1_750_000..=2_200_000).contains(&min),
            "2 x 10 MB/s x 100 ms: {min}"
        );
    }

    #[test]
    fn sender_bounds_send_buffer() {
        let t0 = Instant::now();
        let mut s = DrsSender::new(128 * 1024, 64 * 1024, 4 << 20);
        s.handle_tcp_info(
            t0,
            &TcpSample {
                cwnd_bytes: 1 << 20,
                ..TcpSample::default()
            },
        );
        s.handle_sbuf_request(t0, 3, 512 * 1024); // below cwnd: floor at cwnd
        assert_eq!(s.poll_action(), Some(DrsAction::SetSendBuf(1 << 20)));
        assert_eq!(
            s.poll_action(),
            Some(DrsAction::SbufReply {
                id: 3,
                size: 1 << 20
            })
        );
        s.handle_sbuf_request(t0, 4, 64 << 20); // above the cap
        assert_eq!(s.poll_action(), Some(DrsAction::SetSendBuf(4 << 20)));
        assert_eq!(
            s.poll_action(),
            Some(DrsAction::SbufReply {
                id: 4,
                size: 4 << 20
            })
        );
        s.handle_sbuf_request(t0, 5, 64 << 20); // unchanged: reply only
        assert_eq!(
            s.poll_action(),
            Some(DrsAction::SbufReply {
                id: 5,
                size: 4 << 20
            })
        );
        assert_eq!(s.poll_action(), None);
    }

    #[test]
    fn window_bounds_follow_seed_002() {
        // One RTT measured with a 10 ms timer: window between bytes/3 and bytes.
        let b = window_bounds(300_000, ms(110), ms(100), ms(10));
        assert_eq!(b.upper, Some(300_000));
        assert_eq!(b.lower, 100_000);
        // Shorter than an RTT: only a lower bound, the bytes themselves.
        let b = window_bounds(50_000, ms(40), ms(100), ms(0));
        assert_eq!(
            b,
            WindowBounds {
                lower: 50_000,
                upper: None
            }
        );
        // Ten RTTs: tight.
        let b = window_bounds(1_000_000, ms(1000), ms(100), ms(0));
        assert_eq!((b.lower, b.upper), (90_910, Some(100_000)));
    }
}
