//! What `drsftp copy --json` prints for one file: the transfer summary as one JSON object (with `phases`, where
//! the time went), and the object that stands for it when the copy fails.

use drsftp_io::client::{AutoChoice, ClientOptions, TransferSummary};
use serde_json::{json, Value};

use super::Plan;

/// Seconds spent before and around the transfer proper, for `phases`.
#[derive(Debug, Default)]
pub(super) struct Timing {
    /// Connect, TLS, USER/PASS, FEAT.
    pub(super) login: Option<f64>,
    /// From logged in to the transfer's first command: `-p auto`'s start choice, SIZE, the path profile.
    pub(super) prepare: Option<f64>,
    /// From connect to the transfer done, verified and committed (QUIT and process start not included).
    pub(super) total: Option<f64>,
}

/// The object printed instead of a summary when the copy (or a job) could not be done.
pub(super) fn error(e: &anyhow::Error, source: &str, destination: &str) -> Value {
    json!({"error": format!("{e:#}"), "source": source, "destination": destination})
}

/// The summary of a finished copy.
pub(super) fn summary(
    plan: &Plan,
    opts: &ClientOptions,
    s: &TransferSummary,
    auto: Option<&AutoChoice>,
    timing: &Timing,
) -> Value {
    let ph = s.blast.as_ref().map(|b| b.phases).unwrap_or_default();
    json!({
        "source": plan.source(),
        "destination": plan.destination(),
        "bytes": s.bytes,
        "resumed_bytes": s.resumed,
        "seconds": s.seconds,
        "mbps": s.mbps(),
        "streams": s.streams,
        "stripe_bytes": s.stripes,
        "mode": match plan {
            Plan::ThirdParty { .. } => "third-party".to_string(),
            _ => s.mode.letter().to_string(),
        },
        "wire_mode": s.mode.letter().to_string(),
        "transport": s.transport,
        "transport_choice": s.transport_choice.as_ref().map(|c| json!({
            "chosen": c.chosen,
            "reason": c.reason,
            "tcp_bytes": c.tcp_bytes,
            // The start came from path memory (an earlier default copy's reading) this many seconds old.
            "learned_age_seconds": c.learned_age,
        })),
        "setup_seconds": s.setup_seconds,
        // Where the time went, in order (seconds; null when it does not apply). `transfer` is the command to
        // the end of data (setup, first datagram, ramp, first pass and tail are parts of it); the blast
        // phases are the receiver's, so they are known for downloads.
        "phases": {
            "login": timing.login,
            "prepare": timing.prepare,
            "setup": s.setup_seconds,
            "first_datagram": ph.first_datagram,
            "ramp": ph.ramp,
            "first_pass": ph.first_pass,
            "final_rate_mbps": ph.final_rate_pps.zip(s.blast.as_ref()).map(|(r, b)| {
                r * (b.bytes as f64 / b.packets.max(1) as f64) * 8.0 / 1e6
            }),
            "tail": ph.tail,
            "eod": s.eod_seconds,
            "transfer": s.seconds,
            "verify": s.verify_seconds,
            "total": timing.total,
        },
        "duplicates": s.duplicates,
        "rejected": s.rejected,
        "blast": s.blast.as_ref().map(|b| json!({
            "packets": b.packets,
            "datagrams": b.datagrams,
            "resent": b.resent,
            "acks": b.acks,
            "foreign": b.foreign,
            "socket_drops": b.socket_drops,
            "gso": b.gso,
            "gro": b.gro,
            "aead": b.aead,
            "auth_failed": b.rejects.auth_failed,
            "data_seconds": b.seconds,
            "resumed_bytes": b.resumed,
        })),
        "buffer_policy": opts.buffer.to_string(),
        "buffer_bytes": s.peak_buffer,
        "window_peak_bytes": s.peak_window,
        "verified": s.verified,
        "checksum": s.checksum.as_ref().map(|(a, h)| format!("{}:{h}", a.to_ascii_lowercase())),
        "notices": s.notices,
        "streams_auto": auto.is_some(),
        "auto_reason": auto.map(|a| a.start.reason.clone()),
        "auto_rtt_ms": auto.map(|a| a.rtt.as_secs_f64() * 1e3),
        "auto_peak_streams": drsftp_io::client::peak_and_final(&s.stream_actions).map(|p| p.0),
        "auto_final_streams": drsftp_io::client::peak_and_final(&s.stream_actions).map(|p| p.1),
        "auto_actions": s.stream_actions.iter().map(|e| json!({
            "t_s": e.at.as_secs_f64(),
            "action": match e.action {
                drsftp_tune::StreamAction::Add(k) => format!("add {k}"),
                drsftp_tune::StreamAction::Retire(k) => format!("retire {k}"),
            },
            "streams": e.streams,
        })).collect::<Vec<_>>(),
    })
}
