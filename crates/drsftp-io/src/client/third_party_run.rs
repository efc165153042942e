//! The transfer phase of a third-party copy: STOR on the destination and RETR on the source driven to their
//! final replies together, with the checks pipelined behind them; perf markers feed [`Progress`] and a stall
//! timer, and any failure or cancel aborts whichever side still runs.

use std::collections::HashMap;
use std::future::Future;
use std::time::{Duration, Instant};

use drsftp_proto::client::{Event, Op, Outcome, TransferReport};

use super::control::Control;
use super::third_party::{at, End};
use super::{transfer, ClientError};
use crate::data::Progress;

/// What one side's next control event means here.
enum Step {
    Done(Box<TransferReport>),
    /// The transfer's final reply; the checks pipelined behind it are still due.
    Replied,
    Started,
    Perf(u32, u64),
    /// A `111 Range Marker`: the receiver has written these ranges.
    Marked(Vec<std::ops::Range<u64>>),
    Other,
}

fn step(end: End, c: &Control, ev: Result<Event, ClientError>) -> Result<Step, ClientError> {
    match ev {
        Ok(Event::Done(Outcome::Transferred(r))) => Ok(Step::Done(Box::new(r))),
        Ok(Event::Done(other)) => Err(at(end, c, format!("unexpected outcome {other:?}"))),
        Ok(Event::Failed(e)) => Err(at(end, c, e)),
        Err(e) => Err(at(end, c, e)),
        Ok(Event::TransferStarted(r)) => {
            tracing::debug!("{} started: {r}", end.name());
            Ok(Step::Started)
        }
        Ok(Event::TransferReplied(r)) => {
            tracing::debug!("{} transferred: {r}", end.name());
            Ok(Step::Replied)
        }
        Ok(Event::PerfMarker(p)) => Ok(Step::Perf(p.stripe_index, p.stripe_bytes)),
        Ok(Event::RangeMarker(r)) => Ok(Step::Marked(r)),
        Ok(Event::Notice(n)) => {
            tracing::info!("{} server: {n}", end.name());
            Ok(Step::Other)
        }
        Ok(ev) => {
            tracing::debug!("{}: {ev:?}", end.name());
            Ok(Step::Other)
        }
    }
}

/// A failed transfer; `touched`: the destination may have been written (anything but a STOR refused outright).
pub(super) struct Failed {
    pub(super) error: ClientError,
    pub(super) touched: bool,
}

impl From<ClientError> for Failed {
    fn from(error: ClientError) -> Self {
        Failed {
            error,
            touched: true,
        }
    }
}

/// What [`run`] saw: the bytes per stripe the perf markers last reported (when there was more than one
/// stripe), both ends' reports (with the checks pipelined behind their commands) and when the later of the two
/// transfer replies came (the end of the data phase).
pub(super) struct Ran {
    pub(super) stripes: Vec<u64>,
    pub(super) src: Box<TransferReport>,
    pub(super) dst: Box<TransferReport>,
    pub(super) data_end: Instant,
}

