//! Pipelined batches of whole-file downloads ([`Op::Batch`](super::Op::Batch), what globus-url-copy `-pp` does):
//! TYPE I, MODE E, (a new data channel: `OPTS RETR Parallelism=1,1,1;` and PORT), then `RETR` and `CKSM` for
//! each file (`REST <ranges>` before the RETR of a file the client holds part of), sent while earlier files'
//! replies are still due, at most [`BatchSpec::window`] RETRs unanswered.
//! The server runs them in order and keeps the MODE E data connection open between files (EOD without CLOSE,
//! GFD.20 §3.4.4), so a file costs no round trip of its own once the pipe is full.
//!
//! A refused RETR (a missing file) fails only that file: the batch goes on, and the server sends no data for it,
//! so the driver knows from [`Event::BatchStarted`] / [`Event::BatchRetr`] which file the next bytes on the data
//! connection belong to. Every server gets the batch pipelined (GridFTP servers queue commands behind a
//! transfer; drsftp serve bounds that queue at 256 lines, which the window keeps well below).

use std::collections::VecDeque;

use super::addr::port_command;
use super::plan::{Kind, Step};
use super::reply::Reply;
use super::session::{ClientSession, Running};
use super::types::{BatchSpec, Event, TransferMode};
use std::time::Instant;

/// Most files a batch keeps in flight whatever the spec says: two lines each stay far below the 256 lines a
/// drsftp server queues before it gives up on a session (`MAX_QUEUED_COMMANDS`).
pub const MAX_WINDOW: usize = 64;

impl ClientSession {
    /// The steps of a batch: see the module docs.
    pub(super) fn plan_batch(&self, spec: &BatchSpec) -> VecDeque<Step> {
        let mut s = self.prelude(Some(TransferMode::Extended));
        if let Some((line, on)) = self.drs_opts(false) {
            s.push_back(Step::Cmd(line.to_string(), Kind::OptsDrs(on)));
        }
        if let Some(addr) = spec.port {
            s.push_back(Step::Cmd(
                "OPTS RETR Parallelism=1,1,1;".into(),
                Kind::OptsRetr,
            ));
            s.push_back(Step::Cmd(port_command(addr), Kind::Port));
        }
        for (i, p) in spec.paths.iter().enumerate() {
            // MODE E blocks carry their offsets: a refused REST only costs the held bytes again.
            if let Some(h) = spec.held.get(i).filter(|h| !h.is_empty() && !spec.gated) {
                s.push_back(Step::Cmd(
                    format!("REST {h}"),
                    Kind::Rest { required: false },
                ));
            }
            s.push_back(Step::Cmd(format!("RETR {p}"), Kind::BatchRetr(i)));
            if let Some(alg) = &spec.checksum {
                s.push_back(Step::Cmd(
                    format!("CKSM {alg} 0 -1 {p}"),
                    Kind::BatchCksm(i),
                ));
            }
        }
        s
    }

    /// The final reply to a batch command: an event for the driver. Never ends the batch by itself.
    pub(super) fn answer_batch(&mut self, kind: Kind, reply: Reply) {
        let ev = match kind {
            Kind::BatchRetr(index) => {
                if let Some(run) = self.current.as_mut() {
                    run.started = false;
                }
                Event::BatchRetr { index, reply }
            }
            Kind::BatchStor(index) => {
                if let Some(run) = self.current.as_mut() {
                    run.started = false;
                }
                Event::BatchStored { index, reply }
            }
            Kind::BatchMfmt(index) => Event::BatchMtime { index, reply },
            Kind::BatchCksm(index) => Event::BatchChecksum {
                index,
                result: super::answer::digest_of(&reply).ok_or(reply),
            },
            _ => return,
        };
        self.events.push_back(ev);
    }
}

/// What a running batch keeps besides its steps: the window, and the gates of third-party batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct BatchRun {
    /// Most RETRs (or STORs) unanswered at once.
    pub(super) window: usize,
    /// [`BatchSpec::gated`]: files before this index are decided ([`ClientSession::decide_batch_file`]); the
    /// RETR of this one and later ones wait.
    pub(super) gate: Option<usize>,
    /// [`UploadBatchSpec::first_alone`](super::UploadBatchSpec): no STOR accepted with a 1xx yet, so only one
    /// STOR (with its ALLO) is in flight at a time.
    pub(super) alone: bool,
}

impl BatchRun {
    pub(super) fn download(spec: &BatchSpec) -> Self {
        BatchRun {
            window: spec.window,
            gate: spec.gated.then_some(0),
            alone: false,
        }
    }

    pub(super) fn upload(spec: &super::UploadBatchSpec) -> Self {
        BatchRun {
            window: spec.window,
            gate: None,
            alone: spec.first_alone,
        }
    }
}

/// In a batch, may `next` go out now, with `in_flight` RETRs (or STORs) unanswered and a window of `window`?
/// An upload batch's ALLO goes with its STOR, so it waits for the window too.
pub(super) fn may_send(next: Kind, in_flight: usize, window: usize) -> bool {
    match next {
        Kind::BatchRetr(_) => in_flight < window.clamp(1, MAX_WINDOW),
        Kind::BatchStor(_) | Kind::Allo => {
            in_flight < window.clamp(1, super::upbatch::MAX_UPLOAD_WINDOW)
        }
        _ => true,
    }
}

/// May the batch's next command `next` go out now? The window; an upload batch's files wait for the data
/// channel (a refused PASV, then EPSV, must not leave STORs behind it with no channel); a gated RETR waits for
/// its decision; while `alone`, a second STOR waits for the first one's answer.
pub(super) fn may_go(run: &Running, b: BatchRun, next: Kind) -> bool {
    let transfers = run
        .inflight
        .iter()
        .filter(|(_, k)| is_batch_transfer(*k))
        .count();
    let channel_due = run
        .inflight
        .iter()
        .any(|(_, k)| matches!(k, Kind::Pasv | Kind::Epsv));
    let stor = matches!(next, Kind::Allo | Kind::BatchStor(_));
    let gated = matches!((next, b.gate), (Kind::BatchRetr(i), Some(g)) if i >= g);
    may_send(next, transfers, b.window)
        && !(channel_due && stor)
        && !gated
        && !(b.alone && stor && transfers > 0)
}

impl ClientSession {
    /// A gated batch ([`BatchSpec::gated`]): decides its next undecided file, in order. `send`: its RETR and
    /// CKSM may go out (the destination accepted its STOR); otherwise they are dropped and never sent. Returns
    /// the index decided, `None` if no gated batch runs or every file is decided already.
    pub fn decide_batch_file(&mut self, now: Instant, send: bool) -> Option<usize> {
        let run = self.current.as_mut()?;
        let b = run.batch.as_mut()?;
        let i = b.gate?;
        let planned = run
            .steps
            .iter()
            .any(|s| matches!(s, Step::Cmd(_, Kind::BatchRetr(j)) if *j == i));
        if !planned {
            return None;
        }
        b.gate = Some(i + 1);
        if !send {
            run.steps.retain(
                |s| !matches!(s, Step::Cmd(_, Kind::BatchRetr(j) | Kind::BatchCksm(j)) if *j == i),
            );
        }
        self.advance(now);
        Some(i)
    }
}

/// A file transfer command of a batch (its 1xx says the file's data moves now).
pub(super) fn is_batch_transfer(k: Kind) -> bool {
    matches!(k, Kind::BatchRetr(_) | Kind::BatchStor(_))
}
