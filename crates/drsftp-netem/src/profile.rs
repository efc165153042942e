//! Time-varying link profiles: steps of (offset, RTT, rate, loss), their text format, and the built-in
//! Los Alamos–New York profile modelled on seed 000 figures 1-3.

use std::fmt::Write as _;
use std::time::Duration;

use drsftp_units::{parse_duration, parse_probability, parse_rate};

use crate::config::ParseError;

/// One profile step: from `at` (offset from profile start) on, the given fields apply. `None` = unchanged.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileStep {
    pub at: Duration,
    /// Round-trip time; each direction's one-way delay becomes `rtt / 2`.
    pub rtt: Option<Duration>,
    /// Bottleneck rate in bit/s.
    pub rate_bps: Option<u64>,
    /// Bernoulli loss probability (0 = no loss); replaces the link's loss model.
    pub loss: Option<f64>,
}

/// A sequence of steps with strictly increasing offsets, optionally repeating with period `repeat`.
///
/// Text format (one step per line, `#` starts a comment, blank lines ignored):
/// ```text
/// # offset  fields (any subset of rtt=, rate=, loss=)
/// 0s    rtt=119ms rate=28.5mbit loss=0%
/// 20s   rtt=475ms rate=26kbit
/// 40s   rate=12mbit loss=0.1%
/// repeat 60s
/// ```
/// Durations, rates and loss in the drsftp-units grammar: durations `ns us ms s m h` (a plain number is ms); rates
/// `100mbit`, `622Mbps`, `1gbit` or plain bit/s, with an upper-case `B` meaning bytes (`100MBps` = 800 Mbit/s);
/// loss `0.1%` or `0.001`.
/// `repeat P` (optional, last) restarts the profile every P. Before the first step's offset the first step applies.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub steps: Vec<ProfileStep>,
    pub repeat: Option<Duration>,
}

impl Profile {
    /// Parse the text format above.
    pub fn parse(text: &str) -> Result<Profile, ParseError> {
        let mut steps: Vec<ProfileStep> = Vec::new();
        let mut repeat = None;
        for (i, raw) in text.lines().enumerate() {
            let line_no = i + 1;
            let perr = |msg: String| ParseError::Profile { line: line_no, msg };
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut words = line.split_whitespace();
            let first = words.next().unwrap_or_default();
            if first == "repeat" {
                let p = words
                    .next()
                    .ok_or_else(|| perr("repeat needs a period".into()))?;
                let p = parse_duration(p).map_err(|e| perr(e.to_string()))?;
                if p.is_zero() {
                    return Err(perr("repeat period must be > 0".into()));
                }
                repeat = Some(p);
                continue;
            }
            if repeat.is_some() {
                return Err(perr("steps after `repeat`".into()));
            }
            let at = parse_duration(first).map_err(|e| perr(e.to_string()))?;
            if let Some(prev) = steps.last() {
                if at <= prev.at {
                    return Err(perr(format!("offset {first} not after the previous step")));
                }
            }
            let mut step = ProfileStep {
                at,
                rtt: None,
                rate_bps: None,
                loss: None,
            };
            for w in words {
                let (k, v) = w
                    .split_once('=')
                    .ok_or_else(|| perr(format!("expected key=value, got {w:?}")))?;
                match k {
                    "rtt" => step.rtt = Some(parse_duration(v).map_err(|e| perr(e.to_string()))?),
                    "rate" => step.rate_bps = Some(parse_rate(v).map_err(|e| perr(e.to_string()))?),
                    "loss" => {
                        step.loss = Some(parse_probability(v).map_err(|e| perr(e.to_string()))?)
                    }
                    _ => return Err(perr(format!("unknown key {k:?} (rtt, rate, loss)"))),
                }
            }
            steps.push(step);
        }
        if steps.is_empty() {
            return Err(ParseError::Profile {
                line: 0,
                msg: "no steps".into(),
            });
        }
        if let Some(p) = repeat {
            if p <= steps.last().unwrap().at {
                return Err(ParseError::Profile {
                    line: 0,
                    msg: "repeat period must exceed the last offset".into(),
                });
            }
        }
        Ok(Profile { steps, repeat })
    }

