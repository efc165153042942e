//! `-p auto` online refinement on the sending side (docs/drs.md §4.5): [`AutoSender`] runs a dynamic MODE E send
//! ([`super::send_mode_e_dynamic`]) and, every `interval`, feeds the aggregate goodput (bytes acknowledged,
//! `Progress::acked`, where TCP_INFO has them) to `drsftp_tune::AutoStreams`; its `Add(k)` opens `k` connections with the caller's connect closure (they join
//! the block cursor as they come up), its `Retire(k)` asks `k` connections to finish their block and send EOD.
//! A connection that comes up after the transfer is over is never dropped (the receiver would see an unused
//! connection close): it is handed back in `reusable`. A [`GrowthGate`] lets the caller hold the controller's
//! upward probes (an upload watched by `--transport auto`, until the transport rule's first verdict).

use std::future::Future;
use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::tls::MaybeTls;
use drsftp_storage::FileHandle;
use drsftp_tune::{AutoConfig, AutoStreams, PathSample, StreamAction};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::mode_e_send::SendControl;
use super::{DataError, DataOpts, DataReport, Progress};

/// Default sampling period of the controller.
pub const AUTO_INTERVAL: Duration = Duration::from_millis(250);

/// A first-connection RTT at least this long most likely timed a retransmitted handshake (see [`AutoSender::send`]).
const HANDSHAKE_RETRY_RTT: Duration = Duration::from_secs(1);

/// One decision of the controller, as applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoEvent {
    /// Since the transfer started.
    pub at: Duration,
    pub action: StreamAction,
    /// Streams the controller wanted after this action.
    pub streams: u32,
}

/// What an auto-tuned send did.
#[derive(Debug)]
pub struct AutoReport {
    /// The engine's report (`streams`: every connection that carried the transfer).
    pub data: DataReport,
    /// The controller's decisions, in order.
    pub actions: Vec<AutoEvent>,
    /// Streams the controller wanted at the end, and whether it had settled (steady state).
    pub final_streams: u32,
    pub steady: bool,
    /// Connections the controller asked for that failed to open (logged; the transfer went on without them).
    pub connect_failures: u32,
}

/// Holds an [`AutoSender`]'s upward probes while closed (`drsftp_tune::AutoStreams::hold_growth`); clones share
/// one flag, so whoever judges the path opens it for the sender running elsewhere.
#[derive(Debug, Clone, Default)]
pub struct GrowthGate(Arc<AtomicBool>);

