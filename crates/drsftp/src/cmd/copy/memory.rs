//! Path memory for `--transport auto` (docs/auto-transport.md): after a default copy, what it learned about the
//! path's random loss goes into the path-profile store (`profile::LearnedPath`, beside any calibration), and the
//! next default copy to the same `host:port` starts from it: on blast if the path was lossy, on TCP (watched) if
//! clean, and on TCP without trying blast if blast was found blocked (for an hour). A `-r`/`--files-from` job
//! records what its most telling file learned. Off with `--no-path-memory` or `DRSFTP_NO_PATH_MEMORY=1`.

use drsftp_io::blast::BlastReport;
use drsftp_io::client::profile::{now_unix, LearnedPath, PathProfile, ProfileStore};
use drsftp_io::client::{TransferSummary, FELL_BACK};

use crate::url::FtpUrl;

/// Fewer blast transmissions than this say too little about a loss of 0.05 % (under one loss expected).
const MIN_TRANSMISSIONS: u64 = 4000;

/// The learned reading in force for `url`'s server: fresh, and newer than the calibrated profile (a calibration
/// after the copy measured the path more carefully).
pub(super) fn load(url: &FtpUrl, profile: Option<&PathProfile>) -> Option<LearnedPath> {
    let store = ProfileStore::open(None)?;
    let l = match store.learned(&url.authority()) {
        Ok(l) => l?,
        Err(e) => {
            tracing::debug!("no path memory: {e}");
            return None;
        }
    };
    let newer = profile.is_none_or(|p| l.timestamp >= p.timestamp);
    (l.fresh(now_unix()) && newer).then_some(l)
}

/// Records what the copy `s` learned about `url`'s path, if anything; failures are logged, not fatal (the copy
/// itself succeeded).
pub(super) fn record(url: &FtpUrl, s: &TransferSummary, upload: bool) {
    record_reading(learned(&url.authority(), s, upload, now_unix()));
}

/// Records what a job's transfers to or from one server (`host_port`) learned: of the files that taught
/// something, the largest one's reading (the longest look at the path; blast's loss over more datagrams).
pub(super) fn record_job<'a>(
    host_port: &str,
    summaries: impl IntoIterator<Item = &'a TransferSummary>,
    upload: bool,
) {
    record_reading(job_reading(host_port, summaries, upload, now_unix()));
}

/// [`record_job`]'s choice of reading, at `now`.
fn job_reading<'a>(
    host_port: &str,
    summaries: impl IntoIterator<Item = &'a TransferSummary>,
    upload: bool,
    now: u64,
) -> Option<LearnedPath> {
    summaries
        .into_iter()
        .filter_map(|s| Some((s.bytes, learned(host_port, s, upload, now)?)))
        .max_by_key(|(bytes, _)| *bytes)
        .map(|(_, l)| l)
}

fn record_reading(l: Option<LearnedPath>) {
    let Some(l) = l else {
        return;
    };
    if let Some(store) = ProfileStore::open(None) {
        if let Err(e) = store.learn(&l) {
            tracing::warn!("path memory not recorded: {e}");
        }
    }
}

/// The reading a finished auto copy gives: blast's measured loss when blast moved data, else the TCP rule's
/// verdict (a clean path, or random loss) when it judged; "blast blocked" when blast was tried and fell back;
/// nothing when the rule said nothing of the path (a standing queue, a transfer too short to judge).
pub(super) fn learned(
    host_port: &str,
    s: &TransferSummary,
    upload: bool,
    now: u64,
) -> Option<LearnedPath> {
    let c = s.transport_choice.as_ref()?;
    let min_rtt_ms = c.judged.map_or(0.0, |j| j.min_rtt.as_secs_f64() * 1e3);
    if c.reason.ends_with(FELL_BACK) {
        // Nothing is known of the loss (blast never ran); the rate and RTT merge from what was known.
        return Some(LearnedPath {
            host_port: host_port.to_string(),
            lossy: false,
            loss: 0.0,
            loss_from: "blast blocked".into(),
            rate_bps: 0.0,
            min_rtt_ms,
            timestamp: now,
            blast_blocked: true,
        });
    }
    let reading = match (s.transport, s.blast.as_ref()) {
        ("udp", Some(b)) => {
            let (loss, rate) = blast_loss(b, upload)?;
            (loss, "blast", rate)
        }
        _ => {
            let j = c.judged?;
            let from = if c.chosen == "udp+tcp" {
                "blast probe"
            } else if upload {
                "tcp retransmitted"
            } else {
                "tcp out-of-order"
            };
            // A receiver's out-of-order share overstates the loss; the rule's verdict is what decides.
            let lossy = j.random_loss;
            return Some(LearnedPath {
                host_port: host_port.to_string(),
                lossy,
                loss: j.marks_share,
                loss_from: from.into(),
                rate_bps: j.rate_bps,
                min_rtt_ms,
                timestamp: now,
                blast_blocked: false,
            });
        }
    };
    let (loss, from, rate) = reading;
    Some(LearnedPath {
        host_port: host_port.to_string(),
        lossy: loss >= drsftp_tune::PROFILE_LOSSY,
        loss,
        loss_from: from.into(),
        rate_bps: rate,
        min_rtt_ms,
        timestamp: now,
        blast_blocked: false,
    })
}

