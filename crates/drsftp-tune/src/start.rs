//! The starting point of `-p auto`: the stream count (and, for a fixed buffer policy, the buffer it assumes) from
//! the measured control-channel RTT, a rate estimate (a calibrated path profile, or a conservative default) and
//! seed 001's model. Pure function; the caller measures and applies. Online refinement is `AutoStreams`' job.

use std::time::Duration;

use crate::model::{Model, RecommendInput};
use drsftp_units::format_size;

/// Rate assumed when no profile knows the path: a fat path, so the model does not under-provision streams.
pub const DEFAULT_RATE_BPS: f64 = 1e9;
/// Stream cap when the rate is a guess (an unknown path should not get dozens of sockets).
pub const UNKNOWN_RATE_MAX_STREAMS: u32 = 8;
/// Below this RTT (or on a loopback address) the path is local: the TCP window is not what limits a stream.
pub const LOCAL_RTT: Duration = Duration::from_millis(1);

/// How each stream's buffer is sized in the transfer that will run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StartBuffer {
    /// A fixed per-stream buffer (`--buffer SIZE` / `--tcp-bs`): the model gives P for this B.
    Fixed(u64),
    /// Kernel autotuning or DRS size each stream, up to `max_buf`: the model gives P only.
    Adaptive { max_buf: u64 },
}

/// Inputs of [`auto_start`].
#[derive(Debug, Clone, PartialEq)]
pub struct AutoStartInput {
    /// Measured control-channel RTT (median of a few NOOPs).
    pub rtt: Duration,
    /// Rate estimate from a path profile; `None`: unknown.
    pub rate_bps: Option<f64>,
    /// Coefficients fitted on this path; `None`: seed 001's.
    pub model: Option<Model>,
    /// Where the rate/model came from, for the reason text (e.g. "path profile for host:2811 (2024-...)").
    pub source: Option<String>,
    pub buffer: StartBuffer,
    /// The server address is a loopback address.
    pub loopback: bool,
    /// CPU cores available to us.
    pub cores: u32,
    pub mem_budget: u64,
    pub max_streams: u32,
    /// The server offers MODE E (its FEAT lists `PARALLEL`). Plain FTP servers do not: one stream in stream
    /// mode is then the only way to move data.
    pub mode_e: bool,
}

/// The choice and why.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoStart {
    pub streams: u32,
    /// The per-stream buffer the model assumed (the fixed size, or its B under an adaptive policy).
    pub model_buf: u64,
    pub rate_bps: f64,
    pub local: bool,
    /// One line, for the summary and `--json` `auto_reason`.
    pub reason: String,
}

