//! `--transport auto` in multi-file jobs (docs/auto-transport.md "Trees and lists"): which files may use blast
//! (those of at least [`AUTO_BLAST_MIN`]; smaller ones stay on TCP, in the pipelined batches) and the verdict one
//! file's transfer leaves for the next, so the files of a job do not each learn the path again.

use std::sync::Mutex;

use super::FileTask;
use crate::client::{CarriedVerdict, ClientOptions, TransportChoice, FELL_BACK};

/// Smallest file that may go over blast under auto: below it, blast's set-up (a round trip and the rate ramp,
/// about a second at 200 ms) and the watch's 2 s warm-up cost more than TCP's batches lose to loss.
pub const AUTO_BLAST_MIN: u64 = 16 << 20;

/// This file's `--transport auto` settings: small files (or of unknown size) get TCP with the reason; larger
/// ones the job's verdict so far, if there is one.
pub(super) fn for_file(
    o: &mut ClientOptions,
    size: Option<u64>,
    verdict: &Mutex<Option<CarriedVerdict>>,
) {
    let Some(a) = o.auto_transport.as_mut() else {
        return;
    };
    match size {
        Some(s) if s >= AUTO_BLAST_MIN => {
            a.carried = verdict.lock().ok().and_then(|v| v.clone());
        }
        _ => {
            a.carried = Some(CarriedVerdict::Tcp(format!(
                "a file below {} MiB stays on TCP: blast's set-up would not pay",
                AUTO_BLAST_MIN >> 20
            )));
        }
    }
}

/// What `choice` (file `task`'s transfer's, `TransferSummary::transport_choice`) teaches the rest of the job: random loss seen (a switch) starts the
/// next large files on blast; blast found blocked keeps them on TCP. A clean verdict is not carried: watching
/// costs nothing, and the path may change.
pub(super) fn learn(
    verdict: &Mutex<Option<CarriedVerdict>>,
    task: &FileTask,
    choice: Option<&TransportChoice>,
) {
    let Some(c) = choice else {
        return;
    };
    let learned = match c.chosen {
        "tcp+udp" => CarriedVerdict::Blast(format!(
            "an earlier file of this job ({}) showed random loss and moved to blast",
            task.src
        )),
        "tcp" if c.reason.contains(FELL_BACK) => CarriedVerdict::Tcp(format!(
            "an earlier file of this job ({}) found UDP blast blocked",
            task.src
        )),
        // A blast probe's verdicts: each file need not probe again.
        "udp" if c.judged.is_some_and(|j| j.random_loss) => CarriedVerdict::Blast(format!(
            "an earlier file of this job ({}) showed random loss on blast",
            task.src
        )),
        "udp+tcp" => CarriedVerdict::Clean,
        _ => return,
    };
    if let Ok(mut v) = verdict.lock() {
        // The first lesson stands: a later file started from it says so already.
        v.get_or_insert(learned);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::job::Loc;
    use crate::client::AutoTransport;

    fn task() -> FileTask {
        FileTask {
            src: Loc::Remote("/d/a.bin".into()),
            dst: Loc::Local("/tmp/a.bin".into()),
            size: Some(64 << 20),
            mtime: None,
        }
    }

    fn choice(chosen: &'static str, reason: &str) -> TransportChoice {
        TransportChoice {
            chosen,
            reason: reason.into(),
            tcp_bytes: 0,
            judged: None,
            learned_age: None,
        }
    }

    fn auto() -> ClientOptions {
        ClientOptions {
            auto_transport: Some(AutoTransport::default()),
            ..ClientOptions::default()
        }
    }

    #[test]
    fn a_switch_starts_the_next_large_files_on_blast_and_small_ones_stay() {
        let v = Mutex::new(None);
        let mut o = auto();
        for_file(&mut o, Some(64 << 20), &v);
        assert_eq!(o.auto_transport.as_ref().unwrap().carried, None);
        learn(&v, &task(), Some(&choice("tcp", "clean path: ...")));
        assert_eq!(*v.lock().unwrap(), None, "a clean verdict is not carried");
        learn(&v, &task(), Some(&choice("tcp+udp", "random loss (...)")));
        for_file(&mut o, Some(AUTO_BLAST_MIN), &v);
        let start = o.auto_transport.as_ref().unwrap().start(true, true);
        assert!(
            matches!(&start, drsftp_tune::StartChoice::Blast(w) if w.contains("/d/a.bin") && w.contains("random loss")),
            "{start:?}"
        );
        for_file(&mut o, Some(AUTO_BLAST_MIN - 1), &v);
        let start = o.auto_transport.as_ref().unwrap().start(true, true);
        assert!(
            matches!(&start, drsftp_tune::StartChoice::Tcp(w) if w.contains("below 16 MiB")),
            "{start:?}"
        );
        // Without blast at the peer a carried blast verdict falls to the profile rule.
        for_file(&mut o, Some(64 << 20), &v);
        let start = o.auto_transport.as_ref().unwrap().start(false, true);
        assert!(
            matches!(start, drsftp_tune::StartChoice::Tcp(_)),
            "{start:?}"
        );
    }

    #[test]
    fn blast_found_blocked_keeps_the_rest_of_the_job_on_tcp() {
        let v = Mutex::new(None);
        let why = format!("blast was chosen (...), but UDP looks blocked; {FELL_BACK}");
        learn(&v, &task(), Some(&choice("tcp", &why)));
        let mut o = auto();
        o.auto_transport.as_mut().unwrap().profile_loss = Some(0.01);
        for_file(&mut o, Some(1 << 30), &v);
        let start = o.auto_transport.as_ref().unwrap().start(true, true);
        assert!(
            matches!(&start, drsftp_tune::StartChoice::Tcp(w) if w.contains("blocked")),
            "{start:?}"
        );
    }

    #[test]
    fn a_probe_verdict_spares_the_next_files_the_probe() {
        // Clean: the next large file starts on TCP (watched), and knows the path, so it does not probe.
        let v = Mutex::new(None);
        let mut o = auto();
        assert!(!o.auto_transport.as_ref().unwrap().knows_path());
        learn(&v, &task(), Some(&choice("udp+tcp", "clean path: ...")));
        for_file(&mut o, Some(1 << 30), &v);
        let a = o.auto_transport.as_ref().unwrap();
        assert_eq!(a.start(true, true), drsftp_tune::StartChoice::TcpWatched);
        assert!(a.knows_path());
        // Random loss seen by the probe: the next large file starts on blast.
        let v = Mutex::new(None);
        let mut lossy = choice("udp", "the blast probe saw random loss: ...");
        lossy.judged = Some(drsftp_tune::Judged {
            random_loss: true,
            marks_share: 0.01,
            min_rtt: std::time::Duration::from_millis(100),
            rate_bps: 4e8,
        });
        learn(&v, &task(), Some(&lossy));
        for_file(&mut o, Some(1 << 30), &v);
        let start = o.auto_transport.as_ref().unwrap().start(true, true);
        assert!(
            matches!(&start, drsftp_tune::StartChoice::Blast(w) if w.contains("random loss")),
            "{start:?}"
        );
        // A blast start for other reasons (profile, memory) teaches the job nothing new.
        let v = Mutex::new(None);
        learn(&v, &task(), Some(&choice("udp", "path memory: ...")));
        assert_eq!(*v.lock().unwrap(), None);
    }
}
