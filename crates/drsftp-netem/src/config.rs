//! Link configuration (`LinkConfig`, `LossModel`, `QueueLimit`) and the text parsers shared by profiles and the CLI.

use std::time::Duration;

/// Errors from parsing durations, rates, loss rates, queue limits and profile files.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ParseError {
    #[error("bad duration {0:?} (expected e.g. 100ms, 1.5s, 250us, 2m)")]
    Duration(String),
    #[error("bad rate {0:?} (expected e.g. 100mbit, 28.5mbit, 26kbit, 1gbit, 1000000 [bit/s])")]
    Rate(String),
    #[error("bad probability {0:?} (expected e.g. 0.1% or 0.001, between 0 and 1)")]
    Probability(String),
    #[error("bad queue limit {0:?} (expected e.g. 1bdp, 2xbdp, 0.5bdp, 64KB, 12.5MB, 1500000, unlimited)")]
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

fn split_num(s: &str) -> Option<(f64, String)> {
    let s = s.trim();
    let idx = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (n, u) = s.split_at(idx);
    let n: f64 = n.parse().ok()?;
    if !n.is_finite() || n < 0.0 {
        return None;
    }
    Some((n, u.trim().to_ascii_lowercase()))
}

/// Parse a duration: `100ms`, `1.5s`, `250us`, `2m`, `0`, `10ns`.
pub fn parse_duration(s: &str) -> Result<Duration, ParseError> {
    let err = || ParseError::Duration(s.to_string());
    let (n, unit) = split_num(s).ok_or_else(err)?;
    let secs = match unit.as_str() {
        "ns" => n * 1e-9,
        "us" | "µs" => n * 1e-6,
        "ms" => n * 1e-3,
        "s" => n,
        "" if n == 0.0 => 0.0,
        "m" | "min" => n * 60.0,
        _ => return Err(err()),
    };
    Ok(Duration::from_nanos((secs * 1e9).round() as u64))
}

/// Parse a rate in bit/s: `100mbit`, `28.5mbit`, `26kbit`, `1gbit`, `12500000` (bare number = bit/s),
/// also `mbps`/`gbps` (= mbit/gbit) and `MBps`-style byte units are rejected to avoid ambiguity.
pub fn parse_rate(s: &str) -> Result<u64, ParseError> {
    let err = || ParseError::Rate(s.to_string());
    let (n, unit) = split_num(s).ok_or_else(err)?;
    let mult = match unit.as_str() {
        "" | "bit" | "bps" | "bit/s" => 1.0,
        "k" | "kbit" | "kbps" | "kbit/s" => 1e3,
        "m" | "mbit" | "mbps" | "mbit/s" => 1e6,
        "g" | "gbit" | "gbps" | "gbit/s" => 1e9,
        _ => return Err(err()),
    };
    Ok((n * mult).round() as u64)
}

/// Parse a probability: `0.1%` or `0.001`; must lie in [0, 1].
pub fn parse_probability(s: &str) -> Result<f64, ParseError> {
    let err = || ParseError::Probability(s.to_string());
    let t = s.trim();
    let p = if let Some(pct) = t.strip_suffix('%') {
        pct.trim().parse::<f64>().map_err(|_| err())? / 100.0
    } else {
        t.parse::<f64>().map_err(|_| err())?
    };
    if !(0.0..=1.0).contains(&p) {
        return Err(err());
    }
    Ok(p)
}

/// Parse a queue limit: `1bdp`, `2xbdp`, `0.5 x BDP`, `64KB`, `12.5MB`, `1500000` (bytes), `unlimited`.
/// KB/MB/GB are decimal (1000-based); KiB/MiB/GiB are binary.
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
    let (n, unit) = split_num(&t).ok_or_else(err)?;
    let mult = match unit.as_str() {
        "" | "b" => 1.0,
        "kb" | "k" => 1e3,
        "mb" | "m" => 1e6,
        "gb" | "g" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(err()),
    };
    Ok(QueueLimit::Bytes((n * mult).round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!(parse_duration("119ms").unwrap(), Duration::from_millis(119));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert!(parse_duration("12").is_err());
        assert!(parse_duration("abc").is_err());
        assert_eq!(parse_rate("28.5mbit").unwrap(), 28_500_000);
        assert_eq!(parse_rate("26kbit").unwrap(), 26_000);
        assert_eq!(parse_rate("1gbit").unwrap(), 1_000_000_000);
        assert_eq!(parse_rate("1000").unwrap(), 1000);
        assert!(parse_rate("10MB").is_err());
        assert_eq!(parse_probability("0.1%").unwrap(), 0.001);
        assert_eq!(parse_probability("0.25").unwrap(), 0.25);
        assert!(parse_probability("120%").is_err());
        assert_eq!(parse_queue("1bdp").unwrap(), QueueLimit::Bdp(1.0));
        assert_eq!(parse_queue("2 x BDP").unwrap(), QueueLimit::Bdp(2.0));
        assert_eq!(parse_queue("64KiB").unwrap(), QueueLimit::Bytes(65536));
        assert_eq!(
            parse_queue("12.5MB").unwrap(),
            QueueLimit::Bytes(12_500_000)
        );
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
