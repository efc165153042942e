//! `-p auto` for `drsftp copy`: take the control-channel RTT from the login exchanges (NOOPs if that failed), look up
//! the server's calibrated path profile, and pick the starting stream count with `drsftp_tune::auto_start` (seed 001's
//! model; the buffer policy keeps sizing each stream unless it is a fixed size). Also the RTT helper that `drsftp tune
//! calibrate` uses.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use drsftp_io::client::{Client, ClientOptions};
use drsftp_tune::{auto_start, AutoStart, AutoStartInput, BufferPolicy, StartBuffer};

use crate::profile::{PathProfile, ProfileStore};
use crate::url::FtpUrl;

/// Memory budget and stream cap `-p auto` plans with (as `drsftp tune`'s defaults).
const MEM_BUDGET: u64 = 64 << 20;
const MAX_STREAMS: u32 = 32;

/// Median round trip of `n` NOOPs on the control connection.
pub async fn control_rtt(client: &mut Client, n: usize) -> Result<Duration> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n.max(1) {
        let t = Instant::now();
        client.command("NOOP").await.context("NOOP (RTT probe)")?;
        v.push(t.elapsed());
    }
    v.sort();
    Ok(v[v.len() / 2])
}

/// True if `host` resolves to a loopback address.
pub async fn is_loopback(host: &str, port: u16) -> bool {
    match tokio::net::lookup_host((host, port)).await {
        Ok(mut a) => a.any(|a| a.ip().is_loopback()),
        Err(_) => false,
    }
}

/// What `-p auto` decided, for the summary and `--json`.
#[derive(Debug, Clone)]
pub struct AutoChoice {
    pub start: AutoStart,
    /// The measured control-channel RTT.
    pub rtt: Duration,
}

/// Measures, chooses, and sets `opts.streams`. `profile_dir`: where paths.json lives (default: XDG config).
pub async fn choose(
    client: &mut Client,
    url: &FtpUrl,
    opts: &mut ClientOptions,
    profile_dir: Option<&Path>,
) -> Result<AutoChoice> {
    // The login's own exchanges already timed the control path; NOOPs only if they could not.
    let rtt = match client.login_rtt() {
        Some(r) => r,
        None => control_rtt(client, 3).await?,
    };
    let key = url.authority();
    let profile = match ProfileStore::open(profile_dir).map(|s| s.get(&key)) {
        Some(Ok(p)) => p,
        Some(Err(e)) => {
            tracing::warn!("ignoring the path profiles: {e:#}");
            None
        }
        None => None,
    };
    let limits = drsftp_sys::sockopt::buf_limits().ok();
    let buffer = match opts.buffer {
        BufferPolicy::Fixed(b) => StartBuffer::Fixed(b),
        BufferPolicy::Kernel => StartBuffer::Adaptive {
            max_buf: limits.map_or(6 << 20, |l| l.tcp_rmem[2] as u64),
        },
        // What each DRS stream can grow to: drs_max, or less if the window scale the kernel picks is smaller.
        BufferPolicy::Drs => StartBuffer::Adaptive {
            max_buf: {
                let drs_max = drsftp_io::data::DataOpts::default().drs_max;
                limits.map_or(drs_max, |l| drsftp_io::drs::expected_ceiling(&l, drs_max))
            },
        },
    };
    let inp = AutoStartInput {
        rtt,
        rate_bps: profile.as_ref().map(|p| p.rate_bps),
        model: profile.as_ref().and_then(PathProfile::model),
        source: profile.as_ref().map(|p| {
            format!(
                "path profile for {key} (calibrated {} s ago, RTT {:.2} ms{})",
                crate::profile::now_unix().saturating_sub(p.timestamp),
                p.rtt_ms,
                if p.c1.is_some() {
                    ""
                } else {
                    ", no fit: seed 001 coefficients"
                }
            )
        }),
        buffer,
        loopback: is_loopback(&url.host, url.port).await,
        cores: std::thread::available_parallelism().map_or(2, |n| n.get() as u32),
        mem_budget: MEM_BUDGET,
        max_streams: MAX_STREAMS,
    };
    let start = auto_start(&inp);
    opts.streams = start.streams;
    Ok(AutoChoice { start, rtt })
}

/// `-p N|auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parallel {
    Auto,
    Fixed(u32),
}

/// clap parser for `-p`: `auto` or 1..=128.
pub fn parallel_arg(s: &str) -> Result<Parallel, String> {
    if s.eq_ignore_ascii_case("auto") {
        return Ok(Parallel::Auto);
    }
    match s.parse::<u32>() {
        Ok(n @ 1..=128) => Ok(Parallel::Fixed(n)),
        _ => Err(format!("{s:?}: expected a stream count 1-128 or `auto`")),
    }
}

/// Whether `-p auto` runs: asked for, or by default when the user gave none of -p, --tcp-bs and --buffer (a
/// user-chosen buffer keeps the old default of one stream). Never over the UDP blast channel.
pub fn wants_auto(p: Option<Parallel>, tcp_bs: bool, buffer: bool, udp: bool) -> bool {
    !udp && match p {
        Some(Parallel::Auto) => true,
        Some(Parallel::Fixed(_)) => false,
        None => !tcp_bs && !buffer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_flag_and_default() {
        assert_eq!(parallel_arg("auto"), Ok(Parallel::Auto));
        assert_eq!(parallel_arg("4"), Ok(Parallel::Fixed(4)));
        assert!(
            parallel_arg("0").is_err()
                && parallel_arg("129").is_err()
                && parallel_arg("x").is_err()
        );
        assert!(wants_auto(None, false, false, false), "default");
        assert!(!wants_auto(None, true, false, false), "--tcp-bs keeps -p 1");
        assert!(!wants_auto(None, false, true, false), "--buffer keeps -p 1");
        assert!(
            wants_auto(Some(Parallel::Auto), true, true, false),
            "explicit auto"
        );
        assert!(!wants_auto(Some(Parallel::Fixed(1)), false, false, false));
        assert!(
            !wants_auto(Some(Parallel::Auto), false, false, true),
            "not over UDP"
        );
    }
}
