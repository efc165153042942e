//! Where each reply the client session reads goes: the greeting, replies owed to ended operations, `126 SBUF`
//! notices and answers, a transfer's markers (111 ranges, 112 performance, 126 stripe counts), the replies an
//! ABOR waits for, preliminaries that start a transfer or a batch file, and final replies, which `answer.rs`
//! interprets for the command they answer.

use super::blast;
use super::drs::parse_sbuf;
use super::markers::{parse_perf_marker, parse_range_marker, parse_stripe_counts};
use super::plan::Kind;
use super::reply::Reply;
use super::session::{ClientSession, Phase};
use super::types::*;
use std::time::Instant;

impl ClientSession {
    pub(super) fn on_reply(&mut self, now: Instant, reply: Reply) {
        if self.phase == Phase::AwaitGreeting {
            match reply.code {
                120 => {}
                220 => {
                    self.banner = Some(reply);
                    self.phase = Phase::Ready;
                    // An AUTH TLS sent before the greeting still waits for its reply.
                    let waiting = self
                        .current
                        .as_ref()
                        .is_some_and(|r| !r.inflight.is_empty());
                    self.deadline = waiting.then(|| now + self.cfg.reply_timeout);
                    self.advance(now);
                }
                _ => self.die(ClientError::Refused {
                    command: "(connect)".into(),
                    reply,
                }),
            }
            return;
        }
        if self.swallowed(&reply) {
            return;
        }
        if reply.code == 126 {
            if let Some((id, size)) = parse_sbuf(reply.text()) {
                // drsFTP notice from a receiving server; ignored unless we opted in (seed 000 §4.4).
                if self.drs.on && self.in_file_transfer() {
                    self.events.push_back(Event::SbufNotice { id, size });
                }
                return;
            }
        }
        if self.drs.outstanding() && !reply.is_preliminary() {
            // A CKSM pipelined behind the transfer was queued on the server before any SBUF sent during the
            // transfer: once the transfer has ended, the CKSM's reply comes before a late SBUF's refusal.
            let waiting = self.current.as_ref().is_some_and(|r| {
                r.head_is(|k| {
                    matches!(
                        k,
                        Kind::Transfer { .. } | Kind::TrailingSize | Kind::TrailingCksm
                    )
                })
            });
            if let Some(ev) = self.drs.take_answer(&reply, waiting) {
                self.events.push_back(ev);
                return;
            }
        }
        let Some(run) = self.current.as_mut() else {
            if reply.code == 421 {
                self.phase = Phase::Dead;
            }
            self.events.push_back(Event::Unsolicited(reply));
            return;
        };
        // Intermediate GridFTP replies during a transfer.
        match reply.code {
            111 => {
                if let Some(r) = parse_range_marker(&reply) {
                    run.report.ranges.extend(r.iter().cloned());
                    self.events.push_back(Event::RangeMarker(r));
                }
                return;
            }
            112 => {
                if let Some(p) = parse_perf_marker(&reply) {
                    run.report.last_perf = Some(p.clone());
                    self.events.push_back(Event::PerfMarker(p));
                }
                return;
            }
            126 => {
                if let Some(c) = parse_stripe_counts(&reply) {
                    run.report.stripe_counts = Some(c.clone());
                    self.events.push_back(Event::StripeCounts(c));
                }
                return;
            }
            _ => {}
        }
        if let Some(left) = run.abort_pending {
            if reply.is_preliminary() {
                return;
            }
            // The final reply of a command in flight (the transfer's own, 426 or the end it had reached), or
            // the ABOR answer. A transfer refused for its own reason (not the 426 ABOR causes) is what the
            // operation fails with.
            if let Some((cmd, Kind::Transfer { .. })) = run.inflight.pop_front() {
                if reply.is_error() && reply.code != 426 && run.abort_refusal.is_none() {
                    run.abort_refusal = Some(ClientError::Refused {
                        command: cmd,
                        reply: reply.clone(),
                    });
                }
            }
            let left = left.saturating_sub(1);
            if left == 0 {
                let e = run.abort_refusal.take().unwrap_or(ClientError::Aborted);
                self.finish(Err(e));
            } else {
                run.abort_pending = Some(left);
                self.deadline = Some(now + self.cfg.reply_timeout);
            }
            return;
        }
        let Some((cmd, kind)) = run.inflight.front().cloned() else {
            self.events.push_back(Event::Unsolicited(reply));
            return;
        };
        if reply.is_preliminary() {
            if let Kind::BatchRetr(i) | Kind::BatchStor(i) = kind {
                run.started = true;
                if let Some(b) = run.batch.as_mut() {
                    // The data channel is in use: later STORs may queue behind this one.
                    b.alone = false;
                }
                self.deadline = None;
                self.events.push_back(Event::BatchStarted(i));
                // A first STOR held the others back (`first_alone`): they may go now.
                self.advance(now);
                return;
            }
            if let Kind::Transfer { .. } = kind {
                if let Some(b) = run.blast.as_mut() {
                    if b.start.is_none() {
                        b.start = blast::parse_start(&reply);
                    }
                }
                if !run.started {
                    run.started = true;
                    self.deadline = None;
                    self.events.push_back(Event::TransferStarted(reply));
                }
            }
            return;
        }
        run.inflight.pop_front();
        if let Some(result) = self.answer(cmd, kind, reply) {
            return self.finish(result);
        }
        // The next command in flight has its own deadline from now; with none, `advance` arms one if it sends.
        let more = self
            .current
            .as_ref()
            .is_some_and(|r| !r.inflight.is_empty());
        self.deadline = more.then(|| now + self.cfg.reply_timeout);
        self.advance(now);
    }
}
