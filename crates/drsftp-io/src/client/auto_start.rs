//! `-p auto`'s start choice with its measurements: the control-channel RTT (from the login exchanges, NOOPs if
//! those were not timed), the server's calibrated path profile ([`super::profile`]), this host's buffer limits and
//! whether the server is on loopback, handed to the pure decision `drsftp_tune::auto_start` (seed 001's model).
//! In the library, so that every client of drsftp-io (and a third-party copy, with the client of either end)
//! starts as `drsftp copy -p auto` does.

use std::time::{Duration, Instant};

use drsftp_tune::{auto_start, AutoStart, AutoStartInput, BufferPolicy, StartBuffer};

use super::profile::{now_unix, PathProfile, ProfileStore};
use super::{Client, ClientError};

/// Memory budget for all streams' buffers that the start choice plans with (as `drsftp tune`'s default).
pub const AUTO_MEM_BUDGET: u64 = 64 << 20;
/// Most streams the start choice picks (the online refinement may grow beyond it; see `AutoConfig`).
pub const AUTO_START_MAX_STREAMS: u32 = 32;

/// What the start choice decided and what it measured, for summaries and `--json`.
#[derive(Debug, Clone)]
pub struct AutoChoice {
    /// The stream count, per-stream buffer and the reasoning.
    pub start: AutoStart,
    /// The measured control-channel RTT.
    pub rtt: Duration,
}

/// What each stream's buffer can grow to under `policy` on this host: a fixed size is itself; kernel autotuning
/// reaches tcp_rmem[2]; DRS reaches `drs_max`, or less if the window scale the kernel picks is smaller.
pub fn start_buffer(policy: BufferPolicy) -> StartBuffer {
    let limits = drsftp_sys::sockopt::buf_limits().ok();
    match policy {
        BufferPolicy::Fixed(b) => StartBuffer::Fixed(b),
        BufferPolicy::Kernel => StartBuffer::Adaptive {
            max_buf: limits.map_or(6 << 20, |l| l.tcp_rmem[2] as u64),
        },
        BufferPolicy::Drs => StartBuffer::Adaptive {
            max_buf: {
                let drs_max = crate::data::DataOpts::default().drs_max;
                limits.map_or(drs_max, |l| crate::drs::expected_ceiling(&l, drs_max))
            },
        },
    }
}

impl Client {
    /// Median round trip of `n` (at least 1) NOOPs on the control connection.
    pub async fn control_rtt(&mut self, n: usize) -> Result<Duration, ClientError> {
        let mut v = Vec::with_capacity(n.max(1));
        for _ in 0..n.max(1) {
            let t = Instant::now();
            self.command("NOOP").await?;
            v.push(t.elapsed());
        }
        v.sort();
        Ok(v[v.len() / 2])
    }

    /// `-p auto`'s starting point for transfers with this server: measures (see the module docs) and decides
    /// with `drsftp_tune::auto_start`. `path_key`: the server's key in `profiles` (`profile::path_key`, the URL's
    /// `host:port`); `profiles`: where calibrated path profiles are (`None`: the seed-001 model only; an
    /// unreadable file is logged and ignored); `buffer`: the policy the transfer's sockets will use. The caller
    /// sets `ClientOptions::streams` from the result.
    pub async fn choose_start(
        &mut self,
        path_key: &str,
        profiles: Option<&ProfileStore>,
        buffer: BufferPolicy,
    ) -> Result<AutoChoice, ClientError> {
        // The login's own exchanges already timed the control path; NOOPs only if they could not.
        let rtt = match self.login_rtt() {
            Some(r) => r,
            None => self.control_rtt(3).await?,
        };
        let profile = match profiles.map(|s| s.get(path_key)) {
            Some(Ok(p)) => p,
            Some(Err(e)) => {
                tracing::warn!("ignoring the path profiles: {e}");
                None
            }
            None => None,
        };
        let inp = AutoStartInput {
            rtt,
            rate_bps: profile.as_ref().map(|p| p.rate_bps),
            model: profile.as_ref().and_then(PathProfile::model),
            source: profile.as_ref().map(|p| {
                format!(
                    "path profile for {path_key} (calibrated {} s ago, RTT {:.2} ms{})",
                    now_unix().saturating_sub(p.timestamp),
                    p.rtt_ms,
                    if p.c1.is_some() {
                        ""
                    } else {
                        ", no fit: seed 001 coefficients"
                    }
                )
            }),
            buffer: start_buffer(buffer),
            loopback: self.control.peer().ip().is_loopback(),
            cores: std::thread::available_parallelism().map_or(2, |n| n.get() as u32),
            mem_budget: AUTO_MEM_BUDGET,
            max_streams: AUTO_START_MAX_STREAMS,
            mode_e: self.features().parallel(),
        };
        Ok(AutoChoice {
            start: auto_start(&inp),
            rtt,
        })
    }
}
