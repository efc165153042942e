//! The read loop shared by the multi-stream DRS fluid-model tests (drs_share, drs_noise): one round trip's bytes
//! handed to a [`DrsReceiver`] the way a receiving socket sees them.

use std::time::{Duration, Instant};

use drsftp_tune::{DrsAction, DrsReceiver, TcpSample};

/// Feeds `bytes` read over the round trip `dt` starting at `now` to `drs`: 8 reads, timers run in time order between
/// them, the RTT reading (`dt`) with the last. Returns the last receive buffer DRS set during the round, if any.
pub fn feed_round(drs: &mut DrsReceiver, now: Instant, dt: Duration, bytes: f64) -> Option<u64> {
    let mut set = None;
    for k in 1..=8u32 {
        let at = now + dt * k / 8;
        while let Some(to) = drs.poll_timeout() {
            if to > at {
                break;
            }
            drs.handle_timeout(to);
        }
        drs.handle_bytes(at, (bytes / 8.0) as u64);
        if k == 8 {
            let s = TcpSample {
                rcv_rtt: dt,
                ..TcpSample::default()
            };
            drs.handle_tcp_info(at, &s);
        }
        while let Some(a) = drs.poll_action() {
            if let DrsAction::SetRecvBuf(b) = a {
                set = Some(b);
            }
        }
    }
    set
}
