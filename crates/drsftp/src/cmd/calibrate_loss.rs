//! `drsftp tune calibrate`'s loss probe: the path's random loss, measured with short UDP blast downloads paced
//! at half the rate the TCP sweep reached, for the profile's `loss` (which starts `--transport auto` copies on
//! blast, docs/auto-transport.md).
//!
//! Why blast and not TCP_INFO: the calibration downloads are received here, and a receiver sees no
//! retransmissions, only out-of-order segments, whose share overstates the loss by a factor that depends on the
//! window (34 % at 1 % loss on the lab). A sender's retransmissions include the drops its own queue causes, so
//! they cannot tell random loss from congestion without a standing-queue model. A blast datagram carries its
//! transmission number, so the receiver counts exactly which transmissions never arrived; paced at half of
//! what TCP reached, the probe builds no queue, so what is lost is lost at random. It needs the peer's BLAST,
//! which is also the only case where the number matters (auto can pick blast only then).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use drsftp_io::blast::BlastOpts;
use drsftp_io::client::{Client, ClientOptions, Partial};
use drsftp_io::data::Progress;
use serde_json::json;

/// The probe's pacing as a share of the best TCP rate: far enough below the bottleneck that no queue builds.
const PROBE_SHARE: f64 = 0.5;
/// The probe's pacing bounds, bit/s.
const PROBE_MIN_BPS: f64 = 2e6;
const PROBE_MAX_BPS: f64 = 1e9;
/// A probe that sees no datagram for this long gives up (UDP blocked): no loss figure rather than a long wait.
const PROBE_STALL: Duration = Duration::from_secs(5);

/// What the probe found.
#[derive(Debug, Clone)]
pub struct LossProbe {
    /// Lost / sent transmissions, `None` when not measured.
    pub loss: Option<f64>,
    /// Transmissions spanned and datagrams that arrived (socket drops at our end not counted as lost).
    pub transmissions: u64,
    pub lost: u64,
    /// The pacing the sender was held to, bit/s.
    pub rate_bps: f64,
    pub seconds: f64,
    /// Why no loss was measured, or a remark.
    pub note: Option<String>,
}

impl LossProbe {
    fn skipped(note: &str) -> Self {
        LossProbe {
            loss: None,
            transmissions: 0,
            lost: 0,
            rate_bps: 0.0,
            seconds: 0.0,
            note: Some(note.to_string()),
        }
    }

    /// For `--json`.
    pub fn to_json(&self) -> serde_json::Value {
        json!({"loss": self.loss, "transmissions": self.transmissions, "lost": self.lost,
            "rate_bps": self.rate_bps, "seconds": self.seconds, "note": self.note})
    }

    /// One line for the text report.
    pub fn line(&self) -> String {
        match self.loss {
            Some(l) => format!(
                "random loss: {:.3} % ({} of {} blast datagrams lost, paced at {:.0} Mbit/s for {:.1} s)",
                l * 100.0,
                self.lost,
                self.transmissions,
                self.rate_bps / 1e6,
                self.seconds
            ),
            None => format!(
                "random loss: not measured ({})",
                self.note.as_deref().unwrap_or("skipped")
            ),
        }
    }
}

/// Runs blast downloads of `remote` (sections of at most `max_len` bytes) for about `secs`, paced at half of
/// `tcp_bps`, and sums the transmissions that did not arrive.
pub async fn probe(
    client: &mut Client,
    remote: &str,
    local: &Path,
    max_len: u64,
    tcp_bps: f64,
    secs: f64,
) -> LossProbe {
    if secs <= 0.0 {
        return LossProbe::skipped("--loss-secs 0");
    }
    if !client.features().has("BLAST") {
        return LossProbe::skipped(
            "the server does not offer UDP blast, so --transport auto keeps to TCP with it anyway",
        );
    }
    let rate = (tcp_bps * PROBE_SHARE).clamp(PROBE_MIN_BPS, PROBE_MAX_BPS);
    let blast = BlastOpts {
        max_rate: rate as u64,
        start_rate: rate as u64,
        idle_timeout: PROBE_STALL,
        resume: false,
        ..BlastOpts::default()
    };
    // Enough datagrams for a loss of 0.1 % to show ~10 times, within the time budget.
    let len = ((rate / 8.0 * secs) as u64).clamp(1 << 20, max_len);
    let (t0, mut sent, mut lost, mut busy) = (Instant::now(), 0u64, 0u64, 0f64);
    let budget = Duration::from_secs_f64(secs);
    while t0.elapsed() < budget {
        let opts = ClientOptions {
            streams: 1,
            blast: Some(blast.clone()),
            partial: Some(Partial {
                offset: 0,
                length: len,
            }),
            verify: false,
            timeout: PROBE_STALL,
            ..ClientOptions::default()
        };
        let s = match client
            .download(remote, local, &opts, Arc::new(Progress::new()))
            .await
        {
            Ok(s) => s,
            Err(e) => {
                let mut p = LossProbe::skipped(&format!("the blast probe failed: {e}"));
                p.rate_bps = rate;
                return p;
            }
        };
        let Some(b) = s.blast.as_ref() else {
            return LossProbe::skipped("the server answered the probe over TCP");
        };
        // Drops at our own socket are this host's, not the path's.
        let arrived = b.datagrams + b.socket_drops;
        sent += b.transmissions;
        lost += b.transmissions.saturating_sub(arrived);
        busy += b.seconds;
    }
    LossProbe {
        loss: (sent > 0).then(|| lost as f64 / sent as f64),
        transmissions: sent,
        lost,
        rate_bps: rate,
        seconds: busy,
        note: None,
    }
}
