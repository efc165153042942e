//! `--transport auto` for uploads (docs/auto-transport.md): a TCP upload watched by the transport rule on the
//! sender's own TCP_INFO (retransmitted segments and the smoothed RTT, `Progress::tx_reading`: better evidence
//! than a receiver's out-of-order count), and the fall-back from a blast upload whose datagrams get no answer.
//!
//! While the rule has not judged yet, `-p auto` holds its starting streams ([`GrowthGate`]): the rule tells
//! random loss from congestion by the standing queue, and on a lossy path the controller's loss-limited steps
//! build one of their own (100 Mbit/s, 50 ms, 1 %: 5 -> 21 -> 64 streams in 4.3 s, RTT 70 ms against 50), which
//! the rule read as congestion and kept the upload on TCP at 49 Mbit/s. Holding growth, not discounting the
//! queue, because the rule cannot tell a queue our streams built from one a competitor built at the same time,
//! and a switch resends the whole file, so an early verdict is worth more than early streams; the hold ends at
//! the first verdict (~3 s at RTTs up to 100 ms, where `-p auto`'s own first step comes at 1-3 s anyway).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use drsftp_tune::{Decision, TransportConfig, TransportDecider};

use super::control::Control;
use super::transfer::Moved;
use super::{ClientError, ClientOptions};
use crate::data::{GrowthGate, Progress};

/// A blast upload with nothing acknowledged this long after the server's `150`: UDP looks blocked, use TCP.
pub(super) const BLAST_BLOCKED_AFTER: Duration = Duration::from_secs(1);

/// How often the rule gets a reading of the sending streams.
const SAMPLE: Duration = Duration::from_millis(250);

/// Stream growth is held at most this long without a verdict (a stalled transfer, or readings the rule cannot
/// judge): past the rule's warm-up plus twice its window up to 200 ms of RTT.
const HOLD_AT_MOST: Duration = Duration::from_secs(16);

/// The sender's decider: the path profile's rate as blast's estimate, the control connection's fastest round
/// trip (timed before data flowed) as the path's RTT.
pub(super) fn decider(opts: &ClientOptions, control: &Control) -> TransportDecider {
    let link = opts.auto_transport.as_ref().and_then(|a| a.link_bps);
    let d = TransportDecider::new(Instant::now(), TransportConfig::sender(), link);
    match control.path_rtt() {
        Some(rtt) => d.with_path_rtt(rtt),
        None => d,
    }
}

/// How a watched TCP upload ended.
pub(super) enum Watched {
    /// It finished on TCP (or failed): the result, the rule's last verdict for staying and what it read of
    /// the path.
    Done(
        Box<Result<Moved, ClientError>>,
        String,
        Option<drsftp_tune::Judged>,
    ),
    /// The rule moves the upload to blast, why, and what it read of the path; the TCP transfer was dropped
    /// (not yet aborted).
    Switch(String, Option<drsftp_tune::Judged>),
}

/// Runs the TCP upload `fut` of `total` bytes, feeding `d` the sending streams' readings every [`SAMPLE`]. A
/// switch sends the whole file again over blast, so the bytes already acknowledged count against it. `gate`
/// (held stream growth, module docs) opens at the first verdict to stay, or after [`HOLD_AT_MOST`].
pub(super) async fn watch<F>(
    fut: F,
    mut d: TransportDecider,
    progress: &Arc<Progress>,
    total: u64,
    gate: Option<GrowthGate>,
) -> Watched
where
    F: Future<Output = Result<Moved, ClientError>>,
{
    let begin = Instant::now();
    let mut fut = std::pin::pin!(fut);
    let mut stayed: Option<String> = None;
    let mut tick = tokio::time::interval(SAMPLE);
    loop {
        tokio::select! {
            r = &mut fut => {
                let why = stayed.unwrap_or_else(|| {
                    "the transfer ended on TCP before the rule had seen enough of the path".into()
                });
                return Watched::Done(Box::new(r), why, d.judged());
            }
            _ = tick.tick() => {
                let now = Instant::now();
                let r = progress.tx_reading();
                d.handle_reading(now, r);
                let left = total.saturating_sub(r.delivered);
                match d.poll_decision_resending(now, left, total - left) {
                    Some(Decision::SwitchToBlast(why)) => {
                        return Watched::Switch(
                            format!(
                                "{why}; the whole file goes over blast (an aborted TCP upload is not resumed)"
                            ),
                            d.judged(),
                        )
                    }
                    Some(Decision::StayTcp(why)) => {
                        if let Some(g) = gate.as_ref().filter(|g| g.is_closed()) {
                            tracing::debug!("--transport auto: {why}; -p auto may add streams now");
                            g.open();
                        }
                        stayed = Some(why);
                    }
                    None if now >= begin + HOLD_AT_MOST => {
                        if let Some(g) = &gate {
                            g.open();
                        }
                    }
                    None => {}
                }
            }
        }
    }
}

/// Whether a failed blast upload under auto falls back to TCP: it was blocked (nothing acknowledged in
/// [`BLAST_BLOCKED_AFTER`]) or refused by the server's side of the path before a byte moved.
pub(super) fn fall_back(auto: bool, e: &ClientError, progress: &Progress) -> bool {
    auto && progress.bytes() == 0
        && (matches!(e, ClientError::BlastBlocked(_)) || matches!(e.reply_code(), Some(425 | 426)))
}
