//! Link configuration (`LinkConfig`, `LossModel`, `QueueLimit`) and the queue-limit parser; durations, rates and
//! probabilities are read with drsftp-units, the grammar every drsftp CLI shares.

use std::time::Duration;

/// Errors from parsing durations, rates, loss rates, queue limits and profile files.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ParseError {
    #[error(transparent)]
    Unit(#[from] drsftp_units::UnitError),
    #[error(
        "bad queue limit {0:?} (expected e.g. 1bdp, 2xbdp, 0.5bdp, 64K, 12.5M, 1500000, unlimited)"
    )]
    Queue(String),
    #[error("profile line {line}: {msg}")]
    Profile { line: usize, msg: String },
}

/// Random loss applied to every packet that was admitted to the queue.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LossModel {
    /// No random loss.
    None,
    /// Each packet is lost independently with probability `p`.
    Bernoulli { p: f64 },
    /// Two-state Gilbert-Elliott chain, stepped once per packet *before* the loss decision:
    /// good→bad with `p_gb`, bad→good with `p_bg`; in good a packet is lost with `loss_good`, in bad with `loss_bad`.
    GilbertElliott {
        p_gb: f64,
        p_bg: f64,
        loss_good: f64,
        loss_bad: f64,
    },
}

impl LossModel {
    /// Long-run loss probability (stationary distribution for Gilbert-Elliott).
    pub fn mean_loss(&self) -> f64 {
        match *self {
            LossModel::None => 0.0,
            LossModel::Bernoulli { p } => p,
            LossModel::GilbertElliott {
                p_gb,
                p_bg,
                loss_good,
                loss_bad,
            } => {
                if p_gb + p_bg == 0.0 {
                    return loss_good;
                }
                let pi_bad = p_gb / (p_gb + p_bg);
                pi_bad * loss_bad + (1.0 - pi_bad) * loss_good
            }
        }
    }
}

/// Bound of the drop-tail queue in front of the serialiser, in bytes not yet fully serialised.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum QueueLimit {
    /// No bound.
    Unlimited,
    /// A fixed number of bytes.
    Bytes(u64),
    /// A multiple of the bandwidth-delay product `rate × RTT`, with RTT = 2 × the link's one-way delay
    /// (recomputed whenever a profile changes rate or RTT). Floors at one 64 KiB packet.
    Bdp(f64),
}

impl QueueLimit {
    /// The limit in bytes for a link of `rate_bps` and one-way `delay`; `None` = unlimited.
    pub fn bytes(&self, rate_bps: u64, delay: Duration) -> Option<u64> {
        match *self {
            QueueLimit::Unlimited => None,
            QueueLimit::Bytes(b) => Some(b),
            QueueLimit::Bdp(_) if rate_bps == 0 => None,
            QueueLimit::Bdp(m) => {
                let bdp = rate_bps as f64 / 8.0 * (2.0 * delay.as_secs_f64());
                Some(((bdp * m) as u64).max(65_536))
            }
        }
    }
}

/// One direction of an emulated WAN link. `Default` is a perfect link: no delay, unlimited rate, no loss.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkConfig {
    /// One-way propagation delay (RTT/2 for a symmetric path).
    pub delay: Duration,
    /// Serialisation rate in bit/s; 0 = unlimited (no serialisation delay, no queueing).
    pub rate_bps: u64,
    /// Drop-tail bound on bytes waiting for / in serialisation.
    pub queue: QueueLimit,
    /// Random loss.
    pub loss: LossModel,
    /// Uniform jitter: each packet's delay is `delay ± jitter`, but never earlier than the previous packet's
    /// delivery (so jitter alone never reorders).
    pub jitter: Duration,
    /// Probability that a packet is held back by `reorder_delay` extra and may be overtaken by later packets.
    pub reorder: f64,
    /// Extra hold time of a reordered packet.
    pub reorder_delay: Duration,
    /// Probability that a packet is delivered twice (the copy does not use link capacity).
    pub duplicate: f64,
    /// Seed for all randomness of this link; equal seeds and inputs give equal outputs.
    pub seed: u64,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            delay: Duration::ZERO,
            rate_bps: 0,
            queue: QueueLimit::Bdp(1.0),
            loss: LossModel::None,
            jitter: Duration::ZERO,
            reorder: 0.0,
            reorder_delay: Duration::from_millis(1),
            duplicate: 0.0,
            seed: 0,
        }
    }
}

