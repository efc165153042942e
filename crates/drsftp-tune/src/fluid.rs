//! A deterministic fluid model of TCP flows over one bottleneck, for tests and benchmarks of the tuners: per-RTT
//! rounds, Reno-style cwnd (slow start, +1 MSS per RTT, halve on queue overflow), cwnd grows only while
//! cwnd-limited (Linux cwnd validation), effective window = min(cwnd, receive window). Not a packet simulator.

/// One TCP flow's sender/receiver window state.
#[derive(Debug, Clone, PartialEq)]
pub struct FluidFlow {
    pub cwnd: f64,
    pub ssthresh: f64,
    /// Receive window the receiver currently advertises (bytes).
    pub rwnd: f64,
    pub mss: f64,
}

impl FluidFlow {
    pub fn new(rwnd: u64) -> Self {
        FluidFlow {
            cwnd: 10.0 * 1448.0,
            ssthresh: f64::INFINITY,
            rwnd: rwnd as f64,
            mss: 1448.0,
        }
    }
    pub fn window(&self) -> f64 {
        self.cwnd.min(self.rwnd)
    }
}

/// Result of one round on the bottleneck.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Round {
    /// Duration of the round (base RTT + queueing delay), seconds.
    pub rtt: f64,
    /// Bytes delivered per flow in this round, in flow order (use `delivered[i]`).
    pub total: f64,
    pub loss: bool,
}

/// Run one round for `flows` sharing a bottleneck of `rate` bytes/s, base RTT `base_rtt` s, queue `queue` bytes.
/// Returns per-flow delivered bytes (proportional share when the pipe is over-full) and the round.
pub fn round(flows: &mut [FluidFlow], rate: f64, base_rtt: f64, queue: f64) -> (Vec<f64>, Round) {
    let windows: Vec<f64> = flows.iter().map(|f| f.window()).collect();
    let sum: f64 = windows.iter().sum();
    let pipe = rate * base_rtt;
    let standing = (sum - pipe).max(0.0);
    let loss = standing > queue;
    let q = standing.min(queue);
    let rtt = base_rtt + q / rate;
    // What the pipe carries in one round: at most rate * rtt, shared in proportion to windows.
    let cap = rate * rtt;
    let scale = if sum > cap { cap / sum } else { 1.0 };
    let delivered: Vec<f64> = windows.iter().map(|w| w * scale).collect();
    for (f, w) in flows.iter_mut().zip(&windows) {
        let cwnd_limited = f.cwnd <= f.rwnd + f.mss;
        if loss {
            f.ssthresh = (f.cwnd / 2.0).max(2.0 * f.mss);
            f.cwnd = f.ssthresh;
        } else if cwnd_limited {
            if f.cwnd < f.ssthresh {
                f.cwnd *= 2.0;
            } else {
                f.cwnd += f.mss;
            }
        }
        let _ = w;
    }
    let total = delivered.iter().sum();
    (delivered, Round { rtt, total, loss })
}