/// Blast's loss (a fraction) and delivery rate (bit/s) from its report: at a receiver, transmissions that never
/// arrived (our own socket's drops are this host's, not the path's); at a sender, retransmissions per data
/// datagram sent. Includes what blast's own probing lost at a full queue, so a clean path reads a little above
/// zero; `None` with too few datagrams to tell.
fn blast_loss(b: &BlastReport, upload: bool) -> Option<(f64, f64)> {
    if b.transmissions < MIN_TRANSMISSIONS {
        return None;
    }
    let lost = if upload {
        b.resent
    } else {
        b.transmissions.saturating_sub(b.datagrams + b.socket_drops)
    };
    let rate = if b.seconds > 0.0 {
        (b.bytes - b.resumed.min(b.bytes)) as f64 * 8.0 / b.seconds
    } else {
        0.0
    };
    Some((lost as f64 / b.transmissions as f64, rate))
}

#[cfg(test)]
mod tests {
    use super::*;
    use drsftp_io::client::TransportChoice;
    use std::time::Duration;

    fn summary(
        transport: &'static str,
        blast: Option<BlastReport>,
        c: TransportChoice,
    ) -> TransferSummary {
        TransferSummary {
            bytes: 1 << 30,
            resumed: 0,
            seconds: 20.0,
            streams: 1,
            mode: drsftp_io::client::TransferMode::Stream,
            peak_buffer: 0,
            peak_window: 0,
            buffer_command: None,
            checksum: None,
            verified: true,
            notices: vec![],
            transport,
            duplicates: 0,
            rejected: 0,
            blast,
            traces: vec![],
            stream_actions: vec![],
            stripes: vec![],
            transport_choice: Some(c),
            setup_seconds: None,
            eod_seconds: None,
            verify_seconds: None,
        }
    }

    fn choice(
        chosen: &'static str,
        reason: &str,
        judged: Option<drsftp_tune::Judged>,
    ) -> TransportChoice {
        TransportChoice {
            chosen,
            reason: reason.into(),
            tcp_bytes: 0,
            judged,
            learned_age: None,
        }
    }

    fn report(transmissions: u64, datagrams: u64) -> BlastReport {
        BlastReport {
            bytes: 1 << 30,
            transmissions,
            datagrams,
            seconds: 20.0,
            ..BlastReport::default()
        }
    }

    #[test]
    fn blast_loss_decides_lossy_or_clean() {
        let j = drsftp_tune::Judged {
            random_loss: true,
            marks_share: 0.3,
            min_rtt: Duration::from_millis(100),
            rate_bps: 5e7,
        };
        let s = summary(
            "udp",
            Some(report(800_000, 792_000)),
            choice("tcp+udp", "random loss", Some(j)),
        );
        let l = learned("h:2811", &s, false, 77).unwrap();
        assert!(l.lossy && (l.loss - 0.01).abs() < 1e-9, "{l:?}");
        assert_eq!(
            (l.loss_from.as_str(), l.min_rtt_ms, l.timestamp),
            ("blast", 100.0, 77)
        );
        assert!((l.rate_bps - (1u64 << 30) as f64 * 8.0 / 20.0).abs() < 1.0);
        // A blast run that lost under 0.05 % writes "clean": the next copy goes back to TCP.
        let s = summary(
            "udp",
            Some(report(800_000, 799_900)),
            choice("udp", "path memory", None),
        );
        assert!(!learned("h:2811", &s, false, 77).unwrap().lossy);
        // Too few datagrams to tell.
        let s = summary("udp", Some(report(1000, 990)), choice("udp", "x", None));
        assert_eq!(learned("h:2811", &s, false, 77), None);
    }

    #[test]
    fn a_job_records_its_largest_telling_file() {
        let small_blast = {
            let mut s = summary(
                "udp",
                Some(report(40_000, 39_600)),
                choice("tcp+udp", "random loss", None),
            );
            s.bytes = 20 << 20;
            s
        };
        let big_blast = summary(
            "udp",
            Some(report(800_000, 796_000)),
            choice("udp", "an earlier file", None),
        );
        // The largest file taught nothing (too short to judge, no choice at all): it is passed over.
        let mut silent = summary("tcp", None, choice("tcp", "standing queue", None));
        silent.bytes = 4 << 30;
        let l = job_reading("h:2811", [&small_blast, &silent, &big_blast], false, 9).unwrap();
        assert!(
            (l.loss - 0.005).abs() < 1e-9,
            "the 1 GiB file's reading: {l:?}"
        );
        assert_eq!(job_reading("h:2811", [&silent], false, 9), None);
        assert_eq!(job_reading("h:2811", [], false, 9), None);
    }

    #[test]
    fn tcp_verdicts_and_fallbacks() {
        let clean = drsftp_tune::Judged {
            random_loss: false,
            marks_share: 0.0001,
            min_rtt: Duration::from_millis(20),
            rate_bps: 9e7,
        };
        let s = summary("tcp", None, choice("tcp", "clean path: ...", Some(clean)));
        let l = learned("h:2811", &s, true, 5).unwrap();
        assert!(!l.lossy);
        assert_eq!(l.loss_from, "tcp retransmitted");
        // No verdict on the path (a queue, too short): nothing learned.
        let s = summary("tcp", None, choice("tcp", "standing queue", None));
        assert_eq!(learned("h:2811", &s, false, 5), None);
        // Blast blocked: that is what is learned, and nothing about loss.
        let s = summary(
            "tcp",
            None,
            choice("tcp", &format!("..., {FELL_BACK}"), Some(clean)),
        );
        let l = learned("h:2811", &s, false, 5).unwrap();
        assert!(l.blast_blocked && !l.lossy, "{l:?}");
        assert_eq!((l.loss_from.as_str(), l.rate_bps), ("blast blocked", 0.0));
        // Not under auto: nothing.
        let mut s = summary("tcp", None, choice("tcp", "x", Some(clean)));
        s.transport_choice = None;
        assert_eq!(learned("h:2811", &s, false, 5), None);
    }
}