/// Picks the starting stream count. See the module docs.
pub fn auto_start(inp: &AutoStartInput) -> AutoStart {
    let rate = inp
        .rate_bps
        .filter(|r| *r > 0.0)
        .unwrap_or(DEFAULT_RATE_BPS);
    if !inp.mode_e {
        return AutoStart {
            streams: 1,
            model_buf: match inp.buffer {
                StartBuffer::Fixed(b) => b,
                StartBuffer::Adaptive { max_buf } => max_buf,
            },
            rate_bps: rate,
            local: inp.loopback || inp.rtt < LOCAL_RTT,
            reason: "-p auto chose 1: the server does not offer MODE E (no PARALLEL in its FEAT), so one \
                     stream in stream mode"
                .into(),
        };
    }
    let cap = if inp.rate_bps.is_some() {
        inp.max_streams
    } else {
        inp.max_streams.min(UNKNOWN_RATE_MAX_STREAMS)
    }
    .max(1);
    let model = inp.model.unwrap_or_default();
    let rtt_ms = inp.rtt.as_secs_f64() * 1e3;
    let mut why = vec![format!("control RTT {rtt_ms:.2} ms")];
    why.push(match (&inp.source, inp.rate_bps) {
        (Some(src), Some(r)) => format!(
            "{src}: rate {:.0} Mbit/s, C1' {:.1}, C2 {:.3}",
            r / 1e6,
            model.c1,
            model.c2
        ),
        _ => format!(
            "no path profile: assuming {:.0} Mbit/s, seed 001 model (C1' {:.0}, C2 {:.2}), at most {cap} streams",
            rate / 1e6,
            model.c1,
            model.c2
        ),
    });
    let (model_p, model_buf) = match inp.buffer {
        StartBuffer::Fixed(b) => {
            let p = model.streams_for(inp.rtt, rate, b).min(cap);
            why.push(format!(
                "model: P = {p} for the fixed {} buffer",
                format_size(b)
            ));
            (p, b)
        }
        StartBuffer::Adaptive { max_buf } => {
            let r = model.recommend(&RecommendInput {
                rtt: inp.rtt,
                rate_bps: rate,
                mem_budget: inp.mem_budget,
                max_streams: cap,
                max_buf,
            });
            why.push(format!(
                "model: P = {} at B = {} (buffers sized per stream by the policy, up to {})",
                r.streams,
                format_size(r.buf),
                format_size(max_buf)
            ));
            (r.streams, r.buf)
        }
    };
    let local = inp.loopback || inp.rtt < LOCAL_RTT;
    let streams = if local {
        // On a local path one window covers the BDP many times over, so the model says 1; what limits a single
        // stream is one core copying. A few streams spread that work without flooding the scheduler.
        let p = model_p.max(inp.cores.clamp(2, 4)).min(cap.max(2));
        why.push(format!(
            "local path (RTT < {} ms{}): {p} streams, one per core (2-4), since the window is not the limit",
            LOCAL_RTT.as_millis(),
            if inp.loopback { ", loopback address" } else { "" }
        ));
        p
    } else {
        model_p
    };
    AutoStart {
        streams,
        model_buf,
        rate_bps: rate,
        local,
        reason: format!("-p auto chose {streams}: {}", why.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(rtt: Duration) -> AutoStartInput {
        AutoStartInput {
            rtt,
            rate_bps: None,
            model: None,
            source: None,
            buffer: StartBuffer::Adaptive { max_buf: 4 << 20 },
            loopback: false,
            cores: 2,
            mem_budget: 64 << 20,
            max_streams: 32,
            mode_e: true,
        }
    }

    #[test]
    fn a_server_without_mode_e_gets_one_stream() {
        for rtt in [Duration::from_micros(60), Duration::from_millis(100)] {
            let mut i = input(rtt);
            i.mode_e = false;
            let a = auto_start(&i);
            assert_eq!(a.streams, 1, "{a:?}");
            assert!(a.reason.contains("does not offer MODE E"), "{}", a.reason);
            i.mode_e = true;
            assert!(auto_start(&i).streams > 1, "the same path with MODE E");
        }
    }

    #[test]
    fn loopback_picks_a_few_streams() {
        for cores in [1, 2, 8, 64] {
            let mut i = input(Duration::from_micros(60));
            i.cores = cores;
            let a = auto_start(&i);
            assert!((2..=4).contains(&a.streams), "{cores} cores: {a:?}");
            assert!(a.local && a.reason.contains("local path"), "{a:?}");
        }
        // A loaded loopback can show a multi-ms NOOP; the address still marks it local.
        let mut i = input(Duration::from_millis(5));
        i.loopback = true;
        let a = auto_start(&i);
        assert!((2..=4).contains(&a.streams), "{a:?}");
        // Fixed small buffer on loopback: still small.
        i.buffer = StartBuffer::Fixed(64 << 10);
        i.rtt = Duration::from_micros(80);
        assert!((2..=4).contains(&auto_start(&i).streams));
    }

    #[test]
    fn wan_follows_the_model() {
        let m = Model::default();
        let rtt = Duration::from_millis(50);
        // Fixed 1 MB buffer on 50 ms / 1 Gbit/s: exactly the model's P (20), profile-known rate so no cap of 8.
        let mut i = input(rtt);
        i.rate_bps = Some(1e9);
        i.source = Some("path profile for h:2811".into());
        i.buffer = StartBuffer::Fixed(1 << 20);
        let a = auto_start(&i);
        assert_eq!(a.streams, m.streams_for(rtt, 1e9, 1 << 20));
        assert!(!a.local && a.reason.contains("path profile"), "{a:?}");
        // Adaptive policy: the recommendation's P.
        i.buffer = StartBuffer::Adaptive { max_buf: 4 << 20 };
        let r = m.recommend(&RecommendInput {
            rtt,
            rate_bps: 1e9,
            mem_budget: 64 << 20,
            max_streams: 32,
            max_buf: 4 << 20,
        });
        let a = auto_start(&i);
        assert_eq!((a.streams, a.model_buf), (r.streams, r.buf), "{a:?}");
        assert!(a.streams > 1);
        // Unknown rate: 1 Gbit/s assumed, capped at 8 streams.
        let mut u = input(rtt);
        u.buffer = StartBuffer::Fixed(64 << 10);
        let a = auto_start(&u);
        assert_eq!(a.streams, UNKNOWN_RATE_MAX_STREAMS);
        assert!(a.reason.contains("no path profile"), "{a:?}");
        // A fitted model from a profile changes P: C2 = 1, C1' = 122 (this kernel's) at 50 ms, 1 MB -> 6.
        let mut f = input(rtt);
        f.rate_bps = Some(1e9);
        f.model = Some(Model {
            c1: 122.0,
            c2: 1.0,
            ref_rate_bps: 1e9,
        });
        f.buffer = StartBuffer::Fixed(1 << 20);
        assert_eq!(auto_start(&f).streams, 6);
    }
}