impl GrowthGate {
    /// A gate that holds growth until [`Self::open`].
    pub fn closed() -> Self {
        GrowthGate(Arc::new(AtomicBool::new(true)))
    }
    /// Lets the controller probe upward again (idempotent).
    pub fn open(&self) {
        self.0.store(false, Ordering::Relaxed);
    }
    /// Whether growth is held now.
    pub fn is_closed(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Drives `AutoStreams` over a dynamic MODE E send. See the module docs.
#[derive(Debug, Clone)]
pub struct AutoSender {
    pub config: AutoConfig,
    /// How often goodput is sampled (default [`AUTO_INTERVAL`]).
    pub interval: Duration,
    /// Upward probes are held while this is closed (`None`: never held).
    pub gate: Option<GrowthGate>,
}

impl AutoSender {
    pub fn new(config: AutoConfig) -> Self {
        AutoSender {
            config,
            interval: AUTO_INTERVAL,
            gate: None,
        }
    }

    /// This sender with its growth held by `gate` (module docs).
    pub fn with_gate(self, gate: Option<GrowthGate>) -> Self {
        AutoSender { gate, ..self }
    }

    /// Send `ranges` of `file` starting on `socks` (at least one: the controller starts from `socks.len()`),
    /// opening more connections with `connect` when the controller asks. Errors of `connect` are not fatal.
    #[allow(clippy::too_many_arguments)]
    pub async fn send<C, F, S>(
        &self,
        socks: Vec<S>,
        mut connect: C,
        file: Arc<dyn FileHandle>,
        ranges: Vec<Range<u64>>,
        wire_sub: u64,
        opts: &DataOpts,
        progress: Arc<Progress>,
    ) -> Result<AutoReport, DataError>
    where
        C: FnMut() -> F,
        F: Future<Output = io::Result<S>> + Send + 'static,
        S: Into<MaybeTls> + Send + 'static,
    {
        // Cleartext or TLS (`PROT P`: `connect` also runs the handshake); TCP_INFO reads the socket beneath.
        let socks: Vec<MaybeTls> = socks.into_iter().map(Into::into).collect();
        let begin = Instant::now();
        // The path's RTT from the first connection's handshake (TCP_INFO), to size the controller's settle time
        // and measurement window (`AutoConfig::scaled_to_rtt`); unknown (not Linux, or no sample): as configured.
        let rtt = socks
            .first()
            .and_then(|s| drsftp_sys::tcp_info::tcp_info(s.tcp()).ok())
            .map(|i| i.rtt)
            .filter(|r| !r.is_zero());
        let scaled = |rtt: Option<Duration>| match rtt {
            Some(r) => self.config.clone().scaled_to_rtt(r, self.interval),
            None => self.config.clone(),
        };
        let config = scaled(rtt);
        tracing::debug!(?rtt, settle = ?config.settle, samples = config.samples, "-p auto controller");
        let start = socks.len() as u32;
        let mut auto = AutoStreams::new(begin, start, config);
        // A handshake that needed a retransmission reads >= 1 s (Linux's initial RTO; a lost SYN-ACK is timed from
        // the first SYN): on the 40 ms, 0.1 % loss lab path one run in ~10 started with 1.04 s, a 5 s settle time
        // and a 10 s measurement, and was cut at 25 s. Such a reading is re-taken from the first connection's
        // TCP_INFO minimum RTT (data ACKs) until the controller has acted.
        let mut recheck = rtt
            .filter(|r| *r >= HANDSHAKE_RETRY_RTT)
            .and(socks.first())
            .and_then(|s| std::os::fd::AsFd::as_fd(s.tcp()).try_clone_to_owned().ok());
        let control = SendControl::new();
        let (tx, rx) = mpsc::channel(64);
        let send = super::send_mode_e_dynamic(
            socks,
            rx,
            control.clone(),
            file,
            ranges,
            wire_sub,
            opts,
            Arc::clone(&progress),
        );
        tokio::pin!(send);
        let mut tick =
            tokio::time::interval_at(tokio::time::Instant::now() + self.interval, self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut connecting: JoinSet<io::Result<S>> = JoinSet::new();
        // Connected but not yet taken by the engine (its channel was full).
        let mut waiting: Vec<MaybeTls> = vec![];
        let mut late: Vec<MaybeTls> = vec![];
        let mut actions = vec![];
        let mut failures = 0u32;
        // Goodput: acknowledged bytes where TCP_INFO gives them, else bytes handed to the sockets.
        let moved = |p: &Progress| match p.acked() {
            0 => p.bytes(),
            a => a,
        };
        let (mut last_t, mut last_b) = (Instant::now(), moved(&progress));
        let mut last_path = progress.path();
        let result = loop {
            tokio::select! {
                r = &mut send => break r,
                _ = tick.tick() => {
                    let now = Instant::now();
                    if let Some(fd) = recheck.as_ref() {
                        let min = drsftp_sys::tcp_info::tcp_info(fd).map(|i| i.min_rtt).unwrap_or_default();
                        if !actions.is_empty() {
                            recheck = None;
                        } else if !min.is_zero() && min < HANDSHAKE_RETRY_RTT {
                            let config = scaled(Some(min));
                            tracing::debug!(rtt = ?min, settle = ?config.settle, "-p auto controller re-scaled");
                            auto = AutoStreams::new(begin, start, config);
                            recheck = None;
                        }
                    }
                    let b = moved(&progress);
                    let dt = now.saturating_duration_since(last_t).as_secs_f64();
                    let path = progress.path();
                    let d = PathSample {
                        sent: path.sent.saturating_sub(last_path.sent),
                        retrans: path.retrans.saturating_sub(last_path.retrans),
                        rtt_us: path.rtt_us.saturating_sub(last_path.rtt_us),
                        min_rtt_us: path.min_rtt_us.saturating_sub(last_path.min_rtt_us),
                        mss: path.mss,
                    };
                    last_path = path;
                    if let Some(g) = &self.gate {
                        auto.hold_growth(now, g.is_closed());
                    }
                    auto.handle_path(now, d);
                    if dt > 0.0 {
                        let rate = b.saturating_sub(last_b) as f64 / dt;
                        tracing::trace!(
                            mbps = rate * 8e-6,
                            streams = auto.streams(),
                            loss = d.retrans as f64 / d.sent.max(1) as f64,
                            queue = d.rtt_us as f64 / d.min_rtt_us.max(1) as f64,
                            "-p auto sample"
                        );
                        auto.handle_sample(now, rate);
                    }
                    (last_t, last_b) = (now, b);
                    if auto.poll_timeout().is_some_and(|t| now >= t) {
                        auto.handle_timeout(now);
                    }
                    while let Some(a) = auto.poll_action() {
                        actions.push(AutoEvent { at: now - begin, action: a, streams: auto.streams() });
                        tracing::debug!(?a, streams = auto.streams(), "-p auto");
                        match a {
                            StreamAction::Add(k) if !control.is_closed() => {
                                for _ in 0..k {
                                    connecting.spawn(connect());
                                }
                            }
                            StreamAction::Add(_) => {}
                            StreamAction::Retire(k) => control.retire(k as usize),
                        }
                    }
                    offer(&tx, &mut waiting, &mut late);
                }
                Some(j) = connecting.join_next(), if !connecting.is_empty() => {
                    match j {
                        Ok(Ok(s)) => {
                            waiting.push(s.into());
                            offer(&tx, &mut waiting, &mut late);
                        }
                        Ok(Err(e)) => {
                            failures += 1;
                            tracing::warn!("-p auto: opening another data connection failed: {e}");
                        }
                        Err(e) => {
                            failures += 1;
                            tracing::warn!("-p auto: connect task failed: {e}");
                        }
                    }
                }
            }
        };
        // Connections still coming up are waited for, so none is dropped half-way (the receiver may already have
        // accepted it); each is bounded by the caller's connect timeout.
        drop(tx);
        late.append(&mut waiting);
        while let Some(j) = connecting.join_next().await {
            if let Ok(Ok(s)) = j {
                late.push(s.into());
            }
        }
        let mut data = result?;
        data.reusable.append(&mut late);
        Ok(AutoReport {
            data,
            actions,
            final_streams: auto.streams(),
            steady: auto.is_steady(),
            connect_failures: failures,
        })
    }
}

/// Hand connected sockets to the engine without waiting (the engine is polled by the same task); a closed
/// engine's leftovers go to `late`.
fn offer(tx: &mpsc::Sender<MaybeTls>, waiting: &mut Vec<MaybeTls>, late: &mut Vec<MaybeTls>) {
    while let Some(s) = waiting.pop() {
        match tx.try_send(s) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(s)) => {
                waiting.push(s);
                return;
            }
            Err(mpsc::error::TrySendError::Closed(s)) => late.push(s),
        }
    }
}