    /// Render in the text format (round-trips through [`Profile::parse`]).
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        for st in &self.steps {
            let _ = write!(s, "{}ns", st.at.as_nanos());
            if let Some(r) = st.rtt {
                let _ = write!(s, " rtt={}ns", r.as_nanos());
            }
            if let Some(r) = st.rate_bps {
                let _ = write!(s, " rate={r}");
            }
            if let Some(l) = st.loss {
                let _ = write!(s, " loss={l}");
            }
            s.push('\n');
        }
        if let Some(p) = self.repeat {
            let _ = writeln!(s, "repeat {}ns", p.as_nanos());
        }
        s
    }

    /// Index of the step in force at offset `t` (no repeat folding).
    pub fn index_at(&self, t: Duration) -> usize {
        self.steps.partition_point(|s| s.at <= t).saturating_sub(1)
    }

    /// The step values in force at offset `t` (repeat folded), with every field resolved from earlier steps.
    pub fn resolved_at(&self, t: Duration) -> ProfileStep {
        let t = self.fold(t);
        let idx = self.index_at(t);
        let mut out = ProfileStep {
            at: self.steps[idx].at,
            rtt: None,
            rate_bps: None,
            loss: None,
        };
        for s in &self.steps[..=idx] {
            out.rtt = s.rtt.or(out.rtt);
            out.rate_bps = s.rate_bps.or(out.rate_bps);
            out.loss = s.loss.or(out.loss);
        }
        out
    }

    /// Fold an offset into the repeat period.
    pub fn fold(&self, t: Duration) -> Duration {
        match self.repeat {
            Some(p) => Duration::from_nanos((t.as_nanos() % p.as_nanos()) as u64),
            None => t,
        }
    }

    /// Built-in profile modelled on seed 000 (drsFTP) figures 1-3, Los Alamos ↔ New York sampled by nettimer
    /// every 20 s: bottleneck rate 0.026-28.5 Mbit/s (mean ≈ 17.2), RTT 119-475 ms (mean ≈ 157). This is a
    /// synthetic 30-step (10 min, repeating) sequence matching those quoted ranges and means, not digitised data.
    pub fn los_alamos_new_york() -> Profile {
        const RATE_MBIT: [f64; 30] = [
            28.5, 20.1, 19.8, 23.3, 12.6, 0.026, 8.4, 17.7, 21.9, 18.2, 15.5, 28.1, 21.4, 3.2,
            17.9, 20.6, 22.8, 11.3, 19.0, 19.5, 0.9, 14.7, 21.2, 20.8, 9.6, 19.9, 28.3, 16.4, 13.1,
            22.0,
        ];
        const RTT_MS: [u64; 30] = [
            119, 121, 124, 133, 140, 475, 230, 141, 122, 127, 136, 119, 130, 260, 149, 123, 120,
            150, 131, 125, 350, 140, 122, 128, 170, 124, 119, 135, 142, 126,
        ];
        let steps = (0..30)
            .map(|i| ProfileStep {
                at: Duration::from_secs(20 * i as u64),
                rtt: Some(Duration::from_millis(RTT_MS[i])),
                rate_bps: Some((RATE_MBIT[i] * 1e6).round() as u64),
                loss: Some(0.0),
            })
            .collect();
        Profile {
            steps,
            repeat: Some(Duration::from_secs(600)),
        }
    }

    /// Look up a built-in profile by name (`lanl-ny`).
    pub fn builtin(name: &str) -> Option<Profile> {
        match name {
            "lanl-ny" | "los-alamos-new-york" | "seed000" => Some(Self::los_alamos_new_york()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_roundtrip() {
        let p = Profile::parse("# c\n0s rtt=119ms rate=28.5mbit loss=0%\n\n20s rate=26kbit\n40s loss=0.1% # x\nrepeat 60s\n")
            .unwrap();
        assert_eq!(p.steps.len(), 3);
        assert_eq!(p.steps[1].rate_bps, Some(26_000));
        assert_eq!(p.steps[2].loss, Some(0.001));
        assert_eq!(p.repeat, Some(Duration::from_secs(60)));
        assert_eq!(Profile::parse(&p.to_text()).unwrap(), p);
        let r = p.resolved_at(Duration::from_secs(45));
        assert_eq!(r.rtt, Some(Duration::from_millis(119)));
        assert_eq!(r.rate_bps, Some(26_000));
        assert_eq!(
            p.resolved_at(Duration::from_secs(65)).rate_bps,
            Some(28_500_000)
        );
    }

    #[test]
    fn rates_use_the_shared_grammar() {
        // An upper-case B is bytes here as for `drsftp copy --max-rate`: 100MBps = 800 Mbit/s, 100Mbps = 100.
        let p = Profile::parse("0s rate=100MBps\n1s rate=100Mbps\n2s rate=100mbit\n").unwrap();
        let rates: Vec<_> = p.steps.iter().map(|s| s.rate_bps).collect();
        assert_eq!(
            rates,
            [Some(800_000_000), Some(100_000_000), Some(100_000_000)]
        );
        assert_eq!(
            p.steps[0].rate_bps,
            drsftp_units::parse_rate("100MBps").ok()
        );
    }

    #[test]
    fn parse_errors_name_the_line() {
        let e = Profile::parse("0s rtt=1ms\n0s rtt=2ms\n").unwrap_err();
        assert!(matches!(e, ParseError::Profile { line: 2, .. }), "{e:?}");
        assert!(Profile::parse("0s bogus=1\n").is_err());
        assert!(Profile::parse("").is_err());
        assert!(Profile::parse("0s rate=1mbit\n10s rate=2mbit\nrepeat 5s\n").is_err());
    }

    #[test]
    fn builtin_matches_seed_000_statistics() {
        let p = Profile::los_alamos_new_york();
        let rates: Vec<f64> = p
            .steps
            .iter()
            .map(|s| s.rate_bps.unwrap() as f64 / 1e6)
            .collect();
        let rtts: Vec<f64> = p
            .steps
            .iter()
            .map(|s| s.rtt.unwrap().as_secs_f64() * 1e3)
            .collect();
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        assert!((rates.iter().cloned().fold(f64::MAX, f64::min) - 0.026).abs() < 1e-9);
        assert!((rates.iter().cloned().fold(0.0, f64::max) - 28.5).abs() < 1e-9);
        assert!((mean(&rates) - 17.2).abs() < 0.3, "{}", mean(&rates));
        assert_eq!(rtts.iter().cloned().fold(f64::MAX, f64::min), 119.0);
        assert_eq!(rtts.iter().cloned().fold(0.0, f64::max), 475.0);
        assert!((mean(&rtts) - 157.0).abs() < 2.0, "{}", mean(&rtts));
    }
}