impl LinkConfig {
    /// A link with one-way `delay`, `rate_bps` and a 1×BDP drop-tail queue, nothing random.
    pub fn new(delay: Duration, rate_bps: u64) -> Self {
        LinkConfig {
            delay,
            rate_bps,
            ..Default::default()
        }
    }
    /// Builder: set the random loss model.
    pub fn with_loss(mut self, loss: LossModel) -> Self {
        self.loss = loss;
        self
    }
    /// Builder: set the queue limit.
    pub fn with_queue(mut self, queue: QueueLimit) -> Self {
        self.queue = queue;
        self
    }
    /// Builder: set the seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }
    /// Builder: set jitter.
    pub fn with_jitter(mut self, jitter: Duration) -> Self {
        self.jitter = jitter;
        self
    }
    /// Bandwidth-delay product in bytes for RTT = 2 × delay.
    pub fn bdp_bytes(&self) -> u64 {
        (self.rate_bps as f64 / 8.0 * 2.0 * self.delay.as_secs_f64()) as u64
    }
}

/// Parse a queue limit: `1bdp`, `2xbdp`, `0.5 x BDP`, `unlimited`, or a size in the drsftp-units grammar
/// (`64K`, `12.5MB`, `1500000` bytes; K/M/G are binary, 1024-based, as for every drsftp size).
pub fn parse_queue(s: &str) -> Result<QueueLimit, ParseError> {
    let err = || ParseError::Queue(s.to_string());
    let t: String = s
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_ascii_lowercase();
    if t == "unlimited" || t == "inf" {
        return Ok(QueueLimit::Unlimited);
    }
    if let Some(m) = t.strip_suffix("bdp") {
        let m = m
            .strip_suffix('x')
            .or_else(|| m.strip_suffix('*'))
            .unwrap_or(m);
        let m = if m.is_empty() {
            1.0
        } else {
            m.parse::<f64>().map_err(|_| err())?
        };
        if !(m.is_finite() && m > 0.0) {
            return Err(err());
        }
        return Ok(QueueLimit::Bdp(m));
    }
    drsftp_units::parse_size(&t)
        .map(QueueLimit::Bytes)
        .map_err(|_| err())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_queue_limits() {
        assert_eq!(parse_queue("1bdp").unwrap(), QueueLimit::Bdp(1.0));
        assert_eq!(parse_queue("2 x BDP").unwrap(), QueueLimit::Bdp(2.0));
        assert_eq!(parse_queue("64KiB").unwrap(), QueueLimit::Bytes(65536));
        assert_eq!(parse_queue("64K").unwrap(), QueueLimit::Bytes(65536));
        assert_eq!(
            parse_queue("12.5MB").unwrap(),
            QueueLimit::Bytes(13_107_200)
        );
        assert_eq!(
            parse_queue("1500000").unwrap(),
            QueueLimit::Bytes(1_500_000)
        );
        assert!(parse_queue("-1K").is_err() && parse_queue("0.5xbdpx").is_err());
        assert_eq!(parse_queue("unlimited").unwrap(), QueueLimit::Unlimited);
    }

    #[test]
    fn bdp_queue_and_mean_loss() {
        let q = QueueLimit::Bdp(1.0).bytes(1_000_000_000, Duration::from_millis(50));
        assert_eq!(q, Some(12_500_000));
        let ge = LossModel::GilbertElliott {
            p_gb: 0.01,
            p_bg: 0.09,
            loss_good: 0.0,
            loss_bad: 0.5,
        };
        assert!((ge.mean_loss() - 0.05).abs() < 1e-12);
    }
}
