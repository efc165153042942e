//! `-p auto` on a download: the server is the MODE E sender and runs the controller, so the client only sees its
//! decisions as connections arriving and ending with EOD. [`StreamWatch`] samples the receiver's live stream
//! count (`Progress::streams`: connections carrying data now) and records every change as an [`AutoEvent`], the
//! same shape the upload path reports from its own controller. The ramp-down when the file runs out (every
//! connection ends within moments of the others) is not a decision and is left out.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drsftp_tune::StreamAction;
use tokio::task::JoinHandle;

use crate::data::{AutoEvent, Progress};

/// How often the stream count is sampled.
const PERIOD: Duration = Duration::from_millis(25);
/// Decreases this close to the end of the data are the file running out, not retirements.
const TAIL: Duration = Duration::from_millis(300);

/// A running sampler; [`StreamWatch::finish`] stops it and returns the changes.
#[derive(Debug)]
pub(crate) struct StreamWatch {
    events: Arc<Mutex<Vec<AutoEvent>>>,
    begin: Instant,
    task: JoinHandle<()>,
}

impl StreamWatch {
    pub(crate) fn start(progress: Arc<Progress>) -> Self {
        let events = Arc::new(Mutex::new(Vec::new()));
        let begin = Instant::now();
        let ev = Arc::clone(&events);
        let task = tokio::spawn(async move {
            let mut last = 0u64;
            let mut tick = tokio::time::interval(PERIOD);
            loop {
                tick.tick().await;
                let n = progress.streams();
                if n != last {
                    let action = if n > last {
                        StreamAction::Add((n - last) as u32)
                    } else {
                        StreamAction::Retire((last - n) as u32)
                    };
                    ev.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(AutoEvent {
                            at: begin.elapsed(),
                            action,
                            streams: n as u32,
                        });
                    last = n;
                }
            }
        });
        StreamWatch {
            events,
            begin,
            task,
        }
    }

    /// Stop sampling (call when the data is complete) and return the changes without the final ramp-down.
    pub(crate) fn finish(self) -> Vec<AutoEvent> {
        self.task.abort();
        let mut v = std::mem::take(&mut *self.events.lock().unwrap_or_else(|p| p.into_inner()));
        // The data ended when the last connection did (the transfer's reply may come later: the final CKSM
        // rides behind it); without that, now.
        let end = match v.last() {
            Some(e) if e.streams == 0 => e.at,
            _ => self.begin.elapsed(),
        };
        while v
            .last()
            .is_some_and(|e| matches!(e.action, StreamAction::Retire(_)) && e.at + TAIL >= end)
        {
            v.pop();
        }
        v
    }
}

/// Peak and final stream counts over `events` (`None` without events).
pub fn peak_and_final(events: &[AutoEvent]) -> Option<(u32, u32)> {
    let peak = events.iter().map(|e| e.streams).max()?;
    Some((peak, events.last()?.streams))
}