/// STOR on the destination, RETR on the source, both to their final replies (and the checks pipelined behind
/// them). A drsftp destination gets RETR on the source at once: its listeners (PASV/SPAS) are up already and
/// hold an early connection until the STOR runs, so the data starts half a round trip sooner. Any other server
/// is given a moment to accept or refuse the STOR first. Any failure or `cancel` aborts whichever side still runs.
pub(super) async fn run(
    s: &mut Control,
    src_path: &str,
    d: &mut Control,
    dst_path: &str,
    timeout: Duration,
    progress: &Progress,
    cancel: impl Future<Output = ()>,
) -> Result<Ran, Failed> {
    tokio::pin!(cancel);
    d.start(Op::Command(format!("STOR {dst_path}")))
        .map_err(|e| at(End::Destination, d, e))?;
    let mut d_done = None;
    let (mut s_end, mut d_end): (Option<Instant>, Option<Instant>) = (None, None);
    // Some servers answer a passive STOR only once the data connection is in: wait briefly, not for the 1xx.
    let wait = if d.session().features().drs() {
        Duration::ZERO
    } else {
        Duration::from_millis(300)
    };
    let first = tokio::time::timeout(wait, d.next_event()).await;
    if let Ok(ev) = first {
        match step(End::Destination, d, ev) {
            Ok(Step::Done(r)) => {
                d_end.get_or_insert_with(Instant::now);
                d_done = Some(r);
            }
            Ok(Step::Replied) => d_end = Some(Instant::now()),
            Ok(Step::Perf(..) | Step::Marked(_) | Step::Started | Step::Other) => {}
            // Refused before a 1xx: the destination was not touched.
            Err(error) => {
                return Err(Failed {
                    error,
                    touched: false,
                })
            }
        }
    }
    if let Err(e) = s.start(Op::Command(format!("RETR {src_path}"))) {
        transfer::abort(d).await;
        return Err(at(End::Source, s, e).into());
    }
    let mut s_done: Option<Box<TransferReport>> = None;
    let mut stripes: HashMap<u32, u64> = HashMap::new();
    let mut last_marker: Option<Instant> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let mut d_started = false;
    while s_done.is_none() || d_done.is_none() {
        let (end, r) = tokio::select! {
            ev = s.next_event(), if s_done.is_none() => {
                let data_failed = matches!(failure_code(&ev), Some(425 | 426));
                let r = step(End::Source, s, ev);
                if data_failed && d_done.is_none() {
                    // The source could not reach the destination's data port. That is usually the destination
                    // refusing the STOR and closing its listener; its reply, not the source's, is the cause.
                    if let Some(f) = destination_refusal(d, d_started, &mut d_done).await {
                        return Err(f);
                    }
                }
                (End::Source, r)
            }
            ev = d.next_event(), if d_done.is_none() => (End::Destination, step(End::Destination, d, ev)),
            _ = &mut cancel => {
                abort_running(s, s_done.is_none(), d, d_done.is_none()).await;
                return Err(ClientError::Invalid("interrupted: both transfers aborted".into()).into());
            }
            _ = tick.tick() => {
                // Only while a transfer command runs: the checks behind them have the sessions' reply deadline.
                let moving = s_end.is_none() || d_end.is_none();
                if moving && last_marker.is_some_and(|t| t.elapsed() >= timeout) {
                    abort_running(s, s_done.is_none(), d, d_done.is_none()).await;
                    return Err(ClientError::Stalled(timeout).into());
                }
                continue;
            }
        };
        let ended = |t: &mut Option<Instant>| {
            t.get_or_insert_with(Instant::now);
        };
        match r {
            Ok(Step::Done(rep)) => match end {
                End::Source => {
                    ended(&mut s_end);
                    s_done = Some(rep);
                }
                End::Destination => {
                    ended(&mut d_end);
                    d_done = Some(rep);
                }
            },
            Ok(Step::Replied) => match end {
                End::Source => ended(&mut s_end),
                End::Destination => ended(&mut d_end),
            },
            Ok(Step::Perf(stripe, bytes)) => {
                let before: u64 = stripes.values().sum();
                stripes.insert(stripe, bytes);
                let now: u64 = stripes.values().sum();
                if now > before {
                    last_marker = Some(Instant::now());
                    let cur = progress.bytes();
                    if now > cur {
                        progress.add(cur..now);
                    }
                } else if last_marker.is_none() {
                    last_marker = Some(Instant::now());
                }
            }
            Ok(Step::Marked(r)) if end == End::Destination => progress.mark(&r),
            Ok(Step::Started) => d_started |= end == End::Destination,
            Ok(Step::Marked(_) | Step::Other) => {}
            Err(e) => {
                let (s_run, d_run) = match end {
                    End::Source => (false, d_done.is_none()),
                    End::Destination => (s_done.is_none(), false),
                };
                abort_running(s, s_run, d, d_run).await;
                return Err(e.into());
            }
        }
    }
    // The receivers' perf markers per stripe: reported only when the copy was striped.
    let mut per: Vec<(u32, u64)> = stripes.into_iter().collect();
    per.sort_unstable();
    let now = Instant::now();
    Ok(Ran {
        stripes: if per.len() > 1 {
            per.into_iter().map(|(_, b)| b).collect()
        } else {
            vec![]
        },
        src: s_done.unwrap_or_default(),
        dst: d_done.unwrap_or_default(),
        data_end: s_end.unwrap_or(now).max(d_end.unwrap_or(now)),
    })
}

/// The reply code of a failed transfer event, if the server sent one.
fn failure_code(ev: &Result<Event, ClientError>) -> Option<u16> {
    match ev {
        Ok(Event::Failed(e)) => e.reply_code(),
        Err(e) => e.reply_code(),
        Ok(_) => None,
    }
}

/// The destination's own failure of its outstanding STOR, if it reports one within a short wait; `None` if it
/// reports nothing (or progress, or success, kept in `done`) in that time, so the source's failure stays the cause.
async fn destination_refusal(
    d: &mut Control,
    started: bool,
    done: &mut Option<Box<TransferReport>>,
) -> Option<Failed> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        let ev = tokio::time::timeout_at(deadline, d.next_event())
            .await
            .ok()?;
        match step(End::Destination, d, ev) {
            Err(error) => {
                return Some(Failed {
                    error,
                    touched: started,
                })
            }
            Ok(Step::Done(r)) => {
                *done = Some(r);
                return None;
            }
            Ok(Step::Perf(..) | Step::Marked(_) | Step::Started | Step::Replied | Step::Other) => {}
        }
    }
}

/// ABOR on the sides whose transfer command is still outstanding, concurrently.
async fn abort_running(s: &mut Control, s_run: bool, d: &mut Control, d_run: bool) {
    let a = async {
        if s_run {
            transfer::abort(s).await;
        }
    };
    let b = async {
        if d_run {
            transfer::abort(d).await;
        }
    };
    tokio::join!(a, b);
}
